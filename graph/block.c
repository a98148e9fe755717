/*
 * block.c — channel-blocked activations (NCHW[x]c), chosen per convolution.
 *
 * After the layout pass, convolutions run channels-last (NHWC). A conv can
 * also run with its data and result channel-blocked: [N, C/B, H, W, B],
 * B = 8 or 16 channels innermost, so that one spatial row of one channel
 * block is contiguous (the layout onnxruntime's and oneDNN's direct
 * convolutions use on CPUs). Which is faster depends on the conv and the
 * machine, so here it is a decision by measurement:
 *
 *   - a blocked Conv (attributes layout = "NCHWc", block = B) reads
 *     [N, CI/B, H, W, B], writes [N, CO/B, OH, OW, B]; its weights become
 *     [CO/B, KH, KW, CI, B] and its bias [CO/B, 1, 1, B] at compile time;
 *     ungrouped 2-D float32 convs whose channel counts B divides can;
 *   - elementwise nodes on 4-D data (the epilogue: bias, residual Add,
 *     Relu, Clip, ...) run in either layout, their per-channel constants
 *     reshaped; every other node keeps NHWC;
 *   - where the two ends of an activation disagree, a transform runs:
 *     NHWC -> blocked is a Reshape [N, H, W, C/B, B] (a view) and a
 *     Transpose to [N, C/B, H, W, B]; blocked -> NHWC the reverse.
 *
 * The plan is a minimum cut, as the layout pass's: each conv costs its
 * fused group's latency in the layout it gets (the group built alone in
 * each layout, its tasks' best records in the tuning database), and each
 * activation whose producer and readers disagree costs its transform's
 * latency (the transform built alone and looked up the same way; its
 * bytes at 8 GB/s when the database has no record). For each block size
 * the cut gives the cheapest plan; the cheaper block wins, and nothing is
 * blocked unless the plan beats all-NHWC. A conv without a record in both
 * layouts stays NHWC. `tune --model --layout auto` measures every
 * candidate (ts_graph_block_candidate_tasks) so that `compile --layout
 * auto --db` can choose; `--layout blocked` blocks every conv that can be
 * (the transforms still placed by a cut, on bytes).
 *
 * The pass runs after winograd (a conv that became Winograd's transforms
 * and product is no conv any more) and before fusion.
 */
#include "internal.h"

#include "codegen/codegen.h"
#include "tuner/tuner.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BLOCK_OFF, BLOCK_ALL, BLOCK_AUTO };

/* transforms with no record: their bytes, read and written, at this rate */
#define EST_BYTES_PER_S 8e9

struct gr_block_setup {
  int mode;
  int block; /* the only block size tried; 0: 8 and 16 */
  ts_db *db;
  char *target;
  bool collect_tasks;
  /* what the pass did */
  ts_block_report rep;
  char *log;
  size_t log_len, log_cap;
  gr_task_set alts; /* the candidates' tasks (built alone) */
};

static gr_block_setup *setup_of(ts_graph *g) {
  if (!g->block) g->block = ts_calloc(1, sizeof *g->block);
  return g->block;
}

static void clear_results(gr_block_setup *s) {
  gr_task_set_clear(&s->alts);
  s->log_len = 0;
  if (s->log) s->log[0] = 0;
  memset(&s->rep, 0, sizeof s->rep);
}

void gr_block_setup_free(gr_block_setup *s) {
  if (!s) return;
  gr_task_set_free(&s->alts);
  free(s->log);
  free(s->target);
  free(s);
}

int gr_block_set_mode(ts_graph *g, const char *layout) {
  int mode = !strcmp(layout, "blocked") ? BLOCK_ALL
             : !strcmp(layout, "auto")  ? BLOCK_AUTO
                                        : BLOCK_OFF;
  if (mode == BLOCK_OFF && !g->block) return TS_OK;
  gr_block_setup *s = setup_of(g);
  if (!s) return TS_ENOMEM;
  s->mode = mode;
  return TS_OK;
}

int ts_graph_set_block_options(ts_graph *g, const ts_block_options *o,
                               ts_error *err) {
  if (o && o->block != 0 && o->block != 8 && o->block != 16)
    return TS_ERR(err, TS_EINVAL,
                  "block size %d: the blocked layout takes 8 or 16 channels "
                  "per block",
                  o->block);
  char *target = NULL;
  if (o && o->db) { /* the records are looked up under the canonical name */
    int rc = gr_canonical_target(o->target, &target, err);
    if (rc) return rc;
  }
  gr_block_setup *s = setup_of(g);
  if (!s) {
    free(target);
    return TS_ERR(err, TS_ENOMEM, "block: out of memory");
  }
  s->block = o ? o->block : 0;
  s->db = o ? o->db : NULL;
  s->collect_tasks = o && o->collect_tasks;
  free(s->target);
  s->target = target;
  return TS_OK;
}

static void logf_(gr_block_setup *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void logf_(gr_block_setup *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  gr_log_vappend(&s->log, &s->log_len, &s->log_cap, fmt, ap);
  va_end(ap);
}

void ts_graph_block_report(const ts_graph *g, ts_block_report *r,
                           const char **log) {
  const gr_block_setup *s = g->block;
  if (r) {
    if (s)
      *r = s->rep;
    else
      memset(r, 0, sizeof *r);
  }
  if (log) *log = s && s->log ? s->log : "";
}

int ts_graph_block_candidate_tasks(const ts_graph *g,
                                   const ts_graph_task **tasks, int *n) {
  *tasks = g->block ? g->block->alts.tasks : NULL;
  *n = g->block ? g->block->alts.n : 0;
  return TS_OK;
}

/* ---- which nodes can run blocked ---- */

static bool f32_4d(const ts_graph *g, int v) {
  return v >= 0 && ts_dtype_eq(g->values[v].dtype, TS_FLOAT32) &&
         g->values[v].ndim == 4;
}

static bool same_shape(const gr_value *a, const gr_value *b) {
  return a->ndim == b->ndim &&
         !memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim);
}

/* A channels-last ungrouped 2-D float32 Conv with constant weights (HWIO
 * or blocked by 16) and bias, whose channel counts B divides. */
