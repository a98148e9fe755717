/*
 * compact.c — the lowering pass that compacts local buffers
 * (ts_lower_compact): each allocation shrinks to the region its accesses
 * cover under their lowest common holder, and moves there — into a loop
 * only when each iteration uses its own part (the regions proven disjoint
 * between iterations, symbolically or by enumerating a loop's iterations)
 * or writes its part before reading it. The other lowering passes are in
 * lower.c, which runs this one after lowering blocks.
 */
#include "codegen/internal.h"

#include <stdlib.h>
#include <string.h>

/* Whether statement s (or an expression in it) touches buffer b; *addr is
 * set when b's address is taken. */
typedef struct touch_ctx {
  const ts_buffer *b;
  bool found, addr;
} touch_ctx;

static void touch_expr(void *ctx, ts_expr *e) {
  touch_ctx *c = ctx;
  ts_expr_kind k = ts_expr_kind_of(e);
  if ((k == TS_EXPR_LOAD || k == TS_EXPR_ADDRESS_OF) &&
      ts_expr_buffer(e) == c->b) {
    c->found = true;
    if (k == TS_EXPR_ADDRESS_OF) c->addr = true;
  }
}
static void touch_visit(void *ctx, ts_expr *e) {
  ts_expr_walk(e, touch_expr, ctx);
}
static bool touch_stmt(void *ctx, ts_stmt *s) {
  touch_ctx *c = ctx;
  if (ts_stmt_kind_of(s) == TS_STMT_STORE && ts_store_buffer(s) == c->b)
    c->found = true;
  return true;
}

static bool touches(ts_stmt *s, const ts_buffer *b, bool *addr) {
  touch_ctx c = {b, false, false};
  ts_visitor v = {
      .enter_stmt = touch_stmt, .visit_expr = touch_visit, .ctx = &c};
  ts_stmt_walk(s, &v);
  if (addr) *addr = c.addr;
  return c.found;
}

/* The access sites of a buffer under a statement, with every loop between
 * that statement and them. */
typedef struct access_set {
  const ts_buffer *b;
  ts_var_ranges *inner; /* loop var -> range, loops below the LCA */
  ts_node_map *at_min;  /* loop var -> its minimum (an immediate) */
  ts_expr ***indices;   /* per access: ndim index expressions */
  int n, cap;
  bool ok; /* false when some loop bound is not constant */
  ts_arena *a;
} access_set;

static void add_access(access_set *s, ts_expr *const *idx, int ndim) {
  if (s->n == s->cap) {
    int cap = s->cap ? 2 * s->cap : 8;
    ts_expr ***v = ts_realloc(s->indices, sizeof *s->indices * (size_t)cap);
    if (!v) { /* out of memory (counted; ts_lower reports it) */
      s->ok = false;
      return;
    }
    s->indices = v;
    s->cap = cap;
  }
  ts_expr **copy =
      ts_arena_alloc(s->a, sizeof *copy * (size_t)(ndim > 0 ? ndim : 1));
  if (!copy) {
    s->ok = false;
    return;
  }
  for (int d = 0; d < ndim; d++) copy[d] = idx[d];
  s->indices[s->n++] = copy;
}

static void collect_expr(void *ctx, ts_expr *e) {
  access_set *s = ctx;
  if (ts_expr_kind_of(e) != TS_EXPR_LOAD || ts_expr_buffer(e) != s->b) return;
  ts_expr *idx[TS_MAX_DIMS];
  int n = ts_expr_n_operands(e);
  for (int d = 0; d < n && d < TS_MAX_DIMS; d++) idx[d] = ts_expr_operand(e, d);
  add_access(s, idx, n);
}
static void collect_visit(void *ctx, ts_expr *e) {
  ts_expr_walk(e, collect_expr, ctx);
}
static bool collect_stmt(void *ctx, ts_stmt *st) {
  access_set *s = ctx;
  if (ts_stmt_kind_of(st) == TS_STMT_FOR) {
    int64_t mn, ex;
    if (ts_expr_is_const_int(ts_for_min(st), &mn) &&
        ts_expr_is_const_int(ts_for_extent(st), &ex) && ex > 0) {
      ts_var_ranges_set(s->inner, ts_for_var(st), mn, ex);
      ts_node_map_put(s->at_min, ts_for_var(st), ts_index(s->a, mn));
    } else {
      s->ok = false;
    }
  }
  if (ts_stmt_kind_of(st) == TS_STMT_STORE && ts_store_buffer(st) == s->b) {
    ts_expr *idx[TS_MAX_DIMS];
    int n = ts_store_n_indices(st);
    for (int d = 0; d < n && d < TS_MAX_DIMS; d++)
      idx[d] = ts_store_index(st, d);
    add_access(s, idx, n);
  }
  return true;
}

