/*
 * partition.c — loop partitioning of predicated tiles. A split whose factors
 * do not divide the extent guards the blocks under it with `fused < extent`
 * (schedule/loops.c); after block lowering that is an `if` around the body
 * of the innermost loops, which keeps the kernel from being unrolled and
 * vectorized as a perfect tile would be. This pass finds, for each such
 * condition, the outermost loop L under which it becomes decidable: wrapped
 * around the loop nest directly inside L, the test "the condition holds at
 * the largest values of every loop below" depends only on L and the loops
 * above it. The nest is then duplicated: a main copy, taken when the test
 * holds, without the condition (the clean kernel), and a tail copy that
 * keeps it and is partitioned again deeper (a tail of a cache tile holds
 * whole register tiles), up to three tails deep, which bounds the code
 * size. A condition that holds
 * everywhere is dropped. Several conditions (one per imperfect split) and
 * nested levels are handled one after another, within a budget of copies.
 * A tail skips (or, at the depth limit, freezes) the conjunct it was cut
 * on, not the whole `if`: the other conjuncts of the same `if` (the slot
 * of a column block past its last tile, beside the columns' test) are
 * still partitioned there.
 *
 * Conditions handled: conjuncts `a < b` (and <=, >, >=) of an `if` without
 * else, integer scalars, linear in the loop variables below the test with
 * constant coefficients; anything above the test (loop variables of
 * enclosing loops, fused indices with floordiv/floormod) may appear in any
 * form. Functions with thread-bound loops (GPU kernels) are left alone.
 *
 * The guards of `if_then_else` expressions (an inlined padding block's
 * `if_then_else(0 <= h - 1 && h - 1 < H && ..., data[...], 0)`, scalar or
 * broadcast to the vector) are partitioned too, all at once: at each
 * position, every guard conjunct decidable there goes into one test (the
 * interior of the image), under which the main copy reads without guards
 * (the plain load, which LLVM can keep in registers across neighbouring
 * taps); the border copy keeps every guard and is not partitioned on them
 * again at that position, so a conv with four padded sides costs one copy
 * per position, not sixteen. Under a deeper serial loop with another
 * serial loop below it (a dense conv's kernel rows and columns, its input
 * channels below), a border copy's guards are partitioned again, one
 * level, so a border tile runs its interior taps unguarded. A guard that
 * is not linear in a loop below (the pixel of a tile of fused rows and
 * columns, floordiv(tile * 8 + p, W)) gets the conjunction of its tests
 * at each of that loop's values, 16 at most.
 *
 * After unrolling, ts_lower_partition_decide runs the same walk without
 * making copies: each unrolled copy's conditions and if/else branches (a
 * ragged register tile's rows past the end, in the tail copy) are decided
 * by the tests of the copies around them; what always holds is dropped,
 * the side that never runs removed. There, a border copy's guard that no
 * loop below changes (an unrolled column's test, with the input channels
 * in a serial loop below) splits the copy once more, into one where it
 * holds and one where it fails, up to MAX_UNSWITCH copies per function; a
 * guard that fails reads the padding value, and an accumulation of the
 * resulting zero product is removed, so a border tile skips its taps
 * outside the image.
 *
 * Tests are decided by the facts around them as well as by the loops'
 * ranges: the tests of the copies and branches the statement is in
 * (codegen/points.c enumerates the points of the few loop variables
 * involved), so a tile's tail test inside the interior copy, or the last
 * tile's test inside the first tile's copy, makes no copy that can never
 * run.
 */
#include "codegen/internal.h"

#include <stdlib.h>
#include <string.h>

#define MAX_INNER 64      /* loops between a test and a condition */
#define MAX_COPIES 32     /* partitions per function */
#define MAX_CONJ 16       /* conjuncts of one condition */
#define MAX_TAIL_DEPTH 3  /* tails partitioned again, nested */
#define MAX_FACTS 16      /* branch conditions known around a statement */
#define FACT_POINTS 16384 /* points enumerated to decide a test by them */
/* points enumerated times the expression nodes evaluated at each, per
 * pass over a function: past it, tests are decided by the loops' ranges
 * alone (docs/schedules.md, "a budget for the facts") */
#define FACT_BUDGET (INT64_C(1) << 32)
/* border copies of guards partitioned again at a deeper serial loop,
 * nested: a padded conv's border tile runs its interior taps unguarded */
#define MAX_BORDER_DEPTH 2
/* after unrolling, border copies split on a guard that no loop below
 * changes (an unrolled tap's column test), per function */
#define MAX_UNSWITCH 16

typedef struct part_ctx {
  ts_arena *a;
  ts_var_ranges *ranges; /* every loop seen so far */
  int copies;            /* partitions made */
  /* tails within tails being partitioned; at MAX_TAIL_DEPTH the tail's
   * ifs are frozen: not partitioned again deeper (only dropped where they
   * always hold) */
  int tail_depth;
  /* the ifs (ts_stmt) and if_then_else guards (their condition, ts_expr)
   * not to partition on in the subtree being rebuilt */
  const void **frozen;
  /* for each frozen guard, the var of the loop it was frozen under (it
   * may be partitioned again under a deeper serial loop, up to
   * MAX_BORDER_DEPTH borders deep); NULL for ifs and at the limit */
  const ts_expr **frozen_at;
  int n_frozen, cap_frozen;
  int border_depth;   /* guards' border copies being partitioned, nested */
  bool newest_serial; /* the loop directly around is a serial one */
  bool decide_only;   /* after unrolling: decide, make no copies */
  int unswitched;     /* guards split on after unrolling */
  /* the conditions known to hold where the statement being rebuilt runs:
   * the tests of the copies and branches around it */
  ts_expr *facts[MAX_FACTS];
  int n_facts;
  int64_t points_left;    /* of FACT_BUDGET */
  ts_points_cache *cache; /* the facts' tables */
} part_ctx;

/* Pushes a fact for the subtree about to be rebuilt (dropped when the
 * stack is full: a fact left out only makes decisions rarer). Returns the
 * depth to restore. */
static int push_fact(part_ctx *c, ts_expr *fact) {
  int depth = c->n_facts;
  if (fact && c->n_facts < MAX_FACTS) c->facts[c->n_facts++] = fact;
  return depth;
}

