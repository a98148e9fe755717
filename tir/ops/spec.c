/*
 * spec.c — workload specs: the operator table (every operator with its keys,
 * their types, defaults and ranges), the one generic parser and validator of
 * `NAME key=value ...`, the canonical spec and short name, and the usage
 * strings, which the preprocessor assembles from the same key lists so they
 * can never disagree with the parser. The operators themselves are built by
 * the family files (linalg.c, conv.c, nn.c, tensor.c).
 *
 * FLOP formulas (the `flops` field; OH/OW are output height/width, CIg =
 * CI/groups). Those marked = equal ts_func_flops of the built function:
 *
 *   matmul                 2*M*N*K                                   =
 *   batch_matmul           2*B*M*N*K                                 =
 *   dense                  2*M*N*K (+ M*N with bias)                 =
 *   conv2d_nchw/nhwc       2*N*OH*OW*CO*CIg*KH*KW                    =
 *   depthwise_conv2d_nhwc  2*N*OH*OW*C*KH*KW                         =
 *   conv2d_transpose_nchw  2*N*CO*OH*OW*CI*KH*KW (the gather form over
 *                          the zero-dilated input, as built)         =
 *   pool2d_nhwc            max: N*OH*OW*C*KH*KW;
 *                          avg: N*OH*OW*C*KH*KW + N*OH*OW*C (the divide)
 *   softmax                5*N*D (max, subtract, exp, sum, divide)
 *   layer_norm             9*N*D + 4*N (sum, mean, centred square sum,
 *                          rsqrt(var+eps), normalise/scale/shift)
 *   elementwise            elements * (1, or 5 for gelu)
 *   reduce                 N*D
 *   transpose, layout_transform, pad   0 (data movement)
 */
#include "ops.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- key lists ----
 * KX(kind, name, lo, hi, default, words) per key, in canonical order:
 * required keys, optional keys, dtype, out_dtype. The expanding macros are
 * variadic so that DIM expands to its four fields before they are split. */

#define DT_ALL "float32|float64|float16|bfloat16|int8|uint8|int32"
#define DT_FLOAT "float32|float64|float16|bfloat16"
#define DT_OUT "float32|float64|float16|bfloat16|int32"
#define DIM 1, OP_DIM_MAX, 0, NULL

#define MATMUL_KEYS(KX)                                                        \
  KX(REQ_INT, M, DIM)                                                          \
  KX(REQ_INT, N, DIM)                                                          \
  KX(REQ_INT, K, DIM)                                                          \
  KX(OPT_INT, transpose_a, 0, 1, 0, NULL)                                      \
  KX(OPT_INT, transpose_b, 0, 1, 0, NULL)                                      \
  KX(DTYPE, dtype, 0, 0, 0, DT_ALL)                                            \
  KX(OUT_DTYPE, out_dtype, 0, 0, 0, DT_OUT)

#define BATCH_MATMUL_KEYS(KX)                                                  \
  KX(REQ_INT, B, DIM)                                                          \
  MATMUL_KEYS(KX)

#define DENSE_KEYS(KX)                                                         \
  KX(REQ_INT, M, DIM)                                                          \
  KX(REQ_INT, N, DIM)                                                          \
  KX(REQ_INT, K, DIM)                                                          \
  KX(OPT_INT, bias, 0, 1, 1, NULL)                                             \
  KX(DTYPE, dtype, 0, 0, 0, DT_ALL)                                            \
  KX(OUT_DTYPE, out_dtype, 0, 0, 0, DT_OUT)

#define CONV2D_KEYS(KX)                                                        \
  KX(REQ_INT, N, DIM)                                                          \
  KX(REQ_INT, H, DIM)                                                          \
  KX(REQ_INT, W, DIM)                                                          \
  KX(REQ_INT, CI, DIM)                                                         \
  KX(REQ_INT, CO, DIM)                                                         \
  KX(REQ_INT, KH, DIM)                                                         \
  KX(REQ_INT, KW, DIM)                                                         \
  KX(OPT_INT, stride, 1, OP_DIM_MAX, 1, NULL)                                  \
  KX(OPT_INT, pad, 0, OP_DIM_MAX, 0, NULL)                                     \
  KX(OPT_INT, dilation, 1, OP_DIM_MAX, 1, NULL)                                \
  KX(OPT_INT, groups, 1, OP_DIM_MAX, 1, NULL)                                  \
  KX(QUIET_INT, weight_block, 0, OP_DIM_MAX, 0, NULL)                          \
  KX(DTYPE, dtype, 0, 0, 0, DT_ALL)                                            \
  KX(OUT_DTYPE, out_dtype, 0, 0, 0, DT_OUT)

#define DEPTHWISE_KEYS(KX)                                                     \
  KX(REQ_INT, N, DIM)                                                          \
  KX(REQ_INT, H, DIM)                                                          \
  KX(REQ_INT, W, DIM)                                                          \
  KX(REQ_INT, C, DIM)                                                          \
  KX(REQ_INT, KH, DIM)                                                         \
  KX(REQ_INT, KW, DIM)                                                         \
  KX(OPT_INT, stride, 1, OP_DIM_MAX, 1, NULL)                                  \
  KX(OPT_INT, pad, 0, OP_DIM_MAX, 0, NULL)                                     \
  KX(DTYPE, dtype, 0, 0, 0, DT_ALL)                                            \
  KX(OUT_DTYPE, out_dtype, 0, 0, 0, DT_OUT)

