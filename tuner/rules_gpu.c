/*
 * rules_gpu.c — the design-space rules of GPU targets:
 *  - multi-level tiling SSSRRSRS of reductions with reuse (a read misses a
 *    spatial iter var, as A[i, k] of a matmul misses j): the loops of the
 *    three spatial levels bound to blockIdx.x/y/z, vthread and
 *    threadIdx.x/y/z (one axis per loop, so bound indices stay linear); its
 *    output written through a local (register) cache at the thread level,
 *    or, when it is an intermediate read by one elementwise consumer (a
 *    bias add), kept in registers with the consumer computed under the
 *    thread loop (MetaSchedule's fused write cache); in one variant its
 *    inputs read through shared-memory caches computed at the outer
 *    reduction level (the copy loops bound to the threads by the
 *    rewrite_cooperative_fetch postprocessor of postproc.c, with a
 *    sampled vector length of 1..16), in another read from global memory
 *    directly;
 *  - the tensor-core variant for fp16/bf16 matmul-like blocks on sm_80 and
 *    newer: m16n8k16 tiles innermost, the outer tiles bound to blockIdx.x
 *    and threadIdx.y (one warp per tile row), tensorized onto mma.sync;
 *  - cross-thread reduction for reductions without reuse (row sums, row
 *    maxima, layer_norm's sums): the reduction split by a
 *    sampled thread count dividing it, the inner part factored out
 *    (rfactor) into a shared buffer of partial results, one per thread,
 *    bound to threadIdx.x, and the final reduction of the partials run by
 *    every thread of the block into registers. A reduction other stages
 *    read is computed at the blockIdx loop of its consumers' thread block
 *    (MetaSchedule's fusion of a cross-thread reduction into its
 *    consumer): the loop enclosing them when an earlier application bound
 *    them (rules run consumers first: softmax's row sum binds the
 *    normalization, then the row maximum joins them), else its only
 *    consumer's nest, bound here (the rows it reads on blockIdx.x, the
 *    rest split by the same thread count onto threadIdx.x); two such
 *    reductions reading the same row (layer norm's sum and sum of squares)
 *    get their partial results' loops fused (fuse_siblings), so each
 *    thread reads its elements once for both. A reduction
 *    writing the workload's output gets a nest of its own on blockIdx.x;
 *    an intermediate one with no such consumers gets no variant;
 *  - auto-bind of the blocks no rule bound: the outer spatial loops fused
 *    and split over blockIdx.x / threadIdx.x by a sampled thread count;
 *  - the root block's unroll plan.
 * The "gpu" rule list (rule_lists.c) composes them.
 * Per-block limits (threads, shared memory, registers) and per-thread
 * buffers are checked by the verify_gpu_code postprocessor on each
 * candidate.
 *
 * The shared-memory variants are correct on a device because compute_at
 * relaxes a shared cache's region over the threadIdx and vthread loops
 * (the whole thread block's tile, which the cooperative fetch spreads over
 * the threads) and lowering inserts the __syncthreads barriers
 * (codegen/lower_sync.c); the cross-thread reduction's final sum, which
 * every thread of the block runs, accumulates in registers and every
 * thread stores the same value. The code generator runs the whole function
 * as one kernel and allocates intermediate buffers per thread, so a stage
 * may only read what the same thread wrote: the fusions above give every
 * reading thread the reduction's result, and verify_gpu_code drops the
 * candidates that break this (a reduction left in a nest of its own by the
 * plain spaces' sampled compute location). tests/tuner/test_gpu.c runs
 * sampled candidates, softmax and layer_norm included, in the
 * interpreter's GPU mode (ts_interp_run_gpu) against the reference.
 */
#include "tuner/rule_framework.h"

#include <stdio.h>
#include <string.h>

/* Binds the loops of one tile level to a thread-axis family, one axis per
 * loop (x innermost) so the bound indices stay linear: "blockIdx" and
 * "threadIdx" take up to three loops (the leading ones fused beyond
 * that), "vthread" any number. `axes` lists the usable suffixes, innermost
 * first ("xyz", or "yz" when x is taken). */
