/*
 * default_pack.c — the default schedule's packed copies of an anchor's
 * inputs (default.c): which input streams and what its copy costs, the
 * streamed input packed once in panels, a
 * transposed input packed with the vector axis last, and A of a product
 * packed into row micro-panels where its rows alias in the L1.
 */
#include "tuner/rule_framework.h"

#include <stdio.h>
#include <string.h>

static int64_t loop_extent(ts_sched *s, ts_rv l) { return rv_extent(s, l); }

/* The one input of the block read through loop lv (the vector axis) and
 * not through lr (the rows): B of a matmul, a conv's weights. NULL when
 * there is not exactly one. *by_outer: whether one of the n loops in
 * `outer` indexes it too. */
const ts_buffer *default_streamed_input(const ts_stmt *rr, const ts_stmt *lv,
                                        const ts_stmt *lr,
                                        const ts_stmt *const *outer, int n,
                                        bool *by_outer) {
  const ts_block *bb = ts_realize_block(rr);
  const ts_buffer *found = NULL;
  int count = 0;
  *by_outer = false;
  for (int i = 0; lv && lr && i < ts_block_n_reads(bb); i++) {
    const ts_region *rg = ts_block_read(bb, i);
    if (rg->buffer == ts_block_write(bb, 0)->buffer) continue;
    bool uv = false, ur = false, uo = false;
    for (int k = 0; k < ts_block_n_iters(bb); k++) {
      ts_expr *iv = ts_block_iter_var(bb, k);
      bool used = false;
      for (int d = 0; d < rg->ndim && !used; d++)
        used = expr_uses_var(rg->ranges[d].min, iv);
      if (!used) continue;
      const ts_expr *val = ts_realize_value(rr, k);
      uv |= expr_uses_var(val, ts_for_var(lv));
      ur |= expr_uses_var(val, ts_for_var(lr));
      for (int o = 0; o < n; o++)
        uo |= outer[o] && expr_uses_var(val, ts_for_var(outer[o]));
    }
    if (uv && !ur) {
      count++;
      found = rg->buffer;
      *by_outer = uo;
    }
  }
  return count == 1 ? found : NULL;
}

/* The bytes of buffer b. */
int64_t default_buffer_bytes(const ts_buffer *b) {
  int64_t n = (int64_t)ts_dtype_elem_bytes(ts_buffer_dtype(b));
  for (int d = 0; d < ts_buffer_ndim(b); d++) n *= ts_buffer_shape(b)[d];
  return n;
}

/* Whether b is a parameter the function declares constant
 * (ts_func_const_params): its packing runs once, ahead of the calls. */
bool default_const_param(ts_sched *s, const ts_buffer *b) {
  const ts_func *f = ts_sched_func(s);
  uint64_t mask = ts_func_const_params(f);
  for (int i = 0; i < ts_func_n_params(f) && i < 64; i++)
    if (ts_func_param(f, i) == b) return mask >> i & 1;
  return false;
}

bool default_is_param(ts_sched *s, const ts_buffer *b) {
  const ts_func *f = ts_sched_func(s);
  for (int i = 0; i < ts_func_n_params(f); i++)
    if (ts_func_param(f, i) == b) return true;
  return false;
}

/* Whether one of the loops order[0 .. vo_at) (above the vector tile vo,
 * whose loop is lv) does not index the streamed input (a conv's image rows
 * above its output-channel tiles): a panel packed at vo would then be
 * packed again, the same, at each of its iterations. */
bool default_repacked_by_outer(ts_sched *s, const ts_stmt *rr,
                               const ts_stmt *lv, const ts_stmt *lr,
                               const ts_rv *order, int vo_at) {
  for (int i = 0; i < vo_at; i++) {
    const ts_stmt *o = ts_sched_rv_loop(s, order[i]);
    bool uo = false;
    if (o && loop_extent(s, order[i]) > 1 &&
        default_streamed_input(rr, lv, lr, &o, 1, &uo) && !uo)
      return true;
  }
  return false;
}

/* The block and buffer names of the copy cr that cache_read made, into blk
 * and buf; returns the copy's rank, or -1 when it is not one block writing
 * one buffer. */
