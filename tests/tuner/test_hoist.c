/*
 * test_hoist.c — the constant stages of a scheduled function split off
 * (ts_func_hoist_const): what goes to the prologue and what stays, and the
 * prologue run on the constants followed by the main function computing
 * what the scheduled function computes (interpreted, and for the
 * tensorized int8 product natively where the host has VNNI).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>

#include "default_check.h"
#include "runtime/runtime.h"

/* The default schedule of `spec` for `target` (caller destroys). */
static ts_sched *scheduled(const char *spec, const char *target,
                           ts_workload **w) {
  ts_target *t;
  ts_error err;
  if (ts_target_parse(target, &t, &err)) fail_msg("%s", err.msg);
  *w = workload(spec);
  ts_sched *s = NULL;
  if (ts_default_schedule((*w)->func, t, &s, &err))
    fail_msg("%s: %s", spec, err.msg);
  ts_target_free(t);
  return s;
}

/* Runs f on args: interpreted, or built for the host and run natively. */
static void run(const ts_func *f, void *const *args, bool native) {
  ts_error err;
  if (!native) {
    if (ts_interp_run(f, args, ts_func_n_params(f), NULL, &err))
      fail_msg("%s: %s", ts_func_name(f), err.msg);
    return;
  }
  ts_target *t;
  ts_build_result br;
  ts_rt_kernel *k;
  ts_runtime *rt;
  if (ts_target_host(&t, &err) || ts_build(f, t, NULL, &br, &err) ||
      ts_rt_kernel_load(br.artifact->bytes, br.artifact->n_bytes,
                        br.artifact->entry, &k, &err) ||
      ts_runtime_create(2, &rt, &err) || ts_rt_kernel_call(k, args, rt, &err))
    fail_msg("%s: %s", ts_func_name(f), err.msg);
  ts_runtime_destroy(rt);
  ts_rt_kernel_unload(k);
  ts_build_result_clear(&br);
  ts_target_free(t);
}

/* Seeded bytes for every parameter of f. */
static void **seeded_args(const ts_func *f, unsigned seed) {
  int n = ts_func_n_params(f);
  void **a = calloc((size_t)n, sizeof *a);
  for (int i = 0; i < n; i++) {
    const ts_buffer *b = ts_func_param(f, i);
    size_t bytes = (size_t)ts_buffer_bytes(b);
    unsigned char *p = malloc(bytes);
    bool fl = ts_dtype_is_float(ts_buffer_dtype(b));
    for (size_t k = 0; k < bytes; k++) {
      seed = seed * 1103515245u + 12345u;
      /* floats: small values (the top byte kept in range) */
      p[k] = fl && k % 4 == 3 ? (unsigned char)(0x3e + (seed >> 16) % 2)
                              : (unsigned char)(seed >> 16);
    }
    a[i] = p;
  }
  return a;
}

static void free_args(void **a, int n) {
  for (int i = 0; i < n; i++) free(a[i]);
  free(a);
}

/* f against its split h: the same output (parameter `out`) from the same
 * inputs, within `tol` relative for floats. */
static void check_split(const ts_func *f, const ts_hoist *h, int out,
                        double tol, bool native) {
  int n = ts_func_n_params(f);
  void **want = seeded_args(f, 7), **got = seeded_args(f, 7);
  run(f, want, native);
  /* the prologue: its constant inputs, then its outputs */
  int np = ts_func_n_params(h->prologue);
  void **pa = calloc((size_t)np, sizeof *pa);
  for (int i = 0; i < h->n_inputs; i++) pa[i] = got[h->inputs[i]];
  for (int i = h->n_inputs; i < np; i++)
    pa[i] = calloc(1, (size_t)ts_buffer_bytes(ts_func_param(h->prologue, i)));
  run(h->prologue, pa, native);
  /* the kernel: f's arguments, then the prologue's outputs */
  int nm = ts_func_n_params(h->main);
  assert_int_equal(nm, n + h->n_outputs);
  void **ma = calloc((size_t)nm, sizeof *ma);
  for (int i = 0; i < n; i++) ma[i] = got[i];
  for (int i = 0; i < h->n_outputs; i++) ma[n + i] = pa[h->n_inputs + i];
  memset(got[out], 0, (size_t)ts_buffer_bytes(ts_func_param(f, out)));
  run(h->main, ma, native);
  const ts_buffer *ob = ts_func_param(f, out);
  int64_t elems = ts_buffer_elems(ob);
  for (int64_t e = 0; e < elems; e++) {
    if (ts_dtype_is_float(ts_buffer_dtype(ob))) {
      float x = ((float *)got[out])[e], y = ((float *)want[out])[e];
      if (!(fabsf(x - y) <= tol * (1 + fabsf(y))))
        fail_msg("%s: element %lld: %g against %g", ts_func_name(f),
                 (long long)e, x, y);
    } else if (((int32_t *)got[out])[e] != ((int32_t *)want[out])[e]) {
      fail_msg("%s: element %lld: %d against %d", ts_func_name(f), (long long)e,
               ((int32_t *)got[out])[e], ((int32_t *)want[out])[e]);
    }
  }
  for (int i = h->n_inputs; i < np; i++) free(pa[i]);
  free(pa);
  free(ma);
  free_args(want, n);
  free_args(got, n);
}

