/*
 * quant.c — the quantization profile (Glow's first step): the model runs on
 * representative inputs with an observer on the executor that records, for
 * every float32 value it computes (graph inputs and each node's outputs),
 * the range of its finite values, how many values were NaN or infinite, and
 * two histograms over that range (of the values, and of their magnitudes)
 * from which a calibration picks the range to quantize:
 *
 *   minmax      the whole observed range;
 *   percentile  the range holding the given share of the values (99.99 %:
 *               outliers clipped);
 *   entropy     the magnitude threshold whose 128-level quantization loses
 *               the least information (Kullback-Leibler divergence between
 *               the clipped histogram and its quantized copy, TensorRT's
 *               calibration).
 *
 * Two passes over the samples: the first finds each value's range, the
 * second fills the histograms over it (a histogram needs its range first).
 */
#include "internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ts_quant_profile {
  const ts_graph *g;
  int n_bins;
  ts_quant_stats *stats; /* one per float32 value the executor computes */
  int n;
  int *of_value;           /* value id -> index in stats, -1 */
  ts_graph_runner *runner; /* built at the first sample */
  int pass;
  int samples[2];
};

static bool is_f32(ts_dtype t) {
  return t.code == TS_DT_FLOAT && t.bits == 32 && t.lanes == 1;
}

int ts_quant_profile_create(const ts_graph *g, int n_bins,
                            ts_quant_profile **out, ts_error *err) {
  *out = NULL;
  if (n_bins < 16 || n_bins > 1 << 16)
    return TS_ERR(err, TS_EINVAL, "quantization profile: %d bins (16 to 65536)",
                  n_bins);
  ts_quant_profile *p = ts_calloc(1, sizeof *p);
  if (!p) return TS_ERR(err, TS_ENOMEM, "out of memory");
  p->g = g;
  p->n_bins = n_bins;
  p->of_value = ts_malloc(sizeof(int) * ((size_t)g->n_values + 1));
  p->stats = ts_calloc((size_t)g->n_values + 1, sizeof *p->stats);
  if (!p->of_value || !p->stats) {
    ts_quant_profile_free(p);
    return TS_ERR(err, TS_ENOMEM, "out of memory");
  }
  for (int v = 0; v < g->n_values; v++) {
    p->of_value[v] = -1;
    const gr_value *val = &g->values[v];
    bool computed = val->is_input || val->producer >= 0;
    if (!computed || val->const_off >= 0 || !is_f32(val->dtype)) continue;
    ts_quant_stats *s = &p->stats[p->n];
    s->name = val->name;
    s->value_id = v;
    s->min = INFINITY;
    s->max = -INFINITY;
    s->n_bins = n_bins;
    s->bins = ts_calloc((size_t)n_bins, sizeof *s->bins);
    s->abs_bins = ts_calloc((size_t)n_bins, sizeof *s->abs_bins);
    if (!s->bins || !s->abs_bins) {
      ts_quant_profile_free(p);
      return TS_ERR(err, TS_ENOMEM, "out of memory");
    }
    p->of_value[v] = p->n++;
  }
  *out = p;
  return TS_OK;
}

void ts_quant_profile_free(ts_quant_profile *p) {
  if (!p) return;
  for (int i = 0; p->stats && i < p->n; i++) {
    free(p->stats[i].bins);
    free(p->stats[i].abs_bins);
  }
  free(p->stats);
  free(p->of_value);
  ts_graph_runner_free(p->runner);
  free(p);
}

int ts_quant_profile_n(const ts_quant_profile *p) { return p->n; }

const ts_quant_stats *ts_quant_profile_get(const ts_quant_profile *p, int i) {
  return i >= 0 && i < p->n ? &p->stats[i] : NULL;
}

/* The bin of x in [lo, hi] split into n. */
static int bin_of(double x, double lo, double hi, int n) {
  if (!(hi > lo)) return 0;
  int b = (int)((x - lo) / (hi - lo) * n);
  return b < 0 ? 0 : b >= n ? n - 1 : b;
}

