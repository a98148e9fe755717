/*
 * default_depthwise.c — the default schedule's rules for a depthwise conv
 * (default.c step 2, an anchor whose rows are the output columns because
 * every spatial axis indexes the input the channels do): the width of its
 * register tile, whether its channel tiles or its column tiles go first,
 * and how far its taps are unrolled. Each output channel reads only its
 * own input channel, so a tile's rows load their own input (no broadcast
 * shared by a row), neighbouring columns share input columns across the
 * taps, and the weights are a few vectors per tap.
 */
#include "tuner/internal.h"
#include "tuner/rule_framework.h"

/* Kernels of more taps than this (5 x 5, 7 x 7) keep their outer tap loop
 * a loop where default_depthwise_row_loop says so; kernels of more than
 * LARGE_KERNEL_TAPS (7 x 7) always. */
#define DEPTHWISE_UNROLLED_TAPS 9
#define LARGE_KERNEL_TAPS 25

/* Whether a depthwise conv of more than 9 taps reads its padding inline
 * and runs its kernel a row at a time (default_depthwise_taps): where the
 * registers hold the tile's accumulators (nrows x nvec) and a kernel
 * row's weights (kw x nvec) together, or where the kernel has more than
 * 25 taps. */
bool default_depthwise_row_loop(int64_t taps, int64_t kw, int64_t nrows,
                                int64_t nvec, int regs) {
  if (taps <= DEPTHWISE_UNROLLED_TAPS) return false;
  return nrows * nvec + kw * nvec <= regs || taps > LARGE_KERNEL_TAPS;
}

/* The rows of a tile nv vector instructions wide that runs a kernel row
 * at a time, as many as the registers allow beside a kernel row's
 * weights; 0 when none does. */
static int64_t row_loop_rows(int64_t er, int regs, int64_t taps, int64_t kw,
                             int64_t nv, bool has_rows) {
  int64_t cap = default_rows_cap(regs, nv), room = (regs - kw * nv) / nv;
  if (room < cap) cap = room;
  if (cap < 1) return 0;
  int64_t rows =
      default_ceil_rows(er, default_divisor_upto(er, cap), cap, has_rows, true);
  return default_depthwise_row_loop(taps, kw, rows, nv, regs) ? rows : 0;
}

/* A kernel of more than 9 taps whose tile does not run a kernel row at a
 * time (its accumulators and a kernel row's weights more than the
 * registers: 2 vectors wide on 16, a 5 x 5 kernel): the narrower whole
 * vectors that do with the most accumulators, the rows as many as the
 * registers allow beside a kernel row's weights. Default schedules, an
 * AVX2 target (16 registers) on the AVX-512 Xeon, the libraries held to
 * AVX2, 2 threads, x oneDNN, two alternating rounds, the rule before
 * (a padded copy per tile, or every tap unrolled) -> 1 vector a row at a
 * time: 112x112x336 0.63/0.61 -> 1.14/1.16, 146x146x144 0.56/0.58 ->
 * 1.03/1.03, 112x112x96 stride 2 0.49/0.51 -> 0.96/0.91, 18x18x192
 * 0.54/0.54 -> 1.02/0.89, 18x18x576 0.74/0.76 -> 1.07/1.08, 14x14x672
 * 0.74/0.78 -> 1.01/1.01, 34x34x576 0.85/0.88 -> 1.03/1.00, 28x28x240
 * 1.00/0.96 -> 1.11/1.12; lost where every tap unrolled had suited:
 * 28x28x576 1.08/1.08 -> 0.88/0.87, 76x76x1536 1.06/1.06 -> 0.79/0.81,
 * 76x76x144 1.28/1.24 -> 1.09/1.09, 56x56x192 1.09/1.13 -> 0.92/1.05.
 * A width of no whole vectors (40 channels on AVX-512's 16 lanes, 3
 * vector instructions a row) keeps its width with fewer rows (8 -> 5),
 * where it had copied its padded window per tile; AVX-512 Xeon, same
 * rounds: 23x23x200 0.68/0.68 -> 1.42/1.37, 74x74x40 0.82/0.84 ->
 * 1.51/1.58, 56x56x40 0.79/0.81 -> 1.57/1.59, 14x14x200 0.64/0.71 ->
 * 1.30/1.28, 28x28x100 (2 rows x 50) 0.82/0.87 -> 1.02/1.03.
 * A 7 x 7 kernel (more than 25 taps) runs a kernel row at a time whatever
 * the tile, and keeps its tile where the accumulators take at most half
 * the registers; with more (2 vectors x 5 or 6 columns on 16 registers),
 * the tile went through memory and it goes one vector wide too. Default
 * schedules, 2 threads, an AVX2 target on Zen 4 (oneDNN held to AVX2),
 * two alternating rounds, x oneDNN: 24x24x192 0.27/0.26 -> 1.07/1.17,
 * 48x48x128 0.38/0.36 -> 1.28/1.23, 14x14x384 0.45/0.43 -> 1.14/1.95,
 * 15x15x256 0.28/0.28 -> 0.91/0.83, 20x20x256 0.28/0.29 -> 0.75/0.55,
 * 13x13x256 1.15/1.04 -> 1.17/1.37; 10x10x512 lost (1.04/1.01 ->
 * 0.70/0.88). */
