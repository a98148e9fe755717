/*
 * tensorize.c — tensorize: matches a block's perfect loop nest (a block
 * made by blockize, or a loop that is blockized first) against the
 * description of a registered tensor intrinsic and replaces it by the
 * intrinsic's implementation. The match is structural on loops (extents),
 * iter kinds and the body (operations, dtypes, constants, buffers mapped
 * one to one); the indices of every access are checked numerically over
 * the whole tile for a few values of the outer variables: actual index =
 * base(outer) + description index. The implementation's accesses to its
 * parameters are rebased onto the actual buffers, and
 * call("tessera.buffer_stride", &P[...], d) becomes the actual stride.
 */
#include "schedule/internal.h"

#include <stdlib.h>
#include <string.h>

#define MAX_LOOPS 16
#define MAX_BUFS 8
#define MAX_ACC 32
#define MAX_POINTS ((int64_t)1 << 18)

typedef struct access_pair {
  int buf;            /* index into the buffer map */
  ts_expr *const *di; /* description indices */
  ts_expr *const *ai; /* actual indices */
  int nd, na;
} access_pair;

typedef struct match_ctx {
  ts_arena *a;
  ts_stmt *dloops[MAX_LOOPS], *aloops[MAX_LOOPS];
  ts_stmt *aunit[MAX_LOOPS]; /* actual loops of extent 1 (skipped) */
  int n_loops, n_unit;
  ts_stmt *dreal, *areal;
  ts_node_map *iters; /* desc iter var -> actual iter var */
  ts_buffer *dbuf[MAX_BUFS], *abuf[MAX_BUFS];
  int n_bufs;
  access_pair acc[MAX_ACC];
  int n_acc;
  char why[512];
} match_ctx;

/* The perfect nest under top: loops (extent-1 loops apart when unit is
 * non-NULL) and the realize. False when it is not a nest over one block. */
static bool nest_of(ts_stmt *top, ts_stmt **loops, int *n, ts_stmt **unit,
                    int *n_unit, ts_stmt **realize) {
  ts_stmt *x = top;
  *n = 0;
  if (n_unit) *n_unit = 0;
  while (x) {
    if (ts_stmt_kind_of(x) == TS_STMT_SEQ && ts_seq_n(x) == 1) {
      x = ts_seq_item(x, 0);
      continue;
    }
    if (ts_stmt_kind_of(x) == TS_STMT_BLOCK_REALIZE) {
      *realize = x;
      return true;
    }
    if (ts_stmt_kind_of(x) != TS_STMT_FOR) return false;
    int64_t ext;
    if (unit && ts_expr_is_const_int(ts_for_extent(x), &ext) && ext == 1) {
      if (*n_unit == MAX_LOOPS) return false;
      unit[(*n_unit)++] = x;
    } else {
      if (*n == MAX_LOOPS) return false;
      loops[(*n)++] = x;
    }
    x = ts_for_body(x);
  }
  return false;
}

static bool map_buffer(match_ctx *c, ts_buffer *d, ts_buffer *a, int *idx) {
  for (int i = 0; i < c->n_bufs; i++) {
    if (c->dbuf[i] == d || c->abuf[i] == a) {
      if (c->dbuf[i] != d || c->abuf[i] != a) {
        snprintf(c->why, sizeof c->why,
                 "buffer '%s' would stand for two operands of the intrinsic "
                 "(or '%s' for two buffers)",
                 ts_buffer_name(a), ts_buffer_name(d));
        return false;
      }
      *idx = i;
      return true;
    }
  }
  char b1[32], b2[32];
  if (!ts_dtype_eq(ts_buffer_dtype(d), ts_buffer_dtype(a))) {
    snprintf(c->why, sizeof c->why,
             "buffer '%s' is %s where the intrinsic's '%s' is %s",
             ts_buffer_name(a), ts_dtype_str(ts_buffer_dtype(a), b1),
             ts_buffer_name(d), ts_dtype_str(ts_buffer_dtype(d), b2));
    return false;
  }
  if (ts_buffer_ndim(a) < ts_buffer_ndim(d)) {
    snprintf(c->why, sizeof c->why,
             "buffer '%s' has fewer dimensions than the intrinsic's '%s'",
             ts_buffer_name(a), ts_buffer_name(d));
    return false;
  }
  if (c->n_bufs == MAX_BUFS) {
    snprintf(c->why, sizeof c->why, "too many buffers");
    return false;
  }
  c->dbuf[c->n_bufs] = d;
  c->abuf[c->n_bufs] = a;
  *idx = c->n_bufs++;
  return true;
}

