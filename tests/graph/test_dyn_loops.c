/*
 * test_dyn_loops.c — a padded program's kernels cut to the run-time length
 * (graph/dyn_loops.c): scheduled kernels written in the text form get the
 * pass with their parameters' dynamic axes, and then run in the reference
 * interpreter at a length n below the padded size, every position of the
 * outputs starting as a sentinel. Positions below n must hold the kernel's
 * values; tiles wholly past n must still hold the sentinel (the work was
 * skipped). A reduction over the dimension and a mask's positions keep
 * their loops whole, a loop whose tile order is not the position's gets a
 * guard instead of a cut, and a kernel without dynamic axes is left as it
 * was.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/internal.h"

static const float SENTINEL = -12345.0f;

static ts_func *parse(const char *text) {
  ts_func *f = NULL;
  ts_error err;
  ts_error_clear(&err);
  int rc = ts_func_parse(text, strlen(text), "test", &f, &err);
  if (rc) fail_msg("parse: %s", err.msg);
  return f;
}

/* The pass on f; returns the number of loops cut or guarded. */
static int cut(ts_func *f, const unsigned *axes, const bool *positions) {
  int n_cut = -1;
  ts_error err;
  ts_error_clear(&err);
  int rc =
      gr_loops_to_length(f, axes, positions, ts_func_n_params(f), &n_cut, &err);
  if (rc) fail_msg("gr_loops_to_length: %s", err.msg);
  return n_cut;
}

static void run(ts_func *f, void **args) {
  ts_error err;
  ts_error_clear(&err);
  int rc = ts_interp_run(f, args, ts_func_n_params(f), NULL, &err);
  if (rc) fail_msg("interp: %s", err.msg);
}

static bool printed_has(const ts_func *f, const char *what) {
  char *s = ts_func_print(f);
  bool r = strstr(s, what) != NULL;
  free(s);
  return r;
}

/* Runs a [12, 8] -> [12, 8] kernel at length 5 on x = 0, 1, 2, ...: the
 * rows of the first two tiles of 4 hold x * scale + add, the third tile
 * the sentinel (skipped). */
static void run_rows(ts_func *f, float scale, float add) {
  float x[96], y[96], len = 5;
  for (int i = 0; i < 96; i++) x[i] = (float)i, y[i] = SENTINEL;
  void *args[3] = {x, y, &len};
  run(f, args);
  for (int i = 0; i < 96; i++)
    assert_true(y[i] == (i < 64 ? x[i] * scale + add : SENTINEL));
}

/* Rows tiled by 4 under a parallel loop: the tile loop is cut to
 * ceil(n / 4). */
static const char *ROWS =
    "func rows(x: float32[12, 8], y: float32[12, 8]) {\n"
    "  block root() {\n"
    "    reads(x[0 +: 12, 0 +: 8])\n"
    "    writes(y[0 +: 12, 0 +: 8])\n"
    "    for io in range(3) parallel {\n"
    "      for ii in range(4) {\n"
    "        for j in range(8) {\n"
    "          block y(vi: spatial(12) = io * 4 + ii, vj: spatial(8) = j) {\n"
    "            reads(x[vi, vj])\n"
    "            writes(y[vi, vj])\n"
    "            y[vi, vj] = x[vi, vj] * float32(2)\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

static void test_tile_loop_cut(void **state) {
  (void)state;
  ts_func *f = parse(ROWS);
  unsigned axes[2] = {1, 1};
  bool pos[2] = {false, false};
  assert_int_equal(cut(f, axes, pos), 1);
  assert_int_equal(ts_func_n_params(f), 3);
  assert_true(printed_has(f, "for io in range(min(floordiv("));
  assert_true(printed_has(f, "for ii in range(4)")); /* the tile stays whole */
  run_rows(f, 2.0f, 0.0f);
  ts_func_free(f);
}

/* A sum over the rows (the dimension): pinned, nothing cut. */
static void test_reduction_kept(void **state) {
  (void)state;
  ts_func *f =
      parse("func colsum(x: float32[12, 8], y: float32[8]) {\n"
            "  block root() {\n"
            "    reads(x[0 +: 12, 0 +: 8])\n"
            "    writes(y[0 +: 8])\n"
            "    for j in range(8) {\n"
            "      for i in range(12) {\n"
            "        block y(vj: spatial(8) = j, vi: reduce(12) = i) {\n"
            "          reads(y[vj], x[vi, vj])\n"
            "          writes(y[vj])\n"
            "          init {\n"
            "            y[vj] = float32(0)\n"
            "          }\n"
            "          y[vj] = y[vj] + x[vi, vj]\n"
            "        }\n"
            "      }\n"
            "    }\n"
            "  }\n"
            "}\n");
  unsigned axes[2] = {1, 0};
  bool pos[2] = {false, false};
  assert_int_equal(cut(f, axes, pos), 0);
  assert_int_equal(ts_func_n_params(f), 2); /* no length parameter added */
  ts_func_free(f);
}

