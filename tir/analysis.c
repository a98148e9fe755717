/*
 * analysis.c — analyses of functions: read/write region inference of blocks
 * (accesses relaxed over the loops inside a block, nested blocks contributing
 * their own regions), the FLOP count, and navigation helpers (all blocks, a
 * block by name, loops above a statement, parents, output parameters).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* ========================================================================
 * Symbolic intervals
 * ======================================================================== */

/* An inclusive symbolic interval [lo, hi]; lo == NULL means unknown. */
typedef struct ivl {
  ts_expr *lo, *hi;
} ivl;

static const ivl UNKNOWN = {NULL, NULL};

/* Region inference state of one block. */
typedef struct infer_ctx {
  ts_arena *a;
  ts_node_map *relaxed;  /* var -> ivl* (loop vars and let vars inside) */
  ts_node_map *locals;   /* buffer -> itself: allocated inside the block */
  ts_var_ranges *ranges; /* the block's iter var domains (constants) */
  struct access_list {
    struct access *items;
    int n, cap;
  } reads, writes;
} infer_ctx;

/* The union of accesses to one buffer, per dimension. */
typedef struct access {
  ts_buffer *buffer;
  bool full[TS_MAX_DIMS]; /* the whole dimension */
  ivl dims[TS_MAX_DIMS];
} access;

static bool has_relaxed_var(infer_ctx *c, ts_expr *e, int depth) {
  if (e->kind == TS_EXPR_VAR) return ts_node_map_get(c->relaxed, e) != NULL;
  if (depth > 1000) return true;
  int n = ts_expr_n_operands(e);
  for (int i = 0; i < n; i++)
    if (has_relaxed_var(c, ts_expr_operand(e, i), depth + 1)) return true;
  return false;
}

static ts_expr *simp(infer_ctx *c, ts_expr *e) {
  return ts_simplify(c->a, e, c->ranges);
}

static bool is_index_int(ts_dtype t) {
  return t.lanes == 1 && (t.code == TS_DT_INT || t.code == TS_DT_UINT);
}

static ivl sym_node(infer_ctx *c, ts_expr *e, int depth);

/* The interval of e over the relaxed vars (other vars are points); unknown
 * for NULL and when a bound could not be built (out of memory: the arena
 * is failed). */
static ivl sym(infer_ctx *c, ts_expr *e, int depth) {
  if (!e) return UNKNOWN;
  ivl r = sym_node(c, e, depth);
  return r.lo && r.hi ? r : UNKNOWN;
}

