/*
 * sqlite_backend.c — the SQLite backend: one file, nothing to run. The
 * checks made on a file before SQLite is allowed to write to it (SQLite
 * header, truncation, application id, schema version), the connection
 * settings (WAL journal, busy handler with exponential backoff, foreign
 * keys), the forward migrations keyed by PRAGMA user_version, and the
 * statement calls behind the module's backend table.
 */
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LITE(db) ((sqlite3 *)(db)->conn)

typedef struct lite_q {
  db_q base;
  sqlite3_stmt *st;
} lite_q;

#define ST(q) (((lite_q *)(q))->st)

static int lite_fail(ts_db *db, int rc, const char *what) {
  return db_fail(db, rc, what);
}

static bool is_busy(int rc) {
  return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED;
}

/* SQLite calls this while a lock it needs is held elsewhere: wait with
 * backoff until the busy timeout, then give up (the statement returns
 * SQLITE_BUSY and the caller's retry loop decides). */
static int busy_handler(void *ctx, int count) {
  ts_db *db = ctx;
  if (count == 0) db->busy_started = ts_now_seconds();
  if (db_timed_out(db, db->busy_started)) return 0;
  db_backoff(db, count);
  return 1;
}

/* Steps a statement used once, retried with backoff while busy. */
static int raw_step(ts_db *db, sqlite3_stmt *st) {
  double started = ts_now_seconds();
  for (int attempt = 0;; attempt++) {
    int rc = sqlite3_step(st);
    if (!is_busy(rc) || db_timed_out(db, started)) return rc;
    sqlite3_reset(st);
    db_backoff(db, attempt);
  }
}

/* ---- statements ---- */

static int lite_prepare(ts_db *db, const char *sql, bool keep, db_q **out) {
  *out = NULL;
  sqlite3_stmt *st;
  int rc = sqlite3_prepare_v3(LITE(db), sql, -1,
                              keep ? SQLITE_PREPARE_PERSISTENT : 0, &st, NULL);
  if (rc != SQLITE_OK) return db_fail(db, rc, "preparing a statement");
  lite_q *q = ts_malloc(sizeof *q);
  if (!q) {
    sqlite3_finalize(st);
    return db_nomem(db, "preparing a statement");
  }
  q->base.be = &db_sqlite_backend;
  q->base.db = db;
  q->st = st;
  *out = &q->base;
  return TS_OK;
}

static void lite_finalize(db_q *q) {
  sqlite3_finalize(ST(q));
  free(q);
}

static void lite_reset(db_q *q) {
  sqlite3_reset(ST(q));
  sqlite3_clear_bindings(ST(q));
}

static void lite_bind_int64(db_q *q, int i, int64_t v) {
  sqlite3_bind_int64(ST(q), i, v);
}
static void lite_bind_double(db_q *q, int i, double v) {
  sqlite3_bind_double(ST(q), i, v);
}
static void lite_bind_text(db_q *q, int i, const char *s, int len) {
  sqlite3_bind_text(ST(q), i, s, len, SQLITE_STATIC);
}
static void lite_bind_null(db_q *q, int i) { sqlite3_bind_null(ST(q), i); }

static int lite_step(db_q *q) {
  int rc = sqlite3_step(ST(q));
  /* a statement that stopped busy must be reset before it runs again */
  if (is_busy(rc)) sqlite3_reset(ST(q));
  return rc;
}

static int lite_column_type(db_q *q, int i) {
  return sqlite3_column_type(ST(q), i);
}
static int64_t lite_column_int64(db_q *q, int i) {
  return sqlite3_column_int64(ST(q), i);
}
static double lite_column_double(db_q *q, int i) {
  return sqlite3_column_double(ST(q), i);
}
static const unsigned char *lite_column_text(db_q *q, int i) {
  return sqlite3_column_text(ST(q), i);
}
static int lite_column_bytes(db_q *q, int i) {
  return sqlite3_column_bytes(ST(q), i);
}

static int lite_exec(ts_db *db, const char *sql) {
  return sqlite3_exec(LITE(db), sql, NULL, NULL, NULL);
}
static int lite_begin_write(ts_db *db) {
  return sqlite3_exec(LITE(db), "BEGIN IMMEDIATE", NULL, NULL, NULL);
}
static int lite_begin_read(ts_db *db) {
  return sqlite3_exec(LITE(db), "BEGIN", NULL, NULL, NULL);
}
static int lite_commit(ts_db *db) {
  return sqlite3_exec(LITE(db), "COMMIT", NULL, NULL, NULL);
}
static void lite_rollback(ts_db *db) {
  if (!sqlite3_get_autocommit(LITE(db)))
    sqlite3_exec(LITE(db), "ROLLBACK", NULL, NULL, NULL);
}
static int64_t lite_last_insert_id(ts_db *db) {
  return sqlite3_last_insert_rowid(LITE(db));
}
static int64_t lite_changes(ts_db *db) { return sqlite3_changes64(LITE(db)); }
static const char *lite_errmsg(ts_db *db, int rc) {
  return LITE(db) && sqlite3_extended_errcode(LITE(db)) == rc
             ? sqlite3_errmsg(LITE(db))
             : sqlite3_errstr(rc);
}

