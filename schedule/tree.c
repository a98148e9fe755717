/*
 * tree.c — navigation and editing of the statement tree for the schedule
 * primitives: paths, scopes and loops above a statement, replacing,
 * removing and inserting statements, the in-place rewriter that keeps loop
 * and block-realize nodes (so loop handles stay valid), buffer lookup by
 * name and fresh names.
 */
#include "schedule/internal.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* ---- statement lists ---- */

bool sv_push(stmt_vec *l, ts_stmt *s) {
  if (l->n == l->cap) {
    int cap = l->cap ? l->cap * 2 : 16;
    ts_stmt **v = ts_realloc(l->v, sizeof *v * (size_t)cap);
    if (!v) return false; /* out of memory (counted): dropped */
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n++] = s;
  return true;
}

void sv_free(stmt_vec *l) {
  free(l->v);
  l->v = NULL;
  l->n = l->cap = 0;
}

bool sv_has(const stmt_vec *l, const ts_stmt *s) {
  for (int i = 0; i < l->n; i++)
    if (l->v[i] == s) return true;
  return false;
}

/* ---- children ---- */

/* The number of children of s; a realize's are its block's init and body. */
static int n_children(ts_stmt *s) {
  switch (ts_stmt_kind_of(s)) {
  case TS_STMT_FOR:
  case TS_STMT_LET:
  case TS_STMT_ALLOCATE: return 1;
  case TS_STMT_BLOCK_REALIZE:
  case TS_STMT_IF: return 2;
  case TS_STMT_SEQ: return ts_seq_n(s);
  default: return 0;
  }
}

static ts_stmt *child(ts_stmt *s, int i) {
  switch (ts_stmt_kind_of(s)) {
  case TS_STMT_FOR: return ts_for_body(s);
  case TS_STMT_LET: return ts_let_stmt_body(s);
  case TS_STMT_ALLOCATE: return ts_allocate_body(s);
  case TS_STMT_BLOCK_REALIZE: {
    ts_block *b = ts_realize_block(s);
    return i == 0 ? ts_block_init(b) : ts_block_body(b);
  }
  case TS_STMT_IF: return i == 0 ? ts_if_then(s) : ts_if_else(s);
  case TS_STMT_SEQ: return ts_seq_item(s, i);
  default: return NULL;
  }
}

static bool find_path(ts_stmt *s, const ts_stmt *target, stmt_vec *path) {
  if (!s) return false;
  if (s == target) return true;
  int n = n_children(s);
  bool pushed = sv_push(path, s);
  for (int i = 0; i < n; i++)
    if (find_path(child(s, i), target, path)) return true;
  if (pushed) path->n--;
  return false;
}

bool tree_path(const ts_func *f, const ts_stmt *target, stmt_vec *path) {
  path->n = 0;
  return target && find_path(ts_func_body(f), target, path);
}

bool tree_contains(const ts_stmt *root, const ts_stmt *target) {
  stmt_vec p = {0};
  bool r = find_path((ts_stmt *)root, target, &p);
  sv_free(&p);
  return r;
}

ts_stmt *tree_scope(const ts_func *f, const ts_stmt *stmt) {
  stmt_vec p = {0};
  ts_stmt *r = NULL;
  if (tree_path(f, stmt, &p))
    for (int i = p.n - 1; i >= 0 && !r; i--)
      if (ts_stmt_kind_of(p.v[i]) == TS_STMT_BLOCK_REALIZE) r = p.v[i];
  sv_free(&p);
  return r;
}

void tree_loops_above(const ts_func *f, const ts_stmt *stmt, stmt_vec *out) {
  stmt_vec p = {0};
  out->n = 0;
  if (tree_path(f, stmt, &p)) {
    int start = 0;
    for (int i = 0; i < p.n; i++)
      if (ts_stmt_kind_of(p.v[i]) == TS_STMT_BLOCK_REALIZE) start = i + 1;
    for (int i = start; i < p.n; i++)
      if (ts_stmt_kind_of(p.v[i]) == TS_STMT_FOR) sv_push(out, p.v[i]);
  }
  sv_free(&p);
}

