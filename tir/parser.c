/*
 * parser.c — reads the text form back into a function: a hand-written lexer
 * (parse_lex.c) and a recursive-descent parser (grammar rule above each parse
 * function; the whole grammar is in docs/ir.md), expressions in parse_expr.c
 * and the rest here. Nodes are built with the non-folding constructors so the
 * text is reproduced exactly, and types are checked while parsing. Every error
 * is TS_EPARSE with a 1-based line:column, in the error record and in the
 * message ("FILE:LINE:COL: expected ..."). Hostile input is bounded: nesting
 * depth, identifier and string length, integer range, input size, name counts.
 * On failure nothing is handed out.
 */
#include "parse_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- buffers, annotations, ranges ---- */

/* buftype = DTYPE "[" [INT ("," INT)*] "]"
 *           ("strides" "[" INT ("," INT)* "]" | "scope" STRING | "align" INT)*
 */
static ts_buffer *parse_buffer_type(tp_parser *p, const char *name) {
  ts_dtype t;
  char buf[64];
  tp_token *start = tp_peek(p);
  if (!tp_parse_dtype(p, &t) || !tp_expect(p, "[", "to start the shape"))
    return NULL;
  int64_t shape[TS_MAX_DIMS];
  int ndim = 0;
  if (!tp_accept(p, "]")) {
    for (;;) {
      tp_token *d = tp_peek(p);
      uint64_t v;
      if (d->kind != TK_INT)
        return FAIL_NULL(p, d,
                         "expected a positive integer dimension but found %s",
                         tp_describe(d, buf));
      if (ndim == TS_MAX_DIMS)
        return FAIL_NULL(p, d, "buffer '%s' has more than %d dimensions", name,
                         TS_MAX_DIMS);
      if (!tp_int_value(d, INT64_MAX, &v) || v == 0)
        return FAIL_NULL(p, d,
                         "dimension of '%s' must be a positive integer that "
                         "fits int64",
                         name);
      tp_next(p);
      shape[ndim++] = (int64_t)v;
      if (tp_accept(p, ",")) continue;
      if (!tp_expect_list_end(p, "]", "after the shape")) return NULL;
      break;
    }
  }
  ts_buffer *b = ts_buffer_new(p->a, name, t, shape, ndim);
  bool seen_strides = false, seen_scope = false, seen_align = false;
  for (;;) {
    tp_token *o = tp_peek(p);
    if (tp_is(o, "strides")) {
      if (seen_strides)
        return FAIL_NULL(p, o, "strides given twice for '%s'", name);
      seen_strides = true;
      tp_next(p);
      int64_t strides[TS_MAX_DIMS];
      int n = 0;
      if (!tp_expect(p, "[", "after 'strides'")) return NULL;
      if (!tp_accept(p, "]")) {
        for (;;) {
          tp_token *d = tp_peek(p);
          uint64_t v;
          if (d->kind != TK_INT)
            return FAIL_NULL(p, d,
                             "expected a non-negative integer stride but "
                             "found %s",
                             tp_describe(d, buf));
          if (n == ndim)
            return FAIL_NULL(p, d,
                             "more strides than the %d dimension%s of '%s'",
                             ndim, ndim == 1 ? "" : "s", name);
          if (!tp_int_value(d, INT64_MAX, &v))
            return FAIL_NULL(p, d, "stride does not fit int64");
          tp_next(p);
          strides[n++] = (int64_t)v;
          if (tp_accept(p, ",")) continue;
          if (!tp_expect_list_end(p, "]", "after the strides")) return NULL;
          break;
        }
      }
      if (n != ndim)
        return FAIL_NULL(p, o, "'%s' has %d dimension%s but %d stride%s", name,
                         ndim, ndim == 1 ? "" : "s", n, n == 1 ? "" : "s");
      ts_buffer_set_strides(p->a, b, strides);
    } else if (tp_is(o, "scope")) {
      if (seen_scope)
        return FAIL_NULL(p, o, "scope given twice for '%s'", name);
      seen_scope = true;
      tp_next(p);
      tp_token *s = tp_peek(p);
      if (s->kind != TK_STRING)
        return FAIL_NULL(p, s,
                         "expected a quoted scope after 'scope' but found %s",
                         tp_describe(s, buf));
      tp_next(p);
      const char *scope = tp_string_value(p, s);
      if (!scope) return NULL;
      if (!scope[0]) return FAIL_NULL(p, s, "scope must not be empty");
      ts_buffer_set_scope(p->a, b, scope);
    } else if (tp_is(o, "align")) {
      if (seen_align)
        return FAIL_NULL(p, o, "align given twice for '%s'", name);
      seen_align = true;
      tp_next(p);
      tp_token *s = tp_peek(p);
      uint64_t v;
      if (s->kind != TK_INT || !tp_int_value(s, MAX_ALIGN, &v) || v == 0 ||
          (v & (v - 1)) != 0)
        return FAIL_NULL(p, s, "align must be a power of two in 1..%d",
                         MAX_ALIGN);
      tp_next(p);
      ts_buffer_set_align(b, (int)v);
    } else {
      break;
    }
  }
  /* Bound the storage so later byte counts cannot overflow. */
  int64_t elems = 1;
  for (int i = 0; i < ndim; i++) {
    int64_t span = b->has_strides ? (shape[i] - 1) : shape[i];
    if (b->has_strides) {
      if (__builtin_mul_overflow(span, b->strides[i], &span) ||
          __builtin_add_overflow(elems, span, &elems))
        elems = INT64_MAX;
    } else if (__builtin_mul_overflow(elems, span, &elems)) {
      elems = INT64_MAX;
    }
  }
  int64_t bytes;
  if (__builtin_mul_overflow(elems, (int64_t)ts_dtype_elem_bytes(t) * t.lanes,
                             &bytes) ||
      bytes > MAX_BUFFER_BYTES)
    return FAIL_NULL(
        p, start, "buffer '%s' is larger than the limit of 2^40 bytes", name);
  return b;
}

