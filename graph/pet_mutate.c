/*
 * pet_mutate.c — the mutants of PET's pass (pet.c): building blocks for
 * mutant nodes, the built-in mutators, the subprograms of several nodes
 * they take, and the corrections that recompute the original where a
 * mutant differs.
 *
 * Mutators:
 *   dilated_to_batch   a dilated conv (stride 1) as a dense conv over the
 *                      dh x dw sub-images, moved into the batch by a
 *                      reshape and a transpose (space to batch) and back.
 *                      Exact when the pads are multiples of the dilation
 *                      and the dilation divides the image; an image it
 *                      does not divide is cropped to a multiple and the
 *                      last rows and columns corrected. The dense conv can
 *                      then go to Winograd, which a dilated one cannot.
 *   split_rows         a batch-1 "same" conv as two half images in the
 *                      batch: the rows at the seam read zero padding
 *                      instead of their neighbours, so it differs there and
 *                      is corrected (PET's canonical partial equivalence;
 *                      on a CPU it never wins on cost, and it is kept to
 *                      exercise the corrector on every model).
 *   pad_same           a stride-1 conv with pads below "same" (a "valid"
 *                      conv) as the "same" conv, the original's rows and
 *                      columns sliced out: exact, and what Winograd takes.
 *   split_kernel       a conv of two kernel rows or more as two convs, one
 *                      over the kernel's first rows and one over the rest
 *                      (its data read that many rows lower: a smaller top
 *                      pad, or the first rows sliced off), added: exact up
 *                      to the order of the sums.
 *   stride_to_channels a strided conv as a stride-1 conv over the image's
 *                      phases moved into the channels (space to depth),
 *                      its kernel re-laid with zero taps: exact. A stem of
 *                      3 input channels becomes a conv of 12.
 *   batch_shared_input the convs or matmuls of a subprogram as one, their
 *                      weights (and biases) concatenated along the output
 *                      channels at compile time, a slice of the result for
 *                      each (BERT's Q, K and V projections). Exact.
 *
 */
#include "pet.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- building mutants ---- */

int pet_int64s(ts_graph *g, const char *base, int n, const int64_t *v) {
  int64_t len = n;
  return gr_const_add(g, gr_fresh_name(g, base), TS_INT64, 1, &len, v);
}

int pet_emit(ts_graph *g, pet_mutant *m, const char *op, const int *ins,
             int n_ins, const gr_node *attrs_of, ts_error *err) {
  if (m->n >= PET_MAX_NODES)
    return TS_ERR(err, TS_EINVAL, "a mutant of more than %d nodes",
                  PET_MAX_NODES);
  int out = gr_value_fresh(g, "pet", TS_FLOAT32, -1, NULL);
  if (out < 0) return TS_ERR(err, TS_ENOMEM, "out of memory");
  gr_node n = gr_node_make(g, op, gr_fresh_name(g, "pet"), ins, n_ins, &out, 1);
  for (int i = 0; attrs_of && i < attrs_of->n_attrs; i++)
    gr_node_set_attr(g, &n, attrs_of->attrs[i]);
  m->nodes[m->n++] = n;
  return out;
}

/* Infers the shape of the last node of m (after its attributes are set). */
static int infer_last(ts_graph *g, pet_mutant *m, ts_error *err) {
  gr_node *n = &m->nodes[m->n - 1];
  int rc = gr_infer_node(g, n, err);
  if (rc) return rc;
  gr_value *v = &g->values[n->outputs[0]];
  if (v->ndim == 4) v->layout = "NHWC";
  return n->outputs[0];
}

void pet_set_ints(ts_graph *g, pet_mutant *m, const char *name, int n,
                  const int64_t *v) {
  gr_node_set_attr(
      g, &m->nodes[m->n - 1],
      (gr_attr){
          .name = name, .kind = GR_ATTR_INTS, .n = n, .ints = (int64_t *)v});
}

static int reshape(ts_graph *g, pet_mutant *m, int x, int nd,
                   const int64_t *shape, ts_error *err) {
  int s = pet_int64s(g, "pet_shape", nd, shape);
  if (s < 0) return TS_ERR(err, TS_ENOMEM, "out of memory");
  int rc = pet_emit(g, m, "Reshape", (int[]){x, s}, 2, NULL, err);
  return rc < 0 ? rc : infer_last(g, m, err);
}

static int transpose(ts_graph *g, pet_mutant *m, int x, int nd,
                     const int64_t *perm, ts_error *err) {
  int rc = pet_emit(g, m, "Transpose", &x, 1, NULL, err);
  if (rc < 0) return rc;
  pet_set_ints(g, m, "perm", nd, perm);
  return infer_last(g, m, err);
}

/* x[axis in [lo, hi)] */
static int slice(ts_graph *g, pet_mutant *m, int x, int axis, int64_t lo,
                 int64_t hi, ts_error *err) {
  int64_t ax = axis;
  int s = pet_int64s(g, "pet_start", 1, &lo),
      e = pet_int64s(g, "pet_end", 1, &hi);
  int a = pet_int64s(g, "pet_axis", 1, &ax);
  if (s < 0 || e < 0 || a < 0) return TS_ERR(err, TS_ENOMEM, "out of memory");
  int rc = pet_emit(g, m, "Slice", (int[]){x, s, e, a}, 4, NULL, err);
  return rc < 0 ? rc : infer_last(g, m, err);
}

/* A channels-last 2-D float conv (what the mutators take), its resolved
 * pads [top, left, bottom, right], strides and dilations. */
typedef struct conv_info {
  int x, w, b;
  int64_t N, H, W, C, OH, OW, CO, group, k[2], s[2], d[2], pad[4];
} conv_info;

