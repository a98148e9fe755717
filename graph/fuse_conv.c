/*
 * fuse_conv.c — the convolution anchors of a fused group (see fuse.c):
 * NCHW and its 1-D/3-D forms, channels-last, pointwise channels-last as a
 * matrix product, blocked weights [CO/B, KH, KW, CI/G, B] and blocked
 * activations [N, C/B, H, W, B]; each a pad stage, the reduction and the
 * Conv's bias.
 */
#include "fuse_move.h"

#include <string.h>

typedef gr_fuse_builder builder;

/* conv + the Conv's bias (if any) over the channel axes at the end of its
 * shape (rank nd, as the group's stages see it). */
static ts_buffer *conv_bias(builder *b, const gr_node *n, ts_buffer *conv,
                            const int64_t *shape, int nd) {
  if (n->n_inputs < 3 || n->inputs[2] < 0) return conv;
  ts_buffer *bias = gr_fuse_param_as(b, n->inputs[2], b->split_b != 0);
  if (!bias) return NULL;
  ts_te_stage *bs = ts_te_compute(b->te, gr_fuse_stage_name(b, "bias"),
                                  TS_FLOAT32, shape, nd, NULL);
  ts_expr *ax[TS_MAX_DIMS];
  for (int d = 0; d < nd; d++) ax[d] = ts_te_axis(bs, d);
  return ts_te_set_value(bs, ts_add(b->a, ts_te_load(b->te, conv, ax, nd),
                                    gr_fuse_bcast_load(b, bias, ax, nd)));
}

/* Whether Conv n is pointwise channels-last (2-D, 1x1, stride 1, no
 * padding, group 1): a matrix product over the merged N, H, W axes. */
bool gr_fuse_pointwise_conv(const ts_graph *g, const gr_node *n) {
  if (!gr_op_is_conv(n->op) || !gr_node_channels_last(n) ||
      g->values[n->inputs[0]].ndim != 4 || gr_attr_int(n, "group", 1) != 1)
    return false;
  const gr_value *w = &g->values[n->inputs[1]];
  int64_t B = gr_conv_weight_block(n);
  if (w->ndim != (B ? 5 : 4) || w->shape[B ? 1 : 0] != 1 ||
      w->shape[B ? 2 : 1] != 1)
    return false;
  if (!gr_attr_ints_all(n, "strides", 1) || !gr_attr_ints_all(n, "pads", 0))
    return false;
  const char *ap = gr_attr_string(n, "auto_pad", "NOTSET");
  return !strcmp(ap, "NOTSET") || !strcmp(ap, "VALID") ||
         !strncmp(ap, "SAME", 4); /* SAME pads nothing at kernel 1 */
}

/* A channels-last 2-D Conv with blocked weights [CO/B, KH, KW, CI, B]
 * (group 1): the reduction and the bias iterate the output as
 * [N, OH, OW, CO/B, B], so a tile of output channels reads contiguous
 * weights; the group's later stages follow (b->split_*). in: the padded
 * data. */
