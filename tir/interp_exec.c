/*
 * interp_exec.c — the reference interpreter's run: value conversions,
 * buffer element access, expression evaluation, the intrinsics and
 * statement execution over the tree interp_compile.c builds. The semantics
 * are listed in interp.c.
 */
#include "interp_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- value helpers ---- */

static inline double as_double(value v, int cls) {
  if (class_is_float(cls)) return v.f;
  if (cls == VC_UINT) return (double)(uint64_t)v.i;
  return (double)v.i;
}

/* float -> integer: truncate, saturate, NaN -> 0. */
static int64_t float_to_int(double v, int cls, int bits) {
  if (cls == VC_BOOL) return v != 0;
  if (isnan(v)) return 0;
  v = trunc(v);
  if (cls == VC_INT) {
    double lim = ldexp(1.0, bits - 1); /* 2^(bits-1), exact */
    if (v >= lim) return bits >= 64 ? INT64_MAX : (int64_t)(lim - 1);
    if (v <= -lim) return bits >= 64 ? INT64_MIN : (int64_t)-lim;
    return (int64_t)v;
  }
  double lim = ldexp(1.0, bits); /* 2^bits */
  if (v <= 0) return 0;
  if (v >= lim) return bits >= 64 ? (int64_t)UINT64_MAX : (int64_t)(lim - 1);
  return (int64_t)(uint64_t)v;
}

/* Converts v of class `from` to class `to` (bits: of the target). */
value interp_convert(value v, int from, int to, int bits) {
  value r;
  if (class_is_float(to)) {
    if (class_is_float(from)) {
      r.f = round_cls(v.f, to);
    } else if (to == VC_F32) {
      r.f = from == VC_UINT ? (double)(float)(uint64_t)v.i : (double)(float)v.i;
    } else {
      r.f = round_cls(as_double(v, from), to);
    }
  } else if (class_is_float(from)) {
    r.i = float_to_int(v.f, to, bits);
  } else {
    r.i = wrap(v.i, to, bits);
  }
  return r;
}

/* ---- buffers ---- */

static inline value read_elem(const rbuf *b, int64_t off) {
  const char *p = b->data + off * b->esize;
  value r;
  switch (b->skind) {
  case SK_I8: {
    int8_t x;
    memcpy(&x, p, 1);
    r.i = x;
    break;
  }
  case SK_I16: {
    int16_t x;
    memcpy(&x, p, 2);
    r.i = x;
    break;
  }
  case SK_I32: {
    int32_t x;
    memcpy(&x, p, 4);
    r.i = x;
    break;
  }
  case SK_I64: memcpy(&r.i, p, 8); break;
  case SK_U8: {
    uint8_t x;
    memcpy(&x, p, 1);
    r.i = x;
    break;
  }
  case SK_U16: {
    uint16_t x;
    memcpy(&x, p, 2);
    r.i = x;
    break;
  }
  case SK_U32: {
    uint32_t x;
    memcpy(&x, p, 4);
    r.i = x;
    break;
  }
  case SK_U64: memcpy(&r.i, p, 8); break;
  case SK_BOOL: r.i = *(const unsigned char *)p != 0; break;
  case SK_F16: {
    uint16_t x;
    memcpy(&x, p, 2);
    r.f = ts_f16_to_f32(x);
    break;
  }
  case SK_BF16: {
    uint16_t x;
    memcpy(&x, p, 2);
    r.f = ts_bf16_to_f32(x);
    break;
  }
  case SK_F32: {
    float x;
    memcpy(&x, p, 4);
    r.f = x;
    break;
  }
  default: memcpy(&r.f, p, 8); break;
  }
  return r;
}

