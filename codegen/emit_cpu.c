/*
 * emit_cpu.c — the CPU side of the LLVM emitter: the x86 implementations
 * of the tensor intrinsics tensorize calls (AVX512-VNNI and AVX512-BF16 dot
 * products, AMX tile GEMMs), parallel loops outlined into a task function
 * called through ts_rt_parallel_for, and the kernel entry of the runtime's
 * ABI (runtime/runtime.h).
 */
#include "codegen/emit_internal.h"

#include <stdio.h>
#include <stdlib.h>

/* ---- x86 tensor intrinsics (the implementations tensorize calls) ---- */

static bool need_feature(emitter *e, const char *intrin, const char *feature) {
  if (!e->cuda && ts_target_has_feature(e->target, feature)) return true;
  emit_fail(e, TS_EUNSUPPORTED,
            "code generation: %s needs the CPU feature '%s', which target '%s' "
            "does not have",
            intrin, feature, ts_target_str(e->target));
  return false;
}

/* Step s of a VNNI dot: A's four bytes at 4 s splat to every lane (each
 * byte xor-ed with 0x80 when bias is not NULL) and B's 64 bytes at 64 s. */
static void vnni_step(emitter *e, LLVMValueRef *a, int s, LLVMValueRef bias,
                      LLVMValueRef *av, LLVMValueRef *bv) {
  LLVMTypeRef i8 = LLVMInt8TypeInContext(e->ctx);
  LLVMValueRef aoff =
      LLVMConstInt(emit_i64t(e), (unsigned long long)(4 * s), 0);
  LLVMValueRef boff =
      LLVMConstInt(emit_i64t(e), (unsigned long long)(64 * s), 0);
  LLVMValueRef ap = LLVMBuildInBoundsGEP2(e->b, i8, a[1], &aoff, 1, "");
  LLVMValueRef bp = LLVMBuildInBoundsGEP2(e->b, i8, a[2], &boff, 1, "");
  LLVMValueRef a32 = emit_load_vec(e, emit_i32t(e), ap, 1);
  if (bias) a32 = LLVMBuildXor(e->b, a32, bias, "");
  *av = emit_splat(e, a32, 16);
  *bv = emit_load_vec(e, LLVMVectorType(emit_i32t(e), 16), bp, 1);
}

/* tessera.vnni_dot_16x4(&C int32[16], &A uint8[4], &B int8[16][4]) and
 * tessera.vnni_dot_16x16(&C int32[16], &A uint8[16], &B int8[4][16][4]):
 * C[j] += sum_k A[k] * B[j][k], vpdpbusd in `steps` steps of 4 (B's step s
 * at byte 64 s), the accumulator kept in a register between them. */
