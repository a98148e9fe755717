/*
 * emit.c — LLVM IR emission for a lowered function through the LLVM C API:
 * every expression and statement kind, serial loops as phi loops, parallel
 * loops outlined into a task function called through ts_rt_parallel_for,
 * local buffers on the stack (small) or from ts_rt_alloc (large), vector
 * code from ramp/broadcast expressions, and the kernel entry of the
 * runtime's ABI (runtime/runtime.h).
 */
#include "codegen/internal.h"

#include <llvm-c/DebugInfo.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Local buffers up to this size live on the stack; larger ones come from
 * ts_rt_alloc. */
#define STACK_ALLOC_LIMIT (64 * 1024)

int emit_fail(emitter *e, int code, const char *fmt, ...) {
  if (e->status) return e->status;
  e->status = code;
  if (e->err) {
    va_list ap;
    va_start(ap, fmt);
    ts_error_setv(e->err, code, __FILE__, __LINE__, fmt, ap);
    va_end(ap);
  }
  return code;
}

/* ---- types ---- */

static LLVMTypeRef scalar_type(emitter *e, ts_dtype t) {
  switch (t.code) {
  case TS_DT_INT:
  case TS_DT_UINT: return LLVMIntTypeInContext(e->ctx, t.bits);
  case TS_DT_BOOL: return LLVMInt1TypeInContext(e->ctx);
  case TS_DT_BFLOAT: return LLVMBFloatTypeInContext(e->ctx);
  case TS_DT_FLOAT:
    return t.bits == 16   ? LLVMHalfTypeInContext(e->ctx)
           : t.bits == 32 ? LLVMFloatTypeInContext(e->ctx)
                          : LLVMDoubleTypeInContext(e->ctx);
  default: return LLVMPointerTypeInContext(e->ctx, 0);
  }
}

/* The type of a value in registers. */
static LLVMTypeRef reg_type(emitter *e, ts_dtype t) {
  LLVMTypeRef s = scalar_type(e, t);
  return t.lanes > 1 ? LLVMVectorType(s, t.lanes) : s;
}

/* The type of one element in memory (bool is a byte). */
static LLVMTypeRef mem_type(emitter *e, ts_dtype t) {
  if (t.code == TS_DT_BOOL) return LLVMInt8TypeInContext(e->ctx);
  return scalar_type(e, t);
}

static LLVMTypeRef i64t(emitter *e) { return LLVMInt64TypeInContext(e->ctx); }
static LLVMTypeRef i32t(emitter *e) { return LLVMInt32TypeInContext(e->ctx); }
static LLVMTypeRef ptrt(emitter *e) {
  return LLVMPointerTypeInContext(e->ctx, 0);
}
static LLVMTypeRef f32t(emitter *e) { return LLVMFloatTypeInContext(e->ctx); }

static bool is_half(ts_dtype t) {
  return t.code == TS_DT_BFLOAT || (t.code == TS_DT_FLOAT && t.bits == 16);
}

static LLVMValueRef splat(emitter *e, LLVMValueRef v, int lanes) {
  if (lanes <= 1) return v;
  LLVMTypeRef vt = LLVMVectorType(LLVMTypeOf(v), lanes);
  LLVMValueRef ins = LLVMBuildInsertElement(e->b, LLVMGetUndef(vt), v,
                                            LLVMConstInt(i32t(e), 0, 0), "");
  LLVMValueRef mask = LLVMConstNull(LLVMVectorType(i32t(e), lanes));
  return LLVMBuildShuffleVector(e->b, ins, LLVMGetUndef(vt), mask, "");
}

static LLVMValueRef call_intrinsic(emitter *e, const char *name,
                                   LLVMTypeRef *overloads, int n_over,
                                   LLVMValueRef *args, int n) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  if (!id) {
    emit_fail(e, TS_EINTERNAL, "LLVM has no intrinsic '%s'", name);
    return LLVMGetUndef(LLVMTypeOf(args[0]));
  }
  LLVMValueRef fn = LLVMGetIntrinsicDeclaration(e->mod, id, overloads, n_over);
  LLVMTypeRef fty = LLVMIntrinsicGetType(e->ctx, id, overloads, n_over);
  return LLVMBuildCall2(e->b, fty, fn, args, (unsigned)n, "");
}

/* Declares (once) an external function of the process. */
static LLVMValueRef extern_fn(emitter *e, const char *name, LLVMTypeRef fty) {
  LLVMValueRef fn = LLVMGetNamedFunction(e->mod, name);
  if (!fn) fn = LLVMAddFunction(e->mod, name, fty);
  return fn;
}

static void add_fn_attr(emitter *e, LLVMValueRef fn, const char *k,
                        const char *v) {
  LLVMAttributeRef a = LLVMCreateStringAttribute(e->ctx, k, (unsigned)strlen(k),
                                                 v, (unsigned)strlen(v));
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, a);
}

static void add_enum_attr(emitter *e, LLVMValueRef fn, unsigned idx,
                          const char *name, uint64_t value) {
  unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
  LLVMAddAttributeAtIndex(fn, idx,
                          LLVMCreateEnumAttribute(e->ctx, kind, value));
}

static void set_fn_attrs(emitter *e, LLVMValueRef fn) {
  add_enum_attr(e, fn, LLVMAttributeFunctionIndex, "nounwind", 0);
  if (e->cuda) return;
  if (e->cpu && *e->cpu) add_fn_attr(e, fn, "target-cpu", e->cpu);
  if (e->features && *e->features)
    add_fn_attr(e, fn, "target-features", e->features);
  if (e->vector_bits >= 512) {
    add_fn_attr(e, fn, "prefer-vector-width", "512");
    add_fn_attr(e, fn, "min-legal-vector-width", "512");
  }
}

/* ---- status propagation ---- */

/* Branches to the function's failure exit when status != 0. */
static void check_status(emitter *e, LLVMValueRef status) {
  emit_fn *f = e->cur;
  if (!f->fail_bb) {
    LLVMBasicBlockRef here = LLVMGetInsertBlock(e->b);
    f->fail_bb = LLVMAppendBasicBlockInContext(e->ctx, f->fn, "fail");
    LLVMPositionBuilderAtEnd(e->b, f->fail_bb);
    f->fail_phi = LLVMBuildPhi(e->b, i32t(e), "status");
    LLVMBuildRet(e->b, f->fail_phi);
    LLVMPositionBuilderAtEnd(e->b, here);
  }
  LLVMValueRef bad = LLVMBuildICmp(e->b, LLVMIntNE, status,
                                   LLVMConstInt(LLVMTypeOf(status), 0, 0), "");
  LLVMBasicBlockRef ok = LLVMAppendBasicBlockInContext(e->ctx, f->fn, "ok");
  LLVMValueRef st32 = status;
  if (LLVMGetIntTypeWidth(LLVMTypeOf(status)) != 32)
    st32 = LLVMBuildTrunc(e->b, status, i32t(e), "");
  LLVMBasicBlockRef here = LLVMGetInsertBlock(e->b);
  LLVMAddIncoming(f->fail_phi, &st32, &here, 1);
  LLVMBuildCondBr(e->b, bad, f->fail_bb, ok);
  LLVMPositionBuilderAtEnd(e->b, ok);
}

/* An alloca in the function's entry block. */
static LLVMValueRef entry_alloca(emitter *e, LLVMTypeRef t, unsigned align) {
  LLVMBasicBlockRef here = LLVMGetInsertBlock(e->b);
  LLVMValueRef first = LLVMGetFirstInstruction(e->cur->alloca_bb);
  if (first)
    LLVMPositionBuilderBefore(e->b, first);
  else
    LLVMPositionBuilderAtEnd(e->b, e->cur->alloca_bb);
  LLVMValueRef a = LLVMBuildAlloca(e->b, t, "");
  LLVMSetAlignment(a, align);
  LLVMPositionBuilderAtEnd(e->b, here);
  return a;
}

/* ---- expressions ---- */

static LLVMValueRef ex(emitter *e, ts_expr *x);

