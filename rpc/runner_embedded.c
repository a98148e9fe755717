/*
 * runner_embedded.c — the embedded runner: an in-process local pool of one
 * device executor (the same forked-process measurement code a worker uses),
 * no network. The executor measures one candidate at a time, so the
 * measurements of one pool never overlap; a process should create one
 * embedded runner per device and share it between jobs (calls to it are
 * serialized).
 */
#include "rpc/internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct embedded {
  ts_runner base;
  executor *ex;
  pthread_mutex_t mu; /* one measure call at a time */
} embedded;

static int emb_set_reference(ts_runner *r, const char *id, ts_artifact *ref,
                             ts_error *err) {
  embedded *e = (embedded *)r;
  return executor_put_reference(e->ex, id, ref, err);
}

static int emb_measure(ts_runner *r, const ts_measure_config *cfg,
                       const char *reference_id, ts_artifact *const *cands,
                       int n, ts_measure_result *results, ts_error *err) {
  embedded *e = (embedded *)r;
  if (reference_id && !executor_has_reference(e->ex, reference_id))
    return TS_ERR(err, TS_ENOTFOUND,
                  "measure: unknown reference '%s' (register "
                  "it with ts_runner_set_reference)",
                  reference_id);
  pthread_mutex_lock(&e->mu);
  for (int i = 0; i < n; i++) {
    if (!cands[i])
      result_set(&results[i], TS_MEASURE_BUILD_ERROR,
                 "no artifact (the "
                 "candidate did not build)");
    else
      executor_measure(e->ex, cfg, reference_id, cands[i], -1, &results[i]);
    results[i].attempts = 1;
    snprintf(results[i].worker, sizeof results[i].worker, "embedded");
  }
  pthread_mutex_unlock(&e->mu);
  return TS_OK;
}

static void emb_destroy(ts_runner *r) {
  embedded *e = (embedded *)r;
  executor_destroy(e->ex);
  pthread_mutex_destroy(&e->mu);
  free(e);
}

static const ts_runner_ops embedded_ops = {
    "embedded",
    emb_set_reference,
    emb_measure,
    emb_destroy,
};

int ts_runner_embedded_create(const ts_device_options *o, ts_runner **out,
                              ts_error *err) {
  *out = NULL;
  embedded *e = calloc(1, sizeof *e);
  if (!e) return TS_ERR(err, TS_ENOMEM, "out of memory");
  ts_device_options d = o ? *o : ts_device_defaults();
  int rc = executor_create(&d, 64, &e->ex, err);
  if (rc) {
    free(e);
    return rc;
  }
  e->base.ops = &embedded_ops;
  pthread_mutex_init(&e->mu, NULL);
  *out = &e->base;
  return TS_OK;
}
