/*
 * test_text.c — the text form: the printer's canonical output, the parser,
 * and the round trip print(parse(print(f))) == print(f) with
 * ts_func_equal(parse(print(f)), f), for hand-built functions covering every
 * expression, statement and loop kind, annotations, buffer options, vector
 * types, float special values, name collisions, deep nesting and operator
 * precedence; the golden files in tests/tir/golden; and every operator of
 * the library.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tir/tir.h"

/* ---- helpers ---- */

/* Parses text, failing the test with the parser's message on error. */
static ts_func *parse_ok(const char *text) {
  ts_func *f = NULL;
  ts_error err;
  ts_error_clear(&err);
  int rc = ts_func_parse(text, strlen(text), "test", &f, &err);
  if (rc != TS_OK) {
    print_error("parse failed: %s\n--- text ---\n%s\n", err.msg, text);
    fail();
  }
  assert_non_null(f);
  return f;
}

/* Checks the round trip of f; returns its printed text (caller frees). */
static char *roundtrip(const ts_func *f) {
  char *text = ts_func_print(f);
  ts_func *g = parse_ok(text);
  char *again = ts_func_print(g);
  if (strcmp(text, again) != 0) {
    print_error("reprint differs\n--- first ---\n%s--- second ---\n%s", text,
                again);
    fail();
  }
  assert_true(ts_func_equal(f, g));
  assert_true(ts_func_equal(g, f));
  /* Printing is stable: the same function prints the same bytes. */
  char *third = ts_func_print(f);
  assert_string_equal(text, third);
  free(third);
  free(again);
  ts_func_free(g);
  return text;
}

/* Parses and prints text, which must come back byte for byte. */
static void canonical(const char *text) {
  ts_func *f = parse_ok(text);
  char *out = ts_func_print(f);
  if (strcmp(out, text) != 0) {
    print_error("not canonical\n--- given ---\n%s--- printed ---\n%s", text,
                out);
    fail();
  }
  free(out);
  free(roundtrip(f));
  ts_func_free(f);
}

static ts_buffer *buf1(ts_arena *a, const char *name, ts_dtype t, int64_t n) {
  return ts_buffer_new(a, name, t, &n, 1);
}
static ts_buffer *buf2(ts_arena *a, const char *name, ts_dtype t, int64_t m,
                       int64_t n) {
  int64_t shape[2] = {m, n};
  return ts_buffer_new(a, name, t, shape, 2);
}
static ts_stmt *loop(ts_arena *a, ts_expr *var, int64_t extent, ts_stmt *body) {
  return ts_for(a, var, ts_index(a, 0), ts_index(a, extent), TS_FOR_SERIAL,
                NULL, body);
}
static ts_stmt *seq2(ts_arena *a, ts_stmt *x, ts_stmt *y) {
  ts_stmt *items[2] = {x, y};
  return ts_seq(a, items, 2);
}
/* A root block around body, with empty regions. */
static ts_stmt *root(ts_arena *a, ts_stmt *body) {
  ts_block *b = ts_block_new(a, "root");
  ts_block_set_body(b, body);
  return ts_block_realize(a, b, NULL, 0, NULL);
}

/* Marks the expression kinds used in a function. */
static void mark_expr(void *ctx, ts_expr *e) {
  bool *seen = ctx;
  seen[ts_expr_kind_of(e)] = true;
}
static void visit_expr(void *ctx, ts_expr *e) {
  ts_expr_walk(e, mark_expr, ctx);
}
typedef struct kinds {
  bool expr[TS_EXPR_KIND_COUNT];
  bool stmt[TS_STMT_KIND_COUNT];
  bool loop[TS_FOR_THREAD + 1];
} kinds;
static bool enter_stmt(void *ctx, ts_stmt *s) {
  kinds *k = ctx;
  k->stmt[ts_stmt_kind_of(s)] = true;
  if (ts_stmt_kind_of(s) == TS_STMT_FOR) k->loop[ts_for_kind_of(s)] = true;
  if (ts_stmt_kind_of(s) == TS_STMT_STORE)
    visit_expr(k->expr, ts_store_value(s));
  return true;
}
static void visit_expr_k(void *ctx, ts_expr *e) {
  kinds *k = ctx;
  visit_expr(k->expr, e);
}
static void collect_kinds(const ts_func *f, kinds *k) {
  memset(k, 0, sizeof *k);
  ts_visitor v = {enter_stmt, NULL, visit_expr_k, k};
  ts_stmt_walk(ts_func_body(f), &v);
}

/* ---- the example of the text form ---- */

static const char matmul_text[] =
    "func matmul(A: float32[128, 128], B: float32[128, 128], C: float32[128, "
    "128]) {\n"
    "  block root() {\n"
    "    reads(A[0 +: 128, 0 +: 128], B[0 +: 128, 0 +: 128], C[0 +: 128, 0 "
    "+: 128])\n"
    "    writes(C[0 +: 128, 0 +: 128])\n"
    "    for i in range(128) {\n"
    "      for j in range(128) {\n"
    "        for k in range(128) {\n"
    "          block C(vi: spatial(128) = i, vj: spatial(128) = j, vk: "
    "reduce(128) = k) {\n"
    "            reads(C[vi, vj], A[vi, vk], B[vk, vj])\n"
    "            writes(C[vi, vj])\n"
    "            init {\n"
    "              C[vi, vj] = float32(0)\n"
    "            }\n"
    "            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

static ts_region full_region(ts_arena *a, ts_buffer *b) {
  ts_region r = {b, ts_buffer_ndim(b),
                 ts_arena_alloc(a, sizeof(ts_range) * TS_MAX_DIMS)};
  for (int d = 0; d < r.ndim; d++)
    r.ranges[d] = (ts_range){ts_index(a, 0), ts_index(a, ts_buffer_dim(b, d))};
  return r;
}
static ts_region point_region(ts_arena *a, ts_buffer *b, ts_expr *x,
                              ts_expr *y) {
  ts_region r = {b, 2, ts_arena_alloc(a, sizeof(ts_range) * 2)};
  r.ranges[0] = (ts_range){x, ts_index(a, 1)};
  r.ranges[1] = (ts_range){y, ts_index(a, 1)};
  return r;
}

static ts_func *build_matmul(void) {
  ts_func *f = ts_func_new("matmul");
  ts_arena *a = ts_func_arena(f);
  ts_buffer *A = buf2(a, "A", TS_FLOAT32, 128, 128);
  ts_buffer *B = buf2(a, "B", TS_FLOAT32, 128, 128);
  ts_buffer *C = buf2(a, "C", TS_FLOAT32, 128, 128);
  ts_func_add_param(f, A);
  ts_func_add_param(f, B);
  ts_func_add_param(f, C);
  ts_expr *i = ts_var(a, "i", TS_INDEX), *j = ts_var(a, "j", TS_INDEX),
          *k = ts_var(a, "k", TS_INDEX);
  ts_expr *vi = ts_var(a, "vi", TS_INDEX), *vj = ts_var(a, "vj", TS_INDEX),
          *vk = ts_var(a, "vk", TS_INDEX);
  ts_block *blk = ts_block_new(a, "C");
  ts_range dom = {ts_index(a, 0), ts_index(a, 128)};
  ts_block_add_iter_var(a, blk, vi, dom, TS_ITER_SPATIAL);
  ts_block_add_iter_var(a, blk, vj, dom, TS_ITER_SPATIAL);
  ts_block_add_iter_var(a, blk, vk, dom, TS_ITER_REDUCE);
  ts_expr *cij[2] = {vi, vj}, *aik[2] = {vi, vk}, *bkj[2] = {vk, vj};
  ts_region reads[3] = {point_region(a, C, vi, vj), point_region(a, A, vi, vk),
                        point_region(a, B, vk, vj)};
  ts_region writes[1] = {point_region(a, C, vi, vj)};
  ts_block_set_regions(a, blk, reads, 3, writes, 1);
  ts_block_set_init(blk, ts_store(a, C, cij, 2, ts_float(a, TS_FLOAT32, 0)));
  ts_block_set_body(blk, ts_store(a, C, cij, 2,
                                  ts_add(a, ts_load(a, C, cij, 2),
                                         ts_mul(a, ts_load(a, A, aik, 2),
                                                ts_load(a, B, bkj, 2)))));
  ts_expr *vals[3] = {i, j, k};
  ts_stmt *nest =
      loop(a, i, 128,
           loop(a, j, 128,
                loop(a, k, 128, ts_block_realize(a, blk, vals, 3, NULL))));
  ts_block *rb = ts_block_new(a, "root");
  ts_region rr[3] = {full_region(a, A), full_region(a, B), full_region(a, C)};
  ts_region rw[1] = {full_region(a, C)};
  ts_block_set_regions(a, rb, rr, 3, rw, 1);
  ts_block_set_body(rb, nest);
  ts_func_set_body(f, ts_block_realize(a, rb, NULL, 0, NULL));
  return f;
}

