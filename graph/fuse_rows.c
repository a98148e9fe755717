/*
 * fuse_rows.c — the row operators fusion builds as groups of their own:
 * Softmax (max, exp, sum, divide over one axis) and LayerNormalization
 * (mean and variance over the trailing axes, then scale and shift), as
 * TE stages of the group under construction (see fuse.c).
 */
#include "fuse_move.h"

typedef gr_fuse_builder builder;

/* The axes of v without `axis` (a reduced stage over one axis). */
static ts_buffer *reduce_axis_stage(builder *b, const char *name,
                                    ts_buffer *src, const gr_value *v, int axis,
                                    ts_te_reducer r) {
  int64_t shape[TS_MAX_DIMS];
  int k = 0;
  for (int d = 0; d < v->ndim; d++)
    if (d != axis) shape[k++] = v->shape[d];
  if (k == 0) shape[k++] = 1;
  ts_te_stage *st = ts_te_compute(b->te, gr_fuse_stage_name(b, name),
                                  TS_FLOAT32, shape, k, NULL);
  ts_expr *ra = ts_te_reduce_axis(st, "rk", v->shape[axis]);
  ts_expr *idx[TS_MAX_DIMS];
  for (int d = 0, j = 0; d < v->ndim; d++)
    idx[d] = d == axis ? ra : ts_te_axis(st, j++);
  return ts_te_set_reduce(st, r, ts_te_load(b->te, src, idx, v->ndim));
}

/* Loads a reduced (axis removed) buffer at full axes. */
static ts_expr *load_reduced(builder *b, ts_buffer *buf, ts_expr **axes,
                             int ndim, int axis) {
  ts_expr *idx[TS_MAX_DIMS];
  int k = 0;
  for (int d = 0; d < ndim; d++)
    if (d != axis) idx[k++] = axes[d];
  if (k == 0) idx[k++] = ts_index(b->a, 0);
  return ts_te_load(b->te, buf, idx, k);
}

ts_buffer *gr_fuse_build_softmax(builder *b, const gr_node *n) {
  const gr_value *x = &b->g->values[n->inputs[0]];
  ts_buffer *X = gr_fuse_param(b, n->inputs[0]);
  if (!X) return NULL;
  int64_t axis = gr_attr_int(n, "axis", -1);
  if (axis < 0) axis += x->ndim;
  ts_buffer *mx = reduce_axis_stage(b, "max", X, x, (int)axis, TS_TE_MAX);
  ts_expr *ea[TS_MAX_DIMS];
  ts_te_stage *e = gr_fuse_stage_like(b, "exp", x, ea);
  ts_expr *diff = ts_sub(b->a, ts_te_load(b->te, X, ea, x->ndim),
                         load_reduced(b, mx, ea, x->ndim, (int)axis));
  ts_buffer *eb =
      ts_te_set_value(e, ts_call(b->a, TS_FLOAT32, "exp", &diff, 1));
  ts_buffer *sum = reduce_axis_stage(b, "sum", eb, x, (int)axis, TS_TE_SUM);
  ts_expr *ya[TS_MAX_DIMS];
  ts_te_stage *y = gr_fuse_stage_like(b, "softmax", x, ya);
  return ts_te_set_value(y,
                         ts_div(b->a, ts_te_load(b->te, eb, ya, x->ndim),
                                load_reduced(b, sum, ya, x->ndim, (int)axis)));
}

ts_buffer *gr_fuse_build_layer_norm(builder *b, const gr_node *n) {
  ts_arena *a = b->a;
  const gr_value *x = &b->g->values[n->inputs[0]];
  ts_buffer *X = gr_fuse_param(b, n->inputs[0]);
  ts_buffer *S = gr_fuse_param(b, n->inputs[1]);
  ts_buffer *B = n->n_inputs > 2 && n->inputs[2] >= 0
                     ? gr_fuse_param(b, n->inputs[2])
                     : NULL;
  if (!X || !S || (n->n_inputs > 2 && n->inputs[2] >= 0 && !B)) return NULL;
  int64_t axis = gr_attr_int(n, "axis", -1);
  if (axis < 0) axis += x->ndim;
  double eps = gr_attr_float(n, "epsilon", 1e-5);
  int64_t outer[TS_MAX_DIMS], count = 1;
  int no = 0;
  for (int d = 0; d < axis; d++) outer[no++] = x->shape[d];
  for (int d = (int)axis; d < x->ndim; d++) count *= x->shape[d];
  if (no == 0) outer[no++] = 1;
  /* Both statistics from one read of the row: the sum and the sum of
   * squares of the row shifted by its first element s, two independent
   * reductions that the schedule fuses into one loop (fuse_siblings);
   * mean = s + sum / n, var = max(sqsum / n - (sum / n)^2, 0). The shift
   * keeps the difference from cancelling (op_build_layer_norm, ops.md). */
  ts_buffer *stats[2] = {NULL, NULL};
  for (int s = 0; s < 2; s++) { /* sum, then sum of squares */
    ts_te_stage *st =
        ts_te_compute(b->te, gr_fuse_stage_name(b, s ? "sqsum" : "sum"),
                      TS_FLOAT32, outer, no, NULL);
    ts_expr *idx[TS_MAX_DIMS], *first[TS_MAX_DIMS], *oax[TS_MAX_DIMS];
    for (int d = 0; d < no; d++) oax[d] = ts_te_axis(st, d);
    for (int d = 0; d < x->ndim; d++) {
      idx[d] = d < axis ? oax[d]
                        : ts_te_reduce_axis(st, ts_arena_printf(a, "r%d", d),
                                            x->shape[d]);
      first[d] = d < axis ? oax[d] : ts_index(a, 0);
    }
    ts_expr *v = ts_sub(a, ts_te_load(b->te, X, idx, x->ndim),
                        ts_te_load(b->te, X, first, x->ndim));
    if (s)
      v = ts_mul(a, v,
                 ts_sub(a, ts_te_load(b->te, X, idx, x->ndim),
                        ts_te_load(b->te, X, first, x->ndim)));
    stats[s] = ts_te_set_reduce(st, TS_TE_SUM, v);
  }
  ts_expr *ya[TS_MAX_DIMS], *oi[TS_MAX_DIMS], *yfirst[TS_MAX_DIMS];
  ts_te_stage *y = gr_fuse_stage_like(b, "layer_norm", x, ya);
  for (int d = 0; d < no; d++) oi[d] = axis ? ya[d] : ts_index(a, 0);
  for (int d = 0; d < x->ndim; d++)
    yfirst[d] = d < axis ? ya[d] : ts_index(a, 0);
  ts_expr *inv_n = ts_float(a, TS_FLOAT32, 1.0 / (double)count);
  ts_expr *m1 = ts_mul(a, ts_te_load(b->te, stats[0], oi, no), inv_n);
  ts_expr *m1b = ts_mul(a, ts_te_load(b->te, stats[0], oi, no), inv_n);
  ts_expr *mean = ts_add(a, ts_te_load(b->te, X, yfirst, x->ndim),
                         ts_mul(a, ts_te_load(b->te, stats[0], oi, no), inv_n));
  ts_expr *var =
      ts_sub(a, ts_mul(a, ts_te_load(b->te, stats[1], oi, no), inv_n),
             ts_mul(a, m1, m1b));
  var = ts_add(a, ts_max(a, var, ts_float(a, TS_FLOAT32, 0.0)),
               ts_float(a, TS_FLOAT32, eps));
  ts_expr *r = ts_call(a, TS_FLOAT32, "rsqrt", &var, 1);
  int nt = x->ndim - (int)axis;
  ts_expr *v = ts_mul(
      a, ts_mul(a, ts_sub(a, ts_te_load(b->te, X, ya, x->ndim), mean), r),
      gr_fuse_bcast_load(b, S, ya + axis, nt));
  if (B) v = ts_add(a, v, gr_fuse_bcast_load(b, B, ya + axis, nt));
  return ts_te_set_value(y, v);
}

