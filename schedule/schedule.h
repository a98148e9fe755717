/*
 * schedule.h — the public interface of tessera's schedule module: the
 * schedule state (a private copy of a PrimFunc plus handles), every
 * TensorIR-like schedule primitive, the trace that records them (replay,
 * JSON, a readable script, dead-code simplification), the seeded splittable
 * random number generator with the sampling instructions, and the registry
 * of tensor intrinsics that `tensorize` maps blocks onto.
 *
 * Handles are random variables (RVs) of the trace: small integer ids naming
 * a block, a loop or an integer (a sampled value). A block RV refers to the
 * block by its name (names are unique in a scheduled function); a loop RV to
 * one loop statement. A primitive that removes or replaces a loop (split,
 * fuse, compute_at, ...) invalidates that loop's RVs; using one afterwards is
 * an error naming the primitive that invalidated it.
 *
 * Errors: every primitive validates all of its preconditions before it
 * changes anything ("check everything, then mutate"), so a primitive that
 * fails leaves the function, the trace, the RNG and the handles exactly as
 * they were. It returns a negative TS_E* code (TS_ESCHEDULE for an illegal
 * request, TS_EINVAL for a malformed one, TS_ENOTFOUND for an unknown name)
 * and the message, naming the primitive, the block or loop and the reason,
 * is on the schedule (ts_sched_errmsg).
 */
#ifndef TESSERA_SCHEDULE_H
#define TESSERA_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tir/tir.h"

typedef struct ts_sched ts_sched; /* a schedule: owns its function */
typedef struct ts_trace ts_trace; /* a recorded sequence of instructions */
typedef int32_t ts_rv;            /* a random variable (handle) id */

#define TS_RV_NONE ((ts_rv)-1) /* "no value": an inferred split factor */

/* ========================================================================
 * Random numbers (schedule/sampling.c)
 * ======================================================================== */

/* A splittable generator (SplitMix64). A plain value: copying it copies the
 * stream. The same seed gives the same numbers on every machine. */
typedef struct ts_rng {
  uint64_t state;
} ts_rng;

/* Seeds r (any seed, 0 included, is valid). */
void ts_rng_seed(ts_rng *r, uint64_t seed);
/* The next 64 random bits. */
uint64_t ts_rng_next(ts_rng *r);
/* Advances r and returns an independent child generator (for handing one
 * stream to each of several schedules or threads deterministically). */
ts_rng ts_rng_split(ts_rng *r);
/* A uniform integer in [0, n) (n >= 1; unbiased, by rejection). */
uint64_t ts_rng_below(ts_rng *r, uint64_t n);
/* A uniform double in [0, 1) with 53 random bits. */
double ts_rng_unit(ts_rng *r);

/* ========================================================================
 * Schedule state (schedule/state.c)
 * ======================================================================== */

typedef enum ts_rv_kind {
  TS_RV_INVALID = 0, /* not an id of this schedule */
  TS_RV_BLOCK = 1,
  TS_RV_LOOP = 2,
  TS_RV_INT = 3,
} ts_rv_kind;

/* Creates a schedule over a private copy of f (f is not kept). The RNG is
 * seeded with `seed`. Refuses (TS_EINVAL) a function that fails the
 * verifier or that has two blocks of one name. On success *out is a new
 * schedule the caller frees with ts_sched_destroy. */
int ts_sched_create(const ts_func *f, uint64_t seed, ts_sched **out,
                    ts_error *err);
void ts_sched_destroy(ts_sched *s); /* NULL is a no-op */
/* A new schedule with the same function, trace and handles: the trace is
 * replayed on the unscheduled function (so RV ids are equal) and the copy's
 * RNG is seeded with `seed`. Caller frees *out with ts_sched_destroy. */
int ts_sched_fork(const ts_sched *s, uint64_t seed, ts_sched **out,
                  ts_error *err);
