/*
 * plan.c — static memory planning: every intermediate value of a graph gets
 * a fixed byte offset in one arena, computed once at compile time (Glow's
 * and TFLite's scheme).
 *
 * 1. Storage groups. Values that share storage are one group: the output of
 *    a view op (Reshape and the other ops the reference kernels run as a
 *    plain copy) joins its input's group; the output of a call_tir node
 *    joins the group of an input that dies at the node when the called
 *    function is provably elementwise in that input (in-place). A group
 *    anchored at a graph input or a constant stays where the caller or the
 *    library keeps it; a group of intermediates that a view turns into a
 *    graph output moves into the output's buffer.
 * 2. Liveness over the topological node order: a group lives from the
 *    first node defining one of its values to the last node using one.
 * 3. Offsets: the groups that stay in the arena are placed largest first,
 *    each at the lowest offset where it overlaps no placed group that lives
 *    at the same time (TFLite's "greedy by size"); three more orders (by
 *    first definition, longest-lived first, largest bytes x lifetime
 *    first) are tried too and the smallest arena kept.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define ALIGN 64

int ts_graph_n_values(const ts_graph *g) { return g->n_values; }

void ts_graph_plan_clear(ts_graph_plan *p) {
  if (!p) return;
  free(p->offset);
  free(p->alias_of);
  memset(p, 0, sizeof *p);
}

static int64_t align_up(int64_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

static int64_t value_bytes(const gr_value *v) {
  int64_t e = gr_value_elems(v);
  return e < 0 ? -1 : e * (int64_t)ts_dtype_elem_bytes(v->dtype);
}

/* The graph ops whose output is the input's bytes unchanged (the reference
 * kernels run them as one memcpy). */
static bool is_view_node(const ts_graph *g, const gr_node *n) {
  if (n->kind != TS_GRAPH_OP || n->n_inputs < 1 || n->n_outputs < 1 ||
      n->inputs[0] < 0)
    return false;
  const char *op = n->op;
  const gr_value *in = &g->values[n->inputs[0]];
  const gr_value *out = &g->values[n->outputs[0]];
  bool view = !strcmp(op, "Reshape") || !strcmp(op, "Flatten") ||
              !strcmp(op, "Squeeze") || !strcmp(op, "Unsqueeze") ||
              !strcmp(op, "Identity") ||
              (!strcmp(op, "Dropout") && ts_dtype_eq(in->dtype, out->dtype));
  return view && value_bytes(in) == value_bytes(out);
}

/* ---- the elementwise check on a called function ---- */

/* The constant a unit-extent iter var of block b always has, if e is one. */
static bool unit_iter_value(const ts_block *b, const ts_expr *e, int64_t *v) {
  if (!b || ts_expr_kind_of(e) != TS_EXPR_VAR) return false;
  for (int i = 0; i < ts_block_n_iters(b); i++) {
    if (ts_block_iter_var(b, i) != e) continue;
    ts_range r = ts_block_iter_dom(b, i);
    int64_t ext;
    return ts_expr_is_const_int(r.extent, &ext) && ext == 1 &&
           ts_expr_is_const_int(r.min, v);
  }
  return false;
}

/* Whether index expressions a and b are equal inside block b: structurally
 * (same vars, same affine arithmetic), with an iter var of a unit domain
 * equal to its one value (a load p[0, j] matches a store y[vi, j] with vi
 * in range(1)). */
static bool expr_same(const ts_block *blk, const ts_expr *a, const ts_expr *b) {
  if (a == b) return true;
  if (!a || !b) return false;
  int64_t va, vb;
  bool ca = ts_expr_is_const_int(a, &va) || unit_iter_value(blk, a, &va);
  bool cb = ts_expr_is_const_int(b, &vb) || unit_iter_value(blk, b, &vb);
  if (ca || cb) return ca && cb && va == vb;
  ts_expr_kind k = ts_expr_kind_of(a);
  if (k != ts_expr_kind_of(b) ||
      !ts_dtype_eq(ts_expr_dtype(a), ts_expr_dtype(b)))
    return false;
  if (k == TS_EXPR_VAR) return false; /* distinct vars (a != b) */
  if (k != TS_EXPR_ADD && k != TS_EXPR_SUB && k != TS_EXPR_MUL &&
      k != TS_EXPR_FLOORDIV && k != TS_EXPR_FLOORMOD && k != TS_EXPR_DIV &&
      k != TS_EXPR_MOD && k != TS_EXPR_MIN && k != TS_EXPR_MAX)
    return false; /* index expressions are affine arithmetic; refuse others */
  int n = ts_expr_n_operands(a);
  if (n != ts_expr_n_operands(b)) return false;
  for (int i = 0; i < n; i++)
    if (!expr_same(blk, ts_expr_operand(a, i), ts_expr_operand(b, i)))
      return false;
  return true;
}

