/*
 * export.c — the database as JSON Lines and back. Export writes a header
 * line, then every target, workload, job, record, vendor baseline and
 * choice measured in a model in id order, each a compact JSON object with
 * ids renumbered from 1 (records, baselines and choices refer to them), so
 * two databases with the same contents export to the same bytes. Import
 * reads such a file twice: the first pass checks every line (syntax,
 * fields, references, TIR against its hash, traces through the check hook)
 * without writing; the second writes everything in one transaction, reusing
 * the workloads, targets and jobs the database already has, keeping the
 * newer of two baselines of the same workload, target, vendor and thread
 * count, and the later measured of two choices of the same target, kind,
 * subject and option.
 */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT_FORMAT "tessera-db"
#define EXPORT_FORMAT_VERSION 1

/* ---- a map from exported ids to database ids ---- */

typedef struct id_map {
  int64_t *keys, *values;
  size_t cap, size;
} id_map;

static size_t slot_of(const id_map *m, int64_t key) {
  uint64_t x = (uint64_t)key * 0x9E3779B97F4A7C15ull;
  return (size_t)(x >> 20) & (m->cap - 1);
}

static void map_free(id_map *m) {
  free(m->keys);
  free(m->values);
  memset(m, 0, sizeof *m);
}

static int64_t map_get(const id_map *m, int64_t key) {
  if (!m->cap) return 0;
  for (size_t j = slot_of(m, key); m->keys[j]; j = (j + 1) & (m->cap - 1))
    if (m->keys[j] == key) return m->values[j];
  return 0;
}

/* false (the map unchanged) when out of memory */
static bool map_put(id_map *m, int64_t key, int64_t value) {
  if ((m->size + 1) * 2 > m->cap) {
    id_map g = {NULL, NULL, m->cap ? m->cap * 2 : 64, 0};
    g.keys = ts_calloc(g.cap, sizeof *g.keys);
    g.values = ts_calloc(g.cap, sizeof *g.values);
    if (!g.keys || !g.values) {
      map_free(&g);
      return false;
    }
    for (size_t i = 0; i < m->cap; i++)
      if (m->keys[i]) map_put(&g, m->keys[i], m->values[i]);
    map_free(m);
    *m = g;
  }
  size_t j = slot_of(m, key);
  while (m->keys[j] && m->keys[j] != key) j = (j + 1) & (m->cap - 1);
  if (!m->keys[j]) m->size++;
  m->keys[j] = key;
  m->values[j] = value;
  return true;
}

/* ---- export ---- */

typedef struct exporter {
  ts_db *db;
  FILE *out;
  id_map targets, workloads, jobs; /* database id -> exported id */
} exporter;

/* Writes obj (deleted here) as one line, unless an allocation failed since
 * `failures` (a ts_alloc_failures value taken before obj was built: a
 * field may be missing) or printing it fails. */
static int write_line(exporter *x, cJSON *obj, unsigned long failures) {
  char *s = ts_json_print(obj, failures, false);
  cJSON_Delete(obj);
  if (!s) return db_nomem(x->db, "exporting");
  bool ok = fputs(s, x->out) >= 0 && fputc('\n', x->out) != EOF;
  cJSON_free(s);
  if (!ok)
    return TS_ERR(&x->db->err, TS_EIO, "export: write failed: %s",
                  strerror(errno));
  return TS_OK;
}

static void add_text(cJSON *o, const char *key, db_q *st, int col) {
  const char *s = (const char *)db_column_text(st, col);
  if (s)
    cJSON_AddStringToObject(o, key, s);
  else
    cJSON_AddNullToObject(o, key);
}

static void add_int_or_null(cJSON *o, const char *key, db_q *st, int col) {
  if (db_column_type(st, col) == SQLITE_NULL)
    cJSON_AddNullToObject(o, key);
  else
    cJSON_AddNumberToObject(o, key, (double)db_column_int64(st, col));
}

/* Exports the rows of one query; `row` turns a row into a line. */
static int export_rows(exporter *x, const char *sql,
                       cJSON *(*row)(exporter *x, db_q *st, int64_t ordinal)) {
  db_q *st;
  int rc = db_prepare(x->db, sql, &st);
  if (rc) return rc;
  int64_t ordinal = 0;
  int code = TS_OK;
  while (code == TS_OK && (rc = db_step(x->db, st)) == SQLITE_ROW) {
    unsigned long failures = ts_alloc_failures();
    code = write_line(x, row(x, st, ++ordinal), failures);
  }
  if (code == TS_OK && rc != SQLITE_DONE)
    code = db_fail(x->db, rc, "exporting");
  db_finalize(st);
  return code;
}

