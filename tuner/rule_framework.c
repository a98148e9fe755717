/*
 * rule_framework.c — the design-space generator's framework: the schedule
 * rules applied block by block (consumers first), each turning one partial
 * design space into one or more (a rule with variants forks the schedule),
 * then the root rules. Every step is a schedule primitive, so a design
 * space is the trace that results; its sampling instructions (tile sizes,
 * unroll step, parallel extent, compute locations) are the choices the
 * search makes. Rules never look at a sampled value: whatever depends on
 * the final loop extents is left to the postprocessors (postproc.c)
 * through annotations.
 *
 * Here: the generator states, the helpers the rule families build on
 * (multi-level tiling by a structure such as "SSRSRS", the fusible
 * elementwise consumer), the two rules every target gets (auto-inline,
 * random compute location), custom rules (a user's trace joined onto the
 * state's trace) and the driver ts_space_generate, which applies the
 * target's rule list (rule_lists.c). The other rules are in rules_cpu.c,
 * rules_gpu.c and rules_tensorize.c, which call only this file
 * (rule_framework.h).
 */
#include "tuner/rule_framework.h"
#include "tir/alloc.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

ts_space_options ts_space_defaults(void) {
  ts_space_options o;
  memset(&o, 0, sizeof o);
  o.max_innermost_factor = 64;
  o.tensorize = true;
  o.cache_write = true;
  o.cache_read = true;
  return o;
}

void ts_design_spaces_free(ts_design_space *spaces, int n) {
  if (!spaces) return;
  for (int i = 0; i < n; i++) ts_trace_free(spaces[i].trace);
  free(spaces);
}

/* ========================================================================
 * Generator states
 * ======================================================================== */

bool state_tiled(const gen_state *g, const char *block) {
  for (int i = 0; i < g->n_tiled; i++)
    if (!strcmp(g->tiled[i], block)) return true;
  return false;
}

void state_mark_tiled(gen_state *g, const char *block) {
  if (g->n_tiled < MAX_BLOCKS && !state_tiled(g, block))
    snprintf(g->tiled[g->n_tiled++], sizeof g->tiled[0], "%s", block);
}

int state_fork(const gen_state *from, gen_state *to, ts_error *err) {
  *to = *from;
  to->s = NULL;
  return ts_sched_fork(from->s, 0x7e55e7a, &to->s, err);
}

void state_clear(gen_state *g) {
  ts_sched_destroy(g->s);
  memset(g, 0, sizeof *g);
}

void state_append_name(gen_state *g, const char *fmt, ...) {
  char part[96];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(part, sizeof part, fmt, ap);
  va_end(ap);
  size_t len = strlen(g->name);
  snprintf(g->name + len, sizeof g->name - len, "%s%s", len ? "; " : "", part);
}

static bool block_exists(const ts_sched *s, const char *name) {
  return ts_func_find_block(ts_sched_func(s), name) != NULL;
}

/* ========================================================================
 * Multi-level tiling and the fusible consumer
 * ======================================================================== */

/* Whether the block is a spatial elementwise consumer (no reduction, reads
 * at most its producer's output at its own iter vars). */
static bool is_elementwise(const ts_stmt *r) {
  const ts_block *b = ts_realize_block(r);
  if (block_is_reduction(b) || ts_block_init(b)) return false;
  const ts_stmt *body = ts_block_body(b);
  return body && ts_stmt_kind_of(body) == TS_STMT_STORE;
}

int tile_block(ts_sched *s, const char *name, const char *structure,
               int max_inner, const ts_rv *inner, int n_inner, tiles *out) {
  return tile_block_ex(s, name, structure, max_inner, inner, n_inner, NULL,
                       out);
}

