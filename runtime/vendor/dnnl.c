/*
 * vendor/dnnl.c — libtessera_dnnl: the oneDNN calls a compiled model makes
 * for the tasks `tessera compile --dispatch` gives to the vendor library.
 *
 * A call site is described by a line of text (graph/dispatch.c writes it,
 * docs/graph.md lists its words): a convolution (NHWC or NCHW, groups,
 * strides, dilations, asymmetric pads) or a matrix product (batched,
 * broadcast), a softmax over one axis or a layer normalization of rows,
 * the places of its operands among the kernel's arguments, the
 * layout of its constant weights, and the elementwise operators fused after
 * it as oneDNN post-ops (relu, clip, sigmoid, tanh, gelu, a*x + b with
 * constants, add or mul of a per-channel or a whole tensor; `sum` for an
 * in-place residual). `ts_vendor_dnnl_create`
 * builds the primitive once and reorders constant weights into the format
 * oneDNN prefers; `ts_vendor_dnnl_run` executes it with the call's
 * arguments, the same argument array a tuned kernel receives.
 *
 * Debian builds oneDNN on GNU OpenMP: the primitive runs on as many OpenMP
 * threads as the model was created with (omp_set_num_threads on the
 * calling thread before each call).
 */
#include <dnnl.h>
#include <omp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define API __attribute__((visibility("default")))
#define MAX_ARGS 64
#define MAX_POST 8
#define MAX_EXEC (4 + MAX_POST)

typedef struct ts_vendor_op {
  dnnl_engine_t engine;
  dnnl_stream_t stream;
  dnnl_primitive_t prim;
  int n_threads;
  float *shift; /* int8: the zero point's share per channel (owned) */
  /* executed arguments: slot k takes args[arg_of[k]] (or the prepacked
   * weights when arg_of[k] < 0) */
  int n_exec;
  dnnl_exec_arg_t exec[MAX_EXEC];
  int arg_of[MAX_EXEC];
} ts_vendor_op;

static int fail(char *err, size_t n, const char *fmt, ...) {
  if (err && n) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
  }
  return -1;
}

/* ---- the description ---- */

typedef struct post_op {
  char kind[12]; /* relu clip sigmoid tanh gelu_erf gelu_tanh linear add mul
                    shift (int8: the zero point's share, per channel) */
  float lo, hi;  /* clip's bounds; linear's alpha and beta */
  int arg;       /* add/mul: the operand's argument */
  bool full;     /* add/mul: a whole tensor (else per channel) */
  bool sum;      /* add of the tensor the output overwrites: oneDNN's sum */
} post_op;

typedef struct desc {
  char op[8];      /* conv | matmul | softmax | lnorm */
  bool nchw;       /* conv data layout */
  int64_t dims[8]; /* conv: n c h w o oh ow; matmul: see below */
  int64_t kh, kw, sh, sw, pt, pl, pb, pr, dh, dw, g;
  char wfmt[8];   /* conv: hwio | oihw | blk; matmul: kn | blk */
  int64_t wb;     /* the weights' block (blk) */
  int64_t wconst; /* the weights are a constant (given at create) */
  /* matmul: ranks and shapes of A, B, C */
  int ra, rb, rc;
  int64_t a[8], b[8], c[8];
  int64_t src, wei, bias, dst;
  /* softmax, lnorm: the data's shape ([rows, len] for lnorm) */
  int rx;
  int64_t x[8];
  int64_t axis, scale, shift;
  float eps;
  /* int8 (dt=u8s8): uint8 data, int8 weights, the accumulator dequantized
   * by dq_scale/dq_zp per channel, the result quantized by q_scale/q_zp
   * (scalars) when q_scale >= 0, else float32 */
  bool int8;
  int dq_scale, dq_zp, q_scale, q_zp;
  post_op post[MAX_POST];
  int n_post;
} desc;

/* A product whose multiply-adds make oneDNN's reference loops a real cost
 * (2^22 and more; a reference softmax or a small product is fine). */
static bool heavy(const desc *d) {
  double macs = 0;
  if (!strcmp(d->op, "matmul") && d->ra >= 1 && d->rc >= 1) {
    double c = 1;
    for (int i = 0; i < d->rc; i++) c *= (double)d->c[i];
    macs = c * (double)d->a[d->ra - 1];
  } else if (!strcmp(d->op, "conv")) { /* n o oh ow * c/g kh kw */
    macs = (double)d->dims[0] * (double)d->dims[4] * (double)d->dims[5] *
           (double)d->dims[6] * (double)d->dims[1] / (double)(d->g ? d->g : 1) *
           (double)d->kh * (double)d->kw;
  }
  return macs >= 4194304.0;
}

static bool dims_list(const char *s, int64_t *out, int *n) {
  *n = 0;
  while (*s && *n < 8) {
    char *end;
    long long v = strtoll(s, &end, 10);
    if (end == s || v <= 0) return false;
    out[(*n)++] = v;
    s = end;
    if (*s == 'x')
      s++;
    else if (*s)
      return false;
  }
  return *n > 0 && !*s;
}

