/*
 * reduction.c — the reduction primitives: decompose_reduction (the init of
 * a reduction block becomes its own block before a chosen loop, under
 * copies of the spatial loops) and rfactor (a reduction over one loop is
 * factored into a block writing a new buffer with that loop as a spatial
 * dimension, which the original block then reduces).
 */
#include "schedule/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ========================================================================
 * decompose_reduction
 * ======================================================================== */

/* Whether predicate p (a conjunction of comparisons of loop variables)
 * holds for every value of the loops above the block when the reduction
 * loops other than `loop` (is_red) are at their first iteration. */
static bool holds_at_first(ts_arena *a, ts_expr *p, const stmt_vec *above,
                           const bool *is_red, const ts_stmt *loop) {
  if (ts_expr_kind_of(p) == TS_EXPR_AND)
    return holds_at_first(a, ts_expr_operand(p, 0), above, is_red, loop) &&
           holds_at_first(a, ts_expr_operand(p, 1), above, is_red, loop);
  ts_expr_kind k = ts_expr_kind_of(p);
  if (k != TS_EXPR_LT && k != TS_EXPR_LE && k != TS_EXPR_GT && k != TS_EXPR_GE)
    return false;
  bool less = k == TS_EXPR_LT || k == TS_EXPR_LE;
  /* x < y as y - x > 0 (or >= 0 for <=); x > y as x - y > 0 */
  ts_expr *d = less ? ts_sub(a, ts_expr_operand(p, 1), ts_expr_operand(p, 0))
                    : ts_sub(a, ts_expr_operand(p, 0), ts_expr_operand(p, 1));
  relax_map *m = relax_create();
  for (int i = 0; i < above->n; i++) {
    const ts_stmt *l = above->v[i];
    if (is_red[i] && l != loop)
      relax_set(m, ts_for_var(l), ts_for_min(l), ts_for_min(l));
    else
      relax_loop(a, m, l);
  }
  ts_expr *lo = NULL, *hi = NULL;
  int64_t v = 0;
  bool ok = d && bound_expr(a, d, m, NULL, &lo, &hi) &&
            ts_expr_is_const_int(lo, &v) &&
            (k == TS_EXPR_LE || k == TS_EXPR_GE ? v >= 0 : v > 0);
  relax_destroy(m);
  return ok;
}

/* The conjuncts of p (a && b && ...) into out; -1 when more than max. */
static int split_conjuncts(ts_expr *p, ts_expr **out, int max) {
  if (ts_expr_kind_of(p) == TS_EXPR_AND) {
    int n = split_conjuncts(ts_expr_operand(p, 0), out, max);
    if (n < 0) return -1;
    int m = split_conjuncts(ts_expr_operand(p, 1), out + n, max - n);
    return m < 0 ? -1 : n + m;
  }
  if (max < 1) return -1;
  out[0] = p;
  return 1;
}