/* A linear form sum(coef[i] * var[i]) + c over loop variables, for
 * comparing index expressions the simplifier leaves in different shapes
 * ((a + b) * 14 against a * 14 + b * 14). */
#define LIN_MAX 32
typedef struct lin_form {
  const ts_expr *var[LIN_MAX];
  int64_t coef[LIN_MAX];
  int n;
  int64_t c;
} lin_form;

static bool lin_add_var(lin_form *f, const ts_expr *v, int64_t k) {
  for (int i = 0; i < f->n; i++)
    if (f->var[i] == v) {
      f->coef[i] += k;
      return true;
    }
  if (f->n == LIN_MAX) return false;
  f->var[f->n] = v;
  f->coef[f->n++] = k;
  return true;
}

/* Adds k * e to f; false when e is not linear in variables (integer
 * +, -, * by a constant). */
static bool lin_of(const ts_expr *e, int64_t k, lin_form *f) {
  int64_t v;
  if (ts_expr_is_const_int(e, &v)) {
    f->c += k * v;
    return true;
  }
  switch (ts_expr_kind_of(e)) {
  case TS_EXPR_VAR: return lin_add_var(f, e, k);
  case TS_EXPR_ADD:
    return lin_of(ts_expr_operand(e, 0), k, f) &&
           lin_of(ts_expr_operand(e, 1), k, f);
  case TS_EXPR_SUB:
    return lin_of(ts_expr_operand(e, 0), k, f) &&
           lin_of(ts_expr_operand(e, 1), -k, f);
  case TS_EXPR_MUL:
    if (ts_expr_is_const_int(ts_expr_operand(e, 1), &v))
      return lin_of(ts_expr_operand(e, 0), k * v, f);
    if (ts_expr_is_const_int(ts_expr_operand(e, 0), &v))
      return lin_of(ts_expr_operand(e, 1), k * v, f);
    return false;
  default: return false;
  }
}

/* Whether x - y is a constant (*c), by simplification or linear forms. */
static bool const_difference(ts_arena *a, ts_expr *x, ts_expr *y, int64_t *c) {
  if (ts_expr_is_const_int(ts_simplify(a, ts_sub(a, x, y), NULL), c))
    return true;
  lin_form f = {{0}, {0}, 0, 0};
  if (!lin_of(x, 1, &f) || !lin_of(y, -1, &f)) return false;
  for (int i = 0; i < f.n; i++)
    if (f.coef[i]) return false;
  *c = f.c;
  return true;
}

/* GPU thread loops (threadIdx, vthread) above the holder of a shared
 * buffer: the buffer is one per thread block, so its region is relaxed
 * over them as if they were inner loops. */
typedef struct relaxed_loops {
  ts_stmt *v[16];
  int n;
} relaxed_loops;

/* The compacted region of b under `lca`: per dim the base expression (in
 * outer vars) and extent; false when it cannot be expressed that way. The
 * loops in `relax` (may be NULL) count as inner loops. */
