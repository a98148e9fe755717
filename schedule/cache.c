/*
 * cache.c — the caching and storage primitives: cache_read and cache_write
 * (a copy block between a buffer and a new buffer of another scope),
 * set_scope, storage_align (padded strides) and transform_layout (an
 * injective index map applied to every access of an allocated buffer, with
 * the small parser of index maps "(i, j) -> (floordiv(j, 16), i)").
 */
#include "schedule/internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static const char *const scopes[] = {"global", "shared", "shared.dyn",
                                     "local",  "warp",   NULL};

static int check_scope(ts_sched *s, const char *prim, const char *scope) {
  for (int i = 0; scopes[i]; i++)
    if (strcmp(scopes[i], scope) == 0) return TS_OK;
  return FAIL(s, TS_EINVAL,
              "%s: unknown storage scope '%s' (global, shared, shared.dyn, "
              "local or warp)",
              prim, scope);
}

/* "NAME_scope" with the scope's dots as underscores (NULL when out of
 * memory). */
static char *cache_base(ts_arena *a, const char *name, const char *scope) {
  size_t n = strlen(name) + strlen(scope) + 2;
  char *base = ts_arena_alloc(a, n);
  if (!base) return NULL;
  snprintf(base, n, "%s_%s", name, scope);
  for (char *p = base; *p; p++)
    if (*p == '.') *p = '_';
  return base;
}

ts_stmt *copy_nest_padded(ts_arena *a, const char *name, ts_buffer *dst,
                          ts_buffer *src, int pad_dim, int64_t ext) {
  int nd = ts_buffer_ndim(dst);
  ts_block *b = name && dst && src ? ts_block_new(a, name) : NULL;
  if (!b) return NULL;
  ts_expr *iters[TS_MAX_DIMS], *loops_v[TS_MAX_DIMS];
  for (int d = 0; d < nd; d++) {
    char *vn = ts_arena_printf(a, "v%d", d);
    char *ln = ts_arena_printf(a, "ax%d", d);
    iters[d] = vn ? ts_var(a, vn, TS_INDEX) : NULL;
    loops_v[d] = ln ? ts_var(a, ln, TS_INDEX) : NULL;
    if (!iters[d] || !loops_v[d] ||
        ts_block_add_iter_var(
            a, b, iters[d],
            (ts_range){ts_index(a, 0), ts_index(a, ts_buffer_dim(dst, d))},
            TS_ITER_SPATIAL) < 0)
      return NULL;
  }
  ts_expr *value = ts_load(a, src, iters, nd);
  if (pad_dim >= 0 && pad_dim < nd) {
    /* zeros past the extent; if_then_else does not evaluate the load
     * there */
    ts_dtype t = ts_buffer_dtype(src);
    ts_expr *args[3] = {ts_lt(a, iters[pad_dim], ts_index(a, ext)), value,
                        ts_dtype_is_float(t) ? ts_float(a, t, 0)
                                             : ts_int(a, t, 0)};
    value = ts_call(a, t, "if_then_else", args, 3);
  }
  ts_stmt *store = ts_store(a, dst, iters, nd, value);
  if (!store || ts_arena_failed(a)) return NULL;
  ts_block_set_body(b, store);
  ts_block_infer_regions(a, b);
  ts_stmt *body = ts_block_realize(a, b, loops_v, nd, NULL);
  for (int d = nd - 1; d >= 0; d--)
    body =
        ts_for(a, loops_v[d], ts_index(a, 0),
               ts_index(a, ts_buffer_dim(dst, d)), TS_FOR_SERIAL, NULL, body);
  return body;
}

static ts_stmt *copy_nest(ts_arena *a, const char *name, ts_buffer *dst,
                          ts_buffer *src) {
  return copy_nest_padded(a, name, dst, src, -1, 0);
}

static ts_buffer *clone_buffer(ts_arena *a, const ts_func *f,
                               const ts_buffer *src, const char *scope) {
  char *base = cache_base(a, ts_buffer_name(src), scope);
  char *name = base ? unique_buffer_name(f, base) : NULL;
  ts_buffer *b = name ? ts_buffer_new(a, name, ts_buffer_dtype(src),
                                      ts_buffer_shape(src), ts_buffer_ndim(src))
                      : NULL;
  if (b) ts_buffer_set_scope(a, b, scope);
  return b;
}

/* Replaces buffer `from` by `to` in loads and stores of a subtree. */
typedef struct swap_ctx {
  ts_node_map *map;
  const ts_buffer *from;
  ts_buffer *to;
  bool stores;
} swap_ctx;

static ts_expr *swap_expr(void *ctx, ts_arena *a, ts_expr *e) {
  swap_ctx *c = ctx;
  return ts_expr_substitute(a, e, NULL, c->map);
}

static ts_stmt *swap_store(void *ctx, ts_arena *a, ts_stmt *s) {
  swap_ctx *c = ctx;
  if (!c->stores || ts_store_buffer(s) != c->from) return s;
  int n = ts_store_n_indices(s);
  ts_expr *idx[TS_MAX_DIMS + 1];
  for (int d = 0; d < n && d <= TS_MAX_DIMS; d++) idx[d] = ts_store_index(s, d);
  return ts_store(a, c->to, idx, n, ts_store_value(s));
}

