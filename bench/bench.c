/*
 * bench.c — the vendor-baseline driver: parses a workload's canonical spec
 * into the operation the baselines implement and checks it against the
 * workload's parameters, sets up seeded host buffers in the workload's
 * layout, has the vendor's file prepare its library call, times that call
 * with the runtime's evaluator and reports the median, GFLOP/s and the
 * output.
 */
#include "bench/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const vendor_names[TS_BENCH_N_VENDORS] = {"openblas",
                                                             "onednn", "naive"};

const char *ts_bench_vendor_name(ts_bench_vendor v) {
  if ((int)v < 0 || (int)v >= TS_BENCH_N_VENDORS) return NULL;
  return vendor_names[v];
}

int ts_bench_vendor_parse(const char *name, ts_bench_vendor *out,
                          ts_error *err) {
  for (int i = 0; name && i < TS_BENCH_N_VENDORS; i++) {
    if (strcmp(name, vendor_names[i]) == 0) {
      *out = (ts_bench_vendor)i;
      return TS_OK;
    }
  }
  return TS_ERR(err, TS_EINVAL,
                "unknown vendor '%s'; known vendors: openblas onednn naive",
                name ? name : "(null)");
}

ts_bench_options ts_bench_options_default(void) {
  return (ts_bench_options){
      .threads = 0,
      .eval = {.number = 1,
               .repeat = 5,
               .min_repeat_ms = 100,
               .flush_cache = false,
               .warmup = 2},
      .seed = 1,
      .rt = NULL,
      .keep_output = true,
  };
}

/* ---- the operation, from the spec ---- */

/* Finds the token `key=VALUE` after the operator name in spec. */
static bool spec_value(const char *spec, const char *key, const char **val,
                       size_t *len) {
  size_t kl = strlen(key);
  const char *p = spec + strcspn(spec, " \t");
  while (*p) {
    p += strspn(p, " \t");
    size_t n = strcspn(p, " \t");
    if (n > kl && memcmp(p, key, kl) == 0 && p[kl] == '=') {
      *val = p + kl + 1;
      *len = n - kl - 1;
      return true;
    }
    p += n;
  }
  return false;
}

/* A key of the spec and where its integer value goes. */
typedef struct key_ref {
  const char *key;
  int64_t *dst;
} key_ref;

/* Reads each key as a non-negative decimal integer. */
static int read_keys(const ts_workload *w, const key_ref *keys, int n,
                     ts_error *err) {
  for (int i = 0; i < n; i++) {
    const char *v;
    size_t len;
    if (!spec_value(w->spec, keys[i].key, &v, &len))
      return TS_ERR(err, TS_EINVAL, "workload '%s': the spec has no key '%s'",
                    w->spec, keys[i].key);
    char buf[32], *end;
    long long x = -1;
    if (len > 0 && len < sizeof buf) {
      memcpy(buf, v, len);
      buf[len] = '\0';
      errno = 0;
      x = strtoll(buf, &end, 10);
      if (*end || errno) x = -1;
    }
    if (x < 0)
      return TS_ERR(err, TS_EINVAL,
                    "workload '%s': key '%s' is not a non-negative integer",
                    w->spec, keys[i].key);
    *keys[i].dst = x;
  }
  return TS_OK;
}

/* Whether the spec's `key` has the value `word`. */
static bool spec_is(const ts_workload *w, const char *key, const char *word) {
  const char *v;
  size_t len;
  return spec_value(w->spec, key, &v, &len) && len == strlen(word) &&
         memcmp(v, word, len) == 0;
}

static void shape_str(const int64_t *dims, int ndim, char *buf, size_t size) {
  size_t n = (size_t)snprintf(buf, size, "[");
  for (int d = 0; d < ndim && n < size; d++)
    n += (size_t)snprintf(buf + n, size - n, "%s%lld", d ? ", " : "",
                          (long long)dims[d]);
  if (n < size) snprintf(buf + n, size - n, "]");
}

