/*
 * rules_tensorize.c — the tensorization rule (multi-level tiling with a
 * tensor intrinsic) and the GEMM-shape analysis it rests on.
 *
 * A block is a candidate when its body is one multiply-accumulate store
 * C[..., i, j] = C[..., i, j] + A[..., k] * B[...] (each operand possibly
 * cast): j is C's last index and indexes B only, k is a reduce iter that is
 * A's last index and indexes B, i (for intrinsics with rows) is C's
 * second-to-last index and indexes A only. The intrinsic's description is
 * analysed the same way, which gives its tile (M, N, K) and loop order. The
 * variant splits the i, j, k loops so their inner parts are exactly the
 * tile, tiles the outer loops SSRSRS as the plain rule does, keeps the tile
 * loops innermost in the description's order, packs B through a global
 * cache whose layout puts each B tile contiguously in the description's
 * layout (floordiv(j, N), floordiv(k, K), then the description's index of
 * the tile), and marks the block for the rewrite_tensorize postprocessor
 * (which runs after the reduction init is decomposed). The variant is kept
 * only if postprocessing a copy of it succeeds, i.e. the block really
 * matches: dtypes, casts and strides are checked by tensorize itself.
 */
#include "tuner/rule_framework.h"

#include <stdio.h>
#include <string.h>

/* The roles of a GEMM-shaped block. */
typedef struct gemm {
  const ts_stmt *realize;
  ts_expr *a_load, *b_load, *c_index_last, *c_index_prev;
  const ts_buffer *a, *b, *c;
  int iter_i, iter_j, iter_k; /* block iter indices, -1 when absent */
} gemm;

static ts_expr *strip_cast(ts_expr *e) {
  while (e && ts_expr_kind_of(e) == TS_EXPR_CAST) e = ts_expr_operand(e, 0);
  return e;
}

static int iter_of_var(const ts_block *b, const ts_expr *v) {
  if (!v || ts_expr_kind_of(v) != TS_EXPR_VAR) return -1;
  for (int i = 0; i < ts_block_n_iters(b); i++)
    if (ts_block_iter_var(b, i) == v) return i;
  return -1;
}

typedef struct uses_ctx {
  const ts_expr *var;
  bool found;
} uses_ctx;

static void uses_fn(void *ctx, ts_expr *e) {
  uses_ctx *u = ctx;
  if (e == u->var) u->found = true;
}

static bool load_uses(const ts_expr *load, const ts_expr *var) {
  uses_ctx u = {var, false};
  for (int k = 0; k < ts_expr_n_operands(load); k++)
    ts_expr_walk(ts_expr_operand(load, k), uses_fn, &u);
  return u.found;
}

/* Analyses a block realize as C += A * B; want_i asks for a row iter. */
static bool gemm_of(const ts_stmt *r, bool want_i, gemm *g) {
  memset(g, 0, sizeof *g);
  g->realize = r;
  g->iter_i = g->iter_j = g->iter_k = -1;
  const ts_block *b = ts_realize_block(r);
  ts_stmt *body = ts_block_body(b);
  if (body && ts_stmt_kind_of(body) == TS_STMT_SEQ && ts_seq_n(body) == 1)
    body = ts_seq_item(body, 0);
  if (!body || ts_stmt_kind_of(body) != TS_STMT_STORE) return false;
  int nidx = ts_store_n_indices(body);
  if (nidx < 1) return false;
  ts_expr *v = ts_store_value(body);
  if (ts_expr_kind_of(v) != TS_EXPR_ADD) return false;
  ts_expr *acc = ts_expr_operand(v, 0), *mul = ts_expr_operand(v, 1);
  if (ts_expr_kind_of(acc) != TS_EXPR_LOAD) {
    ts_expr *x = acc;
    acc = mul;
    mul = x;
  }
  if (ts_expr_kind_of(acc) != TS_EXPR_LOAD ||
      ts_expr_buffer(acc) != ts_store_buffer(body) ||
      ts_expr_kind_of(mul) != TS_EXPR_MUL)
    return false;
  ts_expr *x = strip_cast(ts_expr_operand(mul, 0));
  ts_expr *y = strip_cast(ts_expr_operand(mul, 1));
  if (ts_expr_kind_of(x) != TS_EXPR_LOAD || ts_expr_kind_of(y) != TS_EXPR_LOAD)
    return false;
  g->c = ts_store_buffer(body);
  g->iter_j = iter_of_var(b, ts_store_index(body, nidx - 1));
  if (g->iter_j < 0 || ts_block_iter_kind(b, g->iter_j) != TS_ITER_SPATIAL)
    return false;
  const ts_expr *vj = ts_block_iter_var(b, g->iter_j);
  bool xj = load_uses(x, vj), yj = load_uses(y, vj);
  if (xj == yj) return false;
  g->a_load = xj ? y : x;
  g->b_load = xj ? x : y;
  g->a = ts_expr_buffer(g->a_load);
  g->b = ts_expr_buffer(g->b_load);
  int na = ts_expr_n_operands(g->a_load);
  if (na < 1) return false;
  g->iter_k = iter_of_var(b, ts_expr_operand(g->a_load, na - 1));
  if (g->iter_k < 0 || ts_block_iter_kind(b, g->iter_k) != TS_ITER_REDUCE ||
      !load_uses(g->b_load, ts_block_iter_var(b, g->iter_k)))
    return false;
  /* the rows: C's index nearest its last that is a spatial iter indexing
   * A and not B (C's second-to-last in a plain product; further out when
   * the columns are blocked, C[i, j / 16, j % 16]) */
  for (int d = nidx - 2; want_i && g->iter_i < 0 && d >= 0; d--) {
    int it = iter_of_var(b, ts_store_index(body, d));
    if (it >= 0 && ts_block_iter_kind(b, it) == TS_ITER_SPATIAL &&
        load_uses(g->a_load, ts_block_iter_var(b, it)) &&
        !load_uses(g->b_load, ts_block_iter_var(b, it)))
      g->iter_i = it;
  }
  return !want_i || g->iter_i >= 0;
}

/* The loop whose var is the value of iter `it`, alone or plus constants
 * (the second part of a partitioned loop, (j + 16) + 480 where a part
 * was partitioned again); NULL if none. */
static const ts_stmt *loop_of_iter(const ts_func *f, const ts_stmt *r, int it) {
  ts_expr *val = ts_realize_value(r, it);
  int64_t off;
  while (ts_expr_kind_of(val) == TS_EXPR_ADD &&
         ts_expr_is_const_int(ts_expr_operand(val, 1), &off))
    val = ts_expr_operand(val, 0);
  if (ts_expr_kind_of(val) != TS_EXPR_VAR) return NULL;
  int n = 0;
  ts_stmt **loops = ts_func_loops_above(f, r, true, &n);
  const ts_stmt *out = NULL;
  for (int i = 0; i < n; i++)
    if (ts_for_var(loops[i]) == val) out = loops[i];
  free(loops);
  return out;
}

/* The description of an intrinsic: tile sizes and loop order. */
typedef struct desc_info {
  char order[4];   /* roles of the desc loops outermost first: "ijk" */
  int64_t tile[3]; /* extents by role: i, j, k (i 1 when absent) */
  ts_expr *b_index[TS_MAX_DIMS]; /* the desc's B index (desc iter vars) */
  int b_ndim;
  const ts_expr *var_j, *var_k;       /* desc iter vars of j and k */
  ts_dtype a_dtype, b_dtype, c_dtype; /* the desc's operand types */
} desc_info;

static bool analyse_desc(const ts_func *desc, desc_info *d) {
  memset(d, 0, sizeof *d);
  int nb = 0;
  ts_stmt **blocks = ts_func_blocks(desc, &nb);
  const ts_stmt *r = nb >= 2 ? blocks[1] : NULL;
  free(blocks);
  if (!r) return false;
  int n = 0;
  ts_stmt **loops = ts_func_loops_above(desc, r, true, &n);
  bool want_i = n == 3;
  gemm g;
  bool ok = (n == 2 || n == 3) && gemm_of(r, want_i, &g);
  const ts_block *b = ts_realize_block(r);
  d->tile[0] = 1;
  for (int i = 0; ok && i < n; i++) {
    int64_t ext = 0;
    ts_expr_is_const_int(ts_for_extent(loops[i]), &ext);
    ts_expr *val = NULL;
    int role = -1;
    const int iters[3] = {g.iter_i, g.iter_j, g.iter_k};
    for (int k = 0; k < 3; k++)
      if (iters[k] >= 0 &&
          (val = ts_realize_value(r, iters[k])) == ts_for_var(loops[i]))
        role = k;
    if (role < 0) {
      ok = false;
      break;
    }
    d->order[i] = "ijk"[role];
    d->tile[role] = ext;
  }
  free(loops);
  if (!ok) return false;
  d->var_j = ts_block_iter_var(b, g.iter_j);
  d->var_k = ts_block_iter_var(b, g.iter_k);
  d->a_dtype = ts_buffer_dtype(g.a);
  d->b_dtype = ts_buffer_dtype(g.b);
  d->c_dtype = ts_buffer_dtype(g.c);
  d->b_ndim = ts_expr_n_operands(g.b_load);
  for (int i = 0; i < d->b_ndim; i++)
    d->b_index[i] = ts_expr_operand(g.b_load, i);
  return true;
}

