/*
 * lower_sync.c — the barrier pass of GPU kernels: inserts
 * `evaluate call<int32>("tessera.cuda.syncthreads")` wherever the threads of
 * a block may communicate through shared memory (scope "shared", one
 * storage per thread block, as the cuda code generator allocates it).
 *
 * The planner walks every statement sequence in program order keeping the
 * shared accesses made since the last barrier. Before an item that reads
 * an element a pending write may have stored from another thread (read
 * after write), or writes one a pending read may have loaded in another
 * thread (write after read), it puts a barrier. A serial or vthread loop is
 * planned twice: once to learn what one iteration leaves pending at its
 * end, then with that as the state at the start of the body, so that the
 * next iteration's writes wait for the previous iteration's readers (loop
 * carried). Two accesses do not conflict when both read, when both write
 * (TVM's rule as well: the generated code stores the same values
 * redundantly), or when they are provably thread-private: the same index
 * expression (each thread-bound loop var read as its axis' thread index),
 * affine, one-to-one in the thread index, and with every other term a
 * multiple of the thread part's span — each thread then touches its own
 * elements only.
 *
 * A barrier is placed only where every thread of the block reaches it the
 * same number of times: never inside a threadIdx loop narrower than the
 * block (the code generator guards it), an `if` whose condition depends on
 * the thread index or on loaded data, or a loop whose bounds do. Such a
 * construct is one item of the enclosing sequence (a barrier goes before or
 * after it); a conflict inside it is an error naming the buffer. Existing
 * barriers are kept and counted.
 */
#include "codegen/internal.h"

#include <stdlib.h>
#include <string.h>

#define SYNC_NAME "tessera.cuda.syncthreads"

/* One shared-memory access. */
typedef struct access {
  const ts_buffer *buf;
  bool write;
  ts_expr *index; /* flat index, thread loop vars replaced by the canonical
                     thread indices; NULL when not a single index */
} access;

typedef struct acc_set {
  access *v;
  int n, cap;
} acc_set;

/* What planning a statement found out. */
typedef struct summary {
  bool sync;    /* a barrier runs every time the statement runs */
  acc_set all;  /* every access */
  acc_set head; /* accesses before the first barrier (all when !sync) */
  acc_set tail; /* accesses after the last barrier (all when !sync) */
} summary;

typedef struct sync_ctx {
  ts_arena *a;
  int64_t block[3];    /* launch block dimensions (threadIdx.x/y/z) */
  ts_expr *canon[3];   /* the canonical thread index of each axis */
  ts_node_map *thread; /* threadIdx loop var -> canonical index + min */
  ts_node_map *varies; /* var -> non-NULL when its value differs between
                          the threads of a block */
  ts_error *err;
  int rc;
} sync_ctx;

/* ---- access sets ---- */

static void acc_add(acc_set *s, access x) {
  for (int i = 0; i < s->n; i++)
    if (s->v[i].buf == x.buf && s->v[i].write == x.write &&
        s->v[i].index == x.index)
      return;
  if (s->n == s->cap) {
    int cap = s->cap ? 2 * s->cap : 8;
    access *nv = ts_realloc(s->v, sizeof *nv * (size_t)cap);
    if (!nv) return; /* out of memory (counted; ts_lower reports it) */
    s->v = nv;
    s->cap = cap;
  }
  s->v[s->n++] = x;
}

static void acc_union(acc_set *s, const acc_set *t) {
  for (int i = 0; i < t->n; i++) acc_add(s, t->v[i]);
}

static void acc_copy(acc_set *s, const acc_set *t) {
  s->n = 0;
  acc_union(s, t);
}

static void acc_free(acc_set *s) {
  free(s->v);
  memset(s, 0, sizeof *s);
}

static void summary_free(summary *s) {
  acc_free(&s->all);
  acc_free(&s->head);
  acc_free(&s->tail);
}

/* ---- thread dependence ---- */

static bool is_shared(const ts_buffer *b) {
  return !strcmp(ts_buffer_scope(b), "shared");
}

/* Which threadIdx axis a loop is bound to (0..2), or -1. */
static int thread_axis(const ts_stmt *s) {
  const char *tag =
      ts_for_kind_of(s) == TS_FOR_THREAD ? ts_for_thread_tag(s) : NULL;
  if (!tag || strncmp(tag, "threadIdx.", 10) || !tag[10] || tag[11]) return -1;
  return tag[10] >= 'x' && tag[10] <= 'z' ? tag[10] - 'x' : -1;
}