static void observe(void *ctx, int v, const ts_graph_tensor *t) {
  ts_quant_profile *p = ctx;
  int i = p->of_value[v];
  if (i < 0) return;
  ts_quant_stats *s = &p->stats[i];
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
  const float *x = t->data;
  if (p->pass == 0) {
    for (int64_t k = 0; k < n; k++) {
      float e = x[k];
      if (isnan(e))
        s->nan++;
      else if (isinf(e))
        s->inf++;
      else {
        if (e < s->min) s->min = e;
        if (e > s->max) s->max = e;
        s->count++;
      }
    }
    return;
  }
  double amax = fmax(fabs(s->min), fabs(s->max));
  for (int64_t k = 0; k < n; k++) {
    float e = x[k];
    if (!isfinite(e)) continue;
    s->bins[bin_of(e, s->min, s->max, s->n_bins)]++;
    s->abs_bins[bin_of(fabs(e), 0, amax, s->n_bins)]++;
  }
}

int ts_quant_profile_add(ts_quant_profile *p, int pass, ts_graph_exec_mode mode,
                         const ts_graph_tensor *inputs, int n_inputs,
                         ts_error *err) {
  if (pass != 0 && pass != 1)
    return TS_ERR(err, TS_EINVAL, "quantization profile: pass %d", pass);
  if (pass == 1 && p->samples[0] == 0)
    return TS_ERR(err, TS_EINVAL,
                  "quantization profile: histograms before any range");
  p->pass = pass;
  int rc =
      p->runner ? TS_OK : ts_graph_runner_create(p->g, mode, &p->runner, err);
  if (rc) return rc;
  int n_out = ts_graph_n_outputs(p->g);
  ts_graph_tensor *outs = ts_calloc((size_t)n_out + 1, sizeof *outs);
  if (!outs) return TS_ERR(err, TS_ENOMEM, "out of memory");
  rc = ts_graph_runner_run(p->runner, inputs, n_inputs, outs, n_out, observe, p,
                           err);
  for (int i = 0; i < n_out; i++) free(outs[i].data);
  free(outs);
  if (!rc) p->samples[pass]++;
  return rc;
}

/* ---- calibrations ---- */

/* The smallest bin edge t (of n bins over [0, hi]) such that the bins
 * below it hold at least `share` of the total. */
static double abs_quantile(const int64_t *bins, int n, double hi,
                           double share) {
  int64_t total = 0;
  for (int i = 0; i < n; i++) total += bins[i];
  if (total == 0) return 0;
  double want = share * (double)total, acc = 0;
  for (int i = 0; i < n; i++) {
    acc += (double)bins[i];
    if (acc >= want) return hi * (i + 1) / n;
  }
  return hi;
}

/* TensorRT's entropy calibration over the magnitude histogram: for each
 * threshold bin i (from `levels` on), P is the histogram cut at i with the
 * clipped tail added to its last bin, Q the same bins quantized to `levels`
 * levels (each level's total spread over its nonzero bins); the threshold
 * with the smallest KL(P || Q) wins. */
static double entropy_threshold(const int64_t *bins, int n, double hi,
                                int levels) {
  int64_t total = 0;
  for (int i = 0; i < n; i++) total += bins[i];
  if (total == 0 || n <= levels) return hi;
  double *P = ts_malloc(sizeof(double) * (size_t)n);
  double *Q = ts_malloc(sizeof(double) * (size_t)n);
  if (!P || !Q) {
    free(P), free(Q);
    return hi;
  }
  double best_kl = INFINITY;
  int best = n;
  for (int i = levels; i <= n; i++) {
    double tail = 0;
    for (int k = i; k < n; k++) tail += (double)bins[k];
    for (int k = 0; k < i; k++) P[k] = (double)bins[k];
    P[i - 1] += tail;
    /* quantize bins[0..i) into `levels` groups */
    for (int k = 0; k < i; k++) Q[k] = 0;
    for (int q = 0; q < levels; q++) {
      int a = (int)((int64_t)q * i / levels),
          b = (int)((int64_t)(q + 1) * i / levels);
      double sum = 0;
      int nonzero = 0;
      for (int k = a; k < b; k++) {
        sum += (double)bins[k];
        nonzero += bins[k] != 0;
      }
      for (int k = a; k < b; k++)
        if (bins[k] != 0) Q[k] = sum / nonzero;
    }
    double ps = 0, qs = 0;
    for (int k = 0; k < i; k++) ps += P[k], qs += Q[k];
    if (ps <= 0 || qs <= 0) continue;
    double kl = 0;
    for (int k = 0; k < i; k++) {
      if (P[k] == 0) continue;
      double pk = P[k] / ps, qk = Q[k] / qs;
      /* a bin Q leaves empty costs as if it held one count */
      kl += pk * log(pk / (qk > 0 ? qk : 1.0 / qs));
    }
    if (kl < best_kl) {
      best_kl = kl;
      best = i;
    }
  }
  free(P), free(Q);
  return hi * (best + 0.5) / n > hi ? hi : hi * (best + 0.5) / n;
}

