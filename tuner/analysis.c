/*
 * analysis.c — the block and loop questions the rules and postprocessors
 * ask of a (scheduled) function: which kinds of iter vars a loop binds,
 * whether a block reduces, whether tiling it gives data reuse, whether it
 * writes a parameter, whether it calls if_then_else; plus block names and
 * small shared utilities.
 */
#include "tuner/internal.h"

#include <string.h>

typedef struct find_var {
  const ts_expr *var;
  bool found;
} find_var;

static void find_var_fn(void *ctx, ts_expr *e) {
  find_var *f = ctx;
  if (e == f->var) f->found = true;
}

bool expr_uses_var(const ts_expr *e, const ts_expr *var) {
  find_var f = {var, false};
  if (e) ts_expr_walk((ts_expr *)e, find_var_fn, &f);
  return f.found;
}

static bool expr_uses(ts_expr *e, const ts_expr *var) {
  find_var f = {var, false};
  if (e) ts_expr_walk(e, find_var_fn, &f);
  return f.found;
}

int loop_binding(const ts_stmt *realize, const ts_stmt *loop) {
  ts_block *b = ts_realize_block(realize);
  int bits = 0;
  for (int i = 0; i < ts_block_n_iters(b); i++) {
    if (!expr_uses(ts_realize_value(realize, i), ts_for_var(loop))) continue;
    bits |= ts_block_iter_kind(b, i) == TS_ITER_SPATIAL ? BIND_SPATIAL
                                                        : BIND_REDUCE;
  }
  return bits;
}

bool block_is_reduction(const ts_block *b) {
  for (int i = 0; i < ts_block_n_iters(b); i++)
    if (ts_block_iter_kind(b, i) != TS_ITER_SPATIAL) return true;
  return false;
}

/* Loads in a block body: for each, whether it misses an iter var (a
 * spatial one only, when spatial_only). */
typedef struct reuse_ctx {
  const ts_block *b;
  const ts_buffer *out; /* the written buffer (skipped) */
  bool spatial_only;
  bool reuse;
} reuse_ctx;

static void reuse_load(void *vctx, ts_expr *e) {
  reuse_ctx *c = vctx;
  if (ts_expr_kind_of(e) != TS_EXPR_LOAD || ts_expr_buffer(e) == c->out) return;
  for (int i = 0; i < ts_block_n_iters(c->b); i++) {
    int64_t ext = 0;
    ts_expr_is_const_int(ts_block_iter_dom(c->b, i).extent, &ext);
    if (ext <= 1 ||
        (c->spatial_only && ts_block_iter_kind(c->b, i) != TS_ITER_SPATIAL))
      continue;
    const ts_expr *v = ts_block_iter_var(c->b, i);
    bool used = false;
    for (int k = 0; k < ts_expr_n_operands(e) && !used; k++)
      used = expr_uses(ts_expr_operand(e, k), v);
    if (!used) c->reuse = true;
  }
}

static void reuse_expr(void *ctx, ts_expr *e) {
  ts_expr_walk(e, reuse_load, ctx);
}

static bool reuse_of(const ts_stmt *realize, bool spatial_only) {
  const ts_block *b = ts_realize_block(realize);
  reuse_ctx c = {b, NULL, spatial_only, false};
  if (ts_block_n_writes(b) == 1) c.out = ts_block_write(b, 0)->buffer;
  ts_visitor v = {NULL, NULL, reuse_expr, &c};
  ts_stmt_walk(ts_block_body(b), &v);
  return c.reuse;
}

bool block_has_reuse(const ts_stmt *realize) {
  return reuse_of(realize, false);
}

bool block_has_spatial_reuse(const ts_stmt *realize) {
  return reuse_of(realize, true);
}

typedef struct ite_ctx {
  bool found;
} ite_ctx;

static void ite_fn(void *vctx, ts_expr *e) {
  ite_ctx *c = vctx;
  if (ts_expr_kind_of(e) == TS_EXPR_CALL &&
      !strcmp(ts_expr_call_name(e), "if_then_else"))
    c->found = true;
}

