/*
 * layout.c — the layout pass: 2-D convolutions and pools run channels-last
 * (NHWC, weights [KH, KW, C/group, CO]), where the innermost loop of a
 * kernel runs over contiguous channels; ONNX models arrive in NCHW.
 *
 * Each node declares how it runs in the other layout:
 *   - Conv on 4-D float32 data with constant weights converts (the node
 *     gets the attribute layout = "NHWC"; its weights are permuted here, at
 *     compile time): it gains the most, it pays for the transposes;
 *   - MaxPool, AveragePool, GlobalAveragePool, elementwise operators,
 *     Concat, and Slice and Gather with constant positions, on 4-D data,
 *     can run in either layout (constants permuted here, broadcast rank
 *     made explicit; the axes of Concat, Slice and Gather renumbered); each
 *     runs in the one that makes the bytes transposed smallest: a minimum
 *     cut between the convs and the nodes that keep NCHW (plan_layout), so
 *     such a node follows a conv that produces its input, and one that
 *     only feeds convs pulls the transpose up to where it is shared (as
 *     when several nodes read the model's input before the first conv);
 *   - everything else keeps its layout.
 * A converted node writes a new NHWC value; the original NCHW value is
 * then produced by a Transpose of it, which survives only where a node
 * that kept its layout (or a graph output) reads it. A node that converts
 * reads the NHWC form of each input, through one Transpose per NCHW value
 * however many nodes read it. The model's inputs and outputs keep their
 * layout, unless ts_graph_set_io_layout asks for NHWC at an edge: a 4-D
 * input then arrives channels-last (its NCHW value is a Transpose of it,
 * which converted readers skip) and a 4-D output leaves channels-last (a
 * Transpose of the NCHW value, which cancels against the converted
 * producer's).
 *
 * Then transposes are simplified: a transpose of a transpose composes
 * (and vanishes when the composition is the identity), and one that moves
 * only axes of size 1 becomes a Reshape (a view: the bytes are the same),
 * as after a global pool feeding Flatten -> Gemm.
 *
 * ts_graph_set_layout(g, "nchw") turns the pass off (the model as it came).
 */
#include "internal.h"
#include "codegen/codegen.h"
#include "tuner/tuner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int64_t to_nhwc[4] = {0, 2, 3, 1};
static const int64_t to_nchw[4] = {0, 3, 1, 2};
/* Conv weights OIHW -> [KH, KW, I, O] */
static const int64_t weight_perm[4] = {2, 3, 1, 0};

int ts_graph_set_layout(ts_graph *g, const char *layout, ts_error *err) {
  bool known =
      layout && (!strcmp(layout, "nhwc") || !strcmp(layout, "nchw") ||
                 !strcmp(layout, "blocked") || !strcmp(layout, "auto"));
  if (!known)
    return TS_ERR(err, TS_EINVAL,
                  "unknown layout '%s' (nhwc: convolutions channels-last, the "
                  "default; nchw: as the model gives them; blocked: "
                  "channel-blocked where a conv can be; auto: NHWC or "
                  "blocked per conv by the tuning database)",
                  layout ? layout : "(null)");
  g->keep_nchw = !strcmp(layout, "nchw");
  if (gr_block_set_mode(g, layout))
    return TS_ERR(err, TS_ENOMEM, "layout: out of memory");
  return TS_OK;
}

static int io_layout(const char *name, bool *nhwc, const char *side,
                     ts_error *err) {
  if (!name) return TS_OK;
  if (strcmp(name, "nhwc") && strcmp(name, "nchw"))
    return TS_ERR(err, TS_EINVAL,
                  "unknown %s layout '%s' (nchw: as the model declares them, "
                  "the default; nhwc: channels-last arrays)",
                  side, name);
  *nhwc = !strcmp(name, "nhwc");
  return TS_OK;
}

int ts_graph_set_io_layout(ts_graph *g, const char *inputs, const char *outputs,
                           ts_error *err) {
  bool in = g->input_nhwc, out = g->output_nhwc;
  int rc = io_layout(inputs, &in, "input", err);
  if (!rc) rc = io_layout(outputs, &out, "output", err);
  if (rc) return rc;
  g->input_nhwc = in;
  g->output_nhwc = out;
  return TS_OK;
}

bool gr_node_channels_last(const gr_node *n) {
  return !strcmp(gr_attr_string(n, "layout", ""), "NHWC");
}

bool gr_node_blocked(const gr_node *n) {
  return !strcmp(gr_attr_string(n, "layout", ""), "NCHWc");
}

bool gr_op_is_conv(const char *op) {
  return !strcmp(op, "Conv") || !strcmp(op, "ConvInteger");
}

bool gr_op_is_matmul(const char *op) {
  return !strcmp(op, "MatMul") || !strcmp(op, "MatMulInteger");
}

bool gr_op_is_quant(const char *op) {
  return !strcmp(op, "QuantizeLinear") || !strcmp(op, "DequantizeLinear");
}

int64_t gr_conv_weight_block(const gr_node *n) {
  return gr_node_channels_last(n) ? gr_attr_int(n, "weight_block", 0) : 0;
}