static bool conv_info_of(const ts_graph *g, const gr_node *n, conv_info *c) {
  if (n->kind != TS_GRAPH_OP || strcmp(n->op, "Conv") ||
      !gr_node_channels_last(n) || n->n_inputs < 2 || n->n_outputs != 1 ||
      gr_conv_weight_block(n))
    return false;
  c->x = n->inputs[0];
  c->w = n->inputs[1];
  c->b = n->n_inputs > 2 ? n->inputs[2] : -1;
  const gr_value *x = &g->values[c->x], *w = &g->values[c->w],
                 *y = &g->values[n->outputs[0]];
  if (x->ndim != 4 || w->ndim != 4 || y->ndim != 4 ||
      !ts_dtype_eq(x->dtype, TS_FLOAT32) || !ts_dtype_eq(y->dtype, TS_FLOAT32))
    return false;
  pet_conv geo;
  if (!pet_conv_geo(g, n, &geo)) return false;
  c->N = x->shape[0], c->H = x->shape[1], c->W = x->shape[2];
  c->C = x->shape[3];
  c->OH = y->shape[1], c->OW = y->shape[2], c->CO = y->shape[3];
  c->group = geo.group;
  memcpy(c->k, geo.k, sizeof c->k);
  memcpy(c->s, geo.s, sizeof c->s);
  memcpy(c->d, geo.d, sizeof c->d);
  memcpy(c->pad, geo.pad, sizeof c->pad);
  return true;
}

/* A conv like n (its attributes) on data x with weights w, bias b (-1:
 * none), explicit pads and dilations, kernel rows and columns k, and
 * strides (NULL: n's). */
static int conv_strided(ts_graph *g, pet_mutant *m, const gr_node *n, int x,
                        int w, int b, const int64_t *pads, const int64_t *dil,
                        const int64_t *k, const int64_t *strides,
                        ts_error *err) {
  int ins[3] = {x, w, b};
  int rc = pet_emit(g, m, "Conv", ins, b >= 0 ? 3 : 2, n, err);
  if (rc < 0) return rc;
  gr_node_set_attr(
      g, &m->nodes[m->n - 1],
      (gr_attr){.name = "auto_pad", .kind = GR_ATTR_STRING, .s = "NOTSET"});
  pet_set_ints(g, m, "pads", 4, pads);
  pet_set_ints(g, m, "dilations", 2, dil);
  pet_set_ints(g, m, "kernel_shape", 2, k);
  if (strides) pet_set_ints(g, m, "strides", 2, strides);
  return infer_last(g, m, err);
}

static int conv_with(ts_graph *g, pet_mutant *m, const gr_node *n, int x, int w,
                     int b, const int64_t *pads, const int64_t *dil,
                     const int64_t *k, ts_error *err) {
  return conv_strided(g, m, n, x, w, b, pads, dil, k, NULL, err);
}

/* A conv like n (its attributes) on data x with explicit pads and
 * dilations. */
static int conv_like(ts_graph *g, pet_mutant *m, const gr_node *n,
                     const conv_info *c, int x, const int64_t *pads,
                     const int64_t *dil, ts_error *err) {
  return conv_with(g, m, n, x, c->w, c->b, pads, dil, c->k, err);
}

/* x with `extra` rows (axis 1) or columns (axis 2) of zeros after it. */
static int zero_extend(ts_graph *g, pet_mutant *m, int x, int axis,
                       int64_t extra, ts_error *err) {
  int64_t shape[4];
  memcpy(shape, g->values[x].shape, sizeof shape);
  shape[axis] = extra;
  int z =
      gr_const_reserve(g, gr_fresh_name(g, "pet_zeros"), TS_FLOAT32, 4, shape);
  if (z < 0) return TS_ERR(err, TS_ENOMEM, "out of memory");
  memset(gr_const_data(g, z), 0,
         sizeof(float) * (size_t)(shape[0] * shape[1] * shape[2] * shape[3]));
  int rc = pet_emit(g, m, "Concat", (int[]){x, z}, 2, NULL, err);
  if (rc < 0) return rc;
  gr_node_set_attr(g, &m->nodes[m->n - 1],
                   (gr_attr){.name = "axis", .kind = GR_ATTR_INT, .i = axis});
  return infer_last(g, m, err);
}

/* x with `extra` rows (axis 1) or columns (axis 2) of zeros before it. */
static int zero_prepend(ts_graph *g, pet_mutant *m, int x, int axis,
                        int64_t extra, ts_error *err) {
  int z = zero_extend(g, m, x, axis, extra, err);
  if (z < 0) return z;
  gr_node *c = &m->nodes[m->n - 1]; /* Concat(x, zeros): the other way */
  int t = c->inputs[0];
  c->inputs[0] = c->inputs[1], c->inputs[1] = t;
  return z;
}

/* v cropped or extended with zeros to `want` along axis. */
static int fit(ts_graph *g, pet_mutant *m, int v, int axis, int64_t want,
               ts_error *err) {
  int64_t have = g->values[v].shape[axis];
  if (have > want) return slice(g, m, v, axis, 0, want, err);
  if (have < want) return zero_extend(g, m, v, axis, want - have, err);
  return v;
}