#define CONV2D_TRANSPOSE_KEYS(KX)                                              \
  KX(REQ_INT, N, DIM)                                                          \
  KX(REQ_INT, H, DIM)                                                          \
  KX(REQ_INT, W, DIM)                                                          \
  KX(REQ_INT, CI, DIM)                                                         \
  KX(REQ_INT, CO, DIM)                                                         \
  KX(REQ_INT, KH, DIM)                                                         \
  KX(REQ_INT, KW, DIM)                                                         \
  KX(OPT_INT, stride, 1, OP_DIM_MAX, 1, NULL)                                  \
  KX(OPT_INT, pad, 0, OP_DIM_MAX, 0, NULL)                                     \
  KX(DTYPE, dtype, 0, 0, 0, DT_ALL)                                            \
  KX(OUT_DTYPE, out_dtype, 0, 0, 0, DT_OUT)

#define POOL2D_KEYS(KX)                                                        \
  KX(REQ_INT, N, DIM)                                                          \
  KX(REQ_INT, H, DIM)                                                          \
  KX(REQ_INT, W, DIM)                                                          \
  KX(REQ_INT, C, DIM)                                                          \
  KX(REQ_INT, KH, DIM)                                                         \
  KX(REQ_INT, KW, DIM)                                                         \
  KX(OPT_INT, stride, 1, OP_DIM_MAX, 1, NULL)                                  \
  KX(OPT_INT, pad, 0, OP_DIM_MAX, 0, NULL)                                     \
  KX(OPT_ENUM, kind, 0, 0, 0, "max|avg")                                       \
  KX(DTYPE, dtype, 0, 0, 0, DT_ALL)

#define ROWS_KEYS(KX)                                                          \
  KX(REQ_INT, N, DIM)                                                          \
  KX(REQ_INT, D, DIM)                                                          \
  KX(DTYPE, dtype, 0, 0, 0, DT_FLOAT)

#define ELEMENTWISE_KEYS(KX)                                                   \
  KX(REQ_ENUM, op, 0, 0, 0, "add|mul|relu|gelu|sigmoid|tanh")                  \
  KX(REQ_SHAPE, shape, DIM)                                                    \
  KX(DTYPE, dtype, 0, 0, 0, DT_ALL)

#define REDUCE_KEYS(KX)                                                        \
  KX(REQ_ENUM, op, 0, 0, 0, "sum|max")                                         \
  KX(REQ_INT, N, DIM)                                                          \
  KX(REQ_INT, D, DIM)                                                          \
  KX(DTYPE, dtype, 0, 0, 0, DT_ALL)

#define TRANSPOSE_KEYS(KX)                                                     \
  KX(REQ_SHAPE, shape, DIM)                                                    \
  KX(REQ_SHAPE, perm, 0, TS_MAX_DIMS - 1, 0, NULL)                             \
  KX(DTYPE, dtype, 0, 0, 0, DT_ALL)

#define LAYOUT_TRANSFORM_KEYS(KX)                                              \
  KX(REQ_INT, N, DIM)                                                          \
  KX(REQ_INT, C, DIM)                                                          \
  KX(REQ_INT, H, DIM)                                                          \
  KX(REQ_INT, W, DIM)                                                          \
  KX(OPT_ENUM, src, 0, 0, 0, "NCHW|NHWC|NCHW16c")                              \
  KX(OPT_ENUM, dst, 0, 0, 0, "NHWC|NCHW|NCHW16c")                              \
  KX(DTYPE, dtype, 0, 0, 0, DT_ALL)

#define PAD_KEYS(KX)                                                           \
  KX(REQ_SHAPE, shape, DIM)                                                    \
  KX(REQ_SHAPE, before, 0, OP_DIM_MAX, 0, NULL)                                \
  KX(REQ_SHAPE, after, 0, OP_DIM_MAX, 0, NULL)                                 \
  KX(DTYPE, dtype, 0, 0, 0, DT_ALL)

