/*
 * default_tiles.c — the register tile sizes of the default schedule
 * (default.c) and of the CPU rules that share its choice: how many rows
 * and vector columns of accumulators, for divisor tiles and ceil splits,
 * scored by FMAs per load within the target's vector registers. Pure
 * arithmetic over extents, lanes and register counts.
 */
#include "tuner/rule_framework.h"

/* Vector instructions per row of a tile of c lanes on a machine of
 * `lanes`: the vectorizer runs c as power-of-two pieces (codegen/lower.c),
 * each piece one instruction per whole vector, a partial one for less. */
int64_t default_vector_ops(int64_t c, int lanes) {
  int64_t ops = 0;
  for (int64_t p = 1; p <= c; p *= 2)
    if (c & p) ops += p >= lanes ? p / lanes : 1;
  return ops;
}

/* The vector tile of an axis of extent n that no whole vector divides: the
 * divisor up to four vectors with the most lanes per vector instruction
 * (the larger on a tie). 1000 on 16 lanes: 40 (32 + 8, three instructions)
 * rather than 25 (16 + 8 + 1). */
int64_t default_lane_tile(int64_t n, int lanes) {
  int64_t best = 1;
  double best_fill = 0;
  for (int64_t c = 2; c <= n && c <= 4 * lanes; c++) {
    if (n % c) continue;
    double fill = (double)c / (double)default_vector_ops(c, lanes);
    if (fill >= best_fill - 1e-9) {
      best_fill = fill;
      best = c;
    }
  }
  return best;
}

/* The share of the computed lanes that are real columns: a tile of c
 * columns that divides the axis (default_vector_ops instructions per row), or a
 * ceil split of n into tiles of c whole vectors (the last tile's lanes
 * past n computed and dropped). */
double default_divisor_fill(int64_t c, int lanes) {
  return (double)c / (double)(default_vector_ops(c, lanes) * lanes);
}

double default_ceil_fill(int64_t n, int64_t c) {
  return (double)n / (double)(((n + c - 1) / c) * c);
}

/* How much better a ceil split must fill its lanes than the best divisor
 * tile to be taken (it pays a local accumulator and a guarded last tile). */

/* The largest divisor of n that is at most cap (>= 1). */
int64_t default_divisor_upto(int64_t n, int64_t cap) {
  for (int64_t d = cap < n ? cap : n; d > 1; d--)
    if (n % d == 0) return d;
  return 1;
}

/* The rows of a register tile `v` vectors wide: at most 8, and as many as
 * leave a register for each of the v vectors of B (each is used by every
 * row, so LLVM keeps it in a register) and one for the broadcast of A.
 * Beyond that an accumulator is spilled and its chain runs through memory
 * at every step: a 3 x 4-vector tile on AVX2's 16 registers ran a 1x7 conv
 * at 68 GFLOP/s, the 6 x 2 one at 192. */
int64_t default_rows_cap(int regs, int64_t v) {
  int64_t r = v > 0 ? ((int64_t)(regs > 8 ? regs : 8) - 1 - v) / v : 1;
  return r > 8 ? 8 : r < 1 ? 1 : r;
}

/* The tile of ts_default_vector_tile; `three`: 3-vector tiles of a longer
 * axis allowed. */
static int64_t register_tile(int64_t er, int64_t ev, int lanes, int regs,
                             int64_t *rows, bool three, bool even_rows);

int64_t default_register_tile(int64_t er, int64_t ev, int lanes, int regs,
                              int64_t *rows, bool three) {
  return register_tile(er, ev, lanes, regs, rows, three, true);
}

