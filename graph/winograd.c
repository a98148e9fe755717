/*
 * winograd.c — 3x3 convolutions by Winograd's minimal filtering F(m x m,
 * 3x3) (Lavin & Gray), m = 2 or 4: each m x m block of outputs is computed
 * from an alpha x alpha tile of the input (alpha = m + 2) with alpha^2
 * multiplications per input and output channel pair instead of 9 m^2 —
 * 2.25 times fewer for F(2x2, 3x3), 4 times fewer for F(4x4, 3x3).
 *
 * A channels-last Conv (after the layout pass) with 3x3 constant weights,
 * stride 1, dilation 1, one group and at most two pixels of padding on a
 * side ("same" convs, "valid" ones, asymmetric pads) becomes three nodes:
 *
 *   WinogradInput(x)      x [N, H, W, CI]  ->  V [alpha^2, P, CI]
 *                         (attributes: pads = the conv's top and left
 *                         pads, output_hw = the output's HO, WO)
 *   MatMul(V, U)          U = G g G^T, a constant [alpha^2, CI, CO]
 *                         ->  M [alpha^2, P, CO]
 *   WinogradOutput(M, b)  ->  y [N, H, W, CO] (+ the conv's bias b)
 *
 * The tile size is V's and M's first dimension (16 or 36); nothing else
 * records it. P = N * ceil(HO/m) * ceil(WO/m) tiles, tile p = (n, th, tw) in
 * row-major order, rounded up to a multiple of 8 rows (the rows past the
 * last tile repeat it and are never read back: the product's register
 * tiles of 4 or 8 rows then divide it;
 * ResNet-50's 14x14 layers have 49 tiles of 2x2, and their tuned product
 * ran 0.86-0.90 ms as 56 rows against 0.97-1.07 as 49, alternating
 * `tessera bench --tir`). V[alpha a + b, p] = (B^T d B)[a, b] for the tile
 * d of the zero-padded input at rows m th - pt .. m th - pt + m + 1 and
 * columns m tw - pl .. m tw - pl + m + 1 (pt, pl the top and left pads);
 * the output block at (m th, m tw) is
 * A^T (M[., p] as alpha x alpha) A. The weights are transformed once, at
 * compile time. The alpha^2 products are one batched matrix product, tuned
 * like any other; the two transforms are elementwise stages, and the output
 * transform takes the conv's epilogue (bias, residual add, relu) in its
 * group.
 *
 * The transforms are built from the matrices' non-zeros (see `slots`): an
 * element of V sums s^2 input elements, s the most non-zeros in a row of
 * B^T (2 for m = 2, 4 for m = 4), an output element sums t^2 elements of M
 * (t = 3; for m = 4, two steps of 5 terms, see output_rows), each with a
 * coefficient that depends only on the tile coordinate, so a vectorized
 * stage computes it once per vector row. The
 * reference kernels below use the matrices themselves: they check the
 * stages' arithmetic, not repeat it.
 *
 * F(4x4) rounds more than F(2x2): its matrices hold 4, 5 and 8 (and 1/6,
 * 1/24 in G), so an output accumulates sums of larger terms that cancel.
 * The tests bound both forms' error against the direct conv (docs/graph.md
 * states the figures).
 *
 * The tile size (ts_graph_set_winograd_tile): 4 where the image has at
 * least MIN_TILES_4 tiles of 4x4 (14x14 has 16) per 8 float32 lanes of the
 * target's vectors (tile_for), else 2 where it has
 * MIN_TILES tiles of 2x2, else direct; or one size forced. Not taken: convs
 * with fewer than 32 input or output channels (the transforms would cost more
 * than the products save); images of fewer than MIN_TILES tiles (7x7: 16 of
 * 2x2), where the batched product, reading its alpha^2/9 times larger weights
 * for few rows, is bound by memory (ResNet-50's 7x7x512 conv: 2.8 ms by
 * Winograd, tuned, against 2.5 direct); other kernels, strides, dilations,
 * groups, pads of more than 2, and a conv whose weights the layout pass
 * blocked.
 */
#include "winograd.h"

#include "codegen/codegen.h"
#include "db/db.h"

#include <stdarg.h>
#include <stdio.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ALPHA 6
#define MIN_CHANNELS 32
#define MIN_TILES 32
/* F(4x4) from 16 tiles: ResNet-50's 14x14x256 conv, default product, ran
 * 0.71 ms (transforms included) against 0.75 for F(2x2)'s tuned one, in
 * the model (`tessera run --profile`) */
#define MIN_TILES_4 16
#define WEIGHT_BLOCK 16
#define ROW_ALIGN 8

/* One F(m x m, 3x3): B^T [alpha, alpha], G [alpha, 3], A^T [m, alpha]. */
typedef struct {
  int m, alpha;
  double bt[MAX_ALPHA][MAX_ALPHA], g[MAX_ALPHA][3],
      at[MAX_ALPHA - 2][MAX_ALPHA];
} wino_form;

static const wino_form F2 = {
    2,
    4,
    {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}},
    {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}},
    {{1, 1, 1, 0}, {0, 1, -1, -1}},
};

/* interpolation points 0, 1, -1, 2, -2 and infinity */
static const wino_form F4 = {
    4,
    6,
    {{4, 0, -5, 0, 1, 0},
     {0, -4, -4, 1, 1, 0},
     {0, 4, -4, -1, 1, 0},
     {0, -2, -1, 2, 1, 0},
     {0, 2, -1, -2, 1, 0},
     {0, 4, 0, -5, 0, 1}},
    {{1.0 / 4, 0, 0},
     {-1.0 / 6, -1.0 / 6, -1.0 / 6},
     {-1.0 / 6, 1.0 / 6, -1.0 / 6},
     {1.0 / 24, 1.0 / 12, 1.0 / 6},
     {1.0 / 24, -1.0 / 12, 1.0 / 6},
     {0, 0, 1}},
    {{1, 1, 1, 1, 1, 0},
     {0, 1, -1, 2, -2, 0},
     {0, 1, 1, 4, 4, 0},
     {0, 1, -1, 8, -8, 1}},
};

