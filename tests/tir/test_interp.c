/*
 * test_interp.c — the reference interpreter on hand-built programs: every
 * expression kind and dtype (integer wrap-around, truncating and floor
 * division, 16-bit float rounding, casts), vector ramp/broadcast accesses,
 * strided buffers, block predicates, iter domains and init placement,
 * nested blocks with alloc buffers, allocate, if/let, the laziness of
 * if_then_else, every error path with its code and message, and the speed
 * of a 128x128x128 float32 matmul.
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
#include <time.h>

#include "tir/tir.h"

/* ---- building helpers ---- */

static ts_buffer *param(ts_func *f, const char *name, ts_dtype t, int ndim,
                        int64_t d0, int64_t d1, int64_t d2) {
  int64_t shape[3] = {d0, d1, d2};
  ts_buffer *b = ts_buffer_new(ts_func_arena(f), name, t, shape, ndim);
  ts_func_add_param(f, b);
  return b;
}

static ts_expr *I(ts_arena *a, int64_t v) { return ts_index(a, v); }

static ts_expr *ld1(ts_arena *a, ts_buffer *b, ts_expr *i) {
  return ts_load(a, b, &i, 1);
}
static ts_expr *ld2(ts_arena *a, ts_buffer *b, ts_expr *i, ts_expr *j) {
  ts_expr *ix[2] = {i, j};
  return ts_load(a, b, ix, 2);
}
static ts_stmt *st1(ts_arena *a, ts_buffer *b, ts_expr *i, ts_expr *v) {
  return ts_store(a, b, &i, 1, v);
}
static ts_stmt *st2(ts_arena *a, ts_buffer *b, ts_expr *i, ts_expr *j,
                    ts_expr *v) {
  ts_expr *ix[2] = {i, j};
  return ts_store(a, b, ix, 2, v);
}
static ts_stmt *loop(ts_arena *a, ts_expr *var, int64_t extent, ts_stmt *body) {
  return ts_for(a, var, I(a, 0), I(a, extent), TS_FOR_SERIAL, NULL, body);
}
static ts_stmt *seq2(ts_arena *a, ts_stmt *x, ts_stmt *y) {
  ts_stmt *s[2] = {x, y};
  return ts_seq(a, s, 2);
}
/* A block without iter vars around body. */
static ts_stmt *opaque_block(ts_arena *a, const char *name, ts_stmt *body) {
  ts_block *b = ts_block_new(a, name);
  ts_block_set_body(b, body);
  return ts_block_realize(a, b, NULL, 0, NULL);
}

static int run(ts_func *f, void **args, int n, ts_error *err) {
  ts_error_clear(err);
  return ts_interp_run(f, (void *const *)args, n, NULL, err);
}

/* ---- scalar operator harness: Z[0] = X[0] op Y[0] ---- */

static double binop(ts_expr_kind k, ts_dtype t, double x, double y, int *rc) {
  ts_func *f = ts_func_new("binop");
  ts_arena *a = ts_func_arena(f);
  ts_dtype zt = ts_expr_is_compare(k) || k == TS_EXPR_AND || k == TS_EXPR_OR
                    ? TS_BOOL
                    : t;
  ts_buffer *X = param(f, "X", t, 1, 1, 0, 0),
            *Y = param(f, "Y", t, 1, 1, 0, 0);
  ts_buffer *Z = param(f, "Z", zt, 1, 1, 0, 0);
  ts_expr *v = ts_binary_raw(a, k, ld1(a, X, I(a, 0)), ld1(a, Y, I(a, 0)));
  ts_func_set_body(f, opaque_block(a, "op", st1(a, Z, I(a, 0), v)));
  uint64_t xs = 0, ys = 0, zs = 0;
  ts_host_set(&xs, t, 0, x);
  ts_host_set(&ys, t, 0, y);
  void *args[3] = {&xs, &ys, &zs};
  ts_error err;
  int r = run(f, args, 3, &err);
  if (rc)
    *rc = r;
  else
    assert_int_equal(r, TS_OK);
  ts_func_free(f);
  return ts_host_get(&zs, zt, 0);
}

static double castop(ts_dtype from, ts_dtype to, double x) {
  ts_func *f = ts_func_new("cast");
  ts_arena *a = ts_func_arena(f);
  ts_buffer *X = param(f, "X", from, 1, 1, 0, 0);
  ts_buffer *Z = param(f, "Z", to, 1, 1, 0, 0);
  ts_func_set_body(
      f,
      opaque_block(a, "cast",
                   st1(a, Z, I(a, 0), ts_cast_raw(a, to, ld1(a, X, I(a, 0))))));
  uint64_t xs = 0, zs = 0;
  ts_host_set(&xs, from, 0, x);
  void *args[2] = {&xs, &zs};
  ts_error err;
  assert_int_equal(run(f, args, 2, &err), TS_OK);
  ts_func_free(f);
  return ts_host_get(&zs, to, 0);
}

/* Z[0] = name(X[0], ...) with n float32 (or t) inputs. */
static double callop(const char *name, ts_dtype t, int n, double x0, double x1,
                     double x2, int *rc, ts_error *err) {
  ts_func *f = ts_func_new("call");
  ts_arena *a = ts_func_arena(f);
  ts_buffer *X = param(f, "X", t, 1, 3, 0, 0);
  ts_buffer *Z = param(f, "Z", t, 1, 1, 0, 0);
  ts_expr *args[3];
  for (int i = 0; i < n; i++) args[i] = ld1(a, X, I(a, i));
  ts_func_set_body(
      f, opaque_block(a, "callblk",
                      st1(a, Z, I(a, 0), ts_call(a, t, name, args, n))));
  uint64_t xs[3] = {0}, zs = 0;
  ts_host_set(xs, t, 0, x0);
  ts_host_set(xs, t, 1, x1);
  ts_host_set(xs, t, 2, x2);
  void *bufs[2] = {xs, &zs};
  ts_error local;
  int r = run(f, bufs, 2, err ? err : &local);
  if (rc)
    *rc = r;
  else
    assert_int_equal(r, TS_OK);
  ts_func_free(f);
  return ts_host_get(&zs, t, 0);
}

/* ---- expression semantics ---- */

static void test_integer_wrap(void **state) {
  (void)state;
  assert_int_equal(binop(TS_EXPR_ADD, TS_INT8, 100, 100, NULL), -56);
  assert_int_equal(binop(TS_EXPR_SUB, TS_INT8, -100, 100, NULL), 56);
  assert_int_equal(binop(TS_EXPR_MUL, TS_INT8, -128, -1, NULL), -128);
  assert_int_equal(binop(TS_EXPR_ADD, TS_UINT8, 200, 100, NULL), 44);
  assert_int_equal(binop(TS_EXPR_SUB, TS_UINT8, 1, 2, NULL), 255);
  assert_int_equal(binop(TS_EXPR_MUL, TS_INT16, 300, 300, NULL), 24464);
  assert_int_equal(binop(TS_EXPR_ADD, TS_INT16, 32767, 1, NULL), -32768);
  assert_true(binop(TS_EXPR_SUB, TS_UINT32, 1, 2, NULL) == 4294967295.0);
  assert_true(binop(TS_EXPR_MUL, TS_UINT32, 65536, 65536, NULL) == 0.0);
  assert_true(binop(TS_EXPR_ADD, TS_INT32, 2147483647, 1, NULL) ==
              -2147483648.0);
  assert_true(binop(TS_EXPR_DIV, TS_INT32, -2147483648.0, -1, NULL) ==
              -2147483648.0);
  assert_int_equal(binop(TS_EXPR_MOD, TS_INT32, -2147483648.0, -1, NULL), 0);
  assert_int_equal(binop(TS_EXPR_DIV, TS_INT8, -128, -1, NULL), -128);
  /* unsigned division, min/max and comparisons use unsigned order */
  assert_int_equal(binop(TS_EXPR_DIV, TS_UINT8, 255, 2, NULL), 127);
  assert_true(binop(TS_EXPR_MAX, TS_UINT32, 1, 4294967295.0, NULL) ==
              4294967295.0);
  assert_int_equal(binop(TS_EXPR_MIN, TS_INT32, -1, 1, NULL), -1);
  assert_int_equal(binop(TS_EXPR_GT, TS_UINT8, 255, 1, NULL), 1);
  assert_int_equal(binop(TS_EXPR_LT, TS_INT8, -1, 1, NULL), 1);
  assert_int_equal(
      binop(TS_EXPR_LT, TS_UINT64, 1, 18446744073709551615.0, NULL), 1);
}

