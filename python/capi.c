/*
 * capi.c — the few entry points of libtessera.so that exist for the Python
 * package (python/tessera): a tuning job, a model compilation and the
 * database queries, each taking its request as one JSON object and giving
 * its answer as JSON text, so the bindings (ctypes) depend on no C struct
 * layout but ts_error's. Everything else the package calls is the modules'
 * own public API (ts_workload_from_spec, ts_func_print, ts_db_open, ...).
 *
 * Every function returns TS_OK or a negative TS_E* code with err filled;
 * strings given back (*out) are malloc'd and freed with ts_py_free.
 */
#define _GNU_SOURCE
#include "db/db.h"
#include "graph/graph.h"
#include "rpc/rpc.h"
#include "schedule/schedule.h"
#include "tir/alloc.h"
#include "tir/tir.h"
#include "tuner/tuner.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A line of text for the caller: a tuning job's log line (one JSON object
 * per measured candidate) or a line of its task table and progress. */
typedef void (*ts_py_line_fn)(const char *line);

void ts_py_free(void *p) { free(p); }

const char *ts_py_version(void) { return TS_VERSION; }

/* ---- helpers ---- */

/* The error left on db into err; returns its code. */
static int db_fail(ts_db *db, int rc, ts_error *err) {
  if (err) *err = *ts_db_error(db);
  if (err && !err->msg[0])
    snprintf(err->msg, sizeof err->msg, "database: %s", ts_strerror(rc));
  return rc;
}

static int out_json(cJSON *v, char **out, ts_error *err) {
  *out = v ? cJSON_PrintUnformatted(v) : NULL;
  cJSON_Delete(v);
  if (!*out) return TS_ERR(err, TS_ENOMEM, "out of memory");
  return TS_OK;
}

static void add_number_or_null(cJSON *o, const char *key, double v) {
  if (isfinite(v))
    cJSON_AddNumberToObject(o, key, v);
  else
    cJSON_AddNullToObject(o, key);
}

static const char *get_string(const cJSON *o, const char *key) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsString(x) ? x->valuestring : NULL;
}

static double get_number(const cJSON *o, const char *key, double dflt) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(x) ? x->valuedouble : dflt;
}

static bool get_bool(const cJSON *o, const char *key, bool dflt) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsBool(x) ? cJSON_IsTrue(x) : dflt;
}

/* The strings of the array o[key] (borrowed from o); *n their count. NULL
 * with *n 0 when absent; TS_EINVAL naming the key when not all strings. */
static int get_strings(const cJSON *o, const char *key, const char ***out,
                       int *n, ts_error *err) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key), *x;
  *out = NULL;
  *n = 0;
  if (!a || cJSON_IsNull(a)) return TS_OK;
  if (!cJSON_IsArray(a))
    return TS_ERR(err, TS_EINVAL, "request: '%s' is not a list", key);
  *out = calloc((size_t)cJSON_GetArraySize(a) + 1, sizeof **out);
  if (!*out) return TS_ERR(err, TS_ENOMEM, "out of memory");
  cJSON_ArrayForEach(x, a) {
    if (!cJSON_IsString(x)) {
      free(*out);
      *out = NULL;
      return TS_ERR(err, TS_EINVAL, "request: '%s' holds a non-string", key);
    }
    (*out)[(*n)++] = x->valuestring;
  }
  return TS_OK;
}

static int parse_request(const char *json, cJSON **out, ts_error *err) {
  *out = json ? cJSON_Parse(json) : NULL;
  if (!cJSON_IsObject(*out)) {
    cJSON_Delete(*out);
    *out = NULL;
    return TS_ERR(err, TS_EINVAL, "request: not a JSON object");
  }
  return TS_OK;
}

int ts_py_db_open(const char *path, int create, int read_only, ts_db **out,
                  ts_error *err) {
  ts_db_options o = ts_db_defaults();
  o.create = create != 0;
  o.read_only = read_only != 0;
  o.check_trace = ts_trace_check_json;
  return ts_db_open(path, &o, out, err);
}

/* ---- database queries ---- */

/* Every workload x target of the database (a workload without records
 * once, with a null target), as ts_db_list orders them. */
int ts_py_db_workloads(ts_db *db, char **out, ts_error *err) {
  ts_db_summary *rows = NULL;
  int n = 0;
  int rc = ts_db_list(db, 0, &rows, &n);
  if (rc) return db_fail(db, rc, err);
  cJSON *arr = cJSON_CreateArray();
  for (int i = 0; arr && i < n; i++) {
    const ts_db_summary *s = &rows[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "workload_id", (double)s->workload_id);
    cJSON_AddStringToObject(o, "hash", s->hash);
    cJSON_AddStringToObject(o, "name", s->name ? s->name : "");
    cJSON_AddNumberToObject(o, "flops", s->flops);
    if (s->target)
      cJSON_AddStringToObject(o, "target", s->target);
    else
      cJSON_AddNullToObject(o, "target");
    cJSON_AddNumberToObject(o, "records", (double)s->n_records);
    cJSON_AddNumberToObject(o, "ok", (double)s->n_ok);
    add_number_or_null(o, "best_seconds", s->best_s);
    ts_json_add(arr, NULL, o);
  }
  ts_db_summaries_free(rows, n);
  return out_json(arr, out, err);
}

