/*
 * pad.c — pad_einsum: a block's spatial iter padded to a multiple of a
 * factor. The block then computes whole tiles over the padded extent,
 * with no guard: each input indexed by the iter is read through a copy
 * padded with zeros, the output is written into a padded buffer, and a new
 * block copies the original extent out of it.
 */
#include "schedule/internal.h"

#include <stdlib.h>
#include <string.h>

#define PAD_MAX_BUFFERS PAD_EINSUM_MAX_OUT

/* The buffers a block's init and body access through iter var v, with the
 * dimension each indexes by it bare; whether v appears anywhere else. */
typedef struct pad_scan {
  const ts_expr *v;
  const ts_buffer *buf[PAD_MAX_BUFFERS];
  int dim[PAD_MAX_BUFFERS];
  int n;
  int64_t uses, bare; /* v's occurrences: all, and as a whole index */
  bool conflict;      /* a buffer indexed by v in two dimensions */
} pad_scan;

static void note_index(pad_scan *c, const ts_buffer *b, int d) {
  c->bare++;
  for (int i = 0; i < c->n; i++)
    if (c->buf[i] == b) {
      if (c->dim[i] != d) c->conflict = true;
      return;
    }
  if (c->n == PAD_MAX_BUFFERS) {
    c->conflict = true;
    return;
  }
  c->buf[c->n] = b;
  c->dim[c->n++] = d;
}

static void scan_expr(void *ctx, ts_expr *e) {
  pad_scan *c = ctx;
  if (e == c->v) c->uses++;
  if (ts_expr_kind_of(e) == TS_EXPR_LOAD)
    for (int d = 0; d < ts_expr_n_operands(e); d++)
      if (ts_expr_operand(e, d) == c->v) note_index(c, ts_expr_buffer(e), d);
}

static void scan_visit(void *ctx, ts_expr *e) {
  ts_expr_walk(e, scan_expr, ctx);
}

static bool scan_stmt(void *ctx, ts_stmt *s) {
  pad_scan *c = ctx;
  if (ts_stmt_kind_of(s) == TS_STMT_STORE)
    for (int d = 0; d < ts_store_n_indices(s); d++)
      if (ts_store_index(s, d) == c->v) note_index(c, ts_store_buffer(s), d);
  return true;
}

/* buf with dimension d of extent `padded`, named NAME_pad, global. */
static ts_buffer *padded_buffer(ts_arena *a, const ts_func *f,
                                const ts_buffer *buf, int d, int64_t padded) {
  int64_t shape[TS_MAX_DIMS];
  int nd = ts_buffer_ndim(buf);
  for (int i = 0; i < nd; i++) shape[i] = ts_buffer_dim(buf, i);
  shape[d] = padded;
  char *base = ts_arena_printf(a, "%s_pad", ts_buffer_name(buf));
  char *name = base ? unique_buffer_name(f, base) : NULL;
  ts_buffer *b =
      name ? ts_buffer_new(a, name, ts_buffer_dtype(buf), shape, nd) : NULL;
  if (b) ts_buffer_set_scope(a, b, "global");
  return b;
}

/* The loop whose var is v, among the loops above r. */
static ts_stmt *loop_of_var(const ts_func *f, const ts_stmt *r,
                            const ts_expr *v) {
  stmt_vec above = {0};
  tree_loops_above(f, r, &above);
  ts_stmt *found = NULL;
  for (int i = 0; i < above.n; i++)
    if (ts_for_var(above.v[i]) == v) found = above.v[i];
  sv_free(&above);
  return found;
}

