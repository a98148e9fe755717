/*
 * kernels.c — the reference kernels of the graph operators, over host
 * tensors: what constant folding evaluates and what the reference executor
 * runs for a node that is not (yet) a call of a PrimFunc. Data movement
 * (Reshape, Transpose, Concat, Gather, Slice, ...) copies elements of any
 * dtype; arithmetic converts the operands to double, computes in double and
 * rounds once to the output dtype, so the kernels are at least as accurate
 * as a float32 implementation they are compared with. Plain loops, written
 * for clarity; speed is the tuned code's business.
 */
#include "internal.h"
#include "winograd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int64_t gr_tensor_elems(const gr_tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
  return n;
}

static double *to_double(const gr_tensor *t) {
  int64_t n = gr_tensor_elems(t);
  double *d = ts_malloc(sizeof *d * (size_t)(n ? n : 1));
  if (!d) return NULL;
  if (ts_dtype_eq(t->dtype, TS_FLOAT32))
    for (int64_t i = 0; i < n; i++) d[i] = ((const float *)t->data)[i];
  else
    for (int64_t i = 0; i < n; i++) d[i] = ts_host_get(t->data, t->dtype, i);
  return d;
}

static void from_double(gr_tensor *t, const double *d) {
  int64_t n = gr_tensor_elems(t);
  if (ts_dtype_eq(t->dtype, TS_FLOAT32))
    for (int64_t i = 0; i < n; i++) ((float *)t->data)[i] = (float)d[i];
  else
    for (int64_t i = 0; i < n; i++) ts_host_set(t->data, t->dtype, i, d[i]);
}

static void strides_of(const int64_t *shape, int ndim, int64_t *st) {
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    st[i] = s;
    s *= shape[i];
  }
}

/* Index into a broadcast operand of shape s (rank ns) for output index
 * coordinates idx (rank no). */
static int64_t bcast_index(const int64_t *idx, int no, const int64_t *s,
                           int ns) {
  int64_t off = 0, st = 1;
  for (int i = ns - 1; i >= 0; i--) {
    int64_t c = idx[i + (no - ns)];
    if (s[i] != 1) off += c * st;
    st *= s[i];
  }
  return off;
}

static double erf_gelu(double x) {
  return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
}

