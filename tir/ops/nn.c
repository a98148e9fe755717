/*
 * nn.c — neural-network operators on rows and elements: numerically stable
 * softmax, layer normalisation, elementwise add/mul/relu/gelu/sigmoid/tanh
 * over any shape, and row reductions (sum, max). Everything is computed in
 * the input dtype.
 */
#include "ops.h"

#include <math.h>

static const char *const row_axes[] = {"i", "j"};
static const char *const red_axes[] = {"i"};

/* A [N] stage reducing `src` [N, D] with r over a reduce axis `k`; the
 * value is f(src[i, k]) built by `value` (NULL = the load itself). */
static ts_buffer *row_reduce(ts_te *te, const char *name, ts_buffer *src,
                             ts_te_reducer r, int64_t N, int64_t D,
                             ts_expr *(*value)(ts_te *te, ts_expr *x,
                                               ts_expr *i, void *ctx),
                             void *ctx) {
  ts_te_stage *st = ts_te_compute(te, name, ts_buffer_dtype(src),
                                  (int64_t[]){N}, 1, red_axes);
  ts_expr *i = ts_te_axis(st, 0);
  ts_expr *k = ts_te_reduce_axis(st, "k", D);
  ts_expr *idx[] = {i, k};
  ts_expr *v = ts_te_load(te, src, idx, 2);
  if (value) v = value(te, v, i, ctx);
  return ts_te_set_reduce(st, r, v);
}

/* ---- softmax ---- */

/* maxelem[i] = max_k X[i,k]; exp[i,j] = exp(X[i,j] - maxelem[i]);
 * expsum[i] = sum_k exp[i,k]; Y[i,j] = exp[i,j] / expsum[i]. */
ts_func *op_build_softmax(const op_args *x, ts_error *err) {
  int64_t N = arg_int(x, "N"), D = arg_int(x, "D");
  ts_dtype dt = x->dtype;
  ts_te *te = ts_te_begin("softmax");
  ts_arena *a = ts_te_arena(te);
  ts_buffer *X = ts_te_placeholder(te, "X", dt, (int64_t[]){N, D}, 2);
  ts_buffer *mx = row_reduce(te, "maxelem", X, TS_TE_MAX, N, D, NULL, NULL);
  ts_te_stage *E = ts_te_compute(te, "exp", dt, (int64_t[]){N, D}, 2, row_axes);
  ts_expr *ei[] = {ts_te_axis(E, 0), ts_te_axis(E, 1)};
  ts_buffer *eb = ts_te_set_value(
      E,
      op_math(a, "exp",
              ts_sub(a, ts_te_load(te, X, ei, 2), ts_te_load(te, mx, ei, 1))));
  ts_buffer *sum = row_reduce(te, "expsum", eb, TS_TE_SUM, N, D, NULL, NULL);
  ts_te_stage *Y = ts_te_compute(te, "Y", dt, (int64_t[]){N, D}, 2, row_axes);
  ts_expr *yi[] = {ts_te_axis(Y, 0), ts_te_axis(Y, 1)};
  ts_buffer *yb = ts_te_set_value(
      Y, ts_div(a, ts_te_load(te, eb, yi, 2), ts_te_load(te, sum, yi, 1)));
  ts_buffer *params[] = {X, yb};
  return ts_te_finish(te, params, 2, err);
}

double op_flops_softmax(const op_args *x) {
  return 5.0 * (double)arg_int(x, "N") * (double)arg_int(x, "D");
}

/* ---- layer_norm ---- */

/* X[i,k] - X[i,0]: the row's elements shifted by its first one. */
static ts_expr *shifted(ts_te *te, ts_expr *v, ts_expr *i, void *ctx) {
  ts_arena *a = ts_te_arena(te);
  ts_expr *idx[] = {i, ts_index(a, 0)};
  return ts_sub(a, v, ts_te_load(te, ctx, idx, 2));
}

/* (X[i,k] - X[i,0])^2. */
static ts_expr *shifted_square(ts_te *te, ts_expr *v, ts_expr *i, void *ctx) {
  ts_arena *a = ts_te_arena(te);
  return ts_mul(a, shifted(te, v, i, ctx), shifted(te, v, i, ctx));
}

