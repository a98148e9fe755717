/*
 * lower_more.c — the wider ONNX operator set, rewritten into the core
 * operators that fusion, the layout pass and the code generator know, so
 * that each new operator costs a rewrite and not a kernel of its own:
 *   Split               -> one Slice per output
 *   Expand              -> Add of a zero constant shaped like the new axes
 *                          (Or for bool), a view when nothing is repeated
 *   Tile                -> Reshape to [.., 1, d, ..], Add of zeros
 *                          [.., r, 1, ..], Reshape to [.., r·d, ..]
 *   DepthToSpace,
 *   SpaceToDepth        -> Reshape, Transpose, Reshape
 *   InstanceNormalization, GroupNormalization
 *                       -> LayerNormalization over the [N, C, S] or
 *                          [N, G, C/G·S] view, then the per-channel (or
 *                          per-group) scale and shift
 *   Pad                 -> constant: Slice for negative pads, Concat with
 *                          constant blocks; reflect, edge, wrap: a Gather
 *                          per padded axis with the source positions
 *   Resize              -> per resized axis, Gathers at the source
 *                          positions the coordinate transformation gives,
 *                          weighted by constants for linear (2 taps) and
 *                          cubic (4 taps); nearest is one Gather
 *   Trilu               -> Where with a constant mask
 *   Softmax, LogSoftmax (opsets before 13: over the input coerced to 2-D
 *                          at the axis) -> Reshape, the opset-13 form,
 *                          Reshape
 *   Hardmax             -> ReduceMax, Equal, Where over positions, Equal
 *   OneHot              -> Where(index == position, on, off)
 *   CumSum              -> MatMul over the axis by a constant triangle
 *   LpPool              -> (AveragePool of |x|^p · window)^(1/p)
 *   LRN                 -> x / (bias + alpha/size · S)^beta, S a 1x1 Conv
 *                          of x² with a constant channel band
 *   LayerNormalization with its Mean or InvStdDev read -> the same with Y
 *                          only, and the two from ReduceMean nodes
 *   Dropout with its mask read -> a view of the data, a mask of trues
 *   CastLike            -> Cast
 *   LogSoftmax          -> ReduceMax, Sub, Exp, ReduceSum, Log, Sub
 *   LpNormalization     -> Div by the ReduceSum of |x| or sqrt of x^2's
 *   GlobalMaxPool       -> ReduceMax over the spatial axes
 *   ArgMax, ArgMin      -> ReduceMax, Equal, Where over constant positions,
 *                          ReduceMax, Cast (the first or last position)
 *   Einsum              -> (one or two operands, no diagonal) ReduceSum of
 *                          the labels only one operand has, Transposes to
 *                          [batch, kept, contracted] order, one MatMul,
 *                          Reshape and Transpose to the output's order
 *   ReduceMin, ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum,
 *   ReduceLogSumExp     -> ReduceMax / ReduceSum with elementwise nodes
 * Each rewrite is exact up to float rounding (the zeros added are exact;
 * the interpolation weights are the ones onnxruntime computes).
 */
#include "lower.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL GR_LOWER_FAIL
#define NOMEM()                                                                \
  TS_ERR(l->err, TS_ENOMEM,                                                    \
         "lowering '%s': out of memory, or a constant over 2^28 elements",     \
         n->name)
/* Values are read through local copies (x_v): adding a value or constant
 * may move the graph's value array. */

/* Emits op(ins) with attributes into a fresh value named after n's output
 * (or into `out` when out >= 0); returns the value, or an error code. */
static int emit_a(gr_lowering *l, const gr_node *n, const char *op,
                  const int *ins, int n_ins, int out, const gr_attr *attrs,
                  int n_attrs) {
  return gr_lower_node(l, n, op, ins, n_ins, out, attrs, n_attrs, "l");
}

static int emit1(gr_lowering *l, const gr_node *n, const char *op, int a,
                 int out) {
  return emit_a(l, n, op, &a, 1, out, NULL, 0);
}

static int emit2(gr_lowering *l, const gr_node *n, const char *op, int a, int b,
                 int out) {
  int ins[2] = {a, b};
  return emit_a(l, n, op, ins, 2, out, NULL, 0);
}

static int const_i64(ts_graph *g, int64_t count, const int64_t *v) {
  return gr_const_add(g, gr_fresh_name(g, "lowered"), TS_INT64, 1, &count, v);
}

/* The most elements a constant that lowering makes may hold (1 GiB of
 * float32): a model asking for more (an Expand or a Pad by a huge amount)
 * gets TS_ENOMEM and a message, not an allocation of that size. */
#define LOWERED_CONST_MAX (1ll << 28)

/* A constant of dtype t and the given shape, every element v. */
static int const_fill(ts_graph *g, ts_dtype t, int nd, const int64_t *shape,
                      double v) {
  int64_t e = 1;
  for (int i = 0; i < nd; i++) {
    if (shape[i] < 0 || (shape[i] && e > LOWERED_CONST_MAX / shape[i]))
      return TS_ENOMEM;
    e *= shape[i];
  }
  int id = gr_const_reserve(g, gr_fresh_name(g, v == 0 ? "zeros" : "fill"), t,
                            nd, shape);
  if (id < 0) return id;
  void *d = gr_const_data(g, id);
  if (v == 0)
    memset(d, 0, (size_t)e * ts_dtype_elem_bytes(t));
  else
    for (int64_t i = 0; i < e; i++) ts_host_set(d, t, i, v);
  return id;
}

static int reshape(gr_lowering *l, const gr_node *n, int x, int nd,
                   const int64_t *shape, int out) {
  return gr_lower_reshape(l, n, x, nd, shape, out, "l");
}

static int slice(gr_lowering *l, const gr_node *n, int x, int64_t axis,
                 int64_t start, int64_t end, int64_t step, int out) {
  return gr_lower_slice(l, n, x, axis, start, end, step, out, "l");
}

static int gather(gr_lowering *l, const gr_node *n, int x, int axis,
                  const int64_t *idx, int64_t count, int out) {
  int k = const_i64(l->g, count, idx);
  if (k < 0) return k;
  gr_attr a = {.name = "axis", .kind = GR_ATTR_INT, .i = axis};
  int ins[2] = {x, k};
  return emit_a(l, n, "Gather", ins, 2, out, &a, 1);
}

/* ---- Split, Expand, Tile ---- */

static int lower_split(gr_lowering *l, const gr_node *n) {
  int64_t sizes[16], off = 0;
  int axis, rc = gr_split_sizes(l->g, n, sizes, &axis);
  if (rc) return FAIL("the split sizes are not constants");
  for (int k = 0; k < n->n_outputs; k++) {
    rc = slice(l, n, n->inputs[0], axis, off, off + sizes[k], 1, n->outputs[k]);
    if (rc < 0) return rc;
    off += sizes[k];
  }
  return TS_OK;
}

/* x (shape xs, rank xn) broadcast to (on, os) by adding zeros. */
static int broadcast_to(gr_lowering *l, const gr_node *n, int x, int on,
                        const int64_t *os, int out) {
  ts_graph *g = l->g;
  const gr_value xv_v = g->values[x], *xv = &xv_v;
  int64_t z[TS_MAX_DIMS];
  bool same = xv->ndim == on;
  for (int i = 0; i < on; i++) {
    int j = i - (on - xv->ndim);
    int64_t d = j >= 0 ? xv->shape[j] : 1;
    z[i] = d == 1 && os[i] != 1 ? os[i] : 1;
    same = same && z[i] == 1;
  }
  if (same) return reshape(l, n, x, on, os, out);
  bool is_bool = ts_dtype_eq(xv->dtype, TS_BOOL);
  int zc = const_fill(g, xv->dtype, on, z, 0);
  if (zc < 0) return NOMEM();
  return emit2(l, n, is_bool ? "Or" : "Add", x, zc, out);
}

static int lower_expand(gr_lowering *l, const gr_node *n) {
  const gr_value o_v = l->g->values[n->outputs[0]], *o = &o_v;
  int rc = broadcast_to(l, n, n->inputs[0], o->ndim, o->shape, n->outputs[0]);
  return rc < 0 ? rc : TS_OK;
}

