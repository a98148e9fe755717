/*
 * dispatch.c — which fused groups a vendor library can run instead of the
 * tuned kernel: a float32 convolution (2-D, NHWC or NCHW, groups, strides,
 * dilations, pads) or matrix product (batched), followed by elementwise
 * operators that oneDNN takes as post-ops (Relu, Clip with constant bounds,
 * Sigmoid, Tanh, Gelu, Add or Mul of a scalar constant, a per-channel or a
 * whole-shape tensor); a Softmax or a LayerNormalization on its own.
 *
 * The answer is a line of text on the group's call node (attribute
 * `vendor`): the operation with its sizes, the places of its operands among
 * the kernel's arguments (the function's parameters, then its output), the
 * layout of the weights and the post-ops in order. The compiled model hands
 * it to libtessera_dnnl (runtime/vendor/dnnl.c) when the task is dispatched
 * to the vendor library. Words (key=value, space separated):
 *
 *   conv layout=nhwc|nchw n c h w o oh ow kh kw sh sw pt pl pb pr dh dw g
 *        wfmt=hwio|oihw|blk [wb=B] wconst=1 src wei [bias] dst [post=...]...
 *   matmul A=DxD.. B=DxD.. C=DxD.. wfmt=kn|blk [wb=B] wconst=0|1 src wei dst
 *          [post=...]   (wconst: B is a constant, reordered once)
 *   (either with dt=u8s8: the quantization pass's ConvInteger or
 *   MatMulInteger, uint8 data and constant int8 weights, then
 *   dq=SCALE:ZP, the dequantization of the int32 accumulator by a scale
 *   and a zero point per channel, then the float post-ops, then optionally
 *   q=SCALE:ZP, the quantization to uint8 that ends the group)
 *   softmax X=DxD.. axis=A src dst     (over one axis of a dense array)
 *   lnorm X=OUTERxLEN eps=E src scale [shift] dst
 *        (LayerNormalization over the trailing LEN elements of each row)
 *   post=relu | post=clip:LO:HI | post=sigmoid | post=tanh | post=gelu_erf
 *   post=gelu_tanh | post=linear:A:B  (A*x + B: Mul or Add of a scalar)
 *   post=add:ARG:c|full | post=mul:ARG:c|full   (c: per channel)
 */
#include "internal.h"

#include <float.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct text {
  char *buf;
  size_t size, len;
  bool full;
} text;

static void put(text *t, const char *fmt, ...) {
  if (t->full) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(t->buf + t->len, t->size - t->len, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= t->size - t->len)
    t->full = true;
  else
    t->len += (size_t)n;
}

static int param_of(const int *params, int n_params, int v) {
  for (int i = 0; i < n_params; i++)
    if (params[i] == v) return i;
  return -1;
}

static bool f32(const ts_graph *g, int v) {
  return v >= 0 && g->values[v].dtype.code == TS_DT_FLOAT &&
         g->values[v].dtype.bits == 32 && g->values[v].dtype.lanes == 1;
}

static bool is_dtype(const ts_graph *g, int v, ts_dtype_code code, int bits) {
  return v >= 0 && g->values[v].dtype.code == code &&
         g->values[v].dtype.bits == bits && g->values[v].dtype.lanes == 1;
}

/* The operands of an anchor: float32 data and weights, or (the
 * quantization pass's ConvInteger / MatMulInteger) uint8 data and int8
 * weights. */
static bool operand_types(const ts_graph *g, const gr_node *n, bool int8) {
  return int8 ? is_dtype(g, n->inputs[0], TS_DT_UINT, 8) &&
                    is_dtype(g, n->inputs[1], TS_DT_INT, 8)
              : f32(g, n->inputs[0]) && f32(g, n->inputs[1]);
}

static void dims(text *t, const char *key, const gr_value *v) {
  put(t, " %s=", key);
  for (int d = 0; d < v->ndim; d++)
    put(t, "%s%lld", d ? "x" : "", (long long)v->shape[d]);
}

