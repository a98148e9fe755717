/*
 * runtime.h — the public interface of tessera's runtime: what generated code
 * calls and what loads, runs, checks and times it.
 *
 * Parts: the thread pool (ts_runtime, ts_rt_parallel_for) and aligned
 * allocation used by generated kernels; the object loader that links an
 * in-memory ELF object into the process with ORC LLJIT; CPU feature queries
 * and the AMX permission request; the CUDA driver loader (libcuda.so.1 is
 * opened at run time, never linked); the timing evaluator (CPU and GPU); and
 * argument set-up (aligned host buffers, seeded inputs, output comparison).
 *
 * The kernel ABI — the contract between the code generator and this module:
 *  - A CPU kernel is a relocatable ELF object in memory defining one entry
 *    symbol `int32_t ENTRY(void *const *args, void *rt)`: args[i] is the data
 *    pointer of parameter i (compact row-major storage of its dtype;
 *    bfloat16/float16 as 16-bit patterns, bool as one byte); rt is the
 *    ts_runtime handle, passed through unchanged to the functions below (it
 *    may be NULL: parallel loops then run serially). The entry returns 0 on
 *    success and non-zero on failure (a failed runtime allocation, ...).
 *  - Generated code may call, resolved from the host process by ORC (so every
 *    executable that loads kernels must export its symbols: -rdynamic, CMake
 *    ENABLE_EXPORTS):
 *      int32_t ts_rt_parallel_for(void *rt, ts_rt_task task, void *closure,
 *                                 int64_t n);
 *      void *ts_rt_alloc(void *rt, int64_t bytes, int64_t align);
 *      void ts_rt_free(void *rt, void *p);
 *    and the C math library (expf, erff, tanhf, ...), resolved from the
 *    process.
 *  - The number of threads comes from the target's -num-cores (default: the
 *    online cores); the caller creates the ts_runtime with it.
 *
 * Errors: functions return TS_OK or a negative TS_E* code and fill the
 * `ts_error *err` out-parameter (may be NULL), as everywhere in tessera.
 */
#ifndef TESSERA_RUNTIME_H
#define TESSERA_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tir/tir.h"

/* ========================================================================
 * Thread pool and the functions generated code calls
 * ======================================================================== */

typedef struct ts_runtime ts_runtime;

/* A parallel loop body: runs iterations [begin, end) and returns 0, or
 * non-zero to report a failure. */
typedef int32_t (*ts_rt_task)(void *closure, int64_t begin, int64_t end);

/* The largest thread count a runtime accepts. */
#define TS_RT_MAX_THREADS 1024

/* Creates a runtime with a pool of n_threads threads in all (the caller of
 * ts_rt_parallel_for is one of them, so n_threads - 1 workers are started;
 * n_threads <= 0 means the number of online cores). Workers spin briefly
 * after a parallel loop, then sleep. On success *out is a new runtime the
 * caller destroys with ts_runtime_destroy; on failure *out is untouched
 * (TS_EINVAL above TS_RT_MAX_THREADS, TS_ENOMEM when threads cannot start). */
int ts_runtime_create(int n_threads, ts_runtime **out, ts_error *err);
/* Stops and joins the workers and frees everything (NULL is a no-op). Must
 * not run while a ts_rt_parallel_for on rt is in flight. */
void ts_runtime_destroy(ts_runtime *rt);
/* The total thread count (workers + the calling thread). */
int ts_runtime_num_threads(const ts_runtime *rt);

/* Splits [0, n) into at most num_threads contiguous chunks, runs
 * task(closure, begin, end) on each over the pool (the calling thread takes
 * chunks too) and returns when all have finished. Returns 0, or the first
 * non-zero result a task returned (chunks not yet started when a task fails
 * are skipped). A call made while the pool is busy — from inside a task
 * (nested parallel loops), or concurrently from another thread — runs
 * task(closure, 0, n) serially inline, as does a call with rt NULL or n == 1.
 * n <= 0 returns 0 without calling task. rt is a ts_runtime * (void * for
 * the kernel ABI). */
int32_t ts_rt_parallel_for(void *rt, ts_rt_task task, void *closure, int64_t n);
/* The largest request ts_rt_alloc serves (64 TiB). */
#define TS_RT_MAX_ALLOC_BYTES ((int64_t)1 << 46)
/* Returns `bytes` bytes aligned to `align` (a power of two; 0 means 64;
 * smaller than a pointer is raised to a pointer), or NULL when bytes < 0 or
 * over TS_RT_MAX_ALLOC_BYTES, the alignment is not a power of two, or
 * memory runs out. bytes == 0 gives a
 * unique pointer. Free with ts_rt_free. rt may be NULL. */
void *ts_rt_alloc(void *rt, int64_t bytes, int64_t align);
/* Frees memory from ts_rt_alloc (NULL is a no-op). */
void ts_rt_free(void *rt, void *p);

