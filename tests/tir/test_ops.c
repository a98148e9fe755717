/*
 * test_ops.c — the tensor-expression builder and the operator library:
 * the structure the builder produces (loop nest, block iter vars, init,
 * root allocations), its misuse errors; for every operator the parameters
 * (names, shapes, dtypes), block names and iter var kinds, acceptance by the
 * verifier, the FLOP formulas against ts_func_flops, and numeric results
 * through the reference interpreter against values computed by hand or by a
 * direct loop written here.
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

static ts_workload *build(const char *spec) {
  ts_workload *w = NULL;
  ts_error err = {0};
  int rc = ts_workload_from_spec(spec, &w, &err);
  if (rc != TS_OK) fail_msg("'%s' failed: %s", spec, err.msg);
  return w;
}

/* "NAME:DTYPE[d0,d1,...]" of a buffer. */
static void describe_buffer(const ts_buffer *b, char *out, size_t cap) {
  char dt[32];
  int n = snprintf(out, cap, "%s:%s[", ts_buffer_name(b),
                   ts_dtype_str(ts_buffer_dtype(b), dt));
  for (int d = 0; d < ts_buffer_ndim(b); d++)
    n += snprintf(out + n, cap - (size_t)n, "%s%lld", d ? "," : "",
                  (long long)ts_buffer_dim(b, d));
  snprintf(out + n, cap - (size_t)n, "]");
}

/* Space-separated parameter descriptions. */
static void describe_params(const ts_func *f, char *out, size_t cap) {
  out[0] = 0;
  for (int i = 0; i < ts_func_n_params(f); i++) {
    char one[128];
    describe_buffer(ts_func_param(f, i), one, sizeof one);
    size_t n = strlen(out);
    snprintf(out + n, cap - n, "%s%s", i ? " " : "", one);
  }
}

/* Space-separated "name:KINDS" of every block but the root, in order
 * (S spatial, R reduce, O opaque). */
static void describe_blocks(const ts_func *f, char *out, size_t cap) {
  int n;
  ts_stmt **all = ts_func_blocks(f, &n);
  out[0] = 0;
  for (int i = 1; i < n; i++) {
    ts_block *b = ts_realize_block(all[i]);
    size_t len = strlen(out);
    len += (size_t)snprintf(out + len, cap - len, "%s%s:", i > 1 ? " " : "",
                            ts_block_name(b));
    for (int k = 0; k < ts_block_n_iters(b) && len + 1 < cap; k++) {
      ts_iter_kind kind = ts_block_iter_kind(b, k);
      out[len++] = kind == TS_ITER_SPATIAL  ? 'S'
                   : kind == TS_ITER_REDUCE ? 'R'
                                            : 'O';
      out[len] = 0;
    }
  }
  free(all);
}

static const struct {
  const char *spec, *params, *blocks;
} structure_cases[] = {
    {"matmul M=4 N=5 K=6", "A:float32[4,6] B:float32[6,5] C:float32[4,5]",
     "C:SSR"},
    {"matmul M=4 N=5 K=6 transpose_a=1 transpose_b=1 dtype=int8",
     "A:int8[6,4] B:int8[5,6] C:int32[4,5]", "C:SSR"},
    {"batch_matmul B=2 M=3 N=4 K=5 dtype=bfloat16",
     "A:bfloat16[2,3,5] B:bfloat16[2,5,4] C:float32[2,3,4]", "C:SSSR"},
    {"dense M=4 N=8 K=16",
     "X:float32[4,16] W:float32[8,16] bias:float32[8] Y:float32[4,8]",
     "dense:SSR Y:SS"},
    {"dense M=4 N=8 K=16 bias=0 dtype=uint8",
     "X:uint8[4,16] W:uint8[8,16] Y:int32[4,8]", "Y:SSR"},
    {"conv2d_nchw N=2 H=9 W=9 CI=4 CO=8 KH=3 KW=3 stride=2 pad=1 dilation=2 "
     "groups=2",
     "data:float32[2,4,9,9] weight:float32[8,2,3,3] conv:float32[2,8,4,4]",
     "pad:SSSS conv:SSSSRRR"},
    {"conv2d_nhwc N=1 H=8 W=8 CI=4 CO=8 KH=3 KW=3 dtype=float16",
     "data:float16[1,8,8,4] weight:float16[3,3,4,8] conv:float32[1,6,6,8]",
     "conv:SSSSRRR"},
    {"depthwise_conv2d_nhwc N=1 H=8 W=8 C=4 KH=3 KW=3 stride=2 pad=1",
     "data:float32[1,8,8,4] weight:float32[3,3,4] "
     "depthwise_conv:float32[1,4,4,4]",
     "pad:SSSS depthwise_conv:SSSSRR"},
    {"conv2d_transpose_nchw N=1 H=4 W=4 CI=2 CO=3 KH=3 KW=3 stride=2 pad=1",
     "data:float32[1,2,4,4] weight:float32[2,3,3,3] conv:float32[1,3,7,7]",
     "pad:SSSS conv:SSSSRRR"},
    {"pool2d_nhwc N=1 H=8 W=8 C=4 KH=3 KW=3 pad=1",
     "data:float32[1,8,8,4] pool:float32[1,8,8,4]", "pad:SSSS pool:SSSSRR"},
    {"pool2d_nhwc N=1 H=8 W=8 C=4 KH=2 KW=2 stride=2 kind=avg",
     "data:float32[1,8,8,4] pool:float32[1,4,4,4]",
     "pool_sum:SSSSRR pool:SSSS"},
    {"softmax N=4 D=8", "X:float32[4,8] Y:float32[4,8]",
     "maxelem:SR exp:SS expsum:SR Y:SS"},
    {"layer_norm N=4 D=8",
     "X:float32[4,8] gamma:float32[8] beta:float32[8] Y:float32[4,8]",
     "x_sum:SR sq_sum:SR mean:S rstd:S Y:SS"},
    {"elementwise op=add shape=2x3 dtype=int32",
     "A:int32[2,3] B:int32[2,3] Y:int32[2,3]", "Y:SS"},
    {"elementwise op=tanh shape=2x3x4x5x6",
     "X:float32[2,3,4,5,6] Y:float32[2,3,4,5,6]", "Y:SSSSS"},
    {"reduce op=max N=3 D=5", "X:float32[3,5] Y:float32[3]", "Y:SR"},
    {"transpose shape=2x3x4 perm=2x0x1", "X:float32[2,3,4] Y:float32[4,2,3]",
     "Y:SSS"},
    {"layout_transform N=1 C=32 H=2 W=3 dst=NCHW16c",
     "X:float32[1,32,2,3] Y:float32[1,2,2,3,16]", "Y:SSSSS"},
    {"layout_transform N=1 C=32 H=2 W=3 src=NCHW16c dst=NHWC",
     "X:float32[1,2,2,3,16] Y:float32[1,2,3,32]", "Y:SSSS"},
    {"pad shape=2x3 before=1x0 after=0x2 dtype=int8", "X:int8[2,3] Y:int8[3,5]",
     "Y:SS"},
};

static void test_op_structure(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof structure_cases / sizeof structure_cases[0];
       i++) {
    ts_workload *w = build(structure_cases[i].spec);
    char got[1024];
    describe_params(w->func, got, sizeof got);
    if (strcmp(got, structure_cases[i].params) != 0)
      fail_msg("'%s': params '%s', want '%s'", structure_cases[i].spec, got,
               structure_cases[i].params);
    describe_blocks(w->func, got, sizeof got);
    if (strcmp(got, structure_cases[i].blocks) != 0)
      fail_msg("'%s': blocks '%s', want '%s'", structure_cases[i].spec, got,
               structure_cases[i].blocks);
    /* the root block: no iter vars, allocates exactly the non-param stages,
     * and only the last parameter is written */
    ts_stmt *body = ts_func_body(w->func);
    assert_int_equal(ts_stmt_kind_of(body), TS_STMT_BLOCK_REALIZE);
    ts_block *root = ts_realize_block(body);
    assert_string_equal(ts_block_name(root), "root");
    assert_int_equal(ts_block_n_iters(root), 0);
    int n_blocks;
    free(ts_func_blocks(w->func, &n_blocks));
    assert_int_equal(ts_block_n_allocs(root), n_blocks - 2);
    int np = ts_func_n_params(w->func);
    for (int p = 0; p < np; p++)
      assert_int_equal(ts_func_param_is_output(w->func, p), p == np - 1);
    ts_workload_free(w);
  }
}

