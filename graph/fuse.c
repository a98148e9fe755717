/*
 * fuse.c — operator fusion ("operator stacking"): groups of nodes become one
 * PrimFunc each, built with the TE builder, and the group becomes one
 * destination-passing call of it. A group starts at an anchor — a
 * convolution (NCHW and its 1-D/3-D forms; any pads, strides, dilation,
 * groups, its bias), a matmul (batched, broadcast, a vector operand) or an
 * elementwise operator — and takes in the chain of elementwise and
 * broadcast operators that consume its result (bias, BatchNorm's scale and
 * shift, residual Add, Relu, Clip, Sigmoid, Gelu's Erf arithmetic, ...), as
 * long as each intermediate value has that single use; a
 * ReduceMean/ReduceSum/ReduceMax in the chain is fused with its elementwise
 * producers (a reduction stage, then the division for a mean).
 * Scalar constants are inlined as immediates; other operands (weights,
 * biases, the residual input) become parameters. The function's structural
 * hash is the group's task identity: identical layers share one task.
 * Transposed convolution (2-D NCHW, as a gather over the zero-dilated
 * input), pooling (1 to 3 spatial dimensions), softmax and layer
 * normalisation (fuse_rows.c) are library operators: each is a group of its own
 * (an anchor that can take an elementwise epilogue). So are the data-movement
 * operators — Gather, Cast, Concat, Slice, Transpose, any dtype — built in
 * fuse_move.c (BERT's attention mask Cast -> Sub -> Mul is one group).
 * An elementwise node whose output or an input is not float32 computes in
 * float64 and rounds once to its output dtype (the reference kernels'
 * rule). After fusion the graph holds calls and Reshapes (views); a node
 * fusion cannot express (a conv, matmul or pool on other dtypes than
 * float32, a 1-D/3-D ConvTranspose, ...) stays a graph operator run by the
 * reference kernels.
 */
#include "fuse_move.h"
#include "tuner/tuner.h"
#include "winograd.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MEMBERS GR_FUSE_MAX_MEMBERS
#define MAX_PARAMS GR_FUSE_MAX_PARAMS

static const char *const elementwise_ops[] = {"Add",
                                              "Sub",
                                              "Mul",
                                              "Div",
                                              "Pow",
                                              "Relu",
                                              "Clip",
                                              "Sigmoid",
                                              "Tanh",
                                              "Erf",
                                              "Sqrt",
                                              "Exp",
                                              "Neg",
                                              "Abs",
                                              "Gelu",
                                              "QuantizeLinear",
                                              "DequantizeLinear",
                                              "PadMask",
                                              NULL};

bool gr_is_elementwise_op(const char *op) {
  if (gr_ew_lookup(op)) return true;
  for (int i = 0; elementwise_ops[i]; i++)
    if (!strcmp(elementwise_ops[i], op)) return true;
  return false;
}

static bool is_reduce(const gr_node *n) {
  return !strcmp(n->op, "ReduceMean") || !strcmp(n->op, "ReduceSum") ||
         !strcmp(n->op, "ReduceMax");
}

static bool f32_value(const ts_graph *g, int v) {
  return v >= 0 && ts_dtype_eq(g->values[v].dtype, TS_FLOAT32) &&
         g->values[v].ndim >= 0;
}

/* A numeric (not bool) value of known rank. */
static bool num_value(const ts_graph *g, int v) {
  if (v < 0 || g->values[v].ndim < 0) return false;
  ts_dtype t = g->values[v].dtype;
  return t.lanes == 1 && (ts_dtype_is_float(t) || ts_dtype_is_int(t));
}

/* A value of known rank whose elements are scalars (numbers or bool). */
static bool scalar_value(const ts_graph *g, int v) {
  return v >= 0 && g->values[v].ndim >= 0 && g->values[v].dtype.lanes == 1;
}

/* A one-element numeric constant (inlined as an immediate). */
static bool scalar_num_const(const ts_graph *g, int v) {
  return gr_is_const(g, v) && gr_value_elems(&g->values[v]) == 1 &&
         g->values[v].ndim <= 1 && num_value(g, v);
}

/* Whether an elementwise node computes in float32 (its output and every
 * input float32); otherwise it computes in float64 and rounds once to its
 * output dtype, as the reference kernels do. */
/* float32 when every operand and the result are (bool operands that only
 * select, and the bool result of a comparison of float32 operands, aside) */
static bool computes_f32(const ts_graph *g, const gr_node *n) {
  const gr_ew_op *ew = gr_ew_lookup(n->op);
  bool bool_out = ew && ts_dtype_eq(g->values[n->outputs[0]].dtype, TS_BOOL);
  if (!bool_out && !f32_value(g, n->outputs[0])) return false;
  int counted = 0;
  for (int k = 0; k < n->n_inputs; k++) {
    if (n->inputs[k] < 0 || (ew && gr_ew_bool_operand(ew, k))) continue;
    if (!f32_value(g, n->inputs[k])) return false;
    counted++;
  }
  return !bool_out || counted > 0;
}

/* The reduction axes of a ReduceMean/ReduceSum/ReduceMax: the attribute
 * (opsets before 18 for ReduceMean) or a constant second input; every axis
 * when neither gives any (unless noop_with_empty_axes); NULL otherwise. */
static const int64_t *reduce_axes(const ts_graph *g, const gr_node *n,
                                  int *count) {
  static const int64_t all_axes[TS_MAX_DIMS] = {0, 1, 2, 3, 4, 5, 6, 7};
  const int64_t *axes = gr_attr_ints(n, "axes", count);
  if (axes && *count > 0) return axes;
  int v = n->n_inputs > 1 ? n->inputs[1] : -1;
  if (v >= 0) {
    if (!gr_is_const(g, v) || !ts_dtype_eq(g->values[v].dtype, TS_INT64) ||
        g->values[v].ndim != 1)
      return NULL;
    *count = (int)g->values[v].shape[0];
    if (*count > 0) return gr_const_data(g, v);
  }
  if (gr_attr_int(n, "noop_with_empty_axes", 0)) return NULL;
  *count = g->values[n->inputs[0]].ndim;
  return *count > 0 ? all_axes : NULL;
}

/* A QuantizeLinear/DequantizeLinear scale or zero point the kernel can
 * load as a broadcast operand: a constant that is one value, or whose
 * per-axis vector lies along the last axis, or of rank 2 or more (then it
 * broadcasts as it is). */
static bool quant_param_ok(const ts_graph *g, const gr_node *n, int v) {
  const gr_value *p = &g->values[v], *x = &g->values[n->inputs[0]];
  if (!gr_is_const(g, v)) return false;
  if (gr_value_elems(p) == 1 || p->ndim >= 2) return true;
  int64_t axis = gr_attr_int(n, "axis", 1);
  if (axis < 0) axis += x->ndim;
  return p->ndim == 1 && axis == x->ndim - 1;
}

/* Whether node n can be a member whose chain value (the result so far) is
 * `cur` (-1 for an anchor). */
static bool fusable_elementwise(const ts_graph *g, const gr_node *n, int cur) {
  if (n->kind != TS_GRAPH_OP || n->n_outputs != 1 ||
      !gr_is_elementwise_op(n->op))
    return false;
  const gr_value *out = &g->values[n->outputs[0]];
  /* comparisons, logic and Where give or take bool values */
  bool ew = gr_ew_lookup(n->op) != NULL;
  if (!(ew ? scalar_value(g, n->outputs[0]) : num_value(g, n->outputs[0])))
    return false;
  if (cur >= 0) {
    const gr_value *c = &g->values[cur];
    if (c->ndim != out->ndim ||
        memcmp(c->shape, out->shape, sizeof(int64_t) * (size_t)out->ndim))
      return false;
  }
  for (int k = 0; k < n->n_inputs; k++) {
    int v = n->inputs[k];
    if (v < 0) continue;
    if (!(ew ? scalar_value(g, v) : num_value(g, v))) return false;
    if (!strcmp(n->op, "Clip") && k > 0 && !scalar_num_const(g, v))
      return false;
    if (gr_op_is_quant(n->op) && k > 0 && !quant_param_ok(g, n, v))
      return false;
    const gr_value *x = &g->values[v];
    if (x->ndim > out->ndim) return false;
  }
  return true;
}

