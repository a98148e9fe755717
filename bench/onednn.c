/*
 * onednn.c — the oneDNN baseline through its C API: one primitive per
 * workload on the CPU engine, created with the workload's thread count (the
 * Debian oneDNN runs on the GNU OpenMP runtime, so the count is set with
 * omp_set_num_threads before the primitive is created and restored when the
 * measurement ends) and its own data types, so oneDNN's dispatcher picks its
 * AVX-512 / VNNI / BF16 (/ AMX where present) kernels by itself.
 *
 * Mapping (memory descriptors describe the workload's buffers as stored):
 *  - matmul, batch_matmul: matmul; the transposes are strides of the source
 *    and weights descriptors. dense: matmul of X by W^T (W's [N, K] storage
 *    described as [K, N] with strides) with a [1, N] bias.
 *  - conv2d_nchw / conv2d_nhwc / depthwise_conv2d_nhwc: a direct
 *    convolution (forward inference) on nchw / nhwc data and output; groups
 *    (C for depthwise) make the weights 5-D [G, O/G, I/G, KH, KW]; oneDNN's
 *    dilation is the workload's minus one. The workload's weights (OIHW,
 *    HWIO or [KH, KW, C], described by strides) are reordered once, outside
 *    the timed region, into the format the primitive chose (format_kind
 *    any); the impl string names that format.
 *  - pool2d_nhwc: pooling max, or avg_include_padding (the workload divides
 *    by the full window). softmax: softmax over axis 1. layer_norm: layer
 *    normalization with eps 1e-5 and separate scale and shift, which oneDNN
 *    takes as float32 (other dtypes' gamma and beta are converted once).
 * An operation oneDNN does not implement for these types on this CPU is
 * TS_EUNSUPPORTED.
 */
#include "bench/internal.h"

#include <dnnl.h>
#include <dnnl_debug.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ARGS 6

/* The primitive to create and the buffers it runs on. */
typedef struct plan {
  union {
    dnnl_matmul_desc_t matmul;
    dnnl_convolution_desc_t conv;
    dnnl_pooling_desc_t pool;
    dnnl_softmax_desc_t softmax;
    dnnl_layer_normalization_desc_t lnorm;
  } desc;
  const char *name; /* the primitive kind, for messages */
  int n;            /* arguments on host buffers */
  int arg[MAX_ARGS];
  dnnl_memory_desc_t md[MAX_ARGS];
  void *ptr[MAX_ARGS];
  bool has_weights;                /* a convolution: reorder the weights */
  dnnl_memory_desc_t user_weights; /* the weights as the workload stores */
  void *weights_ptr;
  void *unblocked; /* blocked weights copied to HWIO (malloc'd), or NULL */
} plan;

typedef struct dnnl_ctx {
  dnnl_engine_t engine;
  dnnl_stream_t stream;
  dnnl_primitive_t prim;
  int n_args;
  dnnl_exec_arg_t args[MAX_ARGS];
  float *scale, *shift; /* float32 copies of gamma and beta, or NULL */
  int saved_threads;    /* omp_get_max_threads() before prepare */
} dnnl_ctx;

static bool to_dnnl_dtype(ts_dtype t, dnnl_data_type_t *out) {
  if (ts_dtype_eq(t, TS_FLOAT32))
    *out = dnnl_f32;
  else if (ts_dtype_eq(t, TS_BFLOAT16))
    *out = dnnl_bf16;
  else if (ts_dtype_eq(t, TS_FLOAT16))
    *out = dnnl_f16;
  else if (ts_dtype_eq(t, TS_INT8))
    *out = dnnl_s8;
  else if (ts_dtype_eq(t, TS_UINT8))
    *out = dnnl_u8;
  else if (ts_dtype_eq(t, TS_INT32))
    *out = dnnl_s32;
  else
    return false;
  return true;
}

static int fail(dnnl_status_t s, const char *what, const char *op,
                ts_error *err) {
  return TS_ERR(err, TS_EINVAL, "onednn: %s for %s failed: %s", what, op,
                dnnl_status2str(s));
}

static void add_arg(plan *p, int arg, const dnnl_memory_desc_t *md, void *ptr) {
  p->arg[p->n] = arg;
  p->md[p->n] = *md;
  p->ptr[p->n] = ptr;
  p->n++;
}

