/*
 * bound.c — the analyses the primitives share: symbolic interval bounds of
 * index expressions over relaxed loop variables (region inference for
 * compute_at and reverse_compute_at), numeric evaluation of index
 * expressions (injectivity and tensorize checks), linear forms (blockize),
 * and the race check for parallel, vectorized and thread-bound loops.
 */
#include "schedule/internal.h"

#include <stdlib.h>
#include <string.h>

/* ========================================================================
 * Symbolic bounds
 * ======================================================================== */

typedef struct ivl {
  ts_expr *lo, *hi;
} ivl;

struct relax_map {
  ts_node_map *map; /* var -> ivl* (malloc'd, owned) */
  ivl **owned;
  int n, cap;
};

/* What relax_create returns when out of memory (the failure is counted):
 * it relaxes nothing and takes nothing. */
static relax_map dead_relax;

relax_map *relax_create(void) {
  relax_map *m = ts_calloc(1, sizeof *m);
  if (!m) return &dead_relax;
  m->map = ts_node_map_create();
  return m;
}

void relax_destroy(relax_map *m) {
  if (!m || m == &dead_relax) return;
  for (int i = 0; i < m->n; i++) free(m->owned[i]);
  free(m->owned);
  ts_node_map_destroy(m->map);
  free(m);
}

void relax_set(relax_map *m, const ts_expr *var, ts_expr *lo, ts_expr *hi) {
  /* out of memory: the var stays unrelaxed (the failure is counted and
   * the public function reports TS_ENOMEM) */
  if (m == &dead_relax) return;
  if (m->n == m->cap) {
    int cap = m->cap ? m->cap * 2 : 16;
    ivl **owned = ts_realloc(m->owned, sizeof *m->owned * (size_t)cap);
    if (!owned) return;
    m->owned = owned;
    m->cap = cap;
  }
  ivl *v = ts_malloc(sizeof *v);
  if (!v) return;
  v->lo = lo;
  v->hi = hi;
  m->owned[m->n++] = v;
  ts_node_map_put(m->map, var, v);
}

void relax_loop(ts_arena *a, relax_map *m, const ts_stmt *loop) {
  ts_expr *mn = ts_for_min(loop);
  ts_expr *hi = ts_sub(a, ts_add(a, mn, ts_for_extent(loop)), ts_index(a, 1));
  relax_set(m, ts_for_var(loop), mn, hi);
}

static bool has_relaxed(const ts_expr *e, const relax_map *m) {
  return m->map && uses_any_var(e, m->map);
}

static bool index_int(ts_dtype t) {
  return t.lanes == 1 && (t.code == TS_DT_INT || t.code == TS_DT_UINT);
}

