/*
 * scale_fold.c — a per-channel scale of a convolution's input moved onto
 * its weights, run by the fuse pass before it groups:
 *
 *   Conv(Mul(y, s), W)  ->  Conv(y, Mul(W, Reshape(s, [C, 1])))
 *
 * for a channels-last Conv of one group whose data is the Mul's output and
 * nothing else reads it, y an activation [N, H, W, C] and s a per-channel
 * factor ([C], or [1, .., 1, C]; any producer: squeeze-and-excitation's
 * sigmoid gates in EfficientNet and MobileNet-V3). The conv sums
 * y[ci] s[ci] W[.., ci, co] over ci; scaling the weights' input-channel
 * axis instead (the second-to-last in both channels-last forms, [KH, KW,
 * C, CO] and the blocked [CO/B, KH, KW, C, B]) computes the same sums up to
 * float rounding, zero padding included. The Mul over the whole activation
 * (a read and a write of it, a kernel of its own) becomes one over the
 * weights, C x CO elements per call.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* Whether value s is C per-channel factors ([C] or [1, .., 1, C]). */
static bool per_channel(const ts_graph *g, int s, int64_t c) {
  const gr_value *v = &g->values[s];
  if (v->ndim < 1 || !ts_dtype_eq(v->dtype, TS_FLOAT32)) return false;
  for (int d = 0; d < v->ndim - 1; d++)
    if (v->shape[d] != 1) return false;
  return v->shape[v->ndim - 1] == c;
}

/* For the conv at node i: the Mul node index producing its data with the
 * activation in *y and the factors in *s, or -1. */
static int scaled_input(const ts_graph *g, int i, const int *uses, int *y,
                        int *s) {
  const gr_node *n = &g->nodes[i];
  if (n->kind != TS_GRAPH_OP || strcmp(n->op, "Conv") || n->n_inputs < 2 ||
      !gr_node_channels_last(n) || gr_node_blocked(n) ||
      gr_attr_int(n, "group", 1) != 1)
    return -1;
  int d = n->inputs[0], w = n->inputs[1];
  const gr_value *dv = &g->values[d], *wv = &g->values[w];
  if (dv->ndim != 4 || wv->ndim < 2 || uses[d] != 1 ||
      !ts_dtype_eq(dv->dtype, TS_FLOAT32) ||
      !ts_dtype_eq(wv->dtype, TS_FLOAT32))
    return -1;
  int p = dv->producer;
  if (p < 0) return -1;
  const gr_node *m = &g->nodes[p];
  if (m->kind != TS_GRAPH_OP || strcmp(m->op, "Mul") || m->n_inputs != 2)
    return -1;
  int64_t c = dv->shape[3];
  if (wv->shape[wv->ndim - 2] != c) return -1;
  /* only where the activation outweighs the weights (not the 1 x 1 x C
   * gate inside the squeeze-and-excitation itself) */
  if (dv->shape[0] * dv->shape[1] * dv->shape[2] * c <= gr_value_elems(wv))
    return -1;
  for (int k = 0; k < 2; k++) {
    const gr_value *a = &g->values[m->inputs[k]];
    if (a->ndim == 4 && !memcmp(a->shape, dv->shape, sizeof(int64_t) * 4) &&
        per_channel(g, m->inputs[1 - k], c)) {
      *y = m->inputs[k];
      *s = m->inputs[1 - k];
      return p;
    }
  }
  return -1;
}

int gr_fold_channel_scales(ts_graph *g, ts_error *err) {
  int *uses = gr_use_counts(g);
  int *mul_of = ts_calloc((size_t)g->n_nodes + 1, sizeof *mul_of);
  if (!uses || !mul_of) {
    free(uses), free(mul_of);
    return TS_ERR(err, TS_ENOMEM, "fuse: out of memory");
  }
  int found = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    int y, s;
    mul_of[i] = scaled_input(g, i, uses, &y, &s) + 1; /* 0: none */
    found += mul_of[i] > 0;
  }
  int rc = TS_OK;
  if (found) {
    bool *dropped = ts_calloc((size_t)g->n_nodes + 1, sizeof *dropped);
    gr_list out = {0};
    if (!dropped) rc = TS_ERR(err, TS_ENOMEM, "fuse: out of memory");
    for (int i = 0; i < g->n_nodes && dropped; i++)
      if (mul_of[i]) dropped[mul_of[i] - 1] = true;
    for (int i = 0; i < g->n_nodes && !rc; i++) {
      if (dropped[i]) continue;
      if (!mul_of[i]) {
        gr_list_push(&out, &g->nodes[i]);
        continue;
      }
      int y, s;
      scaled_input(g, i, uses, &y, &s);
      int w = g->nodes[i].inputs[1];
      int64_t c = g->values[y].shape[3], col[2] = {c, 1}, two = 2;
      int shape = gr_const_add(g, gr_fresh_name(g, "scale_shape"), TS_INT64, 1,
                               &two, col);
      /* copied: adding a value may move the value array */
      gr_value wval = g->values[w];
      int sc = gr_value_fresh(g, "scale_col", TS_FLOAT32, 2, col);
      int wv = gr_value_fresh(g, "scaled_w", TS_FLOAT32, wval.ndim, wval.shape);
      if (shape < 0 || sc < 0 || wv < 0) {
        rc = TS_ERR(err, TS_ENOMEM, "fuse: out of memory");
        break;
      }
      int rin[2] = {s, shape}, min[2] = {w, sc};
      gr_node r = gr_node_make(g, "Reshape", gr_fresh_name(g, "scale_col"), rin,
                               2, &sc, 1);
      gr_node m =
          gr_node_make(g, "Mul", gr_fresh_name(g, "scale_w"), min, 2, &wv, 1);
      gr_list_push(&out, &r);
      gr_list_push(&out, &m);
      gr_node conv = g->nodes[i];
      int *ins = gr_alloc(g, sizeof(int) * (size_t)conv.n_inputs);
      if (!ins) {
        rc = TS_ERR(err, TS_ENOMEM, "fuse: out of memory");
        break;
      }
      memcpy(ins, conv.inputs, sizeof(int) * (size_t)conv.n_inputs);
      ins[0] = y;
      ins[1] = wv;
      conv.inputs = ins;
      gr_list_push(&out, &conv);
    }
    if (!rc)
      rc = gr_list_commit(g, &out)
               ? TS_ERR(err, TS_ENOMEM, "fuse: out of memory")
               : TS_OK;
    else
      free(out.nodes);
    free(dropped);
  }
  free(uses);
  free(mul_of);
  return rc;
}
