/*
 * emit_math.c — LLVM IR emission of the IR's built-in math intrinsics (exp,
 * log, sqrt, tanh, erf, ...): LLVM intrinsics where the target has them, and
 * replacements of libm where it has none or where a libm call would keep a
 * loop from being vectorized: a float32 exp polynomial, tanh and erf through
 * exp, the target family's own versions (emit_gpu_math: the NVVM
 * approximate exp2/log2), and libm lane by lane as the last resort.
 */
#include "codegen/emit_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Calls a libm function lane by lane (tanh, erf). */
static LLVMValueRef libm_per_lane(emitter *e, const char *f32name,
                                  const char *f64name, LLVMValueRef v,
                                  ts_dtype t) {
  bool dbl = t.code == TS_DT_FLOAT && t.bits == 64;
  LLVMTypeRef st = dbl ? LLVMDoubleTypeInContext(e->ctx) : emit_f32t(e);
  LLVMTypeRef fty = LLVMFunctionType(st, &st, 1, 0);
  LLVMValueRef fn = emit_extern_fn(e, dbl ? f64name : f32name, fty);
  if (t.lanes == 1) return LLVMBuildCall2(e->b, fty, fn, &v, 1, "");
  LLVMValueRef r = LLVMGetUndef(LLVMTypeOf(v));
  for (int l = 0; l < t.lanes; l++) {
    LLVMValueRef lane = LLVMConstInt(emit_i32t(e), (unsigned)l, 0);
    LLVMValueRef x = LLVMBuildExtractElement(e->b, v, lane, "");
    LLVMValueRef y = LLVMBuildCall2(e->b, fty, fn, &x, 1, "");
    r = LLVMBuildInsertElement(e->b, r, y, lane, "");
  }
  return r;
}

LLVMValueRef emit_const_fp(LLVMTypeRef t, double v) {
  if (LLVMGetTypeKind(t) == LLVMVectorTypeKind) {
    unsigned n = LLVMGetVectorSize(t);
    LLVMValueRef s = LLVMConstReal(LLVMGetElementType(t), v);
    LLVMValueRef buf[64];
    LLVMValueRef *elems = n <= 64 ? buf : ts_malloc(sizeof *elems * n);
    if (!elems) return LLVMGetUndef(t); /* out of memory (counted) */
    for (unsigned i = 0; i < n; i++) elems[i] = s;
    LLVMValueRef r = LLVMConstVector(elems, n);
    if (elems != buf) free(elems);
    return r;
  }
  return LLVMConstReal(t, v);
}

/* a * b + c, which LLVM may fuse into one multiply-add */
static LLVMValueRef fma_c(emitter *e, LLVMValueRef a, LLVMValueRef b,
                          LLVMValueRef c) {
  return emit_contract(
      LLVMBuildFAdd(e->b, emit_contract(LLVMBuildFMul(e->b, a, b, "")), c, ""));
}

/* exp of a float32 scalar or vector without libm (which LLVM would call
 * lane by lane, and which keeps a loop around a scalar exp from being
 * vectorized): x = n ln2 + r with n = round(x log2 e), exp(r) by Cephes'
 * degree-6 polynomial, 2^n built in the exponent bits. About 1 ulp.
 *
 * It is the inner loop of softmax, sigmoid, GELU and tanh, so every
 * instruction counts (a vector of them is bound by the vector ALUs'
 * throughput): 19 vector operations, where a formulation with NaN-exact
 * min/max (llvm.minnum: a compare and a blend each on x86), a float-to-int
 * conversion and a scale in two factors took 29.
 *  - x is clamped above by a compare-select that passes a NaN through
 *    (one vminps), so NaN stays NaN through the arithmetic;
 *  - n comes from adding 1.5 * 2^23: the sum's low mantissa bits are n
 *    (rounded to nearest), so n = sum - 1.5 * 2^23 exactly and the scale's
 *    exponent field is (bits(sum) + 126) << 23 (bits(1.5 * 2^23) << 23 is
 *    0 modulo 2^32): no conversion; neither step may be reassociated, so
 *    they carry no fast-math flags;
 *  - 2^n = 2 * 2^(n-1): n reaches 128 at the top of the range (exp(88.72)
 *    is the largest float), 2^(n-1) does not overflow, and the result
 *    overflows to inf past it as it should;
 *  - below -86.98 (where 2^(n-1) would leave the normal range) the result
 *    is 0, -inf included: the exact value there is below 1.9e-38, within a
 *    factor 1.6 of the smallest normal float (what flush-to-zero gives). */
