/*
 * default.c — a schedule for a task nobody tuned, chosen by rule, with no
 * measurement and no randomness.
 *
 * CPU, in order (every step that the schedule refuses is skipped):
 *  0. An attention task (two products with softmax's row stages between,
 *     the graph compiler's attention group) gets its own schedule, all
 *     stages at the second product's row tile (default_attention.c), when
 *     it applies and lowers; otherwise what follows.
 *  1. Inline: spatial intermediate blocks that do not pad (no
 *     if_then_else) are inlined into their consumers, unless they call a
 *     transcendental function and have several consumers (softmax's exp).
 *  2. The anchor reduction (a block with reduce iters and an input that
 *     misses a spatial iter var: conv, matmul) whose innermost spatial loop
 *     is contiguous in every access (the vector axis) gets a register
 *     tile: the vector axis split by 1, 2 or 4 vector lengths (or, when
 *     no whole vector divides its extent, the divisor up to 4 vectors that
 *     fills its vector instructions best; when no divisor fills even one
 *     vector, a prime width, a ceil split of one or two vectors with a
 *     guard, and the tile accumulated in a local buffer written back once
 *     per tile, as also where whole vectors divide it only one at a time
 *     and a two-vector ceil split wastes 5 % of the lanes or less: 1000 on
 *     8 lanes; rows with no divisor near the register budget are split
 *     ceil-wise by the budget, whatever the vector tile) and
 *     a rows axis (a spatial
 *     loop no input of which the vector axis also indexes: i of a matmul,
 *     the output channel of an NCHW conv; when there is none, one that an
 *     input indexed by the vector axis does not depend on: the output
 *     column of a depthwise conv, whose weights each row tile then reuses)
 *     split by a divisor up to 8, the pair with the most FMAs per load
 *     whose accumulators fit the vector registers besides the operands
 *     (a conv's columns too few for the tile fused with its image rows
 *     into runs of pixels, except a deep conv's with few output channels
 *     on a small image, whose columns go in tiles of up to 9 x 3 vectors:
 *     default_rows.c);
 *     loop order outer spatial, vector tiles, row tiles (a depthwise
 *     conv's channel tiles first over a large image of many of them, else
 *     its column tiles before its channel tiles), reductions (the
 *     innermost split by 4, its inner part unrolled; a guarded ceil split
 *     where 4 does not divide it and it is 16 or longer),
 *     rows (unrolled), vector (vectorized); its init decomposed and
 *     vectorized;
 *     the streamed input (B of a matmul) packed per vector tile when there
 *     are at least four row tiles, or, when a loop above the vector tiles
 *     does not index it (a conv's image rows above its weight panels),
 *     packed once before the anchor in panels [C / tile, .., tile] (read
 *     in place instead when it is at most 256 KiB, not constant, and
 *     fewer than 64 row tiles read each panel in all); the
 *     input the rows and the reduction read (A of a matmul), when its rows
 *     are a multiple of 4 KiB apart and four or more vector tiles read it,
 *     packed once before the anchor into micro-panels [M / rows, K, rows];
 *     the row tiles outside the vector tiles where the streamed input is
 *     at most 128 KiB and the other inputs exceed 512 KiB (the streamed
 *     one then packed once); where a vector tile's panel of the streamed
 *     input exceeds 1 MiB (a deep conv's weights), the longest reduction
 *     split into blocks whose panel fits, the blocks' loop just inside
 *     the vector tiles (or the weights' panels) and the panel packed per
 *     block (packing: default_pack.c); its
 *     elementwise consumer computed at the
 *     row tile (above the reduction's blocks when there are some); its padding
 * producer computed at the innermost outer loop (each tile pads the window it
 * reads; not when the channels are fewer than a vector, a stem's image, which
 * is padded once before); the outer loops fused and parallel. Before that, a
 * GEMM-shaped anchor whose operand types a dot intrinsic of the target computes
 * (int8 with VNNI) is tensorized onto it with a register tile of intrinsic
 * calls (tensorize_default, rules_tensorize.c); when that does not apply or
 *     lower, the plain register tile. Before that again, on a target with
 *     AMX, a bf16 or int8 product of 32 rows and columns or more whose
 *     other loops are a batch gets AMX's 2 x 2 tile blocks (amx_default).
 *  3. Every other block: without an anchor, a row reduction without reuse
 *     (softmax's maximum and sum, layer norm's sums) factored four vectors
 *     at a time (rfactor: independent accumulators), then the other blocks
 * computed at the outermost loop of the output block (one parallel loop over
 * the rows of a softmax or layer norm), and the nests of reductions that
 * read one input independently fused there (fuse_siblings: layer norm's
 * two sums, factored alike, in one loop over the row, each with its four
 * vector accumulators); a reduction whose innermost spatial
 *     loop is contiguous (pooling over NHWC channels) gets its reduce loops
 *     moved above that loop and its init decomposed; a transposing copy
 *     (a transpose, a layout change, a transposed operand's packed panel)
 *     in tiles of a vector by a vector, transposed in registers
 *     (tile_transpose); else the innermost spatial
 *     loop vectorized when contiguous (split when long); the leading
 *     spatial loops fused and parallel when the block does enough work.
 * If the result does not lower, a plainer schedule is tried (step 2
 * without the intrinsic, then only step 3),
 * and at last the unscheduled function. GPU: the first candidate of the
 * design space that postprocesses, from fixed seeds. The target's rule list
 * (rule_lists.c) says which of the two a target gets.
 */
#include "tuner/rule_framework.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t loop_extent(ts_sched *s, ts_rv l) { return rv_extent(s, l); }

/* Whether loop l may be the vector axis of the block in realize r: the
 * block's output and every input that the loop indexes use it (through the
 * bindings) in their last dimension, so vector accesses are contiguous or
 * broadcast, never strided gathers. */
bool default_loop_contiguous(const ts_stmt *r, const ts_stmt *l) {
  const ts_block *b = ts_realize_block(r);
  int n_reg = ts_block_n_reads(b) + ts_block_n_writes(b);
  for (int i = 0; i < n_reg; i++) {
    const ts_region *rg = i < ts_block_n_reads(b)
                              ? ts_block_read(b, i)
                              : ts_block_write(b, i - ts_block_n_reads(b));
    if (rg->ndim < 1) continue;
    bool any = false, last = false;
    for (int k = 0; k < ts_block_n_iters(b); k++) {
      if (!expr_uses_var(ts_realize_value(r, k), ts_for_var(l))) continue;
      ts_expr *iv = ts_block_iter_var(b, k);
      for (int d = 0; d < rg->ndim; d++)
        if (expr_uses_var(rg->ranges[d].min, iv)) {
          any = true;
          if (d == rg->ndim - 1) last = true;
        }
    }
    bool is_write = i >= ts_block_n_reads(b);
    if ((any || is_write) && !last) return false;
  }
  return true;
}

int default_lanes_of(const ts_target *t, ts_dtype d) {
  int bits = d.bits > 0 ? d.bits : 32;
  int l = ts_target_vector_bits(t) / bits;
  return l > 1 ? l : 1;
}

/* The vector part of a contiguous loop of extent n > 4 * lanes: the most
 * whole vectors, up to four, that divide n; when no whole vector divides
 * n, four vectors with a guarded last step (the lowering gives it masked
 * loads and stores). Four vectors per step give the out-of-order core four
 * independent chains: an exp is a chain of about 15 dependent operations,
 * and one or two in flight left softmax's exp half as fast as the
 * arithmetic allows. A divisor that is not a whole number of vectors (22
 * of 880 on 8 lanes: 16 + 4 + 2) ran softmax's rows of 880 at 1.8-2.2 ns
 * an element, against 1.1-1.3 at 896 in vectors of 32. */
static int64_t vector_split(int64_t n, int lanes) {
  for (int64_t m = 4; m >= 1; m--)
    if (n % (m * lanes) == 0) return m * lanes;
  return 4 * (int64_t)lanes;
}

/* Vectorizes the innermost loop of `block` when it is spatial: split so the
 * vector is at most four vectors (vector_split). */
void default_vectorize_inner(ts_sched *s, const ts_target *t,
                             const char *name) {
  ts_rv b, loops[MAX_LOOPS];
  int nl = 0;
  if (ts_sched_get_block(s, name, &b) ||
      ts_sched_get_loops(s, b, loops, MAX_LOOPS, &nl) || nl == 0)
    return;
  const ts_stmt *r = ts_func_find_block(ts_sched_func(s), name);
  const ts_stmt *l = ts_sched_rv_loop(s, loops[nl - 1]);
  if (!r || !l || loop_binding(r, l) != BIND_SPATIAL ||
      ts_for_kind_of(l) != TS_FOR_SERIAL || !default_loop_contiguous(r, l))
    return;
  int64_t ext = loop_extent(s, loops[nl - 1]);
  if (ext < 2) return;
  const ts_block *blk = ts_realize_block(r);
  int lanes =
      ts_block_n_writes(blk)
          ? default_lanes_of(t, ts_buffer_dtype(ts_block_write(blk, 0)->buffer))
          : 4;
  ts_rv v = loops[nl - 1];
  /* at most the 64 lanes a vectorized loop lowers to (ts_lower_options'
   * max_vector_lanes); four vectors of bytes are 256, which ran as a
   * scalar loop: an int8 product's quantizing GELU epilogue, 128 x 256
   * per task, scalar erf through libm, 18x the product's time */
  if (lanes > 16) lanes = 16;
  if (ext > 4 * lanes) {
    int64_t f = vector_split(ext, lanes);
    ts_rv parts[2];
    int64_t factors[2] = {TS_SPLIT_INFER, f};
    if (ts_sched_split(s, v, factors, 2, parts)) return;
    v = parts[1];
  }
  ts_sched_vectorize(s, v);
}

/* Whether e is the var v plus or minus a constant. */
static bool var_offset(const ts_expr *e, const ts_expr *v) {
  if (e == v) return true;
  ts_expr_kind k = ts_expr_kind_of(e);
  int64_t c;
  return (k == TS_EXPR_ADD || k == TS_EXPR_SUB) && ts_expr_operand(e, 0) == v &&
         ts_expr_is_const_int(ts_expr_operand(e, 1), &c);
}

/* The block iter of realize r bound to exactly loop l's var; -1 when none
 * is, or when another iter's binding also uses the var. */
static int iter_of_loop(const ts_stmt *r, const ts_stmt *l) {
  const ts_block *b = ts_realize_block(r);
  int found = -1;
  for (int k = 0; k < ts_block_n_iters(b); k++) {
    const ts_expr *bind = ts_realize_value(r, k);
    if (!expr_uses_var(bind, ts_for_var(l))) continue;
    if (found >= 0 || bind != ts_for_var(l)) return -1;
    found = k;
  }
  return found;
}

