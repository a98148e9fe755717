/*
 * emit_intrin_x86.c — the x86 tensor intrinsics of the x86 family
 * (target_x86.c), the implementations tensorize calls: AVX512-VNNI dot
 * products (unsigned x signed, and signed x signed through a bias), AVX2's
 * exact 16-bit multiply-add pairs for int8 on hosts without VNNI, the
 * AVX512-BF16 dot product and AMX tile GEMMs (bf16, int8). Each checks the
 * CPU feature it needs on the target.
 */
#include "codegen/emit_internal.h"

#include <stdio.h>
#include <string.h>

static bool need_feature(emitter *e, const char *intrin, const char *feature) {
  if (ts_target_has_feature(e->target, feature)) return true;
  emit_fail(e, TS_EUNSUPPORTED,
            "code generation: %s needs the CPU feature '%s', which target '%s' "
            "does not have",
            intrin, feature, ts_target_str(e->target));
  return false;
}

/* Step s of a VNNI dot of `lanes` (16 or 8) lanes: A's four bytes at 4 s
 * splat to every lane (each byte xor-ed with 0x80 when bias is not NULL)
 * and B's 4 lanes bytes at 4 lanes s. */
static void vnni_step(emitter *e, LLVMValueRef *a, int s, int lanes,
                      LLVMValueRef bias, LLVMValueRef *av, LLVMValueRef *bv) {
  LLVMTypeRef i8 = LLVMInt8TypeInContext(e->ctx);
  LLVMValueRef aoff =
      LLVMConstInt(emit_i64t(e), (unsigned long long)(4 * s), 0);
  LLVMValueRef boff =
      LLVMConstInt(emit_i64t(e), (unsigned long long)(4 * lanes * s), 0);
  LLVMValueRef ap = LLVMBuildInBoundsGEP2(e->b, i8, a[1], &aoff, 1, "");
  LLVMValueRef bp = LLVMBuildInBoundsGEP2(e->b, i8, a[2], &boff, 1, "");
  LLVMValueRef a32 = emit_load_vec(e, emit_i32t(e), ap, 1);
  if (bias) a32 = LLVMBuildXor(e->b, a32, bias, "");
  *av = emit_splat(e, a32, lanes);
  *bv = emit_load_vec(e, LLVMVectorType(emit_i32t(e), (unsigned)lanes), bp, 1);
}

/* The shape of VNNI dot call `name` (tessera.vnni[_s8]_dot_<L>x<K>): its
 * lanes (16, or 8 with AVX512VL), its steps of 4 (K / 4), the LLVM
 * intrinsic; false, with the error set, when the target lacks a feature. */
static bool vnni_shape(emitter *e, const char *name, int *lanes, int *steps,
                       const char **llvm_name) {
  const char *shape = strrchr(name, '_');
  *lanes = shape && !strncmp(shape, "_8x", 3) ? 8 : 16;
  *steps = shape && strstr(shape, "x16") ? 4 : 1;
  *llvm_name = *lanes == 8 ? "llvm.x86.avx512.vpdpbusd.256"
                           : "llvm.x86.avx512.vpdpbusd.512";
  return need_feature(e, name, "avx512vnni") &&
         (*lanes == 16 || need_feature(e, name, "avx512vl"));
}

/* tessera.vnni_dot_16x4(&C int32[16], &A uint8[4], &B int8[16][4]) and
 * tessera.vnni_dot_16x16(&C int32[16], &A uint8[16], &B int8[4][16][4]),
 * and their 8-lane forms _8x4 and _8x16 (B int8[8][4], int8[4][8][4]):
 * C[j] += sum_k A[k] * B[j][k], vpdpbusd in `steps` steps of 4, the
 * accumulator kept in a register between them. */
