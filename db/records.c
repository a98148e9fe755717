/*
 * records.c — tuning records: checking and committing measurements (many in
 * one transaction, each record of a job numbered with the job's next trial
 * index), the queries over them (best, top-k, the compile-time
 * best-by-PrimFunc, every record of a workload on a target, the newest
 * records), the workload × target overview, pruning, and statistics.
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const status_names[TS_DB_N_STATUS] = {
    "ok", "build_error", "run_error", "timeout", "wrong_result", "worker_lost",
};

const char *ts_db_status_name(ts_db_status s) {
  return (unsigned)s < TS_DB_N_STATUS ? status_names[s] : NULL;
}

int ts_db_status_parse(const char *name, ts_db_status *out) {
  for (int i = 0; name && i < TS_DB_N_STATUS; i++)
    if (!strcmp(name, status_names[i])) {
      *out = (ts_db_status)i;
      return TS_OK;
    }
  return TS_EINVAL;
}

void ts_db_record_clear(ts_db_record *r) {
  if (!r) return;
  free(r->target);
  free(r->trace_json);
  free(r->run_secs);
  free(r->error);
  free(r->worker);
  free(r->version);
  free(r->measure_json);
  memset(r, 0, sizeof *r);
}

void ts_db_records_free(ts_db_record *records, int n) {
  if (!records) return;
  for (int i = 0; i < n; i++) ts_db_record_clear(&records[i]);
  free(records);
}

/* %.15g when that reads back as v, else %.17g: the digits cJSON prints, so
 * export can nest the stored array as is. */
static void format_double(char out[32], double v) {
  snprintf(out, 32, "%.15g", v);
  if (strtod(out, NULL) != v) snprintf(out, 32, "%.17g", v);
}

char *db_run_secs_json(const double *secs, int n) {
  char *out = ts_malloc((size_t)n * 26 + 3), *o = out;
  if (!out) return NULL;
  *o++ = '[';
  for (int i = 0; i < n; i++) {
    char num[32];
    format_double(num, secs[i]);
    o += sprintf(o, "%s%s", i ? "," : "", num);
  }
  *o++ = ']';
  *o = 0;
  return out;
}

/* ---- reading ---- */

/* Reads a run-seconds array as the module writes it ("[1.5e-05,2e-05]"),
 * falling back to a JSON parser for anything else. */
static int parse_run_secs(ts_db *db, const char *text, ts_db_record *r) {
  r->run_secs = NULL;
  r->n_run_secs = 0;
  if (!text) text = "[]";
  int cap = 1;
  for (const char *p = text; *p; p++) cap += *p == ',';
  r->run_secs = ts_malloc(sizeof *r->run_secs * (size_t)cap);
  if (!r->run_secs) return db_nomem(db, "reading a record");
  const char *p = text;
  bool ok = *p++ == '[';
  if (ok && *p == ']') {
    p++;
  } else {
    while (ok) {
      char *end;
      double v = strtod(p, &end);
      ok = end != p && r->n_run_secs < cap;
      if (!ok) break;
      r->run_secs[r->n_run_secs++] = v;
      p = end;
      if (*p == ']') {
        p++;
        break;
      }
      ok = *p++ == ',';
    }
  }
  if (ok && *p == 0) return TS_OK;
  /* not the compact form: read it as JSON */
  r->n_run_secs = 0;
  cJSON *a;
  if (db_json_parse(text, strlen(text), &a, NULL) == TS_ENOMEM)
    return db_nomem(db, "reading a record");
  bool numbers = cJSON_IsArray(a) && cJSON_GetArraySize(a) <= cap;
  const cJSON *x;
  cJSON_ArrayForEach(x, a) {
    if (!numbers || !cJSON_IsNumber(x)) {
      numbers = false;
      break;
    }
    r->run_secs[r->n_run_secs++] = x->valuedouble;
  }
  cJSON_Delete(a);
  if (!numbers)
    return TS_ERR(&db->err, TS_EINVAL,
                  "%s: record %lld: run_secs is not a JSON array of numbers",
                  db->path, (long long)r->id);
  return TS_OK;
}

