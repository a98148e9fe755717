/*
 * test_depth.c — deep inputs never overflow the stack: the 50 000-term
 * left-leaning chain `A[vi] + A[vi] + ...` of issue 27 is refused by the
 * parser with the limit in the message (the parser's nesting count used to
 * miss chains), as is a right-leaning one; the same chain built in memory
 * is refused by the verifier and the interpreter and cut with a marker by
 * the printer; everything counts levels the same way (TS_TIR_MAX_DEPTH),
 * and a chain just under the limit parses, prints, parses back and runs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tir/tir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* B[i] = A[i] + A[i] + ... (terms terms), left-leaning, or right-leaning
 * with parentheses. Returns malloc'd text. */
static char *chain_text(int terms, bool right) {
  size_t cap = (size_t)terms * 16 + 256;
  char *t = malloc(cap), *p = t;
  p += sprintf(p, "func f(A: float32[8], B: float32[8]) {\n"
                  "  for i in range(8) {\n"
                  "    B[i] = ");
  for (int k = 0; k < terms; k++) {
    if (right && k + 1 < terms)
      p += sprintf(p, "A[i] + (");
    else
      p += sprintf(p, "A[i]%s", k + 1 < terms ? " + " : "");
  }
  if (right)
    for (int k = 0; k + 1 < terms; k++) *p++ = ')';
  p += sprintf(p, "\n  }\n}\n");
  return t;
}

static void test_chain_refused_by_parser(void **state) {
  (void)state;
  for (int right = 0; right < 2; right++) {
    char *text = chain_text(right ? 5000 : 50000, right);
    ts_func *f = NULL;
    ts_error err;
    ts_error_clear(&err);
    int rc = ts_func_parse(text, strlen(text), "chain.tir", &f, &err);
    assert_int_equal(rc, TS_EPARSE);
    assert_null(f);
    assert_non_null(strstr(err.msg, "deeper than 256"));
    assert_non_null(strstr(err.msg, "chain.tir:3:"));
    free(text);
  }
}

/* Parse, print, parse again: equal functions. */
static void test_chain_under_limit_round_trips(void **state) {
  (void)state;
  /* body (1) + for (2) + store (3) + 248 operators + the leaves */
  char *text = chain_text(240, false);
  ts_func *f = NULL, *g = NULL;
  ts_error err;
  ts_error_clear(&err);
  assert_int_equal(ts_func_parse(text, strlen(text), NULL, &f, &err), TS_OK);
  assert_int_equal(ts_func_check_depth(f, &err), TS_OK);
  assert_int_equal(ts_func_verify(f, &err), TS_OK);
  char *printed = ts_func_print(f);
  assert_null(strstr(printed, "deeper than"));
  assert_int_equal(ts_func_parse(printed, strlen(printed), NULL, &g, &err),
                   TS_OK);
  assert_true(ts_func_equal(f, g));
  float a[8], b[8];
  for (int i = 0; i < 8; i++) a[i] = (float)i;
  void *args[2] = {a, b};
  ts_interp_options o = {0};
  assert_int_equal(ts_interp_run(f, args, 2, &o, &err), TS_OK);
  assert_true(b[3] == 3.0f * 240);
  free(printed);
  ts_func_free(f);
  ts_func_free(g);
  free(text);
}

/* The chain of the issue built in memory (never through the parser). */
static void test_chain_in_memory(void **state) {
  (void)state;
  ts_func *f = ts_func_new("deep");
  ts_arena *a = ts_func_arena(f);
  int64_t shape[1] = {8};
  ts_buffer *A = ts_buffer_new(a, "A", TS_FLOAT32, shape, 1);
  ts_buffer *B = ts_buffer_new(a, "B", TS_FLOAT32, shape, 1);
  ts_func_add_param(f, A);
  ts_func_add_param(f, B);
  ts_expr *i = ts_var(a, "i", TS_INDEX);
  ts_expr *load = ts_load(a, A, &i, 1);
  ts_expr *sum = load;
  for (int k = 1; k < 50000; k++)
    sum = ts_binary_raw(a, TS_EXPR_ADD, sum, ts_load(a, A, &i, 1));
  assert_int_equal(ts_expr_depth(sum, TS_TIR_MAX_DEPTH), TS_TIR_MAX_DEPTH + 1);
  assert_int_equal(ts_expr_depth(load, TS_TIR_MAX_DEPTH), 2);
  ts_stmt *store = ts_store(a, B, &i, 1, sum);
  ts_func_set_body(f, ts_for(a, i, ts_index(a, 0), ts_index(a, 8),
                             TS_FOR_SERIAL, NULL, store));
  ts_error err;
  ts_error_clear(&err);
  assert_int_equal(ts_func_check_depth(f, &err), TS_EVERIFY);
  assert_int_equal(ts_func_verify(f, &err), TS_EVERIFY);
  assert_non_null(strstr(err.msg, "deeper than 256"));
  float va[8] = {0}, vb[8];
  void *args[2] = {va, vb};
  ts_interp_options o = {0};
  assert_int_not_equal(ts_interp_run(f, args, 2, &o, &err), TS_OK);
  assert_non_null(strstr(err.msg, "deeper than 256"));
  char *printed = ts_func_print(f);
  assert_non_null(printed);
  assert_non_null(strstr(printed, "<nested deeper than 256 levels>"));
  free(printed);
  printed = ts_expr_print(sum);
  assert_non_null(strstr(printed, "<nested deeper than 256 levels>"));
  free(printed);
  ts_func_free(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_chain_refused_by_parser),
      cmocka_unit_test(test_chain_under_limit_round_trips),
      cmocka_unit_test(test_chain_in_memory),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
