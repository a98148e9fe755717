/*
 * pg_backend.c — the PostgreSQL backend through libpq: a tuning database
 * on a server that many tuners and compilers on many machines share.
 *
 * The module's SQL is written once in SQLite's dialect; this file translates
 * what differs: ?N placeholders become $N, an INSERT gets RETURNING id (the
 * last inserted id), and the schema's types become BIGINT identities, DOUBLE
 * PRECISION and TEXT in the "C" collation (byte order, as SQLite compares).
 * The schema version lives in a table `tessera_schema` of the connection's
 * schema (search_path). Statements are prepared on the server on first use,
 * with the parameter types of their first binding, and kept.
 *
 * Writers: every write transaction first takes a transaction-scoped
 * advisory lock of the schema, so writes are serialized as SQLite's BEGIN
 * IMMEDIATE serializes them (trial numbering and "find or insert" of
 * workloads and targets stay exact) while readers never wait. A connection
 * the server dropped (a restart) is re-established at the next call outside
 * a transaction; a transaction it interrupted fails with the server's
 * reason and is rolled back there, so nothing is half-written.
 */
#include "internal.h"

#include <libpq-fe.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PG(db) ((PGconn *)(db)->conn)

/* pg_type oids of the parameter types given on prepare */
#define OID_INT8 20
#define OID_TEXT 25
#define OID_FLOAT8 701

/* Key of the advisory lock a write transaction takes ("TSDB"; the second
 * half is the schema's name hash). */
#define WRITE_LOCK                                                             \
  "SELECT pg_advisory_xact_lock(1414743106, hashtext(current_schema()))"

typedef struct pg_state {
  char errmsg[1024];
  int64_t last_id, changes;
  unsigned next_name;  /* statement names s1, s2, ... */
  unsigned generation; /* bumped when the connection is re-established */
  bool in_txn;         /* a transaction is open (no silent reconnect) */
} pg_state;

#define STATE(db) ((pg_state *)(db)->backend_state)

typedef struct pg_param {
  char *val; /* buffer kept across executions */
  size_t cap;
  unsigned type;
  bool null; /* SQL NULL (also: not bound) */
} pg_param;

typedef struct pg_q {
  db_q base;
  char *sql; /* in PostgreSQL's dialect */
  char name[24];
  bool keep;           /* a cached statement: prepared on the server */
  unsigned generation; /* of the connection it was prepared on; 0: not */
  int n_params;
  pg_param *params;
  bool insert_id; /* an INSERT given RETURNING id */
  PGresult *res;
  bool ran;
  bool oom; /* a binding was lost (out of memory): step fails */
  int row, n_rows;
} pg_q;

#define Q(q) ((pg_q *)(q))

/* ---- messages ---- */

/* A libpq message on one line: newlines and tabs folded into "; ". */
static void fold(const char *msg, char *out, size_t cap) {
  size_t o = 0;
  bool sep = false;
  for (const char *p = msg ? msg : ""; *p && o + 3 < cap; p++) {
    if (*p == '\n' || *p == '\r' || *p == '\t') {
      sep = true;
      continue;
    }
    if (sep && o) {
      out[o++] = ';';
      out[o++] = ' ';
    }
    sep = false;
    out[o++] = *p;
  }
  while (o && out[o - 1] == ' ') o--;
  out[o] = 0;
}

static void set_error(ts_db *db, const char *msg) {
  pg_state *s = STATE(db);
  fold(msg, s->errmsg, sizeof s->errmsg);
  if (!s->errmsg[0])
    snprintf(s->errmsg, sizeof s->errmsg, "unknown server error");
}

