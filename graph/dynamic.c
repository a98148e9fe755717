/*
 * dynamic.c — a model with a dynamic dimension compiled for a padded size.
 *
 * A model whose inputs have one named dynamic dimension (seq, batch) is
 * compiled once per bucket size B: the graph is imported at B, and it then
 * serves every size n <= B when its inputs are padded to B along the
 * symbol and its outputs cut back to n. Positions past n hold padding, and
 * each operator that mixes positions along the symbol (a contraction over
 * it, a softmax or a reduction along it) gets a PadMask in front: the
 * padded positions become the operator's neutral value (0 for a sum, the
 * lowest float for a max or a softmax), read from a run-time length input.
 * A ReduceMean over the symbol is scaled by B / n. Every other operator
 * computes each position from the same positions of its inputs, so
 * positions < n come out as they would at size n, exactly.
 *
 * What cannot be served that way is refused, naming the node: a dimension
 * that is an expression of the symbol (12*seq, seq + 1), a convolution,
 * concatenation or normalization along it, a Shape left at run time, a
 * constant whose data (not only a shape) depends on the size. Which
 * dimensions are the symbol comes from the symbolic import (symbolic.c);
 * the constants are compared between the sizes 5, 6 and B.
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct dyn {
  ts_graph *g;
  const char *sym;
  int64_t size;                          /* the bucket */
  int len;                               /* the length input, or -1 */
  int scale;                             /* B / n (for ReduceMean), or -1 */
  int pos[TS_MAX_DIMS + 1][TS_MAX_DIMS]; /* positions by rank, axis */
  /* by value id: the axes along which the value's padding is exactly 0
   * (a softmax's output along its masked axis) */
  unsigned *zero_pad;
  int n_zero_pad;
  ts_error *err;
} dyn;

/* Whether dimension d of v is the symbol itself. */
static bool is_sym(const gr_value *v, int d, const char *sym) {
  return v->sym && d >= 0 && d < v->ndim && v->sym[d] &&
         !strcmp(v->sym[d], sym);
}

static unsigned sym_axes(const ts_graph *g, int v, const char *sym) {
  unsigned m = 0;
  if (v < 0) return 0;
  for (int d = 0; d < g->values[v].ndim; d++)
    if (is_sym(&g->values[v], d, sym)) m |= 1u << d;
  return m;
}

static int refuse(dyn *st, const gr_node *n, const char *why) {
  return TS_ERR(st->err, TS_EUNSUPPORTED,
                "node '%s' (%s): %s; a padded size cannot serve the dynamic "
                "dimension '%s' there: give it a size with --dim %s=N",
                n->name, n->op, why, st->sym, st->sym);
}

/* The run-time length: a graph input [1] of float32. */
static int length_input(dyn *st) {
  if (st->len >= 0) return st->len;
  ts_graph *g = st->g;
  int64_t one = 1;
  char name[300];
  snprintf(name, sizeof name, "%s%s", TS_GRAPH_LENGTH_PREFIX, st->sym);
  int v = gr_value_add(g, name, TS_FLOAT32, 1, &one);
  if (v < 0) return v;
  int *ins = gr_alloc(g, sizeof(int) * (size_t)(g->n_inputs + 1));
  if (!ins) return TS_ENOMEM;
  memcpy(ins, g->inputs, sizeof(int) * (size_t)g->n_inputs);
  ins[g->n_inputs++] = v;
  g->inputs = ins;
  g->values[v].is_input = true;
  return st->len = v;
}

/* Positions 0 .. B-1 along `axis` of a value of rank `rank`. */
static int positions(dyn *st, int rank, int axis) {
  if (st->pos[rank][axis] > 0) return st->pos[rank][axis];
  int64_t shape[TS_MAX_DIMS];
  for (int d = 0; d < rank; d++) shape[d] = d == axis ? st->size : 1;
  float *p = malloc(sizeof *p * (size_t)st->size);
  if (!p) return TS_ENOMEM;
  for (int64_t i = 0; i < st->size; i++) p[i] = (float)i;
  int v = gr_const_add(st->g, gr_fresh_name(st->g, GR_PAD_POSITIONS),
                       TS_FLOAT32, rank, shape, p);
  free(p);
  if (v >= 0) st->pos[rank][axis] = v;
  return v;
}