/* The scheduled function (owned by s; valid until the next primitive). */
const ts_func *ts_sched_func(const ts_sched *s);
/* The unscheduled function the schedule started from (owned by s). */
const ts_func *ts_sched_original(const ts_sched *s);
/* The trace of every successful primitive so far (owned by s). */
const ts_trace *ts_sched_trace(const ts_sched *s);
/* The last error: code and message (empty when none). */
const ts_error *ts_sched_error(const ts_sched *s);
const char *ts_sched_errmsg(const ts_sched *s);
/* The generator sampling instructions draw from (mutable through s). */
ts_rng *ts_sched_rng(ts_sched *s);

/* --- handles --- */
ts_rv_kind ts_sched_rv_kind(const ts_sched *s, ts_rv rv);
/* The value of an integer RV (0 for other RVs). */
int64_t ts_sched_rv_int(const ts_sched *s, ts_rv rv);
/* The name of a block RV's block, or NULL (owned by s). */
const char *ts_sched_rv_block_name(const ts_sched *s, ts_rv rv);
/* The loop of a loop RV when it is still in the function, else NULL. */
const ts_stmt *ts_sched_rv_loop(const ts_sched *s, ts_rv rv);

/* ========================================================================
 * Primitives. Each is recorded in the trace when it succeeds. Array outputs
 * go to `out` (capacity `cap`, count in *n): a result longer than cap is an
 * error (TS_EINVAL) before anything changes.
 * ======================================================================== */

/* --- queries (schedule/state.c) --- */
/* The block named `name` (TS_ENOTFOUND when there is none). */
int ts_sched_get_block(ts_sched *s, const char *name, ts_rv *out);
/* The loops above a block, outermost first, up to its enclosing block. */
int ts_sched_get_loops(ts_sched *s, ts_rv block, ts_rv *out, int cap, int *n);
/* The blocks directly under a block or loop (not inside nested blocks), in
 * program order. */
int ts_sched_get_child_blocks(ts_sched *s, ts_rv block_or_loop, ts_rv *out,
                              int cap, int *n);
/* The blocks of the same scope that write a buffer the block reads
 * (producers) / read a buffer it writes (consumers), in program order. */
int ts_sched_get_producers(ts_sched *s, ts_rv block, ts_rv *out, int cap,
                           int *n);
int ts_sched_get_consumers(ts_sched *s, ts_rv block, ts_rv *out, int cap,
                           int *n);

/* --- loops (schedule/loops.c) --- */
#define TS_SPLIT_INFER (-1) /* a factor that split infers */
/* Splits a serial loop into n loops (outermost first) with the given
 * factors; at most one factor is TS_SPLIT_INFER (ceil(extent / product of
 * the others)). When the product exceeds the extent the blocks under the
 * loop get the predicate `fused < extent`. out receives n loop RVs. */
int ts_sched_split(ts_sched *s, ts_rv loop, const int64_t *factors, int n,
                   ts_rv *out);
/* Same with factors given as integer RVs (TS_RV_NONE = inferred). */
int ts_sched_split_rv(ts_sched *s, ts_rv loop, const ts_rv *factors, int n,
                      ts_rv *out);
/* Partitions a serial loop of constant range at `at` (0 < at < extent)
 * into two loops run one after the other: the first over the first `at`
 * iterations, the second, over the rest, runs a copy of the body whose
 * blocks are named "<name>_tail"; the blocks' iter domains narrow to
 * what each copy covers. A loop over reduce iters splits the reduction:
 * the first part must start it, the second loses the init and adds to
 * the first's result. out receives the two loop RVs. */
int ts_sched_partition(ts_sched *s, ts_rv loop, int64_t at, ts_rv *out);
/* Fuses n >= 2 perfectly nested serial loops (outermost first, each the
 * only statement of the previous) into one. */
int ts_sched_fuse(ts_sched *s, const ts_rv *loops, int n, ts_rv *out);
/* Reorders loops of one chain (each loop between the outermost and the
 * innermost given is the only statement of its parent, no block in between)
 * so that the given loops appear in the given order; loops of the chain not
 * given keep their places. */