static ivl sym_node(infer_ctx *c, ts_expr *e, int depth) {
  ts_arena *a = c->a;
  if (depth > 200) return UNKNOWN;
  ivl x, y;
  int64_t k;
  if (e->kind == TS_EXPR_RAMP) {
    /* the lanes of a vector index: base + stride * [0, lanes) */
    if (!ts_expr_is_const_int(e->u.op.b, &k) || k < 0 ||
        !is_index_int(e->u.op.a->dtype))
      return UNKNOWN;
    int64_t width;
    if (__builtin_mul_overflow(k, (int64_t)e->dtype.lanes - 1, &width))
      return UNKNOWN;
    x = sym(c, e->u.op.a, depth + 1);
    if (!x.lo) return UNKNOWN;
    ts_expr *span = ts_int(a, e->u.op.a->dtype, width);
    return (ivl){x.lo, ts_add(a, x.hi, span)};
  }
  if (e->kind == TS_EXPR_BROADCAST) return sym(c, e->u.op.a, depth + 1);
  if (!is_index_int(e->dtype)) return UNKNOWN;
  if (!has_relaxed_var(c, e, 0)) return (ivl){e, e};
  switch (e->kind) {
  case TS_EXPR_VAR: {
    ivl *r = ts_node_map_get(c->relaxed, e);
    return r ? *r : UNKNOWN;
  }
  case TS_EXPR_ADD:
  case TS_EXPR_SUB:
  case TS_EXPR_MIN:
  case TS_EXPR_MAX:
    x = sym(c, e->u.op.a, depth + 1);
    y = sym(c, e->u.op.b, depth + 1);
    if (!x.lo || !y.lo) return UNKNOWN;
    switch (e->kind) {
    case TS_EXPR_ADD:
      return (ivl){ts_add(a, x.lo, y.lo), ts_add(a, x.hi, y.hi)};
    case TS_EXPR_SUB:
      return (ivl){ts_sub(a, x.lo, y.hi), ts_sub(a, x.hi, y.lo)};
    case TS_EXPR_MIN:
      return (ivl){ts_min(a, x.lo, y.lo), ts_min(a, x.hi, y.hi)};
    default: return (ivl){ts_max(a, x.lo, y.lo), ts_max(a, x.hi, y.hi)};
    }
  case TS_EXPR_MUL: {
    ts_expr *p = e->u.op.b, *q = e->u.op.a;
    if (has_relaxed_var(c, p, 0)) {
      p = e->u.op.a;
      q = e->u.op.b;
    }
    if (has_relaxed_var(c, p, 0)) return UNKNOWN;
    x = sym(c, q, depth + 1);
    if (!x.lo) return UNKNOWN;
    int64_t lo, hi;
    if (!ts_expr_const_bound(p, c->ranges, &lo, &hi)) return UNKNOWN;
    if (lo >= 0) return (ivl){ts_mul(a, x.lo, p), ts_mul(a, x.hi, p)};
    if (hi <= 0) return (ivl){ts_mul(a, x.hi, p), ts_mul(a, x.lo, p)};
    return UNKNOWN;
  }
  case TS_EXPR_FLOORDIV:
    if (!ts_expr_is_const_int(e->u.op.b, &k) || k == 0) return UNKNOWN;
    x = sym(c, e->u.op.a, depth + 1);
    if (!x.lo) return UNKNOWN;
    if (k > 0)
      return (ivl){ts_floordiv(a, x.lo, e->u.op.b),
                   ts_floordiv(a, x.hi, e->u.op.b)};
    return (ivl){ts_floordiv(a, x.hi, e->u.op.b),
                 ts_floordiv(a, x.lo, e->u.op.b)};
  case TS_EXPR_FLOORMOD:
    if (!ts_expr_is_const_int(e->u.op.b, &k) || k <= 0) return UNKNOWN;
    x = sym(c, e->u.op.a, depth + 1);
    if (x.lo) {
      /* Within one period the modulus is monotone. */
      ts_expr *qlo = simp(c, ts_floordiv(a, x.lo, e->u.op.b));
      ts_expr *qhi = simp(c, ts_floordiv(a, x.hi, e->u.op.b));
      ts_expr *d = simp(c, ts_sub(a, qhi, qlo));
      int64_t dv;
      if (ts_expr_is_const_int(d, &dv) && dv == 0)
        return (ivl){ts_floormod(a, x.lo, e->u.op.b),
                     ts_floormod(a, x.hi, e->u.op.b)};
    }
    return (ivl){ts_int(a, e->dtype, 0), ts_int(a, e->dtype, k - 1)};
  case TS_EXPR_SELECT:
    x = sym(c, e->u.op.b, depth + 1);
    y = sym(c, e->u.op.c, depth + 1);
    if (!x.lo || !y.lo) return UNKNOWN;
    return (ivl){ts_min(a, x.lo, y.lo), ts_max(a, x.hi, y.hi)};
  case TS_EXPR_CALL:
    if (strcmp(e->u.call.name, "if_then_else") == 0 && e->u.call.n_args == 3) {
      x = sym(c, e->u.call.args[1], depth + 1);
      y = sym(c, e->u.call.args[2], depth + 1);
      if (!x.lo || !y.lo) return UNKNOWN;
      return (ivl){ts_min(a, x.lo, y.lo), ts_max(a, x.hi, y.hi)};
    }
    return UNKNOWN;
  case TS_EXPR_CAST: {
    ts_dtype from = e->u.op.a->dtype;
    /* Widening integer casts preserve order. */
    if (!is_index_int(from) || from.bits > e->dtype.bits ||
        (from.code == TS_DT_INT && e->dtype.code == TS_DT_UINT) ||
        (from.code == TS_DT_UINT && e->dtype.code == TS_DT_INT &&
         from.bits == e->dtype.bits))
      return UNKNOWN;
    x = sym(c, e->u.op.a, depth + 1);
    if (!x.lo) return UNKNOWN;
    return (ivl){ts_cast(a, e->dtype, x.lo), ts_cast(a, e->dtype, x.hi)};
  }
  default: return UNKNOWN;
  }
}

