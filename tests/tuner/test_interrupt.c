/*
 * test_interrupt.c — stopping and restarting jobs, and the other search
 * configurations. SIGINT in the middle of a job (in a child process, and
 * through the `tessera` binary when it is built) finishes the batch in
 * flight, leaves a consistent database (integrity, record count equal to
 * the job's trial count, state interrupted), exits 130, and the job
 * resumes. Random and evolutionary strategies, the random cost model,
 * round-robin and gradient scheduling over two tasks, and a per-task cap
 * all run to their budgets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

#define OK(x) assert_int_equal((x), TS_OK)

#include "jobutil.h"

/* ---- SIGINT in a child running a job ---- */

static volatile sig_atomic_t child_stop;
static void child_on_signal(int sig) {
  (void)sig;
  child_stop = 1;
}

static int64_t records_now(const char *db_path) {
  ts_db_options o = ts_db_defaults();
  o.read_only = true;
  ts_db *db = NULL;
  if (ts_db_open(db_path, &o, &db, NULL)) return 0;
  ts_db_stats st;
  int64_t n = ts_db_get_stats(db, &st) == TS_OK ? st.n_records : 0;
  ts_db_close(db);
  return n;
}

/* Waits until the database holds at least n records (at most 60 s). */
static void wait_records(const char *db_path, int64_t n) {
  for (int i = 0; i < 600 && records_now(db_path) < n; i++) usleep(100000);
}

static void check_interrupted(const char *db_name, const char *job_name,
                              const ts_workload *w) {
  ts_db *db = open_db(db_name);
  OK(ts_db_integrity_check(db));
  ts_db_job job;
  OK(ts_db_job_get(db, job_name, &job));
  assert_int_equal(job.state, TS_DB_JOB_INTERRUPTED);
  assert_true(job.trials_done > 0 && job.trials_done < job.trials_budget);
  int64_t total = 0;
  OK(ts_db_job_count_records(db, job.id, &total, NULL));
  assert_int_equal(total, job.trials_done);
  int64_t wid;
  OK(ts_db_find_workload(db, w->func, &wid));
  check_best(db, wid, "llvm", w->func);
  /* the job resumes and finishes a few more trials */
  ts_runner *runner = NULL;
  ts_error err;
  OK(ts_runner_embedded_create(NULL, &runner, &err));
  ts_tune_task task = task_of(w);
  ts_tune_options o = small_options();
  o.job_name = job_name;
  o.trials = job.trials_done + 8;
  ts_tune_result r;
  OK(ts_tune(db, runner, &task, 1, &o, &r, &err));
  assert_true(r.resumed);
  assert_int_equal(r.state, TS_DB_JOB_FINISHED);
  assert_int_equal(r.trials_done, job.trials_done + 8);
  assert_int_equal(r.trials_now, 8);
  ts_tune_result_clear(&r);
  ts_db_job_clear(&job);
  ts_runner_destroy(runner);
  ts_db_close(db);
}

static void test_sigint_child(void **state) {
  (void)state;
  const char *spec = "matmul M=32 N=32 K=32";
  char db_path[512];
  path_in(db_path, sizeof db_path, "sig.db");
  fflush(stdout);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = child_on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    ts_runner *runner = NULL;
    ts_error err;
    if (ts_runner_embedded_create(NULL, &runner, &err)) _exit(3);
    ts_workload *w = NULL;
    ts_db *db = NULL;
    if (ts_workload_from_spec(spec, &w, &err) ||
        ts_db_open(db_path, NULL, &db, &err))
      _exit(4);
    ts_tune_task task = task_of(w);
    ts_tune_options o = small_options();
    o.job_name = "sig";
    o.trials = 2000;
    /* candidates drawn from the seed alone (no measured time steers the
     * search), so a sanitizer run finds every kernel in the normal run's
     * build cache instead of building some under the sanitizer */
    o.strategy = TS_STRATEGY_RANDOM;
    o.cost_model = "random";
    o.stop = &child_stop;
    ts_tune_result r;
    int rc = ts_tune(db, runner, &task, 1, &o, &r, &err);
    int code = rc ? 5 : r.state == TS_DB_JOB_INTERRUPTED ? 130 : 6;
    ts_tune_result_clear(&r);
    ts_db_close(db);
    ts_workload_free(w);
    ts_runner_destroy(runner);
    _exit(code);
  }
  wait_records(db_path, 8);
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 130);
  ts_workload *w = tu_workload(spec);
  check_interrupted("sig.db", "sig", w);
  ts_workload_free(w);
}

