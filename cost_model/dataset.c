/*
 * dataset.c — data sets of measured candidates read from the tuning
 * database: for each (workload, target) group, every record's trace is
 * replayed on the workload's stored function and the scheduled result's
 * features are extracted for that target. Evaluation (`costmodel eval`)
 * and warm-start training (`costmodel train`) start from these.
 */
#define _GNU_SOURCE /* qsort_r */
#include "cost_model/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int db_error(ts_db *db, ts_error *err, const char *what) {
  const ts_error *e = ts_db_error(db);
  return TS_ERR(err, e && e->code ? e->code : TS_EIO, "%s: %s", what,
                ts_db_errmsg(db));
}

void ts_cm_dataset_free(ts_cm_dataset *ds) {
  if (!ds) return;
  for (int i = 0; i < ds->n; i++) ts_cm_features_clear(&ds->features[i]);
  for (int g = 0; g < ds->n_groups; g++) free(ds->group_names[g]);
  free(ds->features);
  free(ds->candidates);
  free(ds->results);
  free(ds->record_ids);
  free(ds->group_names);
  free(ds->group_workload);
  free(ds);
}

/* Grows the per-candidate arrays to hold at least `need`. */
static bool reserve(ts_cm_dataset *ds, int *cap, int need) {
  if (need <= *cap) return true;
  int c = *cap ? *cap : 256;
  while (c < need) c *= 2;
  ts_cm_features *f = realloc(ds->features, sizeof *f * (size_t)c);
  if (!f) return false;
  ds->features = f;
  ts_cm_result *r = realloc(ds->results, sizeof *r * (size_t)c);
  if (!r) return false;
  ds->results = r;
  int64_t *id = realloc(ds->record_ids, sizeof *id * (size_t)c);
  if (!id) return false;
  ds->record_ids = id;
  ts_cm_candidate *cd = realloc(ds->candidates, sizeof *cd * (size_t)c);
  if (!cd) return false;
  ds->candidates = cd;
  *cap = c;
  return true;
}

static bool add_group(ts_cm_dataset *ds, const char *name, int64_t workload) {
  char **n = realloc(ds->group_names, sizeof *n * (size_t)(ds->n_groups + 1));
  if (!n) return false;
  ds->group_names = n;
  int64_t *w =
      realloc(ds->group_workload, sizeof *w * (size_t)(ds->n_groups + 1));
  if (!w) return false;
  ds->group_workload = w;
  if (!(n[ds->n_groups] = strdup(name ? name : ""))) return false;
  w[ds->n_groups++] = workload;
  return true;
}

/* The fastest repeat of an ok record, or +inf. Other work on the machine
 * only ever slows a run down, so the minimum is the least noisy estimate of
 * the kernel's time. */
static double fastest(const ts_db_record *r) {
  double best = INFINITY;
  if (r->status != TS_DB_STATUS_OK) return best;
  for (int k = 0; k < r->n_run_secs; k++)
    if (r->run_secs[k] > 0 && r->run_secs[k] < best) best = r->run_secs[k];
  return best;
}

/* Adds one candidate for the records recs[idx[0..n)], which share a trace:
 * replayed once; its time is the fastest over them, ok when any is. */
static int add_candidate(ts_cm_dataset *ds, int *cap, const ts_db_record *recs,
                         const int *idx, int n, const ts_func *func,
                         const ts_target *target, int group) {
  const ts_db_record *first = NULL;
  double best = INFINITY;
  int used = 0;
  for (int k = 0; k < n; k++) {
    const ts_db_record *r = &recs[idx[k]];
    if (r->status == TS_DB_STATUS_WORKER_LOST) continue; /* never ran */
    if (!first) first = r;
    double t = fastest(r);
    if (t < best) best = t;
    used++;
  }
  ds->skipped += n - used;
  if (!first) return TS_OK;
  ts_trace *trace = NULL;
  ts_sched *sched = NULL;
  ts_error e;
  ts_cm_features f = {0};
  bool ok = ts_trace_from_json(first->trace_json, strlen(first->trace_json),
                               &trace, &e) == TS_OK &&
            ts_trace_apply(trace, func, 0, &sched, &e) == TS_OK &&
            ts_cm_extract(ts_sched_func(sched), target, &f, &e) == TS_OK;
  ts_sched_destroy(sched);
  ts_trace_free(trace);
  if (!ok) {
    ds->skipped += used;
    return TS_OK;
  }
  if (!reserve(ds, cap, ds->n + 1)) {
    ts_cm_features_clear(&f);
    return TS_ENOMEM;
  }
  int i = ds->n++;
  ds->merged += used - 1;
  ds->features[i] = f;
  ds->extract_ms += f.extract_ms;
  ds->results[i].ok = isfinite(best);
  ds->results[i].seconds = isfinite(best) ? best : 0;
  ds->record_ids[i] = first->id;
  ds->candidates[i] = (ts_cm_candidate){NULL, NULL, group};
  return TS_OK;
}

