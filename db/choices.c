/*
 * choices.c — choices measured in a compiled model: a compiler pass that
 * chooses between forms of one subject (a 3x3 convolution computed
 * directly, by Winograd F(2x2,3x3) or by F(4x4,3x3)) has each form timed
 * inside the model, and the seconds per model run each option took are
 * kept per target, so later compiles choose by them. One row per target,
 * kind (the pass's name for the choice), subject and option; a new figure
 * replaces the old one.
 */
#include "internal.h"

#include <math.h>
#include <string.h>

/* The longest kind, subject or option stored, in bytes. */
#define CHOICE_NAME_MAX 256

/* Checks one of the names of a choice (`field` names it in the message). */
static int check_name(const char *value, const char *field, const char *where,
                      ts_error *err) {
  if (!value || !value[0])
    return TS_ERR(err, TS_EINVAL, "%s%s is empty", where, field);
  if (strlen(value) > CHOICE_NAME_MAX)
    return TS_ERR(err, TS_EINVAL, "%s%s is longer than %d bytes", where, field,
                  CHOICE_NAME_MAX);
  return TS_OK;
}

/* Checks the three names of a choice, in the order of the key. */
static int check_names(const char *kind, const char *subject,
                       const char *option, const char *where, ts_error *err) {
  int rc;
  if ((rc = check_name(kind, "kind", where, err)) ||
      (rc = check_name(subject, "subject", where, err)) ||
      (rc = check_name(option, "option", where, err)))
    return rc;
  return TS_OK;
}

int db_check_choice(const char *kind, const char *subject, const char *option,
                    double seconds, int64_t samples, const char *where,
                    ts_error *err) {
  int rc = check_names(kind, subject, option, where, err);
  if (rc) return rc;
  if (!isfinite(seconds) || seconds <= 0)
    return TS_ERR(err, TS_EINVAL,
                  "%sseconds %g is not a positive finite number", where,
                  seconds);
  if (samples < 1)
    return TS_ERR(err, TS_EINVAL, "%ssamples %lld is not a count of runs",
                  where, (long long)samples);
  return TS_OK;
}

typedef struct put_ctx {
  const char *target, *kind, *subject, *option;
  double seconds;
  int64_t samples;
} put_ctx;

/* Inside db_write: finds or stores the target, then stores the figure in
 * place of the one before. */
static int put_body(ts_db *db, void *p) {
  put_ctx *c = p;
  int64_t target_id;
  int rc = db_target_id(db, c->target, true, &target_id);
  if (rc) return rc;
  char now[32];
  db_timestamp(now);
  db_q *st = db_stmt(db, ST_CHOICE_PUT);
  if (!st) return db->err.code;
  db_bind_int64(st, 1, target_id);
  db_bind_text(st, 2, c->kind, -1);
  db_bind_text(st, 3, c->subject, -1);
  db_bind_text(st, 4, c->option, -1);
  db_bind_double(st, 5, c->seconds);
  db_bind_int64(st, 6, c->samples);
  db_bind_text(st, 7, now, -1);
  db_bind_int(st, 8, 0); /* always replace */
  rc = db_step(db, st);
  db_reset(st);
  if (rc != SQLITE_DONE) return db_fail(db, rc, "storing a choice");
  return TS_OK;
}

int ts_db_choice_put(ts_db *db, const char *target, const char *kind,
                     const char *subject, const char *option, double seconds,
                     int64_t samples) {
  db_begin_call(db);
  if (db_check_choice(kind, subject, option, seconds, samples,
                      "choice: ", &db->err))
    return db->err.code;
  put_ctx c = {target, kind, subject, option, seconds, samples};
  return db_write(db, put_body, &c);
}

/* The "nothing stored" answer of ts_db_choice_get. */
static int not_found(ts_db *db, const char *target, const char *kind,
                     const char *subject, const char *option) {
  return TS_ERR(&db->err, TS_ENOTFOUND,
                "%s: no %s choice '%s' measured for '%s' on target '%s'",
                db->path, kind, option, subject, target ? target : "");
}

int ts_db_choice_get(ts_db *db, const char *target, const char *kind,
                     const char *subject, const char *option, double *seconds,
                     int64_t *samples) {
  db_begin_call(db);
  if (seconds) *seconds = NAN;
  if (samples) *samples = 0;
  if (check_names(kind, subject, option, "choice: ", &db->err))
    return db->err.code;
  /* a database older than the table, opened read-only as it is, has none */
  if (db->schema_version < DB_CHOICES_VERSION)
    return not_found(db, target, kind, subject, option);
  int64_t target_id;
  int rc = db_target_id(db, target, false, &target_id);
  if (rc == TS_ENOTFOUND) return not_found(db, target, kind, subject, option);
  if (rc) return rc;
  db_q *st = db_stmt(db, ST_CHOICE_GET);
  if (!st) return db->err.code;
  db_bind_int64(st, 1, target_id);
  db_bind_text(st, 2, kind, -1);
  db_bind_text(st, 3, subject, -1);
  db_bind_text(st, 4, option, -1);
  rc = db_step(db, st);
  if (rc == SQLITE_ROW) {
    if (seconds) *seconds = db_column_double(st, 0);
    if (samples) *samples = db_column_int64(st, 1);
  }
  db_reset(st);
  if (rc == SQLITE_DONE) return not_found(db, target, kind, subject, option);
  if (rc != SQLITE_ROW) return db_fail(db, rc, "reading a choice");
  return TS_OK;
}