static bool fusable_reduce(const ts_graph *g, const gr_node *n) {
  int na = 0;
  return n->kind == TS_GRAPH_OP && is_reduce(n) && n->n_outputs == 1 &&
         n->n_inputs >= 1 && f32_value(g, n->inputs[0]) &&
         f32_value(g, n->outputs[0]) && reduce_axes(g, n, &na) && na > 0;
}

/* Library operators built as their own group (and anchors for an
 * elementwise epilogue). */
static bool is_library(const ts_graph *g, const gr_node *n) {
  if (n->kind != TS_GRAPH_OP || n->n_outputs != 1 ||
      !f32_value(g, n->inputs[0]) || !f32_value(g, n->outputs[0]))
    return false;
  int rank = g->values[n->inputs[0]].ndim;
  bool window = rank >= 3 && rank <= 5; /* 1 to 3 spatial dimensions */
  if (!strcmp(n->op, "MaxPool") || !strcmp(n->op, "AveragePool"))
    return window &&
           strcmp(gr_attr_string(n, "auto_pad", "NOTSET"), "SAME_LOWER") &&
           (!strcmp(n->op, "MaxPool") || !gr_attr_find(n, "dilations"));
  if (!strcmp(n->op, "GlobalAveragePool")) return window;
  if (!strcmp(n->op, "ConvTranspose"))
    return rank == 4 && f32_value(g, n->inputs[1]) &&
           (n->n_inputs < 3 || n->inputs[2] < 0 || f32_value(g, n->inputs[2]));
  if (!strcmp(n->op, "Softmax")) return rank >= 1;
  if (!strcmp(n->op, "WinogradInput")) return rank == 4;
  if (!strcmp(n->op, "WinogradOutput"))
    return rank == 3 && g->values[n->outputs[0]].ndim == 4 &&
           (n->n_inputs < 2 || n->inputs[1] < 0 || f32_value(g, n->inputs[1]));
  if (!strcmp(n->op, "LayerNormalization"))
    return rank >= 1 && f32_value(g, n->inputs[1]) &&
           (n->n_inputs < 3 || n->inputs[2] < 0 || f32_value(g, n->inputs[2]));
  return false;
}

/* An int8 product (the quantization pass's): 8-bit operands, no ONNX
 * zero-point inputs (the pass folds them into the dequantization), a conv
 * of 2 spatial dimensions. */
static bool integer_anchor(const ts_graph *g, const gr_node *n) {
  if (n->n_inputs != 2 || n->inputs[0] < 0 || n->inputs[1] < 0) return false;
  for (int k = 0; k < 2; k++) {
    ts_dtype t = g->values[n->inputs[k]].dtype;
    if (t.bits != 8 || t.lanes != 1 || g->values[n->inputs[k]].ndim < 1)
      return false;
  }
  if (!ts_dtype_eq(g->values[n->outputs[0]].dtype, TS_INT32)) return false;
  if (!strcmp(n->op, "MatMulInteger"))
    return g->values[n->inputs[0]].ndim >= 2 &&
           g->values[n->inputs[1]].ndim >= 2;
  return g->values[n->inputs[0]].ndim == 4 &&
         g->values[n->inputs[1]].ndim == 4 + (gr_conv_weight_block(n) != 0);
}

static bool is_anchor(const ts_graph *g, const gr_node *n) {
  if (n->kind != TS_GRAPH_OP || n->n_outputs != 1) return false;
  if (is_library(g, n) || gr_fuse_is_move(g, n)) return true;
  if (!strcmp(n->op, "Conv")) /* 1 to 3 spatial dimensions */
    return f32_value(g, n->inputs[0]) && g->values[n->inputs[0]].ndim >= 3 &&
           g->values[n->inputs[0]].ndim <= 5 && f32_value(g, n->inputs[1]) &&
           g->values[n->inputs[1]].ndim ==
               g->values[n->inputs[0]].ndim + (gr_conv_weight_block(n) != 0) &&
           (n->n_inputs < 3 || n->inputs[2] < 0 || f32_value(g, n->inputs[2]));
  if (!strcmp(n->op, "ConvInteger") || !strcmp(n->op, "MatMulInteger"))
    return integer_anchor(g, n);
  if (!strcmp(n->op, "MatMul")) /* a vector operand too; not vector·vector */
    return f32_value(g, n->inputs[0]) && f32_value(g, n->inputs[1]) &&
           g->values[n->inputs[0]].ndim >= 1 &&
           g->values[n->inputs[1]].ndim >= 1 && f32_value(g, n->outputs[0]) &&
           g->values[n->outputs[0]].ndim >= 1;
  return fusable_elementwise(g, n, -1) || fusable_reduce(g, n);
}

/* ---- building the group's function ---- */

typedef gr_fuse_builder builder;

/* shape (rank *nd) with its last axis, the channels, split as [C/B, B]
 * (see gr_fuse_builder); false and b->failed when it is not C long. */
static bool split_shape(builder *b, int64_t *shape, int *nd) {
  if (*nd < 1 || *nd >= TS_MAX_DIMS || shape[*nd - 1] != b->split_c) {
    b->failed = true;
    return false;
  }
  shape[*nd - 1] = b->split_c / b->split_b;
  shape[(*nd)++] = b->split_b;
  return true;
}

/* shape (rank *nd, aligned to the right against the group's rank
 * merge_rank) with the leading axes merged (see gr_fuse_builder):
 * [lead..., rest] becomes [M, rest]; ones on every leading axis present
 * are dropped (a broadcast operand); false and b->failed otherwise. */
/* The same with the merged axes starting at b->merge_at > 0 (a blocked
 * pointwise conv's H, W inside [N, C/B, H, W, B]): present, they become
 * one axis (their product, or 1 when all are 1: a broadcast operand);
 * before the operand's first axis they broadcast as they are. */
static bool merge_middle(builder *b, int64_t *shape, int *nd) {
  int ml = b->merge_lead, r = *nd, off = b->merge_rank - r;
  int first = b->merge_at - off, last = first + ml;
  if (off < 0) goto fail;
  if (last <= 0) return true;
  if (first < 0) { /* partly present: only ones, dropped */
    for (int d = 0; d < last; d++)
      if (shape[d] != 1) goto fail;
    memmove(shape, shape + last, sizeof(int64_t) * (size_t)(r - last));
    *nd = r - last;
    return true;
  }
  int64_t m = 1;
  bool ones = true;
  for (int d = first; d < last; d++) {
    m *= shape[d];
    ones = ones && shape[d] == 1;
  }
  if (!ones && memcmp(shape + first, b->lead, sizeof(int64_t) * (size_t)ml))
    goto fail;
  shape[first] = m;
  memmove(shape + first + 1, shape + last,
          sizeof(int64_t) * (size_t)(r - last));
  *nd = r - ml + 1;
  return true;
fail:
  b->failed = true;
  return false;
}

static bool merge_shape(builder *b, int64_t *shape, int *nd) {
  if (b->merge_at > 0) return merge_middle(b, shape, nd);
  int ml = b->merge_lead, r = *nd, off = b->merge_rank - r;
  if (off == 0 && r > ml &&
      !memcmp(shape, b->lead, sizeof(int64_t) * (size_t)ml)) {
    int64_t m = 1;
    for (int d = 0; d < ml; d++) m *= shape[d];
    shape[0] = m;
    memmove(shape + 1, shape + ml, sizeof(int64_t) * (size_t)(r - ml));
    *nd = r - ml + 1;
    return true;
  }
  int n_lead = ml - off > 0 ? ml - off : 0; /* leading axes present */
  if (off < 0) n_lead = r; /* a higher rank than the group's: refuse */
  for (int d = 0; d < n_lead; d++)
    if (shape[d] != 1 || off < 0) {
      b->failed = true;
      return false;
    }
  memmove(shape, shape + n_lead, sizeof(int64_t) * (size_t)(r - n_lead));
  *nd = r - n_lead;
  return true;
}

/* shape viewed as the group's stages see it: merged, then split. */
static bool view_shape(builder *b, int64_t *shape, int *nd, bool split) {
  if (b->merge_lead && !merge_shape(b, shape, nd)) return false;
  return !split || split_shape(b, shape, nd);
}

/* The parameter bound to value v with the given shape (the same bytes
 * viewed; added on first use). */