typedef struct ew_check {
  const ts_buffer *in, *out;
  bool ok;
  int out_stores;           /* stores to `out` in the whole function */
  ts_block *stack[64];      /* the blocks around the current point */
  int depth;                /* entries of stack (deeper nests: refused) */
  ts_block *block;          /* the innermost block around the current point */
  ts_block *store_block;    /* the block holding the store to `out` */
  const ts_stmt *store;     /* that store */
  const ts_stmt *cur_store; /* the store whose value is being visited */
  int n_in_loads;
} ew_check;

static void ew_expr(void *ctx, ts_expr *e) {
  ew_check *c = ctx;
  ts_expr_kind k = ts_expr_kind_of(e);
  if (k == TS_EXPR_ADDRESS_OF) {
    const ts_buffer *b = ts_expr_buffer(e);
    if (b == c->in || b == c->out) c->ok = false;
  } else if (k == TS_EXPR_LOAD) {
    const ts_buffer *b = ts_expr_buffer(e);
    if (b == c->out) c->ok = false; /* the output read back */
    if (b != c->in) return;
    c->n_in_loads++;
    /* only inside the value of a store to `out`, at its indices */
    const ts_stmt *st = c->cur_store;
    if (!st || ts_store_buffer(st) != c->out) {
      c->ok = false;
      return;
    }
    int n = ts_store_n_indices(st);
    if (ts_expr_n_operands(e) != n) {
      c->ok = false;
      return;
    }
    for (int i = 0; i < n; i++)
      if (!expr_same(c->block, ts_expr_operand(e, i), ts_store_index(st, i)))
        c->ok = false;
  }
}

static void ew_visit_expr(void *ctx, ts_expr *e) {
  ts_expr_walk(e, ew_expr, ctx);
}

static bool ew_enter(void *ctx, ts_stmt *s) {
  ew_check *c = ctx;
  switch (ts_stmt_kind_of(s)) {
  case TS_STMT_STORE: {
    ts_buffer *b = ts_store_buffer(s);
    if (b == c->in) c->ok = false; /* the input written */
    for (int i = 0; i < ts_store_n_indices(s); i++)
      ew_visit_expr(c, ts_store_index(s, i));
    if (b == c->out) {
      c->out_stores++;
      c->store_block = c->block;
      c->store = s;
    }
    c->cur_store = s;
    ew_visit_expr(c, ts_store_value(s));
    c->cur_store = NULL;
    return false; /* expressions visited here */
  }
  case TS_STMT_BLOCK_REALIZE: {
    if (c->depth == 64) {
      c->ok = false;
      return false;
    }
    c->block = c->stack[c->depth++] = ts_realize_block(s);
    return true;
  }
  default: return true;
  }
}

static void ew_leave(void *ctx, ts_stmt *s) {
  ew_check *c = ctx;
  if (ts_stmt_kind_of(s) != TS_STMT_BLOCK_REALIZE) return;
  c->depth--;
  c->block = c->depth > 0 ? c->stack[c->depth - 1] : NULL;
}

/* Whether the block's body is exactly `store`, its iter vars are spatial,
 * it has no init, and the store's indices are its iter vars in order, each
 * covering the buffer's dimension from 0 (so each element of the output is
 * written exactly once by one block instance). */
