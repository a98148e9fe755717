/*
 * walk.c — generic traversal of expressions and statements, the node map,
 * bottom-up expression rewriting, substitution, and deep copies of
 * statement trees and whole functions.
 */
#include "internal.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* ---- node map: open addressing on pointer keys ---- */

struct ts_node_map {
  const void **keys;
  void **values;
  size_t cap, size;
};

static size_t hash_ptr(const void *p) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return (size_t)x;
}

/* What ts_node_map_create returns when memory ran out: a map that stays
 * empty (puts are dropped; the failure is counted by ts_alloc_failures and
 * the public function doing the work reports it). */
static ts_node_map dead_map;

ts_node_map *ts_node_map_create(void) {
  ts_node_map *m = ts_calloc(1, sizeof *m);
  return m ? m : &dead_map;
}

void ts_node_map_destroy(ts_node_map *m) {
  if (!m || m == &dead_map) return;
  free(m->keys);
  free(m->values);
  free(m);
}

/* Whether the map could grow (out of memory: it stays as it is). */
static bool map_grow(ts_node_map *m) {
  if (m == &dead_map) return false;
  size_t cap = m->cap ? m->cap * 2 : 64;
  const void **keys = ts_calloc(cap, sizeof *keys);
  void **values = ts_calloc(cap, sizeof *values);
  if (!keys || !values) {
    free(keys);
    free(values);
    return false;
  }
  for (size_t i = 0; i < m->cap; i++) {
    if (!m->keys[i]) continue;
    size_t j = hash_ptr(m->keys[i]) & (cap - 1);
    while (keys[j]) j = (j + 1) & (cap - 1);
    keys[j] = m->keys[i];
    values[j] = m->values[i];
  }
  free(m->keys);
  free(m->values);
  m->keys = keys;
  m->values = values;
  m->cap = cap;
  return true;
}

void ts_node_map_put(ts_node_map *m, const void *key, void *value) {
  assert(key);
  if ((m->size + 1) * 2 > m->cap && !map_grow(m)) return; /* dropped */
  size_t j = hash_ptr(key) & (m->cap - 1);
  while (m->keys[j] && m->keys[j] != key) j = (j + 1) & (m->cap - 1);
  if (!m->keys[j]) m->size++;
  m->keys[j] = key;
  m->values[j] = value;
}

void *ts_node_map_get(const ts_node_map *m, const void *key) {
  if (!m || !m->cap || !key) return NULL;
  size_t j = hash_ptr(key) & (m->cap - 1);
  while (m->keys[j]) {
    if (m->keys[j] == key) return m->values[j];
    j = (j + 1) & (m->cap - 1);
  }
  return NULL;
}

size_t ts_node_map_size(const ts_node_map *m) { return m ? m->size : 0; }

/* ---- walking ---- */

void ts_expr_walk(ts_expr *e, void (*fn)(void *ctx, ts_expr *e), void *ctx) {
  if (!e) return;
  fn(ctx, e);
  if (e->kind == TS_EXPR_LET) fn(ctx, e->u.let.var);
  int n = ts_expr_n_operands(e);
  for (int i = 0; i < n; i++) ts_expr_walk(ts_expr_operand(e, i), fn, ctx);
}

static void visit(const ts_visitor *v, ts_expr *e) {
  if (e && v->visit_expr) v->visit_expr(v->ctx, e);
}

static void visit_regions(const ts_visitor *v, ts_region *r, int n) {
  for (int i = 0; i < n; i++)
    for (int d = 0; d < r[i].ndim; d++) {
      visit(v, r[i].ranges[d].min);
      visit(v, r[i].ranges[d].extent);
    }
}

