/*
 * linalg.c — the linear-algebra operators: matmul, batch_matmul and dense
 * (a matmul against transposed weights, plus an optional bias stage).
 * Inputs are cast to out_dtype before the multiply, so bfloat16/float16
 * products accumulate in float32 and int8/uint8 products in int32.
 */
#include "ops.h"

/* C[b, i, j] = sum_k A[b, i, k] * B[b, k, j] with optional transposed
 * storage of A ([.., K, M]) and B ([.., N, K]); batch < 0 means no batch
 * axis. */
static ts_func *build_matmul(const op_args *x, int64_t batch, const char *fn,
                             ts_error *err) {
  int64_t M = arg_int(x, "M"), N = arg_int(x, "N"), K = arg_int(x, "K");
  bool ta = arg_int(x, "transpose_a") != 0;
  bool tb = arg_int(x, "transpose_b") != 0;
  ts_dtype dt = x->dtype, ot = x->out_dtype;
  int nb = batch >= 0 ? 1 : 0;
  ts_te *te = ts_te_begin(fn);
  ts_arena *a = ts_te_arena(te);

  int64_t ashape[3], bshape[3], cshape[3];
  ashape[0] = bshape[0] = cshape[0] = batch;
  ashape[nb] = ta ? K : M;
  ashape[nb + 1] = ta ? M : K;
  bshape[nb] = tb ? N : K;
  bshape[nb + 1] = tb ? K : N;
  cshape[nb] = M;
  cshape[nb + 1] = N;
  ts_buffer *A = ts_te_placeholder(te, "A", dt, ashape, nb + 2);
  ts_buffer *B = ts_te_placeholder(te, "B", dt, bshape, nb + 2);
  static const char *const axes2[] = {"i", "j"};
  static const char *const axes3[] = {"b", "i", "j"};
  ts_te_stage *C =
      ts_te_compute(te, "C", ot, cshape, nb + 2, nb ? axes3 : axes2);
  ts_expr *i = ts_te_axis(C, nb), *j = ts_te_axis(C, nb + 1);
  ts_expr *k = ts_te_reduce_axis(C, "k", K);
  ts_expr *ai[3], *bi[3];
  if (nb) ai[0] = bi[0] = ts_te_axis(C, 0);
  ai[nb] = ta ? k : i;
  ai[nb + 1] = ta ? i : k;
  bi[nb] = tb ? j : k;
  bi[nb + 1] = tb ? k : j;
  ts_expr *prod = ts_mul(a, ts_cast(a, ot, ts_te_load(te, A, ai, nb + 2)),
                         ts_cast(a, ot, ts_te_load(te, B, bi, nb + 2)));
  ts_buffer *Cb = ts_te_set_reduce(C, TS_TE_SUM, prod);
  ts_buffer *params[] = {A, B, Cb};
  return ts_te_finish(te, params, 3, err);
}

ts_func *op_build_matmul(const op_args *x, ts_error *err) {
  return build_matmul(x, -1, "matmul", err);
}

double op_flops_matmul(const op_args *x) {
  return 2.0 * (double)arg_int(x, "M") * (double)arg_int(x, "N") *
         (double)arg_int(x, "K");
}

ts_func *op_build_batch_matmul(const op_args *x, ts_error *err) {
  return build_matmul(x, arg_int(x, "B"), "batch_matmul", err);
}

double op_flops_batch_matmul(const op_args *x) {
  return (double)arg_int(x, "B") * op_flops_matmul(x);
}

/* Y[i, j] = sum_k X[i, k] * W[j, k] (+ bias[j] in a second stage). */
ts_func *op_build_dense(const op_args *x, ts_error *err) {
  int64_t M = arg_int(x, "M"), N = arg_int(x, "N"), K = arg_int(x, "K");
  bool bias = arg_int(x, "bias") != 0;
  ts_dtype dt = x->dtype, ot = x->out_dtype;
  ts_te *te = ts_te_begin("dense");
  ts_arena *a = ts_te_arena(te);
  static const char *const axes[] = {"i", "j"};
  ts_buffer *X = ts_te_placeholder(te, "X", dt, (int64_t[]){M, K}, 2);
  ts_buffer *W = ts_te_placeholder(te, "W", dt, (int64_t[]){N, K}, 2);
  ts_buffer *Bias =
      bias ? ts_te_placeholder(te, "bias", ot, (int64_t[]){N}, 1) : NULL;
  ts_te_stage *D =
      ts_te_compute(te, bias ? "dense" : "Y", ot, (int64_t[]){M, N}, 2, axes);
  ts_expr *i = ts_te_axis(D, 0), *j = ts_te_axis(D, 1);
  ts_expr *k = ts_te_reduce_axis(D, "k", K);
  ts_expr *xi[] = {i, k}, *wi[] = {j, k};
  ts_expr *prod = ts_mul(a, ts_cast(a, ot, ts_te_load(te, X, xi, 2)),
                         ts_cast(a, ot, ts_te_load(te, W, wi, 2)));
  ts_buffer *Db = ts_te_set_reduce(D, TS_TE_SUM, prod);
  if (!bias) {
    ts_buffer *params[] = {X, W, Db};
    return ts_te_finish(te, params, 3, err);
  }
  ts_te_stage *Y = ts_te_compute(te, "Y", ot, (int64_t[]){M, N}, 2, axes);
  ts_expr *yi[] = {ts_te_axis(Y, 0), ts_te_axis(Y, 1)};
  ts_expr *bj[] = {yi[1]};
  ts_buffer *Yb = ts_te_set_value(
      Y, ts_add(a, ts_te_load(te, Db, yi, 2), ts_te_load(te, Bias, bj, 1)));
  ts_buffer *params[] = {X, W, Bias, Yb};
  return ts_te_finish(te, params, 4, err);
}

double op_flops_dense(const op_args *x) {
  double mn = (double)arg_int(x, "M") * (double)arg_int(x, "N");
  return 2.0 * mn * (double)arg_int(x, "K") + (arg_int(x, "bias") ? mn : 0.0);
}
