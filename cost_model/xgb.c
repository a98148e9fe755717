/*
 * xgb.c — the XGBoost cost model, through libxgboost's C API. One training
 * row per buffer store; a candidate's score is the sum of its rows'
 * predictions. XGBoost cannot aggregate rows itself, so training supplies
 * its own gradients (XGBoosterBoostOneIter): every round predicts the
 * training rows, sums them per candidate, computes the loss gradient with
 * respect to each candidate's score and hands it to each of its rows (the
 * derivative of a sum with respect to each term is 1). Two losses
 * (docs/features.md compares them): a pairwise logistic (RankNet) loss over
 * pairs of one group, and squared error against the normalized throughput
 * weighted by it. Online: the model keeps every sample it is given and
 * retrains from scratch (on top of a loaded warm-start model, if any) once
 * it holds min_samples and has grown by retrain_growth since the last
 * training; before the first training it scores randomly.
 */
#include "cost_model/internal.h"

#include <xgboost/c_api.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Squared-error weight of a candidate: its target, but at least this, so
 * failed candidates (target 0) are still pulled down. */
#define SQUARED_WEIGHT_FLOOR 0.1
/* Rank loss: groups up to this size use every pair; larger ones pair each
 * candidate with RANK_PARTNERS random others. */
#define RANK_ALL_PAIRS_MAX 128
#define RANK_PARTNERS 64

typedef struct sample {
  int64_t group;
  ts_cm_result result;
  int64_t row; /* first row in rows */
  int n_rows;
} sample;

typedef struct xgb_model {
  ts_cost_model base;
  ts_cm_xgb_options o;
  ts_target *target; /* copy of o.target (o.target points here) */
  int nthread;
  ts_rng rng;
  float *rows;
  int64_t n_rows, cap_rows;
  sample *samples;
  int64_t n_samples, cap_samples;
  BoosterHandle booster; /* NULL until trained or loaded */
  unsigned char *warm;   /* the loaded model's bytes (warm start), or NULL */
  size_t n_warm;
  int64_t n_trained_on;
  int n_trainings;
  double last_ms, total_ms;
} xgb_model;

static int xgb_error(ts_error *err, const char *what) {
  return TS_ERR(err, TS_EINTERNAL, "xgboost: %s: %s", what, XGBGetLastError());
}

ts_cm_xgb_options ts_cm_xgb_defaults(void) {
  return (ts_cm_xgb_options){
      .target = NULL,
      .nthread = 0,
      .seed = 1,
      .objective = TS_CM_OBJ_RANK,
      .rounds = 150,
      .max_depth = 4,
      .eta = 0.2,
      .min_child_weight = 1,
      .min_samples = 64,
      .retrain_growth = 0.2,
  };
}

static int check_options(const ts_cm_xgb_options *o, ts_error *err) {
  if (!ts_cm_objective_name(o->objective))
    return TS_ERR(err, TS_EINVAL, "xgb cost model: unknown objective %d",
                  (int)o->objective);
  if (o->nthread < 0 || o->nthread > 1024)
    return TS_ERR(err, TS_EINVAL, "xgb cost model: nthread %d not in [0, 1024]",
                  o->nthread);
  if (o->rounds < 1 || o->rounds > 100000)
    return TS_ERR(err, TS_EINVAL,
                  "xgb cost model: rounds %d not in [1, 100000]", o->rounds);
  if (o->max_depth < 1 || o->max_depth > 30)
    return TS_ERR(err, TS_EINVAL, "xgb cost model: max_depth %d not in [1, 30]",
                  o->max_depth);
  if (!(o->eta > 0 && o->eta <= 1))
    return TS_ERR(err, TS_EINVAL, "xgb cost model: eta %g not in (0, 1]",
                  o->eta);
  if (!(o->min_child_weight >= 0 && isfinite(o->min_child_weight)))
    return TS_ERR(err, TS_EINVAL,
                  "xgb cost model: min_child_weight %g must be >= 0",
                  o->min_child_weight);
  if (o->min_samples < 1)
    return TS_ERR(err, TS_EINVAL, "xgb cost model: min_samples %d must be >= 1",
                  o->min_samples);
  if (!(o->retrain_growth >= 0 && isfinite(o->retrain_growth)))
    return TS_ERR(err, TS_EINVAL,
                  "xgb cost model: retrain_growth %g must be >= 0",
                  o->retrain_growth);
  return TS_OK;
}

