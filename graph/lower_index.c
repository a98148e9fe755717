/*
 * lower_index.c — gathers and scatters at constant indices (what
 * exporters write for `x[:, 0] = y`, `x[idx] = y` with a fixed idx, or a
 * fixed GatherND), rewritten into the core operators:
 *   GatherND            -> Reshape of the data to [positions, row], a
 *                          Gather of the indexed rows, Reshape to the
 *                          output's shape
 *   ScatterND           -> Reshape of data and updates to [positions,
 *                          row]; Where(written, Gather(updates, the update
 *                          each position takes), data); Reshape back
 *   ScatterElements,
 *   Scatter (opset < 11) -> the same with one element per position
 * A reduction (add, mul, max, min) becomes Where(written, data op
 * gathered, data), one such layer per occurrence when a position is
 * written several times (the updates combined in their order, as
 * onnxruntime does; at most 64). Without a reduction a position written
 * twice takes the last update, as onnxruntime does (ONNX leaves the order
 * undefined).
 * Indices are checked against the data's extents (negative ones count
 * from the end); indices that are not constants are refused with the
 * node's name. Every rewrite is exact: values are only moved.
 */
#include "lower.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL GR_LOWER_FAIL

/* The most positions (and constant elements) a rewrite here makes. */
#define INDEX_MAX (1ll << 28)

static int64_t prod(const int64_t *s, int a, int b) {
  int64_t p = 1;
  for (int i = a; i < b; i++) p *= s[i];
  return p;
}

/* Emits op(ins) into `out` (a fresh value when out < 0); the value or an
 * error code. */
static int emit(gr_lowering *l, const gr_node *n, const char *op,
                const int *ins, int n_ins, int out) {
  bool last = out >= 0;
  if (!last) out = gr_lower_fresh(l->g, n->outputs[0], "ix");
  if (out < 0) return TS_ENOMEM;
  int rc = gr_lower_emit(l, op, last ? n->name : gr_fresh_name(l->g, n->name),
                         ins, n_ins, out);
  return rc ? rc : out;
}

static int const_i64(ts_graph *g, int nd, const int64_t *shape,
                     const int64_t *v) {
  return gr_const_add(g, gr_fresh_name(g, "index"), TS_INT64, nd, shape, v);
}

static int reshape(gr_lowering *l, const gr_node *n, int x, int nd,
                   const int64_t *shape, int out) {
  int64_t len = nd;
  int s = const_i64(l->g, 1, &len, shape);
  if (s < 0) return s;
  int ins[2] = {x, s};
  return emit(l, n, "Reshape", ins, 2, out);
}

/* Rows `rows` (count of them) of x gathered along axis 0. */
static int gather_rows(gr_lowering *l, const gr_node *n, int x,
                       const int64_t *rows, int64_t count, int out) {
  int k = const_i64(l->g, 1, &count, rows);
  if (k < 0) return k;
  int ins[2] = {x, k};
  return emit(l, n, "Gather", ins, 2, out);
}

/* Index i of constant v, counted from the end when negative, checked
 * against extent d; -1 when out of range. */
static int64_t index_at(const ts_graph *g, int v, int64_t i, int64_t d) {
  int64_t x = ts_host_get_int(gr_const_data(g, v), g->values[v].dtype, i);
  if (x < 0) x += d;
  return x >= 0 && x < d ? x : -1;
}

/* ---- GatherND ---- */

static int lower_gather_nd(gr_lowering *l, const gr_node *n) {
  ts_graph *g = l->g;
  const gr_value x = g->values[n->inputs[0]], iv = g->values[n->inputs[1]];
  const gr_value o = g->values[n->outputs[0]];
  if (!gr_is_const(g, n->inputs[1]))
    return FAIL("the indices must be constants");
  int b = (int)gr_attr_int(n, "batch_dims", 0);
  int k = (int)iv.shape[iv.ndim - 1];
  int64_t B = prod(x.shape, 0, b), P = prod(x.shape, b, b + k);
  int64_t S = prod(x.shape, b + k, x.ndim);
  int64_t per = prod(iv.shape, b, iv.ndim - 1), U = B * per;
  if (U > INDEX_MAX || B * P > INDEX_MAX)
    return FAIL("more than 2^28 positions");
  int64_t *pos = malloc(sizeof *pos * (size_t)(U ? U : 1));
  if (!pos) return TS_ERR(l->err, TS_ENOMEM, "lowering: out of memory");
  for (int64_t u = 0; u < U; u++) {
    int64_t flat = 0;
    for (int j = 0; j < k; j++) {
      int64_t d = x.shape[b + j], at = index_at(g, n->inputs[1], u * k + j, d);
      if (at < 0) {
        free(pos);
        return FAIL("index %lld of the indices is out of range for the "
                    "data's axis %d (extent %lld)",
                    (long long)(u * k + j), b + j, (long long)d);
      }
      flat = flat * d + at;
    }
    pos[u] = (u / (per ? per : 1)) * P + flat;
  }
  int64_t rs[2] = {B * P, S};
  int r = reshape(l, n, n->inputs[0], 2, rs, -1);
  int v = r < 0 ? r : gather_rows(l, n, r, pos, U, -1);
  free(pos);
  if (v < 0) return v;
  v = reshape(l, n, v, o.ndim, o.shape, n->outputs[0]);
  return v < 0 ? v : TS_OK;
}

