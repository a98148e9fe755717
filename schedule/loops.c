/*
 * loops.c — the loop primitives: split (with a predicate for imperfect
 * factors), fuse, reorder, the loop kinds (parallel, vectorize, unroll,
 * bind) with their race checks, and annotate / unannotate of loops and
 * blocks. Loop transformations only rewrite the iter values and predicates
 * of the blocks under the loops: block bodies use only their iter vars.
 */
#include "schedule/internal.h"

#include <stdlib.h>
#include <string.h>

#define MAX_SPLIT 16

/* Substitutes vars (map) in the loop/realize expressions of a subtree,
 * not entering blocks. */
typedef struct subst_ctx {
  ts_node_map *map;
} subst_ctx;

static ts_expr *subst_fn(void *ctx, ts_arena *a, ts_expr *e) {
  subst_ctx *c = ctx;
  return ts_expr_substitute(a, e, c->map, NULL);
}

static void substitute_under(ts_arena *a, ts_stmt *s, ts_node_map *map) {
  subst_ctx c = {map};
  rewriter r = {subst_fn, NULL, false, &c};
  rewrite_stmt(a, s, &r);
}

/* The statement directly holding stmt (NULL: stmt is the body). */
static ts_stmt *parent_of(const ts_func *f, const ts_stmt *stmt) {
  stmt_vec p = {0};
  tree_path(f, stmt, &p);
  ts_stmt *parent = p.n ? p.v[p.n - 1] : NULL;
  sv_free(&p);
  return parent;
}

/* Copies the annotations of one loop to another. */
static void copy_annotations(ts_arena *a, ts_stmt *to, const ts_stmt *from) {
  for (int i = 0; i < ts_for_n_annotations(from); i++)
    ts_for_annotate(a, to, *ts_for_annotation(from, i));
}

/* ========================================================================
 * split
 * ======================================================================== */

int apply_split(ts_sched *s, inst *in, rv_list *out) {
  ts_stmt *loop;
  int rc = check_arity(s, in, 2, MAX_SPLIT + 1, 0);
  if (rc || (rc = in_loop(s, in, 0, &loop))) return rc;
  int n = in->n_inputs - 1;
  int64_t f[MAX_SPLIT];
  int infer = -1;
  for (int i = 0; i < n; i++) {
    bool null;
    if ((rc = in_int(s, in, i + 1, true, &f[i], &null))) return rc;
    if (null) {
      if (infer >= 0)
        return FAIL(s, TS_ESCHEDULE,
                    "split: loop '%s': more than one factor is inferred",
                    loop_name(loop));
      infer = i;
    } else if (f[i] < 1) {
      return FAIL(s, TS_ESCHEDULE,
                  "split: loop '%s': factor %d (%lld) is not positive",
                  loop_name(loop), i, (long long)f[i]);
    }
  }
  if (ts_for_kind_of(loop) != TS_FOR_SERIAL)
    return FAIL(s, TS_ESCHEDULE,
                "split: loop '%s' is %s; only serial loops can be split",
                loop_name(loop), ts_for_kind_name(ts_for_kind_of(loop)));
  int64_t extent, mn;
  if (!ts_expr_is_const_int(ts_for_extent(loop), &extent) || extent < 1 ||
      !ts_expr_is_const_int(ts_for_min(loop), &mn))
    return FAIL(s, TS_ESCHEDULE, "split: loop '%s' has no constant range",
                loop_name(loop));
  int64_t prod = 1;
  for (int i = 0; i < n; i++)
    if (i != infer && __builtin_mul_overflow(prod, f[i], &prod))
      return FAIL(s, TS_ESCHEDULE, "split: loop '%s': the factors overflow",
                  loop_name(loop));
  if (infer >= 0) {
    f[infer] = (extent + prod - 1) / prod;
    prod *= f[infer];
  }
  if (prod < extent)
    return FAIL(s, TS_ESCHEDULE,
                "split: loop '%s': the factors multiply to %lld, less than its "
                "extent %lld",
                loop_name(loop), (long long)prod, (long long)extent);

  /* mutate */
  ts_arena *a = ts_func_arena(s->func);
  ts_stmt *parent = parent_of(s->func, loop);
  const char *base = loop_name(loop);
  ts_expr *vars[MAX_SPLIT];
  ts_expr *fused = NULL;
  for (int i = 0; i < n; i++) {
    char *name = ts_arena_printf(a, "%s_%d", base, i);
    vars[i] = name ? ts_var(a, name, TS_INDEX) : NULL;
    fused = i == 0 ? vars[i]
                   : ts_add(a, ts_mul(a, fused, ts_index(a, f[i])), vars[i]);
  }
  ts_expr *orig = ts_add(a, ts_index(a, mn), fused);
  ts_expr *cond = prod > extent ? ts_lt(a, fused, ts_index(a, extent)) : NULL;
  /* the new nest around the body (rewritten in place below) */
  ts_stmt *body = ts_for_body(loop);
  ts_stmt *loops[MAX_SPLIT], *inner = body;
  for (int i = n - 1; i >= 0; i--) {
    loops[i] = ts_for(a, vars[i], ts_index(a, 0), ts_index(a, f[i]),
                      TS_FOR_SERIAL, NULL, inner);
    inner = loops[i];
  }
  if (!orig || (prod > extent && !cond) || !loops[0])
    return fail_oom(s, "split");
  ts_node_map *map = ts_node_map_create();
  ts_node_map_put(map, ts_for_var(loop), orig);
  substitute_under(a, body, map);
  ts_node_map_destroy(map);
  if (cond) {
    stmt_vec rs = {0};
    tree_realizes(body, false, &rs);
    for (int i = 0; i < rs.n; i++) {
      ts_stmt *r = rs.v[i];
      ts_expr *old = ts_realize_predicate(r);
      int nv = ts_realize_n_values(r);
      ts_expr **v = ts_malloc(sizeof *v * (size_t)(nv ? nv : 1));
      ts_expr *pred = old ? ts_and(a, old, cond) : cond;
      if (!v || !pred) { /* out of memory (counted): left as it was */
        free(v);
        continue;
      }
      for (int k = 0; k < nv; k++) v[k] = ts_realize_value(r, k);
      ts_realize_set_values(a, r, v, nv, pred);
      free(v);
    }
    sv_free(&rs);
  }
  copy_annotations(a, loops[0], loop);
  tree_replace(s->func, parent, loop, loops[0]);
  rv_kill_loops(s, &loop, 1, "split");
  for (int i = 0; i < n; i++) rv_new_loop(s, loops[i], MARK_NONE, out);
  sched_refresh(s);
  return TS_OK;
}