void swap_in_block(ts_sched *s, ts_stmt *r, const ts_buffer *from,
                   ts_buffer *to, bool stores) {
  swap_ctx c = {ts_node_map_create(), from, to, stores};
  ts_node_map_put(c.map, from, to);
  ts_block *b = ts_realize_block(r);
  rewriter rw = {swap_expr, swap_store, true, &c};
  ts_arena *a = ts_func_arena(s->func);
  ts_block_set_init(b, rewrite_stmt(a, ts_block_init(b), &rw));
  ts_block_set_body(b, rewrite_stmt(a, ts_block_body(b), &rw));
  ts_node_map_destroy(c.map);
}

/* The index in the scope's body list of the item holding stmt. */
static int item_of(ts_stmt *scope, const ts_stmt *stmt) {
  return tree_index_in(scope, stmt);
}

/* ========================================================================
 * cache_read / cache_write
 * ======================================================================== */

int apply_cache_read(ts_sched *s, inst *in, rv_list *out) {
  ts_stmt *r;
  const char *bufname, *scope;
  int rc = check_arity(s, in, 1, 1, 2);
  if (rc || (rc = in_block(s, in, 0, &r)) ||
      (rc = attr_str(s, in, 0, &bufname)) ||
      (rc = attr_str(s, in, 1, &scope)) ||
      (rc = check_scope(s, "cache_read", scope)))
    return rc;
  ts_block *b = ts_realize_block(r);
  const char *bn = ts_block_name(b);
  ts_stmt *sc = tree_scope(s->func, r);
  if (!sc)
    return FAIL(s, TS_ESCHEDULE, "cache_read: block '%s' is the root block",
                bn);
  ts_buffer *x;
  if ((rc = block_buffer(s, b, bufname, true, false, &x)))
    return fail_prefix(s, rc, "cache_read");
  if (block_writes(b, x))
    return FAIL(s, TS_ESCHEDULE,
                "cache_read: block '%s' also writes '%s' (use cache_write)", bn,
                bufname);
  /* after the last writer of x in the scope that runs before the block */
  stmt_vec all = {0};
  tree_realizes(ts_block_body(ts_realize_block(sc)), false, &all);
  int b_item = item_of(sc, r), pos = 0;
  if (b_item < 0) rc = fail_oom(s, "cache_read"); /* the list was not made */
  for (int i = 0; i < all.n && !rc; i++) {
    if (!block_writes(ts_realize_block(all.v[i]), x)) continue;
    int it = item_of(sc, all.v[i]);
    if (it == b_item)
      rc = FAIL(s, TS_ESCHEDULE,
                "cache_read: producer block '%s' of '%s' is in the same loop "
                "nest as block '%s'",
                ts_block_name(ts_realize_block(all.v[i])), bufname, bn);
    else if (it < b_item && it + 1 > pos)
      pos = it + 1;
  }
  sv_free(&all);
  if (rc) return rc;
  ts_arena *a = ts_func_arena(s->func);
  ts_buffer *cx = clone_buffer(a, s->func, x, scope);
  char *base = cache_base(ts_func_arena(s->func), bufname, scope);
  char *name = base ? unique_block_name(s->func, base) : NULL;
  ts_stmt *nest = copy_nest(a, name, cx, x);
  if (!tree_insert(s->func, sc, pos, nest)) return fail_oom(s, "cache_read");
  swap_in_block(s, r, x, cx, false);
  ts_block_add_alloc(a, ts_realize_block(sc), cx);
  rv_new_block(s, name, out);
  sched_refresh(s);
  return TS_OK;
}

int apply_cache_write(ts_sched *s, inst *in, rv_list *out) {
  ts_stmt *r;
  const char *bufname, *scope;
  int rc = check_arity(s, in, 1, 1, 2);
  if (rc || (rc = in_block(s, in, 0, &r)) ||
      (rc = attr_str(s, in, 0, &bufname)) ||
      (rc = attr_str(s, in, 1, &scope)) ||
      (rc = check_scope(s, "cache_write", scope)))
    return rc;
  ts_block *b = ts_realize_block(r);
  const char *bn = ts_block_name(b);
  ts_stmt *sc = tree_scope(s->func, r);
  if (!sc)
    return FAIL(s, TS_ESCHEDULE, "cache_write: block '%s' is the root block",
                bn);
  ts_buffer *w;
  if ((rc = block_buffer(s, b, bufname, false, true, &w)))
    return fail_prefix(s, rc, "cache_write");
  int nb;
  ts_stmt **blocks = ts_func_blocks(s->func, &nb);
  int b_item = item_of(sc, r);
  if (b_item < 0) rc = fail_oom(s, "cache_write"); /* the list was not made */
  for (int i = 0; i < nb && !rc; i++) {
    ts_stmt *x = blocks[i];
    if (x == r || !tree_scope(s->func, x) || tree_contains(r, x)) continue;
    const ts_block *o = ts_realize_block(x);
    if (block_writes(o, w))
      rc = FAIL(s, TS_ESCHEDULE,
                "cache_write: buffer '%s' of block '%s' is also written by "
                "block '%s'",
                bufname, bn, ts_block_name(o));
    else if (block_reads(o, w) && tree_scope(s->func, x) == sc &&
             item_of(sc, x) == b_item)
      rc = FAIL(s, TS_ESCHEDULE,
                "cache_write: consumer block '%s' of '%s' is in the same loop "
                "nest as block '%s'",
                ts_block_name(o), bufname, bn);
  }
  free(blocks);
  if (rc) return rc;
  ts_arena *a = ts_func_arena(s->func);
  ts_buffer *cw = clone_buffer(a, s->func, w, scope);
  char *base = cache_base(ts_func_arena(s->func), bufname, scope);
  char *name = base ? unique_block_name(s->func, base) : NULL;
  ts_stmt *nest = copy_nest(a, name, w, cw);
  if (!tree_insert(s->func, sc, b_item + 1, nest))
    return fail_oom(s, "cache_write");
  swap_in_block(s, r, w, cw, true);
  ts_block_add_alloc(a, ts_realize_block(sc), cw);
  rv_new_block(s, name, out);
  sched_refresh(s);
  return TS_OK;
}

