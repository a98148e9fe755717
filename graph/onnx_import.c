/*
 * onnx_import.c — ONNX models into the graph IR. The protobuf is decoded by
 * the protobuf-c code generated at build time from the onnx.proto that
 * Debian's libonnx-dev ships; this file only walks the decoded messages:
 * the opset check (default domain, opsets 7-21; upgrade.c brings the
 * forms of opsets before 13 to theirs), graph inputs (initializers
 * listed as inputs are skipped; symbolic dimensions are fixed by the
 * caller's input shapes or refused), initializers and Constant nodes into
 * the constant store (raw, typed or external data), nodes with their
 * attributes, and the graph outputs. Every check is made on the outside
 * input before it is trusted: sizes against the limits, raw byte counts
 * against shapes, external files against offsets and lengths, names before
 * use.
 */
#include "internal.h"

#include "onnx.pb-c.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DEFAULT_MAX_CONST_BYTES (64ull << 30)
#define DEFAULT_MAX_NODES 1000000
#define DEFAULT_MAX_ELEMS (1ll << 40)
#define MAX_MODEL_FILE_BYTES (2ll << 30) /* protobuf's own limit */

typedef struct name_map {
  const char **keys;
  int *vals;
  size_t cap, n;
} name_map;

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static int map_get(const name_map *m, const char *k) {
  if (!m->cap) return -1;
  for (size_t i = hash_str(k) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
    if (!m->keys[i]) return -1;
    if (!strcmp(m->keys[i], k)) return m->vals[i];
  }
}

/* false (the map unchanged) when out of memory */
static bool map_put(name_map *m, const char *k, int v) {
  if ((m->n + 1) * 2 > m->cap) {
    size_t ncap = m->cap ? m->cap * 2 : 256;
    const char **keys = ts_calloc(ncap, sizeof *keys);
    int *vals = ts_calloc(ncap, sizeof *vals);
    if (!keys || !vals) {
      free(keys);
      free(vals);
      return false;
    }
    for (size_t i = 0; i < m->cap; i++)
      if (m->keys[i]) {
        size_t j = hash_str(m->keys[i]) & (ncap - 1);
        while (keys[j]) j = (j + 1) & (ncap - 1);
        keys[j] = m->keys[i];
        vals[j] = m->vals[i];
      }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = ncap;
  }
  size_t i = hash_str(k) & (m->cap - 1);
  while (m->keys[i] && strcmp(m->keys[i], k)) i = (i + 1) & (m->cap - 1);
  if (!m->keys[i]) m->n++;
  m->keys[i] = k;
  m->vals[i] = v;
  return true;
}

/* protobuf-c allocates the unpacked model through tir/alloc.h too */
static void *pb_alloc(void *data, size_t size) {
  (void)data;
  return ts_malloc(size);
}
static void pb_free(void *data, void *p) {
  (void)data;
  free(p);
}
static ProtobufCAllocator pb_allocator = {pb_alloc, pb_free, NULL};

typedef struct importer {
  ts_graph *g;
  const ts_graph_import_options *opts;
  const char *base_dir;
  ts_graph_limits limits;
  name_map names; /* ONNX value name -> value id */
  ts_error *err;
} importer;

static int out_of_memory(importer *im) {
  return TS_ERR(im->err, TS_ENOMEM, "import: out of memory");
}

