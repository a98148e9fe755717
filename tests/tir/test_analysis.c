/*
 * test_analysis.c — tests of the analyses: read/write region inference
 * (point accesses, loops relaxed inside a block, constant-offset unions,
 * stencils, padding guards, nested blocks, allocations, unknown indices,
 * clipping), FLOP counts against the operators' formulas, and navigation
 * (blocks, find_block, loops_above, parent, output parameters).
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

/* ---- region text, in the syntax of the text form ---- */

static void region_text(const ts_region *r, char *out, size_t cap) {
  size_t n = (size_t)snprintf(out, cap, "%s[", ts_buffer_name(r->buffer));
  for (int d = 0; d < r->ndim && n < cap; d++) {
    char *min = ts_expr_print(r->ranges[d].min);
    int64_t ext;
    if (ts_expr_is_const_int(r->ranges[d].extent, &ext) && ext == 1) {
      n += (size_t)snprintf(out + n, cap - n, "%s%s", d ? ", " : "", min);
    } else {
      char *e = ts_expr_print(r->ranges[d].extent);
      n += (size_t)snprintf(out + n, cap - n, "%s%s +: %s", d ? ", " : "", min,
                            e);
      free(e);
    }
    free(min);
  }
  if (n < cap) snprintf(out + n, cap - n, "]");
}

/* All regions of a block: "R1 R2 | W1" (reads, then writes). */
static void block_regions(const ts_block *b, char *out, size_t cap) {
  size_t n = 0;
  out[0] = '\0';
  for (int i = 0; i < ts_block_n_reads(b); i++) {
    char one[256];
    region_text(ts_block_read(b, i), one, sizeof one);
    n += (size_t)snprintf(out + n, cap - n, "%s%s", i ? " " : "", one);
  }
  n += (size_t)snprintf(out + n, cap - n, " |");
  for (int i = 0; i < ts_block_n_writes(b); i++) {
    char one[256];
    region_text(ts_block_write(b, i), one, sizeof one);
    n += (size_t)snprintf(out + n, cap - n, " %s", one);
  }
}

static void expect_regions(const ts_func *f, const char *block,
                           const char *want) {
  ts_stmt *s = ts_func_find_block(f, block);
  if (!s) fail_msg("no block %s", block);
  char got[2048];
  block_regions(ts_realize_block(s), got, sizeof got);
  if (strcmp(got, want) != 0)
    fail_msg("block %s: got '%s', want '%s'", block, got, want);
}

/* ---- building blocks by hand ---- */

typedef struct fn {
  ts_func *f;
  ts_arena *a;
  ts_block *root;
} fn;

static void fn_begin(fn *x, const char *name) {
  x->f = ts_func_new(name);
  x->a = ts_func_arena(x->f);
  x->root = ts_block_new(x->a, "root");
}

static void fn_end(fn *x, ts_stmt *root_body) {
  ts_block_set_body(x->root, root_body);
  ts_func_set_body(x->f, ts_block_realize(x->a, x->root, NULL, 0, NULL));
}

static ts_buffer *param(fn *x, const char *name, ts_dtype t, int64_t d0,
                        int64_t d1) {
  int64_t shape[2] = {d0, d1};
  ts_buffer *b = ts_buffer_new(x->a, name, t, shape, d1 ? 2 : 1);
  ts_func_add_param(x->f, b);
  return b;
}

static ts_expr *ld1(fn *x, ts_buffer *b, ts_expr *i) {
  return ts_load(x->a, b, &i, 1);
}
static ts_stmt *st1(fn *x, ts_buffer *b, ts_expr *i, ts_expr *v) {
  return ts_store(x->a, b, &i, 1, v);
}
static ts_expr *I(fn *x, int64_t v) { return ts_index(x->a, v); }
static ts_stmt *loop(fn *x, ts_expr *var, int64_t extent, ts_stmt *body) {
  return ts_for(x->a, var, I(x, 0), I(x, extent), TS_FOR_SERIAL, NULL, body);
}

