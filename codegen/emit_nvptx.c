/*
 * emit_nvptx.c — the NVPTX (cuda) side of the LLVM emitter, the hooks
 * target_nvptx.c gives the shared emitter: math without libm (the NVVM
 * approximate exp2/log2), shared-memory buffers, loops bound to
 * blockIdx/threadIdx read from the special registers, the launch geometry
 * collected from them, and the PTX kernel with its !nvvm.annotations. The
 * CUDA intrinsics (barriers, warp shuffles, mma.sync) are in
 * emit_intrin_nvptx.c.
 */
#include "codegen/emit_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- GPU math: no libm ---- */

/* The NVVM approximate exp2/log2 ("ex2"/"lg2") of a float or double value,
 * lane by lane for vectors. */
static LLVMValueRef nvvm_approx(emitter *e, const char *op, LLVMValueRef x) {
  LLVMTypeRef ty = LLVMTypeOf(x);
  bool vec = LLVMGetTypeKind(ty) == LLVMVectorTypeKind;
  LLVMTypeRef st = vec ? LLVMGetElementType(ty) : ty;
  bool dbl = LLVMGetTypeKind(st) == LLVMDoubleTypeKind;
  char name[64];
  snprintf(name, sizeof name, "llvm.nvvm.%s.approx.%s", op, dbl ? "d" : "f");
  if (!vec) return emit_call_intrinsic(e, name, NULL, 0, &x, 1);
  LLVMValueRef r = LLVMGetUndef(ty);
  for (unsigned l = 0; l < LLVMGetVectorSize(ty); l++) {
    LLVMValueRef lane = LLVMConstInt(emit_i32t(e), l, 0);
    LLVMValueRef v = LLVMBuildExtractElement(e->b, x, lane, "");
    r = LLVMBuildInsertElement(
        e->b, r, emit_call_intrinsic(e, name, NULL, 0, &v, 1), lane, "");
  }
  return r;
}

/* NVPTX has no libm: exp, log, log10 and pow go through the hardware's
 * exp2/log2 (ex2.approx / lg2.approx). */
LLVMValueRef emit_gpu_math(emitter *e, const char *name, LLVMTypeRef ty,
                           LLVMValueRef *args) {
  LLVMBuilderRef B = e->b;
  if (!strcmp(name, "exp") || !strcmp(name, "sigmoid") ||
      !strcmp(name, "tanh") || !strcmp(name, "erf"))
    return NULL; /* through exp: emit_gpu_exp */
  if (!strcmp(name, "exp2")) return nvvm_approx(e, "ex2", args[0]);
  if (!strcmp(name, "log2")) return nvvm_approx(e, "lg2", args[0]);
  if (!strcmp(name, "log") || !strcmp(name, "log10")) {
    LLVMValueRef l2 = nvvm_approx(e, "lg2", args[0]);
    double k = !strcmp(name, "log") ? 0.6931471805599453 : 0.30102999566398120;
    return LLVMBuildFMul(B, l2, emit_const_fp(ty, k), "");
  }
  if (!strcmp(name, "pow")) {
    LLVMValueRef l2 = nvvm_approx(e, "lg2", args[0]);
    return nvvm_approx(e, "ex2", LLVMBuildFMul(B, args[1], l2, ""));
  }
  return NULL;
}

/* exp(x) = exp2(x log2 e) on the hardware's ex2.approx. */
LLVMValueRef emit_gpu_exp(emitter *e, LLVMTypeRef ty, LLVMValueRef x) {
  LLVMValueRef p =
      LLVMBuildFMul(e->b, x, emit_const_fp(ty, 1.4426950408889634), "");
  return nvvm_approx(e, "ex2", p);
}

/* ---- loops and buffers ---- */

void emit_gpu_parallel(emitter *e, ts_stmt *s) {
  emit_fail(e, TS_EINVAL,
            "code generation: loop '%s' is parallel; on a cuda target bind it "
            "to blockIdx/threadIdx instead",
            ts_var_name(ts_for_var(s)));
}

/* Shared memory: a module-level array in address space 3. */
bool emit_shared_alloc(emitter *e, ts_stmt *s) {
  ts_buffer *b = ts_allocate_buffer(s);
  if (strcmp(ts_buffer_scope(b), "shared")) return false;
  int64_t elems = ts_buffer_storage_elems(b);
  LLVMTypeRef mt = emit_mem_type(e, ts_buffer_dtype(b));
  unsigned align = (unsigned)(ts_buffer_align(b) > 0 ? ts_buffer_align(b) : 64);
  LLVMTypeRef at = LLVMArrayType(mt, (unsigned)(elems > 0 ? elems : 1));
  LLVMValueRef g =
      LLVMAddGlobalInAddressSpace(e->mod, at, ts_buffer_name(b), 3);
  LLVMSetLinkage(g, LLVMInternalLinkage);
  LLVMSetInitializer(g, LLVMGetUndef(at));
  LLVMSetAlignment(g, align);
  e->shared_bytes += ts_buffer_bytes(b);
  ts_node_map_put(e->cur->vals, b, g);
  emit_stmt(e, ts_allocate_body(s));
  return true;
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
    emit_loop(e, ts_for_var(s), lo, hi, ts_for_body(s), 0);
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
  if (!pt) return emit_fail(e, TS_ENOMEM, "code generation: out of memory");
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