ts_buffer *gr_fuse_param_shaped(builder *b, int v, const int64_t *shape,
                                int nd) {
  for (int i = 0; i < b->n_params; i++) {
    const ts_buffer *p = b->bufs[i];
    if (b->values[i] == v && ts_buffer_ndim(p) == nd &&
        !memcmp(ts_buffer_shape(p), shape, sizeof(int64_t) * (size_t)nd))
      return b->bufs[i];
  }
  if (b->n_params == MAX_PARAMS - 1) {
    b->failed = true;
    return NULL;
  }
  char name[16];
  snprintf(name, sizeof name, "p%d", b->n_params);
  ts_buffer *buf =
      ts_te_placeholder(b->te, name, b->g->values[v].dtype, shape, nd);
  if (!buf) { /* out of memory: the group stays graph operators */
    b->failed = true;
    return NULL;
  }
  b->values[b->n_params] = v;
  b->bufs[b->n_params++] = buf;
  return buf;
}

/* The parameter bound to value v, viewed as the group's stages see it
 * (merged leading axes; with split, its last axis as [C/B, B]). */
ts_buffer *gr_fuse_param_as(builder *b, int v, bool split) {
  const gr_value *x = &b->g->values[v];
  int64_t shape[TS_MAX_DIMS];
  int nd = x->ndim;
  memcpy(shape, x->shape, sizeof(int64_t) * (size_t)nd);
  if (!view_shape(b, shape, &nd, split)) return NULL;
  return gr_fuse_param_shaped(b, v, shape, nd);
}

ts_buffer *gr_fuse_param(builder *b, int v) {
  return gr_fuse_param_as(b, v, false);
}

const char *gr_fuse_stage_name(builder *b, const char *op) {
  char base[32];
  size_t k = 0;
  for (const char *p = op; *p && k < sizeof base - 1; p++)
    base[k++] = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
  base[k] = 0;
  return ts_arena_printf(b->a, "%s_%d", base, b->stage_no++);
}

/* Loads buffer `buf` of shape (nd, shape) broadcast against output axes. */
ts_expr *gr_fuse_bcast_load(builder *b, ts_buffer *buf, ts_expr **axes,
                            int n_axes) {
  int nd = ts_buffer_ndim(buf);
  ts_expr *idx[TS_MAX_DIMS];
  for (int d = 0; d < nd; d++)
    idx[d] =
        ts_buffer_dim(buf, d) == 1 ? ts_index(b->a, 0) : axes[d + n_axes - nd];
  return ts_te_load(b->te, buf, idx, nd);
}

/* The value of operand v at output axes: the chain stage, an inlined
 * scalar constant or a broadcast parameter load. */
static ts_expr *operand(builder *b, int v, int cur, ts_buffer *cur_buf,
                        ts_expr **axes, int n_axes, ts_dtype ct) {
  if (v == cur)
    return ts_cast(b->a, ct, gr_fuse_bcast_load(b, cur_buf, axes, n_axes));
  for (int i = 0; i < b->n_inner; i++)
    if (b->inner_v[i] == v)
      return ts_cast(b->a, ct,
                     gr_fuse_bcast_load(b, b->inner_buf[i], axes, n_axes));
  if (scalar_num_const(b->g, v) && !b->no_inline) {
    double c = ts_host_get(gr_const_data(b->g, v), b->g->values[v].dtype, 0);
    return ts_dtype_is_float(ct) ? ts_float(b->a, ct, c)
                                 : ts_int(b->a, ct, (int64_t)c);
  }
  const gr_value *x = &b->g->values[v];
  bool split = false;
  if (b->split_b) {
    /* channel-split axes: a value indexed by the channel axis is viewed
     * split; one of all ones broadcasts as it is; anything else would be
     * misaligned */
    split = x->ndim >= 1 && x->shape[x->ndim - 1] == b->split_c;
    if (!split && gr_value_elems(x) != 1) {
      b->failed = true;
      return ts_float(b->a, ct, 0);
    }
  }
  ts_buffer *p = gr_fuse_param_as(b, v, split);
  if (!p) return ts_float(b->a, ct, 0);
  return ts_cast(b->a, ct, gr_fuse_bcast_load(b, p, axes, n_axes));
}

/* Node n's value from its operands, computed in dtype ct (float32 or
 * float64); int_out: the output is an integer (division truncates and a
 * division by zero gives 0, as in the reference kernels). */
static ts_expr *apply(builder *b, const gr_node *n, ts_expr **in, ts_dtype ct,
                      bool int_out) {
  ts_arena *a = b->a;
  const char *op = n->op;
  ts_expr *x = in[0];
  if (!strcmp(op, "Add")) return ts_add(a, x, in[1]);
  if (!strcmp(op, "Sub")) return ts_sub(a, x, in[1]);
  if (!strcmp(op, "Mul")) return ts_mul(a, x, in[1]);
  if (!strcmp(op, "Div") && int_out) {
    ts_expr *zero = ts_eq(a, in[1], ts_float(a, ct, 0));
    ts_expr *q = ts_div(a, x, ts_select(a, zero, ts_float(a, ct, 1), in[1]));
    return ts_select(a, zero, ts_float(a, ct, 0), q);
  }
  if (!strcmp(op, "Div")) return ts_div(a, x, in[1]);
  if (!strcmp(op, "Pow")) {
    ts_expr *args[2] = {x, in[1]};
    return ts_call(a, ct, "pow", args, 2);
  }
  if (!strcmp(op, "PadMask")) /* x where its position < the length */
    return ts_select(a, ts_lt(a, in[1], in[2]), x,
                     ts_float(a, ct, gr_attr_float(n, "fill", 0)));
  if (!strcmp(op, "Relu")) return ts_max(a, x, ts_float(a, ct, 0));
  if (!strcmp(op, "Neg")) return ts_sub(a, ts_float(a, ct, 0), x);
  if (!strcmp(op, "Clip")) {
    if (n->n_inputs > 1 && in[1]) x = ts_max(a, x, in[1]);
    if (n->n_inputs > 2 && in[2]) x = ts_min(a, x, in[2]);
    return x;
  }
  if (!strcmp(op, "Gelu") &&
      !strcmp(gr_attr_string(n, "approximate", "none"), "tanh")) {
    /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
    ts_expr *x3 = ts_mul(a, ts_mul(a, x, x), x);
    ts_expr *t = ts_mul(a, ts_float(a, ct, 0.79788456080286535588),
                        ts_add(a, x, ts_mul(a, ts_float(a, ct, 0.044715), x3)));
    ts_expr *th = ts_call(a, ct, "tanh", &t, 1);
    return ts_mul(a, ts_mul(a, x, ts_float(a, ct, 0.5)),
                  ts_add(a, th, ts_float(a, ct, 1.0)));
  }
  if (!strcmp(op, "Gelu")) {
    ts_expr *t = ts_mul(a, x, ts_float(a, ct, 0.70710678118654752));
    ts_expr *e = ts_call(a, ct, "erf", &t, 1);
    return ts_mul(a, ts_mul(a, x, ts_float(a, ct, 0.5)),
                  ts_add(a, e, ts_float(a, ct, 1.0)));
  }
  const gr_ew_op *ew = gr_ew_lookup(op);
  if (ew) {
    int k = 0;
    while (k < n->n_inputs && k < 8 && in[k]) k++;
    return gr_ew_tir(ew, a, n, in, k, ct);
  }
  static const char *const math[][2] = {
      {"Sigmoid", "sigmoid"}, {"Tanh", "tanh"}, {"Erf", "erf"},
      {"Sqrt", "sqrt"},       {"Exp", "exp"},   {"Abs", "abs"}};
  for (size_t i = 0; i < sizeof math / sizeof math[0]; i++)
    if (!strcmp(op, math[i][0])) return ts_call(a, ct, math[i][1], &x, 1);
  b->failed = true;
  return x;
}

/* QuantizeLinear: clamp(round_half_even(x / scale) + zero point) in
 * float32;
 * DequantizeLinear: (x - zero point) in int32, then times the scale in
 * float32. */
