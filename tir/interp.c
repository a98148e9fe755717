/*
 * interp.c — the reference interpreter: executes a PrimFunc on host buffers,
 * the ground truth every correctness test compares against.
 *
 * ts_interp_run works in two phases. First it compiles the function into a
 * private tree (in a scratch arena) in which every variable definition has a
 * slot in a flat value array and every buffer definition a slot in a buffer
 * table, so the run never looks anything up by name or pointer; scoping,
 * arities, dtypes, buffer sizes and intrinsic names are checked here, so the
 * run itself can only fail on data-dependent faults. Then it executes that
 * tree serially, whatever the loop kinds say. Vector expressions are
 * evaluated one lane at a time (a ramp gives base + lane * stride, a
 * broadcast ignores the lane, a vector load loads one element per lane).
 *
 * Semantics (the contract the code generators must match):
 * - integers wrap to their width and signedness (computed in 64-bit unsigned
 *   arithmetic, then sign- or zero-extended); `/` and `%` truncate like C,
 *   floordiv/floormod round toward negative infinity; dividing by zero is a
 *   TS_ERANGE fault; INT_MIN / -1 wraps to INT_MIN (remainder 0);
 * - float32 operations are computed in double and rounded to float32 after
 *   every operation (which equals IEEE float32 arithmetic for + - * /);
 *   float16 and bfloat16 likewise round to their format after every
 *   operation; float64 is plain double arithmetic; float `%` is fmod,
 *   float floordiv is floor(x / y), floormod x - floordiv(x, y) * y;
 * - min/max on floats are fmin/fmax (a NaN operand yields the other one);
 * - comparisons give bool; && and || evaluate both operands (like select;
 *   only if_then_else is lazy);
 * - casts: float -> int truncates toward zero and saturates: NaN gives 0,
 *   values below the target's range give its minimum (0 for unsigned), values
 *   above give its maximum; int -> float rounds to nearest; anything -> bool
 *   is `!= 0`; int -> int wraps;
 * - math intrinsics are computed in double and rounded to the result dtype;
 *   `round` rounds half to even (nearbyint); rsqrt is 1 / sqrt(x), sigmoid
 *   1 / (1 + exp(-x)); abs works on integers too (abs(INT_MIN) wraps);
 * - a block runs when its predicate holds; its iter values must then lie in
 *   the iter domains (TS_ERANGE otherwise); the init runs when every reduce
 *   iter var is at its domain minimum; block alloc buffers and `allocate`
 *   buffers are zero-filled for every execution and freed after it.
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Limits that keep malformed input from exhausting memory or the stack. */
#define MAX_ALLOC_BYTES ((int64_t)1 << 30) /* per block/allocate buffer */
#define MAX_DEPTH TS_TIR_MAX_DEPTH /* nesting of statements and expressions */
#define MAX_NODES (1 << 20)        /* compiled expression nodes (shared DAGs) */
#define MAX_VALUE_SLOTS (1 << 24)  /* variable lanes defined by the program */

/* The class of a scalar value: how it is held and how ops treat it. */
enum {
  VC_INT,  /* signed integer, sign-extended in .i */
  VC_UINT, /* unsigned integer, zero-extended in .i (uint64: the bits) */
  VC_BOOL, /* 0 or 1 in .i */
  VC_F16,  /* float16 value in .f */
  VC_BF16, /* bfloat16 value in .f */
  VC_F32,  /* float32 value in .f */
  VC_F64,  /* float64 value in .f */
};
static bool class_is_float(int c) { return c >= VC_F16; }

/* One lane of a value; the static dtype of the expression is the tag. */
typedef union value {
  int64_t i;
  double f;
} value;

/* How elements of a buffer are stored. */
enum {
  SK_I8,
  SK_I16,
  SK_I32,
  SK_I64,
  SK_U8,
  SK_U16,
  SK_U32,
  SK_U64,
  SK_BOOL,
  SK_F16,
  SK_BF16,
  SK_F32,
  SK_F64,
};

typedef struct cexpr cexpr;
typedef value (*call_fn)(interp *in, const cexpr *e, int lane);

/* An intrinsic implementation. Later modules add target intrinsics here. */
typedef struct intrinsic_impl {
  const char *name;
  int n_args;             /* -1: any number */
  double (*math)(double); /* unary math on doubles, or NULL */
  call_fn eval;           /* used when math is NULL */
} intrinsic_impl;

/* A compiled expression. */
struct cexpr {
  uint8_t kind;                 /* ts_expr_kind */
  uint8_t cls;                  /* value class of the result */
  uint8_t ocls;                 /* class of the operands (compare, cast, not) */
  uint8_t bits;                 /* result bits, for integer wrap-around */
  int lanes;                    /* result lanes */
  int slot;                     /* VAR, LET: value slot; LOAD: buffer slot */
  int aux;                      /* LET: lanes of the bound var */
  int n;                        /* number of operands */
  cexpr **ops;                  /* operands (LOAD: indices; LET: value, body) */
  value imm;                    /* INT, FLOAT */
  const intrinsic_impl *intrin; /* CALL */
};

/* A buffer definition: parameter, block alloc or allocate. */
typedef struct rbuf {
  const char *name;
  char *data; /* NULL while an allocated buffer is not live */
  uint8_t skind;
  int esize; /* bytes per element */
  int ndim;
  int64_t shape[TS_MAX_DIMS];
  int64_t strides[TS_MAX_DIMS];
  int64_t bytes; /* storage bytes (at least 1) */
  int shared;    /* GPU mode: index of the block's shared storage, else -1 */
} rbuf;

typedef struct cblock {
  const char *name;
  int n_iters;
  int *iter_slot;
  const char **iter_name;
  uint8_t *iter_reduce;
  cexpr **values, **dom_min, **dom_ext;
  cexpr *predicate; /* NULL = true */
  int n_allocs;
  int *alloc_slot;
  struct cstmt *init, *body; /* NULL = nothing */
} cblock;

/* A compiled statement. */
typedef struct cstmt {
  uint8_t kind;              /* ts_stmt_kind */
  uint8_t var_cls, var_bits; /* FOR: loop var class and bits */
  uint8_t launch_axis;       /* FOR in the GPU mode: 1 + the launch axis it
                                is bound to (blockIdx.x .. threadIdx.z), 0
                                for a loop that iterates */
  int lanes;                 /* STORE, EVALUATE: lanes; LET: var lanes */
  int slot;     /* FOR, LET: var slot; STORE, ALLOCATE: buffer slot */
  cexpr *a, *b; /* FOR: min, extent; IF: cond; LET, STORE, EVALUATE: value */
  cexpr **idx;  /* STORE indices */
  int n_idx;
  struct cstmt *body, *else_s; /* FOR/LET/ALLOCATE body, IF then/else */
  struct cstmt **items;        /* SEQ */
  int n_items;
  cblock *blk; /* BLOCK_REALIZE */
} cstmt;

