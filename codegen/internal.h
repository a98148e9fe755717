/*
 * internal.h — state shared by the files of codegen/: the LLVM emitter that
 * walks a lowered function and the build driver around it.
 */
#ifndef TESSERA_CODEGEN_INTERNAL_H
#define TESSERA_CODEGEN_INTERNAL_H

#include "codegen/codegen.h"
#include "tir/alloc.h"

#include <llvm-c/Core.h>

/* One LLVM function being emitted: its value map and helpers. */
typedef struct emit_fn {
  LLVMValueRef fn;
  LLVMBasicBlockRef alloca_bb; /* the entry block, for hoisted allocas */
  LLVMValueRef rt;             /* the runtime handle (ptr) */
  ts_node_map *vals;           /* var -> LLVMValueRef, buffer -> data ptr */
  LLVMBasicBlockRef fail_bb;   /* returns the status in fail_phi */
  LLVMValueRef fail_phi;
} emit_fn;

/* What the target's family does where targets differ
 * (codegen/target_internal.h). */
typedef struct emit_hooks emit_hooks;

typedef struct emitter {
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  LLVMBuilderRef b;
  const ts_target *target;
  const emit_hooks *hooks; /* the target family's */
  emit_fn *cur;
  ts_var_ranges *ranges; /* loop var ranges, for fast index arithmetic */
  int n_tasks;           /* outlined parallel loops so far */
  const char *entry;
  ts_error *err;
  int status;           /* first error code, TS_OK while fine */
  ts_arena *tmp;        /* the emitter's temporary arrays (the lowered
                           function's arena) */
  unsigned long oom;    /* ts_alloc_failures() as emission started: once it
                           grows, status becomes TS_ENOMEM (emit_oom) */
  LLVMValueRef mask;    /* lanes enabled by an enclosing vector if, or NULL */
  const ts_func *func;  /* the function being emitted (its parameters) */
  int nontemporal;      /* enclosing loops annotated TS_ANN_NONTEMPORAL */
  uint64_t read_params; /* bit i: parameter i is loaded somewhere in func
                           (all bits past 64 parameters) */
  ts_buffer **nan_free; /* buffers that never hold a NaN (emit_minmax.c) */
  int n_nan_free;
  /* GPU launch geometry collected from thread-bound loops */
  int64_t grid[3], block[3];
  int64_t shared_bytes; /* static shared memory */
} emitter;

/* Whether an allocation failed since emission started (then e->status is
 * TS_ENOMEM and the emitter stops: a map that lost an entry must not be
 * read). */
bool emit_oom(emitter *e);

/* Emits the lowered function f as the kernel `entry` into e->mod (the
 * family's kernel: CPU ABI of runtime.h, a PTX kernel). Returns TS_OK or an
 * error. */
int emit_kernel(emitter *e, const ts_func *f, const char *entry);

/* The entries of a split kernel (ts_build_split_kernel), after `main_fn`
 * (main's kernel) and `pre_fn` (the prologue's) were emitted: the hoisted
 * buffers as zeroed globals, `entry` calling main_fn on its arguments and
 * them, `<entry>__prologue` calling pre_fn on arguments inputs[] and them,
 * and the table `<entry>__hoisted`. main's last n_hoisted parameters give
 * the buffers' sizes. */
int emit_cpu_split_entries(emitter *e, const ts_func *main, const int *inputs,
                           int n_inputs, int n_hoisted, const char *entry,
                           const char *main_fn, const char *pre_fn);

/* requires: a lowered (flat) program | maintains: semantics | breaks: —
 * the barrier pass (codegen/lower_sync.c): when the function has "shared"
 * buffers and threadIdx loops, inserts tessera.cuda.syncthreads barriers
 * between shared-memory writes and other threads' reads, and between reads and
 * the next writes (loop carried), at points every thread of the block reaches;
 * TS_EUNSUPPORTED naming the buffer when a needed barrier has no such point
 * (the function is then half-rewritten). */
int lower_sync(ts_func *f, ts_error *err);

/* requires: no blocks | maintains: semantics | breaks: code size — the
 * loop partitioning of codegen/partition.c: each `if` guarding the body of
 * an imperfect tile (`fused < extent`) is hoisted to the outermost loop
 * where it can be decided for the whole nest below, which is duplicated
 * into a copy without the condition (taken where it holds throughout) and
 * a tail copy that keeps it. No-op on functions with thread-bound loops. */
int ts_lower_partition(ts_func *f, ts_error *err);
int ts_lower_partition_decide(ts_func *f, ts_error *err);
/* The prefetches of loops annotated TS_ANN_PREFETCH (prefetch.c). */
int ts_lower_prefetch(ts_func *f, ts_error *err);

