/*
 * default_reduce.c — the default schedule's reductions without a register
 * tile (default.c calls them): a reduction over a contiguous vector axis
 * with its reduce loops moved outside (a pool over NHWC's channels, the
 * column sums of an int8 product), and row reductions (softmax, layer
 * norm) factored into independent vector accumulators.
 */
#include "tuner/internal.h"
#include "tuner/rule_framework.h"

#include <stdio.h>

/* A reduction whose innermost spatial loop is a contiguous vector axis
 * (a pool over NHWC's channels): the reduce loops moved above it and the
 * init decomposed, so the spatial loop can be vectorized. */
void default_reduce_outside(ts_sched *s, const ts_target *t, const char *name) {
  ts_rv b, loops[MAX_LOOPS];
  int nl = 0;
  if (ts_sched_get_block(s, name, &b) ||
      ts_sched_get_loops(s, b, loops, MAX_LOOPS, &nl) || nl < 2)
    return;
  const ts_stmt *r = ts_func_find_block(ts_sched_func(s), name);
  if (!r || !block_is_reduction(ts_realize_block(r))) return;
  int last = -1, first_red = -1;
  for (int i = 0; i < nl; i++) {
    const ts_stmt *l = ts_sched_rv_loop(s, loops[i]);
    if (!l || ts_for_kind_of(l) != TS_FOR_SERIAL) return;
    int bind = loop_binding(r, l);
    if (bind == (BIND_SPATIAL | BIND_REDUCE)) return;
    if (bind == BIND_SPATIAL && rv_extent(s, loops[i]) > 1) last = i;
    if (bind == BIND_REDUCE && first_red < 0) first_red = i;
  }
  if (last < 0 || first_red < 0) return;
  if (!default_loop_contiguous(r, ts_sched_rv_loop(s, loops[last]))) return;
  /* No other spatial loop for the cores (a column sum, like the sums of
   * B that shift_int8 adds): the contiguous loop in one chunk per core,
   * whole vectors, the chunks outside the reduction, where the parallel
   * loop can take them, where there are enough of them to pay for a
   * parallel loop of their own. The int8 product 232 x 1000 x 512's
   * column sums ran 20 us on one core of the kernel's 240. */
  int64_t others = 1, ext = rv_extent(s, loops[last]), work = 1;
  for (int i = 0; i < nl; i++) {
    work *= rv_extent(s, loops[i]);
    if (i != last &&
        loop_binding(r, ts_sched_rv_loop(s, loops[i])) == BIND_SPATIAL)
      others *= rv_extent(s, loops[i]);
  }
  int64_t nc = ts_target_num_cores(t),
          lanes = default_lanes_of(
              t,
              ts_buffer_dtype(ts_block_write(ts_realize_block(r), 0)->buffer));
  ts_rv chunk = TS_RV_NONE, within = loops[last];
  if (nc > 1 && others < nc && lanes > 0 && ext >= 2 * nc * lanes &&
      work >= 16 * DEFAULT_MIN_PARALLEL_WORK) {
    int64_t per = (ext + nc - 1) / nc;
    per = (per + lanes - 1) / lanes * lanes;
    int64_t f[2] = {TS_SPLIT_INFER, per};
    ts_rv parts[2];
    if (!ts_sched_split(s, loops[last], f, 2, parts)) {
      chunk = parts[0];
      within = parts[1];
    }
  }
  ts_rv order[MAX_LOOPS + 1];
  int no = 0;
  for (int i = 0; i < nl; i++)
    if (i != last && i != first_red)
      order[no++] = loops[i];
    else if (i == first_red) {
      if (chunk != TS_RV_NONE) order[no++] = chunk;
      order[no++] = loops[i];
    }
  order[no++] = within;
  if (ts_sched_reorder(s, order, no)) return;
  ts_rv init;
  if (ts_sched_decompose_reduction(s, b, loops[first_red], &init)) return;
  const char *in = ts_sched_rv_block_name(s, init);
  char init_name[160];
  snprintf(init_name, sizeof init_name, "%s", in ? in : "");
  if (init_name[0]) default_vectorize_inner(s, t, init_name);
}

/* A row reduction without reuse (softmax's row maximum and sum, layer
 * norm's sums): LLVM would keep a NaN-aware maximum one scalar max per
 * element, and vectorizes a sum with one accumulator, so each vector add
 * waits for the one before. The innermost reduce loop is split so the
 * inner part is ROW_ACCUMULATORS vectors and that part factored out
 * (rfactor): independent vector accumulators, then the lanes; the blocks
 * are then placed like any other. A row of fewer than four times that
 * many vectors (or that they do not divide) keeps its sum as LLVM
 * vectorizes it, since the last combine of the lanes would cost more than
 * the chain saves, and its maximum or minimum is factored one vector (or
 * the widest part of one that divides the row) at a time. The partials of
 * a factored row are then themselves combined a vector at a time (a second
 * rfactor of one vector), so the scalar chain at the end of each row is
 * one vector's lanes long. */
#define ROW_ACCUMULATORS 4
static bool reduction_is_minmax(const ts_stmt *r) {
  const ts_stmt *body = ts_block_body(ts_realize_block(r));
  if (!body || ts_stmt_kind_of(body) != TS_STMT_STORE) return false;
  ts_expr_kind k = ts_expr_kind_of(ts_store_value(body));
  return k == TS_EXPR_MAX || k == TS_EXPR_MIN;
}

void default_rfactor_rows(ts_sched *s, const ts_target *t) {
  int n = 0;
  char **names = block_names(ts_sched_func(s), &n);
  if (!names) return;
  for (int i = 0; i < n; i++) {
    const ts_stmt *r = ts_func_find_block(ts_sched_func(s), names[i]);
    if (!r) continue;
    bool minmax = reduction_is_minmax(r);
    if (vector_rfactor(s, t, names[i], ROW_ACCUMULATORS, 4 * ROW_ACCUMULATORS,
                       true, false) == TS_OK) {
      /* the lanes combined a vector at a time too: 4 vector steps and 8
       * scalar ones, not a chain of 32 scalar steps at every row's end
       * (BERT's [1, 12, 128, 128] softmax 0.106 -> 0.090 ms) */
      vector_rfactor(s, t, names[i], 1, 2, true, false);
    } else if (minmax)
      vector_rfactor(s, t, names[i], 1, 2, true, true);
  }
  names_free(names, n);
}
