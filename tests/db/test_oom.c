/*
 * test_oom.c — out of memory in the database is an error, not a crash, and
 * never leaves a write half done. Two walks (tests/schedule/oom_walk.h)
 * fail each of tessera's allocations in turn: "db_open" over opening a new
 * SQLite file (the schema created), and "db" over committing a workload, a
 * job and two records (the trace printed as JSON from a schedule and
 * checked by the full trace parser) and a vendor level, a new read-only
 * connection answering the compile-time query (best by PrimFunc, the
 * stored TIR parsed again), top-k, the overview and the levels, an export,
 * and its import into a second file. The second walk starts each run from
 * copies of an empty database made once (creating one is most of the time
 * of a run). After each failed run the files are read (hook off): each
 * holds none or all of the records, and a job's trial count matches its
 * records. SQLite's own allocations are not tessera's and are not walked.
 */
#include "../schedule/oom_walk.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include "db/db.h"
#include "schedule/schedule.h"

#define TARGET "llvm -mcpu=skylake-avx512 -num-cores=2"

static const char *const open_stages[] = {"db_open"};
enum { ST_COMMIT, ST_BEST, ST_EXPORT, ST_IMPORT, ST_N };
static const char *const stage_names[ST_N] = {"db_commit", "db_best",
                                              "db_export", "db_import"};

typedef struct walk_ctx {
  char dir[256];
  char empty[300]; /* an empty database, copied to path and path2 */
  unsigned char empty_bytes[1 << 18];
  size_t n_empty;
  char fresh[300]; /* created by each run of the db_open walk */
  char path[300], path2[300];
  ts_func *func; /* the workload */
  ts_sched *sched;
} walk_ctx;

static void remove_db(const char *path) {
  char p[320];
  unlink(path);
  snprintf(p, sizeof p, "%s-wal", path);
  unlink(p);
  snprintf(p, sizeof p, "%s-shm", path);
  unlink(p);
}

/* The walk runs thousands of writes whose durability does not matter:
 * SQLite's default file system, with its syncs made no-ops, keeps them
 * from waiting for the disk. */
static sqlite3_vfs *real_vfs;
static sqlite3_vfs nosync_vfs;
static const sqlite3_io_methods *real_methods; /* of the database files */
static sqlite3_io_methods nosync_methods;

static int no_sync(sqlite3_file *f, int flags) {
  (void)f;
  (void)flags;
  return SQLITE_OK;
}

static int nosync_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f,
                       int flags, int *out_flags) {
  (void)vfs;
  int rc = real_vfs->xOpen(real_vfs, name, f, flags, out_flags);
  if (rc == SQLITE_OK && f->pMethods) {
    if (!real_methods) {
      real_methods = f->pMethods;
      nosync_methods = *real_methods;
      nosync_methods.xSync = no_sync;
    }
    if (f->pMethods == real_methods) f->pMethods = &nosync_methods;
  }
  return rc;
}

static int nosync_delete(sqlite3_vfs *vfs, const char *name, int sync_dir) {
  (void)vfs;
  (void)sync_dir;
  return real_vfs->xDelete(real_vfs, name, 0);
}

static void use_nosync_vfs(void) {
  real_vfs = sqlite3_vfs_find(NULL);
  assert_non_null(real_vfs);
  nosync_vfs = *real_vfs;
  nosync_vfs.zName = "tessera-test-nosync";
  nosync_vfs.xOpen = nosync_open;
  nosync_vfs.xDelete = nosync_delete;
  assert_int_equal(sqlite3_vfs_register(&nosync_vfs, 1), SQLITE_OK);
}

/* The database file at path: none of its pages in a write-ahead log (a
 * database closed). */
static void read_db(walk_ctx *c, const char *path) {
  FILE *in = fopen(path, "rb");
  assert_non_null(in);
  c->n_empty = fread(c->empty_bytes, 1, sizeof c->empty_bytes, in);
  assert_true(c->n_empty > 0 && c->n_empty < sizeof c->empty_bytes);
  assert_int_equal(fclose(in), 0);
}