static int lower_tile(gr_lowering *l, const gr_node *n) {
  ts_graph *g = l->g;
  const gr_value x_v = g->values[n->inputs[0]], *x = &x_v;
  const gr_value o_v = g->values[n->outputs[0]], *o = &o_v;
  int64_t inter[TS_MAX_DIMS], wide[TS_MAX_DIMS];
  int k = 0;
  for (int i = 0; i < x->ndim; i++) {
    int64_t r = x->shape[i] ? o->shape[i] / x->shape[i] : 1;
    if (r > 1) {
      if (k + 2 > TS_MAX_DIMS) return FAIL("repeats on too many axes");
      inter[k] = 1, wide[k++] = r;
    }
    if (k + 1 > TS_MAX_DIMS) return FAIL("repeats on too many axes");
    inter[k] = x->shape[i], wide[k++] = x->shape[i];
  }
  if (gr_value_elems(o) == 0) return FAIL("an empty result");
  int v = reshape(l, n, n->inputs[0], k, inter, -1);
  if (v >= 0) v = broadcast_to(l, n, v, k, wide, -1);
  if (v >= 0) v = reshape(l, n, v, o->ndim, o->shape, n->outputs[0]);
  return v < 0 ? v : TS_OK;
}

/* ---- DepthToSpace, SpaceToDepth ---- */

static int lower_depth_space(gr_lowering *l, const gr_node *n) {
  const gr_value x_v = l->g->values[n->inputs[0]], *x = &x_v;
  const gr_value o_v = l->g->values[n->outputs[0]], *o = &o_v;
  int64_t bs = gr_attr_int(n, "blocksize", 1), N = x->shape[0];
  int64_t C = x->shape[1], H = x->shape[2], W = x->shape[3];
  int64_t six[6], perm[6];
  if (!strcmp(n->op, "SpaceToDepth")) {
    int64_t s[6] = {N, C, H / bs, bs, W / bs, bs}, p[6] = {0, 3, 5, 1, 2, 4};
    memcpy(six, s, sizeof s), memcpy(perm, p, sizeof p);
  } else if (!strcmp(gr_attr_string(n, "mode", "DCR"), "CRD")) {
    int64_t s[6] = {N, C / (bs * bs), bs, bs, H, W}, p[6] = {0, 1, 4, 2, 5, 3};
    memcpy(six, s, sizeof s), memcpy(perm, p, sizeof p);
  } else {
    int64_t s[6] = {N, bs, bs, C / (bs * bs), H, W}, p[6] = {0, 3, 4, 1, 5, 2};
    memcpy(six, s, sizeof s), memcpy(perm, p, sizeof p);
  }
  gr_attr a = {.name = "perm", .kind = GR_ATTR_INTS, .n = 6, .ints = perm};
  int v = reshape(l, n, n->inputs[0], 6, six, -1);
  if (v >= 0) v = emit_a(l, n, "Transpose", &v, 1, -1, &a, 1);
  if (v >= 0) v = reshape(l, n, v, 4, o->shape, n->outputs[0]);
  return v < 0 ? v : TS_OK;
}

/* ---- InstanceNormalization, GroupNormalization ---- */

/* p (a float32 vector of c entries) viewed as [c, 1, ..] of rank r. */
static int per_axis(gr_lowering *l, const gr_node *n, int p, int r) {
  int64_t s[TS_MAX_DIMS];
  s[0] = gr_value_elems(&l->g->values[p]);
  for (int i = 1; i < r; i++) s[i] = 1;
  if (!gr_is_const(l->g, p)) return reshape(l, n, p, r, s, -1);
  /* a copy: adding a constant may move the store */
  size_t bytes = sizeof(float) * (size_t)s[0];
  float *d = ts_malloc(bytes ? bytes : 1);
  if (!d) return NOMEM();
  memcpy(d, gr_const_data(l->g, p), bytes);
  int c = gr_const_add(l->g, gr_fresh_name(l->g, l->g->values[p].name),
                       TS_FLOAT32, r, s, d);
  free(d);
  return c;
}

static int lower_norm(gr_lowering *l, const gr_node *n) {
  ts_graph *g = l->g;
  const gr_value x_v = g->values[n->inputs[0]], *x = &x_v;
  int64_t N = x->shape[0], C = x->shape[1], S = 1;
  for (int i = 2; i < x->ndim; i++) S *= x->shape[i];
  bool group = !strcmp(n->op, "GroupNormalization");
  int64_t G = group ? gr_attr_int(n, "num_groups", 1) : C;
  int64_t row = C / G * S, view[3] = {N, G, row};
  int64_t pe = gr_value_elems(&g->values[n->inputs[1]]);
  bool per_group = group && pe == G && G != C;
  int ones = const_fill(g, TS_FLOAT32, 1, &row, 1);
  int zeros = const_fill(g, TS_FLOAT32, 1, &row, 0);
  if (ones < 0 || zeros < 0) return NOMEM();
  gr_attr at[2] = {{.name = "axis", .kind = GR_ATTR_INT, .i = -1},
                   {.name = "epsilon",
                    .kind = GR_ATTR_FLOAT,
                    .f = gr_attr_float(n, "epsilon", 1e-5)}};
  int v = reshape(l, n, n->inputs[0], 3, view, -1);
  if (v < 0) return v;
  int ln[3] = {v, ones, zeros};
  if ((v = emit_a(l, n, "LayerNormalization", ln, 3, -1, at, 2)) < 0) return v;
  if (!per_group && (v = reshape(l, n, v, x->ndim, x->shape, -1)) < 0) return v;
  int r = per_group ? 2 : x->ndim - 1;
  int sc = per_axis(l, n, n->inputs[1], r),
      sh = per_axis(l, n, n->inputs[2], r);
  if (sc < 0 || sh < 0) return sc < 0 ? sc : sh;
  if ((v = emit2(l, n, "Mul", v, sc, -1)) < 0) return v;
  if (per_group) {
    if ((v = emit2(l, n, "Add", v, sh, -1)) < 0) return v;
    v = reshape(l, n, v, x->ndim, x->shape, n->outputs[0]);
  } else {
    v = emit2(l, n, "Add", v, sh, n->outputs[0]);
  }
  return v < 0 ? v : TS_OK;
}

/* ---- Pad ---- */

/* The source position of padded position p (0 <= p + pad < out) on an
 * axis of d entries. */
static int64_t pad_source(const char *mode, int64_t p, int64_t d) {
  if (!strcmp(mode, "edge")) return p < 0 ? 0 : p >= d ? d - 1 : p;
  if (!strcmp(mode, "wrap")) return ((p % d) + d) % d;
  if (d == 1) return 0; /* reflect */
  int64_t period = 2 * (d - 1);
  p = ((p % period) + period) % period;
  return p < d ? p : period - p;
}

static int lower_pad(gr_lowering *l, const gr_node *n) {
  ts_graph *g = l->g;
  const gr_value x_v = g->values[n->inputs[0]], *x = &x_v;
  int64_t pads[2 * TS_MAX_DIMS], shape[TS_MAX_DIMS];
  if (gr_pad_amounts(g, n, pads)) return FAIL("pads that are not constants");
  const char *mode = gr_attr_string(n, "mode", "constant");
  bool constant = !strcmp(mode, "constant");
  double value = 0;
  if (constant && n->n_inputs > 2 && n->inputs[2] >= 0) {
    int cv = n->inputs[2];
    if (!gr_is_const(g, cv) || gr_value_elems(&g->values[cv]) != 1)
      return FAIL("a constant_value that is not a constant scalar");
    value = ts_host_get(gr_const_data(g, cv), g->values[cv].dtype, 0);
  }
  int r = x->ndim, v = n->inputs[0], last = -1;
  memcpy(shape, x->shape, sizeof shape);
  for (int i = 0; i < r; i++)
    if (pads[i] || pads[i + r]) last = i;
  if (last < 0) {
    int rc = reshape(l, n, v, r, shape, n->outputs[0]);
    return rc < 0 ? rc : TS_OK;
  }
  for (int i = 0; i <= last && v >= 0; i++) {
    int64_t b = pads[i], e = pads[i + r], d = shape[i], len = d + b + e;
    if (!b && !e) continue;
    int out = i == last ? n->outputs[0] : -1;
    if (!constant) {
      int64_t *idx = ts_malloc(sizeof *idx * (size_t)(len ? len : 1));
      if (!idx) return NOMEM();
      for (int64_t j = 0; j < len; j++) idx[j] = pad_source(mode, j - b, d);
      v = gather(l, n, v, i, idx, len, out);
      free(idx);
      shape[i] = len;
      continue;
    }
    int64_t cb = b < 0 ? -b : 0, ce = e < 0 ? -e : 0;
    bool grow = b > 0 || e > 0;
    if (cb || ce) {
      v = slice(l, n, v, i, cb, d - ce, 1, grow ? -1 : out);
      shape[i] = d - cb - ce;
    }
    if (!grow || v < 0) continue;
    int parts[3], np = 0;
    int64_t blk[TS_MAX_DIMS];
    memcpy(blk, shape, sizeof blk);
    if (b > 0) {
      blk[i] = b;
      parts[np++] = const_fill(g, x->dtype, r, blk, value);
    }
    parts[np++] = v;
    if (e > 0) {
      blk[i] = e;
      parts[np++] = const_fill(g, x->dtype, r, blk, value);
    }
    for (int k = 0; k < np; k++)
      if (parts[k] < 0) return NOMEM();
    gr_attr a = {.name = "axis", .kind = GR_ATTR_INT, .i = i};
    v = emit_a(l, n, "Concat", parts, np, out, &a, 1);
    shape[i] = len;
  }
  return v < 0 ? v : TS_OK;
}

