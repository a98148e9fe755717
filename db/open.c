/*
 * open.c — opening and closing a tuning database: the checks made on a file
 * before SQLite is allowed to write to it (SQLite header, truncation,
 * application id, schema version), the connection settings (WAL journal,
 * busy handler with exponential backoff, foreign keys), the forward
 * migrations keyed by PRAGMA user_version, and the helpers the rest of the
 * module runs every statement through: cached prepared statements, stepping
 * and write transactions that retry while other processes hold the lock,
 * and error reporting on the handle.
 */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- the schema: migrations[v] takes a database from version v to v+1 ---- */

static const char *const migrations[TS_DB_SCHEMA_VERSION] = {
    /* 0 -> 1: the first schema. */
    "CREATE TABLE IF NOT EXISTS workloads (\n"
    "  id      INTEGER PRIMARY KEY,\n"
    "  hash    TEXT NOT NULL,\n"
    "  name    TEXT NOT NULL,\n"
    "  tir     TEXT NOT NULL,\n"
    "  flops   REAL NOT NULL,\n"
    "  created TEXT NOT NULL\n"
    ");\n"
    "CREATE INDEX IF NOT EXISTS workloads_hash ON workloads(hash);\n"
    "CREATE TABLE IF NOT EXISTS targets (\n"
    "  id      INTEGER PRIMARY KEY,\n"
    "  target  TEXT NOT NULL UNIQUE,\n"
    "  probe   TEXT,\n"
    "  probed  TEXT,\n"
    "  created TEXT NOT NULL\n"
    ");\n"
    "CREATE TABLE IF NOT EXISTS jobs (\n"
    "  id            INTEGER PRIMARY KEY,\n"
    "  name          TEXT NOT NULL UNIQUE,\n"
    "  config        TEXT NOT NULL,\n"
    "  state         TEXT NOT NULL,\n"
    "  started       TEXT NOT NULL,\n"
    "  finished      TEXT,\n"
    "  trials_budget INTEGER NOT NULL,\n"
    "  trials_done   INTEGER NOT NULL\n"
    ");\n"
    "CREATE TABLE IF NOT EXISTS records (\n"
    "  id          INTEGER PRIMARY KEY,\n"
    "  workload_id INTEGER NOT NULL REFERENCES workloads(id),\n"
    "  target_id   INTEGER NOT NULL REFERENCES targets(id),\n"
    "  trace       TEXT NOT NULL,\n"
    "  run_secs    TEXT NOT NULL,\n"
    "  median_s    REAL,\n"
    "  status      TEXT NOT NULL,\n"
    "  error       TEXT NOT NULL,\n"
    "  job_id      INTEGER REFERENCES jobs(id),\n"
    "  trial       INTEGER,\n"
    "  worker      TEXT NOT NULL,\n"
    "  version     TEXT NOT NULL,\n"
    "  created     TEXT NOT NULL\n"
    ");\n"
    "CREATE INDEX IF NOT EXISTS records_best ON records(workload_id, "
    "target_id, median_s)\n"
    "  WHERE status = 'ok';\n"
    "CREATE INDEX IF NOT EXISTS records_workload ON records(workload_id, "
    "target_id, "
    "status);\n"
    "CREATE INDEX IF NOT EXISTS records_job ON records(job_id, trial, "
    "status);\n",
    /* 1 -> 2: vendor-library levels per workload x target. */
    "CREATE TABLE IF NOT EXISTS baselines (\n"
    "  id          INTEGER PRIMARY KEY,\n"
    "  workload_id INTEGER NOT NULL REFERENCES workloads(id),\n"
    "  target_id   INTEGER NOT NULL REFERENCES targets(id),\n"
    "  vendor      TEXT NOT NULL,\n"
    "  threads     INTEGER NOT NULL,\n"
    "  gflops      REAL NOT NULL,\n"
    "  created     TEXT NOT NULL,\n"
    "  UNIQUE (workload_id, target_id, vendor, threads)\n"
    ");\n",
};

static const char *const statement_sql[N_STATEMENTS] = {
#define DB_STATEMENT_SQL(id, sql) sql,
    DB_STATEMENTS(DB_STATEMENT_SQL)
#undef DB_STATEMENT_SQL
};

/* ---- small helpers ---- */

void *db_xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    fputs("tessera: out of memory\n", stderr);
    abort();
  }
  return p;
}

char *db_xstrdup(const char *s) {
  if (!s) return NULL;
  size_t n = strlen(s) + 1;
  char *p = db_xmalloc(n);
  memcpy(p, s, n);
  return p;
}