static bool compact_region(ts_arena *a, ts_stmt *lca, const ts_buffer *b,
                           const relaxed_loops *relax, ts_expr **base,
                           int64_t *extent) {
  access_set s = {.b = b,
                  .inner = ts_var_ranges_create(),
                  .at_min = ts_node_map_create(),
                  .ok = true,
                  .a = a};
  for (int i = 0; relax && i < relax->n; i++) collect_stmt(&s, relax->v[i]);
  ts_visitor v = {
      .enter_stmt = collect_stmt, .visit_expr = collect_visit, .ctx = &s};
  ts_stmt_walk(lca, &v);
  int ndim = ts_buffer_ndim(b);
  bool ok = s.ok && s.n > 0;
  for (int d = 0; ok && d < ndim; d++) {
    ts_expr *base0 = NULL;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (int i = 0; ok && i < s.n; i++) {
      ts_expr *e = s.indices[i][d];
      if (ts_expr_dtype(e).lanes != 1) {
        ok = false;
        break;
      }
      ts_expr *bi =
          ts_simplify(a, ts_expr_substitute(a, e, s.at_min, NULL), NULL);
      ts_expr *off = ts_simplify(a, ts_sub(a, e, bi), s.inner);
      int64_t olo, ohi, c = 0;
      if (!ts_expr_const_bound(off, s.inner, &olo, &ohi)) {
        ok = false;
        break;
      }
      if (!base0)
        base0 = bi;
      else if (!const_difference(a, bi, base0, &c)) {
        ok = false;
        break;
      }
      if (c + olo < lo) lo = c + olo;
      if (c + ohi > hi) hi = c + ohi;
    }
    if (!ok) break;
    base[d] = ts_simplify(a, ts_add(a, base0, ts_index(a, lo)), NULL);
    extent[d] = hi - lo + 1;
  }
  free(s.indices);
  ts_var_ranges_destroy(s.inner);
  ts_node_map_destroy(s.at_min);
  return ok;
}

/* Whether the boxes base + [0, extent) of b are disjoint between the
 * iterations of `loop` jointly over the dimensions that move with it: a
 * fused loop's split-back bindings (floordiv(i, 128), floormod(i, 128))
 * move no dimension by its extent each iteration, but their row-major flat
 * offset moves by 1. Projected on the moving dimensions, each box lies in
 * [L, L + span) of the flat offset L; a constant step of at least span
 * keeps the projections, hence the boxes, apart. */
static bool disjoint_linear(ts_arena *a, ts_stmt *loop, const ts_buffer *b,
                            ts_expr *const *base, const int64_t *extent) {
  int64_t mn, ex;
  if (!ts_expr_is_const_int(ts_for_min(loop), &mn) ||
      !ts_expr_is_const_int(ts_for_extent(loop), &ex) || ex < 2)
    return false;
  ts_expr *var = ts_for_var(loop);
  /* var + 1 stays in the loop: var ranges over all but the last value */
  ts_var_ranges *r = ts_var_ranges_create();
  ts_node_map *next = ts_node_map_create();
  ts_var_ranges_set(r, var, mn, ex - 1);
  ts_node_map_put(next, var, ts_add(a, var, ts_index(a, 1)));
  ts_expr *lin = NULL;
  int64_t stride = 1, span = 1;
  bool ok = true;
  for (int d = ts_buffer_ndim(b) - 1; d >= 0 && ok; d--) {
    ts_expr *moved = ts_expr_substitute(a, base[d], next, NULL);
    int64_t c;
    if (!ts_expr_is_const_int(ts_simplify(a, ts_sub(a, moved, base[d]), r),
                              &c) ||
        c != 0) {
      ts_expr *term = ts_mul(a, base[d], ts_index(a, stride));
      lin = lin ? ts_add(a, lin, term) : term;
      if (__builtin_mul_overflow(extent[d] - 1, stride, &c) ||
          __builtin_add_overflow(span, c, &span))
        ok = false;
    }
    if (__builtin_mul_overflow(stride, ts_buffer_dim(b, d), &stride))
      ok = false;
  }
  int64_t step = 0;
  ok = ok && lin &&
       ts_expr_is_const_int(
           ts_simplify(
               a, ts_sub(a, ts_expr_substitute(a, lin, next, NULL), lin), r),
           &step) &&
       (step >= span || -step >= span);
  ts_node_map_destroy(next);
  ts_var_ranges_destroy(r);
  return ok;
}