/* ---- Resize ---- */

/* The entries of constant vector v as doubles; false when it is not one. */
static bool const_doubles(const ts_graph *g, int v, double *buf, int *count) {
  if (v < 0 || !gr_is_const(g, v) || g->values[v].ndim != 1) return false;
  const gr_value s_v = g->values[v], *s = &s_v;
  *count = (int)s->shape[0];
  if (*count > TS_MAX_DIMS) return false;
  for (int i = 0; i < *count; i++)
    buf[i] = ts_host_get(gr_const_data(g, v), s->dtype, i);
  return true;
}

int gr_resize_plan(const ts_graph *g, const gr_node *n, int64_t *out,
                   double *scale, ts_error *err) {
  const gr_value x_v = g->values[n->inputs[0]], *x = &x_v;
  int r = x->ndim, na = 0, ns = 0, nz = 0;
  const int64_t *axes = gr_attr_ints(n, "axes", &na);
  int sv = n->n_inputs > 2 ? n->inputs[2] : -1;
  int zv = n->n_inputs > 3 ? n->inputs[3] : -1;
  double sc[TS_MAX_DIMS];
  const char *ctm =
      gr_attr_string(n, "coordinate_transformation_mode", "half_pixel");
  const char *mode = gr_attr_string(n, "mode", "nearest");
#define RFAIL(...)                                                             \
  TS_ERR(err, TS_EUNSUPPORTED,                                                 \
         "node '%s' (Resize, opset %d): " GR_FMT_FIRST(__VA_ARGS__), n->name,  \
         g->opset GR_REST_ARGS(__VA_ARGS__))
  if (strcmp(mode, "nearest") && strcmp(mode, "linear") &&
      strcmp(mode, "cubic"))
    return RFAIL("mode '%s' (nearest, linear or cubic)", mode);
  static const char *const ctms[] = {"half_pixel",
                                     "half_pixel_symmetric",
                                     "pytorch_half_pixel",
                                     "align_corners",
                                     "asymmetric",
                                     "tf_half_pixel_for_nn",
                                     NULL};
  bool ok = false;
  for (int i = 0; ctms[i]; i++) ok = ok || !strcmp(ctm, ctms[i]);
  if (!ok)
    return RFAIL("coordinate_transformation_mode '%s' is not supported", ctm);
  if (gr_attr_int(n, "antialias", 0))
    return RFAIL("antialias=1 is not supported");
  if (strcmp(gr_attr_string(n, "keep_aspect_ratio_policy", "stretch"),
             "stretch"))
    return RFAIL("keep_aspect_ratio_policy other than stretch");
  if (zv >= 0 && g->values[zv].ndim >= 0 && gr_value_elems(&g->values[zv]))
    sv = -1; /* sizes given */
  else
    zv = -1;
  if (sv >= 0 && g->values[sv].ndim >= 0 && !gr_value_elems(&g->values[sv]))
    sv = -1;
  if (sv < 0 && zv < 0) return RFAIL("neither scales nor sizes");
  int k = na ? na : r;
  for (int i = 0; i < r; i++) out[i] = x->shape[i], scale[i] = 1;
  if (sv >= 0 && !const_doubles(g, sv, sc, &ns)) return -2;
  const int64_t *sz = NULL;
  if (zv >= 0) {
    if (!gr_is_const(g, zv) || !ts_dtype_eq(g->values[zv].dtype, TS_INT64))
      return -2;
    sz = gr_const_data(g, zv);
    nz = (int)gr_value_elems(&g->values[zv]);
  }
  if ((sv >= 0 ? ns : nz) != k)
    return RFAIL("%d scales or sizes for %d axes", sv >= 0 ? ns : nz, k);
  for (int j = 0; j < k; j++) {
    int a = na ? (int)(axes[j] < 0 ? axes[j] + r : axes[j]) : j;
    if (a < 0 || a >= r) return RFAIL("axis %d out of range", a);
    if (sz) {
      if (sz[j] <= 0 || sz[j] > (1 << 24))
        return RFAIL("size %lld", (long long)sz[j]);
      out[a] = sz[j];
      scale[a] = (double)sz[j] / (double)x->shape[a];
    } else {
      if (!(sc[j] > 0) || (double)x->shape[a] * sc[j] > (double)(1 << 24))
        return RFAIL("scale %g", sc[j]);
      out[a] = (int64_t)floor((double)x->shape[a] * sc[j]);
      scale[a] = sc[j];
      if (out[a] <= 0) return RFAIL("axis %d resized to nothing", a);
    }
  }
  return 0;
#undef RFAIL
}

/* The source coordinate of output position j on an axis of in -> out
 * entries resized by scale s; len is the resized length the coordinate
 * modes divide by: out when sizes are given, in * s when scales are (as
 * ONNX defines it, not rounded). */
static double source_coord(const char *ctm, int64_t j, int64_t in, int64_t out,
                           double s, double len) {
  if (!strcmp(ctm, "align_corners"))
    return out == 1 ? 0 : (double)j * (double)(in - 1) / (len - 1);
  if (!strcmp(ctm, "asymmetric")) return (double)j / s;
  if (!strcmp(ctm, "tf_half_pixel_for_nn")) return ((double)j + 0.5) / s;
  if (!strcmp(ctm, "pytorch_half_pixel"))
    return out > 1 ? ((double)j + 0.5) / s - 0.5 : 0;
  if (!strcmp(ctm, "half_pixel_symmetric")) {
    double adj = (double)out / len, center = (double)in / 2;
    return center * (1 - adj) + ((double)j + 0.5) / s - 0.5;
  }
  return ((double)j + 0.5) / s - 0.5; /* half_pixel */
}

static int64_t clamp_i(int64_t v, int64_t lo, int64_t hi) {
  return v < lo ? lo : v > hi ? hi : v;
}

static int64_t nearest(const char *nm, double c) {
  double f = floor(c);
  if (!strcmp(nm, "floor")) return (int64_t)f;
  if (!strcmp(nm, "ceil")) return (int64_t)ceil(c);
  if (c - f == 0.5)
    return (int64_t)(strcmp(nm, "round_prefer_ceil") ? f : f + 1);
  return (int64_t)round(c);
}

/* Cubic convolution weight of a tap at distance t (Keys, coefficient A). */
static double cubic_w(double t, double A) {
  t = fabs(t);
  if (t <= 1) return ((A + 2) * t - (A + 3)) * t * t + 1;
  if (t < 2) return ((A * t - 5 * A) * t + 8 * A) * t - 4 * A;
  return 0;
}

/* One resized axis: taps Gathers, each scaled by its weights (a constant
 * [out, 1, ..]) and summed. */