static double unary(const char *op, double x, const gr_node *n, double lo,
                    double hi) {
  if (!strcmp(op, "Relu")) return x > 0 ? x : 0;
  if (!strcmp(op, "Sqrt")) return sqrt(x);
  if (!strcmp(op, "Sigmoid")) return 1.0 / (1.0 + exp(-x));
  if (!strcmp(op, "Tanh")) return tanh(x);
  if (!strcmp(op, "Erf")) return erf(x);
  if (!strcmp(op, "Exp")) return exp(x);
  if (!strcmp(op, "Neg")) return -x;
  if (!strcmp(op, "Abs")) return fabs(x);
  if (!strcmp(op, "Clip")) return x < lo ? lo : x > hi ? hi : x;
  if (!strcmp(op, "Gelu")) {
    if (!strcmp(gr_attr_string(n, "approximate", "none"), "tanh"))
      return 0.5 * x *
             (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    return erf_gelu(x);
  }
  return x; /* Identity, Dropout */
}

static double binary(const char *op, double a, double b, bool is_int) {
  switch (op[0]) {
  case 'A': return a + b;
  case 'S': return a - b;
  case 'M': return a * b;
  case 'D':
    if (is_int) return b == 0 ? 0 : (double)((int64_t)a / (int64_t)b);
    return a / b;
  default: return pow(a, b);
  }
}

static int run_elementwise(const gr_node *n, const gr_tensor *ins,
                           gr_tensor *out) {
  const char *op = n->op;
  int64_t total = gr_tensor_elems(out), idx[TS_MAX_DIMS];
  double *a = to_double(&ins[0]);
  double *r = ts_malloc(sizeof *r * (size_t)(total ? total : 1));
  double *b = NULL;
  bool mask = !strcmp(op, "PadMask"); /* x where position < length */
  bool bin = n->n_inputs >= 2 && strcmp(op, "Clip") && strcmp(op, "Dropout");
  double *c = mask ? to_double(&ins[2]) : NULL;
  double fill = gr_attr_float(n, "fill", 0);
  if (bin) b = to_double(&ins[1]);
  if (!a || !r || (bin && !b) || (mask && !c)) {
    free(a), free(r), free(b), free(c);
    return TS_ENOMEM;
  }
  double lo = -INFINITY, hi = INFINITY;
  if (!strcmp(op, "Clip")) {
    if (n->n_inputs > 1 && ins[1].data)
      lo = ts_host_get(ins[1].data, ins[1].dtype, 0);
    if (n->n_inputs > 2 && ins[2].data)
      hi = ts_host_get(ins[2].data, ins[2].dtype, 0);
    lo = gr_attr_float(n, "min", lo);
    hi = gr_attr_float(n, "max", hi);
  }
  bool is_int = ts_dtype_is_int(out->dtype);
  memset(idx, 0, sizeof idx);
  for (int64_t i = 0; i < total; i++) {
    if (mask) {
      double x = a[bcast_index(idx, out->ndim, ins[0].shape, ins[0].ndim)];
      double p = b[bcast_index(idx, out->ndim, ins[1].shape, ins[1].ndim)];
      double l = c[bcast_index(idx, out->ndim, ins[2].shape, ins[2].ndim)];
      r[i] = p < l ? x : fill;
    } else if (bin) {
      double x = a[bcast_index(idx, out->ndim, ins[0].shape, ins[0].ndim)];
      double y = b[bcast_index(idx, out->ndim, ins[1].shape, ins[1].ndim)];
      r[i] = binary(op, x, y, is_int);
    } else {
      r[i] = unary(op, a[i], n, lo, hi);
    }
    for (int d = out->ndim - 1; d >= 0; d--) {
      if (++idx[d] < out->shape[d]) break;
      idx[d] = 0;
    }
  }
  from_double(out, r);
  free(a), free(b), free(c), free(r);
  return TS_OK;
}

/* ConstantOfShape, Range, Trilu and Expand (what folding evaluates of the
 * operators lower_more.c rewrites; the others are not folded). */
static int run_fill(const gr_node *n, const gr_tensor *ins, gr_tensor *out) {
  int64_t total = gr_tensor_elems(out), idx[TS_MAX_DIMS] = {0};
  double start = 0, delta = 0, value = gr_attr_float(n, "value", 0);
  int64_t k = 0;
  bool upper = gr_attr_int(n, "upper", 1) != 0;
  if (!strcmp(n->op, "Range")) {
    start = ts_host_get(ins[0].data, ins[0].dtype, 0);
    delta = ts_host_get(ins[2].data, ins[2].dtype, 0);
  }
  if (!strcmp(n->op, "Trilu") && n->n_inputs > 1 && ins[1].data)
    k = ts_host_get_int(ins[1].data, ins[1].dtype, 0);
  int nd = out->ndim;
  for (int64_t e = 0; e < total; e++) {
    double v = value;
    if (!strcmp(n->op, "Range")) v = start + (double)e * delta;
    if (!strcmp(n->op, "Trilu")) {
      int64_t d = idx[nd - 1] - idx[nd - 2];
      bool keep = upper ? d >= k : d <= k;
      v = keep ? ts_host_get(ins[0].data, ins[0].dtype, e) : 0;
    }
    if (!strcmp(n->op, "Expand"))
      v = ts_host_get(ins[0].data, ins[0].dtype,
                      bcast_index(idx, nd, ins[0].shape, ins[0].ndim));
    ts_host_set(out->data, out->dtype, e, v);
    for (int d = nd - 1; d >= 0; d--) {
      if (++idx[d] < out->shape[d]) break;
      idx[d] = 0;
    }
  }
  return TS_OK;
}

bool gr_kernel_folds(const char *op) {
  return !gr_lowered_only(op) && gr_op_known(op);
}

/* An operator of ew_ops.c's table: k broadcast operands. */
static int run_ew(const gr_ew_op *op, const gr_node *n, const gr_tensor *ins,
                  gr_tensor *out) {
  int k = n->n_inputs;
  int64_t total = gr_tensor_elems(out), idx[TS_MAX_DIMS] = {0};
  double *in[8] = {0}, x[8];
  double *r = ts_malloc(sizeof *r * (size_t)(total ? total : 1));
  bool ok = r != NULL && k <= 8;
  for (int i = 0; ok && i < k; i++) ok = (in[i] = to_double(&ins[i])) != NULL;
  for (int64_t e = 0; ok && e < total; e++) {
    for (int i = 0; i < k; i++)
      x[i] = in[i][bcast_index(idx, out->ndim, ins[i].shape, ins[i].ndim)];
    r[e] = gr_ew_ref(op, n, x, k);
    for (int d = out->ndim - 1; d >= 0; d--) {
      if (++idx[d] < out->shape[d]) break;
      idx[d] = 0;
    }
  }
  if (ok) from_double(out, r);
  for (int i = 0; i < k && i < 8; i++) free(in[i]);
  free(r);
  return ok ? TS_OK : TS_ENOMEM;
}

static int run_conv(const ts_graph *g, const gr_node *n, const gr_tensor *ins,
                    gr_tensor *out) {
  const gr_tensor *x = &ins[0], *w = &ins[1];
  bool integer = !strcmp(n->op, "ConvInteger");
  const gr_tensor *bias =
      !integer && n->n_inputs > 2 && ins[2].data ? &ins[2] : NULL;
  bool transpose = !strcmp(n->op, "ConvTranspose");
  int nsp = x->ndim - 2;
  int64_t group = gr_attr_int(n, "group", 1);
  int64_t kernel[3] = {1, 1, 1}, strides[3] = {1, 1, 1}, dil[3] = {1, 1, 1};
  int64_t pads[6] = {0}, isz[3] = {1, 1, 1}, osz[3] = {1, 1, 1};
  int c;
  const int64_t *p;
  for (int i = 0; i < nsp; i++) {
    kernel[i] = w->shape[2 + i];
    isz[i] = x->shape[2 + i];
    osz[i] = out->shape[2 + i];
  }
  if ((p = gr_attr_ints(n, "strides", &c)))
    for (int i = 0; i < c && i < nsp; i++) strides[i] = p[i];
  if ((p = gr_attr_ints(n, "dilations", &c)))
    for (int i = 0; i < c && i < nsp; i++) dil[i] = p[i];
  if (transpose) {
    if ((p = gr_attr_ints(n, "pads", &c)))
      for (int i = 0; i < nsp; i++) pads[i] = p[i];
  } else {
    int64_t k3[3], s3[3], d3[3], pp[6];
    for (int i = 0; i < nsp; i++)
      k3[i] = kernel[i], s3[i] = strides[i], d3[i] = dil[i];
    gr_resolve_pads(n, nsp, x->shape + 2, k3, s3, d3, pp);
    for (int i = 0; i < nsp; i++) pads[i] = pp[i];
  }
  /* normalise to 3 spatial dims (d, h, w) */
  int64_t K[3], S[3], D[3], P[3], I[3], O[3];
  for (int i = 0; i < 3; i++) {
    int j = i - (3 - nsp);
    K[i] = j >= 0 ? kernel[j] : 1;
    S[i] = j >= 0 ? strides[j] : 1;
    D[i] = j >= 0 ? dil[j] : 1;
    P[i] = j >= 0 ? pads[j] : 0;
    I[i] = j >= 0 ? isz[j] : 1;
    O[i] = j >= 0 ? osz[j] : 1;
  }
  double *xd = to_double(x), *wd = to_double(w);
  double *bd = bias ? to_double(bias) : NULL;
  int64_t N = x->shape[0], C = x->shape[1], M = out->shape[1];
  int64_t osp = O[0] * O[1] * O[2], isp = I[0] * I[1] * I[2];
  int64_t ksp = K[0] * K[1] * K[2];
  double *r = ts_calloc((size_t)(N * M * osp) + 1, sizeof *r);
  if (!xd || !wd || (bias && !bd) || !r) {
    free(xd), free(wd), free(bd), free(r);
    return TS_ENOMEM;
  }
  int64_t cg = C / group, mg = M / group;
  /* ConvInteger: the ONNX zero points are subtracted, and the padding
   * holds the data's zero point (it adds nothing) unless tessera's
   * pad_value attribute names another value (a quantized conv without a
   * zero-point input pads with the zero point of its data) */
  double xzp = 0, wzp = 0, pad_value = 0;
  if (integer) {
    if (n->n_inputs > 2 && ins[2].data)
      xzp = ts_host_get(ins[2].data, ins[2].dtype, 0);
    if (n->n_inputs > 3 && ins[3].data)
      wzp = ts_host_get(ins[3].data, ins[3].dtype, 0);
    /* u = x - P (P the padding value, the zero point by default) pads
     * with zeros; y = conv(u) + (P - zero point) x the weights' sums */
    double P = (double)gr_attr_int(n, "pad_value", (int64_t)xzp);
    pad_value = P - xzp;
    for (int64_t i = 0, e = N * C * isp; i < e; i++) xd[i] -= P;
    for (int64_t i = 0, e = M * cg * ksp; i < e; i++) wd[i] -= wzp;
  }
  for (int64_t b = 0; b < N; b++)
    for (int64_t gi = 0; gi < group; gi++)
      for (int64_t m = 0; m < mg; m++)
        for (int64_t ci = 0; ci < cg; ci++)
          for (int64_t kd = 0; kd < K[0]; kd++)
            for (int64_t kh = 0; kh < K[1]; kh++)
              for (int64_t kw = 0; kw < K[2]; kw++) {
                int64_t oc = gi * mg + m, ic = gi * cg + ci;
                double wv = transpose ? wd[((ic * mg + m) * ksp) +
                                           (kd * K[1] + kh) * K[2] + kw]
                                      : wd[((oc * cg + ci) * ksp) +
                                           (kd * K[1] + kh) * K[2] + kw];
                const double *xin = xd + (b * C + ic) * isp;
                double *ro = r + (b * M + oc) * osp;
                if (!transpose) {
                  for (int64_t od = 0; od < O[0]; od++) {
                    int64_t id = od * S[0] - P[0] + kd * D[0];
                    if (id < 0 || id >= I[0]) continue;
                    for (int64_t oh = 0; oh < O[1]; oh++) {
                      int64_t ih = oh * S[1] - P[1] + kh * D[1];
                      if (ih < 0 || ih >= I[1]) continue;
                      const double *row = xin + (id * I[1] + ih) * I[2];
                      double *orow = ro + (od * O[1] + oh) * O[2];
                      for (int64_t ow = 0; ow < O[2]; ow++) {
                        int64_t iw = ow * S[2] - P[2] + kw * D[2];
                        if (iw >= 0 && iw < I[2]) orow[ow] += wv * row[iw];
                      }
                    }
                  }
                } else {
                  for (int64_t id = 0; id < I[0]; id++) {
                    int64_t od = id * S[0] - P[0] + kd * D[0];
                    if (od < 0 || od >= O[0]) continue;
                    for (int64_t ih = 0; ih < I[1]; ih++) {
                      int64_t oh = ih * S[1] - P[1] + kh * D[1];
                      if (oh < 0 || oh >= O[1]) continue;
                      for (int64_t iw = 0; iw < I[2]; iw++) {
                        int64_t ow = iw * S[2] - P[2] + kw * D[2];
                        if (ow >= 0 && ow < O[2])
                          ro[(od * O[1] + oh) * O[2] + ow] +=
                              wv * xin[(id * I[1] + ih) * I[2] + iw];
                      }
                    }
                  }
                }
              }
  if (bd)
    for (int64_t b = 0; b < N; b++)
      for (int64_t m = 0; m < M; m++)
        for (int64_t s = 0; s < osp; s++) r[(b * M + m) * osp + s] += bd[m];
  if (pad_value != 0)
    for (int64_t m = 0; m < M; m++) {
      double wsum = 0;
      for (int64_t k = 0; k < cg * ksp; k++) wsum += wd[m * cg * ksp + k];
      for (int64_t b = 0; b < N; b++)
        for (int64_t s = 0; s < osp; s++)
          r[(b * M + m) * osp + s] += pad_value * wsum;
    }
  from_double(out, r);
  free(xd), free(wd), free(bd), free(r);
  (void)g;
  return TS_OK;
}

static int run_pool(const gr_node *n, const gr_tensor *ins, gr_tensor *out) {
  const gr_tensor *x = &ins[0];
  int nsp = x->ndim - 2;
  bool global = !strcmp(n->op, "GlobalAveragePool");
  bool is_max = !strcmp(n->op, "MaxPool");
  int64_t K[3] = {1, 1, 1}, S[3] = {1, 1, 1}, D[3] = {1, 1, 1}, P[3] = {0};
  int64_t PE[3] = {0};
  int64_t I[3] = {1, 1, 1}, O[3] = {1, 1, 1};
  int64_t kernel[3], strides[3] = {1, 1, 1}, dil[3] = {1, 1, 1}, pads[6] = {0};
  int c;
  const int64_t *p;
  for (int i = 0; i < nsp; i++)
    kernel[i] =
        global ? x->shape[2 + i] : gr_attr_ints(n, "kernel_shape", &c)[i];
  if (!global) {
    if ((p = gr_attr_ints(n, "strides", &c)))
      for (int i = 0; i < nsp; i++) strides[i] = p[i];
    if ((p = gr_attr_ints(n, "dilations", &c)))
      for (int i = 0; i < nsp; i++) dil[i] = p[i];
    gr_resolve_pads(n, nsp, x->shape + 2, kernel, strides, dil, pads);
  }
  for (int i = 0; i < 3; i++) {
    int j = i - (3 - nsp);
    if (j < 0) continue;
    K[i] = kernel[j], S[i] = strides[j], D[i] = dil[j], P[i] = pads[j];
    PE[i] = pads[j + nsp];
    I[i] = x->shape[2 + j], O[i] = out->shape[2 + j];
  }
  bool count_pad = gr_attr_int(n, "count_include_pad", 0) != 0;
  double *xd = to_double(x);
  int64_t NC = x->shape[0] * x->shape[1], isp = I[0] * I[1] * I[2];
  int64_t osp = O[0] * O[1] * O[2];
  double *r = ts_malloc(sizeof *r * (size_t)(NC * osp + 1));
  if (!xd || !r) {
    free(xd), free(r);
    return TS_ENOMEM;
  }
  for (int64_t nc = 0; nc < NC; nc++)
    for (int64_t od = 0; od < O[0]; od++)
      for (int64_t oh = 0; oh < O[1]; oh++)
        for (int64_t ow = 0; ow < O[2]; ow++) {
          double acc = is_max ? -INFINITY : 0;
          int64_t cnt = 0, cnt_pad = 0;
          for (int64_t kd = 0; kd < K[0]; kd++)
            for (int64_t kh = 0; kh < K[1]; kh++)
              for (int64_t kw = 0; kw < K[2]; kw++) {
                int64_t id = od * S[0] - P[0] + kd * D[0];
                int64_t ih = oh * S[1] - P[1] + kh * D[1];
                int64_t iw = ow * S[2] - P[2] + kw * D[2];
                /* positions in the explicit padding count for
                 * count_include_pad; those past it (ceil_mode) never do */
                bool in_pad = id >= -P[0] && id < I[0] + PE[0] && ih >= -P[1] &&
                              ih < I[1] + PE[1] && iw >= -P[2] &&
                              iw < I[2] + PE[2];
                if (in_pad) cnt_pad++;
                if (id < 0 || ih < 0 || iw < 0 || id >= I[0] || ih >= I[1] ||
                    iw >= I[2])
                  continue;
                double v = xd[nc * isp + (id * I[1] + ih) * I[2] + iw];
                if (is_max)
                  acc = v > acc ? v : acc;
                else
                  acc += v;
                cnt++;
              }
          if (!is_max) acc /= (double)(count_pad ? cnt_pad : (cnt ? cnt : 1));
          r[nc * osp + (od * O[1] + oh) * O[2] + ow] = acc;
        }
  from_double(out, r);
  free(xd), free(r);
  return TS_OK;
}

static int run_matmul(const gr_node *n, const gr_tensor *ins, gr_tensor *out) {
  const gr_tensor *a = &ins[0], *b = &ins[1];
  bool gemm = !strcmp(n->op, "Gemm");
  double *ad = to_double(a), *bd = to_double(b);
  double *cd =
      gemm && n->n_inputs > 2 && ins[2].data ? to_double(&ins[2]) : NULL;
  int64_t total = gr_tensor_elems(out);
  double *r = ts_calloc((size_t)total + 1, sizeof *r);
  if (!ad || !bd || !r) {
    free(ad), free(bd), free(cd), free(r);
    return TS_ENOMEM;
  }
  if (!strcmp(n->op, "MatMulInteger")) /* scalar zero points */
    for (int k = 2; k < 4 && k < n->n_inputs; k++) {
      if (!ins[k].data) continue;
      double z = ts_host_get(ins[k].data, ins[k].dtype, 0);
      double *d = k == 2 ? ad : bd;
      for (int64_t i = 0, e = gr_tensor_elems(&ins[k - 2]); i < e; i++)
        d[i] -= z;
    }
  if (gemm) {
    bool ta = gr_attr_int(n, "transA", 0), tb = gr_attr_int(n, "transB", 0);
    double alpha = gr_attr_float(n, "alpha", 1.0),
           beta = gr_attr_float(n, "beta", 1.0);
    int64_t M = out->shape[0], N = out->shape[1];
    int64_t K = ta ? a->shape[0] : a->shape[1];
    for (int64_t i = 0; i < M; i++)
      for (int64_t k = 0; k < K; k++) {
        double av = ta ? ad[k * M + i] : ad[i * K + k];
        for (int64_t j = 0; j < N; j++)
          r[i * N + j] += av * (tb ? bd[j * K + k] : bd[k * N + j]);
      }
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        double c = 0;
        if (cd) {
          int64_t idx[2] = {i, j};
          c = cd[bcast_index(idx, 2, ins[2].shape, ins[2].ndim)];
        }
        r[i * N + j] = alpha * r[i * N + j] + beta * c;
      }
  } else {
    int64_t as[TS_MAX_DIMS + 1], bs[TS_MAX_DIMS + 1];
    int na = a->ndim, nb = b->ndim;
    memcpy(as, a->shape, sizeof(int64_t) * na);
    memcpy(bs, b->shape, sizeof(int64_t) * nb);
    if (na == 1) as[0] = 1, as[1] = a->shape[0], na = 2;
    if (nb == 1) bs[1] = 1, bs[0] = b->shape[0], nb = 2;
    int64_t M = as[na - 2], K = as[na - 1], N = bs[nb - 1];
    int64_t batch[TS_MAX_DIMS], idx[TS_MAX_DIMS] = {0};
    int nbatch;
    gr_broadcast(as, na - 2, bs, nb - 2, batch, &nbatch);
    int64_t nbt = 1;
    for (int i = 0; i < nbatch; i++) nbt *= batch[i];
    for (int64_t t = 0; t < nbt; t++) {
      const double *A = ad + bcast_index(idx, nbatch, as, na - 2) * M * K;
      const double *B = bd + bcast_index(idx, nbatch, bs, nb - 2) * K * N;
      double *R = r + t * M * N;
      for (int64_t i = 0; i < M; i++)
        for (int64_t k = 0; k < K; k++) {
          double av = A[i * K + k];
          const double *brow = B + k * N;
          double *rrow = R + i * N;
          for (int64_t j = 0; j < N; j++) rrow[j] += av * brow[j];
        }
      for (int d = nbatch - 1; d >= 0; d--) {
        if (++idx[d] < batch[d]) break;
        idx[d] = 0;
      }
    }
  }
  from_double(out, r);
  free(ad), free(bd), free(cd), free(r);
  return TS_OK;
}

