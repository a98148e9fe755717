/*
 * rule_framework.h — the design-space generator's framework
 * (rule_framework.c) and the entry points of the rule families it drives.
 * The framework holds the generator state (partial design spaces and the
 * blocks a tiling rule handled), the helpers every rule family builds on
 * (state forking and naming, multi-level tiling, the fusible elementwise
 * consumer) and the driver, ts_space_generate, which applies the rules of
 * the target's rule list (rule_lists.c) block by block. Each rule family —
 * rules_cpu.c, rules_gpu.c, rules_tensorize.c — calls only the framework,
 * never another family; the lists compose them.
 */
#ifndef TESSERA_TUNER_RULE_FRAMEWORK_H
#define TESSERA_TUNER_RULE_FRAMEWORK_H

#include "tuner/internal.h"

/* ========================================================================
 * The generator state (rule_framework.c)
 * ======================================================================== */

/* One partial design space. */
typedef struct gen_state {
  ts_sched *s;
  char name[160];
  char intrin[48];
  char tiled[MAX_BLOCKS][64]; /* blocks a tiling rule handled */
  int n_tiled;
  /* the sampled thread count the state's cross-thread reductions computed
   * in a consumer's thread block share with it (GPU; valid when
   * gpu_threads_reduce > 0, the reduction extent it was sampled for) */
  ts_rv gpu_threads;
  int64_t gpu_threads_reduce;
} gen_state;

typedef struct rule_list rule_list;

typedef struct gen {
  const ts_target *t;
  const ts_space_options *o;
  const rule_list *rules; /* the target's (rule_list_of) */
  gen_state st[MAX_STATES];
  int n;
} gen;

bool state_tiled(const gen_state *g, const char *block);
void state_mark_tiled(gen_state *g, const char *block);
/* A copy of a state (its schedule forked); TS_OK or the fork's error. */
int state_fork(const gen_state *from, gen_state *to, ts_error *err);
void state_clear(gen_state *g);

