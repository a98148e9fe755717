/*
 * lower.c — node lowering in the manner of Glow: high-level operators are
 * rewritten into the smaller set the fusion and task layers handle.
 *   Gemm               -> MatMul (+ Mul by alpha) (+ Add of beta * C); a
 *                         transposed constant operand is transposed once
 *   BatchNormalization -> Mul by a per-channel scale, Add of a shift
 *                         (when it was not folded into a conv); with
 *                         parameters that are not constants, the formula
 *                         in elementwise nodes over reshaped parameters
 *   Flatten, Squeeze, Unsqueeze -> Reshape to the static output shape
 *   Div by a constant power of two -> Mul by its (exact) reciprocal
 *   Conv, MaxPool, AveragePool over [N, C, W] -> the same over [N, C, 1, W]
 * Gelu, Erf, Softmax and LayerNormalization are kept as library operators
 * (the operator library builds them as one PrimFunc each). Data movement
 * (Gather, Cast, Concat, Slice, Transpose) is left as it is: fusion builds
 * each as a call of its own; only the Reshapes (views) stay graph operators.
 */
#include "lower.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef gr_lowering lowering;

int gr_lower_emit(lowering *l, const char *op, const char *name, const int *ins,
                  int n_ins, int out) {
  gr_node n = gr_node_make(l->g, op, name, ins, n_ins, &out, 1);
  int rc = gr_infer_node(l->g, &n, l->err);
  if (rc) return rc;
  gr_list_push(&l->out, &n);
  return TS_OK;
}

int gr_lower_node(lowering *l, const gr_node *n, const char *op, const int *ins,
                  int n_ins, int out, const gr_attr *attrs, int n_attrs,
                  const char *suffix) {
  ts_graph *g = l->g;
  bool last = out >= 0;
  if (!last) out = gr_lower_fresh(g, n->outputs[0], suffix);
  if (out < 0) return TS_ENOMEM;
  const char *name = last ? n->name : gr_fresh_name(g, n->name);
  gr_node m = gr_node_make(g, op, name, ins, n_ins, &out, 1);
  for (int i = 0; i < n_attrs; i++) gr_node_set_attr(g, &m, attrs[i]);
  int rc = gr_infer_node(g, &m, l->err);
  if (rc) return rc;
  gr_list_push(&l->out, &m);
  return out;
}

static int lowered_i64(ts_graph *g, int64_t count, const int64_t *v) {
  return gr_const_add(g, gr_fresh_name(g, "lowered"), TS_INT64, 1, &count, v);
}

int gr_lower_reshape(lowering *l, const gr_node *n, int x, int nd,
                     const int64_t *shape, int out, const char *suffix) {
  if (x < 0) return x;
  int ins[2] = {x, lowered_i64(l->g, nd, shape)};
  if (ins[1] < 0) return ins[1];
  return gr_lower_node(l, n, "Reshape", ins, 2, out, NULL, 0, suffix);
}

int gr_lower_slice(lowering *l, const gr_node *n, int x, int64_t axis,
                   int64_t start, int64_t end, int64_t step, int out,
                   const char *suffix) {
  if (x < 0) return x;
  ts_graph *g = l->g;
  int ins[5] = {x, lowered_i64(g, 1, &start), lowered_i64(g, 1, &end),
                lowered_i64(g, 1, &axis), lowered_i64(g, 1, &step)};
  for (int i = 1; i < 5; i++)
    if (ins[i] < 0) return ins[i];
  return gr_lower_node(l, n, "Slice", ins, 5, out, NULL, 0, suffix);
}

int gr_lower_rewrite_ops(ts_graph *g, int nv,
                         int (*fn)(void *ctx, const gr_node *n), void *ctx,
                         gr_list *out, bool *changed) {
  int rc = TS_OK, n_nodes = g->n_nodes;
  *changed = false;
  for (int i = 0; i < n_nodes && rc == TS_OK; i++) {
    gr_node n = g->nodes[i];
    if (n.kind == TS_GRAPH_OP && n.outputs[0] < nv) {
      rc = fn(ctx, &n);
      if (rc == TS_OK) {
        *changed = true;
        continue;
      }
      if (rc != 1) break;
      rc = TS_OK;
    }
    gr_list_push(out, &n);
  }
  if (rc == TS_OK && *changed) return gr_list_commit(g, out);
  free(out->nodes);
  out->nodes = NULL;
  return rc;
}