/* for i in range(extent): block NAME(vi: spatial(dom) = i + offset) {body} */
static ts_stmt *one_iter_block(fn *x, const char *name, ts_expr *vi,
                               int64_t dom_min, int64_t dom_ext, ts_expr *value,
                               ts_stmt *body, ts_block **out) {
  ts_block *b = ts_block_new(x->a, name);
  ts_block_add_iter_var(x->a, b, vi, (ts_range){I(x, dom_min), I(x, dom_ext)},
                        TS_ITER_SPATIAL);
  ts_block_set_body(b, body);
  if (out) *out = b;
  return ts_block_realize(x->a, b, &value, 1, NULL);
}

/* ---- region tests ---- */

static void test_matmul_regions(void **state) {
  (void)state;
  ts_workload *w;
  ts_error err;
  assert_int_equal(ts_workload_from_spec("matmul M=64 N=32 K=16", &w, &err),
                   TS_OK);
  ts_func_infer_regions(w->func);
  expect_regions(w->func, "C", "C[vi, vj] A[vi, vk] B[vk, vj] | C[vi, vj]");
  expect_regions(w->func, "root",
                 "C[0 +: 64, 0 +: 32] A[0 +: 64, 0 +: 16] B[0 +: 16, 0 +: 32] "
                 "| C[0 +: 64, 0 +: 32]");
  ts_workload_free(w);
}

static void test_conv_regions(void **state) {
  (void)state;
  ts_workload *w;
  ts_error err;
  assert_int_equal(
      ts_workload_from_spec(
          "conv2d_nchw N=2 H=8 W=8 CI=4 CO=4 KH=3 KW=3 pad=1 stride=2", &w,
          &err),
      TS_OK);
  ts_func_infer_regions(w->func);
  /* the padding stage reads through if_then_else; its read may step one
   * element outside the input, exactly as written */
  expect_regions(w->func, "pad",
                 "data[vn, vc, vh - 1, vw - 1] | pad[vn, vc, vh, vw]");
  expect_regions(w->func, "conv",
                 "conv[vn, vco, vh, vw] pad[vn, vrc, vh * 2 + vrh, vw * 2 + "
                 "vrw] weight[vco, vrc, vrh, vrw] | conv[vn, vco, vh, vw]");
  /* the root excludes its own allocation (pad); data is clipped */
  expect_regions(w->func, "root",
                 "data[0 +: 2, 0 +: 4, 0 +: 8, 0 +: 8] conv[0 +: 2, 0 +: 4, "
                 "0 +: 4, 0 +: 4] weight[0 +: 4, 0 +: 4, 0 +: 3, 0 +: 3] | "
                 "conv[0 +: 2, 0 +: 4, 0 +: 4, 0 +: 4]");
  ts_workload_free(w);
}

static void test_relaxed_loops(void **state) {
  (void)state;
  fn x;
  fn_begin(&x, "f");
  ts_buffer *A = param(&x, "A", TS_FLOAT32, 128, 0);
  ts_buffer *B = param(&x, "B", TS_FLOAT32, 8, 0);
  ts_expr *io = ts_var(x.a, "io", TS_INDEX), *k = ts_var(x.a, "k", TS_INDEX);
  ts_expr *vo = ts_var(x.a, "vo", TS_INDEX);
  /* block S(vo) { for k in range(16): B[vo] = B[vo] + A[vo*16 + k] } */
  ts_expr *idx = ts_add(x.a, ts_mul(x.a, vo, I(&x, 16)), k);
  ts_stmt *body = loop(
      &x, k, 16, st1(&x, B, vo, ts_add(x.a, ld1(&x, B, vo), ld1(&x, A, idx))));
  fn_end(&x,
         loop(&x, io, 8, one_iter_block(&x, "S", vo, 0, 8, io, body, NULL)));
  ts_func_infer_regions(x.f);
  expect_regions(x.f, "S", "B[vo] A[vo * 16 +: 16] | B[vo]");
  expect_regions(x.f, "root", "B[0 +: 8] A[0 +: 128] | B[0 +: 8]");
  ts_func_free(x.f);
}