/* annotations = "{" [STRING ":" value ("," STRING ":" value)*] "}"
 * value = STRING | ["-"] (INT | FLOAT | "inf") | "nan" */
static bool parse_annotations(tp_parser *p, ann_list *out) {
  char buf[64];
  if (!tp_expect(p, "{", "to start the annotations")) return false;
  if (tp_accept(p, "}")) return true;
  for (;;) {
    tp_token *k = tp_peek(p);
    if (k->kind != TK_STRING)
      return FAIL(p, k, "expected a quoted annotation key but found %s",
                  tp_describe(k, buf));
    tp_next(p);
    const char *key = tp_string_value(p, k);
    if (!key) return false;
    if (ann_list_find(out, key))
      return FAIL(p, k, "duplicate annotation key \"%s\"", key);
    if (out->n == MAX_LIST)
      return FAIL(p, k, "more than %d annotations", MAX_LIST);
    if (!tp_expect(p, ":", "after the annotation key")) return false;
    bool neg = tp_accept(p, "-");
    tp_token *v = tp_peek(p);
    ts_annotation ann = {.key = key};
    if (v->kind == TK_STRING && !neg) {
      ann.kind = TS_ANN_STRING;
      ann.s = tp_string_value(p, v);
      if (!ann.s) return false;
    } else if (v->kind == TK_INT) {
      uint64_t m;
      if (!tp_int_value(v, (uint64_t)INT64_MAX + (neg ? 1 : 0), &m))
        return FAIL(p, v, "annotation value does not fit int64");
      ann.kind = TS_ANN_INT;
      ann.i = (int64_t)(neg ? 0 - m : m);
    } else if (v->kind == TK_FLOAT || tp_is(v, "inf") || tp_is(v, "nan")) {
      char text[416];
      snprintf(text, sizeof text, "%s%.*s", neg ? "-" : "", v->len, v->loc);
      errno = 0;
      double d = strtod(text, NULL);
      if (tp_is(v, "nan")) d = NAN; /* one NaN: the printer writes "nan" */
      if (errno == ERANGE && isinf(d))
        return FAIL(p, v, "annotation value %s is out of range", text);
      ann.kind = TS_ANN_FLOAT;
      ann.f = d;
    } else {
      return FAIL(p, v,
                  "expected an annotation value (number or string) but "
                  "found %s",
                  tp_describe(v, buf));
    }
    tp_next(p);
    ann_list_set(p->a, out, ann);
    if (tp_accept(p, ",")) continue;
    return tp_expect_list_end(p, "}", "after the annotations");
  }
}