/* disjoint_linear by enumeration, for a loop of at most
 * DISJOINT_ENUMERATE iterations whose boxes' bases are constants at each
 * iteration: each box clipped to b's bounds (a guarded last tile's rows
 * past the end are never accessed), the boxes' flat offsets [L, L + span)
 * sorted do not overlap. A loop fused from three or more (an attention
 * task's batch, heads and row tiles: floordiv(floordiv(f, 7), 3)), or one
 * whose last tile overhangs the rows, moves the flat offset by steps that
 * the simplifier does not prove constant. */
#define DISJOINT_ENUMERATE 16384
typedef struct flat_box {
  int64_t lo, span;
} flat_box;
static int cmp_box(const void *x, const void *y) {
  int64_t a = ((const flat_box *)x)->lo, b = ((const flat_box *)y)->lo;
  return (a > b) - (a < b);
}
static bool disjoint_enumerated(ts_arena *a, ts_stmt *loop, const ts_buffer *b,
                                ts_expr *const *base, const int64_t *extent) {
  int64_t mn, ex;
  if (!ts_expr_is_const_int(ts_for_min(loop), &mn) ||
      !ts_expr_is_const_int(ts_for_extent(loop), &ex) || ex < 2 ||
      ex > DISJOINT_ENUMERATE)
    return false;
  int nd = ts_buffer_ndim(b);
  int64_t stride = 1, strides[TS_MAX_DIMS];
  for (int d = nd - 1; d >= 0; d--) {
    strides[d] = stride;
    stride *= ts_buffer_dim(b, d);
  }
  flat_box *box = malloc(sizeof *box * (size_t)ex);
  if (!box) return false;
  ts_node_map *at = ts_node_map_create();
  bool ok = true;
  int64_t n = 0;
  for (int64_t i = 0; i < ex && ok; i++) {
    ts_node_map_put(at, ts_for_var(loop), ts_index(a, mn + i));
    int64_t lo = 0, span = 1;
    bool empty = false;
    for (int d = 0; d < nd && ok; d++) {
      int64_t c;
      ok = ts_expr_is_const_int(
          ts_simplify(a, ts_expr_substitute(a, base[d], at, NULL), NULL), &c);
      int64_t l = c < 0 ? 0 : c, h = c + extent[d];
      if (h > ts_buffer_dim(b, d)) h = ts_buffer_dim(b, d);
      if (h <= l) empty = true;
      lo += l * strides[d];
      span += (h - l - 1) * strides[d];
    }
    if (ok && !empty) box[n++] = (flat_box){lo, span};
  }
  ts_node_map_destroy(at);
  if (ok) {
    qsort(box, (size_t)n, sizeof *box, cmp_box);
    for (int64_t i = 1; i < n && ok; i++)
      ok = box[i].lo >= box[i - 1].lo + box[i - 1].span;
  }
  free(box);
  return ok;
}

/* Whether the region of b under loop `loop` is disjoint between iterations
 * (so an allocation per iteration loses nothing): some dimension's base
 * moves by at least its extent from one iteration to the next. */
static bool disjoint_per_iteration(ts_arena *a, ts_stmt *loop,
                                   const ts_buffer *b,
                                   const relaxed_loops *relax) {
  ts_expr *base[TS_MAX_DIMS];
  int64_t extent[TS_MAX_DIMS];
  if (!compact_region(a, ts_for_body(loop), b, relax, base, extent))
    return false;
  ts_expr *var = ts_for_var(loop);
  ts_node_map *next = ts_node_map_create();
  ts_node_map_put(next, var, ts_add(a, var, ts_index(a, 1)));
  bool disjoint = false;
  for (int d = 0; d < ts_buffer_ndim(b) && !disjoint; d++) {
    ts_expr *step = ts_simplify(
        a, ts_sub(a, ts_expr_substitute(a, base[d], next, NULL), base[d]),
        NULL);
    int64_t c;
    if (ts_expr_is_const_int(step, &c) && (c >= extent[d] || -c >= extent[d]))
      disjoint = true;
  }
  if (!disjoint) disjoint = disjoint_linear(a, loop, b, base, extent);
  if (!disjoint) disjoint = disjoint_enumerated(a, loop, b, base, extent);
  ts_node_map_destroy(next);
  return disjoint;
}