void state_append_name(gen_state *g, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ========================================================================
 * Helpers of the rules (rule_framework.c)
 * ======================================================================== */

/* The tile groups of one tiled block: loops that were not split first, then
 * one group per level of the structure (e.g. "SSRSRS"). */
typedef struct tiles {
  ts_rv outer[MAX_LOOPS];
  int n_outer;
  ts_rv level[8][MAX_LOOPS];
  int n_level[8];
  int n_levels;
} tiles;

/* Splits every loop of block `name` by `structure` (each loop binding
 * spatial iters into the S levels, each binding reduce iters into the R
 * levels, with sample_perfect_tile decisions, the innermost factor at most
 * max_inner; reduce loops of extent 1 open the first R level unsplit;
 * other loops of extent 1 and loops binding nothing stay outside, in
 * front) and reorders the loops level by level; the loops in inner[0,
 * n_inner) are left unsplit and placed innermost in that order. On failure
 * the schedule may hold part of the work: the caller drops the state. */
int tile_block(ts_sched *s, const char *name, const char *structure,
               int max_inner, const ts_rv *inner, int n_inner, tiles *out);

/* Imperfect spatial tiles for tile_block_ex: the spatial loops are split
 * by sample_tile (tiles that need not divide the extent, perfect ones half
 * of the time), the innermost spatial loop (the one vectorized) with its
 * innermost factor a multiple of `lanes`, the others with their innermost
 * factor (the rows of a register tile) at most `max_rows`. */
typedef struct tile_imperfect {
  int lanes;
  int max_rows;
} tile_imperfect;

/* tile_block with imperfect spatial tiles when im is non-NULL. */
int tile_block_ex(ts_sched *s, const char *name, const char *structure,
                  int max_inner, const ts_rv *inner, int n_inner,
                  const tile_imperfect *im, tiles *out);

/* The dimension of `buffer`, read by the block realized as r, that loop l
 * indexes: -1 when none does, -2 when several do. */
int read_dim_of_loop(const ts_stmt *r, const ts_buffer *buffer,
                     const ts_stmt *l);
/* A copy whose destination and source run along different dimensions
 * (Y[i, j] = X[j, i], NCHW -> NHWC, a transposed operand packed with the
 * vector axis last): the block's innermost loop moves along the last
 * dimension of one side and an enclosing loop of its own along the other
 * side's. Both are split by L (the largest power of two up to max_lanes
 * dividing both extents, at least 4), the two L-loops moved innermost, the
 * outer one unrolled and the inner one vectorized: the code generator
 * emits each L x L tile as whole-vector loads, a transpose in registers
 * and whole-vector stores (codegen/emit_transpose.c). Returns whether it
 * did; the checks come first, so a copy of another form is left as it
 * was. */
bool tile_transpose(ts_sched *s, const char *name, int max_lanes);
/* A copy into an interleaved layout (B packed for a dot-product
 * intrinsic: P consecutive k of each column side by side, the source
 * contiguous along the columns): its two innermost loops, k enclosing j,
 * split by P and by V = group_bytes / (P x element bytes) (at most
 * max_lanes), ordered k0, j0, k1, j1, k1 unrolled and j1 vectorized, so
 * each P x V group is a run the code generator emits as P loads, one
 * interleaving shuffle and one store. False, unchanged, when the block is
 * not such a copy. */
bool tile_interleave(ts_sched *s, const char *name, int64_t group_bytes,
                     int64_t max_lanes);
/* A copy into a layout of groups (B of a product with transpose_b packed
 * for a dot-product intrinsic: P consecutive k of a column side by side,
 * the columns next to each other, the source contiguous along k): its
 * innermost loop (along k) split by P, the loop along the columns moved
 * inside the outer part and unrolled (when at most max_unroll), the P
 * elements vectorized, so each group is one P-element load and store
 * instead of P scattered ones. False, unchanged, when the block is not
 * such a copy. */
bool tile_group_copy(ts_sched *s, const char *name, int64_t max_unroll);
/* A copy of `buffer` (read by block b) made before b (cache_read, "global")
 * with dimension `dim` moved last (transform_layout): the packed panel of
 * an operand whose vector axis is not its innermost one (B of a product
 * with transpose_b). *out: the copy's block. */
int cache_read_dim_last(ts_sched *s, ts_rv b, const char *buffer, int dim,
                        ts_rv *out);

/* The single consumer of block b when it is elementwise (spatial, one
 * store): 0 with *out set, else -1. */
int fusible_consumer(ts_sched *s, ts_rv b, ts_rv *out);

/* Whether `block` is a reduction with data reuse in st (what multi-level
 * tiling on a CPU wants). */
bool block_needs_tiling(const gen_state *st, const char *block);

/* ========================================================================
 * Rule families (composed by the rule lists of rule_lists.c)
 * ======================================================================== */

/* The rules whose variants are states written to out (capacity cap)
 * return how many they wrote (0: not applicable; the caller keeps st). */

/* Rules every list may use (rules_cpu.c): auto-inline, random compute
 * location. */

/* Inlines a spatial producer into its consumers when the schedule allows
 * it (a block computing through if_then_else only when the list's
 * inline_padding says so); returns whether it did. */
bool rule_auto_inline(const gen *g, gen_state *st, const char *block);
/* A sampled compute location for a block no tiling rule handled. */
void rule_random_compute_location(gen_state *st, const char *block);

/* CPU rules (rules_cpu.c). */

/* Whether *keep got a copy of st in which `block`, whose body is expensive
 * and read by several consumers, stays a stage of its own (named
 * "materialized"); taken before the inline rule runs. */
bool rule_keep_materialized(const gen *g, const gen_state *st,
                            const char *block, gen_state *keep);
bool rule_cpu_padding_inlined(const gen *g, const gen_state *st,
                              const char *name, gen_state *out);
/* The SSRSRS multi-level tiling variants of `block` when it is a reduction
 * with data reuse (with cache-write and cache-read levels as the options
 * allow). */
int rule_cpu_tiling(const gen *g, const gen_state *st, const char *block,
                    gen_state *out, int cap);
/* The add-rfactor variant of a reduction (the reduce loops' outer part
 * factored out as a parallel dimension, or failing that the innermost
 * reduce loop's vector lanes): 1 with *out set, else 0. */
int rule_cpu_rfactor(const gen *g, const gen_state *st, const char *block,
                     gen_state *out);
/* The root block's parallel / vectorize / unroll plans (annotations the
 * rewrite_parallel_vectorize_unroll postprocessor turns into loop kinds). */
int rule_parallel_vectorize_unroll(const gen *g, gen_state *st);

/* Tensorization rule (rules_tensorize.c): the variants of `st` where
 * `block`, a reduction with data reuse, is tiled onto a tensor intrinsic
 * the (CPU) target has the feature of (when the options allow). */
int rule_tensorize(const gen *g, const gen_state *st, const char *block,
                   gen_state *out, int cap);
/* The default schedule's form of it (default.c): `block`, GEMM-shaped with
 * rows, tensorized onto the target's dot intrinsic (one without rows) of
 * its operand types with the longest K tile, with
 * a fixed register tile of rows x column tiles of intrinsic calls whose
 * accumulators stay in registers across a K block, B packed per column
 * panel inside the panel's (parallel) loop, the init vectorized. With
 * `amx`, instead, AMX's 2 x 2 tile blocks (rules_tensorize.c,
 * amx_default): TS_ESCHEDULE, unchanged, where the target has no AMX or
 * the block is not a product it takes. On failure the schedule may hold
 * part of the work: the caller drops it. */
int tensorize_default(ts_sched *s, const ts_target *t, const char *block,
                      bool amx);
/* The default schedule's register tiling of one reduction block (no
 * intrinsic: the innermost spatial loop vectorized, a register tile of
 * rows, the init decomposed): for the parts of a partitioned product that
 * no intrinsic tile fits. False when the block is not of that form; the
 * schedule may then hold part of the work: the caller drops it. */
bool default_tile_block(ts_sched *s, const ts_target *t, const char *block);

/* GPU rules (rules_gpu.c). */
int rule_gpu_tiling(const gen *g, const gen_state *st, const char *block,
                    gen_state *out, int cap);
int rule_gpu_cross_thread_reduction(const gen *g, const gen_state *st,
                                    const char *block, gen_state *out, int cap);
/* Binds the outer loops of blocks no rule bound (blockIdx/threadIdx). */
int rule_gpu_auto_bind(const gen *g, gen_state *st, const char *block);
/* The root block's unroll plan (threads come from the bindings). */
int rule_gpu_unroll(const gen *g, gen_state *st);

/* Default schedules (default.c): the CPU rules, or the GPU design space's
 * first candidate that postprocesses. */
int default_schedule_cpu(const ts_func *f, const ts_target *t, ts_sched **out,
                         ts_error *err);
int default_schedule_gpu(const ts_func *f, const ts_target *t, ts_sched **out,
                         ts_error *err);

/* ========================================================================
 * Rule lists (rule_lists.c)
 * ======================================================================== */

/* A variant-giving rule of the tiling pass. */
typedef int (*tiling_rule)(const gen *g, const gen_state *st, const char *block,
                           gen_state *out, int cap);

#define MAX_TILING_RULES 4

/* What the tuner does for the targets whose facts name the list
 * (ts_target_facts.rules): the rules the design-space generator applies,
 * the postprocessors of a candidate, the mutators' default probabilities
 * and the default schedule. The generator runs, block by block (consumers
 * first) in every state:
 *   1. keep_materialized (may add a state), auto-inline, and for a block
 *      not inlined rfactor (may add a state);
 *   2. the tiling rules: each gives variants of the state that replace it
 *      (all of them, or with tiling_first_only those of the first rule
 *      that gives any);
 *   3. random compute location;
 * then in every state bind for every block, and root_plans. */
struct rule_list {
  const char *name; /* "cpu", "gpu" */
  bool (*keep_materialized)(const gen *g, const gen_state *st,
                            const char *block, gen_state *keep); /* NULL */
  bool inline_padding; /* auto-inline blocks that compute through
                          if_then_else (padding) */
  /* where padding stays: a variant with it inlined (NULL: none) */
  bool (*padding_inlined)(const gen *g, const gen_state *st, const char *block,
                          gen_state *out);
  int (*rfactor)(const gen *g, const gen_state *st, const char *block,
                 gen_state *out);       /* NULL: none */
  tiling_rule tiling[MAX_TILING_RULES]; /* NULL-terminated when shorter */
  bool tiling_first_only;
  int (*bind)(const gen *g, gen_state *st, const char *block); /* NULL */
  int (*root_plans)(const gen *g, gen_state *st);
  /* the postprocessors, in order */
  ts_postproc_kind postprocs[TS_N_POSTPROCS];
  int n_postprocs;
  /* whether rewrite_parallel_vectorize_unroll turns the root block's
   * parallel and vectorize plans into loop kinds (else only unrolling) */
  bool parallel_vectorize;
  double mutator_probs[TS_N_MUTATORS];
  int (*default_schedule)(const ts_func *f, const ts_target *t, ts_sched **out,
                          ts_error *err);
};

/* The list t's facts name; the first list (cpu) for a NULL target. */
const rule_list *rule_list_of(const ts_target *t);

#endif /* TESSERA_TUNER_RULE_FRAMEWORK_H */