int gr_lower_fresh(ts_graph *g, int v, const char *suffix) {
  char base[300];
  snprintf(base, sizeof base, "%s_%s", g->values[v].name, suffix);
  return gr_value_fresh(g, base, g->values[v].dtype, -1, NULL);
}

int gr_lower_const_f32(ts_graph *g, const char *name, int ndim,
                       const int64_t *shape, const double *v, int64_t n) {
  float *f = ts_malloc(sizeof(float) * (size_t)(n ? n : 1));
  if (!f) return TS_ENOMEM;
  for (int64_t i = 0; i < n; i++) f[i] = (float)v[i];
  int id = gr_const_add(g, name, TS_FLOAT32, ndim, shape, f);
  free(f);
  return id;
}

static int transposed_const(ts_graph *g, int v, double scale) {
  const gr_value *x = &g->values[v];
  int64_t r = x->shape[0], c = x->shape[1], shape[2] = {c, r};
  double *d = ts_malloc(sizeof(double) * (size_t)(r * c + 1));
  if (!d) return TS_ENOMEM;
  const float *src = gr_const_data(g, v);
  for (int64_t i = 0; i < r; i++)
    for (int64_t j = 0; j < c; j++) d[j * r + i] = scale * src[i * c + j];
  char name[300];
  snprintf(name, sizeof name, "%s_t", x->name);
  int id = gr_lower_const_f32(g, name, 2, shape, d, r * c);
  free(d);
  return id;
}

static bool is_f32_const(const ts_graph *g, int v) {
  return v >= 0 && gr_is_const(g, v) &&
         ts_dtype_eq(g->values[v].dtype, TS_FLOAT32);
}

static int lower_gemm(lowering *l, const gr_node *n) {
  ts_graph *g = l->g;
  int a = n->inputs[0], b = n->inputs[1];
  int c = n->n_inputs > 2 ? n->inputs[2] : -1;
  double alpha = gr_attr_float(n, "alpha", 1.0);
  double beta = gr_attr_float(n, "beta", 1.0);
  int rc;
  if (gr_attr_int(n, "transA", 0)) {
    int t = gr_lower_fresh(g, a, "t");
    if ((rc = gr_lower_emit(l, "Transpose", gr_fresh_name(g, n->name), &a, 1,
                            t)))
      return rc;
    a = t;
  }
  bool tb = gr_attr_int(n, "transB", 0) != 0;
  if (is_f32_const(g, b) && (tb || alpha != 1.0)) {
    if (tb)
      b = transposed_const(g, b, alpha);
    else {
      const gr_value *bv = &g->values[b];
      int64_t e = gr_value_elems(bv);
      double *d = ts_malloc(sizeof(double) * (size_t)(e + 1));
      if (!d) return TS_ENOMEM;
      for (int64_t i = 0; i < e; i++)
        d[i] = alpha * ((const float *)gr_const_data(g, b))[i];
      b = gr_lower_const_f32(g, gr_fresh_name(g, bv->name), 2, bv->shape, d, e);
      free(d);
    }
    if (b < 0) return TS_ERR(l->err, TS_ENOMEM, "lowering '%s'", n->name);
    alpha = 1.0;
  } else if (tb) {
    int t = gr_lower_fresh(g, b, "t");
    if ((rc = gr_lower_emit(l, "Transpose", gr_fresh_name(g, n->name), &b, 1,
                            t)))
      return rc;
    b = t;
  }
  int out = n->outputs[0];
  bool more = alpha != 1.0 || c >= 0;
  int mm = more ? gr_lower_fresh(g, out, "mm") : out;
  int ab[2] = {a, b};
  if ((rc = gr_lower_emit(l, "MatMul", n->name, ab, 2, mm))) return rc;
  if (alpha != 1.0) {
    double al = alpha;
    int k = gr_lower_const_f32(g, gr_fresh_name(g, "alpha"), 0, NULL, &al, 1);
    int sc = c >= 0 ? gr_lower_fresh(g, out, "scaled") : out;
    int ins[2] = {mm, k};
    if ((rc = gr_lower_emit(l, "Mul", gr_fresh_name(g, n->name), ins, 2, sc)))
      return rc;
    mm = sc;
  }
  if (c >= 0) {
    if (beta != 1.0) {
      if (!is_f32_const(g, c))
        return TS_ERR(l->err, TS_EUNSUPPORTED,
                      "node '%s' (Gemm): beta != 1 with a non-constant C",
                      n->name);
      const gr_value *cv = &g->values[c];
      int64_t e = gr_value_elems(cv);
      double *d = ts_malloc(sizeof(double) * (size_t)(e + 1));
      if (!d) return TS_ENOMEM;
      for (int64_t i = 0; i < e; i++)
        d[i] = beta * ((const float *)gr_const_data(g, c))[i];
      c = gr_lower_const_f32(g, gr_fresh_name(g, cv->name), cv->ndim, cv->shape,
                             d, e);
      free(d);
    }
    int ins[2] = {mm, c};
    if ((rc = gr_lower_emit(l, "Add", gr_fresh_name(g, n->name), ins, 2, out)))
      return rc;
  }
  return TS_OK;
}

