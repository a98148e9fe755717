/*
 * test_interp_ops.c — every operator of the library, built from a workload
 * spec and run by the reference interpreter on seeded random inputs, against
 * an independent C implementation written here from the mathematical
 * definition of the operator (in double precision, not derived from the
 * IR), compared with the per-dtype tolerance of ts_host_compare. This pins
 * the operator library and the interpreter to each other: a wrong index in
 * either shows up as a mismatch.
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

/* ---- running a workload ---- */

enum { MAX_PARAMS = 8 };

typedef struct run {
  char spec[512];
  ts_workload *w;
  int n;                  /* parameters; the last one is the output */
  void *data[MAX_PARAMS]; /* storage per parameter */
  double *in[MAX_PARAMS]; /* input values as doubles */
  ts_dtype dt[MAX_PARAMS];
  int64_t elems[MAX_PARAMS];
} run;

/* Builds the workload, fills its inputs (seeded), poisons the output,
 * interprets it and reads the inputs back as doubles. */
static void setup(run *r, int expect_params, const char *fmt, ...) {
  memset(r, 0, sizeof *r);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->spec, sizeof r->spec, fmt, ap);
  va_end(ap);
  ts_error err;
  ts_error_clear(&err);
  int rc = ts_workload_from_spec(r->spec, &r->w, &err);
  if (rc != TS_OK) fail_msg("%s: %s", r->spec, err.msg);
  ts_func *f = r->w->func;
  r->n = ts_func_n_params(f);
  if (r->n != expect_params)
    fail_msg("%s: %d parameters, expected %d", r->spec, r->n, expect_params);
  for (int i = 0; i < r->n; i++) {
    ts_buffer *b = ts_func_param(f, i);
    r->dt[i] = ts_buffer_dtype(b);
    r->elems[i] = ts_buffer_elems(b);
    assert_null(ts_buffer_strides(b));
    r->data[i] = malloc((size_t)ts_buffer_bytes(b) + 1);
    assert_non_null(r->data[i]);
    if (i < r->n - 1) {
      ts_host_fill_random(r->data[i], r->dt[i], r->elems[i],
                          1000 + 17 * (uint64_t)i);
      r->in[i] = malloc(sizeof(double) * (size_t)r->elems[i]);
      for (int64_t k = 0; k < r->elems[i]; k++)
        r->in[i][k] = ts_host_get(r->data[i], r->dt[i], k);
    } else {
      memset(r->data[i], 0xa5, (size_t)ts_buffer_bytes(b));
    }
  }
  ts_error_clear(&err);
  rc = ts_interp_run(f, r->data, r->n, NULL, &err);
  if (rc != TS_OK) fail_msg("%s: interpreter: %s", r->spec, err.msg);
}

/* Compares the output with `want` (doubles rounded to the output dtype),
 * then frees everything. */
static void check(run *r, double *want) {
  int o = r->n - 1;
  ts_dtype t = r->dt[o];
  void *ref = malloc(ts_dtype_elem_bytes(t) * (size_t)r->elems[o] + 1);
  for (int64_t k = 0; k < r->elems[o]; k++) ts_host_set(ref, t, k, want[k]);
  int64_t first = -1;
  double max_err = 0;
  int64_t bad =
      ts_host_compare(r->data[o], ref, t, r->elems[o], &first, &max_err);
  if (bad) {
    print_error("%s: %lld of %lld elements differ; first at %lld: got %g, "
                "want %g (max abs error %g)\n",
                r->spec, (long long)bad, (long long)r->elems[o],
                (long long)first, ts_host_get(r->data[o], t, first),
                want[first], max_err);
  }
  assert_int_equal(bad, 0);
  free(ref);
  free(want);
  for (int i = 0; i < r->n; i++) {
    free(r->data[i]);
    free(r->in[i]);
  }
  ts_workload_free(r->w);
}

static double *zeros(int64_t n) {
  double *p = calloc((size_t)n, sizeof *p);
  assert_non_null(p);
  return p;
}

/* ---- linear algebra ---- */

static void ref_matmul(const double *A, const double *B, double *C, int64_t M,
                       int64_t N, int64_t K, int ta, int tb) {
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      double s = 0;
      for (int64_t k = 0; k < K; k++) {
        double a = ta ? A[k * M + m] : A[m * K + k];
        double b = tb ? B[n * K + k] : B[k * N + n];
        s += a * b;
      }
      C[m * N + n] = s;
    }
}