int db_read_record(ts_db *db, db_q *st, int first, ts_db_record *r) {
  memset(r, 0, sizeof *r);
  int c = first;
  bool oom = false;
  r->id = db_column_int64(st, c);
  r->workload_id = db_column_int64(st, c + 1);
  r->target_id = db_column_int64(st, c + 2);
  r->target = db_column_strdup(st, c + 3, &oom);
  r->trace_json = db_column_strdup(st, c + 4, &oom);
  r->median_s = db_column_type(st, c + 6) == SQLITE_NULL
                    ? NAN
                    : db_column_double(st, c + 6);
  const char *status = (const char *)db_column_text(st, c + 7);
  int rc = TS_OK;
  if (ts_db_status_parse(status, &r->status) != TS_OK)
    rc = TS_ERR(&db->err, TS_EINVAL, "%s: record %lld has unknown status '%s'",
                db->path, (long long)r->id, status ? status : "(null)");
  r->error = db_column_strdup(st, c + 8, &oom);
  r->job_id = db_column_int64(st, c + 9);
  r->trial = db_column_type(st, c + 10) == SQLITE_NULL
                 ? -1
                 : db_column_int64(st, c + 10);
  r->worker = db_column_strdup(st, c + 11, &oom);
  r->version = db_column_strdup(st, c + 12, &oom);
  db_column_copy(st, c + 13, r->created, sizeof r->created);
  r->confirmed_s = db_column_type(st, c + 14) == SQLITE_NULL
                       ? NAN
                       : db_column_double(st, c + 14);
  r->confirmed_spread = db_column_type(st, c + 15) == SQLITE_NULL
                            ? NAN
                            : db_column_double(st, c + 15);
  r->confirmed_rounds = db_column_type(st, c + 16) == SQLITE_NULL
                            ? 0
                            : (int)db_column_int64(st, c + 16);
  r->measure_json = db_column_strdup(st, c + 17, &oom);
  if (rc == TS_OK && oom) rc = db_nomem(db, "reading a record");
  if (rc == TS_OK)
    rc = parse_run_secs(db, (const char *)db_column_text(st, c + 5), r);
  if (rc) ts_db_record_clear(r);
  return rc;
}

/* Steps st and collects every row; *out NULL when there are none. */
static int collect_records(ts_db *db, db_q *st, ts_db_record **out, int *n) {
  *out = NULL;
  *n = 0;
  int cap = 0, rc;
  while ((rc = db_step(db, st)) == SQLITE_ROW) {
    if (*n == cap) {
      cap = cap ? cap * 2 : 16;
      ts_db_record *grown = ts_realloc(*out, sizeof **out * (size_t)cap);
      if (!grown) {
        db_reset(st);
        ts_db_records_free(*out, *n);
        *out = NULL;
        *n = 0;
        return db_nomem(db, "reading records");
      }
      *out = grown;
    }
    int code = db_read_record(db, st, 0, &(*out)[*n]);
    if (code) {
      db_reset(st);
      ts_db_records_free(*out, *n);
      *out = NULL;
      *n = 0;
      return code;
    }
    (*n)++;
  }
  db_reset(st);
  if (rc != SQLITE_DONE) {
    ts_db_records_free(*out, *n);
    *out = NULL;
    *n = 0;
    return db_fail(db, rc, "reading records");
  }
  return TS_OK;
}

/* ---- committing ---- */

/* Checks what can be checked without the database; fills the run-time
 * JSON and median. */
static int check_measurement(ts_db *db, int i, const ts_db_measurement *m,
                             char **run_json, double *median) {
  if (m->workload_id <= 0)
    return TS_ERR(&db->err, TS_EINVAL, "record %d: no workload id", i);
  if ((unsigned)m->status >= TS_DB_N_STATUS)
    return TS_ERR(&db->err, TS_EINVAL, "record %d: bad status %d", i,
                  (int)m->status);
  if (m->n_run_secs < 0 || (m->n_run_secs > 0 && !m->run_secs))
    return TS_ERR(&db->err, TS_EINVAL, "record %d: bad run-seconds list", i);
  if (m->status == TS_DB_STATUS_OK && m->n_run_secs == 0)
    return TS_ERR(&db->err, TS_EINVAL,
                  "record %d: an ok record needs at least one run time", i);
  for (int k = 0; k < m->n_run_secs; k++) {
    double s = m->run_secs[k];
    if (!isfinite(s) || s < 0 || (m->status == TS_DB_STATUS_OK && s <= 0))
      return TS_ERR(&db->err, TS_EINVAL,
                    "record %d: run time %d is %g seconds (must be finite "
                    "and %s)",
                    i, k, s,
                    m->status == TS_DB_STATUS_OK ? "positive" : ">= 0");
  }
  if (m->job_id < 0)
    return TS_ERR(&db->err, TS_EINVAL, "record %d: bad job id", i);
  if (!m->target || !m->target[0])
    return TS_ERR(&db->err, TS_EINVAL, "record %d: no target", i);
  /* parse the target now (and cache it) rather than under the write lock */
  char *canonical = ts_db_canonical_target(db, m->target);
  if (!canonical) {
    ts_error e = db->err;
    return TS_ERR(&db->err, e.code == TS_ENOMEM ? TS_ENOMEM : TS_EINVAL,
                  "record %d: %s", i, e.msg);
  }
  free(canonical);
  if (!m->trace_json)
    return TS_ERR(&db->err, TS_EINVAL, "record %d: no trace", i);
  ts_db_trace_check_fn check =
      db->opts.check_trace ? db->opts.check_trace : ts_db_check_trace_json;
  ts_error terr;
  ts_error_clear(&terr);
  int rc =
      check(db->opts.trace_ctx, m->trace_json, strlen(m->trace_json), &terr);
  if (rc != TS_OK)
    return TS_ERR(&db->err, rc < 0 ? rc : TS_EINVAL, "record %d: %s", i,
                  terr.msg[0] ? terr.msg : "the trace check failed");
  if (m->measure_json &&
      (rc = db_check_json_object(m->measure_json, "measure_json", &terr)))
    return TS_ERR(&db->err, rc, "record %d: %s", i, terr.msg);
  *run_json = db_run_secs_json(m->run_secs, m->n_run_secs);
  if (!*run_json) return db_nomem(db, "storing a record");
  *median = ts_median(m->run_secs, m->n_run_secs);
  return TS_OK;
}

