/*
 * random.c — the random cost model: uniform scores in [0, 1) from a seeded
 * generator, so a search with it is a seeded random search. It has the
 * model interface of the XGBoost model (update only counts what it is
 * given) and is the baseline every measured figure of the real model is
 * compared with.
 */
#include "cost_model/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct random_model {
  ts_cost_model base;
  uint64_t seed;
  ts_rng rng;
  int64_t n_samples;
} random_model;

static int random_predict(ts_cost_model *m, const ts_cm_candidate *c, int n,
                          double *scores, ts_error *err) {
  (void)c;
  (void)err;
  random_model *r = (random_model *)m;
  for (int i = 0; i < n; i++) scores[i] = ts_rng_unit(&r->rng);
  return TS_OK;
}

static int random_update(ts_cost_model *m, const ts_cm_candidate *c,
                         const ts_cm_result *res, int n, ts_error *err) {
  (void)c;
  (void)res;
  (void)err;
  ((random_model *)m)->n_samples += n;
  return TS_OK;
}

static int random_save(ts_cost_model *m, const char *path, ts_error *err) {
  random_model *r = (random_model *)m;
  cJSON *h = cJSON_CreateObject();
  if (!h) return TS_ERR(err, TS_ENOMEM, "cost model save: out of memory");
  /* seeds above 2^53 do not survive a JSON number: store them as text */
  char seed[24];
  snprintf(seed, sizeof seed, "%llu", (unsigned long long)r->seed);
  cJSON_AddStringToObject(h, "seed", seed);
  return cm_file_write(path, "random", h, NULL, 0, err);
}

static void random_info(const ts_cost_model *m, ts_cm_info *out) {
  const random_model *r = (const random_model *)m;
  out->kind = "random";
  out->n_samples = r->n_samples;
}

static void random_destroy(ts_cost_model *m) { free(m); }

static const ts_cost_model_ops random_ops = {
    .kind = "random",
    .predict = random_predict,
    .update = random_update,
    .save = random_save,
    .info = random_info,
    .destroy = random_destroy,
};

int ts_cm_random_create(uint64_t seed, ts_cost_model **out, ts_error *err) {
  random_model *r = calloc(1, sizeof *r);
  if (!r) {
    *out = NULL;
    return TS_ERR(err, TS_ENOMEM, "random cost model: out of memory");
  }
  r->base.ops = &random_ops;
  r->seed = seed;
  ts_rng_seed(&r->rng, seed);
  *out = &r->base;
  return TS_OK;
}

int cm_random_load(const cm_file *f, const char *path, ts_cost_model **out,
                   ts_error *err) {
  const char *seed;
  int rc = cm_header_string(f, path, "seed", &seed, err);
  if (rc) return rc;
  char *end;
  unsigned long long v = strtoull(seed, &end, 10);
  if (!*seed || *end)
    return TS_ERR(err, TS_EINVAL,
                  "cost model '%s': header field \"seed\" is not an unsigned "
                  "integer: '%s'",
                  path, seed);
  if (f->n_payload)
    return TS_ERR(err, TS_EINVAL,
                  "cost model '%s': a random model has no payload, found %zu "
                  "bytes",
                  path, f->n_payload);
  return ts_cm_random_create((uint64_t)v, out, err);
}