/* ONNX TensorProto.DataType -> dtype; false for types tessera cannot hold. */
static bool onnx_dtype(int32_t t, ts_dtype *out) {
  switch (t) {
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

/* Checks a shape against the limits; computes the element count. */
static int check_shape(importer *im, const char *what, const int64_t *dims,
                       size_t n, int64_t *elems) {
  if (n > TS_MAX_DIMS)
    return TS_ERR(im->err, TS_EUNSUPPORTED,
                  "%s: rank %zu is over the limit of %d", what, n, TS_MAX_DIMS);
  int64_t e = 1;
  for (size_t i = 0; i < n; i++) {
    if (dims[i] < 0)
      return TS_ERR(im->err, TS_EINVAL, "%s: negative dimension %lld", what,
                    (long long)dims[i]);
    if (dims[i] && e > im->limits.max_tensor_elems / dims[i]) {
      char shape[160];
      int k = 0;
      for (size_t j = 0; j < n && k < (int)sizeof shape - 24; j++)
        k += snprintf(shape + k, sizeof shape - (size_t)k, "%s%lld",
                      j ? ", " : "", (long long)dims[j]);
      return TS_ERR(im->err, TS_ENOMEM,
                    "%s: shape [%s] has more than %lld elements", what, shape,
                    (long long)im->limits.max_tensor_elems);
    }
    e *= dims[i];
  }
  *elems = e;
  return TS_OK;
}

static bool path_is_safe(const char *p) {
  if (!*p || p[0] == '/') return false;
  for (const char *s = p; *s;) {
    const char *e = strchr(s, '/');
    size_t n = e ? (size_t)(e - s) : strlen(s);
    if (n == 2 && s[0] == '.' && s[1] == '.') return false;
    if (!e) break;
    s = e + 1;
  }
  return true;
}

/* Reads external data into dst (bytes long). */
static int read_external(importer *im, const Onnx__TensorProto *t, void *dst,
                         size_t bytes) {
  const char *loc = NULL;
  long long off = 0, len = -1;
  for (size_t i = 0; i < t->n_external_data; i++) {
    const char *k = t->external_data[i]->key, *v = t->external_data[i]->value;
    if (!k || !v) continue;
    char *end;
    if (!strcmp(k, "location"))
      loc = v;
    else if (!strcmp(k, "offset") || !strcmp(k, "length")) {
      errno = 0;
      long long x = strtoll(v, &end, 10);
      if (errno || *end || x < 0)
        return TS_ERR(im->err, TS_EINVAL,
                      "initializer '%s': external data %s '%s' is not a "
                      "non-negative integer",
                      t->name ? t->name : "", k, v);
      if (!strcmp(k, "offset"))
        off = x;
      else
        len = x;
    }
  }
  const char *tname = t->name ? t->name : "";
  if (!loc)
    return TS_ERR(im->err, TS_EINVAL,
                  "initializer '%s': external data without a location", tname);
  if (!im->base_dir)
    return TS_ERR(im->err, TS_EINVAL,
                  "initializer '%s': external data '%s' but the model has no "
                  "folder",
                  tname, loc);
  if (!path_is_safe(loc))
    return TS_ERR(im->err, TS_EINVAL,
                  "initializer '%s': external data location '%s' must be a "
                  "relative path inside the model's folder",
                  tname, loc);
  if (len >= 0 && (size_t)len != bytes)
    return TS_ERR(im->err, TS_EINVAL,
                  "initializer '%s': external data length %lld, but its shape "
                  "needs %zu bytes",
                  tname, len, bytes);
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", im->base_dir, loc);
  FILE *f = fopen(path, "rb");
  if (!f)
    return TS_ERR(im->err, TS_EIO,
                  "initializer '%s': cannot open external data file '%s': %s",
                  tname, path, strerror(errno));
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || (long long)st.st_size < off ||
      (unsigned long long)(st.st_size - off) < bytes) {
    fclose(f);
    return TS_ERR(im->err, TS_EIO,
                  "initializer '%s': external data file '%s' is too short "
                  "(%zu bytes wanted at offset %lld)",
                  tname, path, bytes, off);
  }
  int rc = TS_OK;
  if (fseeko(f, (off_t)off, SEEK_SET) != 0 ||
      (bytes && fread(dst, 1, bytes, f) != bytes))
    rc = TS_ERR(im->err, TS_EIO, "initializer '%s': cannot read '%s'", tname,
                path);
  fclose(f);
  return rc;
}

/* A TensorProto into a new constant; *id gets the value. */
static int import_tensor(importer *im, const Onnx__TensorProto *t,
                         const char *name, int *id) {
  char what[300];
  snprintf(what, sizeof what, "initializer '%s'", name);
  ts_dtype dt;
  if (!t->has_data_type || !onnx_dtype(t->data_type, &dt))
    return TS_ERR(im->err, TS_EUNSUPPORTED, "%s: data type %d is not supported",
                  what, (int)t->data_type);
  if (t->segment)
    return TS_ERR(im->err, TS_EUNSUPPORTED, "%s: segmented tensors", what);
  int64_t elems = 0;
  int rc = check_shape(im, what, t->dims, t->n_dims, &elems);
  if (rc) return rc;
  size_t esz = ts_dtype_elem_bytes(dt);
  size_t bytes = (size_t)elems * esz;
  if (bytes > im->limits.max_constant_bytes ||
      im->g->consts_len + bytes > im->limits.max_constant_bytes)
    return TS_ERR(im->err, TS_ENOMEM, "%s: constants would exceed %llu bytes",
                  what, (unsigned long long)im->limits.max_constant_bytes);
  /* Validate the source before reserving. */
  bool external =
      t->has_data_location &&
      t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  size_t n_typed = 0;
  if (!external && !t->has_raw_data) {
    switch (t->data_type) {
    case 1: n_typed = t->n_float_data; break;
    case 7: n_typed = t->n_int64_data; break;
    case 11: n_typed = t->n_double_data; break;
    case 12:
    case 13: n_typed = t->n_uint64_data; break;
    default: n_typed = t->n_int32_data; break;
    }
    if (n_typed != (size_t)elems)
      return TS_ERR(im->err, TS_EINVAL,
                    "%s: %zu data values for a shape of %lld elements", what,
                    n_typed, (long long)elems);
  } else if (!external && t->raw_data.len != bytes)
    return TS_ERR(im->err, TS_EINVAL,
                  "%s: raw data has %zu bytes, the shape needs %zu", what,
                  t->raw_data.len, bytes);
  int n = gr_const_reserve(im->g, name, dt, (int)t->n_dims, t->dims);
  if (n < 0) return TS_ERR(im->err, TS_ENOMEM, "%s: out of memory", what);
  void *dst = gr_const_data(im->g, n);
  if (external) {
    rc = read_external(im, t, dst, bytes);
    if (rc) return rc;
  } else if (t->has_raw_data) {
    if (bytes) memcpy(dst, t->raw_data.data, bytes);
  } else {
    for (int64_t i = 0; i < elems; i++) {
      switch (t->data_type) {
      case 1: ((float *)dst)[i] = t->float_data[i]; break;
      case 7: ((int64_t *)dst)[i] = t->int64_data[i]; break;
      case 11: ((double *)dst)[i] = t->double_data[i]; break;
      case 12: ((uint32_t *)dst)[i] = (uint32_t)t->uint64_data[i]; break;
      case 13: ((uint64_t *)dst)[i] = t->uint64_data[i]; break;
      case 10:
      case 16:
      case 4:
      case 5: ((uint16_t *)dst)[i] = (uint16_t)t->int32_data[i]; break;
      case 6: ((int32_t *)dst)[i] = t->int32_data[i]; break;
      default: ((uint8_t *)dst)[i] = (uint8_t)t->int32_data[i]; break;
      }
    }
  }
  *id = n;
  return TS_OK;
}

static int parse_shape_option(importer *im, const char *opt, char *name,
                              size_t name_cap, int64_t *dims, int *ndim) {
  const char *eq = strrchr(opt, '=');
  if (!eq || eq == opt || (size_t)(eq - opt) >= name_cap)
    return TS_ERR(im->err, TS_EINVAL,
                  "input shape '%s': expected NAME=D1xD2x...", opt);
  memcpy(name, opt, (size_t)(eq - opt));
  name[eq - opt] = 0;
  *ndim = 0;
  const char *p = eq + 1;
  while (*p) {
    char *end;
    errno = 0;
    long long d = strtoll(p, &end, 10);
    if (end == p || errno || d <= 0 || d > (1ll << 31) || *ndim >= TS_MAX_DIMS)
      return TS_ERR(im->err, TS_EINVAL,
                    "input shape '%s': bad dimension list '%s'", opt, eq + 1);
    dims[(*ndim)++] = d;
    p = end;
    if (*p == 'x' || *p == 'X' || *p == ',')
      p++;
    else if (*p)
      return TS_ERR(im->err, TS_EINVAL,
                    "input shape '%s': bad dimension list '%s'", opt, eq + 1);
  }
  if (*ndim == 0)
    return TS_ERR(im->err, TS_EINVAL, "input shape '%s': no dimensions", opt);
  return TS_OK;
}

/* Parses a "SYMBOL=SIZE" option. */
static int parse_dim_option(importer *im, const char *opt, char *name,
                            size_t cap, int64_t *size) {
  const char *eq = strchr(opt, '=');
  char *end = NULL;
  errno = 0;
  long long v = eq ? strtoll(eq + 1, &end, 10) : 0;
  if (!eq || eq == opt || (size_t)(eq - opt) >= cap || end == eq + 1 || *end ||
      errno || v <= 0 || v > (1ll << 31))
    return TS_ERR(im->err, TS_EINVAL,
                  "--dim '%s': expected SYMBOL=SIZE with a positive size", opt);
  memcpy(name, opt, (size_t)(eq - opt));
  name[eq - opt] = 0;
  *size = v;
  return TS_OK;
}

/* The size of the named dynamic dimension `param`: from opts->dims, else
 * opts->default_dim (remembered as one of the graph's symbols); stays -1
 * when neither gives one. */
static int bind_dim(importer *im, const char *param, int64_t *dim) {
  im->g->named_dims = true;
  for (int k = 0; k < im->opts->n_dims; k++) {
    char name[256];
    int64_t v;
    int rc = parse_dim_option(im, im->opts->dims[k], name, sizeof name, &v);
    if (rc) return rc;
    if (!strcmp(name, param)) {
      *dim = v;
      return TS_OK;
    }
  }
  if (im->opts->default_dim <= 0) return TS_OK;
  *dim = im->opts->default_dim;
  ts_graph *g = im->g;
  for (int k = 0; k < g->n_syms; k++)
    if (!strcmp(g->sym_names[k], param)) return TS_OK;
  if (g->n_syms == TS_MAX_DIMS)
    return TS_ERR(im->err, TS_EUNSUPPORTED,
                  "more than %d named dynamic dimensions", TS_MAX_DIMS);
  if (!(g->sym_names[g->n_syms] = ts_arena_strdup(g->arena, param)))
    return out_of_memory(im);
  g->sym_sizes[g->n_syms++] = *dim;
  return TS_OK;
}

static int import_input(importer *im, const Onnx__ValueInfoProto *vi) {
  const char *name = vi->name ? vi->name : "";
  if (map_get(&im->names, name) >= 0) return TS_OK; /* an initializer */
  const Onnx__TypeProto *tp = vi->type;
  if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ||
      !tp->tensor_type)
    return TS_ERR(im->err, TS_EUNSUPPORTED, "graph input '%s' is not a tensor",
                  name);
  ts_dtype dt;
  if (!onnx_dtype(tp->tensor_type->elem_type, &dt))
    return TS_ERR(im->err, TS_EUNSUPPORTED,
                  "graph input '%s': data type %d is not supported", name,
                  (int)tp->tensor_type->elem_type);
  int64_t dims[TS_MAX_DIMS];
  bool fixed[TS_MAX_DIMS] = {false}; /* a size the model itself gives */
  int ndim = -1;
  const Onnx__TensorShapeProto *sp = tp->tensor_type->shape;
  if (sp) {
    if (sp->n_dim > TS_MAX_DIMS)
      return TS_ERR(im->err, TS_EUNSUPPORTED,
                    "graph input '%s': rank %zu is over %d", name, sp->n_dim,
                    TS_MAX_DIMS);
    ndim = (int)sp->n_dim;
    for (int i = 0; i < ndim; i++) {
      const Onnx__TensorShapeProto__Dimension *d = sp->dim[i];
      dims[i] =
          d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE
              ? d->dim_value
              : -1;
      fixed[i] = dims[i] >= 0;
      const char *param =
          d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM
              ? d->dim_param
              : NULL;
      if (dims[i] < 0 && param && param[0]) {
        int rc = bind_dim(im, param, &dims[i]);
        if (rc) return rc;
      }
    }
  }
  for (int k = 0; k < im->opts->n_input_shapes; k++) {
    char oname[256];
    int64_t odims[TS_MAX_DIMS];
    int ond = 0;
    int rc = parse_shape_option(im, im->opts->input_shapes[k], oname,
                                sizeof oname, odims, &ond);
    if (rc) return rc;
    if (strcmp(oname, name)) continue;
    if (ndim >= 0 && ond != ndim)
      return TS_ERR(im->err, TS_EINVAL,
                    "input shape for '%s' has rank %d, the model's input has "
                    "rank %d",
                    name, ond, ndim);
    for (int i = 0; i < ond; i++) {
      if (ndim >= 0 && fixed[i] && dims[i] != odims[i])
        return TS_ERR(im->err, TS_EINVAL,
                      "input shape for '%s': dimension %d is %lld in the "
                      "model, %lld given",
                      name, i, (long long)dims[i], (long long)odims[i]);
      dims[i] = odims[i];
    }
    ndim = ond;
  }
  if (ndim < 0)
    return TS_ERR(im->err, TS_EINVAL,
                  "graph input '%s' has no shape: give it with --input-shape "
                  "%s=D1xD2x...",
                  name, name);
  int64_t elems = 1;
  for (int i = 0; i < ndim; i++) {
    if (dims[i] < 0) {
      const Onnx__TensorShapeProto__Dimension *d = sp->dim[i];
      return TS_ERR(
          im->err, TS_EINVAL,
          "graph input '%s': dimension %d ('%s') is dynamic; give it a "
          "size with --dim %s=N or --input-shape %s=D1xD2x...",
          name, i,
          d->value_case ==
                      ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                  d->dim_param
              ? d->dim_param
              : "?",
          d->value_case ==
                      ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                  d->dim_param && d->dim_param[0]
              ? d->dim_param
              : "NAME",
          name);
    }
    if (dims[i] && elems > im->limits.max_tensor_elems / dims[i])
      return TS_ERR(im->err, TS_ENOMEM, "graph input '%s': too many elements",
                    name);
    elems *= dims[i];
  }
  int id = gr_value_add(im->g, name, dt, ndim, dims);
  if (id < 0) return out_of_memory(im);
  im->g->values[id].is_input = true;
  im->g->values[id].layout = gr_layout_for(ndim, ndim >= 3);
  if (!map_put(&im->names, im->g->values[id].name, id))
    return out_of_memory(im);
  return TS_OK;
}

