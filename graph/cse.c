/*
 * cse.c — common subexpression elimination: two nodes with the same op type,
 * the same attributes and the same inputs compute the same values, so the
 * later one's uses are redirected to the earlier one's outputs and it is
 * dropped. Small constants (up to SMALL_CONST elements) with equal dtype,
 * shape and bytes are merged first, so nodes that read equal copies of a
 * shape constant become equal too. Call nodes are compared by the structural
 * equality of their functions.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define SMALL_CONST 64

static bool attrs_equal(const gr_node *a, const gr_node *b) {
  if (a->n_attrs != b->n_attrs) return false;
  for (int i = 0; i < a->n_attrs; i++) {
    const gr_attr *x = &a->attrs[i], *y = gr_attr_find(b, x->name);
    if (!y || x->kind != y->kind) return false;
    switch (x->kind) {
    case GR_ATTR_INT:
      if (x->i != y->i) return false;
      break;
    case GR_ATTR_FLOAT:
      if (x->f != y->f) return false;
      break;
    case GR_ATTR_STRING:
      if (strcmp(x->s, y->s)) return false;
      break;
    case GR_ATTR_INTS:
      if (x->n != y->n || memcmp(x->ints, y->ints, sizeof(int64_t) * x->n))
        return false;
      break;
    case GR_ATTR_FLOATS:
      if (x->n != y->n || memcmp(x->floats, y->floats, sizeof(double) * x->n))
        return false;
      break;
    }
  }
  return true;
}

static bool nodes_equal(const gr_node *a, const gr_node *b) {
  if (a->kind != b->kind || strcmp(a->op, b->op) ||
      a->n_inputs != b->n_inputs || a->n_outputs != b->n_outputs)
    return false;
  if (memcmp(a->inputs, b->inputs, sizeof(int) * a->n_inputs)) return false;
  if (a->kind == TS_GRAPH_CALL) return ts_func_equal(a->func, b->func);
  return attrs_equal(a, b);
}

static uint64_t node_key(const gr_node *n) {
  uint64_t h = 1469598103934665603ull;
  for (const char *p = n->op; *p; p++)
    h = (h ^ (unsigned char)*p) * 1099511628211ull;
  for (int i = 0; i < n->n_inputs; i++)
    h = (h ^ (uint64_t)(n->inputs[i] + 1)) * 1099511628211ull;
  return h;
}

static void merge_small_constants(ts_graph *g) {
  int *uses = gr_use_counts(g);
  int *seen = ts_malloc(sizeof(int) * ((size_t)g->n_values + 1));
  int n_seen = 0;
  if (!uses || !seen) { /* (the pass's caller reports the failure) */
    free(uses);
    free(seen);
    return;
  }
  for (int v = 0; v < g->n_values; v++) {
    const gr_value *a = &g->values[v];
    int64_t e = gr_value_elems(a);
    if (a->const_off < 0 || !uses[v] || e < 0 || e > SMALL_CONST) continue;
    size_t bytes = (size_t)e * ts_dtype_elem_bytes(a->dtype);
    int same = -1;
    for (int s = 0; s < n_seen && same < 0; s++) {
      const gr_value *b = &g->values[seen[s]];
      if (ts_dtype_eq(a->dtype, b->dtype) && a->ndim == b->ndim &&
          !memcmp(a->shape, b->shape, sizeof(int64_t) * a->ndim) &&
          !memcmp(gr_const_data(g, v), gr_const_data(g, seen[s]), bytes))
        same = seen[s];
    }
    if (same >= 0)
      gr_replace_uses(g, v, same);
    else
      seen[n_seen++] = v;
  }
  free(seen);
  free(uses);
}

/* requires: a verified graph; maintains: the values of the graph outputs;
 * breaks: node indices, value ids of merged outputs. */
int ts_graph_eliminate_common(ts_graph *g, ts_error *err) {
  merge_small_constants(g);
  size_t cap = 16;
  while (cap < (size_t)g->n_nodes * 2) cap *= 2;
  int *table = ts_malloc(sizeof(int) * cap);
  if (!table) return TS_ERR(err, TS_ENOMEM, "cse: out of memory");
  for (size_t i = 0; i < cap; i++) table[i] = -1;
  gr_list keep = {0};
  for (int i = 0; i < g->n_nodes; i++) {
    gr_node *n = &g->nodes[i];
    size_t slot = node_key(n) & (cap - 1);
    int dup = -1;
    for (; table[slot] >= 0; slot = (slot + 1) & (cap - 1))
      if (nodes_equal(&keep.nodes[table[slot]], n)) {
        dup = table[slot];
        break;
      }
    /* a graph output keeps its own node: two outputs that compute the
     * same are still two outputs, each under its name */
    for (int k = 0; dup >= 0 && k < n->n_outputs; k++)
      for (int o = 0; o < g->n_outputs; o++)
        if (g->outputs[o] == n->outputs[k]) dup = -1;
    if (dup >= 0) {
      for (int k = 0; k < n->n_outputs; k++)
        gr_replace_uses(g, n->outputs[k], keep.nodes[dup].outputs[k]);
      continue;
    }
    table[slot] = keep.n;
    gr_list_push(&keep, n);
    if (keep.oom) break;
  }
  free(table);
  /* the kept nodes share their input arrays with g->nodes, so the
   * rewiring above is already in them */
  if (gr_list_commit(g, &keep))
    return TS_ERR(err, TS_ENOMEM, "cse: out of memory");
  return TS_OK;
}
