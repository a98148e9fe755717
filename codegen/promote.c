/*
 * promote.c — register promotion of local accumulators. A tiled reduction
 * accumulates its register tile in a local buffer (a cache_write's
 * C_local): inside the reduction loop every access to the buffer is at a
 * few fixed places, one per row and vector of the tile. LLVM keeps those in
 * registers only when its own promotion proves it safe, and it gives up in
 * larger functions (the tail copies of a partitioned tile, notably), which
 * leaves a store per FMA in the innermost loop. This pass does the
 * promotion on the IR, where it is simple to prove: for a serial loop L and
 * a buffer X allocated by the function or one of its output parameters
 * (declared noalias, so nothing else reaches it), when every access to X
 * in L is at an index that L does not change (after unrolling the small
 * inner loops that index it where L stores it), the places ("slots") are
 * loaded into a small new local buffer R before L, L works on R at
 * constant offsets, and the slots L stores are written back after it. R is
 * a stack array indexed by constants only, which LLVM's SROA always turns
 * into registers.
 *
 * Conditions checked: X is an allocation or an output parameter, accessed in L
 * by loads and stores only (no address taken), with one flat index that is a
 * scalar or a unit-stride ramp; slots are equal or provably disjoint
 * (their bases differ by a constant); every slot lies inside X for every
 * value of the loops around L (so the load before L is in bounds even when
 * L's accesses are guarded; where L runs under if-conditions, as the main
 * part of a partitioned tile does, the slot need only be inside X where
 * they hold, checked point by point); L holds no parallel or thread-bound
 * loop; a buffer that the parallel iterations around L share is not
 * promoted when a slot it stores may never be stored by L in this thread
 * (all its stores under conditions inside L that are not known to hold at
 * L's first or last iteration): the write-back would race with the
 * iteration that owns the element. At
 * most MAX_SLOTS slots and max_bytes bytes (what the target's vector
 * registers hold beside a tile's operands) are promoted per loop.
 * A parallel loop whose body is straight-line code (a tile with every loop
 * unrolled) is promoted inside one iteration instead (try_promote's
 * `region`).
 */
#include "codegen/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SLOTS 32
#define DEFAULT_MAX_BYTES 384 /* 12 registers of 256 bits */
#define MAX_CANDS 8
#define MAX_UNROLL 16         /* extent of one inner loop unrolled */
#define MAX_UNROLL_PRODUCT 64 /* copies of the body in all */
#define MAX_CONDS 8
#define MAX_POINTS                                                             \
  65536 /* loop points enumerated to prove a slot in bounds                    \
         */
/* points enumerated times the expression nodes evaluated at each, to
 * prove slots in bounds, per function: past it, slots that need the
 * proof are not promoted */
#define POINTS_BUDGET (INT64_C(1) << 27)

typedef struct slot {
  ts_expr *base; /* first element's index */
  int lanes;
  bool stored;
  bool loaded;
  bool owned;     /* stored by L in this thread for sure */
  int64_t offset; /* in R */
} slot;

typedef struct cand {
  ts_buffer *buf;
  slot slots[MAX_SLOTS];
  int n;
  bool bad;
  bool any_store;
  bool guarded;   /* a stored slot of it that L may never store in this
                     thread (its stores all run under ifs inside L that
                     are not known to hold at L's first or last iteration) */
  ts_buffer *reg; /* R, once chosen */
} cand;

typedef struct promote_ctx {
  ts_arena *a;
  ts_var_ranges *ranges;  /* loops seen so far */
  ts_node_map *allocated; /* buffers the function allocates */
  ts_node_map *alloc_par; /* buffer -> parallel loops around its allocation
                             (as a pointer-sized count plus one) */
  int par_depth;          /* parallel loops around the statement visited */
  int64_t max_bytes;      /* promoted around one loop at most */
  int promoted;
  /* the conditions of the if-branches around the statement being visited
   * (a partitioned tile's main part runs under one) */
  ts_expr *conds[MAX_CONDS];
  int n_conds;
  const ts_stmt_mutator *m;
  int64_t points_left; /* of POINTS_BUDGET */
} promote_ctx;

/* ---- small walks ---- */

typedef struct var_use {
  const ts_node_map *vars;
  bool found;
} var_use;

static void var_use_fn(void *ctx, ts_expr *e) {
  var_use *u = ctx;
  if (ts_expr_kind_of(e) == TS_EXPR_VAR && ts_node_map_get(u->vars, e))
    u->found = true;
}

