/*
 * compile_emit.c — the second half of `tessera compile`: writes a compiled
 * program out and links it. Into a temporary folder go one object per
 * kernel, the weights (the graph's constant store, byte for byte) with an
 * assembler file that pulls them in with `.incbin`, the C glue (the tables
 * of call sites, argument references, inputs and outputs, and the
 * functions of include/tessera/model.h), and a version script exporting
 * only ts_model_*. The system C compiler links them against
 * libtessera_rt into a temporary file next to the output, renamed over it
 * at the end.
 */
#include "compile_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int write_file(const char *dir, const char *name, const void *data,
                      size_t n, ts_error *err) {
  char path[4600];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f)
    return TS_ERR(err, TS_EIO, "cannot write '%s': %s", path, strerror(errno));
  size_t w = n ? fwrite(data, 1, n, f) : 0;
  int bad = ferror(f);
  if (fclose(f) != 0 || w != n || bad)
    return TS_ERR(err, TS_EIO, "cannot write '%s': %s", path,
                  strerror(errno ? errno : EIO));
  return TS_OK;
}

/* a, then zeros up to a multiple of 64 bytes, then b */
static int write_parts(const char *dir, const char *name, const void *a,
                       size_t na, const void *b, size_t nb, ts_error *err) {
  char path[4600];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f)
    return TS_ERR(err, TS_EIO, "cannot write '%s': %s", path, strerror(errno));
  static const unsigned char zeros[64];
  size_t pad = (64 - na % 64) % 64;
  bool ok = (!na || fwrite(a, 1, na, f) == na) &&
            (!pad || fwrite(zeros, 1, pad, f) == pad) &&
            (!nb || fwrite(b, 1, nb, f) == nb) && !ferror(f);
  if (fclose(f) != 0 || !ok)
    return TS_ERR(err, TS_EIO, "cannot write '%s': %s", path,
                  strerror(errno ? errno : EIO));
  return TS_OK;
}

void cp_c_string(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; p && *p; p++) {
    unsigned char c = *p;
    bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                (c >= '0' && c <= '9') ||
                strchr(" _-.,:;()[]{}/+*=<>#@!%^&|~", c);
    if (safe && c)
      fputc(c, f);
    else
      fprintf(f, "\\%03o", c);
  }
  fputc('"', f);
}

/* The part of the glue that is the same for every model. */
/* The parallel loops of kernels in a library that calls oneDNN run on
 * oneDNN's OpenMP team (one pool on the cores, not two): the kernels' rt
 * is then the model's thread count. In a library of several programs the
 * dispatcher defines it once. */
const char cp_dnnl_parallel_for[] =
    "typedef int32_t (*ts_rt_task)(void *, int64_t, int64_t);\n"
    "int32_t ts_vendor_dnnl_parallel_for(ts_rt_task task, void *closure, "
    "int64_t n, int n_threads);\n"
    "int32_t ts_rt_parallel_for(void *rt, ts_rt_task task, void *closure, "
    "int64_t n) {\n"
    "  return ts_vendor_dnnl_parallel_for(task, closure, n, rt ? *(int *)rt "
    ": 1);\n"
    "}\n";