/* A scalar float constant's value (ok false when v is not one). */
static double scalar_const(const ts_graph *g, int v, bool *ok) {
  *ok = v >= 0 && gr_is_const(g, v) && f32(g, v) &&
        gr_value_elems(&g->values[v]) == 1;
  return *ok ? *(const float *)gr_const_data(g, v) : 0;
}

static bool describe_conv(const ts_graph *g, const gr_node *n,
                          const int *params, int n_params, bool int8, text *t) {
  const gr_value *x = &g->values[n->inputs[0]], *w = &g->values[n->inputs[1]];
  const gr_value *y = &g->values[n->outputs[0]];
  if (x->ndim != 4 || !operand_types(g, n, int8) ||
      !gr_is_const(g, n->inputs[1]) || (int8 && n->n_inputs > 2))
    return false;
  bool last = gr_node_channels_last(n);
  int64_t B = last ? gr_conv_weight_block(n) : 0;
  int64_t G = gr_attr_int(n, "group", 1);
  if (B && (G != 1 || w->ndim != 5)) return false;
  if (!B && w->ndim != 4) return false;
  int64_t C = last ? x->shape[3] : x->shape[1];
  int64_t H = last ? x->shape[1] : x->shape[2];
  int64_t W = last ? x->shape[2] : x->shape[3];
  int64_t CO = last ? y->shape[3] : y->shape[1];
  int64_t OH = last ? y->shape[1] : y->shape[2];
  int64_t OW = last ? y->shape[2] : y->shape[3];
  int64_t kernel[2], strides[2] = {1, 1}, dil[2] = {1, 1}, pads[4], in_sp[2];
  for (int d = 0; d < 2; d++) {
    kernel[d] = !last ? w->shape[2 + d] : w->shape[(B ? 1 : 0) + d];
    in_sp[d] = d ? W : H;
  }
  int c;
  const int64_t *p;
  if ((p = gr_attr_ints(n, "strides", &c)) && c == 2)
    strides[0] = p[0], strides[1] = p[1];
  if ((p = gr_attr_ints(n, "dilations", &c)) && c == 2)
    dil[0] = p[0], dil[1] = p[1];
  if (gr_resolve_pads(n, 2, in_sp, kernel, strides, dil, pads)) return false;
  /* oneDNN pads with zeros; ConvInteger pads with the data's zero point */
  if (int8 && gr_attr_int(n, "pad_value", 0) != 0 &&
      (pads[0] || pads[1] || pads[2] || pads[3]))
    return false;
  if (G < 1 || C % G || CO % G || (B && CO % B)) return false;
  int src = param_of(params, n_params, n->inputs[0]);
  int wei = param_of(params, n_params, n->inputs[1]);
  int bias = n->n_inputs > 2 && n->inputs[2] >= 0
                 ? param_of(params, n_params, n->inputs[2])
                 : -1;
  if (src < 0 || wei < 0 ||
      (n->n_inputs > 2 && n->inputs[2] >= 0 &&
       (bias < 0 || !f32(g, n->inputs[2]))))
    return false;
  put(t, "conv layout=%s n=%lld c=%lld h=%lld w=%lld o=%lld oh=%lld ow=%lld",
      last ? "nhwc" : "nchw", (long long)x->shape[0], (long long)C,
      (long long)H, (long long)W, (long long)CO, (long long)OH, (long long)OW);
  put(t,
      " kh=%lld kw=%lld sh=%lld sw=%lld pt=%lld pl=%lld pb=%lld pr=%lld "
      "dh=%lld dw=%lld g=%lld",
      (long long)kernel[0], (long long)kernel[1], (long long)strides[0],
      (long long)strides[1], (long long)pads[0], (long long)pads[1],
      (long long)pads[2], (long long)pads[3], (long long)dil[0],
      (long long)dil[1], (long long)G);
  put(t, " wfmt=%s", !last ? "oihw" : B ? "blk" : "hwio");
  if (B) put(t, " wb=%lld", (long long)B);
  put(t, " wconst=1 src=%d wei=%d", src, wei);
  if (bias >= 0) put(t, " bias=%d", bias);
  if (int8) put(t, " dt=u8s8");
  return true;
}