static bool uses_any(ts_expr *e, const ts_node_map *vars) {
  var_use u = {vars, false};
  ts_expr_walk(e, var_use_fn, &u);
  return u.found;
}

/* Whether the statement tree holds a thread-bound loop (and, with
 * `parallel`, a parallel one). */
typedef struct loop_find {
  bool parallel, any, found;
} loop_find;

static bool loop_find_fn(void *ctx, ts_stmt *s) {
  loop_find *l = ctx;
  if (ts_stmt_kind_of(s) == TS_STMT_FOR &&
      (l->any || ts_for_kind_of(s) == TS_FOR_THREAD ||
       (l->parallel && ts_for_kind_of(s) == TS_FOR_PARALLEL)))
    l->found = true;
  return !l->found;
}

static bool has_loop(ts_stmt *s, bool parallel) {
  loop_find l = {parallel, false, false};
  ts_visitor v = {.enter_stmt = loop_find_fn, .ctx = &l};
  ts_stmt_walk(s, &v);
  return l.found;
}

static bool has_any_loop(ts_stmt *s) {
  loop_find l = {true, true, false};
  ts_visitor v = {.enter_stmt = loop_find_fn, .ctx = &l};
  ts_stmt_walk(s, &v);
  return l.found;
}

/* ---- unrolling the inner loops that index promotable buffers ---- */

/* The promotable buffers (allocations and output parameters) that a
 * statement tree stores to. */
typedef struct stored_find {
  const promote_ctx *c;
  ts_node_map *stored;
} stored_find;

static bool stored_find_fn(void *ctx, ts_stmt *s) {
  stored_find *f = ctx;
  if (ts_stmt_kind_of(s) == TS_STMT_STORE &&
      ts_node_map_get(f->c->allocated, ts_store_buffer(s)))
    ts_node_map_put(f->stored, ts_store_buffer(s), (void *)1);
  return true;
}

typedef struct index_use {
  const ts_node_map *bufs; /* the buffers whose accesses count */
  const ts_node_map *var;  /* the loop var, as a one-entry set */
  bool found;
} index_use;

static void index_use_expr(void *ctx, ts_expr *e) {
  index_use *u = ctx;
  if (u->found || ts_expr_kind_of(e) != TS_EXPR_LOAD ||
      !ts_node_map_get(u->bufs, ts_expr_buffer(e)))
    return;
  for (int i = 0; i < ts_expr_n_operands(e); i++)
    if (uses_any(ts_expr_operand(e, i), u->var)) u->found = true;
}

static void index_use_top(void *ctx, ts_expr *e) {
  ts_expr_walk(e, index_use_expr, ctx);
}

static bool index_use_stmt(void *ctx, ts_stmt *s) {
  index_use *u = ctx;
  if (ts_stmt_kind_of(s) == TS_STMT_STORE &&
      ts_node_map_get(u->bufs, ts_store_buffer(s)))
    for (int i = 0; i < ts_store_n_indices(s); i++)
      if (uses_any(ts_store_index(s, i), u->var)) u->found = true;
  return !u->found;
}

/* Whether loop var v indexes, in s, an access to a promotable buffer that
 * s stores to: unrolling such a loop turns the accesses into the fixed
 * slots the promotion needs. A loop that indexes only buffers s reads (the
 * operands of the reduction) stays a loop: unrolling it would only grow
 * the body. */
static bool indexes_accumulator(const promote_ctx *c, ts_stmt *s,
                                const ts_expr *v) {
  stored_find f = {c, ts_node_map_create()};
  ts_visitor find = {.enter_stmt = stored_find_fn, .ctx = &f};
  ts_stmt_walk(s, &find);
  ts_node_map *one = ts_node_map_create();
  ts_node_map_put(one, v, (void *)1);
  index_use u = {f.stored, one, false};
  ts_visitor vis = {
      .enter_stmt = index_use_stmt, .visit_expr = index_use_top, .ctx = &u};
  ts_stmt_walk(s, &vis);
  ts_node_map_destroy(one);
  ts_node_map_destroy(f.stored);
  return u.found;
}

typedef struct unroll_ctx {
  const promote_ctx *c;
  int64_t product; /* copies made so far (product of unrolled extents) */
  bool over;
} unroll_ctx;