int tile_block_ex(ts_sched *s, const char *name, const char *structure,
                  int max_inner, const ts_rv *inner, int n_inner,
                  const tile_imperfect *im, tiles *out) {
  memset(out, 0, sizeof *out);
  int nlev = (int)strlen(structure);
  out->n_levels = nlev;
  int ns = 0, nr = 0;
  for (int i = 0; i < nlev; i++) {
    if (structure[i] == 'S')
      ns++;
    else
      nr++;
  }
  ts_rv b, loops[MAX_LOOPS];
  int nl = 0, rc;
  if ((rc = ts_sched_get_block(s, name, &b)) ||
      (rc = ts_sched_get_loops(s, b, loops, MAX_LOOPS, &nl)))
    return rc;
  const ts_stmt *r = ts_func_find_block(ts_sched_func(s), name);
  int binds[MAX_LOOPS];
  for (int i = 0; i < nl; i++) {
    const ts_stmt *l = ts_sched_rv_loop(s, loops[i]);
    binds[i] = l ? loop_binding(r, l) : 0;
    if (binds[i] == (BIND_SPATIAL | BIND_REDUCE)) return TS_ESCHEDULE;
  }
  /* the innermost spatial loop that gets split: the vectorized one */
  int last_spatial = -1;
  for (int i = 0; i < nl; i++) {
    bool kept = false;
    for (int k = 0; k < n_inner; k++)
      kept |= ts_sched_rv_loop(s, inner[k]) == ts_sched_rv_loop(s, loops[i]);
    if (!kept && binds[i] == BIND_SPATIAL && rv_extent(s, loops[i]) > 1)
      last_spatial = i;
  }
  bool any = false;
  ts_rv unit_reduce[MAX_LOOPS];
  int n_unit_reduce = 0;
  for (int i = 0; i < nl; i++) {
    bool kept = false;
    for (int k = 0; k < n_inner; k++)
      kept |= ts_sched_rv_loop(s, inner[k]) == ts_sched_rv_loop(s, loops[i]);
    if (kept) continue;
    int64_t ext = rv_extent(s, loops[i]);
    if (ext <= 1 && binds[i] == BIND_REDUCE && nr > 0) {
      unit_reduce[n_unit_reduce++] = loops[i];
      continue;
    }
    if (ext <= 1 || binds[i] == 0) {
      out->outer[out->n_outer++] = loops[i];
      continue;
    }
    char want = binds[i] == BIND_SPATIAL ? 'S' : 'R';
    int n = want == 'S' ? ns : nr;
    if (n == 0) return TS_ESCHEDULE;
    ts_rv factors[8], parts[8];
    if (n == 1) {
      parts[0] = loops[i];
    } else if (im && want == 'S') {
      bool vec = i == last_spatial;
      int mi = vec || im->max_rows < 1 || im->max_rows > max_inner
                   ? max_inner
                   : im->max_rows;
      int step = vec && im->lanes > 1 ? im->lanes : 1;
      if ((rc = ts_sched_sample_tile(s, loops[i], n, mi, step, factors)) ||
          (rc = ts_sched_split_rv(s, loops[i], factors, n, parts)))
        return rc;
    } else if ((rc = ts_sched_sample_perfect_tile(s, loops[i], n, max_inner,
                                                  factors)) ||
               (rc = ts_sched_split_rv(s, loops[i], factors, n, parts))) {
      return rc;
    }
    int k = 0;
    for (int lv = 0; lv < nlev; lv++)
      if (structure[lv] == want)
        out->level[lv][out->n_level[lv]++] = parts[k++];
    any = true;
  }
  if (!any) return TS_ESCHEDULE;
  /* Reduce loops of one iteration (a 1x1 kernel's rh, rw) open the first R
   * level: above the spatial tiles they would stop the outer spatial loops
   * from forming the parallel chain. */
  if (n_unit_reduce) {
    int lv = (int)(strchr(structure, 'R') - structure);
    memmove(&out->level[lv][n_unit_reduce], &out->level[lv][0],
            sizeof(ts_rv) * (size_t)out->n_level[lv]);
    memcpy(&out->level[lv][0], unit_reduce, sizeof(ts_rv) * n_unit_reduce);
    out->n_level[lv] += n_unit_reduce;
  }
  ts_rv order[MAX_LOOPS * 4];
  int no = 0;
  for (int i = 0; i < out->n_outer; i++) order[no++] = out->outer[i];
  for (int lv = 0; lv < nlev; lv++)
    for (int i = 0; i < out->n_level[lv]; i++) order[no++] = out->level[lv][i];
  for (int k = 0; k < n_inner; k++) order[no++] = inner[k];
  if (no >= 2 && (rc = ts_sched_reorder(s, order, no))) return rc;
  return TS_OK;
}

/* The dimension of region rg that loop l indexes (-1 none, -2 several). */
static int region_dim_of_loop(const ts_stmt *r, const ts_region *rg,
                              const ts_stmt *l) {
  const ts_block *blk = ts_realize_block(r);
  int at = -1;
  for (int d = 0; d < rg->ndim; d++) {
    bool uses = false;
    for (int k = 0; k < ts_block_n_iters(blk) && !uses; k++)
      uses = expr_uses_var(ts_realize_value(r, k), ts_for_var(l)) &&
             expr_uses_var(rg->ranges[d].min, ts_block_iter_var(blk, k));
    if (uses && at >= 0 && at != d) return -2;
    if (uses) at = d;
  }
  return at;
}

int read_dim_of_loop(const ts_stmt *r, const ts_buffer *buffer,
                     const ts_stmt *l) {
  const ts_block *blk = ts_realize_block(r);
  int at = -1;
  for (int i = 0; i < ts_block_n_reads(blk); i++) {
    const ts_region *rg = ts_block_read(blk, i);
    if (rg->buffer != buffer) continue;
    int d = region_dim_of_loop(r, rg, l);
    if (d == -2 || (d >= 0 && at >= 0 && at != d)) return -2;
    if (d >= 0) at = d;
  }
  return at;
}

/* Block `name` when it copies one buffer into another of the same element
 * type (one read, one write, a plain store, no init), with its loops
 * (at least 2) in loops/nl; NULL otherwise. */
