/*
 * compute_at.c — the compute-location primitives: compute_at and
 * reverse_compute_at (moving a block into another block's loop nest, with
 * region inference so that it computes exactly what is needed / consumes
 * exactly what was produced in one iteration), compute_inline and
 * reverse_compute_inline, and the candidate locations that
 * sample_compute_location draws from. Each primitive first builds a plan
 * (every check, the new subtree allocated but not linked), then commits it.
 */
#include "schedule/internal.h"

#include <stdlib.h>
#include <string.h>

/* ========================================================================
 * Shared helpers
 * ======================================================================== */

/* The topmost statement removed together with realize r: r and the loops
 * above it that hold nothing else. */
static ts_stmt *exclusive_top(const ts_func *f, ts_stmt *r) {
  stmt_vec p = {0};
  tree_path(f, r, &p);
  ts_stmt *top = r;
  for (int i = p.n - 1; i >= 0; i--) {
    if (ts_stmt_kind_of(p.v[i]) != TS_STMT_FOR || ts_for_body(p.v[i]) != top)
      break;
    top = p.v[i];
  }
  sv_free(&p);
  return top;
}

/* Whether realize x executes before realize y in program order (pre-order
 * position in the function). */
typedef struct order_ctx {
  const ts_stmt *x, *y;
  int seen_x, seen_y, pos;
} order_ctx;

static bool order_enter(void *ctx, ts_stmt *s) {
  order_ctx *c = ctx;
  c->pos++;
  if (s == c->x) c->seen_x = c->pos;
  if (s == c->y) c->seen_y = c->pos;
  return true;
}

static bool before(const ts_func *f, const ts_stmt *x, const ts_stmt *y) {
  order_ctx c = {x, y, 0, 0, 0};
  ts_visitor v = {order_enter, NULL, NULL, &c};
  ts_stmt_walk(ts_func_body(f), &v);
  return c.seen_x && c.seen_y && c.seen_x < c.seen_y;
}

/* The blocks of a scope (not entering nested blocks), in program order. */
static void scope_blocks(ts_stmt *scope, stmt_vec *out) {
  tree_realizes(ts_block_body(ts_realize_block(scope)), false, out);
}

/* The loops on the path from `loop` (exclusive) down to `r`, and every loop
 * on the path (for constant ranges). */
static void loops_between(const ts_func *f, const ts_stmt *loop, ts_stmt *r,
                          stmt_vec *inner, stmt_vec *all) {
  stmt_vec p = {0};
  tree_path(f, r, &p);
  bool below = loop == NULL;
  for (int i = 0; i < p.n; i++) {
    if (ts_stmt_kind_of(p.v[i]) != TS_STMT_FOR) continue;
    if (all) sv_push(all, p.v[i]);
    if (below && inner) sv_push(inner, p.v[i]);
    if (p.v[i] == loop) below = true;
  }
  sv_free(&p);
}

/* Whether buffer b lives in GPU shared memory (scope "shared" or
 * "shared.*"): one copy per thread block. */
static bool is_shared_scope(const ts_buffer *b) {
  const char *scope = ts_buffer_scope(b);
  return scope && !strncmp(scope, "shared", 6) &&
         (scope[6] == 0 || scope[6] == '.');
}

/* Whether loop l is bound to a GPU thread axis a block-wide buffer is
 * relaxed over: threadIdx.* or vthread (never blockIdx). */
static bool is_thread_loop(const ts_stmt *l) {
  const char *tag =
      ts_for_kind_of(l) == TS_FOR_THREAD ? ts_for_thread_tag(l) : NULL;
  return tag && (!strncmp(tag, "threadIdx.", 10) || !strcmp(tag, "vthread"));
}

/* Intervals [lo, hi] per dimension of a region accessed by realize r (in
 * its iter vars), relaxed over the loops between `loop` and r, and, with
 * relax_threads, over every enclosing threadIdx and vthread loop too (the
 * region every thread of the block needs). ok[d] is false where no bound
 * was found. */
static void region_under(ts_sched *s, const ts_stmt *loop, ts_stmt *r,
                         const ts_region *reg, bool relax_threads, ts_expr **lo,
                         ts_expr **hi, bool *ok) {
  ts_arena *a = ts_func_arena(s->func);
  stmt_vec inner = {0}, all = {0};
  loops_between(s->func, loop, r, &inner, &all);
  relax_map *m = relax_create();
  for (int i = 0; i < inner.n; i++) relax_loop(a, m, inner.v[i]);
  for (int i = 0; relax_threads && i < all.n; i++)
    if (is_thread_loop(all.v[i]) && !sv_has(&inner, all.v[i]))
      relax_loop(a, m, all.v[i]);
  ts_var_ranges *ranges = ts_var_ranges_create();
  ranges_of_loops(ranges, all.v, all.n);
  ts_node_map *sub = ts_node_map_create();
  const ts_block *b = ts_realize_block(r);
  for (int i = 0; i < ts_block_n_iters(b) && i < ts_realize_n_values(r); i++)
    ts_node_map_put(sub, ts_block_iter_var(b, i), ts_realize_value(r, i));
  for (int d = 0; d < reg->ndim; d++) {
    ts_expr *mn = ts_expr_substitute(a, reg->ranges[d].min, sub, NULL);
    ts_expr *ex = ts_expr_substitute(a, reg->ranges[d].extent, sub, NULL);
    ts_expr *last = ts_sub(a, ts_add(a, mn, ex), ts_index(a, 1));
    ts_expr *l1, *h1, *l2, *h2;
    ok[d] = bound_expr(a, mn, m, ranges, &l1, &h1) &&
            bound_expr(a, last, m, ranges, &l2, &h2);
    if (ok[d]) {
      lo[d] = l1;
      hi[d] = h2;
    }
  }
  ts_node_map_destroy(sub);
  ts_var_ranges_destroy(ranges);
  relax_destroy(m);
  sv_free(&inner);
  sv_free(&all);
}

/* Merges [lo2, hi2] into [lo1, hi1] when their ends differ by constants;
 * false otherwise. */
static bool union_into(ts_arena *a, ts_expr **lo1, ts_expr **hi1, ts_expr *lo2,
                       ts_expr *hi2) {
  int64_t dl, dh;
  if (!ts_expr_is_const_int(ts_simplify(a, ts_sub(a, lo2, *lo1), NULL), &dl) ||
      !ts_expr_is_const_int(ts_simplify(a, ts_sub(a, hi2, *hi1), NULL), &dh))
    return false;
  if (dl < 0) *lo1 = lo2;
  if (dh > 0) *hi1 = hi2;
  return true;
}

/* The per-dimension interval of buffer `buf` that the realizes `rs` (under
 * `loop`) access in their `want_write` regions (relax_threads: as in
 * region_under). */
