/*
 * test_hash.c — tests of structural equality and the 128-bit structural
 * hash: independence of names and of construction, sensitivity to every
 * workload parameter and to layout, loop kinds, annotations and block names,
 * the hex form, a golden value that pins the stream format, and a timing
 * print for a matmul.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tir/tir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GOLDEN_MATMUL_HASH "1a7f30263ed938077ce65a0441e33a61"

/* ---- a hand-built matmul ----
 * for i, j, k: block C(vi, vj, vk) { init C[vi,vj] = 0;
 *                                    C[vi,vj] = C[vi,vj] + A[vi,vk]*B[vk,vj] }
 */

typedef struct names {
  const char *func, *a, *b, *c, *i, *j, *k, *vi, *vj, *vk;
} names;

static const names default_names = {"matmul", "A", "B",  "C",  "i",
                                    "j",      "k", "vi", "vj", "vk"};
static const names other_names = {"mm2", "X", "Y",  "Z",  "p",
                                  "q",   "r", "wp", "wq", "wr"};

static ts_region region2(ts_arena *a, ts_buffer *b, ts_expr *x, ts_expr *y) {
  ts_range *r = ts_arena_alloc(a, 2 * sizeof *r);
  r[0] = (ts_range){x, ts_index(a, 1)};
  r[1] = (ts_range){y, ts_index(a, 1)};
  return (ts_region){b, 2, r};
}

static ts_func *build_matmul(int64_t m, int64_t n, int64_t kk, ts_dtype t,
                             const names *nm) {
  ts_func *f = ts_func_new(nm->func);
  ts_arena *a = ts_func_arena(f);
  int64_t sa[2] = {m, kk}, sb[2] = {kk, n}, sc[2] = {m, n};
  ts_buffer *A = ts_buffer_new(a, nm->a, t, sa, 2);
  ts_buffer *B = ts_buffer_new(a, nm->b, t, sb, 2);
  ts_buffer *C = ts_buffer_new(a, nm->c, t, sc, 2);
  ts_func_add_param(f, A);
  ts_func_add_param(f, B);
  ts_func_add_param(f, C);
  ts_expr *i = ts_var(a, nm->i, TS_INDEX), *j = ts_var(a, nm->j, TS_INDEX),
          *k = ts_var(a, nm->k, TS_INDEX);
  ts_expr *vi = ts_var(a, nm->vi, TS_INDEX), *vj = ts_var(a, nm->vj, TS_INDEX),
          *vk = ts_var(a, nm->vk, TS_INDEX);
  ts_block *blk = ts_block_new(a, "C");
  ts_block_add_iter_var(a, blk, vi, (ts_range){ts_index(a, 0), ts_index(a, m)},
                        TS_ITER_SPATIAL);
  ts_block_add_iter_var(a, blk, vj, (ts_range){ts_index(a, 0), ts_index(a, n)},
                        TS_ITER_SPATIAL);
  ts_block_add_iter_var(a, blk, vk, (ts_range){ts_index(a, 0), ts_index(a, kk)},
                        TS_ITER_REDUCE);
  ts_expr *cij[2] = {vi, vj}, *aik[2] = {vi, vk}, *bkj[2] = {vk, vj};
  ts_expr *zero = ts_dtype_is_float(t) ? ts_float(a, t, 0) : ts_int(a, t, 0);
  ts_block_set_init(blk, ts_store(a, C, cij, 2, zero));
  ts_expr *val =
      ts_add(a, ts_load(a, C, cij, 2),
             ts_mul(a, ts_load(a, A, aik, 2), ts_load(a, B, bkj, 2)));
  ts_block_set_body(blk, ts_store(a, C, cij, 2, val));
  ts_region reads[3] = {region2(a, C, vi, vj), region2(a, A, vi, vk),
                        region2(a, B, vk, vj)};
  ts_region writes[1] = {region2(a, C, vi, vj)};
  ts_block_set_regions(a, blk, reads, 3, writes, 1);
  ts_expr *vals[3] = {i, j, k};
  ts_stmt *s = ts_block_realize(a, blk, vals, 3, NULL);
  s = ts_for(a, k, ts_index(a, 0), ts_index(a, kk), TS_FOR_SERIAL, NULL, s);
  s = ts_for(a, j, ts_index(a, 0), ts_index(a, n), TS_FOR_SERIAL, NULL, s);
  s = ts_for(a, i, ts_index(a, 0), ts_index(a, m), TS_FOR_SERIAL, NULL, s);
  ts_block *root = ts_block_new(a, "root");
  ts_block_set_body(root, s);
  ts_func_set_body(f, ts_block_realize(a, root, NULL, 0, NULL));
  return f;
}

