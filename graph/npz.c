/*
 * npz.c — numpy's array files: the .npy format (a magic string, a version,
 * a Python-dict header with descr, fortran_order and shape, then the raw
 * little-endian data) parsed and written here, and the .npz archive around
 * them (a zip of NAME.npy entries) through libzip. Every header field is
 * checked against the entry's size before any data is trusted.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>

#define MAX_ARRAYS 1024

typedef struct npz_array {
  char *name;
  ts_graph_tensor t;
} npz_array;

struct ts_graph_npz {
  npz_array *arrays;
  int n;
};

static const struct {
  const char *descr;
  ts_dtype dtype;
} descrs[] = {
    {"<f4", TS_FLOAT32}, {"<f8", TS_FLOAT64}, {"<f2", TS_FLOAT16},
    {"<i8", TS_INT64},   {"<i4", TS_INT32},   {"<i2", TS_INT16},
    {"|i1", TS_INT8},    {"<u8", TS_UINT64},  {"<u4", TS_UINT32},
    {"<u2", TS_UINT16},  {"|u1", TS_UINT8},   {"|b1", TS_BOOL},
};

/* Parses an .npy image; t->data points into a new malloc'd copy. */
static int parse_npy(const char *entry, const uint8_t *p, size_t len,
                     ts_graph_tensor *t, ts_error *err) {
  if (len < 10 || memcmp(p, "\x93NUMPY", 6))
    return TS_ERR(err, TS_EINVAL, "'%s': not an .npy array", entry);
  size_t hlen, start;
  if (p[6] == 1) {
    hlen = (size_t)p[8] | (size_t)p[9] << 8;
    start = 10;
  } else if ((p[6] == 2 || p[6] == 3) && len >= 12) {
    hlen = (size_t)p[8] | (size_t)p[9] << 8 | (size_t)p[10] << 16 |
           (size_t)p[11] << 24;
    start = 12;
  } else
    return TS_ERR(err, TS_EINVAL, "'%s': .npy version %d", entry, p[6]);
  if (hlen > len - start || hlen > 65536)
    return TS_ERR(err, TS_EINVAL, "'%s': header runs past the end", entry);
  char header[65537];
  memcpy(header, p + start, hlen);
  header[hlen] = 0;
  const char *d = strstr(header, "'descr':");
  const char *f = strstr(header, "'fortran_order':");
  const char *s = strstr(header, "'shape':");
  if (!d || !f || !s)
    return TS_ERR(err, TS_EINVAL, "'%s': header lacks descr/shape", entry);
  d = strchr(d + 8, '\'');
  bool found = false;
  for (size_t i = 0; d && i < sizeof descrs / sizeof descrs[0]; i++)
    if (!strncmp(d + 1, descrs[i].descr, 3) && d[4] == '\'') {
      t->dtype = descrs[i].dtype;
      found = true;
    }
  if (!found)
    return TS_ERR(err, TS_EINVAL, "'%s': unsupported dtype in header '%s'",
                  entry, header);
  f += 16;
  while (*f == ' ') f++;
  if (strncmp(f, "False", 5))
    return TS_ERR(err, TS_EINVAL, "'%s': Fortran order is not supported",
                  entry);
  s = strchr(s, '(');
  if (!s) return TS_ERR(err, TS_EINVAL, "'%s': bad shape", entry);
  s++;
  t->ndim = 0;
  int64_t elems = 1;
  while (*s && *s != ')') {
    while (*s == ' ' || *s == ',') s++;
    if (*s == ')') break;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (end == s || v < 0 || t->ndim >= TS_MAX_DIMS ||
        (v && elems > (1ll << 40) / v))
      return TS_ERR(err, TS_EINVAL, "'%s': bad shape in header '%s'", entry,
                    header);
    t->shape[t->ndim++] = v;
    elems *= v;
    s = end;
  }
  size_t bytes = (size_t)elems * ts_dtype_elem_bytes(t->dtype);
  if (len - start - hlen != bytes)
    return TS_ERR(err, TS_EINVAL,
                  "'%s': %zu data bytes for a shape needing %zu", entry,
                  len - start - hlen, bytes);
  t->data = ts_malloc(bytes ? bytes : 1);
  if (!t->data) return TS_ERR(err, TS_ENOMEM, "'%s'", entry);
  memcpy(t->data, p + start + hlen, bytes);
  return TS_OK;
}

void ts_graph_npz_free(ts_graph_npz *z) {
  if (!z) return;
  for (int i = 0; i < z->n; i++) {
    free(z->arrays[i].name);
    free(z->arrays[i].t.data);
  }
  free(z->arrays);
  free(z);
}

