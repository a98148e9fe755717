/*
 * test_concurrency.c — many processes on one database file. Eight forked
 * processes commit 1000 records each into one job at the same time: all
 * 8000 land, none sees a lock error, and the job's trial indexes are
 * exactly 0..7999. Eight processes that open a file that does not exist yet
 * and commit the same workload end up with one workload row. A writer
 * killed with SIGKILL in the middle of its batches leaves a database that
 * opens cleanly, passes PRAGMA integrity_check, and holds every batch it
 * reported committed (and the batch in flight entirely or not at all).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "db/db.h"
#include "test_db.h"

#define TARGET "llvm -mcpu=skylake-avx512 -num-cores=2"
#define TRACE "{\"version\":1,\"insts\":[],\"decisions\":[]}"
#define N_PROCS 8
#define PER_PROC 1000

typedef struct fixture {
  char dir[256];
  char path[300];
} fixture;

static int setup(void **state) {
  fixture *fx = calloc(1, sizeof *fx);
  snprintf(fx->dir, sizeof fx->dir, "%s/ts-db-conc-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(fx->dir)) return -1;
  test_fresh_db(fx->dir, "conc.db", fx->path, sizeof fx->path);
  *state = fx;
  return 0;
}

static int teardown(void **state) {
  fixture *fx = *state;
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", fx->dir);
  if (system(cmd) != 0) return -1;
  free(fx);
  return 0;
}

/* The body of a child: returns its exit code (0 ok), message on stderr. */
static int child_commits(const char *path, int index, int64_t workload,
                         int64_t job) {
  ts_db *db;
  ts_error err;
  if (ts_db_open(path, NULL, &db, &err) != TS_OK) {
    fprintf(stderr, "child %d: open: %s\n", index, err.msg);
    return 1;
  }
  char worker[32];
  snprintf(worker, sizeof worker, "proc-%d", index);
  for (int i = 0; i < PER_PROC; i++) {
    double secs = 1e-3 * (1 + (index * PER_PROC + i) % 97);
    ts_db_measurement m = {.workload_id = workload,
                           .target = TARGET,
                           .trace_json = TRACE,
                           .run_secs = &secs,
                           .n_run_secs = 1,
                           .status = TS_DB_STATUS_OK,
                           .job_id = job,
                           .worker = worker};
    /* alternate single commits with small batches: both contend */
    int rc;
    if (i % 2 == 0 || i + 1 >= PER_PROC) {
      rc = ts_db_commit_record(db, &m, NULL);
    } else {
      ts_db_measurement two[2] = {m, m};
      rc = ts_db_commit_records(db, two, 2, NULL);
      i++;
    }
    if (rc != TS_OK) {
      fprintf(stderr, "child %d: record %d: %s\n", index, i, ts_db_errmsg(db));
      ts_db_close(db);
      return 1;
    }
  }
  ts_db_close(db);
  return 0;
}

