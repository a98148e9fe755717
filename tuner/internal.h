/*
 * internal.h — what the files of tuner/ share: block and loop analysis on a
 * schedule (which loops bind spatial or reduce iters, which blocks need
 * tiling), the annotation keys rules leave for postprocessors (the
 * generator and its rules: rule_framework.h), the search-strategy
 * interface, and small utilities (monotonic clock, dynamic arrays).
 */
#ifndef TESSERA_TUNER_INTERNAL_H
#define TESSERA_TUNER_INTERNAL_H

#include "tuner/tuner.h"

#include <stdlib.h>

/* Annotation keys the rules put on the root block (and on blocks) for the
 * postprocessors; the postprocessors remove them. */
#define ANN_PARALLEL "tuner.parallel"   /* root: max parallel extent */
#define ANN_VECTORIZE "tuner.vectorize" /* root: max vectorize lanes */
#define ANN_UNROLL "tuner.unroll"       /* root: auto-unroll max step */
#define ANN_STREAM "tuner.stream"       /* root: non-temporal output stores */
#define ANN_PREFETCH "tuner.prefetch"   /* root: software prefetches */
/* Outputs of at least this many bytes in all get the non-temporal store
 * decision (rule_parallel_vectorize_unroll): below it the output stays in
 * the caches between calls and bypassing them only loses. */
#define STREAM_MIN_BYTES ((int64_t)4 << 20)
/* The bytes of f's outputs (rules_cpu.c). */
int64_t output_bytes(const ts_func *f);
/* Annotates TS_ANN_NONTEMPORAL on the outer loop of each top-level nest of
 * s that writes f's outputs from spatial blocks only (postproc.c, as
 * rewrite_parallel_vectorize_unroll does for a sampled tuner.stream).
 * Returns the loops annotated. */
int stream_outputs(ts_sched *s);
/* Inputs of at least this many bytes (one of them) get the prefetch
 * decision (rule_parallel_vectorize_unroll), prefetches in the default
 * schedule (CPU) and a default candidate without them beside it: what
 * fits in L2 is not worth it. */
#define PREFETCH_MIN_BYTES ((int64_t)1 << 20)
/* The bytes of f's largest input (rules_cpu.c). */
int64_t largest_input_bytes(const ts_func *f);
/* Annotates TS_ANN_PREFETCH = on (1, or 0: off) on the outer loop of each
 * top-level nest of s (postproc.c, as rewrite_parallel_vectorize_unroll
 * does for a sampled tuner.prefetch). Returns the loops annotated. */
int prefetch_inputs(ts_sched *s, int on);
#define ANN_TENSORIZE "tuner.tensorize" /* block: intrinsic name */
#define ANN_TENSORIZE_LOOPS                                                    \
  "tuner.tensorize_loops"                       /* block: inner loops          \
                                                   the intrinsic covers */
#define ANN_GPU_FETCH "tuner.cooperative_fetch" /* block: vector length */
#define ANN_GPU_THREADS                                                        \
  "tuner.thread_extent" /* root: threads per block                             \
                           (auto-bind) */

/* The most loops, blocks and states the generator handles. */
#define MAX_LOOPS 64
#define MAX_BLOCKS 64
#define MAX_STATES 16

/* Bits of loop_binding. */
enum { BIND_SPATIAL = 1, BIND_REDUCE = 2 };

/* Which kinds of iter vars the loop's var feeds in the block realize r
 * (BIND_* bits; 0 when it feeds none). */
int loop_binding(const ts_stmt *realize, const ts_stmt *loop);
/* Whether expression e (may be NULL) uses variable var. */
bool expr_uses_var(const ts_expr *e, const ts_expr *var);
/* Whether the block has a reduce iter var. */
bool block_is_reduction(const ts_block *b);
/* Whether some buffer the block reads is indexed without one of its iter
 * vars of extent > 1 (so tiling gives data reuse: matmul, conv). */
bool block_has_reuse(const ts_stmt *realize);
/* Whether some buffer the block reads is indexed without one of its
 * spatial iter vars of extent > 1 (A[i, k] of a matmul misses j), so the
 * threads of a GPU tile share loads. A load that misses only reduce vars
 * (layer_norm's centred square sum reads the row's mean) does not count, as
 * in MetaSchedule's NeedsMultiLevelTiling. */
