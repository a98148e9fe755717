/*
 * prefetch.c — software prefetches of the next region a loop nest reads
 * (the lowering step TS_LOWER_STEP_PREFETCH, for loops annotated
 * TS_ANN_PREFETCH).
 *
 * A product that streams its weights panel by panel (a packed panel of B
 * read by every row tile of the output, then the next panel) waits for
 * memory at the start of each panel: the first row tile reads the panel
 * from DRAM or L3 faster than the hardware prefetchers bring it, and the
 * other tiles find it in L2. Under an annotated loop Y (the nest's outer,
 * usually parallel, loop) every load of an input parameter whose region
 * stays the same for two or more iterations of Y, then changes, gets a
 * prefetch of the region it will read next, spread evenly over the
 * iterations that read the current one. (A region that changes at every
 * iteration is a stream the hardware prefetchers follow; measured, adding
 * its prefetches only cost.)
 *
 *   - X: the innermost serial loop around the load, below Y;
 *   - s: how many consecutive iterations of Y read the same region (the
 *     load's indices with every loop inside Y at its first iteration,
 *     evaluated for y = 0, 1, ... until they change);
 *   - the region of one iteration of Y (the box between the indices at the
 *     inner loops' first and last iterations), which must be one
 *     contiguous run of the buffer (row-major: full in every dimension
 *     after its first non-unit one);
 *   - a counter c over the s iterations of Y and the loops from Y down to
 *     X (C values in all): step c prefetches element c * floor(E / C) of
 *     the run that iteration y + s reads (clamped to Y's last iteration),
 *     E its length (c * E / C where E < C). Where a step advances less than a
 * cache line, X runs in groups of M steps (M a power of two dividing X's
 * extent), with the group's prefetches, about one per line, ahead of the inner
 * loop over the group: a test per step cost more than the prefetches saved.
 *
 * Each prefetch is `evaluate call<int32>("tessera.prefetch", &B[...],
 * bytes)`, the run's first element and a byte offset into the run;
 * it changes no value (x86: prefetcht1, into L2). Loads the analysis
 * cannot read (non-constant loop bounds, indices that are not integers
 * once the loops are fixed, a region that is not contiguous or smaller
 * than a page) get none. TESSERA_PREFETCH=0 in the environment turns the
 * step off (to compare).
 */
#include "codegen/internal.h"
#include "tir/alloc.h"

#include <stdlib.h>
#include <string.h>

#define PF_MAX_LOOPS 32
#define PF_MAX_ITEMS 64
#define PF_MIN_BYTES 4096 /* smaller regions: nothing to gain */
#define PF_LINE 64
#define PF_MAX_PERIOD 4096 /* iterations of Y scanned for the period */

typedef struct pf_loop {
  ts_stmt *s;
  ts_expr *var;
  int64_t ext;
} pf_loop;

typedef struct pf_item {
  ts_stmt *x;                 /* the loop whose body gets the prefetch */
  ts_expr *xvar;              /* its var */
  int64_t xext;               /* its extent */
  ts_expr *idx[TS_MAX_DIMS];  /* the next region's first element */
  ts_expr *cnt;               /* the step counter (over y's period and X) */
  int64_t elems, total, step; /* run length, steps, steps per prefetch */
  int n;
  ts_buffer *b;
  int64_t origin[TS_MAX_DIMS], period;
} pf_item;

typedef struct pf_ctx {
  ts_func *f;
  ts_arena *a;
  pf_loop y;                   /* the annotated loop */
  pf_loop stack[PF_MAX_LOOPS]; /* loops below y, outermost first */
  int depth;
  pf_item items[PF_MAX_ITEMS];
  int n_items;
} pf_ctx;

static bool is_input(const ts_func *f, const ts_buffer *b) {
  for (int i = 0; i < ts_func_n_params(f); i++)
    if (ts_func_param(f, i) == b) return !ts_func_param_is_output(f, i);
  return false;
}

/* e with y = yv and each loop of the stack at `at` (first or last
 * iteration), as an integer; false when it is not one. */
static bool eval_at(pf_ctx *c, ts_expr *e, int64_t yv, bool last, int64_t *v) {
  ts_node_map *m = ts_node_map_create();
  if (!m) return false;
  ts_node_map_put(m, c->y.var, ts_index(c->a, yv));
  for (int i = 0; i < c->depth; i++)
    ts_node_map_put(m, c->stack[i].var,
                    ts_index(c->a, last ? c->stack[i].ext - 1 : 0));
  ts_expr *r = ts_simplify(c->a, ts_expr_substitute(c->a, e, m, NULL), NULL);
  ts_node_map_destroy(m);
  return r && ts_expr_is_const_int(r, v);
}

