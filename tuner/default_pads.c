/*
 * default_pads.c — where the default schedule (default.c) computes the
 * padding of an anchor's input: per tile (the window each tile reads, in
 * cache), inlined into the anchor (a guarded load the code generator
 * partitions away from the image's interior), or once before it (a stem
 * whose channels are fewer than a vector), by what each costs.
 */
#include "tuner/internal.h"
#include "tuner/rule_framework.h"

#include <stdio.h>

/* A padding producer of the anchor (a block computing through
 * if_then_else, which step 1 leaves a stage of its own) computed at the
 * anchor's innermost outer loop, so each tile pads only the window it
 * reads, in cache, instead of the whole padded image being written and read
 * back once per call (for a depthwise conv, nine FMAs per output, that
 * copy was most of its time in a model). Left at the root when the tile's
 * window would be larger than PAD_TILE_BYTES (redundant work would then
 * outweigh the traffic saved). */
#define PAD_TILE_BYTES (256 * 1024)

/* Bytes of the window a block computed at the n_outer-th loop writes per
 * iteration: the product of its own loops' extents times its element size. */
static int64_t tile_window_bytes(ts_sched *s, const char *name, int n_outer) {
  ts_rv b, loops[MAX_LOOPS];
  int nl = 0;
  const ts_stmt *r = ts_func_find_block(ts_sched_func(s), name);
  if (!r || ts_sched_get_block(s, name, &b) ||
      ts_sched_get_loops(s, b, loops, MAX_LOOPS, &nl) || nl < n_outer)
    return INT64_MAX;
  const ts_block *blk = ts_realize_block(r);
  int64_t bytes =
      (ts_buffer_dtype(ts_block_write(blk, 0)->buffer).bits + 7) / 8;
  for (int i = n_outer; i < nl; i++) bytes *= rv_extent(s, loops[i]);
  return bytes;
}

/* Whether the innermost loop of padding block `name` (the image's
 * channels, channels last) is shorter than a vector: an image network's
 * stem, 3 channels. Its window per tile is then copied a few elements at
 * a time, under the bounds guard, for as many multiply-adds per element
 * as a wide conv's (the 7 x 7 kernel reads 147 taps of it); padded once
 * before the conv, the copy runs over whole rows. 2 threads, AVX2 Zen 3,
 * the default schedule (bench --default, five alternating rounds):
 * conv2d_nhwc 224 x 224 x 3 -> 64, 7 x 7 stride 2, 0.63 -> 0.83 x
 * oneDNN, 184 x 184 x 3 -> 24 0.81 -> 0.86; ResNet-50's stem task with its
 * NCHW transpose (bench --tir --default) 3.01 -> 1.74 ms. */
static bool few_channels(ts_sched *s, const ts_target *t, const char *name,
                         int64_t *channels) {
  ts_rv b, loops[MAX_LOOPS];
  int nl = 0;
  const ts_stmt *r = ts_func_find_block(ts_sched_func(s), name);
  if (!r || ts_sched_get_block(s, name, &b) ||
      ts_sched_get_loops(s, b, loops, MAX_LOOPS, &nl) || nl == 0)
    return false;
  const ts_block *blk = ts_realize_block(r);
  int lanes =
      default_lanes_of(t, ts_buffer_dtype(ts_block_write(blk, 0)->buffer));
  *channels = rv_extent(s, loops[nl - 1]);
  return *channels < lanes;
}

/* (A stem whose kernel has 9 taps or fewer, 3 x 3, reads its padding
 * inlined, through the guard, instead, where the copy would move one
 * element or more per STEM_MACS_PER_COPIED multiply-adds of the conv
 * (stride^2 / (CO x KH x KW): a stride of 2, few output channels): the
 * code generator partitions the guard away from the image's interior,
 * and a halo of one pixel leaves few border tiles, while padded once
 * before the conv the copy was a pass over the image worth a fifth of
 * the conv's time. Default schedules, 2 threads, AVX2 Zen 3, medians of
 * three alternating rounds, x oneDNN, copied -> inlined: 224 x 224 x 3 ->
 * 24 stride 2 (1/54) 0.76 -> 0.94, 150 x 150 x 3 -> 24 0.77 -> 0.91,
 * 256 x 256 x 3 -> 16 (1/36) 0.76 -> 1.07, 14 x 14 x 4 -> 16 stride 1
 * (1/144) 1.33 -> 2.06; below the share inlined lost: 56 x 56 x 4 -> 64
 * (1/576) 0.92 -> 0.82, 112 x 112 x 6 -> 32 (1/288) 0.94 -> 0.89. The
 * 7 x 7 stems lose inlined too: 224 x 224 x 3 -> 64 0.95 -> 0.85,
 * 172 x 172 x 3 -> 24 (1/294) 1.05 -> 0.77.) */