/* The integer words and where they go. */
static const struct {
  const char *key;
  size_t offset;
} int_keys[] = {
    {"kh", offsetof(desc, kh)},
    {"kw", offsetof(desc, kw)},
    {"sh", offsetof(desc, sh)},
    {"sw", offsetof(desc, sw)},
    {"pt", offsetof(desc, pt)},
    {"pl", offsetof(desc, pl)},
    {"pb", offsetof(desc, pb)},
    {"pr", offsetof(desc, pr)},
    {"dh", offsetof(desc, dh)},
    {"dw", offsetof(desc, dw)},
    {"g", offsetof(desc, g)},
    {"wb", offsetof(desc, wb)},
    {"wconst", offsetof(desc, wconst)},
    {"src", offsetof(desc, src)},
    {"wei", offsetof(desc, wei)},
    {"bias", offsetof(desc, bias)},
    {"dst", offsetof(desc, dst)},
    {"axis", offsetof(desc, axis)},
    {"scale", offsetof(desc, scale)},
    {"shift", offsetof(desc, shift)},
    {NULL, 0},
};

static int parse(const char *text, desc *d, char *err, size_t n) {
  memset(d, 0, sizeof *d);
  d->src = d->wei = d->bias = d->dst = d->scale = d->shift = -1;
  d->dq_scale = d->dq_zp = d->q_scale = d->q_zp = -1;
  d->sh = d->sw = d->dh = d->dw = d->g = d->kh = d->kw = 1;
  char buf[1024];
  if (strlen(text) >= sizeof buf)
    return fail(err, n, "vendor call: description too long");
  strcpy(buf, text);
  char *save = NULL;
  for (char *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
    char *eq = strchr(t, '=');
    if (!eq) {
      if (!strcmp(t, "conv") || !strcmp(t, "matmul") || !strcmp(t, "softmax") ||
          !strcmp(t, "lnorm"))
        strcpy(d->op, t);
      else
        return fail(err, n, "vendor call: unknown word '%s'", t);
      continue;
    }
    *eq = 0;
    const char *k = t, *v = eq + 1;
    long long iv = strtoll(v, NULL, 10);
    static const char *const conv_keys[] = {"n", "c",  "h",  "w",
                                            "o", "oh", "ow", NULL};
    bool done = false;
    for (int i = 0; conv_keys[i]; i++)
      if (!strcmp(k, conv_keys[i])) d->dims[i] = iv, done = true;
    if (done) continue;
    int64_t *field = NULL;
    for (int i = 0; !field && int_keys[i].key; i++)
      if (!strcmp(k, int_keys[i].key))
        field = (int64_t *)((char *)d + int_keys[i].offset);
    if (field) {
      *field = iv;
      continue;
    }
    if (!strcmp(k, "layout")) {
      d->nchw = !strcmp(v, "nchw");
    } else if (!strcmp(k, "wfmt")) {
      snprintf(d->wfmt, sizeof d->wfmt, "%s", v);
    } else if (!strcmp(k, "dt")) {
      if (strcmp(v, "u8s8"))
        return fail(err, n, "vendor call: unknown data types '%s'", v);
      d->int8 = true;
    } else if (!strcmp(k, "dq") || !strcmp(k, "q")) {
      int a, b;
      if (sscanf(v, "%d:%d", &a, &b) != 2 || a < 0 || b < 0 || a >= MAX_ARGS ||
          b >= MAX_ARGS)
        return fail(err, n, "vendor call: bad %s '%s'", k, v);
      *(k[0] == 'd' ? &d->dq_scale : &d->q_scale) = a;
      *(k[0] == 'd' ? &d->dq_zp : &d->q_zp) = b;
    } else if (!strcmp(k, "eps")) {
      char *end;
      d->eps = strtof(v, &end);
      if (end == v || *end || !(d->eps >= 0))
        return fail(err, n, "vendor call: bad epsilon '%s'", v);
    } else if (!strcmp(k, "X")) {
      if (!dims_list(v, d->x, &d->rx))
        return fail(err, n, "vendor call: bad shape '%s'", v);
    } else if (!strcmp(k, "A") || !strcmp(k, "B") || !strcmp(k, "C")) {
      int64_t *out = k[0] == 'A' ? d->a : k[0] == 'B' ? d->b : d->c;
      int *r = k[0] == 'A' ? &d->ra : k[0] == 'B' ? &d->rb : &d->rc;
      if (!dims_list(v, out, r))
        return fail(err, n, "vendor call: bad shape '%s'", v);
    } else if (!strcmp(k, "post")) {
      if (d->n_post == MAX_POST)
        return fail(err, n, "vendor call: more than %d post-ops", MAX_POST);
      post_op *p = &d->post[d->n_post++];
      char *c1 = strchr(v, ':');
      size_t kl = c1 ? (size_t)(c1 - v) : strlen(v);
      if (kl >= sizeof p->kind)
        return fail(err, n, "vendor call: bad post-op '%s'", v);
      memcpy(p->kind, v, kl);
      p->kind[kl] = 0;
      if (!strcmp(p->kind, "clip")) {
        if (!c1 || sscanf(c1 + 1, "%g:%g", &p->lo, &p->hi) != 2)
          return fail(err, n, "vendor call: bad clip '%s'", v);
      } else if (!strcmp(p->kind, "add") || !strcmp(p->kind, "mul")) {
        char how[8] = "";
        if (!c1 || sscanf(c1 + 1, "%d:%7s", &p->arg, how) != 2 ||
            (strcmp(how, "c") && strcmp(how, "full")))
          return fail(err, n, "vendor call: bad operand '%s'", v);
        p->full = !strcmp(how, "full");
      } else if (!strcmp(p->kind, "linear")) {
        if (!c1 || sscanf(c1 + 1, "%g:%g", &p->lo, &p->hi) != 2)
          return fail(err, n, "vendor call: bad linear '%s'", v);
      } else if (strcmp(p->kind, "relu") && strcmp(p->kind, "sigmoid") &&
                 strcmp(p->kind, "tanh") && strcmp(p->kind, "gelu_erf") &&
                 strcmp(p->kind, "gelu_tanh")) {
        return fail(err, n, "vendor call: unknown post-op '%s'", v);
      }
    } else {
      return fail(err, n, "vendor call: unknown key '%s'", k);
    }
  }
  if (!d->op[0]) return fail(err, n, "vendor call: no operation");
  bool weighted = !strcmp(d->op, "conv") || !strcmp(d->op, "matmul");
  if (d->src < 0 || (weighted && d->wei < 0) || d->dst < 0 ||
      d->src >= MAX_ARGS || d->wei >= MAX_ARGS || d->dst >= MAX_ARGS ||
      d->bias >= MAX_ARGS || d->scale >= MAX_ARGS || d->shift >= MAX_ARGS)
    return fail(err, n, "vendor call: operand places missing");
  if (!strcmp(d->op, "softmax") &&
      (d->rx < 1 || d->axis < 0 || d->axis >= d->rx))
    return fail(err, n, "vendor call: softmax needs X and an axis in it");
  if (!strcmp(d->op, "lnorm") && (d->rx != 2 || d->scale < 0))
    return fail(err, n, "vendor call: lnorm needs X=ROWSxLEN and scale");
  if (!weighted && d->n_post)
    return fail(err, n, "vendor call: %s takes no post-ops", d->op);
  if (d->int8 && (!weighted || d->dq_scale < 0 || d->bias >= 0))
    return fail(err, n,
                "vendor call: dt=u8s8 needs a conv or matmul without bias "
                "and dq=SCALE:ZP");
  if (!d->int8 && (d->dq_scale >= 0 || d->q_scale >= 0))
    return fail(err, n, "vendor call: dq= and q= need dt=u8s8");
  if (d->int8 && d->n_post + 2 > MAX_POST)
    return fail(err, n, "vendor call: more than %d post-ops", MAX_POST - 2);
  return 0;
}

