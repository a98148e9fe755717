/*
 * patterns.c — recognizes the operators that exporters spell out as chains
 * of primitive nodes, and puts the operator back, so fusion builds one
 * kernel where the chain would give several:
 *
 *   layer normalization, as PyTorch exports nn.LayerNorm below opset 17:
 *     m = ReduceMean(x, axes=[-1]); d = Sub(x, m); p = Pow(d, 2) | Mul(d, d)
 *     v = ReduceMean(p, axes=[-1]); s = Sqrt(Add(v, eps)); n = Div(d, s)
 *     [Mul(n, gamma)] [Add(., beta)]
 *   -> LayerNormalization(x, gamma, beta) {axis=-1, epsilon=eps}
 *
 *   GELU (erf form), as exporters write it below opset 20:
 *     e = Erf(Div(x, sqrt 2) | Mul(x, 1/sqrt 2)); b = Add(e, 1)
 *     Mul(Mul(x, b), 0.5) | Mul(Mul(x, 0.5), b)
 *   -> Gelu(x)
 *
 *   a permutation of one axis, as exporters write ShuffleNet's channel
 *   shuffle: r = Reshape(x) splitting axis k into [a, b]; t = Transpose(r)
 *   swapping those two; Reshape(t) back to x's shape
 *   -> Gather(x, constant positions, axis=k): one kernel instead of three,
 *   and one the layout pass runs in either layout (the 5-D reshapes and
 *   transpose keep NCHW, between transposes of their own)
 *
 * A chain is rewritten only when each of its intermediate values has no
 * other use (it is not a graph output, and nothing outside the chain reads
 * it), the constants are float32 scalars of the expected value (within
 * float rounding) and gamma/beta are constants over the normalized axis.
 * The new node takes the chain's last value, so consumers are untouched;
 * the replaced constants are left to dead code elimination.
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct matcher {
  ts_graph *g;
  int *uses;      /* per value */
  int *user_off;  /* CSR: consumers of value v are users[user_off[v] ..] */
  int *users;     /* node indices */
  bool *removed;  /* per node */
  gr_node **repl; /* per node: the node that replaces it, or NULL */
} matcher;

static const gr_node *node_of(const matcher *m, int v) {
  int p = v >= 0 ? m->g->values[v].producer : -1;
  return p >= 0 ? &m->g->nodes[p] : NULL;
}

/* The single consumer of v (v used exactly once, not a graph output), or
 * -1. */
static int only_user(const matcher *m, int v) {
  if (m->uses[v] != 1 || m->user_off[v + 1] - m->user_off[v] != 1) return -1;
  return m->users[m->user_off[v]];
}

static bool is_f32(const matcher *m, int v) {
  return v >= 0 && ts_dtype_eq(m->g->values[v].dtype, TS_FLOAT32);
}

/* A float32 constant of one element: its value. */
static bool scalar_const(const matcher *m, int v, double *out) {
  if (v < 0 || !gr_is_const(m->g, v) || !is_f32(m, v) ||
      gr_value_elems(&m->g->values[v]) != 1)
    return false;
  *out = *(const float *)gr_const_data(m->g, v);
  return true;
}

static bool near(double a, double b) { return fabs(a - b) <= 1e-6 * fabs(b); }

/* The node at index i if it has op `op`, one output, and is not removed. */
static const gr_node *op_at(const matcher *m, int i, const char *op) {
  if (i < 0 || m->removed[i]) return NULL;
  const gr_node *n = &m->g->nodes[i];
  if (n->kind != TS_GRAPH_OP || strcmp(n->op, op) || n->n_outputs != 1)
    return NULL;
  return n;
}

/* For a binary node with `a` as one operand: the other operand. */
static int other_input(const gr_node *n, int a) {
  if (n->n_inputs != 2) return -1;
  if (n->inputs[0] == a) return n->inputs[1];
  if (n->inputs[1] == a) return n->inputs[0];
  return -1;
}

/* ReduceMean over the last axis only, keeping it. */
static bool mean_last_axis(const matcher *m, const gr_node *n) {
  int rank = m->g->values[n->inputs[0]].ndim, count = 0;
  const int64_t *axes = gr_attr_ints(n, "axes", &count);
  if (n->n_inputs > 1 && n->inputs[1] >= 0) return false; /* opset 18 form */
  return rank >= 1 && count == 1 && axes &&
         (axes[0] == -1 || axes[0] == rank - 1) &&
         gr_attr_int(n, "keepdims", 1) == 1;
}

/* A constant gamma/beta over the last axis: [C] or [1, ..., 1, C]. */
static bool channel_const(const matcher *m, int v, int64_t c) {
  if (v < 0 || !gr_is_const(m->g, v) || !is_f32(m, v)) return false;
  const gr_value *val = &m->g->values[v];
  for (int d = 0; d < val->ndim - 1; d++)
    if (val->shape[d] != 1) return false;
  return val->ndim >= 1 && val->shape[val->ndim - 1] == c;
}

