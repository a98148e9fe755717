/*
 * lower.c — the lowering passes that turn block-form TIR (unscheduled or
 * scheduled) into the flat loop program the LLVM emitters translate: lower
 * blocks, flatten buffers, simplify, vectorize, unroll (compaction of local
 * buffers: compact.c); and ts_lower, the
 * driver that runs them in order (with the loop partitioning of
 * codegen/partition.c after compaction, and ending with the GPU barrier
 * pass of lower_sync.c): all of them, or the prefix its options name (the
 * cost model's feature pipeline).
 */
#include "codegen/internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- small helpers ---- */

static bool verify_between_from_env(void) {
  const char *v = getenv("TS_VERIFY");
  return v && *v && strcmp(v, "0") != 0;
}

ts_lower_options ts_lower_defaults(void) {
  return (ts_lower_options){.verify_between = verify_between_from_env(),
                            .max_vector_lanes = 64,
                            .max_unroll = 256};
}

/* x with `lanes` lanes: broadcast when scalar. */
static ts_expr *widen(ts_arena *a, ts_expr *x, int lanes) {
  if (lanes <= 1 || ts_expr_dtype(x).lanes == lanes) return x;
  return ts_broadcast(a, x, lanes);
}

/* A binary operation that broadcasts a scalar operand to the other's lanes
 * and folds constants. */
static ts_expr *vbin(ts_arena *a, ts_expr_kind k, ts_expr *x, ts_expr *y) {
  int lx = ts_expr_dtype(x).lanes, ly = ts_expr_dtype(y).lanes;
  int lanes = lx > ly ? lx : ly;
  return ts_binary(a, k, widen(a, x, lanes), widen(a, y, lanes));
}

static ts_stmt *empty_stmt(ts_arena *a) { return ts_seq(a, NULL, 0); }

/* ========================================================================
 * Pass: lower blocks
 * ======================================================================== */

static ts_stmt *lower_realize(void *ctx, ts_arena *a, ts_stmt *s);

static ts_stmt *lower_blocks_stmt(ts_arena *a, ts_stmt *s) {
  ts_stmt_mutator m = {.pre = lower_realize};
  return ts_stmt_mutate(a, s, &m);
}

/* Replaces one block-realize by its body (pre-order: the outer block is
 * lowered first, which substitutes into the inner realizes' values). */
static ts_stmt *lower_realize(void *ctx, ts_arena *a, ts_stmt *s) {
  (void)ctx;
  if (ts_stmt_kind_of(s) != TS_STMT_BLOCK_REALIZE) return NULL;
  ts_block *b = ts_realize_block(s);
  ts_node_map *map = ts_node_map_create();
  for (int i = 0; i < ts_block_n_iters(b) && i < ts_realize_n_values(s); i++)
    ts_node_map_put(map, ts_block_iter_var(b, i), ts_realize_value(s, i));
  ts_stmt *body = ts_block_body(b)
                      ? ts_stmt_substitute(a, ts_block_body(b), map, NULL)
                      : empty_stmt(a);
  if (ts_block_init(b)) {
    ts_stmt *init = ts_stmt_substitute(a, ts_block_init(b), map, NULL);
    ts_expr *first = ts_bool(a, true);
    for (int i = 0; i < ts_block_n_iters(b) && i < ts_realize_n_values(s);
         i++) {
      if (ts_block_iter_kind(b, i) != TS_ITER_REDUCE) continue;
      ts_expr *lo =
          ts_expr_substitute(a, ts_block_iter_dom(b, i).min, map, NULL);
      first = ts_and(a, first, ts_eq(a, ts_realize_value(s, i), lo));
    }
    ts_stmt *items[2] = {ts_if(a, first, init, NULL), body};
    int64_t always;
    if (ts_expr_is_const_int(first, &always))
      items[0] = always ? init : empty_stmt(a);
    body = ts_seq(a, items, 2);
  }
  for (int i = ts_block_n_allocs(b) - 1; i >= 0; i--)
    body = ts_allocate(a, ts_block_alloc(b, i), body);
  ts_expr *pred = ts_realize_predicate(s);
  if (pred) {
    pred = ts_expr_substitute(a, pred, map, NULL);
    int64_t v;
    if (!ts_expr_is_const_int(pred, &v))
      body = ts_if(a, pred, body, NULL);
    else if (!v)
      body = empty_stmt(a);
  }
  ts_node_map_destroy(map);
  return lower_blocks_stmt(a, body);
}

int ts_lower_blocks(ts_func *f, ts_error *err) {
  (void)err;
  ts_func_set_body(f, lower_blocks_stmt(ts_func_arena(f), ts_func_body(f)));
  return TS_OK;
}

/* ========================================================================
 * Pass: flatten buffers
 * ======================================================================== */

typedef struct flatten_ctx {
  ts_node_map *buffers; /* old buffer -> 1-D buffer */
} flatten_ctx;

