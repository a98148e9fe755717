/*
 * cmd_tune.c — `tessera tune`: runs (or resumes) a tuning job over one or
 * more workloads on the embedded measurement pool or on workers leased
 * from a tracker, prints the task table and progress while it runs, and a
 * final summary: per task the best latency and GFLOP/s, the speedup over
 * the unscheduled code, and for matmul-like tasks the ratio to oneDNN
 * measured side by side in this run. SIGINT/SIGTERM let the batch in
 * flight finish and commit, then exit 130 with the command that resumes.
 */
#include "cli.h"
#include "tune_internal.h"

#include "bench/bench.h"
#include "codegen/codegen.h"
#include "runtime/runtime.h"
#include "schedule/schedule.h"
#include "tuner/tuner.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char tune_usage[] =
    "usage: tessera tune (--workload SPEC | --tir FILE)... [--weight W]\n"
    "                    [--winograd]\n"
    "       tessera tune --model MODEL.onnx [--input-shape NAME=DIMS]...\n"
    "                    [--dim SYMBOL=SIZE]... [--shape-buckets "
    "SYMBOL=S1,...]\n"
    "                    [--quantize PROFILE.json ...]\n"
    "       tessera tune --job NAME [--db PATH] [--trials N]   (resume)\n"
    "                    [--target T] [--trials N] [--trials-per-task N]\n"
    "                    [--db PATH] [--tracker HOST:PORT --key KEY]\n"
    "                    [--token-file F] [--job NAME] [--seed S]\n"
    "                    [--cost-model xgb|random]\n"
    "                    [--strategy evolutionary|random]\n"
    "                    [--task-scheduler gradient|round-robin]\n"
    "                    [--rule BLOCK=TRACE.json] [--no-tensorize]\n"
    "                    [--batch N] [--population N] [--threads N]\n"
    "                    [--timeout-ms N] [--build-timeout-ms N]\n"
    "                    [--quiet] [--log FILE] [--json]\n"
    "                    [--no-summary-measure] [--compare-models]\n"
    "                    [--compare-rounds N]\n"
    "                    [--confirm-top K] [--confirm-cold] "
    "[--[no-]confirm-in-model]\n"
    "                    [--max-memory-mb N] [--max-gflop N]\n"
    "\n"
    "Tunes the workloads' schedules: builds design spaces, searches them\n"
    "(evolutionary search with a cost model learnt online), measures the\n"
    "candidates and stores every result in the database. --trials is the\n"
    "job's total budget: re-running the same --job continues where it\n"
    "stopped and measures only what remains.\n"
    "\n"
    "  --workload SPEC     a workload of the operator library (repeatable)\n"
    "  --tir FILE          a workload as TIR text (repeatable)\n"
    "  --weight W          weight of the preceding workload: how often it\n"
    "                      appears in the model (default 1)\n"
    "  --winograd          also tune each 3x3 stride-1 conv2d_nhwc workload's\n"
    "                      Winograd forms F(2x2, 3x3) and F(4x4, 3x3) as the\n"
    "                      graph compiler builds them (input transform,\n"
    "                      batched product, output transform: tasks of the\n"
    "                      job); the summary weighs them against the direct\n"
    "                      form and `bench --db` times them\n"
    "  --model FILE        every task of an ONNX model (its fused groups,\n"
    "                      as `tessera graph tasks` lists them), each\n"
    "                      weighted by its calls per run; --trials is the\n"
    "                      whole model's budget\n"
    "  --layout L          2-D convolutions channels-last (nhwc, default:\n"
    "                      one transpose at the input), as the model gives\n"
    "                      them (nchw), channel-blocked where a conv can be\n"
    "                      (blocked) or NHWC or blocked per conv by the\n"
    "                      database's latencies (auto; docs/graph.md)\n"
    "  --no-winograd       3x3 convolutions direct, not by Winograd's\n"
    "                      F(2x2, 3x3) (docs/graph.md)\n"
    "  --shape-buckets SYMBOL=S1,S2,...  tune the model at each of these\n"
    "                      sizes of a named dynamic dimension (a bucket of\n"
    "                      records per size; twice: every pair of sizes)\n"
    "  --input-shape NAME=DIMS  fix a model input's dimensions, e.g.\n"
    "                      input_ids=1x128 (needed for symbolic ones)\n"
    "  --target T          target string (default: llvm, this machine)\n"
    "  --trials N          the job's total measurement budget (default 64)\n"
    "  --trials-per-task N at most N trials per workload (default: no cap)\n"
    "  --db PATH           tuning database (default ./tessera.db)\n"
    "  --tracker H:P       measure on workers leased from this tracker\n"
    "  --key KEY           device key of those workers\n"
    "  --token-file F      bearer token for the tracker and workers\n"
    "  --job NAME          job name: resumes the job if it exists; with no\n"
    "                      --workload/--tir, its workloads, target and\n"
    "                      settings come from the database (and --trials\n"
    "                      from its budget unless given)\n"
    "  --seed S            search seed (default 1)\n"
    "  --cost-model M      xgb (default) or random\n"
    "  --strategy S        evolutionary (default) or random\n"
    "  --task-scheduler P  gradient (default) or round-robin\n"
    "  --rule BLOCK=FILE   apply this trace to BLOCK instead of the default\n"
    "                      rules (repeatable)\n"
    "  --no-tensorize      no tensor-intrinsic variants in the design space\n"
    "  --max-memory-mb N   refuse a workload whose buffers need more\n"
    "                      (default: half of this machine's memory)\n"
    "  --max-gflop N       refuse a workload of more operations per run\n"
    "                      (default 2000)\n"
    "  --batch N           candidates measured per round (default 32)\n"
    "  --population N      evolutionary population (default 256)\n"
    "  --threads N         threads of the measured kernels (default: the\n"
    "                      target's cores); the job's target gets\n"
    "                      -num-cores=N, so records are filed and resumed\n"
    "                      under that thread count\n"
    "  --timeout-ms N      time limit per candidate (default: adaptive)\n"
    "  --build-timeout-ms N  time limit of one candidate's compile, in a\n"
    "                      separate process (default 60000; 0: in this\n"
    "                      process, no limit)\n"
    "  --quiet             no task table or progress output\n"
    "  --log FILE          JSON Lines, one line per measured candidate\n"
    "  --json              the final summary as one JSON object on stdout\n"
    "                      (progress goes to stderr)\n"
    "  --no-summary-measure  summary from the job's measurements only (no\n"
    "                      confirmation, unscheduled or oneDNN runs)\n"
    "  --confirm-top K     when the job ends, measure the K fastest distinct\n"
    "                      schedules of each task again side by side in\n"
    "                      interleaved rounds and keep their medians (the\n"
    "                      figure compile and the report use; default 6,\n"
    "                      0: none; `tessera db confirm` does it later)\n"
    "  --confirm-cold      with --model: time each confirmation run as one\n"
    "                      call with the task's weights evicted from the\n"
    "                      caches, its input cached (docs/database.md)\n"
    "  --confirm-in-model  with --model, after the confirmation (the\n"
    "                      default when there is one and the target runs\n"
    "                      here): compile the model once per rank of each\n"
    "                      task's 3 best records, once with the vendor calls\n"
    "                      and once as it compiles now, run them side by\n"
    "                      side, and store each task's times in the model as\n"
    "                      its confirmation: compile chooses by them\n"
    "                      (docs/database.md); --no-confirm-in-model skips it\n"
    "  --compare-models    run the job twice, with the xgb and the random\n"
    "                      cost model, in PATH-xgb.db and PATH-random.db\n"
    "                      (from --db PATH), then time both bests side by\n"
    "                      side and print the comparison\n"
    "  --compare-rounds N  interleaved rounds of that timing (default 9)\n"
    "\n"
    "Exit status: 0 done, 1 failure, 2 usage error, 130 interrupted (the\n"
    "job is resumable with the same --job).\n";