static void union_regions(ts_sched *s, const ts_stmt *loop, stmt_vec *rs,
                          const ts_buffer *buf, bool want_write,
                          bool relax_threads, ts_expr **lo, ts_expr **hi,
                          bool *ok) {
  int nd = ts_buffer_ndim(buf);
  bool first = true;
  for (int d = 0; d < nd; d++) ok[d] = true;
  for (int i = 0; i < rs->n; i++) {
    const ts_block *b = ts_realize_block(rs->v[i]);
    int n = want_write ? ts_block_n_writes(b) : ts_block_n_reads(b);
    for (int k = 0; k < n; k++) {
      const ts_region *reg =
          want_write ? ts_block_write(b, k) : ts_block_read(b, k);
      if (reg->buffer != buf || reg->ndim != nd) continue;
      ts_expr *l[TS_MAX_DIMS], *h[TS_MAX_DIMS];
      bool o[TS_MAX_DIMS];
      region_under(s, loop, rs->v[i], reg, relax_threads, l, h, o);
      for (int d = 0; d < nd; d++) {
        if (!ok[d]) continue;
        if (!o[d]) {
          ok[d] = false;
        } else if (first) {
          lo[d] = l[d];
          hi[d] = h[d];
        } else if (!union_into(ts_func_arena(s->func), &lo[d], &hi[d], l[d],
                               h[d])) {
          ok[d] = false;
        }
      }
      first = false;
    }
  }
  if (first)
    for (int d = 0; d < nd; d++) ok[d] = false;
}

/* The iteration space of a moved block: one entry per iter var. */
typedef struct iter_plan {
  ts_expr *lo;  /* first value (NULL: the whole domain) */
  int64_t ext;  /* number of values */
  bool clip_lo; /* needs lo + ax >= dom min */
  bool clip_hi; /* needs lo + ax < dom end */
} iter_plan;

/* Which dimension of `buf` each iter var of b indexes in b's `write`
 * (or read) region: dims[i] = d, or -1. False when some dimension's index is
 * not a lone iter var or an expression free of iter vars (named in why). */
static bool iter_dims(const ts_block *b, const ts_region *reg, int *dims,
                      char *why, size_t cap) {
  for (int i = 0; i < ts_block_n_iters(b); i++) dims[i] = -1;
  for (int d = 0; d < reg->ndim; d++) {
    ts_expr *mn = reg->ranges[d].min;
    int64_t ext;
    int hit = -1;
    for (int i = 0; i < ts_block_n_iters(b); i++)
      if (mn == ts_block_iter_var(b, i)) hit = i;
    bool uses = false;
    for (int i = 0; i < ts_block_n_iters(b); i++)
      if (uses_var(mn, ts_block_iter_var(b, i)) ||
          uses_var(reg->ranges[d].extent, ts_block_iter_var(b, i)))
        uses = true;
    if (hit >= 0 && ts_expr_is_const_int(reg->ranges[d].extent, &ext) &&
        ext == 1 && dims[hit] < 0) {
      dims[hit] = d;
      continue;
    }
    if (!uses) continue;
    char *txt = ts_expr_print(mn);
    snprintf(why, cap,
             "dimension %d of '%s' is indexed by '%s', not by one "
             "of the block's iter vars",
             d, ts_buffer_name(reg->buffer), txt);
    free(txt);
    return false;
  }
  return true;
}

/* Plans the iteration of iter i of block b over [lo, hi] (or the whole
 * domain when !ok). `outer` are the loops above the insertion point
 * (lo may use only their vars). */
static void plan_iter(ts_arena *a, const ts_block *b, int i, bool ok,
                      ts_expr *lo, ts_expr *hi, ts_stmt *const *outer,
                      int n_outer, iter_plan *p) {
  int64_t dmin, dext;
  memset(p, 0, sizeof *p);
  if (!iter_const(b, i, &dmin, &dext)) {
    p->lo = NULL;
    p->ext = -1;
    return;
  }
  p->ext = dext;
  if (!ok || !vars_among_loops(lo, outer, n_outer) ||
      !vars_among_loops(hi, outer, n_outer))
    return;
  int64_t ext;
  if (!ts_expr_is_const_int(
          ts_simplify(a, ts_add(a, ts_sub(a, hi, lo), ts_index(a, 1)), NULL),
          &ext) ||
      ext >= dext || ext < 1)
    return;
  p->lo = lo;
  p->ext = ext;
  ts_var_ranges *r = ts_var_ranges_create();
  ranges_of_loops(r, outer, n_outer);
  int64_t l, h;
  if (ts_expr_const_bound(lo, r, &l, &h)) {
    p->clip_lo = l < dmin;
    p->clip_hi = h + ext > dmin + dext;
  } else {
    p->clip_lo = p->clip_hi = true;
  }
  ts_var_ranges_destroy(r);
}

/* The conjuncts of predicate p that use only the given loops, after the
 * substitution m, and-ed (NULL when none does). */
static ts_expr *movable_conjuncts(ts_arena *a, ts_expr *p, ts_node_map *m,
                                  ts_stmt *const *all, int n) {
  if (ts_expr_kind_of(p) == TS_EXPR_AND) {
    ts_expr *x = movable_conjuncts(a, ts_expr_operand(p, 0), m, all, n);
    ts_expr *y = movable_conjuncts(a, ts_expr_operand(p, 1), m, all, n);
    return x && y ? ts_and(a, x, y) : x ? x : y;
  }
  ts_expr *moved = ts_expr_substitute(a, p, m, NULL);
  return moved && vars_among_loops(moved, all, n) ? moved : NULL;
}

/* The old realize's predicate at the new place, where it can be moved: its
 * loop vars replaced by the new values of the iters they bound alone
 * (rfactor's factored block keeps an imperfect split's guard over such
 * iters, whose domains run past the row), using then only the enclosing
 * loops and the new ones. Each conjunct on its own: one that cannot be
 * moved, an imperfect split's guard over a loop bound into an iter's value
 * expression, is implied by that iter's domain, which the new nest covers
 * exactly, while the guard of a factored row beside it (a dot product's
 * lanes past the row's end, under a column tile's guard) still holds
 * elements out. NULL when nothing is kept. */
static ts_expr *keep_predicate(ts_arena *a, const ts_stmt *old_r,
                               ts_expr *const *vals, ts_stmt *const *outer,
                               int n_outer, ts_stmt *const *loops, int nl) {
  ts_expr *old = ts_realize_predicate(old_r);
  if (!old) return NULL;
  ts_node_map *m = ts_node_map_create();
  for (int i = 0; i < ts_realize_n_values(old_r); i++) {
    ts_expr *v = ts_realize_value(old_r, i);
    if (ts_expr_kind_of(v) == TS_EXPR_VAR) ts_node_map_put(m, v, vals[i]);
  }
  ts_stmt **all = ts_arena_alloc(a, sizeof *all * (size_t)(n_outer + nl + 1));
  ts_expr *kept = NULL;
  if (all) {
    for (int i = 0; i < n_outer; i++) all[i] = outer[i];
    for (int i = 0; i < nl; i++) all[n_outer + i] = loops[i];
    kept = movable_conjuncts(a, old, m, all, n_outer + nl);
  }
  ts_node_map_destroy(m);
  return kept;
}

