/*
 * points.c — integer conditions decided by enumeration. The lowering passes
 * often need to know whether a condition over a few loop variables holds
 * everywhere, nowhere, or at some points only, given what is known about
 * where the code runs: each loop variable's range and the conditions of
 * the branches around it (the main part of a partitioned tile runs only
 * where its test held). With small extents the exact answer is cheap: every
 * point of the variables involved is visited (at most a budget of points),
 * the known conditions filter them, and the condition is evaluated at each
 * remaining one (compiled into a flat program, with the known conditions
 * tabulated once and looked up: see "compiled evaluation" and "facts
 * tabulated" below). Register promotion uses it to prove a slot inside its
 * buffer where the code runs; loop partitioning to drop a test that the
 * branches around it already decide.
 */
#include "codegen/internal.h"

#include <stdlib.h>
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

/* ---- compiled evaluation ----
 * Deciding a condition visits up to millions of points, and evaluating the
 * expression tree by interval bounds at each (ts_points_value) costs a map
 * lookup per variable and a range per node. The expressions are compiled
 * once into a flat post-order program over the point's variable values,
 * which gives the same answers as the bounds at a point (a node is known
 * when its bound would be one value) at a fraction of the cost. Loads,
 * calls, lets and non-integer nodes are not compiled: the caller falls back
 * to ts_points_value and ts_points_holds. */

typedef struct pnode {
  int kind, a, b, c; /* operand node indices (VAR: the variable's index) */
  int64_t value;     /* INT */
  int64_t lo, hi;    /* the dtype's range */
  bool strict;       /* a condition's top: unknown if any operand is */
  unsigned dep;      /* the variables it depends on, one bit each */
} pnode;

typedef struct proot {
  int end;   /* its last node; its first follows the previous root's last */
  bool seen; /* evaluated before, at `last` */
  int64_t last[TS_POINTS_MAX_VARS];
} proot;

struct ts_points_prog {
  const ts_points *p;
  pnode *n;
  int len, cap;
  int64_t *val;
  bool *known;
  proot *roots;
  int n_roots;
};

static bool is_int(ts_dtype t) {
  return t.lanes == 1 && (t.code == TS_DT_INT || t.code == TS_DT_UINT);
}

static int prog_push(ts_points_prog *g, pnode nd) {
  if (g->len == g->cap) {
    int cap = g->cap ? 2 * g->cap : 32;
    pnode *m = ts_realloc(g->n, sizeof *m * (size_t)cap);
    if (!m) return -1;
    g->n = m;
    g->cap = cap;
  }
  g->n[g->len] = nd;
  return g->len++;
}

/* Compiles e; `strict` for the logic skeleton of a condition, which
 * ts_points_holds decides operand by operand. -1: not compilable. */
static int prog_compile(ts_points_prog *g, ts_expr *e, bool strict, int depth) {
  if (!e || depth > 256) return -1;
  ts_expr_kind k = ts_expr_kind_of(e);
  pnode nd = {.kind = k, .a = -1, .b = -1, .c = -1};
  if (!ts_dtype_int_range(ts_expr_dtype(e), &nd.lo, &nd.hi)) return -1;
  bool logic = k == TS_EXPR_AND || k == TS_EXPR_OR || k == TS_EXPR_NOT;
  nd.strict = strict && (logic || (k >= TS_EXPR_EQ && k <= TS_EXPR_GE));
  if (strict && !nd.strict) return -1; /* ts_points_holds: undecidable */
  switch (k) {
  case TS_EXPR_INT:
    nd.value = ts_expr_int_value(e);
    if (ts_expr_dtype(e).code == TS_DT_UINT && nd.value < 0) return -1;
    return prog_push(g, nd);
  case TS_EXPR_VAR:
    for (int i = 0; i < g->p->n; i++)
      if (g->p->vars[i] == e) {
        nd.a = i;
        nd.dep = 1u << i;
        return prog_push(g, nd);
      }
    return -1;
  case TS_EXPR_ADD:
  case TS_EXPR_SUB:
  case TS_EXPR_MUL:
  case TS_EXPR_DIV:
  case TS_EXPR_MOD:
  case TS_EXPR_FLOORDIV:
  case TS_EXPR_FLOORMOD:
  case TS_EXPR_MIN:
  case TS_EXPR_MAX:
    if (!is_int(ts_expr_dtype(e))) return -1;
    break;
  case TS_EXPR_EQ:
  case TS_EXPR_NE:
  case TS_EXPR_LT:
  case TS_EXPR_LE:
  case TS_EXPR_GT:
  case TS_EXPR_GE:
  case TS_EXPR_AND:
  case TS_EXPR_OR:
  case TS_EXPR_NOT:
  case TS_EXPR_SELECT: break;
  case TS_EXPR_CAST: {
    ts_dtype src = ts_expr_dtype(ts_expr_operand(e, 0));
    if (!is_int(src) && src.code != TS_DT_BOOL) return -1;
    nd.value = ts_expr_dtype(e).code == TS_DT_BOOL; /* to bool: x != 0 */
    break;
  }
  default: return -1;
  }
  bool sub = nd.strict && logic; /* compares take values */
  int n = ts_expr_n_operands(e);
  int *slot[3] = {&nd.a, &nd.b, &nd.c};
  for (int i = 0; i < n && i < 3; i++)
    if ((*slot[i] = prog_compile(g, ts_expr_operand(e, i), sub, depth + 1)) < 0)
      return -1;
    else
      nd.dep |= g->n[*slot[i]].dep;
  return prog_push(g, nd);
}