bool block_has_spatial_reuse(const ts_stmt *realize);
/* Whether an expression or statement calls if_then_else. */
bool stmt_uses_if_then_else(const ts_stmt *s);
/* Whether a statement calls a transcendental function (exp, log, tanh, erf,
 * sigmoid, pow). */
bool stmt_uses_expensive_call(const ts_stmt *s);
/* Whether the block writes a parameter of f. */
bool block_writes_param(const ts_func *f, const ts_block *b);
/* The constant extent of a loop handle's loop (0 when unknown). */
int64_t rv_extent(const ts_sched *s, ts_rv loop);
/* Factors a vector's worth of a reduction out (rfactor), so the row is
 * combined `accumulators` whole vectors at a time and the lanes at the
 * end: the block's innermost loop, when it is a reduce loop of at least
 * min_vectors vectors, is split into [ceil(ext / (lanes * accumulators)),
 * lanes * accumulators] and
 * the inner part rfactored. Only a block with one write and no reuse (a row
 * reduction, not a matmul): none at all, or with spatial_only none across
 * a spatial iter (layer norm's centred sum reads the row's mean at every
 * k). With narrower (one accumulator), a row that no whole vector divides
 * takes the widest power-of-two part of one (at least 4 lanes) that does.
 * A row that none of these divides is split past its end, the lanes beyond
 * the row guarded in the last step. TS_ESCHEDULE when it does not apply. */
int vector_rfactor(ts_sched *s, const ts_target *t, const char *block,
                   int accumulators, int min_vectors, bool spatial_only,
                   bool narrower);
/* The same with the reuse the block may have (reuse 0: none, 1: none
 * across a spatial iter, as spatial_only, 2: any: an attention task's row
 * maximum reads a mask broadcast over the rows) and the factored lanes the
 * last axis of the partials' buffer (lanes_last) rather than the second:
 * partials of several rows computed under one loop (the attention task's
 * row tile) stay a contiguous vector per row. */
int vector_rfactor_at(ts_sched *s, const ts_target *t, const char *block,
                      int accumulators, int min_vectors, int reuse,
                      bool narrower, bool lanes_last);
/* Every other block computed at the innermost row loop of the last block
 * that writes an output (its leading spatial loops that index every
 * intermediate it reads), consumers first, so a row-wise operator (softmax,
 * layer norm, of any rank) is one loop nest over rows. */
void producers_at_output(ts_sched *s);
/* Fuses the loop nests of two blocks below their common loops
 * (fuse_siblings, outermost first, while the loops at a level have one
 * extent and the primitive accepts them, in either program order): two
 * reductions over one row then read it in one loop. Returns the number of
 * levels fused (0: nothing changed). */
int fuse_sibling_nests(ts_sched *s, const char *first, const char *second);
/* Whether blocks a and b read a buffer that neither writes. */
bool reductions_share_input(const ts_block *a, const ts_block *b);
/* For each reduction block, the nests of the first earlier reduction that
 * reads a buffer in common with it (one neither writes) fused with its own
 * as far as fuse_sibling_nests goes: layer norm's sum and sum of squares
 * in one pass over the row. With a CPU target t, a fused reduce loop that
 * LLVM would unroll whole into more vectors than t's registers is kept a
 * loop (TS_ANN_NO_UNROLL). Returns the number of pairs fused. */
int fuse_sibling_reductions(ts_sched *s, const ts_target *t);
/* Whether some input of the block realized as r (a region of a buffer it
 * does not write) is indexed by both loops' vars, through its bindings. */
bool shares_input(const ts_stmt *r, const ts_stmt *la, const ts_stmt *lb);
/* Work (loop iterations) below which a block of the default schedule
 * stays serial. */
#define DEFAULT_MIN_PARALLEL_WORK 4096
/* The default schedule's register tiles (default_tiles.c). */
/* How much better a ceil split must fill its lanes than the best divisor
 * tile to be taken (it pays a local accumulator and a guarded last tile). */
#define WHOLE_VECTOR_GAIN 1.08
/* Vector instructions per row of a tile of c columns on `lanes` lanes. */
int64_t default_vector_ops(int64_t c, int lanes);
/* The divisor of n up to four vectors with the most lanes per vector
 * instruction, for an extent that no whole vector divides. */