/* BatchNormalization whose parameters are float32 values but not all
 * constants: (x - mean) / sqrt(var + eps) * scale + B, the parameters
 * reshaped to [C, 1, ...] to broadcast over the channel axis. */
static int lower_batchnorm_values(lowering *l, const gr_node *n) {
  ts_graph *g = l->g;
  const gr_value *x = &g->values[n->inputs[0]];
  int64_t shape[TS_MAX_DIMS], nd = x->ndim - 1;
  shape[0] = x->shape[1];
  for (int i = 1; i < nd; i++) shape[i] = 1;
  int s = gr_const_add(g, gr_fresh_name(g, "shape"), TS_INT64, 1, &nd, shape);
  double eps = gr_attr_float(n, "epsilon", 1e-5);
  int k_eps =
      gr_lower_const_f32(g, gr_fresh_name(g, "epsilon"), 0, NULL, &eps, 1);
  if (s < 0 || k_eps < 0)
    return TS_ERR(l->err, TS_ENOMEM, "lowering '%s'", n->name);
  int p[5], rc;
  for (int k = 1; k < 5; k++) {
    p[k] = gr_lower_fresh(g, n->inputs[k], "c");
    int ins[2] = {n->inputs[k], s};
    if ((rc = gr_lower_emit(l, "Reshape", gr_fresh_name(g, n->name), ins, 2,
                            p[k])))
      return rc;
  }
  int out = n->outputs[0];
  int d = gr_lower_fresh(g, out, "centered"),
      v = gr_lower_fresh(g, p[4], "eps");
  int sd = gr_lower_fresh(g, p[4], "std"), q = gr_lower_fresh(g, out, "normed");
  int sc = gr_lower_fresh(g, out, "scaled");
  struct {
    const char *op;
    int a, b, out;
  } steps[] = {{"Sub", n->inputs[0], p[3], d},
               {"Add", p[4], k_eps, v},
               {"Sqrt", v, -1, sd},
               {"Div", d, sd, q},
               {"Mul", q, p[1], sc},
               {"Add", sc, p[2], out}};
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
    int ins[2] = {steps[i].a, steps[i].b};
    const char *name = i == 5 ? n->name : gr_fresh_name(g, n->name);
    if ((rc = gr_lower_emit(l, steps[i].op, name, ins, steps[i].b >= 0 ? 2 : 1,
                            steps[i].out)))
      return rc;
  }
  return TS_OK;
}

