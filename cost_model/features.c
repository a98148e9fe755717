/*
 * features.c — per-store feature extraction. A block-form function is
 * lowered on a copy by the feature pipeline, a prefix of ts_lower (blocks,
 * flatten, simplify, vectorize; not unroll, so unrolled loops stay loops),
 * then one walk visits every buffer store with the stack of loops around
 * it. For each store the indices of every access are reduced to a linear
 * form (a coefficient per enclosing loop, plus a flag for loops an index
 * depends on non-linearly), from which footprints, cache lines, strides and
 * reuse follow arithmetically: nothing is simulated, so extraction costs
 * microseconds.
 * The entries are listed in features.def and defined in docs/features.md.
 */
#include "cost_model/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Loops deeper than this (plus the vector-lane dimension) are refused. */
#define MAX_LOOPS 62
#define MAX_DIMS (MAX_LOOPS + 1)
/* Buffers one store may touch that are analysed (the 5 largest are kept). */
#define MAX_ACCESS_BUFFERS 32
#define CACHE_LINE 64.0
#define N_BUFFER_SLOTS 5
#define N_BUFFER_FEATURES (TS_CM_F_BUF1_READ - TS_CM_F_BUF0_READ)
#define N_CURVE 10

static const char *const names[] = {
#define TS_CM_FEATURE(id, name, meaning) name,
#include "cost_model/features.def"
#undef TS_CM_FEATURE
};
static const char *const meanings[] = {
#define TS_CM_FEATURE(id, name, meaning) meaning,
#include "cost_model/features.def"
#undef TS_CM_FEATURE
};

const char *ts_cm_feature_name(int i) {
  return i >= 0 && i < TS_CM_N_FEATURES ? names[i] : NULL;
}

const char *ts_cm_feature_meaning(int i) {
  return i >= 0 && i < TS_CM_N_FEATURES ? meanings[i] : NULL;
}

/* ------------------------------------------------------------------------
 * The walk's state
 * ------------------------------------------------------------------------ */

typedef struct loop_info {
  const ts_expr *var; /* NULL for the vector-lane dimension */
  double extent;
  ts_for_kind kind;
  const char *thread_tag;
  int64_t auto_unroll; /* pragma_auto_unroll_max_step, 0 when absent */
  bool fallback;       /* vectorize_fallback annotation */
  bool nontemporal;    /* pragma_nontemporal annotation, non-zero */
} loop_info;

typedef struct let_bind {
  const ts_expr *var;
  const ts_expr *value;
} let_bind;

typedef struct alloc_info {
  const ts_buffer *buffer;
  double bytes;
  double execs;
} alloc_info;

typedef struct walker {
  loop_info loops[MAX_DIMS];
  int n_loops;
  let_bind *lets;
  int n_lets, cap_lets;
  alloc_info *allocs;
  int n_allocs, cap_allocs;
  double func_alloc_bytes, func_alloc_count;
  double func_dispatches; /* parallel loops started per call */
  int guards;
  int cores;
  int vector_bits; /* the target's widest vector (128 without a target) */
  bool is_gpu;
  float *rows;
  int n_rows, cap_rows;
  int code;
  ts_error *err;
} walker;

/* A linear form of an index: coefficient per dimension (absolute values are
 * what matter) and the dimensions it depends on non-linearly. */
typedef struct form {
  double c[MAX_DIMS];
  uint64_t nonlin;
} form;

static void form_zero(form *f, int n) {
  memset(f->c, 0, sizeof(double) * (size_t)n);
  f->nonlin = 0;
}

static uint64_t form_support(const form *f, int n) {
  uint64_t m = f->nonlin;
  for (int i = 0; i < n; i++)
    if (f->c[i] != 0) m |= (uint64_t)1 << i;
  return m;
}

/* The linear form of e over the dims [0, n) (the lane dimension is n - 1 when
 * lane_dim). Vars that are not loop vars are constants. */
static void form_of(const walker *w, const ts_expr *e, int n, bool lane_dim,
                    form *out, int depth);

static void form_union(const walker *w, const ts_expr *e, int n, bool lane_dim,
                       form *out, int depth, bool nonlinear) {
  form_zero(out, n);
  form t;
  for (int i = 0; i < ts_expr_n_operands(e); i++) {
    form_of(w, ts_expr_operand(e, i), n, lane_dim, &t, depth + 1);
    for (int d = 0; d < n; d++)
      if (fabs(t.c[d]) > fabs(out->c[d])) out->c[d] = fabs(t.c[d]);
    out->nonlin |= nonlinear ? form_support(&t, n) : t.nonlin;
  }
}