void ts_stmt_walk(ts_stmt *s, const ts_visitor *v) {
  if (!s) return;
  if (v->enter_stmt && !v->enter_stmt(v->ctx, s)) return;
  switch (s->kind) {
  case TS_STMT_FOR:
    visit(v, s->u.loop.min);
    visit(v, s->u.loop.extent);
    ts_stmt_walk(s->u.loop.body, v);
    break;
  case TS_STMT_BLOCK_REALIZE: {
    ts_block *b = s->u.realize.block;
    for (int i = 0; i < s->u.realize.n_values; i++)
      visit(v, s->u.realize.values[i]);
    visit(v, s->u.realize.predicate);
    for (int i = 0; i < b->n_iters; i++) {
      visit(v, b->iters[i].dom.min);
      visit(v, b->iters[i].dom.extent);
    }
    visit_regions(v, b->reads, b->n_reads);
    visit_regions(v, b->writes, b->n_writes);
    ts_stmt_walk(b->init, v);
    ts_stmt_walk(b->body, v);
    break;
  }
  case TS_STMT_STORE:
    for (int i = 0; i < s->u.store.n_indices; i++)
      visit(v, s->u.store.indices[i]);
    visit(v, s->u.store.value);
    break;
  case TS_STMT_SEQ:
    for (int i = 0; i < s->u.seq.n; i++) ts_stmt_walk(s->u.seq.items[i], v);
    break;
  case TS_STMT_IF:
    visit(v, s->u.cond.cond);
    ts_stmt_walk(s->u.cond.then_s, v);
    ts_stmt_walk(s->u.cond.else_s, v);
    break;
  case TS_STMT_EVALUATE: visit(v, s->u.eval.value); break;
  case TS_STMT_LET:
    visit(v, s->u.let.value);
    ts_stmt_walk(s->u.let.body, v);
    break;
  case TS_STMT_ALLOCATE: ts_stmt_walk(s->u.alloc.body, v); break;
  }
  if (v->leave_stmt) v->leave_stmt(v->ctx, s);
}

/* ---- depth (TS_TIR_MAX_DEPTH's counting) ---- */

int ts_expr_depth(const ts_expr *e, int limit) {
  if (!e) return 0;
  if (limit <= 0) return 1; /* deeper than the caller's limit */
  int deepest = 0, n = ts_expr_n_operands(e);
  for (int i = 0; i < n && deepest < limit; i++) {
    int d = ts_expr_depth(ts_expr_operand(e, i), limit - 1);
    if (d > deepest) deepest = d;
  }
  return 1 + deepest;
}

/* The deeper of *deepest and e's depth within limit. */
static void deeper_expr(int *deepest, const ts_expr *e, int limit) {
  if (*deepest >= limit) return;
  int d = ts_expr_depth(e, limit);
  if (d > *deepest) *deepest = d;
}

static void deeper_regions(int *deepest, const ts_region *r, int n, int limit) {
  for (int i = 0; i < n; i++)
    for (int d = 0; d < r[i].ndim; d++) {
      deeper_expr(deepest, r[i].ranges[d].min, limit);
      deeper_expr(deepest, r[i].ranges[d].extent, limit);
    }
}

static void deeper_stmt(int *deepest, const ts_stmt *s, int limit) {
  if (*deepest >= limit) return;
  int d = ts_stmt_depth(s, limit);
  if (d > *deepest) *deepest = d;
}

int ts_stmt_depth(const ts_stmt *s, int limit) {
  if (!s) return 0;
  if (limit <= 0) return 1;
  int m = 0, l = limit - 1;
  switch (s->kind) {
  case TS_STMT_FOR:
    deeper_expr(&m, s->u.loop.min, l);
    deeper_expr(&m, s->u.loop.extent, l);
    deeper_stmt(&m, s->u.loop.body, l);
    break;
  case TS_STMT_BLOCK_REALIZE: {
    const ts_block *b = s->u.realize.block;
    for (int i = 0; i < s->u.realize.n_values; i++)
      deeper_expr(&m, s->u.realize.values[i], l);
    deeper_expr(&m, s->u.realize.predicate, l);
    for (int i = 0; i < b->n_iters; i++) {
      deeper_expr(&m, b->iters[i].dom.min, l);
      deeper_expr(&m, b->iters[i].dom.extent, l);
    }
    deeper_regions(&m, b->reads, b->n_reads, l);
    deeper_regions(&m, b->writes, b->n_writes, l);
    deeper_stmt(&m, b->init, l);
    deeper_stmt(&m, b->body, l);
    break;
  }
  case TS_STMT_STORE:
    for (int i = 0; i < s->u.store.n_indices; i++)
      deeper_expr(&m, s->u.store.indices[i], l);
    deeper_expr(&m, s->u.store.value, l);
    break;
  case TS_STMT_SEQ:
    for (int i = 0; i < s->u.seq.n; i++) deeper_stmt(&m, s->u.seq.items[i], l);
    break;
  case TS_STMT_IF:
    deeper_expr(&m, s->u.cond.cond, l);
    deeper_stmt(&m, s->u.cond.then_s, l);
    deeper_stmt(&m, s->u.cond.else_s, l);
    break;
  case TS_STMT_EVALUATE: deeper_expr(&m, s->u.eval.value, l); break;
  case TS_STMT_LET:
    deeper_expr(&m, s->u.let.value, l);
    deeper_stmt(&m, s->u.let.body, l);
    break;
  case TS_STMT_ALLOCATE: deeper_stmt(&m, s->u.alloc.body, l); break;
  }
  return 1 + m;
}