static int lower_batchnorm(lowering *l, const gr_node *n) {
  ts_graph *g = l->g;
  bool consts = true, f32 = g->values[n->inputs[0]].ndim >= 2;
  for (int k = 1; k < 5; k++) {
    int v = n->n_inputs > k ? n->inputs[k] : -1;
    consts = consts && is_f32_const(g, v);
    f32 = f32 && v >= 0 && ts_dtype_eq(g->values[v].dtype, TS_FLOAT32) &&
          g->values[v].ndim == 1;
  }
  if (!consts) {
    if (f32) return lower_batchnorm_values(l, n);
    gr_list_push(&l->out, n); /* kept as a library operator */
    return TS_OK;
  }
  const gr_value *x = &g->values[n->inputs[0]];
  int64_t C = x->shape[1], shape[TS_MAX_DIMS];
  shape[0] = C;
  for (int i = 1; i < x->ndim - 1; i++) shape[i] = 1;
  double eps = gr_attr_float(n, "epsilon", 1e-5);
  double *sc = ts_malloc(sizeof(double) * (size_t)C);
  double *sh = ts_malloc(sizeof(double) * (size_t)C);
  if (!sc || !sh) {
    free(sc), free(sh);
    return TS_ERR(l->err, TS_ENOMEM, "lowering '%s'", n->name);
  }
  const float *s = gr_const_data(g, n->inputs[1]);
  const float *b = gr_const_data(g, n->inputs[2]);
  const float *m = gr_const_data(g, n->inputs[3]);
  const float *v = gr_const_data(g, n->inputs[4]);
  for (int64_t c = 0; c < C; c++) {
    sc[c] = s[c] / sqrt((double)v[c] + eps);
    sh[c] = b[c] - m[c] * sc[c];
  }
  int nd = x->ndim - 1;
  int ks =
      gr_lower_const_f32(g, gr_fresh_name(g, "bn_scale"), nd, shape, sc, C);
  int kh =
      gr_lower_const_f32(g, gr_fresh_name(g, "bn_shift"), nd, shape, sh, C);
  free(sc), free(sh);
  if (ks < 0 || kh < 0)
    return TS_ERR(l->err, TS_ENOMEM, "lowering '%s'", n->name);
  int t = gr_lower_fresh(g, n->outputs[0], "scaled");
  int in1[2] = {n->inputs[0], ks}, in2[2] = {t, kh};
  int rc = gr_lower_emit(l, "Mul", n->name, in1, 2, t);
  if (!rc)
    rc = gr_lower_emit(l, "Add", gr_fresh_name(g, n->name), in2, 2,
                       n->outputs[0]);
  return rc;
}

static int lower_view(lowering *l, const gr_node *n) {
  ts_graph *g = l->g;
  const gr_value *o = &g->values[n->outputs[0]];
  int64_t nd = o->ndim;
  int s =
      gr_const_add(g, gr_fresh_name(g, "shape"), TS_INT64, 1, &nd, o->shape);
  if (s < 0) return TS_ERR(l->err, TS_ENOMEM, "lowering '%s'", n->name);
  int ins[2] = {n->inputs[0], s};
  return gr_lower_emit(l, "Reshape", n->name, ins, 2, n->outputs[0]);
}

/* Whether every element of float32 constant v is a power of two (or its
 * negative), so that multiplying by its reciprocal rounds as dividing
 * does. Other divisors stay divisions: x / 255 and x * (1 / 255) differ in
 * the last bit, enough to move a quantized value that lands on a .5. */
static bool exact_reciprocals(const ts_graph *g, int v) {
  const float *d = gr_const_data(g, v);
  int64_t e = gr_value_elems(&g->values[v]);
  for (int64_t i = 0; i < e; i++) {
    int ex;
    if (!isfinite(d[i]) || frexpf(fabsf(d[i]), &ex) != 0.5f) return false;
    if (ex < -125 || ex > 126) return false; /* 1/d a normal float */
  }
  return true;
}