/* ---- building the primitive ---- */

static dnnl_status_t md_tag(dnnl_memory_desc_t *md, int nd, const int64_t *dims,
                            dnnl_format_tag_t tag) {
  dnnl_dims_t d;
  for (int i = 0; i < nd; i++) d[i] = dims[i];
  return dnnl_memory_desc_init_by_tag(md, nd, d, dnnl_f32, tag);
}

static dnnl_status_t md_strided(dnnl_memory_desc_t *md, int nd,
                                const int64_t *dims, const int64_t *strides) {
  dnnl_dims_t d, s;
  for (int i = 0; i < nd; i++) d[i] = dims[i], s[i] = strides[i];
  return dnnl_memory_desc_init_by_strides(md, nd, d, dnnl_f32, s);
}

/* Row-major strides of dims. */
static void dense_strides(int nd, const int64_t *dims, int64_t *strides) {
  int64_t s = 1;
  for (int i = nd - 1; i >= 0; i--) strides[i] = s, s *= dims[i];
}

/* The post-ops' attribute; the descriptor of each binary operand goes in
 * md1[i] (dst: the primitive's output shape, rank nd, channel axis cax). */
static dnnl_status_t post_attr(const desc *d, int nd, const int64_t *dst_dims,
                               int cax, bool channels_last,
                               dnnl_primitive_attr_t *attr) {
  dnnl_post_ops_t po = NULL;
  dnnl_status_t s = dnnl_post_ops_create(&po);
  for (int i = 0; !s && i < d->n_post; i++) {
    const post_op *p = &d->post[i];
    if (!strcmp(p->kind, "relu"))
      s = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_relu, 0, 0);
    else if (!strcmp(p->kind, "clip"))
      s = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_clip_v2, p->lo,
                                       p->hi);
    else if (!strcmp(p->kind, "sigmoid"))
      s = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_logistic, 0, 0);
    else if (!strcmp(p->kind, "tanh"))
      s = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_tanh, 0, 0);
    else if (!strcmp(p->kind, "gelu_erf"))
      s = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_gelu_erf, 0, 0);
    else if (!strcmp(p->kind, "gelu_tanh"))
      s = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_gelu_tanh, 0, 0);
    else if (!strcmp(p->kind, "linear")) /* lo, hi: alpha, beta */
      s = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_linear, p->lo,
                                       p->hi);
    else if (p->sum)
      s = dnnl_post_ops_append_sum(po, 1.f);
    else {
      int64_t dims[8];
      for (int k = 0; k < nd; k++)
        dims[k] = p->full || k == cax ? dst_dims[k] : 1;
      dnnl_memory_desc_t md;
      if (nd == 4 && channels_last)
        s = md_tag(&md, 4, dims, dnnl_nhwc);
      else {
        int64_t st[8];
        dense_strides(nd, dims, st);
        s = md_strided(&md, nd, dims, st);
      }
      if (!s)
        s = dnnl_post_ops_append_binary(
            po, !strcmp(p->kind, "mul") ? dnnl_binary_mul : dnnl_binary_add,
            &md);
    }
  }
  if (!s) s = dnnl_primitive_attr_create(attr);
  if (!s) s = dnnl_primitive_attr_set_post_ops(*attr, po);
  if (po) dnnl_post_ops_destroy(po);
  return s;
}

