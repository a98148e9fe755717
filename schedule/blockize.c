/*
 * blockize.c — blockize: wraps a perfect loop nest over one block in a new
 * outer block. Each binding of the inner block is divided into an outer
 * part (loops above the nest, which become the outer block's iter values)
 * and an inner part (the nest's loops): value = outer * c + inner with the
 * inner part covering [0, c). Tensorize builds on it.
 */
#include "schedule/internal.h"

#include <stdlib.h>
#include <string.h>

/* Whether var v is the var of one of the loops. */
static bool is_loop_var(const ts_expr *v, ts_stmt *const *loops, int n) {
  for (int i = 0; i < n; i++)
    if (ts_for_var(loops[i]) == v) return true;
  return false;
}

typedef struct var_ctx {
  ts_stmt *const *inner;
  int n_inner;
  bool has_inner, has_outer;
} var_ctx;

static void var_fn(void *ctx, ts_expr *e) {
  var_ctx *c = ctx;
  if (ts_expr_kind_of(e) != TS_EXPR_VAR) return;
  if (is_loop_var(e, c->inner, c->n_inner))
    c->has_inner = true;
  else
    c->has_outer = true;
}

int blockize_chain(ts_sched *s, const char *prim, ts_stmt *loop,
                   stmt_vec *chain, ts_stmt **realize) {
  ts_stmt *x = loop;
  chain->n = 0;
  for (;;) {
    if (ts_stmt_kind_of(x) == TS_STMT_FOR) {
      sv_push(chain, x);
      x = ts_for_body(x);
      if (x && ts_stmt_kind_of(x) == TS_STMT_SEQ && ts_seq_n(x) == 1)
        x = ts_seq_item(x, 0);
      continue;
    }
    if (ts_stmt_kind_of(x) == TS_STMT_BLOCK_REALIZE) break;
    stmt_vec rs = {0};
    tree_realizes(ts_for_body(loop), false, &rs);
    int n = rs.n;
    sv_free(&rs);
    if (n != 1)
      return FAIL(s, TS_ESCHEDULE,
                  "%s: loop '%s' holds %d blocks (needs exactly one)", prim,
                  loop_name(loop), n);
    return FAIL(s, TS_ESCHEDULE,
                "%s: loop '%s' holds more than one statement (needs a perfect "
                "loop nest over one block)",
                prim, loop_name(chain->v[chain->n - 1]));
  }
  *realize = x;
  return TS_OK;
}

int blockize_plan(ts_sched *s, const char *prim, ts_stmt *loop, bz_plan *p) {
  memset(p, 0, sizeof *p);
  ts_arena *a = ts_func_arena(s->func);
  int rc = blockize_chain(s, prim, loop, &p->chain, &p->inner);
  if (rc) {
    sv_free(&p->chain);
    return rc;
  }
  ts_stmt *r = p->inner;
  ts_block *b = ts_realize_block(r);
  const char *bn = ts_block_name(b);
  if (!tree_scope(s->func, loop)) {
    sv_free(&p->chain);
    return FAIL(s, TS_ESCHEDULE, "%s: loop '%s' is outside every block", prim,
                loop_name(loop));
  }
  var_ctx pc = {p->chain.v, p->chain.n, false, false};
  if (ts_realize_predicate(r))
    ts_expr_walk(ts_realize_predicate(r), var_fn, &pc);
  if (pc.has_outer) {
    sv_free(&p->chain);
    return FAIL(s, TS_ESCHEDULE,
                "%s: the predicate of block '%s' depends on loops above loop "
                "'%s'",
                prim, bn, loop_name(loop));
  }
  ts_var_ranges *ranges = ts_var_ranges_create();
  ranges_of_loops(ranges, p->chain.v, p->chain.n);
  int n = ts_block_n_iters(b);
  p->n = n;
  p->inner_vals = ts_calloc((size_t)(n ? n : 1), sizeof *p->inner_vals);
  p->outer_vals = ts_calloc((size_t)(n ? n : 1), sizeof *p->outer_vals);
  p->outer_vars = ts_calloc((size_t)(n ? n : 1), sizeof *p->outer_vars);
  p->outer_doms = ts_calloc((size_t)(n ? n : 1), sizeof *p->outer_doms);
  if (!p->inner_vals || !p->outer_vals || !p->outer_vars || !p->outer_doms)
    rc = fail_oom(s, prim);
  for (int k = 0; k < n && !rc; k++) {
    ts_expr *e = ts_realize_value(r, k);
    var_ctx c = {p->chain.v, p->chain.n, false, false};
    ts_expr_walk(e, var_fn, &c);
    ts_expr *iv = ts_block_iter_var(b, k);
    int64_t dmin, dext;
    if (!c.has_outer) { /* inner only (or constant) */
      p->inner_vals[k] = e;
      continue;
    }
    if (!iter_const(b, k, &dmin, &dext)) {
      rc = FAIL(s, TS_ESCHEDULE, "%s: block '%s' has a non-constant domain",
                prim, bn);
      break;
    }
    char *on = ts_arena_printf(a, "%s_o", ts_var_name(iv));
    ts_expr *ov = on ? ts_var(a, on, TS_INDEX) : NULL;
    if (!ov) {
      rc = fail_oom(s, prim);
      break;
    }
    p->outer_vars[k] = ov;
    if (!c.has_inner) { /* outer only */
      p->outer_vals[k] = e;
      p->outer_doms[k] = ts_block_iter_dom(b, k);
      p->inner_vals[k] = ov;
      continue;
    }
    linear l;
    char *txt;
    ts_expr *se = ts_simplify(a, e, NULL);
    if (!se) {
      rc = fail_oom(s, prim);
      break;
    }
    if (!linear_of(se, &l)) {
      txt = ts_expr_print(e);
      rc = FAIL(s, TS_ESCHEDULE,
                "%s: cannot divide the binding '%s' of iter '%s' of block "
                "'%s' into outer and inner parts",
                prim, txt, ts_var_name(iv), bn);
      free(txt);
      break;
    }
    /* inner part: the terms of the nest's loops, over [0, c) */
    int64_t lo = 0, hi = 0;
    ts_expr *inner = ts_index(a, 0), *outer = NULL;
    bool ok = true;
    for (int t = 0; t < l.n && ok; t++) {
      int64_t lmin, lext;
      if (is_loop_var(l.vars[t], p->chain.v, p->chain.n)) {
        if (!ts_var_ranges_get(ranges, l.vars[t], &lmin, &lext))
          ok = false;
        else if (l.coefs[t] > 0) {
          lo += l.coefs[t] * lmin;
          hi += l.coefs[t] * (lmin + lext - 1);
        } else {
          ok = false;
        }
        inner = ts_add(
            a, inner, ts_mul(a, (ts_expr *)l.vars[t], ts_index(a, l.coefs[t])));
      }
    }
    int64_t cst = l.constant;
    if (ok && lo != 0) ok = false;
    int64_t cw = hi + 1;
    for (int t = 0; t < l.n && ok; t++)
      if (!is_loop_var(l.vars[t], p->chain.v, p->chain.n)) {
        if (l.coefs[t] % cw) ok = false;
        ts_expr *term =
            ts_mul(a, (ts_expr *)l.vars[t], ts_index(a, l.coefs[t] / cw));
        outer = outer ? ts_add(a, outer, term) : term;
      }
    if (ok && (cst % cw || dmin % cw || dext % cw)) ok = false;
    if (!ok) {
      txt = ts_expr_print(e);
      rc = FAIL(s, TS_ESCHEDULE,
                "%s: cannot divide the binding '%s' of iter '%s' of block "
                "'%s' into outer and inner parts",
                prim, txt, ts_var_name(iv), bn);
      free(txt);
      break;
    }
    outer =
        outer ? ts_add(a, outer, ts_index(a, cst / cw)) : ts_index(a, cst / cw);
    p->outer_vals[k] = ts_simplify(a, outer, NULL);
    p->outer_doms[k] =
        (ts_range){ts_index(a, dmin / cw), ts_index(a, dext / cw)};
    p->inner_vals[k] =
        ts_simplify(a, ts_add(a, ts_mul(a, ov, ts_index(a, cw)), inner), NULL);
    if (!p->outer_vals[k] || !p->outer_doms[k].min ||
        !p->outer_doms[k].extent || !p->inner_vals[k])
      rc = fail_oom(s, prim);
  }
  ts_var_ranges_destroy(ranges);
  if (rc) blockize_plan_free(p);
  return rc;
}