/* Checks that parameter i is a compact t[dims]. */
static int check_param(const ts_workload *w, int i, ts_dtype t, int ndim,
                       const int64_t *dims, ts_error *err) {
  const ts_buffer *b = ts_func_param(w->func, i);
  bool same = ts_dtype_eq(ts_buffer_dtype(b), t) && ts_buffer_ndim(b) == ndim &&
              !ts_buffer_strides(b);
  for (int d = 0; same && d < ndim; d++) same = ts_buffer_dim(b, d) == dims[d];
  if (same) return TS_OK;
  char want[160], got[160], wt[32], gt[32];
  shape_str(dims, ndim, want, sizeof want);
  shape_str(ts_buffer_shape(b), ts_buffer_ndim(b), got, sizeof got);
  return TS_ERR(
      err, TS_EINVAL,
      "workload '%s': parameter %d ('%s') is %s%s%s; the spec "
      "implies a compact %s%s",
      w->spec, i, ts_buffer_name(b), ts_dtype_str(ts_buffer_dtype(b), gt), got,
      ts_buffer_strides(b) ? " with strides" : "", ts_dtype_str(t, wt), want);
}

/* Up to 4 parameters, each up to 5 dims: the shapes an operation implies. */
typedef struct param_shapes {
  int n;
  ts_dtype dtype[4];
  int ndim[4];
  int64_t dims[4][5];
} param_shapes;

static void add_shape(param_shapes *s, ts_dtype t, int ndim, int64_t d0,
                      int64_t d1, int64_t d2, int64_t d3) {
  int i = s->n++;
  s->dtype[i] = t;
  s->ndim[i] = ndim;
  int64_t d[5] = {d0, d1, d2, d3, 0};
  memcpy(s->dims[i], d, sizeof d);
}

/* The parameters of op, in order; the output last. */
static void implied_shapes(const bench_op *op, param_shapes *s) {
  ts_dtype in = op->in, out = op->out;
  int64_t cig = op->ci / op->groups;
  s->n = 0;
  switch (op->kind) {
  case BENCH_MATMUL: {
    bool batched = strcmp(op->op, "batch_matmul") == 0;
    int64_t a0 = op->trans_a ? op->k : op->m, a1 = op->trans_a ? op->m : op->k;
    int64_t b0 = op->trans_b ? op->n : op->k, b1 = op->trans_b ? op->k : op->n;
    if (batched) {
      add_shape(s, in, 3, op->batch, a0, a1, 0);
      add_shape(s, in, 3, op->batch, b0, b1, 0);
      add_shape(s, out, 3, op->batch, op->m, op->n, 0);
    } else {
      add_shape(s, in, 2, a0, a1, 0, 0);
      add_shape(s, in, 2, b0, b1, 0, 0);
      add_shape(s, out, 2, op->m, op->n, 0, 0);
    }
    break;
  }
  case BENCH_DENSE:
    add_shape(s, in, 2, op->m, op->k, 0, 0);
    add_shape(s, in, 2, op->n, op->k, 0, 0);
    if (op->bias) add_shape(s, out, 1, op->n, 0, 0, 0);
    add_shape(s, out, 2, op->m, op->n, 0, 0);
    break;
  case BENCH_CONV_NCHW:
    add_shape(s, in, 4, op->nb, op->ci, op->h, op->w);
    add_shape(s, in, 4, op->co, cig, op->kh, op->kw);
    add_shape(s, out, 4, op->nb, op->co, op->oh, op->ow);
    break;
  case BENCH_CONV_NHWC:
    add_shape(s, in, 4, op->nb, op->h, op->w, op->ci);
    if (op->weight_block > 0) { /* [CO/B, KH, KW, CI, B] */
      add_shape(s, in, 5, op->co / op->weight_block, op->kh, op->kw, cig);
      s->dims[s->n - 1][4] = op->weight_block;
    } else {
      add_shape(s, in, 4, op->kh, op->kw, cig, op->co);
    }
    add_shape(s, out, 4, op->nb, op->oh, op->ow, op->co);
    break;
  case BENCH_DEPTHWISE:
    add_shape(s, in, 4, op->nb, op->h, op->w, op->ci);
    add_shape(s, in, 3, op->kh, op->kw, op->ci, 0);
    add_shape(s, out, 4, op->nb, op->oh, op->ow, op->co);
    break;
  case BENCH_POOL:
    add_shape(s, in, 4, op->nb, op->h, op->w, op->ci);
    add_shape(s, out, 4, op->nb, op->oh, op->ow, op->co);
    break;
  case BENCH_SOFTMAX:
    add_shape(s, in, 2, op->rows, op->cols, 0, 0);
    add_shape(s, out, 2, op->rows, op->cols, 0, 0);
    break;
  case BENCH_LAYER_NORM:
    add_shape(s, in, 2, op->rows, op->cols, 0, 0);
    add_shape(s, in, 1, op->cols, 0, 0, 0);
    add_shape(s, in, 1, op->cols, 0, 0, 0);
    add_shape(s, out, 2, op->rows, op->cols, 0, 0);
    break;
  case BENCH_OTHER: break;
  }
}

