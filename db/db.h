/*
 * db.h — the public interface of tessera's tuning database: an SQLite file,
 * or a PostgreSQL database when opened with a postgresql:// URL, holding
 * workloads (identified by the structural hash of the unscheduled
 * PrimFunc, with the canonical TIR text beside it), targets (canonical
 * target strings), tuning records (a schedule trace in JSON with its
 * measured run times and status) and tuning jobs. Tuning jobs write it, a
 * compiler queries it ("the best schedule of this workload on this
 * target"), people inspect it with `tessera db`.
 *
 * A ts_db is one connection: prepared statements, the parsed-function cache
 * and the last error live on it. It is not thread safe and must not cross a
 * fork(); open one per thread or process (any number of processes may share
 * a file). Every function
 * returns TS_OK or a negative TS_E* code and leaves the message on the
 * handle (ts_db_errmsg). A failed write changes nothing: each call that
 * writes is one transaction. Waiting for other writers (retry with backoff)
 * happens inside; "database is locked" is never returned before the busy
 * timeout. docs/database.md documents the schema and the export format.
 */
#ifndef TESSERA_DB_H
#define TESSERA_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tir/tir.h"

/* The schema version this build writes (PRAGMA user_version). Older files
 * are migrated forward when opened read-write; newer ones are refused. */
#define TS_DB_SCHEMA_VERSION 7
/* The oldest version a read-only open (compile, bench --db, show --best)
 * takes as it is: the versions after it added an index (6), which makes
 * queries faster and changes no answer, and the choices table (7), which a
 * read of an older database finds empty (ts_db_choice_get: TS_ENOTFOUND).
 * Older ones must be migrated. */
#define TS_DB_READ_MIN_VERSION 5

typedef struct ts_db ts_db;

/* ========================================================================
 * Names
 * ======================================================================== */

/* The status of one measured candidate. Only TS_DB_STATUS_OK records are
 * ever returned as a best schedule. */
typedef enum ts_db_status {
  TS_DB_STATUS_OK = 0,
  TS_DB_STATUS_BUILD_ERROR = 1,
  TS_DB_STATUS_RUN_ERROR = 2,
  TS_DB_STATUS_TIMEOUT = 3,
  TS_DB_STATUS_WRONG_RESULT = 4,
  TS_DB_STATUS_WORKER_LOST = 5,
} ts_db_status;
#define TS_DB_N_STATUS 6

/* "ok", "build_error", ...; NULL for a value out of range. */
const char *ts_db_status_name(ts_db_status s);
/* The status named `name`; TS_EINVAL (no message) when unknown. */
int ts_db_status_parse(const char *name, ts_db_status *out);

typedef enum ts_db_job_state {
  TS_DB_JOB_RUNNING = 0,
  TS_DB_JOB_FINISHED = 1,    /* budget spent or search converged */
  TS_DB_JOB_INTERRUPTED = 2, /* stopped early (signal); resumable */
  TS_DB_JOB_FAILED = 3,
} ts_db_job_state;
#define TS_DB_N_JOB_STATE 4

/* "running", "finished", "interrupted", "failed"; NULL when out of range. */
const char *ts_db_job_state_name(ts_db_job_state s);
int ts_db_job_state_parse(const char *name, ts_db_job_state *out);

/* ========================================================================
 * Opening
 * ======================================================================== */

/* Checks a trace's JSON text before it is stored (commit and import). Return
 * TS_OK, or an error code with err set to a message naming the problem. The
 * built-in check is ts_db_check_trace_json; the schedule module's full
 * trace parser plugs in here (ts_trace_check_json). */
typedef int (*ts_db_trace_check_fn)(void *ctx, const char *json, size_t len,
                                    ts_error *err);
/* Renders a trace in its readable form; returns a malloc'd string (caller
 * frees) or NULL with err set. */
typedef char *(*ts_db_trace_print_fn)(void *ctx, const char *json,
                                      ts_error *err);