static int bind_level(ts_sched *s, const ts_rv *in, int n, const char *family,
                      const char *axes) {
  if (n == 0) return TS_OK;
  int rc;
  if (!strcmp(family, "vthread")) {
    for (int i = 0; i < n; i++)
      if ((rc = ts_sched_bind(s, in[i], "vthread"))) return rc;
    return TS_OK;
  }
  int max = (int)strlen(axes);
  ts_rv loops[MAX_LOOPS];
  int m = 0;
  if (n > max) {
    ts_rv f;
    if ((rc = ts_sched_fuse(s, in, n - max + 1, &f))) return rc;
    loops[m++] = f;
    for (int i = n - max + 1; i < n; i++) loops[m++] = in[i];
  } else {
    for (int i = 0; i < n; i++) loops[m++] = in[i];
  }
  for (int i = 0; i < m; i++) {
    char axis[32];
    snprintf(axis, sizeof axis, "%s.%c", family, axes[m - 1 - i]);
    if ((rc = ts_sched_bind(s, loops[i], axis))) return rc;
  }
  return TS_OK;
}

/* Sampled vector length of a cooperative fetch, as an annotation. */
static int annotate_fetch(ts_sched *s, ts_rv block) {
  static const int64_t lens[5] = {1, 2, 4, 8, 16};
  static const double probs[5] = {0.2, 0.2, 0.2, 0.2, 0.2};
  ts_rv v;
  int rc = ts_sched_sample_categorical(s, lens, probs, 5, &v);
  if (!rc) rc = ts_sched_annotate_rv(s, block, ANN_GPU_FETCH, v);
  return rc;
}

/* SSSRRSRS tiling of `name` with a local write cache (or its fused
 * elementwise consumer, named into fused[0, cap)) and (shared_cache) shared
 * read caches. */
static int mlt_gpu(const gen *g, gen_state *st, const char *name,
                   bool shared_cache, char *fused, size_t cap) {
  ts_sched *s = st->s;
  fused[0] = 0;
  tiles t;
  int rc =
      tile_block(s, name, "SSSRRSRS", g->o->max_innermost_factor, NULL, 0, &t);
  if (rc) return rc;
  if (!t.n_level[0] || !t.n_level[2]) return TS_ESCHEDULE;
  if ((rc = bind_level(s, t.level[0], t.n_level[0], "blockIdx", "xyz")) ||
      (rc = bind_level(s, t.level[1], t.n_level[1], "vthread", "")) ||
      (rc = bind_level(s, t.level[2], t.n_level[2], "threadIdx", "xyz")))
    return rc;
  /* the write cache goes under the innermost thread loop */
  ts_rv tx = t.level[2][t.n_level[2] - 1];
  ts_rv b;
  if ((rc = ts_sched_get_block(s, name, &b))) return rc;
  const ts_block *blk =
      ts_realize_block(ts_func_find_block(ts_sched_func(s), name));
  if (ts_block_n_writes(blk) != 1) return TS_ESCHEDULE;
  char out_name[128];
  snprintf(out_name, sizeof out_name, "%s",
           ts_buffer_name(ts_block_write(blk, 0)->buffer));
  bool param = block_writes_param(ts_sched_func(s), blk);
  /* inputs through shared memory, at the outer reduction level */
  if (shared_cache && t.n_level[3] > 0) {
    ts_rv at = t.level[3][t.n_level[3] - 1];
    char reads[8][128];
    int nr = 0;
    for (int i = 0; i < ts_block_n_reads(blk) && nr < 8; i++) {
      const ts_buffer *rb = ts_block_read(blk, i)->buffer;
      if (!strcmp(ts_buffer_name(rb), out_name)) continue;
      snprintf(reads[nr++], sizeof reads[0], "%s", ts_buffer_name(rb));
    }
    for (int i = 0; i < nr; i++) {
      ts_rv cr;
      if ((rc = ts_sched_get_block(s, name, &b)) ||
          (rc = ts_sched_cache_read(s, b, reads[i], "shared", &cr)) ||
          (rc = ts_sched_compute_at(s, cr, at)) || (rc = annotate_fetch(s, cr)))
        return rc;
    }
  }
  /* An intermediate output read by one elementwise consumer (a bias add,
   * an activation): the output stays in registers and the consumer runs
   * under the thread loop too, on the thread's own tile (in a nest of its
   * own it would read tiles other threads hold: the code generator
   * allocates intermediate buffers per thread). Otherwise the output goes
   * through registers and is written back per thread. */
  ts_rv cons, cw;
  if ((rc = ts_sched_get_block(s, name, &b))) return rc;
  if (!param && fusible_consumer(s, b, &cons) == 0) {
    snprintf(fused, cap, "%s", ts_sched_rv_block_name(s, cons));
    if ((rc = ts_sched_set_scope(s, b, out_name, "local")) ||
        (rc = ts_sched_reverse_compute_at(s, cons, tx)))
      return rc;
  } else if ((rc = ts_sched_cache_write(s, b, out_name, "local", &cw)) ||
             (rc = ts_sched_reverse_compute_at(s, cw, tx))) {
    return rc;
  }
  state_mark_tiled(st, name);
  return TS_OK;
}