static void test_matmul(void **state) {
  (void)state;
  const int64_t M = 5, N = 7, K = 9;
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      const char *dts[][2] = {{"float32", "float32"}, {"bfloat16", "float32"},
                              {"int8", "int32"},      {"float16", "float32"},
                              {"float64", "float64"}, {"uint8", "int32"}};
      for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        run r;
        setup(&r, 3,
              "matmul M=%lld N=%lld K=%lld transpose_a=%d transpose_b=%d "
              "dtype=%s",
              (long long)M, (long long)N, (long long)K, ta, tb, dts[d][0]);
        char buf[32];
        assert_string_equal(ts_dtype_str(r.dt[2], buf), dts[d][1]);
        double *C = zeros(M * N);
        ref_matmul(r.in[0], r.in[1], C, M, N, K, ta, tb);
        check(&r, C);
      }
    }
  /* a long float32 reduction still matches a double reference */
  run r;
  setup(&r, 3, "matmul M=4 N=3 K=2048 dtype=float32");
  double *C = zeros(12);
  ref_matmul(r.in[0], r.in[1], C, 4, 3, 2048, 0, 0);
  check(&r, C);
}

static void test_batch_matmul(void **state) {
  (void)state;
  const int64_t Bt = 3, M = 4, N = 5, K = 6;
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      const char *dts[] = {"float32", "int8"};
      for (int d = 0; d < 2; d++) {
        run r;
        setup(&r, 3,
              "batch_matmul B=%lld M=%lld N=%lld K=%lld transpose_a=%d "
              "transpose_b=%d dtype=%s",
              (long long)Bt, (long long)M, (long long)N, (long long)K, ta, tb,
              dts[d]);
        double *C = zeros(Bt * M * N);
        for (int64_t b = 0; b < Bt; b++)
          ref_matmul(r.in[0] + b * M * K, r.in[1] + b * K * N, C + b * M * N, M,
                     N, K, ta, tb);
        check(&r, C);
      }
    }
}

static void test_dense(void **state) {
  (void)state;
  const int64_t M = 6, N = 5, K = 7;
  const char *dts[] = {"float32", "bfloat16", "int8", "float16"};
  for (int bias = 0; bias < 2; bias++)
    for (int d = 0; d < 4; d++) {
      run r;
      setup(&r, bias ? 4 : 3, "dense M=%lld N=%lld K=%lld bias=%d dtype=%s",
            (long long)M, (long long)N, (long long)K, bias, dts[d]);
      double *Y = zeros(M * N);
      const double *X = r.in[0], *W = r.in[1];
      for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
          double s = 0;
          for (int64_t k = 0; k < K; k++) s += X[m * K + k] * W[n * K + k];
          Y[m * N + n] = s + (bias ? r.in[2][n] : 0);
        }
      check(&r, Y);
    }
}

/* ---- convolutions ---- */

typedef struct conv_cfg {
  int64_t N, H, W, CI, CO, KH, KW, stride, pad, dilation, groups;
} conv_cfg;

static int64_t conv_out(int64_t in, int64_t k, int64_t s, int64_t p,
                        int64_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

/* conv2d in either layout, from the definition:
 * out[n, co, oh, ow] = sum_{rc < CIg, rh, rw}
 *     in[n, g * CIg + rc, oh*s - p + rh*d, ow*s - p + rw*d] * w[co, rc, rh, rw]
 * with g = co / (CO / groups) and zero outside the input. */
static double *ref_conv2d(const conv_cfg *c, const double *data,
                          const double *weight, bool nhwc) {
  int64_t OH = conv_out(c->H, c->KH, c->stride, c->pad, c->dilation);
  int64_t OW = conv_out(c->W, c->KW, c->stride, c->pad, c->dilation);
  int64_t CIg = c->CI / c->groups, COg = c->CO / c->groups;
  double *out = zeros(c->N * c->CO * OH * OW);
  for (int64_t n = 0; n < c->N; n++)
    for (int64_t co = 0; co < c->CO; co++)
      for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
          double s = 0;
          int64_t g = co / COg;
          for (int64_t rc = 0; rc < CIg; rc++)
            for (int64_t rh = 0; rh < c->KH; rh++)
              for (int64_t rw = 0; rw < c->KW; rw++) {
                int64_t h = oh * c->stride - c->pad + rh * c->dilation;
                int64_t w = ow * c->stride - c->pad + rw * c->dilation;
                if (h < 0 || h >= c->H || w < 0 || w >= c->W) continue;
                int64_t ci = g * CIg + rc;
                double x, k;
                if (nhwc) {
                  x = data[((n * c->H + h) * c->W + w) * c->CI + ci];
                  k = weight[((rh * c->KW + rw) * CIg + rc) * c->CO + co];
                } else {
                  x = data[((n * c->CI + ci) * c->H + h) * c->W + w];
                  k = weight[((co * CIg + rc) * c->KH + rh) * c->KW + rw];
                }
                s += x * k;
              }
          int64_t o = nhwc ? ((n * OH + oh) * OW + ow) * c->CO + co
                           : ((n * c->CO + co) * OH + oh) * OW + ow;
          out[o] = s;
        }
  return out;
}