static const ts_stmt *copy_block(ts_sched *s, const char *name, ts_rv *loops,
                                 int *nl, const ts_region **wr,
                                 const ts_region **rr) {
  ts_rv b;
  if (ts_sched_get_block(s, name, &b) ||
      ts_sched_get_loops(s, b, loops, MAX_LOOPS, nl) || *nl < 2)
    return NULL;
  const ts_stmt *r = ts_func_find_block(ts_sched_func(s), name);
  if (!r) return NULL;
  const ts_block *blk = ts_realize_block(r);
  if (ts_block_n_writes(blk) != 1 || ts_block_n_reads(blk) != 1 ||
      ts_block_init(blk) ||
      ts_stmt_kind_of(ts_block_body(blk)) != TS_STMT_STORE)
    return NULL;
  const ts_region *w = ts_block_write(blk, 0), *rd = ts_block_read(blk, 0);
  ts_dtype dt = ts_buffer_dtype(w->buffer), st = ts_buffer_dtype(rd->buffer);
  if (w->buffer == rd->buffer || dt.code != st.code || dt.bits != st.bits ||
      dt.code == TS_DT_BOOL)
    return NULL;
  *wr = w;
  *rr = rd;
  return r;
}

/* Whole tiles of each side a ceil split of a transposing copy needs */
#define TRANSPOSE_CEIL_TILES 2

bool tile_transpose(ts_sched *s, const char *name, int max_lanes) {
  ts_rv loops[MAX_LOOPS];
  int nl = 0;
  const ts_region *w, *rd;
  const ts_stmt *r = copy_block(s, name, loops, &nl, &w, &rd);
  if (!r) return false;
  if (w->ndim < 2 || rd->ndim < 2) return false;
  /* the innermost loop: along the last dimension of one side only */
  const ts_stmt *li = ts_sched_rv_loop(s, loops[nl - 1]);
  if (!li || ts_for_kind_of(li) != TS_FOR_SERIAL || ts_for_body(li) != r ||
      loop_binding(r, li) != BIND_SPATIAL)
    return false;
  int wi = region_dim_of_loop(r, w, li), ri = region_dim_of_loop(r, rd, li);
  bool w_last = wi == w->ndim - 1, r_last = ri == rd->ndim - 1;
  if (w_last == r_last || wi < -1 || ri < -1) return false;
  const ts_region *other = w_last ? rd : w;
  /* an enclosing loop of the same perfect chain along the other side's
   * last dimension (and not along this side's) */
  int k = -1;
  for (int i = nl - 2; i >= 0 && k < 0; i--) {
    const ts_stmt *l = ts_sched_rv_loop(s, loops[i]);
    const ts_stmt *inner = ts_sched_rv_loop(s, loops[i + 1]);
    if (!l || ts_for_kind_of(l) != TS_FOR_SERIAL || ts_for_body(l) != inner ||
        loop_binding(r, l) != BIND_SPATIAL)
      break;
    if (region_dim_of_loop(r, other, l) == other->ndim - 1 &&
        region_dim_of_loop(r, w_last ? w : rd, l) !=
            (w_last ? w : rd)->ndim - 1)
      k = i;
  }
  if (k < 0) return false;
  int64_t ek = 0, ei = 0;
  ts_expr_is_const_int(ts_for_extent(ts_sched_rv_loop(s, loops[k])), &ek);
  ts_expr_is_const_int(ts_for_extent(li), &ei);
  int64_t L = 1;
  while (L * 2 <= max_lanes && ek % (L * 2) == 0 && ei % (L * 2) == 0) L *= 2;
  /* Sides no power of two divides (3199 frames by 512 channels): ceil
   * splits by the full width, where each side spans several tiles; the
   * code generator partitions the last tile of each off, so the others
   * run unguarded. A wav2vec2-like encoder's [3199, 512] transposes, 2
   * threads, AVX-512 Xeon: 4.9 -> 0.65 ms; ViT's keys to [1, 12, 64,
   * 197]: 0.14 -> 0.015 ms. */
  if (L < 4 && ek >= 4 * max_lanes && ei >= 4 * max_lanes) L = max_lanes;
  /* Two whole tiles a side are enough where the copy has no more loops
   * than dimensions (batch_matmul 12 x 50 x 50 x 64 with transpose_b, keys
   * of 50 tokens, default schedules, 2 threads, x oneDNN: AVX-512 Xeon
   * 0.35 -> 1.04, AVX2 0.90 -> 1.01). Not under a loop of the product's
   * besides (a copy per panel): an AVX2 dense layer's W of 50 x 512 in
   * two panels of 25, each with a guarded tile, fell 0.95 -> 0.46. */
  if (L < 4 && nl == w->ndim && ek >= TRANSPOSE_CEIL_TILES * max_lanes &&
      ei >= TRANSPOSE_CEIL_TILES * max_lanes)
    L = max_lanes;
  if (L < 4) return false;
  ts_rv pk[2], pi[2];
  int64_t fk[2] = {TS_SPLIT_INFER, L}, fi[2] = {TS_SPLIT_INFER, L};
  if (ts_sched_split(s, loops[k], fk, 2, pk)) return false;
  if (ts_sched_split(s, loops[nl - 1], fi, 2, pi)) return false;
  /* k0 .. (loops between) .. i0, k1, i1; with a partial tile and no
   * loops between, the side of more tiles outermost, so the parallel
   * loop's chunks split the tiles evenly (4 tiles of 50 rows, the last of
   * 2, split 2 + 2 gave one core 32 rows and the other 18; with whole
   * tiles the order stays: a dense layer's 768 x 3072 W reordered so ran
   * 1.25 -> 1.08 x oneDNN) */
  int64_t tk = rv_extent(s, pk[0]), ti = rv_extent(s, pi[0]);
  if (k == nl - 2 && ti > tk && (ek % L || ei % L)) {
    ts_rv order[4] = {pi[0], pk[0], pk[1], pi[1]};
    if (ts_sched_reorder(s, order, 4)) return false;
  } else {
    ts_rv order[2] = {pi[0], pk[1]};
    if (ts_sched_reorder(s, order, 2)) return false;
  }
  if (ts_sched_unroll(s, pk[1]) || ts_sched_vectorize(s, pi[1])) return false;
  return true;
}