/* The name of job `id` among jobs[0, n), or NULL. */
static const char *job_name(const ts_db_job *jobs, int n, int64_t id) {
  for (int i = 0; id && i < n; i++)
    if (jobs[i].id == id) return jobs[i].name;
  return NULL;
}

/* One record as JSON; with `detail`, its trace as a readable script and
 * the workload scheduled by it (f: the workload's function). */
static cJSON *record_json(const ts_db_record *r, const ts_db_workload *w,
                          const char *job, const ts_func *f, bool detail) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "id", (double)r->id);
  cJSON_AddStringToObject(o, "workload", w->hash);
  cJSON_AddStringToObject(o, "workload_name", w->name ? w->name : "");
  cJSON_AddNumberToObject(o, "flops", w->flops);
  cJSON_AddStringToObject(o, "target", r->target ? r->target : "");
  cJSON_AddStringToObject(o, "status", ts_db_status_name(r->status));
  double secs = ts_db_record_seconds(r);
  add_number_or_null(o, "latency_s", secs);
  add_number_or_null(o, "search_latency_s", r->median_s);
  add_number_or_null(o, "gflops",
                     secs > 0 ? w->flops / secs * 1e-9 : (double)NAN);
  add_number_or_null(o, "confirmed_s", r->confirmed_s);
  add_number_or_null(o, "confirmed_spread", r->confirmed_spread);
  cJSON_AddNumberToObject(o, "confirmed_rounds", r->confirmed_rounds);
  cJSON *runs = cJSON_AddArrayToObject(o, "run_secs");
  for (int i = 0; i < r->n_run_secs; i++)
    ts_json_add(runs, NULL, cJSON_CreateNumber(r->run_secs[i]));
  if (job)
    cJSON_AddStringToObject(o, "job", job);
  else
    cJSON_AddNullToObject(o, "job");
  if (r->trial >= 0)
    cJSON_AddNumberToObject(o, "trial", (double)r->trial);
  else
    cJSON_AddNullToObject(o, "trial");
  cJSON_AddStringToObject(o, "error", r->error ? r->error : "");
  cJSON_AddStringToObject(o, "worker", r->worker ? r->worker : "");
  cJSON_AddStringToObject(o, "version", r->version ? r->version : "");
  cJSON_AddStringToObject(o, "created", r->created);
  cJSON *measure = r->measure_json ? cJSON_Parse(r->measure_json) : NULL;
  ts_json_add(o, "measure", measure ? measure : cJSON_CreateNull());
  cJSON *trace = r->trace_json ? cJSON_Parse(r->trace_json) : NULL;
  ts_json_add(o, "trace", trace ? trace : cJSON_CreateNull());
  if (!detail) return o;
  ts_trace *full = NULL;
  ts_error e;
  ts_error_clear(&e);
  char *script = NULL, *tir = NULL;
  if (r->trace_json && !ts_record_traces(r->trace_json, &full, NULL, &e)) {
    script = ts_trace_print(full);
    ts_sched *s = NULL;
    if (f && !ts_trace_apply(full, f, 1, &s, &e))
      tir = ts_func_print(ts_sched_func(s));
    ts_sched_destroy(s);
  }
  cJSON_AddStringToObject(o, "script", script ? script : "");
  cJSON_AddStringToObject(o, "scheduled_tir", tir ? tir : "");
  if (!tir && e.msg[0]) cJSON_AddStringToObject(o, "detail_error", e.msg);
  free(script);
  free(tir);
  ts_trace_free(full);
  return o;
}

/* Records of the workload `key` (a hash, a unique hash prefix or a name;
 * NULL: every workload) on `target` (canonicalized; NULL: every target
 * the workload has records on). mode 0: every record, oldest first, at
 * most `limit` (0: no limit) per workload x target; mode 1: the best ok
 * record of each workload x target, with its script and scheduled TIR;
 * mode 2: the `limit` fastest ok records, fastest first. */