static LLVMValueRef vnni_dot(emitter *e, ts_expr *x, LLVMValueRef *a) {
  const char *name = ts_expr_call_name(x), *op;
  int lanes, steps;
  if (!vnni_shape(e, name, &lanes, &steps, &op)) return NULL;
  LLVMTypeRef vt = LLVMVectorType(emit_i32t(e), (unsigned)lanes);
  LLVMValueRef c = emit_load_vec(e, vt, a[0], 4);
  for (int s = 0; s < steps && c; s++) {
    LLVMValueRef args[3] = {c, NULL, NULL};
    vnni_step(e, a, s, lanes, NULL, &args[1], &args[2]);
    c = emit_call_fixed(e, op, args, 3);
  }
  if (c) LLVMSetAlignment(LLVMBuildStore(e->b, c, a[0]), 4);
  return NULL;
}

/* tessera.vnni_s8_dot_16x4(&C int32[16], &A int8[4], &B int8[16][4]) and
 * tessera.vnni_s8_dot_16x16(&C int32[16], &A int8[16], &B int8[4][16][4]),
 * and their 8-lane forms: C[j] += sum_k A[k] * B[j][k] with both operands
 * signed, in `steps` steps of 4. vpdpbusd takes an unsigned left operand,
 * so A is biased to A + 128 (its sign bit flipped) and the bias times the
 * sums of B, 128 * sum_k B[j][k] (vpdpbusd of 0x80 bytes with B), is
 * subtracted: exact in int32. The sums of B accumulate over the steps and
 * are subtracted once, and they depend on B alone, so LLVM computes them
 * once for every row of a register tile that shares the B vectors. */
static LLVMValueRef vnni_s8_dot(emitter *e, ts_expr *x, LLVMValueRef *a) {
  const char *name = ts_expr_call_name(x), *op;
  int lanes, steps;
  if (!vnni_shape(e, name, &lanes, &steps, &op)) return NULL;
  LLVMTypeRef vt = LLVMVectorType(emit_i32t(e), (unsigned)lanes);
  LLVMValueRef bias32 = LLVMConstInt(emit_i32t(e), 0x80808080u, 0);
  LLVMValueRef bias = emit_splat(e, bias32, lanes);
  LLVMValueRef c = emit_load_vec(e, vt, a[0], 4);
  LLVMValueRef sums = LLVMConstNull(vt);
  for (int s = 0; s < steps && c && sums; s++) {
    LLVMValueRef av, bv;
    vnni_step(e, a, s, lanes, bias32, &av, &bv);
    LLVMValueRef dot[3] = {c, av, bv};
    c = emit_call_fixed(e, op, dot, 3);
    LLVMValueRef sum[3] = {sums, bias, bv};
    sums = emit_call_fixed(e, op, sum, 3);
  }
  if (c && sums)
    LLVMSetAlignment(
        LLVMBuildStore(e->b, LLVMBuildSub(e->b, c, sums, ""), a[0]), 4);
  return NULL;
}

/* tessera.avx2_madd_{s8,u8}_8x2(&C int32[8], &A int8|uint8[2],
 * &B int8[1][16]) and tessera.avx2_madd_{s8,u8}_8x8(&C int32[8],
 * &A int8|uint8[8], &B int8[4][16]): C[j] += sum_k A[k] * B[k / 2][2 j +
 * k % 2] in steps of two k. Each step widens B's 16 bytes to 16-bit lanes
 * (vpmovsxbw), splats A's pair, widened the same way (sign- or
 * zero-extended), to every lane pair, and multiplies and adds the pairs into
 * 32-bit lanes with vpmaddwd. Every product and pair sum fits its lane, so
 * the result is exact for all inputs. (The unsigned-times-signed byte
 * multiply vpmaddubsw would do twice the work per instruction but saturates
 * its 16-bit pair sums, 255 * 127 * 2 > 32767, so its results are not the
 * interpreter's for large operands; oneDNN accepts that or halves the
 * weights.) B's widened vectors depend on B alone, so LLVM computes them
 * once for all rows of a register tile that share them. */