/* The constant weights as a plain (strided) descriptor: blocked weights
 * ([CO/B, KH, KW, CI, B] or [.., N/B, K, B]) are first copied out of their
 * blocks into *plain (malloc'd), a row-major [KH, KW, CI, CO] or [.., K, N]
 * array, which the reorder then reads. */
static const void *unblock(const void *w, int64_t outer, int64_t inner,
                           int64_t cols, int64_t B, size_t esize,
                           unsigned char **plain) {
  /* w: [outer][cols/B][inner][B] -> [outer][inner][cols] */
  const unsigned char *src = w;
  *plain = malloc(esize * (size_t)(outer * inner * cols));
  if (!*plain) return NULL;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < cols / B; j++)
      for (int64_t i = 0; i < inner; i++)
        memcpy(*plain + esize * (size_t)((o * inner + i) * cols + j * B),
               src + esize * (size_t)(((o * (cols / B) + j) * inner + i) * B),
               esize * (size_t)B);
  return *plain;
}

/* An int8 call's data types: uint8 data, int8 weights, a uint8 (quantized)
 * or float32 result. The descriptors were made as float32; the blocking of
 * a memory descriptor is in elements, so only the type changes. */
static void int8_types(const desc *d, dnnl_memory_desc_t *src,
                       dnnl_memory_desc_t *wei_user, dnnl_memory_desc_t *wany,
                       dnnl_memory_desc_t *dst) {
  if (!d->int8) return;
  src->data_type = dnnl_u8;
  wei_user->data_type = dnnl_s8;
  wany->data_type = dnnl_s8;
  dst->data_type = d->q_scale >= 0 ? dnnl_u8 : dnnl_f32;
}

/* The post-ops of an int8 call (into *eff, a copy of d): first the zero
 * point's share of the dequantization (-zp * scale per channel, kept in
 * op->shift; the scales themselves are the primitive's output scales), then
 * the group's float post-ops, then the quantization as a linear post-op
 * (x / s + z, then oneDNN's rounding to nearest even and saturation to
 * uint8). */
static dnnl_status_t int8_prepare(const desc *d, ts_vendor_op *op,
                                  void *const *args, desc *eff) {
  *eff = *d;
  if (!d->int8) return dnnl_success;
  int64_t C = !strcmp(d->op, "conv") ? d->dims[4] : d->c[d->rc - 1];
  const float *sc = args[d->dq_scale];
  const int32_t *zp = args[d->dq_zp];
  if (!sc || !zp || C <= 0) return dnnl_invalid_arguments; /* constants */
  op->shift = malloc(sizeof(float) * (size_t)C);
  if (!op->shift) return dnnl_out_of_memory;
  for (int64_t c = 0; c < C; c++) op->shift[c] = -(float)zp[c] * sc[c];
  eff->n_post = 0;
  post_op *sh = &eff->post[eff->n_post++];
  memset(sh, 0, sizeof *sh);
  strcpy(sh->kind, "shift");
  sh->arg = -1;
  for (int i = 0; i < d->n_post; i++) eff->post[eff->n_post++] = d->post[i];
  if (d->q_scale >= 0) {
    const float *qs = args[d->q_scale];
    const uint8_t *qz = args[d->q_zp];
    if (!qs || !qz || !(*qs > 0)) return dnnl_invalid_arguments;
    post_op *q = &eff->post[eff->n_post++];
    memset(q, 0, sizeof *q);
    strcpy(q->kind, "linear");
    q->lo = 1.0f / *qs;
    q->hi = (float)*qz;
  }
  return dnnl_success;
}

/* The attribute: the post-ops, and an int8 call's dequantization scales
 * per channel (the channel axis cax of the result) as output scales. */
static dnnl_status_t call_attr(const desc *d, void *const *args, int nd,
                               const int64_t *dst_dims, int cax,
                               bool channels_last,
                               dnnl_primitive_attr_t *attr) {
  dnnl_status_t s = post_attr(d, nd, dst_dims, cax, channels_last, attr);
  if (!s && d->int8)
    s = dnnl_primitive_attr_set_output_scales(*attr, dst_dims[cax], 1 << cax,
                                              args[d->dq_scale]);
  return s;
}

typedef struct built {
  dnnl_primitive_desc_t pd;
  dnnl_memory_desc_t src, wei_user, dst, bias;
  bool has_bias, wei_const;
  const void *wei_ptr; /* user weights (maybe a plain copy) */
  unsigned char *plain;
  dnnl_memory_desc_t md1[MAX_POST];
} built;

