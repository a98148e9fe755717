/*
 * test_sample_tile.c — sample_tile, the tile sizes that need not divide the
 * extent: what it draws (perfect and imperfect tiles, the innermost a
 * multiple of its step, the outermost inferred), that a recorded decision
 * replays (through JSON too) and is checked, the refusals, and imperfect
 * tiles of odd and prime extents split, compiled and compared with the
 * interpreter.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "util.h"

#define OK(x) assert_int_equal((x), TS_OK)

/* The first loop of block C of `spec` in a fresh schedule seeded `seed`. */
static ts_sched *with_loops(const char *spec, uint64_t seed, ts_rv *l) {
  ts_workload *w;
  ts_error err;
  OK(ts_workload_from_spec(spec, &w, &err));
  ts_sched *s;
  OK(ts_sched_create(w->func, seed, &s, &err));
  ts_workload_free(w);
  ts_rv b;
  int n;
  OK(ts_sched_get_block(s, "C", &b));
  OK(ts_sched_get_loops(s, b, l, 3, &n));
  return s;
}

static void test_draws(void **state) {
  (void)state;
  int perfect = 0, imperfect = 0, padded_middle = 0;
  for (uint64_t seed = 1; seed <= 200; seed++) {
    ts_rv l[3], v[4];
    ts_sched *s = with_loops("matmul M=1000 N=777 K=513", seed, l);
    int64_t extent = seed % 2 ? 1000 : 777, step = seed % 2 ? 1 : 8;
    int64_t maxi = seed % 2 ? 14 : 64;
    OK(ts_sched_sample_tile(s, l[seed % 2 ? 0 : 1], 4, (int)maxi, (int)step,
                            v));
    int64_t f[4], inner = 1;
    for (int i = 0; i < 4; i++) {
      f[i] = ts_sched_rv_int(s, v[i]);
      assert_true(f[i] >= 1);
      if (i) inner *= f[i];
    }
    /* the outermost is inferred; the padding is less than the extent */
    assert_int_equal(f[0], (extent + inner - 1) / inner);
    assert_true(f[0] * inner >= extent && f[0] * inner < 2 * extent);
    assert_true(f[3] <= maxi);
    if (f[0] * inner == extent) {
      perfect++;
    } else {
      imperfect++;
      assert_int_equal(f[3] % step, 0);
      /* padded beyond the last innermost tile: a middle level pads */
      padded_middle += f[0] * inner - extent >= f[3];
    }
    /* the decision holds the three inner factors */
    const ts_trace *t = ts_sched_trace(s);
    int last = ts_trace_n_insts(t) - 1;
    assert_int_equal(ts_trace_inst_kind(t, last), TS_INSTR_SAMPLE_TILE);
    int64_t d[8];
    assert_int_equal(ts_trace_decision(t, last, d, 8), 3);
    for (int i = 0; i < 3; i++) assert_int_equal(d[i], f[i + 1]);
    ts_sched_destroy(s);
  }
  assert_true(perfect > 20);
  assert_true(imperfect > 20);
  assert_true(padded_middle > 0);
}

/* A recorded decision replays to the same tiles (through JSON as well) and
 * the split function computes what the unscheduled one does. */