/* ========================================================================
 * Object loader (ORC LLJIT)
 * ======================================================================== */

typedef struct ts_rt_kernel ts_rt_kernel;

/* The entry point of a loaded kernel (see the kernel ABI above). */
typedef int32_t (*ts_rt_kernel_fn)(void *const *args, void *rt);

/* Links the ELF object bytes[0, size) into the process with a fresh ORC
 * LLJIT (symbols it does not define resolve from the process) and looks up
 * `entry`. The bytes are copied; the caller keeps its buffer. Errors
 * (TS_EINVAL): bytes that are not an object file, an object that does not
 * define `entry` ("object defines no symbol 'NAME'"), an unresolved external
 * symbol (named in the message). On success *out is a loaded kernel the
 * caller releases with ts_rt_kernel_unload; on failure nothing stays
 * allocated. Thread safe: each load has its own LLJIT. */
int ts_rt_kernel_load(const void *bytes, size_t size, const char *entry,
                      ts_rt_kernel **out, ts_error *err);
/* Checks, without linking, what ts_rt_kernel_load needs of an object: an
 * ELF64 relocatable object that defines `entry` and whose every non-weak
 * external symbol the process exports. TS_OK, or TS_EINVAL naming the
 * first unresolved symbol (or the format problem). */
int ts_rt_object_check(const void *bytes, size_t size, const char *entry,
                       ts_error *err);
/* Disposes the LLJIT and the kernel's code and data (NULL is a no-op). */
void ts_rt_kernel_unload(ts_rt_kernel *k);
/* The entry function; valid until ts_rt_kernel_unload. */
ts_rt_kernel_fn ts_rt_kernel_entry(const ts_rt_kernel *k);
/* The entry symbol's name (owned by k). */
const char *ts_rt_kernel_name(const ts_rt_kernel *k);
/* Calls the entry with args and rt. Returns TS_OK, or TS_ERANGE when the
 * kernel returned non-zero (the message names the entry and the value). */
int ts_rt_kernel_call(const ts_rt_kernel *k, void *const *args, ts_runtime *rt,
                      ts_error *err);
/* A kernel built with a prologue (codegen.h ts_build_split_kernel: the
 * stages that read only constant arguments, run once): whether k has one,
 * and running it on args (the entry's arguments) before the first call and
 * whenever those arguments change. ts_rt_kernel_prepare is a no-op for a
 * kernel without one. */
bool ts_rt_kernel_has_prologue(const ts_rt_kernel *k);
int ts_rt_kernel_prepare(const ts_rt_kernel *k, void *const *args,
                         ts_runtime *rt, ts_error *err);
/* The buffers the prologue writes (in the kernel's data): their count,
 * with *bufs and *bytes pointing at n addresses and n sizes (0 without a
 * prologue). */
int ts_rt_kernel_hoisted(const ts_rt_kernel *k, void *const **bufs,
                         const int64_t **bytes);

/* ========================================================================
 * CPU features and AMX
 * ======================================================================== */

/* Whether this CPU (and the OS, for the register state: XCR0) supports a
 * feature, by cpuid. Names as LLVM spells them: "sse4.2", "avx", "avx2",
 * "fma", "f16c", "avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl",
 * "avx512vnni", "avx512bf16", "avx512fp16", "avxvnni", "amx-tile",
 * "amx-bf16", "amx-int8", "amx-fp16". Returns 1 (yes), 0 (no) or TS_EINVAL
 * for an unknown name. */
int ts_rt_cpu_has(const char *feature);
/* The names ts_rt_cpu_has knows, NULL-terminated. */
const char *const *ts_rt_cpu_feature_names(void);
/* Asks Linux for permission to use AMX tile data
 * (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)); the request is made
 * once per process and its outcome remembered. Returns TS_OK when AMX code
 * may run, TS_EUNSUPPORTED when the CPU has no AMX or the kernel refused
 * (the message says which, with the system's reason). Thread safe. */
int ts_rt_enable_amx(ts_error *err);
/* The size in bytes of the last-level data cache (sysconf, else sysfs, else
 * 32 MiB). */
size_t ts_rt_llc_bytes(void);

/* ========================================================================
 * Timing evaluator
 * ======================================================================== */

/* How to time a callable. Each of `repeat` repeats runs the callable
 * `number` times back to back and yields seconds per run; while a repeat
 * lasts less than min_repeat_ms, `number` grows and the repeat is redone
 * (the grown number carries over to later repeats). */
typedef struct ts_eval_config {
  int number;        /* runs per repeat to start with, >= 1 */
  int repeat;        /* repeats measured, >= 1 */
  int min_repeat_ms; /* minimum duration of one repeat, >= 0 */
  bool flush_cache;  /* CPU: evict the caches before each repeat */
  int warmup;        /* untimed runs before the first repeat, >= 0 */
} ts_eval_config;