static bool conv_ok(const ts_graph *g, const gr_node *n, int64_t B) {
  if (n->kind != TS_GRAPH_OP || strcmp(n->op, "Conv") ||
      !gr_node_channels_last(n) || n->n_outputs != 1 || n->n_inputs < 2 ||
      n->n_inputs > 3 || gr_attr_int(n, "group", 1) != 1)
    return false;
  int x = n->inputs[0], w = n->inputs[1], y = n->outputs[0];
  if (!f32_4d(g, x) || !f32_4d(g, y) || w < 0 || !gr_is_const(g, w) ||
      !ts_dtype_eq(g->values[w].dtype, TS_FLOAT32) ||
      g->values[w].ndim != (gr_conv_weight_block(n) ? 5 : 4))
    return false;
  if (n->n_inputs == 3 && n->inputs[2] >= 0) {
    const gr_value *b = &g->values[n->inputs[2]];
    if (!gr_is_const(g, n->inputs[2]) || b->ndim != 1 ||
        !ts_dtype_eq(b->dtype, TS_FLOAT32) ||
        b->shape[0] != g->values[y].shape[3])
      return false;
  }
  return g->values[x].shape[3] % B == 0 && g->values[y].shape[3] % B == 0;
}

/* A float32 constant of one element, or of C along its last axis and 1
 * on every other (a per-channel operand of channels-last data). */
static bool per_channel_const(const ts_graph *g, int v, int64_t C) {
  const gr_value *x = &g->values[v];
  if (!gr_is_const(g, v) || !ts_dtype_eq(x->dtype, TS_FLOAT32) || x->ndim > 4)
    return false;
  if (gr_value_elems(x) == 1) return true;
  for (int d = 0; d + 1 < x->ndim; d++)
    if (x->shape[d] != 1) return false;
  return x->ndim >= 1 && x->shape[x->ndim - 1] == C;
}

/* An elementwise node on 4-D float32 data of C channels (B dividing C):
 * each operand the result's shape, or a per-channel or scalar constant. */
static bool elementwise_ok(const ts_graph *g, const gr_node *n, int64_t B) {
  if (n->kind != TS_GRAPH_OP || n->n_outputs != 1 ||
      !gr_is_elementwise_op(n->op) || gr_op_is_quant(n->op) ||
      !f32_4d(g, n->outputs[0]))
    return false;
  const gr_value *y = &g->values[n->outputs[0]];
  int64_t C = y->shape[3];
  if (C % B) return false;
  bool any = false;
  for (int k = 0; k < n->n_inputs; k++) {
    int v = n->inputs[k];
    if (v < 0) continue;
    if (gr_is_const(g, v)) {
      if (!per_channel_const(g, v, C)) return false;
    } else if (!f32_4d(g, v) || !same_shape(&g->values[v], y)) {
      return false;
    } else {
      any = true;
    }
  }
  return any;
}

/* A Slice of 4-D float32 data along the batch and spatial axes (constant
 * axes, the channels whole: a strided 1x1 conv's subsample, see layout.c),
 * B dividing the channels. */
static bool slice_ok(const ts_graph *g, const gr_node *n, int64_t B) {
  if (n->kind != TS_GRAPH_OP || strcmp(n->op, "Slice") || n->n_outputs != 1 ||
      n->n_inputs < 4 || !f32_4d(g, n->inputs[0]) ||
      !f32_4d(g, n->outputs[0]) || gr_is_const(g, n->inputs[0]) ||
      g->values[n->inputs[0]].shape[3] % B ||
      g->values[n->outputs[0]].shape[3] != g->values[n->inputs[0]].shape[3])
    return false;
  for (int k = 1; k < n->n_inputs; k++)
    if (n->inputs[k] >= 0 && !gr_is_const(g, n->inputs[k])) return false;
  int ax = n->inputs[3];
  if (ax < 0 || !ts_dtype_eq(g->values[ax].dtype, TS_INT64)) return false;
  if (gr_value_elems(&g->values[ax]) > 4) return false;
  const int64_t *a = gr_const_data(g, ax);
  for (int64_t i = 0; i < gr_value_elems(&g->values[ax]); i++)
    if (a[i] == 3 || a[i] == -1 || a[i] < -4 || a[i] > 3) return false;
  return true;
}

/* Whether node n can run blocked by B and follows its neighbours (no
 * cost of its own). */
static bool follows(const ts_graph *g, const gr_node *n, int64_t B) {
  return elementwise_ok(g, n, B) || slice_ok(g, n, B);
}

/* ---- the rewrite ---- */

typedef struct rewrite {
  ts_graph *g;
  gr_list list;
  int *blk; /* value id (original) -> its blocked form, -1 */
  int n_orig;
  int64_t B;
  int transforms; /* NHWC -> blocked and back, made */
} rewrite;

static const char *layout_name(int64_t B) {
  return B == 8 ? "NCHW8c" : "NCHW16c";
}

static int shape_const(ts_graph *g, const int64_t *shape, int nd) {
  int64_t n = nd;
  return gr_const_add(g, gr_fresh_name(g, "shape"), TS_INT64, 1, &n, shape);
}

static int push_node(rewrite *p, const char *op, const char *base, int *ins,
                     int n_ins, int out, const int64_t *perm) {
  gr_node n =
      gr_node_make(p->g, op, gr_fresh_name(p->g, base), ins, n_ins, &out, 1);
  if (perm) {
    int64_t ints[5];
    memcpy(ints, perm, sizeof ints);
    gr_node_set_attr(p->g, &n,
                     (gr_attr){.name = "perm",
                               .kind = GR_ATTR_INTS,
                               .n = 5,
                               .ints = ints}); /* copies ints */
  }
  gr_list_push(&p->list, &n);
  return p->list.oom ? TS_ENOMEM : TS_OK;
}

/* NHWC value v as [N, C/B, H, W, B] (a Reshape and a Transpose, pushed);
 * the new value, or a negative error. */
static int push_to_blocked(rewrite *p, int v) {
  static const int64_t perm[5] = {0, 3, 1, 2, 4};
  ts_graph *g = p->g;
  const gr_value *x = &g->values[v];
  int64_t N = x->shape[0], H = x->shape[1], W = x->shape[2], C = x->shape[3];
  int64_t split[5] = {N, H, W, C / p->B, p->B};
  int64_t blocked[5] = {N, C / p->B, H, W, p->B};
  const char *name = x->name;
  int s = shape_const(g, split, 5);
  int mid = gr_value_fresh(g, name, TS_FLOAT32, 5, split);
  int out = gr_value_fresh(g, name, TS_FLOAT32, 5, blocked);
  if (s < 0 || mid < 0 || out < 0) return TS_ENOMEM;
  g->values[out].layout = layout_name(p->B);
  int ins[2] = {v, s};
  int rc = push_node(p, "Reshape", "to_blocked", ins, 2, mid, NULL);
  if (!rc) rc = push_node(p, "Transpose", "to_blocked", &mid, 1, out, perm);
  p->transforms++;
  return rc ? rc : out;
}