/* The output channels per block of a channels-last conv's weights: 16 for
 * a pointwise (1x1) ungrouped conv whose output channels it divides, so
 * one tile of output channels reads one contiguous run of weights instead
 * of a strip of every input channel's row (measured 1.3-1.4x on ResNet-50's
 * 1x1 convolutions; larger kernels: the block pass); 0 otherwise. Where
 * the default schedule's register tile for the conv's N*OH*OW rows is
 * narrower than 16 (one vector of AVX2 for ResNet-50's 49 rows at 7x7:
 * 7 rows x 8), that width, so the tile's panel is contiguous too: those
 * convs ran 0.82 -> 0.70 ms by default on AVX2.
 * Where 16 channels are a single vector (AVX-512), a block of them held
 * the register tile to one vector (8 rows x 1: 8 accumulators), and the
 * blocks, outer loops of the kernel, read the image once each: the block
 * is the tile's width there, when it is wider and divides the channels,
 * and no block at all when the tile spans every channel (the weights are
 * then one panel as they are). Untuned ResNet-50 on 2 cores of an
 * AVX-512 Xeon, three alternating runs: 0.76 / 0.86 / 0.81 -> 0.95 /
 * 0.97 / 1.02 x onnxruntime; its 56x56 256 -> 64 conv 0.94 -> 0.25 ms in
 * the model. */
static int64_t weight_block_for(ts_graph *g, const gr_node *n) {
  const gr_value *w = &g->values[n->inputs[1]]; /* OIHW */
  if (gr_attr_int(n, "group", 1) != 1 || w->ndim != 4) return 0;
  /* int8 on AMX: the weights stay one panel, which the AMX default packs
   * (at compile time), as block_matmul_weights leaves a MatMul's */
  gr_target_lanes(g);
  if (g->quant && g->amx_int8 && !gr_quant_keeps_float(g, "Conv")) return 0;
  if (w->shape[2] != 1 || w->shape[3] != 1 || w->shape[0] % 16) return 0;
  const gr_value *y = &g->values[n->outputs[0]]; /* NCHW */
  int lanes = gr_target_lanes(g);
  if (y->ndim == 4 && lanes > 1) {
    int64_t M = y->shape[0] * y->shape[2] * y->shape[3], CO = w->shape[0];
    int64_t B =
        ts_default_vector_tile(M, CO, lanes, gr_target_registers(g), NULL);
    if (lanes < 16 && B < 16 && CO % B == 0) return B;
    if (lanes >= 16 && B > 16 && CO % B == 0) return B < CO ? B : 0;
  }
  return 16;
}

int64_t gr_matmul_weight_block(const gr_node *n) {
  return gr_op_is_matmul(n->op) ? gr_attr_int(n, "weight_block", 0) : 0;
}

int ts_graph_set_target(ts_graph *g, const char *target, ts_error *err) {
  if (!g) return TS_ERR(err, TS_EINVAL, "set target: no graph");
  if (!target) {
    g->vector_lanes = 0;
    g->target = NULL;
    return TS_OK;
  }
  ts_target *t = NULL;
  int rc = ts_target_parse(target, &t, err);
  if (rc) return rc;
  g->target = ts_arena_strdup(g->arena, target);
  int lanes = ts_target_vector_lanes(t, TS_FLOAT32);
  g->vector_registers = ts_target_vector_registers(t);
  g->amx_int8 = ts_target_has_feature(t, "amx-int8");
  ts_target_free(t);
  g->vector_lanes = lanes > 0 ? lanes : 1;
  return TS_OK;
}

/* The float32 lanes of the graph's target's vectors (this host's when no
 * target was set; 8 if the host cannot be described). */
int gr_target_lanes(ts_graph *g) {
  if (g->vector_lanes) return g->vector_lanes;
  ts_target *t = NULL;
  int lanes = 8, regs = 16;
  if (ts_target_host(&t, NULL) == TS_OK) {
    lanes = ts_target_vector_lanes(t, TS_FLOAT32);
    regs = ts_target_vector_registers(t);
    g->amx_int8 = ts_target_has_feature(t, "amx-int8");
    ts_target_free(t);
  }
  g->vector_lanes = lanes > 0 ? lanes : 1;
  g->vector_registers = regs;
  return g->vector_lanes;
}

int gr_target_registers(ts_graph *g) {
  if (!g->vector_lanes) gr_target_lanes(g);
  return g->vector_registers > 0 ? g->vector_registers : 16;
}

/* The columns per panel of a MatMul's weights with N columns, for M
 * rows: the width of the default schedule's register tile for the product
 * (ts_default_vector_tile), where it divides N into two panels or more, so
 * that a tile of columns reads its panel as it is; else three of the
 * target's vectors where they divide N (a tile of 4 rows x 3 vectors: 12
 * accumulators of AVX2's 16 registers; BERT-base untuned 0.97 -> 1.04-1.08
 * x onnxruntime on AVX2 against panels of 16); else 16; 0 when none
 * divides N into two panels. Powers of two such as Whisper's 512 and 2048
 * columns got panels of 16 before, one AVX-512 vector: an 8 x 1 tile of 8
 * accumulators where the default's is 6 x 4 (in the model, 2 threads,
 * AVX-512 Xeon: its 1500 x 512 x 2048 product with GELU 17.0 -> 13.0 ms,
 * 1500 x 2048 x 512 14.5 -> 12.0 ms). */
static int64_t matmul_panel(ts_graph *g, int64_t N, int64_t M) {
  int lanes = gr_target_lanes(g);
  if (lanes > 1 && N % lanes == 0) {
    int64_t B =
        ts_default_vector_tile(M, N, lanes, gr_target_registers(g), NULL);
    if (B >= lanes && N % B == 0 && N >= 2 * B) return B;
  }
  int64_t wide = lanes >= 4 ? 3 * (int64_t)lanes : 0;
  if (wide && N % wide == 0 && N >= 2 * wide) return wide;
  return N % 16 == 0 && N >= 32 ? 16 : 0;
}

