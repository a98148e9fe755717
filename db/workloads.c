/*
 * workloads.c — workloads and targets. A workload is found by the structural
 * hash of its unscheduled function and confirmed by structural equality with
 * the stored canonical text (parsed once per connection and cached), so a
 * hash collision can never hand out another workload's schedules. Targets
 * are stored by their canonical string (codegen's ts_target_parse), so
 * `llvm -mcpu=native` is stored as the concrete CPU and features.
 */
#include "internal.h"

#include "codegen/codegen.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

void ts_db_workload_clear(ts_db_workload *w) {
  if (!w) return;
  free(w->name);
  free(w->tir);
  memset(w, 0, sizeof *w);
}

/* Parses the stored text of workload id (not cached). */
static int parse_stored(ts_db *db, int64_t id, ts_func **out) {
  *out = NULL;
  db_q *st = db_stmt(db, ST_WORKLOAD_TIR);
  if (!st) return db->err.code;
  db_bind_int64(st, 1, id);
  int rc = db_step(db, st);
  if (rc != SQLITE_ROW) {
    db_reset(st);
    if (rc == SQLITE_DONE)
      return TS_ERR(&db->err, TS_ENOTFOUND, "%s: no workload with id %lld",
                    db->path, (long long)id);
    return db_fail(db, rc, "reading a workload");
  }
  const char *text = (const char *)db_column_text(st, 0);
  size_t len = (size_t)db_column_bytes(st, 0);
  ts_error perr;
  ts_error_clear(&perr);
  char name[64];
  snprintf(name, sizeof name, "workload %lld", (long long)id);
  int prc = ts_func_parse(text ? text : "", text ? len : 0, name, out, &perr);
  db_reset(st);
  if (prc == TS_ENOMEM) return db_nomem(db, "reading a workload");
  if (prc != TS_OK)
    return TS_ERR(&db->err, TS_EINVAL,
                  "%s: the stored TIR of workload %lld does not parse: %s",
                  db->path, (long long)id, perr.msg);
  return TS_OK;
}

const ts_func *db_workload_func_cached(ts_db *db, int64_t id) {
  const ts_func *f = func_cache_get(&db->funcs, id);
  if (f) return f;
  ts_func *parsed;
  if (parse_stored(db, id, &parsed) != TS_OK) return NULL;
  if (db->in_write) db->cached_in_write = true;
  f = func_cache_put(&db->funcs, id, parsed);
  if (!f) db_nomem(db, "reading a workload");
  return f;
}

/* The first stored workload with hash `hex` that is structurally equal to
 * f; *id = 0 when none. */
int db_match_workload(ts_db *db, const ts_func *f, const char *hex,
                      int64_t *id) {
  *id = 0;
  unsigned long failures = ts_alloc_failures();
  int64_t candidates[8];
  int n = 0, rc;
  db_q *st = db_stmt(db, ST_FIND_WORKLOADS);
  if (!st) return db->err.code;
  db_bind_text(st, 1, hex, 32);
  while ((rc = db_step(db, st)) == SQLITE_ROW)
    if (n < 8) candidates[n++] = db_column_int64(st, 0);
  db_reset(st);
  if (rc != SQLITE_DONE) return db_fail(db, rc, "finding a workload");
  /* (more than 8 structurally different workloads sharing one 128-bit hash
   * would need a broken hash; the first 8 are compared) */
  for (int i = 0; i < n; i++) {
    const ts_func *stored = db_workload_func_cached(db, candidates[i]);
    if (!stored) return db->err.code;
    if (ts_func_equal(f, stored)) {
      *id = candidates[i];
      return TS_OK;
    }
    /* out of memory makes the comparison false: not an answer */
    if (ts_alloc_failures() != failures)
      return db_nomem(db, "finding a workload");
  }
  return TS_OK;
}

/* The structural hash of f as 32 hex digits; TS_ENOMEM on db when out of
 * memory (ts_func_hash gives the zero hash then). */
static int hash_hex(ts_db *db, const ts_func *f, char hex[33]) {
  unsigned long failures = ts_alloc_failures();
  ts_hash128_hex(ts_func_hash(f), hex);
  if (ts_alloc_failures() != failures)
    return db_nomem(db, "hashing a workload");
  return TS_OK;
}

