/*
 * test_verify.c — tests of the verifier: a well-formed matmul and every
 * operator of the library verify clean; each kind of error (undefined vars,
 * dtype mismatches, non-bool conditions, out-of-bounds accesses, misused
 * iter vars, index counts, undeclared buffers, bad loops) is reported with
 * a message naming the block or loop and the problem; guarded accesses are
 * not reported.
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

/* A matmul C[M, N] += A[M, K] * B[K, N] whose parts tests edit. */
typedef struct mm {
  ts_func *f;
  ts_arena *a;
  ts_buffer *A, *B, *C;
  ts_expr *i, *j, *k, *vi, *vj, *vk;
  ts_block *blk, *root;
  ts_stmt *realize, *loop_i, *loop_j, *loop_k;
} mm;

/* loop_m / dom_m: extent of the i loop and of vi's domain (normally M). */
static void mm_build(mm *x, int64_t m, int64_t loop_m, int64_t dom_m) {
  int64_t n = 16, kk = 8;
  memset(x, 0, sizeof *x);
  x->f = ts_func_new("matmul");
  ts_arena *a = x->a = ts_func_arena(x->f);
  int64_t sa[2] = {m, kk}, sb[2] = {kk, n}, sc[2] = {m, n};
  x->A = ts_buffer_new(a, "A", TS_FLOAT32, sa, 2);
  x->B = ts_buffer_new(a, "B", TS_FLOAT32, sb, 2);
  x->C = ts_buffer_new(a, "C", TS_FLOAT32, sc, 2);
  ts_func_add_param(x->f, x->A);
  ts_func_add_param(x->f, x->B);
  ts_func_add_param(x->f, x->C);
  x->i = ts_var(a, "i", TS_INDEX);
  x->j = ts_var(a, "j", TS_INDEX);
  x->k = ts_var(a, "k", TS_INDEX);
  x->vi = ts_var(a, "vi", TS_INDEX);
  x->vj = ts_var(a, "vj", TS_INDEX);
  x->vk = ts_var(a, "vk", TS_INDEX);
  x->blk = ts_block_new(a, "C");
  ts_block_add_iter_var(a, x->blk, x->vi,
                        (ts_range){ts_index(a, 0), ts_index(a, dom_m)},
                        TS_ITER_SPATIAL);
  ts_block_add_iter_var(a, x->blk, x->vj,
                        (ts_range){ts_index(a, 0), ts_index(a, n)},
                        TS_ITER_SPATIAL);
  ts_block_add_iter_var(a, x->blk, x->vk,
                        (ts_range){ts_index(a, 0), ts_index(a, kk)},
                        TS_ITER_REDUCE);
  ts_expr *cij[2] = {x->vi, x->vj}, *aik[2] = {x->vi, x->vk},
          *bkj[2] = {x->vk, x->vj};
  ts_block_set_init(x->blk,
                    ts_store(a, x->C, cij, 2, ts_float(a, TS_FLOAT32, 0)));
  ts_expr *val =
      ts_add(a, ts_load(a, x->C, cij, 2),
             ts_mul(a, ts_load(a, x->A, aik, 2), ts_load(a, x->B, bkj, 2)));
  ts_block_set_body(x->blk, ts_store(a, x->C, cij, 2, val));
  ts_expr *vals[3] = {x->i, x->j, x->k};
  x->realize = ts_block_realize(a, x->blk, vals, 3, NULL);
  x->loop_k = ts_for(a, x->k, ts_index(a, 0), ts_index(a, kk), TS_FOR_SERIAL,
                     NULL, x->realize);
  x->loop_j = ts_for(a, x->j, ts_index(a, 0), ts_index(a, n), TS_FOR_SERIAL,
                     NULL, x->loop_k);
  x->loop_i = ts_for(a, x->i, ts_index(a, 0), ts_index(a, loop_m),
                     TS_FOR_SERIAL, NULL, x->loop_j);
  x->root = ts_block_new(a, "root");
  ts_block_set_body(x->root, x->loop_i);
  ts_func_set_body(x->f, ts_block_realize(a, x->root, NULL, 0, NULL));
  ts_func_infer_regions(x->f);
}

