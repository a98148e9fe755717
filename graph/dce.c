/*
 * dce.c — dead code elimination: Identity and inference-mode Dropout are
 * bypassed (their consumers read the input directly), then nodes none of
 * whose outputs is used by a later node or a graph output are removed,
 * last to first so that whole dead chains go in one sweep; finally the
 * constant store is compacted to the constants still used.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* Copies the constants still in use into a new store, dropping the rest
 * (weights replaced by folding or BN folding). Keeps the old store when
 * memory for the new one is not available. */
static void compact_constants(ts_graph *g) {
  int *uses = gr_use_counts(g);
  if (!uses) return;
  size_t need = 0;
  for (int v = 0; v < g->n_values; v++)
    if (g->values[v].const_off >= 0 && uses[v]) {
      int64_t e = gr_value_elems(&g->values[v]);
      need += ((size_t)e * ts_dtype_elem_bytes(g->values[v].dtype) + 63) &
              ~(size_t)63;
    }
  uint8_t *store = ts_aligned_alloc(64, need ? need : 64);
  if (!store) {
    free(uses);
    return;
  }
  size_t len = 0;
  for (int v = 0; v < g->n_values; v++) {
    gr_value *x = &g->values[v];
    if (x->const_off < 0) continue;
    if (!uses[v]) {
      x->const_off = -1; /* dead: no longer a constant of this graph */
      continue;
    }
    size_t bytes = (size_t)gr_value_elems(x) * ts_dtype_elem_bytes(x->dtype);
    memcpy(store + len, g->consts + x->const_off, bytes);
    x->const_off = (int64_t)len;
    len += (bytes + 63) & ~(size_t)63;
  }
  free(g->consts);
  g->consts = store;
  g->consts_len = len;
  g->consts_cap = need ? need : 64;
  free(uses);
}

/* requires: a verified graph; maintains: the values of the graph outputs;
 * breaks: node indices; values of bypassed and removed nodes are no longer
 * produced. */
int ts_graph_eliminate_dead(ts_graph *g, ts_error *err) {
  for (int i = 0; i < g->n_nodes; i++) {
    gr_node *n = &g->nodes[i];
    bool alias = !strcmp(n->op, "Identity") || !strcmp(n->op, "Dropout");
    if (n->kind != TS_GRAPH_OP || !alias || n->inputs[0] < 0) continue;
    if (n->n_outputs > 1) { /* Dropout's mask must be unused */
      int *uses = gr_use_counts(g);
      bool used = !uses || uses[n->outputs[1]] > 0;
      free(uses);
      if (used) continue;
    }
    int in = n->inputs[0], out = n->outputs[0];
    bool out_is_output = false, in_is_output = false;
    for (int k = 0; k < g->n_outputs; k++) {
      out_is_output |= g->outputs[k] == out;
      in_is_output |= g->outputs[k] == in;
    }
    if (out_is_output) {
      /* The model's output keeps its name: the input takes it over when it
       * is a node's result that is not itself an output; otherwise the
       * node stays (a view the memory planner turns into a copy). */
      const gr_value *iv = &g->values[in];
      if (iv->producer < 0 || iv->is_input || iv->const_off >= 0 ||
          in_is_output)
        continue;
      const char *name = g->values[in].name;
      g->values[in].name = g->values[out].name;
      g->values[out].name = name;
    }
    gr_replace_uses(g, out, in);
  }
  int *uses = gr_use_counts(g);
  bool *live = ts_calloc((size_t)g->n_nodes + 1, sizeof *live);
  if (!uses || !live) {
    free(uses);
    free(live);
    return TS_ERR(err, TS_ENOMEM, "dce: out of memory");
  }
  for (int i = g->n_nodes - 1; i >= 0; i--) {
    gr_node *n = &g->nodes[i];
    for (int k = 0; k < n->n_outputs; k++)
      if (uses[n->outputs[k]] > 0) live[i] = true;
    if (!live[i])
      for (int j = 0; j < n->n_inputs; j++)
        if (n->inputs[j] >= 0) uses[n->inputs[j]]--;
  }
  gr_list keep = {0};
  for (int i = 0; i < g->n_nodes; i++)
    if (live[i]) gr_list_push(&keep, &g->nodes[i]);
  int rc = gr_list_commit(g, &keep);
  free(live);
  free(uses);
  if (rc) return TS_ERR(err, rc, "dce: out of memory");
  compact_constants(g);
  return TS_OK;
}