static int resize_axis(gr_lowering *l, const gr_node *n, int v, int axis,
                       int64_t in, int64_t len, double s, double rlen,
                       int out) {
  ts_graph *g = l->g;
  const char *mode = gr_attr_string(n, "mode", "nearest");
  const char *ctm =
      gr_attr_string(n, "coordinate_transformation_mode", "half_pixel");
  int taps = !strcmp(mode, "nearest") ? 1 : !strcmp(mode, "linear") ? 2 : 4;
  int64_t *idx = ts_malloc(sizeof *idx * (size_t)(len * taps));
  double *w = ts_malloc(sizeof *w * (size_t)(len * taps));
  if (!idx || !w) {
    free(idx), free(w);
    return NOMEM();
  }
  double A = gr_attr_float(n, "cubic_coeff_a", -0.75);
  bool exclude = gr_attr_int(n, "exclude_outside", 0) != 0;
  const char *nm = gr_attr_string(n, "nearest_mode", "round_prefer_floor");
  for (int64_t j = 0; j < len; j++) {
    double c = source_coord(ctm, j, in, len, s, rlen);
    if (taps == 1) {
      idx[j] = clamp_i(nearest(nm, c), 0, in - 1), w[j] = 1;
    } else if (taps == 2) {
      c = c < 0 ? 0 : c > (double)(in - 1) ? (double)(in - 1) : c;
      int64_t i0 = (int64_t)c, i1 = i0 + 1 < in ? i0 + 1 : in - 1;
      idx[j] = i0, idx[len + j] = i1;
      w[len + j] = c - (double)i0, w[j] = 1 - w[len + j];
    } else {
      double f = floor(c), sum = 0;
      for (int t = 0; t < 4; t++) {
        int64_t p = (int64_t)f - 1 + t;
        double wt = cubic_w(c - (double)p, A);
        if (exclude && (p < 0 || p >= in)) wt = 0;
        idx[t * len + j] = clamp_i(p, 0, in - 1);
        w[t * len + j] = wt;
        sum += wt;
      }
      for (int t = 0; exclude && sum != 0 && t < 4; t++) w[t * len + j] /= sum;
    }
  }
  const gr_value x_v = g->values[v], *x = &x_v;
  int64_t ws[TS_MAX_DIMS];
  int wr = x->ndim - axis;
  ws[0] = len;
  for (int i = 1; i < wr; i++) ws[i] = 1;
  int acc = -1;
  for (int t = 0; t < taps; t++) {
    bool final = t == taps - 1;
    int gv = gather(l, n, v, axis, idx + t * len, len, taps == 1 ? out : -1);
    if (gv < 0 || taps == 1) {
      acc = gv;
      break;
    }
    int wc = gr_lower_const_f32(g, gr_fresh_name(g, "resize_w"), wr, ws,
                                w + t * len, len);
    int m = wc < 0 ? NOMEM() : emit2(l, n, "Mul", gv, wc, -1);
    acc = m < 0 || t == 0 ? m : emit2(l, n, "Add", acc, m, final ? out : -1);
    if (acc < 0) break;
  }
  free(idx), free(w);
  return acc;
}

static int lower_resize(gr_lowering *l, const gr_node *n) {
  ts_graph *g = l->g;
  const gr_value x_v = g->values[n->inputs[0]], *x = &x_v;
  int64_t out[TS_MAX_DIMS];
  double scale[TS_MAX_DIMS];
  int rc = gr_resize_plan(g, n, out, scale, l->err);
  if (rc == -2) return FAIL("scales or sizes that are not constants");
  if (rc) return rc;
  if (!ts_dtype_eq(x->dtype, TS_FLOAT32) &&
      strcmp(gr_attr_string(n, "mode", "nearest"), "nearest"))
    return FAIL("interpolation of a non-float32 tensor");
  int last = -1, v = n->inputs[0], zv = n->n_inputs > 3 ? n->inputs[3] : -1;
  bool sizes_given = zv >= 0 && gr_value_elems(&g->values[zv]) > 0;
  for (int i = 0; i < x->ndim; i++)
    if (out[i] != x->shape[i] || scale[i] != 1) last = i;
  if (last < 0) {
    rc = reshape(l, n, v, x->ndim, out, n->outputs[0]);
    return rc < 0 ? rc : TS_OK;
  }
  int64_t in[TS_MAX_DIMS];
  memcpy(in, x->shape, sizeof in);
  for (int i = 0; i <= last && v >= 0; i++)
    if (out[i] != in[i] || scale[i] != 1)
      v = resize_axis(l, n, v, i, in[i], out[i], scale[i],
                      sizes_given ? (double)out[i] : (double)in[i] * scale[i],
                      i == last ? n->outputs[0] : -1);
  return v < 0 ? v : TS_OK;
}

/* ---- Trilu, the Reduce variants ---- */

static int lower_trilu(gr_lowering *l, const gr_node *n) {
  ts_graph *g = l->g;
  const gr_value x_v = g->values[n->inputs[0]], *x = &x_v;
  int64_t k = 0;
  if (n->n_inputs > 1 && n->inputs[1] >= 0) {
    if (!gr_is_const(g, n->inputs[1])) return FAIL("k is not a constant");
    k = ts_host_get_int(gr_const_data(g, n->inputs[1]),
                        g->values[n->inputs[1]].dtype, 0);
  }
  bool upper = gr_attr_int(n, "upper", 1) != 0;
  int64_t R = x->shape[x->ndim - 2], C = x->shape[x->ndim - 1];
  int64_t ms[2] = {R, C};
  int mask =
      gr_const_reserve(g, gr_fresh_name(g, "trilu_mask"), TS_BOOL, 2, ms);
  int zero = const_fill(g, x->dtype, 0, NULL, 0);
  if (mask < 0 || zero < 0) return NOMEM();
  uint8_t *m = gr_const_data(g, mask);
  for (int64_t i = 0; i < R; i++)
    for (int64_t j = 0; j < C; j++)
      m[i * C + j] = upper ? j - i >= k : j - i <= k;
  int ins[3] = {mask, n->inputs[0], zero};
  int rc = emit_a(l, n, "Where", ins, 3, n->outputs[0], NULL, 0);
  return rc < 0 ? rc : TS_OK;
}

/* A reduction like n's (its axes, keepdims) of x into out. */
static int reduce_like(gr_lowering *l, const gr_node *n, const char *op, int x,
                       int keepdims, int out) {
  int ins[2] = {x, n->n_inputs > 1 ? n->inputs[1] : -1};
  gr_attr at[4];
  int na = 0;
  for (int i = 0; i < n->n_attrs && na < 3; i++)
    if (strcmp(n->attrs[i].name, "keepdims")) at[na++] = n->attrs[i];
  at[na++] = (gr_attr){.name = "keepdims", .kind = GR_ATTR_INT, .i = keepdims};
  return emit_a(l, n, op, ins, ins[1] >= 0 ? 2 : 1, out, at, na);
}

static int lower_reduce(gr_lowering *l, const gr_node *n) {
  const char *op = n->op + 6;
  int x = n->inputs[0], out = n->outputs[0], v;
  int keep = (int)gr_attr_int(n, "keepdims", 1);
  if (!ts_dtype_eq(l->g->values[x].dtype, TS_FLOAT32))
    return FAIL("wants float32");
  if (!strcmp(op, "Min")) {
    v = emit1(l, n, "Neg", x, -1);
    if (v >= 0) v = reduce_like(l, n, "ReduceMax", v, keep, -1);
    if (v >= 0) v = emit1(l, n, "Neg", v, out);
  } else if (!strcmp(op, "LogSumExp")) {
    int m = reduce_like(l, n, "ReduceMax", x, 1, -1);
    v = m < 0 ? m : emit2(l, n, "Sub", x, m, -1);
    if (v >= 0) v = emit1(l, n, "Exp", v, -1);
    if (v >= 0) v = reduce_like(l, n, "ReduceSum", v, keep, -1);
    if (v >= 0) v = emit1(l, n, "Log", v, -1);
    if (v >= 0 && !keep) {
      const gr_value o_v = l->g->values[v], *o = &o_v;
      m = reshape(l, n, m, o->ndim, o->shape, -1);
    }
    if (v >= 0) v = m < 0 ? m : emit2(l, n, "Add", v, m, out);
  } else {
    bool sq = !strcmp(op, "L2") || !strcmp(op, "SumSquare");
    v = sq                  ? emit2(l, n, "Mul", x, x, -1)
        : !strcmp(op, "L1") ? emit1(l, n, "Abs", x, -1)
                            : x;
    bool post = !strcmp(op, "L2") || !strcmp(op, "LogSum");
    if (v >= 0) v = reduce_like(l, n, "ReduceSum", v, keep, post ? -1 : out);
    if (v >= 0 && post)
      v = emit1(l, n, !strcmp(op, "L2") ? "Sqrt" : "Log", v, out);
  }
  return v < 0 ? v : TS_OK;
}

static int lower_einsum(gr_lowering *l, const gr_node *n);
static int reduce_axis(gr_lowering *l, const gr_node *n, const char *op, int x,
                       const int64_t *axes, int na, int keep, int out);

/* ---- OneHot, CumSum, Hardmax, LpPool ---- */

/* A constant of dtype t holding sign * i + offset along the first of r
 * axes ([L, 1, ..]). */
static int positions(ts_graph *g, ts_dtype t, int64_t L, int r, double sign,
                     double offset) {
  int64_t ps[TS_MAX_DIMS];
  ps[0] = L;
  for (int i = 1; i < r; i++) ps[i] = 1;
  int c = gr_const_reserve(g, gr_fresh_name(g, "positions"), t, r, ps);
  if (c < 0) return c;
  void *d = gr_const_data(g, c);
  for (int64_t i = 0; i < L; i++)
    ts_host_set(d, t, i, sign * (double)i + offset);
  return c;
}