/* The strings of a STRINGS attribute joined by commas (arena), NULL when
 * out of memory. */
static const char *join_strings(importer *im, const Onnx__AttributeProto *a) {
  size_t len = 1;
  for (size_t i = 0; i < a->n_strings; i++) len += a->strings[i].len + 1;
  char *s = ts_arena_alloc(im->g->arena, len);
  if (!s) return NULL;
  size_t at = 0;
  for (size_t i = 0; i < a->n_strings; i++) {
    if (i) s[at++] = ',';
    if (a->strings[i].len)
      memcpy(s + at, a->strings[i].data, a->strings[i].len);
    at += a->strings[i].len;
  }
  s[at] = 0;
  return s;
}

static int import_attr(importer *im, gr_node *n, const Onnx__AttributeProto *a,
                       const Onnx__NodeProto *np) {
  gr_attr at;
  memset(&at, 0, sizeof at);
  at.name = a->name ? a->name : "";
  switch (a->type) {
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
    at.kind = GR_ATTR_INT;
    at.i = a->i;
    break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
    at.kind = GR_ATTR_FLOAT;
    at.f = a->f;
    break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING: {
    at.kind = GR_ATTR_STRING;
    /* an empty string may come without data */
    at.s = a->s.data ? ts_arena_strndup(im->g->arena, (const char *)a->s.data,
                                        a->s.len)
                     : "";
    if (!at.s) return out_of_memory(im);
    break;
  }
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS:
    /* the recurrent operators' activations, kept as one string "f,g,h" */
    if (strcmp(at.name, "activations") || a->n_strings > 6 ||
        (strcmp(n->op, "LSTM") && strcmp(n->op, "GRU") && strcmp(n->op, "RNN")))
      goto unsupported;
    at.kind = GR_ATTR_STRING;
    at.s = join_strings(im, a);
    if (!at.s) return out_of_memory(im);
    break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
    if (a->n_ints > 4096) goto unsupported;
    at.kind = GR_ATTR_INTS;
    at.n = (int)a->n_ints;
    at.ints = a->ints;
    break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS: {
    if (a->n_floats > 4096) goto unsupported;
    at.kind = GR_ATTR_FLOATS;
    at.n = (int)a->n_floats;
    double *f = ts_arena_alloc(im->g->arena, sizeof *f * (a->n_floats + 1));
    if (!f) return out_of_memory(im);
    for (size_t i = 0; i < a->n_floats; i++) f[i] = a->floats[i];
    at.floats = f;
    break;
  }
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: {
    /* ConstantOfShape's value: one element, kept as a float and its ONNX
     * dtype code */
    if (strcmp(n->op, "ConstantOfShape") || strcmp(at.name, "value") || !a->t)
      goto unsupported;
    int id, rc = import_tensor(im, a->t, gr_fresh_name(im->g, "value"), &id);
    if (rc) return rc;
    const gr_value *v = &im->g->values[id];
    if (gr_value_elems(v) != 1)
      return TS_ERR(im->err, TS_EINVAL,
                    "node '%s' (ConstantOfShape): value has %lld elements, "
                    "not one",
                    n->name, (long long)gr_value_elems(v));
    at.kind = GR_ATTR_FLOAT;
    at.f = ts_host_get(gr_const_data(im->g, id), v->dtype, 0);
    gr_node_set_attr(im->g, n, at);
    at = (gr_attr){
        .name = "value_dtype", .kind = GR_ATTR_INT, .i = a->t->data_type};
    break;
  }
  default: goto unsupported;
  }
  gr_node_set_attr(im->g, n, at);
  return TS_OK;
unsupported:
  return TS_ERR(im->err, TS_EUNSUPPORTED,
                "node '%s' (%s, opset %d): attribute '%s' of type %d is not "
                "supported",
                np->name ? np->name : "", np->op_type ? np->op_type : "",
                im->g->opset, at.name, (int)a->type);
}

