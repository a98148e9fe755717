/*
 * ew_ops.c — the elementwise operators past the core arithmetic, one table
 * row each: how many inputs, which dtypes they take and give, the
 * reference value (in double, what folding and the reference executor
 * compute) and the TIR expression fusion builds (in the compute dtype ct,
 * float32 or float64). Activations (LeakyRelu, PRelu, HardSigmoid,
 * HardSwish, Elu, Selu, Celu, Softplus, Softsign, Mish, ThresholdedRelu),
 * math (Log, Reciprocal, Floor, Ceil, Round, Sign, Sin, Cos), the variadic
 * Min, Max, Sum and Mean, comparisons (Equal, Less, Greater, LessOrEqual,
 * GreaterOrEqual: bool results), logic (And, Or, Xor, Not: bool operands
 * and result), Where (a bool condition selecting between two operands),
 * Mod (both forms), IsNaN and IsInf, Tan, Atan, Asin, Acos (a polynomial
 * after Cephes' reduction), the hyperbolic functions and their inverses
 * (from exp, log and sqrt), Shrink.
 * Every one broadcasts its operands as Add does, so shape inference, the
 * layout pass, fusion and the executor treat them as they treat Add.
 */
#include "internal.h"

#include <math.h>
#include <string.h>

#define SELU_ALPHA 1.67326319217681884765625
#define SELU_GAMMA 1.05070102214813232421875

enum { EW_SAME, EW_BOOL_OUT, EW_LOGIC, EW_WHERE };

typedef double (*ew_ref_fn)(const gr_node *n, const double *x, int k);
typedef ts_expr *(*ew_tir_fn)(ts_arena *a, const gr_node *n, ts_expr **x, int k,
                              ts_dtype ct);

struct gr_ew_op {
  const char *name;
  int min_in, max_in;
  int kind; /* EW_*: the dtypes of operands and result */
  bool float_only;
  ew_ref_fn ref;
  ew_tir_fn tir;
};

static double attr(const gr_node *n, const char *name, double dflt) {
  return gr_attr_float(n, name, dflt);
}

/* ---- reference values ---- */

/* A reference function whose value depends on the operands only. */
#define R_EXPR(fn, expr)                                                       \
  static double fn(const gr_node *n, const double *x, int k) {                 \
    (void)n, (void)k;                                                          \
    return expr;                                                               \
  }

static double softplus_d(double x) {
  return (x > 0 ? x : 0) + log1p(exp(-fabs(x)));
}