static ts_buffer *flat_buffer(flatten_ctx *c, ts_arena *a, ts_buffer *b) {
  ts_buffer *r = ts_node_map_get(c->buffers, b);
  if (r) return r;
  if (ts_buffer_ndim(b) == 1 && !ts_buffer_strides(b)) {
    ts_node_map_put(c->buffers, b, b);
    return b;
  }
  int64_t n = ts_buffer_storage_elems(b);
  if (n < 1) n = 1;
  r = ts_buffer_new(a, ts_buffer_name(b), ts_buffer_dtype(b), &n, 1);
  ts_buffer_set_scope(a, r, ts_buffer_scope(b));
  ts_buffer_set_align(r, ts_buffer_align(b));
  ts_node_map_put(c->buffers, b, r);
  return r;
}

/* sum_d index_d * stride_d, vector-aware. */
static ts_expr *flat_index(ts_arena *a, const ts_buffer *b,
                           ts_expr *const *indices, int n) {
  ts_expr *flat = ts_index(a, 0);
  for (int d = 0; d < n; d++) {
    int64_t stride = ts_buffer_stride(b, d);
    ts_expr *term = vbin(a, TS_EXPR_MUL, indices[d], ts_index(a, stride));
    flat = vbin(a, TS_EXPR_ADD, flat, term);
  }
  return flat;
}

static ts_expr *flatten_load(void *ctx, ts_arena *a, ts_expr *e) {
  flatten_ctx *c = ctx;
  ts_expr_kind k = ts_expr_kind_of(e);
  if (k != TS_EXPR_LOAD && k != TS_EXPR_ADDRESS_OF) return e;
  ts_buffer *b = ts_expr_buffer(e);
  ts_buffer *nb = flat_buffer(c, a, b);
  if (nb == b) return e;
  int n = ts_expr_n_operands(e);
  ts_expr *idx[TS_MAX_DIMS];
  for (int i = 0; i < n && i < TS_MAX_DIMS; i++) idx[i] = ts_expr_operand(e, i);
  ts_expr *flat = flat_index(a, b, idx, n);
  return k == TS_EXPR_LOAD ? ts_load(a, nb, &flat, 1)
                           : ts_address_of(a, nb, &flat, 1);
}

static ts_expr *flatten_expr(void *ctx, ts_arena *a, ts_expr *e) {
  return ts_expr_mutate(a, e, flatten_load, ctx);
}

static ts_stmt *flatten_post(void *ctx, ts_arena *a, ts_stmt *s) {
  flatten_ctx *c = ctx;
  if (ts_stmt_kind_of(s) == TS_STMT_STORE) {
    ts_buffer *b = ts_store_buffer(s);
    ts_buffer *nb = flat_buffer(c, a, b);
    if (nb == b) return s;
    int n = ts_store_n_indices(s);
    ts_expr *idx[TS_MAX_DIMS];
    for (int i = 0; i < n && i < TS_MAX_DIMS; i++)
      idx[i] = ts_store_index(s, i);
    ts_expr *flat = flat_index(a, b, idx, n);
    return ts_store(a, nb, &flat, 1, ts_store_value(s));
  }
  if (ts_stmt_kind_of(s) == TS_STMT_ALLOCATE) {
    ts_buffer *b = ts_allocate_buffer(s);
    ts_buffer *nb = flat_buffer(c, a, b);
    if (nb == b) return s;
    return ts_allocate(a, nb, ts_allocate_body(s));
  }
  return s;
}

int ts_lower_flatten(ts_func *f, ts_error *err) {
  (void)err;
  ts_arena *a = ts_func_arena(f);
  flatten_ctx c = {ts_node_map_create()};
  for (int i = 0; i < ts_func_n_params(f); i++)
    ts_func_set_param(f, i, flat_buffer(&c, a, ts_func_param(f, i)));
  ts_stmt_mutator m = {.post = flatten_post, .expr = flatten_expr, .ctx = &c};
  ts_func_set_body(f, ts_stmt_mutate(a, ts_func_body(f), &m));
  ts_node_map_destroy(c.buffers);
  return TS_OK;
}

/* ========================================================================
 * Pass: simplify
 * ======================================================================== */

typedef struct simplify_ctx {
  ts_var_ranges *ranges;
} simplify_ctx;

static ts_stmt *simplify_pre(void *ctx, ts_arena *a, ts_stmt *s) {
  simplify_ctx *c = ctx;
  (void)a;
  if (ts_stmt_kind_of(s) == TS_STMT_FOR) {
    int64_t mn, ex;
    if (ts_expr_is_const_int(ts_for_min(s), &mn) &&
        ts_expr_is_const_int(ts_for_extent(s), &ex) && ex > 0)
      ts_var_ranges_set(c->ranges, ts_for_var(s), mn, ex);
  }
  return NULL;
}

static ts_expr *simplify_expr(void *ctx, ts_arena *a, ts_expr *e) {
  simplify_ctx *c = ctx;
  return ts_simplify(a, e, c->ranges);
}

/* Drops statements that do nothing: empty sequences, ifs with a constant
 * condition, loops of extent 0; collapses one-element sequences. */
