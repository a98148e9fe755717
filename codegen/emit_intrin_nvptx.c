/*
 * emit_intrin_nvptx.c — the CUDA intrinsics of the NVPTX family
 * (target_nvptx.c): block barriers (tessera.cuda.syncthreads, inserted by
 * codegen/lower_sync.c), warp shuffles (tessera.cuda.shfl_down, the
 * cross-thread reductions) and the mma.sync tensor-core GEMM
 * (tessera.mma_m16n8k16) that tensorize calls.
 */
#include "codegen/emit_internal.h"

#include <string.h>

/* tessera.cuda.syncthreads(): a barrier of the thread block. */
static LLVMValueRef syncthreads(emitter *e, ts_expr *x, LLVMValueRef *a) {
  unsigned id = LLVMLookupIntrinsicID("llvm.nvvm.barrier0", 18);
  LLVMValueRef fn = LLVMGetIntrinsicDeclaration(e->mod, id, NULL, 0);
  LLVMBuildCall2(e->b, LLVMIntrinsicGetType(e->ctx, id, NULL, 0), fn, NULL, 0,
                 "");
  return NULL;
}

/* tessera.cuda.shfl_down(float32 v, int32 off): v as held by the lane `off`
 * lanes above this one in the warp (this lane's own v past lane 31):
 * shfl.sync.down. */
static LLVMValueRef shfl_down(emitter *e, ts_expr *x, LLVMValueRef *a) {
  ts_dtype t = ts_expr_dtype(x);
  if (ts_expr_n_operands(x) != 2 || !ts_dtype_eq(t, TS_FLOAT32)) {
    emit_fail(e, TS_EINVAL,
              "code generation: %s takes (float32 value, int32 offset)",
              ts_expr_call_name(x));
    return emit_undef(e, t);
  }
  LLVMValueRef v = emit_expr(e, ts_expr_operand(x, 0));
  LLVMValueRef off =
      emit_cast(e, TS_INT32, ts_expr_dtype(ts_expr_operand(x, 1)),
                emit_expr(e, ts_expr_operand(x, 1)));
  LLVMValueRef args[4] = {LLVMConstInt(emit_i32t(e), 0xffffffffu, 0), v, off,
                          LLVMConstInt(emit_i32t(e), 31, 0)};
  return emit_call_intrinsic(e, "llvm.nvvm.shfl.sync.down.f32", NULL, 0, args,
                             4);
}

/* tessera.mma_m16n8k16(&C float32[16][8] (ldc), ldc, &A [16][16] (lda), lda,
 * &B [16][8] k-major (ldb), ldb) for one warp: each lane loads its fragment
 * (PTX ISA layouts for m16n8k16), mma.sync, stores its part of C. */