static double r_leaky(const gr_node *n, const double *x, int k) {
  (void)k;
  return x[0] < 0 ? attr(n, "alpha", 0.01) * x[0] : x[0];
}
R_EXPR(r_prelu, x[0] < 0 ? x[1] * x[0] : x[0])
static double hard_sigmoid_d(double x, double alpha, double beta) {
  double v = alpha * x + beta;
  return v < 0 ? 0 : v > 1 ? 1 : v;
}
static double r_hsig(const gr_node *n, const double *x, int k) {
  (void)k;
  return hard_sigmoid_d(x[0], attr(n, "alpha", 0.2), attr(n, "beta", 0.5));
}
R_EXPR(r_hswish, x[0] * hard_sigmoid_d(x[0], 1.0 / 6.0, 0.5))
static double r_elu(const gr_node *n, const double *x, int k) {
  (void)k;
  return x[0] < 0 ? attr(n, "alpha", 1.0) * expm1(x[0]) : x[0];
}
static double r_selu(const gr_node *n, const double *x, int k) {
  (void)k;
  double al = attr(n, "alpha", SELU_ALPHA), ga = attr(n, "gamma", SELU_GAMMA);
  return x[0] > 0 ? ga * x[0] : ga * al * expm1(x[0]);
}
static double r_celu(const gr_node *n, const double *x, int k) {
  (void)k;
  double al = attr(n, "alpha", 1.0);
  return (x[0] > 0 ? x[0] : 0) + fmin(0, al * expm1(x[0] / al));
}
R_EXPR(r_softplus, softplus_d(x[0]))
R_EXPR(r_softsign, x[0] / (1 + fabs(x[0])))
R_EXPR(r_mish, x[0] * tanh(softplus_d(x[0])))
static double r_thresh(const gr_node *n, const double *x, int k) {
  (void)k;
  return x[0] > attr(n, "alpha", 1.0) ? x[0] : 0;
}
R_EXPR(r_log, log(x[0]))
R_EXPR(r_recip, 1.0 / x[0])
R_EXPR(r_floor, floor(x[0]))
R_EXPR(r_ceil, ceil(x[0]))
static double r_round(const gr_node *n, const double *x, int k) {
  (void)n, (void)k;
  return nearbyint(x[0]); /* halves to even, as ONNX rounds */
}
R_EXPR(r_sign, x[0] > 0 ? 1 : x[0] < 0 ? -1 : 0)
R_EXPR(r_sin, sin(x[0]))
R_EXPR(r_cos, cos(x[0]))
static double r_min(const gr_node *n, const double *x, int k) {
  (void)n;
  double m = x[0];
  for (int i = 1; i < k; i++) m = x[i] < m ? x[i] : m;
  return m;
}
static double r_max(const gr_node *n, const double *x, int k) {
  (void)n;
  double m = x[0];
  for (int i = 1; i < k; i++) m = x[i] > m ? x[i] : m;
  return m;
}
static double r_sum(const gr_node *n, const double *x, int k) {
  (void)n;
  double s = 0;
  for (int i = 0; i < k; i++) s += x[i];
  return s;
}
static double r_mean(const gr_node *n, const double *x, int k) {
  return r_sum(n, x, k) / k;
}
R_EXPR(r_eq, x[0] == x[1])
R_EXPR(r_lt, x[0] < x[1])
R_EXPR(r_gt, x[0] > x[1])
R_EXPR(r_le, x[0] <= x[1])
R_EXPR(r_ge, x[0] >= x[1])
R_EXPR(r_and, x[0] != 0 && x[1] != 0)
R_EXPR(r_or, x[0] != 0 || x[1] != 0)
R_EXPR(r_xor, (x[0] != 0) != (x[1] != 0))
R_EXPR(r_not, x[0] == 0)
static double r_mod(const gr_node *n, const double *x, int k) {
  (void)k;
  if (gr_attr_int(n, "fmod", 0)) return fmod(x[0], x[1]);
  if (x[1] == 0) return 0;
  double r = fmod(x[0], x[1]);
  return r != 0 && (r < 0) != (x[1] < 0) ? r + x[1] : r;
}
R_EXPR(r_isnan, isnan(x[0]))
static double r_isinf(const gr_node *n, const double *x, int k) {
  (void)k;
  return (x[0] == INFINITY && gr_attr_int(n, "detect_positive", 1)) ||
         (x[0] == -INFINITY && gr_attr_int(n, "detect_negative", 1));
}
R_EXPR(r_tan, tan(x[0]))
R_EXPR(r_atan, atan(x[0]))
R_EXPR(r_asin, asin(x[0]))
R_EXPR(r_acos, acos(x[0]))
R_EXPR(r_sinh, sinh(x[0]))
R_EXPR(r_cosh, cosh(x[0]))
R_EXPR(r_asinh, asinh(x[0]))
R_EXPR(r_acosh, acosh(x[0]))
R_EXPR(r_atanh, atanh(x[0]))
static double r_shrink(const gr_node *n, const double *x, int k) {
  (void)k;
  double l = attr(n, "lambd", 0.5), b = attr(n, "bias", 0);
  return x[0] < -l ? x[0] + b : x[0] > l ? x[0] - b : 0;
}
R_EXPR(r_where, x[0] != 0 ? x[1] : x[2])

/* ---- TIR forms ---- */

static ts_expr *num(ts_arena *a, ts_dtype ct, double v) {
  return ts_float(a, ct, v);
}
static ts_expr *call1(ts_arena *a, ts_dtype ct, const char *f, ts_expr *x) {
  return ts_call(a, ct, f, &x, 1);
}
static ts_expr *flag(ts_arena *a, ts_dtype ct, ts_expr *cond) {
  return ts_select(a, cond, num(a, ct, 1), num(a, ct, 0));
}
static ts_expr *truth(ts_arena *a, ts_dtype ct, ts_expr *x) {
  return ts_ne(a, x, num(a, ct, 0));
}
static ts_expr *neg_part(ts_arena *a, ts_dtype ct, ts_expr *x, ts_expr *f) {
  return ts_select(a, ts_lt(a, x, num(a, ct, 0)), f, x);
}
/* exp(x) - 1 (the reference uses expm1; the difference is within float32
 * rounding of the result's magnitude) */
