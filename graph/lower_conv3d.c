/*
 * lower_conv3d.c — a 3-D convolution as a 2-D one over depth-stacked
 * slices, so the 2-D machinery takes it (the channels-last layout, the
 * blocked weights, the 2-D default schedules, Winograd for 3x3 taps).
 *
 * A Conv over x [N, C, D, H, W] with weights [CO, C, KD, KH, KW] (float32,
 * constant, one group) becomes:
 *   x4   = Reshape(Transpose(x, [0, 2, 1, 3, 4]), [N*D, C, H, W])
 *   s_kd = Gather(x4, idx_kd, axis 0) [* mask_kd]  for each depth tap kd
 *   y4   = Conv2D(Concat(s_0 .. s_KD-1, axis 1), W2)   [N*OD, CO, OH, OW]
 *   y    = Transpose(Reshape(y4, [N, OD, CO, OH, OW]), [0, 2, 1, 3, 4])
 * where idx_kd[n*OD + od] is the slice n*D + od*sd + kd*dd - pd of the
 * depth tap; where that falls in the depth padding, the gathered slice is
 * multiplied by zero (a constant [N*OD, 1, 1, 1] mask, fused into the
 * Gather's kernel), and W2[co, kd*C + c] = W[co, c, kd]. Each
 * output slice sums the same taps of the same inputs as the 3-D conv (an
 * input holding inf or NaN differs: the masked slice gives NaN there,
 * where the padding gave 0).
 * The depth-stacked input is KD copies of the activation (data movement
 * the 2-D conv's speed pays for: a 3x3x3 conv of 64 channels over 16 x
 * 56 x 56 ran at about 43 GFLOP/s as a direct NCDHW conv). depth_views.c
 * then runs the elementwise chains between such convs on the 4-D forms,
 * so the transposes between two of them cancel.
 */
#include "lower.h"

#include <stdlib.h>
#include <string.h>

static const int64_t depth_perm[5] = {0, 2, 1, 3, 4};

static int emit_transpose(gr_lowering *l, const gr_node *n, int x, int out,
                          const char *suffix) {
  int64_t ints[5];
  memcpy(ints, depth_perm, sizeof ints);
  gr_attr a = {.name = "perm", .kind = GR_ATTR_INTS, .n = 5, .ints = ints};
  return gr_lower_node(l, n, "Transpose", &x, 1, out, &a, 1, suffix);
}

/* W [CO, C, KD, KH, KW] as W2 [CO, KD*C, KH, KW]. */
static int stacked_weights(ts_graph *g, int w) {
  const gr_value wv = g->values[w]; /* copy: values may move */
  int64_t CO = wv.shape[0], C = wv.shape[1], KD = wv.shape[2];
  int64_t KHW = wv.shape[3] * wv.shape[4];
  int64_t s[4] = {CO, KD * C, wv.shape[3], wv.shape[4]};
  int c = gr_const_reserve(g, gr_fresh_name(g, wv.name), TS_FLOAT32, 4, s);
  if (c < 0) return c;
  const float *src = gr_const_data(g, w);
  float *dst = gr_const_data(g, c);
  for (int64_t co = 0; co < CO; co++)
    for (int64_t kd = 0; kd < KD; kd++)
      for (int64_t ci = 0; ci < C; ci++)
        memcpy(dst + ((co * KD + kd) * C + ci) * KHW,
               src + ((co * C + ci) * KD + kd) * KHW, sizeof(float) * KHW);
  return c;
}

