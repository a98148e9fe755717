/*
 * rules_cpu.c — the design-space rules of CPU targets, which the "cpu" rule
 * list (rule_lists.c) composes:
 *  - a variant keeping an expensive block read by several consumers as a
 *    stage of its own, beside the state where auto-inline (the framework's)
 *    inlines it;
 *  - a variant with padding inlined into a consumer that reads it once per
 *    tap (a depthwise conv), whose guards the code generator partitions;
 *  - add-rfactor: a reduction of little spatial extent gets its reduce
 *    loops' outer part factored out as a parallel dimension, a reduction
 *    without reuse its innermost reduce loop's vector lanes;
 *  - multi-level tiling SSRSRS of reductions with reuse, with cache-write
 *    and cache-read variants (spatial tiles sampled by sample_tile: perfect
 *    or not, the lowering partitions the imperfect ones), and for convs
 *    whose output columns cannot fill a register tile, variants tiling
 *    their pixels;
 *  - parallelize-vectorize-unroll of the root block.
 * The tensorization variants of the tiling are in rules_tensorize.c, the
 * GPU rules in rules_gpu.c.
 */
#include "tuner/rule_framework.h"

#include <stdio.h>
#include <string.h>

/* ========================================================================
 * Keeping an expensive block materialized
 * ======================================================================== */

/* Inlining a block into several consumers computes its body once per
 * consumer. Where that body is expensive (softmax's exp, read by the row
 * sum and by the normalization) the CPU space keeps, besides the inlined
 * state, one in which the block stays a stage of its own, placed by the
 * random compute location rule (Ansor inlines such blocks only when it is
 * free: "strictly inlineable"). Returns whether *keep got such a copy of
 * state st, taken before the inline rule runs. */
bool rule_keep_materialized(const gen *g, const gen_state *st, const char *name,
                            gen_state *keep) {
  ts_sched *s = st->s;
  const ts_func *f = ts_sched_func(s);
  const ts_block *b = ts_realize_block(ts_func_find_block(f, name));
  if (g->n >= MAX_STATES || block_is_reduction(b) || block_writes_param(f, b) ||
      !stmt_uses_expensive_call(ts_block_body(b)))
    return false;
  ts_rv rv, cons[MAX_BLOCKS];
  int nc = 0;
  if (ts_sched_get_block(s, name, &rv) ||
      ts_sched_get_consumers(s, rv, cons, MAX_BLOCKS, &nc) || nc < 2 ||
      state_fork(st, keep, NULL))
    return false;
  state_append_name(keep, "%s: materialized", name);
  return true;
}

/* ========================================================================
 * Padding inlined where it is read once per tap
 * ======================================================================== */

/* Which iter vars of consumer block `cons` index its loads of buffer buf. */
typedef struct pad_reads {
  const ts_buffer *buf;
  const ts_block *cons;
  bool indexed[64];
  bool found;
} pad_reads;

static void mark_iter_fn(void *ctx, ts_expr *e) {
  pad_reads *u = ctx;
  for (int i = 0; i < ts_block_n_iters(u->cons) && i < 64; i++)
    if (ts_block_iter_var(u->cons, i) == e) u->indexed[i] = true;
}

static void pad_reads_fn(void *ctx, ts_expr *e) {
  pad_reads *u = ctx;
  if (ts_expr_kind_of(e) != TS_EXPR_LOAD || ts_expr_buffer(e) != u->buf) return;
  u->found = true;
  for (int k = 0; k < ts_expr_n_operands(e); k++)
    ts_expr_walk(ts_expr_operand(e, k), mark_iter_fn, u);
}

static void pad_reads_visit(void *ctx, ts_expr *e) {
  ts_expr_walk(e, pad_reads_fn, ctx);
}

/* Whether consumer block cons reads buf with every one of its spatial
 * iter vars in the indices: no output element shares a read with another
 * but through the window's taps (a depthwise conv, a pooling; not a dense
 * conv, whose output channels all read one pixel). */
static bool read_once_per_tap(const ts_block *cons, const ts_buffer *buf) {
  if (ts_block_n_iters(cons) > 64) return false;
  pad_reads u = {.buf = buf, .cons = cons};
  ts_visitor v = {.visit_expr = pad_reads_visit, .ctx = &u};
  ts_stmt_walk(ts_block_body(cons), &v);
  if (!u.found) return false;
  for (int i = 0; i < ts_block_n_iters(cons); i++)
    if (ts_block_iter_kind(cons, i) == TS_ITER_SPATIAL && !u.indexed[i])
      return false;
  return true;
}