static ts_expr *expm1_t(ts_arena *a, ts_dtype ct, ts_expr *x) {
  return ts_sub(a, call1(a, ct, "exp", x), num(a, ct, 1));
}
static ts_expr *clamp01(ts_arena *a, ts_dtype ct, ts_expr *v) {
  return ts_min(a, ts_max(a, v, num(a, ct, 0)), num(a, ct, 1));
}
static ts_expr *softplus_t(ts_arena *a, ts_dtype ct, ts_expr *x) {
  ts_expr *ax = call1(a, ct, "abs", x);
  ts_expr *e = call1(a, ct, "exp", ts_sub(a, num(a, ct, 0), ax));
  return ts_add(a, ts_max(a, x, num(a, ct, 0)),
                call1(a, ct, "log", ts_add(a, num(a, ct, 1), e)));
}

static ts_expr *t_leaky(ts_arena *a, const gr_node *n, ts_expr **x, int k,
                        ts_dtype ct) {
  (void)k;
  return neg_part(a, ct, x[0],
                  ts_mul(a, x[0], num(a, ct, attr(n, "alpha", 0.01))));
}
static ts_expr *t_prelu(ts_arena *a, const gr_node *n, ts_expr **x, int k,
                        ts_dtype ct) {
  (void)n, (void)k;
  return neg_part(a, ct, x[0], ts_mul(a, x[0], x[1]));
}
static ts_expr *t_hsig(ts_arena *a, const gr_node *n, ts_expr **x, int k,
                       ts_dtype ct) {
  (void)k;
  ts_expr *v = ts_add(a, ts_mul(a, x[0], num(a, ct, attr(n, "alpha", 0.2))),
                      num(a, ct, attr(n, "beta", 0.5)));
  return clamp01(a, ct, v);
}
static ts_expr *t_hswish(ts_arena *a, const gr_node *n, ts_expr **x, int k,
                         ts_dtype ct) {
  (void)n, (void)k;
  ts_expr *v =
      ts_add(a, ts_mul(a, x[0], num(a, ct, 1.0 / 6.0)), num(a, ct, 0.5));
  return ts_mul(a, x[0], clamp01(a, ct, v));
}
static ts_expr *t_elu(ts_arena *a, const gr_node *n, ts_expr **x, int k,
                      ts_dtype ct) {
  (void)k;
  return neg_part(
      a, ct, x[0],
      ts_mul(a, num(a, ct, attr(n, "alpha", 1.0)), expm1_t(a, ct, x[0])));
}
static ts_expr *t_selu(ts_arena *a, const gr_node *n, ts_expr **x, int k,
                       ts_dtype ct) {
  (void)k;
  double al = attr(n, "alpha", SELU_ALPHA), ga = attr(n, "gamma", SELU_GAMMA);
  ts_expr *neg = ts_mul(a, num(a, ct, ga * al), expm1_t(a, ct, x[0]));
  return ts_select(a, ts_gt(a, x[0], num(a, ct, 0)),
                   ts_mul(a, x[0], num(a, ct, ga)), neg);
}
static ts_expr *t_celu(ts_arena *a, const gr_node *n, ts_expr **x, int k,
                       ts_dtype ct) {
  (void)k;
  double al = attr(n, "alpha", 1.0);
  ts_expr *e = expm1_t(a, ct, ts_mul(a, x[0], num(a, ct, 1.0 / al)));
  return ts_add(a, ts_max(a, x[0], num(a, ct, 0)),
                ts_min(a, num(a, ct, 0), ts_mul(a, e, num(a, ct, al))));
}
static ts_expr *t_softplus(ts_arena *a, const gr_node *n, ts_expr **x, int k,
                           ts_dtype ct) {
  (void)n, (void)k;
  return softplus_t(a, ct, x[0]);
}
static ts_expr *t_softsign(ts_arena *a, const gr_node *n, ts_expr **x, int k,
                           ts_dtype ct) {
  (void)n, (void)k;
  return ts_div(a, x[0], ts_add(a, num(a, ct, 1), call1(a, ct, "abs", x[0])));
}
/* x tanh(softplus(x)) with one exp: for s = 1 + e^x, tanh(log s) =
 * (s^2 - 1) / (s^2 + 1) = q / (q + 2), q = e^x (e^x + 2). x is clamped at
 * 20 first (tanh(softplus(20)) is 1 in float32; e^x would overflow q).
 * One exp where the plain form has exp, log, exp and a division (Mish of
 * [1, 64, 160, 160], 2 threads: 1.08 -> 0.78 ms), and no cancellation in
 * 1 + e^x for negative x. */
