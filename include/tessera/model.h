/*
 * tessera/model.h — the C interface of a model compiled by `tessera
 * compile`: a shared library (model.so) that runs the whole model on CPU.
 * A program opens it with dlopen and looks these functions up with dlsym
 * (or links it directly); it needs no other tessera header. The library
 * depends on libtessera_rt.so (the thread pool), found through its run
 * path.
 *
 *   ts_model *m;
 *   if (ts_model_create(0, &m))
 *     fprintf(stderr, "%s\n", ts_model_last_error());
 *   const void *in[] = {image};
 *   void *out[] = {logits};
 *   if (ts_model_run(m, in, out))
 *     fprintf(stderr, "%s\n", ts_model_last_error());
 *   ts_model_destroy(m);
 *
 * Tensors are dense row-major arrays of the dtype and shape that
 * ts_model_input_info / ts_model_output_info give; the caller owns every
 * input and output buffer (any alignment). A ts_model holds the
 * intermediate arena and the thread pool, allocated once by
 * ts_model_create: runs on one ts_model must not overlap (use one per
 * thread), and a run allocates nothing. Functions returning int give 0 on
 * success and non-zero on failure, with the reason in ts_model_last_error.
 */
#ifndef TESSERA_MODEL_H
#define TESSERA_MODEL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this interface; ts_model_abi_version() of a library must
 * equal it. */
#define TS_MODEL_ABI_VERSION 1

typedef struct ts_model ts_model;

/* Element types, by their ONNX TensorProto codes. */
typedef enum ts_model_dtype {
  TS_MODEL_FLOAT32 = 1,
  TS_MODEL_UINT8 = 2,
  TS_MODEL_INT8 = 3,
  TS_MODEL_INT32 = 6,
  TS_MODEL_INT64 = 7,
  TS_MODEL_BOOL = 9, /* one byte per element */
  TS_MODEL_FLOAT16 = 10,
  TS_MODEL_FLOAT64 = 11,
  TS_MODEL_BFLOAT16 = 16,
} ts_model_dtype;

/* A graph input or output. Pointers are owned by the library and valid
 * while it is loaded. */
typedef struct ts_model_tensor_info {
  const char *name; /* the ONNX graph's name of the tensor */
  ts_model_dtype dtype;
  int ndim;
  const int64_t *shape; /* ndim entries */
  int64_t bytes;        /* the buffer size ts_model_run expects */
} ts_model_tensor_info;

/* A named dynamic dimension of the model's inputs (`tessera compile
 * --shape-buckets`): the sizes it accepts, min .. max, the one set now, and
 * the padded sizes compiled (a size runs on the smallest that holds it).
 * Pointers are owned by the library. */
typedef struct ts_model_dim_info {
  const char *name;
  int64_t min, max, size;
  int n_sizes;
  const int64_t *sizes;
} ts_model_dim_info;

/* TS_MODEL_ABI_VERSION of the library. */
int ts_model_abi_version(void);
/* Creates a model instance: allocates the intermediate arena, the staging
 * buffers for unaligned inputs and outputs, and a thread pool of n_threads
 * threads (<= 0: the online cores). 0 and *out set, or non-zero. */
int ts_model_create(int n_threads, ts_model **out);
/* The text of the calling thread's last failure ("" when none). */
const char *ts_model_last_error(void);
/* Graph inputs and outputs, in the model's order. */
int ts_model_num_inputs(const ts_model *m);
int ts_model_num_outputs(const ts_model *m);
/* Fills *out for input/output i; non-zero when i is out of range. */
int ts_model_input_info(const ts_model *m, int i, ts_model_tensor_info *out);
int ts_model_output_info(const ts_model *m, int i, ts_model_tensor_info *out);
/* Runs the model: inputs[i] holds input i, outputs[i] receives output i
 * (buffers of the info's bytes; any alignment: unaligned ones go through
 * preallocated aligned staging). 0 ok. */
int ts_model_run(ts_model *m, const void *const *inputs, void *const *outputs);
/* Replaces the thread pool by one of n_threads threads (<= 0: online
 * cores). 0 ok. */
int ts_model_set_num_threads(ts_model *m, int n_threads);
/* Kernel call sites of one run, in run order. */
int ts_model_num_kernels(const ts_model *m);
/* "TASK (NODE)": the called function and the call's graph node; NULL when
 * k is out of range. */
const char *ts_model_kernel_name(const ts_model *m, int k);
/* ts_model_run that also writes the seconds each call site took into
 * seconds[0 .. ts_model_num_kernels). 0 ok. */
int ts_model_profile(ts_model *m, const void *const *inputs,
                     void *const *outputs, double *seconds);
/* JSON text: {"abi", "model", "target", "arena_bytes", "constant_bytes",
 * "calls", "tasks": [{"hash", "name", "count", "source": "db"|"default",
 * "latency_s"}]}. */
const char *ts_model_info(void);
/* Dynamic dimensions. A library compiled for one (--shape-buckets) has 1
 * and serves every size of it from min to max: ts_model_set_dim sets the
 * size of the next runs, and ts_model_input_info / ts_model_output_info
 * (which then need m) give the shapes at that size; the size is max until
 * set. A library without any has 0, and its info ignores m. These three
 * may be missing from libraries of older versions (look them up with
 * dlsym; missing means none). 0 ok. */
int ts_model_num_dims(const ts_model *m);
int ts_model_dim(const ts_model *m, int i, ts_model_dim_info *out);
int ts_model_set_dim(ts_model *m, const char *name, int64_t size);
/* Stops the pool and frees the instance (NULL is a no-op). */
void ts_model_destroy(ts_model *m);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_MODEL_H */
