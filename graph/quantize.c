/*
 * quantize.c — the quantized compile (Glow's second step): with the ranges
 * of a profile (quant.c), each convolution and matrix product with
 * constant float32 weights becomes an int8 product:
 *
 *   x  ->  QuantizeLinear(x, sx, zx)                uint8, asymmetric
 *   w  ->  round(w / sw[c]) in [-127, 127]          int8, symmetric, per
 *                                                   output channel c (or one
 *                                                   scale for the tensor)
 *   ConvInteger(xq, wq) / MatMulInteger(xq, wq)     int32 accumulators
 *   DequantizeLinear(acc, sx * sw[c], zp[c])        float32, the node's
 *                                                   original output value
 *
 * zp[c] = zx * sum(wq[c]) - round(bias[c] / (sx * sw[c])): the data's zero
 * point taken out of the accumulator once per channel (ConvInteger pads its
 * data with zx, so padded taps add exactly zx * w as every other tap does),
 * and the conv's bias quantized to int32 at the accumulator's scale, as
 * integer inference does. Fusion then builds each product with its
 * dequantization, the float epilogue that follows (residual add, relu,
 * ...) and the quantization of the next product's input, where that input
 * has no other reader, as one kernel: requantization in the epilogue.
 *
 * A node stays float32 when the profile has no range for its data, when its
 * operator is listed to keep float, when its reduction is shorter than 16
 * or not a multiple of 4 (the int8 dot products take 4 at a time: the
 * 3-channel stem of a CNN stays float), or when it is a grouped conv.
 * Activations whose producer moves values without computing (Transpose,
 * Reshape, ...) take the range of what they move.
 */
#include "internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct quant_range {
  char *name;
  double lo, hi;
} quant_range;

struct gr_quant_setup {
  quant_range *ranges;
  int n;
  bool per_tensor;
  char **keep_float;
  int n_keep;
};

void gr_quant_setup_free(gr_quant_setup *q) {
  if (!q) return;
  for (int i = 0; i < q->n; i++) free(q->ranges[i].name);
  for (int i = 0; i < q->n_keep; i++) free(q->keep_float[i]);
  free(q->ranges);
  free(q->keep_float);
  free(q);
}

int ts_graph_set_quantization(ts_graph *g, const char *profile_json,
                              const ts_quant_options *o, ts_error *err) {
  cJSON *root = cJSON_Parse(profile_json);
  const char *calib = ts_quant_calibration_name(o->calibration);
  if (!root)
    return TS_ERR(err, TS_EPARSE, "the quantization profile is not JSON");
  cJSON *fmt = cJSON_GetObjectItem(root, "format");
  cJSON *tensors = cJSON_GetObjectItem(root, "tensors");
  if (!cJSON_IsString(fmt) ||
      strcmp(fmt->valuestring, "tessera-quant-profile") ||
      !cJSON_IsArray(tensors)) {
    cJSON_Delete(root);
    return TS_ERR(err, TS_EPARSE,
                  "not a tessera quantization profile (no \"format\": "
                  "\"tessera-quant-profile\" with \"tensors\"); make one with "
                  "`tessera quantize profile`");
  }
  gr_quant_setup *q = ts_calloc(1, sizeof *q);
  int n = cJSON_GetArraySize(tensors);
  if (q) q->ranges = ts_calloc((size_t)n + 1, sizeof *q->ranges);
  if (q) q->keep_float = ts_calloc((size_t)o->n_keep_float + 1, sizeof(char *));
  if (!q || !q->ranges || !q->keep_float) {
    cJSON_Delete(root);
    gr_quant_setup_free(q);
    return TS_ERR(err, TS_ENOMEM, "out of memory");
  }
  q->per_tensor = o->per_tensor;
  int rc = TS_OK, idx = 0;
  cJSON *t;
  cJSON_ArrayForEach(t, tensors) {
    cJSON *name = cJSON_GetObjectItem(t, "name");
    cJSON *ranges = cJSON_GetObjectItem(t, "ranges");
    if (!cJSON_IsString(name)) {
      rc = TS_ERR(err, TS_EPARSE, "profile tensor %d has no name", idx);
      break;
    }
    idx++;
    if (!ranges) continue; /* no finite value seen: stays float */
    cJSON *pair = cJSON_GetObjectItem(ranges, calib);
    if (!cJSON_IsArray(pair) || cJSON_GetArraySize(pair) != 2 ||
        !cJSON_IsNumber(cJSON_GetArrayItem(pair, 0)) ||
        !cJSON_IsNumber(cJSON_GetArrayItem(pair, 1))) {
      rc = TS_ERR(err, TS_EPARSE,
                  "profile tensor '%s': no \"%s\" range [lo, hi]",
                  name->valuestring, calib);
      break;
    }
    quant_range *r = &q->ranges[q->n];
    r->lo = cJSON_GetArrayItem(pair, 0)->valuedouble;
    r->hi = cJSON_GetArrayItem(pair, 1)->valuedouble;
    if (!isfinite(r->lo) || !isfinite(r->hi) || r->lo > r->hi) {
      rc = TS_ERR(err, TS_EPARSE, "profile tensor '%s': bad range [%g, %g]",
                  name->valuestring, r->lo, r->hi);
      break;
    }
    if (!(r->name = ts_strdup(name->valuestring))) {
      rc = TS_ERR(err, TS_ENOMEM, "out of memory");
      break;
    }
    q->n++;
  }
  for (int i = 0; rc == TS_OK && i < o->n_keep_float; i++)
    if (!(q->keep_float[q->n_keep++] = ts_strdup(o->keep_float[i])))
      rc = TS_ERR(err, TS_ENOMEM, "out of memory");
  cJSON_Delete(root);
  if (rc == TS_OK && q->n == 0)
    rc = TS_ERR(err, TS_EINVAL, "the quantization profile has no ranges");
  if (rc != TS_OK) {
    gr_quant_setup_free(q);
    return rc;
  }
  gr_quant_setup_free(g->quant);
  g->quant = q;
  return TS_OK;
}

