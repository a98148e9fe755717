/*
 * test_no_unroll.c — the "pragma_no_unroll" loop annotation
 * (TS_ANN_NO_UNROLL): the loop stays a loop. Auto-unroll
 * ("pragma_auto_unroll_max_step" on an outer loop) leaves it alone, and the
 * emitter marks it llvm.loop.unroll.disable, so LLVM keeps it too (the
 * metadata survives in the optimized IR only on a loop that is still
 * there). Without the annotation the same loop is unrolled by auto-unroll.
 * Either way the values are the interpreter's, on one thread and two.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "check.h"

#define OK(x) assert_int_equal((x), TS_OK)

/* S[i] = sum over k of X[i, k], the row's 8 steps in the loop k; `ann` is
 * k's header after `for k in range(8)`. */
static char *sum_text(const char *ann) {
  static const char fmt[] =
      "func rs(X: float32[64, 8], S: float32[64]) {\n"
      "  block root() {\n"
      "    reads(X[0 +: 64, 0 +: 8])\n"
      "    writes(S[0 +: 64])\n"
      "    for i in range(64) parallel annotate "
      "{\"pragma_auto_unroll_max_step\": 64} {\n"
      "      for k in range(8) %s {\n"
      "        block S(vi: spatial(64) = i, vk: reduce(8) = k) {\n"
      "          reads(S[vi], X[vi, vk])\n"
      "          writes(S[vi])\n"
      "          init {\n"
      "            S[vi] = float32(0)\n"
      "          }\n"
      "          S[vi] = S[vi] + X[vi, vk]\n"
      "        }\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n";
  size_t n = sizeof fmt + strlen(ann);
  char *s = malloc(n);
  snprintf(s, n, fmt, ann);
  return s;
}

static char *lowered(const ts_func *f) {
  char *text = check_lowered(f);
  assert_non_null(text);
  return text;
}

static void check(const char *ann, bool kept) {
  char *text = sum_text(ann);
  ts_func *f = check_parse(text, "rs.tir");
  assert_non_null(f);
  char *low = lowered(f);
  if ((strstr(low, "for k in range(8)") != NULL) != kept)
    fail_msg("'%s': the loop k %s by auto-unroll:\n%s", ann,
             kept ? "was unrolled" : "was not unrolled", low);
  free(low);
  char *ir = check_llvm_ir(f);
  assert_non_null(ir);
  if ((strstr(ir, "llvm.loop.unroll.disable") != NULL) != kept)
    fail_msg("'%s': llvm.loop.unroll.disable %s in the optimized IR", ann,
             kept ? "missing" : "present");
  free(ir);
  OK(check_host_run(f, 1, 5));
  OK(check_host_run(f, 2, 5));
  ts_func_free(f);
  free(text);
}

static void test_kept(void **state) {
  (void)state;
  check("annotate {\"pragma_no_unroll\": 1}", true);
}

/* 0, or no annotation: auto-unroll unrolls it as before. */
static void test_unrolled(void **state) {
  (void)state;
  check("annotate {\"pragma_no_unroll\": 0}", false);
  check("", false);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kept),
      cmocka_unit_test(test_unrolled),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