static void ite_expr(void *ctx, ts_expr *e) { ts_expr_walk(e, ite_fn, ctx); }

bool stmt_uses_if_then_else(const ts_stmt *s) {
  ite_ctx c = {false};
  ts_visitor v = {NULL, NULL, ite_expr, &c};
  ts_stmt_walk((ts_stmt *)s, &v);
  return c.found;
}

/* Transcendental calls, each some tens of instructions per element. */
static void expensive_fn(void *vctx, ts_expr *e) {
  static const char *const names[] = {"exp", "exp2",    "log", "log2", "tanh",
                                      "erf", "sigmoid", "pow", NULL};
  ite_ctx *c = vctx;
  if (ts_expr_kind_of(e) != TS_EXPR_CALL) return;
  for (int i = 0; names[i]; i++)
    if (!strcmp(ts_expr_call_name(e), names[i])) c->found = true;
}

static void expensive_expr(void *ctx, ts_expr *e) {
  ts_expr_walk(e, expensive_fn, ctx);
}

bool stmt_uses_expensive_call(const ts_stmt *s) {
  ite_ctx c = {false};
  ts_visitor v = {NULL, NULL, expensive_expr, &c};
  ts_stmt_walk((ts_stmt *)s, &v);
  return c.found;
}

bool block_writes_param(const ts_func *f, const ts_block *b) {
  for (int w = 0; w < ts_block_n_writes(b); w++)
    for (int p = 0; p < ts_func_n_params(f); p++)
      if (ts_block_write(b, w)->buffer == ts_func_param(f, p)) return true;
  return false;
}

int64_t rv_extent(const ts_sched *s, ts_rv loop) {
  const ts_stmt *l = ts_sched_rv_loop(s, loop);
  int64_t v = 0;
  if (l && !ts_expr_is_const_int(ts_for_extent(l), &v)) v = 0;
  return v;
}

char **block_names(const ts_func *f, int *n) {
  int nb = 0;
  ts_stmt **blocks = ts_func_blocks(f, &nb);
  char **names = calloc((size_t)(nb > 0 ? nb : 1), sizeof *names);
  int k = 0;
  int first = nb > 0 && blocks[0] == ts_func_body(f) ? 1 : 0;
  for (int i = first; i < nb; i++)
    names[k++] = strdup(ts_block_name(ts_realize_block(blocks[i])));
  free(blocks);
  *n = k;
  return names;
}

void names_free(char **names, int n) {
  for (int i = 0; i < n; i++) free(names[i]);
  free(names);
}

const char *root_block_name(const ts_func *f) {
  int nb = 0;
  ts_stmt **blocks = ts_func_blocks(f, &nb);
  const char *name = nb > 0 && blocks[0] == ts_func_body(f)
                         ? ts_block_name(ts_realize_block(blocks[0]))
                         : NULL;
  free(blocks);
  return name;
}

/* Whether a read's innermost dimension walks a spatial iter (of extent > 1)
 * and no reduce iter: a column reduction (NCHW's softmax over channels),
 * whose rows are strided in memory; vector accumulators along the reduce
 * loop would gather them lane by lane (a [1, 64, 160, 160] channel maximum
 * took 2.6 ms that way; reduce_outside vectorizes the spatial loop). */
static bool reduces_across_rows(const ts_block *b) {
  for (int i = 0; i < ts_block_n_reads(b); i++) {
    const ts_region *rg = ts_block_read(b, i);
    if (rg->ndim < 1 || rg->buffer == ts_block_write(b, 0)->buffer)
      continue; /* the accumulator's own read */
    const ts_expr *inner = rg->ranges[rg->ndim - 1].min;
    bool spatial = false, reduce = false;
    for (int k = 0; k < ts_block_n_iters(b); k++) {
      if (!expr_uses_var(inner, ts_block_iter_var(b, k))) continue;
      int64_t ext = 0;
      bool sp = ts_block_iter_kind(b, k) == TS_ITER_SPATIAL;
      if (sp && ts_expr_is_const_int(ts_block_iter_dom(b, k).extent, &ext) &&
          ext == 1)
        continue;
      if (sp)
        spatial = true;
      else
        reduce = true;
    }
    if (spatial && !reduce) return true;
  }
  return false;
}