/* Softmax, LayerNormalization and the reductions work on [outer, inner]
 * views or on an axis. */
static int run_rows(const gr_node *n, const gr_tensor *ins, gr_tensor *out) {
  const gr_tensor *x = &ins[0];
  double *xd = to_double(x);
  int64_t total = gr_tensor_elems(x);
  double *r = ts_malloc(sizeof *r * (size_t)(total + 1));
  if (!xd || !r) {
    free(xd), free(r);
    return TS_ENOMEM;
  }
  int64_t axis = gr_attr_int(n, "axis", -1);
  if (axis < 0) axis += x->ndim;
  if (!strcmp(n->op, "Softmax")) {
    int64_t outer = 1, len = x->shape[axis], inner = 1;
    for (int i = 0; i < axis; i++) outer *= x->shape[i];
    for (int i = (int)axis + 1; i < x->ndim; i++) inner *= x->shape[i];
    for (int64_t o = 0; o < outer; o++)
      for (int64_t in = 0; in < inner; in++) {
        double mx = -INFINITY, s = 0;
        for (int64_t k = 0; k < len; k++)
          mx = fmax(mx, xd[(o * len + k) * inner + in]);
        for (int64_t k = 0; k < len; k++)
          s += (r[(o * len + k) * inner + in] =
                    exp(xd[(o * len + k) * inner + in] - mx));
        for (int64_t k = 0; k < len; k++) r[(o * len + k) * inner + in] /= s;
      }
  } else { /* LayerNormalization */
    int64_t outer = 1, len = 1;
    for (int i = 0; i < axis; i++) outer *= x->shape[i];
    for (int i = (int)axis; i < x->ndim; i++) len *= x->shape[i];
    double eps = gr_attr_float(n, "epsilon", 1e-5);
    double *sd = to_double(&ins[1]);
    double *bd = n->n_inputs > 2 && ins[2].data ? to_double(&ins[2]) : NULL;
    for (int64_t o = 0; o < outer; o++) {
      double mean = 0, var = 0;
      for (int64_t k = 0; k < len; k++) mean += xd[o * len + k];
      mean /= (double)len;
      for (int64_t k = 0; k < len; k++) {
        double d = xd[o * len + k] - mean;
        var += d * d;
      }
      var /= (double)len;
      double inv = 1.0 / sqrt(var + eps);
      for (int64_t k = 0; k < len; k++)
        r[o * len + k] =
            (xd[o * len + k] - mean) * inv * sd[k] + (bd ? bd[k] : 0);
    }
    free(sd), free(bd);
  }
  from_double(out, r);
  free(xd), free(r);
  return TS_OK;
}

