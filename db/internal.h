/*
 * internal.h — private to db/: the backend table (SQLite or PostgreSQL),
 * the connection struct, the table of cached prepared statements, the
 * per-connection caches (parsed workload functions, canonical targets), and the
 * helpers every file of the module shares (errors, stepping with retry, write
 * transactions with retry and backoff, times, JSON).
 */
#ifndef TESSERA_DB_INTERNAL_H
#define TESSERA_DB_INTERNAL_H

#include "db/db.h"
#include "tir/alloc.h"

#include <cjson/cJSON.h>
#include <sqlite3.h>

/* PRAGMA application_id of a tessera database: "TSDB". */
#define DB_APPLICATION_ID 0x54534442

/* The columns every record query selects, in the order db_read_record
 * reads them (records r, targets t). */
#define RECORD_FIELDS                                                          \
  "r.id, r.workload_id, r.target_id, t.target, r.trace, r.run_secs, "          \
  "r.median_s, r.status, r.error, r.job_id, r.trial, r.worker, r.version, "    \
  "r.created, r.confirmed_s, r.confirmed_spread, r.confirmed_rounds, "         \
  "r.measure"
/* The ranking of ok records (db.h, "fastest"): the latest confirmation
 * first, by confirmed latency, then search-time medians. */
#define RECORD_RANK(p)                                                         \
  "(" p "confirmed_s IS NULL), COALESCE(" p "confirmed_s, " p "median_s), " p  \
  "id"
#define RECORD_COLUMNS                                                         \
  RECORD_FIELDS " FROM records r JOIN targets t ON t.id = r.target_id"

/* The columns of a baseline query, in the order baselines.c reads them. */
#define BASELINE_COLUMNS                                                       \
  "b.id, b.workload_id, b.target_id, t.target, b.vendor, b.threads, "          \
  "b.gflops, b.created, b.side_ratio, b.side_rounds FROM baselines b JOIN "    \
  "targets t ON t.id = b.target_id"

#define JOB_COLUMNS                                                            \
  "id, name, config, state, started, finished, trials_budget, trials_done "    \
  "FROM jobs"

#define LIST_SQL(records_filter, workloads_filter)                             \
  "SELECT w.id, w.hash, w.name, w.flops, c.target_id, t.target, c.n, c.n_ok, " \
  "(SELECT COALESCE(min(confirmed_s), min(median_s)) FROM records WHERE "      \
  "workload_id = c.workload_id AND target_id = c.target_id AND "               \
  "status = 'ok') FROM (SELECT workload_id, "                                  \
  "target_id, count(*) AS n, sum(CASE WHEN status = 'ok' THEN 1 ELSE 0 END) "  \
  "AS n_ok FROM "                                                              \
  "records " records_filter                                                    \
  " GROUP BY workload_id, target_id) c JOIN workloads w ON "                   \
  "w.id = c.workload_id JOIN targets t ON t.id = c.target_id UNION ALL "       \
  "SELECT w.id, w.hash, w.name, w.flops, NULL, NULL, 0, 0, NULL FROM "         \
  "workloads w WHERE " workloads_filter " NOT EXISTS (SELECT 1 FROM records "  \
  "WHERE workload_id = w.id) ORDER BY 1, 5"

/* Every statement the module runs more than once: prepared on first use,
 * kept for the life of the connection. X(ID, SQL). */
