/*
 * test_gpu.c — GPU design spaces (cuda targets; no device needed). The spaces
 * of a matmul (SSSRRSRS tiling with and without shared-memory read caches, and
 * on sm_80 the mma m16n8k16 variant for fp16 inputs), a conv2d, a dense layer
 * with its bias add (fused under the thread loop), a softmax and a layer_norm
 * (cross-thread reductions, one space computing both row reductions in the
 * normalization's thread block) and an elementwise op (auto-bind) give
 * candidates that pass the GPU verifier (threads, shared memory, registers
 * within the target's limits, per-thread buffers read only by their writers),
 * compile to PTX with every block bound to threads, and are accepted by ptxas
 * when the CUDA toolkit is installed (skipped with a printed reason otherwise).
 * fp32 matmul gets no tensor-core variant, and sm_75 gets none at all.
 *
 * Without a device, correctness is checked by the interpreter's GPU mode:
 * sampled candidates of every space of an fp32 matmul (the shared-memory
 * variant included), a conv2d, a dense layer with its bias add, row sums and
 * maxima, a softmax and a layer_norm (cross-thread reductions through shared
 * partial results, the intermediate ones computed in their consumers' thread
 * block) and an elementwise op are lowered as the cuda code generator lowers
 * them, run as a kernel (threads, shared memory per thread block, buffers per
 * thread, barriers, with data races and divergent barriers reported) on seeded
 * inputs and compared with the serial interpreter on the unscheduled workload;
 * the lowered shared-memory programs hold barriers. Hand-built candidates check
 * the verifier's per-thread buffer rule (a reduction in a nest of its own read
 * by another nest's threads computes wrong rows and is rejected naming the
 * buffer; shared buffers are exempt), and the hand-written softmax of
 * tests/codegen/gpu runs as a softmax.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <unistd.h>

#include "util.h"

#define OK(x) assert_int_equal((x), TS_OK)

static const char *ptxas_path(void) {
  static const char *const paths[] = {"/usr/local/cuda/bin/ptxas",
                                      "/usr/bin/ptxas"};
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
    if (access(paths[i], X_OK) == 0) return paths[i];
  return NULL;
}

static bool has_intrin(const ts_design_space *s, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (!strcmp(s[i].intrin, name)) return true;
  return false;
}

/* Checks up to `want` verified candidates of every space: PTX + ptxas. */
static void check_gpu(const char *spec, const char *arch, int want,
                      int *n_spaces, char names[][256]) {
  ts_workload *w = tu_workload(spec);
  assert_non_null(w);
  char target_str[64];
  snprintf(target_str, sizeof target_str, "cuda -arch=%s", arch);
  ts_target *t = NULL;
  ts_error err;
  OK(ts_target_parse(target_str, &t, &err));
  ts_design_space *s = NULL;
  int n = 0;
  int rc = ts_space_generate(w->func, t, NULL, &s, &n, &err);
  if (rc) printf("%s: %s\n", spec, err.msg);
  OK(rc);
  const char *ptxas = ptxas_path();
  for (int i = 0; i < n; i++) {
    if (names) snprintf(names[i], 256, "%s|%s", s[i].name, s[i].intrin);
    int good = 0;
    for (int k = 0; k < 300 && good < want; k++) {
      ts_candidate c;
      if (ts_candidate_sample(&s[i], i, w->func, t, 1000 + (uint64_t)k, &c,
                              &err))
        continue; /* over a limit: the verifier dropped it */
      ts_gpu_usage u;
      OK(ts_verify_gpu(ts_sched_func(c.sched), t, &u, &err));
      assert_true(u.threads_per_block >= 1 &&
                  u.threads_per_block <= ts_target_max_threads_per_block(t));
      assert_true(u.shared_bytes <= ts_target_max_shared_memory_per_block(t));
      ts_build_result br;
      rc = ts_build(ts_sched_func(c.sched), t, NULL, &br, &err);
      if (rc) {
        char *text = ts_func_print(ts_sched_func(c.sched));
        printf("%s space %d: build failed: %s\n%s\n", spec, i, err.msg, text);
        free(text);
      }
      OK(rc);
      assert_int_equal(br.artifact->kind, TS_ARTIFACT_PTX);
      assert_true(br.artifact->block[0] >= 1);
      if (ptxas) {
        char tmpl[] = "/tmp/ts-tuner-ptx-XXXXXX";
        int fd = mkstemp(tmpl);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, br.artifact->bytes, br.artifact->n_bytes),
                         (ssize_t)br.artifact->n_bytes);
        close(fd);
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "%s -arch=%s %s -o /dev/null 2>&1", ptxas,
                 arch, tmpl);
        int st = system(cmd);
        unlink(tmpl);
        if (st) printf("ptxas rejected a candidate of %s space %d\n", spec, i);
        assert_int_equal(st, 0);
      }
      ts_build_result_clear(&br);
      ts_candidate_clear(&c);
      good++;
    }
    if (good < want)
      printf("%s: space %d (%s): only %d verified candidates\n", spec, i,
             s[i].name, good);
    assert_int_equal(good, want);
  }
  if (!ptxas) printf("ptxas check skipped: ptxas not found\n");
  if (n_spaces) *n_spaces = n;
  ts_design_spaces_free(s, n);
  ts_target_free(t);
  ts_workload_free(w);
}

