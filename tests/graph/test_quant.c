/*
 * test_quant.c — the quantization profile (graph/quant.c): the ranges it
 * records are those of the tensors the executor computes (checked on the
 * graph outputs over several samples), the histograms count every finite
 * value, NaN and infinite values are counted and left out of the range, a
 * constant tensor gets a usable zero-width range, the calibrations and
 * scale/zero-point arithmetic give the expected figures on known
 * histograms, and integer requantization matches a reference in 64-bit
 * integers (rounding, saturation at the int8 and uint8 bounds).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "graph/internal.h"
#include "build_util.h"
#include "util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const ts_quant_stats *stats_of(const ts_quant_profile *p,
                                      const char *name) {
  for (int i = 0; i < ts_quant_profile_n(p); i++)
    if (!strcmp(ts_quant_profile_get(p, i)->name, name))
      return ts_quant_profile_get(p, i);
  return NULL;
}

static int64_t elems(const ts_graph_tensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
  return n;
}

/* Seeded float inputs for g (sample k). */
static void make_inputs(const ts_graph *g, int k, ts_graph_tensor *ins) {
  for (int i = 0; i < ts_graph_n_inputs(g); i++) {
    ts_graph_value_info v = ts_graph_input(g, i);
    ins[i] = (ts_graph_tensor){v.name, v.dtype, v.ndim, {0}, NULL};
    for (int d = 0; d < v.ndim; d++) ins[i].shape[d] = v.shape[d];
    int64_t n = elems(&ins[i]);
    ins[i].data = malloc((size_t)n * ts_dtype_elem_bytes(v.dtype));
    ts_host_fill_random(ins[i].data, v.dtype, n, 100u + (unsigned)k);
  }
}

static void test_profile_matches_execution(void **state) {
  (void)state;
  ts_error err;
  ts_graph *g = load_model("csrnet_small", NULL, 0, NULL, &err);
  if (!g) fail_msg("%s", err.msg);
  ts_quant_profile *p;
  assert_int_equal(ts_quant_profile_create(g, 256, &p, &err), TS_OK);
  ts_graph_tensor ins[3][4];
  /* histograms before any range are refused */
  make_inputs(g, 0, ins[0]);
  assert_int_equal(
      ts_quant_profile_add(p, 1, TS_GRAPH_COMPILE, ins[0], 1, &err), TS_EINVAL);
  for (int k = 1; k < 3; k++) make_inputs(g, k, ins[k]);
  for (int pass = 0; pass < 2; pass++)
    for (int k = 0; k < 3; k++)
      if (ts_quant_profile_add(p, pass, TS_GRAPH_COMPILE, ins[k],
                               ts_graph_n_inputs(g), &err))
        fail_msg("profile: %s", err.msg);
  assert_true(ts_quant_profile_n(p) > ts_graph_n_outputs(g));
  /* the graph output's range is the executed outputs' */
  int n_out = ts_graph_n_outputs(g);
  ts_graph_runner *r;
  assert_int_equal(ts_graph_runner_create(g, TS_GRAPH_COMPILE, &r, &err),
                   TS_OK);
  for (int o = 0; o < n_out; o++) {
    double mn = INFINITY, mx = -INFINITY;
    int64_t total = 0;
    const char *name = NULL;
    for (int k = 0; k < 3; k++) {
      ts_graph_tensor outs[4];
      if (ts_graph_runner_run(r, ins[k], ts_graph_n_inputs(g), outs, n_out,
                              NULL, NULL, &err))
        fail_msg("execute: %s", err.msg);
      const float *x = outs[o].data;
      for (int64_t e = 0; e < elems(&outs[o]); e++) {
        mn = fmin(mn, x[e]);
        mx = fmax(mx, x[e]);
      }
      total += elems(&outs[o]);
      name = outs[o].name;
      for (int i = 0; i < n_out; i++) free(outs[i].data);
    }
    const ts_quant_stats *s = stats_of(p, name);
    assert_non_null(s);
    assert_true(s->min == mn && s->max == mx);
    assert_int_equal(s->count, total);
    assert_int_equal(s->nan + s->inf, 0);
  }
  ts_graph_runner_free(r);
  /* every histogram holds every finite value once */
  for (int i = 0; i < ts_quant_profile_n(p); i++) {
    const ts_quant_stats *s = ts_quant_profile_get(p, i);
    int64_t a = 0, b = 0;
    for (int k = 0; k < s->n_bins; k++) a += s->bins[k], b += s->abs_bins[k];
    assert_int_equal(a, s->count);
    assert_int_equal(b, s->count);
  }
  char *json = ts_quant_profile_json(p, "csrnet_small", 99.99);
  assert_non_null(json);
  assert_non_null(strstr(json, "\"entropy_symmetric\""));
  assert_non_null(strstr(json, "\"samples\":3"));
  free(json);
  for (int k = 0; k < 3; k++)
    for (int i = 0; i < ts_graph_n_inputs(g); i++) free(ins[k][i].data);
  ts_quant_profile_free(p);
  ts_graph_free(g);
}

