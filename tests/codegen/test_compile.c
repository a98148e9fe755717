/*
 * test_compile.c — every operator of the library, unscheduled, compiled
 * for the host through lowering + LLVM + ORC and run through the runtime:
 * outputs equal the reference interpreter's on seeded inputs, for every
 * dtype the library supports.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "check.h"
#include "operators.h"

static void test_every_operator(void **state) {
  (void)state;
  int failures = 0;
  for (int i = 0; i < N_OPERATOR_SPECS; i++) {
    ts_workload *w = NULL;
    ts_error err;
    ts_error_clear(&err);
    int rc = ts_workload_from_spec(operator_specs[i], &w, &err);
    if (rc == TS_OK) rc = check_compiled(w->func, NULL, 2, 7 + i, &err);
    if (rc != TS_OK) {
      printf("FAIL %s: %s\n", operator_specs[i], err.msg);
      failures++;
    }
    ts_workload_free(w);
  }
  assert_int_equal(failures, 0);
}

/* Counts the vector divisions ("fdiv ... <N x float>") in LLVM IR text. */
static int vector_fdivs(const char *ir) {
  int n = 0;
  for (const char *p = strstr(ir, "fdiv "); p; p = strstr(p + 1, "fdiv ")) {
    const char *eol = strchr(p, '\n');
    const char *lt = strchr(p, '<');
    if (lt && (!eol || lt < eol)) n++;
  }
  return n;
}

/* softmax divides every element of a row by the row's sum: the code
 * generator lets LLVM compute the reciprocal once per row and multiply, so
 * the optimized IR has no vector division left (a vector divide costs
 * several multiplies), and the result still matches the interpreter. */
static void test_division_by_invariant(void **state) {
  (void)state;
  ts_workload *w = NULL;
  ts_target *host = NULL;
  ts_error err;
  ts_error_clear(&err);
  assert_int_equal(ts_workload_from_spec("softmax N=4 D=256", &w, &err), TS_OK);
  assert_int_equal(ts_target_host(&host, &err), TS_OK);
  ts_build_options o = ts_build_defaults();
  o.keep_llvm_ir = true;
  ts_build_result br = {0};
  int rc = ts_build(w->func, host, &o, &br, &err);
  if (rc) printf("build: %s\n", err.msg);
  assert_int_equal(rc, TS_OK);
  assert_non_null(br.llvm_ir);
  assert_non_null(strstr(br.llvm_ir, "fdiv"));
  assert_int_equal(vector_fdivs(br.llvm_ir), 0);
  rc = check_compiled(w->func, host, 2, 3, &err);
  if (rc) printf("softmax: %s\n", err.msg);
  assert_int_equal(rc, TS_OK);
  ts_build_result_clear(&br);
  ts_target_free(host);
  ts_workload_free(w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_operator),
      cmocka_unit_test(test_division_by_invariant),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