/* ========================================================================
 * partition
 * ======================================================================== */

/* Narrows the domain of every iter of realize r that the variable of loop
 * `loop` binds to what the binding reaches over the loops above r. */
static void narrow_domains(ts_sched *s, ts_stmt *r, const ts_stmt *loop) {
  ts_arena *a = ts_func_arena(s->func);
  ts_block *b = ts_realize_block(r);
  stmt_vec above = {0};
  tree_loops_above(s->func, r, &above);
  ts_var_ranges *ranges = ts_var_ranges_create();
  if (ranges) ranges_of_loops(ranges, above.v, above.n);
  for (int i = 0; ranges && i < ts_block_n_iters(b); i++) {
    ts_expr *v = ts_realize_value(r, i);
    int64_t lo, hi, mn, ext;
    if (!uses_var(v, ts_for_var(loop)) || !iter_const(b, i, &mn, &ext) ||
        !ts_expr_const_bound(v, ranges, &lo, &hi))
      continue;
    int64_t nlo = lo > mn ? lo : mn,
            nhi = hi + 1 < mn + ext ? hi + 1 : mn + ext;
    ts_expr *m = ts_index(a, nlo), *e = ts_index(a, nhi - nlo);
    if (nhi > nlo && m && e) ts_block_set_iter_dom(b, i, (ts_range){m, e});
  }
  ts_var_ranges_destroy(ranges);
  sv_free(&above);
}

/* The smallest value of iter i of realize r with the variable of `loop`
 * over [lo, lo + n) and the other loops above r over their ranges. */
static bool iter_low(ts_sched *s, ts_stmt *r, int i, const ts_stmt *loop,
                     int64_t lo, int64_t n, int64_t *low) {
  stmt_vec above = {0};
  tree_loops_above(s->func, r, &above);
  ts_var_ranges *ranges = ts_var_ranges_create();
  int64_t hi;
  bool ok = ranges != NULL;
  if (ok) {
    ranges_of_loops(ranges, above.v, above.n);
    ts_var_ranges_set(ranges, ts_for_var(loop), lo, n);
    ok = ts_expr_const_bound(ts_realize_value(r, i), ranges, low, &hi);
  }
  ts_var_ranges_destroy(ranges);
  sv_free(&above);
  return ok;
}

/* A loop over reduce iters of realize r splits its reduction in two: the
 * first part must hold the reduction's start (where the init runs) and
 * the second none of it (it runs without the init, adding to what the
 * first part computed). */
static int check_reduce_split(ts_sched *s, ts_stmt *r, const ts_stmt *loop,
                              int64_t at) {
  const ts_block *b = ts_realize_block(r);
  int64_t mn, ext;
  if (!ts_expr_is_const_int(ts_for_min(loop), &mn) ||
      !ts_expr_is_const_int(ts_for_extent(loop), &ext))
    return TS_OK; /* refused by the caller */
  for (int k = 0; k < ts_block_n_iters(b); k++) {
    if (ts_block_iter_kind(b, k) == TS_ITER_SPATIAL ||
        !uses_var(ts_realize_value(r, k), ts_for_var(loop)))
      continue;
    const char *iv = ts_var_name(ts_block_iter_var(b, k));
    int64_t dmin, dext, first, second;
    if (!iter_const(b, k, &dmin, &dext) ||
        !iter_low(s, r, k, loop, mn, at, &first) ||
        !iter_low(s, r, k, loop, mn + at, ext - at, &second))
      return FAIL(s, TS_ESCHEDULE,
                  "partition: the range of reduce iter '%s' of block '%s' "
                  "under loop '%s' is not known",
                  iv, ts_block_name(b), loop_name(loop));
    if (first > dmin || second <= dmin)
      return FAIL(s, TS_ESCHEDULE,
                  "partition: loop '%s' does not start the reduction of "
                  "block '%s' over iter '%s' in its first part (the second "
                  "part runs without the init)",
                  loop_name(loop), ts_block_name(b), iv);
  }
  return TS_OK;
}