static ts_stmt *simplify_post(void *ctx, ts_arena *a, ts_stmt *s) {
  (void)ctx;
  int64_t v;
  switch (ts_stmt_kind_of(s)) {
  case TS_STMT_IF:
    if (ts_expr_is_const_int(ts_if_cond(s), &v))
      return v ? ts_if_then(s)
               : (ts_if_else(s) ? ts_if_else(s) : empty_stmt(a));
    return s;
  case TS_STMT_FOR:
    if (ts_expr_is_const_int(ts_for_extent(s), &v) && v <= 0)
      return empty_stmt(a);
    return s;
  case TS_STMT_SEQ: {
    int n = ts_seq_n(s), kept = 0;
    bool changed = false;
    ts_stmt **items = ts_arena_alloc(a, sizeof *items * (size_t)(n ? n : 1));
    if (!items) return s; /* out of memory: ts_lower stops after this step */
    for (int i = 0; i < n; i++) {
      ts_stmt *it = ts_seq_item(s, i);
      if (ts_stmt_kind_of(it) == TS_STMT_SEQ && ts_seq_n(it) == 0) {
        changed = true;
        continue;
      }
      items[kept++] = it;
    }
    ts_stmt *r = s;
    if (kept == 1)
      r = items[0];
    else if (changed)
      r = ts_seq(a, items, kept);
    return r;
  }
  default: return s;
  }
}

int ts_lower_simplify(ts_func *f, ts_error *err) {
  (void)err;
  simplify_ctx c = {ts_var_ranges_create()};
  ts_stmt_mutator m = {.pre = simplify_pre,
                       .post = simplify_post,
                       .expr = simplify_expr,
                       .ctx = &c};
  ts_func_set_body(f, ts_stmt_mutate(ts_func_arena(f), ts_func_body(f), &m));
  ts_var_ranges_destroy(c.ranges);
  return TS_OK;
}

/* ========================================================================
 * Pass: vectorize
 * ======================================================================== */

typedef struct vec_ctx {
  ts_arena *a;
  ts_expr *var;        /* the loop variable being vectorized */
  ts_expr *lane_index; /* ramp(min, 1, lanes) */
  int lanes;
  const char *reason; /* set when the body cannot be vectorized */
  ts_node_map *lets;  /* let var -> its vector replacement */
} vec_ctx;

static ts_expr *vec_expr(vec_ctx *c, ts_expr *e);

static bool is_vector(const ts_expr *e) { return ts_expr_dtype(e).lanes > 1; }

/* For an integer expression sum(c_i t_i) + k0: *g = gcd(cap, c_i...) and
 * *k0 (terms other than constants, sums, differences, products by
 * constants and remainders by constants count with coefficient 1; a
 * remainder by m, x - m floor(x / m), counts as x's terms and one of
 * coefficient m). */
static bool coef_gcd(const ts_expr *e, int64_t cap, int64_t *g, int64_t *k0) {
  int64_t v;
  *g = cap;
  *k0 = 0;
  if (ts_expr_is_const_int(e, &v)) {
    *k0 = v;
    return true;
  }
  ts_expr_kind k = ts_expr_kind_of(e);
  int64_t g1, g2, c1, c2;
  if (k == TS_EXPR_ADD || k == TS_EXPR_SUB) {
    if (!coef_gcd(ts_expr_operand(e, 0), cap, &g1, &c1) ||
        !coef_gcd(ts_expr_operand(e, 1), g1, &g2, &c2))
      return false;
    *g = g2;
    *k0 = k == TS_EXPR_ADD ? c1 + c2 : c1 - c2;
    return true;
  }
  /* floormod(x, m) = x - m floor(x / m): x's terms and one of
   * coefficient m (floormod(4 j, 16) is a multiple of 4) */
  if (k == TS_EXPR_FLOORMOD &&
      ts_expr_is_const_int(ts_expr_operand(e, 1), &v) && v > 0 &&
      coef_gcd(ts_expr_operand(e, 0), cap, &g1, &c1)) {
    *g = ts_gcd64(g1, v);
    *k0 = c1;
    return true;
  }
  if (k == TS_EXPR_MUL) {
    for (int side = 0; side < 2; side++)
      if (ts_expr_is_const_int(ts_expr_operand(e, side), &v) &&
          coef_gcd(ts_expr_operand(e, 1 - side), cap, &g1, &c1)) {
        /* gcd(cap, v g1) divides gcd(cap, v c_i) for every term: a common
         * divisor of the coefficients; the constant v c1 */
        *g = ts_gcd64(cap, v * g1);
        *k0 = v * c1;
        return true;
      }
  }
  *g = 1;
  return true;
}