static int run_reduce(const ts_graph *g, const gr_node *n, const gr_tensor *ins,
                      gr_tensor *out) {
  const gr_tensor *x = &ins[0];
  int na = 0;
  const int64_t *axes = gr_attr_ints(n, "axes", &na);
  int64_t tmp[TS_MAX_DIMS];
  if (!axes && n->n_inputs > 1 && ins[1].data) {
    na = (int)gr_tensor_elems(&ins[1]);
    for (int i = 0; i < na && i < TS_MAX_DIMS; i++)
      tmp[i] = ts_host_get_int(ins[1].data, ins[1].dtype, i);
    axes = tmp;
  }
  bool noop = gr_attr_int(n, "noop_with_empty_axes", 0) != 0;
  bool red[TS_MAX_DIMS] = {0};
  for (int i = 0; i < x->ndim; i++) red[i] = na == 0 && !noop;
  for (int i = 0; i < na; i++)
    red[axes[i] < 0 ? axes[i] + x->ndim : axes[i]] = true;
  double *xd = to_double(x);
  int64_t on = gr_tensor_elems(out);
  double *r = ts_malloc(sizeof *r * (size_t)(on + 1));
  int64_t *cnt = ts_calloc((size_t)on + 1, sizeof *cnt);
  if (!xd || !r || !cnt) {
    free(xd), free(r), free(cnt);
    return TS_ENOMEM;
  }
  const char *kind = n->op + 6; /* after "Reduce" */
  bool is_max = !strcmp(kind, "Max"), is_min = !strcmp(kind, "Min");
  bool sq = !strcmp(kind, "L2") || !strcmp(kind, "SumSquare");
  bool lse = !strcmp(kind, "LogSumExp");
  for (int64_t i = 0; i < on; i++)
    r[i] = is_max ? -INFINITY : is_min ? INFINITY : 0;
  int64_t idx[TS_MAX_DIMS] = {0}, kshape[TS_MAX_DIMS], kst[TS_MAX_DIMS];
  for (int i = 0; i < x->ndim; i++) kshape[i] = red[i] ? 1 : x->shape[i];
  strides_of(kshape, x->ndim, kst);
  int64_t total = gr_tensor_elems(x);
  for (int64_t i = 0; i < total; i++) {
    int64_t o = 0;
    for (int d = 0; d < x->ndim; d++) o += red[d] ? 0 : idx[d] * kst[d];
    if (is_max)
      r[o] = fmax(r[o], xd[i]);
    else if (is_min)
      r[o] = fmin(r[o], xd[i]);
    else
      r[o] += sq                    ? xd[i] * xd[i]
              : !strcmp(kind, "L1") ? fabs(xd[i])
              : lse                 ? exp(xd[i])
                                    : xd[i];
    cnt[o]++;
    for (int d = x->ndim - 1; d >= 0; d--) {
      if (++idx[d] < x->shape[d]) break;
      idx[d] = 0;
    }
  }
  for (int64_t i = 0; i < on; i++) {
    if (!strcmp(kind, "Mean")) r[i] /= (double)(cnt[i] ? cnt[i] : 1);
    if (!strcmp(kind, "L2")) r[i] = sqrt(r[i]);
    if (lse || !strcmp(kind, "LogSum")) r[i] = log(r[i]);
  }
  from_double(out, r);
  free(xd), free(r), free(cnt);
  (void)g;
  return TS_OK;
}

