/*
 * test_baselines.c — the vendor baselines compute the workload's operation:
 * every OpenBLAS, oneDNN and plain-C output equals the reference
 * interpreter's on the same seeded inputs (those of ts_rt_args_create) for
 * matmul in every transpose and float32/bfloat16/int8, batch_matmul, dense
 * with and without bias, conv2d NCHW and NHWC with stride, padding,
 * dilation and groups, depthwise conv2d, pooling, softmax and layer_norm;
 * what a vendor cannot do is "not applicable" with a reason; the timing
 * fields are consistent, bad options and workloads whose spec and
 * parameters disagree are refused, and library thread settings are
 * restored.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"

static ts_bench_options fast_options(int threads) {
  ts_bench_options o = ts_bench_options_default();
  o.threads = threads;
  o.eval = (ts_eval_config){
      .number = 1, .repeat = 2, .min_repeat_ms = 0, .warmup = 1};
  o.seed = 7;
  return o;
}

static ts_workload *workload(const char *spec) {
  ts_workload *w = NULL;
  ts_error err;
  ts_error_clear(&err);
  int rc = ts_workload_from_spec(spec, &w, &err);
  if (rc) print_message("workload '%s': %s\n", spec, err.msg);
  assert_int_equal(rc, TS_OK);
  return w;
}

/* The interpreter's output on the inputs ts_rt_args_create gives for seed:
 * the arguments, outputs computed. */
static ts_rt_args *reference(const ts_workload *w, uint64_t seed) {
  int n = ts_func_n_params(w->func);
  ts_rt_arg_spec specs[8];
  assert_true(n <= 8);
  for (int i = 0; i < n; i++) {
    const ts_buffer *b = ts_func_param(w->func, i);
    memset(&specs[i], 0, sizeof specs[i]);
    specs[i].dtype = ts_buffer_dtype(b);
    specs[i].ndim = ts_buffer_ndim(b);
    for (int d = 0; d < specs[i].ndim; d++)
      specs[i].shape[d] = ts_buffer_dim(b, d);
    specs[i].role = ts_func_param_is_output(w->func, i) ? TS_RT_ARG_OUTPUT
                                                        : TS_RT_ARG_INPUT;
  }
  ts_rt_args *a = NULL;
  ts_error err;
  ts_error_clear(&err);
  assert_int_equal(ts_rt_args_create(specs, n, seed, &a, &err), TS_OK);
  int rc = ts_interp_run(w->func, ts_rt_args_data(a), n, NULL, &err);
  if (rc) print_message("interpreter on %s: %s\n", w->spec, err.msg);
  assert_int_equal(rc, TS_OK);
  return a;
}

/* Measures vendor v on spec with `threads` threads. When it applies, its
 * output must equal the interpreter's (and not be all zeros). Returns the
 * status; *why gets the message. */
static int check_why(ts_bench_vendor v, const char *spec, int threads,
                     char *why, size_t why_size) {
  ts_workload *w = workload(spec);
  ts_bench_options o = fast_options(threads);
  ts_bench_result r;
  ts_error err;
  ts_error_clear(&err);
  int rc = ts_bench_run(v, w, &o, &r, &err);
  if (why) snprintf(why, why_size, "%s", rc ? err.msg : r.impl);
  if (rc == TS_OK) {
    ts_rt_args *ref = reference(w, o.seed);
    const void *want = ts_rt_args_data(ref)[r.output_param];
    assert_int_equal(r.output_param, ts_func_n_params(w->func) - 1);
    assert_int_equal(r.output_elems, ts_rt_args_elems(ref, r.output_param));
    assert_non_null(r.output);
    int64_t first = -1;
    double max_err = 0;
    int64_t bad = ts_host_compare(r.output, want, r.output_dtype,
                                  r.output_elems, &first, &max_err);
    bool nonzero = false;
    for (int64_t i = 0; i < r.output_elems && !nonzero; i++)
      nonzero = ts_host_get(r.output, r.output_dtype, i) != 0;
    printf("  %-8s %-75s ok (max err %.2g) [%s]\n", ts_bench_vendor_name(v),
           spec, max_err, r.impl);
    if (bad)
      print_message("    %lld mismatches; first at %lld: got %g, want %g\n",
                    (long long)bad, (long long)first,
                    ts_host_get(r.output, r.output_dtype, first),
                    ts_host_get(want, r.output_dtype, first));
    assert_int_equal(bad, 0);
    assert_true(nonzero);
    assert_true(r.seconds > 0);
    assert_int_equal(r.threads, threads);
    assert_int_equal(r.repeats, 2);
    assert_true(r.impl[0] != '\0');
    ts_rt_args_free(ref);
    ts_bench_result_free(&r);
  } else {
    printf("  %-8s %-75s %s: %s\n", ts_bench_vendor_name(v), spec,
           ts_strerror(rc), err.msg);
    assert_null(r.output);
  }
  ts_workload_free(w);
  return rc;
}