int ts_py_db_records(ts_db *db, const char *key, const char *target, int mode,
                     int limit, char **out, ts_error *err) {
  *out = NULL;
  int64_t wid = 0;
  int rc;
  if (key && (rc = ts_db_resolve_workload(db, key, &wid)))
    return db_fail(db, rc, err);
  char *canon = NULL;
  if (target && !(canon = ts_db_canonical_target(db, target)))
    return db_fail(db, TS_EINVAL, err);
  ts_db_summary *rows = NULL;
  int n_rows = 0;
  ts_db_job *jobs = NULL;
  int n_jobs = 0;
  if ((rc = ts_db_list(db, wid, &rows, &n_rows)) ||
      (rc = ts_db_jobs(db, &jobs, &n_jobs))) {
    free(canon);
    ts_db_summaries_free(rows, n_rows);
    return db_fail(db, rc, err);
  }
  cJSON *arr = cJSON_CreateArray();
  int64_t cur = -1;
  ts_db_workload w;
  memset(&w, 0, sizeof w);
  ts_func *f = NULL;
  for (int i = 0; !rc && i < n_rows; i++) {
    const ts_db_summary *s = &rows[i];
    if (!s->target || (canon && strcmp(canon, s->target))) continue;
    if (s->workload_id != cur) {
      ts_db_workload_clear(&w);
      ts_func_free(f);
      f = NULL;
      cur = s->workload_id;
      if ((rc = ts_db_get_workload(db, cur, &w))) break;
      if (mode == 1 && (rc = ts_db_workload_func(db, cur, &f))) break;
    }
    ts_db_record *recs = NULL, one;
    int n = 0;
    if (mode == 1) {
      rc = ts_db_best(db, cur, s->target, &one);
      if (rc == TS_ENOTFOUND) {
        rc = TS_OK;
        continue;
      }
      if (rc) break;
      recs = &one;
      n = 1;
    } else if (mode == 2) {
      rc = ts_db_top_k(db, cur, s->target, limit > 0 ? limit : 10, &recs, &n);
    } else {
      rc = ts_db_records_of(db, cur, s->target, &recs, &n);
    }
    if (rc) break;
    int first = mode == 0 && limit > 0 && n > limit ? n - limit : 0;
    for (int k = first; k < n; k++)
      ts_json_add(arr, NULL,
                  record_json(&recs[k], &w,
                              job_name(jobs, n_jobs, recs[k].job_id), f,
                              mode == 1));
    if (mode == 1)
      ts_db_record_clear(&one);
    else
      ts_db_records_free(recs, n);
  }
  ts_db_workload_clear(&w);
  ts_func_free(f);
  ts_db_jobs_free(jobs, n_jobs);
  ts_db_summaries_free(rows, n_rows);
  free(canon);
  if (rc) {
    cJSON_Delete(arr);
    return db_fail(db, rc, err);
  }
  return out_json(arr, out, err);
}

/* ---- tuning ---- */

/* A FILE that hands each complete line written to it to a callback. */
typedef struct line_sink {
  ts_py_line_fn fn;
  char *buf;
  size_t len, cap;
} line_sink;

static ssize_t sink_write(void *cookie, const char *data, size_t n) {
  line_sink *s = cookie;
  for (size_t i = 0; i < n; i++) {
    if (s->len + 1 >= s->cap) {
      size_t cap = s->cap ? s->cap * 2 : 256;
      char *b = realloc(s->buf, cap);
      if (!b) return -1;
      s->buf = b;
      s->cap = cap;
    }
    if (data[i] == '\n') {
      s->buf[s->len] = 0;
      s->fn(s->buf);
      s->len = 0;
    } else {
      s->buf[s->len++] = data[i];
    }
  }
  return (ssize_t)n;
}

static int sink_close(void *cookie) {
  line_sink *s = cookie;
  if (s->len) {
    s->buf[s->len] = 0;
    s->fn(s->buf);
  }
  free(s->buf);
  free(s);
  return 0;
}

static FILE *sink_open(ts_py_line_fn fn) {
  if (!fn) return NULL;
  line_sink *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->fn = fn;
  cookie_io_functions_t io = {NULL, sink_write, NULL, sink_close};
  FILE *f = fopencookie(s, "w", io);
  if (!f) free(s);
  return f;
}

/* What a tuning request owns while the job runs. */
typedef struct tune_state {
  int n;
  ts_tune_task *tasks;
  ts_func **funcs;
  ts_workload **wl;
  char **names;
} tune_state;

static void tune_state_free(tune_state *t) {
  for (int i = 0; i < t->n; i++) {
    if (t->wl[i])
      ts_workload_free(t->wl[i]);
    else
      ts_func_free(t->funcs[i]);
    free(t->names[i]);
  }
  free(t->tasks);
  free(t->funcs);
  free(t->wl);
  free(t->names);
}

static int tune_state_alloc(tune_state *t, int n, ts_error *err) {
  t->n = 0;
  t->tasks = calloc((size_t)n + 1, sizeof *t->tasks);
  t->funcs = calloc((size_t)n + 1, sizeof *t->funcs);
  t->wl = calloc((size_t)n + 1, sizeof *t->wl);
  t->names = calloc((size_t)n + 1, sizeof *t->names);
  if (!t->tasks || !t->funcs || !t->wl || !t->names)
    return TS_ERR(err, TS_ENOMEM, "out of memory");
  return TS_OK;
}

/* The request's pass settings ("layout", "input_layout", "output_layout",
 * "winograd", "winograd_tile") on a graph just imported; ctx is the
 * request. */
