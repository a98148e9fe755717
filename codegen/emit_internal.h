/*
 * emit_internal.h — what the files of the LLVM emitter share: emit.c (types,
 * helpers, statements, the kernel entry), emit_expr.c (expressions, loads
 * and stores), emit_math.c (math intrinsics, libm replacements), the hooks
 * target families take (emit_cpu.c: CPU function attributes, parallel
 * loops, the runtime's ABI; emit_nvptx.c: thread bindings, shared memory,
 * PTX kernels, GPU math) and the intrinsics by family (emit_intrin_x86.c,
 * emit_intrin_nvptx.c).
 */
#ifndef TESSERA_CODEGEN_EMIT_INTERNAL_H
#define TESSERA_CODEGEN_EMIT_INTERNAL_H

#include "codegen/target_internal.h"

/* ---- types and helpers (emit.c) ---- */

/* The LLVM type of a scalar of dtype t (its lanes ignored). */
LLVMTypeRef emit_scalar_type(emitter *e, ts_dtype t);
/* The type of a value in registers. */
LLVMTypeRef emit_reg_type(emitter *e, ts_dtype t);
/* The type of one element in memory (bool is a byte). */
LLVMTypeRef emit_mem_type(emitter *e, ts_dtype t);
LLVMTypeRef emit_i64t(emitter *e);
LLVMTypeRef emit_i32t(emitter *e);
LLVMTypeRef emit_ptrt(emitter *e);
LLVMTypeRef emit_f32t(emitter *e);
/* t is float16 or bfloat16. */
bool emit_is_half(ts_dtype t);
/* v broadcast to a vector of `lanes` lanes (v itself when lanes <= 1). */
LLVMValueRef emit_splat(emitter *e, LLVMValueRef v, int lanes);
/* Calls the LLVM intrinsic `name` with the given overload types. */
LLVMValueRef emit_call_intrinsic(emitter *e, const char *name,
                                 LLVMTypeRef *overloads, int n_over,
                                 LLVMValueRef *args, int n);
/* Calls a non-overloaded intrinsic, bitcasting each argument to the
 * parameter type it declares; NULL (and an error) when LLVM lacks it. */
LLVMValueRef emit_call_fixed(emitter *e, const char *name, LLVMValueRef *args,
                             int n);
/* A load of type t from p with the given alignment. */
LLVMValueRef emit_load_vec(emitter *e, LLVMTypeRef t, LLVMValueRef p,
                           unsigned align);
/* Declares (once) an external function of the process. */
LLVMValueRef emit_extern_fn(emitter *e, const char *name, LLVMTypeRef fty);
void emit_add_enum_attr(emitter *e, LLVMValueRef fn, unsigned idx,
                        const char *name, uint64_t value);
/* nounwind, and on CPUs the target cpu, features and vector width. */
void emit_set_fn_attrs(emitter *e, LLVMValueRef fn);
/* Branches to the function's failure exit when status != 0. */
void emit_check_status(emitter *e, LLVMValueRef status);
/* An alloca in the function's entry block. */
LLVMValueRef emit_entry_alloca(emitter *e, LLVMTypeRef t, unsigned align);

/* ---- statements (emit.c) ---- */

void emit_stmt(emitter *e, ts_stmt *s);
/* for var in [lo, hi): body, as a phi loop (unroll > 0: marked
 * llvm.loop.unroll.full; < 0: llvm.loop.unroll.disable). */
void emit_loop(emitter *e, ts_expr *var, LLVMValueRef lo, LLVMValueRef hi,
               ts_stmt *body, int unroll);

/* ---- expressions (emit_expr.c) ---- */

LLVMValueRef emit_expr(emitter *e, ts_expr *x);
void emit_store(emitter *e, ts_stmt *s);
/* The data pointer of a buffer (NULL, with an error, when it is unknown). */
LLVMValueRef emit_buffer_data(emitter *e, ts_buffer *b);
/* A run of statements seq[i..i+L) that copies an L x L tile with one side
 * strided, emitted as a transpose in registers (emit_transpose.c): returns
 * L, or 0 (nothing emitted) when the statements are not such a run. */