static void drop(matcher *m, const gr_node *n) {
  m->removed[n - m->g->nodes] = true;
}

/* Replaces the chain ending at node `last` by one node. */
static int replace(matcher *m, const gr_node *last, const char *op,
                   const int *ins, int n_ins, gr_attr *attrs, int n_attrs,
                   ts_error *err) {
  int idx = (int)(last - m->g->nodes);
  int out = last->outputs[0];
  gr_node *n = ts_malloc(sizeof *n);
  if (!n) return TS_ERR(err, TS_ENOMEM, "patterns: out of memory");
  *n = gr_node_make(m->g, op, gr_fresh_name(m->g, op), ins, n_ins, &out, 1);
  for (int i = 0; i < n_attrs; i++) gr_node_set_attr(m->g, n, attrs[i]);
  int rc = gr_infer_node(m->g, n, err);
  if (rc) {
    free(n);
    return rc;
  }
  m->removed[idx] = true;
  m->repl[idx] = n;
  return TS_OK;
}

/* Layer normalization starting at the first ReduceMean (node i). */
static int match_layer_norm(matcher *m, int i, ts_error *err) {
  const gr_node *mean = op_at(m, i, "ReduceMean");
  if (!mean || !mean_last_axis(m, mean)) return TS_OK;
  int x = mean->inputs[0], mv = mean->outputs[0];
  if (!is_f32(m, x)) return TS_OK;
  const gr_node *sub = op_at(m, only_user(m, mv), "Sub");
  if (!sub || sub->n_inputs != 2 || sub->inputs[0] != x || sub->inputs[1] != mv)
    return TS_OK;
  int d = sub->outputs[0];
  /* d feeds exactly the square and the division (not a graph output) */
  int entries = m->user_off[d + 1] - m->user_off[d];
  if (m->uses[d] != entries || entries < 2 || entries > 3) return TS_OK;
  const gr_node *sq = NULL, *div = NULL;
  for (int k = m->user_off[d]; k < m->user_off[d + 1]; k++) {
    int u = m->users[k];
    const gr_node *n;
    double two;
    if ((n = op_at(m, u, "Pow")) && n->inputs[0] == d &&
        scalar_const(m, n->inputs[1], &two) && two == 2.0)
      sq = n;
    else if ((n = op_at(m, u, "Mul")) && n->n_inputs == 2 &&
             n->inputs[0] == d && n->inputs[1] == d)
      sq = n;
    else if ((n = op_at(m, u, "Div")) && n->n_inputs == 2 && n->inputs[0] == d)
      div = n;
    else
      return TS_OK; /* another consumer */
  }
  if (!sq || !div || entries != (sq->inputs[1] == d ? 3 : 2)) return TS_OK;
  const gr_node *var = op_at(m, only_user(m, sq->outputs[0]), "ReduceMean");
  if (!var || !mean_last_axis(m, var)) return TS_OK;
  const gr_node *add = op_at(m, only_user(m, var->outputs[0]), "Add");
  double eps;
  if (!add || !scalar_const(m, other_input(add, var->outputs[0]), &eps) ||
      !(eps >= 0))
    return TS_OK;
  const gr_node *sqrt_n = op_at(m, only_user(m, add->outputs[0]), "Sqrt");
  if (!sqrt_n || only_user(m, sqrt_n->outputs[0]) != (int)(div - m->g->nodes) ||
      div->inputs[1] != sqrt_n->outputs[0])
    return TS_OK;
  const gr_value *xv = &m->g->values[x];
  int64_t c = xv->shape[xv->ndim - 1];
  const gr_node *last = div, *scale = NULL, *shift = NULL;
  int gamma = -1, beta = -1;
  const gr_node *n = op_at(m, only_user(m, div->outputs[0]), "Mul");
  if (n && channel_const(m, other_input(n, div->outputs[0]), c)) {
    scale = last = n;
    gamma = other_input(n, div->outputs[0]);
    n = op_at(m, only_user(m, scale->outputs[0]), "Add");
    if (n && channel_const(m, other_input(n, scale->outputs[0]), c)) {
      shift = last = n;
      beta = other_input(n, scale->outputs[0]);
    }
  }
  if (gamma < 0 || beta < 0) { /* the identity affine part, as constants */
    float *ones = ts_malloc(sizeof(float) * (size_t)c);
    if (!ones) return TS_ERR(err, TS_ENOMEM, "patterns: out of memory");
    for (int64_t k = 0; k < c; k++) ones[k] = 1;
    if (gamma < 0)
      gamma = gr_const_add(m->g, "ln_gamma", TS_FLOAT32, 1, &c, ones);
    if (beta < 0) {
      memset(ones, 0, sizeof(float) * (size_t)c);
      beta = gr_const_add(m->g, "ln_beta", TS_FLOAT32, 1, &c, ones);
    }
    free(ones);
    if (gamma < 0 || beta < 0)
      return TS_ERR(err, TS_ENOMEM, "patterns: constant store limit");
  }
  const gr_node *chain[] = {mean, sub, sq, var, add, sqrt_n, div, scale, shift};
  for (size_t k = 0; k < sizeof chain / sizeof chain[0]; k++)
    if (chain[k] && chain[k] != last) drop(m, chain[k]);
  gr_attr attrs[2] = {{.name = "axis", .kind = GR_ATTR_INT, .i = -1},
                      {.name = "epsilon", .kind = GR_ATTR_FLOAT, .f = eps}};
  int ins[3] = {x, gamma, beta};
  return replace(m, last, "LayerNormalization", ins, 3, attrs, 2, err);
}