static ts_expr *t_mish(ts_arena *a, const gr_node *n, ts_expr **x, int k,
                       ts_dtype ct) {
  (void)n, (void)k;
  ts_expr *e = call1(a, ct, "exp", ts_min(a, x[0], num(a, ct, 20)));
  ts_expr *q = ts_mul(a, e, ts_add(a, e, num(a, ct, 2)));
  return ts_mul(a, x[0], ts_div(a, q, ts_add(a, q, num(a, ct, 2))));
}
static ts_expr *t_thresh(ts_arena *a, const gr_node *n, ts_expr **x, int k,
                         ts_dtype ct) {
  (void)k;
  return ts_select(a, ts_gt(a, x[0], num(a, ct, attr(n, "alpha", 1.0))), x[0],
                   num(a, ct, 0));
}
#define T_CALL(fn, intrin)                                                     \
  static ts_expr *fn(ts_arena *a, const gr_node *n, ts_expr **x, int k,        \
                     ts_dtype ct) {                                            \
    (void)n, (void)k;                                                          \
    return call1(a, ct, intrin, x[0]);                                         \
  }
T_CALL(t_log, "log")
T_CALL(t_floor, "floor")
T_CALL(t_ceil, "ceil")
T_CALL(t_round, "round")
T_CALL(t_sin, "sin")
T_CALL(t_cos, "cos")
static ts_expr *t_recip(ts_arena *a, const gr_node *n, ts_expr **x, int k,
                        ts_dtype ct) {
  (void)n, (void)k;
  return ts_div(a, num(a, ct, 1), x[0]);
}
static ts_expr *t_sign(ts_arena *a, const gr_node *n, ts_expr **x, int k,
                       ts_dtype ct) {
  (void)n, (void)k;
  return ts_sub(a, flag(a, ct, ts_gt(a, x[0], num(a, ct, 0))),
                flag(a, ct, ts_lt(a, x[0], num(a, ct, 0))));
}
static ts_expr *t_min(ts_arena *a, const gr_node *n, ts_expr **x, int k,
                      ts_dtype ct) {
  (void)n, (void)ct;
  ts_expr *m = x[0];
  for (int i = 1; i < k; i++) m = ts_min(a, m, x[i]);
  return m;
}
static ts_expr *t_max(ts_arena *a, const gr_node *n, ts_expr **x, int k,
                      ts_dtype ct) {
  (void)n, (void)ct;
  ts_expr *m = x[0];
  for (int i = 1; i < k; i++) m = ts_max(a, m, x[i]);
  return m;
}
static ts_expr *t_sum(ts_arena *a, const gr_node *n, ts_expr **x, int k,
                      ts_dtype ct) {
  (void)n, (void)ct;
  ts_expr *s = x[0];
  for (int i = 1; i < k; i++) s = ts_add(a, s, x[i]);
  return s;
}
static ts_expr *t_mean(ts_arena *a, const gr_node *n, ts_expr **x, int k,
                       ts_dtype ct) {
  return ts_div(a, t_sum(a, n, x, k, ct), num(a, ct, k));
}
#define T_CMP(fn, cmp)                                                         \
  static ts_expr *fn(ts_arena *a, const gr_node *n, ts_expr **x, int k,        \
                     ts_dtype ct) {                                            \
    (void)n, (void)k;                                                          \
    return flag(a, ct, cmp(a, x[0], x[1]));                                    \
  }