static ts_stmt *first_loop(ts_func *f) {
  ts_stmt *root = ts_func_body(f);
  return ts_block_body(ts_realize_block(root));
}

static ts_stmt *block_c(ts_func *f) { return ts_func_find_block(f, "C"); }

static void assert_same(const ts_func *x, const ts_func *y) {
  assert_true(ts_func_equal(x, y));
  assert_true(ts_hash128_eq(ts_func_hash(x), ts_func_hash(y)));
}

static void assert_differ(const ts_func *x, const ts_func *y) {
  assert_false(ts_func_equal(x, y));
  assert_false(ts_hash128_eq(ts_func_hash(x), ts_func_hash(y)));
}

/* ---- tests ---- */

static void test_identical_and_renamed(void **state) {
  (void)state;
  ts_func *f = build_matmul(64, 32, 16, TS_FLOAT32, &default_names);
  ts_func *g = build_matmul(64, 32, 16, TS_FLOAT32, &default_names);
  ts_func *h = build_matmul(64, 32, 16, TS_FLOAT32, &other_names);
  assert_same(f, f);
  assert_same(f, g);
  assert_same(f, h);
  /* renaming in place keeps the hash */
  ts_hash128 before = ts_func_hash(f);
  ts_func_set_name(f, "renamed");
  ts_buffer_set_name(ts_func_arena(f), ts_func_param(f, 0), "Q");
  assert_true(ts_hash128_eq(before, ts_func_hash(f)));
  /* a deep copy is equal */
  ts_func *c = ts_func_copy(f);
  assert_same(f, c);
  ts_func_free(c);
  ts_func_free(f);
  ts_func_free(g);
  ts_func_free(h);
}