static int graph_settings(ts_graph *g, void *ctx, ts_error *err) {
  const cJSON *req = ctx;
  const char *layout = get_string(req, "layout");
  int rc = ts_graph_set_target(g, get_string(req, "target"), err);
  if (!rc && layout) rc = ts_graph_set_layout(g, layout, err);
  if (!rc)
    rc = ts_graph_set_io_layout(g, get_string(req, "input_layout"),
                                get_string(req, "output_layout"), err);
  if (!rc && !get_bool(req, "winograd", true)) ts_graph_set_winograd(g, false);
  const cJSON *tile = cJSON_GetObjectItemCaseSensitive(req, "winograd_tile");
  if (!rc && tile) {
    if (!cJSON_IsNumber(tile) ||
        (tile->valueint != 0 && tile->valueint != 2 && tile->valueint != 4))
      rc = TS_ERR(err, TS_EINVAL,
                  "winograd tile: want 2, 4 or \"auto\" (Winograd's F(2x2, "
                  "3x3) or F(4x4, 3x3), or per conv)");
    else
      ts_graph_set_winograd_tile(g, tile->valueint);
  }
  return rc;
}

static void import_options_free(ts_graph_import_options *io);

/* The request's "input_shapes" and "dims" (lists of strings) as import
 * options; import_options_free frees the lists. */
static int import_options(const cJSON *req, ts_graph_import_options *io,
                          ts_error *err) {
  memset(io, 0, sizeof *io);
  const char **shapes = NULL, **dims = NULL;
  int rc = get_strings(req, "input_shapes", &shapes, &io->n_input_shapes, err);
  if (!rc) rc = get_strings(req, "dims", &dims, &io->n_dims, err);
  io->input_shapes = shapes;
  io->dims = dims;
  if (rc) import_options_free(io);
  return rc;
}

static void import_options_free(ts_graph_import_options *io) {
  free((void *)io->input_shapes);
  free((void *)io->dims);
  io->input_shapes = io->dims = NULL;
}

/* Imports an ONNX model as `tessera compile` and `tune --model` do: the
 * input shapes fixed, the layout options applied, every pass run and the
 * result verified. With layout "auto" the block pass weighs its
 * candidates by db's records for the request's target (compile), or
 * builds them all (collect: tune, which measures them). */
static int load_model(const cJSON *req, ts_db *db, bool collect, ts_graph **out,
                      ts_error *err) {
  *out = NULL;
  const char *path = get_string(req, "model");
  ts_graph_import_options io;
  int rc = import_options(req, &io, err);
  if (rc) return rc;
  ts_graph *g = NULL;
  rc = ts_graph_import_onnx(path, &io, &g, err);
  if (!rc) rc = graph_settings(g, (void *)req, err);
  ts_block_options bo = {
      .db = db, .target = get_string(req, "target"), .collect_tasks = collect};
  if (!rc) rc = ts_graph_set_block_options(g, &bo, err);
  if (!rc) rc = ts_graph_run_passes(g, NULL, err);
  if (!rc) rc = ts_graph_verify(g, err);
  import_options_free(&io);
  if (rc) {
    ts_graph_free(g);
    return rc;
  }
  *out = g;
  return TS_OK;
}

/* Appends the alternatives' tasks (a pass's candidates, each built alone)
 * that are not among (*gt, *n) already. */
static int add_alts(ts_graph_task **gt, int *n, const ts_graph_task *alt,
                    int n_alt, ts_error *err) {
  if (!n_alt) return TS_OK;
  ts_graph_task *all = realloc(*gt, sizeof *all * (size_t)(*n + n_alt));
  if (!all) return TS_ERR(err, TS_ENOMEM, "out of memory");
  *gt = all;
  for (int i = 0; i < n_alt; i++) {
    bool seen = false;
    for (int k = 0; k < *n && !seen; k++)
      seen = ts_hash128_eq(all[k].hash, alt[i].hash);
    if (!seen) all[(*n)++] = alt[i];
  }
  return TS_OK;
}

/* The tasks of a request: its "workloads" ([{"spec": S} or {"tir": TEXT,
 * "name": N}, each with an optional "weight"]) or the distinct tasks of its
 * "model", each weighted by its calls per run. */