static int check(ts_bench_vendor v, const char *spec, int threads) {
  return check_why(v, spec, threads, NULL, 0);
}

#define MATCH(v, spec, threads) assert_int_equal(check(v, spec, threads), TS_OK)

/* oneDNN's bfloat16 kernels need AVX-512 (avx512_core), and its int8
 * products (matmuls and convolutions) are exact only with VNNI: where the CPU
 * has what the case needs the baseline must match the interpreter, elsewhere it
 * must answer TS_EUNSUPPORTED naming the missing instruction set, and nothing
 * else. */
static void match_on_isa(ts_bench_vendor v, const char *spec, int threads) {
  char why[1024];
  int rc = check_why(v, spec, threads, why, sizeof why);
  bool vnni = ts_rt_cpu_has("avx512vnni") == 1 || ts_rt_cpu_has("avxvnni") == 1;
  if (strstr(spec, "dtype=bfloat16") && ts_rt_cpu_has("avx512bw") != 1) {
    assert_int_equal(rc, TS_EUNSUPPORTED);
    assert_non_null(strstr(why, "needs AVX-512 with avx512bw for bfloat16"));
  } else if (strstr(spec, "dtype=int8") && !strstr(spec, "pool") && !vnni) {
    assert_int_equal(rc, TS_EUNSUPPORTED);
    assert_non_null(strstr(why, "without VNNI"));
  } else {
    assert_int_equal(rc, TS_OK);
  }
}

/* Not applicable, with a message that contains `reason`. */
static void not_applicable(ts_bench_vendor v, const char *spec,
                           const char *reason) {
  char why[1024];
  assert_int_equal(check_why(v, spec, 1, why, sizeof why), TS_EUNSUPPORTED);
  assert_non_null(strstr(why, "not applicable"));
  assert_non_null(strstr(why, reason));
}

static const char *const transposes[4] = {
    "transpose_a=0 transpose_b=0", "transpose_a=1 transpose_b=0",
    "transpose_a=0 transpose_b=1", "transpose_a=1 transpose_b=1"};

static void test_names(void **state) {
  (void)state;
  ts_bench_vendor v;
  for (int i = 0; i < TS_BENCH_N_VENDORS; i++) {
    const char *name = ts_bench_vendor_name((ts_bench_vendor)i);
    assert_non_null(name);
    assert_int_equal(ts_bench_vendor_parse(name, &v, NULL), TS_OK);
    assert_int_equal((int)v, i);
  }
  assert_string_equal(ts_bench_vendor_name(TS_BENCH_ONEDNN), "onednn");
  assert_null(ts_bench_vendor_name((ts_bench_vendor)TS_BENCH_N_VENDORS));
  ts_error err;
  assert_int_equal(ts_bench_vendor_parse("mkl", &v, &err), TS_EINVAL);
  assert_non_null(strstr(err.msg, "mkl"));
  assert_non_null(strstr(err.msg, "openblas onednn naive"));
}