int ts_graph_npz_read(const char *path, ts_graph_npz **out, ts_error *err) {
  *out = NULL;
  int zerr = 0;
  zip_t *za = zip_open(path, ZIP_RDONLY, &zerr);
  if (!za) {
    zip_error_t ze;
    zip_error_init_with_code(&ze, zerr);
    int rc = TS_ERR(err, TS_EIO, "cannot open '%s': %s", path,
                    zip_error_strerror(&ze));
    zip_error_fini(&ze);
    return rc;
  }
  zip_int64_t n = zip_get_num_entries(za, 0);
  ts_graph_npz *z = ts_calloc(1, sizeof *z);
  if (!z || n < 0 || n > MAX_ARRAYS) {
    zip_close(za);
    free(z);
    return TS_ERR(err, TS_EINVAL, "'%s': %lld entries", path, (long long)n);
  }
  z->arrays = ts_calloc((size_t)n + 1, sizeof *z->arrays);
  int rc = z->arrays ? TS_OK : TS_ERR(err, TS_ENOMEM, "'%s'", path);
  for (zip_int64_t i = 0; i < n && !rc; i++) {
    zip_stat_t st;
    if (zip_stat_index(za, (zip_uint64_t)i, 0, &st) != 0 ||
        !(st.valid & ZIP_STAT_SIZE) || !(st.valid & ZIP_STAT_NAME) ||
        st.size > (1ull << 36)) {
      rc = TS_ERR(err, TS_EINVAL, "'%s': entry %lld unreadable", path,
                  (long long)i);
      break;
    }
    size_t nl = strlen(st.name);
    if (nl < 5 || strcmp(st.name + nl - 4, ".npy")) continue;
    uint8_t *buf = ts_malloc(st.size ? st.size : 1);
    zip_file_t *zf = zip_fopen_index(za, (zip_uint64_t)i, 0);
    if (!buf) {
      rc = TS_ERR(err, TS_ENOMEM, "'%s': entry '%s': out of memory", path,
                  st.name);
    } else if (!zf || zip_fread(zf, buf, st.size) != (zip_int64_t)st.size) {
      rc = TS_ERR(err, TS_EIO, "'%s': cannot read entry '%s'", path, st.name);
    } else {
      npz_array *a = &z->arrays[z->n];
      rc = parse_npy(st.name, buf, st.size, &a->t, err);
      if (!rc && !(a->name = ts_strndup(st.name, nl - 4))) {
        free(a->t.data);
        rc = TS_ERR(err, TS_ENOMEM, "'%s': out of memory", path);
      }
      if (!rc) {
        a->t.name = a->name;
        z->n++;
      }
    }
    if (zf) zip_fclose(zf);
    free(buf);
  }
  zip_discard(za);
  if (rc) {
    ts_graph_npz_free(z);
    return rc;
  }
  *out = z;
  return TS_OK;
}

int ts_graph_npz_find(const ts_graph_npz *z, const char *name,
                      ts_graph_tensor *t, ts_error *err) {
  for (int i = 0; i < z->n; i++)
    if (!strcmp(z->arrays[i].name, name)) {
      *t = z->arrays[i].t;
      return TS_OK;
    }
  char have[512] = "";
  for (int i = 0; i < z->n; i++) {
    size_t k = strlen(have);
    snprintf(have + k, sizeof have - k, "%s'%s'", i ? ", " : "",
             z->arrays[i].name);
  }
  return TS_ERR(err, TS_ENOTFOUND, "no array '%s' (the file has %s)", name,
                z->n ? have : "none");
}

/* An .npy image of t (malloc'd, length in *len). */
static uint8_t *npy_image(const ts_graph_tensor *t, size_t *len) {
  const char *descr = NULL;
  for (size_t i = 0; i < sizeof descrs / sizeof descrs[0]; i++)
    if (ts_dtype_eq(descrs[i].dtype, t->dtype)) descr = descrs[i].descr;
  if (!descr) return NULL;
  char header[512];
  int k = snprintf(header, sizeof header,
                   "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
  int64_t elems = 1;
  for (int i = 0; i < t->ndim; i++) {
    k += snprintf(header + k, sizeof header - (size_t)k, "%lld%s",
                  (long long)t->shape[i],
                  t->ndim == 1      ? ","
                  : i + 1 < t->ndim ? ", "
                                    : "");
    elems *= t->shape[i];
  }
  k += snprintf(header + k, sizeof header - (size_t)k, "), }");
  size_t total = 10 + (size_t)k + 1;
  size_t pad = (64 - total % 64) % 64;
  size_t hlen = (size_t)k + pad + 1;
  size_t bytes = (size_t)elems * ts_dtype_elem_bytes(t->dtype);
  uint8_t *p = ts_malloc(10 + hlen + bytes);
  if (!p) return NULL;
  memcpy(p, "\x93NUMPY\x01\x00", 8);
  p[8] = (uint8_t)(hlen & 255);
  p[9] = (uint8_t)(hlen >> 8);
  memcpy(p + 10, header, (size_t)k);
  memset(p + 10 + k, ' ', pad);
  p[10 + hlen - 1] = '\n';
  memcpy(p + 10 + hlen, t->data, bytes);
  *len = 10 + hlen + bytes;
  return p;
}

int ts_graph_npz_write(const char *path, const ts_graph_tensor *tensors, int n,
                       ts_error *err) {
  int zerr = 0;
  zip_t *za = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &zerr);
  if (!za) return TS_ERR(err, TS_EIO, "cannot create '%s'", path);
  int rc = TS_OK;
  for (int i = 0; i < n && !rc; i++) {
    size_t len;
    uint8_t *img = npy_image(&tensors[i], &len);
    if (!img) {
      rc = TS_ERR(err, TS_EINVAL, "'%s': cannot encode array '%s'", path,
                  tensors[i].name);
      break;
    }
    /* libzip frees the buffer with the source (freep = 1) */
    zip_source_t *src = zip_source_buffer(za, img, len, 1);
    char entry[512];
    snprintf(entry, sizeof entry, "%s.npy", tensors[i].name);
    if (!src || zip_file_add(za, entry, src, ZIP_FL_OVERWRITE) < 0) {
      if (src)
        zip_source_free(src);
      else
        free(img);
      rc = TS_ERR(err, TS_EIO, "'%s': cannot add '%s'", path, entry);
    }
  }
  if (rc) {
    zip_discard(za);
    return rc;
  }
  if (zip_close(za) != 0) {
    rc = TS_ERR(err, TS_EIO, "cannot write '%s': %s", path, zip_strerror(za));
    zip_discard(za);
  }
  return rc;
}