int ts_db_find_workload(ts_db *db, const ts_func *f, int64_t *id) {
  db_begin_call(db);
  char hex[33];
  int rc = hash_hex(db, f, hex);
  if (rc) return rc;
  rc = db_match_workload(db, f, hex, id);
  if (rc) return rc;
  if (!*id)
    return TS_ERR(&db->err, TS_ENOTFOUND, "%s: no workload with hash %s",
                  db->path, hex);
  return TS_OK;
}

int db_insert_workload(ts_db *db, const char *hash, const char *name,
                       const char *tir, double flops, const char *created,
                       int64_t *id) {
  db_q *st = db_stmt(db, ST_INSERT_WORKLOAD);
  if (!st) return db->err.code;
  db_bind_text(st, 1, hash, -1);
  db_bind_text(st, 2, name, -1);
  db_bind_text(st, 3, tir, -1);
  db_bind_double(st, 4, flops);
  db_bind_text(st, 5, created, -1);
  int rc = db_step(db, st);
  db_reset(st);
  if (rc != SQLITE_DONE) return db_fail(db, rc, "storing a workload");
  *id = db_last_insert_id(db);
  return TS_OK;
}

typedef struct commit_workload_ctx {
  const ts_func *f;
  const char *hex, *name, *tir;
  double flops;
  int64_t id;
} commit_workload_ctx;

static int commit_workload_body(ts_db *db, void *p) {
  commit_workload_ctx *c = p;
  int rc = db_match_workload(db, c->f, c->hex, &c->id);
  if (rc || c->id) return rc;
  char now[32];
  db_timestamp(now);
  return db_insert_workload(db, c->hex, c->name, c->tir, c->flops, now, &c->id);
}

int ts_db_commit_workload(ts_db *db, const ts_func *f, const char *name,
                          int64_t *id) {
  db_begin_call(db);
  *id = 0;
  if (!f) return TS_ERR(&db->err, TS_EINVAL, "commit_workload: no function");
  char hex[33];
  int rc = hash_hex(db, f, hex);
  if (rc) return rc;
  /* Most commits find the workload: answer without taking the write lock. */
  rc = db_match_workload(db, f, hex, id);
  if (rc || *id) return rc;
  if (!name || !name[0]) name = ts_func_name(f);
  if (!name || !name[0]) name = "workload";
  unsigned long failures = ts_alloc_failures();
  char *tir = ts_func_print(f);
  /* (out of memory in ts_func_flops gives a wrong count, not an error) */
  double flops = ts_func_flops(f);
  if (!tir || ts_alloc_failures() != failures) {
    free(tir);
    return db_nomem(db, "printing a workload");
  }
  commit_workload_ctx c = {f, hex, name, tir, flops, 0};
  rc = db_write(db, commit_workload_body, &c);
  free(tir);
  if (rc == TS_OK) *id = c.id;
  return rc;
}

int ts_db_get_workload(ts_db *db, int64_t id, ts_db_workload *out) {
  db_begin_call(db);
  memset(out, 0, sizeof *out);
  db_q *st = db_stmt(db, ST_GET_WORKLOAD);
  if (!st) return db->err.code;
  db_bind_int64(st, 1, id);
  int rc = db_step(db, st);
  bool oom = false;
  if (rc == SQLITE_ROW) {
    out->id = db_column_int64(st, 0);
    db_column_copy(st, 1, out->hash, sizeof out->hash);
    out->name = db_column_strdup(st, 2, &oom);
    out->tir = db_column_strdup(st, 3, &oom);
    out->flops = db_column_double(st, 4);
    db_column_copy(st, 5, out->created, sizeof out->created);
  }
  db_reset(st);
  if (oom) {
    ts_db_workload_clear(out);
    return db_nomem(db, "reading a workload");
  }
  if (rc == SQLITE_DONE)
    return TS_ERR(&db->err, TS_ENOTFOUND, "%s: no workload with id %lld",
                  db->path, (long long)id);
  if (rc != SQLITE_ROW) return db_fail(db, rc, "reading a workload");
  return TS_OK;
}

int ts_db_workload_func(ts_db *db, int64_t id, ts_func **out) {
  db_begin_call(db);
  return parse_stored(db, id, out);
}

/* Collects up to 6 ids matching a statement with one or two text
 * bindings. */