typedef struct varies_ctx {
  const ts_node_map *varies;
  bool found;
} varies_ctx;

static void varies_expr(void *ctx, ts_expr *e) {
  varies_ctx *c = ctx;
  ts_expr_kind k = ts_expr_kind_of(e);
  if (k == TS_EXPR_LOAD || k == TS_EXPR_CALL ||
      (k == TS_EXPR_VAR && ts_node_map_get(c->varies, e)))
    c->found = true;
}

/* Whether e may differ between the threads of a block: it reads a
 * thread-dependent var, memory or calls something. */
static bool varies(const sync_ctx *c, ts_expr *e) {
  varies_ctx v = {c->varies, false};
  ts_expr_walk(e, varies_expr, &v);
  return v.found;
}

/* ---- accesses of a statement's own expressions ---- */

typedef struct collect_ctx {
  sync_ctx *c;
  acc_set *out;
} collect_ctx;

static ts_expr *canonical_index(sync_ctx *c, ts_expr *const *idx, int n) {
  if (n != 1) return NULL;
  return ts_simplify(c->a, ts_expr_substitute(c->a, idx[0], c->thread, NULL),
                     NULL);
}

static void collect_load(void *ctx, ts_expr *e) {
  collect_ctx *k = ctx;
  if (ts_expr_kind_of(e) != TS_EXPR_LOAD || !is_shared(ts_expr_buffer(e)))
    return;
  int n = ts_expr_n_operands(e);
  ts_expr *idx[TS_MAX_DIMS];
  for (int d = 0; d < n && d < TS_MAX_DIMS; d++) idx[d] = ts_expr_operand(e, d);
  acc_add(k->out,
          (access){ts_expr_buffer(e), false, canonical_index(k->c, idx, n)});
}

static void collect_expr(sync_ctx *c, ts_expr *e, acc_set *out) {
  collect_ctx k = {c, out};
  if (e) ts_expr_walk(e, collect_load, &k);
}

/* ---- conflicts ---- */

typedef struct var_list {
  ts_expr *v[64];
  int n;
  bool overflow;
} var_list;

static void list_var(void *ctx, ts_expr *e) {
  var_list *l = ctx;
  if (ts_expr_kind_of(e) != TS_EXPR_VAR) return;
  for (int i = 0; i < l->n; i++)
    if (l->v[i] == e) return;
  if (l->n == 64)
    l->overflow = true;
  else
    l->v[l->n++] = e;
}

/* e's value with every listed var at 0, except var `one` (if >= 0) at 1. */
static bool value_at(sync_ctx *c, ts_expr *e, const var_list *l, int one,
                     int64_t *out) {
  ts_node_map *m = ts_node_map_create();
  for (int i = 0; i < l->n; i++)
    ts_node_map_put(m, l->v[i], ts_index(c->a, i == one ? 1 : 0));
  bool ok = ts_expr_is_const_int(
      ts_simplify(c->a, ts_expr_substitute(c->a, e, m, NULL), NULL), out);
  ts_node_map_destroy(m);
  return ok;
}

/* Whether index e (canonical) makes every thread touch its own elements
 * only: affine, one-to-one in the thread index over the block, and every
 * other term a multiple of the thread part's span. */
static bool thread_private(sync_ctx *c, ts_expr *e) {
  if (ts_expr_dtype(e).lanes != 1) return false;
  var_list l = {.n = 0};
  ts_expr_walk(e, list_var, &l);
  int64_t c0, coef[64];
  if (l.overflow || !value_at(c, e, &l, -1, &c0)) return false;
  ts_expr *affine = ts_index(c->a, c0);
  for (int i = 0; i < l.n; i++) {
    if (!value_at(c, e, &l, i, &coef[i])) return false;
    coef[i] -= c0;
    affine =
        ts_add(c->a, affine, ts_mul(c->a, ts_index(c->a, coef[i]), l.v[i]));
  }
  int64_t rest;
  if (!ts_expr_is_const_int(ts_simplify(c->a, ts_sub(c->a, e, affine), NULL),
                            &rest) ||
      rest != 0)
    return false;
  /* the thread part: each axis of the block used, mixed-radix */
  int64_t tc[3] = {0, 0, 0};
  for (int i = 0; i < l.n; i++)
    for (int ax = 0; ax < 3; ax++)
      if (l.v[i] == c->canon[ax]) tc[ax] = coef[i] < 0 ? -coef[i] : coef[i];
  int order[3] = {0, 1, 2};
  for (int i = 0; i < 3; i++)
    for (int j = i + 1; j < 3; j++)
      if (tc[order[j]] < tc[order[i]]) {
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
      }
  int64_t span = 1;
  for (int k = 0; k < 3; k++) {
    int ax = order[k];
    if (c->block[ax] <= 1) continue;
    if (tc[ax] < span) return false;
    span = tc[ax] * (c->block[ax] - 1) + span;
  }
  for (int i = 0; i < l.n; i++) {
    bool thread = false;
    for (int ax = 0; ax < 3; ax++) thread |= l.v[i] == c->canon[ax];
    if (!thread && coef[i] % span) return false;
  }
  return true;
}