static const char glue_runtime[] =
    "struct ts_model {\n"
    "  ts_runtime *rt;\n"
    "  unsigned char *arena;\n"
    "  int poison; /* TESSERA_POISON_ARENA: NaN bytes before every run */\n"
    "  unsigned char *in_stage[N_IN + 1], *out_stage[N_OUT + 1];\n"
    "#if N_VENDOR\n"
    "  ts_vendor_op *vop[N_CALLS + 1];\n"
    "#endif\n"
    "#if DNNL_POOL\n"
    "  int n_threads; /* the kernels' rt: see ts_rt_parallel_for */\n"
    "#endif\n"
    "};\n"
    "#if DNNL_POOL\n"
    "static int online_cpus(void) {\n"
    "  long n = sysconf(_SC_NPROCESSORS_ONLN);\n"
    "  return n > 0 ? (int)n : 1;\n"
    "}\n"
    "#define KERNEL_RT(m) ((void *)&(m)->n_threads)\n"
    "#else\n"
    "#define KERNEL_RT(m) ((void *)(m)->rt)\n"
    "#endif\n"
    "static void *where(const ts_model *m, argref r, void *const *in, "
    "void *const *out);\n"
    "static void *aligned(int64_t bytes) {\n"
    "  void *p = NULL;\n"
    "  if (posix_memalign(&p, 64, (size_t)(bytes > 0 ? bytes : 64))) "
    "return NULL;\n"
    "  return p;\n"
    "}\n"
    "static double now_s(void) {\n"
    "  struct timespec ts;\n"
    "  clock_gettime(CLOCK_MONOTONIC, &ts);\n"
    "  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;\n"
    "}\n"
    "API int ts_model_abi_version(void) { return 1; }\n"
    "API int ts_model_num_dims(const ts_model *m) { (void)m; return 0; }\n"
    "API int ts_model_dim(const ts_model *m, int i, "
    "ts_model_dim_info *out) {\n"
    "  (void)m, (void)out;\n"
    "  return fail(\"dimension %d: the model has no dynamic dimension\", "
    "i);\n"
    "}\n"
    "API int ts_model_set_dim(ts_model *m, const char *name, int64_t size) "
    "{\n"
    "  (void)m, (void)size;\n"
    "  return fail(\"dimension '%s': the model has no dynamic dimension\", "
    "name ? name : \"(null)\");\n"
    "}\n"
    "API const char *ts_model_last_error(void) { return last_error; }\n"
    "API const char *ts_model_info(void) { return info_json; }\n"
    "API int ts_model_num_inputs(const ts_model *m) { (void)m; return N_IN; "
    "}\n"
    "API int ts_model_num_outputs(const ts_model *m) { (void)m; return N_OUT; "
    "}\n"
    "API int ts_model_num_kernels(const ts_model *m) { (void)m; return "
    "N_CALLS; }\n"
    "API const char *ts_model_kernel_name(const ts_model *m, int k) {\n"
    "  (void)m;\n"
    "  return k >= 0 && k < N_CALLS ? calls[k].name : NULL;\n"
    "}\n"
    "static int info(const tinfo *t, int n, int i, ts_model_tensor_info *out, "
    "const char *what) {\n"
    "  if (i < 0 || i >= n || !out) return fail(\"%s %d: out of range (the "
    "model has %d)\", what, i, n);\n"
    "  out->name = t[i].name;\n"
    "  out->dtype = (ts_model_dtype)t[i].dtype;\n"
    "  out->ndim = t[i].ndim;\n"
    "  out->shape = t[i].shape;\n"
    "  out->bytes = t[i].bytes;\n"
    "  return 0;\n"
    "}\n"
    "API int ts_model_input_info(const ts_model *m, int i, "
    "ts_model_tensor_info *out) {\n"
    "  (void)m;\n"
    "  return info(in_info, N_IN, i, out, \"input\");\n"
    "}\n"
    "API int ts_model_output_info(const ts_model *m, int i, "
    "ts_model_tensor_info *out) {\n"
    "  (void)m;\n"
    "  return info(out_info, N_OUT, i, out, \"output\");\n"
    "}\n"
    "API void ts_model_destroy(ts_model *m) {\n"
    "  if (!m) return;\n"
    "  ts_runtime_destroy(m->rt);\n"
    "#if N_VENDOR\n"
    "  for (int c = 0; c < N_CALLS; c++) "
    "ts_vendor_dnnl_destroy(m->vop[c]);\n"
    "#endif\n"
    "  free(m->arena);\n"
    "  for (int i = 0; i < N_IN; i++) free(m->in_stage[i]);\n"
    "  for (int i = 0; i < N_OUT; i++) free(m->out_stage[i]);\n"
    "  free(m);\n"
    "}\n"
    "API int ts_model_set_num_threads(ts_model *m, int n_threads) {\n"
    "  if (!m) return fail(\"ts_model_set_num_threads: no model\");\n"
    "  ts_runtime *rt = NULL;\n"
    "  if (ts_runtime_create(n_threads, &rt, NULL) != 0)\n"
    "    return fail(\"cannot start a thread pool of %d threads\", "
    "n_threads);\n"
    "  ts_runtime_destroy(m->rt);\n"
    "  m->rt = rt;\n"
    "#if DNNL_POOL\n"
    "  m->n_threads = n_threads > 0 ? n_threads : online_cpus();\n"
    "#endif\n"
    "#if N_VENDOR\n"
    "  for (int c = 0; c < N_CALLS; c++) "
    "ts_vendor_dnnl_set_threads(m->vop[c], m->n_threads);\n"
    "#endif\n"
    "  return 0;\n"
    "}\n"
    "API int ts_model_create(int n_threads, ts_model **out) {\n"
    "  if (!out) return fail(\"ts_model_create: out is NULL\");\n"
    "  *out = NULL;\n"
    "  if (NEED_AMX && ts_rt_enable_amx(NULL) != 0)\n"
    "    return fail(\"the model was compiled for AMX, which this machine "
    "or its kernel does not allow\");\n"
    "  ts_model *m = calloc(1, sizeof *m);\n"
    "  if (!m) return fail(\"out of memory\");\n"
    "  m->arena = aligned(ARENA_BYTES);\n"
    "  const char *poison = getenv(\"TESSERA_POISON_ARENA\");\n"
    "  m->poison = poison && *poison && strcmp(poison, \"0\");\n"
    "  int ok = m->arena != NULL;\n"
    "  for (int i = 0; ok && i < N_IN; i++) ok = (m->in_stage[i] = "
    "aligned(in_info[i].bytes)) != NULL;\n"
    "  for (int i = 0; ok && i < N_OUT; i++) ok = (m->out_stage[i] = "
    "aligned(out_info[i].bytes)) != NULL;\n"
    "  if (!ok) {\n"
    "    ts_model_destroy(m);\n"
    "    return fail(\"out of memory for the arena (%lld bytes) and the "
    "staging buffers\", (long long)ARENA_BYTES);\n"
    "  }\n"
    "  if (ts_runtime_create(n_threads, &m->rt, NULL) != 0) {\n"
    "    ts_model_destroy(m);\n"
    "    return fail(\"cannot start a thread pool of %d threads\", "
    "n_threads);\n"
    "  }\n"
    "#if DNNL_POOL\n"
    "  m->n_threads = n_threads > 0 ? n_threads : online_cpus();\n"
    "#endif\n"
    "#if N_VENDOR\n"
    "  for (int c = 0; c < N_CALLS; c++) {\n"
    "    if (!calls[c].vendor) continue;\n"
    "    void *a[MAX_ARGS + 1];\n"
    "    for (int k = 0; k < calls[c].n; k++) {\n"
    "      argref r = args_tab[calls[c].first + k];\n"
    "      a[k] = r.kind <= 1 ? where(m, r, NULL, NULL) : NULL;\n"
    "    }\n"
    "    char why[700];\n"
    "    if (ts_vendor_dnnl_create(calls[c].vendor, a, m->n_threads, "
    "&m->vop[c], why, sizeof why) != 0) {\n"
    "      ts_model_destroy(m);\n"
    "      return fail(\"kernel %d (%s): %s\", c, calls[c].name, why);\n"
    "    }\n"
    "  }\n"
    "#endif\n"
    "  *out = m;\n"
    "  return 0;\n"
    "}\n"
    "static void *where(const ts_model *m, argref r, void *const *in, void "
    "*const *out) {\n"
    "  switch (r.kind) {\n"
    "  case 0: return m->arena + r.offset;\n"
    "  case 1: return (void *)(tsm_weights + r.offset);\n"
    "  case 2: return (unsigned char *)in[r.index] + r.offset;\n"
    "  default: return (unsigned char *)out[r.index] + r.offset;\n"
    "  }\n"
    "}\n"
    "static int run(ts_model *m, const void *const *inputs, void *const "
    "*outputs, double *secs) {\n"
    "  if (!m) return fail(\"ts_model_run: no model\");\n"
    "  if ((N_IN && !inputs) || (N_OUT && !outputs)) return "
    "fail(\"ts_model_run: no input or output array\");\n"
    "  void *in[N_IN + 1], *out[N_OUT + 1];\n"
    "  for (int i = 0; i < N_IN; i++) {\n"
    "    if (!inputs[i]) return fail(\"input %d ('%s') is NULL\", i, "
    "in_info[i].name);\n"
    "    in[i] = (void *)inputs[i];\n"
    "    if ((uintptr_t)in[i] & 63) {\n"
    "      memcpy(m->in_stage[i], in[i], (size_t)in_info[i].bytes);\n"
    "      in[i] = m->in_stage[i];\n"
    "    }\n"
    "  }\n"
    "  for (int i = 0; i < N_OUT; i++) {\n"
    "    if (!outputs[i]) return fail(\"output %d ('%s') is NULL\", i, "
    "out_info[i].name);\n"
    "    out[i] = ((uintptr_t)outputs[i] & 63) ? m->out_stage[i] : "
    "outputs[i];\n"
    "  }\n"
    "  if (m->poison) memset(m->arena, 0xff, (size_t)ARENA_BYTES);\n"
    "  void *a[MAX_ARGS + 1];\n"
    "  for (int c = 0; c < N_CALLS; c++) {\n"
    "    for (int k = 0; k < calls[c].n; k++) a[k] = where(m, "
    "args_tab[calls[c].first + k], in, out);\n"
    "    double t0 = secs ? now_s() : 0;\n"
    "#if N_VENDOR\n"
    "    int32_t r = calls[c].vendor ? ts_vendor_dnnl_run(m->vop[c], a) : "
    "calls[c].fn(a, KERNEL_RT(m));\n"
    "#else\n"
    "    int32_t r = calls[c].fn(a, KERNEL_RT(m));\n"
    "#endif\n"
    "    if (secs) secs[c] = now_s() - t0;\n"
    "    if (r != 0) return fail(\"kernel %d (%s) failed (returned %d)\", c, "
    "calls[c].name, (int)r);\n"
    "  }\n"
    "  for (int c = 0; c < N_COPIES; c++)\n"
    "    memmove(out[copies[c].out], where(m, copies[c].src, in, out), "
    "(size_t)copies[c].bytes);\n"
    "  for (int i = 0; i < N_OUT; i++)\n"
    "    if (out[i] != outputs[i]) memcpy(outputs[i], out[i], "
    "(size_t)out_info[i].bytes);\n"
    "  return 0;\n"
    "}\n";

