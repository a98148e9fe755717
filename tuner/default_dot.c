/*
 * default_dot.c — the default schedule of a product with too few rows to
 * pay for a packed copy of its transposed operand: a dense layer of one to
 * seven rows (Y[i, j] = sum_k X[i, k] W[j, k]), attention's scores for one
 * query. Each output is a dot product of two contiguous rows, so the
 * reduction runs along the vector: K in the lanes, a register tile of all
 * the rows by a few columns, each column's row of W loaded once for every
 * row of X, and the lanes combined at the end of the row.
 *
 * Before, such a product had no anchor schedule (the transposed copy does
 * not pay for so few rows) and ran as plain loops: a scalar dot product
 * per output, the rows in parallel (3 rows on 2 cores). `tessera bench
 * --workload W --default --threads 2`, AVX-512 Xeon, two alternating
 * rounds, x the best library, before -> after: dense 2 x 576 x 576
 * 0.61/0.58 -> 1.51/1.59, 3 x 1000 x 2048 0.69/0.71 -> 2.18/2.00,
 * 3 x 997 x 1001 0.67/0.54 -> 2.93/2.51, 2 x 768 x 3072 1.27/1.22 ->
 * 2.07/2.02, batch_matmul 12 x 1 x 181 x 64 (transpose_b) 0.52/0.54 ->
 * 1.36/1.50; one row (bound by reading W) within noise. For an AVX2
 * target (x86-64-v3, the libraries held to AVX2): 2 x 576 x 576 1.24/1.16
 * -> 2.73/3.19, 3 x 1000 x 2048 0.69/0.65 -> 2.28/2.25, 3 x 997 x 1001
 * 0.76/0.56 -> 2.55/2.79.
 *
 * Four to seven rows too (DEFAULT_PACK_MIN_ROWS): against the packed
 * product with W copied at every call, and against it with the copy made
 * once ahead of time, as a compiled model makes it (const=W, hoist.c).
 * Two alternating rounds each, x the best library, packed -> dot:
 * AVX-512, without const=: 4 x 1000 x 2048 0.96/1.13 -> 1.95/2.28,
 * 6 x 576 x 2048 0.97/1.53 -> 2.51/2.90, 7 x 1024 x 1024 1.19/1.38 ->
 * 2.46/2.38, 6 x 333 x 500 0.41/0.45 -> 1.98/1.97; with const=W, in
 * milliseconds, 4 x 1000 x 2048 0.205/0.297 -> 0.187/0.208, 7 x 1024 x
 * 1024 0.115/0.105 -> 0.069/0.097, 5 x 4096 x 1024 0.412/0.377 ->
 * 0.343/0.338, 6 x 333 x 500 0.0109/0.0112 -> 0.0129/0.0117; AVX2
 * target, without: 4 x 1000 x 2048 1.22/1.03 -> 2.44/2.25, 7 x 1024 x
 * 1024 0.96/0.95 -> 1.81/1.72, 5 x 4096 x 1024 1.16/1.13 -> 1.80/1.61;
 * with const=W (ms): 4 x 1000 x 2048 0.290/0.343 -> 0.194/0.187, 7 x
 * 1024 x 1024 0.288/0.300 -> 0.141/0.171, 6 x 333 x 500 0.017/0.016 ->
 * 0.021/0.021 (the one loss). Eight rows (8 x 768 x 768) were a little
 * faster packed with the copy ahead of time (0.051/0.056 against
 * 0.059/0.057 ms) and keep it.
 */
#include "tuner/internal.h"
#include "tuner/rule_framework.h"

#include <stdio.h>

/* The most columns in the register tile: eight dot products of one row
 * already hide the FMA latency, and wider tiles leave fewer tiles for the
 * cores. */
#define DOT_MAX_COLS 8

/* Whether loop l (a reduce loop) indexes the last dimension, and only
 * that, of every input that it indexes, and indexes two of them at least
 * (a dot product of two contiguous rows). */
static bool reduce_runs_along_rows(const ts_stmt *r, const ts_stmt *l) {
  const ts_block *b = ts_realize_block(r);
  const ts_buffer *w = ts_block_write(b, 0)->buffer;
  int uses = 0;
  for (int i = 0; i < ts_block_n_reads(b); i++) {
    const ts_buffer *x = ts_block_read(b, i)->buffer;
    if (x == w) continue;
    int d = read_dim_of_loop(r, x, l);
    if (d == -1) continue;
    if (d != ts_buffer_ndim(x) - 1) return false;
    uses++;
  }
  return uses >= 2;
}