/* The one store of b in a statement that writes b densely before anything
 * reads it: `w` holds exactly one store to b, no load of b and no
 * condition around the store but bounds guards (bounds_guard), and each of the
 * store's indices is an expression of outer variables plus at most one of w's
 * own loop variables (from 0, coefficient 1, each in one dimension): w writes
 * the whole box base[d] + [0, extent[d]). */
typedef struct dense_ctx {
  const ts_buffer *b;
  ts_stmt *store;
  int stores, loads, ifs_open, ifs_at_store;
  const ts_stmt *loops[64];
  int n_loops;
  ts_expr *conds[16]; /* the conditions of the ifs open (the first 16) */
  ts_expr *store_conds[16];
} dense_ctx;

static void dense_expr(void *ctx, ts_expr *e) {
  dense_ctx *c = ctx;
  ts_expr_kind k = ts_expr_kind_of(e);
  if ((k == TS_EXPR_LOAD || k == TS_EXPR_ADDRESS_OF) &&
      ts_expr_buffer(e) == c->b)
    c->loads++;
}
static void dense_visit(void *ctx, ts_expr *e) {
  ts_expr_walk(e, dense_expr, ctx);
}
static bool dense_enter(void *ctx, ts_stmt *st) {
  dense_ctx *c = ctx;
  switch (ts_stmt_kind_of(st)) {
  case TS_STMT_FOR:
    if (c->n_loops < 64) c->loops[c->n_loops++] = st;
    break;
  case TS_STMT_IF:
    if (c->ifs_open < 16) c->conds[c->ifs_open] = ts_if_cond(st);
    c->ifs_open++;
    break;
  case TS_STMT_STORE:
    if (ts_store_buffer(st) == c->b) {
      c->stores++;
      c->store = st;
      c->ifs_at_store = c->ifs_open;
      for (int i = 0; i < c->ifs_open && i < 16; i++)
        c->store_conds[i] = c->conds[i];
    }
    break;
  default: break;
  }
  return true;
}
static void dense_leave(void *ctx, ts_stmt *st) {
  dense_ctx *c = ctx;
  if (ts_stmt_kind_of(st) == TS_STMT_IF) c->ifs_open--;
}

/* Whether condition `cond` only keeps the store `st` to b from writing out
 * of b's bounds (the predicate of an imperfect tile): each conjunct is
 * `idx_d + o < c` for an index idx_d of the store with c - o >= b's
 * extent in dimension d. Where it is false nothing of b is written, and
 * nothing of b can be read there either. */
static bool bounds_guard(ts_arena *a, ts_expr *cond, const ts_stmt *st,
                         const ts_buffer *b) {
  if (ts_expr_kind_of(cond) == TS_EXPR_AND)
    return bounds_guard(a, ts_expr_operand(cond, 0), st, b) &&
           bounds_guard(a, ts_expr_operand(cond, 1), st, b);
  if (ts_expr_kind_of(cond) != TS_EXPR_LT) return false;
  ts_expr *x = ts_expr_operand(cond, 0);
  int64_t c;
  if (!ts_expr_is_const_int(ts_expr_operand(cond, 1), &c) ||
      ts_expr_dtype(x).lanes != 1)
    return false;
  for (int d = 0; d < ts_store_n_indices(st) && d < ts_buffer_ndim(b); d++) {
    int64_t o;
    if (const_difference(a, x, ts_store_index(st, d), &o) &&
        c - o >= ts_buffer_dim(b, d))
      return true;
  }
  return false;
}