static void test_stencil_and_offsets(void **state) {
  (void)state;
  fn x;
  fn_begin(&x, "f");
  ts_buffer *A = param(&x, "A", TS_FLOAT32, 128, 0);
  ts_buffer *B = param(&x, "B", TS_FLOAT32, 128, 0);
  ts_expr *i = ts_var(x.a, "i", TS_INDEX), *vi = ts_var(x.a, "vi", TS_INDEX);
  ts_expr *sum = ts_add(
      x.a, ts_add(x.a, ld1(&x, A, ts_sub(x.a, vi, I(&x, 1))), ld1(&x, A, vi)),
      ld1(&x, A, ts_add(x.a, vi, I(&x, 1))));
  ts_expr *value = ts_add(x.a, i, I(&x, 1));
  fn_end(&x, loop(&x, i, 126,
                  one_iter_block(&x, "S", vi, 1, 126, value,
                                 st1(&x, B, vi, sum), NULL)));
  ts_func_infer_regions(x.f);
  expect_regions(x.f, "S", "A[vi - 1 +: 3] | B[vi]");
  expect_regions(x.f, "root", "A[0 +: 128] | B[1 +: 126]");
  ts_func_free(x.f);

  /* A[vi] then A[vi + 1]: the union is exact */
  fn_begin(&x, "g");
  A = param(&x, "A", TS_FLOAT32, 128, 0);
  B = param(&x, "B", TS_FLOAT32, 128, 0);
  i = ts_var(x.a, "i", TS_INDEX);
  vi = ts_var(x.a, "vi", TS_INDEX);
  sum = ts_add(x.a, ld1(&x, A, vi), ld1(&x, A, ts_add(x.a, vi, I(&x, 1))));
  fn_end(&x, loop(&x, i, 127,
                  one_iter_block(&x, "S", vi, 0, 127, i, st1(&x, B, vi, sum),
                                 NULL)));
  ts_func_infer_regions(x.f);
  expect_regions(x.f, "S", "A[vi +: 2] | B[vi]");
  ts_func_free(x.f);
}