/* A Constant node becomes a constant value named after its output. */
static int import_constant(importer *im, const Onnx__NodeProto *np) {
  const char *out = np->output[0];
  int id = -1, rc = TS_OK;
  for (size_t i = 0; i < np->n_attribute && id < 0; i++) {
    const Onnx__AttributeProto *a = np->attribute[i];
    const char *an = a->name ? a->name : "";
    if (!strcmp(an, "value") && a->t) {
      rc = import_tensor(im, a->t, out, &id);
      if (rc) return rc;
    } else if (!strcmp(an, "value_float")) {
      float f = a->f;
      id = gr_const_add(im->g, out, TS_FLOAT32, 0, NULL, &f);
    } else if (!strcmp(an, "value_int")) {
      id = gr_const_add(im->g, out, TS_INT64, 0, NULL, &a->i);
    } else if (!strcmp(an, "value_ints")) {
      if (a->n_ints > (1u << 20)) break;
      int64_t d = (int64_t)a->n_ints;
      id = gr_const_add(im->g, out, TS_INT64, 1, &d, a->ints);
    } else if (!strcmp(an, "value_floats")) {
      if (a->n_floats > (1u << 20)) break;
      int64_t d = (int64_t)a->n_floats;
      id = gr_const_add(im->g, out, TS_FLOAT32, 1, &d, a->floats);
    }
  }
  if (id == TS_ENOMEM) return out_of_memory(im);
  if (id < 0)
    return TS_ERR(im->err, TS_EUNSUPPORTED,
                  "node '%s' (Constant, opset %d): no supported value "
                  "attribute",
                  np->name ? np->name : "", im->g->opset);
  if (!map_put(&im->names, im->g->values[id].name, id))
    return out_of_memory(im);
  return TS_OK;
}