int ts_func_check_depth(const ts_func *f, ts_error *err) {
  if (ts_stmt_depth(f->body, TS_TIR_MAX_DEPTH) > TS_TIR_MAX_DEPTH)
    return TS_ERR(err, TS_EVERIFY,
                  "function '%s' is nested deeper than %d levels (each "
                  "statement and each operator of an expression, such as a "
                  "chain a + b + c, is one level)",
                  f->name ? f->name : "?", TS_TIR_MAX_DEPTH);
  return TS_OK;
}

/* ---- bottom-up rewriting ---- */

ts_expr *ts_expr_mutate(ts_arena *a, ts_expr *e, ts_expr_post_fn post,
                        void *ctx) {
  int n = ts_expr_n_operands(e);
  ts_expr *local[8];
  ts_expr **ops = n <= 8 ? local : ts_malloc(sizeof *ops * (size_t)n);
  if (!ops) return e; /* out of memory (counted): left as it is */
  for (int i = 0; i < n; i++)
    ops[i] = ts_expr_mutate(a, ts_expr_operand(e, i), post, ctx);
  ts_expr *r = n ? ts_expr_rebuild(a, e, ops) : e;
  if (ops != local) free(ops);
  return post ? post(ctx, a, r) : r;
}

/* Builds a node like e with new operands and buffer, folding constants. */
static ts_expr *rebuild_folding(ts_arena *a, const ts_expr *e, ts_expr **ops,
                                ts_buffer *buffer) {
  int n = ts_expr_n_operands(e);
  switch (e->kind) {
  case TS_EXPR_NOT: return ts_not(a, ops[0]);
  case TS_EXPR_CAST: return ts_cast(a, e->dtype, ops[0]);
  case TS_EXPR_BROADCAST: return ts_broadcast(a, ops[0], e->dtype.lanes);
  case TS_EXPR_SELECT: return ts_select(a, ops[0], ops[1], ops[2]);
  case TS_EXPR_RAMP: return ts_ramp(a, ops[0], ops[1], e->dtype.lanes);
  case TS_EXPR_LOAD: return ts_load(a, buffer, ops, n);
  case TS_EXPR_ADDRESS_OF: return ts_address_of(a, buffer, ops, n);
  case TS_EXPR_CALL: return ts_call(a, e->dtype, e->u.call.name, ops, n);
  default:
    assert(ts_expr_is_binary((ts_expr_kind)e->kind));
    return ts_binary(a, (ts_expr_kind)e->kind, ops[0], ops[1]);
  }
}

typedef struct subst_ctx {
  const ts_node_map *vars, *buffers;
  bool copy_all; /* deep copy: allocate every node in the target arena */
} subst_ctx;

static ts_expr *subst_expr(ts_arena *a, ts_expr *e, subst_ctx *c);

