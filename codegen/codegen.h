/*
 * codegen.h — the public interface of tessera's code generator: targets
 * (parsing, host detection and the queries lowering and emission need),
 * lowering passes from block-form TIR to flat loop programs, and LLVM IR
 * emission for x86-64 (in-memory ELF objects) and NVPTX (PTX text).
 *
 * Target identity is a canonical string: parsing fills defaults, resolves
 * `llvm -mcpu=native` (and plain `llvm`) to the concrete CPU name and
 * features of this host, sorts features and prints options in one order, so
 * equal targets print identically and print(parse(print(t))) == print(t).
 */
#ifndef TESSERA_CODEGEN_H
#define TESSERA_CODEGEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tir/tir.h"

/* ========================================================================
 * Targets (codegen/target.c; one family per file: target_x86.c for llvm,
 * target_nvptx.c for cuda)
 * ======================================================================== */

/* Canonical forms:
 *   llvm -mcpu=NAME [-mattr=+f1,+f2,-f3] -num-cores=N
 *   cuda -arch=sm_XX -max-threads-per-block=N -max-shared-memory-per-block=N
 *        -max-registers-per-thread=N
 * For llvm, -mcpu defaults to `native` (this host, resolved through LLVM);
 * the features stored are the explicit ones plus those the named CPU implies
 * among the ones tessera queries (so -mattr lists a feature with '-' when
 * the CPU would imply it but it is disabled); -num-cores defaults to the
 * online core count. For cuda, -arch is required; the limits default to
 * 1024 threads, 49152 bytes and 255 registers. */

typedef struct ts_target ts_target;

/* What a build produces for a target (ts_build): the kind of its bytes. */
typedef enum ts_artifact_kind {
  TS_ARTIFACT_CPU_OBJECT = 0, /* relocatable ELF, kernel ABI of runtime.h */
  TS_ARTIFACT_PTX = 1,        /* PTX text for the CUDA driver */
} ts_artifact_kind;

/* The facts of a target family: one per file codegen/target_<family>.c,
 * registered in codegen/target.c (docs/targets.md says what a new family
 * fills in). Modules outside codegen ask these, and the queries below,
 * instead of testing which kind of target they have. Static storage. */
typedef struct ts_target_facts {
  const char *kind;   /* the first word of its target strings: "llvm" */
  const char *family; /* "x86", "nvptx" */
  const char *rules;  /* the tuner's rule list for it (tuner/rule_lists.c):
                         "cpu", "gpu" */
  bool is_gpu;        /* loops bind to blockIdx/threadIdx, buffers may live
                         in shared memory, nothing runs as a parallel loop
                         (the cost model's is_gpu feature) */
  bool runs_on_host;  /* its artifacts run on this machine's CPU in this
                         process (the runtime's loader; whether this CPU
                         has the target's features too is
                         ts_target_check_runs_here's); otherwise they run
                         on a device, through a worker */
  ts_artifact_kind artifact;
} ts_target_facts;

/* The facts of t's family. */
const ts_target_facts *ts_target_facts_of(const ts_target *t);
/* Whether code built for t runs here, in this process: TS_OK, or
 * TS_EUNSUPPORTED with a message starting with `what` (the caller's name),
 * naming the target and saying why not and what to do: its family runs on
 * a device, or it uses a CPU feature this machine lacks (cpuid, as the
 * runtime sees it). Either way it is measured through a `tessera rpc`
 * worker. */
int ts_target_check_runs_here(const ts_target *t, const char *what,
                              ts_error *err);
/* The i-th registered family (0, 1, ...); NULL past the last. */
const ts_target_facts *ts_target_family(int i);

#define TS_TARGET_MAX_CORES 4096
#define TS_TARGET_MAX_FEATURES 512

/* Parses a target string. Errors are TS_EINVAL with the 1-based column of
 * the offending token and a message naming it ("unknown target kind 'lvm'",
 * "bad -num-cores value '0'", "unknown option '-foo' for target kind 'llvm'",
 * "option '-mcpu' given twice", ...). On success *out is a new target the
 * caller frees with ts_target_free. */
int ts_target_parse(const char *s, ts_target **out, ts_error *err);
/* The host target, `llvm -mcpu=native` resolved. Same ownership. */
int ts_target_host(ts_target **out, ts_error *err);
/* A copy of t (NULL when memory runs out); free with ts_target_free. */
ts_target *ts_target_copy(const ts_target *t);
void ts_target_free(ts_target *t);
/* The canonical string, owned by t. */
const char *ts_target_str(const ts_target *t);
bool ts_target_equal(const ts_target *a, const ts_target *b);