/* ---- the pass ---- */

typedef struct qpass {
  ts_graph *g;
  gr_list out;
  int *producer;  /* value -> index of the node computing it (old list) */
  int *quantized; /* value -> its uint8 copy, -1 */
  double *qscale;
  int *qzero;
  int n_int8, n_float;
  ts_error *err;
} qpass;

static const quant_range *range_named(const gr_quant_setup *q,
                                      const char *name) {
  for (int i = 0; i < q->n; i++)
    if (!strcmp(q->ranges[i].name, name)) return &q->ranges[i];
  return NULL;
}

/* The profiled range of value v, or of what it moves (Transpose, Reshape,
 * MaxPool, ...: the values are the same or a subset). */
static const quant_range *range_of(const qpass *p, int v) {
  const ts_graph *g = p->g;
  for (int hops = 0; v >= 0 && hops < 16; hops++) {
    const quant_range *r = range_named(g->quant, g->values[v].name);
    if (r) return r;
    int i = p->producer[v];
    if (i < 0) return NULL;
    const char *op = g->nodes[i].op;
    static const char *const moves[] = {
        "Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze",
        "Identity",  "MaxPool", "Slice",   "Dropout", NULL};
    bool mv = false;
    for (int k = 0; moves[k]; k++) mv = mv || !strcmp(op, moves[k]);
    if (!mv || g->nodes[i].n_inputs < 1) return NULL;
    v = g->nodes[i].inputs[0];
  }
  return NULL;
}

static bool keep_float(const gr_quant_setup *q, const char *op) {
  for (int i = 0; i < q->n_keep; i++)
    if (!strcmp(q->keep_float[i], op)) return true;
  return false;
}

bool gr_quant_keeps_float(const ts_graph *g, const char *op) {
  return !g->quant || keep_float(g->quant, op);
}

/* The weights' layout: element i's output channel is
 * ((i / outer_stride) % outer) * inner + i % inner (inner 1 when the
 * channel axis is not the last one). */
typedef struct wlayout {
  int64_t outer_stride, outer, inner, channels, red; /* red: reduction */
  int axis;                                          /* the result's */
} wlayout;

static int64_t channel_of(const wlayout *l, int64_t i) {
  return ((i / l->outer_stride) % l->outer) * l->inner + i % l->inner;
}