int apply_decompose_reduction(ts_sched *s, inst *in, rv_list *out) {
  ts_stmt *r, *loop;
  int rc = check_arity(s, in, 2, 2, 0);
  if (rc || (rc = in_block(s, in, 0, &r)) || (rc = in_loop(s, in, 1, &loop)))
    return rc;
  ts_block *b = ts_realize_block(r);
  const char *bn = ts_block_name(b);
  if (!ts_block_init(b))
    return FAIL(s, TS_ESCHEDULE,
                "decompose_reduction: block '%s' has no init (not a "
                "reduction, or already decomposed)",
                bn);
  if (!tree_contains(loop, r))
    return FAIL(s, TS_ESCHEDULE,
                "decompose_reduction: loop '%s' is not above block '%s'",
                loop_name(loop), bn);
  if (tree_scope(s->func, loop) != tree_scope(s->func, r))
    return FAIL(s, TS_ESCHEDULE,
                "decompose_reduction: loop '%s' is outside the scope of block "
                "'%s'",
                loop_name(loop), bn);
  stmt_vec above = {0};
  tree_loops_above(s->func, r, &above);
  int at = -1;
  for (int i = 0; i < above.n; i++)
    if (above.v[i] == loop) at = i;
  /* loops above the target must not carry the reduction */
  for (int i = 0; i < at && !rc; i++)
    for (int k = 0; k < ts_block_n_iters(b) && !rc; k++)
      if (ts_block_iter_kind(b, k) != TS_ITER_SPATIAL &&
          uses_var(ts_realize_value(r, k), ts_for_var(above.v[i])))
        rc = FAIL(s, TS_ESCHEDULE,
                  "decompose_reduction: loop '%s' above loop '%s' is a "
                  "reduction loop of block '%s'",
                  loop_name(above.v[i]), loop_name(loop), bn);
  /* the reduction must run entirely inside the target loop: its bindings
   * use only the loops from the target down (not an enclosing block's
   * iter vars) */
  for (int k = 0; k < ts_block_n_iters(b) && !rc; k++)
    if (ts_block_iter_kind(b, k) != TS_ITER_SPATIAL &&
        !vars_among_loops(ts_realize_value(r, k), above.v + at, above.n - at))
      rc = FAIL(s, TS_ESCHEDULE,
                "decompose_reduction: the reduction of block '%s' also runs "
                "over variables outside loop '%s' (an enclosing block's "
                "iterations)",
                bn, loop_name(loop));
  /* the loops from the target down: copied when they are spatial only */
  bool copy[64] = {0};
  int n_copy = 0;
  for (int i = at; i < above.n && !rc; i++) {
    bool sp = false, red = false;
    for (int k = 0; k < ts_block_n_iters(b); k++) {
      if (!uses_var(ts_realize_value(r, k), ts_for_var(above.v[i]))) continue;
      if (ts_block_iter_kind(b, k) == TS_ITER_SPATIAL)
        sp = true;
      else
        red = true;
    }
    if (sp && red)
      rc = FAIL(s, TS_ESCHEDULE,
                "decompose_reduction: loop '%s' binds both spatial and "
                "reduce iters of block '%s'",
                loop_name(above.v[i]), bn);
    if (i - at >= 64)
      rc = FAIL(s, TS_ESCHEDULE, "decompose_reduction: too many loops");
    if (!rc && sp) {
      copy[i - at] = true;
      n_copy++;
    }
  }
  /* The predicate's conjuncts over the spatial loops go to the init. One
   * over the reduction loops (a ceil split's guard, k0 * 4 + k1 < 389, or
   * a factored row's, k0 * 16 + lane < 40 with the lane a spatial loop of
   * the factored block) is left to the update when it holds at the
   * reduction's first iteration for every value of the spatial loops:
   * every element then starts its reduction there, which is where the
   * init ran. Any other dependence on the reduction loops is refused. */
  ts_expr *pred = ts_realize_predicate(r), *ipred_src = NULL;
  if (!rc && pred) {
    bool is_red[64] = {0};
    for (int i = at; i < above.n && i < 64; i++) is_red[i] = !copy[i - at];
    ts_expr *conj[32];
    int nc = split_conjuncts(pred, conj, 32);
    if (nc < 0)
      rc = FAIL(s, TS_ESCHEDULE,
                "decompose_reduction: the predicate of block '%s' has too "
                "many conjuncts",
                bn);
    for (int c = 0; c < nc && !rc; c++) {
      bool red = false;
      const char *rl = NULL;
      for (int i = at; i < above.n; i++)
        if (uses_var(conj[c], ts_for_var(above.v[i])) && !copy[i - at]) {
          red = true;
          rl = loop_name(above.v[i]);
        }
      if (!red) {
        ipred_src = ipred_src
                        ? ts_and(ts_func_arena(s->func), ipred_src, conj[c])
                        : conj[c];
      } else if (above.n > 64 ||
                 !holds_at_first(ts_func_arena(s->func), conj[c], &above,
                                 is_red, NULL)) {
        rc = FAIL(s, TS_ESCHEDULE,
                  "decompose_reduction: the predicate of block '%s' depends "
                  "on reduction loop '%s' and does not hold at the "
                  "reduction's first iteration for every value of the "
                  "spatial loops, so the init cannot run before the "
                  "reduction",
                  bn, rl);
      }
    }
  }
  if (rc) {
    sv_free(&above);
    return rc;
  }
  /* build: copies of the spatial loops, then the init block */
  ts_arena *a = ts_func_arena(s->func);
  ts_node_map *lmap = ts_node_map_create(); /* old loop var -> new */
  ts_stmt *loops[64];
  int nl = 0;
  bool ok = true; /* false: out of memory, the function is left as it was */
  for (int i = at; i < above.n; i++) {
    if (!copy[i - at]) continue;
    ts_stmt *o = above.v[i];
    char *vn = ts_arena_printf(a, "%s_init", loop_name(o));
    ts_expr *v = vn ? ts_var(a, vn, TS_INDEX) : NULL;
    ts_node_map_put(lmap, ts_for_var(o), v);
    loops[nl] = ts_for(a, v, ts_for_min(o), ts_for_extent(o), TS_FOR_SERIAL,
                       NULL, NULL);
    ok = ok && loops[nl++];
  }
  char *base = ts_arena_alloc(ts_func_arena(s->func), strlen(bn) + 8);
  char *name = NULL;
  if (base) {
    sprintf(base, "%s_init", bn);
    name = unique_block_name(s->func, base);
  }
  ts_block *ib = name ? ts_block_new(a, name) : NULL;
  ts_node_map *imap = ts_node_map_create(); /* old iter var -> new */
  int n = ts_block_n_iters(b);
  ts_expr **vals = ts_arena_alloc(a, sizeof *vals * (size_t)(n ? n : 1));
  int nv = 0;
  ok = ok && ib && vals;
  for (int k = 0; k < n && ok; k++) {
    if (ts_block_iter_kind(b, k) != TS_ITER_SPATIAL) continue;
    ts_expr *old = ts_block_iter_var(b, k);
    ts_expr *v = ts_var(a, ts_var_name(old), TS_INDEX);
    ts_node_map_put(imap, old, v);
    ok = v && ts_block_add_iter_var(a, ib, v, ts_block_iter_dom(b, k),
                                    TS_ITER_SPATIAL) >= 0;
    vals[nv++] = ts_expr_substitute(a, ts_realize_value(r, k), lmap, NULL);
  }
  ts_stmt *ir = NULL;
  if (ok) {
    ts_stmt *init = ts_stmt_substitute(a, ts_block_init(b), imap, NULL);
    ts_block_set_body(ib, init);
    ts_block_infer_regions(a, ib);
    ts_expr *ipred =
        ipred_src ? ts_expr_substitute(a, ipred_src, lmap, NULL) : NULL;
    if (init && (ipred || !ipred_src))
      ir = ts_block_realize(a, ib, vals, nv, ipred);
  }
  ts_node_map_destroy(lmap);
  ts_node_map_destroy(imap);
  if (!ir) {
    sv_free(&above);
    return fail_oom(s, "decompose_reduction");
  }
  ts_stmt *nest = ir;
  for (int i = nl - 1; i >= 0; i--) {
    ts_for_set_body(loops[i], nest);
    nest = loops[i];
  }
  /* insert before the target loop in its parent's statement list */
  stmt_vec p = {0};
  tree_path(s->func, loop, &p);
  ts_stmt *parent = p.n ? p.v[p.n - 1] : NULL;
  ts_stmt *grand = p.n > 1 ? p.v[p.n - 2] : NULL;
  sv_free(&p);
  ts_stmt *repl = NULL;
  if (parent && ts_stmt_kind_of(parent) == TS_STMT_SEQ) {
    int m = ts_seq_n(parent);
    ts_stmt **items = ts_arena_alloc(a, sizeof *items * (size_t)(m + 1));
    int k = 0;
    for (int i = 0; items && i < m; i++) {
      if (ts_seq_item(parent, i) == loop) items[k++] = nest;
      items[k++] = ts_seq_item(parent, i);
    }
    if (items && (repl = make_seq(a, items, k)))
      tree_replace(s->func, grand, parent, repl);
  } else {
    ts_stmt *two[2] = {nest, loop};
    if ((repl = make_seq(a, two, 2))) tree_replace(s->func, parent, loop, repl);
  }
  if (!repl) {
    sv_free(&above);
    return fail_oom(s, "decompose_reduction");
  }
  ts_block_set_init(b, NULL);
  rv_new_block(s, name, out);
  sv_free(&above);
  sched_refresh(s);
  return TS_OK;
}

