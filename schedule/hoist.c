/*
 * hoist.c — the stages of a scheduled function that compute only from
 * constant parameters (a weight's packing into a kernel's tile layout, the
 * sums of its columns that a signed int8 product subtracts), split off into
 * a function of their own, so that a compiled model runs them once, ahead
 * of time, on each call site's constant, and its kernel reads the result.
 *
 * A stage is a leaf block directly under the root block. A root-allocated
 * buffer X is constant-derived when every block that writes X is such a
 * leaf, writes only constant-derived buffers, reads only constant
 * parameters and constant-derived buffers, and its body is stores only
 * (no calls with effects, no addresses taken): the greatest set with that
 * property, found by removing buffers until none changes. A plain copy of
 * a constant into a buffer of the same layout is not one (identity_copy). The
 * prologue keeps those blocks under the same loops in the same order, so it
 * writes every element of every X in the same sequence as the original did; the
 * main function keeps every other block. Since no block of the main
 * function writes an X, every read of X there sees X's final value, as in
 * the original (TensorIR's blocks read a producer's region after it is
 * complete).
 */
#include "schedule/internal.h"

#include <stdlib.h>
#include <string.h>

/* the most root allocations a function hoisted from may have */
#define HOIST_MAX_ALLOCS 64

typedef struct hoist_info {
  stmt_vec realizes; /* every block realize but the root's */
  bool *leaf;        /* per realize: a leaf directly under the root */
  bool *hoisted;     /* per realize */
  ts_buffer *allocs[HOIST_MAX_ALLOCS]; /* the root block's allocations */
  int n_allocs;
  bool *cand;   /* per alloc: constant-derived */
  bool *output; /* per alloc: constant-derived and read by the rest */
  const bool *is_const;
  const ts_func *f;
} hoist_info;

static int alloc_index(const hoist_info *h, const ts_buffer *b) {
  for (int i = 0; i < h->n_allocs; i++)
    if (h->allocs[i] == b) return i;
  return -1;
}

static bool const_param(const hoist_info *h, const ts_buffer *b) {
  for (int i = 0; i < ts_func_n_params(h->f); i++)
    if (ts_func_param(h->f, i) == b) return h->is_const[i];
  return false;
}

typedef struct pure_ctx {
  const hoist_info *h;
  const ts_block *b;
  bool ok;
} pure_ctx;

static void pure_expr(void *ctx, ts_expr *e) {
  pure_ctx *c = ctx;
  ts_expr_kind k = ts_expr_kind_of(e);
  if (k == TS_EXPR_ADDRESS_OF) {
    c->ok = false;
  } else if (k == TS_EXPR_LOAD) {
    ts_buffer *x = ts_expr_buffer(e);
    int a = alloc_index(c->h, x);
    if (!const_param(c->h, x) && (a < 0 || !c->h->cand[a])) c->ok = false;
  } else if (k == TS_EXPR_CALL && !ts_intrinsic_lookup(ts_expr_call_name(e))) {
    c->ok = false; /* only the interpreter's pure built-ins */
  }
}

static void pure_visit(void *ctx, ts_expr *e) {
  ts_expr_walk(e, pure_expr, ctx);
}

static bool pure_enter(void *ctx, ts_stmt *s) {
  pure_ctx *c = ctx;
  switch (ts_stmt_kind_of(s)) {
  case TS_STMT_STORE:
    if (!block_writes(c->b, ts_store_buffer(s))) c->ok = false;
    return c->ok;
  case TS_STMT_SEQ:
  case TS_STMT_IF:
  case TS_STMT_LET: return c->ok;
  default: /* loops, evaluate, allocate, nested blocks */
    c->ok = false;
    return false;
  }
}

/* Whether leaf block b's init and body are stores of values that read
 * only constant parameters and constant-derived buffers. */
static bool pure_block(const hoist_info *h, const ts_block *b) {
  pure_ctx c = {h, b, true};
  ts_visitor v = {pure_enter, NULL, pure_visit, &c};
  if (ts_block_init(b)) ts_stmt_walk(ts_block_init(b), &v);
  if (c.ok && ts_block_body(b)) ts_stmt_walk(ts_block_body(b), &v);
  return c.ok;
}

/* Whether b's body copies a constant parameter element for element into
 * alloc `x` of the same shape, dtype and compact layout (a cache_read
 * computed inside a loop for locality, without a layout of its own):
 * ahead of time it would save the copy and lose the locality it is there
 * for (a 3x3 conv's weight panel copied before its 28 uses ran 1.13 ms
 * per call; hoisted, the kernel reading the whole weight ran 1.98 ms). */