/* A MatMul's constant float32 weights [K, N] (N a multiple of the panel,
 * at least two panels; A a matrix or a batch of them, of GEMV_ROWS rows or
 * more or over more than GEMV_ELEMS weights) become [N/B, K, B] for the
 * panel B of matmul_panel: a tile of columns then reads one
 * contiguous run instead of a strip of every row (which the schedule would
 * otherwise pack at run time, once per run). */
/* Products of fewer rows over fewer weights keep them [K, N] (below). */
#define GEMV_ROWS 8
#define GEMV_ELEMS (256 << 10) /* 1 MiB of float32 */

static int block_matmul_weights(ts_graph *g, bool *changed, ts_error *err) {
  /* Products the quantize pass makes int8, on AMX: the weights stay
   * [K, N], the AMX default's tiles read them packed (at compile time,
   * prepack); in panels of 48 columns the product ran on VNNI's dot
   * products. A quantized BERT layer's products on 2 AMX cores, default
   * schedules: 0.16-0.22 -> 0.10-0.14 ms (128 x 768 x 768), 0.68 -> 0.29
   * ms (128 x 768 x 3072). */
  gr_target_lanes(g);
  if (g->quant && g->amx_int8 && !gr_quant_keeps_float(g, "MatMul"))
    return TS_OK;
  /* one blocked copy per weight, whichever products read it (an unrolled
   * recurrent layer's every step, a model sharing a layer's weights) */
  int n_values = g->n_values,
      *copy = ts_malloc(sizeof(int) * (size_t)(n_values + 1));
  if (!copy) return TS_ERR(err, TS_ENOMEM, "layout: out of memory");
  for (int v = 0; v < n_values; v++) copy[v] = -1;
  int rc = TS_OK;
  for (int i = 0; i < g->n_nodes && !rc; i++) {
    gr_node *n = &g->nodes[i];
    if (n->kind != TS_GRAPH_OP || strcmp(n->op, "MatMul") || n->n_inputs != 2 ||
        n->n_outputs != 1 || gr_matmul_weight_block(n))
      continue;
    int a = n->inputs[0], w = n->inputs[1];
    if (a < 0 || w < 0 || w >= n_values || !gr_is_const(g, w)) continue;
    const gr_value *x = &g->values[a], *y = &g->values[w];
    if (x->ndim < 2 || y->ndim != 2 || !ts_dtype_eq(x->dtype, TS_FLOAT32) ||
        !ts_dtype_eq(y->dtype, TS_FLOAT32))
      continue;
    int64_t M = 1;
    for (int k = 0; k < x->ndim - 1; k++) M *= x->shape[k];
    /* (the rows of a graph of named dynamic sizes taken as 240, which
     * every tile height up to 6 divides, so that the panels do not depend
     * on the sizes) */
    int64_t B = matmul_panel(g, y->shape[1], g->named_dims ? 240 : M);
    /* A product of a few rows over weights that stay in a core's cache
     * from one call to the next (a recurrent layer's state by R, every
     * step) keeps them [K, N]: nothing to pack, and the default schedule
     * then gives a row many vectors, where a panel one vector wide leaves
     * it one accumulator whose FMAs wait on each other. [1, 256] x [256,
     * 1024], default schedules, AVX-512 Xeon: 16.2 -> 7.5 us on one core,
     * 9.0 -> 4.8 on two; the speech-like LSTM model 3.6 -> 2.4 ms. Larger
     * weights stream from L3 at every call, and there the panels' long
     * contiguous runs did better (a GRU of 512: 6.4 ms blocked against 9.4
     * with all of its [512, 1536] and [512, 1024] products unblocked). */
    /* (not in a graph of named dynamic sizes, whose structure must not
     * depend on them) */
    if (!B || (M < GEMV_ROWS && y->shape[0] * y->shape[1] <= GEMV_ELEMS &&
               !g->named_dims))
      continue;
    int64_t K = y->shape[0], N = y->shape[1], shape[3] = {N / B, K, B};
    int c = copy[w];
    if (c < 0) {
      c = gr_const_reserve(g, gr_fresh_name(g, y->name), TS_FLOAT32, 3, shape);
      if (c < 0) {
        rc = TS_ERR(err, TS_ENOMEM, "layout: out of memory");
        break;
      }
      const float *src = gr_const_data(g, w);
      float *dst = gr_const_data(g, c);
      for (int64_t nb = 0, o = 0; nb < N / B; nb++)
        for (int64_t k = 0; k < K; k++)
          for (int64_t j = 0; j < B; j++) dst[o++] = src[k * N + nb * B + j];
      copy[w] = c;
    }
    n = &g->nodes[i];
    int *ins = gr_alloc(g, sizeof(int) * 2);
    if (!ins) {
      rc = TS_ERR(err, TS_ENOMEM, "layout: out of memory");
      break;
    }
    ins[0] = a;
    ins[1] = c;
    n->inputs = ins;
    gr_node_set_attr(
        g, n, (gr_attr){.name = "weight_block", .kind = GR_ATTR_INT, .i = B});
    *changed = true;
  }
  free(copy);
  return rc;
}

/* OIHW weights v as a new constant [O/B, KH, KW, I, B]. */
static int blocked_weights(ts_graph *g, int v, int64_t B) {
  const gr_value *x = &g->values[v];
  int64_t O = x->shape[0], I = x->shape[1], KH = x->shape[2], KW = x->shape[3];
  int64_t out[5] = {O / B, KH, KW, I, B};
  ts_dtype t = x->dtype;
  int c = gr_const_reserve(g, gr_fresh_name(g, x->name), t, 5, out);
  if (c < 0) return c; /* x may have moved: only t and the sizes from here */
  size_t es = ts_dtype_elem_bytes(t);
  const uint8_t *src = gr_const_data(g, v);
  uint8_t *dst = gr_const_data(g, c);
  int64_t i = 0;
  for (int64_t ob = 0; ob < O / B; ob++)
    for (int64_t h = 0; h < KH; h++)
      for (int64_t w = 0; w < KW; w++)
        for (int64_t ci = 0; ci < I; ci++)
          for (int64_t oi = 0; oi < B; oi++, i++)
            memcpy(dst + i * es,
                   src + (((ob * B + oi) * I + ci) * KH + h) * KW * es + w * es,
                   es);
  return c;
}