/* range = expr ["+:" expr]  (one expr: min is the zero of its type) */
static bool parse_range(tp_parser *p, const char *what, ts_range *out) {
  char b1[32], b2[32];
  tp_token *t = tp_peek(p);
  ts_expr *x = tp_parse_expr(p);
  if (!x) return false;
  ts_expr *min, *extent;
  if (tp_accept(p, "+:")) {
    extent = tp_parse_expr(p);
    if (!extent) return false;
    min = x;
  } else {
    extent = x;
    min = NULL;
  }
  if (!tp_is_int_scalar(extent->dtype))
    return FAIL(p, t, "extent of %s must be a scalar integer, not %s", what,
                tp_dtype_name(extent->dtype, b1));
  if (!min) min = ts_int(p->a, extent->dtype, 0);
  if (!ts_dtype_eq(min->dtype, extent->dtype))
    return FAIL(p, t, "min and extent of %s have different types: %s and %s",
                what, tp_dtype_name(min->dtype, b1),
                tp_dtype_name(extent->dtype, b2));
  int64_t ext;
  if (ts_expr_is_const_int(extent, &ext) && ext < 0)
    return FAIL(p, t, "extent of %s is negative", what);
  out->min = min;
  out->extent = extent;
  return true;
}

/* ---- statements ---- */

static ts_stmt *parse_stmt(tp_parser *p);

/* body = "{" stmt* "}"; one statement is itself, several a seq. */
static ts_stmt *parse_body(tp_parser *p, const char *what) {
  char ctx[96];
  snprintf(ctx, sizeof ctx, "to start the body of %s", what);
  if (!tp_expect(p, "{", ctx)) return NULL;
  tp_vec items = {0};
  while (!tp_is(tp_peek(p), "}")) {
    if (tp_peek(p)->kind == TK_EOF) {
      snprintf(ctx, sizeof ctx, "to close the body of %s", what);
      tp_expect(p, "}", ctx);
      return NULL;
    }
    ts_stmt *s = parse_stmt(p);
    if (!s) return NULL;
    tp_vec_push(p, &items, s);
  }
  tp_next(p);
  if (items.n == 1) return items.items[0];
  return ts_seq(p->a, (ts_stmt **)items.items, items.n);
}

/* for = "for" IDENT "in" "range" "(" range ")"
 *       ["serial" | "parallel" | "vectorized" | "unrolled"
 *        | "thread" "(" STRING ")"] ["annotate" annotations] body */
static ts_stmt *parse_for(tp_parser *p) {
  char buf[64];
  tp_token *nt;
  if (!tp_expect_ident(p, "a loop variable after 'for'", &nt)) return NULL;
  char *name = tp_new_name(p, nt, "loop variable");
  ts_range r;
  if (!name || !tp_expect(p, "in", "after the loop variable") ||
      !tp_expect(p, "range", "after 'in'") ||
      !tp_expect(p, "(", "after 'range'") || !parse_range(p, "the loop", &r) ||
      !tp_expect(p, ")", "to close the loop range"))
    return NULL;
  ts_for_kind kind = TS_FOR_SERIAL;
  const char *tag = NULL;
  if (tp_accept(p, "serial"))
    kind = TS_FOR_SERIAL;
  else if (tp_accept(p, "parallel"))
    kind = TS_FOR_PARALLEL;
  else if (tp_accept(p, "vectorized"))
    kind = TS_FOR_VECTORIZED;
  else if (tp_accept(p, "unrolled"))
    kind = TS_FOR_UNROLLED;
  else if (tp_accept(p, "thread")) {
    kind = TS_FOR_THREAD;
    if (!tp_expect(p, "(", "after 'thread'")) return NULL;
    tp_token *s = tp_peek(p);
    if (s->kind != TK_STRING)
      return FAIL_NULL(p, s, "expected a quoted thread tag but found %s",
                       tp_describe(s, buf));
    tp_next(p);
    tag = tp_string_value(p, s);
    if (!tag) return NULL;
    if (!tag[0]) return FAIL_NULL(p, s, "thread tag must not be empty");
    if (!tp_expect(p, ")", "after the thread tag")) return NULL;
  }
  ann_list anns = {0};
  if (tp_accept(p, "annotate") && !parse_annotations(p, &anns)) return NULL;
  int saved = tp_open_scope(p);
  ts_expr *var = ts_var(p->a, name, r.extent->dtype);
  ts_stmt *body = NULL;
  if (tp_declare(p, nt, name, var, NULL)) body = parse_body(p, "the loop");
  tp_close_scope(p, saved);
  if (!body) return NULL;
  ts_stmt *s = ts_for(p->a, var, r.min, r.extent, kind, tag, body);
  s->u.loop.anns = anns;
  return s;
}

