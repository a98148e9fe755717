/*
 * depth_views.c — elementwise chains between 3-D convs run on the convs'
 * depth-folded 4-D form.
 *
 * The lowering runs a 3-D conv as a 2-D one over [N*D, C, H, W] and gives
 * its result back as Transpose(Reshape(y4, [N, D, C, H, W]), [0, 2, 1, 3,
 * 4]) (lower_conv3d.c). Between two such convs the batch norm's scale and
 * shift, the ReLU and the residual Add would run on the 5-D values, with a
 * transpose on each side. Here a value made that way is known by its 4-D
 * form; an elementwise node whose 5-D operands all have one (of its output's
 * shape), whose other operands are constant along the batch and depth axes
 * (a per-channel constant [C, 1, 1, 1], a scalar), runs on the 4-D forms
 * (the other operands reshaped to [1, C, H, W]: constants at compile time,
 * values through a Reshape), and a Reshape(Transpose(v)) that folds the
 * depth into the batch again reads v's 4-D form. The layout pass then sees
 * 2-D convs and 4-D elementwise nodes between them, and runs the chain
 * channels-last with no transposes. The values the graph computes do not
 * change; a graph output keeps its shape.
 */
#include "lower.h"

#include <stdlib.h>
#include <string.h>

static const int64_t depth_perm[5] = {0, 2, 1, 3, 4};

static bool is_depth_transpose(const ts_graph *g, const gr_node *n) {
  if (n->kind != TS_GRAPH_OP || strcmp(n->op, "Transpose") ||
      n->n_inputs != 1 || n->inputs[0] < 0 || g->values[n->inputs[0]].ndim != 5)
    return false;
  int c;
  const int64_t *p = gr_attr_ints(n, "perm", &c);
  return p && c == 5 && !memcmp(p, depth_perm, sizeof depth_perm);
}

/* Whether 4-D shape u is 5-D shape v [N, C, D, H, W] folded: [N*D, C, H, W]. */
static bool folded(const int64_t *u, const int64_t *v) {
  return u[0] == v[0] * v[2] && u[1] == v[1] && u[2] == v[3] && u[3] == v[4];
}

static bool is_graph_output(const ts_graph *g, int v) {
  for (int k = 0; k < g->n_outputs; k++)
    if (g->outputs[k] == v) return true;
  return false;
}

typedef struct {
  ts_graph *g;
  int *lifted;   /* 5-D value -> its 4-D form (-1: none) */
  int *producer; /* value -> the node computing it (-1: none) */
  gr_list out;
  ts_error *err;
} dlifter;

/* A Reshape of x to (nd, shape) pushed to the list; the value or < 0. */
static int push_reshape(dlifter *L, const char *name, int x, int nd,
                        const int64_t *shape, int to) {
  ts_graph *g = L->g;
  int64_t cnt = nd;
  int sh =
      gr_const_add(g, gr_fresh_name(g, "depth_view"), TS_INT64, 1, &cnt, shape);
  if (sh < 0) return TS_ENOMEM;
  if (to < 0)
    to = gr_value_fresh(g, g->values[x].name, g->values[x].dtype, -1, NULL);
  if (to < 0) return TS_ENOMEM;
  gr_node m = gr_node_make(g, "Reshape", gr_fresh_name(g, name), (int[]){x, sh},
                           2, &to, 1);
  int rc = gr_infer_node(g, &m, L->err);
  if (rc) return rc;
  gr_list_push(&L->out, &m);
  return to;
}

/* Operand x of an elementwise node of 5-D output shape y5, on the 4-D
 * form (into *out): its lifted value, x itself when it spans H and W at
 * most, or x reshaped to [1, C, H, W] when constant along N and D. TS_OK,
 * 1 when it has none, or an error. */
static int lift_operand(dlifter *L, const gr_node *n, int x, const int64_t *y5,
                        int *out) {
  ts_graph *g = L->g;
  const gr_value x_v = g->values[x], *xv = &x_v; /* values may move */
  *out = x;
  if (L->lifted[x] >= 0) {
    *out = L->lifted[x];
    return xv->ndim == 5 && !memcmp(xv->shape, y5, sizeof(int64_t) * 5) ? TS_OK
                                                                        : 1;
  }
  int k = xv->ndim;
  if (k <= 2) return TS_OK; /* aligns with H, W (or a scalar) in both */
  if (k > 5) return 1;
  int64_t s[5] = {1, 1, 1, 1, 1};
  for (int d = 0; d < k; d++) s[5 - k + d] = xv->shape[d];
  if (s[0] != 1 || s[2] != 1) return 1;
  int64_t s4[4] = {1, s[1], s[3], s[4]};
  if (gr_is_const(g, x)) {
    *out = gr_const_add(g, gr_fresh_name(g, xv->name), xv->dtype, 4, s4,
                        gr_const_data(g, x));
  } else {
    *out = push_reshape(L, n->name, x, 4, s4, -1);
  }
  return *out < 0 ? TS_ENOMEM : TS_OK;
}