static int import_node(importer *im, const Onnx__NodeProto *np, int index) {
  const char *op = np->op_type ? np->op_type : "";
  char fallback[64];
  snprintf(fallback, sizeof fallback, "%s_%d", op, index);
  const char *name = np->name && np->name[0] ? np->name : fallback;
  if (np->domain && np->domain[0] && strcmp(np->domain, "ai.onnx"))
    return TS_ERR(im->err, TS_EUNSUPPORTED,
                  "node '%s': operator '%s' of domain '%s' is not supported "
                  "(opset %d)",
                  name, op, np->domain, im->g->opset);
  if (!gr_op_known(op) && strcmp(op, "Constant") &&
      (strcmp(op, "Upsample") || im->g->opset > 9))
    return TS_ERR(im->err, TS_EUNSUPPORTED,
                  "node '%s': operator '%s' is not supported (opset %d)", name,
                  op, im->g->opset);
  if (np->n_input > 64 || np->n_output > 16 || np->n_output == 0)
    return TS_ERR(im->err, TS_EINVAL,
                  "node '%s' (%s): %zu inputs and %zu outputs", name, op,
                  np->n_input, np->n_output);
  for (size_t i = 0; i < np->n_output; i++)
    if (!np->output[i] || (!np->output[i][0] && np->n_output == 1) ||
        map_get(&im->names, np->output[i]) >= 0)
      return TS_ERR(im->err, TS_EINVAL,
                    "node '%s' (%s): output '%s' is empty or already defined",
                    name, op, np->output[i] ? np->output[i] : "");
  if (!strcmp(op, "Constant")) return import_constant(im, np);
  int ins[64], outs[16];
  for (size_t i = 0; i < np->n_input; i++) {
    const char *in = np->input[i] ? np->input[i] : "";
    if (!in[0]) {
      ins[i] = -1;
      continue;
    }
    ins[i] = map_get(&im->names, in);
    if (ins[i] < 0)
      return TS_ERR(im->err, TS_EINVAL,
                    "node '%s' (%s): input '%s' is not defined before it "
                    "(the graph must be in topological order)",
                    name, op, in);
  }
  size_t n_out = np->n_output;
  for (size_t i = 0; i < n_out; i++) {
    if (!np->output[i][0]) { /* an omitted optional output */
      outs[i] = gr_value_fresh(im->g, "unused", TS_FLOAT32, -1, NULL);
      if (outs[i] < 0) return out_of_memory(im);
      continue;
    }
    outs[i] = gr_value_add(im->g, np->output[i], TS_FLOAT32, -1, NULL);
    if (outs[i] < 0 ||
        !map_put(&im->names, im->g->values[outs[i]].name, outs[i]))
      return out_of_memory(im);
  }
  gr_node *n =
      gr_node_add(im->g, op, name, ins, (int)np->n_input, outs, (int)n_out);
  if (!n) return out_of_memory(im);
  for (size_t i = 0; i < np->n_attribute; i++) {
    int rc = import_attr(im, n, np->attribute[i], np);
    if (rc) return rc;
  }
  return im->g->opset < 13 ? gr_upgrade_node(im->g, n, im->err) : TS_OK;
}