typedef struct ts_db_options {
  bool create;             /* create the file when absent (default true) */
  bool read_only;          /* open for reading only; the file must exist and be
                              at TS_DB_SCHEMA_VERSION (default false) */
  int busy_timeout_ms;     /* how long one call may wait for other writers
                              before failing (default 60000) */
  size_t func_cache_bytes; /* budget of the per-connection cache of
                              parsed workload functions (256 MiB) */
  ts_db_trace_check_fn check_trace; /* NULL: ts_db_check_trace_json */
  ts_db_trace_print_fn print_trace; /* NULL: traces print as JSON */
  void *trace_ctx;                  /* passed to both hooks */
} ts_db_options;

/* The defaults above. */
ts_db_options ts_db_defaults(void);

/* Opens (creating if absent and opts->create) the database at `path`; opts
 * may be NULL for the defaults. Before anything is written the file is
 * checked: a file that is not SQLite, a truncated database, an SQLite file
 * of another application and a database of a newer schema version are
 * refused with TS_EINVAL (TS_EUNSUPPORTED for the newer schema) and a message
 * naming the file and the problem, and the file is left as it was. An older
 * schema is migrated forward in one transaction. On success *out is a new
 * handle the caller closes with ts_db_close; on failure *out is NULL.
 * A `path` starting with postgresql:// or postgres:// is a PostgreSQL
 * connection URL (libpq's syntax and parameters, TLS included): the same
 * schema and calls on a server (docs/database.md). A server that cannot be
 * reached or refuses the login is TS_EIO with a message naming the server
 * (never the password) and libpq's reason. */
int ts_db_open(const char *path, const ts_db_options *opts, ts_db **out,
               ts_error *err);
/* Closes the connection and frees every cache; NULL is a no-op. */
void ts_db_close(ts_db *db);

/* The message of the last failed call on db ("" after a success). */
const char *ts_db_errmsg(const ts_db *db);
/* The last error (code, message, where it was raised). */
const ts_error *ts_db_error(const ts_db *db);
/* The path the handle was opened with (a URL without its password), owned
 * by db. */
const char *ts_db_path(const ts_db *db);
/* Whether s is a PostgreSQL URL (postgresql:// or postgres://). */
bool ts_db_is_url(const char *s);
/* path_or_url as messages may show it: a URL's password (user:PASSWORD@, a
 * password=... parameter) replaced by "***"; a path unchanged. malloc'd
 * (NULL when out of memory). */
char *ts_db_display_name(const char *path_or_url);
/* "sqlite" or "postgresql". */
const char *ts_db_backend(const ts_db *db);

/* The built-in trace check: the text is one JSON object with an integer
 * "version" field. ctx is unused. Errors are TS_EINVAL naming the byte
 * offset of a syntax error or the missing/bad field. */
int ts_db_check_trace_json(void *ctx, const char *json, size_t len,
                           ts_error *err);
/* A trace for people: the readable form when a print hook is set, else the
 * JSON indented. Returns a malloc'd string (caller frees), or NULL with the
 * error on db (a corrupt trace names the problem). */
char *ts_db_format_trace(ts_db *db, const char *json);

/* ========================================================================
 * Workloads and targets
 * ======================================================================== */

typedef struct ts_db_workload {
  int64_t id;
  char hash[33];    /* structural hash, 32 lowercase hex digits */
  char *name;       /* short name (malloc'd) */
  char *tir;        /* canonical TIR text of the unscheduled function */
  double flops;     /* ts_func_flops of the function */
  char created[32]; /* UTC, "2025-01-31T12:00:00.000Z" */
} ts_db_workload;
/* Frees the strings of w (not w itself); safe on a zeroed struct. */
void ts_db_workload_clear(ts_db_workload *w);

/* Stores the unscheduled function f under `name` (NULL: the function's
 * name), or finds it: a structurally equal workload already present (same
 * hash, and equal to the stored text parsed back) keeps its id and name.
 * *id receives the workload's id. */