/* The stop flag the signal handler sets: the one piece of global state a
 * signal handler needs. */
static volatile sig_atomic_t stop_requested;

/* The first SIGINT/SIGTERM asks the job to stop after the batch in flight;
 * a second one ends the process at once (committed batches are kept). */
static void on_stop_signal(int sig) {
  static const char msg[] = "\ntessera tune: stopping after the batch in "
                            "flight (interrupt again to quit now)\n";
  if (stop_requested) {
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  stop_requested = 1;
  ssize_t w = write(2, msg, sizeof msg - 1);
  (void)w;
}

/* During the summary measurement (the job's trials are all committed): a
 * signal says so and ends the process. */
static void on_summary_signal(int sig) {
  static const char msg[] =
      "\ntessera tune: interrupted during the summary measurement; every "
      "trial of the job is committed (`tessera db confirm` re-measures the "
      "bests)\n";
  ssize_t w = write(2, msg, sizeof msg - 1);
  (void)w;
  signal(sig, SIG_DFL);
  raise(sig);
}

static int int_option(const char *name, const char *v, long lo, long hi,
                      long *out) {
  return cli_int_option("tune", name, v, lo, hi, out);
}

/* ---- the final summary ---- */

static bool matmul_like(const ts_workload *w) {
  static const char *const ops[] = {"matmul", "batch_matmul", "dense",
                                    "conv2d_nhwc", "conv2d_nchw"};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (w && !strcmp(w->op, ops[i])) return true;
  return false;
}

/* Builds f and times it in this process (median seconds), 0 on failure. */
static double time_func(const ts_func *f, const ts_target *t, ts_runtime *rt,
                        const ts_eval_config *cfg) {
  cli_kernel k;
  double out = 0;
  if (!cli_kernel_build(f, t, 1, &k, NULL)) {
    if (cli_kernel_time(&k, rt, cfg, &out, NULL)) out = 0;
    cli_kernel_free(&k);
  }
  return out;
}

/* Rounds of the tuned kernel next to oneDNN in the summary. */
#define SIDE_ROUNDS 5

/* Times the task's best next to oneDNN in SIDE_ROUNDS interleaved rounds
 * (the order alternating, so load drifting over the seconds this takes
 * hits both), keeping the medians; the oneDNN level is stored as the
 * task's baseline for the report. */
static void side_by_side(const ts_func *f, const ts_workload *w,
                         const ts_tune_task_result *tr, const ts_target *t,
                         ts_runtime *rt, int threads, ts_db *db,
                         const char *target, summary_row *s) {
  cli_kernel k;
  memset(&k, 0, sizeof k);
  ts_error err;
  ts_error_clear(&err);
  if (!tr->best_trace_json ||
      cli_kernel_build_record(tr->best_trace_json, f, t, &k, &err))
    return;
  ts_eval_config steady = {1, 5, 100, false, 2};
  ts_bench_options bo = ts_bench_options_default();
  bo.threads = threads;
  bo.eval = steady;
  bo.keep_output = false;
  /* oneDNN's primitive is prepared once; each round times it and the
   * kernel, the order alternating */
  ts_bench_session *dnn = NULL;
  if (ts_bench_open(TS_BENCH_ONEDNN, w, &bo, &dnn, &err) != TS_OK)
    snprintf(s->onednn_why, sizeof s->onednn_why, "%.150s", err.msg);
  double mine[SIDE_ROUNDS], theirs[SIDE_ROUNDS], ratio[SIDE_ROUNDS];
  int n = 0;
  for (int round = 0; dnn && round < SIDE_ROUNDS; round++) {
    double x = 0, o = 0;
    for (int j = 0; j < 2; j++) {
      if ((round + j) % 2 == 0) {
        if (cli_kernel_time(&k, rt, &steady, &x, NULL)) x = 0;
        continue;
      }
      const double *all = NULL;
      if (ts_bench_measure(dnn, &steady, &err) == TS_OK) {
        int got = ts_bench_samples(dnn, &all);
        double last[8];
        memcpy(last, all + got - steady.repeat,
               sizeof last[0] * (size_t)steady.repeat);
        o = ts_median(last, steady.repeat);
      } else {
        snprintf(s->onednn_why, sizeof s->onednn_why, "%.150s", err.msg);
      }
    }
    if (!(x > 0) || !(o > 0)) break;
    mine[n] = x;
    theirs[n] = o;
    ratio[n++] = o / x;
  }
  ts_bench_close(dnn, NULL);
  cli_kernel_free(&k);
  if (n < SIDE_ROUNDS) return;
  s->tuned_s = ts_median(mine, n);
  s->onednn_s = ts_median(theirs, n);
  s->ratio = ts_median(ratio, n);
  s->have_tuned = s->have_onednn = true;
  ts_db_baseline_put(db, tr->workload_id, target, "onednn", threads,
                     s->flops / s->onednn_s * 1e-9);
}

int64_t cli_trial_at_90(ts_db *db, int64_t workload, const char *target,
                        int64_t job_id, double best) {
  ts_db_record *recs = NULL;
  int n = 0;
  int64_t at = -1;
  char *canon = ts_db_canonical_target(db, target);
  int rc = isfinite(best) ? ts_db_records_of(db, workload,
                                             canon ? canon : target, &recs, &n)
                          : TS_EINVAL;
  free(canon);
  if (rc != TS_OK) return -1;
  for (int i = 0; i < n; i++)
    if (recs[i].job_id == job_id && recs[i].status == TS_DB_STATUS_OK &&
        recs[i].median_s <= best / 0.9 && (at < 0 || recs[i].trial < at))
      at = recs[i].trial;
  ts_db_records_free(recs, n);
  return at;
}

/* Confirms each task's best (tuner/confirm.c), with the vendor libraries
 * that implement the task timed in the same rounds, and makes the confirmed
 * best the one the summary shows; rows[i] gets the side-by-side figures
 * against oneDNN. Progress on stderr; a task that cannot be confirmed here
 * (a GPU target, a CPU this machine is not) keeps its search-time best,
 * with a note. */
static void confirm_tasks(const tune_args *a, ts_db *db, const char *target,
                          const ts_tune_task *tasks, ts_workload **wl,
                          ts_tune_result *r, int threads, summary_row *rows) {
  ts_confirm_options co = ts_confirm_defaults();
  co.top_k = (int)a->confirm_top;
  co.threads = threads;
  co.cold = a->model && a->confirm_cold;
  bool tty = isatty(fileno(stderr));
  if (!a->quiet && !tty)
    fprintf(stderr, "confirming the bests of %d tasks (top %d each)\n",
            r->n_tasks, co.top_k);
  for (int i = 0; i < r->n_tasks; i++) {
    ts_tune_task_result *tr = &r->tasks[i];
    if (!tr->best_trace_json) continue;
    if (!a->quiet && tty) {
      fprintf(stderr, "\rconfirming the bests: task %d of %d (%s)\033[K", i + 1,
              r->n_tasks, tasks[i].name);
      fflush(stderr);
    }
    cli_peers peers;
    cli_peers_open(wl[i], threads, &peers);
    ts_error verr;
    ts_error_clear(&verr);
    /* a model's task: the oneDNN call `compile --dispatch` would make,
     * timed in the same rounds (its level decides the dispatch) */
    co.cold_params = a->consts[i];
    co.const_params = tasks[i].const_params;
    if (!wl[i] && a->vendor[i] &&
        cli_peers_add_vendor_call(&peers, tasks[i].func, a->vendor[i],
                                  a->consts[i], threads, &verr) != TS_OK)
      snprintf(rows[i].onednn_why, sizeof rows[i].onednn_why, "%.150s",
               verr.msg);
    co.peers = peers.peers;
    co.n_peers = peers.n;
    ts_confirm_result cr;
    ts_error err;
    ts_error_clear(&err);
    int rc = ts_confirm(db, tr->workload_id, target, &co, &cr, &err);
    for (int p = 0; !rc && p < peers.n; p++) {
      summary_row *s = &rows[i];
      if (strcmp(peers.peers[p].name, "onednn")) continue;
      if (!cr.peers[p].ok) {
        snprintf(s->onednn_why, sizeof s->onednn_why, "%s", cr.peers[p].why);
        continue;
      }
      s->tuned_s = cr.best_s;
      s->onednn_s = cr.peers[p].seconds;
      s->ratio = cr.peers[p].ratio;
      s->have_tuned = s->have_onednn = s->side_in_confirm = true;
    }
    cli_peers_close(&peers);
    if (rc) {
      fprintf(stderr, "%snote: task %d not confirmed: %s\n",
              !a->quiet && tty ? "\n" : "", i, err.msg);
      if (err.code == TS_EUNSUPPORTED) break; /* the same for every task */
      continue;
    }
    ts_tune_result_refresh_best(db, target, r, i);
  }
  if (!a->quiet && tty) fprintf(stderr, "\r\033[K");
}

static void print_summary(const tune_args *a, ts_db *db, const char *target,
                          const ts_tune_task *tasks, ts_workload **wl,
                          const ts_tune_result *r, int threads,
                          summary_row *rows, FILE *out) {
  ts_target *t = NULL;
  ts_runtime *rt = NULL;
  bool can_run = a->summary_measure && !ts_target_parse(target, &t, NULL) &&
                 !ts_target_check_runs_here(t, "summary", NULL);
  if (can_run && ts_runtime_create(threads, &rt, NULL)) can_run = false;
  for (int i = 0; i < r->n_tasks; i++) {
    summary_row *s = &rows[i];
    const ts_tune_task_result *tr = &r->tasks[i];
    s->best_s = tr->best_seconds;
    s->flops =
        tasks[i].flops > 0 ? tasks[i].flops : ts_func_flops(tasks[i].func);
    s->trial_90 = cli_trial_at_90(db, tr->workload_id, target, r->job_id,
                                  tr->best_seconds);
    if (!can_run || !tr->best_trace_json) continue;
    ts_eval_config quick = {1, 1, 0, false, 0};
    if (matmul_like(wl[i]) && !s->side_in_confirm)
      side_by_side(tasks[i].func, wl[i], tr, t, rt, threads, db, target, s);
    /* the unscheduled code, once (it may take seconds) */
    double b = time_func(tasks[i].func, t, rt, &quick);
    if (b > 0) {
      s->baseline_s = b;
      s->have_baseline = true;
    }
  }
  if (a->json) {
    fprintf(out,
            "{\"job\": \"%s\", \"state\": \"%s\", \"trials_done\": %lld, "
            "\"trials_now\": %lld, \"seconds\": %.3f, "
            "\"trials_per_minute\": %.2f, \"build_seconds\": %.3f, "
            "\"measure_seconds\": %.3f, \"search_seconds\": %.3f, "
            "\"tasks\": [",
            r->job_name, ts_db_job_state_name(r->state),
            (long long)r->trials_done, (long long)r->trials_now, r->seconds,
            r->seconds > 0 ? r->trials_now / r->seconds * 60 : 0,
            r->build_seconds, r->measure_seconds, r->search_seconds);
    for (int i = 0; i < r->n_tasks; i++) {
      const summary_row *s = &rows[i];
      const ts_tune_task_result *tr = &r->tasks[i];
      fprintf(out, "%s{\"name\": \"%s\", \"trials\": %lld, ", i ? ", " : "",
              tasks[i].name, (long long)tr->trials);
      bool hb = isfinite(s->best_s);
      json_double(out, "best_seconds", hb, s->best_s, true);
      json_double(out, "gflops", hb, s->flops / s->best_s * 1e-9, true);
      fprintf(out, "\"trial_of_best\": %lld, \"trial_90pct\": %lld, ",
              (long long)tr->trial_of_best, (long long)s->trial_90);
      json_double(out, "unscheduled_seconds", s->have_baseline, s->baseline_s,
                  true);
      json_double(out, "speedup", s->have_baseline && hb,
                  s->baseline_s / s->best_s, true);
      json_double(out, "tuned_gflops_side_by_side", s->have_tuned,
                  s->flops / s->tuned_s * 1e-9, true);
      json_double(out, "onednn_gflops", s->have_onednn,
                  s->flops / s->onednn_s * 1e-9, true);
      json_double(out, "ratio_to_onednn", s->have_onednn && s->have_tuned,
                  s->ratio, true);
      fprintf(out,
              "\"failures\": {\"build_error\": %lld, \"run_error\": "
              "%lld, \"timeout\": %lld, \"wrong_result\": %lld}}",
              (long long)tr->by_status[TS_DB_STATUS_BUILD_ERROR],
              (long long)tr->by_status[TS_DB_STATUS_RUN_ERROR],
              (long long)tr->by_status[TS_DB_STATUS_TIMEOUT],
              (long long)tr->by_status[TS_DB_STATUS_WRONG_RESULT]);
    }
    fprintf(out, "]");
    tune_print_forms(a, db, target, wl, rows, r->n_tasks, out);
    fprintf(out, "}\n");
  } else {
    fprintf(out,
            "\nsummary of job '%s' (%s): %lld trials (%lld in this run, "
            "%.1f s, %.0f trials/min)\n",
            r->job_name, ts_db_job_state_name(r->state),
            (long long)r->trials_done, (long long)r->trials_now, r->seconds,
            r->seconds > 0 ? r->trials_now / r->seconds * 60 : 0);
    fprintf(out, "time: search %.1f s, build %.1f s, measure %.1f s\n",
            r->search_seconds, r->build_seconds, r->measure_seconds);
    fprintf(out, "%3s  %-34s %12s %9s %8s %10s %10s %8s %6s\n", "ID", "Name",
            "Latency(us)", "GFLOP/s", "Speedup", "tuned*", "oneDNN*", "ratio",
            "90%@");
    for (int i = 0; i < r->n_tasks; i++) {
      const summary_row *s = &rows[i];
      char lat[32] = "-", gf[32] = "-", sp[32] = "-", tg[32] = "-",
           og[32] = "-", ratio[32] = "-", t90[32] = "-";
      if (isfinite(s->best_s)) {
        snprintf(lat, sizeof lat, "%.1f", s->best_s * 1e6);
        snprintf(gf, sizeof gf, "%.2f", s->flops / s->best_s * 1e-9);
        if (s->have_baseline)
          snprintf(sp, sizeof sp, "%.1fx", s->baseline_s / s->best_s);
      }
      if (s->have_tuned)
        snprintf(tg, sizeof tg, "%.2f", s->flops / s->tuned_s * 1e-9);
      if (s->have_onednn)
        snprintf(og, sizeof og, "%.2f", s->flops / s->onednn_s * 1e-9);
      if (s->have_onednn && s->have_tuned)
        snprintf(ratio, sizeof ratio, "%.2f", s->ratio);
      if (s->trial_90 >= 0)
        snprintf(t90, sizeof t90, "%lld", (long long)s->trial_90);
      char name[35];
      snprintf(name, sizeof name, "%s", tasks[i].name);
      fprintf(out, "%3d  %-34s %12s %9s %8s %10s %10s %8s %6s\n", i, name, lat,
              gf, sp, tg, og, ratio, t90);
    }
    if (a->summary_measure && a->confirm_top > 0 && !a->tracker)
      fprintf(out,
              "Latency and GFLOP/s: the best candidate, confirmed (the median "
              "of interleaved re-runs of the top %ld%s);\n",
              a->confirm_top,
              a->model && a->confirm_cold
                  ? ", each one call with the weights evicted"
                  : "");
    else
      fprintf(out, "Latency and GFLOP/s: the best measured candidate (not "
                   "confirmed: `tessera db confirm`);\n");
    bool in_confirm = false;
    for (int i = 0; i < r->n_tasks; i++) in_confirm |= rows[i].side_in_confirm;
    char rounds[96];
    if (in_confirm)
      snprintf(rounds, sizeof rounds,
               "the confirmation's %d interleaved rounds",
               ts_confirm_defaults().rounds);
    else
      snprintf(rounds, sizeof rounds, "%d interleaved rounds", SIDE_ROUNDS);
    fprintf(out,
            "Speedup: over "
            "the unscheduled code;\n*tuned and oneDNN: GFLOP/s measured side "
            "by side in this process after the search (%d thread%s),\n"
            "medians of %s; ratio = the median of the rounds' tuned / "
            "oneDNN;\n90%%@: the job trial at which 90%% of the final best "
            "was reached.\n",
            threads, threads == 1 ? "" : "s", rounds);
    for (int i = 0; i < r->n_tasks; i++)
      /* a library workload oneDNN could run, or a model's task with a
       * vendor call (what `compile --dispatch best` then cannot weigh) */
      if (rows[i].onednn_why[0] && (matmul_like(wl[i]) || !wl[i]))
        fprintf(out, "task %d: oneDNN not measured: %s\n", i,
                rows[i].onednn_why);
    tune_print_forms(a, db, target, wl, rows, r->n_tasks, out);
  }
  fflush(out);
  ts_runtime_destroy(rt);
  ts_target_free(t);
}

/* The command that resumes the job: this one with --job NAME. */
static void print_resume_hint(int argc, char **argv, const char *job,
                              bool had_job) {
  fprintf(stderr, "resume with:\n  tessera");
  for (int i = 0; i < argc; i++) {
    /* a database URL's password is not printed (PGPASSWORD or ~/.pgpass
     * supply it on the resume) */
    char *shown = ts_db_display_name(argv[i]);
    const char *s = shown ? shown : argv[i];
    bool plain = s[0] && !strpbrk(s, " \t'\"$\\*?");
    fprintf(stderr, plain ? " %s" : " '%s'", s);
    free(shown);
  }
  if (!had_job) fprintf(stderr, " --job %s", job);
  fprintf(stderr, "\n");
}

/* o->target measuring on o->measure.threads threads (cli_target_for_threads:
 * the default target is rewritten; a given or resumed one that names
 * another -num-cores is refused). */
static int threads_target(ts_tune_options *o, char **buf) {
  int rc = cli_target_for_threads("tune", o->target, o->measure.threads, buf);
  if (rc == EXIT_OK) o->target = *buf;
  return rc;
}

/* The job's --rule traces (stored in its config) for a resume given no
 * --rule; given ones replace them, which is noted. */
static void resume_rules(tune_args *a, const char *job_name,
                         const cJSON *rules) {
  int n = cJSON_GetArraySize(rules);
  if (a->n_rules > 0) {
    fprintf(stderr,
            "tessera: note: job '%s': the --rule given apply to this run (the "
            "job started with %d rule%s, which a resume without --rule "
            "uses)\n",
            job_name, n, n == 1 ? "" : "s");
    return;
  }
  const cJSON *r;
  cJSON_ArrayForEach(r, rules) {
    const cJSON *block = cJSON_GetObjectItemCaseSensitive(r, "block");
    const cJSON *trace = cJSON_GetObjectItemCaseSensitive(r, "trace");
    if (!cJSON_IsString(block) || !cJSON_IsObject(trace) ||
        a->n_rules == MAX_RULES)
      continue;
    a->rule_block[a->n_rules] = strdup(block->valuestring);
    a->rule_file[a->n_rules] = NULL;
    a->rule_json[a->n_rules++] = cJSON_PrintUnformatted(trace);
  }
}

/* Fills the tasks and settings of `tessera tune --job NAME` (no workload
 * given) from the job stored in db: workloads by spec, or by hash from the
 * database's workload table; target, strategy, cost model, scheduler and
 * per-task cap unless given; --trials defaults to the job's budget. The
 * returned cJSON (*cfg) owns the strings a and o now point into. */
static int resume_settings(tune_args *a, ts_tune_options *o, ts_db *db,
                           ts_func **funcs, cJSON **cfg) {
  ts_db_job job;
  memset(&job, 0, sizeof job);
  if (ts_db_job_get(db, o->job_name, &job)) {
    fprintf(stderr,
            "tessera: error: no job '%s' in %s to resume (give --workload or "
            "--tir to start one)\n",
            o->job_name, a->db);
    return EXIT_FAIL;
  }
  *cfg = cJSON_Parse(job.config_json ? job.config_json : "{}");
  if (!a->trials_given) o->trials = job.trials_budget;
  ts_db_job_clear(&job);
  const cJSON *c = *cfg;
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(c, "target");
  if (!a->target_given && cJSON_IsString(x)) o->target = x->valuestring;
  x = cJSON_GetObjectItemCaseSensitive(c, "strategy");
  if (!a->strategy_given && cJSON_IsString(x))
    ts_strategy_parse(x->valuestring, &o->strategy);
  x = cJSON_GetObjectItemCaseSensitive(c, "cost_model");
  if (!a->cost_model_given && cJSON_IsString(x)) o->cost_model = x->valuestring;
  x = cJSON_GetObjectItemCaseSensitive(c, "policy");
  if (!a->policy_given && cJSON_IsString(x))
    ts_task_policy_parse(x->valuestring, &o->policy);
  x = cJSON_GetObjectItemCaseSensitive(c, "trials_per_task");
  if (!a->per_task_given && cJSON_IsNumber(x))
    o->trials_per_task = (int64_t)x->valuedouble;
  /* search and measurement settings: the job's, unless given again (a
   * different value is used and noted) */
  static const char *const keys[4] = {"batch", "population", "timeout_ms",
                                      "build_timeout_ms"};
  static const char *const flags[4] = {"--batch", "--population",
                                       "--timeout-ms", "--build-timeout-ms"};
  const bool given[4] = {a->batch_given, a->population_given, a->timeout_given,
                         a->build_timeout_given};
  int *vals[4] = {&o->search.batch, &o->search.population,
                  &o->measure.timeout_ms, &o->build_timeout_ms};
  for (int k = 0; k < 4; k++) {
    x = cJSON_GetObjectItemCaseSensitive(c, keys[k]);
    if (!cJSON_IsNumber(x)) continue;
    if (!given[k])
      *vals[k] = (int)x->valuedouble;
    else if (*vals[k] != (int)x->valuedouble)
      fprintf(stderr, "tessera: note: job '%s': %s %d (started with %d)\n",
              o->job_name, flags[k], *vals[k], (int)x->valuedouble);
  }
  x = cJSON_GetObjectItemCaseSensitive(c, "tensorize");
  if (!a->tensorize_given && cJSON_IsBool(x))
    o->space.tensorize = cJSON_IsTrue(x);
  else if (cJSON_IsTrue(x) && a->tensorize_given)
    fprintf(stderr,
            "tessera: note: job '%s': --no-tensorize (started with "
            "tensorization)\n",
            o->job_name);
  resume_rules(a, o->job_name, cJSON_GetObjectItemCaseSensitive(c, "rules"));
  const cJSON *arr = cJSON_GetObjectItemCaseSensitive(c, "tasks"), *t;
  cJSON_ArrayForEach(t, arr) {
    if (a->n_tasks == MAX_TASKS) break;
    int i = a->n_tasks;
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(t, "workload");
    const cJSON *hash = cJSON_GetObjectItemCaseSensitive(t, "hash");
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(t, "weight");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(t, "name");
    const cJSON *consts = cJSON_GetObjectItemCaseSensitive(t, "const_params");
    a->weights[i] = cJSON_IsNumber(w) ? w->valuedouble : 1;
    a->names[i] = cJSON_IsString(name) ? name->valuestring : NULL;
    a->consts[i] = cJSON_IsString(consts)
                       ? (uint64_t)strtoull(consts->valuestring, NULL, 16)
                       : 0;
    if (cJSON_IsString(spec)) {
      a->specs[i] = spec->valuestring;
      a->is_tir[i] = false;
    } else {
      int64_t id;
      if (!cJSON_IsString(hash) ||
          ts_db_resolve_workload(db, hash->valuestring, &id) ||
          ts_db_workload_func(db, id, &funcs[i])) {
        fprintf(stderr,
                "tessera: error: job '%s': workload %d is not in the "
                "database\n",
                o->job_name, i);
        return EXIT_FAIL;
      }
    }
    a->n_tasks++;
  }
  if (!a->n_tasks) {
    fprintf(stderr, "tessera: error: job '%s' lists no workload\n",
            o->job_name);
    return EXIT_FAIL;
  }
  return EXIT_OK;
}

/* The tasks of the candidates a pass weighed (each built alone: --pet's
 * mutants, --layout auto's layouts) appended to the model's (*gt, *n),
 * those not already there, so that `compile --db` with the same pass
 * finds their latencies. */
static int add_candidates(const ts_graph_task *alt, int n_alt, const char *pass,
                          ts_graph_task **gt, int *n) {
  int added = 0;
  if (!n_alt) return EXIT_OK;
  ts_graph_task *all = realloc(*gt, sizeof *all * (size_t)(*n + n_alt));
  if (!all) return EXIT_FAIL;
  *gt = all;
  for (int i = 0; i < n_alt; i++) {
    bool seen = false;
    for (int k = 0; k < *n && !seen; k++)
      seen = ts_hash128_eq(all[k].hash, alt[i].hash);
    if (!seen) all[(*n)++] = alt[i], added++;
  }
  fprintf(stderr, "%s: %d task%s of the candidates it weighed added\n", pass,
          added, added == 1 ? "" : "s");
  return EXIT_OK;
}

static int pass_candidates(const ts_graph *g, ts_graph_task **gt, int *n) {
  const ts_graph_task *alt;
  int n_alt = 0;
  ts_graph_pet_candidate_tasks(g, &alt, &n_alt);
  if (add_candidates(alt, n_alt, "pet", gt, n) != EXIT_OK) return EXIT_FAIL;
  ts_graph_block_candidate_tasks(g, &alt, &n_alt);
  if (add_candidates(alt, n_alt, "block", gt, n) != EXIT_OK) return EXIT_FAIL;
  ts_graph_winograd_candidate_tasks(g, &alt, &n_alt);
  return add_candidates(alt, n_alt, "winograd", gt, n);
}

/* The tasks of `--model`: the distinct fused groups of the compiled graph,
 * each weighted by how often the graph calls it (the scheduler weighs the
 * latency it can save, so FLOPs count through the latency). funcs[i] are
 * copies the caller frees; a->names[i] are malloc'd ("function@first
 * node"). */
/* The model's tasks at one set of sizes of its named dimensions (none, or
 * a bucket of --shape-buckets), appended to (*gt, *n) with their call
 * counts; a task seen at another size already has its count raised. *gs
 * keeps the graph (it owns the tasks' functions). */
static int bucket_tasks(tune_args *a, const char *const *dims, int n_dims,
                        ts_graph **gs, ts_graph_task **gt, char ***labels,
                        int *n) {
  int rc = *gs ? EXIT_OK : EXIT_FAIL; /* a padded graph loaded already */
  if (rc != EXIT_OK) {
    cli_set_extra_dims(dims, n_dims);
    rc = cli_load_model(a->model, a->shapes, a->n_shapes, gs);
    cli_set_extra_dims(NULL, 0);
  }
  if (rc != EXIT_OK) {
    for (int i = 0; i < n_dims; i++) fprintf(stderr, "  (at %s)\n", dims[i]);
    return EXIT_FAIL;
  }
  ts_graph_task *t = NULL;
  int m = 0;
  ts_error err;
  ts_error_clear(&err);
  if (ts_graph_tasks(*gs, &t, &m, &err) != TS_OK) {
    cli_error("cannot list the model's tasks", &err);
    return EXIT_FAIL;
  }
  if (pass_candidates(*gs, &t, &m) != EXIT_OK) {
    free(t);
    fprintf(stderr, "tessera: error: out of memory\n");
    return EXIT_FAIL;
  }
  ts_graph_task *all = realloc(*gt, sizeof *all * (size_t)(*n + m + 1));
  if (all) *gt = all;
  char **lab =
      all ? realloc(*labels, sizeof *lab * (size_t)(*n + m + 1)) : NULL;
  if (lab) *labels = lab;
  char where[700] = "";
  for (int i = 0; i < n_dims; i++)
    snprintf(where + strlen(where), sizeof where - strlen(where), "%s%s",
             i ? "," : "@", dims[i]);
  for (int i = 0; lab && i < m; i++) {
    int k = 0;
    while (k < *n && !ts_hash128_eq(all[k].hash, t[i].hash)) k++;
    if (k < *n) {
      all[k].count += t[i].count;
      continue;
    }
    char name[900];
    snprintf(name, sizeof name, "%s%s", t[i].first_node, where);
    if (!(lab[*n] = strdup(name))) break;
    all[(*n)++] = t[i];
  }
  bool done = lab && (m == 0 || lab[*n - 1]);
  free(t);
  if (!done) fprintf(stderr, "tessera: error: out of memory\n");
  return done ? EXIT_OK : EXIT_FAIL;
}

/* --shape-buckets SYMBOL=S1,S2,... (ascending sizes, 16 at most) */
static int bucket_option(tune_args *a, const char *v) {
  if (a->n_bucket_syms == 2)
    return cli_usage_error("tune", "--shape-buckets: two symbols at most");
  int s = a->n_bucket_syms;
  int rc =
      cli_bucket_option("tune", v, a->bucket_sym[s], sizeof a->bucket_sym[s],
                        a->buckets[s], &a->n_buckets[s], 16);
  if (rc == EXIT_OK) a->n_bucket_syms++;
  return rc;
}

static int model_tasks_with(tune_args *a, ts_func **funcs);

static int model_tasks(tune_args *a, ts_func **funcs) {
  cli_pet_measure(NULL, NULL, true);
  /* --layout auto and --winograd-tile measure: the plan the database's
   * records give, so that its fused tasks are measured too (a database
   * that is not there yet: none) */
  ts_db *plan_db = NULL;
  if ((cli_block_on() || cli_winograd_tile < 0) && a->db &&
      access(a->db, R_OK) == 0) {
    ts_db_options dbo = ts_db_defaults();
    dbo.read_only = true;
    ts_error derr;
    ts_error_clear(&derr);
    if (ts_db_open(a->db, &dbo, &plan_db, &derr) == TS_OK) {
      cli_block_measure(plan_db, NULL); /* this host, as compile */
      cli_winograd_measure(plan_db, NULL);
    }
  }
  int status = model_tasks_with(a, funcs);
  cli_block_measure(NULL, NULL);
  cli_winograd_measure(NULL, NULL);
  if (plan_db) ts_db_close(plan_db);
  return status;
}

/* --confirm-in-model: the model as `tessera compile` builds it from the
 * database (the block and pet passes weighing by it), confirmed in the
 * compiled model (model_confirm.c). */
static int confirm_in_model(const tune_args *a, ts_db *db, const char *target,
                            int threads) {
  char *canon = ts_db_canonical_target(db, target);
  if (!canon) {
    fprintf(stderr, "tessera: error: %s\n", ts_db_errmsg(db));
    return EXIT_FAIL;
  }
  /* the model runs here: a target this machine cannot run is skipped, with
   * a note (an error when asked for) */
  ts_target *t = NULL;
  ts_error terr;
  ts_error_clear(&terr);
  int trc = ts_target_parse(canon, &t, &terr);
  if (!trc) trc = ts_target_check_runs_here(t, "in-model confirmation", &terr);
  ts_target_free(t);
  if (trc) {
    fprintf(stderr, "tessera: %s: %s\n",
            a->confirm_model == 1 ? "error" : "note", terr.msg);
    free(canon);
    return a->confirm_model == 1 ? EXIT_FAIL : EXIT_OK;
  }
  cli_model_confirm_options o = cli_model_confirm_defaults();
  o.target = canon;
  o.threads = threads;
  o.out = a->json ? stderr : stdout;
  o.progress = a->quiet ? NULL : stderr;
  int rc =
      cli_confirm_model_file(db, a->model, a->shapes, a->n_shapes, target, &o);
  free(canon);
  return rc;
}

static int model_tasks_with(tune_args *a, ts_func **funcs) {
  /* one graph per bucket (a pair of sizes with two symbols) */
  int nb0 = a->n_bucket_syms ? a->n_buckets[0] : 1;
  int nb1 = a->n_bucket_syms > 1 ? a->n_buckets[1] : 1;
  int n_graphs = nb0 * nb1;
  ts_graph **gs = calloc((size_t)n_graphs, sizeof *gs);
  ts_graph_task *gt = NULL;
  char **labels = NULL;
  int n = 0, status = EXIT_FAIL;
  bool ok = gs != NULL;
  if (ok && a->n_bucket_syms == 1) { /* the padded graphs compile builds */
    int64_t sz[16];
    for (int b = 0; b < nb0; b++) sz[b] = a->buckets[0][b];
    int rc = cli_load_padded(a->model, a->shapes, a->n_shapes, a->bucket_sym[0],
                             sz, nb0, gs);
    if (rc == CLI_CANNOT_PAD)
      fprintf(stderr,
              "tessera: note: tuning at the exact sizes instead; the records "
              "serve `compile --dim %s=N`\n",
              a->bucket_sym[0]);
    else if (rc != EXIT_OK)
      ok = false;
  }
  for (int b = 0; ok && b < n_graphs; b++) {
    char dim[2][320];
    const char *dims[2];
    for (int s = 0; s < a->n_bucket_syms; s++) {
      long size = a->buckets[s][s ? b / nb0 : b % nb0];
      snprintf(dim[s], sizeof dim[s], "%s=%ld", a->bucket_sym[s], size);
      dims[s] = dim[s];
    }
    ok = bucket_tasks(a, dims, a->n_bucket_syms, &gs[b], &gt, &labels, &n) ==
         EXIT_OK;
  }
  if (!ok) {
    if (!gs) fprintf(stderr, "tessera: error: out of memory\n");
  } else if (n == 0) {
    fprintf(stderr, "tessera: error: model '%s' has no task to tune\n",
            a->model);
  } else if (n > MAX_TASKS) {
    fprintf(stderr,
            "tessera: error: model '%s' has %d distinct tasks; a job takes "
            "at most %d\n",
            a->model, n, MAX_TASKS);
  } else {
    for (int i = 0; i < n; i++) {
      funcs[i] = ts_func_copy(gt[i].func);
      a->names[i] = labels[i];
      labels[i] = NULL;
      a->weights[i] = gt[i].count;
      a->vendor[i] = gt[i].vendor ? strdup(gt[i].vendor) : NULL;
      a->consts[i] = gt[i].const_params;
      a->is_tir[i] = true;
      a->specs[i] = NULL;
      a->n_tasks = i + 1;
      if (!funcs[i] || !a->names[i]) {
        fprintf(stderr, "tessera: error: out of memory\n");
        break;
      }
    }
    if (a->n_tasks == n && funcs[n - 1] && a->names[n - 1]) {
      int calls = 0;
      for (int i = 0; i < n; i++) calls += gt[i].count;
      if (n_graphs > 1)
        fprintf(stderr,
                "model '%s': %d distinct tasks over %d sizes, %d calls per "
                "run summed over the sizes\n",
                a->model, n, n_graphs, calls);
      else
        fprintf(stderr, "model '%s': %d distinct tasks, %d calls per run\n",
                a->model, n, calls);
      status = EXIT_OK;
    }
  }
  for (int i = 0; i < n; i++) free(labels[i]);
  free(labels);
  free(gt);
  for (int b = 0; gs && b < n_graphs; b++) ts_graph_free(gs[b]);
  free(gs);
  return status;
}

int cmd_tune(int argc, char **argv) {
  tune_args a;
  memset(&a, 0, sizeof a);
  a.db = "tessera.db";
  a.summary_measure = true;
  a.compare_rounds = 9;
  a.confirm_top = ts_confirm_defaults().top_k;
  a.confirm_model = -1;
  ts_tune_options o = ts_tune_defaults();
  long v;
  for (int i = 1; i < argc; i++) {
    const char *val;
    bool missing = false, tir;
    int rc = EXIT_OK;
#define NEED(name)                                                             \
  if (missing) return cli_usage_error("tune", "%s needs a value", name)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(tune_usage, stdout);
      fputs("\nwith --model:\n", stdout);
      fputs(cli_pass_usage, stdout);
      return EXIT_OK;
    } else if (!strcmp(argv[i], "--quiet")) {
      a.quiet = true;
    } else if (!strcmp(argv[i], "--json")) {
      a.json = true;
    } else if (!strcmp(argv[i], "--no-tensorize")) {
      o.space.tensorize = false;
      a.tensorize_given = true;
    } else if (!strcmp(argv[i], "--no-summary-measure")) {
      a.summary_measure = false;
    } else if (!strcmp(argv[i], "--compare-models")) {
      a.compare_models = true;
    } else if (cli_opt_value(argc, argv, &i, "--compare-rounds", &val,
                             &missing)) {
      NEED("--compare-rounds");
      rc = int_option("--compare-rounds", val, 1, 99, &a.compare_rounds);
      a.compare_rounds_given = true;
    } else if (!strcmp(argv[i], "--confirm-cold")) {
      a.confirm_cold = true;
    } else if (!strcmp(argv[i], "--winograd")) {
      a.winograd = true;
    } else if (!strcmp(argv[i], "--confirm-in-model")) {
      a.confirm_model = 1;
    } else if (!strcmp(argv[i], "--no-confirm-in-model")) {
      a.confirm_model = 0;
    } else if (cli_opt_value(argc, argv, &i, "--confirm-top", &val, &missing)) {
      NEED("--confirm-top");
      rc = int_option("--confirm-top", val, 0, 64, &a.confirm_top);
    } else if ((tir = false,
                cli_opt_value(argc, argv, &i, "--workload", &val, &missing)) ||
               (tir = true,
                cli_opt_value(argc, argv, &i, "--tir", &val, &missing))) {
      NEED(tir ? "--tir" : "--workload");
      if (a.n_tasks == MAX_TASKS)
        return cli_usage_error("tune", "at most %d workloads", MAX_TASKS);
      a.is_tir[a.n_tasks] = tir;
      a.weights[a.n_tasks] = 1;
      a.specs[a.n_tasks++] = val;
    } else if (cli_opt_value(argc, argv, &i, "--model", &val, &missing)) {
      NEED("--model");
      if (a.model) return cli_usage_error("tune", "one --model per job");
      a.model = val;
    } else if (cli_pass_option("tune", argc, argv, &i, &rc)) {
      if (rc != EXIT_OK) return rc;
    } else if (cli_opt_value(argc, argv, &i, "--shape-buckets", &val,
                             &missing)) {
      NEED("--shape-buckets");
      int rc = bucket_option(&a, val);
      if (rc != EXIT_OK) return rc;
    } else if (cli_opt_value(argc, argv, &i, "--input-shape", &val, &missing)) {
      NEED("--input-shape");
      if (a.n_shapes == MAX_SHAPES)
        return cli_usage_error("tune", "at most %d --input-shape", MAX_SHAPES);
      a.shapes[a.n_shapes++] = val;
    } else if (cli_opt_value(argc, argv, &i, "--weight", &val, &missing)) {
      NEED("--weight");
      char *end;
      double w = strtod(val, &end);
      if (!a.n_tasks)
        return cli_usage_error("tune", "--weight follows a --workload/--tir");
      if (!*val || *end || !(w >= 0) || !isfinite(w))
        return cli_usage_error("tune", "--weight: '%s' is not a number >= 0",
                               val);
      a.weights[a.n_tasks - 1] = w;
    } else if (cli_opt_value(argc, argv, &i, "--target", &val, &missing)) {
      NEED("--target");
      o.target = val;
      a.target_given = true;
    } else if (cli_opt_value(argc, argv, &i, "--trials-per-task", &val,
                             &missing)) {
      NEED("--trials-per-task");
      rc = int_option("--trials-per-task", val, 0, 100000000, &v);
      o.trials_per_task = v;
      a.per_task_given = true;
    } else if (cli_opt_value(argc, argv, &i, "--trials", &val, &missing)) {
      NEED("--trials");
      rc = int_option("--trials", val, 0, 100000000, &v);
      o.trials = v;
      a.trials_given = true;
    } else if (cli_opt_value(argc, argv, &i, "--db", &val, &missing)) {
      NEED("--db");
      a.db = val;
    } else if (cli_opt_value(argc, argv, &i, "--tracker", &val, &missing)) {
      NEED("--tracker");
      a.tracker = val;
    } else if (cli_opt_value(argc, argv, &i, "--key", &val, &missing)) {
      NEED("--key");
      a.key = val;
    } else if (cli_opt_value(argc, argv, &i, "--token-file", &val, &missing)) {
      NEED("--token-file");
      a.token_file = val;
    } else if (cli_opt_value(argc, argv, &i, "--job", &val, &missing)) {
      NEED("--job");
      if (!*val || strlen(val) > 120)
        return cli_usage_error("tune", "--job: a name of 1 to 120 characters");
      o.job_name = val;
    } else if (cli_opt_value(argc, argv, &i, "--seed", &val, &missing)) {
      NEED("--seed");
      rc = int_option("--seed", val, 0, 2147483647, &v);
      o.seed = (uint64_t)v;
    } else if (cli_opt_value(argc, argv, &i, "--cost-model", &val, &missing)) {
      NEED("--cost-model");
      if (strcmp(val, "xgb") && strcmp(val, "random"))
        return cli_usage_error("tune", "--cost-model: xgb or random, not '%s'",
                               val);
      o.cost_model = val;
      a.cost_model_given = true;
    } else if (cli_opt_value(argc, argv, &i, "--strategy", &val, &missing)) {
      NEED("--strategy");
      if (ts_strategy_parse(val, &o.strategy))
        return cli_usage_error(
            "tune", "--strategy: evolutionary or random, not '%s'", val);
      a.strategy_given = true;
    } else if (cli_opt_value(argc, argv, &i, "--task-scheduler", &val,
                             &missing)) {
      NEED("--task-scheduler");
      if (ts_task_policy_parse(val, &o.policy))
        return cli_usage_error(
            "tune", "--task-scheduler: gradient or round-robin, not '%s'", val);
      a.policy_given = true;
    } else if (cli_opt_value(argc, argv, &i, "--rule", &val, &missing)) {
      NEED("--rule");
      const char *eq = strchr(val, '=');
      if (!eq || eq == val || !eq[1])
        return cli_usage_error("tune", "--rule wants BLOCK=FILE, got '%s'",
                               val);
      if (a.n_rules == MAX_RULES)
        return cli_usage_error("tune", "at most %d rules", MAX_RULES);
      a.rule_block[a.n_rules] = strndup(val, (size_t)(eq - val));
      a.rule_file[a.n_rules++] = eq + 1;
    } else if (cli_opt_value(argc, argv, &i, "--max-memory-mb", &val,
                             &missing)) {
      NEED("--max-memory-mb");
      rc = int_option("--max-memory-mb", val, 1, 1L << 40, &a.max_memory_mb);
    } else if (cli_opt_value(argc, argv, &i, "--max-gflop", &val, &missing)) {
      NEED("--max-gflop");
      rc = int_option("--max-gflop", val, 1, 1L << 40, &a.max_gflop);
    } else if (cli_opt_value(argc, argv, &i, "--batch", &val, &missing)) {
      NEED("--batch");
      rc = int_option("--batch", val, 1, 1024, &v);
      o.search.batch = (int)v;
      a.batch_given = true;
    } else if (cli_opt_value(argc, argv, &i, "--population", &val, &missing)) {
      NEED("--population");
      rc = int_option("--population", val, 1, 65536, &v);
      o.search.population = (int)v;
      a.population_given = true;
    } else if (cli_opt_value(argc, argv, &i, "--threads", &val, &missing)) {
      NEED("--threads");
      rc = int_option("--threads", val, 1, TS_RT_MAX_THREADS, &v);
      o.measure.threads = (int)v;
    } else if (cli_opt_value(argc, argv, &i, "--timeout-ms", &val, &missing)) {
      NEED("--timeout-ms");
      rc = int_option("--timeout-ms", val, 100, 3600000, &v);
      o.measure.timeout_ms = (int)v;
      a.timeout_given = true;
    } else if (cli_opt_value(argc, argv, &i, "--build-timeout-ms", &val,
                             &missing)) {
      NEED("--build-timeout-ms");
      rc = int_option("--build-timeout-ms", val, 0, 86400000, &v);
      o.build_timeout_ms = (int)v;
      a.build_timeout_given = true;
    } else if (cli_opt_value(argc, argv, &i, "--log", &val, &missing)) {
      NEED("--log");
      a.log = val;
    } else {
      return cli_usage_error("tune", "unknown option '%s'", argv[i]);
    }
#undef NEED
    if (rc != EXIT_OK) return rc;
  }
  if (a.model && a.n_tasks)
    return cli_usage_error("tune", "--model takes its tasks from the model: "
                                   "no --workload/--tir beside it");
  if (a.n_shapes && !a.model)
    return cli_usage_error("tune", "--input-shape goes with --model");
  if (a.confirm_cold && !a.model)
    return cli_usage_error("tune", "--confirm-cold goes with --model");
  if (a.winograd && (a.model || !a.n_tasks))
    return cli_usage_error("tune", "--winograd goes with --workload (a "
                                   "model's convs are weighed by the "
                                   "compiler's winograd pass)");
  if (a.confirm_model == 1 && (!a.model || a.n_bucket_syms))
    return cli_usage_error("tune", "--confirm-in-model goes with --model, "
                                   "without --shape-buckets");
  if (a.n_bucket_syms && !a.model)
    return cli_usage_error("tune", "--shape-buckets goes with --model");
  if (!a.n_tasks && !o.job_name && !a.model)
    return cli_usage_error("tune", "give at least one --workload, --tir or "
                                   "--model (or --job NAME to resume a job)");
  if (a.tracker && !a.key)
    return cli_usage_error("tune", "--tracker needs --key");
  if (a.compare_models && (!a.n_tasks || a.cost_model_given))
    return cli_usage_error("tune", "--compare-models needs --workload/--tir "
                                   "and chooses the cost models itself");
  if (a.compare_rounds_given && !a.compare_models)
    return cli_usage_error("tune", "--compare-rounds goes with "
                                   "--compare-models");

  int status = EXIT_FAIL;
  ts_error err;
  ts_error_clear(&err);
  ts_runner *runner = NULL;
  ts_db *db = NULL;
  char *token = NULL;
  FILE *log = NULL;
  ts_workload *wl[MAX_TASKS] = {0};
  ts_func *funcs[MAX_TASKS] = {0};
  ts_tune_task tasks[MAX_TASKS];
  ts_custom_rule rules[MAX_RULES];
  ts_trace *rule_traces[MAX_RULES] = {0};
  ts_tune_result result;
  cJSON *cfg_json = NULL;  /* a resumed job's stored settings */
  char *target_buf = NULL; /* the target with --threads as -num-cores */
  memset(&result, 0, sizeof result);
  memset(tasks, 0, sizeof tasks);

  /* the model's tasks before anything is created for the job */
  cli_model_target(o.target);
  if (a.model && model_tasks(&a, funcs) != EXIT_OK) goto done;
  /* the measurement pool first: it forks its helper before any thread */
  if (a.tracker) {
    if (cli_read_token(a.token_file, &token) != EXIT_OK) goto done;
    ts_rpc_runner_options ro = ts_rpc_runner_defaults();
    char name[64];
    snprintf(name, sizeof name, "tune-%d", (int)getpid());
    ro.tracker = a.tracker;
    ro.key = a.key;
    ro.token = token;
    ro.name = name;
    if (ts_runner_rpc_create(&ro, &runner, &err)) {
      cli_error("cannot create the RPC runner", &err);
      goto done;
    }
  } else if (ts_runner_embedded_create(NULL, &runner, &err)) {
    cli_error("cannot start the embedded measurement pool", &err);
    goto done;
  }
  ts_db_options dbo = ts_db_defaults();
  dbo.check_trace = ts_trace_check_json;
  if (!a.compare_models && ts_db_open(a.db, &dbo, &db, &err)) {
    cli_error("cannot open the database", &err);
    goto done;
  }
  bool resumed = !a.n_tasks;
  if (resumed && resume_settings(&a, &o, db, funcs, &cfg_json) != EXIT_OK)
    goto done;
  for (int i = 0; i < a.n_tasks; i++) {
    if (funcs[i]) { /* the model's tasks or the job's stored workloads */
      if (a.model && cli_admit(NULL, funcs[i], a.max_memory_mb,
                               (double)a.max_gflop) != EXIT_OK)
        goto done;
      tasks[i].func = funcs[i];
      tasks[i].name = a.names[i] ? a.names[i] : ts_func_name(funcs[i]);
      tasks[i].weight = a.weights[i];
      tasks[i].const_params = a.consts[i];
      continue;
    }
    if (cli_load_func(a.is_tir[i] ? NULL : a.specs[i],
                      a.is_tir[i] ? a.specs[i] : NULL, &wl[i],
                      &funcs[i]) != EXIT_OK)
      goto done;
    if (cli_admit(wl[i], funcs[i], a.max_memory_mb, (double)a.max_gflop) !=
        EXIT_OK)
      goto done;
    tasks[i].func = funcs[i];
    tasks[i].name = wl[i] ? wl[i]->name : ts_func_name(funcs[i]);
    tasks[i].spec = wl[i] ? wl[i]->spec : NULL;
    tasks[i].weight = a.weights[i];
    tasks[i].flops = wl[i] ? wl[i]->flops : 0;
  }
  if (a.winograd && tune_add_form_tasks(&a, wl, funcs, tasks) != EXIT_OK)
    goto done;
  if (resumed) tune_mark_resumed_forms(&a, wl, funcs);
  for (int i = 0; i < a.n_rules; i++) {
    if (a.rule_json[i]
            ? ts_trace_from_json(a.rule_json[i], strlen(a.rule_json[i]),
                                 &rule_traces[i], &err)
            : ts_trace_from_json_file(a.rule_file[i], &rule_traces[i], &err)) {
      cli_error(a.rule_json[i] ? "cannot read the job's stored --rule trace"
                               : "cannot read the --rule trace",
                &err);
      goto done;
    }
    rules[i].block = a.rule_block[i];
    rules[i].trace = rule_traces[i];
  }
  o.space.custom_rules = rules;
  o.space.n_custom_rules = a.n_rules;
  if (a.log && !(log = fopen(a.log, "a"))) {
    fprintf(stderr, "tessera: error: cannot open --log file '%s'\n", a.log);
    goto done;
  }
  FILE *out = a.json ? stderr : stdout;
  o.output.out = a.quiet ? NULL : out;
  o.output.log = log;
  o.output.tty = isatty(fileno(out));
  o.stop = &stop_requested;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);

  /* the measurement threads are part of the target (-num-cores): records
   * measured on N threads are filed, looked up and resumed as such */
  if (o.measure.threads > 0) {
    int trc = threads_target(&o, &target_buf);
    if (trc != EXIT_OK) {
      status = trc;
      goto done;
    }
  }
  int threads = o.measure.threads;
  if (threads <= 0) {
    ts_target *t = NULL;
    if (!ts_target_parse(o.target, &t, NULL)) threads = ts_target_num_cores(t);
    ts_target_free(t);
  }
  if (threads <= 0) threads = 1;
  if (a.compare_models) {
    status = tune_compare_models(runner, a.db, &o, tasks, a.n_tasks, threads,
                                 (int)a.compare_rounds, a.json);
    sa.sa_handler = SIG_DFL;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    goto done;
  }
  int rc = ts_tune(db, runner, tasks, a.n_tasks, &o, &result, &err);
  sa.sa_handler = SIG_DFL;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  if (rc) {
    cli_error("tuning failed", &err);
    if (result.job_name[0]) {
      fprintf(stderr, "the trials committed before the failure are kept; ");
      print_resume_hint(argc, argv, result.job_name, o.job_name != NULL);
    }
    goto done;
  }
  if (result.state == TS_DB_JOB_INTERRUPTED) {
    fprintf(stderr,
            "\ninterrupted: job '%s' stopped after committing its last batch "
            "(%lld of %lld trials done).\n",
            result.job_name, (long long)result.trials_done,
            (long long)o.trials);
    print_resume_hint(argc, argv, result.job_name, o.job_name != NULL);
    status = 130;
    goto done;
  }
  sa.sa_handler = on_summary_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  summary_row *rows = calloc((size_t)result.n_tasks + 1, sizeof *rows);
  if (!rows) {
    fprintf(stderr, "tessera: error: out of memory\n");
    goto done;
  }
  if (a.summary_measure && a.confirm_top > 0 && !a.tracker)
    confirm_tasks(&a, db, o.target, tasks, wl, &result, threads, rows);
  bool in_model =
      a.model && !a.tracker && !a.n_bucket_syms &&
      (a.confirm_model == 1 ||
       (a.confirm_model < 0 && a.summary_measure && a.confirm_top > 0));
  /* the job's records stand whatever happens here */
  if (in_model && confirm_in_model(&a, db, o.target, threads) != EXIT_OK)
    fprintf(stderr, "tessera: warning: the in-model confirmation did not "
                    "complete (above); the job's records and their "
                    "confirmation stand\n");
  print_summary(&a, db, o.target, tasks, wl, &result, threads, rows,
                a.json ? stdout : out);
  free(rows);
  sa.sa_handler = SIG_DFL;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  status = EXIT_OK;
  /* A job that measured and got nothing right has failed. */
  int64_t ok = 0, measured = 0;
  for (int i = 0; i < result.n_tasks; i++) {
    ok += result.tasks[i].by_status[TS_DB_STATUS_OK];
    measured += result.tasks[i].trials;
  }
  if (measured > 0 && ok == 0) {
    fprintf(stderr,
            "tessera: error: none of the job's %lld trials measured ok (see "
            "the status counts above)\n",
            (long long)measured);
    status = EXIT_FAIL;
  }

done:
  cJSON_Delete(cfg_json);
  free(target_buf);
  for (int i = 0; i < a.n_tasks; i++) {
    if (a.model || a.own_name[i]) free((char *)a.names[i]);
    free(a.vendor[i]);
  }
  ts_tune_result_clear(&result);
  for (int i = 0; i < a.n_rules; i++) {
    ts_trace_free(rule_traces[i]);
    free((char *)a.rule_block[i]);
    free(a.rule_json[i]);
  }
  for (int i = 0; i < a.n_tasks; i++) {
    if (wl[i])
      ts_workload_free(wl[i]);
    else
      ts_func_free(funcs[i]);
  }
  if (log) fclose(log);
  ts_db_close(db);
  ts_runner_destroy(runner);
  free(token);
  return status;
}