static ts_expr *subst_expr(ts_arena *a, ts_expr *e, subst_ctx *c) {
  if (!e) return NULL;
  switch (e->kind) {
  case TS_EXPR_VAR: {
    ts_expr *r = ts_node_map_get(c->vars, e);
    return r ? r : e;
  }
  case TS_EXPR_INT:
    return c->copy_all ? ts_int(a, e->dtype, e->u.int_value) : e;
  case TS_EXPR_FLOAT: {
    if (!c->copy_all) return e;
    ts_expr *r = ts_float(a, e->dtype, 0);
    r->u.float_value = e->u.float_value;
    return r;
  }
  case TS_EXPR_LET: {
    ts_expr *var = e->u.let.var;
    ts_expr *value = subst_expr(a, e->u.let.value, c);
    if (c->copy_all) {
      /* A let defines a var: copies get a fresh one. */
      ts_expr *nv = ts_var(a, var->u.var.name, var->dtype);
      ts_node_map_put((ts_node_map *)c->vars, var, nv);
      var = nv;
    }
    ts_expr *body = subst_expr(a, e->u.let.body, c);
    if (!c->copy_all && value == e->u.let.value && body == e->u.let.body)
      return e;
    return ts_let(a, var, value, body);
  }
  default: break;
  }
  int n = ts_expr_n_operands(e);
  ts_expr *local[8];
  ts_expr **ops = n <= 8 ? local : ts_malloc(sizeof *ops * (size_t)n);
  if (!ops) return e; /* out of memory (counted): left as it is */
  bool changed = c->copy_all;
  for (int i = 0; i < n; i++) {
    ops[i] = subst_expr(a, ts_expr_operand(e, i), c);
    if (ops[i] != ts_expr_operand(e, i)) changed = true;
  }
  ts_buffer *buffer = NULL;
  if (e->kind == TS_EXPR_LOAD || e->kind == TS_EXPR_ADDRESS_OF) {
    buffer = ts_node_map_get(c->buffers, e->u.load.buffer);
    if (buffer)
      changed = true;
    else
      buffer = e->u.load.buffer;
  }
  ts_expr *r = e;
  if (changed) {
    /* A deep copy keeps the exact structure; a substitution folds. */
    if (c->copy_all) {
      if (e->kind == TS_EXPR_LOAD)
        r = ts_load(a, buffer, ops, n);
      else if (e->kind == TS_EXPR_ADDRESS_OF)
        r = ts_address_of(a, buffer, ops, n);
      else
        r = ts_expr_rebuild(a, e, ops);
      if (r == e) { /* rebuild shares when operands are identical */
        r = ts_arena_alloc(a, sizeof *r);
        if (r) {
          *r = *e;
          if (e->kind == TS_EXPR_CALL &&
              !(r->u.call.name = ts_arena_strdup(a, e->u.call.name)))
            r = NULL;
        }
      }
    } else {
      r = rebuild_folding(a, e, ops, buffer);
    }
  }
  if (ops != local) free(ops);
  return r;
}

ts_expr *ts_expr_substitute(ts_arena *a, ts_expr *e, const ts_node_map *vars,
                            const ts_node_map *buffers) {
  subst_ctx c = {vars, buffers, false};
  return subst_expr(a, e, &c);
}

/* ---- statement copy and substitution ---- */

typedef struct copy_ctx {
  ts_arena *a;
  ts_node_map *vars;    /* var -> var or expr */
  ts_node_map *buffers; /* buffer -> buffer */
  ts_node_map *blocks;  /* block -> block (deep copy only) */
  bool deep;
} copy_ctx;

static ts_expr *cx(copy_ctx *c, ts_expr *e) {
  subst_ctx s = {c->vars, c->buffers, c->deep};
  return subst_expr(c->a, e, &s);
}

static ts_expr *new_def_var(copy_ctx *c, ts_expr *v) {
  if (!c->deep) return v;
  ts_expr *nv = ts_var(c->a, v->u.var.name, v->dtype);
  ts_node_map_put(c->vars, v, nv);
  return nv;
}

static ts_buffer *map_buffer(copy_ctx *c, ts_buffer *b) {
  ts_buffer *r = ts_node_map_get(c->buffers, b);
  return r ? r : b;
}