static int copy_names(ts_sched *s, ts_rv cr, char *blk, size_t nblk, char *buf,
                      size_t nbuf) {
  const char *crn = ts_sched_rv_block_name(s, cr);
  const ts_stmt *c = crn ? ts_func_find_block(ts_sched_func(s), crn) : NULL;
  if (!c || ts_block_n_writes(ts_realize_block(c)) != 1) return -1;
  const ts_buffer *w = ts_block_write(ts_realize_block(c), 0)->buffer;
  snprintf(blk, nblk, "%s", crn);
  snprintf(buf, nbuf, "%s", ts_buffer_name(w));
  return ts_buffer_ndim(w);
}

/* The start of an index map over a buffer of rank nd, "(d0, .., dn-1) ->
 * (", into map (cap bytes); its length. */
static size_t map_inputs(char *map, size_t cap, int nd) {
  size_t len = (size_t)snprintf(map, cap, "(");
  for (int d = 0; d < nd && len < cap; d++)
    len += (size_t)snprintf(map + len, cap - len, "%sd%d", d ? ", " : "", d);
  if (len < cap) len += (size_t)snprintf(map + len, cap - len, ") -> (");
  return len;
}

/* The streamed input sb of anchor b copied once, before the anchor, into
 * panels of `cols` along its last dimension (the vector axis):
 * [.., C] -> [C / cols, .., cols], so that each vector tile's panel is
 * contiguous; the copy's loops split to match, its panel rows vectorized.
 * A 1x1 conv 56x56, 96 -> 384 channels, whose 24-channel weight panels
 * were packed again for every image row: 2 threads, AVX2 Zen 3, nine
 * alternating rounds, median 128.5 -> 145.0 GFLOP/s. The copy's block name
 * into out ("" when the input is not of that form: nothing done); false
 * when the schedule refused a step after the copy was made. */
/* The copy cr (a cache_read of rank nd) laid out in panels of `cols`
 * along its last dimension, [.., C] -> [C / cols, .., cols], its loops
 * split to match, the panel index outermost, the panel rows vectorized.
 * The copy's block name into out; false when the schedule refused a step. */
static bool panel_layout(ts_sched *s, ts_rv cr, int nd, int64_t cols, char *out,
                         size_t cap) {
  char map[256], cbuf[128];
  size_t len = map_inputs(map, sizeof map, nd);
  len += (size_t)snprintf(map + len, sizeof map - len, "floordiv(d%d, %lld)",
                          nd - 1, (long long)cols);
  for (int d = 0; d < nd - 1; d++)
    len += (size_t)snprintf(map + len, sizeof map - len, ", d%d", d);
  len += (size_t)snprintf(map + len, sizeof map - len, ", floormod(d%d, %lld))",
                          nd - 1, (long long)cols);
  if (len >= sizeof map) return false;
  ts_rv loops[MAX_LOOPS], parts[2];
  int nl = 0;
  if (copy_names(s, cr, out, cap, cbuf, sizeof cbuf) < 0) return false;
  int64_t f[2] = {TS_SPLIT_INFER, cols};
  if (ts_sched_transform_layout(s, cr, cbuf, map) ||
      ts_sched_get_loops(s, cr, loops, MAX_LOOPS, &nl) || nl < 1 ||
      ts_sched_split(s, loops[nl - 1], f, 2, parts))
    return false;
  /* the panel index outermost: (d_last / cols, d0, .., d_last % cols) */
  ts_rv order[MAX_LOOPS + 1];
  int no = 0;
  order[no++] = parts[0];
  for (int i = 0; i < nl - 1; i++) order[no++] = loops[i];
  order[no++] = parts[1];
  return !ts_sched_reorder(s, order, no) && !ts_sched_vectorize(s, parts[1]);
}

bool default_pack_once(ts_sched *s, ts_rv b, const ts_buffer *sb, int64_t cols,
                       char *out, size_t cap) {
  out[0] = 0;
  int nd = ts_buffer_ndim(sb);
  int64_t last = nd > 0 ? ts_buffer_shape(sb)[nd - 1] : 0;
  if (nd < 2 || cols < 2 || last <= cols || last % cols) return true;
  char bn[128];
  snprintf(bn, sizeof bn, "%s", ts_buffer_name(sb));
  ts_rv cr;
  if (ts_sched_cache_read(s, b, bn, "global", &cr)) return true;
  return panel_layout(s, cr, nd, cols, out, cap);
}