double db_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void db_timestamp(char out[32]) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  char date[24];
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(out, 32, "%s.%03dZ", date, (int)(ts.tv_nsec / 1000000));
}

char *db_column_strdup(sqlite3_stmt *st, int i) {
  const unsigned char *s = sqlite3_column_text(st, i);
  if (!s) return NULL;
  size_t n = (size_t)sqlite3_column_bytes(st, i);
  char *p = db_xmalloc(n + 1);
  memcpy(p, s, n);
  p[n] = 0;
  return p;
}

void db_column_copy(sqlite3_stmt *st, int i, char *out, size_t cap) {
  const unsigned char *s = sqlite3_column_text(st, i);
  snprintf(out, cap, "%s", s ? (const char *)s : "");
}

void db_begin_call(ts_db *db) {
  ts_error_clear(&db->err);
  db->busy = false;
}

static bool is_busy(int rc) {
  return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED;
}

int db_sqlite_fail(ts_db *db, int rc, const char *what) {
  db->busy = is_busy(rc);
  const char *msg = sqlite3_extended_errcode(db->conn) == rc
                        ? sqlite3_errmsg(db->conn)
                        : sqlite3_errstr(rc);
  int code = TS_EIO;
  switch (rc & 0xff) {
  case SQLITE_NOTADB:
  case SQLITE_CORRUPT:
  case SQLITE_CONSTRAINT:
  case SQLITE_MISMATCH: code = TS_EINVAL; break;
  case SQLITE_NOMEM: code = TS_ENOMEM; break;
  }
  if (db->busy)
    return TS_ERR(&db->err, code,
                  "%s: %s: %s (waited %.1f s for other writers)", db->path,
                  what, msg, db->opts.busy_timeout_ms / 1000.0);
  return TS_ERR(&db->err, code, "%s: %s: %s", db->path, what, msg);
}

/* Sleeps between attempts: 100 µs doubling per attempt up to 20 ms, times a
 * random factor in [0.5, 1.5) so competing processes spread out. */