static inline void write_elem(rbuf *b, int64_t off, value v) {
  char *p = b->data + off * b->esize;
  switch (b->skind) {
  case SK_I8:
  case SK_U8: {
    uint8_t x = (uint8_t)v.i;
    memcpy(p, &x, 1);
    break;
  }
  case SK_I16:
  case SK_U16: {
    uint16_t x = (uint16_t)v.i;
    memcpy(p, &x, 2);
    break;
  }
  case SK_I32:
  case SK_U32: {
    uint32_t x = (uint32_t)v.i;
    memcpy(p, &x, 4);
    break;
  }
  case SK_I64:
  case SK_U64: memcpy(p, &v.i, 8); break;
  case SK_BOOL: *(unsigned char *)p = v.i != 0; break;
  case SK_F16: {
    uint16_t x = ts_f32_to_f16((float)v.f);
    memcpy(p, &x, 2);
    break;
  }
  case SK_BF16: {
    uint16_t x = ts_f32_to_bf16((float)v.f);
    memcpy(p, &x, 2);
    break;
  }
  case SK_F32: {
    float x = (float)v.f;
    memcpy(p, &x, 4);
    break;
  }
  default: memcpy(p, &v.f, 8); break;
  }
}

/* ---- evaluation ---- */

static value eval(interp *in, const cexpr *e, int lane);

static const value zero_value;

/* eval with the leaves (constants, scalar vars) inline: most nodes are
 * leaves, so this saves most calls. */
static inline value ev(interp *in, const cexpr *e, int lane) {
  if (e->kind == TS_EXPR_VAR && e->lanes == 1) return in->vals[e->slot];
  if (e->kind == TS_EXPR_INT || e->kind == TS_EXPR_FLOAT) return e->imm;
  return eval(in, e, lane);
}

/* Integer arithmetic of kind k on x, y of class cls; faults on division by
 * zero. The result is not yet wrapped. */
static int64_t int_arith(interp *in, int k, int cls, int64_t x, int64_t y) {
  uint64_t ux = (uint64_t)x, uy = (uint64_t)y;
  switch (k) {
  case TS_EXPR_ADD: return (int64_t)(ux + uy);
  case TS_EXPR_SUB: return (int64_t)(ux - uy);
  case TS_EXPR_MUL: return (int64_t)(ux * uy);
  case TS_EXPR_MIN:
    if (cls == VC_UINT) return ux < uy ? x : y;
    return x < y ? x : y;
  case TS_EXPR_MAX:
    if (cls == VC_UINT) return ux > uy ? x : y;
    return x > y ? x : y;
  default: break;
  }
  /* division family */
  if (y == 0) {
    FAIL(in, TS_ERANGE, "integer division by zero in %s",
         ts_expr_kind_name((ts_expr_kind)k));
    return 0;
  }
  if (cls == VC_UINT) {
    if (k == TS_EXPR_DIV || k == TS_EXPR_FLOORDIV) return (int64_t)(ux / uy);
    return (int64_t)(ux % uy);
  }
  if (y == -1) /* avoids INT64_MIN / -1; wraps like two's complement */
    return (k == TS_EXPR_DIV || k == TS_EXPR_FLOORDIV) ? (int64_t)(0 - ux) : 0;
  switch (k) {
  case TS_EXPR_DIV: return x / y;
  case TS_EXPR_MOD: return x % y;
  case TS_EXPR_FLOORDIV: {
    int64_t q = x / y;
    if (x % y != 0 && ((x < 0) != (y < 0))) q--;
    return q;
  }
  default: { /* FLOORMOD */
    int64_t r = x % y;
    if (r != 0 && ((r < 0) != (y < 0))) r += y;
    return r;
  }
  }
}

static double float_arith(int k, int cls, double x, double y) {
  switch (k) {
  case TS_EXPR_ADD: return round_cls(x + y, cls);
  case TS_EXPR_SUB: return round_cls(x - y, cls);
  case TS_EXPR_MUL: return round_cls(x * y, cls);
  case TS_EXPR_DIV: return round_cls(x / y, cls);
  case TS_EXPR_MOD: return round_cls(fmod(x, y), cls);
  case TS_EXPR_FLOORDIV: return floor(round_cls(x / y, cls));
  case TS_EXPR_FLOORMOD: {
    double q = floor(round_cls(x / y, cls));
    return round_cls(x - round_cls(q * y, cls), cls);
  }
  case TS_EXPR_MIN: return fmin(x, y);
  default: return fmax(x, y); /* MAX */
  }
}