int default_pack_copy_once(ts_sched *s, const char *copy, int64_t cols) {
  ts_rv cr;
  char blk[160], buf[128];
  if (ts_sched_get_block(s, copy, &cr)) return 0;
  int nd = copy_names(s, cr, blk, sizeof blk, buf, sizeof buf);
  const ts_stmt *c = ts_func_find_block(ts_sched_func(s), copy);
  if (nd < 2 || cols < 2 || !c) return 0;
  const ts_buffer *w = ts_block_write(ts_realize_block(c), 0)->buffer;
  int64_t last = ts_buffer_shape(w)[nd - 1];
  if (last <= cols || last % cols) return 0;
  return panel_layout(s, cr, nd, cols, blk, sizeof blk) ? 1 : -1;
}

int64_t default_rows_reading(ts_sched *s, const ts_stmt *r, const ts_buffer *x,
                             const ts_rv *loops, int nl) {
  int64_t reuse = 1;
  for (int i = 0; i < nl; i++) {
    const ts_stmt *l = ts_sched_rv_loop(s, loops[i]);
    if (l && loop_binding(r, l) == BIND_SPATIAL &&
        read_dim_of_loop(r, x, l) == -1)
      reuse *= loop_extent(s, loops[i]);
  }
  return reuse;
}

/* An anchor whose vector axis is contiguous in every access but one read
 * (B of a product with transpose_b: the output's columns index B's rows):
 * that input copied (cache_read) into a buffer whose dimensions are those
 * of the input with the one the vector axis indexes moved last, so the
 * anchor reads it along the vector. The copy's block name into out; false
 * (the schedule unchanged) when the anchor is not of that form. */
bool default_pack_transposed(ts_sched *s, ts_rv b, const ts_stmt *r,
                             const ts_stmt *lv, const ts_rv *loops, int nl,
                             char *out, size_t cap) {
  const ts_block *blk = ts_realize_block(r);
  const ts_buffer *wb = ts_block_write(blk, 0)->buffer, *found = NULL;
  int dim = -1;
  for (int i = 0; i < ts_block_n_reads(blk); i++) {
    const ts_buffer *x = ts_block_read(blk, i)->buffer;
    int d = x == wb ? -1 : read_dim_of_loop(r, x, lv);
    if (d == -1 || d == ts_buffer_ndim(x) - 1 || x == found) continue;
    if (d == -2 || found) return false; /* not a plain transpose */
    found = x;
    dim = d;
  }
  /* the copy pays when each panel is read by several rows: the spatial
   * loops that do not index the input (a matrix-vector product has none,
   * and reads it once as it is; default_dot.c schedules up to 7) */
  char name[128];
  ts_rv cr;
  if (!found ||
      default_rows_reading(s, r, found, loops, nl) < DEFAULT_PACK_MIN_ROWS)
    return false;
  snprintf(name, sizeof name, "%s", ts_buffer_name(found));
  if (cache_read_dim_last(s, b, name, dim, &cr)) return false;
  const char *cn = ts_sched_rv_block_name(s, cr);
  snprintf(out, cap, "%s", cn ? cn : "");
  return cn != NULL;
}

/* The input that the row tiles and the reduction read and the vector axis
 * does not (A of a matmul: [.., M, K]), when it is read plainly: its last
 * dimension indexed by the one reduction loop `red`, the one before by the
 * rows loop, or the other way round (A transposed, [.., K, M]: *trans set),
 * and no window (its size is the product of the extents of the loops that
 * index it). Its name into out ("" when there is none). */