/* ========================================================================
 * set_scope / storage_align
 * ======================================================================== */

/* The allocated (not parameter) buffer named by attr 0 that block input 0
 * writes. */
static int written_alloc(ts_sched *s, inst *in, ts_stmt **r, ts_buffer **buf) {
  const char *bufname;
  int rc;
  if ((rc = in_block(s, in, 0, r)) || (rc = attr_str(s, in, 0, &bufname)))
    return rc;
  const char *prim = prim_name(in);
  ts_block *b = ts_realize_block(*r);
  if ((rc = block_buffer(s, b, bufname, false, true, buf)))
    return fail_prefix(s, rc, prim);
  if (is_param(s->func, *buf))
    return FAIL(s, TS_ESCHEDULE,
                "%s: buffer '%s' is a parameter of the function (its layout "
                "and scope are fixed)",
                prim, bufname);
  if (!alloc_site(s->func, *buf))
    return FAIL(s, TS_ESCHEDULE, "%s: buffer '%s' is not allocated by a block",
                prim, bufname);
  return TS_OK;
}

int apply_set_scope(ts_sched *s, inst *in, rv_list *out) {
  (void)out;
  ts_stmt *r;
  ts_buffer *buf;
  const char *scope;
  int rc = check_arity(s, in, 1, 1, 2);
  if (rc || (rc = attr_str(s, in, 1, &scope)) ||
      (rc = check_scope(s, "set_scope", scope)) ||
      (rc = written_alloc(s, in, &r, &buf)))
    return rc;
  ts_buffer_set_scope(ts_func_arena(s->func), buf, scope);
  return TS_OK;
}

int apply_storage_align(ts_sched *s, inst *in, rv_list *out) {
  (void)out;
  ts_stmt *r;
  ts_buffer *buf;
  int64_t axis, factor, offset;
  int rc = check_arity(s, in, 1, 1, 4);
  if (rc || (rc = attr_int(s, in, 1, &axis)) ||
      (rc = attr_int(s, in, 2, &factor)) ||
      (rc = attr_int(s, in, 3, &offset)) ||
      (rc = written_alloc(s, in, &r, &buf)))
    return rc;
  int nd = ts_buffer_ndim(buf);
  if (axis < 0 || axis >= nd - 1)
    return FAIL(s, TS_ESCHEDULE,
                "storage_align: axis %lld of buffer '%s' is not in 0..%d (the "
                "innermost stride stays 1)",
                (long long)axis, ts_buffer_name(buf), nd - 2);
  if (factor < 1 || factor > (1 << 20) || offset < 0 || offset >= factor)
    return FAIL(s, TS_ESCHEDULE,
                "storage_align: need factor >= 1 and 0 <= offset < factor "
                "(got %lld, %lld)",
                (long long)factor, (long long)offset);
  int64_t st[TS_MAX_DIMS], pad[TS_MAX_DIMS] = {0};
  const int64_t *old = ts_buffer_strides(buf);
  if (old)
    for (int d = 0; d < nd - 1; d++)
      pad[d] = old[d] - old[d + 1] * ts_buffer_dim(buf, d + 1);
  st[nd - 1] = 1;
  for (int d = nd - 2; d >= 0; d--) {
    int64_t base = st[d + 1] * ts_buffer_dim(buf, d + 1);
    if (d == axis)
      st[d] = base + ((offset - base % factor) % factor + factor) % factor;
    else
      st[d] = base + (pad[d] > 0 ? pad[d] : 0);
    if (st[d] > ((int64_t)1 << 40))
      return FAIL(s, TS_ESCHEDULE,
                  "storage_align: buffer '%s' becomes too "
                  "large",
                  ts_buffer_name(buf));
  }
  ts_buffer_set_strides(ts_func_arena(s->func), buf, st);
  return TS_OK;
}

/* ========================================================================
 * Index maps: "(i, j) -> (floordiv(j, 16), i, floormod(j, 16))"
 *   map   := '(' names ')' '->' '(' exprs ')'
 *   expr  := term (('+' | '-') term)*
 *   term  := unary ('*' unary)*
 *   unary := '-' unary | INT | NAME | '(' expr ')' |
 *            ('floordiv' | 'floormod') '(' expr ',' expr ')'
 * ======================================================================== */

