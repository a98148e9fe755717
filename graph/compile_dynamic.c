/*
 * compile_dynamic.c — the dispatcher of a model compiled for a dynamic
 * dimension: the library holds one program per padded size (bucket), each
 * with its interface renamed inside (b0_ts_model_run, ...), and model.c
 * written here implements include/tessera/model.h over them. The size set
 * with ts_model_set_dim picks the smallest bucket that holds it; a run
 * copies the inputs into zeroed buffers of the bucket's size along the
 * dimension (no copy when the size is the bucket's), passes the length to
 * the program's masks, and cuts the outputs back to the size.
 */
#include "compile_internal.h"

#include "tir/alloc.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The functions of each program the dispatcher calls. */
static const char *const used[] = {"ts_model_create",
                                   "ts_model_destroy",
                                   "ts_model_run",
                                   "ts_model_profile",
                                   "ts_model_last_error",
                                   "ts_model_input_info",
                                   "ts_model_output_info",
                                   "ts_model_set_num_threads",
                                   "ts_model_num_kernels",
                                   "ts_model_kernel_name",
                                   NULL};

static const char dispatcher_types[] =
    "typedef struct {\n"
    "  int (*create)(int, void **);\n"
    "  void (*destroy)(void *);\n"
    "  int (*run)(void *, const void *const *, void *const *);\n"
    "  int (*profile)(void *, const void *const *, void *const *, double "
    "*);\n"
    "  const char *(*last_error)(void);\n"
    "  int (*input_info)(const void *, int, ts_model_tensor_info *);\n"
    "  int (*output_info)(const void *, int, ts_model_tensor_info *);\n"
    "  int (*set_num_threads)(void *, int);\n"
    "  int (*num_kernels)(const void *);\n"
    "  const char *(*kernel_name)(const void *, int);\n"
    "} program;\n";