static ts_buffer *new_def_buffer(copy_ctx *c, ts_buffer *b) {
  if (!c->deep) return map_buffer(c, b);
  ts_buffer *nb = ts_buffer_new(c->a, b->name, b->dtype, b->shape, b->ndim);
  if (!nb) return NULL;
  nb->has_strides = b->has_strides;
  memcpy(nb->strides, b->strides, sizeof b->strides);
  ts_buffer_set_scope(c->a, nb, b->scope);
  nb->align = b->align;
  ts_node_map_put(c->buffers, b, nb);
  return nb;
}

static void copy_anns(ts_arena *a, ann_list *dst, const ann_list *src) {
  memset(dst, 0, sizeof *dst);
  for (int i = 0; i < src->n; i++) ann_list_set(a, dst, src->items[i]);
}

static ts_region *copy_region_list(copy_ctx *c, const ts_region *r, int n) {
  if (n <= 0) return NULL;
  ts_region *out = ts_arena_alloc(c->a, sizeof *out * (size_t)n);
  if (!out) return NULL;
  for (int i = 0; i < n; i++) {
    out[i].buffer = map_buffer(c, r[i].buffer);
    out[i].ndim = r[i].ndim;
    out[i].ranges = ts_arena_alloc(
        c->a, sizeof(ts_range) * (size_t)(r[i].ndim ? r[i].ndim : 1));
    if (!out[i].ranges) return NULL;
    for (int d = 0; d < r[i].ndim; d++) {
      out[i].ranges[d].min = cx(c, r[i].ranges[d].min);
      out[i].ranges[d].extent = cx(c, r[i].ranges[d].extent);
    }
  }
  return out;
}

static ts_stmt *copy_stmt(copy_ctx *c, const ts_stmt *s);

static ts_block *copy_block(copy_ctx *c, const ts_block *b) {
  ts_arena *a = c->a;
  ts_block *nb = ts_block_new(a, b->name);
  if (!nb) return NULL;
  if (c->deep) ts_node_map_put(c->blocks, b, nb);
  for (int i = 0; i < b->n_iters; i++) {
    ts_range dom = {cx(c, b->iters[i].dom.min), cx(c, b->iters[i].dom.extent)};
    ts_expr *v = new_def_var(c, b->iters[i].var);
    ts_block_add_iter_var(a, nb, v, dom, (ts_iter_kind)b->iters[i].kind);
  }
  for (int i = 0; i < b->n_allocs; i++)
    ts_block_add_alloc(a, nb, new_def_buffer(c, b->allocs[i]));
  nb->reads = copy_region_list(c, b->reads, b->n_reads);
  nb->n_reads = nb->reads ? b->n_reads : 0;
  nb->writes = copy_region_list(c, b->writes, b->n_writes);
  nb->n_writes = nb->writes ? b->n_writes : 0;
  nb->init = b->init ? copy_stmt(c, b->init) : NULL;
  nb->body = b->body ? copy_stmt(c, b->body) : NULL;
  copy_anns(a, &nb->anns, &b->anns);
  return nb;
}