/* The tensor-core variant: m16n8k16 innermost, tensorized by
 * postprocessing; the outer tiles on blockIdx.x and threadIdx.y. */
static int mma_variant(const gen *g, gen_state *st, const char *name,
                       const char *intrin) {
  ts_sched *s = st->s;
  ts_rv b, loops[MAX_LOOPS];
  int nl = 0, rc;
  if ((rc = ts_sched_get_block(s, name, &b)) ||
      (rc = ts_sched_get_loops(s, b, loops, MAX_LOOPS, &nl)))
    return rc;
  const ts_stmt *r = ts_func_find_block(ts_sched_func(s), name);
  /* the last two spatial loops are the rows and columns, the last reduce
   * loop the contraction */
  int li = -1, lj = -1, lk = -1;
  for (int i = 0; i < nl; i++) {
    const ts_stmt *l = ts_sched_rv_loop(s, loops[i]);
    int bind = l ? loop_binding(r, l) : 0;
    if (bind == BIND_SPATIAL) {
      li = lj;
      lj = i;
    } else if (bind == BIND_REDUCE) {
      lk = i;
    }
  }
  if (li < 0 || lj < 0 || lk < 0) return TS_ESCHEDULE;
  static const int64_t tile[3] = {16, 8, 16};
  const int idx[3] = {li, lj, lk};
  ts_rv inner[3];
  for (int k = 0; k < 3; k++) {
    int64_t ext = rv_extent(s, loops[idx[k]]);
    if (ext <= 0 || ext % tile[k]) return TS_ESCHEDULE;
    int64_t factors[2] = {TS_SPLIT_INFER, tile[k]};
    ts_rv parts[2];
    if ((rc = ts_sched_split(s, loops[idx[k]], factors, 2, parts))) return rc;
    inner[k] = parts[1];
  }
  tiles t;
  if ((rc = tile_block(s, name, "SSRSRS", g->o->max_innermost_factor, inner, 3,
                       &t)))
    return rc;
  if (!t.n_level[0] || !t.n_level[1]) return TS_ESCHEDULE;
  /* threadIdx.x is the warp's lanes (the intrinsic binds it) */
  if ((rc = bind_level(s, t.level[0], t.n_level[0], "blockIdx", "xyz")) ||
      (rc = bind_level(s, t.level[1], t.n_level[1], "threadIdx", "yz")) ||
      (rc = ts_sched_get_block(s, name, &b)) ||
      (rc = ts_sched_annotate(s, b, ts_ann_string(ANN_TENSORIZE, intrin))) ||
      (rc = ts_sched_annotate(s, b, ts_ann_int(ANN_TENSORIZE_LOOPS, 3))))
    return rc;
  state_mark_tiled(st, name);
  return TS_OK;
}