/* NaN and infinite inputs are counted and left out of the range; an input
 * that is constant gets a zero-width range that still quantizes. */
static void test_nan_and_constant(void **state) {
  (void)state;
  ts_error err;
  ts_graph *g = load_model("good", NULL, 0, NULL, &err); /* x[1, 4] . w */
  if (!g) fail_msg("%s", err.msg);
  ts_graph_value_info in = ts_graph_input(g, 0);
  ts_graph_tensor t[2];
  make_inputs(g, 0, &t[0]);
  make_inputs(g, 1, &t[1]);
  float *x = t[0].data, *c = t[1].data;
  int64_t n = elems(&t[0]);
  x[1] = NAN;
  x[2] = INFINITY;
  for (int64_t e = 0; e < n; e++) c[e] = 0.25f;
  ts_quant_profile *p;
  assert_int_equal(ts_quant_profile_create(g, 64, &p, &err), TS_OK);
  /* the NaN sample alone */
  assert_int_equal(ts_quant_profile_add(p, 0, TS_GRAPH_COMPILE, &t[0], 1, &err),
                   TS_OK);
  const ts_quant_stats *s = stats_of(p, in.name);
  assert_non_null(s);
  assert_int_equal(s->nan, 1);
  assert_int_equal(s->inf, 1);
  assert_int_equal(s->count, n - 2);
  assert_true(isfinite(s->min) && isfinite(s->max));
  ts_quant_profile_free(p);

  /* the constant sample alone */
  assert_int_equal(ts_quant_profile_create(g, 64, &p, &err), TS_OK);
  assert_int_equal(ts_quant_profile_add(p, 0, TS_GRAPH_COMPILE, &t[1], 1, &err),
                   TS_OK);
  assert_int_equal(ts_quant_profile_add(p, 1, TS_GRAPH_COMPILE, &t[1], 1, &err),
                   TS_OK);
  s = stats_of(p, in.name);
  assert_true(s->min == 0.25 && s->max == 0.25);
  for (int c2 = 0; c2 < 3; c2++) {
    double lo, hi, scale;
    int zp;
    assert_int_equal(ts_quant_range(s, (ts_quant_calibration)c2, 99.9, false,
                                    &lo, &hi, &err),
                     TS_OK);
    assert_true(lo == 0 && hi >= 0.25 - 1e-6); /* widened to hold 0 */
    ts_quant_params(lo, hi, false, &scale, &zp);
    assert_true(scale > 0 && isfinite(scale));
    assert_true(zp >= 0 && zp <= 255);
    /* 0.25 survives the round trip within half a step */
    double q = nearbyint(0.25 / scale) + zp;
    assert_true(fabs((q - zp) * scale - 0.25) <= scale / 2 + 1e-9);
  }
  ts_quant_profile_free(p);
  free(t[0].data);
  free(t[1].data);
  ts_graph_free(g);
}

/* Calibrations on a known histogram: a bulk in [-1, 1] and one outlier at
 * 100 (as a ReLU6-less activation with a rare spike). */