static void test_guards_allocs_unknown(void **state) {
  (void)state;
  fn x;
  fn_begin(&x, "f");
  ts_buffer *A = param(&x, "A", TS_FLOAT32, 128, 0);
  ts_buffer *Idx = param(&x, "Idx", TS_INT32, 16, 0);
  ts_buffer *B = param(&x, "B", TS_FLOAT32, 16, 0);
  ts_expr *i = ts_var(x.a, "i", TS_INDEX), *vi = ts_var(x.a, "vi", TS_INDEX);
  ts_expr *k = ts_var(x.a, "k", TS_INDEX);
  int64_t tshape[1] = {4};
  ts_buffer *T = ts_buffer_new(x.a, "T", TS_FLOAT32, tshape, 1);
  /* block S(vi) { alloc T; for k in range(4): T[k] = A[Idx[vi] + k];
   *               B[vi] = if_then_else(vi < 8, T[0], A[vi + 126]) } */
  ts_expr *gather = ts_add(x.a, ts_cast(x.a, TS_INDEX, ld1(&x, Idx, vi)), k);
  ts_stmt *fill = loop(&x, k, 4, st1(&x, T, k, ld1(&x, A, gather)));
  ts_expr *args[3] = {ts_lt(x.a, vi, I(&x, 8)), ld1(&x, T, I(&x, 0)),
                      ld1(&x, A, ts_add(x.a, vi, I(&x, 100)))};
  ts_stmt *use =
      st1(&x, B, vi, ts_call(x.a, TS_FLOAT32, "if_then_else", args, 3));
  ts_stmt *seq[2] = {fill, use};
  ts_block *S;
  fn_end(&x,
         loop(&x, i, 16,
              one_iter_block(&x, "S", vi, 0, 16, i, ts_seq(x.a, seq, 2), &S)));
  ts_block_add_alloc(x.a, S, T);
  ts_func_infer_regions(x.f);
  /* the gather A[Idx[vi] +: 4] and A[vi + 100] have no common bound
   * (a loaded index may be anything): the whole dimension; T is local;
   * the if_then_else branch counts; Idx is read at a point */
  expect_regions(x.f, "S", "Idx[vi] A[0 +: 128] | B[vi]");
  ts_func_free(x.f);

  /* clipping to the buffer and a bound through a symbolic loop extent */
  fn_begin(&x, "g");
  A = param(&x, "A", TS_FLOAT32, 128, 0);
  B = param(&x, "B", TS_FLOAT32, 8, 0);
  i = ts_var(x.a, "i", TS_INDEX);
  vi = ts_var(x.a, "vi", TS_INDEX);
  k = ts_var(x.a, "k", TS_INDEX);
  ts_expr *k2 = ts_var(x.a, "k2", TS_INDEX);
  ts_stmt *tail =
      loop(&x, k, 4, st1(&x, B, vi, ld1(&x, A, ts_add(x.a, k, I(&x, 126)))));
  ts_stmt *tri = ts_for(x.a, k2, I(&x, 0), vi, TS_FOR_SERIAL, NULL,
                        st1(&x, B, vi, ld1(&x, A, ts_add(x.a, k2, I(&x, 4)))));
  ts_stmt *both[2] = {tail, tri};
  fn_end(&x, loop(&x, i, 8,
                  one_iter_block(&x, "S", vi, 0, 8, i, ts_seq(x.a, both, 2),
                                 NULL)));
  ts_func_infer_regions(x.f);
  /* A[126 +: 4] clipped to [126, 128) unioned with A[4 +: vi] ⊆ A[4 +: 7] */
  expect_regions(x.f, "S", "A[4 +: 124] | B[vi]");
  ts_func_free(x.f);

  /* an index the interval arithmetic cannot bound: the whole dimension */
  fn_begin(&x, "h");
  A = param(&x, "A", TS_FLOAT32, 128, 0);
  B = param(&x, "B", TS_FLOAT32, 8, 0);
  i = ts_var(x.a, "i", TS_INDEX);
  vi = ts_var(x.a, "vi", TS_INDEX);
  k = ts_var(x.a, "k", TS_INDEX);
  ts_expr *q = ts_floordiv(x.a, I(&x, 127), ts_add(x.a, k, I(&x, 1)));
  fn_end(&x, loop(&x, i, 8,
                  one_iter_block(&x, "S", vi, 0, 8, i,
                                 loop(&x, k, 4, st1(&x, B, vi, ld1(&x, A, q))),
                                 NULL)));
  ts_func_infer_regions(x.f);
  expect_regions(x.f, "S", "A[0 +: 128] | B[vi]");
  ts_func_free(x.f);
}

static void test_vector_regions(void **state) {
  (void)state;
  fn x;
  fn_begin(&x, "f");
  ts_buffer *A = param(&x, "A", TS_FLOAT32, 64, 0);
  ts_buffer *B = param(&x, "B", TS_FLOAT32, 64, 0);
  ts_expr *i = ts_var(x.a, "i", TS_INDEX), *vi = ts_var(x.a, "vi", TS_INDEX);
  /* B[ramp(vi*4, 1, 4)] = A[ramp(vi*4, 2, 4)] */
  ts_expr *base = ts_mul(x.a, vi, I(&x, 4));
  ts_expr *rb = ts_ramp(x.a, base, I(&x, 1), 4);
  ts_expr *ra = ts_ramp(x.a, base, I(&x, 2), 4);
  fn_end(&x, loop(&x, i, 8,
                  one_iter_block(&x, "S", vi, 0, 8, i,
                                 st1(&x, B, rb, ld1(&x, A, ra)), NULL)));
  ts_func_infer_regions(x.f);
  expect_regions(x.f, "S", "A[vi * 4 +: 7] | B[vi * 4 +: 4]");
  expect_regions(x.f, "root", "A[0 +: 35] | B[0 +: 32]");
  ts_func_free(x.f);
}