static ts_stmt *unroll_post(void *ctx, ts_arena *a, ts_stmt *s) {
  unroll_ctx *u = ctx;
  int64_t mn, ex;
  if (u->over || ts_stmt_kind_of(s) != TS_STMT_FOR ||
      (ts_for_kind_of(s) != TS_FOR_SERIAL &&
       ts_for_kind_of(s) != TS_FOR_UNROLLED) ||
      !ts_expr_is_const_int(ts_for_min(s), &mn) ||
      !ts_expr_is_const_int(ts_for_extent(s), &ex) || ex < 1 ||
      ex > MAX_UNROLL ||
      !indexes_accumulator(u->c, ts_for_body(s), ts_for_var(s)))
    return s;
  if (u->product * ex > MAX_UNROLL_PRODUCT) {
    u->over = true;
    return s;
  }
  u->product *= ex;
  return lower_unroll_loop(a, s, mn, ex);
}

/* ---- bounds under the branch conditions ---- */

/* Whether [base, base + lanes) lies inside [0, size) at every point of the
 * loops around where the branch conditions hold: the main part of a
 * partitioned tile indexes past the buffer's end only where its condition
 * sends the run to the tail instead. Decided by enumerating the points
 * (at most MAX_POINTS) of the loop vars that base and the conditions use. */
static bool in_bounds_where_run(promote_ctx *c, ts_expr *base, int lanes,
                                int64_t size) {
  if (c->n_conds == 0) return false;
  ts_points pv = {.ranges = c->ranges};
  ts_points_add(&pv, base);
  for (int i = 0; i < c->n_conds; i++) ts_points_add(&pv, c->conds[i]);
  int64_t n = ts_points_count(&pv, MAX_POINTS), nodes = ts_points_size(base);
  for (int i = 0; i < c->n_conds; i++) nodes += ts_points_size(c->conds[i]);
  if (n < 0 || n * nodes > c->points_left) return false;
  c->points_left -= n * nodes;
  /* compiled when they all compile, by bounds otherwise */
  ts_points_prog *g = ts_points_prog_create(&pv);
  bool compiled = g && ts_points_prog_add(g, base, false) == 0;
  for (int i = 0; compiled && i < c->n_conds; i++)
    compiled = ts_points_prog_add(g, c->conds[i], true) == i + 1;
  ts_var_ranges *point = compiled ? NULL : ts_var_ranges_create();
  bool ok = compiled || point;
  int64_t at[TS_POINTS_MAX_VARS] = {0};
  do {
    if (!ok) break;
    if (point) ts_points_set(&pv, at, point);
    bool run = true;
    for (int i = 0; run && i < c->n_conds; i++) {
      int h = compiled ? ts_points_prog_holds(g, i + 1, at)
                       : ts_points_holds(c->conds[i], point);
      if (h < 0) ok = false;
      run = h > 0;
    }
    int64_t v;
    bool known = !ok || !run ? true
                 : compiled  ? ts_points_prog_value(g, 0, at, &v)
                             : ts_points_value(base, point, &v);
    if (ok && run && (!known || v < 0 || v + lanes > size)) ok = false;
  } while (ok && ts_points_next(&pv, at));
  ts_points_prog_destroy(g);
  if (point) ts_var_ranges_destroy(point);
  return ok;
}

/* ---- the accesses of one loop ---- */

typedef struct scan {
  promote_ctx *c;
  ts_node_map *inner; /* vars bound inside the loop (and its own) */
  cand cands[MAX_CANDS];
  int n;
  int if_depth;  /* if-statements inside the loop around the visited one */
  ts_stmt *loop; /* L */
  ts_stmt *ifs[MAX_CONDS]; /* the innermost MAX_CONDS of them */
  bool in_else[MAX_CONDS]; /* visiting the else-branch of ifs[i] */
  bool other_var;          /* store_runs' walk found a var but L's */
  bool region;             /* promoting in one iteration of L (try_promote) */
} scan;

static cand *cand_of(scan *sc, ts_buffer *b) {
  for (int i = 0; i < sc->n; i++)
    if (sc->cands[i].buf == b) return &sc->cands[i];
  if (sc->n == MAX_CANDS) return NULL;
  cand *k = &sc->cands[sc->n++];
  memset(k, 0, sizeof *k);
  k->buf = b;
  return k;
}

/* Splits a flat index into base and lanes; false when it is no scalar or
 * unit-stride ramp. */