int emit_transpose_run(emitter *e, ts_stmt *seq, int i);
int emit_interleave_run(emitter *e, ts_stmt *seq, int i);
LLVMValueRef emit_cast(emitter *e, ts_dtype to, ts_dtype from, LLVMValueRef v);
LLVMValueRef emit_undef(emitter *e, ts_dtype t);
/* Float16/bfloat16 are computed in float32 (rounded back after each
 * operation, as the interpreter does). */
LLVMValueRef emit_to_work(emitter *e, LLVMValueRef v, ts_dtype t);
LLVMValueRef emit_from_work(emitter *e, LLVMValueRef v, ts_dtype t);
/* Allows contraction into FMAs and reassociation on a float instruction. */
LLVMValueRef emit_contract(LLVMValueRef v);
/* Structural equality of two expressions (vars by identity). */
bool emit_same_expr(const ts_expr *a, const ts_expr *b);
/* A serial loop folding L consecutive float32 elements into one scalar
 * (a sum, maximum or minimum) as one vector reduction; false (nothing
 * emitted) when the loop is not such a fold (emit_reduce.c). */
bool emit_lane_fold(emitter *e, ts_stmt *loop);
/* The NaN-free buffers of f (emit_minmax.c): allocated by f, of a float
 * dtype, and only ever stored non-NaN constants, copies of NaN-free
 * buffers and maxima or minima with such a copy; sets e->nan_free. */
void emit_find_nan_free(emitter *e, const ts_func *f);
/* Which operand of x (0 or 1) is a load of a NaN-free buffer when x is a
 * max or min; -1 otherwise. */
int emit_nan_free_operand(const emitter *e, const ts_expr *x);
/* max(acc, x) (or min) for an acc that is not NaN: x > acc ? x : acc. */
LLVMValueRef emit_minmax_select(emitter *e, bool is_max, LLVMValueRef acc,
                                LLVMValueRef x);

/* ---- math (emit_math.c) ---- */

/* The IR's built-in math intrinsics on the evaluated arguments args[0..n)
 * of a call of dtype t. */
LLVMValueRef emit_math_call(emitter *e, const char *name, ts_dtype t,
                            LLVMValueRef *args, int n);
/* The float constant v of type t (splat over a vector type). */
LLVMValueRef emit_const_fp(LLVMTypeRef t, double v);
/* exp on CPUs (an emit_hooks.exp). */
LLVMValueRef emit_cpu_exp(emitter *e, LLVMTypeRef ty, LLVMValueRef x);

/* ---- CPU hooks (emit_cpu.c) ---- */

/* target-cpu, target-features and the preferred vector width. */
void emit_cpu_fn_attrs(emitter *e, LLVMValueRef fn);
/* A parallel loop outlined into a task run by ts_rt_parallel_for. */
void emit_parallel(emitter *e, ts_stmt *s);
/* The kernel `entry` of the runtime's ABI (runtime/runtime.h). */
int emit_cpu_kernel(emitter *e, const ts_func *f, const char *entry);

/* ---- NVPTX hooks (emit_nvptx.c) ---- */

/* A loop bound to blockIdx/threadIdx (or vthread, an ordinary loop). */
void emit_thread_loop(emitter *e, ts_stmt *s);
/* The error for a parallel loop: bind it to threads instead. */
void emit_gpu_parallel(emitter *e, ts_stmt *s);
/* A buffer of scope "shared": a module-level array in address space 3. */
bool emit_shared_alloc(emitter *e, ts_stmt *s);
/* exp, exp2, log, log2, log10 and pow without libm. */
LLVMValueRef emit_gpu_exp(emitter *e, LLVMTypeRef ty, LLVMValueRef x);
LLVMValueRef emit_gpu_math(emitter *e, const char *name, LLVMTypeRef ty,
                           LLVMValueRef *args);
/* The PTX kernel `entry`, with the launch geometry in e->grid/e->block. */
int emit_cuda_kernel(emitter *e, const ts_func *f, const char *entry);

/* ---- intrinsics by family ---- */

extern const emit_intrinsic emit_x86_intrinsics[];   /* emit_intrin_x86.c */
extern const emit_intrinsic emit_nvptx_intrinsics[]; /* emit_intrin_nvptx.c */

#endif /* TESSERA_CODEGEN_EMIT_INTERNAL_H */
