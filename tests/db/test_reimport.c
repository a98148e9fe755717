/*
 * test_reimport.c — issue 27's database faults: the export of a 64-trial
 * job imported ten times into an empty database gives 64 records, not 640
 * (a record is identified by workload, target, trace, measurement time,
 * times and status; one repeated inside a file is added once); records
 * that differ only in their measurement time are all kept; and a version-2
 * database whose user_version says 1 opens (the migrations are idempotent)
 * with its records, at version 2.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db/db.h"

#define T_SKX "llvm -mcpu=skylake-avx512 -num-cores=2"

typedef struct fixture {
  char dir[256];
  char a[300], b[300];
} fixture;

static int setup(void **state) {
  fixture *fx = calloc(1, sizeof *fx);
  snprintf(fx->dir, sizeof fx->dir, "%s/ts-db-reimport-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(fx->dir)) return -1;
  snprintf(fx->a, sizeof fx->a, "%s/a.db", fx->dir);
  snprintf(fx->b, sizeof fx->b, "%s/b.db", fx->dir);
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

/* Each test starts from no database files. */
static void fresh(fixture *fx) {
  char cmd[700];
  snprintf(cmd, sizeof cmd, "rm -f '%s'* '%s'*", fx->a, fx->b);
  assert_int_equal(system(cmd), 0);
}

static ts_db *open_db(const char *path) {
  ts_db *db;
  ts_error err;
  if (ts_db_open(path, NULL, &db, &err) != TS_OK) fail_msg("%s", err.msg);
  return db;
}

static int64_t n_records(ts_db *db) {
  ts_db_stats s;
  assert_int_equal(ts_db_get_stats(db, &s), TS_OK);
  return s.n_records;
}

/* A 64-trial job: 64 distinct traces, measured one at a time. */
static void job64(ts_db *db) {
  ts_workload *w;
  ts_error err;
  assert_int_equal(ts_workload_from_spec("matmul M=32 N=32 K=32", &w, &err),
                   TS_OK);
  int64_t wid, job;
  assert_int_equal(ts_db_commit_workload(db, w->func, "mm", &wid), TS_OK);
  ts_workload_free(w);
  assert_int_equal(ts_db_job_create(db, "job64", "{}", 64, &job), TS_OK);
  for (int i = 0; i < 64; i++) {
    char trace[128];
    snprintf(trace, sizeof trace, "{\"version\":1,\"insts\":[],\"n\":%d}", i);
    double secs[2] = {1e-4 * (i + 1), 1.1e-4 * (i + 1)};
    ts_db_measurement m = {.workload_id = wid,
                           .target = T_SKX,
                           .trace_json = trace,
                           .run_secs = secs,
                           .n_run_secs = 2,
                           .status =
                               i % 8 ? TS_DB_STATUS_OK : TS_DB_STATUS_RUN_ERROR,
                           .error = i % 8 ? NULL : "crashed",
                           .job_id = job};
    assert_int_equal(ts_db_commit_record(db, &m, NULL), TS_OK);
  }
}

static char *export_of(ts_db *db) {
  char *buf = NULL;
  size_t size = 0;
  FILE *f = open_memstream(&buf, &size);
  assert_non_null(f);
  assert_int_equal(ts_db_export(db, f), TS_OK);
  fclose(f);
  return buf;
}

static ts_db_import_stats import_text(ts_db *db, const char *text) {
  FILE *f = tmpfile();
  assert_non_null(f);
  fputs(text, f);
  rewind(f);
  ts_db_import_stats st;
  if (ts_db_import(db, f, "export.jsonl", &st))
    fail_msg("import: %s", ts_db_errmsg(db));
  fclose(f);
  return st;
}