static void form_of(const walker *w, const ts_expr *e, int n, bool lane_dim,
                    form *out, int depth) {
  form_zero(out, n);
  if (!e || depth > 64) return;
  ts_expr_kind k = ts_expr_kind_of(e);
  int64_t v;
  form a, b;
  switch (k) {
  case TS_EXPR_INT:
  case TS_EXPR_FLOAT: return;
  case TS_EXPR_VAR:
    for (int i = 0; i < w->n_loops && i < n; i++)
      if (w->loops[i].var == e) {
        out->c[i] = 1;
        return;
      }
    for (int i = w->n_lets - 1; i >= 0; i--)
      if (w->lets[i].var == e) {
        form_of(w, w->lets[i].value, n, lane_dim, out, depth + 1);
        return;
      }
    return;
  case TS_EXPR_ADD:
  case TS_EXPR_SUB:
    form_of(w, ts_expr_operand(e, 0), n, lane_dim, out, depth + 1);
    form_of(w, ts_expr_operand(e, 1), n, lane_dim, &b, depth + 1);
    for (int d = 0; d < n; d++)
      out->c[d] = k == TS_EXPR_ADD ? out->c[d] + b.c[d] : out->c[d] - b.c[d];
    out->nonlin |= b.nonlin;
    return;
  case TS_EXPR_MUL:
    if (ts_expr_is_const_int(ts_expr_operand(e, 1), &v) ||
        ts_expr_is_const_int(ts_expr_operand(e, 0), &v)) {
      const ts_expr *x = ts_expr_is_const_int(ts_expr_operand(e, 1), &v)
                             ? ts_expr_operand(e, 0)
                             : ts_expr_operand(e, 1);
      form_of(w, x, n, lane_dim, out, depth + 1);
      for (int d = 0; d < n; d++) out->c[d] *= (double)v;
      return;
    }
    form_union(w, e, n, lane_dim, out, depth, true);
    return;
  case TS_EXPR_DIV:
  case TS_EXPR_FLOORDIV:
    if (ts_expr_is_const_int(ts_expr_operand(e, 1), &v) && v != 0) {
      form_of(w, ts_expr_operand(e, 0), n, lane_dim, &a, depth + 1);
      for (int d = 0; d < n; d++) out->c[d] = a.c[d] / (double)v;
      out->nonlin = form_support(&a, n);
      return;
    }
    form_union(w, e, n, lane_dim, out, depth, true);
    return;
  case TS_EXPR_MOD:
  case TS_EXPR_FLOORMOD:
    form_of(w, ts_expr_operand(e, 0), n, lane_dim, out, depth + 1);
    out->nonlin = form_support(out, n);
    return;
  case TS_EXPR_RAMP:
    form_of(w, ts_expr_operand(e, 0), n, lane_dim, out, depth + 1);
    if (lane_dim) {
      int64_t stride = 1;
      if (!ts_expr_is_const_int(ts_expr_operand(e, 1), &stride)) {
        out->nonlin |= (uint64_t)1 << (n - 1);
        stride = 1;
      }
      out->c[n - 1] = (double)stride;
    }
    return;
  case TS_EXPR_BROADCAST:
  case TS_EXPR_CAST:
    form_of(w, ts_expr_operand(e, 0), n, lane_dim, out, depth + 1);
    return;
  case TS_EXPR_LOAD: /* indirect: the index is data; nothing is known */ return;
  default: form_union(w, e, n, lane_dim, out, depth, true); return;
  }
}

/* The flat form of an access buffer[indices] (multi-dimensional accesses are
 * combined with the buffer's strides). */
static void access_form(const walker *w, const ts_buffer *buf,
                        ts_expr *const *idx, int n_idx, int n, bool lane_dim,
                        form *out) {
  form_zero(out, n);
  form t;
  for (int i = 0; i < n_idx; i++) {
    form_of(w, idx[i], n, lane_dim, &t, 0);
    double stride = n_idx > 1 && i < ts_buffer_ndim(buf)
                        ? (double)ts_buffer_stride(buf, i)
                        : 1.0;
    for (int d = 0; d < n; d++) out->c[d] += t.c[d] * stride;
    out->nonlin |= t.nonlin;
  }
}

/* ------------------------------------------------------------------------
 * Arithmetic counts
 * ------------------------------------------------------------------------ */

typedef struct op_counter {
  double n[TS_CM_F_SELECT_OP + 1];
  const ts_expr *consumed[64]; /* multiplications counted inside a mad */
  int n_consumed;
} op_counter;

static bool is_float_type(ts_dtype t) { return ts_dtype_is_float(t); }

static bool is_mul_of(const ts_expr *e, bool want_float) {
  return e && ts_expr_kind_of(e) == TS_EXPR_MUL &&
         is_float_type(ts_expr_dtype(e)) == want_float;
}

static bool consumed(const op_counter *c, const ts_expr *e) {
  for (int i = 0; i < c->n_consumed; i++)
    if (c->consumed[i] == e) return true;
  return false;
}

static void count_op(void *ctx, ts_expr *e) {
  op_counter *c = ctx;
  ts_expr_kind k = ts_expr_kind_of(e);
  ts_dtype t = ts_expr_dtype(e);
  /* comparisons and logic have bool results: classify by the operands */
  if (ts_expr_is_compare(k) && ts_expr_n_operands(e) > 0)
    t = ts_expr_dtype(ts_expr_operand(e, 0));
  bool fl = is_float_type(t);
  int base = fl ? TS_CM_F_FLOAT_MAD : TS_CM_F_INT_MAD;
  switch (k) {
  case TS_EXPR_ADD:
  case TS_EXPR_SUB: {
    ts_expr *x = ts_expr_operand(e, 0), *y = ts_expr_operand(e, 1);
    const ts_expr *m = is_mul_of(x, fl) ? x : is_mul_of(y, fl) ? y : NULL;
    if (m && c->n_consumed < 64) {
      c->consumed[c->n_consumed++] = m;
      c->n[base + 0]++;
    } else {
      c->n[base + 1]++;
    }
    return;
  }
  case TS_EXPR_MUL:
    if (!consumed(c, e)) c->n[base + 2]++;
    return;
  case TS_EXPR_DIV:
  case TS_EXPR_MOD:
  case TS_EXPR_FLOORDIV:
  case TS_EXPR_FLOORMOD: c->n[base + 3]++; return;
  case TS_EXPR_MIN:
  case TS_EXPR_MAX:
  case TS_EXPR_EQ:
  case TS_EXPR_NE:
  case TS_EXPR_LT:
  case TS_EXPR_LE:
  case TS_EXPR_GT:
  case TS_EXPR_GE: c->n[base + 4]++; return;
  case TS_EXPR_AND:
  case TS_EXPR_OR:
  case TS_EXPR_NOT: c->n[TS_CM_F_BOOL_OP]++; return;
  case TS_EXPR_SELECT: c->n[TS_CM_F_SELECT_OP]++; return;
  case TS_EXPR_CALL: {
    const char *name = ts_expr_call_name(e);
    if (!strcmp(name, "if_then_else")) {
      c->n[TS_CM_F_SELECT_OP]++;
    } else if (!strcmp(name, "fma")) {
      c->n[base + 0]++;
    } else {
      const ts_intrinsic_info *info = ts_intrinsic_lookup(name);
      c->n[base + (info ? 5 : 6)]++;
    }
    return;
  }
  default: return;
  }
}