/* The number of barriers in a lowered program's text; fails when two
 * follow each other. */
static int count_barriers(const char *text) {
  const char *b = "evaluate call<int32>(\"tessera.cuda.syncthreads\")";
  int n = 0;
  for (const char *p = strstr(text, b); p; p = strstr(p, b)) {
    n++;
    p += strlen(b);
    while (*p == ' ' || *p == '\n') p++;
    assert_false(!strncmp(p, b, strlen(b))); /* two in a row */
  }
  return n;
}

/* Runs up to `want` candidates of every space of `spec` for sm_80 in the
 * interpreter's GPU mode (no race, no divergent barrier) and, with
 * `compare`, compares with the reference; the spaces whose name holds
 * `shared_space` (may be NULL) must run at least one candidate whose
 * lowered form has a barrier. */
static void check_gpu_runs(const char *spec, int want, const char *shared_space,
                           bool compare) {
  ts_workload *w = tu_workload(spec);
  assert_non_null(w);
  ts_target *t = NULL;
  ts_error err;
  OK(ts_target_parse("cuda -arch=sm_80", &t, &err));
  ts_design_space *s = NULL;
  int n = 0;
  OK(ts_space_generate(w->func, t, NULL, &s, &n, &err));
  ts_rt_args *ref = tu_reference(w->func, 7);
  assert_non_null(ref);
  ts_rt_arg_spec *specs = tu_specs(w->func);
  int shared_runs = 0;
  for (int i = 0; i < n; i++) {
    int good = 0;
    for (int k = 0; k < 100 && good < want; k++) {
      ts_candidate c;
      if (ts_candidate_sample(&s[i], i, w->func, t, 2000 + (uint64_t)k, &c,
                              &err))
        continue; /* over a limit: the verifier dropped it */
      ts_lower_options lo = ts_lower_defaults();
      lo.verify_between = true;
      ts_func *low = ts_lower(ts_sched_func(c.sched), &lo, &err);
      if (!low) printf("%s space %d: lowering failed: %s\n", spec, i, err.msg);
      assert_non_null(low);
      ts_rt_args *got = NULL;
      OK(ts_rt_args_create(specs, ts_func_n_params(w->func), 7, &got, &err));
      int rc = ts_interp_run_gpu(low, ts_rt_args_data(got),
                                 ts_rt_args_count(got), NULL, &err);
      if (!rc && compare) rc = ts_rt_args_compare(got, ref, &err);
      char *text = ts_func_print(low);
      if (rc) {
        char *sched = ts_func_print(ts_sched_func(c.sched));
        printf("%s space %d (%s), candidate %d: %s\n%s\n-- lowered:\n%s\n",
               spec, i, s[i].name, k, err.msg, sched, text);
        free(sched);
      }
      OK(rc);
      int barriers = count_barriers(text);
      if (shared_space && strstr(s[i].name, shared_space) && barriers > 0)
        shared_runs++;
      if (!strstr(text, "scope \"shared\"")) assert_int_equal(barriers, 0);
      free(text);
      ts_rt_args_free(got);
      ts_func_free(low);
      ts_candidate_clear(&c);
      good++;
    }
    if (good < want)
      printf("%s: space %d (%s): only %d candidates run\n", spec, i, s[i].name,
             good);
    assert_int_equal(good, want);
  }
  if (shared_space) assert_true(shared_runs > 0);
  free(specs);
  ts_rt_args_free(ref);
  ts_design_spaces_free(s, n);
  ts_target_free(t);
  ts_workload_free(w);
}