static bool f32_4d(const ts_graph *g, int v) {
  return v >= 0 && ts_dtype_eq(g->values[v].dtype, TS_FLOAT32) &&
         g->values[v].ndim == 4;
}

static bool is_pool(const gr_node *n) {
  return !strcmp(n->op, "MaxPool") || !strcmp(n->op, "AveragePool") ||
         !strcmp(n->op, "GlobalAveragePool");
}

/* A node that runs channels-last whatever its producers: a Conv on 4-D
 * float32 data with constant weights. */
static bool converts(const ts_graph *g, const gr_node *n) {
  return n->kind == TS_GRAPH_OP && n->n_outputs == 1 && n->n_inputs >= 2 &&
         !strcmp(n->op, "Conv") && f32_4d(g, n->inputs[0]) &&
         f32_4d(g, n->outputs[0]) && f32_4d(g, n->inputs[1]) &&
         gr_is_const(g, n->inputs[1]);
}

typedef struct layout_pass {
  ts_graph *g;
  gr_list list;
  int *nhwc; /* original value id -> its NHWC form, -1 */
  int n_orig;
} layout_pass;

/* The permuted copy of a 4-D shape. */
static void permute_shape(const int64_t *s, const int64_t *perm, int64_t *out) {
  for (int d = 0; d < 4; d++) out[d] = s[perm[d]];
}

/* A new constant: constant v (rank <= 4, broadcast to rank 4 by leading
 * ones) with its axes permuted. Negative on failure. */
static int permuted_const(ts_graph *g, int v, const int64_t *perm) {
  const gr_value *x = &g->values[v];
  int64_t shape4[4] = {1, 1, 1, 1}, out[4];
  for (int d = 0; d < x->ndim; d++) shape4[4 - x->ndim + d] = x->shape[d];
  permute_shape(shape4, perm, out);
  ts_dtype t = x->dtype;
  const char *name = gr_fresh_name(g, x->name);
  int c = gr_const_reserve(g, name, t, 4, out);
  if (c < 0) return c;
  size_t es = ts_dtype_elem_bytes(t);
  const uint8_t *src = gr_const_data(g, v);
  uint8_t *dst = gr_const_data(g, c);
  int64_t ist[4], idx[4] = {0};
  ist[3] = 1;
  for (int d = 2; d >= 0; d--) ist[d] = ist[d + 1] * shape4[d + 1];
  int64_t total = out[0] * out[1] * out[2] * out[3];
  for (int64_t i = 0; i < total; i++) {
    int64_t s = 0;
    for (int d = 0; d < 4; d++) s += idx[d] * ist[perm[d]];
    memcpy(dst + i * es, src + s * es, es);
    for (int d = 3; d >= 0; d--) {
      if (++idx[d] < out[d]) break;
      idx[d] = 0;
    }
  }
  g->values[c].layout = g->values[v].ndim == 4 ? "NHWC" : "";
  return c;
}

/* A Transpose node (pushed to the list) from value x to a value of the
 * permuted shape, or to `to` when it is >= 0. Returns the result. */
static int push_transpose(layout_pass *p, int x, const int64_t *perm, int to,
                          const char *layout) {
  ts_graph *g = p->g;
  if (to < 0) {
    int64_t s[4];
    permute_shape(g->values[x].shape, perm, s);
    to = gr_value_fresh(g, g->values[x].name, g->values[x].dtype, 4, s);
    if (to < 0) return to;
    g->values[to].layout = layout;
  }
  gr_node n =
      gr_node_make(g, "Transpose", gr_fresh_name(g, "layout"), &x, 1, &to, 1);
  int64_t ints[4];
  memcpy(ints, perm, sizeof ints);
  gr_attr a = {.name = "perm", .kind = GR_ATTR_INTS, .n = 4, .ints = ints};
  gr_node_set_attr(g, &n, a); /* copies ints */
  gr_list_push(&p->list, &n);
  return to;
}

/* The NHWC form of activation v: the converted producer's result, or a
 * Transpose (made once per value). */
static int nhwc_of(layout_pass *p, int v) {
  if (v < p->n_orig && p->nhwc[v] >= 0) return p->nhwc[v];
  int t = push_transpose(p, v, to_nhwc, -1, "NHWC");
  if (v < p->n_orig) p->nhwc[v] = t;
  return t;
}

/* Slice and Gather: data movement along axes that the layout renumbers. */
static bool axis_move(const gr_node *n) {
  return n->kind == TS_GRAPH_OP &&
         (!strcmp(n->op, "Slice") || !strcmp(n->op, "Gather"));
}

/* The NHWC position of NCHW axis a (negative: from the end). */
static int64_t nhwc_axis(int64_t a) {
  if (a < 0) a += 4;
  int64_t j = 0;
  while (j < 3 && to_nhwc[j] != a) j++;
  return j;
}

/* Slice's axes input in NHWC positions (its starts' count of them from 0
 * when the input is absent); the constant, or an error code. */
