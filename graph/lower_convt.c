/*
 * lower_convt.c — ConvTranspose as a convolution of its stride phases:
 *
 *   ConvTranspose(x, W, b) {strides s, pads, output_padding}
 *   -> Conv(x, W', b') {kernel M = ceil(K / s), pads M - 1 before and M
 *      after, stride 1}, s² · CO output channels
 *   -> channels-last (between transposes that the layout pass cancels):
 *      Reshape [N, Qh, Qw, s, s, CO], Transpose, Reshape [N, s Qh, s Qw,
 *      CO] (DepthToSpace), Slice of the output's rows and columns (the
 *      pads)
 *
 * A transposed convolution writes output o = i s + t from input i and tap
 * t; for the phase r = o mod s only the taps t = m s + r contribute, so
 * output q s + r is the correlation sum over m < M of x[q - m] W[m s + r]:
 * a plain convolution of x, with the phase's taps reversed as its kernel
 * (taps past K are zeros). One conv computes every phase as its own group
 * of output channels, and the interleave puts them in place. Against the
 * direct form (the input with s - 1 zeros between its elements, convolved
 * with the whole flipped kernel: s² times the multiply-adds, on NCHW) this
 * is a regular conv, which the layout pass runs channels-last and the
 * tuner tiles like any other. Exact up to float rounding (the same
 * products, summed in another order).
 *
 * Taken for 2-D float32 data, constant weights (and bias), one group,
 * dilation 1, equal strides (DepthToSpace has one block size), explicit
 * pads (auto_pad NOTSET, no output_shape), with the layout pass on;
 * anything else keeps the direct form (fuse.c).
 */
#include "lower.h"

#include <stdlib.h>
#include <string.h>

static bool ints_all(const gr_node *n, const char *name, int count,
                     int64_t want) {
  int c = 0;
  const int64_t *v = gr_attr_ints(n, name, &c);
  if (!v) return true;
  if (c != count) return false;
  for (int i = 0; i < c; i++)
    if (v[i] != want) return false;
  return true;
}

static int emit_into(gr_lowering *l, const gr_node *n, const char *op,
                     const int *ins, int n_ins, int out, const gr_attr *attrs,
                     int n_attrs) {
  ts_graph *g = l->g;
  bool last = out >= 0;
  if (!last) out = gr_lower_fresh(g, n->outputs[0], "ph");
  if (out < 0) return TS_ENOMEM;
  gr_node m = gr_node_make(g, op, last ? n->name : gr_fresh_name(g, n->name),
                           ins, n_ins, &out, 1);
  for (int i = 0; i < n_attrs; i++) gr_node_set_attr(g, &m, attrs[i]);
  int rc = gr_infer_node(g, &m, l->err);
  if (rc) return rc;
  gr_list_push(&l->out, &m);
  return out;
}

static int i64_const(ts_graph *g, int64_t count, const int64_t *v) {
  return gr_const_add(g, gr_fresh_name(g, "phases"), TS_INT64, 1, &count, v);
}

/* W' [s s CO, CI, M, M] from W [CI, CO, K, K]: phase (ry, rx)'s kernel at
 * (jy, jx) is W's tap ((M - 1 - jy) s + ry, (M - 1 - jx) s + rx). */
static float *phase_weights(const float *w, int64_t ci, int64_t co,
                            const int64_t *k, int64_t s, const int64_t *m) {
  int64_t n = s * s * co * ci * m[0] * m[1];
  float *p = ts_calloc((size_t)n + 1, sizeof *p);
  if (!p) return NULL;
  for (int64_t ry = 0; ry < s; ry++)
    for (int64_t rx = 0; rx < s; rx++)
      for (int64_t o = 0; o < co; o++)
        for (int64_t c = 0; c < ci; c++)
          for (int64_t jy = 0; jy < m[0]; jy++)
            for (int64_t jx = 0; jx < m[1]; jx++) {
              int64_t ky = (m[0] - 1 - jy) * s + ry,
                      kx = (m[1] - 1 - jx) * s + rx;
              if (ky >= k[0] || kx >= k[1]) continue;
              int64_t oc = (ry * s + rx) * co + o;
              p[((oc * ci + c) * m[0] + jy) * m[1] + jx] =
                  w[((c * co + o) * k[0] + ky) * k[1] + kx];
            }
  return p;
}