static bool has_block(const ts_func *f, const char *name) {
  char *text = ts_func_print(f);
  char pat[128];
  snprintf(pat, sizeof pat, "block %s(", name);
  bool r = strstr(text, pat) != NULL;
  free(text);
  return r;
}

/* fp32 on AVX2: B copied per column panel inside the parallel loop, in
 * B's own layout (a copy for locality): with B constant it stays in the
 * kernel (identity_copy). A dense layer's W [N, K] packed transposed into
 * [K, N] panels is a layout of its own: with W constant the packing goes
 * to the prologue (under the same panel loop); with nothing constant
 * nothing moves. */
static void test_fp32_panels(void **state) {
  (void)state;
  ts_workload *w;
  ts_sched *s = scheduled("matmul M=128 N=128 K=64",
                          "llvm -mcpu=x86-64-v3 -num-cores=2", &w);
  const ts_func *f = ts_sched_func(s);
  assert_true(has_block(f, "B_global"));
  ts_hoist h;
  ts_error err;
  bool b_const[3] = {false, true, false};
  assert_int_equal(ts_func_hoist_const(f, b_const, &h, &err), TS_OK);
  assert_null(h.prologue);
  ts_sched_destroy(s);
  ts_workload_free(w);

  s = scheduled("dense M=8 N=96 K=64", "llvm -mcpu=x86-64-v3 -num-cores=2", &w);
  f = ts_sched_func(s);
  assert_true(has_block(f, "W_global"));
  bool none[4] = {false, false, false, false};
  bool w_const[4] = {false, true, false, false};
  assert_int_equal(ts_func_hoist_const(f, none, &h, &err), TS_OK);
  assert_null(h.prologue);
  assert_int_equal(ts_func_hoist_const(f, w_const, &h, &err), TS_OK);
  assert_non_null(h.prologue);
  assert_int_equal(h.n_inputs, 1);
  assert_int_equal(h.inputs[0], 1);
  assert_int_equal(h.n_outputs, 1);
  assert_true(has_block(h.prologue, "W_global"));
  assert_false(has_block(h.prologue, "dense"));
  assert_false(has_block(h.main, "W_global"));
  assert_true(has_block(h.main, "dense"));
  assert_string_equal(
      ts_buffer_name(ts_func_param(h.main, ts_func_n_params(h.main) - 1)),
      "W_global");
  check_split(f, &h, 3, 1e-5, false);
  ts_hoist_clear(&h);
  ts_sched_destroy(s);
  ts_workload_free(w);
}

/* int8 on VNNI: A made unsigned (a stage of A: stays), B's column sums (an
 * init and a reduction) and B's VNNI packing (both to the prologue, the
 * sums read by the product's init). Run natively where the host has
 * VNNI; the split structure everywhere. */