int ts_db_commit_workload(ts_db *db, const ts_func *f, const char *name,
                          int64_t *id);
/* The id of the workload structurally equal to f; TS_ENOTFOUND if none.
 * A hash hit is confirmed with ts_func_equal against the stored text
 * (parsed once per connection and cached). */
int ts_db_find_workload(ts_db *db, const ts_func *f, int64_t *id);
/* Resolves a workload named on a command line: a full hash, a unique hash
 * prefix of at least 4 hex digits, or a unique name. TS_ENOTFOUND when
 * nothing matches, TS_EINVAL naming the candidates when several do. */
int ts_db_resolve_workload(ts_db *db, const char *key, int64_t *id);
/* Fills *out (caller clears with ts_db_workload_clear); TS_ENOTFOUND for an
 * unknown id. */
int ts_db_get_workload(ts_db *db, int64_t id, ts_db_workload *out);
/* The workload's function parsed from its stored text; *out is a new
 * function the caller frees with ts_func_free. */
int ts_db_workload_func(ts_db *db, int64_t id, ts_func **out);

/* The canonical form of a target string (ts_target_parse; `llvm` and
 * `-mcpu=native` resolved to this host). Returns a malloc'd string (caller
 * frees), or NULL with the parse error on db. Cached per connection. */
char *ts_db_canonical_target(ts_db *db, const char *target);
/* Stores a target (canonicalized) or finds it; *id receives its id. */
int ts_db_commit_target(ts_db *db, const char *target, int64_t *id);
/* The id of a target (canonicalized first); TS_ENOTFOUND if absent. */
int ts_db_find_target(ts_db *db, const char *target, int64_t *id);
/* Machine figures measured for a target (peak GFLOP/s, bandwidth, ...) as a
 * JSON object text; NULL clears them. The probe command defines the keys. */
int ts_db_set_target_probe(ts_db *db, int64_t target_id, const char *json);
/* *json receives the target's probe JSON (malloc'd, caller frees) or NULL
 * when never probed; TS_ENOTFOUND for an unknown id. */
int ts_db_get_target_probe(ts_db *db, int64_t target_id, char **json);

/* ========================================================================
 * Records
 * ======================================================================== */

/* One measured candidate to store. Pointers are borrowed for the call. */
typedef struct ts_db_measurement {
  int64_t workload_id;
  const char *target;     /* target string; canonicalized and stored */
  const char *trace_json; /* checked with the trace-check hook */
  const double *run_secs; /* per-repeat seconds (finite, >= 0) */
  int n_run_secs;         /* >= 1 for TS_DB_STATUS_OK */
  ts_db_status status;
  const char *error;  /* error text; NULL means "" */
  int64_t job_id;     /* 0: not part of a job */
  const char *worker; /* worker/device key; NULL means "" */
  /* How it was measured, a JSON object (docs/database.md: the evaluator
   * settings, threads, timeout, the measuring process's CPU set); NULL:
   * not known. Stored as given. */
  const char *measure_json;
} ts_db_measurement;

/* A stored record. All strings are malloc'd; clear with
 * ts_db_record_clear. */
typedef struct ts_db_record {
  int64_t id;
  int64_t workload_id;
  int64_t target_id;
  char *target; /* canonical target string */
  char *trace_json;
  double *run_secs;
  int n_run_secs;
  double median_s; /* median of run_secs; NAN when there are none */
  ts_db_status status;
  char *error;
  int64_t job_id; /* 0 when not part of a job */
  int64_t trial;  /* 0-based trial index within the job; -1 without */
  char *worker;
  char *version;      /* tessera version that wrote the record */
  char *measure_json; /* how it was measured (a JSON object); NULL when
                         not recorded */
  char created[32];
  /* The latest confirmation of the workload x target (ts_db_confirm), when
   * this record was among the candidates measured again: the median of
   * the interleaved rounds, their spread ((max - min) / median) and how
   * many there were. confirmed_s is NAN when the record has none. */
  double confirmed_s;
  double confirmed_spread;
  int confirmed_rounds;
} ts_db_record;
/* The latency a record stands for: the confirmed one when it has one,
 * otherwise the search-time median. */