typedef struct commit_ctx {
  const ts_db_measurement *m;
  int n;
  char **run_json;
  double *median;
  int64_t *ids;
  int64_t *target_ids, *trials; /* per record, filled inside the write */
  char now[32];
} commit_ctx;

static int exists(ts_db *db, db_statement which, int64_t id, bool *found) {
  db_q *st = db_stmt(db, which);
  if (!st) return db->err.code;
  db_bind_int64(st, 1, id);
  int rc = db_step(db, st);
  db_reset(st);
  *found = rc == SQLITE_ROW;
  if (rc != SQLITE_ROW && rc != SQLITE_DONE)
    return db_fail(db, rc, "checking a record");
  return TS_OK;
}

/* Binds record i's RECORD_PARAMS insert parameters from parameter `first`
 * on. */
static void bind_record(db_q *st, int first, const commit_ctx *c, int i,
                        int64_t target_id, int64_t trial) {
  const ts_db_measurement *m = &c->m[i];
  int k = first - 1;
  db_bind_int64(st, k + 1, m->workload_id);
  db_bind_int64(st, k + 2, target_id);
  db_bind_text(st, k + 3, m->trace_json, -1);
  db_bind_text(st, k + 4, c->run_json[i], -1);
  if (isnan(c->median[i]))
    db_bind_null(st, k + 5);
  else
    db_bind_double(st, k + 5, c->median[i]);
  db_bind_text(st, k + 6, status_names[m->status], -1);
  db_bind_text(st, k + 7, m->error ? m->error : "", -1);
  if (m->job_id) {
    db_bind_int64(st, k + 8, m->job_id);
    db_bind_int64(st, k + 9, trial);
  } else {
    db_bind_null(st, k + 8);
    db_bind_null(st, k + 9);
  }
  db_bind_text(st, k + 10, m->worker ? m->worker : "", -1);
  db_bind_text(st, k + 11, TS_VERSION, -1);
  db_bind_text(st, k + 12, c->now, -1);
  if (m->measure_json)
    db_bind_text(st, k + 13, m->measure_json, -1);
  else
    db_bind_null(st, k + 13);
}

/* Rows per multi-row INSERT on a server (one round trip each). */
#define INSERT_ROWS 100
/* Parameters of one record's INSERT (ST_INSERT_RECORD). */
#define RECORD_PARAMS 13

/* The SQL of an INSERT of `rows` records returning their ids in order. */
static char *insert_many_sql(int rows) {
  static const char head[] =
      "INSERT INTO records(workload_id, target_id, trace, run_secs, "
      "median_s, status, error, job_id, trial, worker, version, created, "
      "measure) VALUES ";
  size_t cap = sizeof head + (size_t)rows * RECORD_PARAMS * 8 + 32;
  char *sql = ts_malloc(cap);
  if (!sql) return NULL;
  size_t o = (size_t)snprintf(sql, cap, "%s", head);
  for (int r = 0; r < rows; r++) {
    o += (size_t)snprintf(sql + o, cap - o, "%s(", r ? ", " : "");
    for (int k = 1; k <= RECORD_PARAMS; k++)
      o += (size_t)snprintf(sql + o, cap - o, "?%d%s", r * RECORD_PARAMS + k,
                            k < RECORD_PARAMS ? "," : ")");
  }
  snprintf(sql + o, cap - o, " RETURNING id");
  return sql;
}

/* Records [from, from + rows) in one statement (a server: one round trip
 * instead of one per record). */
static int insert_many(ts_db *db, commit_ctx *c, int from, int rows,
                       const int64_t *target_ids, const int64_t *trials) {
  db_q *st;
  bool cached = rows == INSERT_ROWS && db->insert_many;
  if (cached) {
    st = db->insert_many;
    db_reset(st);
  } else {
    char *sql = insert_many_sql(rows);
    if (!sql) return SQLITE_NOMEM;
    int rc = rows == INSERT_ROWS ? db->be->prepare(db, sql, true, &st)
                                 : db_prepare(db, sql, &st);
    free(sql);
    if (rc) return rc;
    if (rows == INSERT_ROWS) {
      db->insert_many = st;
      cached = true;
    }
  }
  for (int r = 0; r < rows; r++)
    bind_record(st, r * RECORD_PARAMS + 1, c, from + r, target_ids[from + r],
                trials[from + r]);
  int rc, got = 0;
  while ((rc = db_step(db, st)) == SQLITE_ROW && got < rows)
    c->ids[from + got++] = db_column_int64(st, 0);
  if (cached)
    db_reset(st);
  else
    db_finalize(st);
  if (rc != SQLITE_DONE) return rc;
  if (got != rows) return SQLITE_ERROR;
  return SQLITE_DONE;
}

