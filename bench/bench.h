/*
 * bench.h — the public interface of tessera's vendor baselines: given a
 * workload (its operator, canonical spec and parameter buffers), measure a
 * vendor library on the same operation, with the same data types, data
 * layouts and seeded inputs, and hand back the median time, GFLOP/s and the
 * output so callers can check it against tessera's.
 *
 * Baselines:
 *  - OpenBLAS: matmul, batch_matmul (one GEMM per batch) and dense (the
 *    output first set to the bias, then a GEMM with beta 1) for float32
 *    (cblas_sgemm) and float64 (cblas_dgemm); bfloat16 inputs with a float32
 *    output through cblas_sbgemm when the OpenBLAS loaded at run time
 *    exports it. Transposes become CBLAS transposes.
 *  - oneDNN (C API): matmul and batch_matmul (transposes as strides), dense
 *    (matmul with a bias), conv2d_nchw and conv2d_nhwc (stride, padding,
 *    dilation, groups), depthwise_conv2d_nhwc (a convolution with
 *    groups = C), pool2d_nhwc, softmax and layer_norm, with the workload's
 *    own data types (float32; bfloat16 or int8 inputs with float32 or int32
 *    outputs; whatever else oneDNN implements on this CPU) and its own
 *    layouts for data and outputs. Convolution weights are the one
 *    exception: the workload's weights (OIHW for NCHW, HWIO for NHWC) are
 *    described as they are stored, oneDNN picks its fastest internal weight
 *    format (format_kind any) and a reorder into it runs once, before and
 *    outside the timed region — as an inference deployment would pre-pack
 *    constant weights. Convolutions use the direct algorithm (no Winograd).
 *  - naive: straightforward C loops compiled with -O3 -march=native for
 *    float32 depthwise_conv2d_nhwc, softmax and layer_norm, in the
 *    workload's layouts; the outermost loop (output rows) is split over the
 *    thread count with the runtime's parallel_for.
 * Anything else is "not applicable": TS_EUNSUPPORTED with the reason.
 *
 * OpenBLAS picks its kernels when it is loaded (DYNAMIC_ARCH), from the CPU
 * model; older releases (Debian 12's 0.3.21 among them) fall back to their
 * Prescott (SSE3) kernels on Intel models they do not know, such as recent
 * Xeons. The result's
 * note says so when the kernels in use are older than the CPU, and names
 * the fix: OPENBLAS_CORETYPE (e.g. SkylakeX) in the process environment.
 *
 * Threads: each measurement tells its library the thread count
 * (openblas_set_num_threads; omp_set_num_threads for oneDNN, which the
 * Debian package builds with the GNU OpenMP runtime) and restores the
 * previous setting afterwards.
 */
#ifndef TESSERA_BENCH_H
#define TESSERA_BENCH_H

#include <stdbool.h>
#include <stdint.h>

#include "db/db.h"
#include "runtime/runtime.h"
#include "tir/tir.h"

typedef enum ts_bench_vendor {
  TS_BENCH_OPENBLAS = 0, /* OpenBLAS GEMMs */
  TS_BENCH_ONEDNN = 1,   /* oneDNN primitives */
  TS_BENCH_NAIVE = 2,    /* plain C loops, -O3 -march=native */
} ts_bench_vendor;
#define TS_BENCH_N_VENDORS 3

/* "openblas", "onednn", "naive"; NULL for a value out of range. */
const char *ts_bench_vendor_name(ts_bench_vendor v);
/* The vendor named `name` (as ts_bench_vendor_name spells it) into *out;
 * TS_EINVAL naming the known vendors otherwise. */
int ts_bench_vendor_parse(const char *name, ts_bench_vendor *out,
                          ts_error *err);

/* How to measure. */
typedef struct ts_bench_options {
  int threads;         /* threads the library may use; <= 0: online cores */
  ts_eval_config eval; /* warm-up, repeats, minimum repeat time, flush */
  uint64_t seed;       /* input parameter i gets ts_host_fill_random(seed+i) */
  ts_runtime *rt;      /* owns the cache-flush buffer: needed only with
                          eval.flush_cache, may be NULL otherwise */
  bool keep_output;    /* hand the output buffer back in the result */
} ts_bench_options;