/* OneHot: Where(index == position or index == position - depth, on, off)
 * with the index unsqueezed at the axis. */
static int lower_one_hot(gr_lowering *l, const gr_node *n) {
  ts_graph *g = l->g;
  const gr_value x_v = g->values[n->inputs[0]], *x = &x_v;
  const gr_value o_v = g->values[n->outputs[0]], *o = &o_v;
  int dv = n->inputs[1], vv = n->inputs[2];
  if (!gr_is_const(g, dv) || !gr_is_const(g, vv))
    return FAIL("depth and values must be constants");
  int64_t depth = ts_host_get_int(gr_const_data(g, dv), g->values[dv].dtype, 0);
  double off = ts_host_get(gr_const_data(g, vv), g->values[vv].dtype, 0);
  double on = ts_host_get(gr_const_data(g, vv), g->values[vv].dtype, 1);
  int64_t axis = gr_attr_int(n, "axis", -1);
  if (axis < 0) axis += o->ndim;
  int64_t us[TS_MAX_DIMS];
  for (int i = 0, j = 0; i < o->ndim; i++)
    us[i] = i == axis ? 1 : x->shape[j++];
  int r = o->ndim - (int)axis;
  int p0 = positions(g, x->dtype, depth, r, 1, 0);
  int p1 = positions(g, x->dtype, depth, r, 1, -(double)depth);
  int kon = const_fill(g, o->dtype, 0, NULL, on);
  int koff = const_fill(g, o->dtype, 0, NULL, off);
  if (p0 < 0 || p1 < 0 || kon < 0 || koff < 0) return NOMEM();
  int u = reshape(l, n, n->inputs[0], o->ndim, us, -1);
  int e0 = u < 0 ? u : emit2(l, n, "Equal", u, p0, -1);
  int e1 = e0 < 0 ? e0 : emit2(l, n, "Equal", u, p1, -1);
  int m = e1 < 0 ? e1 : emit2(l, n, "Or", e0, e1, -1);
  if (m < 0) return m;
  int ins[3] = {m, kon, koff};
  int v = emit_a(l, n, "Where", ins, 3, n->outputs[0], NULL, 0);
  return v < 0 ? v : TS_OK;
}

/* x of rank r with axes a and r-1 swapped. */
static int swap_last(gr_lowering *l, const gr_node *n, int x, int r, int a,
                     int out) {
  int64_t perm[TS_MAX_DIMS];
  for (int i = 0; i < r; i++) perm[i] = i;
  perm[a] = r - 1, perm[r - 1] = a;
  gr_attr at = {.name = "perm", .kind = GR_ATTR_INTS, .n = r, .ints = perm};
  return emit_a(l, n, "Transpose", &x, 1, out, &at, 1);
}

/* CumSum: a MatMul over the axis by a constant triangle of ones. */
static int lower_cumsum(gr_lowering *l, const gr_node *n) {
  ts_graph *g = l->g;
  const gr_value x_v = g->values[n->inputs[0]], *x = &x_v;
  int av = n->inputs[1];
  if (!gr_is_const(g, av)) return FAIL("the axis must be a constant");
  if (!ts_dtype_eq(x->dtype, TS_FLOAT32)) return FAIL("wants float32");
  int64_t a = ts_host_get_int(gr_const_data(g, av), g->values[av].dtype, 0);
  if (a < 0) a += x->ndim;
  if (a < 0 || a >= x->ndim) return FAIL("axis out of range");
  int64_t L = x->shape[a], ts[2] = {L, L};
  if (L > 4096) return FAIL("an axis of %lld (4096 at most)", (long long)L);
  bool ex = gr_attr_int(n, "exclusive", 0), rev = gr_attr_int(n, "reverse", 0);
  double *t = ts_calloc((size_t)(L * L) + 1, sizeof *t);
  if (!t) return NOMEM();
  for (int64_t i = 0; i < L; i++) /* row i: input i, column j: output j */
    for (int64_t j = 0; j < L; j++)
      t[i * L + j] = rev ? (ex ? i > j : i >= j) : (ex ? i < j : i <= j);
  int tc = gr_lower_const_f32(g, gr_fresh_name(g, "cumsum"), 2, ts, t, L * L);
  free(t);
  if (tc < 0) return NOMEM();
  bool last = a == x->ndim - 1;
  int v =
      last ? n->inputs[0] : swap_last(l, n, n->inputs[0], x->ndim, (int)a, -1);
  if (v >= 0) v = emit2(l, n, "MatMul", v, tc, last ? n->outputs[0] : -1);
  if (v >= 0 && !last) v = swap_last(l, n, v, x->ndim, (int)a, n->outputs[0]);
  return v < 0 ? v : TS_OK;
}

/* Hardmax along the axis: 1 at the first maximum, 0 elsewhere. */
static int hardmax(gr_lowering *l, const gr_node *n, int x, int64_t axis,
                   int out) {
  ts_graph *g = l->g;
  const gr_value x_v = g->values[x], *xv = &x_v;
  int64_t L = xv->shape[axis];
  int r = xv->ndim - (int)axis;
  int pc = positions(g, TS_FLOAT32, L, r, -1, 0);
  double none = -(double)L;
  int nc = gr_lower_const_f32(g, gr_fresh_name(g, "none"), 0, NULL, &none, 1);
  if (pc < 0 || nc < 0) return NOMEM();
  int m = reduce_axis(l, n, "ReduceMax", x, &axis, 1, 1, -1);
  int eq = m < 0 ? m : emit2(l, n, "Equal", x, m, -1);
  if (eq < 0) return eq;
  int ins[3] = {eq, pc, nc};
  int w = emit_a(l, n, "Where", ins, 3, -1, NULL, 0);
  int f = w < 0 ? w : reduce_axis(l, n, "ReduceMax", w, &axis, 1, 1, -1);
  int hit = f < 0 ? f : emit2(l, n, "Equal", pc, f, -1);
  if (hit < 0) return hit;
  gr_attr to = {.name = "to", .kind = GR_ATTR_INT, .i = 1};
  int v = emit_a(l, n, "Cast", &hit, 1, -1, &to, 1);
  return v < 0 ? v : broadcast_to(l, n, v, xv->ndim, xv->shape, out);
}

/* LpPool: (AveragePool(|x|^p, count_include_pad) * window size)^(1/p). */
static int lower_lp_pool(gr_lowering *l, const gr_node *n) {
  ts_graph *g = l->g;
  int64_t p = gr_attr_int(n, "p", 2), K = 1;
  int nk = 0;
  const int64_t *ks = gr_attr_ints(n, "kernel_shape", &nk);
  for (int i = 0; i < nk; i++) K *= ks[i];
  if (p < 1) return FAIL("p %lld", (long long)p);
  gr_attr at[8];
  int na = 0;
  for (int i = 0; i < n->n_attrs && na < 7; i++)
    if (strcmp(n->attrs[i].name, "p")) at[na++] = n->attrs[i];
  at[na++] =
      (gr_attr){.name = "count_include_pad", .kind = GR_ATTR_INT, .i = 1};
  double k[3] = {(double)p, (double)K, 1.0 / (double)p};
  int kc[3];
  for (int i = 0; i < 3; i++)
    if ((kc[i] = gr_lower_const_f32(g, gr_fresh_name(g, "lp"), 0, NULL, &k[i],
                                    1)) < 0)
      return NOMEM();
  int out = n->outputs[0];
  int v = emit1(l, n, "Abs", n->inputs[0], -1);
  if (v >= 0 && p > 1)
    v = p == 2 ? emit2(l, n, "Mul", v, v, -1)
               : emit2(l, n, "Pow", v, kc[0], -1);
  if (v >= 0) v = emit_a(l, n, "AveragePool", &v, 1, -1, at, na);
  if (v >= 0) v = emit2(l, n, "Mul", v, kc[1], p == 1 ? out : -1);
  if (v >= 0 && p > 1)
    v = p == 2 ? emit1(l, n, "Sqrt", v, out)
               : emit2(l, n, "Pow", v, kc[2], out);
  return v < 0 ? v : TS_OK;
}

/* ---- CastLike, LogSoftmax, LpNormalization, GlobalMaxPool, ArgMax ---- */

static int reduce_axis(gr_lowering *l, const gr_node *n, const char *op, int x,
                       const int64_t *axes, int na, int keep, int out) {
  gr_attr at[2] = {
      {.name = "axes", .kind = GR_ATTR_INTS, .n = na, .ints = (int64_t *)axes},
      {.name = "keepdims", .kind = GR_ATTR_INT, .i = keep}};
  return emit_a(l, n, op, &x, 1, out, at, 2);
}