static bool dense_write(ts_arena *a, ts_stmt *w, const ts_buffer *b,
                        ts_expr **base, int64_t *extent) {
  dense_ctx c = {.b = b};
  ts_visitor v = {.enter_stmt = dense_enter,
                  .leave_stmt = dense_leave,
                  .visit_expr = dense_visit,
                  .ctx = &c};
  ts_stmt_walk(w, &v);
  if (c.stores != 1 || c.loads || c.ifs_at_store > 16 || c.n_loops >= 64)
    return false;
  for (int i = 0; i < c.ifs_at_store; i++)
    if (!bounds_guard(a, c.store_conds[i], c.store, b)) return false;
  int ndim = ts_buffer_ndim(b);
  if (ts_store_n_indices(c.store) != ndim) return false;
  bool used[64] = {false};
  ts_node_map *zero = ts_node_map_create();
  for (int i = 0; i < c.n_loops; i++)
    ts_node_map_put(zero, ts_for_var(c.loops[i]), ts_index(a, 0));
  bool ok = true;
  /* each index is its value at the loops' start (any expression of outer
   * variables) plus a dense combination of w's loop vars */
  for (int d = 0; ok && d < ndim; d++) {
    ts_expr *idx = ts_store_index(c.store, d);
    base[d] = ts_simplify(a, ts_expr_substitute(a, idx, zero, NULL), NULL);
    ts_expr *off = ts_simplify(a, ts_sub(a, idx, base[d]), NULL);
    /* off: a sum of w's loop vars (each in one dim) that tiles
     * [0, extent) densely: sorted by coefficient, the smallest is 1 and
     * each next one is the span of those before it */
    lin_form lf = {{0}, {0}, 0, 0};
    extent[d] = 1;
    if (!lin_of(off, 1, &lf) || lf.c != 0) {
      ok = false;
      break;
    }
    int term[LIN_MAX], ni = 0;
    for (int k = 0; k < lf.n && ok; k++) {
      if (!lf.coef[k]) continue;
      int found = -1;
      for (int i = 0; i < c.n_loops; i++)
        if (ts_for_var(c.loops[i]) == lf.var[k]) found = i;
      int64_t mn;
      if (found < 0 || used[found] ||
          !ts_expr_is_const_int(ts_for_min(c.loops[found]), &mn) || mn != 0 ||
          lf.coef[k] < 0) {
        ok = false;
        break;
      }
      used[found] = true;
      term[ni++] = k;
    }
    /* check the tiling in order of coefficients */
    int64_t span = 1;
    for (int done = 0; ok && done < ni; done++) {
      int pick = -1;
      for (int q = 0; q < ni; q++) {
        int k = term[q];
        if (lf.coef[k] == span) pick = k;
      }
      if (pick < 0) {
        ok = false;
        break;
      }
      int64_t ex = 0;
      for (int i = 0; i < c.n_loops; i++)
        if (ts_for_var(c.loops[i]) == lf.var[pick])
          ts_expr_is_const_int(ts_for_extent(c.loops[i]), &ex);
      if (ex < 1) ok = false;
      span *= ex;
    }
    if (ok) extent[d] = span;
  }
  ts_node_map_destroy(zero);
  return ok;
}

/* Whether each iteration of `loop` writes all of b it uses before using
 * it (the body is a sequence whose first statement touching b is a dense
 * write covering every access in the body): then nothing flows between
 * iterations and b can be allocated per iteration, whether or not the
 * iterations use disjoint parts (a cache filled by compute_at). */