T_CMP(t_eq, ts_eq)
T_CMP(t_lt, ts_lt)
T_CMP(t_gt, ts_gt)
T_CMP(t_le, ts_le)
T_CMP(t_ge, ts_ge)
static ts_expr *t_and(ts_arena *a, const gr_node *n, ts_expr **x, int k,
                      ts_dtype ct) {
  (void)n, (void)k;
  return flag(a, ct, ts_and(a, truth(a, ct, x[0]), truth(a, ct, x[1])));
}
static ts_expr *t_or(ts_arena *a, const gr_node *n, ts_expr **x, int k,
                     ts_dtype ct) {
  (void)n, (void)k;
  return flag(a, ct, ts_or(a, truth(a, ct, x[0]), truth(a, ct, x[1])));
}
static ts_expr *t_xor(ts_arena *a, const gr_node *n, ts_expr **x, int k,
                      ts_dtype ct) {
  (void)n, (void)k;
  return flag(a, ct,
              ts_ne(a, flag(a, ct, truth(a, ct, x[0])),
                    flag(a, ct, truth(a, ct, x[1]))));
}
static ts_expr *t_not(ts_arena *a, const gr_node *n, ts_expr **x, int k,
                      ts_dtype ct) {
  (void)n, (void)k;
  return flag(a, ct, ts_eq(a, x[0], num(a, ct, 0)));
}
static ts_expr *t_where(ts_arena *a, const gr_node *n, ts_expr **x, int k,
                        ts_dtype ct) {
  (void)n, (void)k;
  return ts_select(a, truth(a, ct, x[0]), x[1], x[2]);
}

/* fmod: a - trunc(a / b) * b; the integer Mod: a - floor(a / b) * b (the
 * sign of the divisor); 0 for a division by zero */
static ts_expr *t_mod(ts_arena *a, const gr_node *n, ts_expr **x, int k,
                      ts_dtype ct) {
  (void)k;
  bool f = gr_attr_int(n, "fmod", 0) != 0;
  ts_expr *zero = ts_eq(a, x[1], num(a, ct, 0));
  ts_expr *b = ts_select(a, zero, num(a, ct, 1), x[1]);
  ts_expr *q = call1(a, ct, f ? "trunc" : "floor", ts_div(a, x[0], b));
  ts_expr *r = ts_sub(a, x[0], ts_mul(a, q, b));
  return f ? r : ts_select(a, zero, num(a, ct, 0), r);
}
static ts_expr *t_isnan(ts_arena *a, const gr_node *n, ts_expr **x, int k,
                        ts_dtype ct) {
  (void)n, (void)k;
  return flag(a, ct, ts_ne(a, x[0], x[0]));
}
static ts_expr *t_isinf(ts_arena *a, const gr_node *n, ts_expr **x, int k,
                        ts_dtype ct) {
  (void)k;
  ts_expr *pos = gr_attr_int(n, "detect_positive", 1)
                     ? ts_eq(a, x[0], num(a, ct, INFINITY))
                     : NULL;
  ts_expr *neg = gr_attr_int(n, "detect_negative", 1)
                     ? ts_eq(a, x[0], num(a, ct, -INFINITY))
                     : NULL;
  if (!pos && !neg) return num(a, ct, 0);
  return flag(a, ct, pos && neg ? ts_or(a, pos, neg) : pos ? pos : neg);
}

static ts_expr *t_tan(ts_arena *a, const gr_node *n, ts_expr **x, int k,
                      ts_dtype ct) {
  (void)n, (void)k;
  return ts_div(a, call1(a, ct, "sin", x[0]), call1(a, ct, "cos", x[0]));
}
/* (e^x -+ e^-x) / 2 */
static ts_expr *exp_pair(ts_arena *a, ts_dtype ct, ts_expr *x, bool plus) {
  ts_expr *e = call1(a, ct, "exp", x);
  ts_expr *f = call1(a, ct, "exp", ts_sub(a, num(a, ct, 0), x));
  return ts_mul(a, plus ? ts_add(a, e, f) : ts_sub(a, e, f), num(a, ct, 0.5));
}
static ts_expr *t_sinh(ts_arena *a, const gr_node *n, ts_expr **x, int k,
                       ts_dtype ct) {
  (void)n, (void)k;
  return exp_pair(a, ct, x[0], false);
}
static ts_expr *t_cosh(ts_arena *a, const gr_node *n, ts_expr **x, int k,
                       ts_dtype ct) {
  (void)n, (void)k;
  return exp_pair(a, ct, x[0], true);
}
/* log(x + sqrt(x^2 -+ 1)) */
static ts_expr *log_root(ts_arena *a, ts_dtype ct, ts_expr *x, double c) {
  ts_expr *r = call1(a, ct, "sqrt", ts_add(a, ts_mul(a, x, x), num(a, ct, c)));
  return call1(a, ct, "log", ts_add(a, x, r));
}
static ts_expr *t_asinh(ts_arena *a, const gr_node *n, ts_expr **x, int k,
                        ts_dtype ct) {
  (void)n, (void)k;
  /* odd: computed on |x| and signed, so that large negative x does not
   * cancel */
  ts_expr *ax = call1(a, ct, "abs", x[0]);
  ts_expr *v = log_root(a, ct, ax, 1);
  return ts_select(a, ts_lt(a, x[0], num(a, ct, 0)),
                   ts_sub(a, num(a, ct, 0), v), v);
}
static ts_expr *t_acosh(ts_arena *a, const gr_node *n, ts_expr **x, int k,
                        ts_dtype ct) {
  (void)n, (void)k;
  return log_root(a, ct, x[0], -1);
}
static ts_expr *t_atanh(ts_arena *a, const gr_node *n, ts_expr **x, int k,
                        ts_dtype ct) {
  (void)n, (void)k;
  ts_expr *q =
      ts_div(a, ts_add(a, num(a, ct, 1), x[0]), ts_sub(a, num(a, ct, 1), x[0]));
  return ts_mul(a, call1(a, ct, "log", q), num(a, ct, 0.5));
}
/* atan(t) for any t from the odd polynomial of Cephes' atanf on
 * |r| <= tan(pi/8), r reduced from |t| by atan(t) = pi/4 + atan((t-1)/(t+1))
 * and pi/2 - atan(1/t) (within 3 ulp of float32); odd, so signed at the
 * end. NaN stays NaN; +-inf gives +-pi/2. */