static void test_runs_correctly(void **state) {
  (void)state;
  check_gpu_runs("matmul M=64 N=64 K=64", 3, "shared_read", true);
  check_gpu_runs("conv2d_nhwc N=1 H=6 W=6 CI=8 CO=8 KH=3 KW=3 pad=1", 2,
                 "shared_read", true);
  check_gpu_runs("reduce op=sum N=8 D=512", 2, "cross-thread", true);
  check_gpu_runs("reduce op=max N=8 D=256", 2, "cross-thread", true);
  check_gpu_runs("elementwise op=gelu shape=16x64", 2, NULL, true);
  /* several stages in one kernel: the row reductions are computed in the
   * normalization's thread block, their results in every thread's
   * registers (candidates reading another thread's copy are dropped by
   * verify_gpu_code) */
  check_gpu_runs("softmax N=4 D=256", 4, "cross-thread", true);
  check_gpu_runs("layer_norm N=4 D=256", 4, "cross-thread", true);
  /* a tiled reduction with an elementwise consumer (the bias add), which
   * runs under the reduction's thread loop */
  check_gpu_runs("dense M=32 N=32 K=64", 2, "shared_read", true);
}

/* Lowers a TIR text; returns the lowered function or NULL (err set). */
static ts_func *lower_text(const char *text, ts_error *err) {
  ts_func *f = NULL;
  OK(ts_func_parse(text, strlen(text), "test", &f, err));
  ts_lower_options lo = ts_lower_defaults();
  lo.verify_between = true;
  ts_func *low = ts_lower(f, &lo, err);
  ts_func_free(f);
  return low;
}

/* The barrier pass on hand-written kernels: the shared-memory matmul of
 * tests/codegen/gpu keeps its two barriers and gets no more; without them
 * the pass puts back two per iteration (one before the tile is read, one
 * before the next iteration overwrites it) and the kernel runs race-free
 * and correct; a program without shared memory gets none; a needed
 * barrier under a thread-dependent condition is an error naming the
 * buffer. */
