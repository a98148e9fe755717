/*
 * points.c — integer conditions decided by enumeration. The lowering passes
 * often need to know whether a condition over a few loop variables holds
 * everywhere, nowhere, or at some points only, given what is known about
 * where the code runs: each loop variable's range and the conditions of
 * the branches around it (the main part of a partitioned tile runs only
 * where its test held). With small extents the exact answer is cheap: every
 * point of the variables involved is visited (at most a budget of points),
 * the known conditions filter them, and the condition is evaluated at each
 * remaining one. Register promotion uses it to prove a slot inside its
 * buffer where the code runs; loop partitioning to drop a test that the
 * branches around it already decide.
 */
#include "codegen/internal.h"

#include <string.h>

static void collect_var(void *ctx, ts_expr *e) {
  ts_points *pv = ctx;
  if (ts_expr_kind_of(e) != TS_EXPR_VAR) return;
  for (int i = 0; i < pv->n; i++)
    if (pv->vars[i] == e) return;
  int64_t mn, ex;
  if (pv->n == TS_POINTS_MAX_VARS ||
      !ts_var_ranges_get(pv->ranges, e, &mn, &ex)) {
    pv->over = true;
    return;
  }
  pv->vars[pv->n] = e;
  pv->min[pv->n] = mn;
  pv->extent[pv->n++] = ex;
}

void ts_points_add(ts_points *p, ts_expr *e) {
  ts_expr_walk(e, collect_var, p);
}

int64_t ts_points_count(const ts_points *p, int64_t cap) {
  if (p->over) return -1;
  int64_t points = 1;
  for (int i = 0; i < p->n; i++) {
    if (p->extent[i] <= 0 || points > cap / p->extent[i]) return -1;
    points *= p->extent[i];
  }
  return points;
}

void ts_points_set(const ts_points *p, const int64_t *at,
                   ts_var_ranges *point) {
  for (int i = 0; i < p->n; i++)
    ts_var_ranges_set(point, p->vars[i], p->min[i] + at[i], 1);
}

bool ts_points_next(const ts_points *p, int64_t *at) {
  for (int i = 0; i < p->n; i++) {
    if (++at[i] < p->extent[i]) return true;
    at[i] = 0;
  }
  return false;
}

bool ts_points_value(const ts_expr *e, const ts_var_ranges *point, int64_t *v) {
  int64_t lo, hi;
  if (!ts_expr_const_bound(e, point, &lo, &hi) || lo != hi) return false;
  *v = lo;
  return true;
}

int ts_points_holds(const ts_expr *e, const ts_var_ranges *point) {
  ts_expr_kind k = ts_expr_kind_of(e);
  if (k == TS_EXPR_AND || k == TS_EXPR_OR) {
    int x = ts_points_holds(ts_expr_operand(e, 0), point);
    int y = ts_points_holds(ts_expr_operand(e, 1), point);
    if (x < 0 || y < 0) return -1;
    return k == TS_EXPR_AND ? x && y : x || y;
  }
  if (k == TS_EXPR_NOT) {
    int x = ts_points_holds(ts_expr_operand(e, 0), point);
    return x < 0 ? -1 : !x;
  }
  int64_t x, y;
  if (k < TS_EXPR_EQ || k > TS_EXPR_GE ||
      !ts_points_value(ts_expr_operand(e, 0), point, &x) ||
      !ts_points_value(ts_expr_operand(e, 1), point, &y))
    return -1;
  switch (k) {
  case TS_EXPR_EQ: return x == y;
  case TS_EXPR_NE: return x != y;
  case TS_EXPR_LT: return x < y;
  case TS_EXPR_LE: return x <= y;
  case TS_EXPR_GT: return x > y;
  default: return x >= y;
  }
}

static void size_fn(void *ctx, ts_expr *e) {
  (void)e;
  ++*(int64_t *)ctx;
}

int64_t ts_points_size(ts_expr *e) {
  int64_t n = 0;
  ts_expr_walk(e, size_fn, &n);
  return n;
}

int ts_points_decide(ts_expr *cond, ts_expr *const *facts, int n_facts,
                     const ts_var_ranges *ranges, int64_t max_points,
                     int64_t *budget) {
  ts_points p = {.ranges = ranges};
  ts_points_add(&p, cond);
  if (ts_points_count(&p, max_points) < 0) return -1;
  /* the facts that fit: a fact left out only widens the set of points,
   * so what holds on the wider set holds where the code runs */
  bool use[TS_POINTS_MAX_FACTS] = {false};
  for (int i = 0; i < n_facts && i < TS_POINTS_MAX_FACTS; i++) {
    ts_points q = p;
    ts_points_add(&q, facts[i]);
    if (ts_points_count(&q, max_points) < 0) continue;
    p = q;
    use[i] = true;
  }
  if (budget) {
    int64_t size = ts_points_size(cond);
    for (int i = 0; i < n_facts && i < TS_POINTS_MAX_FACTS; i++)
      if (use[i]) size += ts_points_size(facts[i]);
    int64_t cost = ts_points_count(&p, max_points) * size;
    if (cost > *budget) return -1;
    *budget -= cost;
  }
  ts_var_ranges *point = ts_var_ranges_create();
  if (!point) return -1;
  int64_t at[TS_POINTS_MAX_VARS];
  memset(at, 0, sizeof at);
  bool any_true = false, any_false = false, unknown = false;
  do {
    ts_points_set(&p, at, point);
    bool runs = true;
    for (int i = 0; runs && i < n_facts && i < TS_POINTS_MAX_FACTS; i++) {
      if (!use[i]) continue;
      int h = ts_points_holds(facts[i], point);
      if (h < 0) use[i] = false; /* undecidable here: left out */
      runs = h != 0;
    }
    if (!runs) continue;
    int h = ts_points_holds(cond, point);
    if (h < 0) unknown = true;
    if (h > 0) any_true = true;
    if (h == 0) any_false = true;
  } while (!unknown && !(any_true && any_false) && ts_points_next(&p, at));
  ts_var_ranges_destroy(point);
  if (unknown || (any_true && any_false)) return -1;
  return any_false ? 0 : 1; /* no point at all: the code never runs */
}
