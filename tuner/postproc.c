/*
 * postproc.c — the postprocessors that turn a replayed design trace into a
 * candidate: decompose reduction inits (so accumulators can live in
 * registers and tensorize can match), tensorize the blocks the
 * tensorization rule marked, rewrite the root block's parallel / vectorize
 * / unroll plans into loop kinds and unroll annotations (they depend on the
 * sampled loop extents, so rules cannot do it), and on GPU targets bind
 * cooperative fetches and verify the per-block limits. Which of them a
 * target gets, in which order, its rule list says (rule_lists.c). Each step is
 * a schedule primitive, recorded in the candidate's trace, so the stored trace
 * replays to the measured function without the tuner. A candidate a
 * postprocessor rejects is dropped before it is built.
 */
#include "tuner/rule_framework.h"

#include <stdio.h>
#include <string.h>

static const char *const postproc_names[TS_N_POSTPROCS] = {
    "rewrite_reduction_block",           "rewrite_tensorize",
    "rewrite_parallel_vectorize_unroll", "verify_gpu_code",
    "rewrite_cooperative_fetch",
};

const char *ts_postproc_name(ts_postproc_kind k) {
  return (unsigned)k < TS_N_POSTPROCS ? postproc_names[k] : NULL;
}

ts_trace *trace_without_decisions(const ts_trace *t) {
  ts_trace *c = ts_trace_copy(t);
  if (!c) return NULL;
  for (int i = 0; i < ts_trace_n_insts(c); i++)
    if (ts_trace_inst_is_sampling(c, i))
      ts_trace_set_decision(c, i, NULL, -1, NULL);
  return c;
}

static int fail(ts_error *err, ts_sched *s, ts_postproc_kind k,
                const char *what) {
  const ts_error *se = ts_sched_error(s);
  return TS_ERR(err, se->code ? se->code : TS_ESCHEDULE,
                "postprocessor %s: %s%s%s", ts_postproc_name(k), what,
                se->msg[0] ? ": " : "", se->msg);
}

/* ========================================================================
 * rewrite_reduction_block
 * ======================================================================== */

static int rewrite_reduction(ts_sched *s, ts_error *err) {
  int nn = 0;
  char **names = block_names(ts_sched_func(s), &nn);
  int rc = TS_OK;
  for (int i = 0; i < nn && !rc; i++) {
    const ts_stmt *r = ts_func_find_block(ts_sched_func(s), names[i]);
    if (!r || !ts_block_init(ts_realize_block(r))) continue;
    ts_rv b, loops[MAX_LOOPS], init;
    int nl = 0;
    if (ts_sched_get_block(s, names[i], &b) ||
        ts_sched_get_loops(s, b, loops, MAX_LOOPS, &nl))
      continue;
    for (int k = 0; k < nl; k++) {
      const ts_stmt *l = ts_sched_rv_loop(s, loops[k]);
      if (!l || !(loop_binding(r, l) & BIND_REDUCE)) continue;
      /* a reduction that cannot be decomposed keeps its init: lowering
       * runs it at the first reduce iteration */
      if (ts_sched_decompose_reduction(s, b, loops[k], &init) &&
          ts_block_find_annotation(ts_realize_block(r), ANN_TENSORIZE))
        rc = fail(err, s, TS_POSTPROC_REWRITE_REDUCTION, names[i]);
      break;
    }
  }
  names_free(names, nn);
  return rc;
}

/* ========================================================================
 * rewrite_tensorize
 * ======================================================================== */

static int rewrite_tensorize(ts_sched *s, ts_error *err) {
  int nn = 0;
  char **names = block_names(ts_sched_func(s), &nn);
  int rc = TS_OK;
  for (int i = 0; i < nn && !rc; i++) {
    const ts_stmt *r = ts_func_find_block(ts_sched_func(s), names[i]);
    if (!r) continue;
    const ts_block *blk = ts_realize_block(r);
    const ts_annotation *a = ts_block_find_annotation(blk, ANN_TENSORIZE);
    const ts_annotation *nk =
        ts_block_find_annotation(blk, ANN_TENSORIZE_LOOPS);
    if (!a || a->kind != TS_ANN_STRING || !nk || nk->kind != TS_ANN_INT)
      continue;
    char intrin[64];
    snprintf(intrin, sizeof intrin, "%s", a->s);
    int64_t k = nk->i;
    ts_rv b, loops[MAX_LOOPS];
    int nl = 0;
    if ((rc = ts_sched_get_block(s, names[i], &b)) ||
        (rc = ts_sched_get_loops(s, b, loops, MAX_LOOPS, &nl))) {
      rc = fail(err, s, TS_POSTPROC_REWRITE_TENSORIZE, names[i]);
      break;
    }
    if (k < 1 || k > nl) {
      rc = TS_ERR(err, TS_ESCHEDULE,
                  "postprocessor %s: block '%s' has %d loops, the intrinsic "
                  "covers %lld",
                  ts_postproc_name(TS_POSTPROC_REWRITE_TENSORIZE), names[i], nl,
                  (long long)k);
      break;
    }
    if (ts_sched_unannotate(s, b, ANN_TENSORIZE_LOOPS) ||
        ts_sched_unannotate(s, b, ANN_TENSORIZE) ||
        ts_sched_tensorize(s, loops[nl - k], intrin))
      rc = fail(err, s, TS_POSTPROC_REWRITE_TENSORIZE, names[i]);
  }
  names_free(names, nn);
  return rc;
}