static void narrow_to_row_loop(int64_t ev, int64_t er, int lanes, int regs,
                               int64_t taps, int64_t kw, bool has_rows,
                               int64_t *cols, int64_t *nrows) {
  int64_t nv = default_vector_ops(*cols, lanes);
  if (taps <= DEPTHWISE_UNROLLED_TAPS || *nrows * nv + kw * nv <= regs ||
      (taps > LARGE_KERNEL_TAPS && 2 * *nrows * nv <= regs))
    return;
  if (*cols % lanes != 0) {
    /* a width of no whole vectors (40 channels on 16 lanes): fewer rows */
    int64_t rows = row_loop_rows(er, regs, taps, kw, nv, has_rows);
    if (rows >= 2) *nrows = rows;
    return;
  }
  int64_t best_v = 0, best_rows = 0;
  for (int64_t v = nv - 1; v >= 1; v--) {
    int64_t rows = ev % (v * lanes) == 0
                       ? row_loop_rows(er, regs, taps, kw, v, has_rows)
                       : 0;
    if (rows * v > best_rows * best_v) {
      best_v = v;
      best_rows = rows;
    }
  }
  if (best_v > 0) {
    *cols = best_v * lanes;
    *nrows = best_rows;
  }
}

/* The register tile of a depthwise conv: *cols columns (channels) by
 * *nrows rows (output columns), from the general rule's choice; kw: the
 * kernel's width.
 *
 * Where 4 vectors take more than half the registers as accumulators
 * (6 rows x 4), it is 2 vectors wide, the rows as many as they allow: the
 * tile keeps the input columns its taps share live beside the
 * accumulators. Default schedules, AVX-512 Xeon, 2 threads, two
 * alternating rounds, x oneDNN, old -> new: 5x5 18x18x576 0.66/0.66 ->
 * 0.92/0.92, 34x34x576 0.62/0.61 -> 0.89/0.95, 18x18x192 0.67/0.68 ->
 * 0.98/0.87; 3x3 146x146x576 0.69/0.70 -> 1.01/1.03, 70x70x960 0.69/0.75
 * -> 0.99/1.00.
 *
 * So it is for a kernel of more than 9 taps at half the registers (4 rows
 * x 4 vectors on 32), where the narrower tile then runs a kernel row at a
 * time (default_depthwise_row_loop). Same host, 4 x 4 with every tap
 * unrolled -> 8 x 2 a kernel row at a time: 28x28x576 5x5 0.83/0.81 ->
 * 1.14/1.16, 56x56x192 5x5 1.06/1.05 -> 1.28/1.23, 56x56x128 7x7
 * 0.93/0.99 -> 1.46/1.43, 28x28x256 7x7 0.75/0.77 -> 1.07/1.09, 28x28x192
 * 7x7 0.82/0.82 -> 1.12/1.07, 76x76x1536 5x5 0.91/0.92 -> 0.95/0.96. (With
 * every tap unrolled, 2 vectors at 16 accumulators had lost: 56x56x192
 * 5x5 1.01 -> 0.88, 56x56x128 7x7 0.95 -> 0.80.) 3 x 3 kernels keep 4
 * vectors there. */