static void test_single_changes(void **state) {
  (void)state;
  ts_func *base = build_matmul(64, 32, 16, TS_FLOAT32, &default_names);
  ts_func *v[6] = {
      build_matmul(65, 32, 16, TS_FLOAT32, &default_names),
      build_matmul(64, 33, 16, TS_FLOAT32, &default_names),
      build_matmul(64, 32, 17, TS_FLOAT32, &default_names),
      build_matmul(64, 32, 16, TS_FLOAT64, &default_names),
      build_matmul(64, 32, 16, TS_INT32, &default_names),
      build_matmul(32, 64, 16, TS_FLOAT32, &default_names),
  };
  for (int i = 0; i < 6; i++) {
    assert_differ(base, v[i]);
    for (int j = 0; j < i; j++) assert_differ(v[i], v[j]);
  }
  for (int i = 0; i < 6; i++) ts_func_free(v[i]);
  ts_hash128 h0 = ts_func_hash(base);
  ts_arena *a = ts_func_arena(base);

  /* each edit changes the hash; undoing it restores the hash */
  ts_stmt *loop = first_loop(base);
  ts_for_set_kind(a, loop, TS_FOR_PARALLEL, NULL);
  assert_false(ts_hash128_eq(h0, ts_func_hash(base)));
  ts_for_set_kind(a, loop, TS_FOR_THREAD, "blockIdx.x");
  ts_hash128 h_thread = ts_func_hash(base);
  assert_false(ts_hash128_eq(h0, h_thread));
  ts_for_set_kind(a, loop, TS_FOR_THREAD, "blockIdx.y");
  assert_false(ts_hash128_eq(h_thread, ts_func_hash(base)));
  ts_for_set_kind(a, loop, TS_FOR_SERIAL, NULL);
  assert_true(ts_hash128_eq(h0, ts_func_hash(base)));

  ts_for_annotate(a, loop, ts_ann_int("unroll", 4));
  ts_hash128 h_ann = ts_func_hash(base);
  assert_false(ts_hash128_eq(h0, h_ann));
  ts_for_annotate(a, loop, ts_ann_int("unroll", 8));
  assert_false(ts_hash128_eq(h_ann, ts_func_hash(base)));
  ts_for_annotate(a, loop, ts_ann_float("unroll", 8.0));
  assert_false(ts_hash128_eq(h_ann, ts_func_hash(base)));
  ts_for_unannotate(loop, "unroll");
  assert_true(ts_hash128_eq(h0, ts_func_hash(base)));

  ts_block *blk = ts_realize_block(block_c(base));
  ts_block_set_name(a, blk, "D");
  assert_false(ts_hash128_eq(h0, ts_func_hash(base)));
  ts_block_set_name(a, blk, "C");
  ts_block_annotate(a, blk, ts_ann_string("meta", "x"));
  assert_false(ts_hash128_eq(h0, ts_func_hash(base)));
  ts_block_unannotate(blk, "meta");
  assert_true(ts_hash128_eq(h0, ts_func_hash(base)));

  ts_func_set_attr(base, ts_ann_int("global_symbol", 1));
  assert_false(ts_hash128_eq(h0, ts_func_hash(base)));

  /* buffer layout: strides, scope, alignment */
  ts_func *g = build_matmul(64, 32, 16, TS_FLOAT32, &default_names);
  ts_hash128 g0 = ts_func_hash(g);
  ts_buffer *A = ts_func_param(g, 0);
  int64_t strides[2] = {32, 1};
  ts_buffer_set_strides(ts_func_arena(g), A, strides);
  assert_false(ts_hash128_eq(g0, ts_func_hash(g)));
  ts_buffer_set_strides(ts_func_arena(g), A, NULL);
  assert_true(ts_hash128_eq(g0, ts_func_hash(g)));
  ts_buffer_set_scope(ts_func_arena(g), A, "shared");
  assert_false(ts_hash128_eq(g0, ts_func_hash(g)));
  ts_buffer_set_scope(ts_func_arena(g), A, "global");
  ts_buffer_set_align(A, 128);
  assert_false(ts_hash128_eq(g0, ts_func_hash(g)));
  ts_buffer_set_align(A, TS_DEFAULT_ALIGN);
  assert_true(ts_hash128_eq(g0, ts_func_hash(g)));

  /* a block predicate and an iter kind */
  ts_stmt *rc = block_c(g);
  ts_expr *pred = ts_lt(ts_func_arena(g), ts_realize_value(rc, 0),
                        ts_index(ts_func_arena(g), 60));
  ts_expr *vals[3] = {ts_realize_value(rc, 0), ts_realize_value(rc, 1),
                      ts_realize_value(rc, 2)};
  ts_realize_set_values(ts_func_arena(g), rc, vals, 3, pred);
  assert_false(ts_hash128_eq(g0, ts_func_hash(g)));
  ts_realize_set_values(ts_func_arena(g), rc, vals, 3, NULL);
  assert_true(ts_hash128_eq(g0, ts_func_hash(g)));
  ts_func_free(g);
  ts_func_free(base);
}

static void test_annotation_order(void **state) {
  (void)state;
  ts_func *f = build_matmul(8, 8, 8, TS_FLOAT32, &default_names);
  ts_func *g = build_matmul(8, 8, 8, TS_FLOAT32, &other_names);
  ts_stmt *lf = first_loop(f), *lg = first_loop(g);
  ts_for_annotate(ts_func_arena(f), lf, ts_ann_int("a", 1));
  ts_for_annotate(ts_func_arena(f), lf, ts_ann_string("b", "x"));
  ts_for_annotate(ts_func_arena(g), lg, ts_ann_string("b", "x"));
  ts_for_annotate(ts_func_arena(g), lg, ts_ann_int("a", 1));
  assert_same(f, g);
  ts_func_free(f);
  ts_func_free(g);
}