/* The last two functions of the C interface, over the glue's static run()
 * (one program's or the dispatcher's). */
const char cp_glue_run_api[] =
    "API int ts_model_run(ts_model *m, const void *const *inputs, void "
    "*const *outputs) {\n"
    "  return run(m, inputs, outputs, NULL);\n"
    "}\n"
    "API int ts_model_profile(ts_model *m, const void *const *inputs, void "
    "*const *outputs, double *seconds) {\n"
    "  if (!seconds) return fail(\"ts_model_profile: seconds is NULL\");\n"
    "  return run(m, inputs, outputs, seconds);\n"
    "}\n";

static void tensor_table(FILE *f, const ts_graph *g, const int *ids, int n,
                         const char *prefix) {
  for (int i = 0; i < n; i++) {
    const gr_value *v = &g->values[ids[i]];
    fprintf(f, "static const int64_t %s_shape_%d[] = {", prefix, i);
    for (int d = 0; d < v->ndim; d++)
      fprintf(f, "%lld, ", (long long)v->shape[d]);
    fprintf(f, "0};\n");
  }
  fprintf(f, "static const tinfo %s_info[] = {\n", prefix);
  for (int i = 0; i < n; i++) {
    const gr_value *v = &g->values[ids[i]];
    fprintf(f, "  {");
    cp_c_string(f, v->name);
    fprintf(f, ", %d, %d, %s_shape_%d, %lld},\n", cp_onnx_dtype(v->dtype),
            v->ndim, prefix, i,
            (long long)(gr_value_elems(v) *
                        (int64_t)ts_dtype_elem_bytes(v->dtype)));
  }
  fprintf(f, "  {0, 0, 0, 0, 0}};\n");
}

