/*
 * test_dynamic.c — a model with a dynamic dimension imported at a padded
 * size (graph/dynamic.c): run on inputs padded with zeros and the length
 * n, its outputs cut back to n equal the model imported at n itself, for
 * a transformer's sequence (attention's softmax and contraction masked), a
 * CNN's batch (nothing to mask) and a sequence mean, max and softmax; what
 * padding cannot serve is refused naming the node.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* A deterministic input of value info v at the given shape. */
static void fill(ts_graph_tensor *t, const ts_graph_value_info *v,
                 const int64_t *shape, unsigned seed) {
  t->name = v->name;
  t->dtype = v->dtype;
  t->ndim = v->ndim;
  int64_t n = 1;
  for (int d = 0; d < v->ndim; d++) n *= (t->shape[d] = shape[d]);
  size_t es = ts_dtype_elem_bytes(v->dtype);
  t->data = calloc((size_t)n + 1, es);
  assert_non_null(t->data);
  for (int64_t i = 0; i < n; i++) {
    unsigned r = (unsigned)(i * 2654435761u) ^ (seed * 40503u);
    r = (r >> 7) % 97;
    if (ts_dtype_eq(v->dtype, TS_INT64)) /* token ids; a mask of ones */
      ((int64_t *)t->data)[i] = strstr(v->name, "mask") ? 1 : (int64_t)r;
    else
      ((float *)t->data)[i] = (float)r / 48.0f - 1.0f;
  }
}

/* Copies src (shape small) into dst (shape big, zeroed): every index of
 * src at the same index of dst. */
static void pad_copy(void *dst, const int64_t *big, const void *src,
                     const int64_t *small, int ndim, size_t es) {
  int64_t n = 1, idx[TS_MAX_DIMS] = {0};
  for (int d = 0; d < ndim; d++) n *= small[d];
  for (int64_t i = 0; i < n; i++) {
    int64_t off = 0;
    for (int d = 0; d < ndim; d++) off = off * big[d] + idx[d];
    memcpy((char *)dst + off * (int64_t)es, (const char *)src + i * (int64_t)es,
           es);
    for (int d = ndim - 1; d >= 0; d--) {
      if (++idx[d] < small[d]) break;
      idx[d] = 0;
    }
  }
}

/* The model at size n of its one dynamic dimension (other dims as `dims`)
 * against the padded graph at `size`, both through the passes up to
 * `after` (NULL: all, the calls run compiled; "winograd": before fusion,
 * every operator in the reference kernels). */
static void padded_matches(const char *model, const char *const *dims,
                           int n_dims, const char *sym, int64_t size, int64_t n,
                           const char *after) {
  char path[512], bind[64];
  snprintf(bind, sizeof bind, "%s=%lld", sym, (long long)n);
  const char *all[8];
  for (int i = 0; i < n_dims; i++) all[i] = dims[i];
  all[n_dims] = bind;
  ts_graph_import_options o = {0};
  o.dims = all;
  o.n_dims = n_dims + 1;
  ts_error err;
  ts_error_clear(&err);
  ts_graph *ref = NULL, *pad = NULL;
  if (ts_graph_import_onnx(model_path(model, path), &o, &ref, &err) ||
      ts_graph_run_passes(ref, after, &err))
    fail_msg("%s at %s: %s", model, bind, err.msg);
  o.n_dims = n_dims;
  if (ts_graph_import_padded(model_path(model, path), &o, size, after, &pad,
                             &err))
    fail_msg("%s padded to %lld: %s", model, (long long)size, err.msg);

  int ni = ts_graph_n_inputs(ref), no = ts_graph_n_outputs(ref);
  int pi = ts_graph_n_inputs(pad);
  assert_int_equal(ts_graph_n_outputs(pad), no);
  ts_graph_tensor in[8], pin[8], out[8], pout[8];
  memset(out, 0, sizeof out);
  memset(pout, 0, sizeof pout);
  for (int i = 0; i < ni; i++) {
    ts_graph_value_info v = ts_graph_input(ref, i);
    fill(&in[i], &v, v.shape, (unsigned)i + 1);
  }
  float length = (float)n;
  for (int i = 0; i < pi; i++) {
    ts_graph_value_info v = ts_graph_input(pad, i);
    if (!strncmp(v.name, TS_GRAPH_LENGTH_PREFIX,
                 strlen(TS_GRAPH_LENGTH_PREFIX))) {
      pin[i] = (ts_graph_tensor){.name = v.name,
                                 .dtype = TS_FLOAT32,
                                 .ndim = 1,
                                 .shape = {1},
                                 .data = &length};
      assert_int_equal(i, ni); /* after the model's own */
      continue;
    }
    assert_true(i < ni);
    unsigned axes = 0;
    assert_true(ts_graph_padded_axes(pad, false, i, &axes));
    for (int d = 0; d < v.ndim; d++)
      assert_int_equal(v.shape[d], (axes >> d) & 1 ? size : in[i].shape[d]);
    int64_t total = 1;
    for (int d = 0; d < v.ndim; d++) total *= v.shape[d];
    pin[i] =
        (ts_graph_tensor){.name = v.name, .dtype = v.dtype, .ndim = v.ndim};
    memcpy(pin[i].shape, v.shape, sizeof v.shape);
    pin[i].data = calloc((size_t)total + 1, ts_dtype_elem_bytes(v.dtype));
    pad_copy(pin[i].data, v.shape, in[i].data, in[i].shape, v.ndim,
             ts_dtype_elem_bytes(v.dtype));
  }
  if (ts_graph_execute(ref, TS_GRAPH_COMPILE, in, ni, out, no, &err) ||
      ts_graph_execute(pad, TS_GRAPH_COMPILE, pin, pi, pout, no, &err))
    fail_msg("%s: %s", model, err.msg);
  for (int k = 0; k < no; k++) {
    unsigned axes = 0;
    assert_true(ts_graph_padded_axes(pad, true, k, &axes));
    const ts_graph_tensor *r = &out[k], *p = &pout[k];
    assert_int_equal(r->ndim, p->ndim);
    int64_t total = 1;
    for (int d = 0; d < r->ndim; d++) {
      assert_int_equal(p->shape[d], (axes >> d) & 1 ? size : r->shape[d]);
      total *= r->shape[d];
    }
    float *cut = calloc((size_t)total + 1, sizeof *cut);
    /* the padded output's first n positions: copy back by index */
    int64_t idx[TS_MAX_DIMS] = {0};
    for (int64_t i = 0; i < total; i++) {
      int64_t off = 0;
      for (int d = 0; d < r->ndim; d++) off = off * p->shape[d] + idx[d];
      cut[i] = ((const float *)p->data)[off];
      for (int d = r->ndim - 1; d >= 0; d--) {
        if (++idx[d] < r->shape[d]) break;
        idx[d] = 0;
      }
    }
    double worst = 0;
    for (int64_t i = 0; i < total; i++) {
      double a = ((const float *)r->data)[i], b = cut[i];
      double e = fabs(a - b) / (1e-3 + fabs(a));
      if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
    }
    if (worst > 1e-4)
      fail_msg("%s at %s padded to %lld: output %d differs (%g)", model, bind,
               (long long)size, k, worst);
    free(cut);
    free(out[k].data);
    free(pout[k].data);
  }
  for (int i = 0; i < ni; i++) free(in[i].data);
  for (int i = 0; i < ni; i++) free(pin[i].data);
  ts_graph_free(ref);
  ts_graph_free(pad);
}

