/*
 * emit_expr.c — LLVM IR emission of expressions: arithmetic and comparisons,
 * casts, vector code from ramp/broadcast expressions, loads and stores
 * (masked under a vector if, gathers and scatters), if_then_else, and the
 * dispatch of calls to the math intrinsics (emit_math.c) and to the target
 * intrinsics (emit_intrin_x86.c, emit_intrin_nvptx.c).
 */
#include "codegen/emit_internal.h"

#include <stdlib.h>
#include <math.h>
#include <string.h>

/* ---- expressions ---- */

LLVMValueRef emit_undef(emitter *e, ts_dtype t) {
  return LLVMGetUndef(emit_reg_type(e, t));
}

static LLVMValueRef lookup(emitter *e, const void *node, const char *what,
                           const char *name) {
  LLVMValueRef v = ts_node_map_get(e->cur->vals, node);
  if (!v) {
    emit_fail(e, TS_EINVAL, "code generation: %s '%s' is not defined here",
              what, name);
    return NULL;
  }
  return v;
}

/* Float16/bfloat16 are computed in float32 (rounded back after each
 * operation, as the interpreter does). */
LLVMValueRef emit_to_work(emitter *e, LLVMValueRef v, ts_dtype t) {
  if (!emit_is_half(t)) return v;
  return emit_half_to_f32(e, v, t.code == TS_DT_BFLOAT);
}
LLVMValueRef emit_from_work(emitter *e, LLVMValueRef v, ts_dtype t) {
  if (!emit_is_half(t)) return v;
  return emit_f32_to_half(e, v, t.code == TS_DT_BFLOAT);
}

static bool nonneg(emitter *e, ts_expr *x) {
  int64_t lo, hi;
  return ts_expr_const_bound(x, e->ranges, &lo, &hi) && lo >= 0;
}
static bool positive(emitter *e, ts_expr *x) {
  int64_t lo, hi;
  return ts_expr_const_bound(x, e->ranges, &lo, &hi) && lo > 0;
}

static LLVMValueRef int_floordivmod(emitter *e, bool is_mod, LLVMValueRef a,
                                    LLVMValueRef b) {
  LLVMValueRef q = LLVMBuildSDiv(e->b, a, b, "");
  LLVMValueRef r = LLVMBuildSRem(e->b, a, b, "");
  LLVMValueRef zero = LLVMConstNull(LLVMTypeOf(a));
  LLVMValueRef rnz = LLVMBuildICmp(e->b, LLVMIntNE, r, zero, "");
  LLVMValueRef rneg = LLVMBuildICmp(e->b, LLVMIntSLT, r, zero, "");
  LLVMValueRef bneg = LLVMBuildICmp(e->b, LLVMIntSLT, b, zero, "");
  LLVMValueRef differ = LLVMBuildXor(e->b, rneg, bneg, "");
  LLVMValueRef adjust = LLVMBuildAnd(e->b, rnz, differ, "");
  if (is_mod)
    return LLVMBuildSelect(e->b, adjust, LLVMBuildAdd(e->b, r, b, ""), r, "");
  return LLVMBuildSub(e->b, q, LLVMBuildZExt(e->b, adjust, LLVMTypeOf(q), ""),
                      "");
}

/* Lets LLVM fuse a multiply and an add into an FMA (one rounding instead of
 * two) and reassociate sums and products, which is what lets it keep a
 * reduction (a row sum, a dot product along the innermost loop) in vector
 * partial sums. Both stay within every float tolerance the checks use; the
 * interpreter's order is the reference. */
LLVMValueRef emit_contract(LLVMValueRef v) {
  if (LLVMIsAInstruction(v) && LLVMCanValueUseFastMathFlags(v))
    LLVMSetFastMathFlags(v,
                         LLVMFastMathAllowContract | LLVMFastMathAllowReassoc);
  return v;
}

/* Lets LLVM turn a division by a loop-invariant divisor into one reciprocal
 * outside the loop and a multiply inside (softmax's normalization by the
 * row's sum): a vector divide costs several times a multiply. The product
 * is within 2 ulp of the quotient. */
static LLVMValueRef reciprocal_ok(LLVMValueRef v) {
  if (LLVMIsAInstruction(v) && LLVMCanValueUseFastMathFlags(v))
    LLVMSetFastMathFlags(v, LLVMFastMathAllowReciprocal);
  return v;
}

