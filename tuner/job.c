/*
 * job.c — tuning jobs: the loop that turns design spaces into measured,
 * committed records. Per round, the task scheduler picks a task; its
 * search strategy picks a batch of new candidates; the batch is built in
 * parallel on every core (LLVM, one context per thread) and only then
 * measured through the runner, one candidate at a time (the embedded pool
 * measures serially in a forked process while nothing else runs: builds
 * never share a core with a timing); the results are committed to the
 * database in one transaction under the job, the cost model learns from
 * them, and the progress output is reprinted.
 *
 * Resuming: the job's state is the database. A job of the same name reads
 * its budget and trial count back; each task's stored records (of every
 * job, on this target) are replayed once: their structural hashes join the
 * measured set, the ok ones seed the population, and the cost model trains
 * on all of them. A stop request (SIGINT/SIGTERM through opts->stop) lets
 * the batch in flight finish and commit, then marks the job interrupted.
 */
#include "tuner/internal.h"
#include "tir/alloc.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

ts_tune_options ts_tune_defaults(void) {
  ts_tune_options o;
  memset(&o, 0, sizeof o);
  o.target = "llvm";
  o.trials = 64;
  o.seed = 1;
  o.strategy = TS_STRATEGY_EVOLUTIONARY;
  o.cost_model = "xgb";
  o.policy = TS_TASK_GRADIENT;
  o.search = ts_search_defaults();
  o.space = ts_space_defaults();
  o.measure = ts_measure_config_default();
  /* the output check runs the kernel once just before timing: it is the
   * warm-up; one run per repeat unless the kernel is under 10 ms */
  o.measure.eval.number = 1;
  o.measure.eval.repeat = 3;
  o.measure.eval.min_repeat_ms = 10;
  o.measure.eval.warmup = 0;
  o.measure.timeout_ms = 0;
  o.build_timeout_ms = 60000;
  o.measure.threads = 0;
  o.output.out = stdout;
  return o;
}

void ts_tune_result_clear(ts_tune_result *r) {
  if (!r) return;
  for (int i = 0; i < r->n_tasks; i++) free(r->tasks[i].best_trace_json);
  free(r->tasks);
  memset(r, 0, sizeof *r);
}

int ts_tune_result_refresh_best(ts_db *db, const char *target,
                                ts_tune_result *r, int i) {
  if (i < 0 || i >= r->n_tasks) return TS_EINVAL;
  ts_tune_task_result *tr = &r->tasks[i];
  ts_db_record best;
  int rc = ts_db_best(db, tr->workload_id, target, &best);
  if (rc) return rc;
  char *trace = strdup(best.trace_json);
  if (!trace) {
    ts_db_record_clear(&best);
    return TS_ENOMEM;
  }
  free(tr->best_trace_json);
  tr->best_trace_json = trace;
  tr->best_seconds = ts_db_record_seconds(&best);
  tr->trial_of_best = best.job_id == r->job_id ? best.trial : -1;
  ts_db_record_clear(&best);
  return TS_OK;
}

/* ========================================================================
 * Job state
 * ======================================================================== */

/* picks again after pruning, at most, in a round */
#define PRUNE_REFILLS 3
/* rounds in a row whose every pick was pruned before a task is done */
#define PRUNE_STOP_ROUNDS 8

typedef struct job_task {
  const ts_tune_task *spec;
  int64_t workload_id;
  char hash[33];
  char ref_id[40];
  double flops;
  ts_design_space *spaces;
  int n_spaces;
  ts_cost_model *model;
  search_task search;
  ts_task_state sched;
  int empty_rounds;
  int pruned_rounds;    /* rounds in a row whose picks were all pruned */
  int64_t pruned;       /* candidates not measured (prune_heavy) */
  double best_work;     /* cand_float_work of the fastest measured */
  bool default_offered; /* the default schedule was considered */
  bool ref_set;         /* the reference is with the runner */
  /* results */
  double best_s;
  int64_t trial_of_best;
  int64_t trials_now;
  int64_t by_status[TS_DB_N_STATUS];
  char *best_json;
} job_task;

typedef struct job {
  ts_db *db;
  ts_runner *runner;
  const ts_tune_options *o;
  ts_target *target;
  char *target_str; /* canonical */
  int64_t job_id;
  char job_name[128];
  int64_t budget, done_before, done;
  job_task *tasks;
  int n_tasks;
  const strategy_ops *strategy;
  double start;
  double build_s, measure_s, search_s;
  int64_t trials_now;
  int64_t by_status[TS_DB_N_STATUS];
  int64_t pruned; /* candidates not measured (prune_heavy) */
  int round;
  int last_lines; /* lines of the last status printed (tty redraw) */
  ts_error *err;
} job;

static int db_fail(job *j, const char *what) {
  const ts_error *e = ts_db_error(j->db);
  return TS_ERR(j->err, e->code ? e->code : TS_EIO, "%s: %s", what,
                ts_db_errmsg(j->db));
}

/* ========================================================================
 * Output
 * ======================================================================== */