static void test_barrier_pass(void **state) {
  (void)state;
  FILE *fp = fopen(TS_SOURCE_DIR "/tests/codegen/gpu/matmul.tir", "rb");
  assert_non_null(fp);
  char text[8192];
  size_t n = fread(text, 1, sizeof text - 1, fp);
  fclose(fp);
  text[n] = 0;
  ts_workload *w = tu_workload("matmul M=128 N=128 K=128");
  ts_rt_args *ref = tu_reference(w->func, 3);
  ts_rt_arg_spec *specs = tu_specs(w->func);
  ts_error err;
  for (int strip = 0; strip < 2; strip++) {
    if (strip) /* both barriers out */
      for (char *p; (p = strstr(text, "evaluate call<int32>"));)
        memset(p, ' ',
               strlen("evaluate call<int32>(\"tessera.cuda.syncthreads\")"));
    ts_func *low = lower_text(text, &err);
    assert_non_null(low);
    char *printed = ts_func_print(low);
    assert_int_equal(count_barriers(printed), 2);
    free(printed);
    if (!strip) { /* (tests/tir/test_interp_gpu.c runs it as written) */
      ts_func_free(low);
      continue;
    }
    ts_rt_args *got = NULL;
    OK(ts_rt_args_create(specs, 3, 3, &got, &err));
    int rc = ts_interp_run_gpu(low, ts_rt_args_data(got), ts_rt_args_count(got),
                               NULL, &err);
    if (rc) printf("%s\n", err.msg);
    OK(rc);
    OK(ts_rt_args_compare(got, ref, &err));
    ts_rt_args_free(got);
    ts_func_free(low);
  }
  free(specs);
  ts_rt_args_free(ref);
  ts_workload_free(w);
  /* no shared memory, no barrier */
  const char *plain = "func p(A: float32[64]) {\n"
                      "  for t in range(64) thread(\"threadIdx.x\") {\n"
                      "    A[t] = A[t] * float32(2)\n"
                      "  }\n"
                      "}\n";
  ts_func *low = lower_text(plain, &err);
  assert_non_null(low);
  char *printed = ts_func_print(low);
  assert_int_equal(count_barriers(printed), 0);
  free(printed);
  ts_func_free(low);
  /* the exchange happens only when the data says so: no barrier point */
  const char *guarded = "func g(A: float32[64]) {\n"
                        "  for t in range(64) thread(\"threadIdx.x\") {\n"
                        "    allocate S: float32[64] scope \"shared\" {\n"
                        "      if A[t] > float32(0) {\n"
                        "        S[t] = A[t]\n"
                        "        A[t] = S[63 - t]\n"
                        "      }\n"
                        "    }\n"
                        "  }\n"
                        "}\n";
  assert_null(lower_text(guarded, &err));
  assert_int_equal(err.code, TS_EUNSUPPORTED);
  assert_non_null(strstr(err.msg, "shared buffer 'S'"));
  assert_non_null(strstr(err.msg, "if"));
}

/* The hand-written warp-per-row softmax of tests/codegen/gpu (its PTX is
 * checked by tests/codegen/test_ptx.c) is a softmax: lowered, it keeps its
 * two barriers (lane 0 hands the row's maximum and sum to the warp through
 * shared memory) and gets no more, and it runs race-free in the GPU mode
 * with the outputs of the softmax workload. */
static void test_softmax_fixture(void **state) {
  (void)state;
  FILE *fp = fopen(TS_SOURCE_DIR "/tests/codegen/gpu/softmax.tir", "rb");
  assert_non_null(fp);
  char text[8192];
  size_t n = fread(text, 1, sizeof text - 1, fp);
  fclose(fp);
  text[n] = 0;
  ts_error err;
  ts_func *low = lower_text(text, &err);
  if (!low) printf("%s\n", err.msg);
  assert_non_null(low);
  char *printed = ts_func_print(low);
  assert_int_equal(count_barriers(printed), 2);
  free(printed);
  ts_workload *w = tu_workload("softmax N=64 D=256");
  ts_rt_args *ref = tu_reference(w->func, 5);
  ts_rt_arg_spec *specs = tu_specs(w->func);
  ts_rt_args *got = NULL;
  OK(ts_rt_args_create(specs, ts_func_n_params(w->func), 5, &got, &err));
  int rc = ts_interp_run_gpu(low, ts_rt_args_data(got), ts_rt_args_count(got),
                             NULL, &err);
  if (!rc) rc = ts_rt_args_compare(got, ref, &err);
  if (rc) printf("%s\n", err.msg);
  OK(rc);
  /* the outputs are below the compare's absolute tolerance (about 1/256):
   * a lane missing from the sum must show, so relative errors are checked */
  const float *y = ts_rt_args_data(got)[1], *want = ts_rt_args_data(ref)[1];
  for (int i = 0; i < 64 * 256; i++)
    if (fabsf(y[i] - want[i]) > 1e-5f * fabsf(want[i]) + 1e-12f) {
      printf("element %d: got %.9g, want %.9g\n", i, y[i], want[i]);
      fail();
    }
  ts_rt_args_free(got);
  free(specs);
  ts_rt_args_free(ref);
  ts_workload_free(w);
  ts_func_free(low);
}