/* ========================================================================
 * rewrite_cooperative_fetch (GPU)
 * ======================================================================== */

typedef struct count_blocks {
  int n;
} count_blocks;

static bool count_block(void *ctx, ts_stmt *st) {
  if (ts_stmt_kind_of(st) == TS_STMT_BLOCK_REALIZE) ((count_blocks *)ctx)->n++;
  return true;
}

static int blocks_under(const ts_stmt *l) {
  count_blocks c = {0};
  ts_visitor v = {count_block, NULL, NULL, &c};
  ts_stmt_walk((ts_stmt *)l, &v);
  return c.n;
}

/* The cache blocks the GPU tiling marked (ANN_GPU_FETCH, the sampled
 * vector length): their loops fused, split by the thread extent (and the
 * vector length) and bound to threadIdx. */
static int rewrite_cooperative_fetch(ts_sched *s, ts_error *err) {
  int nn = 0;
  char **names = block_names(ts_sched_func(s), &nn);
  int rc = TS_OK;
  for (int i = 0; i < nn && !rc; i++) {
    const ts_stmt *r = ts_func_find_block(ts_sched_func(s), names[i]);
    const ts_annotation *a =
        r ? ts_block_find_annotation(ts_realize_block(r), ANN_GPU_FETCH) : NULL;
    if (!a || a->kind != TS_ANN_INT) continue;
    int64_t vec = a->i;
    ts_rv b, loops[MAX_LOOPS];
    int nl = 0;
    if ((rc = ts_sched_get_block(s, names[i], &b)) ||
        (rc = ts_sched_unannotate(s, b, ANN_GPU_FETCH)) ||
        (rc = ts_sched_get_loops(s, b, loops, MAX_LOOPS, &nl)))
      break;
    /* the extents of the enclosing threadIdx loops; the copy's own loops
     * are the innermost ones holding only this block */
    int64_t threads[3] = {0, 0, 0}; /* z, y, x */
    int own = nl;
    for (int k = 0; k < nl; k++) {
      const ts_stmt *l = ts_sched_rv_loop(s, loops[k]);
      if (!l || ts_for_kind_of(l) != TS_FOR_THREAD) continue;
      const char *tag = ts_for_thread_tag(l);
      int axis = !strcmp(tag, "threadIdx.z")   ? 0
                 : !strcmp(tag, "threadIdx.y") ? 1
                 : !strcmp(tag, "threadIdx.x") ? 2
                                               : -1;
      if (axis >= 0) ts_expr_is_const_int(ts_for_extent(l), &threads[axis]);
    }
    while (own > 0 && blocks_under(ts_sched_rv_loop(s, loops[own - 1])) == 1 &&
           ts_for_kind_of(ts_sched_rv_loop(s, loops[own - 1])) == TS_FOR_SERIAL)
      own--;
    if (own == nl || threads[2] <= 0) continue;
    ts_rv f = loops[own], parts[5];
    if (nl - own >= 2 && (rc = ts_sched_fuse(s, loops + own, nl - own, &f)))
      break;
    /* fused copy loop -> [rest, threadIdx.z, .y, .x, vector] */
    static const char *const tags[3] = {"threadIdx.z", "threadIdx.y",
                                        "threadIdx.x"};
    int64_t factors[5];
    int which[5], nf = 0;
    factors[nf] = TS_SPLIT_INFER;
    which[nf++] = -1;
    for (int a2 = 0; a2 < 3; a2++)
      if (threads[a2] > 1 || a2 == 2) {
        factors[nf] = threads[a2];
        which[nf++] = a2;
      }
    if (vec > 1) {
      factors[nf] = vec;
      which[nf++] = 3;
    }
    if ((rc = ts_sched_split(s, f, factors, nf, parts))) break;
    for (int k = 0; k < nf && !rc; k++) {
      if (which[k] >= 0 && which[k] < 3)
        rc = ts_sched_bind(s, parts[k], tags[which[k]]);
      else if (which[k] == 3)
        rc = ts_sched_vectorize(s, parts[k]);
    }
    if (rc) break;
  }
  if (rc) {
    const ts_error *se = ts_sched_error(s);
    rc =
        TS_ERR(err, rc, "postprocessor rewrite_cooperative_fetch: %s", se->msg);
  }
  names_free(names, nn);
  return rc;
}