/* ========================================================================
 * Accumulating accesses
 * ======================================================================== */

static access *find_or_add(struct access_list *l, ts_buffer *b, bool *added) {
  for (int i = 0; i < l->n; i++)
    if (l->items[i].buffer == b) {
      *added = false;
      return &l->items[i];
    }
  if (l->n == l->cap) {
    int cap = l->cap ? l->cap * 2 : 8;
    access *p = ts_realloc(l->items, sizeof *p * (size_t)cap);
    if (!p) return NULL; /* out of memory (counted) */
    l->items = p;
    l->cap = cap;
  }
  access *acc = &l->items[l->n++];
  memset(acc, 0, sizeof *acc);
  acc->buffer = b;
  *added = true;
  return acc;
}

/* The union of two intervals of one dimension; false when no bound is
 * found (the caller then takes the whole dimension). */
static bool union_dim(infer_ctx *c, ivl *acc, ivl add) {
  ts_arena *a = c->a;
  int64_t dlo, dhi;
  ts_expr *elo = simp(c, ts_sub(a, add.lo, acc->lo));
  ts_expr *ehi = simp(c, ts_sub(a, add.hi, acc->hi));
  if (ts_expr_is_const_int(elo, &dlo) && ts_expr_is_const_int(ehi, &dhi)) {
    if (dlo < 0) acc->lo = add.lo;
    if (dhi > 0) acc->hi = add.hi;
    return true;
  }
  int64_t l1, h1, l2, h2, x, y;
  if (ts_expr_is_const_int(elo, &dlo) &&
      ts_expr_const_bound(add.hi, c->ranges, &x, &h1) &&
      ts_expr_const_bound(acc->hi, c->ranges, &y, &h2)) {
    if (dlo < 0) acc->lo = add.lo;
    acc->hi = ts_index(a, h1 > h2 ? h1 : h2);
    return true;
  }
  if (!ts_expr_const_bound(add.lo, c->ranges, &l1, &x) ||
      !ts_expr_const_bound(acc->lo, c->ranges, &l2, &x) ||
      !ts_expr_const_bound(add.hi, c->ranges, &x, &h1) ||
      !ts_expr_const_bound(acc->hi, c->ranges, &x, &h2))
    return false;
  acc->lo = ts_index(a, l1 < l2 ? l1 : l2);
  acc->hi = ts_index(a, h1 > h2 ? h1 : h2);
  return true;
}

/* Records an access of b over the given per-dimension intervals. */
static void record(infer_ctx *c, bool write, ts_buffer *b, const ivl *dims,
                   int n) {
  if (!b || ts_node_map_get(c->locals, b)) return;
  bool added;
  access *acc = find_or_add(write ? &c->writes : &c->reads, b, &added);
  if (!acc) return;
  for (int d = 0; d < b->ndim; d++) {
    ivl v = d < n && n == b->ndim ? dims[d] : UNKNOWN;
    if (v.lo) {
      v.lo = simp(c, ts_cast(c->a, TS_INDEX, v.lo));
      v.hi = simp(c, ts_cast(c->a, TS_INDEX, v.hi));
    }
    if (added) {
      acc->full[d] = !v.lo;
      acc->dims[d] = v;
    } else if (!acc->full[d]) {
      if (!v.lo || !union_dim(c, &acc->dims[d], v)) acc->full[d] = true;
    }
  }
}

static void record_indices(infer_ctx *c, bool write, ts_buffer *b,
                           ts_expr *const *indices, int n) {
  ivl dims[TS_MAX_DIMS];
  int m = n < TS_MAX_DIMS ? n : TS_MAX_DIMS;
  for (int i = 0; i < m; i++) dims[i] = sym(c, indices[i], 0);
  record(c, write, b, dims, n);
}

/* ========================================================================
 * Walking the block
 * ======================================================================== */