/* Parses a scheduled TIR text. */
static ts_func *parse_text(const char *text) {
  ts_func *f = NULL;
  ts_error err;
  int rc = ts_func_parse(text, strlen(text), "test", &f, &err);
  if (rc) printf("%s\n", err.msg);
  OK(rc);
  return f;
}

/* Runs f lowered in the GPU mode on seeded inputs; returns whether its
 * outputs equal the serial interpreter's on f. */
static bool gpu_mode_matches(const ts_func *f) {
  ts_rt_args *ref = tu_reference(f, 11);
  assert_non_null(ref);
  ts_rt_arg_spec *specs = tu_specs(f);
  ts_error err;
  ts_lower_options lo = ts_lower_defaults();
  ts_func *low = ts_lower(f, &lo, &err);
  assert_non_null(low);
  ts_rt_args *got = NULL;
  OK(ts_rt_args_create(specs, ts_func_n_params(f), 11, &got, &err));
  int rc = ts_interp_run_gpu(low, ts_rt_args_data(got), ts_rt_args_count(got),
                             NULL, &err);
  if (rc) printf("%s\n", err.msg);
  OK(rc);
  bool same = ts_rt_args_compare(got, ref, &err) == TS_OK;
  ts_rt_args_free(got);
  ts_func_free(low);
  free(specs);
  ts_rt_args_free(ref);
  return same;
}

/* verify_gpu_code on per-thread buffers (hand-built candidates): a row
 * maximum reduced in a nest of its own, one row per thread, then read by
 * the threads of another nest (the old softmax defect) computes wrong rows
 * in the GPU mode and is rejected, naming the buffer; the same reduction
 * computed in the reading nest's thread block, by every thread, is
 * accepted and right. Partial results written under one threadIdx loop and
 * read under another are rejected in a global buffer and accepted in a
 * shared one (the barrier pass orders those). */