int64_t default_lane_tile(int64_t n, int lanes);
/* The share of computed lanes that are real: a divisor tile of c columns;
 * a ceil split of n into tiles of c whole vectors. */
double default_divisor_fill(int64_t c, int lanes);
double default_ceil_fill(int64_t n, int64_t c);
/* The largest divisor of n that is at most cap (>= 1). */
int64_t default_divisor_upto(int64_t n, int64_t cap);
/* The rows of a register tile v vectors wide on `regs` vector registers. */
int64_t default_rows_cap(int regs, int64_t v);
/* The divisor tile of er rows x ev columns: columns returned, rows into
 * *rows; `three`: 3-vector tiles of a longer axis allowed. */
int64_t default_register_tile(int64_t er, int64_t ev, int lanes, int regs,
                              int64_t *rows, bool three);
/* default_register_tile's, or, where its divisors leave the tile short of
 * 12 accumulators, rows split ceil-wise when that gives it more (49 rows,
 * a 7x7 pointwise conv as a product: 7 x 1 vector -> 6 x 2: matmul 49 x
 * 512 x 2048 0.68-0.83 -> 0.94-1.03 x the best library; AVX2 Zen 3). */
int64_t default_product_tile(int64_t er, int64_t ev, int lanes, int regs,
                             int64_t *rows);
/* The tile over rows split ceil-wise (every tile but the last full). */
int64_t default_ceil_rows_tile(int64_t er, int64_t ev, int lanes, int regs,
                               int64_t *rows);
/* nrows rows of a tile on the budget cap raised to a ceil split as even as
 * the budget allows where er has no divisor near it (has_rows: the tile
 * has a rows axis; own_loads: a depthwise conv's rows). */
int64_t default_ceil_rows(int64_t er, int64_t nrows, int64_t cap, bool has_rows,
                          bool own_loads);
/* The reduce loop (an index into ext/bind) to split into blocks so that
 * a vector tile's panel of panel_bytes, packed per block, fits `budget`,
 * and the block's extent in *chunk; -1 when none is needed or fits. */
int default_reduction_block(const int64_t *ext, const int *bind, int n,
                            int64_t panel_bytes, int64_t budget, int unroll,
                            int64_t *chunk);
/* Whether a conv's output of h rows of w columns (ev channels, innermost
 * reduction of `red` iterations) is better register-tiled over its pixels
 * in order than over the columns (default.c; the default schedule and the
 * CPU tiling rule's pixel variants). */
bool default_pixels_better(int64_t h, int64_t w, int64_t ev, int64_t red,
                           int lanes, int regs);
/* Whether a conv's loops rows and cols (= rows + 1) of the nest loops[0..nl)
 * (binds: each loop's BIND_* for the block realized as r) should be fused
 * into one loop over its pixels, with vec the vector loop: rows a spatial
 * loop that indexes no input the vector loop indexes, and
 * default_pixels_better for their extents and the innermost reduction's
 * (the default schedule's and the CPU tiling rule's test). */
bool pixels_fusible(ts_sched *s, const ts_stmt *r, const ts_rv *loops,
                    const int *binds, int nl, int rows, int cols, int vec,
                    int lanes, int regs);
/* Helpers of the default schedule (default.c) that default_pads.c uses:
 * the lanes of a vector of dtype d on t; the innermost loop of block
 * `name` vectorized when it is spatial and contiguous; the product of a
 * block's loop extents. */
int default_lanes_of(const ts_target *t, ts_dtype d);
void default_vectorize_inner(ts_sched *s, const ts_target *t, const char *name);
/* Whether loop l may be the vector axis of the block in realize r (its
 * output and every input it indexes use it in their last dimension). */
bool default_loop_contiguous(const ts_stmt *r, const ts_stmt *l);
/* The schedule of an attention task (default_attention.c): false when
 * the function is not one, or a step was refused (the schedule is then
 * partly changed: start from a fresh one). With `sample`, the row tile and
 * both products' vector widths are sampled (a design space). */
bool default_attention(ts_sched *s, const ts_target *t, bool sample);
/* Spatial intermediates without padding inlined into their consumers,
 * unless they call a transcendental function and have several (step 1 of
 * the default schedule, default.c). */
