/*
 * test_pg.c — the PostgreSQL backend's own behaviour and `db sync`.
 *
 * Always (no server needed): URLs are recognized, an unreachable server is
 * a clear error naming the server and never the password, and sync between
 * two databases copies a target's records once (running it again copies
 * nothing) and everything after a full sync exports to the same bytes.
 *
 * Against a server (TS_TEST_DB_URL or TS_TEST_DB_URL_FILE, see test_db.h):
 * the schema version table and foreign keys, read-only connections, a
 * wrong password, a schema of a newer version refused without a change,
 * sync between a server and an SQLite file both ways, eight writer
 * processes committing tuner-sized batches into one job (each record once,
 * trials exact; records/s printed), and a private server stopped in the
 * middle of a writer's batches: the writer gets an error naming the server,
 * the batch in flight is all or nothing, and after a restart a connection
 * opened before it commits again.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "db/db.h"
#include "test_db.h"

#define T_A "llvm -mcpu=skylake-avx512 -num-cores=2"
#define T_B "cuda -arch=sm_80"
#define TRACE "{\"version\":1,\"insts\":[],\"decisions\":[[0,%d]]}"

typedef struct fixture {
  char dir[256];
} fixture;

static int setup(void **state) {
  fixture *fx = calloc(1, sizeof *fx);
  snprintf(fx->dir, sizeof fx->dir, "%s/ts-db-pg-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(fx->dir)) return -1;
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

static ts_db *open_db(const char *path) {
  ts_db *db;
  ts_error err;
  if (ts_db_open(path, NULL, &db, &err) != TS_OK) fail_msg("%s", err.msg);
  return db;
}

static int64_t commit_spec(ts_db *db, const char *spec, const char *name) {
  ts_workload *w;
  ts_error err;
  assert_int_equal(ts_workload_from_spec(spec, &w, &err), TS_OK);
  int64_t id;
  if (ts_db_commit_workload(db, w->func, name, &id) != TS_OK)
    fail_msg("%s", ts_db_errmsg(db));
  ts_workload_free(w);
  return id;
}

/* n records of the workload on target, traces numbered from `first`,
 * under job (0: none). */
static void commit_n(ts_db *db, int64_t workload, const char *target,
                     int64_t job, int first, int n) {
  ts_db_measurement *m = calloc((size_t)n, sizeof *m);
  char(*traces)[80] = calloc((size_t)n, sizeof *traces);
  double *secs = calloc((size_t)n, sizeof *secs);
  for (int i = 0; i < n; i++) {
    snprintf(traces[i], sizeof traces[i], TRACE, first + i);
    secs[i] = 1e-3 * (1 + (first + i) % 13);
    m[i] = (ts_db_measurement){
        .workload_id = workload,
        .target = target,
        .trace_json = traces[i],
        .run_secs = &secs[i],
        .n_run_secs = (first + i) % 5 ? 1 : 0,
        .status = (first + i) % 5 ? TS_DB_STATUS_OK : TS_DB_STATUS_RUN_ERROR,
        .error = (first + i) % 5 ? "" : "crashed",
        .job_id = job,
        .worker = "w0"};
  }
  if (ts_db_commit_records(db, m, n, NULL) != TS_OK)
    fail_msg("%s", ts_db_errmsg(db));
  free(m);
  free(traces);
  free(secs);
}

static char *export_text(ts_db *db) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_int_equal(ts_db_export(db, f), TS_OK);
  fclose(f);
  return buf;
}

/* ---- no server needed ---- */