/* Two functions that each use an undefined var, in the same places. */
static ts_func *with_free_var(const char *var_name, bool twice) {
  ts_func *f = ts_func_new("f");
  ts_arena *a = ts_func_arena(f);
  int64_t shape[1] = {8};
  ts_buffer *A = ts_buffer_new(a, "A", TS_INT32, shape, 1);
  ts_func_add_param(f, A);
  ts_expr *x = ts_var(a, var_name, TS_INDEX);
  ts_expr *y = twice ? x : ts_var(a, var_name, TS_INDEX);
  ts_expr *i0[1] = {x}, *i1[1] = {y};
  ts_stmt *s[2] = {ts_store(a, A, i0, 1, ts_int(a, TS_INT32, 1)),
                   ts_store(a, A, i1, 1, ts_int(a, TS_INT32, 2))};
  ts_func_set_body(f, ts_seq(a, s, 2));
  return f;
}

static void test_free_vars(void **state) {
  (void)state;
  ts_func *f = with_free_var("x", true), *g = with_free_var("y", true);
  ts_func *h = with_free_var("x", false);
  assert_same(f, g);   /* names do not matter */
  assert_differ(f, h); /* one free var used twice is not two free vars */
  ts_func_free(f);
  ts_func_free(g);
  ts_func_free(h);
}

static void test_hex(void **state) {
  (void)state;
  ts_hash128 h = {0x0123456789abcdefull, 0xfedcba9876543210ull}, back;
  char hex[33];
  ts_hash128_hex(h, hex);
  assert_string_equal(hex, "0123456789abcdeffedcba9876543210");
  assert_int_equal(ts_hash128_parse(hex, &back), TS_OK);
  assert_true(ts_hash128_eq(h, back));
  assert_int_equal(ts_hash128_parse("0123456789ABCDEFFEDCBA9876543210", &back),
                   TS_OK);
  assert_true(ts_hash128_eq(h, back));
  assert_int_equal(ts_hash128_parse("0123", &back), TS_EINVAL);
  assert_int_equal(ts_hash128_parse("0123456789abcdeffedcba98765432100", &back),
                   TS_EINVAL);
  assert_int_equal(ts_hash128_parse("0123456789abcdeffedcba987654321g", &back),
                   TS_EINVAL);
  assert_int_equal(ts_hash128_parse("", &back), TS_EINVAL);
  assert_int_equal(ts_hash128_parse(NULL, &back), TS_EINVAL);
  ts_hash128 x = {1, 2}, y = {1, 3};
  assert_false(ts_hash128_eq(x, y));
  /* round trip of a real hash */
  ts_func *f = build_matmul(16, 16, 16, TS_FLOAT32, &default_names);
  ts_hash128 fh = ts_func_hash(f);
  ts_hash128_hex(fh, hex);
  assert_int_equal(strlen(hex), 32);
  assert_int_equal(ts_hash128_parse(hex, &back), TS_OK);
  assert_true(ts_hash128_eq(fh, back));
  ts_func_free(f);
}

/* The hash of one fixed function. A change here means every stored
 * workload key changes: only update it together with a database migration
 * (or a version bump of the stream format). */
static void test_golden(void **state) {
  (void)state;
  ts_func *f = build_matmul(16, 16, 16, TS_FLOAT32, &default_names);
  char hex[33];
  ts_hash128_hex(ts_func_hash(f), hex);
  printf("golden matmul 16x16x16 hash: %s\n", hex);
  assert_string_equal(hex, GOLDEN_MATMUL_HASH);
  ts_func_free(f);
}