int rule_gpu_tiling(const gen *g, const gen_state *st, const char *block,
                    gen_state *out, int cap) {
  const ts_stmt *r = ts_func_find_block(ts_sched_func(st->s), block);
  if (!r || !block_is_reduction(ts_realize_block(r)) ||
      !block_has_spatial_reuse(r))
    return 0;
  int n = 0;
  gen_state v;
  for (int shared = 1; shared >= 0; shared--)
    if (n < cap && !state_fork(st, &v, NULL)) {
      char fused[64];
      if (mlt_gpu(g, &v, block, shared, fused, sizeof fused)) {
        state_clear(&v);
      } else {
        state_append_name(&v, "%s: mlt SSSRRSRS%s%s%s", block,
                          shared ? " shared_read" : "",
                          fused[0] ? ", fused " : "", fused);
        out[n++] = v;
      }
    }
  /* tensor cores: fp16/bf16 inputs, sm_80 and newer */
  if (g->o->tensorize && ts_target_sm(g->t) >= 80) {
    const ts_block *b = ts_realize_block(r);
    const char *intrin = NULL;
    for (int i = 0; i < ts_block_n_reads(b); i++) {
      ts_dtype dt = ts_buffer_dtype(ts_block_read(b, i)->buffer);
      if (ts_dtype_eq(dt, TS_FLOAT16)) intrin = "mma_m16n8k16_f16";
      if (ts_dtype_eq(dt, TS_BFLOAT16)) intrin = "mma_m16n8k16_bf16";
    }
    if (intrin && n < cap && !state_fork(st, &v, NULL)) {
      bool ok = mma_variant(g, &v, block, intrin) == TS_OK;
      gen_state check;
      if (ok && !state_fork(&v, &check, NULL)) {
        ok = ts_postproc_apply(check.s, g->t, NULL) == TS_OK;
        state_clear(&check);
      } else {
        ok = false;
      }
      if (ok) {
        snprintf(v.intrin, sizeof v.intrin, "%s", intrin);
        state_append_name(&v, "%s: tensorize %s", block, intrin);
        out[n++] = v;
      } else {
        state_clear(&v);
      }
    }
  }
  return n;
}

/* Thread counts sampled by auto-bind: powers of two from 32 to the
 * target's limit. */
static int sample_threads(ts_sched *s, int64_t max_threads, ts_rv *out) {
  int64_t c[8];
  double p[8];
  int n = 0;
  for (int64_t t = 32; t <= 1024 && t <= max_threads && n < 8; t *= 2)
    c[n++] = t;
  if (n == 0) c[n++] = max_threads > 0 ? max_threads : 32;
  for (int i = 0; i < n; i++) p[i] = 1.0 / n;
  return ts_sched_sample_categorical(s, c, p, n, out);
}

/* Thread counts sampled by cross-thread reduction: the powers of two from
 * 32 to the target's limit that divide the reduction's extent (rfactor
 * refuses the predicate a ragged split would add). TS_ESCHEDULE when there
 * is none. */
static int sample_reduce_threads(ts_sched *s, int64_t max_threads,
                                 int64_t reduce, ts_rv *out) {
  int64_t c[8];
  double p[8];
  int n = 0;
  for (int64_t t = 32; t <= 1024 && t <= max_threads && n < 8; t *= 2)
    if (reduce % t == 0) c[n++] = t;
  if (n == 0) return TS_ESCHEDULE;
  for (int i = 0; i < n; i++) p[i] = 1.0 / n;
  return ts_sched_sample_categorical(s, c, p, n, out);
}

/* Whether loop l of consumer realize rc indexes its reads of the buffer
 * named `buf` (through an iter var the loop feeds). */
static bool loop_indexes(const ts_stmt *rc, const ts_stmt *l, const char *buf) {
  const ts_block *b = ts_realize_block(rc);
  for (int k = 0; k < ts_block_n_iters(b); k++) {
    if (!expr_uses_var(ts_realize_value(rc, k), ts_for_var(l))) continue;
    for (int i = 0; i < ts_block_n_reads(b); i++) {
      const ts_region *rg = ts_block_read(b, i);
      if (strcmp(ts_buffer_name(rg->buffer), buf)) continue;
      for (int d = 0; d < rg->ndim; d++)
        if (expr_uses_var(rg->ranges[d].min, ts_block_iter_var(b, k)))
          return true;
    }
  }
  return false;
}