/* The group width of a grouped conv's vector axis: the smallest constant G
 * of a floordiv(e, G) in block r's body whose e uses the block iter bound
 * to loop l (the input channel floordiv(co, G) * G + ci of an NHWC
 * grouped conv); 0 where there is none. */
typedef struct {
  const ts_expr *var;
  int64_t g;
} group_scan;

static void group_expr(void *ctx, ts_expr *e) {
  group_scan *gs = ctx;
  int64_t c;
  if (ts_expr_kind_of(e) == TS_EXPR_FLOORDIV &&
      ts_expr_is_const_int(ts_expr_operand(e, 1), &c) && c > 1 &&
      expr_uses_var(ts_expr_operand(e, 0), gs->var) && (!gs->g || c < gs->g))
    gs->g = c;
}

static void group_visit(void *ctx, ts_expr *e) {
  ts_expr_walk(e, group_expr, ctx);
}

static int64_t group_width(const ts_stmt *r, const ts_stmt *l) {
  int k = iter_of_loop(r, l);
  if (k < 0) return 0;
  const ts_block *b = ts_realize_block(r);
  group_scan gs = {ts_block_iter_var(b, k), 0};
  ts_visitor v = {NULL, NULL, group_visit, &gs};
  ts_stmt_walk(ts_block_body(b), &v);
  return gs.g;
}

/* A copy or elementwise block whose innermost loop is shorter than a
 * vector (the 3 channels of a stem's padded image: a vector of 3 lanes
 * per pixel, the pixels 36,100 parallel iterations) gets that loop fused
 * with the one above it, when every buffer the two index has them as its
 * last two dimensions, the inner one whole and the outer one at an offset:
 * the fused loop then runs along contiguous memory and vectorizes in whole
 * vectors. The stem's padding of 184 x 184 x 3 (bench --tir, 2 threads,
 * AVX2 Zen 3): 0.24 -> 0.07 ms. */
static void fuse_short_inner(ts_sched *s, const ts_target *t,
                             const char *name) {
  ts_rv b, loops[MAX_LOOPS];
  int nl = 0;
  if (ts_sched_get_block(s, name, &b) ||
      ts_sched_get_loops(s, b, loops, MAX_LOOPS, &nl) || nl < 2)
    return;
  const ts_stmt *r = ts_func_find_block(ts_sched_func(s), name);
  const ts_stmt *lo = ts_sched_rv_loop(s, loops[nl - 2]),
                *li = ts_sched_rv_loop(s, loops[nl - 1]);
  if (!r || !lo || !li || ts_for_body(lo) != li) return;
  const ts_block *blk = ts_realize_block(r);
  if (ts_block_n_writes(blk) != 1 || block_is_reduction(blk)) return;
  int lanes =
      default_lanes_of(t, ts_buffer_dtype(ts_block_write(blk, 0)->buffer));
  int64_t ext = loop_extent(s, loops[nl - 1]);
  if (ext >= lanes || ts_for_kind_of(lo) != TS_FOR_SERIAL ||
      ts_for_kind_of(li) != TS_FOR_SERIAL)
    return;
  int ki = iter_of_loop(r, li), ko = iter_of_loop(r, lo);
  if (ki < 0 || ko < 0) return;
  const ts_expr *vi = ts_block_iter_var(blk, ki),
                *vo = ts_block_iter_var(blk, ko);
  int n_reg = ts_block_n_reads(blk) + ts_block_n_writes(blk);
  for (int i = 0; i < n_reg; i++) {
    const ts_region *rg = i < ts_block_n_reads(blk)
                              ? ts_block_read(blk, i)
                              : ts_block_write(blk, i - ts_block_n_reads(blk));
    int nd = rg->ndim;
    bool any = false;
    for (int d = 0; d < nd; d++) {
      bool ui = expr_uses_var(rg->ranges[d].min, vi),
           uo = expr_uses_var(rg->ranges[d].min, vo);
      any = any || ui || uo;
      if ((ui && d != nd - 1) || (uo && d != nd - 2)) return;
    }
    if (!any) continue;
    int64_t e1 = 0, e2 = 0;
    if (nd < 2 || rg->ranges[nd - 1].min != vi ||
        !ts_expr_is_const_int(rg->ranges[nd - 1].extent, &e1) || e1 != 1 ||
        !ts_expr_is_const_int(rg->ranges[nd - 2].extent, &e2) || e2 != 1 ||
        ts_buffer_dim(rg->buffer, nd - 1) != ext ||
        !var_offset(rg->ranges[nd - 2].min, vo))
      return;
  }
  ts_rv pair[2] = {loops[nl - 2], loops[nl - 1]}, fused;
  ts_sched_fuse(s, pair, 2, &fused);
}

/* A transposing copy in tiles of a vector by a vector (tile_transpose). */
static bool transpose_tiles(ts_sched *s, const ts_target *t, const char *name) {
  const ts_stmt *r = ts_func_find_block(ts_sched_func(s), name);
  if (!r || ts_block_n_writes(ts_realize_block(r)) != 1) return false;
  int lanes = default_lanes_of(
      t, ts_buffer_dtype(ts_block_write(ts_realize_block(r), 0)->buffer));
  return tile_transpose(s, name, lanes > 16 ? 16 : lanes);
}

/* Step 1: inline spatial intermediates. */
void default_inline_intermediates(ts_sched *s) {
  int n = 0;
  char **names = block_names(ts_sched_func(s), &n);
  if (!names) return;
  for (int i = n - 1; i >= 0; i--) {
    const ts_func *f = ts_sched_func(s);
    const ts_stmt *r = ts_func_find_block(f, names[i]);
    if (!r) continue;
    const ts_block *blk = ts_realize_block(r);
    if (block_is_reduction(blk) || ts_block_init(blk) ||
        block_writes_param(f, blk) || stmt_uses_if_then_else(r))
      continue;
    ts_rv b, cons[MAX_BLOCKS];
    int nc = 0;
    if (ts_sched_get_block(s, names[i], &b) ||
        ts_sched_get_consumers(s, b, cons, MAX_BLOCKS, &nc) || nc == 0)
      continue;
    if (nc > 1 && stmt_uses_expensive_call(r)) continue;
    ts_sched_compute_inline(s, b);
  }
  names_free(names, n);
}

/* The bytes of blk's inputs but `skip` (and its output), each once. */
static int64_t inputs_bytes_but(const ts_block *blk, const ts_buffer *skip) {
  int64_t bytes = 0;
  for (int i = 0; i < ts_block_n_reads(blk); i++) {
    const ts_buffer *x = ts_block_read(blk, i)->buffer;
    bool seen = x == skip || x == ts_block_write(blk, 0)->buffer;
    for (int k = 0; k < i && !seen; k++)
      seen = ts_block_read(blk, k)->buffer == x;
    if (!seen) bytes += default_buffer_bytes(x);
  }
  return bytes;
}

/* Step 2: the register-tiled anchor reduction (tile_anchor below). */

/* Streamed inputs above this size do not stay in the caches between
 * passes over the outer spatial loops: half of a 512 KiB L2. At 1 MiB,
 * weights of 256 KiB to 1 MiB were packed again for every output row
 * (bench --default, 2 threads, AVX2 Zen 3, 1 MiB -> 256 KiB: conv 3x3
 * 56x56x128 stride 2 122 -> 159 GFLOP/s, oneDNN 160; 28x28x128 134 -> 165;
 * 56x56x128 148-151 -> 172-175; 1x1 28x28 512->256 153-157 -> 177-179;
 * matmuls 256-1024 rows and 14x14 convs within noise). */
#define STREAMED_CACHE_BYTES TS_DEFAULT_STREAMED_BYTES
/* the bytes of a cache line */
#define CACHE_LINE_BYTES 64
#define COLUMN_BLOCK_BYTES STREAMED_CACHE_BYTES /* column blocks' panels */
/* A's stream per vector tile, against the tile's compute (1-thread AVX2
 * default, AVX-512 Xeon: 0.81 x oneDNN streamed per tile, 0.96 per block) */
#define A_STREAM_COST 0.25
#define TRANS_PACK_TILES 24 /* vector tiles that pay for packing A^T */
#define RED_UNROLL 4        /* reduction steps per trip of the register tile */
#define IN_PLACE_REUSE 64   /* row tiles per panel that pay for its copy */
/* a vector tile's panel larger than this is packed per reduction block */
#define REDUCTION_BLOCK_BYTES (4 * STREAMED_CACHE_BYTES)