/* Blocked value x back as NHWC value `to` (a Transpose and a Reshape). */
static int push_to_nhwc(rewrite *p, int x, int to) {
  static const int64_t perm[5] = {0, 2, 3, 1, 4};
  ts_graph *g = p->g;
  const int64_t *s = g->values[x].shape;
  int64_t split[5] = {s[0], s[2], s[3], s[1], s[4]};
  int sh = shape_const(g, g->values[to].shape, 4);
  int mid = gr_value_fresh(g, g->values[to].name, TS_FLOAT32, 5, split);
  if (sh < 0 || mid < 0) return TS_ENOMEM;
  int rc = push_node(p, "Transpose", "to_nhwc", &x, 1, mid, perm);
  int ins[2] = {mid, sh};
  if (!rc) rc = push_node(p, "Reshape", "to_nhwc", ins, 2, to, NULL);
  return rc;
}

static int blocked_of(rewrite *p, int v) {
  if (v < p->n_orig && p->blk[v] >= 0) return p->blk[v];
  int b = push_to_blocked(p, v);
  if (b >= 0 && v < p->n_orig) p->blk[v] = b;
  return b;
}

/* The conv's weights (HWIO, or [CO/16, KH, KW, CI, 16]) as
 * [CO/B, KH, KW, CI, B]. */
static int blocked_weights(rewrite *p, const gr_node *n) {
  ts_graph *g = p->g;
  int w = n->inputs[1];
  int64_t B = p->B, B0 = gr_conv_weight_block(n);
  const int64_t *s = g->values[w].shape;
  int64_t KH = B0 ? s[1] : s[0], KW = B0 ? s[2] : s[1];
  int64_t CI = B0 ? s[3] : s[2], CO = B0 ? s[0] * s[4] : s[3];
  int64_t shape[5] = {CO / B, KH, KW, CI, B};
  int c = gr_const_reserve(g, gr_fresh_name(g, g->values[w].name), TS_FLOAT32,
                           5, shape);
  if (c < 0) return c;
  const float *src = gr_const_data(g, w);
  float *dst = gr_const_data(g, c);
  for (int64_t kh = 0; kh < KH; kh++)
    for (int64_t kw = 0; kw < KW; kw++)
      for (int64_t ci = 0; ci < CI; ci++)
        for (int64_t co = 0; co < CO; co++) {
          int64_t from =
              B0 ? ((((co / B0) * KH + kh) * KW + kw) * CI + ci) * B0 + co % B0
                 : ((kh * KW + kw) * CI + ci) * CO + co;
          dst[((((co / B) * KH + kh) * KW + kw) * CI + ci) * B + co % B] =
              src[from];
        }
  return c;
}

/* A per-channel constant of C elements as `nd`-D `shape` (same bytes). */
static int reshaped_const(ts_graph *g, int v, const int64_t *shape, int nd) {
  const gr_value *x = &g->values[v];
  int c = gr_const_reserve(g, gr_fresh_name(g, x->name), x->dtype, nd, shape);
  if (c < 0) return c;
  memcpy(gr_const_data(g, c), gr_const_data(g, v),
         (size_t)gr_value_elems(&g->values[c]) * sizeof(float));
  return c;
}

static int rewrite_node(rewrite *p, const gr_node *n) {
  ts_graph *g = p->g;
  bool conv = !strcmp(n->op, "Conv"), slice = !strcmp(n->op, "Slice");
  int out = n->outputs[0];
  int64_t C = g->values[out].shape[3], B = p->B;
  int *ins = gr_alloc(g, sizeof(int) * (size_t)(n->n_inputs + 1));
  int *outs = gr_alloc(g, sizeof(int) * 2);
  if (!ins || !outs) return TS_ENOMEM;
  for (int k = 0; k < n->n_inputs; k++) {
    int v = n->inputs[k];
    ins[k] = v;
    if (v < 0) continue;
    if (slice && k == 3) { /* axes: N H W -> N . H W */
      const gr_value *a = &g->values[v];
      int64_t na = gr_value_elems(a), axes[TS_MAX_DIMS];
      const int64_t *src = gr_const_data(g, v);
      for (int64_t i = 0; i < na; i++) {
        int64_t a0 = src[i] < 0 ? src[i] + 4 : src[i];
        axes[i] = a0 == 0 ? 0 : a0 + 1;
      }
      ins[k] =
          gr_const_add(g, gr_fresh_name(g, a->name), TS_INT64, 1, &na, axes);
    } else if (slice && k > 0) {
      ins[k] = v;
    } else if (conv && k == 1) {
      ins[k] = blocked_weights(p, n);
    } else if (conv && k == 2) {
      int64_t s[4] = {C / B, 1, 1, B};
      ins[k] = reshaped_const(g, v, s, 4);
    } else if (gr_is_const(g, v)) {
      int64_t s[5] = {1, C / B, 1, 1, B};
      if (gr_value_elems(&g->values[v]) != 1)
        ins[k] = reshaped_const(g, v, s, 5);
    } else {
      ins[k] = blocked_of(p, v);
    }
    if (ins[k] < 0) return ins[k];
  }
  const gr_value *y = &g->values[out];
  int64_t s[5] = {y->shape[0], C / B, y->shape[1], y->shape[2], B};
  int nout = gr_value_fresh(g, y->name, y->dtype, 5, s);
  if (nout < 0) return nout;
  g->values[nout].layout = layout_name(B);
  gr_node m = *n;
  m.attrs = gr_alloc(g, sizeof(gr_attr) * (size_t)(n->n_attrs + 1));
  if (!m.attrs) return TS_ENOMEM;
  if (n->n_attrs)
    memcpy(m.attrs, n->attrs, sizeof(gr_attr) * (size_t)n->n_attrs);
  m.inputs = ins;
  m.outputs = outs;
  outs[0] = nout;
  if (conv) {
    gr_node_set_attr(
        g, &m,
        (gr_attr){.name = "layout", .kind = GR_ATTR_STRING, .s = "NCHWc"});
    gr_node_set_attr(g, &m,
                     (gr_attr){.name = "block", .kind = GR_ATTR_INT, .i = B});
    gr_node_set_attr(
        g, &m, (gr_attr){.name = "weight_block", .kind = GR_ATTR_INT, .i = B});
  }
  gr_list_push(&p->list, &m);
  p->blk[out] = nout;
  /* the NHWC value, for whoever still reads it (dce drops it otherwise) */
  return p->list.oom ? TS_ENOMEM : push_to_nhwc(p, nout, out);
}

static bool is_output(const ts_graph *g, int v) {
  for (int k = 0; k < g->n_outputs; k++)
    if (g->outputs[k] == v) return true;
  return false;
}