int apply_partition(ts_sched *s, inst *in, rv_list *out) {
  ts_stmt *loop;
  int64_t at;
  bool null;
  int rc = check_arity(s, in, 2, 2, 0);
  if (rc || (rc = in_loop(s, in, 0, &loop)) ||
      (rc = in_int(s, in, 1, false, &at, &null)))
    return rc;
  const char *ln = loop_name(loop);
  if (ts_for_kind_of(loop) != TS_FOR_SERIAL)
    return FAIL(s, TS_ESCHEDULE,
                "partition: loop '%s' is %s; only serial loops can be "
                "partitioned",
                ln, ts_for_kind_name(ts_for_kind_of(loop)));
  int64_t extent, mn;
  if (!ts_expr_is_const_int(ts_for_extent(loop), &extent) ||
      !ts_expr_is_const_int(ts_for_min(loop), &mn))
    return FAIL(s, TS_ESCHEDULE, "partition: loop '%s' has no constant range",
                ln);
  if (at <= 0 || at >= extent)
    return FAIL(s, TS_ESCHEDULE,
                "partition: loop '%s' runs %lld iterations; the point %lld "
                "is not strictly inside (0, %lld)",
                ln, (long long)extent, (long long)at, (long long)extent);
  ts_stmt *body = ts_for_body(loop);
  stmt_vec direct = {0}, all = {0};
  tree_realizes(body, false, &direct);
  tree_realizes(body, true, &all);
  for (int i = 0; i < direct.n && !rc; i++)
    rc = check_reduce_split(s, direct.v[i], loop, at);
  for (int i = 0; i < all.n && !rc; i++) {
    const ts_block *b = ts_realize_block(all.v[i]);
    if (ts_block_n_allocs(b))
      rc = FAIL(s, TS_ESCHEDULE,
                "partition: block '%s' under loop '%s' allocates buffer '%s' "
                "(blocks that allocate cannot be copied)",
                ts_block_name(b), ln, ts_buffer_name(ts_block_alloc(b, 0)));
  }
  sv_free(&direct);
  sv_free(&all);
  if (rc) return rc;

  /* mutate: the main loop keeps the body over [mn, mn + at); the tail, a
   * copy of it with fresh blocks, runs its own variable over
   * [0, extent - at), bound as mn + at + var */
  ts_arena *a = ts_func_arena(s->func);
  ts_stmt *parent = parent_of(s->func, loop);
  char *tname = ts_arena_printf(a, "%s_tail", ln);
  ts_expr *tvar = tname ? ts_var(a, tname, TS_INDEX) : NULL;
  ts_node_map *remap = ts_node_map_create();
  ts_node_map_put(remap, ts_for_var(loop), tvar);
  ts_stmt *tbody = tvar ? ts_stmt_copy(a, body, remap) : NULL;
  ts_node_map_destroy(remap);
  ts_expr *shifted = tvar ? ts_add(a, tvar, ts_index(a, mn + at)) : NULL;
  ts_stmt *main_l = ts_for(a, ts_for_var(loop), ts_index(a, mn),
                           ts_index(a, at), TS_FOR_SERIAL, NULL, body);
  ts_stmt *tail_l = tbody && shifted ? ts_for(a, tvar, ts_index(a, 0),
                                              ts_index(a, extent - at),
                                              TS_FOR_SERIAL, NULL, tbody)
                                     : NULL;
  ts_stmt *pair[2] = {main_l, tail_l};
  ts_stmt *seq = main_l && tail_l ? make_seq(a, pair, 2) : NULL;
  if (!seq) return fail_oom(s, "partition");
  ts_node_map *map = ts_node_map_create();
  ts_node_map_put(map, tvar, shifted);
  substitute_under(a, tbody, map);
  ts_node_map_destroy(map);
  copy_annotations(a, main_l, loop);
  copy_annotations(a, tail_l, loop);
  if (parent && ts_stmt_kind_of(parent) == TS_STMT_SEQ) {
    /* keep the list flat: the pair takes the loop's place in it */
    int n = ts_seq_n(parent), k = 0;
    ts_stmt **items = ts_arena_alloc(a, sizeof *items * (size_t)(n + 1));
    if (!items) return fail_oom(s, "partition");
    for (int i = 0; i < n; i++) {
      ts_stmt *it = ts_seq_item(parent, i);
      if (it == loop) {
        items[k++] = main_l;
        items[k++] = tail_l;
      } else {
        items[k++] = it;
      }
    }
    ts_stmt *flat = ts_seq(a, items, k);
    if (!flat) return fail_oom(s, "partition");
    tree_replace(s->func, parent_of(s->func, parent), parent, flat);
  } else {
    tree_replace(s->func, parent, loop, seq);
  }
  /* the copied blocks get names of their own */
  stmt_vec copied = {0};
  tree_realizes(tbody, true, &copied);
  for (int i = 0; i < copied.n; i++) {
    ts_block *b = ts_realize_block(copied.v[i]);
    char *base = ts_arena_printf(a, "%s_tail", ts_block_name(b));
    char *name = base ? unique_block_name(s->func, base) : NULL;
    if (name) ts_block_set_name(a, b, name);
  }
  sv_free(&copied);
  stmt_vec rs = {0};
  tree_realizes(body, false, &rs);
  for (int i = 0; i < rs.n; i++) narrow_domains(s, rs.v[i], main_l);
  sv_free(&rs);
  tree_realizes(tbody, false, &rs);
  for (int i = 0; i < rs.n; i++) {
    narrow_domains(s, rs.v[i], tail_l);
    /* the second part of a reduction adds to the first's */
    ts_block *b = ts_realize_block(rs.v[i]);
    for (int k = 0; k < ts_block_n_iters(b); k++)
      if (ts_block_iter_kind(b, k) != TS_ITER_SPATIAL &&
          uses_var(ts_realize_value(rs.v[i], k), tvar))
        ts_block_set_init(b, NULL);
  }
  sv_free(&rs);
  rv_kill_loops(s, &loop, 1, "partition");
  rv_new_loop(s, main_l, MARK_NONE, out);
  rv_new_loop(s, tail_l, MARK_NONE, out);
  sched_refresh(s);
  return TS_OK;
}