int vector_rfactor(ts_sched *s, const ts_target *t, const char *block,
                   int accumulators, int min_vectors, bool spatial_only,
                   bool narrower) {
  return vector_rfactor_at(s, t, block, accumulators, min_vectors,
                           spatial_only ? 1 : 0, narrower, false);
}

int vector_rfactor_at(ts_sched *s, const ts_target *t, const char *block,
                      int accumulators, int min_vectors, int reuse,
                      bool narrower, bool lanes_last) {
  ts_rv b, loops[MAX_LOOPS];
  int nl = 0, rc;
  if ((rc = ts_sched_get_block(s, block, &b)) ||
      (rc = ts_sched_get_loops(s, b, loops, MAX_LOOPS, &nl)) || nl < 2)
    return rc ? rc : TS_ESCHEDULE;
  const ts_stmt *r = ts_func_find_block(ts_sched_func(s), block);
  const ts_block *blk = r ? ts_realize_block(r) : NULL;
  if (!blk || !block_is_reduction(blk) ||
      (reuse == 1 ? block_has_spatial_reuse(r)
                  : reuse == 0 && block_has_reuse(r)) ||
      ts_block_n_writes(blk) != 1 || reduces_across_rows(blk))
    return TS_ESCHEDULE;
  const ts_stmt *last = ts_sched_rv_loop(s, loops[nl - 1]);
  if (!last || loop_binding(r, last) != BIND_REDUCE) return TS_ESCHEDULE;
  int bits = ts_buffer_dtype(ts_block_write(blk, 0)->buffer).bits;
  int64_t lanes = bits > 0 ? ts_target_vector_bits(t) / bits : 0;
  int64_t ext = rv_extent(s, loops[nl - 1]);
  int64_t width = lanes * (accumulators > 1 ? accumulators : 1);
  /* narrower: a row no whole vector divides takes the widest power-of-two
   * part of a vector that does (1000 floats: 8 of 16 lanes) */
  int64_t full = width, full_lanes = lanes;
  while (narrower && accumulators <= 1 && width > 4 && ext % width)
    width /= 2, lanes /= 2;
  /* a row no part of a vector divides (a prime length) is split past its
   * end: the last step's lanes beyond the row are guarded, and rfactor
   * keeps the guard on the factored update */
  if (ext % width) width = full, lanes = full_lanes;
  if (lanes < 4 || ext < (int64_t)min_vectors * lanes || ext < width)
    return TS_ESCHEDULE;
  int64_t factors[2] = {(ext + width - 1) / width, width};
  ts_rv parts[2], rf;
  if ((rc = ts_sched_split(s, loops[nl - 1], factors, 2, parts)) ||
      (rc = ts_sched_rfactor(
           s, parts[1], lanes_last ? ts_block_write(blk, 0)->ndim : 1, &rf)))
    return rc;
  return TS_OK;
}

int fuse_sibling_nests(ts_sched *s, const char *first, const char *second) {
  ts_rv ba, bb, la[MAX_LOOPS], lb[MAX_LOOPS];
  int na = 0, nb = 0;
  if (ts_sched_get_block(s, first, &ba) ||
      ts_sched_get_loops(s, ba, la, MAX_LOOPS, &na) ||
      ts_sched_get_block(s, second, &bb) ||
      ts_sched_get_loops(s, bb, lb, MAX_LOOPS, &nb))
    return 0;
  int d = 0;
  while (d < na && d < nb &&
         ts_sched_rv_loop(s, la[d]) == ts_sched_rv_loop(s, lb[d]))
    d++;
  int fused = 0;
  for (; d < na && d < nb; d++) {
    ts_rv pair[2] = {la[d], lb[d]};
    if (rv_extent(s, la[d]) < 1 || rv_extent(s, la[d]) != rv_extent(s, lb[d]))
      break;
    if (ts_sched_fuse_siblings(s, pair, 2)) {
      /* the second block's nest may come first */
      ts_rv swapped[2] = {lb[d], la[d]};
      if (ts_sched_fuse_siblings(s, swapped, 2)) break;
    }
    fused++;
  }
  return fused;
}

