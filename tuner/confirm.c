/*
 * confirm.c — bests that hold: the top candidates of a workload on a
 * target, measured again side by side.
 *
 * A search measures each candidate once, seconds apart from the others. On
 * a shared machine the speed drifts over those seconds (another tenant on
 * the sibling hyperthread, the memory bus, the clock), so the fastest
 * search-time figure is partly the luckiest moment, and the schedule behind
 * it need not be the fastest one. A confirmation builds the top k distinct
 * traces (and the previous confirmed best), times them in interleaved
 * rounds, each round visiting every candidate once in a rotating order so
 * that a drift hits all of them alike, and ranks them by their times
 * relative to each round's median candidate (ts_confirm_rank), so a host
 * that is slow for a minute slows the round's reference as well. Each
 * one's figure and spread are stored; the database then ranks the
 * confirmed records first (db.h).
 * Vendor libraries (peers) take their turns in the same rounds, so the
 * ratio stored beside each vendor's level compares figures from the same
 * seconds.
 */
#include "tuner/tuner.h"

#include <cjson/cJSON.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ts_confirm_options ts_confirm_defaults(void) {
  return (ts_confirm_options){.top_k = 6,
                              .rounds = 7,
                              .min_repeat_ms = 20,
                              .threads = 0,
                              .seed = 1,
                              .settle_ms = 30};
}

/* One candidate: its record and its kernel, built and loaded here. */
typedef struct conf_cand {
  ts_db_record rec;
  ts_build_result build;
  ts_rt_kernel *kernel;
  ts_rt_args *args;
  double *secs; /* rounds */
  bool ok;
} conf_cand;

static void cand_free(conf_cand *c) {
  ts_rt_args_free(c->args);
  ts_rt_kernel_unload(c->kernel);
  ts_build_result_clear(&c->build);
  ts_db_record_clear(&c->rec);
  free(c->secs);
}

/* Replays the record's trace on f, builds and loads it, and gives it seeded
 * arguments. */
static int cand_make(conf_cand *c, const ts_func *f, const ts_target *t,
                     uint64_t seed, uint64_t consts, ts_error *err) {
  ts_trace *full = NULL;
  ts_sched *s = NULL;
  int rc = ts_record_traces(c->rec.trace_json, &full, NULL, err);
  if (!rc) rc = ts_trace_apply(full, f, seed, &s, err);
  if (!rc)
    rc = ts_build_measured(ts_sched_func(s), consts, t, NULL, &c->build, err);
  ts_sched_destroy(s);
  ts_trace_free(full);
  if (rc) return rc;
  const ts_artifact *a = c->build.artifact;
  if ((rc = ts_rt_kernel_load(a->bytes, a->n_bytes, a->entry, &c->kernel, err)))
    return rc;
  ts_rt_arg_spec *specs = ts_artifact_arg_specs(a);
  if (!specs) return TS_ERR(err, TS_ENOMEM, "confirm: out of memory");
  rc = ts_rt_args_create(specs, a->n_args, seed, &c->args, err);
  free(specs);
  if (!rc)
    rc = ts_rt_kernel_prepare(c->kernel, ts_rt_args_data(c->args), NULL, err);
  return rc;
}

/* The constant parameters the jobs that tuned f gave it (their stored
 * tasks' "const_params", as `tune --model` sets them), so that a later
 * confirmation builds its candidates as the search measured them; 0 when
 * no job says. */
static uint64_t jobs_const_params(ts_db *db, const ts_func *f) {
  ts_db_job *jobs = NULL;
  int n = 0;
  if (ts_db_jobs(db, &jobs, &n)) return 0;
  char hex[33];
  ts_hash128_hex(ts_func_hash(f), hex);
  uint64_t mask = 0;
  for (int i = n - 1; i >= 0 && !mask; i--) {
    cJSON *cfg = cJSON_Parse(jobs[i].config_json ? jobs[i].config_json : "{}");
    const cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(cfg, "tasks")) {
      const cJSON *h = cJSON_GetObjectItemCaseSensitive(t, "hash");
      const cJSON *c = cJSON_GetObjectItemCaseSensitive(t, "const_params");
      if (cJSON_IsString(h) && cJSON_IsString(c) &&
          !strcmp(h->valuestring, hex))
        mask = (uint64_t)strtoull(c->valuestring, NULL, 16);
    }
    cJSON_Delete(cfg);
  }
  ts_db_jobs_free(jobs, n);
  return mask;
}