static bool bounds(ts_arena *a, ts_expr *e, const relax_map *m,
                   const ts_var_ranges *r, ivl *out, int depth) {
  if (depth > 100 || !index_int(ts_expr_dtype(e))) return false;
  if (!has_relaxed(e, m)) {
    *out = (ivl){e, e};
    return true;
  }
  ivl x, y;
  int64_t k;
  ts_expr_kind kind = ts_expr_kind_of(e);
  switch (kind) {
  case TS_EXPR_VAR: {
    ivl *v = ts_node_map_get(m->map, e);
    if (!v) return false;
    /* the interval's ends may themselves mention relaxed vars */
    ivl lo, hi;
    if (!bounds(a, v->lo, m, r, &lo, depth + 1) ||
        !bounds(a, v->hi, m, r, &hi, depth + 1))
      return false;
    *out = (ivl){lo.lo, hi.hi};
    return true;
  }
  case TS_EXPR_ADD:
  case TS_EXPR_SUB:
  case TS_EXPR_MIN:
  case TS_EXPR_MAX:
    if (!bounds(a, ts_expr_operand(e, 0), m, r, &x, depth + 1) ||
        !bounds(a, ts_expr_operand(e, 1), m, r, &y, depth + 1))
      return false;
    switch (kind) {
    case TS_EXPR_ADD:
      *out = (ivl){ts_add(a, x.lo, y.lo), ts_add(a, x.hi, y.hi)};
      break;
    case TS_EXPR_SUB:
      *out = (ivl){ts_sub(a, x.lo, y.hi), ts_sub(a, x.hi, y.lo)};
      break;
    case TS_EXPR_MIN:
      *out = (ivl){ts_min(a, x.lo, y.lo), ts_min(a, x.hi, y.hi)};
      break;
    default: *out = (ivl){ts_max(a, x.lo, y.lo), ts_max(a, x.hi, y.hi)}; break;
    }
    return true;
  case TS_EXPR_MUL: {
    ts_expr *p = ts_expr_operand(e, 1), *q = ts_expr_operand(e, 0);
    if (has_relaxed(p, m)) {
      p = ts_expr_operand(e, 0);
      q = ts_expr_operand(e, 1);
    }
    if (has_relaxed(p, m) || !ts_expr_is_const_int(p, &k)) return false;
    if (!bounds(a, q, m, r, &x, depth + 1)) return false;
    if (k >= 0)
      *out = (ivl){ts_mul(a, x.lo, p), ts_mul(a, x.hi, p)};
    else
      *out = (ivl){ts_mul(a, x.hi, p), ts_mul(a, x.lo, p)};
    return true;
  }
  case TS_EXPR_FLOORDIV: {
    ts_expr *d = ts_expr_operand(e, 1);
    if (!ts_expr_is_const_int(d, &k) || k <= 0) return false;
    if (!bounds(a, ts_expr_operand(e, 0), m, r, &x, depth + 1)) return false;
    *out = (ivl){ts_floordiv(a, x.lo, d), ts_floordiv(a, x.hi, d)};
    return true;
  }
  case TS_EXPR_FLOORMOD: {
    ts_expr *d = ts_expr_operand(e, 1);
    if (!ts_expr_is_const_int(d, &k) || k <= 0) return false;
    if (bounds(a, ts_expr_operand(e, 0), m, r, &x, depth + 1)) {
      ts_expr *ql = ts_simplify(a, ts_floordiv(a, x.lo, d), r);
      ts_expr *qh = ts_simplify(a, ts_floordiv(a, x.hi, d), r);
      int64_t dq;
      if (ts_expr_is_const_int(ts_simplify(a, ts_sub(a, qh, ql), r), &dq) &&
          dq == 0) {
        *out = (ivl){ts_floormod(a, x.lo, d), ts_floormod(a, x.hi, d)};
        return true;
      }
    }
    *out = (ivl){ts_index(a, 0), ts_index(a, k - 1)};
    return true;
  }
  case TS_EXPR_CAST: {
    ts_dtype from = ts_expr_dtype(ts_expr_operand(e, 0));
    if (!index_int(from) || from.bits > ts_expr_dtype(e).bits) return false;
    if (!bounds(a, ts_expr_operand(e, 0), m, r, &x, depth + 1)) return false;
    *out = (ivl){ts_cast(a, ts_expr_dtype(e), x.lo),
                 ts_cast(a, ts_expr_dtype(e), x.hi)};
    return true;
  }
  case TS_EXPR_SELECT:
    if (!bounds(a, ts_expr_operand(e, 1), m, r, &x, depth + 1) ||
        !bounds(a, ts_expr_operand(e, 2), m, r, &y, depth + 1))
      return false;
    *out = (ivl){ts_min(a, x.lo, y.lo), ts_max(a, x.hi, y.hi)};
    return true;
  default: return false;
  }
}

bool bound_expr(ts_arena *a, ts_expr *e, const relax_map *m,
                const ts_var_ranges *ranges, ts_expr **lo, ts_expr **hi) {
  ivl v;
  if (!bounds(a, e, m, ranges, &v, 0)) return false;
  *lo = ts_simplify(a, v.lo, ranges);
  *hi = ts_simplify(a, v.hi, ranges);
  return true;
}

/* ========================================================================
 * Numeric evaluation
 * ======================================================================== */

void env_set(env *e, const ts_expr *var, int64_t v) {
  for (int i = 0; i < e->n; i++)
    if (e->vars[i] == var) {
      e->vals[i] = v;
      return;
    }
  if (e->n < (int)(sizeof e->vars / sizeof e->vars[0])) {
    e->vars[e->n] = var;
    e->vals[e->n++] = v;
  }
}

static int64_t floordiv64(int64_t x, int64_t y) {
  int64_t q = x / y;
  if ((x % y != 0) && ((x < 0) != (y < 0))) q--;
  return q;
}

