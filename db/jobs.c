/*
 * jobs.c — tuning jobs: a named row holding the job's configuration, its
 * state, start and finish times, its trial budget and the trials done so
 * far. trials_done grows in the same transaction as each record committed
 * under the job (records.c), so a job killed at any point resumes from an
 * exact count, and the record's trial index is that count.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static const char *const state_names[TS_DB_N_JOB_STATE] = {
    "running",
    "finished",
    "interrupted",
    "failed",
};

const char *ts_db_job_state_name(ts_db_job_state s) {
  return (unsigned)s < TS_DB_N_JOB_STATE ? state_names[s] : NULL;
}

int ts_db_job_state_parse(const char *name, ts_db_job_state *out) {
  for (int i = 0; name && i < TS_DB_N_JOB_STATE; i++)
    if (!strcmp(name, state_names[i])) {
      *out = (ts_db_job_state)i;
      return TS_OK;
    }
  return TS_EINVAL;
}

void ts_db_job_clear(ts_db_job *j) {
  if (!j) return;
  free(j->name);
  free(j->config_json);
  memset(j, 0, sizeof *j);
}

void ts_db_jobs_free(ts_db_job *jobs, int n) {
  if (!jobs) return;
  for (int i = 0; i < n; i++) ts_db_job_clear(&jobs[i]);
  free(jobs);
}

int db_read_job(ts_db *db, db_q *st, ts_db_job *j) {
  memset(j, 0, sizeof *j);
  bool oom = false;
  j->id = db_column_int64(st, 0);
  j->name = db_column_strdup(st, 1, &oom);
  j->config_json = db_column_strdup(st, 2, &oom);
  if (oom) {
    ts_db_job_clear(j);
    return db_nomem(db, "reading a job");
  }
  const char *state = (const char *)db_column_text(st, 3);
  db_column_copy(st, 4, j->started, sizeof j->started);
  db_column_copy(st, 5, j->finished, sizeof j->finished);
  j->trials_budget = db_column_int64(st, 6);
  j->trials_done = db_column_int64(st, 7);
  if (ts_db_job_state_parse(state, &j->state) != TS_OK) {
    int rc = TS_ERR(&db->err, TS_EINVAL, "%s: job '%s' has unknown state '%s'",
                    db->path, j->name ? j->name : "", state ? state : "(null)");
    ts_db_job_clear(j);
    return rc;
  }
  return TS_OK;
}

/* Reads one job by name (ST_JOB_BY_NAME) or id (ST_JOB_BY_ID). */
static int read_one(ts_db *db, db_statement which, const char *name, int64_t id,
                    ts_db_job *out) {
  memset(out, 0, sizeof *out);
  db_q *st = db_stmt(db, which);
  if (!st) return db->err.code;
  if (name)
    db_bind_text(st, 1, name, -1);
  else
    db_bind_int64(st, 1, id);
  int rc = db_step(db, st);
  int code = TS_OK;
  if (rc == SQLITE_ROW) code = db_read_job(db, st, out);
  db_reset(st);
  if (rc == SQLITE_DONE) {
    if (name)
      return TS_ERR(&db->err, TS_ENOTFOUND, "%s: no job named '%s'", db->path,
                    name);
    return TS_ERR(&db->err, TS_ENOTFOUND, "%s: no job with id %lld", db->path,
                  (long long)id);
  }
  if (rc != SQLITE_ROW) return db_fail(db, rc, "reading a job");
  return code;
}

static int check_name(ts_db *db, const char *name) {
  if (!name || !name[0])
    return TS_ERR(&db->err, TS_EINVAL, "a job needs a name");
  if (strlen(name) > 256)
    return TS_ERR(&db->err, TS_EINVAL, "job name longer than 256 bytes");
  for (const char *p = name; *p; p++)
    if ((unsigned char)*p < 0x20)
      return TS_ERR(&db->err, TS_EINVAL,
                    "job name has a control character at byte %d",
                    (int)(p - name));
  return TS_OK;
}

typedef struct create_ctx {
  const char *name, *config;
  int64_t budget, id;
} create_ctx;

static int create_body(ts_db *db, void *p) {
  create_ctx *c = p;
  ts_db_job existing;
  int rc = read_one(db, ST_JOB_BY_NAME, c->name, 0, &existing);
  if (rc == TS_OK) {
    ts_db_job_clear(&existing);
    return TS_ERR(&db->err, TS_EINVAL,
                  "%s: a job named '%s' already exists (resume it, or choose "
                  "another name)",
                  db->path, c->name);
  }
  if (rc != TS_ENOTFOUND) return rc;
  ts_error_clear(&db->err);
  char now[32];
  db_timestamp(now);
  db_q *st = db_stmt(db, ST_JOB_INSERT);
  if (!st) return db->err.code;
  db_bind_text(st, 1, c->name, -1);
  db_bind_text(st, 2, c->config, -1);
  db_bind_text(st, 3, state_names[TS_DB_JOB_RUNNING], -1);
  db_bind_text(st, 4, now, -1);
  db_bind_null(st, 5);
  db_bind_int64(st, 6, c->budget);
  db_bind_int64(st, 7, 0);
  rc = db_step(db, st);
  db_reset(st);
  if (rc != SQLITE_DONE) return db_fail(db, rc, "creating a job");
  c->id = db_last_insert_id(db);
  return TS_OK;
}