#define STEM_MACS_PER_COPIED 144
void default_pads_at_tile(ts_sched *s, const ts_target *t, ts_rv anchor,
                          const ts_rv *order, int n_outer, int64_t taps) {
  if (n_outer <= 0) return;
  ts_rv prods[MAX_BLOCKS];
  int np = 0;
  if (ts_sched_get_producers(s, anchor, prods, MAX_BLOCKS, &np)) return;
  for (int i = 0; i < np; i++) {
    const char *pn = ts_sched_rv_block_name(s, prods[i]);
    if (!pn) continue;
    char name[128];
    snprintf(name, sizeof name, "%s", pn);
    const ts_func *f = ts_sched_func(s);
    const ts_stmt *r = ts_func_find_block(f, name);
    if (!r || !stmt_uses_if_then_else(r)) continue;
    const ts_block *blk = ts_realize_block(r);
    if (block_is_reduction(blk) || block_writes_param(f, blk) ||
        ts_block_n_writes(blk) != 1)
      continue;
    ts_rv cons[MAX_BLOCKS];
    int nc = 0;
    if (ts_sched_get_consumers(s, prods[i], cons, MAX_BLOCKS, &nc) || nc != 1)
      continue;
    int64_t ch = 1;
    if (few_channels(s, t, name, &ch)) {
      /* taps: the reduction's extent per output, KH x KW x channels */
      const char *an = ts_sched_rv_block_name(s, anchor);
      char aname[128];
      snprintf(aname, sizeof aname, "%s", an ? an : "");
      int64_t macs = default_block_work(s, aname),
              copied = default_block_work(s, name);
      if (ch > 0 && taps / ch <= 9 && copied > 0 &&
          macs <= STEM_MACS_PER_COPIED * copied)
        ts_sched_compute_inline(s, prods[i]);
      continue;
    }
    /* (a window that is the whole buffer, which the tile's loops do not
     * index: a weight padded to whole vectors, pad_einsum's copy, would be
     * padded again for every tile) */
    const ts_buffer *pw = ts_block_write(blk, 0)->buffer;
    int64_t whole = (ts_buffer_dtype(pw).bits + 7) / 8;
    for (int d = 0; d < ts_buffer_ndim(pw); d++) whole *= ts_buffer_dim(pw, d);
    ts_sched *trial = NULL;
    if (ts_sched_fork(s, 0, &trial, NULL)) return;
    ts_rv tb;
    int64_t window = 0;
    if (ts_sched_get_block(trial, name, &tb) ||
        ts_sched_compute_at(trial, tb, order[n_outer - 1]) ||
        (window = tile_window_bytes(trial, name, n_outer)) > PAD_TILE_BYTES ||
        window >= whole) {
      ts_sched_destroy(trial);
      continue;
    }
    ts_sched_destroy(trial);
    if (ts_sched_compute_at(s, prods[i], order[n_outer - 1])) continue;
    default_vectorize_inner(s, t, name);
  }
}

/* The producers of anchor that pad an input (an if_then_else block that
 * is no reduction and writes no parameter): into out, at most MAX_BLOCKS;
 * their number. */
static int padding_producers(ts_sched *s, ts_rv anchor, ts_rv *out) {
  ts_rv prods[MAX_BLOCKS];
  int np = 0, n = 0;
  if (ts_sched_get_producers(s, anchor, prods, MAX_BLOCKS, &np)) return 0;
  for (int i = 0; i < np; i++) {
    const char *pn = ts_sched_rv_block_name(s, prods[i]);
    const ts_func *f = ts_sched_func(s);
    const ts_stmt *r = pn ? ts_func_find_block(f, pn) : NULL;
    if (!r || !stmt_uses_if_then_else(r)) continue;
    const ts_block *blk = ts_realize_block(r);
    if (block_is_reduction(blk) || block_writes_param(f, blk)) continue;
    out[n++] = prods[i];
  }
  return n;
}