/* Output size of a window of `extent` (dilated) over `in` padded on both
 * sides; < 1 when the window does not fit. */
static int64_t out_size(int64_t in, int64_t pad, int64_t extent,
                        int64_t stride) {
  int64_t span = in + 2 * pad - extent;
  return span < 0 || stride < 1 ? 0 : span / stride + 1;
}

int bench_op_parse(const ts_workload *w, bench_op *op, ts_error *err) {
  memset(op, 0, sizeof *op);
  op->op = w->op;
  op->batch = 1;
  op->dilation = 1;
  op->groups = 1;
  int64_t ta = 0, tb = 0, bias = 0;
  int rc = TS_OK;
  if (!strcmp(w->op, "matmul") || !strcmp(w->op, "batch_matmul")) {
    op->kind = BENCH_MATMUL;
    key_ref keys[] = {{"M", &op->m},        {"N", &op->n},
                      {"K", &op->k},        {"transpose_a", &ta},
                      {"transpose_b", &tb}, {"B", &op->batch}};
    int n = strcmp(w->op, "matmul") == 0 ? 5 : 6;
    rc = read_keys(w, keys, n, err);
  } else if (!strcmp(w->op, "dense")) {
    op->kind = BENCH_DENSE;
    key_ref keys[] = {
        {"M", &op->m}, {"N", &op->n}, {"K", &op->k}, {"bias", &bias}};
    rc = read_keys(w, keys, 4, err);
  } else if (!strcmp(w->op, "conv2d_nchw") || !strcmp(w->op, "conv2d_nhwc")) {
    op->kind =
        strcmp(w->op, "conv2d_nchw") == 0 ? BENCH_CONV_NCHW : BENCH_CONV_NHWC;
    key_ref keys[] = {{"N", &op->nb},         {"H", &op->h},
                      {"W", &op->w},          {"CI", &op->ci},
                      {"CO", &op->co},        {"KH", &op->kh},
                      {"KW", &op->kw},        {"stride", &op->stride},
                      {"pad", &op->pad},      {"dilation", &op->dilation},
                      {"groups", &op->groups}};
    rc = read_keys(w, keys, 11, err);
    /* left out of the canonical spec when 0 */
    key_ref wb = {"weight_block", &op->weight_block};
    const char *v;
    size_t len;
    if (!rc && spec_value(w->spec, "weight_block", &v, &len))
      rc = read_keys(w, &wb, 1, err);
  } else if (!strcmp(w->op, "depthwise_conv2d_nhwc") ||
             !strcmp(w->op, "pool2d_nhwc")) {
    bool pool = strcmp(w->op, "pool2d_nhwc") == 0;
    op->kind = pool ? BENCH_POOL : BENCH_DEPTHWISE;
    key_ref keys[] = {{"N", &op->nb},          {"H", &op->h},
                      {"W", &op->w},           {"C", &op->ci},
                      {"KH", &op->kh},         {"KW", &op->kw},
                      {"stride", &op->stride}, {"pad", &op->pad}};
    rc = read_keys(w, keys, 8, err);
    op->co = op->ci;
    if (!pool) op->groups = op->ci;
    op->avg = pool && spec_is(w, "kind", "avg");
    if (!rc && pool && !op->avg && !spec_is(w, "kind", "max"))
      rc = TS_ERR(err, TS_EINVAL,
                  "workload '%s': key 'kind' is neither max nor avg", w->spec);
  } else if (!strcmp(w->op, "softmax") || !strcmp(w->op, "layer_norm")) {
    op->kind = strcmp(w->op, "softmax") == 0 ? BENCH_SOFTMAX : BENCH_LAYER_NORM;
    key_ref keys[] = {{"N", &op->rows}, {"D", &op->cols}};
    rc = read_keys(w, keys, 2, err);
  } else {
    op->kind = BENCH_OTHER;
    return TS_OK;
  }
  if (rc) return rc;
  op->trans_a = ta != 0;
  op->trans_b = tb != 0;
  op->bias = bias != 0;
  if (op->kind >= BENCH_CONV_NCHW && op->kind <= BENCH_POOL) {
    if (op->groups < 1 || op->ci % op->groups || op->co % op->groups ||
        op->stride < 1 || op->dilation < 1)
      return TS_ERR(err, TS_EINVAL,
                    "workload '%s': groups, stride or dilation out of range",
                    w->spec);
    op->oh =
        out_size(op->h, op->pad, op->dilation * (op->kh - 1) + 1, op->stride);
    op->ow =
        out_size(op->w, op->pad, op->dilation * (op->kw - 1) + 1, op->stride);
    if (op->oh < 1 || op->ow < 1)
      return TS_ERR(err, TS_EINVAL,
                    "workload '%s': the window does not fit the padded input",
                    w->spec);
  }

  /* The parameters: the dtypes of the first and last, the shapes of all. */
  int n = ts_func_n_params(w->func);
  if (n < 2)
    return TS_ERR(err, TS_EINVAL, "workload '%s': expected parameters, got %d",
                  w->spec, n);
  op->in = ts_buffer_dtype(ts_func_param(w->func, 0));
  op->out = ts_buffer_dtype(ts_func_param(w->func, n - 1));
  param_shapes s;
  implied_shapes(op, &s);
  if (n != s.n)
    return TS_ERR(err, TS_EINVAL,
                  "workload '%s': the function has %d parameters; the spec "
                  "implies %d",
                  w->spec, n, s.n);
  for (int i = 0; i < n; i++) {
    if ((rc = check_param(w, i, s.dtype[i], s.ndim[i], s.dims[i], err)))
      return rc;
    if (ts_func_param_is_output(w->func, i) != (i == n - 1))
      return TS_ERR(err, TS_EINVAL,
                    "workload '%s': parameter %d ('%s') %s written; the "
                    "baselines expect exactly the last parameter as output",
                    w->spec, i, ts_buffer_name(ts_func_param(w->func, i)),
                    i == n - 1 ? "is not" : "is");
  }
  return TS_OK;
}