int pet_mut_dilated(ts_graph *g, const gr_node *n, pet_mutant *m,
                    ts_error *err) {
  conv_info c;
  if (!conv_info_of(g, n, &c) || c.s[0] != 1 || c.s[1] != 1 ||
      (c.d[0] == 1 && c.d[1] == 1))
    return 0;
  int64_t dh = c.d[0], dw = c.d[1];
  /* an image the dilation does not divide is cropped to a multiple; the
   * output rows and columns that read what was cut (and the ones the
   * dense conv does not reach) differ, and the corrector recomputes them
   * (extending the image with zeros instead would be exact, but its seam
   * inside the dilation's row pairs splits every row into a box of its
   * own) */
  int64_t Hs = c.H / dh, Ws = c.W / dw;
  if (Hs < 2 || Ws < 2) return 0;
  int64_t B = dh * dw * c.N;
  int v = fit(g, m, c.x, 1, Hs * dh, err);
  if (v >= 0) v = fit(g, m, v, 2, Ws * dw, err);
  if (v >= 0)
    v = reshape(g, m, v, 6, (int64_t[]){c.N, Hs, dh, Ws, dw, c.C}, err);
  if (v >= 0) v = transpose(g, m, v, 6, (int64_t[]){2, 4, 0, 1, 3, 5}, err);
  if (v >= 0) v = reshape(g, m, v, 4, (int64_t[]){B, Hs, Ws, c.C}, err);
  int64_t pads[4] = {c.pad[0] / dh, c.pad[1] / dw, (c.pad[2] + dh - 1) / dh,
                     (c.pad[3] + dw - 1) / dw};
  if (v >= 0) v = conv_like(g, m, n, &c, v, pads, (int64_t[]){1, 1}, err);
  if (v < 0) return v;
  int64_t Ho = g->values[v].shape[1], Wo = g->values[v].shape[2];
  if (Ho <= 0 || Wo <= 0) return 0;
  v = reshape(g, m, v, 6, (int64_t[]){dh, dw, c.N, Ho, Wo, c.CO}, err);
  if (v >= 0) v = transpose(g, m, v, 6, (int64_t[]){2, 3, 0, 4, 1, 5}, err);
  if (v >= 0)
    v = reshape(g, m, v, 4, (int64_t[]){c.N, Ho * dh, Wo * dw, c.CO}, err);
  if (v >= 0) v = fit(g, m, v, 1, c.OH, err);
  if (v >= 0) v = fit(g, m, v, 2, c.OW, err);
  if (v < 0) return v;
  m->out = v;
  m->kind = "dilated_to_batch";
  return 1;
}

int pet_mut_split_rows(ts_graph *g, const gr_node *n, pet_mutant *m,
                       ts_error *err) {
  conv_info c;
  if (!conv_info_of(g, n, &c) || c.N != 1 || c.s[0] != 1 || c.s[1] != 1 ||
      c.H % 2 || c.H < 8 || c.OH != c.H || c.OW != c.W)
    return 0;
  int v = reshape(g, m, c.x, 4, (int64_t[]){2, c.H / 2, c.W, c.C}, err);
  if (v >= 0) v = conv_like(g, m, n, &c, v, c.pad, c.d, err);
  if (v < 0) return v;
  if (g->values[v].shape[1] != c.H / 2) return 0;
  v = reshape(g, m, v, 4, (int64_t[]){1, c.OH, c.OW, c.CO}, err);
  if (v < 0) return v;
  m->out = v;
  m->kind = "split_rows";
  return 1;
}

/* A stride-1 conv of odd kernel whose pads are smaller than "same" (a
 * "valid" conv, or pads on some sides only) as the "same" conv, and the
 * rows and columns the original computes sliced out of it: exact, at the
 * cost of the border it computes and drops. The "same" form is what
 * Winograd takes. */
int pet_mut_pad_same(ts_graph *g, const gr_node *n, pet_mutant *m,
                     ts_error *err) {
  conv_info c;
  if (!conv_info_of(g, n, &c) || c.s[0] != 1 || c.s[1] != 1 || c.d[0] != 1 ||
      c.d[1] != 1 || c.k[0] % 2 == 0 || c.k[1] % 2 == 0)
    return 0;
  int64_t ph = (c.k[0] - 1) / 2, pw = (c.k[1] - 1) / 2;
  if (c.pad[0] > ph || c.pad[2] > ph || c.pad[1] > pw || c.pad[3] > pw ||
      (c.pad[0] == ph && c.pad[2] == ph && c.pad[1] == pw && c.pad[3] == pw))
    return 0;
  int v = conv_like(g, m, n, &c, c.x, (int64_t[]){ph, pw, ph, pw}, c.d, err);
  if (v < 0) return v;
  /* rows and columns in one slice: one copy */
  int64_t lo[2] = {ph - c.pad[0], pw - c.pad[1]},
          hi[2] = {lo[0] + c.OH, lo[1] + c.OW}, axes[2] = {1, 2};
  int st = pet_int64s(g, "pet_start", 2, lo),
      en = pet_int64s(g, "pet_end", 2, hi),
      ax = pet_int64s(g, "pet_axis", 2, axes);
  if (st < 0 || en < 0 || ax < 0)
    return TS_ERR(err, TS_ENOMEM, "out of memory");
  v = pet_emit(g, m, "Slice", (int[]){v, st, en, ax}, 4, NULL, err);
  if (v >= 0) v = infer_last(g, m, err);
  if (v < 0) return v;
  m->out = v;
  m->kind = "pad_same";
  return 1;
}

/* Rows [lo, hi) of constant channels-last conv weights [KH, KW, CI, CO] as a
 * new constant. */
static int weight_rows(ts_graph *g, int w, int64_t lo, int64_t hi,
                       ts_error *err) {
  int64_t shape[4];
  memcpy(shape, g->values[w].shape, sizeof shape);
  size_t row = (size_t)(shape[1] * shape[2] * shape[3]);
  shape[0] = hi - lo;
  int c =
      gr_const_reserve(g, gr_fresh_name(g, "pet_kernel"), TS_FLOAT32, 4, shape);
  if (c < 0) return TS_ERR(err, TS_ENOMEM, "out of memory");
  memcpy(gr_const_data(g, c), (const float *)gr_const_data(g, w) + lo * row,
         sizeof(float) * row * (size_t)(hi - lo));
  return c;
}

/* One part of a split kernel: kernel rows [k0, k0 + kh) of conv c as a conv
 * whose output is the original's rows, on data x read k0 rows (times the
 * dilation) lower; with the bias when `bias`. */
static int kernel_part(ts_graph *g, pet_mutant *m, const gr_node *n,
                       const conv_info *c, int64_t k0, int64_t kh, bool bias,
                       ts_error *err) {
  int w = weight_rows(g, c->w, k0, k0 + kh, err);
  if (w < 0) return w;
  int x = c->x;
  int64_t top = c->pad[0] - k0 * c->d[0], H = c->H;
  if (top < 0) { /* the rows above the first one read: sliced off */
    if (-top >= H) return 0;
    x = slice(g, m, x, 1, -top, H, err);
    if (x < 0) return x;
    H += top;
    top = 0;
  }
  /* the last row the original's last output row reads with these taps */
  int64_t last = (c->OH - 1) * c->s[0] - top + (kh - 1) * c->d[0];
  int64_t bottom = last > H - 1 ? last - (H - 1) : 0;
  int64_t pads[4] = {top, c->pad[1], bottom, c->pad[3]};
  int v = conv_with(g, m, n, x, w, bias ? c->b : -1, pads, c->d,
                    (int64_t[]){kh, c->k[1]}, err);
  if (v < 0) return v;
  if (g->values[v].shape[1] < c->OH || g->values[v].shape[2] != c->OW) return 0;
  return fit(g, m, v, 1, c->OH, err);
}