static void test_int8_vnni(void **state) {
  (void)state;
  ts_workload *w;
  ts_sched *s = scheduled("matmul M=64 N=96 K=128 dtype=int8",
                          "llvm -mcpu=cascadelake -num-cores=2", &w);
  const ts_func *f = ts_sched_func(s);
  ts_hoist h;
  ts_error err;
  bool b_const[3] = {false, true, false};
  assert_int_equal(ts_func_hoist_const(f, b_const, &h, &err), TS_OK);
  assert_non_null(h.prologue);
  assert_int_equal(h.n_outputs, 2); /* the sums and the packed B */
  assert_true(has_block(h.prologue, "B_sum"));
  assert_true(has_block(h.prologue, "B_sum_init"));
  assert_true(has_block(h.prologue, "B_global"));
  assert_false(has_block(h.prologue, "A_u8"));
  assert_true(has_block(h.main, "A_u8"));
  assert_false(has_block(h.main, "B_sum"));
  assert_false(has_block(h.main, "B_global"));
  if (ts_rt_cpu_has("avx512vnni") == 1 && ts_rt_cpu_has("avx512bw") == 1)
    check_split(f, &h, 2, 0, true);
  ts_hoist_clear(&h);
  /* A constant instead: A's stage moves, B's stay */
  bool a_const[3] = {true, false, false};
  assert_int_equal(ts_func_hoist_const(f, a_const, &h, &err), TS_OK);
  assert_non_null(h.prologue);
  assert_true(has_block(h.prologue, "A_u8"));
  assert_false(has_block(h.prologue, "B_global"));
  ts_hoist_clear(&h);
  ts_sched_destroy(s);
  ts_workload_free(w);
}

/* A stage that reads a constant and a non-constant buffer does not move,
 * nor what only it feeds: a layer norm's stages all read the input. */
static void test_nothing_constant_enough(void **state) {
  (void)state;
  ts_workload *w;
  ts_sched *s = scheduled("layer_norm N=64 D=100",
                          "llvm -mcpu=x86-64-v3 -num-cores=2", &w);
  const ts_func *f = ts_sched_func(s);
  int n = ts_func_n_params(f);
  bool *c = calloc((size_t)n, sizeof *c);
  for (int i = 1; i < n - 1; i++) c[i] = true; /* gamma, beta */
  ts_hoist h;
  ts_error err;
  assert_int_equal(ts_func_hoist_const(f, c, &h, &err), TS_OK);
  assert_null(h.prologue);
  free(c);
  ts_sched_destroy(s);
  ts_workload_free(w);
}

/* Builds as a measurement does (ts_build_measured): a dense layer
 * that declares W constant (const=W) gets a kernel whose prologue packs W
 * transposed once into the object's buffer; called without the prologue the
 * product reads zeros (a wrong result), after it the interpreter's result.
 * Without const=, no prologue. On AVX2 (every host the tests run on has it),
 * where the default packs W (test_fp32_panels): its W packed into [K, N]
 * panels. */
