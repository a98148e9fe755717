/*
 * test_faults.c — bad database files and bad data: a file that is not
 * SQLite, corrupt and truncated databases, an SQLite file of another
 * application, a database of a newer schema version, records with corrupt
 * trace JSON, stored TIR that no longer parses, and a damaged page. Each
 * gives a clear error naming the problem; none crashes; and a refused file
 * is left byte for byte as it was, with nothing created beside it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "db/db.h"

#define TARGET "llvm -mcpu=skylake-avx512 -num-cores=2"
#define TRACE "{\"version\":1,\"insts\":[],\"decisions\":[]}"

typedef struct fixture {
  char dir[256];
  char path[300];
} fixture;

static int setup(void **state) {
  fixture *fx = calloc(1, sizeof *fx);
  snprintf(fx->dir, sizeof fx->dir, "%s/ts-db-faults-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(fx->dir)) return -1;
  snprintf(fx->path, sizeof fx->path, "%s/t.db", fx->dir);
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

typedef struct file_bytes {
  unsigned char *data;
  size_t size;
} file_bytes;

static file_bytes slurp(const char *path) {
  file_bytes b = {NULL, 0};
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  b.size = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  b.data = malloc(b.size + 1);
  assert_int_equal(fread(b.data, 1, b.size, f), b.size);
  fclose(f);
  return b;
}

static bool exists(const char *path) { return access(path, F_OK) == 0; }

/* Opening `path` fails with `code` and a message holding `want` and the
 * path; the file keeps its bytes and gains no -wal/-shm beside it. */
static void expect_refused(const char *path, int code, const char *want) {
  file_bytes before = slurp(path);
  ts_db *db = (ts_db *)1;
  ts_error err;
  ts_error_clear(&err);
  int rc = ts_db_open(path, NULL, &db, &err);
  if (rc != code)
    fail_msg("open %s: rc %d (%s), want %d", path, rc, err.msg, code);
  assert_null(db);
  if (!strstr(err.msg, want)) fail_msg("'%s' lacks '%s'", err.msg, want);
  assert_non_null(strstr(err.msg, path));
  file_bytes after = slurp(path);
  assert_int_equal(before.size, after.size);
  assert_memory_equal(before.data, after.data, before.size);
  free(before.data);
  free(after.data);
  char side[400];
  snprintf(side, sizeof side, "%s-wal", path);
  assert_false(exists(side));
  snprintf(side, sizeof side, "%s-shm", path);
  assert_false(exists(side));
}

static void write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, n, f), n);
  fclose(f);
}

/* A closed database with `n` records of one workload (several pages). */
static void make_db(const char *path, int n) {
  ts_db *db;
  ts_error err;
  assert_int_equal(ts_db_open(path, NULL, &db, &err), TS_OK);
  ts_workload *w;
  assert_int_equal(ts_workload_from_spec("matmul M=16 N=16 K=16", &w, &err),
                   TS_OK);
  int64_t id;
  assert_int_equal(ts_db_commit_workload(db, w->func, w->name, &id), TS_OK);
  ts_workload_free(w);
  ts_db_measurement *m = calloc((size_t)n, sizeof *m);
  double *s = calloc((size_t)n, sizeof *s);
  for (int i = 0; i < n; i++) {
    s[i] = 1e-3 * (1 + i % 7);
    m[i] = (ts_db_measurement){.workload_id = id,
                               .target = TARGET,
                               .trace_json = TRACE,
                               .run_secs = &s[i],
                               .n_run_secs = 1,
                               .status = TS_DB_STATUS_OK,
                               .worker = "a worker key long enough to fill "
                                         "pages quickly"};
  }
  assert_int_equal(ts_db_commit_records(db, m, n, NULL), TS_OK);
  free(m);
  free(s);
  ts_db_close(db);
  char wal[400];
  snprintf(wal, sizeof wal, "%s-wal", path);
  assert_false(exists(wal)); /* checkpointed and removed on close */
}