static int set_params(xgb_model *m, BoosterHandle b, ts_error *err) {
  char nthread[16], seed[16], depth[16], eta[32], mcw[32];
  snprintf(nthread, sizeof nthread, "%d", m->nthread);
  snprintf(seed, sizeof seed, "%d", (int)(m->o.seed & 0x7fffffff));
  snprintf(depth, sizeof depth, "%d", m->o.max_depth);
  snprintf(eta, sizeof eta, "%.17g", m->o.eta);
  snprintf(mcw, sizeof mcw, "%.17g", m->o.min_child_weight);
  const char *params[][2] = {
      {"verbosity", "0"},        {"nthread", nthread}, {"seed", seed},
      {"tree_method", "hist"},   {"max_depth", depth}, {"eta", eta},
      {"min_child_weight", mcw}, {"base_score", "0"},  {"gamma", "0.001"},
  };
  for (size_t i = 0; i < sizeof params / sizeof params[0]; i++)
    if (XGBoosterSetParam(b, params[i][0], params[i][1]))
      return xgb_error(err, "set parameter");
  return TS_OK;
}

/* A booster holding the warm-start model (or empty). */
static int new_booster(xgb_model *m, DMatrixHandle *train, BoosterHandle *out,
                       ts_error *err) {
  *out = NULL;
  if (XGBoosterCreate(train, train ? 1 : 0, out))
    return xgb_error(err, "create booster");
  if (m->warm &&
      XGBoosterLoadModelFromBuffer(*out, m->warm, (bst_ulong)m->n_warm)) {
    int rc = xgb_error(err, "load the warm-start model");
    XGBoosterFree(*out);
    *out = NULL;
    return rc;
  }
  int rc = set_params(m, *out, err);
  if (rc) {
    XGBoosterFree(*out);
    *out = NULL;
  }
  return rc;
}

/* ------------------------------------------------------------------------
 * Training
 * ------------------------------------------------------------------------ */

typedef struct pair_list {
  int64_t *hi, *lo; /* target[hi] > target[lo] */
  int64_t n, cap;
  int *per_candidate; /* pairs each candidate is in */
} pair_list;

static bool add_pair(pair_list *p, int64_t hi, int64_t lo) {
  if (p->n == p->cap) {
    int64_t cap = p->cap ? 2 * p->cap : 1024;
    int64_t *h = realloc(p->hi, sizeof *h * (size_t)cap);
    if (!h) return false;
    p->hi = h;
    int64_t *l = realloc(p->lo, sizeof *l * (size_t)cap);
    if (!l) return false;
    p->lo = l;
    p->cap = cap;
  }
  p->hi[p->n] = hi;
  p->lo[p->n++] = lo;
  p->per_candidate[hi]++;
  p->per_candidate[lo]++;
  return true;
}

/* The pairs of the rank loss: within each group, every pair with different
 * targets, or random partners in large groups (seeded). */
static bool make_pairs(const xgb_model *m, const double *y, ts_rng *rng,
                       pair_list *p) {
  int64_t n = m->n_samples;
  int64_t *order = malloc(sizeof *order * (size_t)(n ? n : 1));
  if (!order) return false;
  for (int64_t i = 0; i < n; i++) order[i] = m->samples[i].group;
  cm_keyed *k = cm_by_group(order, n);
  if (!k) {
    free(order);
    return false;
  }
  for (int64_t i = 0; i < n; i++) order[i] = k[i].index;
  bool ok = true;
  for (int64_t s = 0; s < n && ok;) {
    int64_t e = s;
    while (e < n && k[e].group == k[s].group) e++;
    int64_t g = e - s;
    if (g <= RANK_ALL_PAIRS_MAX) {
      for (int64_t i = s; i < e && ok; i++)
        for (int64_t j = i + 1; j < e && ok; j++) {
          int64_t a = order[i], b = order[j];
          if (y[a] > y[b])
            ok = add_pair(p, a, b);
          else if (y[b] > y[a])
            ok = add_pair(p, b, a);
        }
    } else {
      for (int64_t i = s; i < e && ok; i++)
        for (int k = 0; k < RANK_PARTNERS && ok; k++) {
          int64_t a = order[i],
                  b = order[s + (int64_t)ts_rng_below(rng, (uint64_t)g)];
          if (y[a] > y[b])
            ok = add_pair(p, a, b);
          else if (y[b] > y[a])
            ok = add_pair(p, b, a);
        }
    }
    s = e;
  }
  free(k);
  free(order);
  return ok;
}