/* Expansion into table entries. */
#define KEYDEF(...) KEYDEF_(__VA_ARGS__)
#define KEYDEF_(kind, n, lo, hi, def, w) KEYDEF_##kind(n, lo, hi, def, w)
#define KEYDEF_REQ_INT(n, lo, hi, def, w)                                      \
  {#n, KEY_INT, true, lo, hi, def, w, false},
#define KEYDEF_OPT_INT(n, lo, hi, def, w)                                      \
  {#n, KEY_INT, false, lo, hi, def, w, false},
#define KEYDEF_QUIET_INT(n, lo, hi, def, w)                                    \
  {#n, KEY_INT, false, lo, hi, def, w, true},
#define KEYDEF_REQ_SHAPE(n, lo, hi, def, w)                                    \
  {#n, KEY_SHAPE, true, lo, hi, def, w, false},
#define KEYDEF_REQ_ENUM(n, lo, hi, def, w)                                     \
  {#n, KEY_ENUM, true, lo, hi, def, w, false},
#define KEYDEF_OPT_ENUM(n, lo, hi, def, w)                                     \
  {#n, KEY_ENUM, false, lo, hi, def, w, false},
#define KEYDEF_DTYPE(n, lo, hi, def, w)                                        \
  {#n, KEY_DTYPE, false, lo, hi, def, w, false},
#define KEYDEF_OUT_DTYPE(n, lo, hi, def, w)                                    \
  {#n, KEY_OUT_DTYPE, false, lo, hi, def, w, false},

/* Expansion into the usage string: required keys, then [optional=default]. */
#define UREQ(...) UREQ_(__VA_ARGS__)
#define UREQ_(kind, n, lo, hi, def, w) UREQ_##kind(n, def, w)
#define UREQ_REQ_INT(n, def, w) " " #n
#define UREQ_REQ_SHAPE(n, def, w) " " #n "=AxBx..."
#define UREQ_REQ_ENUM(n, def, w) " " #n "=" w
#define UREQ_OPT_INT(n, def, w)
#define UREQ_QUIET_INT(n, def, w)
#define UREQ_OPT_ENUM(n, def, w)
#define UREQ_DTYPE(n, def, w)
#define UREQ_OUT_DTYPE(n, def, w)
#define UOPT(...) UOPT_(__VA_ARGS__)
#define UOPT_(kind, n, lo, hi, def, w) UOPT_##kind(n, def, w)
#define UOPT_REQ_INT(n, def, w)
#define UOPT_REQ_SHAPE(n, def, w)
#define UOPT_REQ_ENUM(n, def, w)
#define UOPT_OPT_INT(n, def, w) " [" #n "=" #def "]"
#define UOPT_QUIET_INT(n, def, w) " [" #n "=" #def "]"
#define UOPT_OPT_ENUM(n, def, w) " [" #n "=" w "]"
#define UOPT_DTYPE(n, def, w) " [" #n "=" w "]"
#define UOPT_OUT_DTYPE(n, def, w) " [" #n "=auto|" w "]"

static const op_key matmul_keys[] = {MATMUL_KEYS(KEYDEF)};
static const op_key batch_matmul_keys[] = {BATCH_MATMUL_KEYS(KEYDEF)};
static const op_key dense_keys[] = {DENSE_KEYS(KEYDEF)};
static const op_key conv2d_keys[] = {CONV2D_KEYS(KEYDEF)};
static const op_key depthwise_keys[] = {DEPTHWISE_KEYS(KEYDEF)};
static const op_key conv2d_transpose_keys[] = {CONV2D_TRANSPOSE_KEYS(KEYDEF)};
static const op_key pool2d_keys[] = {POOL2D_KEYS(KEYDEF)};
static const op_key rows_keys[] = {ROWS_KEYS(KEYDEF)};
static const op_key elementwise_keys[] = {ELEMENTWISE_KEYS(KEYDEF)};
static const op_key reduce_keys[] = {REDUCE_KEYS(KEYDEF)};
static const op_key transpose_keys[] = {TRANSPOSE_KEYS(KEYDEF)};
static const op_key layout_transform_keys[] = {LAYOUT_TRANSFORM_KEYS(KEYDEF)};
static const op_key pad_keys[] = {PAD_KEYS(KEYDEF)};

#define OPDEF(name, LIST, keys, check, build, flops)                           \
  {                                                                            \
#name, #name LIST(UREQ) LIST(UOPT), keys,                                  \
        (int)(sizeof keys / sizeof keys[0]), check, build, flops               \
  }

static const op_def op_table[] = {
    OPDEF(matmul, MATMUL_KEYS, matmul_keys, NULL, op_build_matmul,
          op_flops_matmul),
    OPDEF(batch_matmul, BATCH_MATMUL_KEYS, batch_matmul_keys, NULL,
          op_build_batch_matmul, op_flops_batch_matmul),
    OPDEF(dense, DENSE_KEYS, dense_keys, NULL, op_build_dense, op_flops_dense),
    OPDEF(conv2d_nchw, CONV2D_KEYS, conv2d_keys, op_check_conv2d,
          op_build_conv2d_nchw, op_flops_conv2d),
    OPDEF(conv2d_nhwc, CONV2D_KEYS, conv2d_keys, op_check_conv2d,
          op_build_conv2d_nhwc, op_flops_conv2d),
    OPDEF(depthwise_conv2d_nhwc, DEPTHWISE_KEYS, depthwise_keys,
          op_check_depthwise, op_build_depthwise, op_flops_depthwise),
    OPDEF(conv2d_transpose_nchw, CONV2D_TRANSPOSE_KEYS, conv2d_transpose_keys,
          op_check_conv2d_transpose, op_build_conv2d_transpose,
          op_flops_conv2d_transpose),
    OPDEF(pool2d_nhwc, POOL2D_KEYS, pool2d_keys, op_check_pool2d,
          op_build_pool2d, op_flops_pool2d),
    OPDEF(softmax, ROWS_KEYS, rows_keys, NULL, op_build_softmax,
          op_flops_softmax),
    OPDEF(layer_norm, ROWS_KEYS, rows_keys, NULL, op_build_layer_norm,
          op_flops_layer_norm),
    OPDEF(elementwise, ELEMENTWISE_KEYS, elementwise_keys, op_check_elementwise,
          op_build_elementwise, op_flops_elementwise),
    OPDEF(reduce, REDUCE_KEYS, reduce_keys, NULL, op_build_reduce,
          op_flops_reduce),
    OPDEF(transpose, TRANSPOSE_KEYS, transpose_keys, op_check_transpose,
          op_build_transpose, op_flops_zero),
    OPDEF(layout_transform, LAYOUT_TRANSFORM_KEYS, layout_transform_keys,
          op_check_layout_transform, op_build_layout_transform, op_flops_zero),
    OPDEF(pad, PAD_KEYS, pad_keys, op_check_pad, op_build_pad, op_flops_zero),
};
#define N_OPS ((int)(sizeof op_table / sizeof op_table[0]))

static const char *const op_names[] = {
    "matmul",
    "batch_matmul",
    "dense",
    "conv2d_nchw",
    "conv2d_nhwc",
    "depthwise_conv2d_nhwc",
    "conv2d_transpose_nchw",
    "pool2d_nhwc",
    "softmax",
    "layer_norm",
    "elementwise",
    "reduce",
    "transpose",
    "layout_transform",
    "pad",
    NULL,
};
_Static_assert(sizeof op_names / sizeof op_names[0] == N_OPS + 1,
               "op_names must list every operator of op_table");

const char *const *ts_op_names(void) { return op_names; }

static const op_def *find_op(const char *name, size_t n) {
  for (int i = 0; i < N_OPS; i++)
    if (strlen(op_table[i].name) == n && memcmp(op_table[i].name, name, n) == 0)
      return &op_table[i];
  return NULL;
}

const char *ts_op_usage(const char *op) {
  if (!op) return NULL;
  const op_def *d = find_op(op, strlen(op));
  return d ? d->usage : NULL;
}

/* ---- argument access ---- */

static int key_index(const op_def *op, const char *key, size_t n) {
  for (int i = 0; i < op->n_keys; i++)
    if (strlen(op->keys[i].name) == n && memcmp(op->keys[i].name, key, n) == 0)
      return i;
  return -1;
}

static const op_value *arg(const op_args *x, const char *key) {
  int i = key_index(x->op, key, strlen(key));
  assert(i >= 0 && "operator has no such key");
  return &x->v[i];
}

int64_t arg_int(const op_args *x, const char *key) { return arg(x, key)->i; }

bool arg_is(const op_args *x, const char *key, const char *word) {
  const op_value *v = arg(x, key);
  return v->word && (size_t)v->word_len == strlen(word) &&
         memcmp(v->word, word, (size_t)v->word_len) == 0;
}

const op_value *arg_shape(const op_args *x, const char *key) {
  return arg(x, key);
}

/* ---- expression helpers ---- */

ts_expr *op_const(ts_arena *a, ts_dtype t, double v) {
  if (ts_dtype_is_float(t)) return ts_float(a, t, v);
  return ts_int(a, t, (int64_t)v);
}

ts_expr *op_lowest(ts_arena *a, ts_dtype t) {
  if (ts_dtype_is_float(t)) return ts_float(a, t, -INFINITY);
  if (t.code == TS_DT_UINT) return ts_int(a, t, 0);
  if (t.bits >= 64) return ts_int(a, t, INT64_MIN);
  return ts_int(a, t, -((int64_t)1 << (t.bits - 1)));
}

/* (Both give NULL for a NULL operand, as the constructors do.) */
ts_expr *op_if_then_else(ts_arena *a, ts_expr *cond, ts_expr *t, ts_expr *f) {
  ts_expr *args[3] = {cond, t, f};
  return ts_call(a, ts_expr_dtype(t), "if_then_else", args, 3);
}

ts_expr *op_math(ts_arena *a, const char *name, ts_expr *x) {
  return ts_call(a, ts_expr_dtype(x), name, &x, 1);
}

/* ---- parsing ---- */

/* Finds word w (length n) in a '|'-separated list; returns its index and
 * position, or -1. */
static int find_word(const char *list, const char *w, size_t n,
                     const char **pos, int *len) {
  int idx = 0;
  for (const char *p = list; *p; idx++) {
    const char *e = strchr(p, '|');
    size_t l = e ? (size_t)(e - p) : strlen(p);
    if (l == n && memcmp(p, w, n) == 0) {
      if (pos) *pos = p;
      if (len) *len = (int)l;
      return idx;
    }
    if (!e) break;
    p = e + 1;
  }
  return -1;
}

/* Replaces '|' by ", " for messages. */
static const char *list_text(const char *words, char *buf, size_t cap) {
  size_t j = 0;
  for (const char *p = words; *p && j + 3 < cap; p++) {
    if (*p == '|') {
      buf[j++] = ',';
      buf[j++] = ' ';
    } else {
      buf[j++] = *p;
    }
  }
  buf[j] = 0;
  return buf;
}

enum { INT_OK, INT_MALFORMED, INT_TOO_BIG };

/* [+-]digits; values beyond +-10^18 are INT_TOO_BIG. */
static int parse_int(const char *s, size_t n, int64_t *out) {
  size_t i = 0;
  bool neg = false;
  if (n > 0 && (s[0] == '-' || s[0] == '+')) {
    neg = s[0] == '-';
    i = 1;
  }
  if (i == n) return INT_MALFORMED;
  int64_t v = 0;
  bool big = false;
  for (; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return INT_MALFORMED;
    if (v > INT64_C(100000000000000000)) big = true;
    if (!big) v = v * 10 + (s[i] - '0');
  }
  if (big) return INT_TOO_BIG;
  *out = neg ? -v : v;
  return INT_OK;
}

static void put_valid_keys(strbuf *sb, const op_def *op) {
  for (int i = 0; i < op->n_keys; i++)
    sb_printf(sb, "%s%s", i ? " " : "", op->keys[i].name);
}

/* The range always, whichever end the value is beyond. */
static int bad_range(ts_error *err, const op_def *op, const op_key *k,
                     const char *val, int vlen, const char *what) {
  return TS_ERR(
      err, TS_EINVAL, "%s: %s=%.*s is out of range (%s must be in %lld..%lld)",
      op->name, k->name, vlen, val, what, (long long)k->lo, (long long)k->hi);
}

/* Parses one value of key k into v. */
static int parse_value(const op_def *op, const op_key *k, const char *val,
                       size_t n, op_value *v, ts_error *err) {
  int vlen = n > 64 ? 64 : (int)n; /* how much of the value messages show */
  const char *dots = n > 64 ? "..." : "";
  char buf[256];
  switch (k->type) {
  case KEY_INT: {
    int rc = parse_int(val, n, &v->i);
    if (rc == INT_MALFORMED)
      return TS_ERR(err, TS_EINVAL, "%s: %s='%.*s%s' is not an integer",
                    op->name, k->name, vlen, val, dots);
    if (rc == INT_TOO_BIG || v->i < k->lo || v->i > k->hi)
      return bad_range(err, op, k, val, vlen, "it");
    return TS_OK;
  }
  case KEY_SHAPE: {
    v->ndim = 0;
    const char *p = val, *end = val + n;
    while (true) {
      const char *x = memchr(p, 'x', (size_t)(end - p));
      const char *e = x ? x : end;
      if (v->ndim == TS_MAX_DIMS)
        return TS_ERR(err, TS_EINVAL,
                      "%s: %s=%.*s%s has more than %d dimensions", op->name,
                      k->name, vlen, val, dots, TS_MAX_DIMS);
      int64_t d = 0;
      int rc = parse_int(p, (size_t)(e - p), &d);
      if (rc == INT_MALFORMED)
        return TS_ERR(err, TS_EINVAL,
                      "%s: %s='%.*s%s' is not a shape like 4x8x16 (element "
                      "%d is not an integer)",
                      op->name, k->name, vlen, val, dots, v->ndim);
      if (rc == INT_TOO_BIG || d < k->lo || d > k->hi)
        return bad_range(err, op, k, val, vlen, "each element");
      v->dims[v->ndim++] = d;
      if (!x) break;
      p = x + 1;
    }
    return TS_OK;
  }
  case KEY_ENUM: {
    int idx = find_word(k->words, val, n, &v->word, &v->word_len);
    if (idx < 0)
      return TS_ERR(err, TS_EINVAL, "%s: %s='%.*s%s' is not one of: %s",
                    op->name, k->name, vlen, val, dots,
                    list_text(k->words, buf, sizeof buf));
    v->i = idx;
    return TS_OK;
  }
  case KEY_DTYPE:
  case KEY_OUT_DTYPE: {
    if (k->type == KEY_OUT_DTYPE && n == 4 && memcmp(val, "auto", 4) == 0) {
      v->word = "auto";
      v->word_len = 4;
      return TS_OK;
    }
    ts_dtype t;
    if (ts_dtype_parse(val, n, &t) != TS_OK)
      return TS_ERR(err, TS_EINVAL, "%s: %s='%.*s%s' is not a data type",
                    op->name, k->name, vlen, val, dots);
    if (find_word(k->words, val, n, NULL, NULL) < 0)
      return TS_ERR(err, TS_EINVAL,
                    "%s: %s=%.*s%s is not supported by %s (supported: %s)",
                    op->name, k->name, vlen, val, dots, op->name,
                    list_text(k->words, buf, sizeof buf));
    v->dtype = t;
    v->word = NULL;
    return TS_OK;
  }
  }
  return TS_ERR(err, TS_EINTERNAL, "%s: key '%s' has no type", op->name,
                k->name);
}

/* The out_dtype used when none is given. */
static ts_dtype default_out_dtype(ts_dtype in) {
  if (in.code == TS_DT_BFLOAT || (in.code == TS_DT_FLOAT && in.bits == 16))
    return TS_FLOAT32;
  if (ts_dtype_is_int(in) && in.bits == 8) return TS_INT32;
  return in;
}

typedef struct token {
  const char *s;
  size_t n;
} token;

static bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
         c == '\v';
}

/* The next whitespace-separated token at *p; false at the end. */
static bool next_token(const char **p, token *t) {
  const char *s = *p;
  while (*s && is_space(*s)) s++;
  if (!*s) return false;
  const char *e = s;
  while (*e && !is_space(*e)) e++;
  t->s = s;
  t->n = (size_t)(e - s);
  *p = e;
  return true;
}

/* Parses and validates every key of a spec into x. */
static int parse_spec(const char *spec, op_args *x, ts_error *err) {
  const char *p = spec;
  token t;
  if (!next_token(&p, &t)) {
    strbuf sb;
    sb_init(&sb);
    for (int i = 0; i < N_OPS; i++)
      sb_printf(&sb, "%s%s", i ? " " : "", op_table[i].name);
    int rc =
        TS_ERR(err, TS_EINVAL,
               "empty workload spec; expected an operator name (%s)", sb.data);
    sb_free(&sb);
    return rc;
  }
  const op_def *op = find_op(t.s, t.n);
  if (!op) {
    strbuf sb;
    sb_init(&sb);
    for (int i = 0; i < N_OPS; i++)
      sb_printf(&sb, "%s%s", i ? " " : "", op_table[i].name);
    int rc =
        TS_ERR(err, TS_EINVAL, "unknown operator '%.*s%s'; known operators: %s",
               t.n > 64 ? 64 : (int)t.n, t.s, t.n > 64 ? "..." : "", sb.data);
    sb_free(&sb);
    return rc;
  }
  memset(x, 0, sizeof *x);
  x->op = op;
  assert(op->n_keys <= OP_MAX_KEYS);
  bool given[OP_MAX_KEYS] = {false};
  while (next_token(&p, &t)) {
    int tl = t.n > 64 ? 64 : (int)t.n;
    const char *eq = memchr(t.s, '=', t.n);
    if (!eq)
      return TS_ERR(err, TS_EINVAL, "%s: '%.*s%s' is not key=value (usage: %s)",
                    op->name, tl, t.s, t.n > 64 ? "..." : "", op->usage);
    size_t kn = (size_t)(eq - t.s);
    int ki = key_index(op, t.s, kn);
    if (ki < 0) {
      strbuf sb;
      sb_init(&sb);
      put_valid_keys(&sb, op);
      int rc = TS_ERR(
          err, TS_EINVAL, "%s: unknown key '%.*s%s'; valid keys: %s", op->name,
          kn > 64 ? 64 : (int)kn, t.s, kn > 64 ? "..." : "", sb.data);
      sb_free(&sb);
      return rc;
    }
    const op_key *k = &op->keys[ki];
    if (given[ki])
      return TS_ERR(err, TS_EINVAL, "%s: key '%s' is given more than once",
                    op->name, k->name);
    given[ki] = true;
    int rc = parse_value(op, k, eq + 1, t.n - kn - 1, &x->v[ki], err);
    if (rc != TS_OK) return rc;
  }
  /* defaults and required keys */
  for (int i = 0; i < op->n_keys; i++) {
    const op_key *k = &op->keys[i];
    if (given[i]) continue;
    if (k->required)
      return TS_ERR(err, TS_EINVAL, "%s: missing required key '%s' (usage: %s)",
                    op->name, k->name, op->usage);
    op_value *v = &x->v[i];
    switch (k->type) {
    case KEY_INT: v->i = k->def; break;
    case KEY_ENUM:
      v->i = 0;
      find_word(k->words, k->words, strcspn(k->words, "|"), &v->word,
                &v->word_len);
      break;
    case KEY_DTYPE: v->dtype = TS_FLOAT32; break;
    case KEY_OUT_DTYPE:
      v->word = "auto";
      v->word_len = 4;
      break;
    case KEY_SHAPE: break;
    }
  }
  /* dtype and out_dtype */
  int di = key_index(op, "dtype", 5), oi = key_index(op, "out_dtype", 9);
  x->dtype = di >= 0 ? x->v[di].dtype : TS_FLOAT32;
  x->out_dtype = x->dtype;
  if (oi >= 0) {
    op_value *ov = &x->v[oi];
    if (ov->word) {
      ov->dtype = default_out_dtype(x->dtype);
      ov->word = NULL;
      ov->word_len = 0;
    } else if (ts_dtype_is_float(ov->dtype) != ts_dtype_is_float(x->dtype)) {
      char a[32], b[32];
      return TS_ERR(err, TS_EINVAL,
                    "%s: out_dtype=%s does not fit dtype=%s (float inputs need "
                    "a float out_dtype, integer inputs an integer one)",
                    op->name, ts_dtype_str(ov->dtype, a),
                    ts_dtype_str(x->dtype, b));
    }
    x->out_dtype = ov->dtype;
  }
  if (op->check) return op->check(x, err);
  return TS_OK;
}

/* ---- canonical spec and name ---- */

static void put_value(strbuf *sb, const op_key *k, const op_value *v) {
  char buf[32];
  switch (k->type) {
  case KEY_INT: sb_printf(sb, "%lld", (long long)v->i); break;
  case KEY_SHAPE:
    for (int d = 0; d < v->ndim; d++)
      sb_printf(sb, "%s%lld", d ? "x" : "", (long long)v->dims[d]);
    break;
  case KEY_ENUM: sb_putn(sb, v->word, (size_t)v->word_len); break;
  case KEY_DTYPE:
  case KEY_OUT_DTYPE: sb_puts(sb, ts_dtype_str(v->dtype, buf)); break;
  }
}

static char *canonical_spec(const op_args *x) {
  strbuf sb;
  sb_init(&sb);
  sb_puts(&sb, x->op->name);
  for (int i = 0; i < x->op->n_keys; i++) {
    const op_key *k = &x->op->keys[i];
    if (k->quiet && k->type == KEY_INT && x->v[i].i == k->def) continue;
    sb_printf(&sb, " %s=", k->name);
    put_value(&sb, k, &x->v[i]);
  }
  return sb_take(&sb);
}

/* op_REQUIRED_dtype[_nondefault...]: consecutive required integers joined
 * by 'x', other required values and non-default options by '_'. */
static char *short_name(const op_args *x) {
  strbuf sb;
  sb_init(&sb);
  sb_puts(&sb, x->op->name);
  bool prev_int = false;
  for (int i = 0; i < x->op->n_keys; i++) {
    const op_key *k = &x->op->keys[i];
    if (!k->required) continue;
    bool is_int = k->type == KEY_INT;
    sb_putc(&sb, is_int && prev_int ? 'x' : '_');
    put_value(&sb, k, &x->v[i]);
    prev_int = is_int;
  }
  char buf[32];
  sb_printf(&sb, "_%s", ts_dtype_str(x->dtype, buf));
  for (int i = 0; i < x->op->n_keys; i++) {
    const op_key *k = &x->op->keys[i];
    const op_value *v = &x->v[i];
    if (k->required) continue;
    if (k->type == KEY_INT && v->i != k->def)
      sb_printf(&sb, "_%s%lld", k->name, (long long)v->i);
    else if (k->type == KEY_ENUM && v->i != 0)
      sb_printf(&sb, "_%s%.*s", k->name, v->word_len, v->word);
    else if (k->type == KEY_OUT_DTYPE &&
             !ts_dtype_eq(v->dtype, default_out_dtype(x->dtype)))
      sb_printf(&sb, "_out%s", ts_dtype_str(v->dtype, buf));
  }
  return sb_take(&sb);
}

/* Every tensor of f must have at most OP_MAX_ELEMS elements. */
static int check_sizes(const op_def *op, const ts_func *f, ts_error *err) {
  const ts_block *root = f->body->u.realize.block;
  int n = f->n_params + root->n_allocs;
  for (int i = 0; i < n; i++) {
    const ts_buffer *b =
        i < f->n_params ? f->params[i] : root->allocs[i - f->n_params];
    int64_t elems = 1;
    bool overflow = false;
    for (int d = 0; d < b->ndim; d++)
      if (__builtin_mul_overflow(elems, b->shape[d], &elems)) overflow = true;
    if (overflow || elems > OP_MAX_ELEMS) {
      strbuf sb;
      sb_init(&sb);
      for (int d = 0; d < b->ndim; d++)
        sb_printf(&sb, "%s%lld", d ? "x" : "", (long long)b->shape[d]);
      int rc = TS_ERR(err, TS_EINVAL,
                      "%s: tensor '%s' of shape %s has more than 2^31 "
                      "elements; use smaller sizes",
                      op->name, b->name, sb.data);
      sb_free(&sb);
      return rc;
    }
  }
  return TS_OK;
}

/* ---- const=: the parameters known ahead of every call ---- */

/* Cuts the `const=...` word out of spec: *rest is a new copy of the rest
 * (ts_free), names its value (empty when there is none). */
static int cut_const(const char *spec, char **rest, char *names,
                     size_t names_cap, ts_error *err) {
  names[0] = 0;
  size_t len = strlen(spec);
  const char *hit = NULL;
  for (const char *q = spec; (q = strstr(q, "const=")); q++)
    if (q == spec || q[-1] == ' ' || q[-1] == '\t') {
      if (hit)
        return TS_ERR(err, TS_EINVAL, "workload spec: const= given twice");
      hit = q;
    }
  size_t n = 0;
  if (hit) {
    n = strcspn(hit + 6, " \t");
    if (n == 0 || n >= names_cap)
      return TS_ERR(err, TS_EINVAL,
                    "workload spec: const= takes parameter names joined by "
                    "'+' (const=W, const=B+bias)");
    memcpy(names, hit + 6, n);
    names[n] = 0;
  }
  char *r = ts_malloc(len + 1);
  if (!r) return TS_ERR(err, TS_ENOMEM, "workload spec: out of memory");
  if (!hit) {
    memcpy(r, spec, len + 1);
  } else {
    size_t head = (size_t)(hit - spec);
    memcpy(r, spec, head);
    memcpy(r + head, hit + 6 + n, len - head - 6 - n + 1);
  }
  *rest = r;
  return TS_OK;
}

/* The mask of the parameters `names` lists ('+'-joined), checked: each
 * an input parameter of f, none twice. */
static int const_mask(const char *op, const ts_func *f, const char *names,
                      uint64_t *mask, ts_error *err) {
  *mask = 0;
  const char *q = names;
  while (*q) {
    size_t n = strcspn(q, "+");
    int found = -1;
    for (int i = 0; i < f->n_params && found < 0; i++)
      if (strlen(f->params[i]->name) == n && !strncmp(f->params[i]->name, q, n))
        found = i;
    if (found < 0 || found >= 64 || ts_func_param_is_output(f, found) ||
        (*mask >> found & 1)) {
      strbuf sb;
      sb_init(&sb);
      for (int i = 0; i < f->n_params; i++)
        if (!ts_func_param_is_output(f, i))
          sb_printf(&sb, "%s%s", sb.len ? ", " : "", f->params[i]->name);
      int rc = TS_ERR(err, TS_EINVAL,
                      "%s: const=%s: '%.*s' is %s; its inputs are %s", op,
                      names, (int)n, q,
                      found < 0              ? "not a parameter"
                      : (*mask >> found & 1) ? "named twice"
                                             : "an output",
                      sb.data ? sb.data : "none");
      sb_free(&sb);
      return rc;
    }
    *mask |= (uint64_t)1 << found;
    q += n;
    if (*q == '+') q++;
  }
  return TS_OK;
}

int ts_workload_from_spec(const char *spec, ts_workload **out, ts_error *err) {
  ts_error local;
  if (!err) err = &local;
  ts_error_clear(err);
  if (out) *out = NULL;
  if (!spec || !out)
    return TS_ERR(err, TS_EINVAL, "workload spec: NULL argument");
  unsigned long oom = ts_alloc_failures();
  char *rest = NULL, consts[256];
  int rc = cut_const(spec, &rest, consts, sizeof consts, err);
  if (rc != TS_OK) return rc;
  op_args x;
  rc = parse_spec(rest, &x, err);
  if (rc != TS_OK) {
    free(rest);
    return ts_alloc_check(oom, rc, err, "workload spec");
  }
  char *canon = canonical_spec(&x);
  char *name = short_name(&x);
  ts_workload *w = NULL;
  ts_func *f = NULL;
  if (!canon || !name) {
    rc = TS_ERR(err, TS_ENOMEM, "%s: out of memory", x.op->name);
    goto done;
  }
  if (strlen(canon) >= sizeof w->spec) {
    rc = TS_ERR(err, TS_EINVAL,
                "%s: the canonical spec is longer than %zu "
                "characters",
                x.op->name, sizeof w->spec - 1);
    goto done;
  }
  f = x.op->build(&x, err);
  if (!f) {
    rc = ts_alloc_check(oom, err->code ? err->code : TS_EINTERNAL, err,
                        x.op->name);
    goto done;
  }
  rc = ts_alloc_check(oom, check_sizes(x.op, f, err), err, x.op->name);
  if (rc != TS_OK) goto done;
  uint64_t mask = 0;
  if (consts[0]) {
    if ((rc = const_mask(x.op->name, f, consts, &mask, err))) goto done;
    ts_func_set_attr(f, ts_ann_int(TS_ATTR_CONST_PARAMS, (int64_t)mask));
    /* in parameter order, whatever order they were given in */
    strbuf c, nm;
    sb_init(&c);
    sb_init(&nm);
    sb_puts(&c, canon);
    sb_puts(&nm, name);
    bool first = true;
    for (int i = 0; i < f->n_params; i++)
      if (mask >> i & 1) {
        sb_printf(&c, "%s%s", first ? " const=" : "+", f->params[i]->name);
        sb_printf(&nm, "%s%s", first ? "_const" : "_", f->params[i]->name);
        first = false;
      }
    free(canon);
    free(name);
    canon = sb_take(&c);
    name = sb_take(&nm);
    if (!canon || !name) {
      rc = TS_ERR(err, TS_ENOMEM, "%s: out of memory", x.op->name);
      goto done;
    }
    if (strlen(canon) >= sizeof w->spec) {
      rc = TS_ERR(err, TS_EINVAL,
                  "%s: the canonical spec is longer than %zu characters",
                  x.op->name, sizeof w->spec - 1);
      goto done;
    }
  }
  w = ts_calloc(1, sizeof *w);
  if (!w) {
    rc = TS_ERR(err, TS_ENOMEM, "%s: out of memory", x.op->name);
    goto done;
  }
  w->func = f;
  f = NULL;
  snprintf(w->op, sizeof w->op, "%s", x.op->name);
  snprintf(w->spec, sizeof w->spec, "%s", canon);
  snprintf(w->name, sizeof w->name, "%s", name);
  w->flops = x.op->flops(&x);
  *out = w;
  rc = TS_OK;
done:
  ts_func_free(f);
  free(canon);
  free(name);
  free(rest);
  return rc;
}

int64_t ts_workload_bytes(const ts_workload *w) {
  const ts_func *f = w->func;
  int n = f->n_params;
  const ts_block *root = NULL;
  if (f->body && f->body->kind == TS_STMT_BLOCK_REALIZE) {
    root = f->body->u.realize.block;
    n += root->n_allocs;
  }
  int64_t total = 0;
  for (int i = 0; i < n; i++) {
    const ts_buffer *b =
        i < f->n_params ? f->params[i] : root->allocs[i - f->n_params];
    int64_t bytes = (b->dtype.bits * (int64_t)b->dtype.lanes + 7) / 8;
    for (int d = 0; d < b->ndim; d++)
      if (__builtin_mul_overflow(bytes, b->shape[d], &bytes)) return INT64_MAX;
    if (__builtin_add_overflow(total, bytes, &total)) return INT64_MAX;
  }
  return total;
}

/* "25.8 GB" (decimal units, as people read sizes). */
static void human_bytes(double v, char *out, size_t size) {
  const char *unit[] = {"bytes", "kB", "MB", "GB", "TB", "PB", "EB"};
  int u = 0;
  while (v >= 1000 && u < 6) {
    v /= 1000;
    u++;
  }
  snprintf(out, size, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
}

int ts_workload_admit(const ts_workload *w, const ts_workload_limits *lim,
                      ts_error *err) {
  int64_t bytes = ts_workload_bytes(w);
  if (lim->max_bytes > 0 && bytes > lim->max_bytes) {
    char need[32], limit[32];
    human_bytes((double)bytes, need, sizeof need);
    human_bytes((double)lim->max_bytes, limit, sizeof limit);
    return TS_ERR(err, TS_ERANGE,
                  "%s: its buffers need %s, over the limit of %s%s%s%s",
                  w->spec, need, limit, lim->why ? lim->why : "",
                  lim->bytes_flag ? "; raise it with " : "",
                  lim->bytes_flag ? lim->bytes_flag : "");
  }
  if (lim->max_flops > 0 && w->flops > lim->max_flops)
    return TS_ERR(err, TS_ERANGE,
                  "%s: %.0f GFLOP per run (about %.0f s at %.0f GFLOP/s), "
                  "over the limit of %.0f GFLOP%s%s",
                  w->spec, w->flops / 1e9, w->flops / TS_NOMINAL_FLOPS,
                  TS_NOMINAL_FLOPS / 1e9, lim->max_flops / 1e9,
                  lim->flops_flag ? "; raise it with " : "",
                  lim->flops_flag ? lim->flops_flag : "");
  return TS_OK;
}

void ts_workload_free(ts_workload *w) {
  if (!w) return;
  ts_func_free(w->func);
  free(w);
}