#define DB_STATEMENTS(X)                                                       \
  X(ST_FIND_WORKLOADS, "SELECT id FROM workloads WHERE hash = ?1 ORDER BY id") \
  X(ST_WORKLOAD_TIR, "SELECT tir FROM workloads WHERE id = ?1")                \
  X(ST_GET_WORKLOAD, "SELECT id, hash, name, tir, flops, created "             \
                     "FROM workloads WHERE id = ?1")                           \
  X(ST_INSERT_WORKLOAD, "INSERT INTO workloads(hash, name, tir, flops, "       \
                        "created) VALUES (?1, ?2, ?3, ?4, ?5)")                \
  X(ST_WORKLOADS_BY_PREFIX, "SELECT id, hash FROM workloads WHERE hash >= ?1 " \
                            "AND hash < ?2 ORDER BY id LIMIT 6")               \
  X(ST_WORKLOADS_BY_NAME,                                                      \
    "SELECT id, hash FROM workloads WHERE name = ?1 ORDER BY id LIMIT 6")      \
  X(ST_WORKLOAD_EXISTS, "SELECT 1 FROM workloads WHERE id = ?1")               \
  X(ST_FIND_TARGET, "SELECT id FROM targets WHERE target = ?1")                \
  X(ST_INSERT_TARGET, "INSERT INTO targets(target, probe, probed, created) "   \
                      "VALUES (?1, ?2, ?3, ?4)")                               \
  X(ST_SET_PROBE, "UPDATE targets SET probe = ?2, probed = ?3 WHERE id = ?1")  \
  X(ST_GET_PROBE, "SELECT probe FROM targets WHERE id = ?1")                   \
  X(ST_INSERT_RECORD,                                                          \
    "INSERT INTO records(workload_id, target_id, trace, run_secs, median_s, "  \
    "status, error, job_id, trial, worker, version, created, measure) "        \
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)")         \
  /* A record's identity on import: workload, target, trace and the time       \
   * it was measured (and, to merge only exact copies, its times and           \
   * status). */                                                               \
  X(ST_RECORD_EXISTS,                                                          \
    "SELECT 1 FROM records WHERE workload_id = ?1 AND target_id = ?2 AND "     \
    "created = ?3 AND trace = ?4 AND run_secs = ?5 AND status = ?6 LIMIT 1")   \
  /* ?2 trials at once: the first of them */                                   \
  X(ST_JOB_NEXT_TRIALS, "UPDATE jobs SET trials_done = trials_done + ?2 "      \
                        "WHERE id = ?1 RETURNING trials_done - ?2")            \
  /* the compile-time query in one statement (one read transaction): each      \
   * workload with the hash, with its best ok record on the target */          \
  X(ST_BEST_BY_HASH,                                                           \
    "SELECT w.id, " RECORD_FIELDS " FROM workloads w LEFT JOIN records r "     \
    "ON r.id = (SELECT id FROM records WHERE workload_id = w.id AND "          \
    "target_id = ?2 AND status = 'ok' ORDER BY " RECORD_RANK(                  \
        "") " LIMIT 1) "                                                       \
            "LEFT JOIN targets t ON t.id = r.target_id WHERE w.hash = ?1 "     \
            "ORDER BY w.id")                                                   \
  X(ST_BEST, "SELECT " RECORD_COLUMNS " WHERE r.workload_id = ?1 AND "         \
             "r.target_id = ?2 AND r.status = 'ok' "                           \
             "ORDER BY " RECORD_RANK("r.") " LIMIT ?3")                        \
  X(ST_BEST_SEARCH, "SELECT " RECORD_COLUMNS " WHERE r.workload_id = ?1 AND "  \
                    "r.target_id = ?2 AND r.status = 'ok' "                    \
                    "ORDER BY r.median_s, r.id")                               \
  X(ST_CONFIRM_CLEAR,                                                          \
    "UPDATE records SET confirmed_s = NULL, confirmed_spread = NULL, "         \
    "confirmed_rounds = NULL, confirmed_at = NULL WHERE workload_id = ?1 AND " \
    "target_id = ?2 AND confirmed_s IS NOT NULL")                              \
  X(ST_CONFIRM_SET,                                                            \
    "UPDATE records SET confirmed_s = ?2, confirmed_spread = ?3, "             \
    "confirmed_rounds = ?4, confirmed_at = ?5 WHERE id = ?1 AND "              \
    "workload_id = ?6 AND target_id = ?7 AND status = 'ok'")                   \
  X(ST_RECORDS_OF, "SELECT " RECORD_COLUMNS " WHERE r.workload_id = ?1 AND "   \
                   "r.target_id = ?2 ORDER BY r.id")                           \
  X(ST_RECENT, "SELECT " RECORD_COLUMNS " WHERE r.workload_id = ?1 "           \
               "ORDER BY r.id DESC LIMIT ?2")                                  \
  /* the overview: records grouped by workload x target (counts from the       \
   * covering index, best from the partial one), plus workloads with no        \
   * records; ?1 = 0 for every workload */                                     \
  X(ST_LIST, LIST_SQL("", ""))                                                 \
  X(ST_LIST_ONE, LIST_SQL("WHERE workload_id = ?1", "w.id = ?1 AND"))          \
  X(ST_JOB_INSERT, "INSERT INTO jobs(name, config, state, started, finished, " \
                   "trials_budget, trials_done) "                              \
                   "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")                      \
  X(ST_JOB_BY_NAME, "SELECT " JOB_COLUMNS " WHERE name = ?1")                  \
  X(ST_JOB_BY_ID, "SELECT " JOB_COLUMNS " WHERE id = ?1")                      \
  X(ST_JOBS, "SELECT " JOB_COLUMNS " ORDER BY id")                             \
  X(ST_JOB_RESUME, "UPDATE jobs SET state = 'running', finished = NULL "       \
                   "WHERE id = ?1")                                            \
  X(ST_JOB_FINISH, "UPDATE jobs SET state = ?2, finished = ?3 WHERE id = ?1")  \
  X(ST_JOB_SET_BUDGET, "UPDATE jobs SET trials_budget = ?2 WHERE id = ?1")     \
  X(ST_JOB_COUNT, "SELECT status, count(*) FROM records WHERE job_id = ?1 "    \
                  "GROUP BY status")                                           \
  X(ST_COUNT_BY_STATUS,                                                        \
    "SELECT status, count(*) FROM records GROUP BY status")                    \
  X(ST_JOBS_BY_STATE, "SELECT state, count(*) FROM jobs GROUP BY state")       \
  X(ST_COUNTS, "SELECT (SELECT count(*) FROM workloads), "                     \
               "(SELECT count(*) FROM targets), (SELECT count(*) FROM jobs)")  \
  X(ST_PRUNE_OK,                                                               \
    "DELETE FROM records WHERE id IN (SELECT id FROM (SELECT id, "             \
    "row_number() "                                                            \
    "OVER (PARTITION BY workload_id, target_id ORDER BY " RECORD_RANK(         \
        "") ") AS rn "                                                         \
            "FROM records WHERE status = 'ok') AS ranked WHERE rn > ?1)")      \
  X(ST_PRUNE_FAILED, "DELETE FROM records WHERE status <> 'ok'")               \
  /* chart data: a task's records without traces, in commit order */           \
  X(ST_RECORD_POINTS, "SELECT id, job_id, trial, status, median_s FROM "       \
                      "records WHERE workload_id = ?1 AND target_id = ?2 "     \
                      "ORDER BY id")                                           \
  /* vendor levels (baselines.c); an import keeps the newer of two */          \
  X(ST_BASELINE_PUT,                                                           \
    "INSERT INTO baselines(workload_id, target_id, vendor, threads, gflops, "  \
    "created, side_ratio, side_rounds) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?8, "   \
    "?9) ON CONFLICT(workload_id, target_id, vendor, threads) DO UPDATE SET "  \
    "gflops = excluded.gflops, created = excluded.created, side_ratio = "      \
    "excluded.side_ratio, side_rounds = excluded.side_rounds WHERE ?7 = 0 OR " \
    "excluded.created > baselines.created")                                    \
  X(ST_BASELINE_GET, "SELECT " BASELINE_COLUMNS " WHERE b.workload_id = ?1 "   \
                     "AND b.target_id = ?2 AND b.vendor = ?3 AND "             \
                     "b.threads = ?4")                                         \
  X(ST_BASELINES, "SELECT " BASELINE_COLUMNS " WHERE (?1 = 0 OR "              \
                  "b.workload_id = ?1) AND (?2 = 0 OR b.target_id = ?2) "      \
                  "ORDER BY b.workload_id, b.target_id, b.vendor, b.threads")  \
  /* choices measured in a model (choices.c); an import keeps the one          \
   * measured later */                                                         \
  X(ST_CHOICE_PUT,                                                             \
    "INSERT INTO choices(target_id, kind, subject, option, seconds, samples, " \
    "measured) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT(target_id, "    \
    "kind, subject, option) DO UPDATE SET seconds = excluded.seconds, "        \
    "samples = excluded.samples, measured = excluded.measured WHERE ?8 = 0 "   \
    "OR excluded.measured > choices.measured")                                 \
  X(ST_CHOICE_GET, "SELECT seconds, samples FROM choices WHERE target_id = "   \
                   "?1 AND kind = ?2 AND subject = ?3 AND option = ?4")