/* A memory descriptor of `nd` dims with explicit element strides. */
static dnnl_status_t md_strided(dnnl_memory_desc_t *md, int nd,
                                const int64_t *dims, dnnl_data_type_t dt,
                                const int64_t *strides) {
  dnnl_dims_t d, s;
  for (int i = 0; i < nd; i++) {
    d[i] = dims[i];
    s[i] = strides[i];
  }
  return dnnl_memory_desc_init_by_strides(md, nd, d, dt, s);
}

static dnnl_status_t md_tag(dnnl_memory_desc_t *md, int nd, const int64_t *dims,
                            dnnl_data_type_t dt, dnnl_format_tag_t tag) {
  dnnl_dims_t d;
  for (int i = 0; i < nd; i++) d[i] = dims[i];
  return dnnl_memory_desc_init_by_tag(md, nd, d, dt, tag);
}

/* matmul / batch_matmul / dense. */
static dnnl_status_t plan_matmul(const bench_case *c, dnnl_data_type_t in,
                                 dnnl_data_type_t out, plan *p) {
  const bench_op *op = &c->op;
  int64_t M = op->m, N = op->n, K = op->k, B = op->batch;
  bool dense = op->kind == BENCH_DENSE;
  bool ta = !dense && op->trans_a, tb = dense || op->trans_b;
  /* [B,] rows, columns: matmul and dense use the last two entries */
  int nd = strcmp(op->op, "batch_matmul") == 0 ? 3 : 2, f = 3 - nd;
  int64_t sd[3] = {B, M, K}, ss[3] = {M * K, ta ? 1 : K, ta ? M : 1};
  int64_t wd[3] = {B, K, N}, ws[3] = {K * N, tb ? 1 : N, tb ? K : 1};
  int64_t dd[3] = {B, M, N}, ds[3] = {M * N, N, 1};
  dnnl_memory_desc_t src, wei, dst, bias;
  dnnl_status_t s;
  if ((s = md_strided(&src, nd, sd + f, in, ss + f)) ||
      (s = md_strided(&wei, nd, wd + f, in, ws + f)) ||
      (s = md_strided(&dst, nd, dd + f, out, ds + f)))
    return s;
  bool with_bias = dense && op->bias;
  if (with_bias &&
      (s = md_strided(&bias, 2, (int64_t[]){1, N}, out, (int64_t[]){N, 1})))
    return s;
  p->name = "matmul";
  add_arg(p, DNNL_ARG_SRC, &src, c->data[0]);
  add_arg(p, DNNL_ARG_WEIGHTS, &wei, c->data[1]);
  if (with_bias) add_arg(p, DNNL_ARG_BIAS, &bias, c->data[2]);
  add_arg(p, DNNL_ARG_DST, &dst, c->data[c->out]);
  return dnnl_matmul_desc_init(&p->desc.matmul, &src, &wei,
                               with_bias ? &bias : NULL, &dst);
}

