/*
 * fold.c — constant folding. One sweep in topological order: each node's
 * shape rule runs first (so a Reshape whose target shape was folded a few
 * nodes earlier gets its shape now), then a node whose inputs are all
 * constants — or a Shape, Size or EyeLike node whose input shape is known — is
 * evaluated by the reference kernels and its outputs become constants. This is
 * what makes the Shape/Gather/Unsqueeze/Concat/Reshape chains of PyTorch
 * exports disappear: Shape of a static tensor is a constant, and everything
 * computed from it is too. Results over FOLD_MAX_ELEMS elements are not folded
 * (they would grow the constant store; weight transforms below that size are).
 * After the sweep every value must have a known shape; the first that does
 * not is reported with the node that produces it.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define FOLD_MAX_ELEMS (64ll << 20)

static bool foldable(const ts_graph *g, const gr_node *n) {
  if (n->kind != TS_GRAPH_OP || !gr_kernel_folds(n->op)) return false;
  for (int k = 0; k < n->n_outputs; k++) {
    int64_t e = gr_value_elems(&g->values[n->outputs[k]]);
    if (e < 0 || e > FOLD_MAX_ELEMS) return false;
  }
  if (!strcmp(n->op, "Shape") || !strcmp(n->op, "Size") ||
      !strcmp(n->op, "EyeLike"))
    return gr_value_elems(&g->values[n->inputs[0]]) >= 0;
  for (int i = 0; i < n->n_inputs; i++)
    if (n->inputs[i] >= 0 && !gr_is_const(g, n->inputs[i])) return false;
  return true;
}

int gr_fold_node(ts_graph *g, gr_node *n, ts_error *err) {
  gr_tensor ins[64], outs[16];
  void *bufs[16] = {0};
  int rc = TS_OK;
  for (int i = 0; i < n->n_inputs; i++) {
    memset(&ins[i], 0, sizeof ins[i]);
    if (n->inputs[i] < 0) continue;
    const gr_value *v = &g->values[n->inputs[i]];
    ins[i].dtype = v->dtype;
    ins[i].ndim = v->ndim;
    memcpy(ins[i].shape, v->shape, sizeof v->shape);
    ins[i].data = gr_const_data(g, n->inputs[i]); /* NULL for Shape's input */
  }
  for (int k = 0; k < n->n_outputs; k++) {
    const gr_value *v = &g->values[n->outputs[k]];
    outs[k].dtype = v->dtype;
    outs[k].ndim = v->ndim;
    memcpy(outs[k].shape, v->shape, sizeof v->shape);
    size_t bytes = (size_t)gr_value_elems(v) * ts_dtype_elem_bytes(v->dtype);
    bufs[k] = ts_calloc(bytes ? bytes : 1, 1);
    if (!bufs[k]) rc = TS_ERR(err, TS_ENOMEM, "folding '%s'", n->name);
    outs[k].data = bufs[k];
  }
  if (!rc) rc = gr_kernel_run(g, n, ins, outs, err);
  for (int k = 0; !rc && k < n->n_outputs; k++) {
    const gr_value v = g->values[n->outputs[k]];
    int c = gr_const_add(g, v.name, v.dtype, v.ndim, v.shape, bufs[k]);
    if (c < 0) {
      rc = TS_ERR(err, TS_ENOMEM, "folding '%s': constant store", n->name);
      break;
    }
    g->values[c].layout = v.layout;
    gr_replace_uses(g, n->outputs[k], c);
  }
  for (int k = 0; k < n->n_outputs; k++) free(bufs[k]);
  return rc;
}

/* One sweep: each node's shape rule first when `infer`, then a foldable
 * node (one whose first output `only` marks, when only is not NULL) is
 * folded. */
static int sweep(ts_graph *g, bool infer, const uint8_t *only, ts_error *err) {
  gr_list keep = {0};
  int rc = TS_OK;
  for (int i = 0; i < g->n_nodes && !rc; i++) {
    gr_node *n = &g->nodes[i];
    if (infer) rc = gr_infer_node(g, n, err);
    if (rc) break;
    if (foldable(g, n) && (!only || (n->n_outputs && only[n->outputs[0]])))
      rc = gr_fold_node(g, n, err);
    else
      gr_list_push(&keep, n);
  }
  if (rc) {
    free(keep.nodes);
    return rc;
  }
  if (gr_list_commit(g, &keep))
    return TS_ERR(err, TS_ENOMEM, "fold: out of memory");
  return TS_OK;
}

int gr_fold_marked(ts_graph *g, const uint8_t *only, ts_error *err) {
  return sweep(g, false, only, err);
}

/* requires: graph inputs with known shapes; maintains: the values the graph
 * computes; breaks: value ids of folded outputs (uses now name constants),
 * node indices (folded nodes are removed). */
int ts_graph_fold_constants(ts_graph *g, ts_error *err) {
  int rc = sweep(g, true, NULL, err);
  if (rc) return rc;
  for (int i = 0; i < g->n_nodes; i++) {
    const gr_node *n = &g->nodes[i];
    for (int k = 0; k < n->n_outputs; k++)
      if (gr_value_elems(&g->values[n->outputs[k]]) < 0)
        return TS_ERR(err, TS_EINVAL,
                      "node '%s' (%s, opset %d): the shape of output '%s' is "
                      "not known after constant folding (it depends on "
                      "run-time data)",
                      n->name, n->op, g->opset, g->values[n->outputs[k]].name);
  }
  return TS_OK;
}