/* Rewrites the nodes plan[i] blocked by B. io_blocked: the graph's inputs
 * and outputs that blocked nodes produce or read become blocked (a
 * candidate built alone, measured without its transforms). */
static int apply_plan(ts_graph *g, const bool *plan, int64_t B, bool io_blocked,
                      int *transforms) {
  rewrite p = {.g = g, .n_orig = g->n_values, .B = B};
  p.blk = ts_malloc(sizeof(int) * (size_t)(g->n_values + 1));
  if (!p.blk) return TS_ENOMEM;
  for (int v = 0; v < g->n_values; v++) p.blk[v] = -1;
  int rc = TS_OK;
  for (int k = 0; io_blocked && k < g->n_inputs && !rc; k++) {
    int x = g->inputs[k];
    if (!f32_4d(g, x) || g->values[x].shape[3] % B) continue;
    const gr_value *v = &g->values[x];
    int64_t s[5] = {v->shape[0], v->shape[3] / B, v->shape[1], v->shape[2], B};
    int xb = gr_value_fresh(g, v->name, TS_FLOAT32, 5, s);
    if (xb < 0) {
      rc = TS_ENOMEM;
      break;
    }
    g->values[xb].layout = layout_name(B);
    g->values[xb].is_input = true;
    g->values[x].is_input = false;
    g->inputs[k] = xb;
    p.blk[x] = xb;
    rc = push_to_nhwc(&p, xb, x);
  }
  int n_nodes = g->n_nodes;
  for (int i = 0; i < n_nodes && !rc; i++) {
    if (plan[i])
      rc = rewrite_node(&p, &g->nodes[i]);
    else
      gr_list_push(&p.list, &g->nodes[i]);
    if (p.list.oom) rc = TS_ENOMEM;
  }
  for (int k = 0; io_blocked && !rc && k < g->n_outputs; k++) {
    int y = g->outputs[k];
    if (y < p.n_orig && p.blk[y] >= 0) g->outputs[k] = p.blk[y];
  }
  free(p.blk);
  if (rc) {
    free(p.list.nodes);
    return rc;
  }
  if (transforms) *transforms = p.transforms;
  return gr_list_commit(g, &p.list);
}

/* ---- costs ---- */

typedef struct costs {
  double *nhwc, *blocked;   /* per node (convs): seconds, NAN unknown */
  double *to_blk, *to_nhwc; /* per value: the transform's seconds */
  bool *measured_blk, *measured_nhwc;
} costs;

static void costs_free(costs *c) {
  free(c->nhwc), free(c->blocked), free(c->to_blk), free(c->to_nhwc);
  free(c->measured_blk), free(c->measured_nhwc);
}

static int costs_alloc(costs *c, int nn, int nv) {
  memset(c, 0, sizeof *c);
  c->nhwc = ts_malloc(sizeof(double) * (size_t)(nn + 1));
  c->blocked = ts_malloc(sizeof(double) * (size_t)(nn + 1));
  c->to_blk = ts_malloc(sizeof(double) * (size_t)(nv + 1));
  c->to_nhwc = ts_malloc(sizeof(double) * (size_t)(nv + 1));
  c->measured_blk = ts_calloc((size_t)nv + 1, sizeof(bool));
  c->measured_nhwc = ts_calloc((size_t)nv + 1, sizeof(bool));
  if (!c->nhwc || !c->blocked || !c->to_blk || !c->to_nhwc ||
      !c->measured_blk || !c->measured_nhwc) {
    costs_free(c);
    return TS_ENOMEM;
  }
  for (int i = 0; i < nn; i++) c->nhwc[i] = c->blocked[i] = NAN;
  for (int v = 0; v < nv; v++) c->to_blk[v] = c->to_nhwc[v] = NAN;
  return TS_OK;
}

/* Fuses candidate graph c (consumed) and sums its tasks' latencies
 * (NAN when one has no record, or a node is left that is neither a task
 * nor a view, so nothing prices it); the tasks join the candidates as
 * `name`. */
static double fused_seconds(gr_block_setup *s, ts_graph *c, const char *name,
                            int *rc) {
  ts_graph_task *t = NULL;
  int nt = 0;
  ts_error err;
  ts_error_clear(&err);
  double sum = NAN;
  bool all_tasks = false; /* every node a task or a view: nothing unpriced */
  if (!ts_graph_eliminate_dead(c, &err) && !ts_graph_fuse(c, &err) &&
      !ts_graph_tasks(c, &t, &nt, &err)) {
    all_tasks = true;
    for (int i = 0; i < c->n_nodes; i++)
      all_tasks = all_tasks && (c->nodes[i].kind == TS_GRAPH_CALL ||
                                !strcmp(c->nodes[i].op, "Reshape"));
  }
  if (all_tasks) {
    sum = 0;
    for (int i = 0; i < nt && !*rc; i++) {
      if (s->collect_tasks || s->db)
        *rc = gr_task_set_add(&s->alts, &t[i], name);
      sum += t[i].count * gr_task_seconds(s->db, s->target, &t[i]);
    }
  } else if (err.code == TS_ENOMEM) {
    *rc = TS_ENOMEM;
  } else if (s->db) {
    logf_(s, "%s: not one kernel per node%s%s", name, err.msg[0] ? ": " : "",
          err.msg);
  }
  free(t);
  ts_graph_free(c);
  return sum;
}

/* Whether elementwise node r reads an activation other than cur that an
 * earlier node (index below i) produces for r alone: fusion, which takes
 * nodes in order, gives r to that node's group (the residual Add of a
 * projection block goes to the first of its two convs). */
static bool claimed_before(const ts_graph *g, const int *uses, const gr_node *r,
                           int cur, int i) {
  for (int k = 0; k < r->n_inputs; k++) {
    int u = r->inputs[k];
    if (u >= 0 && u != cur && !gr_is_const(g, u) && uses[u] == 1 &&
        g->values[u].producer >= 0 && g->values[u].producer < i)
      return true;
  }
  return false;
}

/* The group fusion would build from conv i: it and the chain of
 * elementwise nodes, each the only reader of the one before, that can
 * run blocked and that no earlier node's group takes. */
static int group_of(const ts_graph *g, int i, const int *uses,
                    const int *reader, int64_t B, gr_node *nodes) {
  int n = 0, cur = g->nodes[i].outputs[0];
  nodes[n++] = g->nodes[i];
  while (n < 8 && uses[cur] == 1 && reader[cur] > i &&
         elementwise_ok(g, &g->nodes[reader[cur]], B) && !is_output(g, cur) &&
         !claimed_before(g, uses, &g->nodes[reader[cur]], cur, i)) {
    nodes[n++] = g->nodes[reader[cur]];
    cur = g->nodes[reader[cur]].outputs[0];
  }
  return n;
}