static bool record_access(match_ctx *c, ts_buffer *d, ts_buffer *a,
                          ts_expr *const *di, int nd, ts_expr *const *ai,
                          int na) {
  int idx;
  if (!di || !ai) { /* out of memory (counted; sched_run reports it) */
    snprintf(c->why, sizeof c->why, "out of memory");
    return false;
  }
  if (!map_buffer(c, d, a, &idx)) return false;
  if (c->n_acc == MAX_ACC || nd != ts_buffer_ndim(d) ||
      na != ts_buffer_ndim(a)) {
    snprintf(c->why, sizeof c->why, "too many or malformed accesses");
    return false;
  }
  c->acc[c->n_acc++] = (access_pair){idx, di, ai, nd, na};
  return true;
}

/* Operands of a load/address_of as an array (they are the indices); NULL
 * when out of memory. */
static ts_expr **operands(ts_arena *a, const ts_expr *e) {
  int n = ts_expr_n_operands(e);
  ts_expr **v = ts_arena_alloc(a, sizeof *v * (size_t)(n ? n : 1));
  if (!v) return NULL;
  for (int i = 0; i < n; i++) v[i] = ts_expr_operand(e, i);
  return v;
}

static bool same_expr(match_ctx *c, ts_expr *d, ts_expr *x) {
  ts_expr_kind k = ts_expr_kind_of(d);
  bool access = k == TS_EXPR_LOAD || k == TS_EXPR_ADDRESS_OF;
  if (k != ts_expr_kind_of(x) ||
      (!access && !ts_dtype_eq(ts_expr_dtype(d), ts_expr_dtype(x)))) {
    char *t1 = ts_expr_print(d), *t2 = ts_expr_print(x);
    char b1[32], b2[32];
    snprintf(c->why, sizeof c->why,
             "'%.200s' (%s) does not match the intrinsic's '%.200s' (%s)", t2,
             ts_dtype_str(ts_expr_dtype(x), b2), t1,
             ts_dtype_str(ts_expr_dtype(d), b1));
    free(t1);
    free(t2);
    return false;
  }
  switch (k) {
  case TS_EXPR_INT:
    if (ts_expr_int_value(d) == ts_expr_int_value(x)) return true;
    snprintf(c->why, sizeof c->why, "the constants %lld and %lld differ",
             (long long)ts_expr_int_value(x), (long long)ts_expr_int_value(d));
    return false;
  case TS_EXPR_FLOAT:
    if (ts_expr_float_value(d) == ts_expr_float_value(x)) return true;
    snprintf(c->why, sizeof c->why, "the constants %g and %g differ",
             ts_expr_float_value(x), ts_expr_float_value(d));
    return false;
  case TS_EXPR_VAR:
    if (ts_node_map_get(c->iters, d) == x) return true;
    snprintf(c->why, sizeof c->why,
             "iter var '%s' stands where the intrinsic has '%s'",
             ts_var_name(x), ts_var_name(d));
    return false;
  case TS_EXPR_LOAD:
  case TS_EXPR_ADDRESS_OF:
    return record_access(c, ts_expr_buffer(d), ts_expr_buffer(x),
                         operands(c->a, d), ts_expr_n_operands(d),
                         operands(c->a, x), ts_expr_n_operands(x));
  case TS_EXPR_CALL:
    if (strcmp(ts_expr_call_name(d), ts_expr_call_name(x)) != 0) {
      snprintf(c->why, sizeof c->why, "call '%s' where the intrinsic has '%s'",
               ts_expr_call_name(x), ts_expr_call_name(d));
      return false;
    }
    break;
  case TS_EXPR_LET:
    snprintf(c->why, sizeof c->why, "let expressions are not matched");
    return false;
  default: break;
  }
  int n = ts_expr_n_operands(d);
  if (n != ts_expr_n_operands(x)) {
    snprintf(c->why, sizeof c->why, "operand counts differ");
    return false;
  }
  for (int i = 0; i < n; i++)
    if (!same_expr(c, ts_expr_operand(d, i), ts_expr_operand(x, i)))
      return false;
  return true;
}