void default_rows_input(ts_sched *s, const ts_stmt *r, const ts_rv *loops,
                        int nl, int rows, int vec, int red, char *out,
                        size_t cap, bool *trans) {
  out[0] = 0;
  *trans = false;
  bool found_trans = false;
  const ts_block *blk = ts_realize_block(r);
  const ts_buffer *wb = ts_block_write(blk, 0)->buffer, *found = NULL;
  const ts_stmt *lr = ts_sched_rv_loop(s, loops[rows]),
                *lk = ts_sched_rv_loop(s, loops[red]),
                *lv = ts_sched_rv_loop(s, loops[vec]);
  if (!lr || !lk || !lv) return;
  for (int i = 0; i < ts_block_n_reads(blk); i++) {
    const ts_buffer *x = ts_block_read(blk, i)->buffer;
    int nd = ts_buffer_ndim(x);
    if (x == wb || x == found || nd < 2) continue;
    int dr = read_dim_of_loop(r, x, lr), dk = read_dim_of_loop(r, x, lk);
    bool tr = dr == nd - 1 && dk == nd - 2;
    if (read_dim_of_loop(r, x, lv) != -1 ||
        !((dr == nd - 2 && dk == nd - 1) || tr))
      continue;
    int64_t covered = 1, elems = 1;
    for (int d = 0; d < nd; d++) elems *= ts_buffer_shape(x)[d];
    for (int l = 0; l < nl; l++) {
      const ts_stmt *lo = ts_sched_rv_loop(s, loops[l]);
      int d = lo ? read_dim_of_loop(r, x, lo) : -2;
      if (d == -2) return;
      if (d >= 0) covered *= loop_extent(s, loops[l]);
    }
    if (covered != elems) continue;
    if (found) return; /* two such inputs: not a matmul */
    found = x;
    found_trans = tr;
  }
  if (found) {
    snprintf(out, cap, "%s", ts_buffer_name(found));
    *trans = found_trans;
  }
}

/* Input `name` ([.., M, K], see rows_input) copied once, before anchor b,
 * into micro-panels of `nrows` rows: [.., M, K] -> [.., ceil(M / nrows),
 * K, nrows], so that a register tile reads its rows' values for one
 * reduction step from one place and the next step's from right after
 * (one stream instead of nrows rows a row apart; rows 4 KiB apart also
 * share the L1 sets). Transposed (`trans`, [.., K, M]) the same panels,
 * whose tile otherwise read one cache line per reduction step a whole
 * row of M apart. The copy runs over (.., M / nrows, K, nrows), its
 * outer loops parallel. False when the schedule refused a step after the
 * copy was made. */
bool default_pack_rows(ts_sched *s, const ts_target *t, ts_rv b,
                       const char *name, int64_t nrows, bool trans) {
  char bn[128], map[256];
  snprintf(bn, sizeof bn, "%s", name);
  ts_rv cr, loops[MAX_LOOPS], parts[2];
  int nl = 0;
  if (ts_sched_cache_read(s, b, bn, "global", &cr)) return true;
  char cname[128], cbuf[128];
  int nd = copy_names(s, cr, cname, sizeof cname, cbuf, sizeof cbuf);
  if (nd < 0) return false;
  size_t len = map_inputs(map, sizeof map, nd);
  for (int d = 0; d < nd - 2; d++)
    len += (size_t)snprintf(map + len, sizeof map - len, "d%d, ", d);
  int dm = trans ? nd - 1 : nd - 2, dk = trans ? nd - 2 : nd - 1;
  len += (size_t)snprintf(map + len, sizeof map - len,
                          "floordiv(d%d, %lld), d%d, floormod(d%d, %lld))", dm,
                          (long long)nrows, dk, dm, (long long)nrows);
  if (len >= sizeof map) return false;
  int64_t f[2] = {TS_SPLIT_INFER, nrows};
  if (ts_sched_transform_layout(s, cr, cbuf, map) ||
      ts_sched_get_loops(s, cr, loops, MAX_LOOPS, &nl) || nl < 2 ||
      ts_sched_split(s, loops[trans ? nl - 1 : nl - 2], f, 2, parts))
    return false;
  ts_rv order[MAX_LOOPS + 1];
  int no = 0;
  for (int i = 0; i < nl - 2; i++) order[no++] = loops[i];
  order[no++] = parts[0];
  order[no++] = loops[trans ? nl - 2 : nl - 1];
  order[no++] = parts[1];
  if (ts_sched_reorder(s, order, no)) return false;
  default_parallel_outer(s, t, cname, default_block_work(s, cname));
  return true;
}