/* The empty database at path, written over the old copy in place (a new
 * file costs more). */
static void copy_empty(const walk_ctx *c, const char *path) {
  int fd = open(path, O_WRONLY | O_CREAT, 0600);
  assert_true(fd >= 0);
  assert_int_equal(pwrite(fd, c->empty_bytes, c->n_empty, 0),
                   (ssize_t)c->n_empty);
  assert_int_equal(ftruncate(fd, (off_t)c->n_empty), 0);
  assert_int_equal(close(fd), 0);
}

static int run_open(void *p, int last, char **out, ts_error *err) {
  walk_ctx *c = p;
  (void)last;
  *out = NULL;
  remove_db(c->fresh);
  ts_db *db;
  int rc = ts_db_open(c->fresh, NULL, &db, err);
  ts_db_close(db);
  return rc;
}

/* The database's error as the run's. */
static int db_rc(int rc, ts_db *db, ts_error *err) {
  if (rc) *err = *ts_db_error(db);
  return rc;
}

static int run(void *p, int last, char **out, ts_error *err) {
  walk_ctx *c = p;
  int rc = TS_OK;
  ts_db *db = NULL, *ro = NULL, *db2 = NULL;
  ts_db_record best = {0}, *top = NULL;
  ts_db_summary *rows = NULL;
  ts_db_baseline *levels = NULL;
  char *trace = NULL;
  FILE *file = NULL;
  int n_top = 0, n_rows = 0, n_levels = 0;
  *out = NULL;
  ts_error_clear(err);
  copy_empty(c, c->path);

  ts_db_options o = ts_db_defaults();
  o.check_trace = ts_trace_check_json;
  o.create = false;
  STEP(ts_db_open(c->path, &o, &db, err));
  int64_t wid, job, ids[2];
  STEP(db_rc(ts_db_commit_workload(db, c->func, "matmul", &wid), db, err));
  STEP(db_rc(ts_db_job_create(db, "walk", "{\"trials\":2}", 2, &job), db, err));
  trace = ts_trace_to_json(ts_sched_trace(c->sched));
  if (!trace) STEP(TS_ERR(err, TS_ENOMEM, "trace: out of memory"));
  double secs[2][3] = {{2e-5, 1e-5, 3e-5}, {4e-5, 5e-5, 6e-5}};
  ts_db_measurement m[2];
  for (int i = 0; i < 2; i++)
    m[i] = (ts_db_measurement){.workload_id = wid,
                               .target = TARGET,
                               .trace_json = trace,
                               .run_secs = secs[i],
                               .n_run_secs = 3,
                               .job_id = job,
                               .measure_json = "{\"threads\":2}"};
  STEP(db_rc(ts_db_commit_records(db, m, 2, ids), db, err));
  STEP(db_rc(ts_db_baseline_put(db, wid, TARGET, "naive", 2, 1.5), db, err));
  if (last < ST_BEST) goto done;
  ts_db_options ro_o = o;
  ro_o.read_only = true;
  STEP(ts_db_open(c->path, &ro_o, &ro, err));
  STEP(db_rc(ts_db_best_by_func(ro, c->func, TARGET, &best), ro, err));
  STEP(db_rc(ts_db_top_k(ro, wid, TARGET, 2, &top, &n_top), ro, err));
  STEP(db_rc(ts_db_list(ro, 0, &rows, &n_rows), ro, err));
  STEP(db_rc(ts_db_baselines(ro, wid, TARGET, &levels, &n_levels), ro, err));
  if (last < ST_EXPORT) goto done;
  if (!(file = tmpfile())) STEP(TS_ERR(err, TS_EIO, "no temporary file"));
  STEP(db_rc(ts_db_export(ro, file), ro, err));
  if (last < ST_IMPORT) goto done;
  copy_empty(c, c->path2);
  STEP(ts_db_open(c->path2, &o, &db2, err));
  ts_db_import_stats st;
  STEP(db_rc(ts_db_import(db2, file, "export", &st), db2, err));
  char text[160];
  snprintf(text, sizeof text,
           "best %g top %d rows %d levels %d imported %lld/%lld", best.median_s,
           n_top, n_rows, n_levels, (long long)st.records,
           (long long)st.workloads_new);
  *out = strdup(text);
done:
  if (file) fclose(file);
  ts_db_record_clear(&best);
  ts_db_records_free(top, n_top);
  ts_db_summaries_free(rows, n_rows);
  ts_db_baselines_free(levels, n_levels);
  free(trace);
  ts_db_close(db2);
  ts_db_close(ro);
  ts_db_close(db);
  return rc;
}