static int tune_tasks(const cJSON *req, tune_state *t, ts_error *err) {
  int rc;
  if (get_string(req, "model")) {
    ts_graph *g = NULL;
    ts_graph_task *gt = NULL;
    int n = 0;
    if ((rc = load_model(req, NULL, true, &g, err))) return rc;
    const ts_graph_task *alt = NULL;
    int n_alt = 0;
    ts_graph_block_candidate_tasks(g, &alt, &n_alt);
    if ((rc = ts_graph_tasks(g, &gt, &n, err)) ||
        (rc = add_alts(&gt, &n, alt, n_alt, err)) ||
        (rc = tune_state_alloc(t, n, err))) {
      free(gt);
      ts_graph_free(g);
      return rc;
    }
    if (n == 0)
      rc = TS_ERR(err, TS_EINVAL, "model '%s' has no task to tune",
                  get_string(req, "model"));
    for (int i = 0; !rc && i < n; i++) {
      t->funcs[i] = ts_func_copy(gt[i].func);
      t->names[i] = strdup(gt[i].first_node);
      t->n = i + 1;
      if (!t->funcs[i] || !t->names[i]) {
        rc = TS_ERR(err, TS_ENOMEM, "out of memory");
        break;
      }
      t->tasks[i].func = t->funcs[i];
      t->tasks[i].name = t->names[i];
      t->tasks[i].weight = gt[i].count;
      t->tasks[i].flops = gt[i].flops;
    }
    free(gt);
    ts_graph_free(g);
    return rc;
  }
  const cJSON *arr = cJSON_GetObjectItemCaseSensitive(req, "workloads"), *x;
  int n = cJSON_GetArraySize(arr);
  if (!cJSON_IsArray(arr) || n == 0)
    return TS_ERR(err, TS_EINVAL, "nothing to tune: no workload or model");
  if ((rc = tune_state_alloc(t, n, err))) return rc;
  cJSON_ArrayForEach(x, arr) {
    int i = t->n++;
    const char *spec = get_string(x, "spec"), *tir = get_string(x, "tir");
    const char *name = get_string(x, "name");
    if (spec) {
      if ((rc = ts_workload_from_spec(spec, &t->wl[i], err))) return rc;
      t->funcs[i] = t->wl[i]->func;
      t->tasks[i].name = t->wl[i]->name;
      t->tasks[i].spec = t->wl[i]->spec;
      t->tasks[i].flops = t->wl[i]->flops;
    } else if (tir) {
      if ((rc = ts_func_parse(tir, strlen(tir), name ? name : "<tir>",
                              &t->funcs[i], err)))
        return rc;
      if ((rc = ts_func_verify(t->funcs[i], err))) return rc;
      t->names[i] = strdup(name ? name : ts_func_name(t->funcs[i]));
      if (!t->names[i]) return TS_ERR(err, TS_ENOMEM, "out of memory");
      t->tasks[i].name = t->names[i];
    } else {
      return TS_ERR(err, TS_EINVAL,
                    "request: workload %d has neither 'spec' nor 'tir'", i);
    }
    t->tasks[i].func = t->funcs[i];
    t->tasks[i].weight = get_number(x, "weight", 1);
    if (!(t->tasks[i].weight >= 0))
      return TS_ERR(err, TS_EINVAL, "workload %d: weight must be >= 0", i);
  }
  return TS_OK;
}

static cJSON *tune_result_json(const ts_tune_result *r, const tune_state *t,
                               const char *target, const bool *confirmed) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "job", r->job_name);
  cJSON_AddStringToObject(o, "state", ts_db_job_state_name(r->state));
  cJSON_AddBoolToObject(o, "resumed", r->resumed);
  cJSON_AddStringToObject(o, "target", target);
  cJSON_AddNumberToObject(o, "trials_done", (double)r->trials_done);
  cJSON_AddNumberToObject(o, "trials_now", (double)r->trials_now);
  cJSON_AddNumberToObject(o, "seconds", r->seconds);
  cJSON_AddNumberToObject(o, "build_seconds", r->build_seconds);
  cJSON_AddNumberToObject(o, "measure_seconds", r->measure_seconds);
  cJSON_AddNumberToObject(o, "search_seconds", r->search_seconds);
  cJSON *arr = cJSON_AddArrayToObject(o, "tasks");
  for (int i = 0; i < r->n_tasks && i < t->n; i++) {
    const ts_tune_task_result *tr = &r->tasks[i];
    const ts_tune_task *task = &t->tasks[i];
    cJSON *x = cJSON_CreateObject();
    char hex[33];
    ts_hash128_hex(ts_func_hash(task->func), hex);
    double flops = task->flops > 0 ? task->flops : ts_func_flops(task->func);
    cJSON_AddStringToObject(x, "name", task->name);
    cJSON_AddStringToObject(x, "hash", hex);
    if (task->spec)
      cJSON_AddStringToObject(x, "spec", task->spec);
    else
      cJSON_AddNullToObject(x, "spec");
    cJSON_AddNumberToObject(x, "weight", task->weight);
    cJSON_AddNumberToObject(x, "flops", flops);
    add_number_or_null(x, "best_seconds", tr->best_seconds);
    add_number_or_null(x, "gflops",
                       tr->best_seconds > 0 ? flops / tr->best_seconds * 1e-9
                                            : (double)NAN);
    cJSON_AddBoolToObject(x, "confirmed", confirmed[i]);
    cJSON_AddNumberToObject(x, "trials", (double)tr->trials);
    cJSON_AddNumberToObject(x, "trials_now", (double)tr->trials_now);
    if (tr->trial_of_best >= 0)
      cJSON_AddNumberToObject(x, "trial_of_best", (double)tr->trial_of_best);
    else
      cJSON_AddNullToObject(x, "trial_of_best");
    cJSON *st = cJSON_AddObjectToObject(x, "by_status");
    for (int s = 0; s < TS_DB_N_STATUS; s++)
      cJSON_AddNumberToObject(st, ts_db_status_name((ts_db_status)s),
                              (double)tr->by_status[s]);
    cJSON *trace =
        tr->best_trace_json ? cJSON_Parse(tr->best_trace_json) : NULL;
    ts_json_add(x, "trace", trace ? trace : cJSON_CreateNull());
    ts_json_add(arr, NULL, x);
  }
  return o;
}