static LLVMValueRef madd_dot(emitter *e, ts_expr *x, LLVMValueRef *a) {
  const char *name = ts_expr_call_name(x);
  int steps = strstr(name, "_8x8") ? 4 : 1;
  bool a_unsigned = strstr(name, "_u8_") != NULL;
  if (!need_feature(e, name, "avx2")) return NULL;
  LLVMTypeRef i8 = LLVMInt8TypeInContext(e->ctx);
  LLVMTypeRef i16 = LLVMInt16TypeInContext(e->ctx);
  LLVMTypeRef v8 = LLVMVectorType(emit_i32t(e), 8);
  LLVMValueRef c = emit_load_vec(e, v8, a[0], 4);
  for (int s = 0; s < steps && c; s++) {
    LLVMValueRef aoff =
        LLVMConstInt(emit_i64t(e), (unsigned long long)(2 * s), 0);
    LLVMValueRef boff =
        LLVMConstInt(emit_i64t(e), (unsigned long long)(16 * s), 0);
    LLVMValueRef ap = LLVMBuildInBoundsGEP2(e->b, i8, a[1], &aoff, 1, "");
    LLVMValueRef bp = LLVMBuildInBoundsGEP2(e->b, i8, a[2], &boff, 1, "");
    LLVMValueRef a2 = emit_load_vec(e, LLVMVectorType(i8, 2), ap, 1);
    a2 = a_unsigned ? LLVMBuildZExt(e->b, a2, LLVMVectorType(i16, 2), "")
                    : LLVMBuildSExt(e->b, a2, LLVMVectorType(i16, 2), "");
    LLVMValueRef a32 = LLVMBuildBitCast(e->b, a2, emit_i32t(e), "");
    LLVMValueRef b16 =
        LLVMBuildSExt(e->b, emit_load_vec(e, LLVMVectorType(i8, 16), bp, 1),
                      LLVMVectorType(i16, 16), "");
    LLVMValueRef args[2] = {emit_splat(e, a32, 8), b16};
    LLVMValueRef p = emit_call_fixed(e, "llvm.x86.avx2.pmadd.wd", args, 2);
    c = p ? LLVMBuildAdd(e->b, c, p, "") : NULL;
  }
  if (c) LLVMSetAlignment(LLVMBuildStore(e->b, c, a[0]), 4);
  return NULL;
}

/* tessera.avx512bf16_dot_16x2(&C float32[16], &A bfloat16[2],
 * &B bfloat16[16][2]): C[j] += A[0] B[j][0] + A[1] B[j][1] (vdpbf16ps). */
static LLVMValueRef bf16_dot(emitter *e, ts_expr *x, LLVMValueRef *a) {
  if (!need_feature(e, ts_expr_call_name(x), "avx512bf16")) return NULL;
  LLVMTypeRef v16f = LLVMVectorType(emit_f32t(e), 16);
  LLVMTypeRef v16i = LLVMVectorType(emit_i32t(e), 16);
  LLVMValueRef c = emit_load_vec(e, v16f, a[0], 4);
  LLVMValueRef av = emit_splat(e, emit_load_vec(e, emit_i32t(e), a[1], 2), 16);
  LLVMValueRef bv = emit_load_vec(e, v16i, a[2], 2);
  LLVMValueRef args[3] = {c, av, bv};
  LLVMValueRef r =
      emit_call_fixed(e, "llvm.x86.avx512bf16.dpbf16ps.512", args, 3);
  if (r) LLVMSetAlignment(LLVMBuildStore(e->b, r, a[0]), 4);
  return NULL;
}

static LLVMValueRef i16c(emitter *e, unsigned v) {
  return LLVMConstInt(LLVMInt16TypeInContext(e->ctx), v, 0);
}