/* A padding block (computing through if_then_else) stays a stage of its
 * own in the CPU space (rule_auto_inline): inlined, its guard would run at
 * every tap. The code generator partitions such guards
 * (codegen/partition.c: the interior of the image reads without them), so
 * where the padded copy costs about what the consumer's own reads do — a
 * consumer reading each padded element once per tap, a depthwise conv or
 * a pooling — the space also has the padding inlined, in a state of its
 * own (`pad: inlined`), and measurement chooses. So does a dense conv that
 * the default schedule reads inline (default_pads_read_inline: a 3 x 3
 * kernel, or a strided conv whose copy is costly): the code generator
 * partitions its border tiles again under the kernel's loops and drops
 * the taps outside the image. Returns whether *out got
 * such a state, forked from st. */
bool rule_cpu_padding_inlined(const gen *g, const gen_state *st,
                              const char *name, gen_state *out) {
  ts_sched *s = st->s;
  const ts_func *f = ts_sched_func(s);
  const ts_stmt *r = ts_func_find_block(f, name);
  if (!r || g->n >= MAX_STATES) return false;
  const ts_block *b = ts_realize_block(r);
  if (block_is_reduction(b) || block_writes_param(f, b) ||
      ts_block_n_writes(b) != 1 || !stmt_uses_if_then_else(ts_block_body(b)))
    return false;
  ts_rv rv, cons[MAX_BLOCKS];
  int nc = 0;
  if (ts_sched_get_block(s, name, &rv) ||
      ts_sched_get_consumers(s, rv, cons, MAX_BLOCKS, &nc) || nc == 0)
    return false;
  bool costly;
  for (int i = 0; i < nc; i++) {
    const char *cn = ts_sched_rv_block_name(s, cons[i]);
    const ts_stmt *cr = cn ? ts_func_find_block(f, cn) : NULL;
    if (!cr) return false;
    if (!read_once_per_tap(ts_realize_block(cr),
                           ts_block_write(b, 0)->buffer) &&
        !default_pads_read_inline(s, g->t, cons[i], &costly))
      return false;
  }
  if (state_fork(st, out, NULL)) return false;
  if (ts_sched_get_block(out->s, name, &rv) ||
      ts_sched_compute_inline(out->s, rv)) {
    state_clear(out);
    return false;
  }
  state_append_name(out, "%s: inlined", name);
  return true;
}

/* ========================================================================
 * Multi-level tiling (CPU: SSRSRS)
 * ======================================================================== */

/* The last loop of tile level lv (or of the nearest non-empty level above
 * it); TS_RV_NONE when there is none. */
static ts_rv last_loop_upto(const tiles *t, int lv) {
  for (int l = lv; l >= 0; l--)
    if (t->n_level[l] > 0) return t->level[l][t->n_level[l] - 1];
  return t->n_outer ? t->outer[t->n_outer - 1] : TS_RV_NONE;
}

/* The input the innermost spatial tile loop moves along (B of a matmul,
 * the weights of an NHWC conv): its name into out; false when there is no
 * single such input. */
static bool streamed_input(ts_sched *s, const char *name, const tiles *t,
                           char *out, size_t cap) {
  if (!t->n_level[5]) return false;
  const ts_stmt *r = ts_func_find_block(ts_sched_func(s), name);
  const ts_stmt *l = ts_sched_rv_loop(s, t->level[5][t->n_level[5] - 1]);
  if (!r || !l) return false;
  const ts_block *b = ts_realize_block(r);
  const ts_buffer *outb =
      ts_block_n_writes(b) == 1 ? ts_block_write(b, 0)->buffer : NULL;
  int found = 0;
  for (int i = 0; i < ts_block_n_reads(b); i++) {
    const ts_region *rg = ts_block_read(b, i);
    if (rg->buffer == outb) continue;
    bool moves = false;
    for (int k = 0; k < ts_block_n_iters(b) && !moves; k++) {
      if (!expr_uses_var(ts_realize_value(r, k), ts_for_var(l))) continue;
      for (int d = 0; d < rg->ndim && !moves; d++)
        moves = expr_uses_var(rg->ranges[d].min, ts_block_iter_var(b, k));
    }
    if (moves) {
      snprintf(out, cap, "%s", ts_buffer_name(rg->buffer));
      found++;
    }
  }
  return found == 1;
}