static int import_model(importer *im, const Onnx__ModelProto *m) {
  int opset = -1;
  for (size_t i = 0; i < m->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto *o = m->opset_import[i];
    if (!o->domain || !o->domain[0] || !strcmp(o->domain, "ai.onnx"))
      opset = o->has_version ? (int)o->version : -1;
  }
  if (opset < 7 || opset > 21)
    return TS_ERR(im->err, TS_EUNSUPPORTED,
                  "the model's default-domain opset is %d; opsets 7 to 21 are "
                  "supported",
                  opset);
  im->g->opset = opset;
  const Onnx__GraphProto *gp = m->graph;
  if (!gp) return TS_ERR(im->err, TS_EINVAL, "the model has no graph");
  if ((int64_t)gp->n_node > im->limits.max_nodes)
    return TS_ERR(im->err, TS_ENOMEM, "the graph has %zu nodes (limit %lld)",
                  gp->n_node, (long long)im->limits.max_nodes);
  int rc;
  for (size_t i = 0; i < gp->n_initializer; i++) {
    const Onnx__TensorProto *t = gp->initializer[i];
    const char *name = t->name ? t->name : "";
    if (!name[0] || map_get(&im->names, name) >= 0)
      return TS_ERR(im->err, TS_EINVAL,
                    "initializer %zu: empty or repeated name '%s'", i, name);
    int id;
    if ((rc = import_tensor(im, t, name, &id))) return rc;
    if (!map_put(&im->names, im->g->values[id].name, id))
      return out_of_memory(im);
  }
  for (int k = 0; k < im->opts->n_input_shapes; k++) {
    char oname[256];
    int64_t odims[TS_MAX_DIMS];
    int ond = 0;
    if ((rc = parse_shape_option(im, im->opts->input_shapes[k], oname,
                                 sizeof oname, odims, &ond)))
      return rc;
    bool found = false;
    for (size_t i = 0; i < gp->n_input; i++)
      found =
          found || (gp->input[i]->name && !strcmp(gp->input[i]->name, oname));
    if (!found)
      return TS_ERR(im->err, TS_EINVAL,
                    "--input-shape names '%s', which is not a graph input",
                    oname);
  }
  for (int k = 0; k < im->opts->n_dims; k++) {
    char name[256];
    int64_t v;
    if ((rc = parse_dim_option(im, im->opts->dims[k], name, sizeof name, &v)))
      return rc;
    bool found = false;
    for (size_t i = 0; i < gp->n_input && !found; i++) {
      const Onnx__TypeProto *tp = gp->input[i]->type;
      const Onnx__TensorShapeProto *sp =
          tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE &&
                  tp->tensor_type
              ? tp->tensor_type->shape
              : NULL;
      for (size_t d = 0; sp && d < sp->n_dim && !found; d++)
        found = sp->dim[d]->value_case ==
                    ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                sp->dim[d]->dim_param && !strcmp(sp->dim[d]->dim_param, name);
    }
    if (!found)
      return TS_ERR(im->err, TS_EINVAL,
                    "--dim names '%s', which no graph input's dimension is "
                    "called",
                    name);
  }
  int n_inputs = 0;
  int *inputs = ts_arena_alloc(im->g->arena, sizeof(int) * (gp->n_input + 1));
  if (!inputs) return out_of_memory(im);
  for (size_t i = 0; i < gp->n_input; i++) {
    const char *name = gp->input[i]->name ? gp->input[i]->name : "";
    bool init = map_get(&im->names, name) >= 0;
    if ((rc = import_input(im, gp->input[i]))) return rc;
    if (!init) inputs[n_inputs++] = map_get(&im->names, name);
  }
  im->g->inputs = inputs;
  im->g->n_inputs = n_inputs;
  for (size_t i = 0; i < gp->n_node; i++)
    if ((rc = import_node(im, gp->node[i], (int)i))) return rc;
  if (gp->n_output == 0)
    return TS_ERR(im->err, TS_EINVAL, "the graph has no outputs");
  im->g->outputs =
      ts_arena_alloc(im->g->arena, sizeof(int) * (gp->n_output + 1));
  if (!im->g->outputs) return out_of_memory(im);
  for (size_t i = 0; i < gp->n_output; i++) {
    const char *name = gp->output[i]->name ? gp->output[i]->name : "";
    int id = map_get(&im->names, name);
    if (id < 0)
      return TS_ERR(im->err, TS_EINVAL,
                    "graph output '%s' is not produced by any node", name);
    im->g->outputs[im->g->n_outputs++] = id;
  }
  return TS_OK;
}