void default_inline_intermediates(ts_sched *s);
/* A reduction whose innermost spatial loop is contiguous: its reduce loops
 * moved above that loop, its init decomposed (default_reduce.c). */
void default_reduce_outside(ts_sched *s, const ts_target *t, const char *name);
/* Every row reduction without reuse factored into vector accumulators
 * (default_reduce.c). */
void default_rfactor_rows(ts_sched *s, const ts_target *t);
int64_t default_block_work(ts_sched *s, const char *name);
/* The leading spatial loops of block `name` fused and parallel when it
 * does `work` or more (default_parallel.c). */
void default_parallel_outer(ts_sched *s, const ts_target *t, const char *name,
                            int64_t work);
/* The one input of the anchor realize rr read through loop lv (the vector
 * axis) and not through lr (the rows), NULL when not exactly one; and
 * whether one of the n loops of `outer` indexes it (*by_outer)
 * (default_pack.c, with the next three). */
const ts_buffer *default_streamed_input(const ts_stmt *rr, const ts_stmt *lv,
                                        const ts_stmt *lr,
                                        const ts_stmt *const *outer, int n,
                                        bool *by_outer);
int64_t default_buffer_bytes(const ts_buffer *b);
/* Whether b is a parameter the function declares constant. */
bool default_const_param(ts_sched *s, const ts_buffer *b);
/* Whether b is one of the function's parameters (not a padded or other
 * intermediate copy). */
bool default_is_param(ts_sched *s, const ts_buffer *b);
/* Whether a loop of order[0 .. vo_at) above the vector tile does not index
 * the streamed input (a panel packed at the tile is packed again there). */
bool default_repacked_by_outer(ts_sched *s, const ts_stmt *rr,
                               const ts_stmt *lv, const ts_stmt *lr,
                               const ts_rv *order, int vo_at);
/* The rows of a conv's register tile (default_rows.c).
 * default_fuse_short_rows: rows too few to fill a register tile (the 7
 * output columns of a late conv) fused with the spatial axis just outside
 * them (the image rows) when pixels_fusible says so, so the tile runs over
 * the image's pixels in order; updates loops, binds, *nl, *rows and *vec;
 * false when nothing was fused. default_deep_rows: whether the conv is deep
 * and narrow on a small image (weights over 1 MiB, output channels in
 * fewer 3-vector panels than twice the cores, an output of 256 KiB or
 * less; weights neither constant nor blocked up to 2 MiB) on a target
 * whose registers hold 9 rows of 3 vectors, and then the rows of its
 * 3-vector tile in *nrows: the columns of an image row split as evenly as
 * up to 9 rows allow. */
bool default_fuse_short_rows(ts_sched *s, const ts_stmt *r, ts_rv *loops,
                             int *binds, int *nl, int *rows, int *vec,
                             int lanes, int regs);
bool default_deep_rows(ts_sched *s, const ts_target *t, const ts_stmt *r,
                       const ts_rv *loops, const int *binds, int nl, int vec,
                       int rows, int lanes, int64_t *nrows);
/* The reduction loop of a tile nest to split into blocks placed outside
 * its parallel loop, and the block (*chunk), where weights of `streamed`
 * bytes exceed `budget` and the output (`out_bytes`) is small; or -1
 * (default_parallel.c). */
int default_outer_reduction_block(const int64_t *ext, const int *bind, int n,
                                  int64_t streamed, int64_t out_bytes,
                                  int64_t budget, int unroll, int64_t *chunk);
/* The fewest output rows reading each row of a transposed operand for
 * which the default packs it (default_pack_transposed); fewer take
 * default_dot_rows. */
#define DEFAULT_PACK_MIN_ROWS 8
/* A product whose output rows read each row of its transposed operand
 * fewer than DEFAULT_PACK_MIN_ROWS times (a dense layer of 1 to 7 rows):
 * the reduction in the lanes, all rows by a few columns in registers
 * (default_dot.c). False when the block is not of that form. */
bool default_dot_rows(ts_sched *s, const ts_target *t, const char *name);
/* The product of the extents of the block's spatial loops that do not
 * index input x: how many rows of the output read each element of it
 * (default_pack.c). */
int64_t default_rows_reading(ts_sched *s, const ts_stmt *r, const ts_buffer *x,
                             const ts_rv *loops, int nl);