static ts_expr *vec_expr(vec_ctx *c, ts_expr *e) {
  if (c->reason) return e;
  ts_arena *a = c->a;
  ts_expr_kind k = ts_expr_kind_of(e);
  if (is_vector(e)) {
    c->reason = "the body already holds vector expressions";
    return e;
  }
  switch (k) {
  case TS_EXPR_INT:
  case TS_EXPR_FLOAT: return e;
  case TS_EXPR_VAR: {
    if (e == c->var) return c->lane_index;
    ts_expr *r = ts_node_map_get(c->lets, e);
    return r ? r : e;
  }
  case TS_EXPR_LET: {
    ts_expr *value = vec_expr(c, ts_expr_operand(e, 0));
    if (is_vector(value)) {
      ts_expr *nv =
          ts_var(a, ts_var_name(ts_expr_let_var(e)), ts_expr_dtype(value));
      ts_node_map_put(c->lets, ts_expr_let_var(e), nv);
      ts_expr *body = vec_expr(c, ts_expr_operand(e, 1));
      return ts_let(a, nv, value, body);
    }
    ts_expr *body = vec_expr(c, ts_expr_operand(e, 1));
    return ts_let(a, ts_expr_let_var(e), value, body);
  }
  case TS_EXPR_RAMP:
  case TS_EXPR_BROADCAST: c->reason = "nested vector expressions"; return e;
  case TS_EXPR_ADDRESS_OF: {
    for (int i = 0; i < ts_expr_n_operands(e); i++)
      if (is_vector(vec_expr(c, ts_expr_operand(e, i))))
        c->reason = "an address depends on the vectorized loop";
    return e;
  }
  case TS_EXPR_CALL: {
    int n = ts_expr_n_operands(e);
    const ts_intrinsic_info *info = ts_intrinsic_lookup(ts_expr_call_name(e));
    if (!info) {
      for (int i = 0; i < n; i++)
        if (is_vector(vec_expr(c, ts_expr_operand(e, i))))
          c->reason = "a target intrinsic call depends on the vectorized loop";
      return e;
    }
    ts_expr **ops = ts_arena_alloc(a, sizeof *ops * (size_t)(n ? n : 1));
    if (!ops) return e; /* out of memory: ts_lower stops after this step */
    int lanes = 1;
    for (int i = 0; i < n; i++) {
      ops[i] = vec_expr(c, ts_expr_operand(e, i));
      if (ts_expr_dtype(ops[i]).lanes > lanes)
        lanes = ts_expr_dtype(ops[i]).lanes;
    }
    ts_expr *r = e;
    if (lanes > 1) {
      if (!strcmp(ts_expr_call_name(e), "if_then_else") && is_vector(ops[0])) {
        c->reason = "a guarded (if_then_else) access whose guard varies "
                    "across the vectorized loop";
      } else {
        for (int i = 0; i < n; i++) ops[i] = widen(a, ops[i], lanes);
        r = ts_call(a, ts_dtype_with_lanes(ts_expr_dtype(e), lanes),
                    ts_expr_call_name(e), ops, n);
      }
    }
    return r;
  }
  case TS_EXPR_LOAD: {
    ts_expr *idx = vec_expr(c, ts_expr_operand(e, 0));
    if (ts_expr_n_operands(e) != 1) {
      c->reason = "buffers are not flattened";
      return e;
    }
    return ts_load(a, ts_expr_buffer(e), &idx, 1);
  }
  case TS_EXPR_NOT: {
    ts_expr *x = vec_expr(c, ts_expr_operand(e, 0));
    return x == ts_expr_operand(e, 0) ? e : ts_not(a, x);
  }
  case TS_EXPR_CAST: {
    ts_expr *x = vec_expr(c, ts_expr_operand(e, 0));
    if (x == ts_expr_operand(e, 0)) return e;
    return ts_cast(
        a, ts_dtype_with_lanes(ts_expr_dtype(e), ts_expr_dtype(x).lanes), x);
  }
  case TS_EXPR_SELECT: {
    ts_expr *cnd = vec_expr(c, ts_expr_operand(e, 0));
    ts_expr *t = vec_expr(c, ts_expr_operand(e, 1));
    ts_expr *f = vec_expr(c, ts_expr_operand(e, 2));
    int lanes = ts_expr_dtype(cnd).lanes;
    if (ts_expr_dtype(t).lanes > lanes) lanes = ts_expr_dtype(t).lanes;
    if (ts_expr_dtype(f).lanes > lanes) lanes = ts_expr_dtype(f).lanes;
    if (lanes == 1) return e;
    return ts_select(a, widen(a, cnd, lanes), widen(a, t, lanes),
                     widen(a, f, lanes));
  }
  default: break;
  }
  /* binary */
  ts_expr *x = vec_expr(c, ts_expr_operand(e, 0));
  ts_expr *y = vec_expr(c, ts_expr_operand(e, 1));
  if (x == ts_expr_operand(e, 0) && y == ts_expr_operand(e, 1)) return e;
  /* a broadcast operand of integer arithmetic with a ramp or another
   * broadcast is its scalar (the rules below then keep ramps) */
  bool arith = k == TS_EXPR_ADD || k == TS_EXPR_SUB || k == TS_EXPR_MUL ||
               k == TS_EXPR_FLOORDIV || k == TS_EXPR_FLOORMOD;
  bool xb = ts_expr_kind_of(x) == TS_EXPR_BROADCAST,
       yb = ts_expr_kind_of(y) == TS_EXPR_BROADCAST;
  if (arith && ts_dtype_is_int(ts_expr_dtype(x)) && (xb || yb) &&
      (xb || !is_vector(x)) && (yb || !is_vector(y)))
    return ts_broadcast(a,
                        ts_binary(a, k, xb ? ts_expr_operand(x, 0) : x,
                                  yb ? ts_expr_operand(y, 0) : y),
                        c->lanes);
  if (arith && ts_expr_kind_of(x) == TS_EXPR_BROADCAST &&
      ts_expr_kind_of(y) == TS_EXPR_RAMP)
    x = ts_expr_operand(x, 0);
  if (arith && ts_expr_kind_of(y) == TS_EXPR_BROADCAST &&
      ts_expr_kind_of(x) == TS_EXPR_RAMP)
    y = ts_expr_operand(y, 0);
  /* base + ramp and ramp * const stay ramps (contiguous accesses). */
  if (k == TS_EXPR_ADD || k == TS_EXPR_SUB) {
    if (ts_expr_kind_of(x) == TS_EXPR_RAMP && !is_vector(y))
      return ts_ramp(a, ts_binary(a, k, ts_expr_operand(x, 0), y),
                     ts_expr_operand(x, 1), c->lanes);
    if (k == TS_EXPR_ADD && ts_expr_kind_of(y) == TS_EXPR_RAMP && !is_vector(x))
      return ts_ramp(a, ts_add(a, x, ts_expr_operand(y, 0)),
                     ts_expr_operand(y, 1), c->lanes);
    if (ts_expr_kind_of(x) == TS_EXPR_RAMP &&
        ts_expr_kind_of(y) == TS_EXPR_RAMP)
      return ts_ramp(
          a, ts_binary(a, k, ts_expr_operand(x, 0), ts_expr_operand(y, 0)),
          ts_binary(a, k, ts_expr_operand(x, 1), ts_expr_operand(y, 1)),
          c->lanes);
  }
  /* floordiv/floormod of a ramp by a constant c when no lane crosses a
   * multiple of c whatever the other vars: the base is g q + k0 with g
   * dividing c, so floormod(base, c) is at most c - g + k0 mod g and the
   * lanes stay below the next multiple when k0 mod g + stride (lanes - 1)
   * < g. A broadcast quotient and a ramp remainder (a packed layout's
   * column tile: floordiv(ramp(16 j, 1, 16), 32)) */
  int64_t cd, st, g, k0;
  if ((k == TS_EXPR_FLOORDIV || k == TS_EXPR_FLOORMOD) &&
      ts_expr_kind_of(x) == TS_EXPR_RAMP && !is_vector(y) &&
      ts_expr_is_const_int(y, &cd) && cd > 0 &&
      ts_expr_is_const_int(ts_expr_operand(x, 1), &st) && st >= 0 &&
      coef_gcd(ts_expr_operand(x, 0), cd, &g, &k0) && cd % g == 0 &&
      (k0 % g + g) % g + st * (c->lanes - 1) < g) {
    ts_expr *base = ts_expr_operand(x, 0);
    if (k == TS_EXPR_FLOORMOD)
      return ts_ramp(a, ts_floormod(a, base, y), ts_expr_operand(x, 1),
                     c->lanes);
    return ts_broadcast(a, ts_floordiv(a, base, y), c->lanes);
  }
  if (k == TS_EXPR_MUL) {
    if (ts_expr_kind_of(x) == TS_EXPR_RAMP && !is_vector(y))
      return ts_ramp(a, ts_mul(a, ts_expr_operand(x, 0), y),
                     ts_mul(a, ts_expr_operand(x, 1), y), c->lanes);
    if (ts_expr_kind_of(y) == TS_EXPR_RAMP && !is_vector(x))
      return ts_ramp(a, ts_mul(a, x, ts_expr_operand(y, 0)),
                     ts_mul(a, x, ts_expr_operand(y, 1)), c->lanes);
  }
  return vbin(a, k, x, y);
}