static void fmt_duration(double s, char *buf, size_t cap) {
  if (!isfinite(s) || s < 0) {
    snprintf(buf, cap, "--:--");
    return;
  }
  long t = (long)(s + 0.5);
  if (t >= 3600)
    snprintf(buf, cap, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  else
    snprintf(buf, cap, "%ld:%02ld", t / 60, t % 60);
}

/* The task table; returns the lines printed. */
static int print_table(const job *j) {
  FILE *f = j->o->output.out;
  fprintf(f, "\n%3s  %-34s %10s %6s %9s %12s %13s %7s %5s\n", "ID", "Name",
          "FLOP", "Weight", "GFLOP/s", "Latency(us)", "W.Latency(us)", "Trials",
          "Done");
  double total = 0;
  for (int i = 0; i < j->n_tasks; i++) {
    const job_task *t = &j->tasks[i];
    bool have = isfinite(t->best_s);
    char gf[32] = "-", lat[32] = "-", wl[32] = "-";
    if (have) {
      snprintf(gf, sizeof gf, "%.2f", t->flops / t->best_s * 1e-9);
      snprintf(lat, sizeof lat, "%.1f", t->best_s * 1e6);
      snprintf(wl, sizeof wl, "%.1f", t->best_s * 1e6 * t->spec->weight);
      total += t->best_s * t->spec->weight;
    }
    char name[35];
    snprintf(name, sizeof name, "%s", t->spec->name);
    fprintf(f, "%3d  %-34s %10.4g %6g %9s %12s %13s %7lld %5s\n", i, name,
            t->flops, t->spec->weight, gf, lat, wl, (long long)t->sched.trials,
            t->sched.done ? "Y" : "");
  }
  if (j->n_tasks > 1)
    fprintf(f, "total weighted latency: %.1f us\n", total * 1e6);
  return 2 + j->n_tasks + (j->n_tasks > 1);
}

/* The progress bar and the failures; returns the lines printed. */
static int print_progress(const job *j) {
  FILE *f = j->o->output.out;
  double el = ts_now_seconds() - j->start;
  int width = 30;
  double frac = j->budget > 0 ? (double)j->done / (double)j->budget : 1;
  if (frac > 1) frac = 1;
  char bar[64];
  int fill = (int)(frac * width + 0.5);
  for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
  bar[width] = 0;
  double rate = el > 0 ? (double)j->trials_now / el : 0;
  double eta = rate > 0 ? (double)(j->budget - j->done) / rate : NAN;
  char es[32], ts[32];
  fmt_duration(el, es, sizeof es);
  fmt_duration(eta, ts, sizeof ts);
  fprintf(f,
          "[%s] %lld/%lld trials  elapsed %s  eta %s  %.0f trials/min\n"
          "failures: build_error %lld  run_error %lld  timeout %lld  "
          "wrong_result %lld",
          bar, (long long)j->done, (long long)j->budget, es, ts, rate * 60,
          (long long)j->by_status[TS_DB_STATUS_BUILD_ERROR],
          (long long)j->by_status[TS_DB_STATUS_RUN_ERROR],
          (long long)j->by_status[TS_DB_STATUS_TIMEOUT],
          (long long)j->by_status[TS_DB_STATUS_WRONG_RESULT]);
  if (j->by_status[TS_DB_STATUS_WORKER_LOST])
    fprintf(f, "  worker_lost %lld",
            (long long)j->by_status[TS_DB_STATUS_WORKER_LOST]);
  if (j->pruned)
    fprintf(f, "  (not measured: %lld, %gx the work of the fastest)",
            (long long)j->pruned, TS_PRUNE_WORK_RATIO);
  fprintf(f, "\n");
  return 2;
}

/* The task table and progress after a round; on a terminal the previous
 * ones are redrawn in place. */
static void print_status(job *j) {
  FILE *f = j->o->output.out;
  if (!f) return;
  if (j->o->output.tty && j->last_lines > 0)
    fprintf(f, "\033[%dA\033[J", j->last_lines);
  j->last_lines = print_table(j) + print_progress(j);
  fflush(f);
}

static void log_line(const job *j, const job_task *t, int task, int64_t trial,
                     const ts_measure_result *r, double median, ts_hash128 h) {
  FILE *f = j->o->output.log;
  if (!f) return;
  char hex[33];
  ts_hash128_hex(h, hex);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "job", j->job_name);
  cJSON_AddNumberToObject(o, "trial", (double)trial);
  cJSON_AddNumberToObject(o, "round", j->round);
  cJSON_AddNumberToObject(o, "task", task);
  cJSON_AddStringToObject(o, "workload", t->spec->name);
  cJSON_AddStringToObject(o, "workload_hash", t->hash);
  cJSON_AddStringToObject(o, "candidate_hash", hex);
  cJSON_AddStringToObject(o, "status", ts_measure_status_name(r->status));
  if (r->status == TS_MEASURE_OK) {
    cJSON_AddNumberToObject(o, "seconds", median);
    cJSON_AddNumberToObject(o, "gflops", t->flops / median * 1e-9);
  } else {
    cJSON_AddNullToObject(o, "seconds");
    cJSON_AddNullToObject(o, "gflops");
  }
  cJSON_AddNumberToObject(o, "best_seconds",
                          isfinite(t->best_s) ? t->best_s : 0);
  cJSON_AddNumberToObject(o, "run_ms", r->run_ms);
  cJSON_AddStringToObject(o, "worker", r->worker);
  cJSON_AddStringToObject(o, "error", r->error);
  cJSON_AddNumberToObject(o, "elapsed_s", ts_now_seconds() - j->start);
  char *line = cJSON_PrintUnformatted(o);
  if (line) {
    fprintf(f, "%s\n", line);
    free(line);
  }
  cJSON_Delete(o);
  fflush(f);
}

/* ========================================================================
 * Setup
 * ======================================================================== */

static char *job_config_json(const job *j, const ts_tune_task *tasks, int n) {
  unsigned long failures = ts_alloc_failures();
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "target", j->target_str);
  cJSON *arr = cJSON_AddArrayToObject(o, "tasks");
  for (int i = 0; i < n; i++) {
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "name", tasks[i].name);
    if (tasks[i].spec) cJSON_AddStringToObject(t, "workload", tasks[i].spec);
    char hex[33];
    ts_hash128_hex(ts_func_hash(tasks[i].func), hex);
    cJSON_AddStringToObject(t, "hash", hex);
    cJSON_AddNumberToObject(t, "weight", tasks[i].weight);
    if (tasks[i].const_params) {
      char mask[24];
      snprintf(mask, sizeof mask, "%llx",
               (unsigned long long)tasks[i].const_params);
      cJSON_AddStringToObject(t, "const_params", mask);
    }
    ts_json_add(arr, NULL, t);
  }
  cJSON_AddStringToObject(o, "strategy", ts_strategy_name(j->o->strategy));
  cJSON_AddStringToObject(o, "cost_model", j->o->cost_model);
  cJSON_AddStringToObject(o, "policy", ts_task_policy_name(j->o->policy));
  cJSON_AddNumberToObject(o, "seed", (double)j->o->seed);
  cJSON_AddNumberToObject(o, "trials_per_task", (double)j->o->trials_per_task);
  /* the settings a resume keeps unless given again */
  cJSON_AddNumberToObject(o, "batch", j->o->search.batch);
  cJSON_AddNumberToObject(o, "population", j->o->search.population);
  cJSON_AddNumberToObject(o, "timeout_ms", j->o->measure.timeout_ms);
  cJSON_AddNumberToObject(o, "build_timeout_ms", j->o->build_timeout_ms);
  cJSON_AddBoolToObject(o, "tensorize", j->o->space.tensorize);
  /* --rule: each block's trace itself, so a resume applies the same rule
   * whatever happened to the file since */
  if (j->o->space.n_custom_rules > 0) {
    cJSON *rules = cJSON_AddArrayToObject(o, "rules");
    for (int i = 0; i < j->o->space.n_custom_rules; i++) {
      const ts_custom_rule *r = &j->o->space.custom_rules[i];
      char *text = ts_trace_to_json(r->trace);
      cJSON *rule = cJSON_CreateObject();
      cJSON_AddStringToObject(rule, "block", r->block);
      cJSON *trace = text ? cJSON_Parse(text) : NULL;
      free(text);
      ts_json_add(rule, "trace", trace ? trace : cJSON_CreateNull());
      ts_json_add(rules, NULL, rule);
    }
  }
  char *s = ts_json_print(o, failures, false); /* NULL: a field was lost */
  cJSON_Delete(o);
  return s;
}