ts_points_prog *ts_points_prog_create(const ts_points *p) {
  ts_points_prog *g = ts_calloc(1, sizeof *g);
  if (g) g->p = p;
  return g;
}

void ts_points_prog_destroy(ts_points_prog *g) {
  if (!g) return;
  free(g->n);
  free(g->val);
  free(g->known);
  free(g->roots);
  free(g);
}

int ts_points_prog_add(ts_points_prog *g, ts_expr *e, bool cond) {
  int start = g->len;
  int root = prog_compile(g, e, cond, 0);
  proot *roots = ts_realloc(g->roots, sizeof *roots * (size_t)(g->n_roots + 1));
  if (roots) g->roots = roots;
  int64_t *val = root < 0 || !roots
                     ? NULL
                     : ts_realloc(g->val, sizeof *val * (size_t)g->len);
  if (val) g->val = val;
  bool *known =
      val ? ts_realloc(g->known, sizeof *known * (size_t)g->len) : NULL;
  if (known) g->known = known;
  if (!known) {
    g->len = start;
    return -1;
  }
  g->roots[g->n_roots] = (proot){.end = root};
  return g->n_roots++;
}

static int64_t floordiv(int64_t x, int64_t y) {
  int64_t q = x / y;
  if (x % y != 0 && (x < 0) != (y < 0)) q--;
  return q;
}

/* One node from its operands; false when its bound would not be a single
 * value (an overflow, a zero divisor, an unknown operand). */