static ts_stmt *vec_stmt(vec_ctx *c, ts_stmt *s) {
  if (c->reason) return s;
  ts_arena *a = c->a;
  switch (ts_stmt_kind_of(s)) {
  case TS_STMT_STORE: {
    if (ts_store_n_indices(s) != 1) {
      c->reason = "buffers are not flattened";
      return s;
    }
    ts_expr *idx = vec_expr(c, ts_store_index(s, 0));
    ts_expr *val = vec_expr(c, ts_store_value(s));
    if (c->reason) return s;
    if (!is_vector(idx)) {
      c->reason = is_vector(val)
                      ? "the loop carries a reduction (every lane stores to "
                        "the same element)"
                      : "a store's index does not depend on the vectorized "
                        "loop (a reduction init or a repeated store)";
      return s;
    }
    return ts_store(a, ts_store_buffer(s), &idx, 1, widen(a, val, c->lanes));
  }
  case TS_STMT_SEQ: {
    int n = ts_seq_n(s);
    ts_stmt **items = ts_arena_alloc(a, sizeof *items * (size_t)(n ? n : 1));
    if (!items) return s; /* out of memory: ts_lower stops after this step */
    for (int i = 0; i < n; i++) items[i] = vec_stmt(c, ts_seq_item(s, i));
    ts_stmt *r = ts_seq(a, items, n);
    return r;
  }
  case TS_STMT_IF: {
    ts_expr *cond = vec_expr(c, ts_if_cond(s));
    if (is_vector(cond) && ts_if_else(s)) {
      c->reason =
          "an if/else whose condition varies across the vectorized loop";
      return s;
    }
    /* A vector condition without else becomes masked vector code (loop tails
     * of imperfect splits): the emitter masks the loads and stores under it. */
    ts_stmt *t = vec_stmt(c, ts_if_then(s));
    ts_stmt *e = ts_if_else(s) ? vec_stmt(c, ts_if_else(s)) : NULL;
    return ts_if(a, cond, t, e);
  }
  case TS_STMT_LET: {
    ts_expr *value = vec_expr(c, ts_let_stmt_value(s));
    ts_expr *var = ts_let_stmt_var(s);
    if (is_vector(value)) {
      ts_expr *nv = ts_var(a, ts_var_name(var), ts_expr_dtype(value));
      ts_node_map_put(c->lets, var, nv);
      var = nv;
    }
    return ts_let_stmt(a, var, value, vec_stmt(c, ts_let_stmt_body(s)));
  }
  case TS_STMT_EVALUATE: {
    ts_expr *v = vec_expr(c, ts_evaluate_value(s));
    if (is_vector(v)) c->reason = "an evaluated call depends on the loop";
    return s;
  }
  case TS_STMT_FOR: c->reason = "the body holds a loop"; return s;
  case TS_STMT_ALLOCATE: c->reason = "the body allocates a buffer"; return s;
  case TS_STMT_BLOCK_REALIZE: c->reason = "blocks are not lowered"; return s;
  default: c->reason = "unsupported statement"; return s;
  }
}