int ts_quant_range(const ts_quant_stats *s, ts_quant_calibration c,
                   double percentile, bool symmetric, double *lo, double *hi,
                   ts_error *err) {
  if (s->count == 0)
    return TS_ERR(err, TS_EINVAL,
                  "tensor '%s': no finite value was observed (%lld NaN, %lld "
                  "infinite): it cannot be quantized",
                  s->name, (long long)s->nan, (long long)s->inf);
  double mn = s->min, mx = s->max, amax = fmax(fabs(mn), fabs(mx));
  switch (c) {
  case TS_QUANT_MINMAX:
    *lo = symmetric ? -amax : mn;
    *hi = symmetric ? amax : mx;
    break;
  case TS_QUANT_PERCENTILE: {
    if (!(percentile > 0 && percentile <= 100))
      return TS_ERR(err, TS_EINVAL, "percentile %g (0 to 100]", percentile);
    double share = percentile / 100;
    if (symmetric) {
      double t = abs_quantile(s->abs_bins, s->n_bins, amax, share);
      *lo = -t, *hi = t;
    } else { /* the signed histogram's two tails, (1 - share) / 2 each */
      int64_t total = 0;
      for (int i = 0; i < s->n_bins; i++) total += s->bins[i];
      double cut = (1 - share) / 2 * (double)total, acc = 0;
      int a = 0, b = s->n_bins - 1;
      for (acc = 0; a < s->n_bins - 1 && acc + (double)s->bins[a] <= cut; a++)
        acc += (double)s->bins[a];
      for (acc = 0; b > a && acc + (double)s->bins[b] <= cut; b--)
        acc += (double)s->bins[b];
      double w = (mx - mn) / s->n_bins;
      *lo = mn + a * w;
      *hi = mn + (b + 1) * w;
    }
    break;
  }
  case TS_QUANT_ENTROPY: {
    double t = entropy_threshold(s->abs_bins, s->n_bins, amax, 128);
    *lo = symmetric ? -t : fmax(mn, -t);
    *hi = symmetric ? t : fmin(mx, t);
    break;
  }
  default: return TS_ERR(err, TS_EINVAL, "unknown calibration %d", (int)c);
  }
  /* the range always holds 0, so zero padding and ReLU's zeros are exact */
  if (*lo > 0) *lo = 0;
  if (*hi < 0) *hi = 0;
  return TS_OK;
}

void ts_quant_params(double lo, double hi, bool symmetric, double *scale,
                     int *zero_point) {
  if (lo > 0) lo = 0;
  if (hi < 0) hi = 0;
  if (symmetric) {
    double a = fmax(-lo, hi);
    *scale = a > 0 ? a / 127 : 1; /* a constant 0: any scale is exact */
    *zero_point = 0;
    return;
  }
  *scale = hi > lo ? (hi - lo) / 255 : 1;
  long z = lround(-lo / *scale);
  *zero_point = (int)(z < 0 ? 0 : z > 255 ? 255 : z);
}

const char *ts_quant_calibration_name(ts_quant_calibration c) {
  switch (c) {
  case TS_QUANT_MINMAX: return "minmax";
  case TS_QUANT_PERCENTILE: return "percentile";
  case TS_QUANT_ENTROPY: return "entropy";
  }
  return "?";
}