/* Candidate-level gradient and hessian of the loss at scores S. */
static void gradients(const xgb_model *m, const double *S, const double *y,
                      const pair_list *pairs, double *G, double *H) {
  int64_t n = m->n_samples;
  memset(G, 0, sizeof *G * (size_t)n);
  memset(H, 0, sizeof *H * (size_t)n);
  if (m->o.objective == TS_CM_OBJ_SQUARED) {
    for (int64_t c = 0; c < n; c++) {
      double w = y[c] > SQUARED_WEIGHT_FLOOR ? y[c] : SQUARED_WEIGHT_FLOOR;
      G[c] = w * (S[c] - y[c]);
      H[c] = w;
    }
    return;
  }
  for (int64_t k = 0; k < pairs->n; k++) {
    int64_t i = pairs->hi[k], j = pairs->lo[k];
    double d = S[i] - S[j];
    double lambda = 1 / (1 + exp(d)); /* sigmoid(-(S_i - S_j)) */
    double h = lambda * (1 - lambda);
    G[i] -= lambda;
    G[j] += lambda;
    H[i] += h;
    H[j] += h;
  }
  /* each candidate's terms are averaged over its pairs: every candidate
   * weighs the same whatever its group's size, and hessians stay on the
   * scale min_child_weight is set for */
  for (int64_t c = 0; c < n; c++)
    if (pairs->per_candidate[c] > 0) {
      G[c] /= pairs->per_candidate[c];
      H[c] /= pairs->per_candidate[c];
    }
}

static int train(xgb_model *m, ts_error *err) {
  double t0 = ts_now_seconds();
  int64_t n = m->n_samples, n_rows = m->n_rows;
  int64_t *groups = malloc(sizeof *groups * (size_t)(n ? n : 1));
  ts_cm_result *res = malloc(sizeof *res * (size_t)(n ? n : 1));
  double *y = malloc(sizeof *y * (size_t)(n ? n : 1));
  double *S = malloc(sizeof *S * (size_t)(n ? n : 1));
  double *G = malloc(sizeof *G * (size_t)(n ? n : 1));
  double *H = malloc(sizeof *H * (size_t)(n ? n : 1));
  float *grad = malloc(sizeof *grad * (size_t)(n_rows ? n_rows : 1));
  float *hess = malloc(sizeof *hess * (size_t)(n_rows ? n_rows : 1));
  int64_t *row_cand = malloc(sizeof *row_cand * (size_t)(n_rows ? n_rows : 1));
  pair_list pairs = {0};
  DMatrixHandle dtrain = NULL;
  BoosterHandle b = NULL;
  int rc = TS_OK;
  if (!groups || !res || !y || !S || !G || !H || !grad || !hess || !row_cand) {
    rc = TS_ERR(err, TS_ENOMEM, "xgb cost model: out of memory");
    goto done;
  }
  for (int64_t c = 0; c < n; c++) {
    groups[c] = m->samples[c].group;
    res[c] = m->samples[c].result;
    for (int r = 0; r < m->samples[c].n_rows; r++)
      row_cand[m->samples[c].row + r] = c;
  }
  ts_cm_targets(groups, res, (int)n, y);
  ts_rng rng;
  ts_rng_seed(&rng, m->o.seed ^ (uint64_t)(m->n_trainings + 1));
  if (m->o.objective == TS_CM_OBJ_RANK &&
      (!(pairs.per_candidate = calloc((size_t)(n ? n : 1), sizeof(int))) ||
       !make_pairs(m, y, &rng, &pairs))) {
    rc = TS_ERR(err, TS_ENOMEM, "xgb cost model: out of memory");
    goto done;
  }
  if (XGDMatrixCreateFromMat(m->rows, (bst_ulong)n_rows, TS_CM_N_FEATURES, NAN,
                             &dtrain)) {
    rc = xgb_error(err, "create the training matrix");
    goto done;
  }
  if ((rc = new_booster(m, &dtrain, &b, err))) goto done;
  for (int round = 0; round < m->o.rounds; round++) {
    bst_ulong len = 0;
    const float *pred = NULL;
    if (XGBoosterPredict(b, dtrain, 1, 0, 1, &len, &pred) ||
        len != (bst_ulong)n_rows) {
      rc = xgb_error(err, "predict the training rows");
      goto done;
    }
    memset(S, 0, sizeof *S * (size_t)n);
    for (int64_t r = 0; r < n_rows; r++) S[row_cand[r]] += pred[r];
    gradients(m, S, y, &pairs, G, H);
    for (int64_t r = 0; r < n_rows; r++) {
      grad[r] = (float)G[row_cand[r]];
      hess[r] = (float)H[row_cand[r]];
    }
    if (XGBoosterBoostOneIter(b, dtrain, grad, hess, (bst_ulong)n_rows)) {
      rc = xgb_error(err, "boost one round");
      goto done;
    }
  }
  if (m->booster) XGBoosterFree(m->booster);
  m->booster = b;
  b = NULL;
  m->n_trained_on = n;
  m->n_trainings++;
  m->last_ms = (ts_now_seconds() - t0) * 1e3;
  m->total_ms += m->last_ms;
done:
  if (b) XGBoosterFree(b);
  if (dtrain) XGDMatrixFree(dtrain);
  free(groups);
  free(res);
  free(y);
  free(S);
  free(G);
  free(H);
  free(grad);
  free(hess);
  free(row_cand);
  free(pairs.hi);
  free(pairs.lo);
  free(pairs.per_candidate);
  return rc;
}