/* The index map packing B: the dims of B not indexed by j or k in front,
 * then floordiv(j, N), floordiv(k, K), then the description's B index of
 * the tile. Returns false when B's indices are not plain iter vars. */
static bool pack_map(const gemm *g, const desc_info *d, char *out, size_t cap) {
  const ts_block *b = ts_realize_block(g->realize);
  int nd = ts_expr_n_operands(g->b_load);
  int dim_j = -1, dim_k = -1;
  for (int i = 0; i < nd; i++) {
    int it = iter_of_var(b, ts_expr_operand(g->b_load, i));
    if (it == g->iter_j) dim_j = i;
    if (it == g->iter_k) dim_k = i;
  }
  if (dim_j < 0 || dim_k < 0) return false;
  ts_arena *a = ts_arena_create();
  if (!a) return false; /* out of memory (counted) */
  ts_node_map *m = ts_node_map_create();
  char names[TS_MAX_DIMS][16];
  ts_expr *vars[TS_MAX_DIMS];
  for (int i = 0; i < nd; i++) {
    snprintf(names[i], sizeof names[i], "d%d", i);
    vars[i] = ts_var(a, names[i], TS_INDEX);
  }
  ts_node_map_put(m, d->var_j,
                  ts_floormod(a, vars[dim_j], ts_index(a, d->tile[1])));
  ts_node_map_put(m, d->var_k,
                  ts_floormod(a, vars[dim_k], ts_index(a, d->tile[2])));
  size_t len = 0;
  len += (size_t)snprintf(out + len, cap - len, "(");
  for (int i = 0; i < nd; i++)
    len +=
        (size_t)snprintf(out + len, cap - len, "%s%s", i ? ", " : "", names[i]);
  len += (size_t)snprintf(out + len, cap - len, ") -> (");
  bool first = true;
  for (int i = 0; i < nd; i++) {
    if (i == dim_j || i == dim_k) continue;
    len += (size_t)snprintf(out + len, cap - len, "%s%s", first ? "" : ", ",
                            names[i]);
    first = false;
  }
  len += (size_t)snprintf(
      out + len, cap - len, "%sfloordiv(%s, %lld), floordiv(%s, %lld)",
      first ? "" : ", ", names[dim_j], (long long)d->tile[1], names[dim_k],
      (long long)d->tile[2]);
  for (int i = 0; i < d->b_ndim && len < cap; i++) {
    ts_expr *e = ts_expr_substitute(a, d->b_index[i], m, NULL);
    char *text = e ? ts_expr_print(e) : NULL;
    len += (size_t)snprintf(out + len, cap - len, ", %s", text ? text : "?");
    free(text);
  }
  len += (size_t)snprintf(out + len, cap - len, ")");
  ts_node_map_destroy(m);
  ts_arena_destroy(a);
  return len < cap;
}

/* A global cache of B read by block b: *cache its block, buf its buffer's
 * name. */
static int cache_read_b(ts_sched *s, ts_rv b, const char *b_name, ts_rv *cache,
                        char *buf, size_t cap) {
  int rc = ts_sched_cache_read(s, b, b_name, "global", cache);
  if (rc) return rc;
  const char *cache_block = ts_sched_rv_block_name(s, *cache);
  const ts_stmt *cr =
      cache_block ? ts_func_find_block(ts_sched_func(s), cache_block) : NULL;
  if (!cr || ts_block_n_writes(ts_realize_block(cr)) != 1) return TS_ESCHEDULE;
  snprintf(buf, cap, "%s",
           ts_buffer_name(ts_block_write(ts_realize_block(cr), 0)->buffer));
  return TS_OK;
}

/* The rows left over by an AMX variant (block `tail`, fewer than the
 * intrinsic's tile rows): its columns and K split by the intrinsic's
 * tile, the column panels and K blocks outside, the rows, columns and K
 * of one call inside in the description's order, annotated for the
 * intrinsic's row edge "<intrin>_r<R>" (the tensorize postprocessor
 * blockizes and tensorizes it like the main part). */
static int rows_edge(ts_sched *s, const char *tail, const char *intrin,
                     const desc_info *d, const int *iters) {
  const ts_func *f = ts_sched_func(s);
  const ts_stmt *r = ts_func_find_block(f, tail);
  ts_rv b, loops[MAX_LOOPS];
  int nl = 0, rc;
  if (!r || (rc = ts_sched_get_block(s, tail, &b)) ||
      (rc = ts_sched_get_loops(s, b, loops, MAX_LOOPS, &nl)) || nl != 3)
    return TS_ESCHEDULE;
  ts_rv role[3] = {TS_RV_NONE, TS_RV_NONE, TS_RV_NONE};
  for (int k = 0; k < 3; k++) {
    const ts_stmt *l = loop_of_iter(f, r, iters[k]);
    for (int i = 0; l && i < nl; i++)
      if (ts_sched_rv_loop(s, loops[i]) == l) role[k] = loops[i];
    if (role[k] == TS_RV_NONE) return TS_ESCHEDULE;
  }
  int64_t rows = rv_extent(s, role[0]);
  ts_rv jp[2], kp[2];
  int64_t fj[2] = {TS_SPLIT_INFER, d->tile[1]};
  int64_t fk[2] = {TS_SPLIT_INFER, d->tile[2]};
  if ((rc = ts_sched_split(s, role[1], fj, 2, jp)) ||
      (rc = ts_sched_split(s, role[2], fk, 2, kp)))
    return rc;
  ts_rv order[5] = {jp[0], kp[0]};
  for (int i = 0; d->order[i]; i++)
    order[2 + i] = d->order[i] == 'i'   ? role[0]
                   : d->order[i] == 'j' ? jp[1]
                                        : kp[1];
  char edge[64];
  snprintf(edge, sizeof edge, "%s_r%lld", intrin, (long long)rows);
  if ((rc = ts_sched_reorder(s, order, 5)) ||
      (rc = ts_sched_get_block(s, tail, &b)) ||
      (rc = ts_sched_annotate(s, b, ts_ann_string(ANN_TENSORIZE, edge))) ||
      (rc = ts_sched_annotate(s, b, ts_ann_int(ANN_TENSORIZE_LOOPS, 3))))
    return rc;
  return TS_OK;
}

/* Partitions block `name`'s loop over iter `it` at `at`, moved outermost
 * first so that the two parts are nests of their own; *tail: the second
 * part's block. */
static int split_off(ts_sched *s, const char *name, int it, int64_t at,
                     char *tail, size_t cap) {
  const ts_func *f = ts_sched_func(s);
  const ts_stmt *r = ts_func_find_block(f, name);
  const ts_stmt *l = r ? loop_of_iter(f, r, it) : NULL;
  ts_rv b, loops[MAX_LOOPS], order[MAX_LOOPS], parts[2], kids[4];
  int nl = 0, no = 1, nk = 0, rc;
  if (!l || (rc = ts_sched_get_block(s, name, &b)) ||
      (rc = ts_sched_get_loops(s, b, loops, MAX_LOOPS, &nl)))
    return TS_ESCHEDULE;
  order[0] = TS_RV_NONE;
  for (int i = 0; i < nl; i++)
    if (ts_sched_rv_loop(s, loops[i]) == l)
      order[0] = loops[i];
    else
      order[no++] = loops[i];
  if (order[0] == TS_RV_NONE) return TS_ESCHEDULE;
  if ((rc = ts_sched_reorder(s, order, no)) ||
      (rc = ts_sched_partition(s, order[0], at, parts)) ||
      (rc = ts_sched_get_child_blocks(s, parts[1], kids, 4, &nk)))
    return rc;
  const char *tn = nk == 1 ? ts_sched_rv_block_name(s, kids[0]) : NULL;
  if (!tn) return TS_ESCHEDULE;
  snprintf(tail, cap, "%s", tn);
  /* the second part's loops back in the order of the iters they bind
   * (what a default schedule reads as rows, columns and K) */
  f = ts_sched_func(s);
  r = ts_func_find_block(f, tail);
  if (!r || (rc = ts_sched_get_loops(s, kids[0], loops, MAX_LOOPS, &nl)))
    return TS_ESCHEDULE;
  no = 0;
  for (int it2 = 0; it2 < ts_block_n_iters(ts_realize_block(r)); it2++) {
    const ts_stmt *li = loop_of_iter(f, r, it2);
    for (int i = 0; li && i < nl; i++)
      if (ts_sched_rv_loop(s, loops[i]) == li) order[no++] = loops[i];
  }
  if (no != nl) return TS_ESCHEDULE;
  return ts_sched_reorder(s, order, no);
}

