/*
 * fuse_move.c — the data-movement operators as TE stages, so that a fused
 * graph holds nothing but calls and views. Each is a group of its own (an
 * anchor that can take an elementwise epilogue, as the library operators
 * of fuse.c) and works on any dtype; every output element is one input
 * element (converted, for Cast):
 *   Gather     out[o.., j.., i..] = X[o.., k, i..], k = I[j..]: a load whose
 *              index is another buffer's load. A negative k counts from the
 *              end (k + len) as ONNX says; an index still outside [0, len)
 *              is clamped to it (the reference kernel refuses such an
 *              index; the compiled task must not read out of bounds). A
 *              single constant index is an immediate.
 *   Cast       out = to(X): tir's conversion, which is the reference
 *              kernels' — floats to integers truncate toward zero and
 *              saturate (NaN gives 0), anything to bool is "nonzero",
 *              16-bit floats go through float32; an integer narrowed to a
 *              smaller range saturates too (clamped before the cast), as
 *              the reference kernel's conversion through double does. (The
 *              reference rounds a 64-bit integer beyond 2^53 to a double
 *              first; the call converts it exactly.)
 *   GatherElements  out[i..] = X[i.. with the axis's index I[i..]]
 *   Concat     a chain of if_then_else over the concatenation axis (lazy,
 *              so no branch loads outside its input).
 *   Slice      X[start + i * step] per sliced axis (constant starts, ends,
 *              axes and steps; negative steps included).
 *   Transpose  a copy with permuted indices.
 */
#include "fuse_move.h"

#include <string.h>

/* The ints of constant input k of n (int32 or int64), count in *count;
 * false when the input is not such a constant. Absent inputs give count
 * -1 and true. */
static bool const_int_input(const ts_graph *g, const gr_node *n, int k,
                            int64_t *vals, int *count) {
  *count = -1;
  if (k >= n->n_inputs || n->inputs[k] < 0) return true;
  int v = n->inputs[k];
  const gr_value *x = &g->values[v];
  if (!gr_is_const(g, v) || x->ndim != 1 || !ts_dtype_is_int(x->dtype) ||
      x->shape[0] > TS_MAX_DIMS)
    return false;
  const void *d = gr_const_data(g, v);
  for (int64_t i = 0; i < x->shape[0]; i++)
    vals[i] = ts_host_get_int(d, x->dtype, i);
  *count = (int)x->shape[0];
  return true;
}

/* Slice's per-axis start and step (the reference kernel's clamping);
 * false when the specification is not constant or malformed. */
static bool slice_spec(const ts_graph *g, const gr_node *n, int64_t *start,
                       int64_t *step) {
  const gr_value *x = &g->values[n->inputs[0]];
  int64_t st[TS_MAX_DIMS], en[TS_MAX_DIMS], ax[TS_MAX_DIMS], sp[TS_MAX_DIMS];
  int ns, ne, na, nsp;
  if (n->n_inputs < 3 || !const_int_input(g, n, 1, st, &ns) ||
      !const_int_input(g, n, 2, en, &ne) ||
      !const_int_input(g, n, 3, ax, &na) ||
      !const_int_input(g, n, 4, sp, &nsp) || ns < 0 || ne != ns ||
      (na >= 0 && na != ns) || (nsp >= 0 && nsp != ns))
    return false;
  for (int d = 0; d < x->ndim; d++) start[d] = 0, step[d] = 1;
  for (int i = 0; i < ns; i++) {
    int64_t a = na >= 0 ? ax[i] : i;
    if (a < 0) a += x->ndim;
    if (a < 0 || a >= x->ndim) return false;
    int64_t s = nsp >= 0 ? sp[i] : 1, b = st[i], d = x->shape[a];
    if (s == 0) return false;
    if (b < 0) b += d;
    if (s > 0)
      b = b < 0 ? 0 : b > d ? d : b;
    else
      b = b < 0 ? -1 : b > d - 1 ? d - 1 : b;
    start[a] = b;
    step[a] = s;
  }
  return true;
}

static bool known(const ts_graph *g, int v) {
  if (v < 0) return false;
  const gr_value *x = &g->values[v];
  if (x->ndim < 0) return false;
  for (int d = 0; d < x->ndim; d++)
    if (x->shape[d] <= 0) return false; /* unknown or empty */
  return true;
}

