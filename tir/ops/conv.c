/*
 * conv.c — the convolution family: conv2d in NCHW (weights OIHW) and NHWC
 * (weights HWIO, or with weight_block=B blocked [CO/B, KH, KW, CI, B] as
 * the graph compiler lays out a conv's constant weights) with stride,
 * padding, dilation and groups; depthwise
 * conv2d in NHWC (weights [KH, KW, C]); conv2d_transpose in NCHW (weights
 * [CI, CO, KH, KW]) as a gather over a zero-dilated, padded input with a
 * flipped kernel; and pool2d in NHWC (max or average). Padding is a
 * separate `pad` stage built with if_then_else so the guarded load is never
 * evaluated out of bounds.
 */
#include "ops.h"

#include <string.h>

/* Output size of a window of `k` taps (spaced `dil`) sliding with `stride`
 * over `in` + 2*pad; <= 0 when the window does not fit. */
static int64_t out_size(int64_t in, int64_t k, int64_t stride, int64_t pad,
                        int64_t dil) {
  int64_t span = dil * (k - 1) + 1, padded = in + 2 * pad;
  if (span > padded) return 0;
  return (padded - span) / stride + 1;
}

/* Checks that a KH x KW window (dilated) fits the padded H x W input. */
static int check_window(const op_args *x, int64_t dil, ts_error *err) {
  const char *op = x->op->name;
  int64_t H = arg_int(x, "H"), W = arg_int(x, "W");
  int64_t KH = arg_int(x, "KH"), KW = arg_int(x, "KW"), pad = arg_int(x, "pad");
  if (dil * (KH - 1) + 1 > H + 2 * pad)
    return TS_ERR(err, TS_EINVAL,
                  "%s: KH=%lld%s is larger than the padded input height "
                  "H+2*pad=%lld",
                  op, (long long)KH, dil > 1 ? " (dilated)" : "",
                  (long long)(H + 2 * pad));
  if (dil * (KW - 1) + 1 > W + 2 * pad)
    return TS_ERR(err, TS_EINVAL,
                  "%s: KW=%lld%s is larger than the padded input width "
                  "W+2*pad=%lld",
                  op, (long long)KW, dil > 1 ? " (dilated)" : "",
                  (long long)(W + 2 * pad));
  return TS_OK;
}

int op_check_conv2d(const op_args *x, ts_error *err) {
  int64_t CI = arg_int(x, "CI"), CO = arg_int(x, "CO");
  int64_t g = arg_int(x, "groups");
  if (CI % g != 0)
    return TS_ERR(err, TS_EINVAL, "%s: groups=%lld does not divide CI=%lld",
                  x->op->name, (long long)g, (long long)CI);
  if (CO % g != 0)
    return TS_ERR(err, TS_EINVAL, "%s: groups=%lld does not divide CO=%lld",
                  x->op->name, (long long)g, (long long)CO);
  int64_t B = arg_int(x, "weight_block");
  if (B > 0 && strcmp(x->op->name, "conv2d_nhwc"))
    return TS_ERR(err, TS_EINVAL,
                  "%s: weight_block=%lld: blocked weights are for conv2d_nhwc "
                  "only",
                  x->op->name, (long long)B);
  if (B > 0 && g != 1)
    return TS_ERR(err, TS_EINVAL,
                  "%s: weight_block=%lld needs groups=1, not %lld", x->op->name,
                  (long long)B, (long long)g);
  if (B > 0 && CO % B != 0)
    return TS_ERR(err, TS_EINVAL,
                  "%s: weight_block=%lld does not divide CO=%lld", x->op->name,
                  (long long)B, (long long)CO);
  return check_window(x, arg_int(x, "dilation"), err);
}

/* The input, padded by `pad` on both sides of the two spatial dims (h_dim,
 * h_dim + 1) when pad > 0. */