/* ========================================================================
 * rfactor
 * ======================================================================== */

typedef enum reducer { RED_ADD, RED_MAX, RED_MIN } reducer;

/* Recognizes `W[idx] = W[idx] op rhs` (either operand order for the
 * commutative ops); *rhs gets the other operand. */
static bool match_update(ts_stmt *st, reducer *op, ts_expr **rhs) {
  ts_expr *v = ts_store_value(st);
  ts_expr_kind k = ts_expr_kind_of(v);
  if (k == TS_EXPR_ADD)
    *op = RED_ADD;
  else if (k == TS_EXPR_MAX)
    *op = RED_MAX;
  else if (k == TS_EXPR_MIN)
    *op = RED_MIN;
  else
    return false;
  for (int side = 0; side < 2; side++) {
    ts_expr *x = ts_expr_operand(v, side);
    if (ts_expr_kind_of(x) != TS_EXPR_LOAD ||
        ts_expr_buffer(x) != ts_store_buffer(st) ||
        ts_expr_n_operands(x) != ts_store_n_indices(st))
      continue;
    bool same = true;
    for (int d = 0; d < ts_store_n_indices(st); d++)
      if (ts_expr_operand(x, d) != ts_store_index(st, d)) same = false;
    if (same) {
      *rhs = ts_expr_operand(v, 1 - side);
      return true;
    }
  }
  return false;
}