static bool compare(int k, int cls, value x, value y) {
  if (class_is_float(cls)) {
    switch (k) {
    case TS_EXPR_EQ: return x.f == y.f;
    case TS_EXPR_NE: return x.f != y.f;
    case TS_EXPR_LT: return x.f < y.f;
    case TS_EXPR_LE: return x.f <= y.f;
    case TS_EXPR_GT: return x.f > y.f;
    default: return x.f >= y.f;
    }
  }
  if (cls == VC_UINT) {
    uint64_t a = (uint64_t)x.i, b = (uint64_t)y.i;
    switch (k) {
    case TS_EXPR_EQ: return a == b;
    case TS_EXPR_NE: return a != b;
    case TS_EXPR_LT: return a < b;
    case TS_EXPR_LE: return a <= b;
    case TS_EXPR_GT: return a > b;
    default: return a >= b;
    }
  }
  switch (k) {
  case TS_EXPR_EQ: return x.i == y.i;
  case TS_EXPR_NE: return x.i != y.i;
  case TS_EXPR_LT: return x.i < y.i;
  case TS_EXPR_LE: return x.i <= y.i;
  case TS_EXPR_GT: return x.i > y.i;
  default: return x.i >= y.i;
  }
}

/* Formats "B[i0, i1, ...]" with the indices of access e (or a store) at
 * `lane` into buf. */
static void format_access(interp *in, const char *name, cexpr *const *idx,
                          int n, int lane, char *buf, size_t cap) {
  size_t len = (size_t)snprintf(buf, cap, "%s[", name);
  for (int d = 0; d < n && len < cap; d++) {
    int64_t v = ev(in, idx[d], lane).i;
    len += (size_t)snprintf(buf + len, cap - len, "%s%lld", d ? ", " : "",
                            (long long)v);
  }
  if (len < cap) snprintf(buf + len, cap - len, "]");
}

/* Computes the element offset of buffer b at idx (lane `lane`); faults
 * (returning -1) when an index is out of its dimension. */
static int64_t access_offset(interp *in, const rbuf *b, cexpr *const *idx,
                             int n, int lane, const char *what, int lanes) {
  int64_t off = 0;
  for (int d = 0; d < n; d++) {
    int64_t ix = ev(in, idx[d], lane).i;
    if ((uint64_t)ix >= (uint64_t)b->shape[d]) {
      if (in->failed) return -1;
      char acc[256], lane_note[32] = "";
      format_access(in, b->name, idx, n, lane, acc, sizeof acc);
      if (lanes > 1) snprintf(lane_note, sizeof lane_note, " (lane %d)", lane);
      FAIL(in, TS_ERANGE,
           "%s of buffer '%s' out of bounds at %s%s: index %lld of dim %d "
           "is outside [0, %lld)",
           what, b->name, acc, lane_note, (long long)ix, d,
           (long long)b->shape[d]);
      return -1;
    }
    off += ix * b->strides[d];
  }
  return in->failed ? -1 : off;
}

static value eval_call(interp *in, const cexpr *e, int lane) {
  const intrinsic_impl *im = e->intrin;
  if (im->math) {
    const cexpr *x = e->ops[0];
    double r = im->math(as_double(ev(in, x, lane), x->cls));
    value v = {.f = r};
    return interp_convert(v, VC_F64, e->cls, e->bits);
  }
  return im->eval(in, e, lane);
}