/* conv2d_nchw / conv2d_nhwc / depthwise_conv2d_nhwc. */
static dnnl_status_t plan_conv(const bench_case *c, dnnl_data_type_t in,
                               dnnl_data_type_t out, plan *p) {
  const bench_op *op = &c->op;
  bool nchw = op->kind == BENCH_CONV_NCHW;
  int64_t G = op->groups, CO = op->co, COg = CO / G, CIg = op->ci / G;
  int64_t KH = op->kh, KW = op->kw;
  dnnl_format_tag_t tag = nchw ? dnnl_nchw : dnnl_nhwc;
  dnnl_memory_desc_t src, wei_any, dst;
  dnnl_status_t s;
  if ((s = md_tag(&src, 4, (int64_t[]){op->nb, op->ci, op->h, op->w}, in,
                  tag)) ||
      (s = md_tag(&dst, 4, (int64_t[]){op->nb, CO, op->oh, op->ow}, out, tag)))
    return s;
  /* Weights [G,] O, I, KH, KW as stored: OIHW is [CO, CIg, KH, KW] and
   * HWIO [KH, KW, CIg, CO] (depthwise [KH, KW, C]: CIg = 1), with output
   * channel g * COg + o. */
  int64_t dims[5] = {G, COg, CIg, KH, KW}, strides[5];
  if (nchw) {
    int64_t st[5] = {COg * CIg * KH * KW, CIg * KH * KW, KH * KW, KW, 1};
    memcpy(strides, st, sizeof st);
  } else {
    int64_t st[5] = {COg, 1, CO, KW * CIg * CO, CIg * CO};
    memcpy(strides, st, sizeof st);
  }
  int nd = G > 1 ? 5 : 4, o = G > 1 ? 0 : 1; /* without groups: drop G */
  if ((s = md_strided(&p->user_weights, nd, dims + o, in, strides + o)) ||
      (s = md_tag(&wei_any, nd, dims + o, in, dnnl_format_tag_any)))
    return s;
  p->has_weights = true;
  p->weights_ptr = c->data[1];
  p->name = "convolution";
  if (op->weight_block > 0) {
    /* [CO/B, KH, KW, CI, B] (the graph compiler's layout of constant
     * weights) copied to HWIO once; oneDNN reorders that, as it would
     * the model's weights, into the format it chose */
    int64_t B = op->weight_block;
    size_t esz = (size_t)(op->in.bits / 8);
    char *src = c->data[1], *dst = malloc((size_t)(KH * KW * CIg * CO) * esz);
    if (!dst) return dnnl_out_of_memory;
    for (int64_t ob = 0; ob < CO / B; ob++)
      for (int64_t r = 0; r < KH * KW * CIg; r++)
        for (int64_t b = 0; b < B; b++)
          memcpy(dst + (size_t)(r * CO + ob * B + b) * esz,
                 src + (size_t)((ob * KH * KW * CIg + r) * B + b) * esz, esz);
    p->unblocked = dst;
    p->weights_ptr = dst;
  }
  add_arg(p, DNNL_ARG_SRC, &src, c->data[0]);
  add_arg(p, DNNL_ARG_DST, &dst, c->data[c->out]);
  dnnl_dims_t stride = {op->stride, op->stride};
  dnnl_dims_t dilate = {op->dilation - 1, op->dilation - 1};
  dnnl_dims_t pad = {op->pad, op->pad};
  /* Symmetric padding: oneDNN checks (H - extent + 2 pad) / stride + 1 ==
   * OH with the same truncating division the workload uses. */
  return dnnl_dilated_convolution_forward_desc_init(
      &p->desc.conv, dnnl_forward_inference, dnnl_convolution_direct, &src,
      &wei_any, NULL, &dst, stride, dilate, pad, pad);
}

static dnnl_status_t plan_pool(const bench_case *c, dnnl_data_type_t in,
                               plan *p) {
  const bench_op *op = &c->op;
  dnnl_memory_desc_t src, dst;
  dnnl_status_t s;
  if ((s = md_tag(&src, 4, (int64_t[]){op->nb, op->ci, op->h, op->w}, in,
                  dnnl_nhwc)) ||
      (s = md_tag(&dst, 4, (int64_t[]){op->nb, op->co, op->oh, op->ow}, in,
                  dnnl_nhwc)))
    return s;
  p->name = "pooling";
  add_arg(p, DNNL_ARG_SRC, &src, c->data[0]);
  add_arg(p, DNNL_ARG_DST, &dst, c->data[c->out]);
  dnnl_dims_t stride = {op->stride, op->stride};
  dnnl_dims_t kernel = {op->kh, op->kw};
  dnnl_dims_t pad = {op->pad, op->pad};
  return dnnl_pooling_forward_desc_init(
      &p->desc.pool, dnnl_forward_inference,
      op->avg ? dnnl_pooling_avg_include_padding : dnnl_pooling_max, &src, &dst,
      stride, kernel, pad, pad);
}