/* The row-major offset into region rg's buffer (its mins) where the
 * enclosing loops ls[0, n) are 0 but ls[n - 2] (k) is k and ls[n - 1] (j)
 * is j; false when it does not fold to a constant. */
static bool offset_at(ts_arena *a, const ts_stmt *r, const ts_region *rg,
                      const ts_stmt *const *ls, int n, int64_t k, int64_t j,
                      int64_t *out) {
  const ts_block *blk = ts_realize_block(r);
  ts_node_map *loops = ts_node_map_create(), *iters = ts_node_map_create();
  bool ok = loops && iters;
  for (int i = 0; ok && i < n; i++)
    ts_node_map_put(loops, ts_for_var(ls[i]),
                    ts_index(a, i == n - 2   ? k
                                : i == n - 1 ? j
                                             : 0));
  for (int i = 0; ok && i < ts_block_n_iters(blk); i++) {
    ts_expr *v = ts_expr_substitute(a, ts_realize_value(r, i), loops, NULL);
    int64_t c;
    if (!v || !ts_expr_is_const_int(v, &c)) ok = false;
    if (ok) ts_node_map_put(iters, ts_block_iter_var(blk, i), ts_index(a, c));
  }
  int64_t off = 0;
  for (int d = 0; ok && d < rg->ndim; d++) {
    ts_expr *x = ts_expr_substitute(a, rg->ranges[d].min, iters, NULL);
    int64_t c;
    if (!x || !ts_expr_is_const_int(x, &c)) ok = false;
    off = off * ts_buffer_dim(rg->buffer, d) + c;
  }
  ts_node_map_destroy(loops);
  ts_node_map_destroy(iters);
  *out = off;
  return ok;
}

bool tile_interleave(ts_sched *s, const char *name, int64_t group_bytes,
                     int64_t max_lanes) {
  ts_rv loops[MAX_LOOPS];
  int nl = 0;
  const ts_region *w, *rd;
  const ts_stmt *r = copy_block(s, name, loops, &nl, &w, &rd);
  if (!r) return false;
  ts_dtype dt = ts_buffer_dtype(w->buffer);
  const ts_stmt *lj = ts_sched_rv_loop(s, loops[nl - 1]),
                *lk = ts_sched_rv_loop(s, loops[nl - 2]);
  int64_t ej = 0, ek = 0;
  if (!lj || !lk || ts_for_kind_of(lj) != TS_FOR_SERIAL ||
      ts_for_kind_of(lk) != TS_FOR_SERIAL || ts_for_body(lj) != r ||
      ts_for_body(lk) != lj || loop_binding(r, lj) != BIND_SPATIAL ||
      loop_binding(r, lk) != BIND_SPATIAL ||
      !ts_expr_is_const_int(ts_for_extent(lj), &ej) ||
      !ts_expr_is_const_int(ts_for_extent(lk), &ek))
    return false;
  const ts_stmt *ls[MAX_LOOPS];
  for (int i = 0; i < nl; i++)
    if (!(ls[i] = ts_sched_rv_loop(s, loops[i]))) return false;
  ts_arena *a = ts_arena_create();
  if (!a) return false;
  /* the source contiguous along j; the destination j-stride P and
   * k-stride 1, a group of V columns by P rows filling V P elements */
  int64_t s0, s1, d0, dj, dk, dl;
  bool ok = offset_at(a, r, rd, ls, nl, 0, 0, &s0) &&
            offset_at(a, r, rd, ls, nl, 0, 1, &s1) && s1 - s0 == 1 &&
            offset_at(a, r, w, ls, nl, 0, 0, &d0) &&
            offset_at(a, r, w, ls, nl, 0, 1, &dj) &&
            offset_at(a, r, w, ls, nl, 1, 0, &dk) && dk - d0 == 1;
  int64_t P = ok ? dj - d0 : 0;
  int64_t eb = ts_dtype_elem_bytes(dt);
  int64_t V = P >= 2 && eb > 0 ? group_bytes / (P * eb) : 0;
  if (V > max_lanes) V = max_lanes;
  ok = ok && P >= 2 && P <= 8 && !(P & (P - 1)) && ek % P == 0 && ej > 1;
  /* the widest group (a power of two) whose V columns by P rows fill V P
   * consecutive elements: a tile of the intrinsic narrower than the group
   * (AVX2's 8 columns) ends a group at its edge */
  while (ok && V >= 2 &&
         ((V & (V - 1)) || ej % V ||
          !offset_at(a, r, w, ls, nl, P - 1, V - 1, &dl) ||
          dl - d0 != V * P - 1))
    V /= 2;
  ok = ok && V >= 2;
  ts_arena_destroy(a);
  if (!ok) return false;
  ts_rv pk[2], pj[2];
  int64_t fk[2] = {ek / P, P}, fj[2] = {ej / V, V};
  if (ts_sched_split(s, loops[nl - 2], fk, 2, pk) ||
      ts_sched_split(s, loops[nl - 1], fj, 2, pj))
    return false;
  ts_rv order[2] = {pj[0], pk[1]};
  return !ts_sched_reorder(s, order, 2) && !ts_sched_unroll(s, pk[1]) &&
         !ts_sched_vectorize(s, pj[1]);
}

