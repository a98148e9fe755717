/*
 * unit_views.c — elementwise chains between 1-D windows run on the windows'
 * 2-D form.
 *
 * The lowering gives a Conv or pool over [N, C, W] its 2-D form over
 * [N, C, 1, W] between two Reshapes (lower.c). Between two such windows a
 * chain of elementwise nodes (a 1-D conv net's activations, GroupNorm's
 * scale and shift) would still run on the 3-D value: the layout pass,
 * which runs 4-D values channels-last, would then transpose back and forth
 * around each chain. Here an elementwise node whose operands are views of
 * 4-D values with one unit axis dropped at the same place runs on those
 * 4-D values instead (its other operands get the unit axis too: constants
 * reshaped at compile time, anything else through a Reshape), and a
 * Reshape that puts the unit axis back reads the 4-D value directly, so
 * the chain's two Reshapes vanish. The values the graph computes do not
 * change; a graph output keeps its shape.
 */
#include "lower.h"

#include <stdlib.h>
#include <string.h>

/* The axis at which 4-D value u's shape is v's with a unit axis inserted
 * (the last such axis); -1 when it is not. */
static int unit_axis(const gr_value *u, const gr_value *v) {
  if (u->ndim != v->ndim + 1) return -1;
  for (int q = u->ndim - 1; q >= 0; q--) {
    if (u->shape[q] != 1) continue;
    bool same = true;
    for (int d = 0, e = 0; d < u->ndim && same; d++)
      if (d != q) same = u->shape[d] == v->shape[e++];
    if (same) return q;
  }
  return -1;
}

static bool is_graph_output(const ts_graph *g, int v) {
  for (int k = 0; k < g->n_outputs; k++)
    if (g->outputs[k] == v) return true;
  return false;
}

typedef struct {
  ts_graph *g;
  int *lifted; /* value -> its 4-D form (-1 none) */
  int *axis;   /* ... and the unit axis there */
  gr_list out;
  ts_error *err;
} lifter;

/* Operand x of an elementwise node whose output of rank r gets a unit
 * axis at q: its 4-D form's value, or x itself where broadcasting already
 * puts the unit axis before all of x's axes. */
static int lift_operand(lifter *L, const gr_node *n, int x, int r, int q) {
  ts_graph *g = L->g;
  if (L->lifted[x] >= 0 && L->axis[x] == q) return L->lifted[x];
  const gr_value x_v = g->values[x], *xv = &x_v; /* values may move */
  int k = xv->ndim;
  if (r - k >= q) return x; /* every axis of x is at or after q */
  int at = q - (r - k);
  int64_t s[TS_MAX_DIMS];
  for (int d = 0, e = 0; d <= k; d++) s[d] = d == at ? 1 : xv->shape[e++];
  if (gr_is_const(g, x)) {
    int c = gr_const_add(g, gr_fresh_name(g, xv->name), xv->dtype, k + 1, s,
                         gr_const_data(g, x));
    return c < 0 ? TS_ENOMEM : c;
  }
  int64_t count = k + 1;
  int sh =
      gr_const_add(g, gr_fresh_name(g, "unit_view"), TS_INT64, 1, &count, s);
  int v = gr_value_fresh(g, xv->name, xv->dtype, -1, NULL);
  if (sh < 0 || v < 0) return TS_ENOMEM;
  gr_node m = gr_node_make(g, "Reshape", gr_fresh_name(g, n->name),
                           (int[]){x, sh}, 2, &v, 1);
  int rc = gr_infer_node(g, &m, L->err);
  if (rc) return rc;
  gr_list_push(&L->out, &m);
  return v;
}

/* Elementwise node n on the 4-D forms when its operands have them (at one
 * unit axis); 1 when it does not apply. */
