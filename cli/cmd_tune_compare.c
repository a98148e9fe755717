/*
 * cmd_tune_compare.c — `tessera tune --compare-models`: the same job run
 * twice, with the XGBoost cost model and with the random model, each in a
 * database of its own (a shared one would seed the second search with the
 * first one's records), then both bests timed side by side in this process
 * in interleaved rounds, so machine load drifting between the two runs
 * does not decide the comparison.
 */
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ROUNDS 99

static const char *const models[2] = {"xgb", "random"};

/* PATH.db -> PATH-MODEL.db; PATH -> PATH-MODEL.db */
static void model_db_path(const char *db, const char *model, char *out,
                          size_t n) {
  size_t len = strlen(db);
  if (len > 3 && !strcmp(db + len - 3, ".db")) len -= 3;
  snprintf(out, n, "%.*s-%s.db", (int)len, db, model);
}

typedef struct cmp_row {
  double best_s[2], side_s[2], ratio; /* ratio: random / xgb latency */
  int64_t trial_90[2];
  bool timed;
  char why[200];
} cmp_row;

/* Times the two bests in `rounds` interleaved rounds (the order alternating)
 * and keeps the medians of the per-round figures. */
static void side_by_side(const ts_tune_task *task, const ts_tune_result *res,
                         int i, const ts_target *t, ts_runtime *rt, int rounds,
                         cmp_row *row) {
  cli_kernel k[2];
  memset(k, 0, sizeof k);
  ts_error err;
  ts_error_clear(&err);
  for (int m = 0; m < 2; m++)
    if (!res[m].tasks[i].best_trace_json) {
      snprintf(row->why, sizeof row->why, "the %s run measured nothing ok",
               models[m]);
      goto done;
    }
  for (int m = 0; m < 2; m++)
    if (cli_kernel_build_record(res[m].tasks[i].best_trace_json, task->func, t,
                                &k[m], &err)) {
      snprintf(row->why, sizeof row->why, "%s best: %.160s", models[m],
               err.msg);
      goto done;
    }
  ts_eval_config cfg = {1, 5, 100, false, 1};
  double s[2][MAX_ROUNDS], r[MAX_ROUNDS];
  for (int round = 0; round < rounds; round++) {
    for (int j = 0; j < 2; j++) {
      int m = (round + j) % 2;
      if (cli_kernel_time(&k[m], rt, &cfg, &s[m][round], &err)) {
        snprintf(row->why, sizeof row->why, "timing the %s best: %.160s",
                 models[m], err.msg);
        goto done;
      }
    }
    r[round] = s[1][round] / s[0][round];
  }
  for (int m = 0; m < 2; m++) row->side_s[m] = ts_median(s[m], rounds);
  row->ratio = ts_median(r, rounds);
  row->timed = true;
done:
  for (int m = 0; m < 2; m++) cli_kernel_free(&k[m]);
}

static void fmt_gflops(char *buf, size_t n, double flops, double s) {
  if (isfinite(s) && s > 0)
    snprintf(buf, n, "%.2f", flops / s * 1e-9);
  else
    snprintf(buf, n, "-");
}

static void json_num(const char *key, bool have, double v, bool comma) {
  if (have && isfinite(v))
    printf("\"%s\": %.6g%s", key, v, comma ? ", " : "");
  else
    printf("\"%s\": null%s", key, comma ? ", " : "");
}