int pet_mut_split_kernel(ts_graph *g, const gr_node *n, pet_mutant *m,
                         ts_error *err) {
  conv_info c;
  if (!conv_info_of(g, n, &c) || c.k[0] < 2 || !gr_is_const(g, c.w)) return 0;
  const int64_t *ws = g->values[c.w].shape; /* [KH, KW, CI, CO] */
  if (ws[0] != c.k[0] || ws[1] != c.k[1] || ws[3] != c.CO) return 0;
  int64_t a = c.k[0] / 2;
  int top = kernel_part(g, m, n, &c, 0, a, true, err);
  if (top <= 0) return top;
  int rest = kernel_part(g, m, n, &c, a, c.k[0] - a, false, err);
  if (rest <= 0) return rest;
  int v = pet_emit(g, m, "Add", (int[]){top, rest}, 2, NULL, err);
  if (v >= 0) v = infer_last(g, m, err);
  if (v < 0) return v;
  m->out = v;
  m->kind = "split_kernel";
  return 1;
}

/* A strided conv as a stride-1 conv over the image's phases moved into
 * the channels (space to depth): with strides sh x sw, the padded image
 * [N, Hp, Wp, C] (Hp, Wp multiples of the strides: zero rows and columns
 * around it, the original's pads and what its last output row and column
 * reach) is reshaped to [N, Hp/sh, sh, Wp/sw, sw, C], transposed and
 * reshaped to [N, Hp/sh, Wp/sw, sh*sw*C]. Tap (kh, kw) of the kernel
 * becomes tap (kh/sh, kw/sw) on channel block (kh%sh, kw%sw): a kernel of
 * ceil(KH/sh) x ceil(KW/sw) taps, the taps past the original's zero (made
 * at mutation time). Exact. It computes those zero taps (7 x 7 stride 2:
 * 4 x 4 x 4 taps for 49, 1.31 x the FLOPs), but a conv of 3 input channels
 * (an image network's stem) becomes one of 12: a reduction the kernels can
 * block like any other. */
int pet_mut_stride_to_channels(ts_graph *g, const gr_node *n, pet_mutant *m,
                               ts_error *err) {
  conv_info c;
  if (!conv_info_of(g, n, &c) || c.group != 1 || c.d[0] != 1 || c.d[1] != 1 ||
      (c.s[0] == 1 && c.s[1] == 1) || c.k[0] < c.s[0] || c.k[1] < c.s[1] ||
      !gr_is_const(g, c.w))
    return 0;
  const int64_t *ws = g->values[c.w].shape; /* [KH, KW, CI, CO] */
  if (ws[0] != c.k[0] || ws[1] != c.k[1] || ws[2] != c.C || ws[3] != c.CO)
    return 0;
  int64_t sh = c.s[0], sw = c.s[1];
  int64_t kh2 = (c.k[0] + sh - 1) / sh, kw2 = (c.k[1] + sw - 1) / sw;
  /* the padded image: every row the last output row reads, to a multiple */
  int64_t Hp = ((c.OH - 1) * sh + c.k[0] + sh - 1) / sh * sh,
          Wp = ((c.OW - 1) * sw + c.k[1] + sw - 1) / sw * sw;
  int64_t C2 = sh * sw * c.C;
  int v = c.x;
  if (c.pad[0] > 0) v = zero_prepend(g, m, v, 1, c.pad[0], err);
  if (v >= 0) v = fit(g, m, v, 1, Hp, err);
  if (v >= 0 && c.pad[1] > 0) v = zero_prepend(g, m, v, 2, c.pad[1], err);
  if (v >= 0) v = fit(g, m, v, 2, Wp, err);
  if (v >= 0)
    v = reshape(g, m, v, 6, (int64_t[]){c.N, Hp / sh, sh, Wp / sw, sw, c.C},
                err);
  if (v >= 0) v = transpose(g, m, v, 6, (int64_t[]){0, 1, 3, 2, 4, 5}, err);
  if (v >= 0)
    v = reshape(g, m, v, 4, (int64_t[]){c.N, Hp / sh, Wp / sw, C2}, err);
  if (v < 0) return v;
  /* the kernel: [kh2, kw2, (p, q, ci), CO] */
  int64_t shape[4] = {kh2, kw2, C2, c.CO};
  int w =
      gr_const_reserve(g, gr_fresh_name(g, "pet_kernel"), TS_FLOAT32, 4, shape);
  if (w < 0) return TS_ERR(err, TS_ENOMEM, "out of memory");
  float *dst = gr_const_data(g, w);
  const float *src = gr_const_data(g, c.w);
  memset(dst, 0, sizeof(float) * (size_t)(kh2 * kw2 * C2 * c.CO));
  size_t row = (size_t)(c.C * c.CO); /* one tap's weights */
  for (int64_t kh = 0; kh < c.k[0]; kh++)
    for (int64_t kw = 0; kw < c.k[1]; kw++) {
      int64_t a = kh / sh, b = kw / sw, p = kh % sh, q = kw % sw;
      memcpy(dst + ((a * kw2 + b) * C2 + (p * sw + q) * c.C) * c.CO,
             src + (size_t)(kh * c.k[1] + kw) * row, sizeof(float) * row);
    }
  v = conv_strided(g, m, n, v, w, c.b, (int64_t[]){0, 0, 0, 0},
                   (int64_t[]){1, 1}, (int64_t[]){kh2, kw2}, (int64_t[]){1, 1},
                   err);
  if (v < 0) return v;
  if (g->values[v].shape[1] != c.OH || g->values[v].shape[2] != c.OW) return 0;
  m->out = v;
  m->kind = "stride_to_channels";
  return 1;
}