void default_depthwise_tile(int64_t ev, int64_t er, int lanes, int regs,
                            int64_t taps, int64_t kw, bool has_rows,
                            int64_t *cols, int64_t *nrows) {
  if (*cols > 2 * lanes && ev % (2 * lanes) == 0) {
    int64_t acc = *nrows * (*cols / lanes);
    bool crowded = 2 * acc > regs;
    if (crowded || (taps > DEPTHWISE_UNROLLED_TAPS && 2 * acc >= regs)) {
      int64_t cap = default_rows_cap(regs, 2);
      int64_t rows = default_ceil_rows(er, default_divisor_upto(er, cap), cap,
                                       has_rows, true);
      if (crowded || default_depthwise_row_loop(taps, kw, rows, 2, regs)) {
        *cols = 2 * lanes;
        *nrows = rows;
      }
    }
  } else if (*cols > 2 * lanes && taps <= DEPTHWISE_UNROLLED_TAPS) {
    /* a tile wider than 2 vectors that cannot go 2 vectors wide (48
     * channels: 3 vectors on 16 lanes) with more than half the registers
     * as accumulators: fewer rows, half the registers at most (wider
     * kernels: narrow_to_row_loop). AVX-512 Xeon, 3 x 3 kernels, 8 rows
     * x 3 vectors -> 4 or 5 rows, x oneDNN, two alternating rounds:
     * 38x38x48 0.82/0.83 -> 1.48/1.29, 56x56x48 0.74/0.72 -> 1.28/1.21,
     * 112x112x48 0.81/0.74 -> 1.16/1.23, 14x14x48 1.05/1.10 ->
     * 1.31/1.41, 112x112x48 stride 2 0.86/0.95 -> 1.26/1.26. */
    int64_t nv = default_vector_ops(*cols, lanes);
    int64_t cap = regs / 2 / nv;
    if (2 * *nrows * nv > regs && cap >= 2)
      *nrows = default_ceil_rows(er, default_divisor_upto(er, cap), cap,
                                 has_rows, true);
  }
  narrow_to_row_loop(ev, er, lanes, regs, taps, kw, has_rows, cols, nrows);
}

/* A 3 x 3 tile of 4 vectors x 2 columns whose columns go first (pixels of
 * 2 KiB or more, or an image the L2 holds): 2 vectors x twice the columns
 * instead, the same accumulators. With 2 columns each tap row loads 4
 * pixels for 2 outputs; with 4 columns, 6 for 4, and each tap's weights
 * feed twice the FMAs. Default schedules, 2 threads, an AVX2 target
 * (16 registers, oneDNN held to AVX2) on an AVX-512 EPYC, hand traces
 * then the rule, x oneDNN, two rounds: 34x34x672 0.74/0.74 -> 1.01/1.01,
 * 146x146x768 0.83/0.90 -> 1.09/1.01. Where the channel tiles go first
 * the narrow tile lost (14x14x512: 0.95 -> 0.49), so not there. */