static void backoff(ts_db *db, int attempt) {
  double delay = 100e-6 * (double)(1u << (attempt < 8 ? attempt : 8));
  if (delay > 0.02) delay = 0.02;
  db->rng ^= db->rng << 13;
  db->rng ^= db->rng >> 7;
  db->rng ^= db->rng << 17;
  delay *= 0.5 + (double)(db->rng % 1000) / 1000.0;
  struct timespec ts = {0, (long)(delay * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static bool timed_out(const ts_db *db, double started) {
  return (db_now() - started) * 1000.0 >= db->opts.busy_timeout_ms;
}

/* SQLite calls this while a lock it needs is held elsewhere: wait with
 * backoff until the busy timeout, then give up (the statement returns
 * SQLITE_BUSY and the caller's retry loop decides). */
static int busy_handler(void *ctx, int count) {
  ts_db *db = ctx;
  if (count == 0) db->busy_started = db_now();
  if (timed_out(db, db->busy_started)) return 0;
  backoff(db, count);
  return 1;
}

sqlite3_stmt *db_stmt(ts_db *db, db_statement id) {
  sqlite3_stmt *st = db->stmts[id];
  if (st) {
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return st;
  }
  int rc = sqlite3_prepare_v3(db->conn, statement_sql[id], -1,
                              SQLITE_PREPARE_PERSISTENT, &st, NULL);
  if (rc != SQLITE_OK) {
    db_sqlite_fail(db, rc, "preparing a statement");
    return NULL;
  }
  db->stmts[id] = st;
  return st;
}

int db_step(ts_db *db, sqlite3_stmt *st) {
  double started = db_now();
  for (int attempt = 0;; attempt++) {
    int rc = sqlite3_step(st);
    if (!is_busy(rc) || timed_out(db, started)) return rc;
    sqlite3_reset(st);
    backoff(db, attempt);
  }
}

int db_exec(ts_db *db, const char *sql, const char *what) {
  double started = db_now();
  for (int attempt = 0;; attempt++) {
    int rc = sqlite3_exec(db->conn, sql, NULL, NULL, NULL);
    if (rc == SQLITE_OK) return TS_OK;
    if (!is_busy(rc) || timed_out(db, started))
      return db_sqlite_fail(db, rc, what);
    backoff(db, attempt);
  }
}

int db_write(ts_db *db, int (*body)(ts_db *db, void *ctx), void *ctx) {
  double started = db_now();
  for (int attempt = 0;; attempt++) {
    db->busy = false;
    int code;
    int rc = sqlite3_exec(db->conn, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
      code = db_sqlite_fail(db, rc, "starting a write");
    } else {
      db->in_write = true;
      db->cached_in_write = false;
      code = body(db, ctx);
      if (code == TS_OK) {
        rc = sqlite3_exec(db->conn, "COMMIT", NULL, NULL, NULL);
        if (rc == SQLITE_OK) {
          db->in_write = false;
          return TS_OK;
        }
        code = db_sqlite_fail(db, rc, "committing");
      }
      db->in_write = false;
      if (!sqlite3_get_autocommit(db->conn))
        sqlite3_exec(db->conn, "ROLLBACK", NULL, NULL, NULL);
      /* ids of rows the rollback removed may be handed out again */
      if (db->cached_in_write) {
        func_cache_free(&db->funcs);
        func_cache_init(&db->funcs, db->opts.func_cache_bytes);
      }
    }
    if (!db->busy || timed_out(db, started)) return code;
    backoff(db, attempt);
  }
}

/* ---- checks before SQLite touches the file ---- */

static uint32_t be32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
         p[3];
}

static int64_t file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (int64_t)st.st_size : -1;
}

/* Reads the 100-byte SQLite header of an existing, non-empty file and
 * refuses what must not be opened. A write-ahead log beside the file may
 * hold pages not yet copied back (a crash in a checkpoint), so the size
 * checks are skipped when one exists; SQLite replays it. */
static int check_file(const char *path, int64_t size, ts_error *err) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return TS_ERR(err, TS_EIO, "%s: cannot read: %s", path, strerror(errno));
  unsigned char h[100];
  size_t n = fread(h, 1, sizeof h, f);
  fclose(f);
  static const char magic[16] = "SQLite format 3";
  size_t m = n < 16 ? n : 16;
  if (memcmp(h, magic, m) != 0)
    return TS_ERR(err, TS_EINVAL,
                  "%s: not a tessera database: not an SQLite file (the first "
                  "bytes are not \"SQLite format 3\")",
                  path);
  if (n < sizeof h)
    return TS_ERR(err, TS_EINVAL,
                  "%s: truncated database: %zu bytes, shorter than the "
                  "100-byte SQLite header",
                  path, n);
  uint32_t page = (uint32_t)h[16] << 8 | h[17];
  if (page == 1) page = 65536;
  if (page < 512 || (page & (page - 1)))
    return TS_ERR(err, TS_EINVAL,
                  "%s: corrupt database: bad page size %u in the header", path,
                  page);
  size_t len = strlen(path);
  char *wal = db_xmalloc(len + 5);
  memcpy(wal, path, len);
  memcpy(wal + len, "-wal", 5);
  bool has_wal = file_size(wal) > 0;
  free(wal);
  if (!has_wal) {
    if (size % page)
      return TS_ERR(err, TS_EINVAL,
                    "%s: truncated database: %lld bytes is not a whole number "
                    "of %u-byte pages",
                    path, (long long)size, page);
    uint32_t pages = be32(h + 28);
    if (pages && be32(h + 24) == be32(h + 92) && (int64_t)pages * page > size)
      return TS_ERR(err, TS_EINVAL,
                    "%s: truncated database: the header records %u pages "
                    "(%lld bytes) but the file has %lld bytes",
                    path, pages, (long long)pages * page, (long long)size);
  }
  uint32_t app = be32(h + 68), version = be32(h + 60);
  if (app != 0 && app != DB_APPLICATION_ID)
    return TS_ERR(err, TS_EINVAL,
                  "%s: not a tessera database: an SQLite database of another "
                  "application (application_id 0x%08x)",
                  path, app);
  if (app == DB_APPLICATION_ID && version > TS_DB_SCHEMA_VERSION)
    return TS_ERR(err, TS_EUNSUPPORTED,
                  "%s: database schema version %u is newer than this tessera "
                  "supports (%d); use a newer tessera (the file was not "
                  "changed)",
                  path, version, TS_DB_SCHEMA_VERSION);
  return TS_OK;
}

/* One integer from a query (PRAGMA or count). */
static int query_int(ts_db *db, const char *sql, int64_t *out) {
  sqlite3_stmt *st;
  int rc = sqlite3_prepare_v2(db->conn, sql, -1, &st, NULL);
  if (rc != SQLITE_OK) return db_sqlite_fail(db, rc, "reading the schema");
  rc = db_step(db, st);
  if (rc == SQLITE_ROW) *out = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE)
    return db_sqlite_fail(db, rc, "reading the schema");
  return TS_OK;
}

