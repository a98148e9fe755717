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
 * The mutators and the corrections are in pet_mutate.c.
 *
 * After applying, re-layout pairs cancel: batch-to-space, then elementwise
 * operators (relu; constants that broadcast along the channels only), then
 * space-to-batch of the same factors becomes the elementwise operators in
 * the batch layout. A chain of dilated convs (CSRNet's back end) then runs
 * in the batch layout from its first conv to its last.
 *
 * The estimate: FLOPs at one rate, Winograd's convs at the share of theirs
 * its tile size leaves (gr_winograd_flop_share), data movement at one
 * bandwidth, what folds at compile time free. With a database, the top K
 * candidates are built alone and weighed by their tasks' latencies (oneDNN's
 * where it was measured faster, as compile's dispatch decides).
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
  gr_task_set alts;
};

void gr_pet_setup_free(gr_pet_setup *p) {
  if (!p) return;
  gr_task_set_free(&p->alts);
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
    flops *= gr_winograd_flop_share(g, n);
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

ts_graph *gr_candidate_graph(const ts_graph *g, const gr_node *nodes, int n,
                             const int *outs, int n_outs) {
  ts_graph *c = ts_graph_new("pet_candidate");
  int *map = ts_malloc(sizeof(int) * (size_t)g->n_values);
  int *ins = ts_malloc(sizeof(int) * (size_t)(g->n_values + 1));
  int n_ins = 0;
  bool ok = c && map && ins;
  if (ok) {
    c->no_winograd = g->no_winograd;
    c->winograd_tile = g->winograd_tile;
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

/* The latency of task t on the target: its best record's, or oneDNN's
 * when the task has a vendor call that the database measured faster (as
 * `compile --dispatch best` decides). NAN when it has no record. */
double gr_task_seconds(struct ts_db *db, const char *target,
                       const ts_graph_task *t) {
  ts_db_record rec;
  memset(&rec, 0, sizeof rec);
  if (!db || !target ||
      ts_db_best_by_func(db, t->func, target, &rec) != TS_OK) {
    ts_db_record_clear(&rec);
    return NAN;
  }
  double sec = ts_db_record_seconds(&rec);
  ts_db_record_clear(&rec);
  ts_db_baseline use;
  if (!t->vendor || !gr_onednn_level(db, t->func, target, &use)) return sec;
  double vendor = NAN;
  if (use.side_rounds > 0 && isfinite(use.side_ratio))
    vendor = sec * use.side_ratio;
  else if (use.gflops > 0 && t->flops > 0)
    vendor = t->flops / (use.gflops * 1e9);
  return vendor < sec ? vendor : sec;
}

/* The candidate's tasks (built alone: what folds is folded, winograd and
 * fusion run on it), added to the alternatives under `name`; *seconds
 * their calls times their latency on the target (gr_task_seconds), NAN when
 * there is no database or a task has no record. */
static int candidate_cost(ts_graph *g, gr_pet_setup *s, const gr_node *nodes,
                          int n, const int *outs, int n_outs, const char *name,
                          double *seconds, ts_error *err) {
  *seconds = NAN;
  ts_graph *c = gr_candidate_graph(g, nodes, n, outs, n_outs);
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
    rc = gr_task_set_add(&s->alts, &t[i], name);
    sum += t[i].count * gr_task_seconds(s->o.db, s->target, &t[i]);
  }
  free(t);
  ts_graph_free(c);
  if (rc) return TS_ERR(err, rc, "pet: out of memory");
  *seconds = sum;
  return TS_OK;
}

int ts_graph_pet_candidate_tasks(const ts_graph *g, const ts_graph_task **tasks,
                                 int *n) {
  *tasks = g->pet ? g->pet->alts.tasks : NULL;
  *n = g->pet ? g->pet->alts.n : 0;
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
    s->kinds[0] = "dilated_to_batch", s->fns[0] = pet_mut_dilated;
    s->kinds[1] = "split_rows", s->fns[1] = pet_mut_split_rows;
    s->kinds[2] = "pad_same", s->fns[2] = pet_mut_pad_same;
    s->kinds[3] = "split_kernel", s->fns[3] = pet_mut_split_kernel;
    s->kinds[4] = "stride_to_channels";
    s->fns[4] = pet_mut_stride_to_channels;
    s->n_mut = 5;
    s->sub_kinds[0] = "batch_shared_input", s->sub_fns[0] = pet_mut_batch;
    s->sub_kinds[1] = "concat_shared_weights", s->sub_fns[1] = pet_mut_concat;
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
    rc = c ? pet_correct(g, c, m, &res[k], one, sizeof one, err) : 0;
    m->outs[k] = m->out;
    size_t len = strlen(note);
    if (rc > 0 && len < sizeof note &&
        snprintf(note + len, sizeof note - len, "%s%s", len ? ";" : "", one) <
            0)
      note[len] = 0;
  }
  m->out = m->outs[0];
  for (int k = 0; k < sub->n_outs; k++) pet_check_result_free(&res[k]);
  if (rc < 0) return rc;
  pet_check_result again[PET_MAX_OUTS];
  int64_t still = 0;
  if (rc > 0) {
    char line[600];
    if (snprintf(line, sizeof line, "%s; corrected%s", what, note) < 0)
      line[0] = 0;
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

/* Whether a mutant's kind is split_kernel alone or composed with itself. */
static bool kernel_split_only(const char *kind) {
  static const char sk[] = "split_kernel";
  for (const char *p = kind;; p += sizeof sk) {
    if (strncmp(p, sk, sizeof sk - 1)) return false;
    if (!p[sizeof sk - 1]) return true;
    if (p[sizeof sk - 1] != '+') return false;
  }
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
          /* a kernel split composes only with kernel splits: it changes
           * no geometry the other mutators look at, so with them it is
           * their mutant again, dearer (and the corrector's bands are
           * those of the unsplit conv) */
          if (kernel_split_only(ms[a]->kind) !=
              !strcmp(s->kinds[k], "split_kernel"))
            continue;
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
  if (s->o.only) { /* a kind no mutator has is a typo, not "none apply" */
    bool known = false;
    for (int k = 0; k < s->n_mut; k++) known |= !strcmp(s->kinds[k], s->o.only);
    for (int k = 0; k < s->n_sub_mut; k++)
      known |= !strcmp(s->sub_kinds[k], s->o.only);
    if (!known) {
      char kinds[256] = "";
      for (int k = 0; k < s->n_mut + s->n_sub_mut; k++) {
        const char *kind =
            k < s->n_mut ? s->kinds[k] : s->sub_kinds[k - s->n_mut];
        size_t len = strlen(kinds);
        snprintf(kinds + len, sizeof kinds - len, "%s%s", k ? ", " : "", kind);
      }
      return TS_ERR(err, TS_EINVAL, "pet: no mutator of kind '%s' (kinds: %s)",
                    s->o.only, kinds);
    }
  }
  double t0 = ts_now_seconds();
  memset(&s->r, 0, sizeof s->r);
  gr_task_set_clear(&s->alts);
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
