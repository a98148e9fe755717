/*
 * emit_reduce.c — a serial loop that folds consecutive float32 elements into
 * one scalar,
 *
 *   for k in range(L) {
 *     if k == 0 { acc[c] = init }        (optional)
 *     acc[c] = acc[c] + B[base + k]      (or max(...), min(...))
 *   }
 *
 * emitted as one vector load of B[base : base + L] and an LLVM vector
 * reduction. This is the last step of a row reduction that the schedule
 * computed in vector partial sums (a vectorized rfactor leaves 8 or 16 lanes
 * to add up, per row). Left as a loop, LLVM unrolls it and its SLP
 * vectorizer joins the lanes of two such reductions side by side (a layer
 * norm's sum and sum of squares) into dozens of inserts and shuffles per
 * row; the vector reduction is a short tree of shuffles. A sum is allowed to
 * reassociate like every other float sum the code generator emits; the
 * maximum and minimum are LLVM's maxnum and minnum, as in the scalar form,
 * whose result does not depend on the order.
 */
#include "codegen/emit_internal.h"

#include <string.h>

#define MIN_LANES 4
#define MAX_LANES 256

/* Whether x mentions var. */
static bool uses(const ts_expr *x, const ts_expr *var) {
  if (x == var) return true;
  if (!x) return false;
  int n = ts_expr_n_operands(x);
  for (int i = 0; i < n; i++)
    if (uses(ts_expr_operand(x, i), var)) return true;
  return false;
}

/* idx is k or base + k (either order) with base free of k: *base is NULL
 * for k alone. */
static bool plus_k(const ts_expr *idx, const ts_expr *k, ts_expr **base) {
  if (idx == k) {
    *base = NULL;
    return true;
  }
  if (ts_expr_kind_of(idx) != TS_EXPR_ADD) return false;
  for (int s = 0; s < 2; s++) {
    ts_expr *a = ts_expr_operand(idx, s), *b = ts_expr_operand(idx, 1 - s);
    if (b == k && !uses(a, k)) {
      *base = a;
      return true;
    }
  }
  return false;
}

static bool is_f32_scalar(ts_dtype t) {
  return t.code == TS_DT_FLOAT && t.bits == 32 && t.lanes == 1;
}

/* A plain load of one element of a flattened buffer. */
static bool scalar_load(const ts_expr *x) {
  return ts_expr_kind_of(x) == TS_EXPR_LOAD && ts_expr_n_operands(x) == 1 &&
         is_f32_scalar(ts_expr_dtype(x));
}

typedef struct fold {
  ts_stmt *init;  /* the `if k == 0` branch's statement, or NULL */
  ts_buffer *acc; /* acc[c] */
  ts_expr *c;
  ts_expr_kind op; /* TS_EXPR_ADD, _MAX or _MIN */
  ts_buffer *src;  /* B[base + k] */
  ts_expr *base;   /* NULL: 0 */
} fold;

/* `if k == 0 { S }` with S free of k: S. */
static ts_stmt *first_only(ts_stmt *s, const ts_expr *k) {
  if (ts_stmt_kind_of(s) != TS_STMT_IF || ts_if_else(s)) return NULL;
  ts_expr *cond = ts_if_cond(s);
  int64_t v;
  if (ts_expr_kind_of(cond) != TS_EXPR_EQ || ts_expr_operand(cond, 0) != k ||
      !ts_expr_is_const_int(ts_expr_operand(cond, 1), &v) || v != 0)
    return NULL;
  ts_stmt *t = ts_if_then(s);
  if (ts_stmt_kind_of(t) != TS_STMT_STORE || ts_store_n_indices(t) != 1 ||
      uses(ts_store_index(t, 0), k) || uses(ts_store_value(t), k))
    return NULL;
  return t;
}

static bool match_update(ts_stmt *s, const ts_expr *k, fold *f) {
  if (ts_stmt_kind_of(s) != TS_STMT_STORE || ts_store_n_indices(s) != 1)
    return false;
  ts_expr *c = ts_store_index(s, 0), *v = ts_store_value(s);
  ts_expr_kind op = ts_expr_kind_of(v);
  if ((op != TS_EXPR_ADD && op != TS_EXPR_MAX && op != TS_EXPR_MIN) ||
      !is_f32_scalar(ts_expr_dtype(v)) || uses(c, k))
    return false;
  for (int s0 = 0; s0 < 2; s0++) {
    ts_expr *a = ts_expr_operand(v, s0), *b = ts_expr_operand(v, 1 - s0);
    if (!scalar_load(a) || !scalar_load(b) ||
        ts_expr_buffer(a) != ts_store_buffer(s) ||
        !emit_same_expr(ts_expr_operand(a, 0), c) ||
        ts_expr_buffer(b) == ts_store_buffer(s) ||
        !plus_k(ts_expr_operand(b, 0), k, &f->base))
      continue;
    f->acc = ts_store_buffer(s);
    f->c = c;
    f->op = op;
    f->src = ts_expr_buffer(b);
    return true;
  }
  return false;
}