static dnnl_status_t build_conv(const desc *d, ts_vendor_op *op,
                                void *const *args, built *b) {
  int64_t N = d->dims[0], C = d->dims[1], H = d->dims[2], W = d->dims[3];
  int64_t CO = d->dims[4], OH = d->dims[5], OW = d->dims[6];
  int64_t G = d->g, COg = CO / G, CIg = C / G, KH = d->kh, KW = d->kw;
  dnnl_format_tag_t tag = d->nchw ? dnnl_nchw : dnnl_nhwc;
  dnnl_status_t s;
  int64_t sd[4] = {N, C, H, W}, dd[4] = {N, CO, OH, OW};
  if ((s = md_tag(&b->src, 4, sd, tag)) || (s = md_tag(&b->dst, 4, dd, tag)))
    return s;
  /* weights [G,] O, I, KH, KW over the stored array */
  const void *w = args[d->wei];
  size_t esize = d->int8 ? 1 : sizeof(float);
  if (!strcmp(d->wfmt, "blk")) { /* [CO/B, KH, KW, CI, B] -> HWIO */
    w = unblock(w, 1, KH * KW * CIg, CO, d->wb, esize, &b->plain);
    if (!w) return dnnl_out_of_memory;
  }
  int64_t wd[5] = {G, COg, CIg, KH, KW}, ws[5];
  if (!strcmp(d->wfmt, "oihw")) {
    int64_t st[5] = {COg * CIg * KH * KW, CIg * KH * KW, KH * KW, KW, 1};
    memcpy(ws, st, sizeof st);
  } else {
    int64_t st[5] = {COg, 1, CO, KW * CIg * CO, CIg * CO};
    memcpy(ws, st, sizeof st);
  }
  int nd = G > 1 ? 5 : 4, o = G > 1 ? 0 : 1;
  dnnl_memory_desc_t wany;
  if ((s = md_strided(&b->wei_user, nd, wd + o, ws + o)) ||
      (s = md_tag(&wany, nd, wd + o, dnnl_format_tag_any)))
    return s;
  int8_types(d, &b->src, &b->wei_user, &wany, &b->dst);
  b->wei_ptr = w;
  b->wei_const = true;
  b->has_bias = d->bias >= 0;
  if (b->has_bias && (s = md_tag(&b->bias, 1, &CO, dnnl_x))) return s;
  dnnl_primitive_attr_t attr = NULL;
  if ((s = call_attr(d, args, 4, dd, 1, !d->nchw, &attr))) {
    dnnl_primitive_attr_destroy(attr);
    return s;
  }
  dnnl_convolution_desc_t cd;
  dnnl_dims_t stride = {d->sh, d->sw}, dil = {d->dh - 1, d->dw - 1};
  dnnl_dims_t pl = {d->pt, d->pl}, pr = {d->pb, d->pr};
  s = dnnl_dilated_convolution_forward_desc_init(
      &cd, dnnl_forward_inference, dnnl_convolution_direct, &b->src, &wany,
      b->has_bias ? &b->bias : NULL, &b->dst, stride, dil, pl, pr);
  if (!s) s = dnnl_primitive_desc_create(&b->pd, &cd, attr, op->engine, NULL);
  dnnl_primitive_attr_destroy(attr);
  return s;
}

static dnnl_status_t build_matmul(const desc *d, ts_vendor_op *op,
                                  void *const *args, built *b) {
  int nd = d->rc;
  bool blk = !strcmp(d->wfmt, "blk");
  int rb = d->rb - (blk ? 1 : 0); /* B's rank as [.., K, N] */
  if (nd < 2 || d->ra > nd || rb > nd || d->ra < 2 || rb < 2 ||
      (blk && d->wb <= 0))
    return dnnl_invalid_arguments;
  int64_t a[8], w[8], c[8], st[8];
  /* every operand at the output's rank, leading 1s */
  for (int i = 0; i < nd; i++) {
    a[i] = i < nd - d->ra ? 1 : d->a[i - (nd - d->ra)];
    c[i] = d->c[i];
  }
  /* B as [.., K, N]: blocked [.., N/B, K, B] */
  int64_t K = a[nd - 1], N = c[nd - 1];
  int64_t bk = d->b[d->rb - 2];
  int64_t bn = blk ? d->b[d->rb - 3] * d->b[d->rb - 1] : d->b[d->rb - 1];
  if (bk != K || bn != N || c[nd - 2] != a[nd - 2] ||
      (blk && d->b[d->rb - 1] != d->wb))
    return dnnl_invalid_arguments;
  int nbb = d->rb - (blk ? 3 : 2); /* B's batch axes */
  for (int i = 0; i < nd - 2; i++) {
    int k = i - (nd - 2 - nbb);
    w[i] = k >= 0 ? d->b[k] : 1;
  }
  w[nd - 2] = K, w[nd - 1] = N;
  dnnl_status_t s;
  dense_strides(nd, a, st);
  if ((s = md_strided(&b->src, nd, a, st))) return s;
  dense_strides(nd, c, st);
  if ((s = md_strided(&b->dst, nd, c, st))) return s;
  b->wei_const = d->wconst != 0;
  const void *wp = b->wei_const ? args[d->wei] : NULL;
  if (blk && wp) {
    int64_t outer = 1;
    for (int i = 0; i < nd - 2; i++) outer *= w[i];
    wp =
        unblock(wp, outer, K, N, d->wb, d->int8 ? 1 : sizeof(float), &b->plain);
    if (!wp) return dnnl_out_of_memory;
  } else if (blk) {
    return dnnl_invalid_arguments; /* blocked weights are constants */
  }
  dense_strides(nd, w, st);
  if ((s = md_strided(&b->wei_user, nd, w, st))) return s;
  b->wei_ptr = wp;
  dnnl_memory_desc_t wmd = b->wei_user;
  if (b->wei_const && (s = md_tag(&wmd, nd, w, dnnl_format_tag_any))) return s;
  if (d->int8 && !b->wei_const) return dnnl_invalid_arguments;
  int8_types(d, &b->src, &b->wei_user, &wmd, &b->dst);
  dnnl_primitive_attr_t attr = NULL;
  if ((s = call_attr(d, args, nd, c, nd - 1, false, &attr))) {
    dnnl_primitive_attr_destroy(attr);
    return s;
  }
  dnnl_matmul_desc_t md;
  s = dnnl_matmul_desc_init(&md, &b->src, &wmd, NULL, &b->dst);
  if (!s) s = dnnl_primitive_desc_create(&b->pd, &md, attr, op->engine, NULL);
  dnnl_primitive_attr_destroy(attr);
  return s;
}