/* ========================================================================
 * rewrite_parallel_vectorize_unroll
 * ======================================================================== */

typedef struct nest_blocks {
  const ts_stmt *v[MAX_BLOCKS];
  int n;
} nest_blocks;

static bool collect_block(void *ctx, ts_stmt *st) {
  nest_blocks *nb = ctx;
  if (ts_stmt_kind_of(st) == TS_STMT_BLOCK_REALIZE && nb->n < MAX_BLOCKS)
    nb->v[nb->n++] = st;
  return true;
}

/* Whether a block realize contains another block. */
static bool has_child_block(const ts_stmt *r) {
  nest_blocks nb = {{0}, 0};
  ts_visitor v = {collect_block, NULL, NULL, &nb};
  ts_stmt_walk(ts_block_body(ts_realize_block(r)), &v);
  return nb.n > 0;
}

/* Whether loop l may run in parallel for every block in nb. */
static bool loop_parallelizable(const ts_stmt *l, const nest_blocks *nb) {
  int64_t ext;
  if (ts_for_kind_of(l) != TS_FOR_SERIAL ||
      !ts_expr_is_const_int(ts_for_extent(l), &ext))
    return false;
  for (int i = 0; i < nb->n; i++)
    if (loop_binding(nb->v[i], l) & BIND_REDUCE) return false;
  return true;
}

static int64_t annotation_int(const ts_block *b, const char *key,
                              int64_t dflt) {
  const ts_annotation *a = ts_block_find_annotation(b, key);
  return a && a->kind == TS_ANN_INT ? a->i : dflt;
}

/* Vectorizes the innermost loop of a leaf block when it is serial, spatial
 * and holds only that block: whole when it has at most max_lanes
 * iterations, else (when it is not the parallel loop) split by the largest
 * power of two up to max_lanes that divides it, the inner part vectorized
 * (a 1024-wide row of an elementwise block becomes 16 vectors of 64), or,
 * when that power is below 8, into 16-wide vectors past the end.  * True when
 * it split more than the innermost loop (an interleaving copy).
 */
static bool vectorize_leaf(ts_sched *s, const char *name, int64_t max_lanes,
                           const ts_stmt *parallel_loop) {
  ts_rv b, loops[MAX_LOOPS];
  int nl = 0;
  if (ts_sched_get_block(s, name, &b) ||
      ts_sched_get_loops(s, b, loops, MAX_LOOPS, &nl) || nl == 0)
    return false;
  const ts_stmt *l = ts_sched_rv_loop(s, loops[nl - 1]);
  const ts_stmt *r = ts_func_find_block(ts_sched_func(s), name);
  int64_t ext = 0;
  if (!l || l == parallel_loop || ts_for_kind_of(l) != TS_FOR_SERIAL ||
      !ts_expr_is_const_int(ts_for_extent(l), &ext) || ext <= 1 ||
      ts_for_body(l) != r || loop_binding(r, l) != BIND_SPATIAL)
    return false;
  /* a copy into a dot-product intrinsic's interleaved B layout: groups of
   * 64 bytes, interleaved in registers */
  if (tile_interleave(s, name, 64, max_lanes)) return true;
  /* a transposing copy (a transposed operand's packed panel): tiles of
   * 32 bytes by as many rows, transposed in registers */
  if (ts_block_n_writes(ts_realize_block(r)) == 1) {
    int64_t eb = ts_dtype_elem_bytes(
        ts_buffer_dtype(ts_block_write(ts_realize_block(r), 0)->buffer));
    int64_t tl = eb > 0 ? 32 / eb : 0;
    if (tl > 16) tl = 16;
    if (tl > max_lanes) tl = max_lanes;
    if (tl >= 4 && tile_transpose(s, name, (int)tl)) return false;
  }
  if (ext <= max_lanes) {
    ts_sched_vectorize(s, loops[nl - 1]);
    return false;
  }
  int64_t lanes = 1;
  while (lanes * 2 <= max_lanes && ext % (lanes * 2) == 0) lanes *= 2;
  int64_t factors[2] = {ext / lanes, lanes};
  /* an extent that no vector of 8 or more divides (a row of 881, of
   * 1000): split past its end by a 16-wide vector, the last one guarded;
   * lowering partitions the guard off the main part (codegen/partition.c),
   * so every vector but the last is whole */
  int64_t wide = max_lanes < 16 ? max_lanes : 16;
  if (lanes < 8 && lanes < wide && ext > 2 * wide) {
    lanes = wide;
    factors[0] = (ext + wide - 1) / wide;
    factors[1] = wide;
  }
  ts_rv parts[2];
  if (lanes < 2 || ts_sched_split(s, loops[nl - 1], factors, 2, parts))
    return false;
  ts_sched_vectorize(s, parts[1]);
  return false;
}