static void collect_expr(infer_ctx *c, ts_expr *e, int depth) {
  if (!e || depth > 10000) return;
  switch (e->kind) {
  case TS_EXPR_LOAD:
  case TS_EXPR_ADDRESS_OF:
    for (int i = 0; i < e->u.load.n_indices; i++)
      collect_expr(c, e->u.load.indices[i], depth + 1);
    record_indices(c, false, e->u.load.buffer, e->u.load.indices,
                   e->u.load.n_indices);
    return;
  case TS_EXPR_LET: {
    collect_expr(c, e->u.let.value, depth + 1);
    ivl *v = ts_arena_alloc(c->a, sizeof *v);
    if (v) { /* else out of memory: the arena is failed */
      *v = sym(c, e->u.let.value, 0);
      ts_node_map_put(c->relaxed, e->u.let.var, v);
    }
    collect_expr(c, e->u.let.body, depth + 1);
    return;
  }
  default: break;
  }
  if (ts_expr_is_binary((ts_expr_kind)e->kind)) {
    /* Walk the left spine of a chain (a + b + c ...) iteratively, so that
     * long chains do not deepen the recursion, in evaluation order. */
    int n = 0;
    for (ts_expr *x = e; ts_expr_is_binary((ts_expr_kind)x->kind);
         x = x->u.op.a)
      n++;
    ts_expr **spine = ts_malloc(sizeof *spine * (size_t)n);
    if (!spine) return; /* out of memory (counted) */
    int i = n;
    ts_expr *x = e;
    for (; ts_expr_is_binary((ts_expr_kind)x->kind); x = x->u.op.a)
      spine[--i] = x;
    collect_expr(c, x, depth + 1);
    for (i = 0; i < n; i++) collect_expr(c, spine[i]->u.op.b, depth + 1);
    free(spine);
    return;
  }
  int n = ts_expr_n_operands(e);
  for (int i = 0; i < n; i++) collect_expr(c, ts_expr_operand(e, i), depth + 1);
}

static void add_locals_in(infer_ctx *c, const ts_block *b) {
  for (int i = 0; i < b->n_allocs; i++)
    ts_node_map_put(c->locals, b->allocs[i], b->allocs[i]);
}

/* Regions of a nested block, mapped into the outer block's terms. */
static void collect_nested(infer_ctx *c, ts_stmt *s) {
  ts_block *b = s->u.realize.block;
  for (int i = 0; i < s->u.realize.n_values; i++)
    collect_expr(c, s->u.realize.values[i], 0);
  collect_expr(c, s->u.realize.predicate, 0);
  add_locals_in(c, b);
  ts_node_map *subst = ts_node_map_create();
  for (int i = 0; i < b->n_iters && i < s->u.realize.n_values; i++)
    ts_node_map_put(subst, b->iters[i].var, s->u.realize.values[i]);
  for (int pass = 0; pass < 2; pass++) {
    const ts_region *regions = pass == 0 ? b->reads : b->writes;
    int n = pass == 0 ? b->n_reads : b->n_writes;
    for (int r = 0; r < n; r++) {
      const ts_region *reg = &regions[r];
      ivl dims[TS_MAX_DIMS];
      int nd = reg->ndim < TS_MAX_DIMS ? reg->ndim : TS_MAX_DIMS;
      for (int d = 0; d < nd; d++) {
        ts_expr *min =
            ts_expr_substitute(c->a, reg->ranges[d].min, subst, NULL);
        ts_expr *ext =
            ts_expr_substitute(c->a, reg->ranges[d].extent, subst, NULL);
        ivl m = sym(c, min, 0), x = sym(c, ext, 0);
        if (!m.lo || !x.lo || !is_index_int(m.hi->dtype) ||
            !ts_dtype_eq(m.hi->dtype, x.hi->dtype)) {
          dims[d] = UNKNOWN;
          continue;
        }
        ts_expr *one = ts_int(c->a, x.hi->dtype, 1);
        dims[d] = (ivl){m.lo, ts_sub(c->a, ts_add(c->a, m.hi, x.hi), one)};
      }
      record(c, pass == 1, reg->buffer, dims, reg->ndim);
    }
  }
  ts_node_map_destroy(subst);
}