static bool describe_matmul(const ts_graph *g, const gr_node *n,
                            const int *params, int n_params, bool int8,
                            text *t) {
  const gr_value *a = &g->values[n->inputs[0]], *b = &g->values[n->inputs[1]];
  const gr_value *y = &g->values[n->outputs[0]];
  int64_t B = gr_matmul_weight_block(n);
  if (a->ndim < 2 || b->ndim < 2 || y->ndim < 2 || y->ndim > 8 ||
      a->ndim > y->ndim || b->ndim - (B ? 1 : 0) > y->ndim ||
      !operand_types(g, n, int8) ||
      ((B || int8) && !gr_is_const(g, n->inputs[1])) ||
      (int8 && n->n_inputs > 2))
    return false;
  int src = param_of(params, n_params, n->inputs[0]);
  int wei = param_of(params, n_params, n->inputs[1]);
  if (src < 0 || wei < 0) return false;
  put(t, "matmul");
  dims(t, "A", a);
  dims(t, "B", b);
  dims(t, "C", y);
  put(t, " wfmt=%s", B ? "blk" : "kn");
  if (B) put(t, " wb=%lld", (long long)B);
  put(t, " wconst=%d src=%d wei=%d", gr_is_const(g, n->inputs[1]) ? 1 : 0, src,
      wei);
  if (int8) put(t, " dt=u8s8");
  return true;
}

/* An int8 anchor's dequantization (its int32 accumulator minus a zero
 * point per channel, times a scale per channel, along the channel axis) or
 * the quantization that ends the group (a scalar scale and uint8 zero
 * point). */
static bool describe_dequant(const ts_graph *g, const gr_node *m, int cur,
                             int cax, const int *params, int n_params,
                             text *t) {
  if (strcmp(m->op, "DequantizeLinear") || m->n_inputs != 3 ||
      m->inputs[0] != cur || !f32(g, m->outputs[0]) ||
      gr_attr_int(m, "axis", 1) != cax)
    return false;
  int64_t C = g->values[cur].shape[cax];
  int sc = param_of(params, n_params, m->inputs[1]);
  int zp = param_of(params, n_params, m->inputs[2]);
  if (sc < 0 || zp < 0 || !f32(g, m->inputs[1]) ||
      !is_dtype(g, m->inputs[2], TS_DT_INT, 32) ||
      gr_value_elems(&g->values[m->inputs[1]]) != C ||
      gr_value_elems(&g->values[m->inputs[2]]) != C)
    return false;
  put(t, " dq=%d:%d", sc, zp);
  return true;
}

static bool describe_quant(const ts_graph *g, const gr_node *m, int cur,
                           const int *params, int n_params, text *t) {
  if (strcmp(m->op, "QuantizeLinear") || m->n_inputs != 3 ||
      m->inputs[0] != cur || !is_dtype(g, m->outputs[0], TS_DT_UINT, 8))
    return false;
  int sc = param_of(params, n_params, m->inputs[1]);
  int zp = param_of(params, n_params, m->inputs[2]);
  if (sc < 0 || zp < 0 || !f32(g, m->inputs[1]) ||
      !is_dtype(g, m->inputs[2], TS_DT_UINT, 8) ||
      gr_value_elems(&g->values[m->inputs[1]]) != 1 ||
      gr_value_elems(&g->values[m->inputs[2]]) != 1)
    return false;
  put(t, " q=%d:%d", sc, zp);
  return true;
}

