/*
 * cmd_run.c — `tessera run`: a model compiled by `tessera compile`, loaded
 * with dlopen and driven through include/tessera/model.h. Inputs come from
 * an .npz file by graph input name, outputs go to another by name;
 * --repeat times the run, --profile prints the time of each kernel call
 * (with --repeat, each kernel's median over the repeated runs).
 */
#include "cli.h"

#include "graph/graph.h"
#include "tir/alloc.h"

#include <tessera/model.h>

#include <cjson/cJSON.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Repeated runs whose kernel times --profile keeps (each one n_kernels
 * doubles). */
#define PROFILED_RUNS 1000

static const char run_usage[] =
    "usage: tessera run MODEL.so --inputs IN.npz [--outputs OUT.npz]\n"
    "                   [--threads K] [--repeat N] [--profile] [--json]\n"
    "\n"
    "Runs a model compiled by `tessera compile`: IN.npz holds one array per\n"
    "model input (by name, with the input's dtype and shape), OUT.npz gets\n"
    "one per output.\n"
    "\n"
    "  --threads K   threads of the model's pool (default: the online cores)\n"
    "  --repeat N    run N more times and print the median and mean latency\n"
    "  --profile     print the time of each kernel call: of one run, or with\n"
    "                --repeat the median of each over the repeated runs (the\n"
    "                first 1000)\n"
    "  --json        print the latency and the profile as one JSON object\n"
    "                (first_ms, runs, median_ms, mean_ms, kernels: [{call,\n"
    "                name, ms}]; the fields of what was asked for)\n";

/* The functions of the C interface, looked up in the library. */
typedef struct model_api {
  __typeof__(ts_model_abi_version) *abi_version;
  __typeof__(ts_model_create) *create;
  __typeof__(ts_model_last_error) *last_error;
  __typeof__(ts_model_num_inputs) *num_inputs;
  __typeof__(ts_model_num_outputs) *num_outputs;
  __typeof__(ts_model_input_info) *input_info;
  __typeof__(ts_model_output_info) *output_info;
  __typeof__(ts_model_run) *run;
  __typeof__(ts_model_num_kernels) *num_kernels;
  __typeof__(ts_model_kernel_name) *kernel_name;
  __typeof__(ts_model_profile) *profile;
  __typeof__(ts_model_destroy) *destroy;
  /* optional: libraries of older versions lack them (no dynamic dims) */
  __typeof__(ts_model_num_dims) *num_dims;
  __typeof__(ts_model_dim) *dim;
  __typeof__(ts_model_set_dim) *set_dim;
} model_api;

static int load_api(void *h, model_api *a, const char *path) {
#define SYM(field, name)                                                       \
  do {                                                                         \
    *(void **)&a->field = dlsym(h, name);                                      \
    if (!a->field) {                                                           \
      fprintf(stderr,                                                          \
              "tessera: error: %s is not a compiled model: no symbol '%s'\n",  \
              path, name);                                                     \
      return EXIT_FAIL;                                                        \
    }                                                                          \
  } while (0)
  SYM(abi_version, "ts_model_abi_version");
  SYM(create, "ts_model_create");
  SYM(last_error, "ts_model_last_error");
  SYM(num_inputs, "ts_model_num_inputs");
  SYM(num_outputs, "ts_model_num_outputs");
  SYM(input_info, "ts_model_input_info");
  SYM(output_info, "ts_model_output_info");
  SYM(run, "ts_model_run");
  SYM(num_kernels, "ts_model_num_kernels");
  SYM(kernel_name, "ts_model_kernel_name");
  SYM(profile, "ts_model_profile");
  SYM(destroy, "ts_model_destroy");
#undef SYM
  *(void **)&a->num_dims = dlsym(h, "ts_model_num_dims");
  *(void **)&a->dim = dlsym(h, "ts_model_dim");
  *(void **)&a->set_dim = dlsym(h, "ts_model_set_dim");
  if (!a->dim || !a->set_dim) a->num_dims = NULL;
  if (a->abi_version() != TS_MODEL_ABI_VERSION) {
    fprintf(stderr,
            "tessera: error: %s has model ABI version %d; this tessera "
            "reads version %d\n",
            path, a->abi_version(), TS_MODEL_ABI_VERSION);
    return EXIT_FAIL;
  }
  return EXIT_OK;
}