static int lift_elementwise(lifter *L, const gr_node *n) {
  ts_graph *g = L->g;
  if (n->n_outputs != 1 || !gr_is_elementwise_op(n->op)) return 1;
  int y = n->outputs[0], r = g->values[y].ndim, q = -1;
  if (r < 1 || r >= TS_MAX_DIMS) return 1;
  for (int i = 0; i < n->n_inputs; i++) {
    int x = n->inputs[i];
    if (x < 0 || L->lifted[x] < 0) continue;
    if (g->values[x].ndim != r || (q >= 0 && L->axis[x] != q)) return 1;
    q = L->axis[x];
  }
  if (q < 0) return 1;
  int ins[8];
  if (n->n_inputs > 8) return 1;
  for (int i = 0; i < n->n_inputs; i++) {
    ins[i] = n->inputs[i] < 0 ? -1 : lift_operand(L, n, n->inputs[i], r, q);
    if (ins[i] < -1) return ins[i];
  }
  const gr_value y_v = g->values[y], *yv = &y_v; /* values may move */
  int y4 = gr_value_fresh(g, yv->name, yv->dtype, -1, NULL);
  int64_t count = r;
  int sh = gr_const_add(g, gr_fresh_name(g, "unit_view"), TS_INT64, 1, &count,
                        yv->shape);
  if (y4 < 0 || sh < 0) return TS_ENOMEM;
  gr_node m = gr_node_make(g, n->op, gr_fresh_name(g, n->name), ins,
                           n->n_inputs, &y4, 1);
  for (int i = 0; i < n->n_attrs; i++) gr_node_set_attr(g, &m, n->attrs[i]);
  int rc = gr_infer_node(g, &m, L->err);
  if (rc) return rc;
  if (g->values[y4].ndim != r + 1) return 1; /* (not expected) */
  gr_list_push(&L->out, &m);
  gr_node back = gr_node_make(g, "Reshape", n->name, (int[]){y4, sh}, 2, &y, 1);
  if ((rc = gr_infer_node(g, &back, L->err))) return rc;
  gr_list_push(&L->out, &back);
  L->lifted[y] = y4;
  L->axis[y] = q;
  return TS_OK;
}

static int lift_one(void *ctx, const gr_node *n) {
  return lift_elementwise(ctx, n);
}

int gr_lower_unit_views(ts_graph *g, ts_error *err) {
  int nv = g->n_values;
  lifter L = {g,
              malloc(sizeof(int) * (size_t)(nv + 1)),
              malloc(sizeof(int) * (size_t)(nv + 1)),
              {0},
              err};
  if (!L.lifted || !L.axis) {
    free(L.lifted);
    free(L.axis);
    return TS_ERR(err, TS_ENOMEM, "lowering: out of memory");
  }
  for (int v = 0; v < nv; v++) L.lifted[v] = L.axis[v] = -1;
  /* values a Reshape made by dropping a unit axis of a 4-D value */
  bool any = false;
  for (int i = 0; i < g->n_nodes; i++) {
    const gr_node *n = &g->nodes[i];
    if (n->kind != TS_GRAPH_OP || strcmp(n->op, "Reshape") || n->n_inputs < 1 ||
        n->inputs[0] < 0)
      continue;
    const gr_value *u = &g->values[n->inputs[0]],
                   *v = &g->values[n->outputs[0]];
    int q = u->ndim == 4 ? unit_axis(u, v) : -1;
    if (q < 0) continue;
    L.lifted[n->outputs[0]] = n->inputs[0];
    L.axis[n->outputs[0]] = q;
    any = true;
  }
  bool changed = false;
  int rc =
      any ? gr_lower_rewrite_ops(g, nv, lift_one, &L, &L.out, &changed) : TS_OK;
  /* a Reshape back to a 4-D form reads it: the reshape pair vanishes */
  for (int i = 0; rc == TS_OK && changed && i < g->n_nodes; i++) {
    gr_node *n = &g->nodes[i];
    if (n->kind != TS_GRAPH_OP || strcmp(n->op, "Reshape") || n->n_inputs < 1)
      continue;
    int x = n->inputs[0], y = n->outputs[0];
    if (x < 0 || x >= nv || L.lifted[x] < 0 || is_graph_output(g, y)) continue;
    int x4 = L.lifted[x];
    const gr_value *a = &g->values[x4], *b = &g->values[y];
    if (a->ndim != b->ndim ||
        memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim))
      continue;
    gr_replace_uses(g, y, x4);
  }
  free(L.lifted);
  free(L.axis);
  if (rc == TS_ENOMEM && err && !err->msg[0])
    TS_ERR(err, TS_ENOMEM, "lowering: out of memory");
  if (rc == TS_OK && changed) rc = ts_graph_eliminate_dead(g, err);
  return rc;
}
