/*
 * default_attention.c — the default schedule of an attention task: the
 * scores S = Q . K^T, their row maximum, exp(S - max), its row sum, the
 * product U = exp . V and O = U / sum in one function (the graph
 * compiler's attention group, graph/fuse.c).
 *
 * Scheduled apart, the scores and the probabilities are written to memory
 * and read back: [8, 1500, 1500] floats per layer of a Whisper-like
 * encoder, 72 MB each way, which made the three kernels memory-bound. Here
 * the product's rows are tiled by a register tile's height R and every
 * earlier stage is computed at that row tile: R rows of scores (R x N
 * floats, in the first cache levels), their maximum, exponentials and sum,
 * then the R x E tile of the product and its division. Both products get
 * register tiles (R rows by up to four vectors, the accumulators in
 * registers); the reductions over the row get vector accumulators
 * (vector_rfactor), the exponentials four vectors at a time; the batch and
 * row-tile loops are fused and parallel. R is chosen for both products at
 * once (row_tile), a divisor of the rows where one is near.
 *
 * With `sample` the same steps make a design space (ts_space_generate's
 * `attention` space): the row tile and both products' vector widths are
 * sampled, the rest is as above. The graph compiler keeps an attention
 * group only where this schedule applies (ts_default_attention_applies).
 */
#include "tuner/rule_framework.h"

#include <string.h>
#include <stdio.h>

/* The widest register tile (1 to 4 vectors) of R rows for a product
 * whose vector axis is `ev` long (`divide`: the vectors dividing ev's),
 * and its FMAs per load, R v / (R + v), in *score. */
static int64_t tile_vectors(int64_t ev, int lanes, int regs, bool divide,
                            int64_t R, double *score) {
  int64_t nv = (ev + lanes - 1) / lanes, best = 0;
  for (int64_t v = 1; v <= 4 && v <= nv; v++)
    if ((!divide || nv % v == 0) && default_rows_cap(regs, v) >= R) best = v;
  *score = best ? (double)(R * best) / (double)(R + best) : 0;
  return best;
}

/* The rows R of the row tile, shared by both products, and their vector
 * widths: the most FMAs per load summed over the two tiles, the most rows
 * among those within 5 % of the best (a taller tile also shares the
 * rows' softmax work and K's and V's panels among more rows: on AVX2,
 * 6 rows of 2 vectors each ran the Whisper-like task 8 % faster than 4
 * of 3 and 2, which score 2 % higher). */
static int64_t row_tile(int64_t N, int64_t E, int lanes, int regs, int64_t *vs,
                        int64_t *vu) {
  double score[9] = {0}, best = 0;
  for (int64_t r = 2; r <= 8; r++) {
    double a, b;
    if (tile_vectors(N, lanes, regs, false, r, &a) &&
        tile_vectors(E, lanes, regs, true, r, &b))
      score[r] = a + b;
    if (score[r] > best) best = score[r];
  }
  int64_t R = 1;
  for (int64_t r = 8; r >= 2 && R == 1; r--)
    if (score[r] > 0 && score[r] >= 0.95 * best) R = r;
  double unused;
  *vs = tile_vectors(N, lanes, regs, false, R, &unused);
  *vu = tile_vectors(E, lanes, regs, true, R, &unused);
  if (!*vs) *vs = 1;
  if (!*vu) *vu = 1;
  return R;
}

/* The loops of block `name` (at most MAX_LOOPS); 0 when it has none. */
static int loops_of(ts_sched *s, const char *name, ts_rv *b, ts_rv *loops) {
  int nl = 0;
  if (ts_sched_get_block(s, name, b) ||
      ts_sched_get_loops(s, *b, loops, MAX_LOOPS, &nl))
    return 0;
  return nl;
}

/* Splits loop l by `inner` (ceil-wise: a guard where it does not divide);
 * out gets the two loops. */
static bool split2(ts_sched *s, ts_rv l, int64_t inner, ts_rv *out) {
  int64_t f[2] = {TS_SPLIT_INFER, inner};
  return ts_sched_split(s, l, f, 2, out) == TS_OK;
}

/* split2 by `inner`, or, in a design space (`sample`), by a sampled
 * factor of at most `max` in multiples of `step` where the extent allows
 * (sample_tile: not necessarily dividing), which the search decides. */
static bool split_tile(ts_sched *s, ts_rv l, int64_t inner, bool sample,
                       int64_t max, int64_t step, ts_rv *out) {
  if (!sample) return split2(s, l, inner, out);
  int64_t ext = rv_extent(s, l);
  if (step > ext) step = 1;
  if (max > ext) max = ext;
  if (max < step) max = step;
  ts_rv f[2];
  return ts_sched_sample_tile(s, l, 2, (int)max, (int)step, f) == TS_OK &&
         ts_sched_split_rv(s, l, f, 2, out) == TS_OK;
}