typedef enum db_statement {
#define DB_STATEMENT_ENUM(id, sql) id,
  DB_STATEMENTS(DB_STATEMENT_ENUM)
#undef DB_STATEMENT_ENUM
      N_STATEMENTS
} db_statement;

/* ---- caches (cache.c) ---- */

typedef struct func_entry func_entry;

/* Parsed workload functions by workload id, least recently used evicted
 * first once their arenas exceed the byte budget. */
typedef struct func_cache {
  func_entry **buckets; /* chained by workload id */
  size_t n_buckets, size;
  func_entry *newest, *oldest; /* recency list */
  size_t bytes, budget;
} func_cache;

/* Target strings as given -> canonical string and id (0 while the target is
 * not known to be stored). A few entries: callers use one or two targets. */
#define TARGET_CACHE_SIZE 16
typedef struct target_entry {
  char *given;
  char *canonical;
  int64_t id;
} target_entry;
typedef struct target_cache {
  target_entry items[TARGET_CACHE_SIZE];
  int next; /* replaced next when full */
} target_cache;

/* ---- backends ---- */

/* A prepared statement of either backend. Results and errors use SQLite's
 * codes on both: SQLITE_ROW, SQLITE_DONE, SQLITE_NULL, SQLITE_BUSY (a
 * conflict worth retrying), SQLITE_CONSTRAINT, SQLITE_IOERR (connection
 * lost), SQLITE_ERROR. */