static int collect_ids(ts_db *db, db_statement which, const char *a,
                       const char *b, int64_t ids[6], char hashes[6][33],
                       int *n) {
  *n = 0;
  db_q *st = db_stmt(db, which);
  if (!st) return db->err.code;
  db_bind_text(st, 1, a, -1);
  if (b) db_bind_text(st, 2, b, -1);
  int rc;
  while ((rc = db_step(db, st)) == SQLITE_ROW && *n < 6) {
    ids[*n] = db_column_int64(st, 0);
    db_column_copy(st, 1, hashes[*n], 33);
    (*n)++;
  }
  db_reset(st);
  if (rc != SQLITE_DONE && rc != SQLITE_ROW)
    return db_fail(db, rc, "finding a workload");
  return TS_OK;
}

int ts_db_resolve_workload(ts_db *db, const char *key, int64_t *id) {
  db_begin_call(db);
  *id = 0;
  if (!key || !key[0]) return TS_ERR(&db->err, TS_EINVAL, "empty workload key");
  int64_t ids[6];
  char hashes[6][33];
  int n = 0, rc;
  size_t len = strlen(key);
  bool hex = len >= 4 && len <= 32;
  for (size_t i = 0; hex && i < len; i++)
    hex = isdigit((unsigned char)key[i]) || (key[i] >= 'a' && key[i] <= 'f') ||
          (key[i] >= 'A' && key[i] <= 'F');
  if (hex) {
    char lo[33], hi[34];
    for (size_t i = 0; i <= len; i++)
      lo[i] = (char)tolower((unsigned char)key[i]);
    snprintf(hi, sizeof hi, "%sg", lo); /* 'g' sorts after every hex digit */
    if ((rc = collect_ids(db, ST_WORKLOADS_BY_PREFIX, lo, hi, ids, hashes, &n)))
      return rc;
  }
  if (n == 0 &&
      (rc = collect_ids(db, ST_WORKLOADS_BY_NAME, key, NULL, ids, hashes, &n)))
    return rc;
  if (n == 0)
    return TS_ERR(&db->err, TS_ENOTFOUND,
                  "%s: no workload matches '%s' (give a hash, a hash prefix "
                  "of at least 4 digits, or a name; `tessera db list` shows "
                  "them)",
                  db->path, key);
  if (n > 1) {
    char list[6 * 16] = "";
    size_t used = 0;
    for (int i = 0; i < n && i < 5; i++)
      used += (size_t)snprintf(list + used, sizeof list - used, "%s%.12s",
                               i ? ", " : "", hashes[i]);
    return TS_ERR(&db->err, TS_EINVAL,
                  "%s: '%s' is ambiguous: it matches %s%s; give more hash "
                  "digits",
                  db->path, key, list, n > 5 ? ", ..." : "");
  }
  *id = ids[0];
  return TS_OK;
}

/* ---- targets ---- */

/* The cache entry for a given target string (parsing it on a miss). */
static target_entry *target_entry_of(ts_db *db, const char *given) {
  target_entry *e = target_cache_find(&db->targets, given);
  if (e) return e;
  ts_target *t = NULL;
  ts_error perr;
  ts_error_clear(&perr);
  int rc = ts_target_parse(given, &t, &perr);
  if (rc == TS_ENOMEM) {
    db_nomem(db, "reading a target");
    return NULL;
  }
  if (rc != TS_OK) {
    TS_ERR(&db->err, TS_EINVAL, "bad target '%s': %s", given, perr.msg);
    return NULL;
  }
  e = target_cache_add(&db->targets, given, ts_target_str(t));
  ts_target_free(t);
  if (!e) db_nomem(db, "reading a target");
  return e;
}

char *ts_db_canonical_target(ts_db *db, const char *target) {
  db_begin_call(db);
  if (!target) {
    TS_ERR(&db->err, TS_EINVAL, "no target given");
    return NULL;
  }
  target_entry *e = target_entry_of(db, target);
  if (!e) return NULL;
  char *s = ts_strdup(e->canonical);
  if (!s) db_nomem(db, "reading a target");
  return s;
}

