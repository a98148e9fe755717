/*
 * default_narrow.c — the default schedule's padded widths (default.c
 * calls them): an anchor whose vector axis is a narrow width that no
 * vector divides (61 columns on 16 lanes) padded to whole vectors by
 * pad_einsum, so that its register tile spans the width with no guard.
 */
#include "tuner/internal.h"
#include "tuner/rule_framework.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* rows reading each element of an input copied per call, for its
 * padded copy to pay */
#define PAD_MIN_ROWS 192
/* widths padded: fewer vectors than this */
#define PAD_MAX_VECTORS 8
/* products summed per output for a width past 4 vectors */
#define PAD_WIDE_MIN_TERMS 64

/* Whether an input of block r read through loop lv (the vector axis) is
 * also read through loop lr (the rows): a depthwise conv's image, which a
 * padded copy would copy whole. */
static bool vector_input_by_rows(const ts_stmt *r, const ts_stmt *lv,
                                 const ts_stmt *lr) {
  const ts_block *bb = ts_realize_block(r);
  const ts_buffer *w = ts_block_write(bb, 0)->buffer;
  for (int i = 0; i < ts_block_n_reads(bb); i++) {
    const ts_buffer *x = ts_block_read(bb, i)->buffer;
    if (x != w && read_dim_of_loop(r, x, lv) != -1 &&
        read_dim_of_loop(r, x, lr) != -1)
      return true;
  }
  return false;
}

int default_pad_loop(ts_sched *s, ts_rv b, const ts_stmt *r, const ts_stmt *lv,
                     int lanes, char (*pads)[DEFAULT_NAME_MAX], int cap,
                     char *unpad) {
  const ts_block *bb = ts_realize_block(r);
  int iter = -1;
  for (int i = 0; i < ts_block_n_iters(bb); i++)
    if (ts_realize_value(r, i) == ts_for_var(lv)) iter = i;
  ts_rv out[DEFAULT_PAD_COPIES];
  int n = 0;
  if (iter < 0 ||
      ts_sched_pad_einsum(s, b, iter, lanes, out, DEFAULT_PAD_COPIES, &n) ||
      n < 1)
    return -1;
  /* the input copies' names (all but the copy out, last) */
  int np = 0;
  for (int i = 0; i + 1 < n && np < cap; i++) {
    const char *bn = ts_sched_rv_block_name(s, out[i]);
    if (bn) snprintf(pads[np++], DEFAULT_NAME_MAX, "%s", bn);
  }
  const char *un = ts_sched_rv_block_name(s, out[n - 1]);
  if (unpad) snprintf(unpad, DEFAULT_NAME_MAX, "%s", un ? un : "");
  return np;
}

