/*
 * test_tune.c — tuning jobs end to end on the embedded pool, with small
 * workloads and budgets: a job measures exactly its budget, commits every
 * candidate (one JSON Lines log line each), never measures a schedule
 * twice, and its best trace replays to a function whose output matches
 * the reference interpreter; its first trial is the default schedule;
 * re-running the job continues the trial count;
 * an output of 4 MiB or more also gets its default schedule with
 * non-temporal stores as trial 1
 * (and retrains the cost model past its threshold); a resumed job prunes
 * recomputing candidates from its first batch on; a task whose space
 * runs dry stops early; a build over its time limit fails alone.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <sqlite3.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

#define OK(x) assert_int_equal((x), TS_OK)

#include "jobutil.h"

static int count_lines(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  int n = 0;
  char line[8192];
  while (fgets(line, sizeof line, f)) {
    cJSON *j = cJSON_Parse(line);
    assert_non_null(j);
    assert_non_null(cJSON_GetObjectItemCaseSensitive(j, "status"));
    assert_non_null(cJSON_GetObjectItemCaseSensitive(j, "trial"));
    cJSON_Delete(j);
    n++;
  }
  fclose(f);
  return n;
}

static void test_end_to_end_and_resume(void **state) {
  (void)state;
  ts_runner *runner = NULL;
  ts_error err;
  OK(ts_runner_embedded_create(NULL, &runner, &err));
  ts_db *db = open_db("e2e.db");
  ts_workload *w = tu_workload("matmul M=32 N=48 K=64");
  ts_tune_task task = task_of(w);
  char log_path[512];
  path_in(log_path, sizeof log_path, "e2e.jsonl");
  FILE *log = fopen(log_path, "w");
  ts_tune_options o = small_options();
  o.job_name = "e2e";
  o.trials = 48;
  o.output.log = log;
  ts_tune_result r;
  int rc = ts_tune(db, runner, &task, 1, &o, &r, &err);
  if (rc) printf("%s\n", err.msg);
  OK(rc);
  fclose(log);
  assert_false(r.resumed);
  assert_int_equal(r.state, TS_DB_JOB_FINISHED);
  assert_int_equal(r.trials_done, 48);
  assert_int_equal(r.trials_now, 48);
  assert_int_equal(r.n_tasks, 1);
  assert_true(isfinite(r.tasks[0].best_seconds));
  assert_non_null(r.tasks[0].best_trace_json);
  assert_int_equal(count_lines(log_path), 48);
  int64_t wid = r.tasks[0].workload_id;
  int64_t job = r.job_id;
  bool trials_ok, schedules_ok;
  assert_int_equal(
      job_records(db, wid, "llvm", job, &trials_ok, &schedules_ok, w->func),
      48);
  assert_true(trials_ok);
  assert_true(schedules_ok);
  check_best(db, wid, "llvm", w->func);
  /* trial 0 is the default schedule (what compile builds untuned): its
   * stored trace replays to the same function */
  {
    ts_db_record *rec = NULL;
    int nrec = 0;
    OK(ts_db_records_of(db, wid, "llvm", &rec, &nrec));
    const ts_db_record *first = NULL;
    for (int i = 0; i < nrec; i++)
      if (rec[i].job_id == job && rec[i].trial == 0) first = &rec[i];
    assert_non_null(first);
    ts_trace *full = NULL;
    OK(ts_record_traces(first->trace_json, &full, NULL, &err));
    ts_sched *replayed = NULL, *def = NULL;
    OK(ts_trace_apply(full, w->func, 0, &replayed, &err));
    ts_target *tgt = NULL;
    OK(ts_target_parse("llvm", &tgt, &err));
    OK(ts_default_schedule(w->func, tgt, &def, &err));
    assert_true(ts_hash128_eq(ts_func_hash(ts_sched_func(replayed)),
                              ts_func_hash(ts_sched_func(def))));
    ts_sched_destroy(replayed);
    ts_sched_destroy(def);
    ts_target_free(tgt);
    ts_trace_free(full);
    ts_db_records_free(rec, nrec);
  }
  ts_tune_result_clear(&r);
  /* resume: the budget grows, only the rest is measured; past 64 samples
   * the XGBoost model trains */
  o.trials = 80;
  o.output.log = NULL;
  OK(ts_tune(db, runner, &task, 1, &o, &r, &err));
  assert_true(r.resumed);
  assert_int_equal(r.trials_done, 80);
  assert_int_equal(r.trials_now, 32);
  assert_int_equal(
      job_records(db, wid, "llvm", job, &trials_ok, &schedules_ok, w->func),
      80);
  assert_true(trials_ok);
  assert_true(schedules_ok);
  ts_tune_result_clear(&r);
  /* resuming a finished job with the same budget measures nothing */
  OK(ts_tune(db, runner, &task, 1, &o, &r, &err));
  assert_int_equal(r.trials_now, 0);
  assert_int_equal(r.trials_done, 80);
  ts_tune_result_clear(&r);
  ts_workload_free(w);
  ts_db_close(db);
  ts_runner_destroy(runner);
}