/* The functions of the C ABI: in a library of several programs each
 * program's are renamed apart (PREFIX_ts_model_run) and kept inside. */
static const char *const api_names[] = {
    "ts_model_abi_version", "ts_model_last_error",      "ts_model_info",
    "ts_model_num_inputs",  "ts_model_num_outputs",     "ts_model_num_kernels",
    "ts_model_kernel_name", "ts_model_input_info",      "ts_model_output_info",
    "ts_model_destroy",     "ts_model_set_num_threads", "ts_model_create",
    "ts_model_run",         "ts_model_profile",         "ts_model_num_dims",
    "ts_model_dim",         "ts_model_set_dim",         NULL};

/* The C declarations every glue file starts with. */
const char cp_glue_types[] =
    "#include <stdarg.h>\n#include <stddef.h>\n#include <stdint.h>\n"
    "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
    "#include <time.h>\n#include <unistd.h>\n\n"
    "typedef struct ts_model ts_model;\n"
    "typedef int ts_model_dtype;\n"
    "typedef struct ts_model_tensor_info { const char *name; "
    "ts_model_dtype dtype; int ndim; const int64_t *shape; int64_t "
    "bytes; } ts_model_tensor_info;\n"
    "typedef struct ts_model_dim_info { const char *name; int64_t min, max, "
    "size; int n_sizes; const int64_t *sizes; } ts_model_dim_info;\n"
    "static _Thread_local char last_error[1024];\n"
    "static int fail(const char *fmt, ...) {\n"
    "  va_list ap;\n"
    "  va_start(ap, fmt);\n"
    "  vsnprintf(last_error, sizeof last_error, fmt, ap);\n"
    "  va_end(ap);\n"
    "  return -1;\n"
    "}\n";