/* The loop as a fold of L = its extent elements, into f and *lanes. */
static bool match(ts_stmt *loop, fold *f, int *lanes) {
  int64_t lo, n;
  ts_for_kind kind = ts_for_kind_of(loop);
  if ((kind != TS_FOR_SERIAL && kind != TS_FOR_UNROLLED) ||
      !ts_expr_is_const_int(ts_for_min(loop), &lo) || lo != 0 ||
      !ts_expr_is_const_int(ts_for_extent(loop), &n) || n < MIN_LANES ||
      n > MAX_LANES)
    return false;
  ts_expr *k = ts_for_var(loop);
  ts_stmt *body = ts_for_body(loop);
  memset(f, 0, sizeof *f);
  if (ts_stmt_kind_of(body) == TS_STMT_SEQ) {
    if (ts_seq_n(body) != 2) return false;
    f->init = first_only(ts_seq_item(body, 0), k);
    if (!f->init) return false;
    body = ts_seq_item(body, 1);
  }
  if (!match_update(body, k, f)) return false;
  if (f->op != TS_EXPR_ADD && (n & (n - 1))) return false; /* halve() */
  if (f->init && (ts_store_buffer(f->init) != f->acc ||
                  !emit_same_expr(ts_store_index(f->init, 0), f->c)))
    return false;
  *lanes = (int)n;
  return true;
}

static LLVMValueRef element(emitter *e, ts_buffer *b, ts_expr *idx) {
  LLVMValueRef base = emit_buffer_data(e, b);
  LLVMValueRef i = idx ? emit_expr(e, idx) : LLVMConstInt(emit_i64t(e), 0, 0);
  if (!base) return LLVMGetUndef(LLVMPointerTypeInContext(e->ctx, 0));
  LLVMTypeRef ft = LLVMFloatTypeInContext(e->ctx);
  return LLVMBuildGEP2(e->b, ft, base, &i, 1, "");
}

/* The maxnum (or minnum) of v's `lanes` lanes, a power of two, as a tree:
 * the upper half against the lower one until one lane is left.
 * llvm.vector.reduce.fmax would do, but without no-NaN flags LLVM expands
 * it into a chain of scalar steps. */
static LLVMValueRef halve(emitter *e, const char *name, LLVMValueRef v,
                          int lanes) {
  LLVMTypeRef i32 = emit_i32t(e);
  LLVMValueRef idx[MAX_LANES / 2];
  for (int n = lanes / 2; n >= 1 && v; n /= 2) {
    LLVMValueRef halves[2];
    for (int h = 0; h < 2; h++) {
      for (int l = 0; l < n; l++)
        idx[l] = LLVMConstInt(i32, (unsigned)(h * n + l), 0);
      halves[h] = LLVMBuildShuffleVector(e->b, v, LLVMGetUndef(LLVMTypeOf(v)),
                                         LLVMConstVector(idx, (unsigned)n), "");
    }
    LLVMTypeRef ht = LLVMTypeOf(halves[0]);
    v = emit_call_intrinsic(e, name, &ht, 1, halves, 2);
  }
  if (!v) return NULL;
  return LLVMBuildExtractElement(e->b, v, LLVMConstInt(i32, 0, 0), "");
}

bool emit_lane_fold(emitter *e, ts_stmt *loop) {
  fold f;
  int lanes;
  if (e->mask || !match(loop, &f, &lanes)) return false;
  if (f.init) emit_stmt(e, f.init);
  LLVMTypeRef ft = LLVMFloatTypeInContext(e->ctx);
  LLVMTypeRef vt = LLVMVectorType(ft, (unsigned)lanes);
  LLVMValueRef vec = emit_load_vec(e, vt, element(e, f.src, f.base), 4);
  LLVMValueRef p = element(e, f.acc, f.c);
  LLVMValueRef acc = LLVMBuildLoad2(e->b, ft, p, "");
  LLVMSetAlignment(acc, 4);
  LLVMValueRef r;
  if (f.op == TS_EXPR_ADD) {
    LLVMValueRef args[2] = {acc, vec};
    r = emit_call_intrinsic(e, "llvm.vector.reduce.fadd", &vt, 1, args, 2);
    if (r && LLVMCanValueUseFastMathFlags(r))
      LLVMSetFastMathFlags(r, LLVMFastMathAllowReassoc |
                                  LLVMFastMathAllowContract);
  } else {
    const char *name = f.op == TS_EXPR_MAX ? "llvm.maxnum" : "llvm.minnum";
    LLVMValueRef red = halve(e, name, vec, lanes);
    LLVMValueRef args[2] = {acc, red};
    r = red ? emit_call_intrinsic(e, name, &ft, 1, args, 2) : NULL;
  }
  if (!r || e->status) return true;
  LLVMValueRef st = LLVMBuildStore(e->b, r, p);
  LLVMSetAlignment(st, 4);
  return true;
}