static void test_private_buffers(void **state) {
  (void)state;
  ts_target *t = NULL;
  ts_error err;
  OK(ts_target_parse("cuda -arch=sm_80", &t, &err));
  const char *two_nests =
      "func two_nests(X: float32[4, 64], Y: float32[4, 64]) {\n"
      "  block root() {\n"
      "    alloc rowmax: float32[4]\n"
      "    for i_0 in range(1) thread(\"blockIdx.x\") {\n"
      "      for i_1 in range(4) thread(\"threadIdx.x\") {\n"
      "        for k in range(64) {\n"
      "          block rowmax(vi: spatial(4) = i_0 * 4 + i_1,\n"
      "                       vk: reduce(64) = k) {\n"
      "            init {\n"
      "              rowmax[vi] = float32(-inf)\n"
      "            }\n"
      "            rowmax[vi] = max(rowmax[vi], X[vi, vk])\n"
      "          }\n"
      "        }\n"
      "      }\n"
      "    }\n"
      "    for i in range(4) thread(\"blockIdx.x\") {\n"
      "      for j in range(64) thread(\"threadIdx.x\") {\n"
      "        block Y(vi: spatial(4) = i, vj: spatial(64) = j) {\n"
      "          Y[vi, vj] = X[vi, vj] - rowmax[vi]\n"
      "        }\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n";
  ts_func *f = parse_text(two_nests);
  assert_false(gpu_mode_matches(f));
  ts_error_clear(&err);
  assert_int_equal(ts_verify_gpu(f, t, NULL, &err), TS_ESCHEDULE);
  assert_non_null(strstr(err.msg, "buffer 'rowmax'"));
  assert_non_null(strstr(err.msg, "'i_0' (blockIdx.x)"));
  ts_func_free(f);

  const char *fused =
      "func fused(X: float32[4, 64], Y: float32[4, 64]) {\n"
      "  block root() {\n"
      "    alloc rowmax: float32[4]\n"
      "    for i in range(4) thread(\"blockIdx.x\") {\n"
      "      for k in range(64) {\n"
      "        block rowmax(vi: spatial(4) = i, vk: reduce(64) = k) {\n"
      "          init {\n"
      "            rowmax[vi] = float32(-inf)\n"
      "          }\n"
      "          rowmax[vi] = max(rowmax[vi], X[vi, vk])\n"
      "        }\n"
      "      }\n"
      "      for j in range(64) thread(\"threadIdx.x\") {\n"
      "        block Y(vi: spatial(4) = i, vj: spatial(64) = j) {\n"
      "          Y[vi, vj] = X[vi, vj] - rowmax[vi]\n"
      "        }\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n";
  f = parse_text(fused);
  assert_true(gpu_mode_matches(f));
  OK(ts_verify_gpu(f, t, NULL, &err));
  ts_func_free(f);

  /* each thread reads the element the mirror thread wrote */
  const char *exchange_fmt =
      "func exchange(X: float32[4, 64], Y: float32[4, 64]) {\n"
      "  block root() {\n"
      "    alloc part: float32[4, 64]%s\n"
      "    for i in range(4) thread(\"blockIdx.x\") {\n"
      "      for t in range(64) thread(\"threadIdx.x\") {\n"
      "        block part(vi: spatial(4) = i, vt: spatial(64) = t) {\n"
      "          part[vi, vt] = X[vi, vt] * float32(2)\n"
      "        }\n"
      "      }\n"
      "      for j in range(64) thread(\"threadIdx.x\") {\n"
      "        block Y(vi: spatial(4) = i, vj: spatial(64) = j) {\n"
      "          Y[vi, vj] = part[vi, 63 - vj]\n"
      "        }\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n";
  char text[4096];
  snprintf(text, sizeof text, exchange_fmt, "");
  f = parse_text(text);
  assert_false(gpu_mode_matches(f));
  assert_int_equal(ts_verify_gpu(f, t, NULL, &err), TS_ESCHEDULE);
  assert_non_null(strstr(err.msg, "buffer 'part'"));
  assert_non_null(strstr(err.msg, "'t' (threadIdx.x)"));
  ts_func_free(f);
  snprintf(text, sizeof text, exchange_fmt, " scope \"shared\"");
  f = parse_text(text);
  assert_true(gpu_mode_matches(f));
  OK(ts_verify_gpu(f, t, NULL, &err));
  ts_func_free(f);
  ts_target_free(t);
}

static void test_matmul(void **state) {
  (void)state;
  int n = 0;
  char names[16][256];
  check_gpu("matmul M=256 N=256 K=256", "sm_80", 2, &n, names);
  assert_int_equal(n, 2); /* with and without shared read caches */
  for (int i = 0; i < n; i++) assert_null(strstr(names[i], "mma"));
}

static void test_tensor_core_variant(void **state) {
  (void)state;
  ts_workload *w = tu_workload("matmul M=128 N=128 K=128 dtype=float16");
  ts_error err;
  const char *arch[2] = {"cuda -arch=sm_80", "cuda -arch=sm_75"};
  for (int a = 0; a < 2; a++) {
    ts_target *t = NULL;
    OK(ts_target_parse(arch[a], &t, &err));
    ts_design_space *s = NULL;
    int n = 0;
    OK(ts_space_generate(w->func, t, NULL, &s, &n, &err));
    assert_int_equal(has_intrin(s, n, "mma_m16n8k16_f16"), a == 0);
    ts_design_spaces_free(s, n);
    ts_target_free(t);
  }
  ts_workload_free(w);
  int n = 0;
  char names[16][256];
  check_gpu("matmul M=128 N=128 K=128 dtype=float16", "sm_80", 2, &n, names);
  bool mma = false;
  for (int i = 0; i < n; i++) mma |= strstr(names[i], "mma_m16n8k16_f16") != 0;
  assert_true(mma);
}