bool tile_group_copy(ts_sched *s, const char *name, int64_t max_unroll) {
  ts_rv loops[MAX_LOOPS];
  int nl = 0;
  const ts_region *w, *rd;
  const ts_stmt *r = copy_block(s, name, loops, &nl, &w, &rd);
  if (!r) return false;
  const ts_stmt *ls[MAX_LOOPS];
  for (int i = 0; i < nl; i++)
    if (!(ls[i] = ts_sched_rv_loop(s, loops[i])) ||
        ts_for_kind_of(ls[i]) != TS_FOR_SERIAL ||
        loop_binding(r, ls[i]) != BIND_SPATIAL)
      return false;
  int64_t ei = 0;
  if (ts_for_body(ls[nl - 1]) != r ||
      !ts_expr_is_const_int(ts_for_extent(ls[nl - 1]), &ei))
    return false;
  ts_arena *a = ts_arena_create();
  if (!a) return false;
  /* the source and the destination contiguous along the innermost loop
   * for P elements (a power of two), the destination not for 2 P */
  int64_t s0, s1, d0, dp, dq;
  bool ok = offset_at(a, r, rd, ls, nl, 0, 0, &s0) &&
            offset_at(a, r, rd, ls, nl, 0, 1, &s1) && s1 - s0 == 1 &&
            offset_at(a, r, w, ls, nl, 0, 0, &d0);
  int64_t P = 0;
  for (int64_t q = 2; ok && q <= 16 && ei % q == 0; q *= 2)
    if (offset_at(a, r, w, ls, nl, 0, q - 1, &dq) && dq - d0 == q - 1) P = q;
  ok = ok && P >= 2 && P < ei &&
       !(offset_at(a, r, w, ls, nl, 0, P, &dp) && dp - d0 == P);
  /* an enclosing loop along which the destination steps by P (the next
   * column's group) and the source does not step by 1 */
  int lo = -1;
  int64_t eo = 0;
  for (int i = nl - 2; ok && i >= 0 && lo < 0; i--) {
    const ts_stmt *two[MAX_LOOPS];
    int m = 0;
    for (int j = 0; j < nl; j++)
      if (j != i && j != nl - 1) two[m++] = ls[j];
    two[m++] = ls[i];
    two[m++] = ls[nl - 1];
    int64_t dn, sn;
    if (offset_at(a, r, w, two, m, 1, 0, &dn) && dn - d0 == P &&
        offset_at(a, r, rd, two, m, 1, 0, &sn) && sn - s0 != 1 &&
        ts_expr_is_const_int(ts_for_extent(ls[i]), &eo) && eo > 1)
      lo = i;
  }
  ts_arena_destroy(a);
  if (!ok || lo < 0) return false;
  ts_rv pi[2];
  int64_t fi[2] = {ei / P, P};
  if (ts_sched_split(s, loops[nl - 1], fi, 2, pi)) return false;
  ts_rv order[2] = {pi[0], loops[lo]};
  if (ts_sched_reorder(s, order, 2) || ts_sched_vectorize(s, pi[1]))
    return false;
  if (eo <= max_unroll) ts_sched_unroll(s, loops[lo]);
  return true;
}