static void mm_free(mm *x) { ts_func_free(x->f); }

/* Verifies and checks that the message contains every fragment. */
static void expect_error(const ts_func *f, const char *const *fragments) {
  ts_error err;
  ts_error_clear(&err);
  int rc = ts_func_verify(f, &err);
  if (rc != TS_EVERIFY) {
    char *text = ts_func_print(f);
    fail_msg("expected TS_EVERIFY, got %d for\n%s", rc, text);
    free(text);
  }
  assert_int_equal(err.code, TS_EVERIFY);
  for (int i = 0; fragments[i]; i++)
    if (!strstr(err.msg, fragments[i]))
      fail_msg("message '%s' lacks '%s'", err.msg, fragments[i]);
}

#define EXPECT(f, ...)                                                         \
  expect_error((f), (const char *const[]){__VA_ARGS__, NULL})

static void expect_clean(const ts_func *f) {
  ts_error err;
  ts_error_clear(&err);
  int rc = ts_func_verify(f, &err);
  if (rc != TS_OK) fail_msg("unexpected verifier error: %s", err.msg);
}

static ts_stmt *set_body_value(mm *x, ts_expr *value) {
  ts_expr *cij[2] = {x->vi, x->vj};
  ts_stmt *s = ts_store(x->a, x->C, cij, 2, value);
  ts_block_set_body(x->blk, s);
  return s;
}

/* ---- tests ---- */

static void test_clean_matmul(void **state) {
  (void)state;
  mm x;
  mm_build(&x, 128, 128, 128);
  expect_clean(x.f);
  ts_func *copy = ts_func_copy(x.f);
  expect_clean(copy);
  ts_func_free(copy);
  mm_free(&x);
}

static void test_undefined_var(void **state) {
  (void)state;
  mm x;
  mm_build(&x, 128, 128, 128);
  ts_expr *u = ts_var(x.a, "x", TS_INDEX);
  ts_expr *idx[2] = {u, x.vj};
  set_body_value(&x, ts_load(x.a, x.A, idx, 2));
  EXPECT(x.f, "block 'C'", "var 'x' is used but not defined");
  mm_free(&x);
  /* in a loop extent, outside any block */
  mm_build(&x, 128, 128, 128);
  ts_for_set_range(x.loop_j, ts_index(x.a, 0), ts_var(x.a, "n", TS_INDEX));
  EXPECT(x.f, "var 'n' is used but not defined", "loop 'i'");
  mm_free(&x);
}

static void test_dtype_mismatch(void **state) {
  (void)state;
  mm x;
  mm_build(&x, 128, 128, 128);
  ts_expr *cij[2] = {x.vi, x.vj};
  set_body_value(&x, ts_binary_raw(x.a, TS_EXPR_ADD, ts_load(x.a, x.C, cij, 2),
                                   ts_int(x.a, TS_INT32, 1)));
  EXPECT(x.f, "block 'C'",
         "operands of 'add' have different types float32 and int32");
  mm_free(&x);
  /* a store of the wrong type */
  mm_build(&x, 128, 128, 128);
  set_body_value(&x, ts_float(x.a, TS_FLOAT64, 1));
  EXPECT(x.f, "store to 'C' of a value of type float64, expected float32");
  mm_free(&x);
  /* lanes: a ramp index needs a vector value */
  mm_build(&x, 128, 128, 128);
  ts_expr *ramp =
      ts_ramp(x.a, ts_mul(x.a, x.vj, ts_index(x.a, 1)), ts_index(x.a, 1), 4);
  ts_expr *vidx[2] = {x.vi, ramp};
  ts_block_set_init(x.blk, NULL);
  ts_block_set_body(x.blk,
                    ts_store(x.a, x.C, vidx, 2, ts_float(x.a, TS_FLOAT32, 1)));
  EXPECT(x.f, "store to 'C' of a value of type float32, expected float32x4");
  ts_block_set_body(
      x.blk, ts_store(x.a, x.C, vidx, 2,
                      ts_broadcast(x.a, ts_float(x.a, TS_FLOAT32, 1), 4)));
  /* vj + 3 reaches 18 > 15: the ramp is out of bounds */
  EXPECT(x.f, "store to 'C' index 1 may be out of bounds [0, 19) for dim 16");
  mm_free(&x);
}