/* The SQLite-style code of a failed result (or of a lost connection). */
static int result_code(ts_db *db, PGresult *res) {
  if (PQstatus(PG(db)) == CONNECTION_BAD) {
    set_error(db, PQerrorMessage(PG(db)));
    if (!STATE(db)->errmsg[0] ||
        !strcmp(STATE(db)->errmsg, "unknown server error"))
      snprintf(STATE(db)->errmsg, sizeof STATE(db)->errmsg,
               "the connection to the server was lost");
    return SQLITE_IOERR;
  }
  set_error(db, res ? PQresultErrorMessage(res) : PQerrorMessage(PG(db)));
  const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
  if (!state) return SQLITE_IOERR;
  if (!strcmp(state, "40001") || !strcmp(state, "40P01") ||
      !strcmp(state, "55P03"))
    return SQLITE_BUSY; /* serialization failure, deadlock, lock timeout */
  if (!strncmp(state, "23", 2)) return SQLITE_CONSTRAINT;
  if (!strncmp(state, "08", 2) || !strncmp(state, "57P", 3))
    return SQLITE_IOERR; /* connection exception, server shutting down */
  if (!strcmp(state, "53200")) return SQLITE_NOMEM;
  return SQLITE_ERROR;
}

static const char *pg_errmsg(ts_db *db, int rc) {
  (void)rc;
  return STATE(db)->errmsg;
}

/* ---- dialect ---- */

/* The SQL with ?N turned into $N; *n_params gets the largest N. NULL when
 * out of memory. */
static char *translate(const char *sql, int *n_params, bool *insert_id) {
  size_t n = strlen(sql);
  char *out = ts_malloc(n + 16);
  if (!out) return NULL;
  size_t o = 0;
  int max = 0;
  bool quoted = false;
  for (size_t i = 0; i < n; i++) {
    char c = sql[i];
    if (c == '\'') quoted = !quoted;
    if (c == '?' && !quoted) {
      out[o++] = '$';
      int v = 0;
      while (sql[i + 1] >= '0' && sql[i + 1] <= '9') {
        v = v * 10 + (sql[i + 1] - '0');
        out[o++] = sql[++i];
      }
      if (v > max) max = v;
      continue;
    }
    out[o++] = c;
  }
  out[o] = 0;
  *n_params = max;
  *insert_id = !strncmp(sql, "INSERT", 6) && !strstr(sql, "RETURNING");
  if (*insert_id) memcpy(out + o, " RETURNING id", 14);
  return out;
}

/* Replaces every whole-word occurrence of `from` in *s with `to`; out of
 * memory frees *s and leaves it NULL (a NULL *s stays NULL). */
static void replace_word(char **s, const char *from, const char *to) {
  if (!*s) return;
  size_t fl = strlen(from), tl = strlen(to), n = strlen(*s);
  size_t count = 0;
  for (const char *p = *s; (p = strstr(p, from)); p += fl) count++;
  char *out = ts_malloc(n + count * (tl > fl ? tl - fl : 0) + 1);
  if (!out) {
    free(*s);
    *s = NULL;
    return;
  }
  const char *p = *s;
  size_t o = 0;
  for (;;) {
    const char *hit = strstr(p, from);
    while (hit && ((hit > *s &&
                    (hit[-1] == '_' || (hit[-1] >= 'A' && hit[-1] <= 'Z') ||
                     (hit[-1] >= 'a' && hit[-1] <= 'z'))) ||
                   hit[fl] == '_' || (hit[fl] >= 'A' && hit[fl] <= 'Z') ||
                   (hit[fl] >= 'a' && hit[fl] <= 'z')))
      hit = strstr(hit + fl, from);
    if (!hit) break;
    memcpy(out + o, p, (size_t)(hit - p));
    o += (size_t)(hit - p);
    memcpy(out + o, to, tl);
    o += tl;
    p = hit + fl;
  }
  size_t rest = strlen(p);
  memcpy(out + o, p, rest + 1);
  free(*s);
  *s = out;
}

/* A migration of the shared schema in PostgreSQL's types; NULL when out of
 * memory. */