typedef struct db_q db_q;

/* What a backend provides (sqlite_backend.c, pg_backend.c). Statement SQL
 * is written once in SQLite's dialect with ?N placeholders; a backend
 * translates what it must. */
typedef struct db_backend {
  const char *name;
  /* connects db->conn_string, checks and migrates the schema */
  int (*connect)(ts_db *db);
  void (*close)(ts_db *db);
  /* a connection that dropped is re-established here (NULL: never) */
  void (*revive)(ts_db *db);
  int (*prepare)(ts_db *db, const char *sql, bool keep, db_q **out);
  void (*finalize)(db_q *q);
  void (*reset)(db_q *q); /* also clears the bindings */
  void (*bind_int64)(db_q *q, int i, int64_t v);
  void (*bind_double)(db_q *q, int i, double v);
  void (*bind_text)(db_q *q, int i, const char *s, int len);
  void (*bind_null)(db_q *q, int i);
  int (*step)(db_q *q);
  int (*column_type)(db_q *q, int i);
  int64_t (*column_int64)(db_q *q, int i);
  double (*column_double)(db_q *q, int i);
  const unsigned char *(*column_text)(db_q *q, int i);
  int (*column_bytes)(db_q *q, int i);
  /* SQL without results; returns a code as step does */
  int (*exec)(ts_db *db, const char *sql);
  int (*begin_write)(ts_db *db);
  int (*begin_read)(ts_db *db); /* one consistent snapshot */
  int (*commit)(ts_db *db);
  void (*rollback)(ts_db *db); /* when a transaction is open */
  int64_t (*last_insert_id)(ts_db *db);
  int64_t (*changes)(ts_db *db);
  /* the backend's message for the last failure with code rc */
  const char *(*errmsg)(ts_db *db, int rc);
  int (*vacuum)(ts_db *db);
  int (*integrity_check)(ts_db *db);
  /* storage used: the main file (or database) and its log */
  void (*sizes)(ts_db *db, int64_t *main_bytes, int64_t *log_bytes);
} db_backend;