static ts_stmt *one_stmt(ts_stmt *s) {
  while (s && ts_stmt_kind_of(s) == TS_STMT_SEQ && ts_seq_n(s) == 1)
    s = ts_seq_item(s, 0);
  return s;
}

/* Outer variables: sample ranges (inclusive) for the numeric check. */
typedef struct outer_vars {
  const ts_expr *vars[64];
  int64_t lo[64], hi[64];
  int n;
} outer_vars;

static void add_outer(outer_vars *o, const ts_expr *v, int64_t lo, int64_t hi) {
  if (o->n < 64) {
    o->vars[o->n] = v;
    o->lo[o->n] = lo;
    o->hi[o->n++] = hi;
  }
}

/* Evaluates the realize's bindings into its iter vars. */
static bool bind_iters(const ts_stmt *r, env *en) {
  const ts_block *b = ts_realize_block(r);
  int64_t vals[64];
  int n = ts_block_n_iters(b);
  if (n > 64) return false;
  for (int i = 0; i < n; i++)
    if (!eval_int(ts_realize_value(r, i), en, &vals[i])) return false;
  for (int i = 0; i < n; i++) env_set(en, ts_block_iter_var(b, i), vals[i]);
  return true;
}

/* Whether index e (over the block iters of realize r) moves with loop l
 * (through the iters' bindings). */
static bool index_uses_loop(const ts_expr *e, const ts_stmt *r,
                            const ts_stmt *l) {
  const ts_block *b = ts_realize_block(r);
  for (int it = 0; it < ts_block_n_iters(b); it++)
    if (uses_var(e, ts_block_iter_var(b, it)) &&
        uses_var(ts_realize_value(r, it), ts_for_var(l)))
      return true;
  return false;
}

/* The numeric check of every access over the tile: each access over the
 * tile loops its indices (actual or description's) move with, the others
 * at 0 (A[i, k] of a 32 x 32 x 256 tile: 8192 points, not 262144). */
static bool check_indices(match_ctx *c, const outer_vars *ov) {
  int64_t ext[MAX_LOOPS];
  for (int i = 0; i < c->n_loops; i++) loop_const(c->dloops[i], &ext[i]);
  for (int k = 0; k < c->n_acc; k++) {
    const access_pair *x = &c->acc[k];
    int lead = x->na - x->nd;
    bool used[MAX_LOOPS];
    int64_t n_points = 1;
    for (int i = 0; i < c->n_loops; i++) {
      used[i] = false;
      for (int d = 0; d < x->na && !used[i]; d++)
        used[i] = index_uses_loop(x->ai[d], c->areal, c->aloops[i]) ||
                  (d >= lead &&
                   index_uses_loop(x->di[d - lead], c->dreal, c->dloops[i]));
      if (used[i]) n_points *= ext[i];
    }
    if (n_points > MAX_POINTS) {
      snprintf(c->why, sizeof c->why, "the tile is too large to check");
      return false;
    }
    for (int sample = 0; sample < 3; sample++) {
      env ae = {0}, de = {0};
      for (int i = 0; i < ov->n; i++) {
        int64_t v = sample == 0 ? ov->lo[i]
                    : sample == 1
                        ? (ov->lo[i] < ov->hi[i] ? ov->lo[i] + 1 : ov->lo[i])
                        : ov->hi[i];
        env_set(&ae, ov->vars[i], v);
      }
      for (int i = 0; i < c->n_unit; i++)
        env_set(&ae, ts_for_var(c->aunit[i]), 0);
      int base_n = ae.n;
      int64_t base[TS_MAX_DIMS];
      for (int64_t p = 0; p < n_points; p++) {
        int64_t rem = p;
        ae.n = base_n;
        de.n = 0;
        for (int i = c->n_loops - 1; i >= 0; i--) {
          int64_t v = 0;
          if (used[i]) {
            v = rem % ext[i];
            rem /= ext[i];
          }
          env_set(&ae, ts_for_var(c->aloops[i]), v);
          env_set(&de, ts_for_var(c->dloops[i]), v);
        }
        if (!bind_iters(c->areal, &ae) || !bind_iters(c->dreal, &de)) {
          snprintf(c->why, sizeof c->why, "cannot evaluate the bindings");
          return false;
        }
        for (int d = 0; d < x->na; d++) {
          int64_t av, dv = 0;
          if (!eval_int(x->ai[d], &ae, &av) ||
              (d >= lead && !eval_int(x->di[d - lead], &de, &dv))) {
            snprintf(c->why, sizeof c->why,
                     "cannot evaluate the indices of "
                     "'%s'",
                     ts_buffer_name(c->abuf[x->buf]));
            return false;
          }
          int64_t off = av - dv;
          if (p == 0) {
            base[d] = off;
          } else if (off != base[d]) {
            snprintf(c->why, sizeof c->why,
                     "the accesses of '%s' do not follow the intrinsic's "
                     "accesses of '%s' (dimension %d)",
                     ts_buffer_name(c->abuf[x->buf]),
                     ts_buffer_name(c->dbuf[x->buf]), d);
            return false;
          }
        }
      }
    }
  }
  return true;
}