static void test_matmul_example(void **state) {
  (void)state;
  ts_func *f = build_matmul();
  char *text = roundtrip(f);
  assert_string_equal(text, matmul_text);
  free(text);
  ts_func_free(f);
  canonical(matmul_text);
}

/* ---- every expression and statement kind ---- */

static ts_func *build_all_kinds(void) {
  ts_func *f = ts_func_new("kinds");
  ts_arena *a = ts_func_arena(f);
  ts_buffer *A = buf1(a, "A", TS_FLOAT32, 64);
  ts_buffer *B = buf2(a, "B", TS_INT32, 4, 4);
  ts_buffer *M = ts_buffer_new(a, "M", TS_BOOL, NULL, 0);
  ts_func_add_param(f, A);
  ts_func_add_param(f, B);
  ts_func_add_param(f, M);
  ts_expr *i = ts_var(a, "i", TS_INDEX);
  ts_expr *x = ts_var(a, "x", TS_FLOAT32);
  ts_expr *y = ts_var(a, "y", TS_INDEX);
  ts_expr *c2 = ts_index(a, 2), *c3 = ts_index(a, 3);
  ts_expr *ai = ts_load(a, A, &i, 1);
  ts_expr *bij[2] = {i, c2};
  ts_expr *bl = ts_load(a, B, bij, 2);
  ts_expr *m = ts_load(a, M, NULL, 0);
  ts_expr *one_i32 = ts_int(a, TS_INT32, 1);
  ts_stmt *evals[48];
  int n = 0;
  ts_expr_kind bins[] = {
      TS_EXPR_ADD,      TS_EXPR_SUB,      TS_EXPR_MUL, TS_EXPR_DIV, TS_EXPR_MOD,
      TS_EXPR_FLOORDIV, TS_EXPR_FLOORMOD, TS_EXPR_MIN, TS_EXPR_MAX, TS_EXPR_EQ,
      TS_EXPR_NE,       TS_EXPR_LT,       TS_EXPR_LE,  TS_EXPR_GT,  TS_EXPR_GE};
  for (size_t k = 0; k < sizeof bins / sizeof bins[0]; k++)
    evals[n++] = ts_evaluate(a, ts_binary_raw(a, bins[k], bl, one_i32));
  ts_expr *cmp = ts_binary_raw(a, TS_EXPR_LT, i, c3);
  evals[n++] = ts_evaluate(
      a, ts_binary_raw(a, TS_EXPR_OR, ts_binary_raw(a, TS_EXPR_AND, cmp, m),
                       ts_not_raw(a, m)));
  evals[n++] = ts_evaluate(a, ts_select_raw(a, cmp, ai, x));
  evals[n++] = ts_evaluate(a, ts_cast_raw(a, TS_FLOAT64, bl));
  ts_expr *ramp = ts_ramp(a, ts_mul(a, i, ts_index(a, 4)), ts_index(a, 1), 4);
  evals[n++] = ts_evaluate(a, ts_load(a, A, &ramp, 1));
  evals[n++] = ts_evaluate(a, ts_broadcast(a, x, 8));
  ts_expr *args[3] = {ai, x, ts_float(a, TS_FLOAT32, 0.25)};
  evals[n++] = ts_evaluate(a, ts_call(a, TS_FLOAT32, "fma", args, 3));
  evals[n++] = ts_evaluate(a, ts_call(a, TS_FLOAT32, "exp", args, 1));
  ts_expr *ite[3] = {cmp, ai, ts_float(a, TS_FLOAT32, -1)};
  evals[n++] = ts_evaluate(a, ts_call(a, TS_FLOAT32, "if_then_else", ite, 3));
  ts_expr *addr = ts_address_of(a, B, bij, 2);
  ts_expr *ext[3] = {addr, i, ts_int(a, TS_UINT8, 200)};
  evals[n++] = ts_evaluate(a, ts_call(a, TS_INT32, "tile.load", ext, 3));
  evals[n++] = ts_evaluate(a, ts_call(a, TS_HANDLE, "noargs", NULL, 0));
  /* An intrinsic whose arguments break its rule prints as call<...>. */
  ts_expr *bad[1] = {i};
  evals[n++] = ts_evaluate(a, ts_call(a, TS_INDEX, "sqrt", bad, 1));
  evals[n++] = ts_evaluate(a, ts_let(a, y, ts_binary_raw(a, TS_EXPR_ADD, i, c2),
                                     ts_binary_raw(a, TS_EXPR_MUL, y, y)));
  /* One flat list: nested seqs print flat and would not reparse equal. */
  evals[n++] = ts_store(a, A, &i, 1, x);
  ts_expr *c4[2] = {c2, c3};
  evals[n++] = ts_if(a, cmp, ts_store(a, B, c4, 2, ts_int(a, TS_INT32, -5)),
                     ts_allocate(a, buf1(a, "T", TS_FLOAT16, 8),
                                 ts_store(a, M, NULL, 0, ts_bool(a, false))));
  ts_stmt *let_s = ts_let_stmt(a, x, ai, ts_seq(a, evals, n));
  ts_stmt *if_only = ts_if(a, m, ts_evaluate(a, c3), NULL);
  ts_func_set_body(f, root(a, seq2(a, loop(a, i, 16, let_s), if_only)));
  return f;
}

static void test_every_kind(void **state) {
  (void)state;
  ts_func *f = build_all_kinds();
  char *text = roundtrip(f);
  ts_func *g = parse_ok(text);
  kinds k;
  collect_kinds(g, &k);
  for (int i = 0; i < TS_EXPR_KIND_COUNT; i++) {
    if (!k.expr[i]) print_error("expr kind %s missing\n", ts_expr_kind_name(i));
    assert_true(k.expr[i]);
  }
  for (int i = 0; i < TS_STMT_KIND_COUNT; i++) {
    if (!k.stmt[i]) print_error("stmt kind %s missing\n", ts_stmt_kind_name(i));
    assert_true(k.stmt[i]);
  }
  /* Specific forms. */
  assert_non_null(strstr(text, "evaluate call<int64>(\"sqrt\", i)"));
  assert_non_null(
      strstr(text, "call<int32>(\"tile.load\", &B[i, 2], i, uint8(200))"));
  assert_non_null(strstr(text, "evaluate call<handle>(\"noargs\")"));
  assert_non_null(strstr(text, "evaluate fma(A[i], x, float32(0.25))"));
  assert_non_null(
      strstr(text, "evaluate if_then_else(i < 3, A[i], float32(-1))"));
  assert_non_null(strstr(text, "evaluate (let y = i + 2 in y * y)"));
  assert_non_null(strstr(text, "evaluate i < 3 && M[] || !M[]"));
  assert_non_null(strstr(text, "evaluate A[ramp(i * 4, 1, 4)]"));
  assert_non_null(strstr(text, "evaluate broadcast(x, 8)"));
  assert_non_null(strstr(text, "evaluate floormod(B[i, 2], int32(1))"));
  assert_non_null(
      strstr(text, "        } else {\n          allocate T: float16[8] {\n"));
  assert_non_null(strstr(text, "M[] = false"));
  free(text);
  ts_func_free(g);
  ts_func_free(f);
}

static void test_statement_lists(void **state) {
  (void)state;
  ts_func *f = ts_func_new("lists");
  ts_arena *a = ts_func_arena(f);
  ts_buffer *A = buf1(a, "A", TS_INT64, 4);
  ts_func_add_param(f, A);
  ts_expr *zero = ts_index(a, 0);
  /* Nested seqs print flat; an empty seq prints as an empty body. */
  ts_stmt *inner =
      seq2(a, ts_store(a, A, &zero, 1, ts_index(a, 1)), ts_seq(a, NULL, 0));
  ts_stmt *outer = seq2(a, inner, ts_store(a, A, &zero, 1, ts_index(a, 2)));
  ts_expr *i = ts_var(a, "i", TS_INDEX);
  ts_func_set_body(f, seq2(a, outer, loop(a, i, 4, ts_seq(a, NULL, 0))));
  char *text = ts_func_print(f);
  assert_string_equal(text, "func lists(A: int64[4]) {\n"
                            "  A[0] = 1\n"
                            "  A[0] = 2\n"
                            "  for i in range(4) {\n"
                            "  }\n"
                            "}\n");
  canonical(text);
  ts_func *g = parse_ok(text);
  /* The flat text gives one seq of three. */
  assert_int_equal(ts_stmt_kind_of(ts_func_body(g)), TS_STMT_SEQ);
  assert_int_equal(ts_seq_n(ts_func_body(g)), 3);
  ts_stmt *l = ts_seq_item(ts_func_body(g), 2);
  assert_int_equal(ts_seq_n(ts_for_body(l)), 0);
  free(text);
  ts_func_free(g);
  ts_func_free(f);
}