static cJSON *target_row(exporter *x, db_q *st, int64_t ordinal) {
  if (!map_put(&x->targets, db_column_int64(st, 0), ordinal)) return NULL;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "type", "target");
  cJSON_AddNumberToObject(o, "id", (double)ordinal);
  add_text(o, "target", st, 1);
  db_json_add_stored(o, "probe", (const char *)db_column_text(st, 2));
  add_text(o, "probed", st, 3);
  add_text(o, "created", st, 4);
  return o;
}

static cJSON *workload_row(exporter *x, db_q *st, int64_t ordinal) {
  if (!map_put(&x->workloads, db_column_int64(st, 0), ordinal)) return NULL;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "type", "workload");
  cJSON_AddNumberToObject(o, "id", (double)ordinal);
  add_text(o, "hash", st, 1);
  add_text(o, "name", st, 2);
  cJSON_AddNumberToObject(o, "flops", db_column_double(st, 3));
  add_text(o, "created", st, 4);
  add_text(o, "tir", st, 5);
  return o;
}

static cJSON *job_row(exporter *x, db_q *st, int64_t ordinal) {
  if (!map_put(&x->jobs, db_column_int64(st, 0), ordinal)) return NULL;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "type", "job");
  cJSON_AddNumberToObject(o, "id", (double)ordinal);
  add_text(o, "name", st, 1);
  db_json_add_stored(o, "config", (const char *)db_column_text(st, 2));
  add_text(o, "state", st, 3);
  add_text(o, "started", st, 4);
  add_text(o, "finished", st, 5);
  cJSON_AddNumberToObject(o, "trials_budget", (double)db_column_int64(st, 6));
  cJSON_AddNumberToObject(o, "trials_done", (double)db_column_int64(st, 7));
  return o;
}

static cJSON *record_row(exporter *x, db_q *st, int64_t ordinal) {
  (void)ordinal;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "type", "record");
  cJSON_AddNumberToObject(
      o, "workload", (double)map_get(&x->workloads, db_column_int64(st, 0)));
  cJSON_AddNumberToObject(o, "target",
                          (double)map_get(&x->targets, db_column_int64(st, 1)));
  if (db_column_type(st, 2) == SQLITE_NULL)
    cJSON_AddNullToObject(o, "job");
  else
    cJSON_AddNumberToObject(o, "job",
                            (double)map_get(&x->jobs, db_column_int64(st, 2)));
  add_int_or_null(o, "trial", st, 3);
  add_text(o, "status", st, 4);
  db_json_add_stored(o, "run_secs", (const char *)db_column_text(st, 5));
  if (db_column_type(st, 6) == SQLITE_NULL)
    cJSON_AddNullToObject(o, "median_s");
  else
    cJSON_AddNumberToObject(o, "median_s", db_column_double(st, 6));
  add_text(o, "error", st, 7);
  add_text(o, "worker", st, 8);
  add_text(o, "tessera", st, 9);
  add_text(o, "created", st, 10);
  db_json_add_stored(o, "measure", (const char *)db_column_text(st, 12));
  db_json_add_stored(o, "trace", (const char *)db_column_text(st, 11));
  return o;
}

static cJSON *baseline_row(exporter *x, db_q *st, int64_t ordinal) {
  (void)ordinal;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "type", "baseline");
  cJSON_AddNumberToObject(
      o, "workload", (double)map_get(&x->workloads, db_column_int64(st, 0)));
  cJSON_AddNumberToObject(o, "target",
                          (double)map_get(&x->targets, db_column_int64(st, 1)));
  add_text(o, "vendor", st, 2);
  cJSON_AddNumberToObject(o, "threads", (double)db_column_int64(st, 3));
  cJSON_AddNumberToObject(o, "gflops", db_column_double(st, 4));
  add_text(o, "created", st, 5);
  /* a level measured beside the confirmed best: only then the two fields
   * (older readers ignore them) */
  if (db_column_type(st, 6) != SQLITE_NULL &&
      db_column_type(st, 7) != SQLITE_NULL) {
    cJSON_AddNumberToObject(o, "side_ratio", db_column_double(st, 6));
    cJSON_AddNumberToObject(o, "side_rounds", (double)db_column_int64(st, 7));
  }
  return o;
}

/* A choice measured in a model: its target by export ordinal. */
static cJSON *choice_row(exporter *x, db_q *st, int64_t ordinal) {
  (void)ordinal;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "type", "choice");
  cJSON_AddNumberToObject(o, "target",
                          (double)map_get(&x->targets, db_column_int64(st, 0)));
  add_text(o, "kind", st, 1);
  add_text(o, "subject", st, 2);
  add_text(o, "option", st, 3);
  cJSON_AddNumberToObject(o, "seconds", db_column_double(st, 4));
  cJSON_AddNumberToObject(o, "samples", (double)db_column_int64(st, 5));
  add_text(o, "measured", st, 6);
  return o;
}