static void test_urls_and_unreachable(void **state) {
  (void)state;
  assert_true(ts_db_is_url("postgresql://u@h/d"));
  assert_true(ts_db_is_url("postgres://h"));
  assert_false(ts_db_is_url("tessera.db"));
  assert_false(ts_db_is_url("/tmp/postgresql://x"));
  ts_db *db;
  ts_error err;
  /* port 1 on loopback: nothing listens there */
  assert_int_equal(ts_db_open("postgresql://alice:s3cret@127.0.0.1:1/tuning",
                              NULL, &db, &err),
                   TS_EIO);
  assert_null(db);
  assert_non_null(strstr(err.msg, "postgresql://alice:***@127.0.0.1:1/tuning"));
  assert_non_null(strstr(err.msg, "cannot connect to the server"));
  assert_non_null(strstr(err.msg, "127.0.0.1"));
  assert_null(strstr(err.msg, "s3cret"));
  assert_null(strchr(err.msg, '\n'));
  /* a password given as a parameter is hidden too */
  assert_int_equal(
      ts_db_open("postgres://127.0.0.1:1/t?user=bob&password=hunter2", NULL,
                 &db, &err),
      TS_EIO);
  assert_null(strstr(err.msg, "hunter2"));
  assert_non_null(strstr(err.msg, "password=***"));
  /* a URL libpq cannot parse */
  assert_int_equal(ts_db_open("postgresql://[::1", NULL, &db, &err), TS_EIO);
  assert_non_null(strstr(err.msg, "cannot connect"));
}

/* sync: a target's records once; again: nothing; all: same export. The
 * source is the server when there is one, else a file; the copy is a
 * file. */
static void test_sync(void **state) {
  fixture *fx = *state;
  char src_path[400], dst_path[400], back_path[400];
  test_fresh_db(fx->dir, "sync_src.db", src_path, sizeof src_path);
  snprintf(dst_path, sizeof dst_path, "%s/copy.db", fx->dir);
  test_fresh_db(fx->dir, "sync_back.db", back_path, sizeof back_path);
  ts_db *src = open_db(src_path);
  int64_t w1 = commit_spec(src, "matmul M=32 N=32 K=32", "mm32");
  int64_t w2 = commit_spec(src, "softmax N=4 D=8", "sm");
  int64_t job;
  assert_int_equal(ts_db_job_create(src, "farm", "{\"trials\":99}", 99, &job),
                   TS_OK);
  commit_n(src, w1, T_A, job, 0, 40);
  commit_n(src, w2, T_A, job, 40, 10);
  commit_n(src, w1, T_B, 0, 100, 25);
  assert_int_equal(ts_db_baseline_put(src, w1, T_A, "onednn", 2, 85.5), TS_OK);
  assert_int_equal(ts_db_baseline_put(src, w1, T_B, "cublas", 1, 900), TS_OK);
  assert_int_equal(ts_db_set_target_probe(src, 1, "{\"peak\":1}"), TS_OK);

  ts_db *dst = open_db(dst_path);
  ts_db_import_stats st;
  assert_int_equal(ts_db_sync(src, dst, T_A, &st), TS_OK);
  assert_int_equal(st.records, 50);
  assert_int_equal(st.records_existing, 0);
  assert_int_equal(st.baselines, 1);
  assert_int_equal(st.workloads_new, 2);
  /* the build server can compile offline with the copy */
  ts_db_record best_src, best_dst;
  assert_int_equal(ts_db_best(src, w1, T_A, &best_src), TS_OK);
  int64_t w1_dst;
  ts_workload *w;
  ts_error err;
  assert_int_equal(ts_workload_from_spec("matmul M=32 N=32 K=32", &w, &err),
                   TS_OK);
  assert_int_equal(ts_db_find_workload(dst, w->func, &w1_dst), TS_OK);
  assert_int_equal(ts_db_best_by_func(dst, w->func, T_A, &best_dst), TS_OK);
  assert_string_equal(best_src.trace_json, best_dst.trace_json);
  assert_true(best_src.median_s == best_dst.median_s);
  ts_db_record_clear(&best_src);
  ts_db_record_clear(&best_dst);
  ts_db_record r;
  assert_int_equal(ts_db_best_by_func(dst, w->func, T_B, &r), TS_ENOTFOUND);
  ts_workload_free(w);
  /* again: nothing twice */
  assert_int_equal(ts_db_sync(src, dst, T_A, &st), TS_OK);
  assert_int_equal(st.records, 0);
  assert_int_equal(st.records_existing, 50);
  /* a target never measured: nothing */
  assert_int_equal(ts_db_sync(src, dst, "cuda -arch=sm_90", &st), TS_OK);
  assert_int_equal(st.records, 0);
  /* everything: the rest, and the copy exports to the same bytes */
  assert_int_equal(ts_db_sync(src, dst, NULL, &st), TS_OK);
  assert_int_equal(st.records, 25);
  assert_int_equal(st.records_existing, 50);
  char *a = export_text(src), *b = export_text(dst);
  assert_string_equal(a, b);
  /* and back into an empty database (the server when there is one) */
  ts_db *back = open_db(back_path);
  assert_int_equal(ts_db_sync(dst, back, NULL, &st), TS_OK);
  assert_int_equal(st.records, 75);
  char *c = export_text(back);
  assert_string_equal(a, c);
  free(a);
  free(b);
  free(c);
  ts_db_close(back);
  ts_db_close(dst);
  ts_db_close(src);
}