bool ts_bench_conv_of(const ts_workload *w, ts_bench_conv *out) {
  bench_op op;
  ts_error err;
  if (!w || strcmp(w->op, "conv2d_nhwc") || bench_op_parse(w, &op, &err))
    return false;
  *out = (ts_bench_conv){.n = op.nb,
                         .h = op.h,
                         .w = op.w,
                         .ci = op.ci,
                         .co = op.co,
                         .kh = op.kh,
                         .kw = op.kw,
                         .stride = op.stride,
                         .pad = op.pad,
                         .dilation = op.dilation,
                         .groups = op.groups,
                         .weight_block = op.weight_block,
                         .float32 = ts_dtype_eq(op.in, TS_FLOAT32) &&
                                    ts_dtype_eq(op.out, TS_FLOAT32)};
  return true;
}

/* ---- measurement ---- */

static void free_case(bench_case *c, bool keep_output) {
  for (int i = 0; i < c->n_params; i++)
    if (!(keep_output && i == c->out)) free(c->data[i]);
}

/* Allocates and fills the case's buffers. */
static int setup_case(bench_case *c, const ts_workload *w, uint64_t seed,
                      ts_error *err) {
  c->n_params = ts_func_n_params(w->func);
  c->out = c->n_params - 1;
  for (int i = 0; i < c->n_params; i++) {
    const ts_buffer *b = ts_func_param(w->func, i);
    c->dtype[i] = ts_buffer_dtype(b);
    c->elems[i] = ts_buffer_elems(b);
    size_t bytes = (size_t)c->elems[i] * ts_dtype_elem_bytes(c->dtype[i]);
    size_t rounded = (bytes + 63) & ~(size_t)63;
    c->data[i] = aligned_alloc(64, rounded ? rounded : 64);
    if (!c->data[i]) {
      c->n_params = i;
      free_case(c, false);
      return TS_ERR(err, TS_ENOMEM,
                    "bench: cannot allocate %zu bytes for parameter %d ('%s') "
                    "of %s",
                    bytes, i, ts_buffer_name(b), w->name);
    }
    if (i == c->out)
      memset(c->data[i], 0, bytes);
    else
      ts_host_fill_random(c->data[i], c->dtype[i], c->elems[i], seed + i);
  }
  return TS_OK;
}

