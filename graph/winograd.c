/*
 * winograd.c — 3x3 convolutions by Winograd's minimal filtering F(2x2, 3x3)
 * (Lavin & Gray): each 2x2 block of outputs is computed from a 4x4 tile of
 * the input with 16 multiplications per input and output channel pair
 * instead of 36 — 2.25 times fewer.
 *
 * A channels-last Conv (after the layout pass) with 3x3 constant weights,
 * stride 1, dilation 1, one group and one pixel of padding on every side
 * becomes three nodes:
 *
 *   WinogradInput(x)      x [N, H, W, CI]  ->  V [16, P, CI]
 *   MatMul(V, U)          U = G g G^T, a constant [16, CI, CO]  ->  M [16, P,
 * CO] WinogradOutput(M, b)  ->  y [N, H, W, CO] (+ the conv's bias b)
 *
 * P = N * ceil(H/2) * ceil(W/2) tiles, tile p = (n, th, tw) in row-major
 * order, rounded up to a multiple of 8 rows (zeros past the last tile: the
 * product's register tiles of 4 or 8 rows then divide it; ResNet-50's
 * 14x14 layers have 49 tiles, and their tuned product ran 0.86-0.90 ms as
 * 56 rows against 0.97-1.07 as 49, alternating `tessera bench --tir`). V[4a +
 * b, p] = (B^T d B)[a, b] for the tile d of the zero-padded input at rows 2th -
 * 1 .. 2th + 2 and columns 2tw - 1 .. 2tw + 2; the output block at (2th, 2tw)
 * is A^T (M[., p] as 4x4) A. The weights are transformed once, at compile time.
 * The 16 products are one batched matrix product, tuned like any other; the two
 * transforms are elementwise stages (a few adds per element), and the output
 * transform takes the conv's epilogue (bias, residual add, relu) in its group.
 *
 * The transforms are built from index arithmetic on the tile coordinate
 * (row a of B^T has two non-zeros, at columns min(a, 1) and 2 + a / 3,
 * with signs; row r of A^T sums entries r .. r + 2, the later two negated
 * when r = 1), so a vectorized stage reads four (input) or nine (output)
 * elements per element it writes. The reference kernels below use the
 * matrices themselves: they check the index arithmetic, not repeat it.
 *
 * Not taken: convs with fewer than 32 input or output channels (the
 * transforms would cost more than the products save); images of fewer
 * than 32 tiles (7x7: 16), where the batched product, reading its 16/9
 * times larger weights for few rows, is bound by memory (ResNet-50's
 * 7x7x512 conv: 2.8 ms by Winograd, tuned, against 2.5 direct); other kernels,
 * strides, dilations, pads or groups, and a conv whose weights the layout
 * pass blocked.
 */
#include "winograd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ALPHA 4 /* input tile side: m + r - 1 for m = 2, r = 3 */
#define TILES (ALPHA * ALPHA)
#define MIN_CHANNELS 32
#define MIN_TILES 32
#define WEIGHT_BLOCK 16
#define ROW_ALIGN 8