static void test_replay_and_run(void **state) {
  (void)state;
  static const char *const specs[] = {
      "matmul M=127 N=31 K=13", "matmul M=23 N=17 K=7", "matmul M=61 N=11 K=9"};
  for (int c = 0; c < 3; c++)
    for (uint64_t seed = 1; seed <= 6; seed++) {
      ts_rv l[3], vi[4], vj[3], pi[4], pj[3], b;
      ts_sched *s = with_loops(specs[c], seed, l);
      OK(ts_sched_sample_tile(s, l[0], 4, 6, 1, vi));
      OK(ts_sched_split_rv(s, l[0], vi, 4, pi));
      OK(ts_sched_sample_tile(s, l[1], 3, 16, 8, vj));
      OK(ts_sched_split_rv(s, l[1], vj, 3, pj));
      ts_rv order[7] = {pi[0], pj[0], pi[1], pj[1], pi[2], pi[3], pj[2]};
      OK(ts_sched_reorder(s, order, 7));
      OK(ts_sched_vectorize(s, pj[2]));
      OK(ts_sched_parallel(s, pi[0]));
      OK(ts_sched_get_block(s, "C", &b));
      OK(util_verify(s, 2));
      char *json = ts_trace_to_json(ts_sched_trace(s));
      ts_trace *back = NULL;
      ts_sched *again = NULL;
      ts_error err;
      OK(ts_trace_from_json(json, strlen(json), &back, &err));
      OK(ts_trace_apply(back, ts_sched_original(s), 99, &again, &err));
      char *p1 = util_print(s), *p2 = util_print(again);
      assert_string_equal(p1, p2);
      /* the script prints the decision */
      char *script = ts_trace_print(back);
      assert_non_null(strstr(script, "sample_tile(loop="));
      assert_non_null(strstr(script, "innermost_step=8"));
      free(script);
      free(p1);
      free(p2);
      free(json);
      ts_trace_free(back);
      ts_sched_destroy(again);
      ts_sched_destroy(s);
    }
}

/* Refusals leave the schedule as it was, with a message; a decision is
 * checked at replay. */
static void test_refusals(void **state) {
  (void)state;
  ts_rv l[3], v[4];
  ts_sched *s = with_loops("matmul M=100 N=10 K=10", 1, l);
  char *before = util_print(s);
  int n0 = ts_trace_n_insts(ts_sched_trace(s));
  assert_int_equal(ts_sched_sample_tile(s, l[0], 1, 8, 1, v), TS_EINVAL);
  assert_non_null(strstr(ts_sched_errmsg(s), "sample_tile: n = 1"));
  assert_int_equal(ts_sched_sample_tile(s, l[0], 2, 0, 1, v), TS_EINVAL);
  assert_non_null(strstr(ts_sched_errmsg(s), "max_innermost_factor"));
  assert_int_equal(ts_sched_sample_tile(s, l[0], 2, 8, 0, v), TS_EINVAL);
  assert_non_null(strstr(ts_sched_errmsg(s), "innermost_step"));
  char *after = util_print(s);
  assert_string_equal(before, after);
  assert_int_equal(ts_trace_n_insts(ts_sched_trace(s)), n0);
  free(before);
  free(after);

  /* decisions: valid, too much padding, innermost above the maximum, the
   * wrong count */
  OK(ts_sched_sample_tile(s, l[0], 3, 8, 1, v));
  ts_trace *t = ts_trace_copy(ts_sched_trace(s));
  int at = ts_trace_n_insts(t) - 1;
  ts_error err;
  const struct {
    int64_t d[3];
    int n;
    int rc;
  } cases[] = {
      {{7, 6}, 2, TS_OK},           /* 100 -> 3 x 7 x 6 = 126 */
      {{199, 1}, 2, TS_OK},         /* padded to 199 < 2 x 100 */
      {{25, 8}, 2, TS_ESCHEDULE},   /* padded to 200 */
      {{1, 9}, 2, TS_ESCHEDULE},    /* innermost 9 > 8 */
      {{1, 2, 3}, 3, TS_ESCHEDULE}, /* three inner factors of a 3-part tile */
      {{0, 4}, 2, TS_ESCHEDULE},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    OK(ts_trace_set_decision(t, at, cases[c].d, cases[c].n, &err));
    ts_sched *r = NULL;
    int rc = ts_trace_apply(t, ts_sched_original(s), 1, &r, &err);
    assert_int_equal(rc, cases[c].rc);
    if (rc) {
      assert_non_null(strstr(err.msg, "sample_tile: the decision"));
    } else {
      const ts_trace *rt = ts_sched_trace(r);
      int64_t d[4];
      assert_int_equal(ts_trace_decision(rt, at, d, 4), 2);
    }
    ts_sched_destroy(r);
  }
  ts_trace_free(t);
  ts_sched_destroy(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_draws),
      cmocka_unit_test(test_replay_and_run),
      cmocka_unit_test(test_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