/* ---- loops ---- */

static void test_loop_kinds(void **state) {
  (void)state;
  ts_func *f = ts_func_new("loops");
  ts_arena *a = ts_func_arena(f);
  ts_buffer *A = buf1(a, "A", TS_FLOAT32, 1024);
  ts_func_add_param(f, A);
  const char *tags[] = {"blockIdx.x", "threadIdx.y", "vthread"};
  ts_expr *v[8];
  for (int k = 0; k < 8; k++) v[k] = ts_var(a, "i", TS_INDEX);
  ts_expr *idx = ts_index(a, 0);
  ts_stmt *s = ts_store(a, A, &idx, 1, ts_float(a, TS_FLOAT32, 1));
  s = ts_for(a, v[0], ts_index(a, 0), ts_index(a, 4), TS_FOR_VECTORIZED, NULL,
             s);
  s = ts_for(a, v[1], ts_index(a, 2), ts_index(a, 3), TS_FOR_UNROLLED, NULL, s);
  s = ts_for(a, v[2], ts_index(a, 0), ts_index(a, 8), TS_FOR_PARALLEL, NULL, s);
  for (int k = 0; k < 3; k++)
    s = ts_for(a, v[3 + k], ts_index(a, 0), ts_index(a, 2), TS_FOR_THREAD,
               tags[k], s);
  /* A loop over a non-default range and dtype. */
  ts_expr *w = ts_var(a, "w", TS_INT32);
  s = ts_for(a, w, ts_int(a, TS_INT32, -1), ts_int(a, TS_INT32, 5),
             TS_FOR_SERIAL, NULL, s);
  ts_stmt *sym =
      ts_for(a, v[6], ts_index(a, 0), ts_index(a, 4), TS_FOR_SERIAL, NULL,
             ts_for(a, v[7], v[6], ts_index(a, 3), TS_FOR_SERIAL, NULL,
                    ts_seq(a, NULL, 0)));
  ts_func_set_body(f, seq2(a, s, sym));
  char *text = roundtrip(f);
  assert_non_null(strstr(text, " in range(4) vectorized {"));
  assert_non_null(strstr(text, "in range(2 +: 3) unrolled {"));
  assert_non_null(strstr(text, "in range(8) parallel {"));
  assert_non_null(strstr(text, "thread(\"blockIdx.x\") {"));
  assert_non_null(strstr(text, "thread(\"threadIdx.y\") {"));
  assert_non_null(strstr(text, "thread(\"vthread\") {"));
  assert_non_null(strstr(text, "for w in range(int32(-1) +: int32(5)) {"));
  assert_non_null(strstr(text, "for i_1 in range(i +: 3) {"));
  ts_func *g = parse_ok(text);
  kinds k;
  collect_kinds(g, &k);
  for (int i = 0; i <= TS_FOR_THREAD; i++) assert_true(k.loop[i]);
  /* The loop var takes the extent's dtype. */
  assert_true(ts_dtype_eq(
      ts_expr_dtype(ts_for_var(ts_seq_item(ts_func_body(g), 0))), TS_INT32));
  free(text);
  ts_func_free(g);
  ts_func_free(f);
  /* `serial` may be written; it is not printed. */
  ts_func *h = parse_ok("func f(A: int64[4]) {\n  for i in range(4) serial {\n"
                        "    A[i] = i\n  }\n}\n");
  char *t = ts_func_print(h);
  assert_non_null(strstr(t, "for i in range(4) {"));
  free(t);
  ts_func_free(h);
}

/* ---- annotations ---- */

static void test_annotations(void **state) {
  (void)state;
  ts_func *f = ts_func_new("anns");
  ts_arena *a = ts_func_arena(f);
  ts_buffer *A = buf1(a, "A", TS_FLOAT32, 4);
  ts_func_add_param(f, A);
  ts_func_set_attr(f, ts_ann_int("global_symbol", 7));
  ts_func_set_attr(
      f, ts_ann_string("target", "llvm -mcpu=x \"q\" \\ \n\t\x01\x7f\xc3\xa9"));
  ts_func_set_attr(f, ts_ann_float("one", 1.0));
  ts_expr *i = ts_var(a, "i", TS_INDEX);
  ts_stmt *l = loop(a, i, 4, ts_store(a, A, &i, 1, ts_float(a, TS_FLOAT32, 0)));
  double floats[] = {0.1, -0.0, INFINITY, -INFINITY, 1e300, 5e-324, -2.5, 1e-7};
  char key[16];
  for (size_t k = 0; k < sizeof floats / sizeof floats[0]; k++) {
    snprintf(key, sizeof key, "f%zu", k);
    ts_for_annotate(a, l, ts_ann_float(key, floats[k]));
  }
  ts_for_annotate(a, l, ts_ann_float("nan", NAN));
  ts_for_annotate(a, l, ts_ann_int("min", INT64_MIN));
  ts_for_annotate(a, l, ts_ann_int("max", INT64_MAX));
  ts_for_annotate(a, l, ts_ann_int("neg", -3));
  ts_for_annotate(a, l, ts_ann_string("", ""));
  ts_block *blk = ts_block_new(a, "b");
  ts_block_annotate(a, blk, ts_ann_string("meta_schedule.tiling", "SSRSRS"));
  ts_block_annotate(a, blk, ts_ann_int("auto_unroll", 16));
  ts_block_annotate(a, blk, ts_ann_float("ratio", 0.75));
  ts_block_set_body(blk, l);
  ts_func_set_body(f, ts_block_realize(a, blk, NULL, 0, NULL));
  char *text = roundtrip(f);
  assert_non_null(strstr(
      text, "attrs {\"global_symbol\": 7, \"target\": \"llvm -mcpu=x \\\"q\\\" "
            "\\\\ \\n\\t\\x01\\x7f\\xc3\\xa9\", \"one\": 1.0} {"));
  assert_non_null(strstr(text,
                         "annotate {\"meta_schedule.tiling\": \"SSRSRS\", "
                         "\"auto_unroll\": 16, \"ratio\": 0.75}\n"));
  assert_non_null(strstr(text, "\"f1\": -0.0, \"f2\": inf, \"f3\": -inf"));
  assert_non_null(
      strstr(text, "\"nan\": nan, \"min\": -9223372036854775808, "
                   "\"max\": 9223372036854775807, \"neg\": -3, \"\": \"\"}"));
  ts_func *g = parse_ok(text);
  const ts_annotation *t = ts_func_find_attr(g, "target");
  assert_non_null(t);
  assert_int_equal(t->kind, TS_ANN_STRING);
  assert_string_equal(t->s, "llvm -mcpu=x \"q\" \\ \n\t\x01\x7f\xc3\xa9");
  assert_int_equal(ts_func_find_attr(g, "one")->kind, TS_ANN_FLOAT);
  const ts_stmt *gl = ts_block_body(ts_realize_block(ts_func_body(g)));
  for (size_t k = 0; k < sizeof floats / sizeof floats[0]; k++) {
    snprintf(key, sizeof key, "f%zu", k);
    const ts_annotation *ann = ts_for_find_annotation(gl, key);
    assert_non_null(ann);
    assert_int_equal(ann->kind, TS_ANN_FLOAT);
    assert_memory_equal(&ann->f, &floats[k], sizeof(double));
  }
  assert_true(isnan(ts_for_find_annotation(gl, "nan")->f));
  assert_true(ts_for_find_annotation(gl, "min")->i == INT64_MIN);
  assert_true(ts_for_find_annotation(gl, "max")->i == INT64_MAX);
  assert_int_equal(ts_block_n_annotations(ts_realize_block(ts_func_body(g))),
                   3);
  free(text);
  ts_func_free(g);
  ts_func_free(f);
}

/* ---- buffers ---- */