static void collect_stmt(infer_ctx *c, ts_stmt *s, int depth) {
  if (!s || depth > 1000) return;
  switch (s->kind) {
  case TS_STMT_FOR: {
    collect_expr(c, s->u.loop.min, 0);
    collect_expr(c, s->u.loop.extent, 0);
    ivl m = sym(c, s->u.loop.min, 0), x = sym(c, s->u.loop.extent, 0);
    ivl *v = ts_arena_alloc(c->a, sizeof *v);
    if (!v) return; /* out of memory: the arena is failed */
    *v = UNKNOWN;
    if (m.lo && x.lo && is_index_int(m.hi->dtype) &&
        ts_dtype_eq(m.hi->dtype, x.hi->dtype) &&
        ts_dtype_eq(m.hi->dtype, s->u.loop.var->dtype)) {
      ts_expr *one = ts_int(c->a, x.hi->dtype, 1);
      *v = (ivl){simp(c, m.lo),
                 simp(c, ts_sub(c->a, ts_add(c->a, m.hi, x.hi), one))};
    }
    ts_node_map_put(c->relaxed, s->u.loop.var, v);
    collect_stmt(c, s->u.loop.body, depth + 1);
    return;
  }
  case TS_STMT_BLOCK_REALIZE: collect_nested(c, s); return;
  case TS_STMT_STORE:
    for (int i = 0; i < s->u.store.n_indices; i++)
      collect_expr(c, s->u.store.indices[i], 0);
    collect_expr(c, s->u.store.value, 0);
    record_indices(c, true, s->u.store.buffer, s->u.store.indices,
                   s->u.store.n_indices);
    return;
  case TS_STMT_SEQ:
    for (int i = 0; i < s->u.seq.n; i++)
      collect_stmt(c, s->u.seq.items[i], depth + 1);
    return;
  case TS_STMT_IF:
    collect_expr(c, s->u.cond.cond, 0);
    collect_stmt(c, s->u.cond.then_s, depth + 1);
    collect_stmt(c, s->u.cond.else_s, depth + 1);
    return;
  case TS_STMT_EVALUATE: collect_expr(c, s->u.eval.value, 0); return;
  case TS_STMT_LET: {
    collect_expr(c, s->u.let.value, 0);
    ivl *v = ts_arena_alloc(c->a, sizeof *v);
    if (v) {
      *v = sym(c, s->u.let.value, 0);
      ts_node_map_put(c->relaxed, s->u.let.var, v);
    }
    collect_stmt(c, s->u.let.body, depth + 1);
    return;
  }
  case TS_STMT_ALLOCATE:
    ts_node_map_put(c->locals, s->u.alloc.buffer, s->u.alloc.buffer);
    collect_stmt(c, s->u.alloc.body, depth + 1);
    return;
  }
}

/* Converts an accumulated access to a region clipped to the buffer. */
static void to_region(infer_ctx *c, const access *acc, ts_region *out) {
  ts_arena *a = c->a;
  ts_buffer *b = acc->buffer;
  out->buffer = b;
  out->ndim = b->ndim;
  out->ranges = ts_arena_alloc(a, sizeof(ts_range) * (size_t)(b->ndim + 1));
  if (!out->ranges) {
    out->ndim = 0; /* out of memory: the arena is failed */
    return;
  }
  for (int d = 0; d < b->ndim; d++) {
    int64_t dim = b->shape[d];
    ts_range whole = {ts_index(a, 0), ts_index(a, dim)};
    out->ranges[d] = whole;
    if (acc->full[d]) continue;
    ts_expr *lo = acc->dims[d].lo, *hi = acc->dims[d].hi;
    ts_expr *ext = simp(c, ts_add(a, ts_sub(a, hi, lo), ts_index(a, 1)));
    int64_t e, l, h, x;
    if (!ts_expr_is_const_int(ext, &e)) {
      /* A symbolic extent: fall back to constant bounds. */
      if (!ts_expr_const_bound(lo, c->ranges, &l, &x) ||
          !ts_expr_const_bound(hi, c->ranges, &x, &h))
        continue;
      lo = ts_index(a, l);
      e = h - l + 1;
      ext = ts_index(a, e);
    }
    if (e >= dim || e <= 0) continue;
    if (ts_expr_is_const_int(lo, &l)) {
      int64_t from = l < 0 ? 0 : l, to = l + e > dim ? dim : l + e;
      if (from < to) {
        lo = ts_index(a, from);
        ext = ts_index(a, to - from);
      }
    }
    out->ranges[d] = (ts_range){lo, ext};
  }
}