/* Adds node to c->frozen, under the loop whose var is `at` only (NULL:
 * everywhere below); false when out of memory (counted). */
static bool freeze(part_ctx *c, const void *node, const ts_expr *at) {
  if (c->n_frozen == c->cap_frozen) {
    int cap = c->cap_frozen ? 2 * c->cap_frozen : 16;
    const void **f = ts_realloc(c->frozen, sizeof *c->frozen * (size_t)cap);
    if (!f) return false;
    c->frozen = f;
    const ts_expr **fa =
        ts_realloc(c->frozen_at, sizeof *c->frozen_at * (size_t)cap);
    if (!fa) return false;
    c->frozen_at = fa;
    c->cap_frozen = cap;
  }
  c->frozen_at[c->n_frozen] = at;
  c->frozen[c->n_frozen++] = node;
  return true;
}

/* Whether node is not to be partitioned on under the loop whose var is
 * `newest`; `deeper`: a frozen guard may be partitioned again there (see
 * part_guards). */
static bool is_frozen_at(const part_ctx *c, const void *node,
                         const ts_expr *newest, bool deeper) {
  for (int k = 0; k < c->n_frozen; k++)
    if (c->frozen[k] == node &&
        (!c->frozen_at[k] || c->frozen_at[k] == newest || !deeper))
      return true;
  return false;
}

static bool is_frozen(const part_ctx *c, const void *node) {
  return is_frozen_at(c, node, NULL, false);
}

static bool serial_loop_fn(void *ctx, ts_stmt *s) {
  bool *found = ctx;
  if (ts_stmt_kind_of(s) == TS_STMT_FOR && ts_for_kind_of(s) == TS_FOR_SERIAL)
    *found = true;
  return !*found;
}

/* Whether s holds a serial loop. */
static bool has_serial_loop(ts_stmt *s) {
  bool found = false;
  ts_visitor v = {.enter_stmt = serial_loop_fn, .ctx = &found};
  ts_stmt_walk(s, &v);
  return found;
}

/* ---- conjuncts ---- */

static int conjuncts(ts_expr *c, ts_expr **out, int n) {
  if (ts_expr_kind_of(c) == TS_EXPR_AND && n >= 0) {
    n = conjuncts(ts_expr_operand(c, 0), out, n);
    return n < 0 ? n : conjuncts(ts_expr_operand(c, 1), out, n);
  }
  if (n >= MAX_CONJ) return -1;
  out[n] = c;
  return n + 1;
}

/* c as lhs - rhs < 0: the difference, or NULL when c is no integer
 * comparison of that kind. */
static ts_expr *as_negative(ts_arena *a, ts_expr *c) {
  ts_expr_kind k = ts_expr_kind_of(c);
  if (k != TS_EXPR_LT && k != TS_EXPR_LE && k != TS_EXPR_GT && k != TS_EXPR_GE)
    return NULL;
  ts_expr *x = ts_expr_operand(c, 0), *y = ts_expr_operand(c, 1);
  ts_dtype t = ts_expr_dtype(x);
  if (t.lanes != 1 || !ts_dtype_is_int(t) || ts_expr_dtype(y).lanes != 1)
    return NULL;
  switch (k) {
  case TS_EXPR_LT: return ts_sub(a, x, y);
  case TS_EXPR_LE: return ts_sub(a, ts_sub(a, x, y), ts_index(a, 1));
  case TS_EXPR_GT: return ts_sub(a, y, x);
  default: return ts_sub(a, ts_sub(a, y, x), ts_index(a, 1));
  }
}

/* ---- linear forms over the loops below a test ---- */

typedef struct inner_loops {
  ts_expr *var[MAX_INNER];
  int64_t min[MAX_INNER], ext[MAX_INNER];
  bool known[MAX_INNER]; /* constant range */
  int n;
  bool overflow; /* deeper than MAX_INNER */
} inner_loops;

typedef struct lin {
  ts_expr *rest; /* the part free of inner loop vars (NULL: 0) */
  int64_t coef[MAX_INNER];
  bool ok;
} lin;

typedef struct uses_ctx {
  const inner_loops *in;
  bool uses, impure;
} uses_ctx;

static void uses_fn(void *ctx, ts_expr *e) {
  uses_ctx *u = ctx;
  ts_expr_kind k = ts_expr_kind_of(e);
  if (k == TS_EXPR_LOAD || k == TS_EXPR_CALL || k == TS_EXPR_ADDRESS_OF ||
      k == TS_EXPR_LET)
    u->impure = true;
  if (k != TS_EXPR_VAR) return;
  for (int i = 0; i < u->in->n; i++)
    if (u->in->var[i] == e) u->uses = true;
}

static void lin_of(ts_arena *a, const inner_loops *in, ts_expr *e, int64_t k,
                   lin *out) {
  if (!out->ok) return;
  uses_ctx u = {in, false, false};
  ts_expr_walk(e, uses_fn, &u);
  if (u.impure) {
    out->ok = false;
    return;
  }
  if (!u.uses) {
    ts_expr *t = k == 1 ? e : ts_mul(a, e, ts_index(a, k));
    out->rest = out->rest ? ts_add(a, out->rest, t) : t;
    return;
  }
  int64_t c;
  switch (ts_expr_kind_of(e)) {
  case TS_EXPR_VAR:
    for (int i = 0; i < in->n; i++)
      if (in->var[i] == e) {
        if (__builtin_add_overflow(out->coef[i], k, &out->coef[i]))
          out->ok = false;
        return;
      }
    out->ok = false;
    return;
  case TS_EXPR_ADD:
    lin_of(a, in, ts_expr_operand(e, 0), k, out);
    lin_of(a, in, ts_expr_operand(e, 1), k, out);
    return;
  case TS_EXPR_SUB:
    lin_of(a, in, ts_expr_operand(e, 0), k, out);
    lin_of(a, in, ts_expr_operand(e, 1), -k, out);
    return;
  case TS_EXPR_MUL: {
    int64_t kk;
    if (ts_expr_is_const_int(ts_expr_operand(e, 1), &c) &&
        !__builtin_mul_overflow(k, c, &kk)) {
      lin_of(a, in, ts_expr_operand(e, 0), kk, out);
      return;
    }
    if (ts_expr_is_const_int(ts_expr_operand(e, 0), &c) &&
        !__builtin_mul_overflow(k, c, &kk)) {
      lin_of(a, in, ts_expr_operand(e, 1), kk, out);
      return;
    }
    out->ok = false;
    return;
  }
  default: out->ok = false; return;
  }
}