int gr_lower_conv3d(gr_lowering *l, const gr_node *n) {
  ts_graph *g = l->g;
  /* (not in a graph of named dynamic sizes: the taps' indices depend on
   * the batch and the depth) */
  if (strcmp(n->op, "Conv") || n->n_inputs < 2 || n->n_outputs != 1 ||
      g->named_dims)
    return 1;
  int x = n->inputs[0], w = n->inputs[1], y = n->outputs[0];
  if (x < 0 || w < 0 || g->values[x].ndim != 5 || g->values[y].ndim != 5 ||
      g->values[w].ndim != 5 || !gr_is_const(g, w) ||
      !ts_dtype_eq(g->values[x].dtype, TS_FLOAT32) ||
      !ts_dtype_eq(g->values[w].dtype, TS_FLOAT32) ||
      gr_attr_int(n, "group", 1) != 1)
    return 1;
  const gr_value xv = g->values[x], yv = g->values[y], wv = g->values[w];
  int64_t N = xv.shape[0], C = xv.shape[1], D = xv.shape[2];
  int64_t KD = wv.shape[2], OD = yv.shape[2];
  int64_t k[3] = {KD, wv.shape[3], wv.shape[4]}, st[3] = {1, 1, 1},
          dil[3] = {1, 1, 1}, pads[6];
  int c;
  const int64_t *p;
  if ((p = gr_attr_ints(n, "strides", &c)) && c == 3) memcpy(st, p, sizeof st);
  if ((p = gr_attr_ints(n, "dilations", &c)) && c == 3)
    memcpy(dil, p, sizeof dil);
  if (wv.shape[1] != C || gr_resolve_pads(n, 3, &xv.shape[2], k, st, dil, pads))
    return 1; /* shape inference has reported what is wrong */
  /* x4 = [N*D, C, H, W], a zero slice appended when a tap reads padding */
  int xt = emit_transpose(l, n, x, -1, "ndchw");
  if (xt < 0) return xt;
  int64_t s4[4] = {N * D, C, xv.shape[3], xv.shape[4]};
  int x4 = gr_lower_reshape(l, n, xt, 4, s4, -1, "depth_batch");
  if (x4 < 0) return x4;
  int *taps = malloc(sizeof(int) * (size_t)KD);
  int64_t *idx = malloc(sizeof(int64_t) * (size_t)(N * OD));
  double *mask = malloc(sizeof(double) * (size_t)(N * OD));
  if (!taps || !idx || !mask) {
    free(taps);
    free(idx);
    free(mask);
    return TS_ENOMEM;
  }
  int rc = TS_OK;
  for (int64_t kd = 0; kd < KD && rc >= 0; kd++) {
    bool identity = N * OD == N * D, padded = false;
    for (int64_t b = 0; b < N; b++)
      for (int64_t od = 0; od < OD; od++) {
        int64_t d = od * st[0] + kd * dil[0] - pads[0];
        bool in = d >= 0 && d < D;
        idx[b * OD + od] = in ? b * D + d : 0;
        mask[b * OD + od] = in;
        padded = padded || !in;
        identity = identity && in && idx[b * OD + od] == b * OD + od;
      }
    if (identity) {
      taps[kd] = x4;
      continue;
    }
    int64_t cnt = N * OD;
    int iv =
        gr_const_add(g, gr_fresh_name(g, "depth_tap"), TS_INT64, 1, &cnt, idx);
    gr_attr a = {.name = "axis", .kind = GR_ATTR_INT, .i = 0};
    rc = iv < 0 ? iv
                : gr_lower_node(l, n, "Gather", (int[]){x4, iv}, 2, -1, &a, 1,
                                "depth_tap");
    if (rc >= 0 && padded) {
      /* a slice in the depth padding: zeros (the Mul fuses into the
       * Gather's kernel, so nothing is copied to pad the input) */
      int64_t ms[4] = {N * OD, 1, 1, 1};
      int mv = gr_lower_const_f32(g, gr_fresh_name(g, "depth_pad"), 4, ms, mask,
                                  N * OD);
      rc = mv < 0 ? mv
                  : gr_lower_node(l, n, "Mul", (int[]){rc, mv}, 2, -1, NULL, 0,
                                  "depth_pad");
    }
    taps[kd] = rc;
  }
  free(mask);
  free(idx);
  int stacked = rc < 0 ? rc : taps[0];
  if (rc >= 0 && KD > 1) {
    gr_attr a = {.name = "axis", .kind = GR_ATTR_INT, .i = 1};
    stacked = gr_lower_node(l, n, "Concat", taps, (int)KD, -1, &a, 1,
                            "depth_stacked");
  }
  free(taps);
  if (stacked < 0) return stacked;
  int w2 = stacked_weights(g, w);
  if (w2 < 0) return w2;
  int64_t ints[4][4];
  gr_attr at[5];
  ints[0][0] = k[1], ints[0][1] = k[2];
  ints[1][0] = st[1], ints[1][1] = st[2];
  ints[2][0] = dil[1], ints[2][1] = dil[2];
  ints[3][0] = pads[1], ints[3][1] = pads[2], ints[3][2] = pads[4],
  ints[3][3] = pads[5];
  at[0] = (gr_attr){
      .name = "kernel_shape", .kind = GR_ATTR_INTS, .n = 2, .ints = ints[0]};
  at[1] = (gr_attr){
      .name = "strides", .kind = GR_ATTR_INTS, .n = 2, .ints = ints[1]};
  at[2] = (gr_attr){
      .name = "dilations", .kind = GR_ATTR_INTS, .n = 2, .ints = ints[2]};
  at[3] =
      (gr_attr){.name = "pads", .kind = GR_ATTR_INTS, .n = 4, .ints = ints[3]};
  int ins[3] = {stacked, w2, n->n_inputs > 2 ? n->inputs[2] : -1};
  int y4 = gr_lower_node(l, n, "Conv", ins, ins[2] >= 0 ? 3 : 2, -1, at, 4,
                         "depth_conv");
  if (y4 < 0) return y4;
  int64_t s5[5] = {N, OD, yv.shape[1], yv.shape[3], yv.shape[4]};
  int yr = gr_lower_reshape(l, n, y4, 5, s5, -1, "depth_split");
  if (yr < 0) return yr;
  int out = emit_transpose(l, n, yr, y, "ncdhw");
  return out < 0 ? out : TS_OK;
}
