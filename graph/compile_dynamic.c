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
  fputs(cp_glue_run_api, f);
  int bad = ferror(f);
  if (fclose(f) != 0 || bad)
    return TS_ERR(err, TS_EIO, "cannot write '%s'", path);
  return TS_OK;
}

/* ---- the shared weights ------------------------------------------------ */

static int cmp_moved(const void *a, const void *b) {
  int64_t x = ((const cp_moved *)a)->from, y = ((const cp_moved *)b)->from;
  return x < y ? -1 : x > y;
}

/* The constant of program p holding weights offset `off`, or NULL. */
static const gr_value *constant_at(const ts_graph *g, int64_t off) {
  for (int v = 0; v < g->n_values; v++) {
    const gr_value *val = &g->values[v];
    int64_t e = gr_value_elems(val);
    if (val->const_off < 0 || e < 0) continue;
    int64_t len = e * (int64_t)ts_dtype_elem_bytes(val->dtype);
    if (off >= val->const_off && off < val->const_off + (len ? len : 1))
      return val;
  }
  return NULL;
}

/* Adds the constant at [from, from + len) of g to the blob (once per
 * distinct content) and to the remap. */
typedef struct blob {
  uint8_t *bytes;
  size_t len, cap;
  uint64_t *hash; /* per placed constant */
  cp_moved *placed;
  int n, capn;
} blob;

static uint64_t fnv(const uint8_t *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

static int place(blob *bl, const uint8_t *data, int64_t len, int64_t *to) {
  uint64_t h = fnv(data, (size_t)len);
  for (int i = 0; i < bl->n; i++)
    if (bl->hash[i] == h && bl->placed[i].len == len &&
        !memcmp(bl->bytes + bl->placed[i].to, data, (size_t)len)) {
      *to = bl->placed[i].to;
      return TS_OK;
    }
  size_t at = (bl->len + 63) & ~(size_t)63;
  if (at + (size_t)len + 64 > bl->cap) {
    size_t cap = (at + (size_t)len + 64) * 2;
    uint8_t *nb = realloc(bl->bytes, cap);
    if (!nb) return TS_ENOMEM;
    bl->bytes = nb;
    bl->cap = cap;
  }
  if (bl->n == bl->capn) {
    int capn = bl->capn ? bl->capn * 2 : 64;
    uint64_t *nh = realloc(bl->hash, sizeof *nh * (size_t)capn);
    if (nh) bl->hash = nh;
    cp_moved *np = nh ? realloc(bl->placed, sizeof *np * (size_t)capn) : NULL;
    if (!np) return TS_ENOMEM;
    bl->placed = np;
    bl->capn = capn;
  }
  memset(bl->bytes + bl->len, 0, at - bl->len);
  memcpy(bl->bytes + at, data, (size_t)len);
  bl->len = at + (size_t)len;
  bl->hash[bl->n] = h;
  bl->placed[bl->n++] = (cp_moved){0, len, (int64_t)at};
  *to = (int64_t)at;
  return TS_OK;
}

/* Every weights offset program p refers to, through its remap. */
static int remap_program(const cp_program *p, blob *bl, cp_remap *r) {
  const ts_graph *g = p->g;
  int n_refs = p->n_args + p->n_copies;
  r->moved = calloc((size_t)n_refs + 1, sizeof *r->moved);
  if (!r->moved) return TS_ENOMEM;
  for (int k = 0; k < n_refs; k++) {
    const cp_ref *ref =
        k < p->n_args ? &p->args[k] : &p->copies[k - p->n_args].src;
    if (ref->kind != CP_WEIGHT) continue;
    bool known = false;
    for (int i = 0; i < r->n && !known; i++)
      known = ref->offset >= r->moved[i].from &&
              ref->offset <
                  r->moved[i].from + (r->moved[i].len ? r->moved[i].len : 1);
    if (known) continue;
    const gr_value *val = constant_at(g, ref->offset);
    if (!val) return TS_EINTERNAL;
    int64_t len =
        gr_value_elems(val) * (int64_t)ts_dtype_elem_bytes(val->dtype);
    int64_t to = 0;
    int rc = place(bl, g->consts + val->const_off, len, &to);
    if (rc) return rc;
    r->moved[r->n++] = (cp_moved){val->const_off, len, to};
  }
  qsort(r->moved, (size_t)r->n, sizeof *r->moved, cmp_moved);
  return TS_OK;
}

int cp_write_shared_weights(const cp_program *const *ps, int n, const char *dir,
                            cp_remap *remaps, ts_error *err) {
  blob bl;
  memset(&bl, 0, sizeof bl);
  int rc = TS_OK;
  for (int b = 0; !rc && b < n; b++) rc = remap_program(ps[b], &bl, &remaps[b]);
  if (rc == TS_EINTERNAL)
    rc = TS_ERR(err, rc, "compile: a weights reference outside every constant");
  else if (rc)
    rc = TS_ERR(err, TS_ENOMEM, "compile: out of memory for the weights");
  if (!rc) rc = cp_write_weights_blob(dir, bl.bytes, bl.len, NULL, 0, err);
  free(bl.bytes);
  free(bl.hash);
  free(bl.placed);
  return rc;
}

int64_t cp_remap_offset(const cp_remap *r, int64_t offset) {
  if (!r) return offset;
  int lo = 0, hi = r->n - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    const cp_moved *m = &r->moved[mid];
    if (offset < m->from)
      hi = mid - 1;
    else if (offset >= m->from + (m->len ? m->len : 1))
      lo = mid + 1;
    else
      return m->to + (offset - m->from);
  }
  return offset; /* not a moved constant: cannot happen after remap */
}

void cp_remap_free(cp_remap *r) {
  free(r->moved);
  memset(r, 0, sizeof *r);
}
