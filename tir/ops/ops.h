/*
 * ops.h — private interface between the files of the operator library:
 * the parsed arguments of a workload spec (ops/spec.c parses and validates
 * them against the operator table) and the per-family check, build and FLOP
 * functions (ops/linalg.c, ops/conv.c, ops/nn.c, ops/tensor.c), plus small
 * expression helpers they share. Nothing outside tir/ops includes it.
 */
#ifndef TESSERA_TIR_OPS_H
#define TESSERA_TIR_OPS_H

#include "tir/internal.h"

/* The largest value of a size key; tensors are further limited to
 * OP_MAX_ELEMS elements each. */
#define OP_DIM_MAX INT64_C(2147483647)
#define OP_MAX_ELEMS (INT64_C(1) << 31)
#define OP_MAX_KEYS 16

typedef enum op_key_type {
  KEY_INT,       /* a decimal integer in [lo, hi] */
  KEY_SHAPE,     /* AxBx...: 1..TS_MAX_DIMS integers, each in [lo, hi] */
  KEY_ENUM,      /* one of the words of `words` ("max|avg"); first = default */
  KEY_DTYPE,     /* one of the dtypes of `words`; default float32 */
  KEY_OUT_DTYPE, /* one of `words`, or "auto" (the default): see spec.c */
} op_key_type;

/* One key of an operator's table. */
typedef struct op_key {
  const char *name;
  op_key_type type;
  bool required;
  int64_t lo, hi;    /* KEY_INT and KEY_SHAPE elements */
  int64_t def;       /* KEY_INT default */
  const char *words; /* KEY_ENUM / KEY_DTYPE / KEY_OUT_DTYPE choices */
  bool quiet;        /* left out of the canonical spec at its default (a
                        key added later: specs written before it keep their
                        text) */
} op_key;

/* The value of one key after parsing (defaults filled in). */
typedef struct op_value {
  int64_t i;        /* KEY_INT value; KEY_ENUM word index */
  const char *word; /* KEY_ENUM word (points into the table), else NULL */
  int word_len;
  ts_dtype dtype; /* KEY_DTYPE, KEY_OUT_DTYPE */
  int ndim;       /* KEY_SHAPE */
  int64_t dims[TS_MAX_DIMS];
} op_value;

typedef struct op_def op_def;

/* A parsed spec: the operator and one value per key of its table. */
typedef struct op_args {
  const op_def *op;
  op_value v[OP_MAX_KEYS];
  ts_dtype dtype;     /* the `dtype` key */
  ts_dtype out_dtype; /* the `out_dtype` key resolved (= dtype if absent) */
} op_args;

/* One operator: its keys and its family's functions. */
struct op_def {
  const char *name;
  const char *usage; /* generated from the key list at compile time */
  const op_key *keys;
  int n_keys;
  /* Cross-key validation after every key parsed and range-checked:
   * TS_OK or TS_EINVAL with a message naming the operator and key. */
  int (*check)(const op_args *x, ts_error *err);
  /* Builds the function (owned by the caller) or returns NULL with err. */
  ts_func *(*build)(const op_args *x, ts_error *err);
  /* The conventional FLOP count (table in spec.c). */
  double (*flops)(const op_args *x);
};

/* ---- argument access (spec.c); the key must exist in the op's table ---- */
int64_t arg_int(const op_args *x, const char *key);
/* True when the enum key's value is `word`. */
bool arg_is(const op_args *x, const char *key, const char *word);
const op_value *arg_shape(const op_args *x, const char *key);

/* ---- expression helpers (spec.c) ---- */
/* A constant of dtype t (float or integer). */
ts_expr *op_const(ts_arena *a, ts_dtype t, double v);
/* The lowest value of t (-inf for floats, the minimum for integers). */
ts_expr *op_lowest(ts_arena *a, ts_dtype t);
/* if_then_else(cond, then_value, else_value) with the type of then_value. */
ts_expr *op_if_then_else(ts_arena *a, ts_expr *cond, ts_expr *t, ts_expr *f);
/* A call of a one-argument math intrinsic with the argument's type. */
ts_expr *op_math(ts_arena *a, const char *name, ts_expr *x);

/* ---- shared stage (tensor.c) ---- */
/* A stage `name` of shape src + before + after holding
 * if_then_else(inside, src[idx - before], pad_value), the condition covering
 * only padded dims (a plain copy when nothing is padded). axis_names may be
 * NULL. Returns the stage's buffer. */
ts_buffer *op_pad_stage(ts_te *te, const char *name, ts_buffer *src,
                        const int64_t *before, const int64_t *after,
                        ts_expr *pad_value, const char *const *axis_names);

/* ---- families: check / build / flops per operator ---- */
ts_func *op_build_matmul(const op_args *x, ts_error *err);
double op_flops_matmul(const op_args *x);
ts_func *op_build_batch_matmul(const op_args *x, ts_error *err);
double op_flops_batch_matmul(const op_args *x);
ts_func *op_build_dense(const op_args *x, ts_error *err);
double op_flops_dense(const op_args *x);

int op_check_conv2d(const op_args *x, ts_error *err);
ts_func *op_build_conv2d_nchw(const op_args *x, ts_error *err);
ts_func *op_build_conv2d_nhwc(const op_args *x, ts_error *err);
double op_flops_conv2d(const op_args *x);
int op_check_depthwise(const op_args *x, ts_error *err);
ts_func *op_build_depthwise(const op_args *x, ts_error *err);
double op_flops_depthwise(const op_args *x);
int op_check_conv2d_transpose(const op_args *x, ts_error *err);
ts_func *op_build_conv2d_transpose(const op_args *x, ts_error *err);
double op_flops_conv2d_transpose(const op_args *x);
int op_check_pool2d(const op_args *x, ts_error *err);
ts_func *op_build_pool2d(const op_args *x, ts_error *err);
double op_flops_pool2d(const op_args *x);

ts_func *op_build_softmax(const op_args *x, ts_error *err);
double op_flops_softmax(const op_args *x);
ts_func *op_build_layer_norm(const op_args *x, ts_error *err);
double op_flops_layer_norm(const op_args *x);
int op_check_elementwise(const op_args *x, ts_error *err);
ts_func *op_build_elementwise(const op_args *x, ts_error *err);
double op_flops_elementwise(const op_args *x);
ts_func *op_build_reduce(const op_args *x, ts_error *err);
double op_flops_reduce(const op_args *x);

int op_check_transpose(const op_args *x, ts_error *err);
ts_func *op_build_transpose(const op_args *x, ts_error *err);
int op_check_layout_transform(const op_args *x, ts_error *err);
ts_func *op_build_layout_transform(const op_args *x, ts_error *err);
int op_check_pad(const op_args *x, ts_error *err);
ts_func *op_build_pad(const op_args *x, ts_error *err);
double op_flops_zero(const op_args *x);

#endif /* TESSERA_TIR_OPS_H */