static bool identity_copy(const hoist_info *h, const ts_block *b,
                          const ts_buffer *x) {
  const ts_stmt *s = ts_block_body(b);
  if (ts_block_init(b) || !s || ts_stmt_kind_of(s) != TS_STMT_STORE ||
      ts_store_buffer(s) != x)
    return false;
  const ts_expr *v = ts_store_value(s);
  if (ts_expr_kind_of(v) != TS_EXPR_LOAD) return false;
  const ts_buffer *p = ts_expr_buffer(v);
  if (!const_param(h, p) ||
      !ts_dtype_eq(ts_buffer_dtype(p), ts_buffer_dtype(x)) ||
      ts_buffer_ndim(p) != ts_buffer_ndim(x) || ts_buffer_strides(p) ||
      ts_buffer_strides(x) || ts_store_n_indices(s) != ts_buffer_ndim(x) ||
      ts_expr_n_operands(v) != ts_buffer_ndim(p))
    return false;
  for (int d = 0; d < ts_buffer_ndim(x); d++) {
    const ts_expr *a = ts_store_index(s, d), *c = ts_expr_operand(v, d);
    if (ts_buffer_dim(p, d) != ts_buffer_dim(x, d) ||
        ts_expr_kind_of(a) != TS_EXPR_VAR || a != c)
      return false;
  }
  return true;
}

static bool has_inner_block(const ts_block *b) {
  stmt_vec in = {0};
  if (ts_block_init(b)) tree_realizes(ts_block_init(b), false, &in);
  if (ts_block_body(b)) tree_realizes(ts_block_body(b), false, &in);
  bool r = in.n > 0;
  sv_free(&in);
  return r;
}

static void hoist_info_free(hoist_info *h) {
  sv_free(&h->realizes);
  free(h->leaf);
  free(h->hoisted);
  free(h->cand);
  free(h->output);
}

/* Finds the constant-derived buffers, the blocks that compute them and the
 * buffers the rest reads. False when f has none (or memory ran out). */
static bool analyse(const ts_func *f, const bool *is_const, hoist_info *h) {
  memset(h, 0, sizeof *h);
  h->f = f;
  h->is_const = is_const;
  ts_stmt *root = ts_func_body(f);
  if (!root || ts_stmt_kind_of(root) != TS_STMT_BLOCK_REALIZE) return false;
  ts_block *rb = ts_realize_block(root);
  h->n_allocs = ts_block_n_allocs(rb);
  if (!h->n_allocs || h->n_allocs > HOIST_MAX_ALLOCS) return false;
  for (int i = 0; i < h->n_allocs; i++) h->allocs[i] = ts_block_alloc(rb, i);
  tree_realizes(root, true, &h->realizes);
  /* drop the root itself (the first, pre-order) */
  if (h->realizes.n && h->realizes.v[0] == root) {
    memmove(h->realizes.v, h->realizes.v + 1,
            sizeof h->realizes.v[0] * (size_t)(h->realizes.n - 1));
    h->realizes.n--;
  }
  int n = h->realizes.n;
  h->leaf = calloc((size_t)n + 1, sizeof *h->leaf);
  h->hoisted = calloc((size_t)n + 1, sizeof *h->hoisted);
  h->cand = calloc((size_t)h->n_allocs, sizeof *h->cand);
  h->output = calloc((size_t)h->n_allocs, sizeof *h->output);
  if (!h->leaf || !h->hoisted || !h->cand || !h->output) return false;
  for (int i = 0; i < h->n_allocs; i++) h->cand[i] = true;
  for (int i = 0; i < n; i++) {
    ts_stmt *r = h->realizes.v[i];
    const ts_block *b = ts_realize_block(r);
    stmt_vec loops = {0};
    tree_loops_above(f, r, &loops);
    bool cpu_loops = true;
    for (int l = 0; l < loops.n; l++)
      if (ts_for_kind_of(loops.v[l]) == TS_FOR_THREAD) cpu_loops = false;
    sv_free(&loops);
    h->leaf[i] = tree_scope(f, r) == root && !has_inner_block(b) && cpu_loops;
  }
  for (int i = 0; i < n; i++) {
    const ts_block *b = ts_realize_block(h->realizes.v[i]);
    if (ts_block_n_writes(b) != 1) continue;
    int a = alloc_index(h, ts_block_write(b, 0)->buffer);
    if (a >= 0 && identity_copy(h, b, h->allocs[a])) h->cand[a] = false;
  }
  /* the greatest set: a writer that fails takes its buffers out */
  for (bool changed = true; changed;) {
    changed = false;
    for (int i = 0; i < n; i++) {
      const ts_block *b = ts_realize_block(h->realizes.v[i]);
      bool writes_cand = false, ok = h->leaf[i];
      for (int w = 0; w < ts_block_n_writes(b); w++) {
        int a = alloc_index(h, ts_block_write(b, w)->buffer);
        if (a >= 0 && h->cand[a])
          writes_cand = true;
        else
          ok = false;
      }
      if (!writes_cand) continue;
      for (int r = 0; ok && r < ts_block_n_reads(b); r++) {
        ts_buffer *x = ts_block_read(b, r)->buffer;
        int a = alloc_index(h, x);
        ok = const_param(h, x) || (a >= 0 && h->cand[a]);
      }
      if (ok) ok = pure_block(h, b);
      if (ok) continue;
      for (int w = 0; w < ts_block_n_writes(b); w++) {
        int a = alloc_index(h, ts_block_write(b, w)->buffer);
        if (a >= 0 && h->cand[a]) {
          h->cand[a] = false;
          changed = true;
        }
      }
    }
  }
  int n_hoisted = 0;
  for (int i = 0; i < n; i++) {
    const ts_block *b = ts_realize_block(h->realizes.v[i]);
    bool all = ts_block_n_writes(b) > 0;
    for (int w = 0; all && w < ts_block_n_writes(b); w++) {
      int a = alloc_index(h, ts_block_write(b, w)->buffer);
      all = a >= 0 && h->cand[a];
    }
    h->hoisted[i] = all && h->leaf[i];
    n_hoisted += h->hoisted[i];
  }
  /* what the blocks left read of it */
  int n_out = 0;
  for (int i = 0; i < n; i++) {
    if (h->hoisted[i]) continue;
    const ts_block *b = ts_realize_block(h->realizes.v[i]);
    for (int r = 0; r < ts_block_n_reads(b); r++) {
      int a = alloc_index(h, ts_block_read(b, r)->buffer);
      if (a >= 0 && h->cand[a] && !h->output[a]) {
        h->output[a] = true;
        n_out++;
      }
    }
  }
  return n_hoisted > 0 && n_out > 0;
}