struct interp {
  const ts_func *func;
  ts_error *err;
  bool failed;
  int code;          /* the TS_E* code of the first fault */
  const char *block; /* block being compiled or run, for messages */
  ts_arena *arena;   /* the compiled tree */
  /* compile state */
  ts_node_map *var_slot; /* var -> slot + 1 while in scope */
  ts_node_map *buf_slot; /* buffer -> slot + 1 while in scope */
  int n_vals;
  int n_nodes;
  int max_lanes;
  cstmt *body; /* the compiled function body */
  /* run state (in the GPU mode: the running thread's, see interp_thread) */
  value *vals;
  rbuf *bufs;
  int n_bufs, cap_bufs;
  value *scratch_vals; /* vector store staging, max_lanes entries */
  int64_t *scratch_off;
  uint64_t steps, max_steps;
  struct interp_thread *own; /* the run state above as allocated (the
                                GPU mode switches it away) */
  /* GPU mode */
  gpu_sim *gpu;                /* NULL: the serial interpreter */
  rbuf *proto_bufs;            /* the compiled buffer table threads copy */
  const int64_t *launch_index; /* the running thread's blockIdx/threadIdx */
  interp_launch launch;
  int cap_shared;
};

/* One GPU thread's private run state; interp_thread_switch points the
 * interpreter's run state at it. */
struct interp_thread {
  value *vals;
  rbuf *bufs;
  value *scratch_vals;
  int64_t *scratch_off;
  const char *block; /* block being run, for messages */
  int64_t index[6];  /* blockIdx.x/y/z, threadIdx.x/y/z */
};

/* ---- errors ---- */

/* Records the first fault; later ones are ignored. */
void interp_fail_at(interp *in, int code, const char *file, int line,
                    const char *fmt, ...) {
  if (in->failed) return;
  in->failed = true;
  in->code = code;
  char msg[900];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (in->block)
    ts_error_set(in->err, code, file, line, "block '%s': %s", in->block, msg);
  else
    ts_error_set(in->err, code, file, line, "function '%s': %s",
                 ts_func_name(in->func), msg);
}
#define FAIL(in, code, ...)                                                    \
  interp_fail_at((in), (code), __FILE__, __LINE__, __VA_ARGS__)

static const char *dtype_name(ts_dtype t, char buf[32]) {
  return ts_dtype_str(t, buf);
}

/* ---- value helpers ---- */

static int class_of(ts_dtype t) {
  if (t.lanes < 1) return -1;
  switch (t.code) {
  case TS_DT_INT:
  case TS_DT_UINT:
    if (t.bits != 8 && t.bits != 16 && t.bits != 32 && t.bits != 64) return -1;
    return t.code == TS_DT_INT ? VC_INT : VC_UINT;
  case TS_DT_BOOL: return t.bits == 1 ? VC_BOOL : -1;
  case TS_DT_FLOAT:
    return t.bits == 16   ? VC_F16
           : t.bits == 32 ? VC_F32
           : t.bits == 64 ? VC_F64
                          : -1;
  case TS_DT_BFLOAT: return t.bits == 16 ? VC_BF16 : -1;
  default: return -1;
  }
}

/* Wraps v to `bits` bits of class cls (int, uint or bool). */
static inline int64_t wrap(int64_t v, int cls, int bits) {
  if (cls == VC_BOOL) return v != 0;
  if (bits >= 64) return v;
  uint64_t mask = (1ull << bits) - 1, u = (uint64_t)v & mask;
  if (cls == VC_INT && ((u >> (bits - 1)) & 1)) u |= ~mask;
  return (int64_t)u;
}

static inline double round_cls(double v, int cls) {
  switch (cls) {
  case VC_F32: return (double)(float)v;
  case VC_F16: return ts_f16_to_f32(ts_f32_to_f16((float)v));
  case VC_BF16: return ts_bf16_to_f32(ts_f32_to_bf16((float)v));
  default: return v;
  }
}

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
static value convert(value v, int from, int to, int bits) {
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

static int storage_kind(int cls, int bits) {
  switch (cls) {
  case VC_INT:
    return bits == 8    ? SK_I8
           : bits == 16 ? SK_I16
           : bits == 32 ? SK_I32
                        : SK_I64;
  case VC_UINT:
    return bits == 8    ? SK_U8
           : bits == 16 ? SK_U16
           : bits == 32 ? SK_U32
                        : SK_U64;
  case VC_BOOL: return SK_BOOL;
  case VC_F16: return SK_F16;
  case VC_BF16: return SK_BF16;
  case VC_F32: return SK_F32;
  default: return SK_F64;
  }
}

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
    return convert(v, VC_F64, e->cls, e->bits);
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
    return convert(ev(in, e->ops[0], lane), e->ocls, e->cls, e->bits);
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
  return convert(v, VC_F64, e->cls, e->bits);
}

static value call_fma(interp *in, const cexpr *e, int lane) {
  double x = as_double(ev(in, e->ops[0], lane), e->ops[0]->cls);
  double y = as_double(ev(in, e->ops[1], lane), e->ops[1]->cls);
  double z = as_double(ev(in, e->ops[2], lane), e->ops[2]->cls);
  value v = {.f = fma(x, y, z)};
  return convert(v, VC_F64, e->cls, e->bits);
}

