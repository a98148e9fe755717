/*
 * args.c — argument set-up for running a kernel on the host: one
 * 64-byte-aligned buffer per argument, inputs filled from a seeded generator
 * (ts_host_fill_random), outputs zeroed, and the comparison of outputs with
 * a reference run using the per-dtype tolerance of ts_host_compare.
 */
#include "runtime/internal.h"
#include "tir/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ts_rt_args {
  int n;
  ts_rt_arg_spec *specs; /* n */
  void **data;           /* n, each from ts_rt_alloc */
  int64_t *elems;        /* n */
  size_t *bytes;         /* n */
};

/* Describes spec as "float32[4, 8]" into buf. */
static const char *spec_str(const ts_rt_arg_spec *s, char *buf, size_t size) {
  char dt[32];
  int len = snprintf(buf, size, "%s[", ts_dtype_str(s->dtype, dt));
  for (int d = 0; d < s->ndim && len > 0 && (size_t)len < size; d++)
    len += snprintf(buf + len, size - (size_t)len, "%s%lld", d ? ", " : "",
                    (long long)s->shape[d]);
  if (len > 0 && (size_t)len < size)
    snprintf(buf + len, size - (size_t)len, "]");
  return buf;
}

/* Checks spec i and computes its element count and byte size. */
static int check_spec(const ts_rt_arg_spec *s, int i, int64_t *elems,
                      size_t *bytes, ts_error *err) {
  if (!ts_dtype_is_valid(s->dtype) || s->dtype.lanes != 1 ||
      ts_dtype_is_handle(s->dtype))
    return TS_ERR(err, TS_EINVAL,
                  "argument %d: dtype must be a valid scalar, not a handle", i);
  if (s->ndim < 0 || s->ndim > TS_RT_MAX_NDIM)
    return TS_ERR(err, TS_EINVAL, "argument %d: ndim %d is not in 0..%d", i,
                  s->ndim, TS_RT_MAX_NDIM);
  if (s->role != TS_RT_ARG_INPUT && s->role != TS_RT_ARG_OUTPUT)
    return TS_ERR(err, TS_EINVAL, "argument %d: bad role %d", i, (int)s->role);
  int64_t elem_bytes = (int64_t)ts_dtype_elem_bytes(s->dtype);
  int64_t n = 1;
  for (int d = 0; d < s->ndim; d++) {
    if (s->shape[d] < 0)
      return TS_ERR(err, TS_EINVAL, "argument %d: shape[%d] = %lld is negative",
                    i, d, (long long)s->shape[d]);
    if (s->shape[d] != 0 && n > TS_RT_MAX_ARG_BYTES / elem_bytes / s->shape[d])
      return TS_ERR(err, TS_ENOMEM,
                    "argument %d: the buffer exceeds the limit of %lld bytes",
                    i, (long long)TS_RT_MAX_ARG_BYTES);
    n *= s->shape[d];
  }
  *elems = n;
  *bytes = (size_t)(n * elem_bytes);
  return TS_OK;
}

void ts_rt_args_free(ts_rt_args *a) {
  if (!a) return;
  if (a->data)
    for (int i = 0; i < a->n; i++) ts_rt_free(NULL, a->data[i]);
  free(a->data);
  free(a->specs);
  free(a->elems);
  free(a->bytes);
  free(a);
}