static void run_conv2d(const conv_cfg *c, bool nhwc, const char *dtype) {
  run r;
  setup(&r, 3,
        "conv2d_%s N=%lld H=%lld W=%lld CI=%lld CO=%lld KH=%lld KW=%lld "
        "stride=%lld pad=%lld dilation=%lld groups=%lld dtype=%s",
        nhwc ? "nhwc" : "nchw", (long long)c->N, (long long)c->H,
        (long long)c->W, (long long)c->CI, (long long)c->CO, (long long)c->KH,
        (long long)c->KW, (long long)c->stride, (long long)c->pad,
        (long long)c->dilation, (long long)c->groups, dtype);
  double *want = ref_conv2d(c, r.in[0], r.in[1], nhwc);
  check(&r, want);
}

static void test_conv2d(void **state) {
  (void)state;
  /* every combination of stride 2, pad 1, dilation 2, groups 2 */
  for (int mask = 0; mask < 16; mask++) {
    conv_cfg c = {.N = 2,
                  .H = 9,
                  .W = 8,
                  .CI = 4,
                  .CO = 6,
                  .KH = 3,
                  .KW = 2,
                  .stride = mask & 1 ? 2 : 1,
                  .pad = mask & 2 ? 1 : 0,
                  .dilation = mask & 4 ? 2 : 1,
                  .groups = mask & 8 ? 2 : 1};
    run_conv2d(&c, false, "float32");
    run_conv2d(&c, true, "float32");
  }
  conv_cfg c = {.N = 1,
                .H = 7,
                .W = 7,
                .CI = 4,
                .CO = 4,
                .KH = 3,
                .KW = 3,
                .stride = 2,
                .pad = 1,
                .dilation = 2,
                .groups = 2};
  run_conv2d(&c, false, "int8");
  run_conv2d(&c, true, "int8");
  run_conv2d(&c, true, "bfloat16");
  run_conv2d(&c, false, "float16");
  /* depthwise-like grouping: groups = CI = CO */
  conv_cfg dw = {.N = 1,
                 .H = 6,
                 .W = 5,
                 .CI = 3,
                 .CO = 3,
                 .KH = 3,
                 .KW = 3,
                 .stride = 1,
                 .pad = 1,
                 .dilation = 1,
                 .groups = 3};
  run_conv2d(&dw, false, "float32");
  run_conv2d(&dw, true, "float32");
}

static void test_depthwise_conv2d(void **state) {
  (void)state;
  const int64_t N = 2, H = 7, W = 6, C = 3, KH = 3, KW = 2;
  for (int64_t stride = 1; stride <= 2; stride++)
    for (int64_t pad = 0; pad <= 1; pad++) {
      const char *dts[] = {"float32", "int8"};
      for (int d = 0; d < 2; d++) {
        run r;
        setup(&r, 3,
              "depthwise_conv2d_nhwc N=%lld H=%lld W=%lld C=%lld KH=%lld "
              "KW=%lld stride=%lld pad=%lld dtype=%s",
              (long long)N, (long long)H, (long long)W, (long long)C,
              (long long)KH, (long long)KW, (long long)stride, (long long)pad,
              dts[d]);
        int64_t OH = conv_out(H, KH, stride, pad, 1),
                OW = conv_out(W, KW, stride, pad, 1);
        double *out = zeros(N * OH * OW * C);
        for (int64_t n = 0; n < N; n++)
          for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++)
              for (int64_t c = 0; c < C; c++) {
                double s = 0;
                for (int64_t rh = 0; rh < KH; rh++)
                  for (int64_t rw = 0; rw < KW; rw++) {
                    int64_t h = oh * stride - pad + rh,
                            w = ow * stride - pad + rw;
                    if (h < 0 || h >= H || w < 0 || w >= W) continue;
                    s += r.in[0][((n * H + h) * W + w) * C + c] *
                         r.in[1][(rh * KW + rw) * C + c];
                  }
                out[((n * OH + oh) * OW + ow) * C + c] = s;
              }
        check(&r, out);
      }
    }
}