/* Whether node n can become an int8 product, and its weights' layout. */
static bool quantizable(const qpass *p, const gr_node *n, wlayout *l) {
  const ts_graph *g = p->g;
  bool conv = !strcmp(n->op, "Conv"), mm = !strcmp(n->op, "MatMul");
  if (n->kind != TS_GRAPH_OP || (!conv && !mm) || n->n_outputs != 1 ||
      n->n_inputs < 2 || keep_float(g->quant, n->op))
    return false;
  int x = n->inputs[0], w = n->inputs[1];
  if (x < 0 || w < 0 || !gr_is_const(g, w) ||
      !ts_dtype_eq(g->values[x].dtype, TS_FLOAT32) ||
      !ts_dtype_eq(g->values[w].dtype, TS_FLOAT32) ||
      !ts_dtype_eq(g->values[n->outputs[0]].dtype, TS_FLOAT32))
    return false;
  const gr_value *wv = &g->values[w], *xv = &g->values[x];
  const gr_value *ov = &g->values[n->outputs[0]];
  memset(l, 0, sizeof *l);
  if (conv) {
    int64_t B = gr_conv_weight_block(n);
    bool last = gr_node_channels_last(n);
    if (xv->ndim != 4 || gr_attr_int(n, "group", 1) != 1 ||
        wv->ndim != (B ? 5 : 4))
      return false;
    if (n->n_inputs > 2 && n->inputs[2] >= 0 && !gr_is_const(g, n->inputs[2]))
      return false;
    if (B) { /* [CO/B, KH, KW, CI, B] */
      *l = (wlayout){wv->shape[1] * wv->shape[2] * wv->shape[3] * B,
                     wv->shape[0],
                     B,
                     wv->shape[0] * B,
                     wv->shape[3],
                     3};
    } else if (last) { /* [KH, KW, CI, CO] */
      *l = (wlayout){1, 1, wv->shape[3], wv->shape[3], wv->shape[2], 3};
    } else { /* [CO, CI, KH, KW] */
      *l = (wlayout){wv->shape[1] * wv->shape[2] * wv->shape[3],
                     wv->shape[0],
                     1,
                     wv->shape[0],
                     wv->shape[1],
                     1};
    }
  } else {
    int64_t B = gr_matmul_weight_block(n);
    if (n->n_inputs != 2 || xv->ndim < 2 || wv->ndim != (B ? 3 : 2))
      return false;
    if (B) /* [N/B, K, B] */
      *l = (wlayout){wv->shape[1] * B, wv->shape[0], B,
                     wv->shape[0] * B, wv->shape[1], ov->ndim - 1};
    else /* [K, N] */
      *l = (wlayout){1,           1, wv->shape[1], wv->shape[1], wv->shape[0],
                     ov->ndim - 1};
  }
  if (l->red < 16 || l->red % 4) return false;
  return range_of(p, x) != NULL;
}

static int emit(qpass *p, const char *op, const char *name, const int *ins,
                int n_ins, int out, const gr_node *attrs_of) {
  gr_node n = gr_node_make(p->g, op, name, ins, n_ins, &out, 1);
  for (int i = 0; attrs_of && i < attrs_of->n_attrs; i++)
    gr_node_set_attr(p->g, &n, attrs_of->attrs[i]);
  int rc = gr_infer_node(p->g, &n, p->err);
  if (rc == TS_OK) gr_list_push(&p->out, &n);
  return rc;
}

/* A one-value constant, of shape [1]. */
static int scalar_const(ts_graph *g, const char *base, ts_dtype t, double v) {
  uint8_t buf[8];
  int64_t one = 1;
  ts_host_set(buf, t, 0, v);
  return gr_const_add(g, gr_fresh_name(g, base), t, 1, &one, buf);
}