/* Skips a parenthesized group starting at "(" (for deferred regions). */
static bool skip_group(tp_parser *p, const char *what) {
  tp_token *start = tp_peek(p);
  if (!tp_expect(p, "(", what)) return false;
  int level = 1;
  while (level > 0) {
    tp_token *t = tp_next(p);
    if (t->kind == TK_EOF)
      return FAIL(p, start, "unterminated '(': no matching ')'");
    if (tp_is(t, "("))
      level++;
    else if (tp_is(t, ")"))
      level--;
  }
  return true;
}

/* regions = "(" [region ("," region)*] ")"
 * region = IDENT "[" [expr ["+:" expr] ("," expr ["+:" expr])*] "]" */
static bool parse_regions(tp_parser *p, tp_vec *out) {
  char b1[32];
  if (!tp_expect(p, "(", "to start the regions")) return false;
  if (tp_accept(p, ")")) return true;
  for (;;) {
    tp_token *nt;
    if (!tp_expect_ident(p, "a buffer name in the region list", &nt))
      return false;
    if (out->n == MAX_LIST)
      return FAIL(p, nt, "more than %d regions", MAX_LIST);
    ts_buffer *b = tp_find_buffer(p, nt);
    if (!b || !tp_expect(p, "[", "after the buffer name")) return false;
    ts_region *r = ts_arena_alloc(p->a, sizeof *r);
    if (!r ||
        !(r->ranges = ts_arena_alloc(p->a, sizeof(ts_range) * TS_MAX_DIMS))) {
      p->failed = true; /* out of memory (counted) */
      return false;
    }
    r->buffer = b;
    if (!tp_accept(p, "]")) {
      for (;;) {
        tp_token *t = tp_peek(p);
        if (r->ndim == b->ndim)
          return FAIL(p, t,
                      "too many ranges for buffer '%s' of %d "
                      "dimension%s",
                      b->name, b->ndim, b->ndim == 1 ? "" : "s");
        ts_expr *min = tp_parse_expr(p), *extent;
        if (!min) return false;
        if (tp_accept(p, "+:")) {
          extent = tp_parse_expr(p);
          if (!extent) return false;
        } else {
          extent = ts_index(p->a, 1);
        }
        if (!tp_is_int_scalar(min->dtype) || !tp_is_int_scalar(extent->dtype))
          return FAIL(p, t,
                      "region bounds of '%s' must be scalar integers, "
                      "not %s",
                      b->name,
                      tp_dtype_name(tp_is_int_scalar(min->dtype) ? extent->dtype
                                                                 : min->dtype,
                                    b1));
        r->ranges[r->ndim++] = (ts_range){min, extent};
        if (tp_accept(p, ",")) continue;
        if (!tp_expect_list_end(p, "]", "after the region")) return false;
        break;
      }
    }
    if (r->ndim != b->ndim)
      return FAIL(p, nt, "buffer '%s' has %d dimension%s but the region has %d",
                  b->name, b->ndim, b->ndim == 1 ? "" : "s", r->ndim);
    tp_vec_push(p, out, r);
    if (tp_accept(p, ",")) continue;
    return tp_expect_list_end(p, ")", "after the regions");
  }
}

static ts_region *region_array(tp_parser *p, const tp_vec *v) {
  ts_region *r = ts_arena_alloc(p->a, sizeof *r * (size_t)(v->n ? v->n : 1));
  if (!r) {
    p->failed = true; /* out of memory (counted) */
    return NULL;
  }
  for (int i = 0; i < v->n; i++) r[i] = *(ts_region *)v->items[i];
  return r;
}

/* Parses deferred regions at token index `at` (after allocs are visible). */
static bool parse_regions_at(tp_parser *p, int at, tp_vec *out) {
  int resume = p->pos;
  p->pos = at;
  bool ok = parse_regions(p, out);
  p->pos = resume;
  return ok;
}