void default_depthwise_narrow(const ts_target *t, int64_t ev, int64_t er,
                              int lanes, int regs, int64_t taps, int64_t kh,
                              int64_t kw, int64_t elem, int64_t others,
                              bool has_rows, int64_t *cols, int64_t *nrows) {
  if (taps > DEPTHWISE_UNROLLED_TAPS || *cols != 4 * lanes || *nrows > 2 ||
      ev % (2 * lanes) != 0 ||
      default_depthwise_channels_first(t, ev, *cols, er, kh, kw, elem,
                                       others) ||
      default_depthwise_channels_first(t, ev, 2 * lanes, er, kh, kw, elem,
                                       others))
    return;
  int64_t cap = default_rows_cap(regs, 2);
  if (cap > 2 * *nrows) cap = 2 * *nrows;
  int64_t rows =
      default_ceil_rows(er, default_divisor_upto(er, cap), cap, has_rows, true);
  if (rows <= *nrows) return;
  *cols = 2 * lanes;
  *nrows = rows;
}

/* The bytes beyond which a depthwise conv's image leaves the L2's half
 * (default.c's STREAMED_CACHE_BYTES) and a channel tile's line (64). */
#define IMAGE_CACHE_BYTES TS_DEFAULT_STREAMED_BYTES
#define LINE_BYTES 64

/* A depthwise conv's order: whether its channel tiles go outermost (else
 * its column tiles go outside its channel tiles).
 *
 * Channel tiles outermost where there are at least twice as many as cores
 * over an image larger than 256 KiB: each tile's window of rows stays
 * cached while the rows slide down the image, instead of all channels'
 * rows (for 5 x 5 taps at 112 x 112 x 336, 780 KiB) read again from L3
 * for every output row. But a channel tile reads at most two lines of a
 * page where a pixel's channels span 2 KiB or more; when the window then
 * covers more pages than the L1 TLB holds (64), every load misses it and
 * no prefetcher follows: there, and with few channel tiles, the column
 * tiles go outside the channel tiles instead, so each tile reads its
 * pixels' channels in one contiguous run. So do they where a channel tile
 * is narrower than a cache line (one vector of 8 floats, for 72, 40 or 120
 * channels): each line of the image was then fetched by two channel
 * tiles. Default schedules, AVX2 Zen 3, 2 threads, medians of three
 * alternating rounds, x oneDNN, channels first -> columns first: 58x58x72
 * 0.70 -> 0.85, 56x56x72 0.77 -> 0.95, 74x74x40 5x5 0.65 -> 0.74, 28x28x72
 * 5x5 0.75 -> 0.80, 28x28x120 5x5 0.78 -> 0.85, 34x34x120 0.75 -> 1.01;
 * with channel tiles of 16 or more channels first won (112x112x336 5x5
 * 1.40 against 1.03, 56x56x192 5x5 1.53 against 1.20, 14x14x864 0.85
 * against 0.77). Measured in docs/tuning.md ("Fresh draws of the broad
 * set"): 112x112x336 5x5 0.83 -> 1.23-1.51 x oneDNN channels first,
 * 70x70x960 0.38-0.49 -> 0.82-1.00 columns first. All of that on Zen 3: on
 * Intel's cores (ts_target_strided_prefetch false) a channel tile's
 * strided reads ran slower wherever measured and the columns go first
 * always (AVX-512 Xeon, 2 threads, x oneDNN, channels -> columns first:
 * 112x112x336 5x5 0.65 -> 1.07, 146x146x240 0.57 -> 1.10, 76x76x288 0.73
 * -> 1.04, 56x56x144 0.85 -> 1.19; the AVX2 target there 0.65 -> 1.05 on
 * the first; docs/tuning.md "A depthwise conv's order by CPU").
 *
 * ev: the channels; cols: the tile's; er: the output columns; kh, kw: the
 * kernel; elem: bytes per element; others: the bytes of the inputs but
 * the weights. */
bool default_depthwise_channels_first(const ts_target *t, int64_t ev,
                                      int64_t cols, int64_t er, int64_t kh,
                                      int64_t kw, int64_t elem,
                                      int64_t others) {
  int64_t pixel = ev * elem;
  int64_t pages = kh * (er + kw - 1);
  return ts_target_strided_prefetch(t) &&
         ev / cols >= 2 * ts_target_num_cores(t) &&
         others > IMAGE_CACHE_BYTES && (pixel < 2048 || pages <= 64) &&
         cols * elem >= LINE_BYTES;
}