static value call_abs(interp *in, const cexpr *e, int lane) {
  const cexpr *a = e->ops[0];
  value x = ev(in, a, lane), r;
  if (class_is_float(a->cls)) {
    r.f = fabs(x.f);
    return convert(r, a->cls, e->cls, e->bits);
  }
  if (a->cls == VC_INT && x.i < 0) x.i = (int64_t)(0 - (uint64_t)x.i);
  return convert(x, a->cls, e->cls, e->bits);
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

static value call_shfl_down(interp *in, const cexpr *e, int lane) {
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
    {"tessera.cuda.shfl_down", 2, NULL, call_shfl_down},
};

/* The intrinsics meaningful only in the GPU mode. */
static bool is_gpu_intrinsic(const intrinsic_impl *im) {
  return im->eval == call_syncthreads || im->eval == call_shfl_down;
}

static const intrinsic_impl *find_intrinsic(const char *name) {
  for (size_t i = 0; i < sizeof intrinsic_impls / sizeof intrinsic_impls[0];
       i++)
    if (strcmp(intrinsic_impls[i].name, name) == 0) return &intrinsic_impls[i];
  return NULL;
}

/* ---- compiling expressions ---- */

static int new_value_slot(interp *in, int lanes) {
  if (in->n_vals > MAX_VALUE_SLOTS - lanes) {
    FAIL(in, TS_EUNSUPPORTED,
         "program too large to interpret (over %d variable lanes)",
         MAX_VALUE_SLOTS);
    return 0; /* a valid slot; compiling stops at the failure */
  }
  int s = in->n_vals;
  in->n_vals += lanes;
  return s;
}

/* Binds var to a fresh slot; returns the previous binding for unbind. */
static void *bind_var(interp *in, const ts_expr *var, int *slot) {
  void *old = ts_node_map_get(in->var_slot, var);
  *slot = new_value_slot(in, var->dtype.lanes);
  ts_node_map_put(in->var_slot, var, (void *)(intptr_t)(*slot + 1));
  return old;
}
static void unbind_var(interp *in, const ts_expr *var, void *old) {
  ts_node_map_put(in->var_slot, var, old);
}

static cexpr *new_cexpr(interp *in, const ts_expr *e, int n) {
  if (++in->n_nodes > MAX_NODES) {
    FAIL(in, TS_EUNSUPPORTED,
         "program too large to interpret (over %d "
         "expression nodes after expanding shared sub-expressions)",
         MAX_NODES);
    return NULL;
  }
  cexpr *c = ts_arena_alloc(in->arena, sizeof *c);
  c->kind = e->kind;
  c->lanes = e->dtype.lanes;
  c->bits = e->dtype.bits;
  c->n = n;
  if (n) c->ops = ts_arena_alloc(in->arena, sizeof *c->ops * (size_t)n);
  return c;
}

static bool is_int_class(int c) {
  return c == VC_INT || c == VC_UINT || c == VC_BOOL;
}

static cexpr *compile_expr(interp *in, const ts_expr *e, int depth);

static bool compile_ops(interp *in, cexpr *c, ts_expr *const *ops, int n,
                        int depth) {
  for (int i = 0; i < n; i++) {
    c->ops[i] = compile_expr(in, ops[i], depth + 1);
    if (!c->ops[i]) return false;
  }
  return true;
}

static int buffer_slot(interp *in, const ts_buffer *b, const char *what) {
  intptr_t s = b ? (intptr_t)ts_node_map_get(in->buf_slot, b) : 0;
  if (!s) {
    FAIL(in, TS_EINVAL,
         "%s of buffer '%s', which is neither a parameter nor allocated "
         "in an enclosing scope",
         what, b ? b->name : "(null)");
    return -1;
  }
  return (int)s - 1;
}

static cexpr *compile_expr(interp *in, const ts_expr *e, int depth) {
  char tb[32], tb2[32];
  if (!e) {
    FAIL(in, TS_EINVAL, "missing expression");
    return NULL;
  }
  if (depth > MAX_DEPTH) {
    FAIL(in, TS_EUNSUPPORTED, "expression nested deeper than %d", MAX_DEPTH);
    return NULL;
  }
  if (depth > in->launch.max_depth) in->launch.max_depth = depth;
  int cls = class_of(e->dtype);
  if (cls < 0 && e->kind != TS_EXPR_ADDRESS_OF) {
    FAIL(in, TS_EUNSUPPORTED, "cannot evaluate a %s expression of type %s",
         ts_expr_kind_name((ts_expr_kind)e->kind), dtype_name(e->dtype, tb));
    return NULL;
  }
  cexpr *c;
  switch ((ts_expr_kind)e->kind) {
  case TS_EXPR_INT:
    if (!(c = new_cexpr(in, e, 0))) return NULL;
    if (class_is_float(cls))
      c->imm.f = round_cls((double)e->u.int_value, cls);
    else
      c->imm.i = wrap(e->u.int_value, cls, e->dtype.bits);
    break;
  case TS_EXPR_FLOAT: {
    if (!(c = new_cexpr(in, e, 0))) return NULL;
    value v = {.f = e->u.float_value};
    c->imm = convert(v, VC_F64, cls, e->dtype.bits);
    break;
  }
  case TS_EXPR_VAR: {
    intptr_t s = (intptr_t)ts_node_map_get(in->var_slot, e);
    if (!s) {
      FAIL(in, TS_EINVAL, "variable '%s' used outside the scope defining it",
           e->u.var.name);
      return NULL;
    }
    if (!(c = new_cexpr(in, e, 0))) return NULL;
    c->slot = (int)s - 1;
    break;
  }
  case TS_EXPR_ADD:
  case TS_EXPR_SUB:
  case TS_EXPR_MUL:
  case TS_EXPR_DIV:
  case TS_EXPR_MOD:
  case TS_EXPR_FLOORDIV:
  case TS_EXPR_FLOORMOD:
  case TS_EXPR_MIN:
  case TS_EXPR_MAX:
  case TS_EXPR_EQ:
  case TS_EXPR_NE:
  case TS_EXPR_LT:
  case TS_EXPR_LE:
  case TS_EXPR_GT:
  case TS_EXPR_GE:
  case TS_EXPR_AND:
  case TS_EXPR_OR: {
    if (!(c = new_cexpr(in, e, 2))) return NULL;
    ts_expr *ops[2] = {e->u.op.a, e->u.op.b};
    if (!compile_ops(in, c, ops, 2, depth)) return NULL;
    cexpr *x = c->ops[0];
    ts_dtype tx = ts_dtype_scalar(ops[0]->dtype),
             ty = ts_dtype_scalar(ops[1]->dtype);
    if (!ts_dtype_eq(tx, ty)) {
      FAIL(in, TS_EINVAL, "operands of %s have different types %s and %s",
           ts_expr_kind_name((ts_expr_kind)e->kind), dtype_name(tx, tb),
           dtype_name(ty, tb2));
      return NULL;
    }
    bool logical = e->kind == TS_EXPR_AND || e->kind == TS_EXPR_OR;
    bool cmp = ts_expr_is_compare((ts_expr_kind)e->kind);
    if (logical && !is_int_class(x->cls)) {
      FAIL(in, TS_EINVAL, "operands of %s must be bool, not %s",
           ts_expr_kind_name((ts_expr_kind)e->kind), dtype_name(tx, tb));
      return NULL;
    }
    if ((cmp || logical) && cls != VC_BOOL) {
      FAIL(in, TS_EINVAL, "%s must have a bool type",
           ts_expr_kind_name((ts_expr_kind)e->kind));
      return NULL;
    }
    if (!cmp && !logical && (cls != x->cls || e->dtype.bits != tx.bits)) {
      FAIL(in, TS_EINVAL, "%s of %s operands has type %s",
           ts_expr_kind_name((ts_expr_kind)e->kind), dtype_name(tx, tb),
           dtype_name(e->dtype, tb2));
      return NULL;
    }
    c->ocls = x->cls;
    break;
  }
  case TS_EXPR_NOT:
  case TS_EXPR_CAST:
  case TS_EXPR_BROADCAST: {
    if (!(c = new_cexpr(in, e, 1))) return NULL;
    if (!compile_ops(in, c, &e->u.op.a, 1, depth)) return NULL;
    c->ocls = c->ops[0]->cls;
    if (e->kind == TS_EXPR_NOT && !is_int_class(c->ocls)) {
      FAIL(in, TS_EINVAL, "operand of not must be bool");
      return NULL;
    }
    if (e->kind == TS_EXPR_BROADCAST && c->ocls != cls) {
      FAIL(in, TS_EINVAL, "broadcast changes the type of its operand");
      return NULL;
    }
    break;
  }
  case TS_EXPR_SELECT: {
    if (!(c = new_cexpr(in, e, 3))) return NULL;
    ts_expr *ops[3] = {e->u.op.a, e->u.op.b, e->u.op.c};
    if (!compile_ops(in, c, ops, 3, depth)) return NULL;
    if (!is_int_class(c->ops[0]->cls) || c->ops[1]->cls != cls ||
        c->ops[2]->cls != cls) {
      FAIL(in, TS_EINVAL,
           "select needs a bool condition and two values of "
           "its type");
      return NULL;
    }
    break;
  }
  case TS_EXPR_RAMP: {
    if (!(c = new_cexpr(in, e, 2))) return NULL;
    ts_expr *ops[2] = {e->u.op.a, e->u.op.b};
    if (!compile_ops(in, c, ops, 2, depth)) return NULL;
    if (c->ops[0]->cls != cls || c->ops[1]->cls != cls || cls == VC_BOOL) {
      FAIL(in, TS_EINVAL, "ramp needs a base and stride of its type");
      return NULL;
    }
    break;
  }
  case TS_EXPR_LOAD: {
    const ts_buffer *b = e->u.load.buffer;
    int slot = buffer_slot(in, b, "load");
    if (slot < 0) return NULL;
    const rbuf *rb = &in->bufs[slot];
    if (e->u.load.n_indices != rb->ndim) {
      FAIL(in, TS_EINVAL,
           "load of buffer '%s' with %d indices; it has %d "
           "dimensions",
           rb->name, e->u.load.n_indices, rb->ndim);
      return NULL;
    }
    if (!ts_dtype_eq(ts_dtype_scalar(e->dtype), b->dtype)) {
      FAIL(in, TS_EINVAL, "load of %s buffer '%s' has type %s",
           dtype_name(b->dtype, tb), rb->name, dtype_name(e->dtype, tb2));
      return NULL;
    }
    if (!(c = new_cexpr(in, e, e->u.load.n_indices))) return NULL;
    c->slot = slot;
    if (!compile_ops(in, c, e->u.load.indices, c->n, depth)) return NULL;
    for (int d = 0; d < c->n; d++)
      if (!is_int_class(c->ops[d]->cls) || c->ops[d]->cls == VC_BOOL) {
        FAIL(in, TS_EINVAL,
             "index %d of a load of buffer '%s' is not an "
             "integer",
             d, rb->name);
        return NULL;
      }
    break;
  }
  case TS_EXPR_CALL: {
    const intrinsic_impl *im = find_intrinsic(e->u.call.name);
    if (!im) {
      FAIL(in, TS_EUNSUPPORTED,
           "the interpreter has no implementation of "
           "intrinsic '%s'",
           e->u.call.name);
      return NULL;
    }
    if (is_gpu_intrinsic(im) && !in->gpu) {
      FAIL(in, TS_EUNSUPPORTED,
           "intrinsic '%s' has a meaning only on a GPU: run the function "
           "with ts_interp_run_gpu",
           im->name);
      return NULL;
    }
    if (im->n_args >= 0 && e->u.call.n_args != im->n_args) {
      FAIL(in, TS_EINVAL, "intrinsic '%s' takes %d arguments, not %d", im->name,
           im->n_args, e->u.call.n_args);
      return NULL;
    }
    if (!(c = new_cexpr(in, e, e->u.call.n_args))) return NULL;
    c->intrin = im;
    if (!compile_ops(in, c, e->u.call.args, c->n, depth)) return NULL;
    if (strcmp(im->name, "if_then_else") == 0 &&
        (!is_int_class(c->ops[0]->cls) || c->ops[1]->cls != cls ||
         c->ops[2]->cls != cls)) {
      FAIL(in, TS_EINVAL,
           "if_then_else needs a bool condition and two "
           "values of its type");
      return NULL;
    }
    if (is_gpu_intrinsic(im)) {
      in->launch.yields = true;
      if (im->eval == call_shfl_down &&
          (cls != VC_F32 || e->dtype.lanes != 1 || c->ops[0]->cls != VC_F32 ||
           c->ops[0]->lanes != 1 || !is_int_class(c->ops[1]->cls) ||
           c->ops[1]->cls == VC_BOOL)) {
        FAIL(in, TS_EINVAL,
             "intrinsic '%s' takes (float32 value, integer offset) and "
             "returns float32",
             im->name);
        return NULL;
      }
    }
    break;
  }
  case TS_EXPR_LET: {
    const ts_expr *var = e->u.let.var;
    if (!var || var->kind != TS_EXPR_VAR) {
      FAIL(in, TS_EINVAL, "let binds something that is not a variable");
      return NULL;
    }
    if (!(c = new_cexpr(in, e, 2))) return NULL;
    if (!(c->ops[0] = compile_expr(in, e->u.let.value, depth + 1))) return NULL;
    if (class_of(var->dtype) != c->ops[0]->cls) {
      FAIL(in, TS_EINVAL, "let binds %s variable '%s' to a %s value",
           dtype_name(var->dtype, tb), var->u.var.name,
           dtype_name(e->u.let.value->dtype, tb2));
      return NULL;
    }
    void *old = bind_var(in, var, &c->slot);
    c->aux = var->dtype.lanes;
    c->ops[1] = compile_expr(in, e->u.let.body, depth + 1);
    unbind_var(in, var, old);
    if (!c->ops[1]) return NULL;
    break;
  }
  case TS_EXPR_ADDRESS_OF:
    FAIL(in, TS_EUNSUPPORTED,
         "address_of (of buffer '%s') is not supported "
         "by the interpreter",
         e->u.load.buffer ? e->u.load.buffer->name : "?");
    return NULL;
  default:
    FAIL(in, TS_EINVAL, "unknown expression kind %d", e->kind);
    return NULL;
  }
  c->cls = (uint8_t)cls;
  if (c->lanes > in->max_lanes) in->max_lanes = c->lanes;
  return c;
}

/* A scalar integer (or bool, when want_bool) expression. */
static cexpr *compile_scalar(interp *in, const ts_expr *e, bool want_bool,
                             const char *what, int depth) {
  cexpr *c = compile_expr(in, e, depth);
  if (!c) return NULL;
  if (c->lanes != 1 || !is_int_class(c->cls) ||
      (want_bool ? c->cls != VC_BOOL : c->cls == VC_BOOL)) {
    char tb[32];
    FAIL(in, TS_EINVAL, "%s must be a scalar %s, not %s", what,
         want_bool ? "bool" : "integer", dtype_name(e->dtype, tb));
    return NULL;
  }
  return c;
}

/* ---- compiling buffers and statements ---- */

/* GPU mode: registers the block-wide storage of a "shared" buffer
 * definition; returns its shared index or -1. */
static int define_shared(interp *in, const rbuf *r) {
  interp_launch *l = &in->launch;
  if (l->n_shared == in->cap_shared) {
    int cap = in->cap_shared ? 2 * in->cap_shared : 8;
    interp_shared *ns = realloc(l->shared, sizeof *ns * (size_t)cap);
    if (!ns) {
      FAIL(in, TS_ENOMEM, "out of memory");
      return -1;
    }
    l->shared = ns;
    in->cap_shared = cap;
  }
  l->shared[l->n_shared] =
      (interp_shared){.name = r->name, .bytes = r->bytes, .esize = r->esize};
  return l->n_shared++;
}

/* Defines buffer b in a new slot (data NULL until allocated); `limit`
 * bounds its storage bytes (0: no limit, for parameters). In the GPU mode a
 * "shared" buffer (not a parameter) gets block-wide storage. */
static int define_buffer(interp *in, const ts_buffer *b, int64_t limit,
                         void **old) {
  char tb[32];
  if (!b) {
    FAIL(in, TS_EINVAL, "missing buffer");
    return -1;
  }
  int cls = class_of(b->dtype);
  if (cls < 0 || b->dtype.lanes != 1) {
    FAIL(in, TS_EUNSUPPORTED,
         "buffer '%s' has type %s, which the "
         "interpreter cannot store",
         b->name, dtype_name(b->dtype, tb));
    return -1;
  }
  if (b->ndim < 0 || b->ndim > TS_MAX_DIMS) {
    FAIL(in, TS_EINVAL, "buffer '%s' has %d dimensions", b->name, b->ndim);
    return -1;
  }
  rbuf r = {.name = b->name,
            .skind = (uint8_t)storage_kind(cls, b->dtype.bits),
            .esize = (int)ts_dtype_elem_bytes(b->dtype),
            .ndim = b->ndim,
            .shared = -1};
  int64_t last = 0; /* largest element offset */
  bool empty = false;
  for (int d = b->ndim - 1; d >= 0; d--) {
    r.shape[d] = b->shape[d];
    if (b->shape[d] < 0) {
      FAIL(in, TS_EINVAL, "buffer '%s' has negative extent %lld in dim %d",
           b->name, (long long)b->shape[d], d);
      return -1;
    }
    if (b->shape[d] == 0) empty = true;
  }
  for (int d = b->ndim - 1; d >= 0; d--) {
    if (b->has_strides) {
      r.strides[d] = b->strides[d];
      if (r.strides[d] < 0) {
        FAIL(in, TS_EUNSUPPORTED,
             "buffer '%s' has negative stride %lld in "
             "dim %d",
             b->name, (long long)r.strides[d], d);
        return -1;
      }
    } else if (d == b->ndim - 1) {
      r.strides[d] = 1;
    } else if (__builtin_mul_overflow(r.strides[d + 1], r.shape[d + 1],
                                      &r.strides[d])) {
      goto too_big;
    }
    int64_t span;
    if (!empty &&
        (__builtin_mul_overflow(r.shape[d] - 1, r.strides[d], &span) ||
         __builtin_add_overflow(last, span, &last)))
      goto too_big;
  }
  int64_t bytes;
  if (__builtin_mul_overflow(empty ? 0 : last + 1, (int64_t)r.esize, &bytes))
    goto too_big;
  if (limit && bytes > limit) {
    FAIL(in, TS_ENOMEM,
         "buffer '%s' needs %lld bytes, over the interpreter's "
         "limit of %lld",
         b->name, (long long)bytes, (long long)limit);
    return -1;
  }
  r.bytes = bytes ? bytes : 1;
  if (in->gpu && limit && b->scope && !strcmp(b->scope, "shared") &&
      (r.shared = define_shared(in, &r)) < 0)
    return -1;
  if (in->n_bufs == in->cap_bufs) {
    int cap = in->cap_bufs ? in->cap_bufs * 2 : 16;
    rbuf *nb = realloc(in->bufs, sizeof *nb * (size_t)cap);
    if (!nb) {
      FAIL(in, TS_ENOMEM, "out of memory");
      return -1;
    }
    in->bufs = nb;
    in->cap_bufs = cap;
  }
  int slot = in->n_bufs++;
  in->bufs[slot] = r;
  *old = ts_node_map_get(in->buf_slot, b);
  ts_node_map_put(in->buf_slot, b, (void *)(intptr_t)(slot + 1));
  return slot;
too_big:
  FAIL(in, limit ? TS_ENOMEM : TS_EINVAL, "buffer '%s' is too large", b->name);
  return -1;
}

static cstmt *compile_stmt(interp *in, const ts_stmt *s, int depth);

/* GPU mode: a loop bound to blockIdx/threadIdx does not iterate (the
 * launch's dimension on its axis is the largest such extent); vthread is a
 * serial loop. The same rules as the cuda code generator. */
static bool compile_launch_axis(interp *in, const ts_stmt *s, cstmt *c) {
  static const char *const tags[] = {"blockIdx.x",  "blockIdx.y",
                                     "blockIdx.z",  "threadIdx.x",
                                     "threadIdx.y", "threadIdx.z"};
  const char *tag = s->u.loop.thread_tag ? s->u.loop.thread_tag : "";
  const char *name = s->u.loop.var->u.var.name;
  if (!strcmp(tag, "vthread")) return true;
  int axis = -1;
  for (int i = 0; i < 6; i++)
    if (!strcmp(tag, tags[i])) axis = i;
  int64_t ext = 0;
  if (axis < 0) {
    FAIL(in, TS_EINVAL, "unknown thread tag '%s' on loop '%s'", tag, name);
    return false;
  }
  if (!ts_expr_is_const_int(s->u.loop.extent, &ext) || ext < 1) {
    FAIL(in, TS_EINVAL,
         "loop '%s' bound to '%s' needs a constant positive extent", name, tag);
    return false;
  }
  int64_t *dim =
      axis < 3 ? &in->launch.grid[axis] : &in->launch.block[axis - 3];
  if (ext > *dim) *dim = ext;
  c->launch_axis = (uint8_t)(axis + 1);
  return true;
}

static cstmt *new_cstmt(interp *in, const ts_stmt *s) {
  cstmt *c = ts_arena_alloc(in->arena, sizeof *c);
  c->kind = s->kind;
  return c;
}

/* Compiles a store's or load's index list against buffer slot `slot`. */
static bool compile_indices(interp *in, int slot, ts_expr *const *idx, int n,
                            cexpr ***out, int depth) {
  const rbuf *rb = &in->bufs[slot];
  if (n != rb->ndim) {
    FAIL(in, TS_EINVAL,
         "store to buffer '%s' with %d indices; it has %d "
         "dimensions",
         rb->name, n, rb->ndim);
    return false;
  }
  *out = n ? ts_arena_alloc(in->arena, sizeof **out * (size_t)n) : NULL;
  for (int d = 0; d < n; d++) {
    cexpr *c = compile_expr(in, idx[d], depth + 1);
    if (!c) return false;
    if (!is_int_class(c->cls) || c->cls == VC_BOOL) {
      FAIL(in, TS_EINVAL,
           "index %d of a store to buffer '%s' is not an "
           "integer",
           d, in->bufs[slot].name);
      return false;
    }
    (*out)[d] = c;
  }
  return true;
}

static cstmt *compile_realize(interp *in, const ts_stmt *s, int depth) {
  const ts_block *b = s->u.realize.block;
  if (!b) {
    FAIL(in, TS_EINVAL, "block-realize without a block");
    return NULL;
  }
  cstmt *c = new_cstmt(in, s);
  cblock *k = c->blk = ts_arena_alloc(in->arena, sizeof *k);
  k->name = b->name;
  k->n_iters = b->n_iters;
  if (s->u.realize.n_values != b->n_iters) {
    FAIL(in, TS_EINVAL,
         "block '%s' has %d iter vars but is realized with "
         "%d values",
         b->name, b->n_iters, s->u.realize.n_values);
    return NULL;
  }
  /* Iter values, predicate and domains are in the enclosing scope. */
  int n = b->n_iters ? b->n_iters : 1;
  k->iter_slot = ts_arena_alloc(in->arena, sizeof *k->iter_slot * (size_t)n);
  k->iter_reduce = ts_arena_alloc(in->arena, (size_t)n);
  k->iter_name = ts_arena_alloc(in->arena, sizeof *k->iter_name * (size_t)n);
  k->values = ts_arena_alloc(in->arena, sizeof *k->values * (size_t)n);
  k->dom_min = ts_arena_alloc(in->arena, sizeof *k->dom_min * (size_t)n);
  k->dom_ext = ts_arena_alloc(in->arena, sizeof *k->dom_ext * (size_t)n);
  for (int i = 0; i < b->n_iters; i++) {
    const iter_var *iv = &b->iters[i];
    if (!(k->values[i] = compile_scalar(in, s->u.realize.values[i], false,
                                        "a block iter value", depth + 1)) ||
        !(k->dom_min[i] = compile_scalar(in, iv->dom.min, false,
                                         "an iter domain bound", depth + 1)) ||
        !(k->dom_ext[i] = compile_scalar(in, iv->dom.extent, false,
                                         "an iter domain bound", depth + 1)))
      return NULL;
    k->iter_reduce[i] = iv->kind == TS_ITER_REDUCE;
    k->iter_name[i] =
        iv->var && iv->var->kind == TS_EXPR_VAR ? iv->var->u.var.name : "?";
  }
  if (s->u.realize.predicate &&
      !(k->predicate = compile_scalar(in, s->u.realize.predicate, true,
                                      "a block predicate", depth + 1)))
    return NULL;

  const char *outer = in->block;
  in->block = b->name;
  void **old_vars = calloc((size_t)n, sizeof *old_vars);
  int na = b->n_allocs ? b->n_allocs : 1;
  void **old_bufs = calloc((size_t)na, sizeof *old_bufs);
  k->alloc_slot = ts_arena_alloc(in->arena, sizeof *k->alloc_slot * (size_t)na);
  int bound_vars = 0, bound_bufs = 0;
  if (!old_vars || !old_bufs) {
    FAIL(in, TS_ENOMEM, "out of memory");
    goto done;
  }
  for (; bound_vars < b->n_iters; bound_vars++) {
    const ts_expr *v = b->iters[bound_vars].var;
    if (!v || v->kind != TS_EXPR_VAR || class_of(v->dtype) < 0 ||
        !is_int_class(class_of(v->dtype)) || v->dtype.lanes != 1) {
      FAIL(in, TS_EINVAL, "iter var %d is not a scalar integer variable",
           bound_vars);
      goto done;
    }
    old_vars[bound_vars] = bind_var(in, v, &k->iter_slot[bound_vars]);
  }
  for (; bound_bufs < b->n_allocs; bound_bufs++) {
    int slot = define_buffer(in, b->allocs[bound_bufs], MAX_ALLOC_BYTES,
                             &old_bufs[bound_bufs]);
    if (slot < 0) goto done;
    k->alloc_slot[bound_bufs] = slot;
  }
  k->n_allocs = b->n_allocs;
  if (b->init && !(k->init = compile_stmt(in, b->init, depth + 1))) goto done;
  if (b->body) k->body = compile_stmt(in, b->body, depth + 1);
done:
  while (bound_bufs-- > 0)
    ts_node_map_put(in->buf_slot, b->allocs[bound_bufs], old_bufs[bound_bufs]);
  while (bound_vars-- > 0)
    unbind_var(in, b->iters[bound_vars].var, old_vars[bound_vars]);
  free(old_vars);
  free(old_bufs);
  if (!in->failed) in->block = outer;
  return in->failed ? NULL : c;
}

/* Compiles s; NULL statements compile to NULL (nothing to run), so callers
 * check in->failed rather than the result. */
static cstmt *compile_stmt(interp *in, const ts_stmt *s, int depth) {
  char tb[32], tb2[32];
  if (!s || in->failed) return NULL;
  if (depth > MAX_DEPTH) {
    FAIL(in, TS_EUNSUPPORTED, "statements nested deeper than %d", MAX_DEPTH);
    return NULL;
  }
  if (depth > in->launch.max_depth) in->launch.max_depth = depth;
  cstmt *c;
  switch ((ts_stmt_kind)s->kind) {
  case TS_STMT_FOR: {
    const ts_expr *var = s->u.loop.var;
    if (!var || var->kind != TS_EXPR_VAR || var->dtype.lanes != 1 ||
        class_of(var->dtype) < 0 || !is_int_class(class_of(var->dtype)) ||
        var->dtype.code == TS_DT_BOOL) {
      FAIL(in, TS_EINVAL,
           "a loop variable must be a scalar integer "
           "variable");
      return NULL;
    }
    c = new_cstmt(in, s);
    if (!(c->a = compile_scalar(in, s->u.loop.min, false, "a loop minimum",
                                depth + 1)) ||
        !(c->b = compile_scalar(in, s->u.loop.extent, false, "a loop extent",
                                depth + 1)))
      return NULL;
    c->var_cls = (uint8_t)class_of(var->dtype);
    c->var_bits = var->dtype.bits;
    if (in->gpu && s->u.loop.kind == TS_FOR_THREAD &&
        !compile_launch_axis(in, s, c))
      return NULL;
    void *old = bind_var(in, var, &c->slot);
    c->body = compile_stmt(in, s->u.loop.body, depth + 1);
    unbind_var(in, var, old);
    break;
  }
  case TS_STMT_BLOCK_REALIZE: return compile_realize(in, s, depth);
  case TS_STMT_STORE: {
    c = new_cstmt(in, s);
    const ts_buffer *b = s->u.store.buffer;
    if ((c->slot = buffer_slot(in, b, "store")) < 0) return NULL;
    if (!(c->a = compile_expr(in, s->u.store.value, depth + 1))) return NULL;
    if (!ts_dtype_eq(ts_dtype_scalar(s->u.store.value->dtype), b->dtype)) {
      FAIL(in, TS_EINVAL, "store of a %s value to %s buffer '%s'",
           dtype_name(s->u.store.value->dtype, tb), dtype_name(b->dtype, tb2),
           b->name);
      return NULL;
    }
    if (!compile_indices(in, c->slot, s->u.store.indices, s->u.store.n_indices,
                         &c->idx, depth))
      return NULL;
    c->n_idx = s->u.store.n_indices;
    c->lanes = c->a->lanes;
    for (int d = 0; d < c->n_idx; d++)
      if (c->idx[d]->lanes > c->lanes) c->lanes = c->idx[d]->lanes;
    if (c->lanes > in->max_lanes) in->max_lanes = c->lanes;
    break;
  }
  case TS_STMT_SEQ: {
    c = new_cstmt(in, s);
    c->n_items = s->u.seq.n;
    if (c->n_items > 0)
      c->items =
          ts_arena_alloc(in->arena, sizeof *c->items * (size_t)c->n_items);
    for (int i = 0; i < c->n_items; i++)
      c->items[i] = compile_stmt(in, s->u.seq.items[i], depth + 1);
    break;
  }
  case TS_STMT_IF:
    c = new_cstmt(in, s);
    if (!(c->a = compile_scalar(in, s->u.cond.cond, true, "an if condition",
                                depth + 1)))
      return NULL;
    c->body = compile_stmt(in, s->u.cond.then_s, depth + 1);
    c->else_s = compile_stmt(in, s->u.cond.else_s, depth + 1);
    break;
  case TS_STMT_EVALUATE:
    c = new_cstmt(in, s);
    if (!(c->a = compile_expr(in, s->u.eval.value, depth + 1))) return NULL;
    c->lanes = c->a->lanes;
    break;
  case TS_STMT_LET: {
    const ts_expr *var = s->u.let.var;
    if (!var || var->kind != TS_EXPR_VAR) {
      FAIL(in, TS_EINVAL, "let binds something that is not a variable");
      return NULL;
    }
    c = new_cstmt(in, s);
    if (!(c->a = compile_expr(in, s->u.let.value, depth + 1))) return NULL;
    if (class_of(var->dtype) != c->a->cls) {
      FAIL(in, TS_EINVAL, "let binds %s variable '%s' to a %s value",
           dtype_name(var->dtype, tb), var->u.var.name,
           dtype_name(s->u.let.value->dtype, tb2));
      return NULL;
    }
    c->lanes = var->dtype.lanes;
    void *old = bind_var(in, var, &c->slot);
    c->body = compile_stmt(in, s->u.let.body, depth + 1);
    unbind_var(in, var, old);
    break;
  }
  case TS_STMT_ALLOCATE: {
    c = new_cstmt(in, s);
    void *old;
    if ((c->slot =
             define_buffer(in, s->u.alloc.buffer, MAX_ALLOC_BYTES, &old)) < 0)
      return NULL;
    c->body = compile_stmt(in, s->u.alloc.body, depth + 1);
    ts_node_map_put(in->buf_slot, s->u.alloc.buffer, old);
    break;
  }
  default:
    FAIL(in, TS_EINVAL, "unknown statement kind %d", s->kind);
    return NULL;
  }
  return in->failed ? NULL : c;
}

/* ---- execution ---- */

static void exec(interp *in, const cstmt *s);

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
      if (at_start) exec(in, k->init);
    }
    if (k->body) exec(in, k->body);
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