/* conv2d_transpose as a scatter (the definition, unlike the gather the
 * library builds): every input element adds data * weight to
 * out[n, co, h*s - p + kh, w*s - p + kw]. */
static void test_conv2d_transpose(void **state) {
  (void)state;
  const int64_t N = 2, H = 4, W = 5, CI = 3, CO = 2, KH = 3, KW = 3;
  for (int64_t stride = 1; stride <= 2; stride++)
    for (int64_t pad = 0; pad <= 1; pad++) {
      const char *dts[] = {"float32", "int8"};
      for (int d = 0; d < 2; d++) {
        run r;
        setup(&r, 3,
              "conv2d_transpose_nchw N=%lld H=%lld W=%lld CI=%lld CO=%lld "
              "KH=%lld KW=%lld stride=%lld pad=%lld dtype=%s",
              (long long)N, (long long)H, (long long)W, (long long)CI,
              (long long)CO, (long long)KH, (long long)KW, (long long)stride,
              (long long)pad, dts[d]);
        int64_t OH = (H - 1) * stride - 2 * pad + KH;
        int64_t OW = (W - 1) * stride - 2 * pad + KW;
        assert_int_equal(r.elems[2], N * CO * OH * OW);
        double *out = zeros(N * CO * OH * OW);
        for (int64_t n = 0; n < N; n++)
          for (int64_t ci = 0; ci < CI; ci++)
            for (int64_t h = 0; h < H; h++)
              for (int64_t w = 0; w < W; w++)
                for (int64_t co = 0; co < CO; co++)
                  for (int64_t kh = 0; kh < KH; kh++)
                    for (int64_t kw = 0; kw < KW; kw++) {
                      int64_t oh = h * stride - pad + kh,
                              ow = w * stride - pad + kw;
                      if (oh < 0 || oh >= OH || ow < 0 || ow >= OW) continue;
                      out[((n * CO + co) * OH + oh) * OW + ow] +=
                          r.in[0][((n * CI + ci) * H + h) * W + w] *
                          r.in[1][((ci * CO + co) * KH + kh) * KW + kw];
                    }
        check(&r, out);
      }
    }
}

static void test_pool2d(void **state) {
  (void)state;
  const int64_t N = 2, H = 7, W = 6, C = 3, KH = 3, KW = 2;
  for (int avg = 0; avg < 2; avg++)
    for (int64_t stride = 1; stride <= 2; stride++)
      for (int64_t pad = 0; pad <= 1; pad++) {
        const char *dts[] = {"float32", "int8", "float16"};
        for (int d = 0; d < 3; d++) {
          if (avg && d == 1) continue; /* avg pooling is float only */
          run r;
          setup(&r, 2,
                "pool2d_nhwc N=%lld H=%lld W=%lld C=%lld KH=%lld KW=%lld "
                "stride=%lld pad=%lld kind=%s dtype=%s",
                (long long)N, (long long)H, (long long)W, (long long)C,
                (long long)KH, (long long)KW, (long long)stride, (long long)pad,
                avg ? "avg" : "max", dts[d]);
          int64_t OH = conv_out(H, KH, stride, pad, 1),
                  OW = conv_out(W, KW, stride, pad, 1);
          double *out = zeros(N * OH * OW * C);
          for (int64_t n = 0; n < N; n++)
            for (int64_t oh = 0; oh < OH; oh++)
              for (int64_t ow = 0; ow < OW; ow++)
                for (int64_t c = 0; c < C; c++) {
                  double s = 0, m = -INFINITY;
                  for (int64_t rh = 0; rh < KH; rh++)
                    for (int64_t rw = 0; rw < KW; rw++) {
                      int64_t h = oh * stride - pad + rh,
                              w = ow * stride - pad + rw;
                      if (h < 0 || h >= H || w < 0 || w >= W) continue;
                      double x = r.in[0][((n * H + h) * W + w) * C + c];
                      s += x;
                      m = fmax(m, x);
                    }
                  /* average pooling divides by the whole window */
                  out[((n * OH + oh) * OW + ow) * C + c] =
                      avg ? s / (KH * KW) : m;
                }
          check(&r, out);
        }
      }
}