/* The shape of one AMX call. */
typedef struct amx_shape {
  const char *dp;        /* the tile product intrinsic */
  unsigned ebytes;       /* bytes per A/B element */
  int64_t kstep, kconst; /* K per tile step, K of the call (or of its part) */
  int64_t group;         /* k per packed B element group (kstep / 16) */
  int64_t mt, nt, rows;  /* row tiles, column tiles, rows in all */
} amx_shape;

/* Emits one call's tiles at the builder: C (ldc bytes a row) += A (lda) x
 * packed B (ldb). */
static void amx_tiles(emitter *e, const amx_shape *sh, LLVMValueRef cp,
                      LLVMValueRef ldc_b, LLVMValueRef ap, LLVMValueRef lda_b,
                      LLVMValueRef bp, LLVMValueRef ldb_b) {
#define ROWS_OF(M) i16c(e, (unsigned)((M) == mt - 1 ? rows - 16 * (M) : 16))
  const char *dp = sh->dp;
  unsigned ebytes = sh->ebytes;
  int64_t kstep = sh->kstep, kconst = sh->kconst, mt = sh->mt, nt = sh->nt,
          rows = sh->rows;
  LLVMTypeRef i8t = LLVMInt8TypeInContext(e->ctx);
  LLVMTypeRef i64t = emit_i64t(e);
  /* base + rows * stride + bytes */
#define AMX_AT(BASE, ROWS, STRIDE, BYTES)                                      \
  LLVMBuildInBoundsGEP2(                                                       \
      e->b, i8t, (BASE),                                                       \
      (LLVMValueRef[]){LLVMBuildAdd(                                           \
          e->b,                                                                \
          LLVMBuildMul(e->b,                                                   \
                       LLVMConstInt(i64t, (unsigned long long)(ROWS), 0),      \
                       (STRIDE), ""),                                          \
          LLVMConstInt(i64t, (unsigned long long)(BYTES), 0), "")},            \
      1, "")
  LLVMValueRef c[8] = {0}, at[8] = {0}, bt[8] = {0};
  for (int64_t m = 0; m < mt; m++)
    for (int64_t n = 0; n < nt; n++) {
      LLVMValueRef la[4] = {ROWS_OF(m), i16c(e, 64),
                            AMX_AT(cp, m * 16, ldc_b, n * 64), ldc_b};
      c[m * nt + n] =
          emit_call_fixed(e, "llvm.x86.tileloadd64.internal", la, 4);
    }
  for (int64_t kk = 0; kk * kstep < kconst; kk++) {
    /* tile A at column offset kk*kstep, tile B at row kk*16; the n-th tile
     * of B 64 bytes (16 columns of 4 bytes of k) to the right. A last
     * partial step (kb < kstep: the caller gives it a function of its own,
     * see amx_gemm) has A tiles kb elements wide and B tiles kb / group
     * rows high. */
    int64_t kb = kconst - kk * kstep < kstep ? kconst - kk * kstep : kstep;
    unsigned a_bytes = (unsigned)(kb * (int64_t)ebytes);
    for (int64_t m = 0; m < mt; m++) {
      LLVMValueRef la[4] = {
          ROWS_OF(m), i16c(e, a_bytes),
          AMX_AT(ap, m * 16, lda_b, kk * kstep * (int64_t)ebytes), lda_b};
      at[m] = emit_call_fixed(e, "llvm.x86.tileloadd64.internal", la, 4);
    }
    for (int64_t n = 0; n < nt; n++) {
      LLVMValueRef lb[4] = {i16c(e, (unsigned)(kb / sh->group)), i16c(e, 64),
                            AMX_AT(bp, kk * 16, ldb_b, n * 64), ldb_b};
      bt[n] = emit_call_fixed(e, "llvm.x86.tileloadd64.internal", lb, 4);
    }
    for (int64_t m = 0; m < mt; m++)
      for (int64_t n = 0; n < nt; n++) {
        LLVMValueRef d[6] = {ROWS_OF(m),    i16c(e, 64), i16c(e, a_bytes),
                             c[m * nt + n], at[m],       bt[n]};
        c[m * nt + n] = emit_call_fixed(e, dp, d, 6);
      }
  }
  for (int64_t m = 0; m < mt; m++)
    for (int64_t n = 0; n < nt; n++) {
      if (!c[m * nt + n]) return;
      LLVMValueRef st[5] = {ROWS_OF(m), i16c(e, 64),
                            AMX_AT(cp, m * 16, ldc_b, n * 64), ldc_b,
                            c[m * nt + n]};
      emit_call_fixed(e, "llvm.x86.tilestored64.internal", st, 5);
    }
#undef AMX_AT
#undef ROWS_OF
}