static int lower_div(lowering *l, const gr_node *n) {
  ts_graph *g = l->g;
  int d = n->inputs[1];
  const gr_value *dv = &g->values[d];
  int64_t e = gr_value_elems(dv);
  double *r = ts_malloc(sizeof(double) * (size_t)(e + 1));
  if (!r) return TS_ERR(l->err, TS_ENOMEM, "lowering '%s'", n->name);
  for (int64_t i = 0; i < e; i++)
    r[i] = 1.0 / ((const float *)gr_const_data(g, d))[i];
  int k = gr_lower_const_f32(g, gr_fresh_name(g, "reciprocal"), dv->ndim,
                             dv->shape, r, e);
  free(r);
  if (k < 0) return TS_ERR(l->err, TS_ENOMEM, "lowering '%s'", n->name);
  int ins[2] = {n->inputs[0], k};
  return gr_lower_emit(l, "Mul", n->name, ins, 2, n->outputs[0]);
}

/* ---- 1-D convs and pools as 2-D ones ---- */

/* ints[0..k) = {lead, v...}: the attribute `name` of a 1-D window op for its
 * 2-D form, a unit first spatial dimension in front (pads: {0, begin, 0,
 * end}). */
static gr_attr attr_2d(const char *name, const int64_t *v, int nv,
                       int64_t *ints) {
  if (nv == 2) { /* pads */
    ints[0] = 0, ints[1] = v[0], ints[2] = 0, ints[3] = v[1];
    return (gr_attr){.name = name, .kind = GR_ATTR_INTS, .n = 4, .ints = ints};
  }
  ints[0] = 1, ints[1] = v[0];
  return (gr_attr){.name = name, .kind = GR_ATTR_INTS, .n = 2, .ints = ints};
}

/* A Conv, MaxPool or AveragePool over [N, C, W] as the same op over [N, C,
 * 1, W] between two Reshapes (views), so that the 2-D machinery takes it:
 * the channels-last layout and its convs' default schedules, Winograd's
 * rule, blocked activations (a wav2vec2-like feature encoder's strided
 * convs of 512 channels ran at 72 GFLOP/s in NCW). 1 where n is not such
 * an op. */
static int lower_window_1d(lowering *l, const gr_node *n) {
  ts_graph *g = l->g;
  bool conv = !strcmp(n->op, "Conv");
  if (!conv && strcmp(n->op, "MaxPool") && strcmp(n->op, "AveragePool"))
    return 1;
  int x = n->inputs[0], y = n->outputs[0], w = conv ? n->inputs[1] : -1;
  if (x < 0 || g->values[x].ndim != 3 || g->values[y].ndim != 3 ||
      (n->n_outputs > 1 && n->outputs[1] >= 0) /* MaxPool's Indices */)
    return 1;
  if (conv && (w < 0 || g->values[w].ndim != 3)) return 1;
  /* copies: emitting nodes may move g->values */
  const gr_value x_v = g->values[x], y_v = g->values[y], *xv = &x_v, *yv = &y_v;
  int64_t k[1], st[1], dil[1], pads[2];
  int c;
  const int64_t *ks = gr_attr_ints(n, "kernel_shape", &c);
  k[0] = ks && c == 1 ? ks[0] : conv ? g->values[w].shape[2] : 0;
  const int64_t *sp = gr_attr_ints(n, "strides", &c);
  st[0] = sp && c == 1 ? sp[0] : 1;
  const int64_t *dp = gr_attr_ints(n, "dilations", &c);
  dil[0] = dp && c == 1 ? dp[0] : 1;
  if (k[0] <= 0 || gr_resolve_pads(n, 1, &xv->shape[2], k, st, dil, pads))
    return 1; /* shape inference has reported what is wrong */
  int64_t ints[5][4];
  gr_attr at[8];
  int na = 0;
  at[na++] = attr_2d("kernel_shape", k, 1, ints[0]);
  at[na++] = attr_2d("strides", st, 1, ints[1]);
  at[na++] = attr_2d("pads", pads, 2, ints[2]);
  if (conv || gr_attr_find(n, "dilations"))
    at[na++] = attr_2d("dilations", dil, 1, ints[3]);
  for (int i = 0; i < n->n_attrs; i++) /* group, ceil_mode, ... */
    if (strcmp(n->attrs[i].name, "kernel_shape") &&
        strcmp(n->attrs[i].name, "strides") &&
        strcmp(n->attrs[i].name, "pads") &&
        strcmp(n->attrs[i].name, "dilations") &&
        strcmp(n->attrs[i].name, "auto_pad") && na < 8)
      at[na++] = n->attrs[i];
  int64_t xs[4] = {xv->shape[0], xv->shape[1], 1, xv->shape[2]};
  int ins[3] = {gr_lower_reshape(l, n, x, 4, xs, -1, "2d"), -1, -1};
  if (ins[0] < 0) return ins[0];
  int n_ins = 1;
  if (conv) {
    const gr_value w_v = g->values[w], *wv = &w_v;
    int64_t ws[4] = {wv->shape[0], wv->shape[1], 1, wv->shape[2]};
    ins[1] = gr_is_const(g, w)
                 ? gr_const_add(g, gr_fresh_name(g, wv->name), wv->dtype, 4, ws,
                                gr_const_data(g, w))
                 : gr_lower_reshape(l, n, w, 4, ws, -1, "2d");
    if (ins[1] < 0) return ins[1];
    n_ins = 2;
    if (n->n_inputs > 2 && n->inputs[2] >= 0) ins[n_ins++] = n->inputs[2];
  }
  int v = gr_lower_node(l, n, n->op, ins, n_ins, -1, at, na, "2d");
  int64_t ys[3] = {yv->shape[0], yv->shape[1], yv->shape[2]};
  v = gr_lower_reshape(l, n, v, 3, ys, y, "2d");
  return v < 0 ? v : TS_OK;
}