static void test_buffer_options(void **state) {
  (void)state;
  ts_func *f = ts_func_new("buffers");
  ts_arena *a = ts_func_arena(f);
  ts_buffer *A = buf2(a, "A", TS_FLOAT32, 4, 8);
  int64_t strides[2] = {16, 1};
  ts_buffer_set_strides(a, A, strides);
  ts_buffer_set_scope(a, A, "shared");
  ts_buffer_set_align(A, 32);
  ts_buffer *S = ts_buffer_new(a, "S", TS_FLOAT64, NULL, 0);
  ts_buffer *V = buf1(a, "V", ts_dtype_with_lanes(TS_INT8, 16), 4);
  int64_t compact[2] = {8, 1};
  ts_buffer *K = buf2(a, "K", TS_BFLOAT16, 4, 8);
  ts_buffer_set_strides(a, K, compact); /* explicit but compact */
  ts_buffer *U = buf1(a, "U", TS_UINT16, 3);
  ts_buffer_set_align(U, 1);
  ts_func_add_param(f, A);
  ts_func_add_param(f, S);
  ts_func_add_param(f, V);
  ts_func_add_param(f, K);
  ts_func_add_param(f, U);
  ts_block *blk = ts_block_new(a, "b");
  ts_buffer *L = buf2(a, "L", TS_FLOAT32, 2, 2);
  ts_buffer_set_scope(a, L, "local");
  ts_block_add_alloc(a, blk, L);
  ts_buffer *Z = ts_buffer_new(a, "Z", TS_INT32, NULL, 0);
  ts_buffer_set_scope(a, Z, "amx.tile");
  ts_block_add_alloc(a, blk, Z);
  /* A region over a buffer allocated in the same block. */
  ts_region w[2] = {full_region(a, L), {Z, 0, NULL}};
  ts_block_set_regions(a, blk, NULL, 0, w, 2);
  ts_expr *ix[2] = {ts_index(a, 1), ts_index(a, 0)};
  ts_block_set_body(
      blk, seq2(a,
                ts_store(a, L, ix, 2,
                         ts_cast_raw(a, TS_FLOAT32, ts_load(a, S, NULL, 0))),
                ts_store(a, Z, NULL, 0, ts_int(a, TS_INT32, 3))));
  ts_func_set_body(f, ts_block_realize(a, blk, NULL, 0, NULL));
  char *text = roundtrip(f);
  assert_non_null(strstr(text, "func buffers(A: float32[4, 8] strides [16, 1] "
                               "scope \"shared\" align 32, S: float64[], V: "
                               "int8x16[4], K: bfloat16[4, 8] strides [8, 1], "
                               "U: uint16[3] align 1) {"));
  assert_non_null(strstr(text,
                         "    reads()\n    writes(L[0 +: 2, 0 +: 2], Z[])\n"
                         "    alloc L: float32[2, 2] scope \"local\"\n"
                         "    alloc Z: int32[] scope \"amx.tile\"\n"));
  assert_non_null(
      strstr(text, "L[1, 0] = cast(float32, S[])\n    Z[] = int32(3)\n"));
  ts_func *g = parse_ok(text);
  ts_buffer *ga = ts_func_param(g, 0);
  assert_non_null(ts_buffer_strides(ga));
  assert_int_equal(ts_buffer_strides(ga)[0], 16);
  assert_string_equal(ts_buffer_scope(ga), "shared");
  assert_int_equal(ts_buffer_align(ga), 32);
  assert_int_equal(ts_buffer_ndim(ts_func_param(g, 1)), 0);
  assert_int_equal(ts_buffer_dtype(ts_func_param(g, 2)).lanes, 16);
  assert_non_null(ts_buffer_strides(ts_func_param(g, 3)));
  assert_null(ts_buffer_strides(ts_func_param(g, 4)));
  free(text);
  ts_func_free(g);
  ts_func_free(f);
}

/* ---- vectors ---- */

static void test_vectors(void **state) {
  (void)state;
  ts_func *f = ts_func_new("vec");
  ts_arena *a = ts_func_arena(f);
  ts_buffer *A = buf1(a, "A", TS_FLOAT32, 64);
  ts_buffer *B = buf1(a, "B", TS_FLOAT32, 64);
  ts_func_add_param(f, A);
  ts_func_add_param(f, B);
  ts_expr *i = ts_var(a, "i", TS_INDEX);
  ts_expr *base = ts_mul(a, i, ts_index(a, 16));
  ts_expr *r = ts_ramp(a, base, ts_index(a, 1), 16);
  ts_expr *r2 = ts_ramp(a, ts_index(a, 0), ts_index(a, 2), 16);
  ts_dtype f16 = ts_dtype_with_lanes(TS_FLOAT32, 16);
  ts_expr *cond =
      ts_binary_raw(a, TS_EXPR_LT, ts_load(a, A, &r, 1),
                    ts_broadcast(a, ts_float(a, TS_FLOAT32, 0), 16));
  ts_expr *val = ts_select_raw(
      a, cond, ts_float(a, f16, 1.5),
      ts_binary_raw(a, TS_EXPR_ADD, ts_load(a, B, &r2, 1),
                    ts_cast_raw(a, f16,
                                ts_ramp(a, ts_int(a, TS_INT32, 0),
                                        ts_int(a, TS_INT32, 1), 16))));
  ts_expr *scalar_cond = ts_binary_raw(a, TS_EXPR_GT, i, ts_index(a, 1));
  ts_expr *val2 = ts_select_raw(
      a, scalar_cond, val, ts_broadcast(a, ts_float(a, TS_FLOAT32, 2), 16));
  ts_func_set_body(f, loop(a, i, 4, ts_store(a, A, &r, 1, val2)));
  char *text = roundtrip(f);
  assert_non_null(strstr(
      text,
      "A[ramp(i * 16, 1, 16)] = select(i > 1, select(A[ramp(i * 16, 1, 16)] < "
      "broadcast(float32(0), 16), float32x16(1.5), B[ramp(0, 2, 16)] + "
      "cast(float32x16, ramp(int32(0), int32(1), 16))), "
      "broadcast(float32(2), 16))"));
  free(text);
  ts_func_free(f);
}

/* ---- literals ---- */

typedef struct float_case {
  ts_dtype t;
  double v;
  const char *text; /* expected literal, NULL to skip the check */
} float_case;