static void test_bool_conditions(void **state) {
  (void)state;
  mm x;
  mm_build(&x, 128, 128, 128);
  ts_stmt *body = ts_block_body(x.blk);
  ts_block_set_body(x.blk, ts_if(x.a, x.vi, body, NULL));
  EXPECT(x.f, "block 'C'", "if condition has type int64, not bool");
  mm_free(&x);
  mm_build(&x, 128, 128, 128);
  ts_expr *vals[3] = {x.i, x.j, x.k};
  ts_realize_set_values(x.a, x.realize, vals, 3, ts_index(x.a, 1));
  EXPECT(x.f, "block predicate has type int64, not bool");
  mm_free(&x);
  mm_build(&x, 128, 128, 128);
  ts_expr *cij[2] = {x.vi, x.vj};
  set_body_value(&x, ts_select_raw(x.a, x.vi, ts_load(x.a, x.C, cij, 2),
                                   ts_float(x.a, TS_FLOAT32, 0)));
  EXPECT(x.f, "condition of select has type int64, not bool");
  mm_free(&x);
}

static void test_out_of_bounds(void **state) {
  (void)state;
  mm x;
  /* the loop and the domain have 129 iterations, the buffer 128 rows */
  mm_build(&x, 128, 129, 129);
  EXPECT(x.f,
         "block 'C': store to 'C' index 0 may be out of bounds [0, 129) "
         "for dim 128",
         "load from 'A' index 0 may be out of bounds [0, 129) for dim 128");
  mm_free(&x);
  /* the iter value leaves the domain */
  mm_build(&x, 128, 129, 128);
  EXPECT(x.f, "value of iter var 'vi' may be outside its domain [0, 128)");
  mm_free(&x);
  /* an index shifted by one */
  mm_build(&x, 128, 128, 128);
  ts_expr *idx[2] = {ts_add(x.a, x.vi, ts_index(x.a, 1)), x.vk};
  set_body_value(&x, ts_load(x.a, x.A, idx, 2));
  EXPECT(x.f,
         "load from 'A' index 0 may be out of bounds [1, 129) for dim 128");
  mm_free(&x);
}

static void test_guarded_accesses(void **state) {
  (void)state;
  mm x;
  mm_build(&x, 128, 128, 128);
  ts_arena *a = x.a;
  ts_expr *shifted[2] = {ts_sub(a, x.vi, ts_index(a, 1)), x.vk};
  ts_expr *cond = ts_ge(a, x.vi, ts_index(a, 1));
  /* if_then_else(vi >= 1, A[vi - 1, vk], 0): only the guarded branch runs */
  ts_expr *args[3] = {cond, ts_load(a, x.A, shifted, 2),
                      ts_float(a, TS_FLOAT32, 0)};
  set_body_value(&x, ts_call(a, TS_FLOAT32, "if_then_else", args, 3));
  expect_clean(x.f);
  /* an if statement guards too */
  ts_block_set_body(
      x.blk,
      ts_if(a, cond, set_body_value(&x, ts_load(a, x.A, shifted, 2)), NULL));
  expect_clean(x.f);
  /* without a guard it is an error */
  set_body_value(&x, ts_load(a, x.A, shifted, 2));
  EXPECT(x.f,
         "load from 'A' index 0 may be out of bounds [-1, 127) for dim 128");
  mm_free(&x);
  /* a block predicate guards an over-long loop (a split that overshoots) */
  mm_build(&x, 128, 130, 128);
  ts_expr *vals[3] = {x.i, x.j, x.k};
  ts_realize_set_values(x.a, x.realize, vals, 3,
                        ts_lt(x.a, x.i, ts_index(x.a, 128)));
  expect_clean(x.f);
  mm_free(&x);
}