/* ------------------------------------------------------------------------
 * Buffers touched by one store
 * ------------------------------------------------------------------------ */

typedef struct buf_access {
  const ts_buffer *buffer;
  bool read, write;
  int n_access;
  double elem_bytes;
  form f; /* the union of its accesses' forms */
  int order;
  /* computed */
  double bytes, unique_bytes, lines, unique_lines, stride;
  int reuse_kind; /* 0 loop, 1 serial, 2 none */
  int reuse_dim;
  double reuse_count, reuse_dist_iter, reuse_dist_bytes;
} buf_access;

typedef struct store_ctx {
  walker *w;
  int n_dims;
  bool lane_dim;
  int elem_bits; /* bits of one element of the stored buffer */
  buf_access bufs[MAX_ACCESS_BUFFERS];
  int n_bufs;
} store_ctx;

static void add_access(store_ctx *s, const ts_buffer *b, ts_expr *const *idx,
                       int n_idx, bool write) {
  buf_access *a = NULL;
  for (int i = 0; i < s->n_bufs; i++)
    if (s->bufs[i].buffer == b) a = &s->bufs[i];
  form f;
  access_form(s->w, b, idx, n_idx, s->n_dims, s->lane_dim, &f);
  if (!a) {
    if (s->n_bufs == MAX_ACCESS_BUFFERS) return;
    a = &s->bufs[s->n_bufs];
    memset(a, 0, sizeof *a);
    a->buffer = b;
    a->order = s->n_bufs++;
    a->elem_bytes = (double)ts_dtype_elem_bytes(ts_buffer_dtype(b));
    a->f = f;
  } else {
    for (int d = 0; d < s->n_dims; d++)
      if (fabs(f.c[d]) > fabs(a->f.c[d])) a->f.c[d] = fabs(f.c[d]);
    a->f.nonlin |= f.nonlin;
  }
  a->n_access++;
  if (write)
    a->write = true;
  else
    a->read = true;
}

static void collect_load(void *ctx, ts_expr *e) {
  store_ctx *s = ctx;
  ts_expr_kind k = ts_expr_kind_of(e);
  if (k != TS_EXPR_LOAD && k != TS_EXPR_ADDRESS_OF) return;
  int n = ts_expr_n_operands(e);
  ts_expr *idx[TS_MAX_DIMS];
  for (int i = 0; i < n && i < TS_MAX_DIMS; i++) idx[i] = ts_expr_operand(e, i);
  /* address_of hands a pointer to an intrinsic: read and written */
  add_access(s, ts_expr_buffer(e), idx, n < TS_MAX_DIMS ? n : TS_MAX_DIMS,
             false);
  if (k == TS_EXPR_ADDRESS_OF)
    add_access(s, ts_expr_buffer(e), idx, n < TS_MAX_DIMS ? n : TS_MAX_DIMS,
               true);
}

static bool depends(const form *f, int d) {
  return f->c[d] != 0 || (f->nonlin >> d & 1);
}

/* Distinct elements touched over dims [from, n): terms sorted by stride are
 * added one at a time; a term whose stride clears the span so far multiplies
 * the count, an overlapping one extends the span at the current density. */
static double footprint(const store_ctx *s, const buf_access *a, int from) {
  double cs[MAX_DIMS], ns[MAX_DIMS];
  int m = 0;
  for (int d = from; d < s->n_dims; d++) {
    double n = s->w->loops[d].extent;
    if (n <= 1 || !depends(&a->f, d)) continue;
    double c = fabs(a->f.c[d]);
    if (c == 0) c = 1; /* non-linear dependence, stride unknown */
    int j = m++;
    while (j > 0 && cs[j - 1] > c) {
      cs[j] = cs[j - 1];
      ns[j] = ns[j - 1];
      j--;
    }
    cs[j] = c;
    ns[j] = n;
  }
  double f = 1, span = 1;
  for (int i = 0; i < m; i++) {
    double grown = span + cs[i] * (ns[i] - 1);
    if (cs[i] >= span) {
      f *= ns[i];
    } else {
      double g = f / span * grown;
      f = g < f * ns[i] ? g : f * ns[i];
    }
    span = grown;
  }
  double cap = (double)ts_buffer_storage_elems(a->buffer);
  if (cap > 0 && f > cap) f = cap;
  return f < 1 ? 1 : f;
}

static double product(const walker *w, int from, int to) {
  double p = 1;
  for (int d = from; d < to; d++) p *= w->loops[d].extent;
  return p;
}