static LLVMValueRef emit_binary(emitter *e, ts_expr *x) {
  ts_expr_kind k = ts_expr_kind_of(x);
  ts_expr *xa = ts_expr_operand(x, 0), *xb = ts_expr_operand(x, 1);
  ts_dtype t = ts_expr_dtype(xa);
  LLVMValueRef a = emit_expr(e, xa), b = emit_expr(e, xb);
  if (e->status) return emit_undef(e, ts_expr_dtype(x));
  LLVMBuilderRef B = e->b;
  if (ts_dtype_is_float(t)) {
    a = emit_to_work(e, a, t);
    b = emit_to_work(e, b, t);
    LLVMValueRef r = NULL;
    LLVMTypeRef ty = LLVMTypeOf(a);
    switch (k) {
    case TS_EXPR_ADD: r = emit_contract(LLVMBuildFAdd(B, a, b, "")); break;
    case TS_EXPR_SUB: r = emit_contract(LLVMBuildFSub(B, a, b, "")); break;
    case TS_EXPR_MUL: r = emit_contract(LLVMBuildFMul(B, a, b, "")); break;
    case TS_EXPR_DIV: r = reciprocal_ok(LLVMBuildFDiv(B, a, b, "")); break;
    case TS_EXPR_MOD: r = LLVMBuildFRem(B, a, b, ""); break;
    case TS_EXPR_FLOORDIV:
    case TS_EXPR_FLOORMOD: {
      LLVMValueRef q = LLVMBuildFDiv(B, a, b, "");
      LLVMValueRef fl = emit_call_intrinsic(e, "llvm.floor", &ty, 1, &q, 1);
      r = k == TS_EXPR_FLOORDIV
              ? fl
              : LLVMBuildFSub(B, a, LLVMBuildFMul(B, fl, b, ""), "");
      break;
    }
    case TS_EXPR_MIN:
    case TS_EXPR_MAX: {
      /* an accumulator that holds no NaN: one compare-select
       * (emit_minmax.c) */
      int acc = emit_nan_free_operand(e, x);
      if (acc >= 0)
        return emit_from_work(
            e,
            emit_minmax_select(e, k == TS_EXPR_MAX, acc ? b : a, acc ? a : b),
            t);
      LLVMValueRef args[2] = {a, b};
      r = emit_call_intrinsic(
          e, k == TS_EXPR_MIN ? "llvm.minnum" : "llvm.maxnum", &ty, 1, args, 2);
      break;
    }
    case TS_EXPR_EQ: return LLVMBuildFCmp(B, LLVMRealOEQ, a, b, "");
    case TS_EXPR_NE: return LLVMBuildFCmp(B, LLVMRealUNE, a, b, "");
    case TS_EXPR_LT: return LLVMBuildFCmp(B, LLVMRealOLT, a, b, "");
    case TS_EXPR_LE: return LLVMBuildFCmp(B, LLVMRealOLE, a, b, "");
    case TS_EXPR_GT: return LLVMBuildFCmp(B, LLVMRealOGT, a, b, "");
    case TS_EXPR_GE: return LLVMBuildFCmp(B, LLVMRealOGE, a, b, "");
    default:
      emit_fail(e, TS_EINVAL, "code generation: '%s' on floating-point values",
                ts_expr_kind_name(k));
      return emit_undef(e, ts_expr_dtype(x));
    }
    return emit_from_work(e, r, t);
  }
  bool is_signed = ts_dtype_is_signed(t);
  switch (k) {
  case TS_EXPR_ADD: return LLVMBuildAdd(B, a, b, "");
  case TS_EXPR_SUB: return LLVMBuildSub(B, a, b, "");
  case TS_EXPR_MUL: return LLVMBuildMul(B, a, b, "");
  case TS_EXPR_DIV:
    return is_signed ? LLVMBuildSDiv(B, a, b, "") : LLVMBuildUDiv(B, a, b, "");
  case TS_EXPR_MOD:
    return is_signed ? LLVMBuildSRem(B, a, b, "") : LLVMBuildURem(B, a, b, "");
  case TS_EXPR_FLOORDIV:
    if (!is_signed) return LLVMBuildUDiv(B, a, b, "");
    if (nonneg(e, xa) && positive(e, xb)) return LLVMBuildSDiv(B, a, b, "");
    return int_floordivmod(e, false, a, b);
  case TS_EXPR_FLOORMOD:
    if (!is_signed) return LLVMBuildURem(B, a, b, "");
    if (nonneg(e, xa) && positive(e, xb)) return LLVMBuildSRem(B, a, b, "");
    return int_floordivmod(e, true, a, b);
  case TS_EXPR_MIN:
  case TS_EXPR_MAX: {
    if (ts_dtype_is_bool(t))
      return k == TS_EXPR_MIN ? LLVMBuildAnd(B, a, b, "")
                              : LLVMBuildOr(B, a, b, "");
    LLVMTypeRef ty = LLVMTypeOf(a);
    LLVMValueRef args[2] = {a, b};
    const char *name = k == TS_EXPR_MIN
                           ? (is_signed ? "llvm.smin" : "llvm.umin")
                           : (is_signed ? "llvm.smax" : "llvm.umax");
    return emit_call_intrinsic(e, name, &ty, 1, args, 2);
  }
  case TS_EXPR_EQ: return LLVMBuildICmp(B, LLVMIntEQ, a, b, "");
  case TS_EXPR_NE: return LLVMBuildICmp(B, LLVMIntNE, a, b, "");
  case TS_EXPR_LT:
    return LLVMBuildICmp(B, is_signed ? LLVMIntSLT : LLVMIntULT, a, b, "");
  case TS_EXPR_LE:
    return LLVMBuildICmp(B, is_signed ? LLVMIntSLE : LLVMIntULE, a, b, "");
  case TS_EXPR_GT:
    return LLVMBuildICmp(B, is_signed ? LLVMIntSGT : LLVMIntUGT, a, b, "");
  case TS_EXPR_GE:
    return LLVMBuildICmp(B, is_signed ? LLVMIntSGE : LLVMIntUGE, a, b, "");
  case TS_EXPR_AND: return LLVMBuildAnd(B, a, b, "");
  case TS_EXPR_OR: return LLVMBuildOr(B, a, b, "");
  default: break;
  }
  emit_fail(e, TS_EINTERNAL, "code generation: unknown binary '%s'",
            ts_expr_kind_name(k));
  return emit_undef(e, ts_expr_dtype(x));
}

/* A float (work type) to integer type T (dtype to), saturating: NaN -> 0,
 * beyond the range -> its bound, else truncated toward zero — what
 * llvm.fptosi.sat computes, written as compares and selects around a plain
 * conversion because LLVM lowers the vector forms of that intrinsic one
 * lane at a time on x86 (a float32 -> uint8 quantization ran 10x slower
 * than a float32 ReLU of the same size). The bounds compared against are
 * powers of two (and their negation, less one), exact in every float
 * format; a lane the plain conversion would get wrong is never selected. */