static void test_calibrations(void **state) {
  (void)state;
  enum { B = 2000 };
  int64_t bins[B] = {0}, abs_bins[B] = {0};
  ts_quant_stats s = {.name = "t",
                      .min = -1,
                      .max = 100,
                      .n_bins = B,
                      .bins = bins,
                      .abs_bins = abs_bins};
  /* 100,000 values spread over [-1, 1], one at 100 */
  double w = 101.0 / B, aw = 100.0 / B;
  for (int i = 0; i < 100000; i++) {
    double v = -1 + 2.0 * (i + 0.5) / 100000;
    bins[(int)((v + 1) / w)]++;
    abs_bins[(int)(fabs(v) / aw)]++;
  }
  bins[B - 1]++;
  abs_bins[B - 1]++;
  s.count = 100001;
  double lo, hi;
  ts_error err;
  assert_int_equal(
      ts_quant_range(&s, TS_QUANT_MINMAX, 0, false, &lo, &hi, &err), TS_OK);
  assert_true(lo == -1 && hi == 100);
  assert_int_equal(ts_quant_range(&s, TS_QUANT_MINMAX, 0, true, &lo, &hi, &err),
                   TS_OK);
  assert_true(lo == -100 && hi == 100);
  /* percentile 99.9: the outlier is clipped */
  assert_int_equal(
      ts_quant_range(&s, TS_QUANT_PERCENTILE, 99.9, true, &lo, &hi, &err),
      TS_OK);
  assert_true(hi > 0.9 && hi < 1.2 && lo == -hi);
  assert_int_equal(
      ts_quant_range(&s, TS_QUANT_PERCENTILE, 99.9, false, &lo, &hi, &err),
      TS_OK);
  assert_true(lo < -0.9 && hi > 0.9 && hi < 1.2);
  /* entropy: a threshold near the bulk, far below the outlier */
  assert_int_equal(
      ts_quant_range(&s, TS_QUANT_ENTROPY, 0, true, &lo, &hi, &err), TS_OK);
  /* (its thresholds start at 128 of the 2000 bins: 6.4 here) */
  assert_true(hi >= 1 && hi < 10);
  /* bad percentile; a tensor with no finite value */
  assert_int_equal(
      ts_quant_range(&s, TS_QUANT_PERCENTILE, 0, true, &lo, &hi, &err),
      TS_EINVAL);
  ts_quant_stats none = {.name = "all_nan", .nan = 7, .n_bins = B};
  assert_int_equal(
      ts_quant_range(&none, TS_QUANT_MINMAX, 0, true, &lo, &hi, &err),
      TS_EINVAL);
  assert_non_null(strstr(err.msg, "'all_nan'"));
  assert_non_null(strstr(err.msg, "7 NaN"));
}

static void test_params(void **state) {
  (void)state;
  double scale;
  int zp;
  ts_quant_params(-1, 3, false, &scale, &zp); /* uint8 */
  assert_true(fabs(scale - 4.0 / 255) < 1e-12);
  assert_int_equal(zp, 64); /* round(1 / (4/255)) = round(63.75) */
  ts_quant_params(-1, 3, true, &scale, &zp); /* int8 */
  assert_true(fabs(scale - 3.0 / 127) < 1e-12);
  assert_int_equal(zp, 0);
  ts_quant_params(0.5, 2, false, &scale, &zp); /* widened to hold 0 */
  assert_true(fabs(scale - 2.0 / 255) < 1e-12);
  assert_int_equal(zp, 0);
  ts_quant_params(-4, -1, false, &scale, &zp);
  assert_int_equal(zp, 255);
  ts_quant_params(0, 0, true, &scale, &zp); /* a constant 0 */
  assert_true(scale == 1 && zp == 0);
}

/* The reference: the same rounding written as a division in 64-bit
 * integers (quotient and remainder), then the zero point and saturation. */