/* x with its positions >= n along `axis` replaced by `fill`; the node goes
 * into l. */
static int masked(dyn *st, gr_list *l, int x, int axis, double fill) {
  ts_graph *g = st->g;
  int len = length_input(st);
  if (len < 0) return len;
  int pos = positions(st, g->values[x].ndim, axis);
  if (pos < 0) return pos;
  const gr_value *xv = &g->values[x];
  int out = gr_value_fresh(g, xv->name, xv->dtype, xv->ndim, xv->shape);
  if (out < 0) return out;
  g->values[out].layout = g->values[x].layout;
  g->values[out].sym = g->values[x].sym;
  int ins[3] = {x, pos, len};
  gr_node m = gr_node_make(g, "PadMask", NULL, ins, 3, &out, 1);
  gr_attr a = {.name = "fill", .kind = GR_ATTR_FLOAT, .f = fill};
  gr_node_set_attr(g, &m, a);
  gr_attr ax = {.name = "axis", .kind = GR_ATTR_INT, .i = axis};
  gr_node_set_attr(g, &m, ax);
  gr_list_push(l, &m);
  return out;
}

static unsigned zero_pad(const dyn *st, int v) {
  return v >= 0 && v < st->n_zero_pad ? st->zero_pad[v] : 0;
}

static void set_zero_pad(dyn *st, int v, unsigned axes) {
  if (v >= 0 && v < st->n_zero_pad) st->zero_pad[v] = axes;
}

/* Masks input k of n along every axis in `axes` that is the symbol. */
static int mask_input(dyn *st, gr_list *l, gr_node *n, int k, unsigned axes,
                      double fill) {
  int x = n->inputs[k];
  unsigned m = sym_axes(st->g, x, st->sym) & axes;
  for (int d = 0; m && d < TS_MAX_DIMS; d++)
    if (m & (1u << d)) {
      x = masked(st, l, x, d, fill);
      if (x < 0) return x;
    }
  n->inputs[k] = x;
  return TS_OK;
}

/* The product of dims [from, to) of v, or -1 when one of them is the
 * symbol. */
static int64_t seg_product(const gr_value *v, int from, int to) {
  int64_t p = 1;
  for (int d = from; d < to; d++) p *= v->shape[d];
  return p;
}

/* A reshape keeps the symbol's positions when both sides have the same
 * number of symbol axes and the products between them agree. */
static bool reshape_keeps(const ts_graph *g, int x, int y, const char *sym) {
  const gr_value *a = &g->values[x], *b = &g->values[y];
  int sa[TS_MAX_DIMS + 1], sb[TS_MAX_DIMS + 1], na = 0, nb = 0;
  for (int d = 0; d < a->ndim; d++)
    if (is_sym(a, d, sym)) sa[na++] = d;
  for (int d = 0; d < b->ndim; d++)
    if (is_sym(b, d, sym)) sb[nb++] = d;
  if (na != nb) return false;
  int pa = 0, pb = 0;
  for (int k = 0; k <= na; k++) {
    int ea = k < na ? sa[k] : a->ndim, eb = k < nb ? sb[k] : b->ndim;
    if (seg_product(a, pa, ea) != seg_product(b, pb, eb)) return false;
    pa = ea + 1;
    pb = eb + 1;
  }
  return true;
}

/* The axes a Reduce* node reduces (attribute or constant input); all when
 * neither gives any. */
static unsigned reduce_mask(const ts_graph *g, const gr_node *n, int rank) {
  int c = 0;
  const int64_t *axes = gr_attr_ints(n, "axes", &c);
  if (!axes && n->n_inputs > 1 && n->inputs[1] >= 0 &&
      gr_is_const(g, n->inputs[1])) {
    c = (int)gr_value_elems(&g->values[n->inputs[1]]);
    axes = gr_const_data(g, n->inputs[1]);
  }
  if (!axes || c <= 0)
    return gr_attr_int(n, "noop_with_empty_axes", 0) ? 0 : (1u << rank) - 1;
  unsigned m = 0;
  for (int i = 0; i < c; i++) {
    int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (a >= 0 && a < rank) m |= 1u << a;
  }
  return m;
}