/* The perfectly nested chain of parallelizable outer loops of a nest (its
 * blocks nb), as long as the product of their extents (*prod) is below
 * par: how many. */
static int parallel_chain(ts_sched *s, const ts_rv *loops, int nl,
                          const nest_blocks *nb, int64_t par, int64_t *prod) {
  int m = 0;
  *prod = 1;
  while (par > 0 && m < nl && *prod < par) {
    const ts_stmt *l = ts_sched_rv_loop(s, loops[m]);
    if (!l || !loop_parallelizable(l, nb)) break;
    int64_t ext = 0;
    ts_expr_is_const_int(ts_for_extent(l), &ext);
    *prod *= ext;
    m++;
    if (ts_stmt_kind_of(ts_for_body(l)) != TS_STMT_FOR) break;
  }
  return m;
}

/* Whether the blocks of a nest write some output of f, each with spatial
 * iters only (every element once: a reduction's update reads back what it
 * wrote, which a non-temporal store would send to memory and back). */
static bool writes_outputs_once(const ts_func *f, const nest_blocks *nb) {
  bool any = false;
  for (int k = 0; k < nb->n; k++) {
    const ts_block *b = ts_realize_block(nb->v[k]);
    for (int w = 0; w < ts_block_n_writes(b); w++) {
      const ts_buffer *buf = ts_block_write(b, w)->buffer;
      bool out = false;
      for (int i = 0; i < ts_func_n_params(f); i++)
        if (ts_func_param(f, i) == buf && ts_func_param_is_output(f, i))
          out = true;
      if (!out) continue;
      for (int i = 0; i < ts_block_n_iters(b); i++)
        if (ts_block_iter_kind(b, i) != TS_ITER_SPATIAL) return false;
      any = true;
    }
  }
  return any;
}

/* The top-level loop nests of f: for each, the name of its first leaf
 * block ("" for a nest that is not a loop, or with `outputs_once`, one
 * that does not write outputs once). calloc'd, *n_top entries; NULL when
 * out of memory. */
static char (*nest_leaves(const ts_func *f, bool outputs_once,
                          int *n_top))[128] {
  /* (a function parsed from text may have no root block: its body is
   * then the nest itself) */
  const ts_stmt *body = ts_func_body(f);
  if (ts_stmt_kind_of(body) == TS_STMT_BLOCK_REALIZE)
    body = ts_block_body(ts_realize_block(body));
  int n = ts_stmt_kind_of(body) == TS_STMT_SEQ ? ts_seq_n(body) : 1;
  char(*leaf)[128] = calloc((size_t)(n ? n : 1), 128);
  *n_top = leaf ? n : 0;
  for (int i = 0; leaf && i < n; i++) {
    const ts_stmt *top =
        ts_stmt_kind_of(body) == TS_STMT_SEQ ? ts_seq_item(body, i) : body;
    if (ts_stmt_kind_of(top) != TS_STMT_FOR) continue;
    nest_blocks nb = {{0}, 0};
    ts_visitor v = {collect_block, NULL, NULL, &nb};
    ts_stmt_walk((ts_stmt *)top, &v);
    if (outputs_once && !writes_outputs_once(f, &nb)) continue;
    for (int k = 0; k < nb.n; k++)
      if (!has_child_block(nb.v[k])) {
        snprintf(leaf[i], 128, "%s", ts_block_name(ts_realize_block(nb.v[k])));
        break;
      }
  }
  return leaf;
}

/* Annotates `ann` on the outer loop of each top-level nest of s (with
 * `writers`, of each nest that writes f's outputs from spatial blocks
 * only); returns the loops annotated. */
static int annotate_nests(ts_sched *s, bool writers, ts_annotation ann) {
  int n_top = 0;
  char(*leaf)[128] = nest_leaves(ts_sched_func(s), writers, &n_top);
  if (!leaf) return 0;
  int n = 0;
  for (int i = 0; i < n_top; i++) {
    ts_rv b, loops[MAX_LOOPS];
    int nl = 0;
    if (!leaf[i][0] || ts_sched_get_block(s, leaf[i], &b) ||
        ts_sched_get_loops(s, b, loops, MAX_LOOPS, &nl) || nl == 0)
      continue;
    if (!ts_sched_annotate(s, loops[0], ann)) n++;
  }
  free(leaf);
  return n;
}

int stream_outputs(ts_sched *s) {
  return annotate_nests(s, true, ts_ann_int(TS_ANN_NONTEMPORAL, 1));
}