static int32_t requantize_ref(int32_t acc, int32_t m, int shift, int32_t zp,
                              int32_t qmin, int32_t qmax) {
  int64_t x = (int64_t)acc * m, d = (int64_t)1 << (31 + shift);
  int64_t q = x / d, rem = x % d;
  if (2 * (rem < 0 ? -rem : rem) >= d) q += x < 0 ? -1 : 1;
  q += zp;
  return (int32_t)(q < qmin ? qmin : q > qmax ? qmax : q);
}

static void test_requantize(void **state) {
  (void)state;
  uint64_t seed = 12345;
#define NEXT() (seed = seed * 6364136223846793005ULL + 1442695040888963407ULL)
  int32_t m;
  int sh;
  /* the multiplier: within 2^-30 of the scale, normalized */
  for (int i = 0; i < 10000; i++) {
    double scale = exp(((double)(NEXT() >> 11) / (1ULL << 53)) * 30 - 20);
    assert_int_equal(ts_quant_multiplier(scale, &m, &sh), TS_OK);
    assert_true(m >= (1 << 30));
    double back = ldexp((double)m, -31 - sh);
    assert_true(fabs(back - scale) <= scale * 0x1p-30);
  }
  assert_int_equal(ts_quant_multiplier(0, &m, &sh), TS_EINVAL);
  assert_int_equal(ts_quant_multiplier(-1, &m, &sh), TS_EINVAL);
  assert_int_equal(ts_quant_multiplier(NAN, &m, &sh), TS_EINVAL);
  assert_int_equal(ts_quant_multiplier(0x1p40, &m, &sh), TS_ERANGE);
  assert_int_equal(ts_quant_multiplier(0x1p-40, &m, &sh), TS_ERANGE);
  /* requantization against the reference, int8 and uint8 bounds,
   * accumulators up to the int32 extremes */
  int64_t saturated = 0;
  for (int i = 0; i < 200000; i++) {
    double scale = exp(((double)(NEXT() >> 11) / (1ULL << 53)) * 14 - 12);
    assert_int_equal(ts_quant_multiplier(scale, &m, &sh), TS_OK);
    int32_t acc = (int32_t)(NEXT() >> 32);
    if (i % 4 == 1) acc >>= 12; /* mostly in range */
    if (i % 1000 == 7) acc = INT32_MIN;
    if (i % 1000 == 8) acc = INT32_MAX;
    bool u8 = i & 8;
    int32_t qmin = u8 ? 0 : -128, qmax = u8 ? 255 : 127;
    int32_t zp = u8 ? (int32_t)(NEXT() >> 56) : 0;
    int32_t got = ts_quant_requantize(acc, m, sh, zp, qmin, qmax);
    int32_t want = requantize_ref(acc, m, sh, zp, qmin, qmax);
    if (got != want)
      fail_msg("acc %d scale %g zp %d: %d, reference %d", acc, scale, zp, got,
               want);
    double real = acc * scale + zp;
    saturated += real < qmin || real > qmax;
    if (real >= qmin && real <= qmax) assert_true(fabs(got - real) <= 0.5001);
  }
  assert_true(saturated > 1000); /* the bounds were exercised */
  /* ties go away from zero: 2.5 -> 3, -2.5 -> -3 (scale 1/2) */
  assert_int_equal(ts_quant_multiplier(0.5, &m, &sh), TS_OK);
  assert_int_equal(ts_quant_requantize(5, m, sh, 0, -128, 127), 3);
  assert_int_equal(ts_quant_requantize(-5, m, sh, 0, -128, 127), -3);
  assert_int_equal(ts_quant_requantize(-5, m, sh, 10, 0, 255), 7);
#undef NEXT
}