/* B / n, computed once from the length. */
static int scale_value(dyn *st, gr_list *l) {
  if (st->scale >= 0) return st->scale;
  ts_graph *g = st->g;
  int len = length_input(st);
  if (len < 0) return len;
  int64_t one = 1;
  float b = (float)st->size;
  int bv =
      gr_const_add(g, gr_fresh_name(g, "pad_size"), TS_FLOAT32, 1, &one, &b);
  int out = bv < 0 ? bv : gr_value_fresh(g, "pad_scale", TS_FLOAT32, 1, &one);
  if (out < 0) return out;
  int ins[2] = {bv, len};
  gr_node d = gr_node_make(g, "Div", NULL, ins, 2, &out, 1);
  gr_list_push(l, &d);
  return st->scale = out;
}

static bool op_in(const char *op, const char *const *list) {
  for (int i = 0; list[i]; i++)
    if (!strcmp(op, list[i])) return true;
  return false;
}

/* Node n into l, with its masks; refuses what padding cannot serve. */
static int rewrite(dyn *st, gr_list *l, gr_node n) {
  ts_graph *g = st->g;
  const char *op = n.op, *sym = st->sym;
  unsigned in0 = n.n_inputs ? sym_axes(g, n.inputs[0], sym) : 0;
  bool any = false;
  for (int k = 0; k < n.n_inputs; k++) any |= sym_axes(g, n.inputs[k], sym);
  for (int k = 0; k < n.n_outputs; k++) any |= sym_axes(g, n.outputs[k], sym);
  if (!any) {
    gr_list_push(l, &n);
    return TS_OK;
  }
  int rank = n.n_inputs ? g->values[n.inputs[0]].ndim : 0;
  static const char *const free_ops[] = {
      "Cast",           "Identity", "Dropout", "Transpose", "DequantizeLinear",
      "QuantizeLinear", NULL};
  int rc = TS_OK;
  if (gr_is_elementwise_op(op) || op_in(op, free_ops)) {
    /* position by position */
  } else if (!strcmp(op, "Reshape") || !strcmp(op, "Flatten") ||
             !strcmp(op, "Squeeze") || !strcmp(op, "Unsqueeze")) {
    if (!reshape_keeps(g, n.inputs[0], n.outputs[0], sym))
      return refuse(st, &n, "the reshape merges or splits the dimension");
  } else if (!strcmp(op, "MatMul") || !strcmp(op, "Gemm")) {
    int rb = g->values[n.inputs[1]].ndim;
    bool ta = !strcmp(op, "Gemm") && gr_attr_int(&n, "transA", 0);
    bool tb = !strcmp(op, "Gemm") && gr_attr_int(&n, "transB", 0);
    int ka = ta ? rank - 2 : rank - 1;
    int kb = rb == 1 ? 0 : tb ? rb - 1 : rb - 2;
    if (((in0 >> ka) & 1) || ((sym_axes(g, n.inputs[1], sym) >> kb) & 1)) {
      /* an operand whose padding is exactly 0 along the contraction needs
       * no mask when the other one has one (0 times a finite value) */
      bool za = (zero_pad(st, n.inputs[0]) >> ka) & 1;
      bool zb = (zero_pad(st, n.inputs[1]) >> kb) & 1;
      if (!za || zb) rc = mask_input(st, l, &n, 0, 1u << ka, 0);
      if (!rc && (!zb || za)) rc = mask_input(st, l, &n, 1, 1u << kb, 0);
    }
  } else if (!strcmp(op, "Softmax")) {
    int64_t axis = gr_attr_int(&n, "axis", g->opset >= 13 ? -1 : 1);
    if (axis < 0) axis += rank;
    unsigned m =
        g->opset >= 13 ? 1u << axis : ((1u << rank) - 1) >> axis << axis;
    rc = mask_input(st, l, &n, 0, m, -INFINITY);
    /* exp(-inf - max) is 0: the output's padding along m is exactly 0 */
    if (!rc) set_zero_pad(st, n.outputs[0], m & sym_axes(g, n.outputs[0], sym));
  } else if (!strcmp(op, "ReduceSum") || !strcmp(op, "ReduceMean") ||
             !strcmp(op, "ReduceMax")) {
    unsigned m = reduce_mask(g, &n, rank) & in0;
    rc = mask_input(st, l, &n, 0, m, strcmp(op, "ReduceMax") ? 0 : -INFINITY);
    if (!rc && m && !strcmp(op, "ReduceMean")) { /* mean over n, not B */
      int s = scale_value(st, l);
      if (s < 0) return s;
      int y = n.outputs[0];
      const gr_value *yv = &g->values[y];
      int t = gr_value_fresh(g, yv->name, yv->dtype, yv->ndim, yv->shape);
      if (t < 0) return t;
      n.outputs[0] = t;
      gr_list_push(l, &n);
      for (unsigned k = m; k; k &= k - 1) {
        int u = (k & (k - 1)) ? gr_value_fresh(g, yv->name, yv->dtype, yv->ndim,
                                               yv->shape)
                              : y;
        if (u < 0) return u;
        int ins[2] = {t, s};
        gr_node mul = gr_node_make(g, "Mul", NULL, ins, 2, &u, 1);
        gr_list_push(l, &mul);
        t = u;
      }
      return TS_OK;
    }
  } else if (!strcmp(op, "Conv") || !strcmp(op, "ConvTranspose") ||
             !strcmp(op, "ConvInteger") || !strcmp(op, "MaxPool") ||
             !strcmp(op, "AveragePool") || !strcmp(op, "GlobalAveragePool") ||
             !strcmp(op, "BatchNormalization")) {
    if (in0 & ~1u) return refuse(st, &n, "a window or channel axis is dynamic");
    for (int k = 1; k < n.n_inputs; k++)
      if (sym_axes(g, n.inputs[k], sym))
        return refuse(st, &n, "a weight depends on the dynamic size");
  } else if (!strcmp(op, "LayerNormalization")) {
    int64_t axis = gr_attr_int(&n, "axis", -1);
    if (axis < 0) axis += rank;
    if (in0 >> axis) return refuse(st, &n, "it normalizes over the dimension");
  } else if (!strcmp(op, "Concat")) {
    int64_t axis = gr_attr_int(&n, "axis", 0);
    if (axis < 0) axis += rank;
    if ((sym_axes(g, n.outputs[0], sym) >> axis) & 1)
      return refuse(st, &n, "it concatenates along the dimension");
  } else if (!strcmp(op, "Gather")) {
    int64_t axis = gr_attr_int(&n, "axis", 0);
    if (axis < 0) axis += rank;
    if ((in0 >> axis) & 1) { /* only positions every size has: 0 */
      int iv = n.inputs[1];
      bool ok = gr_is_const(g, iv);
      const gr_value *ix = &g->values[iv];
      for (int64_t i = 0; ok && i < gr_value_elems(ix); i++)
        ok = ts_host_get(gr_const_data(g, iv), ix->dtype, i) == 0;
      if (!ok) return refuse(st, &n, "it gathers along the dimension");
    }
  } else if (!strcmp(op, "Slice")) {
    /* a pure symbol out of a symbol axis is the whole axis, unless
     * reversed */
    if (in0 != sym_axes(g, n.outputs[0], sym))
      return refuse(st, &n, "it cuts the dimension");
    for (int k = 4; k < n.n_inputs; k++) { /* steps */
      int sv = n.inputs[k];
      if (sv < 0) continue;
      const gr_value *s = &g->values[sv];
      for (int64_t i = 0; i < gr_value_elems(s); i++)
        if (!gr_is_const(g, sv) ||
            ts_host_get(gr_const_data(g, sv), s->dtype, i) != 1)
          return refuse(st, &n, "it steps along the dimension");
    }
  } else {
    return refuse(st, &n, "the operator is not known to keep positions");
  }
  if (rc) return rc;
  gr_list_push(l, &n);
  return TS_OK;
}

