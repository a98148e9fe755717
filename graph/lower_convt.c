/*
 * lower_convt.c — ConvTranspose as a convolution of its stride phases:
 *
 *   ConvTranspose(x, W, b) {strides s, pads, output_padding}
 *   -> Conv(x, W', b') {kernel M = ceil(K / s) per axis, pads M - 1
 *      before and M after, stride 1}, sh · sw · CO output channels
 *   -> channels-last (between transposes that the layout pass cancels):
 *      Reshape [N, Qh, Qw, sh, sw, CO], Transpose, Reshape [N, sh Qh,
 *      sw Qw, CO] (DepthToSpace), Slice of the output's rows and columns
 *      (the pads)
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
 * Taken for 1-D (as 2-D of height 1) and 2-D float32 data, constant
 * weights (and bias), one group, dilation 1, explicit pads (auto_pad
 * NOTSET, no output_shape), with the layout pass on; anything else keeps
 * the direct form (fuse.c; 1-D and 3-D ConvTranspose had no compiled form
 * at all).
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
  return gr_lower_node(l, n, op, ins, n_ins, out, attrs, n_attrs, "ph");
}

static int i64_const(ts_graph *g, int64_t count, const int64_t *v) {
  return gr_const_add(g, gr_fresh_name(g, "phases"), TS_INT64, 1, &count, v);
}

/* W' [sh sw CO, CI, Mh, Mw] from W [CI, CO, Kh, Kw]: phase (ry, rx)'s
 * kernel at (jy, jx) is W's tap ((Mh - 1 - jy) sh + ry, (Mw - 1 - jx) sw +
 * rx). */
static float *phase_weights(const float *w, int64_t ci, int64_t co,
                            const int64_t *k, const int64_t *s,
                            const int64_t *m) {
  int64_t n = s[0] * s[1] * co * ci * m[0] * m[1];
  float *p = ts_calloc((size_t)n + 1, sizeof *p);
  if (!p) return NULL;
  for (int64_t ry = 0; ry < s[0]; ry++)
    for (int64_t rx = 0; rx < s[1]; rx++)
      for (int64_t o = 0; o < co; o++)
        for (int64_t c = 0; c < ci; c++)
          for (int64_t jy = 0; jy < m[0]; jy++)
            for (int64_t jx = 0; jx < m[1]; jx++) {
              int64_t ky = (m[0] - 1 - jy) * s[0] + ry,
                      kx = (m[1] - 1 - jx) * s[1] + rx;
              if (ky >= k[0] || kx >= k[1]) continue;
              int64_t oc = (ry * s[1] + rx) * co + o;
              p[((oc * ci + c) * m[0] + jy) * m[1] + jx] =
                  w[((c * co + o) * k[0] + ky) * k[1] + kx];
            }
  return p;
}

/* The 2-D view of a 1-D or 2-D ConvTranspose: spatial extents, kernel,
 * strides and the pads before (top, left); false for what is not taken. */
typedef struct convt {
  int nsp;                     /* 1 or 2 spatial dimensions */
  int64_t in[2], out[2], k[2]; /* [H, W]; a 1-D one has H = 1 */
  int64_t s[2], before[2];
} convt;