static int write_glue(const cp_program *p, const char *dir, const char *prefix,
                      bool link_vendor, const cp_remap *remap, ts_error *err) {
  char path[4600];
  snprintf(path, sizeof path, "%s/%smodel.c", dir, prefix);
  FILE *f = fopen(path, "w");
  if (!f)
    return TS_ERR(err, TS_EIO, "cannot write '%s': %s", path, strerror(errno));
  const ts_graph *g = p->g;
  fprintf(f, "/* model: ");
  for (const char *s = p->model_name; *s; s++)
    fputc(*s == '*' || *s == '\n' ? '_' : *s, f);
  fprintf(f, " */\n");
  if (*prefix) { /* one program of several: its interface kept inside */
    for (int i = 0; api_names[i]; i++)
      fprintf(f, "#define %s %s%s\n", api_names[i], prefix, api_names[i]);
    fprintf(f, "#define API __attribute__((visibility(\"hidden\")))\n");
  } else {
    fprintf(f, "#define API __attribute__((visibility(\"default\")))\n");
  }
  fprintf(f, "#define DNNL_POOL %d\n", link_vendor ? 1 : 0);
  fputs(cp_glue_types, f);
  fprintf(f, "typedef struct ts_runtime ts_runtime;\n"
             "int ts_runtime_create(int n_threads, ts_runtime **out, void "
             "*err);\n"
             "void ts_runtime_destroy(ts_runtime *rt);\n"
             "int ts_rt_enable_amx(void *err);\n"
             "extern const unsigned char tsm_weights[];\n"
             "typedef int32_t (*kfn)(void *const *args, void *rt);\n"
             "typedef struct { int32_t kind, index; int64_t offset; } "
             "argref;\n"
             "typedef struct { kfn fn; int32_t first, n; const char *name; "
             "const char *vendor; } callsite;\n"
             "typedef struct ts_vendor_op ts_vendor_op;\n"
             "int ts_vendor_dnnl_create(const char *desc, void *const *args, "
             "int n_threads, ts_vendor_op **out, char *err, size_t n);\n"
             "int ts_vendor_dnnl_run(ts_vendor_op *op, void *const *args);\n"
             "void ts_vendor_dnnl_set_threads(ts_vendor_op *op, int n);\n"
             "void ts_vendor_dnnl_destroy(ts_vendor_op *op);\n"
             "typedef struct { const char *name; int32_t dtype, ndim; const "
             "int64_t *shape; int64_t bytes; } tinfo;\n"
             "typedef struct { int32_t out; argref src; int64_t bytes; } "
             "outcopy;\n\n");
  fprintf(f,
          "#define N_IN %d\n#define N_OUT %d\n#define N_CALLS %d\n"
          "#define N_COPIES %d\n#define MAX_ARGS %d\n"
          "#define ARENA_BYTES ((int64_t)%lld)\n#define NEED_AMX %d\n"
          "#define N_VENDOR %d\n\n",
          g->n_inputs, g->n_outputs, p->n_calls, p->n_copies, p->max_args,
          (long long)p->arena_bytes, p->need_amx ? 1 : 0, p->n_vendor);
  for (int i = 0; i < p->n_kernels; i++)
    if (!p->kernels[i].vendor)
      fprintf(f, "int32_t %s(void *const *args, void *rt);\n",
              p->kernels[i].entry);
  tensor_table(f, g, g->inputs, g->n_inputs, "in");
  tensor_table(f, g, g->outputs, g->n_outputs, "out");
  fprintf(f, "static const argref args_tab[] = {\n");
  for (int i = 0; i < p->n_args; i++)
    fprintf(f, "  {%d, %d, %lld},\n", (int)p->args[i].kind, p->args[i].index,
            (long long)(p->args[i].kind == CP_WEIGHT
                            ? cp_remap_offset(remap, p->args[i].offset)
                            : p->args[i].offset));
  fprintf(f, "  {0, 0, 0}};\n");
  fprintf(f, "static const callsite calls[] = {\n");
  for (int i = 0; i < p->n_calls; i++) {
    const cp_call *c = &p->calls[i];
    const gr_node *n = &g->nodes[c->node];
    const cp_kernel *k = &p->kernels[c->task];
    char name[1024]; /* a vendor call says so: profiles list it */
    snprintf(name, sizeof name, "%s (%s)%s%s%s", ts_func_name(n->func), n->name,
             k->vendor ? " [oneDNN]" : "", k->user ? " [extern " : "",
             k->user ? k->entry : "");
    if (k->user) snprintf(name + strlen(name), sizeof name - strlen(name), "]");
    fprintf(f, "  {%s, %d, %d, ", k->vendor ? "0" : k->entry, c->first, c->n);
    cp_c_string(f, name);
    fputs(", ", f);
    if (k->vendor)
      cp_c_string(f, k->vendor);
    else
      fputs("0", f);
    fprintf(f, "},\n");
  }
  fprintf(f, "  {0, 0, 0, 0, 0}};\n");
  fprintf(f, "static const outcopy copies[] = {\n");
  for (int i = 0; i < p->n_copies; i++)
    fprintf(f, "  {%d, {%d, %d, %lld}, %lld},\n", p->copies[i].out,
            (int)p->copies[i].src.kind, p->copies[i].src.index,
            (long long)(p->copies[i].src.kind == CP_WEIGHT
                            ? cp_remap_offset(remap, p->copies[i].src.offset)
                            : p->copies[i].src.offset),
            (long long)p->copies[i].bytes);
  fprintf(f, "  {0, {0, 0, 0}, 0}};\n");
  fprintf(f, "static const char info_json[] = ");
  cp_c_string(f, p->info_json);
  fprintf(f, ";\n\n");
  if (!*prefix && link_vendor) fputs(cp_dnnl_parallel_for, f);
  fputs(glue_runtime, f);
  fputs(cp_glue_run_api, f);
  int bad = ferror(f);
  if (fclose(f) != 0 || bad)
    return TS_ERR(err, TS_EIO, "cannot write '%s'", path);
  return TS_OK;
}

