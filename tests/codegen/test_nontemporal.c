/*
 * test_nontemporal.c — the "pragma_nontemporal" loop annotation
 * (TS_ANN_NONTEMPORAL): on x86 the whole-vector stores to a parameter in the
 * loop become non-temporal stores, each behind a test of its address's
 * alignment, and a store fence follows (at the end of each parallel chunk,
 * or after a serial loop). Rows of 20 floats start 32-byte aligned every
 * other row, so both the non-temporal and the ordinary path run, and the
 * last vector of a row is masked: the output must match the reference
 * interpreter in every case. Stores to the kernel's own buffers stay
 * ordinary, an annotation of 0 changes nothing, and a GPU target ignores it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "check.h"

#define OK(x) assert_int_equal((x), TS_OK)

/* Y = 2 X + 1 over rows of 20, three vectors of 8 per row (the last one
 * guarded); `loop` is the row loop's header after `for i in range(64)`. */
static char *scale_text(const char *loop) {
  static const char fmt[] =
      "func nt(X: float32[64, 20], Y: float32[64, 20]) {\n"
      "  block root() {\n"
      "    reads(X[0 +: 64, 0 +: 20])\n"
      "    writes(Y[0 +: 64, 0 +: 20])\n"
      "    for i in range(64) %s {\n"
      "      for jo in range(3) {\n"
      "        for ji in range(8) vectorized {\n"
      "          block Y(vi: spatial(64) = i, vj: spatial(20) = jo * 8 + ji) "
      "where jo * 8 + ji < 20 {\n"
      "            reads(X[vi, vj])\n"
      "            writes(Y[vi, vj])\n"
      "            Y[vi, vj] = X[vi, vj] * float32(2) + float32(1)\n"
      "          }\n"
      "        }\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n";
  size_t n = sizeof fmt + strlen(loop);
  char *s = malloc(n);
  snprintf(s, n, fmt, loop);
  return s;
}

static ts_func *parse(const char *text) {
  ts_func *f = check_parse(text, "nt.tir");
  assert_non_null(f);
  return f;
}

static char *llvm_ir(const ts_func *f) {
  char *ir = check_llvm_ir(f);
  assert_non_null(ir);
  return ir;
}

static void check_run(const ts_func *f, int threads) {
  OK(check_host_run(f, threads, 11));
}

/* A parallel row loop: non-temporal stores, a fence in the outlined
 * chunk, and the same values as the interpreter on 1 and 2 threads. */
static void test_parallel(void **state) {
  (void)state;
  char *text = scale_text("parallel annotate {\"pragma_nontemporal\": 1}");
  ts_func *f = parse(text);
  char *ir = llvm_ir(f);
  assert_true(check_count(ir, "!nontemporal") > 0);
  assert_true(check_count(ir, "llvm.x86.sse.sfence") > 0);
  /* the ordinary store for an unaligned row is there too */
  assert_true(check_count(ir, "store <8 x float>") >
              check_count(ir, "!nontemporal"));
  free(ir);
  check_run(f, 1);
  check_run(f, 2);
  ts_func_free(f);
  free(text);
}

/* A serial row loop: the fence follows the loop. */
static void test_serial(void **state) {
  (void)state;
  char *text = scale_text("annotate {\"pragma_nontemporal\": 1}");
  ts_func *f = parse(text);
  char *ir = llvm_ir(f);
  assert_true(check_count(ir, "!nontemporal") > 0);
  assert_true(check_count(ir, "llvm.x86.sse.sfence") > 0);
  free(ir);
  check_run(f, 1);
  ts_func_free(f);
  free(text);
}

/* Value 0, or no annotation: ordinary stores, no fence. */
static void test_off(void **state) {
  (void)state;
  const char *loops[2] = {"parallel annotate {\"pragma_nontemporal\": 0}",
                          "parallel"};
  for (int k = 0; k < 2; k++) {
    char *text = scale_text(loops[k]);
    ts_func *f = parse(text);
    char *ir = llvm_ir(f);
    assert_int_equal(check_count(ir, "!nontemporal"), 0);
    assert_int_equal(check_count(ir, "sfence"), 0);
    free(ir);
    check_run(f, 2);
    ts_func_free(f);
    free(text);
  }
}

/* Under the annotation, the vector stores to the kernel's own buffer T
 * stay ordinary: only parameters are written past the caches. */