/* Builds the loops and the realize of block b for the iteration plans.
 * Loops go outermost first in iter order; an iteration of one value gets
 * no loop. Returns the top of the nest; *realize the new realize. Both are
 * NULL when out of memory. */
static ts_stmt *build_nest(ts_arena *a, const ts_stmt *old_r,
                           const iter_plan *plans, ts_stmt *const *outer,
                           int n_outer, ts_stmt **realize) {
  ts_block *b = ts_realize_block(old_r);
  int n = ts_block_n_iters(b);
  ts_expr **vals = ts_arena_alloc(a, sizeof *vals * (size_t)(n ? n : 1));
  ts_stmt **loops = ts_arena_alloc(a, sizeof *loops * (size_t)(n ? n : 1));
  ts_expr *pred = NULL;
  int nl = 0;
  *realize = NULL;
  if (!vals || !loops) return NULL;
  for (int i = 0; i < n; i++) {
    ts_range dom = ts_block_iter_dom(b, i);
    ts_expr *base = plans[i].lo ? plans[i].lo : dom.min;
    ts_expr *v = base;
    if (plans[i].ext != 1) {
      char *name = ts_arena_printf(a, "ax%d", nl);
      ts_expr *ax = name ? ts_var(a, name, TS_INDEX) : NULL;
      loops[nl] = ts_for(a, ax, ts_index(a, 0), ts_index(a, plans[i].ext),
                         TS_FOR_SERIAL, NULL, NULL);
      if (!loops[nl++]) return NULL;
      v = ts_add(a, base, ax);
    }
    vals[i] = ts_simplify(a, v, NULL);
    if (plans[i].clip_lo) {
      ts_expr *c = ts_ge(a, vals[i], dom.min);
      pred = pred ? ts_and(a, pred, c) : c;
    }
    if (plans[i].clip_hi) {
      ts_expr *c = ts_lt(a, vals[i], ts_add(a, dom.min, dom.extent));
      pred = pred ? ts_and(a, pred, c) : c;
    }
  }
  ts_expr *kept = keep_predicate(a, old_r, vals, outer, n_outer, loops, nl);
  if (kept) pred = pred ? ts_and(a, pred, kept) : kept;
  *realize = ts_block_realize(a, b, vals, n, pred);
  /* (a clipping predicate that could not be built is a NULL: refused) */
  if (ts_arena_failed(a)) *realize = NULL;
  ts_stmt *body = *realize;
  if (!body) return NULL;
  for (int k = nl - 1; k >= 0; k--) {
    ts_for_set_body(loops[k], body);
    body = loops[k];
  }
  return body;
}

/* Checks the race rules of every parallel-like loop above the insertion
 * point for the new realize. */
static int check_parallel_above(ts_sched *s, const char *prim,
                                ts_stmt *const *outer, int n_outer,
                                ts_stmt *realize) {
  char why[512];
  for (int i = 0; i < n_outer; i++) {
    ts_for_kind k = ts_for_kind_of(outer[i]);
    if (k != TS_FOR_PARALLEL && k != TS_FOR_VECTORIZED && k != TS_FOR_THREAD)
      continue;
    if (!parallel_safe(s, outer[i], realize, why, sizeof why))
      return FAIL(s, TS_ESCHEDULE, "%s: under %s loop '%s': %s", prim,
                  ts_for_kind_name(k), loop_name(outer[i]), why);
  }
  return TS_OK;
}

/* ========================================================================
 * compute_at / reverse_compute_at
 * ======================================================================== */

typedef struct at_plan {
  ts_stmt *r;    /* the block's current realize */
  ts_stmt *loop; /* the target loop */
  int pos;       /* insertion index in the loop's body */
  ts_stmt *nest; /* the new loops and realize */
} at_plan;

/* Checks shared by both directions. */
static int check_target(ts_sched *s, const char *prim, ts_stmt *r,
                        ts_stmt *loop, ts_stmt **scope) {
  const char *bn = ts_block_name(ts_realize_block(r));
  *scope = tree_scope(s->func, r);
  if (!*scope)
    return FAIL(s, TS_ESCHEDULE, "%s: block '%s' is the root block", prim, bn);
  if (tree_scope(s->func, loop) != *scope)
    return FAIL(s, TS_ESCHEDULE,
                "%s: loop '%s' is not in the scope of block '%s' (it is "
                "inside another block)",
                prim, loop_name(loop), bn);
  ts_stmt *top = exclusive_top(s->func, r);
  if (tree_contains(top, loop))
    return FAIL(s, TS_ESCHEDULE, "%s: loop '%s' is a loop of block '%s' itself",
                prim, loop_name(loop), bn);
  if (tree_contains(loop, r))
    return FAIL(s, TS_ESCHEDULE, "%s: block '%s' is already under loop '%s'",
                prim, bn, loop_name(loop));
  if (ts_block_n_writes(ts_realize_block(r)) != 1)
    return FAIL(s, TS_ESCHEDULE, "%s: block '%s' writes %d buffers (needs one)",
                prim, bn, ts_block_n_writes(ts_realize_block(r)));
  return TS_OK;
}