int pet_mutate(ts_graph *g, const gr_node *n, const char *kind, pet_mutant *m,
               ts_error *err) {
  if (!strcmp(kind, "pad_same")) return pet_mut_pad_same(g, n, m, err);
  if (!strcmp(kind, "dilated_to_batch")) return pet_mut_dilated(g, n, m, err);
  if (!strcmp(kind, "split_rows")) return pet_mut_split_rows(g, n, m, err);
  if (!strcmp(kind, "split_kernel")) return pet_mut_split_kernel(g, n, m, err);
  if (!strcmp(kind, "stride_to_channels"))
    return pet_mut_stride_to_channels(g, n, m, err);
  return TS_ERR(err, TS_EINVAL, "no built-in mutator '%s'", kind);
}

/* ---- subprograms of several nodes: batching what reads one value ---- */

static bool attr_equal(const gr_attr *a, const gr_attr *b) {
  if (strcmp(a->name, b->name) || a->kind != b->kind) return false;
  switch (a->kind) {
  case GR_ATTR_INT: return a->i == b->i;
  case GR_ATTR_FLOAT: return a->f == b->f;
  case GR_ATTR_STRING: return !strcmp(a->s, b->s);
  case GR_ATTR_INTS:
    return a->n == b->n && !memcmp(a->ints, b->ints, sizeof(int64_t) * a->n);
  case GR_ATTR_FLOATS:
    return a->n == b->n &&
           !memcmp(a->floats, b->floats, sizeof(double) * (size_t)a->n);
  }
  return false;
}

static bool attrs_equal(const gr_node *a, const gr_node *b) {
  if (a->n_attrs != b->n_attrs) return false;
  for (int i = 0; i < a->n_attrs; i++) {
    const gr_attr *o = gr_attr_find(b, a->attrs[i].name);
    if (!o || !attr_equal(&a->attrs[i], o)) return false;
  }
  return true;
}

/* How node n would be batched with others reading its data: the axis of
 * its weights that holds its output channels (*w_axis) and the axis of its
 * output (*y_axis). false when n is not a float32 Conv (one group) or
 * MatMul with constant weights reading data x. */
static bool batch_axes(const ts_graph *g, const gr_node *n, int x, int *w_axis,
                       int *y_axis) {
  if (n->kind != TS_GRAPH_OP || n->n_outputs != 1 || n->n_inputs < 2 ||
      n->inputs[0] != x || !gr_is_const(g, n->inputs[1]))
    return false;
  const gr_value *w = &g->values[n->inputs[1]], *y = &g->values[n->outputs[0]];
  if (!ts_dtype_eq(w->dtype, TS_FLOAT32) ||
      !ts_dtype_eq(y->dtype, TS_FLOAT32) ||
      !ts_dtype_eq(g->values[x].dtype, TS_FLOAT32) || y->ndim < 1)
    return false;
  if (!strcmp(n->op, "MatMul") && n->n_inputs == 2) {
    if (gr_matmul_weight_block(n))
      *w_axis = 0; /* [N/B, K, B] */
    else if (w->ndim == 2)
      *w_axis = 1; /* [K, N] */
    else
      return false;
    *y_axis = y->ndim - 1;
    return true;
  }
  if (!strcmp(n->op, "Conv") && n->n_inputs <= 3 && y->ndim == 4 &&
      gr_attr_int(n, "group", 1) == 1) {
    if (n->n_inputs == 3 && (n->inputs[2] < 0 || !gr_is_const(g, n->inputs[2])))
      return false;
    bool nhwc = gr_node_channels_last(n);
    /* [CO/B, KH, KW, CI, B], [KH, KW, CI, CO] or [CO, CI, KH, KW] */
    *w_axis = gr_conv_weight_block(n) ? 0 : nhwc ? 3 : 0;
    *y_axis = nhwc ? 3 : 1;
    return true;
  }
  return false;
}

/* Whether a and b (both batchable on the same data) can run as one. */
static bool batch_compatible(const ts_graph *g, const gr_node *a,
                             const gr_node *b, int w_axis) {
  if (strcmp(a->op, b->op) || a->n_inputs != b->n_inputs || !attrs_equal(a, b))
    return false;
  const gr_value *wa = &g->values[a->inputs[1]], *wb = &g->values[b->inputs[1]];
  if (wa->ndim != wb->ndim) return false;
  for (int d = 0; d < wa->ndim; d++)
    if (d != w_axis && wa->shape[d] != wb->shape[d]) return false;
  return true;
}

/* The bias addition after matmul node n (its output's only use, an Add of
 * a constant that varies along the last axis alone), or -1. */
static int bias_add_of(const ts_graph *g, const gr_node *n, const int *uses,
                       const int *consumer) {
  int y = n->outputs[0];
  if (uses[y] != 1 || consumer[y] < 0) return -1;
  const gr_node *a = &g->nodes[consumer[y]];
  if (strcmp(a->op, "Add") || a->n_inputs != 2 || a->n_outputs != 1) return -1;
  int b = a->inputs[0] == y ? a->inputs[1] : a->inputs[0];
  if (!gr_is_const(g, b)) return -1;
  const gr_value *bv = &g->values[b], *yv = &g->values[y];
  if (!ts_dtype_eq(bv->dtype, TS_FLOAT32) || bv->ndim < 1 ||
      bv->ndim > yv->ndim || bv->shape[bv->ndim - 1] != yv->shape[yv->ndim - 1])
    return -1;
  for (int d = 0; d + 1 < bv->ndim; d++)
    if (bv->shape[d] != 1) return -1;
  const gr_value *av = &g->values[a->outputs[0]];
  for (int d = 0; d < yv->ndim; d++)
    if (av->shape[d] != yv->shape[d]) return -1;
  return consumer[y];
}

/* The axis along which data of node n (a conv or matmul batch_axes
 * takes) stacks: the batch of a conv, the rows of a matmul; -1 when none. */