/* A softmax over one axis of a dense array (in place allowed). */
static dnnl_status_t build_softmax(const desc *d, ts_vendor_op *op, built *b) {
  int64_t st[8];
  dense_strides(d->rx, d->x, st);
  dnnl_status_t s = md_strided(&b->src, d->rx, d->x, st);
  if (s) return s;
  b->dst = b->src;
  dnnl_softmax_v2_desc_t sd;
  s = dnnl_softmax_v2_forward_desc_init(&sd, dnnl_forward_inference,
                                        dnnl_softmax_accurate, &b->src, &b->dst,
                                        (int)d->axis);
  if (!s) s = dnnl_primitive_desc_create(&b->pd, &sd, NULL, op->engine, NULL);
  return s;
}

/* A layer normalization of each row of [rows, len]: scale and (optional)
 * shift of len elements; the statistics are not kept. */
static dnnl_status_t build_lnorm(const desc *d, ts_vendor_op *op, built *b) {
  int64_t st[2];
  dense_strides(2, d->x, st);
  dnnl_status_t s = md_strided(&b->src, 2, d->x, st);
  if (!s) s = md_tag(&b->bias, 1, &d->x[1], dnnl_x); /* scale, shift */
  if (s) return s;
  b->dst = b->src;
  unsigned flags = dnnl_use_scale | (d->shift >= 0 ? dnnl_use_shift : 0U);
  dnnl_layer_normalization_desc_t ld;
  s = dnnl_layer_normalization_forward_desc_init(&ld, dnnl_forward_inference,
                                                 &b->src, NULL, d->eps, flags);
  if (!s) s = dnnl_primitive_desc_create(&b->pd, &ld, NULL, op->engine, NULL);
  return s;
}

/* Adds an executed argument: the call's argument `arg`, or (arg < 0) the
 * memory given. */
static dnnl_status_t add_exec(ts_vendor_op *op, int which,
                              const dnnl_memory_desc_t *md, int arg,
                              dnnl_memory_t given) {
  dnnl_memory_t m = given;
  dnnl_status_t s = dnnl_success;
  if (!m) s = dnnl_memory_create(&m, md, op->engine, DNNL_MEMORY_NONE);
  if (s) return s;
  op->exec[op->n_exec] = (dnnl_exec_arg_t){which, m};
  op->arg_of[op->n_exec++] = arg;
  return dnnl_success;
}

/* Reorders the constant weights into the primitive's format, once. */
static dnnl_status_t prepack(ts_vendor_op *op, built *b, dnnl_memory_t *out) {
  const dnnl_memory_desc_t *want =
      dnnl_primitive_desc_query_md(b->pd, dnnl_query_weights_md, 0);
  dnnl_memory_t user = NULL, packed = NULL;
  dnnl_primitive_desc_t rpd = NULL;
  dnnl_primitive_t reorder = NULL;
  dnnl_status_t s;
  if ((s = dnnl_memory_create(&user, &b->wei_user, op->engine,
                              (void *)b->wei_ptr)) ||
      (s = dnnl_memory_create(&packed, want, op->engine,
                              DNNL_MEMORY_ALLOCATE)) ||
      (s = dnnl_reorder_primitive_desc_create(&rpd, &b->wei_user, op->engine,
                                              want, op->engine, NULL)) ||
      (s = dnnl_primitive_create(&reorder, rpd)))
    goto done;
  dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, packed}};
  if ((s = dnnl_primitive_execute(reorder, op->stream, 2, a)) ||
      (s = dnnl_stream_wait(op->stream)))
    goto done;
  *out = packed;
  packed = NULL;
done:
  if (reorder) dnnl_primitive_destroy(reorder);
  if (rpd) dnnl_primitive_desc_destroy(rpd);
  if (user) dnnl_memory_destroy(user);
  if (packed) dnnl_memory_destroy(packed);
  return s;
}

API void ts_vendor_dnnl_destroy(ts_vendor_op *op) {
  if (!op) return;
  for (int i = 0; i < op->n_exec; i++)
    if (op->exec[i].memory) dnnl_memory_destroy(op->exec[i].memory);
  if (op->prim) dnnl_primitive_destroy(op->prim);
  if (op->stream) dnnl_stream_destroy(op->stream);
  if (op->engine) dnnl_engine_destroy(op->engine);
  free(op->shift);
  free(op);
}

/* Whether oneDNN's int8 products are exact here: with VNNI (AVX512-VNNI
 * or AVX-VNNI in the ISA it dispatches to, which ONEDNN_MAX_CPU_ISA can
 * lower) they accumulate in 32 bits; without it they go through vpmaddubsw,
 * whose 16-bit pair sums saturate: 64 products of 127 x -128 came out 0. */
static bool int8_exact(void) {
  unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
  return (isa & 0x40u) || (isa & 0x400u); /* the avx512_core_vnni bit, the
                                            avx2_vnni bit */
}