static ts_expr *quant_value(builder *b, const gr_node *n, int cur,
                            ts_buffer *cur_buf, ts_expr **axes, int nd) {
  ts_arena *a = b->a;
  const ts_graph *g = b->g;
  int s = n->inputs[1], z = n->n_inputs > 2 ? n->inputs[2] : -1;
  b->no_inline = true; /* scales and zero points: parameters */
  if (!strcmp(n->op, "DequantizeLinear")) {
    ts_expr *x = operand(b, n->inputs[0], cur, cur_buf, axes, nd, TS_INT32);
    if (z >= 0)
      x = ts_sub(a, x, operand(b, z, cur, cur_buf, axes, nd, TS_INT32));
    ts_expr *r = ts_mul(a, ts_cast(a, TS_FLOAT32, x),
                        operand(b, s, cur, cur_buf, axes, nd, TS_FLOAT32));
    b->no_inline = false;
    return r;
  }
  ts_expr *x = operand(b, n->inputs[0], cur, cur_buf, axes, nd, TS_FLOAT32);
  x = ts_div(a, x, operand(b, s, cur, cur_buf, axes, nd, TS_FLOAT32));
  x = ts_call(a, TS_FLOAT32, "round", &x, 1);
  if (z >= 0)
    x = ts_add(a, x, operand(b, z, cur, cur_buf, axes, nd, TS_FLOAT32));
  bool sign = g->values[n->outputs[0]].dtype.code == TS_DT_INT;
  x = ts_max(a, x, ts_float(a, TS_FLOAT32, sign ? -128 : 0));
  b->no_inline = false;
  return ts_min(a, x, ts_float(a, TS_FLOAT32, sign ? 127 : 255));
}

static ts_buffer *build_elementwise(builder *b, const gr_node *n, int cur,
                                    ts_buffer *cur_buf) {
  const gr_value *out = &b->g->values[n->outputs[0]];
  ts_dtype ct = computes_f32(b->g, n) ? TS_FLOAT32 : TS_FLOAT64;
  int64_t shape[TS_MAX_DIMS];
  int nd = out->ndim;
  memcpy(shape, out->shape, sizeof(int64_t) * (size_t)nd);
  if (!view_shape(b, shape, &nd, b->split_b != 0)) return NULL;
  ts_te_stage *st = ts_te_compute(b->te, gr_fuse_stage_name(b, n->op),
                                  out->dtype, shape, nd, NULL);
  ts_expr *axes[TS_MAX_DIMS], *in[8] = {0};
  for (int d = 0; d < nd; d++) axes[d] = ts_te_axis(st, d);
  if (gr_op_is_quant(n->op))
    return ts_te_set_value(
        st,
        ts_cast(b->a, out->dtype, quant_value(b, n, cur, cur_buf, axes, nd)));
  for (int k = 0; k < n->n_inputs && k < 8; k++)
    if (n->inputs[k] >= 0)
      in[k] = operand(b, n->inputs[k], cur, cur_buf, axes, nd, ct);
  return ts_te_set_value(
      st, ts_cast(b->a, out->dtype,
                  apply(b, n, in, ct, ts_dtype_is_int(out->dtype))));
}

static ts_buffer *build_reduce(builder *b, const gr_node *n, int cur,
                               ts_buffer *cur_buf) {
  const gr_value *x = &b->g->values[n->inputs[0]];
  const gr_value *out = &b->g->values[n->outputs[0]];
  ts_buffer *src =
      n->inputs[0] == cur ? cur_buf : gr_fuse_param(b, n->inputs[0]);
  if (!src) return NULL;
  int na;
  const int64_t *axes = reduce_axes(b->g, n, &na);
  bool keep = gr_attr_int(n, "keepdims", 1) != 0;
  bool red[TS_MAX_DIMS] = {0};
  int64_t count = 1;
  for (int i = 0; i < na; i++) {
    int64_t ax = axes[i] < 0 ? axes[i] + x->ndim : axes[i];
    red[ax] = true;
  }
  ts_te_stage *st = ts_te_compute(
      b->te, gr_fuse_stage_name(b, strcmp(n->op, "ReduceMax") ? "sum" : "max"),
      TS_FLOAT32, out->shape, out->ndim, NULL);
  ts_expr *idx[TS_MAX_DIMS];
  for (int d = 0, o = 0; d < x->ndim; d++) {
    if (red[d]) {
      idx[d] =
          ts_te_reduce_axis(st, ts_arena_printf(b->a, "r%d", d), x->shape[d]);
      count *= x->shape[d];
      if (keep) o++;
    } else {
      idx[d] = ts_te_axis(st, o++);
    }
  }
  ts_buffer *sum =
      ts_te_set_reduce(st, !strcmp(n->op, "ReduceMax") ? TS_TE_MAX : TS_TE_SUM,
                       ts_te_load(b->te, src, idx, x->ndim));
  if (strcmp(n->op, "ReduceMean")) return sum;
  ts_te_stage *m = ts_te_compute(b->te, gr_fuse_stage_name(b, "mean"),
                                 TS_FLOAT32, out->shape, out->ndim, NULL);
  ts_expr *ax[TS_MAX_DIMS];
  for (int d = 0; d < out->ndim; d++) ax[d] = ts_te_axis(m, d);
  return ts_te_set_value(m, ts_div(b->a, ts_te_load(b->te, sum, ax, out->ndim),
                                   ts_float(b->a, TS_FLOAT32, (double)count)));
}

/* The names of the window reduce axes of nsp spatial dimensions. */
const char *gr_fuse_window_axis(int nsp, int d) {
  static const char *const names[] = {"rd", "rh", "rw"};
  return names[3 - nsp + d];
}

/* The accumulator dtype of a conv or matmul anchor: its output's (float32,
 * or int32 for ConvInteger/MatMulInteger). */
ts_dtype gr_fuse_acc_dtype(const builder *b, const gr_node *n) {
  return b->g->values[n->outputs[0]].dtype;
}

/* One term of a conv or matmul reduction: the plain product of float32
 * operands; 8-bit operands each widened to the int32 accumulator (the
 * form the tensorization rule matches to a VNNI dot). */
ts_expr *gr_fuse_product(builder *b, const gr_node *n, ts_expr *x, ts_expr *y) {
  ts_dtype acc = gr_fuse_acc_dtype(b, n);
  if (ts_dtype_is_float(acc)) return ts_mul(b->a, x, y);
  return ts_mul(b->a, ts_cast(b->a, acc, x), ts_cast(b->a, acc, y));
}

/* What a conv pads its data x with: 0, or for ConvInteger its pad_value
 * (the data's zero point). */
ts_expr *gr_fuse_pad_fill(builder *b, const gr_node *n, const gr_value *x) {
  if (ts_dtype_is_float(x->dtype)) return ts_float(b->a, x->dtype, 0);
  return ts_int(b->a, x->dtype, gr_attr_int(n, "pad_value", 0));
}

/* A pad stage around the nsp spatial dimensions of x (from axis sp0: 2
 * in NCHW and blocked, 1 channels-last): pads before (pads[d]) and after
 * (end[d]) each, filled with `fill`. */
ts_buffer *gr_fuse_pad_stage(builder *b, ts_buffer *data, const gr_value *x,
                             int sp0, int nsp, const int64_t *pads,
                             const int64_t *end, ts_expr *fill) {
  ts_arena *a = b->a;
  int64_t shape[TS_MAX_DIMS];
  memcpy(shape, x->shape, sizeof shape);
  for (int d = 0; d < nsp; d++)
    shape[sp0 + d] = x->shape[sp0 + d] + pads[d] + end[d];
  ts_te_stage *ps = ts_te_compute(b->te, gr_fuse_stage_name(b, "pad"),
                                  ts_buffer_dtype(data), shape, x->ndim, NULL);
  ts_expr *cond = NULL;
  ts_expr *idx[TS_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++) idx[d] = ts_te_axis(ps, d);
  for (int d = 0; d < nsp; d++) {
    ts_expr *h = ts_te_axis(ps, sp0 + d);
    ts_expr *cd = ts_and(a, ts_ge(a, h, ts_index(a, pads[d])),
                         ts_lt(a, h, ts_index(a, pads[d] + x->shape[sp0 + d])));
    cond = cond ? ts_and(a, cond, cd) : cd;
    idx[sp0 + d] = ts_sub(a, h, ts_index(a, pads[d]));
  }
  ts_expr *args[3] = {cond, ts_te_load(b->te, data, idx, x->ndim), fill};
  return ts_te_set_value(
      ps, ts_call(a, ts_buffer_dtype(data), "if_then_else", args, 3));
}