static void test_iter_var_misuse(void **state) {
  (void)state;
  mm x;
  /* the body uses the loop var i instead of vi */
  mm_build(&x, 128, 128, 128);
  ts_expr *idx[2] = {x.i, x.vk};
  set_body_value(&x, ts_load(x.a, x.A, idx, 2));
  EXPECT(x.f, "block 'C'", "uses loop var 'i' defined outside the block");
  mm_free(&x);
  /* init uses a reduce iter var */
  mm_build(&x, 128, 128, 128);
  ts_expr *cij[2] = {x.vi, x.vj};
  ts_block_set_init(x.blk,
                    ts_store(x.a, x.C, cij, 2, ts_cast(x.a, TS_FLOAT32, x.vk)));
  EXPECT(x.f, "block 'C'", "init uses reduce iter var 'vk'");
  mm_free(&x);
  /* an init without a reduce iter var */
  mm_build(&x, 128, 128, 128);
  ts_block *b = ts_block_new(x.a, "D");
  ts_expr *wi = ts_var(x.a, "wi", TS_INDEX);
  ts_block_add_iter_var(x.a, b, wi,
                        (ts_range){ts_index(x.a, 0), ts_index(x.a, 128)},
                        TS_ITER_SPATIAL);
  ts_expr *w0[2] = {wi, ts_index(x.a, 0)};
  ts_block_set_init(b, ts_store(x.a, x.C, w0, 2, ts_float(x.a, TS_FLOAT32, 0)));
  ts_block_set_body(b, ts_store(x.a, x.C, w0, 2, ts_float(x.a, TS_FLOAT32, 1)));
  ts_expr *dv[1] = {x.i};
  ts_stmt *seq[2] = {x.loop_j, ts_block_realize(x.a, b, dv, 1, NULL)};
  ts_for_set_body(x.loop_i, ts_seq(x.a, seq, 2));
  EXPECT(x.f, "block 'D': has an init but no reduce iter var");
  /* D's iter value uses C's iter var, which is not in scope */
  ts_block_set_init(b, NULL);
  ts_expr *dv2[1] = {x.vi};
  ts_realize_set_values(x.a, seq[1], dv2, 1, NULL);
  EXPECT(x.f, "iter value of block 'D' uses iter var 'vi' of block 'C'");
  /* a block's iter value uses its own iter var */
  ts_expr *dv3[1] = {wi};
  ts_realize_set_values(x.a, seq[1], dv3, 1, NULL);
  EXPECT(x.f, "iter value of block 'D' uses its own iter var 'wi'");
  /* too few iter values */
  ts_realize_set_values(x.a, seq[1], NULL, 0, NULL);
  EXPECT(x.f, "block 'D' has 1 iter vars but is realized with 0 values");
  mm_free(&x);
}