ts_stmt *tree_top_in_scope(const ts_func *f, const ts_stmt *scope,
                           const ts_stmt *stmt) {
  stmt_vec p = {0};
  ts_stmt *r = NULL;
  if (tree_path(f, stmt, &p)) {
    for (int i = 0; i < p.n; i++)
      if (p.v[i] == scope) {
        r = i + 1 < p.n ? p.v[i + 1] : (ts_stmt *)stmt;
        /* skip the seq holding the scope's statements */
        if (r && ts_stmt_kind_of(r) == TS_STMT_SEQ &&
            r == ts_block_body(ts_realize_block(scope)))
          r = i + 2 < p.n ? p.v[i + 2] : (ts_stmt *)stmt;
        break;
      }
  }
  sv_free(&p);
  return r;
}

void tree_replace(ts_func *f, ts_stmt *parent, ts_stmt *old, ts_stmt *repl) {
  if (!parent) {
    /* No parent although `old` is not the body: the path to it was cut
     * short by an allocation failure (counted; the primitive then reports
     * TS_ENOMEM and the schedule refuses every later one). */
    assert(ts_func_body(f) == old || ts_alloc_failures() > 0);
    if (ts_func_body(f) == old) ts_func_set_body(f, repl);
    return;
  }
  switch (ts_stmt_kind_of(parent)) {
  case TS_STMT_FOR: ts_for_set_body(parent, repl); return;
  case TS_STMT_BLOCK_REALIZE: {
    ts_block *b = ts_realize_block(parent);
    if (ts_block_init(b) == old)
      ts_block_set_init(b, repl);
    else
      ts_block_set_body(b, repl);
    return;
  }
  case TS_STMT_SEQ:
    for (int i = 0; i < ts_seq_n(parent); i++)
      if (ts_seq_item(parent, i) == old) {
        ts_seq_set_item(parent, i, repl);
        return;
      }
    assert(0 && "child not in seq");
    return;
  case TS_STMT_IF:
    if (ts_if_then(parent) == old)
      ts_if_set_branches(parent, repl, ts_if_else(parent));
    else
      ts_if_set_branches(parent, ts_if_then(parent), repl);
    return;
  case TS_STMT_LET: ts_let_stmt_set_body(parent, repl); return;
  case TS_STMT_ALLOCATE: ts_allocate_set_body(parent, repl); return;
  default: assert(0 && "statement has no children");
  }
}

/* ---- collecting ---- */

typedef struct collect_ctx {
  stmt_vec *out;
  bool cross_blocks;
  bool want_loops;
  const ts_stmt *root;
} collect_ctx;

static bool collect_enter(void *ctx, ts_stmt *s) {
  collect_ctx *c = ctx;
  ts_stmt_kind k = ts_stmt_kind_of(s);
  if (k == TS_STMT_BLOCK_REALIZE) {
    if (!c->want_loops) sv_push(c->out, s);
    return c->cross_blocks || s == c->root;
  }
  if (k == TS_STMT_FOR && c->want_loops) sv_push(c->out, s);
  return true;
}

void tree_realizes(ts_stmt *s, bool cross_blocks, stmt_vec *out) {
  collect_ctx c = {out, cross_blocks, false, NULL};
  /* a realize given as s is counted but not entered unless crossing */
  ts_visitor v = {collect_enter, NULL, NULL, &c};
  if (s) ts_stmt_walk(s, &v);
}

void tree_loops(ts_stmt *s, bool cross_blocks, stmt_vec *out) {
  collect_ctx c = {out, cross_blocks, true, s};
  ts_visitor v = {collect_enter, NULL, NULL, &c};
  if (s) ts_stmt_walk(s, &v);
}

int body_items(ts_stmt *body, ts_stmt ***items, ts_stmt **one) {
  if (!body) {
    *items = NULL;
    return 0;
  }
  if (ts_stmt_kind_of(body) == TS_STMT_SEQ) {
    int n = ts_seq_n(body);
    *items = n ? ts_malloc(sizeof **items * (size_t)n) : NULL;
    if (!*items) return 0; /* out of memory (counted; sched_run reports it) */
    for (int i = 0; i < n; i++) (*items)[i] = ts_seq_item(body, i);
    return n;
  }
  *one = body;
  *items = ts_malloc(sizeof **items);
  if (!*items) return 0;
  (*items)[0] = body;
  return 1;
}