static void test_measured_build(void **state) {
  (void)state;
  if (ts_rt_cpu_has("avx2") != 1) skip();
  ts_error err;
  ts_workload *w;
  ts_sched *s = scheduled("dense M=8 N=96 K=64 const=W",
                          "llvm -mcpu=x86-64-v3 -num-cores=2", &w);
  assert_non_null(strstr(w->spec, "const=W"));
  assert_int_equal(ts_func_const_params(w->func), 2);
  ts_workload *plain = workload("dense M=8 N=96 K=64");
  assert_false(ts_hash128_eq(ts_func_hash(w->func), ts_func_hash(plain->func)));
  const ts_func *f = ts_sched_func(s);
  assert_int_equal(ts_func_const_params(f), 2); /* kept by the schedule */
  ts_target *t;
  if (ts_target_parse("llvm -mcpu=x86-64-v3 -num-cores=2", &t, &err))
    fail_msg("%s", err.msg);
  ts_build_result br;
  if (ts_build_measured(f, 0, t, NULL, &br, &err)) fail_msg("%s", err.msg);
  assert_int_equal(br.artifact->n_args, 4); /* f's own arguments */
  ts_rt_kernel *k;
  ts_runtime *rt;
  if (ts_rt_kernel_load(br.artifact->bytes, br.artifact->n_bytes,
                        br.artifact->entry, &k, &err) ||
      ts_runtime_create(2, &rt, &err))
    fail_msg("%s", err.msg);
  assert_true(ts_rt_kernel_has_prologue(k));
  void *const *bufs;
  const int64_t *bytes;
  assert_int_equal(ts_rt_kernel_hoisted(k, &bufs, &bytes), 1);
  assert_int_equal(bytes[0], 64 * 96 * 4); /* W packed, every panel */
  void **want = seeded_args(w->func, 3), **got = seeded_args(w->func, 3);
  run(w->func, want, false);
  memset(got[3], 0, 8 * 96 * 4);
  if (ts_rt_kernel_call(k, got, rt, &err)) fail_msg("%s", err.msg);
  bool differs = false; /* W_global not prepared yet: zeros */
  for (int e = 0; e < 8 * 96; e++)
    differs = differs || fabsf(((float *)got[3])[e] - ((float *)want[3])[e]) >
                             1e-3f * (1 + fabsf(((float *)want[3])[e]));
  assert_true(differs);
  if (ts_rt_kernel_prepare(k, got, rt, &err) ||
      ts_rt_kernel_call(k, got, rt, &err))
    fail_msg("%s", err.msg);
  for (int e = 0; e < 8 * 96; e++) {
    float x = ((float *)got[3])[e], y = ((float *)want[3])[e];
    if (!(fabsf(x - y) <= 1e-4f * (1 + fabsf(y))))
      fail_msg("element %d: %g against %g", e, x, y);
  }
  double secs;
  free_args(want, 4);
  free_args(got, 4);
  ts_rt_kernel_unload(k);
  ts_build_result_clear(&br);
  /* nothing constant: one entry, no prologue */
  ts_sched *s2 = NULL;
  if (ts_default_schedule(plain->func, t, &s2, &err)) fail_msg("%s", err.msg);
  if (ts_build_measured(ts_sched_func(s2), 0, t, NULL, &br, &err) ||
      ts_rt_kernel_load(br.artifact->bytes, br.artifact->n_bytes,
                        br.artifact->entry, &k, &err))
    fail_msg("%s", err.msg);
  assert_false(ts_rt_kernel_has_prologue(k));
  assert_int_equal(ts_rt_kernel_hoisted(k, &bufs, &bytes), 0);
  ts_rt_kernel_unload(k);
  ts_build_result_clear(&br);
  /* the task's mask does the same as the declaration */
  if (ts_build_measured(ts_sched_func(s2), 2, t, NULL, &br, &err) ||
      ts_rt_kernel_load(br.artifact->bytes, br.artifact->n_bytes,
                        br.artifact->entry, &k, &err))
    fail_msg("%s", err.msg);
  assert_true(ts_rt_kernel_has_prologue(k));
  {
    ts_rt_arg_spec *specs = ts_artifact_arg_specs(br.artifact);
    ts_rt_args *args = NULL;
    if (ts_rt_args_create(specs, 4, 1, &args, &err) ||
        ts_rt_kernel_prepare(k, ts_rt_args_data(args), rt, &err) ||
        ts_rt_eval_cold(rt, k, args, 2, &secs, &err))
      fail_msg("%s", err.msg);
    free(specs);
    ts_rt_args_free(args);
  }
  ts_rt_kernel_unload(k);
  ts_build_result_clear(&br);
  ts_sched_destroy(s2);
  ts_runtime_destroy(rt);
  ts_target_free(t);
  ts_sched_destroy(s);
  ts_workload_free(w);
  ts_workload_free(plain);
}

/* const= names input parameters, each once. */
static void test_const_spec_errors(void **state) {
  (void)state;
  const char *bad[][2] = {
      {"matmul M=8 N=8 K=8 const=C", "'C' is an output"},
      {"matmul M=8 N=8 K=8 const=X",
       "'X' is not a parameter; its inputs are A, B"},
      {"matmul M=8 N=8 K=8 const=B+B", "'B' is named twice"},
      {"matmul M=8 N=8 K=8 const=", "const= takes parameter names"},
      {"matmul M=8 const=A N=8 K=8 const=B", "const= given twice"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ts_workload *w = NULL;
    ts_error err;
    assert_int_equal(ts_workload_from_spec(bad[i][0], &w, &err), TS_EINVAL);
    assert_null(w);
    if (!strstr(err.msg, bad[i][1]))
      fail_msg("%s: '%s' does not say '%s'", bad[i][0], err.msg, bad[i][1]);
  }
  /* given in any order, kept in parameter order; anywhere in the spec */
  ts_workload *w = workload("matmul const=B+A M=8 N=8 K=8");
  assert_non_null(strstr(w->spec, "out_dtype=float32 const=A+B"));
  assert_string_equal(w->name, "matmul_8x8x8_float32_constA_B");
  assert_int_equal(ts_func_const_params(w->func), 3);
  ts_workload_free(w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_measured_build),
      cmocka_unit_test(test_const_spec_errors),
      cmocka_unit_test(test_fp32_panels),
      cmocka_unit_test(test_int8_vnni),
      cmocka_unit_test(test_nothing_constant_enough),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
