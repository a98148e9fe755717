/*
 * tensor.c — data-movement operators: transpose by a permutation, layout
 * transforms between NCHW, NHWC and NCHW16c, and constant (zero) padding;
 * plus the padding stage shared with the convolution family.
 */
#include "ops.h"

#include <string.h>

ts_buffer *op_pad_stage(ts_te *te, const char *name, ts_buffer *src,
                        const int64_t *before, const int64_t *after,
                        ts_expr *pad_value, const char *const *axis_names) {
  ts_arena *a = ts_te_arena(te);
  int nd = ts_buffer_ndim(src);
  int64_t shape[TS_MAX_DIMS];
  for (int d = 0; d < nd; d++)
    shape[d] = ts_buffer_dim(src, d) + before[d] + after[d];
  ts_te_stage *st =
      ts_te_compute(te, name, ts_buffer_dtype(src), shape, nd, axis_names);
  ts_expr *idx[TS_MAX_DIMS], *cond = NULL;
  for (int d = 0; d < nd; d++) {
    ts_expr *ax = ts_te_axis(st, d);
    idx[d] = ts_sub(a, ax, ts_index(a, before[d]));
    if (before[d] > 0) {
      ts_expr *c = ts_ge(a, ax, ts_index(a, before[d]));
      cond = cond ? ts_and(a, cond, c) : c;
    }
    if (after[d] > 0) {
      ts_expr *c = ts_lt(a, ax, ts_index(a, before[d] + ts_buffer_dim(src, d)));
      cond = cond ? ts_and(a, cond, c) : c;
    }
  }
  ts_expr *load = ts_te_load(te, src, idx, nd);
  return ts_te_set_value(st, cond ? op_if_then_else(a, cond, load, pad_value)
                                  : load);
}

/* ---- transpose ---- */

int op_check_transpose(const op_args *x, ts_error *err) {
  const op_value *shape = arg_shape(x, "shape"), *perm = arg_shape(x, "perm");
  if (perm->ndim != shape->ndim)
    return TS_ERR(err, TS_EINVAL, "%s: perm has rank %d but shape has rank %d",
                  x->op->name, perm->ndim, shape->ndim);
  bool seen[TS_MAX_DIMS] = {false};
  for (int d = 0; d < perm->ndim; d++) {
    int64_t p = perm->dims[d];
    if (p >= shape->ndim || seen[p])
      return TS_ERR(err, TS_EINVAL,
                    "%s: perm is not a permutation of 0..%d (entry %d is "
                    "%lld)",
                    x->op->name, shape->ndim - 1, d, (long long)p);
    seen[p] = true;
  }
  return TS_OK;
}

/* Y[a_0, ..., a_n-1] = X[b] with b[perm[d]] = a_d, so Y's dim d has X's
 * size shape[perm[d]] (numpy's transpose). */
ts_func *op_build_transpose(const op_args *x, ts_error *err) {
  const op_value *shape = arg_shape(x, "shape"), *perm = arg_shape(x, "perm");
  int nd = shape->ndim;
  ts_te *te = ts_te_begin("transpose");
  ts_buffer *X = ts_te_placeholder(te, "X", x->dtype, shape->dims, nd);
  int64_t yshape[TS_MAX_DIMS];
  for (int d = 0; d < nd; d++) yshape[d] = shape->dims[perm->dims[d]];
  ts_te_stage *Y = ts_te_compute(te, "Y", x->dtype, yshape, nd, NULL);
  ts_expr *idx[TS_MAX_DIMS];
  for (int d = 0; d < nd; d++) idx[perm->dims[d]] = ts_te_axis(Y, d);
  ts_buffer *yb = ts_te_set_value(Y, ts_te_load(te, X, idx, nd));
  ts_buffer *params[] = {X, yb};
  return ts_te_finish(te, params, 2, err);
}

/* ---- layout_transform ---- */

int op_check_layout_transform(const op_args *x, ts_error *err) {
  const op_value *src = arg_shape(x, "src"), *dst = arg_shape(x, "dst");
  if (src->word_len == dst->word_len &&
      memcmp(src->word, dst->word, (size_t)src->word_len) == 0)
    return TS_ERR(err, TS_EINVAL, "%s: dst=%.*s is the same layout as src",
                  x->op->name, dst->word_len, dst->word);
  int64_t C = arg_int(x, "C");
  if ((arg_is(x, "src", "NCHW16c") || arg_is(x, "dst", "NCHW16c")) &&
      C % 16 != 0)
    return TS_ERR(err, TS_EINVAL,
                  "%s: layout NCHW16c needs C divisible by 16 (C=%lld)",
                  x->op->name, (long long)C);
  return TS_OK;
}