/* GELU starting at the Erf (node i). */
static int match_gelu(matcher *m, int i, ts_error *err) {
  const gr_node *erf = op_at(m, i, "Erf");
  if (!erf || !is_f32(m, erf->inputs[0])) return TS_OK;
  const gr_node *pre = node_of(m, erf->inputs[0]);
  if (!pre || pre->kind != TS_GRAPH_OP || pre->n_inputs != 2 ||
      only_user(m, pre->outputs[0]) != i || m->removed[pre - m->g->nodes])
    return TS_OK;
  double k;
  int x = pre->inputs[0];
  bool ok = false;
  if (!strcmp(pre->op, "Div"))
    ok = scalar_const(m, pre->inputs[1], &k) && near(k, M_SQRT2);
  else if (!strcmp(pre->op, "Mul")) {
    if (!scalar_const(m, pre->inputs[1], &k)) {
      x = pre->inputs[1];
      ok = scalar_const(m, pre->inputs[0], &k) && near(k, M_SQRT1_2);
    } else {
      ok = near(k, M_SQRT1_2);
    }
  }
  if (!ok || !is_f32(m, x)) return TS_OK;
  double one, half;
  const gr_node *add = op_at(m, only_user(m, erf->outputs[0]), "Add");
  if (!add || !scalar_const(m, other_input(add, erf->outputs[0]), &one) ||
      one != 1.0)
    return TS_OK;
  const gr_node *mul = op_at(m, only_user(m, add->outputs[0]), "Mul");
  if (!mul) return TS_OK;
  int o = other_input(mul, add->outputs[0]);
  const gr_node *last, *halve = NULL;
  if (o == x) { /* Mul(Mul(x, b), 0.5) */
    last = op_at(m, only_user(m, mul->outputs[0]), "Mul");
    if (!last || !scalar_const(m, other_input(last, mul->outputs[0]), &half) ||
        half != 0.5)
      return TS_OK;
  } else { /* Mul(Mul(x, 0.5), b) */
    halve = op_at(m, o >= 0 ? m->g->values[o].producer : -1, "Mul");
    if (!halve || only_user(m, o) != (int)(mul - m->g->nodes) ||
        other_input(halve, x) < 0 ||
        !scalar_const(m, other_input(halve, x), &half) || half != 0.5)
      return TS_OK;
    last = mul;
  }
  const gr_node *chain[] = {pre, erf, add, mul, halve, last};
  for (size_t c = 0; c < sizeof chain / sizeof chain[0]; c++)
    if (chain[c] && chain[c] != last) drop(m, chain[c]);
  return replace(m, last, "Gelu", &x, 1, NULL, 0, err);
}

/* A permutation of one axis spelled as Reshape, Transpose, Reshape
 * starting at node i (the first Reshape). */