/* threads 0 (all cores); eval: warmup 2, repeat 5, min_repeat_ms 100, no
 * cache flush, number 1; seed 1; rt NULL; keep_output true. */
ts_bench_options ts_bench_options_default(void);

/* One measurement. */
typedef struct ts_bench_result {
  double seconds;     /* median over the repeats of seconds per run */
  double min_seconds; /* fastest repeat, seconds per run */
  double max_seconds; /* slowest repeat, seconds per run */
  double gflops;      /* workload flops / seconds / 1e9 */
  int repeats;        /* repeats measured */
  int number;         /* runs per repeat */
  int threads;        /* the thread count the library was given */
  char impl[256];     /* what ran: routine or primitive implementation */
  char note[320];     /* a caveat for whoever reads the number, or "": e.g.
                         OpenBLAS running kernels older than this CPU */
  int output_param;   /* index of the workload's output parameter */
  ts_dtype output_dtype;
  int64_t output_elems;
  void *output; /* the output parameter's compact storage after the last
                   run (NULL unless keep_output); freed by
                   ts_bench_result_free */
} ts_bench_result;

/* Measures vendor v on workload w (not modified; w->op and w->spec say what
 * to compute, w->func's parameters give the buffers: exactly one of them
 * must be an output). Inputs are compact host buffers in the workload's
 * layout, parameter i filled with ts_host_fill_random(seed + i) — the same
 * bytes ts_rt_args_create gives a kernel for the same seed — and the output
 * is zeroed. After any one-time preparation (primitive creation, weight
 * reorder) ts_rt_eval times the library call per opts->eval and the result
 * gets the median, GFLOP/s from w->flops, and the output.
 * Returns TS_OK with *out filled (release with ts_bench_result_free);
 * TS_EUNSUPPORTED when the vendor does not apply to this operator, dtype or
 * CPU (the message says why: callers print it as "not applicable");
 * TS_EINVAL for bad options or a workload whose spec and parameters
 * disagree; TS_ENOMEM when buffers cannot be allocated; TS_ERANGE when the
 * library call fails while timed. On failure *out holds nothing to free.
 * opts may be NULL (ts_bench_options_default). Changes no state visible
 * after it returns (library thread counts are restored). */
int ts_bench_run(ts_bench_vendor v, const ts_workload *w,
                 const ts_bench_options *opts, ts_bench_result *out,
                 ts_error *err);
/* The geometry of a conv2d_nhwc workload (the spec's keys; weight_block 0
 * for HWIO weights), for the Winograd forms of the graph compiler
 * (graph.h: ts_conv_form_graph); false for any other operator. */
typedef struct ts_bench_conv {
  int64_t n, h, w, ci, co, kh, kw, stride, pad, dilation, groups, weight_block;
  bool float32; /* data, weights and output */
} ts_bench_conv;
bool ts_bench_conv_of(const ts_workload *w, ts_bench_conv *out);
/* The same in steps, so several sides can be timed in interleaved rounds
 * (tessera bench, the confirmation of bests): a slow phase of a shared
 * machine then falls on every side of a round instead of on one side.
 * ts_bench_open prepares vendor v's call on w (buffers, primitive, weight
 * reorder; the library's thread count is set until the session closes:
 * close sessions in the reverse order of opening); errors as ts_bench_run.
 * ts_bench_measure times eval->repeat more repeats (eval NULL: opts->eval)
 * and appends them to the session; the runs per repeat found by the first
 * call carry over to later ones. ts_bench_samples gives the repeats so far
 * in order (the pointer is valid until the next measure or close).
 * ts_bench_close fills *out (may be NULL) from every repeat, as
 * ts_bench_run would, and frees the session (NULL is a no-op). */
typedef struct ts_bench_session ts_bench_session;
int ts_bench_open(ts_bench_vendor v, const ts_workload *w,
                  const ts_bench_options *opts, ts_bench_session **out,
                  ts_error *err);
int ts_bench_measure(ts_bench_session *s, const ts_eval_config *eval,
                     ts_error *err);
int ts_bench_samples(const ts_bench_session *s, const double **seconds);
void ts_bench_close(ts_bench_session *s, ts_bench_result *out);

/* Frees the result's output and clears it (NULL is a no-op). */
void ts_bench_result_free(ts_bench_result *r);

