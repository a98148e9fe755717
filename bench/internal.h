/*
 * internal.h — what the files of bench/ share: the operation a workload asks
 * for, parsed from its canonical spec and checked against its parameters
 * (bench_op), the host buffers of one measurement (bench_case), and the
 * timed callable each vendor file prepares from them (bench_kernel); and
 * for the tuning report, a text buffer with HTML escaping and the three
 * SVG charts.
 */
#ifndef TESSERA_BENCH_INTERNAL_H
#define TESSERA_BENCH_INTERNAL_H

#include "bench/bench.h"
#include "tir/alloc.h"
#include "tir/strbuf.h"

#include <stddef.h>

/* The operators the baselines know; everything else is BENCH_OTHER. */
typedef enum bench_kind {
  BENCH_OTHER = 0,
  BENCH_MATMUL,     /* matmul and batch_matmul (batch 1 for matmul) */
  BENCH_DENSE,      /* Y = X * W^T (+ bias) */
  BENCH_CONV_NCHW,  /* data NCHW, weight OIHW (per group) */
  BENCH_CONV_NHWC,  /* data NHWC, weight HWIO (per group) or blocked */
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
  int64_t weight_block; /* NHWC conv: weights [CO/B, KH, KW, CI, B], or 0 */
  bool avg;             /* pool: average (count includes padding), else max */
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

/* ---- the report (report.c, report_svg.c) ---- */

/* The report's text is written into strbufs (tir/strbuf.h): when one
 * could not grow, or a part of its text could not be made (sb_fail), it is
 * failed, later writes are dropped and the report is not written. */

/* Appends s with & < > " ' replaced by character references, so any text
 * is safe both between tags and inside a quoted attribute. */
void report_escape(strbuf *b, const char *s);
/* "1.23 ms", "456 µs", "2.5 s": 3 significant digits and a unit. */
void report_format_seconds(double s, char out[32]);

/* A horizontal level (tuning curve) or vertical mark (histogram) with its
 * label, e.g. a vendor library's GFLOP/s or latency. */
typedef struct report_level {
  char label[96];
  double value;
} report_level;

/* The tuning curve as an inline <svg>: values[i] is measurement i's figure
 * in commit order (NAN for a failed one). With higher_better the curve is
 * the running maximum (GFLOP/s), else the running minimum. Every measured
 * value is a dot while there are at most max_points of them, beyond that a
 * min-max bar per x bucket; the curve keeps at most about 2 * max_points
 * vertices; failures are ticks under the axis. Levels are dashed lines. */
void report_svg_curve(strbuf *b, const double *values, int64_t n,
                      bool higher_better, const char *y_label,
                      const report_level *levels, int n_levels, int max_points);
/* The histogram of latencies (seconds, > 0) as an inline <svg>: `bins`
 * bars on a log axis when the values span more than a factor of 8, else a
 * linear one; the fastest value and each mark are vertical lines. */
void report_svg_histogram(strbuf *b, const double *secs, int64_t n, int bins,
                          const report_level *marks, int n_marks);

/* One point of a roofline chart: a workload's best on a target, or a
 * vendor's level for it. */
typedef struct report_point {
  double intensity; /* FLOP per byte moved (> 0) */
  double gflops;    /* > 0 */
  int series;       /* index into the chart's series */
  int task;         /* section number the point links to, 0: none */
  char label[256];  /* the tooltip (plain text; escaped when written) */
} report_point;

/* A series of points: its legend name and its colour, an index into the
 * chart's fixed palette (0: tessera, 1..REPORT_N_COLOURS-1: vendors). */
typedef struct report_series {
  char name[64];
  int colour;
} report_series;
#define REPORT_N_COLOURS 9

/* The roofline chart of one target as an inline <svg>: x the arithmetic
 * intensity (FLOP/byte), y GFLOP/s, both on log scales; `compute` roofs
 * (GFLOP/s) are horizontal lines from their ridge point, `memory` roofs
 * (GB/s) slanted lines y = x * GB/s up to the highest compute roof, each
 * labelled with its label and value; every point is a dot in its series'
 * colour with a tooltip (tessera's link to their section), and a legend
 * names the series that have points. */
void report_svg_roofline(strbuf *b, const report_level *compute, int n_compute,
                         const report_level *memory, int n_memory,
                         const report_point *pts, int n_pts,
                         const report_series *series, int n_series);

#endif /* TESSERA_BENCH_INTERNAL_H */