bool gr_fuse_is_move(const ts_graph *g, const gr_node *n) {
  if (n->kind != TS_GRAPH_OP || n->n_outputs != 1 || n->n_inputs < 1 ||
      !known(g, n->inputs[0]) || !known(g, n->outputs[0]))
    return false;
  const char *op = n->op;
  const gr_value *x = &g->values[n->inputs[0]];
  const gr_value *out = &g->values[n->outputs[0]];
  if (!strcmp(op, "Cast") || !strcmp(op, "Transpose"))
    return x->ndim == out->ndim;
  if (!strcmp(op, "Gather")) {
    if (n->n_inputs != 2 || !known(g, n->inputs[1])) return false;
    const gr_value *ind = &g->values[n->inputs[1]];
    int64_t axis = gr_attr_int(n, "axis", 0);
    if (axis < 0) axis += x->ndim;
    return ts_dtype_is_int(ind->dtype) && axis >= 0 && axis < x->ndim &&
           out->ndim == x->ndim + ind->ndim - 1;
  }
  if (!strcmp(op, "GatherElements")) {
    if (n->n_inputs != 2 || !known(g, n->inputs[1])) return false;
    const gr_value *ind = &g->values[n->inputs[1]];
    return ts_dtype_is_int(ind->dtype) && ind->ndim == x->ndim &&
           out->ndim == x->ndim;
  }
  if (!strcmp(op, "Concat")) {
    if (n->n_inputs > GR_FUSE_MAX_PARAMS - 1) return false;
    int64_t axis = gr_attr_int(n, "axis", 0);
    if (axis < 0) axis += out->ndim;
    if (axis < 0 || axis >= out->ndim) return false;
    int64_t total = 0;
    for (int k = 0; k < n->n_inputs; k++) {
      int v = n->inputs[k];
      if (v < 0) return false;
      const gr_value *xk = &g->values[v];
      if (xk->ndim != out->ndim || !ts_dtype_eq(xk->dtype, out->dtype))
        return false;
      if (xk->shape[axis] == 0) continue; /* an empty input adds nothing */
      if (!known(g, v)) return false;
      total += xk->shape[axis];
    }
    return total == out->shape[axis];
  }
  if (!strcmp(op, "Slice")) {
    int64_t start[TS_MAX_DIMS], step[TS_MAX_DIMS];
    return x->ndim == out->ndim && slice_spec(g, n, start, step);
  }
  return false;
}

/* A stage shaped like value v; its axes in axes[]. */
static ts_te_stage *stage_of_value(gr_fuse_builder *b, const char *op,
                                   const gr_value *v, ts_expr **axes) {
  ts_te_stage *st = ts_te_compute(b->te, gr_fuse_stage_name(b, op), v->dtype,
                                  v->shape, v->ndim, NULL);
  for (int d = 0; d < v->ndim; d++) axes[d] = ts_te_axis(st, d);
  return st;
}

/* Integer limits of type t as a range check against source type s:
 * whether t's lowest value is above s's, and t's highest below s's. */
static void narrowing(ts_dtype s, ts_dtype t, bool *need_lo, bool *need_hi) {
  bool ss = ts_dtype_is_signed(s), ts = ts_dtype_is_signed(t);
  int s_hi = ss ? s.bits - 1 : s.bits; /* s's highest is 2^s_hi - 1 */
  int t_hi = ts ? t.bits - 1 : t.bits;
  *need_lo = ss && (!ts || t.bits < s.bits);
  *need_hi = t_hi < s_hi;
}

/* x (of dtype s) converted to t as the reference kernels convert. */
static ts_expr *convert(gr_fuse_builder *b, ts_expr *x, ts_dtype s,
                        ts_dtype t) {
  ts_arena *a = b->a;
  if (ts_dtype_eq(s, t)) return x;
  if (ts_dtype_is_int(s) && ts_dtype_is_int(t)) {
    bool lo, hi;
    narrowing(s, t, &lo, &hi);
    bool tsig = ts_dtype_is_signed(t);
    if (lo)
      x = ts_max(
          a, x,
          ts_int(a, s, tsig ? -(int64_t)(UINT64_C(1) << (t.bits - 1)) : 0));
    if (hi)
      x = ts_min(
          a, x,
          ts_int(a, s,
                 (int64_t)((UINT64_C(1) << (tsig ? t.bits - 1 : t.bits)) - 1)));
  }
  return ts_cast(a, t, x);
}