/* Binds the loop nest of `cons`, the only consumer of a reduction writing
 * `buf`, not bound yet: its outer loops that index buf (the rows: one
 * reduction result per thread block) fused onto blockIdx.x, the spatial
 * loops inside them fused and split by the thread count, the inner part
 * onto threadIdx.x. *bx gets the blockIdx loop. */
static int bind_consumer(ts_sched *s, const char *cons, const char *buf,
                         ts_rv threads, ts_rv *bx) {
  ts_rv b, loops[MAX_LOOPS];
  int nl = 0, rc;
  if ((rc = ts_sched_get_block(s, cons, &b)) ||
      (rc = ts_sched_get_loops(s, b, loops, MAX_LOOPS, &nl)))
    return rc;
  const ts_stmt *r = ts_func_find_block(ts_sched_func(s), cons);
  if (!r || block_is_reduction(ts_realize_block(r))) return TS_ESCHEDULE;
  int n_rows = 0, n_prefix = 0;
  bool rows_done = false;
  for (int i = 0; i < nl; i++) {
    const ts_stmt *l = ts_sched_rv_loop(s, loops[i]);
    if (!l) return TS_ESCHEDULE;
    int bind = loop_binding(r, l);
    bool row = loop_indexes(r, l, buf);
    if (bind & BIND_REDUCE) return TS_ESCHEDULE;
    if (row && rows_done) return TS_ESCHEDULE; /* rows inside columns */
    if (!rows_done && (row || rv_extent(s, loops[i]) == 1)) {
      n_prefix++;
      n_rows += row;
      continue;
    }
    if (bind != BIND_SPATIAL && rv_extent(s, loops[i]) != 1)
      return TS_ESCHEDULE;
    rows_done = true;
  }
  if (!n_rows) return TS_ESCHEDULE;
  if (n_prefix < nl) {
    ts_rv cols = loops[n_prefix], parts[2];
    if (nl - n_prefix > 1 &&
        (rc = ts_sched_fuse(s, loops + n_prefix, nl - n_prefix, &cols)))
      return rc;
    ts_rv factors[2] = {TS_RV_NONE, threads};
    if ((rc = ts_sched_split_rv(s, cols, factors, 2, parts)) ||
        (rc = ts_sched_bind(s, parts[1], "threadIdx.x")))
      return rc;
  }
  *bx = loops[0];
  if (n_prefix > 1 && (rc = ts_sched_fuse(s, loops, n_prefix, bx))) return rc;
  return ts_sched_bind(s, *bx, "blockIdx.x");
}

/* Where reduction `name` (writing `buf`) is computed in its consumers'
 * thread block: when some consumer is already under thread loops, the
 * innermost blockIdx loop enclosing all of them; when none is, the only
 * consumer's nest, bound by bind_consumer. Returns 1 with *at set and
 * *cons_name the first consumer, 0 when there is no such loop, or a
 * negative code (a schedule error). */
static int fusion_target(ts_sched *s, const char *name, const char *buf,
                         ts_rv threads, ts_rv *at, char *cons_name,
                         size_t cap) {
  ts_rv b, cons[MAX_BLOCKS];
  int nc = 0, rc;
  if ((rc = ts_sched_get_block(s, name, &b)) ||
      (rc = ts_sched_get_consumers(s, b, cons, MAX_BLOCKS, &nc)))
    return rc;
  if (nc == 0) return 0;
  const ts_func *f = ts_sched_func(s);
  ts_stmt **common = NULL;
  int n_common = 0;
  bool bound = false;
  for (int i = 0; i < nc; i++) {
    const char *cn = ts_sched_rv_block_name(s, cons[i]);
    const ts_stmt *r = cn ? ts_func_find_block(f, cn) : NULL;
    int n = 0;
    ts_stmt **above = r ? ts_func_loops_above(f, r, true, &n) : NULL;
    if (!above) {
      free(common);
      return TS_ESCHEDULE;
    }
    for (int k = 0; k < n; k++)
      bound |= ts_for_kind_of(above[k]) == TS_FOR_THREAD;
    if (i == 0) {
      common = above;
      n_common = n;
      continue;
    }
    int m = 0;
    while (m < n_common && m < n && common[m] == above[m]) m++;
    n_common = m;
    free(above);
  }
  snprintf(cons_name, cap, "%s", ts_sched_rv_block_name(s, cons[0]));
  if (!bound) {
    free(common);
    if (nc != 1) return 0;
    rc = bind_consumer(s, cons_name, buf, threads, at);
    return rc ? rc : 1;
  }
  const ts_stmt *target = NULL;
  for (int k = 0; k < n_common; k++)
    if (ts_for_kind_of(common[k]) == TS_FOR_THREAD &&
        !strncmp(ts_for_thread_tag(common[k]), "blockIdx", 8))
      target = common[k];
  free(common);
  if (!target) return 0;
  ts_rv loops[MAX_LOOPS];
  int nl = 0;
  if ((rc = ts_sched_get_loops(s, cons[0], loops, MAX_LOOPS, &nl))) return rc;
  for (int i = 0; i < nl; i++)
    if (ts_sched_rv_loop(s, loops[i]) == target) {
      *at = loops[i];
      return 1;
    }
  return TS_ESCHEDULE;
}