/* The largest divisor of n that is at most cap (>= 1). */
static int64_t divisor_at_most(int64_t n, int64_t cap) {
  for (int64_t d = cap < n ? cap : n; d > 1; d--)
    if (n % d == 0) return d;
  return 1;
}

/* The constant extent of block r's loop over iter `it`; 0 when none. */
static int64_t iter_extent(const ts_func *f, const ts_stmt *r, int it) {
  const ts_stmt *l = it >= 0 ? loop_of_iter(f, r, it) : NULL;
  int64_t ext = 0;
  if (!l || !ts_expr_is_const_int(ts_for_extent(l), &ext)) return 0;
  return ext;
}

/* The most tile steps of an AMX call fitted to a product's K (what the
 * listed long forms have: 512 bf16, 1024 int8). */
#define AMX_FIT_STEPS 16
/* The most tile steps of a call whose last step is narrower (whole steps
 * do not divide K): as many as the code generator unrolls, so that a K
 * up to that many steps is one call. */
#define AMX_TAIL_STEPS 32
#define MAX_CANDIDATES 48

/* The intrinsics considered for GEMM block r (roles g): the listed ones,
 * then, per AMX operand kind, the 2 x 2 block whose K is the longest
 * multiple of the tile step, at most AMX_FIT_STEPS steps, that divides
 * the whole steps of r's K, where no listed form has that K (K 576 int8:
 * amx_int8_32x32x576, one call over the whole K and no rest; K 768
 * bf16: amx_bf16_32x32x384 beside the listed 128). Where whole steps do
 * not divide K, the longest divisor of K of at most AMX_TAIL_STEPS steps
 * that is a multiple of the packed group, if it is K or has a quarter of
 * AMX_FIT_STEPS steps or more (K 1000 int8: amx_int8_32x32x1000). Returns
 * the count. */
static int candidate_intrins(const ts_func *f, const ts_stmt *r, const gemm *g,
                             char (*out)[48], int cap) {
  int n = 0;
  for (const char *const *nm = ts_intrin_names(); *nm && n < cap; nm++)
    snprintf(out[n++], sizeof out[0], "%s", *nm);
  int64_t k_ext = iter_extent(f, r, g->iter_k);
  static const struct {
    const char *kind;
    int64_t step;
  } kinds[] = {{"bf16", 32}, {"int8", 64}, {"uint8", 64}};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0] && n < cap; i++) {
    int64_t steps = k_ext / kinds[i].step;
    if (steps < 1) continue;
    int64_t fit = kinds[i].step * divisor_at_most(steps, AMX_FIT_STEPS);
    /* whole steps do not divide K: calls over a divisor of K with a
     * narrower last step, so that no K is left to the plain tiling
     * (int8 874 x 3072 x 1000: 15 steps of 64 and the 40 left plain
     * took 4.16 ms, 0.69 x oneDNN; K 960 alone 1.48 ms) */
    int64_t group = kinds[i].step / 16;
    if (k_ext % kinds[i].step && k_ext % group == 0) {
      int64_t q = divisor_at_most(k_ext / group,
                                  kinds[i].step / group * AMX_TAIL_STEPS);
      if (q * group == k_ext || q * group >= kinds[i].step * AMX_FIT_STEPS / 4)
        fit = q * group;
    }
    char name[48];
    snprintf(name, sizeof name, "amx_%s_32x32x%lld", kinds[i].kind,
             (long long)fit);
    bool listed = false;
    for (int j = 0; j < n; j++) listed = listed || !strcmp(out[j], name);
    if (!listed) snprintf(out[n++], sizeof out[0], "%s", name);
  }
  return n;
}

/* Builds the variant of `name` tensorized onto `intrin` in st (a fork). */
static int tensorize_variant(const gen *g, gen_state *st, const char *name,
                             const char *intrin, const desc_info *d) {
  ts_sched *s = st->s;
  const ts_func *f = ts_sched_func(s);
  const ts_stmt *r = ts_func_find_block(f, name);
  gemm gm;
  if (!r || !gemm_of(r, strchr(d->order, 'i') != NULL, &gm))
    return TS_ESCHEDULE;
  char map[512];
  if (!pack_map(&gm, d, map, sizeof map)) return TS_ESCHEDULE;
  char b_name[128];
  snprintf(b_name, sizeof b_name, "%s", ts_buffer_name(gm.b));
  const int iters[3] = {gm.iter_i, gm.iter_j, gm.iter_k};
  const ts_stmt *role_loop[3] = {NULL, NULL, NULL};
  /* per role, where an extent the intrinsic's tile does not divide is
   * partitioned: the whole tiles, then the rest as a block of its own */
  int64_t at[3] = {0, 0, 0}, exts[3] = {0, 0, 0};
  for (int k = 0; k < 3; k++) {
    if (!strchr(d->order, "ijk"[k])) continue;
    role_loop[k] = loop_of_iter(f, r, iters[k]);
    int64_t ext = 0;
    if (!role_loop[k] ||
        !ts_expr_is_const_int(ts_for_extent(role_loop[k]), &ext))
      return TS_ESCHEDULE;
    exts[k] = ext;
    if (ext % d->tile[k] == 0) continue;
    at[k] = ext - ext % d->tile[k];
    /* the rows left run on the intrinsic's row edge; fewer rows than a
     * tile: the edge alone (-1) */
    if (k == 0 && !at[k]) at[k] = ext > 1 ? -1 : 0;
    if (k == 0 && !at[k]) return TS_ESCHEDULE;
    if (k > 0 && !at[k]) return TS_ESCHEDULE;
  }
  /* K, then the columns: the rest (a K shorter than a tile, columns
   * fewer than a tile) gets the default schedule without the intrinsic,
   * reading B as it is */
  ts_rv b, loops[MAX_LOOPS], cache;
  char cache_buf[128], tail[128];
  int nl = 0, rc;
  for (int k = 2; k >= 1; k--) {
    if (!at[k]) continue;
    if ((rc = split_off(s, name, iters[k], at[k], tail, sizeof tail)))
      return rc;
    /* a rest the default tiling does not take (one column: nothing to
     * vectorize along) stays as it is, correct and small */
    default_tile_block(s, g->t, tail);
    state_mark_tiled(st, tail);
  }
  /* B packed into the intrinsic's layout before the rows are: both parts
   * of partitioned rows read the one packed copy */
  if ((rc = ts_sched_get_block(s, name, &b)) ||
      (rc = cache_read_b(s, b, b_name, &cache, cache_buf, sizeof cache_buf)) ||
      (rc = ts_sched_transform_layout(s, cache, cache_buf, map)))
    return rc;
  if (at[0] < 0) {
    if ((rc = rows_edge(s, name, intrin, d, iters))) return rc;
    state_mark_tiled(st, name);
    return TS_OK;
  }
  if (at[0] > 0) {
    /* one row left: the default tiling (an edge tile of one row is a
     * unit loop, which the tensorize match does not count) */
    if ((rc = split_off(s, name, iters[0], at[0], tail, sizeof tail)) ||
        (rc = at[0] + 1 == exts[0] ? (default_tile_block(s, g->t, tail), TS_OK)
                                   : rows_edge(s, tail, intrin, d, iters)))
      return rc;
    state_mark_tiled(st, tail);
  }
  f = ts_sched_func(s);
  r = ts_func_find_block(f, name);
  for (int k = 0; k < 3; k++)
    if (role_loop[k]) role_loop[k] = loop_of_iter(f, r, iters[k]);
  if ((rc = ts_sched_get_block(s, name, &b)) ||
      (rc = ts_sched_get_loops(s, b, loops, MAX_LOOPS, &nl)))
    return rc;
  ts_rv inner_by_role[3] = {TS_RV_NONE, TS_RV_NONE, TS_RV_NONE};
  for (int k = 0; k < 3; k++) {
    if (!role_loop[k]) continue;
    ts_rv lr = TS_RV_NONE;
    for (int i = 0; i < nl; i++)
      if (ts_sched_rv_loop(s, loops[i]) == role_loop[k]) lr = loops[i];
    if (lr == TS_RV_NONE) return TS_ESCHEDULE;
    int64_t factors[2] = {TS_SPLIT_INFER, d->tile[k]};
    ts_rv parts[2];
    if ((rc = ts_sched_split(s, lr, factors, 2, parts))) return rc;
    inner_by_role[k] = parts[1];
  }
  ts_rv inner[3];
  int n_inner = 0;
  for (int i = 0; d->order[i]; i++)
    inner[n_inner++] = inner_by_role[strchr("ijk", d->order[i]) - "ijk"];
  tiles t;
  if ((rc = tile_block(s, name, "SSRSRS", g->o->max_innermost_factor, inner,
                       n_inner, &t)))
    return rc;
  if ((rc = ts_sched_get_block(s, name, &b)) ||
      (rc = ts_sched_annotate(s, b, ts_ann_string(ANN_TENSORIZE, intrin))) ||
      (rc = ts_sched_annotate(s, b, ts_ann_int(ANN_TENSORIZE_LOOPS, n_inner))))
    return rc;
  state_mark_tiled(st, name);
  return TS_OK;
}