static const char dispatcher_body[] =
    "#define MAX_RANK 8\n"
    "struct ts_model {\n"
    "  void *sub[NB];\n"
    "  int n_threads, cur;\n"
    "  int64_t size;\n"
    "  float length;\n"
    "  int64_t in_shape[N_IN + 1][MAX_RANK], out_shape[N_OUT + 1][MAX_RANK];\n"
    "  unsigned char *in_pad[N_IN + 1], *out_pad[N_OUT + 1];\n"
    "};\n"
    "static _Thread_local char last_error[1024];\n"
    "static int fail(const char *fmt, ...) {\n"
    "  va_list ap;\n"
    "  va_start(ap, fmt);\n"
    "  vsnprintf(last_error, sizeof last_error, fmt, ap);\n"
    "  va_end(ap);\n"
    "  return -1;\n"
    "}\n"
    "static int sub_fail(int b) {\n"
    "  snprintf(last_error, sizeof last_error, \"the program for %s up to "
    "%lld: %s\", SYMBOL, (long long)sizes[b], progs[b].last_error());\n"
    "  return -1;\n"
    "}\n"
    "static int64_t elems(const int64_t *s, int n) {\n"
    "  int64_t e = 1;\n"
    "  for (int d = 0; d < n; d++) e *= s[d];\n"
    "  return e;\n"
    "}\n"
    "/* the box `box` of src (shape ss) into dst (shape ds), from index 0 */\n"
    "static void box_copy(unsigned char *dst, const int64_t *ds, const "
    "unsigned char *src, const int64_t *ss, const int64_t *box, int nd, "
    "size_t es) {\n"
    "  if (nd == 0) { memcpy(dst, src, es); return; }\n"
    "  int64_t idx[MAX_RANK] = {0}, rows = elems(box, nd - 1);\n"
    "  size_t run = (size_t)box[nd - 1] * es;\n"
    "  for (int64_t r = 0; r < rows; r++) {\n"
    "    int64_t od = 0, os = 0;\n"
    "    for (int d = 0; d < nd - 1; d++) {\n"
    "      od = od * ds[d] + idx[d];\n"
    "      os = os * ss[d] + idx[d];\n"
    "    }\n"
    "    memcpy(dst + (size_t)(od * ds[nd - 1]) * es, src + (size_t)(os * "
    "ss[nd - 1]) * es, run);\n"
    "    for (int d = nd - 2; d >= 0; d--) {\n"
    "      if (++idx[d] < box[d]) break;\n"
    "      idx[d] = 0;\n"
    "    }\n"
    "  }\n"
    "}\n"
    "static void set_shapes(ts_model *m) {\n"
    "  ts_model_tensor_info t;\n"
    "  for (int i = 0; i < N_IN; i++) {\n"
    "    progs[m->cur].input_info(NULL, i, &t);\n"
    "    for (int d = 0; d < t.ndim; d++) m->in_shape[i][d] = (in_axes[i] >> "
    "d) & 1 ? m->size : t.shape[d];\n"
    "  }\n"
    "  for (int i = 0; i < N_OUT; i++) {\n"
    "    progs[m->cur].output_info(NULL, i, &t);\n"
    "    for (int d = 0; d < t.ndim; d++) m->out_shape[i][d] = (out_axes[i] "
    ">> d) & 1 ? m->size : t.shape[d];\n"
    "  }\n"
    "}\n"
    "API int ts_model_abi_version(void) { return 1; }\n"
    "API const char *ts_model_last_error(void) { return last_error; }\n"
    "API const char *ts_model_info(void) { return info_json; }\n"
    "API int ts_model_num_inputs(const ts_model *m) { (void)m; return N_IN; "
    "}\n"
    "API int ts_model_num_outputs(const ts_model *m) { (void)m; return N_OUT; "
    "}\n"
    "API int ts_model_num_dims(const ts_model *m) { (void)m; return 1; }\n"
    "API int ts_model_dim(const ts_model *m, int i, ts_model_dim_info *out) "
    "{\n"
    "  if (i != 0 || !out) return fail(\"dimension %d: out of range (the "
    "model has 1)\", i);\n"
    "  out->name = SYMBOL;\n"
    "  out->min = 1;\n"
    "  out->max = sizes[NB - 1];\n"
    "  out->size = m ? m->size : sizes[NB - 1];\n"
    "  out->n_sizes = NB;\n"
    "  out->sizes = sizes;\n"
    "  return 0;\n"
    "}\n"
    "static int info(const ts_model *m, int i, ts_model_tensor_info *out, int "
    "output) {\n"
    "  int n = output ? N_OUT : N_IN;\n"
    "  if (!m) return fail(\"ts_model_%s_info: no model (the shapes follow "
    "its size of %s)\", output ? \"output\" : \"input\", SYMBOL);\n"
    "  if (i < 0 || i >= n || !out) return fail(\"%s %d: out of range (the "
    "model has %d)\", output ? \"output\" : \"input\", i, n);\n"
    "  ts_model_tensor_info t;\n"
    "  (output ? progs[m->cur].output_info : progs[m->cur].input_info)(NULL, "
    "i, &t);\n"
    "  *out = t;\n"
    "  out->shape = output ? m->out_shape[i] : m->in_shape[i];\n"
    "  out->bytes = t.bytes / elems(t.shape, t.ndim) * elems(out->shape, "
    "t.ndim);\n"
    "  return 0;\n"
    "}\n"
    "API int ts_model_input_info(const ts_model *m, int i, "
    "ts_model_tensor_info *out) {\n"
    "  return info(m, i, out, 0);\n"
    "}\n"
    "API int ts_model_output_info(const ts_model *m, int i, "
    "ts_model_tensor_info *out) {\n"
    "  return info(m, i, out, 1);\n"
    "}\n"
    "API int ts_model_num_kernels(const ts_model *m) {\n"
    "  return progs[m ? m->cur : NB - 1].num_kernels(NULL);\n"
    "}\n"
    "API const char *ts_model_kernel_name(const ts_model *m, int k) {\n"
    "  return progs[m ? m->cur : NB - 1].kernel_name(NULL, k);\n"
    "}\n"
    "API void ts_model_destroy(ts_model *m) {\n"
    "  if (!m) return;\n"
    "  for (int b = 0; b < NB; b++)\n"
    "    if (m->sub[b]) progs[b].destroy(m->sub[b]);\n"
    "  for (int i = 0; i < N_IN; i++) free(m->in_pad[i]);\n"
    "  for (int i = 0; i < N_OUT; i++) free(m->out_pad[i]);\n"
    "  free(m);\n"
    "}\n"
    "static int use_bucket(ts_model *m, int b) {\n"
    "  if (!m->sub[b] && progs[b].create(m->n_threads, &m->sub[b]) != 0)\n"
    "    return sub_fail(b);\n"
    "  m->cur = b;\n"
    "  return 0;\n"
    "}\n"
    "API int ts_model_set_dim(ts_model *m, const char *name, int64_t size) "
    "{\n"
    "  if (!m) return fail(\"ts_model_set_dim: no model\");\n"
    "  if (!name || strcmp(name, SYMBOL)) return fail(\"dimension '%s': the "
    "model's dynamic dimension is '%s'\", name ? name : \"(null)\", "
    "SYMBOL);\n"
    "  if (size < 1 || size > sizes[NB - 1]) return fail(\"%s=%lld: out of "
    "the compiled range 1..%lld\", SYMBOL, (long long)size, (long "
    "long)sizes[NB - 1]);\n"
    "  int b = 0;\n"
    "  while (sizes[b] < size) b++;\n"
    "  if (use_bucket(m, b)) return -1;\n"
    "  m->size = size;\n"
    "  set_shapes(m);\n"
    "  return 0;\n"
    "}\n"
    "API int ts_model_set_num_threads(ts_model *m, int n_threads) {\n"
    "  if (!m) return fail(\"ts_model_set_num_threads: no model\");\n"
    "  for (int b = 0; b < NB; b++)\n"
    "    if (m->sub[b] && progs[b].set_num_threads(m->sub[b], n_threads)) "
    "return sub_fail(b);\n"
    "  m->n_threads = n_threads;\n"
    "  return 0;\n"
    "}\n"
    "API int ts_model_create(int n_threads, ts_model **out) {\n"
    "  if (!out) return fail(\"ts_model_create: out is NULL\");\n"
    "  *out = NULL;\n"
    "  ts_model *m = calloc(1, sizeof *m);\n"
    "  if (!m) return fail(\"out of memory\");\n"
    "  m->n_threads = n_threads;\n"
    "  ts_model_tensor_info t;\n"
    "  int ok = 1;\n"
    "  for (int i = 0; ok && i < N_IN; i++) {\n"
    "    progs[NB - 1].input_info(NULL, i, &t);\n"
    "    ok = !in_axes[i] || (m->in_pad[i] = malloc((size_t)t.bytes + 64)) != "
    "NULL;\n"
    "  }\n"
    "  for (int i = 0; ok && i < N_OUT; i++) {\n"
    "    progs[NB - 1].output_info(NULL, i, &t);\n"
    "    ok = !out_axes[i] || (m->out_pad[i] = malloc((size_t)t.bytes + 64)) "
    "!= NULL;\n"
    "  }\n"
    "  if (!ok) {\n"
    "    ts_model_destroy(m);\n"
    "    return fail(\"out of memory for the padded inputs and outputs\");\n"
    "  }\n"
    "  if (use_bucket(m, NB - 1)) {\n"
    "    char why[sizeof last_error];\n"
    "    memcpy(why, last_error, sizeof why);\n"
    "    ts_model_destroy(m);\n"
    "    return fail(\"%s\", why);\n"
    "  }\n"
    "  m->size = sizes[NB - 1];\n"
    "  set_shapes(m);\n"
    "  *out = m;\n"
    "  return 0;\n"
    "}\n"
    "static int run(ts_model *m, const void *const *inputs, void *const "
    "*outputs, double *secs) {\n"
    "  if (!m) return fail(\"ts_model_run: no model\");\n"
    "  if ((N_IN && !inputs) || (N_OUT && !outputs)) return "
    "fail(\"ts_model_run: no input or output array\");\n"
    "  int b = m->cur;\n"
    "  int pad = m->size != sizes[b];\n"
    "  const void *in[N_IN + 2];\n"
    "  void *out[N_OUT + 1];\n"
    "  ts_model_tensor_info t;\n"
    "  for (int i = 0; i < N_IN; i++) {\n"
    "    if (!inputs[i]) return fail(\"input %d is NULL\", i);\n"
    "    in[i] = inputs[i];\n"
    "    if (!pad || !in_axes[i]) continue;\n"
    "    progs[b].input_info(NULL, i, &t);\n"
    "    memset(m->in_pad[i], 0, (size_t)t.bytes);\n"
    "    box_copy(m->in_pad[i], t.shape, inputs[i], m->in_shape[i], "
    "m->in_shape[i], t.ndim, (size_t)(t.bytes / elems(t.shape, t.ndim)));\n"
    "    in[i] = m->in_pad[i];\n"
    "  }\n"
    "  m->length = (float)m->size;\n"
    "  if (has_length[b]) in[N_IN] = &m->length;\n"
    "  for (int i = 0; i < N_OUT; i++) {\n"
    "    if (!outputs[i]) return fail(\"output %d is NULL\", i);\n"
    "    out[i] = pad && out_axes[i] ? m->out_pad[i] : outputs[i];\n"
    "  }\n"
    "  int r = secs ? progs[b].profile(m->sub[b], in, out, secs) : "
    "progs[b].run(m->sub[b], in, out);\n"
    "  if (r) return sub_fail(b);\n"
    "  for (int i = 0; pad && i < N_OUT; i++) {\n"
    "    if (!out_axes[i]) continue;\n"
    "    progs[b].output_info(NULL, i, &t);\n"
    "    box_copy(outputs[i], m->out_shape[i], m->out_pad[i], t.shape, "
    "m->out_shape[i], t.ndim, (size_t)(t.bytes / elems(t.shape, t.ndim)));\n"
    "  }\n"
    "  return 0;\n"
    "}\n"
    "API int ts_model_run(ts_model *m, const void *const *inputs, void "
    "*const *outputs) {\n"
    "  return run(m, inputs, outputs, NULL);\n"
    "}\n"
    "API int ts_model_profile(ts_model *m, const void *const *inputs, void "
    "*const *outputs, double *seconds) {\n"
    "  if (!seconds) return fail(\"ts_model_profile: seconds is NULL\");\n"
    "  return run(m, inputs, outputs, seconds);\n"
    "}\n";

