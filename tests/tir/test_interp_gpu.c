/*
 * test_interp_gpu.c — the reference interpreter's GPU execution mode
 * (ts_interp_run_gpu): the hand-scheduled shared-memory matmul of
 * tests/codegen/gpu matches the serial interpreter on the plain matmul;
 * the same program without either barrier is reported as a data race on
 * the buffer it names; a barrier under a thread-index guard is reported as
 * divergent; a shared-memory tree reduction with barriers sums correctly
 * (and races without them); a warp shuffle reduction sums a warp; shared
 * memory is one per thread block and starts poisoned; thread loops narrower
 * than the block are guarded; launch limits are refused; the serial
 * interpreter refuses the GPU intrinsics.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tir/tir.h"

#define OK(x) assert_int_equal((x), TS_OK)

static char *read_text(const char *path) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
  s[n] = 0;
  fclose(f);
  return s;
}

static ts_func *parse(const char *text) {
  ts_func *f = NULL;
  ts_error err;
  int rc = ts_func_parse(text, strlen(text), "test", &f, &err);
  if (rc) printf("parse: %s\n", err.msg);
  OK(rc);
  return f;
}

/* Runs f in the GPU mode; returns the code, message in err. */
static int run_gpu(const ts_func *f, void *const *args, int n, ts_error *err) {
  ts_error_clear(err);
  int rc = ts_interp_run_gpu(f, args, n, NULL, err);
  if (rc) printf("gpu run: %s\n", err->msg);
  return rc;
}

/* ---- the hand-written shared-memory matmul ---- */

#define MM 128

/* The matmul text with the n-th barrier (1-based; 0: none) removed. */
static char *matmul_text(int drop) {
  char *s = read_text(TS_SOURCE_DIR "/tests/codegen/gpu/matmul.tir");
  const char *line = "evaluate call<int32>(\"tessera.cuda.syncthreads\")";
  char *p = s;
  for (int k = 1; k <= drop; k++) {
    p = strstr(p, line);
    assert_non_null(p);
    if (k == drop)
      memset(p, ' ', strlen(line));
    else
      p += strlen(line);
  }
  return s;
}

static void test_matmul_matches_serial(void **state) {
  (void)state;
  char *text = matmul_text(0);
  ts_func *f = parse(text);
  free(text);
  ts_workload *w = NULL;
  ts_error err;
  OK(ts_workload_from_spec("matmul M=128 N=128 K=128", &w, &err));
  size_t n = (size_t)MM * MM;
  float *a = malloc(n * 4), *b = malloc(n * 4), *c = malloc(n * 4),
        *want = malloc(n * 4);
  ts_host_fill_random(a, TS_FLOAT32, (int64_t)n, 1);
  ts_host_fill_random(b, TS_FLOAT32, (int64_t)n, 2);
  memset(c, 0, n * 4);
  void *ref_args[3] = {a, b, want};
  OK(ts_interp_run(w->func, ref_args, 3, NULL, &err));
  void *args[3] = {a, b, c};
  OK(run_gpu(f, args, 3, &err));
  int64_t bad = 0;
  double max_err = 0;
  assert_int_equal(
      ts_host_compare(c, want, TS_FLOAT32, (int64_t)n, &bad, &max_err), 0);
  /* the serial interpreter has no barrier */
  assert_int_equal(ts_interp_run(f, args, 3, NULL, &err), TS_EUNSUPPORTED);
  assert_non_null(strstr(err.msg, "tessera.cuda.syncthreads"));
  assert_non_null(strstr(err.msg, "ts_interp_run_gpu"));
  free(a);
  free(b);
  free(c);
  free(want);
  ts_workload_free(w);
  ts_func_free(f);
}

/* Without the first barrier a thread reads a tile element another thread
 * wrote (read after write); without the second, the next iteration's copy
 * overwrites an element other threads still read (write after read). */