int db_target_id(ts_db *db, const char *target, bool create, int64_t *id) {
  *id = 0;
  if (!target || !target[0])
    return TS_ERR(&db->err, TS_EINVAL, "no target given");
  target_entry *e = target_entry_of(db, target);
  if (!e) return db->err.code;
  if (e->id) {
    *id = e->id;
    return TS_OK;
  }
  db_q *st = db_stmt(db, ST_FIND_TARGET);
  if (!st) return db->err.code;
  db_bind_text(st, 1, e->canonical, -1);
  int rc = db_step(db, st);
  if (rc == SQLITE_ROW) *id = db_column_int64(st, 0);
  db_reset(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE)
    return db_fail(db, rc, "finding a target");
  if (*id) {
    /* Remember only rows read outside a write: inside one, the row may
     * have been inserted by the same transaction, which can still roll
     * back. */
    if (!db->in_write) e->id = *id;
    return TS_OK;
  }
  if (!create)
    return TS_ERR(&db->err, TS_ENOTFOUND, "%s: no records for target '%s'",
                  db->path, e->canonical);
  char now[32];
  db_timestamp(now);
  st = db_stmt(db, ST_INSERT_TARGET);
  if (!st) return db->err.code;
  db_bind_text(st, 1, e->canonical, -1);
  db_bind_null(st, 2);
  db_bind_null(st, 3);
  db_bind_text(st, 4, now, -1);
  rc = db_step(db, st);
  db_reset(st);
  if (rc != SQLITE_DONE) return db_fail(db, rc, "storing a target");
  *id = db_last_insert_id(db);
  return TS_OK;
}

typedef struct target_ctx {
  const char *target;
  int64_t id;
} target_ctx;

static int commit_target_body(ts_db *db, void *p) {
  target_ctx *c = p;
  return db_target_id(db, c->target, true, &c->id);
}

int ts_db_commit_target(ts_db *db, const char *target, int64_t *id) {
  db_begin_call(db);
  *id = 0;
  int rc = db_target_id(db, target, false, id);
  if (rc != TS_ENOTFOUND) return rc;
  db_begin_call(db);
  target_ctx c = {target, 0};
  rc = db_write(db, commit_target_body, &c);
  if (rc == TS_OK) *id = c.id;
  return rc;
}

int ts_db_find_target(ts_db *db, const char *target, int64_t *id) {
  db_begin_call(db);
  return db_target_id(db, target, false, id);
}

typedef struct probe_ctx {
  int64_t id;
  const char *json;
} probe_ctx;

static int set_probe_body(ts_db *db, void *p) {
  probe_ctx *c = p;
  db_q *st = db_stmt(db, ST_SET_PROBE);
  if (!st) return db->err.code;
  char now[32];
  db_timestamp(now);
  db_bind_int64(st, 1, c->id);
  if (c->json) {
    db_bind_text(st, 2, c->json, -1);
    db_bind_text(st, 3, now, -1);
  }
  int rc = db_step(db, st);
  db_reset(st);
  if (rc != SQLITE_DONE) return db_fail(db, rc, "storing probe figures");
  if (db_changes(db) == 0)
    return TS_ERR(&db->err, TS_ENOTFOUND, "%s: no target with id %lld",
                  db->path, (long long)c->id);
  return TS_OK;
}

int ts_db_set_target_probe(ts_db *db, int64_t target_id, const char *json) {
  db_begin_call(db);
  if (json && db_check_json_object(json, "probe figures", &db->err))
    return db->err.code;
  probe_ctx c = {target_id, json};
  return db_write(db, set_probe_body, &c);
}

int ts_db_get_target_probe(ts_db *db, int64_t target_id, char **json) {
  db_begin_call(db);
  *json = NULL;
  db_q *st = db_stmt(db, ST_GET_PROBE);
  if (!st) return db->err.code;
  db_bind_int64(st, 1, target_id);
  int rc = db_step(db, st);
  bool oom = false;
  if (rc == SQLITE_ROW) *json = db_column_strdup(st, 0, &oom);
  db_reset(st);
  if (oom) return db_nomem(db, "reading probe figures");
  if (rc == SQLITE_DONE)
    return TS_ERR(&db->err, TS_ENOTFOUND, "%s: no target with id %lld",
                  db->path, (long long)target_id);
  if (rc != SQLITE_ROW) return db_fail(db, rc, "reading probe figures");
  return TS_OK;
}