static bool has_ok_sample(const xgb_model *m) {
  for (int64_t i = 0; i < m->n_samples; i++)
    if (m->samples[i].result.ok) return true;
  return false;
}

int ts_cm_xgb_train(ts_cost_model *base, ts_error *err) {
  if (!base || strcmp(base->ops->kind, "xgb") != 0)
    return TS_ERR(err, TS_EINVAL, "xgb train: not an XGBoost model");
  xgb_model *m = (xgb_model *)base;
  if (!has_ok_sample(m))
    return TS_ERR(err, TS_EINVAL,
                  "xgb train: no successfully measured sample among %lld",
                  (long long)m->n_samples);
  return train(m, err);
}

/* ------------------------------------------------------------------------
 * The interface
 * ------------------------------------------------------------------------ */

static int xgb_predict(ts_cost_model *base, const ts_cm_candidate *c, int n,
                       double *scores, ts_error *err) {
  xgb_model *m = (xgb_model *)base;
  if (!m->booster) {
    for (int i = 0; i < n; i++) scores[i] = ts_rng_unit(&m->rng);
    return TS_OK;
  }
  ts_cm_features *tmp = calloc((size_t)n, sizeof *tmp);
  const ts_cm_features **use = calloc((size_t)n, sizeof *use);
  float *rows = NULL;
  DMatrixHandle dm = NULL;
  int rc = TS_OK;
  if (!tmp || !use) {
    rc = TS_ERR(err, TS_ENOMEM, "xgb predict: out of memory");
    goto done;
  }
  int64_t total = 0;
  for (int i = 0; i < n; i++) {
    ts_error ignored;
    if (cm_candidate_features(&c[i], m->target, &tmp[i], &use[i], &ignored))
      use[i] = NULL;
    else
      total += use[i]->n_rows;
  }
  if (total > 0) {
    rows = malloc(sizeof(float) * (size_t)total * TS_CM_N_FEATURES);
    if (!rows) {
      rc = TS_ERR(err, TS_ENOMEM, "xgb predict: out of memory");
      goto done;
    }
    int64_t at = 0;
    for (int i = 0; i < n; i++)
      if (use[i] && use[i]->n_rows) {
        size_t k = (size_t)use[i]->n_rows * TS_CM_N_FEATURES;
        memcpy(rows + at * TS_CM_N_FEATURES, use[i]->values, sizeof(float) * k);
        at += use[i]->n_rows;
      }
    bst_ulong len = 0;
    const float *pred = NULL;
    if (XGDMatrixCreateFromMat(rows, (bst_ulong)total, TS_CM_N_FEATURES, NAN,
                               &dm) ||
        XGBoosterPredict(m->booster, dm, 1, 0, 0, &len, &pred) ||
        len != (bst_ulong)total) {
      rc = xgb_error(err, "predict");
      goto done;
    }
    at = 0;
    for (int i = 0; i < n; i++) {
      double s = 0;
      for (int r = 0; use[i] && r < use[i]->n_rows; r++) s += pred[at++];
      scores[i] = s;
    }
  } else {
    for (int i = 0; i < n; i++) scores[i] = 0;
  }
  for (int i = 0; i < n; i++)
    if (!use[i]) scores[i] = -INFINITY;
done:
  if (dm) XGDMatrixFree(dm);
  free(rows);
  for (int i = 0; tmp && i < n; i++) ts_cm_features_clear(&tmp[i]);
  free(tmp);
  free(use);
  return rc;
}

