/*
 * test_core.c — the core of tir/: arena, dtypes and 16-bit float
 * conversions, expression constructors and their folding, statements,
 * blocks and annotations, the node map, traversal, substitution and deep
 * copies.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tir/tir.h"

static void test_arena(void **state) {
  (void)state;
  ts_arena *a = ts_arena_create();
  char *p = ts_arena_alloc(a, 10);
  for (int i = 0; i < 10; i++) assert_int_equal(p[i], 0);
  assert_int_equal((uintptr_t)p % 16, 0);
  /* Big allocations and many small ones all stay valid. */
  char *big = ts_arena_alloc(a, 1 << 20);
  memset(big, 7, 1 << 20);
  char *strs[1000];
  for (int i = 0; i < 1000; i++) strs[i] = ts_arena_printf(a, "s%d", i);
  for (int i = 0; i < 1000; i++) {
    char want[16];
    snprintf(want, sizeof want, "s%d", i);
    assert_string_equal(strs[i], want);
  }
  assert_int_equal(big[12345], 7);
  assert_true(ts_arena_bytes(a) >= (1 << 20));
  assert_null(ts_arena_strdup(a, NULL));
  assert_string_equal(ts_arena_strndup(a, "abcdef", 3), "abc");
  ts_arena_destroy(a);
}

static void test_dtype_parse_print(void **state) {
  (void)state;
  const char *names[] = {
      "int8",   "int16",  "int32",      "int64",    "uint8",   "uint16",
      "uint32", "uint64", "float16",    "bfloat16", "float32", "float64",
      "bool",   "handle", "float32x16", "int8x64",  "boolx4"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    ts_dtype t;
    assert_int_equal(ts_dtype_parse(names[i], strlen(names[i]), &t), TS_OK);
    char buf[32];
    assert_string_equal(ts_dtype_str(t, buf), names[i]);
  }
  const char *bad[] = {
      "",         "float",   "float31",       "int7",         "bfloat32",
      "int8x0",   "int8x",   "float32x70000", "int999999999", "x",
      "floaty32", "uint128", "int8x16x2"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ts_dtype t;
    assert_int_equal(ts_dtype_parse(bad[i], strlen(bad[i]), &t), TS_EINVAL);
  }
  assert_int_equal(ts_dtype_elem_bytes(TS_BOOL), 1);
  assert_int_equal(ts_dtype_elem_bytes(TS_BFLOAT16), 2);
  assert_true(ts_dtype_is_float(TS_BFLOAT16));
  assert_false(ts_dtype_is_float(TS_INT32));
  assert_true(ts_dtype_is_signed(TS_INT8));
  assert_false(ts_dtype_is_signed(TS_UINT8));
}

static void test_half_conversions(void **state) {
  (void)state;
  /* Exact values survive. */
  float exact[] = {0.0f, -0.0f, 1.0f, -2.5f, 0.5f, 65504.0f, 3.0f, 1024.0f};
  for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++) {
    assert_true(ts_f16_to_f32(ts_f32_to_f16(exact[i])) == exact[i]);
    if (exact[i] != 65504.0f) /* needs 11 significant bits: not bf16 */
      assert_true(ts_bf16_to_f32(ts_f32_to_bf16(exact[i])) == exact[i]);
  }
  /* Known bit patterns. */
  assert_int_equal(ts_f32_to_f16(1.0f), 0x3c00);
  assert_int_equal(ts_f32_to_bf16(1.0f), 0x3f80);
  assert_int_equal(ts_f32_to_f16(65536.0f), 0x7c00);       /* overflow -> inf */
  assert_int_equal(ts_f32_to_f16(5.9604645e-08f), 0x0001); /* min subnormal */
  assert_true(ts_f16_to_f32(0x0001) == 5.9604645e-08f);
  assert_true(isnan(ts_f16_to_f32(ts_f32_to_f16(NAN))));
  assert_true(isnan(ts_bf16_to_f32(ts_f32_to_bf16(NAN))));
  assert_true(isinf(ts_bf16_to_f32(ts_f32_to_bf16(INFINITY))));
  /* Round to nearest even: 1 + 2^-8 is halfway between two bf16 values. */
  assert_int_equal(ts_f32_to_bf16(1.0f + 1.0f / 256), 0x3f80);
  assert_int_equal(ts_f32_to_bf16(1.0f + 3.0f / 256), 0x3f82);
  /* Every float16 pattern round-trips through float32. */
  for (uint32_t h = 0; h < 0x10000; h++) {
    float f = ts_f16_to_f32((uint16_t)h);
    if (isnan(f)) continue;
    assert_int_equal(ts_f32_to_f16(f), h);
  }
}