static int run_batchnorm(const gr_node *n, const gr_tensor *ins,
                         gr_tensor *out) {
  const gr_tensor *x = &ins[0];
  double *xd = to_double(x), *s = to_double(&ins[1]), *b = to_double(&ins[2]);
  double *mu = to_double(&ins[3]), *var = to_double(&ins[4]);
  double eps = gr_attr_float(n, "epsilon", 1e-5);
  int64_t C = x->shape[1], inner = 1;
  for (int i = 2; i < x->ndim; i++) inner *= x->shape[i];
  int64_t total = gr_tensor_elems(x);
  int rc = TS_OK;
  if (!xd || !s || !b || !mu || !var)
    rc = TS_ENOMEM;
  else {
    for (int64_t i = 0; i < total; i++) {
      int64_t c = (i / inner) % C;
      xd[i] = (xd[i] - mu[c]) / sqrt(var[c] + eps) * s[c] + b[c];
    }
    from_double(out, xd);
  }
  free(xd), free(s), free(b), free(mu), free(var);
  return rc;
}

/* Data movement: every output element copies one input element. */
static int run_transpose(const gr_node *n, const gr_tensor *x, gr_tensor *out) {
  int c;
  const int64_t *perm = gr_attr_ints(n, "perm", &c);
  int64_t ist[TS_MAX_DIMS], idx[TS_MAX_DIMS] = {0};
  strides_of(x->shape, x->ndim, ist);
  size_t es = ts_dtype_elem_bytes(x->dtype);
  int64_t total = gr_tensor_elems(out);
  for (int64_t i = 0; i < total; i++) {
    int64_t src = 0;
    for (int d = 0; d < out->ndim; d++)
      src += idx[d] * ist[perm ? perm[d] : out->ndim - 1 - d];
    memcpy((char *)out->data + i * es, (const char *)x->data + src * es, es);
    for (int d = out->ndim - 1; d >= 0; d--) {
      if (++idx[d] < out->shape[d]) break;
      idx[d] = 0;
    }
  }
  return TS_OK;
}

static int run_concat(const gr_node *n, const gr_tensor *ins, gr_tensor *out) {
  int64_t axis = gr_attr_int(n, "axis", 0);
  if (axis < 0) axis += out->ndim;
  size_t es = ts_dtype_elem_bytes(out->dtype);
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; i++) outer *= out->shape[i];
  for (int i = (int)axis + 1; i < out->ndim; i++) inner *= out->shape[i];
  int64_t off = 0;
  for (int k = 0; k < n->n_inputs; k++) {
    int64_t len = ins[k].shape[axis];
    for (int64_t o = 0; o < outer; o++)
      memcpy((char *)out->data + ((o * out->shape[axis] + off) * inner) * es,
             (const char *)ins[k].data + (o * len * inner) * es,
             (size_t)(len * inner) * es);
    off += len;
  }
  return TS_OK;
}

static int run_gather(const gr_node *n, const gr_tensor *ins, gr_tensor *out,
                      ts_error *err) {
  const gr_tensor *x = &ins[0], *ind = &ins[1];
  int64_t axis = gr_attr_int(n, "axis", 0);
  if (axis < 0) axis += x->ndim;
  size_t es = ts_dtype_elem_bytes(x->dtype);
  int64_t outer = 1, inner = 1, len = x->shape[axis];
  for (int i = 0; i < axis; i++) outer *= x->shape[i];
  for (int i = (int)axis + 1; i < x->ndim; i++) inner *= x->shape[i];
  int64_t ni = gr_tensor_elems(ind);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < ni; j++) {
      int64_t k = ts_host_get_int(ind->data, ind->dtype, j);
      if (k < 0) k += len;
      if (k < 0 || k >= len)
        return TS_ERR(err, TS_ERANGE,
                      "node '%s' (Gather): index %lld out of "
                      "range [0, %lld)",
                      n->name, (long long)k, (long long)len);
      memcpy((char *)out->data + ((o * ni + j) * inner) * es,
             (const char *)x->data + ((o * len + k) * inner) * es,
             (size_t)inner * es);
    }
  return TS_OK;
}