/* SSRSRS tiling of `name`, then (level 1 or 2) its output written through a
 * local cache (or its elementwise consumer fused) at the end of that tile
 * level, and (read_level 1 or 2) its streamed input read through a cache
 * at the end of that tile level. */
static int mlt_cpu(const gen *g, gen_state *st, const char *name, int level,
                   int read_level) {
  ts_sched *s = st->s;
  tiles t;
  /* register tiles that need not divide the extents: the columns a
   * multiple of the vector length, the rows up to what the vector
   * registers hold besides the operands */
  tile_imperfect im = {0, 0}, *imp = NULL;
  const ts_block *blk0 =
      ts_realize_block(ts_func_find_block(ts_sched_func(s), name));
  if (ts_block_n_writes(blk0) == 1) {
    int bits = ts_buffer_dtype(ts_block_write(blk0, 0)->buffer).bits;
    int regs = ts_target_vector_registers(g->t);
    im.lanes = bits > 0 ? ts_target_vector_bits(g->t) / bits : 1;
    im.max_rows = regs > 4 ? regs - 2 : regs;
    imp = &im;
  }
  int rc = tile_block_ex(s, name, "SSRSRS", g->o->max_innermost_factor, NULL, 0,
                         imp, &t);
  if (rc) return rc;
  if (read_level > 0) {
    /* the streamed input copied into a cache at the end of tile level 1
     * or 2: the code generator allocates it per iteration there and
     * compacts it to the region used, a packed panel (the reduction's
     * extent under it by the tile's width) reused by every row tile
     * inside */
    char buf[128];
    ts_rv b, cr;
    ts_rv at = last_loop_upto(&t, read_level - 1);
    if (at == TS_RV_NONE || !streamed_input(s, name, &t, buf, sizeof buf))
      return TS_ESCHEDULE;
    if ((rc = ts_sched_get_block(s, name, &b))) return rc;
    /* an input whose innermost dimension is not the one the vector tile
     * moves along (B of a product with transpose_b) is packed with that
     * dimension last, so the tile reads the panel along the vector */
    const ts_stmt *r = ts_func_find_block(ts_sched_func(s), name);
    const ts_stmt *lv = ts_sched_rv_loop(s, t.level[5][t.n_level[5] - 1]);
    const ts_buffer *sb = NULL;
    for (int i = 0; r && i < ts_block_n_reads(ts_realize_block(r)); i++)
      if (!strcmp(ts_buffer_name(ts_block_read(ts_realize_block(r), i)->buffer),
                  buf))
        sb = ts_block_read(ts_realize_block(r), i)->buffer;
    int dim = sb && lv ? read_dim_of_loop(r, sb, lv) : -1;
    if (dim >= 0 && dim < ts_buffer_ndim(sb) - 1)
      rc = cache_read_dim_last(s, b, buf, dim, &cr);
    else
      rc = ts_sched_cache_read(s, b, buf, "global", &cr);
    if (rc || (rc = ts_sched_compute_at(s, cr, at))) return rc;
  }
  if (level > 0) {
    /* SSRSRS: level 1 ends after group 0, level 2 after group 1 */
    ts_rv at = last_loop_upto(&t, level - 1);
    if (at == TS_RV_NONE) return TS_ESCHEDULE;
    ts_rv b, cons, cw;
    if ((rc = ts_sched_get_block(s, name, &b))) return rc;
    if (fusible_consumer(s, b, &cons) == 0) {
      rc = ts_sched_reverse_compute_at(s, cons, at);
    } else {
      const ts_block *blk =
          ts_realize_block(ts_func_find_block(ts_sched_func(s), name));
      if (ts_block_n_writes(blk) != 1) return TS_ESCHEDULE;
      const char *buf = ts_buffer_name(ts_block_write(blk, 0)->buffer);
      char bufname[128];
      snprintf(bufname, sizeof bufname, "%s", buf);
      if ((rc = ts_sched_cache_write(s, b, bufname, "local", &cw))) return rc;
      rc = ts_sched_reverse_compute_at(s, cw, at);
    }
    if (rc) return rc;
  }
  state_mark_tiled(st, name);
  return TS_OK;
}