typedef struct map_parser {
  const char *p;
  ts_arena *a;
  ts_expr *vars[TS_MAX_DIMS];
  char names[TS_MAX_DIMS][32];
  int n_vars;
  const char *err;
} map_parser;

static void skip_ws(map_parser *m) {
  while (isspace((unsigned char)*m->p)) m->p++;
}

static bool eat(map_parser *m, const char *tok) {
  skip_ws(m);
  size_t n = strlen(tok);
  if (strncmp(m->p, tok, n) != 0) return false;
  m->p += n;
  return true;
}

static bool ident(map_parser *m, char *buf, size_t cap) {
  skip_ws(m);
  if (!isalpha((unsigned char)*m->p) && *m->p != '_') return false;
  size_t n = 0;
  while (isalnum((unsigned char)*m->p) || *m->p == '_') {
    if (n + 1 < cap) buf[n++] = *m->p;
    m->p++;
  }
  buf[n] = 0;
  return true;
}

static ts_expr *parse_expr(map_parser *m, int depth);

static ts_expr *parse_unary(map_parser *m, int depth) {
  if (depth > 64) {
    m->err = "nested too deeply";
    return NULL;
  }
  skip_ws(m);
  if (eat(m, "-")) {
    ts_expr *x = parse_unary(m, depth + 1);
    return x ? ts_sub(m->a, ts_index(m->a, 0), x) : NULL;
  }
  if (isdigit((unsigned char)*m->p)) {
    int64_t v = 0;
    while (isdigit((unsigned char)*m->p)) {
      if (v > (INT64_MAX - 9) / 10) {
        m->err = "integer too large";
        return NULL;
      }
      v = v * 10 + (*m->p++ - '0');
    }
    return ts_index(m->a, v);
  }
  if (eat(m, "(")) {
    ts_expr *x = parse_expr(m, depth + 1);
    if (x && !eat(m, ")")) {
      m->err = "expected ')'";
      return NULL;
    }
    return x;
  }
  char name[32];
  if (!ident(m, name, sizeof name)) {
    m->err = "expected a number, a name or '('";
    return NULL;
  }
  bool is_div = strcmp(name, "floordiv") == 0;
  if (is_div || strcmp(name, "floormod") == 0) {
    if (!eat(m, "(")) {
      m->err = "expected '(' after floordiv/floormod";
      return NULL;
    }
    ts_expr *x = parse_expr(m, depth + 1);
    if (!x) return NULL;
    if (!eat(m, ",")) {
      m->err = "expected ','";
      return NULL;
    }
    ts_expr *y = parse_expr(m, depth + 1);
    if (!y) return NULL;
    if (!eat(m, ")")) {
      m->err = "expected ')'";
      return NULL;
    }
    int64_t k;
    if (!ts_expr_is_const_int(y, &k) || k <= 0) {
      m->err = "floordiv/floormod need a positive constant divisor";
      return NULL;
    }
    return is_div ? ts_floordiv(m->a, x, y) : ts_floormod(m->a, x, y);
  }
  for (int i = 0; i < m->n_vars; i++)
    if (strcmp(m->names[i], name) == 0) return m->vars[i];
  m->err = "unknown name (not an input of the map)";
  return NULL;
}

static ts_expr *parse_term(map_parser *m, int depth) {
  ts_expr *x = parse_unary(m, depth);
  while (x && eat(m, "*")) {
    ts_expr *y = parse_unary(m, depth);
    if (!y) return NULL;
    x = ts_mul(m->a, x, y);
  }
  return x;
}

static ts_expr *parse_expr(map_parser *m, int depth) {
  ts_expr *x = parse_term(m, depth);
  while (x) {
    skip_ws(m);
    if (m->p[0] == '-' && m->p[1] == '>') break;
    bool plus = eat(m, "+");
    if (!plus && !eat(m, "-")) break;
    ts_expr *y = parse_term(m, depth);
    if (!y) return NULL;
    x = plus ? ts_add(m->a, x, y) : ts_sub(m->a, x, y);
  }
  return x;
}