int ts_graph_import_onnx_bytes(const void *data, size_t len,
                               const char *base_dir,
                               const ts_graph_import_options *opts,
                               ts_graph **out, ts_error *err) {
  *out = NULL;
  ts_graph_import_options none;
  memset(&none, 0, sizeof none);
  importer im;
  memset(&im, 0, sizeof im);
  im.opts = opts ? opts : &none;
  im.base_dir = base_dir;
  im.err = err;
  im.limits = im.opts->limits;
  if (!im.limits.max_constant_bytes)
    im.limits.max_constant_bytes = DEFAULT_MAX_CONST_BYTES;
  if (!im.limits.max_nodes) im.limits.max_nodes = DEFAULT_MAX_NODES;
  if (!im.limits.max_tensor_elems)
    im.limits.max_tensor_elems = DEFAULT_MAX_ELEMS;
  unsigned long failures = ts_alloc_failures();
  Onnx__ModelProto *m =
      onnx__model_proto__unpack(&pb_allocator, len, (const uint8_t *)data);
  if (!m && failures != ts_alloc_failures())
    return TS_ERR(err, TS_ENOMEM, "import: out of memory");
  if (!m)
    return TS_ERR(err, TS_EPARSE,
                  "not a valid ONNX model: the protobuf message (%zu bytes) "
                  "is truncated or corrupt",
                  len);
  im.g = ts_graph_new(m->graph && m->graph->name ? m->graph->name : "model");
  int rc = im.g ? import_model(&im, m) : TS_ENOMEM;
  onnx__model_proto__free_unpacked(m, &pb_allocator);
  free(im.names.keys);
  free(im.names.vals);
  rc = gr_alloc_check(im.g, failures, rc, err, "import");
  if (rc) {
    ts_graph_free(im.g);
    return rc;
  }
  *out = im.g;
  return TS_OK;
}