/* A name for a block or function: IDENT (any, keywords too) or STRING. */
static const char *parse_label(tp_parser *p, const char *what) {
  tp_token *t = tp_peek(p);
  char buf[64];
  if (t->kind == TK_IDENT) {
    tp_next(p);
    return tp_tok_str(p, t);
  }
  if (t->kind == TK_STRING) {
    tp_next(p);
    return tp_string_value(p, t);
  }
  return FAIL_NULL(p, t, "expected a %s name but found %s", what,
                   tp_describe(t, buf));
}

typedef struct iter_decl {
  tp_token *name_tok;
  char *name;
  ts_iter_kind kind;
  ts_range dom;
  ts_expr *value;
} iter_decl;

/* iter = IDENT ":" ("spatial" | "reduce" | "opaque") "(" range ")" "=" expr */
static bool parse_iter(tp_parser *p, iter_decl *d) {
  char b1[32], b2[32], buf[64];
  if (!tp_expect_ident(p, "an iter var name", &d->name_tok)) return false;
  /* Names are checked again when the block scope opens. */
  d->name = tp_tok_str(p, d->name_tok);
  if (!d->name) return false;
  if (ts_text_name_is_reserved(d->name))
    return FAIL(p, d->name_tok,
                "'%s' is a reserved word and cannot name an iter var", d->name);
  if (!tp_expect(p, ":", "after the iter var name")) return false;
  tp_token *k = tp_peek(p);
  if (tp_accept(p, "spatial"))
    d->kind = TS_ITER_SPATIAL;
  else if (tp_accept(p, "reduce"))
    d->kind = TS_ITER_REDUCE;
  else if (tp_accept(p, "opaque"))
    d->kind = TS_ITER_OPAQUE;
  else
    return FAIL(p, k, "expected 'spatial', 'reduce' or 'opaque' but found %s",
                tp_describe(k, buf));
  tp_token *vt;
  if (!tp_expect(p, "(", "after the iter kind") ||
      !parse_range(p, "the iter var domain", &d->dom) ||
      !tp_expect(p, ")", "to close the iter var domain") ||
      !tp_expect(p, "=", "after the iter var domain"))
    return false;
  vt = tp_peek(p);
  d->value = tp_parse_expr(p);
  if (!d->value) return false;
  if (!ts_dtype_eq(d->value->dtype, d->dom.extent->dtype))
    return FAIL(p, vt,
                "value of iter var '%s' has type %s but its domain is %s",
                d->name, tp_dtype_name(d->value->dtype, b1),
                tp_dtype_name(d->dom.extent->dtype, b2));
  return true;
}

/* block = "block" label "(" [iter ("," iter)*] ")" ["where" expr] "{"
 *         ("reads" regions | "writes" regions | "alloc" IDENT ":" buftype
 *          | "annotate" annotations | "init" body)* stmt* "}"
 * Omitted reads/writes are inferred from the body. */