/* Inputs of shape role (their data is a size, not a tensor's values). */
static bool shape_operand(const gr_node *n, int k) {
  if (!strcmp(n->op, "Reshape") || !strcmp(n->op, "Squeeze") ||
      !strcmp(n->op, "Unsqueeze") || !strncmp(n->op, "Reduce", 6))
    return k == 1;
  if (!strcmp(n->op, "Slice")) return k >= 1;
  return false;
}

/* Whether the constant v of g (size B) agrees with the same constant of h
 * (a smaller size): the same bytes, or on a symbol axis the same prefix. */
static bool const_agrees(const ts_graph *g, const ts_graph *h, int v,
                         const char *sym) {
  const gr_value *a = &g->values[v], *b = &h->values[v];
  if (!gr_is_const(h, v) || a->ndim != b->ndim) return false;
  size_t es = (size_t)ts_dtype_elem_bytes(a->dtype);
  const uint8_t *pa = gr_const_data(g, v), *pb = gr_const_data(h, v);
  int64_t nb = gr_value_elems(b), idx[TS_MAX_DIMS] = {0};
  for (int d = 0; d < a->ndim; d++)
    if (!is_sym(a, d, sym) && a->shape[d] != b->shape[d]) return false;
  for (int64_t i = 0; i < nb; i++) {
    int64_t off = 0;
    for (int d = 0; d < a->ndim; d++) off = off * a->shape[d] + idx[d];
    if (memcmp(pa + (size_t)off * es, pb + (size_t)i * es, es)) return false;
    for (int d = a->ndim - 1; d >= 0; d--) {
      if (++idx[d] < b->shape[d]) break;
      idx[d] = 0;
    }
  }
  return true;
}