/* A resumed job prunes heavy candidates (cand_too_heavy) from its first
 * batch on: the float work of its stored fastest is read from that record.
 * The stored default is made unbeatable (its time set to 1 ps), so no
 * candidate of the resumed run becomes the new fastest: before, that run
 * pruned nothing. Softmax's space has many candidates that recompute a
 * row's exps for every output element. */
static void test_resume_prunes(void **state) {
  (void)state;
  ts_runner *runner = NULL;
  ts_error err;
  OK(ts_runner_embedded_create(NULL, &runner, &err));
  ts_db *db = open_db("prune.db");
  ts_workload *w = tu_workload("softmax N=32 D=256");
  ts_tune_task task = task_of(w);
  ts_tune_options o = small_options();
  o.job_name = "prune";
  o.trials = 8;
  ts_tune_result r;
  OK(ts_tune(db, runner, &task, 1, &o, &r, &err));
  assert_true(isfinite(r.tasks[0].best_seconds));
  ts_tune_result_clear(&r);
  ts_db_close(db);
  char p[512];
  path_in(p, sizeof p, "prune.db");
  sqlite3 *sq = NULL;
  assert_int_equal(sqlite3_open(p, &sq), SQLITE_OK);
  assert_int_equal(
      sqlite3_exec(sq, "UPDATE records SET median_s = 1e-12 WHERE trial = 0",
                   NULL, NULL, NULL),
      SQLITE_OK);
  assert_int_equal(sqlite3_changes(sq), 1);
  sqlite3_close(sq);
  db = open_db("prune.db");
  o.trials = 96;
  OK(ts_tune(db, runner, &task, 1, &o, &r, &err));
  assert_true(r.resumed);
  assert_int_equal(r.tasks[0].trial_of_best, 0);
  if (r.tasks[0].pruned == 0)
    fail_msg("the resumed job pruned nothing in %lld trials",
             (long long)r.tasks[0].trials_now);
  ts_tune_result_clear(&r);
  ts_workload_free(w);
  ts_db_close(db);
  ts_runner_destroy(runner);
}

static void test_early_stop(void **state) {
  (void)state;
  ts_runner *runner = NULL;
  ts_error err;
  OK(ts_runner_embedded_create(NULL, &runner, &err));
  ts_db *db = open_db("early.db");
  /* an elementwise op: only the parallel and unroll plans vary */
  ts_workload *w = tu_workload("elementwise op=relu shape=16x32");
  ts_tune_task task = task_of(w);
  ts_tune_options o = small_options();
  o.job_name = "early";
  o.trials = 500;
  ts_tune_result r;
  OK(ts_tune(db, runner, &task, 1, &o, &r, &err));
  assert_int_equal(r.state, TS_DB_JOB_FINISHED);
  assert_true(r.trials_done > 0 && r.trials_done < 64);
  ts_tune_result_clear(&r);
  ts_workload_free(w);
  ts_db_close(db);
  ts_runner_destroy(runner);
}