static value eval(interp *in, const cexpr *e, int lane) {
  if (lane >= e->lanes) lane = e->lanes == 1 ? 0 : lane % e->lanes;
  value r;
  switch (e->kind) {
  case TS_EXPR_INT:
  case TS_EXPR_FLOAT: return e->imm;
  case TS_EXPR_VAR: return in->vals[e->slot + lane];
  case TS_EXPR_ADD:
  case TS_EXPR_SUB:
  case TS_EXPR_MUL:
  case TS_EXPR_DIV:
  case TS_EXPR_MOD:
  case TS_EXPR_FLOORDIV:
  case TS_EXPR_FLOORMOD:
  case TS_EXPR_MIN:
  case TS_EXPR_MAX: {
    value x = ev(in, e->ops[0], lane), y = ev(in, e->ops[1], lane);
    if (class_is_float(e->cls))
      r.f = float_arith(e->kind, e->cls, x.f, y.f);
    else
      r.i = wrap(int_arith(in, e->kind, e->cls, x.i, y.i), e->cls, e->bits);
    return r;
  }
  case TS_EXPR_EQ:
  case TS_EXPR_NE:
  case TS_EXPR_LT:
  case TS_EXPR_LE:
  case TS_EXPR_GT:
  case TS_EXPR_GE: {
    value x = ev(in, e->ops[0], lane), y = ev(in, e->ops[1], lane);
    r.i = compare(e->kind, e->ocls, x, y);
    return r;
  }
  case TS_EXPR_AND: {
    int64_t x = ev(in, e->ops[0], lane).i, y = ev(in, e->ops[1], lane).i;
    r.i = x != 0 && y != 0;
    return r;
  }
  case TS_EXPR_OR: {
    int64_t x = ev(in, e->ops[0], lane).i, y = ev(in, e->ops[1], lane).i;
    r.i = x != 0 || y != 0;
    return r;
  }
  case TS_EXPR_NOT: r.i = ev(in, e->ops[0], lane).i == 0; return r;
  case TS_EXPR_SELECT: {
    int64_t c = ev(in, e->ops[0], lane).i;
    value t = ev(in, e->ops[1], lane), f = ev(in, e->ops[2], lane);
    return c ? t : f;
  }
  case TS_EXPR_CAST:
    return interp_convert(ev(in, e->ops[0], lane), e->ocls, e->cls, e->bits);
  case TS_EXPR_LOAD: {
    const rbuf *b = &in->bufs[e->slot];
    int64_t off = access_offset(in, b, e->ops, e->n, lane, "load", e->lanes);
    if (off < 0) return zero_value;
    if (b->shared >= 0)
      gpu_shared_access(in->gpu, b->shared, off, false, false);
    return read_elem(b, off);
  }
  case TS_EXPR_RAMP: {
    value base = ev(in, e->ops[0], lane), stride = ev(in, e->ops[1], lane);
    if (class_is_float(e->cls)) {
      r.f = round_cls(base.f + round_cls(stride.f * lane, e->cls), e->cls);
    } else {
      r.i = wrap(
          (int64_t)((uint64_t)base.i + (uint64_t)stride.i * (uint64_t)lane),
          e->cls, e->bits);
    }
    return r;
  }
  case TS_EXPR_BROADCAST: return ev(in, e->ops[0], lane);
  case TS_EXPR_CALL: return eval_call(in, e, lane);
  case TS_EXPR_LET:
    in->vals[e->slot + lane % e->aux] = ev(in, e->ops[0], lane);
    return ev(in, e->ops[1], lane);
  default: return zero_value; /* rejected when compiling */
  }
}

/* ---- intrinsics ---- */

static double rsqrt_d(double x) { return 1.0 / sqrt(x); }
static double sigmoid_d(double x) { return 1.0 / (1.0 + exp(-x)); }

static value call_pow(interp *in, const cexpr *e, int lane) {
  double x = as_double(ev(in, e->ops[0], lane), e->ops[0]->cls);
  double y = as_double(ev(in, e->ops[1], lane), e->ops[1]->cls);
  value v = {.f = pow(x, y)};
  return interp_convert(v, VC_F64, e->cls, e->bits);
}

static value call_fma(interp *in, const cexpr *e, int lane) {
  double x = as_double(ev(in, e->ops[0], lane), e->ops[0]->cls);
  double y = as_double(ev(in, e->ops[1], lane), e->ops[1]->cls);
  double z = as_double(ev(in, e->ops[2], lane), e->ops[2]->cls);
  value v = {.f = fma(x, y, z)};
  return interp_convert(v, VC_F64, e->cls, e->bits);
}

static value call_abs(interp *in, const cexpr *e, int lane) {
  const cexpr *a = e->ops[0];
  value x = ev(in, a, lane), r;
  if (class_is_float(a->cls)) {
    r.f = fabs(x.f);
    return interp_convert(r, a->cls, e->cls, e->bits);
  }
  if (a->cls == VC_INT && x.i < 0) x.i = (int64_t)(0 - (uint64_t)x.i);
  return interp_convert(x, a->cls, e->cls, e->bits);
}