/* Whether loop l feeds an iter of block r that the load indexes by. */
static bool loop_indexes(const ts_stmt *r, const ts_stmt *l,
                         const ts_expr *load) {
  const ts_block *b = ts_realize_block(r);
  for (int k = 0; k < ts_block_n_iters(b); k++)
    if (load_uses(load, ts_block_iter_var(b, k)) &&
        expr_uses_var(ts_realize_value(r, k), ts_for_var(l)))
      return true;
  return false;
}

/* Whether block r of a GEMM shape multiplies a signed int8 A that
 * shift_int8 should make unsigned for target t: VNNI's vpdpbusd takes an
 * unsigned A, and a signed one costs the sums of B and a subtraction in
 * every call (1024^3: 0.76-0.83 x oneDNN with them, 0.92 without). */
static bool wants_shift(const ts_target *t, const gemm *gm) {
  return ts_target_has_feature(t, "avx512vnni") &&
         ts_dtype_eq(ts_buffer_dtype(gm->a), TS_INT8) &&
         ts_dtype_eq(ts_buffer_dtype(gm->c), TS_INT32) &&
         (ts_dtype_eq(ts_buffer_dtype(gm->b), TS_INT8) ||
          ts_dtype_eq(ts_buffer_dtype(gm->b), TS_UINT8));
}

/* shift_int8 on block `name`'s A (see wants_shift); *r and *gm describe the
 * rewritten block after. */
static int shift_a(ts_sched *s, const char *name, const ts_stmt **r, gemm *gm,
                   bool want_i) {
  char a_name[128];
  snprintf(a_name, sizeof a_name, "%s", ts_buffer_name(gm->a));
  ts_rv b;
  int rc;
  if ((rc = ts_sched_get_block(s, name, &b)) ||
      (rc = ts_sched_shift_int8(s, b, a_name, NULL)))
    return rc;
  *r = ts_func_find_block(ts_sched_func(s), name);
  return *r && gemm_of(*r, want_i, gm) ? TS_OK : TS_ESCHEDULE;
}

/* Whether target t runs intrinsic `name` (which needs `feature`) and has
 * nothing better for what it computes. */
static bool intrin_on(const ts_target *t, const char *name,
                      const char *feature) {
  const char *better = ts_intrin_superseded_by(name);
  const char *also = ts_intrin_also_needs(name);
  return feature && ts_target_has_feature(t, feature) &&
         (!also || ts_target_has_feature(t, also)) &&
         !(better && ts_target_has_feature(t, better));
}

/* Whether dot intrinsic description d takes GEMM g's operand types (A's
 * also after shift_int8 on target t). */
static bool dot_types_fit(const ts_target *t, const desc_info *d,
                          const gemm *g) {
  bool a = ts_dtype_eq(d->a_dtype, ts_buffer_dtype(g->a)) ||
           (wants_shift(t, g) && ts_dtype_eq(d->a_dtype, TS_UINT8));
  return a && ts_dtype_eq(d->b_dtype, ts_buffer_dtype(g->b)) &&
         ts_dtype_eq(d->c_dtype, ts_buffer_dtype(g->c));
}

/* The most lanes of a dot intrinsic (no rows) among cands that target t
 * has for GEMM g's operand types; 0 when none. */
static int64_t widest_dot(const ts_target *t, const gemm *g, char (*cands)[48],
                          int nc) {
  int64_t widest = 0;
  for (int ci = 0; ci < nc; ci++) {
    ts_func *desc = NULL, *impl = NULL;
    const char *feature = NULL;
    desc_info d;
    if (ts_intrin_get(cands[ci], &desc, &impl, &feature, NULL)) continue;
    if (intrin_on(t, cands[ci], feature) && analyse_desc(desc, &d) &&
        !strchr(d.order, 'i') && dot_types_fit(t, &d, g) && d.tile[1] > widest)
      widest = d.tile[1];
    ts_func_free(desc);
    ts_func_free(impl);
  }
  return widest;
}

int rule_tensorize(const gen *g, const gen_state *st, const char *block,
                   gen_state *out, int cap) {
  if (!g->o->tensorize || !block_needs_tiling(st, block)) return 0;
  const ts_stmt *r = ts_func_find_block(ts_sched_func(st->s), block);
  gemm probe;
  if (!r || !gemm_of(r, false, &probe)) return 0;
  int n = 0;
  char cands[MAX_CANDIDATES][48];
  int nc =
      candidate_intrins(ts_sched_func(st->s), r, &probe, cands, MAX_CANDIDATES);
  /* narrower dots than the widest the target has for these operands (the
   * 8-lane VNNI forms beside the 16-lane ones) are for the columns those
   * leave, which the default gives them; not design spaces of their own
   * where the widest fits */
  int64_t widest = widest_dot(g->t, &probe, cands, nc);
  int64_t cols = iter_extent(ts_sched_func(st->s), r, probe.iter_j);
  for (int ci = 0; ci < nc && n < cap; ci++) {
    const char *nm = cands[ci];
    ts_func *desc = NULL, *impl = NULL;
    const char *feature = NULL;
    if (ts_intrin_get(nm, &desc, &impl, &feature, NULL)) continue;
    desc_info d;
    bool usable =
        intrin_on(g->t, nm, feature) && analyse_desc(desc, &d) &&
        !(!strchr(d.order, 'i') && d.tile[1] < widest && cols >= widest);
    /* an unsigned-A intrinsic also serves a signed int8 A made unsigned
     * by shift_int8 (a variant of its own) */
    bool shift = usable && wants_shift(g->t, &probe) &&
                 ts_dtype_eq(d.a_dtype, TS_UINT8) &&
                 ts_dtype_eq(d.b_dtype, ts_buffer_dtype(probe.b));
    if (usable) {
      gen_state v;
      if (!state_fork(st, &v, NULL)) {
        const ts_stmt *sr = NULL;
        gemm sg = probe;
        bool ok = (!shift || shift_a(v.s, block, &sr, &sg, false) == TS_OK) &&
                  tensorize_variant(g, &v, block, nm, &d) == TS_OK;
        /* keep it only if it really tensorizes */
        gen_state check;
        if (ok && !state_fork(&v, &check, NULL)) {
          ok = ts_postproc_apply(check.s, g->t, NULL) == TS_OK;
          state_clear(&check);
        } else {
          ok = false;
        }
        if (ok) {
          snprintf(v.intrin, sizeof v.intrin, "%.47s", nm);
          state_append_name(&v, "%s: %stensorize %s", block,
                            shift ? "shift_int8, " : "", nm);
          out[n++] = v;
        } else {
          state_clear(&v);
        }
      }
    }
    ts_func_free(desc);
    ts_func_free(impl);
  }
  return n;
}

/* Bytes of the B block (a K block of a column panel) that every row tile
 * of the panel reads while the accumulators stay in registers. Blocks that
 * fit L1 (16 KB, K 512 of a 32-column panel) stored and reloaded the
 * accumulators once more per K block and measured slower than the whole
 * K of 1024 (32 KB, from L2): 625 against 668 GOP/s for the 1024^3 int8
 * matmul on two Zen 4 cores. With the 64-column panels of the 6 x 4 tile,
 * 128 KB (the whole K of 2048 for int8, of 1024 for bf16; one K block,
 * so the accumulators start in registers) against 64 KB, x oneDNN, two or
 * three rounds: bf16 1024^3 0.94 / 0.99 / 0.94 -> 0.98 / 0.96 / 0.99,
 * bf16 2048^3 0.91 / 0.98 -> 0.98 / 0.96, int8 2048^3 0.90 / 0.95 ->
 * 1.02 / 1.07. */
#define TENSORIZE_B_BLOCK_BYTES (128 * 1024)

/* The register tile's costs for intrinsics that widen their operands in
 * the call (AVX2's multiply-add pairs: A's pair splat and widened per row,
 * B's 16 bytes widened per column, each step): per step a tile of R rows
 * and C columns spends R C multiply-adds and R row_ops + C col_ops
 * instructions around them, and holds R C accumulators, C col_regs
 * vectors of B and one of A. Measured, int8 1024^3 on two Zen 3 cores
 * (tessera bench --default, GOP/s): 2 x 4 186, 1 x 4 174, 4 x 2 156,
 * 2 x 2 150, 8 x 1 93 (what the most-accumulators rule picked); the
 * model ranks them in that order. */
