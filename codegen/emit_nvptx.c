/*
 * emit_nvptx.c — the NVPTX (cuda) side of the LLVM emitter: the CUDA
 * intrinsics (block barriers, warp shuffles, the mma.sync tensor core GEMM
 * tensorize calls), loops bound to blockIdx/threadIdx read from the special
 * registers, the launch geometry collected from them, and the PTX kernel
 * with its !nvvm.annotations.
 */
#include "codegen/emit_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- CUDA intrinsics ---- */

/* tessera.cuda.syncthreads(): a barrier of the thread block. */
void emit_syncthreads(emitter *e) {
  unsigned id = LLVMLookupIntrinsicID("llvm.nvvm.barrier0", 18);
  LLVMValueRef fn = LLVMGetIntrinsicDeclaration(e->mod, id, NULL, 0);
  LLVMBuildCall2(e->b, LLVMIntrinsicGetType(e->ctx, id, NULL, 0), fn, NULL, 0,
                 "");
}

/* tessera.cuda.shfl_down(v, off): v as held by the lane `off` lanes above
 * this one in the warp (this lane's own v past lane 31): shfl.sync.down. */
LLVMValueRef emit_shfl_down(emitter *e, LLVMValueRef v, LLVMValueRef off) {
  LLVMValueRef args[4] = {LLVMConstInt(emit_i32t(e), 0xffffffffu, 0), v, off,
                          LLVMConstInt(emit_i32t(e), 31, 0)};
  return emit_call_intrinsic(e, "llvm.nvvm.shfl.sync.down.f32", NULL, 0, args,
                             4);
}

/* tessera.mma_m16n8k16(&C float32[16][8] (ldc), ldc, &A [16][16] (lda), lda,
 * &B [16][8] k-major (ldb), ldb) for one warp: each lane loads its fragment
 * (PTX ISA layouts for m16n8k16), mma.sync, stores its part of C. */
void emit_mma(emitter *e, ts_expr *x, LLVMValueRef *a) {
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
  LLVMValueRef lane =
      emit_call_fixed(e, "llvm.nvvm.read.ptx.sreg.laneid", NULL, 0);
  if (!lane) return;
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
  if (!d) return;
  for (int i = 0; i < 4; i++)
    LLVMBuildStore(e->b, LLVMBuildExtractValue(e->b, d, (unsigned)i, ""),
                   cptr[i]);
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

void emit_thread_loop(emitter *e, ts_stmt *s) {
  int axis = thread_axis(ts_for_thread_tag(s));
  if (axis == 6) { /* a virtual thread is an ordinary loop here */
    LLVMValueRef lo = emit_expr(e, ts_for_min(s));
    LLVMValueRef hi =
        LLVMBuildAdd(e->b, lo, emit_expr(e, ts_for_extent(s)), "");
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
      LLVMBuildAdd(e->b, LLVMBuildZExt(e->b, raw, emit_i64t(e), ""),
                   emit_expr(e, ts_for_min(s)), ts_var_name(ts_for_var(s)));
  ts_node_map_put(e->cur->vals, ts_for_var(s), idx);
  int64_t ext = 0, launched = axis < 3 ? e->grid[axis] : e->block[axis - 3];
  ts_expr_is_const_int(ts_for_extent(s), &ext);
  if (ext >= launched) {
    emit_stmt(e, ts_for_body(s));
    return;
  }
  /* Launched wider than this loop (another loop shares the axis): guard. */
  LLVMValueRef in = LLVMBuildICmp(
      e->b, LLVMIntSLT, LLVMBuildZExt(e->b, raw, emit_i64t(e), ""),
      LLVMConstInt(emit_i64t(e), (unsigned long long)ext, 0), "");
  LLVMBasicBlockRef tb =
      LLVMAppendBasicBlockInContext(e->ctx, e->cur->fn, "bound");
  LLVMBasicBlockRef mb =
      LLVMAppendBasicBlockInContext(e->ctx, e->cur->fn, "bound.end");
  LLVMBuildCondBr(e->b, in, tb, mb);
  LLVMPositionBuilderAtEnd(e->b, tb);
  emit_stmt(e, ts_for_body(s));
  LLVMBuildBr(e->b, mb);
  LLVMPositionBuilderAtEnd(e->b, mb);
}

/* ---- the kernel ---- */

/* A PTX kernel: void entry(ptr addrspace(1) p0, ...), marked as a kernel
 * in !nvvm.annotations with its launch bounds. */
int emit_cuda_kernel(emitter *e, const ts_func *f, const char *entry) {
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
  LLVMTypeRef *pt =
      ts_arena_alloc(e->tmp, sizeof *pt * (size_t)(n > 0 ? n : 1));
  for (int i = 0; i < n; i++) pt[i] = gptr;
  LLVMTypeRef fty =
      LLVMFunctionType(LLVMVoidTypeInContext(e->ctx), pt, (unsigned)n, 0);
  LLVMValueRef fn = LLVMAddFunction(e->mod, entry, fty);
  emit_set_fn_attrs(e, fn);
  for (int i = 0; i < n; i++) {
    emit_add_enum_attr(e, fn, (unsigned)i + 1, "noalias", 0);
    int align = ts_buffer_align(ts_func_param(f, i));
    if (align > 0 && (align & (align - 1)) == 0)
      emit_add_enum_attr(e, fn, (unsigned)i + 1, "align", (uint64_t)align);
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
  emit_stmt(e, ts_func_body(f));
  LLVMBuildRetVoid(e->b);
  if (cf.fail_bb) { /* no runtime status on the GPU: failures just return */
    LLVMBasicBlockRef last = LLVMGetInsertBlock(e->b);
    (void)last;
  }
  ts_node_map_destroy(cf.vals);
  e->cur = NULL;
  LLVMValueRef md[3] = {fn, LLVMMDStringInContext(e->ctx, "kernel", 6),
                        LLVMConstInt(emit_i32t(e), 1, 0)};
  LLVMAddNamedMetadataOperand(e->mod, "nvvm.annotations",
                              LLVMMDNodeInContext(e->ctx, md, 3));
  LLVMValueRef md2[3] = {
      fn, LLVMMDStringInContext(e->ctx, "maxntidx", 8),
      LLVMConstInt(emit_i32t(e), (unsigned long long)threads, 0)};
  LLVMAddNamedMetadataOperand(e->mod, "nvvm.annotations",
                              LLVMMDNodeInContext(e->ctx, md2, 3));
  return e->status;
}