/* The profile of model `name` over 3 seeded samples, as JSON. */
static char *profile_json(const char *name, const char *const *shapes,
                          int n_shapes) {
  ts_error err;
  ts_graph *g = load_model(name, shapes, n_shapes, NULL, &err);
  if (!g) fail_msg("%s", err.msg);
  ts_quant_profile *p;
  assert_int_equal(ts_quant_profile_create(g, 512, &p, &err), TS_OK);
  int n_in = ts_graph_n_inputs(g);
  for (int pass = 0; pass < 2; pass++)
    for (int k = 0; k < 3; k++) {
      ts_graph_tensor ins[4];
      make_inputs(g, k, ins);
      for (int i = 0; i < n_in; i++)
        if (!ts_dtype_is_float(ins[i].dtype)) /* token ids, a mask */
          for (int64_t e = 0; e < elems(&ins[i]); e++)
            ts_host_set(ins[i].data, ins[i].dtype, e, (double)((e * 7) % 50));
      if (ts_quant_profile_add(p, pass, TS_GRAPH_COMPILE, ins, n_in, &err))
        fail_msg("%s", err.msg);
      for (int i = 0; i < n_in; i++) free(ins[i].data);
    }
  char *json = ts_quant_profile_json(p, name, 99.99);
  ts_quant_profile_free(p);
  ts_graph_free(g);
  return json;
}

/* Model `name` imported with the quantization set up, the passes run up
 * to `after` (NULL: all). */
static ts_graph *quantized_model(const char *name, const char *const *shapes,
                                 int n_shapes, const char *json,
                                 const char *after) {
  ts_error err;
  ts_graph *g = load_model(name, shapes, n_shapes, "none", &err);
  if (!g) fail_msg("%s", err.msg);
  ts_quant_options o = {.calibration = TS_QUANT_MINMAX};
  if (ts_graph_set_quantization(g, json, &o, &err)) fail_msg("%s", err.msg);
  if (ts_graph_run_passes(g, after, &err)) fail_msg("%s", err.msg);
  return g;
}

static double rel_l2(const ts_graph_tensor *a, const ts_graph_tensor *b) {
  double num = 0, den = 0;
  for (int64_t e = 0; e < elems(a); e++) {
    double x = ts_host_get(a->data, a->dtype, e);
    double y = ts_host_get(b->data, b->dtype, e);
    num += (x - y) * (x - y);
    den += x * x;
  }
  return sqrt(num / (den > 0 ? den : 1));
}

/* Runs g on the same seeded inputs as the profile's sample k. */
static void run_sample(const ts_graph *g, ts_graph_exec_mode mode, int k,
                       ts_graph_tensor *outs) {
  ts_error err;
  ts_graph_tensor ins[4];
  int n_in = ts_graph_n_inputs(g);
  make_inputs(g, k, ins);
  for (int i = 0; i < n_in; i++)
    if (!ts_dtype_is_float(ins[i].dtype))
      for (int64_t e = 0; e < elems(&ins[i]); e++)
        ts_host_set(ins[i].data, ins[i].dtype, e, (double)((e * 7) % 50));
  if (ts_graph_execute(g, mode, ins, n_in, outs, ts_graph_n_outputs(g), &err))
    fail_msg("%s", err.msg);
  for (int i = 0; i < n_in; i++) free(ins[i].data);
}

/* The quantized compile: every conv/matmul with constant weights and wide
 * enough a reduction becomes ConvInteger/MatMulInteger with its
 * dequantization; fused, each is one int8 task; the fused kernels compute
 * what the reference kernels of the unfused quantized graph compute, and
 * that is close to the float model (not equal: it is quantized). */