/* The form whose V or M has `tiles` (alpha^2) rows; NULL for none. */
static const wino_form *form_of_tiles(int64_t tiles) {
  return tiles == 16 ? &F2 : tiles == 36 ? &F4 : NULL;
}

static int64_t tiles_of(int64_t extent, int m) { return (extent + m - 1) / m; }

/* ---- the pass ---- */

/* Whether conv n has a form the pass can take (3x3, stride 1, "same"
 * pads, ...); the tiles of 2x2 and 4x4 its image has. */
static bool eligible(const ts_graph *g, const gr_node *n, int64_t *t2,
                     int64_t *t4) {
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
  if (yv->shape[0] != xv->shape[0] || yv->shape[1] < 1 || yv->shape[2] < 1)
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
  /* any padding a 3x3 window can see (0 to 2 pixels a side, "valid" convs
   * included): a tile's input window starts pads[0], pads[1] pixels above
   * and left of its outputs, and its positions outside the image are 0 */
  for (int d = 0; d < 4; d++)
    if (pads[d] < 0 || pads[d] > 2) return false;
  if (yv->shape[1] != xv->shape[1] + pads[0] + pads[2] - 2 ||
      yv->shape[2] != xv->shape[2] + pads[1] + pads[3] - 2)
    return false;
  *t4 = yv->shape[0] * tiles_of(yv->shape[1], 4) * tiles_of(yv->shape[2], 4);
  *t2 = yv->shape[0] * tiles_of(yv->shape[1], 2) * tiles_of(yv->shape[2], 2);
  return true;
}

/* The output tile size m the pass would use for conv n (2 or 4) by the
 * rule, 0 where it leaves n direct.
 * F(4x4)'s product does 2 x tiles multiply-adds per transformed weight it
 * streams (4x the direct conv's weights; F(2x2)'s 16/9x): 8 flops per byte
 * at 16 tiles, where a layer's weights come from memory. A target whose
 * vectors are twice as wide does twice the flops in the same bandwidth,
 * so F(4x4) there needs twice the tiles (MIN_TILES_4 per 8 lanes). On 2
 * cores of an AVX-512 Xeon, untuned ResNet-50's 14x14x256 convs in the
 * model (`tessera run --profile`, transforms included): F(4x4) 0.71 ms, its
 * product 0.64 (115 GFLOP/s: 14 GB/s of weights), F(2x2) 0.46, direct
 * 0.65; at 28x28 (49 tiles) F(4x4) 0.35 against F(2x2)'s 0.47. */
static int tile_for(const ts_graph *g, const gr_node *n) {
  int64_t t2, t4;
  if (!eligible(g, n, &t2, &t4)) return 0;
  if (g->winograd_tile == 4 || g->winograd_tile == 2)
    return t2 >= MIN_TILES || g->winograd_any ? g->winograd_tile : 0;
  int lanes = gr_target_lanes((ts_graph *)g); /* (caches the host's) */
  int64_t min4 = MIN_TILES_4 * (lanes > 8 ? lanes / 8 : 1);
  return t4 >= min4 ? 4 : t2 >= MIN_TILES ? 2 : 0;
}

bool gr_winograd_applies(const ts_graph *g, const gr_node *n) {
  return !g->no_winograd && tile_for(g, n);
}

double gr_winograd_flop_share(const ts_graph *g, const gr_node *n) {
  int m = g->no_winograd ? 0 : tile_for(g, n);
  /* the product's multiplications, and a third (F(2)) or a half (F(4),
   * whose transforms sum more terms) on top for the transforms */
  return m == 4 ? 36.0 / 144 * 3 / 2 : m == 2 ? 16.0 / 36 * 4 / 3 : 1;
}

/* Where U[t, ci, co] lives (see transformed_weights). */
static int64_t u_index(int64_t t, int64_t ci, int64_t co, int64_t CI,
                       int64_t CO, int64_t B) {
  if (!B) return (t * CI + ci) * CO + co;
  return ((t * (CO / B) + co / B) * CI + ci) * B + co % B;
}

/* U = G g G^T for every (ci, co) from HWIO weights w: [alpha^2, CI, CO], or
 * with the output channels blocked by B (B > 0) [alpha^2, CO/B, CI, B], as
 * the layout pass blocks a MatMul's constant weights (a tile of output
 * channels then reads one contiguous run). */
static int transformed_weights(ts_graph *g, int w, const wino_form *f,
                               int64_t B) {
  int64_t CI = g->values[w].shape[2], CO = g->values[w].shape[3];
  int al = f->alpha;
  int64_t shape[4] = {al * al, CI, CO, 0};
  if (B) shape[1] = CO / B, shape[2] = CI, shape[3] = B;
  int u = gr_const_reserve(g, gr_fresh_name(g, g->values[w].name), TS_FLOAT32,
                           B ? 4 : 3, shape);
  if (u < 0) return u;
  const float *src = gr_const_data(g, w);
  float *dst = gr_const_data(g, u);
  for (int64_t ci = 0; ci < CI; ci++)
    for (int64_t co = 0; co < CO; co++) {
      double k[3][3], t[MAX_ALPHA][3];
      for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
          k[i][j] = src[((i * 3 + j) * CI + ci) * CO + co];
      for (int a = 0; a < al; a++)
        for (int j = 0; j < 3; j++)
          t[a][j] = f->g[a][0] * k[0][j] + f->g[a][1] * k[1][j] +
                    f->g[a][2] * k[2][j];
      for (int a = 0; a < al; a++)
        for (int b = 0; b < al; b++)
          dst[u_index(a * al + b, ci, co, CI, CO, B)] =
              (float)(t[a][0] * f->g[b][0] + t[a][1] * f->g[b][1] +
                      t[a][2] * f->g[b][2]);
    }
  return u;
}