/* for io in range(8): block O(vo = io) { for ki in range(4):
 *   block I(vi = vo*4 + ki) { B[vi] = A[vi] * 2 } } */
static ts_func *nested(ts_stmt **o_realize, ts_stmt **i_realize,
                       ts_stmt **ki_loop) {
  fn x;
  fn_begin(&x, "nested");
  ts_buffer *A = param(&x, "A", TS_FLOAT32, 32, 0);
  ts_buffer *B = param(&x, "B", TS_FLOAT32, 32, 0);
  ts_expr *io = ts_var(x.a, "io", TS_INDEX), *ki = ts_var(x.a, "ki", TS_INDEX);
  ts_expr *vo = ts_var(x.a, "vo", TS_INDEX), *vi = ts_var(x.a, "vi", TS_INDEX);
  ts_expr *val = ts_add(x.a, ts_mul(x.a, vo, I(&x, 4)), ki);
  ts_stmt *inner = one_iter_block(
      &x, "I", vi, 0, 32, val,
      st1(&x, B, vi, ts_mul(x.a, ld1(&x, A, vi), ts_float(x.a, TS_FLOAT32, 2))),
      NULL);
  ts_stmt *kl = loop(&x, ki, 4, inner);
  ts_stmt *outer = one_iter_block(&x, "O", vo, 0, 8, io, kl, NULL);
  fn_end(&x, loop(&x, io, 8, outer));
  if (o_realize) *o_realize = outer;
  if (i_realize) *i_realize = inner;
  if (ki_loop) *ki_loop = kl;
  return x.f;
}

static void test_nested_blocks(void **state) {
  (void)state;
  ts_func *f = nested(NULL, NULL, NULL);
  ts_func_infer_regions(f);
  expect_regions(f, "I", "A[vi] | B[vi]");
  expect_regions(f, "O", "A[vo * 4 +: 4] | B[vo * 4 +: 4]");
  expect_regions(f, "root", "A[0 +: 32] | B[0 +: 32]");
  /* inferring one block alone uses the regions already on nested blocks */
  ts_stmt *o = ts_func_find_block(f, "O");
  ts_block_set_regions(ts_func_arena(f), ts_realize_block(o), NULL, 0, NULL, 0);
  ts_block_infer_regions(ts_func_arena(f), ts_realize_block(o));
  expect_regions(f, "O", "A[vo * 4 +: 4] | B[vo * 4 +: 4]");
  ts_func_free(f);
}

static void test_read_modify_write_order(void **state) {
  (void)state;
  fn x;
  fn_begin(&x, "f");
  ts_buffer *A = param(&x, "A", TS_FLOAT32, 16, 0);
  ts_buffer *B = param(&x, "B", TS_FLOAT32, 16, 0);
  ts_buffer *C = param(&x, "C", TS_FLOAT32, 16, 0);
  ts_expr *i = ts_var(x.a, "i", TS_INDEX), *vi = ts_var(x.a, "vi", TS_INDEX);
  /* C[vi] = B[vi] + C[vi] + A[vi]; then A[vi] = 0 */
  ts_expr *v =
      ts_add(x.a, ts_add(x.a, ld1(&x, B, vi), ld1(&x, C, vi)), ld1(&x, A, vi));
  ts_stmt *s[2] = {st1(&x, C, vi, v),
                   st1(&x, A, vi, ts_float(x.a, TS_FLOAT32, 0))};
  fn_end(&x,
         loop(&x, i, 16,
              one_iter_block(&x, "S", vi, 0, 16, i, ts_seq(x.a, s, 2), NULL)));
  ts_func_infer_regions(x.f);
  expect_regions(x.f, "S", "B[vi] C[vi] A[vi] | C[vi] A[vi]");
  assert_true(ts_func_param_is_output(x.f, 0));
  assert_false(ts_func_param_is_output(x.f, 1));
  assert_true(ts_func_param_is_output(x.f, 2));
  assert_false(ts_func_param_is_output(x.f, 3));
  ts_func_free(x.f);
}