static ts_buffer *padded_input(ts_te *te, ts_buffer *data, int h_dim,
                               int64_t pad, ts_expr *pad_value,
                               const char *const *axes) {
  if (pad == 0) return data;
  int64_t before[4] = {0, 0, 0, 0};
  before[h_dim] = before[h_dim + 1] = pad;
  return op_pad_stage(te, "pad", data, before, before, pad_value, axes);
}

static ts_func *build_conv2d(const op_args *x, bool nhwc, ts_error *err) {
  int64_t N = arg_int(x, "N"), H = arg_int(x, "H"), W = arg_int(x, "W");
  int64_t CI = arg_int(x, "CI"), CO = arg_int(x, "CO");
  int64_t KH = arg_int(x, "KH"), KW = arg_int(x, "KW");
  int64_t S = arg_int(x, "stride"), P = arg_int(x, "pad");
  int64_t Dl = arg_int(x, "dilation"), G = arg_int(x, "groups");
  int64_t WB = nhwc ? arg_int(x, "weight_block") : 0;
  int64_t CIg = CI / G, COg = CO / G;
  int64_t OH = out_size(H, KH, S, P, Dl), OW = out_size(W, KW, S, P, Dl);
  ts_dtype dt = x->dtype, ot = x->out_dtype;
  ts_te *te = ts_te_begin(nhwc ? "conv2d_nhwc" : "conv2d_nchw");
  ts_arena *a = ts_te_arena(te);

  ts_buffer *data, *weight;
  static const char *const pad_nchw[] = {"n", "c", "h", "w"};
  static const char *const pad_nhwc[] = {"n", "h", "w", "c"};
  static const char *const out_nchw[] = {"n", "co", "h", "w"};
  static const char *const out_nhwc[] = {"n", "h", "w", "co"};
  if (nhwc) {
    data = ts_te_placeholder(te, "data", dt, (int64_t[]){N, H, W, CI}, 4);
    weight = WB > 0
                 ? ts_te_placeholder(te, "weight", dt,
                                     (int64_t[]){CO / WB, KH, KW, CIg, WB}, 5)
                 : ts_te_placeholder(te, "weight", dt,
                                     (int64_t[]){KH, KW, CIg, CO}, 4);
  } else {
    data = ts_te_placeholder(te, "data", dt, (int64_t[]){N, CI, H, W}, 4);
    weight =
        ts_te_placeholder(te, "weight", dt, (int64_t[]){CO, CIg, KH, KW}, 4);
  }
  ts_buffer *in = padded_input(te, data, nhwc ? 1 : 2, P, op_const(a, dt, 0),
                               nhwc ? pad_nhwc : pad_nchw);
  int64_t oshape[4] = {N, CO, OH, OW};
  if (nhwc) {
    oshape[1] = OH;
    oshape[2] = OW;
    oshape[3] = CO;
  }
  ts_te_stage *C =
      ts_te_compute(te, "conv", ot, oshape, 4, nhwc ? out_nhwc : out_nchw);
  ts_expr *n = ts_te_axis(C, 0);
  ts_expr *co = ts_te_axis(C, nhwc ? 3 : 1);
  ts_expr *h = ts_te_axis(C, nhwc ? 1 : 2), *w = ts_te_axis(C, nhwc ? 2 : 3);
  ts_expr *rc = NULL, *rh, *rw;
  if (!nhwc) rc = ts_te_reduce_axis(C, "rc", CIg);
  rh = ts_te_reduce_axis(C, "rh", KH);
  rw = ts_te_reduce_axis(C, "rw", KW);
  if (nhwc) rc = ts_te_reduce_axis(C, "rc", CIg);
  ts_expr *ci = rc;
  if (G > 1)
    ci = ts_add(
        a, ts_mul(a, ts_floordiv(a, co, ts_index(a, COg)), ts_index(a, CIg)),
        rc);
  ts_expr *ih =
      ts_add(a, ts_mul(a, h, ts_index(a, S)), ts_mul(a, rh, ts_index(a, Dl)));
  ts_expr *iw =
      ts_add(a, ts_mul(a, w, ts_index(a, S)), ts_mul(a, rw, ts_index(a, Dl)));
  ts_expr *di_nchw[] = {n, ci, ih, iw}, *di_nhwc[] = {n, ih, iw, ci};
  ts_expr *wi_nchw[] = {co, rc, rh, rw}, *wi_nhwc[] = {rh, rw, rc, co};
  ts_expr *wi_blocked[] = {ts_floordiv(a, co, ts_index(a, WB)), rh, rw, rc,
                           ts_floormod(a, co, ts_index(a, WB))};
  ts_expr *wload = WB > 0 ? ts_te_load(te, weight, wi_blocked, 5)
                          : ts_te_load(te, weight, nhwc ? wi_nhwc : wi_nchw, 4);
  ts_expr *prod =
      ts_mul(a, ts_cast(a, ot, ts_te_load(te, in, nhwc ? di_nhwc : di_nchw, 4)),
             ts_cast(a, ot, wload));
  ts_buffer *out = ts_te_set_reduce(C, TS_TE_SUM, prod);
  ts_buffer *params[] = {data, weight, out};
  return ts_te_finish(te, params, 3, err);
}