static void analyse_buffer(store_ctx *s, buf_access *a, double trip) {
  const walker *w = s->w;
  int n = s->n_dims;
  double eb = a->elem_bytes;
  a->bytes = trip * eb * a->n_access;
  double uniq = footprint(s, a, 0);
  a->unique_bytes = uniq * eb;
  /* the innermost dimension that moves the access */
  int inner = -1;
  for (int d = n - 1; d >= 0; d--)
    if (w->loops[d].extent > 1 && depends(&a->f, d)) {
      inner = d;
      break;
    }
  if (inner < 0) {
    a->lines = 1;
    a->unique_lines = 1;
    a->stride = 0;
  } else {
    double c = fabs(a->f.c[inner]);
    if (c == 0) c = 1;
    double ext = w->loops[inner].extent;
    double step = c * eb;
    double in_loop = step >= CACHE_LINE ? ext : ceil(ext * step / CACHE_LINE);
    a->lines = (in_loop < 1 ? 1 : in_loop) * product(w, 0, inner);
    double per = step < CACHE_LINE ? step : CACHE_LINE;
    a->unique_lines = ceil(uniq * per / CACHE_LINE);
    if (a->unique_lines > uniq) a->unique_lines = uniq;
    a->stride = fabs(a->f.c[inner]);
  }
  /* reuse: the innermost loop of extent > 1 that does not move the access */
  a->reuse_kind = 2;
  a->reuse_dim = -1;
  for (int d = n - 1; d >= 0; d--)
    if (w->loops[d].extent > 1 && !depends(&a->f, d)) {
      a->reuse_kind = 0;
      a->reuse_dim = d;
      a->reuse_count = w->loops[d].extent;
      a->reuse_dist_iter = product(w, d + 1, n);
      break;
    }
  if (a->reuse_kind == 2 && a->n_access > 1) {
    a->reuse_kind = 1;
    a->reuse_count = a->n_access - 1;
    a->reuse_dist_iter = 1;
  }
}

static double logv(double x) { return log2(fabs(x) + 1); }

/* ------------------------------------------------------------------------
 * One row
 * ------------------------------------------------------------------------ */

static float *new_row(walker *w) {
  if (w->n_rows == w->cap_rows) {
    int cap = w->cap_rows ? 2 * w->cap_rows : 8;
    float *r = realloc(w->rows, sizeof(float) * (size_t)cap * TS_CM_N_FEATURES);
    if (!r) return NULL;
    w->rows = r;
    w->cap_rows = cap;
  }
  float *row = w->rows + (size_t)w->n_rows++ * TS_CM_N_FEATURES;
  memset(row, 0, sizeof(float) * TS_CM_N_FEATURES);
  return row;
}

/* Position class of dimension d among the dims of its class (spatial when
 * the stored location depends on it): 0 inner, 1 middle, 2 outer, +3 for
 * reduction. */
static int position_class(const store_ctx *s, const form *store, int d) {
  bool spatial = depends(store, d);
  int first = -1, last = -1;
  for (int i = 0; i < s->n_dims; i++)
    if (depends(store, i) == spatial) {
      if (first < 0) first = i;
      last = i;
    }
  int pos = d == last ? 0 : d == first ? 2 : 1;
  return pos + (spatial ? 0 : 3);
}

static void annotation_features(const store_ctx *s, const form *store,
                                float *row, int base, ts_for_kind kind) {
  const walker *w = s->w;
  double num = 0, prod = 1, inner = 0, outer = 0;
  int cls = -1;
  bool mixed = false;
  for (int d = 0; d < s->n_dims; d++) {
    if (w->loops[d].kind != kind) continue;
    double e = w->loops[d].extent;
    if (num == 0) outer = e;
    inner = e;
    num++;
    prod *= e;
    int c = position_class(s, store, d);
    if (cls >= 0 && c != cls) mixed = true;
    cls = c;
  }
  row[base + 0] = (float)logv(num);
  row[base + 1] = (float)logv(num ? prod : 0);
  row[base + 2] = (float)logv(inner);
  row[base + 3] = (float)logv(outer);
  int onehot = num == 0 ? 7 : mixed ? 6 : cls;
  row[base + 4 + onehot] = 1;
}

static int cmp_buffers(const void *x, const void *y) {
  const buf_access *a = *(const buf_access *const *)x;
  const buf_access *b = *(const buf_access *const *)y;
  if (a->bytes != b->bytes) return a->bytes > b->bytes ? -1 : 1;
  return a->order - b->order;
}