static bool block_is_pointwise(const ts_block *b, const ts_stmt *store,
                               const ts_buffer *out) {
  if (!b || ts_block_init(b) || ts_block_body(b) != store) return false;
  int n = ts_store_n_indices(store);
  if (n != ts_buffer_ndim(out) || n != ts_block_n_iters(b)) return false;
  for (int i = 0; i < n; i++) {
    if (ts_block_iter_kind(b, i) != TS_ITER_SPATIAL) return false;
    if (ts_store_index(store, i) != ts_block_iter_var(b, i)) return false;
    ts_range r = ts_block_iter_dom(b, i);
    int64_t lo, ext;
    if (!ts_expr_is_const_int(r.min, &lo) ||
        !ts_expr_is_const_int(r.extent, &ext) || lo != 0 ||
        ext != ts_buffer_dim(out, i))
      return false;
  }
  return true;
}

/* Whether f may write parameter `out_param` into the storage of parameter
 * `in_param`: both have the same shape, dtype and default strides; the
 * output is stored by one statement, the body of a pointwise block; and
 * every access of the input is a load inside that store's value at exactly
 * the store's indices. Conservative: anything else is refused. */
static bool func_elementwise_in(const ts_func *f, int in_param, int out_param) {
  if (in_param >= ts_func_n_params(f) || out_param >= ts_func_n_params(f))
    return false;
  const ts_buffer *in = ts_func_param(f, in_param);
  const ts_buffer *out = ts_func_param(f, out_param);
  if (!ts_dtype_eq(ts_buffer_dtype(in), ts_buffer_dtype(out)) ||
      ts_buffer_ndim(in) != ts_buffer_ndim(out))
    return false;
  for (int d = 0; d < ts_buffer_ndim(in); d++)
    if (ts_buffer_dim(in, d) != ts_buffer_dim(out, d) ||
        ts_buffer_stride(in, d) != ts_buffer_stride(out, d))
      return false;
  for (int p = 0; p < ts_func_n_params(f); p++) /* passed twice */
    if (p != in_param && p != out_param &&
        (ts_func_param(f, p) == in || ts_func_param(f, p) == out))
      return false;
  ew_check c = {.in = in, .out = out, .ok = true};
  ts_visitor v = {.enter_stmt = ew_enter,
                  .leave_stmt = ew_leave,
                  .visit_expr = ew_visit_expr,
                  .ctx = &c};
  ts_stmt_walk(ts_func_body(f), &v);
  if (!c.ok || c.out_stores != 1 || c.n_in_loads < 1) return false;
  return block_is_pointwise(c.store_block, c.store, out);
}

/* ---- the plan ---- */

typedef struct group {
  int anchor;      /* the value owning the storage */
  int kind;        /* G_ARENA, G_INPUT, G_CONST, G_OUTPUT */
  int first, last; /* node interval (inclusive) */
  int64_t bytes;
  int64_t offset;
} group;

enum { G_ARENA, G_INPUT, G_CONST, G_OUTPUT };

typedef struct planner {
  const ts_graph *g;
  int *grp;  /* value -> group index, -1 none */
  int *copy; /* graph output -> the value it copies from, else -1 */
  group *groups;
  int n_groups;
  int *last_use; /* value -> last node using it (n_nodes for outputs) */
  bool *is_output;
} planner;

static int new_group(planner *p, int anchor, int kind, int first) {
  group *gr = &p->groups[p->n_groups];
  memset(gr, 0, sizeof *gr);
  gr->anchor = anchor;
  gr->kind = kind;
  gr->first = first;
  gr->last = first;
  gr->offset = -1;
  p->grp[anchor] = p->n_groups;
  return p->n_groups++;
}

/* Adds value v to group gi. */
static void join(planner *p, int v, int gi) { p->grp[v] = gi; }

/* The group a view of value v reads: v's group, or for a graph output that
 * copies another value, that value's group. */
static int source_group(planner *p, int v) {
  if (p->copy[v] >= 0) v = p->copy[v];
  return p->grp[v];
}

/* Whether every value of group gi is dead after node i. */
static bool group_dies_at(const planner *p, int gi, int i) {
  for (int v = 0; v < p->g->n_values; v++)
    if (p->grp[v] == gi && p->last_use[v] > i) return false;
  return true;
}