/* The tessera dtype of an ONNX code; false when there is none. */
static bool dtype_of(int code, ts_dtype *out) {
  switch (code) {
  case 1: *out = TS_FLOAT32; return true;
  case 2: *out = TS_UINT8; return true;
  case 3: *out = TS_INT8; return true;
  case 4: *out = TS_UINT16; return true;
  case 5: *out = TS_INT16; return true;
  case 6: *out = TS_INT32; return true;
  case 7: *out = TS_INT64; return true;
  case 9: *out = TS_BOOL; return true;
  case 10: *out = TS_FLOAT16; return true;
  case 11: *out = TS_FLOAT64; return true;
  case 12: *out = TS_UINT32; return true;
  case 13: *out = TS_UINT64; return true;
  case 16: *out = TS_BFLOAT16; return true;
  default: return false;
  }
}

/* A model with a dynamic dimension: its size from the inputs (the first
 * dimension where an input's array differs from the model's shape at its
 * largest size), set before the shapes are checked. */
static int set_size_from_inputs(const model_api *api, ts_model *m,
                                ts_graph_npz *npz, bool quiet) {
  ts_model_dim_info di;
  if (api->dim(m, 0, &di) != 0) {
    fprintf(stderr, "tessera: error: %s\n", api->last_error());
    return EXIT_FAIL;
  }
  int64_t size = -1;
  for (int i = 0; size < 0 && i < api->num_inputs(m); i++) {
    ts_model_tensor_info info;
    ts_graph_tensor t;
    ts_error err;
    if (api->input_info(m, i, &info) != 0 ||
        ts_graph_npz_find(npz, info.name, &t, &err) != TS_OK ||
        t.ndim != info.ndim)
      continue; /* the checks after say what is wrong */
    for (int d = 0; size < 0 && d < t.ndim; d++)
      if (t.shape[d] != info.shape[d]) size = t.shape[d];
  }
  if (size < 0) return EXIT_OK; /* the largest size */
  if (api->set_dim(m, di.name, size) != 0) {
    fprintf(stderr, "tessera: error: the inputs' size: %s\n",
            api->last_error());
    return EXIT_FAIL;
  }
  if (!quiet)
    fprintf(stderr, "%s=%lld (the model serves 1 to %lld)\n", di.name,
            (long long)size, (long long)di.max);
  return EXIT_OK;
}