static cJSON *bins_json(const int64_t *bins, int n) {
  cJSON *a = cJSON_CreateArray();
  for (int i = 0; a && i < n; i++)
    ts_json_add(a, NULL, cJSON_CreateNumber((double)bins[i]));
  return a;
}

char *ts_quant_profile_json(const ts_quant_profile *p, const char *model,
                            double percentile) {
  unsigned long failures = ts_alloc_failures();
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "format", "tessera-quant-profile");
  cJSON_AddNumberToObject(root, "version", 1);
  cJSON_AddStringToObject(root, "model", model ? model : "");
  cJSON_AddNumberToObject(root, "samples", p->samples[0]);
  cJSON_AddNumberToObject(root, "bins", p->n_bins);
  cJSON_AddNumberToObject(root, "percentile", percentile);
  cJSON *arr = cJSON_AddArrayToObject(root, "tensors");
  for (int i = 0; i < p->n; i++) {
    const ts_quant_stats *s = &p->stats[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", s->name);
    cJSON_AddNumberToObject(o, "count", (double)s->count);
    cJSON_AddNumberToObject(o, "nan", (double)s->nan);
    cJSON_AddNumberToObject(o, "inf", (double)s->inf);
    if (s->count) {
      cJSON_AddNumberToObject(o, "min", s->min);
      cJSON_AddNumberToObject(o, "max", s->max);
      cJSON_AddBoolToObject(o, "constant", s->min == s->max);
      ts_json_add(o, "hist", bins_json(s->bins, s->n_bins));
      ts_json_add(o, "abs_hist", bins_json(s->abs_bins, s->n_bins));
      cJSON *r = cJSON_AddObjectToObject(o, "ranges");
      for (int c = 0; c < 3; c++)
        for (int sym = 0; sym < 2; sym++) {
          double lo, hi;
          if (ts_quant_range(s, (ts_quant_calibration)c, percentile, sym, &lo,
                             &hi, NULL))
            continue;
          char key[48];
          snprintf(key, sizeof key, "%s%s",
                   ts_quant_calibration_name((ts_quant_calibration)c),
                   sym ? "_symmetric" : "");
          cJSON *pair = cJSON_CreateArray();
          ts_json_add(pair, NULL, cJSON_CreateNumber(lo));
          ts_json_add(pair, NULL, cJSON_CreateNumber(hi));
          ts_json_add(r, key, pair);
        }
    } else {
      cJSON_AddNullToObject(o, "min");
      cJSON_AddNullToObject(o, "max");
    }
    ts_json_add(arr, NULL, o);
  }
  char *text = ts_json_print(root, failures, false);
  cJSON_Delete(root);
  return text;
}

/* ---- requantization ---- */

int ts_quant_multiplier(double scale, int32_t *multiplier, int *shift) {
  if (!(scale > 0) || !isfinite(scale)) return TS_EINVAL;
  int e;
  double m = frexp(scale, &e); /* scale = m * 2^e, m in [0.5, 1) */
  int64_t q = llround(m * (double)(1LL << 31));
  if (q == 1LL << 31) { /* m rounded up to 1 */
    q /= 2;
    e++;
  }
  int n = -e; /* scale = q * 2^-31 * 2^-n; the shift 31 + n in [1, 61] */
  if (n < -30 || n > 30) return TS_ERANGE;
  *multiplier = (int32_t)q;
  *shift = n;
  return TS_OK;
}

int32_t ts_quant_requantize(int32_t acc, int32_t multiplier, int shift,
                            int32_t zero_point, int32_t qmin, int32_t qmax) {
  /* acc * multiplier fits 62 bits; the total right shift is 31 + shift
   * (1 to 61); rounding to nearest, ties away from zero */
  int64_t x = (int64_t)acc * multiplier;
  int s = 31 + shift;
  int64_t half = (int64_t)1 << (s - 1);
  int64_t r = x >= 0 ? (x + half) >> s : -((-x + half) >> s);
  r += zero_point;
  return (int32_t)(r < qmin ? qmin : r > qmax ? qmax : r);
}