static void test_local_buffer(void **state) {
  (void)state;
  static const char text[] =
      "func nt(X: float32[64, 16], Y: float32[64]) {\n"
      "  block root() {\n"
      "    reads(X[0 +: 64, 0 +: 16])\n"
      "    writes(Y[0 +: 64])\n"
      "    alloc T: float32[64, 16]\n"
      "    for i in range(64) annotate {\"pragma_nontemporal\": 1} {\n"
      "      for j in range(16) vectorized {\n"
      "        block T(vi: spatial(64) = i, vj: spatial(16) = j) {\n"
      "          reads(X[vi, vj])\n"
      "          writes(T[vi, vj])\n"
      "          T[vi, vj] = X[vi, vj] * float32(3)\n"
      "        }\n"
      "      }\n"
      "      block Y(vi: spatial(64) = i) {\n"
      "        reads(T[vi, 0 +: 16])\n"
      "        writes(Y[vi])\n"
      "        Y[vi] = T[vi, 0] + T[vi, 15]\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n";
  ts_func *f = parse(text);
  char *ir = llvm_ir(f);
  assert_int_equal(check_count(ir, "!nontemporal"), 0);
  free(ir);
  check_run(f, 1);
  ts_func_free(f);
}

/* The lines of ir holding both a and b. */
static int count_both(const char *ir, const char *a, const char *b) {
  int n = 0;
  for (const char *l = ir; l && *l;) {
    const char *e = strchr(l, '\n');
    size_t len = e ? (size_t)(e - l) : strlen(l);
    char *line = strndup(l, len);
    if (strstr(line, a) && strstr(line, b)) n++;
    free(line);
    l = e ? e + 1 : NULL;
  }
  return n;
}

/* An accumulator's init under the annotation: Y set to zero, then summed
 * into over k (what a promoted register tile loads back). The constant
 * init stays an ordinary store, which the sum's loads then take from the
 * store (and LLVM drops): stored past the caches, LLVM kept it where the
 * tile's loads sat behind the padding's branches, and each load read it
 * back from memory (a depthwise conv ran at 0.15 x oneDNN). The sum's
 * stores are still non-temporal. */
static void test_constant_init(void **state) {
  (void)state;
  static const char text[] =
      "func nt(X: float32[64, 4, 16], Y: float32[64, 16]) {\n"
      "  block root() {\n"
      "    reads(X[0 +: 64, 0 +: 4, 0 +: 16])\n"
      "    writes(Y[0 +: 64, 0 +: 16])\n"
      "    for i in range(64) parallel annotate {\"pragma_nontemporal\": 1} {\n"
      "      for j in range(16) vectorized {\n"
      "        block Y0(vi: spatial(64) = i, vj: spatial(16) = j) {\n"
      "          reads()\n"
      "          writes(Y[vi, vj])\n"
      "          Y[vi, vj] = float32(0)\n"
      "        }\n"
      "      }\n"
      "      for k in range(4) {\n"
      "        for j in range(16) vectorized {\n"
      "          block Y(vi: spatial(64) = i, vk: reduce(4) = k, "
      "vj: spatial(16) = j) {\n"
      "            reads(Y[vi, vj], X[vi, vk, vj])\n"
      "            writes(Y[vi, vj])\n"
      "            Y[vi, vj] = Y[vi, vj] + X[vi, vk, vj]\n"
      "          }\n"
      "        }\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n";
  ts_func *f = parse(text);
  /* (as emitted, before LLVM's passes drop the init's stores) */
  char *ir = check_emitted_ir_for(f, "llvm -mcpu=x86-64-v3");
  assert_non_null(ir);
  assert_true(check_count(ir, "zeroinitializer") > 0);
  assert_int_equal(count_both(ir, "zeroinitializer", "!nontemporal"), 0);
  assert_true(check_count(ir, "!nontemporal") > 0);
  free(ir);
  check_run(f, 1);
  check_run(f, 2);
  ts_func_free(f);
}

/* A GPU target has no such stores: the annotation changes nothing there
 * and the kernel still builds. */
static void test_gpu_ignores(void **state) {
  (void)state;
  char *text = scale_text("annotate {\"pragma_nontemporal\": 1}");
  /* a GPU kernel's loops are bound to threads */
  char *gpu = strdup(text);
  char *p = strstr(gpu, "for i in range(64) annotate");
  assert_non_null(p);
  static const char bound[] = "for i in range(64) thread(\"blockIdx.x\")";
  size_t head = (size_t)(p - gpu);
  const char *rest = p + strlen("for i in range(64)");
  size_t n = head + strlen(bound) + strlen(rest) + 1;
  char *src = malloc(n);
  snprintf(src, n, "%.*s%s%s", (int)head, gpu, bound, rest);
  ts_func *f = parse(src);
  ts_error err;
  ts_target *t = NULL;
  OK(ts_target_parse("cuda -arch=sm_80", &t, &err));
  ts_build_options o = ts_build_defaults();
  ts_build_result br = {0};
  int rc = ts_build(f, t, &o, &br, &err);
  if (rc) printf("build: %s\n", err.msg);
  OK(rc);
  ts_build_result_clear(&br);
  ts_target_free(t);
  ts_func_free(f);
  free(src);
  free(gpu);
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parallel),    cmocka_unit_test(test_serial),
      cmocka_unit_test(test_off),         cmocka_unit_test(test_local_buffer),
      cmocka_unit_test(test_gpu_ignores), cmocka_unit_test(test_constant_init),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