typedef struct schema_info {
  int64_t version, app, n_tables;
} schema_info;

static int read_schema(ts_db *db, schema_info *s) {
  int rc;
  if ((rc = query_int(db, "PRAGMA application_id", &s->app)) ||
      (rc = query_int(db, "PRAGMA user_version", &s->version)) ||
      (rc = query_int(db, "SELECT count(*) FROM sqlite_schema", &s->n_tables)))
    return rc;
  return TS_OK;
}

/* Refuses what is not a tessera database of a version this build knows. */
static int check_schema(ts_db *db, const schema_info *s) {
  if (s->app != DB_APPLICATION_ID && (s->app != 0 || s->n_tables > 0))
    return TS_ERR(&db->err, TS_EINVAL,
                  "%s: not a tessera database: an SQLite database of another "
                  "application (application_id 0x%08llx, %lld schema objects)",
                  db->path, (unsigned long long)s->app, (long long)s->n_tables);
  if (s->version > TS_DB_SCHEMA_VERSION)
    return TS_ERR(&db->err, TS_EUNSUPPORTED,
                  "%s: database schema version %lld is newer than this "
                  "tessera supports (%d); use a newer tessera (the file was "
                  "not changed)",
                  db->path, (long long)s->version, TS_DB_SCHEMA_VERSION);
  return TS_OK;
}

static int migrate_body(ts_db *db, void *ctx) {
  (void)ctx;
  schema_info s = {0};
  int rc = read_schema(db, &s);
  if (rc || (rc = check_schema(db, &s))) return rc;
  for (int64_t v = s.version; v < TS_DB_SCHEMA_VERSION; v++) {
    char what[64];
    snprintf(what, sizeof what, "migrating the schema to version %lld",
             (long long)v + 1);
    if ((rc = db_exec(db, migrations[v], what))) return rc;
  }
  if (s.version == TS_DB_SCHEMA_VERSION) return TS_OK;
  char sql[128];
  snprintf(sql, sizeof sql,
           "PRAGMA application_id = %d; PRAGMA user_version = %d",
           DB_APPLICATION_ID, TS_DB_SCHEMA_VERSION);
  return db_exec(db, sql, "setting the schema version");
}

/* ---- open and close ---- */

ts_db_options ts_db_defaults(void) {
  return (ts_db_options){
      .create = true,
      .busy_timeout_ms = 60000,
      .func_cache_bytes = (size_t)256 << 20,
  };
}

/* Queries read pages through a memory map (no read system call per page
 * of a large file) and keep up to 64 MiB of pages per connection. */
#define READ_PRAGMAS "PRAGMA mmap_size = 1073741824; PRAGMA cache_size = -65536"

static int configure(ts_db *db) {
  int rc;
  sqlite3_extended_result_codes(db->conn, 1);
  sqlite3_busy_handler(db->conn, busy_handler, db);
  schema_info s = {0};
  /* One read transaction, so the three figures come from one snapshot (a
   * process creating the schema at the same time commits them together). */
  if ((rc = db_exec(db, "BEGIN", "reading the schema"))) return rc;
  rc = read_schema(db, &s);
  db_exec(db, "COMMIT", "reading the schema");
  if (rc || (rc = check_schema(db, &s))) return rc;
  if (db->opts.read_only) {
    if (s.version < TS_DB_SCHEMA_VERSION)
      return TS_ERR(&db->err, TS_EINVAL,
                    "%s: %s; open it read-write once to migrate it", db->path,
                    s.version == 0 ? "empty database"
                                   : "database of an older schema version");
    return db_exec(db, "PRAGMA foreign_keys = ON; " READ_PRAGMAS,
                   "configuring");
  }
  /* WAL: readers never wait for the writer and a killed writer leaves no
   * partial transaction. NORMAL sync in WAL keeps every committed
   * transaction across a process crash; a power loss may drop the last few
   * but never corrupts the file. */
  sqlite3_stmt *st;
  rc = sqlite3_prepare_v2(db->conn, "PRAGMA journal_mode = WAL", -1, &st, NULL);
  if (rc != SQLITE_OK) return db_sqlite_fail(db, rc, "enabling WAL");
  rc = db_step(db, st);
  const unsigned char *mode =
      rc == SQLITE_ROW ? sqlite3_column_text(st, 0) : NULL;
  bool wal = mode && !strcmp((const char *)mode, "wal");
  sqlite3_finalize(st);
  if (rc != SQLITE_ROW) return db_sqlite_fail(db, rc, "enabling WAL");
  if (!wal)
    return TS_ERR(&db->err, TS_EIO,
                  "%s: cannot use a write-ahead log here (journal mode "
                  "stays '%s')",
                  db->path, mode ? "other" : "unknown");
  if ((rc = db_exec(db,
                    "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = "
                    "ON; " READ_PRAGMAS,
                    "configuring")))
    return rc;
  if (s.version < TS_DB_SCHEMA_VERSION) return db_write(db, migrate_body, NULL);
  return TS_OK;
}