/* Refuses to resume a job with other workloads or another target. */
static int check_same_job(job *j, const ts_db_job *row,
                          const ts_tune_task *tasks, int n) {
  cJSON *cfg = cJSON_Parse(row->config_json ? row->config_json : "{}");
  const cJSON *target = cJSON_GetObjectItemCaseSensitive(cfg, "target");
  const cJSON *arr = cJSON_GetObjectItemCaseSensitive(cfg, "tasks");
  int rc = TS_OK;
  if (cJSON_IsString(target) && strcmp(target->valuestring, j->target_str))
    rc = TS_ERR(j->err, TS_EINVAL,
                "job '%s' tunes for target '%s', not '%s': use another --job "
                "name",
                j->job_name, target->valuestring, j->target_str);
  else if (cJSON_IsArray(arr) && cJSON_GetArraySize(arr) != n)
    rc = TS_ERR(j->err, TS_EINVAL,
                "job '%s' has %d workloads, %d given: use another --job name",
                j->job_name, cJSON_GetArraySize(arr), n);
  for (int i = 0; !rc && cJSON_IsArray(arr) && i < n; i++) {
    char hex[33];
    ts_hash128_hex(ts_func_hash(tasks[i].func), hex);
    const cJSON *h =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(arr, i), "hash");
    if (cJSON_IsString(h) && strcmp(h->valuestring, hex))
      rc = TS_ERR(j->err, TS_EINVAL,
                  "job '%s': workload %d is not the one the job was started "
                  "with (%s): use another --job name",
                  j->job_name, i, tasks[i].name);
  }
  cJSON_Delete(cfg);
  return rc;
}

static int open_job(job *j, const ts_tune_task *tasks, int n, bool *resumed) {
  *resumed = false;
  if (j->o->job_name) {
    snprintf(j->job_name, sizeof j->job_name, "%s", j->o->job_name);
  } else {
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    snprintf(j->job_name, sizeof j->job_name, "tune-%s-%d", stamp,
             (int)getpid());
  }
  ts_db_job job_row;
  memset(&job_row, 0, sizeof job_row);
  int rc = ts_db_job_get(j->db, j->job_name, &job_row);
  if (rc == TS_OK) {
    /* the same workloads on the same target, or the trial counts mean
     * nothing */
    rc = check_same_job(j, &job_row, tasks, n);
    ts_db_job_clear(&job_row);
    if (rc) return rc;
    rc = ts_db_job_resume(j->db, j->job_name, &job_row);
  }
  if (rc == TS_OK) {
    *resumed = true;
    j->job_id = job_row.id;
    j->done_before = job_row.trials_done;
    if (job_row.trials_budget != j->o->trials &&
        ts_db_job_set_budget(j->db, j->job_id, j->o->trials))
      rc = db_fail(j, "cannot change the job's budget");
    ts_db_job_clear(&job_row);
    return rc;
  }
  if (rc != TS_ENOTFOUND) return db_fail(j, "cannot read the job");
  char *cfg = job_config_json(j, tasks, n);
  if (!cfg)
    return TS_ERR(j->err, TS_ENOMEM, "the job's settings: out of memory");
  rc = ts_db_job_create(j->db, j->job_name, cfg, j->o->trials, &j->job_id);
  free(cfg);
  if (rc) return db_fail(j, "cannot create the job");
  j->done_before = 0;
  return TS_OK;
}

/* Replays stored records of a task: hashes, ranking, model data. */
typedef struct resume_job {
  const job *j;
  job_task *t;
  ts_db_record *recs;
  ts_trace **designs;
  ts_hash128 *hashes;
  ts_cm_features *feats;
  bool *ok;
} resume_job;

static void resume_one(void *ctx, int i, int worker) {
  (void)worker;
  resume_job *r = ctx;
  ts_trace *full = NULL;
  ts_sched *s = NULL;
  if (ts_record_traces(r->recs[i].trace_json, &full, &r->designs[i], NULL) ||
      ts_trace_apply(full, r->t->spec->func, 1, &s, NULL)) {
    ts_trace_free(full);
    return;
  }
  r->hashes[i] = ts_func_hash(ts_sched_func(s));
  r->ok[i] = true;
  if (r->t->model &&
      ts_cm_extract(ts_sched_func(s), r->j->target, &r->feats[i], NULL))
    ts_cm_features_clear(&r->feats[i]);
  ts_sched_destroy(s);
  ts_trace_free(full);
}

/* The float work (features_float_work) of stored record `rec`, whose
 * features `have` may be empty (a task without a cost model): a resumed
 * job's fastest, so that prune_heavy works from its first batch on and not
 * only once the job measures a new best. 0 when the trace no longer
 * replays or its features fail (nothing is pruned then). */
static double stored_work(const job *j, const job_task *t,
                          const ts_db_record *rec, const ts_cm_features *have) {
  if (have->values) return features_float_work(have);
  ts_trace *full = NULL;
  ts_sched *s = NULL;
  double w = 0;
  if (!ts_record_traces(rec->trace_json, &full, NULL, NULL) &&
      !ts_trace_apply(full, t->spec->func, 1, &s, NULL)) {
    ts_cm_features f = {0};
    if (!ts_cm_extract(ts_sched_func(s), j->target, &f, NULL))
      w = features_float_work(&f);
    ts_cm_features_clear(&f);
  }
  ts_sched_destroy(s);
  ts_trace_free(full);
  return w;
}