static void test_float_literals(void **state) {
  (void)state;
  float_case cases[] = {
      {TS_FLOAT32, 0.5, "float32(0.5)"},
      {TS_FLOAT32, 0.1, "float32(0.1)"},
      {TS_FLOAT32, -0.0, "float32(-0)"},
      {TS_FLOAT32, INFINITY, "float32(inf)"},
      {TS_FLOAT32, -INFINITY, "float32(-inf)"},
      {TS_FLOAT32, NAN, "float32(nan)"},
      {TS_FLOAT32, FLT_TRUE_MIN, "float32(1e-45)"},
      {TS_FLOAT32, FLT_MIN / 2, NULL},
      {TS_FLOAT32, FLT_MAX, "float32(3.4028235e+38)"},
      {TS_FLOAT32, 1.0 / 3, "float32(0.33333334)"},
      {TS_FLOAT64, 0.1, "float64(0.1)"},
      {TS_FLOAT64, 1.0 / 3, "float64(0.3333333333333333)"},
      {TS_FLOAT64, DBL_TRUE_MIN, "float64(5e-324)"},
      {TS_FLOAT64, DBL_MAX, "float64(1.7976931348623157e+308)"},
      {TS_FLOAT64, -INFINITY, "float64(-inf)"},
      {TS_FLOAT64, -0.0, "float64(-0)"},
      {TS_FLOAT64, 1e22, "float64(1e+22)"},
      {TS_FLOAT16, 65504, "float16(6.55e+04)"},
      {TS_FLOAT16, 5.9604644775390625e-08, "float16(6e-08)"}, /* 2^-24 */
      {TS_FLOAT16, 0.1, "float16(0.1)"},
      {TS_FLOAT16, -INFINITY, "float16(-inf)"},
      {TS_FLOAT16, NAN, "float16(nan)"},
      {TS_FLOAT16, 1.0 / 3, NULL},
      {TS_BFLOAT16, 1, "bfloat16(1)"},
      {TS_BFLOAT16, 1.0 / 3, NULL},
      {TS_BFLOAT16, 9.18354961579912e-41, NULL},   /* a bf16 denormal */
      {TS_BFLOAT16, 3.3895313892515355e+38, NULL}, /* bf16 max */
      {TS_BFLOAT16, -0.0, "bfloat16(-0)"},
      {TS_BFLOAT16, INFINITY, "bfloat16(inf)"},
  };
  int n = (int)(sizeof cases / sizeof cases[0]);
  ts_func *f = ts_func_new("floats");
  ts_arena *a = ts_func_arena(f);
  ts_buffer *bufs[4] = {
      buf1(a, "F32", TS_FLOAT32, 64), buf1(a, "F64", TS_FLOAT64, 64),
      buf1(a, "F16", TS_FLOAT16, 64), buf1(a, "BF16", TS_BFLOAT16, 64)};
  for (int k = 0; k < 4; k++) ts_func_add_param(f, bufs[k]);
  ts_stmt *stores[64];
  ts_expr *lits[64];
  for (int k = 0; k < n; k++) {
    ts_dtype t = cases[k].t;
    ts_buffer *b = t.code == TS_DT_BFLOAT ? bufs[3]
                   : t.bits == 16         ? bufs[2]
                   : t.bits == 64         ? bufs[1]
                                          : bufs[0];
    ts_expr *idx = ts_index(a, k);
    lits[k] = ts_float(a, t, cases[k].v);
    stores[k] = ts_store(a, b, &idx, 1, lits[k]);
    if (cases[k].text) {
      char *s = ts_expr_print(lits[k]);
      assert_string_equal(s, cases[k].text);
      free(s);
    }
  }
  ts_func_set_body(f, ts_seq(a, stores, n));
  char *text = roundtrip(f);
  ts_func *g = parse_ok(text);
  for (int k = 0; k < n; k++) {
    double want = ts_expr_float_value(lits[k]);
    double got =
        ts_expr_float_value(ts_store_value(ts_seq_item(ts_func_body(g), k)));
    if (isnan(want))
      assert_true(isnan(got));
    else
      assert_memory_equal(&got, &want, sizeof(double));
  }
  free(text);
  ts_func_free(g);
  ts_func_free(f);
  /* Every float16 and bfloat16 value round-trips through its literal. */
  ts_arena *ar = ts_arena_create();
  for (uint32_t h = 0; h < 0x10000; h += 7) {
    ts_dtype types[2] = {TS_FLOAT16, TS_BFLOAT16};
    for (int k = 0; k < 2; k++) {
      double v = k ? ts_bf16_to_f32((uint16_t)h) : ts_f16_to_f32((uint16_t)h);
      if (isnan(v)) continue;
      char *s = ts_expr_print(ts_float(ar, types[k], v));
      char text2[256];
      snprintf(text2, sizeof text2, "func f(A: %s[1]) {\n  A[0] = %s\n}\n",
               k ? "bfloat16" : "float16", s);
      ts_func *h2 = parse_ok(text2);
      double got = ts_expr_float_value(ts_store_value(ts_func_body(h2)));
      assert_memory_equal(&got, &v, sizeof(double));
      ts_func_free(h2);
      free(s);
    }
  }
  ts_arena_destroy(ar);
}

static void test_int_literals(void **state) {
  (void)state;
  ts_arena *a = ts_arena_create();
  struct {
    ts_expr *e;
    const char *text;
  } cases[] = {
      {ts_index(a, 0), "0"},
      {ts_index(a, -7), "-7"},
      {ts_index(a, INT64_MAX), "9223372036854775807"},
      {ts_index(a, INT64_MIN), "-9223372036854775808"},
      {ts_int(a, TS_INT32, INT32_MIN), "int32(-2147483648)"},
      {ts_int(a, TS_INT8, -128), "int8(-128)"},
      {ts_int(a, TS_UINT8, 255), "uint8(255)"},
      {ts_int(a, TS_UINT64, -1), "uint64(18446744073709551615)"},
      {ts_int(a, TS_INT16, 5), "int16(5)"},
      {ts_bool(a, true), "true"},
      {ts_bool(a, false), "false"},
      {ts_int(a, ts_dtype_with_lanes(TS_INT32, 4), 3), "int32x4(3)"},
      {ts_int(a, ts_dtype_with_lanes(TS_BOOL, 8), 1), "boolx8(1)"},
      {ts_int(a, TS_HANDLE, 0), "handle(0)"},
  };
  int n = (int)(sizeof cases / sizeof cases[0]);
  for (int k = 0; k < n; k++) {
    char *s = ts_expr_print(cases[k].e);
    assert_string_equal(s, cases[k].text);
    free(s);
  }
  ts_arena_destroy(a);
  ts_func *f = ts_func_new("ints");
  a = ts_func_arena(f);
  ts_stmt *evals[32];
  ts_expr *exprs[] = {
      ts_index(a, INT64_MIN),
      ts_int(a, TS_INT8, -128),
      ts_int(a, TS_UINT64, -1),
      ts_int(a, TS_UINT32, 4294967295u),
      ts_int(a, TS_INT64, 12),
      ts_bool(a, true),
      ts_int(a, ts_dtype_with_lanes(TS_UINT8, 4), 200),
      ts_int(a, TS_HANDLE, 0),
      ts_binary_raw(a, TS_EXPR_SUB, ts_index(a, 0), ts_index(a, INT64_MIN)),
  };
  n = (int)(sizeof exprs / sizeof exprs[0]);
  for (int k = 0; k < n; k++) evals[k] = ts_evaluate(a, exprs[k]);
  ts_func_set_body(f, ts_seq(a, evals, n));
  char *text = roundtrip(f);
  assert_non_null(strstr(text, "evaluate 0 - -9223372036854775808\n"));
  free(text);
  ts_func_free(f);
}

/* `-` on a literal makes a negative literal, otherwise 0 - x. */
static void test_unary_minus(void **state) {
  (void)state;
  const char *in = "func u(A: float32[4], B: int32[4]) {\n"
                   "  for i in range(4) {\n"
                   "    evaluate -i\n"
                   "    evaluate -(3)\n"
                   "    evaluate - -3\n"
                   "    evaluate -9223372036854775808\n"
                   "    A[i] = -A[i]\n"
                   "    A[0] = -float32(2.5)\n"
                   "    B[0] = -int32(7)\n"
                   "    B[1] = int32(-7) * -B[0]\n"
                   "    evaluate !!(i < 2)\n"
                   "  }\n"
                   "}\n";
  const char *want = "func u(A: float32[4], B: int32[4]) {\n"
                     "  for i in range(4) {\n"
                     "    evaluate 0 - i\n"
                     "    evaluate -3\n"
                     "    evaluate 3\n"
                     "    evaluate -9223372036854775808\n"
                     "    A[i] = float32(0) - A[i]\n"
                     "    A[0] = float32(-2.5)\n"
                     "    B[0] = int32(-7)\n"
                     "    B[1] = int32(-7) * (int32(0) - B[0])\n"
                     "    evaluate !!(i < 2)\n"
                     "  }\n"
                     "}\n";
  ts_func *f = parse_ok(in);
  char *text = ts_func_print(f);
  assert_string_equal(text, want);
  canonical(text);
  free(text);
  ts_func_free(f);
}

/* ---- names ---- */