/* Matches the nest under `top` (inside the outer block or under the outer
 * loops `ov` describes) against the description. */
static bool match(match_ctx *c, ts_stmt *top, const ts_func *desc,
                  const outer_vars *ov) {
  ts_stmt *droot = one_stmt(ts_func_body(desc));
  ts_stmt *dtop = ts_block_body(ts_realize_block(droot));
  int nd, na;
  if (!nest_of(dtop, c->dloops, &nd, NULL, NULL, &c->dreal)) {
    snprintf(c->why, sizeof c->why, "the description is not a loop nest");
    return false;
  }
  if (!nest_of(top, c->aloops, &na, c->aunit, &c->n_unit, &c->areal)) {
    snprintf(c->why, sizeof c->why,
             "the subtree is not a perfect loop nest over one block");
    return false;
  }
  char b1[128] = "", b2[128] = "";
  bool same = nd == na;
  for (int i = 0; i < nd && same; i++) {
    int64_t e1, e2;
    same = loop_const(c->dloops[i], &e1) && loop_const(c->aloops[i], &e2) &&
           e1 == e2;
  }
  if (!same) {
    for (int i = 0; i < na; i++) {
      int64_t e = 0;
      ts_expr_is_const_int(ts_for_extent(c->aloops[i]), &e);
      snprintf(b1 + strlen(b1), sizeof b1 - strlen(b1), "%s%lld", i ? ", " : "",
               (long long)e);
    }
    for (int i = 0; i < nd; i++) {
      int64_t e = 0;
      ts_expr_is_const_int(ts_for_extent(c->dloops[i]), &e);
      snprintf(b2 + strlen(b2), sizeof b2 - strlen(b2), "%s%lld", i ? ", " : "",
               (long long)e);
    }
    snprintf(c->why, sizeof c->why,
             "the loop extents (%s) do not match the intrinsic's (%s)", b1, b2);
    return false;
  }
  c->n_loops = nd;
  const ts_block *db = ts_realize_block(c->dreal);
  const ts_block *ab = ts_realize_block(c->areal);
  if (ts_block_init(ab)) {
    snprintf(c->why, sizeof c->why,
             "block '%s' has an init statement (decompose_reduction first)",
             ts_block_name(ab));
    return false;
  }
  if (ts_realize_predicate(c->areal)) {
    snprintf(c->why, sizeof c->why, "block '%s' has a predicate",
             ts_block_name(ab));
    return false;
  }
  /* iters that move inside the tile pair with the description's, in order */
  int k = 0;
  for (int i = 0; i < ts_block_n_iters(ab); i++) {
    bool inner = false;
    for (int j = 0; j < na; j++)
      if (uses_var(ts_realize_value(c->areal, i), ts_for_var(c->aloops[j])))
        inner = true;
    if (!inner) continue;
    if (k >= ts_block_n_iters(db) ||
        ts_block_iter_kind(ab, i) != ts_block_iter_kind(db, k)) {
      snprintf(c->why, sizeof c->why,
               "the iter vars of block '%s' do not match the intrinsic's "
               "(kinds or count)",
               ts_block_name(ab));
      return false;
    }
    ts_node_map_put(c->iters, ts_block_iter_var(db, k),
                    ts_block_iter_var(ab, i));
    k++;
  }
  if (k != ts_block_n_iters(db)) {
    snprintf(c->why, sizeof c->why,
             "block '%s' has %d iter vars inside the tile, the intrinsic %d",
             ts_block_name(ab), k, ts_block_n_iters(db));
    return false;
  }
  ts_stmt *ds = one_stmt(ts_block_body(db)), *as = one_stmt(ts_block_body(ab));
  if (!ds || !as || ts_stmt_kind_of(ds) != TS_STMT_STORE ||
      ts_stmt_kind_of(as) != TS_STMT_STORE) {
    snprintf(c->why, sizeof c->why, "the body of block '%s' is not one store",
             ts_block_name(ab));
    return false;
  }
  ts_expr **di = ts_arena_alloc(c->a, sizeof(ts_expr *) * (TS_MAX_DIMS + 1));
  ts_expr **ai = ts_arena_alloc(c->a, sizeof(ts_expr *) * (TS_MAX_DIMS + 1));
  for (int d = 0; di && d < ts_store_n_indices(ds) && d < TS_MAX_DIMS; d++)
    di[d] = ts_store_index(ds, d);
  for (int d = 0; ai && d < ts_store_n_indices(as) && d < TS_MAX_DIMS; d++)
    ai[d] = ts_store_index(as, d);
  if (!record_access(c, ts_store_buffer(ds), ts_store_buffer(as), di,
                     ts_store_n_indices(ds), ai, ts_store_n_indices(as)))
    return false;
  if (!same_expr(c, ts_store_value(ds), ts_store_value(as))) return false;
  for (int i = 0; i < ts_func_n_params(desc); i++) {
    bool used = false;
    for (int j = 0; j < c->n_bufs; j++)
      if (c->dbuf[j] == ts_func_param(desc, i)) used = true;
    if (!used) {
      snprintf(c->why, sizeof c->why,
               "the description does not use its parameter '%s'",
               ts_buffer_name(ts_func_param(desc, i)));
      return false;
    }
  }
  return check_indices(c, ov);
}