/* tessera.amx_{bf16,int8}_gemm(&C, ldc, &A, lda, &Bp, ldb, K): a 16x16
 * output tile, C += A[16 x K] * B[K x 16] with B VNNI-packed; tiles loaded
 * with tileloadd, multiplied with tdpbf16ps / tdpbssd / tdpbusd, stored
 * with tilestored (the backend configures the tiles). The _blk forms take
 * two more constants, MT and NT: an output block of MT x NT tiles (16 MT
 * rows, 16 NT columns) kept in tile registers over the whole K, each step
 * loading MT tiles of A and NT of B for MT NT products (2 x 2: the eight
 * tile registers, each loaded tile used twice). The _rows form takes a
 * third constant, R, the rows of the block (16 (MT - 1) < R <= 16 MT):
 * the last row tile's A and C tiles are configured with the rows left,
 * so the product's last rows run on AMX without padding. K must be a
 * constant, and is unrolled; a multiple of the packed group (2 bf16, 4
 * int8) that whole tile steps (32 bf16, 64 int8) do not divide ends with
 * one narrower step (int8 K 1000: 15 steps, then A tiles 40 wide and B
 * tiles 10 rows high), in a function of its own. */
static void amx_tiles_call(emitter *e, const amx_shape *sh, LLVMValueRef cp,
                           LLVMValueRef ldc_b, LLVMValueRef ap,
                           LLVMValueRef lda_b, LLVMValueRef bp,
                           LLVMValueRef ldb_b);