/* A MatMul with blocked constant weights [..., N/B, K, B] (see
 * gr_matmul_weight_block; A of rank 2 or more, W's batch axes broadcasting
 * against A's from the right): the output iterated as
 * [..., M, N/B, B], so a tile of columns reads contiguous weights; the
 * group's later stages follow (b->split_*). */
static ts_buffer *build_matmul_blocked(builder *b, const gr_node *n) {
  const ts_graph *g = b->g;
  const gr_value *x = &g->values[n->inputs[0]], *y = &g->values[n->inputs[1]];
  const gr_value *out = &g->values[n->outputs[0]];
  int ny = y->ndim;
  int64_t B = y->shape[ny - 1], N = y->shape[ny - 3] * B;
  int no = out->ndim, na = x->ndim;
  if (na < 2 || ny < 3 || ny - 1 > no || no != na || out->shape[no - 1] != N) {
    b->failed = true;
    return NULL;
  }
  b->split_c = N;
  b->split_b = B;
  ts_buffer *A = gr_fuse_param(b, n->inputs[0]),
            *W = gr_fuse_param(b, n->inputs[1]);
  if (!A || !W) return NULL;
  int64_t shape[TS_MAX_DIMS];
  int ns = no;
  memcpy(shape, out->shape, sizeof(int64_t) * (size_t)no);
  if (!split_shape(b, shape, &ns)) return NULL;
  ts_te_stage *st = ts_te_compute(b->te, gr_fuse_stage_name(b, "matmul"),
                                  gr_fuse_acc_dtype(b, n), shape, ns, NULL);
  ts_expr *ax[TS_MAX_DIMS], *ai[TS_MAX_DIMS], *wi[TS_MAX_DIMS];
  for (int d = 0; d < ns; d++) ax[d] = ts_te_axis(st, d);
  ts_expr *k = ts_te_reduce_axis(st, "rk", x->shape[na - 1]);
  for (int d = 0; d < na - 1; d++)
    ai[d] = x->shape[d] == 1 && d < na - 2 ? ts_index(b->a, 0) : ax[d];
  ai[na - 1] = k;
  /* W's batch axes (aligned right against the output's) */
  for (int d = 0; d < ny - 3; d++) {
    int o = no - 2 - (ny - 3) + d;
    wi[d] = y->shape[d] == 1 ? ts_index(b->a, 0) : ax[o];
  }
  wi[ny - 3] = ax[ns - 2], wi[ny - 2] = k, wi[ny - 1] = ax[ns - 1];
  return ts_te_set_reduce(st, TS_TE_SUM,
                          gr_fuse_product(b, n, ts_te_load(b->te, A, ai, na),
                                          ts_te_load(b->te, W, wi, ny)));
}

static ts_buffer *build_matmul(builder *b, const gr_node *n) {
  const ts_graph *g = b->g;
  if (gr_matmul_weight_block(n)) return build_matmul_blocked(b, n);
  const gr_value *x = &g->values[n->inputs[0]], *y = &g->values[n->inputs[1]];
  const gr_value *out = &g->values[n->outputs[0]];
  ts_buffer *A = gr_fuse_param(b, n->inputs[0]),
            *B = gr_fuse_param(b, n->inputs[1]);
  if (!A || !B) return NULL;
  int no = out->ndim;
  ts_te_stage *st =
      ts_te_compute(b->te, gr_fuse_stage_name(b, "matmul"),
                    gr_fuse_acc_dtype(b, n), out->shape, no, NULL);
  ts_expr *ax[TS_MAX_DIMS];
  for (int d = 0; d < no; d++) ax[d] = ts_te_axis(st, d);
  ts_expr *k = ts_te_reduce_axis(st, "rk", x->shape[x->ndim - 1]);
  ts_expr *ai[TS_MAX_DIMS], *bi[TS_MAX_DIMS];
  /* output axes: batch, then M when A is a matrix, N when B is one (a
   * vector operand has no such axis) */
  int na = x->ndim, nb = y->ndim;
  int nbatch = no - (na > 1) - (nb > 1);
  for (int d = 0; d < na - 2; d++)
    ai[d] = x->shape[d] == 1 ? ts_index(b->a, 0) : ax[d + nbatch - (na - 2)];
  if (na > 1) ai[na - 2] = ax[nbatch];
  ai[na - 1] = k;
  for (int d = 0; d < nb - 2; d++)
    bi[d] = y->shape[d] == 1 ? ts_index(b->a, 0) : ax[d + nbatch - (nb - 2)];
  if (nb > 1) {
    bi[nb - 2] = k;
    bi[nb - 1] = ax[no - 1];
  } else {
    bi[0] = k;
  }
  return ts_te_set_reduce(st, TS_TE_SUM,
                          gr_fuse_product(b, n,
                                          ts_te_load(b->te, A, ai, x->ndim),
                                          ts_te_load(b->te, B, bi, y->ndim)));
}

/* ---- library operators ---- */

ts_te_stage *gr_fuse_stage_like(builder *b, const char *op, const gr_value *v,
                                ts_expr **axes) {
  ts_te_stage *st = ts_te_compute(b->te, gr_fuse_stage_name(b, op), TS_FLOAT32,
                                  v->shape, v->ndim, NULL);
  for (int d = 0; d < v->ndim; d++) axes[d] = ts_te_axis(st, d);
  return st;
}

/* MaxPool / AveragePool (NC + 1 to 3 spatial dimensions) and
 * GlobalAveragePool. */
static ts_buffer *build_pool(builder *b, const gr_node *n) {
  const ts_graph *g = b->g;
  ts_arena *a = b->a;
  const gr_value *x = &g->values[n->inputs[0]];
  const gr_value *out = &g->values[n->outputs[0]];
  ts_buffer *data = gr_fuse_param(b, n->inputs[0]);
  if (!data) return NULL;
  bool global = !strcmp(n->op, "GlobalAveragePool");
  bool is_max = !strcmp(n->op, "MaxPool");
  int nd = x->ndim, nsp = nd - 2;
  int sp0 = gr_node_channels_last(n) ? 1 : 2; /* first spatial axis */
  int64_t kernel[3], strides[3], dil[3], pads[6] = {0}, end[3], in_sp[3];
  for (int d = 0; d < nsp; d++) {
    kernel[d] = x->shape[sp0 + d], strides[d] = 1, dil[d] = 1;
    in_sp[d] = x->shape[sp0 + d];
  }
  int c;
  const int64_t *p;
  if (!global) {
    if (!(p = gr_attr_ints(n, "kernel_shape", &c)) || c != nsp) return NULL;
    for (int d = 0; d < nsp; d++) kernel[d] = p[d];
    if ((p = gr_attr_ints(n, "strides", &c)) && c == nsp)
      for (int d = 0; d < nsp; d++) strides[d] = p[d];
    if ((p = gr_attr_ints(n, "dilations", &c)) && c == nsp)
      for (int d = 0; d < nsp; d++) dil[d] = p[d];
    if (gr_resolve_pads(n, nsp, in_sp, kernel, strides, dil, pads)) return NULL;
  }
  /* pad far enough for ceil_mode windows that run past the end */
  bool padded = false;
  for (int d = 0; d < nsp; d++) {
    int64_t span =
        (out->shape[sp0 + d] - 1) * strides[d] + (kernel[d] - 1) * dil[d] + 1;
    end[d] = span - in_sp[d] - pads[d];
    if (end[d] < 0) end[d] = 0;
    padded = padded || pads[d] || end[d];
  }
  ts_buffer *in = data;
  if (padded)
    in = gr_fuse_pad_stage(b, data, x, sp0, nsp, pads, end,
                           ts_float(a, TS_FLOAT32, is_max ? -INFINITY : 0));
  ts_te_stage *st =
      ts_te_compute(b->te, gr_fuse_stage_name(b, is_max ? "max" : "sum"),
                    TS_FLOAT32, out->shape, nd, NULL);
  ts_expr *ax[TS_MAX_DIMS], *r[3];
  for (int d = 0; d < nd; d++) ax[d] = ts_te_axis(st, d);
  for (int d = 0; d < nsp; d++)
    r[d] = ts_te_reduce_axis(st, gr_fuse_window_axis(nsp, d), kernel[d]);
  ts_expr *idx[TS_MAX_DIMS];
  for (int d = 0; d < nd; d++) idx[d] = ax[d];
  for (int d = 0; d < nsp; d++)
    idx[sp0 + d] = ts_add(a, ts_mul(a, ax[sp0 + d], ts_index(a, strides[d])),
                          ts_mul(a, r[d], ts_index(a, dil[d])));
  ts_buffer *red = ts_te_set_reduce(st, is_max ? TS_TE_MAX : TS_TE_SUM,
                                    ts_te_load(b->te, in, idx, nd));
  if (is_max) return red;
  ts_expr *oa[TS_MAX_DIMS];
  ts_te_stage *avg = gr_fuse_stage_like(b, "avg", out, oa);
  ts_expr *count;
  if (global) {
    int64_t taps = 1;
    for (int d = 0; d < nsp; d++) taps *= in_sp[d];
    count = ts_float(a, TS_FLOAT32, (double)taps);
  } else {
    /* taps inside the input (or inside the explicit padding with
     * count_include_pad), per output position */
    bool incl = gr_attr_int(n, "count_include_pad", 0) != 0;
    ts_expr *taps = NULL;
    for (int d = 0; d < nsp; d++) {
      int64_t size = in_sp[d], lo = incl ? -pads[d] : 0;
      int64_t hi = incl ? size + pads[d + nsp] : size;
      ts_expr *start =
          ts_sub(a, ts_mul(a, oa[sp0 + d], ts_index(a, strides[d])),
                 ts_index(a, pads[d]));
      ts_expr *stop = ts_add(a, start, ts_index(a, kernel[d]));
      ts_expr *span = ts_sub(a, ts_min(a, stop, ts_index(a, hi)),
                             ts_max(a, start, ts_index(a, lo)));
      taps = taps ? ts_mul(a, taps, span) : span;
    }
    count = ts_cast(a, TS_FLOAT32, taps);
  }
  return ts_te_set_value(avg, ts_div(a, ts_te_load(b->te, red, oa, nd), count));
}