ts_stmt *make_seq(ts_arena *a, ts_stmt *const *items, int n) {
  if (n > 0 && !items) return NULL;
  stmt_vec flat = {0};
  bool ok = true;
  for (int i = 0; i < n && ok; i++) {
    if (!items[i])
      ok = false;
    else if (ts_stmt_kind_of(items[i]) == TS_STMT_SEQ)
      for (int j = 0; j < ts_seq_n(items[i]) && ok; j++)
        ok = sv_push(&flat, ts_seq_item(items[i], j));
    else
      ok = sv_push(&flat, items[i]);
  }
  ts_stmt *r = !ok ? NULL : flat.n == 1 ? flat.v[0] : ts_seq(a, flat.v, flat.n);
  sv_free(&flat);
  return r;
}

ts_stmt *container_body(ts_stmt *container) {
  if (ts_stmt_kind_of(container) == TS_STMT_FOR) return ts_for_body(container);
  return ts_block_body(ts_realize_block(container));
}

static void set_container_body(ts_stmt *container, ts_stmt *body) {
  if (ts_stmt_kind_of(container) == TS_STMT_FOR)
    ts_for_set_body(container, body);
  else
    ts_block_set_body(ts_realize_block(container), body);
}

int tree_index_in(ts_stmt *container, const ts_stmt *stmt) {
  ts_stmt *body = container_body(container);
  ts_stmt **items, *one;
  int n = body_items(body, &items, &one);
  int r = -1;
  for (int i = 0; i < n && r < 0; i++)
    if (tree_contains(items[i], stmt)) r = i;
  free(items);
  return r;
}

bool tree_insert(ts_func *f, ts_stmt *container, int pos, ts_stmt *item) {
  ts_arena *a = ts_func_arena(f);
  ts_stmt *body = container_body(container);
  ts_stmt **items, *one;
  int n = body_items(body, &items, &one);
  if (!item || (body && !items)) return false;
  if (pos < 0) pos = 0;
  if (pos > n) pos = n;
  ts_stmt **all = ts_arena_alloc(a, sizeof *all * (size_t)(n + 1));
  ts_stmt *seq = NULL;
  if (all) {
    for (int i = 0; i < pos; i++) all[i] = items[i];
    all[pos] = item;
    for (int i = pos; i < n; i++) all[i + 1] = items[i];
    seq = make_seq(a, all, n + 1);
  }
  if (seq) set_container_body(container, seq);
  free(items);
  return seq != NULL;
}

bool tree_remove(ts_func *f, ts_stmt *stmt, stmt_vec *removed_loops) {
  ts_arena *a = ts_func_arena(f);
  stmt_vec p = {0};
  bool found = tree_path(f, stmt, &p);
  /* not found only when the path could not be stored (out of memory) */
  assert(found || ts_alloc_failures() > 0);
  if (!found) return false;
  bool ok = true;
  ts_stmt *victim = stmt;
  for (int i = p.n - 1; i >= 0; i--) {
    ts_stmt *parent = p.v[i];
    ts_stmt_kind k = ts_stmt_kind_of(parent);
    if (k == TS_STMT_FOR) {
      /* the loop holds only the victim: it goes too */
      if (removed_loops) sv_push(removed_loops, parent);
      victim = parent;
      continue;
    }
    if (k == TS_STMT_SEQ) {
      int n = ts_seq_n(parent);
      ts_stmt **rest = ts_arena_alloc(a, sizeof *rest * (size_t)(n ? n : 1));
      if (!rest) {
        ok = false;
        break;
      }
      int m = 0;
      for (int j = 0; j < n; j++)
        if (ts_seq_item(parent, j) != victim)
          rest[m++] = ts_seq_item(parent, j);
      if (m == 0) {
        victim = parent;
        continue;
      }
      ts_stmt *repl = make_seq(a, rest, m);
      if (repl) tree_replace(f, i > 0 ? p.v[i - 1] : NULL, parent, repl);
      ok = repl != NULL;
      break;
    }
    /* a block (or if/let/allocate) keeps an empty body */
    ts_stmt *empty = ts_seq(a, NULL, 0);
    if (empty) tree_replace(f, parent, victim, empty);
    ok = empty != NULL;
    break;
  }
  sv_free(&p);
  return ok;
}

/* ---- in-place rewriting ---- */

/* The rewritten e; e itself when the rewrite ran out of memory (a NULL
 * result: the failure is counted, and the primitive reports it). */