/* The whole database, or (target_id > 0) one target's records, baselines
 * and choices with every workload and job. */
static int export_filtered(ts_db *db, FILE *out, int64_t target_id) {
  char where_target[64] = "", where_records[64] = "";
  if (target_id > 0) {
    snprintf(where_target, sizeof where_target, " WHERE id = %lld",
             (long long)target_id);
    snprintf(where_records, sizeof where_records, " WHERE target_id = %lld",
             (long long)target_id);
  }
  char sql[512];
  /* one read transaction: a consistent snapshot while writers go on */
  int rc = db_begin_read(db, "exporting");
  if (rc) return rc;
  exporter x = {db, out, {0}, {0}, {0}};
  unsigned long failures = ts_alloc_failures();
  cJSON *header = cJSON_CreateObject();
  cJSON_AddStringToObject(header, "format", EXPORT_FORMAT);
  cJSON_AddNumberToObject(header, "format_version", EXPORT_FORMAT_VERSION);
  cJSON_AddNumberToObject(header, "schema_version", TS_DB_SCHEMA_VERSION);
  cJSON_AddStringToObject(header, "tessera", TS_VERSION);
  rc = write_line(&x, header, failures);
  if (!rc) {
    snprintf(sql, sizeof sql,
             "SELECT id, target, probe, probed, created FROM targets%s "
             "ORDER BY id",
             where_target);
    rc = export_rows(&x, sql, target_row);
  }
  if (!rc)
    rc = export_rows(&x,
                     "SELECT id, hash, name, flops, created, tir FROM "
                     "workloads ORDER BY id",
                     workload_row);
  if (!rc) rc = export_rows(&x, "SELECT " JOB_COLUMNS " ORDER BY id", job_row);
  if (!rc) {
    snprintf(sql, sizeof sql,
             "SELECT workload_id, target_id, job_id, trial, status, "
             "run_secs, median_s, error, worker, version, created, "
             "trace, measure FROM records%s ORDER BY id",
             where_records);
    rc = export_rows(&x, sql, record_row);
  }
  if (!rc) {
    snprintf(sql, sizeof sql,
             "SELECT workload_id, target_id, vendor, threads, gflops, "
             "created, side_ratio, side_rounds FROM baselines%s ORDER BY id",
             where_records);
    rc = export_rows(&x, sql, baseline_row);
  }
  /* a database older than the table (opened read-only as it is) has none */
  if (!rc && db->schema_version >= DB_CHOICES_VERSION) {
    snprintf(sql, sizeof sql,
             "SELECT target_id, kind, subject, option, seconds, samples, "
             "measured FROM choices%s ORDER BY id",
             where_records);
    rc = export_rows(&x, sql, choice_row);
  }
  db_exec(db, "COMMIT", "exporting");
  map_free(&x.targets);
  map_free(&x.workloads);
  map_free(&x.jobs);
  if (!rc && fflush(out) != 0)
    rc = TS_ERR(&db->err, TS_EIO, "export: write failed: %s", strerror(errno));
  return rc;
}

int ts_db_export(ts_db *db, FILE *out) {
  db_begin_call(db);
  return export_filtered(db, out, 0);
}

int ts_db_sync(ts_db *from, ts_db *to, const char *target,
               ts_db_import_stats *stats) {
  db_begin_call(from);
  db_begin_call(to);
  if (stats) memset(stats, 0, sizeof *stats);
  int64_t target_id = 0;
  if (target) {
    int rc = db_target_id(from, target, false, &target_id);
    if (rc == TS_ENOTFOUND) {
      /* nothing measured on that target: nothing to copy */
      return TS_OK;
    }
    if (rc) {
      ts_error e = from->err;
      to->err = e;
      return rc;
    }
  }
  FILE *tmp = tmpfile();
  if (!tmp)
    return TS_ERR(&to->err, TS_EIO, "sync: cannot create a temporary file: %s",
                  strerror(errno));
  int rc = export_filtered(from, tmp, target_id);
  if (rc) {
    to->err = from->err;
    fclose(tmp);
    return rc;
  }
  rewind(tmp);
  char name[600];
  snprintf(name, sizeof name, "%s", from->path);
  rc = ts_db_import(to, tmp, name, stats);
  fclose(tmp);
  return rc;
}

/* ---- import ---- */

typedef struct importer {
  ts_db *db;
  FILE *in;
  const char *name;
  bool write; /* second pass: store */
  int64_t line;
  id_map targets, workloads, jobs; /* exported id -> database id (pass 1: 1) */
  ts_db_import_stats stats;
} importer;