static int load_task_records(job *j, job_task *t, int threads) {
  ts_db_record *recs = NULL;
  int n = 0;
  if (ts_db_records_of(j->db, t->workload_id, j->target_str, &recs, &n))
    return db_fail(j, "cannot read the stored records");
  if (n == 0) return TS_OK;
  resume_job r = {j,
                  t,
                  recs,
                  calloc((size_t)n, sizeof(ts_trace *)),
                  calloc((size_t)n, sizeof(ts_hash128)),
                  calloc((size_t)n, sizeof(ts_cm_features)),
                  calloc((size_t)n, sizeof(bool))};
  tuner_parallel(threads, n, resume_one, &r);
  ts_cm_candidate *cc = calloc((size_t)n, sizeof *cc);
  ts_cm_result *cr = calloc((size_t)n, sizeof *cr);
  int m = 0, best = -1;
  for (int i = 0; i < n; i++) {
    const ts_db_record *rec = &recs[i];
    bool ok = rec->status == TS_DB_STATUS_OK && isfinite(rec->median_s) &&
              rec->median_s > 0;
    if (rec->job_id == j->job_id) {
      t->sched.trials++;
      t->by_status[rec->status]++;
      j->by_status[rec->status]++;
      if (ok && rec->median_s < t->best_s) {
        t->best_s = rec->median_s;
        t->trial_of_best = rec->trial;
        best = i;
      }
    }
    if (!r.ok[i]) continue; /* a trace this build no longer replays */
    search_task_add_measured(&t->search, r.designs[i], r.hashes[i], ok,
                             rec->median_s);
    if (t->model && r.feats[i].values &&
        rec->status != TS_DB_STATUS_WORKER_LOST) {
      cc[m].features = &r.feats[i];
      cc[m].group = t->workload_id;
      cr[m].ok = ok;
      cr[m].seconds = ok ? rec->median_s : 0;
      m++;
    }
  }
  if (best >= 0 && r.ok[best])
    t->best_work = stored_work(j, t, &recs[best], &r.feats[best]);
  int rc = TS_OK;
  if (m && t->model && ts_cm_update(t->model, cc, cr, m, j->err))
    rc = j->err ? j->err->code : TS_EINVAL;
  for (int i = 0; i < n; i++) {
    ts_trace_free(r.designs[i]);
    ts_cm_features_clear(&r.feats[i]);
  }
  free(r.designs);
  free(r.hashes);
  free(r.feats);
  free(r.ok);
  free(cc);
  free(cr);
  ts_db_records_free(recs, n);
  return rc;
}

static int setup_task(job *j, int i, const ts_tune_task *spec,
                      int search_threads) {
  job_task *t = &j->tasks[i];
  t->spec = spec;
  t->best_s = INFINITY;
  t->trial_of_best = -1;
  t->flops = spec->flops > 0 ? spec->flops : ts_func_flops(spec->func);
  ts_hash128_hex(ts_func_hash(spec->func), t->hash);
  snprintf(t->ref_id, sizeof t->ref_id, "w%s", t->hash);
  if (ts_db_commit_workload(j->db, spec->func, spec->name, &t->workload_id))
    return db_fail(j, "cannot store the workload");
  int rc = ts_space_generate(spec->func, j->target, &j->o->space, &t->spaces,
                             &t->n_spaces, j->err);
  if (rc) return rc;
  if (j->o->strategy == TS_STRATEGY_EVOLUTIONARY) {
    if (!strcmp(j->o->cost_model, "random")) {
      rc = ts_cm_random_create(j->o->seed + (uint64_t)i, &t->model, j->err);
    } else {
      ts_cm_xgb_options xo = ts_cm_xgb_defaults();
      xo.target = j->target;
      /* one thread: XGBoost's many short parallel regions slow down by
       * orders of magnitude when another process holds a core */
      xo.nthread = 1;
      xo.seed = j->o->seed + (uint64_t)i;
      rc = ts_cm_xgb_create(&xo, &t->model, j->err);
    }
    if (rc) return rc;
  }
  if (search_task_init(&t->search, spec->func, j->target, t->spaces,
                       t->n_spaces, t->model, t->workload_id, &j->o->search,
                       j->o->seed * 0x9e3779b97f4a7c15ull + (uint64_t)i + 1))
    return TS_ERR(j->err, TS_ENOMEM, "tune: out of memory");
  t->search.threads = search_threads;
  t->sched.weight = spec->weight;
  t->sched.flops = t->flops;
  t->sched.max_trials = j->o->trials_per_task;
  return load_task_records(j, t, search_threads);
}

/* A reference worth a line of output, and the rate its estimate assumes
 * (the unscheduled 2048^3 matmul: 17 GFLOP in about 150 s on one core). */
#define REF_SLOW_FLOPS 2e9
#define REF_FLOPS_PER_S 1e8

/* The reference a task's candidates are checked against: the unscheduled
 * workload, built for the host when this machine cannot run the target's
 * code (the runner checks results on this machine's CPU). Built when the
 * task is first measured, not at the job's start: a conv's unscheduled
 * nest takes LLVM most of a second, and a model's job of a few trials
 * measures only some of its tasks. */
static int ensure_reference(job *j, job_task *t, int ti) {
  if (t->ref_set) return TS_OK;
  ts_target *host = NULL;
  int rc = TS_OK;
  if (ts_target_check_runs_here(j->target, "reference", NULL))
    rc = ts_target_host(&host, j->err);
  ts_build_result br;
  memset(&br, 0, sizeof br);
  if (!rc)
    rc = ts_build(t->spec->func, host ? host : j->target, NULL, &br, j->err);
  ts_target_free(host);
  if (!rc)
    rc = ts_runner_set_reference(j->runner, t->ref_id, br.artifact, j->err);
  ts_build_result_clear(&br);
  if (rc) {
    char msg[sizeof j->err->msg];
    snprintf(msg, sizeof msg, "%s", j->err ? j->err->msg : "");
    return TS_ERR(j->err, rc, "task %d (%s): its reference: %s", ti,
                  t->spec->name, msg);
  }
  t->ref_set = true;
  /* the first batch waits for the unscheduled code (a few hundred MFLOP/s
   * on one core): say so where that is more than a few seconds */
  if (j->o->output.out && t->flops >= REF_SLOW_FLOPS)
    fprintf(j->o->output.out,
            "task %d (%s): its first batch computes the reference outputs "
            "with the unscheduled code (%.1f GFLOP): about %.0f s\n",
            ti, t->spec->name, t->flops / 1e9, t->flops / REF_FLOPS_PER_S);
  return TS_OK;
}