static void test_indices_and_buffers(void **state) {
  (void)state;
  mm x;
  mm_build(&x, 128, 128, 128);
  ts_expr *one[1] = {x.vi};
  set_body_value(&x, ts_load(x.a, x.A, one, 1));
  EXPECT(x.f, "load from 'A' has 1 indices but the buffer has 2 dimensions");
  mm_free(&x);
  /* a buffer that is neither a parameter nor allocated */
  mm_build(&x, 128, 128, 128);
  int64_t shape[2] = {128, 16};
  ts_buffer *T = ts_buffer_new(x.a, "T", TS_FLOAT32, shape, 2);
  ts_expr *cij[2] = {x.vi, x.vj};
  set_body_value(&x, ts_load(x.a, T, cij, 2));
  EXPECT(x.f, "load from 'T': buffer is used but not declared");
  /* allocating it in the root block declares it */
  ts_block_add_alloc(x.a, x.root, T);
  expect_clean(x.f);
  mm_free(&x);
  /* an allocate statement declares it for its body only */
  mm_build(&x, 128, 128, 128);
  T = ts_buffer_new(x.a, "T", TS_FLOAT32, shape, 2);
  cij[0] = x.vi;
  cij[1] = x.vj;
  set_body_value(&x, ts_load(x.a, T, cij, 2));
  ts_block_set_body(x.root, ts_allocate(x.a, T, x.loop_i));
  expect_clean(x.f);
  mm_free(&x);
}

static void test_loops(void **state) {
  (void)state;
  mm x;
  mm_build(&x, 128, 128, 128);
  ts_for_set_range(x.loop_k, ts_index(x.a, 0), ts_index(x.a, 0));
  EXPECT(x.f, "loop 'k'", "non-positive loop extent 0");
  mm_free(&x);
  mm_build(&x, 128, 128, 128);
  ts_for_set_kind(x.a, x.loop_i, TS_FOR_THREAD, NULL);
  EXPECT(x.f, "loop 'i': thread loop without a thread tag");
  ts_for_set_kind(x.a, x.loop_i, TS_FOR_THREAD, "blockIdx.x");
  expect_clean(x.f);
  mm_free(&x);
}

static void test_several_errors(void **state) {
  (void)state;
  mm x;
  mm_build(&x, 128, 128, 128);
  ts_for_set_range(x.loop_k, ts_index(x.a, 0), ts_index(x.a, -1));
  ts_expr *u = ts_var(x.a, "x", TS_INDEX);
  ts_expr *idx[2] = {u, x.vj};
  set_body_value(&x, ts_load(x.a, x.A, idx, 2));
  EXPECT(x.f, "non-positive loop extent -1", "\n",
         "var 'x' is used but not defined");
  mm_free(&x);
}

static void test_library_clean(void **state) {
  (void)state;
  const char *specs[] = {
      "matmul M=64 N=32 K=16",
      "matmul M=17 N=9 K=5 transpose_a=1 transpose_b=1 dtype=int8",
      "batch_matmul B=2 M=8 N=8 K=8",
      "dense M=8 N=8 K=8",
      "conv2d_nchw N=1 H=8 W=8 CI=4 CO=4 KH=3 KW=3 pad=1 stride=2",
      "conv2d_nhwc N=1 H=8 W=8 CI=4 CO=4 KH=3 KW=3 pad=1 dilation=2 groups=2",
      "depthwise_conv2d_nhwc N=1 H=8 W=8 C=4 KH=3 KW=3 pad=1",
      "conv2d_transpose_nchw N=1 H=4 W=4 CI=2 CO=2 KH=3 KW=3 stride=2 pad=1",
      "pool2d_nhwc N=1 H=8 W=8 C=2 KH=3 KW=3 pad=1 kind=avg",
      "pool2d_nhwc N=1 H=8 W=8 C=2 KH=3 KW=3 stride=2",
      "softmax N=4 D=8",
      "layer_norm N=4 D=8",
      "elementwise op=gelu shape=4x8",
      "elementwise op=relu shape=4x8x2 dtype=int32",
      "reduce op=max N=4 D=8",
      "reduce op=sum N=4 D=8 dtype=int8",
      "transpose shape=2x3x4 perm=2x0x1",
      "layout_transform N=1 C=32 H=4 W=4 src=NCHW dst=NCHW16c",
      "layout_transform N=1 C=32 H=4 W=4 src=NCHW16c dst=NHWC",
      "pad shape=4x4 before=1x2 after=2x1",
  };
  /* every operator of the library appears above */
  for (const char *const *op = ts_op_names(); *op; op++) {
    bool found = false;
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
      if (strncmp(specs[i], *op, strlen(*op)) == 0 &&
          specs[i][strlen(*op)] == ' ')
        found = true;
    if (!found) fail_msg("operator %s is not tested", *op);
  }
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
    ts_workload *w = NULL;
    ts_error err;
    if (ts_workload_from_spec(specs[i], &w, &err) != TS_OK)
      fail_msg("%s: %s", specs[i], err.msg);
    if (ts_func_verify(w->func, &err) != TS_OK)
      fail_msg("%s: %s", specs[i], err.msg);
    ts_workload_free(w);
  }
}