/* Whether a padded copy per tile costs less than reading through the
 * guards with the padding inlined, for a depthwise conv of more than 9
 * taps: the copy moves the tile's whole window (the tile widened by the
 * kernel's halo) once per tile; inlined, the image's interior reads
 * without guards (the code generator partitions them) and only the border
 * tiles pay. The copy is kept when its window is at most a third of the
 * tile's multiply-adds (its outputs times the taps). Measured (bench
 * --default, 2 threads, AVX2 Zen 3, copy -> inlined, tessera GFLOP/s in
 * two alternating rounds) on ten 5x5 and 7x7 depthwise convs of MnasNet,
 * EfficientNet, MobileNet-V3 and ConvNeXt shapes: inlined faster on the
 * six above a third (28x28x240 5x5 41-54 -> 73-81, 14x14x480 35-38 ->
 * 57-63, 56x56x96 7x7 47-53 -> 72-74, 14x14x384 7x7 39-40 -> 57-71, and
 * 14x14x672, 28x28x192 7x7) and on two at 0.31 (7x7x960 5x5, 28x28x120
 * 5x5: 10-40 %), slower on 18x18x192 5x5 (0.33: 46-53 -> 39-45) and
 * 7x7x768 7x7 (0.27: 62-68 -> 37-39), where most tiles touch the border.
 * The border's share, which separates the last four, is not modelled. */
bool default_copy_per_tile_pays(ts_sched *s, ts_rv anchor, const ts_rv *order,
                                int n_outer, int64_t tile_elems, int64_t taps) {
  ts_rv pads[MAX_BLOCKS];
  int np = padding_producers(s, anchor, pads);
  if (n_outer <= 0 || tile_elems <= 0) return true;
  for (int i = 0; i < np; i++) {
    const char *pn = ts_sched_rv_block_name(s, pads[i]);
    const ts_stmt *r = pn ? ts_func_find_block(ts_sched_func(s), pn) : NULL;
    if (!r) continue;
    const ts_block *blk = ts_realize_block(r);
    char name[128];
    snprintf(name, sizeof name, "%s", pn);
    int64_t elem =
        (ts_buffer_dtype(ts_block_write(blk, 0)->buffer).bits + 7) / 8;
    ts_sched *trial = NULL;
    if (ts_sched_fork(s, 0, &trial, NULL)) return true;
    ts_rv tb;
    int64_t window = INT64_MAX;
    if (!ts_sched_get_block(trial, name, &tb) &&
        !ts_sched_compute_at(trial, tb, order[n_outer - 1]))
      window = tile_window_bytes(trial, name, n_outer);
    ts_sched_destroy(trial);
    if (window == INT64_MAX || elem <= 0) return true;
    return 3 * (window / elem) <= tile_elems * taps;
  }
  return true;
}

/* A dense conv does this many multiply-adds per padded element or fewer
 * (output channels x taps / stride^2, times the interior's share): its
 * padded copy, a pass over the whole image written and read back, is a
 * large share of its time (a 74 x 74 x 512 -> 48 3x3 stride-2 conv, 102
 * per element: a fifth of the default schedule's time; ResNet-50's
 * 56 x 56 x 64 -> 64 3x3, 537). */
#define PAD_COPY_COSTLY_MACS 320

/* A block's domain: the product of its iters' extents (those of
 * constant extent), and the last one's in *last. */
static double block_domain(const ts_block *b, bool spatial_only,
                           int64_t *last) {
  double n = 1;
  int64_t e = 0;
  *last = 0;
  for (int i = 0; i < ts_block_n_iters(b); i++)
    if ((!spatial_only || ts_block_iter_kind(b, i) == TS_ITER_SPATIAL) &&
        ts_expr_is_const_int(ts_block_iter_dom(b, i).extent, &e)) {
      n *= (double)e;
      *last = e;
    }
  return n;
}