/* Runs (or resumes) a tuning job on the embedded measurement pool, as
 * `tessera tune` does, committing to db. The request: "workloads" or
 * "model" (with "input_shapes", "layout", "winograd"), "target", "trials",
 * "trials_per_task", "job", "seed", "batch", "population", "timeout_ms",
 * "build_timeout_ms", "cost_model", "strategy", "task_scheduler",
 * "tensorize" and "confirm_top" (when the job finishes, the fastest
 * schedules of each task are measured again side by side: ts_confirm).
 * on_log gets the job's log lines (one JSON object per measured
 * candidate), on_text its task table and progress (either may be NULL).
 * When *stop becomes non-zero the batch in flight is measured and
 * committed and the job ends as interrupted (no confirmation then). */
int ts_py_tune(ts_db *db, const char *request, ts_py_line_fn on_log,
               ts_py_line_fn on_text, volatile sig_atomic_t *stop, char **out,
               ts_error *err) {
  *out = NULL;
  cJSON *req = NULL;
  int rc = parse_request(request, &req, err);
  if (rc) return rc;
  tune_state t;
  memset(&t, 0, sizeof t);
  ts_tune_options o = ts_tune_defaults();
  ts_runner *runner = NULL;
  FILE *log = NULL, *text = NULL;
  ts_tune_result result;
  memset(&result, 0, sizeof result);
  bool *confirmed = NULL;
  char *canon = NULL;
  if ((rc = tune_tasks(req, &t, err))) goto done;
  if (get_string(req, "target")) o.target = get_string(req, "target");
  o.trials = (int64_t)get_number(req, "trials", (double)o.trials);
  o.trials_per_task = (int64_t)get_number(req, "trials_per_task", 0);
  o.job_name = get_string(req, "job");
  o.seed = (uint64_t)get_number(req, "seed", (double)o.seed);
  o.search.batch = (int)get_number(req, "batch", o.search.batch);
  o.search.population = (int)get_number(req, "population", o.search.population);
  o.measure.timeout_ms =
      (int)get_number(req, "timeout_ms", o.measure.timeout_ms);
  o.build_timeout_ms =
      (int)get_number(req, "build_timeout_ms", o.build_timeout_ms);
  o.space.tensorize = get_bool(req, "tensorize", o.space.tensorize);
  if (get_string(req, "cost_model"))
    o.cost_model = get_string(req, "cost_model");
  const char *s = get_string(req, "strategy");
  if (s && ts_strategy_parse(s, &o.strategy)) {
    rc =
        TS_ERR(err, TS_EINVAL, "strategy: evolutionary or random, not '%s'", s);
    goto done;
  }
  s = get_string(req, "task_scheduler");
  if (s && ts_task_policy_parse(s, &o.policy)) {
    rc = TS_ERR(err, TS_EINVAL,
                "task_scheduler: gradient or round-robin, not '%s'", s);
    goto done;
  }
  o.stop = stop;
  if ((on_log && !(log = sink_open(on_log))) ||
      (on_text && !(text = sink_open(on_text)))) {
    rc = TS_ERR(err, TS_ENOMEM, "cannot open the progress stream");
    goto done;
  }
  o.output.log = log;
  o.output.out = text;
  o.output.tty = false;
  if ((rc = ts_runner_embedded_create(NULL, &runner, err))) goto done;
  if ((rc = ts_tune(db, runner, t.tasks, t.n, &o, &result, err))) goto done;
  canon = ts_db_canonical_target(db, o.target);
  confirmed = calloc((size_t)result.n_tasks + 1, sizeof *confirmed);
  if (!canon || !confirmed) {
    rc = canon ? TS_ERR(err, TS_ENOMEM, "out of memory")
               : db_fail(db, TS_EINVAL, err);
    goto done;
  }
  int top = (int)get_number(req, "confirm_top", 0);
  for (int i = 0; top > 0 && result.state == TS_DB_JOB_FINISHED &&
                  i < result.n_tasks && !(stop && *stop);
       i++) {
    ts_tune_task_result *tr = &result.tasks[i];
    if (!tr->best_trace_json) continue;
    if (text) fprintf(text, "confirming task %d of %d\n", i + 1, t.n);
    ts_confirm_options co = ts_confirm_defaults();
    co.top_k = top;
    ts_confirm_result cr;
    ts_error cerr;
    ts_error_clear(&cerr);
    int crc = ts_confirm(db, tr->workload_id, canon, &co, &cr, &cerr);
    if (crc) {
      if (text) fprintf(text, "task %d not confirmed: %s\n", i, cerr.msg);
      if (crc == TS_EUNSUPPORTED) break; /* the same for every task */
      continue;
    }
    if (ts_tune_result_refresh_best(db, canon, &result, i) == TS_OK)
      confirmed[i] = true;
  }
  if (text) fflush(text);
  rc = out_json(tune_result_json(&result, &t, canon, confirmed), out, err);
done:
  if (log) fclose(log);
  if (text) fclose(text);
  free(canon);
  free(confirmed);
  ts_tune_result_clear(&result);
  ts_runner_destroy(runner);
  tune_state_free(&t);
  cJSON_Delete(req);
  return rc;
}