/* ts_model_info of the library: the largest program's, with the dynamic
 * dimension and each program's own info under "buckets". */
static char *combined_info(const cp_program *const *ps, int n,
                           const cp_dynamic *dyn) {
  unsigned long failures = ts_alloc_failures();
  cJSON *root = cJSON_Parse(ps[n - 1]->info_json);
  if (!root) return NULL;
  cJSON *d = cJSON_CreateObject();
  cJSON_AddStringToObject(d, "symbol", dyn->symbol);
  cJSON *sz = cJSON_AddArrayToObject(d, "sizes");
  for (int b = 0; b < n; b++)
    ts_json_add(sz, NULL, cJSON_CreateNumber((double)dyn->sizes[b]));
  ts_json_add(root, "dynamic", d);
  cJSON *arr = cJSON_AddArrayToObject(root, "buckets");
  for (int b = 0; b < n; b++) {
    cJSON *o = cJSON_Parse(ps[b]->info_json);
    if (o) cJSON_AddNumberToObject(o, "size", (double)dyn->sizes[b]);
    ts_json_add(arr, NULL, o);
  }
  char *s = ts_json_print(root, failures, false);
  cJSON_Delete(root);
  return s;
}

int cp_write_dispatcher(const cp_program *const *ps, int n,
                        const cp_dynamic *dyn, const char *dir,
                        bool link_vendor, ts_error *err) {
  char path[4600];
  snprintf(path, sizeof path, "%s/model.c", dir);
  char *info = combined_info(ps, n, dyn);
  if (!info) return TS_ERR(err, TS_ENOMEM, "compile: out of memory");
  FILE *f = fopen(path, "w");
  if (!f) {
    free(info);
    return TS_ERR(err, TS_EIO, "cannot write '%s': %s", path, strerror(errno));
  }
  fprintf(f,
          "/* model: a dispatcher over %d padded sizes */\n"
          "#define API __attribute__((visibility(\"default\")))\n",
          n);
  fputs(cp_glue_types, f);
  const ts_graph *g = ps[n - 1]->g;
  fprintf(f, "#define NB %d\n#define N_IN %d\n#define N_OUT %d\n", n, dyn->n_in,
          g->n_outputs);
  fprintf(f, "#define SYMBOL ");
  cp_c_string(f, dyn->symbol);
  fprintf(f, "\nstatic const int64_t sizes[NB] = {");
  for (int b = 0; b < n; b++) fprintf(f, "%lld, ", (long long)dyn->sizes[b]);
  fprintf(f, "};\nstatic const int has_length[NB] = {");
  for (int b = 0; b < n; b++)
    fprintf(f, "%d, ", ps[b]->g->n_inputs > dyn->n_in);
  fprintf(f, "};\nstatic const unsigned in_axes[N_IN + 1] = {");
  for (int i = 0; i < dyn->n_in; i++) fprintf(f, "%uu, ", dyn->in_axes[i]);
  fprintf(f, "0};\nstatic const unsigned out_axes[N_OUT + 1] = {");
  for (int i = 0; i < g->n_outputs; i++) fprintf(f, "%uu, ", dyn->out_axes[i]);
  fprintf(f, "0};\nstatic const char info_json[] = ");
  cp_c_string(f, info);
  fprintf(f, ";\n");
  free(info);
  for (int b = 0; b < n; b++)
    for (int k = 0; used[k]; k++)
      fprintf(f, "void b%d_%s(void);\n", b, used[k]);
  if (link_vendor) fputs(cp_dnnl_parallel_for, f);
  fputs(dispatcher_types, f);
  static const char *const casts[] = {
      "int (*)(int, void **)",
      "void (*)(void *)",
      "int (*)(void *, const void *const *, void *const *)",
      "int (*)(void *, const void *const *, void *const *, double *)",
      "const char *(*)(void)",
      "int (*)(const void *, int, ts_model_tensor_info *)",
      "int (*)(const void *, int, ts_model_tensor_info *)",
      "int (*)(void *, int)",
      "int (*)(const void *)",
      "const char *(*)(const void *, int)"};
  fprintf(f, "static const program progs[NB] = {\n");
  for (int b = 0; b < n; b++) {
    fprintf(f, "  {");
    for (int k = 0; used[k]; k++)
      fprintf(f, "%s(%s)b%d_%s", k ? ", " : "", casts[k], b, used[k]);
    fprintf(f, "},\n");
  }
  fprintf(f, "};\n");
  fputs(dispatcher_body, f);
  int bad = ferror(f);
  if (fclose(f) != 0 || bad)
    return TS_ERR(err, TS_EIO, "cannot write '%s'", path);
  return TS_OK;
}
