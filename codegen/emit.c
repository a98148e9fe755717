/*
 * emit.c — LLVM IR emission for a lowered function through the LLVM C API,
 * the core shared by every target: types and helpers of the emitter, status
 * propagation, statements (serial loops as phi loops, ifs, local buffers on
 * the stack (small) or from ts_rt_alloc (large)) and the kernel entry.
 * Where targets differ the emitter calls its target family's hooks
 * (emit_hooks, codegen/target_internal.h): the kernel, parallel and
 * thread-bound loops, buffers of the family's own storage scopes (shared
 * memory), function attributes, math and intrinsics. The other files of
 * the emitter: emit_expr.c (expressions, loads and stores), emit_math.c
 * (math intrinsics and libm replacements), emit_cpu.c (the CPU hooks:
 * parallel loops, the runtime's ABI), emit_nvptx.c (the NVPTX hooks: thread
 * bindings, shared memory, PTX kernels, GPU math) and the intrinsics by
 * family, emit_intrin_x86.c and emit_intrin_nvptx.c.
 */
#include "codegen/emit_internal.h"

#include <llvm-c/DebugInfo.h>

#include <stdarg.h>
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

LLVMTypeRef emit_scalar_type(emitter *e, ts_dtype t) {
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
LLVMTypeRef emit_reg_type(emitter *e, ts_dtype t) {
  LLVMTypeRef s = emit_scalar_type(e, t);
  return t.lanes > 1 ? LLVMVectorType(s, t.lanes) : s;
}

/* The type of one element in memory (bool is a byte). */
LLVMTypeRef emit_mem_type(emitter *e, ts_dtype t) {
  if (t.code == TS_DT_BOOL) return LLVMInt8TypeInContext(e->ctx);
  return emit_scalar_type(e, t);
}

LLVMTypeRef emit_i64t(emitter *e) { return LLVMInt64TypeInContext(e->ctx); }
LLVMTypeRef emit_i32t(emitter *e) { return LLVMInt32TypeInContext(e->ctx); }
LLVMTypeRef emit_ptrt(emitter *e) {
  return LLVMPointerTypeInContext(e->ctx, 0);
}
LLVMTypeRef emit_f32t(emitter *e) { return LLVMFloatTypeInContext(e->ctx); }

bool emit_is_half(ts_dtype t) {
  return t.code == TS_DT_BFLOAT || (t.code == TS_DT_FLOAT && t.bits == 16);
}

LLVMValueRef emit_splat(emitter *e, LLVMValueRef v, int lanes) {
  if (lanes <= 1) return v;
  LLVMTypeRef vt = LLVMVectorType(LLVMTypeOf(v), lanes);
  LLVMValueRef ins = LLVMBuildInsertElement(
      e->b, LLVMGetUndef(vt), v, LLVMConstInt(emit_i32t(e), 0, 0), "");
  LLVMValueRef mask = LLVMConstNull(LLVMVectorType(emit_i32t(e), lanes));
  return LLVMBuildShuffleVector(e->b, ins, LLVMGetUndef(vt), mask, "");
}

LLVMValueRef emit_call_intrinsic(emitter *e, const char *name,
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

/* Calls a non-overloaded intrinsic, bitcasting each argument to the
 * parameter type it declares (e.g. <16 x i32> to <32 x bfloat>). */
LLVMValueRef emit_call_fixed(emitter *e, const char *name, LLVMValueRef *args,
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

LLVMValueRef emit_load_vec(emitter *e, LLVMTypeRef t, LLVMValueRef p,
                           unsigned align) {
  LLVMValueRef v = LLVMBuildLoad2(e->b, t, p, "");
  LLVMSetAlignment(v, align);
  return v;
}

/* Declares (once) an external function of the process. */
LLVMValueRef emit_extern_fn(emitter *e, const char *name, LLVMTypeRef fty) {
  LLVMValueRef fn = LLVMGetNamedFunction(e->mod, name);
  if (!fn) fn = LLVMAddFunction(e->mod, name, fty);
  return fn;
}

void emit_add_enum_attr(emitter *e, LLVMValueRef fn, unsigned idx,
                        const char *name, uint64_t value) {
  unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
  LLVMAddAttributeAtIndex(fn, idx,
                          LLVMCreateEnumAttribute(e->ctx, kind, value));
}

void emit_set_fn_attrs(emitter *e, LLVMValueRef fn) {
  emit_add_enum_attr(e, fn, LLVMAttributeFunctionIndex, "nounwind", 0);
  if (e->hooks->fn_attrs) e->hooks->fn_attrs(e, fn);
}

/* ---- status propagation ---- */

/* Branches to the function's failure exit when status != 0. */
void emit_check_status(emitter *e, LLVMValueRef status) {
  emit_fn *f = e->cur;
  if (!f->fail_bb) {
    LLVMBasicBlockRef here = LLVMGetInsertBlock(e->b);
    f->fail_bb = LLVMAppendBasicBlockInContext(e->ctx, f->fn, "fail");
    LLVMPositionBuilderAtEnd(e->b, f->fail_bb);
    f->fail_phi = LLVMBuildPhi(e->b, emit_i32t(e), "status");
    LLVMBuildRet(e->b, f->fail_phi);
    LLVMPositionBuilderAtEnd(e->b, here);
  }
  LLVMValueRef bad = LLVMBuildICmp(e->b, LLVMIntNE, status,
                                   LLVMConstInt(LLVMTypeOf(status), 0, 0), "");
  LLVMBasicBlockRef ok = LLVMAppendBasicBlockInContext(e->ctx, f->fn, "ok");
  LLVMValueRef st32 = status;
  if (LLVMGetIntTypeWidth(LLVMTypeOf(status)) != 32)
    st32 = LLVMBuildTrunc(e->b, status, emit_i32t(e), "");
  LLVMBasicBlockRef here = LLVMGetInsertBlock(e->b);
  LLVMAddIncoming(f->fail_phi, &st32, &here, 1);
  LLVMBuildCondBr(e->b, bad, f->fail_bb, ok);
  LLVMPositionBuilderAtEnd(e->b, ok);
}

/* An alloca in the function's entry block. */
LLVMValueRef emit_entry_alloca(emitter *e, LLVMTypeRef t, unsigned align) {
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

/* ---- statements ---- */

static void set_range(emitter *e, ts_stmt *loop) {
  int64_t mn, ext;
  if (ts_expr_is_const_int(ts_for_min(loop), &mn) &&
      ts_expr_is_const_int(ts_for_extent(loop), &ext) && ext > 0)
    ts_var_ranges_set(e->ranges, ts_for_var(loop), mn, ext);
}

/* Attaches !llvm.loop {llvm.loop.unroll.full} (or, with full false,
 * {llvm.loop.unroll.disable}) to a loop's back edge. The loop id refers to
 * itself: built around a temporary node that is then replaced by the id. */
static void mark_unroll(emitter *e, LLVMValueRef br, bool full) {
  LLVMMetadataRef tmp = LLVMTemporaryMDNode(e->ctx, NULL, 0);
  const char *what =
      full ? "llvm.loop.unroll.full" : "llvm.loop.unroll.disable";
  LLVMMetadataRef name = LLVMMDStringInContext2(e->ctx, what, strlen(what));
  LLVMMetadataRef unroll = LLVMMDNodeInContext2(e->ctx, &name, 1);
  LLVMMetadataRef ops[2] = {tmp, unroll};
  LLVMMetadataRef loop = LLVMMDNodeInContext2(e->ctx, ops, 2);
  LLVMMetadataReplaceAllUsesWith(tmp, loop);
  unsigned kind = LLVMGetMDKindIDInContext(e->ctx, "llvm.loop", 9);
  LLVMSetMetadata(br, kind, LLVMMetadataAsValue(e->ctx, loop));
}

/* for var in [lo, hi): body. */
void emit_loop(emitter *e, ts_expr *var, LLVMValueRef lo, LLVMValueRef hi,
               ts_stmt *body, int unroll) {
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
  LLVMValueRef phi = LLVMBuildPhi(e->b, emit_i64t(e), ts_var_name(var));
  LLVMValueRef cond = LLVMBuildICmp(e->b, LLVMIntSLT, phi, hi, "");
  LLVMBuildCondBr(e->b, cond, bb, exit);
  LLVMPositionBuilderAtEnd(e->b, bb);
  ts_node_map_put(e->cur->vals, var, phi);
  emit_stmt(e, body);
  LLVMBuildBr(e->b, latch);
  LLVMPositionBuilderAtEnd(e->b, latch);
  LLVMValueRef next =
      LLVMBuildNSWAdd(e->b, phi, LLVMConstInt(emit_i64t(e), 1, 0), "");
  LLVMValueRef back = LLVMBuildBr(e->b, head);
  if (unroll) mark_unroll(e, back, unroll > 0);
  LLVMValueRef in_vals[2] = {lo, next};
  LLVMBasicBlockRef in_bbs[2] = {pre, latch};
  LLVMAddIncoming(phi, in_vals, in_bbs, 2);
  LLVMPositionBuilderAtEnd(e->b, exit);
}

static bool has_threads(const target_family *f) {
  return f->emit->thread_loop != NULL;
}

/* Whether loop s asks for non-temporal stores the family can emit. */
static bool nontemporal_loop(const emitter *e, const ts_stmt *s) {
  const ts_annotation *a = ts_for_find_annotation(s, TS_ANN_NONTEMPORAL);
  return e->hooks->store_fence && a && a->kind == TS_ANN_INT && a->i;
}

static void emit_for_kind(emitter *e, ts_stmt *s);

/* A loop; under TS_ANN_NONTEMPORAL its body's parameter stores may be
 * non-temporal, and a fence follows it (a parallel loop's outlined body
 * ends with one, see emit_parallel). */
static void emit_for(emitter *e, ts_stmt *s) {
  bool nt = nontemporal_loop(e, s);
  e->nontemporal += nt;
  emit_for_kind(e, s);
  e->nontemporal -= nt;
  if (nt && !e->status && ts_for_kind_of(s) != TS_FOR_PARALLEL)
    e->hooks->store_fence(e);
}

static void emit_for_kind(emitter *e, ts_stmt *s) {
  set_range(e, s);
  switch (ts_for_kind_of(s)) {
  case TS_FOR_PARALLEL: e->hooks->parallel_loop(e, s); return;
  case TS_FOR_THREAD:
    if (!e->hooks->thread_loop) {
      char kinds[64];
      target_kinds(has_threads, kinds, sizeof kinds);
      emit_fail(e, TS_EINVAL,
                "code generation: loop '%s' is bound to '%s', which needs a "
                "target of kind %s",
                ts_var_name(ts_for_var(s)), ts_for_thread_tag(s), kinds);
      return;
    }
    e->hooks->thread_loop(e, s);
    return;
  default: break;
  }
  /* a CPU's horizontal fold of a row's partial sums (emit_reduce.c) */
  if (!e->hooks->thread_loop && emit_lane_fold(e, s)) return;
  LLVMValueRef lo = emit_expr(e, ts_for_min(s));
  LLVMValueRef hi = LLVMBuildAdd(e->b, lo, emit_expr(e, ts_for_extent(s)), "");
  const ts_annotation *u = ts_for_find_annotation(s, TS_ANN_LLVM_UNROLL_FULL);
  const ts_annotation *no = ts_for_find_annotation(s, TS_ANN_NO_UNROLL);
  int unroll = 0; /* > 0: unroll whole; < 0: keep the loop */
  if ((u && u->kind == TS_ANN_INT && u->i) ||
      ts_for_kind_of(s) == TS_FOR_UNROLLED)
    unroll = 1;
  else if (no && no->kind == TS_ANN_INT && no->i)
    unroll = -1;
  emit_loop(e, ts_for_var(s), lo, hi, ts_for_body(s), unroll);
}

static void emit_if(emitter *e, ts_stmt *s) {
  LLVMValueRef c = emit_expr(e, ts_if_cond(s));
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
        emit_call_intrinsic(e, "llvm.vector.reduce.or", &ct, 1, &c, 1);
    LLVMBasicBlockRef tb =
        LLVMAppendBasicBlockInContext(e->ctx, e->cur->fn, "mask.then");
    LLVMBasicBlockRef mb =
        LLVMAppendBasicBlockInContext(e->ctx, e->cur->fn, "mask.end");
    LLVMBuildCondBr(e->b, any, tb, mb);
    LLVMPositionBuilderAtEnd(e->b, tb);
    LLVMValueRef saved = e->mask;
    e->mask = saved ? LLVMBuildAnd(e->b, saved, c, "") : c;
    emit_stmt(e, ts_if_then(s));
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
  emit_stmt(e, ts_if_then(s));
  LLVMBuildBr(e->b, mb);
  if (eb) {
    LLVMPositionBuilderAtEnd(e->b, eb);
    emit_stmt(e, ts_if_else(s));
    LLVMBuildBr(e->b, mb);
  }
  LLVMPositionBuilderAtEnd(e->b, mb);
}

static void emit_allocate(emitter *e, ts_stmt *s) {
  if (e->hooks->scoped_alloc && e->hooks->scoped_alloc(e, s)) return;
  ts_buffer *b = ts_allocate_buffer(s);
  int64_t bytes = ts_buffer_bytes(b);
  int64_t elems = ts_buffer_storage_elems(b);
  LLVMTypeRef mt = emit_mem_type(e, ts_buffer_dtype(b));
  unsigned align = (unsigned)(ts_buffer_align(b) > 0 ? ts_buffer_align(b) : 64);
  if (!e->hooks->heap_alloc && bytes > STACK_ALLOC_LIMIT) {
    emit_fail(
        e, TS_EINVAL,
        "code generation: local buffer '%s' (%lld bytes) is too large for "
        "a thread's stack on target '%s' (which has no heap for it)",
        ts_buffer_name(b), (long long)bytes, ts_target_str(e->target));
    return;
  }
  if (bytes <= STACK_ALLOC_LIMIT) {
    LLVMValueRef p = emit_entry_alloca(
        e, LLVMArrayType(mt, (unsigned)(elems > 0 ? elems : 1)), align);
    ts_node_map_put(e->cur->vals, b, p);
    emit_stmt(e, ts_allocate_body(s));
    return;
  }
  LLVMTypeRef ap[3] = {emit_ptrt(e), emit_i64t(e), emit_i64t(e)};
  LLVMTypeRef at = LLVMFunctionType(emit_ptrt(e), ap, 3, 0);
  LLVMValueRef alloc = emit_extern_fn(e, "ts_rt_alloc", at);
  LLVMValueRef args[3] = {
      e->cur->rt, LLVMConstInt(emit_i64t(e), (unsigned long long)bytes, 0),
      LLVMConstInt(emit_i64t(e), align, 0)};
  LLVMValueRef p = LLVMBuildCall2(e->b, at, alloc, args, 3, "");
  LLVMValueRef isnull = LLVMBuildIsNull(e->b, p, "");
  emit_check_status(e,
                    LLVMBuildSelect(e->b, isnull,
                                    LLVMConstInt(emit_i32t(e), (unsigned)-1, 1),
                                    LLVMConstInt(emit_i32t(e), 0, 0), ""));
  ts_node_map_put(e->cur->vals, b, p);
  emit_stmt(e, ts_allocate_body(s));
  LLVMTypeRef fp[2] = {emit_ptrt(e), emit_ptrt(e)};
  LLVMTypeRef ft = LLVMFunctionType(LLVMVoidTypeInContext(e->ctx), fp, 2, 0);
  LLVMValueRef fre = emit_extern_fn(e, "ts_rt_free", ft);
  LLVMValueRef fargs[2] = {e->cur->rt, p};
  LLVMBuildCall2(e->b, ft, fre, fargs, 2, "");
}

bool emit_oom(emitter *e) {
  if (!e->status && ts_alloc_failures() != e->oom)
    emit_fail(e, TS_ENOMEM, "code generation: out of memory");
  return e->status == TS_ENOMEM;
}

void emit_stmt(emitter *e, ts_stmt *s) {
  if (!s || e->status || emit_oom(e)) return;
  switch (ts_stmt_kind_of(s)) {
  case TS_STMT_FOR: emit_for(e, s); return;
  case TS_STMT_STORE: emit_store(e, s); return;
  case TS_STMT_SEQ:
    for (int i = 0; i < ts_seq_n(s);) {
      int run = emit_transpose_run(e, s, i);
      if (run == 0) run = emit_interleave_run(e, s, i);
      if (run > 0) {
        i += run;
        continue;
      }
      emit_stmt(e, ts_seq_item(s, i++));
    }
    return;
  case TS_STMT_IF: emit_if(e, s); return;
  case TS_STMT_EVALUATE: emit_expr(e, ts_evaluate_value(s)); return;
  case TS_STMT_LET:
    ts_node_map_put(e->cur->vals, ts_let_stmt_var(s),
                    emit_expr(e, ts_let_stmt_value(s)));
    emit_stmt(e, ts_let_stmt_body(s));
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

typedef struct {
  const ts_func *f;
  uint64_t bits;
} read_params_ctx;

static void note_param_load(void *ctx, ts_expr *x) {
  read_params_ctx *c = ctx;
  if (ts_expr_kind_of(x) != TS_EXPR_LOAD) return;
  for (int i = 0; i < ts_func_n_params(c->f) && i < 64; i++)
    if (ts_func_param(c->f, i) == ts_expr_buffer(x)) c->bits |= 1ull << i;
}

static void visit_param_loads(void *ctx, ts_expr *x) {
  ts_expr_walk(x, note_param_load, ctx);
}

/* Bit i set: f loads parameter i somewhere (an output it also reads, as a
 * product accumulating into it does). Every bit past 64 parameters. */
static uint64_t loaded_params(const ts_func *f) {
  read_params_ctx c = {f, ts_func_n_params(f) > 64 ? ~0ull : 0};
  ts_visitor v = {NULL, NULL, visit_param_loads, &c};
  ts_stmt_walk(ts_func_body(f), &v);
  return c.bits;
}

int emit_kernel(emitter *e, const ts_func *f, const char *entry) {
  e->entry = entry;
  e->func = f;
  e->read_params = loaded_params(f);
  emit_find_nan_free(e, f);
  return e->hooks->kernel(e, f, entry);
}