static dnnl_status_t plan_rows(const bench_case *c, dnnl_data_type_t in,
                               dnnl_ctx *x, plan *p) {
  const bench_op *op = &c->op;
  dnnl_memory_desc_t data;
  dnnl_status_t s;
  if ((s = md_tag(&data, 2, (int64_t[]){op->rows, op->cols}, in, dnnl_ab)))
    return s;
  add_arg(p, DNNL_ARG_SRC, &data, c->data[0]);
  add_arg(p, DNNL_ARG_DST, &data, c->data[c->out]);
  if (op->kind == BENCH_SOFTMAX) {
    p->name = "softmax";
    return dnnl_softmax_forward_desc_init(&p->desc.softmax,
                                          dnnl_forward_inference, &data, 1);
  }
  p->name = "layer normalization";
  dnnl_memory_desc_t ss;
  if ((s = md_tag(&ss, 1, (int64_t[]){op->cols}, dnnl_f32, dnnl_a))) return s;
  void *scale = c->data[1], *shift = c->data[2];
  if (!ts_dtype_eq(op->in, TS_FLOAT32)) {
    /* oneDNN's scale and shift are float32: convert gamma and beta once */
    x->scale = malloc(sizeof(float) * (size_t)op->cols);
    x->shift = malloc(sizeof(float) * (size_t)op->cols);
    if (!x->scale || !x->shift) return dnnl_out_of_memory;
    for (int64_t j = 0; j < op->cols; j++) {
      x->scale[j] = (float)ts_host_get(c->data[1], op->in, j);
      x->shift[j] = (float)ts_host_get(c->data[2], op->in, j);
    }
    scale = x->scale;
    shift = x->shift;
  }
  add_arg(p, DNNL_ARG_SCALE, &ss, scale);
  add_arg(p, DNNL_ARG_SHIFT, &ss, shift);
  return dnnl_layer_normalization_forward_desc_init(
      &p->desc.lnorm, dnnl_forward_inference, &data, NULL, 1e-5f,
      dnnl_use_scale | dnnl_use_shift);
}

/* A blocked memory format in oneDNN's notation: dims outermost first,
 * lowercase a, b, ... (uppercase when blocked), then the inner blocks, e.g.
 * "ABcd16b16a"; "+comp" when it carries int8 compensation. */