static void test_expr_folding(void **state) {
  (void)state;
  ts_arena *a = ts_arena_create();
  ts_expr *i = ts_var(a, "i", TS_INDEX);
  ts_expr *c3 = ts_index(a, 3), *c4 = ts_index(a, 4);
  int64_t v;
  assert_true(ts_expr_is_const_int(ts_add(a, c3, c4), &v));
  assert_int_equal(v, 7);
  assert_true(ts_expr_is_const_int(ts_floordiv(a, ts_index(a, -7), c3), &v));
  assert_int_equal(v, -3);
  assert_true(ts_expr_is_const_int(ts_floormod(a, ts_index(a, -7), c3), &v));
  assert_int_equal(v, 2);
  assert_true(ts_expr_is_const_int(ts_div(a, ts_index(a, -7), c3), &v));
  assert_int_equal(v, -2);
  assert_true(ts_expr_is_const_int(ts_mod(a, ts_index(a, -7), c3), &v));
  assert_int_equal(v, -1);
  /* Division by zero is not folded (the interpreter reports it). */
  assert_int_equal(ts_expr_kind_of(ts_div(a, c3, ts_index(a, 0))), TS_EXPR_DIV);
  /* Identities. */
  assert_ptr_equal(ts_add(a, i, ts_index(a, 0)), i);
  assert_ptr_equal(ts_add(a, ts_index(a, 0), i), i);
  assert_ptr_equal(ts_mul(a, i, ts_index(a, 1)), i);
  assert_true(ts_expr_is_const_int(ts_mul(a, i, ts_index(a, 0)), &v) && v == 0);
  assert_ptr_equal(ts_floordiv(a, i, ts_index(a, 1)), i);
  assert_true(ts_expr_is_const_int(ts_floormod(a, i, ts_index(a, 1)), &v) &&
              v == 0);
  assert_ptr_equal(ts_sub(a, i, ts_index(a, 0)), i);
  /* Raw constructors do not fold. */
  assert_int_equal(ts_expr_kind_of(ts_binary_raw(a, TS_EXPR_ADD, c3, c4)),
                   TS_EXPR_ADD);
  /* Integer wrap-around of narrow types. */
  ts_expr *x = ts_add(a, ts_int(a, TS_INT8, 100), ts_int(a, TS_INT8, 100));
  assert_int_equal(ts_expr_int_value(x), -56);
  x = ts_sub(a, ts_int(a, TS_UINT8, 1), ts_int(a, TS_UINT8, 2));
  assert_int_equal(ts_expr_int_value(x), 255);
  /* Float folding rounds to the dtype. */
  x = ts_add(a, ts_float(a, TS_FLOAT32, 0.1), ts_float(a, TS_FLOAT32, 0.2));
  assert_true(ts_expr_float_value(x) == (double)(0.1f + 0.2f));
  x = ts_float(a, TS_BFLOAT16, 1.0 + 1.0 / 512);
  assert_true(ts_expr_float_value(x) == 1.0);
  /* Comparisons and logic. */
  x = ts_lt(a, c3, c4);
  assert_true(ts_dtype_is_bool(ts_expr_dtype(x)) && ts_expr_int_value(x) == 1);
  ts_expr *b = ts_var(a, "b", TS_BOOL);
  assert_ptr_equal(ts_and(a, ts_bool(a, true), b), b);
  assert_ptr_equal(ts_or(a, ts_bool(a, false), b), b);
  assert_int_equal(ts_expr_int_value(ts_and(a, ts_bool(a, false), b)), 0);
  assert_ptr_equal(ts_not(a, ts_not(a, b)), b);
  assert_ptr_equal(ts_select(a, ts_bool(a, true), i, c3), i);
  /* Casts. */
  x = ts_cast(a, TS_FLOAT32, ts_int(a, TS_INT32, 3));
  assert_int_equal(ts_expr_kind_of(x), TS_EXPR_FLOAT);
  assert_true(ts_expr_float_value(x) == 3.0);
  x = ts_cast(a, TS_INT8, ts_int(a, TS_INT32, 300));
  assert_int_equal(ts_expr_int_value(x), 44);
  assert_ptr_equal(ts_cast(a, TS_INDEX, i), i);
  x = ts_cast(a, TS_FLOAT32, i);
  assert_int_equal(ts_expr_kind_of(x), TS_EXPR_CAST);
  assert_ptr_equal(ts_expr_operand(x, 0), i);
  ts_arena_destroy(a);
}