/* The name of a block under `body` (not entering blocks) with reduce
 * iters whose bindings use loop vars of `loops` for both spatial and reduce
 * iters, or NULL. Such a loop would let a reduction visit a point before
 * its init (the init runs when the reduce iters are at their minimum). */
static const char *mixed_binding(ts_stmt *body, ts_stmt *const *loops, int n) {
  stmt_vec rs = {0};
  tree_realizes(body, false, &rs);
  const char *bad = NULL;
  for (int i = 0; i < rs.n && !bad; i++) {
    const ts_block *b = ts_realize_block(rs.v[i]);
    bool sp = false, red = false;
    for (int k = 0; k < ts_block_n_iters(b); k++)
      for (int j = 0; j < n; j++) {
        if (!uses_var(ts_realize_value(rs.v[i], k), ts_for_var(loops[j])))
          continue;
        if (ts_block_iter_kind(b, k) == TS_ITER_SPATIAL)
          sp = true;
        else
          red = true;
      }
    if (sp && red) bad = ts_block_name(b);
  }
  sv_free(&rs);
  return bad;
}

/* The loops of every input of `in` (live loop handles, none given twice)
 * into loops. */
static int in_distinct_loops(ts_sched *s, inst *in, ts_stmt **loops) {
  int rc;
  for (int i = 0; i < in->n_inputs; i++) {
    if ((rc = in_loop(s, in, i, &loops[i]))) return rc;
    for (int j = 0; j < i; j++)
      if (loops[j] == loops[i])
        return FAIL(s, TS_ESCHEDULE, "%s: loop '%s' is given twice",
                    prim_name(in), loop_name(loops[i]));
  }
  return TS_OK;
}

/* ========================================================================
 * fuse
 * ======================================================================== */

#define MAX_FUSE 16

int apply_fuse(ts_sched *s, inst *in, rv_list *out) {
  int rc = check_arity(s, in, 2, MAX_FUSE, 0);
  if (rc) return rc;
  int n = in->n_inputs;
  ts_stmt *loops[MAX_FUSE];
  int64_t ext[MAX_FUSE], mins[MAX_FUSE];
  if ((rc = in_distinct_loops(s, in, loops))) return rc;
  int64_t prod = 1;
  for (int i = 0; i < n; i++) {
    if (i > 0 && ts_for_body(loops[i - 1]) != loops[i])
      return FAIL(s, TS_ESCHEDULE,
                  "fuse: loop '%s' is not the only statement directly inside "
                  "loop '%s' (the loops must be adjacent, outermost first)",
                  loop_name(loops[i]), loop_name(loops[i - 1]));
    if (ts_for_kind_of(loops[i]) != TS_FOR_SERIAL)
      return FAIL(s, TS_ESCHEDULE,
                  "fuse: loop '%s' is %s; only serial loops can be fused",
                  loop_name(loops[i]),
                  ts_for_kind_name(ts_for_kind_of(loops[i])));
    if (!ts_expr_is_const_int(ts_for_extent(loops[i]), &ext[i]) || ext[i] < 1 ||
        !ts_expr_is_const_int(ts_for_min(loops[i]), &mins[i]))
      return FAIL(s, TS_ESCHEDULE, "fuse: loop '%s' has no constant range",
                  loop_name(loops[i]));
    if (__builtin_mul_overflow(prod, ext[i], &prod) || prod > INT32_MAX)
      return FAIL(s, TS_ESCHEDULE, "fuse: the fused extent is too large");
  }
  /* an inner loop's range must not depend on an outer one's var */
  for (int i = 1; i < n; i++)
    for (int j = 0; j < i; j++)
      if (uses_var(ts_for_min(loops[i]), ts_for_var(loops[j])) ||
          uses_var(ts_for_extent(loops[i]), ts_for_var(loops[j])))
        return FAIL(s, TS_ESCHEDULE,
                    "fuse: the range of loop '%s' depends on loop '%s'",
                    loop_name(loops[i]), loop_name(loops[j]));

  const char *mixed = mixed_binding(ts_for_body(loops[n - 1]), loops, n);
  if (mixed)
    return FAIL(s, TS_ESCHEDULE,
                "fuse: the fused loop would bind both spatial and reduce iters "
                "of block '%s'",
                mixed);

  ts_arena *a = ts_func_arena(s->func);
  stmt_vec p = {0};
  tree_path(s->func, loops[0], &p);
  ts_stmt *parent = p.n ? p.v[p.n - 1] : NULL;
  sv_free(&p);
  size_t len = 8;
  for (int i = 0; i < n; i++) len += strlen(loop_name(loops[i])) + 1;
  char *name = ts_malloc(len);
  if (!name) return fail_oom(s, "fuse");
  name[0] = 0;
  for (int i = 0; i < n; i++) {
    strcat(name, loop_name(loops[i]));
    strcat(name, "_");
  }
  strcat(name, "fused");
  ts_expr *fv = ts_var(a, name, TS_INDEX);
  free(name);
  ts_expr *vals[MAX_FUSE];
  int64_t inner = 1;
  bool ok = fv != NULL;
  for (int i = n - 1; i >= 0; i--) {
    ts_expr *q = ts_floordiv(a, fv, ts_index(a, inner));
    if (i > 0) q = ts_floormod(a, q, ts_index(a, ext[i]));
    vals[i] = ts_add(a, ts_index(a, mins[i]), q);
    ok = ok && vals[i];
    inner *= ext[i];
  }
  ts_stmt *body = ts_for_body(loops[n - 1]);
  ts_stmt *fused = ts_for(a, fv, ts_index(a, 0), ts_index(a, prod),
                          TS_FOR_SERIAL, NULL, body);
  if (!ok || !fused) return fail_oom(s, "fuse");
  ts_node_map *map = ts_node_map_create();
  for (int i = 0; i < n; i++)
    ts_node_map_put(map, ts_for_var(loops[i]), vals[i]);
  substitute_under(a, body, map);
  ts_node_map_destroy(map);
  tree_replace(s->func, parent, loops[0], fused);
  rv_kill_loops(s, loops, n, "fuse");
  rv_new_loop(s, fused, MARK_NONE, out);
  sched_refresh(s);
  return TS_OK;
}