static void test_openblas_gemm(void **state) {
  (void)state;
  char spec[256];
  for (int t = 0; t < 4; t++) {
    snprintf(spec, sizeof spec, "matmul M=33 N=20 K=17 %s", transposes[t]);
    MATCH(TS_BENCH_OPENBLAS, spec, 2);
    snprintf(spec, sizeof spec, "matmul M=9 N=12 K=31 %s dtype=float64",
             transposes[t]);
    MATCH(TS_BENCH_OPENBLAS, spec, 1);
    snprintf(spec, sizeof spec, "batch_matmul B=3 M=10 N=7 K=12 %s",
             transposes[t]);
    MATCH(TS_BENCH_OPENBLAS, spec, 1);
  }
  MATCH(TS_BENCH_OPENBLAS, "dense M=17 N=24 K=40", 2);
  MATCH(TS_BENCH_OPENBLAS, "dense M=17 N=24 K=40 bias=0", 1);
  MATCH(TS_BENCH_OPENBLAS, "matmul M=128 N=96 K=200", 2);
}

static void test_openblas_not_applicable(void **state) {
  (void)state;
  not_applicable(TS_BENCH_OPENBLAS, "matmul M=8 N=8 K=8 dtype=int8",
                 "no GEMM for int8 inputs with a int32 output");
  not_applicable(TS_BENCH_OPENBLAS,
                 "conv2d_nhwc N=1 H=8 W=8 CI=4 CO=4 KH=3 KW=3",
                 "no conv2d_nhwc");
  not_applicable(TS_BENCH_OPENBLAS, "softmax N=4 D=8", "no softmax");
  not_applicable(TS_BENCH_OPENBLAS,
                 "matmul M=8 N=8 K=8 dtype=float32 out_dtype=float64",
                 "float32 inputs with a float64 output");
  /* bfloat16 needs cblas_sbgemm: either this OpenBLAS has it and matches,
   * or it says that it lacks it. */
  char why[1024];
  int rc = check_why(TS_BENCH_OPENBLAS, "matmul M=20 N=18 K=24 dtype=bfloat16",
                     1, why, sizeof why);
  if (rc == TS_EUNSUPPORTED)
    assert_non_null(strstr(why, "cblas_sbgemm"));
  else
    assert_int_equal(rc, TS_OK);
}

static void test_onednn_matmul(void **state) {
  (void)state;
  const char *dtypes[3] = {"float32", "bfloat16", "int8"};
  char spec[256];
  for (int d = 0; d < 3; d++) {
    for (int t = 0; t < 4; t++) {
      snprintf(spec, sizeof spec, "matmul M=33 N=20 K=17 %s dtype=%s",
               transposes[t], dtypes[d]);
      match_on_isa(TS_BENCH_ONEDNN, spec, t % 2 + 1);
    }
    snprintf(spec, sizeof spec,
             "batch_matmul B=3 M=10 N=7 K=12 transpose_a=1 dtype=%s",
             dtypes[d]);
    match_on_isa(TS_BENCH_ONEDNN, spec, 2);
    snprintf(spec, sizeof spec,
             "batch_matmul B=2 M=5 N=9 K=16 transpose_b=1 dtype=%s", dtypes[d]);
    match_on_isa(TS_BENCH_ONEDNN, spec, 1);
    snprintf(spec, sizeof spec, "dense M=17 N=24 K=40 dtype=%s", dtypes[d]);
    match_on_isa(TS_BENCH_ONEDNN, spec, 2);
    snprintf(spec, sizeof spec, "dense M=17 N=24 K=40 bias=0 dtype=%s",
             dtypes[d]);
    match_on_isa(TS_BENCH_ONEDNN, spec, 1);
  }
  match_on_isa(TS_BENCH_ONEDNN, "matmul M=128 N=96 K=200 dtype=bfloat16", 2);
  match_on_isa(TS_BENCH_ONEDNN, "matmul M=64 N=64 K=256 dtype=int8", 2);
  /* oneDNN's integer primitives take signed weights only */
  not_applicable(TS_BENCH_ONEDNN, "matmul M=16 N=16 K=16 dtype=uint8",
                 "signed int8 weights only");
  not_applicable(TS_BENCH_ONEDNN,
                 "conv2d_nhwc N=1 H=8 W=8 CI=4 CO=4 KH=3 KW=3 dtype=uint8",
                 "signed int8 weights only");
  /* float16: implemented on CPUs with AVX512-FP16, else not applicable */
  char why[1024];
  int rc = check_why(TS_BENCH_ONEDNN, "matmul M=16 N=24 K=32 dtype=float16", 1,
                     why, sizeof why);
  if (rc == TS_EUNSUPPORTED)
    assert_non_null(strstr(why, "has no matmul for float16 inputs"));
  else
    assert_int_equal(rc, TS_OK);
  not_applicable(TS_BENCH_ONEDNN, "matmul M=8 N=8 K=8 dtype=float64",
                 "no CPU data type for float64");
  not_applicable(TS_BENCH_ONEDNN, "transpose shape=4x8 perm=1x0",
                 "no baseline for operator 'transpose'");
}