/* ---- normalisation and reductions ---- */

static void test_softmax(void **state) {
  (void)state;
  const char *dts[] = {"float32", "float64", "float16", "bfloat16"};
  for (int d = 0; d < 4; d++) {
    const int64_t N = 5, D = 13;
    run r;
    setup(&r, 2, "softmax N=%lld D=%lld dtype=%s", (long long)N, (long long)D,
          dts[d]);
    double *Y = zeros(N * D);
    for (int64_t n = 0; n < N; n++) {
      double sum = 0;
      for (int64_t k = 0; k < D; k++) sum += exp(r.in[0][n * D + k]);
      for (int64_t k = 0; k < D; k++)
        Y[n * D + k] = exp(r.in[0][n * D + k]) / sum;
    }
    check(&r, Y);
  }
  /* large inputs must not overflow (the library subtracts the row max) */
  ts_workload *w;
  ts_error err;
  assert_int_equal(
      ts_workload_from_spec("softmax N=1 D=4 dtype=float32", &w, &err), TS_OK);
  float x[4] = {100, 101, 102, 103}, y[4];
  void *args[2] = {x, y};
  assert_int_equal(ts_interp_run(w->func, args, 2, NULL, &err), TS_OK);
  double e[4], s = 0;
  for (int k = 0; k < 4; k++) s += (e[k] = exp(k - 3.0));
  for (int k = 0; k < 4; k++) assert_true(fabs(y[k] - e[k] / s) < 1e-6);
  ts_workload_free(w);
}

static void test_layer_norm(void **state) {
  (void)state;
  const char *dts[] = {"float32", "float64", "float16", "bfloat16"};
  for (int d = 0; d < 4; d++) {
    const int64_t N = 4, D = 16;
    run r;
    setup(&r, 4, "layer_norm N=%lld D=%lld dtype=%s", (long long)N,
          (long long)D, dts[d]);
    double *Y = zeros(N * D);
    const double *X = r.in[0], *gamma = r.in[1], *beta = r.in[2];
    for (int64_t n = 0; n < N; n++) {
      double mean = 0, var = 0;
      for (int64_t k = 0; k < D; k++) mean += X[n * D + k];
      mean /= D;
      for (int64_t k = 0; k < D; k++)
        var += (X[n * D + k] - mean) * (X[n * D + k] - mean);
      var /= D;
      double rstd = 1.0 / sqrt(var + 1e-5);
      for (int64_t k = 0; k < D; k++)
        Y[n * D + k] = (X[n * D + k] - mean) * rstd * gamma[k] + beta[k];
    }
    check(&r, Y);
  }
}

/* The statistics come from sums of the row shifted by its first element:
 * a float32 row of mean 1000 and spread about 1 keeps its variance (sum
 * and sum of squares without the shift lose it to u * mean^2 ~ 0.06 per
 * element and more), and a constant row gives a variance of exactly 0
 * (the output is beta). */
static void test_layer_norm_offset(void **state) {
  (void)state;
  enum { D = 256 };
  ts_workload *w;
  ts_error err;
  assert_int_equal(
      ts_workload_from_spec("layer_norm N=2 D=256 dtype=float32", &w, &err),
      TS_OK);
  float x[2 * D], g[D], b[D], y[2 * D];
  for (int k = 0; k < D; k++) {
    x[k] = 1000.0f + (float)((k * 37) % 17) / 8.0f - 1.0f;
    x[D + k] = 3.5f;
    g[k] = 1.0f;
    b[k] = 0.25f;
  }
  void *args[4] = {x, g, b, y};
  assert_int_equal(ts_interp_run(w->func, args, 4, NULL, &err), TS_OK);
  double mean = 0, var = 0;
  for (int k = 0; k < D; k++) mean += x[k];
  mean /= D;
  for (int k = 0; k < D; k++) var += (x[k] - mean) * (x[k] - mean);
  var /= D;
  double worst = 0;
  for (int k = 0; k < D; k++) {
    double want = (x[k] - mean) / sqrt(var + 1e-5) + 0.25;
    worst = fmax(worst, fabs(y[k] - want));
    assert_true(y[D + k] == 0.25f);
  }
  assert_true(worst < 1e-3);
  ts_workload_free(w);
}