static int stack_axis(const ts_graph *g, const gr_node *n) {
  const gr_value *x = &g->values[n->inputs[0]];
  if (!strcmp(n->op, "Conv")) return 0;
  return x->ndim >= 2 ? x->ndim - 2 : -1;
}

/* Whether b can join a's group: of the same value (shared weights: a and
 * b apply the same weights to data of the same shape but on the stacking
 * axis; otherwise they read the same data). */
static bool joins(const ts_graph *g, const gr_node *a, const gr_node *b,
                  bool shared_weights) {
  int wa, ya, wb, yb;
  if (!batch_axes(g, a, a->inputs[0], &wa, &ya)) return false;
  if (!shared_weights)
    return batch_axes(g, b, a->inputs[0], &wb, &yb) && wb == wa &&
           batch_compatible(g, a, b, wa);
  if (b->inputs[0] == a->inputs[0] || b->n_inputs != a->n_inputs ||
      !batch_axes(g, b, b->inputs[0], &wb, &yb) || strcmp(a->op, b->op) ||
      !attrs_equal(a, b))
    return false;
  for (int k = 1; k < a->n_inputs; k++) /* weights, bias */
    if (!pet_same_constant(g, a->inputs[k], b->inputs[k])) return false;
  const gr_value *xa = &g->values[a->inputs[0]], *xb = &g->values[b->inputs[0]];
  int ax = stack_axis(g, a);
  if (ax < 0 || xa->ndim != xb->ndim) return false;
  for (int d = 0; d < xa->ndim; d++)
    if (d != ax && xa->shape[d] != xb->shape[d]) return false;
  return true;
}

int pet_batch_groups(const ts_graph *g, pet_sub *subs, int max) {
  int *uses = gr_use_counts(g);
  int *consumer = ts_malloc(sizeof(int) * ((size_t)g->n_values + 1));
  uint8_t *taken = ts_calloc((size_t)g->n_nodes + 1, 1);
  int found = 0;
  if (!uses || !consumer || !taken) {
    free(uses), free(consumer), free(taken);
    return TS_ENOMEM;
  }
  for (int v = 0; v < g->n_values; v++) consumer[v] = -1;
  for (int i = 0; i < g->n_nodes; i++)
    for (int k = 0; k < g->nodes[i].n_inputs; k++)
      if (g->nodes[i].inputs[k] >= 0) consumer[g->nodes[i].inputs[k]] = i;
  /* first what reads one value, then what applies the same weights */
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < g->n_nodes && found < max; i++) {
      const gr_node *a = &g->nodes[i];
      if (taken[i]) continue;
      int members[PET_MAX_OUTS], nm = 0;
      members[nm++] = i;
      for (int j = i + 1; j < g->n_nodes && nm < PET_MAX_OUTS; j++)
        if (!taken[j] && joins(g, a, &g->nodes[j], pass == 1))
          members[nm++] = j;
      if (nm < 2) continue;
      /* a matmul's bias addition joins when every member has one (of
       * batched weights only) */
      int adds[PET_MAX_OUTS], with_bias = 0;
      for (int k = 0; k < nm; k++) {
        adds[k] = strcmp(a->op, "MatMul") || pass
                      ? -1
                      : bias_add_of(g, &g->nodes[members[k]], uses, consumer);
        with_bias += adds[k] >= 0;
      }
      if (with_bias != nm)
        for (int k = 0; k < nm; k++) adds[k] = -1;
      pet_sub *s = &subs[found++];
      memset(s, 0, sizeof *s);
      /* in the graph's order: the members, then their additions */
      int order[2 * PET_MAX_OUTS], no = 0;
      for (int k = 0; k < nm; k++) order[no++] = members[k];
      for (int k = 0; k < nm; k++)
        if (adds[k] >= 0) order[no++] = adds[k];
      for (int p = 1; p < no; p++)
        for (int q = p; q > 0 && order[q - 1] > order[q]; q--) {
          int t = order[q];
          order[q] = order[q - 1];
          order[q - 1] = t;
        }
      for (int k = 0; k < no; k++) {
        s->idx[s->n] = order[k];
        s->nodes[s->n++] = g->nodes[order[k]];
        taken[order[k]] = 1;
      }
      for (int k = 0; k < nm; k++)
        s->outs[s->n_outs++] = adds[k] >= 0 ? g->nodes[adds[k]].outputs[0]
                                            : g->nodes[members[k]].outputs[0];
    }
  free(uses), free(consumer), free(taken);
  return found;
}

/* Emits op(ins) into m and infers its shape; its output's layout is that
 * of value `layout_of`. */
static int emit_like(ts_graph *g, pet_mutant *m, const char *op, const int *ins,
                     int n_ins, const gr_node *attrs_of, int layout_of,
                     ts_error *err) {
  int rc = pet_emit(g, m, op, ins, n_ins, attrs_of, err);
  if (rc < 0) return rc;
  gr_node *n = &m->nodes[m->n - 1];
  if ((rc = gr_infer_node(g, n, err))) return rc;
  g->values[n->outputs[0]].layout = g->values[layout_of].layout;
  return n->outputs[0];
}

static int concat_like(ts_graph *g, pet_mutant *m, const int *ins, int n_ins,
                       int axis, ts_error *err) {
  int rc = pet_emit(g, m, "Concat", ins, n_ins, NULL, err);
  if (rc < 0) return rc;
  gr_node *n = &m->nodes[m->n - 1];
  gr_node_set_attr(g, n,
                   (gr_attr){.name = "axis", .kind = GR_ATTR_INT, .i = axis});
  if ((rc = gr_infer_node(g, n, err))) return rc;
  g->values[n->outputs[0]].layout = g->values[ins[0]].layout;
  return n->outputs[0];
}

/* The nodes that read one value as one: their weights (and biases)
 * concatenated along the output channels, one conv or matmul (and one
 * bias addition), and a slice of its output for each. Fully equivalent
 * (BERT's Q, K and V projections). */