/* The verifier accepts every operator, with default and non-default keys. */
static void test_ops_verify(void **state) {
  (void)state;
  const char *extra[] = {
      "conv2d_nchw N=1 H=7 W=6 CI=6 CO=9 KH=3 KW=2 stride=3 pad=2 dilation=2 "
      "groups=3",
      "conv2d_nhwc N=2 H=7 W=6 CI=6 CO=9 KH=3 KW=2 stride=2 pad=1 groups=3 "
      "dtype=int8",
      "conv2d_transpose_nchw N=1 H=3 W=5 CI=2 CO=2 KH=4 KW=2 stride=3 pad=0",
      "conv2d_transpose_nchw N=1 H=3 W=5 CI=2 CO=2 KH=2 KW=2 stride=1 pad=1",
      "pool2d_nhwc N=1 H=5 W=5 C=2 KH=3 KW=3 pad=1 kind=avg dtype=bfloat16",
      "pool2d_nhwc N=1 H=5 W=5 C=2 KH=3 KW=3 pad=1 dtype=uint8",
      "elementwise op=gelu shape=3x4 dtype=float64",
      "elementwise op=sigmoid shape=3x4 dtype=float16",
      "elementwise op=mul shape=1x2x1x2x1x2x1x2 dtype=uint8",
      "reduce op=sum N=2 D=3 dtype=int8",
      "layout_transform N=2 C=16 H=2 W=2 src=NHWC dst=NCHW16c",
      "layout_transform N=2 C=16 H=2 W=2 src=NHWC dst=NCHW",
      "pad shape=2x3x4 before=0x0x0 after=0x0x0",
  };
  size_t n_struct = sizeof structure_cases / sizeof structure_cases[0];
  size_t n_extra = sizeof extra / sizeof extra[0];
  for (size_t i = 0; i < n_struct + n_extra; i++) {
    const char *spec =
        i < n_struct ? structure_cases[i].spec : extra[i - n_struct];
    ts_workload *w = build(spec);
    ts_error err = {0};
    int rc = ts_func_verify(w->func, &err);
    if (rc != TS_OK) fail_msg("'%s' does not verify: %s", spec, err.msg);
    ts_workload_free(w);
  }
}

/* Where the formula must equal what ts_func_flops counts. */
static void test_flops(void **state) {
  (void)state;
  static const struct {
    const char *spec;
    double want;
  } cases[] = {
      {"matmul M=4 N=5 K=6", 2.0 * 4 * 5 * 6},
      {"matmul M=4 N=5 K=6 dtype=bfloat16 transpose_a=1", 2.0 * 4 * 5 * 6},
      {"matmul M=3 N=5 K=7 dtype=int8 transpose_b=1", 2.0 * 3 * 5 * 7},
      {"batch_matmul B=3 M=4 N=5 K=6", 2.0 * 3 * 4 * 5 * 6},
      {"dense M=4 N=8 K=16 bias=0", 2.0 * 4 * 8 * 16},
      {"conv2d_nchw N=1 H=8 W=8 CI=4 CO=8 KH=3 KW=3",
       2.0 * 1 * 6 * 6 * 8 * 4 * 3 * 3},
      {"conv2d_nchw N=2 H=9 W=9 CI=4 CO=8 KH=3 KW=3 stride=2 pad=1 "
       "dilation=2 groups=2",
       2.0 * 2 * 4 * 4 * 8 * 2 * 3 * 3},
      {"conv2d_nhwc N=1 H=56 W=56 CI=64 CO=64 KH=3 KW=3 stride=1 pad=1",
       2.0 * 1 * 56 * 56 * 64 * 64 * 3 * 3},
      {"conv2d_nhwc N=1 H=7 W=6 CI=6 CO=9 KH=3 KW=2 stride=2 pad=1 groups=3 "
       "dtype=int8",
       2.0 * 1 * 4 * 4 * 9 * 2 * 3 * 2},
      {"depthwise_conv2d_nhwc N=1 H=8 W=8 C=4 KH=3 KW=3 stride=2 pad=1",
       2.0 * 1 * 4 * 4 * 4 * 3 * 3},
      {"conv2d_transpose_nchw N=1 H=4 W=4 CI=2 CO=3 KH=3 KW=3 stride=2 pad=1",
       2.0 * 1 * 3 * 7 * 7 * 2 * 3 * 3},
      {"conv2d_transpose_nchw N=2 H=3 W=5 CI=2 CO=2 KH=4 KW=2",
       2.0 * 2 * 2 * 6 * 6 * 2 * 4 * 2},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ts_workload *w = build(cases[i].spec);
    if (w->flops != cases[i].want)
      fail_msg("'%s': flops %g, want %g", cases[i].spec, w->flops,
               cases[i].want);
    double counted = ts_func_flops(w->func);
    if (counted != w->flops)
      fail_msg("'%s': ts_func_flops %g != formula %g", cases[i].spec, counted,
               w->flops);
    ts_workload_free(w);
  }
  /* formulas of the other operators */
  static const struct {
    const char *spec;
    double want;
  } others[] = {
      {"dense M=4 N=8 K=16", 2.0 * 4 * 8 * 16 + 4 * 8},
      {"pool2d_nhwc N=1 H=8 W=8 C=4 KH=3 KW=3 pad=1", 8.0 * 8 * 4 * 9},
      {"pool2d_nhwc N=1 H=8 W=8 C=4 KH=2 KW=2 stride=2 kind=avg",
       4.0 * 4 * 4 * 4 + 4 * 4 * 4},
      {"softmax N=4 D=8", 5.0 * 32},
      {"layer_norm N=4 D=8", 10.0 * 32 + 40},
      {"elementwise op=gelu shape=2x3", 30},
      {"elementwise op=add shape=2x3", 6},
      {"reduce op=sum N=3 D=5", 15},
      {"transpose shape=2x3 perm=1x0", 0},
      {"pad shape=2 before=1 after=1", 0},
  };
  for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
    ts_workload *w = build(others[i].spec);
    if (w->flops != others[i].want)
      fail_msg("'%s': flops %g, want %g", others[i].spec, w->flops,
               others[i].want);
    ts_workload_free(w);
  }
}

/* ---- running workloads in the interpreter ---- */

typedef struct run {
  ts_workload *w;
  void *bufs[8];
  int64_t elems[8];
  ts_dtype dtypes[8];
  int n;
} run;

static void run_start(run *r, const char *spec) {
  memset(r, 0, sizeof *r);
  r->w = build(spec);
  r->n = ts_func_n_params(r->w->func);
  assert_true(r->n <= 8);
  for (int i = 0; i < r->n; i++) {
    const ts_buffer *b = ts_func_param(r->w->func, i);
    r->elems[i] = ts_buffer_elems(b);
    r->dtypes[i] = ts_buffer_dtype(b);
    r->bufs[i] = calloc(1, (size_t)ts_buffer_bytes(b) + 1);
    assert_non_null(r->bufs[i]);
  }
}

static void run_set(run *r, int p, const double *vals) {
  for (int64_t i = 0; i < r->elems[p]; i++)
    ts_host_set(r->bufs[p], r->dtypes[p], i, vals[i]);
}

static void run_fill(run *r, int p, uint64_t seed) {
  ts_host_fill_random(r->bufs[p], r->dtypes[p], r->elems[p], seed);
}