double ts_db_record_seconds(const ts_db_record *r);
void ts_db_record_clear(ts_db_record *r);
/* Clears and frees an array returned by a query; NULL is a no-op. */
void ts_db_records_free(ts_db_record *records, int n);

/* Stores one record (see ts_db_commit_records); *id may be NULL. */
int ts_db_commit_record(ts_db *db, const ts_db_measurement *m, int64_t *id);
/* Stores n records in one transaction: all or none. Everything is checked
 * first (workload and job exist, trace passes the check hook, status and
 * run times valid, measure_json a JSON object when given) and an error
 * names the record index and the problem.
 * The median is computed here. A record of a job gets the job's next trial
 * index, and the job's trials_done grows by one, in the same transaction.
 * ids (may be NULL) receives the n new ids. */
int ts_db_commit_records(ts_db *db, const ts_db_measurement *m, int n,
                         int64_t *ids);

/* "Fastest" below: records of the latest confirmation (ts_db_confirm) come
 * first, by confirmed latency; then every other ok record by its
 * search-time median. A confirmed best holds against a search-time figure
 * that a lucky, quiet moment may have given a worse schedule. */

/* The fastest ok record of the workload on exactly this target (string
 * canonicalized); TS_ENOTFOUND when there is none. Clear *out afterwards. */
int ts_db_best(ts_db *db, int64_t workload_id, const char *target,
               ts_db_record *out);
/* Up to k fastest ok records, fastest first; *out is a new array of *n
 * records (ts_db_records_free), NULL when *n is 0. */
int ts_db_top_k(ts_db *db, int64_t workload_id, const char *target, int k,
                ts_db_record **out, int *n);
/* The compile-time query: hash f, find its workload (structural equality
 * confirmed), and return the best ok record on the target. TS_ENOTFOUND
 * when the workload, the target or an ok record is missing. */
int ts_db_best_by_func(ts_db *db, const ts_func *f, const char *target,
                       ts_db_record *out);
/* Up to k ok records ranked by their search-time median alone (what a
 * confirmation measures again), fastest first, one per distinct trace. */
int ts_db_top_k_search(ts_db *db, int64_t workload_id, const char *target,
                       int k, ts_db_record **out, int *n);
/* Stores a confirmation of the workload on the target: records[i] measured
 * again, seconds[i] the median of `rounds` interleaved rounds and spread[i]
 * their (max - min) / median. Replaces the previous confirmation of that
 * workload x target, in one transaction. Every record must be an ok record
 * of the workload on the target. */
int ts_db_confirm(ts_db *db, int64_t workload_id, const char *target,
                  const int64_t *records, const double *seconds,
                  const double *spread, int n, int rounds);

/* Every record of the workload on the target, any status, oldest first (the
 * tuner rebuilds its cost model and measured set from these on resume). */
int ts_db_records_of(ts_db *db, int64_t workload_id, const char *target,
                     ts_db_record **out, int *n);
/* The `limit` newest records of a workload on any target, newest first. */
int ts_db_recent_records(ts_db *db, int64_t workload_id, int limit,
                         ts_db_record **out, int *n);

/* One record reduced to what charts need: no trace, no run times, so a
 * workload with 10^5 records costs a few megabytes. */
typedef struct ts_db_record_point {
  int64_t id;
  int64_t job_id; /* 0 when not part of a job */
  int64_t trial;  /* trial index within the job; -1 without */
  ts_db_status status;
  double median_s; /* NAN when there are no run times */
} ts_db_record_point;
/* Every record of the workload on the target (canonicalized), any status,
 * oldest first (commit order). *out is a new array the caller frees with
 * free(), NULL when *n is 0; an unknown target has no records. */