static void check_quantized(const char *name, const char *const *shapes,
                            int n_shapes, double max_err) {
  char *json = profile_json(name, shapes, n_shapes);
  assert_non_null(json);
  ts_error err;
  ts_graph *f = load_model(name, shapes, n_shapes, NULL, &err);
  ts_graph *q = quantized_model(name, shapes, n_shapes, json, NULL);
  ts_graph *r = quantized_model(name, shapes, n_shapes, json, "quantize");
  int n8, n32;
  ts_graph_quant_counts(q, &n8, &n32);
  print_message("%s: %d int8 products, %d float32\n", name, n8, n32);
  assert_true(n8 >= 4);
  ts_graph_task *tasks;
  int nt, int8_tasks = 0;
  assert_int_equal(ts_graph_tasks(q, &tasks, &nt, &err), TS_OK);
  for (int i = 0; i < nt; i++)
    int8_tasks +=
        strstr(ts_func_name(tasks[i].func), "integer_dequantize") != 0;
  free(tasks);
  assert_true(int8_tasks >= 2);
  int no = ts_graph_n_outputs(f);
  for (int k = 4; k < 5; k++) { /* a sample the profile did not see */
    ts_graph_tensor of[4], oq[4], orf[4];
    run_sample(f, TS_GRAPH_COMPILE, k, of);
    run_sample(q, TS_GRAPH_COMPILE, k, oq);
    run_sample(r, TS_GRAPH_COMPILE, k, orf);
    for (int i = 0; i < no; i++) {
      double e_q = rel_l2(&of[i], &oq[i]), e_ref = rel_l2(&orf[i], &oq[i]);
      print_message("  sample %d output %d: int8 vs float32 %.4f, fused vs "
                    "reference %.2e\n",
                    k, i, e_q, e_ref);
      assert_true(e_q > 0 && e_q < max_err);
      assert_true(e_ref < 1e-3); /* a rounding tie at most, here and there */
      free(of[i].data), free(oq[i].data), free(orf[i].data);
    }
  }
  ts_graph_free(f), ts_graph_free(q), ts_graph_free(r);
  free(json);
}

static void test_quantized_cnn(void **state) {
  (void)state;
  check_quantized("resnet50_small", NULL, 0, 0.05);
}

static void test_quantized_bert(void **state) {
  (void)state;
  check_quantized("bert_small", bert_shapes, 2, 0.05);
}

/* The int8 products' weights on an AMX target stay [K, N] (the AMX
 * default packs them into its tiles, at compile time); on an AVX2 target
 * they are panels [N / B, K, B], as the float32 ones. The same for the
 * 1x1 convolutions' channel blocks. */
static void test_amx_weights_unblocked(void **state) {
  (void)state;
  char *json = profile_json("bert_small", bert_shapes, 2);
  assert_non_null(json);
  static const struct {
    const char *target;
    int ndim;
  } cases[] = {{"llvm -mcpu=sapphirerapids", 2}, {"llvm -mcpu=x86-64-v3", 3}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    ts_error err;
    ts_graph *g = load_model("bert_small", bert_shapes, 2, "none", &err);
    if (!g) fail_msg("%s", err.msg);
    ts_quant_options o = {.calibration = TS_QUANT_MINMAX};
    if (ts_graph_set_target(g, cases[c].target, &err) ||
        ts_graph_set_quantization(g, json, &o, &err) ||
        ts_graph_run_passes(g, "quantize", &err))
      fail_msg("%s", err.msg);
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
      const gr_node *nd = &g->nodes[i];
      if (nd->kind != TS_GRAPH_OP || strcmp(nd->op, "MatMulInteger")) continue;
      const gr_value *w = &g->values[nd->inputs[1]];
      if (w->ndim != cases[c].ndim)
        fail_msg("%s: %s's weights have %d dimensions, not %d", cases[c].target,
                 nd->name, w->ndim, cases[c].ndim);
      n++;
    }
    assert_true(n >= 4);
    ts_graph_free(g);
  }
  free(json);
  /* the 1x1 convs' weights likewise (their tasks' int8 weights [CI, CO]
   * on AMX, channel blocks [CO / B, CI, B] on AVX2) */
  json = profile_json("resnet50_small", NULL, 0);
  assert_non_null(json);
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    ts_error err;
    ts_graph *g = load_model("resnet50_small", NULL, 0, "none", &err);
    if (!g) fail_msg("%s", err.msg);
    ts_quant_options o = {.calibration = TS_QUANT_MINMAX};
    if (ts_graph_set_target(g, cases[c].target, &err) ||
        ts_graph_set_quantization(g, json, &o, &err) ||
        ts_graph_run_passes(g, NULL, &err))
      fail_msg("%s", err.msg);
    ts_graph_task *tasks;
    int nt, n = 0, blocked = 0;
    assert_int_equal(ts_graph_tasks(g, &tasks, &nt, &err), TS_OK);
    for (int i = 0; i < nt; i++) {
      const ts_func *f = tasks[i].func;
      if (!strstr(ts_func_name(f), "convinteger")) continue;
      for (int p = 0; p < ts_func_n_params(f); p++) {
        const ts_buffer *b = ts_func_param(f, p);
        if (!ts_dtype_eq(ts_buffer_dtype(b), TS_INT8)) continue;
        n++;
        blocked += ts_buffer_ndim(b) == 3;
      }
    }
    free(tasks);
    print_message("%s: %d of %d int8 conv weights in channel blocks\n",
                  cases[c].target, blocked, n);
    assert_true(n >= 4);
    assert_true(cases[c].ndim == 2 ? blocked == 0 : blocked > 0);
    ts_graph_free(g);
  }
  free(json);
}