/* ConvTranspose (NCHW, 2-D) as a gather: the input with S-1 zeros between
 * elements and (K-1)*D - pad zeros around it, convolved with the flipped
 * kernel. Weights are [C, M/group, KH, KW]. */
static ts_buffer *build_conv_transpose(builder *b, const gr_node *n) {
  const ts_graph *g = b->g;
  ts_arena *a = b->a;
  const gr_value *x = &g->values[n->inputs[0]], *w = &g->values[n->inputs[1]];
  const gr_value *out = &g->values[n->outputs[0]];
  ts_buffer *data = gr_fuse_param(b, n->inputs[0]);
  ts_buffer *weight = gr_fuse_param(b, n->inputs[1]);
  if (!data || !weight) return NULL;
  int64_t K[2] = {w->shape[2], w->shape[3]}, S[2] = {1, 1}, D[2] = {1, 1};
  int64_t P[2] = {0, 0};
  int c;
  const int64_t *p;
  if ((p = gr_attr_ints(n, "strides", &c)) && c == 2) S[0] = p[0], S[1] = p[1];
  if ((p = gr_attr_ints(n, "dilations", &c)) && c == 2)
    D[0] = p[0], D[1] = p[1];
  if ((p = gr_attr_ints(n, "pads", &c)) && c == 4) P[0] = p[0], P[1] = p[1];
  int64_t G = gr_attr_int(n, "group", 1);
  int64_t C = x->shape[1], Cg = C / G, Mg = w->shape[1];
  int64_t off[2], shape[4] = {x->shape[0], C, 0, 0};
  for (int d = 0; d < 2; d++) {
    off[d] = (K[d] - 1) * D[d] - P[d];
    shape[2 + d] = out->shape[2 + d] + (K[d] - 1) * D[d];
  }
  ts_te_stage *ds = ts_te_compute(b->te, gr_fuse_stage_name(b, "dilate"),
                                  TS_FLOAT32, shape, 4, NULL);
  ts_expr *cond = NULL, *idx[4] = {ts_te_axis(ds, 0), ts_te_axis(ds, 1)};
  for (int d = 0; d < 2; d++) {
    ts_expr *rel = ts_sub(a, ts_te_axis(ds, 2 + d), ts_index(a, off[d]));
    ts_expr *src = ts_floordiv(a, rel, ts_index(a, S[d]));
    ts_expr *cd = ts_and(a,
                         ts_and(a, ts_ge(a, rel, ts_index(a, 0)),
                                ts_eq(a, ts_floormod(a, rel, ts_index(a, S[d])),
                                      ts_index(a, 0))),
                         ts_lt(a, src, ts_index(a, x->shape[2 + d])));
    cond = cond ? ts_and(a, cond, cd) : cd;
    idx[2 + d] = src;
  }
  ts_expr *args[3] = {cond, ts_te_load(b->te, data, idx, 4),
                      ts_float(a, TS_FLOAT32, 0)};
  ts_buffer *dil =
      ts_te_set_value(ds, ts_call(a, TS_FLOAT32, "if_then_else", args, 3));
  ts_te_stage *st =
      ts_te_compute(b->te, gr_fuse_stage_name(b, "conv_transpose"), TS_FLOAT32,
                    out->shape, 4, NULL);
  ts_expr *nn = ts_te_axis(st, 0), *m = ts_te_axis(st, 1);
  ts_expr *rc = ts_te_reduce_axis(st, "rc", Cg);
  ts_expr *rh = ts_te_reduce_axis(st, "rh", K[0]);
  ts_expr *rw = ts_te_reduce_axis(st, "rw", K[1]);
  ts_expr *ci = rc, *mi = m;
  if (G > 1) {
    ci = ts_add(
        a, ts_mul(a, ts_floordiv(a, m, ts_index(a, Mg)), ts_index(a, Cg)), rc);
    mi = ts_floormod(a, m, ts_index(a, Mg));
  }
  ts_expr *di[4] = {
      nn, ci, ts_add(a, ts_te_axis(st, 2), ts_mul(a, rh, ts_index(a, D[0]))),
      ts_add(a, ts_te_axis(st, 3), ts_mul(a, rw, ts_index(a, D[1])))};
  ts_expr *wi[4] = {ci, mi, ts_sub(a, ts_index(a, K[0] - 1), rh),
                    ts_sub(a, ts_index(a, K[1] - 1), rw)};
  ts_buffer *conv = ts_te_set_reduce(st, TS_TE_SUM,
                                     ts_mul(a, ts_te_load(b->te, dil, di, 4),
                                            ts_te_load(b->te, weight, wi, 4)));
  if (n->n_inputs < 3 || n->inputs[2] < 0) return conv;
  ts_buffer *bias = gr_fuse_param(b, n->inputs[2]);
  if (!bias) return NULL;
  ts_expr *ax[4];
  ts_te_stage *bs = gr_fuse_stage_like(b, "bias", out, ax);
  return ts_te_set_value(bs, ts_add(a, ts_te_load(b->te, conv, ax, 4),
                                    ts_te_load(b->te, bias, &ax[1], 1)));
}

/* Whether node i is a 4-D Transpose whose result only a channels-last
 * Conv of one group and at most 4 input channels reads, as its data (its
 * group takes the conv: the model's NCHW image into the stem, read a
 * pixel's few channels at a time). Other convs take the transposed value:
 * a grouped (depthwise) conv vectorizes over the channels it reads, which
 * through the transpose are a gather each (ConvNeXt's 7x7 depthwise convs:
 * 0.6-1.3 ms against 0.13-0.23 after a transpose of their own, and 30 s
 * of LLVM for one of them), and one of many input channels reads each
 * strided by a whole plane (its 2x2 downsampling convs of 96 and 192
 * channels: 0.46-0.62 ms against about 0.2 for transpose and conv). */
static bool transpose_into_conv(const ts_graph *g, int i, const int *uses,
                                const int *consumer) {
  const gr_node *t = &g->nodes[i];
  if (strcmp(t->op, "Transpose") || !gr_fuse_is_move(g, t) ||
      g->values[t->outputs[0]].ndim != 4)
    return false;
  int v = t->outputs[0];
  if (uses[v] != 1 || consumer[v] <= i) return false;
  const gr_node *c = &g->nodes[consumer[v]];
  return !strcmp(c->op, "Conv") && c->inputs[0] == v &&
         gr_attr_int(c, "group", 1) == 1 && g->values[v].shape[3] <= 4 &&
         gr_node_channels_last(c) && !gr_fuse_pointwise_conv(g, c) &&
         is_anchor(g, c);
}