/* Softmax over the last axis of the group's scores S (the stage `scores`,
 * [..., M, N]) followed by the MatMul n2 of the result by V ([..., N, E],
 * its batch axes broadcasting from the right): the row maximum, exp(S -
 * max), its sum, the product U = exp(S - max) . V and O = U / sum — the
 * normalisation applied to the M x E product rather than to the M x N
 * probabilities (one division per output instead of one per score, and
 * the exponentials read once by the sum and once by the product). The
 * result differs from softmax-then-MatMul by rounding only. */
ts_buffer *gr_fuse_build_attention_tail(builder *b, const gr_node *sm,
                                        ts_buffer *scores, const gr_node *n2) {
  ts_arena *a = b->a;
  const gr_value *x = &b->g->values[sm->inputs[0]];
  const gr_value *v = &b->g->values[n2->inputs[1]];
  const gr_value *out = &b->g->values[n2->outputs[0]];
  int nx = x->ndim, nv = v->ndim, no = out->ndim;
  if (nx < 2 || nv < 2 || no != nx || nv > no ||
      v->shape[nv - 2] != x->shape[nx - 1] ||
      out->shape[no - 1] != v->shape[nv - 1])
    return NULL;
  ts_buffer *V = gr_fuse_param(b, n2->inputs[1]);
  if (!V) return NULL;
  int axis = nx - 1;
  ts_buffer *mx = reduce_axis_stage(b, "max", scores, x, axis, TS_TE_MAX);
  ts_expr *ea[TS_MAX_DIMS];
  ts_te_stage *e = gr_fuse_stage_like(b, "exp", x, ea);
  ts_expr *diff = ts_sub(a, ts_te_load(b->te, scores, ea, nx),
                         load_reduced(b, mx, ea, nx, axis));
  ts_buffer *eb = ts_te_set_value(e, ts_call(a, TS_FLOAT32, "exp", &diff, 1));
  ts_buffer *sum = reduce_axis_stage(b, "sum", eb, x, axis, TS_TE_SUM);
  /* U[..., i, e] = sum_j exp[..., i, j] * V[..., j, e] */
  ts_te_stage *u = ts_te_compute(b->te, gr_fuse_stage_name(b, "matmul"),
                                 TS_FLOAT32, out->shape, no, NULL);
  ts_expr *ua[TS_MAX_DIMS], *ei[TS_MAX_DIMS], *vi[TS_MAX_DIMS];
  for (int d = 0; d < no; d++) ua[d] = ts_te_axis(u, d);
  ts_expr *j = ts_te_reduce_axis(u, "rk", x->shape[axis]);
  for (int d = 0; d < nx - 1; d++) ei[d] = ua[d];
  ei[nx - 1] = j;
  for (int d = 0; d < nv - 2; d++)
    vi[d] = v->shape[d] == 1 ? ts_index(a, 0) : ua[d + no - nv];
  vi[nv - 2] = j;
  vi[nv - 1] = ua[no - 1];
  ts_buffer *ub = ts_te_set_reduce(
      u, TS_TE_SUM,
      ts_mul(a, ts_te_load(b->te, eb, ei, nx), ts_te_load(b->te, V, vi, nv)));
  ts_expr *oa[TS_MAX_DIMS];
  ts_te_stage *o = gr_fuse_stage_like(b, "attention", out, oa);
  return ts_te_set_value(o, ts_div(a, ts_te_load(b->te, ub, oa, no),
                                   load_reduced(b, sum, oa, no, no - 1)));
}