API int ts_vendor_dnnl_create(const char *text, void *const *args,
                              int n_threads, ts_vendor_op **out, char *err,
                              size_t err_size) {
  *out = NULL;
  desc d;
  if (parse(text, &d, err, err_size)) return -1;
  if (!strcmp(d.op, "conv") && !d.wconst)
    return fail(err, err_size, "vendor call: conv weights are not constant");
  if (d.wconst && !args[d.wei])
    return fail(err, err_size, "vendor call: no constant weights given");
  if (d.int8 && !int8_exact())
    return fail(err, err_size,
                "vendor call: oneDNN runs int8 on this CPU without VNNI "
                "(effective ISA %#x), through 16-bit pair sums that saturate "
                "(or weights it halves), so its results are not exact",
                (unsigned)dnnl_get_effective_cpu_isa());
  /* an in-place residual: the output overwrites the tensor it adds (the
   * memory plan reuses a dying input), so oneDNN's sum post-op adds what
   * the output holds before the call; a binary add would read it after
   * oneDNN wrote partial sums there */
  for (int i = 0; i < d.n_post; i++)
    if (!strcmp(d.post[i].kind, "add") && d.post[i].full && args[d.dst] &&
        d.post[i].arg >= 0 && d.post[i].arg < MAX_ARGS &&
        args[d.post[i].arg] == args[d.dst]) {
      if (d.q_scale >= 0) /* a uint8 result over the float32 it adds */
        return fail(err, err_size,
                    "vendor call: a quantized result overwrites the tensor "
                    "it adds");
      d.post[i].sum = true;
    }
  /* oneDNN's fast implementations take the sum post-op first: after adds
   * only (a bias), it moves to the front, (x + b) + r as (x + r) + b */
  for (int i = 1; i < d.n_post; i++) {
    if (!d.post[i].sum) continue;
    bool adds = true;
    for (int k = 0; k < i; k++)
      adds = adds && !strcmp(d.post[k].kind, "add") && !d.post[k].sum;
    if (!adds) break;
    post_op sum = d.post[i];
    memmove(&d.post[1], &d.post[0], sizeof sum * (size_t)i);
    d.post[0] = sum;
    break;
  }
  ts_vendor_op *op = calloc(1, sizeof *op);
  if (!op) return fail(err, err_size, "out of memory");
  op->n_threads = n_threads > 0 ? n_threads : omp_get_max_threads();
  int saved = omp_get_max_threads();
  omp_set_num_threads(op->n_threads);
  built b;
  memset(&b, 0, sizeof b);
  dnnl_status_t s = dnnl_engine_create(&op->engine, dnnl_cpu, 0);
  if (!s)
    s = dnnl_stream_create(&op->stream, op->engine, dnnl_stream_default_flags);
  const char *what = "creating the engine";
  if (!s) {
    what = "reading the int8 scales and zero points";
    desc eff;
    s = int8_prepare(&d, op, args, &eff);
    if (!s) d = eff;
  }
  if (!s) {
    what = "describing the primitive";
    s = !strcmp(d.op, "conv")      ? build_conv(&d, op, args, &b)
        : !strcmp(d.op, "matmul")  ? build_matmul(&d, op, args, &b)
        : !strcmp(d.op, "softmax") ? build_softmax(&d, op, &b)
                                   : build_lnorm(&d, op, &b);
  }
  const char *impl = NULL;
  if (!s &&
      dnnl_primitive_desc_query(b.pd, dnnl_query_impl_info_str, 0, &impl) ==
          dnnl_success &&
      impl && !strncmp(impl, "ref", 3) && heavy(&d)) {
    /* oneDNN's reference loops: orders of magnitude below the tuned
     * kernel (a blocked-weights matmul with post-ops at some sizes) */
    char why[200];
    snprintf(why, sizeof why,
             "oneDNN has only its reference implementation "
             "(%s) for it",
             impl);
    dnnl_primitive_desc_destroy(b.pd);
    free(b.plain);
    omp_set_num_threads(saved);
    ts_vendor_dnnl_destroy(op);
    return fail(err, err_size, "%s", why);
  }
  if (!s) {
    what = "creating the primitive";
    s = dnnl_primitive_create(&op->prim, b.pd);
  }
  dnnl_memory_t packed = NULL;
  if (!s && b.wei_const) {
    what = "reordering the weights";
    s = prepack(op, &b, &packed);
  }
  if (!s) {
    what = "binding the arguments";
    const dnnl_memory_desc_t *q;
    q = dnnl_primitive_desc_query_md(b.pd, dnnl_query_src_md, 0);
    s = add_exec(op, DNNL_ARG_SRC, q, d.src, NULL);
    q = dnnl_primitive_desc_query_md(b.pd, dnnl_query_dst_md, 0);
    if (!s) s = add_exec(op, DNNL_ARG_DST, q, d.dst, NULL);
    if (!s && packed) {
      s = add_exec(op, DNNL_ARG_WEIGHTS, NULL, -1, packed);
      packed = NULL;
    } else if (!s && d.wei >= 0) {
      s = add_exec(op, DNNL_ARG_WEIGHTS, &b.wei_user, d.wei, NULL);
    }
    if (!s && d.scale >= 0)
      s = add_exec(op, DNNL_ARG_SCALE, &b.bias, d.scale, NULL);
    if (!s && d.shift >= 0)
      s = add_exec(op, DNNL_ARG_SHIFT, &b.bias, d.shift, NULL);
    if (!s && b.has_bias)
      s = add_exec(op, DNNL_ARG_BIAS, &b.bias, d.bias, NULL);
    for (int i = 0, k = 0; !s && i < d.n_post; i++) {
      bool shift = !strcmp(d.post[i].kind, "shift");
      if ((strcmp(d.post[i].kind, "add") && strcmp(d.post[i].kind, "mul") &&
           !shift) ||
          d.post[i].sum)
        continue;
      q = dnnl_primitive_desc_query_md(b.pd, dnnl_query_exec_arg_md,
                                       DNNL_ARG_ATTR_MULTIPLE_POST_OP(i) |
                                           DNNL_ARG_SRC_1);
      if (shift) { /* the call's own constant */
        dnnl_memory_t m = NULL;
        s = dnnl_memory_create(&m, q, op->engine, op->shift);
        if (!s)
          s = add_exec(op, DNNL_ARG_ATTR_MULTIPLE_POST_OP(i) | DNNL_ARG_SRC_1,
                       NULL, -1, m);
        k++;
        continue;
      }
      if (d.post[i].arg < 0 || d.post[i].arg >= MAX_ARGS) {
        s = dnnl_invalid_arguments;
        break;
      }
      s = add_exec(op, DNNL_ARG_ATTR_MULTIPLE_POST_OP(i) | DNNL_ARG_SRC_1, q,
                   d.post[i].arg, NULL);
      k++;
    }
  }
  if (packed) dnnl_memory_destroy(packed);
  if (b.pd) dnnl_primitive_desc_destroy(b.pd);
  free(b.plain);
  omp_set_num_threads(saved);
  if (s) {
    ts_vendor_dnnl_destroy(op);
    return fail(err, err_size, "oneDNN %s (%s) failed: status %d", what, text,
                (int)s);
  }
  *out = op;
  return 0;
}