static int check_constants(dyn *st, ts_graph *const *small, int n_small) {
  ts_graph *g = st->g;
  int rc = TS_OK;
  for (int i = 0; !rc && i < g->n_nodes; i++) {
    const gr_node *n = &g->nodes[i];
    for (int k = 0; !rc && k < n->n_inputs; k++) {
      int v = n->inputs[k];
      if (v < 0 || !gr_is_const(g, v) || shape_operand(n, k)) continue;
      for (int s = 0; s < n_small; s++)
        if (!const_agrees(g, small[s], v, st->sym)) {
          rc = TS_ERR(st->err, TS_EUNSUPPORTED,
                      "node '%s' (%s): its input '%s' is a constant computed "
                      "from the size of '%s' (it differs between sizes); a "
                      "padded size cannot serve it: give it a size with "
                      "--dim %s=N",
                      n->name, n->op, g->values[v].name, st->sym, st->sym);
          break;
        }
    }
  }
  return rc;
}

/* The model at padded size `size`, given its symbolic graph gs (at the
 * first probe) and the graph g6 at size 6, both after cse. */
static int pad_one(const char *path, const ts_graph_import_options *opts,
                   ts_graph *gs, ts_graph *g6, int64_t size, const char *after,
                   ts_graph **out, ts_error *err) {
  unsigned long failures = ts_alloc_failures();
  const char *names[1] = {gs->sym_names[0]};
  ts_graph *g = NULL;
  if (size < 1)
    return TS_ERR(err, TS_EINVAL, "bucket size %lld of '%s': not positive",
                  (long long)size, names[0]);
  int rc = gr_import_at(path, opts, "cse", 1, names, &size, &g, err);
  const char *diff = rc ? NULL : gr_same_structure(gs, g);
  if (diff)
    rc = TS_ERR(err, TS_EUNSUPPORTED,
                "the graph's structure at %s=%lld differs from the one at "
                "small sizes (at '%s'): a padded size cannot serve it",
                names[0], (long long)size, diff);
  /* the symbolic dimensions, onto the graph at the bucket size */
  for (int v = 0; !rc && v < g->n_values; v++) {
    const gr_value *sv = &gs->values[v];
    if (!sv->sym) continue;
    const char **dims = gr_alloc(g, sizeof(char *) * TS_MAX_DIMS);
    if (!dims) {
      rc = TS_ERR(err, TS_ENOMEM, "padded import: out of memory");
      break;
    }
    for (int d = 0; d < sv->ndim; d++) {
      dims[d] = sv->sym[d] ? ts_arena_strdup(g->arena, sv->sym[d]) : NULL;
      if (sv->sym[d] && strcmp(sv->sym[d], names[0]))
        rc = TS_ERR(err, TS_EUNSUPPORTED,
                    "value '%s': dimension %d is %s, an expression of the "
                    "dynamic dimension; a padded size serves only the "
                    "dimension itself: give '%s' a size with --dim %s=N",
                    sv->name, d, sv->sym[d], names[0], names[0]);
    }
    g->values[v].sym = dims;
  }
  if (!rc) {
    g->sym_names[0] = ts_arena_strdup(g->arena, names[0]);
    g->sym_sizes[0] = size;
    g->n_syms = 1;
    dyn st = {.g = g,
              .sym = g->sym_names[0],
              .size = size,
              .len = -1,
              .scale = -1,
              .err = err};
    memset(st.pos, 0, sizeof st.pos);
    st.n_zero_pad = g->n_values + 8 * g->n_nodes + 64; /* masks add values */
    st.zero_pad = calloc((size_t)st.n_zero_pad, sizeof *st.zero_pad);
    if (!st.zero_pad)
      rc = TS_ERR(err, TS_ENOMEM, "padded import: out of memory");
    ts_graph *small[2] = {gs, g6};
    if (!rc) rc = check_constants(&st, small, 2);
    if (!rc) {
      gr_list l;
      memset(&l, 0, sizeof l);
      for (int i = 0; !rc && i < g->n_nodes; i++)
        rc = rewrite(&st, &l, g->nodes[i]);
      if (rc)
        free(l.nodes);
      else
        rc = gr_list_commit(g, &l);
    }
    /* the kernels cut their loops to the length (dyn_loops.c) */
    if (!rc && length_input(&st) < 0)
      rc = TS_ERR(err, TS_ENOMEM, "padded import: out of memory");
    free(st.zero_pad);
  }
  if (!rc) rc = gr_alloc_check(g, failures, rc, err, "padded import");
  if (!rc && opts->before_passes) rc = opts->before_passes(g, opts->ctx, err);
  if (!rc) rc = gr_run_passes_after(g, "cse", after, err);
  if (rc) {
    ts_graph_free(g);
    return rc;
  }
  *out = g;
  return TS_OK;
}

