/*
 * abi_main.c — a program that uses a compiled model the way an application
 * does: only <tessera/model.h>, the C library and dlfcn. `abi_main
 * MODEL.so` opens the library, checks the ABI version and the metadata
 * (names, dtypes, shapes and byte counts agree; out-of-range queries fail
 * with a message), runs the model from aligned and from unaligned buffers
 * (the outputs must agree), with a different thread count, profiles one
 * run, and checks the info JSON. `abi_main MODEL.so --dynamic SYMBOL`:
 * the model has that dynamic dimension; bad sizes and names are refused
 * with a message, and the runs go at a size below the largest (the shapes
 * follow it). Without it the model must have no dynamic dimension. Exit 0
 * when all holds, 1 otherwise.
 */
#include <tessera/model.h>

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "abi_main: %s:%d: check failed: %s\n", __FILE__,         \
              __LINE__, #cond);                                                \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

static int elem_bytes(ts_model_dtype t) {
  switch (t) {
  case TS_MODEL_UINT8:
  case TS_MODEL_INT8:
  case TS_MODEL_BOOL: return 1;
  case TS_MODEL_FLOAT16:
  case TS_MODEL_BFLOAT16: return 2;
  case TS_MODEL_FLOAT32:
  case TS_MODEL_INT32: return 4;
  case TS_MODEL_INT64:
  case TS_MODEL_FLOAT64: return 8;
  }
  return 0;
}