static void test_not_sqlite(void **state) {
  fixture *fx = *state;
  const char text[] = "# tuning notes\nthis is not a database at all\n";
  write_file(fx->path, text, sizeof text - 1);
  expect_refused(fx->path, TS_EINVAL, "not an SQLite file");
  /* a short file too */
  write_file(fx->path, "SQL", 3);
  expect_refused(fx->path, TS_EINVAL, "truncated database");
  /* an SQLite magic with a broken header */
  unsigned char h[512] = "SQLite format 3";
  h[16] = 0x03; /* page size 768: not a power of two */
  h[17] = 0x00;
  write_file(fx->path, h, sizeof h);
  expect_refused(fx->path, TS_EINVAL, "bad page size");
  /* an empty file is a new database */
  write_file(fx->path, "", 0);
  ts_db *db;
  ts_error err;
  assert_int_equal(ts_db_open(fx->path, NULL, &db, &err), TS_OK);
  ts_db_close(db);
}

static void test_truncated(void **state) {
  fixture *fx = *state;
  make_db(fx->path, 3000);
  file_bytes whole = slurp(fx->path);
  assert_true(whole.size >= 16 * 4096);
  /* cut at a page boundary: the header's page count gives it away */
  write_file(fx->path, whole.data, whole.size / 2 / 4096 * 4096);
  expect_refused(fx->path, TS_EINVAL, "truncated database: the header records");
  /* cut inside a page */
  write_file(fx->path, whole.data, whole.size / 2 + 100);
  expect_refused(fx->path, TS_EINVAL, "not a whole number of 4096-byte pages");
  /* cut inside the header */
  write_file(fx->path, whole.data, 60);
  expect_refused(fx->path, TS_EINVAL, "shorter than the 100-byte");
  /* the intact file still opens and checks clean */
  write_file(fx->path, whole.data, whole.size);
  ts_db *db;
  ts_error err;
  assert_int_equal(ts_db_open(fx->path, NULL, &db, &err), TS_OK);
  assert_int_equal(ts_db_integrity_check(db), TS_OK);
  ts_db_close(db);
  free(whole.data);
}

static void set_pragma(const char *path, const char *sql) {
  sqlite3 *raw;
  assert_int_equal(sqlite3_open(path, &raw), SQLITE_OK);
  assert_int_equal(sqlite3_exec(raw, sql, 0, 0, 0), SQLITE_OK);
  assert_int_equal(sqlite3_close(raw), SQLITE_OK);
}

static void test_newer_schema(void **state) {
  fixture *fx = *state;
  make_db(fx->path, 10);
  set_pragma(fx->path, "PRAGMA user_version = 99");
  expect_refused(fx->path, TS_EUNSUPPORTED,
                 "database schema version 99 is newer than this tessera");
  ts_db_options ro = ts_db_defaults();
  ro.read_only = true;
  ts_db *db;
  ts_error err;
  assert_int_equal(ts_db_open(fx->path, &ro, &db, &err), TS_EUNSUPPORTED);
  /* the same file at the current version opens again */
  char current[64];
  snprintf(current, sizeof current, "PRAGMA user_version = %d",
           TS_DB_SCHEMA_VERSION);
  set_pragma(fx->path, current);
  assert_int_equal(ts_db_open(fx->path, NULL, &db, &err), TS_OK);
  ts_db_close(db);
}

static void test_other_application(void **state) {
  fixture *fx = *state;
  /* an SQLite file with its own tables */
  set_pragma(fx->path, "CREATE TABLE photos(id INTEGER PRIMARY KEY, name TEXT);"
                       "INSERT INTO photos(name) VALUES ('cat.jpg')");
  expect_refused(fx->path, TS_EINVAL, "another application");
  /* one that declares another application id */
  remove(fx->path);
  set_pragma(fx->path, "PRAGMA application_id = 305419896; CREATE TABLE t(x)");
  expect_refused(fx->path, TS_EINVAL, "application_id 0x12345678");
}