/* requires: a flat, vectorized program | maintains: semantics | breaks: —
 * register promotion (codegen/promote.c): in each serial loop, the places
 * of a buffer the function allocates that the loop reads and writes at
 * indices it does not change (after unrolling the small inner loops that
 * index them) move to a small local buffer at constant offsets, loaded
 * before the loop and stored after it, which LLVM keeps in registers: at
 * most max_bytes per loop (<= 0: 384). No-op on functions with
 * thread-bound loops. */
int ts_lower_promote(ts_func *f, int max_bytes, ts_error *err);

/* Integer conditions decided by enumeration (codegen/points.c): the points
 * of the loop variables an expression uses, each over its range in
 * `ranges` (at most TS_POINTS_MAX_VARS variables; `over` when one has no
 * constant range or there are more). */
#define TS_POINTS_MAX_VARS 8
#define TS_POINTS_MAX_FACTS 16
typedef struct ts_points {
  const ts_var_ranges *ranges;
  const ts_expr *vars[TS_POINTS_MAX_VARS];
  int64_t min[TS_POINTS_MAX_VARS], extent[TS_POINTS_MAX_VARS];
  int n;
  bool over;
} ts_points;
/* Adds the variables e uses. */
void ts_points_add(ts_points *p, ts_expr *e);
/* The number of points, or -1 when over `cap` (or p->over). */
int64_t ts_points_count(const ts_points *p, int64_t cap);
/* Sets each variable's range in `point` to its value at index `at`. */
void ts_points_set(const ts_points *p, const int64_t *at, ts_var_ranges *point);
/* Moves `at` (zeroed at the first point) to the next point; false after
 * the last. */
bool ts_points_next(const ts_points *p, int64_t *at);
/* The value of integer expression e at a point (every var one value
 * wide); false when it does not reduce to a constant. */
bool ts_points_value(const ts_expr *e, const ts_var_ranges *point, int64_t *v);
/* Whether condition e holds at a point: 1, 0, or -1 (undecidable). */
int ts_points_holds(const ts_expr *e, const ts_var_ranges *point);
/* The nodes of expression e: what evaluating it at a point costs. */
int64_t ts_points_size(ts_expr *e);
/* Expressions compiled over the variables of a ts_points (which must
 * outlive it) and evaluated at a point `at` (as ts_points_next steps it)
 * much faster than by bounds, with the same answers. */
typedef struct ts_points_prog ts_points_prog;
ts_points_prog *ts_points_prog_create(const ts_points *p);
void ts_points_prog_destroy(ts_points_prog *g);
/* Adds e (a condition when `cond`: decided as ts_points_holds does); its
 * handle, or -1 when e has nodes the program does not take (loads, calls,
 * lets, non-integer values). */
int ts_points_prog_add(ts_points_prog *g, ts_expr *e, bool cond);
/* As ts_points_value and ts_points_holds, at point `at`. */
bool ts_points_prog_value(ts_points_prog *g, int h, const int64_t *at,
                          int64_t *v);
int ts_points_prog_holds(ts_points_prog *g, int h, const int64_t *at);
/* The facts' tables, kept from one decision to the next (NULL: none):
 * a fact is known by its address, so a cache lives no longer than the
 * expressions it has seen, and a fact's table is redone when the ranges
 * of its variables change. */
typedef struct ts_points_cache ts_points_cache;
ts_points_cache *ts_points_cache_create(void);
void ts_points_cache_destroy(ts_points_cache *k);
/* Whether `cond` holds wherever all of `facts` do, over the points of the
 * variables they use (at most max_points; the facts that would exceed it
 * are left out, which only widens the set; with none, over the ranges
 * alone): 1 at every such point (or there are none), 0 at none, -1 at
 * some, or undecidable. `budget` (NULL: none) bounds the work: each call
 * takes the points it enumerates times the nodes evaluated at each,
 * and answers -1 without enumerating where the budget left is short. */
int ts_points_decide(ts_expr *cond, ts_expr *const *facts, int n_facts,
                     const ts_var_ranges *ranges, int64_t max_points,
                     int64_t *budget, ts_points_cache *cache);

/* The statements of loop s (constant min mn, extent ex) unrolled: ex copies
 * of its body with the loop var replaced by mn + i (codegen/lower.c). */
ts_stmt *lower_unroll_loop(ts_arena *a, ts_stmt *s, int64_t mn, int64_t ex);

/* Conversions with the 16-bit float formats (codegen/convert.c), scalar or
 * vector: float32 -> bfloat16/float16 rounding to nearest even, and back.
 * Native fptrunc/fpext where the target's family says the target has the
 * instructions (CUDA, F16C, AVX512-BF16), else integer code on the bit
 * patterns, so no kernel calls a compiler-rt helper. */
LLVMValueRef emit_f32_to_half(emitter *e, LLVMValueRef v, bool bf16);
LLVMValueRef emit_half_to_f32(emitter *e, LLVMValueRef v, bool bf16);

/* Records the first error on the emitter; returns the code. */
int emit_fail(emitter *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif /* TESSERA_CODEGEN_INTERNAL_H */