/* A mask over [rows, keys], both the dimension: the keys are the mask's
 * positions, so their loop (the outer one) stays whole; the rows are
 * cut. */
static void test_mask_positions_pinned(void **state) {
  (void)state;
  ts_func *f =
      parse("func mask(x: float32[8, 8], pos: float32[1, 8], l: float32[1], "
            "y: float32[8, 8]) {\n"
            "  block root() {\n"
            "    reads(x[0 +: 8, 0 +: 8], pos[0, 0 +: 8], l[0])\n"
            "    writes(y[0 +: 8, 0 +: 8])\n"
            "    for k in range(8) {\n"
            "      for i in range(8) {\n"
            "        block y(vi: spatial(8) = i, vk: spatial(8) = k) {\n"
            "          reads(x[vi, vk], pos[0, vk], l[0])\n"
            "          writes(y[vi, vk])\n"
            "          y[vi, vk] = select(pos[0, vk] < l[0], x[vi, vk], "
            "float32(-inf))\n"
            "        }\n"
            "      }\n"
            "    }\n"
            "  }\n"
            "}\n");
  unsigned axes[4] = {3, 0, 0, 3};
  bool pos[4] = {false, true, false, false};
  assert_int_equal(cut(f, axes, pos), 1);
  assert_true(printed_has(f, "for i in range(min("));
  assert_true(printed_has(f, "for k in range(8)"));
  float x[64], p[8], y[64], len = 3;
  for (int i = 0; i < 64; i++) x[i] = (float)i, y[i] = SENTINEL;
  for (int i = 0; i < 8; i++) p[i] = (float)i;
  void *args[5] = {x, p, &len, y, &len};
  run(f, args);
  for (int i = 0; i < 8; i++)
    for (int k = 0; k < 8; k++) {
      float want = i >= 3  ? SENTINEL
                   : k < 3 ? (float)(i * 8 + k)
                           : -INFINITY; /* past n, but written */
      assert_true(y[i * 8 + k] == want);
    }
  ts_func_free(f);
}

/* Row tiles fused inside the column tiles: no prefix of the fused loop
 * holds the rows below n, so its body gets a guard. */
static void test_inner_tiles_guarded(void **state) {
  (void)state;
  ts_func *f =
      parse("func fused(x: float32[12, 8], y: float32[12, 8]) {\n"
            "  block root() {\n"
            "    reads(x[0 +: 12, 0 +: 8])\n"
            "    writes(y[0 +: 12, 0 +: 8])\n"
            "    for f in range(6) parallel {\n"
            "      for ii in range(4) {\n"
            "        for jj in range(4) {\n"
            "          block y(vi: spatial(12) = floormod(f, 3) * 4 + ii, "
            "vj: spatial(8) = floordiv(f, 3) * 4 + jj) {\n"
            "            reads(x[vi, vj])\n"
            "            writes(y[vi, vj])\n"
            "            y[vi, vj] = x[vi, vj] + float32(1)\n"
            "          }\n"
            "        }\n"
            "      }\n"
            "    }\n"
            "  }\n"
            "}\n");
  unsigned axes[2] = {1, 1};
  bool pos[2] = {false, false};
  assert_int_equal(cut(f, axes, pos), 1);
  assert_true(printed_has(f, "if floormod(f, 3) * 4 < "));
  assert_true(printed_has(f, "for f in range(6)"));
  run_rows(f, 1.0f, 1.0f);
  ts_func_free(f);
}

/* The columns as the dimension: their loop is cut. No dynamic axis: left
 * alone. A description of the wrong length is an error. */
static void test_columns_and_none(void **state) {
  (void)state;
  ts_func *f = parse(ROWS);
  unsigned axes[2] = {2, 2};
  bool pos[2] = {false, false};
  assert_int_equal(cut(f, axes, pos), 1);
  assert_true(printed_has(f, "for j in range(min("));
  ts_func_free(f);

  f = parse(ROWS);
  char *before = ts_func_print(f);
  axes[0] = axes[1] = 0;
  assert_int_equal(cut(f, axes, pos), 0);
  char *after = ts_func_print(f);
  assert_string_equal(before, after);
  free(before);
  free(after);
  int n_cut = 0;
  ts_error err;
  ts_error_clear(&err);
  assert_int_equal(gr_loops_to_length(f, axes, pos, 1, &n_cut, &err),
                   TS_EINTERNAL);
  assert_non_null(strstr(err.msg, "1 parameter descriptions for 2"));
  ts_func_free(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tile_loop_cut),
      cmocka_unit_test(test_reduction_kept),
      cmocka_unit_test(test_mask_positions_pinned),
      cmocka_unit_test(test_inner_tiles_guarded),
      cmocka_unit_test(test_columns_and_none),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