/* Pixel tiles: a conv whose output columns are too few for a register tile
 * (the 7 columns of a late ResNet conv: 7 x 1 vector) gets its output
 * rows fused with its columns first, so the rows level of the tiling runs
 * over the image's pixels in order and may take a ceil split of them (49
 * pixels: 6 x 2 vectors), as the default schedule does
 * (default_pixels_better decides for both). The rows are the spatial loop
 * just outside the columns, and neither may index an input that the
 * vector axis (the output channels) indexes. True when it fused. */
static bool fuse_pixels(const gen *g, ts_sched *s, const char *name) {
  ts_rv b, loops[MAX_LOOPS];
  int nl = 0;
  const ts_stmt *r = ts_func_find_block(ts_sched_func(s), name);
  if (!r || ts_sched_get_block(s, name, &b) ||
      ts_sched_get_loops(s, b, loops, MAX_LOOPS, &nl) || nl < 3)
    return false;
  const ts_block *blk = ts_realize_block(r);
  if (ts_block_n_writes(blk) != 1) return false;
  int binds[MAX_LOOPS], vec = -1;
  for (int i = 0; i < nl; i++) {
    const ts_stmt *l = ts_sched_rv_loop(s, loops[i]);
    binds[i] = l ? loop_binding(r, l) : 0;
    if (binds[i] == BIND_SPATIAL && rv_extent(s, loops[i]) > 1) vec = i;
  }
  if (vec < 2) return false;
  const ts_stmt *lv = ts_sched_rv_loop(s, loops[vec]);
  int cols = -1;
  for (int i = vec - 1; i >= 0 && cols < 0; i--)
    if (binds[i] == BIND_SPATIAL && rv_extent(s, loops[i]) > 1 &&
        !shares_input(r, ts_sched_rv_loop(s, loops[i]), lv))
      cols = i;
  int bits = ts_buffer_dtype(ts_block_write(blk, 0)->buffer).bits;
  int lanes = bits > 0 ? ts_target_vector_bits(g->t) / bits : 1;
  if (cols < 1 || !pixels_fusible(s, r, loops, binds, nl, cols - 1, cols, vec,
                                  lanes, ts_target_vector_registers(g->t)))
    return false;
  ts_rv pair[2] = {loops[cols - 1], loops[cols]}, fused;
  return ts_sched_fuse(s, pair, 2, &fused) == TS_OK;
}

/* The padded variants: the block's vector axis (its innermost spatial
 * loop) padded to whole vectors by pad_einsum where no vector divides it
 * and the padding adds at most a third (61 -> 64, 45 -> 48 on 16 lanes;
 * not 20 -> 32), so that the sampled tiles divide it and no tile is
 * guarded; the measurement chooses between the padded and the ragged
 * forms. Only for widths below 8 vectors: a wider one (1065 columns) has
 * one ragged tile among many, and its space is left as it was. The input
 * copies' names into pads (their count into *np). True when it padded. */
static bool pad_vector_axis(const gen *g, ts_sched *s, const char *name,
                            char (*pads)[DEFAULT_NAME_MAX], int *np) {
  *np = 0;
  ts_rv b, loops[MAX_LOOPS];
  int nl = 0;
  const ts_stmt *r = ts_func_find_block(ts_sched_func(s), name);
  if (!r || ts_sched_get_block(s, name, &b) ||
      ts_sched_get_loops(s, b, loops, MAX_LOOPS, &nl) || nl < 2)
    return false;
  const ts_block *blk = ts_realize_block(r);
  if (ts_block_n_writes(blk) != 1) return false;
  int vec = -1;
  for (int i = 0; i < nl; i++) {
    const ts_stmt *l = ts_sched_rv_loop(s, loops[i]);
    if (l && loop_binding(r, l) == BIND_SPATIAL && rv_extent(s, loops[i]) > 1)
      vec = i;
  }
  /* (32- and 64-bit floats in and out: the narrower types go to the
   * tensorized variants, whose spaces these would crowd out) */
  ts_dtype dt = ts_buffer_dtype(ts_block_write(blk, 0)->buffer);
  int lanes = dt.bits > 0 ? ts_target_vector_bits(g->t) / dt.bits : 1;
  if (vec < 0 || lanes < 2 || !ts_dtype_is_float(dt) || dt.bits < 32)
    return false;
  for (int i = 0; i < ts_block_n_reads(blk); i++) {
    ts_dtype it = ts_buffer_dtype(ts_block_read(blk, i)->buffer);
    if (!ts_dtype_is_float(it) || it.bits < 32) return false;
  }
  const ts_stmt *lv = ts_sched_rv_loop(s, loops[vec]);
  int64_t ev = rv_extent(s, loops[vec]);
  int64_t padded = (ev + lanes - 1) / lanes * lanes;
  if (ev % lanes == 0 || 3 * padded > 4 * ev || ev >= 8 * lanes ||
      !default_loop_contiguous(r, lv))
    return false;
  int got =
      default_pad_loop(s, b, r, lv, lanes, pads, DEFAULT_PAD_COPIES, NULL);
  if (got < 0) return false;
  *np = got;
  return true;
}