static ts_expr *atan_of(ts_arena *a, ts_dtype ct, ts_expr *t) {
  ts_expr *ax = call1(a, ct, "abs", t);
  ts_expr *big = ts_gt(a, ax, num(a, ct, 2.414213562373095));
  ts_expr *mid = ts_gt(a, ax, num(a, ct, 0.4142135623730950));
  ts_expr *r =
      ts_select(a, big, ts_sub(a, num(a, ct, 0), ts_div(a, num(a, ct, 1), ax)),
                ts_select(a, mid,
                          ts_div(a, ts_sub(a, ax, num(a, ct, 1)),
                                 ts_add(a, ax, num(a, ct, 1))),
                          ax));
  ts_expr *y0 = ts_select(
      a, big, num(a, ct, 1.5707963267948966),
      ts_select(a, mid, num(a, ct, 0.7853981633974483), num(a, ct, 0)));
  ts_expr *z = ts_mul(a, r, r);
  static const double c[] = {8.05374449538e-2, -1.38776856032e-1,
                             1.99777106478e-1, -3.33329491539e-1};
  ts_expr *p = num(a, ct, c[0]);
  for (int i = 1; i < 4; i++) p = ts_add(a, ts_mul(a, p, z), num(a, ct, c[i]));
  ts_expr *v = ts_add(a, y0, ts_add(a, ts_mul(a, ts_mul(a, p, z), r), r));
  return ts_select(a, ts_lt(a, t, num(a, ct, 0)), ts_sub(a, num(a, ct, 0), v),
                   v);
}
static ts_expr *t_atan(ts_arena *a, const gr_node *n, ts_expr **x, int k,
                       ts_dtype ct) {
  (void)n, (void)k;
  return atan_of(a, ct, x[0]);
}
/* asin(x) = atan(x / sqrt((1 - x)(1 + x))): +-pi/2 at +-1, NaN past them */
static ts_expr *t_asin(ts_arena *a, const gr_node *n, ts_expr **x, int k,
                       ts_dtype ct) {
  (void)n, (void)k;
  ts_expr *q =
      ts_mul(a, ts_sub(a, num(a, ct, 1), x[0]), ts_add(a, num(a, ct, 1), x[0]));
  return atan_of(a, ct, ts_div(a, x[0], call1(a, ct, "sqrt", q)));
}
/* acos(x) = 2 atan(sqrt((1 - x) / (1 + x))): exact near 1, pi at -1 */
static ts_expr *t_acos(ts_arena *a, const gr_node *n, ts_expr **x, int k,
                       ts_dtype ct) {
  (void)n, (void)k;
  ts_expr *q =
      ts_div(a, ts_sub(a, num(a, ct, 1), x[0]), ts_add(a, num(a, ct, 1), x[0]));
  return ts_mul(a, num(a, ct, 2), atan_of(a, ct, call1(a, ct, "sqrt", q)));
}
static ts_expr *t_shrink(ts_arena *a, const gr_node *n, ts_expr **x, int k,
                         ts_dtype ct) {
  (void)k;
  double l = attr(n, "lambd", 0.5), b = attr(n, "bias", 0);
  ts_expr *lo = ts_lt(a, x[0], num(a, ct, -l)),
          *hi = ts_gt(a, x[0], num(a, ct, l));
  return ts_select(
      a, lo, ts_add(a, x[0], num(a, ct, b)),
      ts_select(a, hi, ts_sub(a, x[0], num(a, ct, b)), num(a, ct, 0)));
}