static void test_expr_structure(void **state) {
  (void)state;
  ts_arena *a = ts_arena_create();
  int64_t shape[2] = {4, 8};
  ts_buffer *buf = ts_buffer_new(a, "A", TS_FLOAT32, shape, 2);
  ts_expr *i = ts_var(a, "i", TS_INDEX), *j = ts_var(a, "j", TS_INDEX);
  ts_expr *idx[2] = {i, ts_ramp(a, j, ts_index(a, 1), 8)};
  ts_expr *ld = ts_load(a, buf, idx, 2);
  assert_int_equal(ts_expr_dtype(ld).lanes, 8);
  assert_int_equal(ts_expr_n_operands(ld), 2);
  assert_ptr_equal(ts_expr_buffer(ld), buf);
  ts_expr *args[1] = {ts_float(a, TS_FLOAT32, 1)};
  ts_expr *call = ts_call(a, TS_FLOAT32, "exp", args, 1);
  assert_string_equal(ts_expr_call_name(call), "exp");
  assert_int_equal(ts_expr_n_operands(call), 1);
  const ts_intrinsic_info *info = ts_intrinsic_lookup("fma");
  assert_non_null(info);
  assert_int_equal(info->n_args, 3);
  assert_null(ts_intrinsic_lookup("no_such_intrinsic"));
  assert_int_equal(ts_intrinsic_lookup("if_then_else")->rule,
                   TS_INTRIN_SAME_AS_ARG1);
  ts_expr *x = ts_var(a, "x", TS_INDEX);
  ts_expr *let = ts_let(a, x, i, ts_add(a, x, j));
  assert_ptr_equal(ts_expr_let_var(let), x);
  assert_int_equal(ts_expr_n_operands(let), 2);
  /* Rebuild shares when nothing changed and builds new nodes otherwise. */
  ts_expr *sum = ts_add(a, i, j);
  ts_expr *ops[2] = {i, j};
  assert_ptr_equal(ts_expr_rebuild(a, sum, ops), sum);
  ops[1] = i;
  ts_expr *r = ts_expr_rebuild(a, sum, ops);
  assert_ptr_not_equal(r, sum);
  assert_ptr_equal(ts_expr_operand(r, 1), i);
  assert_string_equal(ts_expr_kind_name(TS_EXPR_FLOORMOD), "floormod");
  ts_arena_destroy(a);
}

static void test_buffer(void **state) {
  (void)state;
  ts_arena *a = ts_arena_create();
  int64_t shape[3] = {2, 3, 4};
  ts_buffer *b = ts_buffer_new(a, "X", TS_FLOAT16, shape, 3);
  assert_int_equal(ts_buffer_elems(b), 24);
  assert_int_equal(ts_buffer_bytes(b), 48);
  assert_int_equal(ts_buffer_stride(b, 0), 12);
  assert_int_equal(ts_buffer_stride(b, 2), 1);
  assert_null(ts_buffer_strides(b));
  assert_string_equal(ts_buffer_scope(b), "global");
  assert_int_equal(ts_buffer_align(b), TS_DEFAULT_ALIGN);
  int64_t strides[3] = {20, 5, 1};
  ts_buffer_set_strides(a, b, strides);
  assert_int_equal(ts_buffer_stride(b, 1), 5);
  assert_int_equal(ts_buffer_storage_elems(b), 20 + 10 + 3 + 1);
  ts_buffer_set_scope(a, b, "shared");
  assert_string_equal(ts_buffer_scope(b), "shared");
  ts_buffer_set_strides(a, b, NULL);
  assert_null(ts_buffer_strides(b));
  ts_arena_destroy(a);
}