static ts_stmt *parse_block(tp_parser *p) {
  char b1[32];
  const char *bname = parse_label(p, "block");
  if (!bname || !tp_expect(p, "(", "after the block name")) return NULL;
  tp_vec iters = {0};
  if (!tp_accept(p, ")")) {
    for (;;) {
      if (iters.n == MAX_LIST)
        return FAIL_NULL(p, tp_peek(p), "more than %d iter vars", MAX_LIST);
      iter_decl *d = ts_arena_alloc(p->a, sizeof *d);
      if (!d) {
        p->failed = true; /* out of memory (counted) */
        return NULL;
      }
      if (!parse_iter(p, d)) return NULL;
      tp_vec_push(p, &iters, d);
      if (tp_accept(p, ",")) continue;
      if (!tp_expect_list_end(p, ")", "after the iter vars")) return NULL;
      break;
    }
  }
  ts_expr *pred = NULL;
  tp_token *wt = tp_peek(p);
  if (tp_accept(p, "where")) {
    pred = tp_parse_expr(p);
    if (!pred) return NULL;
    if (!ts_dtype_eq(pred->dtype, TS_BOOL))
      return FAIL_NULL(p, wt, "block predicate must be bool, not %s",
                       tp_dtype_name(pred->dtype, b1));
  }
  tp_token *open = tp_peek(p);
  if (!tp_expect(p, "{", "to start the block")) return NULL;
  ts_block *blk = ts_block_new(p->a, bname);
  int saved = tp_open_scope(p);
  ts_stmt *result = NULL;
  ts_expr **values =
      ts_arena_alloc(p->a, sizeof *values * (size_t)(iters.n ? iters.n : 1));
  if (!blk || !values) {
    p->failed = true; /* out of memory (counted) */
    goto out;
  }
  for (int i = 0; i < iters.n; i++) {
    iter_decl *d = iters.items[i];
    if (!tp_new_name(p, d->name_tok, "iter var")) goto out;
    ts_expr *var = ts_var(p->a, d->name, d->dom.extent->dtype);
    if (!tp_declare(p, d->name_tok, d->name, var, NULL)) goto out;
    ts_block_add_iter_var(p->a, blk, var, d->dom, d->kind);
    values[i] = d->value;
  }
  int reads_at = -1, writes_at = -1;
  bool seen_ann = false;
  for (;;) {
    tp_token *t = tp_peek(p);
    if (tp_is(t, "reads") || tp_is(t, "writes")) {
      int *at = tp_is(t, "reads") ? &reads_at : &writes_at;
      if (*at >= 0) {
        FAIL(p, t, "%.*s(...) given twice in block '%s'", t->len, t->loc,
             bname);
        goto out;
      }
      tp_next(p);
      *at = p->pos;
      if (!skip_group(p,
                      tp_is(t, "reads") ? "after 'reads'" : "after 'writes'"))
        goto out;
    } else if (tp_accept(p, "alloc")) {
      tp_token *nt;
      if (blk->n_allocs == MAX_LIST) {
        FAIL(p, t, "more than %d allocations in block '%s'", MAX_LIST, bname);
        goto out;
      }
      if (!tp_expect_ident(p, "a buffer name after 'alloc'", &nt)) goto out;
      char *name = tp_new_name(p, nt, "buffer");
      if (!name || !tp_expect(p, ":", "after the buffer name")) goto out;
      ts_buffer *b = parse_buffer_type(p, name);
      if (!b || !tp_declare(p, nt, name, NULL, b)) goto out;
      ts_block_add_alloc(p->a, blk, b);
    } else if (tp_is(t, "annotate")) {
      if (seen_ann) {
        FAIL(p, t, "annotate given twice in block '%s'", bname);
        goto out;
      }
      seen_ann = true;
      tp_next(p);
      if (!parse_annotations(p, &blk->anns)) goto out;
    } else if (tp_is(t, "init")) {
      if (blk->init) {
        FAIL(p, t, "init given twice in block '%s'", bname);
        goto out;
      }
      tp_next(p);
      if (!tp_enter(p, t)) goto out;
      blk->init = parse_body(p, "init");
      tp_leave(p);
      if (!blk->init) goto out;
    } else {
      break;
    }
  }
  tp_vec reads = {0}, writes = {0};
  if (reads_at >= 0 && !parse_regions_at(p, reads_at, &reads)) goto out;
  if (writes_at >= 0 && !parse_regions_at(p, writes_at, &writes)) goto out;
  tp_vec items = {0};
  while (!tp_is(tp_peek(p), "}")) {
    if (tp_peek(p)->kind == TK_EOF) {
      FAIL(p, tp_peek(p),
           "expected '}' to close block '%s' (opened at %d:%d) but "
           "found end of input",
           bname, open->line, open->col);
      goto out;
    }
    ts_stmt *s = parse_stmt(p);
    if (!s) goto out;
    tp_vec_push(p, &items, s);
  }
  tp_next(p);
  blk->body = items.n == 1 ? items.items[0]
                           : ts_seq(p->a, (ts_stmt **)items.items, items.n);
  if (reads_at < 0 || writes_at < 0) {
    ts_block_infer_regions(p->a, blk);
    if (reads_at >= 0)
      ts_block_set_regions(p->a, blk, region_array(p, &reads), reads.n,
                           blk->writes, blk->n_writes);
    if (writes_at >= 0)
      ts_block_set_regions(p->a, blk, blk->reads, blk->n_reads,
                           region_array(p, &writes), writes.n);
  } else {
    ts_block_set_regions(p->a, blk, region_array(p, &reads), reads.n,
                         region_array(p, &writes), writes.n);
  }
  result = ts_block_realize(p->a, blk, values, iters.n, pred);
out:
  tp_close_scope(p, saved);
  return result;
}