static void test_sigint_cli(void **state) {
  (void)state;
  char exe[512];
  snprintf(exe, sizeof exe, "%s/tessera", TS_BINARY_DIR);
  if (access(exe, X_OK) != 0) {
    printf("skipped: %s is not built\n", exe);
    return;
  }
  const char *spec = "matmul M=32 N=32 K=32";
  char db_path[512], err_path[512];
  path_in(db_path, sizeof db_path, "cli.db");
  path_in(err_path, sizeof err_path, "cli.err");
  fflush(stdout);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    FILE *e = freopen(err_path, "w", stderr);
    FILE *o = freopen("/dev/null", "w", stdout);
    (void)e;
    (void)o;
    /* seeded candidates, as in test_sigint_child */
    execl(exe, exe, "tune", "--workload", spec, "--trials", "2000", "--batch",
          "8", "--population", "24", "--strategy", "random", "--cost-model",
          "random", "--db", db_path, "--job", "clijob", (char *)NULL);
    _exit(127);
  }
  wait_records(db_path, 8);
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 130);
  FILE *f = fopen(err_path, "r");
  assert_non_null(f);
  char text[8192];
  size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = 0;
  fclose(f);
  assert_non_null(strstr(text, "interrupted"));
  assert_non_null(strstr(text, "resume with"));
  assert_non_null(strstr(text, "--job clijob"));
  ts_workload *w = tu_workload(spec);
  check_interrupted("cli.db", "clijob", w);
  ts_workload_free(w);
}

static void test_strategies_and_tasks(void **state) {
  (void)state;
  ts_runner *runner = NULL;
  ts_error err;
  OK(ts_runner_embedded_create(NULL, &runner, &err));
  ts_db *db = open_db("strategies.db");
  ts_workload *a = tu_workload("matmul M=16 N=32 K=32");
  ts_workload *b =
      tu_workload("conv2d_nhwc N=1 H=6 W=6 CI=8 CO=8 KH=3 KW=3 pad=1");
  ts_tune_task tasks[2] = {task_of(a), task_of(b)};
  tasks[1].weight = 2;
  /* random strategy */
  ts_tune_options o = small_options();
  o.strategy = TS_STRATEGY_RANDOM;
  o.job_name = "random";
  o.trials = 8;
  ts_tune_result r;
  OK(ts_tune(db, runner, tasks, 1, &o, &r, &err));
  assert_int_equal(r.trials_done, 8);
  ts_tune_result_clear(&r);
  /* evolutionary with the random cost model, two tasks in turn */
  o = small_options();
  o.cost_model = "random";
  o.policy = TS_TASK_ROUND_ROBIN;
  o.job_name = "two";
  o.trials = 16;
  OK(ts_tune(db, runner, tasks, 2, &o, &r, &err));
  assert_int_equal(r.trials_done, 16);
  assert_int_equal(r.tasks[0].trials, 8);
  assert_int_equal(r.tasks[1].trials, 8);
  for (int i = 0; i < 2; i++) assert_true(isfinite(r.tasks[i].best_seconds));
  ts_tune_result_clear(&r);
  /* gradient policy with a cap per task */
  o.policy = TS_TASK_GRADIENT;
  o.job_name = "capped";
  o.trials = 48;
  o.trials_per_task = 8;
  OK(ts_tune(db, runner, tasks, 2, &o, &r, &err));
  assert_int_equal(r.tasks[0].trials, 8);
  assert_int_equal(r.tasks[1].trials, 8);
  assert_int_equal(r.trials_done, 16);
  assert_int_equal(r.state, TS_DB_JOB_FINISHED);
  ts_tune_result_clear(&r);
  /* bad options */
  o.cost_model = "nope";
  assert_int_equal(ts_tune(db, runner, tasks, 2, &o, &r, &err), TS_EINVAL);
  assert_non_null(strstr(err.msg, "nope"));
  ts_workload_free(a);
  ts_workload_free(b);
  ts_db_close(db);
  ts_runner_destroy(runner);
}

int main(void) {
  /* the forking tests first, while this process has no other threads */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sigint_child),
      cmocka_unit_test(test_sigint_cli),
      cmocka_unit_test(test_strategies_and_tasks),
  };
  return cmocka_run_group_tests(tests, scratch_setup, scratch_teardown);
}