static void test_int64_extremes(void **state) {
  (void)state;
  /* 64-bit values read raw (a double cannot hold them). */
  ts_func *f = ts_func_new("i64");
  ts_arena *a = ts_func_arena(f);
  ts_buffer *X = param(f, "X", TS_INT64, 1, 2, 0, 0);
  ts_buffer *Z = param(f, "Z", TS_INT64, 1, 4, 0, 0);
  ts_expr *x0 = ld1(a, X, I(a, 0)), *x1 = ld1(a, X, I(a, 1));
  ts_stmt *s[4] = {
      st1(a, Z, I(a, 0), ts_binary_raw(a, TS_EXPR_ADD, x0, x1)),
      st1(a, Z, I(a, 1),
          ts_binary_raw(a, TS_EXPR_DIV, x0, ts_int(a, TS_INT64, -1))),
      st1(a, Z, I(a, 2),
          ts_binary_raw(a, TS_EXPR_FLOORMOD, x0, ts_int(a, TS_INT64, -1))),
      st1(a, Z, I(a, 3), ts_binary_raw(a, TS_EXPR_MUL, x1, x1)),
  };
  ts_func_set_body(f, opaque_block(a, "b", ts_seq(a, s, 4)));
  int64_t xs[2] = {INT64_MAX, 1}, zs[4];
  void *args[2] = {xs, zs};
  ts_error err;
  assert_int_equal(run(f, args, 2, &err), TS_OK);
  assert_true(zs[0] == INT64_MIN);
  assert_true(zs[1] == -INT64_MAX);
  assert_true(zs[2] == 0);
  assert_true(zs[3] == 1);
  xs[0] = INT64_MIN;
  assert_int_equal(run(f, args, 2, &err), TS_OK);
  assert_true(zs[1] == INT64_MIN); /* INT64_MIN / -1 wraps */
  ts_func_free(f);
}

static void test_division(void **state) {
  (void)state;
  ts_dtype ts[] = {TS_INT8, TS_INT32, TS_INT64};
  for (int i = 0; i < 3; i++) {
    ts_dtype t = ts[i];
    assert_int_equal(binop(TS_EXPR_DIV, t, -7, 2, NULL), -3);
    assert_int_equal(binop(TS_EXPR_MOD, t, -7, 2, NULL), -1);
    assert_int_equal(binop(TS_EXPR_FLOORDIV, t, -7, 2, NULL), -4);
    assert_int_equal(binop(TS_EXPR_FLOORMOD, t, -7, 2, NULL), 1);
    assert_int_equal(binop(TS_EXPR_DIV, t, 7, -2, NULL), -3);
    assert_int_equal(binop(TS_EXPR_MOD, t, 7, -2, NULL), 1);
    assert_int_equal(binop(TS_EXPR_FLOORDIV, t, 7, -2, NULL), -4);
    assert_int_equal(binop(TS_EXPR_FLOORMOD, t, 7, -2, NULL), -1);
    assert_int_equal(binop(TS_EXPR_FLOORDIV, t, -8, 2, NULL), -4);
    assert_int_equal(binop(TS_EXPR_FLOORMOD, t, -8, 2, NULL), 0);
    assert_int_equal(binop(TS_EXPR_FLOORDIV, t, -7, -2, NULL), 3);
    assert_int_equal(binop(TS_EXPR_FLOORMOD, t, -7, -2, NULL), -1);
  }
  assert_int_equal(binop(TS_EXPR_FLOORDIV, TS_UINT8, 7, 2, NULL), 3);
  assert_int_equal(binop(TS_EXPR_FLOORMOD, TS_UINT8, 7, 2, NULL), 1);
  /* floats */
  assert_true(binop(TS_EXPR_FLOORDIV, TS_FLOAT32, -7, 2, NULL) == -4.0);
  assert_true(binop(TS_EXPR_FLOORMOD, TS_FLOAT32, -7, 2, NULL) == 1.0);
  assert_true(binop(TS_EXPR_MOD, TS_FLOAT32, -7, 2, NULL) == -1.0);
  assert_true(binop(TS_EXPR_DIV, TS_FLOAT32, -7, 2, NULL) == -3.5);
  /* float division by zero is IEEE, not a fault */
  int rc;
  assert_true(isinf(binop(TS_EXPR_DIV, TS_FLOAT32, 1, 0, &rc)));
  assert_int_equal(rc, TS_OK);
}

static void test_float_rounding(void **state) {
  (void)state;
  /* float32: every operation rounds to float32 */
  assert_true(binop(TS_EXPR_ADD, TS_FLOAT32, 1.0, 0x1p-24, NULL) == 1.0);
  assert_true(binop(TS_EXPR_ADD, TS_FLOAT32, 16777216.0, 1.0, NULL) ==
              16777216.0);
  assert_true(binop(TS_EXPR_ADD, TS_FLOAT64, 1.0, 0x1p-30, NULL) ==
              1.0 + 0x1p-30);
  assert_true(
      binop(TS_EXPR_MUL, TS_FLOAT32, 1.0 + 0x1p-23, 1.0 + 0x1p-23, NULL) ==
      (double)(float)((1.0 + 0x1p-23) * (1.0 + 0x1p-23)));
  /* bfloat16: 8 significant bits, ties to even */
  assert_true(binop(TS_EXPR_ADD, TS_BFLOAT16, 1.0, 0x1p-8, NULL) == 1.0);
  assert_true(binop(TS_EXPR_ADD, TS_BFLOAT16, 1.0, 3 * 0x1p-8, NULL) ==
              1.015625);
  assert_true(binop(TS_EXPR_MUL, TS_BFLOAT16, 3.0, 1.0 / 3.0, NULL) == 1.0);
  assert_true(binop(TS_EXPR_ADD, TS_BFLOAT16, 256, 1, NULL) == 256);
  /* float16: 11 significant bits, overflow to inf */
  assert_true(binop(TS_EXPR_ADD, TS_FLOAT16, 2048, 1, NULL) == 2048);
  assert_true(binop(TS_EXPR_ADD, TS_FLOAT16, 2048, 3, NULL) == 2052);
  assert_true(binop(TS_EXPR_ADD, TS_FLOAT16, 1.0, 0x1p-11, NULL) == 1.0);
  assert_true(isinf(binop(TS_EXPR_MUL, TS_FLOAT16, 300, 300, NULL)));
  assert_true(binop(TS_EXPR_SUB, TS_FLOAT16, 0.1, 0.2, NULL) ==
              ts_f16_to_f32(
                  ts_f32_to_f16((float)(ts_f16_to_f32(ts_f32_to_f16(0.1f)) -
                                        ts_f16_to_f32(ts_f32_to_f16(0.2f))))));

  /* rounding after every operation: (1 + 2^-30) - 1 is 0 in float32 */
  ts_func *f = ts_func_new("chain");
  ts_arena *a = ts_func_arena(f);
  ts_buffer *X = param(f, "X", TS_FLOAT32, 1, 2, 0, 0);
  ts_buffer *Z = param(f, "Z", TS_FLOAT32, 1, 1, 0, 0);
  ts_expr *x0 = ld1(a, X, I(a, 0)), *x1 = ld1(a, X, I(a, 1));
  ts_func_set_body(
      f, st1(a, Z, I(a, 0),
             ts_binary_raw(a, TS_EXPR_SUB,
                           ts_binary_raw(a, TS_EXPR_ADD, x0, x1), x0)));
  float xs[2] = {1.0f, 0x1p-30f}, z = -1;
  void *args[2] = {xs, &z};
  ts_error err;
  assert_int_equal(run(f, args, 2, &err), TS_OK);
  assert_true(z == 0.0f);
  ts_func_free(f);
}