int pet_mut_batch(ts_graph *g, const pet_sub *sub, pet_mutant *m,
                  ts_error *err) {
  const gr_node *ops[PET_MAX_OUTS], *adds[PET_MAX_OUTS];
  int n_ops = 0, n_adds = 0, wa = 0, ya = 0;
  for (int i = 0; i < sub->n; i++) {
    const gr_node *n = &sub->nodes[i];
    if (!strcmp(n->op, "Add"))
      adds[n_adds++] = n;
    else if (n_ops < PET_MAX_OUTS)
      ops[n_ops++] = n;
  }
  if (n_ops < 2 || n_ops != sub->n_outs || (n_adds && n_adds != n_ops) ||
      !batch_axes(g, ops[0], ops[0]->inputs[0], &wa, &ya))
    return 0;
  for (int k = 1; k < n_ops; k++)
    if (ops[k]->inputs[0] != ops[0]->inputs[0]) return 0; /* other data */
  /* the bias additions in the order of their matmuls */
  const gr_node *add_of[PET_MAX_OUTS] = {0};
  for (int k = 0; k < n_ops && n_adds; k++)
    for (int j = 0; j < n_adds; j++)
      if (adds[j]->inputs[0] == ops[k]->outputs[0] ||
          adds[j]->inputs[1] == ops[k]->outputs[0])
        add_of[k] = adds[j];
  int ws[PET_MAX_OUTS], bs[PET_MAX_OUTS];
  for (int k = 0; k < n_ops; k++) {
    ws[k] = ops[k]->inputs[1];
    bs[k] = ops[k]->n_inputs > 2 ? ops[k]->inputs[2] : -1;
    if (add_of[k]) {
      const gr_node *a = add_of[k];
      bs[k] = a->inputs[0] == ops[k]->outputs[0] ? a->inputs[1] : a->inputs[0];
    } else if (n_adds)
      return 0;
  }
  int w = concat_like(g, m, ws, n_ops, wa, err);
  if (w < 0) return w;
  int b = -1;
  if (bs[0] >= 0) {
    b = concat_like(g, m, bs, n_ops, g->values[bs[0]].ndim - 1, err);
    if (b < 0) return b;
  }
  int x = ops[0]->inputs[0], y0 = ops[0]->outputs[0];
  int ins[3] = {x, w, b};
  bool conv = !strcmp(ops[0]->op, "Conv");
  int y =
      emit_like(g, m, ops[0]->op, ins, conv && b >= 0 ? 3 : 2, ops[0], y0, err);
  if (y >= 0 && !conv && b >= 0)
    y = emit_like(g, m, "Add", (int[]){y, b}, 2, NULL, y0, err);
  int64_t at = 0;
  for (int k = 0; k < n_ops && y >= 0; k++) {
    int64_t width = g->values[ops[k]->outputs[0]].shape[ya];
    int o = slice(g, m, y, ya, at, at + width, err);
    if (o < 0) return o;
    g->values[o].layout = g->values[y0].layout;
    m->outs[k] = o;
    at += width;
  }
  if (y < 0) return y;
  m->n_outs = n_ops;
  m->out = m->outs[0];
  m->kind = "batch_shared_input";
  return 1;
}

/* The nodes that apply the same weights to different data as one: the
 * data concatenated along the batch (a conv's) or the rows (a matmul's),
 * one conv or matmul, and a slice of its output for each. Exact. */
int pet_mut_concat(ts_graph *g, const pet_sub *sub, pet_mutant *m,
                   ts_error *err) {
  if (sub->n < 2 || sub->n != sub->n_outs) return 0;
  const gr_node *a = &sub->nodes[0];
  for (int i = 1; i < sub->n; i++)
    if (!joins(g, a, &sub->nodes[i], true)) return 0;
  int ax = stack_axis(g, a);
  int xs[PET_MAX_OUTS];
  for (int i = 0; i < sub->n; i++) xs[i] = sub->nodes[i].inputs[0];
  int x = concat_like(g, m, xs, sub->n, ax, err);
  if (x < 0) return x;
  int ins[3] = {x, a->inputs[1], a->n_inputs > 2 ? a->inputs[2] : -1};
  int y = emit_like(g, m, a->op, ins, a->n_inputs, a, a->outputs[0], err);
  if (y < 0) return y;
  int yax = !strcmp(a->op, "Conv") ? 0 : g->values[y].ndim - 2;
  int64_t at = 0;
  for (int i = 0; i < sub->n; i++) {
    int64_t rows = g->values[sub->nodes[i].outputs[0]].shape[yax];
    int o = slice(g, m, y, yax, at, at + rows, err);
    if (o < 0) return o;
    g->values[o].layout = g->values[a->outputs[0]].layout;
    m->outs[i] = o;
    at += rows;
  }
  m->n_outs = sub->n;
  m->out = m->outs[0];
  m->kind = "concat_shared_weights";
  return 1;
}

int pet_mutate_sub(ts_graph *g, const pet_sub *sub, const char *kind,
                   pet_mutant *m, ts_error *err) {
  if (!strcmp(kind, "batch_shared_input")) return pet_mut_batch(g, sub, m, err);
  if (!strcmp(kind, "concat_shared_weights"))
    return pet_mut_concat(g, sub, m, err);
  return TS_ERR(err, TS_EINVAL, "no built-in mutator of subprograms '%s'",
                kind);
}

/* ---- corrections ---- */

/* The original conv n on output rows (axis 1) or columns (axis 2) [a, b):
 * the input band those outputs read, sliced, with the padding the band's
 * edges need. */