/* A record with a corrupt trace is refused and nothing is written. */
static void test_corrupt_trace_commit(void **state) {
  fixture *fx = *state;
  make_db(fx->path, 20);
  file_bytes before = slurp(fx->path);
  ts_db *db;
  ts_error err;
  assert_int_equal(ts_db_open(fx->path, NULL, &db, &err), TS_OK);
  double s[] = {1e-3};
  const char *corrupt[] = {"{\"version\":1,\"insts\":[", "{\"version\":1}}",
                           "\"version\"", "{\"decisions\":[]}", "nul"};
  for (size_t i = 0; i < sizeof corrupt / sizeof corrupt[0]; i++) {
    ts_db_measurement m[2] = {
        {.workload_id = 1,
         .target = TARGET,
         .trace_json = TRACE,
         .run_secs = s,
         .n_run_secs = 1},
        {.workload_id = 1,
         .target = TARGET,
         .trace_json = corrupt[i],
         .run_secs = s,
         .n_run_secs = 1},
    };
    assert_int_equal(ts_db_commit_records(db, m, 2, NULL), TS_EINVAL);
    assert_non_null(strstr(ts_db_errmsg(db), "record 1: trace JSON"));
  }
  ts_db_stats st;
  assert_int_equal(ts_db_get_stats(db, &st), TS_OK);
  assert_int_equal(st.n_records, 20);
  ts_db_close(db);
  file_bytes after = slurp(fx->path);
  assert_int_equal(before.size, after.size);
  assert_memory_equal(before.data, after.data, before.size);
  free(before.data);
  free(after.data);
}

/* Data damaged behind the module's back gives errors, not crashes. */
static void test_damaged_contents(void **state) {
  fixture *fx = *state;
  make_db(fx->path, 20);
  set_pragma(fx->path,
             "UPDATE workloads SET tir = 'func broken(' WHERE id = 1;"
             "UPDATE records SET trace = '{\"version\":' WHERE id = 1;"
             "UPDATE records SET status = 'splendid' WHERE id = 2;"
             "UPDATE records SET run_secs = 'oops' WHERE id = 3");
  ts_db *db;
  ts_error err;
  assert_int_equal(ts_db_open(fx->path, NULL, &db, &err), TS_OK);
  ts_workload *w;
  assert_int_equal(ts_workload_from_spec("matmul M=16 N=16 K=16", &w, &err),
                   TS_OK);
  int64_t id;
  assert_int_equal(ts_db_find_workload(db, w->func, &id), TS_EINVAL);
  assert_non_null(strstr(ts_db_errmsg(db), "stored TIR of workload 1"));
  ts_func *f;
  assert_int_equal(ts_db_workload_func(db, 1, &f), TS_EINVAL);
  ts_workload_free(w);
  ts_db_record *recs;
  int n;
  assert_int_equal(ts_db_recent_records(db, 1, 100, &recs, &n), TS_EINVAL);
  assert_true(strstr(ts_db_errmsg(db), "unknown status 'splendid'") ||
              strstr(ts_db_errmsg(db), "run_secs is not a JSON array"));
  assert_null(recs);
  /* the stored corrupt trace is reported when formatted */
  assert_null(ts_db_format_trace(db, "{\"version\":"));
  assert_non_null(strstr(ts_db_errmsg(db), "trace JSON is corrupt"));
  ts_db_close(db);
}

/* A page overwritten with garbage: the integrity check names the damage
 * and queries fail cleanly. */
static void test_damaged_page(void **state) {
  fixture *fx = *state;
  make_db(fx->path, 3000);
  file_bytes b = slurp(fx->path);
  size_t page = 4096, victim = b.size / page / 2;
  for (size_t i = 0; i < page; i++)
    b.data[victim * page + i] = (unsigned char)(i * 7 + 13);
  write_file(fx->path, b.data, b.size);
  free(b.data);
  ts_db *db;
  ts_error err;
  assert_int_equal(ts_db_open(fx->path, NULL, &db, &err), TS_OK);
  assert_int_equal(ts_db_integrity_check(db), TS_EINVAL);
  /* either the check's report or SQLite's "malformed" while checking */
  if (!strstr(ts_db_errmsg(db), "integrity check failed") &&
      !strstr(ts_db_errmsg(db), "malformed"))
    fail_msg("%s", ts_db_errmsg(db));
  ts_db_record *recs;
  int n;
  int rc = ts_db_records_of(db, 1, TARGET, &recs, &n);
  if (rc == TS_OK)
    ts_db_records_free(recs, n);
  else
    assert_true(strlen(ts_db_errmsg(db)) > 0);
  ts_db_close(db);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_not_sqlite, setup, teardown),
      cmocka_unit_test_setup_teardown(test_truncated, setup, teardown),
      cmocka_unit_test_setup_teardown(test_newer_schema, setup, teardown),
      cmocka_unit_test_setup_teardown(test_other_application, setup, teardown),
      cmocka_unit_test_setup_teardown(test_corrupt_trace_commit, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_damaged_contents, setup, teardown),
      cmocka_unit_test_setup_teardown(test_damaged_page, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