static gr_node make_node(ts_graph *g, const char *op, const char *base,
                         const int *ins, int n_ins, int out) {
  return gr_node_make(g, op, gr_fresh_name(g, base), ins, n_ins, &out, 1);
}

/* Rewrites conv n into its three nodes of F(m x m, 3x3), pushed to l. */
static int rewrite(ts_graph *g, const gr_node *n, int tile, gr_list *l) {
  int x = n->inputs[0], w = n->inputs[1], y = n->outputs[0];
  int bias = n->n_inputs > 2 ? n->inputs[2] : -1;
  const char *name = n->name;
  int64_t N = g->values[y].shape[0], H = g->values[y].shape[1],
          W = g->values[y].shape[2], CO = g->values[y].shape[3],
          CI = g->values[x].shape[3];
  const wino_form *f = tile == 4 ? &F4 : &F2;
  int64_t T = f->alpha * f->alpha;
  int64_t P = (N * tiles_of(H, f->m) * tiles_of(W, f->m) + ROW_ALIGN - 1) /
              ROW_ALIGN * ROW_ALIGN;
  int64_t B = CO % WEIGHT_BLOCK == 0 ? WEIGHT_BLOCK : 0;
  int u = transformed_weights(g, w, f, B);
  if (u < 0) return TS_ENOMEM;
  int v = gr_value_fresh(g, g->values[x].name, TS_FLOAT32, 3,
                         (int64_t[]){T, P, CI});
  int m = gr_value_fresh(g, g->values[y].name, TS_FLOAT32, 3,
                         (int64_t[]){T, P, CO});
  if (v < 0 || m < 0) return TS_ENOMEM;
  g->values[v].layout = g->values[m].layout = "";
  int64_t in_sp[2] = {g->values[x].shape[1], g->values[x].shape[2]},
          kernel[2] = {3, 3}, one[2] = {1, 1}, pads[4];
  if (gr_resolve_pads(n, 2, in_sp, kernel, one, one, pads)) return TS_EINVAL;
  gr_node in = make_node(g, "WinogradInput", name, &x, 1, v);
  /* where the tiles start in x, and the output they cover (copied) */
  gr_node_set_attr(
      g, &in,
      (gr_attr){.name = "pads", .kind = GR_ATTR_INTS, .n = 2, .ints = pads});
  gr_node_set_attr(g, &in,
                   (gr_attr){.name = "output_hw",
                             .kind = GR_ATTR_INTS,
                             .n = 2,
                             .ints = (int64_t[]){H, W}});
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

/* ---- the tile by measurement ---- */

struct gr_wino_setup {
  ts_db *db;
  char *target; /* canonical */
  bool collect_tasks;
  gr_task_set alts; /* the candidates' tasks (built alone) */
  char *log;
  size_t log_len, log_cap;
  char (*force_keys)[33]; /* forms forced per conv key */
  int *force_tiles, n_force;
  ts_winograd_conv *convs; /* the decisions of the last run */
  int n_convs, cap_convs;
};

static void convs_clear(gr_wino_setup *s) {
  for (int i = 0; i < s->n_convs; i++) free((char *)s->convs[i].node);
  s->n_convs = 0;
}

void gr_wino_setup_free(gr_wino_setup *s) {
  if (!s) return;
  gr_task_set_free(&s->alts);
  convs_clear(s);
  free(s->convs);
  free(s->force_keys);
  free(s->force_tiles);
  free(s->log);
  free(s->target);
  free(s);
}

/* Copies o's forced forms into s (replacing those before). */
static int set_force(gr_wino_setup *s, const ts_winograd_options *o,
                     ts_error *err) {
  free(s->force_keys);
  free(s->force_tiles);
  s->force_keys = NULL;
  s->force_tiles = NULL;
  s->n_force = 0;
  int n = o ? o->n_force : 0;
  if (n <= 0) return TS_OK;
  s->force_keys = ts_calloc((size_t)n, sizeof *s->force_keys);
  s->force_tiles = ts_calloc((size_t)n, sizeof *s->force_tiles);
  if (!s->force_keys || !s->force_tiles)
    return TS_ERR(err, TS_ENOMEM, "winograd: out of memory");
  for (int i = 0; i < n; i++) {
    const char *k = o->force_keys ? o->force_keys[i] : NULL;
    int t = o->force_tiles ? o->force_tiles[i] : -1;
    if (!k || strlen(k) != 32)
      return TS_ERR(err, TS_EINVAL,
                    "winograd: forced form %d: the conv key must be a task "
                    "hash of 32 hex digits",
                    i);
    if (t != 0 && t != 2 && t != 4)
      return TS_ERR(err, TS_EINVAL,
                    "winograd: forced form %d: tile %d (0 direct, 2 or 4)", i,
                    t);
    memcpy(s->force_keys[i], k, 33);
    s->force_tiles[i] = t;
  }
  s->n_force = n;
  return TS_OK;
}

int ts_graph_set_winograd_options(ts_graph *g, const ts_winograd_options *o,
                                  ts_error *err) {
  char *target = NULL;
  if (o && o->db) { /* the records are looked up under the canonical name */
    int rc = gr_canonical_target(o->target, &target, err);
    if (rc) return rc;
  }
  if (!g->wino) g->wino = ts_calloc(1, sizeof *g->wino);
  if (!g->wino) {
    free(target);
    return TS_ERR(err, TS_ENOMEM, "winograd: out of memory");
  }
  g->wino->db = o ? o->db : NULL;
  g->wino->collect_tasks = o && o->collect_tasks;
  free(g->wino->target);
  g->wino->target = target;
  return set_force(g->wino, o, err);
}

int ts_graph_winograd_candidate_tasks(const ts_graph *g,
                                      const ts_graph_task **tasks, int *n) {
  *tasks = g->wino ? g->wino->alts.tasks : NULL;
  *n = g->wino ? g->wino->alts.n : 0;
  return TS_OK;
}

int ts_graph_winograd_convs(const ts_graph *g, const ts_winograd_conv **convs,
                            int *n) {
  *convs = g->wino ? g->wino->convs : NULL;
  *n = g->wino ? g->wino->n_convs : 0;
  return TS_OK;
}

const char *ts_graph_winograd_log(const ts_graph *g) {
  return g->wino && g->wino->log ? g->wino->log : "";
}

static void wlog(gr_wino_setup *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void wlog(gr_wino_setup *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  gr_log_vappend(&s->log, &s->log_len, &s->log_cap, fmt, ap);
  va_end(ap);
}

const char *ts_winograd_form_name(int m) {
  return m == 4 ? "F(4x4)" : m == 2 ? "F(2x2)" : "direct";
}

/* Conv n alone, as tile m (0: direct), fused as the compiler will: the
 * sum of its tasks' latencies (NAN without a record for one); the tasks
 * join the candidates. key (may be NULL) gets the first task's hash. */
static double candidate_seconds(ts_graph *g, gr_wino_setup *s, const gr_node *n,
                                int m, char *key, int *rc) {
  int out = n->outputs[0];
  ts_graph *c = gr_candidate_graph(g, n, 1, &out, 1);
  if (!c) return *rc = TS_ENOMEM, NAN;
  c->vector_lanes = g->vector_lanes;
  c->vector_registers = g->vector_registers;
  c->no_winograd = m == 0;
  c->winograd_tile = m;
  c->winograd_any = true;
  ts_graph_task *t = NULL;
  int nt = 0;
  ts_error err;
  ts_error_clear(&err);
  double sum = NAN;
  if (!ts_graph_winograd(c, &err) && !ts_graph_eliminate_dead(c, &err) &&
      !ts_graph_fuse(c, &err) && !ts_graph_tasks(c, &t, &nt, &err)) {
    bool all_tasks = true; /* every node a task or a view */
    for (int i = 0; i < c->n_nodes; i++)
      all_tasks = all_tasks && (c->nodes[i].kind == TS_GRAPH_CALL ||
                                !strcmp(c->nodes[i].op, "Reshape"));
    char name[300];
    snprintf(name, sizeof name, "%s (%s)", n->name, ts_winograd_form_name(m));
    if (key && nt > 0) ts_hash128_hex(t[0].hash, key);
    if (all_tasks) sum = 0;
    for (int i = 0; all_tasks && i < nt && !*rc; i++) {
      *rc = gr_task_set_add(&s->alts, &t[i], name);
      sum += t[i].count * gr_task_seconds(s->db, s->target, &t[i]);
    }
  } else if (err.code == TS_ENOMEM) {
    *rc = TS_ENOMEM;
  }
  free(t);
  ts_graph_free(c);
  return sum;
}

/* The forms' seconds per model run measured in the compiled model (the
 * database's `choices` of kind "winograd" for this conv's key); false
 * unless the direct form and at least one Winograd form have a figure
 * (a form without one is NAN). */
static bool model_seconds(gr_wino_setup *s, const char *key, double sec[3]) {
  static const int ms[3] = {0, 2, 4};
  int have = 0;
  for (int k = 0; k < 3; k++) {
    sec[k] = NAN;
    if (s->db && s->target &&
        ts_db_choice_get(s->db, s->target, "winograd", key,
                         ts_winograd_form_name(ms[k]), &sec[k], NULL) == TS_OK)
      have |= 1 << k;
  }
  return (have & 1) && (have & 6);
}

/* Records the decision for conv n. */
static int note_conv(gr_wino_setup *s, const gr_node *n, const char *key,
                     int tile, int rule, const char *by) {
  if (s->n_convs == s->cap_convs) {
    int cap = s->cap_convs ? 2 * s->cap_convs : 16;
    ts_winograd_conv *c = realloc(s->convs, (size_t)cap * sizeof *c);
    if (!c) return TS_ENOMEM;
    s->convs = c;
    s->cap_convs = cap;
  }
  ts_winograd_conv *c = &s->convs[s->n_convs];
  memset(c, 0, sizeof *c);
  if (!(c->node = ts_strdup(n->name))) return TS_ENOMEM;
  snprintf(c->key, sizeof c->key, "%s", key);
  c->tile = tile;
  c->rule = rule;
  c->by = by;
  s->n_convs++;
  return TS_OK;
}

/* The tile for conv n: a forced form; else the fastest of the forms
 * measured in the model; else the fastest by the candidates' records; else
 * the rule's. */
static int weigh(ts_graph *g, gr_wino_setup *s, const gr_node *n, int rule,
                 int *tile) {
  static const int ms[3] = {0, 2, 4};
  double sec[3];
  char key[33] = "";
  int rc = TS_OK, best = -1;
  for (int k = 0; k < 3 && !rc; k++) {
    sec[k] = candidate_seconds(g, s, n, ms[k], k == 0 ? key : NULL, &rc);
    if (isfinite(sec[k]) && (best < 0 || sec[k] < sec[best])) best = k;
    if (!isfinite(sec[k])) best = 3; /* one missing: the rule */
  }
  if (rc) return rc;
  *tile = rule;
  for (int i = 0; key[0] && i < s->n_force; i++)
    if (!strcmp(s->force_keys[i], key)) {
      *tile = s->force_tiles[i];
      wlog(s, "%s: %s (forced)", n->name, ts_winograd_form_name(*tile));
      return note_conv(s, n, key, *tile, rule, "forced");
    }
  double msec[3];
  if (key[0] && model_seconds(s, key, msec)) {
    int mb = 0;
    for (int k = 1; k < 3; k++)
      if (isfinite(msec[k]) && msec[k] < msec[mb]) mb = k;
    *tile = ms[mb];
    char f[3][32];
    for (int k = 0; k < 3; k++)
      if (isfinite(msec[k]))
        snprintf(f[k], sizeof f[k], "%.1f us", msec[k] * 1e6);
      else
        snprintf(f[k], sizeof f[k], "-");
    wlog(s,
         "%s: in the model: direct %s, F(2x2) %s, F(4x4) %s: %s (the rule: "
         "%s)",
         n->name, f[0], f[1], f[2], ts_winograd_form_name(*tile),
         ts_winograd_form_name(rule));
    return note_conv(s, n, key, *tile, rule, "model");
  }
  if (!s->db) return note_conv(s, n, key, *tile, rule, "rule");
  if (best > 2) {
    wlog(s, "%s: no record for every form: %s by the rule", n->name,
         ts_winograd_form_name(rule));
    return note_conv(s, n, key, *tile, rule, "rule");
  }
  *tile = ms[best];
  wlog(s,
       "%s: direct %.1f us, F(2x2) %.1f us, F(4x4) %.1f us: %s (the rule: %s)",
       n->name, sec[0] * 1e6, sec[1] * 1e6, sec[2] * 1e6,
       ts_winograd_form_name(*tile), ts_winograd_form_name(rule));
  return note_conv(s, n, key, *tile, rule, "records");
}

int ts_graph_winograd(ts_graph *g, ts_error *err) {
  gr_list l = {0};
  bool changed = false;
  gr_wino_setup *s = g->wino;
  bool measure = s && (s->db || s->collect_tasks || s->n_force) &&
                 !g->no_winograd && g->winograd_tile == 0;
  if (s) {
    gr_task_set_clear(&s->alts);
    convs_clear(s);
    s->log_len = 0;
    if (s->log) s->log[0] = 0;
  }
  int n_nodes = g->n_nodes;
  for (int i = 0; i < n_nodes; i++) {
    gr_node n = g->nodes[i]; /* a copy: rewrite may grow the graph */
    int tile = g->no_winograd ? 0 : tile_for(g, &n);
    int64_t t2, t4;
    int rc = TS_OK;
    if (measure && eligible(g, &n, &t2, &t4)) rc = weigh(g, s, &n, tile, &tile);
    if (!rc && tile) {
      rc = rewrite(g, &n, tile, &l);
      changed = true;
    } else if (!rc) {
      gr_list_push(&l, &n);
    }
    if (rc) {
      free(l.nodes);
      return TS_ERR(err, TS_ENOMEM, "winograd: out of memory at node '%s'",
                    n.name);
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

/* Where WinogradInput n's tiles start in its input x [N, H, W, C] (pad[0]
 * rows above, pad[1] columns left of their outputs) and the size of the
 * output they cover: its "pads" and "output_hw", by default one pixel and
 * x's own size. */
static void input_geometry(const gr_node *n, const int64_t *xs, int64_t pad[2],
                           int64_t out[2]) {
  int np = 0, no = 0;
  const int64_t *p = gr_attr_ints(n, "pads", &np),
                *o = gr_attr_ints(n, "output_hw", &no);
  pad[0] = p && np == 2 ? p[0] : 1;
  pad[1] = p && np == 2 ? p[1] : 1;
  out[0] = o && no == 2 ? o[0] : xs[1];
  out[1] = o && no == 2 ? o[1] : xs[2];
}

int gr_winograd_run_input(const gr_node *node, const gr_tensor *x,
                          gr_tensor *v) {
  const wino_form *f = form_of_tiles(v->shape[0]);
  if (!f) return TS_EINVAL;
  int al = f->alpha, m = f->m;
  int64_t N = x->shape[0], H = x->shape[1], W = x->shape[2], C = x->shape[3];
  int64_t pad[2], out[2];
  input_geometry(node, x->shape, pad, out);
  int64_t TH = tiles_of(out[0], m), TW = tiles_of(out[1], m), P = v->shape[1];
  const float *src = x->data;
  float *dst = v->data;
  for (int64_t p = 0; p < P; p++) {
    int64_t n = p / (TH * TW), th = p / TW % TH, tw = p % TW;
    for (int64_t c = 0; c < C; c++) {
      double d[MAX_ALPHA][MAX_ALPHA], t[MAX_ALPHA][MAX_ALPHA];
      for (int i = 0; i < al; i++)
        for (int j = 0; j < al; j++) {
          int64_t h = m * th + i - pad[0], w = m * tw + j - pad[1];
          d[i][j] = n < N && h >= 0 && h < H && w >= 0 && w < W
                        ? src[((n * H + h) * W + w) * C + c]
                        : 0;
        }
      for (int a = 0; a < al; a++)
        for (int j = 0; j < al; j++) {
          t[a][j] = 0;
          for (int i = 0; i < al; i++) t[a][j] += f->bt[a][i] * d[i][j];
        }
      for (int a = 0; a < al; a++)
        for (int b = 0; b < al; b++) {
          double s = 0;
          for (int j = 0; j < al; j++) s += t[a][j] * f->bt[b][j];
          dst[((int64_t)(a * al + b) * P + p) * C + c] = (float)s;
        }
    }
  }
  return TS_OK;
}

int gr_winograd_run_output(const gr_tensor *mt, const gr_tensor *bias,
                           gr_tensor *y) {
  const wino_form *f = form_of_tiles(mt->shape[0]);
  if (!f) return TS_EINVAL;
  int al = f->alpha, m = f->m;
  int64_t N = y->shape[0], H = y->shape[1], W = y->shape[2], C = y->shape[3];
  int64_t TH = tiles_of(H, m), TW = tiles_of(W, m), P = mt->shape[1];
  const float *src = mt->data, *b = bias ? bias->data : NULL;
  float *dst = y->data;
  for (int64_t p = 0; p < N * TH * TW; p++) {
    int64_t n = p / (TH * TW), th = p / TW % TH, tw = p % TW;
    for (int64_t c = 0; c < C; c++) {
      double t[MAX_ALPHA - 2][MAX_ALPHA];
      for (int r = 0; r < m; r++)
        for (int j = 0; j < al; j++) {
          t[r][j] = 0;
          for (int a = 0; a < al; a++)
            t[r][j] +=
                f->at[r][a] * src[((int64_t)(a * al + j) * P + p) * C + c];
        }
      for (int r = 0; r < m; r++)
        for (int s = 0; s < m; s++) {
          int64_t h = m * th + r, w = m * tw + s;
          if (h >= H || w >= W) continue;
          double o = b ? b[c] : 0;
          for (int j = 0; j < al; j++) o += t[r][j] * f->at[s][j];
          dst[((n * H + h) * W + w) * C + c] = (float)o;
        }
    }
  }
  return TS_OK;
}

/* ---- the transforms as TE stages (fuse.c) ---- */

/* A transform matrix's non-zeros in `s` slots per row: the element of row
 * r in slot k is coef[r][k] times column col[r][k]. Column j of a row goes
 * to slot j - (cols - s) / 2 (clamped), which keeps a slot on one column
 * for most rows (their coefficient then is the only thing that varies), or
 * else to the next free slot; a row with fewer than s non-zeros fills the
 * rest with zero coefficients on the slot's usual column. */
typedef struct {
  int s;
  int col[MAX_ALPHA][MAX_ALPHA];
  double coef[MAX_ALPHA][MAX_ALPHA];
} wino_slots;

static void slots(const double *mat, int rows, int cols, wino_slots *out) {
  memset(out, 0, sizeof *out);
  for (int r = 0; r < rows; r++) {
    int nz = 0;
    for (int j = 0; j < cols; j++) nz += mat[r * MAX_ALPHA + j] != 0;
    if (nz > out->s) out->s = nz;
  }
  int s = out->s, shift = (cols - s) / 2;
  bool used[MAX_ALPHA][MAX_ALPHA] = {{false}};
  for (int r = 0; r < rows; r++) {
    bool spread = true; /* every non-zero in its own clamped slot */
    for (int j = 0; j < cols; j++) {
      int k = j - shift < 0 ? 0 : j - shift >= s ? s - 1 : j - shift;
      if (mat[r * MAX_ALPHA + j] == 0) continue;
      if (used[r][k]) spread = false;
      used[r][k] = true;
    }
    memset(used[r], 0, sizeof used[r]);
    for (int j = 0, next = 0; j < cols; j++) {
      if (mat[r * MAX_ALPHA + j] == 0) continue;
      int k = spread ? (j - shift < 0    ? 0
                        : j - shift >= s ? s - 1
                                         : j - shift)
                     : next++;
      out->col[r][k] = j;
      out->coef[r][k] = mat[r * MAX_ALPHA + j];
      used[r][k] = true;
    }
  }
  for (int k = 0; k < s; k++) { /* pads: the column of the first row with k */
    int fill = 0;
    for (int r = rows - 1; r >= 0; r--)
      if (used[r][k]) fill = out->col[r][k];
    for (int r = 0; r < rows; r++)
      if (!used[r][k]) out->col[r][k] = fill;
  }
}

static ts_expr *idx(ts_arena *a, int64_t v) { return ts_index(a, v); }

static ts_expr *f32(ts_arena *a, double v) {
  return ts_float(a, TS_FLOAT32, v);
}

/* The value vals[row] for the row the index expression `row` holds, over
 * `rows` rows: a chain of selects on the rows whose value is not the last
 * row's; NULL for a float chain that is 1 on every row (no factor). */
static ts_expr *chain(ts_arena *a, ts_expr *row, int rows, const double *vals,
                      bool is_float) {
  ts_expr *e = NULL;
  bool all_one = is_float;
  for (int r = 0; r < rows; r++) all_one = all_one && vals[r] == 1;
  if (all_one) return NULL;
  int common = 0, best = 0; /* the most frequent value: no select */
  for (int r = 0; r < rows; r++) {
    int cnt = 0;
    for (int q = 0; q < rows; q++) cnt += vals[q] == vals[r];
    if (cnt > best) best = cnt, common = r;
  }
  e = is_float ? f32(a, vals[common]) : idx(a, (int64_t)vals[common]);
  for (int r = rows - 1; r >= 0; r--)
    if (vals[r] != vals[common])
      e = ts_select(a, ts_eq(a, row, idx(a, r)),
                    is_float ? f32(a, vals[r]) : idx(a, (int64_t)vals[r]), e);
  return e;
}

/* The column and coefficient of slot k of `sl` for the row `row` holds. */
static void slot_exprs(ts_arena *a, const wino_slots *sl, int rows,
                       ts_expr *row, int k, ts_expr **col, ts_expr **coef) {
  double c[MAX_ALPHA], f[MAX_ALPHA];
  for (int r = 0; r < rows; r++) c[r] = sl->col[r][k], f[r] = sl->coef[r][k];
  *col = chain(a, row, rows, c, false);
  *coef = chain(a, row, rows, f, true);
}

static ts_expr *scaled(ts_arena *a, ts_expr *coef, ts_expr *e) {
  return coef ? ts_mul(a, coef, e) : e;
}

/* x[n, clamp(m th + i - pad[0]), clamp(m tw + j - pad[1]), c] times
 * `coef` where
 * that position is inside the image, times 0 where it is in the padding:
 * the load is always in bounds and the test is part of the coefficient,
 * which is scalar for a vector of channels, so the stage has no branch
 * per element (0.52 -> 0.22 ms for ResNet-50's 56x56 input transform,
 * default schedules). A non-finite input at the image's edge then makes
 * the padded tile positions next to it NaN rather than 0 (0 * inf). */
static ts_expr *tile_term(gr_fuse_builder *b, ts_buffer *x, const int64_t *s,
                          const int64_t *pad, int m, ts_expr *n, ts_expr *th,
                          ts_expr *tw, ts_expr *i, ts_expr *j, ts_expr *c,
                          ts_expr *coef) {
  ts_arena *a = b->a;
  ts_expr *h =
      ts_add(a, ts_mul(a, th, idx(a, m)), ts_sub(a, i, idx(a, pad[0])));
  ts_expr *w =
      ts_add(a, ts_mul(a, tw, idx(a, m)), ts_sub(a, j, idx(a, pad[1])));
  ts_expr *in =
      ts_and(a, ts_and(a, ts_ge(a, h, idx(a, 0)), ts_lt(a, h, idx(a, s[1]))),
             ts_and(a, ts_ge(a, w, idx(a, 0)), ts_lt(a, w, idx(a, s[2]))));
  ts_expr *hc = ts_max(a, idx(a, 0), ts_min(a, h, idx(a, s[1] - 1)));
  ts_expr *wc = ts_max(a, idx(a, 0), ts_min(a, w, idx(a, s[2] - 1)));
  ts_expr *at[4] = {n, hc, wc, c};
  ts_expr *k = ts_select(a, in, coef ? coef : f32(a, 1), f32(a, 0));
  return ts_mul(a, k, ts_te_load(b->te, x, at, 4));
}

ts_buffer *gr_winograd_build_input(gr_fuse_builder *b, const gr_node *n) {
  const ts_graph *g = b->g;
  ts_arena *a = b->a;
  const gr_value *xv = &g->values[n->inputs[0]];
  const gr_value *vv = &g->values[n->outputs[0]];
  const wino_form *f = form_of_tiles(vv->shape[0]);
  if (!f) return NULL;
  int al = f->alpha;
  int64_t s[4], pad[2], out[2];
  memcpy(s, xv->shape, sizeof s);
  input_geometry(n, s, pad, out);
  int64_t TH = tiles_of(out[0], f->m), TW = tiles_of(out[1], f->m);
  ts_buffer *x = gr_fuse_param(b, n->inputs[0]);
  if (!x) return NULL;
  ts_te_stage *st = ts_te_compute(b->te, gr_fuse_stage_name(b, "winograd_in"),
                                  TS_FLOAT32, vv->shape, 3, NULL);
  /* tiles outermost, the alpha^2 positions of a tile inside them: a tile's
   * window of the input is read from cache for all of them, not once per
   * sweep over the image for each (ResNet-50's 56x56 transform in the
   * model: 0.37 -> 0.16 ms) */
  ts_te_loop_order(st, (const int[]){1, 0, 2});
  ts_expr *t = ts_te_axis(st, 0), *p = ts_te_axis(st, 1),
          *c = ts_te_axis(st, 2);
  ts_expr *ta = ts_floordiv(a, t, idx(a, al)),
          *tb = ts_floormod(a, t, idx(a, al));
  /* V's rows past the last tile (see ROW_ALIGN) repeat the last tile: the
   * product's rows there are never read */
  ts_expr *pc = vv->shape[1] > s[0] * TH * TW
                    ? ts_min(a, p, idx(a, s[0] * TH * TW - 1))
                    : p;
  ts_expr *nn = ts_floordiv(a, pc, idx(a, TH * TW));
  ts_expr *th = ts_floormod(a, ts_floordiv(a, pc, idx(a, TW)), idx(a, TH));
  ts_expr *tw = ts_floormod(a, pc, idx(a, TW));
  wino_slots sl;
  slots(&f->bt[0][0], al, al, &sl);
  ts_expr *col[2][MAX_ALPHA], *coef[2][MAX_ALPHA];
  for (int k = 0; k < sl.s; k++) {
    slot_exprs(a, &sl, al, ta, k, &col[0][k], &coef[0][k]);
    slot_exprs(a, &sl, al, tb, k, &col[1][k], &coef[1][k]);
  }
  ts_expr *sum = NULL;
  for (int r = 0; r < sl.s; r++)
    for (int q = 0; q < sl.s; q++) {
      ts_expr *k = coef[0][r] && coef[1][q] ? ts_mul(a, coef[0][r], coef[1][q])
                   : coef[0][r]             ? coef[0][r]
                                            : coef[1][q];
      ts_expr *e =
          tile_term(b, x, s, pad, f->m, nn, th, tw, col[0][r], col[1][q], c, k);
      sum = sum ? ts_add(a, sum, e) : e;
    }
  return ts_te_set_value(st, sum);
}

/* The chain of flattened table vals[rows * s] at index `row` * s + `k`
 * (see chain). */
static ts_expr *chain2(ts_arena *a, ts_expr *row, ts_expr *k, int rows, int s,
                       const double *vals, bool is_float) {
  ts_expr *at = ts_add(a, ts_mul(a, row, idx(a, s)), k);
  return chain(a, at, rows * s, vals, is_float);
}

/* The output transform in two steps where that sums fewer terms (F(4x4):
 * 5 + 6/4 * 5 = 12.5 per output against 25; F(2x2): 9 either way):
 * S[n, h, tw, j, c] = the column sums of A^T's row h % m over M's tile, a
 * reduction over the row's slots (a stage of its own, which the default
 * schedule computes per output row, in cache), then y from S's row by A^T's
 * row w % m. ResNet-50's 56x56x64 output transform, default schedules:
 * 0.17 -> 0.066 ms; 28x28x128 0.13 -> 0.031. */
static ts_buffer *output_rows(gr_fuse_builder *b, const wino_form *f,
                              const wino_slots *sl, ts_buffer *m,
                              const gr_value *yv) {
  ts_arena *a = b->a;
  int al = f->alpha, mt = f->m, ns = sl->s;
  int64_t TH = tiles_of(yv->shape[1], mt), TW = tiles_of(yv->shape[2], mt);
  int64_t shape[5] = {yv->shape[0], yv->shape[1], TW, al, yv->shape[3]};
  ts_te_stage *st = ts_te_compute(b->te, gr_fuse_stage_name(b, "winograd_rows"),
                                  TS_FLOAT32, shape, 5, NULL);
  ts_expr *sn = ts_te_axis(st, 0), *sh = ts_te_axis(st, 1),
          *stw = ts_te_axis(st, 2), *sj = ts_te_axis(st, 3),
          *sc = ts_te_axis(st, 4);
  ts_expr *k = ts_te_reduce_axis(st, "slot", ns);
  double cols[MAX_ALPHA * MAX_ALPHA], coefs[MAX_ALPHA * MAX_ALPHA];
  for (int r = 0; r < mt; r++)
    for (int q = 0; q < ns; q++)
      cols[r * ns + q] = sl->col[r][q], coefs[r * ns + q] = sl->coef[r][q];
  ts_expr *r = ts_floormod(a, sh, idx(a, mt));
  ts_expr *p = ts_add(a,
                      ts_mul(a,
                             ts_add(a, ts_mul(a, sn, idx(a, TH)),
                                    ts_floordiv(a, sh, idx(a, mt))),
                             idx(a, TW)),
                      stw);
  ts_expr *t = ts_add(
      a, ts_mul(a, chain2(a, r, k, mt, ns, cols, false), idx(a, al)), sj);
  ts_expr *at[3] = {t, p, sc};
  ts_expr *coef = chain2(a, r, k, mt, ns, coefs, true);
  return ts_te_set_reduce(st, TS_TE_SUM,
                          scaled(a, coef, ts_te_load(b->te, m, at, 3)));
}

ts_buffer *gr_winograd_build_output(gr_fuse_builder *b, const gr_node *n) {
  const ts_graph *g = b->g;
  ts_arena *a = b->a;
  const gr_value *yv = &g->values[n->outputs[0]];
  const wino_form *f = form_of_tiles(g->values[n->inputs[0]].shape[0]);
  if (!f) return NULL;
  int al = f->alpha, mt = f->m;
  int64_t TH = tiles_of(yv->shape[1], mt), TW = tiles_of(yv->shape[2], mt);
  ts_buffer *m = gr_fuse_param(b, n->inputs[0]);
  ts_buffer *bias = n->n_inputs > 1 && n->inputs[1] >= 0
                        ? gr_fuse_param(b, n->inputs[1])
                        : NULL;
  if (!m || (n->n_inputs > 1 && n->inputs[1] >= 0 && !bias)) return NULL;
  wino_slots sl;
  slots(&f->at[0][0], mt, al, &sl);
  bool two_step = sl.s + al * sl.s / mt < sl.s * sl.s;
  ts_buffer *sb = two_step ? output_rows(b, f, &sl, m, yv) : NULL;
  if (two_step && !sb) return NULL;
  ts_te_stage *st = ts_te_compute(b->te, gr_fuse_stage_name(b, "winograd_out"),
                                  TS_FLOAT32, yv->shape, 4, NULL);
  ts_expr *nn = ts_te_axis(st, 0), *h = ts_te_axis(st, 1),
          *w = ts_te_axis(st, 2), *c = ts_te_axis(st, 3);
  ts_expr *y = NULL;
  if (two_step) {
    ts_expr *q = ts_floormod(a, w, idx(a, mt));
    for (int v = 0; v < sl.s; v++) {
      ts_expr *col, *cf;
      slot_exprs(a, &sl, mt, q, v, &col, &cf);
      ts_expr *si[5] = {nn, h, ts_floordiv(a, w, idx(a, mt)), col, c};
      ts_expr *e = scaled(a, cf, ts_te_load(b->te, sb, si, 5));
      y = y ? ts_add(a, y, e) : e;
    }
  } else {
    ts_expr *r = ts_floormod(a, h, idx(a, mt)),
            *q = ts_floormod(a, w, idx(a, mt));
    ts_expr *p = ts_add(a,
                        ts_mul(a,
                               ts_add(a, ts_mul(a, nn, idx(a, TH)),
                                      ts_floordiv(a, h, idx(a, mt))),
                               idx(a, TW)),
                        ts_floordiv(a, w, idx(a, mt)));
    ts_expr *col[2][MAX_ALPHA], *coef[2][MAX_ALPHA];
    for (int k = 0; k < sl.s; k++) {
      slot_exprs(a, &sl, mt, r, k, &col[0][k], &coef[0][k]);
      slot_exprs(a, &sl, mt, q, k, &col[1][k], &coef[1][k]);
    }
    for (int u = 0; u < sl.s; u++) {
      ts_expr *row = NULL;
      for (int v = 0; v < sl.s; v++) {
        ts_expr *t = ts_add(a, ts_mul(a, col[0][u], idx(a, al)), col[1][v]);
        ts_expr *at[3] = {t, p, c};
        ts_expr *e = scaled(a, coef[1][v], ts_te_load(b->te, m, at, 3));
        row = row ? ts_add(a, row, e) : e;
      }
      row = scaled(a, coef[0][u], row);
      y = y ? ts_add(a, y, row) : row;
    }
  }
  if (bias) y = ts_add(a, y, ts_te_load(b->te, bias, &c, 1));
  return ts_te_set_value(st, y);
}

void ts_graph_set_winograd(ts_graph *g, bool on) { g->no_winograd = !on; }

void ts_graph_set_winograd_tile(ts_graph *g, int m) {
  g->winograd_tile = m == 2 || m == 4 ? m : 0;
}