/* Emits the row of one store (or evaluated call) given its accesses. */
static void emit_row(store_ctx *s, const buf_access *target,
                     const op_counter *ops) {
  walker *w = s->w;
  int n = s->n_dims;
  float *row = new_row(w);
  if (!row) {
    w->code = TS_ERR(w->err, TS_ENOMEM, "features: out of memory");
    return;
  }
  double trip = product(w, 0, n);
  for (int i = 0; i <= TS_CM_F_SELECT_OP; i++)
    row[i] = (float)logv(ops->n[i] * trip);
  form store_form;
  if (target)
    store_form = target->f;
  else
    form_zero(&store_form, n);
  annotation_features(s, &store_form, row, TS_CM_F_VEC_NUM, TS_FOR_VECTORIZED);
  annotation_features(s, &store_form, row, TS_CM_F_UNROLL_NUM, TS_FOR_UNROLLED);
  annotation_features(s, &store_form, row, TS_CM_F_PARALLEL_NUM,
                      TS_FOR_PARALLEL);
  /* GPU bindings */
  double bind[7] = {1, 1, 1, 1, 1, 1, 1};
  bool bound[7] = {0};
  static const char *const tags[7] = {
      "blockIdx.x",  "blockIdx.y",  "blockIdx.z", "threadIdx.x",
      "threadIdx.y", "threadIdx.z", "vthread"};
  for (int d = 0; d < n; d++) {
    if (w->loops[d].kind != TS_FOR_THREAD || !w->loops[d].thread_tag) continue;
    for (int t = 0; t < 7; t++)
      if (!strncmp(w->loops[d].thread_tag, tags[t], strlen(tags[t]))) {
        bind[t] *= w->loops[d].extent;
        bound[t] = true;
      }
  }
  row[TS_CM_F_IS_GPU] = w->is_gpu ? 1.0f : 0.0f;
  for (int t = 0; t < 7; t++)
    row[TS_CM_F_BLOCKIDX_X_LEN + t] = (float)logv(bound[t] ? bind[t] : 0);
  /* buffers */
  for (int i = 0; i < s->n_bufs; i++) analyse_buffer(s, &s->bufs[i], trip);
  for (int i = 0; i < s->n_bufs; i++) {
    buf_access *a = &s->bufs[i];
    if (a->reuse_kind == 0) {
      double sum = 0;
      for (int j = 0; j < s->n_bufs; j++)
        sum +=
            footprint(s, &s->bufs[j], a->reuse_dim + 1) * s->bufs[j].elem_bytes;
      a->reuse_dist_bytes = sum;
    } else if (a->reuse_kind == 1) {
      double sum = 0;
      for (int j = 0; j < s->n_bufs; j++) sum += s->bufs[j].elem_bytes;
      a->reuse_dist_bytes = sum;
    }
  }
  const buf_access *sorted[MAX_ACCESS_BUFFERS];
  for (int i = 0; i < s->n_bufs; i++) sorted[i] = &s->bufs[i];
  qsort(sorted, (size_t)s->n_bufs, sizeof sorted[0], cmp_buffers);
  for (int k = 0; k < s->n_bufs && k < N_BUFFER_SLOTS; k++) {
    const buf_access *a = sorted[k];
    float *b = row + TS_CM_F_BUF0_READ + k * N_BUFFER_FEATURES;
    int acc = a->read && a->write ? 2 : a->write ? 1 : 0;
    b[acc] = 1;
    b[3] = (float)logv(a->bytes);
    b[4] = (float)logv(a->unique_bytes);
    b[5] = (float)logv(a->lines);
    b[6] = (float)logv(a->unique_lines);
    b[7 + a->reuse_kind] = 1;
    double ct = a->reuse_kind == 2 ? 0 : a->reuse_count;
    double div = ct > 1 ? ct : 1;
    b[10] = (float)logv(a->reuse_kind == 2 ? 0 : a->reuse_dist_iter);
    b[11] = (float)logv(a->reuse_kind == 2 ? 0 : a->reuse_dist_bytes);
    b[12] = (float)logv(ct);
    b[13] = (float)logv(a->bytes / div);
    b[14] = (float)logv(a->unique_bytes / div);
    b[15] = (float)logv(a->lines / div);
    b[16] = (float)logv(a->unique_lines / div);
    b[17] = (float)logv(a->stride);
  }
  /* arithmetic intensity curve over cut depths 0..n */
  double flops = ops->n[TS_CM_F_FLOAT_MAD] * 2 + ops->n[TS_CM_F_FLOAT_ADDSUB] +
                 ops->n[TS_CM_F_FLOAT_MUL] + ops->n[TS_CM_F_FLOAT_DIVMOD] +
                 ops->n[TS_CM_F_FLOAT_CMP] + ops->n[TS_CM_F_FLOAT_MATH_FUNC] +
                 ops->n[TS_CM_F_FLOAT_OTHER_FUNC];
  if (flops == 0)
    flops = ops->n[TS_CM_F_INT_MAD] * 2 + ops->n[TS_CM_F_INT_MUL] +
            ops->n[TS_CM_F_INT_MATH_FUNC] + ops->n[TS_CM_F_INT_OTHER_FUNC] +
            ops->n[TS_CM_F_SELECT_OP];
  double curve[MAX_DIMS + 1];
  for (int c = 0; c <= n; c++) {
    double bytes = 0;
    for (int j = 0; j < s->n_bufs; j++)
      bytes += footprint(s, &s->bufs[j], c) * s->bufs[j].elem_bytes;
    double work = flops * product(w, c, n);
    curve[c] = bytes > 0 ? work / bytes : work;
  }
  for (int k = 0; k < N_CURVE; k++) {
    double x = (double)k * n / (N_CURVE - 1);
    int lo = (int)floor(x);
    int hi = lo + 1 <= n ? lo + 1 : n;
    double t = x - lo;
    row[TS_CM_F_INTENSITY_0 + k] =
        (float)logv(curve[lo] * (1 - t) + curve[hi] * t);
  }
  /* allocation */
  bool allocated = false;
  if (target)
    for (int i = 0; i < w->n_allocs; i++)
      if (w->allocs[i].buffer == target->buffer) {
        allocated = true;
        row[TS_CM_F_ALLOC_BYTES] = (float)logv(w->allocs[i].bytes);
        row[TS_CM_F_ALLOC_EXECS] = (float)logv(w->allocs[i].execs);
      }
  row[TS_CM_F_FUNC_ALLOC_BYTES] = (float)logv(w->func_alloc_bytes);
  row[TS_CM_F_FUNC_ALLOC_COUNT] = (float)logv(w->func_alloc_count);
  /* loop nest and lowering */
  int64_t unroll = 0;
  int fallbacks = 0;
  double par = 1;
  bool has_par = false;
  for (int d = 0; d < n; d++) {
    if (w->loops[d].auto_unroll > unroll) unroll = w->loops[d].auto_unroll;
    fallbacks += w->loops[d].fallback;
    if (w->loops[d].kind == TS_FOR_PARALLEL) {
      par *= w->loops[d].extent;
      has_par = true;
    }
  }
  row[TS_CM_F_OUTER_PROD] = (float)logv(trip);
  row[TS_CM_F_NUM_LOOPS] = (float)logv(n);
  row[TS_CM_F_AUTO_UNROLL_MAX_STEP] = (float)logv((double)unroll);
  row[TS_CM_F_GUARDS] = (float)logv(w->guards);
  row[TS_CM_F_VECTORIZE_FALLBACKS] = (float)logv(fallbacks);
  int64_t lanes = s->lane_dim ? w->loops[n - 1].extent : 1;
  row[TS_CM_F_STORE_LANES] = (float)logv((double)lanes);
  double vbits = w->vector_bits > 0 ? w->vector_bits : 128;
  row[TS_CM_F_STORE_VECTOR_REGISTERS] = (float)logv(
      ceil((double)lanes * (s->elem_bits > 0 ? s->elem_bits : 32) / vbits));
  double cores = w->cores > 0 ? w->cores : 1;
  double balance = has_par ? par / (ceil(par / cores) * cores) : 1;
  row[TS_CM_F_PARALLEL_BALANCE] = (float)logv(balance);
  row[TS_CM_F_WORK_PER_TASK] = (float)logv(has_par ? trip / par : 0);
  double dispatches = 0;
  for (int d = 0; d < n; d++)
    if (w->loops[d].kind == TS_FOR_PARALLEL) {
      dispatches = product(w, 0, d);
      break;
    }
  row[TS_CM_F_PARALLEL_DISPATCHES] = (float)logv(dispatches);
  row[TS_CM_F_FUNC_PARALLEL_DISPATCHES] = (float)logv(w->func_dispatches);
  /* a whole-vector store to a parameter under pragma_nontemporal (what the
   * code generator writes past the caches) */
  bool nt = false;
  for (int d = 0; d < n; d++) nt = nt || w->loops[d].nontemporal;
  row[TS_CM_F_NONTEMPORAL] = nt && target && !allocated && lanes > 1;
  /* the innermost loop */
  if (n > 0) {
    int d = n - 1;
    row[TS_CM_F_INNER_LEN] = (float)logv(w->loops[d].extent);
    row[TS_CM_F_INNER_REDUCE] = depends(&store_form, d) ? 0.0f : 1.0f;
    bool contiguous = true;
    for (int i = 0; i < s->n_bufs; i++) {
      const form *f = &s->bufs[i].f;
      if ((f->nonlin >> d & 1) || fabs(f->c[d]) > 1) contiguous = false;
    }
    row[TS_CM_F_INNER_CONTIGUOUS] = contiguous ? 1.0f : 0.0f;
  }
}