static bool reserve(xgb_model *m, int64_t more_samples, int64_t more_rows) {
  if (m->n_samples + more_samples > m->cap_samples) {
    int64_t cap = m->cap_samples ? m->cap_samples : 64;
    while (cap < m->n_samples + more_samples) cap *= 2;
    sample *s = realloc(m->samples, sizeof *s * (size_t)cap);
    if (!s) return false;
    m->samples = s;
    m->cap_samples = cap;
  }
  if (m->n_rows + more_rows > m->cap_rows) {
    int64_t cap = m->cap_rows ? m->cap_rows : 256;
    while (cap < m->n_rows + more_rows) cap *= 2;
    float *r = realloc(m->rows, sizeof(float) * (size_t)cap * TS_CM_N_FEATURES);
    if (!r) return false;
    m->rows = r;
    m->cap_rows = cap;
  }
  return true;
}

static int xgb_update(ts_cost_model *base, const ts_cm_candidate *c,
                      const ts_cm_result *res, int n, ts_error *err) {
  xgb_model *m = (xgb_model *)base;
  for (int i = 0; i < n; i++) {
    ts_cm_features tmp = {0};
    const ts_cm_features *f;
    ts_error ignored;
    if (cm_candidate_features(&c[i], m->target, &tmp, &f, &ignored))
      continue; /* a candidate that does not lower teaches nothing */
    if (!reserve(m, 1, f->n_rows)) {
      ts_cm_features_clear(&tmp);
      return TS_ERR(err, TS_ENOMEM, "xgb update: out of memory");
    }
    if (f->n_rows)
      memcpy(m->rows + m->n_rows * TS_CM_N_FEATURES, f->values,
             sizeof(float) * (size_t)f->n_rows * TS_CM_N_FEATURES);
    m->samples[m->n_samples++] =
        (sample){c[i].group, res[i], m->n_rows, f->n_rows};
    m->n_rows += f->n_rows;
    ts_cm_features_clear(&tmp);
  }
  bool due = m->n_samples >= m->o.min_samples &&
             (m->n_trainings == 0 ||
              (double)m->n_samples >=
                  (double)m->n_trained_on * (1 + m->o.retrain_growth));
  if (due && has_ok_sample(m)) return train(m, err);
  return TS_OK;
}

static int xgb_save(ts_cost_model *base, const char *path, ts_error *err) {
  xgb_model *m = (xgb_model *)base;
  const char *payload = NULL;
  bst_ulong n_payload = 0;
  if (m->booster) {
    if (XGBoosterSaveModelToBuffer(m->booster, "{\"format\": \"ubj\"}",
                                   &n_payload, &payload))
      return xgb_error(err, "save the model");
  } else if (m->warm) {
    payload = (const char *)m->warm;
    n_payload = (bst_ulong)m->n_warm;
  }
  cJSON *h = cJSON_CreateObject();
  if (!h) return TS_ERR(err, TS_ENOMEM, "cost model save: out of memory");
  char seed[24];
  snprintf(seed, sizeof seed, "%llu", (unsigned long long)m->o.seed);
  cJSON_AddStringToObject(h, "objective", ts_cm_objective_name(m->o.objective));
  cJSON_AddNumberToObject(h, "rounds", m->o.rounds);
  cJSON_AddNumberToObject(h, "max_depth", m->o.max_depth);
  cJSON_AddNumberToObject(h, "eta", m->o.eta);
  cJSON_AddNumberToObject(h, "min_child_weight", m->o.min_child_weight);
  cJSON_AddStringToObject(h, "seed", seed);
  cJSON_AddBoolToObject(h, "trained", payload != NULL);
  cJSON_AddNumberToObject(h, "n_trained_on", (double)m->n_trained_on);
  return cm_file_write(path, "xgb", h, payload, (size_t)n_payload, err);
}

static void xgb_info(const ts_cost_model *base, ts_cm_info *out) {
  const xgb_model *m = (const xgb_model *)base;
  out->kind = "xgb";
  out->n_samples = m->n_samples;
  out->n_rows = m->n_rows;
  out->n_trained_on = m->n_trained_on;
  out->n_trainings = m->n_trainings;
  out->trained = m->booster != NULL;
  out->warm = m->warm != NULL;
  out->last_train_ms = m->last_ms;
  out->total_train_ms = m->total_ms;
}