static char *translate_schema(const char *sql) {
  char *s = ts_strdup(sql);
  replace_word(&s, "INTEGER PRIMARY KEY", "@ID@");
  replace_word(&s, "INTEGER", "BIGINT");
  replace_word(&s, "REAL", "DOUBLE PRECISION");
  replace_word(&s, "TEXT", "TEXT COLLATE \"C\"");
  replace_word(&s, "@ID@",
               "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY");
  return s;
}

/* ---- statements ---- */

static int pg_prepare(ts_db *db, const char *sql, bool keep, db_q **out) {
  pg_q *q = ts_calloc(1, sizeof *q);
  if (!q) return db_nomem(db, "preparing a statement");
  q->base.be = &db_pg_backend;
  q->base.db = db;
  q->sql = translate(sql, &q->n_params, &q->insert_id);
  q->keep = keep;
  if (keep) snprintf(q->name, sizeof q->name, "ts%u", ++STATE(db)->next_name);
  q->params = q->sql ? ts_calloc((size_t)(q->n_params ? q->n_params : 1),
                                 sizeof *q->params)
                     : NULL;
  if (!q->params) {
    free(q->sql);
    free(q);
    return db_nomem(db, "preparing a statement");
  }
  for (int i = 0; i < q->n_params; i++) q->params[i].null = true;
  q->row = -1;
  *out = &q->base;
  return TS_OK;
}

static void clear_result(pg_q *q) {
  if (q->res) PQclear(q->res);
  q->res = NULL;
  q->ran = false;
  q->row = -1;
  q->n_rows = 0;
}

static void pg_reset(db_q *base) {
  pg_q *q = Q(base);
  clear_result(q);
  q->oom = false;
  for (int i = 0; i < q->n_params; i++) q->params[i].null = true;
}

static void pg_finalize(db_q *base) {
  pg_q *q = Q(base);
  clear_result(q);
  /* the server's prepared statement goes with the connection */
  for (int i = 0; i < q->n_params; i++) free(q->params[i].val);
  free(q->params);
  free(q->sql);
  free(q);
}

static void set_param(pg_q *q, int i, const char *s, size_t len,
                      unsigned type) {
  if (i < 1 || i > q->n_params) return;
  pg_param *p = &q->params[i - 1];
  if (p->cap < len + 1) {
    free(p->val);
    p->cap = len + 1 < 32 ? 32 : len + 1;
    p->val = ts_malloc(p->cap);
    if (!p->val) {
      /* the statement refuses to run (pg_step) until bound again */
      p->cap = 0;
      p->null = true;
      q->oom = true;
      return;
    }
  }
  memcpy(p->val, s, len);
  p->val[len] = 0;
  p->type = type;
  p->null = false;
}

static void pg_bind_int64(db_q *q, int i, int64_t v) {
  char buf[32];
  int n = snprintf(buf, sizeof buf, "%lld", (long long)v);
  set_param(Q(q), i, buf, (size_t)n, OID_INT8);
}

static void pg_bind_double(db_q *q, int i, double v) {
  char buf[40];
  int n;
  if (isnan(v))
    n = snprintf(buf, sizeof buf, "NaN");
  else if (isinf(v))
    n = snprintf(buf, sizeof buf, v > 0 ? "Infinity" : "-Infinity");
  else
    n = snprintf(buf, sizeof buf, "%.17g", v);
  set_param(Q(q), i, buf, (size_t)n, OID_FLOAT8);
}

static void pg_bind_text(db_q *q, int i, const char *s, int len) {
  set_param(Q(q), i, s, len < 0 ? strlen(s) : (size_t)len, OID_TEXT);
}

static void pg_bind_null(db_q *base, int i) {
  pg_q *q = Q(base);
  if (i < 1 || i > q->n_params) return;
  q->params[i - 1].null = true;
}

/* Re-establishes a connection the server dropped; the statements prepared
 * on the old one are prepared again on first use. */