bool eval_int(const ts_expr *e, const env *en, int64_t *out) {
  int64_t x, y, z;
  ts_expr_kind k = ts_expr_kind_of(e);
  switch (k) {
  case TS_EXPR_INT: *out = ts_expr_int_value(e); return true;
  case TS_EXPR_VAR:
    for (int i = 0; i < en->n; i++)
      if (en->vars[i] == e) {
        *out = en->vals[i];
        return true;
      }
    return false;
  case TS_EXPR_CAST:
    if (!index_int(ts_expr_dtype(e)) && !ts_dtype_is_bool(ts_expr_dtype(e)))
      return false;
    return eval_int(ts_expr_operand(e, 0), en, out);
  case TS_EXPR_NOT:
    if (!eval_int(ts_expr_operand(e, 0), en, &x)) return false;
    *out = !x;
    return true;
  case TS_EXPR_SELECT:
    if (!eval_int(ts_expr_operand(e, 0), en, &x) ||
        !eval_int(ts_expr_operand(e, 1), en, &y) ||
        !eval_int(ts_expr_operand(e, 2), en, &z))
      return false;
    *out = x ? y : z;
    return true;
  default: break;
  }
  if (!ts_expr_is_binary(k) && !ts_expr_is_compare(k) && k != TS_EXPR_AND &&
      k != TS_EXPR_OR)
    return false;
  if (!eval_int(ts_expr_operand(e, 0), en, &x) ||
      !eval_int(ts_expr_operand(e, 1), en, &y))
    return false;
  switch (k) {
  case TS_EXPR_ADD: *out = (int64_t)((uint64_t)x + (uint64_t)y); return true;
  case TS_EXPR_SUB: *out = (int64_t)((uint64_t)x - (uint64_t)y); return true;
  case TS_EXPR_MUL: *out = (int64_t)((uint64_t)x * (uint64_t)y); return true;
  case TS_EXPR_DIV:
    if (y == 0 || (x == INT64_MIN && y == -1)) return false;
    *out = x / y;
    return true;
  case TS_EXPR_MOD:
    if (y == 0 || (x == INT64_MIN && y == -1)) return false;
    *out = x % y;
    return true;
  case TS_EXPR_FLOORDIV:
    if (y == 0 || (x == INT64_MIN && y == -1)) return false;
    *out = floordiv64(x, y);
    return true;
  case TS_EXPR_FLOORMOD:
    if (y == 0 || (x == INT64_MIN && y == -1)) return false;
    *out = x - floordiv64(x, y) * y;
    return true;
  case TS_EXPR_MIN: *out = x < y ? x : y; return true;
  case TS_EXPR_MAX: *out = x > y ? x : y; return true;
  case TS_EXPR_EQ: *out = x == y; return true;
  case TS_EXPR_NE: *out = x != y; return true;
  case TS_EXPR_LT: *out = x < y; return true;
  case TS_EXPR_LE: *out = x <= y; return true;
  case TS_EXPR_GT: *out = x > y; return true;
  case TS_EXPR_GE: *out = x >= y; return true;
  case TS_EXPR_AND: *out = x && y; return true;
  case TS_EXPR_OR: *out = x || y; return true;
  default: return false;
  }
}

/* ========================================================================
 * Linear forms
 * ======================================================================== */

static bool lin_add(linear *l, const ts_expr *var, int64_t coef) {
  for (int i = 0; i < l->n; i++)
    if (l->vars[i] == var) {
      l->coefs[i] += coef;
      return true;
    }
  if (l->n == (int)(sizeof l->vars / sizeof l->vars[0])) return false;
  l->vars[l->n] = var;
  l->coefs[l->n++] = coef;
  return true;
}

static bool lin_rec(const ts_expr *e, int64_t scale, linear *l, int depth) {
  int64_t k;
  if (depth > 200) return false;
  switch (ts_expr_kind_of(e)) {
  case TS_EXPR_INT: l->constant += scale * ts_expr_int_value(e); return true;
  case TS_EXPR_VAR: return lin_add(l, e, scale);
  case TS_EXPR_ADD:
    return lin_rec(ts_expr_operand(e, 0), scale, l, depth + 1) &&
           lin_rec(ts_expr_operand(e, 1), scale, l, depth + 1);
  case TS_EXPR_SUB:
    return lin_rec(ts_expr_operand(e, 0), scale, l, depth + 1) &&
           lin_rec(ts_expr_operand(e, 1), -scale, l, depth + 1);
  case TS_EXPR_MUL:
    if (ts_expr_is_const_int(ts_expr_operand(e, 1), &k))
      return lin_rec(ts_expr_operand(e, 0), scale * k, l, depth + 1);
    if (ts_expr_is_const_int(ts_expr_operand(e, 0), &k))
      return lin_rec(ts_expr_operand(e, 1), scale * k, l, depth + 1);
    return false;
  case TS_EXPR_CAST:
    if (!index_int(ts_expr_dtype(e))) return false;
    return lin_rec(ts_expr_operand(e, 0), scale, l, depth + 1);
  default: return false;
  }
}