static int lower_cast_like(gr_lowering *l, const gr_node *n) {
  gr_attr to = {.name = "to",
                .kind = GR_ATTR_INT,
                .i = gr_onnx_dtype_code(l->g->values[n->inputs[1]].dtype)};
  int rc = emit_a(l, n, "Cast", n->inputs, 1, n->outputs[0], &to, 1);
  return rc < 0 ? rc : TS_OK;
}

static int log_softmax(gr_lowering *l, const gr_node *n, int in, int64_t axis,
                       int out) {
  int m = reduce_axis(l, n, "ReduceMax", in, &axis, 1, 1, -1);
  int d = m < 0 ? m : emit2(l, n, "Sub", in, m, -1);
  int v = d < 0 ? d : emit1(l, n, "Exp", d, -1);
  if (v >= 0) v = reduce_axis(l, n, "ReduceSum", v, &axis, 1, 1, -1);
  if (v >= 0) v = emit1(l, n, "Log", v, -1);
  return v < 0 ? v : emit2(l, n, "Sub", d, v, out);
}

/* Softmax and LogSoftmax of opsets before 13: over the input viewed as
 * 2-D, [product of the axes before `axis`, product of the rest]. */
static int lower_coerced(gr_lowering *l, const gr_node *n) {
  const gr_value x_v = l->g->values[n->inputs[0]], *x = &x_v;
  int64_t a = gr_attr_int(n, "axis", 1), rows = 1, cols = 1;
  if (a < 0) a += x->ndim;
  for (int i = 0; i < x->ndim; i++) *(i < a ? &rows : &cols) *= x->shape[i];
  int64_t view[2] = {rows, cols};
  bool last = a == x->ndim - 1;
  int v = last ? n->inputs[0] : reshape(l, n, n->inputs[0], 2, view, -1);
  int out = last ? n->outputs[0] : -1;
  gr_attr ax = {.name = "axis", .kind = GR_ATTR_INT, .i = -1};
  if (v >= 0)
    v = !strcmp(n->op, "Softmax") ? emit_a(l, n, "Softmax", &v, 1, out, &ax, 1)
        : !strcmp(n->op, "LogSoftmax") ? log_softmax(l, n, v, last ? a : 1, out)
                                       : hardmax(l, n, v, last ? a : 1, out);
  if (v >= 0 && !last) v = reshape(l, n, v, x->ndim, x->shape, n->outputs[0]);
  return v < 0 ? v : TS_OK;
}

/* LRN: x / (bias + alpha / size * S)^beta, S the sum of squares over a
 * window of `size` channels: a 1x1 Conv of x^2 with a constant band. */
static int lower_lrn(gr_lowering *l, const gr_node *n) {
  ts_graph *g = l->g;
  const gr_value x_v = g->values[n->inputs[0]], *x = &x_v;
  int64_t C = x->shape[1], size = gr_attr_int(n, "size", 1);
  int64_t ws[TS_MAX_DIMS] = {C, C};
  for (int i = 2; i < x->ndim; i++) ws[i] = 1;
  double *band = ts_calloc((size_t)(C * C), sizeof *band);
  if (!band) return NOMEM();
  int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
  for (int64_t o = 0; o < C; o++)
    for (int64_t i = o - lo; i <= o + hi; i++)
      if (i >= 0 && i < C) band[o * C + i] = 1;
  int w = gr_lower_const_f32(g, gr_fresh_name(g, "lrn_band"), x->ndim, ws, band,
                             C * C);
  free(band);
  double k[3] = {gr_attr_float(n, "alpha", 1e-4) / (double)size,
                 gr_attr_float(n, "bias", 1.0), gr_attr_float(n, "beta", 0.75)};
  int kc[3];
  for (int i = 0; i < 3; i++)
    kc[i] = gr_lower_const_f32(g, gr_fresh_name(g, "lrn"), 0, NULL, &k[i], 1);
  if (w < 0 || kc[0] < 0 || kc[1] < 0 || kc[2] < 0) return NOMEM();
  int v = emit2(l, n, "Mul", n->inputs[0], n->inputs[0], -1);
  if (v >= 0) v = emit2(l, n, "Conv", v, w, -1);
  if (v >= 0) v = emit2(l, n, "Mul", v, kc[0], -1);
  if (v >= 0) v = emit2(l, n, "Add", v, kc[1], -1);
  if (v >= 0) v = emit2(l, n, "Pow", v, kc[2], -1);
  if (v >= 0) v = emit2(l, n, "Div", n->inputs[0], v, n->outputs[0]);
  return v < 0 ? v : TS_OK;
}

/* LogSoftmax: (x - max) - log(sum(exp(x - max))); LpNormalization:
 * x / (sum |x|) or x / sqrt(sum x^2), along the axis. */
static int lower_rows(gr_lowering *l, const gr_node *n) {
  const gr_value x_v = l->g->values[n->inputs[0]], *x = &x_v;
  int64_t axis = gr_attr_int(n, "axis", -1);
  if (axis < 0) axis += x->ndim;
  int v, in = n->inputs[0], out = n->outputs[0];
  if (!strcmp(n->op, "LogSoftmax")) {
    v = log_softmax(l, n, in, axis, out);
  } else {
    bool p1 = gr_attr_int(n, "p", 2) == 1;
    v = p1 ? emit1(l, n, "Abs", in, -1) : emit2(l, n, "Mul", in, in, -1);
    if (v >= 0) v = reduce_axis(l, n, "ReduceSum", v, &axis, 1, 1, -1);
    if (v >= 0 && !p1) v = emit1(l, n, "Sqrt", v, -1);
    if (v >= 0) v = emit2(l, n, "Div", in, v, out);
  }
  return v < 0 ? v : TS_OK;
}

static int lower_global_max(gr_lowering *l, const gr_node *n) {
  int64_t axes[TS_MAX_DIMS];
  int r = l->g->values[n->inputs[0]].ndim;
  for (int i = 2; i < r; i++) axes[i - 2] = i;
  int v = reduce_axis(l, n, "ReduceMax", n->inputs[0], axes, r - 2, 1,
                      n->outputs[0]);
  return v < 0 ? v : TS_OK;
}

/* ArgMax: the first (or last) position along the axis where x equals its
 * maximum: Where(x == max, position, L), reduced by a minimum (or
 * Where(.., -1) by a maximum for the last), cast to int64. ArgMin: the
 * same on -x. */
static int lower_arg(gr_lowering *l, const gr_node *n) {
  ts_graph *g = l->g;
  const gr_value x_v = g->values[n->inputs[0]], *x = &x_v;
  int64_t axis = gr_attr_int(n, "axis", 0);
  if (axis < 0) axis += x->ndim;
  int64_t L = x->shape[axis], ps[TS_MAX_DIMS];
  int pr = x->ndim - (int)axis;
  ps[0] = L;
  for (int i = 1; i < pr; i++) ps[i] = 1;
  double *pos = ts_malloc(sizeof *pos * (size_t)(L ? L : 1));
  if (!pos) return NOMEM();
  bool last = gr_attr_int(n, "select_last_index", 0) != 0;
  for (int64_t i = 0; i < L; i++) pos[i] = last ? (double)i : (double)-i;
  int pc = gr_lower_const_f32(g, gr_fresh_name(g, "positions"), pr, ps, pos, L);
  free(pos);
  double none = last ? -1.0 : -(double)L;
  int nc = gr_lower_const_f32(g, gr_fresh_name(g, "none"), 0, NULL, &none, 1);
  if (pc < 0 || nc < 0) return NOMEM();
  int keep = (int)gr_attr_int(n, "keepdims", 1);
  int v = n->inputs[0];
  if (!strcmp(n->op, "ArgMin")) v = emit1(l, n, "Neg", v, -1);
  int m = v < 0 ? v : reduce_axis(l, n, "ReduceMax", v, &axis, 1, 1, -1);
  int eq = m < 0 ? m : emit2(l, n, "Equal", v, m, -1);
  if (eq < 0) return eq;
  /* the first position is the maximum of -position */
  int ins[3] = {eq, pc, nc};
  int w = emit_a(l, n, "Where", ins, 3, -1, NULL, 0);
  int r = w < 0 ? w : reduce_axis(l, n, "ReduceMax", w, &axis, 1, keep, -1);
  if (r >= 0 && !last) r = emit1(l, n, "Neg", r, -1);
  gr_attr to = {.name = "to", .kind = GR_ATTR_INT, .i = 7};
  if (r >= 0) r = emit_a(l, n, "Cast", &r, 1, n->outputs[0], &to, 1);
  return r < 0 ? r : TS_OK;
}

