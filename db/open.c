/*
 * open.c — what both backends share: choosing the backend from the --db
 * argument (a file path: SQLite; postgresql:// or postgres://: PostgreSQL),
 * the schema's migrations, and the helpers the rest of the module runs every
 * statement through: cached prepared statements, stepping and write
 * transactions that retry while other writers hold the lock or a
 * transaction conflicts, and error reporting on the handle.
 */
#include "internal.h"

#include "tir/alloc.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- the schema: migrations[v] takes a database from version v to v+1 ---- */

const char *const db_migrations[TS_DB_SCHEMA_VERSION] = {
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
    /* 2 -> 3: confirmed latencies (ts_db_confirm): the top candidates of a
     * workload x target measured again side by side in interleaved rounds.
     * Only the latest confirmation of a workload x target has them set.
     * (SQLite has no ADD COLUMN IF NOT EXISTS: its backend checks first.) */
    "ALTER TABLE records ADD COLUMN IF NOT EXISTS confirmed_s REAL;\n"
    "ALTER TABLE records ADD COLUMN IF NOT EXISTS confirmed_spread REAL;\n"
    "ALTER TABLE records ADD COLUMN IF NOT EXISTS confirmed_rounds INTEGER;\n"
    "ALTER TABLE records ADD COLUMN IF NOT EXISTS confirmed_at TEXT;\n",
    /* 3 -> 4: the measurement context of a record (a JSON object: evaluator
     * settings, threads, timeout, CPU set); NULL for older records. */
    "ALTER TABLE records ADD COLUMN IF NOT EXISTS measure TEXT;\n",
    /* 4 -> 5: a vendor level measured in a confirmation's interleaved
     * rounds, beside the workload's candidates: tessera's confirmed best
     * against it (the median of the rounds' vendor / tessera latency) and
     * the number of rounds; NULL for a level measured on its own. */
    "ALTER TABLE baselines ADD COLUMN IF NOT EXISTS side_ratio REAL;\n"
    "ALTER TABLE baselines ADD COLUMN IF NOT EXISTS side_rounds INTEGER;\n",
    /* 5 -> 6: the best record's rank (RECORD_RANK: confirmed first, then
     * by latency) as an index, so the compile-time query reads one index
     * entry instead of sorting every ok record of the workload x target
     * (on PostgreSQL with 1,000,000 records its median went from 400 to
     * ... us). */
    "CREATE INDEX IF NOT EXISTS records_rank ON records(workload_id, "
    "target_id, (confirmed_s IS NULL), (COALESCE(confirmed_s, median_s)), id) "
    "WHERE status = 'ok';\n",
    /* 6 -> 7: choices measured in a compiled model (choices.c): for a
     * pass's kind of choice (e.g. "winograd") and its subject (e.g. a
     * conv's task hash), the seconds per model run each option took on a
     * target, the median of `samples` timed runs, and when it was
     * measured. Kind, subject and option are at most 256 bytes each. */
    "CREATE TABLE IF NOT EXISTS choices (\n"
    "  id        INTEGER PRIMARY KEY,\n"
    "  target_id INTEGER NOT NULL REFERENCES targets(id),\n"
    "  kind      TEXT NOT NULL,\n"
    "  subject   TEXT NOT NULL,\n"
    "  option    TEXT NOT NULL,\n"
    "  seconds   REAL NOT NULL,\n"
    "  samples   INTEGER NOT NULL,\n"
    "  measured  TEXT NOT NULL,\n"
    "  UNIQUE (target_id, kind, subject, option)\n"
    ");\n",
};

static const char *const statement_sql[N_STATEMENTS] = {
#define DB_STATEMENT_SQL(id, sql) sql,
    DB_STATEMENTS(DB_STATEMENT_SQL)
#undef DB_STATEMENT_SQL
};

/* ---- small helpers ---- */