/* ========================================================================
 * fuse_siblings
 * ======================================================================== */

/* The first buffer that one block of `xs` writes and a block of `ys` reads
 * or writes, or that a block of `xs` reads and one of `ys` writes (a
 * dependence between the two sets, in either direction), with the two
 * blocks; NULL when there is none. */
static const ts_buffer *conflict(const stmt_vec *xs, const stmt_vec *ys,
                                 const ts_block **bx, const ts_block **by,
                                 bool *x_writes) {
  for (int i = 0; i < xs->n; i++)
    for (int j = 0; j < ys->n; j++) {
      const ts_block *x = ts_realize_block(xs->v[i]);
      const ts_block *y = ts_realize_block(ys->v[j]);
      for (int w = 0; w < ts_block_n_writes(x); w++) {
        const ts_buffer *buf = ts_block_write(x, w)->buffer;
        if (block_reads(y, buf) || block_writes(y, buf)) {
          *bx = x, *by = y, *x_writes = true;
          return buf;
        }
      }
      for (int w = 0; w < ts_block_n_writes(y); w++) {
        const ts_buffer *buf = ts_block_write(y, w)->buffer;
        if (block_reads(x, buf)) {
          *bx = x, *by = y, *x_writes = false;
          return buf;
        }
      }
    }
  return NULL;
}

/* Refuses (message on s) when the blocks of `moved` (under a later loop,
 * whose body moves up) depend on those of `others` (under an earlier given
 * loop, or a statement between): `what` names where the others are. */
static int check_independent(ts_sched *s, const stmt_vec *moved,
                             const ts_stmt *loop, const stmt_vec *others,
                             const char *what) {
  const ts_block *bm, *bo;
  bool m_writes;
  const ts_buffer *buf = conflict(moved, others, &bm, &bo, &m_writes);
  if (!buf) return TS_OK;
  return FAIL(s, TS_ESCHEDULE,
              "fuse_siblings: block '%s' under loop '%s' %s buffer '%s' that "
              "block '%s' %s %s (the loops are not independent)",
              ts_block_name(bm), loop_name(loop), m_writes ? "writes" : "reads",
              ts_buffer_name(buf), ts_block_name(bo),
              m_writes ? "accesses" : "writes", what);
}

