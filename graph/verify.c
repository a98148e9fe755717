/*
 * verify.c — the graph verifier: nodes in topological order, each value
 * produced at most once and never both produced and constant or an input,
 * value ids in range, graph outputs defined, and for a call node a function
 * whose parameters match its inputs and outputs in count and, where shapes
 * are known, in dtype and element count (a parameter may view the value's
 * bytes in another shape: fuse.c's split and merged groups).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

bool gr_param_fits_value(const ts_buffer *p, const gr_value *val) {
  if (!ts_dtype_eq(val->dtype, ts_buffer_dtype(p))) return false;
  int64_t n = 1;
  for (int d = 0; d < ts_buffer_ndim(p); d++) n *= ts_buffer_dim(p, d);
  return n == gr_value_elems(val);
}

int ts_graph_verify(const ts_graph *g, ts_error *err) {
  int *defined = ts_calloc((size_t)g->n_values + 1, sizeof *defined);
  if (!defined) return TS_ERR(err, TS_ENOMEM, "verifier");
  int rc = TS_OK;
  for (int v = 0; v < g->n_values; v++)
    if (g->values[v].is_input || g->values[v].const_off >= 0) defined[v] = 1;
  for (int i = 0; i < g->n_nodes && !rc; i++) {
    const gr_node *n = &g->nodes[i];
    for (int k = 0; k < n->n_inputs && !rc; k++) {
      int v = n->inputs[k];
      if (v < -1 || v >= g->n_values)
        rc = TS_ERR(err, TS_EVERIFY, "node '%s': input %d is value id %d of %d",
                    n->name, k, v, g->n_values);
      else if (v >= 0 && !defined[v])
        rc = TS_ERR(err, TS_EVERIFY,
                    "node '%s' (%s): input '%s' is used before it is defined",
                    n->name, n->op, g->values[v].name);
    }
    for (int k = 0; k < n->n_outputs && !rc; k++) {
      int v = n->outputs[k];
      if (v < 0 || v >= g->n_values)
        rc = TS_ERR(err, TS_EVERIFY, "node '%s': output %d is value id %d",
                    n->name, k, v);
      else if (defined[v])
        rc = TS_ERR(err, TS_EVERIFY,
                    "node '%s' (%s): output '%s' is defined twice", n->name,
                    n->op, g->values[v].name);
      else
        defined[v] = 1;
    }
    if (!rc && n->kind == TS_GRAPH_CALL) {
      if (!n->func || ts_func_n_params(n->func) != n->n_inputs + n->n_outputs) {
        rc = TS_ERR(err, TS_EVERIFY,
                    "call node '%s': the function has %d parameters for %d "
                    "inputs and %d outputs",
                    n->name, n->func ? ts_func_n_params(n->func) : 0,
                    n->n_inputs, n->n_outputs);
        break;
      }
      for (int k = 0; k < n->n_inputs + n->n_outputs && !rc; k++) {
        int v = k < n->n_inputs ? n->inputs[k] : n->outputs[k - n->n_inputs];
        const gr_value *val = &g->values[v];
        const ts_buffer *p = ts_func_param(n->func, k);
        if (val->ndim < 0) continue;
        if (!gr_param_fits_value(p, val))
          rc = TS_ERR(err, TS_EVERIFY,
                      "call node '%s': parameter '%s' does not match value "
                      "'%s'",
                      n->name, ts_buffer_name(p), val->name);
      }
    }
  }
  for (int i = 0; i < g->n_outputs && !rc; i++)
    if (g->outputs[i] < 0 || g->outputs[i] >= g->n_values ||
        !defined[g->outputs[i]])
      rc = TS_ERR(err, TS_EVERIFY, "graph output %d is not defined", i);
  free(defined);
  return rc;
}