int ts_db_record_points(ts_db *db, int64_t workload_id, const char *target,
                        ts_db_record_point **out, int64_t *n);

/* One row of the overview: a workload on a target (or a workload with no
 * records: target_id 0, target NULL). */
typedef struct ts_db_summary {
  int64_t workload_id;
  char hash[33];
  char *name;
  double flops;
  int64_t target_id;
  char *target;
  int64_t n_records;
  int64_t n_ok;
  double best_s; /* NAN when there is no ok record */
} ts_db_summary;
/* Every workload × target (workload_id 0), or those of one workload,
 * ordered by workload id then target id. *out is a new array
 * (ts_db_summaries_free), NULL when *n is 0. */
int ts_db_list(ts_db *db, int64_t workload_id, ts_db_summary **out, int *n);
void ts_db_summaries_free(ts_db_summary *rows, int n);

/* ========================================================================
 * Jobs
 * ======================================================================== */

typedef struct ts_db_job {
  int64_t id;
  char *name;
  char *config_json; /* the job's configuration, a JSON object */
  ts_db_job_state state;
  char started[32];
  char finished[32];     /* "" while running */
  int64_t trials_budget; /* total trials the job may measure */
  int64_t trials_done;   /* records committed under the job so far */
} ts_db_job;
void ts_db_job_clear(ts_db_job *j);
void ts_db_jobs_free(ts_db_job *jobs, int n);

/* Creates a running job; TS_EINVAL if the name is taken or config_json is
 * not a JSON object (NULL means "{}"). *id receives its id. */
int ts_db_job_create(ts_db *db, const char *name, const char *config_json,
                     int64_t trials_budget, int64_t *id);
/* Marks the named job running again (finished time cleared) and fills *out
 * with its state, counts included; TS_ENOTFOUND if there is no such job. */
int ts_db_job_resume(ts_db *db, const char *name, ts_db_job *out);
/* Reads a job without changing it; TS_ENOTFOUND if absent. */
int ts_db_job_get(ts_db *db, const char *name, ts_db_job *out);
/* Sets the end state (not TS_DB_JOB_RUNNING) and the finished time. */
int ts_db_job_finish(ts_db *db, int64_t job_id, ts_db_job_state state);
/* Changes a job's total budget (a re-run with a larger --trials). */
int ts_db_job_set_budget(ts_db *db, int64_t job_id, int64_t trials_budget);
/* Every job, oldest first; *out is a new array (ts_db_jobs_free). */
int ts_db_jobs(ts_db *db, ts_db_job **out, int *n);
/* Records stored under a job, in total and by status (by_status may be
 * NULL). Pruning lowers these; trials_done never goes down. */
int ts_db_job_count_records(ts_db *db, int64_t job_id, int64_t *total,
                            int64_t by_status[TS_DB_N_STATUS]);

/* ========================================================================
 * Vendor baselines
 * ======================================================================== */

/* A vendor library's measured level on a workload × target: what `tessera
 * bench --db` and the tuner's summary store, and what the report draws
 * beside tessera's tuning curve. */
typedef struct ts_db_baseline {
  int64_t id;
  int64_t workload_id;
  int64_t target_id;
  char *target;     /* canonical target string (malloc'd) */
  char *vendor;     /* "openblas", "onednn", "naive", ... (malloc'd) */
  int threads;      /* threads the library was given */
  double gflops;    /* workload FLOPs / median seconds / 1e9 */
  char created[32]; /* when it was stored */
  /* Measured side by side: in a confirmation (tuner/confirm.c), in the same
   * interleaved rounds as the workload's confirmed best, side_ratio is the
   * median over those rounds of vendor / tessera latency (> 1: tessera is
   * faster) and side_rounds their number. A level measured on its own has
   * side_rounds 0 and side_ratio NAN. */
  double side_ratio;
  int side_rounds;
} ts_db_baseline;
/* Frees the strings of b (not b itself); safe on a zeroed struct. */
void ts_db_baseline_clear(ts_db_baseline *b);
/* Clears and frees an array returned by ts_db_baselines; NULL is a no-op. */
void ts_db_baselines_free(ts_db_baseline *baselines, int n);

