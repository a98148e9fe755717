/*
 * test_api.c — every call of the database API on real files: opening and
 * creating, workloads (idempotent commit, structural re-check after a hash
 * hit, lookup by PrimFunc, resolution by hash/prefix/name), targets
 * (canonicalization, `-mcpu=native` stored resolved, probe figures),
 * records (validation, all-or-nothing batches, medians, the measurement
 * context, best/top-k over ok records only and target-exact, records of a
 * workload, newest records),
 * the overview, jobs (create, resume, finish, budgets, trial indexes,
 * counts), prune, stats, integrity check, trace hooks, and prepared
 * statements staying fresh across connections. With a test server (see
 * test_db.h) the same tests run on PostgreSQL, except those about SQLite's
 * file settings and query planner.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "codegen/codegen.h"
#include "db/db.h"
#include "test_db.h"

#define TRACE "{\"version\":1,\"insts\":[],\"decisions\":[]}"
#define T_SKX "llvm -mcpu=skylake-avx512 -num-cores=2"
#define T_CUDA "cuda -arch=sm_80"

typedef struct fixture {
  char dir[256];
  char path[300];
  ts_db *db;
} fixture;

static int setup(void **state) {
  fixture *fx = calloc(1, sizeof *fx);
  snprintf(fx->dir, sizeof fx->dir, "%s/ts-db-api-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(fx->dir)) return -1;
  test_fresh_db(fx->dir, "api.db", fx->path, sizeof fx->path);
  ts_error err;
  if (ts_db_open(fx->path, NULL, &fx->db, &err) != TS_OK) {
    fprintf(stderr, "open: %s\n", err.msg);
    return -1;
  }
  *state = fx;
  return 0;
}

static int teardown(void **state) {
  fixture *fx = *state;
  ts_db_close(fx->db);
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", fx->dir);
  if (system(cmd) != 0) return -1;
  free(fx);
  return 0;
}

static ts_func *build(const char *spec) {
  ts_workload *w;
  ts_error err;
  if (ts_workload_from_spec(spec, &w, &err) != TS_OK) {
    fprintf(stderr, "%s: %s\n", spec, err.msg);
    fail();
  }
  ts_func *f = ts_func_copy(w->func);
  ts_workload_free(w);
  return f;
}

static int64_t commit_spec(ts_db *db, const char *spec, const char *name) {
  ts_func *f = build(spec);
  int64_t id = 0;
  int rc = ts_db_commit_workload(db, f, name, &id);
  if (rc) fprintf(stderr, "commit: %s\n", ts_db_errmsg(db));
  assert_int_equal(rc, TS_OK);
  assert_true(id > 0);
  ts_func_free(f);
  return id;
}

static ts_db_measurement meas(int64_t w, const char *target, ts_db_status st,
                              const double *secs, int n) {
  return (ts_db_measurement){.workload_id = w,
                             .target = target,
                             .trace_json = TRACE,
                             .run_secs = secs,
                             .n_run_secs = n,
                             .status = st};
}

static int64_t count_records(fixture *fx) {
  ts_db_stats s;
  assert_int_equal(ts_db_get_stats(fx->db, &s), TS_OK);
  return s.n_records;
}

/* ---- names ---- */

static void test_names(void **state) {
  (void)state;
  const char *want[] = {"ok",      "build_error",  "run_error",
                        "timeout", "wrong_result", "worker_lost"};
  for (int i = 0; i < TS_DB_N_STATUS; i++) {
    assert_string_equal(ts_db_status_name((ts_db_status)i), want[i]);
    ts_db_status s;
    assert_int_equal(ts_db_status_parse(want[i], &s), TS_OK);
    assert_int_equal(s, i);
  }
  ts_db_status s;
  assert_int_equal(ts_db_status_parse("fine", &s), TS_EINVAL);
  assert_null(ts_db_status_name((ts_db_status)6));
  const char *states[] = {"running", "finished", "interrupted", "failed"};
  for (int i = 0; i < TS_DB_N_JOB_STATE; i++) {
    assert_string_equal(ts_db_job_state_name((ts_db_job_state)i), states[i]);
    ts_db_job_state j;
    assert_int_equal(ts_db_job_state_parse(states[i], &j), TS_OK);
    assert_int_equal(j, i);
  }
  ts_db_job_state j;
  assert_int_equal(ts_db_job_state_parse("paused", &j), TS_EINVAL);
}

/* ---- opening ---- */