/* ---- rewriting the implementation ---- */

typedef struct impl_ctx {
  match_ctx *m;
  const ts_func *desc, *impl;
  ts_expr *base[MAX_BUFS][TS_MAX_DIMS]; /* per actual dim */
  bool stride_used[MAX_BUFS][TS_MAX_DIMS];
  const char *err;
  ts_var_ranges *ranges; /* of the outer variables, to simplify bases */
} impl_ctx;

/* The map slot of impl parameter buffer b (positional with desc), or -1. */
static int impl_slot(impl_ctx *c, const ts_buffer *b) {
  for (int i = 0; i < ts_func_n_params(c->impl); i++)
    if (ts_func_param(c->impl, i) == b) {
      const ts_buffer *d = ts_func_param(c->desc, i);
      for (int k = 0; k < c->m->n_bufs; k++)
        if (c->m->dbuf[k] == d) return k;
    }
  return -1;
}

static void scan_strides(void *ctx, ts_expr *e) {
  impl_ctx *c = ctx;
  if (ts_expr_kind_of(e) != TS_EXPR_CALL ||
      strcmp(ts_expr_call_name(e), "tessera.buffer_stride") != 0)
    return;
  int64_t d;
  ts_expr *p = ts_expr_n_operands(e) == 2 ? ts_expr_operand(e, 0) : NULL;
  if (!p || ts_expr_kind_of(p) != TS_EXPR_ADDRESS_OF ||
      !ts_expr_is_const_int(ts_expr_operand(e, 1), &d)) {
    c->err = "a malformed tessera.buffer_stride call";
    return;
  }
  int slot = impl_slot(c, ts_expr_buffer(p));
  if (slot < 0 || d < 0 || d >= ts_buffer_ndim(ts_expr_buffer(p))) {
    c->err = "a tessera.buffer_stride call on a non-parameter";
    return;
  }
  c->stride_used[slot][d] = true;
}

