/*
 * naive.c — the "straightforward C loop" baselines of the benchmark suite:
 * float32 depthwise_conv2d_nhwc, softmax and layer_norm written the obvious
 * way over the workload's own layouts, compiled with -O3 -march=native (the
 * build sets those flags on this file only) and no -ffast-math. The
 * outermost loop (output rows: N*OH for the convolution, N for the row
 * operators) is split over the thread count with the runtime's
 * parallel_for; everything inside a row is a plain serial loop the compiler
 * may vectorize.
 */
#include "bench/internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct naive_ctx {
  bench_op op;
  const float *x, *weight, *gamma, *beta; /* inputs as the op uses them */
  float *y;                               /* the output */
  ts_runtime *rt;                         /* the threads */
} naive_ctx;

/* Depthwise NHWC: output rows r = n * OH + oh in [begin, end). */
static int32_t depthwise_rows(void *closure, int64_t begin, int64_t end) {
  const naive_ctx *c = closure;
  const bench_op *p = &c->op;
  int64_t C = p->ci;
  for (int64_t r = begin; r < end; r++) {
    int64_t n = r / p->oh, oh = r % p->oh;
    for (int64_t ow = 0; ow < p->ow; ow++) {
      float *out = c->y + (r * p->ow + ow) * C;
      for (int64_t ch = 0; ch < C; ch++) out[ch] = 0.0f;
      for (int64_t kh = 0; kh < p->kh; kh++) {
        int64_t ih = oh * p->stride - p->pad + kh;
        if (ih < 0 || ih >= p->h) continue;
        for (int64_t kw = 0; kw < p->kw; kw++) {
          int64_t iw = ow * p->stride - p->pad + kw;
          if (iw < 0 || iw >= p->w) continue;
          const float *in = c->x + ((n * p->h + ih) * p->w + iw) * C;
          const float *wt = c->weight + (kh * p->kw + kw) * C;
          for (int64_t ch = 0; ch < C; ch++) out[ch] += in[ch] * wt[ch];
        }
      }
    }
  }
  return 0;
}

/* Softmax over each row in [begin, end): max, exp and sum, divide. */
static int32_t softmax_rows(void *closure, int64_t begin, int64_t end) {
  const naive_ctx *c = closure;
  int64_t D = c->op.cols;
  for (int64_t r = begin; r < end; r++) {
    const float *x = c->x + r * D;
    float *y = c->y + r * D;
    float max = -INFINITY;
    for (int64_t j = 0; j < D; j++) max = x[j] > max ? x[j] : max;
    float sum = 0.0f;
    for (int64_t j = 0; j < D; j++) {
      y[j] = expf(x[j] - max);
      sum += y[j];
    }
    for (int64_t j = 0; j < D; j++) y[j] = y[j] / sum;
  }
  return 0;
}

/* Layer normalization of each row in [begin, end): mean, biased variance,
 * eps 1e-5, then scale by gamma and shift by beta. */
static int32_t layer_norm_rows(void *closure, int64_t begin, int64_t end) {
  const naive_ctx *c = closure;
  int64_t D = c->op.cols;
  for (int64_t r = begin; r < end; r++) {
    const float *x = c->x + r * D;
    float *y = c->y + r * D;
    float sum = 0.0f;
    for (int64_t j = 0; j < D; j++) sum += x[j];
    float mean = sum / (float)D;
    float var_sum = 0.0f;
    for (int64_t j = 0; j < D; j++) var_sum += (x[j] - mean) * (x[j] - mean);
    float rstd = 1.0f / sqrtf(var_sum / (float)D + 1e-5f);
    for (int64_t j = 0; j < D; j++)
      y[j] = (x[j] - mean) * rstd * c->gamma[j] + c->beta[j];
  }
  return 0;
}

static int naive_run(void *ctx) {
  naive_ctx *c = ctx;
  switch (c->op.kind) {
  case BENCH_DEPTHWISE:
    return ts_rt_parallel_for(c->rt, depthwise_rows, c, c->op.nb * c->op.oh);
  case BENCH_SOFTMAX:
    return ts_rt_parallel_for(c->rt, softmax_rows, c, c->op.rows);
  case BENCH_LAYER_NORM:
    return ts_rt_parallel_for(c->rt, layer_norm_rows, c, c->op.rows);
  default: return 1;
  }
}

static void naive_destroy(void *ctx) {
  naive_ctx *c = ctx;
  ts_runtime_destroy(c->rt);
  free(c);
}

int naive_prepare(const bench_case *c, bench_kernel *k, ts_error *err) {
  const bench_op *op = &c->op;
  char a[32], b[32];
  if (op->kind != BENCH_DEPTHWISE && op->kind != BENCH_SOFTMAX &&
      op->kind != BENCH_LAYER_NORM)
    return TS_ERR(err, TS_EUNSUPPORTED,
                  "naive: not applicable: plain C loops exist for "
                  "depthwise_conv2d_nhwc, softmax and layer_norm, not %s",
                  op->op);
  if (!ts_dtype_eq(op->in, TS_FLOAT32) || !ts_dtype_eq(op->out, TS_FLOAT32))
    return TS_ERR(err, TS_EUNSUPPORTED,
                  "naive: not applicable: the plain C loops are float32 only "
                  "(this workload: %s inputs, %s output)",
                  ts_dtype_str(op->in, a), ts_dtype_str(op->out, b));
  naive_ctx *n = calloc(1, sizeof *n);
  if (!n) return TS_ERR(err, TS_ENOMEM, "naive: out of memory");
  int rc = ts_runtime_create(c->threads, &n->rt, err);
  if (rc) {
    free(n);
    return rc;
  }
  n->op = *op;
  n->x = c->data[0];
  n->weight = op->kind == BENCH_DEPTHWISE ? c->data[1] : NULL;
  n->gamma = op->kind == BENCH_LAYER_NORM ? c->data[1] : NULL;
  n->beta = op->kind == BENCH_LAYER_NORM ? c->data[2] : NULL;
  n->y = c->data[c->out];
  snprintf(k->impl, sizeof k->impl,
           "plain C loops (-O3 -march=native), rows over %d threads",
           c->threads);
  k->run = naive_run;
  k->ctx = n;
  k->destroy = naive_destroy;
  return TS_OK;
}