/* Workloads of the operator library: built twice equal; every single
 * parameter change gives a different hash. */
static const char *const base_specs[][12] = {
    {"matmul M=64 N=32 K=16", "matmul M=65 N=32 K=16", "matmul M=64 N=33 K=16",
     "matmul M=64 N=32 K=17", "matmul M=64 N=32 K=16 transpose_a=1",
     "matmul M=64 N=32 K=16 transpose_b=1",
     "matmul M=64 N=32 K=16 dtype=float16",
     "matmul M=64 N=32 K=16 out_dtype=float64", NULL},
    {"batch_matmul B=2 M=8 N=8 K=8", "batch_matmul B=3 M=8 N=8 K=8",
     "batch_matmul B=2 M=8 N=8 K=8 transpose_a=1",
     "batch_matmul B=2 M=8 N=8 K=8 transpose_b=1",
     "batch_matmul B=2 M=8 N=8 K=8 dtype=int8", NULL},
    {"dense M=8 N=8 K=8", "dense M=8 N=8 K=8 bias=0", "dense M=8 N=16 K=8",
     NULL},
    {"conv2d_nchw N=1 H=8 W=8 CI=4 CO=4 KH=3 KW=3",
     "conv2d_nchw N=2 H=8 W=8 CI=4 CO=4 KH=3 KW=3",
     "conv2d_nchw N=1 H=9 W=8 CI=4 CO=4 KH=3 KW=3",
     "conv2d_nchw N=1 H=8 W=9 CI=4 CO=4 KH=3 KW=3",
     "conv2d_nchw N=1 H=8 W=8 CI=8 CO=4 KH=3 KW=3",
     "conv2d_nchw N=1 H=8 W=8 CI=4 CO=8 KH=3 KW=3",
     "conv2d_nchw N=1 H=8 W=8 CI=4 CO=4 KH=1 KW=3",
     "conv2d_nchw N=1 H=8 W=8 CI=4 CO=4 KH=3 KW=1",
     "conv2d_nchw N=1 H=8 W=8 CI=4 CO=4 KH=3 KW=3 stride=2",
     "conv2d_nchw N=1 H=8 W=8 CI=4 CO=4 KH=3 KW=3 pad=1",
     "conv2d_nchw N=1 H=8 W=8 CI=4 CO=4 KH=3 KW=3 dilation=2", NULL},
    {"conv2d_nhwc N=1 H=8 W=8 CI=4 CO=4 KH=3 KW=3",
     "conv2d_nhwc N=1 H=8 W=8 CI=4 CO=4 KH=3 KW=3 groups=2",
     "conv2d_nhwc N=1 H=8 W=8 CI=4 CO=4 KH=3 KW=3 groups=4",
     "conv2d_nhwc N=1 H=8 W=8 CI=4 CO=4 KH=3 KW=3 dtype=float64",
     "conv2d_nhwc N=1 H=8 W=8 CI=4 CO=4 KH=3 KW=3 pad=1 stride=2", NULL},
    {"depthwise_conv2d_nhwc N=1 H=8 W=8 C=4 KH=3 KW=3",
     "depthwise_conv2d_nhwc N=1 H=8 W=8 C=4 KH=3 KW=3 pad=1",
     "depthwise_conv2d_nhwc N=1 H=8 W=8 C=4 KH=3 KW=3 stride=2",
     "depthwise_conv2d_nhwc N=1 H=8 W=8 C=8 KH=3 KW=3", NULL},
    {"conv2d_transpose_nchw N=1 H=4 W=4 CI=2 CO=2 KH=3 KW=3",
     "conv2d_transpose_nchw N=1 H=4 W=4 CI=2 CO=2 KH=3 KW=3 stride=2",
     "conv2d_transpose_nchw N=1 H=4 W=4 CI=2 CO=2 KH=3 KW=3 pad=1", NULL},
    {"pool2d_nhwc N=1 H=8 W=8 C=2 KH=3 KW=3",
     "pool2d_nhwc N=1 H=8 W=8 C=2 KH=3 KW=3 kind=avg",
     "pool2d_nhwc N=1 H=8 W=8 C=2 KH=3 KW=3 stride=2",
     "pool2d_nhwc N=1 H=8 W=8 C=2 KH=3 KW=3 pad=1", NULL},
    {"softmax N=4 D=8", "softmax N=4 D=16", "softmax N=8 D=8",
     "softmax N=4 D=8 dtype=float64", NULL},
    {"layer_norm N=4 D=8", "layer_norm N=4 D=16", NULL},
    {"elementwise op=add shape=4x8", "elementwise op=mul shape=4x8",
     "elementwise op=relu shape=4x8", "elementwise op=gelu shape=4x8",
     "elementwise op=sigmoid shape=4x8", "elementwise op=tanh shape=4x8",
     "elementwise op=add shape=8x4", "elementwise op=add shape=32",
     "elementwise op=add shape=4x8 dtype=int32", NULL},
    {"reduce op=sum N=4 D=8", "reduce op=max N=4 D=8", "reduce op=sum N=4 D=9",
     NULL},
    {"transpose shape=2x3x4 perm=2x0x1", "transpose shape=2x3x4 perm=1x0x2",
     "transpose shape=2x3x5 perm=2x0x1", NULL},
    {"layout_transform N=1 C=32 H=4 W=4",
     "layout_transform N=1 C=32 H=4 W=4 src=NHWC dst=NCHW",
     "layout_transform N=1 C=32 H=4 W=4 dst=NCHW16c", NULL},
    {"pad shape=4x4 before=1x2 after=2x1", "pad shape=4x4 before=2x1 after=2x1",
     "pad shape=4x4 before=1x2 after=1x2", "pad shape=4x5 before=1x2 after=2x1",
     NULL},
};