int tune_compare_models(ts_runner *runner, const char *db_path,
                        const ts_tune_options *opts, const ts_tune_task *tasks,
                        int n, int threads, int rounds, bool json) {
  FILE *out = json ? stderr : stdout;
  ts_tune_result res[2];
  ts_db *db[2] = {NULL, NULL};
  char paths[2][4096], jobs[2][160];
  int status = EXIT_FAIL;
  ts_error err;
  ts_error_clear(&err);
  memset(res, 0, sizeof res);
  cmp_row *rows = calloc((size_t)n, sizeof *rows);
  ts_target *t = NULL;
  ts_runtime *rt = NULL;
  if (!rows) goto done;
  for (int m = 0; m < 2; m++) {
    model_db_path(db_path, models[m], paths[m], sizeof paths[m]);
    snprintf(jobs[m], sizeof jobs[m], "%s-%s",
             opts->job_name ? opts->job_name : "compare", models[m]);
    if (ts_db_open(paths[m], NULL, &db[m], &err)) {
      cli_error("cannot open the database", &err);
      goto done;
    }
    ts_tune_options o = *opts;
    o.cost_model = models[m];
    o.job_name = jobs[m];
    fprintf(out, "\n== model comparison %d/2: cost model %s, job '%s' in %s\n",
            m + 1, models[m], jobs[m], paths[m]);
    fflush(out);
    if (ts_tune(db[m], runner, tasks, n, &o, &res[m], &err)) {
      cli_error("tuning failed", &err);
      goto done;
    }
    if (res[m].state == TS_DB_JOB_INTERRUPTED) {
      fprintf(stderr,
              "\ninterrupted: job '%s' in %s stopped after committing its "
              "last batch; run the same command again to continue (each "
              "job resumes where it stopped).\n",
              jobs[m], paths[m]);
      status = 130;
      goto done;
    }
  }

  /* both bests side by side, when this machine can run the target */
  const char *why_not = NULL;
  char why_buf[sizeof err.msg];
  if (ts_target_parse(opts->target, &t, &err)) {
    why_not = "the target does not parse";
  } else if (ts_target_check_runs_here(t, "not timed", &err)) {
    snprintf(why_buf, sizeof why_buf, "%s", err.msg);
    why_not = why_buf;
  }
  if (!why_not && ts_runtime_create(threads, &rt, &err)) why_not = "no runtime";
  for (int i = 0; i < n; i++) {
    cmp_row *row = &rows[i];
    for (int m = 0; m < 2; m++) {
      row->best_s[m] = res[m].tasks[i].best_seconds;
      row->trial_90[m] =
          cli_trial_at_90(db[m], res[m].tasks[i].workload_id, opts->target,
                          res[m].job_id, res[m].tasks[i].best_seconds);
    }
    if (why_not)
      snprintf(row->why, sizeof row->why, "%.190s", why_not);
    else
      side_by_side(&tasks[i], res, i, t, rt, rounds, row);
  }

  if (json) {
    printf("{\"trials\": [%lld, %lld], \"rounds\": %d, \"tasks\": [",
           (long long)res[0].trials_done, (long long)res[1].trials_done,
           rounds);
    for (int i = 0; i < n; i++) {
      const cmp_row *r = &rows[i];
      double fl =
          tasks[i].flops > 0 ? tasks[i].flops : ts_func_flops(tasks[i].func);
      printf("%s{\"name\": \"%s\", ", i ? ", " : "", tasks[i].name);
      for (int m = 0; m < 2; m++) {
        char key[64];
        snprintf(key, sizeof key, "%s_gflops", models[m]);
        json_num(key, true, fl / r->best_s[m] * 1e-9, true);
        printf("\"%s_trial_90pct\": %lld, ", models[m],
               (long long)r->trial_90[m]);
        snprintf(key, sizeof key, "%s_gflops_side_by_side", models[m]);
        json_num(key, r->timed, fl / r->side_s[m] * 1e-9, true);
      }
      json_num("ratio_side_by_side", r->timed, r->ratio, false);
      printf("}");
    }
    printf("]}\n");
  } else {
    printf("\nmodel comparison: %lld trials with xgb, %lld with random (same "
           "seed, separate databases)\n",
           (long long)res[0].trials_done, (long long)res[1].trials_done);
    printf("%3s  %-34s %9s %6s %9s %6s %9s %9s %9s\n", "ID", "Name", "xgb",
           "90%@", "random", "90%@", "xgb*", "random*", "xgb/rnd*");
    for (int i = 0; i < n; i++) {
      const cmp_row *r = &rows[i];
      double fl =
          tasks[i].flops > 0 ? tasks[i].flops : ts_func_flops(tasks[i].func);
      char g[2][32], sg[2][32], t90[2][32], ratio[32] = "-", name[35];
      for (int m = 0; m < 2; m++) {
        fmt_gflops(g[m], sizeof g[m], fl, r->best_s[m]);
        fmt_gflops(sg[m], sizeof sg[m], fl, r->timed ? r->side_s[m] : NAN);
        snprintf(t90[m], sizeof t90[m], "%lld", (long long)r->trial_90[m]);
        if (r->trial_90[m] < 0) snprintf(t90[m], sizeof t90[m], "-");
      }
      if (r->timed) snprintf(ratio, sizeof ratio, "%.2f", r->ratio);
      snprintf(name, sizeof name, "%s", tasks[i].name);
      printf("%3d  %-34s %9s %6s %9s %6s %9s %9s %9s\n", i, name, g[0], t90[0],
             g[1], t90[1], sg[0], sg[1], ratio);
    }
    printf("xgb, random: GFLOP/s of the best candidate each search measured; "
           "90%%@: the trial that first reached\n90%% of it; *: both bests "
           "timed side by side in this process (%d thread%s), medians of %d\n"
           "interleaved rounds; xgb/rnd = random's latency / xgb's.\n",
           threads, threads == 1 ? "" : "s", rounds);
    for (int i = 0; i < n; i++)
      if (!rows[i].timed && rows[i].why[0])
        printf("task %d: not timed side by side: %s\n", i, rows[i].why);
  }
  fflush(stdout);
  status = EXIT_OK;
done:
  for (int m = 0; m < 2; m++) {
    ts_tune_result_clear(&res[m]);
    ts_db_close(db[m]);
  }
  ts_runtime_destroy(rt);
  ts_target_free(t);
  free(rows);
  return status;
}
