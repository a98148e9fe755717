/*
 * convert.c — conversions between float32 and the 16-bit float formats
 * (bfloat16, float16) as LLVM IR the code generator builds itself.
 *
 * LLVM lowers `fptrunc float to bfloat` natively only with AVX512-BF16, and
 * `fpext`/`fptrunc` between half and float only with F16C; without them it
 * emits calls of compiler-rt helpers (__truncsfbf2, __truncsfhf2,
 * __extendhfsf2) that a JIT-loaded kernel cannot resolve. So where the target
 * lacks the instruction, the conversion is written out here as integer and
 * float operations on the bit patterns, for scalars and vectors alike, with
 * exactly the rounding of tir/dtype.c (round to nearest even; NaN stays a
 * quiet NaN with its sign; float16 overflow gives infinity, underflow a
 * signed zero or a subnormal). Where the target has the instruction, LLVM's
 * own fpext/fptrunc is used (it rounds the same way) — except float32 ->
 * bfloat16 on a CPU: AVX512-BF16's VCVTNEPS2BF16 treats subnormal inputs as
 * zero (0x807ffffc gives 0x8000, not 0x8080), so a kernel's output would
 * depend on the CPU it ran on; the conversion written out here costs a few
 * integer operations per element and gives the same bits everywhere.
 */
#include "codegen/target_internal.h"

/* A constant of integer type `ity` (scalar or vector) with value v. */
static LLVMValueRef int_const(LLVMTypeRef ity, uint64_t v) {
  if (LLVMGetTypeKind(ity) == LLVMVectorTypeKind) {
    LLVMTypeRef el = LLVMGetElementType(ity);
    unsigned n = LLVMGetVectorSize(ity);
    LLVMValueRef one = LLVMConstInt(el, v, 0);
    LLVMValueRef lanes[64];
    for (unsigned i = 0; i < n && i < 64; i++) lanes[i] = one;
    return LLVMConstVector(lanes, n);
  }
  return LLVMConstInt(ity, v, 0);
}

static LLVMValueRef float_const(LLVMTypeRef fty, double v) {
  if (LLVMGetTypeKind(fty) == LLVMVectorTypeKind) {
    LLVMTypeRef el = LLVMGetElementType(fty);
    unsigned n = LLVMGetVectorSize(fty);
    LLVMValueRef one = LLVMConstReal(el, v);
    LLVMValueRef lanes[64];
    for (unsigned i = 0; i < n && i < 64; i++) lanes[i] = one;
    return LLVMConstVector(lanes, n);
  }
  return LLVMConstReal(fty, v);
}

/* The type with the element `el` and the lane count of `like`. */
static LLVMTypeRef same_lanes(LLVMTypeRef el, LLVMTypeRef like) {
  if (LLVMGetTypeKind(like) == LLVMVectorTypeKind)
    return LLVMVectorType(el, LLVMGetVectorSize(like));
  return el;
}

/* float32 bits -> bfloat16 bits (i32 lanes holding the 16-bit result):
 * NaN keeps its top half with the quiet bit set; everything else rounds to
 * nearest even by adding 0x7fff plus the lowest kept bit. */
static LLVMValueRef bits_to_bf16(emitter *e, LLVMValueRef x) {
  LLVMBuilderRef B = e->b;
  LLVMTypeRef it = LLVMTypeOf(x);
  LLVMValueRef hi = LLVMBuildLShr(B, x, int_const(it, 16), "");
  LLVMValueRef abs = LLVMBuildAnd(B, x, int_const(it, 0x7fffffff), "");
  LLVMValueRef nan =
      LLVMBuildICmp(B, LLVMIntUGT, abs, int_const(it, 0x7f800000), "");
  LLVMValueRef quiet = LLVMBuildOr(B, hi, int_const(it, 0x40), "");
  LLVMValueRef odd = LLVMBuildAnd(B, hi, int_const(it, 1), "");
  LLVMValueRef bias = LLVMBuildAdd(B, odd, int_const(it, 0x7fff), "");
  LLVMValueRef rounded =
      LLVMBuildLShr(B, LLVMBuildAdd(B, x, bias, ""), int_const(it, 16), "");
  return LLVMBuildSelect(B, nan, quiet, rounded, "");
}

/* float32 bits -> float16 bits (i32 lanes), round to nearest even. Values at
 * or above 2^16 are infinity (NaN a quiet NaN); below 2^-14 the magnitude is
 * added to a float whose ulp is float16's smallest subnormal, so the float
 * adder rounds it; normal values drop 13 mantissa bits with a bias of 0xfff
 * plus the lowest kept bit, a carry moving into the exponent (and up to
 * infinity from 65520 on). */