static void scan_visit(void *ctx, ts_expr *e) {
  ts_expr_walk(e, scan_strides, ctx);
}

static ts_expr *impl_post(void *ctx, ts_arena *a, ts_expr *e) {
  impl_ctx *c = ctx;
  ts_expr_kind k = ts_expr_kind_of(e);
  if (k == TS_EXPR_CALL &&
      strcmp(ts_expr_call_name(e), "tessera.buffer_stride") == 0) {
    /* operands first: the address is already rebased onto the actual
     * buffer */
    ts_expr *p = ts_expr_operand(e, 0);
    int64_t d = 0;
    ts_expr_is_const_int(ts_expr_operand(e, 1), &d);
    for (int k = 0; k < c->m->n_bufs; k++) {
      ts_buffer *x = c->m->abuf[k];
      if (x != ts_expr_buffer(p)) continue;
      int lead = ts_buffer_ndim(x) - ts_buffer_ndim(c->m->dbuf[k]);
      return ts_int(a, ts_expr_dtype(e), ts_buffer_stride(x, lead + (int)d));
    }
    return e;
  }
  if (k != TS_EXPR_LOAD && k != TS_EXPR_ADDRESS_OF) return e;
  int slot = impl_slot(c, ts_expr_buffer(e));
  if (slot < 0) return e;
  ts_buffer *x = c->m->abuf[slot];
  int nd = ts_expr_n_operands(e), na = ts_buffer_ndim(x), lead = na - nd;
  ts_expr *idx[TS_MAX_DIMS];
  for (int d = 0; d < na; d++)
    idx[d] = d < lead
                 ? c->base[slot][d]
                 : ts_add(a, c->base[slot][d], ts_expr_operand(e, d - lead));
  return k == TS_EXPR_LOAD ? ts_load(a, x, idx, na)
                           : ts_address_of(a, x, idx, na);
}

static ts_expr *impl_expr(void *ctx, ts_arena *a, ts_expr *e) {
  return ts_expr_mutate(a, e, impl_post, ctx);
}

static ts_stmt *impl_store(void *ctx, ts_arena *a, ts_stmt *s) {
  impl_ctx *c = ctx;
  int slot = impl_slot(c, ts_store_buffer(s));
  if (slot < 0) return s;
  ts_buffer *x = c->m->abuf[slot];
  int nd = ts_store_n_indices(s), na = ts_buffer_ndim(x), lead = na - nd;
  ts_expr *idx[TS_MAX_DIMS];
  for (int d = 0; d < na; d++)
    idx[d] = d < lead
                 ? c->base[slot][d]
                 : ts_add(a, c->base[slot][d], ts_store_index(s, d - lead));
  return ts_store(a, x, idx, na, ts_store_value(s));
}

/* Symbolic bases: the actual index with the tile loops at 0, minus the
 * description index at 0. */
