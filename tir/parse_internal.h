/*
 * parse_internal.h — what the files of the text parser share: its limits,
 * the parser state, tokens, symbols and arena vectors, and the helpers one
 * file provides to the others.
 *
 * The parser is three files: parse_lex.c (lexer, token helpers, literals,
 * scopes and the symbol table), parse_expr.c (expressions) and parser.c
 * (buffer types, statements, functions and the entry points of tir.h).
 * Only they include this header. Its functions and types are prefixed tp_
 * so that no generic name (next, peek, lookup, ...) leaks out of the
 * library.
 */
#ifndef TESSERA_TIR_PARSE_INTERNAL_H
#define TESSERA_TIR_PARSE_INTERNAL_H

#include "internal.h"

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

typedef enum tp_tok_kind {
  TK_EOF,
  TK_IDENT,
  TK_INT,    /* digits only */
  TK_FLOAT,  /* digits with '.' or an exponent */
  TK_STRING, /* "..." (escapes checked by the lexer) */
  TK_PUNCT,
} tp_tok_kind;

typedef struct tp_token {
  const char *loc; /* in the input */
  int len;
  int line, col; /* 1-based */
  int kind;      /* tp_tok_kind */
} tp_token;

typedef struct tp_sym {
  const char *name;
  ts_expr *var;      /* a var, or */
  ts_buffer *buffer; /* a buffer */
  int line, col;     /* where it was declared */
} tp_sym;

typedef struct tp_parser {
  const char *file;
  const char *src, *end;
  tp_token *toks;
  int n_toks, cap_toks, pos;
  ts_func *f;
  ts_arena *a;
  tp_sym *syms; /* visible names, innermost last */
  int n_syms, cap_syms;
  int scope_start; /* first sym of the innermost scope */
  int depth;
  bool failed;
  ts_error *err;
} tp_parser;

/* ---- growable arrays in the arena ---- */

typedef struct tp_vec {
  void **items;
  int n, cap;
} tp_vec;

/* ---- errors (parse_lex.c) ---- */

bool tp_fail_at(tp_parser *p, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The error at token t. */
#define FAIL(p, t, ...) tp_fail_at((p), (t)->line, (t)->col, __VA_ARGS__)
/* The same, as a NULL result. */
#define FAIL_NULL(p, t, ...) (FAIL((p), (t), __VA_ARGS__), NULL)
const char *tp_describe(const tp_token *t, char buf[64]);

/* ---- lexer and token helpers (parse_lex.c) ---- */

bool tp_lex(tp_parser *p);
tp_token *tp_peek(tp_parser *p);
tp_token *tp_peek_at(tp_parser *p, int k);
tp_token *tp_next(tp_parser *p);
bool tp_is(const tp_token *t, const char *s);
bool tp_accept(tp_parser *p, const char *s);
bool tp_expect(tp_parser *p, const char *s, const char *context);
bool tp_expect_list_end(tp_parser *p, const char *close, const char *context);
bool tp_expect_ident(tp_parser *p, const char *what, tp_token **out);
char *tp_tok_str(tp_parser *p, const tp_token *t);
char *tp_string_value(tp_parser *p, const tp_token *t);
bool tp_int_value(const tp_token *t, uint64_t limit, uint64_t *out);
const char *tp_dtype_name(ts_dtype t, char buf[32]);

/* ---- nesting, scopes, arrays (parse_lex.c) ---- */

bool tp_enter(tp_parser *p, const tp_token *t);
void tp_leave(tp_parser *p);
int tp_open_scope(tp_parser *p);
void tp_close_scope(tp_parser *p, int saved);
tp_sym *tp_lookup(tp_parser *p, const tp_token *t);
char *tp_new_name(tp_parser *p, const tp_token *t, const char *what);
bool tp_declare(tp_parser *p, const tp_token *t, const char *name, ts_expr *var,
                ts_buffer *buffer);
void tp_vec_push(tp_parser *p, tp_vec *v, void *item);

/* ---- expressions (parse_expr.c) ---- */

bool tp_is_int_scalar(ts_dtype t);
bool tp_parse_dtype(tp_parser *p, ts_dtype *out);
bool tp_parse_indices(tp_parser *p, const tp_token *name, ts_buffer *b,
                      tp_vec *out);
ts_buffer *tp_find_buffer(tp_parser *p, const tp_token *t);
ts_expr *tp_parse_expr(tp_parser *p);

#endif