/* ---- compiling a model ---- */

/* A compile report as `tessera compile --json` prints it; import_s: the
 * seconds of the import and passes. */
static cJSON *compile_json(const ts_graph_compile_report *rep,
                           const char *model, const char *output,
                           double import_s) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "model", model);
  cJSON_AddStringToObject(root, "output", output);
  cJSON_AddStringToObject(root, "target", rep->target ? rep->target : "");
  cJSON_AddNumberToObject(root, "calls", rep->n_calls);
  cJSON *arr = cJSON_AddArrayToObject(root, "tasks");
  for (int i = 0; i < rep->n_tasks; i++) {
    const ts_graph_compile_task *x = &rep->tasks[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "hash", x->hash);
    cJSON_AddStringToObject(o, "name", x->name ? x->name : "");
    cJSON_AddStringToObject(o, "first_node",
                            x->first_node ? x->first_node : "");
    cJSON_AddNumberToObject(o, "count", x->count);
    cJSON_AddNumberToObject(o, "flops", x->flops);
    cJSON_AddStringToObject(o, "source", x->source ? x->source : "");
    if (x->record_id)
      cJSON_AddNumberToObject(o, "record", (double)x->record_id);
    else
      cJSON_AddNullToObject(o, "record");
    add_number_or_null(o, "latency_s", x->latency_s);
    if (x->fallback_note)
      cJSON_AddStringToObject(o, "fallback", x->fallback_note);
    else
      cJSON_AddNullToObject(o, "fallback");
    ts_json_add(arr, NULL, o);
  }
  cJSON *m = cJSON_AddObjectToObject(root, "memory");
  cJSON_AddNumberToObject(m, "arena_bytes", (double)rep->arena_bytes);
  cJSON_AddNumberToObject(m, "lower_bound_bytes",
                          (double)rep->lower_bound_bytes);
  cJSON_AddNumberToObject(m, "intermediate_bytes", (double)rep->total_bytes);
  cJSON_AddNumberToObject(m, "constant_bytes", (double)rep->constant_bytes);
  cJSON_AddNumberToObject(m, "library_bytes", (double)rep->library_bytes);
  cJSON *tm = cJSON_AddObjectToObject(root, "seconds");
  cJSON_AddNumberToObject(tm, "import_and_passes", import_s);
  cJSON_AddNumberToObject(tm, "plan", rep->plan_ms / 1e3);
  cJSON_AddNumberToObject(tm, "lookups", rep->lookup_ms / 1e3);
  cJSON_AddNumberToObject(tm, "codegen", rep->codegen_ms / 1e3);
  cJSON_AddNumberToObject(tm, "link", rep->link_ms / 1e3);
  if (rep->warning)
    cJSON_AddStringToObject(root, "warning", rep->warning);
  else
    cJSON_AddNullToObject(root, "warning");
  return root;
}

#define MAX_BUCKETS 17

/* The request's "shape_buckets" ({"symbol": S, "sizes": [ascending
 * sizes]}, the largest the top of the range): the model imported padded to
 * each size and compiled into one library, as `tessera compile
 * --shape-buckets` does. *out: {"symbol", "buckets": [report + "size"]}. */