/* Sets up the dims of a store whose vector width is `lanes`. */
static void begin_store(store_ctx *s, walker *w, int lanes) {
  memset(s, 0, sizeof *s);
  s->w = w;
  s->n_dims = w->n_loops;
  if (lanes > 1) {
    loop_info *l = &w->loops[w->n_loops];
    memset(l, 0, sizeof *l);
    l->extent = lanes;
    l->kind = TS_FOR_VECTORIZED;
    s->lane_dim = true;
    s->n_dims++;
  }
}

static void visit_store(walker *w, ts_stmt *st) {
  ts_buffer *b = ts_store_buffer(st);
  int n_idx = ts_store_n_indices(st);
  ts_expr *idx[TS_MAX_DIMS];
  int lanes = 1;
  for (int i = 0; i < n_idx && i < TS_MAX_DIMS; i++) {
    idx[i] = ts_store_index(st, i);
    int l = ts_expr_dtype(idx[i]).lanes;
    if (l > lanes) lanes = l;
  }
  int vl = ts_expr_dtype(ts_store_value(st)).lanes;
  if (vl > lanes) lanes = vl;
  store_ctx s;
  begin_store(&s, w, lanes);
  s.elem_bits = ts_buffer_dtype(b).bits;
  add_access(&s, b, idx, n_idx < TS_MAX_DIMS ? n_idx : TS_MAX_DIMS, true);
  ts_expr_walk(ts_store_value(st), collect_load, &s);
  for (int i = 0; i < n_idx && i < TS_MAX_DIMS; i++)
    ts_expr_walk(idx[i], collect_load, &s);
  op_counter ops;
  memset(&ops, 0, sizeof ops);
  ts_expr_walk(ts_store_value(st), count_op, &ops);
  for (int i = 0; i < n_idx && i < TS_MAX_DIMS; i++)
    ts_expr_walk(idx[i], count_op, &ops);
  emit_row(&s, &s.bufs[0], &ops);
}

static void visit_evaluate(walker *w, ts_stmt *st) {
  ts_expr *v = ts_evaluate_value(st);
  if (ts_expr_kind_of(v) != TS_EXPR_CALL) return;
  store_ctx s;
  begin_store(&s, w, ts_expr_dtype(v).lanes);
  ts_expr_walk(v, collect_load, &s);
  op_counter ops;
  memset(&ops, 0, sizeof ops);
  ts_expr_walk(v, count_op, &ops);
  const buf_access *target = NULL;
  for (int i = 0; i < s.n_bufs && !target; i++)
    if (s.bufs[i].write) target = &s.bufs[i];
  emit_row(&s, target, &ops);
}

/* ------------------------------------------------------------------------
 * The walk
 * ------------------------------------------------------------------------ */

static double const_extent(const ts_expr *e) {
  int64_t v, lo, hi;
  if (ts_expr_is_const_int(e, &v)) return v > 0 ? (double)v : 0;
  if (ts_expr_const_bound(e, NULL, &lo, &hi)) return hi > 0 ? (double)hi : 0;
  return 1;
}