static void test_minmax_compare_logic(void **state) {
  (void)state;
  assert_true(binop(TS_EXPR_MIN, TS_FLOAT32, NAN, 2.0, NULL) == 2.0);
  assert_true(binop(TS_EXPR_MAX, TS_FLOAT32, -1.0, NAN, NULL) == -1.0);
  assert_true(binop(TS_EXPR_MAX, TS_FLOAT64, -1.5, 2.5, NULL) == 2.5);
  assert_int_equal(binop(TS_EXPR_EQ, TS_FLOAT32, NAN, NAN, NULL), 0);
  assert_int_equal(binop(TS_EXPR_NE, TS_FLOAT32, NAN, NAN, NULL), 1);
  assert_int_equal(binop(TS_EXPR_LE, TS_FLOAT32, 1.0, 1.0, NULL), 1);
  assert_int_equal(binop(TS_EXPR_GE, TS_INT32, 1, 2, NULL), 0);
  assert_int_equal(binop(TS_EXPR_NE, TS_INT32, 1, 2, NULL), 1);
  assert_int_equal(binop(TS_EXPR_EQ, TS_BFLOAT16, 0.5, 0.5, NULL), 1);
  assert_int_equal(binop(TS_EXPR_AND, TS_BOOL, 1, 0, NULL), 0);
  assert_int_equal(binop(TS_EXPR_AND, TS_BOOL, 1, 1, NULL), 1);
  assert_int_equal(binop(TS_EXPR_OR, TS_BOOL, 0, 1, NULL), 1);
  assert_int_equal(binop(TS_EXPR_OR, TS_BOOL, 0, 0, NULL), 0);

  /* not, select (bool buffers hold one byte) */
  ts_func *f = ts_func_new("logic");
  ts_arena *a = ts_func_arena(f);
  ts_buffer *C = param(f, "C", TS_BOOL, 1, 2, 0, 0);
  ts_buffer *Z = param(f, "Z", TS_INT32, 1, 2, 0, 0);
  ts_buffer *N = param(f, "N", TS_BOOL, 1, 2, 0, 0);
  ts_expr *i = ts_var(a, "i", TS_INDEX);
  ts_stmt *body =
      seq2(a,
           st1(a, Z, i,
               ts_select_raw(a, ld1(a, C, i), ts_int(a, TS_INT32, 10),
                             ts_int(a, TS_INT32, 20))),
           st1(a, N, i, ts_not_raw(a, ld1(a, C, i))));
  ts_func_set_body(f, loop(a, i, 2, body));
  unsigned char c[2] = {0, 7}, n[2] = {9, 9};
  int32_t z[2];
  void *args[3] = {c, z, n};
  ts_error err;
  assert_int_equal(run(f, args, 3, &err), TS_OK);
  assert_int_equal(z[0], 20);
  assert_int_equal(z[1], 10);
  assert_int_equal(n[0], 1);
  assert_int_equal(n[1], 0);
  ts_func_free(f);
}

static void test_casts(void **state) {
  (void)state;
  /* float -> int truncates toward zero and saturates; NaN -> 0 */
  assert_int_equal(castop(TS_FLOAT32, TS_INT32, -2.7), -2);
  assert_int_equal(castop(TS_FLOAT32, TS_INT32, 2.7), 2);
  assert_int_equal(castop(TS_FLOAT32, TS_INT8, 300), 127);
  assert_int_equal(castop(TS_FLOAT32, TS_INT8, -300), -128);
  assert_int_equal(castop(TS_FLOAT32, TS_INT8, NAN), 0);
  assert_true(castop(TS_FLOAT32, TS_INT32, 1e30) == 2147483647.0);
  assert_true(castop(TS_FLOAT64, TS_INT32, -1e30) == -2147483648.0);
  assert_int_equal(castop(TS_FLOAT32, TS_UINT8, -5), 0);
  assert_int_equal(castop(TS_FLOAT32, TS_UINT8, 1000), 255);
  assert_int_equal(castop(TS_FLOAT16, TS_INT16, -0.5), 0);
  /* int -> float rounds */
  assert_true(castop(TS_INT32, TS_FLOAT32, 16777217) == 16777216.0);
  assert_true(castop(TS_INT32, TS_BFLOAT16, 257) == 256.0);
  assert_true(castop(TS_UINT32, TS_FLOAT64, 4294967295.0) == 4294967295.0);
  assert_true(castop(TS_INT8, TS_FLOAT16, -128) == -128.0);
  /* to bool: != 0 */
  assert_int_equal(castop(TS_INT32, TS_BOOL, 5), 1);
  assert_int_equal(castop(TS_INT32, TS_BOOL, 0), 0);
  assert_int_equal(castop(TS_FLOAT32, TS_BOOL, 0.5), 1);
  assert_int_equal(castop(TS_FLOAT32, TS_BOOL, -0.0), 0);
  assert_int_equal(castop(TS_BOOL, TS_INT32, 1), 1);
  assert_true(castop(TS_BOOL, TS_FLOAT32, 1) == 1.0);
  /* int -> int wraps */
  assert_int_equal(castop(TS_INT32, TS_INT8, 300), 44);
  assert_int_equal(castop(TS_UINT8, TS_INT32, 200), 200);
  assert_true(castop(TS_INT8, TS_UINT32, -1) == 4294967295.0);
  assert_int_equal(castop(TS_UINT16, TS_INT8, 65535), -1);
  /* float -> float rounds to the target */
  assert_true(castop(TS_FLOAT32, TS_BFLOAT16, 1.0 + 0x1p-8 + 0x1p-12) ==
              1.0 + 0x1p-7);
  assert_true(isinf(castop(TS_FLOAT32, TS_FLOAT16, 65520)));
  assert_true(castop(TS_FLOAT32, TS_FLOAT16, 65504) == 65504);
  assert_true(castop(TS_FLOAT64, TS_FLOAT32, 0.1) == (double)0.1f);
  assert_true(castop(TS_BFLOAT16, TS_FLOAT32, 0.5) == 0.5);
}

static void test_intrinsics(void **state) {
  (void)state;
  struct {
    const char *name;
    double (*ref)(double);
    double x;
  } un[] = {{"exp", exp, 0.5},     {"exp2", exp2, 1.5},    {"log", log, 3.0},
            {"log2", log2, 10.0},  {"log10", log10, 7.0},  {"sqrt", sqrt, 2.0},
            {"tanh", tanh, 0.3},   {"erf", erf, 0.7},      {"sin", sin, 1.0},
            {"cos", cos, 1.0},     {"floor", floor, -1.5}, {"ceil", ceil, -1.5},
            {"trunc", trunc, -1.5}};
  for (size_t i = 0; i < sizeof un / sizeof un[0]; i++) {
    double x = (double)(float)un[i].x;
    double got = callop(un[i].name, TS_FLOAT32, 1, x, 0, 0, NULL, NULL);
    assert_true(got == (double)(float)un[i].ref(x));
  }
  double x = (double)0.3f;
  assert_true(callop("rsqrt", TS_FLOAT32, 1, 4.0, 0, 0, NULL, NULL) == 0.5);
  assert_true(callop("sigmoid", TS_FLOAT32, 1, x, 0, 0, NULL, NULL) ==
              (double)(float)(1.0 / (1.0 + exp(-x))));
  assert_true(callop("sigmoid", TS_FLOAT32, 1, 0, 0, 0, NULL, NULL) == 0.5);
  /* round: half to even */
  assert_true(callop("round", TS_FLOAT32, 1, 2.5, 0, 0, NULL, NULL) == 2.0);
  assert_true(callop("round", TS_FLOAT32, 1, 3.5, 0, 0, NULL, NULL) == 4.0);
  assert_true(callop("round", TS_FLOAT32, 1, -2.5, 0, 0, NULL, NULL) == -2.0);
  assert_true(callop("pow", TS_FLOAT32, 2, 2.0, 10.0, 0, NULL, NULL) == 1024.0);
  assert_true(callop("pow", TS_FLOAT32, 2, 2.0, 0.5, 0, NULL, NULL) ==
              (double)(float)sqrt(2.0));
  assert_true(callop("fma", TS_FLOAT32, 3, 2.0, 3.0, 1.0, NULL, NULL) == 7.0);
  assert_true(callop("fma", TS_FLOAT64, 3, 1.0 + 0x1p-30, 1.0 - 0x1p-30, -1.0,
                     NULL, NULL) == -0x1p-60);
  /* results are rounded to the result dtype */
  assert_true(callop("exp", TS_BFLOAT16, 1, 1.0, 0, 0, NULL, NULL) == 2.71875);
  assert_true(callop("sqrt", TS_FLOAT16, 1, 2.0, 0, 0, NULL, NULL) ==
              ts_f16_to_f32(ts_f32_to_f16((float)sqrt(2.0))));
  assert_true(callop("exp", TS_FLOAT64, 1, 1.0, 0, 0, NULL, NULL) == exp(1.0));
  /* abs on floats and integers (abs(INT_MIN) wraps) */
  assert_true(callop("abs", TS_FLOAT32, 1, -1.25, 0, 0, NULL, NULL) == 1.25);
  assert_int_equal(callop("abs", TS_INT32, 1, -5, 0, 0, NULL, NULL), 5);
  assert_int_equal(callop("abs", TS_INT8, 1, -128, 0, 0, NULL, NULL), -128);
  assert_int_equal(callop("abs", TS_UINT8, 1, 200, 0, 0, NULL, NULL), 200);
  /* log of 0 and sqrt of -1 are IEEE values, not faults */
  assert_true(isinf(callop("log", TS_FLOAT32, 1, 0, 0, 0, NULL, NULL)));
  assert_true(isnan(callop("sqrt", TS_FLOAT32, 1, -1, 0, 0, NULL, NULL)));
}

