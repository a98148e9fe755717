/*
 * baselines.c — vendor-library levels: for a workload on a target, the
 * GFLOP/s a vendor library (OpenBLAS, oneDNN, a plain C loop) reached with a
 * given thread count. `tessera bench --db` and the tuner's summary store
 * them; reports draw them beside tessera's own curve. One row per workload,
 * target, vendor and thread count; a new measurement replaces the old one.
 * A confirmation stores its vendors with the side-by-side ratio of the
 * rounds it timed them in (side_ratio, side_rounds).
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define VENDOR_MAX 64

void ts_db_baseline_clear(ts_db_baseline *b) {
  if (!b) return;
  free(b->target);
  free(b->vendor);
  memset(b, 0, sizeof *b);
}

void ts_db_baselines_free(ts_db_baseline *baselines, int n) {
  if (!baselines) return;
  for (int i = 0; i < n; i++) ts_db_baseline_clear(&baselines[i]);
  free(baselines);
}

int db_check_baseline(const char *vendor, int64_t threads, double gflops,
                      const char *where, ts_error *err) {
  if (!vendor || !vendor[0])
    return TS_ERR(err, TS_EINVAL, "%svendor is empty", where);
  if (strlen(vendor) > VENDOR_MAX)
    return TS_ERR(err, TS_EINVAL, "%svendor name is longer than %d bytes",
                  where, VENDOR_MAX);
  if (threads < 1 || threads > 1 << 20)
    return TS_ERR(err, TS_EINVAL, "%sthreads %lld is not a thread count", where,
                  (long long)threads);
  if (!isfinite(gflops) || gflops <= 0)
    return TS_ERR(err, TS_EINVAL, "%sgflops %g is not a positive finite number",
                  where, gflops);
  return TS_OK;
}

int db_check_side(double side_ratio, int64_t side_rounds, const char *where,
                  ts_error *err) {
  if (side_rounds < 1 || side_rounds > 1000000)
    return TS_ERR(err, TS_EINVAL, "%sside_rounds %lld is not a round count",
                  where, (long long)side_rounds);
  if (!isfinite(side_ratio) || side_ratio <= 0)
    return TS_ERR(err, TS_EINVAL,
                  "%sside_ratio %g is not a positive finite number", where,
                  side_ratio);
  return TS_OK;
}

/* Reads a row into *b; false (b cleared) when out of memory. */
static bool read_baseline(db_q *st, ts_db_baseline *b) {
  memset(b, 0, sizeof *b);
  bool oom = false;
  b->id = db_column_int64(st, 0);
  b->workload_id = db_column_int64(st, 1);
  b->target_id = db_column_int64(st, 2);
  b->target = db_column_strdup(st, 3, &oom);
  b->vendor = db_column_strdup(st, 4, &oom);
  b->threads = db_column_int(st, 5);
  b->gflops = db_column_double(st, 6);
  db_column_copy(st, 7, b->created, sizeof b->created);
  bool side = db_column_type(st, 8) != SQLITE_NULL &&
              db_column_type(st, 9) != SQLITE_NULL;
  b->side_rounds = side ? db_column_int(st, 9) : 0;
  b->side_ratio = side && b->side_rounds > 0 ? db_column_double(st, 8) : NAN;
  if (oom) ts_db_baseline_clear(b);
  return !oom;
}

void db_bind_side(db_q *st, double side_ratio, int side_rounds) {
  if (side_rounds > 0) {
    db_bind_double(st, 8, side_ratio);
    db_bind_int(st, 9, side_rounds);
  } else {
    db_bind_null(st, 8);
    db_bind_null(st, 9);
  }
}

typedef struct put_ctx {
  int64_t workload_id;
  const char *target, *vendor;
  int threads;
  double gflops, side_ratio;
  int side_rounds;
} put_ctx;

static int put_body(ts_db *db, void *p) {
  put_ctx *c = p;
  db_q *st = db_stmt(db, ST_WORKLOAD_EXISTS);
  if (!st) return db->err.code;
  db_bind_int64(st, 1, c->workload_id);
  int rc = db_step(db, st);
  db_reset(st);
  if (rc == SQLITE_DONE)
    return TS_ERR(&db->err, TS_ENOTFOUND, "%s: no workload with id %lld",
                  db->path, (long long)c->workload_id);
  if (rc != SQLITE_ROW) return db_fail(db, rc, "storing a baseline");
  int64_t target_id;
  if ((rc = db_target_id(db, c->target, true, &target_id))) return rc;
  char now[32];
  db_timestamp(now);
  if (!(st = db_stmt(db, ST_BASELINE_PUT))) return db->err.code;
  db_bind_int64(st, 1, c->workload_id);
  db_bind_int64(st, 2, target_id);
  db_bind_text(st, 3, c->vendor, -1);
  db_bind_int(st, 4, c->threads);
  db_bind_double(st, 5, c->gflops);
  db_bind_text(st, 6, now, -1);
  db_bind_int(st, 7, 0); /* always replace */
  db_bind_side(st, c->side_ratio, c->side_rounds);
  rc = db_step(db, st);
  db_reset(st);
  if (rc != SQLITE_DONE) return db_fail(db, rc, "storing a baseline");
  return TS_OK;
}