/* On AVX-512, vectors the code generator emits itself are scaled by
 * vscalefps instead (16 vector operations where the exponent-bits form
 * takes 19: no doubling, integer add, shift, multiply and range select,
 * one more clamp), and results below -86.98 go through the subnormals.
 * Default schedules, AVX-512 Xeon, 2 threads, two alternating rounds, x
 * oneDNN, exponent bits -> vscalefps: softmax 4096 x 1024 1.11/1.14 ->
 * 1.29/1.25, 12288 x 128 1.24/1.26 -> 1.42/1.46; sigmoid over 1024 x 1024
 * 0.189 -> 0.169 ms. A loop LLVM's vectorizer widens later (a scalar exp
 * in the IR) keeps the exponent-bits form: LLVM 19 lowers llvm.ldexp to
 * a libm call per lane.
 *
 * The width of AVX-512's vscalefps (y * 2^floor(n), overflowing to inf
 * and underflowing through the subnormals to 0 as the exact product does)
 * that splits a vector of `lanes` float32 evenly: 16, 8 with AVX512VL, or
 * 0 (not available, or not a whole number of them). */
static unsigned scalef_width(emitter *e, unsigned lanes) {
  if (!ts_target_has_feature(e->target, "avx512f")) return 0;
  if (lanes % 16 == 0) return 16;
  if (lanes % 8 == 0 && ts_target_has_feature(e->target, "avx512vl")) return 8;
  return 0;
}

/* y * 2^n for float32 vectors y and n (n integer-valued) by vscalefps,
 * `w` lanes per call (scalef_width). */
static LLVMValueRef scalef(emitter *e, LLVMValueRef y, LLVMValueRef n,
                           unsigned w) {
  LLVMTypeRef ty = LLVMTypeOf(y);
  unsigned lanes = LLVMGetVectorSize(ty);
  LLVMTypeRef wt = LLVMVectorType(emit_f32t(e), w);
  LLVMTypeRef i32 = emit_i32t(e);
  const char *name = w == 16 ? "llvm.x86.avx512.mask.scalef.ps.512"
                             : "llvm.x86.avx512.mask.scalef.ps.256";
  LLVMValueRef parts[64], idx[64];
  for (unsigned c = 0; c < lanes / w; c++) {
    for (unsigned l = 0; l < w; l++) idx[l] = LLVMConstInt(i32, c * w + l, 0);
    LLVMValueRef sel = LLVMConstVector(idx, w);
    LLVMValueRef a[5] = {
        LLVMBuildShuffleVector(e->b, y, LLVMGetUndef(ty), sel, ""),
        LLVMBuildShuffleVector(e->b, n, LLVMGetUndef(ty), sel, ""),
        LLVMGetUndef(wt),
        LLVMConstInt(w == 16 ? LLVMInt16TypeInContext(e->ctx)
                             : LLVMInt8TypeInContext(e->ctx),
                     w == 16 ? 0xffffu : 0xffu, 0),
        LLVMConstInt(i32, 4, 0) /* the current rounding mode (only the
                                   512-bit form takes one) */};
    parts[c] = emit_call_fixed(e, name, a, w == 16 ? 5 : 4);
    if (!parts[c]) return NULL;
  }
  /* concatenated pairwise back to `lanes` */
  for (unsigned n_p = lanes / w, pw = w; n_p > 1; n_p /= 2, pw *= 2)
    for (unsigned c = 0; c < n_p / 2; c++) {
      for (unsigned l = 0; l < 2 * pw; l++) idx[l] = LLVMConstInt(i32, l, 0);
      parts[c] = LLVMBuildShuffleVector(e->b, parts[2 * c], parts[2 * c + 1],
                                        LLVMConstVector(idx, 2 * pw), "");
    }
  return parts[0];
}