typedef struct widened_costs {
  const char *prefix;
  int64_t row_ops, col_ops, col_regs;
} widened_costs;

static const widened_costs *widened_costs_of(const char *intrin) {
  static const widened_costs table[] = {{"avx2_madd_", 2, 1, 1}};
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (!strncmp(intrin, table[i].prefix, strlen(table[i].prefix)))
      return &table[i];
  return NULL;
}

/* The dot intrinsic (no rows) of the target whose operand types are the
 * block's and whose tiles divide its extents (ext: i, j, k), the most lanes
 * first (a VNNI dot before AVX2's multiply-add pairs), then the longest K
 * tile (fewer stores of the accumulators, and for the signed forms fewer
 * compensation subtractions), except for the forms that widen their
 * operands: there the shortest. (A call of `avx2_madd_s8_8x8` widens four
 * steps of B, and the register tile's calls share them: 2 x 4 calls hold
 * 16 vectors of B beside 8 accumulators in AVX2's 16 registers, and LLVM
 * spilled a third of them. The 8x2 form holds 4. Default schedules for
 * "llvm -mcpu=x86-64-v3" on two Zen 4 cores, GOP/s, three rounds: int8
 * 1024^3 159 / 158 / 155 -> 176 / 176 / 148, 887 x 384 x 512 161 / 162 /
 * 164 -> 182 / 180 / 194; a 3 x 3 conv, a dense layer of 16 rows, a
 * batched product within the noise.) And its B packing map (pack_map). Only
 * the tile sizes and order of *out stay valid: its vars belong to the
 * description, freed here. */
static bool default_intrin(const ts_target *t, const gemm *gm,
                           const int64_t *ext, char *name, size_t cap,
                           desc_info *out, char *map, size_t map_cap) {
  bool found = false;
  for (const char *const *nm = ts_intrin_names(); *nm; nm++) {
    ts_func *desc = NULL, *impl = NULL;
    const char *feature = NULL;
    desc_info d = {0};
    bool ok = !ts_intrin_get(*nm, &desc, &impl, &feature, NULL) &&
              intrin_on(t, *nm, feature) && analyse_desc(desc, &d) &&
              !strchr(d.order, 'i') &&
              ts_dtype_eq(d.a_dtype, ts_buffer_dtype(gm->a)) &&
              ts_dtype_eq(d.b_dtype, ts_buffer_dtype(gm->b)) &&
              ts_dtype_eq(d.c_dtype, ts_buffer_dtype(gm->c)) &&
              ext[1] >= d.tile[1] && ext[2] >= d.tile[2];
    /* tiles that divide first (a rest is partitioned off otherwise) */
    bool divides = ok && ext[1] % d.tile[1] == 0 && ext[2] % d.tile[2] == 0;
    bool found_divides =
        found && ext[1] % out->tile[1] == 0 && ext[2] % out->tile[2] == 0;
    /* the map while the description (whose vars it substitutes) lives */
    bool longer_k = widened_costs_of(*nm) ? d.tile[2] < out->tile[2]
                                          : d.tile[2] > out->tile[2];
    /* the most lanes that fit come first, whether or not they divide:
     * the 8-lane VNNI dots take only columns that 16 lanes do not reach
     * (8 of 1000 columns left by tiles of 16 go to them, the 992 others
     * stay on 16 lanes) */
    if (ok &&
        (!found || d.tile[1] > out->tile[1] ||
         (d.tile[1] == out->tile[1] &&
          ((divides && !found_divides) ||
           (divides == found_divides && longer_k)))) &&
        pack_map(gm, &d, map, map_cap)) {
      *out = d;
      snprintf(name, cap, "%s", *nm);
      found = true;
    }
    ts_func_free(desc);
    ts_func_free(impl);
  }
  return found;
}

/* The columns that whole column tiles leave run on the default tiling
 * without the intrinsic, several times slower per column: int8 232 x 1000
 * x 512 on two AVX-512 VNNI cores, 6 x 4 calls, its 40 columns left took
 * 73 us of the 342, its 960 tiled ones about 240. */
#define PLAIN_COLUMN_COST 7
/* Accumulators that hide the latency of the multiply-adds: two ports,
 * about five cycles each. */
#define LATENCY_ACCUMULATORS 10

/* The register tile of the default: rows x cols calls, their accumulators
 * and each column's B vector (and, for the signed forms, its compensation
 * sums) in the vector registers; the most accumulators, then the most rows
 * (fewer B loads and sums per multiply-add). Rows need not divide the
 * extent: the rows left are partitioned off with the default tiling; nor
 * need the column tiles, where the columns left are a sixteenth or less
 * (125 tiles of 8 for 1000 columns: 8 x 1 calls ran int8 533 x 1000 x 512
 * at 95 GOP/s on two Zen 3 cores, 2 x 4 with 8 columns left at 190-196).
 * Measured, default schedules on two Zen 4 cores, x oneDNN: int8 1024^3
 * 0.91 -> 0.95 (8 x 2 calls -> 6 x 4, 4 rows left), 887 x 384 x 512
 * 0.69 -> 0.92 (1 x 4: 887 is prime), bf16 887 x 384 x 512 0.45 -> 1.00.
 * For the dot forms (not AVX2's widened pairs) the widths are compared by
 * an estimate instead: the tiled columns at the rate their accumulators
 * allow plus the columns left at PLAIN_COLUMN_COST each; the older order
 * decides a tie. */
static void register_tile(const ts_target *t, const char *intrin,
                          const desc_info *d, const int64_t *ext,
                          bool divisor_only, int64_t *rows_out,
                          int64_t *cols_out) {
  int regs = ts_target_vector_registers(t);
  int64_t n_tiles = ext[1] / d->tile[1], rows = 1, cols = 1;
  const widened_costs *wc = widened_costs_of(intrin);
  /* the signed VNNI forms hold the sums of B beside each B vector */
  int64_t per_col = strstr(intrin, "_s8_") && !wc ? 2 : 1;
  double best_cost = -1;
  for (int64_t v = 1; v <= 4; v *= 2) {
    int64_t cap =
        wc ? (regs - 1 - wc->col_regs * v) / v : (regs - 2 - per_col * v) / v;
    /* a width that v tiles do not divide keeps them where the columns
     * left (partitioned off below) are a sixteenth of the panel or less */
    if (cap < 1 || (n_tiles % v) * 16 > n_tiles) continue;
    /* column panels for every core (the parallel loop) before wider tiles */
    if (v > 1 && n_tiles / v < ts_target_num_cores(t)) continue;
    int64_t rr = cap < 8 ? cap : 8;
    if (rr > ext[0]) rr = ext[0];
    /* a divisor of the rows within 3/4 of that saves the partition (a
     * second nest, B packed again for it) */
    int64_t div = divisor_at_most(ext[0], rr);
    if (divisor_only || 4 * div >= 3 * rr) rr = div;
    bool better = rr * v > rows * cols || (rr * v == rows * cols && rr > rows);
    if (wc) { /* the fewest instructions per multiply-add */
      better = rows * cols * (rr * wc->row_ops + v * wc->col_ops) <
               rr * v * (rows * wc->row_ops + cols * wc->col_ops);
    } else {
      /* the tiled columns at the rate their accumulators allow, plus the
       * columns left at the plain rate: 1000 int8 columns (62 tiles of
       * 16) in 6 x 4 calls left 40 columns, in 8 x 2 calls 8, which ran
       * 232 x 1000 x 512 at 0.66 -> 0.87 x oneDNN */
      int64_t left = ext[1] - (n_tiles - n_tiles % v) * d->tile[1];
      double acc = (double)(rr * v);
      double eff =
          acc >= LATENCY_ACCUMULATORS ? 1.0 : acc / LATENCY_ACCUMULATORS;
      double cost =
          (double)(ext[1] - left) / eff + (double)PLAIN_COLUMN_COST * left;
      if (best_cost >= 0 && cost != best_cost) better = cost < best_cost;
      if (better || best_cost < 0) best_cost = cost;
    }
    if (better) {
      rows = rr;
      cols = v;
    }
  }
  *rows_out = rows;
  *cols_out = cols;
}

static bool default_intrin(const ts_target *t, const gemm *gm,
                           const int64_t *ext, char *name, size_t cap,
                           desc_info *out, char *map, size_t map_cap);

/* Whether tensorize_default (the dot intrinsics) takes block `name`: a
 * check that changes nothing. */
static bool dot_default_fits(ts_sched *s, const ts_target *t,
                             const char *name) {
  const ts_func *f = ts_sched_func(s);
  const ts_stmt *r = ts_func_find_block(f, name);
  gemm gm;
  if (!r || !gemm_of(r, true, &gm)) return false;
  const int iters[3] = {gm.iter_i, gm.iter_j, gm.iter_k};
  int64_t ext[3];
  for (int k = 0; k < 3; k++)
    if (!(ext[k] = iter_extent(f, r, iters[k]))) return false;
  desc_info d;
  char intrin[48], map[512];
  return default_intrin(t, &gm, ext, intrin, sizeof intrin, &d, map,
                        sizeof map);
}