int prefetch_inputs(ts_sched *s, int on) {
  return annotate_nests(s, false, ts_ann_int(TS_ANN_PREFETCH, on));
}

static int rewrite_pvu(ts_sched *s, bool parallel_vectorize, ts_error *err) {
  const ts_func *f = ts_sched_func(s);
  const char *rn = root_block_name(f);
  if (!rn) return TS_OK;
  char root[128];
  snprintf(root, sizeof root, "%s", rn);
  const ts_block *rb = ts_realize_block(ts_func_body(f));
  int64_t par = annotation_int(rb, ANN_PARALLEL, 0);
  int64_t vec = annotation_int(rb, ANN_VECTORIZE, 0);
  int64_t unroll = annotation_int(rb, ANN_UNROLL, 0);
  int64_t stream = annotation_int(rb, ANN_STREAM, 0);
  int64_t prefetch = annotation_int(rb, ANN_PREFETCH, 0);
  ts_rv root_rv;
  if (ts_sched_get_block(s, root, &root_rv))
    return fail(err, s, TS_POSTPROC_REWRITE_PARALLEL_VECTORIZE_UNROLL, root);
  const char *keys[5] = {ANN_PARALLEL, ANN_VECTORIZE, ANN_UNROLL, ANN_STREAM,
                         ANN_PREFETCH};
  for (int i = 0; i < 5; i++)
    if (ts_block_find_annotation(rb, keys[i]) &&
        ts_sched_unannotate(s, root_rv, keys[i]))
      return fail(err, s, TS_POSTPROC_REWRITE_PARALLEL_VECTORIZE_UNROLL, root);
  if (!par && !vec && !unroll && !stream && !prefetch) return TS_OK;

  /* the top-level loop nests: for each, the first leaf block names it */
  int nn = 0;
  char **names = block_names(ts_sched_func(s), &nn);
  int n_top = 0;
  char(*first_leaf)[128] = nest_leaves(f, false, &n_top);
  for (int i = 0; i < n_top; i++) {
    if (!first_leaf[i][0]) continue;
    ts_rv b, loops[MAX_LOOPS];
    int nl = 0;
    if (ts_sched_get_block(s, first_leaf[i], &b) ||
        ts_sched_get_loops(s, b, loops, MAX_LOOPS, &nl) || nl == 0)
      continue;
    /* the blocks of this nest (for the parallel-safety check) */
    nest_blocks nb = {{0}, 0};
    ts_visitor v = {collect_block, NULL, NULL, &nb};
    ts_stmt_walk((ts_stmt *)ts_sched_rv_loop(s, loops[0]), &v);
    int64_t prod = 1;
    int m =
        parallel_vectorize ? parallel_chain(s, loops, nl, &nb, par, &prod) : 0;
    const ts_stmt *par_stmt = m > 0 ? ts_sched_rv_loop(s, loops[m - 1]) : NULL;
    bool nt = stream > 0 && writes_outputs_once(ts_sched_func(s), &nb);
    bool resplit = false;
    /* vectorize the leaves first: fusing the outer loops keeps inner
     * handles valid */
    if (parallel_vectorize && vec > 1)
      for (int k = 0; k < nb.n; k++)
        if (!has_child_block(nb.v[k]) &&
            !ts_block_find_annotation(ts_realize_block(nb.v[k]),
                                      TS_ANN_TENSOR_INTRIN)) {
          char name[128];
          snprintf(name, sizeof name, "%s",
                   ts_block_name(ts_realize_block(nb.v[k])));
          /* an interleaving copy splits its two innermost loops, which
           * may be the nest's outer ones: their handles again */
          if (vectorize_leaf(s, name, vec, m == nl ? par_stmt : NULL)) {
            if (ts_sched_get_block(s, first_leaf[i], &b) ||
                ts_sched_get_loops(s, b, loops, MAX_LOOPS, &nl) || nl == 0)
              break;
            resplit = true;
          }
          /* the walk's realize pointers may be stale after a primitive */
          nb.n = 0;
          ts_stmt_walk((ts_stmt *)ts_sched_rv_loop(s, loops[0]), &v);
        }
    if (nl == 0) continue;
    /* the chain again over the loops as they are now */
    if (resplit) m = parallel_chain(s, loops, nl, &nb, par, &prod);
    ts_rv outer = loops[0];
    if (m >= 1 && prod > 1) {
      ts_rv fused = loops[0];
      if (m >= 2 && ts_sched_fuse(s, loops, m, &fused)) fused = TS_RV_NONE;
      if (fused != TS_RV_NONE && !ts_sched_parallel(s, fused))
        outer = fused;
      else if (fused != TS_RV_NONE)
        outer = fused;
    }
    if (unroll > 0 && ts_sched_rv_loop(s, outer)) {
      ts_sched_annotate(s, outer,
                        ts_ann_int(TS_ANN_AUTO_UNROLL_MAX_STEP, unroll));
      ts_sched_annotate(s, outer, ts_ann_int(TS_ANN_UNROLL_EXPLICIT, 1));
    }
    if (nt && ts_sched_rv_loop(s, outer))
      ts_sched_annotate(s, outer, ts_ann_int(TS_ANN_NONTEMPORAL, 1));
    if (prefetch > 0 && ts_sched_rv_loop(s, outer))
      ts_sched_annotate(s, outer, ts_ann_int(TS_ANN_PREFETCH, 1));
  }
  free(first_leaf);
  names_free(names, nn);
  return TS_OK;
}