/* ---- flops ---- */

static void test_flops(void **state) {
  (void)state;
  const char *specs[] = {
      "matmul M=64 N=32 K=16",
      "matmul M=8 N=8 K=8 dtype=int8",
      "batch_matmul B=3 M=8 N=4 K=8",
      "dense M=8 N=8 K=8",
      "conv2d_nchw N=2 H=8 W=8 CI=4 CO=4 KH=3 KW=3 pad=1 stride=2",
      "conv2d_nhwc N=1 H=8 W=8 CI=4 CO=4 KH=3 KW=3 pad=1 dilation=2 groups=2",
      "depthwise_conv2d_nhwc N=1 H=8 W=8 C=4 KH=3 KW=3 pad=1",
      "conv2d_transpose_nchw N=1 H=4 W=4 CI=2 CO=2 KH=3 KW=3 stride=2 pad=1",
      "pool2d_nhwc N=1 H=8 W=8 C=2 KH=3 KW=3 pad=1 kind=avg",
      "softmax N=4 D=8",
      "layer_norm N=4 D=8",
      "elementwise op=relu shape=4x8",
      "elementwise op=gelu shape=4x8",
      "reduce op=sum N=4 D=8",
      "transpose shape=2x3x4 perm=2x0x1",
      "pad shape=4x4 before=1x2 after=2x1",
  };
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
    ts_workload *w;
    ts_error err;
    if (ts_workload_from_spec(specs[i], &w, &err) != TS_OK)
      fail_msg("%s: %s", specs[i], err.msg);
    double got = ts_func_flops(w->func);
    if (got != w->flops)
      fail_msg("%s: ts_func_flops %g, formula %g", specs[i], got, w->flops);
    ts_workload_free(w);
  }
  /* explicit formulas */
  ts_workload *w;
  ts_error err;
  assert_int_equal(ts_workload_from_spec("matmul M=64 N=32 K=16", &w, &err),
                   TS_OK);
  assert_true(ts_func_flops(w->func) == 2.0 * 64 * 32 * 16);
  ts_workload_free(w);
  /* N=2, CO=4, OH=OW=4 (stride 2, pad 1), CI=4, 3x3 */
  assert_int_equal(
      ts_workload_from_spec(
          "conv2d_nchw N=2 H=8 W=8 CI=4 CO=4 KH=3 KW=3 pad=1 stride=2", &w,
          &err),
      TS_OK);
  assert_true(ts_func_flops(w->func) == 2.0 * 2 * 4 * 4 * 4 * 4 * 3 * 3);
  ts_workload_free(w);
  /* index arithmetic does not count: the stencil has 2 adds per element */
  fn x;
  fn_begin(&x, "f");
  ts_buffer *A = param(&x, "A", TS_FLOAT32, 128, 0);
  ts_buffer *B = param(&x, "B", TS_FLOAT32, 128, 0);
  ts_expr *i = ts_var(x.a, "i", TS_INDEX), *vi = ts_var(x.a, "vi", TS_INDEX);
  ts_expr *sum = ts_add(
      x.a, ts_add(x.a, ld1(&x, A, ts_sub(x.a, vi, I(&x, 1))), ld1(&x, A, vi)),
      ld1(&x, A, ts_add(x.a, vi, I(&x, 1))));
  fn_end(&x, loop(&x, i, 126,
                  one_iter_block(&x, "S", vi, 1, 126, ts_add(x.a, i, I(&x, 1)),
                                 st1(&x, B, vi, sum), NULL)));
  assert_true(ts_func_flops(x.f) == 2.0 * 126);
  ts_func_free(x.f);
  /* fma counts 2, math calls 1, select conditions 0 */
  fn_begin(&x, "g");
  A = param(&x, "A", TS_FLOAT32, 16, 0);
  B = param(&x, "B", TS_FLOAT32, 16, 0);
  i = ts_var(x.a, "i", TS_INDEX);
  vi = ts_var(x.a, "vi", TS_INDEX);
  ts_expr *a0 = ld1(&x, A, vi);
  ts_expr *fargs[3] = {a0, a0, a0};
  ts_expr *fma = ts_call(x.a, TS_FLOAT32, "fma", fargs, 3);
  ts_expr *ex = ts_call(x.a, TS_FLOAT32, "exp", &fma, 1);
  ts_expr *cond = ts_gt(x.a, ts_add(x.a, a0, a0), ts_float(x.a, TS_FLOAT32, 0));
  ts_expr *sel = ts_select(x.a, cond, ex, ts_float(x.a, TS_FLOAT32, 0));
  fn_end(&x, loop(&x, i, 16,
                  one_iter_block(&x, "S", vi, 0, 16, i, st1(&x, B, vi, sel),
                                 NULL)));
  assert_true(ts_func_flops(x.f) == 3.0 * 16);
  ts_func_free(x.f);
}