static void test_let_and_if(void **state) {
  (void)state;
  /* for i: let t = i * 3 { if t % 2 == 0 { Z[i] = t + let u = t in u * u }
   *                        else { Z[i] = -1 } } */
  ts_func *f = ts_func_new("letif");
  ts_arena *a = ts_func_arena(f);
  ts_buffer *Z = param(f, "Z", TS_INT64, 1, 6, 0, 0);
  ts_expr *i = ts_var(a, "i", TS_INDEX), *t = ts_var(a, "t", TS_INDEX);
  ts_expr *u = ts_var(a, "u", TS_INDEX);
  ts_expr *cond = ts_binary_raw(
      a, TS_EXPR_EQ, ts_binary_raw(a, TS_EXPR_MOD, t, I(a, 2)), I(a, 0));
  ts_expr *val = ts_binary_raw(
      a, TS_EXPR_ADD, t, ts_let(a, u, t, ts_binary_raw(a, TS_EXPR_MUL, u, u)));
  ts_stmt *ifs = ts_if(a, cond, st1(a, Z, i, val), st1(a, Z, i, I(a, -1)));
  ts_stmt *lets =
      ts_let_stmt(a, t, ts_binary_raw(a, TS_EXPR_MUL, i, I(a, 3)), ifs);
  ts_func_set_body(f, loop(a, i, 6, lets));
  int64_t z[6];
  void *args[1] = {z};
  ts_error err;
  assert_int_equal(run(f, args, 1, &err), TS_OK);
  for (int k = 0; k < 6; k++) {
    int64_t tv = 3 * k;
    assert_int_equal(z[k], tv % 2 == 0 ? tv + tv * tv : -1);
  }
  ts_func_free(f);
}

/* Z[i] = if_then_else(i < 4, A[i], -1) over i in [0, 6) with A of 4
 * elements: the unchosen branch is never evaluated. select would fault. */
static void test_if_then_else_lazy(void **state) {
  (void)state;
  for (int use_select = 0; use_select < 2; use_select++) {
    ts_func *f = ts_func_new("guard");
    ts_arena *a = ts_func_arena(f);
    ts_buffer *A = param(f, "A", TS_FLOAT32, 1, 4, 0, 0);
    ts_buffer *Z = param(f, "Z", TS_FLOAT32, 1, 6, 0, 0);
    ts_expr *i = ts_var(a, "i", TS_INDEX);
    ts_expr *args3[3] = {ts_lt(a, i, I(a, 4)), ld1(a, A, i),
                         ts_float(a, TS_FLOAT32, -1)};
    ts_expr *v = use_select ? ts_select_raw(a, args3[0], args3[1], args3[2])
                            : ts_call(a, TS_FLOAT32, "if_then_else", args3, 3);
    ts_func_set_body(f, opaque_block(a, "pad", loop(a, i, 6, st1(a, Z, i, v))));
    float av[4] = {1, 2, 3, 4}, z[6];
    void *args[2] = {av, z};
    ts_error err;
    int rc = run(f, args, 2, &err);
    if (use_select) {
      assert_int_equal(rc, TS_ERANGE);
      assert_non_null(strstr(err.msg, "'pad'"));
      assert_non_null(strstr(err.msg, "'A'"));
    } else {
      assert_int_equal(rc, TS_OK);
      float want[6] = {1, 2, 3, 4, -1, -1};
      assert_memory_equal(z, want, sizeof want);
    }
    ts_func_free(f);
  }
}

/* ---- vectors ---- */