static void test_eight_writers(void **state) {
  fixture *fx = *state;
  ts_db *db;
  ts_error err;
  assert_int_equal(ts_db_open(fx->path, NULL, &db, &err), TS_OK);
  ts_workload *w;
  assert_int_equal(ts_workload_from_spec("matmul M=16 N=16 K=16", &w, &err),
                   TS_OK);
  int64_t workload, job;
  assert_int_equal(ts_db_commit_workload(db, w->func, w->name, &workload),
                   TS_OK);
  ts_workload_free(w);
  assert_int_equal(
      ts_db_job_create(db, "shared", NULL, N_PROCS * PER_PROC, &job), TS_OK);
  ts_db_close(db); /* no connection crosses a fork */

  double t0 = ts_now_seconds();
  pid_t pids[N_PROCS];
  for (int i = 0; i < N_PROCS; i++) {
    pids[i] = fork();
    assert_true(pids[i] >= 0);
    if (pids[i] == 0) _exit(child_commits(fx->path, i, workload, job));
  }
  for (int i = 0; i < N_PROCS; i++) {
    int status;
    assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
  }
  double elapsed = ts_now_seconds() - t0;
  printf("  %d processes x %d records in %.2f s\n", N_PROCS, PER_PROC, elapsed);

  assert_int_equal(ts_db_open(fx->path, NULL, &db, &err), TS_OK);
  assert_int_equal(ts_db_integrity_check(db), TS_OK);
  ts_db_record *all;
  int n;
  assert_int_equal(ts_db_records_of(db, workload, TARGET, &all, &n), TS_OK);
  assert_int_equal(n, N_PROCS * PER_PROC);
  /* every trial index once; each process's records all there */
  char *seen = calloc(N_PROCS * PER_PROC, 1);
  int per[N_PROCS] = {0};
  for (int i = 0; i < n; i++) {
    assert_int_equal(all[i].job_id, job);
    assert_true(all[i].trial >= 0 && all[i].trial < N_PROCS * PER_PROC);
    assert_false(seen[all[i].trial]);
    seen[all[i].trial] = 1;
    int p = atoi(all[i].worker + 5);
    assert_true(p >= 0 && p < N_PROCS);
    per[p]++;
    /* trials follow commit order */
    if (i) assert_true(all[i].trial > all[i - 1].trial);
  }
  for (int p = 0; p < N_PROCS; p++) assert_int_equal(per[p], PER_PROC);
  free(seen);
  ts_db_records_free(all, n);
  ts_db_job j;
  assert_int_equal(ts_db_job_get(db, "shared", &j), TS_OK);
  assert_int_equal(j.trials_done, N_PROCS * PER_PROC);
  ts_db_job_clear(&j);
  ts_db_close(db);
}

/* Processes racing to create the file and the same workload. */
static void test_concurrent_create(void **state) {
  fixture *fx = *state;
  pid_t pids[N_PROCS];
  for (int i = 0; i < N_PROCS; i++) {
    pids[i] = fork();
    assert_true(pids[i] >= 0);
    if (pids[i] == 0) {
      ts_db *db;
      ts_error err;
      ts_workload *w;
      int64_t id;
      if (ts_db_open(fx->path, NULL, &db, &err) != TS_OK) {
        fprintf(stderr, "open: %s\n", err.msg);
        _exit(1);
      }
      if (ts_workload_from_spec("matmul M=32 N=32 K=32", &w, &err) != TS_OK ||
          ts_db_commit_workload(db, w->func, "same", &id) != TS_OK) {
        fprintf(stderr, "commit: %s\n", ts_db_errmsg(db));
        _exit(1);
      }
      double secs = 1e-3;
      for (int k = 0; k < 50; k++) {
        ts_db_measurement m = {.workload_id = id,
                               .target = TARGET,
                               .trace_json = TRACE,
                               .run_secs = &secs,
                               .n_run_secs = 1};
        if (ts_db_commit_record(db, &m, NULL) != TS_OK) {
          fprintf(stderr, "record: %s\n", ts_db_errmsg(db));
          _exit(1);
        }
      }
      ts_workload_free(w);
      ts_db_close(db);
      _exit(0);
    }
  }
  for (int i = 0; i < N_PROCS; i++) {
    int status;
    assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
  }
  ts_db *db;
  ts_error err;
  assert_int_equal(ts_db_open(fx->path, NULL, &db, &err), TS_OK);
  ts_db_stats s;
  assert_int_equal(ts_db_get_stats(db, &s), TS_OK);
  assert_int_equal(s.n_workloads, 1);
  assert_int_equal(s.n_targets, 1);
  assert_int_equal(s.n_records, N_PROCS * 50);
  assert_int_equal(ts_db_integrity_check(db), TS_OK);
  ts_db_close(db);
}

#define BATCH 50

/* The killed writer: commits batches forever, reporting each batch index
 * on the pipe after its commit returns. Batch b's records carry worker key
 * "batch-b". */