int ts_db_baseline_put(ts_db *db, int64_t workload_id, const char *target,
                       const char *vendor, int threads, double gflops) {
  db_begin_call(db);
  if (db_check_baseline(vendor, threads, gflops, "baseline: ", &db->err))
    return db->err.code;
  put_ctx c = {workload_id, target, vendor, threads, gflops, NAN, 0};
  return db_write(db, put_body, &c);
}

int ts_db_baseline_put_side(ts_db *db, int64_t workload_id, const char *target,
                            const char *vendor, int threads, double gflops,
                            double side_ratio, int side_rounds) {
  db_begin_call(db);
  if (db_check_baseline(vendor, threads, gflops, "baseline: ", &db->err) ||
      db_check_side(side_ratio, side_rounds, "baseline: ", &db->err))
    return db->err.code;
  put_ctx c = {workload_id, target,     vendor,     threads,
               gflops,      side_ratio, side_rounds};
  return db_write(db, put_body, &c);
}

int ts_db_baseline_get(ts_db *db, int64_t workload_id, const char *target,
                       const char *vendor, int threads, ts_db_baseline *out) {
  db_begin_call(db);
  memset(out, 0, sizeof *out);
  if (!vendor) return TS_ERR(&db->err, TS_EINVAL, "baseline: no vendor");
  int64_t target_id;
  int rc = db_target_id(db, target, false, &target_id);
  if (rc) return rc;
  db_q *st = db_stmt(db, ST_BASELINE_GET);
  if (!st) return db->err.code;
  db_bind_int64(st, 1, workload_id);
  db_bind_int64(st, 2, target_id);
  db_bind_text(st, 3, vendor, -1);
  db_bind_int(st, 4, threads);
  rc = db_step(db, st);
  bool read = rc != SQLITE_ROW || read_baseline(st, out);
  db_reset(st);
  if (!read) return db_nomem(db, "reading a baseline");
  if (rc == SQLITE_DONE)
    return TS_ERR(&db->err, TS_ENOTFOUND,
                  "%s: no %s baseline with %d threads for workload %lld on "
                  "target '%s'",
                  db->path, vendor, threads, (long long)workload_id, target);
  if (rc != SQLITE_ROW) return db_fail(db, rc, "reading a baseline");
  return TS_OK;
}

int ts_db_baselines(ts_db *db, int64_t workload_id, const char *target,
                    ts_db_baseline **out, int *n) {
  db_begin_call(db);
  *out = NULL;
  *n = 0;
  int64_t target_id = 0;
  if (target) {
    int rc = db_target_id(db, target, false, &target_id);
    if (rc == TS_ENOTFOUND) {
      db_begin_call(db);
      return TS_OK; /* nothing stored on an unknown target */
    }
    if (rc) return rc;
  }
  db_q *st = db_stmt(db, ST_BASELINES);
  if (!st) return db->err.code;
  db_bind_int64(st, 1, workload_id);
  db_bind_int64(st, 2, target_id);
  ts_db_baseline *rows = NULL;
  int count = 0, cap = 0, rc;
  bool oom = false;
  while ((rc = db_step(db, st)) == SQLITE_ROW) {
    if (count == cap) {
      cap = cap ? cap * 2 : 8;
      ts_db_baseline *grown = ts_realloc(rows, sizeof *rows * (size_t)cap);
      if (!grown) {
        oom = true;
        break;
      }
      rows = grown;
    }
    if (!read_baseline(st, &rows[count])) {
      oom = true;
      break;
    }
    count++;
  }
  db_reset(st);
  if (oom || rc != SQLITE_DONE) {
    ts_db_baselines_free(rows, count);
    return oom ? db_nomem(db, "reading baselines")
               : db_fail(db, rc, "reading baselines");
  }
  *out = rows;
  *n = count;
  return TS_OK;
}