static const gr_ew_op table[] = {
    {"LeakyRelu", 1, 1, EW_SAME, true, r_leaky, t_leaky},
    {"PRelu", 2, 2, EW_SAME, true, r_prelu, t_prelu},
    {"HardSigmoid", 1, 1, EW_SAME, true, r_hsig, t_hsig},
    {"HardSwish", 1, 1, EW_SAME, true, r_hswish, t_hswish},
    {"Elu", 1, 1, EW_SAME, true, r_elu, t_elu},
    {"Selu", 1, 1, EW_SAME, true, r_selu, t_selu},
    {"Celu", 1, 1, EW_SAME, true, r_celu, t_celu},
    {"Softplus", 1, 1, EW_SAME, true, r_softplus, t_softplus},
    {"Softsign", 1, 1, EW_SAME, true, r_softsign, t_softsign},
    {"Mish", 1, 1, EW_SAME, true, r_mish, t_mish},
    {"ThresholdedRelu", 1, 1, EW_SAME, true, r_thresh, t_thresh},
    {"Log", 1, 1, EW_SAME, true, r_log, t_log},
    {"Reciprocal", 1, 1, EW_SAME, true, r_recip, t_recip},
    {"Floor", 1, 1, EW_SAME, true, r_floor, t_floor},
    {"Ceil", 1, 1, EW_SAME, true, r_ceil, t_ceil},
    {"Round", 1, 1, EW_SAME, true, r_round, t_round},
    {"Sign", 1, 1, EW_SAME, false, r_sign, t_sign},
    {"Sin", 1, 1, EW_SAME, true, r_sin, t_sin},
    {"Cos", 1, 1, EW_SAME, true, r_cos, t_cos},
    {"Min", 1, 8, EW_SAME, false, r_min, t_min},
    {"Max", 1, 8, EW_SAME, false, r_max, t_max},
    {"Sum", 1, 8, EW_SAME, false, r_sum, t_sum},
    {"Mean", 1, 8, EW_SAME, true, r_mean, t_mean},
    {"Equal", 2, 2, EW_BOOL_OUT, false, r_eq, t_eq},
    {"Less", 2, 2, EW_BOOL_OUT, false, r_lt, t_lt},
    {"Greater", 2, 2, EW_BOOL_OUT, false, r_gt, t_gt},
    {"LessOrEqual", 2, 2, EW_BOOL_OUT, false, r_le, t_le},
    {"GreaterOrEqual", 2, 2, EW_BOOL_OUT, false, r_ge, t_ge},
    {"And", 2, 2, EW_LOGIC, false, r_and, t_and},
    {"Or", 2, 2, EW_LOGIC, false, r_or, t_or},
    {"Xor", 2, 2, EW_LOGIC, false, r_xor, t_xor},
    {"Not", 1, 1, EW_LOGIC, false, r_not, t_not},
    {"Where", 3, 3, EW_WHERE, false, r_where, t_where},
    {"Mod", 2, 2, EW_SAME, false, r_mod, t_mod},
    {"IsNaN", 1, 1, EW_BOOL_OUT, true, r_isnan, t_isnan},
    {"IsInf", 1, 1, EW_BOOL_OUT, true, r_isinf, t_isinf},
    {"Tan", 1, 1, EW_SAME, true, r_tan, t_tan},
    {"Atan", 1, 1, EW_SAME, true, r_atan, t_atan},
    {"Asin", 1, 1, EW_SAME, true, r_asin, t_asin},
    {"Acos", 1, 1, EW_SAME, true, r_acos, t_acos},
    {"Sinh", 1, 1, EW_SAME, true, r_sinh, t_sinh},
    {"Cosh", 1, 1, EW_SAME, true, r_cosh, t_cosh},
    {"Asinh", 1, 1, EW_SAME, true, r_asinh, t_asinh},
    {"Acosh", 1, 1, EW_SAME, true, r_acosh, t_acosh},
    {"Atanh", 1, 1, EW_SAME, true, r_atanh, t_atanh},
    {"Shrink", 1, 1, EW_SAME, false, r_shrink, t_shrink},
};