/* The cross-thread reduction of block `name` (spatial loops outside, reduce
 * loops inside): the reduce loops fused and split by the thread count, the
 * inner part factored out (rfactor) into a shared buffer of partial results
 * bound to threadIdx.x, then the final reduction of the partials, run by
 * every thread of the block into registers. A result other stages read is
 * computed where fusion_target says (the code generator's per-thread
 * intermediate buffers need the reading threads to compute it; see the
 * file comment); without such a place only a reduction writing a parameter
 * gets the variant, in a nest of its own on blockIdx.x. *fused_at gets the
 * consumer it is computed with ("" for none). */
static int cross_thread(const gen *g, gen_state *st, const char *name,
                        char *fused_at, size_t cap) {
  ts_sched *s = st->s;
  fused_at[0] = 0;
  ts_rv b, loops[MAX_LOOPS];
  int nl = 0, rc;
  if ((rc = ts_sched_get_block(s, name, &b)) ||
      (rc = ts_sched_get_loops(s, b, loops, MAX_LOOPS, &nl)))
    return rc;
  const ts_stmt *r = ts_func_find_block(ts_sched_func(s), name);
  ts_rv red[MAX_LOOPS];
  int ns = 0, nred = 0;
  int64_t reduce = 1;
  for (int i = 0; i < nl; i++) {
    const ts_stmt *l = ts_sched_rv_loop(s, loops[i]);
    int bind = l ? loop_binding(r, l) : 0;
    if (bind == BIND_REDUCE) {
      red[nred++] = loops[i];
      reduce *= rv_extent(s, loops[i]);
    } else {
      if (nred) return TS_ESCHEDULE;
      ns++;
    }
  }
  if (!nred || !ns || reduce < 64) return TS_ESCHEDULE;
  const ts_block *blk = ts_realize_block(r);
  if (ts_block_n_writes(blk) != 1) return TS_ESCHEDULE;
  char out_name[128];
  snprintf(out_name, sizeof out_name, "%s",
           ts_buffer_name(ts_block_write(blk, 0)->buffer));
  bool param = block_writes_param(ts_sched_func(s), blk);
  /* the thread count: the one of the state's other cross-thread
   * reductions of this extent (they share a thread block), else sampled */
  ts_rv threads;
  int64_t max_threads = ts_target_max_threads_per_block(g->t);
  if (st->gpu_threads_reduce == reduce) {
    threads = st->gpu_threads;
  } else if ((rc = sample_reduce_threads(s, max_threads, reduce, &threads))) {
    return rc;
  }
  ts_rv bx = TS_RV_NONE;
  char cons[128] = "";
  int fusible =
      fusion_target(s, name, out_name, threads, &bx, cons, sizeof cons);
  if (fusible < 0) return fusible;
  if (!fusible && !param) return TS_ESCHEDULE; /* read per thread elsewhere */
  if (fusible) {
    st->gpu_threads = threads;
    st->gpu_threads_reduce = reduce;
    snprintf(fused_at, cap, "%s", cons);
  }
  ts_rv fused = red[0], parts[2], rf;
  if (nred > 1 && (rc = ts_sched_fuse(s, red, nred, &fused))) return rc;
  ts_rv factors[2] = {TS_RV_NONE, threads};
  if ((rc = ts_sched_split_rv(s, fused, factors, 2, parts)) ||
      (rc = ts_sched_rfactor(s, parts[1], 0, &rf)))
    return rc;
  /* the partial results: one per thread, in shared memory */
  const char *rfn = ts_sched_rv_block_name(s, rf);
  const ts_stmt *rr = rfn ? ts_func_find_block(ts_sched_func(s), rfn) : NULL;
  if (!rr || ts_block_n_writes(ts_realize_block(rr)) != 1) return TS_ESCHEDULE;
  char rf_buf[128], rf_name[128];
  snprintf(rf_buf, sizeof rf_buf, "%s",
           ts_buffer_name(ts_block_write(ts_realize_block(rr), 0)->buffer));
  snprintf(rf_name, sizeof rf_name, "%s", rfn);
  if ((rc = ts_sched_set_scope(s, rf, rf_buf, "shared"))) return rc;
  if ((rc = ts_sched_get_block(s, name, &b))) return rc;
  if (fusible) {
    /* the final reduction into the consumers' thread block */
    if ((rc = ts_sched_compute_at(s, b, bx))) return rc;
  } else {
    /* the final reduction's spatial loops over the thread blocks */
    ts_rv fl[MAX_LOOPS], outer[MAX_LOOPS];
    int nfl = 0, no = 0;
    if ((rc = ts_sched_get_loops(s, b, fl, MAX_LOOPS, &nfl))) return rc;
    r = ts_func_find_block(ts_sched_func(s), name);
    for (int i = 0; i < nfl; i++) {
      const ts_stmt *l = ts_sched_rv_loop(s, fl[i]);
      if (!l || loop_binding(r, l) != BIND_SPATIAL) break;
      outer[no++] = fl[i];
    }
    if (!no) return TS_ESCHEDULE;
    bx = outer[0];
    if (no > 1 && (rc = ts_sched_fuse(s, outer, no, &bx))) return rc;
    if ((rc = ts_sched_bind(s, bx, "blockIdx.x"))) return rc;
  }
  if ((rc = ts_sched_compute_at(s, rf, bx))) return rc;
  /* The final reduction runs outside the thread loops, so every thread of
   * the block runs it, into its own registers: an intermediate result
   * stays there (each thread reads its own copy); an output is stored by
   * every thread, the same value (accumulating in the output itself would
   * be a read-modify-write race between the threads). */
  if ((rc = ts_sched_get_block(s, name, &b))) return rc;
  if (!param) {
    if ((rc = ts_sched_set_scope(s, b, out_name, "local"))) return rc;
  } else {
    ts_rv cw;
    if ((rc = ts_sched_cache_write(s, b, out_name, "local", &cw)) ||
        (rc = ts_sched_reverse_compute_at(s, cw, bx)))
      return rc;
  }
  /* the partial results' thread loop (the rf block's innermost loop, the
   * factored one) bound to threadIdx.x */
  ts_rv rl[MAX_LOOPS];
  int nrl = 0;
  if ((rc = ts_sched_get_block(s, rf_name, &rf)) ||
      (rc = ts_sched_get_loops(s, rf, rl, MAX_LOOPS, &nrl)) || nrl == 0)
    return rc ? rc : TS_ESCHEDULE;
  const ts_stmt *rr2 = ts_func_find_block(ts_sched_func(s), rf_name);
  const ts_stmt *tl = ts_sched_rv_loop(s, rl[nrl - 1]);
  if (!tl || ts_for_kind_of(tl) != TS_FOR_SERIAL ||
      loop_binding(rr2, tl) != BIND_SPATIAL || rv_extent(s, rl[nrl - 1]) <= 1)
    return TS_ESCHEDULE;
  if ((rc = ts_sched_bind(s, rl[nrl - 1], "threadIdx.x"))) return rc;
  /* another cross-thread reduction of the same row in this thread block
   * (layer norm's sum and sum of squares: one thread count) reads the row
   * in the same loops as this one: both in one pass */
  if (fusible) fuse_sibling_reductions(s, NULL);
  state_mark_tiled(st, name);
  state_mark_tiled(st, rf_name);
  return TS_OK;
}

