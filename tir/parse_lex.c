/*
 * parse_lex.c — the front of the text parser: errors, the lexer, token
 * helpers, string and integer literals, nesting depth, scopes and the
 * symbol table, and growable arrays in the arena.
 */
#include "parse_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- errors ---- */

/* Records the first error (later ones are consequences) at line:col of
 * the input, prefixed with FILE:LINE:COL, and returns false. */
bool tp_fail_at(tp_parser *p, int line, int col, const char *fmt, ...) {
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

/* "'tok'" or "end of input", for messages. */
const char *tp_describe(const tp_token *t, char buf[64]) {
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

static bool add_token(tp_parser *p, int kind, const char *loc, int len,
                      int line, int col) {
  if (p->n_toks == MAX_TOKENS)
    return tp_fail_at(p, line, col, "input has more than %d tokens",
                      MAX_TOKENS);
  if (p->n_toks == p->cap_toks) {
    int cap = p->cap_toks ? p->cap_toks * 2 : 256;
    tp_token *t = ts_realloc(p->toks, sizeof *t * (size_t)cap);
    if (!t) return tp_fail_at(p, line, col, "out of memory reading the input");
    p->toks = t;
    p->cap_toks = cap;
  }
  p->toks[p->n_toks++] = (tp_token){loc, len, line, col, kind};
  return true;
}

static const char *const puncts[] = {
    "+:", "==", "!=", "<=", ">=", "&&", "||", "(", ")", "[", "]", "{", "}",
    ",",  ":",  "=",  "<",  ">",  "+",  "-",  "*", "/", "%", "!", "&",
};

/* Splits the whole input into tokens (the last is TK_EOF). */
bool tp_lex(tp_parser *p) {
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
        return tp_fail_at(p, line, col, "identifier longer than %d characters",
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
          return tp_fail_at(p, line, col,
                            "malformed number: expected digits after '.'");
        while (q < end && is_digit(*q)) q++;
      }
      if (q < end && (*q == 'e' || *q == 'E')) {
        kind = TK_FLOAT;
        q++;
        if (q < end && (*q == '+' || *q == '-')) q++;
        if (q >= end || !is_digit(*q))
          return tp_fail_at(
              p, line, col,
              "malformed number: expected digits in the exponent");
        while (q < end && is_digit(*q)) q++;
      }
      if (q < end && (is_ident_char(*q) || *q == '.'))
        return tp_fail_at(p, line, col, "malformed number '%.*s'",
                          (int)(q - s + 1 > 40 ? 40 : q - s + 1), s);
      if (q - s > 400)
        return tp_fail_at(p, line, col, "number longer than 400 characters");
      if (!add_token(p, kind, s, (int)(q - s), line, col)) return false;
      s = q;
      continue;
    }
    if (c == '"') {
      const char *q = s + 1;
      for (;;) {
        if (q >= end || *q == '\n')
          return tp_fail_at(p, line, col, "unterminated string");
        if (*q == '"') break;
        if (*q == '\\') {
          char e = q + 1 < end ? q[1] : 0;
          if (e == '"' || e == '\\' || e == 'n' || e == 't') {
            q += 2;
          } else if (e == 'x' && q + 3 < end && hex_value(q[2]) >= 0 &&
                     hex_value(q[3]) >= 0) {
            if (hex_value(q[2]) == 0 && hex_value(q[3]) == 0)
              return tp_fail_at(p, line, (int)(q - line_start) + 1,
                                "'\\x00' is not allowed in a string");
            q += 4;
          } else {
            return tp_fail_at(p, line, (int)(q - line_start) + 1,
                              "bad escape in string (use \\\" \\\\ \\n \\t or "
                              "\\xHH)");
          }
        } else {
          q++;
        }
        if (q - s > MAX_STRING)
          return tp_fail_at(p, line, col, "string longer than %d bytes",
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
      return tp_fail_at(p, line, col, "unexpected character '%c'", c);
    return tp_fail_at(p, line, col, "unexpected byte 0x%02x", (unsigned char)c);
  }
  return add_token(p, TK_EOF, end, 0, line, (int)(end - line_start) + 1);
}

/* ---- token helpers ---- */

tp_token *tp_peek(tp_parser *p) { return &p->toks[p->pos]; }
tp_token *tp_peek_at(tp_parser *p, int k) {
  int i = p->pos + k;
  return &p->toks[i < p->n_toks ? i : p->n_toks - 1];
}
tp_token *tp_next(tp_parser *p) {
  tp_token *t = &p->toks[p->pos];
  if (t->kind != TK_EOF) p->pos++;
  return t;
}
bool tp_is(const tp_token *t, const char *s) {
  size_t n = strlen(s);
  return (t->kind == TK_PUNCT || t->kind == TK_IDENT) && (size_t)t->len == n &&
         memcmp(t->loc, s, n) == 0;
}
bool tp_accept(tp_parser *p, const char *s) {
  if (!tp_is(tp_peek(p), s)) return false;
  tp_next(p);
  return true;
}
/* Consumes `s` or fails with "expected 's' CONTEXT but found ...". */
bool tp_expect(tp_parser *p, const char *s, const char *context) {
  if (tp_accept(p, s)) return true;
  char buf[64];
  return FAIL(p, tp_peek(p), "expected '%s' %s but found %s", s, context,
              tp_describe(tp_peek(p), buf));
}
/* The end of a comma-separated list: "expected ',' or ')' CONTEXT". */
bool tp_expect_list_end(tp_parser *p, const char *close, const char *context) {
  if (tp_accept(p, close)) return true;
  char buf[64];
  return FAIL(p, tp_peek(p), "expected ',' or '%s' %s but found %s", close,
              context, tp_describe(tp_peek(p), buf));
}
bool tp_expect_ident(tp_parser *p, const char *what, tp_token **out) {
  tp_token *t = tp_peek(p);
  if (t->kind != TK_IDENT) {
    char buf[64];
    return FAIL(p, t, "expected %s but found %s", what, tp_describe(t, buf));
  }
  *out = tp_next(p);
  return true;
}
char *tp_tok_str(tp_parser *p, const tp_token *t) {
  char *s = ts_arena_strndup(p->a, t->loc, (size_t)t->len);
  if (!s) p->failed = true; /* out of memory (counted) */
  return s;
}

/* Decodes a string token into the arena. */
char *tp_string_value(tp_parser *p, const tp_token *t) {
  char *out = ts_arena_alloc(p->a, (size_t)t->len);
  if (!out) {
    p->failed = true; /* out of memory (counted) */
    return NULL;
  }
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
bool tp_int_value(const tp_token *t, uint64_t limit, uint64_t *out) {
  uint64_t v = 0;
  for (int i = 0; i < t->len; i++) {
    uint64_t d = (uint64_t)(t->loc[i] - '0');
    if (v > (limit - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

const char *tp_dtype_name(ts_dtype t, char buf[32]) {
  return ts_dtype_str(t, buf);
}

/* ---- nesting and scopes ---- */

bool tp_enter(tp_parser *p, const tp_token *t) {
  if (++p->depth > MAX_DEPTH)
    return FAIL(p, t, "nesting deeper than %d levels", MAX_DEPTH);
  return true;
}
void tp_leave(tp_parser *p) { p->depth--; }

int tp_open_scope(tp_parser *p) {
  int saved = p->scope_start;
  p->scope_start = p->n_syms;
  return saved;
}
void tp_close_scope(tp_parser *p, int saved) {
  p->n_syms = p->scope_start;
  p->scope_start = saved;
}

tp_sym *tp_lookup(tp_parser *p, const tp_token *t) {
  for (int i = p->n_syms - 1; i >= 0; i--)
    if (strlen(p->syms[i].name) == (size_t)t->len &&
        memcmp(p->syms[i].name, t->loc, (size_t)t->len) == 0)
      return &p->syms[i];
  return NULL;
}

/* Checks that the name at t may be defined here (not reserved, not already
 * in the innermost scope) and returns it in the arena, or NULL. */
char *tp_new_name(tp_parser *p, const tp_token *t, const char *what) {
  char *name = tp_tok_str(p, t);
  if (!name) return NULL;
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

bool tp_declare(tp_parser *p, const tp_token *t, const char *name, ts_expr *var,
                ts_buffer *buffer) {
  if (p->n_syms == MAX_NAMES)
    return FAIL(p, t, "more than %d names visible at once", MAX_NAMES);
  if (p->n_syms == p->cap_syms) {
    int cap = p->cap_syms ? p->cap_syms * 2 : 64;
    tp_sym *s = ts_realloc(p->syms, sizeof *s * (size_t)cap);
    if (!s) return FAIL(p, t, "out of memory");
    p->syms = s;
    p->cap_syms = cap;
  }
  p->syms[p->n_syms++] = (tp_sym){name, var, buffer, t->line, t->col};
  return true;
}

/* ---- growable arrays in the arena ---- */

void tp_vec_push(tp_parser *p, tp_vec *v, void *item) {
  if (v->n == v->cap) {
    int cap = v->cap ? v->cap * 2 : 8;
    void **items = ts_arena_alloc(p->a, sizeof *items * (size_t)cap);
    if (!items) {
      p->failed = true; /* out of memory (counted); the item is dropped */
      return;
    }
    if (v->n) memcpy(items, v->items, sizeof *items * (size_t)v->n);
    v->items = items;
    v->cap = cap;
  }
  v->items[v->n++] = item;
}