static ts_stmt *copy_stmt(copy_ctx *c, const ts_stmt *s) {
  if (!s) return NULL;
  ts_arena *a = c->a;
  switch (s->kind) {
  case TS_STMT_FOR: {
    ts_expr *min = cx(c, s->u.loop.min), *extent = cx(c, s->u.loop.extent);
    ts_expr *var = new_def_var(c, s->u.loop.var);
    ts_stmt *body = copy_stmt(c, s->u.loop.body);
    ts_stmt *r = ts_for(a, var, min, extent, (ts_for_kind)s->u.loop.kind,
                        s->u.loop.thread_tag, body);
    if (r) copy_anns(a, &r->u.loop.anns, &s->u.loop.anns);
    return r;
  }
  case TS_STMT_BLOCK_REALIZE: {
    int n = s->u.realize.n_values;
    ts_expr **vals = n ? ts_arena_alloc(a, sizeof *vals * (size_t)n) : NULL;
    if (n && !vals) return NULL;
    for (int i = 0; i < n; i++) vals[i] = cx(c, s->u.realize.values[i]);
    ts_expr *pred = cx(c, s->u.realize.predicate);
    ts_block *b = copy_block(c, s->u.realize.block);
    ts_stmt *r = ts_block_realize(a, b, vals, n, pred);
    return r;
  }
  case TS_STMT_STORE: {
    int n = s->u.store.n_indices;
    ts_expr *idx[TS_MAX_DIMS + 1];
    ts_expr **ix =
        n <= TS_MAX_DIMS + 1 ? idx : ts_arena_alloc(a, sizeof *ix * (size_t)n);
    if (!ix) return NULL;
    for (int i = 0; i < n; i++) ix[i] = cx(c, s->u.store.indices[i]);
    ts_stmt *r = ts_store(a, map_buffer(c, s->u.store.buffer), ix, n,
                          cx(c, s->u.store.value));
    return r;
  }
  case TS_STMT_SEQ: {
    int n = s->u.seq.n;
    ts_stmt **items = n ? ts_arena_alloc(a, sizeof *items * (size_t)n) : NULL;
    if (n && !items) return NULL;
    for (int i = 0; i < n; i++) items[i] = copy_stmt(c, s->u.seq.items[i]);
    ts_stmt *r = ts_seq(a, items, n);
    return r;
  }
  case TS_STMT_IF:
    return ts_if(a, cx(c, s->u.cond.cond), copy_stmt(c, s->u.cond.then_s),
                 copy_stmt(c, s->u.cond.else_s));
  case TS_STMT_EVALUATE: return ts_evaluate(a, cx(c, s->u.eval.value));
  case TS_STMT_LET: {
    ts_expr *value = cx(c, s->u.let.value);
    ts_expr *var = new_def_var(c, s->u.let.var);
    return ts_let_stmt(a, var, value, copy_stmt(c, s->u.let.body));
  }
  case TS_STMT_ALLOCATE: {
    ts_buffer *b = new_def_buffer(c, s->u.alloc.buffer);
    return ts_allocate(a, b, copy_stmt(c, s->u.alloc.body));
  }
  }
  assert(0 && "unknown statement kind");
  return NULL;
}

ts_stmt *ts_stmt_copy(ts_arena *a, const ts_stmt *s, ts_node_map *remap) {
  /* One map serves vars, buffers and blocks: keys are distinct nodes. */
  ts_node_map *m = remap ? remap : ts_node_map_create();
  copy_ctx c = {a, m, m, m, true};
  ts_stmt *r = copy_stmt(&c, s);
  if (!remap) ts_node_map_destroy(m);
  return r;
}

ts_stmt *ts_stmt_substitute(ts_arena *a, ts_stmt *s, const ts_node_map *vars,
                            const ts_node_map *buffers) {
  ts_node_map *empty_v = vars ? NULL : ts_node_map_create();
  ts_node_map *empty_b = buffers ? NULL : ts_node_map_create();
  copy_ctx c = {a, vars ? (ts_node_map *)vars : empty_v,
                buffers ? (ts_node_map *)buffers : empty_b, NULL, false};
  ts_stmt *r = copy_stmt(&c, s);
  ts_node_map_destroy(empty_v);
  ts_node_map_destroy(empty_b);
  return r;
}

ts_func *ts_func_copy(const ts_func *f) {
  unsigned long oom = ts_alloc_failures();
  ts_func *g = ts_func_new(f->name);
  if (!g) return NULL;
  ts_node_map *m = ts_node_map_create();
  copy_ctx c = {g->arena, m, m, m, true};
  for (int i = 0; i < f->n_params; i++)
    ts_func_add_param(g, new_def_buffer(&c, f->params[i]));
  g->body = copy_stmt(&c, f->body);
  copy_anns(g->arena, &g->attrs, &f->attrs);
  ts_node_map_destroy(m);
  /* a copy that ran out of memory may miss nodes: marked so that the
   * verifier, scheduling, lowering and building refuse it */
  if (ts_alloc_failures() != oom) arena_mark_failed(g->arena);
  return g;
}

/* ---- generic statement rebuilding ----
 * (Temporary operand arrays of the copy above and the rebuilding below
 * live in the target arena. When it has no memory for one, the statement
 * rebuilt is NULL, as a constructor's result is: see ts_arena_create.) */