/* The physical shape of logical (N, C, H, W) in `layout`; returns rank. */
static int layout_shape(const op_args *x, const char *key, int64_t *shape) {
  int64_t N = arg_int(x, "N"), C = arg_int(x, "C");
  int64_t H = arg_int(x, "H"), W = arg_int(x, "W");
  if (arg_is(x, key, "NHWC")) {
    memcpy(shape, (int64_t[]){N, H, W, C}, 4 * sizeof *shape);
    return 4;
  }
  if (arg_is(x, key, "NCHW16c")) {
    memcpy(shape, (int64_t[]){N, C / 16, H, W, 16}, 5 * sizeof *shape);
    return 5;
  }
  memcpy(shape, (int64_t[]){N, C, H, W}, 4 * sizeof *shape);
  return 4;
}

/* Y (dst layout) [...] = X (src layout) [...] through the logical index
 * (n, c, h, w); NCHW16c splits c into c / 16 and c % 16. */
ts_func *op_build_layout_transform(const op_args *x, ts_error *err) {
  int64_t xs[5], ys[5];
  int xn = layout_shape(x, "src", xs), yn = layout_shape(x, "dst", ys);
  ts_te *te = ts_te_begin("layout_transform");
  ts_arena *a = ts_te_arena(te);
  static const char *const nchw[] = {"n", "c", "h", "w"};
  static const char *const nhwc[] = {"n", "h", "w", "c"};
  static const char *const nchw16c[] = {"n", "co", "h", "w", "ci"};
  ts_buffer *X = ts_te_placeholder(te, "X", x->dtype, xs, xn);
  const char *const *axes = arg_is(x, "dst", "NHWC")      ? nhwc
                            : arg_is(x, "dst", "NCHW16c") ? nchw16c
                                                          : nchw;
  ts_te_stage *Y = ts_te_compute(te, "Y", x->dtype, ys, yn, axes);
  ts_expr *n = ts_te_axis(Y, 0), *c, *h, *w;
  if (arg_is(x, "dst", "NHWC")) {
    h = ts_te_axis(Y, 1);
    w = ts_te_axis(Y, 2);
    c = ts_te_axis(Y, 3);
  } else {
    h = ts_te_axis(Y, 2);
    w = ts_te_axis(Y, 3);
    c = ts_te_axis(Y, 1);
    if (arg_is(x, "dst", "NCHW16c"))
      c = ts_add(a, ts_mul(a, c, ts_index(a, 16)), ts_te_axis(Y, 4));
  }
  ts_expr *idx[5];
  if (arg_is(x, "src", "NHWC")) {
    ts_expr *i[] = {n, h, w, c};
    memcpy(idx, i, sizeof i);
  } else if (arg_is(x, "src", "NCHW16c")) {
    ts_expr *i[] = {n, ts_floordiv(a, c, ts_index(a, 16)), h, w,
                    ts_floormod(a, c, ts_index(a, 16))};
    memcpy(idx, i, sizeof i);
  } else {
    ts_expr *i[] = {n, c, h, w};
    memcpy(idx, i, sizeof i);
  }
  ts_buffer *yb = ts_te_set_value(Y, ts_te_load(te, X, idx, xn));
  ts_buffer *params[] = {X, yb};
  return ts_te_finish(te, params, 2, err);
}

/* ---- pad ---- */

int op_check_pad(const op_args *x, ts_error *err) {
  const op_value *shape = arg_shape(x, "shape");
  const char *keys[] = {"before", "after"};
  for (int i = 0; i < 2; i++) {
    const op_value *v = arg_shape(x, keys[i]);
    if (v->ndim != shape->ndim)
      return TS_ERR(err, TS_EINVAL, "%s: %s has rank %d but shape has rank %d",
                    x->op->name, keys[i], v->ndim, shape->ndim);
  }
  return TS_OK;
}

ts_func *op_build_pad(const op_args *x, ts_error *err) {
  const op_value *shape = arg_shape(x, "shape");
  ts_te *te = ts_te_begin("pad");
  ts_buffer *X = ts_te_placeholder(te, "X", x->dtype, shape->dims, shape->ndim);
  ts_buffer *Y = op_pad_stage(te, "Y", X, arg_shape(x, "before")->dims,
                              arg_shape(x, "after")->dims,
                              op_const(ts_te_arena(te), x->dtype, 0), NULL);
  ts_buffer *params[] = {X, Y};
  return ts_te_finish(te, params, 2, err);
}

double op_flops_zero(const op_args *x) {
  (void)x;
  return 0.0;
}