bool reductions_share_input(const ts_block *a, const ts_block *b) {
  for (int i = 0; i < ts_block_n_reads(a); i++) {
    const ts_buffer *buf = ts_block_read(a, i)->buffer;
    bool written = false;
    for (int w = 0; w < ts_block_n_writes(a); w++)
      written |= ts_block_write(a, w)->buffer == buf;
    for (int w = 0; w < ts_block_n_writes(b); w++)
      written |= ts_block_write(b, w)->buffer == buf;
    if (written) continue;
    for (int k = 0; k < ts_block_n_reads(b); k++)
      if (ts_block_read(b, k)->buffer == buf) return true;
  }
  return false;
}

/* The innermost reduce loop that blocks a and b (fused siblings) share,
 * annotated to stay a loop (TS_ANN_NO_UNROLL) when LLVM would unroll it
 * whole (at most LLVM_WHOLE_UNROLL_STEPS steps) into more vectors than
 * the target's registers: layer norm's sum and sum of squares over a
 * row's vectors. Unrolled whole, LLVM kept every loaded vector of the row
 * for the normalization that reads the row again and spilled them; as a
 * loop it reads the row twice from L1. Default schedules on two Zen 4
 * cores (GFLOP/s, alternating rounds): AVX-512, layer_norm 128 x 768
 * 82-91 -> 92-107, 1024 x 1024 77-93 -> 99-122, 512 x 512 73-83 ->
 * 92-102; AVX2 ("x86-64-v3"), 512 x 512 58-68 -> 79, 1024 x 384 59-68 ->
 * 74-83. Longer loops LLVM unrolls by two and keeps no row: annotated
 * anyway, AVX2's 128 x 768 (24 steps) and 1024 x 1024 (32) lost 10-20 %,
 * as did shorter rows that fit the registers. */
#define LLVM_WHOLE_UNROLL_STEPS 16
static void keep_shared_reduce_loop(ts_sched *s, const ts_target *t,
                                    const char *a, const char *b) {
  ts_rv ba, bb, la[MAX_LOOPS], lb[MAX_LOOPS];
  int na = 0, nb = 0;
  if (!t || ts_sched_get_block(s, a, &ba) ||
      ts_sched_get_loops(s, ba, la, MAX_LOOPS, &na) ||
      ts_sched_get_block(s, b, &bb) ||
      ts_sched_get_loops(s, bb, lb, MAX_LOOPS, &nb))
    return;
  const ts_stmt *rb = ts_func_find_block(ts_sched_func(s), b);
  const ts_block *blk = rb ? ts_realize_block(rb) : NULL;
  if (!blk || ts_block_n_writes(blk) != 1) return;
  int bits = ts_buffer_dtype(ts_block_write(blk, 0)->buffer).bits;
  int64_t lanes = bits > 0 ? ts_target_vector_bits(t) / bits : 0;
  for (int d = (na < nb ? na : nb) - 1; d >= 0 && lanes > 0; d--) {
    const ts_stmt *l = ts_sched_rv_loop(s, lb[d]);
    if (l != ts_sched_rv_loop(s, la[d]) || ts_for_kind_of(l) != TS_FOR_SERIAL ||
        loop_binding(rb, l) != BIND_REDUCE)
      continue;
    /* the elements of one step: the loops inside it */
    int64_t steps = rv_extent(s, lb[d]), per_step = 1;
    for (int k = d + 1; k < nb; k++) per_step *= rv_extent(s, lb[k]);
    int64_t step_vectors = (per_step + lanes - 1) / lanes;
    /* the row's vectors and the two sums' accumulators */
    if (steps <= LLVM_WHOLE_UNROLL_STEPS &&
        (steps + 2) * step_vectors > ts_target_vector_registers(t))
      ts_sched_annotate(s, lb[d], ts_ann_int(TS_ANN_NO_UNROLL, 1));
    return;
  }
}

