/*
 * test_points.c — conditions decided by enumeration (codegen/points.c).
 * The compiled evaluation must give, at every point, what the bounds give
 * (random expressions over a few variables; with overflows and zero
 * divisors among them, it may only say "unknown" where the bounds keep an
 * interval that decides); a decision with facts must agree with a brute
 * force over the points, with and without the cache of fact tables, and
 * the cache must redo a table when the ranges of its variables change.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "codegen/internal.h"

#define NV 3

typedef struct gen {
  ts_arena *a;
  uint64_t state;
  ts_expr *vars[NV];
  ts_dtype t;
  bool wild; /* large constants and divisors that may be zero */
} gen;

static uint32_t next(gen *g) {
  g->state = g->state * UINT64_C(6364136223846793005) + 1442695040888963407u;
  return (uint32_t)(g->state >> 33);
}

static int64_t pick(gen *g, int64_t lo, int64_t hi) {
  return lo + (int64_t)(next(g) % (uint32_t)(hi - lo + 1));
}

static ts_expr *gen_cond(gen *g, int depth);

static ts_expr *gen_int(gen *g, int depth) {
  int r = (int)pick(g, 0, depth <= 0 ? 2 : 11);
  if (r == 0 || r == 1) return g->vars[pick(g, 0, NV - 1)];
  if (r == 2) {
    int64_t v = g->wild && pick(g, 0, 3) == 0
                    ? pick(g, -(INT64_C(1) << 31), INT64_C(1) << 31)
                    : pick(g, -9, 9);
    return ts_int(g->a, g->t, v);
  }
  if (r == 3) {
    ts_expr *c = gen_cond(g, depth - 1);
    return ts_select_raw(g->a, c, gen_int(g, depth - 1), gen_int(g, depth - 1));
  }
  static const ts_expr_kind ops[] = {
      TS_EXPR_ADD,      TS_EXPR_SUB,      TS_EXPR_MUL, TS_EXPR_DIV,
      TS_EXPR_FLOORDIV, TS_EXPR_FLOORMOD, TS_EXPR_MIN, TS_EXPR_MOD};
  /* a remainder's bound is one value only below the divisor: the tame
   * rounds leave it out, so that every point is decidable there */
  ts_expr_kind k = ops[pick(g, 0, g->wild ? 7 : 6)];
  ts_expr *x = gen_int(g, depth - 1);
  ts_expr *y = gen_int(g, depth - 1);
  bool divides = k == TS_EXPR_DIV || k == TS_EXPR_FLOORDIV ||
                 k == TS_EXPR_FLOORMOD || k == TS_EXPR_MOD;
  if (divides && !g->wild) /* a constant positive divisor */
    y = ts_int(g->a, g->t, pick(g, 1, 6));
  return ts_binary_raw(g->a, k, x, y);
}

static ts_expr *gen_cond(gen *g, int depth) {
  int r = (int)pick(g, 0, depth <= 0 ? 0 : 4);
  if (r == 0 || r == 1) {
    static const ts_expr_kind cmp[] = {TS_EXPR_LT, TS_EXPR_LE, TS_EXPR_EQ,
                                       TS_EXPR_NE, TS_EXPR_GT, TS_EXPR_GE};
    return ts_binary_raw(g->a, cmp[pick(g, 0, 5)], gen_int(g, depth - 1),
                         gen_int(g, depth - 1));
  }
  if (r == 2) return ts_not_raw(g->a, gen_cond(g, depth - 1));
  return ts_binary_raw(g->a, r == 3 ? TS_EXPR_AND : TS_EXPR_OR,
                       gen_cond(g, depth - 1), gen_cond(g, depth - 1));
}

static void gen_init(gen *g, uint64_t seed, ts_var_ranges *r, bool wild) {
  *g =
      (gen){.a = ts_arena_create(), .state = seed, .t = TS_INT32, .wild = wild};
  assert_non_null(g->a);
  static const char *names[NV] = {"i", "j", "k"};
  for (int v = 0; v < NV; v++) {
    g->vars[v] = ts_var(g->a, names[v], g->t);
    ts_var_ranges_set(r, g->vars[v], pick(g, -4, 4), pick(g, 1, 6));
  }
}