static ts_expr *hoisted_test_n(ts_arena *a, const inner_loops *in, ts_expr *neg,
                               bool *invariant, int points);

/* hoisted_test for a conjunct that is not linear in inner loop i (a
 * pixel of a tile of fused rows and columns, floordiv(tile * 8 + p, W)):
 * the conjunction of the tests with i at each of its values, at most
 * `points` of them in all; NULL where that does not do. */
static ts_expr *enumerated_test(ts_arena *a, const inner_loops *in, int i,
                                ts_expr *neg, int points) {
  if (!in->known[i] || in->ext[i] > points || in->ext[i] <= 0) return NULL;
  ts_node_map *m = ts_node_map_create();
  if (!m) return NULL;
  ts_expr *all = NULL;
  for (int64_t v = in->min[i]; v < in->min[i] + in->ext[i]; v++) {
    ts_node_map_put(m, in->var[i], ts_index(a, v));
    bool inv;
    ts_expr *t = hoisted_test_n(a, in, ts_expr_substitute(a, neg, m, NULL),
                                &inv, points / (int)in->ext[i]);
    if (!t) {
      all = NULL;
      break;
    }
    all = all ? ts_and(a, all, t) : t;
  }
  ts_node_map_destroy(m);
  return all;
}

typedef struct var_pick {
  const inner_loops *in;
  int i; /* the first inner loop var met, -1 */
} var_pick;
static void var_pick_fn(void *ctx, ts_expr *e) {
  var_pick *p = ctx;
  if (p->i >= 0 || ts_expr_kind_of(e) != TS_EXPR_VAR) return;
  for (int i = 0; i < p->in->n; i++)
    if (p->in->var[i] == e) p->i = i;
}

/* Inner loops of at most this many values in all are enumerated where a
 * conjunct is not linear in them. */
#define ENUM_POINTS 16

/* The test under which conjunct `neg < 0` holds for every value of the
 * inner loops: `rest + max(linear part) < 0`, or NULL. */
static ts_expr *hoisted_test(ts_arena *a, const inner_loops *in, ts_expr *neg,
                             bool *invariant) {
  return hoisted_test_n(a, in, neg, invariant, ENUM_POINTS);
}

static ts_expr *hoisted_test_n(ts_arena *a, const inner_loops *in, ts_expr *neg,
                               bool *invariant, int points) {
  lin l;
  memset(&l, 0, sizeof l);
  l.ok = true;
  lin_of(a, in, neg, 1, &l);
  if (!l.ok) {
    /* a var under floordiv or floormod: its values one by one */
    var_pick vp = {in, -1};
    ts_expr_walk(neg, var_pick_fn, &vp);
    if (vp.i < 0 || points <= 1) return NULL;
    *invariant = false;
    return enumerated_test(a, in, vp.i, neg, points);
  }
  int64_t top = 0;
  *invariant = true;
  for (int i = 0; i < in->n; i++) {
    if (!l.coef[i]) continue;
    *invariant = false;
    if (!in->known[i]) return NULL;
    int64_t v = l.coef[i] > 0 ? in->min[i] + in->ext[i] - 1 : in->min[i], t;
    if (__builtin_mul_overflow(l.coef[i], v, &t) ||
        __builtin_add_overflow(top, t, &top))
      return NULL;
  }
  ts_expr *lhs =
      l.rest ? ts_add(a, l.rest, ts_index(a, top)) : ts_index(a, top);
  return ts_lt(a, lhs, ts_index(a, 0));
}

/* ---- conditions under a statement ---- */

typedef struct site {
  ts_stmt *iff;   /* the if statement (NULL for a guard) */
  ts_expr *guard; /* or the condition operand of an if_then_else */
  int conj;       /* which conjunct of its condition */
  ts_expr *cexpr; /* that conjunct: what a skip or freeze names (an if's
                   * other conjuncts stay free to partition on) */
  ts_expr *test;  /* the hoisted test (not simplified) */
  bool invariant; /* the conjunct does not vary below the test */
  ts_expr *fail;  /* after unrolling: the hoisted test under which the
                   * conjunct fails for every value below (NULL: none) */
} site;

typedef struct site_walk {
  part_ctx *c;
  inner_loops in;
  site *v;
  int n, cap;
} site_walk;

/* Adds a site for each conjunct of cond (of if statement iff or of guard)
 * that has a hoisted test here. */
static void add_sites(site_walk *w, ts_expr *cond, ts_stmt *iff,
                      ts_expr *guard) {
  ts_expr *cj[MAX_CONJ];
  int n = conjuncts(cond, cj, 0);
  for (int k = 0; k < n; k++) {
    ts_expr *neg = as_negative(w->c->a, cj[k]);
    bool inv = false;
    ts_expr *test = neg ? hoisted_test(w->c->a, &w->in, neg, &inv) : NULL;
    if (!test) continue;
    ts_expr *fail = NULL;
    if (w->c->decide_only && !inv) {
      /* neg >= 0 everywhere below: -1 - neg < 0 for every value */
      bool inv2;
      fail = hoisted_test(w->c->a, &w->in,
                          ts_sub(w->c->a, ts_index(w->c->a, -1), neg), &inv2);
    }
    if (w->n == w->cap) {
      int cap = w->cap ? 2 * w->cap : 16;
      site *v = ts_realloc(w->v, sizeof *w->v * (size_t)cap);
      if (!v) continue; /* out of memory (counted): not partitioned */
      w->v = v;
      w->cap = cap;
    }
    w->v[w->n++] = (site){iff, guard, k, cj[k], test, inv, fail};
  }
}

/* The scalar condition of an if_then_else guard (a broadcast one's
 * operand), or NULL when it varies across vector lanes. */
static ts_expr *guard_scalar(ts_expr *guard) {
  if (ts_expr_kind_of(guard) == TS_EXPR_BROADCAST)
    return ts_expr_operand(guard, 0);
  return ts_expr_dtype(guard).lanes == 1 ? guard : NULL;
}