/* An output of 4 MiB or more: the job's first round measures the default
 * schedule (trial 0) and the same schedule writing its output past the
 * caches (trial 1, a loop annotated pragma_nontemporal), and the second
 * computes the right result; a small output gets the default alone. */
static void test_streamed_default(void **state) {
  (void)state;
  ts_runner *runner = NULL;
  ts_error err;
  OK(ts_runner_embedded_create(NULL, &runner, &err));
  ts_db *db = open_db("stream.db");
  const char *specs[2] = {"elementwise op=relu shape=1024x1024",
                          "elementwise op=relu shape=64x64"};
  for (int k = 0; k < 2; k++) {
    ts_workload *w = tu_workload(specs[k]);
    ts_tune_task task = task_of(w);
    ts_tune_options o = small_options();
    o.job_name = k == 0 ? "big" : "small";
    o.trials = 2;
    ts_tune_result r;
    int rc = ts_tune(db, runner, &task, 1, &o, &r, &err);
    if (rc) printf("%s\n", err.msg);
    OK(rc);
    ts_db_record *rec = NULL;
    int nrec = 0;
    OK(ts_db_records_of(db, r.tasks[0].workload_id, "llvm", &rec, &nrec));
    assert_int_equal(nrec, 2);
    for (int i = 0; i < nrec; i++) {
      assert_int_equal(rec[i].status, TS_DB_STATUS_OK);
      ts_trace *full = NULL;
      ts_sched *s = NULL;
      OK(ts_record_traces(rec[i].trace_json, &full, NULL, &err));
      OK(ts_trace_apply(full, w->func, 0, &s, &err));
      char *text = ts_func_print(ts_sched_func(s));
      bool nt = strstr(text, TS_ANN_NONTEMPORAL) != NULL;
      assert_int_equal(nt, k == 0 && rec[i].trial == 1);
      if (nt) {
        ts_target *t = NULL;
        OK(ts_target_parse("llvm", &t, &err));
        ts_runtime *rt = NULL;
        OK(ts_runtime_create(2, &rt, &err));
        ts_rt_args *want = tu_reference(w->func, 1);
        OK(tu_check(ts_sched_func(s), t, want, 1, rt));
        ts_rt_args_free(want);
        ts_runtime_destroy(rt);
        ts_target_free(t);
      }
      free(text);
      ts_sched_destroy(s);
      ts_trace_free(full);
    }
    ts_db_records_free(rec, nrec);
    ts_tune_result_clear(&r);
    ts_workload_free(w);
  }
  ts_db_close(db);
  ts_runner_destroy(runner);
}

/* Processes whose parent is this one (zombies included). */
static int count_children(void) {
  DIR *d = opendir("/proc");
  assert_non_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    char path[300], buf[512];
    snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = 0;
    const char *rp = strrchr(buf, ')'); /* after the command name */
    char st;
    int ppid;
    if (rp && sscanf(rp + 1, " %c %d", &st, &ppid) == 2 && ppid == getpid())
      n++;
  }
  closedir(d);
  return n;
}

/* Builds run in child processes under a time limit: with a limit no
 * compile can meet, every candidate is a build_error that says so, the
 * job still measures its budget and finishes, and nothing is left
 * running. */
