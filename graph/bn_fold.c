/*
 * bn_fold.c — BatchNormalization folded into the convolution that produces
 * its input: y = (conv(x, W) + b - mean) * s / sqrt(var + eps) + beta is
 * conv(x, W') + b' with W'[m] = W[m] * k[m], b' = (b - mean) * k + beta,
 * k = s / sqrt(var + eps). Applies when the conv's output feeds only the
 * BatchNormalization, every parameter is a float32 constant, and the conv's
 * weights are one too. The new weights are new constants (the old ones die
 * with their last use); computed in double, rounded once.
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool const_f32(const ts_graph *g, int v) {
  return v >= 0 && gr_is_const(g, v) &&
         ts_dtype_eq(g->values[v].dtype, TS_FLOAT32);
}

/* requires: shapes known (shape inference or folding ran); maintains: the
 * values the graph computes (up to float rounding); breaks: node indices,
 * the BatchNormalization nodes it folds and their output values. */
int ts_graph_fold_batchnorm(ts_graph *g, ts_error *err) {
  int *uses = gr_use_counts(g);
  bool *drop = ts_calloc((size_t)g->n_nodes + 1, sizeof *drop);
  if (!uses || !drop) {
    free(uses);
    free(drop);
    return TS_ERR(err, TS_ENOMEM, "bn_fold: out of memory");
  }
  for (int i = 0; i < g->n_nodes; i++) {
    gr_node *bn = &g->nodes[i];
    if (bn->kind != TS_GRAPH_OP || strcmp(bn->op, "BatchNormalization") ||
        bn->n_inputs < 5 || bn->n_outputs != 1)
      continue;
    int x = bn->inputs[0];
    int p = g->values[x].producer;
    if (p < 0 || uses[x] != 1) continue;
    gr_node *conv = &g->nodes[p];
    if (conv->kind != TS_GRAPH_OP || strcmp(conv->op, "Conv")) continue;
    bool ok = const_f32(g, conv->inputs[1]) &&
              (conv->n_inputs < 3 || conv->inputs[2] < 0 ||
               const_f32(g, conv->inputs[2]));
    for (int k = 1; k < 5; k++) ok = ok && const_f32(g, bn->inputs[k]);
    if (!ok) continue;
    const gr_value *wv = &g->values[conv->inputs[1]];
    int64_t M = wv->shape[0], per = gr_value_elems(wv) / M;
    double eps = gr_attr_float(bn, "epsilon", 1e-5);
    float *w2 = ts_malloc(sizeof(float) * (size_t)(M * per));
    float *b2 = ts_malloc(sizeof(float) * (size_t)M);
    if (!w2 || !b2) {
      free(w2), free(b2), free(drop), free(uses);
      return TS_ERR(err, TS_ENOMEM, "folding '%s'", bn->name);
    }
    const float *w = gr_const_data(g, conv->inputs[1]);
    const float *b = conv->n_inputs > 2 && conv->inputs[2] >= 0
                         ? gr_const_data(g, conv->inputs[2])
                         : NULL;
    const float *s = gr_const_data(g, bn->inputs[1]);
    const float *beta = gr_const_data(g, bn->inputs[2]);
    const float *mean = gr_const_data(g, bn->inputs[3]);
    const float *var = gr_const_data(g, bn->inputs[4]);
    for (int64_t m = 0; m < M; m++) {
      double k = (double)s[m] / sqrt((double)var[m] + eps);
      for (int64_t j = 0; j < per; j++)
        w2[m * per + j] = (float)((double)w[m * per + j] * k);
      b2[m] = (float)(((b ? (double)b[m] : 0.0) - mean[m]) * k + beta[m]);
    }
    char name[300];
    snprintf(name, sizeof name, "%s_bn", wv->name);
    int wid = gr_const_add(g, name, TS_FLOAT32, wv->ndim, wv->shape, w2);
    snprintf(name, sizeof name, "%s_bias", conv->name);
    int bid = gr_const_add(g, name, TS_FLOAT32, 1, &M, b2);
    free(w2), free(b2);
    if (wid < 0 || bid < 0) {
      free(drop), free(uses);
      return TS_ERR(err, TS_ENOMEM, "folding '%s': constant store", bn->name);
    }
    int *ins = gr_alloc(g, sizeof(int) * 3);
    if (!ins) {
      free(drop), free(uses);
      return TS_ERR(err, TS_ENOMEM, "folding '%s': out of memory", bn->name);
    }
    ins[0] = conv->inputs[0];
    ins[1] = wid;
    ins[2] = bid;
    conv->inputs = ins;
    conv->n_inputs = 3;
    free(uses);
    gr_replace_uses(g, bn->outputs[0], conv->outputs[0]);
    drop[i] = true;
    if (!(uses = gr_use_counts(g))) break;
  }
  gr_list keep = {0};
  for (int i = 0; i < g->n_nodes; i++)
    if (!drop[i]) gr_list_push(&keep, &g->nodes[i]);
  int rc = uses ? gr_list_commit(g, &keep) : TS_ENOMEM;
  if (!uses) free(keep.nodes);
  free(drop);
  free(uses);
  if (rc) return TS_ERR(err, rc, "bn_fold: out of memory");
  return TS_OK;
}