static int lite_vacuum(ts_db *db) { return db_exec(db, "VACUUM", "vacuuming"); }

/* The size of the write-ahead log beside path; -1 when there is none. */
static int64_t wal_size(const char *path) {
  char wal[PATH_MAX + 8];
  if (snprintf(wal, sizeof wal, "%s-wal", path) >= (int)sizeof wal) return -1;
  struct stat fs;
  return stat(wal, &fs) == 0 ? (int64_t)fs.st_size : -1;
}

static void lite_sizes(ts_db *db, int64_t *main_bytes, int64_t *log_bytes) {
  struct stat fs;
  *main_bytes = *log_bytes = 0;
  if (stat(db->path, &fs) == 0) *main_bytes = (int64_t)fs.st_size;
  int64_t wal = wal_size(db->path);
  if (wal > 0) *log_bytes = wal;
}

/* ---- checks before SQLite touches the file ---- */

static uint32_t be32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
         p[3];
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
  if (wal_size(path) <= 0) {
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
  int rc = sqlite3_prepare_v2(LITE(db), sql, -1, &st, NULL);
  if (rc != SQLITE_OK) return lite_fail(db, rc, "reading the schema");
  rc = raw_step(db, st);
  if (rc == SQLITE_ROW) *out = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE)
    return lite_fail(db, rc, "reading the schema");
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

/* Runs a migration's statements one at a time. SQLite has no
 * "ADD COLUMN IF NOT EXISTS": such a statement runs without the clause when
 * the column is missing and is skipped when it is there, so a migration
 * that meets its own work (a file whose version was lowered) still passes. */
static int exec_migration(ts_db *db, const char *sql, const char *what) {
  static const char add[] = "ADD COLUMN IF NOT EXISTS ";
  const char *p = sql;
  int rc = TS_OK;
  while (rc == TS_OK && *p) {
    const char *end = strchr(p, ';');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    char *one = ts_strndup(p, len);
    if (!one) return db_nomem(db, what);
    p += len + (end ? 1 : 0);
    char table[64], column[64];
    char *clause = strstr(one, add);
    if (!clause) {
      if (strspn(one, " \t\n") < len) rc = db_exec(db, one, what);
    } else if (sscanf(one, " ALTER TABLE %63s", table) != 1 ||
               sscanf(clause + sizeof add - 1, "%63s", column) != 1) {
      rc = TS_ERR(&db->err, TS_EINVAL, "%s: %s: cannot read '%s'", db->path,
                  what, one);
    } else {
      char check[256];
      snprintf(check, sizeof check,
               "SELECT count(*) FROM pragma_table_info('%s') WHERE name = '%s'",
               table, column);
      sqlite3_stmt *st = NULL;
      int e = sqlite3_prepare_v2(LITE(db), check, -1, &st, NULL);
      if (e == SQLITE_OK) e = sqlite3_step(st);
      bool there = e == SQLITE_ROW && sqlite3_column_int(st, 0) > 0;
      sqlite3_finalize(st);
      if (e != SQLITE_ROW) {
        rc = db_fail(db, e, what);
      } else if (!there) {
        /* drop the clause: "ADD COLUMN " + the rest */
        memmove(clause + strlen("ADD COLUMN "), clause + sizeof add - 1,
                strlen(clause + sizeof add - 1) + 1);
        rc = db_exec(db, one, what);
      }
    }
    free(one);
  }
  return rc;
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
    if ((rc = exec_migration(db, db_migrations[v], what))) return rc;
  }
  if (s.version == TS_DB_SCHEMA_VERSION) return TS_OK;
  char sql[128];
  snprintf(sql, sizeof sql,
           "PRAGMA application_id = %d; PRAGMA user_version = %d",
           DB_APPLICATION_ID, TS_DB_SCHEMA_VERSION);
  return db_exec(db, sql, "setting the schema version");
}

/* Queries read pages through a memory map (no read system call per page
 * of a large file) and keep up to 64 MiB of pages per connection. */
#define READ_PRAGMAS "PRAGMA mmap_size = 1073741824; PRAGMA cache_size = -65536"