static ts_buffer *build_conv_blocked(builder *b, const gr_node *n,
                                     ts_buffer *in, ts_buffer *weight,
                                     const int64_t *strides,
                                     const int64_t *dil) {
  const ts_graph *g = b->g;
  ts_arena *a = b->a;
  const gr_value *w = &g->values[n->inputs[1]];
  const gr_value *out = &g->values[n->outputs[0]];
  int64_t B = w->shape[4], CO = out->shape[3];
  b->split_c = CO;
  b->split_b = B;
  int64_t shape[5] = {out->shape[0], out->shape[1], out->shape[2], CO / B, B};
  ts_te_stage *st = ts_te_compute(b->te, gr_fuse_stage_name(b, "conv"),
                                  gr_fuse_acc_dtype(b, n), shape, 5, NULL);
  ts_expr *r[2];
  for (int d = 0; d < 2; d++)
    r[d] = ts_te_reduce_axis(st, gr_fuse_window_axis(2, d), w->shape[1 + d]);
  ts_expr *rc = ts_te_reduce_axis(st, "rc", w->shape[3]);
  ts_expr *di[4], *wi[5];
  di[0] = ts_te_axis(st, 0);
  di[3] = rc;
  /* grouped: a block lies within one group (B divides its channels) */
  int64_t G = gr_attr_int(n, "group", 1);
  if (G > 1)
    di[3] = ts_add(
        a,
        ts_mul(a,
               ts_floordiv(a, ts_mul(a, ts_te_axis(st, 3), ts_index(a, B)),
                           ts_index(a, CO / G)),
               ts_index(a, w->shape[3])),
        rc);
  for (int d = 0; d < 2; d++)
    di[1 + d] =
        ts_add(a, ts_mul(a, ts_te_axis(st, 1 + d), ts_index(a, strides[d])),
               ts_mul(a, r[d], ts_index(a, dil[d])));
  wi[0] = ts_te_axis(st, 3);
  wi[1] = r[0];
  wi[2] = r[1];
  wi[3] = rc;
  wi[4] = ts_te_axis(st, 4);
  ts_buffer *conv =
      ts_te_set_reduce(st, TS_TE_SUM,
                       gr_fuse_product(b, n, ts_te_load(b->te, in, di, 4),
                                       ts_te_load(b->te, weight, wi, 5)));
  return conv_bias(b, n, conv, shape, 5);
}

/* A pointwise (1x1, stride 1, unpadded) channel-blocked Conv as a
 * product over the merged H, W of each channel block: data viewed
 * [N, CI/B, H*W, B], weights [CO/B, CI, B], the output iterated
 * [N, CO/B, H*W, B] and every operand viewed alike (b->merge_*), so the
 * schedules tile H*W as a matrix product's rows, not one image row. */
static ts_buffer *build_conv_nchwc_pointwise(builder *b, const gr_node *n) {
  const ts_graph *g = b->g;
  ts_arena *a = b->a;
  const gr_value *x = &g->values[n->inputs[0]], *w = &g->values[n->inputs[1]];
  const gr_value *out = &g->values[n->outputs[0]];
  int64_t B = x->shape[4], CI = w->shape[3], CO = out->shape[1] * B;
  b->merge_at = 2;
  b->merge_lead = 2;
  b->merge_rank = 5;
  b->lead[0] = out->shape[2], b->lead[1] = out->shape[3];
  int64_t ws[3] = {CO / B, CI, B};
  ts_buffer *data = gr_fuse_param_as(b, n->inputs[0], false);
  ts_buffer *weight = gr_fuse_param_shaped(b, n->inputs[1], ws, 3);
  if (!data || !weight) return NULL;
  int64_t shape[4] = {out->shape[0], out->shape[1],
                      out->shape[2] * out->shape[3], B};
  ts_te_stage *st = ts_te_compute(b->te, gr_fuse_stage_name(b, "conv"),
                                  gr_fuse_acc_dtype(b, n), shape, 4, NULL);
  ts_expr *rco = ts_te_reduce_axis(st, "rco", x->shape[1]);
  ts_expr *rci = ts_te_reduce_axis(st, "rci", B);
  ts_expr *di[4] = {ts_te_axis(st, 0), rco, ts_te_axis(st, 2), rci};
  ts_expr *wi[3] = {ts_te_axis(st, 1),
                    ts_add(a, ts_mul(a, rco, ts_index(a, B)), rci),
                    ts_te_axis(st, 3)};
  ts_buffer *conv =
      ts_te_set_reduce(st, TS_TE_SUM,
                       gr_fuse_product(b, n, ts_te_load(b->te, data, di, 4),
                                       ts_te_load(b->te, weight, wi, 3)));
  return conv_bias(b, n, conv, shape, 4);
}

/* A channel-blocked Conv (block.c: layout "NCHWc"): data [N, CI/B, H, W,
 * B], weights [CO/B, KH, KW, CI, B], bias [CO/B, 1, 1, B]; out[n, o, y,
 * x, b] sums in[n, c, y*s + i*d, x*s + j*d, k] * w[o, i, j, c*B + k] over
 * the input channel blocks c, the window (i, j) and the channels k of a
 * block. */