static bool is_guarded(const ts_expr *e) {
  return ts_expr_kind_of(e) == TS_EXPR_CALL &&
         !strcmp(ts_expr_call_name(e), "if_then_else") &&
         ts_expr_n_operands(e) == 3;
}

static void guard_sites_fn(void *ctx, ts_expr *e) {
  site_walk *w = ctx;
  if (!is_guarded(e)) return;
  ts_expr *g = ts_expr_operand(e, 0), *c = guard_scalar(g);
  if (c) add_sites(w, c, NULL, g);
}

static void collect_sites(site_walk *w, ts_stmt *s) {
  switch (ts_stmt_kind_of(s)) {
  case TS_STMT_STORE: {
    ts_expr *v = ts_store_value(s);
    if (v) ts_expr_walk(v, guard_sites_fn, w);
    return;
  }
  case TS_STMT_FOR: {
    if (w->in.n == MAX_INNER) {
      w->in.overflow = true;
      return;
    }
    int i = w->in.n++;
    w->in.var[i] = ts_for_var(s);
    w->in.known[i] = ts_expr_is_const_int(ts_for_min(s), &w->in.min[i]) &&
                     ts_expr_is_const_int(ts_for_extent(s), &w->in.ext[i]) &&
                     w->in.ext[i] > 0;
    collect_sites(w, ts_for_body(s));
    w->in.n--;
    return;
  }
  case TS_STMT_SEQ:
    for (int i = 0; i < ts_seq_n(s); i++) collect_sites(w, ts_seq_item(s, i));
    return;
  case TS_STMT_LET: {
    /* a var defined below the test: unknown there */
    if (w->in.n == MAX_INNER) {
      w->in.overflow = true;
      return;
    }
    int i = w->in.n++;
    w->in.var[i] = ts_let_stmt_var(s);
    w->in.known[i] = false;
    collect_sites(w, ts_let_stmt_body(s));
    w->in.n--;
    return;
  }
  case TS_STMT_ALLOCATE: collect_sites(w, ts_allocate_body(s)); return;
  case TS_STMT_IF: {
    if (!ts_if_else(s)) {
      add_sites(w, ts_if_cond(s), s, NULL);
    } else {
      collect_sites(w, ts_if_else(s));
    }
    collect_sites(w, ts_if_then(s));
    return;
  }
  default: return;
  }
}

/* ---- dropping one conjunct ---- */

/* The sites to rewrite: conjunct conj[i] of if iff[i] is known to hold
 * (it is dropped) or, with `never`, known not to (the if disappears). */
typedef struct drop_ctx {
  ts_stmt **iff;
  int *conj;
  int n;
  bool never;
} drop_ctx;

static ts_stmt *drop_pre(void *ctx, ts_arena *a, ts_stmt *s) {
  drop_ctx *d = ctx;
  int at = -1;
  for (int i = 0; i < d->n && at < 0; i++)
    if (s == d->iff[i]) at = i;
  if (at < 0) return NULL;
  if (d->never) return ts_seq(a, NULL, 0);
  ts_expr *cj[MAX_CONJ];
  int n = conjuncts(ts_if_cond(s), cj, 0);
  ts_expr *cond = NULL;
  for (int k = 0; k < n; k++) {
    bool drop = false;
    for (int i = 0; i < d->n; i++) drop |= d->iff[i] == s && d->conj[i] == k;
    if (!drop) cond = cond ? ts_and(a, cond, cj[k]) : cj[k];
  }
  return cond ? ts_if(a, cond, ts_if_then(s), NULL) : ts_if_then(s);
}

static ts_stmt *rewrite_sites(ts_arena *a, ts_stmt *s, ts_stmt **iff, int *conj,
                              int n, bool never) {
  if (n == 0) return s;
  drop_ctx d = {iff, conj, n, never};
  ts_stmt_mutator m = {.pre = drop_pre, .ctx = &d};
  return ts_stmt_mutate(a, s, &m);
}

/* The guards to rewrite: conjunct conj[i] of guard[i] is known to hold. */
typedef struct guard_drop {
  ts_expr **guard;
  int *conj;
  int n;
} guard_drop;

static ts_expr *guard_post(void *ctx, ts_arena *a, ts_expr *e) {
  guard_drop *d = ctx;
  if (!is_guarded(e)) return e;
  ts_expr *g = ts_expr_operand(e, 0);
  bool hit = false;
  for (int i = 0; i < d->n && !hit; i++) hit = d->guard[i] == g;
  if (!hit) return e;
  ts_expr *cj[MAX_CONJ];
  int n = conjuncts(guard_scalar(g), cj, 0);
  ts_expr *cond = NULL;
  for (int k = 0; k < n; k++) {
    bool drop = false;
    for (int i = 0; i < d->n; i++) drop |= d->guard[i] == g && d->conj[i] == k;
    if (!drop) cond = cond ? ts_and(a, cond, cj[k]) : cj[k];
  }
  if (!cond) return ts_expr_operand(e, 1); /* the plain value */
  if (ts_expr_kind_of(g) == TS_EXPR_BROADCAST)
    cond = ts_broadcast(a, cond, ts_expr_dtype(g).lanes);
  ts_expr *ops[3] = {cond, ts_expr_operand(e, 1), ts_expr_operand(e, 2)};
  return ts_expr_rebuild(a, e, ops);
}

static ts_expr *guard_expr(void *ctx, ts_arena *a, ts_expr *e) {
  return ts_expr_mutate(a, e, guard_post, ctx);
}

static ts_stmt *rewrite_guards(ts_arena *a, ts_stmt *s, ts_expr **guard,
                               int *conj, int n) {
  if (n == 0) return s;
  guard_drop d = {guard, conj, n};
  ts_stmt_mutator m = {.expr = guard_expr, .ctx = &d};
  return ts_stmt_mutate(a, s, &m);
}

/* ---- guards known to fail ---- */

/* The guards whose condition is known to fail here: each if_then_else of
 * them becomes its else value (a padded tap outside the image reads the
 * padding), and an accumulation that then adds a zero product, `B[i] =
 * B[i] + 0 * w`, is removed: the tap is outside the image, where the
 * padded conv adds nothing (as the vendor libraries skip it; a weight that
 * is infinite or NaN would have made that zero product NaN). */