int apply_fuse_siblings(ts_sched *s, inst *in, rv_list *out) {
  (void)out;
  int rc = check_arity(s, in, 2, MAX_FUSE, 0);
  if (rc) return rc;
  int n = in->n_inputs;
  ts_stmt *loops[MAX_FUSE];
  if ((rc = in_distinct_loops(s, in, loops))) return rc;
  /* siblings: items of one statement list, in program order */
  stmt_vec p = {0};
  tree_path(s->func, loops[0], &p);
  ts_stmt *parent = p.n ? p.v[p.n - 1] : NULL;
  ts_stmt *grand = p.n > 1 ? p.v[p.n - 2] : NULL;
  sv_free(&p);
  int pos[MAX_FUSE];
  for (int i = 0; i < n; i++) {
    pos[i] = -1;
    if (parent && ts_stmt_kind_of(parent) == TS_STMT_SEQ)
      for (int k = 0; k < ts_seq_n(parent); k++)
        if (ts_seq_item(parent, k) == loops[i]) pos[i] = k;
    if (pos[i] < 0)
      return FAIL(s, TS_ESCHEDULE,
                  "fuse_siblings: loops '%s' and '%s' are not siblings (items "
                  "of one statement list)",
                  loop_name(loops[0]), loop_name(loops[i]));
    if (i > 0 && pos[i] < pos[i - 1])
      return FAIL(s, TS_ESCHEDULE,
                  "fuse_siblings: loop '%s' comes before loop '%s' (give the "
                  "loops in program order)",
                  loop_name(loops[i]), loop_name(loops[i - 1]));
  }
  int64_t ext0, min0;
  if (!ts_expr_is_const_int(ts_for_extent(loops[0]), &ext0) ||
      !ts_expr_is_const_int(ts_for_min(loops[0]), &min0))
    return FAIL(s, TS_ESCHEDULE,
                "fuse_siblings: loop '%s' has no constant range",
                loop_name(loops[0]));
  ts_for_kind k0 = ts_for_kind_of(loops[0]);
  for (int i = 1; i < n; i++) {
    int64_t ext, mn;
    if (!ts_expr_is_const_int(ts_for_extent(loops[i]), &ext) ||
        !ts_expr_is_const_int(ts_for_min(loops[i]), &mn))
      return FAIL(s, TS_ESCHEDULE,
                  "fuse_siblings: loop '%s' has no constant range",
                  loop_name(loops[i]));
    if (ext != ext0 || mn != min0)
      return FAIL(s, TS_ESCHEDULE,
                  "fuse_siblings: loop '%s' runs over [%lld, %lld) and loop "
                  "'%s' over [%lld, %lld) (the ranges must be equal)",
                  loop_name(loops[i]), (long long)mn, (long long)(mn + ext),
                  loop_name(loops[0]), (long long)min0,
                  (long long)(min0 + ext0));
    ts_for_kind k = ts_for_kind_of(loops[i]);
    if (k != k0 || (k == TS_FOR_THREAD && strcmp(ts_for_thread_tag(loops[i]),
                                                 ts_for_thread_tag(loops[0]))))
      return FAIL(s, TS_ESCHEDULE,
                  "fuse_siblings: loop '%s' is %s%s%s and loop '%s' %s%s%s "
                  "(the kinds must be equal)",
                  loop_name(loops[i]), ts_for_kind_name(k),
                  k == TS_FOR_THREAD ? " " : "",
                  k == TS_FOR_THREAD ? ts_for_thread_tag(loops[i]) : "",
                  loop_name(loops[0]), ts_for_kind_name(k0),
                  k0 == TS_FOR_THREAD ? " " : "",
                  k0 == TS_FOR_THREAD ? ts_for_thread_tag(loops[0]) : "");
  }
  /* Each later loop's body moves up: into the iterations of the earlier
   * given loops and before the statements between them. Its blocks must
   * not depend on theirs, either way. */
  stmt_vec blocks[MAX_FUSE];
  memset(blocks, 0, sizeof blocks);
  for (int i = 0; i < n; i++)
    tree_realizes(ts_for_body(loops[i]), false, &blocks[i]);
  for (int i = 1; i < n && !rc; i++) {
    for (int j = 0; j < i && !rc; j++) {
      char what[160];
      snprintf(what, sizeof what, "under loop '%s'", loop_name(loops[j]));
      rc = check_independent(s, &blocks[i], loops[i], &blocks[j], what);
    }
    for (int k = pos[0] + 1; k < pos[i] && !rc; k++) {
      ts_stmt *mid = ts_seq_item(parent, k);
      bool given = false;
      for (int j = 0; j < n; j++) given |= mid == loops[j];
      if (given) continue;
      stmt_vec mb = {0};
      tree_realizes(mid, false, &mb);
      rc = check_independent(s, &blocks[i], loops[i], &mb, "between the loops");
      sv_free(&mb);
    }
  }
  for (int i = 0; i < n; i++) sv_free(&blocks[i]);
  if (rc) return rc;

  /* mutate: the bodies, in order, under the first loop */
  ts_arena *a = ts_func_arena(s->func);
  stmt_vec items = {0};
  for (int i = 0; i < n; i++) {
    ts_stmt *body = ts_for_body(loops[i]);
    if (i > 0) {
      ts_node_map *map = ts_node_map_create();
      ts_node_map_put(map, ts_for_var(loops[i]), ts_for_var(loops[0]));
      substitute_under(a, body, map);
      ts_node_map_destroy(map);
    }
    sv_push(&items, body);
  }
  ts_for_set_body(loops[0], make_seq(a, items.v, items.n));
  items.n = 0;
  for (int k = 0; k < ts_seq_n(parent); k++) {
    ts_stmt *x = ts_seq_item(parent, k);
    bool later = false;
    for (int j = 1; j < n; j++) later |= x == loops[j];
    if (!later) sv_push(&items, x);
  }
  tree_replace(s->func, grand, parent, make_seq(a, items.v, items.n));
  sv_free(&items);
  rv_kill_loops(s, loops + 1, n - 1, "fuse_siblings");
  sched_refresh(s);
  return TS_OK;
}

/* ========================================================================
 * reorder
 * ======================================================================== */

#define MAX_CHAIN 64