extern const db_backend db_sqlite_backend;
extern const db_backend db_pg_backend;

/* Every statement starts with this header. */
struct db_q {
  const db_backend *be;
  ts_db *db;
};

/* ---- the connection ---- */

struct ts_db {
  const db_backend *be;
  void *conn;        /* sqlite3 * or PGconn * */
  char *path;        /* the file, or the server URL without its password: every
                        message names it */
  char *conn_string; /* what the backend connects with (may hold a
                        password; never printed) */
  ts_db_options opts;
  ts_error err;           /* the last failure */
  bool busy;              /* the last failure was busy/locked/a conflict */
  bool in_write;          /* inside db_write */
  bool cached_in_write;   /* the function cache took entries inside the
                             current write (dropped if it rolls back) */
  double busy_started;    /* when the current lock wait began (seconds) */
  uint64_t rng;           /* backoff jitter */
  int64_t schema_version; /* of the database as opened; TS_DB_SCHEMA_VERSION
                             once migrated (a read-only open may be older) */
  db_q *stmts[N_STATEMENTS];
  db_q *insert_many;   /* a multi-row record INSERT (servers) */
  void *backend_state; /* the backend's own per-connection data */
  func_cache funcs;
  target_cache targets;
};

/* Statement calls, dispatched to the statement's backend. */
static inline void db_reset(db_q *q) { q->be->reset(q); }
static inline void db_bind_int64(db_q *q, int i, int64_t v) {
  q->be->bind_int64(q, i, v);
}
static inline void db_bind_int(db_q *q, int i, int v) {
  q->be->bind_int64(q, i, v);
}
static inline void db_bind_double(db_q *q, int i, double v) {
  q->be->bind_double(q, i, v);
}
/* The text is borrowed until the statement runs (len -1: up to the NUL). */
static inline void db_bind_text(db_q *q, int i, const char *s, int len) {
  q->be->bind_text(q, i, s, len);
}
static inline void db_bind_null(db_q *q, int i) { q->be->bind_null(q, i); }
static inline int db_column_type(db_q *q, int i) {
  return q->be->column_type(q, i);
}
static inline int64_t db_column_int64(db_q *q, int i) {
  return q->be->column_int64(q, i);
}
static inline int db_column_int(db_q *q, int i) {
  return (int)q->be->column_int64(q, i);
}
static inline double db_column_double(db_q *q, int i) {
  return q->be->column_double(q, i);
}
static inline const unsigned char *db_column_text(db_q *q, int i) {
  return q->be->column_text(q, i);
}
static inline int db_column_bytes(db_q *q, int i) {
  return q->be->column_bytes(q, i);
}
static inline int64_t db_last_insert_id(ts_db *db) {
  return db->be->last_insert_id(db);
}
static inline int64_t db_changes(ts_db *db) { return db->be->changes(db); }
/* A statement used once (db_finalize afterwards); TS code. */
int db_prepare(ts_db *db, const char *sql, db_q **out);
void db_finalize(db_q *q);
/* Starts a read transaction: one consistent snapshot until db_exec
 * "COMMIT". */
int db_begin_read(ts_db *db, const char *what);

/* The schema: migrations[v] takes a database from version v to v+1, in
 * SQLite's dialect (pg_backend.c translates the types). */
extern const char *const db_migrations[TS_DB_SCHEMA_VERSION];