/* Whether e mentions var v. */
static bool uses(const ts_expr *e, const ts_expr *v) {
  if (e == v) return true;
  for (int i = 0; i < ts_expr_n_operands(e); i++)
    if (uses(ts_expr_operand(e, i), v)) return true;
  return false;
}

/* The indices of load e at y = yv, the inner loops at their first (or
 * last) iteration. */
static bool indices_at(pf_ctx *c, ts_expr *e, int64_t yv, bool last,
                       int64_t *out) {
  for (int i = 0; i < ts_expr_n_operands(e); i++)
    if (!eval_at(c, ts_expr_operand(e, i), yv, last, &out[i])) return false;
  return true;
}

/* The prefetch for load e, whose innermost serial loop below y is
 * stack[xi]; added to the items unless an equal one is there. */
static void plan_load(pf_ctx *c, ts_expr *e, int xi) {
  ts_buffer *b = ts_expr_buffer(e);
  int n = ts_expr_n_operands(e);
  if (n < 1 || n > TS_MAX_DIMS || ts_buffer_strides(b) ||
      ts_expr_dtype(e).lanes != 1 || ts_buffer_bytes(b) < PF_MIN_BYTES ||
      !uses(e, c->y.var))
    return;
  int64_t lo[TS_MAX_DIMS], hi[TS_MAX_DIMS], nx[TS_MAX_DIMS];
  if (!indices_at(c, e, 0, false, lo) || !indices_at(c, e, 0, true, hi)) return;
  /* the period: the first iteration of y whose region starts elsewhere */
  int64_t s = 0, cap = c->y.ext < PF_MAX_PERIOD ? c->y.ext : PF_MAX_PERIOD;
  for (int64_t yv = 1; yv < cap && !s; yv++) {
    if (!indices_at(c, e, yv, false, nx)) return;
    if (memcmp(nx, lo, sizeof(int64_t) * (size_t)n)) s = yv;
  }
  if (!s) return;
  if (s < 2)
    return; /* a new region every iteration: a stream the
               hardware prefetchers follow */
  /* the region of one iteration: in bounds and one contiguous run */
  int64_t elems = 1;
  int first = -1;
  for (int i = 0; i < n; i++) {
    int64_t ext = hi[i] - lo[i] + 1;
    if (lo[i] < 0 || ext < 1 || hi[i] >= ts_buffer_dim(b, i)) return;
    if (first >= 0 && (lo[i] != 0 || ext != ts_buffer_dim(b, i))) return;
    if (first < 0 && ext > 1) first = i;
    elems *= ext;
  }
  int64_t esize = (int64_t)ts_dtype_elem_bytes(ts_buffer_dtype(b));
  if (elems * esize < PF_MIN_BYTES) return;
  for (int k = 0; k < c->n_items; k++) {
    pf_item *it = &c->items[k];
    if (it->x == c->stack[xi].s && it->b == b && it->period == s &&
        !memcmp(it->origin, lo, sizeof(int64_t) * (size_t)n))
      return;
  }
  if (c->n_items == PF_MAX_ITEMS) return;

  ts_arena *a = c->a;
  /* the counter over y's period and the loops down to X */
  int64_t inner = 1;
  ts_expr *cnt = ts_index(a, 0);
  for (int i = xi; i >= 0; i--) {
    cnt = ts_add(a, cnt, ts_mul(a, c->stack[i].var, ts_index(a, inner)));
    inner *= c->stack[i].ext;
  }
  cnt = ts_add(
      a,
      ts_mul(a, ts_floormod(a, c->y.var, ts_index(a, s)), ts_index(a, inner)),
      cnt);
  int64_t total = s * inner, xext = c->stack[xi].ext;
  int64_t m = 1;
  while (m * 2 * elems * esize <= (int64_t)PF_LINE * total &&
         xext % (m * 2) == 0)
    m *= 2;
  /* the next region's first element */
  ts_node_map *vars = ts_node_map_create();
  if (!vars) return;
  ts_node_map_put(vars, c->y.var,
                  ts_min(a, ts_add(a, c->y.var, ts_index(a, s)),
                         ts_index(a, c->y.ext - 1)));
  for (int i = 0; i < c->depth; i++)
    ts_node_map_put(vars, c->stack[i].var, ts_index(a, 0));
  pf_item *it = &c->items[c->n_items++];
  for (int i = 0; i < n; i++)
    it->idx[i] = ts_expr_substitute(a, ts_expr_operand(e, i), vars, NULL);
  ts_node_map_destroy(vars);
  it->x = c->stack[xi].s;
  it->xvar = c->stack[xi].var;
  it->xext = xext;
  it->cnt = cnt;
  it->elems = elems;
  it->total = total;
  it->step = m;
  it->n = n;
  it->b = b;
  it->period = s;
  memset(it->origin, 0, sizeof it->origin);
  memcpy(it->origin, lo, sizeof(int64_t) * (size_t)n);
}