static int plan_compute_at(ts_sched *s, const char *prim, ts_stmt *r,
                           ts_stmt *loop, at_plan *plan) {
  ts_arena *a = ts_func_arena(s->func);
  ts_stmt *scope;
  int rc = check_target(s, prim, r, loop, &scope);
  if (rc) return rc;
  ts_block *b = ts_realize_block(r);
  const char *bn = ts_block_name(b);
  ts_buffer *w = ts_block_write(b, 0)->buffer;
  stmt_vec all = {0}, consumers = {0};
  scope_blocks(scope, &all);
  for (int i = 0; i < all.n && !rc; i++) {
    if (all.v[i] == r) continue;
    const ts_block *o = ts_realize_block(all.v[i]);
    if (block_writes(o, w))
      rc = FAIL(s, TS_ESCHEDULE,
                "%s: buffer '%s' of block '%s' is also written by block '%s'",
                prim, ts_buffer_name(w), bn, ts_block_name(o));
    else if (block_reads(o, w)) {
      if (!tree_contains(loop, all.v[i]))
        rc = FAIL(s, TS_ESCHEDULE,
                  "%s: loop '%s' does not contain consumer block '%s' of "
                  "block '%s'",
                  prim, loop_name(loop), ts_block_name(o), bn);
      else if (!before(s->func, r, all.v[i]))
        rc = FAIL(s, TS_ESCHEDULE,
                  "%s: consumer block '%s' runs before block '%s'", prim,
                  ts_block_name(o), bn);
      sv_push(&consumers, all.v[i]);
    }
  }
  if (!rc && consumers.n == 0)
    rc = FAIL(s, TS_ESCHEDULE, "%s: block '%s' has no consumer under loop '%s'",
              prim, bn, loop_name(loop));
  /* the insertion point: before the first item holding a consumer, after
   * every item holding a producer */
  ts_stmt **items = NULL, *one;
  int n_items = 0, pos = -1;
  if (!rc) {
    n_items = body_items(ts_for_body(loop), &items, &one);
    for (int i = 0; i < n_items && pos < 0; i++)
      for (int k = 0; k < consumers.n && pos < 0; k++)
        if (tree_contains(items[i], consumers.v[k])) pos = i;
    if (pos < 0) rc = fail_oom(s, prim); /* the body's list was not made */
    for (int i = pos; i < n_items && !rc; i++) {
      stmt_vec rs = {0};
      tree_realizes(items[i], false, &rs);
      for (int k = 0; k < rs.n && !rc; k++)
        for (int j = 0; j < ts_block_n_reads(b) && !rc; j++)
          if (block_writes(ts_realize_block(rs.v[k]),
                           ts_block_read(b, j)->buffer))
            rc = FAIL(s, TS_ESCHEDULE,
                      "%s: producer block '%s' of block '%s' runs after its "
                      "consumers under loop '%s'",
                      prim, ts_block_name(ts_realize_block(rs.v[k])), bn,
                      loop_name(loop));
      sv_free(&rs);
    }
  }
  free(items);
  /* the region the consumers need */
  int dims[64];
  char why[400];
  if (!rc && ts_block_n_iters(b) > 64)
    rc = FAIL(s, TS_ESCHEDULE, "%s: block '%s' has too many iter vars", prim,
              bn);
  if (!rc && !iter_dims(b, ts_block_write(b, 0), dims, why, sizeof why))
    rc = FAIL(s, TS_ESCHEDULE, "%s: block '%s': %s", prim, bn, why);
  if (rc) {
    sv_free(&all);
    sv_free(&consumers);
    return rc;
  }
  ts_expr *lo[TS_MAX_DIMS], *hi[TS_MAX_DIMS];
  bool ok[TS_MAX_DIMS];
  /* A shared-memory buffer is one per thread block: it must hold what
   * every thread of the block reads, so the region is relaxed over the
   * enclosing threadIdx and vthread loops (the copy is then spread over
   * the threads, e.g. by cooperative fetch). A local one is per thread. */
  union_regions(s, loop, &consumers, w, false, is_shared_scope(w), lo, hi, ok);
  stmt_vec outer = {0};
  tree_loops_above(s->func, loop, &outer);
  sv_push(&outer, loop);
  int n = ts_block_n_iters(b);
  iter_plan *plans = ts_arena_alloc(a, sizeof *plans * (size_t)(n ? n : 1));
  if (!plans) rc = fail_oom(s, prim);
  for (int i = 0; i < n && !rc; i++) {
    int d = dims[i];
    bool spatial = ts_block_iter_kind(b, i) == TS_ITER_SPATIAL;
    plan_iter(a, b, i, spatial && d >= 0 && ok[d], d >= 0 ? lo[d] : NULL,
              d >= 0 ? hi[d] : NULL, outer.v, outer.n, &plans[i]);
    if (plans[i].ext < 0)
      rc = FAIL(s, TS_ESCHEDULE, "%s: block '%s' has a non-constant domain",
                prim, bn);
  }
  ts_stmt *realize = NULL;
  if (!rc &&
      !(plan->nest = build_nest(a, r, plans, outer.v, outer.n, &realize)))
    rc = fail_oom(s, prim);
  if (!rc) rc = check_parallel_above(s, prim, outer.v, outer.n, realize);
  sv_free(&outer);
  sv_free(&all);
  sv_free(&consumers);
  if (rc) return rc;
  plan->r = r;
  plan->loop = loop;
  plan->pos = pos;
  return TS_OK;
}

