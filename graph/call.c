/*
 * call.c — user TIR in the graph (TVM Unity's "interact"): a node replaced
 * by a destination-passing call of a PrimFunc. The function's parameters
 * are the node's inputs (omitted optional inputs excluded) followed by its
 * outputs; every one must match the value it binds in shape and dtype.
 * Everything is checked before the graph changes.
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>

static void shape_str(char *buf, size_t cap, ts_dtype t, int ndim,
                      const int64_t *shape) {
  char dt[32];
  int k = snprintf(buf, cap, "%s[", ts_dtype_str(t, dt));
  for (int i = 0; i < ndim && k < (int)cap; i++)
    k += snprintf(buf + k, cap - (size_t)k, "%s%lld", i ? ", " : "",
                  (long long)shape[i]);
  if (k < (int)cap) snprintf(buf + k, cap - (size_t)k, "]");
}

int ts_graph_override(ts_graph *g, const char *node_name, const ts_func *f,
                      ts_error *err) {
  int idx = -1;
  for (int i = 0; i < g->n_nodes; i++)
    if (!strcmp(g->nodes[i].name, node_name)) idx = i;
  if (idx < 0)
    return TS_ERR(err, TS_ENOTFOUND, "--override: no node named '%s'",
                  node_name);
  gr_node *n = &g->nodes[idx];
  int ins[64], n_ins = 0;
  for (int k = 0; k < n->n_inputs; k++)
    if (n->inputs[k] >= 0) ins[n_ins++] = n->inputs[k];
  int want = n_ins + n->n_outputs;
  if (ts_func_n_params(f) != want)
    return TS_ERR(err, TS_EINVAL,
                  "--override %s: function '%s' has %d parameters; node '%s' "
                  "(%s) has %d inputs and %d outputs",
                  node_name, ts_func_name(f), ts_func_n_params(f), n->name,
                  n->op, n_ins, n->n_outputs);
  for (int k = 0; k < want; k++) {
    int v = k < n_ins ? ins[k] : n->outputs[k - n_ins];
    const gr_value *val = &g->values[v];
    const ts_buffer *p = ts_func_param(f, k);
    if (val->ndim < 0)
      return TS_ERR(err, TS_EINVAL,
                    "--override %s: the shape of '%s' is not known (run shape "
                    "inference first)",
                    node_name, val->name);
    if (!gr_param_fits_value(p, val)) {
      char a[256], b[256];
      shape_str(a, sizeof a, ts_buffer_dtype(p), ts_buffer_ndim(p),
                ts_buffer_shape(p));
      shape_str(b, sizeof b, val->dtype, val->ndim, val->shape);
      return TS_ERR(err, TS_EINVAL,
                    "--override %s: parameter '%s' of '%s' is %s but %s '%s' "
                    "of node '%s' is %s",
                    node_name, ts_buffer_name(p), ts_func_name(f), a,
                    k < n_ins ? "input" : "output", val->name, n->name, b);
    }
  }
  ts_func *copy = ts_func_copy(f);
  if (!copy) return TS_ERR(err, TS_ENOMEM, "--override: copying the function");
  if (!gr_own_func(g, copy)) {
    ts_func_free(copy);
    return TS_ERR(err, TS_ENOMEM, "--override: out of memory");
  }
  n->kind = TS_GRAPH_CALL;
  n->op = "call_tir";
  n->func = copy;
  n->n_attrs = 0;
  n->attrs = NULL;
  int *packed = gr_alloc(g, sizeof(int) * ((size_t)n_ins + 1));
  if (!packed) return TS_ERR(err, TS_ENOMEM, "--override: out of memory");
  memcpy(packed, ins, sizeof(int) * (size_t)n_ins);
  n->inputs = packed;
  n->n_inputs = n_ins;
  return TS_OK;
}