static LLVMValueRef saturating_to_int(emitter *e, LLVMValueRef v, ts_dtype to,
                                      LLVMTypeRef T) {
  LLVMBuilderRef B = e->b;
  LLVMTypeRef FT = LLVMTypeOf(v);
  bool vec = LLVMGetTypeKind(FT) == LLVMVectorTypeKind;
  int lanes = vec ? (int)LLVMGetVectorSize(FT) : 1;
  LLVMTypeRef fel = vec ? LLVMGetElementType(FT) : FT;
  LLVMTypeRef iel = vec ? LLVMGetElementType(T) : T;
  bool sgn = ts_dtype_is_signed(to);
  int bits = to.bits;
  double top = ldexp(1.0, sgn ? bits - 1 : bits); /* first value too big */
  double bottom = sgn ? -top - 1 : -1;            /* first too small */
  unsigned long long maxv = sgn ? (1ULL << (bits - 1)) - 1
                                : (bits == 64 ? ~0ULL : (1ULL << bits) - 1);
  unsigned long long minv = sgn ? (~0ULL << (bits - 1)) : 0;
#define SPLAT(c) (vec ? emit_splat(e, (c), lanes) : (c))
  LLVMValueRef hi = SPLAT(LLVMConstReal(fel, top));
  LLVMValueRef lo = SPLAT(LLVMConstReal(fel, bottom));
  LLVMValueRef imax = SPLAT(LLVMConstInt(iel, maxv, 0));
  LLVMValueRef imin = SPLAT(LLVMConstInt(iel, minv, 0));
#undef SPLAT
  LLVMValueRef r =
      sgn ? LLVMBuildFPToSI(B, v, T, "") : LLVMBuildFPToUI(B, v, T, "");
  LLVMValueRef nan = LLVMBuildFCmp(B, LLVMRealUNO, v, v, "");
  r = LLVMBuildSelect(B, nan, LLVMConstNull(T), r, "");
  r = LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOLE, v, lo, ""), imin, r, "");
  return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOGE, v, hi, ""), imax, r,
                         "");
}

LLVMValueRef emit_cast(emitter *e, ts_dtype to, ts_dtype from, LLVMValueRef v) {
  if (ts_dtype_eq(to, from)) return v;
  LLVMBuilderRef B = e->b;
  LLVMTypeRef T = emit_reg_type(e, to);
  int lanes = to.lanes;
  LLVMTypeRef F32 =
      lanes > 1 ? LLVMVectorType(emit_f32t(e), lanes) : emit_f32t(e);
  if (ts_dtype_is_handle(to) || ts_dtype_is_handle(from)) {
    emit_fail(e, TS_EINVAL,
              "code generation: casts of handles are not supported");
    return LLVMGetUndef(T);
  }
  if (ts_dtype_is_bool(to)) {
    if (ts_dtype_is_float(from))
      return LLVMBuildFCmp(B, LLVMRealUNE, v, LLVMConstNull(LLVMTypeOf(v)), "");
    return LLVMBuildICmp(B, LLVMIntNE, v, LLVMConstNull(LLVMTypeOf(v)), "");
  }
  if (ts_dtype_is_bool(from)) {
    if (ts_dtype_is_float(to)) {
      LLVMValueRef f = LLVMBuildUIToFP(B, v, F32, "");
      return emit_is_half(to)
                 ? emit_from_work(e, f, to)
                 : (to.bits == 64 ? LLVMBuildFPExt(B, f, T, "") : f);
    }
    return LLVMBuildZExt(B, v, T, "");
  }
  if (ts_dtype_is_int(from) && ts_dtype_is_int(to)) {
    if (to.bits < from.bits) return LLVMBuildTrunc(B, v, T, "");
    if (to.bits > from.bits)
      return ts_dtype_is_signed(from) ? LLVMBuildSExt(B, v, T, "")
                                      : LLVMBuildZExt(B, v, T, "");
    return v;
  }
  if (ts_dtype_is_int(from) && ts_dtype_is_float(to)) {
    if (emit_is_half(to)) {
      LLVMValueRef f = ts_dtype_is_signed(from)
                           ? LLVMBuildSIToFP(B, v, F32, "")
                           : LLVMBuildUIToFP(B, v, F32, "");
      return emit_from_work(e, f, to);
    }
    return ts_dtype_is_signed(from) ? LLVMBuildSIToFP(B, v, T, "")
                                    : LLVMBuildUIToFP(B, v, T, "");
  }
  if (ts_dtype_is_float(from) && ts_dtype_is_int(to))
    return saturating_to_int(e, emit_to_work(e, v, from), to, T);
  /* float -> float; the 16-bit formats through float32, as the interpreter
   * converts (a float64 rounds to float32 first) */
  if (emit_is_half(from) || emit_is_half(to)) {
    if (emit_is_half(from)) v = emit_to_work(e, v, from);
    if (from.bits == 64) v = LLVMBuildFPTrunc(B, v, F32, "");
    if (emit_is_half(to)) return emit_from_work(e, v, to);
    return to.bits == 64 ? LLVMBuildFPExt(B, v, T, "") : v;
  }
  if (to.bits > from.bits) return LLVMBuildFPExt(B, v, T, "");
  return LLVMBuildFPTrunc(B, v, T, "");
}

LLVMValueRef emit_buffer_data(emitter *e, ts_buffer *b) {
  return lookup(e, b, "buffer", ts_buffer_name(b));
}

/* Element pointer of buffer[index] (scalar index). */
static LLVMValueRef elem_ptr(emitter *e, ts_buffer *b, LLVMValueRef index) {
  LLVMValueRef base = emit_buffer_data(e, b);
  if (!base) return LLVMGetUndef(emit_ptrt(e));
  return LLVMBuildInBoundsGEP2(e->b, emit_mem_type(e, ts_buffer_dtype(b)), base,
                               &index, 1, "");
}

/* Element pointer of buffer[idx] for a scalar index expression x + c (c a
 * constant): the pointer to element x, then c elements past it, each a
 * GEP of its own. As one sum, LLVM can turn x + c into x | c where the
 * low bits of x are known zero, and then x86 addressing does not take the
 * constant: a register tile's loads at row offsets came out as a mov and
 * an or per FMA. Plain GEPs (not inbounds): x alone may point outside the
 * buffer. */