/* Options: per-tensor weight scales and --keep-float change what is
 * quantized; a profile that is not one is refused with a message. */
static void test_quantize_options(void **state) {
  (void)state;
  char *json = profile_json("resnet50_small", NULL, 0);
  ts_error err;
  ts_graph *g = load_model("resnet50_small", NULL, 0, "none", &err);
  const char *keep[] = {"Conv"};
  ts_quant_options o = {.calibration = TS_QUANT_ENTROPY,
                        .per_tensor = true,
                        .keep_float = keep,
                        .n_keep_float = 1};
  assert_int_equal(ts_graph_set_quantization(g, json, &o, &err), TS_OK);
  assert_int_equal(ts_graph_run_passes(g, NULL, &err), TS_OK);
  int n8, n32;
  ts_graph_quant_counts(g, &n8, &n32);
  assert_true(n8 <= 1); /* its classifier's MatMul at most... */
  assert_true(n32 > 4); /* ...every conv kept float */
  ts_graph_free(g);

  g = load_model("resnet50_small", NULL, 0, "none", &err);
  assert_int_equal(ts_graph_set_quantization(g, "{\"tensors\": []}", &o, &err),
                   TS_EPARSE);
  assert_non_null(strstr(err.msg, "tessera quantize profile"));
  assert_int_equal(ts_graph_set_quantization(g, "{not json", &o, &err),
                   TS_EPARSE);
  assert_int_equal(
      ts_graph_set_quantization(g,
                                "{\"format\": \"tessera-quant-profile\", "
                                "\"tensors\": [{\"name\": \"x\", "
                                "\"ranges\": {\"minmax\": [1, 0]}}]}",
                                &(ts_quant_options){0}, &err),
      TS_EPARSE);
  assert_non_null(strstr(err.msg, "'x'"));
  assert_int_equal(
      ts_graph_set_quantization(g,
                                "{\"format\": \"tessera-quant-profile\", "
                                "\"tensors\": [{\"name\": \"x\", "
                                "\"ranges\": {\"minmax\": [0, 1]}}]}",
                                &o, &err),
      TS_EPARSE); /* no entropy range */
  assert_non_null(strstr(err.msg, "entropy"));
  ts_graph_free(g);
  free(json);
}

/* x [1, 3, 5, 16] -> QuantizeLinear(x, s, z) -> q -> DequantizeLinear ->
 * y, with q and y the graph's outputs; `axis_scale`: a per-channel scale
 * of 16 along the last axis instead of one value. */