/* ---- against a server ---- */

static void test_server_schema(void **state) {
  fixture *fx = *state;
  if (!test_on_server()) skip();
  char path[400];
  test_fresh_db(fx->dir, "schema.db", path, sizeof path);
  ts_db *db = open_db(path);
  assert_string_equal(ts_db_backend(db), "postgresql");
  assert_null(strstr(ts_db_path(db), "tessera-test")); /* the password */
  assert_non_null(strstr(ts_db_path(db), ":***@"));
  assert_int_equal(test_server_int(path, "SELECT version FROM tessera_schema"),
                   TS_DB_SCHEMA_VERSION);
  assert_int_equal(
      test_server_int(path, "SELECT application_id FROM tessera_schema"),
      0x54534442);
  /* records reference workloads, targets and jobs */
  assert_int_equal(
      test_server_int(path, "SELECT count(*) FROM information_schema."
                            "table_constraints WHERE table_schema = "
                            "current_schema() AND table_name = 'records' AND "
                            "constraint_type = 'FOREIGN KEY'"),
      3);
  int64_t w1 = commit_spec(db, "matmul M=8 N=8 K=8", "mm8");
  commit_n(db, w1, T_A, 0, 0, 30);
  ts_db_stats s;
  assert_int_equal(ts_db_get_stats(db, &s), TS_OK);
  assert_int_equal(s.n_records, 30);
  assert_true(s.file_bytes > 0);
  assert_int_equal(s.wal_bytes, 0);
  assert_int_equal(ts_db_integrity_check(db), TS_OK);
  assert_int_equal(ts_db_vacuum(db), TS_OK);
  /* read-only connections read and refuse writes */
  ts_db_options ro = ts_db_defaults();
  ro.read_only = true;
  ts_db *rdb;
  ts_error err;
  assert_int_equal(ts_db_open(path, &ro, &rdb, &err), TS_OK);
  ts_db_record best;
  assert_int_equal(ts_db_best(rdb, w1, T_A, &best), TS_OK);
  ts_db_record_clear(&best);
  int64_t id;
  ts_workload *w;
  assert_int_equal(ts_workload_from_spec("matmul M=4 N=4 K=4", &w, &err),
                   TS_OK);
  assert_int_not_equal(ts_db_commit_workload(rdb, w->func, NULL, &id), TS_OK);
  assert_non_null(strstr(ts_db_errmsg(rdb), "read-only"));
  ts_workload_free(w);
  ts_db_close(rdb);
  /* a schema never used: no create means not found, nothing created */
  char empty[400];
  test_fresh_db(fx->dir, "empty.db", empty, sizeof empty);
  ts_db_options nc = ts_db_defaults();
  nc.create = false;
  assert_int_equal(ts_db_open(empty, &nc, &rdb, &err), TS_ENOTFOUND);
  assert_int_equal(ts_db_open(empty, &ro, &rdb, &err), TS_EINVAL);
  assert_non_null(strstr(err.msg, "empty database"));
  assert_int_equal(test_server_int(empty,
                                   "SELECT count(*) FROM pg_tables WHERE "
                                   "schemaname = current_schema()"),
                   0);
  ts_db_close(db);
}