int ts_sched_reorder(ts_sched *s, const ts_rv *loops, int n);
/* Fuses n >= 2 sibling loops (items of one statement list, in program
 * order, not necessarily adjacent) of one constant range and one kind into
 * the first: each iteration runs the bodies one after the other, and the
 * other loops disappear (the first keeps its handle and annotations).
 * Refused when the ranges or kinds differ, or when a block under a later
 * loop reads or writes a buffer that a block under an earlier one, or
 * between the loops, writes, or writes one that such a block reads (the
 * bodies must be independent: two reductions over one row read once). */
int ts_sched_fuse_siblings(ts_sched *s, const ts_rv *loops, int n);
/* Loop kinds. parallel/vectorize/bind refuse a loop that carries a
 * reduction (bound to a reduce iter) or under which a block is recomputed
 * racily; the loop must be serial. Over a reduction (a block with an
 * init), the loop's iterations must write disjoint points, which is
 * checked by enumerating them: a longer loop than TS_PARALLEL_CHECK_MAX
 * is refused there. */
#define TS_PARALLEL_CHECK_MAX 65536
int ts_sched_parallel(ts_sched *s, ts_rv loop);
int ts_sched_vectorize(ts_sched *s, ts_rv loop);
int ts_sched_unroll(ts_sched *s, ts_rv loop);
/* thread_axis: blockIdx.{x,y,z}, threadIdx.{x,y,z} or vthread. */
int ts_sched_bind(ts_sched *s, ts_rv loop, const char *thread_axis);
/* Annotates a loop or block with key = value (replacing the key). */
int ts_sched_annotate(ts_sched *s, ts_rv block_or_loop, ts_annotation ann);
/* Same with the value of an integer RV. */
int ts_sched_annotate_rv(ts_sched *s, ts_rv block_or_loop, const char *key,
                         ts_rv value);
/* Removes a key (TS_ENOTFOUND when absent). */
int ts_sched_unannotate(ts_sched *s, ts_rv block_or_loop, const char *key);

/* --- compute location (schedule/compute_at.c) --- */
/* Moves a producer block under `loop` (in its consumers' loop nest) so that
 * it computes exactly the region its consumers under the loop need, before
 * them. A loop RV that is the root/inline mark of sample_compute_location
 * leaves the block where it is / inlines it. */
int ts_sched_compute_at(ts_sched *s, ts_rv block, ts_rv loop);
/* Moves a consumer block under `loop` (in its producer's loop nest) so that
 * it consumes exactly what the producers under the loop produced, after
 * them. */
int ts_sched_reverse_compute_at(ts_sched *s, ts_rv block, ts_rv loop);
/* Inlines a spatial producer block into its consumers (the block and its
 * buffer disappear). */
int ts_sched_compute_inline(ts_sched *s, ts_rv block);
/* Inlines a spatial consumer block into its producer (the producer writes
 * the consumer's output directly). */
int ts_sched_reverse_compute_inline(ts_sched *s, ts_rv block);

/* --- caching and storage (schedule/cache.c) --- */
/* A new block copying `buffer` (read by `block`) into a new buffer of
 * `scope` ("global", "shared", "local", ...) before its first use; `block`
 * reads the copy. out receives the new block. */
int ts_sched_cache_read(ts_sched *s, ts_rv block, const char *buffer,
                        const char *scope, ts_rv *out);
/* `block` writes (and reads) a new buffer of `scope`; a new block after it
 * copies that into `buffer`. out receives the new block. */
int ts_sched_cache_write(ts_sched *s, ts_rv block, const char *buffer,
                         const char *scope, ts_rv *out);
/* Changes the storage scope of a buffer allocated in the function and
 * written by `block`. */
int ts_sched_set_scope(ts_sched *s, ts_rv block, const char *buffer,
                       const char *scope);
/* Pads the stride of dimension `axis` of an allocated buffer written by
 * `block` so that stride % factor == offset. */
int ts_sched_storage_align(ts_sched *s, ts_rv block, const char *buffer,
                           int axis, int factor, int offset);