int cmd_run(int argc, char **argv) {
  const char *lib = NULL, *in_path = NULL, *out_path = NULL;
  long threads = 0, repeat = 0;
  bool profile = false;
  bool want_json = false;
  cJSON *json = NULL; /* --json: the result object */
  for (int i = 1; i < argc; i++) {
    const char *v = NULL;
    bool missing = false;
    int rc = EXIT_OK;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(run_usage, stdout);
      return EXIT_OK;
    } else if (!strcmp(argv[i], "--profile")) {
      profile = true;
    } else if (!strcmp(argv[i], "--json")) {
      want_json = true;
    } else if (cli_opt_value(argc, argv, &i, "--inputs", &v, &missing)) {
      if (missing) return cli_usage_error("run", "--inputs needs a file");
      in_path = v;
    } else if (cli_opt_value(argc, argv, &i, "--outputs", &v, &missing)) {
      if (missing) return cli_usage_error("run", "--outputs needs a file");
      out_path = v;
    } else if (cli_opt_value(argc, argv, &i, "--threads", &v, &missing)) {
      if (missing) return cli_usage_error("run", "--threads needs a number");
      rc =
          cli_int_option("run", "--threads", v, 1, TS_RT_MAX_THREADS, &threads);
    } else if (cli_opt_value(argc, argv, &i, "--repeat", &v, &missing)) {
      if (missing) return cli_usage_error("run", "--repeat needs a number");
      rc = cli_int_option("run", "--repeat", v, 0, 1000000, &repeat);
    } else if (argv[i][0] == '-') {
      return cli_usage_error("run", "unknown option '%s'", argv[i]);
    } else if (!lib) {
      lib = argv[i];
    } else {
      return cli_usage_error("run", "more than one library given");
    }
    if (rc != EXIT_OK) return rc;
  }
  if (!lib) return cli_usage_error("run", "no compiled model given");
  if (!in_path) return cli_usage_error("run", "--inputs is needed");

  char path[4200];
  snprintf(path, sizeof path, "%s%s", strchr(lib, '/') ? "" : "./", lib);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "tessera: error: cannot load %s: %s\n", lib, dlerror());
    return EXIT_FAIL;
  }
  if (want_json && !(json = cJSON_CreateObject())) {
    dlclose(h);
    return EXIT_FAIL;
  }
  model_api api;
  int rc = load_api(h, &api, lib);
  if (rc) {
    dlclose(h);
    return rc;
  }
  ts_error err;
  ts_error_clear(&err);
  ts_model *m = NULL;
  ts_graph_npz *npz = NULL;
  if (api.create((int)threads, &m) != 0) {
    fprintf(stderr, "tessera: error: cannot create the model: %s\n",
            api.last_error());
    dlclose(h);
    return EXIT_FAIL;
  }
  int n_in = api.num_inputs(m), n_out = api.num_outputs(m);
  int n_k = api.num_kernels(m);
  const void **ins = calloc((size_t)n_in + 1, sizeof *ins);
  void **outs = calloc((size_t)n_out + 1, sizeof *outs);
  ts_graph_tensor *tens = calloc((size_t)n_out + 1, sizeof *tens);
  double *secs = calloc((size_t)n_k + 1, sizeof *secs);
  double *times = calloc((size_t)repeat + 1, sizeof *times);
  double *prof = NULL; /* [run][kernel] seconds of the profiled runs */
  rc = EXIT_FAIL;
  if (!ins || !outs || !tens || !secs || !times) goto done;
  if (ts_graph_npz_read(in_path, &npz, &err) != TS_OK) {
    cli_error("cannot read the inputs", &err);
    goto done;
  }
  if (api.num_dims && api.num_dims(m) > 0 &&
      set_size_from_inputs(&api, m, npz, want_json) != EXIT_OK)
    goto done;
  for (int i = 0; i < n_in; i++) {
    ts_model_tensor_info info;
    ts_graph_tensor t;
    api.input_info(m, i, &info);
    if (ts_graph_npz_find(npz, info.name, &t, &err) != TS_OK) {
      cli_error("bad inputs", &err);
      goto done;
    }
    ts_dtype want;
    bool same = dtype_of(info.dtype, &want) && ts_dtype_eq(want, t.dtype) &&
                t.ndim == info.ndim;
    for (int d = 0; same && d < t.ndim; d++) same = t.shape[d] == info.shape[d];
    if (!same) {
      char a[32], b[32];
      fprintf(stderr,
              "tessera: error: input '%s' in %s is %s with %d dimensions; "
              "the model wants %s[",
              info.name, in_path, ts_dtype_str(t.dtype, a), t.ndim,
              dtype_of(info.dtype, &want) ? ts_dtype_str(want, b) : "?");
      for (int d = 0; d < info.ndim; d++)
        fprintf(stderr, "%s%lld", d ? ", " : "", (long long)info.shape[d]);
      fprintf(stderr, "]\n");
      goto done;
    }
    ins[i] = t.data;
  }
  for (int i = 0; i < n_out; i++) {
    ts_model_tensor_info info;
    api.output_info(m, i, &info);
    tens[i].name = info.name;
    dtype_of(info.dtype, &tens[i].dtype);
    tens[i].ndim = info.ndim;
    for (int d = 0; d < info.ndim; d++) tens[i].shape[d] = info.shape[d];
    tens[i].data = outs[i] = malloc((size_t)(info.bytes ? info.bytes : 1));
    if (!outs[i]) {
      fprintf(stderr, "tessera: error: out of memory for output '%s'\n",
              info.name);
      goto done;
    }
  }
  double t0 = ts_now_seconds();
  if (api.run(m, ins, (void *const *)outs) != 0) {
    fprintf(stderr, "tessera: error: the model failed: %s\n", api.last_error());
    goto done;
  }
  double first = ts_now_seconds() - t0;
  if (json) cJSON_AddNumberToObject(json, "first_ms", first * 1e3);
  /* --profile with --repeat: every repeated run is profiled (up to
   * PROFILED_RUNS of them kept) and each kernel's median reported */
  long n_prof = profile ? (repeat < PROFILED_RUNS ? repeat : PROFILED_RUNS) : 0;
  if (n_prof > 0 && !(prof = calloc((size_t)(n_prof * n_k) + 1, sizeof *prof)))
    goto done;
  for (long r = 0; r < repeat; r++) {
    t0 = ts_now_seconds();
    if ((r < n_prof ? api.profile(m, ins, (void *const *)outs, &prof[r * n_k])
                    : api.run(m, ins, (void *const *)outs)) != 0) {
      fprintf(stderr, "tessera: error: the model failed: %s\n",
              api.last_error());
      goto done;
    }
    times[r] = ts_now_seconds() - t0;
  }
  if (repeat > 0) {
    double sum = 0;
    for (long r = 0; r < repeat; r++) sum += times[r];
    double mean = sum / (double)repeat;
    if (json) {
      cJSON_AddNumberToObject(json, "runs", (double)repeat);
      cJSON_AddNumberToObject(json, "median_ms",
                              ts_median(times, (int)repeat) * 1e3);
      cJSON_AddNumberToObject(json, "mean_ms", mean * 1e3);
    } else
      printf("latency: median %.3f ms, mean %.3f ms over %ld runs (first run "
             "%.3f ms)\n",
             ts_median(times, (int)repeat) * 1e3, mean * 1e3, repeat,
             first * 1e3);
  }
  if (profile && n_prof > 0) {
    double *col = calloc((size_t)n_prof, sizeof *col);
    if (!col) goto done;
    for (int k = 0; k < n_k; k++) {
      for (long r = 0; r < n_prof; r++) col[r] = prof[r * n_k + k];
      secs[k] = ts_median(col, (int)n_prof);
    }
    free(col);
  } else if (profile && api.profile(m, ins, (void *const *)outs, secs) != 0) {
    fprintf(stderr, "tessera: error: the model failed: %s\n", api.last_error());
    goto done;
  }
  if (profile) {
    double total = 0;
    for (int k = 0; k < n_k; k++) total += secs[k];
    if (json) {
      cJSON *arr = cJSON_AddArrayToObject(json, "kernels");
      for (int k = 0; k < n_k; k++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "call", k);
        cJSON_AddStringToObject(o, "name", api.kernel_name(m, k));
        cJSON_AddNumberToObject(o, "ms", secs[k] * 1e3);
        ts_json_add(arr, NULL, o);
      }
      cJSON_AddNumberToObject(json, "kernels_total_ms", total * 1e3);
    } else {
      if (n_prof > 0)
        printf("kernel times: medians of %ld profiled runs\n", n_prof);
      printf("%4s %10s %6s  %s\n", "call", "ms", "%", "kernel");
      for (int k = 0; k < n_k; k++)
        printf("%4d %10.3f %6.1f  %s\n", k, secs[k] * 1e3,
               total > 0 ? 100.0 * secs[k] / total : 0.0,
               api.kernel_name(m, k));
      printf("total %.3f ms in %d kernel calls\n", total * 1e3, n_k);
    }
  }
  if (out_path && ts_graph_npz_write(out_path, tens, n_out, &err) != TS_OK) {
    cli_error("cannot write the outputs", &err);
    goto done;
  }
  if (json) {
    cli_print_json(json);
    json = NULL;
  }
  rc = EXIT_OK;
done:
  cJSON_Delete(json);
  if (m) api.destroy(m);
  for (int i = 0; outs && i < n_out; i++) free(outs[i]);
  free(ins);
  free(outs);
  free(tens);
  free(secs);
  free(times);
  free(prof);
  ts_graph_npz_free(npz);
  dlclose(h);
  return rc;
}