/* ========================================================================
 * verify_gpu_code
 * ======================================================================== */

typedef struct gpu_walk {
  ts_gpu_usage u;
  int64_t thread_x, thread_y, thread_z;
  int64_t local_bytes;
} gpu_walk;

static bool gpu_enter(void *ctx, ts_stmt *st) {
  gpu_walk *g = ctx;
  if (ts_stmt_kind_of(st) == TS_STMT_FOR &&
      ts_for_kind_of(st) == TS_FOR_THREAD) {
    int64_t ext = 0;
    ts_expr_is_const_int(ts_for_extent(st), &ext);
    const char *tag = ts_for_thread_tag(st);
    if (!strcmp(tag, "threadIdx.x") && ext > g->thread_x) g->thread_x = ext;
    if (!strcmp(tag, "threadIdx.y") && ext > g->thread_y) g->thread_y = ext;
    if (!strcmp(tag, "threadIdx.z") && ext > g->thread_z) g->thread_z = ext;
    if (!strcmp(tag, "vthread")) g->u.vthreads *= ext > 0 ? ext : 1;
  } else if (ts_stmt_kind_of(st) == TS_STMT_ALLOCATE) {
    const ts_buffer *b = ts_allocate_buffer(st);
    const char *scope = ts_buffer_scope(b);
    if (!strncmp(scope, "shared", 6))
      g->u.shared_bytes += ts_buffer_bytes(b);
    else if (!strcmp(scope, "local"))
      g->local_bytes += ts_buffer_bytes(b);
  }
  return true;
}

/* ---- per-thread buffers ----
 *
 * The cuda code generator emits the whole function as one kernel and
 * allocates every buffer that is neither a parameter nor shared memory per
 * thread (registers or the thread's stack). Such a buffer carries data only
 * from a thread to itself: a thread reading an element another thread wrote
 * reads its own copy, which nobody wrote. The sound static rule checked
 * here: every blockIdx/threadIdx loop enclosing a write of the buffer
 * encloses each read of it too (the same loop statement), so the threads
 * reading an element are the threads that wrote it. A write outside every
 * thread loop runs in every thread and satisfies it; a write in one
 * root-level nest read in another (a reduction bound to blockIdx on its own
 * and its consumer bound elsewhere) does not. vthread loops are ordinary
 * loops in the kernel and do not count; shared buffers are exempt (the
 * barrier pass of codegen/lower_sync.c orders their accesses). */

#define MAX_THREAD_NEST 16

typedef struct thread_access {
  const ts_buffer *buf;
  bool write;
  const ts_stmt *loops[MAX_THREAD_NEST]; /* enclosing thread loops, outer
                                            first */
  int n_loops;
} thread_access;

typedef struct private_walk {
  const ts_buffer **bufs; /* allocated per-thread buffers */
  int n_bufs, cap_bufs;
  thread_access *acc;
  int n_acc, cap_acc;
  const ts_stmt *stack[MAX_THREAD_NEST]; /* enclosing thread loops */
  int depth;     /* thread loops entered (may exceed the stack) */
  bool too_deep; /* more thread loops than the stack holds */
  bool oom;      /* out of memory */
} private_walk;

static bool is_private(const private_walk *p, const ts_buffer *b) {
  for (int i = 0; i < p->n_bufs; i++)
    if (p->bufs[i] == b) return true;
  return false;
}

static void add_access(private_walk *p, const ts_buffer *b, bool write) {
  if (!is_private(p, b) || p->too_deep || p->oom) return;
  if (p->depth > MAX_THREAD_NEST) {
    p->too_deep = true;
    return;
  }
  /* one entry per kind of access and thread-loop nest (an unrolled body
   * repeats them) */
  for (int i = 0; i < p->n_acc; i++) {
    const thread_access *a = &p->acc[i];
    if (a->buf == b && a->write == write && a->n_loops == p->depth &&
        !memcmp(a->loops, p->stack, sizeof a->loops[0] * (size_t)p->depth))
      return;
  }
  if (p->n_acc == p->cap_acc) {
    int cap = p->cap_acc ? p->cap_acc * 2 : 64;
    thread_access *v = realloc(p->acc, sizeof *v * (size_t)cap);
    if (!v) {
      p->oom = true;
      return;
    }
    p->acc = v;
    p->cap_acc = cap;
  }
  thread_access *a = &p->acc[p->n_acc++];
  a->buf = b;
  a->write = write;
  a->n_loops = p->depth;
  memcpy(a->loops, p->stack, sizeof a->loops[0] * (size_t)p->depth);
}