/* The bytes of a pixel's channels a channel chunk reads (in one run), and
 * the window of all channels' rows above which the chunks pay. */
#define CHUNK_BYTES 2048
#define CHUNK_WINDOW_BYTES (1024 * 1024)

/* A depthwise conv's channel chunks: how many channel tiles go in each
 * chunk, the chunks outermost, the rows and column tiles inside them (0:
 * no chunks).
 *
 * Where the channel tiles may not go first because a pixel's channels
 * span 2 KiB or more and the window more pages than the L1 TLB holds
 * (default_depthwise_channels_first), the column tiles go outside the
 * channel tiles, and each output row reads its kernel's rows of all
 * channels again: above 1 MiB (5 x 5 taps at 56 x 56 x 1536, 1.8 MiB)
 * they no longer stay in the L2 from one output row to the next, and each
 * is fetched from L3 five times. Chunks of up to 2 KiB of each pixel's
 * channels (512 floats) keep a chunk's window cached while its rows slide
 * down the image, and still read each pixel's part in one run of 32
 * lines, which the prefetchers follow. Only for kernels of more than 9
 * taps: a 3 x 3 kernel reads each row three times, and there the whole
 * pixels in one run won (112x112x3072 0.94 -> 0.75 x oneDNN in chunks).
 * Default schedules, 2 threads, Zen 4, three alternating rounds, x
 * oneDNN, without -> with, 5 x 5 taps: the AVX2 target 56x56x1536
 * 0.73/0.73/0.72 -> 1.01/1.09/1.06, 112x112x768 0.74/0.70/0.69 ->
 * 0.82/1.11/1.04, 56x56x1152 1.20/1.08/1.18 -> 1.45/1.38/1.44; the
 * AVX-512 one 56x56x1536 1.08/1.22/1.35 -> 1.38/2.03/1.52, 112x112x768
 * 1.47/1.40/1.58 -> 1.80/1.85/1.76; over the 11 convs of the broad set
 * it changes, the geometric mean of the median ratios 1.12 on each
 * target, none below 0.94. Smaller windows lost (34x34x960, 730 KiB,
 * 1.12 -> 0.88-0.99 on AVX2). Measured on AMD's cores only (and Intel's
 * run a channel tile's strided reads slower), so not where
 * ts_target_strided_prefetch is false. */
int64_t default_depthwise_chunk(const ts_target *t, int64_t ev, int64_t cols,
                                int64_t er, int64_t kh, int64_t kw,
                                int64_t elem) {
  int64_t pixel = ev * elem, tile = cols * elem;
  int64_t pages = kh * (er + kw - 1);
  if (!ts_target_strided_prefetch(t) || kh * kw <= DEPTHWISE_UNROLLED_TAPS ||
      pixel < 2048 || pages <= 64 || pages * pixel <= CHUNK_WINDOW_BYTES ||
      tile <= 0 || tile > CHUNK_BYTES)
    return 0;
  int64_t tiles = (ev + cols - 1) / cols;
  for (int64_t p = CHUNK_BYTES / tile; p >= 1; p--)
    if (tiles % p == 0) return tiles / p >= 2 ? p : 0;
  return 0;
}

/* A depthwise conv's order (default_depthwise_channels_first and
 * default_depthwise_chunk): *vec_first or *rows_first set, and *vo split
 * into chunks (*vc, the outer part) where they pay; false where the
 * schedule refused. */