/* Conv i's group alone, NHWC and blocked: its seconds in each. */
static int conv_costs(ts_graph *g, gr_block_setup *s, int i, const int *uses,
                      const int *reader, int64_t B, double *nhwc,
                      double *blocked) {
  gr_node nodes[8];
  int n = group_of(g, i, uses, reader, B, nodes);
  int out = nodes[n - 1].outputs[0], rc = TS_OK;
  char name[300];
  snprintf(name, sizeof name, "%s (nhwc)", g->nodes[i].name);
  ts_graph *c = gr_candidate_graph(g, nodes, n, &out, 1);
  if (!c) return TS_ENOMEM;
  *nhwc = fused_seconds(s, c, name, &rc);
  if (rc) return rc;
  c = gr_candidate_graph(g, nodes, n, &out, 1);
  if (!c) return TS_ENOMEM;
  bool all[8] = {true, true, true, true, true, true, true, true};
  rc = apply_plan(c, all, B, true, NULL);
  if (rc) {
    ts_graph_free(c);
    return rc;
  }
  snprintf(name, sizeof name, "%s (%s)", g->nodes[i].name, layout_name(B));
  *blocked = fused_seconds(s, c, name, &rc);
  return rc;
}

/* A transform of NHWC shape `shape` alone (to_blocked, or back): its
 * seconds, NAN without a record. */
static double transform_seconds(gr_block_setup *s, const int64_t *shape,
                                int64_t B, bool to_blocked, bool *measured,
                                int *rc) {
  *measured = false;
  ts_graph *c = ts_graph_new("block_transform");
  if (!c) return *rc = TS_ENOMEM, NAN;
  int64_t bs[5] = {shape[0], shape[3] / B, shape[1], shape[2], B};
  int x = to_blocked ? gr_value_add(c, "x", TS_FLOAT32, 4, shape)
                     : gr_value_add(c, "x", TS_FLOAT32, 5, bs);
  int y = to_blocked ? 0 : gr_value_add(c, "y", TS_FLOAT32, 4, shape);
  rewrite p = {.g = c, .B = B};
  int made = x < 0 || y < 0 ? TS_ENOMEM
             : to_blocked   ? push_to_blocked(&p, x)
                            : push_to_nhwc(&p, x, y);
  c->inputs = ts_arena_alloc(c->arena, sizeof(int));
  c->outputs = ts_arena_alloc(c->arena, sizeof(int));
  if (made < 0 || !c->inputs || !c->outputs) {
    free(p.list.nodes);
    ts_graph_free(c);
    return *rc = TS_ENOMEM, NAN;
  }
  c->values[x].is_input = true;
  c->inputs[0] = x;
  c->n_inputs = 1;
  c->outputs[0] = to_blocked ? made : y;
  c->n_outputs = 1;
  if (gr_list_commit(c, &p.list)) {
    ts_graph_free(c);
    return *rc = TS_ENOMEM, NAN;
  }
  char name[160];
  snprintf(name, sizeof name, "%s %lldx%lldx%lldx%lld",
           to_blocked ? "to_blocked" : "to_nhwc", (long long)shape[0],
           (long long)shape[1], (long long)shape[2], (long long)shape[3]);
  double sec = fused_seconds(s, c, name, rc);
  *measured = isfinite(sec);
  if (!isfinite(sec))
    sec = 2.0 * (double)(shape[0] * shape[1] * shape[2] * shape[3]) * 4 /
          EST_BYTES_PER_S;
  return sec;
}

/* The whole graph (plan: blocked by B as planned; NULL: as it is) fused
 * as the compiler will, priced by its tasks' records: NAN when one has
 * none (its tasks join the candidates, so tuning again measures them). */
static double whole_seconds(ts_graph *g, gr_block_setup *s, const bool *plan,
                            int64_t B, const char *name, int *rc) {
  ts_graph *c =
      gr_candidate_graph(g, g->nodes, g->n_nodes, g->outputs, g->n_outputs);
  if (!c) return *rc = TS_ENOMEM, NAN;
  c->no_winograd = g->no_winograd;
  c->winograd_tile = g->winograd_tile;
  if (plan && (*rc = apply_plan(c, plan, B, false, NULL))) {
    ts_graph_free(c);
    return NAN;
  }
  return fused_seconds(s, c, name, rc);
}

/* ---- the plan ---- */

typedef struct graph_info {
  int *prod;   /* value -> producing node, -1 */
  int *uses;   /* readers per value (gr_use_counts) */
  int *reader; /* value -> its last reader */
} graph_info;

/* Whether activation v can change layout between its producer and
 * readers: 4-D float32, B dividing its channels, not a constant. */
static bool movable(const ts_graph *g, int v, int64_t B) {
  return f32_4d(g, v) && !gr_is_const(g, v) && g->values[v].shape[3] % B == 0;
}

/* Which nodes run blocked: a minimum cut (S blocked, T NHWC). gain[i]:
 * conv i's seconds saved blocked (NAN: must stay NHWC, INFINITY: must be
 * blocked); elementwise nodes that can run blocked are free; every other
 * node, and the graph's inputs and outputs, NHWC. */