static int fail(importer *im, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int fail(importer *im, const char *fmt, ...) {
  char msg[900];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return TS_ERR_AT(&im->db->err, TS_EINVAL, (int)im->line, 0, "%s:%lld: %s",
                   im->name, (long long)im->line, msg);
}

static int out_of_memory(importer *im) {
  return TS_ERR_AT(&im->db->err, TS_ENOMEM, (int)im->line, 0,
                   "%s:%lld: out of memory", im->name, (long long)im->line);
}

static const cJSON *field(const cJSON *o, const char *key) {
  return cJSON_GetObjectItemCaseSensitive(o, key);
}

/* A string field; NULL allowed only with `nullable`. */
static int get_string(importer *im, const cJSON *o, const char *key,
                      bool nullable, const char **out) {
  const cJSON *v = field(o, key);
  *out = NULL;
  if (nullable && (!v || cJSON_IsNull(v))) return TS_OK;
  if (!cJSON_IsString(v))
    return fail(im, "field \"%s\": %s", key,
                v ? "expected a string" : "missing");
  *out = v->valuestring;
  return TS_OK;
}

/* An integer field (exactly representable); *is_null for null when
 * nullable. */
static int get_int(importer *im, const cJSON *o, const char *key, bool nullable,
                   int64_t *out, bool *is_null) {
  const cJSON *v = field(o, key);
  *out = 0;
  if (is_null) *is_null = false;
  if (nullable && (!v || cJSON_IsNull(v))) {
    if (is_null) *is_null = true;
    return TS_OK;
  }
  if (!cJSON_IsNumber(v))
    return fail(im, "field \"%s\": %s", key,
                v ? "expected an integer" : "missing");
  double d = v->valuedouble;
  if (d != floor(d) || fabs(d) > 9007199254740992.0)
    return fail(im, "field \"%s\": %g is not an integer", key, d);
  *out = (int64_t)d;
  return TS_OK;
}

static int get_number(importer *im, const cJSON *o, const char *key,
                      bool nullable, double *out) {
  const cJSON *v = field(o, key);
  *out = NAN;
  if (nullable && (!v || cJSON_IsNull(v))) return TS_OK;
  if (!cJSON_IsNumber(v))
    return fail(im, "field \"%s\": %s", key,
                v ? "expected a number" : "missing");
  *out = v->valuedouble;
  return TS_OK;
}

/* An exported id: positive and not seen before in its kind. */
static int get_new_id(importer *im, const cJSON *o, id_map *m, int64_t *id) {
  int rc = get_int(im, o, "id", false, id, NULL);
  if (rc) return rc;
  if (*id <= 0) return fail(im, "field \"id\": must be positive");
  if (map_get(m, *id))
    return fail(im, "field \"id\": %lld appears twice", (long long)*id);
  return TS_OK;
}

/* A reference to an earlier line's id; 0 for null when nullable. */
static int get_ref(importer *im, const cJSON *o, const char *key, id_map *m,
                   bool nullable, int64_t *db_id) {
  int64_t ref;
  bool is_null;
  int rc = get_int(im, o, key, nullable, &ref, &is_null);
  if (rc) return rc;
  *db_id = 0;
  if (is_null) return TS_OK;
  if (!(*db_id = map_get(m, ref)))
    return fail(im, "field \"%s\": no %s with id %lld on an earlier line", key,
                key, (long long)ref);
  return TS_OK;
}

/* A stored-JSON field (object, or string holding JSON text); must be an
 * object when parsed. *out malloc'd, NULL for null when nullable. */
static int get_json_text(importer *im, const cJSON *o, const char *key,
                         bool nullable, char **out) {
  const cJSON *v = field(o, key);
  *out = NULL;
  if (nullable && (!v || cJSON_IsNull(v))) return TS_OK;
  if (!v) return fail(im, "field \"%s\": missing", key);
  if (!cJSON_IsObject(v) && !cJSON_IsString(v) && !cJSON_IsArray(v))
    return fail(im, "field \"%s\": expected a JSON object", key);
  *out = db_json_stored_text(v);
  if (!*out) return db_nomem(im->db, "importing");
  return TS_OK;
}

static int store(importer *im, db_statement which, int64_t *id) {
  db_q *st = im->db->stmts[which];
  int rc = db_step(im->db, st);
  db_reset(st);
  if (rc != SQLITE_DONE) return db_fail(im->db, rc, "importing");
  if (id) *id = db_last_insert_id(im->db);
  return TS_OK;
}

static int import_target(importer *im, const cJSON *o) {
  int64_t id;
  const char *target, *probed, *created;
  char *probe = NULL;
  int rc;
  if ((rc = get_new_id(im, o, &im->targets, &id)) ||
      (rc = get_string(im, o, "target", false, &target)) ||
      (rc = get_string(im, o, "probed", true, &probed)) ||
      (rc = get_string(im, o, "created", false, &created)) ||
      (rc = get_json_text(im, o, "probe", true, &probe)))
    return rc;
  ts_db *db = im->db;
  if (probe && db_check_json_object(probe, "field \"probe\"", &db->err)) {
    ts_error e = db->err;
    free(probe);
    return fail(im, "%s", e.msg);
  }
  char *canonical = ts_db_canonical_target(db, target);
  if (!canonical) {
    ts_error e = db->err;
    free(probe);
    return fail(im, "field \"target\": %s", e.msg);
  }
  int64_t db_id = 1;
  if (im->write) {
    rc = db_target_id(db, canonical, false, &db_id);
    if (rc == TS_OK) {
      im->stats.targets_existing++;
    } else if (rc == TS_ENOTFOUND) {
      ts_error_clear(&db->err);
      db_q *st = db_stmt(db, ST_INSERT_TARGET);
      rc = st ? TS_OK : db->err.code;
      if (st) {
        db_bind_text(st, 1, canonical, -1);
        if (probe) db_bind_text(st, 2, probe, -1);
        if (probed) db_bind_text(st, 3, probed, -1);
        db_bind_text(st, 4, created, -1);
        rc = store(im, ST_INSERT_TARGET, &db_id);
      }
      if (rc == TS_OK) im->stats.targets_new++;
    }
  }
  free(canonical);
  free(probe);
  if (rc) return rc;
  if (!map_put(&im->targets, id, db_id)) return db_nomem(im->db, "importing");
  return TS_OK;
}

static int import_workload(importer *im, const cJSON *o) {
  int64_t id;
  const char *hash, *name, *created, *tir;
  double flops;
  int rc;
  if ((rc = get_new_id(im, o, &im->workloads, &id)) ||
      (rc = get_string(im, o, "hash", false, &hash)) ||
      (rc = get_string(im, o, "name", false, &name)) ||
      (rc = get_number(im, o, "flops", false, &flops)) ||
      (rc = get_string(im, o, "created", false, &created)) ||
      (rc = get_string(im, o, "tir", false, &tir)))
    return rc;
  ts_func *f = NULL;
  ts_error perr;
  ts_error_clear(&perr);
  if (ts_func_parse(tir, strlen(tir), "tir", &f, &perr) != TS_OK)
    return fail(im, "field \"tir\": %s", perr.msg);
  char hex[33];
  ts_hash128_hex(ts_func_hash(f), hex);
  if (strcmp(hex, hash)) {
    ts_func_free(f);
    return fail(im,
                "field \"hash\": %s does not match the structural hash of "
                "its TIR (%s)",
                hash, hex);
  }
  int64_t db_id = 1;
  if (im->write) {
    rc = db_match_workload(im->db, f, hex, &db_id);
    if (rc == TS_OK && db_id) {
      im->stats.workloads_existing++;
    } else if (rc == TS_OK) {
      rc = db_insert_workload(im->db, hex, name, tir, flops, created, &db_id);
      if (rc == TS_OK) im->stats.workloads_new++;
    }
  }
  ts_func_free(f);
  if (rc) return rc;
  if (!map_put(&im->workloads, id, db_id)) return db_nomem(im->db, "importing");
  return TS_OK;
}

static int import_job(importer *im, const cJSON *o) {
  int64_t id, budget, done;
  const char *name, *state, *started, *finished;
  char *config = NULL;
  ts_db_job_state s;
  int rc;
  if ((rc = get_new_id(im, o, &im->jobs, &id)) ||
      (rc = get_string(im, o, "name", false, &name)) ||
      (rc = get_string(im, o, "state", false, &state)) ||
      (rc = get_string(im, o, "started", false, &started)) ||
      (rc = get_string(im, o, "finished", true, &finished)) ||
      (rc = get_int(im, o, "trials_budget", false, &budget, NULL)) ||
      (rc = get_int(im, o, "trials_done", false, &done, NULL)))
    return rc;
  if (ts_db_job_state_parse(state, &s) != TS_OK)
    return fail(im, "field \"state\": unknown job state '%s'", state);
  if (budget < 0 || done < 0)
    return fail(im, "field \"%s\": negative count",
                budget < 0 ? "trials_budget" : "trials_done");
  if (!name[0]) return fail(im, "field \"name\": empty");
  if ((rc = get_json_text(im, o, "config", false, &config))) return rc;
  ts_db *db = im->db;
  if (db_check_json_object(config, "field \"config\"", &db->err)) {
    ts_error e = db->err;
    free(config);
    return fail(im, "%s", e.msg);
  }
  int64_t db_id = 1;
  if (im->write) {
    db_q *st = db_stmt(db, ST_JOB_BY_NAME);
    rc = st ? TS_OK : db->err.code;
    if (st) {
      db_bind_text(st, 1, name, -1);
      int step = db_step(db, st);
      db_id = step == SQLITE_ROW ? db_column_int64(st, 0) : 0;
      db_reset(st);
      if (step != SQLITE_ROW && step != SQLITE_DONE)
        rc = db_fail(db, step, "importing");
    }
    if (rc == TS_OK && db_id) {
      im->stats.jobs_existing++;
    } else if (rc == TS_OK) {
      if ((st = db_stmt(db, ST_JOB_INSERT))) {
        db_bind_text(st, 1, name, -1);
        db_bind_text(st, 2, config, -1);
        db_bind_text(st, 3, state, -1);
        db_bind_text(st, 4, started, -1);
        if (finished) db_bind_text(st, 5, finished, -1);
        db_bind_int64(st, 6, budget);
        db_bind_int64(st, 7, done);
        rc = store(im, ST_JOB_INSERT, &db_id);
      } else {
        rc = db->err.code;
      }
      if (rc == TS_OK) im->stats.jobs_new++;
    }
  }
  free(config);
  if (rc) return rc;
  if (!map_put(&im->jobs, id, db_id)) return db_nomem(im->db, "importing");
  return TS_OK;
}

/* Not an error: import_record's "already there, skip it". */
#define TS_DB_DUPLICATE 1

/* Whether the database holds the record (workload, target, created,
 * trace, run_secs, status): its identity on import. */
static int record_exists(importer *im, int64_t workload, int64_t target,
                         const char *created, const char *trace,
                         const char *run_secs, const char *status,
                         bool *present) {
  ts_db *db = im->db;
  db_q *st = db_stmt(db, ST_RECORD_EXISTS);
  if (!st) return db->err.code;
  db_bind_int64(st, 1, workload);
  db_bind_int64(st, 2, target);
  db_bind_text(st, 3, created, -1);
  db_bind_text(st, 4, trace, -1);
  db_bind_text(st, 5, run_secs, -1);
  db_bind_text(st, 6, status, -1);
  int step = db_step(db, st);
  *present = step == SQLITE_ROW;
  db_reset(st);
  if (step != SQLITE_ROW && step != SQLITE_DONE)
    return db_fail(db, step, "importing");
  return TS_OK;
}

/* A record's "measure" field: a JSON object (or a string holding one), as
 * export writes it; absent or null (an older export) is NULL. */
static int get_measure(importer *im, const cJSON *o, char **out) {
  int rc = get_json_text(im, o, "measure", true, out);
  if (rc || !*out) return rc;
  ts_db *db = im->db;
  if (db_check_json_object(*out, "field \"measure\"", &db->err)) {
    ts_error e = db->err;
    free(*out);
    *out = NULL;
    return fail(im, "%s", e.msg);
  }
  return TS_OK;
}

static int import_record(importer *im, const cJSON *o) {
  int64_t workload, target, job, trial;
  bool no_trial;
  const char *status_name, *error, *worker, *version, *created;
  double median;
  ts_db_status status;
  int rc;
  if ((rc = get_ref(im, o, "workload", &im->workloads, false, &workload)) ||
      (rc = get_ref(im, o, "target", &im->targets, false, &target)) ||
      (rc = get_ref(im, o, "job", &im->jobs, true, &job)) ||
      (rc = get_int(im, o, "trial", true, &trial, &no_trial)) ||
      (rc = get_string(im, o, "status", false, &status_name)) ||
      (rc = get_number(im, o, "median_s", true, &median)) ||
      (rc = get_string(im, o, "error", false, &error)) ||
      (rc = get_string(im, o, "worker", false, &worker)) ||
      (rc = get_string(im, o, "tessera", false, &version)) ||
      (rc = get_string(im, o, "created", false, &created)))
    return rc;
  if (ts_db_status_parse(status_name, &status) != TS_OK)
    return fail(im, "field \"status\": unknown status '%s'", status_name);
  char *run_json = NULL, *trace = NULL, *measure = NULL;
  if ((rc = get_json_text(im, o, "run_secs", false, &run_json))) return rc;
  cJSON *parsed;
  if (db_json_parse(run_json, strlen(run_json), &parsed, NULL) == TS_ENOMEM) {
    free(run_json);
    return db_nomem(im->db, "importing");
  }
  bool numbers = cJSON_IsArray(parsed);
  const cJSON *x;
  cJSON_ArrayForEach(x, parsed) numbers = numbers && cJSON_IsNumber(x);
  cJSON_Delete(parsed);
  if (!numbers) {
    free(run_json);
    return fail(im, "field \"run_secs\": expected an array of numbers");
  }
  if ((rc = get_json_text(im, o, "trace", false, &trace)) ||
      (rc = get_measure(im, o, &measure))) {
    free(run_json);
    free(trace);
    return rc;
  }
  ts_db *db = im->db;
  ts_db_trace_check_fn check =
      db->opts.check_trace ? db->opts.check_trace : ts_db_check_trace_json;
  ts_error terr;
  ts_error_clear(&terr);
  if (check(db->opts.trace_ctx, trace, strlen(trace), &terr) != TS_OK) {
    rc = fail(im, "field \"trace\": %s",
              terr.msg[0] ? terr.msg : "the trace check failed");
  } else if (im->write) {
    bool present = false;
    rc = record_exists(im, workload, target, created, trace, run_json,
                       status_name, &present);
    db_q *st = NULL;
    if (rc == TS_OK && present) {
      im->stats.records_existing++;
      rc = TS_DB_DUPLICATE;
    } else if (rc == TS_OK) {
      st = db_stmt(db, ST_INSERT_RECORD);
      rc = st ? TS_OK : db->err.code;
    }
    if (st) {
      db_bind_int64(st, 1, workload);
      db_bind_int64(st, 2, target);
      db_bind_text(st, 3, trace, -1);
      db_bind_text(st, 4, run_json, -1);
      if (!isnan(median)) db_bind_double(st, 5, median);
      db_bind_text(st, 6, status_name, -1);
      db_bind_text(st, 7, error, -1);
      if (job) db_bind_int64(st, 8, job);
      if (!no_trial) db_bind_int64(st, 9, trial);
      db_bind_text(st, 10, worker, -1);
      db_bind_text(st, 11, version, -1);
      db_bind_text(st, 12, created, -1);
      if (measure) db_bind_text(st, 13, measure, -1);
      rc = store(im, ST_INSERT_RECORD, NULL);
    }
  }
  if (rc == TS_DB_DUPLICATE)
    rc = TS_OK;
  else if (rc == TS_OK)
    im->stats.records++;
  free(run_json);
  free(trace);
  free(measure);
  return rc;
}

static int import_baseline(importer *im, const cJSON *o) {
  int64_t workload, target, threads, side_rounds;
  const char *vendor, *created;
  double gflops, side_ratio;
  bool no_side;
  int rc;
  if ((rc = get_ref(im, o, "workload", &im->workloads, false, &workload)) ||
      (rc = get_ref(im, o, "target", &im->targets, false, &target)) ||
      (rc = get_string(im, o, "vendor", false, &vendor)) ||
      (rc = get_int(im, o, "threads", false, &threads, NULL)) ||
      (rc = get_number(im, o, "gflops", false, &gflops)) ||
      (rc = get_string(im, o, "created", false, &created)) ||
      (rc = get_int(im, o, "side_rounds", true, &side_rounds, &no_side)) ||
      (rc = get_number(im, o, "side_ratio", no_side, &side_ratio)))
    return rc;
  ts_error e;
  ts_error_clear(&e);
  if (db_check_baseline(vendor, threads, gflops, "", &e) ||
      (!no_side && db_check_side(side_ratio, side_rounds, "", &e)))
    return fail(im, "%s", e.msg);
  if (!im->write) return TS_OK;
  db_q *st = db_stmt(im->db, ST_BASELINE_PUT);
  if (!st) return im->db->err.code;
  db_bind_int64(st, 1, workload);
  db_bind_int64(st, 2, target);
  db_bind_text(st, 3, vendor, -1);
  db_bind_int64(st, 4, threads);
  db_bind_double(st, 5, gflops);
  db_bind_text(st, 6, created, -1);
  db_bind_int(st, 7, 1); /* keep the newer of two levels */
  db_bind_side(st, side_ratio, no_side ? 0 : (int)side_rounds);
  if ((rc = store(im, ST_BASELINE_PUT, NULL))) return rc;
  im->stats.baselines += db_changes(im->db);
  return TS_OK;
}

/* A choice line: checked like ts_db_choice_put's arguments; stored in place
 * of one of the same target, kind, subject and option measured earlier. */
static int import_choice(importer *im, const cJSON *o) {
  int64_t target, samples;
  const char *kind, *subject, *option, *measured;
  double seconds;
  int rc;
  if ((rc = get_ref(im, o, "target", &im->targets, false, &target)) ||
      (rc = get_string(im, o, "kind", false, &kind)) ||
      (rc = get_string(im, o, "subject", false, &subject)) ||
      (rc = get_string(im, o, "option", false, &option)) ||
      (rc = get_number(im, o, "seconds", false, &seconds)) ||
      (rc = get_int(im, o, "samples", false, &samples, NULL)) ||
      (rc = get_string(im, o, "measured", false, &measured)))
    return rc;
  ts_error e;
  ts_error_clear(&e);
  if (db_check_choice(kind, subject, option, seconds, samples, "", &e))
    return fail(im, "%s", e.msg);
  if (!im->write) return TS_OK;
  db_q *st = db_stmt(im->db, ST_CHOICE_PUT);
  if (!st) return im->db->err.code;
  db_bind_int64(st, 1, target);
  db_bind_text(st, 2, kind, -1);
  db_bind_text(st, 3, subject, -1);
  db_bind_text(st, 4, option, -1);
  db_bind_double(st, 5, seconds);
  db_bind_int64(st, 6, samples);
  db_bind_text(st, 7, measured, -1);
  db_bind_int(st, 8, 1); /* keep the later measured of two */
  if ((rc = store(im, ST_CHOICE_PUT, NULL))) return rc;
  im->stats.choices += db_changes(im->db);
  return TS_OK;
}

static int import_header(importer *im, const cJSON *o) {
  const char *format;
  int64_t version;
  int rc;
  if ((rc = get_string(im, o, "format", false, &format))) return rc;
  if (strcmp(format, EXPORT_FORMAT))
    return fail(im, "not a tessera database export (format \"%s\")", format);
  if ((rc = get_int(im, o, "format_version", false, &version, NULL))) return rc;
  if (version > EXPORT_FORMAT_VERSION || version < 1)
    return fail(im,
                "export format version %lld is not supported (this tessera "
                "reads version %d)",
                (long long)version, EXPORT_FORMAT_VERSION);
  return TS_OK;
}

static int import_pass(importer *im) {
  map_free(&im->targets);
  map_free(&im->workloads);
  map_free(&im->jobs);
  memset(&im->stats, 0, sizeof im->stats);
  im->line = 0;
  if (fseek(im->in, 0, SEEK_SET) != 0)
    return TS_ERR(&im->db->err, TS_EIO, "%s: cannot rewind: %s", im->name,
                  strerror(errno));
  char *buf = NULL;
  size_t cap = 0;
  ssize_t len;
  int rc = TS_OK;
  bool header = false;
  while (rc == TS_OK && (errno = 0, len = getline(&buf, &cap, im->in)) >= 0) {
    im->line++;
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
      buf[--len] = 0;
    if (len == 0) continue;
    /* an allocation that failed on this line (in cJSON, a map, a check)
     * may show as another error or none: it is out of memory */
    unsigned long failures = ts_alloc_failures();
    size_t off = 0;
    cJSON *o;
    int prc = db_json_parse(buf, (size_t)len, &o, &off);
    if (prc) {
      rc = prc == TS_ENOMEM
               ? out_of_memory(im)
               : fail(im, "not valid JSON (syntax error at byte %zu)", off);
      break;
    }
    if (!cJSON_IsObject(o)) {
      rc = fail(im, "expected a JSON object");
    } else if (!header) {
      rc = import_header(im, o);
      header = true;
    } else {
      const char *type;
      rc = get_string(im, o, "type", false, &type);
      if (rc) {
      } else if (!strcmp(type, "record")) {
        rc = import_record(im, o);
      } else if (!strcmp(type, "workload")) {
        rc = import_workload(im, o);
      } else if (!strcmp(type, "target")) {
        rc = import_target(im, o);
      } else if (!strcmp(type, "job")) {
        rc = import_job(im, o);
      } else if (!strcmp(type, "baseline")) {
        rc = import_baseline(im, o);
      } else if (!strcmp(type, "choice")) {
        rc = import_choice(im, o);
      } else {
        rc = fail(im, "field \"type\": unknown line type '%s'", type);
      }
    }
    cJSON_Delete(o);
    if (ts_alloc_failures() != failures && rc != TS_ENOMEM)
      rc = out_of_memory(im);
  }
  if (rc == TS_OK && !feof(im->in))
    rc = errno == ENOMEM && !ferror(im->in)
             ? out_of_memory(im)
             : TS_ERR(&im->db->err, TS_EIO, "%s: read error: %s", im->name,
                      strerror(errno));
  if (rc == TS_OK && !header)
    rc = TS_ERR(&im->db->err, TS_EINVAL,
                "%s: empty file, not a tessera "
                "database export",
                im->name);
  free(buf);
  im->stats.lines = im->line;
  return rc;
}

static int import_body(ts_db *db, void *p) {
  (void)db;
  return import_pass(p);
}

int ts_db_import(ts_db *db, FILE *in, const char *name,
                 ts_db_import_stats *stats) {
  db_begin_call(db);
  if (stats) memset(stats, 0, sizeof *stats);
  importer im = {db, in, name ? name : "import", false, 0, {0}, {0}, {0}, {0}};
  int rc = import_pass(&im);
  if (rc == TS_OK) {
    im.write = true;
    rc = db_write(db, import_body, &im);
  }
  if (rc == TS_OK && stats) *stats = im.stats;
  map_free(&im.targets);
  map_free(&im.workloads);
  map_free(&im.jobs);
  return rc;
}