static LLVMValueRef exp_f32(emitter *e, LLVMTypeRef ty, LLVMValueRef x) {
  LLVMBuilderRef B = e->b;
  bool vec = LLVMGetTypeKind(ty) == LLVMVectorTypeKind;
  unsigned lanes = vec ? LLVMGetVectorSize(ty) : 1;
  unsigned sw = vec && lanes <= 64 ? scalef_width(e, lanes) : 0;
  LLVMTypeRef ity = vec ? LLVMVectorType(emit_i32t(e), lanes) : emit_i32t(e);
  LLVMValueRef hi = emit_const_fp(ty, 88.72283935546875);
  LLVMValueRef xc =
      LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOLT, hi, x, ""), hi, x, "");
  if (sw) {
    /* clamped below too (a NaN passes), so that -inf gives 0 and not
     * inf - inf: exp(-104) is below half the smallest subnormal */
    LLVMValueRef lo = emit_const_fp(ty, -104.0);
    xc = LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOLT, xc, lo, ""), lo, xc,
                         "");
  }
  LLVMValueRef magic = emit_const_fp(ty, 12582912.0); /* 1.5 * 2^23 */
  LLVMValueRef fa[3] = {xc, emit_const_fp(ty, 1.4426950408889634), magic};
  LLVMValueRef t = emit_call_intrinsic(e, "llvm.fmuladd", &ty, 1, fa, 3);
  LLVMValueRef n = LLVMBuildFSub(B, t, magic, "");
  LLVMValueRef r = fma_c(e, n, emit_const_fp(ty, -0.693359375), xc);
  r = fma_c(e, n, emit_const_fp(ty, 2.12194440e-4), r);
  /* c5 + c4 r + ... + c0 r^5 by Estrin's scheme: three independent
   * pairs, then r^2 and r^4 (a chain of 4 multiply-adds, not 6: in an
   * epilogue the exp is a latency chain) */
  static const double c[6] = {1.9875691500e-4, 1.3981999507e-3,
                              8.3334519073e-3, 4.1665795894e-2,
                              1.6666665459e-1, 5.0000001201e-1};
  LLVMValueRef z = emit_contract(LLVMBuildFMul(B, r, r, ""));
  LLVMValueRef q01 = fma_c(e, emit_const_fp(ty, c[0]), r,
                           emit_const_fp(ty, c[1])); /* c0 r + c1 */
  LLVMValueRef q23 =
      fma_c(e, emit_const_fp(ty, c[2]), r, emit_const_fp(ty, c[3]));
  LLVMValueRef q45 =
      fma_c(e, emit_const_fp(ty, c[4]), r, emit_const_fp(ty, c[5]));
  LLVMValueRef z2 = emit_contract(LLVMBuildFMul(B, z, z, ""));
  LLVMValueRef p = fma_c(e, q01, z2, fma_c(e, q23, z, q45));
  LLVMValueRef y =
      LLVMBuildFAdd(B, fma_c(e, p, z, r), emit_const_fp(ty, 1.0), "");
  if (sw) return scalef(e, y, n, sw);
  LLVMValueRef y2 = LLVMBuildFAdd(B, y, y, "");
  LLVMValueRef bits = LLVMBuildAdd(
      B, LLVMBuildBitCast(B, t, ity, ""),
      emit_splat(e, LLVMConstInt(emit_i32t(e), 126, 0), (int)lanes), "");
  LLVMValueRef scale = LLVMBuildBitCast(
      B,
      LLVMBuildShl(B, bits,
                   emit_splat(e, LLVMConstInt(emit_i32t(e), 23, 0), (int)lanes),
                   ""),
      ty, "");
  LLVMValueRef res = LLVMBuildFMul(B, y2, scale, "");
  LLVMValueRef tiny =
      LLVMBuildFCmp(B, LLVMRealOLT, x, emit_const_fp(ty, -86.98), "");
  return LLVMBuildSelect(B, tiny, emit_const_fp(ty, 0.0), res, "");
}

/* exp(x) on CPUs: a vectorizable polynomial for float32 (scalars too, so
 * the loop vectorizer can widen a loop around it), llvm.exp otherwise. */
LLVMValueRef emit_cpu_exp(emitter *e, LLVMTypeRef ty, LLVMValueRef x) {
  LLVMTypeRef el =
      LLVMGetTypeKind(ty) == LLVMVectorTypeKind ? LLVMGetElementType(ty) : ty;
  if (LLVMGetTypeKind(el) == LLVMFloatTypeKind) return exp_f32(e, ty, x);
  return emit_call_intrinsic(e, "llvm.exp", &ty, 1, &x, 1);
}

/* log (base 0: natural) or log2 (base 2) of a float32 scalar or vector
 * without libm, which LLVM calls lane by lane for a vector (Softplus,
 * Mish, LogSoftmax's log): x = m 2^e with m in [sqrt(1/2), sqrt(2)),
 * log(m) = f - f^2/2 + f^3 P(f) for f = m - 1 (Cephes' logf, degree 8),
 * e ln 2 added in two parts. Within 2 ulp of logf; log2 of a power of two
 * is exact (f = 0). Denormals are scaled by 2^23 first; x < 0 gives NaN,
 * +-0 -inf, +inf +inf, NaN NaN. */