static void test_vector_ramp_broadcast(void **state) {
  (void)state;
  /* B[ramp(4*i, 1, 4)] = A[ramp(i, 2, 4)] * broadcast(2, 4) + cast(ramp) */
  ts_func *f = ts_func_new("vec");
  ts_arena *a = ts_func_arena(f);
  ts_buffer *A = param(f, "A", TS_FLOAT32, 1, 16, 0, 0);
  ts_buffer *B = param(f, "B", TS_FLOAT32, 1, 8, 0, 0);
  ts_expr *i = ts_var(a, "i", TS_INDEX);
  ts_expr *src = ts_ramp(a, i, I(a, 2), 4);
  ts_expr *dst = ts_ramp(a, ts_mul(a, i, I(a, 4)), I(a, 1), 4);
  ts_expr *scale = ts_broadcast(a, ts_float(a, TS_FLOAT32, 2), 4);
  ts_expr *lanes = ts_cast_raw(a, TS_DTYPE(TS_DT_FLOAT, 32, 4),
                               ts_ramp(a, I(a, 0), I(a, 100), 4));
  ts_expr *v = ts_binary_raw(
      a, TS_EXPR_ADD, ts_binary_raw(a, TS_EXPR_MUL, ld1(a, A, src), scale),
      lanes);
  assert_int_equal(ts_expr_dtype(v).lanes, 4);
  ts_func_set_body(f, loop(a, i, 2, st1(a, B, dst, v)));
  float av[16], bv[8];
  for (int k = 0; k < 16; k++) av[k] = (float)k;
  void *args[2] = {av, bv};
  ts_error err;
  assert_int_equal(run(f, args, 2, &err), TS_OK);
  for (int ii = 0; ii < 2; ii++)
    for (int l = 0; l < 4; l++)
      assert_true(bv[4 * ii + l] == (float)((ii + 2 * l) * 2 + 100 * l));
  ts_func_free(f);

  /* A vector store reads every lane before writing: A[1:5] = A[0:4]; a
   * broadcast store writes one value to every lane; vector let. */
  f = ts_func_new("shift");
  a = ts_func_arena(f);
  ts_buffer *C = param(f, "C", TS_INT32, 1, 8, 0, 0);
  ts_expr *t = ts_var(a, "t", TS_DTYPE(TS_DT_INT, 32, 4));
  ts_stmt *s1 = st1(a, C, ts_ramp(a, I(a, 1), I(a, 1), 4),
                    ld1(a, C, ts_ramp(a, I(a, 0), I(a, 1), 4)));
  ts_stmt *s2 = ts_let_stmt(
      a, t, ld1(a, C, ts_ramp(a, I(a, 1), I(a, 1), 4)),
      st1(a, C, ts_ramp(a, I(a, 4), I(a, 1), 4),
          ts_binary_raw(a, TS_EXPR_ADD, t,
                        ts_broadcast(a, ts_int(a, TS_INT32, 100), 4))));
  ts_func_set_body(f, seq2(a, s1, s2));
  int32_t cv[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  void *args2[1] = {cv};
  assert_int_equal(run(f, args2, 1, &err), TS_OK);
  /* after s1: 0 0 1 2 3 5 6 7; s2 stores C[1..4] + 100 to C[4..7] */
  int32_t want[8] = {0, 0, 1, 2, 100, 101, 102, 103};
  assert_memory_equal(cv, want, sizeof want);
  ts_func_free(f);

  /* an out-of-bounds lane names the lane and writes nothing */
  f = ts_func_new("oobvec");
  a = ts_func_arena(f);
  ts_buffer *D = param(f, "D", TS_INT32, 1, 4, 0, 0);
  ts_func_set_body(
      f, opaque_block(a, "vst",
                      st1(a, D, ts_ramp(a, I(a, 1), I(a, 1), 4),
                          ts_broadcast(a, ts_int(a, TS_INT32, 9), 4))));
  int32_t dv[4] = {0, 0, 0, 0};
  void *args3[1] = {dv};
  assert_int_equal(run(f, args3, 1, &err), TS_ERANGE);
  assert_non_null(strstr(err.msg, "lane 3"));
  assert_non_null(strstr(err.msg, "D[4]"));
  int32_t zeros[4] = {0};
  assert_memory_equal(dv, zeros, sizeof zeros);
  ts_func_free(f);
}

/* ---- buffers ---- */

static void test_strided_and_storage(void **state) {
  (void)state;
  /* A is 4x4 stored with row stride 8 (padding between rows), B is 4x4
   * column-major (strides 1, 4); B[i, j] = A[i, j] * 10. */
  ts_func *f = ts_func_new("strided");
  ts_arena *a = ts_func_arena(f);
  ts_buffer *A = param(f, "A", TS_FLOAT64, 2, 4, 4, 0);
  ts_buffer *B = param(f, "B", TS_FLOAT64, 2, 4, 4, 0);
  int64_t sa[2] = {8, 1}, sb[2] = {1, 4};
  ts_buffer_set_strides(a, A, sa);
  ts_buffer_set_strides(a, B, sb);
  ts_expr *i = ts_var(a, "i", TS_INDEX), *j = ts_var(a, "j", TS_INDEX);
  ts_func_set_body(
      f,
      loop(a, i, 4,
           loop(a, j, 4,
                st2(a, B, i, j,
                    ts_mul(a, ld2(a, A, i, j), ts_float(a, TS_FLOAT64, 10))))));
  double av[28], bv[16];
  for (int k = 0; k < 28; k++) av[k] = k;
  void *args[2] = {av, bv};
  ts_error err;
  assert_int_equal(run(f, args, 2, &err), TS_OK);
  for (int r = 0; r < 4; r++)
    for (int c = 0; c < 4; c++)
      assert_true(bv[r + 4 * c] == (r * 8 + c) * 10.0);
  ts_func_free(f);

  /* 16-bit floats are stored as bit patterns, bool as one byte */
  f = ts_func_new("store16");
  a = ts_func_arena(f);
  ts_buffer *H = param(f, "H", TS_FLOAT16, 1, 2, 0, 0);
  ts_buffer *G = param(f, "G", TS_BFLOAT16, 1, 2, 0, 0);
  ts_buffer *K = param(f, "K", TS_BOOL, 1, 2, 0, 0);
  ts_stmt *ss[3] = {
      st1(a, H, I(a, 1),
          ts_binary_raw(a, TS_EXPR_ADD, ld1(a, H, I(a, 0)),
                        ld1(a, H, I(a, 0)))),
      st1(a, G, I(a, 1), ts_cast_raw(a, TS_BFLOAT16, ld1(a, H, I(a, 0)))),
      st1(a, K, I(a, 1),
          ts_binary_raw(a, TS_EXPR_LT, ld1(a, H, I(a, 0)),
                        ts_float(a, TS_FLOAT16, 2)))};
  ts_func_set_body(f, ts_seq(a, ss, 3));
  uint16_t hv[2] = {0x3e00 /* 1.5 */, 0}, gv[2] = {0, 0};
  unsigned char kv[2] = {0, 0};
  void *args2[3] = {hv, gv, kv};
  assert_int_equal(run(f, args2, 3, &err), TS_OK);
  assert_int_equal(hv[1], 0x4200); /* 3.0 */
  assert_int_equal(gv[1], 0x3fc0); /* 1.5 */
  assert_int_equal(kv[1], 1);
  ts_func_free(f);
}

/* ---- blocks ---- */

static void test_block_predicate_and_domain(void **state) {
  (void)state;
  /* for i in 8: block B(vi: spatial(5) = i) where i < 5 { Z[vi] = vi + 1 } */
  for (int with_pred = 0; with_pred < 2; with_pred++) {
    ts_func *f = ts_func_new("pred");
    ts_arena *a = ts_func_arena(f);
    ts_buffer *Z = param(f, "Z", TS_INT32, 1, 8, 0, 0);
    ts_expr *i = ts_var(a, "i", TS_INDEX), *vi = ts_var(a, "vi", TS_INDEX);
    ts_block *b = ts_block_new(a, "B");
    ts_block_add_iter_var(a, b, vi, (ts_range){I(a, 0), I(a, 5)},
                          TS_ITER_SPATIAL);
    ts_block_set_body(
        b, st1(a, Z, vi, ts_cast(a, TS_INT32, ts_add(a, vi, I(a, 1)))));
    ts_stmt *r =
        ts_block_realize(a, b, &i, 1, with_pred ? ts_lt(a, i, I(a, 5)) : NULL);
    ts_func_set_body(f, loop(a, i, 8, r));
    int32_t z[8] = {0};
    void *args[1] = {z};
    ts_error err;
    int rc = run(f, args, 1, &err);
    if (with_pred) {
      assert_int_equal(rc, TS_OK);
      int32_t want[8] = {1, 2, 3, 4, 5, 0, 0, 0};
      assert_memory_equal(z, want, sizeof want);
    } else {
      /* iter value 5 is outside the domain [0, 5) */
      assert_int_equal(rc, TS_ERANGE);
      assert_non_null(strstr(err.msg, "block 'B'"));
      assert_non_null(strstr(err.msg, "domain"));
      assert_non_null(strstr(err.msg, "iter var 'vi' has value 5"));
      assert_non_null(strstr(err.msg, "[0, 5)"));
    }
    ts_func_free(f);
  }
}

/* A sum reduction C[i] = sum_k A[i, k] whose reduce loop k (domain
 * [dmin, dmin + 8)) is split into ko (2) and ki (4): the init runs exactly
 * once per output (counted in N), when vk is at its domain minimum. */
static void test_init_split_reduction(void **state) {
  (void)state;
  for (int dmin = 0; dmin <= 3; dmin += 3) {
    ts_func *f = ts_func_new("splitred");
    ts_arena *a = ts_func_arena(f);
    ts_buffer *A = param(f, "A", TS_FLOAT32, 2, 3, 11, 0);
    ts_buffer *C = param(f, "C", TS_FLOAT32, 1, 3, 0, 0);
    ts_buffer *N = param(f, "N", TS_INT32, 1, 3, 0, 0);
    ts_expr *i = ts_var(a, "i", TS_INDEX), *ko = ts_var(a, "ko", TS_INDEX),
            *ki = ts_var(a, "ki", TS_INDEX);
    ts_expr *vi = ts_var(a, "vi", TS_INDEX), *vk = ts_var(a, "vk", TS_INDEX);
    ts_block *b = ts_block_new(a, "C");
    ts_block_add_iter_var(a, b, vi, (ts_range){I(a, 0), I(a, 3)},
                          TS_ITER_SPATIAL);
    ts_block_add_iter_var(a, b, vk, (ts_range){I(a, dmin), I(a, 8)},
                          TS_ITER_REDUCE);
    ts_block_set_init(
        b,
        seq2(a, st1(a, C, vi, ts_float(a, TS_FLOAT32, 0)),
             st1(a, N, vi, ts_add(a, ld1(a, N, vi), ts_int(a, TS_INT32, 1)))));
    ts_block_set_body(
        b, st1(a, C, vi, ts_add(a, ld1(a, C, vi), ld2(a, A, vi, vk))));
    ts_expr *vals[2] = {
        i, ts_add(a, ts_add(a, ts_mul(a, ko, I(a, 4)), ki), I(a, dmin))};
    ts_stmt *r = ts_block_realize(a, b, vals, 2, NULL);
    ts_func_set_body(
        f, opaque_block(a, "root",
                        loop(a, i, 3, loop(a, ko, 2, loop(a, ki, 4, r)))));
    float av[33], c[3] = {99, 99, 99};
    int32_t n[3] = {0, 0, 0};
    for (int k = 0; k < 33; k++) av[k] = (float)(k % 7) - 3;
    void *args[3] = {av, c, n};
    ts_error err;
    assert_int_equal(run(f, args, 3, &err), TS_OK);
    for (int r0 = 0; r0 < 3; r0++) {
      float want = 0;
      for (int k = dmin; k < dmin + 8; k++) want += av[r0 * 11 + k];
      assert_true(c[r0] == want);
      assert_int_equal(n[r0], 1);
    }
    ts_func_free(f);
  }
}

/* Nested blocks: an outer block per row allocates a temporary T (zeroed per
 * execution) that inner blocks accumulate into without init, then copy out.
 * If T were not re-zeroed each outer execution, rows would accumulate. */
static void test_nested_blocks_alloc(void **state) {
  (void)state;
  ts_func *f = ts_func_new("nested");
  ts_arena *a = ts_func_arena(f);
  ts_buffer *A = param(f, "A", TS_INT32, 2, 3, 4, 0);
  ts_buffer *Z = param(f, "Z", TS_INT32, 2, 3, 4, 0);
  int64_t tshape[1] = {4};
  ts_buffer *T = ts_buffer_new(a, "T", TS_INT32, tshape, 1);
  ts_expr *i = ts_var(a, "i", TS_INDEX), *j = ts_var(a, "j", TS_INDEX),
          *j2 = ts_var(a, "j2", TS_INDEX);
  ts_expr *vi = ts_var(a, "vi", TS_INDEX), *vj = ts_var(a, "vj", TS_INDEX),
          *vj2 = ts_var(a, "vj2", TS_INDEX);
  ts_expr *ui = ts_var(a, "ui", TS_INDEX), *ui2 = ts_var(a, "ui2", TS_INDEX);

  ts_block *acc = ts_block_new(a, "acc");
  ts_block_add_iter_var(a, acc, ui, (ts_range){I(a, 0), I(a, 3)},
                        TS_ITER_SPATIAL);
  ts_block_add_iter_var(a, acc, vj, (ts_range){I(a, 0), I(a, 4)},
                        TS_ITER_SPATIAL);
  ts_block_set_body(acc,
                    st1(a, T, vj, ts_add(a, ld1(a, T, vj), ld2(a, A, ui, vj))));
  ts_expr *av[2] = {vi, j};
  ts_block *out = ts_block_new(a, "out");
  ts_block_add_iter_var(a, out, ui2, (ts_range){I(a, 0), I(a, 3)},
                        TS_ITER_SPATIAL);
  ts_block_add_iter_var(a, out, vj2, (ts_range){I(a, 0), I(a, 4)},
                        TS_ITER_SPATIAL);
  ts_block_set_body(
      out,
      st2(a, Z, ui2, vj2, ts_mul(a, ld1(a, T, vj2), ts_int(a, TS_INT32, 2))));
  ts_expr *ov[2] = {vi, j2};
  ts_block *row = ts_block_new(a, "row");
  ts_block_add_iter_var(a, row, vi, (ts_range){I(a, 0), I(a, 3)},
                        TS_ITER_SPATIAL);
  ts_block_add_alloc(a, row, T);
  ts_block_set_body(
      row, seq2(a, loop(a, j, 4, ts_block_realize(a, acc, av, 2, NULL)),
                loop(a, j2, 4, ts_block_realize(a, out, ov, 2, NULL))));
  ts_func_set_body(f, loop(a, i, 3, ts_block_realize(a, row, &i, 1, NULL)));
  int32_t in[12], z[12];
  for (int k = 0; k < 12; k++) in[k] = k - 5;
  void *args[2] = {in, z};
  ts_error err;
  assert_int_equal(run(f, args, 2, &err), TS_OK);
  for (int k = 0; k < 12; k++) assert_int_equal(z[k], 2 * in[k]);
  ts_func_free(f);
}

/* allocate T[2] inside a loop: zeroed for every execution. */
static void test_allocate_stmt(void **state) {
  (void)state;
  ts_func *f = ts_func_new("alloc");
  ts_arena *a = ts_func_arena(f);
  ts_buffer *Z = param(f, "Z", TS_FLOAT32, 1, 4, 0, 0);
  int64_t tshape[1] = {2};
  ts_buffer *T = ts_buffer_new(a, "T", TS_FLOAT32, tshape, 1);
  ts_expr *i = ts_var(a, "i", TS_INDEX);
  ts_expr *fi = ts_cast(a, TS_FLOAT32, i);
  ts_stmt *body =
      seq2(a, st1(a, T, I(a, 1), ts_add(a, ld1(a, T, I(a, 1)), fi)),
           st1(a, Z, i, ts_add(a, ld1(a, T, I(a, 1)), ld1(a, T, I(a, 0)))));
  ts_func_set_body(f, loop(a, i, 4, ts_allocate(a, T, body)));
  float z[4];
  void *args[1] = {z};
  ts_error err;
  assert_int_equal(run(f, args, 1, &err), TS_OK);
  for (int k = 0; k < 4; k++) assert_true(z[k] == (float)k);
  ts_func_free(f);
}

/* Loops of every kind run serially; a nonzero loop minimum; an evaluate
 * statement; a zero-dim buffer. */
static void test_loop_kinds(void **state) {
  (void)state;
  ts_func *f = ts_func_new("kinds");
  ts_arena *a = ts_func_arena(f);
  ts_buffer *Z = param(f, "Z", TS_INT64, 1, 16, 0, 0);
  ts_buffer *S = ts_buffer_new(a, "S", TS_INT64, NULL, 0);
  ts_func_add_param(f, S);
  ts_expr *v[4];
  ts_for_kind kinds[4] = {TS_FOR_PARALLEL, TS_FOR_VECTORIZED, TS_FOR_UNROLLED,
                          TS_FOR_THREAD};
  /* Z[counter] = linear index, with a running counter in S[] */
  ts_expr *lin = ts_index(a, 0);
  for (int k = 0; k < 4; k++) {
    v[k] = ts_var(a, "v", TS_INDEX);
    lin = ts_add(a, ts_mul(a, lin, I(a, 2)), ts_sub(a, v[k], I(a, 1)));
  }
  ts_stmt *body =
      seq2(a, st1(a, Z, ts_load(a, S, NULL, 0), lin),
           ts_store(a, S, NULL, 0, ts_add(a, ts_load(a, S, NULL, 0), I(a, 1))));
  body = seq2(a, ts_evaluate(a, ts_add(a, lin, I(a, 1))), body);
  for (int k = 3; k >= 0; k--)
    body = ts_for(a, v[k], I(a, 1), I(a, 2), kinds[k],
                  kinds[k] == TS_FOR_THREAD ? "threadIdx.x" : NULL, body);
  ts_func_set_body(f, body);
  int64_t z[16], s = 0;
  void *args[2] = {z, &s};
  ts_error err;
  assert_int_equal(run(f, args, 2, &err), TS_OK);
  assert_int_equal(s, 16);
  for (int k = 0; k < 16; k++) assert_int_equal(z[k], k);
  ts_func_free(f);
}

/* ---- errors ---- */

static ts_func *oob_func(bool store, int64_t extent) {
  ts_func *f = ts_func_new("oob");
  ts_arena *a = ts_func_arena(f);
  ts_buffer *A = param(f, "A", TS_FLOAT32, 2, 4, 8, 0);
  ts_buffer *B = param(f, "B", TS_FLOAT32, 2, 4, 8, 0);
  ts_expr *i = ts_var(a, "i", TS_INDEX), *j = ts_var(a, "j", TS_INDEX);
  ts_expr *vi = ts_var(a, "vi", TS_INDEX), *vj = ts_var(a, "vj", TS_INDEX);
  ts_block *b = ts_block_new(a, "copy");
  ts_block_add_iter_var(a, b, vi, (ts_range){I(a, 0), I(a, 4)},
                        TS_ITER_SPATIAL);
  ts_block_add_iter_var(a, b, vj, (ts_range){I(a, 0), I(a, extent)},
                        TS_ITER_SPATIAL);
  ts_expr *ld = ld2(a, A, vi, store ? vj : ts_add(a, vj, I(a, 1)));
  ts_block_set_body(b, st2(a, B, vi, store ? ts_add(a, vj, I(a, 1)) : vj, ld));
  ts_expr *vals[2] = {i, j};
  ts_func_set_body(
      f,
      loop(a, i, 4, loop(a, j, extent, ts_block_realize(a, b, vals, 2, NULL))));
  return f;
}

static void test_error_oob(void **state) {
  (void)state;
  float av[32] = {0}, bv[40];
  void *args[2] = {av, bv};
  ts_error err;
  for (int store = 0; store < 2; store++) {
    ts_func *f = oob_func(store, 8);
    assert_int_equal(run(f, args, 2, &err), TS_ERANGE);
    assert_int_equal(err.code, TS_ERANGE);
    assert_non_null(strstr(err.msg, "block 'copy'"));
    assert_non_null(strstr(err.msg, store ? "store" : "load"));
    assert_non_null(strstr(err.msg, store ? "'B'" : "'A'"));
    assert_non_null(strstr(err.msg, store ? "B[0, 8]" : "A[0, 8]"));
    assert_non_null(strstr(err.msg, "dim 1"));
    assert_non_null(strstr(err.msg, "index 8"));
    assert_non_null(strstr(err.msg, "[0, 8)"));
    ts_func_free(f);
    /* the same program one column narrower is fine */
    f = oob_func(store, 7);
    assert_int_equal(run(f, args, 2, &err), TS_OK);
    ts_func_free(f);
  }
  /* a negative index is out of bounds too */
  ts_func *f = ts_func_new("neg");
  ts_arena *a = ts_func_arena(f);
  ts_buffer *A = param(f, "A", TS_INT8, 1, 4, 0, 0);
  ts_func_set_body(
      f, opaque_block(a, "negblk", st1(a, A, I(a, -1), ts_int(a, TS_INT8, 1))));
  int8_t small[4];
  void *args1[1] = {small};
  assert_int_equal(run(f, args1, 1, &err), TS_ERANGE);
  assert_non_null(strstr(err.msg, "index -1 of dim 0"));
  assert_non_null(strstr(err.msg, "negblk"));
  ts_func_free(f);
}

static void test_error_div_zero(void **state) {
  (void)state;
  ts_expr_kind ks[4] = {TS_EXPR_DIV, TS_EXPR_MOD, TS_EXPR_FLOORDIV,
                        TS_EXPR_FLOORMOD};
  for (int k = 0; k < 4; k++) {
    int rc = 0;
    binop(ks[k], TS_INT32, 7, 0, &rc);
    assert_int_equal(rc, TS_ERANGE);
    binop(ks[k], TS_UINT8, 7, 0, &rc);
    assert_int_equal(rc, TS_ERANGE);
  }
  /* the message names the block and the operation */
  ts_func *f = ts_func_new("dz");
  ts_arena *a = ts_func_arena(f);
  ts_buffer *X = param(f, "X", TS_INT32, 1, 2, 0, 0);
  ts_func_set_body(
      f, opaque_block(a, "divider",
                      st1(a, X, I(a, 0),
                          ts_binary_raw(a, TS_EXPR_FLOORDIV, ld1(a, X, I(a, 0)),
                                        ld1(a, X, I(a, 1))))));
  int32_t xv[2] = {5, 0};
  void *args[1] = {xv};
  ts_error err;
  assert_int_equal(run(f, args, 1, &err), TS_ERANGE);
  assert_non_null(strstr(err.msg, "block 'divider'"));
  assert_non_null(strstr(err.msg, "division by zero"));
  assert_non_null(strstr(err.msg, "floordiv"));
  assert_int_equal(xv[0], 5); /* nothing stored */
  ts_func_free(f);
}

static void test_error_step_limit(void **state) {
  (void)state;
  ts_func *f = ts_func_new("steps");
  ts_arena *a = ts_func_arena(f);
  ts_buffer *Z = param(f, "Z", TS_INT64, 1, 1, 0, 0);
  ts_expr *i = ts_var(a, "i", TS_INDEX);
  ts_func_set_body(
      f, opaque_block(a, "spin", loop(a, i, 1000, st1(a, Z, I(a, 0), i))));
  int64_t z = -1;
  void *args[1] = {&z};
  ts_error err;
  ts_interp_options opts = {.max_steps = 100};
  assert_int_equal(ts_interp_run(f, args, 1, &opts, &err), TS_ERANGE);
  assert_non_null(strstr(err.msg, "step limit"));
  assert_non_null(strstr(err.msg, "spin"));
  assert_true(z >= 90 && z < 100); /* partially written */
  opts.max_steps = 2000;           /* realize + loop + 1000 stores fit */
  assert_int_equal(ts_interp_run(f, args, 1, &opts, &err), TS_OK);
  assert_int_equal(z, 999);
  /* NULL err is fine too */
  opts.max_steps = 5;
  assert_int_equal(ts_interp_run(f, args, 1, &opts, NULL), TS_ERANGE);
  ts_func_free(f);
}

static void test_error_unknown_intrinsic(void **state) {
  (void)state;
  int rc = 0;
  ts_error err;
  callop("frobnicate", TS_FLOAT32, 1, 1, 0, 0, &rc, &err);
  assert_int_equal(rc, TS_EUNSUPPORTED);
  assert_non_null(strstr(err.msg, "frobnicate"));
  assert_non_null(strstr(err.msg, "callblk"));
  /* wrong arity of a known intrinsic */
  callop("exp", TS_FLOAT32, 2, 1, 2, 0, &rc, &err);
  assert_int_equal(rc, TS_EINVAL);
  assert_non_null(strstr(err.msg, "'exp'"));
  /* address_of is not supported yet */
  ts_func *f = ts_func_new("addr");
  ts_arena *a = ts_func_arena(f);
  ts_buffer *A = param(f, "A", TS_FLOAT32, 1, 4, 0, 0);
  ts_expr *idx = I(a, 0);
  ts_expr *arg = ts_address_of(a, A, &idx, 1);
  ts_func_set_body(
      f, opaque_block(a, "ab",
                      ts_evaluate(a, ts_call(a, TS_INT32, "tgt_op", &arg, 1))));
  float av[4];
  void *args[1] = {av};
  assert_int_equal(run(f, args, 1, &err), TS_EUNSUPPORTED);
  ts_func_free(f);
  f = ts_func_new("addr2");
  a = ts_func_arena(f);
  A = param(f, "A", TS_FLOAT32, 1, 4, 0, 0);
  idx = I(a, 0);
  ts_func_set_body(f, ts_evaluate(a, ts_address_of(a, A, &idx, 1)));
  assert_int_equal(run(f, args, 1, &err), TS_EUNSUPPORTED);
  assert_non_null(strstr(err.msg, "address_of"));
  ts_func_free(f);
}

static void test_error_bad_arguments(void **state) {
  (void)state;
  ts_func *f = oob_func(false, 7);
  float av[32], bv[32];
  void *args[2] = {av, bv};
  ts_error err;
  assert_int_equal(run(f, args, 1, &err), TS_EINVAL);
  assert_non_null(strstr(err.msg, "2 buffer arguments"));
  assert_int_equal(run(f, args, 3, &err), TS_EINVAL);
  void *missing[2] = {av, NULL};
  assert_int_equal(run(f, missing, 2, &err), TS_EINVAL);
  assert_non_null(strstr(err.msg, "'B'"));
  assert_int_equal(run(f, NULL, 2, &err), TS_EINVAL);
  assert_int_equal(ts_interp_run(NULL, args, 2, NULL, &err), TS_EINVAL);
  ts_func_free(f);
  /* a function without a body does nothing */
  f = ts_func_new("empty");
  assert_int_equal(run(f, NULL, 0, &err), TS_OK);
  ts_func_free(f);
}

/* Programs the verifier would reject still give errors, not crashes. */
static void test_error_malformed(void **state) {
  (void)state;
  ts_error err;
  float buf[64];
  void *args[2] = {buf, buf};

  /* a var used outside its scope */
  ts_func *f = ts_func_new("scope");
  ts_arena *a = ts_func_arena(f);
  ts_buffer *A = param(f, "A", TS_FLOAT32, 1, 4, 0, 0);
  ts_expr *i = ts_var(a, "i", TS_INDEX), *ghost = ts_var(a, "ghost", TS_INDEX);
  ts_func_set_body(f,
                   loop(a, i, 4, st1(a, A, ghost, ts_float(a, TS_FLOAT32, 1))));
  assert_int_equal(run(f, args, 1, &err), TS_EINVAL);
  assert_non_null(strstr(err.msg, "ghost"));
  ts_func_free(f);

  /* a buffer that is neither a parameter nor allocated */
  f = ts_func_new("nobuf");
  a = ts_func_arena(f);
  int64_t shape[1] = {4};
  ts_buffer *stray = ts_buffer_new(a, "stray", TS_FLOAT32, shape, 1);
  ts_func_set_body(f, st1(a, stray, I(a, 0), ts_float(a, TS_FLOAT32, 1)));
  assert_int_equal(run(f, NULL, 0, &err), TS_EINVAL);
  assert_non_null(strstr(err.msg, "stray"));
  ts_func_free(f);

  /* wrong index count, mismatched operand types, iter value count */
  f = ts_func_new("arity");
  a = ts_func_arena(f);
  A = param(f, "A", TS_FLOAT32, 2, 4, 4, 0);
  ts_func_set_body(f, st1(a, A, I(a, 0), ts_float(a, TS_FLOAT32, 1)));
  assert_int_equal(run(f, args, 1, &err), TS_EINVAL);
  assert_non_null(strstr(err.msg, "'A'"));
  ts_func_free(f);

  f = ts_func_new("types");
  a = ts_func_arena(f);
  A = param(f, "A", TS_FLOAT32, 1, 4, 0, 0);
  ts_func_set_body(f,
                   st1(a, A, I(a, 0),
                       ts_binary_raw(a, TS_EXPR_ADD, ts_float(a, TS_FLOAT32, 1),
                                     ts_int(a, TS_INT32, 1))));
  assert_int_equal(run(f, args, 1, &err), TS_EINVAL);
  ts_func_free(f);

  f = ts_func_new("store_type");
  a = ts_func_arena(f);
  A = param(f, "A", TS_FLOAT32, 1, 4, 0, 0);
  ts_func_set_body(f, st1(a, A, I(a, 0), ts_float(a, TS_FLOAT64, 1)));
  assert_int_equal(run(f, args, 1, &err), TS_EINVAL);
  ts_func_free(f);

  f = ts_func_new("iters");
  a = ts_func_arena(f);
  ts_block *b = ts_block_new(a, "few");
  ts_block_add_iter_var(a, b, ts_var(a, "v", TS_INDEX),
                        (ts_range){I(a, 0), I(a, 4)}, TS_ITER_SPATIAL);
  ts_func_set_body(f, ts_block_realize(a, b, NULL, 0, NULL));
  assert_int_equal(run(f, NULL, 0, &err), TS_EINVAL);
  assert_non_null(strstr(err.msg, "few"));
  ts_func_free(f);

  /* an allocation over 1 GiB is refused */
  f = ts_func_new("huge");
  a = ts_func_arena(f);
  int64_t big[2] = {1 << 20, 1 << 10};
  ts_buffer *H = ts_buffer_new(a, "H", TS_FLOAT32, big, 2);
  b = ts_block_new(a, "hog");
  ts_block_add_alloc(a, b, H);
  ts_block_set_body(b, st2(a, H, I(a, 0), I(a, 0), ts_float(a, TS_FLOAT32, 1)));
  ts_func_set_body(f, ts_block_realize(a, b, NULL, 0, NULL));
  assert_int_equal(run(f, NULL, 0, &err), TS_ENOMEM);
  assert_non_null(strstr(err.msg, "'H'"));
  assert_non_null(strstr(err.msg, "hog"));
  ts_func_free(f);

  /* extents whose product overflows */
  f = ts_func_new("overflow");
  a = ts_func_arena(f);
  int64_t vast[3] = {INT64_C(1) << 40, INT64_C(1) << 40, 4};
  H = ts_buffer_new(a, "V", TS_FLOAT32, vast, 3);
  ts_func_set_body(f, ts_allocate(a, H, ts_evaluate(a, I(a, 0))));
  assert_int_equal(run(f, NULL, 0, &err), TS_ENOMEM);
  ts_func_free(f);

  /* a handle-typed buffer cannot be stored */
  f = ts_func_new("handles");
  a = ts_func_arena(f);
  param(f, "P", TS_HANDLE, 1, 4, 0, 0);
  assert_int_equal(run(f, args, 1, &err), TS_EUNSUPPORTED);
  ts_func_free(f);
}

/* ---- speed ---- */

static ts_func *matmul_func(int n) {
  ts_func *f = ts_func_new("matmul");
  ts_arena *a = ts_func_arena(f);
  ts_buffer *A = param(f, "A", TS_FLOAT32, 2, n, n, 0);
  ts_buffer *B = param(f, "B", TS_FLOAT32, 2, n, n, 0);
  ts_buffer *C = param(f, "C", TS_FLOAT32, 2, n, n, 0);
  ts_expr *i = ts_var(a, "i", TS_INDEX), *j = ts_var(a, "j", TS_INDEX),
          *k = ts_var(a, "k", TS_INDEX);
  ts_expr *vi = ts_var(a, "vi", TS_INDEX), *vj = ts_var(a, "vj", TS_INDEX),
          *vk = ts_var(a, "vk", TS_INDEX);
  ts_block *b = ts_block_new(a, "C");
  ts_block_add_iter_var(a, b, vi, (ts_range){I(a, 0), I(a, n)},
                        TS_ITER_SPATIAL);
  ts_block_add_iter_var(a, b, vj, (ts_range){I(a, 0), I(a, n)},
                        TS_ITER_SPATIAL);
  ts_block_add_iter_var(a, b, vk, (ts_range){I(a, 0), I(a, n)}, TS_ITER_REDUCE);
  ts_block_set_init(b, st2(a, C, vi, vj, ts_float(a, TS_FLOAT32, 0)));
  ts_block_set_body(
      b, st2(a, C, vi, vj,
             ts_add(a, ld2(a, C, vi, vj),
                    ts_mul(a, ld2(a, A, vi, vk), ld2(a, B, vk, vj)))));
  ts_expr *vals[3] = {i, j, k};
  ts_stmt *nest =
      loop(a, i, n,
           loop(a, j, n, loop(a, k, n, ts_block_realize(a, b, vals, 3, NULL))));
  ts_func_set_body(f, opaque_block(a, "root", nest));
  return f;
}

static void test_matmul_speed(void **state) {
  (void)state;
  enum { N = 128 };
  ts_func *f = matmul_func(N);
  float *A = malloc(sizeof(float) * N * N), *B = malloc(sizeof(float) * N * N),
        *C = malloc(sizeof(float) * N * N), *W = malloc(sizeof(float) * N * N);
  ts_host_fill_random(A, TS_FLOAT32, N * N, 1);
  ts_host_fill_random(B, TS_FLOAT32, N * N, 2);
  for (int i = 0; i < N * N; i++) C[i] = NAN; /* init must overwrite */
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      float s = 0;
      for (int k = 0; k < N; k++) s += A[i * N + k] * B[k * N + j];
      W[i * N + j] = s;
    }
  void *args[3] = {A, B, C};
  ts_error err;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  assert_int_equal(run(f, args, 3, &err), TS_OK);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double secs = (double)(t1.tv_sec - t0.tv_sec) +
                1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  print_message(
      "[ info     ] interpreter: 128x128x128 float32 matmul in %.3f s\n", secs);
  /* same order of summation: bit-exact */
  assert_memory_equal(C, W, sizeof(float) * N * N);
  free(A);
  free(B);
  free(C);
  free(W);
  ts_func_free(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_integer_wrap),
      cmocka_unit_test(test_int64_extremes),
      cmocka_unit_test(test_division),
      cmocka_unit_test(test_float_rounding),
      cmocka_unit_test(test_minmax_compare_logic),
      cmocka_unit_test(test_casts),
      cmocka_unit_test(test_intrinsics),
      cmocka_unit_test(test_let_and_if),
      cmocka_unit_test(test_if_then_else_lazy),
      cmocka_unit_test(test_vector_ramp_broadcast),
      cmocka_unit_test(test_strided_and_storage),
      cmocka_unit_test(test_block_predicate_and_domain),
      cmocka_unit_test(test_init_split_reduction),
      cmocka_unit_test(test_nested_blocks_alloc),
      cmocka_unit_test(test_allocate_stmt),
      cmocka_unit_test(test_loop_kinds),
      cmocka_unit_test(test_error_oob),
      cmocka_unit_test(test_error_div_zero),
      cmocka_unit_test(test_error_step_limit),
      cmocka_unit_test(test_error_unknown_intrinsic),
      cmocka_unit_test(test_error_bad_arguments),
      cmocka_unit_test(test_error_malformed),
      cmocka_unit_test(test_matmul_speed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