static LLVMValueRef idx_ptr(emitter *e, ts_buffer *b, ts_expr *idx) {
  int64_t c = 0;
  if (ts_expr_kind_of(idx) != TS_EXPR_ADD ||
      !ts_expr_is_const_int(ts_expr_operand(idx, 1), &c) || c == 0)
    return elem_ptr(e, b, emit_expr(e, idx));
  LLVMValueRef base = emit_buffer_data(e, b);
  LLVMValueRef x = emit_expr(e, ts_expr_operand(idx, 0));
  if (!base) return LLVMGetUndef(emit_ptrt(e));
  LLVMTypeRef mt = emit_mem_type(e, ts_buffer_dtype(b));
  LLVMValueRef ci = LLVMConstInt(LLVMTypeOf(x), (unsigned long long)c, 1);
  LLVMValueRef p = LLVMBuildGEP2(e->b, mt, base, &x, 1, "");
  return LLVMBuildGEP2(e->b, mt, p, &ci, 1, "");
}

static bool is_unit_ramp(ts_expr *idx) {
  int64_t s;
  return ts_expr_kind_of(idx) == TS_EXPR_RAMP &&
         ts_expr_is_const_int(ts_expr_operand(idx, 1), &s) && s == 1;
}

static unsigned elem_align(emitter *e, ts_buffer *b) {
  return (unsigned)ts_dtype_elem_bytes(ts_buffer_dtype(b));
}

static LLVMValueRef load_to_reg(emitter *e, ts_dtype t, LLVMValueRef v) {
  if (t.code == TS_DT_BOOL)
    return LLVMBuildICmp(e->b, LLVMIntNE, v, LLVMConstNull(LLVMTypeOf(v)), "");
  return v;
}

static LLVMValueRef reg_to_mem(emitter *e, ts_dtype t, LLVMValueRef v) {
  if (t.code != TS_DT_BOOL) return v;
  LLVMTypeRef i8 = LLVMInt8TypeInContext(e->ctx);
  return LLVMBuildZExt(e->b, v, t.lanes > 1 ? LLVMVectorType(i8, t.lanes) : i8,
                       "");
}

/* Loads and stores under a vector if: only the enabled lanes touch memory
 * (llvm.masked.load/store for contiguous accesses, gather/scatter
 * otherwise). */
static LLVMValueRef lane_ptrs(emitter *e, ts_buffer *b, ts_expr *idx) {
  LLVMValueRef base = emit_buffer_data(e, b);
  LLVMValueRef iv = emit_expr(e, idx);
  if (!base)
    return LLVMGetUndef(
        LLVMVectorType(emit_ptrt(e), LLVMGetVectorSize(LLVMTypeOf(iv))));
  return LLVMBuildInBoundsGEP2(e->b, emit_mem_type(e, ts_buffer_dtype(b)), base,
                               &iv, 1, "");
}

/* Whether a masked access of idx (a unit ramp) can touch every lane
 * instead: a buffer of this function's own ("local": registers and the
 * stack) whose allocation holds the whole vector. The tail tile of a
 * register tile accumulates in such a buffer; its masked lanes are then a
 * blend (select the enabled lanes, load and store the whole vector), which
 * LLVM keeps in registers, where llvm.masked.store would keep the buffer
 * in memory and make every step of the reduction a masked store and
 * load. */
static bool whole_vector_ok(emitter *e, ts_buffer *b, ts_expr *idx, int lanes) {
  int64_t lo, hi;
  return is_unit_ramp(idx) && !strcmp(ts_buffer_scope(b), "local") &&
         ts_expr_const_bound(ts_expr_operand(idx, 0), e->ranges, &lo, &hi) &&
         lo >= 0 && hi + lanes <= ts_buffer_elems(b);
}

/* The vector type a masked access of buffer b moves: 16-bit floats as
 * 16-bit integers (the same bits), since a target without native
 * bfloat16 or float16 legalizes a masked bfloat16 vector through float
 * conversions that call compiler-rt (__truncsfbf2), which kernels do not
 * link. */
static LLVMTypeRef masked_type(emitter *e, ts_buffer *b, int lanes) {
  LLVMTypeRef el = emit_mem_type(e, ts_buffer_dtype(b));
  LLVMTypeKind k = LLVMGetTypeKind(el);
  if (k == LLVMBFloatTypeKind || k == LLVMHalfTypeKind)
    el = LLVMInt16TypeInContext(e->ctx);
  return LLVMVectorType(el, (unsigned)lanes);
}

static LLVMValueRef masked_load(emitter *e, ts_buffer *b, ts_expr *idx,
                                int lanes) {
  LLVMTypeRef vt = LLVMVectorType(emit_mem_type(e, ts_buffer_dtype(b)), lanes);
  LLVMTypeRef mt = masked_type(e, b, lanes);
  LLVMValueRef align = LLVMConstInt(emit_i32t(e), elem_align(e, b), 0);
  LLVMValueRef pass = LLVMConstNull(mt), v;
  if (is_unit_ramp(idx)) {
    LLVMValueRef p = idx_ptr(e, b, ts_expr_operand(idx, 0));
    LLVMTypeRef over[2] = {mt, LLVMTypeOf(p)};
    LLVMValueRef args[4] = {p, align, e->mask, pass};
    v = emit_call_intrinsic(e, "llvm.masked.load", over, 2, args, 4);
  } else {
    LLVMValueRef ptrs = lane_ptrs(e, b, idx);
    LLVMTypeRef over[2] = {mt, LLVMTypeOf(ptrs)};
    LLVMValueRef args[4] = {ptrs, align, e->mask, pass};
    v = emit_call_intrinsic(e, "llvm.masked.gather", over, 2, args, 4);
  }
  return mt == vt ? v : LLVMBuildBitCast(e->b, v, vt, "");
}