static int run_gather_elements(const gr_node *n, const gr_tensor *ins,
                               gr_tensor *out, ts_error *err) {
  const gr_tensor *x = &ins[0], *ind = &ins[1];
  int64_t axis = gr_attr_int(n, "axis", 0);
  if (axis < 0) axis += x->ndim;
  size_t es = ts_dtype_elem_bytes(x->dtype);
  int64_t xs[TS_MAX_DIMS], idx[TS_MAX_DIMS] = {0}, len = x->shape[axis];
  strides_of(x->shape, x->ndim, xs);
  int64_t total = gr_tensor_elems(out);
  for (int64_t e = 0; e < total; e++) {
    int64_t k = ts_host_get_int(ind->data, ind->dtype, e), off = 0;
    if (k < 0) k += len;
    if (k < 0 || k >= len)
      return TS_ERR(err, TS_ERANGE,
                    "node '%s' (GatherElements): index %lld out of range "
                    "[0, %lld)",
                    n->name, (long long)k, (long long)len);
    for (int d = 0; d < x->ndim; d++) off += (d == axis ? k : idx[d]) * xs[d];
    memcpy((char *)out->data + e * (int64_t)es,
           (const char *)x->data + off * (int64_t)es, es);
    for (int d = out->ndim - 1; d >= 0; d--) {
      if (++idx[d] < out->shape[d]) break;
      idx[d] = 0;
    }
  }
  return TS_OK;
}

static int run_slice(const gr_node *n, const gr_tensor *ins, gr_tensor *out) {
  const gr_tensor *x = &ins[0];
  int64_t start[TS_MAX_DIMS] = {0}, step[TS_MAX_DIMS];
  for (int i = 0; i < TS_MAX_DIMS; i++) step[i] = 1;
  int64_t ns = gr_tensor_elems(&ins[1]);
  for (int64_t i = 0; i < ns; i++) {
    int64_t a = n->n_inputs > 3 && ins[3].data
                    ? ts_host_get_int(ins[3].data, ins[3].dtype, i)
                    : i;
    if (a < 0) a += x->ndim;
    int64_t st = n->n_inputs > 4 && ins[4].data
                     ? ts_host_get_int(ins[4].data, ins[4].dtype, i)
                     : 1;
    int64_t b = ts_host_get_int(ins[1].data, ins[1].dtype, i), d = x->shape[a];
    if (b < 0) b += d;
    if (st > 0)
      b = b < 0 ? 0 : b > d ? d : b;
    else
      b = b < 0 ? -1 : b > d - 1 ? d - 1 : b;
    start[a] = b;
    step[a] = st;
  }
  int64_t ist[TS_MAX_DIMS], idx[TS_MAX_DIMS] = {0};
  strides_of(x->shape, x->ndim, ist);
  size_t es = ts_dtype_elem_bytes(x->dtype);
  int64_t total = gr_tensor_elems(out);
  for (int64_t i = 0; i < total; i++) {
    int64_t src = 0;
    for (int d = 0; d < x->ndim; d++)
      src += (start[d] + idx[d] * step[d]) * ist[d];
    memcpy((char *)out->data + i * es, (const char *)x->data + src * es, es);
    for (int d = out->ndim - 1; d >= 0; d--) {
      if (++idx[d] < out->shape[d]) break;
      idx[d] = 0;
    }
  }
  return TS_OK;
}

/* The offset into quantization parameter p (one value, a vector along
 * `axis`, or a shape broadcasting against the output) at output index
 * idx. */
static int64_t quant_param_index(const gr_tensor *p, const gr_tensor *out,
                                 const int64_t *idx, int axis) {
  int64_t n = gr_tensor_elems(p);
  if (n == 1) return 0;
  if (p->ndim == 1 && axis >= 0 && axis < out->ndim &&
      p->shape[0] == out->shape[axis])
    return idx[axis];
  return bcast_index(idx, out->ndim, p->shape, p->ndim);
}

/* QuantizeLinear: saturate(round_half_even(x / scale) + zero_point);
 * DequantizeLinear: (x - zero_point) * scale. */
static int run_quant(const gr_node *n, const gr_tensor *ins, gr_tensor *out) {
  bool q = !strcmp(n->op, "QuantizeLinear");
  const gr_tensor *x = &ins[0], *s = &ins[1];
  const gr_tensor *z = n->n_inputs > 2 && ins[2].data ? &ins[2] : NULL;
  int axis = (int)gr_attr_int(n, "axis", 1);
  if (axis < 0) axis += out->ndim;
  double lo = 0, hi = 255;
  if (q && out->dtype.code == TS_DT_INT) lo = -128, hi = 127;
  int64_t total = gr_tensor_elems(out), idx[TS_MAX_DIMS] = {0};
  for (int64_t i = 0; i < total; i++) {
    double v = ts_host_get(x->data, x->dtype, i);
    double sc =
        ts_host_get(s->data, s->dtype, quant_param_index(s, out, idx, axis));
    double zp =
        z ? ts_host_get(z->data, z->dtype, quant_param_index(z, out, idx, axis))
          : 0;
    if (q) {
      /* the quotient rounded to float32 first, as ONNX computes it: a
       * quotient just below .5 in double can be .5 in float32 */
      double r = nearbyint((double)((float)v / (float)sc)) + zp;
      r = r < lo ? lo : r > hi ? hi : r;
      ts_host_set(out->data, out->dtype, i, isnan(v) ? zp : r);
    } else {
      ts_host_set(out->data, out->dtype, i, (v - zp) * sc);
    }
    for (int d = out->ndim - 1; d >= 0; d--) {
      if (++idx[d] < out->shape[d]) break;
      idx[d] = 0;
    }
  }
  return TS_OK;
}

/* x with its 4 axes permuted (out[d] = x axis perm[d]) into a new
 * malloc'd tensor; data NULL when memory runs out. */
static gr_tensor permuted(const gr_tensor *x, const int64_t *perm) {
  gr_tensor t = {.dtype = x->dtype, .ndim = 4};
  for (int d = 0; d < 4; d++) t.shape[d] = x->shape[perm[d]];
  t.data = ts_malloc(
      (size_t)gr_tensor_elems(&t) * ts_dtype_elem_bytes(x->dtype) + 1);
  if (!t.data) return t;
  gr_node n = {.n_attrs = 1};
  gr_attr a = {
      .name = "perm", .kind = GR_ATTR_INTS, .n = 4, .ints = (int64_t *)perm};
  n.attrs = &a;
  run_transpose(&n, x, &t);
  return t;
}