/* After a failed insert: a record naming a missing workload (a server
 * reports the foreign key, "Key (workload_id)=(N) is not present") is
 * named as the check before the write names it on SQLite. */
static int insert_failed(ts_db *db, commit_ctx *c, int rc) {
  const char *msg = db->be->errmsg(db, rc);
  const char *key = (rc & 0xff) == SQLITE_CONSTRAINT && msg
                        ? strstr(msg, "Key (workload_id)=(")
                        : NULL;
  if (key) {
    long long id = strtoll(key + 19, NULL, 10);
    for (int i = 0; i < c->n; i++)
      if (c->m[i].workload_id == id)
        return TS_ERR(&db->err, TS_EINVAL,
                      "record %d: no workload with id %lld", i, id);
  }
  return db_fail(db, rc, "storing a record");
}

static int commit_body(ts_db *db, void *p) {
  commit_ctx *c = p;
  int rc;
  /* every workload exists (checked once per run of equal ids; a server
   * checks with the foreign key as it inserts, see insert_failed) */
  for (int i = 0; i < c->n && db->be == &db_sqlite_backend; i++) {
    const ts_db_measurement *m = &c->m[i];
    if (i && c->m[i - 1].workload_id == m->workload_id) continue;
    bool found = false;
    if ((rc = exists(db, ST_WORKLOAD_EXISTS, m->workload_id, &found)))
      return rc;
    if (!found)
      return TS_ERR(&db->err, TS_EINVAL, "record %d: no workload with id %lld",
                    i, (long long)m->workload_id);
  }
  for (int i = 0; i < c->n; i++)
    if ((rc = db_target_id(db, c->m[i].target, true, &c->target_ids[i])))
      return rc;
  /* trial indexes: one counter update per job of the batch, then the
   * batch's records of that job numbered in order */
  for (int i = 0; i < c->n; i++) c->trials[i] = -1;
  for (int i = 0; i < c->n; i++) {
    int64_t job = c->m[i].job_id;
    if (!job || c->trials[i] >= 0) continue;
    int64_t count = 0;
    for (int k = i; k < c->n; k++) count += c->m[k].job_id == job;
    db_q *st = db_stmt(db, ST_JOB_NEXT_TRIALS);
    if (!st) return db->err.code;
    db_bind_int64(st, 1, job);
    db_bind_int64(st, 2, count);
    rc = db_step(db, st);
    int64_t first = rc == SQLITE_ROW ? db_column_int64(st, 0) : 0;
    db_reset(st);
    if (rc == SQLITE_DONE)
      return TS_ERR(&db->err, TS_EINVAL, "record %d: no job with id %lld", i,
                    (long long)job);
    if (rc != SQLITE_ROW) return db_fail(db, rc, "numbering a trial");
    for (int k = i; k < c->n; k++)
      if (c->m[k].job_id == job) c->trials[k] = first++;
  }
  int i = 0;
  if (db->be != &db_sqlite_backend) {
    /* a server: many records per statement */
    while (c->n - i >= 8) {
      int rows = c->n - i >= INSERT_ROWS ? INSERT_ROWS : c->n - i;
      rc = insert_many(db, c, i, rows, c->target_ids, c->trials);
      if (rc != SQLITE_DONE) return insert_failed(db, c, rc);
      i += rows;
    }
  }
  for (; i < c->n; i++) {
    db_q *st = db_stmt(db, ST_INSERT_RECORD);
    if (!st) return db->err.code;
    bind_record(st, 1, c, i, c->target_ids[i], c->trials[i]);
    rc = db_step(db, st);
    db_reset(st);
    if (rc != SQLITE_DONE) return insert_failed(db, c, rc);
    c->ids[i] = db_last_insert_id(db);
  }
  return TS_OK;
}

int ts_db_commit_records(ts_db *db, const ts_db_measurement *m, int n,
                         int64_t *ids) {
  db_begin_call(db);
  if (n < 0 || (n > 0 && !m))
    return TS_ERR(&db->err, TS_EINVAL, "commit_records: bad record list");
  if (n == 0) return TS_OK;
  commit_ctx c = {m, n, NULL, NULL, NULL, NULL, NULL, ""};
  c.run_json = ts_calloc((size_t)n, sizeof *c.run_json);
  c.median = ts_malloc(sizeof *c.median * (size_t)n);
  c.ids = ts_malloc(sizeof *c.ids * (size_t)n);
  c.target_ids = ts_malloc(sizeof *c.target_ids * (size_t)n);
  c.trials = ts_malloc(sizeof *c.trials * (size_t)n);
  int rc = TS_OK;
  if (!c.run_json || !c.median || !c.ids || !c.target_ids || !c.trials) {
    rc = db_nomem(db, "storing records");
    n = 0;
  }
  for (int i = 0; i < n && rc == TS_OK; i++)
    rc = check_measurement(db, i, &m[i], &c.run_json[i], &c.median[i]);
  if (rc == TS_OK) {
    db_timestamp(c.now);
    rc = db_write(db, commit_body, &c);
  }
  if (rc == TS_OK && ids) memcpy(ids, c.ids, sizeof *ids * (size_t)n);
  for (int i = 0; i < n && c.run_json; i++) free(c.run_json[i]);
  free(c.run_json);
  free(c.median);
  free(c.ids);
  free(c.target_ids);
  free(c.trials);
  return rc;
}