static void test_build_timeout(void **state) {
  (void)state;
  ts_runner *runner = NULL;
  ts_error err;
  OK(ts_runner_embedded_create(NULL, &runner, &err));
  ts_db *db = open_db("build_timeout.db");
  ts_workload *w = tu_workload("matmul M=32 N=48 K=64");
  ts_tune_task task = task_of(w);
  ts_tune_options o = small_options();
  o.job_name = "slow-builds";
  o.trials = 8;
  o.build_timeout_ms = 1;
  /* (no build cache: a kernel taken from it can be ready within the limit) */
  setenv("TS_BUILD_CACHE_MB", "0", 1);
  ts_build_cache_clear();
  ts_tune_result r;
  int children = count_children();
  int rc = ts_tune(db, runner, &task, 1, &o, &r, &err);
  if (rc) printf("%s\n", err.msg);
  OK(rc);
  assert_int_equal(r.state, TS_DB_JOB_FINISHED);
  assert_int_equal(r.trials_done, 8);
  assert_int_equal(r.tasks[0].by_status[TS_DB_STATUS_BUILD_ERROR], 8);
  ts_db_record *rec = NULL;
  int n = 0;
  OK(ts_db_records_of(db, r.tasks[0].workload_id, "llvm", &rec, &n));
  assert_int_equal(n, 8);
  for (int i = 0; i < n; i++) {
    assert_int_equal(rec[i].status, TS_DB_STATUS_BUILD_ERROR);
    if (!strstr(rec[i].error, "build timed out"))
      printf("record %d: %s\n", i, rec[i].error);
    assert_non_null(strstr(rec[i].error, "build timed out"));
  }
  ts_db_records_free(rec, n);
  /* every build process was killed and reaped */
  assert_int_equal(count_children(), children);
  ts_tune_result_clear(&r);
  /* a bad limit is refused up front */
  o.build_timeout_ms = -1;
  assert_int_equal(ts_tune(db, runner, &task, 1, &o, &r, &err), TS_EINVAL);
  assert_non_null(strstr(err.msg, "--build-timeout-ms"));
  unsetenv("TS_BUILD_CACHE_MB");
  ts_build_cache_clear();
  ts_workload_free(w);
  ts_db_close(db);
  ts_runner_destroy(runner);
}

/* A workload whose W is a constant (const=W, or the task's mask as `tune
 * --model` gives it): candidates are built with W's packing in a prologue
 * that the measuring process runs once, and every one of them still
 * matches the reference (without the prologue the packed W would read
 * zeros: a wrong_result). The job's stored settings keep the mask. On
 * AVX2, where the default packs W transposed. */
static void test_const_weights(void **state) {
  (void)state;
  if (ts_rt_cpu_has("avx2") != 1) skip();
  ts_runner *runner = NULL;
  ts_error err;
  OK(ts_runner_embedded_create(NULL, &runner, &err));
  ts_db *db = open_db("const.db");
  const char *target = "llvm -mcpu=x86-64-v3 -num-cores=2";
  const char *specs[2] = {"dense M=8 N=96 K=64 const=W", "dense M=8 N=64 K=64"};
  for (int k = 0; k < 2; k++) {
    ts_workload *w = tu_workload(specs[k]);
    ts_tune_task task = task_of(w);
    if (k == 1) task.const_params = 2; /* as a model's task */
    ts_tune_options o = small_options();
    o.target = target;
    o.job_name = k ? "const-mask" : "const-spec";
    o.trials = 12;
    ts_tune_result r;
    int rc = ts_tune(db, runner, &task, 1, &o, &r, &err);
    if (rc) printf("%s\n", err.msg);
    OK(rc);
    assert_int_equal(r.trials_done, 12);
    assert_int_equal(r.tasks[0].by_status[TS_DB_STATUS_OK], 12);
    check_best(db, r.tasks[0].workload_id, target, w->func);
    ts_db_job job;
    OK(ts_db_job_get(db, o.job_name, &job));
    assert_true((strstr(job.config_json, "\"const_params\":\"2\"") != NULL) ==
                (k == 1));
    ts_db_job_clear(&job);
    ts_tune_result_clear(&r);
    ts_workload_free(w);
  }
  ts_db_close(db);
  ts_runner_destroy(runner);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_const_weights),
      cmocka_unit_test(test_end_to_end_and_resume),
      cmocka_unit_test(test_early_stop),
      cmocka_unit_test(test_resume_prunes),
      cmocka_unit_test(test_streamed_default),
      cmocka_unit_test(test_build_timeout),
  };
  return cmocka_run_group_tests(tests, scratch_setup, scratch_teardown);
}