/* The server URL as messages show it (password replaced by "***");
 * malloc'd, NULL when out of memory. */
char *db_redact_url(const char *url);

/* pg_backend.c: creates (create) or drops (with its tables) a schema on the
 * server at url; a scratch place for the benchmark. TS code, err filled. */
int db_pg_schema(const char *url, const char *schema, bool create,
                 ts_error *err);
/* url with options=-csearch_path=schema added (malloc'd): a connection that
 * works in that schema. */
char *db_pg_schema_url(const char *url, const char *schema);

/* Sleeps between attempts: exponential backoff with jitter. */
void db_backoff(ts_db *db, int attempt);
bool db_timed_out(const ts_db *db, double started);

/* ---- open.c: errors, statements, stepping, transactions ---- */

/* Records a failure (rc) on db as "PATH: WHAT: backend message" and
 * returns the TS code (TS_EIO; TS_EINVAL for a corrupt file or a broken
 * constraint; TS_ENOMEM). */
int db_fail(ts_db *db, int rc, const char *what);
/* The cached statement `id`, reset and with bindings cleared; NULL with the
 * error on db if it cannot be prepared. */
db_q *db_stmt(ts_db *db, db_statement id);
/* Steps a statement, retried with backoff while the database is busy
 * (before the first row). Returns the SQLite-style code. */
int db_step(ts_db *db, db_q *st);
/* Runs one SQL text without results (not cached: schema changes, PRAGMAs,
 * transaction control), retrying while busy. Returns a TS code. */
int db_exec(ts_db *db, const char *sql, const char *what);
/* Runs body(db, ctx) inside one write transaction (SQLite: BEGIN IMMEDIATE;
 * PostgreSQL: BEGIN and the database's writer lock). On failure the
 * transaction is rolled back; when the failure was a busy database and the
 * busy timeout has not run out, waits (exponential backoff with jitter) and
 * runs body again, so body must not keep state across attempts other than
 * through ctx fields it resets itself. Returns body's TS code (TS_ENOMEM,
 * and nothing committed, when one of the module's allocations failed inside
 * body even if body returned TS_OK). */
int db_write(ts_db *db, int (*body)(ts_db *db, void *ctx), void *ctx);
/* Clears the error on db at the start of a public call. */
void db_begin_call(ts_db *db);
/* The current UTC time as "YYYY-MM-DDTHH:MM:SS.mmmZ". */
void db_timestamp(char out[32]);
/* A malloc'd copy of column i: NULL for SQL NULL, and NULL with *oom set
 * when out of memory (a reader reading several columns checks once). */
char *db_column_strdup(db_q *st, int i, bool *oom);
/* Copies column i into a fixed buffer ("" for NULL), truncating. */
void db_column_copy(db_q *st, int i, char *out, size_t cap);
/* Records "PATH: WHAT: out of memory" on db; returns TS_ENOMEM. The module
 * allocates through tir/alloc.h, so every failure is also counted in
 * ts_alloc_failures: db_write commits nothing when an allocation failed in
 * its body, whatever the body returned. */
int db_nomem(ts_db *db, const char *what);

/* ---- cache.c ---- */

void func_cache_init(func_cache *c, size_t budget);
void func_cache_free(func_cache *c);
/* The cached function of workload id, or NULL; marks it most recent. */
const ts_func *func_cache_get(func_cache *c, int64_t id);
/* The structural key of the cached function of workload id (owned by the
 * cache, valid until the entry is evicted), or NULL. */
const uint8_t *func_cache_key(func_cache *c, int64_t id, size_t *len);
/* Takes ownership of f; evicts the oldest entries beyond the budget (the new
 * entry always stays). NULL (f freed) when out of memory. */
const ts_func *func_cache_put(func_cache *c, int64_t id, ts_func *f);

void target_cache_free(target_cache *c);
target_entry *target_cache_find(target_cache *c, const char *given);
/* NULL when out of memory. */
target_entry *target_cache_add(target_cache *c, const char *given,
                               const char *canonical);