static void writer(const char *path, int64_t workload, int fd, int first) {
  ts_db *db;
  ts_error err;
  if (ts_db_open(path, NULL, &db, &err) != TS_OK) _exit(1);
  ts_db_measurement m[BATCH];
  double secs[BATCH];
  char worker[32];
  for (int b = first;; b++) {
    snprintf(worker, sizeof worker, "batch-%d", b);
    for (int i = 0; i < BATCH; i++) {
      secs[i] = 1e-3 * (1 + i);
      m[i] = (ts_db_measurement){.workload_id = workload,
                                 .target = TARGET,
                                 .trace_json = TRACE,
                                 .run_secs = &secs[i],
                                 .n_run_secs = 1,
                                 .worker = worker};
    }
    if (ts_db_commit_records(db, m, BATCH, NULL) != TS_OK) _exit(2);
    if (write(fd, &b, sizeof b) != sizeof b) _exit(3);
  }
}

static void test_sigkill_mid_batch(void **state) {
  fixture *fx = *state;
  ts_db *db;
  ts_error err;
  assert_int_equal(ts_db_open(fx->path, NULL, &db, &err), TS_OK);
  ts_workload *w;
  assert_int_equal(ts_workload_from_spec("matmul M=16 N=16 K=16", &w, &err),
                   TS_OK);
  int64_t workload;
  assert_int_equal(ts_db_commit_workload(db, w->func, w->name, &workload),
                   TS_OK);
  ts_workload_free(w);
  ts_db_close(db);

  srand(12345);
  int next = 0; /* first batch index of the next writer */
  int committed_total = 0;
  for (int round = 0; round < 6; round++) {
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      close(fds[0]);
      writer(fx->path, workload, fds[1], next);
    }
    close(fds[1]);
    /* let it commit a few batches, then kill it at a random moment */
    int want = 3 + rand() % 5, got = 0, b, last = next - 1;
    while (got < want && read(fds[0], &b, sizeof b) == sizeof b) {
      assert_int_equal(b, last + 1);
      last = b;
      got++;
    }
    assert_int_equal(got, want);
    struct timespec pause = {0, (long)(rand() % 3000) * 1000};
    nanosleep(&pause, NULL);
    kill(pid, SIGKILL);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    /* batches reported before the kill landed in the pipe too */
    while (read(fds[0], &b, sizeof b) == sizeof b) {
      assert_int_equal(b, last + 1);
      last = b;
    }
    close(fds[0]);

    assert_int_equal(ts_db_open(fx->path, NULL, &db, &err), TS_OK);
    assert_int_equal(ts_db_integrity_check(db), TS_OK);
    ts_db_record *all;
    int n;
    assert_int_equal(ts_db_records_of(db, workload, TARGET, &all, &n), TS_OK);
    int *per = calloc((size_t)last + 3, sizeof *per);
    for (int i = 0; i < n; i++) {
      int batch = atoi(all[i].worker + 6);
      assert_true(batch >= 0 && batch <= last + 1);
      per[batch]++;
    }
    for (int k = 0; k <= last; k++) assert_int_equal(per[k], BATCH);
    /* the batch in flight: all of it or none */
    assert_true(per[last + 1] == 0 || per[last + 1] == BATCH);
    committed_total = (last + 1) * BATCH + per[last + 1];
    assert_int_equal(n, committed_total);
    next = per[last + 1] ? last + 2 : last + 1;
    free(per);
    ts_db_records_free(all, n);
    ts_db_close(db);
  }
  printf("  6 writers killed; %d records intact\n", committed_total);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_eight_writers, setup, teardown),
      cmocka_unit_test_setup_teardown(test_concurrent_create, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sigkill_mid_batch, setup, teardown),
  };
  test_server_url(); /* exits 77 when the server was meant but is absent */
  return cmocka_run_group_tests(tests, NULL, NULL);
}