static bool split_index(ts_expr *idx, ts_expr **base, int *lanes) {
  ts_dtype t = ts_expr_dtype(idx);
  if (t.lanes == 1) {
    *base = idx;
    *lanes = 1;
    return true;
  }
  int64_t stride;
  if (ts_expr_kind_of(idx) != TS_EXPR_RAMP ||
      !ts_expr_is_const_int(ts_expr_operand(idx, 1), &stride) || stride != 1)
    return false;
  *base = ts_expr_operand(idx, 0);
  *lanes = t.lanes;
  return true;
}

/* The difference y - x when it is a constant. */
static bool const_diff(promote_ctx *c, ts_expr *x, ts_expr *y, int64_t *d) {
  ts_expr *e = ts_simplify(c->a, ts_sub(c->a, y, x), c->ranges);
  return ts_expr_is_const_int(e, d);
}

/* The slot of an access (an existing one when the base is the same), or
 * -1 when the access cannot be promoted (which marks the buffer bad). */
static int find_slot(scan *sc, cand *k, ts_expr *const *idx, int n_idx) {
  ts_expr *base;
  int lanes;
  if (n_idx != 1 || !split_index(idx[0], &base, &lanes) ||
      uses_any(base, sc->inner))
    return -1;
  for (int i = 0; i < k->n; i++) {
    int64_t d;
    if (!const_diff(sc->c, k->slots[i].base, base, &d)) return -1;
    if (d == 0 && lanes == k->slots[i].lanes) return i;
    if (d >= k->slots[i].lanes || -d >= lanes) continue; /* disjoint */
    return -1;                                           /* overlapping */
  }
  if (k->n == MAX_SLOTS) return -1;
  /* in bounds wherever the loop runs */
  int64_t lo, hi, size = ts_buffer_storage_elems(k->buf);
  if ((!ts_expr_const_bound(base, sc->c->ranges, &lo, &hi) || lo < 0 ||
       hi + lanes > size) &&
      !in_bounds_where_run(sc->c, base, lanes, size))
    return -1;
  k->slots[k->n] = (slot){.base = base, .lanes = lanes};
  return k->n++;
}

/* Whether every if-condition around the visited store (inside L) reads no
 * var but L's and all hold, each as its branch requires, at L's first or
 * at its last iteration: then L stores there in this thread for sure (the
 * k-tail of a reduction whose extent the unrolled step does not divide
 * guards the main steps with `k < last`, true at the first iteration). */
static bool conds_hold_at(scan *sc, int64_t v) {
  ts_var_ranges *at = ts_var_ranges_create();
  if (!at) return false;
  ts_var_ranges_set(at, ts_for_var(sc->loop), v, 1);
  bool ok = true;
  for (int i = 0; ok && i < sc->if_depth; i++) {
    int64_t lo, hi, want = sc->in_else[i] ? 0 : 1;
    ok = ts_expr_const_bound(ts_if_cond(sc->ifs[i]), at, &lo, &hi) &&
         lo == want && hi == want;
  }
  ts_var_ranges_destroy(at);
  return ok;
}

static void other_var_fn(void *ctx, ts_expr *e) {
  scan *sc = ctx;
  if (ts_expr_kind_of(e) == TS_EXPR_VAR && e != ts_for_var(sc->loop))
    sc->other_var = true;
}

static bool store_runs(scan *sc) {
  if (sc->if_depth == 0) return true;
  if (sc->if_depth > MAX_CONDS || sc->region) return false;
  sc->other_var = false;
  for (int i = 0; i < sc->if_depth; i++)
    ts_expr_walk(ts_if_cond(sc->ifs[i]), other_var_fn, sc);
  int64_t mn, ex;
  if (sc->other_var || !ts_expr_is_const_int(ts_for_min(sc->loop), &mn) ||
      !ts_expr_is_const_int(ts_for_extent(sc->loop), &ex) || ex < 1)
    return false;
  return conds_hold_at(sc, mn) || conds_hold_at(sc, mn + ex - 1);
}

static void note_access(scan *sc, ts_buffer *b, ts_expr *const *idx, int n,
                        bool store) {
  if (!ts_node_map_get(sc->c->allocated, b)) return;
  cand *k = cand_of(sc, b);
  if (!k || k->bad) return;
  int s = find_slot(sc, k, idx, n);
  if (s < 0) {
    k->bad = true;
    return;
  }
  if (!store) k->slots[s].loaded = true;
  if (store) {
    k->slots[s].stored = true;
    if (!k->slots[s].owned) k->slots[s].owned = store_runs(sc);
    k->any_store = true;
  }
}