const gr_ew_op *gr_ew_lookup(const char *op) {
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (!strcmp(table[i].name, op)) return &table[i];
  return NULL;
}

const char *gr_ew_name(size_t i) {
  return i < sizeof table / sizeof table[0] ? table[i].name : NULL;
}

#define FAIL(...)                                                              \
  TS_ERR(err, TS_EINVAL, "node '%s' (%s): " FMT_FIRST(__VA_ARGS__), n->name,   \
         n->op REST_ARGS(__VA_ARGS__))
#define FMT_FIRST(f, ...) f
#define REST_ARGS(f, ...) , ##__VA_ARGS__

/* The shape rule: the operands broadcast together; the result's dtype is
 * the operands' (bool for comparisons and logic; Where's branches'). */
int gr_ew_infer(ts_graph *g, gr_node *n, const gr_ew_op *op, ts_error *err) {
  if (n->n_inputs < op->min_in || n->n_inputs > op->max_in)
    return op->min_in == op->max_in
               ? FAIL("takes %d input%s, has %d", op->min_in,
                      op->min_in == 1 ? "" : "s", n->n_inputs)
               : FAIL("takes %d to %d inputs, has %d", op->min_in, op->max_in,
                      n->n_inputs);
  int64_t shape[TS_MAX_DIMS];
  int nd = 0;
  const char *layout = "";
  int first = op->kind == EW_WHERE ? 1 : 0;
  ts_dtype dt = TS_FLOAT32;
  for (int k = 0; k < n->n_inputs; k++) {
    if (n->inputs[k] < 0) return FAIL("input %d is omitted", k);
    const gr_value *x = &g->values[n->inputs[k]];
    char b1[32], b2[32];
    bool want_bool = op->kind == EW_LOGIC || (op->kind == EW_WHERE && k == 0);
    if (want_bool && !ts_dtype_eq(x->dtype, TS_BOOL))
      return FAIL("input %d must be bool, is %s", k,
                  ts_dtype_str(x->dtype, b1));
    if (!want_bool && k == first) dt = x->dtype;
    if (!want_bool && k > first && !ts_dtype_eq(x->dtype, dt))
      return FAIL("operand dtypes differ: %s and %s", ts_dtype_str(dt, b1),
                  ts_dtype_str(x->dtype, b2));
    if (op->float_only && !ts_dtype_is_float(x->dtype))
      return FAIL("input %d must be a float tensor, is %s", k,
                  ts_dtype_str(x->dtype, b1));
    if (k == 0) {
      nd = x->ndim;
      memcpy(shape, x->shape, sizeof(int64_t) * (size_t)nd);
      layout = x->layout;
      continue;
    }
    int64_t out[TS_MAX_DIMS];
    int no;
    if (!gr_broadcast(shape, nd, x->shape, x->ndim, out, &no))
      return FAIL("input %d's shape does not broadcast with the others", k);
    if (no > nd) layout = x->ndim == no ? x->layout : "";
    nd = no;
    memcpy(shape, out, sizeof(int64_t) * (size_t)nd);
  }
  ts_dtype t = op->kind == EW_SAME || op->kind == EW_WHERE ? dt : TS_BOOL;
  gr_value *o = &g->values[n->outputs[0]];
  o->dtype = t;
  o->ndim = nd;
  for (int i = 0; i < TS_MAX_DIMS; i++) o->shape[i] = i < nd ? shape[i] : -1;
  o->layout = layout ? layout : "";
  return TS_OK;
}

double gr_ew_ref(const gr_ew_op *op, const gr_node *n, const double *x, int k) {
  return op->ref(n, x, k);
}

ts_expr *gr_ew_tir(const gr_ew_op *op, ts_arena *a, const gr_node *n,
                   ts_expr **x, int k, ts_dtype ct) {
  return op->tir(a, n, x, k, ct);
}

/* Whether input k only selects (a bool operand): it does not decide the
 * compute dtype. */
bool gr_ew_bool_operand(const gr_ew_op *op, int k) {
  return op->kind == EW_LOGIC || (op->kind == EW_WHERE && k == 0);
}