static LLVMValueRef amx_gemm(emitter *e, ts_expr *x, LLVMValueRef *a) {
  const char *name = ts_expr_call_name(x);
  bool int8 = !strncmp(name, "tessera.amx_int8_gemm", 21);
  if (!need_feature(e, name, "amx-tile")) return NULL;
  if (!need_feature(e, name, int8 ? "amx-int8" : "amx-bf16")) return NULL;
  ts_buffer *abuf = ts_expr_kind_of(ts_expr_operand(x, 2)) == TS_EXPR_ADDRESS_OF
                        ? ts_expr_buffer(ts_expr_operand(x, 2))
                        : NULL;
  bool a_unsigned = abuf && ts_buffer_dtype(abuf).code == TS_DT_UINT;
  const char *dp = !int8        ? "llvm.x86.tdpbf16ps.internal"
                   : a_unsigned ? "llvm.x86.tdpbusd.internal"
                                : "llvm.x86.tdpbssd.internal";
  unsigned ebytes = int8 ? 1 : 2; /* bytes per A/B element */
  int64_t kstep = int8 ? 64 : 32; /* K per tile step */
  int64_t mt = 1, nt = 1;
  if (ts_expr_n_operands(x) >= 9 &&
      (!ts_expr_is_const_int(ts_expr_operand(x, 7), &mt) ||
       !ts_expr_is_const_int(ts_expr_operand(x, 8), &nt) || mt < 1 || nt < 1 ||
       mt * nt + mt + nt > 8)) {
    emit_fail(e, TS_EUNSUPPORTED,
              "code generation: %s needs constant tile counts MT, NT with MT "
              "NT + MT + NT at most the 8 tile registers",
              name);
    return NULL;
  }
  /* the _rows form: R rows in all, the last row tile R - 16 (MT - 1) */
  int64_t rows = 16 * mt;
  if (ts_expr_n_operands(x) == 10 &&
      (!ts_expr_is_const_int(ts_expr_operand(x, 9), &rows) ||
       rows <= 16 * (mt - 1) || rows > 16 * mt)) {
    emit_fail(e, TS_EUNSUPPORTED,
              "code generation: %s needs a constant row count R with "
              "16 (MT - 1) < R <= 16 MT",
              name);
    return NULL;
  }
  int64_t kconst, group = kstep / 16;
  if (!ts_expr_is_const_int(ts_expr_operand(x, 6), &kconst) || kconst <= 0 ||
      kconst % group || kconst > 64 * kstep) {
    emit_fail(e, TS_EUNSUPPORTED,
              "code generation: %s needs a constant K that is a multiple of "
              "%lld (at most %lld)",
              name, (long long)group, (long long)(64 * kstep));
    return NULL;
  }
  LLVMValueRef ldc_b =
      LLVMBuildMul(e->b, a[1], LLVMConstInt(emit_i64t(e), 4, 0), "");
  LLVMValueRef lda_b =
      LLVMBuildMul(e->b, a[3], LLVMConstInt(emit_i64t(e), ebytes, 0), "");
  LLVMValueRef ldb_b =
      LLVMBuildMul(e->b, a[5], LLVMConstInt(emit_i64t(e), ebytes, 0), "");
  /* the whole tile steps, then the K left (a multiple of the group) as
   * one narrower step: its A and B tiles have other shapes, so it gets a
   * function of its own, after the whole steps have stored C */
  int64_t ktail = kconst % kstep;
  amx_shape sh = {dp, ebytes, kstep, kconst - ktail, group, mt, nt, rows};
  if (sh.kconst > 0) {
    if (rows == 16 * mt)
      amx_tiles(e, &sh, a[0], ldc_b, a[2], lda_b, a[4], ldb_b);
    else
      amx_tiles_call(e, &sh, a[0], ldc_b, a[2], lda_b, a[4], ldb_b);
  }
  if (ktail) {
    LLVMTypeRef i8t = LLVMInt8TypeInContext(e->ctx);
    LLVMTypeRef i64t = emit_i64t(e);
    int64_t kmain = sh.kconst;
    LLVMValueRef aoff =
        LLVMConstInt(i64t, (unsigned long long)(kmain * ebytes), 0);
    LLVMValueRef boff = LLVMBuildMul(
        e->b, LLVMConstInt(i64t, (unsigned long long)(kmain / group), 0), ldb_b,
        "");
    LLVMValueRef ap = LLVMBuildInBoundsGEP2(e->b, i8t, a[2], &aoff, 1, "");
    LLVMValueRef bp = LLVMBuildInBoundsGEP2(e->b, i8t, a[4], &boff, 1, "");
    sh.kconst = ktail;
    amx_tiles_call(e, &sh, a[0], ldc_b, ap, lda_b, bp, ldb_b);
  }
  return NULL;
}

/* Emits amx_tiles as a function of its own, and a call to it at the
 * builder. LLVM configures the tile registers once per function, each
 * with one shape; next to a block that holds all eight registers, tiles
 * of another shape (fewer rows, a narrower last K step) would get
 * registers configured for the block's. The call reloads the caller's
 * configuration after it. */