int default_pad_narrow(ts_sched *s, const ts_target *t, const char *name,
                       ts_rv b, const ts_rv *loops, int nl, int vec, int lanes,
                       char (*pads)[DEFAULT_NAME_MAX], int cap) {
  (void)t;
  const ts_stmt *r = ts_func_find_block(ts_sched_func(s), name);
  const ts_stmt *lv = ts_sched_rv_loop(s, loops[vec]);
  int64_t ev = rv_extent(s, loops[vec]);
  if (!r || !lv || lanes < 2 || ev % lanes == 0 || ev <= lanes ||
      ev >= PAD_MAX_VECTORS * lanes)
    return 0;
  /* rows to tile: the innermost other spatial loop, not reading the
   * vector axis's inputs */
  const ts_stmt *lr = NULL;
  for (int i = vec - 1; i >= 0 && !lr; i--) {
    const ts_stmt *l = ts_sched_rv_loop(s, loops[i]);
    if (l && loop_binding(r, l) == BIND_SPATIAL && rv_extent(s, loops[i]) > 1)
      lr = l;
  }
  if (!lr || vector_input_by_rows(r, lv, lr)) return 0;
  /* Past 4 vectors the width takes several column tiles, and the copy out
   * may become a pass of its own over the output: it pays where each
   * output sums PAD_WIDE_MIN_TERMS products or more (AVX2, 2 threads,
   * unpadded -> padded, x the best library: 3x3 conv 28x28 64 -> 60
   * 0.69 -> 1.15, matmul 500 x 45 x 300 0.41 -> 0.94-1.39; 64 terms:
   * matmul 500 x 45 x 64 0.18 -> 0.94-1.47, batch_matmul 8 x 173 x 61 x 64
   * transpose_b 0.87 -> 1.05, 1x1 conv 56x56 64 -> 61 0.54 -> 0.91, on
   * AVX-512 500 x 100 x 64 0.62 -> 0.88; 32 terms, a 1x1 conv 28x28 32 ->
   * 61, 0.70 -> 0.33) */
  if (ev > 4 * lanes) {
    int64_t terms = 1;
    for (int i = 0; i < nl; i++) {
      const ts_stmt *l = ts_sched_rv_loop(s, loops[i]);
      if (l && loop_binding(r, l) == BIND_REDUCE)
        terms *= rv_extent(s, loops[i]);
    }
    if (terms < PAD_WIDE_MIN_TERMS) return 0;
  }
  /* Only where the unpadded tiles are weak. A width that a divisor tile
   * or whole vectors and a part cover (40 = 32 + 8 on 16 lanes, one tile
   * across) already runs near the FMA peak, and padding it only wastes
   * lanes. The ragged tiles of one vector whose last is masked (61 = 3 x
   * 16 + 13, the tile accumulating in a local), or a tile whose part is
   * under a quarter of a vector (17 = 16 + 1, a scalar FMA per row; 50 =
   * 32 + 16 + 2: a 3x3 conv 14x14 256 -> 100 in tiles of 50 ran at 0.05
   * x oneDNN) are what it replaces. */
  int64_t cols = default_lane_tile(ev, lanes);
  int64_t whole = ev >= 4 * lanes ? 2 * lanes : lanes; /* as default.c */
  bool ragged = ev >= 2 * lanes &&
                (cols < lanes ||
                 default_ceil_fill(ev, whole) >
                     WHOLE_VECTOR_GAIN * default_divisor_fill(cols, lanes));
  if (!ragged && 4 * (cols % lanes) >= lanes) return 0;
  /* (a tile with a small part, unlike a ragged one, runs well enough that
   * even a copy made anyway must serve enough rows: a dense layer of 64
   * rows with W transposed, 50 columns, lost 0.53 -> 0.44 padded) */
  bool rows_always = !ragged;
  /* Each padded input is copied per call unless it is a constant (copied
   * ahead of the calls) or copied anyway (transposed, the padding then
   * part of that copy): enough rows must read each element to pay for it.
   * (128 x 45 x 768, B copied for 128 rows: 0.83 -> 0.60 x the best
   * library.) */
  const ts_block *rb = ts_realize_block(r);
  const ts_func *f = ts_sched_func(s);
  for (int i = 0; i < ts_block_n_reads(rb); i++) {
    const ts_buffer *x = ts_block_read(rb, i)->buffer;
    if (x == ts_block_write(rb, 0)->buffer || read_dim_of_loop(r, x, lv) < 0)
      continue;
    bool constant = false;
    for (int p = 0; p < ts_func_n_params(f) && p < 64; p++)
      if (ts_func_param(f, p) == x) constant = ts_func_const_params(f) >> p & 1;
    if (!constant && (default_loop_contiguous(r, lv) || rows_always) &&
        default_rows_reading(s, r, x, loops, nl) < PAD_MIN_ROWS)
      return 0;
  }
  char unpad[DEFAULT_NAME_MAX];
  int np = default_pad_loop(s, b, r, lv, lanes, pads, cap, unpad);
  if (np < 0) return 0;
  /* the output's elementwise consumer (a bias, an activation) folded into
   * the copy out, which the anchor's consumer step then moves under the
   * row tile */
  ts_rv cons[4], ub;
  int nc = 0;
  if (unpad[0] && !ts_sched_get_block(s, unpad, &ub) &&
      !ts_sched_get_consumers(s, ub, cons, 4, &nc) && nc == 1)
    ts_sched_reverse_compute_inline(s, cons[0]); /* (refused: left after) */
  return np + 1;
}

void default_inline_pads(ts_sched *s, const char *anchor,
                         char (*pads)[DEFAULT_NAME_MAX], int n) {
  for (int i = 0; i < n; i++) {
    const ts_stmt *pr = ts_func_find_block(ts_sched_func(s), pads[i]);
    const ts_stmt *ar = ts_func_find_block(ts_sched_func(s), anchor);
    if (!pr || !ar) continue;
    const ts_buffer *x = ts_block_write(ts_realize_block(pr), 0)->buffer;
    bool read = false;
    for (int k = 0; k < ts_block_n_reads(ts_realize_block(ar)); k++)
      read |= ts_block_read(ts_realize_block(ar), k)->buffer == x;
    ts_rv pb;
    /* a copy of it (a packed panel) reads it instead: the padding goes
     * into that copy, one pass */
    if (!read && !ts_sched_get_block(s, pads[i], &pb))
      ts_sched_compute_inline(s, pb); /* (refused: the copy stays) */
  }
}
