/*
 * emit_cpu.c — the CPU side of the LLVM emitter, the hooks target_x86.c
 * gives the shared emitter (and any CPU family could): the function
 * attributes that select the CPU, parallel loops outlined into a task
 * function called through ts_rt_parallel_for, and the kernel entry of the
 * runtime's ABI (runtime/runtime.h). The x86 tensor intrinsics are in
 * emit_intrin_x86.c.
 */
#include "codegen/emit_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- function attributes ---- */

static void add_fn_attr(emitter *e, LLVMValueRef fn, const char *k,
                        const char *v) {
  LLVMAttributeRef a = LLVMCreateStringAttribute(e->ctx, k, (unsigned)strlen(k),
                                                 v, (unsigned)strlen(v));
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, a);
}

void emit_cpu_fn_attrs(emitter *e, LLVMValueRef fn) {
  const char *cpu = ts_target_cpu(e->target);
  const char *features = ts_target_llvm_features(e->target);
  if (cpu && *cpu) add_fn_attr(e, fn, "target-cpu", cpu);
  if (features && *features) add_fn_attr(e, fn, "target-features", features);
  if (ts_target_vector_bits(e->target) >= 512) {
    add_fn_attr(e, fn, "prefer-vector-width", "512");
    add_fn_attr(e, fn, "min-legal-vector-width", "512");
  }
}

/* ---- parallel loops ---- */

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
    /* out of memory (counted): the node is not captured, and emit_oom
     * stops the emitter */
    int cap = c->cap ? c->cap * 2 : 16;
    const void **nodes = ts_realloc(c->nodes, sizeof *c->nodes * (size_t)cap);
    if (!nodes) return;
    c->nodes = nodes;
    bool *is_buf = ts_realloc(c->is_buf, sizeof *c->is_buf * (size_t)cap);
    if (!is_buf) return;
    c->is_buf = is_buf;
    c->cap = cap;
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

void emit_parallel(emitter *e, ts_stmt *s) {
  LLVMValueRef lo = emit_expr(e, ts_for_min(s)),
               n = emit_expr(e, ts_for_extent(s));
  capture_ctx cc = {.e = e, .seen = ts_node_map_create()};
  ts_visitor v = {
      .enter_stmt = capture_stmt, .visit_expr = capture_visit, .ctx = &cc};
  ts_stmt_walk(ts_for_body(s), &v);
  ts_node_map_destroy(cc.seen);
  if (emit_oom(e)) {
    free(cc.nodes);
    free(cc.is_buf);
    return;
  }

  /* closure = {rt, lo, captured...} */
  int nf = cc.n + 2, nb = cc.n + 3;
  LLVMTypeRef *fields = ts_arena_alloc(e->tmp, sizeof *fields * (size_t)nf);
  LLVMValueRef *values = ts_arena_alloc(e->tmp, sizeof *values * (size_t)nf);
  LLVMTypeRef *bparams = ts_arena_alloc(e->tmp, sizeof *bparams * (size_t)nb);
  LLVMValueRef *bargs = ts_arena_alloc(e->tmp, sizeof *bargs * (size_t)nb);
  if (!fields || !values || !bparams || !bargs) {
    free(cc.nodes);
    free(cc.is_buf);
    emit_fail(e, TS_ENOMEM, "code generation: out of memory");
    return;
  }
  fields[0] = emit_ptrt(e);
  values[0] = e->cur->rt;
  fields[1] = emit_i64t(e);
  values[1] = lo;
  for (int i = 0; i < cc.n; i++) {
    values[i + 2] = ts_node_map_get(e->cur->vals, cc.nodes[i]);
    fields[i + 2] = LLVMTypeOf(values[i + 2]);
  }
  LLVMTypeRef st_t = LLVMStructTypeInContext(e->ctx, fields, (unsigned)nf, 0);
  LLVMValueRef closure = emit_entry_alloca(e, st_t, 16);
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
  bparams[0] = emit_ptrt(e);
  bparams[1] = emit_i64t(e);
  bparams[2] = emit_i64t(e);
  for (int i = 0; i < cc.n; i++) bparams[i + 3] = fields[i + 2];
  LLVMTypeRef bty = LLVMFunctionType(emit_i32t(e), bparams, (unsigned)nb, 0);
  LLVMValueRef body_fn = LLVMAddFunction(e->mod, body_name, bty);
  LLVMSetLinkage(body_fn, LLVMInternalLinkage);
  emit_set_fn_attrs(e, body_fn);
  emit_add_enum_attr(e, body_fn, LLVMAttributeFunctionIndex, "alwaysinline", 0);
  for (int i = 0; i < cc.n; i++)
    if (cc.is_buf[i])
      emit_add_enum_attr(e, body_fn, (unsigned)i + 4, "noalias", 0);
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
            LLVMGetParam(body_fn, 2), ts_for_body(s), 0);
  /* each chunk's non-temporal stores are ordered before the pool's join */
  if (e->nontemporal && e->hooks->store_fence) e->hooks->store_fence(e);
  LLVMBuildRet(e->b, LLVMConstInt(emit_i32t(e), 0, 0));
  ts_node_map_destroy(bf.vals);

  /* The task function: i32 task(ptr closure, i64 begin, i64 end) unpacks
   * the closure and calls the body on [lo + begin, lo + end). */
  LLVMTypeRef params[3] = {emit_ptrt(e), emit_i64t(e), emit_i64t(e)};
  LLVMTypeRef fty = LLVMFunctionType(emit_i32t(e), params, 3, 0);
  LLVMValueRef task = LLVMAddFunction(e->mod, name, fty);
  LLVMSetLinkage(task, LLVMInternalLinkage);
  emit_set_fn_attrs(e, task);
  LLVMPositionBuilderAtEnd(
      e->b, LLVMAppendBasicBlockInContext(e->ctx, task, "entry"));
  LLVMValueRef cl = LLVMGetParam(task, 0);
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
  e->cur = saved;
  LLVMPositionBuilderAtEnd(e->b, saved_bb);
  free(cc.nodes);
  free(cc.is_buf);

  /* status = ts_rt_parallel_for(rt, task, closure, n) */
  LLVMTypeRef pf_params[4] = {emit_ptrt(e), emit_ptrt(e), emit_ptrt(e),
                              emit_i64t(e)};
  LLVMTypeRef pf_t = LLVMFunctionType(emit_i32t(e), pf_params, 4, 0);
  LLVMValueRef pf = emit_extern_fn(e, "ts_rt_parallel_for", pf_t);
  LLVMValueRef args[4] = {e->cur->rt, task, closure, n};
  emit_check_status(e, LLVMBuildCall2(e->b, pf_t, pf, args, 4, ""));
}