/* number 1, repeat 3, min_repeat_ms 40, no cache flush, warmup 1. */
ts_eval_config ts_eval_config_default(void);

/* A callable to time: returns 0, or non-zero on failure. */
typedef int (*ts_eval_fn)(void *ctx);

/* The largest `number` the evaluator grows to. */
#define TS_EVAL_MAX_NUMBER (1 << 30)

/* Times fn(ctx) per cfg on CLOCK_MONOTONIC: cfg->warmup untimed runs, then
 * cfg->repeat repeats; seconds[r] (caller-provided, cfg->repeat entries)
 * gets the seconds per run of repeat r; *number_used (may be NULL) the runs
 * per repeat in the end. With flush_cache, a buffer larger than the
 * last-level cache (owned by rt, allocated on first use) is written and read
 * before each repeat. Returns TS_EINVAL for a bad config (naming the field),
 * TS_ERANGE when fn returns non-zero (the message has the value; seconds is
 * then incomplete). Evaluations on one runtime must not run concurrently. */
int ts_rt_eval(ts_runtime *rt, const ts_eval_config *cfg, ts_eval_fn fn,
               void *ctx, double *seconds, int *number_used, ts_error *err);
/* Writes and reads a buffer larger than the last-level cache (rt's, made
 * on first use) so that no earlier data stays cached: what flush_cache does
 * before each repeat. */
int ts_rt_flush_caches(ts_runtime *rt, ts_error *err);
/* Evicts the n buffers bufs[i] (bytes[i] bytes each; NULL or empty ones
 * are skipped) from every cache level, line by line, the lines shared among
 * rt's threads (rt may be NULL: the calling thread alone), so that the pool
 * is awake when it returns: a layer's weights as a compiled model's layer
 * finds them (tuning's cold confirmation). Where the CPU has no line
 * flush, rt's whole-cache flush instead (nothing with rt NULL). */
int ts_rt_evict(ts_runtime *rt, void *const *bufs, const size_t *bytes, int n,
                ts_error *err);
/* One cold timing of kernel k, as a compiled model's layer runs: a call
 * untimed, the arguments in mask (bit i: argument i, i < 64; a layer's
 * weights) evicted from the caches (ts_rt_evict), and with them what k's
 * prologue made of them (ts_rt_kernel_hoisted) when mask is not 0, one
 * call timed. */
struct ts_rt_args;
int ts_rt_eval_cold(ts_runtime *rt, const ts_rt_kernel *k,
                    const struct ts_rt_args *a, uint64_t mask, double *seconds,
                    ts_error *err);
/* ts_rt_eval of ts_rt_kernel_call(k, args, rt). */
int ts_rt_eval_kernel(ts_runtime *rt, const ts_eval_config *cfg,
                      const ts_rt_kernel *k, void *const *args, double *seconds,
                      int *number_used, ts_error *err);

/* ========================================================================
 * Argument set-up
 * ======================================================================== */

#define TS_RT_MAX_NDIM 8
/* The largest buffer ts_rt_args_create allocates for one argument. */
#define TS_RT_MAX_ARG_BYTES ((int64_t)1 << 36)

typedef enum ts_rt_arg_role {
  TS_RT_ARG_INPUT = 0,  /* filled with seeded random values */
  TS_RT_ARG_OUTPUT = 1, /* zeroed; compared with the reference */
} ts_rt_arg_role;

/* One kernel argument: a compact buffer of scalar dtype and shape. */
typedef struct ts_rt_arg_spec {
  ts_dtype dtype;                /* scalar, not handle */
  int ndim;                      /* 0..TS_RT_MAX_NDIM */
  int64_t shape[TS_RT_MAX_NDIM]; /* each >= 0 */
  ts_rt_arg_role role;
} ts_rt_arg_spec;

typedef struct ts_rt_args ts_rt_args;

/* Allocates one 64-byte-aligned host buffer per spec, fills input i with
 * ts_host_fill_random(seed + i) and zeroes the outputs (the same specs and
 * seed give the same bytes). Errors: TS_EINVAL for a bad spec (naming the
 * argument and the field), TS_ENOMEM over TS_RT_MAX_ARG_BYTES or when memory
 * runs out. On success *out is new; the caller frees it with
 * ts_rt_args_free. */
int ts_rt_args_create(const ts_rt_arg_spec *specs, int n_specs, uint64_t seed,
                      ts_rt_args **out, ts_error *err);
void ts_rt_args_free(ts_rt_args *a);
int ts_rt_args_count(const ts_rt_args *a);
/* The packed data pointers, ts_rt_args_count entries (the kernel ABI's args),
 * owned by a. */