int ts_db_commit_record(ts_db *db, const ts_db_measurement *m, int64_t *id) {
  int64_t local;
  return ts_db_commit_records(db, m, 1, id ? id : &local);
}

/* ---- queries ---- */

/* The id of a target already in the database, or 0 (and TS_OK) for one
 * that is not: it has no records. */
static int known_target(ts_db *db, const char *target, int64_t *id) {
  *id = 0;
  int rc = db_target_id(db, target, false, id);
  if (rc == TS_ENOTFOUND) {
    db_begin_call(db);
    *id = 0;
    return TS_OK;
  }
  return rc;
}

static int best_query(ts_db *db, int64_t workload_id, int64_t target_id, int k,
                      ts_db_record **out, int *n) {
  db_q *st = db_stmt(db, ST_BEST);
  if (!st) return db->err.code;
  db_bind_int64(st, 1, workload_id);
  db_bind_int64(st, 2, target_id);
  db_bind_int(st, 3, k);
  return collect_records(db, st, out, n);
}

/* The best record into *out, or TS_ENOTFOUND. */
static int best_one(ts_db *db, int64_t workload_id, int64_t target_id,
                    const char *target, ts_db_record *out) {
  db_q *st = db_stmt(db, ST_BEST);
  if (!st) return db->err.code;
  db_bind_int64(st, 1, workload_id);
  db_bind_int64(st, 2, target_id);
  db_bind_int(st, 3, 1);
  int rc = db_step(db, st);
  int code = TS_OK;
  if (rc == SQLITE_ROW) code = db_read_record(db, st, 0, out);
  db_reset(st);
  if (rc == SQLITE_DONE)
    return TS_ERR(&db->err, TS_ENOTFOUND,
                  "%s: no ok record for workload %lld on target '%s'", db->path,
                  (long long)workload_id, target);
  if (rc != SQLITE_ROW) return db_fail(db, rc, "finding the best record");
  return code;
}

int ts_db_best(ts_db *db, int64_t workload_id, const char *target,
               ts_db_record *out) {
  db_begin_call(db);
  memset(out, 0, sizeof *out);
  int64_t target_id;
  int rc = db_target_id(db, target, false, &target_id);
  if (rc) return rc;
  return best_one(db, workload_id, target_id, target, out);
}

int ts_db_top_k(ts_db *db, int64_t workload_id, const char *target, int k,
                ts_db_record **out, int *n) {
  db_begin_call(db);
  *out = NULL;
  *n = 0;
  if (k < 0) return TS_ERR(&db->err, TS_EINVAL, "top_k: k is negative");
  if (k == 0) return TS_OK;
  int64_t target_id;
  int rc = db_target_id(db, target, false, &target_id);
  if (rc == TS_ENOTFOUND) {
    db_begin_call(db);
    return TS_OK; /* no records on an unknown target */
  }
  if (rc) return rc;
  return best_query(db, workload_id, target_id, k, out, n);
}

double ts_db_record_seconds(const ts_db_record *r) {
  if (!r) return NAN;
  return r->confirmed_rounds > 0 ? r->confirmed_s : r->median_s;
}

int ts_db_top_k_search(ts_db *db, int64_t workload_id, const char *target,
                       int k, ts_db_record **out, int *n) {
  db_begin_call(db);
  *out = NULL;
  *n = 0;
  if (k < 0) return TS_ERR(&db->err, TS_EINVAL, "top_k: k is negative");
  if (k == 0) return TS_OK;
  int64_t target_id;
  int rc = known_target(db, target, &target_id);
  if (rc || !target_id) return rc;
  db_q *st = db_stmt(db, ST_BEST_SEARCH);
  if (!st) return db->err.code;
  db_bind_int64(st, 1, workload_id);
  db_bind_int64(st, 2, target_id);
  ts_db_record *all = NULL;
  int n_all = 0;
  if ((rc = collect_records(db, st, &all, &n_all))) return rc;
  /* the first record of each distinct trace, up to k */
  int kept = 0;
  for (int i = 0; i < n_all; i++) {
    bool dup = kept >= k;
    for (int j = 0; j < kept && !dup; j++)
      dup = !strcmp(all[j].trace_json, all[i].trace_json);
    if (dup) {
      ts_db_record_clear(&all[i]);
      continue;
    }
    if (i != kept) {
      all[kept] = all[i];
      memset(&all[i], 0, sizeof all[i]);
    }
    kept++;
  }
  if (!kept) {
    free(all);
    return TS_OK;
  }
  *out = all;
  *n = kept;
  return TS_OK;
}