static LLVMValueRef bits_to_f16(emitter *e, LLVMValueRef x) {
  LLVMBuilderRef B = e->b;
  LLVMTypeRef it = LLVMTypeOf(x);
  LLVMTypeRef ft = same_lanes(LLVMFloatTypeInContext(e->ctx), it);
  LLVMValueRef sign = LLVMBuildAnd(B, x, int_const(it, 0x80000000u), "");
  LLVMValueRef a = LLVMBuildXor(B, x, sign, "");
  /* special: overflow, infinity, NaN */
  LLVMValueRef big =
      LLVMBuildICmp(B, LLVMIntUGE, a, int_const(it, (127u + 16) << 23), "");
  LLVMValueRef nan =
      LLVMBuildICmp(B, LLVMIntUGT, a, int_const(it, 0x7f800000), "");
  LLVMValueRef special =
      LLVMBuildSelect(B, nan, int_const(it, 0x7e00), int_const(it, 0x7c00), "");
  /* subnormal or zero results */
  const uint32_t magic_bits = ((127u - 15) + (23 - 10) + 1) << 23;
  LLVMValueRef small =
      LLVMBuildICmp(B, LLVMIntULT, a, int_const(it, 113u << 23), "");
  LLVMValueRef af = LLVMBuildBitCast(B, a, ft, "");
  LLVMValueRef sum = LLVMBuildFAdd(B, af, float_const(ft, 0x1p-1), "");
  LLVMValueRef sub = LLVMBuildSub(B, LLVMBuildBitCast(B, sum, it, ""),
                                  int_const(it, magic_bits), "");
  /* normal results */
  LLVMValueRef odd = LLVMBuildAnd(B, LLVMBuildLShr(B, a, int_const(it, 13), ""),
                                  int_const(it, 1), "");
  LLVMValueRef rebias = LLVMBuildAdd(
      B, a, int_const(it, (uint32_t)((15 - 127) * (1 << 23)) + 0xfffu), "");
  LLVMValueRef normal =
      LLVMBuildLShr(B, LLVMBuildAdd(B, rebias, odd, ""), int_const(it, 13), "");
  LLVMValueRef r = LLVMBuildSelect(B, small, sub, normal, "");
  r = LLVMBuildSelect(B, big, special, r, "");
  return LLVMBuildOr(B, r, LLVMBuildLShr(B, sign, int_const(it, 16), ""), "");
}

LLVMValueRef emit_f32_to_half(emitter *e, LLVMValueRef v, bool bf16) {
  LLVMTypeRef fty = LLVMTypeOf(v);
  LLVMTypeRef hel =
      bf16 ? LLVMBFloatTypeInContext(e->ctx) : LLVMHalfTypeInContext(e->ctx);
  LLVMTypeRef hty = same_lanes(hel, fty);
  if (e->hooks->native_half(e, bf16, true))
    return LLVMBuildFPTrunc(e->b, v, hty, "");
  LLVMTypeRef i32 = same_lanes(LLVMInt32TypeInContext(e->ctx), fty);
  LLVMTypeRef i16 = same_lanes(LLVMInt16TypeInContext(e->ctx), fty);
  LLVMValueRef x = LLVMBuildBitCast(e->b, v, i32, "");
  LLVMValueRef h = bf16 ? bits_to_bf16(e, x) : bits_to_f16(e, x);
  return LLVMBuildBitCast(e->b, LLVMBuildTrunc(e->b, h, i16, ""), hty, "");
}

LLVMValueRef emit_half_to_f32(emitter *e, LLVMValueRef v, bool bf16) {
  LLVMTypeRef hty = LLVMTypeOf(v);
  LLVMTypeRef fty = same_lanes(LLVMFloatTypeInContext(e->ctx), hty);
  if (e->hooks->native_half(e, bf16, false))
    return LLVMBuildFPExt(e->b, v, fty, "");
  LLVMBuilderRef B = e->b;
  LLVMTypeRef i32 = same_lanes(LLVMInt32TypeInContext(e->ctx), hty);
  LLVMTypeRef i16 = same_lanes(LLVMInt16TypeInContext(e->ctx), hty);
  LLVMValueRef h = LLVMBuildZExt(B, LLVMBuildBitCast(B, v, i16, ""), i32, "");
  if (bf16)
    return LLVMBuildBitCast(B, LLVMBuildShl(B, h, int_const(i32, 16), ""), fty,
                            "");
  /* float16: the exponent and mantissa moved to float's positions scale by
   * 2^112 into the right value (subnormals included); infinity and NaN
   * get float's all-ones exponent instead. */
  LLVMValueRef em =
      LLVMBuildShl(B, LLVMBuildAnd(B, h, int_const(i32, 0x7fff), ""),
                   int_const(i32, 13), "");
  LLVMValueRef scaled = LLVMBuildFMul(B, LLVMBuildBitCast(B, em, fty, ""),
                                      float_const(fty, 0x1p112), "");
  LLVMValueRef inf_nan = LLVMBuildICmp(
      B, LLVMIntEQ, LLVMBuildAnd(B, h, int_const(i32, 0x7c00), ""),
      int_const(i32, 0x7c00), "");
  LLVMValueRef special = LLVMBuildOr(B, em, int_const(i32, 0x7f800000), "");
  LLVMValueRef bits = LLVMBuildSelect(B, inf_nan, special,
                                      LLVMBuildBitCast(B, scaled, i32, ""), "");
  LLVMValueRef sign =
      LLVMBuildShl(B, LLVMBuildAnd(B, h, int_const(i32, 0x8000), ""),
                   int_const(i32, 16), "");
  return LLVMBuildBitCast(B, LLVMBuildOr(B, bits, sign, ""), fty, "");
}