/* The parallel loops of the model's own kernels, on the same OpenMP team
 * as oneDNN's: a model that calls oneDNN runs every kernel here (its glue
 * defines ts_rt_parallel_for to call this). Two thread pools on the same
 * cores, each spinning while the other works, cost a call ten times its
 * time (a 65 us depthwise conv took 1 to 7 ms between pool jobs). The
 * ranges are those of runtime/pool.c: min(n, threads) contiguous chunks;
 * the first failure is returned. */
API int32_t ts_vendor_dnnl_parallel_for(int32_t (*task)(void *, int64_t,
                                                        int64_t),
                                        void *closure, int64_t n,
                                        int n_threads) {
  if (n <= 0) return 0;
  int nt = n_threads > 0 ? n_threads : omp_get_max_threads();
  if (nt > n) nt = (int)n;
  if (nt <= 1 || omp_in_parallel()) return task(closure, 0, n);
  int32_t result = 0;
#pragma omp parallel num_threads(nt)
  {
    int t = omp_get_thread_num(), k = omp_get_num_threads();
    int64_t begin = n * t / k, end = n * (t + 1) / k;
    int32_t r = begin < end ? task(closure, begin, end) : 0;
    if (r != 0) {
#pragma omp critical
      if (result == 0) result = r;
    }
  }
  return result;
}

API void ts_vendor_dnnl_set_threads(ts_vendor_op *op, int n_threads) {
  if (op && n_threads > 0) op->n_threads = n_threads;
}

/* Evicts from the caches the call's constants: the arguments in mask (bit
 * i: args[i], bytes[i] long) and the memories the call owns (the weights it
 * reordered once, an int8 call's shift), line by line on the call's OpenMP
 * team, so that the team is awake for the call that follows (tuning's cold
 * confirmation: a compiled model's layer finds its weights evicted by the
 * layers since its last run). */
API void ts_vendor_dnnl_evict(ts_vendor_op *op, void *const *args,
                              const size_t *bytes, int n, uint64_t mask) {
  unsigned char *base[MAX_ARGS + MAX_EXEC];
  size_t len[MAX_ARGS + MAX_EXEC];
  int m = 0;
  for (int i = 0; i < n && i < MAX_ARGS && i < 64; i++)
    if (mask >> i & 1 && args[i]) base[m] = args[i], len[m++] = bytes[i];
  for (int i = 0; i < op->n_exec; i++) {
    void *h = NULL;
    const dnnl_memory_desc_t *md = NULL;
    if (op->arg_of[i] >= 0 ||
        dnnl_memory_get_data_handle(op->exec[i].memory, &h) || !h ||
        dnnl_memory_get_memory_desc(op->exec[i].memory, &md))
      continue;
    base[m] = h;
    len[m++] = dnnl_memory_desc_get_size(md);
  }
  omp_set_num_threads(op->n_threads);
  for (int b = 0; b < m; b++) {
    uintptr_t lo = (uintptr_t)base[b] & ~(uintptr_t)63;
    int64_t lines = (int64_t)(((uintptr_t)base[b] + len[b] - lo + 63) / 64);
#pragma omp parallel for schedule(static)
    for (int64_t l = 0; l < lines; l++)
      __asm__ volatile("clflush %0" : "+m"(*(volatile char *)(lo + 64 * l)));
  }
  __asm__ volatile("mfence" ::: "memory");
}

API int ts_vendor_dnnl_run(ts_vendor_op *op, void *const *args) {
  for (int i = 0; i < op->n_exec; i++)
    if (op->arg_of[i] >= 0)
      dnnl_memory_set_data_handle(op->exec[i].memory, args[op->arg_of[i]]);
  omp_set_num_threads(op->n_threads);
  dnnl_status_t s =
      dnnl_primitive_execute(op->prim, op->stream, op->n_exec, op->exec);
  if (!s) s = dnnl_stream_wait(op->stream);
  return (int)s;
}