int apply_reorder(ts_sched *s, inst *in, rv_list *out) {
  (void)out;
  int rc = check_arity(s, in, 1, MAX_CHAIN, 0);
  if (rc) return rc;
  int n = in->n_inputs;
  ts_stmt *given[MAX_CHAIN];
  if ((rc = in_distinct_loops(s, in, given))) return rc;
  /* the deepest given loop; every other must be above it */
  stmt_vec path = {0}, best = {0};
  int deepest = 0;
  for (int i = 0; i < n; i++) {
    tree_path(s->func, given[i], &path);
    if (i == 0 || path.n > best.n) {
      deepest = i;
      best.n = 0;
      for (int k = 0; k < path.n; k++) sv_push(&best, path.v[k]);
    }
  }
  sv_free(&path);
  int top = -1; /* index in best of the outermost given loop */
  for (int i = 0; i < n; i++) {
    if (i == deepest) continue;
    int at = -1;
    for (int k = 0; k < best.n; k++)
      if (best.v[k] == given[i]) at = k;
    if (at < 0) {
      sv_free(&best);
      return FAIL(s, TS_ESCHEDULE,
                  "reorder: loops '%s' and '%s' are not in one loop nest "
                  "(neither is inside the other)",
                  loop_name(given[i]), loop_name(given[deepest]));
    }
    if (top < 0 || at < top) top = at;
  }
  /* the chain: best[top..] then the deepest loop */
  ts_stmt *chain[MAX_CHAIN];
  int m = 0;
  if (top >= 0)
    for (int k = top; k < best.n; k++) {
      ts_stmt *x = best.v[k];
      if (ts_stmt_kind_of(x) == TS_STMT_BLOCK_REALIZE) {
        const char *bn = ts_block_name(ts_realize_block(x));
        sv_free(&best);
        return FAIL(s, TS_ESCHEDULE,
                    "reorder: block '%s' lies between the loops (loops cannot "
                    "be reordered across a block boundary)",
                    bn);
      }
      if (ts_stmt_kind_of(x) != TS_STMT_FOR) {
        const char *above = m > 0 ? loop_name(chain[m - 1]) : "?";
        const char *kind = ts_stmt_kind_name(ts_stmt_kind_of(x));
        sv_free(&best);
        if (ts_stmt_kind_of(x) == TS_STMT_SEQ)
          return FAIL(s, TS_ESCHEDULE,
                      "reorder: loop '%s' holds more than one statement (the "
                      "loops must form a chain of single statements)",
                      above);
        return FAIL(s, TS_ESCHEDULE,
                    "reorder: a%s %s statement lies between the loops",
                    kind[0] == 'i' || kind[0] == 'a' ? "n" : "", kind);
      }
      if (m == MAX_CHAIN) {
        sv_free(&best);
        return FAIL(s, TS_ESCHEDULE, "reorder: the loop nest is too deep");
      }
      chain[m++] = x;
    }
  ts_stmt *parent = top > 0 ? best.v[top - 1] : NULL;
  if (top < 0) { /* a single loop: nothing moves */
    tree_path(s->func, given[0], &best);
    parent = best.n ? best.v[best.n - 1] : NULL;
  }
  sv_free(&best);
  chain[m++] = given[deepest];
  for (int k = 0; k + 1 < m; k++)
    if (ts_for_body(chain[k]) != chain[k + 1])
      return FAIL(s, TS_ESCHEDULE,
                  "reorder: loop '%s' holds more than one statement (the "
                  "loops must form a chain of single statements; next is "
                  "loop '%s')",
                  loop_name(chain[k]), loop_name(chain[k + 1]));
  for (int k = 0; k < m; k++)
    for (int j = 0; j < m; j++)
      if (j != k && (uses_var(ts_for_min(chain[k]), ts_for_var(chain[j])) ||
                     uses_var(ts_for_extent(chain[k]), ts_for_var(chain[j]))))
        return FAIL(s, TS_ESCHEDULE,
                    "reorder: the range of loop '%s' depends on loop '%s'",
                    loop_name(chain[k]), loop_name(chain[j]));
  for (int k = 0; k < m; k++) {
    const char *mixed = mixed_binding(ts_for_body(chain[m - 1]), &chain[k], 1);
    if (mixed)
      return FAIL(s, TS_ESCHEDULE,
                  "reorder: loop '%s' binds both spatial and reduce iters of "
                  "block '%s'",
                  loop_name(chain[k]), mixed);
  }
  /* blocks below must not bind the loops to opaque iters */
  stmt_vec rs = {0};
  tree_realizes(ts_for_body(chain[m - 1]), false, &rs);
  for (int i = 0; i < rs.n; i++) {
    ts_block *b = ts_realize_block(rs.v[i]);
    for (int k = 0; k < ts_block_n_iters(b); k++) {
      if (ts_block_iter_kind(b, k) != TS_ITER_OPAQUE) continue;
      for (int j = 0; j < m; j++)
        if (uses_var(ts_realize_value(rs.v[i], k), ts_for_var(chain[j]))) {
          const char *ln = loop_name(chain[j]);
          sv_free(&rs);
          return FAIL(s, TS_ESCHEDULE,
                      "reorder: loop '%s' is bound to an opaque iter of block "
                      "'%s'",
                      ln, ts_block_name(b));
        }
    }
  }
  sv_free(&rs);

  /* the new order: given loops take the chain slots of given loops */
  ts_stmt *order[MAX_CHAIN];
  int next = 0;
  for (int k = 0; k < m; k++) {
    bool is_given = false;
    for (int i = 0; i < n; i++)
      if (given[i] == chain[k]) is_given = true;
    order[k] = is_given ? given[next++] : chain[k];
  }
  ts_stmt *inner_body = ts_for_body(chain[m - 1]);
  for (int k = m - 1; k >= 0; k--)
    ts_for_set_body(order[k], k == m - 1 ? inner_body : order[k + 1]);
  tree_replace(s->func, parent, chain[0], order[0]);
  return TS_OK;
}

/* ========================================================================
 * Loop kinds
 * ======================================================================== */