int cache_read_dim_last(ts_sched *s, ts_rv b, const char *buffer, int dim,
                        ts_rv *out) {
  const ts_buffer *buf = NULL;
  const char *bn = ts_sched_rv_block_name(s, b);
  const ts_stmt *r = bn ? ts_func_find_block(ts_sched_func(s), bn) : NULL;
  for (int i = 0; r && i < ts_block_n_reads(ts_realize_block(r)); i++) {
    const ts_buffer *x = ts_block_read(ts_realize_block(r), i)->buffer;
    if (!strcmp(ts_buffer_name(x), buffer)) buf = x;
  }
  int nd = buf ? ts_buffer_ndim(buf) : 0;
  if (dim < 0 || dim >= nd - 1) return TS_ESCHEDULE;
  /* the map (d0, .., dn) -> (the others in order, d<dim>) */
  char map[256];
  size_t len = 0;
  for (int pass = 0; pass < 2; pass++) {
    len += (size_t)snprintf(map + len, sizeof map - len, pass ? " -> (" : "(");
    for (int d = 0, o = 0; d < nd; d++)
      if (!pass || d != dim)
        len += (size_t)snprintf(map + len, sizeof map - len, "%sd%d",
                                o++ ? ", " : "", d);
    len += (size_t)snprintf(map + len, sizeof map - len, pass ? ", d%d)" : ")",
                            dim);
    if (len >= sizeof map) return TS_ESCHEDULE;
  }
  int rc = ts_sched_cache_read(s, b, buffer, "global", out);
  if (rc) return rc;
  const char *cn = ts_sched_rv_block_name(s, *out);
  const ts_stmt *c = cn ? ts_func_find_block(ts_sched_func(s), cn) : NULL;
  if (!c || ts_block_n_writes(ts_realize_block(c)) != 1) return TS_ESCHEDULE;
  char cbuf[128];
  snprintf(cbuf, sizeof cbuf, "%s",
           ts_buffer_name(ts_block_write(ts_realize_block(c), 0)->buffer));
  return ts_sched_transform_layout(s, *out, cbuf, map);
}

int fusible_consumer(ts_sched *s, ts_rv b, ts_rv *out) {
  ts_rv cons[MAX_BLOCKS];
  int nc = 0;
  if (ts_sched_get_consumers(s, b, cons, MAX_BLOCKS, &nc) || nc != 1) return -1;
  const char *cn = ts_sched_rv_block_name(s, cons[0]);
  const ts_stmt *r = cn ? ts_func_find_block(ts_sched_func(s), cn) : NULL;
  if (!r || !is_elementwise(r)) return -1;
  *out = cons[0];
  return 0;
}

/* ========================================================================
 * The generator
 * ======================================================================== */

/* Replaces state i of the generator by the states in v[0, nv) (nv may be
 * 0: the state is kept). Extra states beyond MAX_STATES are dropped. */
static void replace_state(gen *g, int i, gen_state *v, int nv) {
  if (nv == 0) return;
  state_clear(&g->st[i]);
  g->st[i] = v[0];
  for (int k = 1; k < nv; k++) {
    if (g->n < MAX_STATES)
      g->st[g->n++] = v[k];
    else
      state_clear(&v[k]);
  }
}

/* ---- the rules every list applies ---- */

/* Inlines a spatial producer into its consumers when the schedule allows
 * it. Unless the rule list says otherwise (GPUs) a block computing through
 * if_then_else (padding) stays: on a CPU the condition would run in the
 * consumer's innermost loop. */
bool rule_auto_inline(const gen *g, gen_state *st, const char *name) {
  ts_sched *s = st->s;
  const ts_func *f = ts_sched_func(s);
  const ts_stmt *r = ts_func_find_block(f, name);
  const ts_block *b = ts_realize_block(r);
  if (block_is_reduction(b) || block_writes_param(f, b)) return false;
  if (!g->rules->inline_padding && stmt_uses_if_then_else(ts_block_body(b)))
    return false;
  ts_rv rv, cons[MAX_BLOCKS];
  int nc = 0;
  if (ts_sched_get_block(s, name, &rv) ||
      ts_sched_get_consumers(s, rv, cons, MAX_BLOCKS, &nc) || nc == 0)
    return false;
  return ts_sched_compute_inline(s, rv) == TS_OK;
}

void rule_random_compute_location(gen_state *st, const char *name) {
  ts_sched *s = st->s;
  const ts_func *f = ts_sched_func(s);
  const ts_stmt *r = ts_func_find_block(f, name);
  if (!r || state_tiled(st, name) || block_writes_param(f, ts_realize_block(r)))
    return;
  ts_rv b, cons[MAX_BLOCKS], loc;
  int nc = 0;
  if (ts_sched_get_block(s, name, &b) ||
      ts_sched_get_consumers(s, b, cons, MAX_BLOCKS, &nc) || nc == 0)
    return;
  /* a failed compute_at leaves the sample unused; simplification drops it */
  if (!ts_sched_sample_compute_location(s, b, &loc))
    ts_sched_compute_at(s, b, loc);
}