/* The rows of the product and the column tiles of one parallel task of
 * the AMX default, at most AMX_BLOCK_CALLS calls each way: a C block of
 * 256 x 256 with the A rows and B panel of one K call (bf16 K 512: 768 KB
 * together) stays in a 2 MB L2. */
#define AMX_BLOCK_CALLS 8

/* The AMX intrinsic of the default for GEMM block r (roles gm, extents
 * ext: i, j, k) on target t: a 2 x 2 block (32 x 32) whose operand types
 * are the block's, the K tile dividing K first, then the longest. False
 * when the target has none. */
static bool amx_intrin(const ts_target *t, const ts_func *f, const ts_stmt *r,
                       const gemm *gm, const int64_t *ext, char *name,
                       size_t cap, desc_info *out, char *map, size_t map_cap) {
  char cands[MAX_CANDIDATES][48];
  int nc = candidate_intrins(f, r, gm, cands, MAX_CANDIDATES);
  bool found = false;
  for (int i = 0; i < nc; i++) {
    ts_func *desc = NULL, *impl = NULL;
    const char *feature = NULL;
    desc_info d = {0};
    bool ok = !ts_intrin_get(cands[i], &desc, &impl, &feature, NULL) &&
              intrin_on(t, cands[i], feature) && analyse_desc(desc, &d) &&
              strchr(d.order, 'i') && d.tile[0] == 32 && d.tile[1] == 32 &&
              ts_dtype_eq(d.a_dtype, ts_buffer_dtype(gm->a)) &&
              ts_dtype_eq(d.b_dtype, ts_buffer_dtype(gm->b)) &&
              ts_dtype_eq(d.c_dtype, ts_buffer_dtype(gm->c)) &&
              ext[2] >= d.tile[2];
    bool divides = ok && ext[2] % d.tile[2] == 0;
    bool found_divides = found && ext[2] % out->tile[2] == 0;
    if (ok &&
        (!found || (divides && !found_divides) ||
         (divides == found_divides && d.tile[2] > out->tile[2])) &&
        pack_map(gm, &d, map, map_cap)) {
      *out = d;
      snprintf(name, cap, "%.47s", cands[i]);
      found = true;
    }
    ts_func_free(desc);
    ts_func_free(impl);
  }
  return found;
}

/* The rows left below the AMX default's 32-row tiles (block `tail`, R of
 * them): on AMX's row edge "<intrin>_r<R>" where the block is a plain
 * product (no batch loops), tensorized here; one row, or a batch, the
 * default tiling. */
static int amx_rows_tail(ts_sched *s, const ts_target *t, const char *tail,
                         const char *intrin, const desc_info *d,
                         const int *iters) {
  ts_rv b, loops[MAX_LOOPS], init;
  int nl = 0, rc;
  if (ts_sched_get_block(s, tail, &b) ||
      ts_sched_get_loops(s, b, loops, MAX_LOOPS, &nl) || nl != 3)
    return default_tile_block(s, t, tail), TS_OK;
  const ts_stmt *r = ts_func_find_block(ts_sched_func(s), tail);
  if (!r || iter_extent(ts_sched_func(s), r, iters[0]) < 2)
    return default_tile_block(s, t, tail), TS_OK;
  if ((rc = rows_edge(s, tail, intrin, d, iters)) ||
      (rc = ts_sched_get_block(s, tail, &b)) ||
      (rc = ts_sched_get_loops(s, b, loops, MAX_LOOPS, &nl)) || nl != 5 ||
      (rc = ts_sched_unannotate(s, b, ANN_TENSORIZE_LOOPS)) ||
      (rc = ts_sched_unannotate(s, b, ANN_TENSORIZE)))
    return rc ? rc : TS_ESCHEDULE;
  char edge[64];
  snprintf(edge, sizeof edge, "%s_r%lld", intrin,
           (long long)rv_extent(s, loops[2]));
  /* the init per column panel, before the K calls */
  if ((rc = ts_sched_decompose_reduction(s, b, loops[1], &init)) ||
      (rc = ts_sched_get_block(s, tail, &b)) ||
      (rc = ts_sched_get_loops(s, b, loops, MAX_LOOPS, &nl)) || nl != 5)
    return rc ? rc : TS_ESCHEDULE;
  return ts_sched_tensorize(s, loops[2], edge);
}

/* The default of a GEMM-shaped block on a target with AMX (the first
 * level of the default schedule there): the 2 x 2 tile block of
 * amx_intrin, B packed once before the product (interleaved copy), the
 * rows the 32-row tiles leave on AMX's row edge, a K or columns the tiles
 * do not divide partitioned off (int8 columns onto the dot intrinsics'
 * default where they take them, the rest the plain tiling); the tiles
 * blocked AMX_BLOCK_CALLS x AMX_BLOCK_CALLS calls per task (fewer where
 * that leaves under four tasks per core), loop order: batch, row blocks,
 * column blocks (fused, parallel), K calls, the block's rows, its
 * columns, one call. Only products whose other loops are spatial (a
 * batch): a conv's kernel taps, fewer than 32 rows or columns, or a
 * target without AMX get TS_ESCHEDULE, before anything changes. */