static const double BT[ALPHA][ALPHA] = {
    {1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
static const double G[ALPHA][3] = {
    {1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
static const double AT[2][ALPHA] = {{1, 1, 1, 0}, {0, 1, -1, -1}};

static int64_t tiles_of(int64_t extent) { return (extent + 1) / 2; }

/* ---- the pass ---- */

/* Whether n is a conv the pass rewrites. */
static bool applies(const ts_graph *g, const gr_node *n) {
  if (n->kind != TS_GRAPH_OP || strcmp(n->op, "Conv") ||
      !gr_node_channels_last(n) || gr_conv_weight_block(n) || n->n_inputs < 2 ||
      n->n_outputs != 1 || gr_attr_int(n, "group", 1) != 1)
    return false;
  int x = n->inputs[0], w = n->inputs[1], y = n->outputs[0];
  if (x < 0 || w < 0 || !gr_is_const(g, w)) return false;
  const gr_value *xv = &g->values[x], *wv = &g->values[w], *yv = &g->values[y];
  if (!ts_dtype_eq(xv->dtype, TS_FLOAT32) ||
      !ts_dtype_eq(wv->dtype, TS_FLOAT32) ||
      !ts_dtype_eq(yv->dtype, TS_FLOAT32) || xv->ndim != 4 || wv->ndim != 4 ||
      yv->ndim != 4)
    return false;
  /* weights [KH, KW, CI, CO] */
  if (wv->shape[0] != 3 || wv->shape[1] != 3 || wv->shape[2] != xv->shape[3] ||
      wv->shape[3] != yv->shape[3] || wv->shape[2] < MIN_CHANNELS ||
      wv->shape[3] < MIN_CHANNELS)
    return false;
  if (yv->shape[0] != xv->shape[0] || yv->shape[1] != xv->shape[1] ||
      yv->shape[2] != xv->shape[2] ||
      yv->shape[0] * tiles_of(yv->shape[1]) * tiles_of(yv->shape[2]) <
          MIN_TILES)
    return false;
  if (n->n_inputs > 2 && n->inputs[2] >= 0 &&
      (!ts_dtype_eq(g->values[n->inputs[2]].dtype, TS_FLOAT32) ||
       gr_value_elems(&g->values[n->inputs[2]]) != yv->shape[3]))
    return false;
  if (!gr_attr_ints_all(n, "strides", 1) ||
      !gr_attr_ints_all(n, "dilations", 1))
    return false;
  int64_t in_sp[2] = {xv->shape[1], xv->shape[2]}, kernel[2] = {3, 3},
          one[2] = {1, 1}, pads[4];
  if (gr_resolve_pads(n, 2, in_sp, kernel, one, one, pads)) return false;
  for (int d = 0; d < 4; d++)
    if (pads[d] != 1) return false;
  return true;
}

bool gr_winograd_applies(const ts_graph *g, const gr_node *n) {
  return !g->no_winograd && applies(g, n);
}

/* Where U[t, ci, co] lives (see transformed_weights). */
static int64_t u_index(int64_t t, int64_t ci, int64_t co, int64_t CI,
                       int64_t CO, int64_t B) {
  if (!B) return (t * CI + ci) * CO + co;
  return ((t * (CO / B) + co / B) * CI + ci) * B + co % B;
}

/* U = G g G^T for every (ci, co) from HWIO weights w: [16, CI, CO], or
 * with the output channels blocked by B (B > 0) [16, CO/B, CI, B], as the
 * layout pass blocks a MatMul's constant weights (a tile of output
 * channels then reads one contiguous run). */
static int transformed_weights(ts_graph *g, int w, int64_t B) {
  int64_t CI = g->values[w].shape[2], CO = g->values[w].shape[3];
  int64_t shape[4] = {TILES, CI, CO, 0};
  if (B) shape[1] = CO / B, shape[2] = CI, shape[3] = B;
  int u = gr_const_reserve(g, gr_fresh_name(g, g->values[w].name), TS_FLOAT32,
                           B ? 4 : 3, shape);
  if (u < 0) return u;
  const float *src = gr_const_data(g, w);
  float *dst = gr_const_data(g, u);
  for (int64_t ci = 0; ci < CI; ci++)
    for (int64_t co = 0; co < CO; co++) {
      double k[3][3], t[ALPHA][3];
      for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
          k[i][j] = src[((i * 3 + j) * CI + ci) * CO + co];
      for (int a = 0; a < ALPHA; a++)
        for (int j = 0; j < 3; j++)
          t[a][j] = G[a][0] * k[0][j] + G[a][1] * k[1][j] + G[a][2] * k[2][j];
      for (int a = 0; a < ALPHA; a++)
        for (int b = 0; b < ALPHA; b++)
          dst[u_index(a * ALPHA + b, ci, co, CI, CO, B)] =
              (float)(t[a][0] * G[b][0] + t[a][1] * G[b][1] +
                      t[a][2] * G[b][2]);
    }
  return u;
}

static gr_node make_node(ts_graph *g, const char *op, const char *base,
                         const int *ins, int n_ins, int out) {
  return gr_node_make(g, op, gr_fresh_name(g, base), ins, n_ins, &out, 1);
}

/* Rewrites conv n (see applies) into its three nodes, pushed to l. */
static int rewrite(ts_graph *g, const gr_node *n, gr_list *l) {
  int x = n->inputs[0], w = n->inputs[1], y = n->outputs[0];
  int bias = n->n_inputs > 2 ? n->inputs[2] : -1;
  const char *name = n->name;
  int64_t N = g->values[y].shape[0], H = g->values[y].shape[1],
          W = g->values[y].shape[2], CO = g->values[y].shape[3],
          CI = g->values[x].shape[3];
  int64_t P =
      (N * tiles_of(H) * tiles_of(W) + ROW_ALIGN - 1) / ROW_ALIGN * ROW_ALIGN;
  int64_t B = CO % WEIGHT_BLOCK == 0 ? WEIGHT_BLOCK : 0;
  int u = transformed_weights(g, w, B);
  if (u < 0) return TS_ENOMEM;
  int v = gr_value_fresh(g, g->values[x].name, TS_FLOAT32, 3,
                         (int64_t[]){TILES, P, CI});
  int m = gr_value_fresh(g, g->values[y].name, TS_FLOAT32, 3,
                         (int64_t[]){TILES, P, CO});
  if (v < 0 || m < 0) return TS_ENOMEM;
  g->values[v].layout = g->values[m].layout = "";
  gr_node in = make_node(g, "WinogradInput", name, &x, 1, v);
  gr_node mm = make_node(g, "MatMul", name, (int[]){v, u}, 2, m);
  if (B)
    gr_node_set_attr(
        g, &mm, (gr_attr){.name = "weight_block", .kind = GR_ATTR_INT, .i = B});
  gr_node out = make_node(g, "WinogradOutput", name, (int[]){m, bias},
                          bias >= 0 ? 2 : 1, y);
  gr_list_push(l, &in);
  gr_list_push(l, &mm);
  gr_list_push(l, &out);
  return TS_OK;
}

int ts_graph_winograd(ts_graph *g, ts_error *err) {
  gr_list l = {0};
  bool changed = false;
  int n_nodes = g->n_nodes;
  for (int i = 0; i < n_nodes; i++) {
    gr_node n = g->nodes[i]; /* a copy: rewrite may grow the graph */
    if (!g->no_winograd && applies(g, &n)) {
      if (rewrite(g, &n, &l)) {
        free(l.nodes);
        return TS_ERR(err, TS_ENOMEM, "winograd: out of memory at node '%s'",
                      n.name);
      }
      changed = true;
    } else {
      gr_list_push(&l, &n);
    }
  }
  if (!changed) {
    free(l.nodes);
    return TS_OK;
  }
  if (gr_list_commit(g, &l))
    return TS_ERR(err, TS_ENOMEM, "winograd: out of memory");
  return ts_graph_eliminate_dead(g, err); /* the untransformed weights */
}

/* ---- reference kernels ---- */

int gr_winograd_run_input(const gr_tensor *x, gr_tensor *v) {
  int64_t N = x->shape[0], H = x->shape[1], W = x->shape[2], C = x->shape[3];
  int64_t TH = tiles_of(H), TW = tiles_of(W), P = v->shape[1];
  const float *src = x->data;
  float *dst = v->data;
  for (int64_t p = 0; p < P; p++) {
    int64_t n = p / (TH * TW), th = p / TW % TH, tw = p % TW;
    for (int64_t c = 0; c < C; c++) {
      double d[ALPHA][ALPHA], t[ALPHA][ALPHA];
      for (int i = 0; i < ALPHA; i++)
        for (int j = 0; j < ALPHA; j++) {
          int64_t h = 2 * th + i - 1, w = 2 * tw + j - 1;
          d[i][j] = n < N && h >= 0 && h < H && w >= 0 && w < W
                        ? src[((n * H + h) * W + w) * C + c]
                        : 0;
        }
      for (int a = 0; a < ALPHA; a++)
        for (int j = 0; j < ALPHA; j++) {
          t[a][j] = 0;
          for (int i = 0; i < ALPHA; i++) t[a][j] += BT[a][i] * d[i][j];
        }
      for (int a = 0; a < ALPHA; a++)
        for (int b = 0; b < ALPHA; b++) {
          double s = 0;
          for (int j = 0; j < ALPHA; j++) s += t[a][j] * BT[b][j];
          dst[((int64_t)(a * ALPHA + b) * P + p) * C + c] = (float)s;
        }
    }
  }
  return TS_OK;
}

int gr_winograd_run_output(const gr_tensor *m, const gr_tensor *bias,
                           gr_tensor *y) {
  int64_t N = y->shape[0], H = y->shape[1], W = y->shape[2], C = y->shape[3];
  int64_t TH = tiles_of(H), TW = tiles_of(W), P = m->shape[1];
  const float *src = m->data, *b = bias ? bias->data : NULL;
  float *dst = y->data;
  for (int64_t p = 0; p < N * TH * TW; p++) {
    int64_t n = p / (TH * TW), th = p / TW % TH, tw = p % TW;
    for (int64_t c = 0; c < C; c++) {
      double t[2][ALPHA];
      for (int r = 0; r < 2; r++)
        for (int j = 0; j < ALPHA; j++) {
          t[r][j] = 0;
          for (int a = 0; a < ALPHA; a++)
            t[r][j] +=
                AT[r][a] * src[((int64_t)(a * ALPHA + j) * P + p) * C + c];
        }
      for (int r = 0; r < 2; r++)
        for (int s = 0; s < 2; s++) {
          int64_t h = 2 * th + r, w = 2 * tw + s;
          if (h >= H || w >= W) continue;
          double o = b ? b[c] : 0;
          for (int j = 0; j < ALPHA; j++) o += t[r][j] * AT[s][j];
          dst[((n * H + h) * W + w) * C + c] = (float)o;
        }
    }
  }
  return TS_OK;
}

/* ---- the transforms as TE stages (fuse.c) ---- */

static ts_expr *idx(ts_arena *a, int64_t v) { return ts_index(a, v); }

static ts_expr *f32(ts_arena *a, double v) {
  return ts_float(a, TS_FLOAT32, v);
}

/* x[n, 2th + i - 1, 2tw + j - 1, c], zero outside the image (and where
 * `valid`, when given, is false: a padding row of V). */
static ts_expr *tile_element(gr_fuse_builder *b, ts_buffer *x, const int64_t *s,
                             ts_expr *n, ts_expr *th, ts_expr *tw, ts_expr *i,
                             ts_expr *j, ts_expr *c, ts_expr *valid) {
  ts_arena *a = b->a;
  ts_expr *h = ts_add(a, ts_mul(a, th, idx(a, 2)), ts_sub(a, i, idx(a, 1)));
  ts_expr *w = ts_add(a, ts_mul(a, tw, idx(a, 2)), ts_sub(a, j, idx(a, 1)));
  ts_expr *in =
      ts_and(a, ts_and(a, ts_ge(a, h, idx(a, 0)), ts_lt(a, h, idx(a, s[1]))),
             ts_and(a, ts_ge(a, w, idx(a, 0)), ts_lt(a, w, idx(a, s[2]))));
  if (valid) in = ts_and(a, valid, in);
  ts_expr *at[4] = {n, h, w, c};
  ts_expr *args[3] = {in, ts_te_load(b->te, x, at, 4), f32(a, 0)};
  return ts_call(a, TS_FLOAT32, "if_then_else", args, 3);
}

ts_buffer *gr_winograd_build_input(gr_fuse_builder *b, const gr_node *n) {
  const ts_graph *g = b->g;
  ts_arena *a = b->a;
  const gr_value *xv = &g->values[n->inputs[0]];
  const gr_value *vv = &g->values[n->outputs[0]];
  int64_t s[4];
  memcpy(s, xv->shape, sizeof s);
  int64_t TH = tiles_of(s[1]), TW = tiles_of(s[2]);
  ts_buffer *x = gr_fuse_param(b, n->inputs[0]);
  if (!x) return NULL;
  ts_te_stage *st = ts_te_compute(b->te, gr_fuse_stage_name(b, "winograd_in"),
                                  TS_FLOAT32, vv->shape, 3, NULL);
  ts_expr *t = ts_te_axis(st, 0), *p = ts_te_axis(st, 1),
          *c = ts_te_axis(st, 2);
  ts_expr *ta = ts_floordiv(a, t, idx(a, ALPHA)),
          *tb = ts_floormod(a, t, idx(a, ALPHA));
  ts_expr *nn = ts_floordiv(a, p, idx(a, TH * TW));
  ts_expr *th = ts_floormod(a, ts_floordiv(a, p, idx(a, TW)), idx(a, TH));
  ts_expr *tw = ts_floormod(a, p, idx(a, TW));
  /* V's rows past the last tile (see ROW_ALIGN) are zeros */
  ts_expr *valid = vv->shape[1] > s[0] * TH * TW
                       ? ts_lt(a, p, idx(a, s[0] * TH * TW))
                       : NULL;
  /* row k of B^T: +-1 at columns min(k, 1) and 2 + k / 3 */
  ts_expr *col[2][2], *sign[2][2];
  ts_expr *k[2] = {ta, tb};
  for (int q = 0; q < 2; q++) {
    col[q][0] = ts_min(a, k[q], idx(a, 1));
    col[q][1] = ts_add(a, idx(a, 2), ts_floordiv(a, k[q], idx(a, 3)));
    sign[q][0] = ts_select(a, ts_eq(a, k[q], idx(a, 2)), f32(a, -1), f32(a, 1));
    sign[q][1] = ts_select(
        a, ts_or(a, ts_eq(a, k[q], idx(a, 1)), ts_eq(a, k[q], idx(a, 2))),
        f32(a, 1), f32(a, -1));
  }
  ts_expr *sum = NULL;
  for (int r = 0; r < 2; r++) {
    ts_expr *row = NULL;
    for (int q = 0; q < 2; q++) {
      ts_expr *e = ts_mul(
          a, sign[1][q],
          tile_element(b, x, s, nn, th, tw, col[0][r], col[1][q], c, valid));
      row = row ? ts_add(a, row, e) : e;
    }
    row = ts_mul(a, sign[0][r], row);
    sum = sum ? ts_add(a, sum, row) : row;
  }
  return ts_te_set_value(st, sum);
}

ts_buffer *gr_winograd_build_output(gr_fuse_builder *b, const gr_node *n) {
  const ts_graph *g = b->g;
  ts_arena *a = b->a;
  const gr_value *yv = &g->values[n->outputs[0]];
  int64_t TH = tiles_of(yv->shape[1]), TW = tiles_of(yv->shape[2]);
  ts_buffer *m = gr_fuse_param(b, n->inputs[0]);
  ts_buffer *bias = n->n_inputs > 1 && n->inputs[1] >= 0
                        ? gr_fuse_param(b, n->inputs[1])
                        : NULL;
  if (!m || (n->n_inputs > 1 && n->inputs[1] >= 0 && !bias)) return NULL;
  ts_te_stage *st = ts_te_compute(b->te, gr_fuse_stage_name(b, "winograd_out"),
                                  TS_FLOAT32, yv->shape, 4, NULL);
  ts_expr *nn = ts_te_axis(st, 0), *h = ts_te_axis(st, 1),
          *w = ts_te_axis(st, 2), *c = ts_te_axis(st, 3);
  ts_expr *r = ts_floormod(a, h, idx(a, 2)), *q = ts_floormod(a, w, idx(a, 2));
  ts_expr *p = ts_add(
      a,
      ts_mul(a,
             ts_add(a, ts_mul(a, nn, idx(a, TH)), ts_floordiv(a, h, idx(a, 2))),
             idx(a, TW)),
      ts_floordiv(a, w, idx(a, 2)));
  /* row r of A^T: +1 at column r, then -+1 at r + 1 and r + 2 (1 - 2r) */
  ts_expr *sr =
      ts_cast(a, TS_FLOAT32, ts_sub(a, idx(a, 1), ts_mul(a, r, idx(a, 2))));
  ts_expr *sq =
      ts_cast(a, TS_FLOAT32, ts_sub(a, idx(a, 1), ts_mul(a, q, idx(a, 2))));
  ts_expr *rows[3];
  for (int u = 0; u < 3; u++) {
    ts_expr *e[3];
    for (int v = 0; v < 3; v++) {
      ts_expr *t = ts_add(a, ts_mul(a, ts_add(a, r, idx(a, u)), idx(a, ALPHA)),
                          ts_add(a, q, idx(a, v)));
      ts_expr *at[3] = {t, p, c};
      e[v] = ts_te_load(b->te, m, at, 3);
    }
    rows[u] = ts_add(a, e[0], ts_mul(a, sq, ts_add(a, e[1], e[2])));
  }
  ts_expr *y = ts_add(a, rows[0], ts_mul(a, sr, ts_add(a, rows[1], rows[2])));
  if (bias) y = ts_add(a, y, ts_te_load(b->te, bias, &c, 1));
  return ts_te_set_value(st, y);
}

void ts_graph_set_winograd(ts_graph *g, bool on) { g->no_winograd = !on; }