bool block_needs_tiling(const gen_state *st, const char *name) {
  const ts_stmt *r = ts_func_find_block(ts_sched_func(st->s), name);
  return r && !state_tiled(st, name) &&
         block_is_reduction(ts_realize_block(r)) && block_has_reuse(r);
}

/* ---- the driver ---- */

/* The add-rfactor variant of state i, appended (the original is kept). */
static void apply_rfactor(gen *g, int i, const char *name) {
  gen_state v;
  if (!g->rules->rfactor(g, &g->st[i], name, &v)) return;
  if (g->n < MAX_STATES)
    g->st[g->n++] = v;
  else
    state_clear(&v);
}

/* The variants of the list's tiling rules replacing state i. */
static void apply_tiling(gen *g, int i, const char *name) {
  gen_state v[MAX_STATES];
  int nv = 0;
  for (int k = 0; k < MAX_TILING_RULES && g->rules->tiling[k]; k++) {
    if (nv && g->rules->tiling_first_only) break;
    nv += g->rules->tiling[k](g, &g->st[i], name, v + nv, MAX_STATES - nv);
  }
  replace_state(g, i, v, nv);
}

/* The rules of one block in every state: keep-materialized and auto-inline
 * (or the padding-inlined variant and add-rfactor), then the tiling rules, then
 * a random compute location where the block is still a stage of its own. */
static void apply_block_rules(gen *g, const char *name) {
  const rule_list *rl = g->rules;
  int n0 = g->n;
  for (int i = 0; i < n0; i++) {
    if (!block_exists(g->st[i].s, name)) continue;
    gen_state keep, inl;
    bool kept = rl->keep_materialized &&
                rl->keep_materialized(g, &g->st[i], name, &keep);
    if (rule_auto_inline(g, &g->st[i], name)) {
      /* appended past n0: the inline rule does not see it */
      if (kept) g->st[g->n++] = keep;
      continue;
    }
    if (kept) state_clear(&keep);
    /* padding that stays a stage: also inlined, in a state of its own */
    if (rl->padding_inlined && rl->padding_inlined(g, &g->st[i], name, &inl)) {
      if (g->n < MAX_STATES)
        g->st[g->n++] = inl;
      else
        state_clear(&inl);
    }
    if (rl->rfactor) apply_rfactor(g, i, name);
  }
  n0 = g->n;
  for (int i = 0; i < n0; i++)
    if (block_exists(g->st[i].s, name)) apply_tiling(g, i, name);
  for (int i = 0; i < g->n; i++)
    if (block_exists(g->st[i].s, name))
      rule_random_compute_location(&g->st[i], name);
}

/* ---- custom rules: the user's trace joined onto the state's trace ---- */

/* Renames the handle names of a trace JSON's instructions with a prefix so
 * two traces can be concatenated. */
static void prefix_handles(cJSON *insts, const char *prefix) {
  cJSON *in;
  cJSON_ArrayForEach(in, insts) {
    const char *lists[2] = {"inputs", "outputs"};
    for (int l = 0; l < 2; l++) {
      cJSON *arr = cJSON_GetObjectItemCaseSensitive(in, lists[l]), *x;
      cJSON_ArrayForEach(x, arr) {
        if (!cJSON_IsString(x)) continue;
        char buf[160];
        snprintf(buf, sizeof buf, "%s%s", prefix, x->valuestring);
        cJSON_SetValuestring(x, buf);
      }
    }
  }
}

/* The state's trace followed by `extra`, applied to the unscheduled
 * function: the state's schedule becomes that. */
static int state_append_trace(gen_state *st, const ts_trace *extra,
                              ts_error *err) {
  char *a = ts_trace_to_json(ts_sched_trace(st->s));
  char *b = ts_trace_to_json(extra);
  cJSON *ja = a ? cJSON_Parse(a) : NULL, *jb = b ? cJSON_Parse(b) : NULL;
  free(a);
  free(b);
  int rc = TS_ENOMEM;
  if (!ja || !jb) goto done;
  cJSON *ia = cJSON_GetObjectItemCaseSensitive(ja, "instructions");
  cJSON *ib = cJSON_GetObjectItemCaseSensitive(jb, "instructions");
  cJSON *da = cJSON_GetObjectItemCaseSensitive(ja, "decisions");
  cJSON *db = cJSON_GetObjectItemCaseSensitive(jb, "decisions");
  int base = cJSON_GetArraySize(ia);
  prefix_handles(ib, "u");
  cJSON *x;
  while ((x = cJSON_DetachItemFromArray(ib, 0))) ts_json_add(ia, NULL, x);
  while ((x = cJSON_DetachItemFromArray(db, 0))) {
    cJSON *idx = cJSON_GetArrayItem(x, 0);
    if (cJSON_IsNumber(idx)) cJSON_SetNumberValue(idx, idx->valuedouble + base);
    ts_json_add(da, NULL, x);
  }
  char *text = cJSON_PrintUnformatted(ja);
  ts_trace *joined = NULL;
  ts_sched *s = NULL;
  rc = text ? ts_trace_from_json(text, strlen(text), &joined, err) : TS_ENOMEM;
  free(text);
  if (!rc)
    rc = ts_trace_apply(joined, ts_sched_original(st->s), 0x7e55e7a, &s, err);
  ts_trace_free(joined);
  if (!rc) {
    ts_sched_destroy(st->s);
    st->s = s;
  }
done:
  cJSON_Delete(ja);
  cJSON_Delete(jb);
  if (rc == TS_ENOMEM && err && !err->msg[0])
    TS_ERR(err, TS_ENOMEM, "custom rule: out of memory");
  return rc;
}