/* ========================================================================
 * One round
 * ======================================================================== */

typedef struct feat_job {
  job *j;
  cand **v;
} feat_job;

/* Features of a built candidate, for the cost model's update. */
static void feat_one(void *ctx, int i, int worker) {
  (void)worker;
  feat_job *b = ctx;
  cand *c = b->v[i];
  if (c->have_feat || c->feat_failed) return;
  if (ts_cm_extract(ts_sched_func(c->c.sched), b->j->target, &c->feat, NULL))
    c->feat_failed = true;
  else
    c->have_feat = true;
}

static ts_db_status db_status(ts_measure_status s) {
  switch (s) {
  case TS_MEASURE_OK: return TS_DB_STATUS_OK;
  case TS_MEASURE_BUILD_ERROR: return TS_DB_STATUS_BUILD_ERROR;
  case TS_MEASURE_RUN_ERROR: return TS_DB_STATUS_RUN_ERROR;
  case TS_MEASURE_TIMEOUT: return TS_DB_STATUS_TIMEOUT;
  case TS_MEASURE_WRONG_RESULT: return TS_DB_STATUS_WRONG_RESULT;
  default: return TS_DB_STATUS_WORKER_LOST;
  }
}

/* The measurement settings of a round: the adaptive timeout follows the
 * task's best latency. */
static ts_measure_config round_config(const job *j, const job_task *t) {
  ts_measure_config c = j->o->measure;
  if (c.threads <= 0) c.threads = ts_target_num_cores(j->target);
  if (c.timeout_ms <= 0) {
    double ms = 10000;
    if (isfinite(t->best_s)) {
      int runs = 2 + c.eval.warmup + c.eval.repeat;
      ms = 1000 + 10 * t->best_s * 1000 * runs;
      if (ms < 2000) ms = 2000;
      if (ms > 10000) ms = 10000;
    }
    c.timeout_ms = (int)ms;
  }
  return c;
}

/* The task's default schedule (what `tessera compile` builds for a task
 * without a record) as a candidate, unless it was measured before (a
 * resumed job) or does not build; NULL then. Measured first, it makes the
 * database's best never slower than compiling without tuning. Not offered
 * in a job with custom rules (run_round). With `stream`, the same schedule
 * with its outputs written past the caches (stream_outputs; NULL when no
 * nest qualifies): for outputs of STREAM_MIN_BYTES or more on a CPU the
 * two are measured side by side, since which is faster depends on the
 * caches of the machine. With `no_prefetch`, the same schedule without the
 * prefetches it has for inputs of PREFETCH_MIN_BYTES or more
 * (prefetch_inputs), measured beside it likewise. */
static cand *default_cand(job *j, job_task *t, bool stream, bool no_prefetch) {
  ts_sched *s = NULL;
  if (ts_default_schedule(t->search.func, j->target, &s, NULL)) return NULL;
  if ((stream && stream_outputs(s) == 0) ||
      (no_prefetch && prefetch_inputs(s, 0) == 0)) {
    ts_sched_destroy(s);
    return NULL;
  }
  cand *c = cand_new();
  ts_trace *d = c ? ts_trace_copy(ts_sched_trace(s)) : NULL;
  if (!d) {
    if (c) cand_unref(c);
    ts_sched_destroy(s);
    return NULL;
  }
  c->c.sched = s;
  c->c.design = d;
  c->c.hash = ts_func_hash(ts_sched_func(s));
  c->c.space = -1;
  c->is_default = true;
  if (search_task_seen(&t->search, c->c.hash)) {
    cand_unref(c);
    return NULL;
  }
  search_task_mark(&t->search, c->c.hash);
  return c;
}

/* Takes the candidates of v[from, n) that do far more arithmetic than the
 * task's fastest (cand_too_heavy) out of the batch, unmeasured and without
 * a record, and gives them to the cost model as failures, so that it
 * learns to avoid them. Returns the new n. */
static int prune_heavy(job *j, job_task *t, cand **v, int from, int n,
                       int threads) {
  if (!(t->best_work > 0) || n <= from) return n;
  cands_features(j->target, threads, v + from, n - from);
  ts_cm_candidate *cc = calloc((size_t)(n - from), sizeof *cc);
  ts_cm_result *cr = calloc((size_t)(n - from), sizeof *cr);
  cand **out = calloc((size_t)(n - from), sizeof *out);
  if (!cc || !cr || !out) {
    free(cc);
    free(cr);
    free(out);
    return n;
  }
  int kept = from, nout = 0;
  for (int i = from; i < n; i++) {
    if (cand_too_heavy(v[i], t->best_work))
      out[nout++] = v[i];
    else
      v[kept++] = v[i];
  }
  for (int i = 0; i < nout; i++) {
    cc[i].features = &out[i]->feat;
    cc[i].group = t->workload_id;
    cr[i].ok = false;
  }
  ts_error ignored;
  if (nout && t->model) ts_cm_update(t->model, cc, cr, nout, &ignored);
  for (int i = 0; i < nout; i++) cand_unref(out[i]);
  t->pruned += nout;
  j->pruned += nout;
  free(cc);
  free(cr);
  free(out);
  return kept;
}