static value call_if_then_else(interp *in, const cexpr *e, int lane) {
  if (ev(in, e->ops[0], lane).i) return ev(in, e->ops[1], lane);
  return ev(in, e->ops[2], lane);
}

/* GPU mode: __syncthreads and __shfl_down_sync (full warp, width 32). */
static value call_syncthreads(interp *in, const cexpr *e, int lane) {
  (void)lane;
  gpu_barrier(in->gpu, e);
  return zero_value;
}

value interp_call_shfl_down(interp *in, const cexpr *e, int lane) {
  double v = ev(in, e->ops[0], lane).f;
  int64_t offset = ev(in, e->ops[1], lane).i;
  value r = {.f = in->failed ? v : gpu_shfl_down(in->gpu, e, v, offset)};
  return r;
}

static const intrinsic_impl intrinsic_impls[] = {
    {"exp", 1, exp, NULL},
    {"exp2", 1, exp2, NULL},
    {"log", 1, log, NULL},
    {"log2", 1, log2, NULL},
    {"log10", 1, log10, NULL},
    {"sqrt", 1, sqrt, NULL},
    {"rsqrt", 1, rsqrt_d, NULL},
    {"tanh", 1, tanh, NULL},
    {"erf", 1, erf, NULL},
    {"sigmoid", 1, sigmoid_d, NULL},
    {"sin", 1, sin, NULL},
    {"cos", 1, cos, NULL},
    {"floor", 1, floor, NULL},
    {"ceil", 1, ceil, NULL},
    {"round", 1, nearbyint, NULL},
    {"trunc", 1, trunc, NULL},
    {"pow", 2, NULL, call_pow},
    {"fma", 3, NULL, call_fma},
    {"abs", 1, NULL, call_abs},
    {"if_then_else", 3, NULL, call_if_then_else},
    {"tessera.cuda.syncthreads", 0, NULL, call_syncthreads},
    {"tessera.cuda.shfl_down", 2, NULL, interp_call_shfl_down},
};

/* The intrinsics meaningful only in the GPU mode. */
bool interp_is_gpu_intrinsic(const intrinsic_impl *im) {
  return im->eval == call_syncthreads || im->eval == interp_call_shfl_down;
}

const intrinsic_impl *interp_find_intrinsic(const char *name) {
  for (size_t i = 0; i < sizeof intrinsic_impls / sizeof intrinsic_impls[0];
       i++)
    if (strcmp(intrinsic_impls[i].name, name) == 0) return &intrinsic_impls[i];
  return NULL;
}

/* ---- execution ---- */

/* (A shared buffer's storage is the thread block's, set when the thread
 * starts.) */
static bool alloc_buffer(interp *in, rbuf *b) {
  if (b->shared >= 0) return true;
  b->data = calloc(1, (size_t)b->bytes);
  if (!b->data) {
    FAIL(in, TS_ENOMEM, "cannot allocate %lld bytes for buffer '%s'",
         (long long)b->bytes, b->name);
    return false;
  }
  return true;
}

static void release_buffer(rbuf *b) {
  if (b->shared >= 0) return;
  free(b->data);
  b->data = NULL;
}

static void exec_realize(interp *in, const cblock *k) {
  if (k->predicate && !ev(in, k->predicate, 0).i) return;
  const char *outer = in->block;
  for (int i = 0; i < k->n_iters; i++) {
    int64_t v = ev(in, k->values[i], 0).i;
    int64_t lo = ev(in, k->dom_min[i], 0).i;
    int64_t ext = ev(in, k->dom_ext[i], 0).i;
    if (in->failed) return;
    if (v < lo || ext <= 0 || (uint64_t)v - (uint64_t)lo >= (uint64_t)ext) {
      in->block = k->name;
      FAIL(in, TS_ERANGE,
           "iter var '%s' has value %lld outside its domain [%lld, %lld)",
           k->iter_name[i], (long long)v, (long long)lo,
           (long long)((uint64_t)lo + (uint64_t)ext));
      return;
    }
    in->vals[k->iter_slot[i]].i = v;
  }
  in->block = k->name;
  int live = 0;
  for (; live < k->n_allocs; live++)
    if (!alloc_buffer(in, &in->bufs[k->alloc_slot[live]])) break;
  if (!in->failed) {
    if (k->init) {
      bool at_start = true;
      for (int i = 0; i < k->n_iters && at_start; i++)
        if (k->iter_reduce[i] &&
            in->vals[k->iter_slot[i]].i != ev(in, k->dom_min[i], 0).i)
          at_start = false;
      if (at_start) interp_exec(in, k->init);
    }
    if (k->body) interp_exec(in, k->body);
  }
  while (live-- > 0) release_buffer(&in->bufs[k->alloc_slot[live]]);
  if (!in->failed) in->block = outer;
}