/* The LLVM target triple ("x86_64-pc-linux-gnu" as LLVM names this host, or
 * "nvptx64-nvidia-cuda"), owned by t. */
const char *ts_target_triple(const ts_target *t);
/* The CPU for LLVMCreateTargetMachine: the x86 CPU name, or "sm_XX" for
 * cuda. Owned by t. */
const char *ts_target_cpu(const ts_target *t);
/* The feature string for LLVMCreateTargetMachine ("+avx2,+fma,-amx-tile";
 * for cuda the PTX ISA version for the architecture, "+ptx80" for sm_90).
 * Owned by t; "" when there are none. */
const char *ts_target_llvm_features(const ts_target *t);
/* Whether the target has a feature: for llvm a CPU feature by its LLVM name
 * ("avx512f", "amx-tile"; a feature disabled explicitly also disables the
 * ones that need it: avx512bw needs avx512f, which needs avx2, ...); for
 * cuda an architecture "sm_NN", which sm_NN and newer have (the tensor
 * intrinsics of schedule/intrin.c name what they need this way). */
bool ts_target_has_feature(const ts_target *t, const char *feature);
/* Number of stored features, and feature i (name owned by t; *enabled
 * receives its sign), in sorted order. */
int ts_target_num_features(const ts_target *t);
const char *ts_target_feature(const ts_target *t, int i, bool *enabled);
/* Threads for the runtime (llvm; 0 for cuda). */
int ts_target_num_cores(const ts_target *t);
/* The widest fp32 vector in bits: 512 with avx512f, 256 with avx2 or avx,
 * else 128 (llvm); 32 for cuda (one lane per thread). */
int ts_target_vector_bits(const ts_target *t);
/* Architectural vector registers (llvm): 32 with avx512f, else 16; 0 for
 * cuda. Design spaces size register tiles by it. */
int ts_target_vector_registers(const ts_target *t);
/* The ways of the L1 data cache, by the CPU's name (llvm): 12 on Intel's
 * cores since Sunny Cove (icelake-server, sapphirerapids, ...) and on
 * znver5, 8 on the others (Skylake, Zen 1-4) and on a CPU the table does
 * not name (x86-64-v3, ...); 0 for cuda. How many rows a multiple of 4 KiB
 * apart a kernel can read at once without evicting each other. */
int ts_target_l1d_ways(const ts_target *t);
/* Whether a kernel that reads one or two cache lines of every pixel of a
 * wide image (a tile of a pixel's channels, the stride a whole pixel) runs
 * from prefetched lines, by the CPU's name (llvm): false on Intel's cores
 * (haswell to graniterapids), true on AMD's Zen and on a CPU the table
 * does not name (x86-64-v3, ...); false for cuda. Measured, not documented
 * by the vendors: on an AVX-512 Xeon a depthwise conv's channel tiles
 * slid down the image ran at 0.5-0.8 of the same tiles read a pixel's
 * channels at a time, on Zen 3 the first order won by 1.1-1.4 x
 * (docs/tuning.md, "A depthwise conv's order by CPU"). */
bool ts_target_strided_prefetch(const ts_target *t);
/* Lanes of dtype d in the widest vector: vector_bits / d.bits for llvm (at
 * least 1), 1 for cuda (one lane per thread). */
int ts_target_vector_lanes(const ts_target *t, ts_dtype d);
/* The instruction-set level, for people: "SSE2", "SSE4.2", "AVX", "AVX2" or
 * "AVX-512", then " + NAME" for each extension present among VNNI,
 * AVX-VNNI, AVX512-BF16, AVX512-FP16, AMX-BF16, AMX-INT8, AMX-FP16
 * ("AVX-512 + VNNI + AVX512-BF16"); the SM name for cuda. Written into buf
 * (cut to size); returns buf. */
const char *ts_target_isa(const ts_target *t, char *buf, size_t size);
/* Whether the target has instructions for the arithmetic of dtype d:
 * bfloat16 needs AVX512-BF16 or AMX-BF16; float16 is always computed
 * through float32 on x86-64; everything is native on cuda. */
bool ts_target_dtype_native(const ts_target *t, ts_dtype d);
/* One line saying how the arithmetic of dtype d runs on t ("FMA on 256-bit
 * vectors (8 lanes, 16 registers)", "computed in float32 (...): no
 * AVX512-BF16 or AMX", ...). Written into buf (cut to size); returns buf. */