typedef struct confirm_ctx {
  int64_t workload_id;
  const char *target;
  const int64_t *records;
  const double *seconds, *spread;
  int n, rounds;
} confirm_ctx;

static int confirm_body(ts_db *db, void *p) {
  confirm_ctx *c = p;
  int64_t target_id;
  int rc = db_target_id(db, c->target, false, &target_id);
  if (rc) return rc;
  db_q *st = db_stmt(db, ST_CONFIRM_CLEAR);
  if (!st) return db->err.code;
  db_bind_int64(st, 1, c->workload_id);
  db_bind_int64(st, 2, target_id);
  rc = db_step(db, st);
  db_reset(st);
  if (rc != SQLITE_DONE) return db_fail(db, rc, "storing a confirmation");
  char now[32];
  db_timestamp(now);
  for (int i = 0; i < c->n; i++) {
    if (!(st = db_stmt(db, ST_CONFIRM_SET))) return db->err.code;
    db_bind_int64(st, 1, c->records[i]);
    db_bind_double(st, 2, c->seconds[i]);
    db_bind_double(st, 3, c->spread[i]);
    db_bind_int(st, 4, c->rounds);
    db_bind_text(st, 5, now, -1);
    db_bind_int64(st, 6, c->workload_id);
    db_bind_int64(st, 7, target_id);
    rc = db_step(db, st);
    db_reset(st);
    if (rc != SQLITE_DONE) return db_fail(db, rc, "storing a confirmation");
    if (db_changes(db) != 1)
      return TS_ERR(&db->err, TS_EINVAL,
                    "confirm: record %lld is not an ok record of workload "
                    "%lld on target '%s'",
                    (long long)c->records[i], (long long)c->workload_id,
                    c->target);
  }
  return TS_OK;
}

int ts_db_confirm(ts_db *db, int64_t workload_id, const char *target,
                  const int64_t *records, const double *seconds,
                  const double *spread, int n, int rounds) {
  db_begin_call(db);
  if (n < 1 || !records || !seconds || !spread || !target)
    return TS_ERR(&db->err, TS_EINVAL, "confirm: no records");
  if (rounds < 1)
    return TS_ERR(&db->err, TS_EINVAL, "confirm: rounds = %d (want >= 1)",
                  rounds);
  for (int i = 0; i < n; i++)
    if (!(seconds[i] > 0) || !isfinite(seconds[i]) || !(spread[i] >= 0) ||
        !isfinite(spread[i]))
      return TS_ERR(&db->err, TS_EINVAL,
                    "confirm: record %lld: bad latency %g or spread %g",
                    (long long)records[i], seconds[i], spread[i]);
  confirm_ctx c = {workload_id, target, records, seconds, spread, n, rounds};
  return db_write(db, confirm_body, &c);
}

int ts_db_best_by_func(ts_db *db, const ts_func *f, const char *target,
                       ts_db_record *out) {
  db_begin_call(db);
  memset(out, 0, sizeof *out);
  if (!f) return TS_ERR(&db->err, TS_EINVAL, "best_by_func: no function");
  int64_t target_id;
  int rc = db_target_id(db, target, false, &target_id);
  if (rc) return rc;
  /* Serialize f once: its hash and the equality checks come from the key. */
  size_t key_len;
  uint8_t *key = ts_func_structural_key(f, &key_len);
  if (!key) return TS_ERR(&db->err, TS_ENOMEM, "best_by_func: out of memory");
  char hex[33];
  ts_hash128_hex(ts_structural_key_hash(key, key_len), hex);
  db_q *st = db_stmt(db, ST_BEST_BY_HASH);
  if (!st) {
    free(key);
    return db->err.code;
  }
  db_bind_text(st, 1, hex, 32);
  db_bind_int64(st, 2, target_id);
  /* Each row is a workload with this hash; the first structurally equal
   * to f answers (its record columns are NULL when it has no ok record). */
  int code = TS_ENOTFOUND;
  int64_t workload_id = 0;
  while ((rc = db_step(db, st)) == SQLITE_ROW) {
    int64_t id = db_column_int64(st, 0);
    if (!db_workload_func_cached(db, id)) {
      code = db->err.code;
      break;
    }
    size_t stored_len = 0;
    const uint8_t *stored = func_cache_key(&db->funcs, id, &stored_len);
    if (!stored || stored_len != key_len || memcmp(stored, key, key_len))
      continue;
    workload_id = id;
    if (db_column_type(st, 1) != SQLITE_NULL)
      code = db_read_record(db, st, 1, out);
    break;
  }
  db_reset(st);
  free(key);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE)
    return db_fail(db, rc, "finding the best record");
  if (code != TS_ENOTFOUND) return code;
  if (!workload_id)
    return TS_ERR(&db->err, TS_ENOTFOUND, "%s: no workload with hash %s",
                  db->path, hex);
  return TS_ERR(&db->err, TS_ENOTFOUND,
                "%s: no ok record for workload %lld on target '%s'", db->path,
                (long long)workload_id, target);
}