int fuse_sibling_reductions(ts_sched *s, const ts_target *t) {
  int n = 0, pairs = 0;
  char **names = block_names(ts_sched_func(s), &n);
  if (!names) return 0;
  for (int j = 1; j < n; j++) {
    const ts_stmt *rj = ts_func_find_block(ts_sched_func(s), names[j]);
    if (!rj || !block_is_reduction(ts_realize_block(rj))) continue;
    for (int i = 0; i < j; i++) {
      const ts_func *f = ts_sched_func(s);
      const ts_stmt *ri = ts_func_find_block(f, names[i]);
      rj = ts_func_find_block(f, names[j]);
      if (!ri || !rj || !block_is_reduction(ts_realize_block(ri)) ||
          !reductions_share_input(ts_realize_block(ri), ts_realize_block(rj)))
        continue;
      if (fuse_sibling_nests(s, names[i], names[j]) > 0) {
        keep_shared_reduce_loop(s, t, names[i], names[j]);
        pairs++;
        break;
      }
    }
  }
  names_free(names, n);
  return pairs;
}

static bool is_param(const ts_func *f, const ts_buffer *b) {
  for (int p = 0; p < ts_func_n_params(f); p++)
    if (ts_func_param(f, p) == b) return true;
  return false;
}

/* Whether loop l's var indexes region rg of the block in realize r
 * (through the block's bindings). */
static bool loop_indexes(const ts_stmt *r, const ts_stmt *l,
                         const ts_region *rg) {
  const ts_block *b = ts_realize_block(r);
  for (int k = 0; k < ts_block_n_iters(b); k++) {
    if (!expr_uses_var(ts_realize_value(r, k), ts_for_var(l))) continue;
    ts_expr *iv = ts_block_iter_var(b, k);
    for (int d = 0; d < rg->ndim; d++)
      if (expr_uses_var(rg->ranges[d].min, iv)) return true;
  }
  return false;
}

/* Whether loop l is bound to an iter var of block r that is, by itself,
 * the index of one of region rg's dimensions (one element of it per
 * iteration of l: computing rg's producer under l repeats no work). */
static bool loop_indexes_plainly(const ts_stmt *r, const ts_stmt *l,
                                 const ts_region *rg) {
  const ts_block *b = ts_realize_block(r);
  for (int k = 0; k < ts_block_n_iters(b); k++) {
    if (ts_realize_value(r, k) != ts_for_var(l)) continue;
    ts_expr *iv = ts_block_iter_var(b, k);
    for (int d = 0; d < rg->ndim; d++)
      if (rg->ranges[d].min == iv) return true;
  }
  return false;
}

/* How many leading loops of the output block are row loops: spatial, and
 * each indexes every intermediate the block reads (or has extent 1). A
 * softmax over [1, 12, 128, 128] reads its row sums [1, 12, 128] by the
 * first three loops, so its rows are the three; the last loop runs along
 * the row. With no intermediate read, the first loop. When every spatial
 * loop indexes them all, the leading loops that index them plainly (each
 * one of its own dimension: Winograd's output rows [n, h, tw, j, c] read
 * at [n, h, w / 4, ...] are computed per image row h), or the first loop
 * when there are none or all are (a pool reading its padding). */
static int row_loops(const ts_sched *s, const ts_stmt *cr, const ts_rv *cl,
                     int ncl) {
  const ts_func *f = ts_sched_func(s);
  const ts_block *cb = ts_realize_block(cr);
  int depth = 0, spatial = 0;
  while (spatial < ncl) {
    const ts_stmt *l = ts_sched_rv_loop(s, cl[spatial]);
    if (!l || loop_binding(cr, l) != BIND_SPATIAL) break;
    spatial++;
  }
  for (; depth < ncl; depth++) {
    const ts_stmt *l = ts_sched_rv_loop(s, cl[depth]);
    if (!l || loop_binding(cr, l) != BIND_SPATIAL) break;
    if (rv_extent(s, cl[depth]) == 1) continue;
    bool all = true, any = false;
    for (int i = 0; i < ts_block_n_reads(cb) && all; i++) {
      const ts_region *rg = ts_block_read(cb, i);
      if (is_param(f, rg->buffer)) continue;
      any = true;
      all = loop_indexes(cr, l, rg);
    }
    if (!any) return 1;
    if (!all) break;
  }
  if (depth < spatial) return depth;
  int plain = 0;
  for (; plain < spatial; plain++) {
    const ts_stmt *l = ts_sched_rv_loop(s, cl[plain]);
    bool all = true;
    for (int i = 0; i < ts_block_n_reads(cb) && all; i++) {
      const ts_region *rg = ts_block_read(cb, i);
      if (!is_param(f, rg->buffer))
        all = rv_extent(s, cl[plain]) == 1 || loop_indexes_plainly(cr, l, rg);
    }
    if (!all) break;
  }
  return plain >= 1 && plain < spatial ? plain : 1;
}