int db_nomem(ts_db *db, const char *what) {
  db->busy = false;
  return TS_ERR(&db->err, TS_ENOMEM, "%s: %s: out of memory", db->path, what);
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

char *db_column_strdup(db_q *st, int i, bool *oom) {
  const unsigned char *s = db_column_text(st, i);
  if (!s) return NULL;
  char *p = ts_strndup((const char *)s, (size_t)db_column_bytes(st, i));
  if (!p) *oom = true;
  return p;
}

void db_column_copy(db_q *st, int i, char *out, size_t cap) {
  const unsigned char *s = db_column_text(st, i);
  snprintf(out, cap, "%s", s ? (const char *)s : "");
}

void db_begin_call(ts_db *db) {
  ts_error_clear(&db->err);
  db->busy = false;
  if (db->be->revive) db->be->revive(db);
}

static bool is_busy(int rc) {
  return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED;
}

int db_fail(ts_db *db, int rc, const char *what) {
  db->busy = is_busy(rc);
  const char *msg = db->be->errmsg(db, rc);
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
void db_backoff(ts_db *db, int attempt) {
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

bool db_timed_out(const ts_db *db, double started) {
  return (ts_now_seconds() - started) * 1000.0 >= db->opts.busy_timeout_ms;
}

db_q *db_stmt(ts_db *db, db_statement id) {
  db_q *st = db->stmts[id];
  if (st) {
    db_reset(st);
    return st;
  }
  if (db->be->prepare(db, statement_sql[id], true, &st) != TS_OK) return NULL;
  db->stmts[id] = st;
  return st;
}

int db_prepare(ts_db *db, const char *sql, db_q **out) {
  return db->be->prepare(db, sql, false, out);
}

void db_finalize(db_q *q) {
  if (q) q->be->finalize(q);
}

int db_step(ts_db *db, db_q *st) {
  double started = ts_now_seconds();
  for (int attempt = 0;; attempt++) {
    int rc = db->be->step(st);
    /* inside a write a conflict rolls back the whole transaction: db_write
     * retries it */
    if (!is_busy(rc) || (db->in_write && db->be != &db_sqlite_backend) ||
        db_timed_out(db, started))
      return rc;
    db_reset(st);
    db_backoff(db, attempt);
  }
}

int db_exec(ts_db *db, const char *sql, const char *what) {
  double started = ts_now_seconds();
  for (int attempt = 0;; attempt++) {
    int rc = db->be->exec(db, sql);
    if (rc == SQLITE_OK) return TS_OK;
    if (!is_busy(rc) || (db->in_write && db->be != &db_sqlite_backend) ||
        db_timed_out(db, started))
      return db_fail(db, rc, what);
    db_backoff(db, attempt);
  }
}

int db_begin_read(ts_db *db, const char *what) {
  int rc = db->be->begin_read(db);
  return rc == SQLITE_OK ? TS_OK : db_fail(db, rc, what);
}

int db_write(ts_db *db, int (*body)(ts_db *db, void *ctx), void *ctx) {
  double started = ts_now_seconds();
  for (int attempt = 0;; attempt++) {
    db->busy = false;
    int code;
    int rc = db->be->begin_write(db);
    if (rc != SQLITE_OK) {
      code = db_fail(db, rc, "starting a write");
    } else {
      db->in_write = true;
      db->cached_in_write = false;
      unsigned long failures = ts_alloc_failures();
      code = body(db, ctx);
      /* an allocation that failed inside the body may have lost part of
       * the write: nothing is committed */
      code = ts_alloc_check(failures, code, &db->err, "writing");
      if (code == TS_ENOMEM) db->busy = false;
      if (code == TS_OK) {
        rc = db->be->commit(db);
        if (rc == SQLITE_OK) {
          db->in_write = false;
          return TS_OK;
        }
        code = db_fail(db, rc, "committing");
      }
      db->in_write = false;
      db->be->rollback(db);
      /* ids of rows the rollback removed may be handed out again */
      if (db->cached_in_write) {
        func_cache_free(&db->funcs);
        func_cache_init(&db->funcs, db->opts.func_cache_bytes);
      }
    }
    if (!db->busy || db_timed_out(db, started)) return code;
    db_backoff(db, attempt);
  }
}

/* ---- open and close ---- */

ts_db_options ts_db_defaults(void) {
  return (ts_db_options){
      .create = true,
      .busy_timeout_ms = 60000,
      .func_cache_bytes = (size_t)256 << 20,
  };
}

bool ts_db_is_url(const char *s) {
  return s &&
         (!strncmp(s, "postgresql://", 13) || !strncmp(s, "postgres://", 11));
}

char *ts_db_display_name(const char *path_or_url) {
  if (!path_or_url) return NULL;
  return ts_db_is_url(path_or_url) ? db_redact_url(path_or_url)
                                   : ts_strdup(path_or_url);
}

/* The URL as messages show it: the password (user:PASSWORD@) and any
 * password=... parameter replaced by "***". */
char *db_redact_url(const char *url) {
  size_t n = strlen(url);
  char *out = ts_malloc(4 * n + 16);
  if (!out) return NULL;
  const char *scheme = strstr(url, "://");
  size_t auth = scheme ? (size_t)(scheme - url) + 3 : 0;
  size_t end = auth + strcspn(url + auth, "/?#");
  size_t at = 0;
  bool has_at = false;
  for (size_t p = auth; p < end; p++)
    if (url[p] == '@') {
      at = p;
      has_at = true;
    }
  size_t colon = auth;
  while (has_at && colon < at && url[colon] != ':') colon++;
  size_t o = 0, i = 0;
  while (i < n) {
    if (has_at && i == colon && colon < at) {
      memcpy(out + o, ":***", 4);
      o += 4;
      i = at;
      continue;
    }
    if (i > end && (url[i - 1] == '?' || url[i - 1] == '&') &&
        !strncmp(url + i, "password=", 9)) {
      memcpy(out + o, "password=***", 12);
      o += 12;
      i += 9 + strcspn(url + i + 9, "&#");
      continue;
    }
    out[o++] = url[i++];
  }
  out[o] = 0;
  return out;
}

int ts_db_open(const char *path, const ts_db_options *opts, ts_db **out,
               ts_error *err) {
  *out = NULL;
  ts_db_options o = opts ? *opts : ts_db_defaults();
  if (!path || !path[0])
    return TS_ERR(err, TS_EINVAL, "database path is empty");
  if (o.busy_timeout_ms < 0)
    return TS_ERR(err, TS_EINVAL, "busy_timeout_ms is negative");
  ts_db *db = ts_calloc(1, sizeof *db);
  if (!db) return TS_ERR(err, TS_ENOMEM, "opening a database: out of memory");
  bool url = ts_db_is_url(path);
  db->be = url ? &db_pg_backend : &db_sqlite_backend;
  db->path = url ? db_redact_url(path) : ts_strdup(path);
  db->conn_string = ts_strdup(path);
  if (!db->path || !db->conn_string) {
    ts_db_close(db);
    return TS_ERR(err, TS_ENOMEM, "opening a database: out of memory");
  }
  db->opts = o;
  db->rng = (uint64_t)getpid() * 0x9E3779B97F4A7C15ull ^
            (uint64_t)(ts_now_seconds() * 1e9) ^ (uint64_t)(uintptr_t)db;
  if (!db->rng) db->rng = 1;
  func_cache_init(&db->funcs, o.func_cache_bytes);
  int rc = db->be->connect(db);
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
  for (int i = 0; i < N_STATEMENTS; i++) db_finalize(db->stmts[i]);
  db_finalize(db->insert_many);
  db->be->close(db);
  func_cache_free(&db->funcs);
  target_cache_free(&db->targets);
  free(db->path);
  if (db->conn_string) {
    /* it may hold a password */
    memset(db->conn_string, 0, strlen(db->conn_string));
    free(db->conn_string);
  }
  free(db);
}

const char *ts_db_errmsg(const ts_db *db) { return db->err.msg; }
const ts_error *ts_db_error(const ts_db *db) { return &db->err; }
const char *ts_db_path(const ts_db *db) { return db->path; }
const char *ts_db_backend(const ts_db *db) { return db->be->name; }

int ts_db_vacuum(ts_db *db) {
  db_begin_call(db);
  return db->be->vacuum(db);
}

int ts_db_integrity_check(ts_db *db) {
  db_begin_call(db);
  return db->be->integrity_check(db);
}