int rule_cpu_tiling(const gen *g, const gen_state *st, const char *name,
                    gen_state *out, int cap) {
  if (!block_needs_tiling(st, name)) return 0;
  int n = 0;
  int levels = g->o->cache_write ? 3 : 1;
  char pads[DEFAULT_PAD_COPIES][DEFAULT_NAME_MAX];
  int np = 0;
  /* px 1: the pixel variants, where fuse_pixels applies. Their output is
   * not cached nor their consumer fused at a tile level: a tile of pixels
   * spans parts of two image rows, and the box of them that a consumer
   * placed there covers is whole rows, copied again at every tile (a relu
   * placed so made the default schedule of ResNet-18's strided conv 3.5 x
   * slower in the model). */
  for (int pd = 0; pd < 2; pd++)
    for (int px = 0; px < 2; px++)
      for (int rl = 0; rl < (g->o->cache_read ? 3 : 1); rl++)
        for (int lv = 0; lv < (px ? 1 : levels) && n < cap; lv++) {
          if (state_fork(st, &out[n], NULL)) continue;
          if ((pd && !pad_vector_axis(g, out[n].s, name, pads, &np)) ||
              (px && !fuse_pixels(g, out[n].s, name)) ||
              mlt_cpu(g, &out[n], name, lv, rl)) {
            state_clear(&out[n]);
            if (pd && np == 0 && !px && !rl && !lv) return n; /* no pad */
            continue;
          }
          /* a padded input that a packed copy now reads: the padding
           * part of that copy */
          if (pd) default_inline_pads(out[n].s, name, pads, np);
          state_append_name(&out[n], "%s: mlt", name);
          if (pd) state_append_name(&out[n], "padded");
          if (px) state_append_name(&out[n], "pixels");
          if (lv) state_append_name(&out[n], "cache_write@%d", lv);
          if (rl) state_append_name(&out[n], "cache_read@%d", rl);
          n++;
        }
  return n;
}

/* ========================================================================
 * Add-rfactor (CPU)
 * ======================================================================== */

/* A reduction whose spatial extent is below the parallelism the machine
 * wants: the reduce loops, fused and split in two by a sampled tile, with
 * the outer part factored out as a spatial (parallel) dimension. */
static int rfactor_cpu(const gen *g, gen_state *st, const char *name) {
  ts_sched *s = st->s;
  ts_rv b, loops[MAX_LOOPS];
  int nl = 0, rc;
  if ((rc = ts_sched_get_block(s, name, &b)) ||
      (rc = ts_sched_get_loops(s, b, loops, MAX_LOOPS, &nl)))
    return rc;
  const ts_stmt *r = ts_func_find_block(ts_sched_func(s), name);
  ts_rv red[MAX_LOOPS];
  int nred = 0;
  int64_t spatial = 1, reduce = 1;
  for (int i = 0; i < nl; i++) {
    const ts_stmt *l = ts_sched_rv_loop(s, loops[i]);
    int bind = l ? loop_binding(r, l) : 0;
    int64_t ext = rv_extent(s, loops[i]);
    if (bind == BIND_REDUCE) {
      red[nred++] = loops[i];
      reduce *= ext;
    } else {
      if (nred) return TS_ESCHEDULE; /* the reduce loops must be innermost */
      spatial *= ext;
    }
  }
  int cores = ts_target_num_cores(g->t);
  if (nred == 0 || spatial >= (int64_t)cores * 16 || reduce < 64)
    return TS_ESCHEDULE;
  ts_rv fused = red[0];
  if (nred > 1 && (rc = ts_sched_fuse(s, red, nred, &fused))) return rc;
  ts_rv f[2], parts[2], rf;
  if ((rc = ts_sched_sample_perfect_tile(s, fused, 2,
                                         g->o->max_innermost_factor, f)) ||
      (rc = ts_sched_split_rv(s, fused, f, 2, parts)) ||
      (rc = ts_sched_rfactor(s, parts[0], 0, &rf)))
    return rc;
  return TS_OK;
}