static double run_get(const run *r, int p, int64_t i) {
  return ts_host_get(r->bufs[p], r->dtypes[p], i);
}

static void run_exec(run *r) {
  ts_error err = {0};
  int rc = ts_interp_run(r->w->func, r->bufs, r->n, NULL, &err);
  if (rc != TS_OK) fail_msg("'%s': interp failed: %s", r->w->spec, err.msg);
}

/* Output (last param) equals want within tol (relative to max(1, |want|)). */
static void run_expect(const run *r, const double *want, double tol) {
  int p = r->n - 1;
  for (int64_t i = 0; i < r->elems[p]; i++) {
    double got = run_get(r, p, i);
    double scale = fabs(want[i]) > 1 ? fabs(want[i]) : 1;
    if (!(fabs(got - want[i]) <= tol * scale))
      fail_msg("'%s': output[%lld] = %.9g, want %.9g", r->w->spec, (long long)i,
               got, want[i]);
  }
}

static void run_end(run *r) {
  for (int i = 0; i < r->n; i++) free(r->bufs[i]);
  ts_workload_free(r->w);
}

static void test_matmul_values(void **state) {
  (void)state;
  /* A = [[1,2,3],[4,5,6]], B = [[7,8],[9,10],[11,12]] */
  const double A[] = {1, 2, 3, 4, 5, 6}, B[] = {7, 8, 9, 10, 11, 12};
  const double At[] = {1, 4, 2, 5, 3, 6}, Bt[] = {7, 9, 11, 8, 10, 12};
  const double C[] = {58, 64, 139, 154};
  run r;
  run_start(&r, "matmul M=2 N=2 K=3");
  run_set(&r, 0, A);
  run_set(&r, 1, B);
  run_exec(&r);
  run_expect(&r, C, 0);
  run_end(&r);
  run_start(&r, "matmul M=2 N=2 K=3 transpose_a=1 transpose_b=1");
  run_set(&r, 0, At);
  run_set(&r, 1, Bt);
  run_exec(&r);
  run_expect(&r, C, 0);
  run_end(&r);
  run_start(&r, "batch_matmul B=2 M=2 N=2 K=3 transpose_b=1 dtype=float64");
  double A2[12], B2[12], C2[8];
  for (int i = 0; i < 6; i++) {
    A2[i] = A[i];
    A2[6 + i] = -A[i];
    B2[i] = Bt[i];
    B2[6 + i] = 2 * Bt[i];
  }
  for (int i = 0; i < 4; i++) {
    C2[i] = C[i];
    C2[4 + i] = -2 * C[i];
  }
  run_set(&r, 0, A2);
  run_set(&r, 1, B2);
  run_exec(&r);
  run_expect(&r, C2, 0);
  run_end(&r);

  /* int8 inputs accumulate in int32: 3 * 100 * 100 does not wrap */
  run_start(&r, "matmul M=2 N=2 K=3 dtype=int8");
  double h[6] = {100, 100, 100, 100, 100, -100};
  const double hc[] = {30000, 30000, 10000, 10000};
  run_set(&r, 0, h);
  for (int i = 0; i < 6; i++) h[i] = 100;
  run_set(&r, 1, h);
  run_exec(&r);
  run_expect(&r, hc, 0);
  run_end(&r);

  /* bfloat16 inputs, float32 output */
  run_start(&r, "matmul M=2 N=2 K=2 dtype=bfloat16");
  const double ba[] = {1.5, 2, 0.25, -1}, bb[] = {2, 1, 4, 0.5};
  const double bc[] = {11, 2.5, -3.5, -0.25};
  run_set(&r, 0, ba);
  run_set(&r, 1, bb);
  run_exec(&r);
  run_expect(&r, bc, 0);
  run_end(&r);

  /* dense: Y = X W^T + bias */
  run_start(&r, "dense M=2 N=2 K=3");
  const double bias[] = {0.5, -1};
  const double Y[] = {58.5, 63, 139.5, 153};
  run_set(&r, 0, A);
  run_set(&r, 1, Bt);
  run_set(&r, 2, bias);
  run_exec(&r);
  run_expect(&r, Y, 0);
  run_end(&r);
}

/* Direct conv2d in NCHW/OIHW on doubles. */
static void ref_conv_nchw(const double *x, const double *wt, double *out, int N,
                          int H, int W, int CI, int CO, int KH, int KW, int S,
                          int P, int D, int G, int OH, int OW) {
  int cig = CI / G, cog = CO / G;
  for (int n = 0; n < N; n++)
    for (int co = 0; co < CO; co++)
      for (int oh = 0; oh < OH; oh++)
        for (int ow = 0; ow < OW; ow++) {
          double s = 0;
          for (int rc = 0; rc < cig; rc++)
            for (int rh = 0; rh < KH; rh++)
              for (int rw = 0; rw < KW; rw++) {
                int ih = oh * S + rh * D - P, iw = ow * S + rw * D - P;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                int ci = (co / cog) * cig + rc;
                s += x[((n * CI + ci) * H + ih) * W + iw] *
                     wt[((co * cig + rc) * KH + rh) * KW + rw];
              }
          out[((n * CO + co) * OH + oh) * OW + ow] = s;
        }
}