static int correction(ts_graph *g, pet_mutant *m, const gr_node *n,
                      const conv_info *c, int axis, int64_t a, int64_t b,
                      ts_error *err) {
  int s = axis - 1;
  int64_t ext = s ? c->W : c->H;
  int64_t i0 = a * c->s[s] - c->pad[s];
  int64_t i1 = (b - 1) * c->s[s] - c->pad[s] + c->d[s] * (c->k[s] - 1) + 1;
  int64_t lo = i0 < 0 ? 0 : i0, hi = i1 > ext ? ext : i1;
  if (hi <= lo) return 0;
  int64_t pads[4];
  memcpy(pads, c->pad, sizeof pads);
  pads[s] = lo - i0;
  pads[s + 2] = i1 > ext ? i1 - ext : 0;
  int v = slice(g, m, c->x, axis, lo, hi, err);
  if (v >= 0) v = conv_like(g, m, n, c, v, pads, c->d, err);
  if (v >= 0 && g->values[v].shape[axis] != b - a)
    return TS_ERR(err, TS_EINVAL,
                  "pet: a correction of %lld rows came out %lld",
                  (long long)(b - a), (long long)g->values[v].shape[axis]);
  return v;
}

static int cmp_band(const void *p, const void *q) {
  const int64_t *a = p, *b = q;
  return (a[0] > b[0]) - (a[0] < b[0]);
}

/* Sorts and merges bands [lo, hi) in place; returns how many remain. */
static int64_t merge_bands(int64_t (*band)[2], int64_t n) {
  qsort(band, (size_t)n, sizeof *band, cmp_band);
  int64_t nb = 0;
  for (int64_t i = 0; i < n; i++) {
    if (nb && band[i][0] <= band[nb - 1][1]) {
      if (band[i][1] > band[nb - 1][1]) band[nb - 1][1] = band[i][1];
    } else {
      band[nb][0] = band[i][0], band[nb][1] = band[i][1];
      nb++;
    }
  }
  return nb;
}

/* Replaces bands [lo, hi) of the mutant's output along axis (1 rows, 2
 * columns) by corrections: slices of the output between them, the
 * original conv on each, joined by a concat that becomes the output.
 * Appends the bands to note. 1 done, 0 when a band reads no input,
 * negative on failure. */
static int apply_bands(ts_graph *g, const gr_node *n, pet_mutant *m,
                       const conv_info *c, int axis, int64_t (*band)[2],
                       int64_t nb, char *note, size_t note_size,
                       ts_error *err) {
  int64_t ext = g->values[m->out].shape[axis];
  int pieces[PET_MAX_NODES], np = 0, y2 = m->out, rc = 0;
  int64_t at = 0;
  size_t len = strlen(note);
  len += (size_t)snprintf(note + len, note_size - len, "%s %s",
                          len ? " and" : " by", axis == 1 ? "rows" : "columns");
  for (int64_t i = 0; i < nb && len < note_size; i++)
    len += (size_t)snprintf(note + len, note_size - len, "%s [%lld, %lld)",
                            i ? "," : "", (long long)band[i][0],
                            (long long)band[i][1]);
  for (int64_t i = 0; i <= nb && rc >= 0; i++) {
    int64_t a = i < nb ? band[i][0] : ext;
    if (at < a) rc = pieces[np++] = slice(g, m, y2, axis, at, a, err);
    if (i < nb && rc >= 0) {
      rc = pieces[np++] =
          correction(g, m, n, c, axis, band[i][0], band[i][1], err);
      at = band[i][1];
    }
  }
  if (rc <= 0) return rc;
  rc = pet_emit(g, m, "Concat", pieces, np, NULL, err);
  if (rc < 0) return rc;
  gr_node_set_attr(g, &m->nodes[m->n - 1],
                   (gr_attr){.name = "axis", .kind = GR_ATTR_INT, .i = axis});
  rc = infer_last(g, m, err);
  if (rc < 0) return rc;
  m->out = rc;
  return 1;
}

/* Replaces the mutant's output on the differing boxes by corrections:
 * bands of whole rows, or of whole columns, or (when the differences run
 * along both edges, as where an odd last row and column were left out)
 * each box by the band across its shorter side, columns first and rows
 * over them. Each kind must cover at most half its axis; 0 when no choice
 * does (the mutant is then dropped). */
int pet_correct(ts_graph *g, const gr_node *n, pet_mutant *m,
                const pet_check_result *res, char *note, size_t note_size,
                ts_error *err) {
  conv_info c;
  if (!conv_info_of(g, n, &c)) return 0;
  int64_t nd = res->n_diff,
          ext[3] = {0, g->values[m->out].shape[1], g->values[m->out].shape[2]};
  int64_t(*band)[2] = ts_malloc(sizeof *band * (size_t)(2 * nd + 1));
  if (!band) return TS_ERR(err, TS_ENOMEM, "out of memory");
  int64_t(*cols)[2] = band + nd;
  int rc = 0;
  note[0] = 0;
  /* strategy 0: rows; 1: columns; 2: each box across its shorter side */
  for (int strategy = 0; strategy < 3 && rc == 0; strategy++) {
    int64_t nr = 0, nc = 0;
    for (int64_t i = 0; i < nd; i++) {
      const pet_box *b = &res->diff[i];
      bool by_rows =
          strategy == 0 ||
          (strategy == 2 && b->hi[1] - b->lo[1] <= b->hi[2] - b->lo[2]);
      if (by_rows)
        band[nr][0] = b->lo[1], band[nr++][1] = b->hi[1];
      else
        cols[nc][0] = b->lo[2], cols[nc++][1] = b->hi[2];
    }
    nr = merge_bands(band, nr);
    nc = merge_bands(cols, nc);
    int64_t covered_r = 0, covered_c = 0;
    for (int64_t i = 0; i < nr; i++) covered_r += band[i][1] - band[i][0];
    for (int64_t i = 0; i < nc; i++) covered_c += cols[i][1] - cols[i][0];
    if (covered_r * 2 > ext[1] || covered_c * 2 > ext[2] ||
        m->n + 4 * (nr + nc + 2) > PET_MAX_NODES)
      continue;
    int saved_n = m->n, saved_out = m->out;
    note[0] = 0;
    rc = nc ? apply_bands(g, n, m, &c, 2, cols, nc, note, note_size, err) : 1;
    if (rc > 0 && nr)
      rc = apply_bands(g, n, m, &c, 1, band, nr, note, note_size, err);
    if (rc == 0) /* undone: the next strategy starts from the mutant */
      m->n = saved_n, m->out = saved_out;
  }
  free(band);
  return rc;
}