static void test_open_settings(void **state) {
  fixture *fx = *state;
  if (test_on_server())
    skip(); /* SQLite's file settings; test_pg has the
               server's */
  ts_db_options d = ts_db_defaults();
  assert_true(d.create);
  assert_false(d.read_only);
  assert_int_equal(d.busy_timeout_ms, 60000);
  assert_string_equal(ts_db_path(fx->db), fx->path);
  assert_string_equal(ts_db_errmsg(fx->db), "");
  /* the file is a WAL database at the current schema with foreign keys */
  sqlite3 *raw;
  assert_int_equal(sqlite3_open(fx->path, &raw), SQLITE_OK);
  sqlite3_stmt *st;
  assert_int_equal(sqlite3_prepare_v2(raw, "PRAGMA journal_mode", -1, &st, 0),
                   SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_string_equal((const char *)sqlite3_column_text(st, 0), "wal");
  sqlite3_finalize(st);
  assert_int_equal(sqlite3_prepare_v2(raw, "PRAGMA user_version", -1, &st, 0),
                   SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_int_equal(sqlite3_column_int(st, 0), TS_DB_SCHEMA_VERSION);
  sqlite3_finalize(st);
  assert_int_equal(sqlite3_prepare_v2(raw, "PRAGMA application_id", -1, &st, 0),
                   SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_int_equal(sqlite3_column_int(st, 0), 0x54534442);
  sqlite3_finalize(st);

  /* records reference workloads, targets and jobs */
  assert_int_equal(
      sqlite3_prepare_v2(raw, "PRAGMA foreign_key_list(records)", -1, &st, 0),
      SQLITE_OK);
  int refs = 0;
  while (sqlite3_step(st) == SQLITE_ROW) refs++;
  sqlite3_finalize(st);
  assert_int_equal(refs, 3);
  sqlite3_close(raw);

  ts_db *again;
  ts_error err;
  /* read-only: works on an existing database, refuses writes */
  ts_db_options ro = ts_db_defaults();
  ro.read_only = true;
  assert_int_equal(ts_db_open(fx->path, &ro, &again, &err), TS_OK);
  int64_t id;
  ts_func *f = build("matmul M=4 N=4 K=4");
  assert_int_not_equal(ts_db_commit_workload(again, f, NULL, &id), TS_OK);
  assert_non_null(strstr(ts_db_errmsg(again), "readonly"));
  ts_func_free(f);
  ts_db_close(again);

  /* no create: a missing file is an error and is not created */
  char missing[320];
  snprintf(missing, sizeof missing, "%s/missing.db", fx->dir);
  ts_db_options nc = ts_db_defaults();
  nc.create = false;
  assert_int_equal(ts_db_open(missing, &nc, &again, &err), TS_ENOTFOUND);
  assert_null(again);
  assert_non_null(strstr(err.msg, "no such database"));
  assert_int_not_equal(access(missing, F_OK), 0);
  assert_int_equal(ts_db_open(missing, &ro, &again, &err), TS_ENOTFOUND);
  assert_int_equal(ts_db_open("", NULL, &again, &err), TS_EINVAL);
  /* a directory is not a database */
  assert_int_equal(ts_db_open(fx->dir, NULL, &again, &err), TS_EINVAL);
  assert_non_null(strstr(err.msg, "not a file"));
  ts_db_close(NULL);
}

/* ---- workloads ---- */

static void test_workload_commit_and_find(void **state) {
  fixture *fx = *state;
  ts_func *f = build("matmul M=64 N=32 K=16");
  int64_t id, again;
  assert_int_equal(ts_db_commit_workload(fx->db, f, "mm", &id), TS_OK);
  /* idempotent: the same structure (here a renamed copy) keeps its id and
   * its first name */
  ts_func *renamed = ts_func_copy(f);
  ts_func_set_name(renamed, "other_name");
  ts_buffer_set_name(ts_func_arena(renamed), ts_func_param(renamed, 0), "X");
  assert_int_equal(ts_db_commit_workload(fx->db, renamed, "mm2", &again),
                   TS_OK);
  assert_int_equal(again, id);
  assert_int_equal(ts_db_find_workload(fx->db, renamed, &again), TS_OK);
  assert_int_equal(again, id);

  ts_db_workload w;
  assert_int_equal(ts_db_get_workload(fx->db, id, &w), TS_OK);
  assert_string_equal(w.name, "mm");
  char hex[33];
  ts_hash128_hex(ts_func_hash(f), hex);
  assert_string_equal(w.hash, hex);
  char *text = ts_func_print(f);
  assert_string_equal(w.tir, text);
  free(text);
  assert_true(w.flops == ts_func_flops(f));
  assert_int_equal(strlen(w.created), 24);
  assert_int_equal(w.created[23], 'Z');
  ts_db_workload_clear(&w);
  assert_int_equal(ts_db_get_workload(fx->db, 999, &w), TS_ENOTFOUND);

  ts_func *parsed;
  assert_int_equal(ts_db_workload_func(fx->db, id, &parsed), TS_OK);
  assert_true(ts_func_equal(parsed, f));
  ts_func_free(parsed);
  assert_int_equal(ts_db_workload_func(fx->db, 999, &parsed), TS_ENOTFOUND);

  /* a different shape is another workload; absent ones are not found */
  int64_t other = commit_spec(fx->db, "matmul M=64 N=32 K=32", NULL);
  assert_int_not_equal(other, id);
  assert_int_equal(ts_db_get_workload(fx->db, other, &w), TS_OK);
  assert_true(strlen(w.name) > 0); /* the function's own name */
  ts_db_workload_clear(&w);
  ts_func *absent = build("matmul M=8 N=8 K=8");
  assert_int_equal(ts_db_find_workload(fx->db, absent, &again), TS_ENOTFOUND);
  assert_non_null(strstr(ts_db_errmsg(fx->db), "no workload with hash"));
  assert_int_equal(ts_db_commit_workload(fx->db, NULL, NULL, &again),
                   TS_EINVAL);
  ts_func_free(absent);
  ts_func_free(renamed);
  ts_func_free(f);
}

/* A stored workload whose hash equals another function's hash (a forged
 * collision) is not handed out for it: the structural re-check refuses. */
static void test_hash_hit_rechecked(void **state) {
  fixture *fx = *state;
  int64_t a = commit_spec(fx->db, "matmul M=16 N=16 K=16", "a");
  ts_func *b = build("matmul M=16 N=16 K=32");
  char hb[33];
  ts_hash128_hex(ts_func_hash(b), hb);
  char sql[200];
  snprintf(sql, sizeof sql, "UPDATE workloads SET hash = '%s' WHERE id = %lld",
           hb, (long long)a);
  if (test_on_server()) {
    assert_true(test_server_exec(fx->path, sql));
  } else {
    sqlite3 *raw;
    assert_int_equal(sqlite3_open(fx->path, &raw), SQLITE_OK);
    assert_int_equal(sqlite3_exec(raw, sql, 0, 0, 0), SQLITE_OK);
    sqlite3_close(raw);
  }

  int64_t id;
  assert_int_equal(ts_db_find_workload(fx->db, b, &id), TS_ENOTFOUND);
  int64_t stored;
  assert_int_equal(ts_db_commit_workload(fx->db, b, "b", &stored), TS_OK);
  assert_int_not_equal(stored, a);
  assert_int_equal(ts_db_find_workload(fx->db, b, &id), TS_OK);
  assert_int_equal(id, stored);
  /* records of `a` never answer a query for b */
  double s[] = {1e-3};
  ts_db_measurement m = meas(a, T_SKX, TS_DB_STATUS_OK, s, 1);
  assert_int_equal(ts_db_commit_record(fx->db, &m, NULL), TS_OK);
  ts_db_record r;
  assert_int_equal(ts_db_best_by_func(fx->db, b, T_SKX, &r), TS_ENOTFOUND);
  ts_func_free(b);
}

static void test_resolve(void **state) {
  fixture *fx = *state;
  int64_t a = commit_spec(fx->db, "matmul M=16 N=16 K=16", "alpha");
  int64_t b = commit_spec(fx->db, "matmul M=32 N=16 K=16", "beta");
  commit_spec(fx->db, "matmul M=48 N=16 K=16", "twin");
  commit_spec(fx->db, "matmul M=64 N=16 K=16", "twin");
  ts_db_workload w;
  assert_int_equal(ts_db_get_workload(fx->db, b, &w), TS_OK);
  int64_t id;
  assert_int_equal(ts_db_resolve_workload(fx->db, w.hash, &id), TS_OK);
  assert_int_equal(id, b);
  char prefix[13];
  snprintf(prefix, sizeof prefix, "%.12s", w.hash);
  assert_int_equal(ts_db_resolve_workload(fx->db, prefix, &id), TS_OK);
  assert_int_equal(id, b);
  for (char *p = prefix; *p; p++)
    if (*p >= 'a' && *p <= 'f') *p = (char)(*p - 'a' + 'A');
  assert_int_equal(ts_db_resolve_workload(fx->db, prefix, &id), TS_OK);
  assert_int_equal(id, b);
  ts_db_workload_clear(&w);
  assert_int_equal(ts_db_resolve_workload(fx->db, "alpha", &id), TS_OK);
  assert_int_equal(id, a);
  assert_int_equal(ts_db_resolve_workload(fx->db, "twin", &id), TS_EINVAL);
  assert_non_null(strstr(ts_db_errmsg(fx->db), "ambiguous"));
  assert_int_equal(ts_db_resolve_workload(fx->db, "gamma", &id), TS_ENOTFOUND);
  assert_non_null(strstr(ts_db_errmsg(fx->db), "gamma"));
  assert_int_equal(ts_db_resolve_workload(fx->db, "", &id), TS_EINVAL);
}

/* ---- targets ---- */

static void test_targets(void **state) {
  fixture *fx = *state;
  /* `llvm -mcpu=native` and plain `llvm` are stored as this host */
  ts_target *host;
  ts_error err;
  assert_int_equal(ts_target_host(&host, &err), TS_OK);
  int64_t native, plain, host_id;
  assert_int_equal(ts_db_commit_target(fx->db, "llvm -mcpu=native", &native),
                   TS_OK);
  assert_int_equal(ts_db_commit_target(fx->db, "llvm", &plain), TS_OK);
  assert_int_equal(ts_db_find_target(fx->db, ts_target_str(host), &host_id),
                   TS_OK);
  assert_int_equal(native, plain);
  assert_int_equal(native, host_id);
  char *canonical = ts_db_canonical_target(fx->db, "llvm -mcpu=native");
  assert_string_equal(canonical, ts_target_str(host));
  assert_null(strstr(canonical, "native"));
  free(canonical);
  ts_target_free(host);

  /* non-canonical spelling finds the canonical row */
  int64_t c1, c2;
  assert_int_equal(ts_db_commit_target(fx->db, "cuda -arch=sm_80", &c1), TS_OK);
  assert_int_equal(ts_db_commit_target(fx->db,
                                       "  cuda  -max-threads-per-block=1024 "
                                       "-arch=sm_80",
                                       &c2),
                   TS_OK);
  assert_int_equal(c1, c2);
  assert_int_not_equal(c1, native);
  assert_int_equal(ts_db_find_target(fx->db, "cuda -arch=sm_90", &c2),
                   TS_ENOTFOUND);
  assert_int_equal(ts_db_commit_target(fx->db, "lvm -mcpu=x", &c2), TS_EINVAL);
  assert_non_null(strstr(ts_db_errmsg(fx->db), "lvm"));
  assert_null(ts_db_canonical_target(fx->db, "cuda"));

  /* probe figures: absent, set, replaced, cleared; must be an object */
  char *json = (char *)1;
  assert_int_equal(ts_db_get_target_probe(fx->db, c1, &json), TS_OK);
  assert_null(json);
  assert_int_equal(
      ts_db_set_target_probe(fx->db, c1, "{\"fp32_gflops\":1234.5}"), TS_OK);
  assert_int_equal(ts_db_get_target_probe(fx->db, c1, &json), TS_OK);
  assert_string_equal(json, "{\"fp32_gflops\":1234.5}");
  free(json);
  assert_int_equal(ts_db_set_target_probe(fx->db, c1, "[1,2]"), TS_EINVAL);
  assert_int_equal(ts_db_set_target_probe(fx->db, c1, "{oops"), TS_EINVAL);
  assert_int_equal(ts_db_set_target_probe(fx->db, 999, "{}"), TS_ENOTFOUND);
  assert_int_equal(ts_db_get_target_probe(fx->db, 999, &json), TS_ENOTFOUND);
  assert_int_equal(ts_db_set_target_probe(fx->db, c1, NULL), TS_OK);
  assert_int_equal(ts_db_get_target_probe(fx->db, c1, &json), TS_OK);
  assert_null(json);
}

/* ---- records ---- */

static void test_commit_validation(void **state) {
  fixture *fx = *state;
  int64_t w = commit_spec(fx->db, "matmul M=16 N=16 K=16", NULL);
  double good[] = {2e-3, 1e-3, 3e-3};
  double bad[] = {1e-3, NAN};
  double zero[] = {0.0};
  ts_db_measurement ok = meas(w, T_SKX, TS_DB_STATUS_OK, good, 3);
  struct {
    ts_db_measurement m;
    const char *msg;
  } cases[] = {
      {meas(w, T_SKX, TS_DB_STATUS_OK, NULL, 0), "at least one run time"},
      {meas(w, T_SKX, TS_DB_STATUS_OK, bad, 2), "run time 1"},
      {meas(w, T_SKX, TS_DB_STATUS_OK, zero, 1), "positive"},
      {meas(w, T_SKX, (ts_db_status)9, good, 1), "bad status"},
      {meas(0, T_SKX, TS_DB_STATUS_OK, good, 1), "no workload id"},
      {meas(w + 100, T_SKX, TS_DB_STATUS_OK, good, 1), "no workload with id"},
      {meas(w, "", TS_DB_STATUS_OK, good, 1), "no target"},
      {meas(w, "llvm -mcpu=nonsense-cpu", TS_DB_STATUS_OK, good, 1), "target"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    /* each bad record sits second in a batch: nothing of the batch lands */
    ts_db_measurement batch[2] = {ok, cases[i].m};
    int rc = ts_db_commit_records(fx->db, batch, 2, NULL);
    assert_int_not_equal(rc, TS_OK);
    if (!strstr(ts_db_errmsg(fx->db), cases[i].msg))
      fail_msg("case %zu: '%s' lacks '%s'", i, ts_db_errmsg(fx->db),
               cases[i].msg);
    assert_non_null(strstr(ts_db_errmsg(fx->db), "record 1"));
    assert_int_equal(count_records(fx), 0);
  }
  /* a job that does not exist */
  ts_db_measurement nojob = ok;
  nojob.job_id = 77;
  assert_int_equal(ts_db_commit_record(fx->db, &nojob, NULL), TS_EINVAL);
  assert_non_null(strstr(ts_db_errmsg(fx->db), "no job with id 77"));
  /* corrupt traces, each with its own message */
  const char *traces[][2] = {
      {"{\"version\":1", "syntax error at byte"},
      {"[1,2,3]", "not an object"},
      {"{\"insts\":[]}", "no \"version\""},
      {"{\"version\":\"1\"}", "not a positive integer"},
      {"{\"version\":1.5}", "not a positive integer"},
      {"{\"version\":1} trailing", "syntax error"},
      {"", "syntax error"},
  };
  for (size_t i = 0; i < sizeof traces / sizeof traces[0]; i++) {
    ts_db_measurement m = ok;
    m.trace_json = traces[i][0];
    assert_int_equal(ts_db_commit_record(fx->db, &m, NULL), TS_EINVAL);
    if (!strstr(ts_db_errmsg(fx->db), traces[i][1]))
      fail_msg("trace %zu: '%s' lacks '%s'", i, ts_db_errmsg(fx->db),
               traces[i][1]);
    assert_non_null(strstr(ts_db_errmsg(fx->db), "trace JSON"));
  }
  ts_db_measurement notrace = ok;
  notrace.trace_json = NULL;
  assert_int_equal(ts_db_commit_record(fx->db, &notrace, NULL), TS_EINVAL);
  assert_int_equal(ts_db_commit_records(fx->db, NULL, 1, NULL), TS_EINVAL);
  assert_int_equal(ts_db_commit_records(fx->db, &ok, 0, NULL), TS_OK);
  assert_int_equal(count_records(fx), 0);

  /* a good record: median of the run times, version and time recorded */
  int64_t id;
  ok.error = NULL;
  ok.worker = "cpu0";
  assert_int_equal(ts_db_commit_record(fx->db, &ok, &id), TS_OK);
  assert_string_equal(ts_db_errmsg(fx->db), "");
  ts_db_record r;
  assert_int_equal(ts_db_best(fx->db, w, T_SKX, &r), TS_OK);
  assert_int_equal(r.id, id);
  assert_true(r.median_s == 2e-3);
  assert_int_equal(r.n_run_secs, 3);
  assert_true(r.run_secs[0] == 2e-3 && r.run_secs[1] == 1e-3 &&
              r.run_secs[2] == 3e-3);
  assert_string_equal(r.trace_json, TRACE);
  assert_string_equal(r.error, "");
  assert_string_equal(r.worker, "cpu0");
  assert_string_equal(r.version, TS_VERSION);
  assert_int_equal(r.job_id, 0);
  assert_int_equal(r.trial, -1);
  assert_int_equal(r.status, TS_DB_STATUS_OK);
  assert_int_equal(r.workload_id, w);
  assert_non_null(strstr(r.target, "llvm -mcpu=skylake-avx512 -mattr="));
  ts_db_record_clear(&r);
  ts_db_record_clear(&r); /* clearing twice is safe */

  /* even counts average the middle two; failures may have no run times */
  double two[] = {4e-3, 2e-3};
  ts_db_measurement even = meas(w, T_SKX, TS_DB_STATUS_RUN_ERROR, two, 2);
  ts_db_measurement none = meas(w, T_SKX, TS_DB_STATUS_TIMEOUT, NULL, 0);
  none.error = "timed out after 10 s";
  ts_db_measurement both[2] = {even, none};
  int64_t ids[2];
  assert_int_equal(ts_db_commit_records(fx->db, both, 2, ids), TS_OK);
  assert_true(ids[1] == ids[0] + 1);
  ts_db_record *all;
  int n;
  assert_int_equal(ts_db_records_of(fx->db, w, T_SKX, &all, &n), TS_OK);
  assert_int_equal(n, 3);
  assert_true(all[1].median_s == 3e-3);
  assert_int_equal(all[1].status, TS_DB_STATUS_RUN_ERROR);
  assert_true(isnan(all[2].median_s));
  assert_int_equal(all[2].n_run_secs, 0);
  assert_string_equal(all[2].error, "timed out after 10 s");
  ts_db_records_free(all, n);
}

/* The measurement context (records.measure): stored as given on both commit
 * paths (a server inserts batches of 8 or more in multi-row statements),
 * returned by every record query, NULL when not given, and refused naming
 * the record when it is not one JSON object. */
static void test_measure_column(void **state) {
  fixture *fx = *state;
  int64_t w = commit_spec(fx->db, "matmul M=16 N=16 K=8", NULL);
  const char *how = "{\"number\":1,\"repeat\":3,\"min_repeat_ms\":10,"
                    "\"warmup\":0,\"flush_cache\":false,\"threads\":2,"
                    "\"timeout_ms\":10000,\"cpus\":\"0,2-3\"}";
  const char *pretty = "{ \"threads\": 1,\n  \"cpus\": null }";
  double t[10];
  ts_db_measurement m[10];
  for (int i = 0; i < 10; i++) {
    t[i] = (i + 1) * 1e-3;
    m[i] = meas(w, T_SKX, TS_DB_STATUS_OK, &t[i], 1);
    m[i].measure_json = i % 3 == 0 ? how : i % 3 == 1 ? NULL : pretty;
  }
  int64_t ids[10];
  assert_int_equal(ts_db_commit_records(fx->db, m, 10, ids), TS_OK);
  /* one record alone (the single-row insert on a server too), the slowest */
  double slow = 1.0;
  ts_db_measurement single = meas(w, T_SKX, TS_DB_STATUS_OK, &slow, 1);
  assert_int_equal(ts_db_commit_record(fx->db, &single, NULL), TS_OK);

  /* every record query carries it */
  ts_db_record *all;
  int n;
  assert_int_equal(ts_db_records_of(fx->db, w, T_SKX, &all, &n), TS_OK);
  assert_int_equal(n, 11);
  for (int i = 0; i < 10; i++) {
    assert_int_equal(all[i].id, ids[i]);
    if (m[i].measure_json)
      assert_string_equal(all[i].measure_json, m[i].measure_json);
    else
      assert_null(all[i].measure_json);
  }
  assert_null(all[10].measure_json);
  ts_db_records_free(all, n);
  ts_db_record best;
  assert_int_equal(ts_db_best(fx->db, w, T_SKX, &best), TS_OK);
  assert_int_equal(best.id, ids[0]);
  assert_string_equal(best.measure_json, how);
  ts_db_record_clear(&best);
  assert_null(best.measure_json);
  ts_func *f = build("matmul M=16 N=16 K=8");
  assert_int_equal(ts_db_best_by_func(fx->db, f, T_SKX, &best), TS_OK);
  ts_func_free(f);
  assert_string_equal(best.measure_json, how);
  ts_db_record_clear(&best);
  assert_int_equal(ts_db_top_k(fx->db, w, T_SKX, 3, &all, &n), TS_OK);
  assert_int_equal(n, 3);
  assert_string_equal(all[0].measure_json, how);
  assert_null(all[1].measure_json);
  assert_string_equal(all[2].measure_json, pretty);
  ts_db_records_free(all, n);
  assert_int_equal(ts_db_recent_records(fx->db, w, 2, &all, &n), TS_OK);
  assert_int_equal(n, 2);
  assert_null(all[0].measure_json);
  assert_string_equal(all[1].measure_json, m[9].measure_json);
  ts_db_records_free(all, n);
  assert_int_equal(ts_db_top_k_search(fx->db, w, T_SKX, 1, &all, &n), TS_OK);
  assert_int_equal(n, 1);
  assert_string_equal(all[0].measure_json, how);
  ts_db_records_free(all, n);

  /* not one JSON object: refused naming the record, nothing stored */
  const char *bad[][2] = {
      {"{\"threads\":", "record 1: measure_json is not valid JSON"},
      {"[1,2]", "record 1: measure_json is not a JSON object"},
      {"\"0-3\"", "record 1: measure_json is not a JSON object"},
      {"", "record 1: measure_json is not valid JSON"},
      {"{} {}", "record 1: measure_json is not valid JSON"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ts_db_measurement batch[2] = {m[0], m[0]};
    batch[1].measure_json = bad[i][0];
    assert_int_equal(ts_db_commit_records(fx->db, batch, 2, NULL), TS_EINVAL);
    if (!strstr(ts_db_errmsg(fx->db), bad[i][1]))
      fail_msg("case %zu: '%s' lacks '%s'", i, ts_db_errmsg(fx->db), bad[i][1]);
    assert_int_equal(count_records(fx), 11);
  }
}

static void test_best_and_top_k(void **state) {
  fixture *fx = *state;
  int64_t w = commit_spec(fx->db, "matmul M=32 N=32 K=32", NULL);
  int64_t w2 = commit_spec(fx->db, "matmul M=32 N=32 K=64", NULL);
  double t[] = {5e-3, 3e-3, 4e-3, 1e-3, 2e-3, 0.5e-3, 0.1e-3};
  ts_db_measurement m[] = {
      meas(w, T_SKX, TS_DB_STATUS_OK, &t[0], 1),
      meas(w, T_SKX, TS_DB_STATUS_OK, &t[1], 1),
      meas(w, T_SKX, TS_DB_STATUS_OK, &t[2], 1),
      meas(w, T_CUDA, TS_DB_STATUS_OK, &t[3], 1), /* other target */
      meas(w, T_SKX, TS_DB_STATUS_OK, &t[4], 1),
      meas(w, T_SKX, TS_DB_STATUS_WRONG_RESULT, &t[5], 1), /* fast but wrong */
      meas(w2, T_SKX, TS_DB_STATUS_OK, &t[6], 1),          /* other workload */
  };
  int64_t ids[7];
  assert_int_equal(ts_db_commit_records(fx->db, m, 7, ids), TS_OK);
  ts_db_record r;
  assert_int_equal(ts_db_best(fx->db, w, T_SKX, &r), TS_OK);
  assert_int_equal(r.id, ids[4]);
  assert_true(r.median_s == 2e-3);
  ts_db_record_clear(&r);
  assert_int_equal(ts_db_best(fx->db, w, T_CUDA, &r), TS_OK);
  assert_int_equal(r.id, ids[3]);
  assert_string_equal(r.target, "cuda -arch=sm_80 -max-threads-per-block=1024 "
                                "-max-shared-memory-per-block=49152 "
                                "-max-registers-per-thread=255");
  ts_db_record_clear(&r);
  assert_int_equal(ts_db_best(fx->db, w, "cuda -arch=sm_90", &r), TS_ENOTFOUND);
  assert_int_equal(ts_db_best(fx->db, w, "bogus", &r), TS_EINVAL);
  assert_int_equal(ts_db_best(fx->db, 999, T_SKX, &r), TS_ENOTFOUND);
  assert_non_null(strstr(ts_db_errmsg(fx->db), "no ok record"));

  ts_db_record *top;
  int n;
  assert_int_equal(ts_db_top_k(fx->db, w, T_SKX, 3, &top, &n), TS_OK);
  assert_int_equal(n, 3);
  assert_int_equal(top[0].id, ids[4]);
  assert_int_equal(top[1].id, ids[1]);
  assert_int_equal(top[2].id, ids[2]);
  ts_db_records_free(top, n);
  assert_int_equal(ts_db_top_k(fx->db, w, T_SKX, 100, &top, &n), TS_OK);
  assert_int_equal(n, 4);
  for (int i = 1; i < n; i++)
    assert_true(top[i - 1].median_s <= top[i].median_s);
  ts_db_records_free(top, n);
  assert_int_equal(ts_db_top_k(fx->db, w, T_SKX, 0, &top, &n), TS_OK);
  assert_int_equal(n, 0);
  assert_null(top);
  assert_int_equal(ts_db_top_k(fx->db, w, "cuda -arch=sm_90", 3, &top, &n),
                   TS_OK);
  assert_int_equal(n, 0);
  assert_int_equal(ts_db_top_k(fx->db, w, T_SKX, -1, &top, &n), TS_EINVAL);

  /* the compile-time query by PrimFunc, on a function built afresh */
  ts_func *f = build("matmul M=32 N=32 K=32");
  assert_int_equal(ts_db_best_by_func(fx->db, f, T_SKX, &r), TS_OK);
  assert_int_equal(r.id, ids[4]);
  ts_db_record_clear(&r);
  assert_int_equal(ts_db_best_by_func(fx->db, f, "cuda -arch=sm_90", &r),
                   TS_ENOTFOUND);
  ts_func_free(f);
  f = build("matmul M=8 N=8 K=8");
  assert_int_equal(ts_db_best_by_func(fx->db, f, T_SKX, &r), TS_ENOTFOUND);
  assert_int_equal(ts_db_best_by_func(fx->db, NULL, T_SKX, &r), TS_EINVAL);
  ts_func_free(f);

  /* records_of: every status, oldest first, this target only */
  ts_db_record *all;
  assert_int_equal(ts_db_records_of(fx->db, w, T_SKX, &all, &n), TS_OK);
  assert_int_equal(n, 5);
  assert_int_equal(all[0].id, ids[0]);
  assert_int_equal(all[4].id, ids[5]);
  assert_int_equal(all[4].status, TS_DB_STATUS_WRONG_RESULT);
  ts_db_records_free(all, n);
  assert_int_equal(ts_db_records_of(fx->db, w, "cuda -arch=sm_90", &all, &n),
                   TS_OK);
  assert_int_equal(n, 0);
  /* recent: newest first, any target */
  assert_int_equal(ts_db_recent_records(fx->db, w, 2, &all, &n), TS_OK);
  assert_int_equal(n, 2);
  assert_int_equal(all[0].id, ids[5]);
  assert_int_equal(all[1].id, ids[4]);
  ts_db_records_free(all, n);
  assert_int_equal(ts_db_recent_records(fx->db, w, -1, &all, &n), TS_EINVAL);
  ts_db_records_free(NULL, 0);
}

static void test_list(void **state) {
  fixture *fx = *state;
  ts_db_summary *rows;
  int n;
  assert_int_equal(ts_db_list(fx->db, 0, &rows, &n), TS_OK);
  assert_int_equal(n, 0);
  int64_t a = commit_spec(fx->db, "matmul M=16 N=16 K=16", "a");
  int64_t b = commit_spec(fx->db, "matmul M=16 N=16 K=32", "b");
  double t[] = {2e-3, 1e-3, 5e-3};
  ts_db_measurement m[] = {
      meas(a, T_SKX, TS_DB_STATUS_OK, &t[0], 1),
      meas(a, T_SKX, TS_DB_STATUS_OK, &t[1], 1),
      meas(a, T_SKX, TS_DB_STATUS_BUILD_ERROR, NULL, 0),
      meas(a, T_CUDA, TS_DB_STATUS_TIMEOUT, NULL, 0),
  };
  assert_int_equal(ts_db_commit_records(fx->db, m, 4, NULL), TS_OK);
  assert_int_equal(ts_db_list(fx->db, 0, &rows, &n), TS_OK);
  assert_int_equal(n, 3);
  assert_int_equal(rows[0].workload_id, a);
  assert_string_equal(rows[0].name, "a");
  assert_non_null(strstr(rows[0].target, "skylake-avx512"));
  assert_int_equal(rows[0].n_records, 3);
  assert_int_equal(rows[0].n_ok, 2);
  assert_true(rows[0].best_s == 1e-3);
  assert_true(rows[0].flops == 2.0 * 16 * 16 * 16);
  assert_int_equal(rows[1].workload_id, a);
  assert_non_null(strstr(rows[1].target, "cuda"));
  assert_int_equal(rows[1].n_ok, 0);
  assert_true(isnan(rows[1].best_s));
  assert_int_equal(rows[2].workload_id, b);
  assert_null(rows[2].target);
  assert_int_equal(rows[2].target_id, 0);
  assert_int_equal(rows[2].n_records, 0);
  ts_db_summaries_free(rows, n);
  /* one workload's rows */
  assert_int_equal(ts_db_list(fx->db, a, &rows, &n), TS_OK);
  assert_int_equal(n, 2);
  assert_int_equal(rows[0].workload_id, a);
  assert_int_equal(rows[0].n_records, 3);
  assert_int_equal(rows[1].n_records, 1);
  ts_db_summaries_free(rows, n);
  assert_int_equal(ts_db_list(fx->db, b, &rows, &n), TS_OK);
  assert_int_equal(n, 1);
  assert_null(rows[0].target);
  ts_db_summaries_free(rows, n);
  assert_int_equal(ts_db_list(fx->db, 999, &rows, &n), TS_OK);
  assert_int_equal(n, 0);
  assert_null(rows);
}

/* ---- jobs ---- */

static void test_jobs(void **state) {
  fixture *fx = *state;
  int64_t w = commit_spec(fx->db, "matmul M=16 N=16 K=16", NULL);
  int64_t job, job2;
  assert_int_equal(
      ts_db_job_create(fx->db, "tune-a", "{\"trials\":100}", 100, &job), TS_OK);
  assert_int_equal(ts_db_job_create(fx->db, "tune-a", NULL, 5, &job2),
                   TS_EINVAL);
  assert_non_null(strstr(ts_db_errmsg(fx->db), "already exists"));
  assert_int_equal(ts_db_job_create(fx->db, "", NULL, 5, &job2), TS_EINVAL);
  assert_int_equal(ts_db_job_create(fx->db, "x\ny", NULL, 5, &job2), TS_EINVAL);
  assert_int_equal(ts_db_job_create(fx->db, "bad", "[1]", 5, &job2), TS_EINVAL);
  assert_int_equal(ts_db_job_create(fx->db, "bad", "{", 5, &job2), TS_EINVAL);
  assert_int_equal(ts_db_job_create(fx->db, "bad", NULL, -1, &job2), TS_EINVAL);
  assert_int_equal(ts_db_job_create(fx->db, "tune-b", NULL, 10, &job2), TS_OK);

  /* records of a job get increasing trial indexes, across batches and
   * interleaved with another job; trials_done follows */
  double t[] = {1e-3};
  for (int batch = 0; batch < 3; batch++) {
    ts_db_measurement m[4];
    for (int i = 0; i < 4; i++) {
      m[i] = meas(w, T_SKX, i == 3 ? TS_DB_STATUS_RUN_ERROR : TS_DB_STATUS_OK,
                  t, 1);
      m[i].job_id = i == 2 ? job2 : job;
    }
    assert_int_equal(ts_db_commit_records(fx->db, m, 4, NULL), TS_OK);
  }
  ts_db_record *all;
  int n;
  assert_int_equal(ts_db_records_of(fx->db, w, T_SKX, &all, &n), TS_OK);
  assert_int_equal(n, 12);
  int64_t next_a = 0, next_b = 0;
  for (int i = 0; i < n; i++) {
    if (all[i].job_id == job)
      assert_int_equal(all[i].trial, next_a++);
    else {
      assert_int_equal(all[i].job_id, job2);
      assert_int_equal(all[i].trial, next_b++);
    }
  }
  assert_int_equal(next_a, 9);
  assert_int_equal(next_b, 3);
  ts_db_records_free(all, n);

  int64_t total, by[TS_DB_N_STATUS];
  assert_int_equal(ts_db_job_count_records(fx->db, job, &total, by), TS_OK);
  assert_int_equal(total, 9);
  assert_int_equal(by[TS_DB_STATUS_OK], 6);
  assert_int_equal(by[TS_DB_STATUS_RUN_ERROR], 3);
  assert_int_equal(ts_db_job_count_records(fx->db, 999, &total, NULL), TS_OK);
  assert_int_equal(total, 0);

  ts_db_job j;
  assert_int_equal(ts_db_job_get(fx->db, "tune-a", &j), TS_OK);
  assert_int_equal(j.id, job);
  assert_int_equal(j.state, TS_DB_JOB_RUNNING);
  assert_int_equal(j.trials_done, 9);
  assert_int_equal(j.trials_budget, 100);
  assert_string_equal(j.config_json, "{\"trials\":100}");
  assert_string_equal(j.finished, "");
  assert_int_equal(strlen(j.started), 24);
  ts_db_job_clear(&j);
  assert_int_equal(ts_db_job_get(fx->db, "nope", &j), TS_ENOTFOUND);

  /* finish, then resume by name: counts survive, state running again */
  assert_int_equal(ts_db_job_finish(fx->db, job, TS_DB_JOB_INTERRUPTED), TS_OK);
  assert_int_equal(ts_db_job_get(fx->db, "tune-a", &j), TS_OK);
  assert_int_equal(j.state, TS_DB_JOB_INTERRUPTED);
  assert_int_equal(strlen(j.finished), 24);
  ts_db_job_clear(&j);
  assert_int_equal(ts_db_job_finish(fx->db, job, TS_DB_JOB_RUNNING), TS_EINVAL);
  assert_int_equal(ts_db_job_finish(fx->db, 999, TS_DB_JOB_FINISHED),
                   TS_ENOTFOUND);
  assert_int_equal(ts_db_job_resume(fx->db, "tune-a", &j), TS_OK);
  assert_int_equal(j.id, job);
  assert_int_equal(j.state, TS_DB_JOB_RUNNING);
  assert_int_equal(j.trials_done, 9);
  assert_string_equal(j.finished, "");
  ts_db_job_clear(&j);
  assert_int_equal(ts_db_job_get(fx->db, "tune-a", &j), TS_OK);
  assert_int_equal(j.state, TS_DB_JOB_RUNNING);
  assert_string_equal(j.finished, "");
  ts_db_job_clear(&j);
  assert_int_equal(ts_db_job_resume(fx->db, "nope", &j), TS_ENOTFOUND);

  assert_int_equal(ts_db_job_set_budget(fx->db, job, 250), TS_OK);
  assert_int_equal(ts_db_job_set_budget(fx->db, job, -5), TS_EINVAL);
  assert_int_equal(ts_db_job_set_budget(fx->db, 999, 5), TS_ENOTFOUND);
  assert_int_equal(ts_db_job_finish(fx->db, job2, TS_DB_JOB_FINISHED), TS_OK);

  ts_db_job *jobs;
  assert_int_equal(ts_db_jobs(fx->db, &jobs, &n), TS_OK);
  assert_int_equal(n, 2);
  assert_string_equal(jobs[0].name, "tune-a");
  assert_int_equal(jobs[0].trials_budget, 250);
  assert_string_equal(jobs[1].name, "tune-b");
  assert_int_equal(jobs[1].state, TS_DB_JOB_FINISHED);
  assert_int_equal(jobs[1].trials_done, 3);
  ts_db_jobs_free(jobs, n);

  ts_db_stats s;
  assert_int_equal(ts_db_get_stats(fx->db, &s), TS_OK);
  assert_int_equal(s.n_jobs, 2);
  assert_int_equal(s.jobs_by_state[TS_DB_JOB_RUNNING], 1);
  assert_int_equal(s.jobs_by_state[TS_DB_JOB_FINISHED], 1);
}

/* ---- prune, stats, integrity ---- */

static void test_prune_and_stats(void **state) {
  fixture *fx = *state;
  int64_t a = commit_spec(fx->db, "matmul M=16 N=16 K=16", NULL);
  int64_t b = commit_spec(fx->db, "matmul M=16 N=16 K=32", NULL);
  int64_t job;
  assert_int_equal(ts_db_job_create(fx->db, "j", NULL, 0, &job), TS_OK);
  double t[10];
  ts_db_measurement m[24];
  int n = 0;
  for (int i = 0; i < 10; i++) {
    t[i] = (10 - i) * 1e-3;
    m[n++] = meas(a, T_SKX, TS_DB_STATUS_OK, &t[i], 1);
    m[n - 1].job_id = job;
  }
  for (int i = 0; i < 5; i++)
    m[n++] = meas(b, T_SKX, TS_DB_STATUS_OK, &t[i], 1);
  for (int i = 0; i < 3; i++)
    m[n++] = meas(a, T_CUDA, TS_DB_STATUS_OK, &t[i], 1);
  m[n++] = meas(a, T_SKX, TS_DB_STATUS_BUILD_ERROR, NULL, 0);
  m[n++] = meas(b, T_SKX, TS_DB_STATUS_WORKER_LOST, NULL, 0);
  assert_int_equal(ts_db_commit_records(fx->db, m, n, NULL), TS_OK);

  ts_db_stats s;
  assert_int_equal(ts_db_get_stats(fx->db, &s), TS_OK);
  assert_int_equal(s.schema_version, TS_DB_SCHEMA_VERSION);
  assert_int_equal(s.n_workloads, 2);
  assert_int_equal(s.n_targets, 2);
  assert_int_equal(s.n_records, 20);
  assert_int_equal(s.records_by_status[TS_DB_STATUS_OK], 18);
  assert_int_equal(s.records_by_status[TS_DB_STATUS_BUILD_ERROR], 1);
  assert_int_equal(s.records_by_status[TS_DB_STATUS_WORKER_LOST], 1);
  assert_true(s.file_bytes > 0);

  int64_t deleted;
  assert_int_equal(ts_db_prune(fx->db, 0, false, &deleted), TS_EINVAL);
  assert_int_equal(ts_db_prune(fx->db, 2, true, &deleted), TS_OK);
  assert_int_equal(deleted, 8 + 3 + 1); /* a/skx 10->2, b 5->2, a/cuda 3->2 */
  assert_int_equal(count_records(fx), 8);
  ts_db_record *top;
  int k;
  assert_int_equal(ts_db_top_k(fx->db, a, T_SKX, 5, &top, &k), TS_OK);
  assert_int_equal(k, 2);
  assert_true(top[0].median_s == 1e-3 && top[1].median_s == 2e-3);
  ts_db_records_free(top, k);
  assert_int_equal(ts_db_prune(fx->db, 2, false, &deleted), TS_OK);
  assert_int_equal(deleted, 2);
  assert_int_equal(count_records(fx), 6);
  /* pruning lowers the job's record count, never its trials_done */
  int64_t total;
  assert_int_equal(ts_db_job_count_records(fx->db, job, &total, NULL), TS_OK);
  assert_int_equal(total, 2);
  ts_db_job j;
  assert_int_equal(ts_db_job_get(fx->db, "j", &j), TS_OK);
  assert_int_equal(j.trials_done, 10);
  ts_db_job_clear(&j);
  assert_int_equal(ts_db_vacuum(fx->db), TS_OK);
  assert_int_equal(ts_db_integrity_check(fx->db), TS_OK);
  assert_int_equal(count_records(fx), 6);
}

/* ---- trace hooks ---- */

static int strict_check(void *ctx, const char *json, size_t len,
                        ts_error *err) {
  int *calls = ctx;
  (*calls)++;
  if (!strstr(json, "\"insts\""))
    return TS_ERR(err, TS_EINVAL, "trace has no instructions (%zu bytes)", len);
  return TS_OK;
}

static char *readable(void *ctx, const char *json, ts_error *err) {
  (void)ctx;
  if (strstr(json, "unprintable")) {
    TS_ERR(err, TS_EINVAL, "cannot print this trace");
    return NULL;
  }
  char *s = malloc(64);
  snprintf(s, 64, "readable(%zu)", strlen(json));
  return s;
}

static void test_trace_hooks(void **state) {
  fixture *fx = *state;
  int64_t w = commit_spec(fx->db, "matmul M=16 N=16 K=16", NULL);
  /* without hooks: the built-in check, and JSON indented for people */
  char *pretty = ts_db_format_trace(fx->db, "{\"version\":1,\"insts\":[1,2]}");
  assert_non_null(pretty);
  assert_string_equal(pretty, "{\n  \"version\": 1,\n  \"insts\": [1, 2]\n}");
  free(pretty);
  assert_null(ts_db_format_trace(fx->db, "{\"version\":"));
  assert_non_null(strstr(ts_db_errmsg(fx->db), "trace JSON is corrupt"));
  assert_null(ts_db_format_trace(fx->db, NULL));

  ts_db_options o = ts_db_defaults();
  int calls = 0;
  o.check_trace = strict_check;
  o.print_trace = readable;
  o.trace_ctx = &calls;
  ts_db *db;
  ts_error err;
  assert_int_equal(ts_db_open(fx->path, &o, &db, &err), TS_OK);
  double t[] = {1e-3};
  ts_db_measurement m = meas(w, T_SKX, TS_DB_STATUS_OK, t, 1);
  m.trace_json = "{\"version\":1}"; /* passes the built-in, not this one */
  assert_int_equal(ts_db_commit_record(db, &m, NULL), TS_EINVAL);
  assert_non_null(strstr(ts_db_errmsg(db), "no instructions"));
  m.trace_json = "not json at all, but \"insts\" inside";
  assert_int_equal(ts_db_commit_record(db, &m, NULL), TS_OK);
  assert_int_equal(calls, 2);
  char *s = ts_db_format_trace(db, "{\"version\":1}");
  assert_string_equal(s, "readable(13)");
  free(s);
  assert_null(ts_db_format_trace(db, "unprintable"));
  assert_non_null(strstr(ts_db_errmsg(db), "cannot print"));
  ts_db_close(db);
  assert_int_equal(ts_db_check_trace_json(NULL, TRACE, strlen(TRACE), &err),
                   TS_OK);
  /* the length bounds the text */
  assert_int_equal(ts_db_check_trace_json(NULL, "{\"version\":1}xyz", 13, &err),
                   TS_OK);
}

/* Another connection's commits are visible to a handle whose statements
 * are cached (no statement is left holding an old snapshot). */
static void test_two_connections(void **state) {
  fixture *fx = *state;
  int64_t w = commit_spec(fx->db, "matmul M=16 N=16 K=16", NULL);
  ts_db *other;
  ts_error err;
  assert_int_equal(ts_db_open(fx->path, NULL, &other, &err), TS_OK);
  double t1[] = {5e-3}, t2[] = {1e-3};
  ts_db_measurement m = meas(w, T_SKX, TS_DB_STATUS_OK, t1, 1);
  assert_int_equal(ts_db_commit_record(fx->db, &m, NULL), TS_OK);
  ts_db_record r;
  assert_int_equal(ts_db_best(other, w, T_SKX, &r), TS_OK);
  assert_true(r.median_s == 5e-3);
  ts_db_record_clear(&r);
  m.run_secs = t2;
  assert_int_equal(ts_db_commit_record(fx->db, &m, NULL), TS_OK);
  assert_int_equal(ts_db_best(other, w, T_SKX, &r), TS_OK);
  assert_true(r.median_s == 1e-3);
  ts_db_record_clear(&r);
  /* a workload committed elsewhere is found, then answered from cache */
  int64_t w2;
  ts_func *f = build("matmul M=16 N=16 K=48");
  assert_int_equal(ts_db_commit_workload(other, f, NULL, &w2), TS_OK);
  int64_t found;
  assert_int_equal(ts_db_find_workload(fx->db, f, &found), TS_OK);
  assert_int_equal(found, w2);
  assert_int_equal(ts_db_find_workload(fx->db, f, &found), TS_OK);
  assert_int_equal(found, w2);
  ts_func_free(f);
  ts_db_close(other);
}

/* A tiny function cache budget still answers correctly (evicts and
 * re-parses). */
static void test_small_cache(void **state) {
  fixture *fx = *state;
  ts_db_options o = ts_db_defaults();
  o.func_cache_bytes = 1;
  ts_db *db;
  ts_error err;
  assert_int_equal(ts_db_open(fx->path, &o, &db, &err), TS_OK);
  const char *specs[] = {"matmul M=16 N=16 K=16", "matmul M=16 N=16 K=32",
                         "matmul M=16 N=16 K=48"};
  int64_t ids[3];
  for (int i = 0; i < 3; i++) ids[i] = commit_spec(db, specs[i], NULL);
  for (int round = 0; round < 3; round++)
    for (int i = 0; i < 3; i++) {
      ts_func *f = build(specs[i]);
      int64_t id;
      assert_int_equal(ts_db_find_workload(db, f, &id), TS_OK);
      assert_int_equal(id, ids[i]);
      ts_func_free(f);
    }
  ts_db_close(db);
}

/* The best query uses the partial index (no sort, no scan of records). */
static void test_query_plan(void **state) {
  fixture *fx = *state;
  if (test_on_server()) skip(); /* SQLite's planner */
  sqlite3 *raw;
  assert_int_equal(sqlite3_open(fx->path, &raw), SQLITE_OK);
  sqlite3_stmt *st;
  assert_int_equal(
      sqlite3_prepare_v2(raw,
                         "EXPLAIN QUERY PLAN SELECT r.id FROM records r JOIN "
                         "targets t ON t.id = r.target_id WHERE "
                         "r.workload_id = 1 AND r.target_id = 1 AND r.status "
                         "= 'ok' ORDER BY r.median_s, r.id LIMIT 1",
                         -1, &st, 0),
      SQLITE_OK);
  char plan[1024] = "";
  while (sqlite3_step(st) == SQLITE_ROW) {
    strncat(plan, (const char *)sqlite3_column_text(st, 3),
            sizeof plan - strlen(plan) - 2);
    strcat(plan, ";");
  }
  sqlite3_finalize(st);
  sqlite3_close(raw);
  if (!strstr(plan, "records_best") || strstr(plan, "TEMP B-TREE"))
    fail_msg("plan: %s", plan);
}

/* The benchmark on a small scale: it fills, queries (every answer checked
 * inside) and reports sane figures; with a directory the database stays. */
static void test_bench(void **state) {
  fixture *fx = *state;
  ts_db_bench_options o = ts_db_bench_defaults();
  assert_int_equal(o.records, 1000000);
  assert_int_equal(o.workloads, 10000);
  o.records = 300;
  o.workloads = 9;
  o.queries = 40;
  o.dir = fx->dir;
  if (test_on_server()) o.url = test_server_url(); /* a scratch schema */
  ts_db_bench_result r;
  ts_error err;
  int rc = ts_db_bench(&o, &r, &err);
  if (rc) fail_msg("%s", err.msg);
  assert_int_equal(r.records, 300);
  assert_int_equal(r.workloads, 9);
  assert_int_equal(r.queries, 40);
  assert_true(r.median_us > 0 && r.p99_us >= r.median_us);
  assert_true(r.cold_median_us > 0 && r.hash_median_us > 0);
  assert_true(r.file_bytes > 0 && r.fill_seconds > 0);
  o.records = 5;
  assert_int_equal(ts_db_bench(&o, &r, &err), TS_EINVAL);
  if (test_on_server()) return; /* the scratch schema was dropped */
  char kept[400];
  snprintf(kept, sizeof kept, "%s/bench.db", fx->dir);
  ts_db *db;
  assert_int_equal(ts_db_open(kept, NULL, &db, &err), TS_OK);
  ts_db_stats st;
  assert_int_equal(ts_db_get_stats(db, &st), TS_OK);
  assert_int_equal(st.n_records, 300);
  assert_int_equal(st.n_workloads, 9);
  assert_int_equal(st.n_targets, 2);
  ts_db_close(db);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_names),
      cmocka_unit_test_setup_teardown(test_open_settings, setup, teardown),
      cmocka_unit_test_setup_teardown(test_workload_commit_and_find, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_hash_hit_rechecked, setup, teardown),
      cmocka_unit_test_setup_teardown(test_resolve, setup, teardown),
      cmocka_unit_test_setup_teardown(test_targets, setup, teardown),
      cmocka_unit_test_setup_teardown(test_commit_validation, setup, teardown),
      cmocka_unit_test_setup_teardown(test_measure_column, setup, teardown),
      cmocka_unit_test_setup_teardown(test_best_and_top_k, setup, teardown),
      cmocka_unit_test_setup_teardown(test_list, setup, teardown),
      cmocka_unit_test_setup_teardown(test_jobs, setup, teardown),
      cmocka_unit_test_setup_teardown(test_prune_and_stats, setup, teardown),
      cmocka_unit_test_setup_teardown(test_trace_hooks, setup, teardown),
      cmocka_unit_test_setup_teardown(test_two_connections, setup, teardown),
      cmocka_unit_test_setup_teardown(test_small_cache, setup, teardown),
      cmocka_unit_test_setup_teardown(test_query_plan, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bench, setup, teardown),
  };
  test_server_url(); /* exits 77 when the server was meant but is absent */
  return cmocka_run_group_tests(tests, NULL, NULL);
}