/* The indices of store s, into idx (at most TS_MAX_DIMS); their number. */
static int store_indices(ts_stmt *s, ts_expr **idx) {
  int n = ts_store_n_indices(s);
  for (int i = 0; i < n && i < TS_MAX_DIMS; i++) idx[i] = ts_store_index(s, i);
  return n;
}

/* The slots that every run through s stores, one bit per slot of each
 * candidate (a promoted body's ownership): a sequence stores what any of
 * its items does, an if what both its branches do. */
typedef struct slot_set {
  uint32_t bits[MAX_CANDS];
} slot_set;

static void must_store(scan *sc, ts_stmt *s, slot_set *out) {
  memset(out, 0, sizeof *out);
  if (!s) return;
  switch (ts_stmt_kind_of(s)) {
  case TS_STMT_SEQ:
    for (int i = 0; i < ts_seq_n(s); i++) {
      slot_set one;
      must_store(sc, ts_seq_item(s, i), &one);
      for (int k = 0; k < MAX_CANDS; k++) out->bits[k] |= one.bits[k];
    }
    break;
  case TS_STMT_IF: {
    if (!ts_if_else(s)) break;
    slot_set then_s, else_s;
    must_store(sc, ts_if_then(s), &then_s);
    must_store(sc, ts_if_else(s), &else_s);
    for (int k = 0; k < MAX_CANDS; k++)
      out->bits[k] = then_s.bits[k] & else_s.bits[k];
    break;
  }
  case TS_STMT_LET: must_store(sc, ts_let_stmt_body(s), out); break;
  case TS_STMT_ALLOCATE: must_store(sc, ts_allocate_body(s), out); break;
  case TS_STMT_STORE:
    for (int k = 0; k < sc->n; k++) {
      cand *c = &sc->cands[k];
      if (c->buf != ts_store_buffer(s) || c->bad) continue;
      ts_expr *idx[TS_MAX_DIMS];
      int n = store_indices(s, idx);
      int slot = find_slot(sc, c, idx, n);
      if (slot >= 0) out->bits[k] |= UINT32_C(1) << slot;
    }
    break;
  default: break;
  }
}

static void scan_expr(void *ctx, ts_expr *e) {
  scan *sc = ctx;
  ts_expr_kind k = ts_expr_kind_of(e);
  if (k == TS_EXPR_LET) ts_node_map_put(sc->inner, ts_expr_let_var(e), e);
  if (k == TS_EXPR_ADDRESS_OF) {
    cand *c = ts_node_map_get(sc->c->allocated, ts_expr_buffer(e))
                  ? cand_of(sc, ts_expr_buffer(e))
                  : NULL;
    if (c) c->bad = true;
  }
}

static void scan_loads(void *ctx, ts_expr *e) {
  scan *sc = ctx;
  if (ts_expr_kind_of(e) != TS_EXPR_LOAD) return;
  ts_expr *idx[TS_MAX_DIMS];
  int n = ts_expr_n_operands(e);
  for (int i = 0; i < n && i < TS_MAX_DIMS; i++) idx[i] = ts_expr_operand(e, i);
  note_access(sc, ts_expr_buffer(e), idx, n, false);
}

static void scan_top(void *ctx, ts_expr *e) { ts_expr_walk(e, scan_expr, ctx); }
static void scan_top_loads(void *ctx, ts_expr *e) {
  ts_expr_walk(e, scan_loads, ctx);
}

static bool bind_stmt(void *ctx, ts_stmt *s) {
  scan *sc = ctx;
  if (ts_stmt_kind_of(s) == TS_STMT_FOR)
    ts_node_map_put(sc->inner, ts_for_var(s), s);
  else if (ts_stmt_kind_of(s) == TS_STMT_LET)
    ts_node_map_put(sc->inner, ts_let_stmt_var(s), s);
  else if (ts_stmt_kind_of(s) == TS_STMT_ALLOCATE) {
    /* allocated inside the loop: it lives and dies there */
    cand *k = cand_of(sc, ts_allocate_buffer(s));
    if (k) k->bad = true;
  }
  return true;
}