static void test_wrong_password(void **state) {
  (void)state;
  if (!test_on_server()) skip();
  char url[1100];
  snprintf(url, sizeof url, "%s", test_server_url());
  char *colon = strstr(url + 13, ":");
  char *at = strchr(url, '@');
  assert_non_null(colon);
  assert_non_null(at);
  char bad[1200];
  snprintf(bad, sizeof bad, "%.*s:wrong-pw-123%s", (int)(colon - url), url, at);
  ts_db *db;
  ts_error err;
  assert_int_equal(ts_db_open(bad, NULL, &db, &err), TS_EIO);
  assert_null(db);
  assert_non_null(strstr(err.msg, "password authentication failed"));
  assert_non_null(strstr(err.msg, "127.0.0.1"));
  assert_null(strstr(err.msg, "wrong-pw-123"));
}

static void test_newer_schema(void **state) {
  fixture *fx = *state;
  if (!test_on_server()) skip();
  char path[400];
  test_fresh_db(fx->dir, "newer.db", path, sizeof path);
  ts_db *db = open_db(path);
  int64_t w1 = commit_spec(db, "matmul M=8 N=8 K=8", "mm8");
  commit_n(db, w1, T_A, 0, 0, 5);
  ts_db_close(db);
  /* one past the version this build writes */
  int newer = TS_DB_SCHEMA_VERSION + 1;
  char sql[80], want[64];
  snprintf(sql, sizeof sql, "UPDATE tessera_schema SET version = %d", newer);
  snprintf(want, sizeof want, "schema version %d is newer", newer);
  assert_true(test_server_exec(path, sql));
  ts_error err;
  assert_int_equal(ts_db_open(path, NULL, &db, &err), TS_EUNSUPPORTED);
  assert_non_null(strstr(err.msg, want));
  assert_non_null(strstr(err.msg, "was not changed"));
  ts_db_options ro = ts_db_defaults();
  ro.read_only = true;
  assert_int_equal(ts_db_open(path, &ro, &db, &err), TS_EUNSUPPORTED);
  assert_int_equal(test_server_int(path, "SELECT version FROM tessera_schema"),
                   newer);
  assert_int_equal(test_server_int(path, "SELECT count(*) FROM records"), 5);
  /* a schema holding other tables of those names is not taken over */
  char other[400];
  test_fresh_db(fx->dir, "other.db", other, sizeof other);
  assert_true(test_server_exec(other, "CREATE TABLE records (x int)"));
  assert_int_equal(ts_db_open(other, NULL, &db, &err), TS_EINVAL);
  assert_non_null(strstr(err.msg, "not a tessera database"));
}

/* Eight processes (eight hosts) commit batches of 64 records, as tuners
 * do, into one job: every record once, trial indexes exact. */
#define N_PROCS 8
#define BATCHES 12
#define BATCH 64

static int tuner_child(const char *path, int index, int64_t workload,
                       int64_t job) {
  ts_db *db;
  ts_error err;
  if (ts_db_open(path, NULL, &db, &err) != TS_OK) {
    fprintf(stderr, "child %d: %s\n", index, err.msg);
    return 1;
  }
  ts_db_measurement m[BATCH];
  char traces[BATCH][96], worker[32];
  double secs[BATCH][3];
  snprintf(worker, sizeof worker, "host-%d", index);
  for (int b = 0; b < BATCHES; b++) {
    for (int i = 0; i < BATCH; i++) {
      int k = (index * BATCHES + b) * BATCH + i;
      snprintf(traces[i], sizeof traces[i],
               "{\"version\":1,\"insts\":[],\"decisions\":[[%d,%d]]}", index,
               k);
      for (int r = 0; r < 3; r++) secs[i][r] = 1e-4 * (1 + (k * 7 + r) % 101);
      m[i] = (ts_db_measurement){.workload_id = workload,
                                 .target = T_A,
                                 .trace_json = traces[i],
                                 .run_secs = secs[i],
                                 .n_run_secs = 3,
                                 .job_id = job,
                                 .worker = worker};
    }
    if (ts_db_commit_records(db, m, BATCH, NULL) != TS_OK) {
      fprintf(stderr, "child %d: batch %d: %s\n", index, b, ts_db_errmsg(db));
      ts_db_close(db);
      return 1;
    }
  }
  ts_db_close(db);
  return 0;
}

