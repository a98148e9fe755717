/*
 * default_rows.c — how the default schedule (default.c) tiles a conv's
 * output rows: fused with the image rows into a run of pixels where a
 * row's columns are too few for the register tile, or, for a deep conv
 * with few output channels on a small image, the columns of each image
 * row in tiles of up to 9 (default_deep_rows).
 */
#include "tuner/internal.h"
#include "tuner/rule_framework.h"

/* Weights above this make a conv deep (the default's reduction-block
 * bound, 1 MiB). */
#define DEEP_WEIGHT_BYTES (4 * TS_DEFAULT_STREAMED_BYTES)
/* An output above this is not a small image's. */
#define DEEP_OUTPUT_BYTES TS_DEFAULT_STREAMED_BYTES
/* Weights that are neither constant nor blocked above this are read where
 * they lie (the fused-pixel form) rather than copied into panels at every
 * call. */
#define DEEP_COPIED_BYTES (8 * TS_DEFAULT_STREAMED_BYTES)
#define DEEP_MAX_ROWS 9

bool default_fuse_short_rows(ts_sched *s, const ts_stmt *r, ts_rv *loops,
                             int *binds, int *nl, int *rows, int *vec,
                             int lanes, int regs) {
  int i = *rows - 1;
  if (!pixels_fusible(s, r, loops, binds, *nl, i, *rows, *vec, lanes, regs))
    return false;
  ts_rv pair[2] = {loops[i], loops[*rows]}, fused;
  if (ts_sched_fuse(s, pair, 2, &fused)) return false;
  loops[i] = fused;
  for (int k = *rows; k + 1 < *nl; k++) {
    loops[k] = loops[k + 1];
    binds[k] = binds[k + 1];
  }
  (*nl)--;
  if (*vec > *rows) (*vec)--;
  *rows = i;
  return true;
}

bool default_deep_rows(ts_sched *s, const ts_target *t, const ts_stmt *r,
                       const ts_rv *loops, const int *binds, int nl, int vec,
                       int rows, int lanes, int64_t *nrows) {
  int64_t ev = rv_extent(s, loops[vec]), er = rv_extent(s, loops[rows]);
  if (lanes < 1 || ev % (3 * lanes) || er < 2) return false;
  int taps = 0; /* reduce loops longer than 1: a kernel wider than 1 x 1 */
  for (int i = 0; i < nl; i++)
    if (binds[i] == BIND_REDUCE && rv_extent(s, loops[i]) > 1) taps++;
  if (taps < 2) return false;
  const ts_stmt *outer[MAX_LOOPS], *lv = ts_sched_rv_loop(s, loops[vec]),
                                   *lr = ts_sched_rv_loop(s, loops[rows]);
  int n_o = 0, at[MAX_LOOPS];
  for (int i = 0; i < nl; i++)
    if (binds[i] != BIND_REDUCE && i != vec && i != rows) {
      at[n_o] = i;
      outer[n_o++] = ts_sched_rv_loop(s, loops[i]);
    }
  bool blocked = false;
  const ts_buffer *sb = default_streamed_input(r, lv, lr, outer, n_o, &blocked);
  if (!sb) return false;
  /* the panels of 3 vectors: the vector axis's, times the outer loops
   * that index the weights (blocked by output channels, [CO/B, .., B]) */
  int64_t panels = ev / (3 * lanes);
  for (int o = 0; blocked && o < n_o; o++) {
    bool uo = false;
    default_streamed_input(r, lv, lr, &outer[o], 1, &uo);
    if (uo) panels *= rv_extent(s, loops[at[o]]);
  }
  int64_t bytes = default_buffer_bytes(sb);
  if (bytes <= DEEP_WEIGHT_BYTES || panels >= 2 * ts_target_num_cores(t) ||
      default_buffer_bytes(ts_block_write(ts_realize_block(r), 0)->buffer) >
          DEEP_OUTPUT_BYTES ||
      (!blocked && !default_const_param(s, sb) && bytes > DEEP_COPIED_BYTES))
    return false;
  /* 9 rows (27 accumulators, 3 weight vectors and a broadcast in AVX-512's
   * 32 registers); only where that is more than the fused pixels' tile
   * holds (8 rows): with AVX2's 16 registers both forms hold 4 rows and
   * the unfused one moved both ways (docs/tuning.md) */
  int regs = ts_target_vector_registers(t);
  int64_t cap = (regs - 4) / 3;
  if (cap > DEEP_MAX_ROWS) cap = DEEP_MAX_ROWS;
  if (cap <= default_rows_cap(regs, 3)) return false;
  int64_t tiles = (er + cap - 1) / cap;
  *nrows = (er + tiles - 1) / tiles;
  return true;
}