static int plan_reverse_compute_at(ts_sched *s, const char *prim, ts_stmt *r,
                                   ts_stmt *loop, at_plan *plan) {
  ts_arena *a = ts_func_arena(s->func);
  ts_stmt *scope;
  int rc = check_target(s, prim, r, loop, &scope);
  if (rc) return rc;
  ts_block *b = ts_realize_block(r);
  const char *bn = ts_block_name(b);
  if (ts_block_init(b))
    return FAIL(s, TS_ESCHEDULE, "%s: block '%s' is a reduction block", prim,
                bn);
  for (int i = 0; i < ts_block_n_iters(b); i++)
    if (ts_block_iter_kind(b, i) != TS_ITER_SPATIAL)
      return FAIL(s, TS_ESCHEDULE, "%s: block '%s' has a non-spatial iter var",
                  prim, bn);
  ts_buffer *out_buf = ts_block_write(b, 0)->buffer;
  stmt_vec all = {0}, producers = {0};
  scope_blocks(scope, &all);
  for (int i = 0; i < all.n && !rc; i++) {
    ts_stmt *x = all.v[i];
    if (x == r) continue;
    const ts_block *o = ts_realize_block(x);
    bool writes_input = false;
    for (int j = 0; j < ts_block_n_reads(b); j++)
      if (block_writes(o, ts_block_read(b, j)->buffer)) writes_input = true;
    bool under = tree_contains(loop, x);
    if (block_writes(o, out_buf))
      rc = FAIL(s, TS_ESCHEDULE,
                "%s: buffer '%s' of block '%s' is also written by block '%s'",
                prim, ts_buffer_name(out_buf), bn, ts_block_name(o));
    else if (under && block_reads(o, out_buf))
      rc = FAIL(s, TS_ESCHEDULE,
                "%s: block '%s' under loop '%s' reads the output of block "
                "'%s'",
                prim, ts_block_name(o), loop_name(loop), bn);
    else if (writes_input && under)
      sv_push(&producers, x);
    else if (writes_input && !before(s->func, x, loop))
      rc = FAIL(s, TS_ESCHEDULE,
                "%s: producer block '%s' of block '%s' is neither under nor "
                "before loop '%s'",
                prim, ts_block_name(o), bn, loop_name(loop));
    else if (!under && before(s->func, loop, x) && before(s->func, x, r) &&
             block_reads(o, out_buf))
      rc = FAIL(s, TS_ESCHEDULE,
                "%s: block '%s' between loop '%s' and block '%s' reads its "
                "output",
                prim, ts_block_name(o), loop_name(loop), bn);
  }
  if (!rc && producers.n == 0)
    rc = FAIL(s, TS_ESCHEDULE,
              "%s: no producer of block '%s' is under loop "
              "'%s'",
              prim, bn, loop_name(loop));
  /* a buffer written under the loop must be written there only (a
   * partitioned nest writes one buffer from two loops): the block would
   * consume only the part produced under the loop */
  for (int i = 0; i < all.n && !rc; i++) {
    ts_stmt *x = all.v[i];
    if (x == r || tree_contains(loop, x)) continue;
    const ts_block *o = ts_realize_block(x);
    for (int k = 0; k < producers.n && !rc; k++) {
      const ts_block *pb = ts_realize_block(producers.v[k]);
      for (int j = 0; j < ts_block_n_reads(b) && !rc; j++) {
        ts_buffer *in_buf = ts_block_read(b, j)->buffer;
        if (block_writes(pb, in_buf) && block_writes(o, in_buf))
          rc = FAIL(s, TS_ESCHEDULE,
                    "%s: buffer '%s' that block '%s' reads is written by "
                    "block '%s' under loop '%s' and by block '%s' outside it",
                    prim, ts_buffer_name(in_buf), bn, ts_block_name(pb),
                    loop_name(loop), ts_block_name(o));
      }
    }
  }
  if (!rc && !before(s->func, loop, r))
    rc = FAIL(s, TS_ESCHEDULE, "%s: block '%s' runs before loop '%s'", prim, bn,
              loop_name(loop));
  /* a producer's reduction must finish inside one iteration of the loop */
  stmt_vec outer = {0};
  tree_loops_above(s->func, loop, &outer);
  sv_push(&outer, loop);
  for (int i = 0; i < producers.n && !rc; i++) {
    ts_stmt *p = producers.v[i];
    const ts_block *pb = ts_realize_block(p);
    stmt_vec inside = {0};
    loops_between(s->func, loop, p, &inside, NULL);
    for (int k = 0; k < ts_block_n_iters(pb) && !rc; k++) {
      if (ts_block_iter_kind(pb, k) == TS_ITER_SPATIAL) continue;
      for (int j = 0; j < outer.n && !rc; j++)
        if (uses_var(ts_realize_value(p, k), ts_for_var(outer.v[j])))
          rc = FAIL(s, TS_ESCHEDULE,
                    "%s: loop '%s' carries the reduction of producer block "
                    "'%s', whose output is not final inside it",
                    prim, loop_name(outer.v[j]), ts_block_name(pb));
      if (!rc && !vars_among_loops(ts_realize_value(p, k), inside.v, inside.n))
        rc = FAIL(s, TS_ESCHEDULE,
                  "%s: the reduction of producer block '%s' runs over an "
                  "enclosing block's iterations; its output is not final "
                  "inside loop '%s'",
                  prim, ts_block_name(pb), loop_name(loop));
    }
    sv_free(&inside);
  }
  /* the region of each read buffer produced under the loop */
  int n = ts_block_n_iters(b);
  ts_expr **ilo = ts_arena_alloc(a, sizeof *ilo * (size_t)(n ? n : 1));
  ts_expr **ihi = ts_arena_alloc(a, sizeof *ihi * (size_t)(n ? n : 1));
  int *state =
      ts_arena_alloc(a, sizeof *state * (size_t)(n ? n : 1)); /* 0 free, 1 set,
                                                     2 unbounded */
  if (!rc && (!ilo || !ihi || !state)) rc = fail_oom(s, prim);
  char why[400];
  for (int j = 0; j < ts_block_n_reads(b) && !rc; j++) {
    const ts_region *reg = ts_block_read(b, j);
    bool produced = false;
    for (int i = 0; i < producers.n; i++)
      if (block_writes(ts_realize_block(producers.v[i]), reg->buffer))
        produced = true;
    if (!produced) continue;
    int dims[64];
    if (n > 64 || !iter_dims(b, reg, dims, why, sizeof why)) {
      rc = FAIL(s, TS_ESCHEDULE, "%s: block '%s': %s", prim, bn,
                n > 64 ? "too many iter vars" : why);
      break;
    }
    ts_expr *lo[TS_MAX_DIMS], *hi[TS_MAX_DIMS];
    bool ok[TS_MAX_DIMS];
    union_regions(s, loop, &producers, reg->buffer, true, false, lo, hi, ok);
    for (int i = 0; i < n && !rc; i++) {
      int d = dims[i];
      if (d < 0) continue;
      if (!ok[d]) {
        state[i] = 2;
      } else if (state[i] == 0) {
        state[i] = 1;
        ilo[i] = lo[d];
        ihi[i] = hi[d];
      } else if (state[i] == 1) {
        int64_t dl, dh;
        if (!ts_expr_is_const_int(
                ts_simplify(a, ts_sub(a, lo[d], ilo[i]), NULL), &dl) ||
            !ts_expr_is_const_int(
                ts_simplify(a, ts_sub(a, hi[d], ihi[i]), NULL), &dh) ||
            dl != 0 || dh != 0)
          rc = FAIL(s, TS_ESCHEDULE,
                    "%s: the producers under loop '%s' produce different "
                    "regions for iter var %d of block '%s'",
                    prim, loop_name(loop), i, bn);
      }
    }
  }
  iter_plan *plans = ts_arena_alloc(a, sizeof *plans * (size_t)(n ? n : 1));
  if (!rc && !plans) rc = fail_oom(s, prim);
  for (int i = 0; i < n && !rc; i++) {
    plan_iter(a, b, i, state[i] == 1, ilo[i], ihi[i], outer.v, outer.n,
              &plans[i]);
    if (plans[i].ext < 0)
      rc = FAIL(s, TS_ESCHEDULE, "%s: block '%s' has a non-constant domain",
                prim, bn);
  }
  /* the insertion point: after every item holding a producer */
  int pos = 0;
  if (!rc) {
    ts_stmt **items, *one;
    int n_items = body_items(ts_for_body(loop), &items, &one);
    if (!items) rc = fail_oom(s, prim); /* the loop has a body */
    for (int i = 0; i < n_items; i++)
      for (int k = 0; k < producers.n; k++)
        if (tree_contains(items[i], producers.v[k])) pos = i + 1;
    free(items);
  }
  ts_stmt *realize = NULL;
  if (!rc &&
      !(plan->nest = build_nest(a, r, plans, outer.v, outer.n, &realize)))
    rc = fail_oom(s, prim);
  if (!rc) rc = check_parallel_above(s, prim, outer.v, outer.n, realize);
  sv_free(&outer);
  sv_free(&all);
  sv_free(&producers);
  if (rc) return rc;
  plan->r = r;
  plan->loop = loop;
  plan->pos = pos;
  return TS_OK;
}

/* Moves the block; out of memory leaves the function as it was. (The nest
 * goes in before the old realize goes out: the target loop is not around
 * the old realize, so the order changes nothing else.) */