#define LOOKUP(name)                                                           \
  __typeof__(name) *p_##name = (__typeof__(name) *)dlsym(h, #name);            \
  CHECK(p_##name != NULL)

int main(int argc, char **argv) {
  if (argc != 2 && !(argc == 4 && !strcmp(argv[2], "--dynamic"))) {
    fprintf(stderr, "usage: abi_main MODEL.so [--dynamic SYMBOL]\n");
    return 2;
  }
  const char *sym = argc == 4 ? argv[3] : NULL;
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "abi_main: %s\n", dlerror());
    return 1;
  }
  LOOKUP(ts_model_abi_version);
  LOOKUP(ts_model_create);
  LOOKUP(ts_model_last_error);
  LOOKUP(ts_model_num_inputs);
  LOOKUP(ts_model_num_outputs);
  LOOKUP(ts_model_input_info);
  LOOKUP(ts_model_output_info);
  LOOKUP(ts_model_run);
  LOOKUP(ts_model_set_num_threads);
  LOOKUP(ts_model_num_kernels);
  LOOKUP(ts_model_kernel_name);
  LOOKUP(ts_model_profile);
  LOOKUP(ts_model_info);
  LOOKUP(ts_model_destroy);
  CHECK(p_ts_model_abi_version() == TS_MODEL_ABI_VERSION);

  ts_model *m = NULL;
  if (p_ts_model_create(2, &m) != 0) {
    fprintf(stderr, "abi_main: create: %s\n", p_ts_model_last_error());
    return 1;
  }
  LOOKUP(ts_model_num_dims);
  LOOKUP(ts_model_dim);
  LOOKUP(ts_model_set_dim);
  ts_model_dim_info di;
  if (!sym) {
    CHECK(p_ts_model_num_dims(m) == 0);
    CHECK(p_ts_model_dim(m, 0, &di) != 0);
    CHECK(p_ts_model_set_dim(m, "batch", 1) != 0);
    CHECK(strstr(p_ts_model_last_error(), "no dynamic dimension") != NULL);
  } else {
    CHECK(p_ts_model_num_dims(m) == 1);
    CHECK(p_ts_model_dim(m, 1, &di) != 0);
    CHECK(p_ts_model_dim(m, 0, &di) == 0);
    CHECK(!strcmp(di.name, sym) && di.min == 1 && di.size == di.max);
    CHECK(di.n_sizes >= 1 && di.sizes[di.n_sizes - 1] == di.max);
    CHECK(p_ts_model_set_dim(m, "bogus", 1) != 0);
    CHECK(strstr(p_ts_model_last_error(), "'bogus'") != NULL);
    CHECK(p_ts_model_set_dim(m, sym, di.max + 1) != 0);
    CHECK(strstr(p_ts_model_last_error(), "out of the compiled range"));
    CHECK(p_ts_model_set_dim(m, sym, 0) != 0);
    /* the info of a dynamic model follows the instance: none, no shapes */
    ts_model_tensor_info t0;
    CHECK(p_ts_model_input_info(NULL, 0, &t0) != 0);
    int64_t n = di.max > 1 ? di.max - 1 : 1;
    CHECK(p_ts_model_set_dim(m, sym, n) == 0);
    CHECK(p_ts_model_dim(m, 0, &di) == 0 && di.size == n);
  }
  int n_in = p_ts_model_num_inputs(m), n_out = p_ts_model_num_outputs(m);
  CHECK(n_in >= 1 && n_in <= 16 && n_out >= 1 && n_out <= 16);
  ts_model_tensor_info info;
  CHECK(p_ts_model_input_info(m, n_in, &info) != 0);
  CHECK(strstr(p_ts_model_last_error(), "out of range") != NULL);
  CHECK(p_ts_model_output_info(m, -1, &info) != 0);

  /* inputs: seeded values; each also at an odd address */
  const void *in_a[16], *in_u[16];
  void *out_a[16], *out_u[16];
  int64_t out_bytes[16];
  ts_model_dtype out_dtype[16];
  unsigned seed = 12345;
  for (int i = 0; i < n_in; i++) {
    CHECK(p_ts_model_input_info(m, i, &info) == 0);
    CHECK(info.name && info.name[0]);
    int64_t n = 1;
    for (int d = 0; d < info.ndim; d++) n *= info.shape[d];
    CHECK(elem_bytes(info.dtype) > 0);
    CHECK(info.bytes == n * elem_bytes(info.dtype));
    unsigned char *a =
        aligned_alloc(64, ((size_t)info.bytes + 127) & ~(size_t)63);
    unsigned char *u = malloc((size_t)info.bytes + 8);
    CHECK(a && u);
    for (int64_t k = 0; k < n; k++) {
      seed = seed * 1103515245u + 12345u;
      if (info.dtype == TS_MODEL_FLOAT32) {
        float v = (float)((seed >> 8) % 2000) / 1000.0f - 1.0f;
        memcpy(a + k * 4, &v, 4);
      } else if (info.dtype == TS_MODEL_INT64) {
        int64_t v = (int64_t)((seed >> 8) % 50);
        memcpy(a + k * 8, &v, 8);
      } else {
        memset(a + k * elem_bytes(info.dtype), 0,
               (size_t)elem_bytes(info.dtype));
      }
    }
    memcpy(u + 1, a, (size_t)info.bytes);
    in_a[i] = a;
    in_u[i] = u + 1;
  }
  for (int i = 0; i < n_out; i++) {
    CHECK(p_ts_model_output_info(m, i, &info) == 0);
    CHECK(info.name && info.name[0]);
    int64_t n = 1;
    for (int d = 0; d < info.ndim; d++) n *= info.shape[d];
    CHECK(info.bytes == n * elem_bytes(info.dtype));
    out_bytes[i] = info.bytes;
    out_dtype[i] = info.dtype;
    out_a[i] = aligned_alloc(64, ((size_t)info.bytes + 127) & ~(size_t)63);
    unsigned char *u = malloc((size_t)info.bytes + 8);
    CHECK(out_a[i] && u);
    out_u[i] = u + 3;
  }
  if (p_ts_model_run(m, in_a, out_a) != 0) {
    fprintf(stderr, "abi_main: run: %s\n", p_ts_model_last_error());
    return 1;
  }
  CHECK(p_ts_model_set_num_threads(m, 1) == 0);
  if (p_ts_model_run(m, in_u, out_u) != 0) {
    fprintf(stderr, "abi_main: run: %s\n", p_ts_model_last_error());
    return 1;
  }
  for (int i = 0; i < n_out; i++) {
    if (out_dtype[i] == TS_MODEL_FLOAT32) {
      /* out_u is unaligned: read it bytewise */
      const unsigned char *x = out_a[i], *y = out_u[i];
      for (int64_t k = 0; k < out_bytes[i] / 4; k++) {
        float a, b;
        memcpy(&a, x + 4 * k, 4);
        memcpy(&b, y + 4 * k, 4);
        CHECK(isfinite(a) && fabsf(a - b) <= 1e-4f * (1 + fabsf(a)));
      }
    } else {
      CHECK(memcmp(out_a[i], out_u[i], (size_t)out_bytes[i]) == 0);
    }
  }
  CHECK(p_ts_model_run(m, in_a, NULL) != 0);

  int n_k = p_ts_model_num_kernels(m);
  CHECK(n_k >= 1);
  CHECK(p_ts_model_kernel_name(m, n_k) == NULL);
  double *secs = calloc((size_t)n_k, sizeof *secs);
  CHECK(secs != NULL);
  CHECK(p_ts_model_profile(m, in_a, out_a, secs) == 0);
  double total = 0;
  for (int k = 0; k < n_k; k++) {
    const char *name = p_ts_model_kernel_name(m, k);
    CHECK(name && strchr(name, '('));
    CHECK(secs[k] >= 0);
    total += secs[k];
  }
  CHECK(total > 0);
  const char *js = p_ts_model_info();
  CHECK(js && strstr(js, "\"target\"") && strstr(js, "\"tasks\"") &&
        strstr(js, "\"arena_bytes\""));
  printf("abi_main: %d inputs, %d outputs, %d kernel calls, %.3f ms\n", n_in,
         n_out, n_k, total * 1e3);
  free(secs);
  p_ts_model_destroy(m);
  for (int i = 0; i < n_in; i++) {
    free((void *)in_a[i]);
    free((unsigned char *)in_u[i] - 1);
  }
  for (int i = 0; i < n_out; i++) {
    free(out_a[i]);
    free((unsigned char *)out_u[i] - 3);
  }
  dlclose(h);
  return 0;
}