static int compile_buckets(const cJSON *req, const cJSON *sb,
                           ts_graph_compile_options *co, cJSON **out,
                           ts_error *err) {
  *out = NULL;
  const char *sym = get_string(sb, "symbol");
  const cJSON *arr = cJSON_GetObjectItemCaseSensitive(sb, "sizes"), *x;
  int64_t sizes[MAX_BUCKETS];
  int n = 0;
  if (!sym || !cJSON_IsArray(arr) || !cJSON_GetArraySize(arr))
    return TS_ERR(err, TS_EINVAL,
                  "request: 'shape_buckets' needs 'symbol' and 'sizes'");
  cJSON_ArrayForEach(x, arr) {
    if (n == MAX_BUCKETS)
      return TS_ERR(err, TS_EINVAL, "shape buckets: %d sizes at most",
                    MAX_BUCKETS);
    if (!cJSON_IsNumber(x) || x->valuedouble < 1 ||
        x->valuedouble > (double)(1ll << 31) ||
        x->valuedouble != (double)(int64_t)x->valuedouble ||
        (n && (int64_t)x->valuedouble <= sizes[n - 1]))
      return TS_ERR(err, TS_EINVAL,
                    "shape buckets of '%s': sizes are positive integers, "
                    "ascending",
                    sym);
    sizes[n++] = (int64_t)x->valuedouble;
  }
  ts_graph_import_options io;
  int rc = import_options(req, &io, err);
  if (rc) return rc;
  ts_graph *gs[MAX_BUCKETS] = {0};
  ts_graph_compile_report reps[MAX_BUCKETS];
  memset(reps, 0, sizeof reps);
  io.before_passes = graph_settings;
  io.ctx = (void *)req;
  double t0 = ts_now_seconds();
  rc = ts_graph_import_padded_sizes(co->model_path, &io, sizes, n, NULL, gs,
                                    err);
  const char *have = rc ? NULL : ts_graph_symbol(gs[0], 0, NULL);
  if (!rc && (!have || strcmp(have, sym)))
    rc = TS_ERR(err, TS_EINVAL,
                "shape buckets of '%s': the model's dynamic dimension left "
                "is '%s'",
                sym, have ? have : "(none)");
  for (int b = 0; !rc && b < n; b++) rc = ts_graph_verify(gs[b], err);
  double import_s = (ts_now_seconds() - t0) / n;
  if (!rc)
    rc = ts_graph_compile_padded((const ts_graph *const *)gs, n, co, reps, err);
  if (!rc) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "model", co->model_path);
    cJSON_AddStringToObject(root, "output", co->output);
    cJSON_AddStringToObject(root, "symbol", sym);
    cJSON *list = cJSON_AddArrayToObject(root, "buckets");
    for (int b = 0; b < n; b++) {
      cJSON *o = compile_json(&reps[b], co->model_path, co->output, import_s);
      cJSON_AddNumberToObject(o, "size", (double)sizes[b]);
      ts_json_add(list, NULL, o);
    }
    *out = root;
  }
  for (int b = 0; b < n; b++) {
    ts_graph_compile_report_clear(&reps[b]);
    ts_graph_free(gs[b]);
  }
  import_options_free(&io);
  return rc;
}

/* Compiles the request's "model" (with "input_shapes", "layout",
 * "input_layout", "output_layout", "winograd", and "shape_buckets" for a
 * library that serves every size of a dynamic dimension) into the shared
 * library "output" for "target" with db's best schedules (db may be NULL:
 * default schedules), linked against libtessera_rt in "runtime_dir",
 * building "threads" kernels at once. *out: the report (tasks, memory,
 * seconds, warning), as `tessera compile --json` prints it. */
int ts_py_compile(ts_db *db, const char *request, char **out, ts_error *err) {
  *out = NULL;
  cJSON *req = NULL;
  int rc = parse_request(request, &req, err);
  if (rc) return rc;
  const char *model = get_string(req, "model");
  const char *output = get_string(req, "output");
  const char *rtdir = get_string(req, "runtime_dir");
  if (!model || !output || !rtdir) {
    cJSON_Delete(req);
    return TS_ERR(err, TS_EINVAL,
                  "request: 'model', 'output' and 'runtime_dir' are needed");
  }
  const char **shapes = NULL;
  int n_shapes = 0;
  ts_graph_compile_report rep;
  memset(&rep, 0, sizeof rep);
  ts_graph *g = NULL;
  cJSON *root = NULL;
  if ((rc = get_strings(req, "input_shapes", &shapes, &n_shapes, err)))
    goto done;
  ts_graph_compile_options co;
  memset(&co, 0, sizeof co);
  co.output = output;
  co.target = get_string(req, "target");
  co.db = db;
  co.build_threads = (int)get_number(req, "threads", 0);
  co.runtime_dir = rtdir;
  co.model_path = model;
  co.input_shapes = shapes;
  co.n_input_shapes = n_shapes;
  const cJSON *sb = cJSON_GetObjectItemCaseSensitive(req, "shape_buckets");
  if (sb) {
    if ((rc = compile_buckets(req, sb, &co, &root, err))) goto done;
  } else {
    double t0 = ts_now_seconds();
    if ((rc = load_model(req, db, false, &g, err))) goto done;
    double t1 = ts_now_seconds();
    if ((rc = ts_graph_compile(g, &co, &rep, err))) goto done;
    root = compile_json(&rep, model, output, t1 - t0);
  }
  rc = out_json(root, out, err);
done:
  ts_graph_compile_report_clear(&rep);
  ts_graph_free(g);
  free(shapes);
  cJSON_Delete(req);
  return rc;
}