static void infer_block(ts_arena *a, ts_block *b) {
  infer_ctx c;
  memset(&c, 0, sizeof c);
  c.a = a;
  c.relaxed = ts_node_map_create();
  c.locals = ts_node_map_create();
  c.ranges = ts_var_ranges_create();
  for (int i = 0; i < b->n_iters; i++) {
    int64_t min, ext;
    if (ts_expr_is_const_int(b->iters[i].dom.min, &min) &&
        ts_expr_is_const_int(b->iters[i].dom.extent, &ext) && ext > 0)
      ts_var_ranges_set(c.ranges, b->iters[i].var, min, ext);
  }
  add_locals_in(&c, b);
  collect_stmt(&c, b->init, 0);
  collect_stmt(&c, b->body, 0);
  ts_region *reads = ts_calloc((size_t)c.reads.n + 1, sizeof *reads);
  ts_region *writes = ts_calloc((size_t)c.writes.n + 1, sizeof *writes);
  if (reads && writes) { /* else out of memory (counted) */
    for (int i = 0; i < c.reads.n; i++)
      to_region(&c, &c.reads.items[i], &reads[i]);
    for (int i = 0; i < c.writes.n; i++)
      to_region(&c, &c.writes.items[i], &writes[i]);
    ts_block_set_regions(a, b, reads, c.reads.n, writes, c.writes.n);
  }
  free(reads);
  free(writes);
  free(c.reads.items);
  free(c.writes.items);
  ts_node_map_destroy(c.relaxed);
  ts_node_map_destroy(c.locals);
  ts_var_ranges_destroy(c.ranges);
}

void ts_block_infer_regions(ts_arena *a, ts_block *b) {
  if (a && b) infer_block(a, b);
}

typedef struct infer_walk {
  ts_arena *a;
} infer_walk;

static void infer_leave(void *ctx, ts_stmt *s) {
  infer_walk *w = ctx;
  if (s->kind == TS_STMT_BLOCK_REALIZE) infer_block(w->a, s->u.realize.block);
}

void ts_func_infer_regions(ts_func *f) {
  if (!f) return;
  infer_walk w = {f->arena};
  ts_visitor v = {NULL, infer_leave, NULL, &w};
  ts_stmt_walk(f->body, &v);
}

/* ========================================================================
 * FLOP count
 * ======================================================================== */

static double count_ops(const ts_expr *e, int depth) {
  if (!e || depth > 10000) return 0;
  double lanes = e->dtype.lanes;
  switch (e->kind) {
  case TS_EXPR_INT:
  case TS_EXPR_FLOAT:
  case TS_EXPR_VAR:
  case TS_EXPR_LOAD:
  case TS_EXPR_ADDRESS_OF:
  case TS_EXPR_RAMP: return 0;
  case TS_EXPR_ADD:
  case TS_EXPR_SUB:
  case TS_EXPR_MUL:
  case TS_EXPR_DIV:
  case TS_EXPR_MOD:
  case TS_EXPR_FLOORDIV:
  case TS_EXPR_FLOORMOD:
  case TS_EXPR_MIN:
  case TS_EXPR_MAX: {
    /* left chains (a + b + c ...) iteratively */
    double n = 0;
    while (e->kind >= TS_EXPR_ADD && e->kind <= TS_EXPR_MAX) {
      n += e->dtype.lanes + count_ops(e->u.op.b, depth + 1);
      e = e->u.op.a;
    }
    return n + count_ops(e, depth + 1);
  }
  case TS_EXPR_SELECT:
    return count_ops(e->u.op.b, depth + 1) + count_ops(e->u.op.c, depth + 1);
  case TS_EXPR_CAST: {
    /* A cast of an index value starts index arithmetic, not data. */
    ts_dtype from = e->u.op.a->dtype;
    if (from.code == TS_DT_INT && from.bits == 64) return 0;
    return count_ops(e->u.op.a, depth + 1);
  }
  case TS_EXPR_CALL: {
    const char *name = e->u.call.name;
    const ts_intrinsic_info *info = ts_intrinsic_lookup(name);
    if (info && info->rule == TS_INTRIN_SAME_AS_ARG1) /* if_then_else */
      return e->u.call.n_args == 3 ? count_ops(e->u.call.args[1], depth + 1) +
                                         count_ops(e->u.call.args[2], depth + 1)
                                   : 0;
    double n = 0;
    if (info) n = strcmp(name, "fma") == 0 ? 2 * lanes : lanes;
    for (int i = 0; i < e->u.call.n_args; i++)
      n += count_ops(e->u.call.args[i], depth + 1);
    return n;
  }
  case TS_EXPR_LET:
    return count_ops(e->u.let.value, depth + 1) +
           count_ops(e->u.let.body, depth + 1);
  default: {
    /* comparisons, logic, broadcast: only their operands may count */
    double n = 0;
    int k = ts_expr_n_operands(e);
    for (int i = 0; i < k; i++)
      n += count_ops(ts_expr_operand(e, i), depth + 1);
    return n;
  }
  }
}