int ts_graph_import_padded_sizes(const char *path,
                                 const ts_graph_import_options *opts,
                                 const int64_t *sizes, int n, const char *after,
                                 ts_graph **outs, ts_error *err) {
  for (int b = 0; b < n; b++) outs[b] = NULL;
  ts_graph_import_options none;
  memset(&none, 0, sizeof none);
  if (!opts) opts = &none;
  ts_graph *gs = NULL, *g6 = NULL;
  int rc = ts_graph_import_symbolic(path, opts, "cse", &gs, err);
  if (rc) return rc;
  if (gs->n_syms != 1) {
    rc = TS_ERR(err, TS_EUNSUPPORTED,
                gs->n_syms ? "the model has %d dynamic dimensions left; a "
                             "compiled model serves one: give the others a "
                             "size with --dim"
                           : "the model has no dynamic dimension left "
                             "(every one has a size)",
                gs->n_syms);
    ts_graph_free(gs);
    return rc;
  }
  const char *names[1] = {gs->sym_names[0]};
  int64_t six = 6;
  rc = gr_import_at(path, opts, "cse", 1, names, &six, &g6, err);
  const char *diff = rc ? NULL : gr_same_structure(gs, g6);
  if (diff)
    rc = TS_ERR(err, TS_EUNSUPPORTED,
                "the graph's structure at %s=6 differs from the one at 5 "
                "(at '%s'): a padded size cannot serve it",
                names[0], diff);
  for (int b = 0; !rc && b < n; b++)
    rc = pad_one(path, opts, gs, g6, sizes[b], after, &outs[b], err);
  ts_graph_free(gs);
  ts_graph_free(g6);
  if (rc)
    for (int b = 0; b < n; b++) {
      ts_graph_free(outs[b]);
      outs[b] = NULL;
    }
  return rc;
}

int ts_graph_import_padded(const char *path,
                           const ts_graph_import_options *opts, int64_t size,
                           const char *after, ts_graph **out, ts_error *err) {
  return ts_graph_import_padded_sizes(path, opts, &size, 1, after, out, err);
}

bool ts_graph_padded_axes(const ts_graph *g, bool output, int i,
                          unsigned *axes) {
  int n = output ? g->n_outputs : g->n_inputs;
  if (i < 0 || i >= n || g->n_syms != 1) return false;
  *axes = sym_axes(g, output ? g->outputs[i] : g->inputs[i], g->sym_names[0]);
  return true;
}