static void test_matmul_missing_barrier_races(void **state) {
  (void)state;
  size_t n = (size_t)MM * MM;
  float *a = malloc(n * 4), *b = malloc(n * 4), *c = malloc(n * 4);
  ts_host_fill_random(a, TS_FLOAT32, (int64_t)n, 1);
  ts_host_fill_random(b, TS_FLOAT32, (int64_t)n, 2);
  void *args[3] = {a, b, c};
  const char *kind[3] = {NULL, "written by thread", "read by thread"};
  for (int drop = 1; drop <= 2; drop++) {
    char *text = matmul_text(drop);
    ts_func *f = parse(text);
    free(text);
    ts_error err;
    assert_int_equal(run_gpu(f, args, 3, &err), TS_ERANGE);
    assert_non_null(strstr(err.msg, "data race on shared buffer 'As'"));
    assert_non_null(strstr(err.msg, "element"));
    assert_non_null(strstr(err.msg, kind[drop]));
    assert_non_null(strstr(err.msg, "thread block (0, 0, 0)"));
    assert_non_null(strstr(err.msg, "no barrier in between"));
    ts_func_free(f);
  }
  free(a);
  free(b);
  free(c);
}

/* ---- divergence ---- */

/* Each block reverses its 32 elements through shared memory, with the
 * barrier under `if tx < GUARD`; DIVERGENT reads only the thread's own
 * element (no race, only the divergence to report). */
static const char *divergent_text =
    "func divergent(A: float32[64]) {\n"
    "  for bx in range(2) thread(\"blockIdx.x\") {\n"
    "    for tx in range(32) thread(\"threadIdx.x\") {\n"
    "      allocate S: float32[32] scope \"shared\" {\n"
    "        S[tx] = A[bx * 32 + tx]\n"
    "        if tx < 8  {\n"
    "          evaluate call<int32>(\"tessera.cuda.syncthreads\")\n"
    "        }\n"
    "        A[bx * 32 + tx] = S[DIVERGENT + (31 - tx) * REVERSE]\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

static void test_divergent_barrier(void **state) {
  (void)state;
  char *text = strdup(divergent_text);
  memcpy(strstr(text, "DIVERGENT"), "tx       ", 9);
  memcpy(strstr(text, "REVERSE"), "0      ", 7);
  ts_func *f = parse(text);
  free(text);
  float a[64] = {0};
  void *args[1] = {a};
  ts_error err;
  assert_int_equal(run_gpu(f, args, 1, &err), TS_ERANGE);
  assert_non_null(strstr(err.msg, "divergent barrier"));
  assert_non_null(strstr(err.msg, "(8, 0, 0)")); /* the first thread outside */
  ts_func_free(f);
  /* the same barrier outside the guard is fine, and reverses each block */
  text = strdup(divergent_text);
  memcpy(strstr(text, "DIVERGENT"), "0        ", 9);
  memcpy(strstr(text, "REVERSE"), "1      ", 7);
  memcpy(strstr(text, "if tx < 8 "), "if tx < 99", 10);
  f = parse(text);
  free(text);
  for (int i = 0; i < 64; i++) a[i] = (float)i;
  OK(run_gpu(f, args, 1, &err));
  for (int i = 0; i < 64; i++)
    assert_true(a[i] == (float)(i / 32 * 32 + 31 - i % 32));
  ts_func_free(f);
}

/* A barrier in a loop whose trip count depends on the thread: the threads
 * reach it different numbers of times. */
static void test_divergent_count(void **state) {
  (void)state;
  const char *text =
      "func counts(A: float32[32]) {\n"
      "  for tx in range(32) thread(\"threadIdx.x\") {\n"
      "    for i in range(tx % 2 + 1) {\n"
      "      evaluate call<int32>(\"tessera.cuda.syncthreads\")\n"
      "    }\n"
      "    A[tx] = float32(1)\n"
      "  }\n"
      "}\n";
  ts_func *f = parse(text);
  float a[32];
  void *args[1] = {a};
  ts_error err;
  assert_int_equal(run_gpu(f, args, 1, &err), TS_ERANGE);
  assert_non_null(strstr(err.msg, "divergent barrier"));
  ts_func_free(f);
}

/* ---- tree reduction in shared memory ---- */

/* 4 blocks of 64 threads; each block sums its 64 inputs by halving. With
 * `sync` the barriers are there. */