static int nhwc_slice_axes(ts_graph *g, const gr_node *n) {
  const gr_value *st = &g->values[n->inputs[1]];
  int64_t cnt = st->ndim == 1 ? st->shape[0] : 0, ax[4];
  if (cnt < 1 || cnt > 4) return TS_EINVAL;
  int av = n->n_inputs > 3 ? n->inputs[3] : -1;
  for (int64_t i = 0; i < cnt; i++) {
    int64_t a =
        av >= 0 ? ts_host_get_int(gr_const_data(g, av), g->values[av].dtype, i)
                : i;
    ax[i] = nhwc_axis(a);
  }
  return gr_const_add(g, gr_fresh_name(g, "nhwc_axes"), TS_INT64, 1, &cnt, ax);
}

/* Whether a pool, elementwise node or Concat can run channels-last at all:
 * a 4-D result, 4-D activations, constants and scalars of rank <= 4. */
static bool agnostic_ok(const ts_graph *g, const gr_node *n) {
  if (n->kind != TS_GRAPH_OP || n->n_outputs != 1 ||
      g->values[n->outputs[0]].ndim != 4)
    return false;
  if (is_pool(n)) return f32_4d(g, n->inputs[0]) && f32_4d(g, n->outputs[0]);
  if (axis_move(n)) {
    /* the data 4-D, every other input a constant (starts, ends, axes,
     * steps; a Gather's 1-D indices) */
    if (!f32_4d(g, n->inputs[0]) || !f32_4d(g, n->outputs[0])) return false;
    for (int k = 1; k < n->n_inputs; k++)
      if (n->inputs[k] >= 0 && !gr_is_const(g, n->inputs[k])) return false;
    return strcmp(n->op, "Gather") || g->values[n->inputs[1]].ndim == 1;
  }
  if (!gr_is_elementwise_op(n->op) && strcmp(n->op, "Concat")) return false;
  if (gr_op_is_quant(n->op)) return false; /* its axis attribute */
  for (int k = 0; k < n->n_inputs; k++) {
    int v = n->inputs[k];
    if (v < 0) continue;
    const gr_value *x = &g->values[v];
    if (x->ndim < 0 || x->ndim > 4) return false;
    if (!gr_is_const(g, v) && gr_value_elems(x) != 1 && !f32_4d(g, v))
      return false;
  }
  return true;
}

/* The nodes that run channels-last (plan[i]), decided before any is
 * rewritten, as a minimum cut. Convs always run channels-last, a node
 * that cannot (anything but a pool, an elementwise node or a Concat on
 * 4-D data) keeps NCHW, and so do the model's inputs and outputs unless
 * asked otherwise; each 4-D activation whose producer and readers end up
 * on different sides costs one transpose of its bytes. Minimizing the
 * bytes transposed is a minimum cut of the hypergraph whose hyperedges
 * are the activations (each a pair of vertices joined by an arc of its
 * size, Lawler's construction), between an NHWC source and an NCHW sink.
 * NULL when out of memory. */
static bool *plan_layout(const ts_graph *g) {
  const int64_t never = INT64_MAX / 4, TIE = 4096;
  int nn = g->n_nodes, nv = g->n_values;
  /* vertices: S, T, one per node, one per graph input and output, two per
   * activation */
  int S = 0, T = 1, node0 = 2, in0 = node0 + nn, out0 = in0 + g->n_inputs;
  int val0 = out0 + g->n_outputs, n = val0 + 2 * nv;
  gr_cut *c = gr_cut_new(n);
  bool *side = ts_malloc(sizeof(bool) * (size_t)n);
  bool *plan = ts_calloc((size_t)nn + 1, sizeof *plan);
  int *prod = ts_malloc(sizeof(int) * (size_t)(nv + 1));
  if (!c || !side || !plan || !prod) goto fail;
  for (int v = 0; v < nv; v++) prod[v] = -1;
  for (int i = 0; i < nn; i++) {
    const gr_node *m = &g->nodes[i];
    for (int k = 0; k < m->n_outputs; k++)
      if (m->outputs[k] >= 0) prod[m->outputs[k]] = node0 + i;
    if (converts(g, m))
      gr_cut_edge(c, S, node0 + i, never);
    else if (!agnostic_ok(g, m))
      gr_cut_edge(c, node0 + i, T, never);
  }
  for (int k = 0; k < g->n_inputs; k++) {
    prod[g->inputs[k]] = in0 + k;
    if (g->input_nhwc)
      gr_cut_edge(c, S, in0 + k, never);
    else
      gr_cut_edge(c, in0 + k, T, never);
  }
  for (int k = 0; k < g->n_outputs; k++)
    if (g->output_nhwc)
      gr_cut_edge(c, S, out0 + k, never);
    else
      gr_cut_edge(c, out0 + k, T, never);
  /* an activation joins its producer and readers: members -> in (never),
   * in -> out (its bytes), out -> members (never) */
  for (int v = 0; v < nv; v++) {
    const gr_value *x = &g->values[v];
    if (!f32_4d(g, v) || gr_is_const(g, v) || prod[v] < 0) continue;
    /* the bytes, then two tie-breaks among cuts of equal bytes: a node
     * that can choose stays with a producer that cannot (conv -> relu
     * keeps the relu in the conv's group), and a later value is cut
     * rather than an earlier one (conv -> add -> relu keeps both) */
    int p = prod[v] - node0;
    bool fixed = p < 0 || p >= nn || !agnostic_ok(g, &g->nodes[p]);
    int64_t late = p < 0 || p >= nn ? 0 : (int64_t)p * (TIE - 1) / nn;
    int64_t bytes = gr_value_elems(x) * 4;
    int vin = val0 + 2 * v, vout = vin + 1;
    gr_cut_edge(c, vin, vout,
                (2 * (bytes > 0 ? bytes : 1) + fixed) * TIE + (TIE - 1 - late));
    gr_cut_edge(c, prod[v], vin, never);
    gr_cut_edge(c, vout, prod[v], never);
  }
  for (int i = 0; i < nn; i++)
    for (int k = 0; k < g->nodes[i].n_inputs; k++) {
      int v = g->nodes[i].inputs[k];
      if (v < 0 || !f32_4d(g, v) || gr_is_const(g, v) || prod[v] < 0) continue;
      gr_cut_edge(c, node0 + i, val0 + 2 * v, never);
      gr_cut_edge(c, val0 + 2 * v + 1, node0 + i, never);
    }
  for (int k = 0; k < g->n_outputs; k++) {
    int v = g->outputs[k];
    if (!f32_4d(g, v) || gr_is_const(g, v) || prod[v] < 0) continue;
    gr_cut_edge(c, out0 + k, val0 + 2 * v, never);
    gr_cut_edge(c, val0 + 2 * v + 1, out0 + k, never);
  }
  if (gr_cut_solve(c, S, T, side) < 0) goto fail;
  for (int i = 0; i < nn; i++)
    plan[i] = side[node0 + i] &&
              (converts(g, &g->nodes[i]) || agnostic_ok(g, &g->nodes[i]));
  gr_cut_free(c);
  free(side);
  free(prod);
  return plan;
fail:
  gr_cut_free(c);
  free(side);
  free(plan);
  free(prod);
  return NULL;
}

