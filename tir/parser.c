/*
 * parser.c — reads the text form back into a function: a hand-written lexer
 * and a recursive-descent parser (grammar rule above each parse function;
 * the whole grammar is in docs/ir.md). Nodes are built with the non-folding
 * constructors so the text is reproduced exactly, and types are checked while
 * parsing. Every error is TS_EPARSE with a 1-based line:column, in the error
 * record and in the message ("FILE:LINE:COL: expected ..."). Hostile input is
 * bounded: nesting depth, identifier and string length, integer range, input
 * size, name counts. On failure nothing is handed out.
 */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_INPUT (64u << 20) /* bytes of text */
#define MAX_TOKENS (8 << 20)
#define MAX_DEPTH TS_TIR_MAX_DEPTH /* nested statements and expressions */
#define MAX_IDENT 255              /* identifier characters */
#define MAX_STRING 65536           /* string literal bytes */
#define MAX_LIST 1024   /* params, iter vars, allocs, args of one node */
#define MAX_NAMES 65536 /* names visible at once */
#define MAX_LANES 65535
#define MAX_ALIGN 65536
#define MAX_BUFFER_BYTES ((int64_t)1 << 40)

/* ---- tokens ---- */

typedef enum tok_kind {
  TK_EOF,
  TK_IDENT,
  TK_INT,    /* digits only */
  TK_FLOAT,  /* digits with '.' or an exponent */
  TK_STRING, /* "..." (escapes checked by the lexer) */
  TK_PUNCT,
} tok_kind;

typedef struct token {
  const char *loc; /* in the input */
  int len;
  int line, col; /* 1-based */
  int kind;      /* tok_kind */
} token;

typedef struct sym {
  const char *name;
  ts_expr *var;      /* a var, or */
  ts_buffer *buffer; /* a buffer */
  int line, col;     /* where it was declared */
} sym;

typedef struct parser {
  const char *file;
  const char *src, *end;
  token *toks;
  int n_toks, cap_toks, pos;
  ts_func *f;
  ts_arena *a;
  sym *syms; /* visible names, innermost last */
  int n_syms, cap_syms;
  int scope_start; /* first sym of the innermost scope */
  int depth;
  bool failed;
  ts_error *err;
} parser;

/* ---- errors ---- */

/* Records the first error (later ones are consequences) at line:col of
 * the input, prefixed with FILE:LINE:COL, and returns false. */
static bool fail_at(parser *p, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static bool fail_at(parser *p, int line, int col, const char *fmt, ...) {
  if (p->failed) return false;
  p->failed = true;
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  TS_ERR_AT(p->err, TS_EPARSE, line, col, "%s:%d:%d: %s", p->file, line, col,
            msg);
  return false;
}

#define FAIL(p, t, ...) fail_at((p), (t)->line, (t)->col, __VA_ARGS__)
/* The same, as a NULL result. */
#define FAIL_NULL(p, t, ...) (FAIL((p), (t), __VA_ARGS__), NULL)

/* "'tok'" or "end of input", for messages. */
static const char *describe(const token *t, char buf[64]) {
  if (t->kind == TK_EOF) return "end of input";
  if (t->kind == TK_STRING) return "a string";
  if (t->len > 40)
    snprintf(buf, 64, "'%.40s...'", t->loc);
  else
    snprintf(buf, 64, "'%.*s'", t->len, t->loc);
  return buf;
}

/* ---- lexer ---- */

static bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c); }
static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static bool add_token(parser *p, int kind, const char *loc, int len, int line,
                      int col) {
  if (p->n_toks == MAX_TOKENS)
    return fail_at(p, line, col, "input has more than %d tokens", MAX_TOKENS);
  if (p->n_toks == p->cap_toks) {
    int cap = p->cap_toks ? p->cap_toks * 2 : 256;
    token *t = realloc(p->toks, sizeof *t * (size_t)cap);
    if (!t) return fail_at(p, line, col, "out of memory reading the input");
    p->toks = t;
    p->cap_toks = cap;
  }
  p->toks[p->n_toks++] = (token){loc, len, line, col, kind};
  return true;
}

static const char *const puncts[] = {
    "+:", "==", "!=", "<=", ">=", "&&", "||", "(", ")", "[", "]", "{", "}",
    ",",  ":",  "=",  "<",  ">",  "+",  "-",  "*", "/", "%", "!", "&",
};

/* Splits the whole input into tokens (the last is TK_EOF). */
static bool lex(parser *p) {
  const char *s = p->src, *end = p->end, *line_start = s;
  int line = 1;
  while (s < end) {
    char c = *s;
    int col = (int)(s - line_start) + 1;
    if (c == '\n') {
      s++;
      line++;
      line_start = s;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r') {
      s++;
      continue;
    }
    if (c == '#') {
      while (s < end && *s != '\n') s++;
      continue;
    }
    if (is_ident_start(c)) {
      const char *q = s;
      while (q < end && is_ident_char(*q)) q++;
      if (q - s > MAX_IDENT)
        return fail_at(p, line, col, "identifier longer than %d characters",
                       MAX_IDENT);
      if (!add_token(p, TK_IDENT, s, (int)(q - s), line, col)) return false;
      s = q;
      continue;
    }
    if (is_digit(c)) {
      const char *q = s;
      int kind = TK_INT;
      while (q < end && is_digit(*q)) q++;
      if (q < end && *q == '.') {
        kind = TK_FLOAT;
        q++;
        if (q >= end || !is_digit(*q))
          return fail_at(p, line, col,
                         "malformed number: expected digits after '.'");
        while (q < end && is_digit(*q)) q++;
      }
      if (q < end && (*q == 'e' || *q == 'E')) {
        kind = TK_FLOAT;
        q++;
        if (q < end && (*q == '+' || *q == '-')) q++;
        if (q >= end || !is_digit(*q))
          return fail_at(p, line, col,
                         "malformed number: expected digits in the exponent");
        while (q < end && is_digit(*q)) q++;
      }
      if (q < end && (is_ident_char(*q) || *q == '.'))
        return fail_at(p, line, col, "malformed number '%.*s'",
                       (int)(q - s + 1 > 40 ? 40 : q - s + 1), s);
      if (q - s > 400)
        return fail_at(p, line, col, "number longer than 400 characters");
      if (!add_token(p, kind, s, (int)(q - s), line, col)) return false;
      s = q;
      continue;
    }
    if (c == '"') {
      const char *q = s + 1;
      for (;;) {
        if (q >= end || *q == '\n')
          return fail_at(p, line, col, "unterminated string");
        if (*q == '"') break;
        if (*q == '\\') {
          char e = q + 1 < end ? q[1] : 0;
          if (e == '"' || e == '\\' || e == 'n' || e == 't') {
            q += 2;
          } else if (e == 'x' && q + 3 < end && hex_value(q[2]) >= 0 &&
                     hex_value(q[3]) >= 0) {
            if (hex_value(q[2]) == 0 && hex_value(q[3]) == 0)
              return fail_at(p, line, (int)(q - line_start) + 1,
                             "'\\x00' is not allowed in a string");
            q += 4;
          } else {
            return fail_at(p, line, (int)(q - line_start) + 1,
                           "bad escape in string (use \\\" \\\\ \\n \\t or "
                           "\\xHH)");
          }
        } else {
          q++;
        }
        if (q - s > MAX_STRING)
          return fail_at(p, line, col, "string longer than %d bytes",
                         MAX_STRING);
      }
      q++;
      if (!add_token(p, TK_STRING, s, (int)(q - s), line, col)) return false;
      s = q;
      continue;
    }
    bool found = false;
    for (size_t i = 0; i < sizeof puncts / sizeof puncts[0]; i++) {
      size_t n = strlen(puncts[i]);
      if ((size_t)(end - s) >= n && memcmp(s, puncts[i], n) == 0) {
        if (!add_token(p, TK_PUNCT, s, (int)n, line, col)) return false;
        s += n;
        found = true;
        break;
      }
    }
    if (found) continue;
    if ((unsigned char)c >= 0x20 && (unsigned char)c < 0x7f)
      return fail_at(p, line, col, "unexpected character '%c'", c);
    return fail_at(p, line, col, "unexpected byte 0x%02x", (unsigned char)c);
  }
  return add_token(p, TK_EOF, end, 0, line, (int)(end - line_start) + 1);
}

/* ---- token helpers ---- */