/* ---- the kernel ---- */

/* The kernel of the runtime's ABI: entry(ptr args, ptr rt) unpacks the
 * buffer pointers and calls an internal compute(ptr p0, ..., ptr rt). */
int emit_cpu_kernel(emitter *e, const ts_func *f, const char *entry) {
  int n = ts_func_n_params(f);
  /* compute(ptr noalias p0, ..., ptr rt): the body. */
  LLVMTypeRef *pt = ts_arena_alloc(e->tmp, sizeof *pt * (size_t)(n + 1));
  LLVMValueRef *args = ts_arena_alloc(e->tmp, sizeof *args * (size_t)(n + 1));
  if (!pt || !args)
    return emit_fail(e, TS_ENOMEM, "code generation: out of memory");
  for (int i = 0; i <= n; i++) pt[i] = emit_ptrt(e);
  char name[256];
  snprintf(name, sizeof name, "%s_compute", entry);
  LLVMTypeRef cty = LLVMFunctionType(emit_i32t(e), pt, (unsigned)n + 1, 0);
  LLVMValueRef compute = LLVMAddFunction(e->mod, name, cty);
  LLVMSetLinkage(compute, LLVMInternalLinkage);
  emit_set_fn_attrs(e, compute);
  for (int i = 0; i < n; i++) {
    ts_buffer *b = ts_func_param(f, i);
    emit_add_enum_attr(e, compute, (unsigned)i + 1, "noalias", 0);
    emit_add_enum_attr(e, compute, (unsigned)i + 1, "nocapture", 0);
    int align = ts_buffer_align(b);
    if (align > 0 && (align & (align - 1)) == 0)
      emit_add_enum_attr(e, compute, (unsigned)i + 1, "align", (uint64_t)align);
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
  emit_stmt(e, ts_func_body(f));
  LLVMBuildRet(e->b, LLVMConstInt(emit_i32t(e), 0, 0));
  ts_node_map_destroy(cf.vals);
  e->cur = NULL;

  /* entry(ptr args, ptr rt): unpack and call compute. */
  LLVMTypeRef ept[2] = {emit_ptrt(e), emit_ptrt(e)};
  LLVMTypeRef ety = LLVMFunctionType(emit_i32t(e), ept, 2, 0);
  LLVMValueRef ef = LLVMAddFunction(e->mod, entry, ety);
  emit_set_fn_attrs(e, ef);
  LLVMPositionBuilderAtEnd(e->b,
                           LLVMAppendBasicBlockInContext(e->ctx, ef, "entry"));
  for (int i = 0; i < n; i++) {
    LLVMValueRef idx = LLVMConstInt(emit_i64t(e), (unsigned)i, 0);
    LLVMValueRef slot = LLVMBuildInBoundsGEP2(e->b, emit_ptrt(e),
                                              LLVMGetParam(ef, 0), &idx, 1, "");
    args[i] = LLVMBuildLoad2(e->b, emit_ptrt(e), slot, "");
  }
  args[n] = LLVMGetParam(ef, 1);
  LLVMValueRef r =
      LLVMBuildCall2(e->b, cty, compute, args, (unsigned)n + 1, "");
  LLVMBuildRet(e->b, r);
  return e->status;
}

/* ---- a kernel with a prologue (ts_build_split_kernel) ---- */

/* i32 name(ptr args, ptr rt): calls fn(ptr args2, ptr rt), args2 holding
 * args[from[i]] for i < n_from, then the hoisted buffers. */
static void emit_forwarder(emitter *e, const char *name, const char *fn,
                           const int *from, int n_from, LLVMValueRef *bufs,
                           int n_bufs) {
  LLVMTypeRef pt[2] = {emit_ptrt(e), emit_ptrt(e)};
  LLVMTypeRef fty = LLVMFunctionType(emit_i32t(e), pt, 2, 0);
  LLVMValueRef callee = LLVMGetNamedFunction(e->mod, fn);
  LLVMSetLinkage(callee, LLVMInternalLinkage);
  LLVMValueRef ef = LLVMAddFunction(e->mod, name, fty);
  emit_set_fn_attrs(e, ef);
  LLVMPositionBuilderAtEnd(e->b,
                           LLVMAppendBasicBlockInContext(e->ctx, ef, "entry"));
  LLVMTypeRef arr = LLVMArrayType(emit_ptrt(e), (unsigned)(n_from + n_bufs));
  LLVMValueRef a = LLVMBuildAlloca(e->b, arr, "args");
  for (int i = 0; i < n_from + n_bufs; i++) {
    LLVMValueRef v;
    if (i < n_from) {
      LLVMValueRef idx = LLVMConstInt(emit_i64t(e), (unsigned)from[i], 0);
      LLVMValueRef slot = LLVMBuildInBoundsGEP2(
          e->b, emit_ptrt(e), LLVMGetParam(ef, 0), &idx, 1, "");
      v = LLVMBuildLoad2(e->b, emit_ptrt(e), slot, "");
    } else {
      v = bufs[i - n_from];
    }
    LLVMValueRef idx = LLVMConstInt(emit_i64t(e), (unsigned)i, 0);
    LLVMBuildStore(e->b, v,
                   LLVMBuildInBoundsGEP2(e->b, emit_ptrt(e), a, &idx, 1, ""));
  }
  LLVMValueRef args[2] = {a, LLVMGetParam(ef, 1)};
  LLVMBuildRet(e->b, LLVMBuildCall2(e->b, fty, callee, args, 2, ""));
}

int emit_cpu_split_entries(emitter *e, const ts_func *main, const int *inputs,
                           int n_inputs, int n_hoisted, const char *entry,
                           const char *main_fn, const char *pre_fn) {
  int n = ts_func_n_params(main) - n_hoisted;
  LLVMValueRef *bufs = ts_arena_alloc(e->tmp, sizeof *bufs * (size_t)n_hoisted);
  LLVMValueRef *sizes =
      ts_arena_alloc(e->tmp, sizeof *sizes * (size_t)n_hoisted);
  int *all = ts_arena_alloc(e->tmp, sizeof *all * (size_t)(n > 0 ? n : 1));
  if (!bufs || !sizes || !all)
    return emit_fail(e, TS_ENOMEM, "code generation: out of memory");
  for (int k = 0; k < n_hoisted; k++) {
    ts_buffer *b = ts_func_param(main, n + k);
    int64_t bytes = ts_buffer_bytes(b);
    if (bytes < 1) bytes = 1;
    char name[200];
    snprintf(name, sizeof name, "%s__h%d", entry, k);
    LLVMTypeRef ty =
        LLVMArrayType2(LLVMInt8TypeInContext(e->ctx), (uint64_t)bytes);
    LLVMValueRef g = LLVMAddGlobal(e->mod, ty, name);
    LLVMSetInitializer(g, LLVMConstNull(ty));
    LLVMSetLinkage(g, LLVMInternalLinkage);
    LLVMSetAlignment(g, 64);
    bufs[k] = g;
    sizes[k] = LLVMConstInt(emit_i64t(e), (uint64_t)bytes, 0);
  }
  for (int i = 0; i < n; i++) all[i] = i;
  emit_forwarder(e, entry, main_fn, all, n, bufs, n_hoisted);
  char name[200];
  snprintf(name, sizeof name, "%s__prologue", entry);
  emit_forwarder(e, name, pre_fn, inputs, n_inputs, bufs, n_hoisted);
  /* { i64 n; [n x ptr] buf; [n x i64] bytes } */
  LLVMValueRef fv[3] = {
      LLVMConstInt(emit_i64t(e), (uint64_t)n_hoisted, 0),
      LLVMConstArray(emit_ptrt(e), bufs, (unsigned)n_hoisted),
      LLVMConstArray(emit_i64t(e), sizes, (unsigned)n_hoisted)};
  snprintf(name, sizeof name, "%s__hoisted", entry);
  LLVMValueRef init = LLVMConstStructInContext(e->ctx, fv, 3, 0);
  LLVMValueRef table = LLVMAddGlobal(e->mod, LLVMTypeOf(init), name);
  LLVMSetInitializer(table, init);
  LLVMSetGlobalConstant(table, 1);
  return e->status;
}