static ts_expr *rx(ts_arena *a, const rewriter *r, ts_expr *e) {
  if (!e || !r->expr) return e;
  ts_expr *x = r->expr(r->ctx, a, e);
  return x ? x : e;
}

/* (A statement that cannot be rebuilt for lack of memory stays as it was;
 * the rewrite goes on with the rest, and the primitive reports the failure
 * counted.) */
ts_stmt *rewrite_stmt(ts_arena *a, ts_stmt *s, const rewriter *r) {
  if (!s) return NULL;
  switch (ts_stmt_kind_of(s)) {
  case TS_STMT_FOR: {
    ts_expr *mn = rx(a, r, ts_for_min(s)), *ex = rx(a, r, ts_for_extent(s));
    if (mn != ts_for_min(s) || ex != ts_for_extent(s))
      ts_for_set_range(s, mn, ex);
    ts_stmt *body = rewrite_stmt(a, ts_for_body(s), r);
    if (body != ts_for_body(s)) ts_for_set_body(s, body);
    return s;
  }
  case TS_STMT_BLOCK_REALIZE: {
    int n = ts_realize_n_values(s);
    bool changed = false;
    ts_expr **vals = ts_arena_alloc(a, sizeof *vals * (size_t)(n ? n : 1));
    for (int i = 0; vals && i < n; i++) {
      vals[i] = rx(a, r, ts_realize_value(s, i));
      if (vals[i] != ts_realize_value(s, i)) changed = true;
    }
    ts_expr *pred = rx(a, r, ts_realize_predicate(s));
    if (pred != ts_realize_predicate(s)) changed = true;
    if (changed && vals) ts_realize_set_values(a, s, vals, n, pred);
    if (r->into_blocks) {
      ts_block *b = ts_realize_block(s);
      ts_stmt *init = rewrite_stmt(a, ts_block_init(b), r);
      if (init != ts_block_init(b)) ts_block_set_init(b, init);
      ts_stmt *body = rewrite_stmt(a, ts_block_body(b), r);
      if (body != ts_block_body(b)) ts_block_set_body(b, body);
    }
    return s;
  }
  case TS_STMT_STORE: {
    int n = ts_store_n_indices(s);
    bool changed = false;
    ts_expr *idx[TS_MAX_DIMS + 1];
    ts_expr **ix =
        n <= TS_MAX_DIMS + 1 ? idx : ts_arena_alloc(a, sizeof *ix * (size_t)n);
    if (!ix) return s;
    for (int i = 0; i < n; i++) {
      ix[i] = rx(a, r, ts_store_index(s, i));
      if (ix[i] != ts_store_index(s, i)) changed = true;
    }
    ts_expr *v = rx(a, r, ts_store_value(s));
    ts_stmt *out = s;
    if (changed || v != ts_store_value(s))
      out = ts_store(a, ts_store_buffer(s), ix, n, v);
    if (!out) return s;

    if (r->store) {
      ts_stmt *st = r->store(r->ctx, a, out);
      if (st) out = st;
    }
    return out;
  }
  case TS_STMT_SEQ:
    for (int i = 0; i < ts_seq_n(s); i++) {
      ts_stmt *it = rewrite_stmt(a, ts_seq_item(s, i), r);
      if (it != ts_seq_item(s, i)) ts_seq_set_item(s, i, it);
    }
    return s;
  case TS_STMT_IF: {
    ts_expr *c = rx(a, r, ts_if_cond(s));
    ts_stmt *t = rewrite_stmt(a, ts_if_then(s), r);
    ts_stmt *e = rewrite_stmt(a, ts_if_else(s), r);
    if (c != ts_if_cond(s)) {
      ts_stmt *x = ts_if(a, c, t, e);
      if (x) return x;
    }
    if (t != ts_if_then(s) || e != ts_if_else(s)) ts_if_set_branches(s, t, e);
    return s;
  }
  case TS_STMT_EVALUATE: {
    ts_expr *v = rx(a, r, ts_evaluate_value(s));
    ts_stmt *x = v == ts_evaluate_value(s) ? s : ts_evaluate(a, v);
    return x ? x : s;
  }
  case TS_STMT_LET: {
    ts_expr *v = rx(a, r, ts_let_stmt_value(s));
    ts_stmt *body = rewrite_stmt(a, ts_let_stmt_body(s), r);
    ts_stmt *x = v != ts_let_stmt_value(s)
                     ? ts_let_stmt(a, ts_let_stmt_var(s), v, body)
                     : NULL;
    if (x) return x;
    if (body != ts_let_stmt_body(s)) ts_let_stmt_set_body(s, body);
    return s;
  }
  case TS_STMT_ALLOCATE: {
    ts_stmt *body = rewrite_stmt(a, ts_allocate_body(s), r);
    if (body != ts_allocate_body(s)) ts_allocate_set_body(s, body);
    return s;
  }
  default: return s;
  }
}