/* The strides of a strided pointwise Conv (1x1 weights, one group, no
 * padding, some stride above 1) in s[2]; false for any other node. */
static bool strided_pointwise(const ts_graph *g, const gr_node *n, int64_t *s) {
  if (strcmp(n->op, "Conv") || gr_attr_int(n, "group", 1) != 1) return false;
  const gr_value *w = &g->values[n->inputs[1]];
  if (w->ndim != 4 || w->shape[2] != 1 || w->shape[3] != 1) return false;
  int c;
  const int64_t *a = gr_attr_ints(n, "strides", &c);
  if (!a || c != 2 || (a[0] == 1 && a[1] == 1) || a[0] < 1 || a[1] < 1)
    return false;
  s[0] = a[0], s[1] = a[1];
  const int64_t *pads = gr_attr_ints(n, "pads", &c);
  for (int d = 0; pads && d < c; d++)
    if (pads[d]) return false;
  const char *ap = gr_attr_string(n, "auto_pad", "NOTSET");
  return !strcmp(ap, "NOTSET") || !strcmp(ap, "VALID");
}

/* A Slice node (pushed to the list) taking every s[0]-th row and s[1]-th
 * column of NHWC value x: what a strided 1x1 conv reads. Returns the
 * result, or -1 when out of memory. */
static int push_subsample(layout_pass *p, int x, const int64_t *s) {
  ts_graph *g = p->g;
  const gr_value *v = &g->values[x];
  int64_t two = 2, starts[2] = {0, 0}, ends[2] = {v->shape[1], v->shape[2]};
  int64_t axes[2] = {1, 2};
  int64_t shape[4] = {v->shape[0], (v->shape[1] + s[0] - 1) / s[0],
                      (v->shape[2] + s[1] - 1) / s[1], v->shape[3]};
  int ins[5] = {x, -1, -1, -1, -1};
  const int64_t *data[4] = {starts, ends, axes, s};
  for (int k = 0; k < 4; k++)
    if ((ins[k + 1] = gr_const_add(g, gr_fresh_name(g, "slice"), TS_INT64, 1,
                                   &two, data[k])) < 0)
      return -1;
  int out = gr_value_fresh(g, g->values[x].name, g->values[x].dtype, 4, shape);
  if (out < 0) return -1;
  g->values[out].layout = "NHWC";
  gr_node n =
      gr_node_make(g, "Slice", gr_fresh_name(g, "subsample"), ins, 5, &out, 1);
  gr_list_push(&p->list, &n);
  return out;
}