static int commit_at(ts_sched *s, const at_plan *plan, const char *why) {
  if (!tree_insert(s->func, plan->loop, plan->pos, plan->nest))
    return fail_oom(s, why);
  stmt_vec removed = {0};
  if (!tree_remove(s->func, plan->r, &removed)) {
    /* take the nest out again (its loop's body as it was before) */
    tree_remove(s->func, plan->nest, NULL);
    sv_free(&removed);
    return fail_oom(s, why);
  }
  rv_kill_loops(s, removed.v, removed.n, why);
  sv_free(&removed);
  sched_refresh(s);
  return TS_OK;
}

static int plan_inline(ts_sched *s, const char *prim, ts_stmt *r);
static int commit_inline(ts_sched *s, ts_stmt *r);

/* compute_at(block, loop) where loop may be a mark of
 * sample_compute_location. */
int apply_compute_at(ts_sched *s, inst *in, rv_list *out) {
  (void)out;
  ts_stmt *r, *loop;
  int rc = check_arity(s, in, 2, 2, 0);
  if (rc || (rc = in_block(s, in, 0, &r))) return rc;
  if (in->inputs[1].kind == TV_RV &&
      s->rvs[in->inputs[1].i].kind == TS_RV_LOOP &&
      s->rvs[in->inputs[1].i].mark) {
    if (s->rvs[in->inputs[1].i].mark == MARK_ROOT) return TS_OK;
    if ((rc = plan_inline(s, "compute_at", r))) return rc;
    return commit_inline(s, r);
  }
  if ((rc = in_loop(s, in, 1, &loop))) return rc;
  at_plan plan;
  if ((rc = plan_compute_at(s, "compute_at", r, loop, &plan))) return rc;
  return commit_at(s, &plan, "compute_at");
}

int apply_reverse_compute_at(ts_sched *s, inst *in, rv_list *out) {
  (void)out;
  ts_stmt *r, *loop;
  int rc = check_arity(s, in, 2, 2, 0);
  if (rc || (rc = in_block(s, in, 0, &r)) || (rc = in_loop(s, in, 1, &loop)))
    return rc;
  at_plan plan;
  if ((rc = plan_reverse_compute_at(s, "reverse_compute_at", r, loop, &plan)))
    return rc;
  return commit_at(s, &plan, "reverse_compute_at");
}

/* ========================================================================
 * compute_inline
 * ======================================================================== */

/* The single store of a spatial block's body, or NULL. */
static ts_stmt *single_store(const ts_block *b) {
  ts_stmt *body = ts_block_body(b);
  if (body && ts_stmt_kind_of(body) == TS_STMT_SEQ && ts_seq_n(body) == 1)
    body = ts_seq_item(body, 0);
  return body && ts_stmt_kind_of(body) == TS_STMT_STORE ? body : NULL;
}

static int check_spatial(ts_sched *s, const char *prim, const ts_block *b) {
  const char *bn = ts_block_name(b);
  if (ts_block_init(b))
    return FAIL(s, TS_ESCHEDULE, "%s: block '%s' is a reduction block", prim,
                bn);
  for (int i = 0; i < ts_block_n_iters(b); i++)
    if (ts_block_iter_kind(b, i) != TS_ITER_SPATIAL)
      return FAIL(s, TS_ESCHEDULE,
                  "%s: block '%s' is a reduction block (iter var %d is %s)",
                  prim, bn, i, ts_iter_kind_name(ts_block_iter_kind(b, i)));
  if (ts_block_n_allocs(b) > 0)
    return FAIL(s, TS_ESCHEDULE, "%s: block '%s' allocates buffers", prim, bn);
  if (!single_store(b))
    return FAIL(s, TS_ESCHEDULE,
                "%s: the body of block '%s' is not a single "
                "store",
                prim, bn);
  return TS_OK;
}

/* Whether the indices are distinct iter vars of b covering all of them;
 * perm[d] = the iter of index d. */
static bool indices_are_iters(const ts_block *b, ts_expr *const *idx, int n,
                              int *perm) {
  if (n != ts_block_n_iters(b)) return false;
  for (int d = 0; d < n; d++) {
    perm[d] = -1;
    for (int i = 0; i < n; i++)
      if (idx[d] == ts_block_iter_var(b, i)) perm[d] = i;
    if (perm[d] < 0) return false;
    for (int e = 0; e < d; e++)
      if (perm[e] == perm[d]) return false;
  }
  return true;
}

typedef struct access_ctx {
  const ts_buffer *buf;
  bool loads, addr, stores;
} access_ctx;

static void access_expr(void *ctx, ts_expr *e) {
  access_ctx *c = ctx;
  ts_expr_kind k = ts_expr_kind_of(e);
  if (k == TS_EXPR_LOAD && ts_expr_buffer(e) == c->buf) c->loads = true;
  if (k == TS_EXPR_ADDRESS_OF && ts_expr_buffer(e) == c->buf) c->addr = true;
}

static void access_visit(void *ctx, ts_expr *e) {
  ts_expr_walk(e, access_expr, ctx);
}

static bool access_enter(void *ctx, ts_stmt *s) {
  access_ctx *c = ctx;
  if (ts_stmt_kind_of(s) == TS_STMT_STORE && ts_store_buffer(s) == c->buf)
    c->stores = true;
  return true;
}

static access_ctx accesses(ts_stmt *s, const ts_buffer *buf) {
  access_ctx c = {buf, false, false, false};
  ts_visitor v = {access_enter, NULL, access_visit, &c};
  ts_stmt_walk(s, &v);
  return c;
}

static int plan_inline(ts_sched *s, const char *prim, ts_stmt *r) {
  ts_block *b = ts_realize_block(r);
  const char *bn = ts_block_name(b);
  if (!tree_scope(s->func, r))
    return FAIL(s, TS_ESCHEDULE, "%s: block '%s' is the root block", prim, bn);
  int rc = check_spatial(s, prim, b);
  if (rc) return rc;
  ts_stmt *st = single_store(b);
  ts_buffer *w = ts_store_buffer(st);
  int perm[TS_MAX_DIMS + 1];
  ts_expr *idx[TS_MAX_DIMS + 1];
  int n = ts_store_n_indices(st);
  for (int d = 0; d < n && d <= TS_MAX_DIMS; d++)
    idx[d] = ts_store_index(st, d);
  if (n > TS_MAX_DIMS || !indices_are_iters(b, idx, n, perm))
    return FAIL(s, TS_ESCHEDULE,
                "%s: block '%s' does not store at exactly its iter vars", prim,
                bn);
  if (is_param(s->func, w))
    return FAIL(s, TS_ESCHEDULE,
                "%s: block '%s' writes '%s', a parameter of the function", prim,
                bn, ts_buffer_name(w));
  access_ctx self = accesses(ts_block_body(b), w);
  if (self.loads)
    return FAIL(s, TS_ESCHEDULE, "%s: block '%s' reads its own output '%s'",
                prim, bn, ts_buffer_name(w));
  int nb;
  ts_stmt **all = ts_func_blocks(s->func, &nb);
  for (int i = 0; i < nb && !rc; i++) {
    ts_stmt *x = all[i];
    if (x == r || !tree_scope(s->func, x)) continue;
    const ts_block *o = ts_realize_block(x);
    access_ctx c = {w, false, false, false};
    ts_visitor v = {access_enter, NULL, access_visit, &c};
    ts_stmt_walk(ts_block_init(o), &v);
    ts_stmt_walk(ts_block_body(o), &v);
    if (c.stores)
      rc = FAIL(s, TS_ESCHEDULE,
                "%s: buffer '%s' of block '%s' is also written by block '%s'",
                prim, ts_buffer_name(w), bn, ts_block_name(o));
    else if (c.addr)
      rc = FAIL(s, TS_ESCHEDULE,
                "%s: block '%s' takes the address of '%s' (the output of "
                "block '%s')",
                prim, ts_block_name(o), ts_buffer_name(w), bn);
    else if (!block_writes(o, w)) {
      /* a buffer b reads must not change between b and its consumers */
      for (int j = 0; j < ts_block_n_reads(b) && !rc; j++) {
        ts_buffer *in_buf = ts_block_read(b, j)->buffer;
        if (block_writes(o, in_buf) && before(s->func, r, x))
          rc = FAIL(s, TS_ESCHEDULE,
                    "%s: block '%s' writes '%s' after block '%s' reads it",
                    prim, ts_block_name(o), ts_buffer_name(in_buf), bn);
      }
    }
  }
  free(all);
  return rc;
}