int gr_lower_conv_transpose(gr_lowering *l, const gr_node *n) {
  ts_graph *g = l->g;
  if (strcmp(n->op, "ConvTranspose") || n->n_inputs < 2) return 1;
  const gr_value x = g->values[n->inputs[0]], w = g->values[n->inputs[1]];
  const gr_value o = g->values[n->outputs[0]];
  int bias = n->n_inputs > 2 ? n->inputs[2] : -1;
  int sc = 0;
  const int64_t *st = gr_attr_ints(n, "strides", &sc);
  int64_t s = st && sc == 2 ? st[0] : 1;
  if (x.ndim != 4 || w.ndim != 4 || o.ndim != 4 ||
      !ts_dtype_eq(x.dtype, TS_FLOAT32) || !ts_dtype_eq(w.dtype, TS_FLOAT32) ||
      !gr_is_const(g, n->inputs[1]) || (bias >= 0 && !gr_is_const(g, bias)) ||
      gr_attr_int(n, "group", 1) != 1 || !ints_all(n, "dilations", 2, 1) ||
      (st && (sc != 2 || st[1] != s)) || s < 1 ||
      strcmp(gr_attr_string(n, "auto_pad", "NOTSET"), "NOTSET") ||
      gr_attr_ints(n, "output_shape", &sc) || g->keep_nchw)
    return 1;
  int pc = 0;
  const int64_t *pads = gr_attr_ints(n, "pads", &pc);
  if (pads && pc != 4) return 1;
  int64_t ci = w.shape[0], co = w.shape[1], k[2] = {w.shape[2], w.shape[3]};
  int64_t m[2] = {(k[0] + s - 1) / s, (k[1] + s - 1) / s};
  int64_t q[2] = {x.shape[2] + m[0], x.shape[3] + m[1]};
  int64_t top = pads ? pads[0] : 0, left = pads ? pads[1] : 0;
  if (top + o.shape[2] > q[0] * s || left + o.shape[3] > q[1] * s) return 1;
  float *pw = phase_weights(gr_const_data(g, n->inputs[1]), ci, co, k, s, m);
  if (!pw) return TS_ERR(l->err, TS_ENOMEM, "lowering '%s'", n->name);
  int64_t wshape[4] = {s * s * co, ci, m[0], m[1]};
  int wv =
      gr_const_add(g, gr_fresh_name(g, "phase_w"), TS_FLOAT32, 4, wshape, pw);
  free(pw);
  int bv = -1;
  if (bias >= 0) {
    int64_t nb = s * s * co;
    float *pb = ts_malloc(sizeof(float) * (size_t)nb);
    if (!pb) return TS_ERR(l->err, TS_ENOMEM, "lowering '%s'", n->name);
    const float *b = gr_const_data(g, bias);
    for (int64_t i = 0; i < nb; i++) pb[i] = b[i % co];
    bv = gr_const_add(g, gr_fresh_name(g, "phase_b"), TS_FLOAT32, 1, &nb, pb);
    free(pb);
  }
  if (wv < 0 || (bias >= 0 && bv < 0))
    return TS_ERR(l->err, TS_ENOMEM, "lowering '%s'", n->name);
  int64_t cpads[4] = {m[0] - 1, m[1] - 1, m[0], m[1]}, one[2] = {1, 1};
  gr_attr ca[5] = {
      {.name = "kernel_shape", .kind = GR_ATTR_INTS, .n = 2, .ints = m},
      {.name = "strides", .kind = GR_ATTR_INTS, .n = 2, .ints = one},
      {.name = "dilations", .kind = GR_ATTR_INTS, .n = 2, .ints = one},
      {.name = "pads", .kind = GR_ATTR_INTS, .n = 4, .ints = cpads},
      {.name = "group", .kind = GR_ATTR_INT, .i = 1}};
  int cins[3] = {n->inputs[0], wv, bv};
  bool crop = top || left || o.shape[2] != q[0] * s || o.shape[3] != q[1] * s;
  int v = emit_into(l, n, "Conv", cins, bias >= 0 ? 3 : 2, -1, ca, 5);
  /* the interleave, channels-last: the conv's NCHW output is a transpose
   * of its NHWC one after the layout pass, which the first transpose here
   * cancels, and the phases move whole channel vectors (on NCHW the 6-D
   * transpose moved single elements, planes apart: 7.3 ms against 2.4 for
   * the conv in the U-Net) */
  int64_t n0 = x.shape[0];
  int64_t six[6] = {n0, q[0], q[1], s, s, co}, perm[6] = {0, 1, 3, 2, 4, 5};
  int64_t full[4] = {n0, q[0] * s, q[1] * s, co};
  int64_t to_l[4] = {0, 2, 3, 1}, from_l[4] = {0, 3, 1, 2};
  gr_attr ta = {.name = "perm", .kind = GR_ATTR_INTS, .n = 6, .ints = perm};
  gr_attr tl = {.name = "perm", .kind = GR_ATTR_INTS, .n = 4, .ints = to_l};
  gr_attr fl = {.name = "perm", .kind = GR_ATTR_INTS, .n = 4, .ints = from_l};
  int r6 = i64_const(g, 6, six), r4 = i64_const(g, 4, full);
  if (r6 < 0 || r4 < 0) return TS_ERR(l->err, TS_ENOMEM, "lowering");
  if (v >= 0) v = emit_into(l, n, "Transpose", &v, 1, -1, &tl, 1);
  if (v >= 0 && s > 1) {
    v = emit_into(l, n, "Reshape", (int[]){v, r6}, 2, -1, NULL, 0);
    if (v >= 0) v = emit_into(l, n, "Transpose", &v, 1, -1, &ta, 1);
    if (v >= 0) v = emit_into(l, n, "Reshape", (int[]){v, r4}, 2, -1, NULL, 0);
  }
  if (v >= 0 && crop) {
    int64_t starts[2] = {top, left}, axes[2] = {1, 2};
    int64_t ends[2] = {top + o.shape[2], left + o.shape[3]};
    int ins[4] = {v, i64_const(g, 2, starts), i64_const(g, 2, ends),
                  i64_const(g, 2, axes)};
    if (ins[1] < 0 || ins[2] < 0 || ins[3] < 0)
      return TS_ERR(l->err, TS_ENOMEM, "lowering");
    v = emit_into(l, n, "Slice", ins, 4, -1, NULL, 0);
  }
  if (v >= 0) v = emit_into(l, n, "Transpose", &v, 1, n->outputs[0], &fl, 1);
  return v < 0 ? v : TS_OK;
}