/* The blocks hoisted (want true) or kept (false) by name, analysed on f. */
static char **block_names(const hoist_info *h, bool want, int *n_out) {
  char **names = calloc((size_t)h->realizes.n + 1, sizeof *names);
  int n = 0;
  for (int i = 0; names && i < h->realizes.n; i++)
    if (h->hoisted[i] == want)
      names[n++] = (char *)ts_block_name(ts_realize_block(h->realizes.v[i]));
  *n_out = n;
  return names;
}

static ts_region full_region(ts_arena *a, ts_buffer *b) {
  int nd = ts_buffer_ndim(b);
  ts_range *rg = ts_arena_alloc(a, sizeof *rg * (size_t)(nd ? nd : 1));
  for (int d = 0; rg && d < nd; d++)
    rg[d] = (ts_range){ts_index(a, 0), ts_index(a, ts_buffer_dim(b, d))};
  return (ts_region){b, nd, rg};
}

/* Removes the non-root blocks of g named in names[0..n) (top-level ones
 * first: a removed block takes its inner blocks along). */
static bool remove_blocks(ts_func *g, char *const *names, int n) {
  for (int i = 0; i < n; i++) {
    stmt_vec all = {0};
    tree_realizes(ts_func_body(g), true, &all);
    ts_stmt *victim = NULL;
    for (int k = 0; k < all.n && !victim; k++)
      if (all.v[k] != ts_func_body(g) &&
          !strcmp(ts_block_name(ts_realize_block(all.v[k])), names[i]))
        victim = all.v[k];
    sv_free(&all);
    if (victim && !tree_remove(g, victim, NULL)) return false;
  }
  return true;
}

/* g, a copy of the analysed function: as the prologue (`prologue`) or as
 * the main function. The outputs become parameters. */