static void test_import_ten_times(void **state) {
  fixture *fx = *state;
  fresh(fx);
  ts_db *a = open_db(fx->a);
  job64(a);
  char *text = export_of(a);
  ts_db *b = open_db(fx->b);
  for (int k = 0; k < 10; k++) {
    ts_db_import_stats st = import_text(b, text);
    assert_int_equal(st.records, k == 0 ? 64 : 0);
    assert_int_equal(st.records_existing, k == 0 ? 0 : 64);
  }
  assert_int_equal(n_records(b), 64);
  /* Into the database it came from: nothing new either. */
  ts_db_import_stats st = import_text(a, text);
  assert_int_equal(st.records, 0);
  assert_int_equal(n_records(a), 64);
  /* The re-imported database exports the same bytes. */
  char *again = export_of(b);
  assert_string_equal(again, text);
  free(again);
  free(text);
  ts_db_close(a);
  ts_db_close(b);
}

/* A file holding the same record line twice adds it once; a record that
 * differs only in its measurement time is another measurement. */
static void test_duplicates_inside_a_file(void **state) {
  fixture *fx = *state;
  fresh(fx);
  ts_db *a = open_db(fx->a);
  job64(a);
  char *text = export_of(a);
  const char *rec = strstr(text, "\"record\"");
  assert_non_null(rec);
  const char *start = rec;
  while (start > text && start[-1] != '\n') start--;
  const char *end = strchr(rec, '\n');
  size_t n = (size_t)(end - start) + 1;
  size_t len = strlen(text);
  char *doubled = malloc(len + 2 * n + 1);
  memcpy(doubled, text, len);
  memcpy(doubled + len, start, n);
  /* the same line with another time */
  char *other = doubled + len + n;
  memcpy(other, start, n);
  other[n] = 0;
  char *created = strstr(other, "\"created\":\"");
  assert_non_null(created);
  created += strlen("\"created\":\"");
  created[0] = created[0] == '1' ? '2' : '1'; /* another millennium digit */
  ts_db *b = open_db(fx->b);
  ts_db_import_stats st = import_text(b, doubled);
  assert_int_equal(st.records, 65);
  assert_int_equal(st.records_existing, 1);
  assert_int_equal(n_records(b), 65);
  free(doubled);
  free(text);
  ts_db_close(a);
  ts_db_close(b);
}

static void exec_raw(const char *path, const char *sql) {
  sqlite3 *raw;
  assert_int_equal(sqlite3_open(path, &raw), SQLITE_OK);
  char *msg = NULL;
  if (sqlite3_exec(raw, sql, 0, 0, &msg) != SQLITE_OK)
    fail_msg("%s: %s", sql, msg);
  sqlite3_close(raw);
}

static int64_t query_raw(const char *path, const char *sql) {
  sqlite3 *raw;
  sqlite3_stmt *st;
  assert_int_equal(sqlite3_open(path, &raw), SQLITE_OK);
  assert_int_equal(sqlite3_prepare_v2(raw, sql, -1, &st, 0), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  int64_t v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(raw);
  return v;
}

static void test_migration_is_idempotent(void **state) {
  fixture *fx = *state;
  fresh(fx);
  ts_db *a = open_db(fx->a);
  job64(a);
  ts_db_close(a);
  /* A version-2 file that says version 1: the 1 -> 2 migration meets the
   * table it creates. */
  exec_raw(fx->a, "PRAGMA user_version = 1");
  ts_db *db = NULL;
  ts_error err;
  ts_error_clear(&err);
  if (ts_db_open(fx->a, NULL, &db, &err)) fail_msg("%s", err.msg);
  assert_int_equal(n_records(db), 64);
  ts_db_close(db);
  assert_int_equal(query_raw(fx->a, "PRAGMA user_version"),
                   TS_DB_SCHEMA_VERSION);
  /* Even from 0 with every table there (and the application id set). */
  exec_raw(fx->a, "PRAGMA user_version = 0");
  if (ts_db_open(fx->a, NULL, &db, &err)) fail_msg("%s", err.msg);
  assert_int_equal(n_records(db), 64);
  ts_db_close(db);
  assert_int_equal(query_raw(fx->a, "PRAGMA user_version"),
                   TS_DB_SCHEMA_VERSION);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_import_ten_times),
      cmocka_unit_test(test_duplicates_inside_a_file),
      cmocka_unit_test(test_migration_is_idempotent),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