/* Parses a map with n_in inputs; outputs into outs (count in *n_out). */
static int parse_index_map(ts_sched *s, ts_arena *a, const char *text, int n_in,
                           ts_expr **ins, ts_expr **outs, int *n_out) {
  map_parser m = {0};
  m.p = text;
  m.a = a;
  if (!eat(&m, "("))
    return FAIL(s, TS_EINVAL,
                "transform_layout: index map must start with "
                "'(' (\"(i, j) -> (j, i)\")");
  while (!eat(&m, ")")) {
    if (m.n_vars > 0 && !eat(&m, ","))
      return FAIL(s, TS_EINVAL,
                  "transform_layout: index map: expected ',' "
                  "between input names");
    if (m.n_vars == TS_MAX_DIMS ||
        !ident(&m, m.names[m.n_vars], sizeof m.names[0]))
      return FAIL(s, TS_EINVAL,
                  "transform_layout: index map: expected an "
                  "input name");
    for (int i = 0; i < m.n_vars; i++)
      if (strcmp(m.names[i], m.names[m.n_vars]) == 0)
        return FAIL(s, TS_EINVAL,
                    "transform_layout: index map: input '%s' is named twice",
                    m.names[i]);
    m.vars[m.n_vars] = ts_var(a, m.names[m.n_vars], TS_INDEX);
    m.n_vars++;
  }
  if (m.n_vars != n_in)
    return FAIL(s, TS_EINVAL,
                "transform_layout: index map has %d inputs; the buffer has %d "
                "dimensions",
                m.n_vars, n_in);
  if (!eat(&m, "->") || !eat(&m, "("))
    return FAIL(s, TS_EINVAL, "transform_layout: index map: expected '-> ('");
  *n_out = 0;
  while (!eat(&m, ")")) {
    if (*n_out > 0 && !eat(&m, ","))
      return FAIL(s, TS_EINVAL,
                  "transform_layout: index map: expected ',' at '%.20s'", m.p);
    if (*n_out == TS_MAX_DIMS)
      return FAIL(s, TS_EINVAL,
                  "transform_layout: index map has more than %d "
                  "outputs",
                  TS_MAX_DIMS);
    ts_expr *e = parse_expr(&m, 0);
    if (!e)
      return FAIL(s, TS_EINVAL, "transform_layout: index map: %s at '%.20s'",
                  m.err ? m.err : "syntax error", m.p);
    outs[(*n_out)++] = e;
  }
  skip_ws(&m);
  if (*m.p)
    return FAIL(s, TS_EINVAL, "transform_layout: index map: unexpected '%.20s'",
                m.p);
  if (*n_out == 0)
    return FAIL(s, TS_EINVAL, "transform_layout: index map has no outputs");
  for (int i = 0; i < n_in; i++) ins[i] = m.vars[i];
  return TS_OK;
}

/* ========================================================================
 * transform_layout
 * ======================================================================== */

#define MAX_CHECK_ELEMS ((int64_t)1 << 24)

typedef struct layout_ctx {
  const ts_buffer *from;
  ts_buffer *to;
  ts_expr **ins, **outs;
  int n_in, n_out;
} layout_ctx;

static void map_indices(ts_arena *a, layout_ctx *c, ts_expr *const *idx,
                        ts_expr **out) {
  ts_node_map *m = ts_node_map_create();
  for (int i = 0; i < c->n_in; i++) ts_node_map_put(m, c->ins[i], idx[i]);
  for (int k = 0; k < c->n_out; k++)
    out[k] = ts_expr_substitute(a, c->outs[k], m, NULL);
  ts_node_map_destroy(m);
}

static ts_expr *layout_post(void *ctx, ts_arena *a, ts_expr *e) {
  layout_ctx *c = ctx;
  ts_expr_kind k = ts_expr_kind_of(e);
  if ((k != TS_EXPR_LOAD && k != TS_EXPR_ADDRESS_OF) ||
      ts_expr_buffer(e) != c->from)
    return e;
  ts_expr *idx[TS_MAX_DIMS], *out[TS_MAX_DIMS];
  for (int i = 0; i < c->n_in; i++) idx[i] = ts_expr_operand(e, i);
  map_indices(a, c, idx, out);
  return k == TS_EXPR_LOAD ? ts_load(a, c->to, out, c->n_out)
                           : ts_address_of(a, c->to, out, c->n_out);
}

static ts_expr *layout_expr(void *ctx, ts_arena *a, ts_expr *e) {
  return ts_expr_mutate(a, e, layout_post, ctx);
}

static ts_stmt *layout_store(void *ctx, ts_arena *a, ts_stmt *s) {
  layout_ctx *c = ctx;
  if (ts_store_buffer(s) != c->from) return s;
  ts_expr *idx[TS_MAX_DIMS], *out[TS_MAX_DIMS];
  for (int i = 0; i < c->n_in; i++) idx[i] = ts_store_index(s, i);
  map_indices(a, c, idx, out);
  return ts_store(a, c->to, out, c->n_out, ts_store_value(s));
}

/* Whether some access of buf has a vector (ramp) index or the wrong number
 * of indices. */
typedef struct shape_ctx {
  const ts_buffer *buf;
  bool bad;
} shape_ctx;

static void shape_expr(void *ctx, ts_expr *e) {
  shape_ctx *c = ctx;
  ts_expr_kind k = ts_expr_kind_of(e);
  if ((k == TS_EXPR_LOAD || k == TS_EXPR_ADDRESS_OF) &&
      ts_expr_buffer(e) == c->buf &&
      (ts_expr_n_operands(e) != ts_buffer_ndim(c->buf) ||
       ts_expr_dtype(e).lanes != 1))
    c->bad = true;
}

static void shape_visit(void *ctx, ts_expr *e) {
  ts_expr_walk(e, shape_expr, ctx);
}