/* Whether some space fuses every row reduction of a workload of several
 * stages into its consumer's thread block (names: "BLOCK: cross-thread
 * reduction in CONSUMER's thread block", one per reduction). */
static bool all_fused(char names[][256], int n, int reductions) {
  for (int i = 0; i < n; i++) {
    int fused = 0;
    for (const char *p = strstr(names[i], "'s thread block"); p;
         p = strstr(p + 1, "'s thread block"))
      fused++;
    if (fused == reductions) return true;
  }
  return false;
}

static void test_other_workloads(void **state) {
  (void)state;
  int n = 0;
  char names[16][256];
  check_gpu("softmax N=64 D=1024", "sm_80", 2, &n, names);
  assert_true(all_fused(names, n, 2)); /* the row maximum and sum */
  check_gpu("layer_norm N=64 D=768", "sm_80", 2, &n, names);
  assert_true(all_fused(names, n, 2)); /* the row sum and square sum */
  check_gpu("dense M=128 N=128 K=128", "sm_80", 2, &n, names);
  assert_int_equal(n, 2);
  for (int i = 0; i < n; i++) assert_non_null(strstr(names[i], "fused Y"));
  check_gpu("elementwise op=gelu shape=128x256", "sm_80", 2, NULL, NULL);
  check_gpu("conv2d_nhwc N=1 H=14 W=14 CI=32 CO=32 KH=3 KW=3 pad=1", "sm_80", 1,
            NULL, NULL);
}

/* Layer norm's two sums, cross-thread: the partial results of both are
 * accumulated in one loop under the one threadIdx.x loop (fuse_siblings),
 * so each thread reads its elements of the row once. The candidates run
 * correctly in the GPU mode and pass ptxas in test_runs_correctly and
 * test_other_workloads. */
static void test_one_pass_rows(void **state) {
  (void)state;
  ts_workload *w = tu_workload("layer_norm N=4 D=256");
  ts_target *t = NULL;
  ts_error err;
  OK(ts_target_parse("cuda -arch=sm_80", &t, &err));
  ts_design_space *s = NULL;
  int n = 0, one_pass = 0;
  OK(ts_space_generate(w->func, t, NULL, &s, &n, &err));
  for (int i = 0; i < n; i++) {
    if (!strstr(s[i].name, "x_sum: cross-thread") ||
        !strstr(s[i].name, "sq_sum: cross-thread"))
      continue;
    char *script = ts_trace_print(s[i].trace);
    assert_non_null(strstr(script, "fuse_siblings("));
    free(script);
    ts_candidate c;
    OK(ts_candidate_sample(&s[i], i, w->func, t, 11, &c, &err));
    const ts_func *f = ts_sched_func(c.sched);
    const ts_stmt *lx = tu_inner_loop(f, "x_sum_rf");
    assert_non_null(lx);
    assert_ptr_equal(lx, tu_inner_loop(f, "sq_sum_rf"));
    assert_int_equal(ts_for_kind_of(lx), TS_FOR_THREAD);
    assert_string_equal(ts_for_thread_tag(lx), "threadIdx.x");
    ts_candidate_clear(&c);
    one_pass++;
  }
  assert_true(one_pass > 0);
  ts_design_spaces_free(s, n);
  ts_target_free(t);
  ts_workload_free(w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matmul),
      cmocka_unit_test(test_tensor_core_variant),
      cmocka_unit_test(test_other_workloads),
      cmocka_unit_test(test_one_pass_rows),
      cmocka_unit_test(test_runs_correctly),
      cmocka_unit_test(test_barrier_pass),
      cmocka_unit_test(test_private_buffers),
      cmocka_unit_test(test_softmax_fixture),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