void producers_at_output(ts_sched *s) {
  int n = 0;
  char **names = block_names(ts_sched_func(s), &n);
  if (!names) return;
  int out = -1;
  for (int i = n - 1; i >= 0 && out < 0; i--) {
    const ts_stmt *r = ts_func_find_block(ts_sched_func(s), names[i]);
    if (r && block_writes_param(ts_sched_func(s), ts_realize_block(r))) out = i;
  }
  for (int i = out - 1; i >= 0; i--) {
    const ts_func *f = ts_sched_func(s);
    const ts_stmt *r = ts_func_find_block(f, names[i]);
    const ts_stmt *cr = ts_func_find_block(f, names[out]);
    if (!r || !cr || block_writes_param(f, ts_realize_block(r))) continue;
    ts_rv b, cb, cl[MAX_LOOPS];
    int ncl = 0;
    if (ts_sched_get_block(s, names[i], &b) ||
        ts_sched_get_block(s, names[out], &cb) ||
        ts_sched_get_loops(s, cb, cl, MAX_LOOPS, &ncl) || ncl == 0)
      continue;
    int depth = row_loops(s, cr, cl, ncl);
    int64_t rows = 1;
    for (int d = 0; d < depth; d++) rows *= rv_extent(s, cl[d]);
    if (depth < 1 || rows < 2) continue;
    ts_sched_compute_at(s, b, cl[depth - 1]);
  }
  names_free(names, n);
}

/* Whether some input of the block (region of a buffer it does not write)
 * is indexed by both loops' vars (through the block's bindings). */
bool shares_input(const ts_stmt *r, const ts_stmt *la, const ts_stmt *lb) {
  const ts_block *b = ts_realize_block(r);
  for (int i = 0; i < ts_block_n_reads(b); i++) {
    const ts_region *rg = ts_block_read(b, i);
    bool writes = false;
    for (int w = 0; w < ts_block_n_writes(b); w++)
      writes |= ts_block_write(b, w)->buffer == rg->buffer;
    if (writes) continue;
    bool ua = false, ub = false;
    for (int k = 0; k < ts_block_n_iters(b); k++) {
      ts_expr *iv = ts_block_iter_var(b, k);
      bool used = false;
      for (int d = 0; d < rg->ndim && !used; d++)
        used = expr_uses_var(rg->ranges[d].min, iv);
      if (!used) continue;
      ts_expr *bind = ts_realize_value(r, k);
      ua |= expr_uses_var(bind, ts_for_var(la));
      ub |= expr_uses_var(bind, ts_for_var(lb));
    }
    if (ua && ub) return true;
  }
  return false;
}

bool pixels_fusible(ts_sched *s, const ts_stmt *r, const ts_rv *loops,
                    const int *binds, int nl, int rows, int cols, int vec,
                    int lanes, int regs) {
  if (rows < 0 || cols != rows + 1 || binds[rows] != BIND_SPATIAL ||
      shares_input(r, ts_sched_rv_loop(s, loops[rows]),
                   ts_sched_rv_loop(s, loops[vec])))
    return false;
  int64_t red = 1;
  for (int k = nl - 1; k >= 0; k--)
    if (binds[k] == BIND_REDUCE) {
      red = rv_extent(s, loops[k]);
      break;
    }
  return default_pixels_better(rv_extent(s, loops[rows]),
                               rv_extent(s, loops[cols]),
                               rv_extent(s, loops[vec]), red, lanes, regs);
}