static int64_t register_tile(int64_t er, int64_t ev, int lanes, int regs,
                             int64_t *rows, bool three, bool even_rows) {
  int64_t budget = regs > 8 ? regs - 4 : 4, cols = lanes, nrows = 1;
  if (lanes < 1 || ev % lanes) {
    if (rows) *rows = 1;
    return ev;
  }
  /* rows x vectors of accumulators within the budget, with the most
   * FMAs per load (rows * vectors / (rows + vectors)); 3 vectors too
   * (once left out as measured slower): a 4 x 3 tile where the rows have
   * no divisor of 5 or 6 keeps 12 accumulators instead of 4 x 2's 8
   * (bench --default, 2 threads, AVX2 Zen 3, the ratio to the best
   * library, old -> new: 1x1 conv 56x56x96->384 0.70-0.75 -> 0.78-0.81,
   * 56x56x64->192 0.66-0.73 -> 0.79-0.88; matmul 1000x768x512 0.96-1.04
   * -> 1.14-1.17; 128x768x3072 0.87-0.94 -> 0.94-1.03; within noise
   * elsewhere, a 48-row dense layer and a 28x28x32->192 conv among them).
   * Not for a depthwise conv, whose rows each load their own input vector
   * rather than share a broadcast: MobileNet-V2's 3x3 depthwise convs of
   * 96-192 channels ran 10-30 % slower with 3-vector tiles. */
  double best = -1;
  /* Five to seven vectors where no two to four divide the extent (80 or
   * 112 channels: 5 or 7 of AVX-512's vectors), on a target with the
   * registers for them: the alternative is a tile one vector wide, 8
   * accumulators. Default schedules, 2 threads, AVX-512 Xeon, x the best
   * library, two alternating rounds, 1 vector -> 5 or 7: 3x3 conv
   * 35x35 320->80 0.62/0.65 -> 0.95/0.95, 38x38 112->112 0.67/0.67 ->
   * 0.84/0.84, 64x64 24->80 stride 2 0.67/0.69 -> 0.93/0.95, 28x28 64->80
   * 0.80/0.79 -> 0.94/0.95; 1x1 conv 14x14 672->112 0.68/0.65 ->
   * 0.90/0.86, 28x28 240->80 0.72/0.73 -> 0.95/0.96; matmul 1000x112x672
   * 0.65/0.66 -> 1.24/0.89. Not for a depthwise conv (three false): 5 x 5
   * taps over 56x56x80 lost, 0.71 -> 0.64. */
  int64_t nv = lanes > 0 ? ev / lanes : 0, vmax = 4;
  if (three && regs >= 32 && nv % 2 && nv % 3) vmax = 7;
  for (int64_t v = 1; v <= vmax; v++) {
    if (v == 3 && !three && 3 * lanes != ev) continue;
    if (ev % (v * lanes)) continue;
    int64_t cap = default_rows_cap(regs, v);
    int64_t r = default_divisor_upto(er, cap);
    double score = (double)(r * v) / (double)(r + v);
    if (v > 4 && three && even_rows) {
      /* Five to seven vectors by the rows they get: the budget's rows
       * split as evenly as it allows (default_ceil_rows gives them
       * later), scored as default_ceil_rows_tile does. By the divisor
       * alone a prime or odd width tied with one vector (7 columns: 1 x 7
       * against 7 x 1) and took it: 7 accumulators, each waiting on its
       * FMA. Default schedules, 2 threads, AVX-512 Xeon, two alternating
       * rounds, x oneDNN, before -> after: 3x3 conv 7x7 160->112 0.51/0.51
       * -> 0.84/0.85, 7x7 480->112 0.45/0.45 -> 0.59/0.58, 14x14 240->80
       * stride 2 0.58/0.58 -> 1.15/1.14; 1x1 conv 7x7 672->112 0.63/0.62
       * -> 0.86/0.87; matmul 49x112x512 1.19/0.93 -> 1.73/1.15. */
      int64_t tiles = (er + cap - 1) / cap, re = (er + tiles - 1) / tiles;
      double ceil_score = (double)(re * v) / (double)(re + v) * (double)er /
                          (double)(tiles * re);
      if (ceil_score > score) score = ceil_score;
    }
    if (score > best + 1e-9) {
      best = score;
      cols = v * lanes;
      nrows = r;
    }
  }
  /* A single row (a matrix-vector product: a classifier at batch 1):
   * no rows to reuse a vector over, so the budget goes to vectors, as
   * many as divide the extent: independent accumulators (one alone
   * waits on its own FMA's latency at every step) and longer
   * contiguous runs of each row of B. */
  if (er == 1)
    for (int64_t v = 5; v <= budget; v++)
      if (ev % (v * lanes) == 0) cols = v * lanes;
  if (rows) *rows = nrows;
  return cols;
}