/* store = IDENT "[" [expr ("," expr)*] "]" "=" expr */
static ts_stmt *parse_store(tp_parser *p) {
  char b1[32], b2[32];
  tp_token *nt = tp_next(p);
  tp_sym *s = tp_lookup(p, nt);
  if (!s) return FAIL_NULL(p, nt, "undefined buffer '%.*s'", nt->len, nt->loc);
  if (!s->buffer)
    return FAIL_NULL(p, nt,
                     "cannot assign to variable '%.*s'; only buffer "
                     "elements can be stored to",
                     nt->len, nt->loc);
  ts_buffer *b = s->buffer;
  tp_vec idx = {0};
  if (!tp_parse_indices(p, nt, b, &idx) ||
      !tp_expect(p, "=", "after the stored element"))
    return NULL;
  tp_token *vt = tp_peek(p);
  ts_expr *value = tp_parse_expr(p);
  if (!value) return NULL;
  int lanes = 1;
  for (int i = 0; i < idx.n; i++) {
    ts_expr *e = idx.items[i];
    if (e->dtype.lanes > lanes) lanes = e->dtype.lanes;
  }
  ts_dtype want = ts_dtype_with_lanes(b->dtype, lanes);
  if (!ts_dtype_eq(value->dtype, want))
    return FAIL_NULL(p, vt,
                     "value stored to '%s' has type %s but the element type "
                     "is %s",
                     b->name, tp_dtype_name(value->dtype, b1),
                     tp_dtype_name(want, b2));
  return ts_store(p->a, b, (ts_expr **)idx.items, idx.n, value);
}

/* stmt = for | block | store | "if" expr body ["else" body]
 *      | "evaluate" expr | "let" IDENT "=" expr body
 *      | "allocate" IDENT ":" buftype body */
static ts_stmt *parse_stmt(tp_parser *p) {
  char b1[32], buf[64];
  tp_token *t = tp_peek(p);
  if (!tp_enter(p, t)) return NULL;
  ts_stmt *r = NULL;
  if (t->kind != TK_IDENT) {
    FAIL(p, t, "expected a statement but found %s", tp_describe(t, buf));
  } else if (tp_accept(p, "for")) {
    r = parse_for(p);
  } else if (tp_accept(p, "block")) {
    r = parse_block(p);
  } else if (tp_accept(p, "if")) {
    tp_token *ct = tp_peek(p);
    ts_expr *c = tp_parse_expr(p);
    if (c && !ts_dtype_eq(c->dtype, TS_BOOL)) {
      FAIL(p, ct, "condition of 'if' must be bool, not %s",
           tp_dtype_name(c->dtype, b1));
      c = NULL;
    }
    ts_stmt *then_s = c ? parse_body(p, "'if'") : NULL, *else_s = NULL;
    bool ok = then_s != NULL;
    if (ok && tp_accept(p, "else")) {
      else_s = parse_body(p, "'else'");
      ok = else_s != NULL;
    }
    if (ok) r = ts_if(p->a, c, then_s, else_s);
  } else if (tp_accept(p, "evaluate")) {
    ts_expr *e = tp_parse_expr(p);
    if (e) r = ts_evaluate(p->a, e);
  } else if (tp_accept(p, "let")) {
    tp_token *nt;
    char *name = NULL;
    ts_expr *value = NULL;
    if (tp_expect_ident(p, "a variable name after 'let'", &nt) &&
        (name = tp_new_name(p, nt, "variable")) &&
        tp_expect(p, "=", "after the let variable"))
      value = tp_parse_expr(p);
    if (value) {
      int saved = tp_open_scope(p);
      ts_expr *var = ts_var(p->a, name, value->dtype);
      ts_stmt *body =
          tp_declare(p, nt, name, var, NULL) ? parse_body(p, "'let'") : NULL;
      tp_close_scope(p, saved);
      if (body) r = ts_let_stmt(p->a, var, value, body);
    }
  } else if (tp_accept(p, "allocate")) {
    tp_token *nt;
    char *name = NULL;
    ts_buffer *b = NULL;
    if (tp_expect_ident(p, "a buffer name after 'allocate'", &nt) &&
        (name = tp_new_name(p, nt, "buffer")) &&
        tp_expect(p, ":", "after the buffer name"))
      b = parse_buffer_type(p, name);
    if (b) {
      int saved = tp_open_scope(p);
      ts_stmt *body =
          tp_declare(p, nt, name, NULL, b) ? parse_body(p, "'allocate'") : NULL;
      tp_close_scope(p, saved);
      if (body) r = ts_allocate(p->a, b, body);
    }
  } else if (tp_is(t, "reads") || tp_is(t, "writes") || tp_is(t, "alloc") ||
             tp_is(t, "annotate") || tp_is(t, "init")) {
    FAIL(p, t, "'%.*s' belongs at the start of a block, before its statements",
         t->len, t->loc);
  } else if (tp_is(t, "else")) {
    FAIL(p, t, "'else' without a matching 'if'");
  } else {
    char name[MAX_IDENT + 1];
    snprintf(name, sizeof name, "%.*s", t->len, t->loc);
    if (ts_text_name_is_reserved(name))
      FAIL(p, t, "expected a statement but found keyword '%s'", name);
    else
      r = parse_store(p);
  }
  tp_leave(p);
  return r;
}