static int convert_node(layout_pass *p, const gr_node *n) {
  ts_graph *g = p->g;
  /* a strided pointwise conv reads a subsample: sliced first, it becomes
   * a pointwise conv of stride 1 (a matrix product, see fuse.c) */
  int64_t sub[2];
  bool subsample = strided_pointwise(g, n, sub);
  bool elementwise = gr_is_elementwise_op(n->op);
  bool permute_consts = elementwise || !strcmp(n->op, "Concat");
  int ins[16];
  if (n->n_inputs > 16) return TS_EINVAL;
  for (int k = 0; k < n->n_inputs; k++) {
    int v = n->inputs[k];
    ins[k] = v;
    if (v < 0) continue;
    const gr_value *x = &g->values[v];
    bool is_const = gr_is_const(g, v);
    if (!strcmp(n->op, "Conv") && k == 1)
      ins[k] = weight_block_for(g, n)
                   ? blocked_weights(g, v, weight_block_for(g, n))
                   : permuted_const(g, v, weight_perm);
    else if (!strcmp(n->op, "Conv") && k == 2)
      ins[k] = v; /* the bias: per output channel either way */
    else if (axis_move(n) && k > 0)
      ins[k] = v; /* positions: the axes are renumbered below */
    else if (permute_consts && is_const && gr_value_elems(x) > 1)
      ins[k] = permuted_const(g, v, to_nhwc);
    else if (elementwise && gr_value_elems(x) == 1)
      ins[k] = v;
    else
      ins[k] = nhwc_of(p, v);
    if (ins[k] >= 0 && subsample && k == 0)
      ins[k] = push_subsample(p, ins[k], sub);
    if (ins[k] < 0) return ins[k];
  }
  int out = n->outputs[0];
  int64_t s[4];
  permute_shape(g->values[out].shape, to_nhwc, s);
  int nout = gr_value_fresh(g, g->values[out].name, g->values[out].dtype, 4, s);
  if (nout < 0) return nout;
  g->values[nout].layout = "NHWC";
  gr_node m = *n;
  m.inputs = gr_alloc(g, sizeof(int) * (size_t)(n->n_inputs + 5));
  m.outputs = gr_alloc(g, sizeof(int) * 2);
  if (!m.inputs || !m.outputs) return TS_ENOMEM; /* the graph is failed */
  memcpy(m.inputs, ins, sizeof(int) * (size_t)n->n_inputs);
  m.outputs[0] = nout;
  if (!strcmp(n->op, "Concat") || !strcmp(n->op, "Gather")) {
    int64_t na = nhwc_axis(gr_attr_int(n, "axis", 0));
    gr_node_set_attr(g, &m,
                     (gr_attr){.name = "axis", .kind = GR_ATTR_INT, .i = na});
  } else if (!strcmp(n->op, "Slice")) {
    int axes = nhwc_slice_axes(g, n);
    if (axes < 0) return axes;
    for (int k = n->n_inputs; k < 4; k++) m.inputs[k] = -1;
    if (m.n_inputs < 4) m.n_inputs = 4;
    m.inputs[3] = axes;
  } else if (!elementwise) {
    gr_node_set_attr(
        g, &m,
        (gr_attr){.name = "layout", .kind = GR_ATTR_STRING, .s = "NHWC"});
    if (subsample) {
      int64_t one[2] = {1, 1}; /* copied by gr_node_set_attr */
      gr_node_set_attr(
          g, &m,
          (gr_attr){
              .name = "strides", .kind = GR_ATTR_INTS, .n = 2, .ints = one});
    }
    if (!strcmp(n->op, "Conv") && weight_block_for(g, n))
      gr_node_set_attr(g, &m,
                       (gr_attr){.name = "weight_block",
                                 .kind = GR_ATTR_INT,
                                 .i = weight_block_for(g, n)});
  }
  gr_list_push(&p->list, &m);
  p->nhwc[out] = nout;
  /* the NCHW value, for whoever still reads it (dce drops it otherwise) */
  push_transpose(p, nout, to_nchw, out, "");
  return p->list.oom ? TS_ENOMEM : TS_OK;
}

/* ---- transpose simplification ---- */

static const int64_t *perm_of(const gr_node *n) {
  int c;
  const int64_t *perm = gr_attr_ints(n, "perm", &c);
  return perm && c == 4 ? perm : NULL;
}

/* Whether a transpose of shape s by perm keeps every axis longer than 1
 * in its order: the bytes are the same, only the shape changes. */
static bool only_unit_axes_move(const int64_t *s, const int64_t *perm, int nd) {
  int64_t last = -1;
  for (int d = 0; d < nd; d++) {
    if (s[perm[d]] == 1) continue;
    if (perm[d] < last) return false;
    last = perm[d];
  }
  return true;
}

static bool is_graph_output(const ts_graph *g, int v) {
  for (int k = 0; k < g->n_outputs; k++)
    if (g->outputs[k] == v) return true;
  return false;
}

static bool same_shape(const gr_value *a, const gr_value *b) {
  if (a->ndim != b->ndim) return false;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return false;
  return true;
}

/* Views: a Reshape of a Reshape reads the first one's input; a Reshape
 * that keeps the shape vanishes. True when something changed. */
static bool simplify_view(ts_graph *g, gr_node *n) {
  int x = n->inputs[0], out = n->outputs[0];
  if (same_shape(&g->values[x], &g->values[out]) && !is_graph_output(g, out)) {
    gr_replace_uses(g, out, x);
    return true;
  }
  int pi = g->values[x].producer;
  if (pi >= 0 && g->nodes[pi].kind == TS_GRAPH_OP &&
      !strcmp(g->nodes[pi].op, "Reshape")) {
    n->inputs[0] = g->nodes[pi].inputs[0];
    return true;
  }
  return false;
}

static int simplify_transposes(ts_graph *g, ts_error *err) {
  bool changed = true;
  while (changed) {
    changed = false;
    for (int i = 0; i < g->n_nodes; i++) {
      gr_node *n = &g->nodes[i];
      if (n->kind == TS_GRAPH_OP && !strcmp(n->op, "Reshape") &&
          n->n_inputs == 2 && simplify_view(g, n)) {
        changed = true;
        continue;
      }
      if (n->kind != TS_GRAPH_OP || strcmp(n->op, "Transpose")) continue;
      const int64_t *perm = perm_of(n);
      int x = n->inputs[0];
      if (!perm || g->values[x].ndim != 4) continue;
      bool ident = true;
      for (int d = 0; d < 4; d++) ident = ident && perm[d] == d;
      if (ident && !is_graph_output(g, n->outputs[0])) {
        gr_replace_uses(g, n->outputs[0], x);
        changed = true;
        continue;
      }
      int pi = g->values[x].producer;
      const gr_node *pn = pi >= 0 ? &g->nodes[pi] : NULL;
      if (pn && pn->kind == TS_GRAPH_OP && !strcmp(pn->op, "Transpose") &&
          perm_of(pn)) {
        /* y = T_perm(T_q(z)): y[d] = z[q[perm[d]]] */
        const int64_t *q = perm_of(pn);
        int64_t comp[4];
        bool ident = true;
        for (int d = 0; d < 4; d++) {
          comp[d] = q[perm[d]];
          ident = ident && comp[d] == d;
        }
        int z = pn->inputs[0];
        if (ident && !is_graph_output(g, n->outputs[0])) {
          gr_replace_uses(g, n->outputs[0], z);
          changed = true;
          continue;
        }
        n->inputs[0] = z;
        gr_attr a = {
            .name = "perm", .kind = GR_ATTR_INTS, .n = 4, .ints = comp};
        gr_node_set_attr(g, n, a); /* copies comp */
        changed = true;
        continue;
      }
      if (only_unit_axes_move(g->values[x].shape, perm, 4)) {
        const gr_value *o = &g->values[n->outputs[0]];
        int64_t nd = o->ndim;
        int64_t shape[TS_MAX_DIMS];
        memcpy(shape, o->shape, sizeof shape);
        int s =
            gr_const_add(g, gr_fresh_name(g, "shape"), TS_INT64, 1, &nd, shape);
        if (s < 0) return TS_ERR(err, TS_ENOMEM, "layout: out of memory");
        n = &g->nodes[i];
        int *ins = gr_alloc(g, sizeof(int) * 2);
        if (!ins) return TS_ERR(err, TS_ENOMEM, "layout: out of memory");
        n->op = "Reshape";
        ins[0] = x;
        ins[1] = s;
        n->inputs = ins;
        n->n_inputs = 2;
        n->attrs = NULL;
        n->n_attrs = 0;
        changed = true;
      }
    }
    if (changed) {
      int rc = ts_graph_eliminate_dead(g, err);
      if (rc) return rc;
    }
  }
  return TS_OK;
}