int ts_db_records_of(ts_db *db, int64_t workload_id, const char *target,
                     ts_db_record **out, int *n) {
  db_begin_call(db);
  *out = NULL;
  *n = 0;
  int64_t target_id;
  int rc = known_target(db, target, &target_id);
  if (rc || !target_id) return rc;
  db_q *st = db_stmt(db, ST_RECORDS_OF);
  if (!st) return db->err.code;
  db_bind_int64(st, 1, workload_id);
  db_bind_int64(st, 2, target_id);
  return collect_records(db, st, out, n);
}

int ts_db_recent_records(ts_db *db, int64_t workload_id, int limit,
                         ts_db_record **out, int *n) {
  db_begin_call(db);
  *out = NULL;
  *n = 0;
  if (limit < 0)
    return TS_ERR(&db->err, TS_EINVAL, "recent: limit is negative");
  db_q *st = db_stmt(db, ST_RECENT);
  if (!st) return db->err.code;
  db_bind_int64(st, 1, workload_id);
  db_bind_int(st, 2, limit);
  return collect_records(db, st, out, n);
}

int ts_db_record_points(ts_db *db, int64_t workload_id, const char *target,
                        ts_db_record_point **out, int64_t *n) {
  db_begin_call(db);
  *out = NULL;
  *n = 0;
  int64_t target_id;
  int rc = known_target(db, target, &target_id);
  if (rc || !target_id) return rc;
  db_q *st = db_stmt(db, ST_RECORD_POINTS);
  if (!st) return db->err.code;
  db_bind_int64(st, 1, workload_id);
  db_bind_int64(st, 2, target_id);
  ts_db_record_point *pts = NULL;
  int64_t count = 0, cap = 0;
  int code = TS_OK;
  while ((rc = db_step(db, st)) == SQLITE_ROW) {
    if (count == cap) {
      cap = cap ? cap * 2 : 256;
      ts_db_record_point *grown = ts_realloc(pts, sizeof *pts * (size_t)cap);
      if (!grown) {
        code = db_nomem(db, "reading records");
        break;
      }
      pts = grown;
    }
    ts_db_record_point *p = &pts[count++];
    p->id = db_column_int64(st, 0);
    p->job_id = db_column_int64(st, 1); /* NULL reads as 0 */
    p->trial =
        db_column_type(st, 2) == SQLITE_NULL ? -1 : db_column_int64(st, 2);
    p->median_s =
        db_column_type(st, 4) == SQLITE_NULL ? NAN : db_column_double(st, 4);
    const char *status = (const char *)db_column_text(st, 3);
    if (ts_db_status_parse(status, &p->status) != TS_OK) {
      code = TS_ERR(&db->err, TS_EINVAL,
                    "%s: record %lld has unknown status "
                    "'%s'",
                    db->path, (long long)p->id, status ? status : "(null)");
      break;
    }
  }
  db_reset(st);
  if (code == TS_OK && rc != SQLITE_DONE)
    code = db_fail(db, rc, "reading records");
  if (code != TS_OK) {
    free(pts);
    return code;
  }
  *out = pts;
  *n = count;
  return TS_OK;
}

/* ---- overview ---- */

void ts_db_summaries_free(ts_db_summary *rows, int n) {
  if (!rows) return;
  for (int i = 0; i < n; i++) {
    free(rows[i].name);
    free(rows[i].target);
  }
  free(rows);
}

int ts_db_list(ts_db *db, int64_t workload_id, ts_db_summary **out, int *n) {
  db_begin_call(db);
  *out = NULL;
  *n = 0;
  db_q *st = db_stmt(db, workload_id ? ST_LIST_ONE : ST_LIST);
  if (!st) return db->err.code;
  if (workload_id) db_bind_int64(st, 1, workload_id);
  int cap = 0, rc;
  bool oom = false;
  while (!oom && (rc = db_step(db, st)) == SQLITE_ROW) {
    if (*n == cap) {
      cap = cap ? cap * 2 : 16;
      ts_db_summary *grown = ts_realloc(*out, sizeof **out * (size_t)cap);
      if (!grown) {
        oom = true;
        break;
      }
      *out = grown;
    }
    ts_db_summary *s = &(*out)[(*n)++];
    memset(s, 0, sizeof *s);
    s->workload_id = db_column_int64(st, 0);
    db_column_copy(st, 1, s->hash, sizeof s->hash);
    s->name = db_column_strdup(st, 2, &oom);
    s->flops = db_column_double(st, 3);
    s->target_id = db_column_int64(st, 4);
    s->target = db_column_strdup(st, 5, &oom);
    s->n_records = db_column_int64(st, 6);
    s->n_ok = db_column_int64(st, 7);
    s->best_s =
        db_column_type(st, 8) == SQLITE_NULL ? NAN : db_column_double(st, 8);
  }
  db_reset(st);
  if (oom || rc != SQLITE_DONE) {
    ts_db_summaries_free(*out, *n);
    *out = NULL;
    *n = 0;
    return oom ? db_nomem(db, "listing workloads")
               : db_fail(db, rc, "listing workloads");
  }
  return TS_OK;
}