typedef struct vectorize_pass {
  int max_lanes;
} vectorize_pass;

static ts_stmt *vectorize_post(void *ctx, ts_arena *a, ts_stmt *s) {
  vectorize_pass *p = ctx;
  if (ts_stmt_kind_of(s) != TS_STMT_FOR ||
      ts_for_kind_of(s) != TS_FOR_VECTORIZED)
    return s;
  int64_t mn, ex;
  const char *reason = NULL;
  if (!ts_expr_is_const_int(ts_for_min(s), &mn) ||
      !ts_expr_is_const_int(ts_for_extent(s), &ex))
    reason = "the loop bounds are not constant";
  else if (ex < 2)
    reason = NULL;
  else if (ex > p->max_lanes)
    reason = "the extent is larger than the widest vector";
  if (!reason && ex >= 2) {
    /* An extent that is not a power of two runs as power-of-two pieces,
     * largest first (24 lanes: 16 then 8; 7: 4, 2 and one scalar lane).
     * LLVM widens a vector of another length to the next power of two,
     * and on AVX-512 the phis of such accumulators (<24 x float> widened
     * to <32 x float>) went through the stack: a matmul with N = 24 ran at
     * a tenth of N = 16's speed. The lanes of a vectorized loop are
     * independent, so running the pieces one after the other is one of
     * the orders the vector form allows. */
    ts_stmt *pieces[64];
    int np = 0;
    for (int64_t off = 0; off < ex && !reason;) {
      int64_t p2 = 1;
      while (p2 * 2 <= ex - off) p2 *= 2;
      if (p2 == 1) {
        /* one lane left: the body with the variable at that index */
        ts_node_map *vars = ts_node_map_create();
        ts_node_map_put(vars, ts_for_var(s), ts_index(a, mn + off));
        pieces[np++] = ts_stmt_substitute(a, ts_for_body(s), vars, NULL);
        ts_node_map_destroy(vars);
      } else {
        vec_ctx c = {.a = a,
                     .var = ts_for_var(s),
                     .lanes = (int)p2,
                     .lets = ts_node_map_create()};
        c.lane_index =
            ts_ramp(a, ts_index(a, mn + off), ts_index(a, 1), (int)p2);
        pieces[np++] = vec_stmt(&c, ts_for_body(s));
        ts_node_map_destroy(c.lets);
        reason = c.reason;
      }
      off += p2;
    }
    if (!reason) return np == 1 ? pieces[0] : ts_seq(a, pieces, np);
  }
  /* Scalar fallback: a serial loop that says why. */
  ts_stmt *r = ts_for(a, ts_for_var(s), ts_for_min(s), ts_for_extent(s),
                      TS_FOR_SERIAL, NULL, ts_for_body(s));
  for (int i = 0; i < ts_for_n_annotations(s); i++)
    ts_for_annotate(a, r, *ts_for_annotation(s, i));
  if (reason)
    ts_for_annotate(a, r, ts_ann_string(TS_ANN_VECTORIZE_FALLBACK, reason));
  return r;
}

int ts_lower_vectorize(ts_func *f, int max_lanes, ts_error *err) {
  (void)err;
  vectorize_pass p = {max_lanes > 1 ? max_lanes : 64};
  ts_stmt_mutator m = {.post = vectorize_post, .ctx = &p};
  ts_func_set_body(f, ts_stmt_mutate(ts_func_arena(f), ts_func_body(f), &m));
  return TS_OK;
}

/* ========================================================================
 * Pass: unroll
 * ======================================================================== */

/* Statements executed by one run of s (leaves counted), capped at cap+1;
 * -1 when a loop inside has a non-constant extent. */