static bool reconnect(ts_db *db) {
  PQreset(PG(db));
  if (PQstatus(PG(db)) != CONNECTION_OK) {
    char why[512];
    fold(PQerrorMessage(PG(db)), why, sizeof why);
    snprintf(STATE(db)->errmsg, sizeof STATE(db)->errmsg,
             "the connection to the server was lost and connecting again "
             "failed: %s",
             why[0] ? why : "unknown reason");
    return false;
  }
  STATE(db)->generation++;
  STATE(db)->in_txn = false;
  if (db->opts.read_only) {
    PGresult *r = PQexec(PG(db), "SET default_transaction_read_only = on");
    PQclear(r);
  }
  return true;
}

static void pg_revive(ts_db *db) {
  if (PQstatus(PG(db)) == CONNECTION_BAD && !STATE(db)->in_txn) reconnect(db);
}

static PGresult *run(ts_db *db, pg_q *q) {
  pg_state *s = STATE(db);
  const char *values[64];
  const char **vals = values;
  unsigned types_buf[64];
  unsigned *types = types_buf;
  if (q->n_params > 64) {
    vals = ts_malloc(sizeof *vals * (size_t)q->n_params);
    types = ts_malloc(sizeof *types * (size_t)q->n_params);
    if (!vals || !types) {
      free(vals);
      free(types);
      return NULL;
    }
  }
  for (int i = 0; i < q->n_params; i++) {
    vals[i] = q->params[i].null ? NULL : q->params[i].val;
    types[i] = q->params[i].null ? 0 : q->params[i].type;
  }
  PGresult *res = NULL;
  if (!q->keep) {
    res = PQexecParams(PG(db), q->sql, q->n_params, types, vals, NULL, NULL, 0);
  } else {
    if (q->generation != s->generation + 1) {
      PGresult *p = PQprepare(PG(db), q->name, q->sql, q->n_params, types);
      if (PQresultStatus(p) != PGRES_COMMAND_OK) {
        res = p;
        goto done;
      }
      PQclear(p);
      q->generation = s->generation + 1;
    }
    res = PQexecPrepared(PG(db), q->name, q->n_params, vals, NULL, NULL, 0);
  }
done:
  if (vals != values) {
    free(vals);
    free(types);
  }
  return res;
}

static int pg_step(db_q *base) {
  pg_q *q = Q(base);
  ts_db *db = base->db;
  pg_state *s = STATE(db);
  if (!q->ran) {
    PGresult *res = q->oom ? NULL : run(db, q);
    if (!res) {
      snprintf(s->errmsg, sizeof s->errmsg, "out of memory");
      return SQLITE_NOMEM;
    }
    ExecStatusType st = PQresultStatus(res);
    if ((st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) &&
        PQstatus(PG(db)) == CONNECTION_BAD && !s->in_txn) {
      /* the server dropped the connection (a restart) between calls: one
       * new attempt on a new connection */
      PQclear(res);
      if (!reconnect(db)) return SQLITE_IOERR;
      res = run(db, q);
      st = PQresultStatus(res);
    }
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
      int rc = result_code(db, res);
      PQclear(res);
      return rc;
    }
    q->res = res;
    q->ran = true;
    q->row = -1;
    q->n_rows = PQntuples(res);
    const char *t = PQcmdTuples(res);
    s->changes = t && *t ? strtoll(t, NULL, 10) : 0;
    if (q->insert_id) {
      if (q->n_rows > 0) s->last_id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
      q->n_rows = 0;
    }
  }
  if (q->row + 1 < q->n_rows) {
    q->row++;
    return SQLITE_ROW;
  }
  q->row = q->n_rows;
  return SQLITE_DONE;
}

static int pg_column_type(db_q *base, int i) {
  pg_q *q = Q(base);
  if (!q->res || q->row < 0 || q->row >= q->n_rows) return SQLITE_NULL;
  return PQgetisnull(q->res, q->row, i) ? SQLITE_NULL : SQLITE_TEXT;
}