int ts_db_open(const char *path, const ts_db_options *opts, ts_db **out,
               ts_error *err) {
  *out = NULL;
  ts_db_options o = opts ? *opts : ts_db_defaults();
  if (!path || !path[0])
    return TS_ERR(err, TS_EINVAL, "database path is empty");
  if (o.busy_timeout_ms < 0)
    return TS_ERR(err, TS_EINVAL, "busy_timeout_ms is negative");
  struct stat st;
  bool exists = stat(path, &st) == 0;
  if (exists && !S_ISREG(st.st_mode))
    return TS_ERR(err, TS_EINVAL, "%s: not a tessera database: not a file",
                  path);
  if (!exists && (!o.create || o.read_only))
    return TS_ERR(err, TS_ENOTFOUND, "%s: no such database", path);
  int rc;
  if (exists && st.st_size > 0 &&
      (rc = check_file(path, (int64_t)st.st_size, err)))
    return rc;

  ts_db *db = calloc(1, sizeof *db);
  if (!db) return TS_ERR(err, TS_ENOMEM, "out of memory opening %s", path);
  db->path = db_xstrdup(path);
  db->opts = o;
  db->rng = (uint64_t)getpid() * 0x9E3779B97F4A7C15ull ^
            (uint64_t)(db_now() * 1e9) ^ (uint64_t)(uintptr_t)db;
  if (!db->rng) db->rng = 1;
  func_cache_init(&db->funcs, o.func_cache_bytes);
  int flags = o.read_only ? SQLITE_OPEN_READONLY
                          : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  rc = sqlite3_open_v2(path, &db->conn, flags | SQLITE_OPEN_NOMUTEX, NULL);
  if (rc != SQLITE_OK) {
    rc = db_sqlite_fail(db, rc, "opening");
  } else {
    rc = configure(db);
  }
  if (rc != TS_OK) {
    if (err) *err = db->err;
    ts_db_close(db);
    return rc;
  }
  ts_error_clear(&db->err);
  *out = db;
  return TS_OK;
}

void ts_db_close(ts_db *db) {
  if (!db) return;
  for (int i = 0; i < N_STATEMENTS; i++) sqlite3_finalize(db->stmts[i]);
  sqlite3_close(db->conn);
  func_cache_free(&db->funcs);
  target_cache_free(&db->targets);
  free(db->path);
  free(db);
}

const char *ts_db_errmsg(const ts_db *db) { return db->err.msg; }
const ts_error *ts_db_error(const ts_db *db) { return &db->err; }
const char *ts_db_path(const ts_db *db) { return db->path; }

int ts_db_vacuum(ts_db *db) {
  db_begin_call(db);
  return db_exec(db, "VACUUM", "vacuuming");
}

int ts_db_integrity_check(ts_db *db) {
  db_begin_call(db);
  sqlite3_stmt *st;
  int rc =
      sqlite3_prepare_v2(db->conn, "PRAGMA integrity_check(8)", -1, &st, NULL);
  if (rc != SQLITE_OK) return db_sqlite_fail(db, rc, "checking integrity");
  char report[768] = "";
  size_t used = 0;
  bool ok = false;
  while ((rc = db_step(db, st)) == SQLITE_ROW) {
    const char *line = (const char *)sqlite3_column_text(st, 0);
    if (!line) continue;
    if (!strcmp(line, "ok")) ok = true;
    int w = snprintf(report + used, sizeof report - used, "%s%s",
                     used ? "; " : "", line);
    if (w > 0) used += (size_t)w;
    if (used >= sizeof report - 1) used = sizeof report - 1;
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return db_sqlite_fail(db, rc, "checking integrity");
  if (!ok)
    return TS_ERR(&db->err, TS_EINVAL, "%s: integrity check failed: %s",
                  db->path, report);
  return TS_OK;
}