/* Stores the level of `vendor` (non-empty, at most 64 bytes) with `threads`
 * (>= 1) threads for the workload on the target (canonicalized; stored when
 * absent): gflops must be finite and > 0. Replaces the level stored before
 * for the same workload, target, vendor and thread count. TS_EINVAL names
 * the bad argument; TS_ENOTFOUND for an unknown workload. */
int ts_db_baseline_put(ts_db *db, int64_t workload_id, const char *target,
                       const char *vendor, int threads, double gflops);
/* The same for a level measured side by side with tessera's confirmed best
 * (see ts_db_baseline): side_ratio finite and > 0, side_rounds >= 1. A later
 * ts_db_baseline_put of the same row clears the two. */
int ts_db_baseline_put_side(ts_db *db, int64_t workload_id, const char *target,
                            const char *vendor, int threads, double gflops,
                            double side_ratio, int side_rounds);
/* The stored level of exactly that workload, target, vendor and thread
 * count into *out (clear with ts_db_baseline_clear); TS_ENOTFOUND when
 * there is none. */
int ts_db_baseline_get(ts_db *db, int64_t workload_id, const char *target,
                       const char *vendor, int threads, ts_db_baseline *out);
/* Every level stored for a workload (workload_id 0: every workload) on a
 * target (NULL: every target), ordered by workload id, target id, vendor and
 * threads. *out is a new array (ts_db_baselines_free), NULL when *n is 0. */
int ts_db_baselines(ts_db *db, int64_t workload_id, const char *target,
                    ts_db_baseline **out, int *n);

/* ========================================================================
 * Choices measured in a model
 * ======================================================================== */

/* A choice measured in a compiled model: for `kind` (a pass, e.g.
 * "winograd") and `subject` (what it chooses for, e.g. a conv's task hash),
 * the seconds per model run that `option` took on `target` (canonicalized
 * as ts_db_baseline_put does), the median of `samples` timed runs. A new
 * figure replaces the old one of the same target, kind, subject and option.
 * TS_EINVAL (naming the field) for an empty or over-long (> 256 bytes) kind,
 * subject or option, seconds not finite and > 0, samples < 1. */
int ts_db_choice_put(ts_db *db, const char *target, const char *kind,
                     const char *subject, const char *option, double seconds,
                     int64_t samples);
/* The figure stored for target, kind, subject and option into *seconds and
 * *samples (either may be NULL); TS_ENOTFOUND when there is none (also when
 * the target is unknown to the database, and on a database of a schema
 * older than version 7 opened read-only). TS_EINVAL as ts_db_choice_put for
 * a bad kind, subject or option. */
int ts_db_choice_get(ts_db *db, const char *target, const char *kind,
                     const char *subject, const char *option, double *seconds,
                     int64_t *samples);

/* ========================================================================
 * Maintenance, statistics, export and import
 * ======================================================================== */

/* Keeps the `keep` fastest ok records of every workload × target and
 * deletes the other ok records, and every failed record unless
 * keep_failed. *deleted (may be NULL) receives the count. One transaction.
 * The file shrinks only after ts_db_vacuum. */
int ts_db_prune(ts_db *db, int keep, bool keep_failed, int64_t *deleted);
/* Rewrites the file compactly (VACUUM). */
int ts_db_vacuum(ts_db *db);

typedef struct ts_db_stats {
  int schema_version;
  int64_t n_workloads, n_targets, n_jobs, n_records;
  int64_t records_by_status[TS_DB_N_STATUS];
  int64_t jobs_by_state[TS_DB_N_JOB_STATE];
  int64_t file_bytes; /* the main file */
  int64_t wal_bytes;  /* the write-ahead log beside it (0 if none) */
} ts_db_stats;
int ts_db_get_stats(ts_db *db, ts_db_stats *out);