static const unsigned char *pg_column_text(db_q *base, int i) {
  pg_q *q = Q(base);
  if (pg_column_type(base, i) == SQLITE_NULL) return NULL;
  return (const unsigned char *)PQgetvalue(q->res, q->row, i);
}

static int pg_column_bytes(db_q *base, int i) {
  pg_q *q = Q(base);
  if (pg_column_type(base, i) == SQLITE_NULL) return 0;
  return PQgetlength(q->res, q->row, i);
}

static int64_t pg_column_int64(db_q *base, int i) {
  const char *s = (const char *)pg_column_text(base, i);
  return s ? strtoll(s, NULL, 10) : 0;
}

static double pg_column_double(db_q *base, int i) {
  const char *s = (const char *)pg_column_text(base, i);
  return s ? strtod(s, NULL) : 0.0;
}

/* ---- transactions ---- */

static int exec_sql(ts_db *db, const char *sql) {
  PGresult *res = PQexec(PG(db), sql);
  ExecStatusType st = PQresultStatus(res);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    int rc = result_code(db, res);
    PQclear(res);
    return rc;
  }
  const char *t = PQcmdTuples(res);
  STATE(db)->changes = t && *t ? strtoll(t, NULL, 10) : 0;
  PQclear(res);
  return SQLITE_OK;
}

static int pg_exec(ts_db *db, const char *sql) {
  if (!strcmp(sql, "COMMIT")) {
    STATE(db)->in_txn = false;
    if (PQtransactionStatus(PG(db)) == PQTRANS_IDLE) return SQLITE_OK;
  }
  return exec_sql(db, sql);
}

static int begin(ts_db *db, const char *sql) {
  pg_state *s = STATE(db);
  int rc = exec_sql(db, sql);
  if (rc == SQLITE_IOERR && PQstatus(PG(db)) == CONNECTION_BAD) {
    /* dropped between calls (a restart): one new attempt on a new
     * connection */
    if (!reconnect(db)) return SQLITE_IOERR;
    rc = exec_sql(db, sql);
  }
  if (rc != SQLITE_OK) {
    if (PQtransactionStatus(PG(db)) == PQTRANS_INERROR ||
        PQtransactionStatus(PG(db)) == PQTRANS_INTRANS) {
      PGresult *r = PQexec(PG(db), "ROLLBACK");
      PQclear(r);
    }
    return rc;
  }
  s->in_txn = true;
  return SQLITE_OK;
}

static int pg_begin_write(ts_db *db) { return begin(db, "BEGIN; " WRITE_LOCK); }