/* The widest window through which block ab reads buf: the largest extent
 * of a reduce iter var in an index that also uses a spatial one (a conv's
 * h * s + kh: KH), 0 where no index does (a weight padded to whole
 * vectors is read by reduce or spatial vars alone in each dimension). */
static int64_t read_window(const ts_block *ab, const ts_buffer *buf) {
  int64_t widest = 0;
  for (int i = 0; i < ts_block_n_reads(ab); i++) {
    const ts_region *rg = ts_block_read(ab, i);
    if (rg->buffer != buf) continue;
    for (int d = 0; d < rg->ndim; d++) {
      bool sp = false;
      int64_t red = 0, e;
      for (int k = 0; k < ts_block_n_iters(ab); k++) {
        if (!expr_uses_var(rg->ranges[d].min, ts_block_iter_var(ab, k)))
          continue;
        if (ts_block_iter_kind(ab, k) == TS_ITER_SPATIAL) sp = true;
        if (ts_block_iter_kind(ab, k) != TS_ITER_REDUCE) continue;
        if (!ts_expr_is_const_int(ts_block_iter_dom(ab, k).extent, &e))
          e = INT32_MAX; /* unknown: as wide as can be */
        if (e > red) red = e;
      }
      if (sp && red > widest) widest = red;
    }
  }
  return widest;
}

/* Reads the function only (no schedule instruction, so the trace is
 * unchanged): the padding blocks are those writing a buffer the anchor
 * reads, through if_then_else, no reduction. */
bool default_pads_read_inline(ts_sched *s, const ts_target *t, ts_rv anchor,
                              bool *copy_costly) {
  const ts_func *f = ts_sched_func(s);
  const char *an = ts_sched_rv_block_name(s, anchor);
  const ts_stmt *ar = an ? ts_func_find_block(f, an) : NULL;
  if (!ar) return false;
  const ts_block *ab = ts_realize_block(ar);
  int64_t last_out = 0, last = 0, channels = 0;
  double macs = block_domain(ab, false, &last),
         out = block_domain(ab, true, &last_out);
  int n = 0;
  char **names = block_names(f, &n);
  if (!names) return false;
  bool inlined = false;
  *copy_costly = false;
  for (int k = 0; k < n && !inlined; k++) {
    const ts_stmt *pr = ts_func_find_block(f, names[k]);
    if (!pr || pr == ar || !stmt_uses_if_then_else(pr)) continue;
    const ts_block *pb = ts_realize_block(pr);
    if (block_is_reduction(pb) || ts_block_n_writes(pb) != 1) continue;
    const ts_buffer *buf = ts_block_write(pb, 0)->buffer;
    int64_t win = read_window(ab, buf);
    if (!win) continue;
    double copied = block_domain(pb, false, &channels);
    /* (a stem of fewer channels than a vector: few_channels' rule) */
    if (channels < default_lanes_of(t, ts_buffer_dtype(buf))) continue;
    /* the padded pixels per output pixel: about stride^2 */
    double per_out =
        last_out > 0 && channels > 0
            ? (copied / (double)channels) / (out / (double)last_out)
            : 0;
    if (copied <= 0 || macs <= 0) continue;
    *copy_costly = macs <= PAD_COPY_COSTLY_MACS * copied && per_out > 2;
    inlined = *copy_costly || win <= DEFAULT_PAD_INLINE_WINDOW;
  }
  names_free(names, n);
  return inlined;
}

/* A depthwise conv reads each input pixel once per tap, not once per
 * output channel: with a 3 x 3 kernel a padded copy per tile (its window
 * wider than the tile by the kernel's halo) costs about what the conv's
 * own loads do, so its padding producer is inlined into it instead (a
 * guarded load). Measured on 2 AVX2 cores: 3 x 3 depthwise convs 1.2 to
 * 1.9 x faster; a 5 x 5 one 1.6 x slower (25 guarded loads per output
 * against a copy 22 % larger than the tile). That was before the code
 * generator partitioned the guards away from the image's interior; larger
 * kernels now keep the copy only where default_copy_per_tile_pays. */
void default_pads_inline(ts_sched *s, ts_rv anchor) {
  ts_rv pads[MAX_BLOCKS];
  int np = padding_producers(s, anchor, pads);
  for (int i = 0; i < np; i++) ts_sched_compute_inline(s, pads[i]);
}