int ts_rt_args_create(const ts_rt_arg_spec *specs, int n_specs, uint64_t seed,
                      ts_rt_args **out, ts_error *err) {
  if (n_specs < 0 || (n_specs > 0 && !specs))
    return TS_ERR(err, TS_EINVAL, "arguments: bad argument list (%d specs)",
                  n_specs);
  ts_rt_args *a = ts_calloc(1, sizeof *a);
  size_t m = n_specs > 0 ? (size_t)n_specs : 1;
  if (!a || !(a->specs = ts_calloc(m, sizeof *a->specs)) ||
      !(a->data = ts_calloc(m, sizeof *a->data)) ||
      !(a->elems = ts_calloc(m, sizeof *a->elems)) ||
      !(a->bytes = ts_calloc(m, sizeof *a->bytes))) {
    ts_rt_args_free(a);
    return TS_ERR(err, TS_ENOMEM, "arguments: out of memory");
  }
  a->n = n_specs;
  for (int i = 0; i < n_specs; i++) {
    int rc = check_spec(&specs[i], i, &a->elems[i], &a->bytes[i], err);
    if (rc) {
      ts_rt_args_free(a);
      return rc;
    }
    a->specs[i] = specs[i];
  }
  for (int i = 0; i < n_specs; i++) {
    a->data[i] = ts_rt_alloc(NULL, (int64_t)a->bytes[i], 64);
    if (!a->data[i]) {
      int rc = TS_ERR(err, TS_ENOMEM,
                      "arguments: cannot allocate %zu bytes for argument %d",
                      a->bytes[i], i);
      ts_rt_args_free(a);
      return rc;
    }
    if (specs[i].role == TS_RT_ARG_INPUT)
      ts_host_fill_random(a->data[i], specs[i].dtype, a->elems[i],
                          seed + (uint64_t)i);
    else
      memset(a->data[i], 0, a->bytes[i]);
  }
  *out = a;
  return TS_OK;
}

int ts_rt_args_count(const ts_rt_args *a) { return a->n; }

void *const *ts_rt_args_data(const ts_rt_args *a) { return a->data; }

const ts_rt_arg_spec *ts_rt_args_spec(const ts_rt_args *a, int i) {
  return &a->specs[i];
}

int64_t ts_rt_args_elems(const ts_rt_args *a, int i) { return a->elems[i]; }

size_t ts_rt_args_bytes(const ts_rt_args *a, int i) { return a->bytes[i]; }

void ts_rt_args_zero_outputs(ts_rt_args *a) {
  for (int i = 0; i < a->n; i++)
    if (a->specs[i].role == TS_RT_ARG_OUTPUT)
      memset(a->data[i], 0, a->bytes[i]);
}

static bool same_spec(const ts_rt_arg_spec *x, const ts_rt_arg_spec *y) {
  if (!ts_dtype_eq(x->dtype, y->dtype) || x->ndim != y->ndim ||
      x->role != y->role)
    return false;
  for (int d = 0; d < x->ndim; d++)
    if (x->shape[d] != y->shape[d]) return false;
  return true;
}

int ts_rt_args_compare(const ts_rt_args *got, const ts_rt_args *want,
                       ts_error *err) {
  if (got->n != want->n)
    return TS_ERR(err, TS_EINVAL,
                  "compare: argument lists differ (%d and %d arguments)",
                  got->n, want->n);
  char desc[256];
  for (int i = 0; i < got->n; i++)
    if (!same_spec(&got->specs[i], &want->specs[i]))
      return TS_ERR(err, TS_EINVAL,
                    "compare: argument %d differs (%s %s against %s)", i,
                    got->specs[i].role == TS_RT_ARG_OUTPUT ? "output" : "input",
                    spec_str(&got->specs[i], desc, sizeof desc),
                    spec_str(&want->specs[i], (char[256]){0}, 256));
  for (int i = 0; i < got->n; i++) {
    const ts_rt_arg_spec *s = &got->specs[i];
    if (s->role != TS_RT_ARG_OUTPUT) continue;
    int64_t first = -1;
    double max_err = 0;
    int64_t bad = ts_host_compare(got->data[i], want->data[i], s->dtype,
                                  got->elems[i], &first, &max_err);
    if (bad > 0)
      return TS_ERR(err, TS_ERANGE,
                    "output %d %s: %lld of %lld elements differ from the "
                    "reference; first at index %lld: got %.9g, want %.9g "
                    "(largest absolute error %.9g)",
                    i, spec_str(s, desc, sizeof desc), (long long)bad,
                    (long long)got->elems[i], (long long)first,
                    ts_host_get(got->data[i], s->dtype, first),
                    ts_host_get(want->data[i], s->dtype, first), max_err);
  }
  return TS_OK;
}