static void exec(interp *in, const cstmt *s) {
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
      exec(in, s->body);
      break;
    }
    for (int64_t i = 0; i < ext && !in->failed; i++) {
      var->i =
          wrap((int64_t)((uint64_t)lo + (uint64_t)i), s->var_cls, s->var_bits);
      exec(in, s->body);
    }
    break;
  }
  case TS_STMT_BLOCK_REALIZE: exec_realize(in, s->blk); break;
  case TS_STMT_STORE: exec_store(in, s); break;
  case TS_STMT_SEQ:
    for (int i = 0; i < s->n_items && !in->failed; i++) exec(in, s->items[i]);
    break;
  case TS_STMT_IF:
    if (ev(in, s->a, 0).i)
      exec(in, s->body);
    else
      exec(in, s->else_s);
    break;
  case TS_STMT_EVALUATE:
    for (int l = 0; l < s->lanes; l++) ev(in, s->a, l);
    break;
  case TS_STMT_LET:
    for (int l = 0; l < s->lanes; l++) in->vals[s->slot + l] = ev(in, s->a, l);
    exec(in, s->body);
    break;
  case TS_STMT_ALLOCATE: {
    rbuf *b = &in->bufs[s->slot];
    if (!alloc_buffer(in, b)) break;
    exec(in, s->body);
    release_buffer(b);
    break;
  }
  default: break;
  }
}