static bool store_stmt(void *ctx, ts_stmt *s) {
  scan *sc = ctx;
  int d = sc->if_depth - 1;
  if (d >= 0 && d < MAX_CONDS && s == ts_if_else(sc->ifs[d]))
    sc->in_else[d] = true;
  if (ts_stmt_kind_of(s) == TS_STMT_IF) {
    if (sc->if_depth < MAX_CONDS) {
      sc->ifs[sc->if_depth] = s;
      sc->in_else[sc->if_depth] = false;
    }
    sc->if_depth++;
  }
  if (ts_stmt_kind_of(s) == TS_STMT_STORE) {
    ts_expr *idx[TS_MAX_DIMS];
    int n = store_indices(s, idx);
    note_access(sc, ts_store_buffer(s), idx, n, true);
  }
  return true;
}

static void store_leave(void *ctx, ts_stmt *s) {
  scan *sc = ctx;
  if (ts_stmt_kind_of(s) == TS_STMT_IF) sc->if_depth--;
}

/* Whether buffer b is allocated outside a parallel loop that encloses the
 * loop being promoted: then the parallel iterations share it. */
static bool shared_by_threads(const promote_ctx *c, const ts_buffer *b) {
  intptr_t at = (intptr_t)ts_node_map_get(c->alloc_par, b);
  return at > 0 && at - 1 < c->par_depth;
}

/* ---- the rewrite ---- */

typedef struct rewrite {
  promote_ctx *c;
  cand *cands;
  int n;
} rewrite;

/* R's index for an access of a promoted buffer; NULL when b is not one. */
static ts_expr *reg_index(rewrite *rw, ts_buffer *b, ts_expr *idx,
                          ts_buffer **reg) {
  for (int i = 0; i < rw->n; i++) {
    cand *k = &rw->cands[i];
    if (k->buf != b) continue;
    ts_expr *base;
    int lanes;
    if (!split_index(idx, &base, &lanes)) return NULL;
    for (int s = 0; s < k->n; s++) {
      int64_t d;
      if (lanes == k->slots[s].lanes &&
          const_diff(rw->c, k->slots[s].base, base, &d) && d == 0) {
        *reg = k->reg;
        ts_expr *o = ts_index(rw->c->a, k->slots[s].offset);
        return lanes == 1 ? o
                          : ts_ramp(rw->c->a, o, ts_index(rw->c->a, 1), lanes);
      }
    }
  }
  return NULL;
}

static ts_expr *rewrite_expr(void *ctx, ts_arena *a, ts_expr *e) {
  rewrite *rw = ctx;
  if (ts_expr_kind_of(e) != TS_EXPR_LOAD || ts_expr_n_operands(e) != 1)
    return e;
  ts_buffer *reg = NULL;
  ts_expr *i = reg_index(rw, ts_expr_buffer(e), ts_expr_operand(e, 0), &reg);
  return i ? ts_load(a, reg, &i, 1) : e;
}

static ts_expr *rewrite_top(void *ctx, ts_arena *a, ts_expr *e) {
  return ts_expr_mutate(a, e, rewrite_expr, ctx);
}

static ts_stmt *rewrite_store(void *ctx, ts_arena *a, ts_stmt *s) {
  rewrite *rw = ctx;
  if (ts_stmt_kind_of(s) != TS_STMT_STORE || ts_store_n_indices(s) != 1)
    return s;
  ts_buffer *reg = NULL;
  ts_expr *i = reg_index(rw, ts_store_buffer(s), ts_store_index(s, 0), &reg);
  return i ? ts_store(a, reg, &i, 1, ts_store_value(s)) : s;
}

static ts_expr *slot_index(ts_arena *a, ts_expr *base, int lanes) {
  return lanes == 1 ? base : ts_ramp(a, base, ts_index(a, 1), lanes);
}

static ts_stmt *rebuild_loop(ts_arena *a, ts_stmt *loop, ts_stmt *body) {
  ts_stmt *nl = ts_for(a, ts_for_var(loop), ts_for_min(loop),
                       ts_for_extent(loop), ts_for_kind_of(loop), NULL, body);
  for (int i = 0; i < ts_for_n_annotations(loop); i++)
    ts_for_annotate(a, nl, *ts_for_annotation(loop, i));
  return nl;
}

/* With `region`, the promotion is inside one iteration of a parallel loop
 * L whose body (its small loops unrolled) is straight-line code: a
 * register tile whose every loop is unrolled, the taps of a depthwise
 * conv with its padding read under if-conditions, keeps its accumulators
 * at places fixed by L's var, loaded at the top of the body and stored at
 * its end. There a slot is owned only where every path through the body
 * stores it (must_store: unconditionally, or in both branches of an if),
 * and only accumulators (slots loaded and stored) count. */
