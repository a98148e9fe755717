/*
 * shape.c — shape inference: the per-operator rules that give each node's
 * outputs their dtype, shape and layout, and the pass that applies them in
 * topological order. An output whose shape depends on a value that is not
 * (yet) a constant — Reshape's target shape computed by a Shape/Gather/
 * Concat chain — gets an unknown rank and so do its consumers; constant
 * folding (fold.c) re-runs the rules node by node as it turns such chains
 * into constants. Inconsistent shapes (a MatMul whose inner dimensions
 * differ, operands that do not broadcast, a Reshape that changes the element
 * count) are errors naming the node.
 */
#include "internal.h"

#include <stdio.h>
#include <math.h>
#include <string.h>

/* Operators the graph knows; every one has a shape rule below and a
 * reference kernel in kernels.c. */
static const char *const known_ops[] = {"Conv",
                                        "ConvTranspose",
                                        "Gemm",
                                        "MatMul",
                                        "Add",
                                        "Sub",
                                        "Mul",
                                        "Div",
                                        "Pow",
                                        "Sqrt",
                                        "Relu",
                                        "Clip",
                                        "Sigmoid",
                                        "Tanh",
                                        "Erf",
                                        "Gelu",
                                        "Softmax",
                                        "LayerNormalization",
                                        "BatchNormalization",
                                        "MaxPool",
                                        "AveragePool",
                                        "GlobalAveragePool",
                                        "ReduceMean",
                                        "ReduceSum",
                                        "ReduceMax",
                                        "Reshape",
                                        "Transpose",
                                        "Concat",
                                        "Flatten",
                                        "Squeeze",
                                        "Unsqueeze",
                                        "Gather",
                                        "Slice",
                                        "Shape",
                                        "Cast",
                                        "Identity",
                                        "Dropout",
                                        "Exp",
                                        "Neg",
                                        "Abs",
                                        "ConvInteger",
                                        "MatMulInteger",
                                        "QuantizeLinear",
                                        "DequantizeLinear",
                                        "PadMask",
                                        "ReduceMin",
                                        "ReduceL1",
                                        "ReduceL2",
                                        "ReduceSumSquare",
                                        "ReduceLogSum",
                                        "ReduceLogSumExp",
                                        "Expand",
                                        "ConstantOfShape",
                                        "Range",
                                        "Trilu",
                                        "CastLike",
                                        "EyeLike",
                                        "GatherElements",
                                        "Size",
                                        NULL};

bool gr_op_known(const char *op) {
  if (gr_ew_lookup(op) || gr_lowered_only(op)) return true;
  for (int i = 0; known_ops[i]; i++)
    if (!strcmp(known_ops[i], op)) return true;
  return false;
}

static bool is_unary(const char *op) {
  static const char *const u[] = {"Sqrt", "Relu",    "Sigmoid",  "Tanh", "Erf",
                                  "Gelu", "Softmax", "Identity", "Exp",  "Neg",
                                  "Abs",  "Clip",    NULL};
  for (int i = 0; u[i]; i++)
    if (!strcmp(u[i], op)) return true;
  return false;
}

static bool is_binary(const char *op) {
  return !strcmp(op, "Add") || !strcmp(op, "Sub") || !strcmp(op, "Mul") ||
         !strcmp(op, "Div") || !strcmp(op, "Pow");
}

bool gr_broadcast(const int64_t *a, int na, const int64_t *b, int nb,
                  int64_t *out, int *nout) {
  int n = na > nb ? na : nb;
  for (int i = 0; i < n; i++) {
    int64_t x = i < n - na ? 1 : a[i - (n - na)];
    int64_t y = i < n - nb ? 1 : b[i - (n - nb)];
    if (x == y || y == 1)
      out[i] = x;
    else if (x == 1)
      out[i] = y;
    else
      return false;
  }
  *nout = n;
  return true;
}

#define FAIL(...)                                                              \
  TS_ERR(err, TS_EINVAL, "node '%s' (%s, opset %d): " FMT_FIRST(__VA_ARGS__),  \
         n->name, n->op, g->opset REST_ARGS(__VA_ARGS__))
#define FMT_FIRST(f, ...) f
#define REST_ARGS(f, ...) , ##__VA_ARGS__

static void set_out(ts_graph *g, gr_node *n, int k, ts_dtype t, int ndim,
                    const int64_t *shape, const char *layout) {
  if (k >= n->n_outputs) return;
  gr_value *v = &g->values[n->outputs[k]];
  v->dtype = t;
  v->ndim = ndim;
  for (int i = 0; i < TS_MAX_DIMS; i++)
    v->shape[i] = (shape && i < ndim) ? shape[i] : -1;
  v->layout = layout ? layout : "";
}

static void set_unknown(ts_graph *g, gr_node *n) {
  for (int k = 0; k < n->n_outputs; k++) {
    gr_value *v = &g->values[n->outputs[k]];
    v->ndim = -1;
    for (int i = 0; i < TS_MAX_DIMS; i++) v->shape[i] = -1;
  }
}

static const gr_value *in(const ts_graph *g, const gr_node *n, int i) {
  if (i >= n->n_inputs || n->inputs[i] < 0) return NULL;
  return &g->values[n->inputs[i]];
}

/* The int64 contents of constant input i (count in *count), or NULL. */
static const int64_t *const_ints(const ts_graph *g, const gr_node *n, int i,
                                 int *count) {
  if (i >= n->n_inputs || !gr_is_const(g, n->inputs[i])) return NULL;
  const gr_value *v = &g->values[n->inputs[i]];
  if (!ts_dtype_eq(v->dtype, TS_INT64) || v->ndim > 1) return NULL;
  *count = (int)gr_value_elems(v);
  return gr_const_data(g, n->inputs[i]);
}

static int norm_axis(int64_t axis, int rank) {
  if (axis < 0) axis += rank;
  return (axis < 0 || axis >= rank) ? -1 : (int)axis;
}