int64_t ts_default_vector_tile(int64_t er, int64_t ev, int lanes, int regs,
                               int64_t *rows) {
  int64_t r;
  int64_t cols = lanes >= 1 && ev % lanes == 0
                     ? default_product_tile(er, ev, lanes, regs, &r)
                     : default_register_tile(er, ev, lanes, regs, &r, true);
  if (rows) *rows = r;
  return cols;
}

/* The register tile over rows that are split ceil-wise (every tile but the
 * last full): per vector count, the rows as even as the budget allows,
 * scored by FMAs per load times the share of the computed rows that are
 * real (49 rows: 6 x 2 vectors, 54 computed, over 7 x 1). */
int64_t default_ceil_rows_tile(int64_t er, int64_t ev, int lanes, int regs,
                               int64_t *rows) {
  int64_t cols = lanes, nrows = 1;
  double best = -1;
  for (int64_t v = 1; v <= 4; v++) {
    if (ev % (v * lanes)) continue;
    int64_t cap = default_rows_cap(regs, v);
    int64_t tiles = (er + cap - 1) / cap, r = (er + tiles - 1) / tiles;
    double score =
        (double)(r * v) / (double)(r + v) * (double)er / (double)(tiles * r);
    if (score > best + 1e-9) {
      best = score;
      cols = v * lanes;
      nrows = r;
    }
  }
  *rows = nrows;
  return cols;
}

int64_t default_product_tile(int64_t er, int64_t ev, int lanes, int regs,
                             int64_t *rows) {
  int64_t nr, cr;
  /* (rows that one tile a vector wide holds all of, M = 7: that tile
   * reads each element of B once, where 7 vectors over 3 rows read B
   * three times; matmul 7 x 112 x 512, AVX-512, 1.12/1.07 -> 0.88/0.90 x
   * the best library that way. A conv's weights are read again for every
   * image row anyway.) */
  int64_t cols = register_tile(er, ev, lanes, regs, &nr, true,
                               er > default_rows_cap(regs, 1));
  int64_t acc = nr * (cols / lanes);
  if (er > 1 && acc < 12) {
    int64_t cc = default_ceil_rows_tile(er, ev, lanes, regs, &cr);
    if (cr * (cc / lanes) > acc) {
      *rows = cr;
      return cc;
    }
  }
  *rows = nr;
  return cols;
}

/* Whether a conv's output of h rows of w columns (ev channels, an
 * innermost reduction of `red`) is better tiled over its pixels in order
 * than over the columns: only where the columns leave the tile short of
 * 12 accumulators (AVX-512's 7 x 2 vectors holds 14) and the pixels give
 * it more, and not over a reduction of a few input channels (a stem's 3
 * measured slower fused, 0.57-0.62 -> 0.49-0.52 x oneDNN at 224x224
 * stride 2).
 *
 * Where the column tile spans all the channels, its rows are counted as
 * the unfused form gets them, split ceil-wise (default_ceil_rows: 17
 * columns of 7 vectors 3 + 3 + .. + 2, 21 accumulators), not by the
 * divisor alone (1 row, 7), which let 8 fused pixels x 1 vector win.
 * Default schedules, 2 threads, AVX-512 Xeon, two alternating rounds, x
 * oneDNN, before -> after: 3x3 conv 13x13 768->112 0.62/0.65 ->
 * 0.95/0.94, 17x17 512->112 0.76/0.75 -> 1.08/1.09 (constant weights
 * 0.86/0.85 -> 1.06/1.09), 73x73 48->112 0.74/0.73 -> 0.94/0.94, 17x17
 * 320->80 0.88/0.87 -> 1.13/1.08, 17x17 40->48 0.86/0.90 -> 1.14/1.13;
 * 1x1 73x73 112->80 0.87/0.89 -> 1.05/1.06; the rest of the 31 convs
 * of the broad set it changes in docs/tuning.md, "Fused pixels against
 * the ceil-split row tile". Not where the column tile is one
 * panel of wider channels: 17x17 128->512 fell 0.99 -> 0.52 unfused, its
 * weights read in place rather than packed per panel. */