/* The number of uses of values of members[0..n) by node c. */
static int inner_reads(const ts_graph *g, const gr_node *c, const int *members,
                       int n) {
  int k = 0;
  for (int j = 0; j < c->n_inputs; j++)
    for (int m = 0; m < n && c->inputs[j] >= 0; m++)
      if (g->nodes[members[m]].outputs[0] == c->inputs[j]) k++;
  return k;
}

/* Extends the group members[0..n) (an anchor, and a transpose into it)
 * with the elementwise nodes that read its value: while that value has one
 * reader, the chain of it (elementwise and reductions, as before); where a
 * value has several (x * Sigmoid(x), the tanh GELU's x * 0.5 * (1 +
 * tanh(x + 0.044715 x^3))), the first node after the group's last that
 * reads any member's value, as long as it is elementwise over the same
 * shape. The group is cut back to its longest prefix whose members' values
 * are read only inside it but for the last's (no other value escapes; the
 * call replaces the last member). *chain_n: the length before the first
 * member taken for a value of several readers. */
static int grow_group(const ts_graph *g, const int *uses, const int *consumer,
                      const int *group_of, int *members, int n, int *chain_n) {
  int cur = g->nodes[members[n - 1]].outputs[0];
  int pending = uses[cur]; /* members' values' reads by non-members */
  int closed = n;
  bool chain = true;
  while (n < MAX_MEMBERS) {
    int next = -1;
    if (chain && pending == 1) {
      next = consumer[cur];
    } else {
      chain = false;
      for (int j = members[n - 1] + 1; j < g->n_nodes && next < 0; j++)
        if (group_of[j] < 0 && inner_reads(g, &g->nodes[j], members, n) > 0)
          next = j;
    }
    if (next <= members[n - 1] || group_of[next] >= 0) break;
    const gr_node *c = &g->nodes[next];
    if (!fusable_elementwise(g, c, cur) && (!chain || !fusable_reduce(g, c)))
      break;
    pending -= inner_reads(g, c, members, n);
    members[n++] = next;
    cur = c->outputs[0];
    pending += uses[cur];
    if (pending == uses[cur]) closed = n;
    if (chain) *chain_n = n;
  }
  return closed;
}

/* An attention group from MatMul i (the scores Q . K^T): the chain of
 * its single-use result through elementwise nodes of the same shape (a
 * scale, a mask), a Softmax over the last axis and the MatMul that
 * multiplies the probabilities by V, built as one function (the
 * probabilities never stored: the default schedule computes a few rows of
 * scores at a time, normalises them and multiplies them by V while they
 * are in cache; tuner/default_attention.c). Whisper-like encoder, 1500
 * frames, 2 threads: the three kernels took 42 ms per layer. The number of
 * members, or 0 when node i does not start one. TESSERA_ATTENTION=0 turns
 * the group off (to compare). */
static int attention_group(const ts_graph *g, int i, const int *uses,
                           const int *consumer, const int *group_of,
                           int *members) {
  const char *off = getenv("TESSERA_ATTENTION");
  if (off && !strcmp(off, "0")) return 0;
  const gr_node *q = &g->nodes[i];
  if (strcmp(q->op, "MatMul") || q->n_inputs != 2 || gr_matmul_weight_block(q))
    return 0;
  int cur = q->outputs[0], n = 0;
  const gr_value *s = &g->values[cur];
  if (s->ndim < 2 || !f32_value(g, cur) ||
      g->values[q->inputs[0]].ndim != s->ndim ||
      g->values[q->inputs[1]].ndim < 2)
    return 0;
  members[n++] = i;
  for (;;) {
    if (uses[cur] != 1 || n + 2 > MAX_MEMBERS) return 0;
    int next = consumer[cur];
    if (next <= members[n - 1] || group_of[next] >= 0) return 0;
    const gr_node *c = &g->nodes[next];
    if (!strcmp(c->op, "Softmax")) {
      int64_t axis = gr_attr_int(c, "axis", -1);
      if (axis != -1 && axis != s->ndim - 1) return 0;
      members[n++] = next;
      break;
    }
    if (!fusable_elementwise(g, c, cur) || !f32_value(g, c->outputs[0]))
      return 0;
    members[n++] = next;
    cur = c->outputs[0];
  }
  int p = g->nodes[members[n - 1]].outputs[0];
  if (uses[p] != 1) return 0;
  int next = consumer[p];
  if (next <= members[n - 1] || group_of[next] >= 0) return 0;
  const gr_node *m2 = &g->nodes[next];
  if (strcmp(m2->op, "MatMul") || m2->n_inputs != 2 || m2->inputs[0] != p ||
      m2->inputs[1] == p || gr_matmul_weight_block(m2) ||
      !f32_value(g, m2->inputs[1]) || !f32_value(g, m2->outputs[0]))
    return 0;
  members[n++] = next;
  return n;
}

/* Whether the attention group's function f gets its own default schedule
 * on the graph's target; a group it does not take would run the generic
 * one, far slower than the three operators apart. */
typedef struct attention_check {
  ts_target *target; /* parsed on first use; the caller frees it */
  ts_hash128 last;   /* the last function checked (the layers of a model
                        share one: checked once) */
  bool have_last, last_ok;
} attention_check;

static bool attention_schedulable(const ts_graph *g, const ts_func *f,
                                  attention_check *c) {
  if (!c->target && (g->target ? ts_target_parse(g->target, &c->target, NULL)
                               : ts_target_host(&c->target, NULL)) != TS_OK)
    return false;
  ts_hash128 h = ts_func_hash(f);
  if (!c->have_last || !ts_hash128_eq(h, c->last)) {
    c->last = h;
    c->have_last = true;
    c->last_ok = ts_default_attention_applies(f, c->target);
  }
  return c->last_ok;
}

/* Builds the group's function; NULL when some member cannot be expressed. */
static ts_func *build_group(const ts_graph *g, const int *members, int n,
                            builder *b) {
  char name[96] = "fused";
  for (int i = 0; i < n; i++) {
    const char *op = g->nodes[members[i]].op;
    size_t k = strlen(name);
    if (k + strlen(op) + 2 >= sizeof name) break;
    name[k++] = '_';
    for (const char *p = op; *p; p++)
      name[k++] = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
    name[k] = 0;
  }
  memset(b, 0, sizeof *b);
  b->g = g;
  b->te = ts_te_begin(name);
  b->a = ts_te_arena(b->te);
  ts_buffer *cur_buf = NULL;
  int cur = -1;
  b->chain_v = -1;
  for (int i = 0; i < n && !b->failed; i++) {
    const gr_node *m = &g->nodes[members[i]];
    b->chain_v = cur;
    b->chain_buf = cur_buf;
    if (gr_op_is_conv(m->op))
      cur_buf = gr_fuse_build_conv(b, m);
    else if (gr_op_is_matmul(m->op))
      cur_buf = build_matmul(b, m);
    else if (!strcmp(m->op, "ConvTranspose"))
      cur_buf = build_conv_transpose(b, m);
    else if (strstr(m->op, "Pool"))
      cur_buf = build_pool(b, m);
    else if (!strcmp(m->op, "Softmax") && i == n - 2 && i > 0) {
      /* an attention group's tail: the Softmax of the scores so far and
       * the MatMul by V that reads it */
      const gr_node *m2 = &g->nodes[members[++i]];
      cur_buf = gr_fuse_build_attention_tail(b, m, cur_buf, m2);
      m = m2;
    } else if (!strcmp(m->op, "Softmax"))
      cur_buf = gr_fuse_build_softmax(b, m);
    else if (!strcmp(m->op, "WinogradInput"))
      cur_buf = gr_winograd_build_input(b, m);
    else if (!strcmp(m->op, "WinogradOutput"))
      cur_buf = gr_winograd_build_output(b, m);
    else if (!strcmp(m->op, "LayerNormalization"))
      cur_buf = gr_fuse_build_layer_norm(b, m);
    else if ((b->split_b || b->merge_lead) &&
             (is_reduce(m) || gr_fuse_is_move(g, m)))
      cur_buf = NULL; /* a split or merged group: elementwise ops only */
    else if (gr_fuse_is_move(g, m) && i == 0)
      cur_buf = gr_fuse_build_move(b, m);
    else if (is_reduce(m))
      cur_buf = build_reduce(b, m, cur, cur_buf);
    else
      cur_buf = build_elementwise(b, m, cur, cur_buf);
    if (!cur_buf) b->failed = true;
    cur = m->outputs[0];
    b->inner_v[b->n_inner] = cur;
    b->inner_buf[b->n_inner++] = cur_buf;
  }
  if (b->failed) {
    ts_te_abort(b->te);
    return NULL;
  }
  ts_buffer *params[MAX_PARAMS];
  for (int i = 0; i < b->n_params; i++) params[i] = b->bufs[i];
  params[b->n_params] = cur_buf;
  ts_error err;
  ts_func *f = ts_te_finish(b->te, params, b->n_params + 1, &err);
  if (!f && getenv("TS_XDBG")) fprintf(stderr, "fuse: %s\n", err.msg);
  return f;
}