static void test_transformer_sequence(void **state) {
  (void)state;
  static const char *const dims[] = {"batch=1"};
  /* inside the bucket, at its edge, a size of one */
  /* the masks' semantics in the reference kernels (the compiled library
   * against onnxruntime is graph_dynamic_cli) */
  padded_matches("bert_small", dims, 1, "sequence", 16, 5, "winograd");
  padded_matches("bert_small", dims, 1, "sequence", 16, 16, "winograd");
  padded_matches("bert_small", dims, 1, "sequence", 16, 1, "winograd");
}

static void test_cnn_batch(void **state) {
  (void)state;
  padded_matches("dyn_cnn", NULL, 0, "batch", 4, 3, NULL);
  padded_matches("dyn_cnn", NULL, 0, "batch", 4, 1, "winograd");
}

static void test_reductions(void **state) {
  (void)state;
  /* compiled: the masks fused into the kernels */
  padded_matches("dyn_seq", NULL, 0, "seq", 12, 7, NULL);
  padded_matches("dyn_seq", NULL, 0, "seq", 12, 12, "winograd");
  /* the masks: a softmax's lowest float, a mean's scale by B / n */
  char path[512];
  ts_graph *g = NULL;
  ts_error err;
  assert_int_equal(ts_graph_import_padded(model_path("dyn_seq", path), NULL, 12,
                                          "cse", &g, &err),
                   TS_OK);
  char *text = ts_graph_print(g);
  assert_non_null(strstr(text, "PadMask"));
  assert_non_null(strstr(text, "fill=-inf"));
  assert_non_null(strstr(text, "input %" TS_GRAPH_LENGTH_PREFIX "seq"));
  free(text);
  ts_graph_free(g);
}

static void refused(const char *model, const char *const *dims, int n_dims,
                    const char *want) {
  char path[512];
  ts_graph_import_options o = {0};
  o.dims = dims;
  o.n_dims = n_dims;
  ts_graph *g = NULL;
  ts_error err;
  ts_error_clear(&err);
  assert_int_not_equal(
      ts_graph_import_padded(model_path(model, path), &o, 8, NULL, &g, &err),
      TS_OK);
  assert_null(g);
  if (!strstr(err.msg, want))
    fail_msg("%s: '%s' does not say '%s'", model, err.msg, want);
}

static void test_refusals(void **state) {
  (void)state;
  refused("dyn_concat", NULL, 0, "2*seq");   /* an expression of it */
  refused("dyn_strided", NULL, 0, "height"); /* no polynomial */
  static const char *const both[] = {"batch=1", "sequence=8"};
  refused("bert_small", both, 2, "no dynamic dimension");
  static const char *const batch[] = {"sequence=8"};
  /* the batch mixes nowhere, but the attention mask's reshape puts it
   * beside the sequence: fine; every position stays its own */
  char path[512];
  ts_graph *g = NULL;
  ts_error err;
  ts_graph_import_options o = {0};
  o.dims = batch;
  o.n_dims = 1;
  int rc = ts_graph_import_padded(model_path("bert_small", path), &o, 4, NULL,
                                  &g, &err);
  if (rc) fail_msg("bert_small with a dynamic batch: %s", err.msg);
  ts_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_transformer_sequence),
      cmocka_unit_test(test_cnn_batch),
      cmocka_unit_test(test_reductions),
      cmocka_unit_test(test_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