const char *ts_target_dtype_path(const ts_target *t, ts_dtype d, char *buf,
                                 size_t size);
/* cuda: the SM version (80 for sm_80) and the per-block limits; 0 for
 * llvm. */
int ts_target_sm(const ts_target *t);
int ts_target_max_threads_per_block(const ts_target *t);
int ts_target_max_shared_memory_per_block(const ts_target *t);
int ts_target_max_registers_per_thread(const ts_target *t);

/* ========================================================================
 * Lowering (codegen/lower.c)
 * ======================================================================== */

/* Block-form TIR -> flat loop program. Every pass works in place on a function
 * the caller owns (new nodes go in its arena) and returns TS_OK or an error
 * with err set; on error the function may be half-rewritten and must be
 * discarded. */

/* Loop annotation keys the lowering passes read (set by the tuner's
 * postprocessors and the cost model's design space) or write (read by the
 * cost model's features); ts_lower_unroll and ts_lower_vectorize below say
 * what they mean. */
#define TS_ANN_AUTO_UNROLL_MAX_STEP "pragma_auto_unroll_max_step"
#define TS_ANN_UNROLL_EXPLICIT "pragma_unroll_explicit"
#define TS_ANN_VECTORIZE_FALLBACK "vectorize_fallback"
/* Set by lowering on a loop it wants LLVM to unroll whole (the emitter
 * attaches llvm.loop.unroll.full). */
#define TS_ANN_LLVM_UNROLL_FULL "llvm_unroll_full"
/* On a serial loop, non-zero: it stays a loop. Auto-unroll
 * (pragma_auto_unroll_max_step) skips it and the emitter asks LLVM not to
 * unroll it either (llvm.loop.unroll.disable). Set by the tuner on the
 * loop of a row's fused sibling reductions (layer norm's sum and sum of
 * squares) where LLVM would unroll it whole into more vectors than the
 * registers: it then kept the row's loaded vectors for the normalization
 * that reads the row again and spilled them. It changes no value. */
#define TS_ANN_NO_UNROLL "pragma_no_unroll"
/* On a loop, non-zero: whole-vector stores to the function's parameters in
 * its body (an output written once, larger than the caches) are
 * non-temporal, bypassing the caches, where the target family has such
 * stores (x86: vmovntps), and the loop ends with a store fence. Each store
 * is non-temporal only when its address is aligned to the vector's bytes
 * at run time; otherwise it is an ordinary store. Other families and the
 * interpreter ignore it: it changes no value. */
#define TS_ANN_NONTEMPORAL "pragma_nontemporal"
/* On a loop Y, non-zero: each load of an input parameter below it whose
 * region changes with Y gets a software prefetch of the region it reads
 * next, spread over the iterations that read the current one (lowering
 * step TS_LOWER_STEP_PREFETCH, codegen/prefetch.c says how). Families
 * without the intrinsic `tessera.prefetch` (GPU) and the interpreter ignore
 * it: it changes no value. */
#define TS_ANN_PREFETCH "pragma_prefetch"

/* The steps of ts_lower, in the order it runs them. */
typedef enum ts_lower_step {
  TS_LOWER_STEP_ALL = 0,          /* as `last`: the whole pipeline */
  TS_LOWER_STEP_BLOCKS,           /* ts_lower_blocks */
  TS_LOWER_STEP_RANGE_SIMPLIFY,   /* ts_lower_simplify: fused indices become
                                     the linear forms compaction reads */
  TS_LOWER_STEP_COMPACT,          /* ts_lower_compact */
  TS_LOWER_STEP_PREFETCH,         /* software prefetches (prefetch.c) */
  TS_LOWER_STEP_PARTITION,        /* loop partitioning (partition.c) */
  TS_LOWER_STEP_UNROLL,           /* ts_lower_unroll (max_unroll) */
  TS_LOWER_STEP_FLATTEN,          /* ts_lower_flatten */
  TS_LOWER_STEP_SIMPLIFY,         /* ts_lower_simplify */
  TS_LOWER_STEP_VECTORIZE,        /* ts_lower_vectorize (max_vector_lanes) */
  TS_LOWER_STEP_VECTOR_SIMPLIFY,  /* ts_lower_simplify */
  TS_LOWER_STEP_PROMOTE,          /* register promotion (promote.c) */
  TS_LOWER_STEP_PROMOTE_SIMPLIFY, /* ts_lower_simplify */
  TS_LOWER_STEP_SYNC,             /* GPU barriers (lower_sync.c) */
  TS_LOWER_N_STEPS
} ts_lower_step;

