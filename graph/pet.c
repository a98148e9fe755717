/*
 * pet.c — partially equivalent transformations (PET, Wang et al., OSDI
 * 2021): the `pet` pass, after `layout` (convs are channels-last) and
 * before `winograd` (which then sees the convs PET made).
 *
 * The graph is split into subprograms: the convs and matmuls with constant
 * weights that read one value (with their bias additions), then every
 * other node alone. Every mutator that applies builds a mutant: new nodes
 * computing the subprogram's outputs another way, possibly not exactly;
 * mutants of mutants follow up to a depth (each single-node mutator on the
 * convs and matmuls of a mutant one level up), and a mutant that is the
 * same program as the original or as an earlier one (structural hash) is
 * skipped. The checker (pet_check.c) splits each output into boxes and
 * evaluates both programs at m + 1 positions of each box with t random
 * inputs; boxes that differ get correction kernels computing the original
 * there (bands of output rows or columns by a conv over the input rows it
 * reads, spliced in by a concat; for subprograms of one conv), and the
 * corrected mutant is checked again, so what the pass applies is
 * equivalent on every box. Of the checked candidates (the original among
 * them) the cheapest by the estimate, or by the tuning database's
 * latencies for the top K, is kept when it is at least min_gain cheaper.
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
 *   batch_shared_input the convs or matmuls of a subprogram as one, their
 *                      weights (and biases) concatenated along the output
 *                      channels at compile time, a slice of the result for
 *                      each (BERT's Q, K and V projections). Exact.
 *
 * After applying, re-layout pairs cancel: batch-to-space, then elementwise
 * operators (relu; constants that broadcast along the channels only), then
 * space-to-batch of the same factors becomes the elementwise operators in
 * the batch layout. A chain of dilated convs (CSRNet's back end) then runs
 * in the batch layout from its first conv to its last.
 *
 * The estimate: FLOPs at one rate, Winograd's convs at 1 / 2.25 of theirs
 * plus a third for the transforms, data movement at one bandwidth, what
 * folds at compile time free. With a database, the top K candidates are
 * built alone and weighed by their tasks' latencies (oneDNN's where it was
 * measured faster, as compile's dispatch decides).
 */
#include "pet.h"

#include "winograd.h"

#include "codegen/codegen.h"
#include "db/db.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_MUTATORS 8
#define MAX_CANDIDATES 32 /* mutants of one subprogram, all depths */
#define GFLOPS 100.0      /* of the cost estimate */
#define GBPS 10.0
#define PRUNE 1.1 /* mutants estimated dearer than this x the original */
/* input elements the check of one mutant may read (about 1 s) */
#define CHECK_BUDGET 1e8

struct gr_pet_setup {
  ts_pet_options o;
  ts_pet_report r;
  char *log;
  size_t len, cap;
  const char *kinds[MAX_MUTATORS];
  pet_mutator fns[MAX_MUTATORS];
  int n_mut;
  const char *sub_kinds[MAX_MUTATORS]; /* of subprograms of several nodes */
  pet_sub_mutator sub_fns[MAX_MUTATORS];
  int n_sub_mut;
  char *target; /* canonical, for the database's records */
  /* the tasks of the candidates weighed by measurement (each built alone),
   * for tune to measure */
  ts_graph_task *alts;
  ts_func **alt_funcs;
  char **alt_names, **alt_vendor;
  int n_alt, cap_alt;
};

static void alts_clear(gr_pet_setup *p) {
  for (int i = 0; i < p->n_alt; i++) {
    ts_func_free(p->alt_funcs[i]);
    free(p->alt_names[i]);
    free(p->alt_vendor[i]);
  }
  p->n_alt = 0;
}

void gr_pet_setup_free(gr_pet_setup *p) {
  if (!p) return;
  alts_clear(p);
  free(p->alts);
  free(p->alt_funcs);
  free(p->alt_names);
  free(p->alt_vendor);
  free(p->target);
  free(p->log);
  free(p);
}

static void logf_(gr_pet_setup *s, const char *fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n >= sizeof line) n = (int)sizeof line - 1;
  if (s->len + (size_t)n + 2 > s->cap) {
    size_t cap = (s->cap + (size_t)n + 2) * 2;
    char *q = ts_realloc(s->log, cap);
    if (!q) return;
    s->log = q;
    s->cap = cap;
  }
  memcpy(s->log + s->len, line, (size_t)n);
  s->len += (size_t)n;
  s->log[s->len++] = '\n';
  s->log[s->len] = 0;
}

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
  int64_t N, H, W, C, OH, OW, CO, k[2], s[2], d[2], pad[4];
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
  memcpy(c->k, geo.k, sizeof c->k);
  memcpy(c->s, geo.s, sizeof c->s);
  memcpy(c->d, geo.d, sizeof c->d);
  memcpy(c->pad, geo.pad, sizeof c->pad);
  return true;
}

/* A conv like n (its attributes) on data x with explicit pads and
 * dilations. */