static void masked_store(emitter *e, ts_buffer *b, ts_expr *idx, LLVMValueRef v,
                         int lanes) {
  LLVMTypeRef mt = masked_type(e, b, lanes);
  if (mt != LLVMTypeOf(v)) v = LLVMBuildBitCast(e->b, v, mt, "");
  LLVMValueRef align = LLVMConstInt(emit_i32t(e), elem_align(e, b), 0);
  if (is_unit_ramp(idx)) {
    LLVMValueRef p = idx_ptr(e, b, ts_expr_operand(idx, 0));
    LLVMTypeRef over[2] = {LLVMTypeOf(v), LLVMTypeOf(p)};
    LLVMValueRef args[4] = {v, p, align, e->mask};
    emit_call_intrinsic(e, "llvm.masked.store", over, 2, args, 4);
    return;
  }
  LLVMValueRef ptrs = lane_ptrs(e, b, idx);
  LLVMTypeRef over[2] = {LLVMTypeOf(v), LLVMTypeOf(ptrs)};
  LLVMValueRef args[4] = {v, ptrs, align, e->mask};
  emit_call_intrinsic(e, "llvm.masked.scatter", over, 2, args, 4);
}

static LLVMValueRef emit_load(emitter *e, ts_expr *x) {
  ts_buffer *b = ts_expr_buffer(x);
  ts_dtype t = ts_expr_dtype(x);
  if (ts_expr_n_operands(x) != 1) {
    emit_fail(e, TS_EINTERNAL, "code generation: buffer '%s' is not flattened",
              ts_buffer_name(b));
    return emit_undef(e, t);
  }
  ts_expr *idx = ts_expr_operand(x, 0);
  LLVMTypeRef mt = emit_mem_type(e, ts_buffer_dtype(b));
  if (t.lanes == 1) {
    LLVMValueRef p = idx_ptr(e, b, idx);
    LLVMValueRef v = LLVMBuildLoad2(e->b, mt, p, "");
    LLVMSetAlignment(v, elem_align(e, b));
    return load_to_reg(e, t, v);
  }
  if (e->mask && LLVMGetVectorSize(LLVMTypeOf(e->mask)) == (unsigned)t.lanes &&
      !whole_vector_ok(e, b, idx, t.lanes))
    return load_to_reg(e, t, masked_load(e, b, idx, t.lanes));
  if (is_unit_ramp(idx)) {
    LLVMValueRef p = idx_ptr(e, b, ts_expr_operand(idx, 0));
    LLVMValueRef v = LLVMBuildLoad2(e->b, LLVMVectorType(mt, t.lanes), p, "");
    LLVMSetAlignment(v, elem_align(e, b));
    return load_to_reg(e, t, v);
  }
  /* A gather: one scalar load per lane. */
  LLVMValueRef iv = emit_expr(e, idx);
  LLVMValueRef r = LLVMGetUndef(LLVMVectorType(mt, t.lanes));
  for (int l = 0; l < t.lanes; l++) {
    LLVMValueRef lane = LLVMConstInt(emit_i32t(e), (unsigned)l, 0);
    LLVMValueRef i = LLVMBuildExtractElement(e->b, iv, lane, "");
    LLVMValueRef v = LLVMBuildLoad2(e->b, mt, elem_ptr(e, b, i), "");
    LLVMSetAlignment(v, elem_align(e, b));
    r = LLVMBuildInsertElement(e->b, r, v, lane, "");
  }
  return load_to_reg(e, t, r);
}

static bool is_param(const emitter *e, const ts_buffer *b) {
  if (!e->func) return false;
  for (int i = 0; i < ts_func_n_params(e->func); i++)
    if (ts_func_param(e->func, i) == b) return true;
  return false;
}

/* A parameter the function only writes (never loads). */
static bool write_only_param(const emitter *e, const ts_buffer *b) {
  if (!e->func) return false;
  for (int i = 0; i < ts_func_n_params(e->func); i++)
    if (ts_func_param(e->func, i) == b)
      return i < 64 && !(e->read_params >> i & 1);
  return false;
}

/* A whole-vector store of v at p under TS_ANN_NONTEMPORAL: non-temporal
 * (bypassing the caches) when p is aligned to the vector's bytes, which
 * the instruction needs, else an ordinary store. The test is on the
 * address itself, so a row that starts unaligned (an odd row length)
 * stores normally; the branch goes the same way along a row. */
static void nontemporal_store(emitter *e, ts_buffer *b, LLVMValueRef v,
                              LLVMValueRef p) {
  /* an IR vector wider than the target's registers is stored as several
   * register-wide stores: each needs the register's alignment */
  unsigned long long bytes =
      LLVMABISizeOfType(LLVMGetModuleDataLayout(e->mod), LLVMTypeOf(v));
  unsigned long long reg =
      (unsigned long long)ts_target_vector_bits(e->target) / 8;
  if (reg >= 16 && bytes > reg) bytes = reg;
  if (bytes < 16 || (bytes & (bytes - 1))) {
    LLVMValueRef st = LLVMBuildStore(e->b, v, p);
    LLVMSetAlignment(st, elem_align(e, b));
    return;
  }
  LLVMValueRef addr = LLVMBuildPtrToInt(e->b, p, emit_i64t(e), "");
  LLVMValueRef low =
      LLVMBuildAnd(e->b, addr, LLVMConstInt(emit_i64t(e), bytes - 1, 0), "");
  LLVMValueRef aligned =
      LLVMBuildICmp(e->b, LLVMIntEQ, low, LLVMConstInt(emit_i64t(e), 0, 0), "");
  LLVMValueRef fn = e->cur->fn;
  LLVMBasicBlockRef nt_bb = LLVMAppendBasicBlockInContext(e->ctx, fn, "nt");
  LLVMBasicBlockRef st_bb = LLVMAppendBasicBlockInContext(e->ctx, fn, "st");
  LLVMBasicBlockRef end = LLVMAppendBasicBlockInContext(e->ctx, fn, "st.end");
  LLVMBuildCondBr(e->b, aligned, nt_bb, st_bb);
  LLVMPositionBuilderAtEnd(e->b, nt_bb);
  LLVMValueRef nt = LLVMBuildStore(e->b, v, p);
  LLVMSetAlignment(nt, (unsigned)bytes);
  LLVMMetadataRef one = LLVMValueAsMetadata(LLVMConstInt(emit_i32t(e), 1, 0));
  LLVMSetMetadata(
      nt, LLVMGetMDKindIDInContext(e->ctx, "nontemporal", 11),
      LLVMMetadataAsValue(e->ctx, LLVMMDNodeInContext2(e->ctx, &one, 1)));
  LLVMBuildBr(e->b, end);
  LLVMPositionBuilderAtEnd(e->b, st_bb);
  LLVMValueRef st = LLVMBuildStore(e->b, v, p);
  LLVMSetAlignment(st, elem_align(e, b));
  LLVMBuildBr(e->b, end);
  LLVMPositionBuilderAtEnd(e->b, end);
}