static void xgb_destroy(ts_cost_model *base) {
  xgb_model *m = (xgb_model *)base;
  if (m->booster) XGBoosterFree(m->booster);
  ts_target_free(m->target);
  free(m->rows);
  free(m->samples);
  free(m->warm);
  free(m);
}

static const ts_cost_model_ops xgb_ops = {
    .kind = "xgb",
    .predict = xgb_predict,
    .update = xgb_update,
    .save = xgb_save,
    .info = xgb_info,
    .destroy = xgb_destroy,
};

int ts_cm_xgb_create(const ts_cm_xgb_options *opts, ts_cost_model **out,
                     ts_error *err) {
  *out = NULL;
  ts_cm_xgb_options o = opts ? *opts : ts_cm_xgb_defaults();
  int rc = check_options(&o, err);
  if (rc) return rc;
  xgb_model *m = calloc(1, sizeof *m);
  if (!m) return TS_ERR(err, TS_ENOMEM, "xgb cost model: out of memory");
  m->base.ops = &xgb_ops;
  if (o.target && !(m->target = ts_target_copy(o.target))) {
    free(m);
    return TS_ERR(err, TS_ENOMEM, "xgb cost model: out of memory");
  }
  o.target = m->target;
  m->o = o;
  int cores = m->target ? ts_target_num_cores(m->target) : 0;
  m->nthread = o.nthread > 0 ? o.nthread : cores > 0 ? cores : 1;
  ts_rng_seed(&m->rng, o.seed);
  *out = &m->base;
  return TS_OK;
}

int cm_xgb_load(const cm_file *f, const char *path,
                const ts_cm_xgb_options *opts, ts_cost_model **out,
                ts_error *err) {
  *out = NULL;
  ts_cm_xgb_options o = opts ? *opts : ts_cm_xgb_defaults();
  const char *objective, *seed;
  double rounds, depth, eta, mcw, trained_on;
  int rc;
  if ((rc = cm_header_string(f, path, "objective", &objective, err)) ||
      (rc = cm_header_number(f, path, "rounds", &rounds, err)) ||
      (rc = cm_header_number(f, path, "max_depth", &depth, err)) ||
      (rc = cm_header_number(f, path, "eta", &eta, err)) ||
      (rc = cm_header_number(f, path, "min_child_weight", &mcw, err)) ||
      (rc = cm_header_number(f, path, "n_trained_on", &trained_on, err)) ||
      (rc = cm_header_string(f, path, "seed", &seed, err)))
    return rc;
  if (ts_cm_objective_parse(objective, &o.objective))
    return TS_ERR(err, TS_EINVAL,
                  "cost model '%s': unknown objective \"%s\" (expected rank or "
                  "squared)",
                  path, objective);
  char *end;
  unsigned long long s = strtoull(seed, &end, 10);
  if (!*seed || *end)
    return TS_ERR(err, TS_EINVAL,
                  "cost model '%s': header field \"seed\" is not an unsigned "
                  "integer: '%s'",
                  path, seed);
  o.seed = (uint64_t)s;
  o.rounds = (int)rounds;
  o.max_depth = (int)depth;
  o.eta = eta;
  o.min_child_weight = mcw;
  ts_error oerr;
  if (check_options(&o, &oerr))
    return TS_ERR(err, TS_EINVAL, "cost model '%s': %s", path, oerr.msg);
  ts_cost_model *base;
  if ((rc = ts_cm_xgb_create(&o, &base, err))) return rc;
  xgb_model *m = (xgb_model *)base;
  if (f->n_payload) {
    m->warm = malloc(f->n_payload);
    if (!m->warm) {
      xgb_destroy(base);
      return TS_ERR(err, TS_ENOMEM, "cost model load: out of memory");
    }
    memcpy(m->warm, f->payload, f->n_payload);
    m->n_warm = f->n_payload;
    ts_error berr;
    if (new_booster(m, NULL, &m->booster, &berr)) {
      xgb_destroy(base);
      return TS_ERR(err, TS_EINVAL,
                    "cost model '%s': the XGBoost model in the file does not "
                    "load: %s",
                    path, berr.msg);
    }
  }
  *out = base;
  return TS_OK;
}