static int conv_like(ts_graph *g, pet_mutant *m, const gr_node *n,
                     const conv_info *c, int x, const int64_t *pads,
                     const int64_t *dil, ts_error *err) {
  int ins[3] = {x, c->w, c->b};
  int rc = pet_emit(g, m, "Conv", ins, c->b >= 0 ? 3 : 2, n, err);
  if (rc < 0) return rc;
  gr_node_set_attr(
      g, &m->nodes[m->n - 1],
      (gr_attr){.name = "auto_pad", .kind = GR_ATTR_STRING, .s = "NOTSET"});
  pet_set_ints(g, m, "pads", 4, pads);
  pet_set_ints(g, m, "dilations", 2, dil);
  return infer_last(g, m, err);
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

/* v cropped or extended with zeros to `want` along axis. */
static int fit(ts_graph *g, pet_mutant *m, int v, int axis, int64_t want,
               ts_error *err) {
  int64_t have = g->values[v].shape[axis];
  if (have > want) return slice(g, m, v, axis, 0, want, err);
  if (have < want) return zero_extend(g, m, v, axis, want - have, err);
  return v;
}

static int mut_dilated(ts_graph *g, const gr_node *n, pet_mutant *m,
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

static int mut_split_rows(ts_graph *g, const gr_node *n, pet_mutant *m,
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
static int mut_pad_same(ts_graph *g, const gr_node *n, pet_mutant *m,
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

int pet_mutate(ts_graph *g, const gr_node *n, const char *kind, pet_mutant *m,
               ts_error *err) {
  if (!strcmp(kind, "pad_same")) return mut_pad_same(g, n, m, err);
  if (!strcmp(kind, "dilated_to_batch")) return mut_dilated(g, n, m, err);
  if (!strcmp(kind, "split_rows")) return mut_split_rows(g, n, m, err);
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
static int mut_batch(ts_graph *g, const pet_sub *sub, pet_mutant *m,
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
static int mut_concat(ts_graph *g, const pet_sub *sub, pet_mutant *m,
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
  if (!strcmp(kind, "batch_shared_input")) return mut_batch(g, sub, m, err);
  if (!strcmp(kind, "concat_shared_weights")) return mut_concat(g, sub, m, err);
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
static int correct(ts_graph *g, const gr_node *n, pet_mutant *m,
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

/* ---- cost ---- */

static double elems(const gr_value *v) {
  double e = 1;
  for (int d = 0; d < v->ndim; d++) e *= (double)v->shape[d];
  return e;
}

static double node_cost_us(const ts_graph *g, const gr_node *n) {
  const gr_value *y = &g->values[n->outputs[0]];
  if (!strcmp(n->op, "Reshape") || !strcmp(n->op, "Identity")) return 0;
  if (!strcmp(n->op, "Conv")) {
    const gr_value *w = &g->values[n->inputs[1]];
    double taps = elems(w) / (double)y->shape[gr_node_channels_last(n) ? 3 : 1];
    double flops = 2 * elems(y) * taps;
    if (gr_winograd_applies(g, n)) flops = flops / 2.25 * 4 / 3;
    return flops / (GFLOPS * 1e3);
  }
  if (!strcmp(n->op, "MatMul")) {
    const gr_value *a = &g->values[n->inputs[0]];
    return 2 * elems(y) * (double)a->shape[a->ndim - 1] / (GFLOPS * 1e3);
  }
  double bytes = 4 * elems(y);
  if (!strcmp(n->op, "Slice")) return 2 * bytes / (GBPS * 1e3); /* a copy */
  for (int k = 0; k < n->n_inputs; k++)
    if (n->inputs[k] >= 0 && !gr_is_const(g, n->inputs[k]))
      bytes += 4 * elems(&g->values[n->inputs[k]]);
  return bytes / (GBPS * 1e3);
}

/* Whether every input of n is a constant or in `folded` (the outputs of
 * nodes before it that are folded too): it is computed at compile time. */
static bool folds(const ts_graph *g, const gr_node *n, const int *folded,
                  int n_folded) {
  for (int k = 0; k < n->n_inputs; k++) {
    int v = n->inputs[k];
    if (v < 0 || gr_is_const(g, v)) continue;
    bool in = false;
    for (int j = 0; j < n_folded && !in; j++) in = folded[j] == v;
    if (!in) return false;
  }
  return true;
}

/* The estimate of nodes[0..n); what folds at compile time (the weights a
 * batched matmul concatenates) costs nothing. */
static double cost_us(const ts_graph *g, const gr_node *nodes, int n) {
  double c = 0;
  int folded[PET_MAX_NODES], n_folded = 0;
  for (int i = 0; i < n; i++) {
    if (folds(g, &nodes[i], folded, n_folded)) {
      if (n_folded < PET_MAX_NODES) folded[n_folded++] = nodes[i].outputs[0];
      continue;
    }
    c += node_cost_us(g, &nodes[i]);
  }
  return c;
}

/* ---- measured costs: each candidate built alone ---- */

/* The candidate nodes[0..n) (topological, outs the values it computes) as
 * a graph of its own: the values it reads from outside are its inputs (a
 * constant stays a constant), outs its outputs. NULL when out of memory. */
static ts_graph *candidate_graph(const ts_graph *g, const gr_node *nodes, int n,
                                 const int *outs, int n_outs) {
  ts_graph *c = ts_graph_new("pet_candidate");
  int *map = ts_malloc(sizeof(int) * (size_t)g->n_values);
  int *ins = ts_malloc(sizeof(int) * (size_t)(g->n_values + 1));
  int n_ins = 0;
  bool ok = c && map && ins;
  if (ok) {
    c->no_winograd = g->no_winograd;
    for (int v = 0; v < g->n_values; v++) map[v] = -1;
  }
  for (int i = 0; ok && i < n; i++) {
    const gr_node *nd = &nodes[i];
    int vin[PET_MAX_NODES], vout[4];
    if (nd->n_inputs > PET_MAX_NODES || nd->n_outputs > 4) ok = false;
    for (int k = 0; ok && k < nd->n_inputs; k++) {
      int v = nd->inputs[k];
      if (v >= 0 && map[v] < 0) {
        const gr_value *x = &g->values[v];
        if (gr_is_const(g, v)) {
          map[v] = gr_const_add(c, x->name, x->dtype, x->ndim, x->shape,
                                gr_const_data(g, v));
        } else {
          map[v] = gr_value_add(c, x->name, x->dtype, x->ndim, x->shape);
          if (map[v] >= 0) {
            c->values[map[v]].is_input = true;
            c->values[map[v]].layout = ts_arena_strdup(c->arena, x->layout);
            if (!c->values[map[v]].layout) map[v] = -1;
            ins[n_ins++] = map[v];
          }
        }
        ok = map[v] >= 0;
      }
      vin[k] = v < 0 ? -1 : map[v];
    }
    for (int k = 0; ok && k < nd->n_outputs; k++) {
      const gr_value *y = &g->values[nd->outputs[k]];
      vout[k] = map[nd->outputs[k]] =
          gr_value_add(c, y->name, y->dtype, y->ndim, y->shape);
      if (vout[k] < 0) {
        ok = false;
        break;
      }
      c->values[vout[k]].layout = ts_arena_strdup(c->arena, y->layout);
      if (!c->values[vout[k]].layout) {
        ok = false;
        break;
      }
    }
    if (!ok) break;
    gr_node *cn = gr_node_add(c, nd->op, nd->name, vin, nd->n_inputs, vout,
                              nd->n_outputs);
    if (!cn) {
      ok = false;
      break;
    }
    for (int a = 0; a < nd->n_attrs; a++) gr_node_set_attr(c, cn, nd->attrs[a]);
  }
  for (int k = 0; ok && k < n_outs; k++) ok = map[outs[k]] >= 0;
  if (ok) {
    c->inputs = ts_arena_alloc(c->arena, sizeof(int) * (size_t)(n_ins + 1));
    c->outputs = ts_arena_alloc(c->arena, sizeof(int) * (size_t)n_outs);
    ok = c->inputs && c->outputs;
  }
  if (ok) {
    memcpy(c->inputs, ins, sizeof(int) * (size_t)n_ins);
    c->n_inputs = n_ins;
    for (int k = 0; k < n_outs; k++) c->outputs[k] = map[outs[k]];
    c->n_outputs = n_outs;
  } else {
    ts_graph_free(c);
    c = NULL;
  }
  free(map);
  free(ins);
  return c;
}

/* Adds task t of a candidate to the alternatives (once per hash, the
 * calls summed). */
static int add_alt(gr_pet_setup *s, const ts_graph_task *t, const char *name) {
  for (int i = 0; i < s->n_alt; i++)
    if (ts_hash128_eq(s->alts[i].hash, t->hash)) {
      s->alts[i].count += t->count;
      return TS_OK;
    }
  if (s->n_alt == s->cap_alt) {
    int cap = s->cap_alt ? s->cap_alt * 2 : 16;
    ts_graph_task *a = ts_realloc(s->alts, sizeof *a * (size_t)cap);
    if (a) s->alts = a;
    ts_func **f = ts_realloc(s->alt_funcs, sizeof *f * (size_t)cap);
    if (f) s->alt_funcs = f;
    char **nm = ts_realloc(s->alt_names, sizeof *nm * (size_t)cap);
    if (nm) s->alt_names = nm;
    char **vd = ts_realloc(s->alt_vendor, sizeof *vd * (size_t)cap);
    if (vd) s->alt_vendor = vd;
    if (!a || !f || !nm || !vd) return TS_ENOMEM;
    s->cap_alt = cap;
  }
  ts_func *f = ts_func_copy(t->func);
  char *nm = ts_strdup(name);
  char *vd = t->vendor ? ts_strdup(t->vendor) : NULL;
  if (!f || !nm || (t->vendor && !vd)) {
    ts_func_free(f);
    free(nm);
    free(vd);
    return TS_ENOMEM;
  }
  int i = s->n_alt++;
  s->alt_funcs[i] = f;
  s->alt_names[i] = nm;
  s->alt_vendor[i] = vd;
  s->alts[i] = *t;
  s->alts[i].func = f;
  s->alts[i].first_node = nm;
  s->alts[i].vendor = vd; /* so that tune measures the vendor call too */
  return TS_OK;
}

/* The latency of task t on the target: its best record's, or oneDNN's
 * when the task has a vendor call that the database measured faster (as
 * `compile --dispatch best` decides). NAN when it has no record. */
static double task_seconds(gr_pet_setup *s, const ts_graph_task *t) {
  ts_db_record rec;
  memset(&rec, 0, sizeof rec);
  if (!s->o.db || !s->target ||
      ts_db_best_by_func(s->o.db, t->func, s->target, &rec) != TS_OK) {
    ts_db_record_clear(&rec);
    return NAN;
  }
  double sec = ts_db_record_seconds(&rec);
  ts_db_record_clear(&rec);
  ts_db_baseline use;
  if (!t->vendor || !gr_onednn_level(s->o.db, t->func, s->target, &use))
    return sec;
  double vendor = NAN;
  if (use.side_rounds > 0 && isfinite(use.side_ratio))
    vendor = sec * use.side_ratio;
  else if (use.gflops > 0 && t->flops > 0)
    vendor = t->flops / (use.gflops * 1e9);
  return vendor < sec ? vendor : sec;
}

/* The candidate's tasks (built alone: what folds is folded, winograd and
 * fusion run on it), added to the alternatives under `name`; *seconds
 * their calls times their latency on the target (task_seconds), NAN when
 * there is no database or a task has no record. */
static int candidate_cost(ts_graph *g, gr_pet_setup *s, const gr_node *nodes,
                          int n, const int *outs, int n_outs, const char *name,
                          double *seconds, ts_error *err) {
  *seconds = NAN;
  ts_graph *c = candidate_graph(g, nodes, n, outs, n_outs);
  if (!c) return TS_ERR(err, TS_ENOMEM, "pet: out of memory");
  ts_graph_task *t = NULL;
  int nt = 0;
  ts_error cerr;
  if (gr_fold_marked(c, NULL, &cerr) || ts_graph_winograd(c, &cerr) ||
      ts_graph_fuse(c, &cerr) || ts_graph_tasks(c, &t, &nt, &cerr)) {
    logf_(s, "  %s: no tasks (%s)", name, cerr.msg);
    ts_graph_free(c);
    return TS_OK;
  }
  double sum = 0;
  int rc = TS_OK;
  for (int i = 0; i < nt && !rc; i++) {
    rc = add_alt(s, &t[i], name);
    sum += t[i].count * task_seconds(s, &t[i]);
  }
  free(t);
  ts_graph_free(c);
  if (rc) return TS_ERR(err, rc, "pet: out of memory");
  *seconds = sum;
  return TS_OK;
}

int ts_graph_pet_candidate_tasks(const ts_graph *g, const ts_graph_task **tasks,
                                 int *n) {
  *tasks = g->pet ? g->pet->alts : NULL;
  *n = g->pet ? g->pet->n_alt : 0;
  return TS_OK;
}

/* ---- re-layout cancellation ---- */

static const gr_node *prod(const ts_graph *g, int v) {
  int p = v >= 0 ? g->values[v].producer : -1;
  return p >= 0 ? &g->nodes[p] : NULL;
}

static bool perm_is(const gr_node *n, const int64_t *perm) {
  int c;
  const int64_t *p = gr_attr_ints(n, "perm", &c);
  return n && !strcmp(n->op, "Transpose") && p && c == 6 &&
         !memcmp(p, perm, sizeof(int64_t) * 6);
}

/* Whether v = reshape(transpose_perm(reshape(src))) with a rank-6 middle;
 * *src and the middle's shape. */
static bool match_relayout(const ts_graph *g, int v, const int64_t *perm,
                           int *src, int64_t *mid) {
  const gr_node *r2 = prod(g, v);
  if (!r2 || strcmp(r2->op, "Reshape")) return false;
  const gr_node *t = prod(g, r2->inputs[0]);
  if (!t || !perm_is(t, perm)) return false;
  const gr_node *r1 = prod(g, t->inputs[0]);
  if (!r1 || strcmp(r1->op, "Reshape")) return false;
  memcpy(mid, g->values[r1->outputs[0]].shape, sizeof(int64_t) * 6);
  *src = r1->inputs[0];
  return g->values[*src].ndim == 4 && g->values[v].ndim == 4;
}

static const int64_t to_batch[6] = {2, 4, 0, 1, 3, 5};
static const int64_t from_batch[6] = {2, 3, 0, 4, 1, 5};

/* An elementwise node whose only non-constant input is input 0.. and
 * whose constants broadcast along the channels (the last axis) only. */
static int elementwise_data(const ts_graph *g, const gr_node *n) {
  if (n->kind != TS_GRAPH_OP || n->n_outputs != 1 ||
      !gr_is_elementwise_op(n->op))
    return -1;
  int data = -1;
  for (int k = 0; k < n->n_inputs; k++) {
    int v = n->inputs[k];
    if (v < 0) continue;
    if (!gr_is_const(g, v)) {
      if (data >= 0) return -1;
      data = v;
      continue;
    }
    const gr_value *c = &g->values[v];
    for (int d = 0; d + 1 < c->ndim; d++)
      if (c->shape[d] != 1) return -1;
  }
  return data >= 0 && g->values[data].ndim == 4 ? data : -1;
}

/* One round: every space-to-batch whose input is a batch-to-space of the
 * same factors through elementwise nodes reads the elementwise nodes
 * redone in the batch layout instead. Returns how many. */
static int cancel_round(ts_graph *g, ts_error *err, int *rc) {
  gr_list l = {0};
  int n_nodes = g->n_nodes, cancelled = 0;
  int *from = ts_malloc(sizeof(int) * (size_t)(n_nodes + 1));
  int *to = ts_malloc(sizeof(int) * (size_t)(n_nodes + 1));
  if (!from || !to) {
    free(from), free(to);
    *rc = TS_ERR(err, TS_ENOMEM, "out of memory");
    return 0;
  }
  for (int i = 0; i < n_nodes && !*rc; i++) {
    gr_node n = g->nodes[i];
    int u, z, chain[16], nc = 0;
    int64_t mid_a[6], mid_b[6];
    if (!strcmp(n.op, "Reshape") &&
        match_relayout(g, n.outputs[0], to_batch, &u, mid_a)) {
      int v = u;
      const gr_node *e;
      while (nc < 16 && (e = prod(g, v)) && elementwise_data(g, e) >= 0) {
        chain[nc++] = v;
        v = elementwise_data(g, e);
      }
      int64_t bshape[4]; /* the batch layout's shape */
      memcpy(bshape, g->values[n.outputs[0]].shape, sizeof bshape);
      /* S2B's middle [N, Hs, dh, Ws, dw, C], B2S's [dh, dw, N, Hs, Ws, C] */
      if (nc && match_relayout(g, v, from_batch, &z, mid_b) &&
          g->values[z].ndim == 4 &&
          !memcmp(g->values[z].shape, bshape, sizeof bshape) &&
          mid_a[0] == mid_b[2] && mid_a[1] == mid_b[3] &&
          mid_a[2] == mid_b[0] && mid_a[3] == mid_b[4] &&
          mid_a[4] == mid_b[1] && mid_a[5] == mid_b[5]) {
        /* redo the chain, innermost first, on z */
        int cur = z;
        for (int k = nc - 1; k >= 0 && !*rc; k--) {
          const gr_node *e0 = prod(g, chain[k]);
          int ins[8];
          for (int j = 0; j < e0->n_inputs && j < 8; j++)
            ins[j] =
                e0->inputs[j] == elementwise_data(g, e0) ? cur : e0->inputs[j];
          int out = gr_value_fresh(g, g->values[chain[k]].name,
                                   g->values[chain[k]].dtype, 4, bshape);
          gr_node c = gr_node_make(g, e0->op, gr_fresh_name(g, e0->name), ins,
                                   e0->n_inputs, &out, 1);
          for (int j = 0; j < e0->n_attrs; j++)
            gr_node_set_attr(g, &c, e0->attrs[j]);
          *rc = gr_infer_node(g, &c, err);
          g->values[out].layout = "NHWC";
          gr_list_push(&l, &c);
          cur = out;
        }
        from[cancelled] = n.outputs[0];
        to[cancelled++] = cur;
      }
    }
    gr_list_push(&l, &g->nodes[i]);
  }
  if (*rc || !cancelled) {
    free(l.nodes), free(from), free(to);
    return 0;
  }
  if (gr_list_commit(g, &l)) {
    free(from), free(to);
    *rc = TS_ERR(err, TS_ENOMEM, "out of memory");
    return 0;
  }
  for (int k = 0; k < cancelled; k++) gr_replace_uses(g, from[k], to[k]);
  free(from), free(to);
  return cancelled;
}

/* ---- the pass ---- */

int ts_graph_set_pet(ts_graph *g, const ts_pet_options *o, ts_error *err) {
  ts_pet_options d = {0};
  if (o) d = *o;
  if (d.trials < 0 || d.min_gain < 0 || d.min_gain >= 1 || d.max_boxes < 0)
    return TS_ERR(err, TS_EINVAL,
                  "pet options: trials and max_boxes must not be negative, "
                  "min_gain in [0, 1)");
  if (!d.trials) d.trials = 2;
  if (!d.seed) d.seed = 1;
  if (!d.min_gain) d.min_gain = 0.05;
  if (!d.max_boxes) d.max_boxes = 4096;
  if (d.top_k < 0)
    return TS_ERR(err, TS_EINVAL, "pet options: top_k must not be negative");
  if (!d.top_k) d.top_k = 2;
  if (d.depth < 0 || d.depth > 3)
    return TS_ERR(err, TS_EINVAL, "pet options: depth must be 1 to 3");
  if (!d.depth) d.depth = 2;
  char *target = NULL;
  if (d.db) { /* the records are looked up under the canonical name */
    ts_target *t = NULL;
    int rc = ts_target_parse(d.target ? d.target : "llvm", &t, err);
    if (rc) return rc;
    target = ts_strdup(ts_target_str(t));
    ts_target_free(t);
    if (!target) return TS_ERR(err, TS_ENOMEM, "out of memory");
  }
  d.target = NULL;
  gr_pet_setup *s = g->pet ? g->pet : ts_calloc(1, sizeof *s);
  if (!s) {
    free(target);
    return TS_ERR(err, TS_ENOMEM, "out of memory");
  }
  free(s->target);
  s->target = target;
  if (!g->pet) {
    s->kinds[0] = "dilated_to_batch", s->fns[0] = mut_dilated;
    s->kinds[1] = "split_rows", s->fns[1] = mut_split_rows;
    s->kinds[2] = "pad_same", s->fns[2] = mut_pad_same;
    s->n_mut = 3;
    s->sub_kinds[0] = "batch_shared_input", s->sub_fns[0] = mut_batch;
    s->sub_kinds[1] = "concat_shared_weights", s->sub_fns[1] = mut_concat;
    s->n_sub_mut = 2;
  }
  s->o = d;
  g->pet = s;
  return TS_OK;
}

int pet_add_mutator(ts_graph *g, const char *kind, pet_mutator fn,
                    ts_error *err) {
  if (!g->pet) return TS_ERR(err, TS_EINVAL, "pet is not on for this graph");
  if (g->pet->n_mut == MAX_MUTATORS)
    return TS_ERR(err, TS_EINVAL, "more than %d mutators", MAX_MUTATORS);
  g->pet->kinds[g->pet->n_mut] = kind;
  g->pet->fns[g->pet->n_mut++] = fn;
  return TS_OK;
}

int pet_add_sub_mutator(ts_graph *g, const char *kind, pet_sub_mutator fn,
                        ts_error *err) {
  if (!g->pet) return TS_ERR(err, TS_EINVAL, "pet is not on for this graph");
  if (g->pet->n_sub_mut == MAX_MUTATORS)
    return TS_ERR(err, TS_EINVAL, "more than %d mutators", MAX_MUTATORS);
  g->pet->sub_kinds[g->pet->n_sub_mut] = kind;
  g->pet->sub_fns[g->pet->n_sub_mut++] = fn;
  return TS_OK;
}

void ts_graph_pet_report(const ts_graph *g, ts_pet_report *r,
                         const char **log) {
  if (r) {
    if (g->pet)
      *r = g->pet->r;
    else
      memset(r, 0, sizeof *r);
  }
  if (log) *log = g->pet && g->pet->log ? g->pet->log : "";
}

static void shape_text(const gr_value *v, char *buf, size_t size) {
  size_t k = 0;
  k += (size_t)snprintf(buf + k, size - k, "[");
  for (int d = 0; d < v->ndim && k < size; d++)
    k += (size_t)snprintf(buf + k, size - k, "%s%lld", d ? ", " : "",
                          (long long)v->shape[d]);
  if (k < size) snprintf(buf + k, size - k, "]");
}

/* A candidate of a node: the original (m NULL) or a checked mutant. */
typedef struct cand {
  pet_mutant *m;
  double est_us, measured_s;
  char what[400]; /* the check's line */
} cand;

static int cmp_cand(const void *p, const void *q) {
  const cand *a = p, *b = q;
  return (a->est_us > b->est_us) - (a->est_us < b->est_us);
}

/* What a subprogram is, for the log: "Conv Conv_4 [1, 32, 32, 8]" for one
 * node, "3 MatMul reading add_48 [1, 128, 768]" for several. */
static void sub_text(const ts_graph *g, const pet_sub *sub, char *buf,
                     size_t size) {
  char shape[128];
  if (sub->n == 1) {
    shape_text(&g->values[sub->outs[0]], shape, sizeof shape);
    snprintf(buf, size, "%s %s %s", sub->nodes[0].op, sub->nodes[0].name,
             shape);
    return;
  }
  int x = sub->nodes[0].inputs[0], w = sub->nodes[0].inputs[1];
  bool shared_weights = false;
  for (int i = 1; i < sub->n; i++)
    shared_weights |= !strcmp(sub->nodes[i].op, sub->nodes[0].op) &&
                      sub->nodes[i].inputs[0] != x;
  int v = shared_weights ? w : x;
  shape_text(&g->values[v], shape, sizeof shape);
  snprintf(buf, size, "%d %s %s %s %s", sub->n_outs, sub->nodes[0].op,
           shared_weights ? "applying" : "reading", g->values[v].name, shape);
}

/* The node of sub that computes value v, or NULL. */
static const gr_node *producer_in(const pet_sub *sub, int v) {
  for (int i = 0; i < sub->n; i++)
    for (int o = 0; o < sub->nodes[i].n_outputs; o++)
      if (sub->nodes[i].outputs[o] == v) return &sub->nodes[i];
  return NULL;
}

/* Checks every output of mutant m against sub's; *res[k] the result of
 * output k. 0 done, 1 when an output could not be checked (logged, counted
 * as not checked), negative on failure. */
static int check_outputs(ts_graph *g, gr_pet_setup *s, const pet_sub *sub,
                         const pet_mutant *m, pet_check_result *res,
                         const char *text, const char *what) {
  pet_prog orig = {sub->nodes, sub->n}, mp = {m->nodes, m->n};
  pet_check_opts co = {s->o.trials, s->o.seed,    s->o.max_boxes,
                       4096,        CHECK_BUDGET, 0};
  ts_error cerr;
  for (int k = 0; k < sub->n_outs; k++) {
    if (!pet_check(g, &orig, sub->outs[k], &mp, m->outs[k], &co, &res[k],
                   &cerr)) {
      s->r.points += res[k].n_points;
      continue;
    }
    for (int j = 0; j < k; j++) pet_check_result_free(&res[j]);
    s->r.unchecked++;
    if (what)
      logf_(s, "%s; corrected, not checked (%s)", what, cerr.msg);
    else
      logf_(s, "%s: %s: not checked (%s)", text, m->kind, cerr.msg);
    return 1;
  }
  return 0;
}

/* Checks mutant m of sub, correcting the outputs that differ where a conv
 * of the original computes them (bands of rows or columns); 1 when it
 * holds, 0 when it was dropped (logged). */
static int check_mutant(ts_graph *g, gr_pet_setup *s, const pet_sub *sub,
                        pet_mutant *m, char *what, size_t what_size,
                        ts_error *err) {
  pet_check_result res[PET_MAX_OUTS];
  char text[256];
  sub_text(g, sub, text, sizeof text);
  if (check_outputs(g, s, sub, m, res, text, NULL)) return 0;
  int64_t n_diff = 0, n_boxes = 0;
  for (int k = 0; k < sub->n_outs; k++) {
    s->r.boxes += res[k].n_boxes;
    n_boxes += res[k].n_boxes;
    n_diff += res[k].n_diff;
  }
  s->r.verified++;
  snprintf(what, what_size, "%s: %s: %lld boxes, %lld differ", text, m->kind,
           (long long)n_boxes, (long long)n_diff);
  if (!n_diff) {
    for (int k = 0; k < sub->n_outs; k++) pet_check_result_free(&res[k]);
    s->r.exact++;
    return 1;
  }
  /* each differing output by the bands of the conv that computes it in
   * the original */
  char note[200] = "";
  int rc = 1;
  for (int k = 0; k < sub->n_outs && rc > 0; k++) {
    if (!res[k].n_diff) continue;
    const gr_node *c = producer_in(sub, sub->outs[k]);
    char one[200] = "";
    m->out = m->outs[k];
    rc = c ? correct(g, c, m, &res[k], one, sizeof one, err) : 0;
    m->outs[k] = m->out;
    size_t len = strlen(note);
    if (rc > 0 && len < sizeof note)
      snprintf(note + len, sizeof note - len, "%s%s", len ? ";" : "", one);
  }
  m->out = m->outs[0];
  for (int k = 0; k < sub->n_outs; k++) pet_check_result_free(&res[k]);
  if (rc < 0) return rc;
  pet_check_result again[PET_MAX_OUTS];
  int64_t still = 0;
  if (rc > 0) {
    char line[600];
    snprintf(line, sizeof line, "%s; corrected%s", what, note);
    if (check_outputs(g, s, sub, m, again, text, line)) return 0;
    for (int k = 0; k < sub->n_outs; k++) {
      still += again[k].n_diff;
      pet_check_result_free(&again[k]);
    }
  }
  if (rc == 0 || still) {
    s->r.wrong++;
    logf_(s, "%s; %s, dropped", what,
          rc == 0 ? "no correction covers them"
                  : "still differs after correction");
    return 0;
  }
  s->r.corrected++;
  size_t len = strlen(what);
  snprintf(what + len, what_size - len, ", corrected%s", note);
  return 1;
}

/* Builds mutant k of sub (a mutator of one node, or of several when k >=
 * s->n_mut) into m: 1 built, 0 not applicable, negative on failure. */
static int build_mutant(ts_graph *g, gr_pet_setup *s, const pet_sub *sub, int k,
                        pet_mutant *m, ts_error *err) {
  bool one = k < s->n_mut;
  const char *kind = one ? s->kinds[k] : s->sub_kinds[k - s->n_mut];
  if (s->o.only && strcmp(s->o.only, kind)) return 0;
  if (one != (sub->n == 1)) return 0;
  int rc = one ? s->fns[k](g, &sub->nodes[0], m, err)
               : s->sub_fns[k - s->n_mut](g, sub, m, err);
  if (rc <= 0) return rc;
  if (!m->kind) m->kind = kind;
  if (one) {
    m->outs[0] = m->out;
    m->n_outs = 1;
  } else if (m->n_outs != sub->n_outs) {
    return TS_ERR(err, TS_EINVAL, "%d outputs for a subprogram of %d",
                  m->n_outs, sub->n_outs);
  }
  return 1;
}

/* Mutant m with its node j replaced by mm, a mutant of that node (mm's
 * output renamed to the node's): a mutant of depth one more, into *out.
 * false when it would have too many nodes. */
static bool compose(ts_graph *g, const pet_mutant *m, int j,
                    const pet_mutant *mm, pet_mutant *out) {
  if (m->n - 1 + mm->n > PET_MAX_NODES) return false;
  *out = *m;
  out->n = 0;
  for (int i = 0; i < j; i++) out->nodes[out->n++] = m->nodes[i];
  int from = mm->out, to = m->nodes[j].outputs[0];
  for (int i = 0; i < mm->n; i++) {
    gr_node n = mm->nodes[i];
    for (int k = 0; k < n.n_outputs; k++)
      if (n.outputs[k] == from) {
        /* the node's outputs array is shared with mm: a copy */
        int *o = ts_arena_alloc(g->arena, sizeof(int) * (size_t)n.n_outputs);
        if (!o) return false;
        memcpy(o, n.outputs, sizeof(int) * (size_t)n.n_outputs);
        o[k] = to;
        n.outputs = o;
      }
    out->nodes[out->n++] = n;
  }
  for (int i = j + 1; i < m->n; i++) out->nodes[out->n++] = m->nodes[i];
  char kind[128];
  snprintf(kind, sizeof kind, "%s+%s", m->kind, mm->kind);
  out->kind = ts_arena_strdup(g->arena, kind);
  return out->kind != NULL;
}

/* The mutants of sub up to depth s->o.depth into ms[0..max): every
 * mutator that applies, then each single-node mutator on every conv or
 * matmul of each mutant made at the depth before. Their number, or a
 * negative code. */
static int generate(ts_graph *g, gr_pet_setup *s, const pet_sub *sub,
                    pet_mutant **ms, int max, ts_error *err) {
  char text[256];
  sub_text(g, sub, text, sizeof text);
  int n = 0, rc = 0;
  for (int k = 0; k < s->n_mut + s->n_sub_mut && n < max; k++) {
    pet_mutant *m = ts_calloc(1, sizeof *m);
    if (!m) return TS_ERR(err, TS_ENOMEM, "out of memory");
    rc = build_mutant(g, s, sub, k, m, err);
    if (rc < 0 && rc != TS_ENOMEM) { /* this mutant only */
      logf_(s, "%s: %s: not built (%s)", text,
            k < s->n_mut ? s->kinds[k] : s->sub_kinds[k - s->n_mut], err->msg);
      rc = 0;
    }
    if (rc > 0)
      ms[n++] = m;
    else
      free(m);
    if (rc < 0) return rc;
  }
  int level_start = 0;
  for (int depth = 2; depth <= s->o.depth; depth++) {
    int level_end = n;
    for (int a = level_start; a < level_end && n < max; a++)
      for (int j = 0; j < ms[a]->n && n < max; j++) {
        const gr_node *nd = &ms[a]->nodes[j];
        if (strcmp(nd->op, "Conv") && strcmp(nd->op, "MatMul")) continue;
        gr_node copy = *nd;
        for (int k = 0; k < s->n_mut && n < max; k++) {
          if (s->o.only && strcmp(s->o.only, s->kinds[k])) continue;
          pet_mutant *mm = ts_calloc(1, sizeof *mm),
                     *m = ts_calloc(1, sizeof *m);
          if (!mm || !m) {
            free(mm), free(m);
            return TS_ERR(err, TS_ENOMEM, "out of memory");
          }
          rc = s->fns[k](g, &copy, mm, err);
          if (rc < 0 && rc != TS_ENOMEM) rc = 0; /* this one only */
          if (rc > 0) {
            if (!mm->kind) mm->kind = s->kinds[k];
            if (compose(g, ms[a], j, mm, m)) ms[n++] = m, m = NULL;
          }
          free(mm), free(m);
          if (rc < 0) return rc;
        }
      }
    level_start = level_end;
  }
  return n;
}

/* Tries every mutator on subprogram sub (up to the depth); the chosen
 * mutant (copied into *best), or 0 when the original stays. */
static int try_sub(ts_graph *g, gr_pet_setup *s, const pet_sub *sub,
                   pet_mutant *best, ts_error *err) {
  cand *c = ts_calloc(MAX_CANDIDATES + 1, sizeof *c);
  ts_hash128 *seen = ts_calloc(MAX_CANDIDATES + 1, sizeof *seen);
  pet_mutant **ms = ts_calloc(MAX_CANDIDATES, sizeof *ms);
  if (!c || !seen || !ms) {
    free(c), free(seen), free(ms);
    return TS_ERR(err, TS_ENOMEM, "out of memory");
  }
  char text[256];
  sub_text(g, sub, text, sizeof text);
  int nc = 1, rc = 0, n_seen = 1;
  c[0].est_us = cost_us(g, sub->nodes, sub->n);
  c[0].measured_s = NAN;
  seen[0] = gr_nodes_hash(g, sub->nodes, sub->n, sub->outs, sub->n_outs);
  int n_ms = generate(g, s, sub, ms, MAX_CANDIDATES, err);
  if (n_ms < 0) rc = n_ms;
  if (n_ms > 0) s->r.subprograms++;
  for (int k = 0; k < n_ms && rc >= 0; k++) {
    pet_mutant *m = ms[k];
    ms[k] = NULL;
    s->r.generated++;
    /* the same program as the original or as a mutant already made */
    ts_hash128 h = gr_nodes_hash(g, m->nodes, m->n, m->outs, m->n_outs);
    int dup = -1;
    for (int i = 0; i < n_seen && dup < 0 && (h.hi || h.lo); i++)
      if (ts_hash128_eq(seen[i], h)) dup = i;
    if (dup >= 0) {
      s->r.duplicates++;
      logf_(s, "%s: %s: the same program as %s, skipped", text, m->kind,
            dup ? "a mutant made before" : "the original");
      free(m);
      continue;
    }
    seen[n_seen++] = h;
    /* corrections only add to a mutant's cost: one already dearer than
     * the pruning bound is not worth checking */
    double est = cost_us(g, m->nodes, m->n);
    if (est > c[0].est_us * PRUNE && !s->o.apply_all) {
      s->r.pruned++;
      logf_(s, "%s: %s: est. %.1f -> %.1f us, pruned before checking", text,
            m->kind, c[0].est_us, est);
      free(m);
      continue;
    }
    rc = check_mutant(g, s, sub, m, c[nc].what, sizeof c[nc].what, err);
    if (rc <= 0) {
      free(m);
      continue;
    }
    c[nc].m = m;
    c[nc].est_us = cost_us(g, m->nodes, m->n);
    c[nc++].measured_s = NAN;
  }
  for (int k = 0; k < n_ms; k++) free(ms[k]);
  free(ms);
  free(seen);
  /* rank by the estimate: mutants more than 10 % dearer are pruned, the
   * top K (the original among them) are weighed by measurement */
  double base = c[0].est_us;
  int keep = 0, chosen = 0;
  for (int i = 1; rc >= 0 && i < nc; i++) {
    if (c[i].est_us <= base * PRUNE || s->o.apply_all) {
      c[1 + keep++] = c[i];
      continue;
    }
    logf_(s, "%s; est. %.1f -> %.1f us, pruned", c[i].what, base, c[i].est_us);
    free(c[i].m);
  }
  if (rc >= 0) {
    nc = 1 + keep;
    qsort(c + 1, (size_t)keep, sizeof *c, cmp_cand);
  }
  int weigh = 1 + keep < s->o.top_k ? 1 + keep : s->o.top_k;
  bool measured = false;
  if (rc >= 0 && (s->o.db || s->o.collect_tasks) && keep > 0) {
    measured = true;
    for (int i = 0; i < weigh && rc >= 0; i++) {
      char name[300];
      snprintf(name, sizeof name, "pet %s %s", sub->nodes[0].name,
               c[i].m ? c[i].m->kind : "original");
      rc = c[i].m ? candidate_cost(g, s, c[i].m->nodes, c[i].m->n, c[i].m->outs,
                                   c[i].m->n_outs, name, &c[i].measured_s, err)
                  : candidate_cost(g, s, sub->nodes, sub->n, sub->outs,
                                   sub->n_outs, name, &c[i].measured_s, err);
      if (!(c[i].measured_s >= 0)) measured = false;
    }
  }
  /* by measurement when every weighed candidate has its latencies */
  if (rc >= 0 && measured) s->r.by_measurement++;
  for (int i = 1; rc >= 0 && i < 1 + keep; i++) {
    bool better;
    if (measured)
      better = i < weigh && c[i].measured_s < c[chosen].measured_s &&
               c[i].measured_s < c[0].measured_s * (1 - s->o.min_gain);
    else
      better = c[i].est_us < c[chosen].est_us &&
               c[i].est_us < base * (1 - s->o.min_gain);
    if (better || s->o.apply_all) chosen = i;
  }
  for (int i = 1; rc >= 0 && i < 1 + keep; i++) {
    char cost[200];
    if (measured && i < weigh)
      snprintf(cost, sizeof cost,
               "measured %.1f -> %.1f us (est. %.1f -> %.1f)",
               c[0].measured_s * 1e6, c[i].measured_s * 1e6, base, c[i].est_us);
    else
      snprintf(cost, sizeof cost, "est. %.1f -> %.1f us", base, c[i].est_us);
    logf_(s, "%s; %s%s", c[i].what, cost,
          i == chosen              ? ""
          : i < weigh || !measured ? ", kept the original"
                                   : ", not weighed (top K)");
  }
  if (rc >= 0 && chosen) {
    *best = *c[chosen].m;
    s->r.cost_before_us += measured ? c[0].measured_s * 1e6 : base;
    s->r.cost_after_us +=
        measured ? c[chosen].measured_s * 1e6 : c[chosen].est_us;
  }
  for (int i = 1; i < nc; i++) free(c[i].m);
  free(c);
  return rc < 0 ? rc : chosen > 0;
}

/* Values to fold after the pass. */
typedef struct value_list {
  int *v;
  int n, cap;
  bool oom;
} value_list;

static void value_list_add(value_list *l, int v) {
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 16;
    int *p = ts_realloc(l->v, sizeof(int) * (size_t)cap);
    if (!p) {
      l->oom = true;
      return;
    }
    l->v = p;
    l->cap = cap;
  }
  l->v[l->n++] = v;
}

/* The mutant's outputs renamed to the subprogram's, and its nodes pushed
 * onto l; the outputs of the nodes that fold at compile time added to
 * fold. */
static void push_mutant(ts_graph *g, pet_mutant *m, const pet_sub *sub,
                        gr_list *l, value_list *fold) {
  for (int k = 0; k < sub->n_outs; k++)
    for (int i = 0; i < m->n; i++) {
      gr_node *n = &m->nodes[i];
      for (int j = 0; j < n->n_outputs; j++)
        if (n->outputs[j] == m->outs[k]) n->outputs[j] = sub->outs[k];
      for (int j = 0; j < n->n_inputs; j++)
        if (n->inputs[j] == m->outs[k]) n->inputs[j] = sub->outs[k];
    }
  int folded[PET_MAX_NODES], n_folded = 0;
  for (int i = 0; i < m->n; i++) {
    if (folds(g, &m->nodes[i], folded, n_folded)) {
      folded[n_folded++] = m->nodes[i].outputs[0];
      value_list_add(fold, m->nodes[i].outputs[0]);
    }
    gr_list_push(l, &m->nodes[i]);
  }
}

/* Whether every value mutant m reads from outside is defined before node
 * `at` of g (a graph input, a constant or an output of a node before it). */
static bool defined_before(const ts_graph *g, const pet_mutant *m, int at) {
  for (int i = 0; i < m->n; i++)
    for (int k = 0; k < m->nodes[i].n_inputs; k++) {
      int v = m->nodes[i].inputs[k];
      if (v < 0 || gr_is_const(g, v) || g->values[v].is_input) continue;
      bool inside = false;
      for (int j = 0; j < i && !inside; j++)
        inside = m->nodes[j].outputs[0] == v;
      if (!inside && (g->values[v].producer < 0 || g->values[v].producer >= at))
        return false;
    }
  return true;
}

/* Where mutant m of subprogram sub can stand in g's node list: where its
 * first node stood when everything m reads is defined by then, else where
 * its last node stood, the nodes between that read what the subprogram
 * computes moving after it (sort_nodes). -1 when a value m reads depends
 * on what the subprogram computes (one member's data is computed from
 * another's result): batched, it would read itself. */
static int place_of(const ts_graph *g, const pet_mutant *m,
                    const pet_sub *sub) {
  int first = sub->idx[0], last = sub->idx[sub->n - 1];
  if (defined_before(g, m, first)) return first;
  if (!defined_before(g, m, last)) return -1;
  uint8_t *after = ts_calloc((size_t)g->n_values + 1, 1);
  if (!after) return -1;
  for (int k = 0; k < sub->n; k++)
    for (int o = 0; o < sub->nodes[k].n_outputs; o++)
      after[sub->nodes[k].outputs[o]] = 1;
  for (int i = first + 1; i < last; i++) {
    const gr_node *n = &g->nodes[i];
    bool reads = false;
    for (int j = 0; j < n->n_inputs && !reads; j++)
      reads = n->inputs[j] >= 0 && after[n->inputs[j]];
    for (int o = 0; reads && o < n->n_outputs; o++) after[n->outputs[o]] = 1;
  }
  bool cycle = false;
  for (int i = 0; i < m->n && !cycle; i++)
    for (int k = 0; k < m->nodes[i].n_inputs && !cycle; k++) {
      int v = m->nodes[i].inputs[k];
      bool inside = false;
      for (int j = 0; j < i && !inside; j++)
        inside = m->nodes[j].outputs[0] == v;
      cycle = v >= 0 && !inside && after[v];
    }
  free(after);
  return cycle ? -1 : last;
}

/* Puts l's nodes in topological order, keeping the order they have where
 * it already is one (a mutant standing where the last node of its
 * subprogram stood may come after nodes that read its results). */
static int sort_nodes(const ts_graph *g, gr_list *l) {
  int n = l->n;
  uint8_t *ready = ts_calloc((size_t)g->n_values + 1, 1);
  uint8_t *done = ts_calloc((size_t)n + 1, 1);
  gr_node *out = ts_malloc(sizeof(gr_node) * (size_t)(n + 1));
  int *made = ts_malloc(sizeof(int) * (size_t)(g->n_values + 1));
  if (!ready || !done || !out || !made) {
    free(ready), free(done), free(out), free(made);
    return TS_ENOMEM;
  }
  /* a value is ready unless a node of the list makes it */
  for (int v = 0; v < g->n_values; v++) made[v] = 0;
  for (int i = 0; i < n; i++)
    for (int o = 0; o < l->nodes[i].n_outputs; o++)
      made[l->nodes[i].outputs[o]] = 1;
  for (int v = 0; v < g->n_values; v++) ready[v] = !made[v];
  int n_out = 0, start = 0;
  while (n_out < n) {
    int pick = -1;
    for (int i = start; i < n && pick < 0; i++) {
      if (done[i]) continue;
      bool ok = true;
      for (int k = 0; k < l->nodes[i].n_inputs && ok; k++)
        ok = l->nodes[i].inputs[k] < 0 || ready[l->nodes[i].inputs[k]];
      if (ok) pick = i;
    }
    if (pick < 0) break; /* a cycle: left as it was */
    done[pick] = 1;
    out[n_out++] = l->nodes[pick];
    for (int o = 0; o < l->nodes[pick].n_outputs; o++)
      ready[l->nodes[pick].outputs[o]] = 1;
    while (start < n && done[start]) start++;
  }
  if (n_out == n) memcpy(l->nodes, out, sizeof(gr_node) * (size_t)n);
  free(ready), free(done), free(out), free(made);
  return n_out == n ? TS_OK : TS_EINVAL;
}

int ts_graph_pet(ts_graph *g, ts_error *err) {
  gr_pet_setup *s = g->pet;
  if (!s) return TS_OK;
  double t0 = ts_now_seconds();
  memset(&s->r, 0, sizeof s->r);
  alts_clear(s);
  s->len = 0;
  if (s->log) s->log[0] = 0;
  gr_list l = {0};
  int n_nodes = g->n_nodes, rc = TS_OK;
  pet_mutant *best = ts_malloc(sizeof *best);
  pet_sub *sub = ts_malloc(sizeof *sub);
  /* the subprograms of several nodes first (each node in one at most);
   * at[i]: the mutant standing where node i stood, replaced[i]: node i is
   * part of a subprogram that was rewritten */
  int max_groups = n_nodes / 2 + 1, n_groups = 0;
  pet_sub *groups = ts_malloc(sizeof *groups * (size_t)max_groups);
  int *place = ts_malloc(sizeof(int) * (size_t)max_groups);
  pet_mutant **at = ts_calloc((size_t)n_nodes + 1, sizeof *at);
  uint8_t *replaced = ts_calloc((size_t)n_nodes + 1, 1);
  if (!best || !sub || !groups || !place || !at || !replaced) {
    free(best), free(sub), free(groups), free(place), free(at), free(replaced);
    return TS_ERR(err, TS_ENOMEM, "out of memory");
  }
  if (s->n_sub_mut) {
    n_groups = pet_batch_groups(g, groups, max_groups);
    if (n_groups < 0) rc = TS_ERR(err, n_groups, "out of memory");
  }
  for (int k = 0; k < n_groups; k++) place[k] = -1;
  for (int k = 0; k < n_groups && !rc; k++) {
    int found = try_sub(g, s, &groups[k], best, err);
    if (found < 0) {
      rc = found;
    } else if (found && (place[k] = place_of(g, best, &groups[k])) >= 0) {
      pet_mutant *m = ts_malloc(sizeof *m);
      if (!m) {
        rc = TS_ERR(err, TS_ENOMEM, "out of memory");
        break;
      }
      *m = *best;
      at[place[k]] = m;
      for (int i = 0; i < groups[k].n; i++) replaced[groups[k].idx[i]] = 1;
    } else if (found) {
      char text[256];
      sub_text(g, &groups[k], text, sizeof text);
      logf_(s, "%s: %s: not applied (one member reads what another computes)",
            text, best->kind);
    }
  }
  value_list fold = {0};
  for (int i = 0; i < n_nodes && !rc; i++) {
    const pet_sub *done = NULL;
    for (int k = 0; k < n_groups && at[i] && !done; k++)
      if (place[k] == i) done = &groups[k];
    if (done) {
      push_mutant(g, at[i], done, &l, &fold);
      s->r.applied++;
      continue;
    }
    if (replaced[i]) continue;
    memset(sub, 0, sizeof *sub);
    sub->nodes[0] = g->nodes[i]; /* a copy: mutants grow the graph */
    sub->idx[0] = i;
    sub->n = 1;
    sub->outs[0] = g->nodes[i].outputs[0];
    sub->n_outs = 1;
    int found = try_sub(g, s, sub, best, err);
    if (found < 0) {
      rc = found;
      break;
    }
    if (found) {
      push_mutant(g, best, sub, &l, &fold);
      s->r.applied++;
    } else {
      gr_list_push(&l, &sub->nodes[0]);
    }
  }
  for (int i = 0; i < n_nodes; i++) free(at[i]);
  free(best), free(sub), free(groups), free(place), free(at), free(replaced);
  if (!rc && fold.oom) rc = TS_ERR(err, TS_ENOMEM, "out of memory");
  if (rc) {
    free(fold.v);
    free(l.nodes);
    return rc;
  }
  if (s->r.applied) {
    rc = sort_nodes(g, &l);
    if (rc) {
      free(l.nodes);
      return TS_ERR(err, rc, "pet: the rewritten graph has no order");
    }
    rc = gr_list_commit(g, &l);
    if (rc) rc = TS_ERR(err, rc, "out of memory");
    /* what the mutants compute from constants alone (concatenated
     * weights) is folded now */
    uint8_t *marks = fold.n ? ts_calloc((size_t)g->n_values + 1, 1) : NULL;
    if (!rc && fold.n && !marks) rc = TS_ERR(err, TS_ENOMEM, "out of memory");
    for (int k = 0; marks && k < fold.n; k++) marks[fold.v[k]] = 1;
    if (!rc && marks) rc = gr_fold_marked(g, marks, err);
    free(marks);
    int c;
    do {
      c = rc ? 0 : cancel_round(g, err, &rc);
      s->r.relayouts_cancelled += c;
      if (!rc && c) rc = ts_graph_eliminate_dead(g, err);
    } while (c && !rc);
    if (!rc) rc = ts_graph_eliminate_dead(g, err);
  } else {
    free(l.nodes);
    if (s->r.generated) /* the mutants' constants */
      rc = ts_graph_eliminate_dead(g, err);
  }
  free(fold.v);
  s->r.ms = (ts_now_seconds() - t0) * 1e3;
  return rc;
}