void *const *ts_rt_args_data(const ts_rt_args *a);
const ts_rt_arg_spec *ts_rt_args_spec(const ts_rt_args *a, int i);
/* Elements and bytes of argument i. */
int64_t ts_rt_args_elems(const ts_rt_args *a, int i);
size_t ts_rt_args_bytes(const ts_rt_args *a, int i);
/* Zeroes every output again (before a re-run of an accumulating kernel). */
void ts_rt_args_zero_outputs(ts_rt_args *a);
/* Compares every output of got with the same output of want using
 * ts_host_compare (the dtype's tolerance). Returns TS_OK when all match,
 * TS_ERANGE on a mismatch (the message names the output, the mismatch count,
 * the first mismatching index with both values and the largest absolute
 * error), TS_EINVAL when the two argument lists differ. */
int ts_rt_args_compare(const ts_rt_args *got, const ts_rt_args *want,
                       ts_error *err);

/* ========================================================================
 * CUDA driver loader
 * ======================================================================== */

/* The CUDA driver is opened with dlopen("libcuda.so.1") on first use; where
 * it is missing every entry returns TS_EUNSUPPORTED with "no CUDA driver
 * (libcuda.so.1 not found)", and in a build without the CUDA headers
 * TS_EUNSUPPORTED with "built without CUDA headers". Driver errors are
 * TS_EUNSUPPORTED (initialization, no device) or TS_EINVAL (a failed call),
 * with the driver's error name and text and the call that failed. */

typedef struct ts_cuda ts_cuda;                   /* a device's context */
typedef struct ts_cuda_module ts_cuda_module;     /* loaded PTX */
typedef struct ts_cuda_function ts_cuda_function; /* a kernel in a module */

typedef struct ts_cuda_device_info {
  char name[256];
  int sm_major, sm_minor; /* compute capability */
  int max_threads_per_block;
  int max_shared_memory_per_block; /* bytes, without opt-in */
  int max_registers_per_block;     /* 32-bit registers */
  int multiprocessor_count;
  int l2_cache_bytes;
  int64_t total_memory; /* bytes */
} ts_cuda_device_info;

/* Launch geometry of one kernel launch. */
typedef struct ts_cuda_dims {
  unsigned grid[3], block[3]; /* x, y, z; each >= 1 */
  unsigned shared_bytes;      /* dynamic shared memory */
} ts_cuda_dims;

/* Number of CUDA devices (loads and initializes the driver). */
int ts_cuda_device_count(int *count, ts_error *err);
/* Opens device `device`: loads the driver, initializes it and retains the
 * device's primary context. On success *out is new; close with
 * ts_cuda_close. */
int ts_cuda_open(int device, ts_cuda **out, ts_error *err);
/* Releases the context and unloads the driver (NULL is a no-op). Modules
 * must be unloaded and device memory freed before. */
void ts_cuda_close(ts_cuda *c);
int ts_cuda_device_info_get(const ts_cuda *c, ts_cuda_device_info *out,
                            ts_error *err);
/* Loads NUL-terminated PTX text with cuModuleLoadDataEx; a JIT failure's
 * message carries the driver's JIT error log. *out is freed with
 * ts_cuda_module_unload. */
int ts_cuda_module_load(ts_cuda *c, const char *ptx, ts_cuda_module **out,
                        ts_error *err);
void ts_cuda_module_unload(ts_cuda_module *m);
/* Looks up a kernel by name; *out lives as long as the module. */
int ts_cuda_module_function(ts_cuda_module *m, const char *name,
                            ts_cuda_function **out, ts_error *err);
/* Launches f with params (cuLaunchKernel's kernelParams: one pointer to each
 * argument's value) on the default stream; does not wait. */
int ts_cuda_launch(ts_cuda *c, ts_cuda_function *f, const ts_cuda_dims *dims,
                   void **params, ts_error *err);
/* Waits for all work on the context. */
int ts_cuda_synchronize(ts_cuda *c, ts_error *err);
/* Device memory, addressed by its 64-bit device pointer. */
int ts_cuda_alloc(ts_cuda *c, size_t bytes, uint64_t *dptr, ts_error *err);
void ts_cuda_free(ts_cuda *c, uint64_t dptr);
int ts_cuda_copy_to_device(ts_cuda *c, uint64_t dst, const void *src,
                           size_t bytes, ts_error *err);
int ts_cuda_copy_to_host(ts_cuda *c, void *dst, uint64_t src, size_t bytes,
                         ts_error *err);
/* Times launches of f like ts_rt_eval, with CUDA events around each repeat
 * (flush_cache clears the L2 cache with a memset of a larger device buffer
 * before each repeat). */
int ts_cuda_eval(ts_cuda *c, const ts_eval_config *cfg, ts_cuda_function *f,
                 const ts_cuda_dims *dims, void **params, double *seconds,
                 int *number_used, ts_error *err);

#endif /* TESSERA_RUNTIME_H */