/* At every point, the compiled value (and truth) equals the bounds'. */
static void test_compiled_matches_bounds(void **state) {
  (void)state;
  int compiled = 0, unknown = 0, weaker = 0;
  for (int round = 0; round < 600; round++) {
    ts_var_ranges *r = ts_var_ranges_create();
    gen g;
    gen_init(&g, 1000 + (uint64_t)round, r, round % 2 == 1);
    ts_expr *e = round % 3 == 0 ? gen_cond(&g, 4) : gen_int(&g, 4);
    bool cond = ts_expr_dtype(e).code == TS_DT_BOOL;
    ts_points p = {.ranges = r};
    ts_points_add(&p, e);
    ts_points_prog *pg = ts_points_prog_create(&p);
    int h = ts_points_prog_add(pg, e, cond);
    assert_int_equal(h, 0);
    compiled++;
    ts_var_ranges *point = ts_var_ranges_create();
    int64_t at[TS_POINTS_MAX_VARS] = {0};
    do {
      ts_points_set(&p, at, point);
      int64_t v1 = 0, v2 = 0;
      bool k1, k2;
      if (cond) { /* decided as ts_points_holds does: strict at the top */
        int h1 = ts_points_holds(e, point),
            h2 = ts_points_prog_holds(pg, h, at);
        k1 = h1 >= 0, k2 = h2 >= 0, v1 = h1, v2 = h2;
      } else {
        k1 = ts_points_value(e, point, &v1);
        k2 = ts_points_prog_value(pg, h, at, &v2);
      }
      /* where a value is unknown (an overflow, a zero divisor) the bounds
       * still keep an interval, which can decide a comparison above it;
       * the program only says unknown there, which is weaker, not wrong */
      if (g.wild && k1 && !k2) {
        weaker++;
        continue;
      }
      if (k1 != k2 || (k1 && v1 != v2)) {
        char *s = ts_expr_print(e);
        fail_msg("round %d: %s: bounds %d/%lld, compiled %d/%lld", round, s, k1,
                 (long long)v1, k2, (long long)v2);
      }
      unknown += !k1;
    } while (ts_points_next(&p, at));
    ts_var_ranges_destroy(point);
    ts_points_prog_destroy(pg);
    ts_var_ranges_destroy(r);
    ts_arena_destroy(g.a);
  }
  assert_true(unknown > 0); /* the wild rounds reach undecidable points */
  assert_true(weaker < unknown);
  assert_int_equal(compiled, 600);
}

/* Whether cond holds wherever facts do, point by point. */
static int brute(ts_expr *cond, ts_expr *const *facts, int n,
                 ts_var_ranges *r) {
  ts_points p = {.ranges = r};
  ts_points_add(&p, cond);
  for (int i = 0; i < n; i++) ts_points_add(&p, facts[i]);
  ts_var_ranges *point = ts_var_ranges_create();
  int64_t at[TS_POINTS_MAX_VARS] = {0};
  bool any_true = false, any_false = false;
  do {
    ts_points_set(&p, at, point);
    bool runs = true;
    for (int i = 0; i < n; i++) runs = runs && ts_points_holds(facts[i], point);
    if (!runs) continue;
    int h = ts_points_holds(cond, point);
    if (h < 0) {
      char *s = ts_expr_print(cond);
      fail_msg("undecidable: %s", s);
    }
    any_true |= h == 1;
    any_false |= h == 0;
  } while (ts_points_next(&p, at));
  ts_var_ranges_destroy(point);
  return any_true && any_false ? -1 : any_false ? 0 : 1;
}

/* Random decisions with facts agree with the brute force, with and
 * without a cache, and with a cache shared across them. */