ts_func *op_build_conv2d_nchw(const op_args *x, ts_error *err) {
  return build_conv2d(x, false, err);
}

ts_func *op_build_conv2d_nhwc(const op_args *x, ts_error *err) {
  return build_conv2d(x, true, err);
}

double op_flops_conv2d(const op_args *x) {
  int64_t S = arg_int(x, "stride"), P = arg_int(x, "pad");
  int64_t Dl = arg_int(x, "dilation");
  double OH = (double)out_size(arg_int(x, "H"), arg_int(x, "KH"), S, P, Dl);
  double OW = (double)out_size(arg_int(x, "W"), arg_int(x, "KW"), S, P, Dl);
  double CIg = (double)(arg_int(x, "CI") / arg_int(x, "groups"));
  return 2.0 * (double)arg_int(x, "N") * OH * OW * (double)arg_int(x, "CO") *
         CIg * (double)arg_int(x, "KH") * (double)arg_int(x, "KW");
}

/* ---- depthwise ---- */

int op_check_depthwise(const op_args *x, ts_error *err) {
  return check_window(x, 1, err);
}

ts_func *op_build_depthwise(const op_args *x, ts_error *err) {
  int64_t N = arg_int(x, "N"), H = arg_int(x, "H"), W = arg_int(x, "W");
  int64_t C = arg_int(x, "C"), KH = arg_int(x, "KH"), KW = arg_int(x, "KW");
  int64_t S = arg_int(x, "stride"), P = arg_int(x, "pad");
  int64_t OH = out_size(H, KH, S, P, 1), OW = out_size(W, KW, S, P, 1);
  ts_dtype dt = x->dtype, ot = x->out_dtype;
  ts_te *te = ts_te_begin("depthwise_conv2d_nhwc");
  ts_arena *a = ts_te_arena(te);
  static const char *const pad_axes[] = {"n", "h", "w", "c"};
  ts_buffer *data =
      ts_te_placeholder(te, "data", dt, (int64_t[]){N, H, W, C}, 4);
  ts_buffer *weight =
      ts_te_placeholder(te, "weight", dt, (int64_t[]){KH, KW, C}, 3);
  ts_buffer *in = padded_input(te, data, 1, P, op_const(a, dt, 0), pad_axes);
  ts_te_stage *D = ts_te_compute(te, "depthwise_conv", ot,
                                 (int64_t[]){N, OH, OW, C}, 4, pad_axes);
  ts_expr *n = ts_te_axis(D, 0), *h = ts_te_axis(D, 1), *w = ts_te_axis(D, 2);
  ts_expr *c = ts_te_axis(D, 3);
  ts_expr *rh = ts_te_reduce_axis(D, "rh", KH);
  ts_expr *rw = ts_te_reduce_axis(D, "rw", KW);
  ts_expr *di[] = {n, ts_add(a, ts_mul(a, h, ts_index(a, S)), rh),
                   ts_add(a, ts_mul(a, w, ts_index(a, S)), rw), c};
  ts_expr *wi[] = {rh, rw, c};
  ts_expr *prod = ts_mul(a, ts_cast(a, ot, ts_te_load(te, in, di, 4)),
                         ts_cast(a, ot, ts_te_load(te, weight, wi, 3)));
  ts_buffer *out = ts_te_set_reduce(D, TS_TE_SUM, prod);
  ts_buffer *params[] = {data, weight, out};
  return ts_te_finish(te, params, 3, err);
}