static int run_round(job *j, int ti) {
  job_task *t = &j->tasks[ti];
  int64_t left = j->budget - j->done;
  if (t->sched.max_trials > 0 && t->sched.max_trials - t->sched.trials < left)
    left = t->sched.max_trials - t->sched.trials;
  int want = j->o->search.batch > 0 ? j->o->search.batch : 32;
  /* A budget smaller than a batch per task (a model of many tasks tuned
   * briefly) is shared out: every task gets its round. */
  int64_t share = j->budget / (j->n_tasks > 0 ? j->n_tasks : 1);
  if (share < want) want = share > 1 ? (int)share : 1;
  if (want > left) want = (int)left;
  if (want <= 0) {
    t->sched.done = true;
    return TS_OK;
  }
  /* search */
  double t0 = ts_now_seconds();
  cand **v = calloc((size_t)want, sizeof *v);
  int n0 = 0;
  /* a job with --rule traces searches only the space they define: the
   * default schedule, which ignores them, is not offered */
  if (!t->default_offered && j->o->space.n_custom_rules == 0) {
    t->default_offered = true;
    bool cpu = !ts_target_facts_of(j->target)->is_gpu;
    if ((v[0] = default_cand(j, t, false, false))) n0 = 1;
    if (n0 < want && cpu && output_bytes(t->search.func) >= STREAM_MIN_BYTES &&
        (v[n0] = default_cand(j, t, true, false)))
      n0++;
    if (n0 < want && cpu &&
        largest_input_bytes(t->search.func) >= PREFETCH_MIN_BYTES &&
        (v[n0] = default_cand(j, t, false, true)))
      n0++;
  }
  int threads = j->o->build_threads > 0 ? j->o->build_threads
                                        : (int)sysconf(_SC_NPROCESSORS_ONLN);
  int n =
      want > n0 ? j->strategy->pick(&t->search, want - n0, v + n0, j->err) : 0;
  bool picked = n > 0;
  if (n >= 0) n += n0;
  /* the heavy ones out, and picks again for their places */
  for (int tries = 0, from = n0; n >= 0; tries++) {
    int kept = prune_heavy(j, t, v, from, n, threads);
    if (kept == n || tries == PRUNE_REFILLS) {
      n = kept;
      break;
    }
    int k = j->strategy->pick(&t->search, want - kept, v + kept, j->err);
    if (k < 0) {
      n = kept;
      for (int i = 0; i < n; i++) cand_unref(v[i]);
      n = k;
      break;
    }
    from = kept;
    n = kept + k;
  }
  j->search_s += ts_now_seconds() - t0;
  if (n < 0) {
    if (!picked)
      for (int i = 0; i < n0; i++) cand_unref(v[i]);
    free(v);
    return n;
  }
  t->sched.rounds++;
  if (n == 0 && picked) {
    /* every pick was pruned: not an empty round, unless it lasts */
    free(v);
    if (++t->pruned_rounds >= PRUNE_STOP_ROUNDS) {
      t->sched.done = true;
      if (j->o->output.out)
        fprintf(j->o->output.out,
                "task %d (%s): only candidates of %gx the fastest's work in "
                "%d rounds: done\n",
                ti, t->spec->name, TS_PRUNE_WORK_RATIO, t->pruned_rounds);
    }
    goto history;
  }
  t->pruned_rounds = 0;
  if (n == 0) {
    free(v);
    if (++t->empty_rounds >= j->o->search.early_stop_rounds) {
      t->sched.done = true;
      if (j->o->output.out)
        fprintf(j->o->output.out,
                "task %d (%s): nothing new to measure in %d rounds: done\n", ti,
                t->spec->name, t->empty_rounds);
    }
    goto history;
  }
  t->empty_rounds = 0;
  /* build, in parallel */
  t0 = ts_now_seconds();
  ts_artifact **art = calloc((size_t)n, sizeof *art);
  char(*why)[TS_MEASURE_ERROR_MAX] = calloc((size_t)n, TS_MEASURE_ERROR_MAX);
  const ts_func **fs = calloc((size_t)n, sizeof *fs);
  for (int i = 0; i < n; i++) fs[i] = ts_sched_func(v[i]->c.sched);
  ts_build_batch(fs, n, j->target, t->spec->const_params, threads,
                 j->o->build_timeout_ms, art, why);
  free(fs);
  bool any_built = false;
  for (int i = 0; i < n; i++) any_built = any_built || art[i];
  int ref_rc = any_built ? ensure_reference(j, t, ti) : TS_OK;
  if (t->model) {
    feat_job fj = {j, v};
    tuner_parallel(threads, n, feat_one, &fj);
  }
  j->build_s += ts_now_seconds() - t0;
  /* measure: nothing else runs meanwhile */
  t0 = ts_now_seconds();
  ts_measure_result *res = calloc((size_t)n, sizeof *res);
  ts_artifact **built = calloc((size_t)n, sizeof *built);
  int *slot = calloc((size_t)n, sizeof *slot);
  int nb = 0;
  for (int i = 0; i < n; i++)
    if (art[i]) {
      slot[nb] = i;
      built[nb++] = art[i];
    }
  ts_measure_config mc = round_config(j, t);
  ts_measure_result *mres = calloc((size_t)(nb ? nb : 1), sizeof *mres);
  int rc = ref_rc;
  if (nb && !rc)
    rc = ts_runner_measure(j->runner, &mc, t->ref_id, built, nb, mres, j->err);
  for (int i = 0; i < n; i++)
    if (!art[i]) {
      res[i].status = TS_MEASURE_BUILD_ERROR;
      snprintf(res[i].error, sizeof res[i].error, "%s", why[i]);
    }
  for (int k = 0; k < nb; k++) res[slot[k]] = mres[k];
  j->measure_s += ts_now_seconds() - t0;
  /* commit */
  ts_db_measurement *m = calloc((size_t)n, sizeof *m);
  char **json = calloc((size_t)n, sizeof *json);
  char **how = calloc((size_t)n, sizeof *how);
  double *med = calloc((size_t)n, sizeof *med);
  for (int i = 0; i < n && !rc; i++) {
    json[i] = ts_candidate_record_json(&v[i]->c);
    how[i] = ts_measure_context_json(&mc, res[i].cpus);
    med[i] = res[i].status == TS_MEASURE_OK
                 ? ts_median(res[i].seconds, res[i].n_seconds)
                 : NAN;
    m[i].workload_id = t->workload_id;
    m[i].target = j->target_str;
    m[i].trace_json = json[i] ? json[i] : "{}";
    m[i].run_secs = res[i].seconds;
    m[i].n_run_secs = res[i].status == TS_MEASURE_OK ? res[i].n_seconds : 0;
    m[i].status = db_status(res[i].status);
    m[i].error = res[i].error;
    m[i].job_id = j->job_id;
    m[i].worker = res[i].worker;
    m[i].measure_json = how[i];
    if (m[i].status == TS_DB_STATUS_OK && !(med[i] > 0)) {
      m[i].status = TS_DB_STATUS_RUN_ERROR;
      m[i].n_run_secs = 0;
      m[i].error = "no run time measured";
    }
  }
  for (int i = 0; !rc && i < n; i++) /* no record without its trace */
    if (!json[i])
      rc = TS_ERR(j->err, TS_ENOMEM, "the batch's traces: out of memory");
  if (!rc && ts_db_commit_records(j->db, m, n, NULL))
    rc = db_fail(j, "cannot commit the measured batch");
  if (!rc) {
    ts_cm_candidate *cc = calloc((size_t)n, sizeof *cc);
    ts_cm_result *cr = calloc((size_t)n, sizeof *cr);
    int nm = 0;
    for (int i = 0; i < n; i++) {
      bool ok = m[i].status == TS_DB_STATUS_OK;
      int64_t trial = j->done + i;
      /* the default is no decision set of a design space: it does not
       * seed the evolution */
      search_task_add_measured(&t->search,
                               v[i]->is_default ? NULL : v[i]->c.design,
                               v[i]->c.hash, ok, med[i]);
      t->by_status[m[i].status]++;
      j->by_status[m[i].status]++;
      if (ok && med[i] < t->best_s) {
        t->best_s = med[i];
        t->trial_of_best = trial;
        cands_features(j->target, 1, &v[i], 1);
        t->best_work = cand_float_work(v[i]);
      }
      if (t->model && v[i]->have_feat &&
          m[i].status != TS_DB_STATUS_WORKER_LOST) {
        cc[nm].features = &v[i]->feat;
        cc[nm].group = t->workload_id;
        cr[nm].ok = ok;
        cr[nm].seconds = ok ? med[i] : 0;
        nm++;
      }
      log_line(j, t, ti, trial, &res[i], med[i], v[i]->c.hash);
    }
    t0 = ts_now_seconds();
    if (nm && ts_cm_update(t->model, cc, cr, nm, j->err))
      rc = j->err ? j->err->code : TS_EINVAL;
    j->search_s += ts_now_seconds() - t0;
    free(cc);
    free(cr);
    t->sched.trials += n;
    t->trials_now += n;
    j->done += n;
    j->trials_now += n;
  }
  for (int i = 0; i < n; i++) {
    free(json[i]);
    cJSON_free(how[i]);
    ts_artifact_release(art[i]);
    cand_unref(v[i]);
  }
  free(json);
  free(how);
  free(med);
  free(m);
  free(res);
  free(mres);
  free(built);
  free(slot);
  free(art);
  free(why);
  free(v);
  if (rc) return rc;
history:
  if (t->sched.n_history % 64 == 0) {
    double *h = realloc(t->sched.best_history,
                        sizeof *h * (size_t)(t->sched.n_history + 64));
    if (!h) return TS_ERR(j->err, TS_ENOMEM, "tune: out of memory");
    t->sched.best_history = h;
  }
  t->sched.best_history[t->sched.n_history++] = t->best_s;
  if (t->sched.max_trials > 0 && t->sched.trials >= t->sched.max_trials)
    t->sched.done = true;
  return TS_OK;
}