static LLVMValueRef log_f32(emitter *e, LLVMTypeRef ty, LLVMValueRef x,
                            int base) {
  LLVMBuilderRef B = e->b;
  bool vec = LLVMGetTypeKind(ty) == LLVMVectorTypeKind;
  int lanes = vec ? (int)LLVMGetVectorSize(ty) : 1;
  LLVMTypeRef ity =
      vec ? LLVMVectorType(emit_i32t(e), (unsigned)lanes) : emit_i32t(e);
#define ICONST(v) emit_splat(e, LLVMConstInt(emit_i32t(e), (v), 0), lanes)
  LLVMValueRef small =
      LLVMBuildFCmp(B, LLVMRealOLT, x, emit_const_fp(ty, 1.17549435e-38), "");
  LLVMValueRef xs = LLVMBuildSelect(
      B, small, LLVMBuildFMul(B, x, emit_const_fp(ty, 8388608.0), ""), x, "");
  LLVMValueRef bits = LLVMBuildBitCast(B, xs, ity, "");
  LLVMValueRef ebits =
      LLVMBuildAnd(B, LLVMBuildLShr(B, bits, ICONST(23), ""), ICONST(0xff), "");
  LLVMValueRef m = LLVMBuildBitCast(
      B,
      LLVMBuildOr(B, LLVMBuildAnd(B, bits, ICONST(0x007fffff), ""),
                  ICONST(0x3f000000), ""),
      ty, ""); /* in [0.5, 1) */
  LLVMValueRef ef =
      LLVMBuildSIToFP(B, LLVMBuildSub(B, ebits, ICONST(126), ""), ty, "");
#undef ICONST
  ef = LLVMBuildFAdd(B, ef,
                     LLVMBuildSelect(B, small, emit_const_fp(ty, -23.0),
                                     emit_const_fp(ty, 0.0), ""),
                     "");
  LLVMValueRef lo = LLVMBuildFCmp(B, LLVMRealOLT, m,
                                  emit_const_fp(ty, 0.70710678118654752), "");
  ef = LLVMBuildSelect(B, lo, LLVMBuildFSub(B, ef, emit_const_fp(ty, 1.0), ""),
                       ef, "");
  LLVMValueRef one = emit_const_fp(ty, 1.0);
  LLVMValueRef f = LLVMBuildFSub(
      B, LLVMBuildSelect(B, lo, LLVMBuildFAdd(B, m, m, ""), m, ""), one,
      ""); /* exact */
  static const double c[9] = {
      7.0376836292e-2,  -1.1514610310e-1, 1.1676998740e-1,
      -1.2420140846e-1, 1.4249322787e-1,  -1.6668057665e-1,
      2.0000714765e-1,  -2.4999993993e-1, 3.3333331174e-1};
  LLVMValueRef p = emit_const_fp(ty, c[0]);
  for (int i = 1; i < 9; i++) p = fma_c(e, p, f, emit_const_fp(ty, c[i]));
  LLVMValueRef z = emit_contract(LLVMBuildFMul(B, f, f, ""));
  LLVMValueRef y = emit_contract(
      LLVMBuildFMul(B, emit_contract(LLVMBuildFMul(B, p, f, "")), z, ""));
  LLVMValueRef r;
  if (base == 2) {
    /* e + (f + y - z/2) log2(e) */
    y = fma_c(e, z, emit_const_fp(ty, -0.5), y);
    r = fma_c(e, LLVMBuildFAdd(B, f, y, ""),
              emit_const_fp(ty, 1.4426950408889634), ef);
  } else {
    y = fma_c(e, ef, emit_const_fp(ty, -2.12194440e-4), y);
    y = fma_c(e, z, emit_const_fp(ty, -0.5), y);
    r = LLVMBuildFAdd(B, f, y, "");
    r = fma_c(e, ef, emit_const_fp(ty, 0.693359375), r);
  }
  LLVMValueRef inf = emit_const_fp(ty, INFINITY);
  r = LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOEQ, x, inf, ""), inf, r, "");
  r = LLVMBuildSelect(
      B, LLVMBuildFCmp(B, LLVMRealOEQ, x, emit_const_fp(ty, 0.0), ""),
      emit_const_fp(ty, -INFINITY), r, "");
  r = LLVMBuildSelect(
      B, LLVMBuildFCmp(B, LLVMRealOLT, x, emit_const_fp(ty, 0.0), ""),
      emit_const_fp(ty, NAN), r, "");
  return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealUNO, x, x, ""), x, r, "");
}