int ts_graph_import_onnx(const char *path, const ts_graph_import_options *opts,
                         ts_graph **out, ts_error *err) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f)
    return TS_ERR(err, TS_EIO, "cannot open '%s': %s", path, strerror(errno));
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    fclose(f);
    return TS_ERR(err, TS_EIO, "'%s' is not a regular file", path);
  }
  if (st.st_size >= MAX_MODEL_FILE_BYTES) {
    fclose(f);
    return TS_ERR(err, TS_EINVAL,
                  "'%s' is %lld bytes; a model over 2 GB must keep its "
                  "weights as external data",
                  path, (long long)st.st_size);
  }
  size_t len = (size_t)st.st_size;
  uint8_t *buf = ts_malloc(len ? len : 1);
  if (!buf) {
    fclose(f);
    return TS_ERR(err, TS_ENOMEM, "'%s': out of memory", path);
  }
  if (len && fread(buf, 1, len, f) != len) {
    free(buf);
    fclose(f);
    return TS_ERR(err, TS_EIO, "cannot read '%s'", path);
  }
  fclose(f);
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash)
    *slash = 0;
  else
    snprintf(dir, sizeof dir, ".");
  int rc = ts_graph_import_onnx_bytes(buf, len, dir, opts, out, err);
  free(buf);
  if (rc && err && err->msg[0]) {
    char msg[sizeof err->msg + 512];
    snprintf(msg, sizeof msg, "%.500s: %s", path, err->msg);
    msg[sizeof err->msg - 1] = 0;
    memcpy(err->msg, msg, sizeof err->msg);
  }
  return rc;
}