static void test_conv_values(void **state) {
  (void)state;
  run r;
  /* all-ones 3x3 input and kernel, pad 1: neighbour counts */
  run_start(&r, "conv2d_nchw N=1 H=3 W=3 CI=1 CO=1 KH=3 KW=3 pad=1");
  double ones[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  const double counts[] = {4, 6, 4, 6, 9, 6, 4, 6, 4};
  run_set(&r, 0, ones);
  run_set(&r, 1, ones);
  run_exec(&r);
  run_expect(&r, counts, 0);
  run_end(&r);

  /* groups keep channels apart: out = [3*2, 5*7] */
  run_start(&r, "conv2d_nhwc N=1 H=1 W=1 CI=2 CO=2 KH=1 KW=1 groups=2");
  const double gx[] = {3, 5}, gw[] = {2, 7}, gy[] = {6, 35};
  run_set(&r, 0, gx);
  run_set(&r, 1, gw);
  run_exec(&r);
  run_expect(&r, gy, 0);
  run_end(&r);

  /* random data against a direct loop, both layouts */
  enum { N = 1, H = 7, W = 6, CI = 4, CO = 6, KH = 3, KW = 2, S = 2, P = 2 };
  enum { D = 2, G = 2, OH = (H + 2 * P - D * (KH - 1) - 1) / S + 1 };
  enum { OW = (W + 2 * P - D * (KW - 1) - 1) / S + 1 };
  char spec[256];
  snprintf(spec, sizeof spec,
           "conv2d_nchw N=%d H=%d W=%d CI=%d CO=%d KH=%d KW=%d stride=%d "
           "pad=%d dilation=%d groups=%d dtype=float64",
           N, H, W, CI, CO, KH, KW, S, P, D, G);
  run_start(&r, spec);
  run_fill(&r, 0, 1);
  run_fill(&r, 1, 2);
  static double x[N * CI * H * W], wt[CO * (CI / G) * KH * KW];
  static double want[N * CO * OH * OW];
  for (int i = 0; i < N * CI * H * W; i++) x[i] = run_get(&r, 0, i);
  for (int i = 0; i < CO * (CI / G) * KH * KW; i++) wt[i] = run_get(&r, 1, i);
  ref_conv_nchw(x, wt, want, N, H, W, CI, CO, KH, KW, S, P, D, G, OH, OW);
  run_exec(&r);
  run_expect(&r, want, 1e-12);
  run_end(&r);

  snprintf(spec, sizeof spec,
           "conv2d_nhwc N=%d H=%d W=%d CI=%d CO=%d KH=%d KW=%d stride=%d "
           "pad=%d dilation=%d groups=%d dtype=float64",
           N, H, W, CI, CO, KH, KW, S, P, D, G);
  run_start(&r, spec);
  static double xh[N * H * W * CI], wh[KH * KW * (CI / G) * CO];
  static double wanth[N * OH * OW * CO];
  for (int c = 0; c < CI; c++)
    for (int h = 0; h < H; h++)
      for (int w = 0; w < W; w++)
        xh[(h * W + w) * CI + c] = x[(c * H + h) * W + w];
  for (int o = 0; o < CO; o++)
    for (int i = 0; i < CI / G; i++)
      for (int kh = 0; kh < KH; kh++)
        for (int kw = 0; kw < KW; kw++)
          wh[((kh * KW + kw) * (CI / G) + i) * CO + o] =
              wt[((o * (CI / G) + i) * KH + kh) * KW + kw];
  for (int o = 0; o < CO; o++)
    for (int h = 0; h < OH; h++)
      for (int w = 0; w < OW; w++)
        wanth[(h * OW + w) * CO + o] = want[(o * OH + h) * OW + w];
  run_set(&r, 0, xh);
  run_set(&r, 1, wh);
  run_exec(&r);
  run_expect(&r, wanth, 1e-12);
  run_end(&r);
}

static void test_depthwise_values(void **state) {
  (void)state;
  enum { H = 5, W = 4, C = 3, KH = 3, KW = 2, S = 2, P = 1 };
  enum { OH = (H + 2 * P - KH) / S + 1, OW = (W + 2 * P - KW) / S + 1 };
  run r;
  char spec[200];
  snprintf(spec, sizeof spec,
           "depthwise_conv2d_nhwc N=1 H=%d W=%d C=%d KH=%d KW=%d stride=%d "
           "pad=%d dtype=float64",
           H, W, C, KH, KW, S, P);
  run_start(&r, spec);
  run_fill(&r, 0, 3);
  run_fill(&r, 1, 4);
  double want[OH * OW * C];
  for (int oh = 0; oh < OH; oh++)
    for (int ow = 0; ow < OW; ow++)
      for (int c = 0; c < C; c++) {
        double s = 0;
        for (int rh = 0; rh < KH; rh++)
          for (int rw = 0; rw < KW; rw++) {
            int ih = oh * S + rh - P, iw = ow * S + rw - P;
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            s += run_get(&r, 0, (ih * W + iw) * C + c) *
                 run_get(&r, 1, (rh * KW + rw) * C + c);
          }
        want[(oh * OW + ow) * C + c] = s;
      }
  run_exec(&r);
  run_expect(&r, want, 1e-12);
  run_end(&r);
}

/* conv2d_transpose against the scatter definition:
 * out[n, co, h*S + kh - P, w*S + kw - P] += data[n, ci, h, w] *
 * weight[ci, co, kh, kw]. */
static void check_conv_transpose(int H, int W, int CI, int CO, int KH, int KW,
                                 int S, int P) {
  int OH = (H - 1) * S - 2 * P + KH, OW = (W - 1) * S - 2 * P + KW;
  char spec[200];
  snprintf(spec, sizeof spec,
           "conv2d_transpose_nchw N=1 H=%d W=%d CI=%d CO=%d KH=%d KW=%d "
           "stride=%d pad=%d dtype=float64",
           H, W, CI, CO, KH, KW, S, P);
  run r;
  run_start(&r, spec);
  run_fill(&r, 0, 5);
  run_fill(&r, 1, 6);
  double *want = calloc((size_t)(CO * OH * OW), sizeof *want);
  for (int ci = 0; ci < CI; ci++)
    for (int h = 0; h < H; h++)
      for (int w = 0; w < W; w++)
        for (int co = 0; co < CO; co++)
          for (int kh = 0; kh < KH; kh++)
            for (int kw = 0; kw < KW; kw++) {
              int oh = h * S + kh - P, ow = w * S + kw - P;
              if (oh < 0 || oh >= OH || ow < 0 || ow >= OW) continue;
              want[(co * OH + oh) * OW + ow] +=
                  run_get(&r, 0, (ci * H + h) * W + w) *
                  run_get(&r, 1, ((ci * CO + co) * KH + kh) * KW + kw);
            }
  run_exec(&r);
  run_expect(&r, want, 1e-12);
  free(want);
  run_end(&r);
}

static void test_conv_transpose_values(void **state) {
  (void)state;
  check_conv_transpose(3, 2, 2, 3, 3, 2, 2, 1);
  check_conv_transpose(4, 3, 1, 2, 3, 3, 1, 0);
  check_conv_transpose(2, 3, 2, 1, 4, 3, 3, 2);
  check_conv_transpose(3, 3, 1, 1, 2, 2, 1, 1); /* no pad stage needed */
}

static void test_pool_values(void **state) {
  (void)state;
  /* 2x2 negative input, 2x2 window, pad 1: padding must not win the max */
  const double x[] = {-4, -3, -2, -1};
  const double mx[] = {-4, -3, -3, -2, -1, -1, -2, -1, -1};
  /* avg divides by the full window (padding included) */
  const double av[] = {-1, -1.75, -0.75, -1.5, -2.5, -1, -0.5, -0.75, -0.25};
  run r;
  run_start(&r, "pool2d_nhwc N=1 H=2 W=2 C=1 KH=2 KW=2 pad=1");
  run_set(&r, 0, x);
  run_exec(&r);
  run_expect(&r, mx, 0);
  run_end(&r);
  run_start(&r, "pool2d_nhwc N=1 H=2 W=2 C=1 KH=2 KW=2 pad=1 dtype=int8");
  run_set(&r, 0, x);
  run_exec(&r);
  run_expect(&r, mx, 0);
  run_end(&r);
  run_start(&r, "pool2d_nhwc N=1 H=2 W=2 C=1 KH=2 KW=2 pad=1 kind=avg");
  run_set(&r, 0, x);
  run_exec(&r);
  run_expect(&r, av, 0);
  run_end(&r);
}

static void test_nn_values(void **state) {
  (void)state;
  run r;
  /* softmax of [1,2,3]; a huge row stays finite (max subtracted) */
  run_start(&r, "softmax N=2 D=3 dtype=float64");
  const double sx[] = {1, 2, 3, 1000, 1000, 1000};
  const double sy[] = {0.09003057317038046,
                       0.24472847105479767,
                       0.6652409557748219,
                       1.0 / 3,
                       1.0 / 3,
                       1.0 / 3};
  run_set(&r, 0, sx);
  run_exec(&r);
  run_expect(&r, sy, 1e-14);
  run_end(&r);

  /* layer_norm of [1,2,3,4]: mean 2.5, biased variance 1.25 */
  run_start(&r, "layer_norm N=1 D=4 dtype=float64");
  const double lx[] = {1, 2, 3, 4}, g[] = {1, 1, 2, 2}, b[] = {0, 0, 0, 1};
  double rs = 1 / sqrt(1.25 + 1e-5);
  const double ly[] = {-1.5 * rs, -0.5 * rs, 0.5 * rs * 2, 1.5 * rs * 2 + 1};
  run_set(&r, 0, lx);
  run_set(&r, 1, g);
  run_set(&r, 2, b);
  run_exec(&r);
  run_expect(&r, ly, 1e-12);
  run_end(&r);

  /* elementwise */
  run_start(&r, "elementwise op=gelu shape=3 dtype=float64");
  const double gx[] = {1, -1, 0};
  const double gy[] = {0.8413447460685429, -0.15865525393145707, 0};
  run_set(&r, 0, gx);
  run_exec(&r);
  run_expect(&r, gy, 1e-12);
  run_end(&r);
  run_start(&r, "elementwise op=relu shape=2x2 dtype=int8");
  const double rx[] = {-3, 4, 0, -128}, ry[] = {0, 4, 0, 0};
  run_set(&r, 0, rx);
  run_exec(&r);
  run_expect(&r, ry, 0);
  run_end(&r);
  run_start(&r, "elementwise op=sigmoid shape=2");
  const double sgx[] = {0, 2}, sgy[] = {0.5, 0.8807970779778823};
  run_set(&r, 0, sgx);
  run_exec(&r);
  run_expect(&r, sgy, 1e-6);
  run_end(&r);
  run_start(&r, "elementwise op=tanh shape=1");
  const double tx[] = {0.5}, ty[] = {0.46211715726000974};
  run_set(&r, 0, tx);
  run_exec(&r);
  run_expect(&r, ty, 1e-6);
  run_end(&r);
  run_start(&r, "elementwise op=mul shape=3 dtype=int32");
  const double ma[] = {2, -3, 7}, mb[] = {5, 4, 0}, my[] = {10, -12, 0};
  run_set(&r, 0, ma);
  run_set(&r, 1, mb);
  run_exec(&r);
  run_expect(&r, my, 0);
  run_end(&r);
  run_start(&r, "elementwise op=add shape=3 dtype=bfloat16");
  const double ay[] = {7, 1, 7};
  run_set(&r, 0, ma);
  run_set(&r, 1, mb);
  run_exec(&r);
  run_expect(&r, ay, 0);
  run_end(&r);

  /* reductions over rows */
  const double rd[] = {1, -2, 3, -4, -5, -6};
  run_start(&r, "reduce op=sum N=2 D=3");
  const double rsum[] = {2, -15};
  run_set(&r, 0, rd);
  run_exec(&r);
  run_expect(&r, rsum, 0);
  run_end(&r);
  run_start(&r, "reduce op=max N=2 D=3 dtype=int32");
  const double rmax[] = {3, -4};
  run_set(&r, 0, rd);
  run_exec(&r);
  run_expect(&r, rmax, 0);
  run_end(&r);
}

static void test_data_movement_values(void **state) {
  (void)state;
  run r;
  double iota[4 * 64];
  for (int i = 0; i < 4 * 64; i++) iota[i] = i;

  /* transpose 2x3x4 by 2x0x1: Y[c, a, b] = X[a, b, c] */
  run_start(&r, "transpose shape=2x3x4 perm=2x0x1");
  run_set(&r, 0, iota);
  double ty[24];
  for (int c = 0; c < 4; c++)
    for (int a = 0; a < 2; a++)
      for (int b = 0; b < 3; b++) ty[(c * 2 + a) * 3 + b] = (a * 3 + b) * 4 + c;
  run_exec(&r);
  run_expect(&r, ty, 0);
  run_end(&r);

  /* NCHW -> NCHW16c: Y[n, co, h, w, ci] = X[n, co*16 + ci, h, w] */
  run_start(&r, "layout_transform N=1 C=32 H=2 W=2 dst=NCHW16c");
  run_set(&r, 0, iota);
  double ly[128];
  for (int co = 0; co < 2; co++)
    for (int h = 0; h < 2; h++)
      for (int w = 0; w < 2; w++)
        for (int ci = 0; ci < 16; ci++)
          ly[((co * 2 + h) * 2 + w) * 16 + ci] =
              ((co * 16 + ci) * 2 + h) * 2 + w;
  run_exec(&r);
  run_expect(&r, ly, 0);
  run_end(&r);

  /* NCHW16c -> NHWC: Y[n, h, w, c] = X[n, c/16, h, w, c%16] */
  run_start(&r, "layout_transform N=1 C=32 H=2 W=2 src=NCHW16c dst=NHWC");
  run_set(&r, 0, iota);
  double ny[128];
  for (int h = 0; h < 2; h++)
    for (int w = 0; w < 2; w++)
      for (int c = 0; c < 32; c++)
        ny[(h * 2 + w) * 32 + c] = (((c / 16) * 2 + h) * 2 + w) * 16 + c % 16;
  run_exec(&r);
  run_expect(&r, ny, 0);
  run_end(&r);

  /* NHWC -> NCHW */
  run_start(&r, "layout_transform N=1 C=3 H=2 W=2 src=NHWC dst=NCHW");
  run_set(&r, 0, iota);
  double cy[12];
  for (int c = 0; c < 3; c++)
    for (int h = 0; h < 2; h++)
      for (int w = 0; w < 2; w++) cy[(c * 2 + h) * 2 + w] = (h * 2 + w) * 3 + c;
  run_exec(&r);
  run_expect(&r, cy, 0);
  run_end(&r);

  /* pad 2x3 by before=1x0, after=0x2 */
  run_start(&r, "pad shape=2x3 before=1x0 after=0x2 dtype=int32");
  const double px[] = {1, 2, 3, 4, 5, 6};
  const double py[] = {0, 0, 0, 0, 0, 1, 2, 3, 0, 0, 4, 5, 6, 0, 0};
  run_set(&r, 0, px);
  run_exec(&r);
  run_expect(&r, py, 0);
  run_end(&r);
}

/* ---- the builder itself ---- */

static void test_te_structure(void **state) {
  (void)state;
  ts_te *te = ts_te_begin("two_stage");
  ts_arena *a = ts_te_arena(te);
  assert_non_null(a);
  ts_buffer *A = ts_te_placeholder(te, "A", TS_FLOAT32, (int64_t[]){4, 6}, 2);
  ts_te_stage *S = ts_te_compute(te, "S", TS_FLOAT32, (int64_t[]){4}, 1,
                                 (const char *[]){"i"});
  ts_expr *k = ts_te_reduce_axis(S, "k", 6);
  ts_expr *ai[] = {ts_te_axis(S, 0), k};
  ts_buffer *Sb = ts_te_set_reduce(S, TS_TE_SUM, ts_te_load(te, A, ai, 2));
  ts_te_stage *T =
      ts_te_compute(te, "T", TS_FLOAT32, (int64_t[]){4, 2, 3, 5, 1}, 5, NULL);
  ts_expr *ti = ts_te_axis(T, 0);
  ts_buffer *Tb = ts_te_set_value(
      T, ts_mul(a, ts_te_load(te, Sb, &ti, 1), ts_float(a, TS_FLOAT32, 2)));
  ts_error err = {0};
  ts_func *f = ts_te_finish(te, (ts_buffer *[]){A, Tb}, 2, &err);
  if (!f) fail_msg("finish failed: %s", err.msg);
  assert_string_equal(ts_func_name(f), "two_stage");
  assert_int_equal(ts_func_verify(f, &err), TS_OK);

  /* root: allocates S (not a parameter), body = seq of two nests */
  ts_block *root = ts_realize_block(ts_func_body(f));
  assert_int_equal(ts_block_n_allocs(root), 1);
  assert_ptr_equal(ts_block_alloc(root, 0), Sb);
  ts_stmt *seq = ts_block_body(root);
  assert_int_equal(ts_stmt_kind_of(seq), TS_STMT_SEQ);
  assert_int_equal(ts_seq_n(seq), 2);

  /* stage S: for i { for k { block S(vi: spatial(4) = i, vk: reduce(6) = k) } }
   * with init S[vi] = 0 and S[vi] = S[vi] + A[vi, vk] */
  ts_stmt *li = ts_seq_item(seq, 0);
  assert_int_equal(ts_stmt_kind_of(li), TS_STMT_FOR);
  assert_string_equal(ts_var_name(ts_for_var(li)), "i");
  assert_int_equal(ts_for_kind_of(li), TS_FOR_SERIAL);
  int64_t v;
  assert_true(ts_expr_is_const_int(ts_for_extent(li), &v) && v == 4);
  assert_true(ts_expr_is_const_int(ts_for_min(li), &v) && v == 0);
  ts_stmt *lk = ts_for_body(li);
  assert_string_equal(ts_var_name(ts_for_var(lk)), "k");
  assert_true(ts_expr_is_const_int(ts_for_extent(lk), &v) && v == 6);
  ts_stmt *br = ts_for_body(lk);
  assert_int_equal(ts_stmt_kind_of(br), TS_STMT_BLOCK_REALIZE);
  ts_block *bs = ts_realize_block(br);
  assert_string_equal(ts_block_name(bs), "S");
  assert_int_equal(ts_block_n_iters(bs), 2);
  assert_string_equal(ts_var_name(ts_block_iter_var(bs, 0)), "vi");
  assert_string_equal(ts_var_name(ts_block_iter_var(bs, 1)), "vk");
  assert_ptr_equal(ts_block_iter_var(bs, 1), k);
  assert_int_equal(ts_block_iter_kind(bs, 0), TS_ITER_SPATIAL);
  assert_int_equal(ts_block_iter_kind(bs, 1), TS_ITER_REDUCE);
  ts_range dom = ts_block_iter_dom(bs, 1);
  assert_true(ts_expr_is_const_int(dom.min, &v) && v == 0);
  assert_true(ts_expr_is_const_int(dom.extent, &v) && v == 6);
  assert_ptr_equal(ts_realize_value(br, 0), ts_for_var(li));
  assert_ptr_equal(ts_realize_value(br, 1), ts_for_var(lk));
  assert_null(ts_realize_predicate(br));
  ts_stmt *init = ts_block_init(bs);
  assert_non_null(init);
  assert_int_equal(ts_stmt_kind_of(init), TS_STMT_STORE);
  assert_int_equal(ts_expr_kind_of(ts_store_value(init)), TS_EXPR_FLOAT);
  assert_true(ts_expr_float_value(ts_store_value(init)) == 0.0);
  ts_stmt *upd = ts_block_body(bs);
  assert_int_equal(ts_expr_kind_of(ts_store_value(upd)), TS_EXPR_ADD);
  assert_ptr_equal(ts_store_buffer(upd), Sb);
  /* regions were inferred: S reads S and A, writes S */
  assert_int_equal(ts_block_n_reads(bs), 2);
  assert_int_equal(ts_block_n_writes(bs), 1);
  assert_ptr_equal(ts_block_write(bs, 0)->buffer, Sb);

  /* stage T: default axis names i j k l i4, no init */
  ts_stmt *l = ts_seq_item(seq, 1);
  const char *names[] = {"i", "j", "k", "l", "i4"};
  for (int d = 0; d < 5; d++) {
    assert_int_equal(ts_stmt_kind_of(l), TS_STMT_FOR);
    assert_string_equal(ts_var_name(ts_for_var(l)), names[d]);
    l = ts_for_body(l);
  }
  ts_block *bt = ts_realize_block(l);
  assert_string_equal(ts_var_name(ts_block_iter_var(bt, 4)), "vi4");
  assert_null(ts_block_init(bt));

  /* it runs: T[i, ...] = 2 * sum_k A[i, k] */
  float ain[24], tout[4 * 30];
  for (int i = 0; i < 24; i++) ain[i] = (float)i;
  void *args[] = {ain, tout};
  assert_int_equal(ts_interp_run(f, args, 2, NULL, &err), TS_OK);
  for (int i = 0; i < 4; i++) {
    float s = 0;
    for (int kk = 0; kk < 6; kk++) s += ain[i * 6 + kk];
    for (int j = 0; j < 30; j++) assert_true(tout[i * 30 + j] == 2 * s);
  }
  ts_func_free(f);
}

/* ts_te_loop_order: the loops nest in the order given while the buffer
 * keeps its layout (the block's iter vars stay in axis order), and the
 * function computes the same values; an order that is not a permutation,
 * or comes after the value, is refused with the stage named. */
static void test_te_loop_order(void **state) {
  (void)state;
  ts_te *te = ts_te_begin("ordered");
  ts_arena *a = ts_te_arena(te);
  ts_buffer *A = ts_te_placeholder(te, "A", TS_FLOAT32, (int64_t[]){5, 3}, 2);
  ts_te_stage *T = ts_te_compute(te, "T", TS_FLOAT32, (int64_t[]){3, 5, 2}, 3,
                                 (const char *[]){"t", "p", "c"});
  ts_te_loop_order(T, (const int[]){1, 0, 2});
  ts_expr *ai[] = {ts_te_axis(T, 1), ts_te_axis(T, 0)};
  ts_buffer *Tb =
      ts_te_set_value(T, ts_add(a, ts_te_load(te, A, ai, 2),
                                ts_cast(a, TS_FLOAT32, ts_te_axis(T, 2))));
  ts_error err = {0};
  ts_func *f = ts_te_finish(te, (ts_buffer *[]){A, Tb}, 2, &err);
  if (!f) fail_msg("finish failed: %s", err.msg);
  assert_int_equal(ts_func_verify(f, &err), TS_OK);
  ts_stmt *l = ts_block_body(ts_realize_block(ts_func_body(f)));
  const char *loops[] = {"p", "t", "c"};
  for (int d = 0; d < 3; d++) {
    assert_int_equal(ts_stmt_kind_of(l), TS_STMT_FOR);
    assert_string_equal(ts_var_name(ts_for_var(l)), loops[d]);
    l = ts_for_body(l);
  }
  ts_block *bt = ts_realize_block(l);
  assert_string_equal(ts_var_name(ts_block_iter_var(bt, 0)), "vt");
  float ain[15], tout[30];
  for (int i = 0; i < 15; i++) ain[i] = (float)i;
  void *args[] = {ain, tout};
  assert_int_equal(ts_interp_run(f, args, 2, NULL, &err), TS_OK);
  for (int t = 0; t < 3; t++)
    for (int p = 0; p < 5; p++)
      for (int c = 0; c < 2; c++)
        assert_true(tout[(t * 5 + p) * 2 + c] == ain[p * 3 + t] + c);
  ts_func_free(f);

  for (int k = 0; k < 2; k++) {
    te = ts_te_begin("bad_order");
    A = ts_te_placeholder(te, "A", TS_FLOAT32, (int64_t[]){4}, 1);
    ts_te_stage *S =
        ts_te_compute(te, "S", TS_FLOAT32, (int64_t[]){4, 4}, 2, NULL);
    ts_expr *i0 = ts_te_axis(S, 0);
    if (k == 0) ts_te_loop_order(S, (const int[]){1, 1});
    ts_buffer *Sb = ts_te_set_value(S, ts_te_load(te, A, &i0, 1));
    if (k == 1) ts_te_loop_order(S, (const int[]){1, 0});
    assert_null(ts_te_finish(te, (ts_buffer *[]){A, Sb}, 2, &err));
    assert_non_null(strstr(err.msg, "stage 'S'"));
    assert_non_null(strstr(err.msg, k == 0 ? "permutation" : "after"));
  }
}

/* The init value of a one-stage reduction of dtype t with reducer r. */
static ts_expr *reduce_init(ts_func **keep, ts_te_reducer r, ts_dtype t) {
  ts_te *te = ts_te_begin("red");
  ts_buffer *A = ts_te_placeholder(te, "A", t, (int64_t[]){3}, 1);
  ts_te_stage *S = ts_te_compute(te, "S", t, (int64_t[]){1}, 1, NULL);
  ts_expr *k = ts_te_reduce_axis(S, NULL, 3);
  assert_string_equal(ts_var_name(k), "vr0");
  ts_buffer *Sb = ts_te_set_reduce(S, r, ts_te_load(te, A, &k, 1));
  ts_error err = {0};
  ts_func *f = ts_te_finish(te, (ts_buffer *[]){A, Sb}, 2, &err);
  if (!f) fail_msg("finish failed: %s", err.msg);
  *keep = f;
  ts_stmt *s = ts_func_find_block(f, "S");
  assert_non_null(s);
  return ts_store_value(ts_block_init(ts_realize_block(s)));
}

static void test_te_reducer_identities(void **state) {
  (void)state;
  ts_func *f;
  ts_expr *e;
  e = reduce_init(&f, TS_TE_MAX, TS_INT8);
  assert_int_equal(ts_expr_int_value(e), -128);
  ts_func_free(f);
  e = reduce_init(&f, TS_TE_MIN, TS_INT8);
  assert_int_equal(ts_expr_int_value(e), 127);
  ts_func_free(f);
  e = reduce_init(&f, TS_TE_MAX, TS_INT32);
  assert_int_equal(ts_expr_int_value(e), INT32_MIN);
  ts_func_free(f);
  e = reduce_init(&f, TS_TE_MIN, TS_UINT8);
  assert_int_equal(ts_expr_int_value(e), 255);
  ts_func_free(f);
  e = reduce_init(&f, TS_TE_MAX, TS_UINT8);
  assert_int_equal(ts_expr_int_value(e), 0);
  ts_func_free(f);
  e = reduce_init(&f, TS_TE_SUM, TS_INT32);
  assert_int_equal(ts_expr_int_value(e), 0);
  ts_func_free(f);
  e = reduce_init(&f, TS_TE_MAX, TS_FLOAT32);
  assert_true(isinf(ts_expr_float_value(e)) && ts_expr_float_value(e) < 0);
  ts_func_free(f);
  e = reduce_init(&f, TS_TE_MIN, TS_FLOAT64);
  assert_true(isinf(ts_expr_float_value(e)) && ts_expr_float_value(e) > 0);
  ts_func_free(f);
  e = reduce_init(&f, TS_TE_MAX, TS_BFLOAT16);
  assert_true(isinf(ts_expr_float_value(e)) && ts_expr_float_value(e) < 0);
  assert_int_equal(ts_expr_dtype(e).code, TS_DT_BFLOAT);
  ts_func_free(f);
  e = reduce_init(&f, TS_TE_SUM, TS_FLOAT16);
  assert_true(ts_expr_float_value(e) == 0.0);
  ts_func_free(f);

  /* min over int8 data in the interpreter */
  e = reduce_init(&f, TS_TE_MIN, TS_INT8);
  int8_t in[3] = {5, -7, 3}, out[1] = {0};
  void *args[] = {in, out};
  assert_int_equal(ts_interp_run(f, args, 2, NULL, NULL), TS_OK);
  assert_int_equal(out[0], -7);
  ts_func_free(f);
}

/* Each misuse makes ts_te_finish fail with TS_EINVAL and a message. */
typedef struct misuse {
  const char *fragment;
  ts_func *(*build)(ts_error *err);
} misuse;

static ts_func *mis_placeholder_unlisted(ts_error *err) {
  ts_te *te = ts_te_begin("f");
  ts_buffer *A = ts_te_placeholder(te, "A", TS_FLOAT32, (int64_t[]){2}, 1);
  ts_te_placeholder(te, "Unused", TS_FLOAT32, (int64_t[]){2}, 1);
  ts_te_stage *S = ts_te_compute(te, "S", TS_FLOAT32, (int64_t[]){2}, 1, NULL);
  ts_expr *i = ts_te_axis(S, 0);
  ts_buffer *Sb = ts_te_set_value(S, ts_te_load(te, A, &i, 1));
  return ts_te_finish(te, (ts_buffer *[]){A, Sb}, 2, err);
}

static ts_func *mis_param_twice(ts_error *err) {
  ts_te *te = ts_te_begin("f");
  ts_buffer *A = ts_te_placeholder(te, "A", TS_FLOAT32, (int64_t[]){2}, 1);
  ts_te_stage *S = ts_te_compute(te, "S", TS_FLOAT32, (int64_t[]){2}, 1, NULL);
  ts_expr *i = ts_te_axis(S, 0);
  ts_buffer *Sb = ts_te_set_value(S, ts_te_load(te, A, &i, 1));
  return ts_te_finish(te, (ts_buffer *[]){A, Sb, A}, 3, err);
}

static ts_func *mis_foreign_param(ts_error *err) {
  ts_te *te = ts_te_begin("f");
  ts_buffer *A = ts_te_placeholder(te, "A", TS_FLOAT32, (int64_t[]){2}, 1);
  ts_te_stage *S = ts_te_compute(te, "S", TS_FLOAT32, (int64_t[]){2}, 1, NULL);
  ts_expr *i = ts_te_axis(S, 0);
  ts_buffer *Sb = ts_te_set_value(S, ts_te_load(te, A, &i, 1));
  ts_buffer *alien =
      ts_buffer_new(ts_te_arena(te), "alien", TS_FLOAT32, (int64_t[]){2}, 1);
  return ts_te_finish(te, (ts_buffer *[]){A, Sb, alien}, 3, err);
}

static ts_func *mis_foreign_load(ts_error *err) {
  ts_te *te = ts_te_begin("f");
  ts_buffer *A = ts_te_placeholder(te, "A", TS_FLOAT32, (int64_t[]){2}, 1);
  ts_buffer *alien =
      ts_buffer_new(ts_te_arena(te), "alien", TS_FLOAT32, (int64_t[]){2}, 1);
  ts_te_stage *S = ts_te_compute(te, "S", TS_FLOAT32, (int64_t[]){2}, 1, NULL);
  ts_expr *i = ts_te_axis(S, 0);
  ts_buffer *Sb = ts_te_set_value(S, ts_load(ts_te_arena(te), alien, &i, 1));
  return ts_te_finish(te, (ts_buffer *[]){A, Sb}, 2, err);
}

static ts_func *mis_unfinished(ts_error *err) {
  ts_te *te = ts_te_begin("f");
  ts_buffer *A = ts_te_placeholder(te, "A", TS_FLOAT32, (int64_t[]){2}, 1);
  ts_te_stage *S = ts_te_compute(te, "S", TS_FLOAT32, (int64_t[]){2}, 1, NULL);
  ts_expr *i = ts_te_axis(S, 0);
  ts_buffer *Sb = ts_te_set_value(S, ts_te_load(te, A, &i, 1));
  ts_te_compute(te, "Pending", TS_FLOAT32, (int64_t[]){2}, 1, NULL);
  return ts_te_finish(te, (ts_buffer *[]){A, Sb}, 2, err);
}

static ts_func *mis_reads_later(ts_error *err) {
  ts_te *te = ts_te_begin("f");
  ts_buffer *A = ts_te_placeholder(te, "A", TS_FLOAT32, (int64_t[]){2}, 1);
  ts_te_stage *S = ts_te_compute(te, "S", TS_FLOAT32, (int64_t[]){2}, 1, NULL);
  ts_te_stage *T = ts_te_compute(te, "T", TS_FLOAT32, (int64_t[]){2}, 1, NULL);
  ts_expr *ti = ts_te_axis(T, 0);
  ts_buffer *Tb = ts_te_set_value(T, ts_te_load(te, A, &ti, 1));
  ts_expr *si = ts_te_axis(S, 0);
  ts_buffer *Sb = ts_te_set_value(S, ts_te_load(te, Tb, &si, 1));
  return ts_te_finish(te, (ts_buffer *[]){A, Sb, Tb}, 3, err);
}

static ts_func *mis_dtype(ts_error *err) {
  ts_te *te = ts_te_begin("f");
  ts_buffer *A = ts_te_placeholder(te, "A", TS_INT8, (int64_t[]){2}, 1);
  ts_te_stage *S = ts_te_compute(te, "S", TS_INT32, (int64_t[]){2}, 1, NULL);
  ts_expr *i = ts_te_axis(S, 0);
  ts_buffer *Sb = ts_te_set_value(S, ts_te_load(te, A, &i, 1));
  return ts_te_finish(te, (ts_buffer *[]){A, Sb}, 2, err);
}

static ts_func *mis_value_with_reduce(ts_error *err) {
  ts_te *te = ts_te_begin("f");
  ts_buffer *A = ts_te_placeholder(te, "A", TS_FLOAT32, (int64_t[]){2}, 1);
  ts_te_stage *S = ts_te_compute(te, "S", TS_FLOAT32, (int64_t[]){1}, 1, NULL);
  ts_expr *k = ts_te_reduce_axis(S, "k", 2);
  ts_buffer *Sb = ts_te_set_value(S, ts_te_load(te, A, &k, 1));
  return ts_te_finish(te, (ts_buffer *[]){A, Sb}, 2, err);
}

static ts_func *mis_bad_shape(ts_error *err) {
  ts_te *te = ts_te_begin("f");
  ts_buffer *A = ts_te_placeholder(te, "A", TS_FLOAT32, (int64_t[]){2, -1}, 2);
  ts_te_stage *S = ts_te_compute(te, "S", TS_FLOAT32, (int64_t[]){2}, 1, NULL);
  ts_expr *idx[] = {ts_te_axis(S, 0), ts_index(ts_te_arena(te), 0)};
  ts_buffer *Sb = ts_te_set_value(S, ts_te_load(te, A, idx, 2));
  return ts_te_finish(te, (ts_buffer *[]){A, Sb}, 2, err);
}

static ts_func *mis_no_output(ts_error *err) {
  ts_te *te = ts_te_begin("f");
  ts_buffer *A = ts_te_placeholder(te, "A", TS_FLOAT32, (int64_t[]){2}, 1);
  ts_te_stage *S = ts_te_compute(te, "S", TS_FLOAT32, (int64_t[]){2}, 1, NULL);
  ts_expr *i = ts_te_axis(S, 0);
  ts_te_set_value(S, ts_te_load(te, A, &i, 1));
  return ts_te_finish(te, (ts_buffer *[]){A}, 1, err);
}

static ts_func *mis_duplicate_name(ts_error *err) {
  ts_te *te = ts_te_begin("f");
  ts_buffer *A = ts_te_placeholder(te, "A", TS_FLOAT32, (int64_t[]){2}, 1);
  ts_te_stage *S = ts_te_compute(te, "A", TS_FLOAT32, (int64_t[]){2}, 1, NULL);
  ts_expr *i = ts_te_axis(S, 0);
  ts_buffer *Sb = ts_te_set_value(S, ts_te_load(te, A, &i, 1));
  return ts_te_finish(te, (ts_buffer *[]){A, Sb}, 2, err);
}

static ts_func *mis_foreign_axis(ts_error *err) {
  ts_te *te = ts_te_begin("f");
  ts_buffer *A = ts_te_placeholder(te, "A", TS_FLOAT32, (int64_t[]){2}, 1);
  ts_te_stage *S = ts_te_compute(te, "S", TS_FLOAT32, (int64_t[]){2}, 1, NULL);
  ts_te_stage *T = ts_te_compute(te, "T", TS_FLOAT32, (int64_t[]){2}, 1, NULL);
  ts_expr *si = ts_te_axis(S, 0);
  ts_buffer *Sb = ts_te_set_value(S, ts_te_load(te, A, &si, 1));
  ts_buffer *Tb = ts_te_set_value(T, ts_te_load(te, Sb, &si, 1));
  return ts_te_finish(te, (ts_buffer *[]){A, Sb, Tb}, 3, err);
}

static ts_func *mis_finish_twice(ts_error *err) {
  ts_te *te = ts_te_begin("f");
  ts_buffer *A = ts_te_placeholder(te, "A", TS_FLOAT32, (int64_t[]){2}, 1);
  ts_te_stage *S = ts_te_compute(te, "S", TS_FLOAT32, (int64_t[]){2}, 1, NULL);
  ts_expr *i = ts_te_axis(S, 0);
  ts_buffer *Sb = ts_te_set_value(S, ts_te_load(te, A, &i, 1));
  ts_te_set_value(S, ts_te_load(te, A, &i, 1));
  return ts_te_finish(te, (ts_buffer *[]){A, Sb}, 2, err);
}

static ts_func *mis_bad_axis_index(ts_error *err) {
  ts_te *te = ts_te_begin("f");
  ts_buffer *A = ts_te_placeholder(te, "A", TS_FLOAT32, (int64_t[]){2}, 1);
  ts_te_stage *S = ts_te_compute(te, "S", TS_FLOAT32, (int64_t[]){2}, 1, NULL);
  ts_expr *i = ts_te_axis(S, 3);
  ts_buffer *Sb = ts_te_set_value(S, ts_te_load(te, A, &i, 1));
  return ts_te_finish(te, (ts_buffer *[]){A, Sb}, 2, err);
}

static ts_func *mis_load_rank(ts_error *err) {
  ts_te *te = ts_te_begin("f");
  ts_buffer *A = ts_te_placeholder(te, "A", TS_FLOAT32, (int64_t[]){2, 2}, 2);
  ts_te_stage *S = ts_te_compute(te, "S", TS_FLOAT32, (int64_t[]){2}, 1, NULL);
  ts_expr *i = ts_te_axis(S, 0);
  ts_buffer *Sb = ts_te_set_value(S, ts_te_load(te, A, &i, 1));
  return ts_te_finish(te, (ts_buffer *[]){A, Sb}, 2, err);
}

static ts_func *mis_bad_extent(ts_error *err) {
  ts_te *te = ts_te_begin("f");
  ts_buffer *A = ts_te_placeholder(te, "A", TS_FLOAT32, (int64_t[]){2}, 1);
  ts_te_stage *S = ts_te_compute(te, "S", TS_FLOAT32, (int64_t[]){1}, 1, NULL);
  ts_expr *k = ts_te_reduce_axis(S, "k", 0);
  ts_buffer *Sb = ts_te_set_reduce(S, TS_TE_SUM, ts_te_load(te, A, &k, 1));
  return ts_te_finish(te, (ts_buffer *[]){A, Sb}, 2, err);
}

static void test_te_misuse(void **state) {
  (void)state;
  static const misuse cases[] = {
      {"placeholder 'Unused' is not listed", mis_placeholder_unlisted},
      {"'A' is listed twice", mis_param_twice},
      {"'alien') is not a placeholder or stage", mis_foreign_param},
      {"reads buffer 'alien'", mis_foreign_load},
      {"stage 'Pending' has no value", mis_unfinished},
      {"reads stage 'T', which is created after it", mis_reads_later},
      {"value has dtype int8, the stage has int32", mis_dtype},
      {"has reduce axes", mis_value_with_reduce},
      {"non-positive size -1", mis_bad_shape},
      {"no output", mis_no_output},
      {"'A' is already used", mis_duplicate_name},
      {"stage 'T' uses variable 'vi'", mis_foreign_axis},
      {"finished twice", mis_finish_twice},
      {"no spatial axis 3", mis_bad_axis_index},
      {"with 1 indices; it has rank 2", mis_load_rank},
      {"non-positive extent 0", mis_bad_extent},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ts_error err = {0};
    ts_func *f = cases[i].build(&err);
    if (f) {
      ts_func_free(f);
      fail_msg("misuse %zu ('%s') was accepted", i, cases[i].fragment);
    }
    assert_int_equal(err.code, TS_EINVAL);
    if (!strstr(err.msg, cases[i].fragment))
      fail_msg("message '%s' lacks '%s'", err.msg, cases[i].fragment);
    assert_non_null(strstr(err.msg, "te 'f'"));
  }
  /* abort frees everything (checked by the leak sanitizer) */
  ts_te *te = ts_te_begin("dropped");
  ts_te_placeholder(te, "A", TS_FLOAT32, (int64_t[]){2}, 1);
  ts_te_compute(te, "S", TS_FLOAT32, (int64_t[]){2}, 1, NULL);
  ts_te_abort(te);
  ts_te_abort(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_te_structure),
      cmocka_unit_test(test_te_reducer_identities),
      cmocka_unit_test(test_te_loop_order),
      cmocka_unit_test(test_te_misuse),
      cmocka_unit_test(test_op_structure),
      cmocka_unit_test(test_ops_verify),
      cmocka_unit_test(test_flops),
      cmocka_unit_test(test_matmul_values),
      cmocka_unit_test(test_conv_values),
      cmocka_unit_test(test_depthwise_values),
      cmocka_unit_test(test_conv_transpose_values),
      cmocka_unit_test(test_pool_values),
      cmocka_unit_test(test_nn_values),
      cmocka_unit_test(test_data_movement_values),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