/* Builds: for i in 0..n { block B(vi = i) { Out[vi] = In[vi] * 2 } }. */
static ts_func *build_scale(int64_t n) {
  ts_func *f = ts_func_new("scale");
  ts_arena *a = ts_func_arena(f);
  ts_buffer *in = ts_buffer_new(a, "In", TS_FLOAT32, &n, 1);
  ts_buffer *out = ts_buffer_new(a, "Out", TS_FLOAT32, &n, 1);
  ts_func_add_param(f, in);
  ts_func_add_param(f, out);
  ts_expr *i = ts_var(a, "i", TS_INDEX), *vi = ts_var(a, "vi", TS_INDEX);
  ts_block *blk = ts_block_new(a, "B");
  ts_block_add_iter_var(a, blk, vi, (ts_range){ts_index(a, 0), ts_index(a, n)},
                        TS_ITER_SPATIAL);
  ts_expr *val = ts_mul(a, ts_load(a, in, &vi, 1), ts_float(a, TS_FLOAT32, 2));
  ts_block_set_body(blk, ts_store(a, out, &vi, 1, val));
  ts_range pt = {vi, ts_index(a, 1)};
  ts_region rd = {in, 1, &pt}, wr = {out, 1, &pt};
  ts_block_set_regions(a, blk, &rd, 1, &wr, 1);
  ts_stmt *realize = ts_block_realize(a, blk, &i, 1, NULL);
  ts_stmt *loop = ts_for(a, i, ts_index(a, 0), ts_index(a, n), TS_FOR_SERIAL,
                         NULL, realize);
  ts_func_set_body(f, loop);
  return f;
}

static void test_stmt_and_block(void **state) {
  (void)state;
  ts_func *f = build_scale(16);
  ts_arena *a = ts_func_arena(f);
  ts_stmt *loop = ts_func_body(f);
  assert_int_equal(ts_stmt_kind_of(loop), TS_STMT_FOR);
  assert_int_equal(ts_for_kind_of(loop), TS_FOR_SERIAL);
  assert_null(ts_for_thread_tag(loop));
  ts_stmt *realize = ts_for_body(loop);
  ts_block *blk = ts_realize_block(realize);
  assert_string_equal(ts_block_name(blk), "B");
  assert_int_equal(ts_block_n_iters(blk), 1);
  assert_int_equal(ts_block_iter_kind(blk, 0), TS_ITER_SPATIAL);
  assert_ptr_equal(ts_realize_value(realize, 0), ts_for_var(loop));
  assert_null(ts_realize_predicate(realize));
  assert_int_equal(ts_block_n_reads(blk), 1);
  assert_string_equal(ts_buffer_name(ts_block_read(blk, 0)->buffer), "In");
  /* Loop kinds and annotations. */
  ts_for_set_kind(a, loop, TS_FOR_THREAD, "threadIdx.x");
  assert_string_equal(ts_for_thread_tag(loop), "threadIdx.x");
  ts_for_set_kind(a, loop, TS_FOR_PARALLEL, NULL);
  assert_null(ts_for_thread_tag(loop));
  ts_for_annotate(a, loop, ts_ann_int("pragma_auto_unroll_max_step", 16));
  ts_for_annotate(a, loop, ts_ann_string("note", "hello"));
  ts_for_annotate(a, loop, ts_ann_int("pragma_auto_unroll_max_step", 64));
  assert_int_equal(ts_for_n_annotations(loop), 2);
  assert_int_equal(
      ts_for_find_annotation(loop, "pragma_auto_unroll_max_step")->i, 64);
  assert_string_equal(ts_for_find_annotation(loop, "note")->s, "hello");
  assert_true(ts_for_unannotate(loop, "note"));
  assert_false(ts_for_unannotate(loop, "note"));
  assert_int_equal(ts_for_n_annotations(loop), 1);
  ts_block_annotate(a, blk, ts_ann_float("w", 0.5));
  assert_true(ts_block_find_annotation(blk, "w")->f == 0.5);
  ts_func_set_attr(f, ts_ann_string("target", "llvm"));
  assert_string_equal(ts_func_find_attr(f, "target")->s, "llvm");
  assert_int_equal(ts_func_n_params(f), 2);
  assert_string_equal(ts_stmt_kind_name(TS_STMT_BLOCK_REALIZE), "block");
  assert_string_equal(ts_for_kind_name(TS_FOR_VECTORIZED), "vectorized");
  assert_string_equal(ts_iter_kind_name(TS_ITER_REDUCE), "reduce");
  ts_func_free(f);
}