static void describe_format(const dnnl_memory_desc_t *md, char *buf,
                            size_t size) {
  if (md->format_kind != dnnl_blocked) {
    snprintf(buf, size, "%s", dnnl_fmt_kind2str(md->format_kind));
    return;
  }
  const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
  int order[DNNL_MAX_NDIMS], nd = md->ndims;
  for (int i = 0; i < nd; i++) order[i] = i;
  for (int i = 1; i < nd; i++) /* insertion sort, largest stride first */
    for (int j = i; j > 0 && b->strides[order[j]] > b->strides[order[j - 1]];
         j--) {
      int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  size_t n = 0;
  for (int i = 0; i < nd && n + 1 < size; i++) {
    bool blocked = false;
    for (int j = 0; j < b->inner_nblks; j++)
      blocked |= b->inner_idxs[j] == order[i];
    buf[n++] = (char)((blocked ? 'A' : 'a') + order[i]);
  }
  buf[n] = '\0';
  for (int j = 0; j < b->inner_nblks && n < size; j++)
    n += (size_t)snprintf(buf + n, size - n, "%lld%c",
                          (long long)b->inner_blks[j],
                          'a' + (int)b->inner_idxs[j]);
  if (md->extra.flags && n < size) snprintf(buf + n, size - n, "+comp");
}

static int dnnl_run(void *ctx) {
  dnnl_ctx *x = ctx;
  dnnl_status_t s =
      dnnl_primitive_execute(x->prim, x->stream, x->n_args, x->args);
  if (s == dnnl_success) s = dnnl_stream_wait(x->stream);
  return (int)s;
}

static void dnnl_destroy(void *ctx) {
  dnnl_ctx *x = ctx;
  if (x->prim) dnnl_primitive_destroy(x->prim);
  for (int i = 0; i < x->n_args; i++) dnnl_memory_destroy(x->args[i].memory);
  if (x->stream) dnnl_stream_destroy(x->stream);
  if (x->engine) dnnl_engine_destroy(x->engine);
  free(x->scale);
  free(x->shift);
  omp_set_num_threads(x->saved_threads);
  free(x);
}

/* The instruction set oneDNN needs for kernels of dtype t when this CPU
 * lacks it ("" when it has it or none is known): its 16-bit float kernels
 * start at AVX-512 (avx512_core: F, BW, VL, DQ) for bfloat16 and at
 * AVX512-FP16 for float16. */
static const char *missing_isa(ts_dtype t) {
  if (t.code == TS_DT_BFLOAT && ts_rt_cpu_has("avx512bw") != 1)
    return " (it needs AVX-512 with avx512bw for bfloat16; this CPU has none)";
  if (t.code == TS_DT_FLOAT && t.bits == 16 && ts_rt_cpu_has("avx512fp16") != 1)
    return " (it needs avx512fp16 for float16; this CPU lacks it)";
  return "";
}

/* Creates the primitive descriptor; "not implemented" is TS_EUNSUPPORTED,
 * naming the instruction set the dtype needs when the CPU lacks it. */
static int create_pd(dnnl_ctx *x, const plan *p, const bench_op *op,
                     dnnl_primitive_desc_t *pd, ts_error *err) {
  dnnl_status_t s =
      dnnl_primitive_desc_create(pd, &p->desc, NULL, x->engine, NULL);
  if (s == dnnl_unimplemented) {
    char a[32], b[32];
    const dnnl_version_t *v = dnnl_version();
    const char *isa = missing_isa(op->in);
    if (!isa[0]) isa = missing_isa(op->out);
    return TS_ERR(err, TS_EUNSUPPORTED,
                  "onednn: not applicable: oneDNN %d.%d.%d has no %s for %s "
                  "inputs with a %s output on this CPU%s",
                  v->major, v->minor, v->patch, p->name,
                  ts_dtype_str(op->in, a), ts_dtype_str(op->out, b), isa);
  }
  return s ? fail(s, "creating the primitive descriptor", op->op, err) : TS_OK;
}

/* Reorders the workload's weights into the primitive's format, once; the
 * reordered memory becomes the primitive's weights argument. */
static int reorder_weights(dnnl_ctx *x, const plan *p,
                           const dnnl_memory_desc_t *wmd, const char *opname,
                           ts_error *err) {
  dnnl_memory_t user = NULL, wmem = NULL;
  dnnl_primitive_desc_t rpd = NULL;
  dnnl_primitive_t reorder = NULL;
  dnnl_status_t s;
  if ((s = dnnl_memory_create(&user, &p->user_weights, x->engine,
                              p->weights_ptr)) ||
      (s = dnnl_memory_create(&wmem, wmd, x->engine, DNNL_MEMORY_ALLOCATE)) ||
      (s = dnnl_reorder_primitive_desc_create(&rpd, &p->user_weights, x->engine,
                                              wmd, x->engine, NULL)) ||
      (s = dnnl_primitive_create(&reorder, rpd)))
    goto done;
  dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, wmem}};
  if ((s = dnnl_primitive_execute(reorder, x->stream, 2, args)) ||
      (s = dnnl_stream_wait(x->stream)))
    goto done;
  x->args[x->n_args++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, wmem};
  wmem = NULL;
done:
  if (reorder) dnnl_primitive_destroy(reorder);
  if (rpd) dnnl_primitive_desc_destroy(rpd);
  if (user) dnnl_memory_destroy(user);
  if (wmem) dnnl_memory_destroy(wmem);
  return s ? fail(s, "reordering the weights", opname, err) : TS_OK;
}