/* func = "func" label "(" [IDENT ":" buftype ("," IDENT ":" buftype)*] ")"
 *        ["attrs" annotations] body EOF */
static bool parse_func(tp_parser *p) {
  char buf[64];
  if (!tp_expect(p, "func", "at the start of the text")) return false;
  const char *name = parse_label(p, "function");
  if (!name) return false;
  ts_func_set_name(p->f, name);
  if (!tp_expect(p, "(", "after the function name")) return false;
  if (!tp_accept(p, ")")) {
    for (;;) {
      tp_token *nt;
      if (p->f->n_params == MAX_LIST)
        return FAIL(p, tp_peek(p), "more than %d parameters", MAX_LIST);
      if (!tp_expect_ident(p, "a parameter name", &nt)) return false;
      char *pname = tp_new_name(p, nt, "buffer");
      if (!pname || !tp_expect(p, ":", "after the parameter name"))
        return false;
      ts_buffer *b = parse_buffer_type(p, pname);
      if (!b || !tp_declare(p, nt, pname, NULL, b)) return false;
      ts_func_add_param(p->f, b);
      if (tp_accept(p, ",")) continue;
      if (!tp_expect_list_end(p, ")", "after the parameters")) return false;
      break;
    }
  }
  if (tp_accept(p, "attrs") && !parse_annotations(p, &p->f->attrs))
    return false;
  ts_stmt *body = parse_body(p, "the function");
  if (!body) return false;
  ts_func_set_body(p->f, body);
  if (tp_peek(p)->kind != TK_EOF)
    return FAIL(p, tp_peek(p),
                "expected end of input after the function but "
                "found %s",
                tp_describe(tp_peek(p), buf));
  return true;
}

/* ---- entry points ---- */

int ts_func_parse(const char *text, size_t len, const char *filename,
                  ts_func **out, ts_error *err) {
  if (out) *out = NULL;
  tp_parser p;
  memset(&p, 0, sizeof p);
  p.file = filename ? filename : "<input>";
  p.err = err;
  if (!out || (!text && len))
    return TS_ERR(err, TS_EINVAL, "ts_func_parse: NULL text or output");
  if (len > MAX_INPUT) {
    tp_fail_at(&p, 1, 1, "input of %zu bytes is larger than the limit of %u",
               len, MAX_INPUT);
    return TS_EPARSE;
  }
  p.src = text ? text : "";
  p.end = p.src + len;
  unsigned long oom = ts_alloc_failures();
  bool ok = tp_lex(&p);
  if (ok) {
    p.f = ts_func_new("main");
    ok = p.f && (p.a = ts_func_arena(p.f)) && parse_func(&p) && !p.failed;
  }
  free(p.toks);
  free(p.syms);
  int rc = ts_alloc_check(oom, ok ? TS_OK : TS_EPARSE, err, p.file);
  if (rc) {
    ts_func_free(p.f);
    return rc;
  }
  *out = p.f;
  return TS_OK;
}

int ts_func_parse_file(const char *path, ts_func **out, ts_error *err) {
  if (out) *out = NULL;
  char *text = NULL;
  size_t len = 0;
  int rc = ts_read_file(path, "TIR file", MAX_INPUT, &text, &len, err);
  if (rc == TS_EINVAL)
    return TS_ERR_AT(err, TS_EPARSE, 1, 1,
                     "%s:1:1: file is larger than the limit of %u bytes", path,
                     MAX_INPUT);
  if (rc) return rc;
  rc = ts_func_parse(text, len, path, out, err);
  free(text);
  return rc;
}
