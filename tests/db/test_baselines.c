/*
 * test_baselines.c — schema version 2 of the tuning database: vendor
 * baselines (store, replace, read one, list by workload and target, argument
 * checks that leave the file unchanged), the forward migrations of a version
 * 1 file and of a version 3 file (records kept, the measure column added
 * with NULLs, read-only opening refused until migrated), baselines
 * through export and import (round trip, the newer level kept, a bad line
 * named), and the chart query over a task's records (commit order, job and
 * trial, status, median; unknown targets). Schema version 7's choices
 * measured in a model the same way: store, replace, read one, argument
 * checks, a read-only database refusing them, export and import (the later
 * measured kept), and the migration of a version 6 file (read as it is
 * read-only, with no choices; the table added read-write).
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

/* What migration 6 -> 7 added. */
#define DROP_V7 "DROP TABLE choices; "
/* What migrations 5 -> 6 and 6 -> 7 added (the rank index reads the
 * confirmed columns, so it goes before them). */
#define DROP_V6 DROP_V7 "DROP INDEX IF EXISTS records_rank; "
/* What migration 3 -> 4 added, taken away again. */
#define DROP_V4 DROP_V6 "ALTER TABLE records DROP COLUMN measure; "
/* What migration 4 -> 5 added. */
#define DROP_V5                                                                \
  "ALTER TABLE baselines DROP COLUMN side_ratio; ALTER TABLE baselines DROP "  \
  "COLUMN side_rounds; "
/* What migrations 2 -> 3 and 3 -> 4 added, taken away again. */
#define DROP_V3                                                                \
  DROP_V4 "ALTER TABLE records DROP COLUMN confirmed_s; ALTER TABLE records "  \
          "DROP COLUMN confirmed_spread; ALTER TABLE records DROP COLUMN "     \
          "confirmed_rounds; ALTER TABLE records DROP COLUMN confirmed_at; "

#include <sqlite3.h>

#include "db/db.h"
#include "test_db.h"

#define TRACE "{\"version\":1,\"insts\":[],\"decisions\":[]}"
#define T_SKX "llvm -mcpu=skylake-avx512 -num-cores=2"
#define T_SKX1 "llvm -mcpu=skylake-avx512 -num-cores=1"

typedef struct fixture {
  char dir[256];
  char path[300], path2[300];
  ts_db *db;
  int64_t mm, sm; /* two workloads */
} fixture;

static int64_t commit_spec(ts_db *db, const char *spec) {
  ts_workload *w;
  ts_error err;
  if (ts_workload_from_spec(spec, &w, &err) != TS_OK) fail_msg("%s", err.msg);
  int64_t id = 0;
  int rc = ts_db_commit_workload(db, w->func, NULL, &id);
  if (rc) fail_msg("commit: %s", ts_db_errmsg(db));
  ts_workload_free(w);
  return id;
}