typedef struct guard_false {
  ts_expr **guard;
  int n;
  const ts_var_ranges *ranges;
} guard_false;

static ts_expr *false_post(void *ctx, ts_arena *a, ts_expr *e) {
  (void)a;
  const guard_false *d = ctx;
  if (!is_guarded(e)) return e;
  for (int i = 0; i < d->n; i++)
    if (d->guard[i] == ts_expr_operand(e, 0)) return ts_expr_operand(e, 2);
  return e;
}

static ts_expr *false_expr(void *ctx, ts_arena *a, ts_expr *e) {
  return ts_expr_mutate(a, e, false_post, ctx);
}

static bool is_zero_float(const ts_expr *e) {
  if (ts_expr_kind_of(e) == TS_EXPR_BROADCAST) e = ts_expr_operand(e, 0);
  return ts_expr_kind_of(e) == TS_EXPR_FLOAT && ts_expr_float_value(e) == 0;
}

/* Whether store s adds nothing to what its buffer holds at its index. */
static bool adds_nothing(ts_arena *a, ts_stmt *s, const ts_var_ranges *r) {
  ts_expr *v = ts_store_value(s);
  if (!v || ts_expr_kind_of(v) != TS_EXPR_ADD ||
      ts_dtype_is_int(ts_expr_dtype(v)))
    return false;
  for (int side = 0; side < 2; side++) {
    ts_expr *acc = ts_expr_operand(v, side), *t = ts_expr_operand(v, 1 - side);
    bool zero = is_zero_float(t) || (ts_expr_kind_of(t) == TS_EXPR_MUL &&
                                     (is_zero_float(ts_expr_operand(t, 0)) ||
                                      is_zero_float(ts_expr_operand(t, 1))));
    int n = ts_store_n_indices(s);
    if (!zero || ts_expr_kind_of(acc) != TS_EXPR_LOAD ||
        ts_expr_buffer(acc) != ts_store_buffer(s) ||
        ts_expr_n_operands(acc) != n)
      continue;
    bool same = true;
    for (int i = 0; i < n && same; i++) {
      int64_t d;
      ts_expr *x = ts_store_index(s, i), *y = ts_expr_operand(acc, i);
      same = x == y ||
             (ts_expr_is_const_int(ts_simplify(a, ts_sub(a, x, y), r), &d) &&
              d == 0);
    }
    if (same) return true;
  }
  return false;
}

static bool is_empty(ts_stmt *s) {
  if (ts_stmt_kind_of(s) != TS_STMT_SEQ) return false;
  for (int i = 0; i < ts_seq_n(s); i++)
    if (!is_empty(ts_seq_item(s, i))) return false;
  return true;
}

/* Removes the stores that add nothing, and the loops and allocations left
 * empty (a row of taps all outside the image). */
static ts_stmt *false_store_post(void *ctx, ts_arena *a, ts_stmt *s) {
  const guard_false *d = ctx;
  switch (ts_stmt_kind_of(s)) {
  case TS_STMT_STORE:
    return adds_nothing(a, s, d->ranges) ? ts_seq(a, NULL, 0) : s;
  case TS_STMT_FOR: return is_empty(ts_for_body(s)) ? ts_seq(a, NULL, 0) : s;
  case TS_STMT_ALLOCATE:
    return is_empty(ts_allocate_body(s)) ? ts_seq(a, NULL, 0) : s;
  default: return s;
  }
}

static ts_stmt *false_guards(part_ctx *c, ts_stmt *s, ts_expr **guard, int n) {
  guard_false d = {guard, n, c->ranges};
  ts_stmt_mutator m = {.expr = false_expr, .ctx = &d};
  s = ts_stmt_mutate(c->a, s, &m);
  ts_stmt_mutator drop = {.post = false_store_post, .ctx = &d};
  return ts_stmt_mutate(c->a, s, &drop);
}

static ts_stmt *drop_conjunct(ts_arena *a, ts_stmt *s, const site *st) {
  ts_stmt *iff = st->iff;
  int conj = st->conj;
  return rewrite_sites(a, s, &iff, &conj, 1, false);
}

/* Whether two simplified tests `x < c` are the same. */
static bool same_test(ts_arena *a, ts_expr *x, ts_expr *y,
                      const ts_var_ranges *r) {
  if (x == y) return true;
  if (ts_expr_kind_of(x) != TS_EXPR_LT || ts_expr_kind_of(y) != TS_EXPR_LT)
    return false;
  int64_t v;
  ts_expr *d = ts_simplify(
      a,
      ts_sub(a, ts_sub(a, ts_expr_operand(x, 0), ts_expr_operand(x, 1)),
             ts_sub(a, ts_expr_operand(y, 0), ts_expr_operand(y, 1))),
      r);
  return ts_expr_is_const_int(d, &v) && v == 0;
}

/* ---- the pass ---- */

static ts_stmt *part_stmt(part_ctx *c, ts_stmt *s, const ts_expr *newest);
static ts_stmt *part_at(part_ctx *c, ts_stmt *s, const ts_expr *newest,
                        const void *const *skip, int n_skip);

/* Whether a (simplified) test uses var v. */
typedef struct var_use {
  const ts_expr *v;
  bool found;
} var_use;
static void var_use_fn(void *ctx, ts_expr *e) {
  var_use *u = ctx;
  if (e == u->v) u->found = true;
}
static bool uses(ts_expr *e, const ts_expr *v) {
  var_use u = {v, false};
  if (v) ts_expr_walk(e, var_use_fn, &u);
  return u.found;
}

/* A simplified test known to hold (always) or to fail (never) over the
 * ranges of the loops around it, or wherever the tests of the copies and
 * branches around it hold (a tile's tail test inside the interior copy of
 * a padded image, which the interior's test already decides: without it,
 * each level of copies would duplicate the next level's dead halves). */