static void private_expr(void *ctx, ts_expr *e) {
  ts_expr_kind k = ts_expr_kind_of(e);
  if (k == TS_EXPR_LOAD) {
    add_access(ctx, ts_expr_buffer(e), false);
  } else if (k == TS_EXPR_ADDRESS_OF) {
    /* an intrinsic may read and write through the address */
    add_access(ctx, ts_expr_buffer(e), false);
    add_access(ctx, ts_expr_buffer(e), true);
  }
}

static void private_walk_expr(private_walk *p, ts_expr *e) {
  if (e) ts_expr_walk(e, private_expr, p);
}

static bool is_gpu_thread_loop(const ts_stmt *s) {
  if (ts_stmt_kind_of(s) != TS_STMT_FOR || ts_for_kind_of(s) != TS_FOR_THREAD)
    return false;
  const char *tag = ts_for_thread_tag(s);
  return tag && strcmp(tag, "vthread") != 0;
}

static bool private_enter(void *ctx, ts_stmt *s) {
  private_walk *p = ctx;
  switch (ts_stmt_kind_of(s)) {
  case TS_STMT_FOR:
    private_walk_expr(p, ts_for_min(s));
    private_walk_expr(p, ts_for_extent(s));
    if (is_gpu_thread_loop(s)) {
      if (p->depth < MAX_THREAD_NEST) p->stack[p->depth] = s;
      p->depth++;
    }
    break;
  case TS_STMT_STORE:
    for (int i = 0; i < ts_store_n_indices(s); i++)
      private_walk_expr(p, ts_store_index(s, i));
    private_walk_expr(p, ts_store_value(s));
    add_access(p, ts_store_buffer(s), true);
    break;
  case TS_STMT_IF: private_walk_expr(p, ts_if_cond(s)); break;
  case TS_STMT_EVALUATE: private_walk_expr(p, ts_evaluate_value(s)); break;
  case TS_STMT_LET: private_walk_expr(p, ts_let_stmt_value(s)); break;
  case TS_STMT_ALLOCATE: {
    const ts_buffer *b = ts_allocate_buffer(s);
    if (!strncmp(ts_buffer_scope(b), "shared", 6)) break;
    if (p->n_bufs == p->cap_bufs) {
      int cap = p->cap_bufs ? p->cap_bufs * 2 : 16;
      const ts_buffer **v = realloc(p->bufs, sizeof *v * (size_t)cap);
      if (!v) {
        p->oom = true;
        break;
      }
      p->bufs = v;
      p->cap_bufs = cap;
    }
    p->bufs[p->n_bufs++] = b;
    break;
  }
  default: break;
  }
  return true;
}

static void private_leave(void *ctx, ts_stmt *s) {
  private_walk *p = ctx;
  if (is_gpu_thread_loop(s)) p->depth--;
}

static bool encloses(const thread_access *a, const ts_stmt *loop) {
  for (int i = 0; i < a->n_loops; i++)
    if (a->loops[i] == loop) return true;
  return false;
}

static const char *loop_desc(const ts_stmt *l, char *buf, size_t cap) {
  snprintf(buf, cap, "'%s' (%s)", ts_var_name(ts_for_var(l)),
           ts_for_thread_tag(l));
  return buf;
}

/* TS_OK when every read of a per-thread buffer in the lowered function
 * `low` is made by the threads that wrote it (the rule above), else
 * TS_ESCHEDULE naming the buffer and the loops. */