/* Whether an output of n after the first is read (LayerNormalization's
 * Mean or InvStdDev, Dropout's mask). */
static bool extra_outputs_used(const ts_graph *g, const gr_node *n) {
  for (int k = 1; k < n->n_outputs; k++) {
    int v = n->outputs[k];
    for (int o = 0; o < g->n_outputs; o++)
      if (g->outputs[o] == v) return true;
    for (int i = 0; i < g->n_nodes; i++)
      for (int j = 0; j < g->nodes[i].n_inputs; j++)
        if (g->nodes[i].inputs[j] == v) return true;
  }
  return false;
}

/* LayerNormalization whose Mean or InvStdDev output is read: the
 * normalization with Y alone, and the two statistics from reductions. */
static int lower_ln_stats(gr_lowering *l, const gr_node *n) {
  const gr_value x_v = l->g->values[n->inputs[0]], *x = &x_v;
  int64_t axis = gr_attr_int(n, "axis", -1), axes[TS_MAX_DIMS];
  if (axis < 0) axis += x->ndim;
  int na = 0;
  for (int64_t a = axis; a < x->ndim; a++) axes[na++] = a;
  gr_attr at[2] = {{.name = "axis", .kind = GR_ATTR_INT, .i = axis},
                   {.name = "epsilon",
                    .kind = GR_ATTR_FLOAT,
                    .f = gr_attr_float(n, "epsilon", 1e-5)}};
  int v = emit_a(l, n, "LayerNormalization", n->inputs, n->n_inputs,
                 n->outputs[0], at, 2);
  int mean_out = n->outputs[1], inv_out = n->n_outputs > 2 ? n->outputs[2] : -1;
  int m = v < 0 ? v
                : reduce_axis(l, n, "ReduceMean", n->inputs[0], axes, na, 1,
                              mean_out);
  if (m < 0 || inv_out < 0) return m < 0 ? m : TS_OK;
  double eps = at[1].f;
  int ke = gr_lower_const_f32(l->g, gr_fresh_name(l->g, "epsilon"), 0, NULL,
                              &eps, 1);
  if (ke < 0) return NOMEM();
  int d = emit2(l, n, "Sub", n->inputs[0], m, -1);
  v = d < 0 ? d : emit2(l, n, "Mul", d, d, -1);
  if (v >= 0) v = reduce_axis(l, n, "ReduceMean", v, axes, na, 1, -1);
  if (v >= 0) v = emit2(l, n, "Add", v, ke, -1);
  if (v >= 0) v = emit1(l, n, "Sqrt", v, -1);
  if (v >= 0) v = emit1(l, n, "Reciprocal", v, inv_out);
  return v < 0 ? v : TS_OK;
}

/* Dropout (inference) whose mask is read: the data as it is, and a mask
 * of trues. */
static int lower_dropout_mask(gr_lowering *l, const gr_node *n) {
  const gr_value x_v = l->g->values[n->inputs[0]], *x = &x_v;
  int t = const_fill(l->g, TS_BOOL, 0, NULL, 1);
  if (t < 0) return NOMEM();
  int v = reshape(l, n, n->inputs[0], x->ndim, x->shape, n->outputs[0]);
  if (v >= 0) v = broadcast_to(l, n, t, x->ndim, x->shape, n->outputs[1]);
  return v < 0 ? v : TS_OK;
}

bool gr_lowered_only(const char *op) {
  static const char *const ops[] = {"Hardmax",
                                    "CumSum",
                                    "OneHot",
                                    "LpPool",
                                    "Einsum",
                                    "LRN",
                                    "LogSoftmax",
                                    "LpNormalization",
                                    "GlobalMaxPool",
                                    "ArgMax",
                                    "ArgMin",
                                    "Split",
                                    "Tile",
                                    "DepthToSpace",
                                    "SpaceToDepth",
                                    "InstanceNormalization",
                                    "GroupNormalization",
                                    "Pad",
                                    "Resize",
                                    "GatherND",
                                    "ScatterND",
                                    "ScatterElements",
                                    "Scatter",
                                    "LSTM",
                                    "GRU",
                                    "RNN",
                                    NULL};
  for (int i = 0; ops[i]; i++)
    if (!strcmp(op, ops[i])) return true;
  return false;
}

int gr_lower_more(gr_lowering *l, const gr_node *n) {
  const char *op = n->op;
  if (!strcmp(op, "Dropout") && n->n_outputs > 1 && extra_outputs_used(l->g, n))
    return lower_dropout_mask(l, n);
  if (!strcmp(op, "LayerNormalization") && n->n_outputs > 1 &&
      extra_outputs_used(l->g, n))
    return lower_ln_stats(l, n);
  if ((!strcmp(op, "Softmax") || !strcmp(op, "LogSoftmax") ||
       !strcmp(op, "Hardmax")) &&
      l->g->opset < 13)
    return lower_coerced(l, n);
  if (!strcmp(op, "Hardmax")) {
    int64_t a = gr_attr_int(n, "axis", -1);
    if (a < 0) a += l->g->values[n->inputs[0]].ndim;
    int v = hardmax(l, n, n->inputs[0], a, n->outputs[0]);
    return v < 0 ? v : TS_OK;
  }
  if (!strcmp(op, "OneHot")) return lower_one_hot(l, n);
  if (!strcmp(op, "CumSum")) return lower_cumsum(l, n);
  if (!strcmp(op, "LpPool")) return lower_lp_pool(l, n);
  if (!strcmp(op, "LRN")) return lower_lrn(l, n);
  if (!strcmp(op, "CastLike")) return lower_cast_like(l, n);
  if (!strcmp(op, "Einsum")) return lower_einsum(l, n);
  if (!strcmp(op, "LogSoftmax") || !strcmp(op, "LpNormalization"))
    return lower_rows(l, n);
  if (!strcmp(op, "GlobalMaxPool")) return lower_global_max(l, n);
  if (!strcmp(op, "ArgMax") || !strcmp(op, "ArgMin")) return lower_arg(l, n);
  if (!strcmp(op, "Split")) return lower_split(l, n);
  if (!strcmp(op, "Expand")) return lower_expand(l, n);
  if (!strcmp(op, "Tile")) return lower_tile(l, n);
  if (!strcmp(op, "DepthToSpace") || !strcmp(op, "SpaceToDepth"))
    return lower_depth_space(l, n);
  if (!strcmp(op, "InstanceNormalization") || !strcmp(op, "GroupNormalization"))
    return lower_norm(l, n);
  if (!strcmp(op, "Pad")) return lower_pad(l, n);
  if (!strcmp(op, "Resize")) return lower_resize(l, n);
  if (!strcmp(op, "Trilu")) return lower_trilu(l, n);
  static const char *const reduces[] = {
      "ReduceMin",    "ReduceL1",        "ReduceL2", "ReduceSumSquare",
      "ReduceLogSum", "ReduceLogSumExp", NULL};
  for (int i = 0; reduces[i]; i++)
    if (!strcmp(op, reduces[i])) return lower_reduce(l, n);
  return 1;
}

/* ---- Einsum ---- */

/* Parses Einsum's equation for operand shapes: each operand's labels
 * (an ellipsis becomes the labels '0'.. counted from the right, shared by
 * every operand, as numpy broadcasts them) and the output's (implicit:
 * the ellipsis, then the labels seen once in alphabetical order); 0, or -1
 * with the reason in why. */