static double flops_stmt(const ts_stmt *s, ts_var_ranges *r, int depth) {
  if (!s || depth > 1000) return 0;
  switch (s->kind) {
  case TS_STMT_FOR: {
    int64_t elo, ehi, mlo, mhi;
    double trips = 1; /* an unbounded extent counts once */
    bool ext_ok = ts_expr_const_bound(s->u.loop.extent, r, &elo, &ehi);
    if (ext_ok) trips = ehi > 0 ? (double)ehi : 0;
    if (ext_ok && ehi > 0 &&
        ts_expr_const_bound(s->u.loop.min, r, &mlo, &mhi) &&
        mhi - mlo < INT64_MAX / 4 && ehi < INT64_MAX / 4)
      ts_var_ranges_set(r, s->u.loop.var, mlo, mhi - mlo + ehi);
    return trips * flops_stmt(s->u.loop.body, r, depth + 1);
  }
  case TS_STMT_BLOCK_REALIZE: {
    const ts_block *b = s->u.realize.block;
    for (int i = 0; i < b->n_iters; i++) {
      int64_t min, ext;
      if (ts_expr_is_const_int(b->iters[i].dom.min, &min) &&
          ts_expr_is_const_int(b->iters[i].dom.extent, &ext) && ext > 0)
        ts_var_ranges_set(r, b->iters[i].var, min, ext);
    }
    return flops_stmt(b->body, r, depth + 1); /* init is not counted */
  }
  case TS_STMT_STORE: return count_ops(s->u.store.value, 0);
  case TS_STMT_EVALUATE: return count_ops(s->u.eval.value, 0);
  case TS_STMT_SEQ: {
    double n = 0;
    for (int i = 0; i < s->u.seq.n; i++)
      n += flops_stmt(s->u.seq.items[i], r, depth + 1);
    return n;
  }
  case TS_STMT_IF:
    return flops_stmt(s->u.cond.then_s, r, depth + 1) +
           flops_stmt(s->u.cond.else_s, r, depth + 1);
  case TS_STMT_LET: return flops_stmt(s->u.let.body, r, depth + 1);
  case TS_STMT_ALLOCATE: return flops_stmt(s->u.alloc.body, r, depth + 1);
  }
  return 0;
}

double ts_func_flops(const ts_func *f) {
  if (!f) return 0;
  ts_var_ranges *r = ts_var_ranges_create();
  double n = flops_stmt(f->body, r, 0);
  ts_var_ranges_destroy(r);
  return n;
}

/* ========================================================================
 * Navigation
 * ======================================================================== */

typedef struct stmt_list {
  ts_stmt **items;
  int n, cap;
} stmt_list;

/* Whether s was appended (out of memory, counted: dropped). */
static bool list_push(stmt_list *l, ts_stmt *s) {
  if (l->n == l->cap) {
    int cap = l->cap ? l->cap * 2 : 16;
    ts_stmt **p = ts_realloc(l->items, sizeof *p * (size_t)cap);
    if (!p) return false;
    l->items = p;
    l->cap = cap;
  }
  l->items[l->n++] = s;
  return true;
}

static bool blocks_enter(void *ctx, ts_stmt *s) {
  if (s->kind == TS_STMT_BLOCK_REALIZE) list_push(ctx, s);
  return true;
}