/* A float32 Softmax over one axis. */
static bool describe_softmax(const ts_graph *g, const gr_node *n,
                             const int *params, int n_params, text *t) {
  const gr_value *x = &g->values[n->inputs[0]];
  int64_t axis = gr_attr_int(n, "axis", -1);
  if (axis < 0) axis += x->ndim;
  if (x->ndim < 1 || x->ndim > 8 || axis < 0 || axis >= x->ndim ||
      !f32(g, n->inputs[0]) || n->n_outputs != 1 || !f32(g, n->outputs[0]))
    return false;
  int src = param_of(params, n_params, n->inputs[0]);
  if (src < 0) return false;
  put(t, "softmax");
  dims(t, "X", x);
  put(t, " axis=%lld src=%d", (long long)axis, src);
  return true;
}

/* A float32 LayerNormalization (its one output, Y) as rows of the
 * elements from its axis on. */
static bool describe_lnorm(const ts_graph *g, const gr_node *n,
                           const int *params, int n_params, text *t) {
  const gr_value *x = &g->values[n->inputs[0]];
  int64_t axis = gr_attr_int(n, "axis", -1);
  if (axis < 0) axis += x->ndim;
  bool has_b = n->n_inputs > 2 && n->inputs[2] >= 0;
  if (x->ndim < 1 || axis < 0 || axis >= x->ndim || n->n_outputs != 1 ||
      !f32(g, n->inputs[0]) || !f32(g, n->inputs[1]) ||
      (has_b && !f32(g, n->inputs[2])) || !f32(g, n->outputs[0]))
    return false;
  int64_t outer = 1, len = 1;
  for (int d = 0; d < x->ndim; d++) *(d < axis ? &outer : &len) *= x->shape[d];
  if (gr_value_elems(&g->values[n->inputs[1]]) != len ||
      (has_b && gr_value_elems(&g->values[n->inputs[2]]) != len))
    return false;
  int src = param_of(params, n_params, n->inputs[0]);
  int scale = param_of(params, n_params, n->inputs[1]);
  int shift = has_b ? param_of(params, n_params, n->inputs[2]) : -1;
  if (src < 0 || scale < 0 || (has_b && shift < 0)) return false;
  put(t, "lnorm X=%lldx%lld eps=%.9g src=%d scale=%d", (long long)outer,
      (long long)len, gr_attr_float(n, "epsilon", 1e-5), src, scale);
  if (shift >= 0) put(t, " shift=%d", shift);
  return true;
}

/* One elementwise member after the anchor; cur is the chain value, cax the
 * channel axis of the output. */