static int cmp_trace(const void *x, const void *y, void *ctx) {
  const ts_db_record *r = ctx;
  int a = *(const int *)x, b = *(const int *)y;
  int c = strcmp(r[a].trace_json, r[b].trace_json);
  return c ? c : a - b;
}

/* Adds a group's records, those with equal traces as one candidate. */
static int add_group_records(ts_cm_dataset *ds, int *cap,
                             const ts_db_record *recs, int n,
                             const ts_func *func, const ts_target *target,
                             int group) {
  int *idx = malloc(sizeof *idx * (size_t)(n ? n : 1));
  if (!idx) return TS_ENOMEM;
  for (int i = 0; i < n; i++) idx[i] = i;
  qsort_r(idx, (size_t)n, sizeof *idx, cmp_trace, (void *)recs);
  int rc = TS_OK;
  for (int s = 0; s < n && !rc;) {
    int e = s + 1;
    while (e < n && !strcmp(recs[idx[e]].trace_json, recs[idx[s]].trace_json))
      e++;
    rc = add_candidate(ds, cap, recs, idx + s, e - s, func, target, group);
    s = e;
  }
  free(idx);
  return rc;
}

int ts_cm_dataset_from_db(ts_db *db, const char *workload, ts_cm_dataset **out,
                          ts_error *err) {
  *out = NULL;
  int64_t wid = 0;
  if (workload && ts_db_resolve_workload(db, workload, &wid))
    return db_error(db, err, "cost model data set");
  ts_db_summary *rows = NULL;
  int n_rows = 0;
  if (ts_db_list(db, wid, &rows, &n_rows))
    return db_error(db, err, "cost model data set");
  ts_cm_dataset *ds = calloc(1, sizeof *ds);
  if (!ds) {
    ts_db_summaries_free(rows, n_rows);
    return TS_ERR(err, TS_ENOMEM, "cost model data set: out of memory");
  }
  int cap = 0, rc = TS_OK;
  for (int r = 0; r < n_rows && !rc; r++) {
    if (!rows[r].target || rows[r].n_records == 0) continue;
    ts_func *func = NULL;
    ts_target *target = NULL;
    ts_db_record *recs = NULL;
    int n_recs = 0;
    ts_error e;
    if (ts_db_workload_func(db, rows[r].workload_id, &func)) {
      rc = db_error(db, err, "cost model data set");
    } else if (ts_target_parse(rows[r].target, &target, &e)) {
      rc = TS_ERR(err, TS_EINVAL,
                  "cost model data set: workload '%s': stored target '%s' "
                  "does not parse: %s",
                  rows[r].name, rows[r].target, e.msg);
    } else if (ts_db_records_of(db, rows[r].workload_id, rows[r].target, &recs,
                                &n_recs)) {
      rc = db_error(db, err, "cost model data set");
    } else if (!add_group(ds, rows[r].name, rows[r].workload_id)) {
      rc = TS_ERR(err, TS_ENOMEM, "cost model data set: out of memory");
    }
    if (!rc && add_group_records(ds, &cap, recs, n_recs, func, target,
                                 ds->n_groups - 1))
      rc = TS_ERR(err, TS_ENOMEM, "cost model data set: out of memory");
    ts_db_records_free(recs, n_recs);
    ts_target_free(target);
    ts_func_free(func);
  }
  ts_db_summaries_free(rows, n_rows);
  if (rc) {
    ts_cm_dataset_free(ds);
    return rc;
  }
  for (int i = 0; i < ds->n; i++) ds->candidates[i].features = &ds->features[i];
  *out = ds;
  return TS_OK;
}