static int setup(void **state) {
  fixture *fx = calloc(1, sizeof *fx);
  snprintf(fx->dir, sizeof fx->dir, "%s/ts-db-base-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(fx->dir)) return -1;
  test_fresh_db(fx->dir, "base_a.db", fx->path, sizeof fx->path);
  test_fresh_db(fx->dir, "base_b.db", fx->path2, sizeof fx->path2);
  ts_error err;
  if (ts_db_open(fx->path, NULL, &fx->db, &err) != TS_OK) {
    fprintf(stderr, "open: %s\n", err.msg);
    return -1;
  }
  fx->mm = commit_spec(fx->db, "matmul M=16 N=8 K=4");
  fx->sm = commit_spec(fx->db, "softmax N=4 D=8");
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

static int64_t count_rows(const char *path, const char *sql) {
  if (test_on_server()) return test_server_int(path, sql);
  sqlite3 *raw;
  assert_int_equal(sqlite3_open(path, &raw), SQLITE_OK);
  sqlite3_stmt *st;
  assert_int_equal(sqlite3_prepare_v2(raw, sql, -1, &st, 0), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  int64_t n = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(raw);
  return n;
}

/* ---- baselines ---- */

/* Takes the database at path back to schema `version` by running `drop`
 * (what the migrations after it added) and setting the version. */
static void downgrade(const char *path, const char *drop, int version) {
  char sql[1024];
  if (test_on_server()) {
    snprintf(sql, sizeof sql, "%sUPDATE tessera_schema SET version = %d", drop,
             version);
    assert_true(test_server_exec(path, sql));
    return;
  }
  snprintf(sql, sizeof sql, "%sPRAGMA user_version = %d", drop, version);
  sqlite3 *raw;
  assert_int_equal(sqlite3_open(path, &raw), SQLITE_OK);
  assert_int_equal(sqlite3_exec(raw, sql, 0, 0, 0), SQLITE_OK);
  sqlite3_close(raw);
}

static void test_put_get_list(void **state) {
  fixture *fx = *state;
  ts_db *db = fx->db;
  assert_int_equal(ts_db_baseline_put(db, fx->mm, T_SKX, "onednn", 2, 85.5),
                   TS_OK);
  assert_int_equal(ts_db_baseline_put(db, fx->mm, T_SKX, "openblas", 2, 70),
                   TS_OK);
  assert_int_equal(ts_db_baseline_put(db, fx->mm, T_SKX1, "onednn", 1, 44.25),
                   TS_OK);
  assert_int_equal(ts_db_baseline_put(db, fx->sm, T_SKX, "naive", 2, 3.5),
                   TS_OK);

  ts_db_baseline b;
  assert_int_equal(ts_db_baseline_get(db, fx->mm, T_SKX, "onednn", 2, &b),
                   TS_OK);
  assert_int_equal(b.workload_id, fx->mm);
  assert_string_equal(b.vendor, "onednn");
  assert_int_equal(b.threads, 2);
  assert_true(b.gflops == 85.5);
  assert_non_null(strstr(b.target, "-mcpu=skylake-avx512"));
  assert_int_equal(strlen(b.created), 24);
  int64_t skx;
  assert_int_equal(ts_db_find_target(db, T_SKX, &skx), TS_OK);
  assert_int_equal(b.target_id, skx);
  ts_db_baseline_clear(&b);
  ts_db_baseline_clear(&b); /* a cleared struct clears again */

  /* exact on thread count and vendor */
  assert_int_equal(ts_db_baseline_get(db, fx->mm, T_SKX, "onednn", 1, &b),
                   TS_ENOTFOUND);
  assert_non_null(strstr(ts_db_errmsg(db), "no onednn baseline"));
  assert_int_equal(ts_db_baseline_get(db, fx->mm, T_SKX, "mkl", 2, &b),
                   TS_ENOTFOUND);
  assert_int_equal(
      ts_db_baseline_get(db, fx->mm, "cuda -arch=sm_80", "onednn", 2, &b),
      TS_ENOTFOUND);

  /* a new measurement replaces the old one */
  assert_int_equal(ts_db_baseline_put(db, fx->mm, T_SKX, "onednn", 2, 90),
                   TS_OK);
  assert_int_equal(ts_db_baseline_get(db, fx->mm, T_SKX, "onednn", 2, &b),
                   TS_OK);
  assert_true(b.gflops == 90);
  ts_db_baseline_clear(&b);
  assert_int_equal(count_rows(fx->path, "SELECT count(*) FROM baselines"), 4);

  /* lists: everything, one workload, one target, an unknown target */
  ts_db_baseline *rows;
  int n;
  assert_int_equal(ts_db_baselines(db, 0, NULL, &rows, &n), TS_OK);
  assert_int_equal(n, 4);
  assert_int_equal(rows[0].workload_id, fx->mm);
  assert_int_equal(rows[3].workload_id, fx->sm);
  ts_db_baselines_free(rows, n);
  assert_int_equal(ts_db_baselines(db, fx->mm, T_SKX, &rows, &n), TS_OK);
  assert_int_equal(n, 2);
  assert_string_equal(rows[0].vendor, "onednn"); /* by vendor name */
  assert_true(rows[0].gflops == 90);
  assert_string_equal(rows[1].vendor, "openblas");
  ts_db_baselines_free(rows, n);
  assert_int_equal(ts_db_baselines(db, 0, T_SKX1, &rows, &n), TS_OK);
  assert_int_equal(n, 1);
  assert_true(rows[0].gflops == 44.25);
  ts_db_baselines_free(rows, n);
  assert_int_equal(ts_db_baselines(db, 0, "cuda -arch=sm_90", &rows, &n),
                   TS_OK);
  assert_int_equal(n, 0);
  assert_null(rows);
  assert_int_equal(ts_db_baselines(db, fx->sm + 100, NULL, &rows, &n), TS_OK);
  assert_int_equal(n, 0);
}

static void test_put_checks(void **state) {
  fixture *fx = *state;
  ts_db *db = fx->db;
  struct {
    const char *vendor;
    int threads;
    double gflops;
    const char *msg;
  } bad[] = {
      {"", 1, 1, "vendor is empty"},
      {NULL, 1, 1, "vendor is empty"},
      {"onednn", 0, 1, "threads 0"},
      {"onednn", -3, 1, "threads -3"},
      {"onednn", 1, 0, "gflops 0"},
      {"onednn", 1, -2, "gflops -2"},
      {"onednn", 1, NAN, "gflops nan"},
      {"onednn", 1, INFINITY, "gflops inf"},
      {"a-vendor-name-that-goes-on-and-on-and-on-for-more-than-sixty-four-"
       "bytes",
       1, 1, "longer than 64"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(ts_db_baseline_put(db, fx->mm, T_SKX, bad[i].vendor,
                                        bad[i].threads, bad[i].gflops),
                     TS_EINVAL);
    if (!strstr(ts_db_errmsg(db), bad[i].msg))
      fail_msg("case %zu: '%s' lacks '%s'", i, ts_db_errmsg(db), bad[i].msg);
  }
  assert_int_equal(ts_db_baseline_put(db, 9999, T_SKX, "onednn", 1, 1),
                   TS_ENOTFOUND);
  assert_non_null(strstr(ts_db_errmsg(db), "no workload with id 9999"));
  assert_int_equal(ts_db_baseline_put(db, fx->mm, "lvm", "onednn", 1, 1),
                   TS_EINVAL);
  assert_non_null(strstr(ts_db_errmsg(db), "bad target 'lvm'"));
  /* nothing was written, not even the target of the failed put */
  assert_int_equal(count_rows(fx->path, "SELECT count(*) FROM baselines"), 0);
  assert_int_equal(count_rows(fx->path, "SELECT count(*) FROM targets"), 0);
}

/* The oneDNN level of workload w (2 threads) is one measured on its own. */
static void assert_alone(ts_db *db, int64_t w) {
  ts_db_baseline b;
  assert_int_equal(ts_db_baseline_get(db, w, T_SKX, "onednn", 2, &b), TS_OK);
  assert_int_equal(b.side_rounds, 0);
  assert_true(isnan(b.side_ratio));
  ts_db_baseline_clear(&b);
}

/* A level measured beside the confirmed best keeps its ratio and rounds; a
 * level measured on its own later clears them. */
static void test_side_by_side(void **state) {
  fixture *fx = *state;
  ts_db *db = fx->db;
  assert_int_equal(ts_db_baseline_put(db, fx->mm, T_SKX, "onednn", 2, 80),
                   TS_OK);
  ts_db_baseline b;
  assert_alone(db, fx->mm);
  assert_int_equal(
      ts_db_baseline_put_side(db, fx->mm, T_SKX, "onednn", 2, 81, 1.25, 7),
      TS_OK);
  assert_int_equal(ts_db_baseline_get(db, fx->mm, T_SKX, "onednn", 2, &b),
                   TS_OK);
  assert_true(b.gflops == 81);
  assert_true(b.side_ratio == 1.25);
  assert_int_equal(b.side_rounds, 7);
  ts_db_baseline_clear(&b);
  ts_db_baseline *rows;
  int n;
  assert_int_equal(ts_db_baselines(db, fx->mm, T_SKX, &rows, &n), TS_OK);
  assert_int_equal(n, 1);
  assert_true(rows[0].side_ratio == 1.25);
  ts_db_baselines_free(rows, n);
  /* bad ratios and round counts are refused, the row unchanged */
  assert_int_equal(
      ts_db_baseline_put_side(db, fx->mm, T_SKX, "onednn", 2, 81, NAN, 7),
      TS_EINVAL);
  assert_non_null(strstr(ts_db_errmsg(db), "side_ratio nan"));
  assert_int_equal(
      ts_db_baseline_put_side(db, fx->mm, T_SKX, "onednn", 2, 81, 0.5, 0),
      TS_EINVAL);
  assert_non_null(strstr(ts_db_errmsg(db), "side_rounds 0"));
  /* measured alone again: no longer side by side */
  assert_int_equal(ts_db_baseline_put(db, fx->mm, T_SKX, "onednn", 2, 70),
                   TS_OK);
  assert_alone(db, fx->mm);
  assert_int_equal(
      count_rows(fx->path,
                 "SELECT count(*) FROM baselines WHERE side_ratio IS NULL AND "
                 "side_rounds IS NULL"),
      1);
}

/* ---- migration ---- */

static void test_migrate_from_v1(void **state) {
  fixture *fx = *state;
  double secs[] = {1e-3};
  ts_db_measurement m = {.workload_id = fx->mm,
                         .target = T_SKX,
                         .trace_json = TRACE,
                         .run_secs = secs,
                         .n_run_secs = 1};
  assert_int_equal(ts_db_commit_record(fx->db, &m, NULL), TS_OK);
  ts_db_close(fx->db);
  fx->db = NULL;
  /* version 1 is version 4 without the baselines table, the confirmed
   * columns and the measure column of records */
  bool server = test_on_server();
  const char *version_sql =
      server ? "SELECT version FROM tessera_schema" : "PRAGMA user_version";
  downgrade(fx->path, "DROP TABLE baselines; " DROP_V3, 1);
  assert_int_equal(
      count_rows(fx->path,
                 server ? "SELECT count(*) FROM pg_tables WHERE schemaname = "
                          "current_schema() AND tablename = 'baselines'"
                        : "SELECT count(*) FROM sqlite_schema "
                          "WHERE name = 'baselines'"),
      0);

  /* read-only: refused with a hint, the file unchanged */
  ts_db_options ro = ts_db_defaults();
  ro.read_only = true;
  ts_error err;
  ts_db *db;
  assert_int_equal(ts_db_open(fx->path, &ro, &db, &err), TS_EINVAL);
  assert_non_null(strstr(err.msg, "older schema version"));
  assert_int_equal(count_rows(fx->path, version_sql), 1);

  /* read-write migrates: the newest version, the table and the columns
   * there, the records kept */
  assert_int_equal(ts_db_open(fx->path, NULL, &fx->db, &err), TS_OK);
  assert_int_equal(count_rows(fx->path, version_sql), TS_DB_SCHEMA_VERSION);
  assert_int_equal(count_rows(fx->path, "SELECT count(*) FROM records"), 1);
  ts_db_stats s;
  assert_int_equal(ts_db_get_stats(fx->db, &s), TS_OK);
  assert_int_equal(s.schema_version, TS_DB_SCHEMA_VERSION);
  assert_int_equal(ts_db_baseline_put(fx->db, fx->mm, T_SKX, "onednn", 2, 12),
                   TS_OK);
  ts_db_record best;
  assert_int_equal(ts_db_best(fx->db, fx->mm, T_SKX, &best), TS_OK);
  assert_true(best.median_s == 1e-3);
  ts_db_record_clear(&best);
  assert_int_equal(ts_db_integrity_check(fx->db), TS_OK);
  /* read-only opening works once migrated */
  assert_int_equal(ts_db_open(fx->path, &ro, &db, &err), TS_OK);
  ts_db_baseline b;
  assert_int_equal(ts_db_baseline_get(db, fx->mm, T_SKX, "onednn", 2, &b),
                   TS_OK);
  ts_db_baseline_clear(&b);
  ts_db_close(db);
}

/* A version 3 database (records without the measure column) gains the
 * column with NULL in every record when opened read-write; read-only
 * opening refuses it until then, leaving it as it was. */
static void test_migrate_from_v3(void **state) {
  fixture *fx = *state;
  double secs[] = {1e-3, 2e-3};
  ts_db_measurement m[2] = {
      {.workload_id = fx->mm,
       .target = T_SKX,
       .trace_json = TRACE,
       .run_secs = &secs[0],
       .n_run_secs = 1},
      {.workload_id = fx->sm,
       .target = T_SKX,
       .trace_json = TRACE,
       .run_secs = &secs[1],
       .n_run_secs = 1,
       .status = TS_DB_STATUS_OK},
  };
  assert_int_equal(ts_db_commit_records(fx->db, m, 2, NULL), TS_OK);
  ts_db_close(fx->db);
  fx->db = NULL;
  bool server = test_on_server();
  const char *version_sql =
      server ? "SELECT version FROM tessera_schema" : "PRAGMA user_version";
  const char *has_column =
      server ? "SELECT count(*) FROM information_schema.columns WHERE "
               "table_schema = current_schema() AND table_name = 'records' "
               "AND column_name = 'measure'"
             : "SELECT count(*) FROM pragma_table_info('records') WHERE "
               "name = 'measure'";
  downgrade(fx->path, DROP_V5 DROP_V4, 3);
  assert_int_equal(count_rows(fx->path, has_column), 0);
  assert_int_equal(count_rows(fx->path, version_sql), 3);

  /* read-only: refused with the hint, nothing changed */
  ts_db_options ro = ts_db_defaults();
  ro.read_only = true;
  ts_error err;
  ts_db *db;
  assert_int_equal(ts_db_open(fx->path, &ro, &db, &err), TS_EINVAL);
  assert_null(db);
  assert_non_null(strstr(err.msg, "older schema version"));
  assert_non_null(strstr(err.msg, "tessera db migrate"));
  assert_int_equal(count_rows(fx->path, version_sql), 3);
  assert_int_equal(count_rows(fx->path, has_column), 0);

  /* read-write: migrated, the old records there with no measure */
  assert_int_equal(ts_db_open(fx->path, NULL, &fx->db, &err), TS_OK);
  assert_int_equal(count_rows(fx->path, version_sql), TS_DB_SCHEMA_VERSION);
  assert_int_equal(count_rows(fx->path, has_column), 1);
  assert_int_equal(
      count_rows(fx->path,
                 "SELECT count(*) FROM records WHERE measure IS NULL"),
      2);
  ts_db_record best;
  assert_int_equal(ts_db_best(fx->db, fx->mm, T_SKX, &best), TS_OK);
  assert_true(best.median_s == 1e-3);
  assert_null(best.measure_json);
  ts_db_record_clear(&best);
  /* a new record keeps its context beside them */
  ts_db_measurement again = m[0];
  again.run_secs = &secs[1];
  again.measure_json = "{\"threads\":2,\"cpus\":\"0-1\"}";
  assert_int_equal(ts_db_commit_record(fx->db, &again, NULL), TS_OK);
  ts_db_record *all;
  int n;
  /* and the side-by-side columns of version 5 */
  assert_int_equal(
      ts_db_baseline_put_side(fx->db, fx->mm, T_SKX, "onednn", 2, 50, 0.9, 3),
      TS_OK);
  assert_int_equal(ts_db_records_of(fx->db, fx->mm, T_SKX, &all, &n), TS_OK);
  assert_int_equal(n, 2);
  assert_null(all[0].measure_json);
  assert_string_equal(all[1].measure_json, again.measure_json);
  ts_db_records_free(all, n);
  assert_int_equal(ts_db_integrity_check(fx->db), TS_OK);
  /* read-only opening works once migrated and reads the column */
  assert_int_equal(ts_db_open(fx->path, &ro, &db, &err), TS_OK);
  assert_int_equal(ts_db_recent_records(db, fx->mm, 1, &all, &n), TS_OK);
  assert_int_equal(n, 1);
  assert_string_equal(all[0].measure_json, again.measure_json);
  ts_db_records_free(all, n);
  ts_db_close(db);
}

/* ---- export and import ---- */

static char *export_to_string(ts_db *db) {
  char *buf = NULL;
  size_t size = 0;
  FILE *f = open_memstream(&buf, &size);
  assert_non_null(f);
  int rc = ts_db_export(db, f);
  if (rc) fail_msg("export: %s", ts_db_errmsg(db));
  fclose(f);
  return buf;
}

static int import_text(ts_db *db, const char *text, ts_db_import_stats *st) {
  FILE *f = tmpfile();
  assert_non_null(f);
  fputs(text, f);
  rewind(f);
  int rc = ts_db_import(db, f, "in.jsonl", st);
  fclose(f);
  return rc;
}

/* Replaces the first occurrence of `from` in s (malloc'd) by `to`. */
static char *replace(const char *s, const char *from, const char *to) {
  const char *at = strstr(s, from);
  assert_non_null(at);
  size_t n = strlen(s) - strlen(from) + strlen(to) + 1;
  char *out = malloc(n);
  snprintf(out, n, "%.*s%s%s", (int)(at - s), s, to, at + strlen(from));
  return out;
}

static void test_export_import(void **state) {
  fixture *fx = *state;
  ts_db *a = fx->db;
  assert_int_equal(ts_db_baseline_put(a, fx->mm, T_SKX, "onednn", 2, 85.5),
                   TS_OK);
  assert_int_equal(ts_db_baseline_put(a, fx->sm, T_SKX, "naive", 1, 0.125),
                   TS_OK);
  assert_int_equal(
      ts_db_baseline_put_side(a, fx->mm, T_SKX, "openblas", 2, 60, 1.5, 7),
      TS_OK);
  char *first = export_to_string(a);
  char want[64];
  snprintf(want, sizeof want, "\"schema_version\":%d", TS_DB_SCHEMA_VERSION);
  assert_non_null(strstr(first, want));
  assert_non_null(strstr(first, "{\"type\":\"baseline\",\"workload\":1,"
                                "\"target\":1,\"vendor\":\"onednn\","
                                "\"threads\":2,\"gflops\":85.5,"
                                "\"created\":\""));
  assert_non_null(strstr(first, "\"vendor\":\"naive\",\"threads\":1,"
                                "\"gflops\":0.125"));
  assert_non_null(strstr(first, "\"side_ratio\":1.5,\"side_rounds\":7}"));

  /* into an empty database and out again: the same bytes */
  ts_db *b;
  ts_error err;
  assert_int_equal(ts_db_open(fx->path2, NULL, &b, &err), TS_OK);
  ts_db_import_stats st;
  assert_int_equal(import_text(b, first, &st), TS_OK);
  assert_int_equal(st.baselines, 3);
  char *second = export_to_string(b);
  assert_string_equal(first, second);
  ts_db_baseline side;
  assert_int_equal(ts_db_baseline_get(b, 1, T_SKX, "openblas", 2, &side),
                   TS_OK);
  assert_true(side.side_ratio == 1.5);
  assert_int_equal(side.side_rounds, 7);
  ts_db_baseline_clear(&side);

  /* an older level does not replace a newer one; a newer one does */
  char *older = replace(first, "\"gflops\":85.5,\"created\":\"",
                        "\"gflops\":1,\"created\":\"1999");
  assert_int_equal(import_text(b, older, &st), TS_OK);
  assert_int_equal(st.baselines, 0);
  ts_db_baseline got;
  assert_int_equal(ts_db_baseline_get(b, 1, T_SKX, "onednn", 2, &got), TS_OK);
  assert_true(got.gflops == 85.5);
  ts_db_baseline_clear(&got);
  char *newer = replace(first, "\"gflops\":85.5,\"created\":\"",
                        "\"gflops\":99,\"created\":\"9999");
  assert_int_equal(import_text(b, newer, &st), TS_OK);
  assert_int_equal(st.baselines, 1);
  assert_int_equal(ts_db_baseline_get(b, 1, T_SKX, "onednn", 2, &got), TS_OK);
  assert_true(got.gflops == 99);
  ts_db_baseline_clear(&got);

  /* bad lines are named and nothing is written */
  char *bad = replace(first, "\"threads\":2", "\"threads\":0");
  assert_int_equal(import_text(b, bad, &st), TS_EINVAL);
  assert_non_null(strstr(ts_db_errmsg(b), "in.jsonl:"));
  assert_non_null(strstr(ts_db_errmsg(b), "threads 0 is not a thread count"));
  char *dangling = replace(first, "\"type\":\"baseline\",\"workload\":1",
                           "\"type\":\"baseline\",\"workload\":7");
  assert_int_equal(import_text(b, dangling, &st), TS_EINVAL);
  assert_non_null(strstr(ts_db_errmsg(b), "field \"workload\": no workload "
                                          "with id 7"));
  char *bad_side = replace(first, "\"side_rounds\":7", "\"side_rounds\":0");
  assert_int_equal(import_text(b, bad_side, &st), TS_EINVAL);
  assert_non_null(strstr(ts_db_errmsg(b), "side_rounds 0 is not a round"));
  free(bad_side);
  assert_int_equal(count_rows(fx->path2, "SELECT count(*) FROM baselines"), 3);
  ts_db_close(b);
  free(first);
  free(second);
  free(older);
  free(newer);
  free(bad);
  free(dangling);
}

/* ---- the chart query ---- */

static void test_record_points(void **state) {
  fixture *fx = *state;
  ts_db *db = fx->db;
  int64_t job;
  assert_int_equal(ts_db_job_create(db, "j", NULL, 10, &job), TS_OK);
  double s1[] = {3e-3, 1e-3, 2e-3}, s2[] = {5e-4};
  ts_db_measurement m[4] = {
      {fx->mm, T_SKX, TRACE, s1, 3, TS_DB_STATUS_OK, NULL, job, NULL, NULL},
      {fx->mm, T_SKX, TRACE, NULL, 0, TS_DB_STATUS_BUILD_ERROR, "x", job, NULL,
       NULL},
      {fx->mm, T_SKX, TRACE, s2, 1, TS_DB_STATUS_WRONG_RESULT, NULL, 0, NULL,
       NULL},
      {fx->mm, T_SKX1, TRACE, s2, 1, TS_DB_STATUS_OK, NULL, 0, NULL, NULL},
  };
  int64_t ids[4];
  assert_int_equal(ts_db_commit_records(db, m, 4, ids), TS_OK);
  ts_db_record_point *p;
  int64_t n;
  assert_int_equal(ts_db_record_points(db, fx->mm, T_SKX, &p, &n), TS_OK);
  assert_int_equal(n, 3);
  assert_int_equal(p[0].id, ids[0]);
  assert_int_equal(p[0].job_id, job);
  assert_int_equal(p[0].trial, 0);
  assert_int_equal(p[0].status, TS_DB_STATUS_OK);
  assert_true(p[0].median_s == 2e-3);
  assert_int_equal(p[1].trial, 1);
  assert_int_equal(p[1].status, TS_DB_STATUS_BUILD_ERROR);
  assert_true(isnan(p[1].median_s));
  assert_int_equal(p[2].job_id, 0);
  assert_int_equal(p[2].trial, -1);
  assert_int_equal(p[2].status, TS_DB_STATUS_WRONG_RESULT);
  assert_true(p[2].median_s == 5e-4);
  free(p);
  assert_int_equal(ts_db_record_points(db, fx->mm, T_SKX1, &p, &n), TS_OK);
  assert_int_equal(n, 1);
  free(p);
  assert_int_equal(ts_db_record_points(db, fx->sm, T_SKX, &p, &n), TS_OK);
  assert_int_equal(n, 0);
  assert_null(p);
  assert_int_equal(ts_db_record_points(db, fx->mm, "cuda -arch=sm_90", &p, &n),
                   TS_OK);
  assert_int_equal(n, 0);
  assert_int_equal(ts_db_record_points(db, fx->mm, "lvm", &p, &n), TS_EINVAL);
}

/* A version 5 database (no rank index) opens read-only as it is (the
 * index changes no answer) and gains the index when opened read-write; the
 * compile-time query then reads it instead of sorting the records. */
static void test_migrate_from_v5(void **state) {
  fixture *fx = *state;
  double secs[] = {2e-3, 1e-3};
  ts_db_measurement m[2] = {{.workload_id = fx->mm,
                             .target = T_SKX,
                             .trace_json = TRACE,
                             .run_secs = &secs[0],
                             .n_run_secs = 1},
                            {.workload_id = fx->mm,
                             .target = T_SKX,
                             .trace_json = TRACE,
                             .run_secs = &secs[1],
                             .n_run_secs = 1}};
  assert_int_equal(ts_db_commit_records(fx->db, m, 2, NULL), TS_OK);
  ts_db_close(fx->db);
  fx->db = NULL;
  bool server = test_on_server();
  const char *version_sql =
      server ? "SELECT version FROM tessera_schema" : "PRAGMA user_version";
  const char *has_index =
      server ? "SELECT count(*) FROM pg_indexes WHERE schemaname = "
               "current_schema() AND indexname = 'records_rank'"
             : "SELECT count(*) FROM sqlite_schema WHERE name = 'records_rank'";
  downgrade(fx->path, DROP_V6, 5);
  assert_int_equal(count_rows(fx->path, has_index), 0);

  /* read-only: answered as it is, nothing written */
  ts_db_options ro = ts_db_defaults();
  ro.read_only = true;
  ts_error err;
  ts_db *db;
  assert_int_equal(ts_db_open(fx->path, &ro, &db, &err), TS_OK);
  ts_db_record best;
  assert_int_equal(ts_db_best(db, fx->mm, T_SKX, &best), TS_OK);
  assert_true(best.median_s == 1e-3);
  ts_db_record_clear(&best);
  ts_db_close(db);
  assert_int_equal(count_rows(fx->path, version_sql), 5);
  assert_int_equal(count_rows(fx->path, has_index), 0);

  /* read-write: the index, the same answer */
  assert_int_equal(ts_db_open(fx->path, NULL, &fx->db, &err), TS_OK);
  assert_int_equal(count_rows(fx->path, version_sql), TS_DB_SCHEMA_VERSION);
  assert_int_equal(count_rows(fx->path, has_index), 1);
  assert_int_equal(ts_db_best(fx->db, fx->mm, T_SKX, &best), TS_OK);
  assert_true(best.median_s == 1e-3);
  ts_db_record_clear(&best);
  if (!server) { /* SQLite's plan for the best record's subquery */
    sqlite3 *raw;
    assert_int_equal(sqlite3_open(fx->path, &raw), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(
        sqlite3_prepare_v2(
            raw,
            "EXPLAIN QUERY PLAN SELECT id FROM records WHERE workload_id = 1 "
            "AND target_id = 1 AND status = 'ok' ORDER BY (confirmed_s IS "
            "NULL), COALESCE(confirmed_s, median_s), id LIMIT 1",
            -1, &st, NULL),
        SQLITE_OK);
    bool uses = false, sorts = false;
    while (sqlite3_step(st) == SQLITE_ROW) {
      const char *d = (const char *)sqlite3_column_text(st, 3);
      uses = uses || (d && strstr(d, "records_rank"));
      sorts = sorts || (d && strstr(d, "TEMP B-TREE"));
    }
    sqlite3_finalize(st);
    sqlite3_close(raw);
    assert_true(uses);
    assert_false(sorts);
  }
}

/* ---- choices measured in a model ---- */

/* A conv's task hash, the subject of the choices below. */
#define CONV "0123456789abcdef0123456789abcdef"
#define F22 "F(2x2)"
#define F44 "F(4x4)"

/* The figure stored for the winograd choice `option` of CONV on target. */
static void assert_choice(ts_db *db, const char *target, const char *option,
                          double seconds, int64_t samples) {
  double s = 0;
  int64_t n = 0;
  int rc = ts_db_choice_get(db, target, "winograd", CONV, option, &s, &n);
  if (rc) fail_msg("choice %s: %s", option, ts_db_errmsg(db));
  if (s != seconds)
    fail_msg("choice %s: %g seconds, not %g", option, s, seconds);
  assert_int_equal(n, samples);
}

/* Store, read back, replace; absent options and unknown targets are not
 * found. */
static void test_choice_put_get(void **state) {
  fixture *fx = *state;
  ts_db *db = fx->db;
  assert_int_equal(
      ts_db_choice_put(db, T_SKX, "winograd", CONV, "direct", 2.5e-4, 30),
      TS_OK);
  assert_int_equal(
      ts_db_choice_put(db, T_SKX, "winograd", CONV, F22, 1.75e-4, 30), TS_OK);
  assert_int_equal(
      ts_db_choice_put(db, T_SKX1, "winograd", CONV, F22, 3.5e-4, 12), TS_OK);
  assert_choice(db, T_SKX, "direct", 2.5e-4, 30);
  assert_choice(db, T_SKX, F22, 1.75e-4, 30);
  assert_choice(db, T_SKX1, F22, 3.5e-4, 12);
  assert_string_equal(ts_db_errmsg(db), "");
  /* either output may be NULL */
  double s;
  int64_t n;
  assert_int_equal(ts_db_choice_get(db, T_SKX, "winograd", CONV, F22, &s, NULL),
                   TS_OK);
  assert_true(s == 1.75e-4);
  assert_int_equal(ts_db_choice_get(db, T_SKX, "winograd", CONV, F22, NULL, &n),
                   TS_OK);
  assert_int_equal(n, 30);
  assert_int_equal(
      ts_db_choice_get(db, T_SKX, "winograd", CONV, F22, NULL, NULL), TS_OK);
  /* stored under the canonical targets */
  assert_int_equal(count_rows(fx->path, "SELECT count(*) FROM choices"), 3);
  assert_int_equal(count_rows(fx->path, "SELECT count(*) FROM targets"), 2);
  assert_int_equal(
      count_rows(fx->path, "SELECT count(*) FROM choices c JOIN targets t ON "
                           "t.id = c.target_id WHERE t.target LIKE "
                           "'llvm -mcpu=skylake-avx512 -mattr=%'"),
      3);

  /* not stored: another option, kind or subject, an unknown target */
  s = 1;
  n = 1;
  assert_int_equal(ts_db_choice_get(db, T_SKX, "winograd", CONV, F44, &s, &n),
                   TS_ENOTFOUND);
  assert_true(isnan(s));
  assert_int_equal(n, 0);
  assert_non_null(strstr(ts_db_errmsg(db), "no winograd choice 'F(4x4)'"));
  assert_non_null(strstr(ts_db_errmsg(db), CONV));
  assert_int_equal(
      ts_db_choice_get(db, T_SKX1, "winograd", CONV, "direct", NULL, NULL),
      TS_ENOTFOUND);
  assert_int_equal(ts_db_choice_get(db, T_SKX, "layout", CONV, F22, NULL, NULL),
                   TS_ENOTFOUND);
  assert_int_equal(ts_db_choice_get(db, T_SKX, "winograd",
                                    "fedcba9876543210fedcba9876543210", F22,
                                    NULL, NULL),
                   TS_ENOTFOUND);
  assert_int_equal(
      ts_db_choice_get(db, "cuda -arch=sm_80", "winograd", CONV, F22, &s, &n),
      TS_ENOTFOUND);
  assert_non_null(strstr(ts_db_errmsg(db), "cuda -arch=sm_80"));
  assert_true(isnan(s));
  /* a get stores no target */
  assert_int_equal(count_rows(fx->path, "SELECT count(*) FROM targets"), 2);

  /* a new figure replaces the old one */
  assert_int_equal(
      ts_db_choice_put(db, T_SKX, "winograd", CONV, F22, 1.5e-4, 40), TS_OK);
  assert_choice(db, T_SKX, F22, 1.5e-4, 40);
  assert_choice(db, T_SKX1, F22, 3.5e-4, 12);
  assert_int_equal(count_rows(fx->path, "SELECT count(*) FROM choices"), 3);
}

/* Each bad argument is refused, naming it, and nothing is written. */
static void test_choice_checks(void **state) {
  fixture *fx = *state;
  ts_db *db = fx->db;
  char too_long[258], longest[257];
  memset(too_long, 'x', sizeof too_long - 1);
  too_long[sizeof too_long - 1] = 0;
  memset(longest, 'y', sizeof longest - 1);
  longest[sizeof longest - 1] = 0;
  struct {
    const char *kind, *subject, *option;
    double seconds;
    int64_t samples;
    const char *msg;
  } bad[] = {
      {"", CONV, F22, 1e-3, 1, "choice: kind is empty"},
      {NULL, CONV, F22, 1e-3, 1, "choice: kind is empty"},
      {too_long, CONV, F22, 1e-3, 1, "choice: kind is longer than 256 bytes"},
      {"winograd", "", F22, 1e-3, 1, "choice: subject is empty"},
      {"winograd", NULL, F22, 1e-3, 1, "choice: subject is empty"},
      {"winograd", too_long, F22, 1e-3, 1,
       "choice: subject is longer than 256 bytes"},
      {"winograd", CONV, "", 1e-3, 1, "choice: option is empty"},
      {"winograd", CONV, NULL, 1e-3, 1, "choice: option is empty"},
      {"winograd", CONV, too_long, 1e-3, 1,
       "choice: option is longer than 256 bytes"},
      {"winograd", CONV, F22, 0, 1, "choice: seconds 0 is not a positive"},
      {"winograd", CONV, F22, -1e-3, 1, "choice: seconds -0.001"},
      {"winograd", CONV, F22, NAN, 1, "choice: seconds nan"},
      {"winograd", CONV, F22, INFINITY, 1, "choice: seconds inf"},
      {"winograd", CONV, F22, 1e-3, 0, "choice: samples 0 is not a count"},
      {"winograd", CONV, F22, 1e-3, -5, "choice: samples -5"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(ts_db_choice_put(db, T_SKX, bad[i].kind, bad[i].subject,
                                      bad[i].option, bad[i].seconds,
                                      bad[i].samples),
                     TS_EINVAL);
    if (!strstr(ts_db_errmsg(db), bad[i].msg))
      fail_msg("case %zu: '%s' lacks '%s'", i, ts_db_errmsg(db), bad[i].msg);
  }
  assert_int_equal(ts_db_choice_put(db, "lvm", "winograd", CONV, F22, 1e-3, 1),
                   TS_EINVAL);
  assert_non_null(strstr(ts_db_errmsg(db), "bad target 'lvm'"));
  /* the same names are refused when read */
  assert_int_equal(ts_db_choice_get(db, T_SKX, "", CONV, F22, NULL, NULL),
                   TS_EINVAL);
  assert_non_null(strstr(ts_db_errmsg(db), "choice: kind is empty"));
  assert_int_equal(
      ts_db_choice_get(db, T_SKX, "winograd", CONV, too_long, NULL, NULL),
      TS_EINVAL);
  assert_non_null(strstr(ts_db_errmsg(db), "option is longer than 256"));
  /* nothing was written, not even the target */
  assert_int_equal(count_rows(fx->path, "SELECT count(*) FROM choices"), 0);
  assert_int_equal(count_rows(fx->path, "SELECT count(*) FROM targets"), 0);
  /* 256 bytes is long enough */
  assert_int_equal(
      ts_db_choice_put(db, T_SKX, longest, longest, longest, 1e-3, 1), TS_OK);
  double s;
  assert_int_equal(
      ts_db_choice_get(db, T_SKX, longest, longest, longest, &s, NULL), TS_OK);
  assert_true(s == 1e-3);
}

/* A read-only database reads choices and refuses to store them. */
static void test_choice_read_only(void **state) {
  fixture *fx = *state;
  assert_int_equal(
      ts_db_choice_put(fx->db, T_SKX, "winograd", CONV, F22, 2e-4, 5), TS_OK);
  ts_db_options ro = ts_db_defaults();
  ro.read_only = true;
  ts_db *db;
  ts_error err;
  assert_int_equal(ts_db_open(fx->path, &ro, &db, &err), TS_OK);
  assert_choice(db, T_SKX, F22, 2e-4, 5);
  assert_int_not_equal(
      ts_db_choice_put(db, T_SKX, "winograd", CONV, F22, 1e-4, 9), TS_OK);
  assert_non_null(
      strstr(ts_db_errmsg(db), test_on_server() ? "read-only" : "readonly"));
  assert_int_not_equal(
      ts_db_choice_put(db, T_SKX, "winograd", CONV, F44, 1e-4, 9), TS_OK);
  /* a new target is not stored either */
  assert_int_not_equal(
      ts_db_choice_put(db, T_SKX1, "winograd", CONV, F22, 1e-4, 9), TS_OK);
  assert_choice(db, T_SKX, F22, 2e-4, 5);
  ts_db_close(db);
  assert_int_equal(count_rows(fx->path, "SELECT count(*) FROM choices"), 1);
  assert_int_equal(count_rows(fx->path, "SELECT count(*) FROM targets"), 1);
  assert_choice(fx->db, T_SKX, F22, 2e-4, 5);
}

/* Choices through export and import: the lines, a round trip to the same
 * bytes, the later measured figure kept, bad lines named. */
static void test_choice_export_import(void **state) {
  fixture *fx = *state;
  ts_db *a = fx->db;
  assert_int_equal(ts_db_baseline_put(a, fx->mm, T_SKX, "onednn", 2, 85.5),
                   TS_OK);
  assert_int_equal(
      ts_db_choice_put(a, T_SKX, "winograd", CONV, "direct", 0.25, 30), TS_OK);
  assert_int_equal(ts_db_choice_put(a, T_SKX, "winograd", CONV, F22, 0.125, 30),
                   TS_OK);
  assert_int_equal(ts_db_choice_put(a, T_SKX1, "winograd", CONV, F44, 0.5, 6),
                   TS_OK);
  char *first = export_to_string(a);
  const char *direct = strstr(
      first, "{\"type\":\"choice\",\"target\":1,\"kind\":\"winograd\","
             "\"subject\":\"" CONV "\",\"option\":\"direct\",\"seconds\":0.25,"
             "\"samples\":30,\"measured\":\"");
  assert_non_null(direct);
  /* after the baselines, the target by its ordinal */
  assert_true(strstr(first, "\"type\":\"baseline\"") < direct);
  assert_non_null(strstr(first,
                         "\"target\":2,\"kind\":\"winograd\",\"subject\":"
                         "\"" CONV "\",\"option\":\"F(4x4)\","
                         "\"seconds\":0.5,\"samples\":6"));

  /* into an empty database and out again: the same bytes */
  ts_db *b;
  ts_error err;
  assert_int_equal(ts_db_open(fx->path2, NULL, &b, &err), TS_OK);
  ts_db_import_stats st;
  assert_int_equal(import_text(b, first, &st), TS_OK);
  assert_int_equal(st.choices, 3);
  assert_int_equal(st.baselines, 1);
  char *second = export_to_string(b);
  assert_string_equal(first, second);
  assert_choice(b, T_SKX, "direct", 0.25, 30);
  assert_choice(b, T_SKX1, F44, 0.5, 6);
  /* the same file again changes nothing */
  assert_int_equal(import_text(b, first, &st), TS_OK);
  assert_int_equal(st.choices, 0);

  /* an older figure does not replace a newer one; a newer one does */
  char *older = replace(first,
                        "\"option\":\"direct\",\"seconds\":0.25,\"samples\":30,"
                        "\"measured\":\"",
                        "\"option\":\"direct\",\"seconds\":9,\"samples\":1,"
                        "\"measured\":\"1999");
  assert_int_equal(import_text(b, older, &st), TS_OK);
  assert_int_equal(st.choices, 0);
  assert_choice(b, T_SKX, "direct", 0.25, 30);
  char *newer = replace(first,
                        "\"option\":\"direct\",\"seconds\":0.25,\"samples\":30,"
                        "\"measured\":\"",
                        "\"option\":\"direct\",\"seconds\":0.0625,\"samples\":"
                        "40,\"measured\":\"9999");
  assert_int_equal(import_text(b, newer, &st), TS_OK);
  assert_int_equal(st.choices, 1);
  assert_choice(b, T_SKX, "direct", 0.0625, 40);
  assert_choice(b, T_SKX, F22, 0.125, 30);

  /* bad lines are named and nothing is written */
  char *bad = replace(first, "\"samples\":30", "\"samples\":0");
  assert_int_equal(import_text(b, bad, &st), TS_EINVAL);
  assert_non_null(strstr(ts_db_errmsg(b), "in.jsonl:"));
  assert_non_null(strstr(ts_db_errmsg(b), "samples 0 is not a count of runs"));
  char *no_option = replace(first, "\"option\":\"F(2x2)\"", "\"option\":\"\"");
  assert_int_equal(import_text(b, no_option, &st), TS_EINVAL);
  assert_non_null(strstr(ts_db_errmsg(b), "option is empty"));
  char *dangling = replace(first, "\"type\":\"choice\",\"target\":1",
                           "\"type\":\"choice\",\"target\":7");
  assert_int_equal(import_text(b, dangling, &st), TS_EINVAL);
  assert_non_null(
      strstr(ts_db_errmsg(b), "field \"target\": no target with id 7"));
  char *no_seconds = replace(first, "\"seconds\":0.125", "\"seconds\":\"x\"");
  assert_int_equal(import_text(b, no_seconds, &st), TS_EINVAL);
  assert_non_null(
      strstr(ts_db_errmsg(b), "field \"seconds\": expected a number"));
  assert_int_equal(count_rows(fx->path2, "SELECT count(*) FROM choices"), 3);
  assert_choice(b, T_SKX, "direct", 0.0625, 40);
  ts_db_close(b);
  free(first);
  free(second);
  free(older);
  free(newer);
  free(bad);
  free(no_option);
  free(dangling);
  free(no_seconds);
}

/* A version 6 database (no choices table) opens read-only as it is, with
 * no choices to read or export, and gains the table when opened
 * read-write. */
static void test_migrate_from_v6(void **state) {
  fixture *fx = *state;
  double secs[] = {1e-3};
  ts_db_measurement m = {.workload_id = fx->mm,
                         .target = T_SKX,
                         .trace_json = TRACE,
                         .run_secs = secs,
                         .n_run_secs = 1};
  assert_int_equal(ts_db_commit_record(fx->db, &m, NULL), TS_OK);
  ts_db_close(fx->db);
  fx->db = NULL;
  bool server = test_on_server();
  const char *version_sql =
      server ? "SELECT version FROM tessera_schema" : "PRAGMA user_version";
  const char *has_table =
      server ? "SELECT count(*) FROM pg_tables WHERE schemaname = "
               "current_schema() AND tablename = 'choices'"
             : "SELECT count(*) FROM sqlite_schema WHERE name = 'choices'";
  downgrade(fx->path, DROP_V7, 6);
  assert_int_equal(count_rows(fx->path, has_table), 0);
  assert_int_equal(count_rows(fx->path, version_sql), 6);

  /* read-only: answered as it is, no choices, nothing written */
  ts_db_options ro = ts_db_defaults();
  ro.read_only = true;
  ts_error err;
  ts_db *db;
  assert_int_equal(ts_db_open(fx->path, &ro, &db, &err), TS_OK);
  ts_db_record best;
  assert_int_equal(ts_db_best(db, fx->mm, T_SKX, &best), TS_OK);
  ts_db_record_clear(&best);
  double s = 1;
  assert_int_equal(ts_db_choice_get(db, T_SKX, "winograd", CONV, F22, &s, NULL),
                   TS_ENOTFOUND);
  assert_true(isnan(s));
  assert_int_not_equal(
      ts_db_choice_put(db, T_SKX, "winograd", CONV, F22, 1e-4, 3), TS_OK);
  char *text = export_to_string(db);
  assert_non_null(strstr(text, "\"type\":\"record\""));
  assert_null(strstr(text, "\"type\":\"choice\""));
  free(text);
  ts_db_close(db);
  assert_int_equal(count_rows(fx->path, version_sql), 6);
  assert_int_equal(count_rows(fx->path, has_table), 0);

  /* read-write: the table, the records kept */
  assert_int_equal(ts_db_open(fx->path, NULL, &fx->db, &err), TS_OK);
  assert_int_equal(count_rows(fx->path, version_sql), TS_DB_SCHEMA_VERSION);
  assert_int_equal(count_rows(fx->path, has_table), 1);
  assert_int_equal(count_rows(fx->path, "SELECT count(*) FROM records"), 1);
  assert_int_equal(
      ts_db_choice_get(fx->db, T_SKX, "winograd", CONV, F22, NULL, NULL),
      TS_ENOTFOUND);
  assert_int_equal(
      ts_db_choice_put(fx->db, T_SKX, "winograd", CONV, F22, 1e-4, 3), TS_OK);
  assert_choice(fx->db, T_SKX, F22, 1e-4, 3);
  assert_int_equal(ts_db_integrity_check(fx->db), TS_OK);
  /* read-only once migrated reads the table */
  assert_int_equal(ts_db_open(fx->path, &ro, &db, &err), TS_OK);
  assert_choice(db, T_SKX, F22, 1e-4, 3);
  ts_db_close(db);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_put_get_list, setup, teardown),
      cmocka_unit_test_setup_teardown(test_put_checks, setup, teardown),
      cmocka_unit_test_setup_teardown(test_migrate_from_v1, setup, teardown),
      cmocka_unit_test_setup_teardown(test_side_by_side, setup, teardown),
      cmocka_unit_test_setup_teardown(test_migrate_from_v3, setup, teardown),
      cmocka_unit_test_setup_teardown(test_migrate_from_v5, setup, teardown),
      cmocka_unit_test_setup_teardown(test_export_import, setup, teardown),
      cmocka_unit_test_setup_teardown(test_record_points, setup, teardown),
      cmocka_unit_test_setup_teardown(test_choice_put_get, setup, teardown),
      cmocka_unit_test_setup_teardown(test_choice_checks, setup, teardown),
      cmocka_unit_test_setup_teardown(test_choice_read_only, setup, teardown),
      cmocka_unit_test_setup_teardown(test_choice_export_import, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_migrate_from_v6, setup, teardown),
  };
  test_server_url(); /* exits 77 when the server was meant but is absent */
  return cmocka_run_group_tests(tests, NULL, NULL);
}