/* The bit of a step in ts_lower_options.skip. */
#define TS_LOWER_SKIP(step) (1u << (step))

typedef struct ts_lower_options {
  bool verify_between;   /* run ts_func_verify after each pass (TS_VERIFY=1) */
  int max_vector_lanes;  /* widest vector a vectorized loop becomes (64) */
  int max_unroll;        /* largest extent an `unrolled` loop is copied (256) */
  bool no_promote;       /* skip register promotion (codegen/promote.c) */
  int promote_max_bytes; /* bytes promoted around one loop at most (0: the
                            build sets it from the target's vector
                            registers; 384 when lowering alone) */
  ts_lower_step last;    /* the last step run (TS_LOWER_STEP_ALL: all) */
  unsigned skip;         /* steps not run: TS_LOWER_SKIP(step) bits */
} ts_lower_options;

/* Default options (verify_between from the TS_VERIFY environment variable;
 * the whole pipeline). */
ts_lower_options ts_lower_defaults(void);

/* The pipeline on a copy of f: the steps of ts_lower_step in that order,
 * through opts->last (the whole pipeline by default), without the steps in
 * opts->skip. Returns a new lowered function the caller frees with
 * ts_func_free, or NULL with err set. A prefix (a `last` before
 * TS_LOWER_STEP_SYNC, steps skipped) gives a function the code generator
 * cannot take as it is; the cost model's features lower this way
 * (ts_cm_extract: through TS_LOWER_STEP_VECTORIZE without the range
 * simplification, compaction, partitioning and unrolling). */
ts_func *ts_lower(const ts_func *f, const ts_lower_options *opts,
                  ts_error *err);

/* requires: block form | maintains: semantics | breaks: blocks — every
 * block-realize becomes its body with iter vars replaced by their values,
 * guarded by its predicate, with `init` run under "every reduce value is at
 * its minimum", and its allocated buffers as `allocate` statements. */
int ts_lower_blocks(ts_func *f, ts_error *err);
/* requires: no blocks | maintains: semantics | breaks: allocation sizes —
 * each `allocate` moves down to the lowest statement that holds every access
 * of its buffer (entering a loop only when every iteration uses a disjoint
 * part of the buffer) and shrinks to the region accessed there, so a cache
 * buffer of a tile is the size of the tile (stack, registers). Buffers with
 * explicit strides or whose address is taken are left alone. */
int ts_lower_compact(ts_func *f, ts_error *err);
/* requires: no blocks | maintains: semantics | breaks: buffer shapes — every
 * buffer becomes 1-D over its storage (strides applied) and every access a
 * single flat index. */
int ts_lower_flatten(ts_func *f, ts_error *err);
/* requires: flat buffers | maintains: semantics — simplifies every
 * expression using the ranges of the loop variables in scope. */
int ts_lower_simplify(ts_func *f, ts_error *err);
/* requires: flat buffers | maintains: semantics | breaks: vectorized loops —
 * each `vectorized` loop of constant extent becomes vector code (ramp and
 * broadcast); a loop that cannot be vectorized stays a serial loop with the
 * reason in its "vectorize_fallback" annotation. */
int ts_lower_vectorize(ts_func *f, int max_lanes, ts_error *err);
/* requires: no blocks | maintains: semantics | breaks: unrolled loops —
 * `unrolled` loops of constant extent up to max_unroll are replaced by copies
 * of their body; inside a loop annotated "pragma_auto_unroll_max_step" = S,
 * inner serial loops whose total executed statements are at most S are
 * unrolled too (explicitly when "pragma_unroll_explicit" is absent or 1,
 * else marked `unrolled` for the backend). */
int ts_lower_unroll(ts_func *f, int max_unroll, ts_error *err);

/* ========================================================================
 * Artifacts and building (codegen/build.c, codegen/emit.c)
 * ======================================================================== */

/* One kernel argument: a compact row-major buffer. */
typedef struct ts_artifact_arg {
  char name[64];
  ts_dtype dtype;
  int ndim;
  int64_t shape[TS_MAX_DIMS];
  bool is_output; /* written by the kernel */
} ts_artifact_arg;

/* A built kernel. Shared and immutable once built: refcounted. */
typedef struct ts_artifact {
  ts_artifact_kind kind;
  char entry[128]; /* the entry symbol */
  int n_args;
  ts_artifact_arg *args;
  unsigned char *bytes; /* object bytes, or PTX text (NUL after n_bytes) */
  size_t n_bytes;
  unsigned grid[3], block[3]; /* PTX: launch dimensions */
  unsigned shared_bytes;      /* PTX: dynamic shared memory */
  int refcount;
} ts_artifact;