static char *tree_text(bool sync) {
  const char *barrier =
      sync ? "evaluate call<int32>(\"tessera.cuda.syncthreads\")\n" : "";
  size_t cap = 8192, len = 0;
  char *s = malloc(cap);
  len += (size_t)snprintf(s + len, cap - len,
                          "func tree(A: float32[256], S: float32[4]) {\n"
                          "  for bx in range(4) thread(\"blockIdx.x\") {\n"
                          "    for tx in range(64) thread(\"threadIdx.x\") {\n"
                          "      allocate P: float32[64] scope \"shared\" {\n"
                          "        P[tx] = A[bx * 64 + tx]\n%s",
                          barrier);
  for (int h = 32; h >= 1; h /= 2)
    len += (size_t)snprintf(s + len, cap - len,
                            "        if tx < %d {\n"
                            "          P[tx] = P[tx] + P[tx + %d]\n"
                            "        }\n%s",
                            h, h, barrier);
  snprintf(s + len, cap - len,
           "        if tx == 0 {\n"
           "          S[bx] = P[0]\n"
           "        }\n"
           "      }\n"
           "    }\n"
           "  }\n"
           "}\n");
  return s;
}

static void test_tree_reduction(void **state) {
  (void)state;
  char *text = tree_text(true);
  ts_func *f = parse(text);
  free(text);
  float a[256], sums[4];
  for (int i = 0; i < 256; i++) a[i] = (float)(i % 7) - 3.0f;
  void *args[2] = {a, sums};
  ts_error err;
  OK(run_gpu(f, args, 2, &err));
  for (int b = 0; b < 4; b++) {
    double want = 0;
    for (int i = 0; i < 64; i++) want += a[b * 64 + i];
    assert_true(fabs(sums[b] - want) < 1e-4);
  }
  ts_func_free(f);
  text = tree_text(false);
  f = parse(text);
  free(text);
  assert_int_equal(run_gpu(f, args, 2, &err), TS_ERANGE);
  assert_non_null(strstr(err.msg, "data race on shared buffer 'P'"));
  ts_func_free(f);
}

/* ---- warp shuffles ---- */

static void test_shuffle_reduction(void **state) {
  (void)state;
  /* lane i holds i; five shuffles down by 16, 8, 4, 2, 1 sum the warp into
   * lane 0 (a lane whose source is outside the warp keeps its value) */
  const char *text =
      "func warp(A: float32[64]) {\n"
      "  for tx in range(64) thread(\"threadIdx.x\") {\n"
      "    allocate v: float32[1] scope \"local\" {\n"
      "      v[0] = cast(float32, tx % 32)\n"
      "      v[0] = v[0] + call<float32>(\"tessera.cuda.shfl_down\", v[0], "
      "cast(int32, 16))\n"
      "      v[0] = v[0] + call<float32>(\"tessera.cuda.shfl_down\", v[0], "
      "cast(int32, 8))\n"
      "      v[0] = v[0] + call<float32>(\"tessera.cuda.shfl_down\", v[0], "
      "cast(int32, 4))\n"
      "      v[0] = v[0] + call<float32>(\"tessera.cuda.shfl_down\", v[0], "
      "cast(int32, 2))\n"
      "      v[0] = v[0] + call<float32>(\"tessera.cuda.shfl_down\", v[0], "
      "cast(int32, 1))\n"
      "      A[tx] = v[0]\n"
      "    }\n"
      "  }\n"
      "}\n";
  ts_func *f = parse(text);
  float a[64];
  void *args[1] = {a};
  ts_error err;
  OK(run_gpu(f, args, 1, &err));
  assert_true(a[0] == 496.0f && a[32] == 496.0f);
  assert_true(a[31] == 31.0f * 32); /* out of range every time: doubles */
  ts_func_free(f);
  /* a shuffle only half the warp reaches */
  const char *half = "func half(A: float32[32]) {\n"
                     "  for tx in range(32) thread(\"threadIdx.x\") {\n"
                     "    if tx < 16 {\n"
                     "      A[tx] = call<float32>(\"tessera.cuda.shfl_down\", "
                     "A[tx], 1)\n"
                     "    }\n"
                     "  }\n"
                     "}\n";
  f = parse(half);
  assert_int_equal(run_gpu(f, args, 1, &err), TS_ERANGE);
  assert_non_null(strstr(err.msg, "divergent warp shuffle"));
  ts_func_free(f);
}

/* ---- storage and thread loops ---- */