static void scan_expr(pf_ctx *c, ts_expr *e) {
  if (!e) return;
  if (ts_expr_kind_of(e) == TS_EXPR_LOAD && is_input(c->f, ts_expr_buffer(e))) {
    int xi = -1;
    for (int i = c->depth - 1; i >= 0 && xi < 0; i--)
      if (ts_for_kind_of(c->stack[i].s) == TS_FOR_SERIAL) xi = i;
    if (xi >= 0) plan_load(c, e, xi);
  }
  if (ts_expr_kind_of(e) == TS_EXPR_LET) return; /* its var is not a loop */
  for (int i = 0; i < ts_expr_n_operands(e); i++)
    scan_expr(c, ts_expr_operand(e, i));
}

static bool const_loop(ts_stmt *s, pf_loop *l) {
  int64_t lo = -1;
  l->s = s;
  l->var = ts_for_var(s);
  return ts_expr_is_const_int(ts_for_min(s), &lo) && lo == 0 &&
         ts_expr_is_const_int(ts_for_extent(s), &l->ext) && l->ext > 0;
}

static void scan_stmt(pf_ctx *c, ts_stmt *s) {
  if (!s) return;
  switch (ts_stmt_kind_of(s)) {
  case TS_STMT_FOR:
    /* loads under a loop of unknown bounds (or too deep) get none */
    if (c->depth == PF_MAX_LOOPS || !const_loop(s, &c->stack[c->depth])) return;
    c->depth++;
    scan_stmt(c, ts_for_body(s));
    c->depth--;
    return;
  case TS_STMT_SEQ:
    for (int i = 0; i < ts_seq_n(s); i++) scan_stmt(c, ts_seq_item(s, i));
    return;
  case TS_STMT_IF:
    scan_expr(c, ts_if_cond(s));
    scan_stmt(c, ts_if_then(s));
    scan_stmt(c, ts_if_else(s));
    return;
  case TS_STMT_STORE:
    for (int i = 0; i < ts_store_n_indices(s); i++)
      scan_expr(c, ts_store_index(s, i));
    scan_expr(c, ts_store_value(s));
    return;
  case TS_STMT_EVALUATE: scan_expr(c, ts_evaluate_value(s)); return;
  case TS_STMT_LET: scan_stmt(c, ts_let_stmt_body(s)); return;
  case TS_STMT_ALLOCATE: scan_stmt(c, ts_allocate_body(s)); return;
  default: return; /* blocks are lowered before this step */
  }
}

/* The prefetch of item it at counter value cnt: the element `off` of the
 * run, given as the run's first element and a byte offset from it (the
 * dimensions after the first are whole, so row-major the run is one
 * contiguous range). Where a step covers one element or more, `off` is
 * cnt times the whole elements per step (the last partial step's worth
 * of the run is not fetched): no division inside the reduction loop,
 * where the address is computed at every step. (Splitting `off` back into
 * indices took a floordiv and a floormod per dimension: 40-50 integer
 * instructions per step there, measured 30 % of a 7 x 7 3 x 3 conv's
 * time.) */
static ts_stmt *prefetch_at(ts_arena *a, const pf_item *it, ts_expr *cnt) {
  ts_expr *off = it->elems >= it->total
                     ? ts_mul(a, cnt, ts_index(a, it->elems / it->total))
                     : ts_floordiv(a, ts_mul(a, cnt, ts_index(a, it->elems)),
                                   ts_index(a, it->total));
  int64_t esize = (int64_t)ts_dtype_elem_bytes(ts_buffer_dtype(it->b));
  ts_expr *args[2] = {ts_address_of(a, it->b, (ts_expr **)it->idx, it->n),
                      ts_mul(a, off, ts_index(a, esize))};
  return ts_evaluate(a, ts_call(a, TS_INT32, "tessera.prefetch", args, 2));
}