static bool convt_view(const ts_graph *g, const gr_node *n, convt *c) {
  const gr_value *x = &g->values[n->inputs[0]], *w = &g->values[n->inputs[1]];
  const gr_value *o = &g->values[n->outputs[0]];
  int nsp = x->ndim - 2, sc = 0, pc = 0;
  if (nsp < 1 || nsp > 2 || w->ndim != x->ndim || o->ndim != x->ndim ||
      !ints_all(n, "dilations", nsp, 1) ||
      strcmp(gr_attr_string(n, "auto_pad", "NOTSET"), "NOTSET") ||
      gr_attr_ints(n, "output_shape", &sc))
    return false;
  const int64_t *st = gr_attr_ints(n, "strides", &sc);
  const int64_t *pads = gr_attr_ints(n, "pads", &pc);
  if ((st && sc != nsp) || (pads && pc != 2 * nsp)) return false;
  c->nsp = nsp;
  for (int d = 0; d < 2; d++) {
    int sd = d - (2 - nsp); /* the model's spatial axis, or < 0 */
    c->in[d] = sd >= 0 ? x->shape[2 + sd] : 1;
    c->out[d] = sd >= 0 ? o->shape[2 + sd] : 1;
    c->k[d] = sd >= 0 ? w->shape[2 + sd] : 1;
    c->s[d] = sd >= 0 && st ? st[sd] : 1;
    c->before[d] = sd >= 0 && pads ? pads[sd] : 0;
    if (c->s[d] < 1) return false;
  }
  return true;
}