int apply_pad_einsum(ts_sched *s, inst *in, rv_list *out) {
  ts_stmt *r;
  int64_t k, factor;
  int rc = check_arity(s, in, 1, 1, 2);
  if (rc || (rc = in_block(s, in, 0, &r)) || (rc = attr_int(s, in, 0, &k)) ||
      (rc = attr_int(s, in, 1, &factor)))
    return rc;
  ts_block *b = ts_realize_block(r);
  const char *bn = ts_block_name(b);
  ts_stmt *sc = tree_scope(s->func, r);
  if (!sc)
    return FAIL(s, TS_ESCHEDULE, "pad_einsum: block '%s' is the root block",
                bn);
  int ni = ts_block_n_iters(b);
  if (k < 0 || k >= ni)
    return FAIL(s, TS_ESCHEDULE,
                "pad_einsum: block '%s' has no iter %lld (it has %d)", bn,
                (long long)k, ni);
  if (factor < 2 || factor > 4096)
    return FAIL(s, TS_ESCHEDULE, "pad_einsum: factor %lld is not in 2..4096",
                (long long)factor);
  ts_expr *v = ts_block_iter_var(b, (int)k);
  if (ts_block_iter_kind(b, (int)k) != TS_ITER_SPATIAL)
    return FAIL(s, TS_ESCHEDULE,
                "pad_einsum: iter '%s' of block '%s' is not spatial",
                ts_var_name(v), bn);
  int64_t lo, ext;
  if (!iter_const(b, (int)k, &lo, &ext) || lo != 0)
    return FAIL(s, TS_ESCHEDULE,
                "pad_einsum: iter '%s' of block '%s' does not range over 0 .. "
                "a constant",
                ts_var_name(v), bn);
  int64_t padded = (ext + factor - 1) / factor * factor;
  if (padded == ext) return TS_OK; /* already whole: nothing to pad */
  /* bound to a loop of its own, over exactly its extent, with no guard */
  ts_expr *val = ts_realize_value(r, (int)k);
  ts_stmt *loop =
      ts_expr_kind_of(val) == TS_EXPR_VAR ? loop_of_var(s->func, r, val) : NULL;
  int64_t lext = 0;
  bool own = loop && loop_const(loop, &lext) && lext == ext;
  for (int i = 0; i < ni && own; i++)
    if (i != k && uses_var(ts_realize_value(r, i), val)) own = false;
  if (!own)
    return FAIL(s, TS_ESCHEDULE,
                "pad_einsum: iter '%s' of block '%s' is not bound to a loop "
                "of its own over 0 .. %lld (pad before splitting or fusing "
                "it)",
                ts_var_name(v), bn, (long long)ext);
  if (ts_realize_predicate(r))
    return FAIL(s, TS_ESCHEDULE,
                "pad_einsum: block '%s' has a predicate (pad before "
                "splitting)",
                bn);
  stmt_vec under = {0};
  tree_realizes(ts_for_body(loop), false, &under);
  bool alone = under.n == 1 && under.v[0] == r;
  sv_free(&under);
  if (!alone)
    return FAIL(s, TS_ESCHEDULE,
                "pad_einsum: loop '%s' of iter '%s' holds other blocks than "
                "'%s'",
                loop_name(loop), ts_var_name(v), bn);
  /* every use of the iter a whole index of one dimension per buffer */
  pad_scan c = {.v = v};
  ts_visitor vis = {
      .enter_stmt = scan_stmt, .visit_expr = scan_visit, .ctx = &c};
  ts_stmt_walk(ts_block_init(b), &vis);
  ts_stmt_walk(ts_block_body(b), &vis);
  if (c.conflict || c.uses != c.bare)
    return FAIL(s, TS_ESCHEDULE,
                "pad_einsum: block '%s' uses iter '%s' other than as a whole "
                "index of one dimension of each buffer",
                bn, ts_var_name(v));
  if (ts_block_n_writes(b) != 1)
    return FAIL(s, TS_ESCHEDULE, "pad_einsum: block '%s' writes %d buffers", bn,
                ts_block_n_writes(b));
  ts_buffer *w = ts_block_write(b, 0)->buffer;
  int wd = -1;
  for (int i = 0; i < c.n; i++) {
    if (c.buf[i] == w) wd = c.dim[i];
    if (ts_buffer_dim(c.buf[i], c.dim[i]) != ext)
      return FAIL(s, TS_ESCHEDULE,
                  "pad_einsum: dimension %d of '%s' is %lld, not the extent "
                  "%lld of iter '%s'",
                  c.dim[i], ts_buffer_name(c.buf[i]),
                  (long long)ts_buffer_dim(c.buf[i], c.dim[i]), (long long)ext,
                  ts_var_name(v));
  }
  if (wd < 0)
    return FAIL(s, TS_ESCHEDULE,
                "pad_einsum: block '%s' does not index its output '%s' by "
                "iter '%s'",
                bn, ts_buffer_name(w), ts_var_name(v));
  /* the inputs' producers run before the block's nest, the output's
   * consumers after it, and nothing else writes the output */
  int nb;
  ts_stmt **blocks = ts_func_blocks(s->func, &nb);
  int b_item = tree_index_in(sc, r);
  if (b_item < 0) rc = fail_oom(s, "pad_einsum");
  int pos[PAD_MAX_BUFFERS] = {0};
  for (int i = 0; i < nb && !rc; i++) {
    ts_stmt *x = blocks[i];
    if (x == r || !tree_scope(s->func, x)) continue;
    const ts_block *o = ts_realize_block(x);
    bool same = tree_scope(s->func, x) == sc && tree_index_in(sc, x) == b_item;
    if (block_writes(o, w) || (same && block_reads(o, w))) {
      rc = FAIL(s, TS_ESCHEDULE,
                "pad_einsum: output '%s' of block '%s' is also %s by block "
                "'%s'%s",
                ts_buffer_name(w), bn, block_writes(o, w) ? "written" : "read",
                ts_block_name(o),
                block_writes(o, w) ? "" : " in the same loop nest");
      break;
    }
    for (int j = 0; j < c.n && !rc; j++) {
      if (c.buf[j] == w || !block_writes(o, c.buf[j])) continue;
      int it = tree_scope(s->func, x) == sc ? tree_index_in(sc, x) : -1;
      if (it < 0 || it >= b_item)
        rc = FAIL(s, TS_ESCHEDULE,
                  "pad_einsum: input '%s' of block '%s' is written by block "
                  "'%s', which does not run before its loop nest",
                  ts_buffer_name(c.buf[j]), bn, ts_block_name(o));
      else if (it + 1 > pos[j])
        pos[j] = it + 1;
    }
  }
  free(blocks);
  if (rc) return rc;
  /* the padded buffers and their blocks */
  ts_arena *a = ts_func_arena(s->func);
  ts_stmt *copies[PAD_MAX_BUFFERS];
  char *names[PAD_MAX_BUFFERS];
  ts_buffer *pads[PAD_MAX_BUFFERS];
  for (int j = 0; j < c.n; j++) {
    ts_buffer *x = (ts_buffer *)c.buf[j];
    pads[j] = padded_buffer(a, s->func, x, c.dim[j], padded);
    char *base = ts_arena_printf(a, "%s_%s", ts_buffer_name(x),
                                 x == w ? "unpad" : "pad");
    names[j] = base ? unique_block_name(s->func, base) : NULL;
    copies[j] = !pads[j] ? NULL
                : x == w
                    ? copy_nest_padded(a, names[j], x, pads[j], -1, 0)
                    : copy_nest_padded(a, names[j], pads[j], x, c.dim[j], ext);
    if (!copies[j]) return fail_oom(s, "pad_einsum");
  }
  /* insert: the output's copy after the nest, then the inputs' copies at
   * their places (highest first, so the earlier places stay put) */
  for (int j = 0; j < c.n; j++)
    if (c.buf[j] == w && !tree_insert(s->func, sc, b_item + 1, copies[j]))
      return fail_oom(s, "pad_einsum");
  for (;;) {
    int best = -1;
    for (int j = 0; j < c.n; j++)
      if (c.buf[j] != w && copies[j] && (best < 0 || pos[j] >= pos[best]))
        best = j;
    if (best < 0) break;
    if (!tree_insert(s->func, sc, pos[best], copies[best]))
      return fail_oom(s, "pad_einsum");
    copies[best] = NULL;
  }
  for (int j = 0; j < c.n; j++) {
    swap_in_block(s, r, c.buf[j], pads[j], true);
    ts_block_add_alloc(a, ts_realize_block(sc), pads[j]);
  }
  ts_block_set_iter_dom(b, (int)k,
                        (ts_range){ts_index(a, 0), ts_index(a, padded)});
  ts_for_set_range(loop, ts_index(a, 0), ts_index(a, padded));
  ts_block_infer_regions(a, b);
  for (int j = 0; j < c.n; j++)
    if (c.buf[j] != w) rv_new_block(s, names[j], out);
  for (int j = 0; j < c.n; j++)
    if (c.buf[j] == w) rv_new_block(s, names[j], out);
  sched_refresh(s);
  return TS_OK;
}