typedef struct placed {
  int64_t off, end;
} placed;

static int cmp_placed(const void *a, const void *b) {
  const placed *x = a, *y = b;
  return x->off < y->off ? -1 : x->off > y->off;
}

static const group *g_sort_groups; /* qsort has no context argument */

static int cmp_size_desc(const void *a, const void *b) {
  const group *x = &g_sort_groups[*(const int *)a];
  const group *y = &g_sort_groups[*(const int *)b];
  if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
  if (x->first != y->first) return x->first < y->first ? -1 : 1;
  return *(const int *)a - *(const int *)b;
}

static int cmp_first(const void *a, const void *b) {
  const group *x = &g_sort_groups[*(const int *)a];
  const group *y = &g_sort_groups[*(const int *)b];
  if (x->first != y->first) return x->first < y->first ? -1 : 1;
  if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
  return *(const int *)a - *(const int *)b;
}

/* Longest-lived first, then the larger: long-lived values fixed first
 * leave contiguous room for the short-lived ones. */
static int cmp_span_desc(const void *a, const void *b) {
  const group *x = &g_sort_groups[*(const int *)a];
  const group *y = &g_sort_groups[*(const int *)b];
  int sx = x->last - x->first, sy = y->last - y->first;
  if (sx != sy) return sx > sy ? -1 : 1;
  return cmp_size_desc(a, b);
}

/* The larger area (bytes times lifetime) first. */
static int cmp_area_desc(const void *a, const void *b) {
  const group *x = &g_sort_groups[*(const int *)a];
  const group *y = &g_sort_groups[*(const int *)b];
  double ax = (double)x->bytes * (x->last - x->first + 1),
         ay = (double)y->bytes * (y->last - y->first + 1);
  if (ax != ay) return ax > ay ? -1 : 1;
  return cmp_size_desc(a, b);
}

/* Places the arena groups in the given order, each at the lowest offset
 * (best fitting gap first) clear of every placed group whose interval
 * overlaps. Writes offsets into off[] and returns the arena's size, or -1
 * when memory runs out. */
static int64_t place(const group *groups, const int *order, int n,
                     int64_t *off) {
  placed *buf = ts_malloc(((size_t)n + 1) * sizeof *buf);
  int *done = ts_malloc(((size_t)n + 1) * sizeof *done);
  if (!buf || !done) {
    free(buf);
    free(done);
    return -1;
  }
  int n_done = 0;
  int64_t arena = 0;
  for (int k = 0; k < n; k++) {
    const group *gr = &groups[order[k]];
    int m = 0;
    for (int j = 0; j < n_done; j++) {
      const group *o = &groups[done[j]];
      if (o->first <= gr->last && gr->first <= o->last)
        buf[m++] = (placed){off[done[j]], off[done[j]] + o->bytes};
    }
    qsort(buf, (size_t)m, sizeof *buf, cmp_placed);
    /* the smallest gap that fits; else the end */
    int64_t best = -1, best_gap = INT64_MAX, cur = 0;
    for (int j = 0; j < m; j++) {
      if (buf[j].off > cur) {
        int64_t gap = buf[j].off - cur;
        if (gap >= gr->bytes && gap < best_gap) {
          best = cur;
          best_gap = gap;
        }
      }
      if (buf[j].end > cur) cur = align_up(buf[j].end);
    }
    if (best < 0) best = cur;
    off[order[k]] = best;
    if (best + gr->bytes > arena) arena = best + gr->bytes;
    done[n_done++] = order[k];
  }
  free(buf);
  free(done);
  return align_up(arena);
}