static bool node_eval(const pnode *nd, const int64_t *v, const bool *kn,
                      const int64_t *vars, int64_t *out) {
  int64_t x = nd->a >= 0 && nd->kind != TS_EXPR_VAR ? v[nd->a] : 0;
  int64_t y = nd->b >= 0 ? v[nd->b] : 0;
  bool ka = nd->a >= 0 && nd->kind != TS_EXPR_VAR && kn[nd->a];
  bool kb = nd->b >= 0 && kn[nd->b];
  switch (nd->kind) {
  case TS_EXPR_INT: return *out = nd->value, true;
  case TS_EXPR_VAR: return *out = vars[nd->a], true;
  case TS_EXPR_AND:
  case TS_EXPR_OR: {
    if (nd->strict && (!ka || !kb)) return false;
    bool zero_a = ka && x == 0, zero_b = kb && y == 0;
    bool one_a = ka && x != 0, one_b = kb && y != 0;
    if (nd->kind == TS_EXPR_AND) {
      if (zero_a || zero_b) return *out = 0, true;
      if (one_a && one_b) return *out = 1, true;
    } else {
      if (one_a || one_b) return *out = 1, true;
      if (zero_a && zero_b) return *out = 0, true;
    }
    return false;
  }
  case TS_EXPR_NOT:
    if (!ka) return false;
    return *out = x == 0, true;
  case TS_EXPR_SELECT:
    if (ka) {
      bool kc = x != 0 ? kb : kn[nd->c];
      *out = x != 0 ? y : v[nd->c];
      return kc;
    }
    if (!kb || !kn[nd->c] || y != v[nd->c]) return false;
    return *out = y, true;
  case TS_EXPR_CAST:
    if (!ka) return false;
    return *out = nd->value ? x != 0 : x, true; /* range checked after */
  default: break;
  }
  bool rem = nd->kind == TS_EXPR_MOD || nd->kind == TS_EXPR_FLOORMOD;
  if (rem && !ka && kb && (y == 1 || y == -1)) /* bounded by the divisor */
    return *out = 0, true;
  if (!ka || !kb) return false;
  switch (nd->kind) {
  case TS_EXPR_ADD: return !__builtin_add_overflow(x, y, out);
  case TS_EXPR_SUB: return !__builtin_sub_overflow(x, y, out);
  case TS_EXPR_MUL: return !__builtin_mul_overflow(x, y, out);
  case TS_EXPR_DIV:
  case TS_EXPR_FLOORDIV:
    if (y == 0 || (x == INT64_MIN && y == -1)) return false;
    *out = nd->kind == TS_EXPR_DIV ? x / y : floordiv(x, y);
    return true;
  case TS_EXPR_MOD: { /* as bounded: exact only below the divisor */
    if (y == 0 || y == INT64_MIN) return false;
    int64_t m = y < 0 ? -y : y;
    if (m == 1) return *out = 0, true;
    if (x >= 0 && x < m) return *out = x, true;
    return x == 0 ? (*out = 0, true) : false;
  }
  case TS_EXPR_FLOORMOD:
    if (y > 0) return *out = x - floordiv(x, y) * y, true;
    return y == -1 ? (*out = 0, true) : false;
  case TS_EXPR_MIN: return *out = x < y ? x : y, true;
  case TS_EXPR_MAX: return *out = x > y ? x : y, true;
  case TS_EXPR_EQ: return *out = x == y, true;
  case TS_EXPR_NE: return *out = x != y, true;
  case TS_EXPR_LT: return *out = x < y, true;
  case TS_EXPR_LE: return *out = x <= y, true;
  case TS_EXPR_GT: return *out = x > y, true;
  case TS_EXPR_GE: return *out = x >= y, true;
  default: return false;
  }
}

/* The value of root r at point `at`; false when unknown. Only the nodes
 * that depend on a variable changed since r's last evaluation are redone:
 * stepping through the points changes the first variable most often. */
bool ts_points_prog_value(ts_points_prog *g, int r, const int64_t *at,
                          int64_t *v) {
  int64_t vars[TS_POINTS_MAX_VARS];
  proot *rt = &g->roots[r];
  unsigned changed = rt->seen ? 0 : ~0u;
  for (int i = 0; i < g->p->n; i++) {
    vars[i] = g->p->min[i] + at[i];
    if (at[i] != rt->last[i]) changed |= 1u << i;
    rt->last[i] = at[i];
  }
  rt->seen = true;
  for (int i = r > 0 ? g->roots[r - 1].end + 1 : 0; i <= rt->end; i++) {
    const pnode *nd = &g->n[i];
    if (!(nd->dep & changed) && changed != ~0u) continue;
    int64_t out = 0;
    g->known[i] = node_eval(nd, g->val, g->known, vars, &out) &&
                  out >= nd->lo && out <= nd->hi;
    g->val[i] = out;
  }
  *v = g->val[rt->end];
  return g->known[rt->end];
}

int ts_points_prog_holds(ts_points_prog *g, int r, const int64_t *at) {
  int64_t v;
  return ts_points_prog_value(g, r, at, &v) ? v != 0 : -1;
}

/* ---- facts tabulated ----
 * The same facts (the tests of the copies around) are consulted by many
 * decisions in a row, and they are often large (a conjunction per
 * unrolled copy). Each fact is tabulated once over the points of its own
 * variables: 1, 0 or -1 (undecidable) per point. A decision then looks
 * its facts up by the projection of its point instead of evaluating
 * them, and a cache keeps the tables for the decisions that follow. */

typedef struct fact_tab {
  const ts_expr *fact;
  ts_points q; /* the fact's variables and their ranges when tabulated */
  int8_t *holds;
  bool undecidable; /* -1 somewhere: the fact is left out */
} fact_tab;

struct ts_points_cache {
  fact_tab **slot; /* open addressing on the fact's address */
  int cap, n;
};

ts_points_cache *ts_points_cache_create(void) {
  return ts_calloc(1, sizeof(ts_points_cache));
}