/* tanh without libm (vectors, GPUs): tanh(x) = 1 - 2 / (exp(2x) + 1). */
static LLVMValueRef tanh_by_exp(emitter *e, LLVMValueRef x) {
  LLVMTypeRef ty = LLVMTypeOf(x);
  LLVMValueRef x2 = LLVMBuildFMul(e->b, x, emit_const_fp(ty, 2.0), "");
  LLVMValueRef ex2 = e->hooks->exp(e, ty, x2);
  LLVMValueRef den = LLVMBuildFAdd(e->b, ex2, emit_const_fp(ty, 1.0), "");
  return LLVMBuildFSub(e->b, emit_const_fp(ty, 1.0),
                       LLVMBuildFDiv(e->b, emit_const_fp(ty, 2.0), den, ""),
                       "");
}

/* erf by Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7):
 * erf(x) = sign(x) (1 - (a1 t + a2 t^2 + ... + a5 t^5) exp(-x^2)),
 * t = 1 / (1 + p |x|). */
static LLVMValueRef erf_by_polynomial(emitter *e, LLVMValueRef x) {
  LLVMTypeRef ty = LLVMTypeOf(x);
  static const double a[5] = {0.254829592, -0.284496736, 1.421413741,
                              -1.453152027, 1.061405429};
  LLVMValueRef ax = emit_call_intrinsic(e, "llvm.fabs", &ty, 1, &x, 1);
  LLVMValueRef t = LLVMBuildFDiv(
      e->b, emit_const_fp(ty, 1.0),
      LLVMBuildFAdd(e->b, emit_const_fp(ty, 1.0),
                    LLVMBuildFMul(e->b, emit_const_fp(ty, 0.3275911), ax, ""),
                    ""),
      "");
  /* t (a0 + a1 t + a2 t^2 + a3 t^3 + a4 t^4) by Estrin's scheme (a shorter
   * latency chain than Horner's, beside the exp that runs in parallel) */
  LLVMValueRef t2 = emit_contract(LLVMBuildFMul(e->b, t, t, ""));
  LLVMValueRef q01 =
      fma_c(e, emit_const_fp(ty, a[1]), t, emit_const_fp(ty, a[0]));
  LLVMValueRef q23 =
      fma_c(e, emit_const_fp(ty, a[3]), t, emit_const_fp(ty, a[2]));
  LLVMValueRef t4 = emit_contract(LLVMBuildFMul(e->b, t2, t2, ""));
  LLVMValueRef poly =
      fma_c(e, emit_const_fp(ty, a[4]), t4, fma_c(e, q23, t2, q01));
  poly = emit_contract(LLVMBuildFMul(e->b, poly, t, ""));
  LLVMValueRef nx2 = LLVMBuildFNeg(e->b, LLVMBuildFMul(e->b, x, x, ""), "");
  LLVMValueRef ex = e->hooks->exp(e, ty, nx2);
  LLVMValueRef y = LLVMBuildFSub(e->b, emit_const_fp(ty, 1.0),
                                 LLVMBuildFMul(e->b, poly, ex, ""), "");
  LLVMValueRef args[2] = {y, x};
  return emit_call_intrinsic(e, "llvm.copysign", &ty, 1, args, 2);
}

/* The value of a float constant, scalar or vector with every lane equal;
 * false for anything else. */
static bool const_uniform(LLVMValueRef v, double *out) {
  if (!LLVMIsConstant(v)) return false;
  LLVMTypeRef ty = LLVMTypeOf(v);
  unsigned n =
      LLVMGetTypeKind(ty) == LLVMVectorTypeKind ? LLVMGetVectorSize(ty) : 0;
  LLVMValueRef first = n ? LLVMGetAggregateElement(v, 0) : v;
  if (!first || !LLVMIsAConstantFP(first)) return false;
  LLVMBool loses = 0;
  double x = LLVMConstRealGetDouble(first, &loses);
  for (unsigned i = 1; i < n; i++) {
    LLVMValueRef el = LLVMGetAggregateElement(v, i);
    if (!el || !LLVMIsAConstantFP(el) ||
        LLVMConstRealGetDouble(el, &loses) != x)
      return false;
  }
  *out = x;
  return true;
}

/* pow(x, c) for a constant c of 1 to 4 as multiplies: LLVM lowers a vector
 * llvm.pow to libm's powf lane by lane (GPT-2's GELU, x^3, took 5 % of the
 * model that way). Within 2 ulp of powf (each multiply rounds once). NULL
 * for other exponents. */