/* The anchor's packed copies (default_pack.c): the streamed input sb packed
 * once, before the anchor b, in panels of `cols` (the copy's block name
 * into out); a transposed input packed with the vector loop lv's dimension
 * last; the name of the input that the rows and the one reduction `red`
 * read plainly (A of a matmul; "" when none); that input packed into
 * micro-panels of nrows rows. The bools: false when refused. */
bool default_pack_once(ts_sched *s, ts_rv b, const ts_buffer *sb, int64_t cols,
                       char *out, size_t cap);
/* The copy named `copy` (a cache_read, e.g. default_pack_transposed's)
 * laid out in panels of `cols` along its last dimension, as
 * default_pack_once lays out its copy: 1 when done, 0 when it is not of
 * that form (nothing done), -1 when the schedule refused a step. */
int default_pack_copy_once(ts_sched *s, const char *copy, int64_t cols);
bool default_pack_transposed(ts_sched *s, ts_rv b, const ts_stmt *r,
                             const ts_stmt *lv, const ts_rv *loops, int nl,
                             char *out, size_t cap);
/* Names of blocks the default schedule keeps (pad_einsum's copies). */
#define DEFAULT_NAME_MAX 128
#define DEFAULT_PAD_COPIES 16
/* An anchor whose vector loop loops[vec] is a width no vector divides, of
 * one to four vectors, with rows to tile that do not read its inputs:
 * that iter padded to whole vectors (pad_einsum), the output's one
 * elementwise consumer folded into the copy out. Returns 0 when nothing
 * was done, else 1 + the number of input copies, whose block names go
 * into pads (up to cap); the anchor's loops keep their handles
 * (default_narrow.c). default_inline_pads: each copy that the anchor no
 * longer reads (a packed copy of it does) inlined into its reader. */
/* The loop lv of anchor b (realized as r) padded to a multiple of lanes
 * by pad_einsum: the input copies' block names into pads (up to cap; their
 * count returned), the copy out's into unpad (NULL or DEFAULT_NAME_MAX
 * bytes); -1 when refused (nothing done). */
int default_pad_loop(ts_sched *s, ts_rv b, const ts_stmt *r, const ts_stmt *lv,
                     int lanes, char (*pads)[DEFAULT_NAME_MAX], int cap,
                     char *unpad);
int default_pad_narrow(ts_sched *s, const ts_target *t, const char *name,
                       ts_rv b, const ts_rv *loops, int nl, int vec, int lanes,
                       char (*pads)[DEFAULT_NAME_MAX], int cap);
void default_inline_pads(ts_sched *s, const char *anchor,
                         char (*pads)[DEFAULT_NAME_MAX], int n);
void default_rows_input(ts_sched *s, const ts_stmt *r, const ts_rv *loops,
                        int nl, int rows, int vec, int red, char *out,
                        size_t cap, bool *trans);
bool default_pack_rows(ts_sched *s, const ts_target *t, ts_rv b,
                       const char *name, int64_t nrows, bool trans);
/* The padding of an anchor's input (default_pads.c): computed at the
 * anchor's innermost outer loop order[n_outer - 1] where its window is
 * small, inlined for a stem of few taps, else left before the anchor
 * (taps: the anchor's reduction extent per output); whether a padded copy
 * per tile costs less than reading through the guards (a depthwise conv
 * of more than 9 taps); the padding inlined into the anchor. */
void default_pads_at_tile(ts_sched *s, const ts_target *t, ts_rv anchor,
                          const ts_rv *order, int n_outer, int64_t taps);
/* A depthwise conv's register tile, order and taps (default_depthwise.c):
 * the tile's columns and rows narrowed where its accumulators crowd the
 * registers; whether a kernel of more than 9 taps runs a kernel row at a
 * time; whether the channel tiles go outermost; the padding inlined and
 * the taps unrolled inside the tiles (order[n_outer..no)). */
void default_depthwise_tile(int64_t ev, int64_t er, int lanes, int regs,
                            int64_t taps, int64_t kw, bool has_rows,
                            int64_t *cols, int64_t *nrows);
/* 4 vectors x 2 columns of a 3 x 3 tile whose columns go first narrowed
 * to 2 vectors x 4 columns (others: the bytes of the inputs but the
 * weights). */