static token *peek(parser *p) { return &p->toks[p->pos]; }
static token *peek_at(parser *p, int k) {
  int i = p->pos + k;
  return &p->toks[i < p->n_toks ? i : p->n_toks - 1];
}
static token *next(parser *p) {
  token *t = &p->toks[p->pos];
  if (t->kind != TK_EOF) p->pos++;
  return t;
}
static bool is(const token *t, const char *s) {
  size_t n = strlen(s);
  return (t->kind == TK_PUNCT || t->kind == TK_IDENT) && (size_t)t->len == n &&
         memcmp(t->loc, s, n) == 0;
}
static bool accept(parser *p, const char *s) {
  if (!is(peek(p), s)) return false;
  next(p);
  return true;
}
/* Consumes `s` or fails with "expected 's' CONTEXT but found ...". */
static bool expect(parser *p, const char *s, const char *context) {
  if (accept(p, s)) return true;
  char buf[64];
  return FAIL(p, peek(p), "expected '%s' %s but found %s", s, context,
              describe(peek(p), buf));
}
/* The end of a comma-separated list: "expected ',' or ')' CONTEXT". */
static bool expect_list_end(parser *p, const char *close, const char *context) {
  if (accept(p, close)) return true;
  char buf[64];
  return FAIL(p, peek(p), "expected ',' or '%s' %s but found %s", close,
              context, describe(peek(p), buf));
}
static bool expect_ident(parser *p, const char *what, token **out) {
  token *t = peek(p);
  if (t->kind != TK_IDENT) {
    char buf[64];
    return FAIL(p, t, "expected %s but found %s", what, describe(t, buf));
  }
  *out = next(p);
  return true;
}
static char *tok_str(parser *p, const token *t) {
  return ts_arena_strndup(p->a, t->loc, (size_t)t->len);
}

/* Decodes a string token into the arena. */
static char *string_value(parser *p, const token *t) {
  char *out = ts_arena_alloc(p->a, (size_t)t->len);
  size_t n = 0;
  for (int i = 1; i < t->len - 1; i++) {
    char c = t->loc[i];
    if (c != '\\') {
      out[n++] = c;
      continue;
    }
    char e = t->loc[++i];
    if (e == 'n')
      out[n++] = '\n';
    else if (e == 't')
      out[n++] = '\t';
    else if (e == 'x') {
      out[n++] =
          (char)(hex_value(t->loc[i + 1]) * 16 + hex_value(t->loc[i + 2]));
      i += 2;
    } else
      out[n++] = e;
  }
  out[n] = 0;
  return out;
}