static void test_eight_hosts(void **state) {
  fixture *fx = *state;
  if (!test_on_server()) skip();
  char path[400];
  test_fresh_db(fx->dir, "hosts.db", path, sizeof path);
  ts_db *db = open_db(path);
  int64_t workload = commit_spec(db, "matmul M=64 N=64 K=64", "mm64");
  int64_t job;
  assert_int_equal(
      ts_db_job_create(db, "fleet", NULL, N_PROCS * BATCHES * BATCH, &job),
      TS_OK);
  ts_db_close(db);
  double t0 = ts_now_seconds();
  pid_t pids[N_PROCS];
  for (int i = 0; i < N_PROCS; i++) {
    pids[i] = fork();
    assert_true(pids[i] >= 0);
    if (pids[i] == 0) _exit(tuner_child(path, i, workload, job));
  }
  for (int i = 0; i < N_PROCS; i++) {
    int status;
    assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
  }
  double elapsed = ts_now_seconds() - t0;
  int total = N_PROCS * BATCHES * BATCH;
  printf("  %d writer processes x %d batches of %d records: %.2f s, %.0f "
         "records/s committed\n",
         N_PROCS, BATCHES, BATCH, elapsed, total / elapsed);
  db = open_db(path);
  ts_db_record *all;
  int n;
  assert_int_equal(ts_db_records_of(db, workload, T_A, &all, &n), TS_OK);
  assert_int_equal(n, total);
  char *seen_trial = calloc((size_t)total, 1);
  char *seen_trace = calloc((size_t)total, 1);
  for (int i = 0; i < n; i++) {
    assert_true(all[i].trial >= 0 && all[i].trial < total);
    assert_false(seen_trial[all[i].trial]);
    seen_trial[all[i].trial] = 1;
    int host, k;
    assert_int_equal(
        sscanf(all[i].trace_json,
               "{\"version\":1,\"insts\":[],\"decisions\":[[%d,%d]", &host, &k),
        2);
    assert_true(k >= 0 && k < total);
    assert_false(seen_trace[k]);
    seen_trace[k] = 1;
    if (i) assert_true(all[i].trial > all[i - 1].trial);
  }
  free(seen_trial);
  free(seen_trace);
  ts_db_records_free(all, n);
  ts_db_job j;
  assert_int_equal(ts_db_job_get(db, "fleet", &j), TS_OK);
  assert_int_equal(j.trials_done, total);
  ts_db_job_clear(&j);
  ts_db_close(db);
}

/* ---- a private server stopped in the middle of a writer's batches ---- */

static int server_cmd(const char *cmd, const char *state_dir) {
  char line[1200];
  snprintf(line, sizeof line, "%s/tests/db/pg_server.sh %s '%s' --fast",
           TS_SOURCE_DIR, cmd, state_dir);
  return system(line);
}

#define KBATCH 40

/* Commits batches until one fails; reports each committed batch on fd,
 * then the failure's message on err_fd. */
static void batch_writer(const char *url, int64_t workload, int64_t job, int fd,
                         int err_fd) {
  ts_db *db;
  ts_error err;
  if (ts_db_open(url, NULL, &db, &err) != TS_OK) _exit(1);
  ts_db_measurement m[KBATCH];
  char traces[KBATCH][80];
  double secs[KBATCH];
  for (int b = 0;; b++) {
    for (int i = 0; i < KBATCH; i++) {
      snprintf(traces[i], sizeof traces[i], TRACE, b * KBATCH + i);
      secs[i] = 1e-3;
      m[i] = (ts_db_measurement){.workload_id = workload,
                                 .target = T_A,
                                 .trace_json = traces[i],
                                 .run_secs = &secs[i],
                                 .n_run_secs = 1,
                                 .job_id = job,
                                 .worker = "killed"};
    }
    if (ts_db_commit_records(db, m, KBATCH, NULL) != TS_OK) {
      const char *msg = ts_db_errmsg(db);
      if (write(err_fd, msg, strlen(msg)) < 0) _exit(4);
      _exit(2);
    }
    if (write(fd, &b, sizeof b) != sizeof b) _exit(3);
  }
}