/* Rewrites an allocated buffer accessed by `block` into a new layout given
 * by an index map "(i, j) -> (floordiv(j, 16), i, floormod(j, 16))" (the
 * map must be injective; the new shape is the map's image bounds). Every
 * access in the function is rewritten. */
int ts_sched_transform_layout(ts_sched *s, ts_rv block, const char *buffer,
                              const char *index_map);

/* Pads spatial iter `iter` of `block` to a multiple of `factor` (127 ->
 * 128 by 16), so that its loop splits into whole tiles with no guard. The
 * iter must be bound to a loop of its own over its whole extent (before
 * any split) holding only this block, with no predicate, and used only as
 * a whole index: each input it indexes is read through a new copy
 * `NAME_pad` with zeros past the extent (its block of the same name, after
 * the input's producers), and the one output is written into `NAME_pad`,
 * copied out by a new block `NAME_unpad` after the nest. out (NULL or room
 * for `cap`) receives the new blocks, *n (NULL or) their count: the
 * inputs' copies, then the copy out. Nothing is done when the extent is
 * already a multiple. */
int ts_sched_pad_einsum(ts_sched *s, ts_rv block, int iter, int factor,
                        ts_rv *out, int cap, int *n);

/* --- reductions (schedule/reduction.c, shift.c) --- */
/* Rewrites the signed int8 operand `buffer` of a sum block C = C +
 * int32(A) * int32(B) (int32 C, zero init, 8-bit B) as uint8 A + 128: a
 * block `A_u8` writes the shifted copy, a block `B_sum` sums B over the
 * block's reduce iters, and the init becomes C = -128 * B_sum (exact in
 * int32). out (NULL or room for two) receives the new blocks: A_u8, then
 * B_sum. */
int ts_sched_shift_int8(ts_sched *s, ts_rv block, const char *buffer,
                        ts_rv *out);
/* Splits a reduction block's init into a new block `NAME_init` placed
 * before `loop` (an ancestor of the block), under copies of the spatial
 * loops between. out receives the init block. */
int ts_sched_decompose_reduction(ts_sched *s, ts_rv block, ts_rv loop,
                                 ts_rv *out);
/* Factors the reduction over `loop` into a new block `NAME_rf` writing a
 * new buffer with the loop as an extra spatial dimension at factor_axis;
 * the original block then reduces that buffer. out receives the rf block. */
int ts_sched_rfactor(ts_sched *s, ts_rv loop, int factor_axis, ts_rv *out);

/* --- blockize and tensorize (schedule/blockize.c, tensorize.c) --- */
/* Wraps the loop subtree (a perfect nest over one block) in a new block
 * `NAME_o` whose iter vars are the outer parts of the inner bindings. */
int ts_sched_blockize(ts_sched *s, ts_rv loop, ts_rv *out);
/* Replaces a block's subtree (blockizing a loop first) by the
 * implementation of a registered tensor intrinsic whose description it
 * matches; refuses with the reason of the mismatch otherwise. */
int ts_sched_tensorize(ts_sched *s, ts_rv block_or_loop, const char *intrin);
/* The block annotation tensorize leaves on the block it replaces, valued
 * with the intrinsic's name: the regions of such a block are kept when
 * regions are inferred again, and the tuner does not vectorize it. */
#define TS_ANN_TENSOR_INTRIN "tensor_intrin"

/* --- sampling (schedule/sampling.c) --- */
/* n integer RVs whose product is the loop's extent, the innermost at most
 * max_innermost_factor (>= 1). */
int ts_sched_sample_perfect_tile(ts_sched *s, ts_rv loop, int n,
                                 int max_innermost_factor, ts_rv *out);
