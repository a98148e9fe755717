/*
 * test_lane_fold.c — the last step of a row reduction, a serial loop that
 * folds a row's vector partial results (P[i, 0 : L]) into one scalar, is
 * emitted on CPUs as one vector load and a vector reduction
 * (codegen/emit_reduce.c): llvm.vector.reduce.fadd for a sum, a tree of
 * halves for maxnum and minnum (whose LLVM reduction, without no-NaN
 * flags, is a chain of scalar steps). Loops that are not such folds (a
 * maximum over lanes that are not a power of two, a stride of 2) stay
 * loops. Every kernel matches the reference interpreter.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "check.h"

#define OK(x) assert_int_equal((x), TS_OK)

/* "x + y" for op "add", else "op(x, y)"; y has one %d, filled by k. */
static void combine(const char *op, char *out, size_t size, const char *x,
                    const char *y, int k) {
  char yk[64];
  snprintf(yk, sizeof yk, y, k);
  if (!strcmp(op, "add"))
    snprintf(out, size, "%s + %s", x, yk);
  else
    snprintf(out, size, "%s(%s, %s)", op, x, yk);
}

/* S[i] = OP over j < 8 * L of X[i, j], by partial results P[i, 0 : L]
 * (L lanes) and then a fold of P[i, k * STRIDE] over k < L / STRIDE. */
static char *fold_text(const char *op, const char *init, int lanes,
                       int stride) {
  static const char fmt[] =
      "func fold(X: float32[6, %d], S: float32[6]) {\n"
      "  block root() {\n"
      "    reads(X[0 +: 6, 0 +: %d])\n"
      "    writes(S[0 +: 6])\n"
      "    alloc P: float32[6, %d]\n"
      "    for i in range(6) {\n"
      "      for k0 in range(8) {\n"
      "        for k1 in range(%d) vectorized {\n"
      "          block P(vi: spatial(6) = i, vk0: reduce(8) = k0, "
      "vk1: spatial(%d) = k1) {\n"
      "            reads(P[vi, vk1], X[vi, vk0 * %d + vk1])\n"
      "            writes(P[vi, vk1])\n"
      "            init {\n"
      "              P[vi, vk1] = %s\n"
      "            }\n"
      "            P[vi, vk1] = %s\n"
      "          }\n"
      "        }\n"
      "      }\n"
      "      for k in range(%d) {\n"
      "        block S(vi: spatial(6) = i, vk: reduce(%d) = k) {\n"
      "          reads(S[vi], P[vi, vk * %d])\n"
      "          writes(S[vi])\n"
      "          init {\n"
      "            S[vi] = %s\n"
      "          }\n"
      "          S[vi] = %s\n"
      "        }\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n";
  int n = 8 * lanes, folds = lanes / stride;
  char a[128], b[128];
  combine(op, a, sizeof a, "P[vi, vk1]", "X[vi, vk0 * %d + vk1]", lanes);
  combine(op, b, sizeof b, "S[vi]", "P[vi, vk * %d]", stride);
  size_t size = sizeof fmt + 512;
  char *s = malloc(size);
  snprintf(s, size, fmt, n, n, lanes, lanes, lanes, lanes, init, a, folds,
           folds, stride, init, b);
  return s;
}

static ts_func *parse_fold(const char *op, const char *init, int lanes,
                           int stride) {
  char *text = fold_text(op, init, lanes, stride);
  ts_func *f = check_parse(text, "fold.tir");
  free(text);
  assert_non_null(f);
  return f;
}

/* The optimized IR of f, checked to hold `want` and not `lacks`, and f run
 * against the reference interpreter. */
static void check_fold(ts_func *f, const char *want, const char *lacks) {
  char *ir = check_llvm_ir(f);
  assert_non_null(ir);
  if (want && !check_count(ir, want)) fail_msg("no '%s' in:\n%s", want, ir);
  if (lacks && check_count(ir, lacks)) fail_msg("'%s' in:\n%s", lacks, ir);
  free(ir);
  OK(check_host_run(f, 1, 3));
  ts_func_free(f);
}

static void test_sum(void **state) {
  (void)state;
  ts_func *f = parse_fold("add", "float32(0)", 16, 1);
  check_fold(f, "llvm.vector.reduce.fadd.v16f32", NULL);
}

static void test_max_tree(void **state) {
  (void)state;
  ts_func *f = parse_fold("max", "float32(-inf)", 16, 1);
  /* the halves: 8, 4, 2 and 1 lanes */
  check_fold(f, "llvm.maxnum.v8f32", "llvm.vector.reduce.fmax");
}

static void test_min_tree(void **state) {
  (void)state;
  ts_func *f = parse_fold("min", "float32(inf)", 32, 1);
  check_fold(f, "llvm.minnum.v16f32", "llvm.vector.reduce.fmin");
}

/* 12 lanes: no tree of halves, the loop stays (and is right) */
static void test_max_not_power_of_two(void **state) {
  (void)state;
  ts_func *f = parse_fold("max", "float32(-inf)", 12, 1);
  check_fold(f, NULL, "llvm.maxnum.v6f32");
}

/* every other lane: not consecutive elements, the loop stays */
static void test_strided(void **state) {
  (void)state;
  ts_func *f = parse_fold("add", "float32(0)", 16, 2);
  check_fold(f, NULL, "llvm.vector.reduce.fadd.v8f32");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sum),
      cmocka_unit_test(test_max_tree),
      cmocka_unit_test(test_min_tree),
      cmocka_unit_test(test_max_not_power_of_two),
      cmocka_unit_test(test_strided),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