/* ---- entry points ---- */

int interp_open(const ts_func *f, void *const *args, int n_args,
                const ts_interp_options *opts, gpu_sim *gpu, interp **out,
                ts_error *err) {
  *out = NULL;
  if (!f) return TS_ERR(err, TS_EINVAL, "interpreter: no function given");
  if (n_args != f->n_params)
    return TS_ERR(err, TS_EINVAL,
                  "function '%s' takes %d buffer arguments, "
                  "%d given",
                  f->name, f->n_params, n_args);
  for (int i = 0; i < n_args; i++)
    if (!args || !args[i])
      return TS_ERR(err, TS_EINVAL,
                    "function '%s': no storage given for "
                    "parameter %d ('%s')",
                    f->name, i, f->params[i] ? f->params[i]->name : "?");
  interp *in = calloc(1, sizeof *in);
  if (!in) return TS_ERR(err, TS_ENOMEM, "interpreter: out of memory");
  in->func = f;
  in->err = err;
  in->max_steps = opts ? opts->max_steps : 0;
  in->gpu = gpu;
  for (int d = 0; d < 3; d++) in->launch.grid[d] = in->launch.block[d] = 1;
  in->arena = ts_arena_create();
  in->var_slot = ts_node_map_create();
  in->buf_slot = ts_node_map_create();
  for (int i = 0; i < n_args && !in->failed; i++) {
    void *old;
    int slot = define_buffer(in, f->params[i], 0, &old);
    if (slot >= 0) in->bufs[slot].data = args[i];
  }
  if (!in->failed) in->body = compile_stmt(in, f->body, 0);
  in->proto_bufs = in->bufs;
  in->block = NULL;
  if (!in->failed && (in->own = interp_thread_new(in))) {
    free(in->own->bufs);
    in->own->bufs = in->proto_bufs;
    interp_thread_switch(in, NULL, in->own);
  }
  if (in->failed) return interp_close(in);
  *out = in;
  return TS_OK;
}