int gr_lower_conv_transpose(gr_lowering *l, const gr_node *n) {
  ts_graph *g = l->g;
  if (strcmp(n->op, "ConvTranspose") || n->n_inputs < 2) return 1;
  const gr_value x = g->values[n->inputs[0]], w = g->values[n->inputs[1]];
  int bias = n->n_inputs > 2 ? n->inputs[2] : -1;
  convt c;
  if (!ts_dtype_eq(x.dtype, TS_FLOAT32) || !ts_dtype_eq(w.dtype, TS_FLOAT32) ||
      !gr_is_const(g, n->inputs[1]) || (bias >= 0 && !gr_is_const(g, bias)) ||
      gr_attr_int(n, "group", 1) != 1 || g->keep_nchw || !convt_view(g, n, &c))
    return 1;
  const int64_t *s = c.s, *k = c.k;
  int64_t ci = w.shape[0], co = w.shape[1], n0 = x.shape[0];
  int64_t m[2] = {(k[0] + s[0] - 1) / s[0], (k[1] + s[1] - 1) / s[1]};
  int64_t q[2] = {c.in[0] + m[0], c.in[1] + m[1]}, ss = s[0] * s[1];
  for (int d = 0; d < 2; d++)
    if (c.before[d] + c.out[d] > q[d] * s[d]) return 1;
  float *pw = phase_weights(gr_const_data(g, n->inputs[1]), ci, co, k, s, m);
  if (!pw) return TS_ERR(l->err, TS_ENOMEM, "lowering '%s'", n->name);
  int64_t wshape[4] = {ss * co, ci, m[0], m[1]};
  int wv =
      gr_const_add(g, gr_fresh_name(g, "phase_w"), TS_FLOAT32, 4, wshape, pw);
  free(pw);
  int bv = -1;
  if (bias >= 0) {
    int64_t nb = ss * co;
    float *pb = ts_malloc(sizeof(float) * (size_t)nb);
    if (!pb) return TS_ERR(l->err, TS_ENOMEM, "lowering '%s'", n->name);
    const float *b = gr_const_data(g, bias);
    for (int64_t i = 0; i < nb; i++) pb[i] = b[i % co];
    bv = gr_const_add(g, gr_fresh_name(g, "phase_b"), TS_FLOAT32, 1, &nb, pb);
    free(pb);
  }
  /* shapes of the 2-D view, the phases and the interleave */
  int64_t x4[4] = {n0, ci, c.in[0], c.in[1]};
  int64_t six[6] = {n0, q[0], q[1], s[0], s[1], co};
  int64_t perm[6] = {0, 1, 3, 2, 4, 5};
  int64_t full[4] = {n0, q[0] * s[0], q[1] * s[1], co};
  int r6 = i64_const(g, 6, six), r4 = i64_const(g, 4, full);
  int rx = c.nsp == 1 ? i64_const(g, 4, x4) : 0;
  if (wv < 0 || (bias >= 0 && bv < 0) || r6 < 0 || r4 < 0 || rx < 0)
    return TS_ERR(l->err, TS_ENOMEM, "lowering '%s'", n->name);
  int v = n->inputs[0];
  if (c.nsp == 1)
    v = emit_into(l, n, "Reshape", (int[]){v, rx}, 2, -1, NULL, 0);
  int64_t cpads[4] = {m[0] - 1, m[1] - 1, m[0], m[1]}, one[2] = {1, 1};
  gr_attr ca[5] = {
      {.name = "kernel_shape", .kind = GR_ATTR_INTS, .n = 2, .ints = m},
      {.name = "strides", .kind = GR_ATTR_INTS, .n = 2, .ints = one},
      {.name = "dilations", .kind = GR_ATTR_INTS, .n = 2, .ints = one},
      {.name = "pads", .kind = GR_ATTR_INTS, .n = 4, .ints = cpads},
      {.name = "group", .kind = GR_ATTR_INT, .i = 1}};
  int cins[3] = {v, wv, bv};
  if (v >= 0) v = emit_into(l, n, "Conv", cins, bias >= 0 ? 3 : 2, -1, ca, 5);
  /* the interleave, channels-last: the conv's NCHW output is a transpose
   * of its NHWC one after the layout pass, which the first transpose here
   * cancels, and the phases move whole channel vectors (on NCHW the 6-D
   * transpose moved single elements, planes apart: 7.3 ms against 2.4 for
   * the conv in the U-Net) */
  int64_t to_l[4] = {0, 2, 3, 1}, from_l[4] = {0, 3, 1, 2};
  gr_attr ta = {.name = "perm", .kind = GR_ATTR_INTS, .n = 6, .ints = perm};
  gr_attr tl = {.name = "perm", .kind = GR_ATTR_INTS, .n = 4, .ints = to_l};
  gr_attr fl = {.name = "perm", .kind = GR_ATTR_INTS, .n = 4, .ints = from_l};
  if (v >= 0) v = emit_into(l, n, "Transpose", &v, 1, -1, &tl, 1);
  if (v >= 0 && ss > 1) {
    v = emit_into(l, n, "Reshape", (int[]){v, r6}, 2, -1, NULL, 0);
    if (v >= 0) v = emit_into(l, n, "Transpose", &v, 1, -1, &ta, 1);
    if (v >= 0) v = emit_into(l, n, "Reshape", (int[]){v, r4}, 2, -1, NULL, 0);
  }
  bool crop = c.before[0] || c.before[1] || c.out[0] != q[0] * s[0] ||
              c.out[1] != q[1] * s[1];
  if (v >= 0 && crop) {
    int64_t starts[2] = {c.before[0], c.before[1]}, axes[2] = {1, 2};
    int64_t ends[2] = {c.before[0] + c.out[0], c.before[1] + c.out[1]};
    int ins[4] = {v, i64_const(g, 2, starts), i64_const(g, 2, ends),
                  i64_const(g, 2, axes)};
    if (ins[1] < 0 || ins[2] < 0 || ins[3] < 0)
      return TS_ERR(l->err, TS_ENOMEM, "lowering");
    v = emit_into(l, n, "Slice", ins, 4, -1, NULL, 0);
  }
  if (c.nsp == 2) {
    if (v >= 0) v = emit_into(l, n, "Transpose", &v, 1, n->outputs[0], &fl, 1);
  } else if (v >= 0) { /* [N, 1, L, CO] -> [N, CO, L] */
    int64_t perm3[4] = {0, 3, 1, 2}, o3[3] = {n0, co, c.out[1]};
    gr_attr f3 = {.name = "perm", .kind = GR_ATTR_INTS, .n = 4, .ints = perm3};
    int r3 = i64_const(g, 3, o3);
    if (r3 < 0) return TS_ERR(l->err, TS_ENOMEM, "lowering");
    v = emit_into(l, n, "Transpose", &v, 1, -1, &f3, 1);
    if (v >= 0)
      v = emit_into(l, n, "Reshape", (int[]){v, r3}, 2, n->outputs[0], NULL, 0);
  }
  return v < 0 ? v : TS_OK;
}