/* Each loop X with planned prefetches becomes two: an outer loop over
 * groups of M iterations (M the largest step of its items) whose body
 * starts with the prefetches of the group (M / step of each item), and
 * the inner loop over the group running X's body. */
static void insert_items(pf_ctx *c) {
  ts_arena *a = c->a;
  for (int k = 0; k < c->n_items; k++) {
    pf_item *first = &c->items[k];
    ts_stmt *x = first->x;
    if (!x) continue;
    int64_t big = 1;
    for (int j = k; j < c->n_items; j++)
      if (c->items[j].x == x && c->items[j].step > big) big = c->items[j].step;
    /* x's var counts the groups from now on: x -> x * M + g */
    ts_expr *xv = first->xvar, *xi = ts_var(a, "pf_i", TS_INDEX);
    ts_stmt *list[PF_MAX_ITEMS + 1];
    int n = 0;
    for (int j = k; j < c->n_items && n < PF_MAX_ITEMS; j++) {
      pf_item *it = &c->items[j];
      if (it->x != x) continue;
      for (int64_t g = 0; g < big && n < PF_MAX_ITEMS; g += it->step) {
        ts_node_map *m = ts_node_map_create();
        if (!m) return;
        ts_node_map_put(
            m, xv, ts_add(a, ts_mul(a, xv, ts_index(a, big)), ts_index(a, g)));
        list[n++] = prefetch_at(a, it, ts_expr_substitute(a, it->cnt, m, NULL));
        ts_node_map_destroy(m);
      }
      it->x = NULL;
    }
    ts_stmt *body = ts_for_body(x);
    if (big > 1) {
      ts_node_map *m = ts_node_map_create();
      if (!m) return;
      ts_node_map_put(m, xv, ts_add(a, ts_mul(a, xv, ts_index(a, big)), xi));
      body = ts_for(a, xi, ts_index(a, 0), ts_index(a, big), TS_FOR_SERIAL,
                    NULL, ts_stmt_substitute(a, body, m, NULL));
      ts_node_map_destroy(m);
      list[n++] = body;
      ts_for_set_body(x, ts_seq(a, list, n));
      ts_for_set_range(x, ts_index(a, 0), ts_index(a, first->xext / big));
    } else {
      list[n++] = body;
      ts_for_set_body(x, ts_seq(a, list, n));
    }
  }
}

static void visit(pf_ctx *c, ts_stmt *s) {
  if (!s) return;
  switch (ts_stmt_kind_of(s)) {
  case TS_STMT_FOR: {
    const ts_annotation *ann = ts_for_find_annotation(s, TS_ANN_PREFETCH);
    if (ann && ann->kind == TS_ANN_INT && ann->i > 0 && const_loop(s, &c->y)) {
      c->depth = 0;
      c->n_items = 0;
      scan_stmt(c, ts_for_body(s));
      insert_items(c);
      return;
    }
    visit(c, ts_for_body(s));
    return;
  }
  case TS_STMT_SEQ:
    for (int i = 0; i < ts_seq_n(s); i++) visit(c, ts_seq_item(s, i));
    return;
  case TS_STMT_IF:
    visit(c, ts_if_then(s));
    visit(c, ts_if_else(s));
    return;
  case TS_STMT_LET: visit(c, ts_let_stmt_body(s)); return;
  case TS_STMT_ALLOCATE: visit(c, ts_allocate_body(s)); return;
  default: return;
  }
}

int ts_lower_prefetch(ts_func *f, ts_error *err) {
  const char *off = getenv("TESSERA_PREFETCH"); /* "0": to compare */
  if (off && !strcmp(off, "0")) return TS_OK;
  unsigned long oom = ts_alloc_failures();
  pf_ctx *c = calloc(1, sizeof *c);
  if (!c) return TS_ERR(err, TS_ENOMEM, "lower prefetch: out of memory");
  c->f = f;
  c->a = ts_func_arena(f);
  visit(c, ts_func_body(f));
  free(c);
  return ts_alloc_check(oom, TS_OK, err, "lower prefetch");
}