static void decide(part_ctx *c, ts_expr *test, bool *always, bool *never) {
  int64_t v, lo, hi;
  *always = ts_expr_is_const_int(test, &v) && v;
  *never = ts_expr_is_const_int(test, &v) && !v;
  if (!*always && !*never && ts_expr_kind_of(test) == TS_EXPR_LT &&
      ts_expr_const_bound(ts_expr_operand(test, 0), c->ranges, &lo, &hi) &&
      ts_expr_is_const_int(ts_expr_operand(test, 1), &v)) {
    *always = hi < v;
    *never = lo >= v;
  }
  if (!*always && !*never) {
    int d = ts_points_decide(test, c->facts, c->n_facts, c->ranges, FACT_POINTS,
                             &c->points_left, c->cache);
    *always = d == 1;
    *never = d == 0;
  }
}

/* The if_then_else guards of s, directly under the loop whose var is
 * `newest`: conjuncts that always hold are dropped; those whose hoisted
 * test becomes decidable here go into one test, `if (test) main else
 * border`, the main copy without them and the border copy with every
 * guard, frozen. *done tells whether it partitioned (the copies then
 * rebuilt further); otherwise s is returned with the dropped conjuncts. */
static ts_stmt *part_guards(part_ctx *c, ts_stmt *s, const ts_expr *newest,
                            const void *const *skip, int n_skip, bool *done) {
  *done = false;
  /* a border copy's guards are partitioned again under a serial loop
   * with another serial loop below it (a deep conv's kernel rows and
   * columns, its channels below): there, each branch is taken once per
   * long stretch of work. Without a loop below (a depthwise conv's row of
   * unrolled taps) the copies cost more than the guards they drop:
   * default schedules of 5x5 depthwise convs ran 5-8 % slower. */
  bool deeper = c->newest_serial && has_serial_loop(s);
  for (int round = 0; round < 64; round++) {
    site_walk w = {.c = c};
    collect_sites(&w, s);
    int n = 0, nd = 0;
    ts_expr **g = ts_arena_alloc(c->a, sizeof *g * (size_t)(w.n + 1));
    ts_expr **dg = ts_arena_alloc(c->a, sizeof *dg * (size_t)(w.n + 1));
    int *conj = ts_arena_alloc(c->a, sizeof *conj * (size_t)(w.n + 1));
    int *dconj = ts_arena_alloc(c->a, sizeof *dconj * (size_t)(w.n + 1));
    ts_expr **fg = ts_arena_alloc(c->a, sizeof *fg * (size_t)(w.n + 1));
    if (!g || !dg || !conj || !dconj || !fg) {
      free(w.v); /* out of memory: ts_lower stops after this step */
      return s;
    }
    ts_expr *test = NULL, *sw_test = NULL;
    int nf = 0, sw = -1;
    for (int i = 0; i < w.n; i++) {
      const site *st = &w.v[i];
      if (!st->guard || is_frozen_at(c, st->guard, newest, deeper)) continue;
      ts_expr *t = ts_simplify(c->a, st->test, c->ranges);
      bool always, never;
      decide(c, t, &always, &never);
      if (always) {
        dg[nd] = st->guard;
        dconj[nd++] = st->conj;
      } else if (never && st->invariant) {
        fg[nf++] = st->guard; /* false wherever s runs */
      } else if (!never && uses(t, newest)) {
        if (st->invariant && sw < 0) {
          sw = n;
          sw_test = t;
        }
        g[n] = st->guard;
        conj[n++] = st->conj;
        test = test ? ts_and(c->a, test, t) : t;
      }
    }
    free(w.v);
    if (nd) { /* then look again: the guards' nodes are new */
      s = rewrite_guards(c->a, s, dg, dconj, nd);
      continue;
    }
    if (nf) {
      s = false_guards(c, s, fg, nf);
      continue;
    }
    if (n && c->decide_only && deeper && sw >= 0 &&
        c->unswitched < MAX_UNSWITCH) {
      /* after unrolling, a border copy's guard that no loop below changes
       * (the column test of one unrolled tap of a dense conv, its channels
       * in a serial loop below): one copy where it holds, without it, and
       * one where it fails, without the tap; the copies' tests decide the
       * other guards. Not where no serial loop is below (as above). */
      c->unswitched++;
      *done = true;
      ts_stmt *yes = rewrite_guards(c->a, s, &g[sw], &conj[sw], 1);
      int depth = push_fact(c, sw_test);
      yes = part_at(c, yes, newest, skip, n_skip);
      c->n_facts = depth;
      ts_stmt *no = false_guards(c, s, &g[sw], 1);
      push_fact(c, ts_not(c->a, sw_test));
      no = part_at(c, no, newest, skip, n_skip);
      c->n_facts = depth;
      return ts_if(c->a, sw_test, yes, ts_stmt_copy(c->a, no, NULL));
    }
    if (!n || c->copies >= MAX_COPIES) return s;
    /* each guard's test can hold here but not all at once (a tile of
     * rows as tall as the image touches both borders): no interior at
     * this position; a deeper one may have one */
    bool all, none;
    decide(c, test, &all, &none);
    if (none) return s;
    c->copies++;
    *done = true;
    /* the main copy first: the budget goes to the hot path */
    ts_stmt *main_s = rewrite_guards(c->a, s, g, conj, n);
    int depth = push_fact(c, test);
    main_s = part_at(c, main_s, newest, skip, n_skip);
    c->n_facts = depth;
    /* the border copy keeps the guards, not partitioned on again here; a
     * deeper serial loop (a conv's kernel rows, its columns) may split
     * them again, the interior taps of a border tile from its padded
     * ones */
    int n_frozen = c->n_frozen;
    c->border_depth++;
    const ts_expr *at = c->border_depth < MAX_BORDER_DEPTH ? newest : NULL;
    for (int k = 0; k < n; k++)
      if (!freeze(c, g[k], at)) break; /* out of memory (counted) */
    push_fact(c, ts_not(c->a, test));
    ts_stmt *border = part_at(c, s, newest, skip, n_skip);
    c->n_facts = depth;
    c->n_frozen = n_frozen;
    c->border_depth--;
    return ts_if(c->a, test, main_s, ts_stmt_copy(c->a, border, NULL));
  }
  return s;
}

/* After unrolling, the sites the tests around decide, all at once (an
 * unrolled register tile has hundreds; one rewrite per round of
 * part_position left most of them): first the ifs that never run (a
 * conjunct false at every value of the loops below, as a tail tile's
 * vector past the extent, or invariant and false here), else the
 * conjuncts that always hold. Whether it rewrote *s. */