static int reshape(ts_func *g, const bool *is_const, bool prologue,
                   ts_error *err) {
  hoist_info h;
  bool found = analyse(g, is_const, &h);
  ts_block *rb = found ? ts_realize_block(ts_func_body(g)) : NULL;
  /* h.allocs: the root's allocations before any is removed */
  int n_allocs = found ? h.n_allocs : 0;
  int n_names = 0;
  char **names = found ? block_names(&h, !prologue, &n_names) : NULL;
  int rc = TS_OK;
  if (!found || !names) {
    rc = TS_ERR(err, TS_EINTERNAL, "hoist: the copy analyses differently");
    goto done;
  }
  /* names point into g's blocks: copy them before removing blocks */
  for (int i = 0; i < n_names; i++)
    if (!(names[i] = ts_strdup(names[i]))) rc = TS_ENOMEM;
  if (rc || !remove_blocks(g, names, n_names)) {
    rc = TS_ERR(err, TS_ENOMEM, "hoist: out of memory");
    goto done;
  }
  ts_arena *a = ts_func_arena(g);
  /* parameters: the prologue's are the constants it reads and then its
   * outputs; the main function's are its own and then the outputs */
  int np = ts_func_n_params(g);
  size_t cap = (size_t)(np + HOIST_MAX_ALLOCS + ts_block_n_reads(rb) +
                        ts_block_n_writes(rb));
  ts_buffer **params = ts_arena_alloc(a, sizeof *params * cap);
  ts_region *reads = ts_arena_alloc(a, sizeof *reads * cap);
  ts_region *writes = ts_arena_alloc(a, sizeof *writes * cap);
  if (!params || !reads || !writes) {
    rc = TS_ERR(err, TS_ENOMEM, "hoist: out of memory");
    goto done;
  }
  int n = 0, nr = 0, nw = 0;
  for (int i = 0; i < np; i++) {
    ts_buffer *p = ts_func_param(g, i);
    if (!prologue || is_const[i]) params[n++] = p;
  }
  if (prologue) { /* only the constants a hoisted block reads */
    int m = 0;
    for (int i = 0; i < n; i++) {
      bool used = false;
      for (int k = 0; k < h.realizes.n && !used; k++)
        used = h.hoisted[k] &&
               block_reads(ts_realize_block(h.realizes.v[k]), params[i]);
      if (used) {
        params[m++] = params[i];
        reads[nr++] = full_region(a, params[i]);
      }
    }
    n = m;
  } else {
    ts_block *b = rb;
    for (int r = 0; r < ts_block_n_reads(b); r++)
      reads[nr++] = *ts_block_read(b, r);
    for (int w = 0; w < ts_block_n_writes(b); w++)
      writes[nw++] = *ts_block_write(b, w);
  }
  for (int i = 0; i < n_allocs; i++) {
    if (!h.cand[i]) {
      if (prologue) ts_block_replace_alloc(rb, h.allocs[i], NULL);
      continue;
    }
    if (h.output[i]) {
      params[n++] = h.allocs[i];
      if (prologue)
        writes[nw++] = full_region(a, h.allocs[i]);
      else
        reads[nr++] = full_region(a, h.allocs[i]);
      ts_block_replace_alloc(rb, h.allocs[i], NULL);
    } else if (!prologue) { /* read and written by hoisted blocks only */
      ts_block_replace_alloc(rb, h.allocs[i], NULL);
    }
  }
  ts_func_set_params(g, params, n);
  ts_block_set_regions(a, rb, reads, nr, writes, nw);
  if (ts_arena_failed(a)) rc = TS_ERR(err, TS_ENOMEM, "hoist: out of memory");
done:
  for (int i = 0; names && i < n_names; i++) free(names[i]);
  free(names);
  hoist_info_free(&h);
  return rc;
}

void ts_hoist_clear(ts_hoist *h) {
  ts_func_free(h->prologue);
  ts_func_free(h->main);
  free(h->inputs);
  memset(h, 0, sizeof *h);
}

int ts_func_hoist_const(const ts_func *f, const bool *is_const, ts_hoist *out,
                        ts_error *err) {
  memset(out, 0, sizeof *out);
  hoist_info h;
  bool found = analyse(f, is_const, &h);
  hoist_info_free(&h);
  if (!found) return TS_OK;
  int rc = TS_OK;
  out->prologue = ts_func_copy(f);
  out->main = ts_func_copy(f);
  if (!out->prologue || !out->main) {
    rc = TS_ERR(err, TS_ENOMEM, "hoist: out of memory");
    goto fail;
  }
  char name[256];
  snprintf(name, sizeof name, "%.200s_prologue", ts_func_name(f));
  ts_func_set_name(out->prologue, name);
  if ((rc = reshape(out->prologue, is_const, true, err)) ||
      (rc = reshape(out->main, is_const, false, err)))
    goto fail;
  /* which of f's parameters the prologue's first ones are */
  int np = ts_func_n_params(f), pp = ts_func_n_params(out->prologue);
  out->inputs = calloc((size_t)pp + 1, sizeof *out->inputs);
  if (!out->inputs) {
    rc = TS_ERR(err, TS_ENOMEM, "hoist: out of memory");
    goto fail;
  }
  for (int i = 0; i < pp; i++) {
    const char *pn = ts_buffer_name(ts_func_param(out->prologue, i));
    int k = -1;
    for (int j = 0; j < np && k < 0; j++)
      if (is_const[j] && !strcmp(ts_buffer_name(ts_func_param(f, j)), pn))
        k = j;
    if (k < 0) break;
    out->inputs[out->n_inputs++] = k;
  }
  out->n_outputs = pp - out->n_inputs;
  if (out->n_outputs != ts_func_n_params(out->main) - np) {
    rc = TS_ERR(err, TS_EINTERNAL,
                "hoist: the prologue writes %d buffers, the kernel reads %d",
                out->n_outputs, ts_func_n_params(out->main) - np);
    goto fail;
  }
  if ((rc = ts_func_verify(out->prologue, err)) ||
      (rc = ts_func_verify(out->main, err)))
    goto fail;
  return TS_OK;
fail:
  ts_hoist_clear(out);
  return rc;
}