int ts_space_generate(const ts_func *f, const ts_target *t,
                      const ts_space_options *opts, ts_design_space **out,
                      int *n, ts_error *err) {
  *out = NULL;
  *n = 0;
  ts_space_options o = opts ? *opts : ts_space_defaults();
  if (o.max_innermost_factor < 1)
    return TS_ERR(err, TS_EINVAL,
                  "design space: max_innermost_factor must be >= 1, got %d",
                  o.max_innermost_factor);
  gen g;
  memset(&g, 0, sizeof g);
  g.t = t;
  g.o = &o;
  g.rules = rule_list_of(t);
  int rc = ts_sched_create(f, 0x7e55e7a, &g.st[0].s, err);
  if (rc) return rc;
  g.n = 1;
  int nn = 0;
  char **names = block_names(ts_sched_func(g.st[0].s), &nn);
  /* custom rules first: their blocks are then left alone */
  for (int c = 0; c < o.n_custom_rules; c++) {
    const ts_custom_rule *cr = &o.custom_rules[c];
    bool known = false;
    for (int i = 0; i < nn; i++) known |= !strcmp(names[i], cr->block);
    if (!known) {
      rc = TS_ERR(err, TS_ENOTFOUND,
                  "custom rule: the workload has no block named '%s'",
                  cr->block);
      goto fail;
    }
    if ((rc = state_append_trace(&g.st[0], cr->trace, err))) {
      char msg[sizeof err->msg];
      snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
      rc = TS_ERR(err, rc, "custom rule for block '%s': %s", cr->block, msg);
      goto fail;
    }
    state_mark_tiled(&g.st[0], cr->block);
    state_append_name(&g.st[0], "%s: custom", cr->block);
  }
  for (int i = nn - 1; i >= 0; i--) {
    bool custom = false;
    for (int c = 0; c < o.n_custom_rules; c++)
      custom |= !strcmp(names[i], o.custom_rules[c].block);
    if (!custom) apply_block_rules(&g, names[i]);
  }
  for (int i = 0; i < g.n; i++) {
    if (g.rules->bind)
      for (int b = 0; b < nn; b++)
        if (block_exists(g.st[i].s, names[b]))
          g.rules->bind(&g, &g.st[i], names[b]);
    if ((rc = g.rules->root_plans(&g, &g.st[i]))) {
      TS_ERR(err, rc, "design space: parallelize-vectorize-unroll: %s",
             ts_sched_errmsg(g.st[i].s));
      goto fail;
    }
  }
  /* an attention task on a CPU: its own schedule with the row tile and
   * the products' widths sampled (default_attention.c), beside what the
   * rules made (whose candidates for two anchors run far slower) */
  ts_sched *as = NULL;
  if (g.rules->parallel_vectorize && o.n_custom_rules == 0 &&
      ts_sched_create(f, 0x7e55e7a, &as, NULL) == TS_OK) {
    default_inline_intermediates(as);
    if (!default_attention(as, t, true)) {
      ts_sched_destroy(as);
      as = NULL;
    }
  }
  int total = g.n + (as != NULL);
  ts_design_space *spaces = calloc((size_t)total, sizeof *spaces);
  if (!spaces) {
    ts_sched_destroy(as);
    rc = TS_ERR(err, TS_ENOMEM, "design space: out of memory");
    goto fail;
  }
  for (int i = 0; i < g.n; i++) {
    spaces[i].trace = ts_trace_simplify(ts_sched_trace(g.st[i].s));
    snprintf(spaces[i].name, sizeof spaces[i].name, "%s",
             g.st[i].name[0] ? g.st[i].name : "default");
    snprintf(spaces[i].intrin, sizeof spaces[i].intrin, "%s", g.st[i].intrin);
  }
  if (as) {
    spaces[g.n].trace = ts_trace_simplify(ts_sched_trace(as));
    snprintf(spaces[g.n].name, sizeof spaces[g.n].name, "attention");
    ts_sched_destroy(as);
  }
  *out = spaces;
  *n = total;
  rc = TS_OK;
fail:
  names_free(names, nn);
  for (int i = 0; i < g.n; i++) state_clear(&g.st[i]);
  return rc;
}