/* A unit-stride vector store, wider than the target's registers, to a
 * parameter the function never loads: one register-wide store after
 * another, in address order. LLVM splits a wide store into pieces it may
 * emit in any order (a 64-lane row store of layer norm came out as the
 * pieces at 192, 0, 64 and 128 bytes). Where the row starts off a cache
 * line (an odd row length), every piece spans two lines, and storing them
 * out of order cost 20 % of a layer norm of 699 x 1027 (one thread: 275
 * against 225 us in order). Not for an output the function also reads
 * (b[i] = b[i] + x, a product accumulating into it): LLVM forwards a store
 * to the next load of the same vector only when both are whole, and a
 * depthwise conv's unrolled taps ran 3 x slower split. False
 * (nothing emitted) when the vector is not a whole number of registers. */
static bool store_register_pieces(emitter *e, ts_buffer *b, LLVMValueRef v,
                                  LLVMValueRef p) {
  if (ts_target_vector_registers(e->target) <= 0) return false;
  LLVMTypeRef vt = LLVMTypeOf(v);
  if (LLVMGetTypeKind(vt) != LLVMVectorTypeKind) return false;
  LLVMTypeRef et = LLVMGetElementType(vt);
  LLVMTypeKind ek = LLVMGetTypeKind(et);
  bool plain = ek == LLVMFloatTypeKind || ek == LLVMDoubleTypeKind ||
               ek == LLVMHalfTypeKind || ek == LLVMBFloatTypeKind ||
               (ek == LLVMIntegerTypeKind && LLVMGetIntTypeWidth(et) % 8 == 0);
  if (!plain) return false;
  unsigned long long ebytes =
      LLVMABISizeOfType(LLVMGetModuleDataLayout(e->mod), et);
  unsigned long long reg =
      (unsigned long long)ts_target_vector_bits(e->target) / 8;
  unsigned n = LLVMGetVectorSize(vt);
  if (ebytes == 0 || reg % ebytes) return false;
  unsigned per = (unsigned)(reg / ebytes);
  if (per < 2 || n <= per || n % per || n > 1024) return false;
  LLVMValueRef lanes[1024];
  for (unsigned k = 0; k < n; k += per) {
    for (unsigned l = 0; l < per; l++)
      lanes[l] = LLVMConstInt(emit_i32t(e), k + l, 0);
    LLVMValueRef piece = LLVMBuildShuffleVector(
        e->b, v, LLVMGetUndef(vt), LLVMConstVector(lanes, per), "");
    LLVMValueRef off = LLVMConstInt(emit_i64t(e), k, 0);
    LLVMValueRef q = LLVMBuildGEP2(e->b, et, p, &off, 1, "");
    LLVMValueRef st = LLVMBuildStore(e->b, piece, q);
    LLVMSetAlignment(st, elem_align(e, b));
  }
  return true;
}

/* The operand of val, a float32 vector sum, that is not the load of
 * b[idx] it adds to; NULL when val is not such an accumulation. */
static ts_expr *accumulated(ts_buffer *b, ts_expr *idx, ts_expr *val) {
  ts_dtype t = ts_expr_dtype(val);
  if (ts_expr_kind_of(val) != TS_EXPR_ADD || t.code != TS_DT_FLOAT ||
      t.bits != 32 || t.lanes < 2)
    return NULL;
  for (int k = 0; k < 2; k++) {
    ts_expr *acc = ts_expr_operand(val, k);
    if (ts_expr_kind_of(acc) == TS_EXPR_LOAD && ts_expr_buffer(acc) == b &&
        ts_expr_n_operands(acc) == 1 &&
        emit_same_expr(ts_expr_operand(acc, 0), idx))
      return ts_expr_operand(val, 1 - k);
  }
  return NULL;
}

/* A vector accumulation b[idx] = b[idx] + x: the lanes are the partial sums
 * the schedule made (a vectorized rfactor, a tile of a product), so the add
 * may be contracted into an FMA but not reassociated. With reassociation,
 * LLVM's reassociate pass flattens a fully unrolled loop of several such
 * accumulators and the adds that combine them into one chain of dependent
 * adds (a layer norm's four vectors of partial sums over 17 steps became
 * one chain of 68). */
static LLVMValueRef emit_accumulation(emitter *e, ts_buffer *b, ts_expr *idx,
                                      ts_expr *val) {
  ts_expr *x = accumulated(b, idx, val);
  if (!x) return emit_expr(e, val);
  ts_expr *acc = ts_expr_operand(val, ts_expr_operand(val, 0) == x ? 1 : 0);
  LLVMValueRef a = emit_expr(e, acc), y = emit_expr(e, x);
  if (e->status) return emit_undef(e, ts_expr_dtype(val));
  LLVMValueRef r = LLVMBuildFAdd(e->b, a, y, "");
  if (LLVMIsAInstruction(r) && LLVMCanValueUseFastMathFlags(r))
    LLVMSetFastMathFlags(r, LLVMFastMathAllowContract);
  return r;
}