/* Blocked conv weights [O/B, KH, KW, I, B] as OIHW (data NULL when out of
 * memory). */
static gr_tensor unblocked(const gr_tensor *w) {
  int64_t NB = w->shape[0], KH = w->shape[1], KW = w->shape[2], I = w->shape[3],
          B = w->shape[4];
  gr_tensor t = {.dtype = w->dtype, .ndim = 4, .shape = {NB * B, I, KH, KW}};
  size_t es = ts_dtype_elem_bytes(w->dtype);
  t.data = ts_malloc((size_t)gr_tensor_elems(&t) * es + 1);
  if (!t.data) return t;
  const uint8_t *src = w->data;
  uint8_t *dst = t.data;
  int64_t i = 0;
  for (int64_t ob = 0; ob < NB; ob++)
    for (int64_t h = 0; h < KH; h++)
      for (int64_t x = 0; x < KW; x++)
        for (int64_t ci = 0; ci < I; ci++)
          for (int64_t oi = 0; oi < B; oi++, i++)
            memcpy(dst + ((((ob * B + oi) * I + ci) * KH + h) * KW + x) * es,
                   src + i * es, es);
  return t;
}

/* A MatMul with blocked weights [N/B, K, B] (the layout pass's) runs on
 * an unblocked [K, N] copy: a reference, not a fast path. */
static int run_matmul_blocked(const gr_node *n, const gr_tensor *ins,
                              gr_tensor *out) {
  const gr_tensor *w = &ins[1];
  int r = w->ndim;
  if (r < 3) return TS_EINVAL;
  /* [..., N/B, K, B] -> [..., K, N], one matrix of the batch at a time */
  int64_t NB = w->shape[r - 3], K = w->shape[r - 2], B = w->shape[r - 1];
  int64_t batch = 1;
  gr_tensor in2[4] = {ins[0], {.dtype = w->dtype, .ndim = r - 1}};
  for (int k = 2; k < n->n_inputs && k < 4; k++) in2[k] = ins[k];
  for (int d = 0; d < r - 3; d++) batch *= (in2[1].shape[d] = w->shape[d]);
  in2[1].shape[r - 3] = K, in2[1].shape[r - 2] = NB * B;
  size_t es = ts_dtype_elem_bytes(w->dtype);
  uint8_t *dst = ts_malloc((size_t)(batch * NB * B * K) * es + 1);
  if (!dst) return TS_ENOMEM;
  const uint8_t *src = w->data;
  for (int64_t t = 0, i = 0; t < batch; t++)
    for (int64_t nb = 0; nb < NB; nb++)
      for (int64_t k = 0; k < K; k++)
        for (int64_t j = 0; j < B; j++, i++)
          memcpy(dst + ((t * K + k) * NB * B + nb * B + j) * es, src + i * es,
                 es);
  in2[1].data = dst;
  int rc = run_matmul(n, in2, out);
  free(dst);
  return rc;
}

/* A channels-last Conv or pool (see gr_node_channels_last) runs as its
 * NCHW form on permuted copies: a reference, not a fast path. */
static int run_channels_last(const ts_graph *g, const gr_node *n,
                             const gr_tensor *ins, gr_tensor *out) {
  static const int64_t to_nchw[4] = {0, 3, 1, 2}, to_nhwc[4] = {0, 2, 3, 1};
  static const int64_t w_to_oihw[4] = {3, 2, 0, 1};
  bool conv = gr_op_is_conv(n->op);
  gr_tensor in2[4] = {0}, o = {.dtype = out->dtype, .ndim = 4};
  for (int d = 0; d < 4; d++) o.shape[d] = out->shape[to_nchw[d]];
  in2[0] = permuted(&ins[0], to_nchw);
  int64_t B = conv ? gr_conv_weight_block(n) : 0;
  if (conv && B)
    in2[1] = unblocked(&ins[1]);
  else if (conv)
    in2[1] = permuted(&ins[1], w_to_oihw);
  for (int k = 2; conv && k < n->n_inputs && k < 4; k++) in2[k] = ins[k];
  o.data =
      ts_malloc((size_t)gr_tensor_elems(&o) * ts_dtype_elem_bytes(o.dtype) + 1);
  int rc = TS_ENOMEM;
  if (in2[0].data && (!conv || in2[1].data) && o.data) {
    rc = conv ? run_conv(g, n, in2, &o) : run_pool(n, in2, &o);
    if (rc == TS_OK) {
      gr_node t = {.n_attrs = 1};
      gr_attr a = {.name = "perm",
                   .kind = GR_ATTR_INTS,
                   .n = 4,
                   .ints = (int64_t *)to_nhwc};
      t.attrs = &a;
      run_transpose(&t, &o, out);
    }
  }
  free(in2[0].data);
  if (conv) free(in2[1].data);
  free(o.data);
  return rc;
}

/* x (5-D) with its axes permuted by perm into a new malloc'd tensor of
 * rank nd (shape `shape`, the same elements); data NULL when out of
 * memory. */
static gr_tensor permuted5(const gr_tensor *x, const int64_t *perm, int nd,
                           const int64_t *shape) {
  gr_tensor t = {.dtype = x->dtype, .ndim = 5};
  for (int d = 0; d < 5; d++) t.shape[d] = x->shape[perm[d]];
  t.data = ts_malloc(
      (size_t)gr_tensor_elems(&t) * ts_dtype_elem_bytes(x->dtype) + 1);
  if (!t.data) return t;
  gr_node n = {.n_attrs = 1};
  gr_attr a = {
      .name = "perm", .kind = GR_ATTR_INTS, .n = 5, .ints = (int64_t *)perm};
  n.attrs = &a;
  run_transpose(&n, x, &t);
  t.ndim = nd;
  memcpy(t.shape, shape, sizeof(int64_t) * (size_t)nd);
  return t;
}

/* A channel-blocked Conv (block.c) runs as its NCHW form on copies: data
 * [N, C/B, H, W, B] as [N, C, H, W], weights [CO/B, KH, KW, CI, B] as
 * OIHW, the bias [CO/B, 1, 1, B] as the [CO] it is; a reference, not a
 * fast path. */