/* Convolutions in both layouts and three dtypes, with the options that
 * change index arithmetic: stride, padding, dilation, groups, 1x1,
 * non-square kernels, batch and blocked NHWC weights. */
static void test_onednn_conv(void **state) {
  (void)state;
  const char *shapes[] = {
      "N=1 H=9 W=9 CI=8 CO=16 KH=3 KW=3 pad=1",
      "N=2 H=10 W=11 CI=8 CO=8 KH=3 KW=3 stride=2 pad=1",
      "N=1 H=12 W=12 CI=4 CO=8 KH=3 KW=3 dilation=2 pad=2",
      "N=1 H=9 W=9 CI=8 CO=12 KH=3 KW=3 groups=4 pad=1",
      "N=1 H=11 W=10 CI=6 CO=4 KH=3 KW=2 stride=2 pad=1 dilation=2 groups=2",
      "N=1 H=7 W=7 CI=16 CO=32 KH=1 KW=1",
  };
  const char *layouts[2] = {"conv2d_nchw", "conv2d_nhwc"};
  const char *dtypes[3] = {"float32", "bfloat16", "int8"};
  char spec[256];
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
    for (int l = 0; l < 2; l++)
      for (int d = 0; d < 3; d++) {
        snprintf(spec, sizeof spec, "%s %s dtype=%s", layouts[l], shapes[s],
                 dtypes[d]);
        match_on_isa(TS_BENCH_ONEDNN, spec, (int)(s + d) % 2 + 1);
      }
  /* NHWC weights blocked [CO/B, KH, KW, CI, B], as the graph compiler lays
   * out constant weights: unblocked for oneDNN once */
  const char *blocked[] = {
      "conv2d_nhwc N=1 H=9 W=9 CI=8 CO=16 KH=3 KW=3 pad=1 weight_block=8",
      "conv2d_nhwc N=1 H=7 W=7 CI=16 CO=48 KH=1 KW=1 weight_block=24",
  };
  for (size_t s = 0; s < sizeof blocked / sizeof *blocked; s++)
    for (int d = 0; d < 3; d++) {
      snprintf(spec, sizeof spec, "%s dtype=%s", blocked[s], dtypes[d]);
      match_on_isa(TS_BENCH_ONEDNN, spec, (int)(s + d) % 2 + 1);
    }
}