static void tab_destroy(fact_tab *t) {
  if (!t) return;
  free(t->holds);
  free(t);
}

void ts_points_cache_destroy(ts_points_cache *k) {
  if (!k) return;
  for (int i = 0; i < k->cap; i++) tab_destroy(k->slot[i]);
  free(k->slot);
  free(k);
}

static size_t slot_of(const ts_points_cache *k, const ts_expr *fact) {
  uintptr_t h = (uintptr_t)fact;
  h ^= h >> 17;
  h *= UINT64_C(0x9e3779b97f4a7c15);
  size_t i = (size_t)(h >> 20) & (size_t)(k->cap - 1);
  while (k->slot[i] && k->slot[i]->fact != fact)
    i = (i + 1) & (size_t)(k->cap - 1);
  return i;
}

/* The cached table of `fact` when its variables' ranges are still q's. */
static fact_tab *cache_find(ts_points_cache *k, const ts_expr *fact,
                            const ts_points *q) {
  if (!k || !k->cap) return NULL;
  fact_tab *t = k->slot[slot_of(k, fact)];
  if (!t || t->q.n != q->n) return NULL;
  for (int i = 0; i < q->n; i++)
    if (t->q.vars[i] != q->vars[i] || t->q.min[i] != q->min[i] ||
        t->q.extent[i] != q->extent[i])
      return NULL;
  return t;
}

/* Keeps t (replacing a stale table of the same fact); false when the
 * cache cannot take it, and the caller keeps it. */
static bool cache_put(ts_points_cache *k, fact_tab *t) {
  if (!k) return false;
  if (2 * (k->n + 1) > k->cap) {
    int cap = k->cap ? 2 * k->cap : 64;
    fact_tab **old = k->slot, **slot = ts_calloc((size_t)cap, sizeof *slot);
    if (!slot) return false;
    int old_cap = k->cap;
    k->slot = slot;
    k->cap = cap;
    for (int i = 0; i < old_cap; i++)
      if (old[i]) k->slot[slot_of(k, old[i]->fact)] = old[i];
    free(old);
  }
  size_t i = slot_of(k, t->fact);
  if (k->slot[i])
    tab_destroy(k->slot[i]);
  else
    k->n++;
  k->slot[i] = t;
  return true;
}

/* Tabulates fact over the points of q (compiled, or by bounds when it
 * does not compile). */
static fact_tab *tabulate(ts_expr *fact, const ts_points *q, int64_t n) {
  fact_tab *t = ts_calloc(1, sizeof *t);
  int8_t *holds = t ? ts_malloc((size_t)n) : NULL;
  if (!holds) {
    free(t);
    return NULL;
  }
  t->fact = fact;
  t->q = *q;
  t->holds = holds;
  ts_points_prog *g = ts_points_prog_create(&t->q);
  int r = g ? ts_points_prog_add(g, fact, true) : -1;
  ts_var_ranges *point = r < 0 ? ts_var_ranges_create() : NULL;
  int64_t at[TS_POINTS_MAX_VARS] = {0};
  for (int64_t i = 0; i < n; i++, ts_points_next(&t->q, at)) {
    int h = -1;
    if (r >= 0) {
      h = ts_points_prog_holds(g, r, at);
    } else if (point) {
      ts_points_set(&t->q, at, point);
      h = ts_points_holds(fact, point);
    }
    holds[i] = (int8_t)h;
    if (h < 0) t->undecidable = true;
  }
  ts_points_prog_destroy(g);
  if (point) ts_var_ranges_destroy(point);
  return t;
}

/* A used fact: its table and where a point of the decision finds its
 * entry (index = sum of at[j] * stride[j] over the decision's vars). */
typedef struct fact_use {
  fact_tab *tab;
  bool owned; /* not in the cache: freed after the decision */
  int64_t stride[TS_POINTS_MAX_VARS];
  int lowest; /* the first of the decision's vars it reads */
} fact_use;

static void fact_use_strides(fact_use *u, const ts_points *p) {
  int64_t step = 1;
  u->lowest = p->n;
  memset(u->stride, 0, sizeof u->stride);
  for (int k = 0; k < u->tab->q.n; k++) {
    for (int j = 0; j < p->n; j++)
      if (p->vars[j] == u->tab->q.vars[k]) {
        u->stride[j] = step;
        if (j < u->lowest) u->lowest = j;
      }
    step *= u->tab->q.extent[k];
  }
}