typedef struct mut_ctx {
  ts_arena *a;
  const ts_stmt_mutator *m;
} mut_ctx;

static ts_expr *mx(mut_ctx *c, ts_expr *e) {
  if (!e || !c->m->expr) return e;
  return c->m->expr(c->m->ctx, c->a, e);
}

static ts_stmt *mutate(mut_ctx *c, ts_stmt *s);

/* Rebuilds regions; returns the original array when nothing changed. */
static ts_region *mutate_regions(mut_ctx *c, ts_region *r, int n,
                                 bool *changed) {
  if (n <= 0) return r;
  ts_region *out = NULL;
  for (int i = 0; i < n; i++)
    for (int d = 0; d < r[i].ndim; d++) {
      ts_expr *mn = mx(c, r[i].ranges[d].min);
      ts_expr *ex = mx(c, r[i].ranges[d].extent);
      if (mn == r[i].ranges[d].min && ex == r[i].ranges[d].extent) continue;
      if (!out) {
        out = ts_arena_alloc(c->a, sizeof *out * (size_t)n);
        if (!out) return r; /* out of memory: the arena is failed */
        for (int k = 0; k < n; k++) {
          out[k] = r[k];
          out[k].ranges = ts_arena_alloc(
              c->a, sizeof(ts_range) * (size_t)(r[k].ndim ? r[k].ndim : 1));
          if (!out[k].ranges) return r;
          for (int q = 0; q < r[k].ndim; q++) out[k].ranges[q] = r[k].ranges[q];
        }
      }
      out[i].ranges[d].min = mn;
      out[i].ranges[d].extent = ex;
    }
  if (out) *changed = true;
  return out ? out : r;
}

static ts_stmt *mutate_realize(mut_ctx *c, ts_stmt *s) {
  ts_arena *a = c->a;
  ts_block *b = s->u.realize.block;
  bool changed = false;
  int n = s->u.realize.n_values;
  ts_expr **vals = n ? ts_arena_alloc(a, sizeof *vals * (size_t)n) : NULL;
  ts_range *doms =
      b->n_iters ? ts_arena_alloc(a, sizeof *doms * (size_t)b->n_iters) : NULL;
  if ((n && !vals) || (b->n_iters && !doms)) return NULL;
  for (int i = 0; i < n; i++) {
    vals[i] = mx(c, s->u.realize.values[i]);
    if (vals[i] != s->u.realize.values[i]) changed = true;
  }
  ts_expr *pred = mx(c, s->u.realize.predicate);
  if (pred != s->u.realize.predicate) changed = true;
  bool block_changed = false;
  for (int i = 0; i < b->n_iters; i++) {
    doms[i].min = mx(c, b->iters[i].dom.min);
    doms[i].extent = mx(c, b->iters[i].dom.extent);
    if (doms[i].min != b->iters[i].dom.min ||
        doms[i].extent != b->iters[i].dom.extent)
      block_changed = true;
  }
  ts_region *reads = mutate_regions(c, b->reads, b->n_reads, &block_changed);
  ts_region *writes = mutate_regions(c, b->writes, b->n_writes, &block_changed);
  ts_stmt *init = b->init ? mutate(c, b->init) : NULL;
  ts_stmt *body = b->body ? mutate(c, b->body) : NULL;
  if (init != b->init || body != b->body) block_changed = true;
  ts_stmt *r = s;
  if (block_changed) {
    ts_block *nb = ts_block_new(a, b->name);
    if (!nb) return NULL;
    for (int i = 0; i < b->n_iters; i++)
      ts_block_add_iter_var(a, nb, b->iters[i].var, doms[i],
                            (ts_iter_kind)b->iters[i].kind);
    for (int i = 0; i < b->n_allocs; i++)
      ts_block_add_alloc(a, nb, b->allocs[i]);
    nb->reads = reads;
    nb->n_reads = b->n_reads;
    nb->writes = writes;
    nb->n_writes = b->n_writes;
    nb->init = init;
    nb->body = body;
    copy_anns(a, &nb->anns, &b->anns);
    r = ts_block_realize(a, nb, vals, n, pred);
  } else if (changed) {
    r = ts_block_realize(a, b, vals, n, pred);
  }
  return r;
}