/* Whether an access in `before` and one in `after` may touch the same
 * element from different threads with one of them writing and the other
 * reading; *buf names the buffer. */
static bool conflict(sync_ctx *c, const acc_set *before, const acc_set *after,
                     const ts_buffer **buf) {
  for (int i = 0; i < before->n; i++)
    for (int j = 0; j < after->n; j++) {
      const access *x = &before->v[i], *y = &after->v[j];
      if (x->buf != y->buf || x->write == y->write) continue;
      int64_t d;
      if (x->index && y->index &&
          ts_expr_is_const_int(
              ts_simplify(c->a, ts_sub(c->a, x->index, y->index), NULL), &d) &&
          d == 0 && thread_private(c, x->index))
        continue;
      *buf = x->buf;
      return true;
    }
  return false;
}

/* ---- planning ---- */

static ts_stmt *barrier(sync_ctx *c) {
  return ts_evaluate(c->a, ts_call(c->a, TS_INT32, SYNC_NAME, NULL, 0));
}

static bool is_barrier(const ts_stmt *s) {
  if (ts_stmt_kind_of(s) != TS_STMT_EVALUATE) return false;
  ts_expr *v = ts_evaluate_value(s);
  return ts_expr_kind_of(v) == TS_EXPR_CALL &&
         !strcmp(ts_expr_call_name(v), SYNC_NAME);
}

static int fail_inside(sync_ctx *c, const ts_buffer *b, const char *where) {
  if (!c->rc)
    c->rc = TS_ERR(c->err, TS_EUNSUPPORTED,
                   "lowering: threads communicate through shared buffer '%s' "
                   "inside %s, where a barrier cannot go (not every thread of "
                   "the block reaches it)",
                   ts_buffer_name(b), where);
  return c->rc;
}

static ts_stmt *plan(sync_ctx *c, ts_stmt *s, const char *nonuniform,
                     const acc_set *entry, summary *out);

/* Plans the statements of a sequence (or a single statement) starting in
 * state `entry` (the accesses pending when it starts). */
static ts_stmt *plan_seq(sync_ctx *c, ts_stmt *s, const char *nonuniform,
                         const acc_set *entry, summary *out) {
  bool is_seq = ts_stmt_kind_of(s) == TS_STMT_SEQ;
  int n = is_seq ? ts_seq_n(s) : 1;
  ts_stmt **items = ts_arena_alloc(c->a, sizeof *items * (size_t)(2 * n + 1));
  int m = 0;
  bool changed = false;
  acc_set pend = {0};
  memset(out, 0, sizeof *out);
  if (!items) {
    c->rc = TS_ERR(c->err, TS_ENOMEM, "barriers: out of memory");
    return s;
  }
  acc_copy(&pend, entry);
  for (int i = 0; i < n && !c->rc; i++) {
    ts_stmt *item = is_seq ? ts_seq_item(s, i) : s;
    if (is_barrier(item)) {
      items[m++] = item;
      pend.n = 0;
      out->sync = true;
      out->tail.n = 0;
      continue;
    }
    summary sub;
    acc_set none = {0};
    ts_stmt *ni = plan(c, item, nonuniform, &none, &sub);
    const ts_buffer *buf = NULL;
    if (!c->rc && conflict(c, &pend, &sub.head, &buf)) {
      if (nonuniform) {
        fail_inside(c, buf, nonuniform);
      } else {
        items[m++] = barrier(c);
        changed = true;
        pend.n = 0;
        out->sync = true;
        out->tail.n = 0;
      }
    }
    if (ni != item) changed = true;
    items[m++] = ni;
    acc_union(&out->all, &sub.all);
    if (!out->sync) acc_union(&out->head, &sub.head);
    if (sub.sync) {
      if (!out->sync) out->tail.n = 0;
      out->sync = true;
      acc_copy(&pend, &sub.tail);
      acc_copy(&out->tail, &sub.tail);
    } else {
      acc_union(&pend, &sub.all);
      acc_union(&out->tail, &sub.all);
    }
    summary_free(&sub);
  }
  if (!out->sync) acc_copy(&out->tail, &out->all);
  acc_free(&pend);
  ts_stmt *r = s;
  if (changed && !c->rc) r = m == 1 ? items[0] : ts_seq(c->a, items, m);
  return r;
}