int interp_close(interp *in) {
  int code = in->failed ? in->code : TS_OK;
  if (in->own) in->own->bufs = NULL; /* (the prototype table, freed below) */
  interp_thread_free(in->own);
  free(in->proto_bufs);
  free(in->launch.shared);
  ts_node_map_destroy(in->var_slot);
  ts_node_map_destroy(in->buf_slot);
  ts_arena_destroy(in->arena);
  free(in);
  return code;
}

const interp_launch *interp_launch_of(const interp *in) { return &in->launch; }

bool interp_failed(const interp *in) { return in->failed; }

int ts_interp_run(const ts_func *f, void *const *args, int n_args,
                  const ts_interp_options *opts, ts_error *err) {
  interp *in;
  int rc = interp_open(f, args, n_args, opts, NULL, &in, err);
  if (rc) return rc;
  exec(in, in->body);
  return interp_close(in);
}

/* ---- GPU threads ---- */

void interp_thread_free(interp_thread *t) {
  if (!t) return;
  free(t->vals);
  free(t->bufs);
  free(t->scratch_vals);
  free(t->scratch_off);
  free(t);
}

interp_thread *interp_thread_new(interp *in) {
  interp_thread *t = calloc(1, sizeof *t);
  int lanes = in->max_lanes > 0 ? in->max_lanes : 1;
  if (t) {
    t->vals = calloc((size_t)(in->n_vals ? in->n_vals : 1), sizeof *t->vals);
    t->bufs = calloc((size_t)(in->n_bufs ? in->n_bufs : 1), sizeof *t->bufs);
    t->scratch_vals = calloc((size_t)lanes, sizeof *t->scratch_vals);
    t->scratch_off = calloc((size_t)lanes, sizeof *t->scratch_off);
  }
  if (!t || !t->vals || !t->bufs || !t->scratch_vals || !t->scratch_off) {
    interp_thread_free(t);
    FAIL(in, TS_ENOMEM, "out of memory for the GPU threads");
    return NULL;
  }
  return t;
}

void interp_thread_reset(interp *in, interp_thread *t, const int64_t index[6],
                         char *const *shared_data) {
  memcpy(t->bufs, in->proto_bufs, sizeof *t->bufs * (size_t)in->n_bufs);
  for (int i = 0; i < in->n_bufs; i++)
    if (t->bufs[i].shared >= 0)
      t->bufs[i].data = shared_data[t->bufs[i].shared];
  memcpy(t->index, index, sizeof t->index);
  t->block = NULL;
}

void interp_thread_switch(interp *in, interp_thread *from, interp_thread *to) {
  if (from) from->block = in->block;
  in->vals = to->vals;
  in->bufs = to->bufs;
  in->scratch_vals = to->scratch_vals;
  in->scratch_off = to->scratch_off;
  in->launch_index = to->index;
  in->block = to->block;
}

void interp_thread_run(interp *in) { exec(in, in->body); }

void interp_thread_restore(interp *in, interp_thread *from) {
  interp_thread_switch(in, from, in->own);
}