/* A product nest under the row tile: loops [..., rows, cols, red] from
 * `first` (the block's loops below the row tile) become cols/W, red, rows,
 * W: R x W accumulators, the rows unrolled and W vectorized, the init
 * decomposed. */
static bool tile_product(ts_sched *s, const ts_target *t, const char *name,
                         int first, int64_t w, bool sample, int lanes) {
  ts_rv b, l[MAX_LOOPS];
  int nl = loops_of(s, name, &b, l);
  if (nl != first + 3) return false;
  ts_rv c[2];
  if (!split_tile(s, l[first + 1], w, sample, 4 * (int64_t)lanes, lanes, c))
    return false;
  ts_rv order[4] = {c[0], l[first + 2], l[first], c[1]};
  if (ts_sched_reorder(s, order, 4)) return false;
  ts_rv init;
  if (ts_sched_decompose_reduction(s, b, l[first + 2], &init)) return false;
  ts_sched_unroll(s, l[first]);
  ts_sched_vectorize(s, c[1]);
  char iname[160];
  const char *in = ts_sched_rv_block_name(s, init);
  snprintf(iname, sizeof iname, "%s", in ? in : "");
  if (iname[0]) default_vectorize_inner(s, t, iname);
  return true;
}

/* The two products of an attention task among its blocks names[0..n):
 * S, the first block, and U, the last reduction with an input that misses
 * one of its spatial iters (the row stages between may have such inputs
 * too: a mask broadcast over the rows). */
static bool find_products(ts_sched *s, char **names, int n, int *anchors) {
  anchors[0] = anchors[1] = -1;
  for (int i = 0; i < n; i++) {
    const ts_stmt *r = ts_func_find_block(ts_sched_func(s), names[i]);
    if (!r) return false;
    if (block_is_reduction(ts_realize_block(r)) && block_has_spatial_reuse(r))
      anchors[anchors[0] < 0 ? 0 : 1] = i;
  }
  return anchors[0] == 0 && anchors[1] > 0;
}