/* requires: shapes known, lowered graph; maintains: the values the graph
 * computes, its inputs and outputs (names, shapes, layouts); breaks: node
 * indices. */
int ts_graph_convert_layout(ts_graph *g, ts_error *err) {
  bool blocked = false;
  int brc = block_matmul_weights(g, &blocked, err);
  if (brc) return brc;
  bool any = false;
  for (int i = 0; i < g->n_nodes && !any; i++) any = converts(g, &g->nodes[i]);
  bool edges = false;
  for (int k = 0; k < g->n_inputs; k++)
    edges |= g->input_nhwc && g->values[g->inputs[k]].ndim == 4;
  for (int k = 0; k < g->n_outputs; k++)
    edges |= g->output_nhwc && g->values[g->outputs[k]].ndim == 4;
  if (g->keep_nchw) any = false;
  if (!any && !edges) /* the unblocked weights are dead now */
    return blocked ? ts_graph_eliminate_dead(g, err) : TS_OK;
  layout_pass p = {.g = g, .n_orig = g->n_values};
  gr_reindex(g);
  bool *plan = g->keep_nchw ? NULL : plan_layout(g);
  p.nhwc = ts_malloc(sizeof(int) * (size_t)(g->n_values + 1));
  if (!p.nhwc || (!g->keep_nchw && !plan)) {
    free(p.nhwc);
    free(plan);
    return TS_ERR(err, TS_ENOMEM, "layout: out of memory");
  }
  for (int v = 0; v < g->n_values; v++) p.nhwc[v] = -1;
  int rc = TS_OK;
  int n_nodes = g->n_nodes;
  /* NHWC inputs: the model's input is the channels-last value (under the
   * model's name); the NCHW value becomes a Transpose of it */
  for (int k = 0; g->input_nhwc && k < g->n_inputs; k++) {
    int x = g->inputs[k];
    if (g->values[x].ndim != 4) continue;
    int64_t s[4];
    permute_shape(g->values[x].shape, to_nhwc, s);
    int xn = gr_value_fresh(g, g->values[x].name, g->values[x].dtype, 4, s);
    if (xn < 0) {
      rc = TS_ERR(err, TS_ENOMEM, "layout: out of memory");
      break;
    }
    const char *name = g->values[x].name;
    g->values[x].name = g->values[xn].name;
    g->values[xn].name = name;
    g->values[xn].layout = "NHWC";
    g->values[xn].is_input = true;
    g->values[x].is_input = false;
    g->inputs[k] = xn;
    push_transpose(&p, xn, to_nchw, x, "");
    p.nhwc[x] = xn;
  }
  if (rc) {
    free(p.nhwc);
    free(plan);
    free(p.list.nodes);
    return rc;
  }
  for (int i = 0; i < n_nodes && !rc; i++) {
    const gr_node *n = &g->nodes[i];
    if (!g->keep_nchw && plan[i]) {
      rc = convert_node(&p, n);
      if (rc == TS_EINVAL)
        rc = TS_ERR(err, TS_EINVAL, "layout: node '%s' has too many inputs",
                    n->name);
      else if (rc)
        rc = TS_ERR(err, TS_ENOMEM, "layout: out of memory");
    } else {
      gr_list_push(&p.list, n);
    }
  }
  /* NHWC outputs: a Transpose of the NCHW value, under the model's name */
  for (int k = 0; !rc && g->output_nhwc && k < g->n_outputs; k++) {
    int y = g->outputs[k];
    if (g->values[y].ndim != 4) continue;
    const char *name = g->values[y].name;
    int yn = nhwc_of(&p, y);
    if (yn < 0) {
      rc = TS_ERR(err, TS_ENOMEM, "layout: out of memory");
      break;
    }
    g->values[y].name = gr_fresh_name(g, name);
    g->values[yn].name = name;
    g->outputs[k] = yn;
  }
  free(p.nhwc);
  free(plan);
  if (rc) {
    free(p.list.nodes);
    return rc;
  }
  if (gr_list_commit(g, &p.list))
    return TS_ERR(err, TS_ENOMEM, "layout: out of memory");
  rc = ts_graph_eliminate_dead(g, err);
  if (!rc) rc = simplify_transposes(g, err);
  return rc;
}