static bool decide_sites(part_ctx *c, ts_stmt **s, const site_walk *w,
                         const void *const *skip, int n_skip) {
  ts_stmt **ai = ts_arena_alloc(c->a, sizeof *ai * (size_t)(w->n + 1));
  ts_stmt **ni = ts_arena_alloc(c->a, sizeof *ni * (size_t)(w->n + 1));
  int *ac = ts_arena_alloc(c->a, sizeof *ac * (size_t)(w->n + 1));
  int *nc = ts_arena_alloc(c->a, sizeof *nc * (size_t)(w->n + 1));
  if (!ai || !ni || !ac || !nc) return false;
  int na = 0, nn = 0;
  for (int i = 0; i < w->n; i++) {
    const site *st = &w->v[i];
    bool skipped = !st->iff;
    for (int k = 0; k < n_skip && !skipped; k++) skipped = skip[k] == st->cexpr;
    if (skipped) continue;
    bool always, never;
    decide(c, ts_simplify(c->a, st->test, c->ranges), &always, &never);
    bool fails = never && st->invariant;
    if (!always && !fails && st->fail) {
      bool fn;
      decide(c, ts_simplify(c->a, st->fail, c->ranges), &fails, &fn);
    }
    if (fails) {
      ni[nn] = st->iff;
      nc[nn++] = st->conj;
    } else if (always) {
      ai[na] = st->iff;
      ac[na++] = st->conj;
    }
  }
  if (nn)
    *s = rewrite_sites(c->a, *s, ni, nc, nn, true);
  else if (na)
    *s = rewrite_sites(c->a, *s, ai, ac, na, false);
  return nn || na;
}

/* A loop nest s directly under the loop whose var is `newest` (NULL at the
 * top): partitioned on the conditions inside it whose hoisted test becomes
 * decidable here (it uses `newest`), or dropped when they always hold.
 * `skip` lists the sites already partitioned at this position. */
static ts_stmt *part_position(part_ctx *c, ts_stmt *s, const ts_expr *newest,
                              const void *const *skip, int n_skip) {
  for (int round = 0; round < 64; round++) {
    site_walk w = {.c = c};
    collect_sites(&w, s);
    bool changed = false;
    if (c->decide_only && decide_sites(c, &s, &w, skip, n_skip)) {
      free(w.v);
      continue;
    }
    for (int i = 0; i < w.n && !changed; i++) {
      if (!w.v[i].iff) continue; /* a guard: part_guards' */
      bool skipped = false;
      for (int k = 0; k < n_skip; k++) skipped |= skip[k] == w.v[i].cexpr;
      if (skipped) continue;
      ts_expr *test = ts_simplify(c->a, w.v[i].test, c->ranges);
      bool always, never;
      decide(c, test, &always, &never);
      if (always) {
        s = drop_conjunct(c->a, s, &w.v[i]);
        changed = true;
        continue;
      }
      if (never && w.v[i].invariant) {
        /* a conjunct that no loop below changes, false wherever this runs
         * (the last tile's column test in the first tile's copy): its if
         * never runs */
        s = rewrite_sites(c->a, s, &w.v[i].iff, &w.v[i].conj, 1, true);
        changed = true;
        continue;
      }
      if (never || is_frozen(c, w.v[i].cexpr) || !uses(test, newest) ||
          c->copies >= MAX_COPIES)
        continue;
      /* partition on every site of this test: the main copy drops them,
       * the tail keeps them (its other sites at this position are still
       * tried) or, for conjuncts that do not vary below the test, drops
       * their ifs (they are false there) */
      c->copies++;
      ts_stmt **iff = ts_arena_alloc(c->a, sizeof *iff * (size_t)w.n);
      ts_stmt **inv_iff = ts_arena_alloc(c->a, sizeof *inv_iff * (size_t)w.n);
      int *conj = ts_arena_alloc(c->a, sizeof *conj * (size_t)w.n);
      int *inv_conj = ts_arena_alloc(c->a, sizeof *inv_conj * (size_t)w.n);
      const void **sk =
          ts_arena_alloc(c->a, sizeof *sk * (size_t)(n_skip + w.n));
      if (!iff || !inv_iff || !conj || !inv_conj || !sk) {
        free(w.v); /* out of memory: ts_lower stops after this step */
        return s;
      }
      int ng = 0, ninv = 0, nsk = n_skip;
      for (int k = 0; k < n_skip; k++) sk[k] = skip[k];
      for (int j = i; j < w.n; j++) {
        if (!w.v[j].iff) continue;
        if (j != i &&
            !same_test(c->a, test, ts_simplify(c->a, w.v[j].test, c->ranges),
                       c->ranges))
          continue;
        iff[ng] = w.v[j].iff;
        conj[ng++] = w.v[j].conj;
        if (w.v[j].invariant) {
          inv_iff[ninv] = w.v[j].iff;
          inv_conj[ninv++] = w.v[j].conj;
        } else {
          sk[nsk++] = w.v[j].cexpr;
        }
      }
      /* the main copy first: the budget goes to the hot path */
      ts_stmt *main_s = rewrite_sites(c->a, s, iff, conj, ng, false);
      ts_stmt *tail = rewrite_sites(c->a, s, inv_iff, inv_conj, ninv, true);
      int depth = push_fact(c, test);
      main_s = part_at(c, main_s, newest, skip, n_skip);
      c->n_facts = depth;
      int n_frozen = c->n_frozen;
      c->tail_depth++;
      for (int k = n_skip; c->tail_depth >= MAX_TAIL_DEPTH && k < nsk; k++)
        if (!freeze(c, sk[k], NULL)) break; /* out of memory (counted) */
      push_fact(c, ts_not(c->a, test));
      tail = part_at(c, tail, newest, sk, nsk);
      c->n_facts = depth;
      c->tail_depth--;
      c->n_frozen = n_frozen;
      free(w.v);
      return ts_if(c->a, test, main_s, ts_stmt_copy(c->a, tail, NULL));
    }
    free(w.v);
    if (!changed) break;
  }
  return part_stmt(c, s, newest);
}

/* s directly under the loop whose var is `newest`: its guards partitioned
 * here, then (a loop nest) its ifs, then what is inside. */