/* ---- a proof of injectivity without enumeration ----
 *
 * Replaying a tensorized candidate re-checks its layout map, and
 * enumerating a 1024 x 1024 buffer costs about 60 ms per replay. Most maps
 * are quasi-affine: sums of constant multiples of inputs and of digit
 * slices of inputs (floordiv and floormod by constants, nested, as
 * floordiv(floormod(d, 16), 4)). Splitting each input into mixed-radix
 * digits at the place values where its slices cut it (d = sum digit_t *
 * R_t, digit_t in [0, r_t))
 * makes every output, and so the flattened position sum_k out_k *
 * stride_k, a linear form sum w_t * digit_t + c over a box of digits. A
 * linear form is injective on the box when its weights, sorted by size,
 * are superincreasing: |w_t| > sum over smaller s of |w_s| * (r_s - 1)
 * (two points that differ first, from the top, in digit t differ there by
 * at least |w_t|, more than the digits below can make up). The proof is
 * sufficient only: whatever it cannot show is enumerated. */

#define MAX_DIGITS 64

typedef struct digit_sys {
  int n;
  int var[MAX_DIGITS];       /* the input the digit belongs to */
  int64_t radix[MAX_DIGITS]; /* R_t: the digit's place value */
  int64_t range[MAX_DIGITS]; /* r_t */
} digit_sys;

typedef struct lin_form {
  __int128 w[MAX_DIGITS];
  __int128 c;
} lin_form;

static int input_index(const ts_expr *e, ts_expr *const *ins, int n_in) {
  for (int i = 0; i < n_in; i++)
    if (ins[i] == e) return i;
  return -1;
}

/* Whether e is a digit slice of an input: floormod(floordiv(d, lo), hi /
 * lo), the digits of d from place value lo up to hi (0: no limit), built
 * from d by floordiv and floormod by constants (each divisor dividing what
 * it cuts, so the slice stays one range of places). */
static bool slice_of(const ts_expr *e, ts_expr *const *ins, int n_in, int *d,
                     int64_t *lo, int64_t *hi) {
  int i = input_index(e, ins, n_in);
  if (i >= 0) {
    *d = i;
    *lo = 1;
    *hi = 0;
    return true;
  }
  ts_expr_kind k = ts_expr_kind_of(e);
  int64_t c;
  if ((k != TS_EXPR_FLOORDIV && k != TS_EXPR_FLOORMOD) ||
      !ts_expr_is_const_int(ts_expr_operand(e, 1), &c) || c <= 0 ||
      !slice_of(ts_expr_operand(e, 0), ins, n_in, d, lo, hi))
    return false;
  if (*lo > ((int64_t)1 << 40) / c) return false;
  int64_t cut = *lo * c; /* the place value where c cuts the slice */
  if (*hi && (*hi % cut)) return false;
  if (k == TS_EXPR_FLOORDIV)
    *lo = cut;
  else if (!*hi || cut < *hi)
    *hi = cut;
  return true;
}

static bool add_boundary(int64_t *divs, int *n, int cap, int64_t c) {
  if (c <= 1) return true;
  for (int i = 0; i < *n; i++)
    if (divs[i] == c) return true;
  if (*n >= cap) return false;
  int i = (*n)++;
  while (i > 0 && divs[i - 1] > c) {
    divs[i] = divs[i - 1];
    i--;
  }
  divs[i] = c;
  return true;
}

/* Collects the place values where the slices of input var_index in e cut
 * it into divs (sorted, distinct); false when a floordiv or floormod in e
 * is not a slice of an input (a sum divided, say). */
static bool collect_divisors(const ts_expr *e, ts_expr *const *ins, int n_in,
                             int var_index, int64_t *divs, int *n, int cap) {
  int d;
  int64_t lo, hi;
  if (slice_of(e, ins, n_in, &d, &lo, &hi))
    return d != var_index ||
           (add_boundary(divs, n, cap, lo) && add_boundary(divs, n, cap, hi));
  ts_expr_kind k = ts_expr_kind_of(e);
  if (k == TS_EXPR_FLOORDIV || k == TS_EXPR_FLOORMOD) return false;
  int n_ops = ts_expr_n_operands(e);
  for (int i = 0; i < n_ops; i++)
    if (!collect_divisors(ts_expr_operand(e, i), ins, n_in, var_index, divs, n,
                          cap))
      return false;
  return true;
}

/* The digits of input d of extent `extent` cut at divisors divs (each must
 * divide the next; the last need not divide the extent: the box then
 * covers a little more than the domain, which keeps the proof sound). */
static bool add_digits(digit_sys *ds, int d, int64_t extent,
                       const int64_t *divs, int n_divs) {
  int64_t below = 1;
  for (int i = 0; i <= n_divs; i++) {
    int64_t top = i < n_divs ? divs[i] : 0;
    if (i < n_divs && top % below) return false;
    if (ds->n >= MAX_DIGITS) return false;
    ds->var[ds->n] = d;
    ds->radix[ds->n] = below;
    ds->range[ds->n] = i < n_divs ? top / below : (extent + below - 1) / below;
    ds->n++;
    if (i < n_divs) below = top;
  }
  return true;
}

static bool lin_of(const ts_expr *e, ts_expr *const *ins, int n_in,
                   const digit_sys *ds, lin_form *out);

/* The digits of input var (index d) from place value `from` (inclusive)
 * up to `to` (exclusive, 0: no limit), divided by `div`. */