static ts_stmt *only_store(ts_stmt *s) {
  if (s && ts_stmt_kind_of(s) == TS_STMT_SEQ && ts_seq_n(s) == 1)
    s = ts_seq_item(s, 0);
  return s && ts_stmt_kind_of(s) == TS_STMT_STORE ? s : NULL;
}

static ts_expr *combine(ts_arena *a, reducer op, ts_expr *x, ts_expr *y) {
  switch (op) {
  case RED_ADD: return ts_binary(a, TS_EXPR_ADD, x, y);
  case RED_MAX: return ts_binary(a, TS_EXPR_MAX, x, y);
  default: return ts_binary(a, TS_EXPR_MIN, x, y);
  }
}

int apply_rfactor(ts_sched *s, inst *in, rv_list *out) {
  ts_stmt *loop;
  int64_t axis;
  int rc = check_arity(s, in, 1, 1, 1);
  if (rc || (rc = in_loop(s, in, 0, &loop)) || (rc = attr_int(s, in, 0, &axis)))
    return rc;
  const char *ln = loop_name(loop);
  stmt_vec rs = {0};
  tree_realizes(ts_for_body(loop), false, &rs);
  if (rs.n != 1) {
    int n = rs.n;
    sv_free(&rs);
    return FAIL(s, TS_ESCHEDULE,
                "rfactor: loop '%s' holds %d blocks (needs exactly one)", ln,
                n);
  }
  ts_stmt *r = rs.v[0];
  sv_free(&rs);
  ts_block *b = ts_realize_block(r);
  const char *bn = ts_block_name(b);
  /* The write-back block rfactor makes covers the whole buffer: under an
   * outer block (a blockized tile) it would read the rf buffer's places
   * that other instances of that block write. */
  ts_stmt *sc = tree_scope(s->func, r);
  if (sc && tree_scope(s->func, sc))
    return FAIL(s, TS_ESCHEDULE,
                "rfactor: block '%s' is inside block '%s' (rfactor needs a "
                "block directly under the root)",
                bn, ts_block_name(ts_realize_block(sc)));
  ts_stmt *st = only_store(ts_block_body(b));
  ts_stmt *init = only_store(ts_block_init(b));
  reducer op;
  ts_expr *rhs;
  if (!ts_block_init(b) || !st || !init)
    return FAIL(s, TS_ESCHEDULE,
                "rfactor: block '%s' is not a reduction with an init and a "
                "single update store",
                bn);
  if (!match_update(st, &op, &rhs))
    return FAIL(s, TS_ESCHEDULE,
                "rfactor: the update of block '%s' is not W = W + x, max(W, "
                "x) or min(W, x)",
                bn);
  ts_buffer *w = ts_store_buffer(st);
  int nd = ts_store_n_indices(st);
  if (ts_store_buffer(init) != w || ts_store_n_indices(init) != nd)
    return FAIL(s, TS_ESCHEDULE,
                "rfactor: the init of block '%s' does not write the updated "
                "element",
                bn);
  for (int d = 0; d < nd; d++)
    if (ts_store_index(init, d) != ts_store_index(st, d))
      return FAIL(s, TS_ESCHEDULE,
                  "rfactor: the init of block '%s' does not write the updated "
                  "element",
                  bn);
  if (op == RED_ADD) {
    ts_expr *iv = ts_store_value(init);
    int64_t x;
    bool zero =
        (ts_expr_is_const_int(iv, &x) && x == 0) ||
        (ts_expr_kind_of(iv) == TS_EXPR_FLOAT && ts_expr_float_value(iv) == 0);
    if (!zero)
      return FAIL(s, TS_ESCHEDULE,
                  "rfactor: the init of sum block '%s' is not zero", bn);
  }
  if (nd + 1 > TS_MAX_DIMS || axis < 0 || axis > nd)
    return FAIL(s, TS_ESCHEDULE,
                "rfactor: factor_axis %lld is not in 0..%d for buffer '%s'",
                (long long)axis, nd, ts_buffer_name(w));
  for (int d = 0; d < nd; d++)
    for (int k = 0; k < ts_block_n_iters(b); k++)
      if (ts_block_iter_kind(b, k) != TS_ITER_SPATIAL &&
          uses_var(ts_store_index(st, d), ts_block_iter_var(b, k)))
        return FAIL(s, TS_ESCHEDULE,
                    "rfactor: block '%s' writes at a reduce iter var", bn);
  /* the loops bound to reduce iters become iters of the rf block */
  stmt_vec above = {0};
  tree_loops_above(s->func, r, &above);
  bool is_red[64] = {0}, loop_red = false;
  if (above.n > 64) rc = FAIL(s, TS_ESCHEDULE, "rfactor: too many loops");
  for (int i = 0; i < above.n && !rc; i++) {
    bool sp = false, red = false;
    for (int k = 0; k < ts_block_n_iters(b); k++) {
      if (!uses_var(ts_realize_value(r, k), ts_for_var(above.v[i]))) continue;
      if (ts_block_iter_kind(b, k) == TS_ITER_SPATIAL)
        sp = true;
      else
        red = true;
    }
    if (sp && red)
      rc = FAIL(s, TS_ESCHEDULE,
                "rfactor: loop '%s' binds both spatial and reduce iters of "
                "block '%s'",
                loop_name(above.v[i]), bn);
    is_red[i] = red;
    if (above.v[i] == loop) loop_red = red;
  }
  for (int k = 0; k < ts_block_n_iters(b) && !rc; k++)
    if (ts_block_iter_kind(b, k) != TS_ITER_SPATIAL &&
        !vars_among_loops(ts_realize_value(r, k), above.v, above.n))
      rc = FAIL(s, TS_ESCHEDULE,
                "rfactor: the reduction of block '%s' also runs over an "
                "enclosing block's iterations",
                bn);
  /* a predicate (an imperfect split's guard) stays on the rf block's
   * update; the rf elements it skips must still get their init, which runs
   * at the first iteration of the reductions the rf block keeps: so there
   * must be such a reduction, and the predicate must hold at its first
   * iteration for every value of the other loops */
  ts_expr *pred = ts_realize_predicate(r);
  if (!rc && pred) {
    bool keeps = false;
    for (int i = 0; i < above.n; i++) keeps |= is_red[i] && above.v[i] != loop;
    if (!keeps)
      rc = FAIL(s, TS_ESCHEDULE,
                "rfactor: block '%s' has a predicate and loop '%s' is its "
                "only reduction loop, so the elements the predicate skips "
                "would never be written",
                bn, ln);
    else if (!holds_at_first(ts_func_arena(s->func), pred, &above, is_red,
                             loop))
      rc = FAIL(s, TS_ESCHEDULE,
                "rfactor: the predicate of block '%s' does not hold at the "
                "first iteration of its other reduction loops, so some "
                "elements of the factored buffer would miss their init",
                bn);
  }
  int64_t lext;
  if (!rc && !loop_red)
    rc = FAIL(s, TS_ESCHEDULE,
              "rfactor: loop '%s' is not bound to a reduce iter of block '%s'",
              ln, bn);
  if (!rc && !loop_const(loop, &lext))
    rc = FAIL(s, TS_ESCHEDULE, "rfactor: loop '%s' has no constant range", ln);
  for (int k = 0; k < ts_block_n_iters(b) && !rc; k++)
    if (ts_block_iter_kind(b, k) == TS_ITER_OPAQUE)
      rc = FAIL(s, TS_ESCHEDULE, "rfactor: block '%s' has an opaque iter var",
                bn);
  /* the top-level statement holding the block must not touch w otherwise */
  ts_stmt *scope = tree_scope(s->func, r);
  ts_stmt *top = rc ? NULL : tree_top_in_scope(s->func, scope, r);
  /* (the block is under the loop, in a scope: not found only when a path
   * could not be stored) */
  if (!rc && (!scope || !top)) rc = fail_oom(s, "rfactor");
  if (!rc) {
    stmt_vec others = {0};
    tree_realizes(top, false, &others);
    for (int i = 0; i < others.n && !rc; i++)
      if (others.v[i] != r && (block_reads(ts_realize_block(others.v[i]), w) ||
                               block_writes(ts_realize_block(others.v[i]), w)))
        rc = FAIL(s, TS_ESCHEDULE,
                  "rfactor: block '%s' in the loop nest of block '%s' also "
                  "uses '%s'",
                  ts_block_name(ts_realize_block(others.v[i])), bn,
                  ts_buffer_name(w));
    sv_free(&others);
  }
  if (rc) {
    sv_free(&above);
    return rc;
  }

  ts_arena *a = ts_func_arena(s->func);
  /* the rf buffer */
  int64_t shape[TS_MAX_DIMS];
  for (int d = 0, k = 0; d <= nd; d++)
    shape[d] = d == axis ? lext : ts_buffer_dim(w, k++);
  char *bbase =
      ts_arena_alloc(ts_func_arena(s->func), strlen(ts_buffer_name(w)) + 4);
  char *bname = NULL, *rfname = NULL;
  if (bbase) {
    sprintf(bbase, "%s_rf", ts_buffer_name(w));
    bname = unique_buffer_name(s->func, bbase);
  }
  ts_buffer *rf =
      bname ? ts_buffer_new(a, bname, ts_buffer_dtype(w), shape, nd + 1) : NULL;
  /* the rf block: spatial iters of b, then one iter per reduction loop */
  char *base = ts_arena_alloc(ts_func_arena(s->func), strlen(bn) + 4);
  if (base) {
    sprintf(base, "%s_rf", bn);
    rfname = unique_block_name(s->func, base);
  }
  ts_block *rb = rfname ? ts_block_new(a, rfname) : NULL;
  /* the write-back block (keeps b's name): spatial iters + the rf iter */
  ts_block *wb = ts_block_new(a, bn);
  int n = ts_block_n_iters(b);
  ts_expr **vals = ts_arena_alloc(a, sizeof *vals * (size_t)(n + above.n + 1));
  if (!rf || !rb || !wb || !vals) {
    sv_free(&above);
    return fail_oom(s, "rfactor");
  }
  /* (out of memory below leaves NULLs in what is built; it is checked
   * before anything is linked into the function) */
  ts_node_map *imap = ts_node_map_create(); /* b's iter -> rf expr */
  ts_node_map *lmap = ts_node_map_create(); /* loop var -> rf iter */
  ts_node_map *wmap = ts_node_map_create();
  int nv = 0;
  ts_expr *loop_iter = NULL;
  for (int k = 0; k < n; k++) {
    if (ts_block_iter_kind(b, k) != TS_ITER_SPATIAL) continue;
    ts_expr *old = ts_block_iter_var(b, k);
    ts_expr *v = ts_var(a, ts_var_name(old), TS_INDEX);
    ts_node_map_put(imap, old, v);
    ts_block_add_iter_var(a, rb, v, ts_block_iter_dom(b, k), TS_ITER_SPATIAL);
    vals[nv++] = ts_realize_value(r, k);
  }
  for (int i = 0; i < above.n; i++) {
    if (!is_red[i]) continue;
    ts_stmt *o = above.v[i];
    char *vn = ts_arena_printf(a, "v%s", loop_name(o));
    ts_expr *v = vn ? ts_var(a, vn, TS_INDEX) : NULL;
    ts_node_map_put(lmap, ts_for_var(o), v);
    ts_block_add_iter_var(a, rb, v, (ts_range){ts_for_min(o), ts_for_extent(o)},
                          o == loop ? TS_ITER_SPATIAL : TS_ITER_REDUCE);
    vals[nv++] = ts_for_var(o);
    if (o == loop) loop_iter = v;
  }
  for (int k = 0; k < n; k++)
    if (ts_block_iter_kind(b, k) != TS_ITER_SPATIAL)
      ts_node_map_put(
          imap, ts_block_iter_var(b, k),
          ts_expr_substitute(a, ts_realize_value(r, k), lmap, NULL));
  ts_expr *ridx[TS_MAX_DIMS];
  for (int d = 0, k = 0; d <= nd; d++)
    ridx[d] = d == axis
                  ? loop_iter
                  : ts_expr_substitute(a, ts_store_index(st, k++), imap, NULL);
  ts_expr *rload = ts_load(a, rf, ridx, nd + 1);
  ts_expr *rrhs = ts_expr_substitute(a, rhs, imap, NULL);
  bool rf_reduces = false;
  for (int i = 0; i < above.n; i++)
    if (is_red[i] && above.v[i] != loop) rf_reduces = true;
  if (rf_reduces) {
    ts_block_set_body(
        rb, ts_store(a, rf, ridx, nd + 1, combine(a, op, rload, rrhs)));
    ts_block_set_init(rb, ts_store(a, rf, ridx, nd + 1, ts_store_value(init)));
  } else {
    /* every element of the rf buffer is written once */
    ts_block_set_body(rb, ts_store(a, rf, ridx, nd + 1,
                                   combine(a, op, ts_store_value(init), rrhs)));
  }
  if (ts_arena_failed(a)) goto oom;
  ts_block_infer_regions(a, rb);
  ts_stmt *rrealize = ts_block_realize(a, rb, vals, nv, pred);
  ts_expr *wvals[TS_MAX_DIMS * 2 + 2];
  ts_stmt *wloops[TS_MAX_DIMS * 2 + 2];
  int nw = 0, nwl = 0;
  for (int k = 0; k < n; k++) {
    if (ts_block_iter_kind(b, k) != TS_ITER_SPATIAL) continue;
    ts_expr *old = ts_block_iter_var(b, k);
    ts_expr *v = ts_var(a, ts_var_name(old), TS_INDEX);
    ts_node_map_put(wmap, old, v);
    ts_range dom = ts_block_iter_dom(b, k);
    ts_block_add_iter_var(a, wb, v, dom, TS_ITER_SPATIAL);
    char *axn = ts_arena_printf(a, "ax%d", nwl);
    ts_expr *ax = axn ? ts_var(a, axn, TS_INDEX) : NULL;
    wloops[nwl++] =
        ts_for(a, ax, ts_index(a, 0), dom.extent, TS_FOR_SERIAL, NULL, NULL);
    wvals[nw++] = ts_add(a, dom.min, ax);
  }
  char *wrn = ts_arena_printf(a, "v%s", ln);
  ts_expr *wr = wrn ? ts_var(a, wrn, TS_INDEX) : NULL;
  ts_block_add_iter_var(
      a, wb, wr, (ts_range){ts_index(a, 0), ts_index(a, lext)}, TS_ITER_REDUCE);
  char *raxn = ts_arena_printf(a, "ax%d", nwl);
  ts_expr *rax = raxn ? ts_var(a, raxn, TS_INDEX) : NULL;
  wloops[nwl++] = ts_for(a, rax, ts_index(a, 0), ts_index(a, lext),
                         TS_FOR_SERIAL, NULL, NULL);
  wvals[nw++] = rax;
  ts_expr *widx[TS_MAX_DIMS], *wridx[TS_MAX_DIMS];
  for (int d = 0; d < nd; d++)
    widx[d] = ts_expr_substitute(a, ts_store_index(st, d), wmap, NULL);
  for (int d = 0, k = 0; d <= nd; d++) wridx[d] = d == axis ? wr : widx[k++];
  ts_expr *wload = ts_load(a, w, widx, nd);
  ts_block_set_body(
      wb, ts_store(a, w, widx, nd,
                   combine(a, op, wload, ts_load(a, rf, wridx, nd + 1))));
  ts_block_set_init(wb, ts_store(a, w, widx, nd, ts_store_value(init)));
  if (ts_arena_failed(a)) goto oom;
  ts_block_infer_regions(a, wb);
  ts_stmt *wnest = ts_block_realize(a, wb, wvals, nw, NULL);
  for (int i = nwl - 1; i >= 0 && wnest; i--) {
    ts_for_set_body(wloops[i], wnest);
    wnest = wloops[i];
  }
  if (!rrealize || !wnest || ts_arena_failed(a)) goto oom;
  ts_node_map_destroy(imap);
  ts_node_map_destroy(lmap);
  ts_node_map_destroy(wmap);
  /* link: the write-back nest follows top; the rf realize replaces b's */
  int pos = tree_index_in(scope, top); /* < 0 only when out of memory */
  if (pos < 0 || !tree_insert(s->func, scope, pos + 1, wnest)) {
    sv_free(&above);
    return fail_oom(s, "rfactor");
  }
  stmt_vec p = {0};
  tree_path(s->func, r, &p);
  tree_replace(s->func, p.n ? p.v[p.n - 1] : NULL, r, rrealize);
  sv_free(&p);
  ts_block_add_alloc(a, ts_realize_block(scope), rf);
  rv_new_block(s, rfname, out);
  sv_free(&above);
  sched_refresh(s);
  return TS_OK;

oom:
  ts_node_map_destroy(imap);
  ts_node_map_destroy(lmap);
  ts_node_map_destroy(wmap);
  sv_free(&above);
  return fail_oom(s, "rfactor");
}