typedef struct inline_ctx {
  ts_block *b;
  ts_buffer *w;
  ts_stmt *store;
} inline_ctx;

static ts_expr *inline_post(void *ctx, ts_arena *a, ts_expr *e) {
  inline_ctx *c = ctx;
  if (ts_expr_kind_of(e) != TS_EXPR_LOAD || ts_expr_buffer(e) != c->w) return e;
  ts_node_map *map = ts_node_map_create();
  for (int d = 0; d < ts_store_n_indices(c->store); d++)
    ts_node_map_put(map, ts_store_index(c->store, d), ts_expr_operand(e, d));
  ts_expr *r = ts_expr_substitute(a, ts_store_value(c->store), map, NULL);
  ts_node_map_destroy(map);
  return r;
}

static ts_expr *inline_expr(void *ctx, ts_arena *a, ts_expr *e) {
  return ts_expr_mutate(a, e, inline_post, ctx);
}

/* Out of memory while the block is taken out leaves the function as it
 * was; while its loads are replaced, a load that could not be replaced
 * stays (the failure is counted: sched_run reports it). */
static int commit_inline(ts_sched *s, ts_stmt *r) {
  ts_block *b = ts_realize_block(r);
  inline_ctx c = {b, ts_store_buffer(single_store(b)), single_store(b)};
  ts_stmt *site = alloc_site(s->func, c.w);
  stmt_vec removed = {0};
  if (!tree_remove(s->func, r, &removed)) {
    sv_free(&removed);
    return fail_oom(s, "compute_inline");
  }
  rv_kill_loops(s, removed.v, removed.n, "compute_inline");
  sv_free(&removed);
  rewriter rw = {inline_expr, NULL, true, &c};
  rewrite_stmt(ts_func_arena(s->func), ts_func_body(s->func), &rw);
  if (site) ts_block_replace_alloc(ts_realize_block(site), c.w, NULL);
  sched_refresh(s);
  return TS_OK;
}

int apply_compute_inline(ts_sched *s, inst *in, rv_list *out) {
  (void)out;
  ts_stmt *r;
  int rc = check_arity(s, in, 1, 1, 0);
  if (rc || (rc = in_block(s, in, 0, &r))) return rc;
  if ((rc = plan_inline(s, "compute_inline", r))) return rc;
  return commit_inline(s, r);
}

/* ========================================================================
 * reverse_compute_inline
 * ======================================================================== */

typedef struct rinline_plan {
  ts_stmt *c, *p; /* consumer and producer realizes */
  ts_buffer *w;   /* the buffer between them */
  ts_stmt *store; /* the producer's new store */
} rinline_plan;

/* Finds loads of a buffer and checks they all have the same indices. */
typedef struct loads_ctx {
  const ts_buffer *buf;
  ts_expr *first;
  bool differ;
} loads_ctx;

static void loads_fn(void *ctx, ts_expr *e) {
  loads_ctx *c = ctx;
  if (ts_expr_kind_of(e) != TS_EXPR_LOAD || ts_expr_buffer(e) != c->buf) return;
  if (!c->first) {
    c->first = e;
    return;
  }
  int n = ts_expr_n_operands(e);
  for (int d = 0; d < n; d++)
    if (ts_expr_operand(e, d) != ts_expr_operand(c->first, d)) c->differ = true;
}

typedef struct replace_ctx {
  const ts_buffer *buf;
  ts_expr *with;
} replace_ctx;

static ts_expr *replace_post(void *ctx, ts_arena *a, ts_expr *e) {
  (void)a;
  replace_ctx *c = ctx;
  if (ts_expr_kind_of(e) == TS_EXPR_LOAD && ts_expr_buffer(e) == c->buf)
    return c->with;
  return e;
}

