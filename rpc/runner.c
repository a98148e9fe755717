/*
 * runner.c — the runner interface's entry points: argument checks shared
 * by every implementation (configuration, reference id, candidate count),
 * then dispatch through the implementation's ts_runner_ops.
 */
#include "rpc/internal.h"

#include <string.h>

/* Marks every result worker_lost with the reason a request was refused. */
static void refuse(ts_measure_result *results, int n, const ts_error *err) {
  for (int i = 0; results && i < n; i++)
    result_set(&results[i], TS_MEASURE_WORKER_LOST, "not measured: %s",
               err->msg);
}

int ts_runner_set_reference(ts_runner *r, const char *id,
                            ts_artifact *reference, ts_error *err) {
  if (!ref_id_valid(id))
    return TS_ERR(err, TS_EINVAL,
                  "bad reference id '%.80s' (1 to %d "
                  "characters of [A-Za-z0-9._-])",
                  id ? id : "", REF_ID_MAX);
  if (!reference || reference->kind != TS_ARTIFACT_CPU_OBJECT)
    return TS_ERR(err, TS_EINVAL,
                  "reference '%s' must be a cpu_object "
                  "artifact",
                  id);
  return r->ops->set_reference(r, id, reference, err);
}

int ts_runner_measure(ts_runner *r, const ts_measure_config *cfg,
                      const char *reference_id, ts_artifact *const *candidates,
                      int n, ts_measure_result *results, ts_error *err) {
  ts_error local;
  ts_error_clear(&local);
  if (!err) err = &local;
  int rc = TS_OK;
  if (n < 0 || (n > 0 && (!candidates || !results)))
    rc = TS_ERR(err, TS_EINVAL, "measure: bad candidate list (n = %d)", n);
  else if (!cfg)
    rc = TS_ERR(err, TS_EINVAL, "measure: no configuration");
  else if ((rc = ts_measure_config_check(cfg, err)))
    ;
  else if (reference_id && !ref_id_valid(reference_id))
    rc = TS_ERR(err, TS_EINVAL, "measure: bad reference id '%.80s'",
                reference_id);
  if (rc) {
    refuse(results, n, err);
    return rc;
  }
  if (n == 0) return TS_OK;
  rc = r->ops->measure(r, cfg, reference_id, candidates, n, results, err);
  if (rc) refuse(results, n, err);
  return rc;
}

const char *ts_runner_name(const ts_runner *r) { return r->ops->name; }

void ts_runner_destroy(ts_runner *r) {
  if (r) r->ops->destroy(r);
}