int ts_graph_plan_memory(const ts_graph *g, ts_graph_plan *out, ts_error *err) {
  if (!g || !out) return TS_ERR(err, TS_EINVAL, "plan: NULL argument");
  memset(out, 0, sizeof *out);
  int nv = g->n_values, nn = g->n_nodes;
  planner p = {.g = g};
  p.grp = ts_malloc(((size_t)nv + 1) * sizeof *p.grp);
  p.copy = ts_malloc(((size_t)nv + 1) * sizeof *p.copy);
  p.last_use = ts_malloc(((size_t)nv + 1) * sizeof *p.last_use);
  p.is_output = ts_calloc((size_t)nv + 1, sizeof *p.is_output);
  p.groups = ts_malloc(((size_t)nv + 1) * sizeof *p.groups);
  int64_t *off = NULL;
  int *order = NULL;
  int rc = TS_OK;
  if (!p.grp || !p.copy || !p.last_use || !p.is_output || !p.groups) {
    rc = TS_ERR(err, TS_ENOMEM, "plan: out of memory");
    goto done;
  }
  for (int v = 0; v < nv; v++) {
    p.grp[v] = -1;
    p.copy[v] = -1;
    p.last_use[v] = -1;
  }
  for (int i = 0; i < g->n_outputs; i++) p.is_output[g->outputs[i]] = true;
  /* shapes must be known for everything that needs storage */
  for (int i = 0; i < nn; i++) {
    const gr_node *n = &g->nodes[i];
    for (int k = 0; k < n->n_outputs; k++) {
      int v = n->outputs[k];
      p.last_use[v] = i; /* defined here: lives at least at this node */
      if (value_bytes(&g->values[v]) < 0) {
        rc = TS_ERR(err, TS_EINVAL,
                    "plan: value '%s' (output of node '%s') has an unknown "
                    "shape; run shape inference first",
                    g->values[v].name, n->name);
        goto done;
      }
    }
    for (int k = 0; k < n->n_inputs; k++)
      if (n->inputs[k] >= 0) p.last_use[n->inputs[k]] = i;
  }
  for (int i = 0; i < g->n_outputs; i++) {
    int v = g->outputs[i];
    p.last_use[v] = nn;
    if (value_bytes(&g->values[v]) < 0) {
      rc =
          TS_ERR(err, TS_EINVAL, "plan: graph output '%s' has an unknown shape",
                 g->values[v].name);
      goto done;
    }
  }
  /* groups of the values that exist before the first node */
  for (int i = 0; i < g->n_inputs; i++) {
    int v = g->inputs[i];
    if (p.grp[v] < 0) new_group(&p, v, G_INPUT, -1);
  }
  for (int v = 0; v < nv; v++)
    if (g->values[v].const_off >= 0 && p.grp[v] < 0)
      new_group(&p, v, G_CONST, -1);
  /* the graph outputs that are inputs or constants are their own copies */
  for (int i = 0; i < nn; i++) {
    const gr_node *n = &g->nodes[i];
    bool used[64] = {false};
    for (int k = 0; k < n->n_outputs; k++) {
      int v = n->outputs[k];
      int gi = -1;
      if (k == 0 && is_view_node(g, n)) {
        int src = source_group(&p, n->inputs[0]);
        if (src >= 0) {
          group *sg = &p.groups[src];
          if (!p.is_output[v])
            gi = src; /* a view of whatever the source is */
          else if (sg->kind == G_ARENA) {
            sg->kind = G_OUTPUT; /* the intermediates move into the output */
            sg->anchor = v;
            gi = src;
          } else {
            /* a graph output viewing an input, a constant or another
             * output: it has its own buffer and copies */
            int c = sg->anchor;
            if (p.copy[c] >= 0) c = p.copy[c];
            p.copy[v] = c;
          }
        }
      } else if (n->kind == TS_GRAPH_CALL && n->func && !p.is_output[v]) {
        /* in place: an input that dies here, in an arena group, equal
         * bytes, passed once, and the function elementwise in it */
        for (int j = 0; j < n->n_inputs && j < 64 && gi < 0; j++) {
          int in = n->inputs[j];
          if (in < 0 || used[j]) continue;
          int ig = p.grp[in];
          if (ig < 0 || p.groups[ig].kind != G_ARENA) continue;
          if (value_bytes(&g->values[in]) != value_bytes(&g->values[v]))
            continue;
          bool twice = false;
          for (int j2 = 0; j2 < n->n_inputs; j2++)
            if (j2 != j && n->inputs[j2] >= 0 && p.grp[n->inputs[j2]] == ig)
              twice = true;
          if (twice || !group_dies_at(&p, ig, i)) continue;
          if (!func_elementwise_in(n->func, j, n->n_inputs + k)) continue;
          used[j] = true;
          gi = ig;
        }
      }
      if (gi >= 0)
        join(&p, v, gi);
      else
        new_group(&p, v, p.is_output[v] ? G_OUTPUT : G_ARENA, i);
    }
  }
  /* intervals and sizes */
  for (int v = 0; v < nv; v++) {
    int gi = p.grp[v];
    if (gi < 0) continue;
    group *gr = &p.groups[gi];
    int def = g->values[v].producer;
    if (def >= 0 && def < gr->first) gr->first = def;
    if (p.last_use[v] > gr->last) gr->last = p.last_use[v];
    int64_t b = value_bytes(&g->values[v]);
    if (b > gr->bytes) gr->bytes = b;
  }
  out->n_values = nv;
  out->offset = ts_malloc(((size_t)nv + 1) * sizeof *out->offset);
  out->alias_of = ts_malloc(((size_t)nv + 1) * sizeof *out->alias_of);
  off = ts_malloc(((size_t)p.n_groups + 1) * sizeof *off);
  order = ts_malloc(((size_t)p.n_groups + 1) * sizeof *order);
  int64_t *off2 = ts_malloc(((size_t)p.n_groups + 1) * sizeof *off2);
  if (!out->offset || !out->alias_of || !off || !order || !off2) {
    free(off2);
    rc = TS_ERR(err, TS_ENOMEM, "plan: out of memory");
    goto done;
  }
  int n_arena = 0;
  for (int gi = 0; gi < p.n_groups; gi++) {
    off[gi] = off2[gi] = -1;
    if (p.groups[gi].kind != G_ARENA) continue;
    p.groups[gi].bytes = align_up(p.groups[gi].bytes);
    if (p.groups[gi].bytes == 0) p.groups[gi].bytes = ALIGN;
    order[n_arena++] = gi;
  }
  /* greedy placement in four orders; the smallest arena wins */
  g_sort_groups = p.groups;
  int (*const orders[])(const void *, const void *) = {
      cmp_size_desc, cmp_first, cmp_span_desc, cmp_area_desc};
  int64_t a1 = -1;
  for (size_t k = 0; k < sizeof orders / sizeof orders[0]; k++) {
    qsort(order, (size_t)n_arena, sizeof *order, orders[k]);
    int64_t a2 = place(p.groups, order, n_arena, off2);
    if (a2 < 0) {
      free(off2);
      rc = TS_ERR(err, TS_ENOMEM, "plan: out of memory");
      goto done;
    }
    if (a1 < 0 || a2 < a1) {
      memcpy(off, off2, ((size_t)p.n_groups + 1) * sizeof *off);
      a1 = a2;
    }
  }
  free(off2);
  out->arena_bytes = a1;
  /* the lower bound: the most arena bytes live at one node */
  for (int i = 0; i < nn; i++) {
    int64_t live = 0;
    for (int k = 0; k < n_arena; k++) {
      const group *gr = &p.groups[order[k]];
      if (gr->first <= i && i <= gr->last) live += gr->bytes;
    }
    if (live > out->lower_bound_bytes) out->lower_bound_bytes = live;
  }
  for (int i = 0; i < nn; i++)
    for (int k = 0; k < g->nodes[i].n_outputs; k++) {
      int v = g->nodes[i].outputs[k];
      if (!p.is_output[v])
        out->total_bytes += align_up(value_bytes(&g->values[v]));
    }
  for (int v = 0; v < nv; v++) {
    out->offset[v] = -1;
    out->alias_of[v] = -1;
    int gi = p.grp[v];
    if (gi < 0) continue;
    const group *gr = &p.groups[gi];
    if (p.copy[v] >= 0)
      out->alias_of[v] = p.copy[v];
    else if (gr->anchor != v)
      out->alias_of[v] = gr->anchor;
    else if (gr->kind == G_ARENA)
      out->offset[v] = off[gi];
  }
done:
  if (rc) ts_graph_plan_clear(out);
  free(off);
  free(order);
  free(p.grp);
  free(p.copy);
  free(p.last_use);
  free(p.is_output);
  free(p.groups);
  return rc;
}