static bool push_let(walker *w, const ts_expr *var, const ts_expr *value) {
  if (w->n_lets == w->cap_lets) {
    int cap = w->cap_lets ? 2 * w->cap_lets : 8;
    let_bind *l = realloc(w->lets, sizeof *l * (size_t)cap);
    if (!l) return false;
    w->lets = l;
    w->cap_lets = cap;
  }
  w->lets[w->n_lets++] = (let_bind){var, value};
  return true;
}

static void walk(walker *w, ts_stmt *s) {
  if (!s || w->code) return;
  switch (ts_stmt_kind_of(s)) {
  case TS_STMT_FOR: {
    if (w->n_loops >= MAX_LOOPS) {
      w->code = TS_ERR(w->err, TS_EUNSUPPORTED,
                       "features: loop nest deeper than %d loops at loop '%s'",
                       MAX_LOOPS, ts_var_name(ts_for_var(s)));
      return;
    }
    loop_info *l = &w->loops[w->n_loops];
    memset(l, 0, sizeof *l);
    l->var = ts_for_var(s);
    l->extent = const_extent(ts_for_extent(s));
    l->kind = ts_for_kind_of(s);
    l->thread_tag = ts_for_thread_tag(s);
    const ts_annotation *a =
        ts_for_find_annotation(s, TS_ANN_AUTO_UNROLL_MAX_STEP);
    if (a && a->kind == TS_ANN_INT) l->auto_unroll = a->i;
    l->fallback = ts_for_find_annotation(s, TS_ANN_VECTORIZE_FALLBACK) != NULL;
    const ts_annotation *nt = ts_for_find_annotation(s, TS_ANN_NONTEMPORAL);
    l->nontemporal = nt && nt->kind == TS_ANN_INT && nt->i;
    w->n_loops++;
    walk(w, ts_for_body(s));
    w->n_loops--;
    return;
  }
  case TS_STMT_SEQ:
    for (int i = 0; i < ts_seq_n(s); i++) walk(w, ts_seq_item(s, i));
    return;
  case TS_STMT_IF:
    w->guards++;
    walk(w, ts_if_then(s));
    walk(w, ts_if_else(s));
    w->guards--;
    return;
  case TS_STMT_LET:
    if (!push_let(w, ts_let_stmt_var(s), ts_let_stmt_value(s))) {
      w->code = TS_ERR(w->err, TS_ENOMEM, "features: out of memory");
      return;
    }
    walk(w, ts_let_stmt_body(s));
    w->n_lets--;
    return;
  case TS_STMT_ALLOCATE: {
    if (w->n_allocs == w->cap_allocs) {
      int cap = w->cap_allocs ? 2 * w->cap_allocs : 8;
      alloc_info *al = realloc(w->allocs, sizeof *al * (size_t)cap);
      if (!al) {
        w->code = TS_ERR(w->err, TS_ENOMEM, "features: out of memory");
        return;
      }
      w->allocs = al;
      w->cap_allocs = cap;
    }
    const ts_buffer *b = ts_allocate_buffer(s);
    w->allocs[w->n_allocs++] =
        (alloc_info){b, (double)ts_buffer_bytes(b), product(w, 0, w->n_loops)};
    walk(w, ts_allocate_body(s));
    return;
  }
  case TS_STMT_STORE: visit_store(w, s); return;
  case TS_STMT_EVALUATE: visit_evaluate(w, s); return;
  case TS_STMT_BLOCK_REALIZE: {
    ts_block *b = ts_realize_block(s);
    walk(w, ts_block_init(b));
    walk(w, ts_block_body(b));
    return;
  }
  default: return;
  }
}

/* Function-wide facts gathered before the rows: allocations, GPU code,
 * blocks. */
typedef struct prepass {
  double alloc_bytes, alloc_count;
  bool has_blocks, has_threads;
} prepass;

static bool prepass_enter(void *ctx, ts_stmt *s) {
  prepass *p = ctx;
  switch (ts_stmt_kind_of(s)) {
  case TS_STMT_ALLOCATE:
    p->alloc_bytes += (double)ts_buffer_bytes(ts_allocate_buffer(s));
    p->alloc_count++;
    break;
  case TS_STMT_BLOCK_REALIZE: {
    p->has_blocks = true;
    ts_block *b = ts_realize_block(s);
    for (int i = 0; i < ts_block_n_allocs(b); i++) {
      p->alloc_bytes += (double)ts_buffer_bytes(ts_block_alloc(b, i));
      p->alloc_count++;
    }
    break;
  }
  case TS_STMT_FOR:
    if (ts_for_kind_of(s) == TS_FOR_THREAD) p->has_threads = true;
    break;
  default: break;
  }
  return true;
}

/* Parallel loops started per call: each outermost parallel loop counts the
 * product of the extents of the loops outside it. */
static double count_dispatches(const ts_stmt *s, double outer, int depth) {
  if (!s || depth > 256) return 0;
  switch (ts_stmt_kind_of(s)) {
  case TS_STMT_FOR:
    if (ts_for_kind_of(s) == TS_FOR_PARALLEL) return outer;
    return count_dispatches(ts_for_body(s),
                            outer * const_extent(ts_for_extent(s)), depth + 1);
  case TS_STMT_SEQ: {
    double sum = 0;
    for (int i = 0; i < ts_seq_n(s); i++)
      sum += count_dispatches(ts_seq_item(s, i), outer, depth + 1);
    return sum;
  }
  case TS_STMT_IF:
    return count_dispatches(ts_if_then(s), outer, depth + 1) +
           count_dispatches(ts_if_else(s), outer, depth + 1);
  case TS_STMT_LET:
    return count_dispatches(ts_let_stmt_body(s), outer, depth + 1);
  case TS_STMT_ALLOCATE:
    return count_dispatches(ts_allocate_body(s), outer, depth + 1);
  case TS_STMT_BLOCK_REALIZE: {
    ts_block *b = ts_realize_block(s);
    return count_dispatches(ts_block_init(b), outer, depth + 1) +
           count_dispatches(ts_block_body(b), outer, depth + 1);
  }
  default: return 0;
  }
}