static ts_buffer *build_conv_nchwc(builder *b, const gr_node *n) {
  const ts_graph *g = b->g;
  ts_arena *a = b->a;
  const gr_value *x = &g->values[n->inputs[0]], *w = &g->values[n->inputs[1]];
  const gr_value *out = &g->values[n->outputs[0]];
  if (x->ndim != 5 || w->ndim != 5 || out->ndim != 5 ||
      gr_attr_int(n, "group", 1) != 1 || x->shape[4] != w->shape[4] ||
      n->inputs[0] == b->chain_v) {
    b->failed = true;
    return NULL;
  }
  if (w->shape[1] == 1 && w->shape[2] == 1 &&
      gr_attr_ints_all(n, "strides", 1) && gr_attr_ints_all(n, "pads", 0))
    return build_conv_nchwc_pointwise(b, n); /* auto_pad pads nothing */
  ts_buffer *data = gr_fuse_param(b, n->inputs[0]);
  ts_buffer *weight = gr_fuse_param(b, n->inputs[1]);
  if (!data || !weight) return NULL;
  int64_t B = x->shape[4], kernel[2] = {w->shape[1], w->shape[2]};
  int64_t strides[2] = {1, 1}, dil[2] = {1, 1}, pads[4], end[2];
  int64_t in_sp[2] = {x->shape[2], x->shape[3]};
  int c;
  const int64_t *p;
  if ((p = gr_attr_ints(n, "strides", &c)) && c == 2)
    strides[0] = p[0], strides[1] = p[1];
  if ((p = gr_attr_ints(n, "dilations", &c)) && c == 2)
    dil[0] = p[0], dil[1] = p[1];
  if (gr_resolve_pads(n, 2, in_sp, kernel, strides, dil, pads)) return NULL;
  end[0] = pads[2], end[1] = pads[3];
  ts_buffer *in = data;
  if (pads[0] || pads[1] || end[0] || end[1]) {
    in = gr_fuse_pad_stage(b, data, x, 2, 2, pads, end,
                           gr_fuse_pad_fill(b, n, x));
  }
  ts_te_stage *st = ts_te_compute(b->te, gr_fuse_stage_name(b, "conv"),
                                  gr_fuse_acc_dtype(b, n), out->shape, 5, NULL);
  ts_expr *rco = ts_te_reduce_axis(st, "rco", x->shape[1]);
  ts_expr *r[2];
  for (int d = 0; d < 2; d++)
    r[d] = ts_te_reduce_axis(st, gr_fuse_window_axis(2, d), kernel[d]);
  ts_expr *rci = ts_te_reduce_axis(st, "rci", B);
  ts_expr *di[5], *wi[5];
  di[0] = ts_te_axis(st, 0);
  di[1] = rco;
  di[4] = rci;
  for (int d = 0; d < 2; d++)
    di[2 + d] =
        ts_add(a, ts_mul(a, ts_te_axis(st, 2 + d), ts_index(a, strides[d])),
               ts_mul(a, r[d], ts_index(a, dil[d])));
  wi[0] = ts_te_axis(st, 1);
  wi[1] = r[0];
  wi[2] = r[1];
  wi[3] = ts_add(a, ts_mul(a, rco, ts_index(a, B)), rci);
  wi[4] = ts_te_axis(st, 4);
  ts_buffer *conv =
      ts_te_set_reduce(st, TS_TE_SUM,
                       gr_fuse_product(b, n, ts_te_load(b->te, in, di, 5),
                                       ts_te_load(b->te, weight, wi, 5)));
  return conv_bias(b, n, conv, out->shape, 5);
}

/* A pointwise channels-last conv (see pointwise_conv) as the matrix product
 * it is: data viewed [M, CI], weights [CI, CO] (or blocked [CO/B, CI, B]),
 * the output iterated [M, CO] (or [M, CO/B, B]); b->merge_* set by the
 * caller. */