static void var_digits(const digit_sys *ds, int d, int64_t from, int64_t to,
                       int64_t div, lin_form *out) {
  for (int t = 0; t < ds->n; t++)
    if (ds->var[t] == d && ds->radix[t] >= from && (!to || ds->radix[t] < to))
      out->w[t] += ds->radix[t] / div;
}

static bool lin_of(const ts_expr *e, ts_expr *const *ins, int n_in,
                   const digit_sys *ds, lin_form *out) {
  memset(out, 0, sizeof *out);
  int64_t v;
  if (ts_expr_is_const_int(e, &v)) {
    out->c = v;
    return true;
  }
  ts_expr_kind k = ts_expr_kind_of(e);
  int d;
  int64_t lo, hi;
  if (slice_of(e, ins, n_in, &d, &lo, &hi)) {
    var_digits(ds, d, lo, hi, lo, out);
    return true;
  }
  if (k != TS_EXPR_ADD && k != TS_EXPR_SUB && k != TS_EXPR_MUL) return false;
  lin_form a, b;
  if (!lin_of(ts_expr_operand(e, 0), ins, n_in, ds, &a) ||
      !lin_of(ts_expr_operand(e, 1), ins, n_in, ds, &b))
    return false;
  if (k == TS_EXPR_MUL) {
    bool a_const = true, b_const = true;
    for (int t = 0; t < ds->n; t++) {
      a_const &= a.w[t] == 0;
      b_const &= b.w[t] == 0;
    }
    if (!a_const && !b_const) return false;
    const lin_form *f = a_const ? &b : &a;
    __int128 m = a_const ? a.c : b.c;
    if (m > ((__int128)1 << 62) || m < -((__int128)1 << 62)) return false;
    for (int t = 0; t < ds->n; t++) out->w[t] = f->w[t] * m;
    out->c = f->c * m;
  } else {
    int sign = k == TS_EXPR_ADD ? 1 : -1;
    for (int t = 0; t < ds->n; t++) out->w[t] = a.w[t] + sign * b.w[t];
    out->c = a.c + sign * b.c;
  }
  for (int t = 0; t < ds->n; t++)
    if (out->w[t] > ((__int128)1 << 100) || out->w[t] < -((__int128)1 << 100))
      return false;
  return true;
}

/* true when the map ins -> outs over buf's shape is proven injective, its
 * outputs lying in [0, shape[k]) (already bounded by the caller). */
static bool layout_proven_injective(const ts_buffer *buf, ts_expr *const *ins,
                                    int nd, ts_expr *const *outs, int n_out,
                                    const int64_t *shape) {
  digit_sys ds = {0};
  for (int d = 0; d < nd; d++) {
    int64_t divs[MAX_DIGITS];
    int n_divs = 0;
    for (int k = 0; k < n_out; k++)
      if (!collect_divisors(outs[k], ins, nd, d, divs, &n_divs, MAX_DIGITS - 1))
        return false;
    if (!add_digits(&ds, d, ts_buffer_dim(buf, d), divs, n_divs)) return false;
  }
  lin_form flat = {{0}, 0};
  __int128 stride = 1;
  for (int k = n_out - 1; k >= 0; k--) {
    lin_form f;
    if (!lin_of(outs[k], ins, nd, &ds, &f)) return false;
    for (int t = 0; t < ds.n; t++) flat.w[t] += f.w[t] * stride;
    stride *= shape[k];
  }
  /* digits of range 1 carry nothing; sort the rest by |w| */
  __int128 w[MAX_DIGITS];
  int64_t r[MAX_DIGITS];
  int m = 0;
  for (int t = 0; t < ds.n; t++) {
    if (ds.range[t] <= 1) continue;
    __int128 a = flat.w[t] < 0 ? -flat.w[t] : flat.w[t];
    int i = m++;
    while (i > 0 && w[i - 1] > a) {
      w[i] = w[i - 1];
      r[i] = r[i - 1];
      i--;
    }
    w[i] = a;
    r[i] = ds.range[t];
  }
  __int128 reach = 0; /* the largest difference the smaller digits make */
  for (int i = 0; i < m; i++) {
    if (w[i] <= reach) return false;
    reach += w[i] * (r[i] - 1);
  }
  return true;
}

/* Checks injectivity by evaluating the map on every element of buf:
 * TS_OK, or TS_ESCHEDULE naming the buffer (too large to check, or two
 * elements sent to one place). */