static LLVMValueRef pow_by_multiplies(emitter *e, LLVMValueRef x,
                                      LLVMValueRef c) {
  double k;
  if (!const_uniform(c, &k) || !(k == 1 || k == 2 || k == 3 || k == 4))
    return NULL;
  if (k == 1) return x;
  LLVMValueRef x2 = LLVMBuildFMul(e->b, x, x, "");
  if (k == 2) return x2;
  if (k == 3) return LLVMBuildFMul(e->b, x2, x, "");
  return LLVMBuildFMul(e->b, x2, x2, "");
}

/* The IR's built-in math intrinsics on the evaluated arguments args[0..n)
 * of a call of dtype t. */
LLVMValueRef emit_math_call(emitter *e, const char *name, ts_dtype t,
                            LLVMValueRef *args, int n) {
  if (!strcmp(name, "abs") && !ts_dtype_is_float(t)) {
    if (!ts_dtype_is_signed(t)) return args[0];
    LLVMTypeRef ty = LLVMTypeOf(args[0]);
    LLVMValueRef a2[2] = {args[0],
                          LLVMConstInt(LLVMInt1TypeInContext(e->ctx), 0, 0)};
    return emit_call_intrinsic(e, "llvm.abs", &ty, 1, a2, 2);
  }
  if (!ts_dtype_is_float(t)) {
    emit_fail(e, TS_EINVAL, "code generation: '%s' needs floating-point values",
              name);
    return emit_undef(e, t);
  }
  for (int i = 0; i < n; i++) args[i] = emit_to_work(e, args[i], t);
  LLVMTypeRef ty = LLVMTypeOf(args[0]);
  if (!strcmp(name, "exp"))
    return emit_from_work(e, e->hooks->exp(e, ty, args[0]), t);
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
  if (e->hooks->math) r = e->hooks->math(e, name, ty, args);
  if (!r && !strcmp(name, "pow") && n == 2)
    r = pow_by_multiplies(e, args[0], args[1]);
  bool f32 = LLVMGetTypeKind(LLVMGetTypeKind(ty) == LLVMVectorTypeKind
                                 ? LLVMGetElementType(ty)
                                 : ty) == LLVMFloatTypeKind;
  if (!r && f32 && !strcmp(name, "log")) r = log_f32(e, ty, args[0], 0);
  if (!r && f32 && !strcmp(name, "log2")) r = log_f32(e, ty, args[0], 2);
  for (size_t i = 0; i < sizeof direct / sizeof direct[0] && !r; i++)
    if (!strcmp(name, direct[i].name))
      r = emit_call_intrinsic(e, direct[i].llvm, &ty, 1, args, n);
  if (!r && !strcmp(name, "rsqrt")) {
    LLVMValueRef s = emit_call_intrinsic(e, "llvm.sqrt", &ty, 1, args, 1);
    r = LLVMBuildFDiv(e->b, emit_const_fp(ty, 1.0), s, "");
  }
  if (!r && !strcmp(name, "sigmoid")) {
    LLVMValueRef neg = LLVMBuildFNeg(e->b, args[0], "");
    LLVMValueRef ex1 = e->hooks->exp(e, ty, neg);
    LLVMValueRef den = LLVMBuildFAdd(e->b, emit_const_fp(ty, 1.0), ex1, "");
    r = LLVMBuildFDiv(e->b, emit_const_fp(ty, 1.0), den, "");
  }
  ts_dtype wt = emit_is_half(t) ? ts_dtype_with_lanes(TS_FLOAT32, t.lanes) : t;
  /* vectors (and targets without libm) use vectorizable formulas */
  bool vec_math = !e->hooks->libm || t.lanes > 1;
  if (!r && vec_math && !strcmp(name, "tanh")) r = tanh_by_exp(e, args[0]);
  if (!r && vec_math && !strcmp(name, "erf")) r = erf_by_polynomial(e, args[0]);
  if (!r && !strcmp(name, "tanh"))
    r = libm_per_lane(e, "tanhf", "tanh", args[0], wt);
  if (!r && !strcmp(name, "erf"))
    r = libm_per_lane(e, "erff", "erf", args[0], wt);
  if (!r) {
    emit_fail(e, TS_EUNSUPPORTED,
              "code generation: intrinsic '%s' is not supported", name);
    return emit_undef(e, t);
  }
  return emit_from_work(e, r, t);
}