static int pg_begin_read(ts_db *db) {
  return begin(db, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
}

static int pg_commit(ts_db *db) {
  PGresult *res = PQexec(PG(db), "COMMIT");
  ExecStatusType st = PQresultStatus(res);
  if (st != PGRES_COMMAND_OK) {
    int rc = result_code(db, res);
    PQclear(res);
    return rc;
  }
  /* COMMIT of a transaction that failed earlier reports ROLLBACK */
  bool rolled_back = strcmp(PQcmdStatus(res), "COMMIT") != 0;
  PQclear(res);
  STATE(db)->in_txn = false;
  if (rolled_back) {
    snprintf(STATE(db)->errmsg, sizeof STATE(db)->errmsg,
             "the server rolled the transaction back");
    return SQLITE_ERROR;
  }
  return SQLITE_OK;
}

static void pg_rollback(ts_db *db) {
  PGTransactionStatusType t = PQtransactionStatus(PG(db));
  if (t == PQTRANS_INTRANS || t == PQTRANS_INERROR) {
    PGresult *r = PQexec(PG(db), "ROLLBACK");
    PQclear(r);
  }
  STATE(db)->in_txn = false;
}

static int64_t pg_last_insert_id(ts_db *db) { return STATE(db)->last_id; }
static int64_t pg_changes(ts_db *db) { return STATE(db)->changes; }

/* ---- maintenance ---- */

static int pg_vacuum(ts_db *db) {
  int rc = exec_sql(db, "VACUUM ANALYZE workloads, targets, jobs, records, "
                        "baselines, choices");
  return rc == SQLITE_OK ? TS_OK : db_fail(db, rc, "vacuuming");
}

/* The server keeps its pages consistent itself; what is checked here is
 * what the schema promises: every record and baseline refers to stored
 * rows, and every workload hash has 32 hex digits. */
static int pg_integrity_check(ts_db *db) {
  db_q *q;
  int rc = db_prepare(
      db,
      "SELECT (SELECT count(*) FROM records r WHERE NOT EXISTS (SELECT 1 "
      "FROM workloads w WHERE w.id = r.workload_id) OR NOT EXISTS (SELECT 1 "
      "FROM targets t WHERE t.id = r.target_id)), (SELECT count(*) FROM "
      "workloads WHERE length(hash) <> 32)",
      &q);
  if (rc) return rc;
  int step = db_step(db, q);
  int64_t orphans = step == SQLITE_ROW ? db_column_int64(q, 0) : 0;
  int64_t bad_hash = step == SQLITE_ROW ? db_column_int64(q, 1) : 0;
  db_finalize(q);
  if (step != SQLITE_ROW) return db_fail(db, step, "checking integrity");
  if (orphans || bad_hash)
    return TS_ERR(&db->err, TS_EINVAL,
                  "%s: integrity check failed: %lld records referring to "
                  "missing rows, %lld malformed workload hashes",
                  db->path, (long long)orphans, (long long)bad_hash);
  return TS_OK;
}

static void pg_sizes(ts_db *db, int64_t *main_bytes, int64_t *log_bytes) {
  *main_bytes = *log_bytes = 0;
  PGresult *res = PQexec(
      PG(db), "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM "
              "pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
              "WHERE n.nspname = current_schema() AND c.relkind = 'r'");
  if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
    *main_bytes = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
  PQclear(res);
}

/* ---- connecting, schema version, migrations ---- */

static void quiet_notices(void *arg, const char *message) {
  (void)arg;
  (void)message;
}

/* One integer from a query; *found false when it returned no row. */
static int query_int(ts_db *db, const char *sql, int64_t *out, bool *found) {
  PGresult *res = PQexec(PG(db), sql);
  if (PQresultStatus(res) != PGRES_TUPLES_OK) {
    int rc = result_code(db, res);
    PQclear(res);
    return db_fail(db, rc, "reading the schema version");
  }
  *found = PQntuples(res) > 0 && !PQgetisnull(res, 0, 0);
  *out = *found ? strtoll(PQgetvalue(res, 0, 0), NULL, 10) : 0;
  PQclear(res);
  return TS_OK;
}

/* The schema version: 0 when the schema has no tessera tables; refuses a
 * schema that holds tables of the same names without the version table,
 * and a newer version. */
static int read_version(ts_db *db, int64_t *version) {
  /* one statement, one snapshot: a process migrating at the same moment
   * commits the version table and the tables together */
  PGresult *res =
      PQexec(PG(db), "SELECT (SELECT count(*) FROM pg_tables WHERE schemaname "
                     "= current_schema() AND tablename = 'tessera_schema'), "
                     "(SELECT count(*) FROM pg_tables WHERE schemaname = "
                     "current_schema() AND tablename IN ('workloads', "
                     "'targets', 'jobs', 'records', 'baselines', "
                     "'choices'))");
  if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
    int rc = result_code(db, res);
    PQclear(res);
    return db_fail(db, rc, "reading the schema version");
  }
  int64_t has_table = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
  int64_t others = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
  PQclear(res);
  bool found;
  int rc;
  *version = 0;
  if (has_table) {
    int64_t app = 0;
    if ((rc = query_int(db, "SELECT application_id FROM tessera_schema", &app,
                        &found)))
      return rc;
    if (found && app != DB_APPLICATION_ID)
      return TS_ERR(&db->err, TS_EINVAL,
                    "%s: not a tessera database: its tessera_schema table "
                    "names application 0x%08llx",
                    db->path, (unsigned long long)app);
    if ((rc = query_int(db, "SELECT max(version) FROM tessera_schema", version,
                        &found)))
      return rc;
  } else if (others) {
    return TS_ERR(&db->err, TS_EINVAL,
                  "%s: not a tessera database: the schema has tables named "
                  "like tessera's but no tessera_schema table",
                  db->path);
  }
  if (*version > TS_DB_SCHEMA_VERSION)
    return TS_ERR(&db->err, TS_EUNSUPPORTED,
                  "%s: database schema version %lld is newer than this "
                  "tessera supports (%d); use a newer tessera (the database "
                  "was not changed)",
                  db->path, (long long)*version, TS_DB_SCHEMA_VERSION);
  return TS_OK;
}