/* ---- ScatterND, ScatterElements ---- */

/* One layer of a scatter: where mask, v = op(v, the gathered updates) (or
 * the updates without a reduction); v or an error code. */
static int scatter_layer(gr_lowering *l, const gr_node *n, int v, int u,
                         const int64_t *src, int64_t P, const char *combine) {
  ts_graph *g = l->g;
  int64_t *rows = malloc(sizeof *rows * (size_t)P);
  bool *mask = malloc(sizeof *mask * (size_t)P);
  int64_t written = 0;
  if (!rows || !mask) {
    free(rows);
    free(mask);
    return TS_ERR(l->err, TS_ENOMEM, "lowering: out of memory");
  }
  for (int64_t p = 0; p < P; p++) {
    rows[p] = src[p] >= 0 ? src[p] : 0;
    mask[p] = src[p] >= 0;
    written += mask[p];
  }
  int w = gather_rows(l, n, u, rows, P, -1);
  if (w >= 0 && combine) {
    int ins[2] = {v, w};
    w = emit(l, n, combine, ins, 2, -1);
  }
  if (w >= 0 && written < P) {
    int64_t ms[2] = {P, 1};
    int m = gr_const_add(g, gr_fresh_name(g, "written"), TS_BOOL, 2, ms, mask);
    int ins[3] = {m, w, v};
    w = m < 0 ? m : emit(l, n, "Where", ins, 3, -1);
  }
  free(rows);
  free(mask);
  return w;
}

/* The most times a reduction may write one position. */
#define MAX_LAYERS 64

/* data viewed as [P, S] and updates as [U, S]; update u goes to position
 * tgt[u]. Without a reduction the last update of a position wins; with
 * one, the updates of a position are combined in their order, a layer
 * (Gather, op, Where) per occurrence. */
static int scatter_rows(gr_lowering *l, const gr_node *n, int64_t P, int64_t S,
                        int64_t U, const int64_t *tgt) {
  ts_graph *g = l->g;
  const gr_value x = g->values[n->inputs[0]];
  const char *red = gr_attr_string(n, "reduction", "none");
  static const char *const reds[][2] = {
      {"add", "Add"}, {"mul", "Mul"}, {"max", "Max"}, {"min", "Min"}};
  const char *combine = NULL;
  for (size_t i = 0; i < sizeof reds / sizeof reds[0]; i++)
    if (!strcmp(red, reds[i][0])) combine = reds[i][1];
  if (!combine && strcmp(red, "none"))
    return FAIL("reduction '%s' (none, add, mul, max or min)", red);
  if (U == 0) {
    int ins[1] = {n->inputs[0]};
    int v = emit(l, n, "Identity", ins, 1, n->outputs[0]);
    return v < 0 ? v : TS_OK;
  }
  int64_t *count = calloc((size_t)P, sizeof *count);
  int64_t *src = malloc(sizeof *src * (size_t)P);
  if (!count || !src) {
    free(count);
    free(src);
    return TS_ERR(l->err, TS_ENOMEM, "lowering: out of memory");
  }
  int64_t layers = 1;
  for (int64_t u = 0; u < U && combine; u++)
    if (++count[tgt[u]] > layers) layers = count[tgt[u]];
  int rc = TS_OK;
  if (layers > MAX_LAYERS)
    rc = FAIL("reduction '%s' writes a position %lld times (at most %d)", red,
              (long long)layers, MAX_LAYERS);
  int64_t ds[2] = {P, S}, us[2] = {U, S};
  int v = rc ? rc : reshape(l, n, n->inputs[0], 2, ds, -1);
  int up = v < 0 ? v : reshape(l, n, n->inputs[2], 2, us, -1);
  for (int64_t t = 0; t < layers && v >= 0 && up >= 0; t++) {
    /* layer t: each position's t-th update (without a reduction, the
     * last one) */
    for (int64_t p = 0; p < P; p++) src[p] = -1, count[p] = 0;
    for (int64_t u = 0; u < U; u++)
      if (!combine || count[tgt[u]]++ == t) src[tgt[u]] = u;
    v = scatter_layer(l, n, v, up, src, P, combine);
  }
  if (up < 0) v = up;
  free(count);
  free(src);
  if (v >= 0) v = reshape(l, n, v, x.ndim, x.shape, n->outputs[0]);
  return v < 0 ? v : TS_OK;
}

