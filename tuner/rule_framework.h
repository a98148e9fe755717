/*
 * rule_framework.h — the design-space generator's framework
 * (rule_framework.c) and the entry points of the rule families it drives.
 * The framework holds the generator state (partial design spaces and the
 * blocks a tiling rule handled), the helpers every rule family builds on
 * (state forking and naming, multi-level tiling, the fusible elementwise
 * consumer) and the driver, ts_space_generate, which applies the families'
 * rules block by block. Each rule family — rules_cpu.c, rules_gpu.c,
 * rules_tensorize.c — calls only the framework, never another family.
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

typedef struct gen {
  const ts_target *t;
  const ts_space_options *o;
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

/* The single consumer of block b when it is elementwise (spatial, one
 * store): 0 with *out set, else -1. */
int fusible_consumer(ts_sched *s, ts_rv b, ts_rv *out);

/* ========================================================================
 * Rule families (called by the driver in rule_framework.c)
 * ======================================================================== */

/* The rules whose variants are states written to out (capacity cap)
 * return how many they wrote (0: not applicable; the caller keeps st). */

/* CPU rules (rules_cpu.c); auto-inline, random compute location and
 * parallelize-vectorize-unroll serve cuda targets too. */

/* Inlines a spatial producer into its consumers when the schedule allows
 * it; returns whether it did. */
bool rule_auto_inline(const gen *g, gen_state *st, const char *block);
/* Whether *keep got a copy of st in which `block`, whose body is expensive
 * and read by several consumers, stays a stage of its own (named
 * "materialized"); taken before the inline rule runs. CPU only. */
bool rule_keep_materialized(const gen *g, const gen_state *st,
                            const char *block, gen_state *keep);
/* The SSRSRS multi-level tiling variants of `block` (with cache-write and
 * cache-read levels as the options allow). The caller checks that the block
 * is a reduction with data reuse. */
int rule_cpu_tiling(const gen *g, const gen_state *st, const char *block,
                    gen_state *out, int cap);
/* The add-rfactor variant of a reduction (the reduce loops' outer part
 * factored out as a parallel dimension, or failing that the innermost
 * reduce loop's vector lanes): 1 with *out set, else 0. */
int rule_cpu_rfactor(const gen *g, const gen_state *st, const char *block,
                     gen_state *out);
/* A sampled compute location for a block no tiling rule handled. */
void rule_random_compute_location(gen_state *st, const char *block);
/* The root block's parallel / vectorize / unroll plans (annotations the
 * rewrite_parallel_vectorize_unroll postprocessor turns into loop kinds). */
int rule_parallel_vectorize_unroll(const gen *g, gen_state *st);

/* Tensorization rule (rules_tensorize.c): the variants of `st` where
 * `block` is tiled onto a tensor intrinsic the (CPU) target supports. */
int rule_tensorize(const gen *g, const gen_state *st, const char *block,
                   gen_state *out, int cap);

/* GPU rules (rules_gpu.c). */
int rule_gpu_tiling(const gen *g, const gen_state *st, const char *block,
                    gen_state *out, int cap);
int rule_gpu_cross_thread_reduction(const gen *g, const gen_state *st,
                                    const char *block, gen_state *out, int cap);
/* Binds the outer loops of blocks no rule bound (blockIdx/threadIdx). */
int rule_gpu_auto_bind(const gen *g, gen_state *st, const char *block);

#endif /* TESSERA_TUNER_RULE_FRAMEWORK_H */