static int set_kind(ts_sched *s, inst *in, ts_for_kind kind,
                    const char *thread) {
  ts_stmt *loop;
  int rc = in_loop(s, in, 0, &loop);
  if (rc) return rc;
  const char *prim = prim_name(in);
  if (ts_for_kind_of(loop) != TS_FOR_SERIAL)
    return FAIL(s, TS_ESCHEDULE, "%s: loop '%s' is already %s", prim,
                loop_name(loop), ts_for_kind_name(ts_for_kind_of(loop)));
  int64_t ext;
  if (kind != TS_FOR_UNROLLED &&
      (!ts_expr_is_const_int(ts_for_extent(loop), &ext) || ext < 1))
    return FAIL(s, TS_ESCHEDULE, "%s: loop '%s' has no constant extent", prim,
                loop_name(loop));
  if (kind != TS_FOR_UNROLLED) {
    stmt_vec rs = {0};
    tree_realizes(ts_for_body(loop), false, &rs);
    char why[512];
    for (int i = 0; i < rs.n; i++)
      if (!parallel_safe(s, loop, rs.v[i], why, sizeof why)) {
        sv_free(&rs);
        return FAIL(s, TS_ESCHEDULE, "%s: %s", prim, why);
      }
    sv_free(&rs);
  }
  ts_for_set_kind(ts_func_arena(s->func), loop, kind, thread);
  return TS_OK;
}

int apply_parallel(ts_sched *s, inst *in, rv_list *out) {
  (void)out;
  int rc = check_arity(s, in, 1, 1, 0);
  return rc ? rc : set_kind(s, in, TS_FOR_PARALLEL, NULL);
}

int apply_vectorize(ts_sched *s, inst *in, rv_list *out) {
  (void)out;
  int rc = check_arity(s, in, 1, 1, 0);
  return rc ? rc : set_kind(s, in, TS_FOR_VECTORIZED, NULL);
}

int apply_unroll(ts_sched *s, inst *in, rv_list *out) {
  (void)out;
  int rc = check_arity(s, in, 1, 1, 0);
  return rc ? rc : set_kind(s, in, TS_FOR_UNROLLED, NULL);
}

static const char *const thread_axes[] = {
    "blockIdx.x",  "blockIdx.y",  "blockIdx.z", "threadIdx.x",
    "threadIdx.y", "threadIdx.z", "vthread",    NULL};

int apply_bind(ts_sched *s, inst *in, rv_list *out) {
  (void)out;
  const char *axis;
  int rc = check_arity(s, in, 1, 1, 1);
  if (rc || (rc = attr_str(s, in, 0, &axis))) return rc;
  bool known = false;
  for (int i = 0; thread_axes[i]; i++)
    if (strcmp(thread_axes[i], axis) == 0) known = true;
  if (!known)
    return FAIL(s, TS_EINVAL,
                "bind: unknown thread axis '%s' (blockIdx.x/y/z, "
                "threadIdx.x/y/z or vthread)",
                axis);
  return set_kind(s, in, TS_FOR_THREAD, axis);
}

/* ========================================================================
 * Annotations
 * ======================================================================== */

int apply_annotate(ts_sched *s, inst *in, rv_list *out) {
  (void)out;
  ts_stmt *r, *loop;
  const char *key;
  int rc = check_arity(s, in, 2, 2, 2);
  if (rc || (rc = in_block_or_loop(s, in, 0, &r, &loop)) ||
      (rc = attr_str(s, in, 0, &key)))
    return rc;
  if (!key[0]) return FAIL(s, TS_EINVAL, "annotate: the key is empty");
  const tval *lit = &in->attrs[1];
  bool from_rv = in->inputs[1].kind != TV_NULL;
  if (from_rv == (lit->kind != TV_NULL))
    return FAIL(s, TS_EINVAL,
                "annotate: give exactly one value (an integer handle or a "
                "literal)");
  ts_annotation ann;
  if (from_rv) {
    int64_t v;
    if ((rc = in_int(s, in, 1, false, &v, NULL))) return rc;
    ann = ts_ann_int(key, v);
  } else if (lit->kind == TV_INT) {
    ann = ts_ann_int(key, lit->i);
  } else if (lit->kind == TV_FLOAT) {
    ann = ts_ann_float(key, lit->f);
  } else if (lit->kind == TV_STR) {
    ann = ts_ann_string(key, lit->s);
  } else {
    return FAIL(s, TS_EINVAL,
                "annotate: the value must be an integer, a float or a string");
  }
  ts_arena *a = ts_func_arena(s->func);
  if (loop)
    ts_for_annotate(a, loop, ann);
  else
    ts_block_annotate(a, ts_realize_block(r), ann);
  return TS_OK;
}

int apply_unannotate(ts_sched *s, inst *in, rv_list *out) {
  (void)out;
  ts_stmt *r, *loop;
  const char *key;
  int rc = check_arity(s, in, 1, 1, 1);
  if (rc || (rc = in_block_or_loop(s, in, 0, &r, &loop)) ||
      (rc = attr_str(s, in, 0, &key)))
    return rc;
  bool present =
      loop ? ts_for_find_annotation(loop, key) != NULL
           : ts_block_find_annotation(ts_realize_block(r), key) != NULL;
  if (!present)
    return FAIL(s, TS_ENOTFOUND, "unannotate: %s '%s' has no annotation '%s'",
                loop ? "loop" : "block",
                loop ? loop_name(loop) : ts_block_name(ts_realize_block(r)),
                key);
  if (loop)
    ts_for_unannotate(loop, key);
  else
    ts_block_unannotate(ts_realize_block(r), key);
  return TS_OK;
}