void blockize_plan_free(bz_plan *p) {
  sv_free(&p->chain);
  free(p->inner_vals);
  free(p->outer_vals);
  free(p->outer_vars);
  free(p->outer_doms);
  memset(p, 0, sizeof *p);
}

ts_stmt *blockize_commit(ts_sched *s, ts_stmt *loop, bz_plan *p,
                         char **name_out) {
  ts_arena *a = ts_func_arena(s->func);
  ts_stmt *r = p->inner;
  ts_block *b = ts_realize_block(r);
  char *base =
      ts_arena_alloc(ts_func_arena(s->func), strlen(ts_block_name(b)) + 4);
  char *name = NULL;
  if (base) {
    sprintf(base, "%s_o", ts_block_name(b));
    name = unique_block_name(s->func, base);
  }
  ts_block *ob = name ? ts_block_new(a, name) : NULL;
  ts_expr **vals = ts_malloc(sizeof *vals * (size_t)(p->n ? p->n : 1));
  *name_out = NULL;
  if (!ob || !vals) {
    free(vals);
    return NULL;
  }
  int nv = 0;
  for (int k = 0; k < p->n; k++) {
    if (!p->outer_vars[k]) continue;
    if (ts_block_add_iter_var(a, ob, p->outer_vars[k], p->outer_doms[k],
                              ts_block_iter_kind(b, k)) < 0) {
      free(vals);
      return NULL;
    }
    vals[nv++] = p->outer_vals[k];
  }
  ts_stmt *outer = ts_block_realize(a, ob, vals, nv, NULL);
  free(vals);
  if (!outer) return NULL;
  /* (the realize keeps its values when they cannot be copied: the arena
   * is then failed, and nothing has changed yet) */
  ts_realize_set_values(a, r, p->inner_vals, p->n, ts_realize_predicate(r));
  if (ts_arena_failed(a)) return NULL;
  stmt_vec path = {0};
  tree_path(s->func, loop, &path);
  ts_stmt *parent = path.n ? path.v[path.n - 1] : NULL;
  sv_free(&path);
  tree_replace(s->func, parent, loop, outer);
  ts_block_set_body(ob, loop);
  *name_out = name;
  return outer;
}

int apply_blockize(ts_sched *s, inst *in, rv_list *out) {
  ts_stmt *loop;
  int rc = check_arity(s, in, 1, 1, 0);
  if (rc || (rc = in_loop(s, in, 0, &loop))) return rc;
  bz_plan p;
  if ((rc = blockize_plan(s, "blockize", loop, &p))) return rc;
  char *name;
  ts_stmt *outer = blockize_commit(s, loop, &p, &name);
  blockize_plan_free(&p);
  if (!outer) return fail_oom(s, "blockize");
  rv_new_block(s, name, out);
  sched_refresh(s);
  return TS_OK;
}