void emit_store(emitter *e, ts_stmt *s) {
  ts_buffer *b = ts_store_buffer(s);
  if (ts_store_n_indices(s) != 1) {
    emit_fail(e, TS_EINTERNAL, "code generation: buffer '%s' is not flattened",
              ts_buffer_name(b));
    return;
  }
  ts_expr *idx = ts_store_index(s, 0);
  ts_expr *val = ts_store_value(s);
  ts_dtype t = ts_expr_dtype(val);
  LLVMValueRef v = reg_to_mem(e, t, emit_accumulation(e, b, idx, val));
  int lanes = ts_expr_dtype(idx).lanes;
  if (lanes > 1 && t.lanes == 1) v = emit_splat(e, v, lanes);
  if (lanes == 1) {
    LLVMValueRef st = LLVMBuildStore(e->b, v, idx_ptr(e, b, idx));
    LLVMSetAlignment(st, elem_align(e, b));
    return;
  }
  if (e->mask && LLVMGetVectorSize(LLVMTypeOf(e->mask)) == (unsigned)lanes &&
      whole_vector_ok(e, b, idx, lanes)) {
    /* the disabled lanes keep what the buffer holds */
    LLVMValueRef p = idx_ptr(e, b, ts_expr_operand(idx, 0));
    LLVMValueRef old = LLVMBuildLoad2(e->b, LLVMTypeOf(v), p, "");
    LLVMSetAlignment(old, elem_align(e, b));
    v = LLVMBuildSelect(e->b, e->mask, v, old, "");
    LLVMValueRef st = LLVMBuildStore(e->b, v, p);
    LLVMSetAlignment(st, elem_align(e, b));
    return;
  }
  if (e->mask && LLVMGetVectorSize(LLVMTypeOf(e->mask)) == (unsigned)lanes) {
    masked_store(e, b, idx, v, lanes);
    return;
  }
  if (is_unit_ramp(idx)) {
    LLVMValueRef p = idx_ptr(e, b, ts_expr_operand(idx, 0));
    /* (not a constant: an accumulator's init, which the tile's loads take
     * back at once; past the caches they read it from memory) */
    if (e->nontemporal && is_param(e, b) && !LLVMIsConstant(v)) {
      nontemporal_store(e, b, v, p);
      return;
    }
    if (write_only_param(e, b) && store_register_pieces(e, b, v, p)) return;
    LLVMValueRef st = LLVMBuildStore(e->b, v, p);
    LLVMSetAlignment(st, elem_align(e, b));
    return;
  }
  LLVMValueRef iv = emit_expr(e, idx);
  for (int l = 0; l < lanes; l++) {
    LLVMValueRef lane = LLVMConstInt(emit_i32t(e), (unsigned)l, 0);
    LLVMValueRef i = LLVMBuildExtractElement(e->b, iv, lane, "");
    LLVMValueRef x = LLVMBuildExtractElement(e->b, v, lane, "");
    LLVMValueRef st = LLVMBuildStore(e->b, x, elem_ptr(e, b, i));
    LLVMSetAlignment(st, elem_align(e, b));
  }
}

static LLVMValueRef emit_if_then_else(emitter *e, ts_expr *x) {
  ts_expr *c = ts_expr_operand(x, 0);
  ts_dtype t = ts_expr_dtype(x);
  if (ts_expr_dtype(c).lanes > 1 && ts_expr_kind_of(c) != TS_EXPR_BROADCAST) {
    /* Vector guards: both branches are evaluated (loads must be safe). */
    LLVMValueRef cv = emit_expr(e, c), a = emit_expr(e, ts_expr_operand(x, 1)),
                 b = emit_expr(e, ts_expr_operand(x, 2));
    return LLVMBuildSelect(e->b, cv, a, b, "");
  }
  /* A broadcast guard (what the vectorizer makes of a guard that does not
   * vary with the loop) is one condition: branch on it, so the guarded
   * loads (padding reads outside the input) never run. */
  LLVMValueRef cv =
      emit_expr(e, ts_expr_dtype(c).lanes > 1 ? ts_expr_operand(c, 0) : c);
  LLVMValueRef fn = e->cur->fn;
  LLVMBasicBlockRef tb = LLVMAppendBasicBlockInContext(e->ctx, fn, "ite.then");
  LLVMBasicBlockRef fb = LLVMAppendBasicBlockInContext(e->ctx, fn, "ite.else");
  LLVMBasicBlockRef mb = LLVMAppendBasicBlockInContext(e->ctx, fn, "ite.end");
  LLVMBuildCondBr(e->b, cv, tb, fb);
  LLVMPositionBuilderAtEnd(e->b, tb);
  LLVMValueRef tv = emit_expr(e, ts_expr_operand(x, 1));
  LLVMBasicBlockRef tend = LLVMGetInsertBlock(e->b);
  LLVMBuildBr(e->b, mb);
  LLVMPositionBuilderAtEnd(e->b, fb);
  LLVMValueRef fv = emit_expr(e, ts_expr_operand(x, 2));
  LLVMBasicBlockRef fend = LLVMGetInsertBlock(e->b);
  LLVMBuildBr(e->b, mb);
  LLVMPositionBuilderAtEnd(e->b, mb);
  LLVMValueRef phi = LLVMBuildPhi(e->b, emit_reg_type(e, t), "");
  LLVMValueRef vals[2] = {tv, fv};
  LLVMBasicBlockRef bbs[2] = {tend, fend};
  LLVMAddIncoming(phi, vals, bbs, 2);
  return phi;
}

/* The entry for `name` in a family's intrinsics, or NULL. */
static const emit_intrinsic *find_intrinsic(const emit_intrinsic *table,
                                            const char *name) {
  for (; table && table->name; table++)
    if (!strcmp(table->name, name)) return table;
  return NULL;
}

/* Target intrinsics: calls not in the IR's built-in table, implemented by
 * the target's family (emit_intrin_x86.c, emit_intrin_nvptx.c). */