/* A loop that iterates: planned for what an iteration leaves pending at
 * its end; when that conflicts with what the body does before its first
 * barrier, planned again with it pending at the start of the body. */
static void plan_loop(sync_ctx *c, ts_stmt *s, const char *nonuniform,
                      summary *out) {
  const char *inner = nonuniform;
  if (!inner && (varies(c, ts_for_min(s)) || varies(c, ts_for_extent(s))))
    inner = "a loop whose trip count differs between threads";
  if (inner) ts_node_map_put(c->varies, ts_for_var(s), (void *)1);
  acc_set none = {0};
  ts_stmt *body = plan_seq(c, ts_for_body(s), inner, &none, out);
  const ts_buffer *buf = NULL;
  int64_t ext;
  bool once_only = ts_expr_is_const_int(ts_for_extent(s), &ext) && ext == 1;
  if (!c->rc && !once_only && conflict(c, &out->tail, &out->head, &buf)) {
    summary once = *out;
    body = plan_seq(c, ts_for_body(s), inner, &once.tail, out);
    summary_free(&once);
  }
  if (!c->rc) ts_for_set_body(s, body);
  if (!ts_expr_is_const_int(ts_for_extent(s), &ext) || ext < 1 || inner) {
    out->sync = false; /* the barrier inside may not run */
    acc_copy(&out->head, &out->all);
    acc_copy(&out->tail, &out->all);
  }
}

/* A statement without barriers of its own: its accesses, and the body
 * (if any) planned under `nonuniform`. */
static ts_stmt *plan(sync_ctx *c, ts_stmt *s, const char *nonuniform,
                     const acc_set *entry, summary *out) {
  memset(out, 0, sizeof *out);
  if (c->rc) return s;
  acc_set own = {0}; /* accesses of the statement's own expressions */
  summary body = {0};
  bool has_body = false;
  switch (ts_stmt_kind_of(s)) {
  case TS_STMT_SEQ: return plan_seq(c, s, nonuniform, entry, out);
  case TS_STMT_STORE: {
    for (int d = 0; d < ts_store_n_indices(s); d++)
      collect_expr(c, ts_store_index(s, d), &own);
    collect_expr(c, ts_store_value(s), &own);
    ts_buffer *b = ts_store_buffer(s);
    if (is_shared(b)) {
      int n = ts_store_n_indices(s);
      ts_expr *idx[TS_MAX_DIMS];
      for (int d = 0; d < n && d < TS_MAX_DIMS; d++)
        idx[d] = ts_store_index(s, d);
      acc_add(&own, (access){b, true, canonical_index(c, idx, n)});
    }
    break;
  }
  case TS_STMT_EVALUATE: collect_expr(c, ts_evaluate_value(s), &own); break;
  case TS_STMT_FOR: {
    collect_expr(c, ts_for_min(s), &own);
    collect_expr(c, ts_for_extent(s), &own);
    int axis = thread_axis(s);
    const char *tag =
        ts_for_kind_of(s) == TS_FOR_THREAD ? ts_for_thread_tag(s) : NULL;
    if (axis >= 0) {
      /* not a loop for a thread: its index, the body run once (or not at
       * all when the loop is narrower than the block) */
      int64_t ext = 0;
      ts_expr_is_const_int(ts_for_extent(s), &ext);
      ts_node_map_put(c->thread, ts_for_var(s),
                      ts_add(c->a, c->canon[axis], ts_for_min(s)));
      ts_node_map_put(c->varies, ts_for_var(s), (void *)1);
      const char *inner =
          nonuniform ? nonuniform
          : ext < c->block[axis]
              ? "a threadIdx loop narrower than the thread block (a guard)"
              : NULL;
      ts_for_set_body(s, plan_seq(c, ts_for_body(s), inner, entry, &body));
      if (inner) body.sync = false;
      has_body = true;
    } else if (tag && !strncmp(tag, "blockIdx.", 9)) {
      /* every thread of the block agrees on the block index */
      ts_for_set_body(s, plan_seq(c, ts_for_body(s), nonuniform, entry, &body));
      has_body = true;
    } else {
      plan_loop(c, s, nonuniform, &body);
      has_body = true;
    }
    break;
  }
  case TS_STMT_IF: {
    collect_expr(c, ts_if_cond(s), &own);
    const char *inner =
        nonuniform ? nonuniform
        : varies(c, ts_if_cond(s))
            ? "an if whose condition depends on the thread or on data"
            : NULL;
    summary then_s, else_s = {0};
    ts_stmt *t = plan_seq(c, ts_if_then(s), inner, entry, &then_s);
    ts_stmt *e = ts_if_else(s)
                     ? plan_seq(c, ts_if_else(s), inner, entry, &else_s)
                     : NULL;
    ts_if_set_branches(s, t, e);
    body.sync = then_s.sync && e && else_s.sync && !inner;
    acc_union(&body.all, &then_s.all);
    acc_union(&body.all, &else_s.all);
    acc_union(&body.head, body.sync ? &then_s.head : &then_s.all);
    acc_union(&body.head, body.sync ? &else_s.head : &else_s.all);
    acc_union(&body.tail, body.sync ? &then_s.tail : &then_s.all);
    acc_union(&body.tail, body.sync ? &else_s.tail : &else_s.all);
    summary_free(&then_s);
    summary_free(&else_s);
    has_body = true;
    break;
  }
  case TS_STMT_LET:
    collect_expr(c, ts_let_stmt_value(s), &own);
    if (varies(c, ts_let_stmt_value(s)))
      ts_node_map_put(c->varies, ts_let_stmt_var(s), (void *)1);
    ts_let_stmt_set_body(
        s, plan_seq(c, ts_let_stmt_body(s), nonuniform, entry, &body));
    has_body = true;
    break;
  case TS_STMT_ALLOCATE:
    ts_allocate_set_body(
        s, plan_seq(c, ts_allocate_body(s), nonuniform, entry, &body));
    has_body = true;
    break;
  default:
    c->rc = TS_ERR(c->err, TS_EINTERNAL,
                   "lowering: the barrier pass met a %s statement",
                   ts_stmt_kind_name(ts_stmt_kind_of(s)));
    return s;
  }
  /* the statement's own expressions run before its body */
  acc_union(&out->all, &own);
  acc_union(&out->head, &own);
  if (has_body) {
    out->sync = body.sync;
    acc_union(&out->all, &body.all);
    acc_union(&out->head, body.sync ? &body.head : &body.all);
    acc_copy(&out->tail, body.sync ? &body.tail : &out->all);
  } else {
    acc_copy(&out->tail, &own);
  }
  summary_free(&body);
  acc_free(&own);
  return s;
}