/* n integer RVs (n >= 2) tiling the loop's extent E, not necessarily
 * perfectly: the inner n - 1 factors are the decision and the outermost is
 * ceil(E / their product), so split adds the predicate `fused < E` when
 * the product exceeds E. A decision is valid when its factors are
 * positive, the innermost is at most max_innermost_factor and the padded
 * extent (outermost times the product of the others) is below 2 * E.
 * Sampling draws a perfect tile half of the time (as sample_perfect_tile),
 * otherwise an innermost factor among the multiples of innermost_step (>=
 * 1) up to the maximum and the rest from the prime factors of the padded
 * remainder ceil(E / innermost), sometimes rounded up to a multiple of 2,
 * 4 or 8 (an imperfect tile at the middle levels too). The decision lists
 * the n - 1 inner factors. */
int ts_sched_sample_tile(ts_sched *s, ts_rv loop, int n,
                         int max_innermost_factor, int innermost_step,
                         ts_rv *out);
/* One of n candidates with the given probabilities (non-negative, positive
 * sum). */
int ts_sched_sample_categorical(ts_sched *s, const int64_t *candidates,
                                const double *probs, int n, ts_rv *out);
/* A loop RV: one of the loops where compute_at(block, loop) is legal, or
 * the root mark (leave the block) or the inline mark (when it can be
 * inlined), uniformly. */
int ts_sched_sample_compute_location(ts_sched *s, ts_rv block, ts_rv *out);

/* ========================================================================
 * Traces (schedule/trace.c)
 * ======================================================================== */

/* The instruction kinds, from schedule/instructions.def. */
typedef enum ts_instr_kind {
#define TS_INSTR(id, name, inputs, attrs, decision, outputs, pure)             \
  TS_INSTR_##id,
#include "schedule/instructions.def"
#undef TS_INSTR
  TS_INSTR_KIND_COUNT
} ts_instr_kind;

/* The kind's name as written in JSON and scripts ("split"), or NULL. */
const char *ts_instr_kind_name(ts_instr_kind k);

/* An empty trace / a deep copy / free (NULL is a no-op). */
ts_trace *ts_trace_new(void);
ts_trace *ts_trace_copy(const ts_trace *t);
/* (ts_trace_new, ts_trace_copy, ts_trace_simplify, ts_trace_to_json and
 * ts_trace_print return NULL when memory runs out.) */
void ts_trace_free(ts_trace *t);
int ts_trace_n_insts(const ts_trace *t);
ts_instr_kind ts_trace_inst_kind(const ts_trace *t, int i);
/* Whether instruction i is a sampling instruction (has a decision). */
bool ts_trace_inst_is_sampling(const ts_trace *t, int i);
/* The decision of sampling instruction i: copies up to cap values into
 * values and returns their count (1 for categorical and compute location,
 * n for perfect tile, n - 1 for sample_tile, whose outermost factor is
 * derived); -1 when it has none or is not a sampling instruction. */
int ts_trace_decision(const ts_trace *t, int i, int64_t *values, int cap);
/* Replaces the decision of sampling instruction i (n < 0 removes it, so a
 * replay samples afresh). The decision is checked when the trace is
 * applied, not here. TS_EINVAL when i is not a sampling instruction. */
int ts_trace_set_decision(ts_trace *t, int i, const int64_t *values, int n,
                          ts_error *err);

/* Applies the trace to a fresh schedule of f (seeded with `seed`; recorded
 * decisions are used, missing ones sampled). Errors name the instruction
 * ("replay: instruction 4 (split): split: ..."); on failure *out is NULL.
 * On success *out is a new schedule the caller frees. */
int ts_trace_apply(const ts_trace *t, const ts_func *f, uint64_t seed,
                   ts_sched **out, ts_error *err);
/* The trace without dead instructions (queries and samplings whose outputs
 * nothing live uses). Caller frees. */
ts_trace *ts_trace_simplify(const ts_trace *t);

/* JSON: {"version": 1, "instructions": [{"kind", "inputs", "attrs",
 * "outputs"}...], "decisions": [[index, value]...]}. Inputs are RV names
 * ("l3"), integers or null; attrs are strings, numbers, lists or null.
 * Returns a malloc'd string (caller frees); NULL when out of memory. */
