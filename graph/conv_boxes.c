/*
 * conv_boxes.c — a conv whose padding takes a large share of its taps, as
 * convs over the boxes of its output where the taps that land inside the
 * image are the same, each with those taps only and no padding.
 *
 * A stride-1 conv's output position o (per spatial axis) reads input
 * o + k*d - p for tap k; the taps inside [0, I) form a range [lo(o), hi(o))
 * that changes only near the borders. Consecutive positions with the same
 * range are a band; a band of rows by a band of columns is a box. Inside a
 * box every position reads the same taps, so the box is a conv of the
 * kernel's sub-rectangle [lo, hi) over the input rows and columns those
 * taps reach (a Slice, or the whole input), without padding; Concats along
 * the columns, then the rows, put the boxes together. The values are the
 * original's: the taps left out only ever read padding (zeros).
 *
 * Taken where that saves at least a third of the conv's multiply-adds in
 * at most nine boxes (one box when every position reads the same taps: a
 * dilated conv on a map smaller than its dilation is its centre tap): atrous
 * convs on small maps (DeepLabV3's pyramid, a 3x3 conv of dilation 18 on 24x24
 * reads padding with three of its four taps' products), not "same" convs on
 * large images (a 3x3 conv of pad 1 wastes 2/H of a row). The box convs then go
 * through the layout pass and the default schedules as any conv (a box of one
 * tap is a pointwise conv, a matrix product).
 */
#include "lower.h"

#include <string.h>

#define MAX_BANDS 3
#define MIN_SAVING (1.0 / 3.0)

typedef struct band {
  int64_t o0, o1; /* output positions */
  int64_t k0, k1; /* taps inside the image */
} band;

/* The bands of one axis (input size I, kernel K, dilation d, begin pad p,
 * O outputs); their count, or -1 when more than MAX_BANDS or a position
 * reads no tap inside the image. */
static int axis_bands(int64_t I, int64_t K, int64_t d, int64_t p, int64_t O,
                      band *b) {
  int n = 0;
  for (int64_t o = 0; o < O; o++) {
    int64_t lo = K, hi = 0;
    for (int64_t k = 0; k < K; k++) {
      int64_t i = o + k * d - p;
      if (i >= 0 && i < I) {
        if (k < lo) lo = k;
        hi = k + 1;
      }
    }
    if (hi <= lo) return -1;
    if (n && b[n - 1].k0 == lo && b[n - 1].k1 == hi) {
      b[n - 1].o1 = o + 1;
      continue;
    }
    if (n == MAX_BANDS) return -1;
    b[n++] = (band){o, o + 1, lo, hi};
  }
  return n;
}

/* Weights [CO, CI, KH, KW] restricted to taps [kh0, kh1) x [kw0, kw1). */
static int sub_kernel(ts_graph *g, int w, const band *r, const band *c) {
  const gr_value wv = g->values[w]; /* copy: values may move */
  int64_t KH = wv.shape[2], KW = wv.shape[3], rows = wv.shape[0] * wv.shape[1];
  int64_t kh = r->k1 - r->k0, kw = c->k1 - c->k0;
  int64_t s[4] = {wv.shape[0], wv.shape[1], kh, kw};
  int id = gr_const_reserve(g, gr_fresh_name(g, wv.name), TS_FLOAT32, 4, s);
  if (id < 0) return id;
  const float *src = gr_const_data(g, w);
  float *dst = gr_const_data(g, id);
  for (int64_t q = 0; q < rows; q++)
    for (int64_t i = 0; i < kh; i++)
      memcpy(dst + (q * kh + i) * kw, src + (q * KH + r->k0 + i) * KW + c->k0,
             sizeof(float) * kw);
  return id;
}

/* x sliced along axis to the input positions the band's taps reach (x
 * itself when that is all of them). */
static int band_input(gr_lowering *l, const gr_node *n, int x, int axis,
                      const band *b, int64_t d, int64_t p) {
  int64_t i0 = b->o0 + b->k0 * d - p, i1 = b->o1 - 1 + (b->k1 - 1) * d - p + 1;
  if (i0 == 0 && i1 == l->g->values[x].shape[axis]) return x;
  return gr_lower_slice(l, n, x, axis, i0, i1, 1, -1, "box_in");
}