int rule_gpu_cross_thread_reduction(const gen *g, const gen_state *st,
                                    const char *block, gen_state *out,
                                    int cap) {
  const ts_stmt *r = ts_func_find_block(ts_sched_func(st->s), block);
  if (!r || cap < 2 || !block_is_reduction(ts_realize_block(r)) ||
      block_has_spatial_reuse(r))
    return 0;
  gen_state v;
  if (state_fork(st, &v, NULL)) return 0;
  char at[128];
  if (cross_thread(g, &v, block, at, sizeof at)) {
    state_clear(&v);
    return 0;
  }
  if (at[0])
    state_append_name(&v, "%s: cross-thread reduction in %s's thread block",
                      block, at);
  else
    state_append_name(&v, "%s: cross-thread reduction", block);
  /* keep the plain state too (auto-bind handles it) */
  gen_state keep;
  if (state_fork(st, &keep, NULL)) {
    out[0] = v;
    return 1;
  }
  out[0] = keep;
  out[1] = v;
  return 2;
}

/* Whether a loop above the block (or the block's own nest) is bound. */
static bool is_bound(const ts_func *f, const ts_stmt *r) {
  int n = 0;
  ts_stmt **loops = ts_func_loops_above(f, r, false, &n);
  bool bound = false;
  for (int i = 0; i < n; i++)
    if (ts_for_kind_of(loops[i]) == TS_FOR_THREAD) bound = true;
  free(loops);
  return bound;
}