/* requires: shapes known, lowered graph (no Gemm, no BatchNormalization);
 * maintains: the values the graph computes; breaks: node indices, the
 * intermediate values inside each group (no longer produced). */
int ts_graph_fuse(ts_graph *g, ts_error *err) {
  /* a group whose function could not be built for lack of memory is left
   * as graph operators: counted, and the pass reports it */
  unsigned long failures = ts_alloc_failures();
  int rc0 = gr_fold_channel_scales(g, err);
  if (rc0) return rc0;
  int *uses = gr_use_counts(g);
  int *consumer = ts_malloc(sizeof(int) * ((size_t)g->n_values + 1));
  int *group_of = ts_malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
  ts_func **funcs = ts_calloc((size_t)g->n_nodes + 1, sizeof *funcs);
  int **param_values = ts_calloc((size_t)g->n_nodes + 1, sizeof *param_values);
  int *n_param_values = ts_calloc((size_t)g->n_nodes + 1, sizeof(int));
  char **vendor = ts_calloc((size_t)g->n_nodes + 1, sizeof *vendor);
  if (!uses || !consumer || !group_of || !funcs || !param_values ||
      !n_param_values || !vendor) {
    free(uses), free(consumer), free(group_of), free(funcs);
    free(param_values), free(n_param_values), free(vendor);
    return TS_ERR(err, TS_ENOMEM, "fuse: out of memory");
  }
  for (int v = 0; v < g->n_values; v++) consumer[v] = -1;
  for (int i = 0; i < g->n_nodes; i++) {
    group_of[i] = -1;
    for (int k = 0; k < g->nodes[i].n_inputs; k++)
      if (g->nodes[i].inputs[k] >= 0) consumer[g->nodes[i].inputs[k]] = i;
  }
  attention_check check = {0}; /* of the attention groups */
  /* group id = index of its last member; funcs[last] is its function */
  for (int i = 0; i < g->n_nodes; i++) {
    if (group_of[i] >= 0 || !is_anchor(g, &g->nodes[i])) continue;
    int members[MAX_MEMBERS], n = 0;
    members[n++] = i;
    int cur = g->nodes[i].outputs[0];
    /* a transpose whose only reader is a conv's data (the model's NCHW
     * input into the first channels-last conv): the conv reads through
     * it, one kernel instead of two */
    bool through = transpose_into_conv(g, i, uses, consumer);
    if (through) {
      members[n++] = consumer[cur];
      cur = g->nodes[consumer[cur]].outputs[0];
    }
    int chain_n = n;
    builder b;
    ts_func *f = NULL;
    int na =
        through ? 0 : attention_group(g, i, uses, consumer, group_of, members);
    if (na) f = build_group(g, members, n = na, &b);
    if (f && na && !attention_schedulable(g, f, &check)) {
      /* its schedule does not apply here: the operators apart */
      ts_func_free(f);
      f = NULL;
    }
    if (!f) {
      n = through ? 2 : 1;
      n = grow_group(g, uses, consumer, group_of, members, n, &chain_n);
      f = build_group(g, members, n, &b);
    }
    if (!f && n > chain_n) /* without the members that read several */
      f = build_group(g, members, n = chain_n, &b);
    if (!f && through) {
      /* the transpose apart; the conv starts its own group later */
      f = build_group(g, members, n = 1, &b);
    } else if (!f && n > 1 &&
               ((gr_op_is_conv(g->nodes[i].op) &&
                 (gr_conv_weight_block(&g->nodes[i]) ||
                  gr_node_blocked(&g->nodes[i]) ||
                  gr_fuse_pointwise_conv(g, &g->nodes[i]))) ||
                gr_matmul_weight_block(&g->nodes[i])))
      f = build_group(g, members, n = 1, &b); /* its epilogue apart */
    if (!f) continue;                         /* left as graph operators */
    int last = members[n - 1];
    for (int k = 0; k < n; k++) group_of[members[k]] = last;
    funcs[last] = f;
    param_values[last] = ts_malloc(sizeof(int) * (size_t)(b.n_params + 1));
    if (!param_values[last]) { /* keep the nodes: no group here */
      ts_func_free(f);
      funcs[last] = NULL;
      for (int k = 0; k < n; k++) group_of[members[k]] = -1;
      continue;
    }
    memcpy(param_values[last], b.values, sizeof(int) * (size_t)b.n_params);
    n_param_values[last] = b.n_params;
    char desc[1024];
    if (!through && gr_vendor_describe(g, members, n, b.values, b.n_params,
                                       desc, sizeof desc))
      vendor[last] = ts_strdup(desc); /* NULL: none, as when not describable */
  }
  gr_list out = {0};
  for (int i = 0; i < g->n_nodes; i++) {
    if (group_of[i] < 0) {
      gr_list_push(&out, &g->nodes[i]);
      continue;
    }
    if (group_of[i] != i) continue; /* a member before the group's last */
    gr_node call = gr_node_make(
        g, "call_tir", gr_fresh_name(g, ts_func_name(funcs[i])),
        param_values[i], n_param_values[i], g->nodes[i].outputs, 1);
    call.kind = TS_GRAPH_CALL;
    call.func = funcs[i];
    if (vendor[i])
      gr_node_set_attr(
          g, &call,
          (gr_attr){.name = "vendor", .kind = GR_ATTR_STRING, .s = vendor[i]});
    if (!gr_own_func(g, funcs[i])) {
      /* the old nodes stay: nothing refers to the function */
      ts_func_free(funcs[i]);
      out.oom = true;
    }
    gr_list_push(&out, &call);
  }
  ts_target_free(check.target);
  int n_old = g->n_nodes;
  int rc = gr_list_commit(g, &out);
  for (int i = 0; i < n_old + 1; i++) free(param_values[i]), free(vendor[i]);
  free(param_values);
  free(vendor);
  free(n_param_values);
  free(funcs);
  free(group_of);
  free(consumer);
  free(uses);
  return gr_alloc_check(g, failures, rc, err, "fuse");
}

int ts_graph_tasks(const ts_graph *g, ts_graph_task **tasks, int *n_tasks,
                   ts_error *err) {
  *tasks = NULL;
  *n_tasks = 0;
  /* (out of memory gives a zero hash and unequal functions: counted) */
  unsigned long failures = ts_alloc_failures();
  ts_graph_task *t = ts_calloc((size_t)g->n_nodes + 1, sizeof *t);
  if (!t) return TS_ERR(err, TS_ENOMEM, "tasks: out of memory");
  int n = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const gr_node *node = &g->nodes[i];
    if (node->kind != TS_GRAPH_CALL) continue;
    ts_hash128 h = ts_func_hash(node->func);
    int found = -1;
    for (int k = 0; k < n && found < 0; k++)
      if (ts_hash128_eq(t[k].hash, h) && ts_func_equal(t[k].func, node->func))
        found = k;
    if (found >= 0) {
      t[found].count++;
      continue;
    }
    t[n].func = node->func;
    t[n].hash = h;
    t[n].count = 1;
    t[n].flops = ts_func_flops(node->func);
    t[n].first_node = node->name;
    t[n].vendor = gr_attr_string(node, "vendor", NULL);
    for (int k = 0; k < node->n_inputs && k < 64; k++)
      if (node->inputs[k] >= 0 && gr_is_const(g, node->inputs[k]))
        t[n].const_params |= (uint64_t)1 << k;
    n++;
  }
  int rc = gr_alloc_check(g, failures, TS_OK, err, "tasks");
  if (rc) {
    free(t);
    return rc;
  }
  *tasks = t;
  *n_tasks = n;
  return TS_OK;
}