static LLVMValueRef undef_of(emitter *e, ts_dtype t) {
  return LLVMGetUndef(reg_type(e, t));
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
static LLVMValueRef to_work(emitter *e, LLVMValueRef v, ts_dtype t) {
  if (!is_half(t)) return v;
  return emit_half_to_f32(e, v, t.code == TS_DT_BFLOAT);
}
static LLVMValueRef from_work(emitter *e, LLVMValueRef v, ts_dtype t) {
  if (!is_half(t)) return v;
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
static LLVMValueRef contract(LLVMValueRef v) {
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
  LLVMValueRef a = ex(e, xa), b = ex(e, xb);
  if (e->status) return undef_of(e, ts_expr_dtype(x));
  LLVMBuilderRef B = e->b;
  if (ts_dtype_is_float(t)) {
    a = to_work(e, a, t);
    b = to_work(e, b, t);
    LLVMValueRef r = NULL;
    LLVMTypeRef ty = LLVMTypeOf(a);
    switch (k) {
    case TS_EXPR_ADD: r = contract(LLVMBuildFAdd(B, a, b, "")); break;
    case TS_EXPR_SUB: r = contract(LLVMBuildFSub(B, a, b, "")); break;
    case TS_EXPR_MUL: r = contract(LLVMBuildFMul(B, a, b, "")); break;
    case TS_EXPR_DIV: r = reciprocal_ok(LLVMBuildFDiv(B, a, b, "")); break;
    case TS_EXPR_MOD: r = LLVMBuildFRem(B, a, b, ""); break;
    case TS_EXPR_FLOORDIV:
    case TS_EXPR_FLOORMOD: {
      LLVMValueRef q = LLVMBuildFDiv(B, a, b, "");
      LLVMValueRef fl = call_intrinsic(e, "llvm.floor", &ty, 1, &q, 1);
      r = k == TS_EXPR_FLOORDIV
              ? fl
              : LLVMBuildFSub(B, a, LLVMBuildFMul(B, fl, b, ""), "");
      break;
    }
    case TS_EXPR_MIN:
    case TS_EXPR_MAX: {
      LLVMValueRef args[2] = {a, b};
      r = call_intrinsic(e, k == TS_EXPR_MIN ? "llvm.minnum" : "llvm.maxnum",
                         &ty, 1, args, 2);
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
      return undef_of(e, ts_expr_dtype(x));
    }
    return from_work(e, r, t);
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
    return call_intrinsic(e, name, &ty, 1, args, 2);
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
  return undef_of(e, ts_expr_dtype(x));
}

static LLVMValueRef emit_cast(emitter *e, ts_dtype to, ts_dtype from,
                              LLVMValueRef v) {
  if (ts_dtype_eq(to, from)) return v;
  LLVMBuilderRef B = e->b;
  LLVMTypeRef T = reg_type(e, to);
  int lanes = to.lanes;
  LLVMTypeRef F32 = lanes > 1 ? LLVMVectorType(f32t(e), lanes) : f32t(e);
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
      return is_half(to) ? from_work(e, f, to)
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
    if (is_half(to)) {
      LLVMValueRef f = ts_dtype_is_signed(from)
                           ? LLVMBuildSIToFP(B, v, F32, "")
                           : LLVMBuildUIToFP(B, v, F32, "");
      return from_work(e, f, to);
    }
    return ts_dtype_is_signed(from) ? LLVMBuildSIToFP(B, v, T, "")
                                    : LLVMBuildUIToFP(B, v, T, "");
  }
  if (ts_dtype_is_float(from) && ts_dtype_is_int(to)) {
    v = to_work(e, v, from);
    LLVMTypeRef over[2] = {T, LLVMTypeOf(v)};
    return call_intrinsic(
        e, ts_dtype_is_signed(to) ? "llvm.fptosi.sat" : "llvm.fptoui.sat", over,
        2, &v, 1);
  }
  /* float -> float; the 16-bit formats through float32, as the interpreter
   * converts (a float64 rounds to float32 first) */
  if (is_half(from) || is_half(to)) {
    if (is_half(from)) v = to_work(e, v, from);
    if (from.bits == 64) v = LLVMBuildFPTrunc(B, v, F32, "");
    if (is_half(to)) return from_work(e, v, to);
    return to.bits == 64 ? LLVMBuildFPExt(B, v, T, "") : v;
  }
  if (to.bits > from.bits) return LLVMBuildFPExt(B, v, T, "");
  return LLVMBuildFPTrunc(B, v, T, "");
}

static LLVMValueRef buffer_data(emitter *e, ts_buffer *b) {
  return lookup(e, b, "buffer", ts_buffer_name(b));
}

/* Element pointer of buffer[index] (scalar index). */
static LLVMValueRef elem_ptr(emitter *e, ts_buffer *b, LLVMValueRef index) {
  LLVMValueRef base = buffer_data(e, b);
  if (!base) return LLVMGetUndef(ptrt(e));
  return LLVMBuildInBoundsGEP2(e->b, mem_type(e, ts_buffer_dtype(b)), base,
                               &index, 1, "");
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
  LLVMValueRef base = buffer_data(e, b);
  LLVMValueRef iv = ex(e, idx);
  if (!base)
    return LLVMGetUndef(
        LLVMVectorType(ptrt(e), LLVMGetVectorSize(LLVMTypeOf(iv))));
  return LLVMBuildInBoundsGEP2(e->b, mem_type(e, ts_buffer_dtype(b)), base, &iv,
                               1, "");
}

static LLVMValueRef masked_load(emitter *e, ts_buffer *b, ts_expr *idx,
                                int lanes) {
  LLVMTypeRef vt = LLVMVectorType(mem_type(e, ts_buffer_dtype(b)), lanes);
  LLVMValueRef align = LLVMConstInt(i32t(e), elem_align(e, b), 0);
  LLVMValueRef pass = LLVMConstNull(vt);
  if (is_unit_ramp(idx)) {
    LLVMValueRef p = elem_ptr(e, b, ex(e, ts_expr_operand(idx, 0)));
    LLVMTypeRef over[2] = {vt, LLVMTypeOf(p)};
    LLVMValueRef args[4] = {p, align, e->mask, pass};
    return call_intrinsic(e, "llvm.masked.load", over, 2, args, 4);
  }
  LLVMValueRef ptrs = lane_ptrs(e, b, idx);
  LLVMTypeRef over[2] = {vt, LLVMTypeOf(ptrs)};
  LLVMValueRef args[4] = {ptrs, align, e->mask, pass};
  return call_intrinsic(e, "llvm.masked.gather", over, 2, args, 4);
}

static void masked_store(emitter *e, ts_buffer *b, ts_expr *idx, LLVMValueRef v,
                         int lanes) {
  (void)lanes;
  LLVMValueRef align = LLVMConstInt(i32t(e), elem_align(e, b), 0);
  if (is_unit_ramp(idx)) {
    LLVMValueRef p = elem_ptr(e, b, ex(e, ts_expr_operand(idx, 0)));
    LLVMTypeRef over[2] = {LLVMTypeOf(v), LLVMTypeOf(p)};
    LLVMValueRef args[4] = {v, p, align, e->mask};
    call_intrinsic(e, "llvm.masked.store", over, 2, args, 4);
    return;
  }
  LLVMValueRef ptrs = lane_ptrs(e, b, idx);
  LLVMTypeRef over[2] = {LLVMTypeOf(v), LLVMTypeOf(ptrs)};
  LLVMValueRef args[4] = {v, ptrs, align, e->mask};
  call_intrinsic(e, "llvm.masked.scatter", over, 2, args, 4);
}

static LLVMValueRef emit_load(emitter *e, ts_expr *x) {
  ts_buffer *b = ts_expr_buffer(x);
  ts_dtype t = ts_expr_dtype(x);
  if (ts_expr_n_operands(x) != 1) {
    emit_fail(e, TS_EINTERNAL, "code generation: buffer '%s' is not flattened",
              ts_buffer_name(b));
    return undef_of(e, t);
  }
  ts_expr *idx = ts_expr_operand(x, 0);
  LLVMTypeRef mt = mem_type(e, ts_buffer_dtype(b));
  if (t.lanes == 1) {
    LLVMValueRef p = elem_ptr(e, b, ex(e, idx));
    LLVMValueRef v = LLVMBuildLoad2(e->b, mt, p, "");
    LLVMSetAlignment(v, elem_align(e, b));
    return load_to_reg(e, t, v);
  }
  if (e->mask && LLVMGetVectorSize(LLVMTypeOf(e->mask)) == (unsigned)t.lanes)
    return load_to_reg(e, t, masked_load(e, b, idx, t.lanes));
  if (is_unit_ramp(idx)) {
    LLVMValueRef p = elem_ptr(e, b, ex(e, ts_expr_operand(idx, 0)));
    LLVMValueRef v = LLVMBuildLoad2(e->b, LLVMVectorType(mt, t.lanes), p, "");
    LLVMSetAlignment(v, elem_align(e, b));
    return load_to_reg(e, t, v);
  }
  /* A gather: one scalar load per lane. */
  LLVMValueRef iv = ex(e, idx);
  LLVMValueRef r = LLVMGetUndef(LLVMVectorType(mt, t.lanes));
  for (int l = 0; l < t.lanes; l++) {
    LLVMValueRef lane = LLVMConstInt(i32t(e), (unsigned)l, 0);
    LLVMValueRef i = LLVMBuildExtractElement(e->b, iv, lane, "");
    LLVMValueRef v = LLVMBuildLoad2(e->b, mt, elem_ptr(e, b, i), "");
    LLVMSetAlignment(v, elem_align(e, b));
    r = LLVMBuildInsertElement(e->b, r, v, lane, "");
  }
  return load_to_reg(e, t, r);
}

static void emit_store(emitter *e, ts_stmt *s) {
  ts_buffer *b = ts_store_buffer(s);
  if (ts_store_n_indices(s) != 1) {
    emit_fail(e, TS_EINTERNAL, "code generation: buffer '%s' is not flattened",
              ts_buffer_name(b));
    return;
  }
  ts_expr *idx = ts_store_index(s, 0);
  ts_expr *val = ts_store_value(s);
  ts_dtype t = ts_expr_dtype(val);
  LLVMValueRef v = reg_to_mem(e, t, ex(e, val));
  int lanes = ts_expr_dtype(idx).lanes;
  if (lanes > 1 && t.lanes == 1) v = splat(e, v, lanes);
  if (lanes == 1) {
    LLVMValueRef st = LLVMBuildStore(e->b, v, elem_ptr(e, b, ex(e, idx)));
    LLVMSetAlignment(st, elem_align(e, b));
    return;
  }
  if (e->mask && LLVMGetVectorSize(LLVMTypeOf(e->mask)) == (unsigned)lanes) {
    masked_store(e, b, idx, v, lanes);
    return;
  }
  if (is_unit_ramp(idx)) {
    LLVMValueRef p = elem_ptr(e, b, ex(e, ts_expr_operand(idx, 0)));
    LLVMValueRef st = LLVMBuildStore(e->b, v, p);
    LLVMSetAlignment(st, elem_align(e, b));
    return;
  }
  LLVMValueRef iv = ex(e, idx);
  for (int l = 0; l < lanes; l++) {
    LLVMValueRef lane = LLVMConstInt(i32t(e), (unsigned)l, 0);
    LLVMValueRef i = LLVMBuildExtractElement(e->b, iv, lane, "");
    LLVMValueRef x = LLVMBuildExtractElement(e->b, v, lane, "");
    LLVMValueRef st = LLVMBuildStore(e->b, x, elem_ptr(e, b, i));
    LLVMSetAlignment(st, elem_align(e, b));
  }
}

/* Calls a libm function lane by lane (tanh, erf). */
static LLVMValueRef libm_per_lane(emitter *e, const char *f32name,
                                  const char *f64name, LLVMValueRef v,
                                  ts_dtype t) {
  bool dbl = t.code == TS_DT_FLOAT && t.bits == 64;
  LLVMTypeRef st = dbl ? LLVMDoubleTypeInContext(e->ctx) : f32t(e);
  LLVMTypeRef fty = LLVMFunctionType(st, &st, 1, 0);
  LLVMValueRef fn = extern_fn(e, dbl ? f64name : f32name, fty);
  if (t.lanes == 1) return LLVMBuildCall2(e->b, fty, fn, &v, 1, "");
  LLVMValueRef r = LLVMGetUndef(LLVMTypeOf(v));
  for (int l = 0; l < t.lanes; l++) {
    LLVMValueRef lane = LLVMConstInt(i32t(e), (unsigned)l, 0);
    LLVMValueRef x = LLVMBuildExtractElement(e->b, v, lane, "");
    LLVMValueRef y = LLVMBuildCall2(e->b, fty, fn, &x, 1, "");
    r = LLVMBuildInsertElement(e->b, r, y, lane, "");
  }
  return r;
}

static LLVMValueRef const_fp(LLVMTypeRef t, double v) {
  if (LLVMGetTypeKind(t) == LLVMVectorTypeKind) {
    unsigned n = LLVMGetVectorSize(t);
    LLVMValueRef s = LLVMConstReal(LLVMGetElementType(t), v);
    LLVMValueRef *elems = malloc(sizeof *elems * n);
    for (unsigned i = 0; i < n; i++) elems[i] = s;
    LLVMValueRef r = LLVMConstVector(elems, n);
    free(elems);
    return r;
  }
  return LLVMConstReal(t, v);
}

static LLVMValueRef emit_if_then_else(emitter *e, ts_expr *x) {
  ts_expr *c = ts_expr_operand(x, 0);
  ts_dtype t = ts_expr_dtype(x);
  if (ts_expr_dtype(c).lanes > 1 && ts_expr_kind_of(c) != TS_EXPR_BROADCAST) {
    /* Vector guards: both branches are evaluated (loads must be safe). */
    LLVMValueRef cv = ex(e, c), a = ex(e, ts_expr_operand(x, 1)),
                 b = ex(e, ts_expr_operand(x, 2));
    return LLVMBuildSelect(e->b, cv, a, b, "");
  }
  /* A broadcast guard (what the vectorizer makes of a guard that does not
   * vary with the loop) is one condition: branch on it, so the guarded
   * loads (padding reads outside the input) never run. */
  LLVMValueRef cv =
      ex(e, ts_expr_dtype(c).lanes > 1 ? ts_expr_operand(c, 0) : c);
  LLVMValueRef fn = e->cur->fn;
  LLVMBasicBlockRef tb = LLVMAppendBasicBlockInContext(e->ctx, fn, "ite.then");
  LLVMBasicBlockRef fb = LLVMAppendBasicBlockInContext(e->ctx, fn, "ite.else");
  LLVMBasicBlockRef mb = LLVMAppendBasicBlockInContext(e->ctx, fn, "ite.end");
  LLVMBuildCondBr(e->b, cv, tb, fb);
  LLVMPositionBuilderAtEnd(e->b, tb);
  LLVMValueRef tv = ex(e, ts_expr_operand(x, 1));
  LLVMBasicBlockRef tend = LLVMGetInsertBlock(e->b);
  LLVMBuildBr(e->b, mb);
  LLVMPositionBuilderAtEnd(e->b, fb);
  LLVMValueRef fv = ex(e, ts_expr_operand(x, 2));
  LLVMBasicBlockRef fend = LLVMGetInsertBlock(e->b);
  LLVMBuildBr(e->b, mb);
  LLVMPositionBuilderAtEnd(e->b, mb);
  LLVMValueRef phi = LLVMBuildPhi(e->b, reg_type(e, t), "");
  LLVMValueRef vals[2] = {tv, fv};
  LLVMBasicBlockRef bbs[2] = {tend, fend};
  LLVMAddIncoming(phi, vals, bbs, 2);
  return phi;
}

/* The NVVM approximate exp2/log2 ("ex2"/"lg2") of a float or double value,
 * lane by lane for vectors. */
static LLVMValueRef nvvm_approx(emitter *e, const char *op, LLVMValueRef x) {
  LLVMTypeRef ty = LLVMTypeOf(x);
  bool vec = LLVMGetTypeKind(ty) == LLVMVectorTypeKind;
  LLVMTypeRef st = vec ? LLVMGetElementType(ty) : ty;
  bool dbl = LLVMGetTypeKind(st) == LLVMDoubleTypeKind;
  char name[64];
  snprintf(name, sizeof name, "llvm.nvvm.%s.approx.%s", op, dbl ? "d" : "f");
  if (!vec) return call_intrinsic(e, name, NULL, 0, &x, 1);
  LLVMValueRef r = LLVMGetUndef(ty);
  for (unsigned l = 0; l < LLVMGetVectorSize(ty); l++) {
    LLVMValueRef lane = LLVMConstInt(i32t(e), l, 0);
    LLVMValueRef v = LLVMBuildExtractElement(e->b, x, lane, "");
    r = LLVMBuildInsertElement(e->b, r, call_intrinsic(e, name, NULL, 0, &v, 1),
                               lane, "");
  }
  return r;
}

/* NVPTX has no libm: exp, log, log10 and pow go through the hardware's
 * exp2/log2 (ex2.approx / lg2.approx). */
static LLVMValueRef cuda_math(emitter *e, const char *name, LLVMTypeRef ty,
                              LLVMValueRef *args) {
  LLVMBuilderRef B = e->b;
  if (!strcmp(name, "exp") || !strcmp(name, "sigmoid") ||
      !strcmp(name, "tanh") || !strcmp(name, "erf"))
    return NULL; /* exp handled below through cuda_exp */
  if (!strcmp(name, "exp2")) return nvvm_approx(e, "ex2", args[0]);
  if (!strcmp(name, "log2")) return nvvm_approx(e, "lg2", args[0]);
  if (!strcmp(name, "log") || !strcmp(name, "log10")) {
    LLVMValueRef l2 = nvvm_approx(e, "lg2", args[0]);
    double k = !strcmp(name, "log") ? 0.6931471805599453 : 0.30102999566398120;
    return LLVMBuildFMul(B, l2, const_fp(ty, k), "");
  }
  if (!strcmp(name, "pow")) {
    LLVMValueRef l2 = nvvm_approx(e, "lg2", args[0]);
    return nvvm_approx(e, "ex2", LLVMBuildFMul(B, args[1], l2, ""));
  }
  return NULL;
}

/* exp of a float32 scalar or vector without libm (which LLVM would call
 * lane by lane, and which keeps a loop around a scalar exp from being
 * vectorized): x = n ln2 + r with n = round(x log2 e), exp(r) by Cephes'
 * degree-6 polynomial, 2^n built in the exponent bits. About 1 ulp; NaN
 * stays NaN, large arguments give inf and 0. */
static LLVMValueRef exp_f32(emitter *e, LLVMTypeRef ty, LLVMValueRef x) {
  LLVMBuilderRef B = e->b;
  bool vec = LLVMGetTypeKind(ty) == LLVMVectorTypeKind;
  unsigned lanes = vec ? LLVMGetVectorSize(ty) : 1;
  LLVMTypeRef ity = vec ? LLVMVectorType(i32t(e), lanes) : i32t(e);
  LLVMValueRef a2[2] = {x, const_fp(ty, 88.72283935546875)};
  LLVMValueRef xc = call_intrinsic(e, "llvm.minnum", &ty, 1, a2, 2);
  a2[0] = xc;
  a2[1] = const_fp(ty, -87.33654022216797);
  xc = call_intrinsic(e, "llvm.maxnum", &ty, 1, a2, 2);
  LLVMValueRef t = LLVMBuildFAdd(
      B, LLVMBuildFMul(B, xc, const_fp(ty, 1.4426950408889634), ""),
      const_fp(ty, 0.5), "");
  LLVMValueRef n = call_intrinsic(e, "llvm.floor", &ty, 1, &t, 1);
  LLVMValueRef r = LLVMBuildFSub(
      B, xc, LLVMBuildFMul(B, n, const_fp(ty, 0.693359375), ""), "");
  r = LLVMBuildFSub(B, r, LLVMBuildFMul(B, n, const_fp(ty, -2.12194440e-4), ""),
                    "");
  static const double c[6] = {1.9875691500e-4, 1.3981999507e-3,
                              8.3334519073e-3, 4.1665795894e-2,
                              1.6666665459e-1, 5.0000001201e-1};
  LLVMValueRef p = const_fp(ty, c[0]);
  for (int i = 1; i < 6; i++)
    p = contract(LLVMBuildFAdd(B, contract(LLVMBuildFMul(B, p, r, "")),
                               const_fp(ty, c[i]), ""));
  LLVMValueRef z = LLVMBuildFMul(B, r, r, "");
  LLVMValueRef y =
      LLVMBuildFAdd(B, LLVMBuildFAdd(B, LLVMBuildFMul(B, p, z, ""), r, ""),
                    const_fp(ty, 1.0), "");
  /* 2^n as 2^(n>>1) * 2^(n - (n>>1)): each factor stays a normal float for
   * n in [-126, 128] */
  LLVMValueRef ni = LLVMBuildFPToSI(B, n, ity, "");
  LLVMValueRef bias = splat(e, LLVMConstInt(i32t(e), 127, 0), (int)lanes);
  LLVMValueRef sh = splat(e, LLVMConstInt(i32t(e), 23, 0), (int)lanes);
  LLVMValueRef n1 = LLVMBuildAShr(
      B, ni, splat(e, LLVMConstInt(i32t(e), 1, 0), (int)lanes), "");
  LLVMValueRef n2 = LLVMBuildSub(B, ni, n1, "");
  LLVMValueRef p1 = LLVMBuildBitCast(
      B, LLVMBuildShl(B, LLVMBuildAdd(B, n1, bias, ""), sh, ""), ty, "");
  LLVMValueRef p2 = LLVMBuildBitCast(
      B, LLVMBuildShl(B, LLVMBuildAdd(B, n2, bias, ""), sh, ""), ty, "");
  LLVMValueRef res = LLVMBuildFMul(B, LLVMBuildFMul(B, y, p1, ""), p2, "");
  LLVMValueRef isnan = LLVMBuildFCmp(B, LLVMRealUNO, x, x, "");
  return LLVMBuildSelect(B, isnan, x, res, "");
}

/* exp(x) for the current target: on CPUs a vectorizable polynomial for
 * float32 (scalars too, so the loop vectorizer can widen a loop around
 * it), llvm.exp otherwise; exp2(x log2 e) on GPUs. */
static LLVMValueRef target_exp(emitter *e, LLVMTypeRef ty, LLVMValueRef x) {
  LLVMTypeRef el =
      LLVMGetTypeKind(ty) == LLVMVectorTypeKind ? LLVMGetElementType(ty) : ty;
  if (!e->cuda && LLVMGetTypeKind(el) == LLVMFloatTypeKind)
    return exp_f32(e, ty, x);
  if (!e->cuda) return call_intrinsic(e, "llvm.exp", &ty, 1, &x, 1);
  LLVMValueRef p = LLVMBuildFMul(e->b, x, const_fp(ty, 1.4426950408889634), "");
  return nvvm_approx(e, "ex2", p);
}

/* GPU code has no libm: tanh(x) = 1 - 2 / (exp(2x) + 1). */
static LLVMValueRef tanh_by_exp(emitter *e, LLVMValueRef x) {
  LLVMTypeRef ty = LLVMTypeOf(x);
  LLVMValueRef x2 = LLVMBuildFMul(e->b, x, const_fp(ty, 2.0), "");
  LLVMValueRef ex2 = target_exp(e, ty, x2);
  LLVMValueRef den = LLVMBuildFAdd(e->b, ex2, const_fp(ty, 1.0), "");
  return LLVMBuildFSub(e->b, const_fp(ty, 1.0),
                       LLVMBuildFDiv(e->b, const_fp(ty, 2.0), den, ""), "");
}

/* erf by Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7):
 * erf(x) = sign(x) (1 - (a1 t + a2 t^2 + ... + a5 t^5) exp(-x^2)),
 * t = 1 / (1 + p |x|). */
static LLVMValueRef erf_by_polynomial(emitter *e, LLVMValueRef x) {
  LLVMTypeRef ty = LLVMTypeOf(x);
  static const double a[5] = {0.254829592, -0.284496736, 1.421413741,
                              -1.453152027, 1.061405429};
  LLVMValueRef ax = call_intrinsic(e, "llvm.fabs", &ty, 1, &x, 1);
  LLVMValueRef t = LLVMBuildFDiv(
      e->b, const_fp(ty, 1.0),
      LLVMBuildFAdd(e->b, const_fp(ty, 1.0),
                    LLVMBuildFMul(e->b, const_fp(ty, 0.3275911), ax, ""), ""),
      "");
  LLVMValueRef poly = const_fp(ty, a[4]);
  for (int i = 3; i >= 0; i--)
    poly = LLVMBuildFAdd(e->b, LLVMBuildFMul(e->b, poly, t, ""),
                         const_fp(ty, a[i]), "");
  poly = LLVMBuildFMul(e->b, poly, t, "");
  LLVMValueRef nx2 = LLVMBuildFNeg(e->b, LLVMBuildFMul(e->b, x, x, ""), "");
  LLVMValueRef ex = target_exp(e, ty, nx2);
  LLVMValueRef y = LLVMBuildFSub(e->b, const_fp(ty, 1.0),
                                 LLVMBuildFMul(e->b, poly, ex, ""), "");
  LLVMValueRef args[2] = {y, x};
  return call_intrinsic(e, "llvm.copysign", &ty, 1, args, 2);
}

/* ---- tensor intrinsics (the implementations tensorize calls) ---- */

/* Calls a non-overloaded intrinsic, bitcasting each argument to the
 * parameter type it declares (e.g. <16 x i32> to <32 x bfloat>). */
static LLVMValueRef call_fixed(emitter *e, const char *name, LLVMValueRef *args,
                               int n) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  if (!id) {
    emit_fail(e, TS_EINTERNAL, "LLVM has no intrinsic '%s'", name);
    return NULL;
  }
  LLVMTypeRef fty = LLVMIntrinsicGetType(e->ctx, id, NULL, 0);
  LLVMTypeRef params[16];
  LLVMGetParamTypes(fty, params);
  for (int i = 0; i < n; i++)
    if (LLVMTypeOf(args[i]) != params[i])
      args[i] = LLVMBuildBitCast(e->b, args[i], params[i], "");
  LLVMValueRef fn = LLVMGetIntrinsicDeclaration(e->mod, id, NULL, 0);
  return LLVMBuildCall2(e->b, fty, fn, args, (unsigned)n, "");
}

static bool need_feature(emitter *e, const char *intrin, const char *feature) {
  if (!e->cuda && ts_target_has_feature(e->target, feature)) return true;
  emit_fail(e, TS_EUNSUPPORTED,
            "code generation: %s needs the CPU feature '%s', which target '%s' "
            "does not have",
            intrin, feature, ts_target_str(e->target));
  return false;
}

static LLVMValueRef load_vec(emitter *e, LLVMTypeRef t, LLVMValueRef p,
                             unsigned align) {
  LLVMValueRef v = LLVMBuildLoad2(e->b, t, p, "");
  LLVMSetAlignment(v, align);
  return v;
}

/* tessera.vnni_dot_16x4(&C int32[16], &A uint8[4], &B int8[16][4]):
 * C[j] += sum_k A[k] * B[j][k] (vpdpbusd). */
static void emit_vnni_dot(emitter *e, LLVMValueRef *a) {
  if (!need_feature(e, "tessera.vnni_dot_16x4", "avx512vnni")) return;
  LLVMTypeRef v16 = LLVMVectorType(i32t(e), 16);
  LLVMValueRef c = load_vec(e, v16, a[0], 4);
  LLVMValueRef av = splat(e, load_vec(e, i32t(e), a[1], 1), 16);
  LLVMValueRef bv = load_vec(e, v16, a[2], 1);
  LLVMValueRef args[3] = {c, av, bv};
  LLVMValueRef r = call_fixed(e, "llvm.x86.avx512.vpdpbusd.512", args, 3);
  if (r) LLVMSetAlignment(LLVMBuildStore(e->b, r, a[0]), 4);
}

/* tessera.vnni_s8_dot_16x4(&C int32[16], &A int8[4], &B int8[16][4]) and
 * tessera.vnni_s8_dot_16x16(&C int32[16], &A int8[16], &B int8[4][16][4]):
 * C[j] += sum_k A[k] * B[j][k] with both operands signed, in `steps` steps
 * of 4 (B's step s at byte 64 s). vpdpbusd takes an unsigned left operand,
 * so A is biased to A + 128 (its sign bit flipped) and the bias times the
 * sums of B, 128 * sum_k B[j][k] (vpdpbusd of 0x80 bytes with B), is
 * subtracted: exact in int32. The sums of B accumulate over the steps and
 * are subtracted once, and they depend on B alone, so LLVM computes them
 * once for every row of a register tile that shares the B vectors. */
static void emit_vnni_s8_dot(emitter *e, LLVMValueRef *a, int steps) {
  const char *name =
      steps == 1 ? "tessera.vnni_s8_dot_16x4" : "tessera.vnni_s8_dot_16x16";
  if (!need_feature(e, name, "avx512vnni")) return;
  LLVMTypeRef v16 = LLVMVectorType(i32t(e), 16);
  LLVMTypeRef i8 = LLVMInt8TypeInContext(e->ctx);
  LLVMValueRef bias32 = LLVMConstInt(i32t(e), 0x80808080u, 0);
  LLVMValueRef bias = splat(e, bias32, 16);
  LLVMValueRef c = load_vec(e, v16, a[0], 4);
  LLVMValueRef sums = LLVMConstNull(v16);
  for (int s = 0; s < steps && c && sums; s++) {
    LLVMValueRef aoff = LLVMConstInt(i64t(e), (unsigned long long)(4 * s), 0);
    LLVMValueRef boff = LLVMConstInt(i64t(e), (unsigned long long)(64 * s), 0);
    LLVMValueRef ap = LLVMBuildInBoundsGEP2(e->b, i8, a[1], &aoff, 1, "");
    LLVMValueRef bp = LLVMBuildInBoundsGEP2(e->b, i8, a[2], &boff, 1, "");
    LLVMValueRef av = splat(
        e, LLVMBuildXor(e->b, load_vec(e, i32t(e), ap, 1), bias32, ""), 16);
    LLVMValueRef bv = load_vec(e, v16, bp, 1);
    LLVMValueRef dot[3] = {c, av, bv};
    c = call_fixed(e, "llvm.x86.avx512.vpdpbusd.512", dot, 3);
    LLVMValueRef sum[3] = {sums, bias, bv};
    sums = call_fixed(e, "llvm.x86.avx512.vpdpbusd.512", sum, 3);
  }
  if (c && sums)
    LLVMSetAlignment(
        LLVMBuildStore(e->b, LLVMBuildSub(e->b, c, sums, ""), a[0]), 4);
}

/* tessera.avx512bf16_dot_16x2(&C float32[16], &A bfloat16[2],
 * &B bfloat16[16][2]): C[j] += A[0] B[j][0] + A[1] B[j][1] (vdpbf16ps). */
static void emit_bf16_dot(emitter *e, LLVMValueRef *a) {
  if (!need_feature(e, "tessera.avx512bf16_dot_16x2", "avx512bf16")) return;
  LLVMTypeRef v16f = LLVMVectorType(f32t(e), 16);
  LLVMTypeRef v16i = LLVMVectorType(i32t(e), 16);
  LLVMValueRef c = load_vec(e, v16f, a[0], 4);
  LLVMValueRef av = splat(e, load_vec(e, i32t(e), a[1], 2), 16);
  LLVMValueRef bv = load_vec(e, v16i, a[2], 2);
  LLVMValueRef args[3] = {c, av, bv};
  LLVMValueRef r = call_fixed(e, "llvm.x86.avx512bf16.dpbf16ps.512", args, 3);
  if (r) LLVMSetAlignment(LLVMBuildStore(e->b, r, a[0]), 4);
}

static LLVMValueRef i16c(emitter *e, unsigned v) {
  return LLVMConstInt(LLVMInt16TypeInContext(e->ctx), v, 0);
}

/* tessera.amx_{bf16,int8}_gemm(&C, ldc, &A, lda, &Bp, ldb, K): a 16x16
 * output tile, C += A[16 x K] * B[K x 16] with B VNNI-packed; tiles loaded
 * with tileloadd, multiplied with tdpbf16ps / tdpbssd / tdpbusd, stored
 * with tilestored (the backend configures the tiles). A constant K is
 * unrolled; otherwise a loop keeps C in memory between steps. */
static void emit_amx_gemm(emitter *e, ts_expr *x, LLVMValueRef *a, bool int8) {
  const char *name = ts_expr_call_name(x);
  if (!need_feature(e, name, "amx-tile")) return;
  if (!need_feature(e, name, int8 ? "amx-int8" : "amx-bf16")) return;
  ts_buffer *abuf = ts_expr_kind_of(ts_expr_operand(x, 2)) == TS_EXPR_ADDRESS_OF
                        ? ts_expr_buffer(ts_expr_operand(x, 2))
                        : NULL;
  bool a_unsigned = abuf && ts_buffer_dtype(abuf).code == TS_DT_UINT;
  const char *dp = !int8        ? "llvm.x86.tdpbf16ps.internal"
                   : a_unsigned ? "llvm.x86.tdpbusd.internal"
                                : "llvm.x86.tdpbssd.internal";
  unsigned ebytes = int8 ? 1 : 2; /* bytes per A/B element */
  int64_t kstep = int8 ? 64 : 32; /* K per tile step */
  LLVMValueRef ldc_b =
      LLVMBuildMul(e->b, a[1], LLVMConstInt(i64t(e), 4, 0), "");
  LLVMValueRef lda_b =
      LLVMBuildMul(e->b, a[3], LLVMConstInt(i64t(e), ebytes, 0), "");
  LLVMValueRef ldb_b =
      LLVMBuildMul(e->b, a[5], LLVMConstInt(i64t(e), ebytes, 0), "");
  int64_t kconst;
  bool unroll = ts_expr_is_const_int(ts_expr_operand(x, 6), &kconst) &&
                kconst >= 0 && kconst / kstep <= 64;
  LLVMTypeRef i8t = LLVMInt8TypeInContext(e->ctx);
  LLVMValueRef c_args[4] = {i16c(e, 16), i16c(e, 64), a[0], ldc_b};
  /* One step: tile A at column offset kk*kstep, tile B at row
   * kk*(kstep/(4/ebytes)). */
  if (unroll) {
    LLVMValueRef c = call_fixed(e, "llvm.x86.tileloadd64.internal", c_args, 4);
    for (int64_t kk = 0; kk < kconst / kstep && c; kk++) {
      LLVMValueRef aoff =
          LLVMConstInt(i64t(e), (unsigned long long)(kk * kstep * ebytes), 0);
      LLVMValueRef ap = LLVMBuildInBoundsGEP2(e->b, i8t, a[2], &aoff, 1, "");
      LLVMValueRef brow =
          LLVMConstInt(i64t(e), (unsigned long long)(kk * 16), 0);
      LLVMValueRef bp = LLVMBuildInBoundsGEP2(
          e->b, i8t, a[4],
          (LLVMValueRef[]){LLVMBuildMul(e->b, brow, ldb_b, "")}, 1, "");
      LLVMValueRef la[4] = {i16c(e, 16), i16c(e, 64), ap, lda_b};
      LLVMValueRef at = call_fixed(e, "llvm.x86.tileloadd64.internal", la, 4);
      LLVMValueRef lb[4] = {i16c(e, 16), i16c(e, 64), bp, ldb_b};
      LLVMValueRef bt = call_fixed(e, "llvm.x86.tileloadd64.internal", lb, 4);
      LLVMValueRef d[6] = {i16c(e, 16), i16c(e, 64), i16c(e, 64), c, at, bt};
      c = call_fixed(e, dp, d, 6);
    }
    if (c) {
      LLVMValueRef s[5] = {i16c(e, 16), i16c(e, 64), a[0], ldc_b, c};
      call_fixed(e, "llvm.x86.tilestored64.internal", s, 5);
    }
    return;
  }
  emit_fail(e, TS_EUNSUPPORTED,
            "code generation: %s needs a constant K that is a multiple of %lld "
            "(at most %lld)",
            name, (long long)kstep, (long long)(64 * kstep));
}

/* tessera.mma_m16n8k16(&C float32[16][8] (ldc), ldc, &A [16][16] (lda), lda,
 * &B [16][8] k-major (ldb), ldb) for one warp: each lane loads its fragment
 * (PTX ISA layouts for m16n8k16), mma.sync, stores its part of C. */
static void emit_mma(emitter *e, ts_expr *x, LLVMValueRef *a) {
  if (!e->cuda || ts_target_sm(e->target) < 80) {
    emit_fail(e, TS_EUNSUPPORTED,
              "code generation: tessera.mma_m16n8k16 needs a cuda target with "
              "sm_80 or newer");
    return;
  }
  ts_buffer *abuf = ts_expr_kind_of(ts_expr_operand(x, 2)) == TS_EXPR_ADDRESS_OF
                        ? ts_expr_buffer(ts_expr_operand(x, 2))
                        : NULL;
  bool bf16 = abuf && ts_buffer_dtype(abuf).code == TS_DT_BFLOAT;
  LLVMTypeRef et =
      bf16 ? LLVMBFloatTypeInContext(e->ctx) : LLVMHalfTypeInContext(e->ctx);
  LLVMTypeRef pair = LLVMVectorType(et, 2);
  LLVMValueRef lane = call_fixed(e, "llvm.nvvm.read.ptx.sreg.laneid", NULL, 0);
  if (!lane) return;
  lane = LLVMBuildZExt(e->b, lane, i64t(e), "");
  LLVMValueRef group =
      LLVMBuildLShr(e->b, lane, LLVMConstInt(i64t(e), 2, 0), "");
  LLVMValueRef tig = LLVMBuildAnd(e->b, lane, LLVMConstInt(i64t(e), 3, 0), "");
  LLVMValueRef col2 = LLVMBuildMul(e->b, tig, LLVMConstInt(i64t(e), 2, 0), "");
  /* element pointer p + (row * ld + col) elements of type t */
#define ELEM(t, p, row, ld, col)                                               \
  LLVMBuildInBoundsGEP2(                                                       \
      e->b, (t), (p),                                                          \
      (LLVMValueRef[]){                                                        \
          LLVMBuildAdd(e->b, LLVMBuildMul(e->b, (row), (ld), ""), (col), "")}, \
      1, "")
  LLVMValueRef k8 = LLVMConstInt(i64t(e), 8, 0);
  LLVMValueRef args[10];
  /* A: a0a1 (g, 2t), a2a3 (g+8, 2t), a4a5 (g, 2t+8), a6a7 (g+8, 2t+8). */
  for (int i = 0; i < 4; i++) {
    LLVMValueRef row = (i & 1) ? LLVMBuildAdd(e->b, group, k8, "") : group;
    LLVMValueRef col = (i & 2) ? LLVMBuildAdd(e->b, col2, k8, "") : col2;
    args[i] = load_vec(e, pair, ELEM(et, a[2], row, a[3], col), 4);
  }
  /* B (k-major): b0b1 = rows 2t, 2t+1 at column g; b2b3 = rows 2t+8, 2t+9. */
  for (int i = 0; i < 2; i++) {
    LLVMValueRef r0 = i ? LLVMBuildAdd(e->b, col2, k8, "") : col2;
    LLVMValueRef r1 = LLVMBuildAdd(e->b, r0, LLVMConstInt(i64t(e), 1, 0), "");
    LLVMValueRef v0 =
        LLVMBuildLoad2(e->b, et, ELEM(et, a[4], r0, a[5], group), "");
    LLVMValueRef v1 =
        LLVMBuildLoad2(e->b, et, ELEM(et, a[4], r1, a[5], group), "");
    LLVMValueRef v = LLVMBuildInsertElement(e->b, LLVMGetUndef(pair), v0,
                                            LLVMConstInt(i32t(e), 0, 0), "");
    args[4 + i] =
        LLVMBuildInsertElement(e->b, v, v1, LLVMConstInt(i32t(e), 1, 0), "");
  }
  /* C: c0c1 (g, 2t), c2c3 (g+8, 2t). */
  LLVMValueRef cptr[4];
  for (int i = 0; i < 4; i++) {
    LLVMValueRef row = (i & 2) ? LLVMBuildAdd(e->b, group, k8, "") : group;
    LLVMValueRef col =
        (i & 1) ? LLVMBuildAdd(e->b, col2, LLVMConstInt(i64t(e), 1, 0), "")
                : col2;
    cptr[i] = ELEM(f32t(e), a[0], row, a[1], col);
    args[6 + i] = LLVMBuildLoad2(e->b, f32t(e), cptr[i], "");
  }
#undef ELEM
  LLVMValueRef d = call_fixed(e,
                              bf16 ? "llvm.nvvm.mma.m16n8k16.row.col.bf16"
                                   : "llvm.nvvm.mma.m16n8k16.row.col.f32.f32",
                              args, 10);
  if (!d) return;
  for (int i = 0; i < 4; i++)
    LLVMBuildStore(e->b, LLVMBuildExtractValue(e->b, d, (unsigned)i, ""),
                   cptr[i]);
}

/* Target intrinsics: calls not in the IR's built-in table, implemented per
 * target. */
static LLVMValueRef emit_target_intrinsic(emitter *e, ts_expr *x) {
  const char *name = ts_expr_call_name(x);
  ts_dtype t = ts_expr_dtype(x);
  int n = ts_expr_n_operands(x);
  if (!strcmp(name, "tessera.cuda.syncthreads")) {
    if (!e->cuda) goto wrong_target;
    unsigned id = LLVMLookupIntrinsicID("llvm.nvvm.barrier0", 18);
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(e->mod, id, NULL, 0);
    LLVMBuildCall2(e->b, LLVMIntrinsicGetType(e->ctx, id, NULL, 0), fn, NULL, 0,
                   "");
    return LLVMConstInt(reg_type(e, t), 0, 0);
  }
  if (!strcmp(name, "tessera.cuda.shfl_down")) {
    if (!e->cuda) goto wrong_target;
    if (n != 2 || !ts_dtype_eq(t, TS_FLOAT32)) {
      emit_fail(e, TS_EINVAL,
                "code generation: %s takes (float32 value, int32 offset)",
                name);
      return undef_of(e, t);
    }
    LLVMValueRef v = ex(e, ts_expr_operand(x, 0));
    LLVMValueRef off =
        emit_cast(e, TS_INT32, ts_expr_dtype(ts_expr_operand(x, 1)),
                  ex(e, ts_expr_operand(x, 1)));
    LLVMValueRef args[4] = {LLVMConstInt(i32t(e), 0xffffffffu, 0), v, off,
                            LLVMConstInt(i32t(e), 31, 0)};
    return call_intrinsic(e, "llvm.nvvm.shfl.sync.down.f32", NULL, 0, args, 4);
  }
  static const struct {
    const char *name;
    int n_args;
  } tensor[] = {
      {"tessera.vnni_dot_16x4", 3},    {"tessera.avx512bf16_dot_16x2", 3},
      {"tessera.amx_bf16_gemm", 7},    {"tessera.amx_int8_gemm", 7},
      {"tessera.mma_m16n8k16", 6},     {"tessera.vnni_s8_dot_16x4", 3},
      {"tessera.vnni_s8_dot_16x16", 3}};
  for (size_t i = 0; i < sizeof tensor / sizeof tensor[0]; i++) {
    if (strcmp(name, tensor[i].name)) continue;
    if (n != tensor[i].n_args) {
      emit_fail(e, TS_EINVAL, "code generation: %s takes %d arguments, got %d",
                name, tensor[i].n_args, n);
      return undef_of(e, t);
    }
    LLVMValueRef args[8];
    for (int k = 0; k < n; k++) {
      ts_expr *arg = ts_expr_operand(x, k);
      args[k] = ex(e, arg);
      if (!ts_dtype_is_handle(ts_expr_dtype(arg)) &&
          ts_dtype_is_int(ts_expr_dtype(arg)))
        args[k] = emit_cast(e, TS_INT64, ts_expr_dtype(arg), args[k]);
    }
    if (e->status) return undef_of(e, t);
    if (i == 0)
      emit_vnni_dot(e, args);
    else if (i == 1)
      emit_bf16_dot(e, args);
    else if (i == 2 || i == 3)
      emit_amx_gemm(e, x, args, i == 3);
    else if (i == 4)
      emit_mma(e, x, args);
    else
      emit_vnni_s8_dot(e, args, i == 5 ? 1 : 4);
    return LLVMConstInt(reg_type(e, t), 0, 0);
  }
  emit_fail(e, TS_EUNSUPPORTED,
            "code generation: no implementation of intrinsic '%s' for target "
            "'%s'",
            name, ts_target_str(e->target));
  return undef_of(e, t);
wrong_target:
  emit_fail(e, TS_EINVAL, "code generation: intrinsic '%s' needs a %s target",
            name, "cuda");
  return undef_of(e, t);
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
    return undef_of(e, t);
  }
  LLVMValueRef args[3];
  for (int i = 0; i < n; i++) args[i] = ex(e, ts_expr_operand(x, i));
  if (e->status) return undef_of(e, t);
  if (!strcmp(name, "abs") && !ts_dtype_is_float(t)) {
    if (!ts_dtype_is_signed(t)) return args[0];
    LLVMTypeRef ty = LLVMTypeOf(args[0]);
    LLVMValueRef a2[2] = {args[0],
                          LLVMConstInt(LLVMInt1TypeInContext(e->ctx), 0, 0)};
    return call_intrinsic(e, "llvm.abs", &ty, 1, a2, 2);
  }
  if (!ts_dtype_is_float(t)) {
    emit_fail(e, TS_EINVAL, "code generation: '%s' needs floating-point values",
              name);
    return undef_of(e, t);
  }
  for (int i = 0; i < n; i++) args[i] = to_work(e, args[i], t);
  LLVMTypeRef ty = LLVMTypeOf(args[0]);
  if (!strcmp(name, "exp")) return from_work(e, target_exp(e, ty, args[0]), t);
  static const struct {
    const char *name, *llvm;
  } direct[] = {{"exp2", "llvm.exp2"},   {"log", "llvm.log"},
                {"log2", "llvm.log2"},   {"log10", "llvm.log10"},
                {"sqrt", "llvm.sqrt"},   {"sin", "llvm.sin"},
                {"cos", "llvm.cos"},     {"floor", "llvm.floor"},
                {"ceil", "llvm.ceil"},   {"round", "llvm.roundeven"},
                {"trunc", "llvm.trunc"}, {"pow", "llvm.pow"},
                {"fma", "llvm.fma"},     {"abs", "llvm.fabs"}};
  LLVMValueRef r = NULL;
  if (e->cuda) r = cuda_math(e, name, ty, args);
  for (size_t i = 0; i < sizeof direct / sizeof direct[0] && !r; i++)
    if (!strcmp(name, direct[i].name))
      r = call_intrinsic(e, direct[i].llvm, &ty, 1, args, n);
  if (!r && !strcmp(name, "rsqrt")) {
    LLVMValueRef s = call_intrinsic(e, "llvm.sqrt", &ty, 1, args, 1);
    r = LLVMBuildFDiv(e->b, const_fp(ty, 1.0), s, "");
  }
  if (!r && !strcmp(name, "sigmoid")) {
    LLVMValueRef neg = LLVMBuildFNeg(e->b, args[0], "");
    LLVMValueRef ex1 = target_exp(e, ty, neg);
    LLVMValueRef den = LLVMBuildFAdd(e->b, const_fp(ty, 1.0), ex1, "");
    r = LLVMBuildFDiv(e->b, const_fp(ty, 1.0), den, "");
  }
  ts_dtype wt = is_half(t) ? ts_dtype_with_lanes(TS_FLOAT32, t.lanes) : t;
  /* vectors (and GPUs, which have no libm) use vectorizable formulas */
  bool vec_math = e->cuda || t.lanes > 1;
  if (!r && vec_math && !strcmp(name, "tanh")) r = tanh_by_exp(e, args[0]);
  if (!r && vec_math && !strcmp(name, "erf")) r = erf_by_polynomial(e, args[0]);
  if (!r && !strcmp(name, "tanh"))
    r = libm_per_lane(e, "tanhf", "tanh", args[0], wt);
  if (!r && !strcmp(name, "erf"))
    r = libm_per_lane(e, "erff", "erf", args[0], wt);
  if (!r) {
    emit_fail(e, TS_EUNSUPPORTED,
              "code generation: intrinsic '%s' is not supported", name);
    return undef_of(e, t);
  }
  return from_work(e, r, t);
}

static LLVMValueRef ex(emitter *e, ts_expr *x) {
  ts_dtype t = ts_expr_dtype(x);
  if (e->status) return undef_of(e, t);
  switch (ts_expr_kind_of(x)) {
  case TS_EXPR_INT:
    return LLVMConstInt(reg_type(e, t),
                        (unsigned long long)ts_expr_int_value(x),
                        ts_dtype_is_signed(t));
  case TS_EXPR_FLOAT:
    return LLVMConstReal(reg_type(e, t), ts_expr_float_value(x));
  case TS_EXPR_VAR: {
    LLVMValueRef v = lookup(e, x, "variable", ts_var_name(x));
    return v ? v : undef_of(e, t);
  }
  case TS_EXPR_NOT: return LLVMBuildNot(e->b, ex(e, ts_expr_operand(x, 0)), "");
  case TS_EXPR_SELECT: {
    LLVMValueRef c = ex(e, ts_expr_operand(x, 0));
    LLVMValueRef a = ex(e, ts_expr_operand(x, 1)),
                 b = ex(e, ts_expr_operand(x, 2));
    return LLVMBuildSelect(e->b, c, a, b, "");
  }
  case TS_EXPR_CAST: {
    ts_expr *v = ts_expr_operand(x, 0);
    return emit_cast(e, t, ts_expr_dtype(v), ex(e, v));
  }
  case TS_EXPR_LOAD: return emit_load(e, x);
  case TS_EXPR_RAMP: {
    LLVMValueRef base = splat(e, ex(e, ts_expr_operand(x, 0)), t.lanes);
    LLVMValueRef stride = splat(e, ex(e, ts_expr_operand(x, 1)), t.lanes);
    LLVMTypeRef st = scalar_type(e, ts_dtype_scalar(t));
    LLVMValueRef *steps = malloc(sizeof *steps * t.lanes);
    for (int i = 0; i < t.lanes; i++)
      steps[i] = LLVMConstInt(st, (unsigned)i, 0);
    LLVMValueRef iota = LLVMConstVector(steps, t.lanes);
    free(steps);
    return LLVMBuildAdd(e->b, base, LLVMBuildMul(e->b, stride, iota, ""), "");
  }
  case TS_EXPR_BROADCAST:
    return splat(e, ex(e, ts_expr_operand(x, 0)), t.lanes);
  case TS_EXPR_CALL: return emit_call(e, x);
  case TS_EXPR_LET: {
    LLVMValueRef v = ex(e, ts_expr_operand(x, 0));
    ts_node_map_put(e->cur->vals, ts_expr_let_var(x), v);
    return ex(e, ts_expr_operand(x, 1));
  }
  case TS_EXPR_ADDRESS_OF: {
    ts_buffer *b = ts_expr_buffer(x);
    if (ts_expr_n_operands(x) != 1) {
      emit_fail(e, TS_EINTERNAL,
                "code generation: buffer '%s' is not flattened",
                ts_buffer_name(b));
      return undef_of(e, t);
    }
    return elem_ptr(e, b, ex(e, ts_expr_operand(x, 0)));
  }
  default:
    if (ts_expr_is_binary(ts_expr_kind_of(x))) return emit_binary(e, x);
  }
  emit_fail(e, TS_EINTERNAL, "code generation: unknown expression kind %d",
            (int)ts_expr_kind_of(x));
  return undef_of(e, t);
}

/* ---- statements ---- */

static void st(emitter *e, ts_stmt *s);
static void emit_loop(emitter *e, ts_expr *var, LLVMValueRef lo,
                      LLVMValueRef hi, ts_stmt *body, bool unroll_full);

static void set_range(emitter *e, ts_stmt *loop) {
  int64_t mn, ext;
  if (ts_expr_is_const_int(ts_for_min(loop), &mn) &&
      ts_expr_is_const_int(ts_for_extent(loop), &ext) && ext > 0)
    ts_var_ranges_set(e->ranges, ts_for_var(loop), mn, ext);
}

/* Attaches !llvm.loop {llvm.loop.unroll.full} to a loop's back edge. The
 * loop id refers to itself: built around a temporary node that is then
 * replaced by the id. */
static void mark_unroll_full(emitter *e, LLVMValueRef br) {
  LLVMMetadataRef tmp = LLVMTemporaryMDNode(e->ctx, NULL, 0);
  LLVMMetadataRef name =
      LLVMMDStringInContext2(e->ctx, "llvm.loop.unroll.full", 21);
  LLVMMetadataRef unroll = LLVMMDNodeInContext2(e->ctx, &name, 1);
  LLVMMetadataRef ops[2] = {tmp, unroll};
  LLVMMetadataRef loop = LLVMMDNodeInContext2(e->ctx, ops, 2);
  LLVMMetadataReplaceAllUsesWith(tmp, loop);
  unsigned kind = LLVMGetMDKindIDInContext(e->ctx, "llvm.loop", 9);
  LLVMSetMetadata(br, kind, LLVMMetadataAsValue(e->ctx, loop));
}

/* for var in [lo, hi): body. */
static void emit_loop(emitter *e, ts_expr *var, LLVMValueRef lo,
                      LLVMValueRef hi, ts_stmt *body, bool unroll_full) {
  LLVMValueRef fn = e->cur->fn;
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(e->b);
  LLVMBasicBlockRef head =
      LLVMAppendBasicBlockInContext(e->ctx, fn, "for.head");
  LLVMBasicBlockRef bb = LLVMAppendBasicBlockInContext(e->ctx, fn, "for.body");
  LLVMBasicBlockRef latch =
      LLVMAppendBasicBlockInContext(e->ctx, fn, "for.latch");
  LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(e->ctx, fn, "for.end");
  LLVMBuildBr(e->b, head);
  LLVMPositionBuilderAtEnd(e->b, head);
  LLVMValueRef phi = LLVMBuildPhi(e->b, i64t(e), ts_var_name(var));
  LLVMValueRef cond = LLVMBuildICmp(e->b, LLVMIntSLT, phi, hi, "");
  LLVMBuildCondBr(e->b, cond, bb, exit);
  LLVMPositionBuilderAtEnd(e->b, bb);
  ts_node_map_put(e->cur->vals, var, phi);
  st(e, body);
  LLVMBuildBr(e->b, latch);
  LLVMPositionBuilderAtEnd(e->b, latch);
  LLVMValueRef next =
      LLVMBuildNSWAdd(e->b, phi, LLVMConstInt(i64t(e), 1, 0), "");
  LLVMValueRef back = LLVMBuildBr(e->b, head);
  if (unroll_full) mark_unroll_full(e, back);
  LLVMValueRef in_vals[2] = {lo, next};
  LLVMBasicBlockRef in_bbs[2] = {pre, latch};
  LLVMAddIncoming(phi, in_vals, in_bbs, 2);
  LLVMPositionBuilderAtEnd(e->b, exit);
}

/* Collects the vars and buffers a statement uses that are defined outside
 * it (present in the current value map), in first-use order. */
typedef struct capture_ctx {
  emitter *e;
  ts_node_map *seen;
  const void **nodes;
  bool *is_buf; /* nodes[i] is a buffer (its value a data pointer) */
  int n, cap;
} capture_ctx;

static void capture_node(capture_ctx *c, const void *node, bool is_buf) {
  if (ts_node_map_get(c->seen, node)) return;
  ts_node_map_put(c->seen, node, (void *)1);
  if (!ts_node_map_get(c->e->cur->vals, node)) return;
  if (c->n == c->cap) {
    c->cap = c->cap ? c->cap * 2 : 16;
    c->nodes = realloc(c->nodes, sizeof *c->nodes * (size_t)c->cap);
    c->is_buf = realloc(c->is_buf, sizeof *c->is_buf * (size_t)c->cap);
  }
  c->is_buf[c->n] = is_buf;
  c->nodes[c->n++] = node;
}

static void capture_expr(void *ctx, ts_expr *x) {
  capture_ctx *c = ctx;
  ts_expr_kind k = ts_expr_kind_of(x);
  if (k == TS_EXPR_VAR)
    capture_node(c, x, false);
  else if (k == TS_EXPR_LOAD || k == TS_EXPR_ADDRESS_OF)
    capture_node(c, ts_expr_buffer(x), true);
}

static void capture_visit(void *ctx, ts_expr *x) {
  ts_expr_walk(x, capture_expr, ctx);
}

static bool capture_stmt(void *ctx, ts_stmt *s) {
  capture_ctx *c = ctx;
  if (ts_stmt_kind_of(s) == TS_STMT_STORE)
    capture_node(c, ts_store_buffer(s), true);
  return true;
}

static void emit_parallel(emitter *e, ts_stmt *s) {
  if (e->cuda) {
    emit_fail(
        e, TS_EINVAL,
        "code generation: loop '%s' is parallel; on a cuda target bind it "
        "to blockIdx/threadIdx instead",
        ts_var_name(ts_for_var(s)));
    return;
  }
  LLVMValueRef lo = ex(e, ts_for_min(s)), n = ex(e, ts_for_extent(s));
  capture_ctx cc = {.e = e, .seen = ts_node_map_create()};
  ts_visitor v = {
      .enter_stmt = capture_stmt, .visit_expr = capture_visit, .ctx = &cc};
  ts_stmt_walk(ts_for_body(s), &v);
  ts_node_map_destroy(cc.seen);

  /* closure = {rt, lo, captured...} */
  int nf = cc.n + 2;
  LLVMTypeRef *fields = malloc(sizeof *fields * (size_t)nf);
  LLVMValueRef *values = malloc(sizeof *values * (size_t)nf);
  fields[0] = ptrt(e);
  values[0] = e->cur->rt;
  fields[1] = i64t(e);
  values[1] = lo;
  for (int i = 0; i < cc.n; i++) {
    values[i + 2] = ts_node_map_get(e->cur->vals, cc.nodes[i]);
    fields[i + 2] = LLVMTypeOf(values[i + 2]);
  }
  LLVMTypeRef st_t = LLVMStructTypeInContext(e->ctx, fields, (unsigned)nf, 0);
  LLVMValueRef closure = entry_alloca(e, st_t, 16);
  for (int i = 0; i < nf; i++)
    LLVMBuildStore(e->b, values[i],
                   LLVMBuildStructGEP2(e->b, st_t, closure, (unsigned)i, ""));

  /* The loop body as a function of its own: i32 body(ptr rt, i64 begin,
   * i64 end, captured...), buffer pointers noalias so that LLVM keeps
   * accumulators in registers (inlined into the task, the noalias becomes
   * scoped alias metadata). */
  char name[256];
  snprintf(name, sizeof name, "%s_task%d", e->entry, e->n_tasks++);
  char body_name[300];
  snprintf(body_name, sizeof body_name, "%s_body", name);
  int nb = cc.n + 3;
  LLVMTypeRef *bparams = malloc(sizeof *bparams * (size_t)nb);
  bparams[0] = ptrt(e);
  bparams[1] = i64t(e);
  bparams[2] = i64t(e);
  for (int i = 0; i < cc.n; i++) bparams[i + 3] = fields[i + 2];
  LLVMTypeRef bty = LLVMFunctionType(i32t(e), bparams, (unsigned)nb, 0);
  LLVMValueRef body_fn = LLVMAddFunction(e->mod, body_name, bty);
  LLVMSetLinkage(body_fn, LLVMInternalLinkage);
  set_fn_attrs(e, body_fn);
  add_enum_attr(e, body_fn, LLVMAttributeFunctionIndex, "alwaysinline", 0);
  for (int i = 0; i < cc.n; i++)
    if (cc.is_buf[i]) add_enum_attr(e, body_fn, (unsigned)i + 4, "noalias", 0);
  LLVMBasicBlockRef saved_bb = LLVMGetInsertBlock(e->b);
  emit_fn *saved = e->cur;
  emit_fn bf = {.fn = body_fn, .vals = ts_node_map_create()};
  bf.alloca_bb = LLVMAppendBasicBlockInContext(e->ctx, body_fn, "entry");
  bf.rt = LLVMGetParam(body_fn, 0);
  for (int i = 0; i < cc.n; i++)
    ts_node_map_put(bf.vals, cc.nodes[i],
                    LLVMGetParam(body_fn, (unsigned)i + 3));
  e->cur = &bf;
  LLVMBasicBlockRef body_bb =
      LLVMAppendBasicBlockInContext(e->ctx, body_fn, "body");
  LLVMPositionBuilderAtEnd(e->b, bf.alloca_bb);
  LLVMBuildBr(e->b, body_bb);
  LLVMPositionBuilderAtEnd(e->b, body_bb);
  emit_loop(e, ts_for_var(s), LLVMGetParam(body_fn, 1),
            LLVMGetParam(body_fn, 2), ts_for_body(s), false);
  LLVMBuildRet(e->b, LLVMConstInt(i32t(e), 0, 0));
  ts_node_map_destroy(bf.vals);

  /* The task function: i32 task(ptr closure, i64 begin, i64 end) unpacks
   * the closure and calls the body on [lo + begin, lo + end). */
  LLVMTypeRef params[3] = {ptrt(e), i64t(e), i64t(e)};
  LLVMTypeRef fty = LLVMFunctionType(i32t(e), params, 3, 0);
  LLVMValueRef task = LLVMAddFunction(e->mod, name, fty);
  LLVMSetLinkage(task, LLVMInternalLinkage);
  set_fn_attrs(e, task);
  LLVMPositionBuilderAtEnd(
      e->b, LLVMAppendBasicBlockInContext(e->ctx, task, "entry"));
  LLVMValueRef cl = LLVMGetParam(task, 0);
  LLVMValueRef *bargs = malloc(sizeof *bargs * (size_t)nb);
  LLVMValueRef loaded[2];
  for (int i = 0; i < nf; i++) {
    LLVMValueRef p = LLVMBuildStructGEP2(e->b, st_t, cl, (unsigned)i, "");
    LLVMValueRef x = LLVMBuildLoad2(e->b, fields[i], p, "");
    if (i < 2)
      loaded[i] = x;
    else
      bargs[i + 1] = x;
  }
  bargs[0] = loaded[0];
  bargs[1] = LLVMBuildAdd(e->b, loaded[1], LLVMGetParam(task, 1), "");
  bargs[2] = LLVMBuildAdd(e->b, loaded[1], LLVMGetParam(task, 2), "");
  LLVMBuildRet(e->b,
               LLVMBuildCall2(e->b, bty, body_fn, bargs, (unsigned)nb, ""));
  free(bargs);
  free(bparams);
  e->cur = saved;
  LLVMPositionBuilderAtEnd(e->b, saved_bb);
  free(fields);
  free(values);
  free(cc.nodes);
  free(cc.is_buf);

  /* status = ts_rt_parallel_for(rt, task, closure, n) */
  LLVMTypeRef pf_params[4] = {ptrt(e), ptrt(e), ptrt(e), i64t(e)};
  LLVMTypeRef pf_t = LLVMFunctionType(i32t(e), pf_params, 4, 0);
  LLVMValueRef pf = extern_fn(e, "ts_rt_parallel_for", pf_t);
  LLVMValueRef args[4] = {e->cur->rt, task, closure, n};
  check_status(e, LLVMBuildCall2(e->b, pf_t, pf, args, 4, ""));
}

/* ---- GPU thread bindings ---- */

/* Which launch dimension a thread tag names: 0..2 for blockIdx.x/y/z,
 * 3..5 for threadIdx.x/y/z, 6 for vthread, -1 otherwise. */
static int thread_axis(const char *tag) {
  static const char *const tags[] = {
      "blockIdx.x",  "blockIdx.y",  "blockIdx.z", "threadIdx.x",
      "threadIdx.y", "threadIdx.z", "vthread"};
  for (int i = 0; i < 7; i++)
    if (tag && !strcmp(tag, tags[i])) return i;
  return -1;
}

static bool collect_threads(void *ctx, ts_stmt *s) {
  emitter *e = ctx;
  if (ts_stmt_kind_of(s) != TS_STMT_FOR || ts_for_kind_of(s) != TS_FOR_THREAD)
    return true;
  int axis = thread_axis(ts_for_thread_tag(s));
  int64_t ext;
  if (axis < 0) {
    emit_fail(e, TS_EINVAL,
              "code generation: unknown thread tag '%s' on loop '%s'",
              ts_for_thread_tag(s), ts_var_name(ts_for_var(s)));
    return false;
  }
  if (axis == 6) return true;
  if (!ts_expr_is_const_int(ts_for_extent(s), &ext) || ext < 1) {
    emit_fail(e, TS_EINVAL,
              "code generation: loop '%s' bound to '%s' needs a constant "
              "positive extent",
              ts_var_name(ts_for_var(s)), ts_for_thread_tag(s));
    return false;
  }
  int64_t *dim = axis < 3 ? &e->grid[axis] : &e->block[axis - 3];
  if (ext > *dim) *dim = ext;
  return true;
}

static void emit_thread_loop(emitter *e, ts_stmt *s) {
  int axis = thread_axis(ts_for_thread_tag(s));
  if (axis == 6) { /* a virtual thread is an ordinary loop here */
    LLVMValueRef lo = ex(e, ts_for_min(s));
    LLVMValueRef hi = LLVMBuildAdd(e->b, lo, ex(e, ts_for_extent(s)), "");
    emit_loop(e, ts_for_var(s), lo, hi, ts_for_body(s), false);
    return;
  }
  static const char *const sregs[] = {
      "llvm.nvvm.read.ptx.sreg.ctaid.x", "llvm.nvvm.read.ptx.sreg.ctaid.y",
      "llvm.nvvm.read.ptx.sreg.ctaid.z", "llvm.nvvm.read.ptx.sreg.tid.x",
      "llvm.nvvm.read.ptx.sreg.tid.y",   "llvm.nvvm.read.ptx.sreg.tid.z"};
  unsigned id = LLVMLookupIntrinsicID(sregs[axis], strlen(sregs[axis]));
  LLVMValueRef fn = LLVMGetIntrinsicDeclaration(e->mod, id, NULL, 0);
  LLVMTypeRef fty = LLVMIntrinsicGetType(e->ctx, id, NULL, 0);
  LLVMValueRef raw = LLVMBuildCall2(e->b, fty, fn, NULL, 0, "");
  LLVMValueRef idx =
      LLVMBuildAdd(e->b, LLVMBuildZExt(e->b, raw, i64t(e), ""),
                   ex(e, ts_for_min(s)), ts_var_name(ts_for_var(s)));
  ts_node_map_put(e->cur->vals, ts_for_var(s), idx);
  int64_t ext = 0, launched = axis < 3 ? e->grid[axis] : e->block[axis - 3];
  ts_expr_is_const_int(ts_for_extent(s), &ext);
  if (ext >= launched) {
    st(e, ts_for_body(s));
    return;
  }
  /* Launched wider than this loop (another loop shares the axis): guard. */
  LLVMValueRef in =
      LLVMBuildICmp(e->b, LLVMIntSLT, LLVMBuildZExt(e->b, raw, i64t(e), ""),
                    LLVMConstInt(i64t(e), (unsigned long long)ext, 0), "");
  LLVMBasicBlockRef tb =
      LLVMAppendBasicBlockInContext(e->ctx, e->cur->fn, "bound");
  LLVMBasicBlockRef mb =
      LLVMAppendBasicBlockInContext(e->ctx, e->cur->fn, "bound.end");
  LLVMBuildCondBr(e->b, in, tb, mb);
  LLVMPositionBuilderAtEnd(e->b, tb);
  st(e, ts_for_body(s));
  LLVMBuildBr(e->b, mb);
  LLVMPositionBuilderAtEnd(e->b, mb);
}

static void emit_for(emitter *e, ts_stmt *s) {
  set_range(e, s);
  switch (ts_for_kind_of(s)) {
  case TS_FOR_PARALLEL: emit_parallel(e, s); return;
  case TS_FOR_THREAD:
    if (!e->cuda) {
      emit_fail(e, TS_EINVAL,
                "code generation: loop '%s' is bound to '%s', which needs a "
                "cuda target",
                ts_var_name(ts_for_var(s)), ts_for_thread_tag(s));
      return;
    }
    emit_thread_loop(e, s);
    return;
  default: break;
  }
  LLVMValueRef lo = ex(e, ts_for_min(s));
  LLVMValueRef hi = LLVMBuildAdd(e->b, lo, ex(e, ts_for_extent(s)), "");
  const ts_annotation *u = ts_for_find_annotation(s, "llvm_unroll_full");
  bool unroll = (u && u->kind == TS_ANN_INT && u->i) ||
                ts_for_kind_of(s) == TS_FOR_UNROLLED;
  emit_loop(e, ts_for_var(s), lo, hi, ts_for_body(s), unroll);
}

static void emit_if(emitter *e, ts_stmt *s) {
  LLVMValueRef c = ex(e, ts_if_cond(s));
  if (e->status) return;
  if (ts_expr_dtype(ts_if_cond(s)).lanes > 1) {
    /* Masked vector code: run the branch when any lane is enabled, with
     * every access masked. */
    if (ts_if_else(s)) {
      emit_fail(e, TS_EINTERNAL, "code generation: a vector if with an else");
      return;
    }
    LLVMTypeRef ct = LLVMTypeOf(c);
    LLVMValueRef any =
        call_intrinsic(e, "llvm.vector.reduce.or", &ct, 1, &c, 1);
    LLVMBasicBlockRef tb =
        LLVMAppendBasicBlockInContext(e->ctx, e->cur->fn, "mask.then");
    LLVMBasicBlockRef mb =
        LLVMAppendBasicBlockInContext(e->ctx, e->cur->fn, "mask.end");
    LLVMBuildCondBr(e->b, any, tb, mb);
    LLVMPositionBuilderAtEnd(e->b, tb);
    LLVMValueRef saved = e->mask;
    e->mask = saved ? LLVMBuildAnd(e->b, saved, c, "") : c;
    st(e, ts_if_then(s));
    e->mask = saved;
    LLVMBuildBr(e->b, mb);
    LLVMPositionBuilderAtEnd(e->b, mb);
    return;
  }
  LLVMValueRef fn = e->cur->fn;
  LLVMBasicBlockRef tb = LLVMAppendBasicBlockInContext(e->ctx, fn, "if.then");
  LLVMBasicBlockRef eb =
      ts_if_else(s) ? LLVMAppendBasicBlockInContext(e->ctx, fn, "if.else")
                    : NULL;
  LLVMBasicBlockRef mb = LLVMAppendBasicBlockInContext(e->ctx, fn, "if.end");
  LLVMBuildCondBr(e->b, c, tb, eb ? eb : mb);
  LLVMPositionBuilderAtEnd(e->b, tb);
  st(e, ts_if_then(s));
  LLVMBuildBr(e->b, mb);
  if (eb) {
    LLVMPositionBuilderAtEnd(e->b, eb);
    st(e, ts_if_else(s));
    LLVMBuildBr(e->b, mb);
  }
  LLVMPositionBuilderAtEnd(e->b, mb);
}

static void emit_allocate(emitter *e, ts_stmt *s) {
  ts_buffer *b = ts_allocate_buffer(s);
  int64_t bytes = ts_buffer_bytes(b);
  int64_t elems = ts_buffer_storage_elems(b);
  LLVMTypeRef mt = mem_type(e, ts_buffer_dtype(b));
  unsigned align = (unsigned)(ts_buffer_align(b) > 0 ? ts_buffer_align(b) : 64);
  if (e->cuda && !strcmp(ts_buffer_scope(b), "shared")) {
    /* Shared memory: a module-level array in address space 3. */
    LLVMTypeRef at = LLVMArrayType(mt, (unsigned)(elems > 0 ? elems : 1));
    LLVMValueRef g =
        LLVMAddGlobalInAddressSpace(e->mod, at, ts_buffer_name(b), 3);
    LLVMSetLinkage(g, LLVMInternalLinkage);
    LLVMSetInitializer(g, LLVMGetUndef(at));
    LLVMSetAlignment(g, align);
    e->shared_bytes += bytes;
    ts_node_map_put(e->cur->vals, b, g);
    st(e, ts_allocate_body(s));
    return;
  }
  if (e->cuda && bytes > STACK_ALLOC_LIMIT) {
    emit_fail(
        e, TS_EINVAL,
        "code generation: local buffer '%s' (%lld bytes) is too large for "
        "a GPU thread",
        ts_buffer_name(b), (long long)bytes);
    return;
  }
  if (bytes <= STACK_ALLOC_LIMIT) {
    LLVMValueRef p = entry_alloca(
        e, LLVMArrayType(mt, (unsigned)(elems > 0 ? elems : 1)), align);
    ts_node_map_put(e->cur->vals, b, p);
    st(e, ts_allocate_body(s));
    return;
  }
  LLVMTypeRef ap[3] = {ptrt(e), i64t(e), i64t(e)};
  LLVMTypeRef at = LLVMFunctionType(ptrt(e), ap, 3, 0);
  LLVMValueRef alloc = extern_fn(e, "ts_rt_alloc", at);
  LLVMValueRef args[3] = {e->cur->rt,
                          LLVMConstInt(i64t(e), (unsigned long long)bytes, 0),
                          LLVMConstInt(i64t(e), align, 0)};
  LLVMValueRef p = LLVMBuildCall2(e->b, at, alloc, args, 3, "");
  LLVMValueRef isnull = LLVMBuildIsNull(e->b, p, "");
  check_status(e, LLVMBuildSelect(e->b, isnull,
                                  LLVMConstInt(i32t(e), (unsigned)-1, 1),
                                  LLVMConstInt(i32t(e), 0, 0), ""));
  ts_node_map_put(e->cur->vals, b, p);
  st(e, ts_allocate_body(s));
  LLVMTypeRef fp[2] = {ptrt(e), ptrt(e)};
  LLVMTypeRef ft = LLVMFunctionType(LLVMVoidTypeInContext(e->ctx), fp, 2, 0);
  LLVMValueRef fre = extern_fn(e, "ts_rt_free", ft);
  LLVMValueRef fargs[2] = {e->cur->rt, p};
  LLVMBuildCall2(e->b, ft, fre, fargs, 2, "");
}

static void st(emitter *e, ts_stmt *s) {
  if (!s || e->status) return;
  switch (ts_stmt_kind_of(s)) {
  case TS_STMT_FOR: emit_for(e, s); return;
  case TS_STMT_STORE: emit_store(e, s); return;
  case TS_STMT_SEQ:
    for (int i = 0; i < ts_seq_n(s); i++) st(e, ts_seq_item(s, i));
    return;
  case TS_STMT_IF: emit_if(e, s); return;
  case TS_STMT_EVALUATE: ex(e, ts_evaluate_value(s)); return;
  case TS_STMT_LET:
    ts_node_map_put(e->cur->vals, ts_let_stmt_var(s),
                    ex(e, ts_let_stmt_value(s)));
    st(e, ts_let_stmt_body(s));
    return;
  case TS_STMT_ALLOCATE: emit_allocate(e, s); return;
  case TS_STMT_BLOCK_REALIZE:
    emit_fail(e, TS_EINTERNAL, "code generation: block '%s' was not lowered",
              ts_block_name(ts_realize_block(s)));
    return;
  default: break;
  }
  emit_fail(e, TS_EINTERNAL, "code generation: unknown statement kind");
}

/* ---- the kernel ---- */

/* A PTX kernel: void entry(ptr addrspace(1) p0, ...), marked as a kernel
 * in !nvvm.annotations with its launch bounds. */
static int emit_cuda_kernel(emitter *e, const ts_func *f, const char *entry) {
  int n = ts_func_n_params(f);
  for (int i = 0; i < 3; i++) e->grid[i] = e->block[i] = 1;
  ts_visitor v = {.enter_stmt = collect_threads, .ctx = e};
  ts_stmt_walk(ts_func_body(f), &v);
  if (e->status) return e->status;
  int64_t threads = e->block[0] * e->block[1] * e->block[2];
  int max_threads = ts_target_max_threads_per_block(e->target);
  if (max_threads > 0 && threads > max_threads)
    return emit_fail(e, TS_EINVAL,
                     "code generation: %lld threads per block exceed the "
                     "target's limit of %d",
                     (long long)threads, max_threads);
  LLVMTypeRef gptr = LLVMPointerTypeInContext(e->ctx, 1);
  LLVMTypeRef *pt = malloc(sizeof *pt * (size_t)(n > 0 ? n : 1));
  for (int i = 0; i < n; i++) pt[i] = gptr;
  LLVMTypeRef fty =
      LLVMFunctionType(LLVMVoidTypeInContext(e->ctx), pt, (unsigned)n, 0);
  LLVMValueRef fn = LLVMAddFunction(e->mod, entry, fty);
  set_fn_attrs(e, fn);
  for (int i = 0; i < n; i++) {
    add_enum_attr(e, fn, (unsigned)i + 1, "noalias", 0);
    int align = ts_buffer_align(ts_func_param(f, i));
    if (align > 0 && (align & (align - 1)) == 0)
      add_enum_attr(e, fn, (unsigned)i + 1, "align", (uint64_t)align);
  }
  emit_fn cf = {.fn = fn, .vals = ts_node_map_create()};
  cf.alloca_bb = LLVMAppendBasicBlockInContext(e->ctx, fn, "entry");
  for (int i = 0; i < n; i++)
    ts_node_map_put(cf.vals, ts_func_param(f, i),
                    LLVMGetParam(fn, (unsigned)i));
  e->cur = &cf;
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(e->ctx, fn, "body");
  LLVMPositionBuilderAtEnd(e->b, cf.alloca_bb);
  LLVMBuildBr(e->b, body);
  LLVMPositionBuilderAtEnd(e->b, body);
  st(e, ts_func_body(f));
  LLVMBuildRetVoid(e->b);
  if (cf.fail_bb) { /* no runtime status on the GPU: failures just return */
    LLVMBasicBlockRef last = LLVMGetInsertBlock(e->b);
    (void)last;
  }
  ts_node_map_destroy(cf.vals);
  e->cur = NULL;
  free(pt);
  LLVMValueRef md[3] = {fn, LLVMMDStringInContext(e->ctx, "kernel", 6),
                        LLVMConstInt(i32t(e), 1, 0)};
  LLVMAddNamedMetadataOperand(e->mod, "nvvm.annotations",
                              LLVMMDNodeInContext(e->ctx, md, 3));
  LLVMValueRef md2[3] = {fn, LLVMMDStringInContext(e->ctx, "maxntidx", 8),
                         LLVMConstInt(i32t(e), (unsigned long long)threads, 0)};
  LLVMAddNamedMetadataOperand(e->mod, "nvvm.annotations",
                              LLVMMDNodeInContext(e->ctx, md2, 3));
  return e->status;
}

int emit_kernel(emitter *e, const ts_func *f, const char *entry) {
  int n = ts_func_n_params(f);
  e->entry = entry;
  if (e->cuda) return emit_cuda_kernel(e, f, entry);
  /* compute(ptr noalias p0, ..., ptr rt): the body. */
  LLVMTypeRef *pt = malloc(sizeof *pt * (size_t)(n + 1));
  for (int i = 0; i <= n; i++) pt[i] = ptrt(e);
  char name[256];
  snprintf(name, sizeof name, "%s_compute", entry);
  LLVMTypeRef cty = LLVMFunctionType(i32t(e), pt, (unsigned)n + 1, 0);
  LLVMValueRef compute = LLVMAddFunction(e->mod, name, cty);
  LLVMSetLinkage(compute, LLVMInternalLinkage);
  set_fn_attrs(e, compute);
  for (int i = 0; i < n; i++) {
    ts_buffer *b = ts_func_param(f, i);
    add_enum_attr(e, compute, (unsigned)i + 1, "noalias", 0);
    add_enum_attr(e, compute, (unsigned)i + 1, "nocapture", 0);
    int align = ts_buffer_align(b);
    if (align > 0 && (align & (align - 1)) == 0)
      add_enum_attr(e, compute, (unsigned)i + 1, "align", (uint64_t)align);
  }
  emit_fn cf = {.fn = compute, .vals = ts_node_map_create()};
  cf.alloca_bb = LLVMAppendBasicBlockInContext(e->ctx, compute, "entry");
  cf.rt = LLVMGetParam(compute, (unsigned)n);
  for (int i = 0; i < n; i++)
    ts_node_map_put(cf.vals, ts_func_param(f, i),
                    LLVMGetParam(compute, (unsigned)i));
  e->cur = &cf;
  LLVMBasicBlockRef body =
      LLVMAppendBasicBlockInContext(e->ctx, compute, "body");
  LLVMPositionBuilderAtEnd(e->b, cf.alloca_bb);
  LLVMBuildBr(e->b, body);
  LLVMPositionBuilderAtEnd(e->b, body);
  st(e, ts_func_body(f));
  LLVMBuildRet(e->b, LLVMConstInt(i32t(e), 0, 0));
  ts_node_map_destroy(cf.vals);
  e->cur = NULL;

  /* entry(ptr args, ptr rt): unpack and call compute. */
  LLVMTypeRef ept[2] = {ptrt(e), ptrt(e)};
  LLVMTypeRef ety = LLVMFunctionType(i32t(e), ept, 2, 0);
  LLVMValueRef ef = LLVMAddFunction(e->mod, entry, ety);
  set_fn_attrs(e, ef);
  LLVMPositionBuilderAtEnd(e->b,
                           LLVMAppendBasicBlockInContext(e->ctx, ef, "entry"));
  LLVMValueRef *args = malloc(sizeof *args * (size_t)(n + 1));
  for (int i = 0; i < n; i++) {
    LLVMValueRef idx = LLVMConstInt(i64t(e), (unsigned)i, 0);
    LLVMValueRef slot =
        LLVMBuildInBoundsGEP2(e->b, ptrt(e), LLVMGetParam(ef, 0), &idx, 1, "");
    args[i] = LLVMBuildLoad2(e->b, ptrt(e), slot, "");
  }
  args[n] = LLVMGetParam(ef, 1);
  LLVMValueRef r =
      LLVMBuildCall2(e->b, cty, compute, args, (unsigned)n + 1, "");
  LLVMBuildRet(e->b, r);
  free(args);
  free(pt);
  return e->status;
}