static bool written_first_per_iteration(ts_arena *a, ts_stmt *loop,
                                        const ts_buffer *b,
                                        const relaxed_loops *relax) {
  ts_stmt *body = ts_for_body(loop);
  /* (through the allocations and lets of the loop body) */
  for (;;) {
    if (ts_stmt_kind_of(body) == TS_STMT_ALLOCATE)
      body = ts_allocate_body(body);
    else if (ts_stmt_kind_of(body) == TS_STMT_LET)
      body = ts_let_stmt_body(body);
    else
      break;
  }
  /* through a perfect nest: if each iteration of the inner loop writes
   * before it reads, so does each iteration of this one */
  if (ts_stmt_kind_of(body) == TS_STMT_FOR)
    return written_first_per_iteration(a, body, b, relax);
  if (ts_stmt_kind_of(body) != TS_STMT_SEQ) return false;
  ts_stmt *w = NULL;
  int touching = 0;
  for (int i = 0; i < ts_seq_n(body); i++)
    if (touches(ts_seq_item(body, i), b, NULL)) {
      if (!w) w = ts_seq_item(body, i);
      touching++;
    }
  /* the one statement touching b is a loop whose iterations each write
   * before they read (a cache filled at a deeper compute_at, next to
   * statements that do not use it: a reduction's init) */
  if (touching == 1 && ts_stmt_kind_of(w) == TS_STMT_FOR)
    return written_first_per_iteration(a, w, b, relax);
  ts_expr *wbase[TS_MAX_DIMS], *rbase[TS_MAX_DIMS];
  int64_t wext[TS_MAX_DIMS], rext[TS_MAX_DIMS];
  if (!w || !dense_write(a, w, b, wbase, wext) ||
      !compact_region(a, body, b, relax, rbase, rext))
    return false;
  for (int d = 0; d < ts_buffer_ndim(b); d++) {
    int64_t c;
    if (!const_difference(a, rbase[d], wbase[d], &c) || c < 0 ||
        c + rext[d] > wext[d])
      return false;
  }
  return true;
}

/* Descends from s to the lowest statement holding every access of b,
 * entering a loop only when each iteration uses its own part of b, or
 * writes what it uses of b before using it. GPU
 * thread loops follow the storage a scope has: a local buffer is one per
 * thread, so blockIdx and threadIdx loops are entered; a shared buffer is
 * one per thread block, so blockIdx loops are entered and threadIdx and
 * vthread loops are too, with the buffer's region relaxed over them
 * (recorded in *relax). */
static ts_stmt *lowest_holder(ts_arena *a, ts_stmt *s, const ts_buffer *b,
                              relaxed_loops *relax) {
  bool shared = !strncmp(ts_buffer_scope(b), "shared", 6);
  bool local = !strcmp(ts_buffer_scope(b), "local");
  for (;;) {
    ts_stmt *next = NULL;
    switch (ts_stmt_kind_of(s)) {
    case TS_STMT_FOR: {
      const char *tag =
          ts_for_kind_of(s) == TS_FOR_THREAD ? ts_for_thread_tag(s) : NULL;
      bool block_axis = tag && !strncmp(tag, "blockIdx", 8);
      bool thread_axis = tag && !strncmp(tag, "threadIdx", 9);
      bool vthread = tag && !strcmp(tag, "vthread");
      int64_t one = 0;
      bool single = ts_expr_is_const_int(ts_for_extent(s), &one) && one == 1;
      bool room = relax->n < (int)(sizeof relax->v / sizeof relax->v[0]);
      if ((single || (shared && (thread_axis || vthread))) && room) {
        /* (a loop of one iteration is entered too: its var is a constant) */
        relax->v[relax->n++] = s;
        next = ts_for_body(s);
      } else if ((local && (block_axis || thread_axis)) ||
                 (shared && block_axis)) {
        next = ts_for_body(s);
      } else if (disjoint_per_iteration(a, s, b, relax) ||
                 written_first_per_iteration(a, s, b, relax)) {
        next = ts_for_body(s);
      }
      break;
    }
    case TS_STMT_SEQ: {
      int holders = 0;
      for (int i = 0; i < ts_seq_n(s); i++)
        if (touches(ts_seq_item(s, i), b, NULL)) {
          holders++;
          next = ts_seq_item(s, i);
        }
      if (holders != 1) next = NULL;
      break;
    }
    case TS_STMT_LET: next = ts_let_stmt_body(s); break;
    case TS_STMT_ALLOCATE: next = ts_allocate_body(s); break;
    default: break;
    }
    if (!next) return s;
    s = next;
  }
}

typedef struct rewrite_ctx {
  const ts_buffer *old;
  ts_buffer *nb;
  ts_expr **base;
  ts_stmt *lca; /* wrapped in the new allocation */
} rewrite_ctx;