void default_depthwise_narrow(const ts_target *t, int64_t ev, int64_t er,
                              int lanes, int regs, int64_t taps, int64_t kh,
                              int64_t kw, int64_t elem, int64_t others,
                              bool has_rows, int64_t *cols, int64_t *nrows);
bool default_depthwise_row_loop(int64_t taps, int64_t kw, int64_t nrows,
                                int64_t nvec, int regs);
bool default_depthwise_channels_first(const ts_target *t, int64_t ev,
                                      int64_t cols, int64_t er, int64_t kh,
                                      int64_t kw, int64_t elem, int64_t others);
int64_t default_depthwise_chunk(const ts_target *t, int64_t ev, int64_t cols,
                                int64_t er, int64_t kh, int64_t kw,
                                int64_t elem);
bool default_depthwise_order(ts_sched *s, const ts_target *t, int64_t ev,
                             int64_t cols, int64_t er, int64_t kh, int64_t kw,
                             int64_t elem, int64_t others, bool *vec_first,
                             bool *rows_first, ts_rv *vo, ts_rv *vc);
int64_t default_depthwise_pairs(const ts_target *t, int regs, int64_t ev,
                                int64_t cols, int lanes, int64_t taps,
                                int64_t kw, int64_t elem, int64_t eh,
                                int64_t er);
void default_depthwise_taps(ts_sched *s, ts_rv anchor, const ts_rv *order,
                            int n_outer, int no, ts_rv ri, ts_rv vi,
                            ts_rv outer_tap, bool row_loop);
bool default_copy_per_tile_pays(ts_sched *s, ts_rv anchor, const ts_rv *order,
                                int n_outer, int64_t tile_elems, int64_t taps);
void default_pads_inline(ts_sched *s, ts_rv anchor);
/* Kernels at most this wide (3 x 3) read their padding inline whatever
 * the stride (default_pads_read_inline). */
#define DEFAULT_PAD_INLINE_WINDOW 3
/* Whether anchor (a dense conv, not a stem of fewer channels than a
 * vector) reads its padding block inline rather than from a padded copy:
 * a kernel at most DEFAULT_PAD_INLINE_WINDOW wide, whose taps outside the
 * image the code generator drops; or a strided one whose copy costs a
 * large share of its time (*copy_costly: at most PAD_COPY_COSTLY_MACS
 * multiply-adds of the anchor per padded element, more than two padded
 * pixels per output pixel; default_pads.c). */
bool default_pads_read_inline(ts_sched *s, const ts_target *t, ts_rv anchor,
                              bool *copy_costly);
/* The names of f's blocks in program order, the root excluded; *n gets the
 * count. Returns a malloc'd array of malloc'd names (names_free). */
char **block_names(const ts_func *f, int *n);
void names_free(char **names, int n);
/* The root block's name (the block-realize that is the function body), or
 * NULL when the body is not one. */
const char *root_block_name(const ts_func *f);

/* The design-space generator's state, the rule framework and the rule
 * families' entry points: rule_framework.h. */

/* ---- postprocessing helpers (postproc.c) ---- */

/* Removes every decision of a trace (so a replay samples afresh); returns a
 * new trace the caller frees. */
ts_trace *trace_without_decisions(const ts_trace *t);

/* ---- search (search.c, search_evolutionary.c) ---- */

#define TUNER_MAX_THREADS 64

/* Runs fn(ctx, i, worker) for i in [0, n) on up to `threads` threads (the
 * caller's included; worker is 0..threads-1) and returns when all ran. */
void tuner_parallel(int threads, int n,
                    void (*fn)(void *ctx, int i, int worker), void *ctx);

/* A set of structural hashes (open addressing). Zeroed = empty. */
typedef struct hashset {
  ts_hash128 *keys;
  unsigned char *used;
  size_t n, cap;
} hashset;
bool hashset_has(const hashset *s, ts_hash128 h);
/* Adds h; false when it was present. */
bool hashset_add(hashset *s, ts_hash128 h);
void hashset_free(hashset *s);

/* A candidate with its features and model score, shared by reference
 * between generations. */
typedef struct cand {
  ts_candidate c;
  ts_cm_features feat;
  bool have_feat, feat_failed, scored;
  bool is_default; /* the task's default schedule, not from a design space */
  double score;    /* -inf when its features could not be extracted */
  int refs;
} cand;
cand *cand_new(void); /* refs 1; NULL when memory runs out */
/* Extracts the features of the candidates that lack them (on `threads`
 * threads); one that fails gets feat_failed. */