double op_flops_depthwise(const op_args *x) {
  int64_t S = arg_int(x, "stride"), P = arg_int(x, "pad");
  double OH = (double)out_size(arg_int(x, "H"), arg_int(x, "KH"), S, P, 1);
  double OW = (double)out_size(arg_int(x, "W"), arg_int(x, "KW"), S, P, 1);
  return 2.0 * (double)arg_int(x, "N") * OH * OW * (double)arg_int(x, "C") *
         (double)arg_int(x, "KH") * (double)arg_int(x, "KW");
}

/* ---- conv2d_transpose ---- */

/* Output size of a transposed convolution: (in-1)*stride - 2*pad + k. */
static int64_t transpose_out(int64_t in, int64_t k, int64_t stride,
                             int64_t pad) {
  return (in - 1) * stride - 2 * pad + k;
}

int op_check_conv2d_transpose(const op_args *x, ts_error *err) {
  const char *op = x->op->name;
  int64_t KH = arg_int(x, "KH"), KW = arg_int(x, "KW"), P = arg_int(x, "pad");
  int64_t S = arg_int(x, "stride");
  if (P > KH - 1 || P > KW - 1)
    return TS_ERR(err, TS_EINVAL,
                  "%s: pad=%lld must be smaller than the kernel (KH=%lld, "
                  "KW=%lld)",
                  op, (long long)P, (long long)KH, (long long)KW);
  int64_t OH = transpose_out(arg_int(x, "H"), KH, S, P);
  int64_t OW = transpose_out(arg_int(x, "W"), KW, S, P);
  if (OH <= 0 || OW <= 0)
    return TS_ERR(err, TS_EINVAL,
                  "%s: output size %lldx%lld is not positive; reduce pad=%lld",
                  op, (long long)OH, (long long)OW, (long long)P);
  return TS_OK;
}

/* One spatial index of the dilated, padded input: position `i` maps to
 * input index (i - bp) / stride when it lies on the stride grid inside the
 * input; *ok gets that condition (NULL when always true). */
static ts_expr *dilated_index(ts_arena *a, ts_expr *i, int64_t bp,
                              int64_t stride, int64_t in, ts_expr **ok) {
  ts_expr *off = ts_sub(a, i, ts_index(a, bp));
  ts_expr *cond = NULL;
  if (bp > 0) cond = ts_ge(a, i, ts_index(a, bp));
  int64_t span = (in - 1) * stride + 1;
  if (bp > 0 || stride > 1) {
    ts_expr *hi = ts_lt(a, i, ts_index(a, bp + span));
    cond = cond ? ts_and(a, cond, hi) : hi;
  }
  if (stride > 1) {
    ts_expr *on =
        ts_eq(a, ts_floormod(a, off, ts_index(a, stride)), ts_index(a, 0));
    cond = cond ? ts_and(a, cond, on) : on;
    off = ts_floordiv(a, off, ts_index(a, stride));
  }
  *ok = cond;
  return off;
}