static LLVMValueRef emit_target_intrinsic(emitter *e, ts_expr *x) {
  const char *name = ts_expr_call_name(x);
  ts_dtype t = ts_expr_dtype(x);
  int n = ts_expr_n_operands(x);
  const emit_intrinsic *in = find_intrinsic(e->hooks->intrinsics, name);
  if (!in) {
    /* another family's: say which */
    for (int i = 0; target_family_at(i); i++)
      if (find_intrinsic(target_family_at(i)->emit->intrinsics, name)) {
        emit_fail(e, TS_EINVAL,
                  "code generation: intrinsic '%s' needs a target of kind %s",
                  name, target_family_at(i)->facts.kind);
        return emit_undef(e, t);
      }
    emit_fail(e, TS_EUNSUPPORTED,
              "code generation: no implementation of intrinsic '%s' for "
              "target '%s'",
              name, ts_target_str(e->target));
    return emit_undef(e, t);
  }
  LLVMValueRef args[12];
  if (in->n_args >= 0) {
    if (n != in->n_args || n > 12) {
      emit_fail(e, TS_EINVAL, "code generation: %s takes %d arguments, got %d",
                name, in->n_args, n);
      return emit_undef(e, t);
    }
    for (int k = 0; k < n; k++) {
      ts_expr *arg = ts_expr_operand(x, k);
      args[k] = emit_expr(e, arg);
      if (!ts_dtype_is_handle(ts_expr_dtype(arg)) &&
          ts_dtype_is_int(ts_expr_dtype(arg)))
        args[k] = emit_cast(e, TS_INT64, ts_expr_dtype(arg), args[k]);
    }
    if (e->status) return emit_undef(e, t);
  }
  LLVMValueRef r = in->emit(e, x, args);
  return r ? r : LLVMConstInt(emit_reg_type(e, t), 0, 0);
}

static LLVMValueRef emit_call(emitter *e, ts_expr *x) {
  const char *name = ts_expr_call_name(x);
  ts_dtype t = ts_expr_dtype(x);
  int n = ts_expr_n_operands(x);
  if (!strcmp(name, "if_then_else")) return emit_if_then_else(e, x);
  const ts_intrinsic_info *info = ts_intrinsic_lookup(name);
  if (!info) return emit_target_intrinsic(e, x);
  if (n > 3 || (info->n_args >= 0 && n != info->n_args)) {
    emit_fail(e, TS_EINVAL, "code generation: '%s' takes %d arguments, got %d",
              name, info->n_args, n);
    return emit_undef(e, t);
  }
  LLVMValueRef args[3];
  for (int i = 0; i < n; i++) args[i] = emit_expr(e, ts_expr_operand(x, i));
  if (e->status) return emit_undef(e, t);
  return emit_math_call(e, name, t, args, n);
}

LLVMValueRef emit_expr(emitter *e, ts_expr *x) {
  ts_dtype t = ts_expr_dtype(x);
  if (e->status || emit_oom(e)) return emit_undef(e, t);
  switch (ts_expr_kind_of(x)) {
  case TS_EXPR_INT:
    return LLVMConstInt(emit_reg_type(e, t),
                        (unsigned long long)ts_expr_int_value(x),
                        ts_dtype_is_signed(t));
  case TS_EXPR_FLOAT:
    return LLVMConstReal(emit_reg_type(e, t), ts_expr_float_value(x));
  case TS_EXPR_VAR: {
    LLVMValueRef v = lookup(e, x, "variable", ts_var_name(x));
    return v ? v : emit_undef(e, t);
  }
  case TS_EXPR_NOT:
    return LLVMBuildNot(e->b, emit_expr(e, ts_expr_operand(x, 0)), "");
  case TS_EXPR_SELECT: {
    LLVMValueRef c = emit_expr(e, ts_expr_operand(x, 0));
    LLVMValueRef a = emit_expr(e, ts_expr_operand(x, 1)),
                 b = emit_expr(e, ts_expr_operand(x, 2));
    return LLVMBuildSelect(e->b, c, a, b, "");
  }
  case TS_EXPR_CAST: {
    ts_expr *v = ts_expr_operand(x, 0);
    return emit_cast(e, t, ts_expr_dtype(v), emit_expr(e, v));
  }
  case TS_EXPR_LOAD: return emit_load(e, x);
  case TS_EXPR_RAMP: {
    LLVMValueRef base =
        emit_splat(e, emit_expr(e, ts_expr_operand(x, 0)), t.lanes);
    LLVMValueRef stride =
        emit_splat(e, emit_expr(e, ts_expr_operand(x, 1)), t.lanes);
    LLVMTypeRef st = emit_scalar_type(e, ts_dtype_scalar(t));
    LLVMValueRef *steps =
        ts_arena_alloc(e->tmp, sizeof *steps * (size_t)t.lanes);
    if (!steps) {
      emit_fail(e, TS_ENOMEM, "code generation: out of memory");
      return NULL;
    }
    for (int i = 0; i < t.lanes; i++)
      steps[i] = LLVMConstInt(st, (unsigned)i, 0);
    LLVMValueRef iota = LLVMConstVector(steps, t.lanes);
    return LLVMBuildAdd(e->b, base, LLVMBuildMul(e->b, stride, iota, ""), "");
  }
  case TS_EXPR_BROADCAST:
    return emit_splat(e, emit_expr(e, ts_expr_operand(x, 0)), t.lanes);
  case TS_EXPR_CALL: return emit_call(e, x);
  case TS_EXPR_LET: {
    LLVMValueRef v = emit_expr(e, ts_expr_operand(x, 0));
    ts_node_map_put(e->cur->vals, ts_expr_let_var(x), v);
    return emit_expr(e, ts_expr_operand(x, 1));
  }
  case TS_EXPR_ADDRESS_OF: {
    ts_buffer *b = ts_expr_buffer(x);
    if (ts_expr_n_operands(x) != 1) {
      emit_fail(e, TS_EINTERNAL,
                "code generation: buffer '%s' is not flattened",
                ts_buffer_name(b));
      return emit_undef(e, t);
    }
    return idx_ptr(e, b, ts_expr_operand(x, 0));
  }
  default:
    if (ts_expr_is_binary(ts_expr_kind_of(x))) return emit_binary(e, x);
  }
  emit_fail(e, TS_EINTERNAL, "code generation: unknown expression kind %d",
            (int)ts_expr_kind_of(x));
  return emit_undef(e, t);
}