static void test_onednn_depthwise_pool_rows(void **state) {
  (void)state;
  const char *dtypes[3] = {"float32", "bfloat16", "int8"};
  char spec[256];
  for (int d = 0; d < 3; d++) {
    snprintf(spec, sizeof spec,
             "depthwise_conv2d_nhwc N=1 H=10 W=10 C=20 KH=3 KW=3 pad=1 "
             "dtype=%s",
             dtypes[d]);
    match_on_isa(TS_BENCH_ONEDNN, spec, 2);
    snprintf(spec, sizeof spec,
             "depthwise_conv2d_nhwc N=2 H=11 W=9 C=16 KH=3 KW=3 stride=2 "
             "dtype=%s",
             dtypes[d]);
    match_on_isa(TS_BENCH_ONEDNN, spec, 1);
  }
  match_on_isa(
      TS_BENCH_ONEDNN,
      "pool2d_nhwc N=1 H=10 W=10 C=16 KH=3 KW=3 stride=2 pad=1 kind=max", 2);
  match_on_isa(TS_BENCH_ONEDNN,
               "pool2d_nhwc N=2 H=9 W=9 C=8 KH=3 KW=3 pad=1 kind=avg", 1);
  match_on_isa(
      TS_BENCH_ONEDNN,
      "pool2d_nhwc N=1 H=8 W=8 C=16 KH=2 KW=2 stride=2 kind=max dtype=int8", 1);
  MATCH(TS_BENCH_ONEDNN, "softmax N=6 D=100", 2);
  MATCH(TS_BENCH_ONEDNN, "layer_norm N=6 D=100", 2);
  /* bfloat16 layer_norm: oneDNN computes in float32 while the workload
   * rounds every step to bfloat16 (its sums drift); only run it. */
  ts_workload *w = workload("layer_norm N=4 D=64 dtype=bfloat16");
  ts_bench_options o = fast_options(1);
  ts_bench_result r;
  int rc = ts_bench_run(TS_BENCH_ONEDNN, w, &o, &r, NULL);
  assert_true(rc == TS_OK || rc == TS_EUNSUPPORTED);
  if (rc == TS_OK) {
    assert_true(ts_dtype_eq(r.output_dtype, TS_BFLOAT16));
    ts_bench_result_free(&r);
  }
  ts_workload_free(w);
}

static void test_naive(void **state) {
  (void)state;
  MATCH(TS_BENCH_NAIVE,
        "depthwise_conv2d_nhwc N=1 H=10 W=10 C=20 KH=3 KW=3 pad=1", 2);
  MATCH(TS_BENCH_NAIVE,
        "depthwise_conv2d_nhwc N=2 H=11 W=9 C=16 KH=3 KW=3 stride=2", 1);
  MATCH(TS_BENCH_NAIVE,
        "depthwise_conv2d_nhwc N=1 H=8 W=7 C=5 KH=5 KW=3 stride=2 pad=2", 2);
  MATCH(TS_BENCH_NAIVE, "softmax N=7 D=100", 2);
  MATCH(TS_BENCH_NAIVE, "softmax N=3 D=1", 1);
  MATCH(TS_BENCH_NAIVE, "layer_norm N=7 D=100", 2);
  MATCH(TS_BENCH_NAIVE, "layer_norm N=1 D=3", 1);
  not_applicable(TS_BENCH_NAIVE, "matmul M=8 N=8 K=8", "not matmul");
  not_applicable(TS_BENCH_NAIVE, "softmax N=4 D=8 dtype=bfloat16",
                 "float32 only");
}