static int match_axis_shuffle(matcher *m, int i, ts_error *err) {
  const gr_node *r1 = op_at(m, i, "Reshape");
  if (!r1) return TS_OK;
  const gr_value *x = &m->g->values[r1->inputs[0]];
  const gr_value *s = &m->g->values[r1->outputs[0]];
  if (x->ndim < 1 || s->ndim != x->ndim + 1) return TS_OK;
  int k = 0;
  while (k < x->ndim && x->shape[k] == s->shape[k]) k++;
  if (k >= x->ndim || s->shape[k] * s->shape[k + 1] != x->shape[k] ||
      s->shape[k] < 2 || s->shape[k + 1] < 2)
    return TS_OK;
  for (int d = k + 1; d < x->ndim; d++)
    if (x->shape[d] != s->shape[d + 1]) return TS_OK;
  const gr_node *t = op_at(m, only_user(m, r1->outputs[0]), "Transpose");
  int np = 0;
  const int64_t *perm = t ? gr_attr_ints(t, "perm", &np) : NULL;
  if (!perm || np != s->ndim) return TS_OK;
  for (int d = 0; d < np; d++)
    if (perm[d] != (d == k ? k + 1 : d == k + 1 ? k : d)) return TS_OK;
  const gr_node *r2 = op_at(m, only_user(m, t->outputs[0]), "Reshape");
  if (!r2) return TS_OK;
  const gr_value *y = &m->g->values[r2->outputs[0]];
  if (y->ndim != x->ndim ||
      memcmp(y->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim))
    return TS_OK;
  /* output position p = i b' + j (i < s[k + 1], j < s[k]) reads the
   * transposed [.., i, j, ..] = the reshaped [.., j, i, ..]: input
   * position j s[k + 1] + i */
  int64_t a = s->shape[k], b = s->shape[k + 1], n = x->shape[k];
  int64_t *pos = ts_malloc(sizeof *pos * (size_t)n);
  if (!pos) return TS_ERR(err, TS_ENOMEM, "patterns: out of memory");
  for (int64_t p = 0; p < n; p++) pos[p] = (p % a) * b + p / a;
  int idx =
      gr_const_add(m->g, gr_fresh_name(m->g, "shuffle"), TS_INT64, 1, &n, pos);
  free(pos);
  if (idx < 0) return TS_ERR(err, TS_ENOMEM, "patterns: out of memory");
  drop(m, r1);
  drop(m, t);
  int ins[2] = {r1->inputs[0], idx};
  gr_attr axis = {.name = "axis", .kind = GR_ATTR_INT, .i = k};
  return replace(m, r2, "Gather", ins, 2, &axis, 1, err);
}

int ts_graph_match_patterns(ts_graph *g, ts_error *err) {
  matcher m = {.g = g};
  int rc = TS_OK, n_nodes = g->n_nodes;
  m.uses = gr_use_counts(g);
  m.user_off = ts_calloc((size_t)g->n_values + 2, sizeof *m.user_off);
  m.removed = ts_calloc((size_t)g->n_nodes + 1, sizeof *m.removed);
  m.repl = ts_calloc((size_t)g->n_nodes + 1, sizeof *m.repl);
  int total = 0;
  for (int i = 0; i < g->n_nodes; i++) total += g->nodes[i].n_inputs;
  m.users = ts_calloc((size_t)total + 1, sizeof *m.users);
  if (!m.uses || !m.user_off || !m.removed || !m.repl || !m.users) {
    rc = TS_ERR(err, TS_ENOMEM, "patterns: out of memory");
    goto done;
  }
  /* consumers of each value, in node order (a node reading a value twice
   * appears twice) */
  for (int i = 0; i < g->n_nodes; i++)
    for (int k = 0; k < g->nodes[i].n_inputs; k++)
      if (g->nodes[i].inputs[k] >= 0) m.user_off[g->nodes[i].inputs[k] + 1]++;
  for (int v = 0; v < g->n_values; v++) m.user_off[v + 1] += m.user_off[v];
  int *fill = ts_calloc((size_t)g->n_values + 1, sizeof *fill);
  if (!fill) {
    rc = TS_ERR(err, TS_ENOMEM, "patterns: out of memory");
    goto done;
  }
  for (int i = 0; i < g->n_nodes; i++)
    for (int k = 0; k < g->nodes[i].n_inputs; k++) {
      int v = g->nodes[i].inputs[k];
      if (v >= 0) m.users[m.user_off[v] + fill[v]++] = i;
    }
  free(fill);
  int n_found = 0;
  for (int i = 0; i < g->n_nodes && !rc; i++) {
    if (m.removed[i]) continue;
    rc = match_layer_norm(&m, i, err);
    if (!rc) rc = match_gelu(&m, i, err);
    if (!rc) rc = match_axis_shuffle(&m, i, err);
  }
  if (rc) goto done;
  for (int i = 0; i < g->n_nodes; i++) n_found += m.repl[i] != NULL;
  if (n_found) {
    gr_list out = {0};
    for (int i = 0; i < g->n_nodes; i++) {
      if (m.repl[i])
        gr_list_push(&out, m.repl[i]);
      else if (!m.removed[i])
        gr_list_push(&out, &g->nodes[i]);
    }
    if (gr_list_commit(g, &out))
      rc = TS_ERR(err, TS_ENOMEM, "patterns: out of memory");
  }
done:
  if (m.repl)
    for (int i = 0; i < n_nodes; i++) free(m.repl[i]);
  free(m.uses);
  free(m.user_off);
  free(m.users);
  free(m.removed);
  free(m.repl);
  return rc;
}