bool linear_of(const ts_expr *e, linear *out) {
  memset(out, 0, sizeof *out);
  if (!lin_rec(e, 1, out, 0)) return false;
  /* drop zero terms */
  int m = 0;
  for (int i = 0; i < out->n; i++)
    if (out->coefs[i] != 0) {
      out->vars[m] = out->vars[i];
      out->coefs[m++] = out->coefs[i];
    }
  out->n = m;
  return true;
}

/* ========================================================================
 * Race check for parallel-like loops
 * ======================================================================== */

/* The largest number of loop iterations enumerated for the injectivity
 * check of writes. */
#define MAX_ENUM TS_PARALLEL_CHECK_MAX

/* Binds every var of an expression to 0 (unless bound already). */
static void bind_zero(void *ctx, ts_expr *e) {
  env *en = ctx;
  if (ts_expr_kind_of(e) != TS_EXPR_VAR) return;
  for (int i = 0; i < en->n; i++)
    if (en->vars[i] == e) return;
  env_set(en, e, 0);
}

/* Tuples of int64 compared lexicographically; the first element holds the
 * tuple's width minus one, so the comparison reads it. */
static int cmp_tuple(const void *x, const void *y) {
  const int64_t *a = x, *b = y;
  int n = (int)a[0] + 1;
  for (int i = 0; i < n; i++)
    if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
  return 0;
}

bool parallel_safe(ts_sched *s, const ts_stmt *loop, const ts_stmt *realize,
                   char *why, size_t why_cap) {
  (void)s;
  const ts_block *b = ts_realize_block(realize);
  const ts_expr *v = ts_for_var(loop);
  bool bound = false, has_reduce = ts_block_init(b) != NULL;
  for (int i = 0; i < ts_block_n_iters(b) && i < ts_realize_n_values(realize);
       i++) {
    ts_iter_kind k = ts_block_iter_kind(b, i);
    if (k != TS_ITER_SPATIAL) has_reduce = true;
    if (!uses_var(ts_realize_value(realize, i), v)) continue;
    bound = true;
    if (k != TS_ITER_SPATIAL) {
      snprintf(why, why_cap, "loop '%s' carries a reduction in block '%s'",
               loop_name(loop), ts_block_name(b));
      return false;
    }
  }
  if (!has_reduce) return true; /* recomputation writes equal values */
  if (!bound) {
    snprintf(why, why_cap,
             "block '%s' (a reduction) is recomputed in every iteration of "
             "loop '%s'",
             ts_block_name(b), loop_name(loop));
    return false;
  }
  /* A reduction must write disjoint points in different iterations: check
   * that the spatial iter values differ for every two values of the loop
   * var (every other var at 0). */
  int64_t mn, ex;
  if (!ts_expr_is_const_int(ts_for_min(loop), &mn) ||
      !ts_expr_is_const_int(ts_for_extent(loop), &ex) || ex > MAX_ENUM) {
    snprintf(why, why_cap,
             "cannot prove that block '%s' writes disjoint points in the "
             "iterations of loop '%s'",
             ts_block_name(b), loop_name(loop));
    return false;
  }
  env en = {0};
  int nsp = 0;
  for (int i = 0; i < ts_block_n_iters(b); i++)
    if (ts_block_iter_kind(b, i) == TS_ITER_SPATIAL) {
      ts_expr_walk(ts_realize_value(realize, i), bind_zero, &en);
      nsp++;
    }
  int64_t *tuples = ts_calloc((size_t)(ex * (nsp + 1) + 1), sizeof *tuples);
  if (!tuples) { /* out of memory (counted; the caller reports it) */
    snprintf(why, why_cap, "out of memory");
    return false;
  }
  bool ok = true;
  for (int64_t it = 0; it < ex && ok; it++) {
    env_set(&en, v, mn + it);
    int64_t *t = tuples + it * (nsp + 1);
    t[0] = nsp;
    int m = 1;
    for (int i = 0; i < ts_block_n_iters(b) && ok; i++)
      if (ts_block_iter_kind(b, i) == TS_ITER_SPATIAL)
        ok = eval_int(ts_realize_value(realize, i), &en, &t[m++]);
  }
  if (ok) {
    qsort(tuples, (size_t)ex, sizeof(int64_t) * (size_t)(nsp + 1), cmp_tuple);
    for (int64_t i = 1; i < ex && ok; i++)
      if (memcmp(tuples + i * (nsp + 1), tuples + (i - 1) * (nsp + 1),
                 sizeof(int64_t) * (size_t)(nsp + 1)) == 0)
        ok = false;
  }
  free(tuples);
  if (!ok)
    snprintf(why, why_cap,
             "block '%s' (a reduction) writes the same points in different "
             "iterations of loop '%s'",
             ts_block_name(b), loop_name(loop));
  return ok;
}