int rule_gpu_auto_bind(const gen *g, gen_state *st, const char *name) {
  ts_sched *s = st->s;
  const ts_stmt *r = ts_func_find_block(ts_sched_func(s), name);
  if (!r || is_bound(ts_sched_func(s), r)) return 0;
  ts_rv b, loops[MAX_LOOPS];
  int nl = 0;
  if (ts_sched_get_block(s, name, &b) ||
      ts_sched_get_loops(s, b, loops, MAX_LOOPS, &nl) || nl == 0)
    return 0;
  /* the outer chain of spatial loops */
  ts_rv sp[MAX_LOOPS];
  int ns = 0;
  for (int i = 0; i < nl; i++) {
    const ts_stmt *l = ts_sched_rv_loop(s, loops[i]);
    if (!l || loop_binding(r, l) != BIND_SPATIAL) break;
    sp[ns++] = loops[i];
    if (ts_stmt_kind_of(ts_for_body(l)) != TS_STMT_FOR) break;
  }
  if (!ns) return 0;
  ts_rv fused = sp[0], threads, parts[2];
  if (ns > 1 && ts_sched_fuse(s, sp, ns, &fused)) return 0;
  if (sample_threads(s, ts_target_max_threads_per_block(g->t), &threads))
    return 0;
  ts_rv factors[2] = {TS_RV_NONE, threads};
  if (ts_sched_split_rv(s, fused, factors, 2, parts) ||
      ts_sched_bind(s, parts[0], "blockIdx.x") ||
      ts_sched_bind(s, parts[1], "threadIdx.x"))
    return 0;
  return 1;
}

/* The root block's unroll plan: an auto-unroll step sampled from {0, 16,
 * 64, 512, 1024} (no parallel or vector plans: threads come from the
 * bindings). */
int rule_gpu_unroll(const gen *g, gen_state *st) {
  ts_sched *s = st->s;
  const char *root = root_block_name(ts_sched_func(s));
  if (!root) return TS_OK;
  ts_rv rb, unroll;
  int rc;
  static const int64_t steps[5] = {0, 16, 64, 512, 1024};
  static const double sp[5] = {0.25, 0.25, 0.25, 0.25, 0.25};
  if ((rc = ts_sched_get_block(s, root, &rb)) ||
      (rc = ts_sched_sample_categorical(s, steps, sp, 5, &unroll)) ||
      (rc = ts_sched_annotate_rv(s, rb, ANN_UNROLL, unroll)))
    return rc;
  return TS_OK;
}