/* A cold timing (ts_confirm_options.cold): ts_rt_eval_cold. */
static int time_cold(conf_cand *c, uint64_t mask, ts_runtime *rt,
                     double *seconds, ts_error *err) {
  return ts_rt_eval_cold(rt, c->kernel, c->args, mask, seconds, err);
}

/* The records to measure again: the top k distinct traces by search-time
 * median, the previous confirmed best when it is not among them (so a
 * new confirmation compares with the old winner in the same rounds), and
 * the first ok record of the workload on the target. A job measures the
 * default schedule first (what `tessera compile` builds with no record);
 * measured beside the others, a search-time figure taken in a slow minute
 * of a shared machine cannot leave the best slower than no tuning (a
 * strided 3x3 conv's 200-trial search kept a schedule at 0.69 x oneDNN
 * whose default ran 1.28-1.32 x: the default had measured 9 % slower in
 * the search). */
static int pick(ts_db *db, int64_t workload_id, const char *target, int k,
                conf_cand **out, int *n, ts_error *err) {
  ts_db_record *top = NULL;
  int n_top = 0;
  if (ts_db_top_k_search(db, workload_id, target, k, &top, &n_top))
    return TS_ERR(err, ts_db_error(db)->code, "%s", ts_db_errmsg(db));
  if (n_top == 0)
    return TS_ERR(err, TS_ENOTFOUND,
                  "confirm: workload %lld has no ok record on target '%s'",
                  (long long)workload_id, target);
  conf_cand *c = calloc((size_t)n_top + 2, sizeof *c);
  if (!c) {
    ts_db_records_free(top, n_top);
    return TS_ERR(err, TS_ENOMEM, "confirm: out of memory");
  }
  for (int i = 0; i < n_top; i++) c[i].rec = top[i];
  free(top); /* the records now belong to c */
  int m = n_top;
  ts_db_record best;
  if (ts_db_best(db, workload_id, target, &best) == TS_OK) {
    bool have = best.confirmed_rounds == 0;
    for (int i = 0; i < m && !have; i++)
      have = !strcmp(c[i].rec.trace_json, best.trace_json);
    if (have)
      ts_db_record_clear(&best);
    else
      c[m++].rec = best;
  }
  ts_db_record *all = NULL;
  int n_all = 0;
  if (ts_db_records_of(db, workload_id, target, &all, &n_all) == TS_OK) {
    int first = -1;
    for (int i = 0; i < n_all && first < 0; i++)
      if (all[i].status == TS_DB_STATUS_OK) first = i;
    bool have = first < 0;
    for (int i = 0; i < m && !have; i++)
      have = !strcmp(c[i].rec.trace_json, all[first].trace_json);
    if (!have) {
      c[m++].rec = all[first];
      memset(&all[first], 0, sizeof all[first]);
    }
    ts_db_records_free(all, n_all);
  }
  *out = c;
  *n = m;
  return TS_OK;
}

int ts_confirm_rank(const double *secs, int n, int rounds, double *latency,
                    double *spread) {
  if (n < 1 || rounds < 1) return TS_EINVAL;
  double *ref = calloc((size_t)rounds, sizeof *ref);
  double *col = calloc((size_t)(n > rounds ? n : rounds), sizeof *col);
  if (!ref || !col) {
    free(ref);
    free(col);
    return TS_ENOMEM;
  }
  /* each round's reference: the median candidate of that round */
  for (int r = 0; r < rounds; r++) {
    for (int i = 0; i < n; i++) col[i] = secs[(size_t)i * rounds + r];
    ref[r] = ts_median(col, n);
  }
  for (int i = 0; i < n; i++) {
    for (int r = 0; r < rounds; r++)
      col[r] = secs[(size_t)i * rounds + r] / ref[r];
    double rel = ts_median(col, rounds), lo = col[0], hi = col[0];
    for (int r = 1; r < rounds; r++) {
      lo = col[r] < lo ? col[r] : lo;
      hi = col[r] > hi ? col[r] : hi;
    }
    spread[i] = (hi - lo) / rel;
    latency[i] = rel;
  }
  double level = ts_median(ref, rounds);
  for (int i = 0; i < n; i++) latency[i] *= level;
  free(ref);
  free(col);
  return TS_OK;
}