bool default_dot_rows(ts_sched *s, const ts_target *t, const char *name) {
  ts_rv b, loops[MAX_LOOPS];
  int nl = 0;
  if (ts_sched_get_block(s, name, &b) ||
      ts_sched_get_loops(s, b, loops, MAX_LOOPS, &nl) || nl < 2)
    return false;
  const ts_stmt *r = ts_func_find_block(ts_sched_func(s), name);
  const ts_block *blk = r ? ts_realize_block(r) : NULL;
  if (!blk || ts_block_n_writes(blk) != 1) return false;
  /* [outer..., rows, cols, k]: one reduce loop, innermost */
  for (int i = 0; i < nl; i++) {
    const ts_stmt *l = ts_sched_rv_loop(s, loops[i]);
    int want = i == nl - 1 ? BIND_REDUCE : BIND_SPATIAL;
    if (!l || ts_for_kind_of(l) != TS_FOR_SERIAL ||
        (loop_binding(r, l) & ~want) || !loop_binding(r, l))
      return false;
  }
  const ts_stmt *kl = ts_sched_rv_loop(s, loops[nl - 1]);
  const ts_stmt *jl = ts_sched_rv_loop(s, loops[nl - 2]);
  if (!reduce_runs_along_rows(r, kl)) return false;
  /* the operand the columns index (W): its rows read by few rows of the
   * output; more rows pay for packing it (default_pack_transposed) */
  const ts_buffer *wb = NULL;
  for (int i = 0; i < ts_block_n_reads(blk); i++) {
    const ts_buffer *x = ts_block_read(blk, i)->buffer;
    if (x != ts_block_write(blk, 0)->buffer && read_dim_of_loop(r, x, jl) >= 0)
      wb = x;
  }
  int64_t M = 1, N = rv_extent(s, loops[nl - 2]);
  bool has_rows =
      nl >= 3 && wb &&
      read_dim_of_loop(r, wb, ts_sched_rv_loop(s, loops[nl - 3])) == -1;
  if (has_rows) M = rv_extent(s, loops[nl - 3]);
  if (!wb || N < 2 || M < 1 ||
      default_rows_reading(s, r, wb, loops, nl) >= DEFAULT_PACK_MIN_ROWS)
    return false;
  /* K in the lanes: the partial sums [.., rows, cols, lanes] */
  if (vector_rfactor_at(s, t, name, 1, 2, 2, false, true) != TS_OK)
    return false;
  char rf[160];
  snprintf(rf, sizeof rf, "%s_rf", name);
  /* the register tile: all the rows by `cols` columns, within the target's
   * registers with one for each row's vector of X and one spare */
  int regs = ts_target_vector_registers(t);
  if (regs < 8) regs = 16;
  int64_t cap = (regs - M - 2) / M;
  if (cap > DOT_MAX_COLS) cap = DOT_MAX_COLS;
  if (cap < 1) cap = 1;
  int64_t cols = default_divisor_upto(N, cap);
  /* no divisor near the cap (a prime N): a ceil split, its last tile
   * guarded */
  if (2 * cols <= cap) cols = cap < N ? cap : N;
  /* the combining block: [outer..., cols / C, rows, C, lanes] */
  ts_rv fb, fl[MAX_LOOPS], jo[2];
  int nf = 0;
  int64_t f2[2] = {TS_SPLIT_INFER, cols};
  if (ts_sched_get_block(s, name, &fb) ||
      ts_sched_get_loops(s, fb, fl, MAX_LOOPS, &nf) || nf < 3 ||
      ts_sched_split(s, fl[nf - 2], f2, 2, jo))
    return false;
  ts_rv order[MAX_LOOPS];
  int no = 0, nouter = nf - (has_rows ? 3 : 2);
  for (int i = 0; i < nouter; i++) order[no++] = fl[i];
  order[no++] = jo[0];
  if (has_rows) order[no++] = fl[nf - 3];
  order[no++] = jo[1];
  order[no++] = fl[nf - 1];
  ts_rv rb;
  if (ts_sched_reorder(s, order, no) || ts_sched_get_block(s, rf, &rb) ||
      ts_sched_compute_at(s, rb, jo[0]))
    return false;
  /* the partials: [.., ko, rows, C, lanes], zeroed before ko, the rows and
   * columns unrolled into registers, the lanes a vector */
  ts_rv pl[MAX_LOOPS];
  int np = 0;
  if (ts_sched_get_block(s, rf, &rb) ||
      ts_sched_get_loops(s, rb, pl, MAX_LOOPS, &np) || np < nouter + 4)
    return false;
  int first = nouter + 1; /* the loops under the column tile */
  const ts_stmt *rr = ts_func_find_block(ts_sched_func(s), rf);
  ts_rv ko = pl[first], inner[4];
  int ni = 0;
  for (int i = first; i < np; i++) {
    const ts_stmt *l = ts_sched_rv_loop(s, pl[i]);
    if (rr && l && loop_binding(rr, l) == BIND_REDUCE)
      ko = pl[i];
    else if (ni < 3)
      inner[ni++] = pl[i];
  }
  ts_rv po[MAX_LOOPS];
  int npo = 0;
  po[npo++] = ko;
  for (int i = 0; i < ni; i++) po[npo++] = inner[i];
  ts_rv init;
  if (ni < 2 || ts_sched_reorder(s, po, npo) ||
      ts_sched_decompose_reduction(s, rb, ko, &init))
    return false;
  for (int i = 0; i + 1 < ni; i++) ts_sched_unroll(s, inner[i]);
  ts_sched_vectorize(s, inner[ni - 1]);
  const char *in = ts_sched_rv_block_name(s, init);
  char iname[160];
  snprintf(iname, sizeof iname, "%s", in ? in : "");
  if (iname[0]) default_vectorize_inner(s, t, iname);
  /* the column tiles (with the outer loops) shared by the cores */
  ts_rv par[MAX_LOOPS];
  int npar = 0;
  if (ts_sched_get_block(s, name, &fb) ||
      ts_sched_get_loops(s, fb, fl, MAX_LOOPS, &nf))
    return true;
  for (int i = 0; i <= nouter && i < nf; i++)
    if (rv_extent(s, fl[i]) > 1 || i == nouter) par[npar++] = fl[i];
  ts_rv p = par[0];
  if (npar > 1 && ts_sched_fuse(s, par, npar, &p)) p = par[npar - 1];
  ts_sched_parallel(s, p);
  return true;
}