static int enumerate_injective(ts_sched *s, const ts_buffer *buf,
                               const char *bufname, ts_expr *const *ins, int nd,
                               ts_expr *const *outs, int n_out,
                               const int64_t *shape, int64_t total) {
  int rc = TS_OK;
  int64_t n_elems = ts_buffer_elems(buf);
  if (n_elems > MAX_CHECK_ELEMS || total > 8 * MAX_CHECK_ELEMS)
    return FAIL(s, TS_ESCHEDULE,
                "transform_layout: buffer '%s' is too large to check the index "
                "map (at most %lld elements)",
                bufname, (long long)MAX_CHECK_ELEMS);
  uint8_t *seen = ts_calloc((size_t)(total / 8 + 1), 1);
  if (!seen) return FAIL(s, TS_ENOMEM, "transform_layout: out of memory");
  env en = {0};
  int64_t pt[TS_MAX_DIMS] = {0};
  for (int64_t e = 0; e < n_elems && !rc; e++) {
    int64_t rem = e;
    for (int d = nd - 1; d >= 0; d--) {
      pt[d] = rem % ts_buffer_dim(buf, d);
      rem /= ts_buffer_dim(buf, d);
    }
    en.n = 0;
    for (int d = 0; d < nd; d++) env_set(&en, ins[d], pt[d]);
    int64_t flat = 0;
    for (int k = 0; k < n_out && !rc; k++) {
      int64_t v;
      if (!eval_int(outs[k], &en, &v) || v < 0 || v >= shape[k])
        rc = FAIL(s, TS_EINTERNAL,
                  "transform_layout: cannot evaluate the "
                  "index map");
      else
        flat = flat * shape[k] + v;
    }
    if (rc) break;
    if (seen[flat / 8] & (1u << (flat % 8)))
      rc = FAIL(s, TS_ESCHEDULE,
                "transform_layout: the index map sends two elements of '%s' "
                "to one place (it is not injective)",
                bufname);
    seen[flat / 8] |= (uint8_t)(1u << (flat % 8));
  }
  free(seen);
  return rc;
}

int apply_transform_layout(ts_sched *s, inst *in, rv_list *out) {
  (void)out;
  ts_stmt *r;
  const char *bufname, *text;
  int rc = check_arity(s, in, 1, 1, 2);
  if (rc || (rc = in_block(s, in, 0, &r)) ||
      (rc = attr_str(s, in, 0, &bufname)) || (rc = attr_str(s, in, 1, &text)))
    return rc;
  ts_block *b = ts_realize_block(r);
  ts_buffer *buf;
  if ((rc = block_buffer(s, b, bufname, true, true, &buf)))
    return fail_prefix(s, rc, "transform_layout");
  if (is_param(s->func, buf))
    return FAIL(s, TS_ESCHEDULE,
                "transform_layout: buffer '%s' is a parameter of the function "
                "(cache_read or cache_write it first)",
                bufname);
  ts_stmt *site = alloc_site(s->func, buf);
  if (!site)
    return FAIL(s, TS_ESCHEDULE,
                "transform_layout: buffer '%s' is not allocated by a block",
                bufname);
  ts_arena *a = ts_func_arena(s->func);
  int nd = ts_buffer_ndim(buf), n_out = 0;
  ts_expr *ins[TS_MAX_DIMS], *outs[TS_MAX_DIMS];
  if ((rc = parse_index_map(s, a, text, nd, ins, outs, &n_out))) return rc;
  /* the image: bounds of each output over the buffer's shape */
  relax_map *m = relax_create();
  for (int d = 0; d < nd; d++)
    relax_set(m, ins[d], ts_index(a, 0),
              ts_index(a, ts_buffer_dim(buf, d) - 1));
  int64_t shape[TS_MAX_DIMS], total = 1;
  for (int k = 0; k < n_out && !rc; k++) {
    ts_expr *lo, *hi;
    int64_t l, h;
    if (!bound_expr(a, outs[k], m, NULL, &lo, &hi) ||
        !ts_expr_is_const_int(lo, &l) || !ts_expr_is_const_int(hi, &h))
      rc = FAIL(s, TS_ESCHEDULE,
                "transform_layout: cannot bound output %d of the index map", k);
    else if (l < 0)
      rc = FAIL(s, TS_ESCHEDULE,
                "transform_layout: output %d of the index map goes below 0", k);
    else if (__builtin_mul_overflow(total, h + 1, &total) ||
             total > ((int64_t)1 << 40))
      rc = FAIL(s, TS_ESCHEDULE,
                "transform_layout: the new layout is too "
                "large");
    else
      shape[k] = h + 1;
  }
  relax_destroy(m);
  if (rc) return rc;
  /* injective: proven from the map's form, else every element enumerated */
  if (!layout_proven_injective(buf, ins, nd, outs, n_out, shape) &&
      (rc = enumerate_injective(s, buf, bufname, ins, nd, outs, n_out, shape,
                                total)))
    return rc;
  shape_ctx sc = {buf, false};
  ts_visitor v = {NULL, NULL, shape_visit, &sc};
  ts_stmt_walk(ts_func_body(s->func), &v);
  if (sc.bad)
    return FAIL(s, TS_ESCHEDULE,
                "transform_layout: buffer '%s' has a vector or partial access",
                bufname);
  /* mutate */
  ts_buffer *nb = ts_buffer_new(a, bufname, ts_buffer_dtype(buf), shape, n_out);
  if (!nb) return fail_oom(s, "transform_layout");
  /* (an access that cannot be rewritten for lack of memory stays as it
   * was: the failure is counted and sched_run reports it) */
  ts_buffer_set_scope(a, nb, ts_buffer_scope(buf));
  ts_buffer_set_align(nb, ts_buffer_align(buf));
  layout_ctx c = {buf, nb, ins, outs, nd, n_out};
  rewriter rw = {layout_expr, layout_store, true, &c};
  rewrite_stmt(a, ts_func_body(s->func), &rw);
  ts_block_replace_alloc(ts_realize_block(site), buf, nb);
  sched_refresh(s);
  return TS_OK;
}