static ts_workload *build(const char *spec) {
  ts_workload *w = NULL;
  ts_error err;
  int rc = ts_workload_from_spec(spec, &w, &err);
  if (rc != TS_OK) fail_msg("%s: %s", spec, err.msg);
  return w;
}

static void test_workloads(void **state) {
  (void)state;
  enum { MAXW = 16 };
  int total = 0;
  ts_hash128 all[256];
  for (size_t op = 0; op < sizeof base_specs / sizeof base_specs[0]; op++) {
    for (int i = 0; base_specs[op][i]; i++) {
      ts_workload *w = build(base_specs[op][i]);
      ts_workload *again = build(base_specs[op][i]);
      assert_same(w->func, again->func);
      ts_func *copy = ts_func_copy(w->func);
      assert_same(w->func, copy);
      ts_func_free(copy);
      ts_hash128 h = ts_func_hash(w->func);
      for (int j = 0; j < total; j++)
        if (ts_hash128_eq(all[j], h))
          fail_msg("%s has the hash of another workload", base_specs[op][i]);
      all[total++] = h;
      ts_workload_free(w);
      ts_workload_free(again);
    }
  }
  assert_true(total > 50);
}

static void test_timing(void **state) {
  (void)state;
  ts_func *f = build_matmul(1024, 1024, 1024, TS_FLOAT32, &default_names);
  ts_hash128 h = ts_func_hash(f);
  enum { N = 2000 };
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < N; i++) {
    ts_hash128 x = ts_func_hash(f);
    assert_true(ts_hash128_eq(x, h));
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double us = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 +
               (double)(t1.tv_nsec - t0.tv_nsec)) /
              1e3 / N;
  printf("ts_func_hash(matmul): %.2f us per call\n", us);
  ts_func_free(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_identical_and_renamed),
      cmocka_unit_test(test_single_changes),
      cmocka_unit_test(test_annotation_order),
      cmocka_unit_test(test_free_vars),
      cmocka_unit_test(test_hex),
      cmocka_unit_test(test_golden),
      cmocka_unit_test(test_workloads),
      cmocka_unit_test(test_timing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