/* ---- the pass ---- */

typedef struct launch_ctx {
  int64_t block[3];
  bool shared;  /* a "shared" buffer is allocated */
  bool threads; /* some loop is bound to threadIdx */
} launch_ctx;

static bool launch_enter(void *ctx, ts_stmt *s) {
  launch_ctx *l = ctx;
  if (ts_stmt_kind_of(s) == TS_STMT_FOR) {
    int axis = thread_axis(s);
    int64_t ext;
    if (axis >= 0) l->threads = true;
    if (axis >= 0 && ts_expr_is_const_int(ts_for_extent(s), &ext) &&
        ext > l->block[axis])
      l->block[axis] = ext;
  } else if (ts_stmt_kind_of(s) == TS_STMT_ALLOCATE &&
             is_shared(ts_allocate_buffer(s))) {
    l->shared = true;
  }
  return true;
}

int lower_sync(ts_func *f, ts_error *err) {
  launch_ctx l = {{1, 1, 1}, false, false};
  ts_visitor v = {.enter_stmt = launch_enter, .ctx = &l};
  ts_stmt_walk(ts_func_body(f), &v);
  if (!l.shared || !l.threads) return TS_OK; /* nobody to wait for */
  sync_ctx c = {.a = ts_func_arena(f),
                .thread = ts_node_map_create(),
                .varies = ts_node_map_create(),
                .err = err};
  static const char *const names[3] = {"threadIdx.x", "threadIdx.y",
                                       "threadIdx.z"};
  for (int ax = 0; ax < 3; ax++) {
    c.block[ax] = l.block[ax];
    c.canon[ax] = ts_var(c.a, names[ax], TS_INDEX);
  }
  summary s;
  acc_set none = {0};
  ts_stmt *body = plan_seq(&c, ts_func_body(f), NULL, &none, &s);
  if (!c.rc) ts_func_set_body(f, body);
  summary_free(&s);
  ts_node_map_destroy(c.thread);
  ts_node_map_destroy(c.varies);
  return c.rc;
}