/* ---- random, often ill-formed IR: the checks must answer, never crash ---- */

typedef struct rgen {
  uint64_t s;
  ts_arena *a;
  ts_buffer *bufs[8];
  int n_bufs;
  ts_expr *vars[32];
  int n_vars;
} rgen;

static uint64_t rnext(rgen *g) {
  g->s ^= g->s << 13;
  g->s ^= g->s >> 7;
  g->s ^= g->s << 17;
  return g->s;
}
static int rint_(rgen *g, int n) { return (int)(rnext(g) % (uint64_t)n); }

static ts_expr *rand_index(rgen *g, int depth) {
  ts_arena *a = g->a;
  int pick = rint_(g, 10);
  if (depth <= 0 || pick < 4) {
    if (g->n_vars && rint_(g, 4)) return g->vars[rint_(g, g->n_vars)];
    if (rint_(g, 8) == 0) return ts_var(a, "free", TS_INDEX);
    return ts_index(a, rint_(g, 12) - 2);
  }
  static const ts_expr_kind kinds[] = {TS_EXPR_ADD,      TS_EXPR_SUB,
                                       TS_EXPR_MUL,      TS_EXPR_FLOORDIV,
                                       TS_EXPR_FLOORMOD, TS_EXPR_MIN};
  ts_expr *x = rand_index(g, depth - 1), *y = rand_index(g, depth - 1);
  if (pick == 9) y = ts_int(a, TS_INT32, 3); /* a dtype mismatch */
  return ts_binary_raw(a, kinds[rint_(g, 6)], x, y);
}

static ts_expr *rand_value(rgen *g, ts_buffer *like, int depth) {
  ts_arena *a = g->a;
  ts_dtype t = like ? ts_buffer_dtype(like) : TS_FLOAT32;
  int pick = rint_(g, 6);
  if (depth <= 0 || pick == 0)
    return ts_dtype_is_float(t) ? ts_float(a, t, 1.5) : ts_int(a, t, 2);
  if (pick == 1 && g->n_bufs) {
    ts_buffer *b = g->bufs[rint_(g, g->n_bufs)];
    int n = ts_buffer_ndim(b) + (rint_(g, 8) == 0);
    ts_expr *idx[TS_MAX_DIMS + 1];
    for (int i = 0; i < n; i++) idx[i] = rand_index(g, 2);
    return ts_load(a, b, idx, n);
  }
  if (pick == 2) {
    ts_expr *args[3] = {ts_lt(a, rand_index(g, 1), rand_index(g, 1)),
                        rand_value(g, like, depth - 1),
                        rand_value(g, like, depth - 1)};
    return ts_call(a, ts_expr_dtype(args[1]), "if_then_else", args, 3);
  }
  if (pick == 3) return ts_cast(a, t, rand_index(g, 2));
  return ts_binary_raw(a, rint_(g, 2) ? TS_EXPR_ADD : TS_EXPR_MUL,
                       rand_value(g, like, depth - 1),
                       rand_value(g, like, depth - 1));
}