/* The condition at a point, compiled or by bounds. */
static int cond_holds(ts_points_prog *g, ts_expr *cond, const ts_points *p,
                      ts_var_ranges *point, const int64_t *at) {
  if (g) return ts_points_prog_holds(g, 0, at);
  ts_points_set(p, at, point);
  return ts_points_holds(cond, point);
}

int ts_points_decide(ts_expr *cond, ts_expr *const *facts, int n_facts,
                     const ts_var_ranges *ranges, int64_t max_points,
                     int64_t *budget, ts_points_cache *cache) {
  ts_points p = {.ranges = ranges};
  ts_points_add(&p, cond);
  if (ts_points_count(&p, max_points) < 0) return -1;
  if (n_facts > TS_POINTS_MAX_FACTS) n_facts = TS_POINTS_MAX_FACTS;
  /* the facts that fit: a fact left out only widens the set of points,
   * so what holds on the wider set holds where the code runs */
  fact_use use[TS_POINTS_MAX_FACTS];
  ts_points own[TS_POINTS_MAX_FACTS];
  int64_t own_n[TS_POINTS_MAX_FACTS];
  bool fits[TS_POINTS_MAX_FACTS] = {false};
  for (int i = 0; i < n_facts; i++) {
    ts_points q = p;
    ts_points_add(&q, facts[i]);
    if (ts_points_count(&q, max_points) < 0) continue;
    p = q;
    fits[i] = true;
    own[i] = (ts_points){.ranges = ranges};
    ts_points_add(&own[i], facts[i]);
    own_n[i] = ts_points_count(&own[i], max_points);
    use[i] = (fact_use){.tab = cache_find(cache, facts[i], &own[i])};
  }
  int64_t n = ts_points_count(&p, max_points);
  if (budget) { /* points times nodes: the condition's, and the tables' */
    int64_t cost = n * ts_points_size(cond);
    for (int i = 0; i < n_facts; i++)
      if (fits[i])
        cost += n + (use[i].tab ? 0 : own_n[i] * ts_points_size(facts[i]));
    if (cost > *budget) return -1;
    *budget -= cost;
  }
  int result = -1;
  int n_use = 0;
  fact_use *used[TS_POINTS_MAX_FACTS];
  for (int i = 0; i < n_facts; i++) {
    if (!fits[i]) continue;
    if (!use[i].tab) {
      use[i].tab = tabulate(facts[i], &own[i], own_n[i]);
      if (!use[i].tab) goto out;
      use[i].owned = !cache_put(cache, use[i].tab);
    }
    if (use[i].tab->undecidable) continue; /* left out */
    fact_use_strides(&use[i], &p);
    used[n_use++] = &use[i];
  }
  ts_points_prog *g = ts_points_prog_create(&p);
  bool compiled = g && ts_points_prog_add(g, cond, true) == 0;
  ts_var_ranges *point = compiled ? NULL : ts_var_ranges_create();
  if (compiled || point) {
    int64_t at[TS_POINTS_MAX_VARS] = {0};
    bool any_true = false, any_false = false, unknown = false;
    do {
      bool runs = true;
      for (int i = 0; runs && i < n_use; i++) {
        int64_t idx = 0;
        for (int j = 0; j < p.n; j++) idx += at[j] * used[i]->stride[j];
        if (used[i]->tab->holds[idx]) continue;
        runs = false; /* and stays so until a variable the fact reads moves */
        for (int j = 0; j < used[i]->lowest; j++) at[j] = p.extent[j] - 1;
      }
      if (!runs) continue;
      int h = cond_holds(compiled ? g : NULL, cond, &p, point, at);
      if (h < 0) unknown = true;
      if (h > 0) any_true = true;
      if (h == 0) any_false = true;
    } while (!unknown && !(any_true && any_false) && ts_points_next(&p, at));
    if (!unknown && !(any_true && any_false))
      result = any_false ? 0 : 1; /* no point at all: the code never runs */
  }
  ts_points_prog_destroy(g);
  if (point) ts_var_ranges_destroy(point);
out:
  for (int i = 0; i < n_facts; i++)
    if (fits[i] && use[i].owned) tab_destroy(use[i].tab);
  return result;
}