static bool describe_post(const ts_graph *g, const gr_node *m, int cur, int cax,
                          const int *params, int n_params, text *t) {
  const char *op = m->op;
  if (!strcmp(op, "Relu") || !strcmp(op, "Sigmoid") || !strcmp(op, "Tanh")) {
    put(t, " post=%s",
        !strcmp(op, "Relu")      ? "relu"
        : !strcmp(op, "Sigmoid") ? "sigmoid"
                                 : "tanh");
    return m->inputs[0] == cur;
  }
  if (!strcmp(op, "Clip")) {
    if (m->inputs[0] != cur) return false;
    double lo = -FLT_MAX, hi = FLT_MAX;
    bool ok = true;
    if (m->n_inputs > 1 && m->inputs[1] >= 0)
      lo = scalar_const(g, m->inputs[1], &ok);
    if (ok && m->n_inputs > 2 && m->inputs[2] >= 0)
      hi = scalar_const(g, m->inputs[2], &ok);
    if (!ok) return false;
    put(t, " post=clip:%.9g:%.9g", lo, hi);
    return true;
  }
  if (!strcmp(op, "Gelu")) {
    bool tanh = !strcmp(gr_attr_string(m, "approximate", "none"), "tanh");
    put(t, " post=%s", tanh ? "gelu_tanh" : "gelu_erf");
    return m->inputs[0] == cur;
  }
  if (strcmp(op, "Add") && strcmp(op, "Mul")) return false;
  if (m->n_inputs != 2) return false;
  int other = m->inputs[0] == cur ? m->inputs[1] : m->inputs[0];
  bool scalar;
  double k = scalar_const(g, other, &scalar);
  if (scalar && other != cur) { /* a*x + b with a constant */
    put(t, " post=linear:%.9g:%.9g", !strcmp(op, "Mul") ? k : 1.0,
        !strcmp(op, "Add") ? k : 0.0);
    return true;
  }
  if (other == cur || (m->inputs[0] != cur && m->inputs[1] != cur) ||
      !f32(g, other))
    return false;
  const gr_value *o = &g->values[other], *y = &g->values[cur];
  if (o->ndim > y->ndim) return false;
  bool full = o->ndim == y->ndim, chan = true;
  for (int d = 0; d < y->ndim; d++) {
    int od = d - (y->ndim - o->ndim);
    int64_t e = od >= 0 ? o->shape[od] : 1;
    if (e != y->shape[d]) full = false;
    if (e != (d == cax ? y->shape[d] : 1)) chan = false;
  }
  int arg = param_of(params, n_params, other);
  if ((!full && !chan) || arg < 0) return false;
  put(t, " post=%s:%d:%s", !strcmp(op, "Add") ? "add" : "mul", arg,
      full ? "full" : "c");
  return true;
}

bool gr_vendor_describe(const ts_graph *g, const int *members, int n,
                        const int *params, int n_params, char *buf,
                        size_t size) {
  text t = {buf, size, 0, false};
  if (n < 1 || size == 0) return false;
  buf[0] = 0;
  const gr_node *a = &g->nodes[members[0]];
  bool ok, nchw = false;
  bool int8 = !strcmp(a->op, "ConvInteger") || !strcmp(a->op, "MatMulInteger");
  if (!strcmp(a->op, "Conv") || !strcmp(a->op, "ConvInteger")) {
    ok = describe_conv(g, a, params, n_params, int8, &t);
    nchw = !gr_node_channels_last(a);
  } else if (!strcmp(a->op, "MatMul") || !strcmp(a->op, "MatMulInteger")) {
    ok = describe_matmul(g, a, params, n_params, int8, &t);
  } else if ((!strcmp(a->op, "Softmax") ||
              !strcmp(a->op, "LayerNormalization")) &&
             n == 1) { /* no post-ops: oneDNN 2.6 takes none there */
    ok = !strcmp(a->op, "Softmax")
             ? describe_softmax(g, a, params, n_params, &t)
             : describe_lnorm(g, a, params, n_params, &t);
  } else {
    return false;
  }
  int cur = a->outputs[0];
  int cax = nchw ? 1 : g->values[cur].ndim - 1;
  if (n - 1 > GR_VENDOR_MAX_POST) return false;
  int first = 1;
  if (int8) { /* the accumulator is dequantized first, always */
    ok = ok && n >= 2 && g->nodes[members[1]].n_outputs == 1 &&
         describe_dequant(g, &g->nodes[members[1]], cur, cax, params, n_params,
                          &t);
    if (ok) cur = g->nodes[members[1]].outputs[0];
    first = 2;
  }
  for (int i = first; ok && i < n; i++) {
    const gr_node *m = &g->nodes[members[i]];
    if (int8 && i == n - 1 && !strcmp(m->op, "QuantizeLinear")) {
      ok = m->n_outputs == 1 && describe_quant(g, m, cur, params, n_params, &t);
    } else {
      ok = m->n_outputs == 1 && f32(g, m->outputs[0]) &&
           describe_post(g, m, cur, cax, params, n_params, &t);
    }
    cur = m->outputs[0];
  }
  if (!ok) return false;
  put(&t, " dst=%d", n_params);
  return !t.full;
}