static bool tile_anchor(ts_sched *s, const ts_target *t, const char *name) {
  ts_rv b, loops[MAX_LOOPS];
  int nl = 0;
  if (ts_sched_get_block(s, name, &b) ||
      ts_sched_get_loops(s, b, loops, MAX_LOOPS, &nl) || nl < 2)
    return false;
  const ts_stmt *r = ts_func_find_block(ts_sched_func(s), name);
  const ts_block *blk = ts_realize_block(r);
  if (ts_block_n_writes(blk) != 1) return false;
  int binds[MAX_LOOPS];
  int vec = -1, rows = -1, n_red = 0;
  for (int i = 0; i < nl; i++) {
    const ts_stmt *l = ts_sched_rv_loop(s, loops[i]);
    binds[i] = l ? loop_binding(r, l) : 0;
    if (binds[i] == (BIND_SPATIAL | BIND_REDUCE)) return false;
    if (!l || ts_for_kind_of(l) != TS_FOR_SERIAL) return false;
    if (binds[i] == BIND_SPATIAL && loop_extent(s, loops[i]) > 1) vec = i;
    if (binds[i] == BIND_REDUCE) n_red++;
  }
  if (vec < 0 || n_red == 0) return false;
  /* the reduction's extent per output (KH x KW) and its innermost loop
   * longer than 1 (KW; a grouped conv's input channels of one group, a
   * depthwise conv of a model's graph, come after it) */
  int64_t taps = 1, kw_ext = 1;
  for (int i = 0; i < nl; i++)
    if (binds[i] == BIND_REDUCE) {
      taps *= loop_extent(s, loops[i]);
      if (loop_extent(s, loops[i]) > 1) kw_ext = loop_extent(s, loops[i]);
    }
  /* a narrow width that no vector divides padded to whole vectors */
  char pads[DEFAULT_PAD_COPIES][DEFAULT_NAME_MAX];
  int npads = default_pad_narrow(
      s, t, name, b, loops, nl, vec,
      default_lanes_of(t, ts_buffer_dtype(ts_block_write(blk, 0)->buffer)),
      pads, DEFAULT_PAD_COPIES);
  bool padded_width = npads > 0;
  if (npads > 0) {
    npads--;
    r = ts_func_find_block(ts_sched_func(s), name);
    if (!r) return false;
    blk = ts_realize_block(r);
  } else {
    npads = 0;
  }
  /* a transposed input packed with the vector axis last first */
  char tpacked[160] = "";
  if (!default_loop_contiguous(r, ts_sched_rv_loop(s, loops[vec]))) {
    if (!default_pack_transposed(s, b, r, ts_sched_rv_loop(s, loops[vec]),
                                 loops, nl, tpacked, sizeof tpacked))
      return default_dot_rows(s, t, name);
    r = ts_func_find_block(ts_sched_func(s), name);
    blk = r ? ts_realize_block(r) : NULL;
    if (!r || !default_loop_contiguous(r, ts_sched_rv_loop(s, loops[vec])))
      return false;
  }
  for (int i = vec - 1; i >= 0 && rows < 0; i--)
    if (binds[i] == BIND_SPATIAL && loop_extent(s, loops[i]) > 1 &&
        !shares_input(r, ts_sched_rv_loop(s, loops[i]),
                      ts_sched_rv_loop(s, loops[vec])))
      rows = i;
  /* No such axis (a depthwise conv: every spatial axis indexes the input
   * that the channels do): the innermost spatial axis that one input is
   * not read through (the weights), so a tile of rows reuses each vector
   * of it instead of loading it again per output pixel. */
  bool rows_load = false;
  const ts_buffer *dw_weights = NULL; /* that input */
  for (int i = vec - 1; i >= 0 && rows < 0; i--) {
    bool by_outer;
    if (binds[i] == BIND_SPATIAL && loop_extent(s, loops[i]) > 1 &&
        (dw_weights = default_streamed_input(r, ts_sched_rv_loop(s, loops[vec]),
                                             ts_sched_rv_loop(s, loops[i]),
                                             NULL, 0, &by_outer))) {
      rows = i;
      rows_load = true;
    }
  }
  int lanes =
      default_lanes_of(t, ts_buffer_dtype(ts_block_write(blk, 0)->buffer));
  int64_t ev = loop_extent(s, loops[vec]);
  int regs = ts_target_vector_registers(t);
  /* A dense conv with a kernel of at most 3 x 3, or a strided one whose
   * padded copy is a large share of its work, reads its padding inlined
   * (default_pads_read_inline): the code generator partitions the guards
   * away from the interior and, in a border tile, from the kernel rows
   * and columns inside the image, and drops the taps outside it, which a
   * padded copy computes on zeros (a fifth of a 7 x 7 image's taps, as
   * the vendor libraries skip them). Default schedules, 2 threads, two
   * alternating rounds, x the best library, copied -> inlined: AVX-512
   * 7x7x512 -> 512 0.78 -> 0.96-1.00, 14x14x80 -> 128 0.80 -> 0.90,
   * 9x9x160 -> 256 0.84 -> 1.03; AVX2 target (its tiles fused pixels,
   * below) 7x7x512 -> 512 0.98 -> 1.10, 14x14x256 -> 256 1.00 -> 1.12.
   * A 5 x 5 kernel's border tiles take more copies than the code
   * generator makes, so its copy stays unless strided and costly. A conv
   * inlined for its costly copy tiles a row's columns, not fused pixels,
   * as measured when that rule came (22x22x384 -> 112 stride 2, AVX-512:
   * 0.69/0.72 unfused, 0.59/0.61 in fused tiles of 8 pixels x 1 vector);
   * the others keep the tile the copy had (docs/tuning.md, "Padded taps
   * dropped"). */
  bool copy_costly = false;
  bool pads_inline =
      !rows_load && default_pads_read_inline(s, t, b, &copy_costly);
  /* Rows too few for the register tile fused with the image rows into
   * pixels (default_fuse_short_rows: ResNet's 7x7x512 3x3 conv, AVX2 Zen
   * 3, 2 threads, x oneDNN: 7 columns x 1 vector 0.64-0.66, 6 pixels x 2
   * vectors 0.89-1.07); not a deep conv with few output channels on a
   * small image: each image row's columns in tiles of up to 9 x 3 vectors
   * (default_deep_rows; docs/tuning.md, "Deep narrow convs"). */
  int64_t deep_rows = 0;
  bool deep = rows >= 0 && !rows_load && !tpacked[0] && !copy_costly &&
              default_deep_rows(s, t, r, loops, binds, nl, vec, rows, lanes,
                                &deep_rows);
  bool fused_rows = !deep && rows >= 0 && !rows_load && !tpacked[0] &&
                    ev % lanes == 0 && !copy_costly &&
                    default_fuse_short_rows(s, r, loops, binds, &nl, &rows,
                                            &vec, lanes, regs);
  if (fused_rows) {
    r = ts_func_find_block(ts_sched_func(s), name);
    if (!r) return false;
    blk = ts_realize_block(r);
  }
  char rows_in[128] = "";
  bool rows_trans = false; /* rows_in is A transposed, [.., K, M] */
  {
    int red_one = -1, n_long = 0;
    for (int i = 0; i < nl; i++)
      if (binds[i] == BIND_REDUCE && loop_extent(s, loops[i]) > 1) {
        red_one = i;
        n_long++;
      }
    if (rows >= 0 && !rows_load && !fused_rows && !tpacked[0] && n_long == 1)
      default_rows_input(s, r, loops, nl, rows, vec, red_one, rows_in,
                         sizeof rows_in, &rows_trans);
  }
  /* one or two whole vectors when they divide the extent, else the
   * divisor that fills its vector instructions best (an imperfect split's
   * masked tail tile measured several times slower) */
  int64_t cols = ev % (2 * lanes) == 0 ? 2 * lanes
                 : ev % lanes == 0     ? lanes
                                       : default_lane_tile(ev, lanes);
  int64_t nvec = default_vector_ops(cols, lanes);
  /* the ceil split's tile: one or two whole vectors */
  int64_t whole_cols = ev >= 4 * lanes ? 2 * lanes : lanes;
  bool ragged = false;     /* ceil splits: the tiles accumulate in a local */
  bool whole_tail = false; /* a ceil split's last tile in whole vectors */
  int64_t er = rows >= 0 ? loop_extent(s, loops[rows]) : 1;
  int64_t nrows = 1;
  if (fused_rows) {
    cols = default_ceil_rows_tile(er, ev, lanes, regs, &nrows);
  } else if (ev % lanes == 0) {
    cols = default_register_tile(er, ev, lanes, regs, &nrows, !rows_load);
    if (rows == 0 && !rows_load)
      cols = default_product_tile(er, ev, lanes, regs, &nrows);
    /* Seven vectors (112 channels on AVX-512) leave the rows a budget of
     * 3: each tile of 3 rows streams a row of 7 vectors of the weights
     * for 21 FMAs, and the tile is the whole width, so the weights are
     * one panel that nothing blocks. Where they are larger than a
     * reduction block (REDUCTION_BLOCK_BYTES, streamed from L3), a tile
     * of 4 whole vectors and 6 rows, ceil-split (112 = 64 + 48: the last
     * tile 3 whole vectors, no lane masked), streams 4 vectors per 24
     * FMAs. Default schedules, 2 threads, AVX-512 Xeon, two alternating
     * rounds, x oneDNN, 7 x 3 -> 4 x 6: 3x3 convs 22x22 384->112 stride
     * 2 0.84/0.70 -> 0.91/0.97, 30x30 512->112 stride 2 0.58/0.56 ->
     * 0.75/0.77, 7x7 480->112 0.59/0.52 -> 0.66/0.63, 10x10 512->112
     * 0.55/0.54 -> 0.66/0.67, 14x14 640->112 0.41/0.42 -> 0.49/0.54,
     * 9x9 768->112 0.41/0.36 -> 0.44/0.45; matmul 256x112x4096 0.75/0.70
     * -> 0.97/1.05; 28x28 512->112 and a 1x1 conv 14x14 4096->112
     * within noise. With smaller weights the 7-vector tile
     * stays (4 x 6 lost: 38x38 112->112 0.94/0.92 -> 0.76/0.78, 28x28
     * 192->112 0.97/0.92 -> 0.77/0.81, 1x1 14x14 672->112 0.92 -> 0.67,
     * matmul 1000x112x672 1.01/0.93 -> 0.91/0.92). */
    int64_t vw = cols / lanes;
    if (vw > 4 && default_rows_cap(regs, vw) < 4 && rows >= 0 && !rows_load) {
      bool bo;
      const ts_buffer *wb = default_streamed_input(
          r, ts_sched_rv_loop(s, loops[vec]), ts_sched_rv_loop(s, loops[rows]),
          NULL, 0, &bo);
      if (wb && default_buffer_bytes(wb) > REDUCTION_BLOCK_BYTES) {
        cols = 4 * lanes;
        nrows = default_divisor_upto(er, default_rows_cap(regs, 4));
        whole_tail = ev % cols != 0;
      }
    }
    /* A width that whole vectors divide only one at a time (8 x odd on
     * 8 lanes: 1000, 200): the divisor tile is one vector wide, 8 rows x
     * 1 vector, nine loads for eight FMAs. Where a ceil split two vectors
     * wide wastes little (the last tile half empty, 5 % of the lanes at
     * most) and its tile does more FMAs per load, it goes ragged as a
     * width no vector divides does. Default schedules, 2 threads, AVX2
     * Zen 3, two alternating rounds, x the best library, before -> after:
     * matmul 1000^3 0.77/0.78 -> 0.99/1.02, 200^3 0.91/0.91 -> 1.13/1.09,
     * 128x1000x768 0.89/0.83 -> 1.01/0.98, 50x1000x512 0.77/0.83 ->
     * 0.92/0.96, 64x200x256 0.91/0.92 -> 1.00/0.96; a 1x1 conv to 168
     * channels and a batch_matmul to 200 columns within noise. Narrower
     * widths lose (64x40x256: 155 -> 62 GFLOP/s, 13 of its 33 tiles the
     * guarded ones), hence the 5 %. */
    int64_t v1 = cols / lanes, r2 = default_rows_cap(regs, 2);
    if (r2 > er) r2 = er;
    double by_div = (double)(nrows * v1) / (double)(nrows + v1);
    double by_ceil =
        (double)(r2 * 2) / (double)(r2 + 2) * default_ceil_fill(ev, 2 * lanes);
    if (!rows_load && rows >= 0 && v1 == 1 && ev % (2 * lanes) != 0 &&
        ev >= 4 * lanes && default_ceil_fill(ev, 2 * lanes) >= 0.95 &&
        by_ceil > WHOLE_VECTOR_GAIN * by_div) {
      ragged = true;
      cols = 2 * lanes;
      nvec = 2;
      nrows = default_divisor_upto(er, default_rows_cap(regs, nvec));
    }
  } else if (ev >= 2 * lanes &&
             (cols < lanes ||
              default_ceil_fill(ev, whole_cols) >
                  WHOLE_VECTOR_GAIN * default_divisor_fill(cols, lanes))) {
    ragged = true;
    /* No tile that divides the extent fills even one vector (a prime
     * width: 191, 389), or the best divisor leaves a part-empty vector in
     * every tile (20 of 180 on 8 lanes: 16 + 4, 83 % of the lanes
     * computed; 40 of 1000 on 16: 32 + 8): a ceil split with a guard,
     * one or two whole vectors wide (180 = 11 x 16 + 4: 94 %); the code
     * generator partitions the loop, so every tile but the last runs
     * unguarded. */
    cols = whole_cols;
    nvec = cols / lanes;
    nrows = default_divisor_upto(er, default_rows_cap(regs, nvec));
  } else {
    nrows = default_divisor_upto(er, default_rows_cap(regs, nvec));
  }
  /* A grouped conv's vector tile within one group: a tile across two
   * groups reads its input channels through a gather (floordiv(co, G) per
   * lane). The widest divisor of G up to the tile, in whole vectors where
   * the lanes divide G. `bench --workload W --default --threads 2`,
   * AVX-512 Xeon, GFLOP/s before -> after (oneDNN): 3x3 convs of 32
   * groups, 56x56x128 21.7 -> 65.3 (82.8), 28x28x256 23.6 -> 124 (162),
   * 14x14x512 39.8 -> 199 (288); 28x28x192 in 8 groups 21.1 -> 174 (201);
   * a wav2vec2-like positional conv (768 channels in 16 groups of 48, 128
   * taps over 49 frames, `bench --tir`) 66 -> 7.3-7.8 ms. */
  int64_t gw = group_width(r, ts_sched_rv_loop(s, loops[vec]));
  if (gw > 0 && gw < ev && (cols > gw || gw % cols != 0)) {
    int64_t best = 0;
    for (int64_t c = 1; c <= gw && c <= (cols > lanes ? cols : lanes); c++)
      if (gw % c == 0 && (c % lanes == 0 || gw % lanes != 0)) best = c;
    if (best > 0) {
      cols = best;
      nvec = default_vector_ops(cols, lanes);
      ragged = false;
      nrows = default_divisor_upto(er, default_rows_cap(regs, nvec));
    }
  }
  /* Rows whose extent has no divisor near the budget (a prime such as
   * 613, or the 7 and 11 output columns of a late or strided conv): a
   * ceil split into tiles as even as the budget allows (11 on 6: 6 + 5),
   * whatever the vector tile; the guard is a scalar condition on the row
   * tile, which the code generator partitions away from every tile but
   * the last. Also where the best divisor leaves accumulators unused
   * (28 or 56 rows: 4 of a budget of 6, 8 accumulators instead of 12;
   * bench --default, 2 threads, AVX2 Zen 3, old -> new × the best
   * library: 3x3 conv 56x56x64 0.75-0.86 -> 0.85-0.87, 28x28x128
   * 0.95-1.00 -> 0.98-1.19; 1x1 56x56x64->256 0.71-0.76 -> 0.79-0.82;
   * matmul 1024^3 and the strided 3x3 56x56x64->128 within noise). Not
   * for a depthwise conv's rows. */
  nrows = default_ceil_rows(
      er, nrows, default_rows_cap(regs, default_vector_ops(cols, lanes)),
      rows >= 0, rows_load);
  if (deep) {
    cols = 3 * lanes;
    nrows = deep_rows;
    ragged = whole_tail = false;
  }
  /* a depthwise conv's tile (default_depthwise.c); pair_h: its image
   * rows, two to a tile */
  int pair_h = -1;
  if (rows_load && !ragged) {
    int64_t elem = (int64_t)ts_dtype_elem_bytes(
        ts_buffer_dtype(ts_block_write(blk, 0)->buffer));
    default_depthwise_tile(ev, er, lanes, regs, taps, kw_ext, rows >= 0, &cols,
                           &nrows);
    default_depthwise_narrow(t, ev, er, lanes, regs, taps, taps / kw_ext,
                             kw_ext, elem, inputs_bytes_but(blk, dw_weights),
                             rows >= 0, &cols, &nrows);
    for (int i = rows - 1; i >= 0 && pair_h < 0; i--)
      if (binds[i] == BIND_SPATIAL && loop_extent(s, loops[i]) > 1) pair_h = i;
    int64_t pr =
        pair_h < 0
            ? 0
            : default_depthwise_pairs(t, regs, ev, cols, lanes, taps, kw_ext,
                                      elem, loop_extent(s, loops[pair_h]), er);
    nrows = pr > 0 ? pr : nrows;
    pair_h = pr > 0 ? pair_h : -1;
  }
  /* A streamed input larger than the caches that the outer spatial loops
   * do not index (a deep conv's weights at a small spatial extent): the
   * vector tiles go outermost, so that each panel of it is packed once and
   * reused by every output row, instead of streamed once per outer
   * iteration. Needs a vector tile per core at least: with fewer panels
   * than twice the cores, the rows join the panels in the parallel loop
   * (`spread` below), each core then reading one or two panels. Before,
   * that took four panels on two cores, and three panels of 48 channels
   * went round the rows with all 2.6 MiB of a conv's weights cycling
   * through each core's L2 for every output row. Default schedules, 2
   * threads, AVX-512 Xeon, two alternating rounds, x oneDNN: 3x3 conv
   * 14x14 512->144 0.46/0.48 -> 0.74/0.74 (const=weight 0.44/0.44 ->
   * 0.86/0.88), 7x7 512->144 const 0.50/0.49 -> 0.85/0.86, 14x14 512->96
   * const 0.68/0.66 -> 0.78/0.76, 28x28 256->96 0.81/0.80 -> 0.88/0.90
   * (const 0.86/0.85 -> 0.92/0.90); a 1x1 conv 14x14 1024->96, matmul
   * 1000x96x4096, dense 64x144x4096 and, for an AVX2 target, 14x14
   * 512->48 and 512->72 within noise. The zoo's compiled models are
   * unchanged (their weights come blocked by the layout pass). */
  bool vec_first = false, rows_first = false;
  int64_t panel_bytes = 0; /* a vector tile's panel of the streamed input */
  int64_t plain_panel = 0; /* the same, outer loops not indexing it */
  int64_t others = 0;      /* the bytes of the inputs but the streamed one */
  bool panel_loop[MAX_LOOPS] = {false}; /* outer loops moved first */
  int64_t outer_iters = 1;
  int64_t streamed = 0; /* the streamed input's bytes, outer loops not
                           indexing it */
  if (rows >= 0) {
    const ts_stmt *outer[MAX_LOOPS];
    int n_o = 0, at[MAX_LOOPS];
    for (int i = 0; i < nl; i++)
      if (binds[i] != BIND_REDUCE && i != vec && i != rows) {
        at[n_o] = i;
        outer[n_o++] = ts_sched_rv_loop(s, loops[i]);
        outer_iters *= loop_extent(s, loops[i]);
      }
    bool by_outer = false;
    const ts_stmt *lv = ts_sched_rv_loop(s, loops[vec]),
                  *lr = ts_sched_rv_loop(s, loops[rows]);
    const ts_buffer *sb =
        default_streamed_input(r, lv, lr, outer, n_o, &by_outer);
    if (sb && !by_outer) streamed = default_buffer_bytes(sb);
    bool big = sb && default_buffer_bytes(sb) > STREAMED_CACHE_BYTES;
    int64_t cores = ts_target_num_cores(t);
    vec_first =
        big && cols < ev && !by_outer && outer_iters > 1 && ev / cols >= cores;
    if (vec_first) panel_bytes = default_buffer_bytes(sb) / (ev / cols);
    /* the panel in the plain order (a batch's loops first, when they
     * all index it): the reduction's extent x the tile's columns */
    bool batch_only = by_outer;
    for (int o = 0; o < n_o && batch_only; o++) {
      bool uo = false;
      default_streamed_input(r, lv, lr, &outer[o], 1, &uo);
      batch_only = uo || loop_extent(s, loops[at[o]]) == 1;
    }
    int64_t red_ext = 1;
    for (int i = 0; i < nl; i++)
      if (binds[i] == BIND_REDUCE) red_ext *= loop_extent(s, loops[i]);
    if (sb && cols < ev && (!by_outer || batch_only) &&
        (batch_only ? outer_iters : 1) * (ev / cols) >= 2 * cores)
      plain_panel =
          red_ext * cols * (int64_t)ts_dtype_elem_bytes(ts_buffer_dtype(sb));
    others = sb ? inputs_bytes_but(blk, sb) : 0;
    /* A small streamed input (weights that the L2 holds with room to
     * spare) beside a large other input (an image, A of a tall product):
     * the row tiles go outside the vector tiles, so each row tile's input
     * is read once and all of the weights (packed once, in panels) are
     * reused from L2, instead of the large input streamed again from L3
     * for every panel. Not for a transposed input packed per panel (it
     * would be packed again for every row tile: dense 3000x128x100 fell
     * 190 -> 110 GFLOP/s). Default schedules, old/new alternating, x the
     * best library: 1x1 conv 56x56 64->256 0.97/0.95 -> 0.99/0.99 (1
     * thread 0.98/0.97/0.97 -> 1.00/1.00/1.00), 256->64 0.97/0.98 ->
     * 0.98/0.99, 112x112 32->64 0.92/0.95 -> 0.97/0.99; strided 3x3
     * 112x112 32->64 157/158 -> 176/172 GFLOP/s; matmul 3000x128x100
     * 0.99/1.04 -> 1.04/1.05 (transpose_a 1.02/1.00 -> 1.07/1.08). A 1x1
     * conv 28x28 512->128 (weights of 256 KiB) lost 11 % this way, hence
     * half of STREAMED_CACHE_BYTES. */
    rows_first = sb && !vec_first && !by_outer && !rows_load && !tpacked[0] &&
                 cols < ev &&
                 default_buffer_bytes(sb) <= STREAMED_CACHE_BYTES / 2 &&
                 others > 2 * STREAMED_CACHE_BYTES;
    /* The same input already in panels (a conv's weights blocked by output
     * channels at compile time, [CO/B, KH, KW, CI, B]): the outer loops
     * that index it (the panels) go first, so each panel is read once and
     * reused by every output row, instead of all panels streamed once per
     * outer row. Where the panels are fewer than twice the cores, only for
     * a deep conv's (default_deep_rows): each core then reads one or two
     * panels rather than all of them. */
    if (big && by_outer) {
      int64_t panels = 1, rest = 1;
      for (int o = 0; o < n_o; o++) {
        bool uo = false;
        default_streamed_input(r, lv, lr, &outer[o], 1, &uo);
        panel_loop[at[o]] = uo;
        if (uo)
          panels *= loop_extent(s, loops[at[o]]);
        else
          rest *= loop_extent(s, loops[at[o]]);
      }
      if (rest == 1 || (panels < 2 * cores && !deep))
        for (int i = 0; i < nl; i++) panel_loop[i] = false;
      else
        panel_bytes = default_buffer_bytes(sb) / panels;
    }
  }
  /* split the vector and rows axes */
  ts_rv vo = TS_RV_NONE, vi = loops[vec], ro = TS_RV_NONE, ri = TS_RV_NONE;
  /* (a tile whose last vector tile is short, whole_tail: the rows split
   * first, so that the code generator partitions the row tiles' tail
   * first and then each row copy's vector tail; the other way round, its
   * copies ran out inside the vector tail and 6 of its 16 register tiles
   * stayed in memory: 22x22 384->112 0.72-0.74 x oneDNN against 0.84-0.93) */
  for (int pass = 0; pass < 2; pass++) {
    if (pass == (whole_tail ? 1 : 0) && cols < ev) {
      ts_rv parts[2];
      int64_t f[2] = {TS_SPLIT_INFER, cols};
      if (ts_sched_split(s, loops[vec], f, 2, parts)) return false;
      vo = parts[0];
      vi = parts[1];
    }
    if (pass == (whole_tail ? 0 : 1) && rows >= 0) {
      int64_t er = loop_extent(s, loops[rows]);
      if (nrows < er && nrows > 1) {
        ts_rv parts[2];
        int64_t f[2] = {TS_SPLIT_INFER, nrows};
        if (ts_sched_split(s, loops[rows], f, 2, parts)) return false;
        ro = parts[0];
        ri = parts[1];
      } else if (nrows == er) {
        ri = loops[rows];
      } else {
        ro = loops[rows];
      }
    }
  }
  ts_rv hp = TS_RV_NONE; /* a depthwise conv's pair of image rows */
  if (pair_h >= 0) {
    ts_rv parts[2];
    int64_t f[2] = {TS_SPLIT_INFER, 2};
    if (ts_sched_split(s, loops[pair_h], f, 2, parts)) return false;
    loops[pair_h] = parts[0];
    hp = parts[1];
  }
  /* order: outer spatial, vo, ro, reductions, ri, vi */
  ts_rv order[MAX_LOOPS + 4];
  int no = 0, n_outer = 0;
  ts_rv vc = TS_RV_NONE; /* a depthwise conv's channel chunks */
  /* a depthwise conv's order (default_depthwise.c; in row pairs, the
   * plain one: image rows, channel tiles, column tiles) */
  if (rows_load && vo != TS_RV_NONE && hp == TS_RV_NONE) {
    if (!default_depthwise_order(s, t, ev, cols, er, taps / kw_ext, kw_ext,
                                 (int64_t)ts_dtype_elem_bytes(ts_buffer_dtype(
                                     ts_block_write(blk, 0)->buffer)),
                                 others, &vec_first, &rows_first, &vo, &vc))
      return false;
    if (vc != TS_RV_NONE) order[no++] = vc;
  }
  /* A panel per vector tile larger than the L2 (the weights of a deep
   * conv: 3 x 3 x 2048 x 64 floats, 4.5 MiB) is streamed from L3 again
   * for every output tile. The reduction is then split into blocks whose
   * panel fits (default_reduction_block), the blocks' loop placed just
   * inside the vector tiles, the panel packed per block and reused by
   * every output tile of it; the output accumulates across the blocks.
   * `bench --workload W --default --threads 2 --repeat 5`, 2 threads,
   * AVX-512 Xeon (2 MiB L2), two alternating rounds, x oneDNN, without ->
   * blocks of at most 256 KiB / 1 MiB: 24x24 2048->256 3x3 0.53 -> 1.01 /
   * 1.10, its dilation-6 form 0.37/0.38 -> 0.71/0.69 / 0.82/0.80; 24x24
   * 512->512 dilation 2 (1.1 MiB panels) 0.90/0.89 -> 0.84/0.83 /
   * 0.91/0.89; 14x14 256x256, 7x7 512x512 and 28x28 128x128 3x3 and a
   * 14x14 1024->256 1x1 within noise. Hence 1 MiB. A product's K the
   * same (B's panel of K x 64 floats): x oneDNN, old -> new, 256x256x16384
   * 0.48 -> 1.15, 512x512x8192 0.81 -> 1.12, 128x1024x8192 0.67 -> 1.10;
   * 1024^3, 2048^3 and 128x768x3072 (panels of 512 KiB or less)
   * unchanged; batch_matmul 4x128x128x8192 0.70 -> 0.96; a dense
   * layer's W [N, K], transposed per block: 8x4096x25088 0.45 -> 1.06,
   * 32x1024x16384 0.45 -> 1.02. */
  int red_blk = -1;
  int64_t red_chunk = 0;
  /* (in the plain order, vector tiles then row tiles, the blocks go
   * between the two: a product's K blocks) */
  bool red_after_vo = panel_bytes == 0 && plain_panel > 0 && !rows_first &&
                      vo != TS_RV_NONE && ro != TS_RV_NONE;
  if (red_after_vo) panel_bytes = plain_panel;
  if (panel_bytes > 0 && !rows_load && !ragged &&
      (!tpacked[0] || red_after_vo)) {
    int64_t ext[MAX_LOOPS];
    for (int i = 0; i < nl; i++) ext[i] = loop_extent(s, loops[i]);
    red_blk =
        default_reduction_block(ext, binds, nl, panel_bytes,
                                REDUCTION_BLOCK_BYTES, RED_UNROLL, &red_chunk);
  }
  /* Too few vector tiles for panels (112 channels: 64 + 48) of weights
   * larger than the L2: the reduction blocks go outside the parallel
   * loop instead (default_outer_reduction_block). Not where one tile is
   * the whole width (64 channels): each tile then streams the weights
   * in order, which the prefetchers keep up with (5x5 24x24 1024->64
   * stride 2 lost 1.07/1.09 -> 0.95/0.98 x oneDNN to blocks of 64 to
   * 512 channels). */
  bool red_outer = false;
  if (red_blk < 0 && panel_bytes == 0 && plain_panel == 0 && !vec_first &&
      !rows_first && !rows_load && !ragged && !tpacked[0] && rows >= 0 &&
      cols < ev) {
    int64_t ext[MAX_LOOPS];
    for (int i = 0; i < nl; i++) ext[i] = loop_extent(s, loops[i]);
    red_blk = default_outer_reduction_block(
        ext, binds, nl, streamed,
        default_buffer_bytes(ts_block_write(blk, 0)->buffer),
        REDUCTION_BLOCK_BYTES, RED_UNROLL, &red_chunk);
    red_outer = red_blk >= 0;
  }
  /* Column blocks: in the plain order, each vector tile's row tiles read
   * all of the other input (A of a product) again. Where that input is
   * larger than the L2 holds, it streams from L3 once per vector tile
   * (67 times for 1065 columns on AVX2). The vector tiles then go in
   * blocks whose panels fill COLUMN_BLOCK_BYTES: the blocks outermost
   * (packed once each, in parallel), the row tiles inside them and the
   * block's vector tiles inside those, so a row tile's slice of A stays
   * in L1 across the block and is streamed once per block. The block's
   * width by a small model: a core's time is its rounds of blocks times
   * (the tiles of a block + A_STREAM_COST), the A stream costing a
   * quarter of a tile's compute once per block; so 67 tiles on 2 cores go
   * in 10 blocks of 7 (5 rounds, 36.25) rather than 9 of 8 (5 rounds of
   * which one core idles one, 41.25), 34 tiles in 12 of 3 (19.5) rather
   * than 9 of 4 (21.25) or 34 of 1 (the plain order, 21.25). */
  ts_rv vb = TS_RV_NONE;
  if (red_after_vo && red_blk < 0 && !rows_load && !tpacked[0] &&
      outer_iters == 1 && others > 2 * STREAMED_CACHE_BYTES) {
    int64_t tiles = loop_extent(s, vo), nc = ts_target_num_cores(t);
    int64_t cap = COLUMN_BLOCK_BYTES / plain_panel, per = 1;
    double best = (double)((tiles + nc - 1) / nc) * (1 + A_STREAM_COST);
    for (int64_t p = cap < tiles / 2 ? cap : tiles / 2; p >= 2; p--) {
      int64_t nb = (tiles + p - 1) / p, rounds = (nb + nc - 1) / nc;
      double cost = (double)rounds * ((double)p + A_STREAM_COST);
      if (cost < best - 1e-9) {
        best = cost;
        per = p;
      }
    }
    if (per >= 2) {
      ts_rv parts[2];
      int64_t f[2] = {TS_SPLIT_INFER, per};
      if (ts_sched_split(s, vo, f, 2, parts)) return false;
      vb = parts[0];
      vo = parts[1];
    }
  }
  ts_rv red_b = TS_RV_NONE;
  int red_at = -1;  /* red_b's place in order */
  int par_from = 0; /* the first loop of order made parallel */
  if (vec_first) order[no++] = vo;
  for (int i = 0; i < nl; i++)
    if (panel_loop[i]) order[no++] = loops[i];
  if (red_blk >= 0) {
    ts_rv parts[2];
    int64_t f[2] = {TS_SPLIT_INFER, red_chunk};
    if (ts_sched_split(s, loops[red_blk], f, 2, parts)) return false;
    red_b = parts[0];
    loops[red_blk] = parts[1];
    if (red_outer) { /* first of all (vec_first and panel loops are not) */
      memmove(order + 1, order, sizeof *order * (size_t)no);
      order[0] = red_b;
      no++;
      red_at = 0;
      par_from = 1;
    } else if (!red_after_vo) {
      red_at = no;
      order[no++] = red_b;
    }
  }
  for (int i = 0; i < nl; i++)
    if (binds[i] != BIND_REDUCE && i != vec && i != rows && !panel_loop[i])
      order[no++] = loops[i];
  if (rows_first && ro != TS_RV_NONE) order[no++] = ro;
  if (vo != TS_RV_NONE && !vec_first) order[no++] = vb != TS_RV_NONE ? vb : vo;
  if (red_b != TS_RV_NONE && red_after_vo) {
    red_at = no;
    order[no++] = red_b;
  }
  if (ro != TS_RV_NONE && !rows_first) order[no++] = ro;
  if (vb != TS_RV_NONE) order[no++] = vo;
  n_outer = no;
  int red_last = -1;
  for (int i = 0; i < nl; i++)
    if (binds[i] == BIND_REDUCE) red_last = i;
  /* The innermost reduction split by RED_UNROLL, its inner part unrolled
   * over the register tile: RED_UNROLL steps of the tile's FMAs per trip
   * of the loop (what a BLAS micro-kernel does with K). A tile that
   * accumulates in the kernel's output stays in registers through the
   * larger body because the lowering promotes output parameters too
   * (codegen/promote.c; before it did, LLVM gave up on the 14x14 3x3
   * conv's tile: 0.37 x oneDNN). Measured with `tessera bench --workload
   * W --default --threads 2 --repeat 5`, AVX2 Zen 3, two alternating
   * rounds, x oneDNN, without -> with: 1x1 convs 14x14 1024->256
   * 0.98/0.95 -> 1.01/1.00 (1 thread 0.97/0.90 -> 0.96/0.97), 56x56
   * 96->384 0.84/0.98 -> 1.01/0.95; 3x3 7x7x512 0.96/0.99 -> 1.19/1.00,
   * 56x56x64 0.95/1.01 -> 1.02/1.04; matmuls, dense, batch_matmul and the
   * 14x14 3x3 within noise; untuned ResNet-50 1.12/1.17/1.13 -> 1.19/1.14/
   * 1.14 x onnxruntime, ResNet-18 1.43/1.42/1.38 -> 1.43/1.44/1.49.
   * Where 4 does not divide it (a prime K), a ceil split with a guard
   * (16 steps or more, so the tail is a small part): the code generator
   * runs every trip but the last unguarded, and the init still goes before
   * the reduction (decompose_reduction leaves a guard over the reduction
   * loops alone to the update). Three alternating rounds, x oneDNN:
   * 613x191x389 0.79/0.78/0.79 -> 0.91/0.90/0.89, 625x457x307 0.92/0.95
   * -> 1.02/1.01, 612x192x389 unchanged (1.02/1.03 -> 1.01/1.01). */
  ts_rv red_in = TS_RV_NONE;
  int64_t eu = loop_extent(s, loops[red_last]);
  bool split_red =
      !rows_load && ri != TS_RV_NONE &&
      (eu % RED_UNROLL == 0 ? eu >= 2 * RED_UNROLL : eu >= 4 * RED_UNROLL);
  ts_rv first_red = TS_RV_NONE;
  for (int i = 0; i < nl; i++)
    if (binds[i] == BIND_REDUCE) {
      ts_rv l = loops[i];
      if (i == red_last && split_red) {
        ts_rv parts[2];
        int64_t f[2] = {TS_SPLIT_INFER, RED_UNROLL};
        if (ts_sched_split(s, loops[i], f, 2, parts)) return false;
        l = parts[0];
        red_in = parts[1];
      }
      if (first_red == TS_RV_NONE) first_red = red_b != TS_RV_NONE ? red_b : l;
      order[no++] = l;
    }
  if (red_in != TS_RV_NONE) order[no++] = red_in;
  if (hp != TS_RV_NONE) order[no++] = hp;
  if (ri != TS_RV_NONE) order[no++] = ri;
  order[no++] = vi;
  if (ts_sched_reorder(s, order, no)) return false;
  /* Ceil splits: the register tile accumulates in a local buffer the size
   * of the tile, written back (guarded) once per tile; accumulating in
   * the output itself would mask every load and store of the last tile
   * at every step of the reduction. So does a tile of row pairs
   * (default_depthwise_pairs). */
  if (ragged || hp != TS_RV_NONE) {
    ts_rv cw;
    char wn[128];
    snprintf(wn, sizeof wn, "%s",
             ts_buffer_name(ts_block_write(blk, 0)->buffer));
    if (ts_sched_cache_write(s, b, wn, "local", &cw) ||
        ts_sched_reverse_compute_at(s, cw, order[n_outer - 1]))
      return false;
  }
  /* The streamed input (indexed by the vector axis, not by the rows: B of
   * a matmul) packed per vector tile into a contiguous panel that every
   * row tile then reads, when there are enough row tiles to pay for the
   * copy. The parallel loops then stop at the vector tile. (Not the
   * weights of a depthwise conv: a few taps per channel, read in place.) */
  int n_par = n_outer;
  char packed[160] = "";
  bool packed_once = false;
  int64_t reuse = er / nrows * (vec_first ? outer_iters : 1);
  if (tpacked[0]) {
    /* the transposed copy is the packed panel: per vector tile when it is
     * an outer loop, else the whole input once */
    snprintf(packed, sizeof packed, "%s", tpacked);
    ts_rv cr;
    int vo_at = -1;
    for (int i = 0; i < n_outer; i++)
      if (order[i] == vo) vo_at = i;
    /* of a constant (const=W): packed once, in panels, ahead of the
     * calls (a panel of W transposed read from the whole copy strided
     * by N ran a 16 x 768 x 3072 dense layer 0.51 -> 0.59 ms) */
    const ts_stmt *tc = ts_func_find_block(ts_sched_func(s), tpacked);
    int once = 0;
    if (vo_at >= 0 && tc && ts_block_n_reads(ts_realize_block(tc)) == 1 &&
        default_const_param(s,
                            ts_block_read(ts_realize_block(tc), 0)->buffer) &&
        (once = default_pack_copy_once(s, tpacked, cols)) < 0)
      return false;
    if (once)
      n_par = vo_at + 1;
    else if (vo_at >= 0 && !ts_sched_get_block(s, tpacked, &cr) &&
             !ts_sched_compute_at(s, cr, red_b != TS_RV_NONE ? red_b : vo))
      n_par = vo_at + 1;
  } else if (vo != TS_RV_NONE && rows >= 0 && reuse >= 4 && !rows_load &&
             !red_outer) {
    const ts_stmt *rr = ts_func_find_block(ts_sched_func(s), name);
    const ts_stmt *lv = ts_sched_rv_loop(s, vo), *lr = NULL;
    if (ro != TS_RV_NONE) lr = ts_sched_rv_loop(s, ro);
    if (!lr && ri != TS_RV_NONE) lr = ts_sched_rv_loop(s, ri);
    bool by_outer;
    const ts_buffer *sb =
        default_streamed_input(rr, lv, lr, NULL, 0, &by_outer);
    int vo_at = -1;
    for (int i = 0; i < n_outer; i++)
      if (order[i] == (vb != TS_RV_NONE ? vb : vo)) vo_at = i;
    /* Few panels that the cores do not divide (5 on 2 cores: one of them
     * idle a third of the time), of an input the caches hold anyway: not
     * packed, so that the row tiles join the parallel loop. Default
     * schedules, AVX2 Zen 3, 2 threads, two alternating rounds, GFLOP/s
     * packed -> not: matmul 100^3 92/91 -> 109/109, 64x40x256 129/126 ->
     * 157/158, 200x80x128 155/152 -> 161/184; 3x3 conv 28x28 64->80
     * 146/159 -> 170/191; the stem 184x184 3->24 166/184 -> 176/182. */
    /* Of an input the caches do not hold (a strided 3x3 conv's 1.8 MiB
     * of weights in 5 panels of 64 channels on AVX-512): packed once, in
     * panels, before the anchor, and the row tiles join the panels in the
     * parallel loop, so both cores work to the end. Default schedules,
     * AVX-512 Xeon, 2 threads, two alternating rounds, x oneDNN: 3x3 conv
     * 44x44 160->320 stride 2 0.72/0.69 -> 0.86/0.84, 17x17 160->320
     * 0.71/0.70 -> 0.87/0.83, 28x28 256->448 (7 panels) 0.81/0.84 ->
     * 0.91/0.88; matmul 1000x320x1000 and 256x448x1536 within noise. */
    /* A weight declared constant (const=weight): packed once in panels
     * too, the copy then running ahead of the calls (ts_build_measured;
     * a compiled model's layout pass blocks its weights the same way)
     * instead of a panel copied in place inside the panel loop. Default
     * schedules, 2 threads, two alternating rounds, x oneDNN, in place ->
     * packed: AVX-512 Xeon 3x3 conv 7x7 512->512 0.66/0.66 -> 0.83/0.85,
     * 14x14 256->256 0.77/0.71 -> 0.86/0.83, 17x17 160->256 and 56x56
     * 40->160 within noise; AVX2 target (libraries held to AVX2), the
     * same convs without const= -> with it: 7x7 0.85/0.74 -> 1.04/1.08,
     * 14x14 0.95/0.94 -> 1.02/1.08. */
    bool spread = false;
    if (sb && vo_at >= 0) {
      int64_t panels = 1, nc = ts_target_num_cores(t);
      for (int i = 0; i <= vo_at; i++) panels *= loop_extent(s, order[i]);
      if (nc > 1 && panels % nc != 0 && panels < 4 * nc) {
        if (default_buffer_bytes(sb) <= STREAMED_CACHE_BYTES)
          sb = NULL;
        else
          spread = true;
      }
    }
    ts_rv cr;
    bool repacked = sb && vo_at >= 0 &&
                    default_repacked_by_outer(s, rr, lv, lr, order, vo_at);
    /* An input the caches hold, not constant, whose panels fewer than
     * IN_PLACE_REUSE row tiles read in all: read in place. Packed once,
     * the copy ran in a parallel loop of its own ahead of a kernel of
     * tens of microseconds. Not where outer loops (image rows) repeat the
     * row tiles: reading in place, the stems 7x7 3->64 stride 2 (56 tiles
     * per image row) lost up to 25 % on the AVX2 target and the 1x1 56x56
     * 32->768 (7 per row) 0.94 -> 0.75; raising the bound to 400 tile
     * reads moved the 1x1 and strided 3x3 convs it reached both ways.
     * Default schedules, AVX2 target, 2 threads, two alternating rounds,
     * x oneDNN, packed -> in place: 1x1 19x19 384->64 0.74/0.78 ->
     * 1.02/1.02, 512->64 0.93/0.92 -> 1.00/0.95; matmul 300x64x500 (50
     * row tiles) 0.90/0.97/0.99/0.73 -> 1.26/1.04/1.08/1.03. Not a padded
     * copy (its padding made in place: 300x30x500 1.00/1.25 -> 0.39/0.43). */
    if (repacked && !spread && default_is_param(s, sb) &&
        !default_const_param(s, sb) &&
        reuse * (vec_first ? 1 : outer_iters) < IN_PLACE_REUSE &&
        red_b == TS_RV_NONE && default_buffer_bytes(sb) <= STREAMED_CACHE_BYTES)
      sb = NULL;
    if (sb && vo_at >= 0 &&
        (spread || default_const_param(s, sb) || repacked)) {
      /* each panel would be packed again at every iteration of the loops
       * above it: the whole input packed once, in panels, before */
      if (!default_pack_once(s, b, sb, cols, packed, sizeof packed))
        return false;
      packed_once = packed[0] != 0;
      /* (rows first: the panels stay a serial loop inside the parallel
       * row tiles; fused in, each tile recomputed its indices by a
       * division: 2-3 % of the 1x1 conv's time) */
      if (packed_once && !spread) n_par = rows_first ? vo_at : vo_at + 1;
    }
    /* A panel width that does not divide the input (61 columns in tiles
     * of 16), which is not packed once, under the row tiles (rows first):
     * copied per tile, each copy of K x 16 served one tile of 8 rows, and
     * 300 x 61 x 500 spent a quarter of its time copying B. Read in place
     * there (the caches hold it). Default schedules, 2 threads, AVX-512
     * Xeon, three alternating rounds, x the best library: 300 x 61 x 500
     * 0.43/0.41/0.41 -> 0.65/0.72/0.69, AVX2 300 x 30 x 500 0.44/0.41/0.47
     * -> 0.61/0.60/0.82. (A 1x1 conv to 61 channels, whose copy serves a
     * whole image row, lost 0.73 -> 0.60 reading in place: not rows
     * first, it keeps its copy.) */
    if (sb && vo_at >= 0 && !packed_once && repacked && rows_first && !spread &&
        default_buffer_bytes(sb) <= STREAMED_CACHE_BYTES)
      sb = NULL;
    /* A conv's weights (image rows above the tiles) that fewer than
     * IN_PLACE_REUSE row tiles read per panel: the copy per panel costs
     * more than the contiguous reads save. Not a reduction block's panel
     * (blocks are sized for the copy), nor where a row of them is a
     * multiple of 4 KiB (each step of the reduction then maps to the same
     * L1 sets: 1x1 14x14 128->1024 0.98/1.01 -> 0.91/0.90). Default
     * schedules, 2 threads, AVX-512 EPYC, copied -> in place alternating,
     * x oneDNN: 3x3 7x7 512->512 0.74/0.83 -> 0.95/0.96, 10x10 384->384
     * 0.91/0.88 -> 0.97/0.95; 1x1 7x7 320->320 0.93/0.93 -> 1.06/1.03,
     * 14x14 1024->256 0.87/0.87 -> 1.01/0.99. */
    int nd = sb ? ts_buffer_ndim(sb) : 0;
    if (sb && vo_at >= 0 && !packed_once && outer_iters > 1 && streamed > 0 &&
        red_b == TS_RV_NONE && reuse < IN_PLACE_REUSE && nd > 0 &&
        ts_buffer_shape(sb)[nd - 1] *
                (int64_t)ts_dtype_elem_bytes(ts_buffer_dtype(sb)) % 4096 !=
            0)
      sb = NULL;
    if (sb && vo_at >= 0 && !packed_once) {
      char bn[128];
      snprintf(bn, sizeof bn, "%s", ts_buffer_name(sb));
      if (!ts_sched_cache_read(s, b, bn, "global", &cr)) {
        const char *crn = ts_sched_rv_block_name(s, cr);
        snprintf(packed, sizeof packed, "%s", crn ? crn : "");
        if (ts_sched_compute_at(s, cr,
                                red_b != TS_RV_NONE ? red_b
                                : vb != TS_RV_NONE  ? vb
                                                    : vo))
          return false;
        n_par = vo_at + 1;
      }
    }
  }
  /* A's rows a multiple of 4 KiB apart (K = 1024, 2048 floats): the
   * register tile's rows then share the L1 sets, and they are read again
   * for every vector tile. Packed once into micro-panels (pack_rows).
   * Default schedules, AVX2 Zen 3, alternating rounds, x the best library:
   * matmul 1024^3 2 threads 0.97/0.98 -> 0.99/0.99, 1 thread 0.94/0.92 ->
   * 1.00/1.00; 2048^3 0.95/0.95 -> 0.97/1.01. Not where the rows do not
   * alias: 512^3, 768^3, 625x457x307 lost 1-5 % to the copy, 1000^3
   * within noise. Only where the L1 has 8 ways: with 12 (an AVX-512 Xeon
   * of 48 KiB L1) the 6 rows of AVX-512's tile stay put, and the copy
   * cost 12 %: 1024^3 2 threads 1.03-1.08 -> 1.16-1.17 x OpenBLAS
   * without it, 2048^3 1.01-1.03 -> 1.09-1.13.
   * A transposed ([K, M]) the same, on any CPU, where enough vector tiles
   * read it (TRANS_PACK_TILES): each reduction step of a tile otherwise
   * reads a new line, a row of M apart, across a page every step or two.
   * Default schedules, 2 threads, AVX-512 Xeon, x the best library:
   * 1000^3 AVX-512 (32 tiles) 0.5-0.75 -> 0.91/0.92, AVX2 (63 tiles)
   * 0.72/0.71 -> 0.90/0.87, 512^3 AVX2 (32 tiles) 0.87/0.91 -> 0.99/1.00;
   * 512^3 on AVX-512 (16 tiles) lost 10 % to the copy. */
  if (rows_in[0] && packed[0] && !packed_once && ri != TS_RV_NONE &&
      nrows > 1 && vo != TS_RV_NONE &&
      loop_extent(s, vo) * (vb != TS_RV_NONE ? loop_extent(s, vb) : 1) >= 4) {
    const ts_stmt *rr = ts_func_find_block(ts_sched_func(s), name);
    const ts_buffer *ab = NULL;
    for (int i = 0; rr && i < ts_block_n_reads(ts_realize_block(rr)); i++) {
      const ts_buffer *x = ts_block_read(ts_realize_block(rr), i)->buffer;
      if (!strcmp(ts_buffer_name(x), rows_in)) ab = x;
    }
    int nd = ab ? ts_buffer_ndim(ab) : 0;
    int64_t stride = nd ? ts_buffer_shape(ab)[nd - 1] *
                              (int64_t)ts_dtype_elem_bytes(ts_buffer_dtype(ab))
                        : 0;
    int64_t tiles =
        loop_extent(s, vo) * (vb != TS_RV_NONE ? loop_extent(s, vb) : 1);
    if (((stride > 0 && stride % 4096 == 0 && ts_target_l1d_ways(t) <= 8) ||
         (rows_trans && tiles >= TRANS_PACK_TILES)) &&
        !default_pack_rows(s, t, b, rows_in, nrows, rows_trans))
      return false;
  }
  /* the elementwise consumer at the row tile; with fused rows, whose tile
   * spans image rows (its region there would be the whole image, computed
   * again per tile), at the loop outside them, which then ends the
   * parallel loops */
  ts_rv cons[MAX_BLOCKS];
  int nc = 0, cons_at = fused_rows ? n_outer - 2 : n_outer - 1;
  if (red_at >= 0) cons_at = red_at - 1; /* above the reduction's blocks */
  char cons_name[128] = "";
  /* (not where the loops above it run fewer iterations than the cores: a
   * tile of fused rows of one image, whose consumer would go under the
   * batch loop and leave nothing to run in parallel) */
  int64_t cons_above = 1;
  for (int i = 0; i <= cons_at; i++) cons_above *= loop_extent(s, order[i]);
  /* (nor the copy out of a padded width at a column stripe above fused
   * rows: the stripes would then be all the parallel loop has, each
   * writing part of every output row; it becomes a parallel nest of its
   * own after the tiles) */
  bool stripe =
      fused_rows && cons_at >= 0 && order[cons_at] == vo && padded_width;
  if (!stripe && cons_at >= 0 && cons_above >= ts_target_num_cores(t) &&
      !ts_sched_get_consumers(s, b, cons, MAX_BLOCKS, &nc) && nc == 1) {
    const char *cn = ts_sched_rv_block_name(s, cons[0]);
    const ts_stmt *cr = cn ? ts_func_find_block(ts_sched_func(s), cn) : NULL;
    if (cr && !block_is_reduction(ts_realize_block(cr)) &&
        !ts_block_init(ts_realize_block(cr))) {
      snprintf(cons_name, sizeof cons_name, "%s", cn);
      /* (not where it would compute all of its output at every iteration
       * there: a tile of fused rows under the rows loop, whose region is
       * the whole image; tried on a copy first) */
      int64_t whole = default_block_work(s, cons_name);
      ts_sched *trial = NULL;
      ts_rv tc;
      bool repeats = true;
      if (!ts_sched_fork(s, 0, &trial, NULL) &&
          !ts_sched_get_block(trial, cons_name, &tc) &&
          !ts_sched_reverse_compute_at(trial, tc, order[cons_at]))
        repeats = default_block_work(trial, cons_name) >= whole * cons_above;
      ts_sched_destroy(trial);
      if (repeats || ts_sched_reverse_compute_at(s, cons[0], order[cons_at]))
        cons_name[0] = '\0';
      else if (n_par > cons_at + 1)
        n_par = cons_at + 1;
    }
  }
  /* the init before the reductions, vectorized */
  ts_rv init;
  if (!ts_sched_decompose_reduction(s, b, first_red, &init)) {
    ts_rv il[MAX_LOOPS];
    int nil = 0;
    if (!ts_sched_get_loops(s, init, il, MAX_LOOPS, &nil) &&
        nil > n_outer - par_from)
      ts_sched_vectorize(s, il[nil - 1]);
    /* (before the blocks: a nest of its own, parallel too) */
    const char *in = red_outer ? ts_sched_rv_block_name(s, init) : NULL;
    char init_name[128];
    if (in) {
      snprintf(init_name, sizeof init_name, "%s", in);
      default_parallel_outer(s, t, init_name, default_block_work(s, init_name));
    }
  }
  /* (and a tile of whole vectors whose last one is shorter: each vector
   * unrolled has its own test, which the code generator decides) */
  if (whole_tail || (cols > 4 * lanes && cols <= 7 * lanes &&
                     cols % lanes == 0 && nrows > 1)) {
    /* five to seven vectors (80 channels on AVX-512's 16 lanes,
     * default_register_tile): whole vectors, unrolled; vectorized as one
     * loop of 80, the accumulators went through memory at every step
     * (a 3x3 conv 35x35 320->80: 0.31 x the best library against 0.94) */
    ts_rv parts[2];
    int64_t f[2] = {TS_SPLIT_INFER, lanes};
    if (!ts_sched_split(s, vi, f, 2, parts)) {
      ts_sched_unroll(s, parts[0]);
      ts_sched_vectorize(s, parts[1]);
    }
  } else if (cols > 1)
    ts_sched_vectorize(s, vi);
  if (ri != TS_RV_NONE) ts_sched_unroll(s, ri);
  if (red_in != TS_RV_NONE) ts_sched_unroll(s, red_in);
  if (cons_name[0]) {
    ts_rv cb, cl[MAX_LOOPS];
    int ncl = 0;
    if (!ts_sched_get_block(s, cons_name, &cb) &&
        !ts_sched_get_loops(s, cb, cl, MAX_LOOPS, &ncl) && ncl > cons_at + 1)
      ts_sched_vectorize(s, cl[ncl - 1]);
  }
  if (packed_once) {
    default_parallel_outer(s, t, packed, default_block_work(s, packed));
  } else if (packed[0] && !transpose_tiles(s, t, packed))
    default_vectorize_inner(s, t, packed);
  /* With the panels outermost, a padded window computed at the row tile
   * would be computed again for every panel: the padding then runs once,
   * before the anchor (ResNet-50's 7x7x512 conv with blocked weights:
   * 1.74 -> 1.49 ms on AVX2; packed per panel 2.50 -> 2.24 ms). */
  bool panels_first = vec_first && !rows_load; /* (a depthwise conv's window
                                                * is its channel tile's) */
  for (int i = 0; i < nl; i++) panels_first = panels_first || panel_loop[i];
  /* (the window of a tile of fused rows spans image rows: padded once
   * too, rather than per tile) */
  panels_first = panels_first || fused_rows;
  /* a depthwise conv's padding inlined and its taps unrolled, a kernel
   * row at a time or all (default_depthwise.c), or its padded window
   * copied per tile where that pays */
  int64_t tile_elems = loop_extent(s, vi);
  if (ri != TS_RV_NONE) tile_elems *= loop_extent(s, ri);
  bool row_loop =
      rows_load && hp == TS_RV_NONE &&
      default_depthwise_row_loop(taps, kw_ext, nrows,
                                 default_vector_ops(cols, lanes), regs);
  bool taps_unrolled =
      rows_load &&
      (taps <= 9 || row_loop || hp != TS_RV_NONE ||
       !default_copy_per_tile_pays(s, b, order, n_outer, tile_elems, taps));
  if (taps_unrolled) {
    default_depthwise_taps(s, b, order, n_outer, no, ri, vi, first_red,
                           row_loop);
  } else if (pads_inline) {
    default_pads_inline(s, b);
  } else if (!panels_first)
    default_pads_at_tile(s, t, b, order, n_outer, taps);
  /* the outer loops fused and parallel; no more of them than the
   * schedule's race check enumerates (65536 iterations: a reduction's
   * parallel loop past it is refused, and the whole nest ran on one core:
   * a depthwise conv of 21 channel tiles x 112 rows x 28 column tiles) */
  if (red_at >= par_from && n_par > red_at) n_par = red_at;
  /* (row pairs: their loop alone, whose border guards the code generator
   * then partitions off; default_depthwise_pairs) */
  for (int i = par_from; hp != TS_RV_NONE && i < n_par; i++)
    if (order[i] == vo) n_par = i;
  int64_t work = 1;
  for (int i = par_from; i < n_par; i++) work *= loop_extent(s, order[i]);
  while (n_par > par_from + 1 && work > TS_PARALLEL_CHECK_MAX) {
    n_par--;
    work /= loop_extent(s, order[n_par]);
  }
  /* A ceil split of a depthwise conv's columns (34 = 5 x 7 - 1) fused
   * into the parallel loop guards every element of its unrolled tile, and
   * the accumulators stay in memory. Left serial inside it where the other
   * outer loops give every core 8 iterations or more, the code generator
   * runs every tile but the last unguarded. Default schedules, AVX2 Zen 3,
   * 2 threads, medians of five alternating rounds, x oneDNN: 34x34x120
   * 0.73 -> 0.95, 17x17x576 0.86 -> 1.07, 19x19x240, 58x58x72 and
   * 146x146x240 within noise (+0.01 to +0.03). (A 5x5 one whose padded
   * window is copied per tile lost: 23x23x200 0.88-0.94 -> 0.59-0.75.) */
  if (taps_unrolled && n_par > par_from + 1 && ro != TS_RV_NONE &&
      order[n_par - 1] == ro && er % nrows != 0 &&
      work / loop_extent(s, ro) >= 8 * ts_target_num_cores(t)) {
    n_par--;
    work /= loop_extent(s, ro);
  }
  if (n_par > par_from && work > 1) {
    ts_rv p = order[par_from];
    if (n_par > par_from + 1 &&
        ts_sched_fuse(s, order + par_from, n_par - par_from, &p))
      p = order[par_from];
    ts_sched_parallel(s, p);
  }
  default_inline_pads(s, name, pads, npads);
  return true;
}