static void test_decide_matches_brute_force(void **state) {
  (void)state;
  int seen[3] = {0};
  enum { ROUNDS = 400 };
  ts_arena *arenas[ROUNDS]; /* kept until the shared cache goes */
  ts_points_cache *shared = ts_points_cache_create();
  for (int round = 0; round < ROUNDS; round++) {
    ts_var_ranges *r = ts_var_ranges_create();
    gen g;
    gen_init(&g, 5000 + (uint64_t)round, r, false);
    ts_expr *facts[3];
    int n = (int)pick(&g, 0, 3);
    for (int i = 0; i < n; i++) facts[i] = gen_cond(&g, 2);
    ts_expr *cond = gen_cond(&g, 2);
    int want = brute(cond, facts, n, r);
    ts_points_cache *own = ts_points_cache_create();
    int64_t budget = INT64_C(1) << 40;
    assert_int_equal(ts_points_decide(cond, facts, n, r, 4096, NULL, NULL),
                     want);
    assert_int_equal(ts_points_decide(cond, facts, n, r, 4096, &budget, own),
                     want);
    assert_int_equal(ts_points_decide(cond, facts, n, r, 4096, &budget, own),
                     want);
    assert_int_equal(ts_points_decide(cond, facts, n, r, 4096, &budget, shared),
                     want);
    seen[want + 1]++;
    ts_points_cache_destroy(own);
    ts_var_ranges_destroy(r);
    arenas[round] = g.a;
  }
  ts_points_cache_destroy(shared);
  for (int round = 0; round < ROUNDS; round++) ts_arena_destroy(arenas[round]);
  for (int i = 0; i < 3; i++) assert_true(seen[i] > 10);
}

/* A cached table is redone when its variables' ranges change, and a
 * budget too small leaves the decision undecided. */
static void test_cache_follows_ranges(void **state) {
  (void)state;
  ts_arena *a = ts_arena_create();
  ts_expr *i = ts_var(a, "i", TS_INT32), *j = ts_var(a, "j", TS_INT32);
  ts_var_ranges *r = ts_var_ranges_create();
  ts_var_ranges_set(r, i, 0, 5);
  ts_var_ranges_set(r, j, 0, 4);
  /* i * 4 + j < 17 wherever i < 4 */
  ts_expr *cond = ts_lt(a, ts_add(a, ts_mul(a, i, ts_int(a, TS_INT32, 4)), j),
                        ts_int(a, TS_INT32, 17));
  ts_expr *fact = ts_lt(a, i, ts_int(a, TS_INT32, 4));
  ts_points_cache *k = ts_points_cache_create();
  assert_int_equal(ts_points_decide(cond, NULL, 0, r, 4096, NULL, k), -1);
  assert_int_equal(ts_points_decide(cond, &fact, 1, r, 4096, NULL, k), 1);
  assert_int_equal(ts_points_decide(cond, &fact, 1, r, 4096, NULL, k), 1);
  /* i from 3: the fact holds at i = 3 only, where j = 1 gives 13 < 17 */
  ts_var_ranges_set(r, i, 3, 5);
  ts_var_ranges_set(r, j, 1, 1);
  assert_int_equal(ts_points_decide(cond, &fact, 1, r, 4096, NULL, k), 1);
  /* i from 4: the fact never holds, so the test never runs */
  ts_var_ranges_set(r, i, 4, 5);
  assert_int_equal(ts_points_decide(cond, &fact, 1, r, 4096, NULL, k), 1);
  ts_expr *neg = ts_not(a, cond);
  assert_int_equal(ts_points_decide(neg, &fact, 1, r, 4096, NULL, k), 1);
  ts_var_ranges_set(r, i, 0, 5);
  ts_var_ranges_set(r, j, 0, 4);
  assert_int_equal(ts_points_decide(neg, &fact, 1, r, 4096, NULL, k), 0);
  int64_t budget = 10;
  assert_int_equal(ts_points_decide(neg, &fact, 1, r, 4096, &budget, k), -1);
  assert_int_equal(budget, 10);
  ts_points_cache_destroy(k);
  ts_var_ranges_destroy(r);
  ts_arena_destroy(a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_compiled_matches_bounds),
      cmocka_unit_test(test_decide_matches_brute_force),
      cmocka_unit_test(test_cache_follows_ranges),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