/* The statistics of a row from one read of it: two independent sums over
 * the row shifted by its first element s = X[i,0],
 *   x_sum[i] = sum_k (X[i,k] - s), sq_sum[i] = sum_k (X[i,k] - s)^2,
 * so mean[i] = s + x_sum[i]/D and the variance
 *   var = sq_sum[i]/D - (x_sum[i]/D)^2, clamped at 0;
 * rstd[i] = rsqrt(var + eps); Y[i,j] = (X[i,j] - mean[i]) * rstd[i] *
 * gamma[j] + beta[j]. The variance is the biased one (divided by D); eps =
 * 1e-5. The two sums read only X, so a schedule can compute both in one
 * loop over the row (fuse_siblings). The shift keeps the subtraction from
 * cancelling: its rounding error is about u * (var + (mean - s)^2) times
 * the summation's growth (u the dtype's unit roundoff), where the unshifted
 * form's is u * (var + mean^2) — a row whose mean is large against its
 * spread loses the unshifted variance entirely; a shifted row only when its
 * first element is an outlier of many deviations. */
ts_func *op_build_layer_norm(const op_args *x, ts_error *err) {
  int64_t N = arg_int(x, "N"), D = arg_int(x, "D");
  ts_dtype dt = x->dtype;
  ts_te *te = ts_te_begin("layer_norm");
  ts_arena *a = ts_te_arena(te);
  ts_buffer *X = ts_te_placeholder(te, "X", dt, (int64_t[]){N, D}, 2);
  ts_buffer *gamma = ts_te_placeholder(te, "gamma", dt, (int64_t[]){D}, 1);
  ts_buffer *beta = ts_te_placeholder(te, "beta", dt, (int64_t[]){D}, 1);
  ts_buffer *xs = row_reduce(te, "x_sum", X, TS_TE_SUM, N, D, shifted, X);
  ts_buffer *qs =
      row_reduce(te, "sq_sum", X, TS_TE_SUM, N, D, shifted_square, X);
  ts_te_stage *M = ts_te_compute(te, "mean", dt, (int64_t[]){N}, 1, red_axes);
  ts_expr *mi = ts_te_axis(M, 0);
  ts_expr *m0[] = {mi, ts_index(a, 0)};
  ts_buffer *mean =
      ts_te_set_value(M, ts_add(a, ts_te_load(te, X, m0, 2),
                                ts_div(a, ts_te_load(te, xs, &mi, 1),
                                       op_const(a, dt, (double)D))));
  ts_te_stage *R = ts_te_compute(te, "rstd", dt, (int64_t[]){N}, 1, red_axes);
  ts_expr *ri = ts_te_axis(R, 0);
  ts_expr *m1 =
      ts_div(a, ts_te_load(te, xs, &ri, 1), op_const(a, dt, (double)D));
  ts_expr *m1b =
      ts_div(a, ts_te_load(te, xs, &ri, 1), op_const(a, dt, (double)D));
  ts_expr *var = ts_sub(
      a, ts_div(a, ts_te_load(te, qs, &ri, 1), op_const(a, dt, (double)D)),
      ts_mul(a, m1, m1b));
  var = ts_max(a, var, op_const(a, dt, 0));
  ts_buffer *rstd = ts_te_set_value(
      R, op_math(a, "rsqrt", ts_add(a, var, op_const(a, dt, 1e-5))));
  ts_te_stage *Y = ts_te_compute(te, "Y", dt, (int64_t[]){N, D}, 2, row_axes);
  ts_expr *i = ts_te_axis(Y, 0), *j = ts_te_axis(Y, 1);
  ts_expr *xi[] = {i, j};
  ts_expr *v = ts_sub(a, ts_te_load(te, X, xi, 2), ts_te_load(te, mean, &i, 1));
  v = ts_mul(a, v, ts_te_load(te, rstd, &i, 1));
  v = ts_mul(a, v, ts_te_load(te, gamma, &j, 1));
  v = ts_add(a, v, ts_te_load(te, beta, &j, 1));
  ts_buffer *yb = ts_te_set_value(Y, v);
  ts_buffer *params[] = {X, gamma, beta, yb};
  return ts_te_finish(te, params, 4, err);
}