static ts_buffer *build_cast(gr_fuse_builder *b, const gr_node *n) {
  const gr_value *x = &b->g->values[n->inputs[0]];
  const gr_value *out = &b->g->values[n->outputs[0]];
  ts_buffer *X = gr_fuse_param(b, n->inputs[0]);
  if (!X) return NULL;
  ts_expr *ax[TS_MAX_DIMS];
  ts_te_stage *st = stage_of_value(b, "cast", out, ax);
  return ts_te_set_value(
      st, convert(b, ts_te_load(b->te, X, ax, x->ndim), x->dtype, out->dtype));
}

static ts_buffer *build_transpose(gr_fuse_builder *b, const gr_node *n) {
  const gr_value *x = &b->g->values[n->inputs[0]];
  const gr_value *out = &b->g->values[n->outputs[0]];
  ts_buffer *X = gr_fuse_param(b, n->inputs[0]);
  if (!X) return NULL;
  int c;
  const int64_t *perm = gr_attr_ints(n, "perm", &c);
  if (perm && c != x->ndim) return NULL;
  ts_expr *ya[TS_MAX_DIMS], *idx[TS_MAX_DIMS] = {0};
  ts_te_stage *y = stage_of_value(b, "transpose", out, ya);
  for (int j = 0; j < out->ndim; j++) {
    int64_t p = perm ? perm[j] : out->ndim - 1 - j;
    if (p < 0 || p >= x->ndim || idx[p]) return NULL;
    idx[p] = ya[j];
  }
  return ts_te_set_value(y, ts_te_load(b->te, X, idx, x->ndim));
}

static ts_buffer *build_gather(gr_fuse_builder *b, const gr_node *n) {
  ts_arena *a = b->a;
  const gr_value *x = &b->g->values[n->inputs[0]];
  const gr_value *ind = &b->g->values[n->inputs[1]];
  const gr_value *out = &b->g->values[n->outputs[0]];
  int64_t axis = gr_attr_int(n, "axis", 0);
  if (axis < 0) axis += x->ndim;
  int64_t len = x->shape[axis];
  /* one constant index (BERT's pooler takes token 0): an immediate */
  bool imm = gr_is_const(b->g, n->inputs[1]) && gr_value_elems(ind) == 1;
  ts_buffer *X = gr_fuse_param(b, n->inputs[0]);
  ts_buffer *I = imm ? NULL : gr_fuse_param(b, n->inputs[1]);
  if (!X || (!imm && !I)) return NULL;
  int q = ind->ndim;
  ts_expr *oa[TS_MAX_DIMS], *ii[TS_MAX_DIMS], *xi[TS_MAX_DIMS];
  ts_te_stage *st = stage_of_value(b, "gather", out, oa);
  ts_expr *k;
  if (imm) {
    int64_t c =
        ts_host_get_int(gr_const_data(b->g, n->inputs[1]), ind->dtype, 0);
    if (c < 0) c += len;
    k = ts_index(a, c < 0 ? 0 : c >= len ? len - 1 : c);
  } else {
    for (int d = 0; d < q; d++) ii[d] = oa[axis + d];
    k = ts_cast(a, TS_INDEX, ts_te_load(b->te, I, ii, q));
    /* k + len when negative, then clamped into [0, len) */
    k = ts_add(a, k,
               ts_select(a, ts_lt(a, k, ts_index(a, 0)), ts_index(a, len),
                         ts_index(a, 0)));
    k = ts_min(a, ts_max(a, k, ts_index(a, 0)), ts_index(a, len - 1));
  }
  for (int d = 0; d < x->ndim; d++)
    xi[d] = d < axis ? oa[d] : d == axis ? k : oa[d + q - 1];
  return ts_te_set_value(st, ts_te_load(b->te, X, xi, x->ndim));
}

/* GatherElements: out[i..] = X[i.. with the axis's index I[i..]], the
 * index normalized and clamped as Gather's. */