/* One integer from the file's SQL; -1 when it has no such table. */
static long long query_int(sqlite3 *db, const char *sql) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return -1;
  long long v =
      sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
  sqlite3_finalize(st);
  return v;
}

/* The records of the file at path (and its job's trial count): none or
 * all. Read with SQLite directly: opening with tessera would migrate. */
static void check_file(const char *path) {
  sqlite3 *db;
  if (access(path, F_OK) != 0) return;
  assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL),
                   SQLITE_OK);
  long long records = query_int(db, "SELECT count(*) FROM records");
  assert_true(records <= 0 || records == 2);
  assert_true(query_int(db, "SELECT count(*) FROM workloads") <= 1);
  long long done = query_int(db, "SELECT sum(trials_done) FROM jobs");
  assert_true(done == records || (records <= 0 && done <= 0));
  sqlite3_close(db);
}

static void check_failed(void *p) {
  walk_ctx *c = p;
  check_file(c->fresh);
  check_file(c->path);
  check_file(c->path2);
}

static void test_walk(void **state) {
  (void)state;
  static walk_ctx c;
  memset(&c, 0, sizeof c);
  snprintf(c.dir, sizeof c.dir, "%s/ts-db-oom-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  assert_non_null(mkdtemp(c.dir));
  snprintf(c.empty, sizeof c.empty, "%s/empty.db", c.dir);
  snprintf(c.fresh, sizeof c.fresh, "%s/fresh.db", c.dir);
  snprintf(c.path, sizeof c.path, "%s/a.db", c.dir);
  snprintf(c.path2, sizeof c.path2, "%s/b.db", c.dir);
  ts_workload *w;
  ts_error err;
  assert_int_equal(
      ts_workload_from_spec("matmul M=16 N=16 K=16 dtype=float32", &w, &err),
      TS_OK);
  c.func = ts_func_copy(w->func);
  ts_workload_free(w);
  assert_int_equal(ts_sched_create(c.func, 7, &c.sched, &err), TS_OK);
  ts_rv b, l[3], i2[2];
  int n;
  assert_int_equal(ts_sched_get_block(c.sched, "C", &b), TS_OK);
  assert_int_equal(ts_sched_get_loops(c.sched, b, l, 3, &n), TS_OK);
  assert_int_equal(
      ts_sched_split(c.sched, l[0], (int64_t[]){TS_SPLIT_INFER, 4}, 2, i2),
      TS_OK);
  assert_int_equal(ts_sched_parallel(c.sched, i2[0]), TS_OK);

  use_nosync_vfs();
  ts_db *db;
  assert_int_equal(ts_db_open(c.empty, NULL, &db, &err), TS_OK);
  ts_db_close(db);
  read_db(&c, c.empty);

  oom_walk open = {"db_open", open_stages, 1, run_open, check_failed, 1, false};
  oom_walk_run(&open, &c);
  oom_walk walk = {"db", stage_names, ST_N, run, check_failed, 1, false};
  oom_walk_run(&walk, &c);

  ts_sched_destroy(c.sched);
  ts_func_free(c.func);
  remove_db(c.empty);
  remove_db(c.fresh);
  remove_db(c.path);
  remove_db(c.path2);
  assert_int_equal(rmdir(c.dir), 0);
  sqlite3_vfs_unregister(&nosync_vfs);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_walk),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