bool default_depthwise_order(ts_sched *s, const ts_target *t, int64_t ev,
                             int64_t cols, int64_t er, int64_t kh, int64_t kw,
                             int64_t elem, int64_t others, bool *vec_first,
                             bool *rows_first, ts_rv *vo, ts_rv *vc) {
  if (default_depthwise_channels_first(t, ev, cols, er, kh, kw, elem, others))
    *vec_first = true;
  else
    *rows_first = true;
  int64_t per =
      *rows_first ? default_depthwise_chunk(t, ev, cols, er, kh, kw, elem) : 0;
  if (per <= 0) return true;
  ts_rv parts[2];
  int64_t f[2] = {TS_SPLIT_INFER, per};
  if (ts_sched_split(s, *vo, f, 2, parts)) return false;
  *vc = parts[0];
  *vo = parts[1];
  return true;
}

/* A depthwise conv's tile of row pairs: the output columns of a tile
 * whose accumulators cover two image rows (0: not so tiled).
 *
 * A tile of one image row reads its kernel's kh input rows for each
 * output row, so each input row is loaded kh times over the image. With
 * two output rows in the tile and every tap unrolled, the two rows share
 * kh - 1 of their kh + 1 input rows, and LLVM loads each shared vector
 * once for both: a 5 x 5 kernel loads 3 input rows per output row instead
 * of 5. The tile is 2 rows x 4 columns x 1 vector on 16 registers (half
 * of them accumulators), accumulated in a local buffer and written back
 * once; the image rows' pairs go outermost, then the channel tiles, then
 * the column tiles, so a channel tile's window of 6 input rows stays in
 * L1 across its columns. Found by the search for 112x112x1152 5x5 on an
 * AVX2 target (1.30 x oneDNN against the default's 0.80). The pairs'
 * loop alone is parallel: fused with the channel tiles (a division per
 * index), the code generator could not partition the border rows' guards
 * off, and 70x70x480 ran at 0.7 instead of 1.4. Default schedules, 2
 * threads, an AVX2 target (16 registers, oneDNN held to AVX2) on Zen 4,
 * two alternating rounds, x oneDNN, one image row a tile (the default
 * before) -> row pairs, over the 45 5 x 5 convs it changes (42 of the
 * broad set, 3 strided ones added): the geometric mean of the median
 * ratios 1.21; 112x112x384 0.76/0.82 -> 1.37/1.49, 34x34x384 1.00/1.19 ->
 * 1.50/1.66, 28x28x960 1.18/1.14 -> 1.70/1.47, 70x70x192 1.13/1.09 ->
 * 1.45/1.48, 146x146x480 0.87/0.86 -> 1.03/1.01; the lowest 18x18x576
 * 1.14/1.92 -> 1.28/1.36 and 112x112x336 1.19/1.09 -> 1.03/1.05.
 * Accumulated in the output instead, the same tiles by hand ran at half
 * that speed (0.52 to 0.86). Not where the channel chunks go
 * (default_depthwise_chunk): there the chunks won 5 of 7 (56x56x1536 1.07
 * in chunks against 0.87 in pairs; 112x112x1152 0.80 against 1.12). Not
 * for 3 x 3 kernels (2 of their 3 rows shared; 112x112x96 1.08 -> 0.95,
 * 76x76x1536 0.93 -> 0.62), nor 7 x 7 ones (within noise: 56x56x96 1.37
 * -> 1.32, 28x28x192 1.27 -> 1.26 / 0.81), nor 32 registers or Intel's
 * cores (not measured). eh: the image rows (even); er: the output
 * columns. */
int64_t default_depthwise_pairs(const ts_target *t, int regs, int64_t ev,
                                int64_t cols, int lanes, int64_t taps,
                                int64_t kw, int64_t elem, int64_t eh,
                                int64_t er) {
  if (!ts_target_strided_prefetch(t) || regs > 16 ||
      taps <= DEPTHWISE_UNROLLED_TAPS || taps > LARGE_KERNEL_TAPS ||
      cols != lanes || eh < 4 || eh % 2 != 0 ||
      default_depthwise_chunk(t, ev, cols, er, taps / kw, kw, elem) > 0)
    return 0;
  int64_t cap = regs / 4; /* 2 rows x cap columns: half the registers */
  return default_ceil_rows(er, default_divisor_upto(er, cap), cap, true, true);
}