static ts_stmt *try_promote(promote_ctx *c, ts_stmt *loop, bool region) {
  ts_arena *a = c->a;
  int64_t ext;
  ts_for_kind kind = ts_for_kind_of(loop);
  /* a loop of one iteration gains nothing (its parent or child may) */
  if ((region ? kind != TS_FOR_PARALLEL
              : kind != TS_FOR_SERIAL && kind != TS_FOR_UNROLLED) ||
      (ts_expr_is_const_int(ts_for_extent(loop), &ext) && ext <= 1) ||
      has_loop(ts_for_body(loop), true))
    return loop;
  /* the small loops inside that index allocated buffers, unrolled */
  unroll_ctx u = {.c = c, .product = 1};
  ts_stmt_mutator um = {.post = unroll_post, .ctx = &u};
  ts_stmt *body = ts_stmt_mutate(a, ts_for_body(loop), &um);
  if (u.over || (region && has_any_loop(body))) return loop;

  scan sc = {
      .c = c, .inner = ts_node_map_create(), .loop = loop, .region = region};
  if (!region) ts_node_map_put(sc.inner, ts_for_var(loop), loop);
  ts_visitor bind = {
      .enter_stmt = bind_stmt, .visit_expr = scan_top, .ctx = &sc};
  ts_stmt_walk(body, &bind);
  ts_visitor acc = {.enter_stmt = store_stmt,
                    .leave_stmt = store_leave,
                    .visit_expr = scan_top_loads,
                    .ctx = &sc};
  ts_stmt_walk(body, &acc);
  if (region) {
    /* a slot stored on every path through the body, as by both branches
     * of the partitioned tile's interior test */
    slot_set must;
    must_store(&sc, body, &must);
    for (int k = 0; k < sc.n; k++)
      for (int i = 0; i < sc.cands[k].n; i++)
        if (must.bits[k] >> i & 1) sc.cands[k].slots[i].owned = true;
  }
  ts_node_map_destroy(sc.inner);

  rewrite rw = {.c = c, .cands = sc.cands, .n = 0};
  int64_t bytes = 0;
  /* in one iteration of L, inside it: one more parallel loop around */
  if (region) c->par_depth++;
  for (int i = 0; i < sc.n; i++) {
    cand *k = &sc.cands[i];
    if (k->bad || !k->any_store) continue;
    bool accumulates = false;
    for (int s = 0; s < k->n; s++) {
      k->guarded |= k->slots[s].stored && !k->slots[s].owned;
      accumulates |= k->slots[s].stored && k->slots[s].loaded;
    }
    if (region && !accumulates) continue;
    /* A slot is written back whether or not its stores ran. When a store
     * is guarded by a condition inside L (the masked lanes of a tail tile)
     * that may never hold in this thread, the slot can be an element that
     * another parallel iteration owns and writes meanwhile: writing back
     * the value loaded before L would undo that write. */
    if (k->guarded && shared_by_threads(c, k->buf)) continue;
    int64_t lanes = 0;
    for (int s = 0; s < k->n; s++) {
      k->slots[s].offset = lanes;
      lanes += k->slots[s].lanes;
    }
    int64_t b = lanes * ts_dtype_elem_bytes(ts_buffer_dtype(k->buf));
    if (bytes + b > c->max_bytes) continue;
    bytes += b;
    char name[128];
    snprintf(name, sizeof name, "%s_reg", ts_buffer_name(k->buf));
    k->reg = ts_buffer_new(a, name, ts_buffer_dtype(k->buf), &lanes, 1);
    ts_buffer_set_scope(a, k->reg, "local");
    if (rw.n != i) sc.cands[rw.n] = *k;
    rw.n++;
  }
  if (region) c->par_depth--;
  if (rw.n == 0) return loop;

  ts_stmt_mutator rm = {.expr = rewrite_top, .post = rewrite_store, .ctx = &rw};
  ts_stmt *nb = ts_stmt_mutate(a, body, &rm);
  ts_stmt *out = region ? nb : rebuild_loop(a, loop, nb);
  for (int i = rw.n - 1; i >= 0; i--) {
    cand *k = &sc.cands[i];
    int n_items = 0;
    ts_stmt **items = ts_malloc(sizeof *items * (size_t)(2 * k->n + 1));
    if (!items) return loop;
    for (int s = 0; s < k->n; s++) {
      slot *sl = &k->slots[s];
      ts_expr *ri = slot_index(a, ts_index(a, sl->offset), sl->lanes);
      ts_expr *xi = slot_index(a, sl->base, sl->lanes);
      items[n_items++] =
          ts_store(a, k->reg, &ri, 1, ts_load(a, k->buf, &xi, 1));
    }
    items[n_items++] = out;
    for (int s = 0; s < k->n; s++) {
      slot *sl = &k->slots[s];
      if (!sl->stored) continue;
      ts_expr *ri = slot_index(a, ts_index(a, sl->offset), sl->lanes);
      ts_expr *xi = slot_index(a, sl->base, sl->lanes);
      items[n_items++] =
          ts_store(a, k->buf, &xi, 1, ts_load(a, k->reg, &ri, 1));
    }
    out = ts_allocate(a, k->reg, ts_seq(a, items, n_items));
    free(items);
  }
  c->promoted += rw.n;
  return region ? rebuild_loop(a, loop, out) : out;
}