/* A prepared vendor call and the repeats measured so far. */
struct ts_bench_session {
  ts_bench_vendor vendor;
  const ts_workload *w;
  ts_bench_options opts;
  bench_case c;
  bench_kernel k;
  int number;      /* runs per repeat, carried from one measure to the next */
  double *seconds; /* every repeat measured, in order */
  int n_seconds, cap_seconds;
};

int ts_bench_open(ts_bench_vendor v, const ts_workload *w,
                  const ts_bench_options *opts_in, ts_bench_session **out,
                  ts_error *err) {
  if (out) *out = NULL;
  const char *vname = ts_bench_vendor_name(v);
  if (!vname) return TS_ERR(err, TS_EINVAL, "bench: unknown vendor %d", (int)v);
  if (!w || !w->func || !out)
    return TS_ERR(err, TS_EINVAL, "bench: NULL workload or session");
  ts_bench_options opts = opts_in ? *opts_in : ts_bench_options_default();
  if (opts.threads > TS_RT_MAX_THREADS)
    return TS_ERR(err, TS_EINVAL, "bench: threads = %d is over %d",
                  opts.threads, TS_RT_MAX_THREADS);
  if (opts.eval.flush_cache && !opts.rt)
    return TS_ERR(err, TS_EINVAL,
                  "bench: eval.flush_cache needs opts.rt (it owns the flush "
                  "buffer)");
  ts_bench_session *s = calloc(1, sizeof *s);
  if (!s) return TS_ERR(err, TS_ENOMEM, "bench: out of memory");
  s->vendor = v;
  s->w = w;
  s->opts = opts;
  s->c.w = w;
  s->number = opts.eval.number > 0 ? opts.eval.number : 1;
  int rc = bench_op_parse(w, &s->c.op, err);
  if (!rc && s->c.op.kind == BENCH_OTHER)
    rc = TS_ERR(err, TS_EUNSUPPORTED,
                "%s: not applicable: no baseline for operator '%s'", vname,
                w->op);
  if (rc) {
    free(s);
    return rc;
  }
  s->c.threads = opts.threads;
  if (s->c.threads <= 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    s->c.threads = n > 0 && n <= TS_RT_MAX_THREADS ? (int)n : 1;
  }
  if ((rc = setup_case(&s->c, w, opts.seed, err))) {
    free(s);
    return rc;
  }
  switch (v) {
  case TS_BENCH_OPENBLAS: rc = openblas_prepare(&s->c, &s->k, err); break;
  case TS_BENCH_ONEDNN: rc = onednn_prepare(&s->c, &s->k, err); break;
  case TS_BENCH_NAIVE: rc = naive_prepare(&s->c, &s->k, err); break;
  }
  if (rc) {
    free_case(&s->c, false);
    free(s);
    return rc;
  }
  *out = s;
  return TS_OK;
}