/* A depthwise conv's padding inlined (a guarded load; the code generator
 * partitions the guards away from the image's interior) and its taps
 * unrolled over the register tile: neighbouring output columns read
 * overlapping input columns, and with the taps unrolled LLVM loads each
 * once per tile (MobileNet-V2 untuned 4.36 -> 4.12 ms on AVX2; its
 * 112x112x32 depthwise conv 0.63 -> 0.80 x oneDNN). `order[n_outer..no)`
 * are the loops inside the tiles: the taps, ri and vi; `row_loop`: the
 * outer tap loop outer_tap kept a loop (default_depthwise_row_loop).
 *
 * A kernel row at a time: the fully unrolled body of 5 x 5 or 7 x 7 taps
 * (784 FMAs for a tile of 4 columns x 4 vectors), copied again for the
 * border tiles that the guards' partitioning makes, ran slower than one
 * kernel row at a time; and reading through the guards beat a padded copy
 * per tile (default_copy_per_tile_pays, which otherwise decides, measured
 * on Zen 3 with every tap unrolled). Default schedules, 2 threads, two
 * alternating rounds, x oneDNN, before -> after. AVX-512 Xeon (32
 * registers: every 5 x 5 and 7 x 7 tile there), copied per tile before:
 * 7x7x768 7x7 0.81/0.77 -> 1.32/1.32, 14x14x384 7x7 0.84/0.87 ->
 * 1.30/1.28, 18x18x576 5x5 1.01/1.01 -> 1.26/1.30, 18x18x192 5x5
 * 1.03/1.03 -> 1.34/1.28, 7x7x1152 5x5 0.99/0.97 -> 1.38/1.41, 28x28x240
 * 5x5 0.97/1.04 -> 1.34/1.35, 112x112x336 5x5 1.08/1.10 -> 1.26/1.26,
 * 146x146x144 5x5 0.95/1.09 -> 1.11/1.15, 56x56x96 7x7 1.05/1.05 ->
 * 1.18/1.20, 23x23x200 5x5 0.68/0.70 -> 0.83/0.92, 74x74x40 5x5 0.83/0.84
 * -> 0.95/0.91; all unrolled before: 28x28x240 5x5 stride 2 1.09/1.11 ->
 * 1.15/1.11, 112x112x96 5x5 stride 2 0.81/0.81 -> 0.81/0.88 (and the
 * tiles of default_depthwise_tile). For an AVX2 target (16 registers) on
 * the same host, the libraries held to AVX2: 7 x 7 kernels 28x28x192
 * 0.79/0.83 -> 1.15/1.22, 28x28x256 0.79/0.82 -> 1.12/1.09, 56x56x96
 * 0.86/0.91 -> 1.18/1.14, 7x7x768 0.53/0.62 -> 0.64/0.85; 5 x 5 ones
 * one vector wide 74x74x40 0.88/0.91 -> 1.00/1.04, 23x23x200 0.81/0.77 ->
 * 1.12/1.01; 5 x 5 tiles of two vectors, whose weights do not fit
 * beside their accumulators, lost a kernel row at a time (18x18x576
 * 0.75/0.76 -> 0.37/0.37, 56x56x192 1.16/1.12 -> 0.72/0.72) and go one
 * vector wide instead (narrow_to_row_loop). */
void default_depthwise_taps(ts_sched *s, ts_rv anchor, const ts_rv *order,
                            int n_outer, int no, ts_rv ri, ts_rv vi,
                            ts_rv outer_tap, bool row_loop) {
  default_pads_inline(s, anchor);
  for (int i = n_outer; i < no; i++) {
    if (order[i] == ri || order[i] == vi) continue;
    if (row_loop && order[i] == outer_tap) continue;
    ts_sched_unroll(s, order[i]);
  }
}