bool default_pixels_better(int64_t h, int64_t w, int64_t ev, int64_t red,
                           int lanes, int regs) {
  if (h <= 1 || red < 8 || lanes < 1 || ev % lanes) return false;
  int64_t nr, fr;
  int64_t cols = default_register_tile(w, ev, lanes, regs, &nr, true);
  int64_t v = cols / lanes;
  if (cols == ev)
    nr = default_ceil_rows(w, nr, default_rows_cap(regs, v), true, false);
  int64_t acc = nr * v;
  if (acc >= 12) return false;
  int64_t fc = default_ceil_rows_tile(h * w, ev, lanes, regs, &fr);
  return fr * (fc / lanes) > acc;
}

int64_t ts_default_conv_tile(int64_t h, int64_t w, int64_t ev, int64_t red,
                             int lanes, int regs, int64_t *rows) {
  int64_t r;
  int64_t cols = default_pixels_better(h, w, ev, red, lanes, regs)
                     ? default_ceil_rows_tile(h * w, ev, lanes, regs, &r)
                     : default_register_tile(w, ev, lanes, regs, &r, true);
  if (rows) *rows = r;
  return cols;
}

/* A reduction blocked so that a vector tile's panel of the streamed input
 * stays in the cache while every output tile of the panel's vector tile
 * passes over it: where the panel (panel_bytes, for the whole reduction)
 * exceeds `budget`, the longest reduce loop (ext[i] with bind[i] ==
 * BIND_REDUCE) split so that one block of it, times the panel's share of
 * the other reduce loops, fits the budget. The block is the largest
 * divisor of the loop's extent that fits and that `unroll` divides (the
 * innermost loop is split by it again) when the loop is the innermost
 * reduce loop; at least 4 * unroll iterations. Returns the loop's index
 * and the block's extent in *chunk, or -1 when no block is needed or
 * none fits. */
int default_reduction_block(const int64_t *ext, const int *bind, int n,
                            int64_t panel_bytes, int64_t budget, int unroll,
                            int64_t *chunk) {
  int best = -1, last = -1;
  for (int i = 0; i < n; i++)
    if (bind[i] == BIND_REDUCE) {
      last = i;
      if (best < 0 || ext[i] > ext[best]) best = i;
    }
  if (best < 0 || panel_bytes <= budget || ext[best] < 2) return -1;
  int64_t per_iter = panel_bytes / ext[best];
  int64_t cap = per_iter > 0 ? budget / per_iter : 0;
  int64_t step = best == last ? unroll : 1;
  for (int64_t c = cap < ext[best] ? cap : ext[best] - 1; c >= 4 * unroll; c--)
    if (ext[best] % c == 0 && c % step == 0) {
      *chunk = c;
      return best;
    }
  return -1;
}

/* The rows of a register tile of `nrows` rows whose extent er has no
 * divisor near the budget `cap` (a prime such as 613, or the 7 and 11
 * output columns of a late or strided conv): tiles of a ceil split as even
 * as the budget allows (11 on 6: 6 + 5). Also where the divisor leaves
 * accumulators unused (28 or 56 rows: 4 of a budget of 6). Not for a
 * depthwise conv's rows (own_loads) unless the divisor is at most half the
 * budget. */
int64_t default_ceil_rows(int64_t er, int64_t nrows, int64_t cap, bool has_rows,
                          bool own_loads) {
  if (has_rows && cap > 1 && er > cap &&
      (2 * nrows <= cap || (nrows < cap && !own_loads))) {
    int64_t tiles = (er + cap - 1) / cap;
    int64_t even = (er + tiles - 1) / tiles;
    if (even > nrows) nrows = even;
  }
  return nrows;
}