bool default_attention(ts_sched *s, const ts_target *t, bool sample) {
  const ts_func *f = ts_sched_func(s);
  int n = 0;
  char **names = block_names(f, &n);
  if (!names) return false;
  int anchors[2];
  bool ok = n >= 4 && n <= MAX_BLOCKS && find_products(s, names, n, anchors);
  /* S first, U after the row stages, only elementwise blocks after U */
  ok = ok && anchors[1] >= 2 && anchors[1] < n - 1;
  for (int i = anchors[1] + 1; ok && i < n; i++) {
    const ts_stmt *r = ts_func_find_block(f, names[i]);
    ok = r && !block_is_reduction(ts_realize_block(r));
  }
  int lanes = default_lanes_of(t, TS_FLOAT32),
      regs = ts_target_vector_registers(t);
  if (regs < 8) regs = 16;
  ts_rv ub, ul[MAX_LOOPS], sb, sl[MAX_LOOPS];
  int nu = ok ? loops_of(s, names[anchors[1]], &ub, ul) : 0;
  int ns = ok ? loops_of(s, names[0], &sb, sl) : 0;
  /* U: [batch..., i, e, j]; S: [batch..., i, j, d], the same batch and
   * rows, each with its columns contiguous */
  ok = ok && lanes >= 4 && nu >= 3 && ns == nu;
  const ts_stmt *ur = ok ? ts_func_find_block(f, names[anchors[1]]) : NULL;
  const ts_stmt *sr = ok ? ts_func_find_block(f, names[0]) : NULL;
  for (int k = 0; ok && k < nu; k++) {
    int want = k == nu - 1 ? BIND_REDUCE : BIND_SPATIAL;
    ok = loop_binding(ur, ts_sched_rv_loop(s, ul[k])) == want &&
         loop_binding(sr, ts_sched_rv_loop(s, sl[k])) == want &&
         (k >= nu - 2 || rv_extent(s, ul[k]) == rv_extent(s, sl[k]));
  }
  ok = ok && default_loop_contiguous(ur, ts_sched_rv_loop(s, ul[nu - 2])) &&
       default_loop_contiguous(sr, ts_sched_rv_loop(s, sl[nu - 2]));
  if (!ok) {
    names_free(names, n);
    return false;
  }
  int64_t E = rv_extent(s, ul[nu - 2]), N = rv_extent(s, sl[nu - 2]);
  int64_t vs, vu, R = row_tile(N, E, lanes, regs, &vs, &vu);
  /* the scores' column tile at most half the row, so that most tiles are
   * whole (one tile of 64 over 49 keys is all masked: Swin-like task
   * 0.68 -> 0.47 ms with tiles of 16, found by tuning) */
  while (vs > 1 && N < 2 * vs * lanes) vs--;
  int64_t wu = vu * lanes, ws = vs * lanes;
  /* rows that divide M where some do, down to half the budget: a guard on
   * the tile's rows (128 rows by 6) cost BERT's 12 x 128 x 128 task half
   * its speed */
  int64_t M = rv_extent(s, ul[nu - 3]);
  for (int64_t r = R; r >= 2 && 2 * r >= R; r--)
    if (M % r == 0) {
      R = r;
      break;
    }
  if (wu > E) wu = E;
  /* the row reductions factored into vector accumulators (at the root,
   * where no other block shares their nests) */
  for (int i = 1; i < anchors[1]; i++) {
    const ts_stmt *r = ts_func_find_block(ts_sched_func(s), names[i]);
    if (!r || !block_is_reduction(ts_realize_block(r))) continue;
    /* four vectors at a time where that makes two steps or more (one
     * step leaves the factored block's init in its vector loop: Swin's
     * 64-key rows ran 6 x slower) */
    if (vector_rfactor_at(s, t, names[i], 4, 8, 2, false, true) == TS_OK)
      vector_rfactor_at(s, t, names[i], 1, 2, 2, false, true);
    else /* a short row: one vector at a time, the last guarded */
      vector_rfactor_at(s, t, names[i], 1, 2, 2, true, true);
  }
  names_free(names, n);
  names = block_names(ts_sched_func(s), &n);
  if (!names || !find_products(s, names, n, anchors) ||
      ts_sched_get_block(s, names[anchors[1]], &ub)) {
    names_free(names, n);
    return false;
  }
  /* U: batch..., i/R, e/W, j/4, 4, R, W */
  ts_rv io[2], eo[2], jo[2];
  /* the product by V's reduction unrolled by 4, or the largest smaller
   * step that divides it (a guard inside the register tile costs more
   * than the unrolling saves) */
  int64_t unroll = 4;
  while (unroll > 1 && N % unroll) unroll--;
  ok = split_tile(s, ul[nu - 3], R, sample, 8, 1, io) &&
       split_tile(s, ul[nu - 2], wu, sample, 4 * (int64_t)lanes, lanes, eo) &&
       split2(s, ul[nu - 1], unroll, jo);
  ts_rv order[MAX_LOOPS];
  int no = 0;
  for (int k = 0; k < nu - 3; k++) order[no++] = ul[k];
  order[no++] = io[0], order[no++] = eo[0], order[no++] = jo[0];
  order[no++] = jo[1], order[no++] = io[1], order[no++] = eo[1];
  ts_rv init;
  ok = ok && !ts_sched_reorder(s, order, no) &&
       !ts_sched_decompose_reduction(s, ub, jo[0], &init);
  if (ok) {
    ts_sched_unroll(s, jo[1]);
    ts_sched_unroll(s, io[1]);
    ts_sched_vectorize(s, eo[1]);
    const char *in = ts_sched_rv_block_name(s, init);
    char iname[160];
    snprintf(iname, sizeof iname, "%s", in ? in : "");
    if (iname[0]) default_vectorize_inner(s, t, iname);
  }
  /* the blocks after U at its column tile, those before at its row tile */
  for (int i = anchors[1] + 1; ok && i < n; i++) {
    ts_rv b;
    ok = !ts_sched_get_block(s, names[i], &b) &&
         !ts_sched_reverse_compute_at(s, b, eo[0]);
    if (ok) default_vectorize_inner(s, t, names[i]);
  }
  for (int i = anchors[1] - 1; ok && i >= 0; i--) {
    ts_rv b;
    ok = !ts_sched_get_block(s, names[i], &b) &&
         !ts_sched_compute_at(s, b, io[0]);
  }
  /* under the row tile: S tiled, the factored reductions' vector lanes
   * innermost, the rest vectorized */
  ok = ok && tile_product(s, t, names[0], nu - 2, ws, sample, lanes);
  if (ok) {
    int m = 0;
    char **all = block_names(ts_sched_func(s), &m);
    for (int i = 0; all && i < m; i++) {
      if (!strcmp(all[i], names[0]) || !strcmp(all[i], names[anchors[1]]) ||
          strstr(all[i], "_init"))
        continue;
      default_reduce_outside(s, t, all[i]);
      default_vectorize_inner(s, t, all[i]);
    }
    names_free(all, m);
  }
  /* the batch and row-tile loops fused and parallel */
  if (ok) {
    ts_rv outer[MAX_LOOPS];
    int k = 0;
    for (int d = 0; d < nu - 3; d++)
      if (rv_extent(s, ul[d]) > 1) outer[k++] = ul[d];
    outer[k++] = io[0];
    ts_rv p = outer[0];
    if (k > 1 && ts_sched_fuse(s, outer, k, &p)) p = io[0];
    ts_sched_parallel(s, p);
  }
  names_free(names, n);
  return ok;
}