/* x's uint8 copy (made once per value) into *xq. */
static int quantized_input(qpass *p, int x, int *xq) {
  if (p->quantized[x] >= 0) {
    *xq = p->quantized[x];
    return TS_OK;
  }
  ts_graph *g = p->g;
  const quant_range *r = range_of(p, x);
  double scale;
  int zero;
  ts_quant_params(r->lo, r->hi, false, &scale, &zero);
  char base[300];
  snprintf(base, sizeof base, "%s_scale", g->values[x].name);
  int s = scalar_const(g, base, TS_FLOAT32, scale);
  snprintf(base, sizeof base, "%s_zero_point", g->values[x].name);
  int z = scalar_const(g, base, TS_UINT8, zero);
  if (s < 0 || z < 0) return TS_ENOMEM;
  snprintf(base, sizeof base, "%s_q", g->values[x].name);
  *xq = gr_value_fresh(g, base, TS_UINT8, -1, NULL);
  int ins[3] = {x, s, z};
  int rc = emit(p, "QuantizeLinear", gr_fresh_name(g, "quantize"), ins, 3, *xq,
                NULL);
  if (rc) return rc;
  p->quantized[x] = *xq;
  p->qscale[x] = scale;
  p->qzero[x] = zero;
  return TS_OK;
}

static int quantize_node(qpass *p, const gr_node *n, const wlayout *l) {
  ts_graph *g = p->g;
  int x = n->inputs[0], w = n->inputs[1], y = n->outputs[0];
  bool conv = !strcmp(n->op, "Conv");
  int xq;
  int rc = quantized_input(p, x, &xq);
  if (rc) return rc;
  double sx = p->qscale[x];
  int zx = p->qzero[x];
  /* the weights: per-channel symmetric int8 */
  const gr_value *wv = &g->values[w];
  int64_t nw = gr_value_elems(wv), C = l->channels;
  int wnd = wv->ndim;
  int64_t wshape[TS_MAX_DIMS];
  memcpy(wshape, wv->shape, sizeof(int64_t) * (size_t)wnd);
  const float *wf = gr_const_data(g, w);
  double *sw = ts_calloc((size_t)C, sizeof *sw);
  int64_t *wsum = ts_calloc((size_t)C, sizeof *wsum);
  int8_t *wq = ts_malloc((size_t)nw);
  float *dqs = ts_malloc(sizeof(float) * (size_t)C);
  int32_t *dqz = ts_malloc(sizeof(int32_t) * (size_t)C);
  if (!sw || !wsum || !wq || !dqs || !dqz) {
    free(sw), free(wsum), free(wq), free(dqs), free(dqz);
    return TS_ENOMEM;
  }
  for (int64_t i = 0; i < nw; i++) {
    int64_t c = p->g->quant->per_tensor ? 0 : channel_of(l, i);
    sw[c] = fmax(sw[c], fabs((double)wf[i]));
  }
  for (int64_t c = 0; c < C; c++) {
    if (p->g->quant->per_tensor) sw[c] = sw[0];
    sw[c] = sw[c] > 0 ? sw[c] / 127 : 1;
  }
  for (int64_t i = 0; i < nw; i++) {
    int64_t c = channel_of(l, i);
    double v = nearbyint((double)wf[i] / sw[c]);
    v = v < -127 ? -127 : v > 127 ? 127 : v;
    wq[i] = (int8_t)v;
    wsum[c] += (int64_t)v;
  }
  const float *bias = conv && n->n_inputs > 2 && n->inputs[2] >= 0
                          ? gr_const_data(g, n->inputs[2])
                          : NULL;
  for (int64_t c = 0; c < C && rc == TS_OK; c++) {
    double s = sx * sw[c];
    double z =
        (double)zx * (double)wsum[c] - (bias ? nearbyint(bias[c] / s) : 0);
    if (fabs(z) > 2147483647.0)
      rc = TS_ERR(p->err, TS_ERANGE,
                  "quantize: node '%s', channel %lld: the bias does not fit "
                  "the int32 accumulator at scale %g",
                  n->name, (long long)c, s);
    dqs[c] = (float)s;
    dqz[c] = (int32_t)z;
  }
  char base[300];
  snprintf(base, sizeof base, "%s_int8", g->values[w].name);
  int wqv =
      rc ? -1
         : gr_const_add(g, gr_fresh_name(g, base), TS_INT8, wnd, wshape, wq);
  /* the dequantization's parameters along the result's channel axis */
  int yrank = g->values[y].ndim;
  int64_t pshape[TS_MAX_DIMS];
  int pnd = yrank - l->axis;
  pshape[0] = C;
  for (int d = 1; d < pnd; d++) pshape[d] = 1;
  snprintf(base, sizeof base, "%s_dq_scale", g->values[y].name);
  int sv = wqv < 0 ? -1
                   : gr_const_add(g, gr_fresh_name(g, base), TS_FLOAT32, pnd,
                                  pshape, dqs);
  snprintf(base, sizeof base, "%s_dq_zero_point", g->values[y].name);
  int zv = sv < 0 ? -1
                  : gr_const_add(g, gr_fresh_name(g, base), TS_INT32, pnd,
                                 pshape, dqz);
  free(sw), free(wsum), free(wq), free(dqs), free(dqz);
  if (rc) return rc;
  if (wqv < 0 || sv < 0 || zv < 0)
    return TS_ERR(p->err, TS_ENOMEM, "quantize: out of memory");
  snprintf(base, sizeof base, "%s_acc", g->values[y].name);
  int acc = gr_value_fresh(g, base, TS_INT32, -1, NULL);
  int ins[3] = {xq, wqv, -1};
  gr_node attrs = *n;
  rc = emit(p, conv ? "ConvInteger" : "MatMulInteger",
            gr_fresh_name(g, n->name), ins, 2, acc, &attrs);
  if (rc) return rc;
  if (conv) {
    gr_node *last = &p->out.nodes[p->out.n - 1];
    gr_node_set_attr(
        g, last, (gr_attr){.name = "pad_value", .kind = GR_ATTR_INT, .i = zx});
  }
  int dq_ins[3] = {acc, sv, zv};
  gr_node axis_node = {0};
  gr_node_set_attr(
      g, &axis_node,
      (gr_attr){.name = "axis", .kind = GR_ATTR_INT, .i = l->axis});
  rc = emit(p, "DequantizeLinear", gr_fresh_name(g, "dequantize"), dq_ins, 3, y,
            &axis_node);
  if (rc == TS_OK) p->n_int8++;
  return rc;
}