static int configure(ts_db *db) {
  int rc;
  sqlite3_extended_result_codes(LITE(db), 1);
  sqlite3_busy_handler(LITE(db), busy_handler, db);
  schema_info s = {0};
  /* One read transaction, so the three figures come from one snapshot (a
   * process creating the schema at the same time commits them together). */
  if ((rc = db_exec(db, "BEGIN", "reading the schema"))) return rc;
  rc = read_schema(db, &s);
  db_exec(db, "COMMIT", "reading the schema");
  if (rc || (rc = check_schema(db, &s))) return rc;
  db->schema_version = s.version;
  if (db->opts.read_only) {
    if (s.version < TS_DB_READ_MIN_VERSION)
      return TS_ERR(&db->err, TS_EINVAL,
                    "%s: %s; migrate it once with `tessera db migrate --db %s`",
                    db->path,
                    s.version == 0 ? "empty database"
                                   : "database of an older schema version",
                    db->path);
    return db_exec(db, "PRAGMA foreign_keys = ON; " READ_PRAGMAS,
                   "configuring");
  }
  /* WAL: readers never wait for the writer and a killed writer leaves no
   * partial transaction. NORMAL sync in WAL keeps every committed
   * transaction across a process crash; a power loss may drop the last few
   * but never corrupts the file. */
  sqlite3_stmt *st;
  rc = sqlite3_prepare_v2(LITE(db), "PRAGMA journal_mode = WAL", -1, &st, NULL);
  if (rc != SQLITE_OK) return lite_fail(db, rc, "enabling WAL");
  rc = raw_step(db, st);
  const unsigned char *mode =
      rc == SQLITE_ROW ? sqlite3_column_text(st, 0) : NULL;
  bool wal = mode && !strcmp((const char *)mode, "wal");
  sqlite3_finalize(st);
  if (rc != SQLITE_ROW) return lite_fail(db, rc, "enabling WAL");
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
  if (s.version < TS_DB_SCHEMA_VERSION &&
      (rc = db_write(db, migrate_body, NULL)))
    return rc;
  db->schema_version = TS_DB_SCHEMA_VERSION;
  return TS_OK;
}

static int lite_connect(ts_db *db) {
  const char *path = db->path;
  const ts_db_options o = db->opts;
  struct stat st;
  bool exists = stat(path, &st) == 0;
  if (exists && !S_ISREG(st.st_mode))
    return TS_ERR(&db->err, TS_EINVAL, "%s: not a tessera database: not a file",
                  path);
  if (!exists && (!o.create || o.read_only))
    return TS_ERR(&db->err, TS_ENOTFOUND, "%s: no such database", path);
  int rc;
  if (exists && st.st_size > 0 &&
      (rc = check_file(path, (int64_t)st.st_size, &db->err)))
    return rc;
  int flags = o.read_only ? SQLITE_OPEN_READONLY
                          : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  sqlite3 *conn = NULL;
  rc = sqlite3_open_v2(path, &conn, flags | SQLITE_OPEN_NOMUTEX, NULL);
  db->conn = conn;
  if (rc != SQLITE_OK) return lite_fail(db, rc, "opening");
  return configure(db);
}

static void lite_close(ts_db *db) {
  sqlite3_close(LITE(db));
  db->conn = NULL;
}

static int lite_integrity_check(ts_db *db) {
  sqlite3_stmt *st;
  int rc =
      sqlite3_prepare_v2(LITE(db), "PRAGMA integrity_check(8)", -1, &st, NULL);
  if (rc != SQLITE_OK) return lite_fail(db, rc, "checking integrity");
  char report[768] = "";
  size_t used = 0;
  bool ok = false;
  while ((rc = raw_step(db, st)) == SQLITE_ROW) {
    const char *line = (const char *)sqlite3_column_text(st, 0);
    if (!line) continue;
    if (!strcmp(line, "ok")) ok = true;
    int w = snprintf(report + used, sizeof report - used, "%s%s",
                     used ? "; " : "", line);
    if (w > 0) used += (size_t)w;
    if (used >= sizeof report - 1) used = sizeof report - 1;
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return lite_fail(db, rc, "checking integrity");
  if (!ok)
    return TS_ERR(&db->err, TS_EINVAL, "%s: integrity check failed: %s",
                  db->path, report);
  return TS_OK;
}

const db_backend db_sqlite_backend = {
    .name = "sqlite",
    .connect = lite_connect,
    .close = lite_close,
    .revive = NULL,
    .prepare = lite_prepare,
    .finalize = lite_finalize,
    .reset = lite_reset,
    .bind_int64 = lite_bind_int64,
    .bind_double = lite_bind_double,
    .bind_text = lite_bind_text,
    .bind_null = lite_bind_null,
    .step = lite_step,
    .column_type = lite_column_type,
    .column_int64 = lite_column_int64,
    .column_double = lite_column_double,
    .column_text = lite_column_text,
    .column_bytes = lite_column_bytes,
    .exec = lite_exec,
    .begin_write = lite_begin_write,
    .begin_read = lite_begin_read,
    .commit = lite_commit,
    .rollback = lite_rollback,
    .last_insert_id = lite_last_insert_id,
    .changes = lite_changes,
    .errmsg = lite_errmsg,
    .vacuum = lite_vacuum,
    .integrity_check = lite_integrity_check,
    .sizes = lite_sizes,
};