static ts_buffer *build_conv_pointwise(builder *b, const gr_node *n) {
  const ts_graph *g = b->g;
  const gr_value *w = &g->values[n->inputs[1]];
  const gr_value *out = &g->values[n->outputs[0]];
  int64_t B = gr_conv_weight_block(n), CO = out->shape[3];
  int64_t CI = w->shape[B ? 3 : 2], M = b->lead[0] * b->lead[1] * b->lead[2];
  if (B) {
    b->split_c = CO;
    b->split_b = B;
  }
  int64_t ws[3] = {CI, CO, 0}, shape[3] = {M, CO, 0};
  if (B) {
    ws[0] = CO / B, ws[1] = CI, ws[2] = B;
    shape[1] = CO / B, shape[2] = B;
  }
  int nd = B ? 3 : 2;
  ts_buffer *data = gr_fuse_param_as(b, n->inputs[0], false);
  ts_buffer *weight = gr_fuse_param_shaped(b, n->inputs[1], ws, nd);
  if (!data || !weight) return NULL;
  ts_te_stage *st = ts_te_compute(b->te, gr_fuse_stage_name(b, "conv"),
                                  gr_fuse_acc_dtype(b, n), shape, nd, NULL);
  ts_expr *rc = ts_te_reduce_axis(st, "rc", CI);
  ts_expr *di[2] = {ts_te_axis(st, 0), rc}, *wi[3];
  if (B) {
    wi[0] = ts_te_axis(st, 1), wi[1] = rc, wi[2] = ts_te_axis(st, 2);
  } else {
    wi[0] = rc, wi[1] = ts_te_axis(st, 1);
  }
  ts_buffer *conv =
      ts_te_set_reduce(st, TS_TE_SUM,
                       gr_fuse_product(b, n, ts_te_load(b->te, data, di, 2),
                                       ts_te_load(b->te, weight, wi, nd)));
  return conv_bias(b, n, conv, shape, nd);
}

/* Conv (NC + 1 to 3 spatial dimensions, or channels-last 2-D): a pad
 * stage, the reduction, the bias. */