/* Step 3 for one block at the root: vectorize, then parallel. */
static void simple_block(ts_sched *s, const ts_target *t, const char *name) {
  int64_t work = default_block_work(s, name);
  default_reduce_outside(s, t, name);
  if (!transpose_tiles(s, t, name)) {
    fuse_short_inner(s, t, name);
    default_vectorize_inner(s, t, name);
  }
  default_parallel_outer(s, t, name, work);
}

static int schedule_cpu(ts_sched *s, const ts_target *t, int level) {
  default_inline_intermediates(s);
  int n = 0;
  char **names = block_names(ts_sched_func(s), &n);
  if (!names) return TS_ENOMEM;
  char anchor[128] = "";
  if (level >= 2)
    for (int i = 0; i < n && !anchor[0]; i++) {
      const ts_stmt *r = ts_func_find_block(ts_sched_func(s), names[i]);
      if (!r || !block_is_reduction(ts_realize_block(r)) ||
          !block_has_spatial_reuse(r))
        continue;
      /* level 3 tries the first anchor only: a failed attempt may have
       * changed the schedule, which the caller then drops */
      if (level >= 3 && tensorize_default(s, t, names[i], level >= 4) != TS_OK)
        break;
      if (level >= 3 || tile_anchor(s, t, names[i]))
        snprintf(anchor, sizeof anchor, "%s", names[i]);
    }
  names_free(names, n);
  if (level >= 3 && !anchor[0]) return TS_ESCHEDULE;
  if (!anchor[0]) {
    default_rfactor_rows(s, t);
    producers_at_output(s);
    fuse_sibling_reductions(s, t);
  }
  /* every block (those computed under another's loops included) */
  const char *root = root_block_name(ts_sched_func(s));
  ts_rv rb, kids[MAX_BLOCKS];
  int nk = 0;
  if (!root || ts_sched_get_block(s, root, &rb) ||
      ts_sched_get_child_blocks(s, rb, kids, MAX_BLOCKS, &nk))
    return TS_OK;
  char kid_names[MAX_BLOCKS][128];
  for (int i = 0; i < nk; i++) {
    const char *kn = ts_sched_rv_block_name(s, kids[i]);
    snprintf(kid_names[i], sizeof kid_names[i], "%s", kn ? kn : "");
  }
  for (int i = 0; i < nk; i++) {
    if (!kid_names[i][0] || !strcmp(kid_names[i], anchor)) continue;
    simple_block(s, t, kid_names[i]);
  }
  return TS_OK;
}