static void test_timing_and_options(void **state) {
  (void)state;
  ts_bench_options d = ts_bench_options_default();
  assert_int_equal(d.threads, 0);
  assert_int_equal(d.eval.repeat, 5);
  assert_int_equal(d.eval.min_repeat_ms, 100);
  assert_true(d.keep_output);

  ts_workload *w = workload("matmul M=64 N=64 K=64");
  int blas_threads = openblas_get_num_threads();
  int omp_threads = omp_get_max_threads();
  ts_bench_options o = fast_options(1);
  o.eval.repeat = 5;
  o.eval.min_repeat_ms = 5;
  o.keep_output = false;
  for (int v = 0; v < 2; v++) {
    ts_bench_result r;
    ts_error err;
    ts_error_clear(&err);
    assert_int_equal(ts_bench_run((ts_bench_vendor)v, w, &o, &r, &err), TS_OK);
    printf("  %s 64^3: median %.3g s (min %.3g, max %.3g), number %d, "
           "%.1f GFLOP/s\n",
           ts_bench_vendor_name((ts_bench_vendor)v), r.seconds, r.min_seconds,
           r.max_seconds, r.number, r.gflops);
    assert_null(r.output);
    if (v == TS_BENCH_OPENBLAS) {
      /* kernels older than the CPU are pointed out */
      const char *core = openblas_get_corename();
      bool old_kernels = ts_rt_cpu_has("avx512f") == 1 &&
                         strcmp(core, "SkylakeX") != 0 &&
                         strcmp(core, "Cooperlake") != 0;
      printf("  OpenBLAS core %s; note: '%s'\n", core, r.note);
      if (old_kernels)
        assert_non_null(strstr(r.note, "OPENBLAS_CORETYPE"));
      else if (ts_rt_cpu_has("avx512f") == 1)
        assert_string_equal(r.note, "");
    } else {
      assert_string_equal(r.note, "");
    }
    assert_int_equal(r.repeats, 5);
    assert_int_equal(r.threads, 1);
    assert_true(r.number >= 1);
    /* each repeat lasted at least 5 ms */
    assert_true(r.min_seconds * r.number >= 5e-3);
    assert_true(r.min_seconds <= r.seconds && r.seconds <= r.max_seconds);
    assert_true(r.gflops > 0);
    double want = w->flops / r.seconds * 1e-9;
    assert_true(r.gflops > want * 0.999 && r.gflops < want * 1.001);
    ts_bench_result_free(&r);
  }
  /* the libraries' thread settings are what they were */
  assert_int_equal(openblas_get_num_threads(), blas_threads);
  assert_int_equal(omp_get_max_threads(), omp_threads);

  /* cache flush: needs a runtime to own the buffer */
  ts_bench_result r;
  ts_error err;
  o.eval.repeat = 1;
  o.eval.min_repeat_ms = 0;
  o.eval.flush_cache = true;
  assert_int_equal(ts_bench_run(TS_BENCH_OPENBLAS, w, &o, &r, &err), TS_EINVAL);
  assert_non_null(strstr(err.msg, "flush_cache"));
  assert_int_equal(ts_runtime_create(1, &o.rt, NULL), TS_OK);
  assert_int_equal(ts_bench_run(TS_BENCH_OPENBLAS, w, &o, &r, &err), TS_OK);
  ts_bench_result_free(&r);
  ts_runtime_destroy(o.rt);
  o.rt = NULL;
  o.eval.flush_cache = false;

  o.eval.repeat = 0;
  assert_int_equal(ts_bench_run(TS_BENCH_ONEDNN, w, &o, &r, &err), TS_EINVAL);
  assert_non_null(strstr(err.msg, "repeat"));
  o.eval.repeat = 1;
  o.eval.min_repeat_ms = -1;
  assert_int_equal(ts_bench_run(TS_BENCH_ONEDNN, w, &o, &r, &err), TS_EINVAL);
  assert_non_null(strstr(err.msg, "min_repeat_ms"));
  o.eval.min_repeat_ms = 0;
  o.threads = TS_RT_MAX_THREADS + 1;
  assert_int_equal(ts_bench_run(TS_BENCH_NAIVE, w, &o, &r, &err), TS_EINVAL);
  assert_int_equal(ts_bench_run((ts_bench_vendor)7, w, NULL, &r, &err),
                   TS_EINVAL);
  assert_int_equal(ts_bench_run(TS_BENCH_ONEDNN, NULL, NULL, &r, &err),
                   TS_EINVAL);
  ts_workload_free(w);
}