/* Explicit begin/end pads for a conv or pool window from pads/auto_pad. */
int gr_resolve_pads(const gr_node *n, int nsp, const int64_t *in_sp,
                    const int64_t *kernel, const int64_t *strides,
                    const int64_t *dil, int64_t *pads) {
  const char *ap = gr_attr_string(n, "auto_pad", "NOTSET");
  int np;
  const int64_t *p = gr_attr_ints(n, "pads", &np);
  for (int i = 0; i < 2 * nsp; i++) pads[i] = 0;
  if (!strcmp(ap, "NOTSET") || !ap[0]) {
    if (p && np != 2 * nsp) return -1;
    for (int i = 0; p && i < 2 * nsp; i++) pads[i] = p[i];
    return 0;
  }
  if (!strcmp(ap, "VALID")) return 0;
  bool upper = !strcmp(ap, "SAME_UPPER");
  if (!upper && strcmp(ap, "SAME_LOWER")) return -1;
  for (int i = 0; i < nsp; i++) {
    int64_t out = (in_sp[i] + strides[i] - 1) / strides[i];
    int64_t total =
        (out - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 - in_sp[i];
    if (total < 0) total = 0;
    pads[i] = upper ? total / 2 : total - total / 2;
    pads[i + nsp] = total - pads[i];
  }
  return 0;
}

/* Strides/dilations attribute of a window op, defaulting to 1. */
static int window_attr(const gr_node *n, const char *name, int nsp,
                       int64_t *out) {
  int c;
  const int64_t *p = gr_attr_ints(n, name, &c);
  for (int i = 0; i < nsp; i++) out[i] = 1;
  if (!p) return 0;
  if (c != nsp) return -1;
  for (int i = 0; i < nsp; i++) {
    if (p[i] <= 0) return -1;
    out[i] = p[i];
  }
  return 0;
}

static int infer_conv(ts_graph *g, gr_node *n, ts_error *err) {
  const gr_value *x = in(g, n, 0), *w = in(g, n, 1), *b = in(g, n, 2);
  if (!strcmp(n->op, "ConvInteger")) b = NULL; /* input 2: a zero point */
  if (!x || !w) return FAIL("needs inputs X and W");
  if (x->ndim < 0 || w->ndim < 0) return set_unknown(g, n), TS_OK;
  bool transpose = !strcmp(n->op, "ConvTranspose");
  int nsp = x->ndim - 2;
  if (nsp < 1 || nsp > 3 || w->ndim != x->ndim)
    return FAIL("X has rank %d and W rank %d", x->ndim, w->ndim);
  int64_t group = gr_attr_int(n, "group", 1);
  if (group <= 0) return FAIL("group %lld", (long long)group);
  int64_t kernel[3], strides[3], dil[3], pads[6], out[TS_MAX_DIMS];
  for (int i = 0; i < nsp; i++) kernel[i] = w->shape[2 + i];
  int kc;
  const int64_t *ks = gr_attr_ints(n, "kernel_shape", &kc);
  if (ks && (kc != nsp || memcmp(ks, kernel, sizeof(int64_t) * nsp)))
    return FAIL("kernel_shape disagrees with W's shape");
  if (window_attr(n, "strides", nsp, strides) ||
      window_attr(n, "dilations", nsp, dil))
    return FAIL("bad strides or dilations");
  int64_t cin = x->shape[1];
  out[0] = x->shape[0];
  if (!transpose) {
    if (w->shape[0] % group || cin != w->shape[1] * group)
      return FAIL("X has %lld channels, W expects %lld x group %lld",
                  (long long)cin, (long long)w->shape[1], (long long)group);
    out[1] = w->shape[0];
    if (gr_resolve_pads(n, nsp, x->shape + 2, kernel, strides, dil, pads))
      return FAIL("bad pads or auto_pad");
    for (int i = 0; i < nsp; i++) {
      int64_t span = (kernel[i] - 1) * dil[i] + 1;
      int64_t o = (x->shape[2 + i] + pads[i] + pads[i + nsp] - span);
      if (o < 0)
        return FAIL("the window (%lld) is larger than the padded input (%lld)",
                    (long long)span,
                    (long long)(x->shape[2 + i] + pads[i] + pads[i + nsp]));
      out[2 + i] = o / strides[i] + 1;
    }
  } else {
    if (cin != w->shape[0])
      return FAIL("X has %lld channels, W expects %lld", (long long)cin,
                  (long long)w->shape[0]);
    if (strcmp(gr_attr_string(n, "auto_pad", "NOTSET"), "NOTSET"))
      return FAIL("auto_pad other than NOTSET is not supported");
    if (gr_attr_find(n, "output_shape"))
      return FAIL("output_shape is not supported; give pads instead");
    out[1] = w->shape[1] * group;
    int pc, opc;
    const int64_t *p = gr_attr_ints(n, "pads", &pc);
    const int64_t *op = gr_attr_ints(n, "output_padding", &opc);
    if ((p && pc != 2 * nsp) || (op && opc != nsp))
      return FAIL("bad pads or output_padding");
    for (int i = 0; i < nsp; i++) {
      int64_t o = strides[i] * (x->shape[2 + i] - 1) + (op ? op[i] : 0) +
                  (kernel[i] - 1) * dil[i] + 1 - (p ? p[i] + p[i + nsp] : 0);
      if (o <= 0) return FAIL("empty output");
      out[2 + i] = o;
    }
  }
  if (b && (b->ndim != 1 || b->shape[0] != out[1]))
    return FAIL("bias has %lld entries for %lld output channels",
                (long long)(b->ndim == 1 ? b->shape[0] : -1),
                (long long)out[1]);
  set_out(g, n, 0, x->dtype, x->ndim, out, gr_layout_for(x->ndim, true));
  return TS_OK;
}

static int infer_pool(ts_graph *g, gr_node *n, ts_error *err) {
  const gr_value *x = in(g, n, 0);
  if (!x) return FAIL("needs input X");
  if (x->ndim < 0) return set_unknown(g, n), TS_OK;
  int nsp = x->ndim - 2;
  if (nsp < 1 || nsp > 3) return FAIL("X has rank %d", x->ndim);
  int64_t out[TS_MAX_DIMS];
  out[0] = x->shape[0];
  out[1] = x->shape[1];
  if (!strcmp(n->op, "GlobalAveragePool")) {
    for (int i = 0; i < nsp; i++) out[2 + i] = 1;
  } else {
    if (n->n_outputs > 1) return FAIL("the Indices output is not supported");
    int kc;
    const int64_t *k = gr_attr_ints(n, "kernel_shape", &kc);
    if (!k || kc != nsp) return FAIL("kernel_shape missing or of wrong rank");
    int64_t kernel[3], strides[3], dil[3], pads[6];
    for (int i = 0; i < nsp; i++) {
      if (k[i] <= 0) return FAIL("kernel_shape entry %lld", (long long)k[i]);
      kernel[i] = k[i];
    }
    if (window_attr(n, "strides", nsp, strides) ||
        window_attr(n, "dilations", nsp, dil))
      return FAIL("bad strides or dilations");
    if (gr_resolve_pads(n, nsp, x->shape + 2, kernel, strides, dil, pads))
      return FAIL("bad pads or auto_pad");
    bool ceil_mode = gr_attr_int(n, "ceil_mode", 0) != 0;
    for (int i = 0; i < nsp; i++) {
      int64_t span = (kernel[i] - 1) * dil[i] + 1;
      int64_t num = x->shape[2 + i] + pads[i] + pads[i + nsp] - span;
      if (num < 0) return FAIL("the window is larger than the input");
      int64_t o =
          (ceil_mode ? (num + strides[i] - 1) / strides[i] : num / strides[i]) +
          1;
      /* the last window must start inside the input or left padding */
      if (ceil_mode && (o - 1) * strides[i] >= x->shape[2 + i] + pads[i]) o--;
      out[2 + i] = o;
    }
  }
  set_out(g, n, 0, x->dtype, x->ndim, out, gr_layout_for(x->ndim, true));
  return TS_OK;
}

static int infer_matmul(ts_graph *g, gr_node *n, ts_error *err) {
  const gr_value *a = in(g, n, 0), *b = in(g, n, 1);
  if (!a || !b) return FAIL("needs two inputs");
  if (a->ndim < 0 || b->ndim < 0) return set_unknown(g, n), TS_OK;
  if (a->ndim < 1 || b->ndim < 1) return FAIL("scalar operand");
  if (!ts_dtype_eq(a->dtype, b->dtype) && strcmp(n->op, "MatMulInteger"))
    return FAIL("operand dtypes differ");
  int64_t as[TS_MAX_DIMS + 1], bs[TS_MAX_DIMS + 1];
  int na = a->ndim, nb = b->ndim;
  memcpy(as, a->shape, sizeof(int64_t) * na);
  memcpy(bs, b->shape, sizeof(int64_t) * nb);
  int64_t WB = gr_matmul_weight_block(n);
  if (WB) { /* blocked weights [..., N/B, K, B] (the layout pass's) */
    if (nb < 3 || b->shape[nb - 1] != WB)
      return FAIL("blocked weights must be [..., N/%lld, K, %lld]",
                  (long long)WB, (long long)WB);
    bs[nb - 3] = b->shape[nb - 2], bs[nb - 2] = b->shape[nb - 3] * WB, nb--;
  }
  if (na == 1) as[0] = 1, as[1] = a->shape[0], na = 2;
  if (nb == 1) bs[1] = 1, bs[0] = b->shape[0], nb = 2;
  if (as[na - 1] != bs[nb - 2])
    return FAIL("inner dimensions differ: %lld and %lld", (long long)as[na - 1],
                (long long)bs[nb - 2]);
  int64_t batch[TS_MAX_DIMS], out[TS_MAX_DIMS];
  int nbatch;
  if (!gr_broadcast(as, na - 2, bs, nb - 2, batch, &nbatch))
    return FAIL("batch dimensions do not broadcast");
  int k = 0;
  for (int i = 0; i < nbatch; i++) out[k++] = batch[i];
  if (a->ndim > 1) out[k++] = as[na - 2];
  if (b->ndim > 1) out[k++] = bs[nb - 1];
  if (k > TS_MAX_DIMS) return FAIL("result rank over %d", TS_MAX_DIMS);
  set_out(g, n, 0, a->dtype, k, out, "");
  return TS_OK;
}

static int infer_gemm(ts_graph *g, gr_node *n, ts_error *err) {
  const gr_value *a = in(g, n, 0), *b = in(g, n, 1), *c = in(g, n, 2);
  if (!a || !b) return FAIL("needs inputs A and B");
  if (a->ndim < 0 || b->ndim < 0) return set_unknown(g, n), TS_OK;
  if (a->ndim != 2 || b->ndim != 2) return FAIL("A and B must be matrices");
  bool ta = gr_attr_int(n, "transA", 0), tb = gr_attr_int(n, "transB", 0);
  int64_t m = ta ? a->shape[1] : a->shape[0],
          k = ta ? a->shape[0] : a->shape[1];
  int64_t k2 = tb ? b->shape[1] : b->shape[0],
          nn = tb ? b->shape[0] : b->shape[1];
  if (k != k2)
    return FAIL("inner dimensions differ: %lld and %lld", (long long)k,
                (long long)k2);
  int64_t out[2] = {m, nn}, tmp[TS_MAX_DIMS];
  int nt;
  if (c && c->ndim >= 0 &&
      (!gr_broadcast(out, 2, c->shape, c->ndim, tmp, &nt) || nt != 2 ||
       tmp[0] != m || tmp[1] != nn))
    return FAIL("C does not broadcast to [%lld, %lld]", (long long)m,
                (long long)nn);
  set_out(g, n, 0, a->dtype, 2, out, "NC");
  return TS_OK;
}

static int infer_reduce(ts_graph *g, gr_node *n, const gr_value *x,
                        ts_error *err) {
  int na = 0;
  const int64_t *axes = gr_attr_ints(n, "axes", &na);
  if (!axes && n->n_inputs > 1 && n->inputs[1] >= 0) {
    axes = const_ints(g, n, 1, &na);
    if (!axes) return set_unknown(g, n), TS_OK;
  }
  bool keep = gr_attr_int(n, "keepdims", 1) != 0;
  bool noop = gr_attr_int(n, "noop_with_empty_axes", 0) != 0;
  bool red[TS_MAX_DIMS] = {0};
  if (!axes || na == 0) {
    for (int i = 0; i < x->ndim; i++) red[i] = !noop;
  } else {
    for (int i = 0; i < na; i++) {
      int ax = norm_axis(axes[i], x->ndim);
      if (ax < 0) return FAIL("axis %lld out of range", (long long)axes[i]);
      red[ax] = true;
    }
  }
  int64_t out[TS_MAX_DIMS];
  int k = 0;
  for (int i = 0; i < x->ndim; i++) {
    if (!red[i])
      out[k++] = x->shape[i];
    else if (keep)
      out[k++] = 1;
  }
  set_out(g, n, 0, x->dtype, k, out, keep ? x->layout : "");
  return TS_OK;
}

static int infer_reshape(ts_graph *g, gr_node *n, const gr_value *x,
                         ts_error *err) {
  int c;
  const int64_t *s = const_ints(g, n, 1, &c);
  if (!s) return set_unknown(g, n), TS_OK;
  if (c > TS_MAX_DIMS) return FAIL("target rank %d over %d", c, TS_MAX_DIMS);
  bool allowzero = gr_attr_int(n, "allowzero", 0) != 0;
  int64_t out[TS_MAX_DIMS], prod = 1, total = gr_value_elems(x);
  int minus = -1;
  for (int i = 0; i < c; i++) {
    if (s[i] == -1) {
      if (minus >= 0) return FAIL("two -1 entries in the target shape");
      minus = i;
      continue;
    }
    if (s[i] < -1) return FAIL("target dimension %lld", (long long)s[i]);
    out[i] =
        (s[i] == 0 && !allowzero) ? (i < x->ndim ? x->shape[i] : -2) : s[i];
    if (out[i] == -2) return FAIL("0 in the target copies a missing dimension");
    if (__builtin_mul_overflow(prod, out[i], &prod))
      return FAIL("the target shape has more than 2^63 elements");
  }
  if (minus >= 0) {
    if (prod == 0 || total % prod)
      return FAIL("cannot reshape %lld elements with a -1 entry",
                  (long long)total);
    out[minus] = total / prod;
    prod = total;
  }
  if (prod != total)
    return FAIL("cannot reshape %lld elements into %lld", (long long)total,
                (long long)prod);
  set_out(g, n, 0, x->dtype, c, out, "");
  return TS_OK;
}

static int infer_slice(ts_graph *g, gr_node *n, const gr_value *x,
                       ts_error *err) {
  int ns, ne, na = 0, nst = 0;
  const int64_t *st = const_ints(g, n, 1, &ns), *en = const_ints(g, n, 2, &ne);
  const int64_t *ax =
      n->n_inputs > 3 && n->inputs[3] >= 0 ? const_ints(g, n, 3, &na) : NULL;
  const int64_t *sp =
      n->n_inputs > 4 && n->inputs[4] >= 0 ? const_ints(g, n, 4, &nst) : NULL;
  if (!st || !en || (n->n_inputs > 3 && n->inputs[3] >= 0 && !ax) ||
      (n->n_inputs > 4 && n->inputs[4] >= 0 && !sp))
    return set_unknown(g, n), TS_OK;
  if (ns != ne || (ax && na != ns) || (sp && nst != ns))
    return FAIL("starts, ends, axes and steps differ in length");
  int64_t out[TS_MAX_DIMS];
  memcpy(out, x->shape, sizeof out);
  for (int i = 0; i < ns; i++) {
    int a = norm_axis(ax ? ax[i] : i, x->ndim);
    if (a < 0) return FAIL("axis out of range");
    int64_t step = sp ? sp[i] : 1, d = x->shape[a];
    if (step == 0) return FAIL("step 0");
    int64_t b = st[i], e = en[i];
    if (b < 0) b += d;
    if (e < 0) e += d;
    if (step > 0) {
      b = b < 0 ? 0 : b > d ? d : b;
      e = e < 0 ? 0 : e > d ? d : e;
      out[a] = e > b ? (e - b + step - 1) / step : 0;
    } else {
      b = b < 0 ? -1 : b > d - 1 ? d - 1 : b;
      e = e < -1 ? -1 : e > d - 1 ? d - 1 : e;
      out[a] = b > e ? (b - e + (-step) - 1) / (-step) : 0;
    }
  }
  set_out(g, n, 0, x->dtype, x->ndim, out, x->layout);
  return TS_OK;
}

/* Permutes the first 4 dims of value v's shape in place by perm. */
static void permute_value(ts_graph *g, int v, const int *perm) {
  if (v < 0 || g->values[v].ndim != 4) return;
  int64_t s[4];
  for (int d = 0; d < 4; d++) s[d] = g->values[v].shape[perm[d]];
  memcpy(g->values[v].shape, s, sizeof s);
}

/* A channels-last Conv or pool (the layout pass's): inferred as its NCHW
 * form, its inputs seen in NCHW / OIHW for the time of it. */
static int infer_channels_last(ts_graph *g, gr_node *n, ts_error *err) {
  static const int to_nchw[4] = {0, 3, 1, 2}, to_nhwc[4] = {0, 2, 3, 1};
  static const int w_to_oihw[4] = {3, 2, 0, 1}, w_to_hwio[4] = {2, 3, 1, 0};
  bool conv = gr_op_is_conv(n->op);
  int x = n->n_inputs > 0 ? n->inputs[0] : -1;
  int w = conv && n->n_inputs > 1 ? n->inputs[1] : -1;
  int64_t B = conv ? gr_conv_weight_block(n) : 0;
  if (x < 0 || g->values[x].ndim != 4 || (conv && (w < 0 || w == x)) ||
      (conv && g->values[w].ndim != (B ? 5 : 4)))
    return FAIL("a channels-last node needs 4-D data%s",
                conv ? (B ? " and 5-D blocked weights" : " and weights") : "");
  gr_value *wv = conv ? &g->values[w] : NULL;
  int64_t blocked[5];
  if (B) { /* [CO/B, KH, KW, CI, B] seen as OIHW for the time of it */
    memcpy(blocked, wv->shape, sizeof blocked);
    int64_t oihw[4] = {blocked[0] * blocked[4], blocked[3], blocked[1],
                       blocked[2]};
    wv->ndim = 4;
    memcpy(wv->shape, oihw, sizeof oihw);
  }
  permute_value(g, x, to_nchw);
  if (!B) permute_value(g, w, w_to_oihw);
  int rc = conv ? infer_conv(g, n, err) : infer_pool(g, n, err);
  permute_value(g, x, to_nhwc);
  if (!B) permute_value(g, w, w_to_hwio);
  if (B) {
    wv = &g->values[w];
    wv->ndim = 5;
    memcpy(wv->shape, blocked, sizeof blocked);
  }
  if (rc == TS_OK && n->n_outputs > 0) {
    permute_value(g, n->outputs[0], to_nhwc);
    g->values[n->outputs[0]].layout = "NHWC";
  }
  return rc;
}

static bool is_8bit(ts_dtype t) {
  return t.lanes == 1 && t.bits == 8 &&
         (t.code == TS_DT_INT || t.code == TS_DT_UINT);
}

/* ConvInteger / MatMulInteger: int8 or uint8 operands, the shape of the
 * float operator, an int32 result. The ONNX zero-point inputs are scalars
 * here (per-tensor). */
static int infer_integer(ts_graph *g, gr_node *n, ts_error *err) {
  const gr_value *x = in(g, n, 0), *w = in(g, n, 1);
  if (!x || !w) return FAIL("needs two inputs");
  if (x->ndim < 0 || w->ndim < 0) return set_unknown(g, n), TS_OK;
  if (!is_8bit(x->dtype) || !is_8bit(w->dtype))
    return FAIL("operands must be int8 or uint8");
  for (int k = 2; k < n->n_inputs; k++) {
    const gr_value *z = in(g, n, k);
    if (z && (gr_value_elems(z) != 1 || !is_8bit(z->dtype)))
      return FAIL("zero point %d must be one int8 or uint8 value", k - 1);
  }
  bool conv = gr_op_is_conv(n->op);
  int rc = conv && gr_node_channels_last(n) ? infer_channels_last(g, n, err)
           : conv                           ? infer_conv(g, n, err)
                                            : infer_matmul(g, n, err);
  if (rc == TS_OK && n->n_outputs > 0)
    g->values[n->outputs[0]].dtype = TS_INT32;
  return rc;
}

/* Whether quantization parameter p applies to x: one value, a vector along
 * `axis` (ONNX's per-axis form) or a shape that broadcasts against x. */
static bool quant_param_fits(const gr_value *p, const gr_value *x, int axis) {
  int64_t o[TS_MAX_DIMS];
  int no;
  if (gr_value_elems(p) == 1) return true;
  if (p->ndim == 1 && axis >= 0 && axis < x->ndim &&
      p->shape[0] == x->shape[axis])
    return true;
  return p->ndim <= x->ndim &&
         gr_broadcast(x->shape, x->ndim, p->shape, p->ndim, o, &no) &&
         no == x->ndim && !memcmp(o, x->shape, sizeof(int64_t) * (size_t)no);
}

/* LSTM, GRU, RNN: Y [S, nd, B, H] (layout 1: [B, S, nd, H]), Y_h and
 * Y_c [nd, B, H] ([B, nd, H]). */
static int infer_rnn(ts_graph *g, gr_node *n, ts_error *err) {
  gr_rnn r;
  char why[256];
  int rc = gr_rnn_parse(g, n, &r, why, sizeof why);
  if (rc == -2) return set_unknown(g, n), TS_OK;
  if (rc == -3)
    return TS_ERR(err, TS_EUNSUPPORTED, "node '%s' (%s, opset %d): %s", n->name,
                  n->op, g->opset, why);
  if (rc) return FAIL("%s", why);
  int64_t y0[4] = {r.S, r.nd, r.B, r.H}, y1[4] = {r.B, r.S, r.nd, r.H};
  int64_t s0[3] = {r.nd, r.B, r.H}, s1[3] = {r.B, r.nd, r.H};
  set_out(g, n, 0, TS_FLOAT32, 4, r.layout ? y1 : y0, "");
  for (int k = 1; k < 3; k++)
    set_out(g, n, k, TS_FLOAT32, 3, r.layout ? s1 : s0, "");
  if (n->n_outputs > (r.gates == 4 ? 3 : 2))
    return FAIL("%d outputs (at most %d)", n->n_outputs, r.gates == 4 ? 3 : 2);
  return TS_OK;
}

/* QuantizeLinear(x, scale[, zero_point]) -> the zero point's dtype (uint8
 * without one); DequantizeLinear(x, scale[, zero_point]) -> float32. */
static int infer_quant(ts_graph *g, gr_node *n, ts_error *err) {
  const gr_value *x = in(g, n, 0), *s = in(g, n, 1), *z = in(g, n, 2);
  if (!x || !s) return FAIL("needs X and a scale");
  if (x->ndim < 0 || s->ndim < 0) return set_unknown(g, n), TS_OK;
  bool q = !strcmp(n->op, "QuantizeLinear");
  int axis = norm_axis(gr_attr_int(n, "axis", 1), x->ndim);
  if (!ts_dtype_eq(s->dtype, TS_FLOAT32))
    return FAIL("the scale must be float32");
  if (!quant_param_fits(s, x, axis) || (z && !quant_param_fits(z, x, axis)))
    return FAIL("scale or zero point of %lld values does not fit X (rank %d)",
                (long long)gr_value_elems(s), x->ndim);
  if (q && !ts_dtype_eq(x->dtype, TS_FLOAT32)) return FAIL("X must be float32");
  if (q && z && !is_8bit(z->dtype))
    return FAIL("the zero point must be int8 or uint8");
  if (!q && !is_8bit(x->dtype) && !ts_dtype_eq(x->dtype, TS_INT32))
    return FAIL("X must be int8, uint8 or int32");
  if (!q && z && !ts_dtype_eq(z->dtype, x->dtype))
    return FAIL("the zero point's dtype must be X's");
  ts_dtype t = q ? (z ? z->dtype : TS_UINT8) : TS_FLOAT32;
  set_out(g, n, 0, t, x->ndim, x->shape, x->layout);
  return TS_OK;
}

/* ---- operators that lowering rewrites into the core set (lower_more.c) */

/* Whether a shape computed from a model's numbers (a target shape,
 * repeats, pads, a depth, a range) is one to go on with: every dimension
 * at most 2^31 and at most 2^40 elements in all, so that no product
 * overflows and no rewrite loops over an absurd axis. */
static bool sane_shape(const int64_t *s, int n) {
  int64_t e = 1;
  for (int i = 0; i < n; i++) {
    if (s[i] < 0 || s[i] > (1ll << 31)) return false;
    if (s[i] && e > (1ll << 40) / s[i]) return false;
    e *= s[i];
  }
  return true;
}

/* Split: the part sizes from the `split` input (or attribute, or equal
 * parts: the opset-18 num_outputs rounds the parts up, the last smaller). */
int gr_split_sizes(const ts_graph *g, const gr_node *n, int64_t *sizes,
                   int *axis_out) {
  const gr_value *x = &g->values[n->inputs[0]];
  int axis = norm_axis(gr_attr_int(n, "axis", 0), x->ndim);
  if (axis < 0) return -1;
  *axis_out = axis;
  int ns = 0, k = n->n_outputs;
  const int64_t *sp = gr_attr_ints(n, "split", &ns);
  if (!sp && n->n_inputs > 1 && n->inputs[1] >= 0) {
    sp = const_ints(g, n, 1, &ns);
    if (!sp) return -2; /* not a constant (yet) */
  }
  int64_t d = x->shape[axis], sum = 0;
  if (sp) {
    if (ns != k) return -1;
    for (int i = 0; i < k; i++) {
      if (sp[i] < 0) return -1;
      sizes[i] = sp[i];
      sum += sp[i];
    }
    return sum == d ? 0 : -1;
  }
  int64_t part = (d + k - 1) / k;
  if (gr_attr_find(n, "num_outputs") == NULL && d % k) return -1;
  for (int i = 0; i < k; i++) {
    sizes[i] = d - sum < part ? d - sum : part;
    sum += sizes[i];
  }
  return sizes[k - 1] > 0 || d == 0 ? 0 : -1;
}

static int infer_split(ts_graph *g, gr_node *n, const gr_value *x,
                       ts_error *err) {
  int64_t sizes[16];
  int axis;
  int rc = gr_split_sizes(g, n, sizes, &axis);
  if (rc == -2) return set_unknown(g, n), TS_OK;
  if (rc < 0)
    return FAIL("the parts do not split axis %lld into %d outputs",
                (long long)gr_attr_int(n, "axis", 0), n->n_outputs);
  for (int k = 0; k < n->n_outputs; k++) {
    int64_t out[TS_MAX_DIMS];
    memcpy(out, x->shape, sizeof out);
    out[axis] = sizes[k];
    set_out(g, n, k, x->dtype, x->ndim, out, x->layout);
  }
  return TS_OK;
}

static int infer_expand_tile(ts_graph *g, gr_node *n, const gr_value *x,
                             ts_error *err) {
  int c = 0;
  const int64_t *v = const_ints(g, n, 1, &c);
  if (!v) {
    if (in(g, n, 1) && gr_is_const(g, n->inputs[1]))
      return FAIL("input 1 must be int64");
    return set_unknown(g, n), TS_OK;
  }
  int64_t out[TS_MAX_DIMS];
  int no = 0;
  if (!strcmp(n->op, "Tile")) {
    if (c != x->ndim)
      return FAIL("repeats has %d entries for rank %d", c, x->ndim);
    for (int i = 0; i < c; i++) {
      if (v[i] < 0 || v[i] > (1ll << 31))
        return FAIL("repeat %d is %lld", i, (long long)v[i]);
      out[i] = x->shape[i] * v[i];
    }
    no = c;
  } else if (c > TS_MAX_DIMS ||
             !gr_broadcast(x->shape, x->ndim, v, c, out, &no)) {
    return FAIL("the shape does not broadcast with the input's");
  }
  if (!sane_shape(out, no)) return FAIL("a result of absurd size");
  set_out(g, n, 0, x->dtype, no, out, no == x->ndim ? x->layout : "");
  return TS_OK;
}

static int infer_depth_space(ts_graph *g, gr_node *n, const gr_value *x,
                             ts_error *err) {
  int64_t bs = gr_attr_int(n, "blocksize", 0);
  if (x->ndim != 4) return FAIL("wants a 4-D input, has rank %d", x->ndim);
  if (bs < 1) return FAIL("blocksize %lld", (long long)bs);
  int64_t out[4] = {x->shape[0], 0, 0, 0};
  if (!strcmp(n->op, "DepthToSpace")) {
    const char *mode = gr_attr_string(n, "mode", "DCR");
    if (strcmp(mode, "DCR") && strcmp(mode, "CRD"))
      return FAIL("mode '%s' (DCR or CRD)", mode);
    if (x->shape[1] % (bs * bs))
      return FAIL("%lld channels are not a multiple of blocksize^2 %lld",
                  (long long)x->shape[1], (long long)(bs * bs));
    out[1] = x->shape[1] / (bs * bs);
    out[2] = x->shape[2] * bs;
    out[3] = x->shape[3] * bs;
  } else {
    if (x->shape[2] % bs || x->shape[3] % bs)
      return FAIL("the image %lldx%lld is not a multiple of blocksize %lld",
                  (long long)x->shape[2], (long long)x->shape[3],
                  (long long)bs);
    out[1] = x->shape[1] * bs * bs;
    out[2] = x->shape[2] / bs;
    out[3] = x->shape[3] / bs;
  }
  set_out(g, n, 0, x->dtype, 4, out, x->layout);
  return TS_OK;
}

static int infer_norm(ts_graph *g, gr_node *n, const gr_value *x,
                      ts_error *err) {
  if (x->ndim < 3) return FAIL("wants rank 3 or more, has %d", x->ndim);
  if (!ts_dtype_eq(x->dtype, TS_FLOAT32)) return FAIL("wants float32");
  int64_t c = x->shape[1], groups = c;
  if (!strcmp(n->op, "GroupNormalization")) {
    groups = gr_attr_int(n, "num_groups", 0);
    if (groups < 1 || c % groups)
      return FAIL("num_groups %lld does not divide %lld channels",
                  (long long)groups, (long long)c);
  }
  for (int k = 1; k < 3; k++) {
    const gr_value *p = in(g, n, k);
    int64_t e = p ? gr_value_elems(p) : -1;
    if (!p || !ts_dtype_eq(p->dtype, TS_FLOAT32) || (e != c && e != groups) ||
        p->ndim != 1)
      return FAIL("input %d must be float32 [%lld]", k,
                  (long long)(n->op[0] == 'G' && g->opset < 21 ? groups : c));
  }
  set_out(g, n, 0, x->dtype, x->ndim, x->shape, x->layout);
  return TS_OK;
}

/* Pad: the begin and end pads of every axis (2 * rank entries). */
int gr_pad_amounts(const ts_graph *g, const gr_node *n, int64_t *pads) {
  const gr_value *x = &g->values[n->inputs[0]];
  int r = x->ndim, np = 0, na = 0;
  const int64_t *p = const_ints(g, n, 1, &np);
  if (!p) return -2;
  int64_t axes[TS_MAX_DIMS];
  const int64_t *ax =
      n->n_inputs > 3 && n->inputs[3] >= 0 ? const_ints(g, n, 3, &na) : NULL;
  if (n->n_inputs > 3 && n->inputs[3] >= 0 && !ax) {
    const gr_value *a = in(g, n, 3);
    if (!gr_is_const(g, n->inputs[3]) || a->ndim != 1) return -2;
    na = (int)a->shape[0];
    if (na > TS_MAX_DIMS) return -1;
    for (int i = 0; i < na; i++)
      axes[i] = ts_host_get_int(gr_const_data(g, n->inputs[3]), a->dtype, i);
    ax = axes;
  }
  if (!ax) na = r;
  if (np != 2 * na) return -1;
  for (int i = 0; i < 2 * r; i++) pads[i] = 0;
  for (int i = 0; i < na; i++) {
    int a = ax ? norm_axis(ax[i], r) : i;
    if (a < 0) return -1;
    pads[a] = p[i];
    pads[a + r] = p[i + na];
  }
  return 0;
}

static int infer_pad(ts_graph *g, gr_node *n, const gr_value *x,
                     ts_error *err) {
  int64_t pads[2 * TS_MAX_DIMS];
  int rc = gr_pad_amounts(g, n, pads);
  if (rc == -2) return set_unknown(g, n), TS_OK;
  if (rc < 0) return FAIL("pads (and axes) do not match rank %d", x->ndim);
  const char *mode = gr_attr_string(n, "mode", "constant");
  bool refl = !strcmp(mode, "reflect");
  if (strcmp(mode, "constant") && !refl && strcmp(mode, "edge") &&
      strcmp(mode, "wrap"))
    return FAIL("mode '%s' (constant, reflect, edge or wrap)", mode);
  int64_t out[TS_MAX_DIMS];
  for (int i = 0; i < x->ndim; i++) {
    int64_t b = pads[i], e = pads[i + x->ndim], d = x->shape[i];
    if (b < -(1ll << 31) || b > (1ll << 31) || e < -(1ll << 31) ||
        e > (1ll << 31))
      return FAIL("axis %d: pads %lld, %lld", i, (long long)b, (long long)e);
    out[i] = d + b + e;
    if (out[i] < 0)
      return FAIL("axis %d: pads %lld, %lld crop more than "
                  "its %lld",
                  i, (long long)b, (long long)e, (long long)d);
    if ((b > 0 || e > 0) && strcmp(mode, "constant") &&
        (d == 0 || (refl && (b >= d || e >= d))))
      return FAIL("axis %d of %lld: pads %lld, %lld too large for mode %s", i,
                  (long long)d, (long long)b, (long long)e, mode);
  }
  if (!sane_shape(out, x->ndim)) return FAIL("a result of absurd size");
  set_out(g, n, 0, x->dtype, x->ndim, out, x->layout);
  return TS_OK;
}

static int infer_resize(ts_graph *g, gr_node *n, const gr_value *x,
                        ts_error *err) {
  int64_t out[TS_MAX_DIMS];
  double scale[TS_MAX_DIMS];
  int rc = gr_resize_plan(g, n, out, scale, err);
  if (rc == -2) return set_unknown(g, n), TS_OK;
  if (rc) return rc;
  if (!sane_shape(out, x->ndim)) return FAIL("a result of absurd size");
  set_out(g, n, 0, x->dtype, x->ndim, out, x->layout);
  return TS_OK;
}

/* ONNX TensorProto dtype codes and the tessera dtypes they name. */
static const struct {
  int code;
  ts_dtype t;
} onnx_dtypes[] = {{1, {TS_DT_FLOAT, 32, 1}},  {2, {TS_DT_UINT, 8, 1}},
                   {3, {TS_DT_INT, 8, 1}},     {6, {TS_DT_INT, 32, 1}},
                   {7, {TS_DT_INT, 64, 1}},    {9, {TS_DT_BOOL, 1, 1}},
                   {10, {TS_DT_FLOAT, 16, 1}}, {11, {TS_DT_FLOAT, 64, 1}},
                   {16, {TS_DT_BFLOAT, 16, 1}}};

bool gr_onnx_dtype(int64_t code, ts_dtype *t) {
  for (size_t i = 0; i < sizeof onnx_dtypes / sizeof onnx_dtypes[0]; i++)
    if (onnx_dtypes[i].code == code) return *t = onnx_dtypes[i].t, true;
  return false;
}

int gr_onnx_dtype_code(ts_dtype t) {
  for (size_t i = 0; i < sizeof onnx_dtypes / sizeof onnx_dtypes[0]; i++)
    if (ts_dtype_eq(onnx_dtypes[i].t, t)) return onnx_dtypes[i].code;
  return -1;
}

static int infer_fill(ts_graph *g, gr_node *n, const gr_value *x,
                      ts_error *err) {
  if (!strcmp(n->op, "ConstantOfShape")) {
    int c = 0;
    const int64_t *s = const_ints(g, n, 0, &c);
    if (!s) return set_unknown(g, n), TS_OK;
    if (c > TS_MAX_DIMS) return FAIL("rank %d", c);
    if (!sane_shape(s, c)) return FAIL("a shape of absurd size");
    ts_dtype t = TS_FLOAT32;
    if (!gr_onnx_dtype(gr_attr_int(n, "value_dtype", 1), &t))
      return FAIL("unsupported value dtype");
    set_out(g, n, 0, t, c, s, "");
    return TS_OK;
  }
  /* Range */
  for (int k = 0; k < 3; k++)
    if (!in(g, n, k) || !gr_is_const(g, n->inputs[k]))
      return set_unknown(g, n), TS_OK;
  double v[3];
  for (int k = 0; k < 3; k++) {
    const gr_value *p = in(g, n, k);
    if (gr_value_elems(p) != 1 || !ts_dtype_eq(p->dtype, x->dtype))
      return FAIL("input %d must be a scalar of the start's dtype", k);
    v[k] = ts_host_get(gr_const_data(g, n->inputs[k]), p->dtype, 0);
  }
  if (v[2] == 0) return FAIL("delta is 0");
  double cnt = ceil((v[1] - v[0]) / v[2]);
  if (!(cnt <= (double)(1ll << 31))) return FAIL("%g elements", cnt);
  int64_t len = cnt > 0 ? (int64_t)cnt : 0;
  set_out(g, n, 0, x->dtype, 1, &len, "");
  return TS_OK;
}

int gr_infer_node(ts_graph *g, gr_node *n, ts_error *err) {
  /* a new node wired to a value its pass could not add */
  for (int k = 0; k < n->n_outputs; k++)
    if (n->outputs[k] < 0)
      return TS_ERR(err, TS_ENOMEM, "node '%s': out of memory", n->name);
  for (int k = 0; k < n->n_inputs; k++)
    if (n->inputs[k] < -1)
      return TS_ERR(err, TS_ENOMEM, "node '%s': out of memory", n->name);
  if (n->kind == TS_GRAPH_CALL) return TS_OK; /* fixed by the call's params */
  const char *op = n->op;
  const gr_value *x = in(g, n, 0);
  if (!gr_op_known(op))
    return TS_ERR(err, TS_EUNSUPPORTED,
                  "node '%s': operator '%s' is not supported (opset %d)",
                  n->name, op, g->opset);
  if (gr_node_channels_last(n) &&
      (!strcmp(op, "Conv") || strstr(op, "Pool") != NULL))
    return infer_channels_last(g, n, err);
  if (!strcmp(op, "Conv") || !strcmp(op, "ConvTranspose"))
    return infer_conv(g, n, err);
  if (!strcmp(op, "MaxPool") || !strcmp(op, "AveragePool") ||
      !strcmp(op, "GlobalAveragePool") || !strcmp(op, "LpPool"))
    return infer_pool(g, n, err);
  if (!strcmp(op, "MatMul")) return infer_matmul(g, n, err);
  if (!strcmp(op, "ConvInteger") || !strcmp(op, "MatMulInteger"))
    return infer_integer(g, n, err);
  if (!strcmp(op, "QuantizeLinear") || !strcmp(op, "DequantizeLinear"))
    return infer_quant(g, n, err);
  if (!strcmp(op, "Gemm")) return infer_gemm(g, n, err);
  if (!strcmp(op, "LSTM") || !strcmp(op, "GRU") || !strcmp(op, "RNN"))
    return infer_rnn(g, n, err);
  if (!x) return FAIL("missing input 0");
  const gr_ew_op *ew = gr_ew_lookup(op);
  if (x->ndim < 0) return set_unknown(g, n), TS_OK;
  for (int i = 1; i < n->n_inputs; i++)
    if (n->inputs[i] >= 0 && g->values[n->inputs[i]].ndim < 0)
      return set_unknown(g, n), TS_OK;
  if (ew) return gr_ew_infer(g, n, ew, err);
  if (!strcmp(op, "Split")) return infer_split(g, n, x, err);
  if (!strcmp(op, "Expand") || !strcmp(op, "Tile"))
    return infer_expand_tile(g, n, x, err);
  if (!strcmp(op, "DepthToSpace") || !strcmp(op, "SpaceToDepth"))
    return infer_depth_space(g, n, x, err);
  if (!strcmp(op, "InstanceNormalization") || !strcmp(op, "GroupNormalization"))
    return infer_norm(g, n, x, err);
  if (!strcmp(op, "Pad")) return infer_pad(g, n, x, err);
  if (!strcmp(op, "Resize")) return infer_resize(g, n, x, err);
  if (!strcmp(op, "Range") || !strcmp(op, "ConstantOfShape"))
    return infer_fill(g, n, x, err);
  if (!strcmp(op, "Trilu")) {
    if (x->ndim < 2) return FAIL("wants rank 2 or more, has %d", x->ndim);
    set_out(g, n, 0, x->dtype, x->ndim, x->shape, x->layout);
    return TS_OK;
  }
  if (!strcmp(op, "PadMask")) { /* dynamic.c: x, positions, length */
    const gr_value *pos = in(g, n, 1), *len = in(g, n, 2);
    int64_t out[TS_MAX_DIMS];
    int no = 0;
    if (!pos || !len || !ts_dtype_eq(pos->dtype, TS_FLOAT32) ||
        !ts_dtype_eq(len->dtype, TS_FLOAT32) || !ts_dtype_is_float(x->dtype))
      return FAIL("wants a float tensor and float32 positions and length");
    for (int k = 1; k < 3; k++) {
      const gr_value *y = k == 1 ? pos : len;
      if (!gr_broadcast(x->shape, x->ndim, y->shape, y->ndim, out, &no) ||
          no != x->ndim || memcmp(out, x->shape, sizeof(int64_t) * (size_t)no))
        return FAIL("input %d does not broadcast to the data's shape", k);
    }
    set_out(g, n, 0, x->dtype, x->ndim, x->shape, x->layout);
    return TS_OK;
  }
  if (is_binary(op)) {
    const gr_value *y = in(g, n, 1);
    if (!y) return FAIL("needs two inputs");
    if (strcmp(op, "Pow") && !ts_dtype_eq(x->dtype, y->dtype)) {
      char b1[32], b2[32];
      return FAIL("operand dtypes differ: %s and %s",
                  ts_dtype_str(x->dtype, b1), ts_dtype_str(y->dtype, b2));
    }
    int64_t out[TS_MAX_DIMS];
    int no;
    if (!gr_broadcast(x->shape, x->ndim, y->shape, y->ndim, out, &no)) {
      return FAIL("operand shapes do not broadcast (ranks %d and %d, last "
                  "dimensions %lld and %lld)",
                  x->ndim, y->ndim,
                  (long long)(x->ndim ? x->shape[x->ndim - 1] : 1),
                  (long long)(y->ndim ? y->shape[y->ndim - 1] : 1));
    }
    const char *layout = x->ndim == no ? x->layout : y->layout;
    set_out(g, n, 0, x->dtype, no, out, layout);
    return TS_OK;
  }
  if (!strcmp(op, "Dropout") && n->n_inputs > 2 && n->inputs[2] >= 0 &&
      (!gr_is_const(g, n->inputs[2]) ||
       ts_host_get(gr_const_data(g, n->inputs[2]), in(g, n, 2)->dtype, 0)))
    return FAIL("training_mode is not supported (inference only)");
  if (is_unary(op) || !strcmp(op, "Dropout")) {
    if (!strcmp(op, "Softmax") &&
        norm_axis(gr_attr_int(n, "axis", -1), x->ndim) < 0)
      return FAIL("axis out of range");
    set_out(g, n, 0, x->dtype, x->ndim, x->shape, x->layout);
    if (!strcmp(op, "Dropout"))
      set_out(g, n, 1, TS_BOOL, x->ndim, x->shape, x->layout);
    return TS_OK;
  }
  if (!strcmp(op, "Cast") || !strcmp(op, "CastLike")) {
    ts_dtype t;
    const gr_attr *to = gr_attr_find(n, "to");
    if (!strcmp(op, "CastLike")) {
      if (!in(g, n, 1)) return FAIL("needs target_type");
      t = in(g, n, 1)->dtype;
      if (gr_onnx_dtype_code(t) < 0) return FAIL("unsupported target type");
    } else if (!to || !gr_onnx_dtype(to->i, &t)) {
      return FAIL("unsupported target type");
    }
    set_out(g, n, 0, t, x->ndim, x->shape, x->layout);
    return TS_OK;
  }
  if (!strcmp(op, "Einsum")) {
    gr_einsum e;
    char why[160];
    for (int k = 1; k < n->n_inputs; k++)
      if (!in(g, n, k) || !ts_dtype_eq(in(g, n, k)->dtype, x->dtype))
        return FAIL("operand %d is omitted or of another dtype", k);
    if (gr_einsum_parse(g, n, &e, why, sizeof why)) return FAIL("%s", why);
    set_out(g, n, 0, x->dtype, e.n_out, e.out_shape, "");
    return TS_OK;
  }
  if (!strcmp(op, "Size")) {
    set_out(g, n, 0, TS_INT64, 0, NULL, "");
    return TS_OK;
  }
  if (!strcmp(op, "LogSoftmax") || !strcmp(op, "LpNormalization")) {
    if (norm_axis(gr_attr_int(n, "axis", -1), x->ndim) < 0)
      return FAIL("axis out of range");
    int64_t p = gr_attr_int(n, "p", 2);
    if (!strcmp(op, "LpNormalization") && p != 1 && p != 2)
      return FAIL("p %lld (1 or 2)", (long long)p);
    if (!ts_dtype_eq(x->dtype, TS_FLOAT32)) return FAIL("wants float32");
    set_out(g, n, 0, x->dtype, x->ndim, x->shape, x->layout);
    return TS_OK;
  }
  if (!strcmp(op, "GatherElements")) {
    const gr_value *idx = in(g, n, 1);
    int axis = norm_axis(gr_attr_int(n, "axis", 0), x->ndim);
    if (!idx || !ts_dtype_is_int(idx->dtype) || idx->ndim != x->ndim)
      return FAIL("indices must be integers of the data's rank");
    if (axis < 0) return FAIL("axis out of range");
    for (int d = 0; d < x->ndim; d++)
      if (d != axis && idx->shape[d] > x->shape[d])
        return FAIL("indices are longer than the data on axis %d", d);
    set_out(g, n, 0, x->dtype, idx->ndim, idx->shape, "");
    return TS_OK;
  }
  if (!strcmp(op, "ScatterND") || !strcmp(op, "ScatterElements") ||
      !strcmp(op, "Scatter")) {
    const gr_value *idx = in(g, n, 1), *u = in(g, n, 2);
    if (!idx || !u || !ts_dtype_is_int(idx->dtype))
      return FAIL("wants data, integer indices and updates");
    char b1[32], b2[32];
    if (!ts_dtype_eq(u->dtype, x->dtype))
      return FAIL("updates are %s, the data %s", ts_dtype_str(u->dtype, b1),
                  ts_dtype_str(x->dtype, b2));
    if (strcmp(op, "ScatterND")) {
      if (idx->ndim != x->ndim || u->ndim != x->ndim)
        return FAIL("indices and updates must have the data's rank");
      if (norm_axis(gr_attr_int(n, "axis", 0), x->ndim) < 0)
        return FAIL("axis out of range");
      for (int d = 0; d < x->ndim; d++)
        if (idx->shape[d] != u->shape[d])
          return FAIL("indices and updates differ in shape on axis %d", d);
    } else {
      int64_t k = idx->ndim ? idx->shape[idx->ndim - 1] : 0;
      if (idx->ndim < 1 || k < 1 || k > x->ndim)
        return FAIL("the indices' last dimension must be 1 to the data's "
                    "rank (%d)",
                    x->ndim);
      /* updates: indices.shape[:-1] + data.shape[k:] */
      bool ok = u->ndim == idx->ndim - 1 + x->ndim - (int)k;
      for (int d = 0; ok && d < u->ndim; d++)
        ok = u->shape[d] == (d < idx->ndim - 1
                                 ? idx->shape[d]
                                 : x->shape[k + d - (idx->ndim - 1)]);
      if (!ok)
        return FAIL("updates must be indices.shape[:-1] + data.shape[k:]");
    }
    set_out(g, n, 0, x->dtype, x->ndim, x->shape, "");
    return TS_OK;
  }
  if (!strcmp(op, "GatherND")) {
    const gr_value *idx = in(g, n, 1);
    int64_t b = gr_attr_int(n, "batch_dims", 0);
    if (!idx || !ts_dtype_is_int(idx->dtype) || idx->ndim < 1)
      return FAIL("wants integer indices of rank 1 or more");
    int64_t k = idx->shape[idx->ndim - 1];
    if (b < 0 || b >= idx->ndim || b >= x->ndim || k < 1 || b + k > x->ndim)
      return FAIL("batch_dims %lld and an index length of %lld do not fit "
                  "data of rank %d",
                  (long long)b, (long long)k, x->ndim);
    for (int d = 0; d < b; d++)
      if (idx->shape[d] != x->shape[d])
        return FAIL("the batch dimension %d differs (%lld, %lld)", d,
                    (long long)idx->shape[d], (long long)x->shape[d]);
    int64_t out[TS_MAX_DIMS];
    int r = 0;
    for (int d = 0; d < idx->ndim - 1; d++) out[r++] = idx->shape[d];
    for (int d = (int)(b + k); d < x->ndim; d++) {
      if (r == TS_MAX_DIMS) return FAIL("the output's rank is too large");
      out[r++] = x->shape[d];
    }
    set_out(g, n, 0, x->dtype, r, out, "");
    return TS_OK;
  }
  if (!strcmp(op, "Hardmax") || !strcmp(op, "CumSum")) {
    if (!strcmp(op, "Hardmax") &&
        norm_axis(gr_attr_int(n, "axis", g->opset < 13 ? 1 : -1), x->ndim) < 0)
      return FAIL("axis out of range");
    if (!ts_dtype_eq(x->dtype, TS_FLOAT32)) return FAIL("wants float32");
    set_out(g, n, 0, x->dtype, x->ndim, x->shape, x->layout);
    return TS_OK;
  }
  if (!strcmp(op, "EyeLike")) {
    ts_dtype t = x->dtype;
    const gr_attr *dt = gr_attr_find(n, "dtype");
    if (dt && !gr_onnx_dtype(dt->i, &t)) return FAIL("unsupported dtype");
    if (x->ndim != 2) return FAIL("wants rank 2, has %d", x->ndim);
    set_out(g, n, 0, t, 2, x->shape, "");
    return TS_OK;
  }
  if (!strcmp(op, "OneHot")) {
    const gr_value *d = in(g, n, 1), *v = in(g, n, 2);
    if (!d || !v || gr_value_elems(v) != 2 || !ts_dtype_is_int(x->dtype))
      return FAIL("wants integer indices, depth and two values");
    if (!gr_is_const(g, n->inputs[1])) return set_unknown(g, n), TS_OK;
    int64_t depth =
        ts_host_get_int(gr_const_data(g, n->inputs[1]), d->dtype, 0);
    int r = x->ndim + 1;
    int64_t axis = gr_attr_int(n, "axis", -1), out[TS_MAX_DIMS];
    if (axis < 0) axis += r;
    if (axis < 0 || axis >= r || r > TS_MAX_DIMS || depth < 1 ||
        depth > (1 << 24))
      return FAIL("axis or depth out of range");
    for (int i = 0, j = 0; i < r; i++)
      out[i] = i == axis ? depth : x->shape[j++];
    set_out(g, n, 0, v->dtype, r, out, "");
    return TS_OK;
  }
  if (!strcmp(op, "LRN")) {
    if (x->ndim < 3 || !ts_dtype_eq(x->dtype, TS_FLOAT32))
      return FAIL("wants float32 of rank 3 or more");
    if (gr_attr_int(n, "size", 0) < 1) return FAIL("needs size >= 1");
    set_out(g, n, 0, x->dtype, x->ndim, x->shape, x->layout);
    return TS_OK;
  }
  if (!strcmp(op, "GlobalMaxPool")) {
    if (x->ndim < 3) return FAIL("wants rank 3 or more, has %d", x->ndim);
    int64_t out[TS_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) out[i] = i < 2 ? x->shape[i] : 1;
    set_out(g, n, 0, x->dtype, x->ndim, out, x->layout);
    return TS_OK;
  }
  if (!strcmp(op, "ArgMax") || !strcmp(op, "ArgMin")) {
    int axis = norm_axis(gr_attr_int(n, "axis", 0), x->ndim);
    if (axis < 0) return FAIL("axis out of range");
    if (!ts_dtype_eq(x->dtype, TS_FLOAT32)) return FAIL("wants float32");
    bool keep = gr_attr_int(n, "keepdims", 1) != 0;
    int64_t out[TS_MAX_DIMS];
    int k = 0;
    for (int i = 0; i < x->ndim; i++)
      if (i != axis || keep) out[k++] = i == axis ? 1 : x->shape[i];
    set_out(g, n, 0, TS_INT64, k, out, "");
    return TS_OK;
  }
  if (!strcmp(op, "BatchNormalization")) {
    if (n->n_outputs > 1)
      return FAIL("training mode outputs are not supported");
    if (x->ndim < 2) return FAIL("X has rank %d", x->ndim);
    for (int i = 1; i < 5; i++) {
      const gr_value *p = in(g, n, i);
      if (!p || p->ndim != 1 || p->shape[0] != x->shape[1])
        return FAIL("input %d must have %lld entries", i,
                    (long long)x->shape[1]);
    }
    set_out(g, n, 0, x->dtype, x->ndim, x->shape, x->layout);
    return TS_OK;
  }
  if (!strcmp(op, "LayerNormalization")) {
    int axis = norm_axis(gr_attr_int(n, "axis", -1), x->ndim);
    if (axis < 0) return FAIL("axis out of range");
    const gr_value *s = in(g, n, 1);
    if (!s) return FAIL("needs Scale");
    int64_t norm = 1;
    for (int i = axis; i < x->ndim; i++) norm *= x->shape[i];
    if (gr_value_elems(s) != norm ||
        (in(g, n, 2) && gr_value_elems(in(g, n, 2)) != norm))
      return FAIL("Scale/B must hold %lld elements", (long long)norm);
    set_out(g, n, 0, x->dtype, x->ndim, x->shape, x->layout);
    int64_t st[TS_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) st[i] = i < axis ? x->shape[i] : 1;
    set_out(g, n, 1, TS_FLOAT32, x->ndim, st, "");
    set_out(g, n, 2, TS_FLOAT32, x->ndim, st, "");
    return TS_OK;
  }
  if (!strncmp(op, "Reduce", 6)) return infer_reduce(g, n, x, err);
  if (!strcmp(op, "Reshape")) return infer_reshape(g, n, x, err);
  if (!strcmp(op, "Transpose")) {
    int c;
    const int64_t *p = gr_attr_ints(n, "perm", &c);
    int64_t out[TS_MAX_DIMS];
    bool seen[TS_MAX_DIMS] = {0};
    if (p && c != x->ndim)
      return FAIL("perm has %d entries for rank %d", c, x->ndim);
    for (int i = 0; i < x->ndim; i++) {
      int64_t a = p ? p[i] : x->ndim - 1 - i;
      if (a < 0 || a >= x->ndim || seen[a]) return FAIL("bad perm");
      seen[a] = true;
      out[i] = x->shape[a];
    }
    set_out(g, n, 0, x->dtype, x->ndim, out, "");
    return TS_OK;
  }
  if (!strcmp(op, "Concat")) {
    int axis = norm_axis(gr_attr_int(n, "axis", 0), x->ndim);
    if (axis < 0) return FAIL("axis out of range");
    int64_t out[TS_MAX_DIMS];
    memcpy(out, x->shape, sizeof out);
    for (int i = 1; i < n->n_inputs; i++) {
      const gr_value *y = in(g, n, i);
      if (!y) return FAIL("omitted input %d", i);
      if (y->ndim != x->ndim || !ts_dtype_eq(y->dtype, x->dtype))
        return FAIL("input %d has another rank or dtype", i);
      for (int d = 0; d < x->ndim; d++)
        if (d != axis && y->shape[d] != x->shape[d])
          return FAIL("input %d: dimension %d is %lld, input 0 has %lld", i, d,
                      (long long)y->shape[d], (long long)x->shape[d]);
      out[axis] += y->shape[axis];
    }
    set_out(g, n, 0, x->dtype, x->ndim, out, x->layout);
    return TS_OK;
  }
  if (!strcmp(op, "Flatten")) {
    int64_t axis = gr_attr_int(n, "axis", 1);
    if (axis < 0) axis += x->ndim;
    if (axis < 0 || axis > x->ndim) return FAIL("axis out of range");
    int64_t out[2] = {1, 1};
    for (int i = 0; i < x->ndim; i++) out[i < axis ? 0 : 1] *= x->shape[i];
    set_out(g, n, 0, x->dtype, 2, out, "NC");
    return TS_OK;
  }
  if (!strcmp(op, "Squeeze") || !strcmp(op, "Unsqueeze")) {
    int na = 0;
    const int64_t *axes = gr_attr_ints(n, "axes", &na);
    if (!axes && n->n_inputs > 1 && n->inputs[1] >= 0) {
      axes = const_ints(g, n, 1, &na);
      if (!axes) return set_unknown(g, n), TS_OK;
    }
    int64_t out[TS_MAX_DIMS];
    int k = 0;
    if (!strcmp(op, "Squeeze")) {
      bool drop[TS_MAX_DIMS] = {0};
      for (int i = 0; i < na; i++) {
        int a = norm_axis(axes[i], x->ndim);
        if (a < 0 || x->shape[a] != 1)
          return FAIL("cannot squeeze axis %lld", (long long)axes[i]);
        drop[a] = true;
      }
      for (int i = 0; i < x->ndim; i++)
        if (!(na ? drop[i] : x->shape[i] == 1)) out[k++] = x->shape[i];
    } else {
      int r = x->ndim + na;
      if (!axes || r > TS_MAX_DIMS) return FAIL("bad axes");
      bool ins[TS_MAX_DIMS] = {0};
      for (int i = 0; i < na; i++) {
        int a = norm_axis(axes[i], r);
        if (a < 0 || ins[a]) return FAIL("bad axis %lld", (long long)axes[i]);
        ins[a] = true;
      }
      for (int i = 0, j = 0; i < r; i++) out[k++] = ins[i] ? 1 : x->shape[j++];
    }
    set_out(g, n, 0, x->dtype, k, out, "");
    return TS_OK;
  }
  if (!strcmp(op, "Gather")) {
    const gr_value *idx = in(g, n, 1);
    if (!idx || !ts_dtype_is_int(idx->dtype))
      return FAIL("indices must be integers");
    int axis = norm_axis(gr_attr_int(n, "axis", 0), x->ndim);
    if (axis < 0) return FAIL("axis out of range");
    int r = x->ndim - 1 + idx->ndim;
    if (r > TS_MAX_DIMS) return FAIL("result rank over %d", TS_MAX_DIMS);
    int64_t out[TS_MAX_DIMS];
    int k = 0;
    for (int i = 0; i < axis; i++) out[k++] = x->shape[i];
    for (int i = 0; i < idx->ndim; i++) out[k++] = idx->shape[i];
    for (int i = axis + 1; i < x->ndim; i++) out[k++] = x->shape[i];
    set_out(g, n, 0, x->dtype, k, out, "");
    return TS_OK;
  }
  if (!strcmp(op, "Slice")) return infer_slice(g, n, x, err);
  if (!strcmp(op, "Shape")) {
    int64_t s = gr_attr_int(n, "start", 0), e = gr_attr_int(n, "end", x->ndim);
    if (s < 0) s += x->ndim;
    if (e < 0) e += x->ndim;
    s = s < 0 ? 0 : s > x->ndim ? x->ndim : s;
    e = e < 0 ? 0 : e > x->ndim ? x->ndim : e;
    int64_t len = e > s ? e - s : 0;
    set_out(g, n, 0, TS_INT64, 1, &len, "");
    return TS_OK;
  }
  return FAIL("no shape rule");
}

/* requires: graph inputs with known shapes; maintains: nodes and wiring;
 * breaks: nothing (only value shapes, dtypes and layouts are written). */
int ts_graph_infer_shapes(ts_graph *g, ts_error *err) {
  for (int i = 0; i < g->n_nodes; i++) {
    int rc = gr_infer_node(g, &g->nodes[i], err);
    if (rc) return rc;
  }
  return TS_OK;
}