/* ---- the pass ---- */

static ts_stmt *promote_pre(void *ctx, ts_arena *a, ts_stmt *s) {
  promote_ctx *c = ctx;
  int64_t mn, ex;
  if (ts_stmt_kind_of(s) == TS_STMT_IF && c->n_conds < MAX_CONDS) {
    /* each branch rebuilt here: the then-branch knows its condition */
    c->conds[c->n_conds++] = ts_if_cond(s);
    ts_stmt *then_s = ts_stmt_mutate(a, ts_if_then(s), c->m);
    c->n_conds--;
    ts_stmt *else_s =
        ts_if_else(s) ? ts_stmt_mutate(a, ts_if_else(s), c->m) : NULL;
    if (then_s == ts_if_then(s) && else_s == ts_if_else(s)) return s;
    return ts_if(a, ts_if_cond(s), then_s, else_s);
  }
  if (ts_stmt_kind_of(s) == TS_STMT_ALLOCATE) {
    ts_node_map_put(c->allocated, ts_allocate_buffer(s), s);
    ts_node_map_put(c->alloc_par, ts_allocate_buffer(s),
                    (void *)(intptr_t)(c->par_depth + 1));
  } else if (ts_stmt_kind_of(s) == TS_STMT_FOR) {
    if (ts_expr_is_const_int(ts_for_min(s), &mn) &&
        ts_expr_is_const_int(ts_for_extent(s), &ex))
      ts_var_ranges_set(c->ranges, ts_for_var(s), mn, ex);
    if (ts_for_kind_of(s) == TS_FOR_PARALLEL) c->par_depth++;
  }
  return NULL;
}

static ts_stmt *promote_post(void *ctx, ts_arena *a, ts_stmt *s) {
  (void)a;
  promote_ctx *c = ctx;
  if (ts_stmt_kind_of(s) != TS_STMT_FOR) return s;
  if (ts_for_kind_of(s) == TS_FOR_PARALLEL) c->par_depth--;
  ts_stmt *r = try_promote(ctx, s, false);
  return r == s ? try_promote(ctx, s, true) : r;
}

int ts_lower_promote(ts_func *f, int max_bytes, ts_error *err) {
  (void)err;
  ts_stmt *body = ts_func_body(f);
  if (!body || has_loop(body, false)) return TS_OK;
  promote_ctx c = {.a = ts_func_arena(f),
                   .ranges = ts_var_ranges_create(),
                   .allocated = ts_node_map_create(),
                   .alloc_par = ts_node_map_create(),
                   .max_bytes = max_bytes > 0 ? max_bytes : DEFAULT_MAX_BYTES,
                   .points_left = POINTS_BUDGET};
  /* The output parameters too: the ABI declares every parameter noalias
   * (emit_cpu.c), so inside the function nothing else reaches them; the
   * whole function's parallel loops share them. */
  for (int i = 0; i < ts_func_n_params(f); i++)
    if (ts_func_param_is_output(f, i)) {
      ts_node_map_put(c.allocated, ts_func_param(f, i), (void *)1);
      ts_node_map_put(c.alloc_par, ts_func_param(f, i), (void *)(intptr_t)1);
    }
  ts_stmt_mutator m = {.pre = promote_pre, .post = promote_post, .ctx = &c};
  c.m = &m;
  ts_func_set_body(f, ts_stmt_mutate(c.a, body, &m));
  ts_var_ranges_destroy(c.ranges);
  ts_node_map_destroy(c.allocated);
  ts_node_map_destroy(c.alloc_par);
  return TS_OK;
}