static ts_graph *qdq_graph(bool axis_scale) {
  ts_graph *g = ts_graph_new("qdq");
  int x = add_input(g, "x", (int64_t[]){1, 3, 5, 16});
  float s[16];
  uint8_t z = 100;
  for (int c = 0; c < 16; c++) s[c] = axis_scale ? 0.03f + 0.005f * c : 0.05f;
  int sv =
      gr_const_add(g, "s", TS_FLOAT32, 1, (int64_t[]){axis_scale ? 16 : 1}, s);
  int zv = gr_const_add(g, "z", TS_UINT8, 1, (int64_t[]){1}, &z);
  int q = gr_value_fresh(g, "q", TS_UINT8, -1, NULL);
  gr_node *n =
      gr_node_add(g, "QuantizeLinear", NULL, (int[]){x, sv, zv}, 3, &q, 1);
  gr_node_set_attr(g, n,
                   (gr_attr){.name = "axis", .kind = GR_ATTR_INT, .i = 3});
  int y = node(g, "DequantizeLinear", (int[]){q, sv, zv}, 3);
  gr_node_set_attr(g, &g->nodes[g->n_nodes - 1],
                   (gr_attr){.name = "axis", .kind = GR_ATTR_INT, .i = 3});
  g->outputs = ts_arena_alloc(g->arena, sizeof(int) * 2);
  g->outputs[0] = q;
  g->outputs[1] = y;
  g->n_outputs = 2;
  return g;
}

/* Quantize/dequantize round trips, in the reference kernels and in the
 * fused kernel: inside the representable range a value comes back within
 * half a step; outside it saturates at the bounds (0 and 255 for uint8);
 * the two executions agree (a quotient that lands on a rounding tie in
 * float32 but not in float64 may differ by one step). */
static void test_quant_round_trip(void **state) {
  (void)state;
  for (int per_axis = 0; per_axis < 2; per_axis++) {
    ts_error err;
    ts_graph *ref = qdq_graph(per_axis), *fused = qdq_graph(per_axis);
    assert_int_equal(ts_graph_run_passes(ref, "quantize", &err), TS_OK);
    assert_int_equal(ts_graph_run_passes(fused, NULL, &err), TS_OK);
    assert_int_equal(ts_graph_count_op(fused, "QuantizeLinear"),
                     0); /* a call */
    float x[240];
    for (int i = 0; i < 240; i++)
      x[i] = -9.0f + 0.0761f * (float)i; /* to 9.2 */
    ts_graph_tensor in = {"x", TS_FLOAT32, 4, {1, 3, 5, 16}, x};
    ts_graph_tensor o[2][2];
    ts_graph *gs[2] = {ref, fused};
    for (int k = 0; k < 2; k++)
      if (ts_graph_execute(gs[k], TS_GRAPH_COMPILE, &in, 1, o[k], 2, &err))
        fail_msg("%s", err.msg);
    int off_by_one = 0;
    for (int i = 0; i < 240; i++) {
      double s = per_axis ? 0.03 + 0.005 * (i % 16) : 0.05;
      double lo = (0 - 100) * s, hi = (255 - 100) * s;
      int qr = ((uint8_t *)o[0][0].data)[i], qf = ((uint8_t *)o[1][0].data)[i];
      float yr = ((float *)o[0][1].data)[i], yf = ((float *)o[1][1].data)[i];
      assert_true(abs(qr - qf) <= 1);
      off_by_one += qr != qf;
      if (qr == qf) assert_true(yr == yf);
      if (x[i] < lo) {
        assert_int_equal(qr, 0);
        assert_true(fabs(yr - lo) < 1e-5);
      } else if (x[i] > hi) {
        assert_int_equal(qr, 255);
        assert_true(fabs(yr - hi) < 1e-5);
      } else {
        assert_true(fabs(yr - x[i]) <= s / 2 + 1e-6);
        assert_true(fabs(yf - x[i]) <= s / 2 + 1e-6 || qr != qf);
      }
    }
    assert_true(off_by_one <= 2);
    for (int k = 0; k < 2; k++) free(o[k][0].data), free(o[k][1].data);
    ts_graph_free(ref), ts_graph_free(fused);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_quant_round_trip),
      cmocka_unit_test(test_quantized_cnn),
      cmocka_unit_test(test_quantized_bert),
      cmocka_unit_test(test_amx_weights_unblocked),
      cmocka_unit_test(test_quantize_options),
      cmocka_unit_test(test_profile_matches_execution),
      cmocka_unit_test(test_nan_and_constant),
      cmocka_unit_test(test_calibrations),
      cmocka_unit_test(test_params),
      cmocka_unit_test(test_requantize),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