/* Elementwise node n on the 4-D forms; 1 when it does not apply. */
static int lift_elementwise(dlifter *L, const gr_node *n) {
  ts_graph *g = L->g;
  if (n->n_outputs != 1 || !gr_is_elementwise_op(n->op) || n->n_inputs > 8)
    return 1;
  int y = n->outputs[0];
  if (g->values[y].ndim != 5) return 1;
  bool any = false;
  for (int i = 0; i < n->n_inputs; i++)
    any = any || (n->inputs[i] >= 0 && L->lifted[n->inputs[i]] >= 0);
  if (!any) return 1;
  const gr_value y_v = g->values[y], *yv = &y_v; /* values may move */
  int ins[8];
  for (int i = 0; i < n->n_inputs; i++) {
    ins[i] = -1;
    int rc = n->inputs[i] < 0
                 ? TS_OK
                 : lift_operand(L, n, n->inputs[i], yv->shape, &ins[i]);
    if (rc) return rc;
  }
  int y4 = gr_value_fresh(g, yv->name, yv->dtype, -1, NULL);
  if (y4 < 0) return TS_ENOMEM;
  gr_node m = gr_node_make(g, n->op, gr_fresh_name(g, n->name), ins,
                           n->n_inputs, &y4, 1);
  for (int i = 0; i < n->n_attrs; i++) gr_node_set_attr(g, &m, n->attrs[i]);
  int rc = gr_infer_node(g, &m, L->err);
  if (rc) return rc;
  if (g->values[y4].ndim != 4 || !folded(g->values[y4].shape, yv->shape))
    return 1; /* (not expected) */
  gr_list_push(&L->out, &m);
  /* y itself, for readers that stay 5-D: unfolded again */
  int64_t s5[5] = {yv->shape[0], yv->shape[2], yv->shape[1], yv->shape[3],
                   yv->shape[4]};
  int r = push_reshape(L, n->name, y4, 5, s5, -1);
  if (r < 0) return r;
  int64_t ints[5];
  memcpy(ints, depth_perm, sizeof ints);
  gr_node t = gr_node_make(g, "Transpose", n->name, &r, 1, &y, 1);
  gr_node_set_attr(
      g, &t,
      (gr_attr){.name = "perm", .kind = GR_ATTR_INTS, .n = 5, .ints = ints});
  if ((rc = gr_infer_node(g, &t, L->err))) return rc;
  gr_list_push(&L->out, &t);
  L->lifted[y] = y4;
  return TS_OK;
}

static void map_producers(const ts_graph *g, int *producer, int nv) {
  for (int v = 0; v < nv; v++) producer[v] = -1;
  for (int i = 0; i < g->n_nodes; i++)
    for (int k = 0; k < g->nodes[i].n_outputs; k++) {
      int v = g->nodes[i].outputs[k];
      if (v >= 0 && v < nv) producer[v] = i;
    }
}

/* The 4-D value u when node n is Reshape(u) to [N, D, C, H, W] of a
 * depth Transpose giving v; -1 otherwise. */
static int unfolded_from(const ts_graph *g, const int *producer, int v) {
  if (producer[v] < 0) return -1;
  const gr_node *t = &g->nodes[producer[v]];
  if (!is_depth_transpose(g, t) || producer[t->inputs[0]] < 0) return -1;
  const gr_node *r = &g->nodes[producer[t->inputs[0]]];
  if (r->kind != TS_GRAPH_OP || strcmp(r->op, "Reshape") || r->inputs[0] < 0)
    return -1;
  int u = r->inputs[0];
  const gr_value *uv = &g->values[u], *vv = &g->values[v];
  return uv->ndim == 4 && vv->ndim == 5 && folded(uv->shape, vv->shape) ? u
                                                                        : -1;
}

static int lift_one(void *ctx, const gr_node *n) {
  return lift_elementwise(ctx, n);
}

int gr_lower_depth_views(ts_graph *g, ts_error *err) {
  int nv = g->n_values;
  dlifter L = {g,
               malloc(sizeof(int) * (size_t)(nv + 1)),
               malloc(sizeof(int) * (size_t)(nv + 1)),
               {0},
               err};
  int rc = TS_OK;
  if (!L.lifted || !L.producer) {
    rc = TS_ERR(err, TS_ENOMEM, "lowering: out of memory");
    goto done;
  }
  map_producers(g, L.producer, nv);
  bool any = false;
  for (int v = 0; v < nv; v++) {
    L.lifted[v] = unfolded_from(g, L.producer, v);
    any = any || L.lifted[v] >= 0;
  }
  if (!any) goto done;
  bool changed = false;
  rc = gr_lower_rewrite_ops(g, nv, lift_one, &L, &L.out, &changed);
  /* Reshape(Transpose(v)) folding v's depth into the batch reads v's 4-D
   * form: the transposes between two convs vanish */
  int *producer = NULL;
  if (rc == TS_OK) {
    producer = malloc(sizeof(int) * (size_t)(g->n_values + 1));
    if (!producer)
      rc = TS_ENOMEM;
    else
      map_producers(g, producer, g->n_values);
  }
  for (int i = 0; rc == TS_OK && i < g->n_nodes; i++) {
    gr_node *n = &g->nodes[i];
    if (n->kind != TS_GRAPH_OP || strcmp(n->op, "Reshape") || n->n_inputs < 1 ||
        n->inputs[0] < 0)
      continue;
    int y = n->outputs[0], j = producer[n->inputs[0]];
    if (j < 0 || !is_depth_transpose(g, &g->nodes[j])) continue;
    int v = g->nodes[j].inputs[0];
    if (v >= nv || L.lifted[v] < 0 || is_graph_output(g, y)) continue;
    const gr_value *a = &g->values[L.lifted[v]], *b = &g->values[y];
    if (b->ndim != 4 || memcmp(a->shape, b->shape, sizeof(int64_t) * 4))
      continue;
    gr_replace_uses(g, y, L.lifted[v]);
    changed = true;
  }
  free(producer);
  if (rc == TS_OK && changed) rc = ts_graph_eliminate_dead(g, err);
done:
  free(L.lifted);
  free(L.producer);
  if (rc == TS_ENOMEM && err && !err->msg[0])
    TS_ERR(err, TS_ENOMEM, "lowering: out of memory");
  return rc;
}
