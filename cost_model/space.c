/*
 * space.c — a small random design space for building cost-model data sets
 * (`tessera costmodel collect`). Not the tuner's design space: it samples
 * broadly, good and bad schedules alike, so the model sees both. Every step
 * goes through the schedule primitives (and sampling instructions), so the
 * recorded trace replays to the same schedule; a step the schedule refuses
 * leaves it unchanged and is skipped. The step choices (whether to tile,
 * which loop order, ...) come from a generator seeded with the same seed,
 * separate from the schedule's own.
 */
#include "cost_model/internal.h"

#include <stdlib.h>
#include <string.h>

#define MAX_BLOCKS 32
#define MAX_BLOCK_LOOPS 24
#define MAX_TILED (3 * MAX_BLOCK_LOOPS)

typedef struct find_var {
  const ts_expr *var;
  bool found;
} find_var;

static void find_var_fn(void *ctx, ts_expr *e) {
  find_var *f = ctx;
  if (e == f->var) f->found = true;
}

/* Whether the loop's var feeds a reduction iter var of the block. */
static bool loop_is_reduce(const ts_stmt *realize, const ts_stmt *loop) {
  ts_block *b = ts_realize_block(realize);
  for (int i = 0; i < ts_block_n_iters(b); i++) {
    if (ts_block_iter_kind(b, i) != TS_ITER_REDUCE) continue;
    find_var f = {ts_for_var(loop), false};
    ts_expr_walk(ts_realize_value(realize, i), find_var_fn, &f);
    if (f.found) return true;
  }
  return false;
}

static bool chance(ts_rng *r, double p) { return ts_rng_unit(r) < p; }

static int64_t loop_extent(const ts_sched *s, ts_rv loop) {
  const ts_stmt *l = ts_sched_rv_loop(s, loop);
  int64_t v = 0;
  if (l) ts_expr_is_const_int(ts_for_extent(l), &v);
  return v;
}