static bool *solve(const ts_graph *g, const graph_info *gi, int64_t B,
                   const double *gain, const costs *c) {
  const int64_t never = INT64_MAX / 4;
  const double ps = 1e12; /* capacities in picoseconds */
  int nn = g->n_nodes, nv = g->n_values;
  int S = 0, T = 1, node0 = 2, aux0 = node0 + nn, n = aux0 + 2 * nv;
  gr_cut *cut = gr_cut_new(n);
  bool *side = ts_malloc(sizeof(bool) * (size_t)n);
  bool *plan = ts_calloc((size_t)nn + 1, sizeof *plan);
  if (!cut || !side || !plan) goto fail;
  for (int i = 0; i < nn; i++) {
    const gr_node *m = &g->nodes[i];
    if (conv_ok(g, m, B) && !isnan(gain[i])) {
      if (isinf(gain[i]))
        gr_cut_edge(cut, S, node0 + i, never);
      else if (gain[i] > 0)
        gr_cut_edge(cut, S, node0 + i, (int64_t)(gain[i] * ps));
      else
        gr_cut_edge(cut, node0 + i, T, (int64_t)(-gain[i] * ps));
    } else if (!follows(g, m, B)) {
      gr_cut_edge(cut, node0 + i, T, never);
    }
  }
  for (int v = 0; v < nv; v++) {
    if (!movable(g, v, B)) continue;
    int p = gi->prod[v] >= 0 ? node0 + gi->prod[v] : T;
    int x = aux0 + 2 * v, y = x + 1;
    /* blocked producer, an NHWC reader: to_nhwc; NHWC producer, a
     * blocked reader: to_blocked (Lawler's hyperedge, one per way); among
     * equal costs a later value is cut (an elementwise node stays in its
     * producer's group) */
    int64_t late = 1 + nn - (gi->prod[v] >= 0 ? gi->prod[v] : 0);
    gr_cut_edge(cut, p, x, (int64_t)(c->to_nhwc[v] * ps) + late);
    gr_cut_edge(cut, y, p, (int64_t)(c->to_blk[v] * ps) + late);
    if (is_output(g, v)) gr_cut_edge(cut, x, T, never);
  }
  for (int i = 0; i < nn; i++)
    for (int k = 0; k < g->nodes[i].n_inputs; k++) {
      int v = g->nodes[i].inputs[k];
      if (v < 0 || !movable(g, v, B)) continue;
      gr_cut_edge(cut, aux0 + 2 * v, node0 + i, never);
      gr_cut_edge(cut, node0 + i, aux0 + 2 * v + 1, never);
    }
  /* a node reading an activation that cannot move stays NHWC */
  for (int i = 0; i < nn; i++)
    for (int k = 0; k < g->nodes[i].n_inputs; k++) {
      int v = g->nodes[i].inputs[k];
      if (v >= 0 && !gr_is_const(g, v) && !movable(g, v, B))
        gr_cut_edge(cut, node0 + i, T, never);
    }
  if (gr_cut_solve(cut, S, T, side) < 0) goto fail;
  for (int i = 0; i < nn; i++)
    plan[i] = side[node0 + i] &&
              (conv_ok(g, &g->nodes[i], B) || follows(g, &g->nodes[i], B));
  gr_cut_free(cut);
  free(side);
  return plan;
fail:
  gr_cut_free(cut);
  free(side);
  free(plan);
  return NULL;
}

/* Where activation v's ends are under the plan: *pb its producer blocked,
 * *rb some reader blocked, *rn some reader (or the graph's output) NHWC. */
static void ends_of(const ts_graph *g, const graph_info *gi, const bool *plan,
                    int v, bool *pb, bool *rb, bool *rn) {
  *pb = gi->prod[v] >= 0 && plan[gi->prod[v]];
  *rb = false;
  *rn = is_output(g, v);
  for (int i = 0; i < g->n_nodes; i++)
    for (int k = 0; k < g->nodes[i].n_inputs; k++)
      if (g->nodes[i].inputs[k] == v) {
        if (plan[i])
          *rb = true;
        else
          *rn = true;
      }
}

/* The plan's seconds: each conv in its layout, each transform it needs. */
static double plan_seconds(const ts_graph *g, const graph_info *gi,
                           const bool *plan, const costs *c, int64_t B,
                           int *n_transforms) {
  double sum = 0;
  int nt = 0;
  for (int i = 0; i < g->n_nodes; i++)
    if (conv_ok(g, &g->nodes[i], B) && isfinite(c->nhwc[i]))
      sum += plan[i] ? c->blocked[i] : c->nhwc[i];
  for (int v = 0; v < g->n_values; v++) {
    if (!movable(g, v, B)) continue;
    bool pb, rb, rn;
    ends_of(g, gi, plan, v, &pb, &rb, &rn);
    if (pb && rn) sum += c->to_nhwc[v], nt++;
    if (!pb && rb) sum += c->to_blk[v], nt++;
  }
  if (n_transforms) *n_transforms = nt;
  return sum;
}

static void shape_text(const gr_value *v, char *buf, size_t size) {
  snprintf(buf, size, "%lldx%lldx%lldx%lld", (long long)v->shape[0],
           (long long)v->shape[1], (long long)v->shape[2],
           (long long)v->shape[3]);
}

/* Costs of every conv and transform for block size B (measured in auto
 * mode; in `blocked` mode every conv gains and transforms cost bytes). */
static int price(ts_graph *g, gr_block_setup *s, const graph_info *gi,
                 int64_t B, costs *c, double *gain) {
  int rc = TS_OK;
  for (int i = 0; i < g->n_nodes && !rc; i++) {
    gain[i] = NAN;
    if (!conv_ok(g, &g->nodes[i], B)) continue;
    if (s->mode == BLOCK_ALL) {
      gain[i] = INFINITY;
      continue;
    }
    rc = conv_costs(g, s, i, gi->uses, gi->reader, B, &c->nhwc[i],
                    &c->blocked[i]);
    if (!rc && isfinite(c->nhwc[i]) && isfinite(c->blocked[i]))
      gain[i] = c->nhwc[i] - c->blocked[i];
    else if (!rc && s->db)
      logf_(s, "%s: no record of its group %s -> NHWC", g->nodes[i].name,
            isfinite(c->nhwc[i])      ? "blocked"
            : isfinite(c->blocked[i]) ? "NHWC"
                                      : "in either layout");
  }
  /* transforms: once per shape, of the values a node that can run
   * blocked produces or reads (no other can be cut) */
  bool *near = ts_calloc((size_t)g->n_values + 1, sizeof *near);
  if (!near) return TS_ENOMEM;
  for (int i = 0; i < g->n_nodes; i++) {
    const gr_node *m = &g->nodes[i];
    if (!conv_ok(g, m, B) && !follows(g, m, B)) continue;
    for (int k = 0; k < m->n_inputs; k++)
      if (m->inputs[k] >= 0) near[m->inputs[k]] = true;
    near[m->outputs[0]] = true;
  }
  for (int v = 0; v < g->n_values && !rc; v++) {
    if (!movable(g, v, B)) continue;
    if (!near[v]) {
      c->to_blk[v] = c->to_nhwc[v] = 0; /* both ends NHWC whatever */
      continue;
    }
    int same = -1;
    for (int u = 0; u < v && same < 0; u++)
      if (near[u] && movable(g, u, B) &&
          same_shape(&g->values[u], &g->values[v]))
        same = u;
    if (same >= 0) {
      c->to_blk[v] = c->to_blk[same];
      c->to_nhwc[v] = c->to_nhwc[same];
      c->measured_blk[v] = c->measured_blk[same];
      c->measured_nhwc[v] = c->measured_nhwc[same];
      continue;
    }
    if (s->mode == BLOCK_ALL) {
      c->to_blk[v] = c->to_nhwc[v] =
          2.0 * (double)gr_value_elems(&g->values[v]) * 4 / EST_BYTES_PER_S;
      continue;
    }
    c->to_blk[v] = transform_seconds(s, g->values[v].shape, B, true,
                                     &c->measured_blk[v], &rc);
    if (!rc)
      c->to_nhwc[v] = transform_seconds(s, g->values[v].shape, B, false,
                                        &c->measured_nhwc[v], &rc);
  }
  free(near);
  return rc;
}