ts_buffer *gr_fuse_build_conv(builder *b, const gr_node *n) {
  const ts_graph *g = b->g;
  ts_arena *a = b->a;
  const gr_value *x = &g->values[n->inputs[0]], *w = &g->values[n->inputs[1]];
  const gr_value *out = &g->values[n->outputs[0]];
  if (gr_node_blocked(n)) return build_conv_nchwc(b, n);
  if (gr_fuse_pointwise_conv(g, n)) {
    if (n->inputs[0] == b->chain_v) { /* a merged view of a stage: no */
      b->failed = true;
      return NULL;
    }
    b->merge_lead = 3;
    b->merge_rank = 4;
    memcpy(b->lead, out->shape, sizeof(int64_t) * 3);
    return build_conv_pointwise(b, n);
  }
  /* the data: a parameter, or the stage of a transpose fused before */
  ts_buffer *data = n->inputs[0] == b->chain_v && b->chain_buf
                        ? b->chain_buf
                        : gr_fuse_param(b, n->inputs[0]);
  ts_buffer *weight = gr_fuse_param(b, n->inputs[1]);
  if (!data || !weight) return NULL;
  int nd = x->ndim, nsp = nd - 2;
  /* channels-last: data [N, spatial, C], weights [spatial, C/G, CO] */
  bool last = gr_node_channels_last(n);
  int sp0 = last ? 1 : 2, cax = last ? nd - 1 : 1;
  /* blocked channels-last weights: [CO/B, spatial, C, B] */
  int wsp0 = last ? (gr_conv_weight_block(n) ? 1 : 0) : 2;
  int wci = last ? nsp : 1, wco = last ? nsp + 1 : 0;
  int64_t kernel[3], strides[3], dil[3], pads[6], end[3], in_sp[3];
  int c;
  const int64_t *p;
  for (int d = 0; d < nsp; d++) {
    kernel[d] = w->shape[wsp0 + d], strides[d] = 1, dil[d] = 1;
    in_sp[d] = x->shape[sp0 + d];
  }
  if ((p = gr_attr_ints(n, "strides", &c)) && c == nsp)
    for (int d = 0; d < nsp; d++) strides[d] = p[d];
  if ((p = gr_attr_ints(n, "dilations", &c)) && c == nsp)
    for (int d = 0; d < nsp; d++) dil[d] = p[d];
  if (gr_resolve_pads(n, nsp, in_sp, kernel, strides, dil, pads)) return NULL;
  bool padded = false;
  for (int d = 0; d < nsp; d++) {
    end[d] = pads[d + nsp];
    padded = padded || pads[d] || end[d];
  }
  ts_buffer *in = data;
  if (padded)
    in = gr_fuse_pad_stage(b, data, x, sp0, nsp, pads, end,
                           gr_fuse_pad_fill(b, n, x));
  if (gr_conv_weight_block(n)) {
    int64_t G = gr_attr_int(n, "group", 1), B = gr_conv_weight_block(n);
    if (nsp != 2 || w->ndim != 5 || G < 1 || out->shape[cax] % G ||
        (out->shape[cax] / G) % B) {
      b->failed = true;
      return NULL;
    }
    return build_conv_blocked(b, n, in, weight, strides, dil);
  }
  int64_t G = gr_attr_int(n, "group", 1);
  int64_t CIg = w->shape[wci], COg = out->shape[cax] / G;
  ts_te_stage *st =
      ts_te_compute(b->te, gr_fuse_stage_name(b, "conv"),
                    gr_fuse_acc_dtype(b, n), out->shape, nd, NULL);
  ts_expr *nn = ts_te_axis(st, 0), *co = ts_te_axis(st, cax), *r[3], *rc = NULL;
  /* the channel reduction outermost in NCHW, innermost channels-last
   * (contiguous in both data and weights) */
  if (!last) rc = ts_te_reduce_axis(st, "rc", CIg);
  for (int d = 0; d < nsp; d++)
    r[d] = ts_te_reduce_axis(st, gr_fuse_window_axis(nsp, d), kernel[d]);
  if (last) rc = ts_te_reduce_axis(st, "rc", CIg);
  ts_expr *ci = rc;
  if (G > 1)
    ci = ts_add(
        a, ts_mul(a, ts_floordiv(a, co, ts_index(a, COg)), ts_index(a, CIg)),
        rc);
  ts_expr *di[TS_MAX_DIMS], *wi[TS_MAX_DIMS];
  di[0] = nn;
  di[cax] = ci;
  wi[wco] = co;
  wi[wci] = rc;
  for (int d = 0; d < nsp; d++) {
    di[sp0 + d] =
        ts_add(a, ts_mul(a, ts_te_axis(st, sp0 + d), ts_index(a, strides[d])),
               ts_mul(a, r[d], ts_index(a, dil[d])));
    wi[wsp0 + d] = r[d];
  }
  ts_buffer *conv =
      ts_te_set_reduce(st, TS_TE_SUM,
                       gr_fuse_product(b, n, ts_te_load(b->te, in, di, nd),
                                       ts_te_load(b->te, weight, wi, nd)));
  if (n->n_inputs < 3 || n->inputs[2] < 0) return conv;
  ts_buffer *bias = gr_fuse_param(b, n->inputs[2]);
  if (!bias) return NULL;
  ts_te_stage *bs = ts_te_compute(b->te, gr_fuse_stage_name(b, "bias"),
                                  TS_FLOAT32, out->shape, nd, NULL);
  ts_expr *ax[TS_MAX_DIMS];
  for (int d = 0; d < nd; d++) ax[d] = ts_te_axis(bs, d);
  return ts_te_set_value(bs, ts_add(a, ts_te_load(b->te, conv, ax, nd),
                                    ts_te_load(b->te, bias, &ax[cax], 1)));
}