int ts_bench_measure(ts_bench_session *s, const ts_eval_config *eval_in,
                     ts_error *err) {
  if (!s) return TS_ERR(err, TS_EINVAL, "bench: NULL session");
  ts_eval_config eval = eval_in ? *eval_in : s->opts.eval;
  if (eval.repeat < 1 || eval.repeat > 100000)
    return TS_ERR(err, TS_EINVAL,
                  "bench: bad eval field repeat = %d (want 1..100000)",
                  eval.repeat);
  if (eval.flush_cache && !s->opts.rt)
    return TS_ERR(err, TS_EINVAL,
                  "bench: eval.flush_cache needs opts.rt (it owns the flush "
                  "buffer)");
  if (s->n_seconds + eval.repeat > s->cap_seconds) {
    int cap = s->cap_seconds ? s->cap_seconds : 16;
    while (cap < s->n_seconds + eval.repeat) cap *= 2;
    double *grown = realloc(s->seconds, sizeof(double) * (size_t)cap);
    if (!grown) return TS_ERR(err, TS_ENOMEM, "bench: out of memory");
    s->seconds = grown;
    s->cap_seconds = cap;
  }
  /* the runs per repeat found earlier carry over: later rounds do not
   * grow it again from one */
  if (s->number > eval.number) eval.number = s->number;
  int number = 0;
  int rc = ts_rt_eval(s->opts.rt, &eval, s->k.run, s->k.ctx,
                      s->seconds + s->n_seconds, &number, err);
  if (rc) {
    if (err) {
      char why[sizeof err->msg];
      snprintf(why, sizeof why, "%s", err->msg);
      TS_ERR(err, rc, "%s: %s: %s", ts_bench_vendor_name(s->vendor), s->w->name,
             why);
    }
    return rc;
  }
  s->n_seconds += eval.repeat;
  s->number = number;
  return TS_OK;
}

int ts_bench_samples(const ts_bench_session *s, const double **seconds) {
  if (seconds) *seconds = s ? s->seconds : NULL;
  return s ? s->n_seconds : 0;
}

void ts_bench_close(ts_bench_session *s, ts_bench_result *out) {
  if (out) memset(out, 0, sizeof *out);
  if (!s) return;
  s->k.destroy(s->k.ctx);
  int r = s->n_seconds;
  bool keep = out && s->opts.keep_output;
  if (out && r > 0) {
    out->seconds = ts_median(s->seconds, r);
    qsort(s->seconds, (size_t)r, sizeof *s->seconds, ts_cmp_double);
    out->min_seconds = s->seconds[0];
    out->max_seconds = s->seconds[r - 1];
    out->gflops = out->seconds > 0 ? s->w->flops / out->seconds * 1e-9 : 0;
  }
  if (out) {
    out->repeats = r;
    out->number = s->number;
    out->threads = s->c.threads;
    snprintf(out->impl, sizeof out->impl, "%s", s->k.impl);
    snprintf(out->note, sizeof out->note, "%s", s->k.note);
    out->output_param = s->c.out;
    out->output_dtype = s->c.dtype[s->c.out];
    out->output_elems = s->c.elems[s->c.out];
    out->output = keep ? s->c.data[s->c.out] : NULL;
  }
  free_case(&s->c, keep);
  free(s->seconds);
  free(s);
}

int ts_bench_run(ts_bench_vendor v, const ts_workload *w,
                 const ts_bench_options *opts, ts_bench_result *out,
                 ts_error *err) {
  if (out) memset(out, 0, sizeof *out);
  if (!out) return TS_ERR(err, TS_EINVAL, "bench: NULL workload or result");
  ts_bench_session *s = NULL;
  int rc = ts_bench_open(v, w, opts, &s, err);
  if (rc) return rc;
  if ((rc = ts_bench_measure(s, NULL, err))) {
    ts_bench_close(s, NULL);
    return rc;
  }
  ts_bench_close(s, out);
  return TS_OK;
}

void ts_bench_result_free(ts_bench_result *r) {
  if (!r) return;
  free(r->output);
  memset(r, 0, sizeof *r);
}