static int plan_reverse_inline(ts_sched *s, const char *prim, ts_stmt *r,
                               rinline_plan *plan) {
  ts_arena *a = ts_func_arena(s->func);
  ts_block *b = ts_realize_block(r);
  const char *bn = ts_block_name(b);
  ts_stmt *scope = tree_scope(s->func, r);
  if (!scope)
    return FAIL(s, TS_ESCHEDULE, "%s: block '%s' is the root block", prim, bn);
  int rc = check_spatial(s, prim, b);
  if (rc) return rc;
  ts_stmt *cst = single_store(b);
  ts_buffer *out_buf = ts_store_buffer(cst);
  /* the one produced buffer the block reads */
  stmt_vec all = {0};
  scope_blocks(scope, &all);
  ts_buffer *w = NULL;
  ts_stmt *p = NULL;
  for (int j = 0; j < ts_block_n_reads(b) && !rc; j++) {
    ts_buffer *x = ts_block_read(b, j)->buffer;
    for (int i = 0; i < all.n && !rc; i++) {
      if (all.v[i] == r || !block_writes(ts_realize_block(all.v[i]), x))
        continue;
      if (w && (w != x || p != all.v[i]))
        rc = FAIL(s, TS_ESCHEDULE, "%s: block '%s' has more than one producer",
                  prim, bn);
      w = x;
      p = all.v[i];
    }
  }
  if (!rc && !w)
    rc =
        FAIL(s, TS_ESCHEDULE, "%s: block '%s' has no producer block", prim, bn);
  if (rc) {
    sv_free(&all);
    return rc;
  }
  const ts_block *pb = ts_realize_block(p);
  const char *pn = ts_block_name(pb);
  if (is_param(s->func, w))
    rc = FAIL(s, TS_ESCHEDULE, "%s: buffer '%s' is a parameter of the function",
              prim, ts_buffer_name(w));
  if (!rc) {
    bool reduction = ts_block_init(pb) != NULL;
    for (int i = 0; i < ts_block_n_iters(pb); i++)
      if (ts_block_iter_kind(pb, i) != TS_ITER_SPATIAL) reduction = true;
    if (reduction)
      rc = FAIL(s, TS_ESCHEDULE,
                "%s: producer block '%s' of block '%s' is a reduction block",
                prim, pn, bn);
    else
      rc = check_spatial(s, prim, pb);
  }
  ts_stmt *pst = rc ? NULL : single_store(pb);
  if (!rc && ts_store_buffer(pst) != w)
    rc = FAIL(s, TS_ESCHEDULE, "%s: producer block '%s' does not store '%s'",
              prim, pn, ts_buffer_name(w));
  /* the consumer reads w at exactly its iter vars, everywhere the same */
  loads_ctx lc = {w, NULL, false};
  if (!rc) ts_expr_walk(ts_store_value(cst), loads_fn, &lc);
  int perm[TS_MAX_DIMS + 1];
  if (!rc) {
    ts_expr *idx[TS_MAX_DIMS + 1];
    int n = lc.first ? ts_expr_n_operands(lc.first) : 0;
    for (int d = 0; d < n && d <= TS_MAX_DIMS; d++)
      idx[d] = ts_expr_operand(lc.first, d);
    if (!lc.first || lc.differ || n > TS_MAX_DIMS ||
        !indices_are_iters(b, idx, n, perm))
      rc = FAIL(s, TS_ESCHEDULE,
                "%s: block '%s' does not read '%s' at exactly its iter vars",
                prim, bn, ts_buffer_name(w));
  }
  /* the consumer's domain covers the buffer exactly */
  for (int d = 0; !rc && d < ts_buffer_ndim(w); d++) {
    int64_t mn, ex;
    if (!iter_const(b, perm[d], &mn, &ex) || mn != 0 ||
        ex != ts_buffer_dim(w, d))
      rc = FAIL(s, TS_ESCHEDULE,
                "%s: block '%s' does not cover all of '%s' (dimension %d)",
                prim, bn, ts_buffer_name(w), d);
  }
  /* nobody else reads w; nothing between p and the consumer touches its
   * inputs or output */
  for (int i = 0; i < all.n && !rc; i++) {
    ts_stmt *x = all.v[i];
    if (x == r || x == p) continue;
    const ts_block *o = ts_realize_block(x);
    if (block_reads(o, w))
      rc = FAIL(s, TS_ESCHEDULE, "%s: buffer '%s' is also read by block '%s'",
                prim, ts_buffer_name(w), ts_block_name(o));
    else if (block_writes(o, out_buf))
      rc = FAIL(s, TS_ESCHEDULE,
                "%s: buffer '%s' of block '%s' is also written by block '%s'",
                prim, ts_buffer_name(out_buf), bn, ts_block_name(o));
    else if (before(s->func, p, x) && before(s->func, x, r)) {
      bool touches = block_reads(o, out_buf);
      for (int j = 0; j < ts_block_n_reads(b) && !touches; j++)
        touches = block_writes(o, ts_block_read(b, j)->buffer);
      if (touches)
        rc = FAIL(s, TS_ESCHEDULE,
                  "%s: block '%s' between producer '%s' and block '%s' "
                  "touches their buffers",
                  prim, ts_block_name(o), pn, bn);
    }
  }
  if (!rc && block_reads(pb, out_buf))
    rc = FAIL(s, TS_ESCHEDULE, "%s: producer block '%s' reads '%s'", prim, pn,
              ts_buffer_name(out_buf));
  if (!rc && !before(s->func, p, r))
    rc = FAIL(s, TS_ESCHEDULE, "%s: producer block '%s' runs after block '%s'",
              prim, pn, bn);
  sv_free(&all);
  if (rc) return rc;
  /* consumer iter (perm[d]) := producer index d */
  ts_node_map *map = ts_node_map_create();
  for (int d = 0; d < ts_buffer_ndim(w); d++)
    ts_node_map_put(map, ts_block_iter_var(b, perm[d]), ts_store_index(pst, d));
  replace_ctx rctx = {w, ts_store_value(pst)};
  ts_expr *value = ts_expr_mutate(a, ts_store_value(cst), replace_post, &rctx);
  value = ts_expr_substitute(a, value, map, NULL);
  int n = ts_store_n_indices(cst);
  ts_expr **idx = ts_arena_alloc(a, sizeof *idx * (size_t)(n ? n : 1));
  for (int d = 0; idx && d < n; d++)
    idx[d] = ts_expr_substitute(a, ts_store_index(cst, d), map, NULL);
  plan->store = idx ? ts_store(a, out_buf, idx, n, value) : NULL;
  ts_node_map_destroy(map);
  if (!plan->store) return fail_oom(s, prim);
  plan->c = r;
  plan->p = p;
  plan->w = w;
  return TS_OK;
}

int apply_reverse_compute_inline(ts_sched *s, inst *in, rv_list *out) {
  (void)out;
  ts_stmt *r;
  int rc = check_arity(s, in, 1, 1, 0);
  if (rc || (rc = in_block(s, in, 0, &r))) return rc;
  rinline_plan plan = {0};
  if ((rc = plan_reverse_inline(s, "reverse_compute_inline", r, &plan)))
    return rc;
  ts_stmt *site = alloc_site(s->func, plan.w);
  stmt_vec removed = {0};
  if (!tree_remove(s->func, plan.c, &removed)) {
    sv_free(&removed);
    return fail_oom(s, "reverse_compute_inline");
  }
  ts_block_set_body(ts_realize_block(plan.p), plan.store);
  rv_kill_loops(s, removed.v, removed.n, "reverse_compute_inline");
  sv_free(&removed);
  if (site) ts_block_replace_alloc(ts_realize_block(site), plan.w, NULL);
  sched_refresh(s);
  return TS_OK;
}

/* ========================================================================
 * Candidate locations
 * ======================================================================== */

void compute_location_candidates(ts_sched *s, ts_stmt *realize, stmt_vec *loops,
                                 bool *can_inline) {
  ts_error saved = s->err;
  ts_stmt *scope = tree_scope(s->func, realize);
  *can_inline = false;
  if (scope) {
    stmt_vec all = {0};
    tree_loops(ts_block_body(ts_realize_block(scope)), false, &all);
    for (int i = 0; i < all.n; i++) {
      at_plan plan;
      if (plan_compute_at(s, "compute_at", realize, all.v[i], &plan) == TS_OK)
        sv_push(loops, all.v[i]);
    }
    sv_free(&all);
    *can_inline = plan_inline(s, "compute_inline", realize) == TS_OK;
  }
  s->err = saved;
}