static int lower_scatter_nd(gr_lowering *l, const gr_node *n) {
  ts_graph *g = l->g;
  const gr_value x = g->values[n->inputs[0]], iv = g->values[n->inputs[1]];
  if (!gr_is_const(g, n->inputs[1]))
    return FAIL("the indices must be constants");
  int k = (int)iv.shape[iv.ndim - 1];
  int64_t P = prod(x.shape, 0, k), S = prod(x.shape, k, x.ndim);
  int64_t U = prod(iv.shape, 0, iv.ndim - 1);
  if (P > INDEX_MAX || U > INDEX_MAX) return FAIL("more than 2^28 positions");
  int64_t *tgt = malloc(sizeof *tgt * (size_t)(U ? U : 1));
  if (!tgt) return TS_ERR(l->err, TS_ENOMEM, "lowering: out of memory");
  for (int64_t u = 0; u < U; u++) {
    int64_t flat = 0;
    for (int j = 0; j < k; j++) {
      int64_t at = index_at(g, n->inputs[1], u * k + j, x.shape[j]);
      if (at < 0) {
        free(tgt);
        return FAIL("index %lld of the indices is out of range for the "
                    "data's axis %d (extent %lld)",
                    (long long)(u * k + j), j, (long long)x.shape[j]);
      }
      flat = flat * x.shape[j] + at;
    }
    tgt[u] = flat;
  }
  int rc = scatter_rows(l, n, P, S, U, tgt);
  free(tgt);
  return rc;
}

static int lower_scatter_elements(gr_lowering *l, const gr_node *n) {
  ts_graph *g = l->g;
  const gr_value x = g->values[n->inputs[0]], iv = g->values[n->inputs[1]];
  if (!gr_is_const(g, n->inputs[1]))
    return FAIL("the indices must be constants");
  int axis = (int)gr_attr_int(n, "axis", 0);
  if (axis < 0) axis += x.ndim;
  int64_t N = prod(x.shape, 0, x.ndim), E = prod(iv.shape, 0, iv.ndim);
  if (N > INDEX_MAX || E > INDEX_MAX) return FAIL("more than 2^28 positions");
  for (int d = 0; d < x.ndim; d++)
    if (d != axis && iv.shape[d] > x.shape[d])
      return FAIL("the indices are longer than the data on axis %d", d);
  int64_t *tgt = malloc(sizeof *tgt * (size_t)(E ? E : 1));
  if (!tgt) return TS_ERR(l->err, TS_ENOMEM, "lowering: out of memory");
  for (int64_t e = 0; e < E; e++) {
    int64_t rest = e, flat = 0, stride = 1;
    for (int d = iv.ndim - 1; d >= 0; d--) {
      int64_t c = rest % iv.shape[d];
      rest /= iv.shape[d];
      if (d == axis) {
        c = index_at(g, n->inputs[1], e, x.shape[d]);
        if (c < 0) {
          free(tgt);
          return FAIL("index %lld of the indices is out of range for the "
                      "data's axis %d (extent %lld)",
                      (long long)e, d, (long long)x.shape[d]);
        }
      }
      flat += c * stride;
      stride *= x.shape[d];
    }
    tgt[e] = flat;
  }
  int rc = scatter_rows(l, n, N, 1, E, tgt);
  free(tgt);
  return rc;
}

int gr_lower_index(gr_lowering *l, const gr_node *n) {
  if (!strcmp(n->op, "GatherND")) return lower_gather_nd(l, n);
  if (!strcmp(n->op, "ScatterND")) return lower_scatter_nd(l, n);
  if (!strcmp(n->op, "ScatterElements") || !strcmp(n->op, "Scatter"))
    return lower_scatter_elements(l, n);
  return 1;
}