static void test_node_map(void **state) {
  (void)state;
  ts_node_map *m = ts_node_map_create();
  int keys[5000];
  for (int i = 0; i < 5000; i++) ts_node_map_put(m, &keys[i], &keys[4999 - i]);
  assert_int_equal(ts_node_map_size(m), 5000);
  for (int i = 0; i < 5000; i++)
    assert_ptr_equal(ts_node_map_get(m, &keys[i]), &keys[4999 - i]);
  ts_node_map_put(m, &keys[0], NULL);
  assert_int_equal(ts_node_map_size(m), 5000);
  int other;
  assert_null(ts_node_map_get(m, &other));
  ts_node_map_destroy(m);
}

typedef struct counts {
  int stmts, exprs, vars;
} counts;
static bool count_stmt(void *ctx, ts_stmt *s) {
  ((counts *)ctx)->stmts++;
  return true;
}
static void count_var(void *ctx, ts_expr *e) {
  if (ts_expr_kind_of(e) == TS_EXPR_VAR) ((counts *)ctx)->vars++;
}
static void count_expr(void *ctx, ts_expr *e) {
  ((counts *)ctx)->exprs++;
  ts_expr_walk(e, count_var, ctx);
}

static void test_walk(void **state) {
  (void)state;
  ts_func *f = build_scale(8);
  counts c = {0, 0, 0};
  ts_visitor v = {count_stmt, NULL, count_expr, &c};
  ts_stmt_walk(ts_func_body(f), &v);
  /* for, block-realize, store */
  assert_int_equal(c.stmts, 3);
  /* loop min/extent (2), iter value (1), iter dom (2), regions (4),
   * store index + value (2) */
  assert_int_equal(c.exprs, 11);
  /* i (iter value), vi in regions (2), store index vi, load index vi */
  assert_int_equal(c.vars, 5);
  ts_func_free(f);
}

static void test_substitute(void **state) {
  (void)state;
  ts_arena *a = ts_arena_create();
  ts_expr *i = ts_var(a, "i", TS_INDEX), *j = ts_var(a, "j", TS_INDEX);
  ts_expr *e = ts_add(a, ts_mul(a, i, ts_index(a, 4)), j);
  ts_node_map *m = ts_node_map_create();
  ts_node_map_put(m, i, ts_index(a, 2));
  ts_node_map_put(m, j, ts_index(a, 3));
  int64_t v;
  assert_true(ts_expr_is_const_int(ts_expr_substitute(a, e, m, NULL), &v));
  assert_int_equal(v, 11);
  /* Unchanged sub-trees are shared. */
  ts_node_map *m2 = ts_node_map_create();
  ts_expr *k = ts_var(a, "k", TS_INDEX);
  ts_node_map_put(m2, k, i);
  assert_ptr_equal(ts_expr_substitute(a, e, m2, NULL), e);
  ts_node_map_destroy(m);
  ts_node_map_destroy(m2);
  ts_arena_destroy(a);
}