void cands_features(const ts_target *t, int threads, cand **v, int n);
/* The float arithmetic c's program does (multiply-adds, additions,
 * multiplications, divisions, comparisons and math-function calls, each
 * times its trip count), from its features; -1 when it has none or calls
 * target intrinsics (whose work the features do not count). */
double cand_float_work(const cand *c);
/* The same from features (-1 when they are empty). */
double features_float_work(const ts_cm_features *f);
/* Candidates doing more than this many times the float arithmetic of the
 * task's fastest measured schedule are not measured (job.c, prune_heavy):
 * a producer computed inside its consumer's loops recomputes its whole
 * region for every element there (softmax's row of exps at every output
 * element: about 1000 times the work, 400 ms a call against 1 ms; each
 * such candidate ran into the measurement's time limit, 2 s: 214 of the
 * 1000 trials of a softmax job, 62 of its last 100, two thirds of its
 * measuring time). A schedule that trades arithmetic for memory traffic
 * (an exp computed twice instead of stored) stays well under it. */
#define TS_PRUNE_WORK_RATIO 16.0
/* Whether c is such a candidate, against the fastest's cand_float_work
 * (never when either is unknown: -1 or 0). */
bool cand_too_heavy(const cand *c, double best_work);
cand *cand_ref(cand *c);
void cand_unref(cand *c); /* frees at zero; NULL is a no-op */

/* A measured ok design and its latency. */
typedef struct measured_design {
  ts_trace *design;
  double seconds;
  int space; /* index of its design space, -1 when none matches */
} measured_design;

/* The search state of one task. */
typedef struct search_task {
  const ts_func *func;
  const ts_target *target;
  ts_design_space *spaces; /* borrowed */
  int n_spaces;
  ts_cost_model *model; /* NULL: random scores */
  int64_t group;        /* the cost model's group (workload id) */
  ts_search_options opts;
  double mutator_probs[TS_N_MUTATORS];
  ts_rng rng;
  int threads;
  hashset seen;              /* measured or picked for measurement */
  measured_design *measured; /* ok ones, fastest first */
  int n_measured, cap_measured;
  /* per design space: its instructions without decisions (JSON; what a
   * design is matched on), the candidates measured from it (failures
   * included) and its fastest ok latency (INFINITY: none yet) */
  char **space_key;
  int *space_trials;
  double *space_best;
  /* the fastest latency when the strategy last picked, and how many picks
   * in a row found it unchanged (the evolutionary local share) */
  double last_best;
  int stalled;
} search_task;

int search_task_init(search_task *st, const ts_func *f, const ts_target *t,
                     ts_design_space *spaces, int n_spaces,
                     ts_cost_model *model, int64_t group,
                     const ts_search_options *o, uint64_t seed);
void search_task_free(search_task *st);
bool search_task_seen(const search_task *st, ts_hash128 h);
void search_task_mark(search_task *st, ts_hash128 h);
/* Records a measured candidate: its hash joins the seen set; an ok one
 * (design copied) joins the ranking. */
void search_task_add_measured(search_task *st, const ts_trace *design,
                              ts_hash128 h, bool ok, double seconds);
/* The index of the design space `design` is a decision set of (the same
 * instructions), or -1. */
int search_task_space_of(const search_task *st, const ts_trace *design);
/* Scores candidates with the task's model (features extracted in
 * parallel; random scores without a model). */
int cands_score(search_task *st, cand **v, int n, ts_error *err);
/* Up to `want` fresh samples of random design spaces (at most max_tries
 * attempts), written to out; returns the count. */
int sample_fresh(search_task *st, int want, int max_tries, cand **out);

/* A search strategy: picks up to `want` candidates for the next batch of
 * the task, none measured or picked before (their hashes are marked
 * seen). Returns how many were written to out (references the caller
 * drops). */
typedef struct strategy_ops {
  const char *name;
  int (*pick)(search_task *st, int want, cand **out, ts_error *err);
} strategy_ops;

extern const strategy_ops strategy_evolutionary;
extern const strategy_ops strategy_random;

#endif /* TESSERA_TUNER_INTERNAL_H */