static void test_storage_and_guards(void **state) {
  (void)state;
  /* shared storage is one per block and starts poisoned (an element no
   * thread wrote reads as NaN); local storage is one per thread; a thread
   * loop narrower than the block runs only on the threads below its
   * extent; vthread iterates */
  const char *text =
      "func st(A: float32[2, 64], B: float32[2, 64], N: int32[2, 64]) {\n"
      "  for bx in range(2) thread(\"blockIdx.x\") {\n"
      "    allocate S: float32[64] scope \"shared\" {\n"
      "      for tx in range(32) thread(\"threadIdx.x\") {\n"
      "        S[tx] = cast(float32, bx * 100 + tx)\n"
      "      }\n"
      "      evaluate call<int32>(\"tessera.cuda.syncthreads\")\n"
      "      for tx in range(64) thread(\"threadIdx.x\") {\n"
      "        A[bx, tx] = S[tx]\n"
      "        allocate L: int32[1] scope \"local\" {\n"
      "          for v in range(3) thread(\"vthread\") {\n"
      "            L[0] = L[0] + int32(1)\n"
      "          }\n"
      "          N[bx, tx] = L[0]\n"
      "        }\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "  for tx in range(64) thread(\"threadIdx.x\") {\n"
      "    B[0, tx] = float32(1)\n"
      "  }\n"
      "}\n";
  ts_func *f = parse(text);
  float a[2][64], b[2][64];
  int32_t cnt[2][64];
  memset(b, 0, sizeof b);
  void *args[3] = {a, b, cnt};
  ts_error err;
  OK(run_gpu(f, args, 3, &err));
  for (int bx = 0; bx < 2; bx++)
    for (int t = 0; t < 64; t++) {
      if (t < 32)
        assert_true(a[bx][t] == (float)(bx * 100 + t));
      else
        assert_true(isnan(a[bx][t]));
      assert_int_equal(cnt[bx][t], 3);
    }
  /* the last loop is outside the blockIdx loop: every block runs it */
  for (int t = 0; t < 64; t++) assert_true(b[0][t] == 1.0f);
  ts_func_free(f);
}

/* f (text) run on one float32[4096] argument fails with `code` and a
 * message holding `needle`. */
static void expect_refusal(const char *text, const ts_interp_options *o,
                           int code, const char *needle) {
  static float a[4096];
  void *args[1] = {a};
  ts_func *f = parse(text);
  ts_error err;
  assert_int_equal(ts_interp_run_gpu(f, args, 1, o, &err), code);
  assert_non_null(strstr(err.msg, needle));
  ts_func_free(f);
}

static void test_limits(void **state) {
  (void)state;
  expect_refusal("func big(A: float32[4096]) {\n"
                 "  for i in range(2048) thread(\"threadIdx.x\") {\n"
                 "    A[i] = float32(1)\n"
                 "  }\n"
                 "}\n",
                 NULL, TS_EINVAL, "2048 threads per block");
  expect_refusal("func grid(A: float32[4096]) {\n"
                 "  for i in range(100000) thread(\"blockIdx.y\") {\n"
                 "    A[0] = float32(1)\n"
                 "  }\n"
                 "}\n",
                 NULL, TS_EINVAL, "grid");
  expect_refusal("func tag(A: float32[4096]) {\n"
                 "  for i in range(4) thread(\"warpIdx.x\") {\n"
                 "    A[i] = float32(1)\n"
                 "  }\n"
                 "}\n",
                 NULL, TS_EINVAL, "warpIdx.x");
  /* the step limit covers every thread */
  ts_interp_options o = {.max_steps = 100};
  expect_refusal("func steps(A: float32[4096]) {\n"
                 "  for i in range(256) thread(\"threadIdx.x\") {\n"
                 "    A[i] = float32(1)\n"
                 "  }\n"
                 "}\n",
                 &o, TS_ERANGE, "step limit");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matmul_matches_serial),
      cmocka_unit_test(test_matmul_missing_barrier_races),
      cmocka_unit_test(test_divergent_barrier),
      cmocka_unit_test(test_divergent_count),
      cmocka_unit_test(test_tree_reduction),
      cmocka_unit_test(test_shuffle_reduction),
      cmocka_unit_test(test_storage_and_guards),
      cmocka_unit_test(test_limits),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