bool default_tile_block(ts_sched *s, const ts_target *t, const char *block) {
  return tile_anchor(s, t, block);
}

/* Whether the scheduled function lowers (what ts_build does first). */
static bool lowers(const ts_sched *s) {
  ts_lower_options lo = ts_lower_defaults();
  ts_error e;
  ts_func *l = ts_lower(ts_sched_func(s), &lo, &e);
  if (!l) return false;
  ts_func_free(l);
  return true;
}

int default_schedule_gpu(const ts_func *f, const ts_target *t, ts_sched **out,
                         ts_error *err) {
  ts_space_options o = ts_space_defaults();
  ts_design_space *spaces = NULL;
  int n = 0;
  if (ts_space_generate(f, t, &o, &spaces, &n, NULL) == TS_OK)
    for (uint64_t seed = 1; seed <= 16 && !*out; seed++)
      for (int i = 0; i < n && !*out; i++) {
        ts_candidate c;
        if (ts_candidate_sample(&spaces[i], i, f, t, seed, &c, NULL)) continue;
        *out = c.sched;
        c.sched = NULL;
        ts_candidate_clear(&c);
      }
  ts_design_spaces_free(spaces, n);
  if (*out) return TS_OK;
  return ts_sched_create(f, 0, out, err);
}

bool ts_default_attention_applies(const ts_func *f, const ts_target *t) {
  ts_sched *s;
  if (!f || !t || ts_target_facts_of(t)->is_gpu ||
      ts_sched_create(f, 0, &s, NULL) != TS_OK)
    return false;
  default_inline_intermediates(s);
  bool ok = default_attention(s, t, false) && lowers(s);
  ts_sched_destroy(s);
  return ok;
}