/* requires: shapes known, constants folded; maintains: the values the graph
 * computes (up to float rounding); breaks: node indices, the lowered ops
 * (Gemm, BatchNormalization with constant parameters, Flatten, Squeeze,
 * Unsqueeze, Div by a power-of-two constant) no longer occur. */
int ts_graph_lower(ts_graph *g, ts_error *err) {
  lowering l = {g, {0}, err};
  int rc = TS_OK;
  int n_nodes = g->n_nodes;
  for (int i = 0; i < n_nodes && !rc; i++) {
    gr_node n = g->nodes[i];
    if (n.kind != TS_GRAPH_OP)
      gr_list_push(&l.out, &n);
    else if (!strcmp(n.op, "Gemm"))
      rc = lower_gemm(&l, &n);
    else if (!strcmp(n.op, "BatchNormalization"))
      rc = lower_batchnorm(&l, &n);
    else if (!strcmp(n.op, "Flatten") || !strcmp(n.op, "Squeeze") ||
             !strcmp(n.op, "Unsqueeze"))
      rc = lower_view(&l, &n);
    else if (!strcmp(n.op, "Div") && is_f32_const(g, n.inputs[1]) &&
             exact_reciprocals(g, n.inputs[1]))
      rc = lower_div(&l, &n);
    else if ((rc = lower_window_1d(&l, &n)) == 1 &&
             (rc = gr_lower_conv3d(&l, &n)) == 1 &&
             (rc = gr_lower_conv_boxes(&l, &n)) == 1 &&
             (rc = gr_lower_conv_transpose(&l, &n)) == 1 &&
             (rc = gr_lower_more(&l, &n)) == 1 &&
             (rc = gr_lower_index(&l, &n)) == 1 &&
             (rc = gr_lower_rnn(&l, &n)) == 1) {
      rc = TS_OK;
      gr_list_push(&l.out, &n);
    }
  }
  if (rc) {
    free(l.out.nodes);
    if (rc == TS_ENOMEM && err && !err->msg[0])
      TS_ERR(err, TS_ENOMEM, "lowering: out of memory");
    return rc;
  }
  if (gr_list_commit(g, &l.out))
    return TS_ERR(err, TS_ENOMEM, "lowering: out of memory");
  rc = gr_lower_unit_views(g, err);
  return rc ? rc : gr_lower_depth_views(g, err);
}