static int check_private_buffers(const ts_func *low, ts_error *err) {
  private_walk p;
  memset(&p, 0, sizeof p);
  ts_visitor v = {private_enter, private_leave, NULL, &p};
  ts_stmt_walk(ts_func_body(low), &v);
  int rc = TS_OK;
  if (p.oom)
    rc = TS_ERR(err, TS_ENOMEM, "per-thread buffers: out of memory");
  else if (p.too_deep)
    rc = TS_ERR(err, TS_ESCHEDULE,
                "cannot check the per-thread buffers: more than %d nested "
                "thread loops",
                MAX_THREAD_NEST);
  for (int w = 0; w < p.n_acc && !rc; w++) {
    const thread_access *wa = &p.acc[w];
    if (!wa->write) continue;
    for (int r = 0; r < p.n_acc && !rc; r++) {
      const thread_access *ra = &p.acc[r];
      if (ra->write || ra->buf != wa->buf) continue;
      for (int i = 0; i < wa->n_loops && !rc; i++) {
        if (encloses(ra, wa->loops[i])) continue;
        char wl[160], rl[200];
        if (ra->n_loops) {
          char inner[160];
          snprintf(rl, sizeof rl, "read under thread loop %s",
                   loop_desc(ra->loops[ra->n_loops - 1], inner, sizeof inner));
        } else {
          snprintf(rl, sizeof rl, "read outside every thread loop");
        }
        rc = TS_ERR(err, TS_ESCHEDULE,
                    "buffer '%s' (scope \"%s\") is allocated per thread, "
                    "but it is written under thread loop %s and %s, which "
                    "that loop does not enclose: threads would read "
                    "elements other threads wrote into their own copies",
                    ts_buffer_name(wa->buf), ts_buffer_scope(wa->buf),
                    loop_desc(wa->loops[i], wl, sizeof wl), rl);
      }
    }
  }
  free(p.acc);
  free(p.bufs);
  return rc;
}

int ts_verify_gpu(const ts_func *f, const ts_target *t, ts_gpu_usage *usage,
                  ts_error *err) {
  ts_lower_options lo = ts_lower_defaults();
  ts_func *low = ts_lower(f, &lo, err);
  if (!low) return err ? err->code : TS_EINVAL;
  gpu_walk g;
  memset(&g, 0, sizeof g);
  g.u.vthreads = 1;
  g.thread_x = g.thread_y = g.thread_z = 1;
  ts_visitor v = {gpu_enter, NULL, NULL, &g};
  ts_stmt_walk(ts_func_body(low), &v);
  int private_rc = check_private_buffers(low, err);
  ts_func_free(low);
  g.u.threads_per_block = g.thread_x * g.thread_y * g.thread_z;
  g.u.registers = 24 + (g.local_bytes + 3) / 4;
  if (usage) *usage = g.u;
  if (private_rc) return private_rc;
  int64_t max_threads = ts_target_max_threads_per_block(t);
  int64_t max_shared = ts_target_max_shared_memory_per_block(t);
  int64_t max_regs = ts_target_max_registers_per_thread(t);
  if (max_threads > 0 && g.u.threads_per_block > max_threads)
    return TS_ERR(err, TS_ESCHEDULE,
                  "%lld threads per block exceed the target's %lld",
                  (long long)g.u.threads_per_block, (long long)max_threads);
  if (max_threads > 0 && g.u.threads_per_block < 1)
    return TS_ERR(err, TS_ESCHEDULE, "no thread per block");
  if (max_shared > 0 && g.u.shared_bytes > max_shared)
    return TS_ERR(err, TS_ESCHEDULE,
                  "%lld bytes of shared memory exceed the target's %lld",
                  (long long)g.u.shared_bytes, (long long)max_shared);
  if (max_regs > 0 && g.u.registers > max_regs)
    return TS_ERR(err, TS_ESCHEDULE,
                  "an estimated %lld registers per thread exceed the "
                  "target's %lld",
                  (long long)g.u.registers, (long long)max_regs);
  if (g.u.vthreads > 64)
    return TS_ERR(err, TS_ESCHEDULE, "%lld virtual threads exceed 64",
                  (long long)g.u.vthreads);
  return TS_OK;
}

/* ========================================================================
 * The pipeline
 * ======================================================================== */

int ts_postproc_apply(ts_sched *s, const ts_target *t, ts_error *err) {
  const rule_list *rl = rule_list_of(t);
  for (int i = 0; i < rl->n_postprocs; i++) {
    int rc = TS_OK;
    switch (rl->postprocs[i]) {
    case TS_POSTPROC_REWRITE_REDUCTION: rc = rewrite_reduction(s, err); break;
    case TS_POSTPROC_REWRITE_TENSORIZE: rc = rewrite_tensorize(s, err); break;
    case TS_POSTPROC_REWRITE_COOPERATIVE_FETCH:
      rc = rewrite_cooperative_fetch(s, err);
      break;
    case TS_POSTPROC_REWRITE_PARALLEL_VECTORIZE_UNROLL:
      rc = rewrite_pvu(s, rl->parallel_vectorize, err);
      break;
    case TS_POSTPROC_VERIFY_GPU: {
      ts_error verr;
      ts_error_clear(&verr);
      if ((rc = ts_verify_gpu(ts_sched_func(s), t, NULL, &verr)))
        return TS_ERR(err, rc, "postprocessor %s: %s",
                      ts_postproc_name(TS_POSTPROC_VERIFY_GPU), verr.msg);
      break;
    }
    }
    if (rc) return rc;
  }
  return TS_OK;
}
