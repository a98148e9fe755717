/*
 * internal.h — node layouts and helpers shared by the files of tir/.
 *
 * Nothing outside tir/ includes this header: other modules go through the
 * constructors and accessors of tir.h, so these structs can change freely.
 */
#ifndef TESSERA_TIR_INTERNAL_H
#define TESSERA_TIR_INTERNAL_H

#include "tir.h"

#include <stdio.h>

/* ---- expressions ---- */

struct ts_expr {
  uint8_t kind; /* ts_expr_kind */
  ts_dtype dtype;
  union {
    int64_t int_value;  /* TS_EXPR_INT (bool: 0/1) */
    double float_value; /* TS_EXPR_FLOAT, already rounded to dtype */
    struct {
      const char *name;
    } var;
    struct {
      ts_expr *a, *b, *c; /* binary: a,b; not/cast/broadcast: a; select: a?b:c;
                             ramp: base a, stride b */
    } op;
    struct {
      ts_buffer *buffer;
      ts_expr **indices;
      int n_indices;
    } load; /* TS_EXPR_LOAD and TS_EXPR_ADDRESS_OF */
    struct {
      const char *name;
      ts_expr **args;
      int n_args;
    } call;
    struct {
      ts_expr *var, *value, *body;
    } let;
  } u;
};

/* ---- buffers ---- */

struct ts_buffer {
  const char *name;
  ts_dtype dtype;
  int ndim;
  int64_t shape[TS_MAX_DIMS];
  int64_t strides[TS_MAX_DIMS]; /* valid when has_strides */
  bool has_strides;
  const char *scope; /* "global", "local", "shared", "amx.tile", ... */
  int align;         /* bytes */
};

/* ---- annotations (loops, blocks, functions) ---- */

typedef struct ann_list {
  ts_annotation *items;
  int n, cap;
} ann_list;

void ann_list_set(ts_arena *a, ann_list *l, ts_annotation ann);
bool ann_list_remove(ann_list *l, const char *key);
const ts_annotation *ann_list_find(const ann_list *l, const char *key);

/* ---- blocks ---- */

typedef struct iter_var {
  ts_expr *var;
  ts_range dom;
  uint8_t kind; /* ts_iter_kind */
} iter_var;

struct ts_block {
  const char *name;
  iter_var *iters;
  int n_iters, cap_iters;
  ts_region *reads;
  int n_reads;
  ts_region *writes;
  int n_writes;
  ts_buffer **allocs;
  int n_allocs, cap_allocs;
  ts_stmt *init; /* NULL when absent */
  ts_stmt *body;
  ann_list anns;
};

/* ---- statements ---- */

struct ts_stmt {
  uint8_t kind; /* ts_stmt_kind */
  union {
    struct {
      ts_expr *var, *min, *extent;
      uint8_t kind; /* ts_for_kind */
      const char *thread_tag;
      ann_list anns;
      ts_stmt *body;
    } loop;
    struct {
      ts_block *block;
      ts_expr **values;
      int n_values;
      ts_expr *predicate; /* NULL = true */
    } realize;
    struct {
      ts_buffer *buffer;
      ts_expr **indices;
      int n_indices;
      ts_expr *value;
    } store;
    struct {
      ts_stmt **items;
      int n;
    } seq;
    struct {
      ts_expr *cond;
      ts_stmt *then_s, *else_s;
    } cond;
    struct {
      ts_expr *value;
    } eval;
    struct {
      ts_expr *var, *value;
      ts_stmt *body;
    } let;
    struct {
      ts_buffer *buffer;
      ts_stmt *body;
    } alloc;
  } u;
};

/* ---- functions ---- */

struct ts_func {
  ts_arena *arena;
  const char *name;
  ts_buffer **params;
  int n_params, cap_params;
  ts_stmt *body;
  ann_list attrs;
};

/* ---- a growable malloc'd string, used by the printer and messages ---- */

typedef struct strbuf {
  char *data;
  size_t len, cap;
} strbuf;

void sb_init(strbuf *sb);
void sb_free(strbuf *sb);
void sb_putc(strbuf *sb, char c);
void sb_puts(strbuf *sb, const char *s);
void sb_putn(strbuf *sb, const char *s, size_t n);
void sb_printf(strbuf *sb, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Returns the malloc'd NUL-terminated string and leaves sb empty. */
char *sb_take(strbuf *sb);

/* Copies an array of n pointers into the arena (NULL when n == 0). */
void *arena_copy_ptrs(ts_arena *a, void *const *items, int n);

/* Writes the shortest decimal text of v that reads back to the same value of
 * dtype t (float16/bfloat16/float32/float64); "inf", "-inf", "nan". */
void format_float(char *buf, size_t cap, double v, ts_dtype t);
/* Rounds a double to the precision of float dtype t. */
double round_to_dtype(double v, ts_dtype t);
/* Wraps an integer to the width and signedness of t (bool: 0/1). */
int64_t wrap_int(int64_t v, ts_dtype t);

#endif /* TESSERA_TIR_INTERNAL_H */
