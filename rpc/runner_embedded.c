/*
 * runner_embedded.c — the embedded runner: an in-process local pool of one
 * device executor (the same forked-process measurement code a worker uses),
 * no network. The executor measures one candidate at a time, so the
 * measurements of one pool never overlap; a process should create one
 * embedded runner per device and share it between jobs (calls to it are
 * serialized). The executor keeps at most 64 references (the least recently
 * used goes); the runner keeps every one it was given and hands an evicted
 * one back before a measurement needs it, so a job may tune any number of
 * workloads.
 */
#include "rpc/internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct emb_ref {
  char *id;
  ts_artifact *artifact; /* retained */
} emb_ref;

typedef struct embedded {
  ts_runner base;
  executor *ex;
  pthread_mutex_t mu; /* one measure call at a time; the references */
  emb_ref *refs;
  int n_refs;
} embedded;

static int emb_set_reference(ts_runner *r, const char *id, ts_artifact *ref,
                             ts_error *err) {
  embedded *e = (embedded *)r;
  int rc = executor_put_reference(e->ex, id, ref, err);
  if (rc) return rc;
  pthread_mutex_lock(&e->mu);
  emb_ref *x = NULL;
  for (int i = 0; i < e->n_refs && !x; i++)
    if (!strcmp(e->refs[i].id, id)) x = &e->refs[i];
  if (!x) {
    emb_ref *nr = realloc(e->refs, sizeof *nr * (size_t)(e->n_refs + 1));
    char *copy = strdup(id);
    if (!nr || !copy) {
      if (nr) e->refs = nr;
      free(copy);
      pthread_mutex_unlock(&e->mu);
      return TS_ERR(err, TS_ENOMEM, "out of memory");
    }
    e->refs = nr;
    x = &e->refs[e->n_refs++];
    x->id = copy;
    x->artifact = NULL;
  }
  if (x->artifact != ref) {
    ts_artifact_release(x->artifact);
    x->artifact = ts_artifact_retain(ref);
  }
  pthread_mutex_unlock(&e->mu);
  return TS_OK;
}

/* Whether the executor holds reference id, handing it back the runner's
 * copy when it was evicted (called with e->mu held). */
static bool emb_have_reference(embedded *e, const char *id, ts_error *err) {
  if (executor_has_reference(e->ex, id)) return true;
  for (int i = 0; i < e->n_refs; i++)
    if (!strcmp(e->refs[i].id, id))
      return executor_put_reference(e->ex, id, e->refs[i].artifact, err) ==
             TS_OK;
  return false;
}

static int emb_measure(ts_runner *r, const ts_measure_config *cfg,
                       const char *reference_id, ts_artifact *const *cands,
                       int n, ts_measure_result *results, ts_error *err) {
  embedded *e = (embedded *)r;
  pthread_mutex_lock(&e->mu);
  if (reference_id && !emb_have_reference(e, reference_id, err)) {
    pthread_mutex_unlock(&e->mu);
    return TS_ERR(err, TS_ENOTFOUND,
                  "measure: unknown reference '%s' (register "
                  "it with ts_runner_set_reference)",
                  reference_id);
  }
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
  for (int i = 0; i < e->n_refs; i++) {
    free(e->refs[i].id);
    ts_artifact_release(e->refs[i].artifact);
  }
  free(e->refs);
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