int default_schedule_cpu(const ts_func *f, const ts_target *t, ts_sched **out,
                         ts_error *err) {
  /* 4: AMX tile blocks, 3: a dot intrinsic, 2: the register tile, 1: the
   * other blocks only */
  int top = ts_target_has_feature(t, "amx-tile") ? 4 : 3;
  /* an attention task: its own schedule (default_attention.c) */
  ts_sched *as;
  if (ts_sched_create(f, 0, &as, NULL) == TS_OK) {
    default_inline_intermediates(as);
    if (default_attention(as, t, false) && lowers(as)) {
      *out = as;
      return TS_OK;
    }
    ts_sched_destroy(as);
  }
  for (int level = top; level >= 1; level--) {
    ts_sched *s;
    int rc = ts_sched_create(f, 0, &s, err);
    if (rc) return rc; /* the function itself is refused */
    if (schedule_cpu(s, t, level) == TS_OK && lowers(s)) {
      /* the next weight panels fetched while the current ones are read
       * (a no-op where no nest streams such panels) */
      if (largest_input_bytes(f) >= PREFETCH_MIN_BYTES) prefetch_inputs(s, 1);
      *out = s;
      return TS_OK;
    }
    ts_sched_destroy(s);
  }
  return ts_sched_create(f, 0, out, err);
}

int ts_default_schedule(const ts_func *f, const ts_target *t, ts_sched **out,
                        ts_error *err) {
  if (!out) return TS_ERR(err, TS_EINVAL, "default schedule: NULL output");
  *out = NULL;
  if (!f || !t)
    return TS_ERR(err, TS_EINVAL, "default schedule: NULL argument");
  return rule_list_of(t)->default_schedule(f, t, out, err);
}