ts_func *op_build_conv2d_transpose(const op_args *x, ts_error *err) {
  int64_t N = arg_int(x, "N"), H = arg_int(x, "H"), W = arg_int(x, "W");
  int64_t CI = arg_int(x, "CI"), CO = arg_int(x, "CO");
  int64_t KH = arg_int(x, "KH"), KW = arg_int(x, "KW");
  int64_t S = arg_int(x, "stride"), P = arg_int(x, "pad");
  int64_t OH = transpose_out(H, KH, S, P), OW = transpose_out(W, KW, S, P);
  int64_t bph = KH - 1 - P, bpw = KW - 1 - P; /* gather padding */
  ts_dtype dt = x->dtype, ot = x->out_dtype;
  ts_te *te = ts_te_begin("conv2d_transpose_nchw");
  ts_arena *a = ts_te_arena(te);
  static const char *const pad_axes[] = {"n", "c", "h", "w"};
  static const char *const out_axes[] = {"n", "co", "h", "w"};
  ts_buffer *data =
      ts_te_placeholder(te, "data", dt, (int64_t[]){N, CI, H, W}, 4);
  ts_buffer *weight =
      ts_te_placeholder(te, "weight", dt, (int64_t[]){CI, CO, KH, KW}, 4);

  ts_buffer *in = data;
  if (S > 1 || bph > 0 || bpw > 0) {
    int64_t PH = (H - 1) * S + 1 + 2 * bph, PW = (W - 1) * S + 1 + 2 * bpw;
    ts_te_stage *Pd =
        ts_te_compute(te, "pad", dt, (int64_t[]){N, CI, PH, PW}, 4, pad_axes);
    ts_expr *okh, *okw;
    ts_expr *ih = dilated_index(a, ts_te_axis(Pd, 2), bph, S, H, &okh);
    ts_expr *iw = dilated_index(a, ts_te_axis(Pd, 3), bpw, S, W, &okw);
    ts_expr *idx[] = {ts_te_axis(Pd, 0), ts_te_axis(Pd, 1), ih, iw};
    ts_expr *load = ts_te_load(te, data, idx, 4);
    ts_expr *cond = okh && okw ? ts_and(a, okh, okw) : okh ? okh : okw;
    in = ts_te_set_value(
        Pd, cond ? op_if_then_else(a, cond, load, op_const(a, dt, 0)) : load);
  }
  ts_te_stage *C =
      ts_te_compute(te, "conv", ot, (int64_t[]){N, CO, OH, OW}, 4, out_axes);
  ts_expr *n = ts_te_axis(C, 0), *co = ts_te_axis(C, 1);
  ts_expr *h = ts_te_axis(C, 2), *w = ts_te_axis(C, 3);
  ts_expr *rc = ts_te_reduce_axis(C, "rc", CI);
  ts_expr *rh = ts_te_reduce_axis(C, "rh", KH);
  ts_expr *rw = ts_te_reduce_axis(C, "rw", KW);
  ts_expr *di[] = {n, rc, ts_add(a, h, rh), ts_add(a, w, rw)};
  ts_expr *wi[] = {rc, co, ts_sub(a, ts_index(a, KH - 1), rh),
                   ts_sub(a, ts_index(a, KW - 1), rw)};
  ts_expr *prod = ts_mul(a, ts_cast(a, ot, ts_te_load(te, in, di, 4)),
                         ts_cast(a, ot, ts_te_load(te, weight, wi, 4)));
  ts_buffer *out = ts_te_set_reduce(C, TS_TE_SUM, prod);
  ts_buffer *params[] = {data, weight, out};
  return ts_te_finish(te, params, 3, err);
}

double op_flops_conv2d_transpose(const op_args *x) {
  int64_t S = arg_int(x, "stride"), P = arg_int(x, "pad");
  int64_t KH = arg_int(x, "KH"), KW = arg_int(x, "KW");
  double OH = (double)transpose_out(arg_int(x, "H"), KH, S, P);
  double OW = (double)transpose_out(arg_int(x, "W"), KW, S, P);
  return 2.0 * (double)arg_int(x, "N") * (double)arg_int(x, "CO") * OH * OW *
         (double)arg_int(x, "CI") * (double)KH * (double)KW;
}