static void test_name_collisions(void **state) {
  (void)state;
  ts_func *f = ts_func_new("names");
  ts_arena *a = ts_func_arena(f);
  ts_buffer *A = buf1(a, "A", TS_FLOAT32, 8);
  ts_buffer *Mn = buf1(a, "min", TS_FLOAT32, 8);
  char longname[301];
  memset(longname, 'x', 300);
  longname[300] = 0;
  ts_buffer *Long = buf1(a, longname, TS_FLOAT32, 8);
  ts_buffer *Dot = buf1(a, "a.b", TS_FLOAT32, 8);
  ts_buffer *Digit = buf1(a, "3d", TS_FLOAT32, 8);
  ts_func_add_param(f, A);
  ts_func_add_param(f, Mn);
  ts_func_add_param(f, Long);
  ts_func_add_param(f, Dot);
  ts_func_add_param(f, Digit);
  ts_expr *i1 = ts_var(a, "i", TS_INDEX), *i2 = ts_var(a, "i", TS_INDEX);
  ts_expr *fl = ts_var(a, "float32", TS_INDEX);
  ts_expr *ex = ts_var(a, "exp", TS_INDEX);
  ts_expr *kw = ts_var(a, "for", TS_INDEX);
  ts_expr *i_1 = ts_var(a, "i_1", TS_INDEX);
  ts_expr *empty = ts_var(a, "", TS_INDEX);
  ts_expr *sum = ts_binary_raw(
      a, TS_EXPR_ADD,
      ts_binary_raw(a, TS_EXPR_ADD, ts_binary_raw(a, TS_EXPR_ADD, i1, i2), fl),
      ts_binary_raw(a, TS_EXPR_ADD, ts_binary_raw(a, TS_EXPR_ADD, ex, kw),
                    ts_binary_raw(a, TS_EXPR_ADD, i_1, empty)));
  ts_expr *idx = ts_index(a, 0);
  /* A buffer named like a visible var, allocated inside. */
  ts_buffer *Ib = buf1(a, "i", TS_INT64, 1);
  ts_buffer *A2 = buf1(a, "A", TS_INT64, 1);
  ts_stmt *inner = ts_allocate(
      a, Ib,
      ts_allocate(a, A2,
                  seq2(a, ts_store(a, Ib, &idx, 1, sum),
                       ts_store(a, A2, &idx, 1, ts_load(a, Ib, &idx, 1)))));
  ts_stmt *lets = ts_let_stmt(a, i_1, ts_index(a, 1),
                              ts_let_stmt(a, empty, ts_index(a, 2), inner));
  ts_stmt *nest = loop(a, fl, 2, loop(a, ex, 2, loop(a, kw, 2, lets)));
  nest = loop(a, i1, 2, loop(a, i2, 2, nest));
  /* Sibling loops reuse names. */
  ts_expr *j1 = ts_var(a, "j", TS_INDEX), *j2 = ts_var(a, "j", TS_INDEX);

  /* Block names are printed as given (quoted when not identifiers). */
  ts_block *b1 = ts_block_new(a, "C.rf");
  ts_block_set_body(b1, ts_store(a, Mn, &idx, 1, ts_load(a, Long, &idx, 1)));
  ts_block *b2 = ts_block_new(a, "for");
  ts_block_set_body(b2, ts_store(a, Dot, &idx, 1, ts_load(a, Digit, &idx, 1)));
  ts_stmt *items[5] = {nest, loop(a, j1, 2, ts_evaluate(a, j1)),
                       loop(a, j2, 2, ts_evaluate(a, j2)),
                       ts_block_realize(a, b1, NULL, 0, NULL),
                       ts_block_realize(a, b2, NULL, 0, NULL)};
  ts_func_set_body(f, ts_seq(a, items, 5));
  char *text = roundtrip(f);
  char want_long[300];
  memset(want_long, 'x', 255);
  want_long[255] = 0;
  assert_non_null(strstr(text, "min_1: float32[8]"));
  assert_non_null(strstr(text, want_long));
  assert_null(strstr(text, longname)); /* cut to 255 characters */
  assert_non_null(strstr(text, "a_b: float32[8], _3d: float32[8]"));
  assert_non_null(strstr(text, "for i in range(2) {"));
  assert_non_null(strstr(text, "for i_1 in range(2) {"));
  assert_non_null(strstr(text, "for float32_1 in range(2) {"));
  assert_non_null(strstr(text, "for exp_1 in range(2) {"));
  assert_non_null(strstr(text, "for for_1 in range(2) {"));
  assert_non_null(strstr(text, "let i_1_1 = 1 {"));
  assert_non_null(strstr(text, "let v = 2 {"));
  assert_non_null(strstr(text, "allocate i_2: int64[1] {"));
  assert_non_null(strstr(text, "allocate A_1: int64[1] {"));
  assert_non_null(strstr(
      text, "i_2[0] = i + i_1 + float32_1 + (exp_1 + for_1 + (i_1_1 + v))"));
  assert_non_null(strstr(text, "A_1[0] = i_2[0]"));
  assert_non_null(strstr(text, "  for j in range(2) {\n    evaluate j\n  }\n"
                               "  for j in range(2) {\n    evaluate j\n  }\n"));
  assert_non_null(strstr(text, "block \"C.rf\"() {"));
  assert_non_null(strstr(text, "block for() {"));
  free(text);
  ts_func_free(f);
  assert_true(ts_text_name_is_reserved("min"));
  assert_true(ts_text_name_is_reserved("float32x4"));
  assert_true(ts_text_name_is_reserved("sigmoid"));
  assert_true(ts_text_name_is_reserved("reads"));
  assert_false(ts_text_name_is_reserved("A"));
  assert_false(ts_text_name_is_reserved("int7"));
}

/* Hand-written texts may shadow; printing never does. */
static void test_shadowing_input(void **state) {
  (void)state;
  const char *in = "func s(A: float32[4]) {\n"
                   "  for i in range(4) {\n"
                   "    block b(i: spatial(4) = i) {\n"
                   "      reads()\n"
                   "      writes(A[i])\n"
                   "      for A in range(1) {\n"
                   "        evaluate A + i\n"
                   "      }\n"
                   "      A[i] = float32(1)\n"
                   "    }\n"
                   "  }\n"
                   "}\n";
  const char *want = "func s(A: float32[4]) {\n"
                     "  for i in range(4) {\n"
                     "    block b(i_1: spatial(4) = i) {\n"
                     "      reads()\n"
                     "      writes(A[i_1])\n"
                     "      for A_1 in range(1) {\n"
                     "        evaluate A_1 + i_1\n"
                     "      }\n"
                     "      A[i_1] = float32(1)\n"
                     "    }\n"
                     "  }\n"
                     "}\n";
  ts_func *f = parse_ok(in);
  char *text = ts_func_print(f);
  assert_string_equal(text, want);
  free(roundtrip(f));
  free(text);
  ts_func_free(f);
}

/* ---- nesting ---- */

static void test_deep_nesting(void **state) {
  (void)state;
  ts_func *f = ts_func_new("deep");
  ts_arena *a = ts_func_arena(f);
  ts_buffer *A = buf1(a, "A", TS_INT64, 4);
  ts_func_add_param(f, A);
  ts_expr *vars[60];
  for (int k = 0; k < 60; k++) vars[k] = ts_var(a, "i", TS_INDEX);
  /* a - (b - (c - ...)) nested 150 deep, and a left-deep chain of 150:
   * with the 60 loops around them, under TS_TIR_MAX_DEPTH (a chain counts
   * one level per operator, whichever way it leans). */
  ts_expr *right = vars[59];
  for (int k = 0; k < 150; k++)
    right = ts_binary_raw(a, TS_EXPR_SUB, vars[k % 60], right);
  ts_expr *left = vars[0];
  for (int k = 0; k < 150; k++)
    left =
        ts_binary_raw(a, k % 2 ? TS_EXPR_ADD : TS_EXPR_SUB, left, vars[k % 60]);
  ts_expr *zero = ts_index(a, 0);
  ts_stmt *s =
      seq2(a, ts_store(a, A, &zero, 1, right), ts_store(a, A, &zero, 1, left));
  for (int k = 59; k >= 0; k--) s = loop(a, vars[k], 2, s);
  ts_func_set_body(f, s);
  char *text = roundtrip(f);
  assert_non_null(strstr(text, "for i_59 in range(2) {"));
  free(text);
  ts_func_free(f);
  /* Beyond the nesting limit: a clean error, not a crash. */
  f = ts_func_new("too_deep");
  a = ts_func_arena(f);
  A = buf1(a, "A", TS_INT64, 4);
  ts_func_add_param(f, A);
  ts_expr *x = ts_index(a, 1);
  for (int k = 0; k < 400; k++)
    x = ts_binary_raw(a, TS_EXPR_SUB, ts_index(a, 2), x);
  zero = ts_index(a, 0);
  ts_func_set_body(f, ts_store(a, A, &zero, 1, x));
  text = ts_func_print(f);
  ts_func *g = NULL;
  ts_error err;
  assert_int_equal(ts_func_parse(text, strlen(text), "deep", &g, &err),
                   TS_EPARSE);
  assert_null(g);
  /* the printer cut the tree at the limit, with a marker */
  assert_non_null(strstr(text, "deeper than 256 levels"));
  free(text);
  ts_func_free(f);
  /* A left-deep chain of 3000 (once printed and parsed back): refused with
   * the limit, never a stack overflow (tests/tir/test_depth.c). */
  f = ts_func_new("long_chain");
  a = ts_func_arena(f);
  A = buf1(a, "A", TS_INT64, 4);
  ts_func_add_param(f, A);
  x = ts_index(a, 1);
  for (int k = 0; k < 3000; k++)
    x = ts_binary_raw(a, TS_EXPR_ADD, x, ts_index(a, 2));
  zero = ts_index(a, 0);
  ts_func_set_body(f, ts_store(a, A, &zero, 1, x));
  text = ts_func_print(f);
  assert_non_null(strstr(text, "deeper than 256 levels"));
  assert_int_equal(ts_func_parse(text, strlen(text), "chain", &g, &err),
                   TS_EPARSE);
  assert_null(g);
  free(text);
  ts_func_free(f);
}