static int amx_default(ts_sched *s, const ts_target *t, const char *name) {
  const ts_func *f = ts_sched_func(s);
  const ts_stmt *r = ts_func_find_block(f, name);
  gemm gm;
  if (!ts_target_has_feature(t, "amx-tile") || !r || !gemm_of(r, true, &gm))
    return TS_ESCHEDULE;
  const int iters[3] = {gm.iter_i, gm.iter_j, gm.iter_k};
  int64_t ext[3];
  for (int k = 0; k < 3; k++)
    if (!(ext[k] = iter_extent(f, r, iters[k]))) return TS_ESCHEDULE;
  if (ext[0] < 32 || ext[1] < 32) return TS_ESCHEDULE;
  ts_rv b, loops[MAX_LOOPS];
  int nl = 0, rc;
  if (ts_sched_get_block(s, name, &b) ||
      ts_sched_get_loops(s, b, loops, MAX_LOOPS, &nl))
    return TS_ESCHEDULE;
  int roles = 0;
  for (int i = 0; i < nl; i++) {
    const ts_stmt *l = ts_sched_rv_loop(s, loops[i]);
    bool role = false;
    for (int k = 0; k < 3; k++)
      role = role || loop_of_iter(f, r, iters[k]) == l;
    roles += role;
    if (!l || ts_for_kind_of(l) != TS_FOR_SERIAL ||
        (!role && loop_binding(r, l) != BIND_SPATIAL))
      return TS_ESCHEDULE;
  }
  desc_info d;
  char intrin[48], map[512];
  if (roles != 3 || !amx_intrin(t, f, r, &gm, ext, intrin, sizeof intrin, &d,
                                map, sizeof map))
    return TS_ESCHEDULE;
  char b_name[128], tail[128];
  snprintf(b_name, sizeof b_name, "%s", ts_buffer_name(gm.b));
  /* K, then the columns, that the tiles do not divide: the default tiling */
  for (int k = 2; k >= 1; k--) {
    if (ext[k] % d.tile[k] == 0) continue;
    if ((rc = split_off(s, name, iters[k], ext[k] - ext[k] % d.tile[k], tail,
                        sizeof tail)))
      return rc;
    /* int8 columns left: the dot intrinsic's default where it takes them
     * (16 of 20 on VNNI), else, as K's rest and bf16's, the plain tiling.
     * x oneDNN, default schedules, two rounds, VNNI tail / plain: int8
     * 300 x 500 x 256 0.46 / 0.45 against 0.38 / 0.37, 447 x 400 x 576
     * 0.44 / 0.45 against 0.32 / 0.32, 512 x 1010 x 512 0.44 / 0.44
     * against 0.39 / 0.37; bf16 256 x 500 x 768 with the AVX512-BF16
     * tail 0.36 / 0.38 against 0.48 / 0.50 */
    bool int8 = ts_buffer_dtype(gm.b).bits == 8;
    if (k == 1 && int8 && dot_default_fits(s, t, tail)) {
      if ((rc = tensorize_default(s, t, tail, false))) return rc;
    } else {
      default_tile_block(s, t, tail);
    }
  }
  /* B packed once, before both parts of the rows read it */
  ts_rv cache;
  char cache_buf[128];
  if ((rc = ts_sched_get_block(s, name, &b)) ||
      (rc = cache_read_b(s, b, b_name, &cache, cache_buf, sizeof cache_buf)) ||
      (rc = ts_sched_transform_layout(s, cache, cache_buf, map)))
    return rc;
  const char *cn = ts_sched_rv_block_name(s, cache);
  char cname[128];
  snprintf(cname, sizeof cname, "%s", cn ? cn : "");
  /* groups of 128 bytes (a 32-column row of the packed panel; groups of
   * 64 bytes in one fused parallel loop took 45 instructions each, most
   * of them dividing the fused index), the column groups parallel and
   * the k groups a serial loop inside: the 32 x 576 int8 product's
   * default 20 -> 16 us, 448 x 384 x 576 0.58 -> 0.62-0.65 x oneDNN
   * (the k groups parallel instead: 0.58-0.59) */
  ts_rv cl[MAX_LOOPS];
  int ncl = 0;
  if (tile_interleave(s, cname, 128, 64) &&
      !ts_sched_get_loops(s, cache, cl, MAX_LOOPS, &ncl) && ncl == 4) {
    ts_rv jk[2] = {cl[1], cl[0]};
    if (!ts_sched_reorder(s, jk, 2) && rv_extent(s, cl[1]) > 1)
      ts_sched_parallel(s, cl[1]);
  } else if (!ts_sched_get_loops(s, cache, cl, MAX_LOOPS, &ncl) && ncl >= 1 &&
             rv_extent(s, cl[0]) > 1) {
    /* B stored transposed ([N, K], a dense layer's W): groups of 32
     * columns (parallel), then K's packed groups, the 32 columns unrolled
     * and each one's group of k a small vector (tile_group_copy). Int8
     * dense 128 x 768 x 1000: the pack as one vectorized loop per column
     * took 0.6 of the call's 0.68 ms */
    ts_rv nn[2];
    int64_t fn[2] = {TS_SPLIT_INFER, 32};
    if (ncl == 2 && rv_extent(s, cl[0]) >= 32 &&
        !ts_sched_split(s, cl[0], fn, 2, nn)) {
      tile_group_copy(s, cname, 32);
      ts_sched_parallel(s, nn[0]);
    } else {
      ts_sched_parallel(s, cl[0]);
    }
  }
  if (ext[0] % 32 && ((rc = split_off(s, name, iters[0], ext[0] - ext[0] % 32,
                                      tail, sizeof tail)) ||
                      (rc = amx_rows_tail(s, t, tail, intrin, &d, iters))))
    return rc;
  /* the whole tiles */
  f = ts_sched_func(s);
  r = ts_func_find_block(f, name);
  if (!r || ts_sched_get_block(s, name, &b) ||
      ts_sched_get_loops(s, b, loops, MAX_LOOPS, &nl))
    return TS_ESCHEDULE;
  ts_rv role_rv[3] = {TS_RV_NONE, TS_RV_NONE, TS_RV_NONE}, batch[MAX_LOOPS];
  int nb = 0;
  int64_t tasks = 1;
  for (int i = 0; i < nl; i++) {
    const ts_stmt *l = ts_sched_rv_loop(s, loops[i]);
    int role = -1;
    for (int k = 0; k < 3; k++)
      if (loop_of_iter(f, r, iters[k]) == l) role = k;
    if (role >= 0) {
      role_rv[role] = loops[i];
    } else {
      batch[nb++] = loops[i];
      tasks *= rv_extent(s, loops[i]);
    }
  }
  for (int k = 0; k < 3; k++)
    if (role_rv[k] == TS_RV_NONE) return TS_ESCHEDULE;
  int64_t ti = rv_extent(s, role_rv[0]) / 32,
          tj = rv_extent(s, role_rv[1]) / 32;
  int64_t ri = divisor_at_most(ti, AMX_BLOCK_CALLS);
  int64_t rj = divisor_at_most(tj, AMX_BLOCK_CALLS);
  int64_t want = 4 * (int64_t)ts_target_num_cores(t);
  while (tasks * (ti / ri) * (tj / rj) < want && (ri > 1 || rj > 1)) {
    if (rj >= ri)
      rj = divisor_at_most(tj, rj - 1);
    else
      ri = divisor_at_most(ti, ri - 1);
  }
  ts_rv ip[3], jp[3], kp[2];
  int64_t fi[3] = {TS_SPLIT_INFER, ri, 32}, fj[3] = {TS_SPLIT_INFER, rj, 32};
  int64_t fk[2] = {TS_SPLIT_INFER, d.tile[2]};
  if ((rc = ts_sched_split(s, role_rv[0], fi, 3, ip)) ||
      (rc = ts_sched_split(s, role_rv[1], fj, 3, jp)) ||
      (rc = ts_sched_split(s, role_rv[2], fk, 2, kp)))
    return rc;
  ts_rv order[MAX_LOOPS + 8];
  int no = 0;
  for (int i = 0; i < nb; i++) order[no++] = batch[i];
  int n_par = no + 2;
  order[no++] = ip[0];
  order[no++] = jp[0];
  order[no++] = kp[0];
  order[no++] = ip[1];
  order[no++] = jp[1];
  for (int i = 0; d.order[i]; i++)
    order[no++] = d.order[i] == 'i' ? ip[2] : d.order[i] == 'j' ? jp[2] : kp[1];
  if ((rc = ts_sched_reorder(s, order, no))) return rc;
  /* the init per task block, vectorized, before the K calls */
  ts_rv init, cons;
  if ((rc = ts_sched_decompose_reduction(s, b, kp[0], &init))) return rc;
  const char *in = ts_sched_rv_block_name(s, init);
  char init_name[160];
  snprintf(init_name, sizeof init_name, "%s", in ? in : "");
  default_vectorize_inner(s, t, init_name);
  /* the elementwise consumer (a bias) per task block, while it is in L2 */
  if (!fusible_consumer(s, b, &cons))
    ts_sched_reverse_compute_at(s, cons, jp[0]);
  if ((rc = ts_sched_tensorize(s, order[no - 3], intrin))) return rc;
  ts_rv p = order[0];
  if ((rc = ts_sched_fuse(s, order, n_par, &p))) return rc;
  if (rv_extent(s, p) > 1 && (rc = ts_sched_parallel(s, p))) return rc;
  return TS_OK;
}