/* A reduction without reuse (a row sum or maximum) whose spatial extent
 * already feeds every core: its innermost reduce loop split by the vector
 * length of the dtype and the inner part factored out (rfactor) as a
 * spatial dimension, so the partial results are computed a whole vector at
 * a time (a max or min reduction is otherwise scalar: the code generator
 * may reorder sums but not NaN-aware maxima) and then combined. */
static int rfactor_vector_cpu(const gen *g, gen_state *st, const char *name) {
  return vector_rfactor(st->s, g->t, name, 1, 4, false, false);
}

/* Row reductions in one pass: a row reduction without spatial reuse and
 * an earlier one (not scheduled yet: rules run consumers first) reading a
 * buffer in common with it, neither depending on the other (layer norm's
 * sum and sum of squares): both factored four vectors at a time (rfactor,
 * as the default schedule does; as they are when the row is too short),
 * every stage computed at the output's row loop and the two reductions'
 * nests fused there (fuse_siblings), so one vectorized loop reads the row
 * once and feeds both sets of accumulators. The blocks are marked tiled:
 * their places are fixed, so a replay never finds them apart. Names the
 * earlier block in `with`. */
static int one_pass_cpu(const gen *g, gen_state *st, const char *name,
                        char *with, size_t cap) {
  ts_sched *s = st->s;
  const ts_func *f = ts_sched_func(s);
  const ts_stmt *r = ts_func_find_block(f, name);
  if (!r || block_has_spatial_reuse(r) ||
      !block_is_reduction(ts_realize_block(r)))
    return TS_ESCHEDULE;
  int n = 0;
  char **names = block_names(f, &n);
  if (!names) return TS_ENOMEM;
  int rc = TS_ESCHEDULE;
  for (int i = 0; i < n && rc; i++) {
    if (!strcmp(names[i], name)) break;
    const ts_stmt *e = ts_func_find_block(f, names[i]);
    if (e && block_is_reduction(ts_realize_block(e)) &&
        !block_has_spatial_reuse(e) && !state_tiled(st, names[i]) &&
        reductions_share_input(ts_realize_block(e), ts_realize_block(r))) {
      snprintf(with, cap, "%s", names[i]);
      rc = TS_OK;
    }
  }
  names_free(names, n);
  if (rc) return rc;
  const char *pair[2] = {with, name};
  bool factored[2];
  for (int k = 0; k < 2; k++)
    factored[k] = vector_rfactor(s, g->t, pair[k], 4, 16, true, false) == 0;
  if (factored[0] != factored[1]) return TS_ESCHEDULE;
  producers_at_output(s);
  if (fuse_sibling_reductions(s, g->t) == 0) return TS_ESCHEDULE;
  for (int k = 0; k < 2; k++) {
    char rf[160];
    snprintf(rf, sizeof rf, "%s_rf", pair[k]);
    state_mark_tiled(st, pair[k]);
    if (!factored[k]) continue;
    state_mark_tiled(st, rf);
    /* the lanes of the partial sums (one loop for both) vectorized */
    ts_rv b, loops[MAX_LOOPS];
    int nl = 0;
    const ts_stmt *l = NULL;
    if (!ts_sched_get_block(s, rf, &b) &&
        !ts_sched_get_loops(s, b, loops, MAX_LOOPS, &nl) && nl > 0)
      l = ts_sched_rv_loop(s, loops[nl - 1]);
    if (l && ts_for_kind_of(l) == TS_FOR_SERIAL)
      ts_sched_vectorize(s, loops[nl - 1]);
  }
  return TS_OK;
}