/* ---- names ---- */

typedef struct name_ctx {
  const char *name;
  bool used;
  bool buffers; /* look at buffer names, else block names */
} name_ctx;

static void name_check_buffer(name_ctx *c, const ts_buffer *b) {
  if (b && strcmp(ts_buffer_name(b), c->name) == 0) c->used = true;
}

static void name_expr(void *ctx, ts_expr *e) {
  name_ctx *c = ctx;
  ts_expr_kind k = ts_expr_kind_of(e);
  if (k == TS_EXPR_LOAD || k == TS_EXPR_ADDRESS_OF)
    name_check_buffer(c, ts_expr_buffer(e));
}

static void name_visit_expr(void *ctx, ts_expr *e) {
  ts_expr_walk(e, name_expr, ctx);
}

static bool name_enter(void *ctx, ts_stmt *s) {
  name_ctx *c = ctx;
  ts_stmt_kind k = ts_stmt_kind_of(s);
  if (k == TS_STMT_BLOCK_REALIZE) {
    ts_block *b = ts_realize_block(s);
    if (!c->buffers && strcmp(ts_block_name(b), c->name) == 0) c->used = true;
    if (c->buffers)
      for (int i = 0; i < ts_block_n_allocs(b); i++)
        name_check_buffer(c, ts_block_alloc(b, i));
  } else if (k == TS_STMT_STORE && c->buffers) {
    name_check_buffer(c, ts_store_buffer(s));
  } else if (k == TS_STMT_ALLOCATE && c->buffers) {
    name_check_buffer(c, ts_allocate_buffer(s));
  }
  return !c->used;
}

static bool name_used(const ts_func *f, const char *name, bool buffers) {
  name_ctx c = {name, false, buffers};
  if (buffers)
    for (int i = 0; i < ts_func_n_params(f); i++)
      name_check_buffer(&c, ts_func_param(f, i));
  ts_visitor v = {name_enter, NULL, buffers ? name_visit_expr : NULL, &c};
  if (!c.used) ts_stmt_walk(ts_func_body(f), &v);
  return c.used;
}

static char *unique_name(const ts_func *f, const char *base, bool buffers) {
  size_t cap = strlen(base) + 24;
  char *name = ts_arena_alloc(ts_func_arena(f), cap);
  if (!name) return NULL;
  snprintf(name, cap, "%s", base);
  for (int i = 1; name_used(f, name, buffers) ||
                  (buffers && ts_text_name_is_reserved(name));
       i++)
    snprintf(name, cap, "%s_%d", base, i);
  return name;
}

char *unique_block_name(const ts_func *f, const char *base) {
  return unique_name(f, base, false);
}
char *unique_buffer_name(const ts_func *f, const char *base) {
  return unique_name(f, base, true);
}

/* ---- buffers of blocks ---- */

bool block_reads(const ts_block *b, const ts_buffer *buf) {
  for (int i = 0; i < ts_block_n_reads(b); i++)
    if (ts_block_read(b, i)->buffer == buf) return true;
  return false;
}

bool block_writes(const ts_block *b, const ts_buffer *buf) {
  for (int i = 0; i < ts_block_n_writes(b); i++)
    if (ts_block_write(b, i)->buffer == buf) return true;
  return false;
}

int block_buffer(ts_sched *s, const ts_block *b, const char *name,
                 bool want_read, bool want_write, ts_buffer **out) {
  ts_buffer *found = NULL;
  for (int pass = 0; pass < 2; pass++) {
    if ((pass == 0 && !want_read) || (pass == 1 && !want_write)) continue;
    int n = pass == 0 ? ts_block_n_reads(b) : ts_block_n_writes(b);
    for (int i = 0; i < n; i++) {
      ts_buffer *x = pass == 0 ? ts_block_read(b, i)->buffer
                               : ts_block_write(b, i)->buffer;
      if (strcmp(ts_buffer_name(x), name) != 0 || x == found) continue;
      if (found)
        return FAIL(s, TS_EINVAL, "two buffers named '%s' in block '%s'", name,
                    ts_block_name(b));
      found = x;
    }
  }
  if (!found)
    return FAIL(s, TS_ENOTFOUND, "block '%s' does not %s a buffer named '%s'",
                ts_block_name(b),
                want_read && want_write ? "access"
                : want_read             ? "read"
                                        : "write",
                name);
  *out = found;
  return TS_OK;
}