static void log_plan(const ts_graph *g, gr_block_setup *s, const graph_info *gi,
                     const bool *plan, const costs *c, int64_t B) {
  for (int i = 0; i < g->n_nodes; i++) {
    const gr_node *n = &g->nodes[i];
    if (!conv_ok(g, n, B)) continue;
    const char *to = plan[i] ? layout_name(B) : "NHWC";
    if (s->mode == BLOCK_ALL)
      logf_(s, "%s: %s", n->name, to);
    else if (isfinite(c->nhwc[i]) && isfinite(c->blocked[i]))
      logf_(s, "%s: NHWC %.1f us, %s %.1f us -> %s", n->name, c->nhwc[i] * 1e6,
            layout_name(B), c->blocked[i] * 1e6, to);
    else
      logf_(s, "%s: no record -> NHWC", n->name);
  }
  for (int v = 0; v < g->n_values; v++) {
    if (!movable(g, v, B)) continue;
    bool pb, rb, rn;
    ends_of(g, gi, plan, v, &pb, &rb, &rn);
    char sh[96];
    shape_text(&g->values[v], sh, sizeof sh);
    if (pb && rn)
      logf_(s, "transform %s [%s] %s -> NHWC: %.1f us (%s)", g->values[v].name,
            sh, layout_name(B), c->to_nhwc[v] * 1e6,
            c->measured_nhwc[v] ? "measured" : "estimated");
    if (!pb && rb)
      logf_(s, "transform %s [%s] NHWC -> %s: %.1f us (%s)", g->values[v].name,
            sh, layout_name(B), c->to_blk[v] * 1e6,
            c->measured_blk[v] ? "measured" : "estimated");
  }
}

/* A channels-last float32 conv with a kernel larger than 1x1 (pointwise
 * ones are blocked by the layout pass), not depthwise, and constant weights
 * larger than TS_DEFAULT_STREAMED_BYTES (the default schedule's own bound
 * for packing a streamed input at run time): its weights become [CO/B, KH,
 * KW, CI, B], B the output channels of the default schedule's register tile
 * (ts_default_conv_tile over the output's rows and columns), when B divides CO
 * at least twice. A tile of output channels then reads one contiguous run
 * rather than a strip of every (kh, kw, ci) row, which the schedule would
 * gather at run time at every call (ResNet-50's 7x7x512 3x3 conv by
 * default: 2.52 -> 1.86 ms on AVX2 from this alone, 1.49 ms with its
 * panels outermost in the default schedule; the strided one 2.81 ->
 * 1.56 ms). A grouped conv's blocks lie within one group (B the widest
 * multiple of the lanes, up to four vectors, that divides a group's output
 * channels), so a group's weights are contiguous: a wav2vec2-like
 * positional conv (768 channels in 16 groups of 48, 128 taps, 19 MiB of
 * weights) read each group's 1.2 MiB at a 3 KiB stride: 9.2 -> 2.3 ms in the
 * model. Convs that Winograd's pass rewrote are no convs any more; those the
 * block pass channel-blocked have their own weights. */
static int block_streamed_weights(ts_graph *g, bool *changed, ts_error *err) {
  int lanes = gr_target_lanes(g), regs = gr_target_registers(g);
  if (lanes < 2) return TS_OK;
  for (int i = 0; i < g->n_nodes; i++) {
    gr_node *n = &g->nodes[i];
    if (n->kind != TS_GRAPH_OP || strcmp(n->op, "Conv") ||
        !gr_node_channels_last(n) || gr_conv_weight_block(n) ||
        n->n_inputs < 2 || n->inputs[1] < 0 || n->inputs[0] < 0)
      continue;
    int64_t G = gr_attr_int(n, "group", 1);
    int w = n->inputs[1];
    const gr_value *wv = &g->values[w], *xv = &g->values[n->inputs[0]];
    if (!gr_is_const(g, w) || wv->ndim != 4 || xv->ndim != 4 ||
        !ts_dtype_eq(wv->dtype, TS_FLOAT32) ||
        !ts_dtype_eq(xv->dtype, TS_FLOAT32) ||
        wv->shape[0] * wv->shape[1] == 1 || n->n_outputs < 1 ||
        n->outputs[0] < 0 ||
        gr_value_elems(wv) * 4 <= TS_DEFAULT_STREAMED_BYTES)
      continue;
    const gr_value *yv = &g->values[n->outputs[0]];
    int64_t CO = wv->shape[3];
    if (yv->ndim != 4 || CO % lanes || G < 1 || CO % G) continue;
    int64_t B = ts_default_conv_tile(yv->shape[1], yv->shape[2], CO,
                                     wv->shape[2], lanes, regs, NULL);
    if (G > 1) { /* grouped (not depthwise): blocks within one group */
      int64_t COg = CO / G;
      if (wv->shape[2] < 2 || COg % lanes) continue;
      B = 0;
      for (int64_t b = lanes; b <= COg && b <= 4 * lanes; b += lanes)
        if (COg % b == 0) B = b;
    }
    if (B < 1 || CO % B || CO < 2 * B) continue;
    rewrite p = {.g = g, .B = B};
    int c = blocked_weights(&p, n);
    if (c < 0) return TS_ERR(err, TS_ENOMEM, "block: out of memory");
    n = &g->nodes[i];
    int *ins = gr_alloc(g, sizeof(int) * (size_t)n->n_inputs);
    if (!ins) return TS_ERR(err, TS_ENOMEM, "block: out of memory");
    memcpy(ins, n->inputs, sizeof(int) * (size_t)n->n_inputs);
    ins[1] = c;
    n->inputs = ins;
    gr_node_set_attr(
        g, n, (gr_attr){.name = "weight_block", .kind = GR_ATTR_INT, .i = B});
    *changed = true;
  }
  return TS_OK;
}

static int block_activations(ts_graph *g, ts_error *err);

/* requires: shapes known, after the layout and winograd passes;
 * maintains: the values the graph computes, its inputs and outputs;
 * breaks: node indices. */