int ts_graph_quantize(ts_graph *g, ts_error *err) {
  if (!g->quant) return TS_OK;
  qpass p = {.g = g, .err = err};
  size_t nv = (size_t)g->n_values + 1;
  p.producer = ts_malloc(sizeof(int) * nv);
  /* new values are added while the pass runs: size for the worst case
   * (a copy per value) */
  size_t cap = nv;
  p.quantized = ts_malloc(sizeof(int) * cap);
  p.qscale = ts_calloc(cap, sizeof(double));
  p.qzero = ts_calloc(cap, sizeof(int));
  int rc = TS_OK;
  if (!p.producer || !p.quantized || !p.qscale || !p.qzero)
    rc = TS_ERR(err, TS_ENOMEM, "quantize: out of memory");
  for (size_t v = 0; rc == TS_OK && v < nv; v++)
    p.producer[v] = -1, p.quantized[v] = -1;
  for (int i = 0; rc == TS_OK && i < g->n_nodes; i++)
    for (int k = 0; k < g->nodes[i].n_outputs; k++)
      p.producer[g->nodes[i].outputs[k]] = i;
  int n_old = g->n_nodes;
  for (int i = 0; rc == TS_OK && i < n_old; i++) {
    gr_node n = g->nodes[i];
    wlayout l;
    if (quantizable(&p, &n, &l)) {
      rc = quantize_node(&p, &n, &l);
      if (rc == TS_ENOMEM)
        rc = TS_ERR(err, TS_ENOMEM, "quantize: out of memory");
    } else {
      if (n.kind == TS_GRAPH_OP &&
          (!strcmp(n.op, "Conv") || !strcmp(n.op, "MatMul")))
        p.n_float++;
      gr_list_push(&p.out, &n);
    }
  }
  if (rc == TS_OK && gr_list_commit(g, &p.out))
    rc = TS_ERR(err, TS_ENOMEM, "quantize: out of memory");
  else if (rc == TS_OK) {
    g->quant_int8 = p.n_int8;
    g->quant_float = p.n_float;
    /* the float32 weights now unused leave the constant store */
    if (p.n_int8) rc = ts_graph_eliminate_dead(g, err);
  } else {
    free(p.out.nodes);
  }
  free(p.producer), free(p.quantized), free(p.qscale), free(p.qzero);
  return rc;
}

void ts_graph_quant_counts(const ts_graph *g, int *int8, int *float32) {
  *int8 = g->quant_int8;
  *float32 = g->quant_float;
}