static ts_stmt *rand_stmt(rgen *g, int depth) {
  ts_arena *a = g->a;
  int pick = depth <= 0 ? 0 : rint_(g, 9);
  switch (pick) {
  case 1:
  case 2: { /* loop */
    ts_expr *v = ts_var(a, "i", TS_INDEX);
    int64_t ext = rint_(g, 10) == 0 ? 0 : rint_(g, 6) + 1;
    ts_for_kind kind = (ts_for_kind)rint_(g, 5);
    const char *tag =
        kind == TS_FOR_THREAD && rint_(g, 2) ? "threadIdx.x" : NULL;
    int saved = g->n_vars;
    if (g->n_vars < 32) g->vars[g->n_vars++] = v;
    ts_stmt *body = rand_stmt(g, depth - 1);
    g->n_vars = saved;
    return ts_for(a, v, ts_index(a, 0), ts_index(a, ext), kind, tag, body);
  }
  case 3:
  case 4: { /* block */
    ts_block *b = ts_block_new(a, "B");
    int n = rint_(g, 3), nv = rint_(g, 6) == 0 ? n + 1 : n;
    ts_expr *vals[4];
    for (int i = 0; i < nv; i++) vals[i] = rand_index(g, 1);
    int saved = g->n_vars, saved_bufs = g->n_bufs;
    /* sometimes only the own iter vars inside; the outer slots are then
     * overwritten, so later statements may use vars out of their scope */
    if (rint_(g, 3) == 0) g->n_vars = 0;
    for (int i = 0; i < n; i++) {
      ts_expr *v = ts_var(a, "v", TS_INDEX);
      ts_block_add_iter_var(
          a, b, v, (ts_range){ts_index(a, 0), ts_index(a, rint_(g, 6) + 1)},
          (ts_iter_kind)rint_(g, 3));
      if (g->n_vars < 32) g->vars[g->n_vars++] = v;
    }
    if (rint_(g, 3) == 0 && g->n_bufs < 8) {
      int64_t shape[1] = {rint_(g, 6) + 1};
      ts_buffer *t = ts_buffer_new(a, "T", TS_FLOAT32, shape, 1);
      ts_block_add_alloc(a, b, t);
      g->bufs[g->n_bufs++] = t;
    }
    if (rint_(g, 3) == 0) ts_block_set_init(b, rand_stmt(g, 0));
    ts_block_set_body(b, rand_stmt(g, depth - 1));
    g->n_vars = saved;
    g->n_bufs = saved_bufs;
    ts_expr *pred =
        rint_(g, 5) == 0 ? ts_lt(a, rand_index(g, 1), rand_index(g, 1)) : NULL;
    return ts_block_realize(a, b, vals, nv, pred);
  }
  case 5: {
    ts_stmt *items[3];
    int n = rint_(g, 3) + 1;
    for (int i = 0; i < n; i++) items[i] = rand_stmt(g, depth - 1);
    return ts_seq(a, items, n);
  }
  case 6:
    return ts_if(a, ts_lt(a, rand_index(g, 1), rand_index(g, 1)),
                 rand_stmt(g, depth - 1),
                 rint_(g, 2) ? rand_stmt(g, depth - 1) : NULL);
  case 7: {
    ts_expr *v = ts_var(a, "t", TS_INDEX);
    ts_expr *value = rand_index(g, 2);
    int saved = g->n_vars;
    if (g->n_vars < 32) g->vars[g->n_vars++] = v;
    ts_stmt *body = rand_stmt(g, depth - 1);
    g->n_vars = saved;
    return ts_let_stmt(a, v, value, body);
  }
  case 8: {
    int64_t shape[2] = {rint_(g, 4) + 1, rint_(g, 4) + 1};
    ts_buffer *t = ts_buffer_new(a, "L", TS_INT32, shape, 2);
    int saved = g->n_bufs;
    if (g->n_bufs < 8) g->bufs[g->n_bufs++] = t;
    ts_stmt *body = rand_stmt(g, depth - 1);
    g->n_bufs = saved;
    return ts_allocate(a, t, body);
  }
  default: { /* store, sometimes to an undeclared buffer */
    ts_buffer *b;
    if (!g->n_bufs || rint_(g, 10) == 0) {
      int64_t shape[1] = {4};
      b = ts_buffer_new(a, "U", TS_FLOAT32, shape, 1);
    } else {
      b = g->bufs[rint_(g, g->n_bufs)];
    }
    int n = ts_buffer_ndim(b) - (rint_(g, 10) == 0);
    ts_expr *idx[TS_MAX_DIMS];
    for (int i = 0; i < n; i++) idx[i] = rand_index(g, 2);
    return ts_store(a, b, idx, n, rand_value(g, rint_(g, 8) ? b : NULL, 2));
  }
  }
}