int ts_graph_block(ts_graph *g, ts_error *err) {
  bool changed = false;
  int rc = block_activations(g, err);
  if (!rc) rc = block_streamed_weights(g, &changed, err);
  if (!rc && changed) rc = ts_graph_eliminate_dead(g, err);
  return rc;
}

static int block_activations(ts_graph *g, ts_error *err) {
  gr_block_setup *s = g->block;
  if (!s || s->mode == BLOCK_OFF || g->keep_nchw) return TS_OK;
  clear_results(s);
  double t0 = ts_now_seconds();
  gr_reindex(g);
  int nn = g->n_nodes, nv = g->n_values;
  graph_info gi = {.uses = gr_use_counts(g)};
  gi.prod = ts_malloc(sizeof(int) * (size_t)(nv + 1));
  gi.reader = ts_malloc(sizeof(int) * (size_t)(nv + 1));
  double *gain = ts_malloc(sizeof(double) * (size_t)(nn + 1));
  costs best_c = {0}, shown = {0};
  bool *best = NULL;
  int64_t best_b = 0, shown_b = 0;
  double best_s = INFINITY, base_s = 0;
  int rc = gi.uses && gi.prod && gi.reader && gain ? TS_OK : TS_ENOMEM;
  for (int v = 0; !rc && v < nv; v++) gi.prod[v] = gi.reader[v] = -1;
  for (int i = 0; !rc && i < nn; i++) {
    const gr_node *m = &g->nodes[i];
    for (int k = 0; k < m->n_outputs; k++)
      if (m->outputs[k] >= 0) gi.prod[m->outputs[k]] = i;
    for (int k = 0; k < m->n_inputs; k++)
      if (m->inputs[k] >= 0) gi.reader[m->inputs[k]] = i;
  }
  int64_t sizes[2] = {16, 8};
  int n_sizes = s->block ? 1 : 2;
  if (s->block) sizes[0] = s->block;
  if (s->mode == BLOCK_ALL) n_sizes = 1; /* 16 unless told */
  for (int b = 0; b < n_sizes && !rc; b++) {
    int64_t B = sizes[b];
    costs c;
    if ((rc = costs_alloc(&c, nn, nv))) break;
    rc = price(g, s, &gi, B, &c, gain);
    bool *plan = rc ? NULL : solve(g, &gi, B, gain, &c);
    if (!rc && !plan) rc = TS_ENOMEM;
    if (rc) {
      costs_free(&c);
      break;
    }
    bool *zero = ts_calloc((size_t)nn + 1, sizeof *zero);
    if (!zero) {
      rc = TS_ENOMEM;
      free(plan);
      costs_free(&c);
      break;
    }
    double base = plan_seconds(g, &gi, zero, &c, B, NULL);
    double sec = plan_seconds(g, &gi, plan, &c, B, NULL);
    free(zero);
    if (s->mode == BLOCK_AUTO) {
      int faster = 0, weighed = 0;
      for (int i = 0; i < nn; i++)
        if (conv_ok(g, &g->nodes[i], B) && isfinite(gain[i])) {
          weighed++;
          faster += gain[i] > 0;
        }
      logf_(s,
            "block %lld: %d of %d convs weighed are faster blocked alone; "
            "all NHWC %.1f us, the plan %.1f us",
            (long long)B, faster, weighed, base * 1e6, sec * 1e6);
    }
    bool any = false; /* a conv blocked */
    for (int i = 0; i < nn; i++)
      any = any || (plan[i] && !strcmp(g->nodes[i].op, "Conv"));
    if (any && (s->mode == BLOCK_ALL || sec < base) && sec - base < best_s) {
      free(best);
      costs_free(&best_c);
      best = plan, best_c = c, best_b = B, best_s = sec - base;
      base_s = base;
    } else if (!shown.nhwc && s->mode == BLOCK_AUTO) {
      shown = c, shown_b = B; /* each conv's figures, for the log */
      free(plan);
    } else {
      free(plan);
      costs_free(&c);
    }
  }
  if (!rc && !best && shown.nhwc) {
    bool *zero = ts_calloc((size_t)nn + 1, sizeof *zero);
    if (zero) log_plan(g, s, &gi, zero, &shown, shown_b);
    free(zero);
  }
  costs_free(&shown);
  if (!rc && best && s->mode == BLOCK_AUTO) {
    /* the cut weighed each conv's group alone; the compiler runs the
     * groups fusion makes of the whole graph: the plan stands only if
     * those tasks, priced, beat the NHWC graph's */
    double with = whole_seconds(g, s, best, best_b, "the plan", &rc);
    double without = rc ? NAN : whole_seconds(g, s, NULL, 0, "NHWC", &rc);
    log_plan(g, s, &gi, best, &best_c, best_b);
    if (!rc && (!isfinite(with) || !isfinite(without))) {
      logf_(s, "the plan's fused tasks are not all in the database: NHWC kept "
               "(tune --model --layout auto with this database measures them)");
      free(best);
      best = NULL;
    } else if (!rc) {
      logf_(s,
            "the whole model by its fused tasks: NHWC %.1f us, the plan "
            "%.1f us",
            without * 1e6, with * 1e6);
      if (with >= without) {
        free(best);
        best = NULL;
      } else {
        base_s = without, best_s = with - without;
      }
    }
  }
  if (!rc && best) {
    if (s->mode != BLOCK_AUTO) log_plan(g, s, &gi, best, &best_c, best_b);
    int convs = 0, blocked = 0, nt = 0;
    for (int i = 0; i < nn; i++)
      if (conv_ok(g, &g->nodes[i], best_b)) {
        convs++;
        blocked += best[i];
      }
    plan_seconds(g, &gi, best, &best_c, best_b, &nt);
    s->rep.convs = convs;
    s->rep.blocked = blocked;
    s->rep.block = (int)best_b;
    s->rep.transforms = nt;
    bool weighed = s->mode == BLOCK_AUTO; /* else: transforms estimated */
    s->rep.before_us = weighed ? base_s * 1e6 : NAN;
    s->rep.after_us = weighed ? (base_s + best_s) * 1e6 : NAN;
    rc = apply_plan(g, best, best_b, false, NULL);
    if (!rc) rc = ts_graph_eliminate_dead(g, err);
  } else if (!rc) {
    logf_(s, "nothing blocked%s",
          s->mode == BLOCK_AUTO ? ": no plan beats NHWC by the database" : "");
  }
  free(best);
  costs_free(&best_c);
  free(gi.uses), free(gi.prod), free(gi.reader), free(gain);
  s->rep.ms = (ts_now_seconds() - t0) * 1e3;
  if (rc == TS_ENOMEM) return TS_ERR(err, TS_ENOMEM, "block: out of memory");
  return rc;
}