/* A new artifact with refcount 1 (bytes copied). Caller releases. */
ts_artifact *ts_artifact_new(ts_artifact_kind kind, const char *entry,
                             const ts_artifact_arg *args, int n_args,
                             const void *bytes, size_t n_bytes);
ts_artifact *ts_artifact_retain(ts_artifact *a);
/* Drops one reference; frees at zero (NULL is a no-op). */
void ts_artifact_release(ts_artifact *a);
/* The argument list of a function (shapes, dtypes, outputs), as an artifact
 * carries it. Returns a malloc'd array of ts_func_n_params(f) entries. */
ts_artifact_arg *ts_artifact_args_of(const ts_func *f);

typedef struct ts_build_options {
  ts_lower_options lower;
  bool keep_lowered; /* fill result->lowered */
  bool keep_llvm_ir; /* fill result->llvm_ir (after optimization) */
  bool keep_asm;     /* fill result->assembly (x86 assembly; for PTX a copy
                        of the artifact's text) */
  bool no_opt;       /* skip LLVM's default<O3> pipeline */
} ts_build_options;
ts_build_options ts_build_defaults(void);

typedef struct ts_build_result {
  ts_artifact *artifact; /* caller releases */
  ts_func *lowered;      /* when asked; caller frees */
  char *llvm_ir;         /* malloc'd, when asked */
  char *assembly;        /* malloc'd, when asked */
  double lower_ms, emit_ms, opt_ms, codegen_ms;
} ts_build_result;

/* Compiles f (block form, scheduled or not) for target t: lower, emit LLVM
 * IR, optimize (default<O3>), and emit an in-memory ELF object (llvm) or PTX
 * (cuda). No external compiler or linker is involved. Thread safe (each
 * build has its own LLVM context). On failure returns the error code with
 * err set and *out cleared. Free *out with ts_build_result_clear. */
int ts_build(const ts_func *f, const ts_target *t, const ts_build_options *o,
             ts_build_result *out, ts_error *err);

/* f split in two by ts_func_hoist_const (schedule.h): `main` takes f's
 * parameters then n_hoisted buffers, which `prologue` writes from the
 * n_inputs parameters of f listed in inputs[]. */
typedef struct ts_build_split {
  const ts_func *main, *prologue;
  const int *inputs;
  int n_inputs, n_hoisted;
} ts_build_split;

/* Builds f (CPU targets only) as one object with f's arguments whose
 * stages that read only constants run apart, once: the entry runs `main`
 * on its arguments and the hoisted buffers, which live in the object
 * (zeroed at load), and `<entry>__prologue` (same ABI) fills them from its
 * arguments. A caller runs the prologue (ts_rt_kernel_prepare) before the
 * first call and again whenever those inputs change. The object also
 * defines `<entry>__hoisted`: { i64 n; ptr buf[n]; i64 bytes[n] }, so a
 * cold timing can evict them. What a measurement builds when the
 * workload's weights are constants, as in a compiled model. */
int ts_build_split_kernel(const ts_func *f, const ts_build_split *split,
                          const ts_target *t, const ts_build_options *o,
                          ts_build_result *out, ts_error *err);
void ts_build_result_clear(ts_build_result *r);

/* The process's cache of built kernels (codegen/build_cache.c): a build
 * whose emitted LLVM IR and target machine equal an earlier one's takes
 * that build's bytes instead of optimizing and generating code again
 * (opt_ms and codegen_ms are then 0). Builds that keep their LLVM IR or
 * assembly bypass it. Bounded by TS_BUILD_CACHE_MB (default 64, 0: off).
 * With TS_BUILD_CACHE_DIR set, entries also go to files in that folder,
 * shared by the processes that use it (bounded by TS_BUILD_CACHE_DIR_MB,
 * default 512); a miss in memory found there counts as a disk hit. */
typedef struct ts_build_cache_stats {
  long long hits, misses, disk_hits;
  int entries;
  size_t bytes;
} ts_build_cache_stats;
ts_build_cache_stats ts_build_cache_get_stats(void);
/* Drops every entry and zeroes the counters; TS_BUILD_CACHE_MB is read
 * again at the next build. */
void ts_build_cache_clear(void);

#endif /* TESSERA_CODEGEN_H */