static ts_stmt *mutate_inner(mut_ctx *c, ts_stmt *s) {
  ts_arena *a = c->a;
  switch (s->kind) {
  case TS_STMT_FOR: {
    ts_expr *mn = mx(c, s->u.loop.min), *ex = mx(c, s->u.loop.extent);
    ts_stmt *body = mutate(c, s->u.loop.body);
    if (mn == s->u.loop.min && ex == s->u.loop.extent && body == s->u.loop.body)
      return s;
    ts_stmt *r = ts_for(a, s->u.loop.var, mn, ex, (ts_for_kind)s->u.loop.kind,
                        s->u.loop.thread_tag, body);
    if (r) copy_anns(a, &r->u.loop.anns, &s->u.loop.anns);
    return r;
  }
  case TS_STMT_BLOCK_REALIZE: return mutate_realize(c, s);
  case TS_STMT_STORE: {
    int n = s->u.store.n_indices;
    bool changed = false;
    ts_expr **ix = n ? ts_arena_alloc(a, sizeof *ix * (size_t)n) : NULL;
    if (n && !ix) return NULL;
    for (int i = 0; i < n; i++) {
      ix[i] = mx(c, s->u.store.indices[i]);
      if (ix[i] != s->u.store.indices[i]) changed = true;
    }
    ts_expr *v = mx(c, s->u.store.value);
    ts_stmt *r = s;
    if (changed || v != s->u.store.value)
      r = ts_store(a, s->u.store.buffer, ix, n, v);
    return r;
  }
  case TS_STMT_SEQ: {
    int n = s->u.seq.n;
    bool changed = false;
    ts_stmt **items = n ? ts_arena_alloc(a, sizeof *items * (size_t)n) : NULL;
    if (n && !items) return NULL;
    for (int i = 0; i < n; i++) {
      items[i] = mutate(c, s->u.seq.items[i]);
      if (items[i] != s->u.seq.items[i]) changed = true;
    }
    ts_stmt *r = changed ? ts_seq(a, items, n) : s;
    return r;
  }
  case TS_STMT_IF: {
    ts_expr *cond = mx(c, s->u.cond.cond);
    ts_stmt *t = mutate(c, s->u.cond.then_s);
    ts_stmt *e = s->u.cond.else_s ? mutate(c, s->u.cond.else_s) : NULL;
    if (cond == s->u.cond.cond && t == s->u.cond.then_s &&
        e == s->u.cond.else_s)
      return s;
    return ts_if(a, cond, t, e);
  }
  case TS_STMT_EVALUATE: {
    ts_expr *v = mx(c, s->u.eval.value);
    return v == s->u.eval.value ? s : ts_evaluate(a, v);
  }
  case TS_STMT_LET: {
    ts_expr *v = mx(c, s->u.let.value);
    ts_stmt *body = mutate(c, s->u.let.body);
    if (v == s->u.let.value && body == s->u.let.body) return s;
    return ts_let_stmt(a, s->u.let.var, v, body);
  }
  case TS_STMT_ALLOCATE: {
    ts_stmt *body = mutate(c, s->u.alloc.body);
    return body == s->u.alloc.body ? s
                                   : ts_allocate(a, s->u.alloc.buffer, body);
  }
  }
  assert(0 && "unknown statement kind");
  return s;
}

static ts_stmt *mutate(mut_ctx *c, ts_stmt *s) {
  if (!s) return NULL;
  if (c->m->pre) {
    ts_stmt *r = c->m->pre(c->m->ctx, c->a, s);
    if (r) return r;
  }
  ts_stmt *r = mutate_inner(c, s);
  if (c->m->post) r = c->m->post(c->m->ctx, c->a, r);
  return r;
}

ts_stmt *ts_stmt_mutate(ts_arena *a, ts_stmt *s, const ts_stmt_mutator *m) {
  mut_ctx c = {a, m};
  return mutate(&c, s);
}