char *ts_trace_to_json(const ts_trace *t);
/* Parses the JSON form. Malformed JSON, an unknown version or kind, a wrong
 * number or type of inputs/attrs, an undefined or redefined RV name give
 * TS_EPARSE/TS_EINVAL naming the instruction index and field. On success
 * *out is a new trace the caller frees. */
int ts_trace_from_json(const char *text, size_t len, ts_trace **out,
                       ts_error *err);
int ts_trace_from_json_file(const char *path, ts_trace **out, ts_error *err);
/* Whether json[0..len) is a trace ts_trace_from_json reads: TS_OK or its
 * error. The database's full trace check (ts_db_options.check_trace, of the
 * same signature; ctx is unused). */
int ts_trace_check_json(void *ctx, const char *json, size_t len, ts_error *err);
/* A readable script, one primitive per line:
 *   b0 = get_block(name="C")
 *   l1, l2, l3 = get_loops(block=b0)
 *   v4, v5 = sample_perfect_tile(loop=l1, n=2, max_innermost_factor=16,
 *                                decision=[4, 8])
 * Returns a malloc'd string (caller frees). */
char *ts_trace_print(const ts_trace *t);

/* ========================================================================
 * Tensor intrinsics (schedule/intrin.c)
 * ======================================================================== */

/* The registered intrinsics, NULL-terminated ("amx_bf16_16x16x32", ...).
 * Not listed, ts_intrin_get also knows each AMX intrinsic's row edges:
 * "<amx intrinsic>_r<R>" computes the same product over R rows, 0 < R <
 * its tile rows ("amx_int8_32x32x256_r23"). */
const char *const *ts_intrin_names(void);
/* The description and implementation functions of intrinsic `name`, parsed
 * fresh: *desc and *impl are new functions the caller frees with
 * ts_func_free. `feature` (may be NULL) receives the target feature the
 * implementation needs, as ts_target_has_feature names it ("amx-bf16",
 * "avx512vnni", "sm_80", ...; static storage). TS_ENOTFOUND for an unknown
 * name. */
int ts_intrin_get(const char *name, ts_func **desc, ts_func **impl,
                  const char **feature, ts_error *err);
/* The target feature whose intrinsics compute what intrinsic `name` does,
 * faster: a target with it need not consider `name` (AVX2's multiply-add
 * pairs on a target with AVX512-VNNI). NULL when none, or for an unknown
 * name. */
const char *ts_intrin_superseded_by(const char *name);
/* A second target feature intrinsic `name` needs beside the one
 * ts_intrin_get gives (AVX512VL for the 8-lane VNNI dots); NULL when none,
 * or for an unknown name. */
const char *ts_intrin_also_needs(const char *name);

/* ========================================================================
 * Constant stages ahead of time (schedule/hoist.c)
 * ======================================================================== */

/* A scheduled function split in two: the stages that compute only from
 * constant parameters (a weight packed into a kernel's layout, its column
 * sums) as `prologue`, and the rest as `main`. prologue's parameters are
 * n_inputs of f's constant parameters (f's indices in inputs[]), then
 * n_outputs buffers it writes; main's are f's parameters, then those
 * n_outputs buffers, which it reads. Running the prologue on a call's
 * constants and then main on the call's arguments plus the prologue's
 * outputs computes what f computes. */
typedef struct ts_hoist {
  ts_func *prologue, *main; /* NULL: nothing to hoist */
  int *inputs;
  int n_inputs, n_outputs;
} ts_hoist;

/* Splits scheduled function f (is_const: one flag per parameter, the ones
 * whose values are known ahead of time). TS_OK with out->prologue NULL
 * when no stage computes only from constants, or when nothing the rest
 * reads would come from one. The stages are root-level leaf blocks whose
 * bodies are stores (no intrinsic calls), under loops not bound to GPU
 * threads. Both functions are verified. */
int ts_func_hoist_const(const ts_func *f, const bool *is_const, ts_hoist *out,
                        ts_error *err);
void ts_hoist_clear(ts_hoist *h);

#endif /* TESSERA_SCHEDULE_H */