static int migrate_body(ts_db *db, void *ctx) {
  (void)ctx;
  int rc = exec_sql(db, "CREATE TABLE IF NOT EXISTS tessera_schema (\n"
                        "  application_id BIGINT NOT NULL,\n"
                        "  version        BIGINT NOT NULL\n"
                        ")");
  if (rc != SQLITE_OK) return db_fail(db, rc, "creating the schema");
  int64_t version;
  if ((rc = read_version(db, &version))) return rc;
  for (int64_t v = version; v < TS_DB_SCHEMA_VERSION; v++) {
    char what[64];
    snprintf(what, sizeof what, "migrating the schema to version %lld",
             (long long)v + 1);
    char *sql = translate_schema(db_migrations[v]);
    if (!sql) return db_nomem(db, what);
    int e = exec_sql(db, sql);
    free(sql);
    if (e != SQLITE_OK) return db_fail(db, e, what);
  }
  if (version == TS_DB_SCHEMA_VERSION) return TS_OK;
  char sql[160];
  snprintf(sql, sizeof sql,
           "DELETE FROM tessera_schema; INSERT INTO tessera_schema VALUES "
           "(%d, %d)",
           DB_APPLICATION_ID, TS_DB_SCHEMA_VERSION);
  rc = exec_sql(db, sql);
  return rc == SQLITE_OK ? TS_OK
                         : db_fail(db, rc, "setting the schema version");
}

static int pg_connect(ts_db *db) {
  pg_state *s = ts_calloc(1, sizeof *s);
  if (!s) return db_nomem(db, "connecting");
  db->backend_state = s;
  /* the URL's own settings override these defaults */
  const char *keys[] = {"connect_timeout", "fallback_application_name",
                        "dbname", NULL};
  const char *vals[] = {"10", "tessera", db->conn_string, NULL};
  PGconn *conn = PQconnectdbParams(keys, vals, 1);
  db->conn = conn;
  if (!conn) return TS_ERR(&db->err, TS_ENOMEM, "out of memory connecting");
  if (PQstatus(conn) != CONNECTION_OK) {
    set_error(db, PQerrorMessage(conn));
    return TS_ERR(&db->err, TS_EIO, "%s: cannot connect to the server: %s",
                  db->path, s->errmsg);
  }
  PQsetNoticeProcessor(conn, quiet_notices, NULL);
  int rc;
  if (db->opts.read_only &&
      (rc = exec_sql(db, "SET default_transaction_read_only = on")) !=
          SQLITE_OK)
    return db_fail(db, rc, "configuring");
  int64_t version;
  if ((rc = read_version(db, &version))) return rc;
  db->schema_version = version;
  if (db->opts.read_only) {
    if (version < TS_DB_READ_MIN_VERSION)
      return TS_ERR(&db->err, TS_EINVAL,
                    "%s: %s; migrate it once with `tessera db migrate --db %s`",
                    db->path,
                    version == 0 ? "empty database"
                                 : "database of an older schema version",
                    db->path);
    return TS_OK;
  }
  if (version < TS_DB_SCHEMA_VERSION) {
    if (!db->opts.create && version == 0)
      return TS_ERR(&db->err, TS_ENOTFOUND,
                    "%s: no tessera database in this schema", db->path);
    if ((rc = db_write(db, migrate_body, NULL))) return rc;
  }
  db->schema_version = TS_DB_SCHEMA_VERSION;
  return TS_OK;
}