double op_flops_layer_norm(const op_args *x) {
  double n = (double)arg_int(x, "N"), d = (double)arg_int(x, "D");
  return 10.0 * n * d + 10.0 * n;
}

/* ---- elementwise ---- */

int op_check_elementwise(const op_args *x, ts_error *err) {
  bool float_only = arg_is(x, "op", "gelu") || arg_is(x, "op", "sigmoid") ||
                    arg_is(x, "op", "tanh");
  if (float_only && !ts_dtype_is_float(x->dtype)) {
    const op_value *v = arg_shape(x, "op");
    char buf[32];
    return TS_ERR(err, TS_EINVAL, "%s: op=%.*s needs a float dtype (dtype=%s)",
                  x->op->name, v->word_len, v->word,
                  ts_dtype_str(x->dtype, buf));
  }
  return TS_OK;
}

ts_func *op_build_elementwise(const op_args *x, ts_error *err) {
  const op_value *shape = arg_shape(x, "shape");
  int nd = shape->ndim;
  ts_dtype dt = x->dtype;
  bool binary = arg_is(x, "op", "add") || arg_is(x, "op", "mul");
  ts_te *te = ts_te_begin("elementwise");
  ts_arena *a = ts_te_arena(te);
  ts_buffer *A = ts_te_placeholder(te, binary ? "A" : "X", dt, shape->dims, nd);
  ts_buffer *B =
      binary ? ts_te_placeholder(te, "B", dt, shape->dims, nd) : NULL;
  ts_te_stage *Y = ts_te_compute(te, "Y", dt, shape->dims, nd, NULL);
  ts_expr *idx[TS_MAX_DIMS];
  for (int d = 0; d < nd; d++) idx[d] = ts_te_axis(Y, d);
  ts_expr *v = ts_te_load(te, A, idx, nd), *r;
  if (arg_is(x, "op", "add")) {
    r = ts_add(a, v, ts_te_load(te, B, idx, nd));
  } else if (arg_is(x, "op", "mul")) {
    r = ts_mul(a, v, ts_te_load(te, B, idx, nd));
  } else if (arg_is(x, "op", "relu")) {
    r = ts_max(a, v, op_const(a, dt, 0));
  } else if (arg_is(x, "op", "gelu")) {
    /* 0.5 * x * (1 + erf(x / sqrt(2))) */
    ts_expr *e = op_math(a, "erf", ts_div(a, v, op_const(a, dt, M_SQRT2)));
    r = ts_mul(a, ts_mul(a, op_const(a, dt, 0.5), v),
               ts_add(a, op_const(a, dt, 1.0), e));
  } else {
    r = op_math(a, arg_is(x, "op", "sigmoid") ? "sigmoid" : "tanh", v);
  }
  ts_buffer *yb = ts_te_set_value(Y, r);
  ts_buffer *params[] = {A, binary ? B : yb, yb};
  return ts_te_finish(te, params, binary ? 3 : 2, err);
}

double op_flops_elementwise(const op_args *x) {
  const op_value *shape = arg_shape(x, "shape");
  double n = 1;
  for (int d = 0; d < shape->ndim; d++) n *= (double)shape->dims[d];
  return n * (arg_is(x, "op", "gelu") ? 5.0 : 1.0);
}

/* ---- reduce ---- */

ts_func *op_build_reduce(const op_args *x, ts_error *err) {
  int64_t N = arg_int(x, "N"), D = arg_int(x, "D");
  ts_te *te = ts_te_begin("reduce");
  ts_buffer *X = ts_te_placeholder(te, "X", x->dtype, (int64_t[]){N, D}, 2);
  ts_buffer *Y =
      row_reduce(te, "Y", X, arg_is(x, "op", "max") ? TS_TE_MAX : TS_TE_SUM, N,
                 D, NULL, NULL);
  ts_buffer *params[] = {X, Y};
  return ts_te_finish(te, params, 2, err);
}

double op_flops_reduce(const op_args *x) {
  return (double)arg_int(x, "N") * (double)arg_int(x, "D");
}