static void test_random_ir_robust(void **state) {
  (void)state;
  int n_ok = 0, n_bad = 0;
  for (int iter = 0; iter < 400; iter++) {
    rgen g;
    memset(&g, 0, sizeof g);
    g.s = 0x9e3779b97f4a7c15ull * (uint64_t)(iter + 1);
    ts_func *f = ts_func_new("r");
    g.a = ts_func_arena(f);
    int np = rint_(&g, 3) + 1;
    for (int i = 0; i < np; i++) {
      int64_t shape[3] = {rint_(&g, 6) + 1, rint_(&g, 6) + 1, rint_(&g, 6) + 1};
      ts_buffer *b =
          ts_buffer_new(g.a, "P", rint_(&g, 2) ? TS_FLOAT32 : TS_INT32, shape,
                        rint_(&g, 3) + 1);
      ts_func_add_param(f, b);
      g.bufs[g.n_bufs++] = b;
    }
    ts_block *root = ts_block_new(g.a, "root");
    ts_block_set_body(root, rand_stmt(&g, 4));
    ts_func_set_body(f, ts_block_realize(g.a, root, NULL, 0, NULL));
    ts_func_infer_regions(f);
    ts_error err;
    int rc = ts_func_verify(f, &err);
    assert_true(rc == TS_OK || rc == TS_EVERIFY);
    if (rc == TS_OK)
      n_ok++;
    else
      n_bad++;
    /* a copy of a well-formed function is equal; an ill-formed one (a var
     * used outside its scope) need not be, since the copy rebinds it */
    ts_func *c = ts_func_copy(f);
    if (rc == TS_OK) {
      assert_true(ts_func_equal(f, c));
      assert_true(ts_hash128_eq(ts_func_hash(f), ts_func_hash(c)));
      assert_int_equal(ts_func_verify(c, NULL), TS_OK);
    } else {
      int rc2 = ts_func_verify(c, NULL);
      assert_true(rc2 == TS_OK || rc2 == TS_EVERIFY);
    }
    assert_true(ts_func_equal(f, f));
    assert_true(ts_hash128_eq(ts_func_hash(f), ts_func_hash(f)));
    double flops = ts_func_flops(f);
    assert_true(flops >= 0);
    for (int i = 0; i < np; i++) (void)ts_func_param_is_output(f, i);
    ts_func_free(c);
    ts_func_free(f);
  }
  /* both outcomes occur, so the generator exercises the checks */
  assert_true(n_ok > 10);
  assert_true(n_bad > 10);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_clean_matmul),
      cmocka_unit_test(test_undefined_var),
      cmocka_unit_test(test_dtype_mismatch),
      cmocka_unit_test(test_bool_conditions),
      cmocka_unit_test(test_out_of_bounds),
      cmocka_unit_test(test_guarded_accesses),
      cmocka_unit_test(test_iter_var_misuse),
      cmocka_unit_test(test_indices_and_buffers),
      cmocka_unit_test(test_loops),
      cmocka_unit_test(test_several_errors),
      cmocka_unit_test(test_library_clean),
      cmocka_unit_test(test_random_ir_robust),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