/* ---- precedence ---- */

static void test_precedence(void **state) {
  (void)state;
  ts_func *f = ts_func_new("prec");
  ts_arena *a = ts_func_arena(f);
  ts_buffer *P = ts_buffer_new(a, "P", TS_BOOL, NULL, 0);
  ts_func_add_param(f, P);
  ts_expr *av = ts_var(a, "a", TS_INDEX), *bv = ts_var(a, "b", TS_INDEX),
          *cv = ts_var(a, "c", TS_INDEX);
  ts_expr *lv = ts_var(a, "c", TS_INDEX);
  ts_expr *p = ts_load(a, P, NULL, 0),
          *q = ts_binary_raw(a, TS_EXPR_EQ, av, bv);
#define B(k, x, y) ts_binary_raw(a, TS_EXPR_##k, x, y)
  struct {
    ts_expr *e;
    const char *text;
  } cases[] = {
      {B(SUB, av, B(SUB, bv, cv)), "a - (b - c)"},
      {B(SUB, B(SUB, av, bv), cv), "a - b - c"},
      {B(MUL, B(ADD, av, bv), cv), "(a + b) * c"},
      {B(ADD, av, B(MUL, bv, cv)), "a + b * c"},
      {B(ADD, B(MUL, av, bv), cv), "a * b + c"},
      {B(MOD, B(MUL, av, bv), cv), "a * b % c"},
      {B(DIV, av, B(MOD, bv, cv)), "a / (b % c)"},
      {B(EQ, B(LT, av, bv), B(LT, cv, av)), "(a < b) == (c < a)"},
      {B(EQ, q, p), "(a == b) == P[]"},
      {B(NE, p, q), "P[] != (a == b)"},
      {B(AND, B(LT, av, bv), p), "a < b && P[]"},
      {B(OR, p, B(AND, q, p)), "P[] || a == b && P[]"},
      {B(AND, B(OR, p, q), p), "(P[] || a == b) && P[]"},
      {B(OR, B(OR, p, q), p), "P[] || a == b || P[]"},
      {B(OR, p, B(OR, q, p)), "P[] || (a == b || P[])"},
      {ts_not_raw(a, B(AND, p, q)), "!(P[] && a == b)"},
      {B(AND, ts_not_raw(a, p), q), "!P[] && a == b"},
      {ts_not_raw(a, ts_not_raw(a, p)), "!!P[]"},
      {ts_not_raw(a, q), "!(a == b)"},
      {B(MUL, ts_index(a, -5), av), "-5 * a"},
      {B(MUL, av, ts_index(a, -5)), "a * -5"},
      {B(SUB, av, ts_index(a, -5)), "a - -5"},
      {B(SUB, ts_index(a, 0), av), "0 - a"},
      {B(FLOORDIV, B(ADD, av, bv), B(MUL, cv, cv)), "floordiv(a + b, c * c)"},
      {B(MUL, B(MIN, av, bv), B(MAX, av, bv)), "min(a, b) * max(a, b)"},
      {ts_select_raw(a, B(OR, p, q), B(ADD, av, bv), av),
       "select(P[] || a == b, a + b, a)"},
      {B(ADD, ts_let(a, lv, av, B(MUL, lv, lv)), bv),
       "(let c = a in c * c) + b"},
  };
#undef B
  int n = (int)(sizeof cases / sizeof cases[0]);
  ts_stmt *evals[64];
  for (int k = 0; k < n; k++) {
    char *s = ts_expr_print(cases[k].e);
    assert_string_equal(s, cases[k].text);
    free(s);
    evals[k] = ts_evaluate(a, cases[k].e);
  }
  /* Each parses back to the same tree (ts_func_equal in roundtrip). */
  ts_stmt *body = ts_seq(a, evals, n);
  body = loop(a, av, 2, loop(a, bv, 2, body));
  ts_func_set_body(f, loop(a, cv, 2, body));
  free(roundtrip(f));
  ts_func_free(f);
  /* Comparisons do not chain; parentheses make them legal. */
  ts_func *g = NULL;
  ts_error err;
  const char *chain = "func c() {\n  evaluate 1 < 2 < 3\n}\n";
  assert_int_equal(ts_func_parse(chain, strlen(chain), NULL, &g, &err),
                   TS_EPARSE);
  assert_int_equal(err.line, 2);
  assert_non_null(strstr(err.msg, "<input>:2:"));
  canonical("func c() {\n  evaluate (1 < 2) == (2 < 3)\n}\n");
}

/* ---- regions written, omitted and inferred ---- */

static void test_region_inference(void **state) {
  (void)state;
  const char *in =
      "# regions omitted: the parser infers them\n"
      "func mm(A: float32[16, 16], B: float32[16, 16], C: float32[16, 16]) {\n"
      "  for i in range(16) {\n"
      "    for j in range(16) {\n"
      "      for k in range(16) {\n"
      "        block C(vi: spatial(16) = i, vj: spatial(16) = j,\n"
      "                vk: reduce(16) = k) {\n"
      "          init { C[vi, vj] = float32(0) }\n"
      "          C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]\n"
      "        }\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n";
  ts_func *f = parse_ok(in);
  ts_stmt *r = ts_func_find_block(f, "C");
  assert_non_null(r);
  ts_block *b = ts_realize_block(r);
  assert_int_equal(ts_block_n_reads(b), 3);
  assert_int_equal(ts_block_n_writes(b), 1);
  assert_ptr_equal(ts_block_write(b, 0)->buffer, ts_func_param(f, 2));
  char *text = roundtrip(f);
  assert_non_null(strstr(text, "writes(C[vi, vj])"));
  assert_non_null(strstr(text, "A[vi, vk]"));
  assert_non_null(strstr(text, "B[vk, vj]"));
  free(text);
  ts_func_free(f);
  /* reads given, writes omitted: the given reads are kept as written. */
  const char *half = "func h(A: float32[8], B: float32[8]) {\n"
                     "  for i in range(8) {\n"
                     "    block b(vi: spatial(8) = i) {\n"
                     "      reads(A[0 +: 8])\n"
                     "      B[vi] = A[vi]\n"
                     "    }\n"
                     "  }\n"
                     "}\n";
  f = parse_ok(half);
  b = ts_realize_block(ts_func_find_block(f, "b"));
  assert_int_equal(ts_block_n_reads(b), 1);
  int64_t ext;
  assert_true(
      ts_expr_is_const_int(ts_block_read(b, 0)->ranges[0].extent, &ext));
  assert_int_equal(ext, 8);
  assert_int_equal(ts_block_n_writes(b), 1);
  assert_ptr_equal(ts_block_write(b, 0)->buffer, ts_func_param(f, 1));
  free(roundtrip(f));
  ts_func_free(f);
  /* Header items in any order; regions may name the block's own allocs. */
  const char *order = "func o(A: float32[8]) {\n"
                      "  block b() {\n"
                      "    annotate {\"k\": 1}\n"
                      "    writes(A[0 +: 8], T[0 +: 2])\n"
                      "    alloc T: float32[2]\n"
                      "    reads()\n"
                      "    T[0] = float32(1)\n"
                      "  }\n"
                      "}\n";
  f = parse_ok(order);
  text = ts_func_print(f);
  assert_string_equal(text, "func o(A: float32[8]) {\n"
                            "  block b() {\n"
                            "    reads()\n"
                            "    writes(A[0 +: 8], T[0 +: 2])\n"
                            "    alloc T: float32[2]\n"
                            "    annotate {\"k\": 1}\n"
                            "    T[0] = float32(1)\n"
                            "  }\n"
                            "}\n");
  free(text);
  free(roundtrip(f));
  ts_func_free(f);
}