int gr_einsum_parse(const ts_graph *g, const gr_node *n, gr_einsum *e,
                    char *why, size_t size) {
  const char *eq = gr_attr_string(n, "equation", "");
  char terms[3][64];
  int nt = 0, len = 0;
  bool arrow = false;
  memset(e, 0, sizeof *e);
  for (const char *c = eq;; c++) {
    if (*c == ' ') continue;
    if (!*c || *c == ',' || (c[0] == '-' && c[1] == '>')) {
      if (nt >= 3 || (arrow && *c)) break;
      terms[nt][len] = 0;
      nt++, len = 0;
      if (!*c) break;
      if (*c == '-') c++, arrow = true;
      if (arrow && nt != n->n_inputs)
        return snprintf(why, size,
                        "the equation has %d operands, the node "
                        "%d",
                        nt, n->n_inputs),
               -1;
      continue;
    }
    if (len >= 63) break;
    terms[nt][len++] = *c;
  }
  int n_in = arrow ? nt - 1 : nt;
  if (n_in != n->n_inputs || n_in < 1 || n_in > 2)
    return snprintf(why, size, "equation '%s': one or two operands", eq), -1;
  e->n_in = n_in;
  int ell = 0; /* the widest ellipsis */
  int64_t sizes[128];
  for (int i = 0; i < 128; i++) sizes[i] = -1;
  for (int k = 0; k < n_in; k++) {
    const gr_value x_v = g->values[n->inputs[k]], *x = &x_v;
    const char *t = terms[k], *dots = strstr(t, "...");
    int letters = (int)strlen(t) - (dots ? 3 : 0);
    int ne = dots ? x->ndim - letters : 0;
    if (ne < 0 || (!dots && letters != x->ndim))
      return snprintf(why, size, "operand %d: '%s' for rank %d", k, t, x->ndim),
             -1;
    ell = ne > ell ? ne : ell;
    int r = 0;
    for (const char *c = t; *c; c++) {
      if (c == dots) {
        for (int j = ne - 1; j >= 0; j--) e->in[k][r++] = (char)('0' + j);
        c += 2;
        continue;
      }
      if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')))
        return snprintf(why, size, "'%c' in '%s'", *c, eq), -1;
      e->in[k][r++] = *c;
    }
    e->rank[k] = r;
    for (int i = 0; i < r; i++) {
      unsigned char lb = (unsigned char)e->in[k][i];
      for (int j = 0; j < i; j++)
        if (e->in[k][j] == e->in[k][i])
          return snprintf(why, size,
                          "label '%c' repeats in operand %d "
                          "(a diagonal is not supported)",
                          lb, k),
                 -1;
      if (sizes[lb] >= 0 && sizes[lb] != x->shape[i])
        return snprintf(why, size, "label '%c' is %lld and %lld long", lb,
                        (long long)sizes[lb], (long long)x->shape[i]),
               -1;
      sizes[lb] = x->shape[i];
    }
  }
  int r = 0;
  if (arrow) {
    const char *t = terms[n_in], *dots = strstr(t, "...");
    for (const char *c = t; *c; c++) {
      if (c == dots) {
        for (int j = ell - 1; j >= 0; j--) e->out[r++] = (char)('0' + j);
        c += 2;
        continue;
      }
      if (sizes[(unsigned char)*c] < 0)
        return snprintf(why, size, "output label '%c' is in no operand", *c),
               -1;
      e->out[r++] = *c;
    }
  } else {
    for (int j = ell - 1; j >= 0; j--) e->out[r++] = (char)('0' + j);
    for (int c = 'A'; c <= 'z'; c++) {
      int seen = 0;
      for (int k = 0; k < n_in; k++)
        seen += memchr(e->in[k], c, (size_t)e->rank[k]) != NULL;
      if (seen == 1 && c > '9') e->out[r++] = (char)c;
    }
  }
  if (r > TS_MAX_DIMS) return snprintf(why, size, "output rank %d", r), -1;
  e->n_out = r;
  for (int i = 0; i < r; i++) e->out_shape[i] = sizes[(unsigned char)e->out[i]];
  memcpy(e->size, sizes, sizeof sizes);
  return 0;
}

/* The positions in labels `from` (count nf) of each label of `to`. */
static bool perm_of_labels(const char *from, int nf, const char *to, int nt,
                           int64_t *perm) {
  for (int i = 0; i < nt; i++) {
    const char *p = memchr(from, to[i], (size_t)nf);
    if (!p) return false;
    perm[i] = p - from;
  }
  return true;
}

/* x (labels lx) transposed to the order of `to` unless it is already. */
static int to_order(gr_lowering *l, const gr_node *n, int x, const char *lx,
                    const char *to, int nt, int out) {
  int64_t perm[TS_MAX_DIMS];
  bool id = true;
  perm_of_labels(lx, nt, to, nt, perm);
  for (int i = 0; i < nt; i++) id = id && perm[i] == i;
  if (id) {
    if (out < 0) return x;
    const gr_value v_v = l->g->values[x], *v = &v_v;
    return reshape(l, n, x, v->ndim, v->shape, out);
  }
  gr_attr a = {.name = "perm", .kind = GR_ATTR_INTS, .n = nt, .ints = perm};
  return emit_a(l, n, "Transpose", &x, 1, out, &a, 1);
}

/* Sums operand k over its labels in no other operand and not in the
 * output; its labels left in *lbl (count returned). */
static int einsum_presum(gr_lowering *l, const gr_node *n, const gr_einsum *e,
                         int k, int *v, char *lbl) {
  int64_t axes[TS_MAX_DIMS];
  int na = 0, r = 0;
  for (int i = 0; i < e->rank[k]; i++) {
    char c = e->in[k][i];
    bool other =
        e->n_in == 2 && memchr(e->in[1 - k], c, (size_t)e->rank[1 - k]);
    if (!other && !memchr(e->out, c, (size_t)e->n_out))
      axes[na++] = i;
    else
      lbl[r++] = c;
  }
  if (na) *v = reduce_axis(l, n, "ReduceSum", *v, axes, na, 0, -1);
  return r;
}

static int lower_einsum(gr_lowering *l, const gr_node *n) {
  gr_einsum e;
  char why[160];
  if (gr_einsum_parse(l->g, n, &e, why, sizeof why)) return FAIL("%s", why);
  if (!ts_dtype_eq(l->g->values[n->inputs[0]].dtype, TS_FLOAT32))
    return FAIL("wants float32");
  char la[TS_MAX_DIMS], lb[TS_MAX_DIMS];
  int a = n->inputs[0], b = e.n_in > 1 ? n->inputs[1] : -1;
  int ra = einsum_presum(l, n, &e, 0, &a, la);
  if (a < 0) return a;
  if (b < 0) { /* one operand: its sum, transposed */
    int v = to_order(l, n, a, la, e.out, e.n_out, n->outputs[0]);
    return v < 0 ? v : TS_OK;
  }
  int rb = einsum_presum(l, n, &e, 1, &b, lb);
  if (b < 0) return b;
  /* batch (in both and the output, in output order), A's and B's kept
   * labels, the contracted ones */
  char bat[TS_MAX_DIMS], ak[TS_MAX_DIMS], bk[TS_MAX_DIMS], con[TS_MAX_DIMS];
  int nb = 0, nak = 0, nbk = 0, nc = 0;
  int64_t B = 1, M = 1, N = 1, K = 1;
  for (int i = 0; i < e.n_out; i++) {
    char c = e.out[i];
    bool in_a = memchr(la, c, (size_t)ra), in_b = memchr(lb, c, (size_t)rb);
    if (in_a && in_b)
      bat[nb++] = c, B *= e.size[(unsigned char)c];
    else if (in_a)
      ak[nak++] = c, M *= e.size[(unsigned char)c];
    else
      bk[nbk++] = c, N *= e.size[(unsigned char)c];
  }
  for (int i = 0; i < ra; i++)
    if (!memchr(e.out, la[i], (size_t)e.n_out))
      con[nc++] = la[i], K *= e.size[(unsigned char)la[i]];
  char oa[TS_MAX_DIMS * 2], ob[TS_MAX_DIMS * 2], om[TS_MAX_DIMS * 2];
  memcpy(oa, bat, (size_t)nb), memcpy(oa + nb, ak, (size_t)nak);
  memcpy(oa + nb + nak, con, (size_t)nc);
  memcpy(ob, bat, (size_t)nb), memcpy(ob + nb, con, (size_t)nc);
  memcpy(ob + nb + nc, bk, (size_t)nbk);
  memcpy(om, bat, (size_t)nb), memcpy(om + nb, ak, (size_t)nak);
  memcpy(om + nb + nak, bk, (size_t)nbk);
  int64_t sa[3] = {B, M, K}, sb[3] = {B, K, N}, sm[TS_MAX_DIMS];
  for (int i = 0; i < nb + nak + nbk; i++) sm[i] = e.size[(unsigned char)om[i]];
  bool flat = B == 1; /* a plain product: [M, K] x [K, N] */
  a = to_order(l, n, a, la, oa, ra, -1);
  if (a >= 0) a = reshape(l, n, a, flat ? 2 : 3, flat ? sa + 1 : sa, -1);
  if (a >= 0) b = to_order(l, n, b, lb, ob, rb, -1);
  if (a >= 0 && b >= 0)
    b = reshape(l, n, b, flat ? 2 : 3, flat ? sb + 1 : sb, -1);
  int v = a < 0 ? a : b < 0 ? b : emit2(l, n, "MatMul", a, b, -1);
  if (v >= 0) v = reshape(l, n, v, nb + nak + nbk, sm, -1);
  if (v >= 0) v = to_order(l, n, v, om, e.out, e.n_out, n->outputs[0]);
  return v < 0 ? v : TS_OK;
}