void emit_vnni_dot(emitter *e, LLVMValueRef *a, int steps) {
  const char *name =
      steps == 1 ? "tessera.vnni_dot_16x4" : "tessera.vnni_dot_16x16";
  if (!need_feature(e, name, "avx512vnni")) return;
  LLVMTypeRef v16 = LLVMVectorType(emit_i32t(e), 16);
  LLVMValueRef c = emit_load_vec(e, v16, a[0], 4);
  for (int s = 0; s < steps && c; s++) {
    LLVMValueRef args[3] = {c, NULL, NULL};
    vnni_step(e, a, s, NULL, &args[1], &args[2]);
    c = emit_call_fixed(e, "llvm.x86.avx512.vpdpbusd.512", args, 3);
  }
  if (c) LLVMSetAlignment(LLVMBuildStore(e->b, c, a[0]), 4);
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
void emit_vnni_s8_dot(emitter *e, LLVMValueRef *a, int steps) {
  const char *name =
      steps == 1 ? "tessera.vnni_s8_dot_16x4" : "tessera.vnni_s8_dot_16x16";
  if (!need_feature(e, name, "avx512vnni")) return;
  LLVMTypeRef v16 = LLVMVectorType(emit_i32t(e), 16);
  LLVMValueRef bias32 = LLVMConstInt(emit_i32t(e), 0x80808080u, 0);
  LLVMValueRef bias = emit_splat(e, bias32, 16);
  LLVMValueRef c = emit_load_vec(e, v16, a[0], 4);
  LLVMValueRef sums = LLVMConstNull(v16);
  for (int s = 0; s < steps && c && sums; s++) {
    LLVMValueRef av, bv;
    vnni_step(e, a, s, bias32, &av, &bv);
    LLVMValueRef dot[3] = {c, av, bv};
    c = emit_call_fixed(e, "llvm.x86.avx512.vpdpbusd.512", dot, 3);
    LLVMValueRef sum[3] = {sums, bias, bv};
    sums = emit_call_fixed(e, "llvm.x86.avx512.vpdpbusd.512", sum, 3);
  }
  if (c && sums)
    LLVMSetAlignment(
        LLVMBuildStore(e->b, LLVMBuildSub(e->b, c, sums, ""), a[0]), 4);
}

/* tessera.avx512bf16_dot_16x2(&C float32[16], &A bfloat16[2],
 * &B bfloat16[16][2]): C[j] += A[0] B[j][0] + A[1] B[j][1] (vdpbf16ps). */
void emit_bf16_dot(emitter *e, LLVMValueRef *a) {
  if (!need_feature(e, "tessera.avx512bf16_dot_16x2", "avx512bf16")) return;
  LLVMTypeRef v16f = LLVMVectorType(emit_f32t(e), 16);
  LLVMTypeRef v16i = LLVMVectorType(emit_i32t(e), 16);
  LLVMValueRef c = emit_load_vec(e, v16f, a[0], 4);
  LLVMValueRef av = emit_splat(e, emit_load_vec(e, emit_i32t(e), a[1], 2), 16);
  LLVMValueRef bv = emit_load_vec(e, v16i, a[2], 2);
  LLVMValueRef args[3] = {c, av, bv};
  LLVMValueRef r =
      emit_call_fixed(e, "llvm.x86.avx512bf16.dpbf16ps.512", args, 3);
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
void emit_amx_gemm(emitter *e, ts_expr *x, LLVMValueRef *a, bool int8) {
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
      LLVMBuildMul(e->b, a[1], LLVMConstInt(emit_i64t(e), 4, 0), "");
  LLVMValueRef lda_b =
      LLVMBuildMul(e->b, a[3], LLVMConstInt(emit_i64t(e), ebytes, 0), "");
  LLVMValueRef ldb_b =
      LLVMBuildMul(e->b, a[5], LLVMConstInt(emit_i64t(e), ebytes, 0), "");
  int64_t kconst;
  bool unroll = ts_expr_is_const_int(ts_expr_operand(x, 6), &kconst) &&
                kconst >= 0 && kconst / kstep <= 64;
  LLVMTypeRef i8t = LLVMInt8TypeInContext(e->ctx);
  LLVMValueRef c_args[4] = {i16c(e, 16), i16c(e, 64), a[0], ldc_b};
  /* One step: tile A at column offset kk*kstep, tile B at row
   * kk*(kstep/(4/ebytes)). */
  if (unroll) {
    LLVMValueRef c =
        emit_call_fixed(e, "llvm.x86.tileloadd64.internal", c_args, 4);
    for (int64_t kk = 0; kk < kconst / kstep && c; kk++) {
      LLVMValueRef aoff = LLVMConstInt(
          emit_i64t(e), (unsigned long long)(kk * kstep * ebytes), 0);
      LLVMValueRef ap = LLVMBuildInBoundsGEP2(e->b, i8t, a[2], &aoff, 1, "");
      LLVMValueRef brow =
          LLVMConstInt(emit_i64t(e), (unsigned long long)(kk * 16), 0);
      LLVMValueRef bp = LLVMBuildInBoundsGEP2(
          e->b, i8t, a[4],
          (LLVMValueRef[]){LLVMBuildMul(e->b, brow, ldb_b, "")}, 1, "");
      LLVMValueRef la[4] = {i16c(e, 16), i16c(e, 64), ap, lda_b};
      LLVMValueRef at =
          emit_call_fixed(e, "llvm.x86.tileloadd64.internal", la, 4);
      LLVMValueRef lb[4] = {i16c(e, 16), i16c(e, 64), bp, ldb_b};
      LLVMValueRef bt =
          emit_call_fixed(e, "llvm.x86.tileloadd64.internal", lb, 4);
      LLVMValueRef d[6] = {i16c(e, 16), i16c(e, 64), i16c(e, 64), c, at, bt};
      c = emit_call_fixed(e, dp, d, 6);
    }
    if (c) {
      LLVMValueRef s[5] = {i16c(e, 16), i16c(e, 64), a[0], ldc_b, c};
      emit_call_fixed(e, "llvm.x86.tilestored64.internal", s, 5);
    }
    return;
  }
  emit_fail(e, TS_EUNSUPPORTED,
            "code generation: %s needs a constant K that is a multiple of %lld "
            "(at most %lld)",
            name, (long long)kstep, (long long)(64 * kstep));
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
  if (e->cuda) {
    emit_fail(
        e, TS_EINVAL,
        "code generation: loop '%s' is parallel; on a cuda target bind it "
        "to blockIdx/threadIdx instead",
        ts_var_name(ts_for_var(s)));
    return;
  }
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
  int nf = cc.n + 2;
  LLVMTypeRef *fields = ts_arena_alloc(e->tmp, sizeof *fields * (size_t)nf);
  LLVMValueRef *values = ts_arena_alloc(e->tmp, sizeof *values * (size_t)nf);
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
  int nb = cc.n + 3;
  LLVMTypeRef *bparams = ts_arena_alloc(e->tmp, sizeof *bparams * (size_t)nb);
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
            LLVMGetParam(body_fn, 2), ts_for_body(s), false);
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
  LLVMValueRef *bargs = ts_arena_alloc(e->tmp, sizeof *bargs * (size_t)nb);
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
  LLVMValueRef *args = ts_arena_alloc(e->tmp, sizeof *args * (size_t)(n + 1));
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
