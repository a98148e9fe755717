/*
 * internal.h — what the files of bench/ share: the operation a workload asks
 * for, parsed from its canonical spec and checked against its parameters
 * (bench_op), the host buffers of one measurement (bench_case), and the
 * timed callable each vendor file prepares from them (bench_kernel).
 */
#ifndef TESSERA_BENCH_INTERNAL_H
#define TESSERA_BENCH_INTERNAL_H

#include "bench/bench.h"

#include <stddef.h>

/* The operators the baselines know; everything else is BENCH_OTHER. */
typedef enum bench_kind {
  BENCH_OTHER = 0,
  BENCH_MATMUL,     /* matmul and batch_matmul (batch 1 for matmul) */
  BENCH_DENSE,      /* Y = X * W^T (+ bias) */
  BENCH_CONV_NCHW,  /* data NCHW, weight OIHW (per group) */
  BENCH_CONV_NHWC,  /* data NHWC, weight HWIO (per group) */
  BENCH_DEPTHWISE,  /* data NHWC, weight [KH, KW, C] */
  BENCH_POOL,       /* NHWC max or average (padding counted) */
  BENCH_SOFTMAX,    /* over the last axis of [rows, cols] */
  BENCH_LAYER_NORM, /* over the last axis, gamma and beta of [cols] */
} bench_kind;

/* The operation, from the spec. Convolution-like kinds use the n..ow
 * fields (depthwise and pool: ci = co = C, groups = C for depthwise). */
typedef struct bench_op {
  bench_kind kind;
  const char *op; /* the workload's operator name */
  ts_dtype in;    /* dtype of the inputs (parameter 0) */
  ts_dtype out;   /* dtype of the output */
  /* matmul family */
  int64_t batch, m, n, k;
  bool trans_a, trans_b; /* A stored [K, M], B stored [N, K] */
  bool bias;             /* dense with a bias parameter */
  /* convolution family and pooling */
  int64_t nb, h, w, ci, co, kh, kw, oh, ow;
  int64_t stride, pad, dilation, groups;
  bool avg; /* pool: average (count includes padding), else max */
  /* softmax, layer_norm */
  int64_t rows, cols;
} bench_op;

/* Parses w's operator and spec into *op and checks that w's parameters
 * have the element counts and dtypes the operation implies. TS_EINVAL
 * naming the key or parameter otherwise; BENCH_OTHER for operators the
 * baselines do not know (not an error). */
int bench_op_parse(const ts_workload *w, bench_op *op, ts_error *err);

#define BENCH_MAX_PARAMS 8

/* The buffers of one measurement, in parameter order. */
typedef struct bench_case {
  const ts_workload *w;
  bench_op op;
  int n_params;
  void *data[BENCH_MAX_PARAMS]; /* compact, 64-byte aligned, malloc'd */
  ts_dtype dtype[BENCH_MAX_PARAMS];
  int64_t elems[BENCH_MAX_PARAMS];
  int out;     /* index of the output parameter */
  int threads; /* >= 1 */
} bench_case;

/* A prepared library call. run(ctx) computes the operation once from the
 * case's inputs into its output and returns 0, or non-zero on failure;
 * destroy(ctx) frees what prepare made and restores library settings. */
typedef struct bench_kernel {
  ts_eval_fn run;
  void *ctx;
  void (*destroy)(void *ctx);
  char impl[256]; /* what runs, for ts_bench_result.impl */
  char note[320]; /* for ts_bench_result.note */
} bench_kernel;

/* Each vendor: TS_OK with *k ready, TS_EUNSUPPORTED (with the reason) when
 * it does not apply, another code on failure; on failure nothing stays
 * allocated and no setting stays changed. */
int openblas_prepare(const bench_case *c, bench_kernel *k, ts_error *err);
int onednn_prepare(const bench_case *c, bench_kernel *k, ts_error *err);
int naive_prepare(const bench_case *c, bench_kernel *k, ts_error *err);

#endif /* TESSERA_BENCH_INTERNAL_H */