/* weights.bin holding the bytes, and weights.S pulling them in as the
 * library's tsm_weights. */
int cp_write_weights_blob(const char *dir, const void *bytes, size_t len,
                          const void *extra, size_t extra_len, ts_error *err) {
  static const char text[] = "\t.section .rodata.tsm_weights,\"a\",@progbits\n"
                             "\t.balign 64\n"
                             "\t.globl tsm_weights\n"
                             "\t.hidden tsm_weights\n"
                             "\t.type tsm_weights, @object\n"
                             "tsm_weights:\n"
                             "\t.incbin \"weights.bin\"\n"
                             "\t.byte 0\n"
                             "\t.size tsm_weights, . - tsm_weights\n"
                             "\t.section .note.GNU-stack,\"\",@progbits\n";
  int rc = extra_len ? write_parts(dir, "weights.bin", bytes, len, extra,
                                   extra_len, err)
                     : write_file(dir, "weights.bin", bytes, len, err);
  if (!rc) rc = write_file(dir, "weights.S", text, strlen(text), err);
  return rc;
}

static const char version_script[] =
    "{\n  global: ts_model_*;\n  local: *;\n};\n";

/* Runs argv in dir with stdout and stderr into dir/cc.log; the log's tail
 * goes into the error on failure. */
static int run_cc(char *const *argv, const char *dir, ts_error *err) {
  char log[4600];
  snprintf(log, sizeof log, "%s/cc.log", dir);
  pid_t pid = fork();
  if (pid < 0)
    return TS_ERR(err, TS_EIO, "cannot start '%s': %s", argv[0],
                  strerror(errno));
  if (pid == 0) {
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    if (chdir(dir) != 0) _exit(126);
    execvp(argv[0], argv);
    dprintf(2, "cannot run '%s': %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return TS_ERR(err, TS_EIO, "waiting for '%s': %s", argv[0],
                    strerror(errno));
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return TS_OK;
  char text[700] = "";
  FILE *f = fopen(log, "r");
  if (f) {
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, size > 600 ? size - 600 : 0, SEEK_SET);
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
  }
  return TS_ERR(
      err, TS_EIO, "linking the library with '%s' failed (%s %d):\n%s", argv[0],
      WIFEXITED(status) ? "exit status" : "signal",
      WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), text);
}