/* PRAGMA integrity_check. TS_OK when the file is intact; otherwise
 * TS_EINVAL with the first problems in the message. */
int ts_db_integrity_check(ts_db *db);

/* Writes the whole database as JSON Lines (docs/database.md): a header line,
 * then targets, workloads, jobs, records, baselines and choices in id order,
 * with ids renumbered from 1 so equal contents export to equal bytes. */
int ts_db_export(ts_db *db, FILE *out);

typedef struct ts_db_import_stats {
  int64_t lines;
  int64_t workloads_new, workloads_existing;
  int64_t targets_new, targets_existing;
  int64_t jobs_new, jobs_existing;
  int64_t records;          /* added */
  int64_t records_existing; /* already present (same workload, target,
                               trace and measurement time): skipped */
  int64_t baselines;        /* vendor levels added or updated */
  int64_t choices;          /* choices measured in a model added or
                               updated */
} ts_db_import_stats;
/* Reads JSON Lines written by ts_db_export from a seekable stream `in`
 * (`name` is used in messages). Every line is checked before anything is
 * written (JSON syntax, fields, references, TIR parses to the stated hash,
 * trace check hook); an error names the line and the field and leaves the
 * database unchanged. Then everything is written in one transaction:
 * workloads, targets and jobs already present (structurally equal, same
 * string, same name) are reused, records are added with their times,
 * versions and trial indexes as exported unless a record of the same
 * workload, target, trace and measurement time is already there (so
 * importing the same export again adds nothing), a baseline replaces a
 * stored one of the same workload, target, vendor and threads when it is
 * newer, and a choice one of the same target, kind, subject and option when
 * it was measured later. stats may be NULL. */
int ts_db_import(ts_db *db, FILE *in, const char *name,
                 ts_db_import_stats *stats);

/* Copies what `from` holds into `to` (either backend on either side): every
 * workload and job, and the records, baselines and choices of `target`
 * (canonicalized; NULL: every target). It is an export of `from` imported into
 * `to` in one transaction, so a record `to` already has is skipped and running
 * it again copies nothing twice. A target `from` has never stored copies
 * nothing. Errors are on `to`. stats may be NULL. */
int ts_db_sync(ts_db *from, ts_db *to, const char *target,
               ts_db_import_stats *stats);

/* ========================================================================
 * Benchmark of the compile-time query
 * ======================================================================== */

typedef struct ts_db_bench_options {
  const char *dir; /* where to keep the database, DIR/bench.db (NULL:
                      a new directory under TMPDIR, removed after) */
  const char *url; /* a postgresql:// URL: the database is a new schema on
                      that server, dropped after (dir is then unused) */
  int64_t records; /* records to fill (1000000) */
  int workloads;   /* distinct workloads (10000) */
  int queries;     /* timed queries (20000) */
  uint64_t seed;
  bool progress; /* progress lines on stderr while filling */
} ts_db_bench_options;
ts_db_bench_options ts_db_bench_defaults(void);

typedef struct ts_db_bench_result {
  int64_t records;
  int workloads;
  int queries;
  double fill_seconds;
  int64_t file_bytes;
  /* ts_db_best_by_func on a function just built (as a compiler builds a
   * PrimFunc and asks), the connection warm */
  double median_us, p99_us;
  double hash_median_us; /* ts_func_hash alone on a function just built */
  /* the query on functions built long before (out of the CPU caches) */
  double prebuilt_median_us, prebuilt_p99_us;
  /* the first query of each workload on a new connection (parses its TIR) */
  double cold_median_us, cold_p99_us;
} ts_db_bench_result;
/* Fills a scratch database with opts->records records over
 * opts->workloads matmul workloads and two targets, then times
 * ts_db_best_by_func at random over all workloads. */
int ts_db_bench(const ts_db_bench_options *opts, ts_db_bench_result *out,
                ts_error *err);

#endif /* TESSERA_DB_H */