static void pg_close(ts_db *db) {
  if (db->conn) PQfinish(PG(db));
  db->conn = NULL;
  free(db->backend_state);
  db->backend_state = NULL;
}

/* ---- scratch schemas ---- */

char *db_pg_schema_url(const char *url, const char *schema) {
  size_t n = strlen(url) + strlen(schema) + 40;
  char *out = ts_malloc(n);
  if (!out) return NULL;
  snprintf(out, n, "%s%soptions=-csearch_path%%3D%s", url,
           strchr(url, '?') ? "&" : "?", schema);
  return out;
}

int db_pg_schema(const char *url, const char *schema, bool create,
                 ts_error *err) {
  char *shown = db_redact_url(url);
  if (!shown) return TS_ERR(err, TS_ENOMEM, "out of memory");
  const char *keys[] = {"connect_timeout", "fallback_application_name",
                        "dbname", NULL};
  const char *vals[] = {"10", "tessera", url, NULL};
  PGconn *conn = PQconnectdbParams(keys, vals, 1);
  int rc = TS_OK;
  if (PQstatus(conn) != CONNECTION_OK) {
    char msg[512];
    fold(PQerrorMessage(conn), msg, sizeof msg);
    rc =
        TS_ERR(err, TS_EIO, "%s: cannot connect to the server: %s", shown, msg);
  } else {
    PQsetNoticeProcessor(conn, quiet_notices, NULL);
    char *ident = PQescapeIdentifier(conn, schema, strlen(schema));
    char sql[256];
    snprintf(sql, sizeof sql,
             create ? "CREATE SCHEMA %s" : "DROP SCHEMA IF EXISTS %s CASCADE",
             ident ? ident : "\"\"");
    PQfreemem(ident);
    PGresult *res = PQexec(conn, sql);
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
      char msg[512];
      fold(PQresultErrorMessage(res), msg, sizeof msg);
      rc = TS_ERR(err, TS_EIO, "%s: %s schema %s: %s", shown,
                  create ? "creating" : "dropping", schema, msg);
    }
    PQclear(res);
  }
  PQfinish(conn);
  free(shown);
  return rc;
}

const db_backend db_pg_backend = {
    .name = "postgresql",
    .connect = pg_connect,
    .close = pg_close,
    .revive = pg_revive,
    .prepare = pg_prepare,
    .finalize = pg_finalize,
    .reset = pg_reset,
    .bind_int64 = pg_bind_int64,
    .bind_double = pg_bind_double,
    .bind_text = pg_bind_text,
    .bind_null = pg_bind_null,
    .step = pg_step,
    .column_type = pg_column_type,
    .column_int64 = pg_column_int64,
    .column_double = pg_column_double,
    .column_text = pg_column_text,
    .column_bytes = pg_column_bytes,
    .exec = pg_exec,
    .begin_write = pg_begin_write,
    .begin_read = pg_begin_read,
    .commit = pg_commit,
    .rollback = pg_rollback,
    .last_insert_id = pg_last_insert_id,
    .changes = pg_changes,
    .errmsg = pg_errmsg,
    .vacuum = pg_vacuum,
    .integrity_check = pg_integrity_check,
    .sizes = pg_sizes,
};