/* ========================================================================
 * Machine peaks and the tuning report (bench/report.c, bench/report_svg.c)
 * ======================================================================== */

/* The machine limits that apply to one workload on one target, from the
 * target's probe figures (`tessera probe`, ts_db_get_target_probe). */
typedef struct ts_bench_peak {
  double gflops;        /* compute peak for the workload's dtype; NAN when
                           the probe has no matching figure */
  double bandwidth_gbs; /* memory bandwidth; NAN when not probed */
  char source[64];      /* the probe key the compute peak came from */
} ts_bench_peak;

/* Reads the probe JSON (NULL or malformed: no figures) for a workload whose
 * inputs are of `dtype` on a target with num_cores cores: float32 uses
 * "fp32_gflops_all_cores", else "fp32_gflops_per_core" times num_cores;
 * float64 the "fp64_" keys the same way; bfloat16 "amx_bf16_tops" or
 * "amx_bf16_tflops_all_cores", else "amx_bf16_tflops_per_core" times
 * num_cores; int8 and uint8 "amx_int8_tops" or "amx_int8_tops_all_cores",
 * else "amx_int8_tops_per_core" times num_cores (TOP/s times 1000);
 * bandwidth is "mem_bandwidth_gbs". Figures that are not positive numbers
 * are ignored. */
ts_bench_peak ts_bench_peak_of(const char *probe_json, ts_dtype dtype,
                               int num_cores);
/* The roofline bound in GFLOP/s of a workload moving at least `bytes`
 * bytes for `flops` FLOPs: min(peak, flops / bytes * bandwidth). NAN when
 * the peak or the bandwidth is unknown or the figures are not positive. */
double ts_bench_roofline_gflops(const ts_bench_peak *p, double flops,
                                double bytes);

typedef struct ts_bench_report_options {
  const char *title;    /* page title; NULL: "tessera tuning report" */
  const char *workload; /* only this workload (hash, hash prefix or name as
                           ts_db_resolve_workload takes it); NULL: all */
  int curve_points;     /* measurements drawn as dots per curve before they
                           become min-max bars; also bounds the curve's
                           vertices (1000) */
  int histogram_bins;   /* bars of each latency histogram (40) */
  bool timestamp;       /* print when the report was made (true) */
  bool json;            /* write the report's numbers as one JSON object
                           instead of the page (false) */
} ts_bench_report_options;

/* The defaults above. */
ts_bench_report_options ts_bench_report_defaults(void);

typedef struct ts_bench_report_stats {
  int workloads;   /* workloads in the report */
  int tasks;       /* workload × target pairs with records */
  int64_t records; /* measurements summarized */
  int64_t bytes;   /* bytes written */
} ts_bench_report_stats;

/* Writes the tuning report of db to `out` as one self-contained HTML page
 * (inline CSS and SVG; no scripts, no fonts, nothing fetched): a summary
 * table of every workload × target (best latency, GFLOP/s, % of probed peak
 * and of the roofline when the target was probed, the best vendor level
 * when one was stored, records, failures by status); the probed figures of
 * each target; a roofline chart per target (log-log: its probed FMA peaks
 * and memory bandwidths as roofs, each workload's best and vendor levels
 * as dots at the workload's FLOPs per parameter byte; without figures a
 * note naming `tessera probe`); then per workload × target the tuning
 * curve (best GFLOP/s so far against the measurement index, vendor levels
 * as lines), the latency histogram, the best record's trace in readable
 * form, its lowered loops (as `tessera show --best --lowered` prints them)
 * and the workload's TIR. Every text taken from the database is
 * HTML-escaped. The page stays small for any number of records (see
 * curve_points). With opts->json the same numbers are written as one JSON
 * object instead (docs/report.md gives its shape). opts may be NULL
 * (defaults), stats may be NULL. Returns TS_OK; TS_ENOTFOUND/TS_EINVAL when
 * opts->workload matches no or several workloads; the database's error
 * code when a query fails; TS_EIO when writing fails. On failure part of
 * the page may have been written: callers write to a temporary file. */
int ts_bench_report_write(ts_db *db, const ts_bench_report_options *opts,
                          FILE *out, ts_bench_report_stats *stats,
                          ts_error *err);

#endif /* TESSERA_BENCH_H */