int rule_cpu_rfactor(const gen *g, const gen_state *st, const char *name,
                     gen_state *out) {
  gen_state v;
  if (state_tiled(st, name) || state_fork(st, &v, NULL)) return 0;
  const char *how = "rfactor";
  char with[128] = "";
  if (rfactor_cpu(g, &v, name)) {
    state_clear(&v);
    if (state_fork(st, &v, NULL)) return 0;
    how = "one pass";
    if (one_pass_cpu(g, &v, name, with, sizeof with)) {
      state_clear(&v);
      if (state_fork(st, &v, NULL)) return 0;
      how = "rfactor_vector";
      if (rfactor_vector_cpu(g, &v, name)) {
        state_clear(&v);
        return 0;
      }
    }
  }
  if (with[0]) {
    state_append_name(&v, "%s+%s: %s", with, name, how);
    *out = v;
    return 1;
  }
  state_append_name(&v, "%s: %s", name, how);
  *out = v;
  return 1;
}

/* ========================================================================
 * Parallelize-vectorize-unroll
 * ======================================================================== */

int64_t output_bytes(const ts_func *f) {
  int64_t n = 0;
  for (int i = 0; i < ts_func_n_params(f); i++)
    if (ts_func_param_is_output(f, i))
      n += ts_buffer_bytes(ts_func_param(f, i));
  return n;
}

int64_t largest_input_bytes(const ts_func *f) {
  int64_t n = 0;
  for (int i = 0; i < ts_func_n_params(f); i++)
    if (!ts_func_param_is_output(f, i) &&
        ts_buffer_bytes(ts_func_param(f, i)) > n)
      n = ts_buffer_bytes(ts_func_param(f, i));
  return n;
}

/* Annotates the root block with the parallel, vectorize and unroll plans
 * the postprocessor turns into loop kinds, and, for outputs of
 * STREAM_MIN_BYTES or more, whether their stores bypass the caches
 * (non-temporal: an output larger than the caches is written to memory
 * without first reading each line in; measured, not assumed, since an
 * output that stays in the caches only loses), and, for an input of
 * PREFETCH_MIN_BYTES or more, whether the regions its loops read next are
 * prefetched (TS_ANN_PREFETCH: a weight panel read by many row tiles
 * comes from memory at its first tile otherwise; measured too). */
int rule_parallel_vectorize_unroll(const gen *g, gen_state *st) {
  ts_sched *s = st->s;
  const char *root = root_block_name(ts_sched_func(s));
  if (!root) return TS_OK;
  ts_rv rb, unroll, par;
  int rc;
  if ((rc = ts_sched_get_block(s, root, &rb))) return rc;
  static const int64_t steps[4] = {0, 16, 64, 512};
  static const double sp[4] = {0.25, 0.25, 0.25, 0.25};
  int cores = ts_target_num_cores(g->t);
  if (cores < 1) cores = 1;
  int64_t pc[3] = {cores, (int64_t)cores * 4, (int64_t)cores * 16};
  double pp[3] = {1.0 / 3, 1.0 / 3, 1.0 / 3};
  if ((rc = ts_sched_sample_categorical(s, pc, pp, 3, &par)) ||
      (rc = ts_sched_annotate_rv(s, rb, ANN_PARALLEL, par)) ||
      (rc = ts_sched_annotate(s, rb, ts_ann_int(ANN_VECTORIZE, 64))) ||
      (rc = ts_sched_sample_categorical(s, steps, sp, 4, &unroll)) ||
      (rc = ts_sched_annotate_rv(s, rb, ANN_UNROLL, unroll)))
    return rc;
  if (output_bytes(ts_sched_func(s)) >= STREAM_MIN_BYTES) {
    static const int64_t on[2] = {0, 1};
    static const double op[2] = {0.5, 0.5};
    ts_rv stream;
    if ((rc = ts_sched_sample_categorical(s, on, op, 2, &stream)) ||
        (rc = ts_sched_annotate_rv(s, rb, ANN_STREAM, stream)))
      return rc;
  }
  if (largest_input_bytes(ts_sched_func(s)) >= PREFETCH_MIN_BYTES) {
    static const int64_t on[2] = {0, 1};
    static const double op[2] = {0.5, 0.5};
    ts_rv pf;
    if ((rc = ts_sched_sample_categorical(s, on, op, 2, &pf)) ||
        (rc = ts_sched_annotate_rv(s, rb, ANN_PREFETCH, pf)))
      return rc;
  }
  return TS_OK;
}