static void test_reduce(void **state) {
  (void)state;
  const char *dts[] = {"float32", "int8",    "int32",
                       "uint8",   "float16", "bfloat16"};
  for (int op = 0; op < 2; op++)
    for (int d = 0; d < 6; d++) {
      const int64_t N = 6, D = 5;
      run r;
      setup(&r, 2, "reduce op=%s N=%lld D=%lld dtype=%s", op ? "max" : "sum",
            (long long)N, (long long)D, dts[d]);
      double *Y = zeros(N);
      for (int64_t n = 0; n < N; n++) {
        double s = 0, m = -INFINITY;
        for (int64_t k = 0; k < D; k++) {
          s += r.in[0][n * D + k];
          m = fmax(m, r.in[0][n * D + k]);
        }
        Y[n] = op ? m : s;
      }
      check(&r, Y);
    }
}

/* ---- elementwise ---- */

static double gelu(double x) { return 0.5 * x * (1 + erf(x / sqrt(2.0))); }

static void test_elementwise(void **state) {
  (void)state;
  const char *ops[] = {"add", "mul", "relu", "gelu", "sigmoid", "tanh"};
  const char *dts[] = {"float32", "float64", "float16", "bfloat16",
                       "int8",    "uint8",   "int32"};
  for (int o = 0; o < 6; o++)
    for (int d = 0; d < 7; d++) {
      bool binary = o < 2, float_only = o >= 3;
      if (float_only && d >= 4) continue;
      run r;
      setup(&r, binary ? 3 : 2, "elementwise op=%s shape=3x4x5 dtype=%s",
            ops[o], dts[d]);
      int64_t n = r.elems[r.n - 1];
      assert_int_equal(n, 60);
      double *Y = zeros(n);
      for (int64_t k = 0; k < n; k++) {
        double x = r.in[0][k];
        switch (o) {
        case 0: Y[k] = x + r.in[1][k]; break;
        case 1: Y[k] = x * r.in[1][k]; break;
        case 2: Y[k] = x > 0 ? x : 0; break;
        case 3: Y[k] = gelu(x); break;
        case 4: Y[k] = 1 / (1 + exp(-x)); break;
        default: Y[k] = tanh(x); break;
        }
      }
      check(&r, Y);
    }
}

/* ---- data movement ---- */