/* Tiles one block's loops and annotates the result. */
static void tile_block(ts_sched *s, ts_rv block, const char *name, ts_rng *r) {
  ts_rv loops[MAX_BLOCK_LOOPS];
  int n = 0;
  if (ts_sched_get_loops(s, block, loops, MAX_BLOCK_LOOPS, &n) || n == 0)
    return;
  const ts_stmt *realize = ts_func_find_block(ts_sched_func(s), name);
  if (!realize) return;
  bool reduce[MAX_BLOCK_LOOPS];
  for (int i = 0; i < n; i++) {
    const ts_stmt *l = ts_sched_rv_loop(s, loops[i]);
    reduce[i] = l && loop_is_reduce(realize, l);
  }
  /* levels: spatial S0 S1 S2 (or S0 S2), reduction R0 R1 */
  ts_rv lv[5][MAX_BLOCK_LOOPS];
  int nl[5] = {0};
  int spatial_levels = chance(r, 0.8) ? 3 : 2;
  bool any_reduce = false;
  for (int i = 0; i < n; i++) {
    if (loop_extent(s, loops[i]) <= 1) continue;
    int levels = reduce[i] ? 2 : spatial_levels;
    ts_rv f[3], parts[3];
    if (ts_sched_sample_perfect_tile(s, loops[i], levels, 64, f)) continue;
    if (ts_sched_split_rv(s, loops[i], f, levels, parts)) continue;
    if (reduce[i]) {
      any_reduce = true;
      lv[3][nl[3]++] = parts[0];
      lv[4][nl[4]++] = parts[1];
    } else if (levels == 3) {
      lv[0][nl[0]++] = parts[0];
      lv[1][nl[1]++] = parts[1];
      lv[2][nl[2]++] = parts[2];
    } else {
      lv[0][nl[0]++] = parts[0];
      lv[2][nl[2]++] = parts[1];
    }
  }
  /* loop order: S0 S1 R0 R1 S2 / S0 R0 S1 R1 S2 / S0 S1 R0 S2 R1 */
  static const int orders[3][5] = {
      {0, 1, 3, 4, 2}, {0, 3, 1, 4, 2}, {0, 1, 3, 2, 4}};
  const int *ord = orders[ts_rng_below(r, 3)];
  ts_rv order[5 * MAX_BLOCK_LOOPS];
  int n_order = 0;
  for (int k = 0; k < 5; k++)
    for (int i = 0; i < nl[ord[k]]; i++) order[n_order++] = lv[ord[k]][i];
  if (n_order >= 2 && chance(r, 0.9)) ts_sched_reorder(s, order, n_order);
  /* decompose the reduction's init out of its loops */
  if (any_reduce && nl[3] && chance(r, 0.4)) {
    ts_rv init;
    if (!ts_sched_decompose_reduction(s, block, lv[3][0], &init) &&
        chance(r, 0.7)) {
      ts_rv il[MAX_TILED];
      int ni = 0;
      if (!ts_sched_get_loops(s, init, il, MAX_TILED, &ni) && ni > 0)
        ts_sched_vectorize(s, il[ni - 1]);
    }
  }
  /* the outer spatial tiles, fused, in parallel */
  ts_rv outer = order[0];
  if (nl[0] >= 2 && ord[0] == 0) {
    ts_rv fused;
    if (!ts_sched_fuse(s, lv[0], nl[0], &fused)) outer = fused;
  }
  if (n_order && chance(r, 0.75)) ts_sched_parallel(s, outer);
  /* innermost: vectorize; second innermost: maybe unroll */
  if (n_order && chance(r, 0.8)) ts_sched_vectorize(s, order[n_order - 1]);
  if (n_order >= 2 && chance(r, 0.3) &&
      loop_extent(s, order[n_order - 2]) <= 16)
    ts_sched_unroll(s, order[n_order - 2]);
  /* auto-unroll step on the outermost loop */
  if (n_order && chance(r, 0.7)) {
    static const int64_t steps[4] = {0, 16, 64, 512};
    static const double probs[4] = {0.25, 0.25, 0.25, 0.25};
    ts_rv step;
    if (!ts_sched_sample_categorical(s, steps, probs, 4, &step)) {
      ts_rv target = ts_sched_rv_loop(s, outer) ? outer : order[0];
      ts_sched_annotate_rv(s, target, TS_ANN_AUTO_UNROLL_MAX_STEP, step);
    }
  }
}

int ts_cm_sample_schedule(const ts_func *f, uint64_t seed, ts_sched **out,
                          ts_error *err) {
  *out = NULL;
  ts_sched *s = NULL;
  int rc = ts_sched_create(f, seed, &s, err);
  if (rc) return rc;
  ts_rng r;
  ts_rng_seed(&r, seed ^ 0x9e3779b97f4a7c15ull);
  /* block names in program order, the root excluded */
  char *names[MAX_BLOCKS];
  int n_names = 0;
  int n_blocks = 0;
  ts_stmt **blocks = ts_func_blocks(ts_sched_func(s), &n_blocks);
  for (int i = 1; i < n_blocks && n_names < MAX_BLOCKS; i++) {
    names[n_names] = strdup(ts_block_name(ts_realize_block(blocks[i])));
    if (names[n_names]) n_names++;
  }
  free(blocks);
  /* consumers first, so producers can move under their loops */
  for (int i = n_names - 1; i >= 0; i--) {
    ts_rv b;
    if (ts_sched_get_block(s, names[i], &b)) continue; /* inlined away */
    ts_rv consumers[MAX_BLOCKS];
    int nc = 0;
    bool producer =
        !ts_sched_get_consumers(s, b, consumers, MAX_BLOCKS, &nc) && nc > 0;
    if (producer && chance(&r, 0.6)) {
      ts_rv loc;
      if (!ts_sched_sample_compute_location(s, b, &loc) &&
          !ts_sched_compute_at(s, b, loc))
        continue;
    }
    tile_block(s, b, names[i], &r);
  }
  for (int i = 0; i < n_names; i++) free(names[i]);
  *out = s;
  return TS_OK;
}