int ts_confirm(ts_db *db, int64_t workload_id, const char *target,
               const ts_confirm_options *opts, ts_confirm_result *result,
               ts_error *err) {
  ts_confirm_options o = opts ? *opts : ts_confirm_defaults();
  memset(result, 0, sizeof *result);
  if (!db || !target) return TS_ERR(err, TS_EINVAL, "confirm: no database");
  if (o.top_k < 1 || o.top_k > 64 || o.rounds < 1 || o.rounds > 1000 ||
      o.min_repeat_ms < 0 || o.min_repeat_ms > 60000 || o.threads < 0 ||
      o.threads > TS_RT_MAX_THREADS || o.n_peers < 0 || o.settle_ms < 0 ||
      o.settle_ms > 10000 || o.n_peers > TS_CONFIRM_MAX_PEERS ||
      (o.n_peers && !o.peers))
    return TS_ERR(err, TS_EINVAL,
                  "confirm: bad options (top_k %d in 1..64, rounds %d in "
                  "1..1000, min_repeat_ms %d in 0..60000, threads %d, "
                  "%d peers in 0..%d, settle_ms %d in 0..10000)",
                  o.top_k, o.rounds, o.min_repeat_ms, o.threads, o.n_peers,
                  TS_CONFIRM_MAX_PEERS, o.settle_ms);
  ts_target *t = NULL;
  int rc = ts_target_parse(target, &t, err);
  if (rc) return rc;
  /* confirmation measures on this machine's CPU */
  if ((rc = ts_target_check_runs_here(t, "confirm", err))) {
    ts_target_free(t);
    return rc;
  }
  if (ts_target_has_feature(t, "amx-tile") && (rc = ts_rt_enable_amx(err))) {
    ts_target_free(t);
    return rc;
  }
  ts_func *f = NULL;
  conf_cand *c = NULL;
  int n = 0;
  ts_runtime *rt = NULL;
  if (ts_db_workload_func(db, workload_id, &f)) {
    rc = TS_ERR(err, ts_db_error(db)->code, "%s", ts_db_errmsg(db));
    goto done;
  }
  if ((rc = pick(db, workload_id, target, o.top_k, &c, &n, err))) goto done;
  if (!o.const_params) o.const_params = jobs_const_params(db, f);
  int threads = o.threads > 0 ? o.threads : ts_target_num_cores(t);
  if ((rc = ts_runtime_create(threads, &rt, err))) goto done;
  int built = 0;
  ts_error first;
  ts_error_clear(&first);
  for (int i = 0; i < n; i++) {
    ts_error e;
    ts_error_clear(&e);
    c[i].secs = calloc((size_t)o.rounds, sizeof *c[i].secs);
    c[i].ok = c[i].secs && !cand_make(&c[i], f, t, o.seed, o.const_params, &e);
    if (c[i].ok &&
        ts_rt_kernel_call(c[i].kernel, ts_rt_args_data(c[i].args), rt, &e))
      c[i].ok = false;
    if (c[i].ok)
      built++;
    else if (!first.code)
      first = e;
  }
  if (!built) {
    rc = TS_ERR(err, first.code ? first.code : TS_EINVAL,
                "confirm: no candidate of workload %lld could be built and "
                "run: %s",
                (long long)workload_id, first.msg);
    goto done;
  }
  /* the rounds: each visits every candidate and peer once, the order
   * rotated and reversed every other round */
  ts_eval_config one = {
      .number = 1, .repeat = 1, .min_repeat_ms = o.min_repeat_ms, .warmup = 1};
  int np = o.n_peers, slots = n + np;
  double *peer_secs =
      calloc((size_t)(np ? np : 1) * (size_t)o.rounds, sizeof *peer_secs);
  bool peer_ok[TS_CONFIRM_MAX_PEERS];
  for (int p = 0; p < np; p++) {
    peer_ok[p] = true;
    if (o.peers[p].threads < 1) {
      peer_ok[p] = false;
      snprintf(result->peers[p].why, sizeof result->peers[p].why,
               "no thread count");
    } else if (o.cold && !o.peers[p].time_cold) {
      peer_ok[p] = false;
      snprintf(result->peers[p].why, sizeof result->peers[p].why,
               "cannot be timed cold");
    }
  }
  for (int r = 0; peer_secs && r < o.rounds; r++) {
    for (int j = 0; j < slots; j++) {
      int i = (r % 2 ? slots - 1 - j : j);
      i = (i + r) % slots;
      double s = 0;
      ts_error e;
      ts_error_clear(&e);
      if (i >= n) {
        int p = i - n;
        if (!peer_ok[p]) continue;
        int prc =
            o.cold ? o.peers[p].time_cold(o.peers[p].ctx, &s, &e)
                   : o.peers[p].time(o.peers[p].ctx, o.min_repeat_ms, &s, &e);
        ts_sleep_ms(o.settle_ms);
        if (prc || !(s > 0)) {
          peer_ok[p] = false;
          snprintf(result->peers[p].why, sizeof result->peers[p].why, "%.150s",
                   e.code ? e.msg : "no time measured");
        } else {
          peer_secs[(size_t)p * (size_t)o.rounds + (size_t)r] = s;
        }
        continue;
      }
      if (!c[i].ok) continue;
      if ((o.cold
               ? time_cold(&c[i], o.cold_params, rt, &s, &e)
               : ts_rt_eval_kernel(rt, &one, c[i].kernel,
                                   ts_rt_args_data(c[i].args), &s, NULL, &e)) ||
          !(s > 0))
        c[i].ok = false;
      else
        c[i].secs[r] = s;
    }
  }
  int64_t *ids = calloc((size_t)n, sizeof *ids);
  double *med = calloc((size_t)n, sizeof *med);
  double *spread = calloc((size_t)n, sizeof *spread);
  double *sorted = calloc((size_t)o.rounds, sizeof *sorted);
  double *table = calloc((size_t)n * (size_t)o.rounds, sizeof *table);
  int m = 0, best_i = -1;
  int *row_of = calloc((size_t)n, sizeof *row_of);
  result->rounds = o.rounds;
  result->best_s = INFINITY;
  result->search_best_s = INFINITY;
  for (int i = 0; ids && table && row_of && i < n; i++) {
    if (!c[i].ok) continue;
    memcpy(table + (size_t)m * (size_t)o.rounds, c[i].secs,
           sizeof *table * (size_t)o.rounds);
    ids[m] = c[i].rec.id;
    row_of[m++] = i;
  }
  if (!med || !spread || !sorted || !table || !row_of ||
      (m > 0 && ts_confirm_rank(table, m, o.rounds, med, spread)))
    m = 0, rc = TS_ERR(err, TS_ENOMEM, "confirm: out of memory");
  for (int j = 0; j < m; j++) {
    int i = row_of[j];
    if (med[j] < result->best_s) {
      result->best_s = med[j];
      result->best_spread = spread[j];
      result->best_record = ids[j];
      best_i = i;
      memcpy(sorted, c[i].secs, sizeof *sorted * (size_t)o.rounds);
      qsort(sorted, (size_t)o.rounds, sizeof *sorted, ts_cmp_double);
      result->best_median_s = sorted[o.rounds / 2];
    }
    if (c[i].rec.median_s < result->search_best_s) {
      result->search_best_s = c[i].rec.median_s;
      result->search_best_record = ids[j];
      result->search_best_confirmed_s = med[j];
    }
  }
  result->n = m;
  if (rc)
    ;
  else if (!ids || !med || !spread || !sorted || !peer_secs || !table ||
           !row_of)
    rc = TS_ERR(err, TS_ENOMEM, "confirm: out of memory");
  else if (!m)
    rc = TS_ERR(err, TS_ERANGE,
                "confirm: every candidate of workload %lld failed while "
                "timed",
                (long long)workload_id);
  else if (ts_db_confirm(db, workload_id, target, ids, med, spread, m,
                         o.rounds))
    rc = TS_ERR(err, ts_db_error(db)->code, "%s", ts_db_errmsg(db));
  /* the peers against the confirmed best, round by round */
  double flops = f ? ts_func_flops(f) : 0;
  for (int p = 0; !rc && p < np; p++) {
    ts_confirm_peer_result *pr = &result->peers[p];
    if (!peer_ok[p]) continue;
    double *ps = peer_secs + (size_t)p * (size_t)o.rounds;
    memcpy(sorted, ps, sizeof *sorted * (size_t)o.rounds);
    qsort(sorted, (size_t)o.rounds, sizeof *sorted, ts_cmp_double);
    pr->seconds = sorted[o.rounds / 2];
    for (int r = 0; r < o.rounds; r++) sorted[r] = ps[r] / c[best_i].secs[r];
    qsort(sorted, (size_t)o.rounds, sizeof *sorted, ts_cmp_double);
    pr->ratio = sorted[o.rounds / 2];
    pr->ok = true;
    if (flops > 0 &&
        ts_db_baseline_put_side(db, workload_id, target, o.peers[p].name,
                                o.peers[p].threads, flops / pr->seconds * 1e-9,
                                pr->ratio, o.rounds))
      snprintf(pr->why, sizeof pr->why, "not stored: %.140s", ts_db_errmsg(db));
  }
  free(ids);
  free(table);
  free(row_of);
  free(med);
  free(spread);
  free(sorted);
  free(peer_secs);
done:
  for (int i = 0; c && i < n; i++) cand_free(&c[i]);
  free(c);
  ts_runtime_destroy(rt);
  ts_func_free(f);
  ts_target_free(t);
  return rc;
}