static void test_transpose(void **state) {
  (void)state;
  const int64_t S[3] = {2, 3, 4};
  const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                           {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  for (int p = 0; p < 6; p++) {
    const char *dt = p % 2 ? "int8" : "float32";
    run r;
    setup(&r, 2, "transpose shape=2x3x4 perm=%dx%dx%d dtype=%s", perms[p][0],
          perms[p][1], perms[p][2], dt);
    /* Y[i0, i1, i2] = X[j] where j[perm[d]] = i[d] */
    int64_t O[3] = {S[perms[p][0]], S[perms[p][1]], S[perms[p][2]]};
    double *Y = zeros(24);
    for (int64_t a = 0; a < O[0]; a++)
      for (int64_t b = 0; b < O[1]; b++)
        for (int64_t c = 0; c < O[2]; c++) {
          int64_t i[3] = {a, b, c}, j[3];
          for (int d = 0; d < 3; d++) j[perms[p][d]] = i[d];
          Y[(a * O[1] + b) * O[2] + c] =
              r.in[0][(j[0] * S[1] + j[1]) * S[2] + j[2]];
        }
    check(&r, Y);
  }
}

/* The offset of logical element (n, c, h, w) in layout `l`. */
static int64_t layout_offset(const char *l, int64_t N, int64_t C, int64_t H,
                             int64_t W, int64_t n, int64_t c, int64_t h,
                             int64_t w) {
  (void)N;
  if (strcmp(l, "NCHW") == 0) return ((n * C + c) * H + h) * W + w;
  if (strcmp(l, "NHWC") == 0) return ((n * H + h) * W + w) * C + c;
  /* NCHW16c: [N, C/16, H, W, 16] */
  return (((n * (C / 16) + c / 16) * H + h) * W + w) * 16 + c % 16;
}

static void test_layout_transform(void **state) {
  (void)state;
  const char *pairs[][2] = {{"NCHW", "NHWC"},    {"NHWC", "NCHW"},
                            {"NCHW", "NCHW16c"}, {"NCHW16c", "NCHW"},
                            {"NHWC", "NCHW16c"}, {"NCHW16c", "NHWC"}};
  const int64_t N = 2, C = 32, H = 3, W = 5;
  for (int p = 0; p < 6; p++) {
    run r;
    setup(&r, 2,
          "layout_transform N=%lld C=%lld H=%lld W=%lld src=%s dst=%s "
          "dtype=%s",
          (long long)N, (long long)C, (long long)H, (long long)W, pairs[p][0],
          pairs[p][1], p % 2 ? "float32" : "uint8");
    double *Y = zeros(N * C * H * W);
    for (int64_t n = 0; n < N; n++)
      for (int64_t c = 0; c < C; c++)
        for (int64_t h = 0; h < H; h++)
          for (int64_t w = 0; w < W; w++)
            Y[layout_offset(pairs[p][1], N, C, H, W, n, c, h, w)] =
                r.in[0][layout_offset(pairs[p][0], N, C, H, W, n, c, h, w)];
    check(&r, Y);
  }
}

static void test_pad(void **state) {
  (void)state;
  const int64_t S[3] = {2, 3, 4}, B[3] = {1, 0, 2}, A[3] = {0, 2, 1};
  const char *dts[] = {"float32", "int8", "bfloat16"};
  for (int d = 0; d < 3; d++) {
    run r;
    setup(&r, 2, "pad shape=2x3x4 before=1x0x2 after=0x2x1 dtype=%s", dts[d]);
    int64_t O[3];
    for (int k = 0; k < 3; k++) O[k] = S[k] + B[k] + A[k];
    assert_int_equal(r.elems[1], O[0] * O[1] * O[2]);
    double *Y = zeros(O[0] * O[1] * O[2]);
    for (int64_t a = 0; a < S[0]; a++)
      for (int64_t b = 0; b < S[1]; b++)
        for (int64_t c = 0; c < S[2]; c++)
          Y[((a + B[0]) * O[1] + b + B[1]) * O[2] + c + B[2]] =
              r.in[0][(a * S[1] + b) * S[2] + c];
    check(&r, Y);
  }
}

/* Every operator of the library is covered by a test above. */
static void test_all_ops_covered(void **state) {
  (void)state;
  const char *covered[] = {"matmul",
                           "batch_matmul",
                           "dense",
                           "conv2d_nchw",
                           "conv2d_nhwc",
                           "depthwise_conv2d_nhwc",
                           "conv2d_transpose_nchw",
                           "pool2d_nhwc",
                           "softmax",
                           "layer_norm",
                           "elementwise",
                           "reduce",
                           "transpose",
                           "layout_transform",
                           "pad"};
  const char *const *names = ts_op_names();
  int n = 0;
  for (; names[n]; n++) {
    bool found = false;
    for (size_t k = 0; k < sizeof covered / sizeof covered[0]; k++)
      if (strcmp(names[n], covered[k]) == 0) found = true;
    if (!found) fail_msg("operator %s has no interpreter test", names[n]);
  }
  assert_int_equal(n, (int)(sizeof covered / sizeof covered[0]));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matmul),
      cmocka_unit_test(test_batch_matmul),
      cmocka_unit_test(test_dense),
      cmocka_unit_test(test_conv2d),
      cmocka_unit_test(test_depthwise_conv2d),
      cmocka_unit_test(test_conv2d_transpose),
      cmocka_unit_test(test_pool2d),
      cmocka_unit_test(test_softmax),
      cmocka_unit_test(test_layer_norm),
      cmocka_unit_test(test_layer_norm_offset),
      cmocka_unit_test(test_reduce),
      cmocka_unit_test(test_elementwise),
      cmocka_unit_test(test_transpose),
      cmocka_unit_test(test_layout_transform),
      cmocka_unit_test(test_pad),
      cmocka_unit_test(test_all_ops_covered),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