static bool has_blocks(const ts_func *f) {
  prepass p = {0};
  ts_visitor v = {.enter_stmt = prepass_enter, .ctx = &p};
  ts_stmt_walk(ts_func_body(f), &v);
  return p.has_blocks;
}

/* The feature pipeline: ts_lower through vectorization, without the range
 * simplification, compaction, partitioning and unrolling (unrolled loops
 * stay loops, allocations keep their scheduled size). requires: block form
 * | breaks: blocks, buffer shapes. */
static ts_func *lower_for_features(const ts_func *in, ts_error *err) {
  ts_lower_options o = ts_lower_defaults();
  o.verify_between = false; /* extraction never verifies, even with TS_VERIFY */
  o.last = TS_LOWER_STEP_VECTORIZE;
  o.skip = TS_LOWER_SKIP(TS_LOWER_STEP_RANGE_SIMPLIFY) |
           TS_LOWER_SKIP(TS_LOWER_STEP_COMPACT) |
           TS_LOWER_SKIP(TS_LOWER_STEP_PREFETCH) |
           TS_LOWER_SKIP(TS_LOWER_STEP_PARTITION) |
           TS_LOWER_SKIP(TS_LOWER_STEP_UNROLL);
  return ts_lower(in, &o, err);
}

int ts_cm_extract(const ts_func *f, const ts_target *target,
                  ts_cm_features *out, ts_error *err) {
  memset(out, 0, sizeof *out);
  if (!f) return TS_ERR(err, TS_EINVAL, "features: no function");
  double t0 = ts_now_seconds();
  ts_func *lowered = NULL;
  if (has_blocks(f)) {
    ts_error lerr;
    ts_error_clear(&lerr);
    lowered = lower_for_features(f, &lerr);
    if (!lowered)
      return TS_ERR(err, lerr.code ? lerr.code : TS_EINTERNAL,
                    "features: lowering '%s' failed: %s", ts_func_name(f),
                    lerr.msg);
    f = lowered;
  }
  prepass p = {0};
  ts_visitor v = {.enter_stmt = prepass_enter, .ctx = &p};
  ts_stmt_walk(ts_func_body(f), &v);
  walker *w = calloc(1, sizeof *w);
  if (!w) {
    ts_func_free(lowered);
    return TS_ERR(err, TS_ENOMEM, "features: out of memory");
  }
  w->err = err;
  w->cores = target ? ts_target_num_cores(target) : 1;
  w->vector_bits = target ? ts_target_vector_bits(target) : 128;
  w->is_gpu = p.has_threads || (target && ts_target_facts_of(target)->is_gpu);
  w->func_alloc_bytes = p.alloc_bytes;
  w->func_alloc_count = p.alloc_count;
  w->func_dispatches = count_dispatches(ts_func_body(f), 1, 0);
  walk(w, ts_func_body(f));
  int rc = w->code;
  if (!rc) {
    out->n_rows = w->n_rows;
    out->values = w->rows;
    w->rows = NULL;
    out->extract_ms = (ts_now_seconds() - t0) * 1e3;
  }
  free(w->rows);
  free(w->lets);
  free(w->allocs);
  free(w);
  ts_func_free(lowered);
  return rc;
}

void ts_cm_features_clear(ts_cm_features *f) {
  if (!f) return;
  free(f->values);
  memset(f, 0, sizeof *f);
}

int ts_cm_features_copy(ts_cm_features *dst, const ts_cm_features *src) {
  memset(dst, 0, sizeof *dst);
  size_t n = (size_t)src->n_rows * TS_CM_N_FEATURES;
  if (n) {
    dst->values = malloc(sizeof(float) * n);
    if (!dst->values) return TS_ENOMEM;
    memcpy(dst->values, src->values, sizeof(float) * n);
  }
  dst->n_rows = src->n_rows;
  dst->extract_ms = src->extract_ms;
  return TS_OK;
}

char *ts_cm_features_print(const ts_cm_features *f) {
  size_t cap = 4096, len = 0;
  char *s = malloc(cap);
  if (!s) return NULL;
  s[0] = 0;
  for (int r = 0; r < f->n_rows; r++) {
    for (int i = -1; i < TS_CM_N_FEATURES; i++) {
      char line[160];
      int n;
      if (i < 0) {
        n = snprintf(line, sizeof line, "store %d:\n", r);
      } else {
        float v = f->values[(size_t)r * TS_CM_N_FEATURES + i];
        if (v == 0) continue;
        n = snprintf(line, sizeof line, "  %3d %-32s %9.4f  (%.6g)\n", i,
                     names[i], v, exp2((double)v) - 1);
      }
      if (len + (size_t)n + 1 > cap) {
        cap = 2 * cap + (size_t)n;
        char *t = realloc(s, cap);
        if (!t) {
          free(s);
          return NULL;
        }
        s = t;
      }
      memcpy(s + len, line, (size_t)n + 1);
      len += (size_t)n;
    }
  }
  return s;
}