static void test_server_stopped_mid_batch(void **state) {
  fixture *fx = *state;
  if (!test_on_server()) skip();
  char sdir[400];
  snprintf(sdir, sizeof sdir, "%s/server", fx->dir);
  if (server_cmd("start", sdir) != 0) fail_msg("cannot start a server");
  char url_file[450], url[512] = "";
  snprintf(url_file, sizeof url_file, "%s/url", sdir);
  FILE *f = fopen(url_file, "r");
  assert_non_null(f);
  assert_non_null(fgets(url, sizeof url, f));
  fclose(f);
  url[strcspn(url, "\n")] = 0;

  ts_db *db = open_db(url);
  int64_t workload = commit_spec(db, "matmul M=16 N=16 K=16", "mm16");
  int64_t job;
  assert_int_equal(ts_db_job_create(db, "restart", NULL, 100000, &job), TS_OK);

  int fds[2], efds[2];
  assert_int_equal(pipe(fds), 0);
  assert_int_equal(pipe(efds), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    close(efds[0]);
    batch_writer(url, workload, job, fds[1], efds[1]);
  }
  close(fds[1]);
  close(efds[1]);
  int b, got = 0;
  while (got < 5 && read(fds[0], &b, sizeof b) == sizeof b) got++;
  assert_int_equal(got, 5);
  /* the server stops (fast shutdown: sessions are ended) while the writer
   * is committing */
  assert_int_equal(server_cmd("halt", sdir), 0);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 2);
  char msg[2048] = "";
  ssize_t len = read(efds[0], msg, sizeof msg - 1);
  assert_true(len > 0);
  msg[len] = 0;
  printf("  the writer's error: %s\n", msg);
  assert_non_null(strstr(msg, "127.0.0.1"));
  assert_null(strstr(msg, "tessera-test"));
  while (read(fds[0], &b, sizeof b) == sizeof b) got++;
  close(fds[0]);
  close(efds[0]);

  /* the connection opened before the stop fails clearly while it is
   * down */
  int64_t id;
  ts_workload *w;
  ts_error err;
  assert_int_equal(ts_workload_from_spec("matmul M=4 N=4 K=4", &w, &err),
                   TS_OK);
  assert_int_not_equal(ts_db_commit_workload(db, w->func, "mm4", &id), TS_OK);
  assert_non_null(strstr(ts_db_errmsg(db), "127.0.0.1"));

  assert_int_equal(server_cmd("resume", sdir), 0);
  /* ... and works again once the server is back */
  assert_int_equal(ts_db_commit_workload(db, w->func, "mm4", &id), TS_OK);
  ts_workload_free(w);
  ts_db_record *all;
  int n;
  assert_int_equal(ts_db_records_of(db, workload, T_A, &all, &n), TS_OK);
  /* every reported batch is there; the one in flight entirely or not */
  assert_true(n == got * KBATCH || n == (got + 1) * KBATCH);
  ts_db_records_free(all, n);
  ts_db_job j;
  assert_int_equal(ts_db_job_get(db, "restart", &j), TS_OK);
  assert_int_equal(j.trials_done, n);
  ts_db_job_clear(&j);
  /* the job goes on from the exact count */
  commit_n(db, workload, T_A, job, 100000, 10);
  assert_int_equal(ts_db_job_get(db, "restart", &j), TS_OK);
  assert_int_equal(j.trials_done, n + 10);
  ts_db_job_clear(&j);
  ts_db_close(db);
  server_cmd("stop", sdir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_urls_and_unreachable),
      cmocka_unit_test_setup_teardown(test_sync, setup, teardown),
      cmocka_unit_test_setup_teardown(test_server_schema, setup, teardown),
      cmocka_unit_test(test_wrong_password),
      cmocka_unit_test_setup_teardown(test_newer_schema, setup, teardown),
      cmocka_unit_test_setup_teardown(test_eight_hosts, setup, teardown),
      cmocka_unit_test_setup_teardown(test_server_stopped_mid_batch, setup,
                                      teardown),
  };
  test_server_url(); /* exits 77 when the server was meant but is absent */
  return cmocka_run_group_tests(tests, NULL, NULL);
}