int tensorize_default(ts_sched *s, const ts_target *t, const char *name,
                      bool amx) {
  if (amx) return amx_default(s, t, name);
  const ts_func *f = ts_sched_func(s);
  const ts_stmt *r = ts_func_find_block(f, name);
  gemm gm;
  if (!r || !gemm_of(r, true, &gm)) return TS_ESCHEDULE;
  int rc;
  if (wants_shift(t, &gm)) {
    if ((rc = shift_a(s, name, &r, &gm, true))) return rc;
    f = ts_sched_func(s);
  }
  char b_name[128];
  snprintf(b_name, sizeof b_name, "%s", ts_buffer_name(gm.b));
  int64_t eb = (int64_t)ts_dtype_elem_bytes(ts_buffer_dtype(gm.b));
  ts_rv b, loops[MAX_LOOPS];
  int nl = 0;
  if ((rc = ts_sched_get_block(s, name, &b)) ||
      (rc = ts_sched_get_loops(s, b, loops, MAX_LOOPS, &nl)))
    return rc;
  /* the i, j, k loops, and only spatial loops besides them */
  const int iters[3] = {gm.iter_i, gm.iter_j, gm.iter_k};
  int at[3] = {-1, -1, -1};
  int64_t ext[3];
  for (int k = 0; k < 3; k++) {
    const ts_stmt *l = loop_of_iter(f, r, iters[k]);
    for (int i = 0; l && i < nl; i++)
      if (ts_sched_rv_loop(s, loops[i]) == l) at[k] = i;
    if (at[k] < 0) return TS_ESCHEDULE;
    ext[k] = rv_extent(s, loops[at[k]]);
  }
  desc_info d = {0};
  char intrin[48], map[512];
  if (!default_intrin(t, &gm, ext, intrin, sizeof intrin, &d, map, sizeof map))
    return TS_ESCHEDULE;
  /* an elementwise consumer (a bias, a requantization) is computed per
   * column panel of the one nest: the rows stay whole there */
  ts_rv cons0;
  bool has_consumer =
      !ts_sched_get_block(s, name, &b) && !fusible_consumer(s, b, &cons0);
  int64_t rows, cols;
  register_tile(t, intrin, &d, ext, has_consumer, &rows, &cols);
  /* K, then columns, that the tiles do not divide, then the rows the
   * register tile does not divide: the rest partitioned off with the
   * default register tiling (as the tuned variants do) */
  bool split = false;
  for (int k = 2; k >= 0; k--) {
    int64_t unit = k == 2 ? d.tile[2] : k == 1 ? d.tile[1] * cols : rows;
    if (ext[k] % unit == 0) continue;
    char tail[128];
    if ((rc = split_off(s, name, iters[k], ext[k] - ext[k] % unit, tail,
                        sizeof tail)))
      return rc;
    /* (K or columns left: the default tiling. Rows left, at least half a
     * register tile of them: tensorized the same way, with their own
     * packed copy of B, instead of plain arithmetic on the intrinsic's
     * dtypes. Default schedules, AVX-512 Xeon, 2 threads, two alternating
     * rounds, before -> after this and ts_rt_alloc's kept blocks: int8
     * 247 x 1000 x 512 (7 rows left) 0.78/0.79 -> 0.87/0.87 x oneDNN,
     * 52 x 1000 x 512 (4 left) 118/115 -> 104/101 us; 128 x 768 x 768,
     * 887 x 384 x 512 and 20 x 768 x 768 within noise. One row left of 9
     * ran several times slower tensorized. Without kept blocks the
     * tensorized rows ran 3-5 x slower on 64- and 128-row products: the
     * second packed copy of B made glibc give its heap back and fault its
     * pages in again at every call.) */
    /* int8 columns left that a dot intrinsic takes (8 of them on the
     * 8-lane VNNI dots, or 16 and more where the register tile spans
     * several tiles of 16): tensorized too, their own default (bf16's
     * stay plain, as on AMX) */
    bool int8 = ts_buffer_dtype(gm.b).bits == 8;
    if ((k == 0 && ext[k] % unit >= (unit + 1) / 2) ||
        (k == 1 && int8 && dot_default_fits(s, t, tail))) {
      if ((rc = tensorize_default(s, t, tail, false))) return rc;
    } else {
      default_tile_block(s, t, tail);
    }
    split = true;
  }
  if (split) {
    f = ts_sched_func(s);
    r = ts_func_find_block(f, name);
    if (!r || (rc = ts_sched_get_block(s, name, &b)) ||
        (rc = ts_sched_get_loops(s, b, loops, MAX_LOOPS, &nl)))
      return TS_ESCHEDULE;
    for (int k = 0; k < 3; k++) {
      const ts_stmt *l = loop_of_iter(f, r, iters[k]);
      at[k] = -1;
      for (int i = 0; l && i < nl; i++)
        if (ts_sched_rv_loop(s, loops[i]) == l) at[k] = i;
      if (at[k] < 0) return TS_ESCHEDULE;
      ext[k] = rv_extent(s, loops[at[k]]);
    }
  }
  /* besides i, j, k: spatial loops (batch, a conv's output rows) and
   * reduce loops (a conv's kernel taps), all serial */
  bool is_red[MAX_LOOPS] = {false};
  for (int i = 0; i < nl && i < MAX_LOOPS; i++) {
    const ts_stmt *l = ts_sched_rv_loop(s, loops[i]);
    if (i == at[0] || i == at[1] || i == at[2]) continue;
    int bind = l ? loop_binding(r, l) : 0;
    if (!l || ts_for_kind_of(l) != TS_FOR_SERIAL ||
        (bind != BIND_SPATIAL && bind != BIND_REDUCE))
      return TS_ESCHEDULE;
    is_red[i] = bind == BIND_REDUCE;
  }
  /* K blocks whose B block (K block x the tile's columns) is at most
   * TENSORIZE_B_BLOCK_BYTES */
  int64_t k_tiles = ext[2] / d.tile[2];
  int64_t kc = divisor_at_most(
      k_tiles, TENSORIZE_B_BLOCK_BYTES / (d.tile[2] * d.tile[1] * cols * eb));
  ts_rv ip[2], jp[3], kp[3];
  int64_t fi[2] = {TS_SPLIT_INFER, rows};
  int64_t fj[3] = {TS_SPLIT_INFER, cols, d.tile[1]};
  int64_t fk[3] = {TS_SPLIT_INFER, kc, d.tile[2]};
  if ((rc = ts_sched_split(s, loops[at[0]], fi, 2, ip)) ||
      (rc = ts_sched_split(s, loops[at[1]], fj, 3, jp)) ||
      (rc = ts_sched_split(s, loops[at[2]], fk, 3, kp)))
    return rc;
  /* outer spatial loops, column panels, K blocks, row tiles, K tiles in
   * the block, the register tile (rows, columns), the intrinsic's tile in
   * its description's order */
  ts_rv order[MAX_LOOPS + 8];
  int no = 0;
  /* the spatial loops that index B (a batch) outside the column panels,
   * where B is packed; those that do not (a conv's output rows) inside,
   * so each panel is packed once, not once per row */
  bool b_outer[MAX_LOOPS] = {false};
  for (int i = 0; i < nl && i < MAX_LOOPS; i++) {
    const ts_stmt *l = ts_sched_rv_loop(s, loops[i]);
    b_outer[i] = i != at[0] && i != at[1] && i != at[2] && !is_red[i] && l &&
                 loop_indexes(r, l, gm.b_load);
  }
  for (int i = 0; i < nl; i++)
    if (b_outer[i]) order[no++] = loops[i];
  int n_par = no + 1;
  /* one K block: its loop (extent 1) inside the row tiles, so that the
   * init goes per register tile, right before the K loop, where LLVM
   * keeps the accumulators in registers from zero instead of writing
   * the panel of C first and reading it back */
  bool one_kblock = kc == k_tiles;
  order[no++] = jp[0];
  for (int i = 0; i < nl; i++)
    if (i != at[0] && i != at[1] && i != at[2] && !is_red[i] && !b_outer[i])
      order[no++] = loops[i];
  if (!one_kblock) order[no++] = kp[0];
  order[no++] = ip[0];
  if (one_kblock) order[no++] = kp[0];
  /* the other reduce loops (kernel taps) around the K tiles */
  for (int i = 0; i < nl; i++)
    if (is_red[i]) order[no++] = loops[i];
  order[no++] = kp[1];
  order[no++] = ip[1];
  order[no++] = jp[1];
  for (int i = 0; d.order[i]; i++)
    order[no++] = d.order[i] == 'j' ? jp[2] : kp[2];
  if ((rc = ts_sched_reorder(s, order, no))) return rc;
  /* Fewer column panels than cores (a product of few columns, or the
   * columns a wider tile left: 8 of 1000) and row tiles right inside
   * them: the row tiles are the parallel loop, inside the panel's (where
   * its part of B is packed). Before, the 8 columns left of int8 247 x
   * 1000 x 512 ran on one core. */
  int64_t cores = ts_target_num_cores(t);
  bool rows_parallel = n_par == 1 && one_kblock && order[1] == ip[0] &&
                       rv_extent(s, jp[0]) < cores &&
                       rv_extent(s, ip[0]) >= cores;
  /* B packed once per column panel, in the panel's loop, into the layout
   * that makes each intrinsic's B tile contiguous */
  ts_rv cache;
  char cache_buf[128];
  if ((rc = cache_read_b(s, b, b_name, &cache, cache_buf, sizeof cache_buf)) ||
      (rc = ts_sched_compute_at(s, cache, jp[0])) ||
      (rc = ts_sched_transform_layout(s, cache, cache_buf, map)))
    return rc;
  ts_rv cl[MAX_LOOPS];
  int ncl = 0;
  const char *cache_name = ts_sched_rv_block_name(s, cache);
  char cname[128];
  snprintf(cname, sizeof cname, "%s", cache_name ? cache_name : "");
  if (!ts_sched_get_loops(s, cache, cl, MAX_LOOPS, &ncl) && ncl > n_par &&
      !(ncl >= n_par + 2 &&
        (tile_interleave(s, cname, 64, 64) || tile_group_copy(s, cname, 32))) &&
      rv_extent(s, cl[ncl - 1]) <= 64)
    ts_sched_vectorize(s, cl[ncl - 1]);
  /* the init before the K blocks, vectorized */
  ts_rv init, il[MAX_LOOPS];
  int nil = 0;
  if ((rc = ts_sched_decompose_reduction(s, b, kp[0], &init))) return rc;
  if (!ts_sched_get_loops(s, init, il, MAX_LOOPS, &nil) && nil > n_par) {
    ts_sched_vectorize(s, il[nil - 1]);
    /* per register tile: unrolled like the tile itself */
    if (one_kblock && nil >= n_par + 3) {
      ts_sched_unroll(s, il[nil - 2]);
      ts_sched_unroll(s, il[nil - 3]);
    }
  }
  /* the elementwise consumer (a bias, a requantization) per panel, while
   * the panel is in cache */
  ts_rv cons;
  if (!fusible_consumer(s, b, &cons))
    ts_sched_reverse_compute_at(s, cons, jp[0]);
  if ((rc = ts_sched_unroll(s, ip[1])) || (rc = ts_sched_unroll(s, jp[1])) ||
      (rc = ts_sched_tensorize(s, order[no - 2], intrin)))
    return rc;
  if (rows_parallel) return ts_sched_parallel(s, ip[0]);
  /* the outer loops and the column panels fused and parallel */
  ts_rv p = order[0];
  if (n_par > 1 && (rc = ts_sched_fuse(s, order, n_par, &p))) return rc;
  int64_t work = rv_extent(s, p);
  if (work > 1 && (rc = ts_sched_parallel(s, p))) return rc;
  return TS_OK;
}