static void test_func_copy(void **state) {
  (void)state;
  ts_func *f = build_scale(8);
  ts_func *g = ts_func_copy(f);
  ts_func_free(f); /* the copy must not point into f's arena */
  assert_string_equal(ts_func_name(g), "scale");
  assert_int_equal(ts_func_n_params(g), 2);
  ts_stmt *loop = ts_func_body(g);
  ts_stmt *realize = ts_for_body(loop);
  ts_block *blk = ts_realize_block(realize);
  /* The copied iter value is the copied loop var. */
  assert_ptr_equal(ts_realize_value(realize, 0), ts_for_var(loop));
  ts_stmt *store = ts_block_body(blk);
  assert_ptr_equal(ts_store_buffer(store), ts_func_param(g, 1));
  assert_ptr_equal(ts_store_index(store, 0), ts_block_iter_var(blk, 0));
  assert_ptr_equal(ts_block_read(blk, 0)->buffer, ts_func_param(g, 0));
  assert_ptr_equal(ts_block_read(blk, 0)->ranges[0].min,
                   ts_block_iter_var(blk, 0));
  ts_func_free(g);
}

static void test_stmt_copy_remap(void **state) {
  (void)state;
  ts_func *f = build_scale(8);
  ts_arena *a = ts_func_arena(f);
  ts_stmt *loop = ts_func_body(f);
  ts_node_map *remap = ts_node_map_create();
  ts_stmt *copy = ts_stmt_copy(a, loop, remap);
  assert_ptr_not_equal(ts_for_var(copy), ts_for_var(loop));
  assert_ptr_equal(ts_node_map_get(remap, ts_for_var(loop)), ts_for_var(copy));
  ts_block *b0 = ts_realize_block(ts_for_body(loop));
  ts_block *b1 = ts_realize_block(ts_for_body(copy));
  assert_ptr_equal(ts_node_map_get(remap, b0), b1);
  /* Params are outside the copied tree: kept. */
  assert_ptr_equal(ts_store_buffer(ts_block_body(b1)), ts_func_param(f, 1));
  ts_node_map_destroy(remap);
  /* Substitution replaces the loop var in the iter value and keeps the
   * block's own definitions. */
  ts_node_map *vars = ts_node_map_create();
  ts_node_map_put(vars, ts_for_var(loop), ts_index(a, 5));
  ts_stmt *sub = ts_stmt_substitute(a, ts_for_body(loop), vars, NULL);
  int64_t v;
  assert_true(ts_expr_is_const_int(ts_realize_value(sub, 0), &v) && v == 5);
  assert_ptr_equal(ts_block_iter_var(ts_realize_block(sub), 0),
                   ts_block_iter_var(b0, 0));
  ts_node_map_destroy(vars);
  ts_func_free(f);
}

static void test_errors(void **state) {
  (void)state;
  ts_error err;
  ts_error_clear(&err);
  int rc = TS_ERR(&err, TS_EINVAL, "bad key '%s'", "M");
  assert_int_equal(rc, TS_EINVAL);
  assert_int_equal(err.code, TS_EINVAL);
  assert_string_equal(err.msg, "bad key 'M'");
  assert_non_null(err.src_file);
  assert_null(strchr(err.src_file, '/') == err.src_file ? "absolute" : NULL);
  rc = TS_ERR_AT(&err, TS_EPARSE, 3, 7, "expected '%c'", ')');
  assert_int_equal(err.line, 3);
  assert_int_equal(err.column, 7);
  assert_int_equal(TS_ERR(NULL, TS_ENOMEM, "ignored"), TS_ENOMEM);
  assert_string_equal(ts_strerror(TS_EPARSE), "parse error");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_arena),
      cmocka_unit_test(test_dtype_parse_print),
      cmocka_unit_test(test_half_conversions),
      cmocka_unit_test(test_expr_folding),
      cmocka_unit_test(test_expr_structure),
      cmocka_unit_test(test_buffer),
      cmocka_unit_test(test_stmt_and_block),
      cmocka_unit_test(test_node_map),
      cmocka_unit_test(test_walk),
      cmocka_unit_test(test_substitute),
      cmocka_unit_test(test_func_copy),
      cmocka_unit_test(test_stmt_copy_remap),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