static void compute_bases(impl_ctx *c) {
  match_ctx *m = c->m;
  ts_arena *a = m->a;
  ts_node_map *sub = ts_node_map_create();
  for (int i = 0; i < m->n_loops; i++)
    ts_node_map_put(sub, ts_for_var(m->aloops[i]), ts_index(a, 0));
  for (int i = 0; i < m->n_unit; i++)
    ts_node_map_put(sub, ts_for_var(m->aunit[i]), ts_index(a, 0));
  const ts_block *ab = ts_realize_block(m->areal);
  ts_node_map *isub = ts_node_map_create();
  for (int i = 0; i < ts_block_n_iters(ab); i++)
    ts_node_map_put(
        isub, ts_block_iter_var(ab, i),
        ts_expr_substitute(a, ts_realize_value(m->areal, i), sub, NULL));
  env de = {0};
  for (int i = 0; i < m->n_loops; i++)
    env_set(&de, ts_for_var(m->dloops[i]), 0);
  bind_iters(m->dreal, &de);
  for (int k = 0; k < m->n_acc; k++) {
    const access_pair *x = &m->acc[k];
    int lead = x->na - x->nd;
    for (int d = 0; d < x->na; d++) {
      int64_t dv = 0;
      if (d >= lead) eval_int(x->di[d - lead], &de, &dv);
      ts_expr *e = ts_expr_substitute(a, x->ai[d], isub, NULL);
      c->base[x->buf][d] =
          ts_simplify(a, ts_sub(a, e, ts_index(a, dv)), c->ranges);
    }
  }
  ts_node_map_destroy(sub);
  ts_node_map_destroy(isub);
}

/* Checks the strides the implementation relies on. */
static bool check_strides(impl_ctx *c, char *why, size_t cap) {
  match_ctx *m = c->m;
  for (int k = 0; k < m->n_bufs; k++) {
    ts_buffer *x = m->abuf[k];
    const ts_buffer *d = m->dbuf[k];
    int nd = ts_buffer_ndim(d), lead = ts_buffer_ndim(x) - nd;
    for (int i = 0; i < nd; i++) {
      if (c->stride_used[k][i]) continue;
      int64_t want = ts_buffer_stride(d, i),
              got = ts_buffer_stride(x, lead + i);
      if (want != got) {
        snprintf(why, cap,
                 "buffer '%s' has stride %lld in dimension %d where the "
                 "intrinsic needs %lld (pack it with transform_layout)",
                 ts_buffer_name(x), (long long)got, lead + i, (long long)want);
        return false;
      }
    }
  }
  return true;
}

/* The outer variables of a target: the outer block's iter vars (block) or
 * the loops above the nest (loop). */
static void outer_of(ts_sched *s, ts_stmt *outer_block, ts_stmt *top_loop,
                     outer_vars *ov) {
  ov->n = 0;
  if (outer_block) {
    const ts_block *b = ts_realize_block(outer_block);
    for (int i = 0; i < ts_block_n_iters(b); i++) {
      int64_t mn, ex;
      if (iter_const(b, i, &mn, &ex))
        add_outer(ov, ts_block_iter_var(b, i), mn, mn + ex - 1);
    }
    return;
  }
  stmt_vec above = {0};
  tree_loops_above(s->func, top_loop, &above);
  for (int i = 0; i < above.n; i++) {
    int64_t mn, ex;
    if (ts_expr_is_const_int(ts_for_min(above.v[i]), &mn) &&
        ts_expr_is_const_int(ts_for_extent(above.v[i]), &ex) && ex > 0)
      add_outer(ov, ts_for_var(above.v[i]), mn, mn + ex - 1);
  }
  sv_free(&above);
}

static void match_init(match_ctx *c, ts_arena *a) {
  memset(c, 0, sizeof *c);
  c->a = a;
  c->iters = ts_node_map_create();
}