/* ========================================================================
 * The job
 * ======================================================================== */

static void free_job(job *j) {
  for (int i = 0; i < j->n_tasks; i++) {
    job_task *t = &j->tasks[i];
    search_task_free(&t->search);
    ts_design_spaces_free(t->spaces, t->n_spaces);
    ts_cm_destroy(t->model);
    free(t->sched.best_history);
    free(t->best_json);
  }
  free(j->tasks);
  free(j->target_str);
  ts_target_free(j->target);
}

static int check_options(const ts_tune_options *o, const ts_tune_task *tasks,
                         int n, ts_error *err) {
  if (n < 1) return TS_ERR(err, TS_EINVAL, "tune: no task");
  if (o->trials < 0)
    return TS_ERR(err, TS_EINVAL, "tune: --trials must be >= 0, got %lld",
                  (long long)o->trials);
  if (o->trials_per_task < 0)
    return TS_ERR(err, TS_EINVAL, "tune: --trials-per-task must be >= 0");
  if (o->build_timeout_ms < 0)
    return TS_ERR(err, TS_EINVAL,
                  "tune: --build-timeout-ms must be >= 0 (0: no limit), got "
                  "%d",
                  o->build_timeout_ms);
  if (strcmp(o->cost_model, "xgb") && strcmp(o->cost_model, "random"))
    return TS_ERR(err, TS_EINVAL,
                  "tune: unknown cost model '%s' (xgb or random)",
                  o->cost_model);
  if (o->search.population < 1 || o->search.batch < 1 ||
      o->search.genetic_iters < 0 || o->search.epsilon < 0 ||
      o->search.epsilon > 1 || o->search.max_fail < 1 ||
      o->search.mutate_prob < 0 || o->search.mutate_prob > 1 ||
      o->search.init_measured_ratio < 0 || o->search.init_measured_ratio > 1 ||
      o->search.space_share < 0 || o->search.space_share > 1 ||
      o->search.local_share < 0 || o->search.local_share > 1 ||
      o->search.epsilon + o->search.space_share + o->search.local_share > 1)
    return TS_ERR(
        err, TS_EINVAL,
        "tune: search options out of range (population and batch "
        ">= 1, probabilities and shares in [0, 1], epsilon + space share "
        "+ local share at most 1)");
  for (int i = 0; i < n; i++)
    if (!tasks[i].func || !tasks[i].name || !(tasks[i].weight >= 0))
      return TS_ERR(err, TS_EINVAL,
                    "tune: task %d needs a function, a name and a weight >= "
                    "0",
                    i);
  return ts_measure_config_check(&o->measure, err);
}

/* Says once per dtype when tasks use a 16-bit float format the target has
 * no arithmetic for (bfloat16 without AVX512-BF16/AMX, float16 on x86-64):
 * such tasks tune and run, computing in float32. */