/* Comments, blank lines, tabs and CRLF line ends are accepted. */
static void test_layout_freedom(void **state) {
  (void)state;
  const char *in =
      "# a comment\r\n\r\nfunc   f ( A :float32[ 4 ] )# trailing\r\n"
      "{\tfor i in range(4){A[i]=cast(float32,i)#x\r\n}}";
  ts_func *f = parse_ok(in);
  char *text = ts_func_print(f);
  assert_string_equal(text, "func f(A: float32[4]) {\n"
                            "  for i in range(4) {\n"
                            "    A[i] = cast(float32, i)\n"
                            "  }\n"
                            "}\n");
  free(text);
  ts_func_free(f);
  /* Function and block names that are not identifiers are quoted. */
  canonical("func \"my-func\"() {\n  block \"a b\"() {\n    reads()\n"
            "    writes()\n  }\n}\n");
}

/* ---- statement and expression printing ---- */

static void test_print_pieces(void **state) {
  (void)state;
  ts_func *f = build_matmul();
  ts_stmt *r = ts_func_find_block(f, "C");
  char *s = ts_stmt_print(r);
  assert_string_equal(
      s, "block C(vi: spatial(128) = i, vj: spatial(128) = j, vk: reduce(128) "
         "= k) {\n"
         "  reads(C[vi, vj], A[vi, vk], B[vk, vj])\n"
         "  writes(C[vi, vj])\n"
         "  init {\n"
         "    C[vi, vj] = float32(0)\n"
         "  }\n"
         "  C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]\n"
         "}\n");
  free(s);
  s = ts_expr_print(ts_store_value(ts_block_body(ts_realize_block(r))));
  assert_string_equal(s, "C[vi, vj] + A[vi, vk] * B[vk, vj]");
  free(s);
  /* A copy prints the same bytes. */
  ts_func *g = ts_func_copy(f);
  char *t1 = ts_func_print(f), *t2 = ts_func_print(g);
  assert_string_equal(t1, t2);
  free(t1);
  free(t2);
  ts_func_free(g);
  ts_func_free(f);
}

/* ---- golden files ---- */

static char *read_file(const char *path, size_t *len) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return NULL;
  fseek(fp, 0, SEEK_END);
  long n = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  size_t got = fread(buf, 1, (size_t)n, fp);
  fclose(fp);
  buf[got] = 0;
  *len = got;
  return buf;
}

static void test_golden(void **state) {
  (void)state;
  const char *dir = TS_SOURCE_DIR "/tests/tir/golden";
  DIR *d = opendir(dir);
  assert_non_null(d);
  int files = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t n = strlen(e->d_name);
    if (n < 5 || strcmp(e->d_name + n - 4, ".tir") != 0) continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    size_t len;
    char *text = read_file(path, &len);
    assert_non_null(text);
    ts_func *f = NULL;
    ts_error err;
    int rc = ts_func_parse_file(path, &f, &err);
    if (rc != TS_OK) print_error("%s: %s\n", path, err.msg);
    assert_int_equal(rc, TS_OK);
    char *out = ts_func_print(f);
    if (strcmp(out, text) != 0)
      print_error("%s is not canonical; printed:\n%s", path, out);
    assert_string_equal(out, text);
    free(roundtrip(f));
    free(out);
    free(text);
    ts_func_free(f);
    files++;
  }
  closedir(d);
  assert_true(files >= 6);
  ts_func *f = (ts_func *)1;
  ts_error err;
  assert_int_equal(
      ts_func_parse_file(TS_SOURCE_DIR "/no/such/file.tir", &f, &err), TS_EIO);
  assert_null(f);
}

/* ---- the operator library ---- */

static const char *const op_specs[] = {
    "matmul M=16 N=8 K=4",
    "matmul M=8 N=8 K=8 transpose_a=1 transpose_b=1 dtype=int8 out_dtype=int32",
    "matmul M=4 N=4 K=4 dtype=float16",
    "batch_matmul B=2 M=4 N=4 K=4 dtype=bfloat16",
    "batch_matmul B=2 M=4 N=8 K=4 transpose_b=1 dtype=float64",
    "dense M=4 N=4 K=4 bias=1",
    "dense M=4 N=8 K=4 bias=0 dtype=uint8 out_dtype=int32",
    "conv2d_nchw N=1 H=8 W=8 CI=4 CO=4 KH=3 KW=3 stride=2 pad=1 dilation=2 "
    "groups=2",
    "conv2d_nchw N=1 H=6 W=6 CI=2 CO=2 KH=1 KW=1",
    "conv2d_nhwc N=1 H=8 W=8 CI=4 CO=4 KH=3 KW=3 pad=1 dtype=float16",
    "conv2d_nhwc N=2 H=5 W=5 CI=2 CO=3 KH=3 KW=3 stride=2 dtype=int8",
    "depthwise_conv2d_nhwc N=1 H=8 W=8 C=4 KH=3 KW=3 pad=1",
    "depthwise_conv2d_nhwc N=1 H=8 W=8 C=4 KH=3 KW=3 stride=2 dtype=bfloat16",
    "conv2d_transpose_nchw N=1 H=4 W=4 CI=2 CO=2 KH=3 KW=3 stride=2 pad=1",
    "conv2d_transpose_nchw N=1 H=3 W=3 CI=1 CO=2 KH=2 KW=2",
    "pool2d_nhwc N=1 H=8 W=8 C=4 KH=2 KW=2 stride=2 kind=avg",
    "pool2d_nhwc N=1 H=8 W=8 C=4 KH=3 KW=3 pad=1 kind=max dtype=int8",
    "softmax N=4 D=16",
    "softmax N=2 D=8 dtype=float16",
    "layer_norm N=4 D=16 dtype=float16",
    "layer_norm N=2 D=8",
    "elementwise op=gelu shape=4x8",
    "elementwise op=relu shape=16 dtype=int8",
    "elementwise op=add shape=2x3x4",
    "elementwise op=mul shape=8 dtype=bfloat16",
    "elementwise op=sigmoid shape=4",
    "elementwise op=tanh shape=4 dtype=float64",
    "reduce op=max N=4 D=8",
    "reduce op=sum N=4 D=8 dtype=int32",
    "transpose shape=2x3x4 perm=2x0x1",
    "transpose shape=4x8 perm=1x0 dtype=float16",
    "layout_transform N=1 C=32 H=4 W=4 src=NCHW dst=NCHW16c",
    "layout_transform N=1 C=4 H=2 W=3 src=NHWC dst=NCHW",
    "pad shape=4x4 before=1x2 after=0x1",
    "pad shape=2x3x4 before=0x1x0 after=1x0x2 dtype=int8",
};

static void test_every_operator(void **state) {
  (void)state;
  const char *const *names = ts_op_names();
  assert_non_null(names);
  int n_ops = 0;
  for (; names[n_ops]; n_ops++) {
    /* Every operator has at least two specs here. */
    int specs = 0;
    size_t len = strlen(names[n_ops]);
    for (size_t k = 0; k < sizeof op_specs / sizeof op_specs[0]; k++)
      if (strncmp(op_specs[k], names[n_ops], len) == 0 &&
          op_specs[k][len] == ' ')
        specs++;
    if (specs < 2)
      print_error("operator %s has %d specs\n", names[n_ops], specs);
    assert_true(specs >= 2);
  }
  assert_true(n_ops >= 10);
  for (size_t k = 0; k < sizeof op_specs / sizeof op_specs[0]; k++) {
    ts_workload *w = NULL;
    ts_error err;
    int rc = ts_workload_from_spec(op_specs[k], &w, &err);
    if (rc != TS_OK) print_error("%s: %s\n", op_specs[k], err.msg);
    assert_int_equal(rc, TS_OK);
    char *text = roundtrip(w->func);
    ts_func *g = parse_ok(text);
    assert_true(ts_func_equal(g, w->func));
    assert_true(ts_hash128_eq(ts_func_hash(g), ts_func_hash(w->func)));
    free(text);
    ts_func_free(g);
    ts_workload_free(w);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matmul_example),
      cmocka_unit_test(test_every_kind),
      cmocka_unit_test(test_statement_lists),
      cmocka_unit_test(test_loop_kinds),
      cmocka_unit_test(test_annotations),
      cmocka_unit_test(test_buffer_options),
      cmocka_unit_test(test_vectors),
      cmocka_unit_test(test_float_literals),
      cmocka_unit_test(test_int_literals),
      cmocka_unit_test(test_unary_minus),
      cmocka_unit_test(test_name_collisions),
      cmocka_unit_test(test_shadowing_input),
      cmocka_unit_test(test_deep_nesting),
      cmocka_unit_test(test_precedence),
      cmocka_unit_test(test_region_inference),
      cmocka_unit_test(test_layout_freedom),
      cmocka_unit_test(test_print_pieces),
      cmocka_unit_test(test_golden),
      cmocka_unit_test(test_every_operator),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