/* ---- pool2d ---- */

int op_check_pool2d(const op_args *x, ts_error *err) {
  if (arg_is(x, "kind", "avg") && !ts_dtype_is_float(x->dtype)) {
    char buf[32];
    return TS_ERR(err, TS_EINVAL,
                  "%s: kind=avg needs a float dtype (dtype=%s); integer "
                  "dtypes support kind=max only",
                  x->op->name, ts_dtype_str(x->dtype, buf));
  }
  return check_window(x, 1, err);
}

/* Average pooling divides by the full window KH*KW, padding included. */
ts_func *op_build_pool2d(const op_args *x, ts_error *err) {
  int64_t N = arg_int(x, "N"), H = arg_int(x, "H"), W = arg_int(x, "W");
  int64_t C = arg_int(x, "C"), KH = arg_int(x, "KH"), KW = arg_int(x, "KW");
  int64_t S = arg_int(x, "stride"), P = arg_int(x, "pad");
  int64_t OH = out_size(H, KH, S, P, 1), OW = out_size(W, KW, S, P, 1);
  bool avg = arg_is(x, "kind", "avg");
  ts_dtype dt = x->dtype;
  ts_te *te = ts_te_begin("pool2d_nhwc");
  ts_arena *a = ts_te_arena(te);
  static const char *const axes[] = {"n", "h", "w", "c"};
  ts_buffer *data =
      ts_te_placeholder(te, "data", dt, (int64_t[]){N, H, W, C}, 4);
  ts_buffer *in = padded_input(
      te, data, 1, P, avg ? op_const(a, dt, 0) : op_lowest(a, dt), axes);
  int64_t oshape[] = {N, OH, OW, C};
  ts_te_stage *R =
      ts_te_compute(te, avg ? "pool_sum" : "pool", dt, oshape, 4, axes);
  ts_expr *rh = ts_te_reduce_axis(R, "rh", KH);
  ts_expr *rw = ts_te_reduce_axis(R, "rw", KW);
  ts_expr *di[] = {ts_te_axis(R, 0),
                   ts_add(a, ts_mul(a, ts_te_axis(R, 1), ts_index(a, S)), rh),
                   ts_add(a, ts_mul(a, ts_te_axis(R, 2), ts_index(a, S)), rw),
                   ts_te_axis(R, 3)};
  ts_buffer *rb = ts_te_set_reduce(R, avg ? TS_TE_SUM : TS_TE_MAX,
                                   ts_te_load(te, in, di, 4));
  if (!avg) {
    ts_buffer *params[] = {data, rb};
    return ts_te_finish(te, params, 2, err);
  }
  ts_te_stage *Pl = ts_te_compute(te, "pool", dt, oshape, 4, axes);
  ts_expr *pi[] = {ts_te_axis(Pl, 0), ts_te_axis(Pl, 1), ts_te_axis(Pl, 2),
                   ts_te_axis(Pl, 3)};
  ts_buffer *out = ts_te_set_value(
      Pl, ts_div(a, ts_te_load(te, rb, pi, 4), op_const(a, dt, KH * KW)));
  ts_buffer *params[] = {data, out};
  return ts_te_finish(te, params, 2, err);
}

double op_flops_pool2d(const op_args *x) {
  int64_t S = arg_int(x, "stride"), P = arg_int(x, "pad");
  int64_t KH = arg_int(x, "KH"), KW = arg_int(x, "KW");
  double OH = (double)out_size(arg_int(x, "H"), KH, S, P, 1);
  double OW = (double)out_size(arg_int(x, "W"), KW, S, P, 1);
  double outs = (double)arg_int(x, "N") * OH * OW * (double)arg_int(x, "C");
  return outs * (double)KH * (double)KW + (arg_is(x, "kind", "avg") ? outs : 0);
}