/* ---- workloads.c ---- */

/* The parsed function of workload id from the connection's cache (parsing
 * the stored text on a miss); NULL with the error on db. Owned by the
 * cache: valid until the next call on db. */
const ts_func *db_workload_func_cached(ts_db *db, int64_t id);
/* The id of the target (given string canonicalized); with `create`, stores
 * it when absent (call inside db_write). TS_ENOTFOUND when absent and not
 * created. */
int db_target_id(ts_db *db, const char *target, bool create, int64_t *id);
/* Inserts a workload row (inside db_write) with explicit fields. */
int db_insert_workload(ts_db *db, const char *hash, const char *name,
                       const char *tir, double flops, const char *created,
                       int64_t *id);
/* Inside db_write: the id of a stored workload equal to f with hash `hex`,
 * or 0. */
int db_match_workload(ts_db *db, const ts_func *f, const char *hex,
                      int64_t *id);

/* ---- records.c ---- */

/* Reads the RECORD_FIELDS of a row, starting at column `first`, into *r. */
int db_read_record(ts_db *db, db_q *st, int first, ts_db_record *r);
/* Checks a run-seconds list and renders it as a JSON array (malloc'd). */
char *db_run_secs_json(const double *secs, int n);

/* ---- baselines.c ---- */

/* Checks a baseline's vendor, thread count and level; TS_EINVAL naming the
 * bad one (prefixed with `where`) on err. */
int db_check_baseline(const char *vendor, int64_t threads, double gflops,
                      const char *where, ts_error *err);
/* Checks a side-by-side ratio and its round count; TS_EINVAL naming the bad
 * one (prefixed with `where`). */
int db_check_side(double side_ratio, int64_t side_rounds, const char *where,
                  ts_error *err);
/* Binds ?8 and ?9 of ST_BASELINE_PUT: the ratio and rounds, NULL when
 * side_rounds is 0. */
void db_bind_side(db_q *st, double side_ratio, int side_rounds);

/* ---- choices.c ---- */

/* The schema version that added the choices table. */
#define DB_CHOICES_VERSION 7
/* Checks a choice's kind, subject, option, seconds and samples; TS_EINVAL
 * naming the bad one (prefixed with `where`) on err. */
int db_check_choice(const char *kind, const char *subject, const char *option,
                    double seconds, int64_t samples, const char *where,
                    ts_error *err);

/* ---- jobs.c ---- */

int db_read_job(ts_db *db, db_q *st, ts_db_job *j);

/* ---- json.c ---- */

/* Parses exactly one JSON value spanning text[0..len) (whitespace around
 * allowed) into *out; text[len] must be readable (the NUL of a C string).
 * Returns TS_OK; TS_EINVAL for a syntax error, with *error_offset (may be
 * NULL) the byte offset where parsing stopped; TS_ENOMEM when an
 * allocation failed (cJSON allocates through ts_malloc). *out is NULL on
 * failure. No message is set. */
int db_json_parse(const char *text, size_t len, cJSON **out,
                  size_t *error_offset);
/* Whether text is one JSON object; else TS_EINVAL with err naming `what`
 * and the byte offset (TS_ENOMEM when out of memory). */
int db_check_json_object(const char *text, const char *what, ts_error *err);
/* Adds text (valid JSON) under key: as the JSON value itself when its compact
 * printing is exactly text, else as a string holding text, so an import
 * restores the stored bytes either way. Out of memory leaves the key out
 * (counted in ts_alloc_failures, which the exporter checks per line). */
void db_json_add_stored(cJSON *obj, const char *key, const char *text);
/* The inverse: the text to store for a value read by import (a string's
 * contents, else the compact printing). malloc'd; NULL when out of
 * memory. */
char *db_json_stored_text(const cJSON *v);

#endif /* TESSERA_DB_INTERNAL_H */