/* Sessions: two libraries open at once, timed in interleaved rounds; each
 * keeps its repeats in order, the result covers all of them, and closing
 * in reverse order restores both libraries' thread settings. */
static void test_sessions(void **state) {
  (void)state;
  ts_workload *w = workload("matmul M=48 N=40 K=32");
  int blas_threads = openblas_get_num_threads();
  int omp_threads = omp_get_max_threads();
  ts_bench_options o = fast_options(1);
  o.eval.repeat = 1;
  o.eval.min_repeat_ms = 1;
  ts_bench_session *s[2] = {NULL, NULL};
  ts_error err;
  for (int v = 0; v < 2; v++)
    assert_int_equal(ts_bench_open((ts_bench_vendor)v, w, &o, &s[v], &err),
                     TS_OK);
  for (int round = 0; round < 3; round++)
    for (int v = 0; v < 2; v++) {
      assert_int_equal(ts_bench_measure(s[v], NULL, &err), TS_OK);
      const double *secs = NULL;
      assert_int_equal(ts_bench_samples(s[v], &secs), round + 1);
      assert_true(secs[round] > 0);
    }
  ts_eval_config two = o.eval;
  two.repeat = 2;
  assert_int_equal(ts_bench_measure(s[1], &two, &err), TS_OK);
  assert_int_equal(ts_bench_samples(s[1], NULL), 5);
  two.repeat = 0;
  assert_int_equal(ts_bench_measure(s[1], &two, &err), TS_EINVAL);
  assert_non_null(strstr(err.msg, "repeat"));
  for (int v = 1; v >= 0; v--) {
    ts_bench_result r;
    ts_bench_close(s[v], &r);
    assert_int_equal(r.repeats, v ? 5 : 3);
    assert_true(r.min_seconds <= r.seconds && r.seconds <= r.max_seconds);
    assert_non_null(r.output);
    assert_int_equal(r.output_elems, 48 * 40);
    ts_bench_result_free(&r);
  }
  assert_int_equal(openblas_get_num_threads(), blas_threads);
  assert_int_equal(omp_get_max_threads(), omp_threads);
  /* not applicable: no session, the reason said */
  ts_bench_session *none = NULL;
  assert_int_equal(ts_bench_open(TS_BENCH_NAIVE, w, &o, &none, &err),
                   TS_EUNSUPPORTED);
  assert_null(none);
  ts_bench_close(NULL, NULL);
  assert_int_equal(ts_bench_samples(NULL, NULL), 0);
  ts_workload_free(w);
}

/* A workload whose function does not have the shapes its spec implies is
 * refused, naming the parameter. */
static void test_spec_mismatch(void **state) {
  (void)state;
  ts_workload *a = workload("matmul M=8 N=8 K=8");
  ts_workload *b = workload("matmul M=8 N=8 K=4");
  ts_func *f = a->func;
  a->func = b->func;
  ts_bench_result r;
  ts_error err;
  ts_error_clear(&err);
  ts_bench_options o = fast_options(1);
  assert_int_equal(ts_bench_run(TS_BENCH_ONEDNN, a, &o, &r, &err), TS_EINVAL);
  printf("  %s\n", err.msg);
  assert_non_null(strstr(err.msg, "parameter 0 ('A') is float32[8, 4]"));
  assert_non_null(strstr(err.msg, "float32[8, 8]"));
  a->func = f;
  ts_workload_free(a);
  ts_workload_free(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_names),
      cmocka_unit_test(test_openblas_gemm),
      cmocka_unit_test(test_openblas_not_applicable),
      cmocka_unit_test(test_onednn_matmul),
      cmocka_unit_test(test_onednn_conv),
      cmocka_unit_test(test_onednn_depthwise_pool_rows),
      cmocka_unit_test(test_naive),
      cmocka_unit_test(test_timing_and_options),
      cmocka_unit_test(test_sessions),
      cmocka_unit_test(test_spec_mismatch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