static void note_emulated_dtypes(FILE *out, const ts_target *t,
                                 const ts_tune_task *tasks, int n) {
  const ts_dtype formats[2] = {TS_BFLOAT16, TS_FLOAT16};
  for (int d = 0; d < 2; d++) {
    if (ts_target_dtype_native(t, formats[d])) continue;
    bool used = false;
    for (int i = 0; i < n && !used; i++)
      for (int p = 0; p < ts_func_n_params(tasks[i].func) && !used; p++)
        used = ts_dtype_eq(ts_buffer_dtype(ts_func_param(tasks[i].func, p)),
                           formats[d]);
    if (!used) continue;
    char name[32], path[200];
    fprintf(out, "note: %s on this target is %s\n",
            ts_dtype_str(formats[d], name),
            ts_target_dtype_path(t, formats[d], path, sizeof path));
  }
}

int ts_tune(ts_db *db, ts_runner *runner, const ts_tune_task *tasks, int n,
            const ts_tune_options *opts, ts_tune_result *result,
            ts_error *err) {
  memset(result, 0, sizeof *result);
  ts_tune_options o = opts ? *opts : ts_tune_defaults();
  ts_tune_options oc = o; /* timeout 0 (adaptive) checked as 1 s */
  if (oc.measure.timeout_ms <= 0) oc.measure.timeout_ms = 1000;
  int rc = check_options(&oc, tasks, n, err);
  if (rc) return rc;
  job j;
  memset(&j, 0, sizeof j);
  j.db = db;
  j.runner = runner;
  j.o = &o;
  j.err = err;
  j.start = ts_now_seconds();
  j.strategy = o.strategy == TS_STRATEGY_RANDOM ? &strategy_random
                                                : &strategy_evolutionary;
  if ((rc = ts_target_parse(o.target, &j.target, err))) return rc;
  j.target_str = ts_db_canonical_target(db, o.target);
  int64_t target_id;
  if (!j.target_str || ts_db_commit_target(db, j.target_str, &target_id)) {
    rc = db_fail(&j, "cannot store the target");
    free_job(&j);
    return rc;
  }
  bool resumed = false;
  if ((rc = open_job(&j, tasks, n, &resumed))) {
    free_job(&j);
    return rc;
  }
  j.budget = o.trials;
  j.done = j.done_before;
  j.tasks = calloc((size_t)n, sizeof *j.tasks);
  j.n_tasks = n;
  int search_threads =
      o.search.threads > 0 ? o.search.threads : ts_target_num_cores(j.target);
  /* a target that runs elsewhere: every core of this machine searches */
  if (search_threads < 1 || !ts_target_facts_of(j.target)->runs_on_host)
    search_threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (search_threads < 1) search_threads = 1;
  for (int i = 0; i < n && !rc; i++) {
    rc = setup_task(&j, i, &tasks[i], search_threads);
    if (rc) {
      char msg[sizeof err->msg];
      snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
      TS_ERR(err, rc, "task %d (%s): %s", i, tasks[i].name, msg);
    }
  }
  /* named from here on, also when the job fails (the caller's resume hint) */
  snprintf(result->job_name, sizeof result->job_name, "%s", j.job_name);
  if (!rc && o.output.out) {
    fprintf(o.output.out, "%s job '%s': %lld of %lld trials done, target %s\n",
            resumed ? "resuming" : "starting", j.job_name,
            (long long)j.done_before, (long long)j.budget, j.target_str);
    for (int i = 0; i < n; i++)
      fprintf(o.output.out, "  task %d %s: %d design space%s (%s%s)\n", i,
              tasks[i].name, j.tasks[i].n_spaces,
              j.tasks[i].n_spaces == 1 ? "" : "s", j.tasks[i].spaces[0].name,
              j.tasks[i].n_spaces > 1 ? ", ..." : "");
    note_emulated_dtypes(o.output.out, j.target, tasks, n);
    fflush(o.output.out);
  }
  int64_t turn = 0;
  bool stopped = false;
  while (!rc && j.done < j.budget) {
    if (o.stop && *o.stop) {
      stopped = true;
      break;
    }
    ts_task_state *states = calloc((size_t)n, sizeof *states);
    for (int i = 0; i < n; i++) states[i] = j.tasks[i].sched;
    int ti = ts_task_next(o.policy, states, n, turn++);
    free(states);
    if (ti < 0) break;
    j.round++;
    rc = run_round(&j, ti);
    if (!rc) {
      print_status(&j);
    }
  }
  if (!stopped && o.stop && *o.stop && j.done < j.budget) stopped = true;
  ts_db_job_state state = rc        ? TS_DB_JOB_FAILED
                          : stopped ? TS_DB_JOB_INTERRUPTED
                                    : TS_DB_JOB_FINISHED;
  if (ts_db_job_finish(db, j.job_id, state) && !rc)
    rc = db_fail(&j, "cannot mark the job");
  if (!rc) {
    result->job_id = j.job_id;
    snprintf(result->job_name, sizeof result->job_name, "%s", j.job_name);
    result->state = state;
    result->resumed = resumed;
    result->n_tasks = n;
    result->tasks = calloc((size_t)n, sizeof *result->tasks);
    result->trials_done = j.done;
    result->trials_now = j.trials_now;
    result->seconds = ts_now_seconds() - j.start;
    result->build_seconds = j.build_s;
    result->measure_seconds = j.measure_s;
    result->search_seconds = j.search_s;
    for (int i = 0; i < n; i++) {
      job_task *t = &j.tasks[i];
      ts_tune_task_result *r = &result->tasks[i];
      r->workload_id = t->workload_id;
      r->best_seconds = t->best_s;
      r->baseline_seconds = NAN;
      r->trials = t->sched.trials;
      r->trials_now = t->trials_now;
      memcpy(r->by_status, t->by_status, sizeof r->by_status);
      r->pruned = t->pruned;
      r->trial_of_best = t->trial_of_best;
      ts_db_record best;
      memset(&best, 0, sizeof best);
      if (ts_db_best(db, t->workload_id, j.target_str, &best) == TS_OK) {
        r->best_trace_json = strdup(best.trace_json);
        if (best.confirmed_rounds > 0)
          r->best_seconds = best.confirmed_s; /* a confirmed best rules */
        else if (best.median_s < r->best_seconds)
          r->best_seconds = best.median_s;
        ts_db_record_clear(&best);
      }
    }
  }
  free_job(&j);
  return rc;
}