static LLVMValueRef mma(emitter *e, ts_expr *x, LLVMValueRef *a) {
  if (!ts_target_has_feature(e->target, "sm_80")) {
    emit_fail(e, TS_EUNSUPPORTED,
              "code generation: tessera.mma_m16n8k16 needs a cuda target with "
              "sm_80 or newer");
    return NULL;
  }
  ts_buffer *abuf = ts_expr_kind_of(ts_expr_operand(x, 2)) == TS_EXPR_ADDRESS_OF
                        ? ts_expr_buffer(ts_expr_operand(x, 2))
                        : NULL;
  bool bf16 = abuf && ts_buffer_dtype(abuf).code == TS_DT_BFLOAT;
  LLVMTypeRef et =
      bf16 ? LLVMBFloatTypeInContext(e->ctx) : LLVMHalfTypeInContext(e->ctx);
  LLVMTypeRef pair = LLVMVectorType(et, 2);
  LLVMValueRef lane =
      emit_call_fixed(e, "llvm.nvvm.read.ptx.sreg.laneid", NULL, 0);
  if (!lane) return NULL;
  lane = LLVMBuildZExt(e->b, lane, emit_i64t(e), "");
  LLVMValueRef group =
      LLVMBuildLShr(e->b, lane, LLVMConstInt(emit_i64t(e), 2, 0), "");
  LLVMValueRef tig =
      LLVMBuildAnd(e->b, lane, LLVMConstInt(emit_i64t(e), 3, 0), "");
  LLVMValueRef col2 =
      LLVMBuildMul(e->b, tig, LLVMConstInt(emit_i64t(e), 2, 0), "");
  /* element pointer p + (row * ld + col) elements of type t */
#define ELEM(t, p, row, ld, col)                                               \
  LLVMBuildInBoundsGEP2(                                                       \
      e->b, (t), (p),                                                          \
      (LLVMValueRef[]){                                                        \
          LLVMBuildAdd(e->b, LLVMBuildMul(e->b, (row), (ld), ""), (col), "")}, \
      1, "")
  LLVMValueRef k8 = LLVMConstInt(emit_i64t(e), 8, 0);
  LLVMValueRef args[10];
  /* A: a0a1 (g, 2t), a2a3 (g+8, 2t), a4a5 (g, 2t+8), a6a7 (g+8, 2t+8). */
  for (int i = 0; i < 4; i++) {
    LLVMValueRef row = (i & 1) ? LLVMBuildAdd(e->b, group, k8, "") : group;
    LLVMValueRef col = (i & 2) ? LLVMBuildAdd(e->b, col2, k8, "") : col2;
    args[i] = emit_load_vec(e, pair, ELEM(et, a[2], row, a[3], col), 4);
  }
  /* B (k-major): b0b1 = rows 2t, 2t+1 at column g; b2b3 = rows 2t+8, 2t+9. */
  for (int i = 0; i < 2; i++) {
    LLVMValueRef r0 = i ? LLVMBuildAdd(e->b, col2, k8, "") : col2;
    LLVMValueRef r1 =
        LLVMBuildAdd(e->b, r0, LLVMConstInt(emit_i64t(e), 1, 0), "");
    LLVMValueRef v0 =
        LLVMBuildLoad2(e->b, et, ELEM(et, a[4], r0, a[5], group), "");
    LLVMValueRef v1 =
        LLVMBuildLoad2(e->b, et, ELEM(et, a[4], r1, a[5], group), "");
    LLVMValueRef v = LLVMBuildInsertElement(
        e->b, LLVMGetUndef(pair), v0, LLVMConstInt(emit_i32t(e), 0, 0), "");
    args[4 + i] = LLVMBuildInsertElement(e->b, v, v1,
                                         LLVMConstInt(emit_i32t(e), 1, 0), "");
  }
  /* C: c0c1 (g, 2t), c2c3 (g+8, 2t). */
  LLVMValueRef cptr[4];
  for (int i = 0; i < 4; i++) {
    LLVMValueRef row = (i & 2) ? LLVMBuildAdd(e->b, group, k8, "") : group;
    LLVMValueRef col =
        (i & 1) ? LLVMBuildAdd(e->b, col2, LLVMConstInt(emit_i64t(e), 1, 0), "")
                : col2;
    cptr[i] = ELEM(emit_f32t(e), a[0], row, a[1], col);
    args[6 + i] = LLVMBuildLoad2(e->b, emit_f32t(e), cptr[i], "");
  }
#undef ELEM
  LLVMValueRef d =
      emit_call_fixed(e,
                      bf16 ? "llvm.nvvm.mma.m16n8k16.row.col.bf16"
                           : "llvm.nvvm.mma.m16n8k16.row.col.f32.f32",
                      args, 10);
  if (!d) return NULL;
  for (int i = 0; i < 4; i++)
    LLVMBuildStore(e->b, LLVMBuildExtractValue(e->b, d, (unsigned)i, ""),
                   cptr[i]);
  return NULL;
}

/* tessera.prefetch (TS_ANN_PREFETCH): a hint the GPU code ignores. */
static LLVMValueRef no_prefetch(emitter *e, ts_expr *x, LLVMValueRef *a) {
  (void)e;
  (void)x;
  (void)a;
  return NULL;
}

const emit_intrinsic emit_nvptx_intrinsics[] = {
    {"tessera.prefetch", 2, no_prefetch},
    {"tessera.cuda.syncthreads", -1, syncthreads},
    {"tessera.cuda.shfl_down", -1, shfl_down},
    {"tessera.mma_m16n8k16", 6, mma},
    {NULL, 0, NULL},
};