int cp_emit_and_link(const cp_program *const *ps, int n_progs,
                     const cp_dynamic *dyn, const ts_graph_compile_options *o,
                     const char *tmpdir, int64_t *library_bytes,
                     ts_error *err) {
  bool many = dyn != NULL;
  int n_vendor = 0, n_files = 0;
  for (int b = 0; b < n_progs; b++) {
    n_vendor += ps[b]->n_vendor;
    n_files += ps[b]->n_kernels;
  }
  if (o->vendor_pool && n_vendor == 0) n_vendor = 1; /* its team, no call */
  int rc = write_file(tmpdir, "model.map", version_script,
                      strlen(version_script), err);
  char prefix[16] = "";
  cp_remap *remaps = many ? ts_calloc((size_t)n_progs, sizeof *remaps) : NULL;
  if (!rc && many && !remaps) rc = TS_ERR(err, TS_ENOMEM, "out of memory");
  if (!rc)
    rc = many ? cp_write_shared_weights(ps, n_progs, tmpdir, remaps, err)
              : cp_write_weights_blob(tmpdir, ps[0]->g->consts,
                                      ps[0]->g->consts_len, ps[0]->extra,
                                      (size_t)ps[0]->extra_len, err);
  for (int b = 0; !rc && b < n_progs; b++) {
    const cp_program *p = ps[b];
    if (many) snprintf(prefix, sizeof prefix, "b%d_", b);
    for (int i = 0; !rc && i < p->n_kernels; i++) {
      if (p->kernels[i].vendor || p->kernels[i].user) continue;
      char name[48];
      snprintf(name, sizeof name, "%sk%d.o", prefix, i);
      rc = write_file(tmpdir, name, p->kernels[i].bytes, p->kernels[i].n_bytes,
                      err);
    }
    if (!rc)
      rc = write_glue(p, tmpdir, prefix, n_vendor > 0,
                      remaps ? &remaps[b] : NULL, err);
  }
  for (int b = 0; remaps && b < n_progs; b++) cp_remap_free(&remaps[b]);
  free(remaps);
  if (!rc && many)
    rc = cp_write_dispatcher(ps, n_progs, dyn, tmpdir, n_vendor > 0, err);
  if (rc) return rc;

  /* absolute paths: the compiler runs in tmpdir */
  char *rtdir = realpath(o->runtime_dir, NULL);
  if (!rtdir)
    return TS_ERR(err, TS_ENOTFOUND, "runtime folder '%s': %s", o->runtime_dir,
                  strerror(errno));
  char *out_copy = ts_strdup(o->output), *base_copy = ts_strdup(o->output);
  char *outdir = out_copy ? realpath(dirname(out_copy), NULL) : NULL;
  if (!outdir) {
    rc = TS_ERR(err, TS_EIO, "output folder of '%s': %s", o->output,
                strerror(errno));
    free(rtdir);
    free(out_copy);
    free(base_copy);
    return rc;
  }
  char final_path[PATH_MAX * 2], tmp_path[PATH_MAX * 2 + 64];
  snprintf(final_path, sizeof final_path, "%s/%s", outdir, basename(base_copy));
  snprintf(tmp_path, sizeof tmp_path, "%s/.%s.tmp-%ld", outdir,
           basename(base_copy), (long)getpid());
  char lflag[PATH_MAX + 8];
  snprintf(lflag, sizeof lflag, "-L%s", rtdir);
  char *args[64];
  int n = 0;
  args[n++] = (char *)(o->cc && *o->cc ? o->cc : "cc");
  args[n++] = "-shared";
  args[n++] = "-fPIC";
  args[n++] = "-O2";
  args[n++] = "-std=gnu17";
  args[n++] = "-fvisibility=hidden";
  args[n++] = "-o";
  args[n++] = tmp_path;
  int n_src = many ? n_progs + 2 : 2;
  char(*objs)[48] = ts_calloc((size_t)(n_files + n_src) + 1, sizeof *objs);
  char **argv = ts_calloc((size_t)(n_files + n_src) + 80, sizeof *argv);
  char **users = calloc((size_t)n_files + 1, sizeof *users);
  const cp_kernel **ukern = calloc((size_t)n_files + 1, sizeof *ukern);
  if (!objs || !argv || !users || !ukern) {
    free(objs);
    free(argv);
    free(users);
    free(ukern);
    free(rtdir);
    free(outdir);
    free(out_copy);
    free(base_copy);
    return TS_ERR(err, TS_ENOMEM, "out of memory");
  }
  memcpy(argv, args, sizeof *argv * (size_t)n);
  int n_obj = 0, n_users = 0;
  if (many) argv[n++] = "model.c";
  argv[n++] = "weights.S";
  for (int b = 0; b < n_progs; b++) {
    if (many) snprintf(prefix, sizeof prefix, "b%d_", b);
    snprintf(objs[n_obj], sizeof objs[n_obj], "%smodel.c", prefix);
    argv[n++] = objs[n_obj++];
  }
  for (int b = 0; !rc && b < n_progs; b++) {
    const cp_program *p = ps[b];
    if (many) snprintf(prefix, sizeof prefix, "b%d_", b);
    for (int i = 0; i < p->n_kernels; i++) {
      if (p->kernels[i].vendor) continue;
      if (p->kernels[i].user) { /* absolute: the compiler runs in tmpdir */
        char *real = realpath(p->kernels[i].user, NULL);
        if (!real) {
          rc = TS_ERR(err, TS_ENOTFOUND, "--extern: '%s': %s",
                      p->kernels[i].user, strerror(errno));
          break;
        }
        bool dup = false; /* one file may hold several tasks' functions */
        for (int k = 0; k < n_users; k++) dup = dup || !strcmp(users[k], real);
        if (dup) {
          free(real);
          continue;
        }
        ukern[n_users] = &p->kernels[i];
        users[n_users++] = real;
        argv[n++] = real;
        continue;
      }
      snprintf(objs[n_obj], sizeof objs[n_obj], "%sk%d.o", prefix, i);
      argv[n++] = objs[n_obj++];
    }
  }
  argv[n++] = lflag;
  argv[n++] = "-Xlinker";
  argv[n++] = "-rpath";
  argv[n++] = "-Xlinker";
  argv[n++] = rtdir;
  argv[n++] = "-Wl,--version-script=model.map";
  argv[n++] = "-Wl,-z,noexecstack";
  argv[n++] = "-Wl,--no-undefined";
  if (n_vendor) argv[n++] = "-ltessera_dnnl"; /* only when it calls it */
  argv[n++] = "-ltessera_rt";
  argv[n++] = "-lm";
  argv[n++] = NULL;
  struct stat fst;
  if (lstat(final_path, &fst) == 0 && !S_ISREG(fst.st_mode))
    rc = TS_ERR(err, TS_EINVAL,
                "output '%s' is not a regular file (it would be replaced)",
                final_path);
  bool linking = !rc;
  if (!rc) rc = run_cc(argv, tmpdir, err);
  for (int i = 0; rc && linking && err && i < n_users; i++) {
    /* say so: the compiler's text may not name them */
    char m[sizeof err->msg];
    int k = snprintf(m, sizeof m,
                     "with the user function %s() of '%s': ", ukern[i]->entry,
                     ukern[i]->user);
    if (k > 0 && (size_t)k < sizeof m) {
      memcpy(m + k, err->msg, sizeof m - (size_t)k - 1);
      m[sizeof m - 1] = 0;
      memcpy(err->msg, m, sizeof m);
    }
    break;
  }
  if (!rc) {
    struct stat st;
    if (stat(tmp_path, &st) == 0) *library_bytes = (int64_t)st.st_size;
    if (rename(tmp_path, final_path) != 0)
      rc = TS_ERR(err, TS_EIO, "cannot rename '%s' to '%s': %s", tmp_path,
                  final_path, strerror(errno));
  }
  if (rc) unlink(tmp_path);
  for (int i = 0; i < n_users; i++) free(users[i]);
  free(users);
  free(ukern);
  free(objs);
  free(argv);
  free(rtdir);
  free(outdir);
  free(out_copy);
  free(base_copy);
  return rc;
}