static ts_expr *shift_load(void *ctx, ts_arena *a, ts_expr *e) {
  rewrite_ctx *c = ctx;
  if (ts_expr_kind_of(e) != TS_EXPR_LOAD || ts_expr_buffer(e) != c->old)
    return e;
  int n = ts_expr_n_operands(e);
  ts_expr *idx[TS_MAX_DIMS];
  for (int d = 0; d < n; d++)
    idx[d] = ts_simplify(a, ts_sub(a, ts_expr_operand(e, d), c->base[d]), NULL);
  return ts_load(a, c->nb, idx, n);
}

static ts_expr *shift_expr(void *ctx, ts_arena *a, ts_expr *e) {
  return ts_expr_mutate(a, e, shift_load, ctx);
}

static ts_stmt *shift_post(void *ctx, ts_arena *a, ts_stmt *s);

static ts_stmt *shift_pre(void *ctx, ts_arena *a, ts_stmt *s) {
  rewrite_ctx *c = ctx;
  if (s != c->lca) return NULL;
  /* Rewrite the holder's subtree, then wrap it in the allocation. */
  c->lca = NULL;
  ts_stmt_mutator m = {
      .pre = shift_pre, .post = shift_post, .expr = shift_expr, .ctx = c};
  ts_stmt *inner = ts_stmt_mutate(a, s, &m);
  return ts_allocate(a, c->nb, inner);
}

static ts_stmt *shift_post(void *ctx, ts_arena *a, ts_stmt *s) {
  rewrite_ctx *c = ctx;
  if (ts_stmt_kind_of(s) != TS_STMT_STORE || ts_store_buffer(s) != c->old)
    return s;
  int n = ts_store_n_indices(s);
  ts_expr *idx[TS_MAX_DIMS];
  for (int d = 0; d < n; d++)
    idx[d] = ts_simplify(a, ts_sub(a, ts_store_index(s, d), c->base[d]), NULL);
  return ts_store(a, c->nb, idx, n, ts_store_value(s));
}

/* Rewrites one allocate statement; returns its replacement. */
static ts_stmt *compact_one(ts_arena *a, ts_stmt *alloc) {
  ts_buffer *b = ts_allocate_buffer(alloc);
  ts_stmt *body = ts_allocate_body(alloc);
  bool addr = false;
  if (ts_buffer_strides(b) || !touches(body, b, &addr) || addr) return alloc;
  relaxed_loops relax = {{0}, 0};
  ts_stmt *lca = lowest_holder(a, body, b, &relax);
  ts_expr *base[TS_MAX_DIMS];
  int64_t extent[TS_MAX_DIMS];
  if (!compact_region(a, lca, b, &relax, base, extent)) return alloc;
  int ndim = ts_buffer_ndim(b);
  bool smaller = false;
  for (int d = 0; d < ndim; d++) {
    if (extent[d] >= ts_buffer_dim(b, d) || extent[d] < 1) {
      /* no gain in this dim: keep it whole */
      extent[d] = ts_buffer_dim(b, d);
      base[d] = ts_index(a, 0);
    } else {
      smaller = true;
    }
  }
  if (!smaller && lca == body) return alloc;
  ts_buffer *nb =
      ts_buffer_new(a, ts_buffer_name(b), ts_buffer_dtype(b), extent, ndim);
  ts_buffer_set_scope(a, nb, ts_buffer_scope(b));
  ts_buffer_set_align(nb, ts_buffer_align(b));
  rewrite_ctx c = {b, nb, base, lca};
  ts_stmt_mutator m = {
      .pre = shift_pre, .post = shift_post, .expr = shift_expr, .ctx = &c};
  return ts_stmt_mutate(a, body, &m);
}

static ts_stmt *compact_post(void *ctx, ts_arena *a, ts_stmt *s) {
  (void)ctx;
  if (ts_stmt_kind_of(s) != TS_STMT_ALLOCATE) return s;
  return compact_one(a, s);
}

int ts_lower_compact(ts_func *f, ts_error *err) {
  (void)err;
  ts_stmt_mutator m = {.post = compact_post};
  ts_func_set_body(f, ts_stmt_mutate(ts_func_arena(f), ts_func_body(f), &m));
  return TS_OK;
}