static ts_stmt *part_at(part_ctx *c, ts_stmt *s, const ts_expr *newest,
                        const void *const *skip, int n_skip) {
  bool done;
  s = part_guards(c, s, newest, skip, n_skip, &done);
  if (done) return s;
  return ts_stmt_kind_of(s) == TS_STMT_FOR
             ? part_position(c, s, newest, skip, n_skip)
             : part_stmt(c, s, newest);
}

/* Rebuilds s with its loop nests partitioned; `newest` is the var of the
 * innermost loop enclosing s. */
static ts_stmt *part_stmt(part_ctx *c, ts_stmt *s, const ts_expr *newest) {
  ts_arena *a = c->a;
  switch (ts_stmt_kind_of(s)) {
  case TS_STMT_FOR: {
    int64_t mn, ex;
    if (ts_expr_is_const_int(ts_for_min(s), &mn) &&
        ts_expr_is_const_int(ts_for_extent(s), &ex) && ex > 0)
      ts_var_ranges_set(c->ranges, ts_for_var(s), mn, ex);
    ts_stmt *body = ts_for_body(s);
    bool serial = c->newest_serial;
    c->newest_serial = ts_for_kind_of(s) == TS_FOR_SERIAL;
    ts_stmt *nb = part_at(c, body, ts_for_var(s), NULL, 0);
    c->newest_serial = serial;
    if (nb == body) return s;
    ts_stmt *r = ts_for(a, ts_for_var(s), ts_for_min(s), ts_for_extent(s),
                        ts_for_kind_of(s), ts_for_thread_tag(s), nb);
    for (int i = 0; i < ts_for_n_annotations(s); i++)
      ts_for_annotate(a, r, *ts_for_annotation(s, i));
    return r;
  }
  case TS_STMT_SEQ: {
    int n = ts_seq_n(s);
    bool changed = false;
    ts_stmt **items = ts_arena_alloc(a, sizeof *items * (size_t)(n ? n : 1));
    if (!items) return s; /* out of memory: ts_lower stops after this step */
    for (int i = 0; i < n; i++) {
      ts_stmt *it = ts_seq_item(s, i);
      items[i] = ts_stmt_kind_of(it) == TS_STMT_FOR
                     ? part_at(c, it, newest, NULL, 0)
                     : part_stmt(c, it, newest);
      changed |= items[i] != it;
    }
    ts_stmt *r = changed ? ts_seq(a, items, n) : s;
    return r;
  }
  case TS_STMT_IF: {
    if (c->decide_only && ts_expr_dtype(ts_if_cond(s)).lanes == 1) {
      /* a branch the copies around decide (a ragged tile's register
       * store in the tail copy; a store of a tail tile's vector past the
       * extent, in its vectorized loop): only the side that runs */
      bool always, never;
      decide(c, ts_simplify(a, ts_if_cond(s), c->ranges), &always, &never);
      if (always) return part_stmt(c, ts_if_then(s), newest);
      if (never)
        return ts_if_else(s) ? part_stmt(c, ts_if_else(s), newest)
                             : ts_seq(a, NULL, 0);
    }
    int depth = push_fact(c, ts_if_cond(s));
    ts_stmt *t = part_stmt(c, ts_if_then(s), newest);
    c->n_facts = depth;
    push_fact(c, ts_not(a, ts_if_cond(s)));
    ts_stmt *e = ts_if_else(s) ? part_stmt(c, ts_if_else(s), newest) : NULL;
    c->n_facts = depth;
    if (t == ts_if_then(s) && e == ts_if_else(s)) return s;
    return ts_if(a, ts_if_cond(s), t, e);
  }
  case TS_STMT_LET: {
    ts_stmt *b = ts_let_stmt_body(s);
    ts_stmt *nb = ts_stmt_kind_of(b) == TS_STMT_FOR
                      ? part_at(c, b, newest, NULL, 0)
                      : part_stmt(c, b, newest);
    return nb == b
               ? s
               : ts_let_stmt(a, ts_let_stmt_var(s), ts_let_stmt_value(s), nb);
  }
  case TS_STMT_ALLOCATE: {
    ts_stmt *b = ts_allocate_body(s);
    ts_stmt *nb = ts_stmt_kind_of(b) == TS_STMT_FOR
                      ? part_at(c, b, newest, NULL, 0)
                      : part_stmt(c, b, newest);
    return nb == b ? s : ts_allocate(a, ts_allocate_buffer(s), nb);
  }
  default: return s;
  }
}

static bool has_thread_loop_fn(void *ctx, ts_stmt *s) {
  bool *found = ctx;
  if (ts_stmt_kind_of(s) == TS_STMT_FOR && ts_for_kind_of(s) == TS_FOR_THREAD)
    *found = true;
  return !*found;
}

static int partition(ts_func *f, bool decide_only);

int ts_lower_partition(ts_func *f, ts_error *err) {
  (void)err;
  return partition(f, false);
}

/* After unrolling: the conditions each unrolled copy holds (a ragged
 * tile's `w_0 * 8 + 7 < 23` in the tail copy taken where w_0 * 8 >= 16)
 * decided by the tests of the copies and branches around them, dropped
 * where they always hold and removed where they never do; no new copies. */
int ts_lower_partition_decide(ts_func *f, ts_error *err) {
  (void)err;
  return partition(f, true);
}

static int partition(ts_func *f, bool decide_only) {
  bool gpu = false;
  ts_visitor v = {.enter_stmt = has_thread_loop_fn, .ctx = &gpu};
  ts_stmt_walk(ts_func_body(f), &v);
  if (gpu) return TS_OK;
  part_ctx c = {.a = ts_func_arena(f),
                .ranges = ts_var_ranges_create(),
                .points_left = FACT_BUDGET,
                .cache = ts_points_cache_create()};
  if (decide_only) {
    c.copies = MAX_COPIES;
    c.decide_only = true;
  }
  ts_stmt *body = ts_func_body(f);
  ts_stmt *nb = ts_stmt_kind_of(body) == TS_STMT_FOR
                    ? part_at(&c, body, NULL, NULL, 0)
                    : part_stmt(&c, body, NULL);
  ts_func_set_body(f, nb);
  ts_var_ranges_destroy(c.ranges);
  ts_points_cache_destroy(c.cache);
  free(c.frozen);
  free(c.frozen_at);
  return TS_OK;
}