/* ---- navigation ---- */

static void test_navigation(void **state) {
  (void)state;
  ts_stmt *o, *in, *kl;
  ts_func *f = nested(&o, &in, &kl);
  int n;
  ts_stmt **blocks = ts_func_blocks(f, &n);
  assert_int_equal(n, 3);
  assert_string_equal(ts_block_name(ts_realize_block(blocks[0])), "root");
  assert_ptr_equal(blocks[1], o);
  assert_ptr_equal(blocks[2], in);
  free(blocks);
  assert_ptr_equal(ts_func_find_block(f, "I"), in);
  assert_null(ts_func_find_block(f, "nope"));

  ts_stmt **loops = ts_func_loops_above(f, in, false, &n);
  assert_int_equal(n, 2);
  assert_string_equal(ts_var_name(ts_for_var(loops[0])), "io");
  assert_ptr_equal(loops[1], kl);
  free(loops);
  loops = ts_func_loops_above(f, in, true, &n);
  assert_int_equal(n, 1);
  assert_ptr_equal(loops[0], kl);
  free(loops);
  loops = ts_func_loops_above(f, o, true, &n);
  assert_int_equal(n, 1);
  assert_string_equal(ts_var_name(ts_for_var(loops[0])), "io");
  free(loops);
  loops = ts_func_loops_above(f, ts_func_body(f), true, &n);
  assert_int_equal(n, 0);
  free(loops);

  assert_ptr_equal(ts_func_parent(f, in), kl);
  assert_ptr_equal(ts_func_parent(f, kl), o);
  assert_null(ts_func_parent(f, ts_func_body(f)));

  /* a statement of another function is not found */
  ts_func *g = nested(NULL, NULL, NULL);
  ts_stmt *other = ts_func_find_block(g, "I");
  loops = ts_func_loops_above(f, other, false, &n);
  assert_null(loops);
  assert_int_equal(n, -1);
  assert_null(ts_func_parent(f, other));
  ts_func_free(g);

  assert_false(ts_func_param_is_output(f, 0));
  assert_true(ts_func_param_is_output(f, 1));
  assert_false(ts_func_param_is_output(f, 2));
  ts_func_free(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matmul_regions),
      cmocka_unit_test(test_conv_regions),
      cmocka_unit_test(test_relaxed_loops),
      cmocka_unit_test(test_stencil_and_offsets),
      cmocka_unit_test(test_guards_allocs_unknown),
      cmocka_unit_test(test_vector_regions),
      cmocka_unit_test(test_nested_blocks),
      cmocka_unit_test(test_read_modify_write_order),
      cmocka_unit_test(test_flops),
      cmocka_unit_test(test_navigation),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