bool is_param(const ts_func *f, const ts_buffer *buf) {
  for (int i = 0; i < ts_func_n_params(f); i++)
    if (ts_func_param(f, i) == buf) return true;
  return false;
}

typedef struct alloc_ctx {
  const ts_buffer *buf;
  ts_stmt *site;
} alloc_ctx;

static bool alloc_enter(void *ctx, ts_stmt *s) {
  alloc_ctx *c = ctx;
  if (c->site) return false;
  if (ts_stmt_kind_of(s) == TS_STMT_BLOCK_REALIZE) {
    ts_block *b = ts_realize_block(s);
    for (int i = 0; i < ts_block_n_allocs(b); i++)
      if (ts_block_alloc(b, i) == c->buf) c->site = s;
  }
  return !c->site;
}

ts_stmt *alloc_site(const ts_func *f, const ts_buffer *buf) {
  alloc_ctx c = {buf, NULL};
  ts_visitor v = {alloc_enter, NULL, NULL, &c};
  ts_stmt_walk(ts_func_body(f), &v);
  return c.site;
}

const char *loop_name(const ts_stmt *loop) {
  return ts_var_name(ts_for_var(loop));
}

typedef struct uses_ctx {
  const ts_expr *var;
  const ts_node_map *set;
  bool found;
} uses_ctx;

static void uses_fn(void *ctx, ts_expr *e) {
  uses_ctx *c = ctx;
  if (ts_expr_kind_of(e) != TS_EXPR_VAR) return;
  if (e == c->var || (c->set && ts_node_map_get(c->set, e))) c->found = true;
}

bool uses_var(const ts_expr *e, const ts_expr *v) {
  uses_ctx c = {v, NULL, false};
  if (e) ts_expr_walk((ts_expr *)e, uses_fn, &c);
  return c.found;
}

bool uses_any_var(const ts_expr *e, const ts_node_map *set) {
  uses_ctx c = {NULL, set, false};
  if (e) ts_expr_walk((ts_expr *)e, uses_fn, &c);
  return c.found;
}

bool loop_const(const ts_stmt *loop, int64_t *extent) {
  int64_t mn, ex;
  if (!ts_expr_is_const_int(ts_for_min(loop), &mn) || mn != 0) return false;
  if (!ts_expr_is_const_int(ts_for_extent(loop), &ex) || ex <= 0) return false;
  *extent = ex;
  return true;
}

bool iter_const(const ts_block *b, int i, int64_t *min, int64_t *extent) {
  ts_range d = ts_block_iter_dom(b, i);
  return ts_expr_is_const_int(d.min, min) &&
         ts_expr_is_const_int(d.extent, extent) && *extent > 0;
}

void ranges_of_loops(ts_var_ranges *r, ts_stmt *const *loops, int n) {
  for (int i = 0; i < n; i++) {
    int64_t mn, ex;
    if (ts_expr_is_const_int(ts_for_min(loops[i]), &mn) &&
        ts_expr_is_const_int(ts_for_extent(loops[i]), &ex) && ex > 0)
      ts_var_ranges_set(r, ts_for_var(loops[i]), mn, ex);
  }
}

typedef struct among_ctx {
  ts_stmt *const *loops;
  int n;
  bool ok;
} among_ctx;

static void among_fn(void *ctx, ts_expr *e) {
  among_ctx *c = ctx;
  if (ts_expr_kind_of(e) != TS_EXPR_VAR) return;
  for (int i = 0; i < c->n; i++)
    if (ts_for_var(c->loops[i]) == e) return;
  c->ok = false;
}

bool vars_among_loops(const ts_expr *e, ts_stmt *const *loops, int n) {
  among_ctx c = {loops, n, true};
  if (e) ts_expr_walk((ts_expr *)e, among_fn, &c);
  return c.ok;
}