/* Magnitude of an integer token; false when it exceeds `limit`. */
static bool int_value(const token *t, uint64_t limit, uint64_t *out) {
  uint64_t v = 0;
  for (int i = 0; i < t->len; i++) {
    uint64_t d = (uint64_t)(t->loc[i] - '0');
    if (v > (limit - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

static const char *dtype_name(ts_dtype t, char buf[32]) {
  return ts_dtype_str(t, buf);
}

/* ---- nesting and scopes ---- */

static bool enter(parser *p, const token *t) {
  if (++p->depth > MAX_DEPTH)
    return FAIL(p, t, "nesting deeper than %d levels", MAX_DEPTH);
  return true;
}
static void leave(parser *p) { p->depth--; }

static int open_scope(parser *p) {
  int saved = p->scope_start;
  p->scope_start = p->n_syms;
  return saved;
}
static void close_scope(parser *p, int saved) {
  p->n_syms = p->scope_start;
  p->scope_start = saved;
}

static sym *lookup(parser *p, const token *t) {
  for (int i = p->n_syms - 1; i >= 0; i--)
    if (strlen(p->syms[i].name) == (size_t)t->len &&
        memcmp(p->syms[i].name, t->loc, (size_t)t->len) == 0)
      return &p->syms[i];
  return NULL;
}

/* Checks that the name at t may be defined here (not reserved, not already
 * in the innermost scope) and returns it in the arena, or NULL. */
static char *new_name(parser *p, const token *t, const char *what) {
  char *name = tok_str(p, t);
  if (ts_text_name_is_reserved(name)) {
    FAIL(p, t, "'%s' is a reserved word and cannot name a %s", name, what);
    return NULL;
  }
  for (int i = p->scope_start; i < p->n_syms; i++)
    if (strcmp(p->syms[i].name, name) == 0) {
      FAIL(p, t, "duplicate name '%s': already declared at %d:%d", name,
           p->syms[i].line, p->syms[i].col);
      return NULL;
    }
  return name;
}

static bool declare(parser *p, const token *t, const char *name, ts_expr *var,
                    ts_buffer *buffer) {
  if (p->n_syms == MAX_NAMES)
    return FAIL(p, t, "more than %d names visible at once", MAX_NAMES);
  if (p->n_syms == p->cap_syms) {
    int cap = p->cap_syms ? p->cap_syms * 2 : 64;
    sym *s = realloc(p->syms, sizeof *s * (size_t)cap);
    if (!s) return FAIL(p, t, "out of memory");
    p->syms = s;
    p->cap_syms = cap;
  }
  p->syms[p->n_syms++] = (sym){name, var, buffer, t->line, t->col};
  return true;
}

/* ---- growable arrays in the arena ---- */

typedef struct vec {
  void **items;
  int n, cap;
} vec;

static void vec_push(parser *p, vec *v, void *item) {
  if (v->n == v->cap) {
    int cap = v->cap ? v->cap * 2 : 8;
    void **items = ts_arena_alloc(p->a, sizeof *items * (size_t)cap);
    if (v->n) memcpy(items, v->items, sizeof *items * (size_t)v->n);
    v->items = items;
    v->cap = cap;
  }
  v->items[v->n++] = item;
}

/* ---- expressions ---- */

static ts_expr *parse_expr(parser *p);

static bool is_numeric(ts_dtype t) {
  return ts_dtype_is_int(t) || ts_dtype_is_float(t);
}
static bool is_int_scalar(ts_dtype t) {
  return ts_dtype_is_int(t) && t.lanes == 1;
}

/* Type rule of a binary operator; `op` names it in messages. */
static bool check_binary(parser *p, const token *at, ts_expr_kind k,
                         const char *op, ts_expr *x, ts_expr *y) {
  char b1[32], b2[32];
  if (!ts_dtype_eq(x->dtype, y->dtype))
    return FAIL(p, at, "operands of '%s' have different types: %s and %s", op,
                dtype_name(x->dtype, b1), dtype_name(y->dtype, b2));
  if (k == TS_EXPR_AND || k == TS_EXPR_OR) {
    if (!ts_dtype_is_bool(x->dtype))
      return FAIL(p, at, "operands of '%s' must be bool, not %s", op,
                  dtype_name(x->dtype, b1));
  } else if (!ts_expr_is_compare(k) && !is_numeric(x->dtype)) {
    return FAIL(p, at, "operands of '%s' must be numbers, not %s", op,
                dtype_name(x->dtype, b1));
  }
  return true;
}

static ts_expr *binary(parser *p, const token *at, ts_expr_kind k,
                       const char *op, ts_expr *x, ts_expr *y) {
  if (!check_binary(p, at, k, op, x, y)) return NULL;
  return ts_binary_raw(p->a, k, x, y);
}

/* Whether integer value (negated when neg) of magnitude m fits dtype t. */
static bool int_fits(ts_dtype t, bool neg, uint64_t m) {
  if (t.code == TS_DT_BOOL) return !neg && m <= 1;
  if (t.code == TS_DT_UINT || t.code == TS_DT_HANDLE)
    return neg ? m == 0 : t.bits >= 64 || m < ((uint64_t)1 << t.bits);
  uint64_t lim = (uint64_t)1 << (t.bits - 1); /* |min| */
  return neg ? m <= lim : m < lim;
}

/* typed-literal = DTYPE "(" ["-"] (INT | FLOAT | "inf" | "nan") ")" */
static ts_expr *parse_typed_literal(parser *p, const token *dt, ts_dtype t) {
  char b1[32], buf[64];
  next(p); /* "(" */
  bool neg = accept(p, "-");
  token *v = peek(p);
  ts_expr *e = NULL;
  if (ts_dtype_is_float(t)) {
    char text[416];
    if (v->kind == TK_INT || v->kind == TK_FLOAT)
      snprintf(text, sizeof text, "%s%.*s", neg ? "-" : "", v->len, v->loc);
    else if (is(v, "inf") || is(v, "nan"))
      snprintf(text, sizeof text, "%s%.*s", neg ? "-" : "", v->len, v->loc);
    else
      return FAIL_NULL(p, v,
                       "expected a number, inf or nan in %s(...) but found %s",
                       dtype_name(t, b1), describe(v, buf));
    next(p);
    errno = 0;
    double d = strtod(text, NULL);
    if (is(v, "nan")) d = NAN; /* one NaN: the printer writes "nan" */
    if ((errno == ERANGE && isinf(d)) ||
        (isfinite(d) && isinf(round_to_dtype(d, t))))
      return FAIL_NULL(p, v, "literal %s is out of range for %s", text,
                       dtype_name(t, b1));
    e = ts_float(p->a, t, d);
  } else if (ts_dtype_is_int(t) || ts_dtype_is_bool(t) ||
             ts_dtype_is_handle(t)) {
    uint64_t m;
    if (v->kind != TK_INT)
      return FAIL_NULL(p, v, "expected an integer in %s(...) but found %s",
                       dtype_name(t, b1), describe(v, buf));
    if (!int_value(v, UINT64_MAX, &m) || !int_fits(t, neg, m))
      return FAIL_NULL(p, v, "literal %s%.*s is out of range for %s",
                       neg ? "-" : "", v->len, v->loc, dtype_name(t, b1));
    next(p);
    e = ts_int(p->a, t, neg ? (int64_t)(0 - m) : (int64_t)m);
  } else {
    return FAIL_NULL(p, dt, "no literals of type %s", dtype_name(t, b1));
  }
  if (!expect(p, ")", "to close the literal")) return NULL;
  return e;
}

/* args = [expr ("," expr)*] ")"  (after the "(") */
static bool parse_args(parser *p, vec *out, const char *what) {
  char ctx[96];
  snprintf(ctx, sizeof ctx, "after the arguments of %s", what);
  if (accept(p, ")")) return true;
  for (;;) {
    if (out->n == MAX_LIST)
      return FAIL(p, peek(p), "more than %d arguments to %s", MAX_LIST, what);
    ts_expr *e = parse_expr(p);
    if (!e) return false;
    vec_push(p, out, e);
    if (accept(p, ",")) continue;
    return expect_list_end(p, ")", ctx);
  }
}

/* A fixed number of arguments. */
static bool parse_n_args(parser *p, const token *name, vec *out, int n) {
  char what[64];
  snprintf(what, sizeof what, "%.*s", name->len, name->loc);
  if (!expect(p, "(", "after the function name")) return false;
  if (!parse_args(p, out, what)) return false;
  if (out->n != n)
    return FAIL(p, name, "%s takes %d argument%s but got %d", what, n,
                n == 1 ? "" : "s", out->n);
  return true;
}

/* lanes = INT in 1..65535 */
static bool parse_lanes(parser *p, int *lanes) {
  token *t = peek(p);
  uint64_t v;
  char buf[64];
  if (t->kind != TK_INT)
    return FAIL(p, t, "expected a lane count but found %s", describe(t, buf));
  if (!int_value(t, UINT64_MAX, &v) || v < 1 || v > MAX_LANES)
    return FAIL(p, t, "lane count must be in 1..%d", MAX_LANES);
  next(p);
  *lanes = (int)v;
  return true;
}

/* dtype = IDENT naming a data type ("float32", "int8x4", ...) */
static bool parse_dtype(parser *p, ts_dtype *out) {
  token *t = peek(p);
  char buf[64];
  if (t->kind != TK_IDENT)
    return FAIL(p, t, "expected a dtype but found %s", describe(t, buf));
  if (ts_dtype_parse(t->loc, (size_t)t->len, out) != TS_OK)
    return FAIL(p, t, "unknown dtype '%.*s'", t->len, t->loc);
  next(p);
  return true;
}

/* indices = "[" [expr ("," expr)*] "]", one integer index per dimension */
static bool parse_indices(parser *p, const token *name, ts_buffer *b,
                          vec *out) {
  char b1[32];
  if (!expect(p, "[", "after the buffer name")) return false;
  if (!accept(p, "]")) {
    for (;;) {
      token *at = peek(p);
      if (out->n == b->ndim)
        return FAIL(p, at, "too many indices for buffer '%s' of %d dimension%s",
                    b->name, b->ndim, b->ndim == 1 ? "" : "s");
      ts_expr *e = parse_expr(p);
      if (!e) return false;
      if (!ts_dtype_is_int(e->dtype))
        return FAIL(p, at, "index of '%s' must be an integer, not %s", b->name,
                    dtype_name(e->dtype, b1));
      vec_push(p, out, e);
      if (accept(p, ",")) continue;
      if (!expect_list_end(p, "]", "after the indices")) return false;
      break;
    }
  }
  if (out->n != b->ndim)
    return FAIL(p, name, "buffer '%s' has %d dimension%s but got %d index%s",
                b->name, b->ndim, b->ndim == 1 ? "" : "s", out->n,
                out->n == 1 ? "" : "es");
  return true;
}

/* A buffer named by token t, or NULL with an error. */
static ts_buffer *find_buffer(parser *p, const token *t) {
  sym *s = lookup(p, t);
  if (!s) return FAIL_NULL(p, t, "undefined buffer '%.*s'", t->len, t->loc);
  if (!s->buffer)
    return FAIL_NULL(p, t, "'%.*s' is a variable, not a buffer", t->len,
                     t->loc);
  return s->buffer;
}

/* intrinsic-call = NAME "(" [expr ("," expr)*] ")" (a built-in intrinsic) */
static ts_expr *parse_intrinsic(parser *p, const token *name,
                                const ts_intrinsic_info *info) {
  char b1[32];
  vec args = {0};
  if (!expect(p, "(", "after the intrinsic name")) return NULL;
  if (!parse_args(p, &args, info->name)) return NULL;
  ts_expr **a = (ts_expr **)args.items;
  if (info->n_args >= 0 && args.n != info->n_args)
    return FAIL_NULL(p, name, "%s takes %d argument%s but got %d", info->name,
                     info->n_args, info->n_args == 1 ? "" : "s", args.n);
  if (info->rule == TS_INTRIN_EXPLICIT)
    return FAIL_NULL(
        p, name, "%s needs an explicit result type: call<DTYPE>(\"%s\", ...)",
        info->name, info->name);
  if (args.n < 1) return FAIL_NULL(p, name, "%s needs an argument", info->name);
  for (int i = 0; i < args.n; i++)
    if (info->float_only && !ts_dtype_is_float(a[i]->dtype))
      return FAIL_NULL(p, name, "%s needs floating-point arguments, not %s",
                       info->name, dtype_name(a[i]->dtype, b1));
  ts_dtype t = a[0]->dtype;
  if (info->rule == TS_INTRIN_SAME_AS_ARG1) {
    char b2[32];
    if (args.n != 3)
      return FAIL_NULL(p, name, "%s takes 3 arguments", info->name);
    if (!ts_dtype_is_bool(a[0]->dtype))
      return FAIL_NULL(p, name, "condition of %s must be bool, not %s",
                       info->name, dtype_name(a[0]->dtype, b1));
    if (!ts_dtype_eq(a[1]->dtype, a[2]->dtype))
      return FAIL_NULL(
          p, name, "branches of %s have different types: %s and %s", info->name,
          dtype_name(a[1]->dtype, b1), dtype_name(a[2]->dtype, b2));
    t = a[1]->dtype;
  }
  return ts_call(p->a, t, info->name, a, args.n);
}

/* call = "call" "<" DTYPE ">" "(" STRING ("," expr)* ")" */
static ts_expr *parse_call(parser *p) {
  ts_dtype t;
  char buf[64];
  if (!expect(p, "<", "after 'call'") || !parse_dtype(p, &t) ||
      !expect(p, ">", "after the result type of call") ||
      !expect(p, "(", "after call<...>"))
    return NULL;
  token *nt = peek(p);
  if (nt->kind != TK_STRING)
    return FAIL_NULL(p, nt,
                     "expected the quoted name of the called function but "
                     "found %s",
                     describe(nt, buf));
  next(p);
  const char *name = string_value(p, nt);
  if (!name[0]) return FAIL_NULL(p, nt, "called function name is empty");
  vec args = {0};
  if (!accept(p, ")")) {
    if (!expect(p, ",", "after the called function's name")) return NULL;
    if (!parse_args(p, &args, name)) return NULL;
    if (args.n == 0)
      return FAIL_NULL(p, peek_at(p, -1), "expected an argument after ','");
  }
  return ts_call(p->a, t, name, (ts_expr **)args.items, args.n);
}

/* builtin = ("floordiv" | "floormod" | "min" | "max") "(" expr "," expr ")"
 *         | "select" "(" expr "," expr "," expr ")"
 *         | "cast" "(" DTYPE "," expr ")"
 *         | "ramp" "(" expr "," expr "," LANES ")"
 *         | "broadcast" "(" expr "," LANES ")" */
static ts_expr *parse_builtin(parser *p, const token *name) {
  char b1[32], b2[32];
  static const struct {
    const char *name;
    ts_expr_kind kind;
  } binops[] = {{"floordiv", TS_EXPR_FLOORDIV},
                {"floormod", TS_EXPR_FLOORMOD},
                {"min", TS_EXPR_MIN},
                {"max", TS_EXPR_MAX}};
  for (size_t i = 0; i < sizeof binops / sizeof binops[0]; i++)
    if (is(name, binops[i].name)) {
      vec args = {0};
      if (!parse_n_args(p, name, &args, 2)) return NULL;
      return binary(p, name, binops[i].kind, binops[i].name, args.items[0],
                    args.items[1]);
    }
  if (is(name, "select")) {
    vec args = {0};
    if (!parse_n_args(p, name, &args, 3)) return NULL;
    ts_expr *c = args.items[0], *t = args.items[1], *f = args.items[2];
    if (!ts_dtype_is_bool(c->dtype) ||
        (c->dtype.lanes != 1 && c->dtype.lanes != t->dtype.lanes))
      return FAIL_NULL(p, name,
                       "condition of select must be bool (scalar or with "
                       "the lanes of the values), not %s",
                       dtype_name(c->dtype, b1));
    if (!ts_dtype_eq(t->dtype, f->dtype))
      return FAIL_NULL(p, name,
                       "branches of select have different types: %s and %s",
                       dtype_name(t->dtype, b1), dtype_name(f->dtype, b2));
    return ts_select_raw(p->a, c, t, f);
  }
  if (is(name, "cast")) {
    ts_dtype t;
    if (!expect(p, "(", "after 'cast'") || !parse_dtype(p, &t) ||
        !expect(p, ",", "after the target type of cast"))
      return NULL;
    ts_expr *x = parse_expr(p);
    if (!x || !expect(p, ")", "after the operand of cast")) return NULL;
    if (x->dtype.lanes != t.lanes)
      return FAIL_NULL(p, name,
                       "cast from %s to %s changes the number of lanes",
                       dtype_name(x->dtype, b1), dtype_name(t, b2));
    return ts_cast_raw(p->a, t, x);
  }
  if (is(name, "ramp")) {
    int lanes;
    if (!expect(p, "(", "after 'ramp'")) return NULL;
    ts_expr *base = parse_expr(p);
    if (!base || !expect(p, ",", "after the base of ramp")) return NULL;
    ts_expr *stride = parse_expr(p);
    if (!stride || !expect(p, ",", "after the stride of ramp") ||
        !parse_lanes(p, &lanes) || !expect(p, ")", "after the lanes of ramp"))
      return NULL;
    if (!is_int_scalar(base->dtype) || !ts_dtype_eq(base->dtype, stride->dtype))
      return FAIL_NULL(p, name,
                       "ramp needs scalar integer base and stride of one "
                       "type, not %s and %s",
                       dtype_name(base->dtype, b1),
                       dtype_name(stride->dtype, b2));
    return ts_ramp(p->a, base, stride, lanes);
  }
  /* broadcast */
  int lanes;
  if (!expect(p, "(", "after 'broadcast'")) return NULL;
  ts_expr *v = parse_expr(p);
  if (!v || !expect(p, ",", "after the value of broadcast") ||
      !parse_lanes(p, &lanes) ||
      !expect(p, ")", "after the lanes of broadcast"))
    return NULL;
  if (v->dtype.lanes != 1)
    return FAIL_NULL(p, name, "broadcast needs a scalar value, not %s",
                     dtype_name(v->dtype, b1));
  return ts_broadcast(p->a, v, lanes);
}

/* let-expr = "(" "let" IDENT "=" expr "in" expr ")"  (after the "(") */
static ts_expr *parse_let_expr(parser *p) {
  token *nt;
  next(p); /* let */
  if (!expect_ident(p, "a variable name after 'let'", &nt)) return NULL;
  char *name = new_name(p, nt, "variable");
  if (!name || !expect(p, "=", "after the let variable")) return NULL;
  ts_expr *value = parse_expr(p);
  if (!value || !expect(p, "in", "after the value of let")) return NULL;
  int saved = open_scope(p);
  ts_expr *var = ts_var(p->a, name, value->dtype);
  ts_expr *body = NULL;
  if (declare(p, nt, name, var, NULL)) body = parse_expr(p);
  close_scope(p, saved);
  if (!body || !expect(p, ")", "to close the let expression")) return NULL;
  return ts_let(p->a, var, value, body);
}

/* primary = INT | FLOAT-with-dtype | "true" | "false" | typed-literal
 *         | "(" expr ")" | let-expr | "&" IDENT indices | IDENT indices
 *         | IDENT | builtin | intrinsic-call | call */
static ts_expr *parse_primary(parser *p) {
  token *t = peek(p);
  char buf[64];
  if (t->kind == TK_INT) {
    uint64_t m;
    if (!int_value(t, INT64_MAX, &m))
      return FAIL_NULL(p, t, "integer literal %.*s does not fit int64", t->len,
                       t->loc);
    next(p);
    return ts_int(p->a, TS_INDEX, (int64_t)m);
  }
  if (t->kind == TK_FLOAT)
    return FAIL_NULL(
        p, t, "floating-point literal %.*s needs a dtype, e.g. float32(%.*s)",
        t->len, t->loc, t->len, t->loc);
  if (accept(p, "(")) {
    if (is(peek(p), "let")) return parse_let_expr(p);
    ts_expr *e = parse_expr(p);
    if (!e || !expect(p, ")", "to close the parenthesized expression"))
      return NULL;
    return e;
  }
  if (accept(p, "&")) {
    token *nt;
    if (!expect_ident(p, "a buffer name after '&'", &nt)) return NULL;
    ts_buffer *b = find_buffer(p, nt);
    vec idx = {0};
    if (!b || !parse_indices(p, nt, b, &idx)) return NULL;
    return ts_address_of(p->a, b, (ts_expr **)idx.items, idx.n);
  }
  if (t->kind != TK_IDENT)
    return FAIL_NULL(p, t, "expected an expression but found %s",
                     describe(t, buf));
  next(p);
  if (is(t, "true") || is(t, "false")) return ts_bool(p->a, is(t, "true"));
  if (is(t, "call")) return parse_call(p);
  bool call = is(peek(p), "(");
  if (is(t, "floordiv") || is(t, "floormod") || is(t, "min") || is(t, "max") ||
      is(t, "select") || is(t, "cast") || is(t, "ramp") || is(t, "broadcast"))
    return parse_builtin(p, t);
  char name[MAX_IDENT + 1];
  snprintf(name, sizeof name, "%.*s", t->len, t->loc);
  const ts_intrinsic_info *info = ts_intrinsic_lookup(name);
  if (info) return parse_intrinsic(p, t, info);
  ts_dtype dt;
  if (ts_dtype_parse(t->loc, (size_t)t->len, &dt) == TS_OK) {
    if (!call)
      return FAIL_NULL(p, t,
                       "dtype '%s' used as a value; write %s(0) for a literal "
                       "or cast(%s, x) for a conversion",
                       name, name, name);
    return parse_typed_literal(p, t, dt);
  }
  if (ts_text_name_is_reserved(name))
    return FAIL_NULL(p, t, "unexpected keyword '%s' in an expression", name);
  sym *s = lookup(p, t);
  if (!s) {
    if (call) return FAIL_NULL(p, t, "unknown function '%s'", name);
    return FAIL_NULL(p, t, "undefined variable or buffer '%s'", name);
  }
  if (s->var) {
    if (is(peek(p), "["))
      return FAIL_NULL(p, t, "'%s' is a variable, not a buffer", name);
    if (call)
      return FAIL_NULL(p, t, "'%s' is a variable, not a function", name);
    return s->var;
  }
  if (!is(peek(p), "["))
    return FAIL_NULL(p, t, "buffer '%s' used as a value; index it: %s[...]",
                     name, name);
  vec idx = {0};
  if (!parse_indices(p, t, s->buffer, &idx)) return NULL;
  return ts_load(p->a, s->buffer, (ts_expr **)idx.items, idx.n);
}

/* The literal -x for an immediate x, or NULL with an error. */
static ts_expr *negate_literal(parser *p, const token *at, ts_expr *x) {
  char b1[32];
  ts_dtype t = x->dtype;
  if (x->kind == TS_EXPR_FLOAT) return ts_float(p->a, t, -x->u.float_value);
  int64_t v = x->u.int_value;
  if (t.code == TS_DT_UINT && v == 0) return ts_int(p->a, t, 0);
  int64_t lowest = t.bits >= 64 ? INT64_MIN : -((int64_t)1 << (t.bits - 1));
  if (t.code != TS_DT_INT || v == lowest)
    return FAIL_NULL(p, at, "negated literal is out of range for %s",
                     dtype_name(t, b1));
  return ts_int(p->a, t, -v);
}

/* unary = ("!" | "-") unary | primary
 * A "-" before a literal makes a negative literal; before anything else it
 * means 0 - x. */
static ts_expr *parse_unary(parser *p) {
  token *t = peek(p);
  char b1[32];
  if (is(t, "-") && peek_at(p, 1)->kind == TK_INT) {
    token *v = peek_at(p, 1);
    uint64_t m;
    if (!int_value(v, (uint64_t)INT64_MAX + 1, &m))
      return FAIL_NULL(p, v, "integer literal -%.*s does not fit int64", v->len,
                       v->loc);
    p->pos += 2;
    return ts_int(p->a, TS_INDEX, (int64_t)(0 - m));
  }
  if (!is(t, "!") && !is(t, "-")) return parse_primary(p);
  next(p);
  if (!enter(p, t)) return NULL;
  ts_expr *x = parse_unary(p);
  leave(p);
  if (!x) return NULL;
  if (is(t, "!")) {
    if (!ts_dtype_is_bool(x->dtype))
      return FAIL_NULL(p, t, "operand of '!' must be bool, not %s",
                       dtype_name(x->dtype, b1));
    return ts_not_raw(p->a, x);
  }
  if (x->kind == TS_EXPR_INT || x->kind == TS_EXPR_FLOAT) {
    if (ts_dtype_is_bool(x->dtype) || ts_dtype_is_handle(x->dtype))
      return FAIL_NULL(p, t, "cannot negate a %s", dtype_name(x->dtype, b1));
    return negate_literal(p, t, x);
  }
  if (!is_numeric(x->dtype))
    return FAIL_NULL(p, t, "operand of '-' must be a number, not %s",
                     dtype_name(x->dtype, b1));
  ts_expr *zero = ts_dtype_is_float(x->dtype) ? ts_float(p->a, x->dtype, 0)
                                              : ts_int(p->a, x->dtype, 0);
  return ts_binary_raw(p->a, TS_EXPR_SUB, zero, x);
}

/* mul = unary (("*" | "/" | "%") unary)* */
static ts_expr *parse_mul(parser *p) {
  ts_expr *x = parse_unary(p);
  while (x) {
    token *t = peek(p);
    ts_expr_kind k;
    if (is(t, "*"))
      k = TS_EXPR_MUL;
    else if (is(t, "/"))
      k = TS_EXPR_DIV;
    else if (is(t, "%"))
      k = TS_EXPR_MOD;
    else
      break;
    next(p);
    ts_expr *y = parse_unary(p);
    if (!y) return NULL;
    x = binary(p, t, k,
               t->len == 1 && *t->loc == '*'   ? "*"
               : t->len == 1 && *t->loc == '/' ? "/"
                                               : "%",
               x, y);
  }
  return x;
}

/* add = mul (("+" | "-") mul)* */
static ts_expr *parse_add(parser *p) {
  ts_expr *x = parse_mul(p);
  while (x) {
    token *t = peek(p);
    bool plus = is(t, "+");
    if (!plus && !is(t, "-")) break;
    next(p);
    ts_expr *y = parse_mul(p);
    if (!y) return NULL;
    x = binary(p, t, plus ? TS_EXPR_ADD : TS_EXPR_SUB, plus ? "+" : "-", x, y);
  }
  return x;
}

static const struct {
  const char *op;
  ts_expr_kind kind;
} compare_ops[] = {{"==", TS_EXPR_EQ}, {"!=", TS_EXPR_NE}, {"<", TS_EXPR_LT},
                   {"<=", TS_EXPR_LE}, {">", TS_EXPR_GT},  {">=", TS_EXPR_GE}};

static int compare_op(const token *t) {
  for (int i = 0; i < 6; i++)
    if (is(t, compare_ops[i].op)) return i;
  return -1;
}

/* cmp = add [("==" | "!=" | "<" | "<=" | ">" | ">=") add]  (no chaining) */
static ts_expr *parse_cmp(parser *p) {
  ts_expr *x = parse_add(p);
  if (!x) return NULL;
  token *t = peek(p);
  int i = compare_op(t);
  if (i < 0) return x;
  next(p);
  ts_expr *y = parse_add(p);
  if (!y) return NULL;
  if (compare_op(peek(p)) >= 0)
    return FAIL_NULL(p, peek(p), "comparisons do not chain; add parentheses");
  return binary(p, t, compare_ops[i].kind, compare_ops[i].op, x, y);
}

/* and = cmp ("&&" cmp)* */
static ts_expr *parse_and(parser *p) {
  ts_expr *x = parse_cmp(p);
  while (x && is(peek(p), "&&")) {
    token *t = next(p);
    ts_expr *y = parse_cmp(p);
    if (!y) return NULL;
    x = binary(p, t, TS_EXPR_AND, "&&", x, y);
  }
  return x;
}

/* expr = and ("||" and)*
 * The operator loops build chains without recursing, so the tree's depth
 * (each operator one level, TS_TIR_MAX_DEPTH's counting) is checked here,
 * under the levels already open around it. */
static ts_expr *parse_expr(parser *p) {
  token *t = peek(p);
  if (!enter(p, t)) return NULL;
  ts_expr *x = parse_and(p);
  while (x && is(peek(p), "||")) {
    token *op = next(p);
    ts_expr *y = parse_and(p);
    if (!y) {
      x = NULL;
      break;
    }
    x = binary(p, op, TS_EXPR_OR, "||", x, y);
  }
  leave(p);
  int room = MAX_DEPTH - p->depth;
  if (x && ts_expr_depth(x, room) > room) {
    FAIL(p, t,
         "expression nested deeper than %d levels (each operator of a "
         "chain such as a + b + c is one level)",
         MAX_DEPTH);
    return NULL;
  }
  return x;
}

/* ---- buffers, annotations, ranges ---- */

/* buftype = DTYPE "[" [INT ("," INT)*] "]"
 *           ("strides" "[" INT ("," INT)* "]" | "scope" STRING | "align" INT)*
 */
static ts_buffer *parse_buffer_type(parser *p, const char *name) {
  ts_dtype t;
  char buf[64];
  token *start = peek(p);
  if (!parse_dtype(p, &t) || !expect(p, "[", "to start the shape")) return NULL;
  int64_t shape[TS_MAX_DIMS];
  int ndim = 0;
  if (!accept(p, "]")) {
    for (;;) {
      token *d = peek(p);
      uint64_t v;
      if (d->kind != TK_INT)
        return FAIL_NULL(p, d,
                         "expected a positive integer dimension but found %s",
                         describe(d, buf));
      if (ndim == TS_MAX_DIMS)
        return FAIL_NULL(p, d, "buffer '%s' has more than %d dimensions", name,
                         TS_MAX_DIMS);
      if (!int_value(d, INT64_MAX, &v) || v == 0)
        return FAIL_NULL(p, d,
                         "dimension of '%s' must be a positive integer that "
                         "fits int64",
                         name);
      next(p);
      shape[ndim++] = (int64_t)v;
      if (accept(p, ",")) continue;
      if (!expect_list_end(p, "]", "after the shape")) return NULL;
      break;
    }
  }
  ts_buffer *b = ts_buffer_new(p->a, name, t, shape, ndim);
  bool seen_strides = false, seen_scope = false, seen_align = false;
  for (;;) {
    token *o = peek(p);
    if (is(o, "strides")) {
      if (seen_strides)
        return FAIL_NULL(p, o, "strides given twice for '%s'", name);
      seen_strides = true;
      next(p);
      int64_t strides[TS_MAX_DIMS];
      int n = 0;
      if (!expect(p, "[", "after 'strides'")) return NULL;
      if (!accept(p, "]")) {
        for (;;) {
          token *d = peek(p);
          uint64_t v;
          if (d->kind != TK_INT)
            return FAIL_NULL(p, d,
                             "expected a non-negative integer stride but "
                             "found %s",
                             describe(d, buf));
          if (n == ndim)
            return FAIL_NULL(p, d,
                             "more strides than the %d dimension%s of '%s'",
                             ndim, ndim == 1 ? "" : "s", name);
          if (!int_value(d, INT64_MAX, &v))
            return FAIL_NULL(p, d, "stride does not fit int64");
          next(p);
          strides[n++] = (int64_t)v;
          if (accept(p, ",")) continue;
          if (!expect_list_end(p, "]", "after the strides")) return NULL;
          break;
        }
      }
      if (n != ndim)
        return FAIL_NULL(p, o, "'%s' has %d dimension%s but %d stride%s", name,
                         ndim, ndim == 1 ? "" : "s", n, n == 1 ? "" : "s");
      ts_buffer_set_strides(p->a, b, strides);
    } else if (is(o, "scope")) {
      if (seen_scope)
        return FAIL_NULL(p, o, "scope given twice for '%s'", name);
      seen_scope = true;
      next(p);
      token *s = peek(p);
      if (s->kind != TK_STRING)
        return FAIL_NULL(p, s,
                         "expected a quoted scope after 'scope' but found %s",
                         describe(s, buf));
      next(p);
      const char *scope = string_value(p, s);
      if (!scope[0]) return FAIL_NULL(p, s, "scope must not be empty");
      ts_buffer_set_scope(p->a, b, scope);
    } else if (is(o, "align")) {
      if (seen_align)
        return FAIL_NULL(p, o, "align given twice for '%s'", name);
      seen_align = true;
      next(p);
      token *s = peek(p);
      uint64_t v;
      if (s->kind != TK_INT || !int_value(s, MAX_ALIGN, &v) || v == 0 ||
          (v & (v - 1)) != 0)
        return FAIL_NULL(p, s, "align must be a power of two in 1..%d",
                         MAX_ALIGN);
      next(p);
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
static bool parse_annotations(parser *p, ann_list *out) {
  char buf[64];
  if (!expect(p, "{", "to start the annotations")) return false;
  if (accept(p, "}")) return true;
  for (;;) {
    token *k = peek(p);
    if (k->kind != TK_STRING)
      return FAIL(p, k, "expected a quoted annotation key but found %s",
                  describe(k, buf));
    next(p);
    const char *key = string_value(p, k);
    if (ann_list_find(out, key))
      return FAIL(p, k, "duplicate annotation key \"%s\"", key);
    if (out->n == MAX_LIST)
      return FAIL(p, k, "more than %d annotations", MAX_LIST);
    if (!expect(p, ":", "after the annotation key")) return false;
    bool neg = accept(p, "-");
    token *v = peek(p);
    ts_annotation ann = {.key = key};
    if (v->kind == TK_STRING && !neg) {
      ann.kind = TS_ANN_STRING;
      ann.s = string_value(p, v);
    } else if (v->kind == TK_INT) {
      uint64_t m;
      if (!int_value(v, (uint64_t)INT64_MAX + (neg ? 1 : 0), &m))
        return FAIL(p, v, "annotation value does not fit int64");
      ann.kind = TS_ANN_INT;
      ann.i = (int64_t)(neg ? 0 - m : m);
    } else if (v->kind == TK_FLOAT || is(v, "inf") || is(v, "nan")) {
      char text[416];
      snprintf(text, sizeof text, "%s%.*s", neg ? "-" : "", v->len, v->loc);
      errno = 0;
      double d = strtod(text, NULL);
      if (is(v, "nan")) d = NAN; /* one NaN: the printer writes "nan" */
      if (errno == ERANGE && isinf(d))
        return FAIL(p, v, "annotation value %s is out of range", text);
      ann.kind = TS_ANN_FLOAT;
      ann.f = d;
    } else {
      return FAIL(p, v,
                  "expected an annotation value (number or string) but "
                  "found %s",
                  describe(v, buf));
    }
    next(p);
    ann_list_set(p->a, out, ann);
    if (accept(p, ",")) continue;
    return expect_list_end(p, "}", "after the annotations");
  }
}

/* range = expr ["+:" expr]  (one expr: min is the zero of its type) */
static bool parse_range(parser *p, const char *what, ts_range *out) {
  char b1[32], b2[32];
  token *t = peek(p);
  ts_expr *x = parse_expr(p);
  if (!x) return false;
  ts_expr *min, *extent;
  if (accept(p, "+:")) {
    extent = parse_expr(p);
    if (!extent) return false;
    min = x;
  } else {
    extent = x;
    min = NULL;
  }
  if (!is_int_scalar(extent->dtype))
    return FAIL(p, t, "extent of %s must be a scalar integer, not %s", what,
                dtype_name(extent->dtype, b1));
  if (!min) min = ts_int(p->a, extent->dtype, 0);
  if (!ts_dtype_eq(min->dtype, extent->dtype))
    return FAIL(p, t, "min and extent of %s have different types: %s and %s",
                what, dtype_name(min->dtype, b1),
                dtype_name(extent->dtype, b2));
  int64_t ext;
  if (ts_expr_is_const_int(extent, &ext) && ext < 0)
    return FAIL(p, t, "extent of %s is negative", what);
  out->min = min;
  out->extent = extent;
  return true;
}

/* ---- statements ---- */

static ts_stmt *parse_stmt(parser *p);

/* body = "{" stmt* "}"; one statement is itself, several a seq. */
static ts_stmt *parse_body(parser *p, const char *what) {
  char ctx[96];
  snprintf(ctx, sizeof ctx, "to start the body of %s", what);
  if (!expect(p, "{", ctx)) return NULL;
  vec items = {0};
  while (!is(peek(p), "}")) {
    if (peek(p)->kind == TK_EOF) {
      snprintf(ctx, sizeof ctx, "to close the body of %s", what);
      expect(p, "}", ctx);
      return NULL;
    }
    ts_stmt *s = parse_stmt(p);
    if (!s) return NULL;
    vec_push(p, &items, s);
  }
  next(p);
  if (items.n == 1) return items.items[0];
  return ts_seq(p->a, (ts_stmt **)items.items, items.n);
}

/* for = "for" IDENT "in" "range" "(" range ")"
 *       ["serial" | "parallel" | "vectorized" | "unrolled"
 *        | "thread" "(" STRING ")"] ["annotate" annotations] body */
static ts_stmt *parse_for(parser *p) {
  char buf[64];
  token *nt;
  if (!expect_ident(p, "a loop variable after 'for'", &nt)) return NULL;
  char *name = new_name(p, nt, "loop variable");
  ts_range r;
  if (!name || !expect(p, "in", "after the loop variable") ||
      !expect(p, "range", "after 'in'") || !expect(p, "(", "after 'range'") ||
      !parse_range(p, "the loop", &r) ||
      !expect(p, ")", "to close the loop range"))
    return NULL;
  ts_for_kind kind = TS_FOR_SERIAL;
  const char *tag = NULL;
  if (accept(p, "serial"))
    kind = TS_FOR_SERIAL;
  else if (accept(p, "parallel"))
    kind = TS_FOR_PARALLEL;
  else if (accept(p, "vectorized"))
    kind = TS_FOR_VECTORIZED;
  else if (accept(p, "unrolled"))
    kind = TS_FOR_UNROLLED;
  else if (accept(p, "thread")) {
    kind = TS_FOR_THREAD;
    if (!expect(p, "(", "after 'thread'")) return NULL;
    token *s = peek(p);
    if (s->kind != TK_STRING)
      return FAIL_NULL(p, s, "expected a quoted thread tag but found %s",
                       describe(s, buf));
    next(p);
    tag = string_value(p, s);
    if (!tag[0]) return FAIL_NULL(p, s, "thread tag must not be empty");
    if (!expect(p, ")", "after the thread tag")) return NULL;
  }
  ann_list anns = {0};
  if (accept(p, "annotate") && !parse_annotations(p, &anns)) return NULL;
  int saved = open_scope(p);
  ts_expr *var = ts_var(p->a, name, r.extent->dtype);
  ts_stmt *body = NULL;
  if (declare(p, nt, name, var, NULL)) body = parse_body(p, "the loop");
  close_scope(p, saved);
  if (!body) return NULL;
  ts_stmt *s = ts_for(p->a, var, r.min, r.extent, kind, tag, body);
  s->u.loop.anns = anns;
  return s;
}

/* Skips a parenthesized group starting at "(" (for deferred regions). */
static bool skip_group(parser *p, const char *what) {
  token *start = peek(p);
  if (!expect(p, "(", what)) return false;
  int level = 1;
  while (level > 0) {
    token *t = next(p);
    if (t->kind == TK_EOF)
      return FAIL(p, start, "unterminated '(': no matching ')'");
    if (is(t, "("))
      level++;
    else if (is(t, ")"))
      level--;
  }
  return true;
}

/* regions = "(" [region ("," region)*] ")"
 * region = IDENT "[" [expr ["+:" expr] ("," expr ["+:" expr])*] "]" */
static bool parse_regions(parser *p, vec *out) {
  char b1[32];
  if (!expect(p, "(", "to start the regions")) return false;
  if (accept(p, ")")) return true;
  for (;;) {
    token *nt;
    if (!expect_ident(p, "a buffer name in the region list", &nt)) return false;
    if (out->n == MAX_LIST)
      return FAIL(p, nt, "more than %d regions", MAX_LIST);
    ts_buffer *b = find_buffer(p, nt);
    if (!b || !expect(p, "[", "after the buffer name")) return false;
    ts_region *r = ts_arena_alloc(p->a, sizeof *r);
    r->buffer = b;
    r->ranges = ts_arena_alloc(p->a, sizeof(ts_range) * TS_MAX_DIMS);
    if (!accept(p, "]")) {
      for (;;) {
        token *t = peek(p);
        if (r->ndim == b->ndim)
          return FAIL(p, t,
                      "too many ranges for buffer '%s' of %d "
                      "dimension%s",
                      b->name, b->ndim, b->ndim == 1 ? "" : "s");
        ts_expr *min = parse_expr(p), *extent;
        if (!min) return false;
        if (accept(p, "+:")) {
          extent = parse_expr(p);
          if (!extent) return false;
        } else {
          extent = ts_index(p->a, 1);
        }
        if (!is_int_scalar(min->dtype) || !is_int_scalar(extent->dtype))
          return FAIL(
              p, t,
              "region bounds of '%s' must be scalar integers, "
              "not %s",
              b->name,
              dtype_name(is_int_scalar(min->dtype) ? extent->dtype : min->dtype,
                         b1));
        r->ranges[r->ndim++] = (ts_range){min, extent};
        if (accept(p, ",")) continue;
        if (!expect_list_end(p, "]", "after the region")) return false;
        break;
      }
    }
    if (r->ndim != b->ndim)
      return FAIL(p, nt, "buffer '%s' has %d dimension%s but the region has %d",
                  b->name, b->ndim, b->ndim == 1 ? "" : "s", r->ndim);
    vec_push(p, out, r);
    if (accept(p, ",")) continue;
    return expect_list_end(p, ")", "after the regions");
  }
}

static ts_region *region_array(parser *p, const vec *v) {
  ts_region *r = ts_arena_alloc(p->a, sizeof *r * (size_t)(v->n ? v->n : 1));
  for (int i = 0; i < v->n; i++) r[i] = *(ts_region *)v->items[i];
  return r;
}

/* Parses deferred regions at token index `at` (after allocs are visible). */
static bool parse_regions_at(parser *p, int at, vec *out) {
  int resume = p->pos;
  p->pos = at;
  bool ok = parse_regions(p, out);
  p->pos = resume;
  return ok;
}

/* A name for a block or function: IDENT (any, keywords too) or STRING. */
static const char *parse_label(parser *p, const char *what) {
  token *t = peek(p);
  char buf[64];
  if (t->kind == TK_IDENT) {
    next(p);
    return tok_str(p, t);
  }
  if (t->kind == TK_STRING) {
    next(p);
    return string_value(p, t);
  }
  return FAIL_NULL(p, t, "expected a %s name but found %s", what,
                   describe(t, buf));
}

typedef struct iter_decl {
  token *name_tok;
  char *name;
  ts_iter_kind kind;
  ts_range dom;
  ts_expr *value;
} iter_decl;

/* iter = IDENT ":" ("spatial" | "reduce" | "opaque") "(" range ")" "=" expr */
static bool parse_iter(parser *p, iter_decl *d) {
  char b1[32], b2[32], buf[64];
  if (!expect_ident(p, "an iter var name", &d->name_tok)) return false;
  /* Names are checked again when the block scope opens. */
  d->name = tok_str(p, d->name_tok);
  if (ts_text_name_is_reserved(d->name))
    return FAIL(p, d->name_tok,
                "'%s' is a reserved word and cannot name an iter var", d->name);
  if (!expect(p, ":", "after the iter var name")) return false;
  token *k = peek(p);
  if (accept(p, "spatial"))
    d->kind = TS_ITER_SPATIAL;
  else if (accept(p, "reduce"))
    d->kind = TS_ITER_REDUCE;
  else if (accept(p, "opaque"))
    d->kind = TS_ITER_OPAQUE;
  else
    return FAIL(p, k, "expected 'spatial', 'reduce' or 'opaque' but found %s",
                describe(k, buf));
  token *vt;
  if (!expect(p, "(", "after the iter kind") ||
      !parse_range(p, "the iter var domain", &d->dom) ||
      !expect(p, ")", "to close the iter var domain") ||
      !expect(p, "=", "after the iter var domain"))
    return false;
  vt = peek(p);
  d->value = parse_expr(p);
  if (!d->value) return false;
  if (!ts_dtype_eq(d->value->dtype, d->dom.extent->dtype))
    return FAIL(p, vt,
                "value of iter var '%s' has type %s but its domain is %s",
                d->name, dtype_name(d->value->dtype, b1),
                dtype_name(d->dom.extent->dtype, b2));
  return true;
}

/* block = "block" label "(" [iter ("," iter)*] ")" ["where" expr] "{"
 *         ("reads" regions | "writes" regions | "alloc" IDENT ":" buftype
 *          | "annotate" annotations | "init" body)* stmt* "}"
 * Omitted reads/writes are inferred from the body. */
static ts_stmt *parse_block(parser *p) {
  char b1[32];
  const char *bname = parse_label(p, "block");
  if (!bname || !expect(p, "(", "after the block name")) return NULL;
  vec iters = {0};
  if (!accept(p, ")")) {
    for (;;) {
      if (iters.n == MAX_LIST)
        return FAIL_NULL(p, peek(p), "more than %d iter vars", MAX_LIST);
      iter_decl *d = ts_arena_alloc(p->a, sizeof *d);
      if (!parse_iter(p, d)) return NULL;
      vec_push(p, &iters, d);
      if (accept(p, ",")) continue;
      if (!expect_list_end(p, ")", "after the iter vars")) return NULL;
      break;
    }
  }
  ts_expr *pred = NULL;
  token *wt = peek(p);
  if (accept(p, "where")) {
    pred = parse_expr(p);
    if (!pred) return NULL;
    if (!ts_dtype_eq(pred->dtype, TS_BOOL))
      return FAIL_NULL(p, wt, "block predicate must be bool, not %s",
                       dtype_name(pred->dtype, b1));
  }
  token *open = peek(p);
  if (!expect(p, "{", "to start the block")) return NULL;
  ts_block *blk = ts_block_new(p->a, bname);
  int saved = open_scope(p);
  ts_stmt *result = NULL;
  ts_expr **values =
      ts_arena_alloc(p->a, sizeof *values * (size_t)(iters.n ? iters.n : 1));
  for (int i = 0; i < iters.n; i++) {
    iter_decl *d = iters.items[i];
    if (!new_name(p, d->name_tok, "iter var")) goto out;
    ts_expr *var = ts_var(p->a, d->name, d->dom.extent->dtype);
    if (!declare(p, d->name_tok, d->name, var, NULL)) goto out;
    ts_block_add_iter_var(p->a, blk, var, d->dom, d->kind);
    values[i] = d->value;
  }
  int reads_at = -1, writes_at = -1;
  bool seen_ann = false;
  for (;;) {
    token *t = peek(p);
    if (is(t, "reads") || is(t, "writes")) {
      int *at = is(t, "reads") ? &reads_at : &writes_at;
      if (*at >= 0) {
        FAIL(p, t, "%.*s(...) given twice in block '%s'", t->len, t->loc,
             bname);
        goto out;
      }
      next(p);
      *at = p->pos;
      if (!skip_group(p, is(t, "reads") ? "after 'reads'" : "after 'writes'"))
        goto out;
    } else if (accept(p, "alloc")) {
      token *nt;
      if (blk->n_allocs == MAX_LIST) {
        FAIL(p, t, "more than %d allocations in block '%s'", MAX_LIST, bname);
        goto out;
      }
      if (!expect_ident(p, "a buffer name after 'alloc'", &nt)) goto out;
      char *name = new_name(p, nt, "buffer");
      if (!name || !expect(p, ":", "after the buffer name")) goto out;
      ts_buffer *b = parse_buffer_type(p, name);
      if (!b || !declare(p, nt, name, NULL, b)) goto out;
      ts_block_add_alloc(p->a, blk, b);
    } else if (is(t, "annotate")) {
      if (seen_ann) {
        FAIL(p, t, "annotate given twice in block '%s'", bname);
        goto out;
      }
      seen_ann = true;
      next(p);
      if (!parse_annotations(p, &blk->anns)) goto out;
    } else if (is(t, "init")) {
      if (blk->init) {
        FAIL(p, t, "init given twice in block '%s'", bname);
        goto out;
      }
      next(p);
      if (!enter(p, t)) goto out;
      blk->init = parse_body(p, "init");
      leave(p);
      if (!blk->init) goto out;
    } else {
      break;
    }
  }
  vec reads = {0}, writes = {0};
  if (reads_at >= 0 && !parse_regions_at(p, reads_at, &reads)) goto out;
  if (writes_at >= 0 && !parse_regions_at(p, writes_at, &writes)) goto out;
  vec items = {0};
  while (!is(peek(p), "}")) {
    if (peek(p)->kind == TK_EOF) {
      FAIL(p, peek(p),
           "expected '}' to close block '%s' (opened at %d:%d) but "
           "found end of input",
           bname, open->line, open->col);
      goto out;
    }
    ts_stmt *s = parse_stmt(p);
    if (!s) goto out;
    vec_push(p, &items, s);
  }
  next(p);
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
  close_scope(p, saved);
  return result;
}

/* store = IDENT "[" [expr ("," expr)*] "]" "=" expr */
static ts_stmt *parse_store(parser *p) {
  char b1[32], b2[32];
  token *nt = next(p);
  sym *s = lookup(p, nt);
  if (!s) return FAIL_NULL(p, nt, "undefined buffer '%.*s'", nt->len, nt->loc);
  if (!s->buffer)
    return FAIL_NULL(p, nt,
                     "cannot assign to variable '%.*s'; only buffer "
                     "elements can be stored to",
                     nt->len, nt->loc);
  ts_buffer *b = s->buffer;
  vec idx = {0};
  if (!parse_indices(p, nt, b, &idx) ||
      !expect(p, "=", "after the stored element"))
    return NULL;
  token *vt = peek(p);
  ts_expr *value = parse_expr(p);
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
                     b->name, dtype_name(value->dtype, b1),
                     dtype_name(want, b2));
  return ts_store(p->a, b, (ts_expr **)idx.items, idx.n, value);
}

/* stmt = for | block | store | "if" expr body ["else" body]
 *      | "evaluate" expr | "let" IDENT "=" expr body
 *      | "allocate" IDENT ":" buftype body */
static ts_stmt *parse_stmt(parser *p) {
  char b1[32], buf[64];
  token *t = peek(p);
  if (!enter(p, t)) return NULL;
  ts_stmt *r = NULL;
  if (t->kind != TK_IDENT) {
    FAIL(p, t, "expected a statement but found %s", describe(t, buf));
  } else if (accept(p, "for")) {
    r = parse_for(p);
  } else if (accept(p, "block")) {
    r = parse_block(p);
  } else if (accept(p, "if")) {
    token *ct = peek(p);
    ts_expr *c = parse_expr(p);
    if (c && !ts_dtype_eq(c->dtype, TS_BOOL)) {
      FAIL(p, ct, "condition of 'if' must be bool, not %s",
           dtype_name(c->dtype, b1));
      c = NULL;
    }
    ts_stmt *then_s = c ? parse_body(p, "'if'") : NULL, *else_s = NULL;
    bool ok = then_s != NULL;
    if (ok && accept(p, "else")) {
      else_s = parse_body(p, "'else'");
      ok = else_s != NULL;
    }
    if (ok) r = ts_if(p->a, c, then_s, else_s);
  } else if (accept(p, "evaluate")) {
    ts_expr *e = parse_expr(p);
    if (e) r = ts_evaluate(p->a, e);
  } else if (accept(p, "let")) {
    token *nt;
    char *name = NULL;
    ts_expr *value = NULL;
    if (expect_ident(p, "a variable name after 'let'", &nt) &&
        (name = new_name(p, nt, "variable")) &&
        expect(p, "=", "after the let variable"))
      value = parse_expr(p);
    if (value) {
      int saved = open_scope(p);
      ts_expr *var = ts_var(p->a, name, value->dtype);
      ts_stmt *body =
          declare(p, nt, name, var, NULL) ? parse_body(p, "'let'") : NULL;
      close_scope(p, saved);
      if (body) r = ts_let_stmt(p->a, var, value, body);
    }
  } else if (accept(p, "allocate")) {
    token *nt;
    char *name = NULL;
    ts_buffer *b = NULL;
    if (expect_ident(p, "a buffer name after 'allocate'", &nt) &&
        (name = new_name(p, nt, "buffer")) &&
        expect(p, ":", "after the buffer name"))
      b = parse_buffer_type(p, name);
    if (b) {
      int saved = open_scope(p);
      ts_stmt *body =
          declare(p, nt, name, NULL, b) ? parse_body(p, "'allocate'") : NULL;
      close_scope(p, saved);
      if (body) r = ts_allocate(p->a, b, body);
    }
  } else if (is(t, "reads") || is(t, "writes") || is(t, "alloc") ||
             is(t, "annotate") || is(t, "init")) {
    FAIL(p, t, "'%.*s' belongs at the start of a block, before its statements",
         t->len, t->loc);
  } else if (is(t, "else")) {
    FAIL(p, t, "'else' without a matching 'if'");
  } else {
    char name[MAX_IDENT + 1];
    snprintf(name, sizeof name, "%.*s", t->len, t->loc);
    if (ts_text_name_is_reserved(name))
      FAIL(p, t, "expected a statement but found keyword '%s'", name);
    else
      r = parse_store(p);
  }
  leave(p);
  return r;
}

/* func = "func" label "(" [IDENT ":" buftype ("," IDENT ":" buftype)*] ")"
 *        ["attrs" annotations] body EOF */
static bool parse_func(parser *p) {
  char buf[64];
  if (!expect(p, "func", "at the start of the text")) return false;
  const char *name = parse_label(p, "function");
  if (!name) return false;
  ts_func_set_name(p->f, name);
  if (!expect(p, "(", "after the function name")) return false;
  if (!accept(p, ")")) {
    for (;;) {
      token *nt;
      if (p->f->n_params == MAX_LIST)
        return FAIL(p, peek(p), "more than %d parameters", MAX_LIST);
      if (!expect_ident(p, "a parameter name", &nt)) return false;
      char *pname = new_name(p, nt, "buffer");
      if (!pname || !expect(p, ":", "after the parameter name")) return false;
      ts_buffer *b = parse_buffer_type(p, pname);
      if (!b || !declare(p, nt, pname, NULL, b)) return false;
      ts_func_add_param(p->f, b);
      if (accept(p, ",")) continue;
      if (!expect_list_end(p, ")", "after the parameters")) return false;
      break;
    }
  }
  if (accept(p, "attrs") && !parse_annotations(p, &p->f->attrs)) return false;
  ts_stmt *body = parse_body(p, "the function");
  if (!body) return false;
  ts_func_set_body(p->f, body);
  if (peek(p)->kind != TK_EOF)
    return FAIL(p, peek(p),
                "expected end of input after the function but "
                "found %s",
                describe(peek(p), buf));
  return true;
}

/* ---- entry points ---- */

int ts_func_parse(const char *text, size_t len, const char *filename,
                  ts_func **out, ts_error *err) {
  if (out) *out = NULL;
  parser p;
  memset(&p, 0, sizeof p);
  p.file = filename ? filename : "<input>";
  p.err = err;
  if (!out || (!text && len))
    return TS_ERR(err, TS_EINVAL, "ts_func_parse: NULL text or output");
  if (len > MAX_INPUT) {
    fail_at(&p, 1, 1, "input of %zu bytes is larger than the limit of %u", len,
            MAX_INPUT);
    return TS_EPARSE;
  }
  p.src = text ? text : "";
  p.end = p.src + len;
  bool ok = lex(&p);
  if (ok) {
    p.f = ts_func_new("main");
    p.a = ts_func_arena(p.f);
    ok = parse_func(&p) && !p.failed;
  }
  free(p.toks);
  free(p.syms);
  if (!ok) {
    ts_func_free(p.f);
    return TS_EPARSE;
  }
  *out = p.f;
  return TS_OK;
}

int ts_func_parse_file(const char *path, ts_func **out, ts_error *err) {
  if (out) *out = NULL;
  FILE *fp = fopen(path, "rb");
  if (!fp)
    return TS_ERR(err, TS_EIO, "cannot open %s: %s", path, strerror(errno));
  strbuf sb;
  sb_init(&sb);
  char chunk[65536];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, fp)) > 0) {
    if (sb.len + n > MAX_INPUT) {
      fclose(fp);
      sb_free(&sb);
      return TS_ERR_AT(err, TS_EPARSE, 1, 1,
                       "%s:1:1: file is larger than the limit of %u bytes",
                       path, MAX_INPUT);
    }
    sb_putn(&sb, chunk, n);
  }
  bool bad = ferror(fp);
  fclose(fp);
  if (bad) {
    sb_free(&sb);
    return TS_ERR(err, TS_EIO, "cannot read %s", path);
  }
  int rc = ts_func_parse(sb.data, sb.len, path, out, err);
  sb_free(&sb);
  return rc;
}