static int64_t step_count(ts_stmt *s, int64_t cap) {
  switch (ts_stmt_kind_of(s)) {
  case TS_STMT_FOR: {
    int64_t ex;
    if (!ts_expr_is_const_int(ts_for_extent(s), &ex)) return -1;
    int64_t inner = step_count(ts_for_body(s), cap);
    if (inner < 0) return -1;
    if (ex > 0 && inner > (cap + 1) / ex + 1) return cap + 1;
    return ex * inner;
  }
  case TS_STMT_SEQ: {
    int64_t total = 0;
    for (int i = 0; i < ts_seq_n(s); i++) {
      int64_t n = step_count(ts_seq_item(s, i), cap);
      if (n < 0) return -1;
      total += n;
      if (total > cap) return cap + 1;
    }
    return total;
  }
  case TS_STMT_IF: {
    int64_t t = step_count(ts_if_then(s), cap);
    int64_t e = ts_if_else(s) ? step_count(ts_if_else(s), cap) : 0;
    if (t < 0 || e < 0) return -1;
    return 1 + (t > e ? t : e);
  }
  case TS_STMT_LET: {
    int64_t n = step_count(ts_let_stmt_body(s), cap);
    return n < 0 ? -1 : n + 1;
  }
  case TS_STMT_ALLOCATE: return step_count(ts_allocate_body(s), cap);
  case TS_STMT_BLOCK_REALIZE: return -1;
  default: return 1;
  }
}

typedef struct unroll_ctx {
  int max_unroll;
  int64_t auto_max_step; /* from the innermost enclosing annotated loop */
  bool explicit_unroll;
  int64_t saved_step[64];
  bool saved_explicit[64];
  int depth;
} unroll_ctx;

ts_stmt *lower_unroll_loop(ts_arena *a, ts_stmt *s, int64_t mn, int64_t ex) {
  ts_stmt **copies = ts_arena_alloc(a, sizeof *copies * (size_t)(ex ? ex : 1));
  if (!copies) return s; /* out of memory: ts_lower stops after this step */
  for (int64_t i = 0; i < ex; i++) {
    ts_node_map *remap = ts_node_map_create();
    ts_node_map_put(remap, ts_for_var(s), ts_index(a, mn + i));
    copies[i] = ts_stmt_copy(a, ts_for_body(s), remap);
    ts_node_map_destroy(remap);
  }
  ts_stmt *r = ts_seq(a, copies, (int)ex);
  return r;
}

static ts_stmt *unroll_pre(void *ctx, ts_arena *a, ts_stmt *s) {
  unroll_ctx *c = ctx;
  (void)a;
  if (ts_stmt_kind_of(s) != TS_STMT_FOR) return NULL;
  if (c->depth < 64) {
    c->saved_step[c->depth] = c->auto_max_step;
    c->saved_explicit[c->depth] = c->explicit_unroll;
  }
  c->depth++;
  const ts_annotation *ann =
      ts_for_find_annotation(s, TS_ANN_AUTO_UNROLL_MAX_STEP);
  if (ann && ann->kind == TS_ANN_INT) {
    c->auto_max_step = ann->i;
    const ts_annotation *ex = ts_for_find_annotation(s, TS_ANN_UNROLL_EXPLICIT);
    c->explicit_unroll = !ex || ex->kind != TS_ANN_INT || ex->i != 0;
  }
  return NULL;
}

static ts_stmt *unroll_post(void *ctx, ts_arena *a, ts_stmt *s) {
  unroll_ctx *c = ctx;
  if (ts_stmt_kind_of(s) != TS_STMT_FOR) return s;
  c->depth--;
  if (c->depth < 64) {
    c->auto_max_step = c->saved_step[c->depth];
    c->explicit_unroll = c->saved_explicit[c->depth];
  }
  int64_t mn, ex;
  if (!ts_expr_is_const_int(ts_for_min(s), &mn) ||
      !ts_expr_is_const_int(ts_for_extent(s), &ex))
    return s;
  ts_for_kind kind = ts_for_kind_of(s);
  if (kind == TS_FOR_UNROLLED && ex <= c->max_unroll)
    return lower_unroll_loop(a, s, mn, ex);
  /* Auto-unroll applies to serial loops strictly inside the annotated one. */
  bool annotated =
      ts_for_find_annotation(s, TS_ANN_AUTO_UNROLL_MAX_STEP) != NULL;
  const ts_annotation *no = ts_for_find_annotation(s, TS_ANN_NO_UNROLL);
  bool kept = no && no->kind == TS_ANN_INT && no->i;
  if (kind == TS_FOR_SERIAL && !annotated && !kept && c->auto_max_step > 0) {
    int64_t steps = step_count(s, c->auto_max_step);
    if (steps >= 0 && steps <= c->auto_max_step) {
      if (c->explicit_unroll) return lower_unroll_loop(a, s, mn, ex);
      ts_stmt *r = ts_for(a, ts_for_var(s), ts_for_min(s), ts_for_extent(s),
                          TS_FOR_SERIAL, NULL, ts_for_body(s));
      for (int i = 0; i < ts_for_n_annotations(s); i++)
        ts_for_annotate(a, r, *ts_for_annotation(s, i));
      ts_for_annotate(a, r, ts_ann_int(TS_ANN_LLVM_UNROLL_FULL, 1));
      return r;
    }
  }
  return s;
}