int ts_db_job_create(ts_db *db, const char *name, const char *config_json,
                     int64_t trials_budget, int64_t *id) {
  db_begin_call(db);
  *id = 0;
  if (check_name(db, name)) return db->err.code;
  if (!config_json) config_json = "{}";
  if (db_check_json_object(config_json, "job configuration", &db->err))
    return db->err.code;
  if (trials_budget < 0)
    return TS_ERR(&db->err, TS_EINVAL, "job '%s': negative trial budget", name);
  create_ctx c = {name, config_json, trials_budget, 0};
  int rc = db_write(db, create_body, &c);
  if (rc == TS_OK) *id = c.id;
  return rc;
}

typedef struct resume_ctx {
  const char *name;
  ts_db_job *out;
} resume_ctx;

static int resume_body(ts_db *db, void *p) {
  resume_ctx *c = p;
  ts_db_job_clear(c->out);
  int rc = read_one(db, ST_JOB_BY_NAME, c->name, 0, c->out);
  if (rc) return rc;
  db_q *st = db_stmt(db, ST_JOB_RESUME);
  if (!st) return db->err.code;
  db_bind_int64(st, 1, c->out->id);
  rc = db_step(db, st);
  db_reset(st);
  if (rc != SQLITE_DONE) return db_fail(db, rc, "resuming a job");
  c->out->state = TS_DB_JOB_RUNNING;
  c->out->finished[0] = 0;
  return TS_OK;
}

int ts_db_job_resume(ts_db *db, const char *name, ts_db_job *out) {
  db_begin_call(db);
  memset(out, 0, sizeof *out);
  if (check_name(db, name)) return db->err.code;
  resume_ctx c = {name, out};
  int rc = db_write(db, resume_body, &c);
  if (rc) ts_db_job_clear(out);
  return rc;
}

int ts_db_job_get(ts_db *db, const char *name, ts_db_job *out) {
  db_begin_call(db);
  memset(out, 0, sizeof *out);
  if (check_name(db, name)) return db->err.code;
  return read_one(db, ST_JOB_BY_NAME, name, 0, out);
}

typedef struct update_ctx {
  db_statement which;
  int64_t id;
  const char *text; /* ?2 as text (finish) */
  int64_t value;    /* ?2 as integer (budget) */
} update_ctx;

static int update_body(ts_db *db, void *p) {
  update_ctx *c = p;
  db_q *st = db_stmt(db, c->which);
  if (!st) return db->err.code;
  db_bind_int64(st, 1, c->id);
  char now[32];
  if (c->text) {
    db_timestamp(now);
    db_bind_text(st, 2, c->text, -1);
    db_bind_text(st, 3, now, -1);
  } else {
    db_bind_int64(st, 2, c->value);
  }
  int rc = db_step(db, st);
  db_reset(st);
  if (rc != SQLITE_DONE) return db_fail(db, rc, "updating a job");
  if (db_changes(db) == 0)
    return TS_ERR(&db->err, TS_ENOTFOUND, "%s: no job with id %lld", db->path,
                  (long long)c->id);
  return TS_OK;
}

int ts_db_job_finish(ts_db *db, int64_t job_id, ts_db_job_state state) {
  db_begin_call(db);
  if ((unsigned)state >= TS_DB_N_JOB_STATE || state == TS_DB_JOB_RUNNING)
    return TS_ERR(&db->err, TS_EINVAL,
                  "job_finish: the end state must be finished, interrupted "
                  "or failed");
  update_ctx c = {ST_JOB_FINISH, job_id, state_names[state], 0};
  return db_write(db, update_body, &c);
}

int ts_db_job_set_budget(ts_db *db, int64_t job_id, int64_t trials_budget) {
  db_begin_call(db);
  if (trials_budget < 0)
    return TS_ERR(&db->err, TS_EINVAL, "job_set_budget: negative budget");
  update_ctx c = {ST_JOB_SET_BUDGET, job_id, NULL, trials_budget};
  return db_write(db, update_body, &c);
}

int ts_db_jobs(ts_db *db, ts_db_job **out, int *n) {
  db_begin_call(db);
  *out = NULL;
  *n = 0;
  db_q *st = db_stmt(db, ST_JOBS);
  if (!st) return db->err.code;
  int cap = 0, rc, code = TS_OK;
  while ((rc = db_step(db, st)) == SQLITE_ROW) {
    if (*n == cap) {
      cap = cap ? cap * 2 : 8;
      ts_db_job *grown = ts_realloc(*out, sizeof **out * (size_t)cap);
      if (!grown) {
        code = db_nomem(db, "listing jobs");
        break;
      }
      *out = grown;
    }
    if ((code = db_read_job(db, st, &(*out)[*n]))) break;
    (*n)++;
  }
  db_reset(st);
  if (code == TS_OK && rc != SQLITE_DONE)
    code = db_fail(db, rc, "listing jobs");
  if (code) {
    ts_db_jobs_free(*out, *n);
    *out = NULL;
    *n = 0;
  }
  return code;
}