int gr_lower_conv_boxes(gr_lowering *l, const gr_node *n) {
  ts_graph *g = l->g;
  /* (not in a graph of named dynamic sizes: the boxes depend on them) */
  if (strcmp(n->op, "Conv") || n->n_inputs < 2 || n->n_outputs != 1 ||
      g->named_dims)
    return 1;
  int x = n->inputs[0], w = n->inputs[1], y = n->outputs[0];
  if (x < 0 || w < 0 || g->values[x].ndim != 4 || g->values[w].ndim != 4 ||
      g->values[y].ndim != 4 || !gr_is_const(g, w) ||
      !ts_dtype_eq(g->values[x].dtype, TS_FLOAT32) ||
      !ts_dtype_eq(g->values[w].dtype, TS_FLOAT32) ||
      !gr_attr_ints_all(n, "strides", 1))
    return 1;
  const gr_value xv = g->values[x], yv = g->values[y];
  int64_t k[2] = {g->values[w].shape[2], g->values[w].shape[3]}, st[2] = {1, 1},
          dil[2] = {1, 1}, pads[4];
  int c;
  const int64_t *p = gr_attr_ints(n, "dilations", &c);
  if (p && c == 2) memcpy(dil, p, sizeof dil);
  if (gr_resolve_pads(n, 2, &xv.shape[2], k, st, dil, pads)) return 1;
  band rb[MAX_BANDS], cb[MAX_BANDS];
  int nr = axis_bands(xv.shape[2], k[0], dil[0], pads[0], yv.shape[2], rb);
  int nc = axis_bands(xv.shape[3], k[1], dil[1], pads[1], yv.shape[3], cb);
  if (nr < 1 || nc < 1) return 1;
  double taps = 0, all = (double)yv.shape[2] * yv.shape[3] * k[0] * k[1];
  for (int i = 0; i < nr; i++)
    for (int j = 0; j < nc; j++)
      taps += (double)(rb[i].o1 - rb[i].o0) * (cb[j].o1 - cb[j].o0) *
              (rb[i].k1 - rb[i].k0) * (cb[j].k1 - cb[j].k0);
  if (taps > (1 - MIN_SAVING) * all) return 1;
  /* the attributes of every box: no pads, the conv's dilations and group */
  int64_t ints[3][4];
  gr_attr at[4];
  int na = 0;
  ints[0][0] = ints[0][1] = ints[0][2] = ints[0][3] = 0;
  at[na++] =
      (gr_attr){.name = "pads", .kind = GR_ATTR_INTS, .n = 4, .ints = ints[0]};
  memcpy(ints[1], dil, sizeof dil);
  at[na++] = (gr_attr){
      .name = "dilations", .kind = GR_ATTR_INTS, .n = 2, .ints = ints[1]};
  at[na++] = (gr_attr){
      .name = "group", .kind = GR_ATTR_INT, .i = gr_attr_int(n, "group", 1)};
  int rows[MAX_BANDS];
  for (int i = 0; i < nr; i++) {
    int xr = band_input(l, n, x, 2, &rb[i], dil[0], pads[0]);
    if (xr < 0) return xr;
    int cols[MAX_BANDS];
    for (int j = 0; j < nc; j++) {
      int xc = band_input(l, n, xr, 3, &cb[j], dil[1], pads[1]);
      int wk = sub_kernel(g, w, &rb[i], &cb[j]);
      if (xc < 0 || wk < 0) return xc < 0 ? xc : wk;
      int ins[3] = {xc, wk, n->n_inputs > 2 ? n->inputs[2] : -1};
      cols[j] = gr_lower_node(l, n, "Conv", ins, ins[2] >= 0 ? 3 : 2,
                              nr == 1 && nc == 1 ? y : -1, at, na, "box");
      if (cols[j] < 0) return cols[j];
    }
    gr_attr ax = {.name = "axis", .kind = GR_ATTR_INT, .i = 3};
    rows[i] = nc == 1 ? cols[0]
                      : gr_lower_node(l, n, "Concat", cols, nc,
                                      nr == 1 ? y : -1, &ax, 1, "box_row");
    if (rows[i] < 0) return rows[i];
  }
  if (nr == 1) return TS_OK;
  gr_attr ax = {.name = "axis", .kind = GR_ATTR_INT, .i = 2};
  int out = gr_lower_node(l, n, "Concat", rows, nr, y, &ax, 1, "box_rows");
  return out < 0 ? out : TS_OK;
}