static ts_buffer *build_gather_elements(gr_fuse_builder *b, const gr_node *n) {
  ts_arena *a = b->a;
  const gr_value *x = &b->g->values[n->inputs[0]];
  const gr_value *out = &b->g->values[n->outputs[0]];
  int64_t axis = gr_attr_int(n, "axis", 0);
  if (axis < 0) axis += x->ndim;
  int64_t len = x->shape[axis];
  ts_buffer *X = gr_fuse_param(b, n->inputs[0]);
  ts_buffer *I = gr_fuse_param(b, n->inputs[1]);
  if (!X || !I) return NULL;
  ts_expr *oa[TS_MAX_DIMS], *xi[TS_MAX_DIMS];
  ts_te_stage *st = stage_of_value(b, "gather_elements", out, oa);
  ts_expr *k = ts_cast(a, TS_INDEX, ts_te_load(b->te, I, oa, out->ndim));
  k = ts_add(a, k,
             ts_select(a, ts_lt(a, k, ts_index(a, 0)), ts_index(a, len),
                       ts_index(a, 0)));
  k = ts_min(a, ts_max(a, k, ts_index(a, 0)), ts_index(a, len - 1));
  for (int d = 0; d < x->ndim; d++) xi[d] = d == axis ? k : oa[d];
  return ts_te_set_value(st, ts_te_load(b->te, X, xi, x->ndim));
}

static ts_buffer *build_concat(gr_fuse_builder *b, const gr_node *n) {
  ts_arena *a = b->a;
  const gr_value *out = &b->g->values[n->outputs[0]];
  int64_t axis = gr_attr_int(n, "axis", 0);
  if (axis < 0) axis += out->ndim;
  ts_expr *oa[TS_MAX_DIMS], *idx[TS_MAX_DIMS];
  ts_buffer *in[GR_FUSE_MAX_PARAMS];
  int64_t off[GR_FUSE_MAX_PARAMS];
  int m = 0;
  int64_t o = 0;
  for (int k = 0; k < n->n_inputs; k++) {
    const gr_value *xk = &b->g->values[n->inputs[k]];
    if (xk->shape[axis] == 0) continue;
    if (!(in[m] = gr_fuse_param(b, n->inputs[k]))) return NULL;
    off[m++] = o;
    o += xk->shape[axis];
  }
  ts_te_stage *st = stage_of_value(b, "concat", out, oa);
  memcpy(idx, oa, sizeof(ts_expr *) * (size_t)out->ndim);
  ts_expr *v = NULL;
  for (int k = m - 1; k >= 0; k--) {
    idx[axis] = ts_sub(a, oa[axis], ts_index(a, off[k]));
    ts_expr *load = ts_te_load(b->te, in[k], idx, out->ndim);
    if (!v) {
      v = load;
      continue;
    }
    ts_expr *args[3] = {ts_lt(a, oa[axis], ts_index(a, off[k + 1])), load, v};
    v = ts_call(a, out->dtype, "if_then_else", args, 3);
  }
  return ts_te_set_value(st, v);
}

static ts_buffer *build_slice(gr_fuse_builder *b, const gr_node *n) {
  ts_arena *a = b->a;
  const gr_value *x = &b->g->values[n->inputs[0]];
  const gr_value *out = &b->g->values[n->outputs[0]];
  int64_t start[TS_MAX_DIMS], step[TS_MAX_DIMS];
  if (!slice_spec(b->g, n, start, step)) return NULL;
  ts_buffer *X = gr_fuse_param(b, n->inputs[0]);
  if (!X) return NULL;
  ts_expr *oa[TS_MAX_DIMS], *idx[TS_MAX_DIMS];
  ts_te_stage *st = stage_of_value(b, "slice", out, oa);
  for (int d = 0; d < x->ndim; d++)
    idx[d] = ts_add(a, ts_index(a, start[d]),
                    ts_mul(a, oa[d], ts_index(a, step[d])));
  return ts_te_set_value(st, ts_te_load(b->te, X, idx, x->ndim));
}

ts_buffer *gr_fuse_build_move(gr_fuse_builder *b, const gr_node *n) {
  ts_buffer *r = NULL;
  if (!strcmp(n->op, "Cast"))
    r = build_cast(b, n);
  else if (!strcmp(n->op, "Transpose"))
    r = build_transpose(b, n);
  else if (!strcmp(n->op, "Gather"))
    r = build_gather(b, n);
  else if (!strcmp(n->op, "GatherElements"))
    r = build_gather_elements(b, n);
  else if (!strcmp(n->op, "Concat"))
    r = build_concat(b, n);
  else if (!strcmp(n->op, "Slice"))
    r = build_slice(b, n);
  if (!r) b->failed = true;
  return r;
}