int ts_lower_unroll(ts_func *f, int max_unroll, ts_error *err) {
  (void)err;
  unroll_ctx c = {.max_unroll = max_unroll > 0 ? max_unroll : 256};
  ts_stmt_mutator m = {.pre = unroll_pre, .post = unroll_post, .ctx = &c};
  ts_func_set_body(f, ts_stmt_mutate(ts_func_arena(f), ts_func_body(f), &m));
  return TS_OK;
}

/* ========================================================================
 * The pipeline
 * ======================================================================== */

static int check(ts_func *f, const ts_lower_options *o, const char *pass,
                 ts_error *err) {
  if (!o->verify_between) return TS_OK;
  ts_error verr;
  ts_error_clear(&verr);
  if (ts_func_verify(f, &verr) != TS_OK)
    return TS_ERR(err, TS_EINTERNAL,
                  "lowering pass '%s' produced ill-formed IR: %s", pass,
                  verr.msg);
  return TS_OK;
}

/* The name of a step in verification messages; NULL for the range
 * simplification, which is not checked on its own (compaction follows). */
static const char *const step_names[TS_LOWER_N_STEPS] = {
    [TS_LOWER_STEP_BLOCKS] = "lower_blocks",
    [TS_LOWER_STEP_COMPACT] = "compact",
    [TS_LOWER_STEP_PREFETCH] = "prefetch",
    [TS_LOWER_STEP_PARTITION] = "partition",
    [TS_LOWER_STEP_UNROLL] = "unroll",
    [TS_LOWER_STEP_FLATTEN] = "flatten",
    [TS_LOWER_STEP_SIMPLIFY] = "simplify",
    [TS_LOWER_STEP_VECTORIZE] = "vectorize",
    [TS_LOWER_STEP_VECTOR_SIMPLIFY] = "simplify",
    [TS_LOWER_STEP_PROMOTE] = "promote",
    [TS_LOWER_STEP_PROMOTE_SIMPLIFY] = "simplify",
    [TS_LOWER_STEP_SYNC] = "sync",
};

/* Runs one step of the pipeline on f. */
static int run_step(ts_func *f, ts_lower_step step, const ts_lower_options *o,
                    ts_error *err) {
  switch (step) {
  case TS_LOWER_STEP_BLOCKS: return ts_lower_blocks(f, err);
  case TS_LOWER_STEP_RANGE_SIMPLIFY:
  case TS_LOWER_STEP_SIMPLIFY:
  case TS_LOWER_STEP_VECTOR_SIMPLIFY:
  case TS_LOWER_STEP_PROMOTE_SIMPLIFY: return ts_lower_simplify(f, err);
  case TS_LOWER_STEP_COMPACT: return ts_lower_compact(f, err);
  case TS_LOWER_STEP_PREFETCH: return ts_lower_prefetch(f, err);
  case TS_LOWER_STEP_PARTITION: return ts_lower_partition(f, err);
  case TS_LOWER_STEP_UNROLL:
    /* then the branches each unrolled copy's surroundings decide (a
     * ragged tile's rows past the end, in its tail copy) */
    return ts_lower_unroll(f, o->max_unroll, err) ||
           ts_lower_partition_decide(f, err);
  case TS_LOWER_STEP_FLATTEN: return ts_lower_flatten(f, err);
  case TS_LOWER_STEP_VECTORIZE:
    return ts_lower_vectorize(f, o->max_vector_lanes, err);
  case TS_LOWER_STEP_PROMOTE:
    return o->no_promote ? TS_OK
                         : ts_lower_promote(f, o->promote_max_bytes, err);
  case TS_LOWER_STEP_SYNC: return lower_sync(f, err);
  default: return TS_ERR(err, TS_EINVAL, "lowering: no step %d", (int)step);
  }
}

ts_func *ts_lower(const ts_func *in, const ts_lower_options *opts,
                  ts_error *err) {
  ts_lower_options o = opts ? *opts : ts_lower_defaults();
  int last = o.last == TS_LOWER_STEP_ALL ? TS_LOWER_N_STEPS - 1 : (int)o.last;
  if (last < 0 || last >= TS_LOWER_N_STEPS) {
    TS_ERR(err, TS_EINVAL, "lowering: no step %d", (int)o.last);
    return NULL;
  }
  if (ts_arena_failed(ts_func_arena(in))) {
    TS_ERR(err, TS_ENOMEM, "lower: out of memory while the function was built");
    return NULL;
  }
  unsigned long oom = ts_alloc_failures();
  ts_func *f = ts_func_copy(in);
  int rc = TS_OK;
  if (o.verify_between && ts_func_verify(f, err) != TS_OK) rc = TS_EVERIFY;
  /* a step after an allocation failed could meet a half-rewritten tree:
   * the pipeline stops at the step where it happened */
  for (int step = TS_LOWER_STEP_BLOCKS;
       step <= last && !rc && ts_alloc_failures() == oom; step++) {
    if (o.skip & TS_LOWER_SKIP(step)) continue;
    rc = run_step(f, (ts_lower_step)step, &o, err);
    if (!rc && step_names[step]) rc = check(f, &o, step_names[step], err);
  }
  rc = ts_alloc_check(oom, rc, err, "lower");
  if (rc) {
    ts_func_free(f);
    return NULL;
  }
  return f;
}