int onednn_prepare(const bench_case *c, bench_kernel *k, ts_error *err) {
  const bench_op *op = &c->op;
  char a[32], b[32];
  dnnl_data_type_t in, out;
  if (!to_dnnl_dtype(op->in, &in) || !to_dnnl_dtype(op->out, &out))
    return TS_ERR(err, TS_EUNSUPPORTED,
                  "onednn: not applicable: oneDNN has no CPU data type for %s "
                  "inputs with a %s output",
                  ts_dtype_str(op->in, a), ts_dtype_str(op->out, b));
  bool weighted = op->kind == BENCH_MATMUL || op->kind == BENCH_DENSE ||
                  op->kind == BENCH_CONV_NCHW || op->kind == BENCH_CONV_NHWC ||
                  op->kind == BENCH_DEPTHWISE;
  if (weighted && in == dnnl_u8)
    return TS_ERR(err, TS_EUNSUPPORTED,
                  "onednn: not applicable: oneDNN's integer %s takes signed "
                  "int8 weights only (this workload's are uint8)",
                  op->kind == BENCH_MATMUL || op->kind == BENCH_DENSE
                      ? "matmul"
                      : "convolution");
  bool conv = op->kind == BENCH_CONV_NCHW || op->kind == BENCH_CONV_NHWC ||
              op->kind == BENCH_DEPTHWISE;
  /* without VNNI in the ISA oneDNN dispatches to (ONEDNN_MAX_CPU_ISA can
   * lower it), its int8 products go through vpmaddubsw's saturating 16-bit
   * pair sums (a 127 x -128 matmul of K = 64 came out 0) and its
   * convolutions halve the weights against that: a speed bought with wrong
   * results is no baseline */
  unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
  if (weighted && in == dnnl_s8 && !(isa & 0x40u) && !(isa & 0x400u))
    return TS_ERR(err, TS_EUNSUPPORTED,
                  "onednn: not applicable: without VNNI (oneDNN dispatches "
                  "to ISA %#x here, with neither avx512_core_vnni nor "
                  "avx2_vnni) oneDNN's int8 %s saturates 16-bit pair sums%s, "
                  "so its results are not exact",
                  isa, conv ? "convolution" : "matmul",
                  conv ? " (it halves the weights against that)" : "");
  dnnl_ctx *x = calloc(1, sizeof *x);
  if (!x) return TS_ERR(err, TS_ENOMEM, "onednn: out of memory");
  /* Primitives size their work split and scratchpad when created. */
  x->saved_threads = omp_get_max_threads();
  omp_set_num_threads(c->threads);

  plan p = {0};
  dnnl_primitive_desc_t pd = NULL;
  int rc = TS_OK;
  dnnl_status_t s = dnnl_engine_create(&x->engine, dnnl_cpu, 0);
  if (!s)
    s = dnnl_stream_create(&x->stream, x->engine, dnnl_stream_default_flags);
  if (s) {
    rc = fail(s, "creating the CPU engine and stream", op->op, err);
    goto out;
  }
  switch (op->kind) {
  case BENCH_MATMUL:
  case BENCH_DENSE: s = plan_matmul(c, in, out, &p); break;
  case BENCH_CONV_NCHW:
  case BENCH_CONV_NHWC:
  case BENCH_DEPTHWISE: s = plan_conv(c, in, out, &p); break;
  case BENCH_POOL: s = plan_pool(c, in, &p); break;
  case BENCH_SOFTMAX:
  case BENCH_LAYER_NORM: s = plan_rows(c, in, x, &p); break;
  case BENCH_OTHER: s = dnnl_unimplemented; break;
  }
  if (s == dnnl_unimplemented) {
    rc = TS_ERR(err, TS_EUNSUPPORTED,
                "onednn: not applicable: no oneDNN primitive for %s", op->op);
    goto out;
  }
  if (s) {
    rc = fail(s, "describing the operation", op->op, err);
    goto out;
  }
  if ((rc = create_pd(x, &p, op, &pd, err))) goto out;

  char weights[96] = "";
  if (p.has_weights) {
    const dnnl_memory_desc_t *wmd =
        dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    if ((rc = reorder_weights(x, &p, wmd, op->op, err))) goto out;
    char fmt[48];
    describe_format(wmd, fmt, sizeof fmt);
    snprintf(weights, sizeof weights, ", weights reordered once to %s", fmt);
  }
  for (int i = 0; i < p.n; i++) {
    dnnl_memory_t m;
    if ((s = dnnl_memory_create(&m, &p.md[i], x->engine, p.ptr[i]))) {
      rc = fail(s, "creating a memory object", op->op, err);
      goto out;
    }
    x->args[x->n_args++] = (dnnl_exec_arg_t){p.arg[i], m};
  }
  if ((s = dnnl_primitive_create(&x->prim, pd))) {
    rc = fail(s, "creating the primitive", op->op, err);
    goto out;
  }
  const char *impl = NULL;
  dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
  const dnnl_version_t *v = dnnl_version();
  snprintf(k->impl, sizeof k->impl, "oneDNN %d.%d.%d %s %s%s", v->major,
           v->minor, v->patch, p.name, impl ? impl : "?", weights);
out:
  free(p.unblocked);
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (rc) {
    dnnl_destroy(x);
    return rc;
  }
  k->run = dnnl_run;
  k->ctx = x;
  k->destroy = dnnl_destroy;
  return TS_OK;
}