/* Whether element off of b already holds v (a store of v changes
 * nothing). */
static bool holds(const rbuf *b, int64_t off, value v) {
  value cur = read_elem(b, off);
  return b->skind >= SK_F16 ? cur.f == v.f : cur.i == v.i;
}

static void exec_store(interp *in, const cstmt *s) {
  rbuf *b = &in->bufs[s->slot];
  if (s->lanes == 1) {
    value v = ev(in, s->a, 0);
    int64_t off = access_offset(in, b, s->idx, s->n_idx, 0, "store", 1);
    if (off < 0 || in->failed) return;
    if (b->shared >= 0)
      gpu_shared_access(in->gpu, b->shared, off, true, holds(b, off, v));
    write_elem(b, off, v);
    return;
  }
  /* A vector store reads every lane before writing any. */
  for (int l = 0; l < s->lanes; l++) {
    in->scratch_vals[l] = ev(in, s->a, l);
    in->scratch_off[l] =
        access_offset(in, b, s->idx, s->n_idx, l, "store", s->lanes);
    if (in->failed) return;
  }
  for (int l = 0; l < s->lanes && b->shared >= 0; l++)
    gpu_shared_access(in->gpu, b->shared, in->scratch_off[l], true,
                      holds(b, in->scratch_off[l], in->scratch_vals[l]));
  for (int l = 0; l < s->lanes; l++)
    write_elem(b, in->scratch_off[l], in->scratch_vals[l]);
}

void interp_exec(interp *in, const cstmt *s) {
  if (!s || in->failed) return;
  if (++in->steps > in->max_steps && in->max_steps) {
    FAIL(in, TS_ERANGE, "step limit of %llu statement executions exceeded",
         (unsigned long long)in->max_steps);
    return;
  }
  switch (s->kind) {
  case TS_STMT_FOR: {
    int64_t lo = ev(in, s->a, 0).i, ext = ev(in, s->b, 0).i;
    value *var = &in->vals[s->slot];
    if (s->launch_axis) { /* GPU mode: this thread's (block's) index */
      int64_t idx = in->launch_index[s->launch_axis - 1];
      if (idx >= ext) break;
      var->i = wrap((int64_t)((uint64_t)lo + (uint64_t)idx), s->var_cls,
                    s->var_bits);
      interp_exec(in, s->body);
      break;
    }
    for (int64_t i = 0; i < ext && !in->failed; i++) {
      var->i =
          wrap((int64_t)((uint64_t)lo + (uint64_t)i), s->var_cls, s->var_bits);
      interp_exec(in, s->body);
    }
    break;
  }
  case TS_STMT_BLOCK_REALIZE: exec_realize(in, s->blk); break;
  case TS_STMT_STORE: exec_store(in, s); break;
  case TS_STMT_SEQ:
    for (int i = 0; i < s->n_items && !in->failed; i++)
      interp_exec(in, s->items[i]);
    break;
  case TS_STMT_IF:
    if (ev(in, s->a, 0).i)
      interp_exec(in, s->body);
    else
      interp_exec(in, s->else_s);
    break;
  case TS_STMT_EVALUATE:
    for (int l = 0; l < s->lanes; l++) ev(in, s->a, l);
    break;
  case TS_STMT_LET:
    for (int l = 0; l < s->lanes; l++) in->vals[s->slot + l] = ev(in, s->a, l);
    interp_exec(in, s->body);
    break;
  case TS_STMT_ALLOCATE: {
    rbuf *b = &in->bufs[s->slot];
    if (!alloc_buffer(in, b)) break;
    interp_exec(in, s->body);
    release_buffer(b);
    break;
  }
  default: break;
  }
}
