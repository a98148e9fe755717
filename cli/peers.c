/*
 * peers.c — vendor libraries as confirmation peers: each library that
 * implements a workload (bench/) is opened once and then timed in the same
 * interleaved rounds as tessera's candidates (tuner/confirm.c), so the
 * stored ratio compares figures from the same seconds.
 */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include <cjson/cJSON.h>

static int peer_time(void *ctx, int min_repeat_ms, double *seconds,
                     ts_error *err) {
  ts_bench_session *s = ctx;
  ts_eval_config one = {.number = 1,
                        .repeat = 1,
                        .min_repeat_ms = min_repeat_ms,
                        .flush_cache = false,
                        .warmup = 1};
  int rc = ts_bench_measure(s, &one, err);
  if (rc) return rc;
  const double *all = NULL;
  int n = ts_bench_samples(s, &all);
  if (n < 1) return TS_ERR(err, TS_ERANGE, "no sample");
  *seconds = all[n - 1];
  return TS_OK;
}

int cli_peers_open(const ts_workload *w, int threads, cli_peers *out) {
  memset(out, 0, sizeof *out);
  if (!w) return 0;
  /* the vendors in the order bench lists them; the plain C loop only
   * where no library applies (it is a floor, not a vendor) */
  for (int v = 0; v < TS_BENCH_N_VENDORS && out->n < TS_CONFIRM_MAX_PEERS;
       v++) {
    if (v == TS_BENCH_NAIVE && out->n > 0) break;
    ts_bench_options bo = ts_bench_options_default();
    bo.threads = threads;
    bo.keep_output = false;
    ts_error err;
    ts_error_clear(&err);
    ts_bench_session *s = NULL;
    if (ts_bench_open((ts_bench_vendor)v, w, &bo, &s, &err) != TS_OK) {
      if (err.code != TS_EUNSUPPORTED)
        snprintf(out->why, sizeof out->why, "%s: %.150s",
                 ts_bench_vendor_name((ts_bench_vendor)v), err.msg);
      continue;
    }
    out->sessions[out->n] = s;
    out->peers[out->n] =
        (ts_confirm_peer){.name = ts_bench_vendor_name((ts_bench_vendor)v),
                          .threads = threads,
                          .time = peer_time,
                          .ctx = s};
    out->n++;
  }
  return out->n;
}

int cli_peers_open_db(ts_db *db, int64_t workload_id, const char *spec,
                      const char *target, int threads, cli_peers *out) {
  memset(out, 0, sizeof *out);
  char *found = spec ? NULL : cli_workload_spec(db, workload_id);
  const char *use = spec ? spec : found;
  ts_workload *w = NULL;
  if (use && ts_workload_from_spec(use, &w, NULL)) w = NULL;
  free(found);
  if (!w) return 0;
  if (threads <= 0) {
    ts_target *t = NULL;
    threads = ts_target_parse(target, &t, NULL) ? 1 : ts_target_num_cores(t);
    ts_target_free(t);
  }
  cli_peers_open(w, threads, out);
  out->owned = w;
  return out->n;
}

void cli_peers_close(cli_peers *p) {
  /* reverse order of opening: each session restores its library's thread
   * count */
  for (int i = p->n - 1; i >= 0; i--) ts_bench_close(p->sessions[i], NULL);
  ts_workload_free(p->owned);
  memset(p, 0, sizeof *p);
}

char *cli_workload_spec(ts_db *db, int64_t workload_id) {
  ts_db_workload w;
  if (ts_db_get_workload(db, workload_id, &w)) return NULL;
  ts_db_job *jobs = NULL;
  int n = 0;
  char *spec = NULL;
  if (ts_db_jobs(db, &jobs, &n) == TS_OK)
    for (int i = n - 1; i >= 0 && !spec; i--) {
      cJSON *cfg =
          jobs[i].config_json ? cJSON_Parse(jobs[i].config_json) : NULL;
      const cJSON *t;
      cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(cfg, "tasks")) {
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(t, "hash");
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(t, "workload");
        if (cJSON_IsString(h) && cJSON_IsString(s) &&
            !strcmp(h->valuestring, w.hash)) {
          spec = strdup(s->valuestring);
          break;
        }
      }
      cJSON_Delete(cfg);
    }
  ts_db_jobs_free(jobs, n);
  ts_db_workload_clear(&w);
  return spec;
}
