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
/* Frees the result's output and clears it (NULL is a no-op). */
void ts_bench_result_free(ts_bench_result *r);

#endif /* TESSERA_BENCH_H */