static int run_conv_blocked(const ts_graph *g, const gr_node *n,
                            const gr_tensor *ins, gr_tensor *out) {
  static const int64_t from_blocked[5] = {0, 1, 4, 2, 3};
  static const int64_t to_blocked[5] = {0, 1, 3, 4, 2};
  const int64_t *xs = ins[0].shape, *ys = out->shape;
  int64_t nchw[4] = {xs[0], xs[1] * xs[4], xs[2], xs[3]};
  gr_tensor in2[3] = {0};
  in2[0] = permuted5(&ins[0], from_blocked, 4, nchw);
  in2[1] = unblocked(&ins[1]);
  if (n->n_inputs > 2 && ins[2].data) {
    in2[2] = ins[2];
    in2[2].ndim = 1;
    in2[2].shape[0] = ys[1] * ys[4];
  }
  gr_tensor o = {.dtype = out->dtype,
                 .ndim = 5,
                 .shape = {ys[0], ys[1], ys[4], ys[2], ys[3]}};
  o.data =
      ts_malloc((size_t)gr_tensor_elems(&o) * ts_dtype_elem_bytes(o.dtype) + 1);
  int rc = TS_ENOMEM;
  if (in2[0].data && in2[1].data && o.data) {
    o.ndim = 4;
    o.shape[1] = ys[1] * ys[4], o.shape[2] = ys[2], o.shape[3] = ys[3];
    rc = run_conv(g, n, in2, &o);
    if (rc == TS_OK) { /* [N, CO, OH, OW] seen as [N, CO/B, B, OH, OW] */
      o.ndim = 5;
      o.shape[1] = ys[1], o.shape[2] = ys[4], o.shape[3] = ys[2];
      o.shape[4] = ys[3];
      gr_node t = {.n_attrs = 1};
      gr_attr a = {.name = "perm",
                   .kind = GR_ATTR_INTS,
                   .n = 5,
                   .ints = (int64_t *)to_blocked};
      t.attrs = &a;
      run_transpose(&t, &o, out);
    }
  }
  free(in2[0].data);
  free(in2[1].data);
  free(o.data);
  return rc;
}

int gr_kernel_run(const ts_graph *g, const gr_node *n, const gr_tensor *ins,
                  gr_tensor *outs, ts_error *err) {
  const char *op = n->op;
  gr_tensor *out = &outs[0];
  int rc = TS_OK;
  if (!strcmp(op, "Reshape") || !strcmp(op, "Flatten") ||
      !strcmp(op, "Squeeze") || !strcmp(op, "Unsqueeze") ||
      (!strcmp(op, "Identity")) ||
      (!strcmp(op, "Dropout") && ts_dtype_eq(out->dtype, ins[0].dtype))) {
    memcpy(out->data, ins[0].data,
           (size_t)gr_tensor_elems(out) * ts_dtype_elem_bytes(out->dtype));
    if (n->n_outputs > 1 && outs[1].data) /* Dropout's mask: all kept */
      memset(outs[1].data, 1, (size_t)gr_tensor_elems(&outs[1]));
  } else if (!strcmp(op, "EyeLike")) {
    int64_t k = gr_attr_int(n, "k", 0), R = out->shape[0], C = out->shape[1];
    for (int64_t i = 0; i < R; i++)
      for (int64_t j = 0; j < C; j++)
        ts_host_set(out->data, out->dtype, i * C + j, j - i == k);
  } else if (!strcmp(op, "Size")) {
    *(int64_t *)out->data = gr_tensor_elems(&ins[0]);
  } else if (!strcmp(op, "Shape")) {
    int64_t s = gr_attr_int(n, "start", 0);
    if (s < 0) s += ins[0].ndim;
    if (s < 0) s = 0;
    for (int64_t i = 0; i < out->shape[0]; i++)
      ((int64_t *)out->data)[i] = ins[0].shape[s + i];
  } else if (!strcmp(op, "Cast") || !strcmp(op, "CastLike")) {
    int64_t total = gr_tensor_elems(out);
    for (int64_t i = 0; i < total; i++)
      ts_host_set(out->data, out->dtype, i,
                  ts_host_get(ins[0].data, ins[0].dtype, i));
  } else if (!strcmp(op, "Transpose"))
    rc = run_transpose(n, &ins[0], out);
  else if (!strcmp(op, "Concat"))
    rc = run_concat(n, ins, out);
  else if (!strcmp(op, "Gather"))
    rc = run_gather(n, ins, out, err);
  else if (!strcmp(op, "GatherElements"))
    rc = run_gather_elements(n, ins, out, err);
  else if (!strcmp(op, "Slice"))
    rc = run_slice(n, ins, out);
  else if (gr_node_blocked(n) && !strcmp(op, "Conv"))
    rc = run_conv_blocked(g, n, ins, out);
  else if (gr_node_channels_last(n) &&
           (gr_op_is_conv(op) || strstr(op, "Pool") != NULL))
    rc = run_channels_last(g, n, ins, out);
  else if (gr_op_is_conv(op) || !strcmp(op, "ConvTranspose"))
    rc = run_conv(g, n, ins, out);
  else if (!strcmp(op, "QuantizeLinear") || !strcmp(op, "DequantizeLinear"))
    rc = run_quant(n, ins, out);
  else if (!strcmp(op, "MaxPool") || !strcmp(op, "AveragePool") ||
           !strcmp(op, "GlobalAveragePool"))
    rc = run_pool(n, ins, out);
  else if (gr_op_is_matmul(op) && gr_matmul_weight_block(n))
    rc = run_matmul_blocked(n, ins, out);
  else if (gr_op_is_matmul(op) || !strcmp(op, "Gemm"))
    rc = run_matmul(n, ins, out);
  else if (!strcmp(op, "Softmax") || !strcmp(op, "LayerNormalization"))
    rc = run_rows(n, ins, out);
  else if (!strcmp(op, "WinogradInput"))
    rc = gr_winograd_run_input(n, &ins[0], out);
  else if (!strcmp(op, "WinogradOutput"))
    rc = gr_winograd_run_output(&ins[0], n->n_inputs > 1 ? &ins[1] : NULL, out);
  else if (!strncmp(op, "Reduce", 6))
    rc = run_reduce(g, n, ins, out);
  else if (!strcmp(op, "BatchNormalization"))
    rc = run_batchnorm(n, ins, out);
  else if (!strcmp(op, "ConstantOfShape") || !strcmp(op, "Range") ||
           !strcmp(op, "Trilu") || !strcmp(op, "Expand"))
    rc = run_fill(n, ins, out);
  else if (gr_ew_lookup(op))
    rc = run_ew(gr_ew_lookup(op), n, ins, out);
  else if (gr_kernel_folds(op))
    rc = run_elementwise(n, ins, out);
  else
    return TS_ERR(err, TS_EUNSUPPORTED, "node '%s': no kernel for '%s'",
                  n->name, op);
  if (rc == TS_ENOMEM)
    return TS_ERR(err, TS_ENOMEM, "node '%s' (%s): out of memory", n->name, op);
  return rc;
}
