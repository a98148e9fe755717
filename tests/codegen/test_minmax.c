/*
 * test_minmax.c — a float max or min whose accumulator holds no NaN is one
 * compare-select (codegen/emit_minmax.c), and NaN inputs still give what
 * the interpreter's fmax and fmin give: a row maximum ignores its NaNs, a
 * row of NaNs only gives the init. An accumulator that a NaN can reach (one
 * initialized from an input) keeps maxnum and its NaN handling.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "check.h"

#define OK(x) assert_int_equal((x), TS_OK)

enum { ROWS = 6, LANES = 16, STEPS = 8, COLS = LANES * STEPS };

/* S[i] = op over j of X[i, j], through partial results P[i, 0 : 16] whose
 * init is `init` (an expression of vi and vk1). */
static ts_func *row_text(const char *op, const char *init, const char *fold0) {
  static const char fmt[] =
      "func row(X: float32[6, 128], S: float32[6]) {\n"
      "  block root() {\n"
      "    reads(X[0 +: 6, 0 +: 128])\n"
      "    writes(S[0 +: 6])\n"
      "    alloc P: float32[6, 16]\n"
      "    for i in range(6) {\n"
      "      for k0 in range(8) {\n"
      "        for k1 in range(16) vectorized {\n"
      "          block P(vi: spatial(6) = i, vk0: reduce(8) = k0, "
      "vk1: spatial(16) = k1) {\n"
      "            reads(P[vi, vk1], X[vi, vk0 * 16 + vk1])\n"
      "            writes(P[vi, vk1])\n"
      "            init {\n"
      "              P[vi, vk1] = %s\n"
      "            }\n"
      "            P[vi, vk1] = %s(P[vi, vk1], X[vi, vk0 * 16 + vk1])\n"
      "          }\n"
      "        }\n"
      "      }\n"
      "      for k in range(16) {\n"
      "        block S(vi: spatial(6) = i, vk: reduce(16) = k) {\n"
      "          reads(S[vi], P[vi, vk])\n"
      "          writes(S[vi])\n"
      "          init {\n"
      "            S[vi] = %s\n"
      "          }\n"
      "          S[vi] = %s(S[vi], P[vi, vk])\n"
      "        }\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n";
  char text[sizeof fmt + 256];
  snprintf(text, sizeof text, fmt, init, op, fold0, op);
  ts_func *f = check_parse(text, "row.tir");
  assert_non_null(f);
  return f;
}

/* The IR as emitted for `cpu` (before LLVM's passes), malloc'd. */
static char *emitted_ir(const ts_func *f, const char *cpu) {
  char *ir = check_emitted_ir_for(f, cpu);
  assert_non_null(ir);
  return ir;
}

/* Rows of finite values, scattered NaNs, all NaN, a NaN first (in the
 * lane that holds the maximum), -inf with NaNs, +inf. */
static void fill(float *x) {
  for (int i = 0; i < ROWS; i++)
    for (int j = 0; j < COLS; j++)
      x[i * COLS + j] = (float)((i * 37 + j * 11) % 101) - 50.0f;
  for (int j = 3; j < COLS; j += 17) x[1 * COLS + j] = NAN;
  for (int j = 0; j < COLS; j++) x[2 * COLS + j] = NAN;
  x[3 * COLS + 0] = NAN; /* lane 0 of P starts at NaN ... */
  x[3 * COLS + 16] = NAN;
  x[3 * COLS + 32] = 1000.0f; /* ... and holds the row's maximum */
  for (int j = 0; j < COLS; j++) x[4 * COLS + j] = j % 2 ? -INFINITY : NAN;
  x[5 * COLS + 77] = INFINITY;
  x[5 * COLS + 78] = -INFINITY;
}

/* f compiled for the host against the interpreter on fill()'s rows:
 * equal, or both NaN. */
static void check_rows(const ts_func *f) {
  ts_error err;
  ts_target *host = NULL;
  OK(ts_target_host(&host, &err));
  ts_build_options o = ts_build_defaults();
  ts_build_result br = {0};
  OK(ts_build(f, host, &o, &br, &err));
  ts_rt_kernel *k = NULL;
  OK(ts_rt_kernel_load(br.artifact->bytes, br.artifact->n_bytes,
                       br.artifact->entry, &k, &err));
  static float x[ROWS * COLS];
  float got[ROWS], want[ROWS];
  fill(x);
  void *args[2] = {x, got};
  OK(ts_rt_kernel_call(k, args, NULL, &err));
  void *ref[2] = {x, want};
  OK(ts_interp_run(f, ref, 2, NULL, &err));
  for (int i = 0; i < ROWS; i++) {
    if (isnan(want[i]) ? !isnan(got[i]) : got[i] != want[i])
      fail_msg("row %d: %g, the interpreter %g", i, (double)got[i],
               (double)want[i]);
  }
  ts_rt_kernel_unload(k);
  ts_build_result_clear(&br);
  ts_target_free(host);
}

/* P starts at -inf (or +inf): its update is a compare-select on x86 of
 * either width, and the rows match with NaNs in them. */
static void test_nan_free_accumulator(void **state) {
  (void)state;
  const char *ops[2][2] = {{"max", "float32(-inf)"}, {"min", "float32(inf)"}};
  for (int m = 0; m < 2; m++) {
    ts_func *f = row_text(ops[m][0], ops[m][1], ops[m][1]);
    const char *cpus[2] = {"llvm -mcpu=skylake-avx512", "llvm -mcpu=haswell"};
    for (int c = 0; c < 2; c++) {
      char *ir = emitted_ir(f, cpus[c]);
      /* P's update: a compare and a select of 16 lanes, no maxnum */
      char nm[64];
      snprintf(nm, sizeof nm, "@llvm.%snum.v16f32", ops[m][0]);
      if (check_count(ir, nm)) fail_msg("'%s' in:\n%s", nm, ir);
      assert_true(check_count(ir, m ? "fcmp olt <16 x float>"
                                    : "fcmp ogt <16 x float>") >= 1);
      free(ir);
    }
    check_rows(f);
    ts_func_free(f);
  }
}

/* P starts from X's first columns, which may be NaN: maxnum stays, and a
 * NaN in the first column (row 3) is replaced by the row's later values as
 * fmax does. */
static void test_nan_reachable(void **state) {
  (void)state;
  ts_func *f = row_text("max", "X[vi, vk1]", "float32(-inf)");
  char *ir = emitted_ir(f, "llvm -mcpu=skylake-avx512");
  assert_true(check_count(ir, "@llvm.maxnum.v16f32") >= 1);
  free(ir);
  check_rows(f);
  ts_func_free(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_nan_free_accumulator),
      cmocka_unit_test(test_nan_reachable),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