int apply_tensorize(ts_sched *s, inst *in, rv_list *out) {
  (void)out;
  ts_stmt *r, *loop;
  const char *name;
  int rc = check_arity(s, in, 1, 1, 1);
  if (rc || (rc = in_block_or_loop(s, in, 0, &r, &loop)) ||
      (rc = attr_str(s, in, 0, &name)))
    return rc;
  ts_func *desc, *impl;
  ts_error err;
  if ((rc = ts_intrin_get(name, &desc, &impl, NULL, &err)))
    return FAIL(s, rc, "tensorize: %s", err.msg);
  ts_arena *a = ts_func_arena(s->func);
  const char *what = r ? ts_block_name(ts_realize_block(r)) : loop_name(loop);
  match_ctx m;
  match_init(&m, a);
  outer_vars ov;
  bz_plan plan;
  bool planned = false;
  if (r) {
    outer_of(s, r, NULL, &ov);
    if (!match(&m, ts_block_body(ts_realize_block(r)), desc, &ov))
      rc =
          FAIL(s, TS_ESCHEDULE, "tensorize: block '%s' does not match '%s': %s",
               what, name, m.why);
  } else {
    if ((rc = blockize_plan(s, "tensorize", loop, &plan)) == TS_OK) {
      planned = true;
      outer_of(s, NULL, loop, &ov);
      if (!match(&m, loop, desc, &ov))
        rc = FAIL(s, TS_ESCHEDULE,
                  "tensorize: loop '%s' does not match '%s': %s", what, name,
                  m.why);
    }
  }
  impl_ctx ic = {0};
  ic.m = &m;
  ic.desc = desc;
  ic.impl = impl;
  if (!rc && ts_func_n_params(impl) != ts_func_n_params(desc))
    rc = FAIL(s, TS_EINTERNAL, "tensorize: intrinsic '%s' is malformed", name);
  if (!rc) {
    ts_visitor v = {NULL, NULL, scan_visit, &ic};
    ts_stmt_walk(ts_func_body(impl), &v);
    if (ic.err)
      rc = FAIL(s, TS_EINTERNAL, "tensorize: '%s' has %s", name, ic.err);
  }
  char why[512];
  if (!rc && !check_strides(&ic, why, sizeof why))
    rc = FAIL(s, TS_ESCHEDULE, "tensorize: %s '%s' does not match '%s': %s",
              r ? "block" : "loop", what, name, why);
  if (rc) {
    if (planned) blockize_plan_free(&plan);
    ts_node_map_destroy(m.iters);
    ts_func_free(desc);
    ts_func_free(impl);
    return rc;
  }
  /* mutate: blockize first when given a loop, then match on the block */
  if (!r) {
    char *bname;
    r = blockize_commit(s, loop, &plan, &bname);
    blockize_plan_free(&plan);
    if (!r) {
      ts_node_map_destroy(m.iters);
      ts_func_free(desc);
      ts_func_free(impl);
      return fail_oom(s, "tensorize");
    }
    sched_refresh(s);
    ts_node_map_destroy(m.iters);
    match_init(&m, a);
    outer_of(s, r, NULL, &ov);
    if (!match(&m, ts_block_body(ts_realize_block(r)), desc, &ov)) {
      ts_node_map_destroy(m.iters);
      ts_func_free(desc);
      ts_func_free(impl);
      return FAIL(s, TS_EINTERNAL,
                  "tensorize: blockized loop '%s' no longer "
                  "matches: %s",
                  what, m.why);
    }
  }
  ic.ranges = ts_var_ranges_create();
  for (int i = 0; i < ov.n; i++)
    ts_var_ranges_set(ic.ranges, ov.vars[i], ov.lo[i], ov.hi[i] - ov.lo[i] + 1);
  compute_bases(&ic);
  ts_var_ranges_destroy(ic.ranges);
  ts_stmt *impl_root = one_stmt(ts_func_body(impl));
  ts_stmt *body =
      ts_stmt_copy(a, ts_block_body(ts_realize_block(impl_root)), NULL);
  rewriter rw = {impl_expr, impl_store, true, &ic};
  body = rewrite_stmt(a, body, &rw);
  if (!body || ts_arena_failed(a)) {
    /* (a loop given was blockized already; the block keeps its body) */
    ts_node_map_destroy(m.iters);
    ts_func_free(desc);
    ts_func_free(impl);
    return fail_oom(s, "tensorize");
  }
  ts_block *ob = ts_realize_block(r);
  stmt_vec dead = {0};
  tree_loops(ts_block_body(ob), false, &dead);
  rv_kill_loops(s, dead.v, dead.n, "tensorize");
  sv_free(&dead);
  ts_block_set_body(ob, body);
  ts_block_annotate(a, ob, ts_ann_string(TS_ANN_TENSOR_INTRIN, name));
  ts_node_map_destroy(m.iters);
  ts_func_free(desc);
  ts_func_free(impl);
  sched_refresh(s);
  return TS_OK;
}