/* ---- pruning and statistics ---- */

typedef struct prune_ctx {
  int keep;
  bool keep_failed;
  int64_t deleted;
} prune_ctx;

static int prune_body(ts_db *db, void *p) {
  prune_ctx *c = p;
  c->deleted = 0;
  db_q *st = db_stmt(db, ST_PRUNE_OK);
  if (!st) return db->err.code;
  db_bind_int(st, 1, c->keep);
  int rc = db_step(db, st);
  db_reset(st);
  if (rc != SQLITE_DONE) return db_fail(db, rc, "pruning");
  c->deleted += db_changes(db);
  if (c->keep_failed) return TS_OK;
  if (!(st = db_stmt(db, ST_PRUNE_FAILED))) return db->err.code;
  rc = db_step(db, st);
  db_reset(st);
  if (rc != SQLITE_DONE) return db_fail(db, rc, "pruning");
  c->deleted += db_changes(db);
  return TS_OK;
}

int ts_db_prune(ts_db *db, int keep, bool keep_failed, int64_t *deleted) {
  db_begin_call(db);
  if (deleted) *deleted = 0;
  if (keep < 1)
    return TS_ERR(&db->err, TS_EINVAL,
                  "prune: keep must be at least 1 (got %d)", keep);
  prune_ctx c = {keep, keep_failed, 0};
  int rc = db_write(db, prune_body, &c);
  if (rc == TS_OK && deleted) *deleted = c.deleted;
  return rc;
}

/* Adds the (name, count) rows of st into counts by name index. */
static int count_by_name(ts_db *db, db_q *st, int64_t *counts, int n_names,
                         const char *(*name_of)(int)) {
  int rc;
  while ((rc = db_step(db, st)) == SQLITE_ROW) {
    const char *name = (const char *)db_column_text(st, 0);
    for (int i = 0; i < n_names; i++)
      if (name && !strcmp(name, name_of(i)))
        counts[i] += db_column_int64(st, 1);
  }
  db_reset(st);
  if (rc != SQLITE_DONE) return db_fail(db, rc, "counting");
  return TS_OK;
}

static const char *status_name_i(int i) { return status_names[i]; }
static const char *job_state_name_i(int i) {
  return ts_db_job_state_name((ts_db_job_state)i);
}

int ts_db_job_count_records(ts_db *db, int64_t job_id, int64_t *total,
                            int64_t by_status[TS_DB_N_STATUS]) {
  db_begin_call(db);
  int64_t counts[TS_DB_N_STATUS] = {0};
  db_q *st = db_stmt(db, ST_JOB_COUNT);
  if (!st) return db->err.code;
  db_bind_int64(st, 1, job_id);
  int rc = count_by_name(db, st, counts, TS_DB_N_STATUS, status_name_i);
  if (rc) return rc;
  int64_t sum = 0;
  for (int i = 0; i < TS_DB_N_STATUS; i++) sum += counts[i];
  if (total) *total = sum;
  if (by_status) memcpy(by_status, counts, sizeof counts);
  return TS_OK;
}

int ts_db_get_stats(ts_db *db, ts_db_stats *out) {
  db_begin_call(db);
  memset(out, 0, sizeof *out);
  out->schema_version = TS_DB_SCHEMA_VERSION;
  db_q *st = db_stmt(db, ST_COUNTS);
  if (!st) return db->err.code;
  int rc = db_step(db, st);
  if (rc == SQLITE_ROW) {
    out->n_workloads = db_column_int64(st, 0);
    out->n_targets = db_column_int64(st, 1);
    out->n_jobs = db_column_int64(st, 2);
  }
  db_reset(st);
  if (rc != SQLITE_ROW) return db_fail(db, rc, "counting");
  if (!(st = db_stmt(db, ST_COUNT_BY_STATUS))) return db->err.code;
  if ((rc = count_by_name(db, st, out->records_by_status, TS_DB_N_STATUS,
                          status_name_i)))
    return rc;
  for (int i = 0; i < TS_DB_N_STATUS; i++)
    out->n_records += out->records_by_status[i];
  if (!(st = db_stmt(db, ST_JOBS_BY_STATE))) return db->err.code;
  if ((rc = count_by_name(db, st, out->jobs_by_state, TS_DB_N_JOB_STATE,
                          job_state_name_i)))
    return rc;
  db->be->sizes(db, &out->file_bytes, &out->wal_bytes);
  return TS_OK;
}