static void amx_tiles_call(emitter *e, const amx_shape *sh, LLVMValueRef cp,
                           LLVMValueRef ldc_b, LLVMValueRef ap,
                           LLVMValueRef lda_b, LLVMValueRef bp,
                           LLVMValueRef ldb_b) {
  LLVMTypeRef pt = emit_ptrt(e), it = emit_i64t(e);
  LLVMTypeRef params[6] = {pt, it, pt, it, pt, it};
  LLVMTypeRef fty =
      LLVMFunctionType(LLVMVoidTypeInContext(e->ctx), params, 6, 0);
  char fname[256];
  snprintf(fname, sizeof fname, "%s_amx_part%d", e->entry, e->n_tasks++);
  LLVMValueRef fn = LLVMAddFunction(e->mod, fname, fty);
  LLVMSetLinkage(fn, LLVMInternalLinkage);
  emit_set_fn_attrs(e, fn);
  emit_add_enum_attr(e, fn, LLVMAttributeFunctionIndex, "noinline", 0);
  LLVMBasicBlockRef saved_bb = LLVMGetInsertBlock(e->b);
  LLVMPositionBuilderAtEnd(e->b,
                           LLVMAppendBasicBlockInContext(e->ctx, fn, "entry"));
  amx_tiles(e, sh, LLVMGetParam(fn, 0), LLVMGetParam(fn, 1),
            LLVMGetParam(fn, 2), LLVMGetParam(fn, 3), LLVMGetParam(fn, 4),
            LLVMGetParam(fn, 5));
  LLVMBuildRetVoid(e->b);
  LLVMPositionBuilderAtEnd(e->b, saved_bb);
  LLVMValueRef args[6] = {cp, ldc_b, ap, lda_b, bp, ldb_b};
  LLVMBuildCall2(e->b, fty, fn, args, 6, "");
}

/* tessera.prefetch(&X[...], bytes): a hint that the cache line holding
 * the byte that far past the element will be read, not at once (TS_ANN_PREFETCH
 * brings a region that later iterations read): into L2 and the levels below it
 * (prefetcht1), not L1, where it would push out what the loop reads now. No
 * effect on values; an address outside the buffer does not fault. */
static LLVMValueRef prefetch(emitter *e, ts_expr *x, LLVMValueRef *a) {
  (void)x;
  LLVMTypeRef i32 = emit_i32t(e);
  LLVMValueRef p =
      LLVMBuildGEP2(e->b, LLVMInt8TypeInContext(e->ctx), a[0], &a[1], 1, "");
  LLVMValueRef args[4] = {p, LLVMConstInt(i32, 0, 0), LLVMConstInt(i32, 2, 0),
                          LLVMConstInt(i32, 1, 0)};
  LLVMTypeRef pt = emit_ptrt(e);
  emit_call_intrinsic(e, "llvm.prefetch", &pt, 1, args, 4);
  return NULL;
}

const emit_intrinsic emit_x86_intrinsics[] = {
    {"tessera.prefetch", 2, prefetch},
    {"tessera.vnni_dot_16x4", 3, vnni_dot},
    {"tessera.vnni_dot_16x16", 3, vnni_dot},
    {"tessera.vnni_s8_dot_16x4", 3, vnni_s8_dot},
    {"tessera.vnni_s8_dot_16x16", 3, vnni_s8_dot},
    {"tessera.vnni_dot_8x4", 3, vnni_dot},
    {"tessera.vnni_dot_8x16", 3, vnni_dot},
    {"tessera.vnni_s8_dot_8x4", 3, vnni_s8_dot},
    {"tessera.vnni_s8_dot_8x16", 3, vnni_s8_dot},
    {"tessera.avx2_madd_s8_8x2", 3, madd_dot},
    {"tessera.avx2_madd_s8_8x8", 3, madd_dot},
    {"tessera.avx2_madd_u8_8x2", 3, madd_dot},
    {"tessera.avx2_madd_u8_8x8", 3, madd_dot},
    {"tessera.avx512bf16_dot_16x2", 3, bf16_dot},
    {"tessera.amx_bf16_gemm", 7, amx_gemm},
    {"tessera.amx_int8_gemm", 7, amx_gemm},
    {"tessera.amx_bf16_gemm_blk", 9, amx_gemm},
    {"tessera.amx_int8_gemm_blk", 9, amx_gemm},
    {"tessera.amx_bf16_gemm_rows", 10, amx_gemm},
    {"tessera.amx_int8_gemm_rows", 10, amx_gemm},
    {NULL, 0, NULL},
};