ts_stmt **ts_func_blocks(const ts_func *f, int *n) {
  stmt_list l = {0};
  ts_visitor v = {blocks_enter, NULL, NULL, &l};
  if (f) ts_stmt_walk(f->body, &v);
  *n = l.n;
  return l.items;
}

ts_stmt *ts_func_find_block(const ts_func *f, const char *name) {
  int n;
  ts_stmt **all = ts_func_blocks(f, &n);
  ts_stmt *r = NULL;
  for (int i = 0; i < n && !r; i++)
    if (strcmp(all[i]->u.realize.block->name, name) == 0) r = all[i];
  free(all);
  return r;
}

/* The children of s, in order (a realize: its block's init then body). */
static int children(const ts_stmt *s, ts_stmt *out[2], ts_stmt ***many) {
  *many = NULL;
  switch (s->kind) {
  case TS_STMT_FOR: out[0] = s->u.loop.body; return 1;
  case TS_STMT_BLOCK_REALIZE:
    out[0] = s->u.realize.block->init;
    out[1] = s->u.realize.block->body;
    return 2;
  case TS_STMT_SEQ: *many = s->u.seq.items; return s->u.seq.n;
  case TS_STMT_IF:
    out[0] = s->u.cond.then_s;
    out[1] = s->u.cond.else_s;
    return 2;
  case TS_STMT_LET: out[0] = s->u.let.body; return 1;
  case TS_STMT_ALLOCATE: out[0] = s->u.alloc.body; return 1;
  default: return 0;
  }
}

/* Depth-first search for target; on success the path from the root to the
 * target's parent is in `path`. */
static bool find_path(ts_stmt *s, const ts_stmt *target, stmt_list *path,
                      int depth) {
  if (!s || depth > 100000) return false;
  if (s == target) return true;
  ts_stmt *two[2], **many;
  int n = children(s, two, &many);
  bool pushed = list_push(path, s);
  for (int i = 0; i < n; i++)
    if (find_path(many ? many[i] : two[i], target, path, depth + 1))
      return true;
  if (pushed) path->n--;
  return false;
}

ts_stmt **ts_func_loops_above(const ts_func *f, const ts_stmt *stmt,
                              bool stop_at_block, int *n) {
  stmt_list path = {0};
  if (!f || !stmt || !find_path(f->body, stmt, &path, 0)) {
    free(path.items);
    *n = -1;
    return NULL;
  }
  int start = 0;
  if (stop_at_block)
    for (int i = 0; i < path.n; i++)
      if (path.items[i]->kind == TS_STMT_BLOCK_REALIZE) start = i + 1;
  ts_stmt **loops = ts_malloc(sizeof *loops * (size_t)(path.n + 1));
  if (!loops) { /* out of memory (counted) */
    free(path.items);
    *n = -1;
    return NULL;
  }
  int m = 0;
  for (int i = start; i < path.n; i++)
    if (path.items[i]->kind == TS_STMT_FOR) loops[m++] = path.items[i];
  free(path.items);
  *n = m;
  return loops;
}

ts_stmt *ts_func_parent(const ts_func *f, const ts_stmt *stmt) {
  stmt_list path = {0};
  ts_stmt *r = NULL;
  if (f && stmt && find_path(f->body, stmt, &path, 0) && path.n > 0)
    r = path.items[path.n - 1];
  free(path.items);
  return r;
}

typedef struct output_ctx {
  const ts_buffer *buffer;
  bool written;
} output_ctx;

static bool output_enter(void *ctx, ts_stmt *s) {
  output_ctx *c = ctx;
  if (c->written) return false;
  if (s->kind == TS_STMT_STORE && s->u.store.buffer == c->buffer)
    c->written = true;
  if (s->kind == TS_STMT_BLOCK_REALIZE) {
    const ts_block *b = s->u.realize.block;
    for (int i = 0; i < b->n_writes; i++)
      if (b->writes[i].buffer == c->buffer) c->written = true;
  }
  return !c->written;
}

bool ts_func_param_is_output(const ts_func *f, int i) {
  if (!f || i < 0 || i >= f->n_params) return false;
  output_ctx c = {f->params[i], false};
  ts_visitor v = {output_enter, NULL, NULL, &c};
  ts_stmt_walk(f->body, &v);
  return c.written;
}
