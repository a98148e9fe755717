/*
 * cmd_db.c — `tessera db`: the tuning database for people and scripts.
 * list (workloads × targets with best latency and GFLOP/s), show (a
 * workload's TIR, best trace per target, newest records), best (the best
 * trace JSON on one target), export/import (JSON Lines), prune, stats, sync
 * (copies between two databases, SQLite or PostgreSQL), and bench (times
 * the compile-time query on a scratch database).
 */
#include "cli.h"

#include "db/db.h"
#include "tir/alloc.h"

#include <cjson/cJSON.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char db_usage[] =
    "usage: tessera db <command> [--db PATH] [options]\n"
    "\n"
    "commands:\n"
    "  list [--json]              workloads x targets: best latency, GFLOP/s,\n"
    "                             record counts\n"
    "  show WORKLOAD [--last N] [--json]\n"
    "                             TIR, the best trace on each target, the N\n"
    "                             newest records (10)\n"
    "  best WORKLOAD [--target T] the best trace JSON on target T (default:\n"
    "                             this machine; for scripts)\n"
    "  export [-o FILE]           the database as JSON Lines (stdout)\n"
    "  import FILE [--json]       add an export to the database ('-': stdin)\n"
    "  prune --keep K [--keep-failed] [--vacuum] [--json]\n"
    "                             keep the K fastest ok records of each\n"
    "                             workload x target; delete failed records\n"
    "                             unless --keep-failed\n"
    "  stats [--json]             records by status, jobs, file size\n"
    "  migrate [--json]           bring a database of an older schema version\n"
    "                             up to this tessera's (read-only commands\n"
    "                             such as compile refuse an older one)\n"
    "  confirm [WORKLOAD] [--target T] [--top K] [--rounds R] [--threads N]\n"
    "          [--json]           measure the K fastest distinct schedules\n"
    "                             (6) of each workload (or one) on target T\n"
    "                             (this host; with --threads N, its records\n"
    "                             of N threads) again, side by side in R\n"
    "                             interleaved rounds (7), and keep their\n"
    "                             medians: best queries, `tessera compile`\n"
    "                             and the report use the confirmed figure\n"
    "  confirm --model M.onnx [--input-shape NAME=DIMS]... [pass options]\n"
    "          [--top K] [--rounds R] [--threads N]\n"
    "                             in the compiled model: compile it once per\n"
    "                             rank 0..K-1 (3) of each task's records and\n"
    "                             once with the vendor calls, run them side\n"
    "                             by side in R rounds (5), and store each\n"
    "                             task's times in the model as its\n"
    "                             confirmation (the pass options as compile\n"
    "                             takes them: tune and compile with the same;\n"
    "                             with --winograd-tile measure, first each\n"
    "                             conv's Winograd forms, timed in the model\n"
    "                             and stored for the pass to choose by)\n"
    "  sync --from DB --to DB [--target T] [--json]\n"
    "                             copy workloads, jobs and the records of\n"
    "                             target T (every target) from one database\n"
    "                             into another; a record already there is\n"
    "                             not copied again\n"
    "  bench [--records N] [--workloads N] [--queries N] [--json]\n"
    "                             fill a scratch database and time the\n"
    "                             best-by-PrimFunc query (with --db URL: in\n"
    "                             a scratch schema on that PostgreSQL server)\n"
    "\n"
    "  --db PATH    the database file (default ./tessera.db), or a PostgreSQL\n"
    "               URL postgresql://USER@HOST[:PORT]/DBNAME[?PARAMS]\n"
    "\n"
    "WORKLOAD is a structural hash, a unique hash prefix (4+ hex digits), a\n"
    "workload name or an operator spec (\"matmul M=64 N=64 K=64\", hashed);\n"
    "`show`, `best` and `confirm` also take --workload SPEC or\n"
    "--tir FILE "
    "(the function is hashed and looked up). Targets are canonicalized:\n"
    "`--target llvm` means this host.\n";

/* Options shared by the subcommands; each accepts a subset. */
typedef struct db_args {
  const char *sub;
  const char *path;
  const char *key; /* positional WORKLOAD or FILE */
  const char *spec, *tir, *target, *output;
  const char *from, *to; /* sync */
  bool db_given;         /* --db was on the command line */
  long long keep, last, records, workloads, queries, top, rounds, threads;
  const char *model; /* confirm --model */
  const char *shapes[16];
  int n_shapes;
  bool keep_failed, vacuum, json;
} db_args;

static bool parse_count(const char *sub, const char *opt, const char *v,
                        long long min, long long *out) {
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (errno || end == v || *end || x < min) {
    cli_usage_error(sub, "%s wants a number >= %lld, not '%s'", opt, min, v);
    return false;
  }
  *out = x;
  return true;
}

/* Matches a numeric option; *rc receives EXIT_USAGE (message printed) when
 * its value is missing or bad. */
static bool count_option(int argc, char **argv, int *i, const char *sub,
                         const char *name, long long min, long long *out,
                         int *rc) {
  const char *v;
  bool missing;
  if (!cli_opt_value(argc, argv, i, name, &v, &missing)) return false;
  if (missing)
    *rc = cli_usage_error(sub, "%s needs a number", name);
  else if (!parse_count(sub, name, v, min, out))
    *rc = EXIT_USAGE;
  return true;
}

/* Parses argv[2..] (after "db SUB"). `allowed` lists the options this
 * subcommand takes; returns EXIT_OK or the exit code. */
static int parse_args(int argc, char **argv, const char *allowed,
                      bool positional, db_args *a) {
  int rc = EXIT_OK;
  for (int i = 2; i < argc; i++) {
    const char *arg = argv[i], *v;
    bool missing = false;
    char name[32] = "";
    if (strstr(allowed, " --model ")) { /* the model's pass options */
      int prc = EXIT_OK;
      if (cli_pass_option(a->sub, argc, argv, &i, &prc)) {
        if (prc != EXIT_OK) return prc;
        continue;
      }
    }
    if (arg[0] == '-' && arg[1]) {
      size_t n = strcspn(arg, "=");
      snprintf(name, sizeof name, "%.*s", (int)(n < 31 ? n : 31), arg);
      char needle[40];
      snprintf(needle, sizeof needle, " %s ", name);
      if (!strstr(allowed, needle) && strcmp(name, "--db"))
        return cli_usage_error(a->sub, "unknown option '%s'", arg);
    }
    if (cli_opt_value(argc, argv, &i, "--db", &v, &missing)) {
      if (missing) return cli_usage_error(a->sub, "--db needs a path");
      a->path = v;
      a->db_given = true;
    } else if (cli_opt_value(argc, argv, &i, "--from", &v, &missing)) {
      if (missing) return cli_usage_error(a->sub, "--from needs a database");
      a->from = v;
    } else if (cli_opt_value(argc, argv, &i, "--to", &v, &missing)) {
      if (missing) return cli_usage_error(a->sub, "--to needs a database");
      a->to = v;
    } else if (cli_opt_value(argc, argv, &i, "--workload", &v, &missing)) {
      if (missing) return cli_usage_error(a->sub, "--workload needs a spec");
      a->spec = v;
    } else if (cli_opt_value(argc, argv, &i, "--model", &v, &missing)) {
      if (missing) return cli_usage_error(a->sub, "--model needs a file");
      a->model = v;
    } else if (cli_opt_value(argc, argv, &i, "--input-shape", &v, &missing)) {
      if (missing)
        return cli_usage_error(a->sub, "--input-shape needs NAME=DIMS");
      if (a->n_shapes == 16)
        return cli_usage_error(a->sub, "at most 16 --input-shape options");
      a->shapes[a->n_shapes++] = v;
    } else if (cli_opt_value(argc, argv, &i, "--tir", &v, &missing)) {
      if (missing) return cli_usage_error(a->sub, "--tir needs a file");
      a->tir = v;
    } else if (cli_opt_value(argc, argv, &i, "--target", &v, &missing)) {
      if (missing) return cli_usage_error(a->sub, "--target needs a target");
      a->target = v;
    } else if (cli_opt_value(argc, argv, &i, "-o", &v, &missing)) {
      if (missing) return cli_usage_error(a->sub, "-o needs a file");
      a->output = v;
    } else if (count_option(argc, argv, &i, a->sub, "--keep", 1, &a->keep,
                            &rc) ||
               count_option(argc, argv, &i, a->sub, "--last", 0, &a->last,
                            &rc) ||
               count_option(argc, argv, &i, a->sub, "--records", 1, &a->records,
                            &rc) ||
               count_option(argc, argv, &i, a->sub, "--workloads", 1,
                            &a->workloads, &rc) ||
               count_option(argc, argv, &i, a->sub, "--queries", 0, &a->queries,
                            &rc) ||
               count_option(argc, argv, &i, a->sub, "--top", 1, &a->top, &rc) ||
               count_option(argc, argv, &i, a->sub, "--rounds", 1, &a->rounds,
                            &rc) ||
               count_option(argc, argv, &i, a->sub, "--threads", 1, &a->threads,
                            &rc)) {
      if (rc != EXIT_OK) return rc;
    } else if (!strcmp(arg, "--keep-failed")) {
      a->keep_failed = true;
    } else if (!strcmp(arg, "--vacuum")) {
      a->vacuum = true;
    } else if (!strcmp(arg, "--json")) {
      a->json = true;
    } else if (arg[0] == '-' && arg[1]) {
      return cli_usage_error(a->sub, "unknown option '%s'", arg);
    } else if (positional && !a->key) {
      a->key = arg;
    } else {
      return cli_usage_error(a->sub, "unexpected argument '%s'", arg);
    }
  }
  return EXIT_OK;
}

static int open_db(const db_args *a, bool create, ts_db **db) {
  ts_db_options o = ts_db_defaults();
  o.create = create;
  ts_error err;
  ts_error_clear(&err);
  if (ts_db_open(a->path, &o, db, &err) != TS_OK) {
    cli_error("cannot open the database", &err);
    return EXIT_FAIL;
  }
  return EXIT_OK;
}

static int db_fail(ts_db *db, const char *what) {
  cli_error(what, ts_db_error(db));
  ts_db_close(db);
  return EXIT_FAIL;
}

/* "llvm -mcpu=skylake-avx512 -num-cores=2" for a canonical target: the
 * feature list and the CUDA limits left out (`stats` prints them in full). */
static void short_target(const char *t, char *out, size_t cap) {
  size_t used = 0;
  out[0] = 0;
  for (const char *p = t; *p;) {
    while (*p == ' ') p++;
    size_t n = strcspn(p, " ");
    if (n && strncmp(p, "-mattr=", 7) && strncmp(p, "-max-", 5)) {
      int w = snprintf(out + used, cap - used, "%s%.*s", used ? " " : "",
                       (int)n, p);
      if (w > 0) used += (size_t)w;
      if (used >= cap) {
        out[cap - 1] = 0;
        return;
      }
    }
    p += n;
  }
}

static void format_seconds(double s, char out[32]) {
  if (isnan(s))
    snprintf(out, 32, "-");
  else
    snprintf(out, 32, "%.3f", s * 1e6);
}

static void format_gflops(double flops, double s, char out[32]) {
  if (isnan(s) || s <= 0 || flops <= 0)
    snprintf(out, 32, "-");
  else
    snprintf(out, 32, "%.2f", flops / s * 1e-9);
}

/* Prints a JSON value (indented) on stdout and frees it. */
static int run_list(const db_args *a) {
  ts_db *db;
  int rc = open_db(a, false, &db);
  if (rc) return rc;
  ts_db_summary *rows;
  int n;
  if (ts_db_list(db, 0, &rows, &n)) return db_fail(db, "db list");
  if (a->json) { /* one object per workload x target */
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; i < n; i++) {
      const ts_db_summary *r = &rows[i];
      cJSON *o = cJSON_CreateObject();
      cJSON_AddNumberToObject(o, "workload_id", (double)r->workload_id);
      cJSON_AddStringToObject(o, "workload", r->name);
      cJSON_AddStringToObject(o, "hash", r->hash);
      if (r->target)
        cJSON_AddStringToObject(o, "target", r->target);
      else
        cJSON_AddNullToObject(o, "target");
      cJSON_AddNumberToObject(o, "records", (double)r->n_records);
      cJSON_AddNumberToObject(o, "ok", (double)r->n_ok);
      if (isfinite(r->best_s)) {
        cJSON_AddNumberToObject(o, "best_seconds", r->best_s);
        if (r->flops > 0)
          cJSON_AddNumberToObject(o, "gflops", r->flops / r->best_s * 1e-9);
        else
          cJSON_AddNullToObject(o, "gflops");
      } else {
        cJSON_AddNullToObject(o, "best_seconds");
        cJSON_AddNullToObject(o, "gflops");
      }
      ts_json_add(arr, NULL, o);
    }
    cli_print_json(arr);
  } else if (n == 0) {
    printf("no workloads in %s\n", ts_db_path(db));
  } else {
    printf("%-5s %-36s %-12s %-44s %8s %8s %12s %9s\n", "id", "workload",
           "hash", "target", "records", "ok", "best (us)", "GFLOP/s");
    for (int i = 0; i < n; i++) {
      const ts_db_summary *s = &rows[i];
      char target[256] = "-", best[32], gflops[32];
      if (s->target) {
        char brief[224];
        short_target(s->target, brief, sizeof brief);
        snprintf(target, sizeof target, "[%lld] %s", (long long)s->target_id,
                 brief);
      }
      format_seconds(s->best_s, best);
      format_gflops(s->flops, s->best_s, gflops);
      printf("%-5lld %-36s %-12.12s %-44s %8lld %8lld %12s %9s\n",
             (long long)s->workload_id, s->name, s->hash, target,
             (long long)s->n_records, (long long)s->n_ok, best, gflops);
    }
  }
  ts_db_summaries_free(rows, n);
  ts_db_close(db);
  return EXIT_OK;
}

/* The workload named by the positional key or --workload/--tir. */
static int resolve(const db_args *a, ts_db *db, int64_t *id) {
  int given = !!a->key + !!a->spec + !!a->tir;
  if (given != 1) {
    ts_db_close(db);
    return cli_usage_error(a->sub,
                           "name exactly one workload (WORKLOAD, --workload "
                           "SPEC or --tir FILE)");
  }
  if (a->key) {
    char hex[33];
    if (ts_db_resolve_workload(db, cli_workload_key(a->key, hex), id) == TS_OK)
      return EXIT_OK;
    return db_fail(db, "unknown workload");
  }
  ts_workload *w;
  ts_func *f;
  int rc = cli_load_func(a->spec, a->tir, &w, &f);
  if (rc) {
    ts_db_close(db);
    return rc;
  }
  rc = ts_db_find_workload(db, f, id);
  if (w)
    ts_workload_free(w);
  else
    ts_func_free(f);
  if (rc == TS_OK) return EXIT_OK;
  return db_fail(db, "workload not in the database");
}

static void print_record_row(const ts_db_record *r, double flops) {
  char median[32], gflops[32], brief[128];
  format_seconds(r->median_s, median);
  format_gflops(flops, r->status == TS_DB_STATUS_OK ? r->median_s : NAN,
                gflops);
  short_target(r->target, brief, sizeof brief);
  char job[48] = "-";
  if (r->job_id)
    snprintf(job, sizeof job, "%lld#%lld", (long long)r->job_id,
             (long long)r->trial);
  printf("%-8lld %-24s %-13s %12s %9s %-12s %-12s %s%s%s\n", (long long)r->id,
         r->created, ts_db_status_name(r->status), median, gflops, job,
         r->worker[0] ? r->worker : "-", brief, r->error[0] ? "  error: " : "",
         r->error);
}

/* A record as a JSON object (db show --json). */
static cJSON *record_json(const ts_db_record *r, double flops) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "record", (double)r->id);
  cJSON_AddStringToObject(o, "created", r->created);
  cJSON_AddStringToObject(o, "status", ts_db_status_name(r->status));
  double secs = ts_db_record_seconds(r);
  if (isfinite(secs) && r->status == TS_DB_STATUS_OK) {
    cJSON_AddNumberToObject(o, "seconds", secs);
    if (flops > 0)
      cJSON_AddNumberToObject(o, "gflops", flops / secs * 1e-9);
    else
      cJSON_AddNullToObject(o, "gflops");
  } else {
    cJSON_AddNullToObject(o, "seconds");
    cJSON_AddNullToObject(o, "gflops");
  }
  cJSON_AddBoolToObject(o, "confirmed", r->confirmed_rounds > 0);
  if (r->job_id) {
    cJSON_AddNumberToObject(o, "job_id", (double)r->job_id);
    cJSON_AddNumberToObject(o, "trial", (double)r->trial);
  }
  cJSON_AddStringToObject(o, "worker", r->worker);
  cJSON_AddStringToObject(o, "target", r->target);
  cJSON_AddStringToObject(o, "error", r->error);
  return o;
}

/* db show --json: the workload, per target its counts and best record
 * (with its trace as an object), the newest records. */
static int show_json(const db_args *a, ts_db *db, int64_t id,
                     const ts_db_workload *w) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "workload", w->name);
  cJSON_AddNumberToObject(o, "id", (double)id);
  cJSON_AddStringToObject(o, "hash", w->hash);
  cJSON_AddNumberToObject(o, "flops", w->flops);
  cJSON_AddStringToObject(o, "created", w->created);
  cJSON_AddStringToObject(o, "tir", w->tir);
  ts_db_summary *rows;
  int n;
  if (ts_db_list(db, id, &rows, &n)) {
    cJSON_Delete(o);
    cli_error("db show", ts_db_error(db));
    return EXIT_FAIL;
  }
  int status = EXIT_OK;
  cJSON *targets = cJSON_AddArrayToObject(o, "targets");
  for (int i = 0; i < n; i++) {
    const ts_db_summary *sm = &rows[i];
    if (!sm->target) continue;
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "target", sm->target);
    cJSON_AddNumberToObject(t, "records", (double)sm->n_records);
    cJSON_AddNumberToObject(t, "ok", (double)sm->n_ok);
    ts_db_record best;
    if (sm->n_ok && !ts_db_best(db, id, sm->target, &best)) {
      cJSON *b = record_json(&best, w->flops);
      /* how it was measured (null for a record stored without it) */
      cJSON *measure =
          best.measure_json ? cJSON_Parse(best.measure_json) : NULL;
      if (measure)
        ts_json_add(b, "measure", measure);
      else
        cJSON_AddNullToObject(b, "measure");
      cJSON *trace = cJSON_Parse(best.trace_json);
      if (trace)
        ts_json_add(b, "trace", trace);
      else
        cJSON_AddNullToObject(b, "trace");
      ts_json_add(t, "best", b);
      ts_db_record_clear(&best);
    } else {
      if (sm->n_ok) {
        cli_error("db show", ts_db_error(db));
        status = EXIT_FAIL;
      }
      cJSON_AddNullToObject(t, "best");
    }
    ts_json_add(targets, NULL, t);
  }
  ts_db_summaries_free(rows, n);
  ts_db_record *recent;
  int n_recent;
  if (ts_db_recent_records(db, id, (int)a->last, &recent, &n_recent)) {
    cJSON_Delete(o);
    cli_error("db show", ts_db_error(db));
    return EXIT_FAIL;
  }
  cJSON *arr = cJSON_AddArrayToObject(o, "records");
  for (int i = 0; i < n_recent; i++)
    ts_json_add(arr, NULL, record_json(&recent[i], w->flops));
  ts_db_records_free(recent, n_recent);
  cli_print_json(o);
  return status;
}

static int run_show(const db_args *a) {
  ts_db *db;
  int64_t id;
  int rc = open_db(a, false, &db);
  if (rc || (rc = resolve(a, db, &id))) return rc;
  ts_db_workload w;
  if (ts_db_get_workload(db, id, &w)) return db_fail(db, "db show");
  if (a->json) {
    int st = show_json(a, db, id, &w);
    ts_db_workload_clear(&w);
    ts_db_close(db);
    return st;
  }
  printf(
      "workload  %s (id %lld)\nhash      %s\nflops     %.0f\ncreated   %s\n\n",
      w.name, (long long)id, w.hash, w.flops, w.created);
  fputs(w.tir, stdout);

  ts_db_summary *rows;
  int n;
  if (ts_db_list(db, id, &rows, &n)) {
    ts_db_workload_clear(&w);
    return db_fail(db, "db show");
  }
  int status = EXIT_OK;
  for (int i = 0; i < n; i++) {
    const ts_db_summary *s = &rows[i];
    if (!s->target) continue;
    printf("\n# target [%lld] %s\n", (long long)s->target_id, s->target);
    printf("#   %lld records, %lld ok\n", (long long)s->n_records,
           (long long)s->n_ok);
    if (!s->n_ok) continue;
    ts_db_record best;
    if (ts_db_best(db, id, s->target, &best)) {
      cli_error("db show", ts_db_error(db));
      status = EXIT_FAIL;
      continue;
    }
    char median[32], gflops[32];
    double secs = ts_db_record_seconds(&best);
    format_seconds(secs, median);
    format_gflops(w.flops, secs, gflops);
    printf("#   best: %s us, %s GFLOP/s (record %lld%s)\n", median, gflops,
           (long long)best.id, best.confirmed_rounds ? ", confirmed" : "");
    if (best.measure_json) printf("#   measured: %s\n", best.measure_json);
    char *text = ts_db_format_trace(db, best.trace_json);
    if (text) {
      fputs(text, stdout);
      fputc('\n', stdout);
      free(text);
    } else {
      fprintf(stderr, "tessera: error: record %lld: %s\n", (long long)best.id,
              ts_db_errmsg(db));
      status = EXIT_FAIL;
    }
    ts_db_record_clear(&best);
  }
  ts_db_summaries_free(rows, n);

  ts_db_record *recent;
  int n_recent;
  if (ts_db_recent_records(db, id, (int)a->last, &recent, &n_recent)) {
    ts_db_workload_clear(&w);
    return db_fail(db, "db show");
  }
  if (n_recent) {
    printf("\n# newest records\n%-8s %-24s %-13s %12s %9s %-12s %-12s %s\n",
           "record", "created", "status", "median (us)", "GFLOP/s", "job#trial",
           "worker", "target");
    for (int i = 0; i < n_recent; i++) print_record_row(&recent[i], w.flops);
  } else if (a->last) {
    printf("\n# no records\n");
  }
  ts_db_records_free(recent, n_recent);
  ts_db_workload_clear(&w);
  ts_db_close(db);
  return status;
}

static int run_best(const db_args *a) {
  const char *target = a->target ? a->target : "llvm"; /* this machine */
  ts_db *db;
  int64_t id;
  int rc = open_db(a, false, &db);
  if (rc || (rc = resolve(a, db, &id))) return rc;
  ts_db_record r;
  if (ts_db_best(db, id, target, &r)) return db_fail(db, "db best");
  ts_error err;
  ts_error_clear(&err);
  if (ts_db_check_trace_json(NULL, r.trace_json, strlen(r.trace_json), &err)) {
    fprintf(stderr, "tessera: error: record %lld: %s\n", (long long)r.id,
            err.msg);
    ts_db_record_clear(&r);
    ts_db_close(db);
    return EXIT_FAIL;
  }
  printf("%s\n", r.trace_json);
  ts_db_record_clear(&r);
  ts_db_close(db);
  return EXIT_OK;
}

static int run_export(const db_args *a) {
  if (a->output && cli_output_path("db export", a->output) != EXIT_OK)
    return EXIT_USAGE;
  ts_db *db;
  int rc = open_db(a, false, &db);
  if (rc) return rc;
  if (!a->output) {
    if (ts_db_export(db, stdout)) return db_fail(db, "db export");
    ts_db_close(db);
    return EXIT_OK;
  }
  /* a failed export leaves no partial file behind */
  size_t len = strlen(a->output);
  char *tmp = malloc(len + 8);
  if (!tmp) return db_fail(db, "out of memory");
  snprintf(tmp, len + 8, "%s.part", a->output);
  FILE *f = fopen(tmp, "wb");
  if (!f) {
    fprintf(stderr, "tessera: error: cannot write %s: %s\n", tmp,
            strerror(errno));
    free(tmp);
    ts_db_close(db);
    return EXIT_FAIL;
  }
  rc = ts_db_export(db, f);
  if (fclose(f) != 0 && rc == TS_OK) {
    fprintf(stderr, "tessera: error: cannot write %s: %s\n", tmp,
            strerror(errno));
    rc = TS_EIO;
  } else if (rc) {
    cli_error("db export", ts_db_error(db));
  }
  if (rc == TS_OK && rename(tmp, a->output) != 0) {
    fprintf(stderr, "tessera: error: cannot write %s: %s\n", a->output,
            strerror(errno));
    rc = TS_EIO;
  }
  if (rc) remove(tmp);
  free(tmp);
  ts_db_close(db);
  return rc ? EXIT_FAIL : EXIT_OK;
}

/* The counts of an import or a sync as a JSON object. */
static cJSON *import_json(const ts_db_import_stats *st) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "records", (double)st->records);
  cJSON_AddNumberToObject(o, "records_existing", (double)st->records_existing);
  cJSON_AddNumberToObject(o, "baselines", (double)st->baselines);
  cJSON_AddNumberToObject(o, "choices", (double)st->choices);
  cJSON_AddNumberToObject(o, "workloads_new", (double)st->workloads_new);
  cJSON_AddNumberToObject(o, "workloads_existing",
                          (double)st->workloads_existing);
  cJSON_AddNumberToObject(o, "targets_new", (double)st->targets_new);
  cJSON_AddNumberToObject(o, "targets_existing", (double)st->targets_existing);
  cJSON_AddNumberToObject(o, "jobs_new", (double)st->jobs_new);
  cJSON_AddNumberToObject(o, "jobs_existing", (double)st->jobs_existing);
  return o;
}

static int run_import(const db_args *a) {
  if (!a->key) return cli_usage_error(a->sub, "give the file to import");
  FILE *in;
  const char *name = a->key;
  if (!strcmp(a->key, "-")) {
    /* import reads its input twice: keep stdin in a temporary file */
    name = "<stdin>";
    in = tmpfile();
    if (!in) {
      fprintf(stderr, "tessera: error: cannot buffer stdin: %s\n",
              strerror(errno));
      return EXIT_FAIL;
    }
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, stdin)) > 0) fwrite(buf, 1, n, in);
  } else if (!(in = fopen(a->key, "rb"))) {
    fprintf(stderr, "tessera: error: cannot read %s: %s\n", a->key,
            strerror(errno));
    return EXIT_FAIL;
  }
  ts_db *db;
  int rc = open_db(a, true, &db);
  if (rc) {
    fclose(in);
    return rc;
  }
  ts_db_import_stats st;
  rc = ts_db_import(db, in, name, &st);
  fclose(in);
  if (rc) return db_fail(db, "import failed, nothing was added");
  if (a->json) {
    cJSON *o = import_json(&st);
    cJSON_AddStringToObject(o, "from", name);
    cli_print_json(o);
  } else
    printf("imported %lld records (%lld already present, skipped) from %s: "
           "workloads %lld new, %lld existing; targets %lld new, %lld "
           "existing; jobs %lld new, %lld existing\n",
           (long long)st.records, (long long)st.records_existing, name,
           (long long)st.workloads_new, (long long)st.workloads_existing,
           (long long)st.targets_new, (long long)st.targets_existing,
           (long long)st.jobs_new, (long long)st.jobs_existing);
  ts_db_close(db);
  return EXIT_OK;
}

static int run_prune(const db_args *a) {
  if (!a->keep) return cli_usage_error(a->sub, "--keep K is required");
  if (a->keep > 1000000000)
    return cli_usage_error(a->sub, "--keep is too large");
  ts_db *db;
  int rc = open_db(a, false, &db);
  if (rc) return rc;
  int64_t deleted;
  if (ts_db_prune(db, (int)a->keep, a->keep_failed, &deleted))
    return db_fail(db, "db prune");
  if (!a->json) printf("deleted %lld records\n", (long long)deleted);
  if (a->vacuum) {
    if (ts_db_vacuum(db)) return db_fail(db, "db prune --vacuum");
    if (!a->json) printf("vacuumed %s\n", ts_db_path(db));
  }
  if (a->json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "deleted", (double)deleted);
    cJSON_AddBoolToObject(o, "vacuumed", a->vacuum);
    cli_print_json(o);
  }
  ts_db_close(db);
  return EXIT_OK;
}

static void print_size(const char *label, int64_t bytes) {
  if (bytes >= 1 << 20)
    printf("%s%.1f MiB", label, (double)bytes / (1 << 20));
  else
    printf("%s%.1f KiB", label, (double)bytes / 1024);
}

static int run_stats(const db_args *a) {
  ts_db *db;
  int rc = open_db(a, false, &db);
  if (rc) return rc;
  ts_db_stats s;
  ts_db_job *jobs;
  int n_jobs;
  if (ts_db_get_stats(db, &s) || ts_db_jobs(db, &jobs, &n_jobs))
    return db_fail(db, "db stats");
  if (a->json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "database", ts_db_path(db));
    cJSON_AddStringToObject(o, "backend", ts_db_backend(db));
    cJSON_AddNumberToObject(o, "schema_version", s.schema_version);
    cJSON_AddNumberToObject(o, "file_bytes", (double)s.file_bytes);
    cJSON_AddNumberToObject(o, "wal_bytes", (double)s.wal_bytes);
    cJSON_AddNumberToObject(o, "workloads", (double)s.n_workloads);
    cJSON_AddNumberToObject(o, "targets", (double)s.n_targets);
    cJSON_AddNumberToObject(o, "records", (double)s.n_records);
    cJSON *st = cJSON_AddObjectToObject(o, "records_by_status");
    for (int i = 0; i < TS_DB_N_STATUS; i++)
      cJSON_AddNumberToObject(st, ts_db_status_name((ts_db_status)i),
                              (double)s.records_by_status[i]);
    cJSON *ja = cJSON_AddArrayToObject(o, "jobs");
    for (int i = 0; i < n_jobs; i++) {
      int64_t count = 0;
      ts_db_job_count_records(db, jobs[i].id, &count, NULL);
      cJSON *j = cJSON_CreateObject();
      cJSON_AddStringToObject(j, "name", jobs[i].name);
      cJSON_AddStringToObject(j, "state", ts_db_job_state_name(jobs[i].state));
      cJSON_AddNumberToObject(j, "trials_done", (double)jobs[i].trials_done);
      cJSON_AddNumberToObject(j, "trials_budget",
                              (double)jobs[i].trials_budget);
      cJSON_AddNumberToObject(j, "records", (double)count);
      cJSON_AddStringToObject(j, "started", jobs[i].started);
      if (jobs[i].finished[0])
        cJSON_AddStringToObject(j, "finished", jobs[i].finished);
      else
        cJSON_AddNullToObject(j, "finished");
      ts_json_add(ja, NULL, j);
    }
    cli_print_json(o);
    ts_db_jobs_free(jobs, n_jobs);
    ts_db_close(db);
    return EXIT_OK;
  }
  printf("database   %s (%s, schema version %d)\n", ts_db_path(db),
         ts_db_backend(db), s.schema_version);
  print_size("size       ", s.file_bytes);
  if (s.wal_bytes) print_size(" + write-ahead log ", s.wal_bytes);
  printf("\nworkloads  %lld\ntargets    %lld\nrecords    %lld\n",
         (long long)s.n_workloads, (long long)s.n_targets,
         (long long)s.n_records);
  for (int i = 0; i < TS_DB_N_STATUS; i++)
    printf("  %-14s %lld\n", ts_db_status_name((ts_db_status)i),
           (long long)s.records_by_status[i]);
  printf("jobs       %lld\n", (long long)s.n_jobs);
  for (int i = 0; i < n_jobs; i++) {
    int64_t count = 0;
    ts_db_job_count_records(db, jobs[i].id, &count, NULL);
    printf(
        "  %-24s %-11s trials %lld / %lld, %lld records kept, started %s%s%s\n",
        jobs[i].name, ts_db_job_state_name(jobs[i].state),
        (long long)jobs[i].trials_done, (long long)jobs[i].trials_budget,
        (long long)count, jobs[i].started,
        jobs[i].finished[0] ? ", finished " : "", jobs[i].finished);
  }
  ts_db_jobs_free(jobs, n_jobs);
  ts_db_close(db);
  return EXIT_OK;
}

static int run_bench(const db_args *a) {
  ts_db_bench_options o = ts_db_bench_defaults();
  if (a->records) o.records = a->records;
  if (a->workloads) {
    if (a->workloads > 1000000)
      return cli_usage_error(a->sub, "--workloads is at most 1000000");
    o.workloads = (int)a->workloads;
  }
  if (a->queries >= 0) {
    if (a->queries > 100000000)
      return cli_usage_error(a->sub, "--queries is at most 100000000");
    o.queries = (int)a->queries;
  }
  if (o.records < o.workloads)
    return cli_usage_error(a->sub, "--records must be at least --workloads");
  o.progress = !a->json;
  if (a->db_given) {
    if (!ts_db_is_url(a->path))
      return cli_usage_error(a->sub,
                             "--db takes a postgresql:// URL here (without "
                             "it the bench fills a scratch SQLite file)");
    o.url = a->path;
  }
  ts_db_bench_result r;
  ts_error err;
  ts_error_clear(&err);
  if (ts_db_bench(&o, &r, &err) != TS_OK) {
    cli_error("db bench", &err);
    return EXIT_FAIL;
  }
  if (a->json) {
    printf("{\"records\": %lld, \"workloads\": %d, \"queries\": %d, "
           "\"median_us\": %.3f, \"p99_us\": %.3f, \"hash_median_us\": %.3f, "
           "\"prebuilt_median_us\": %.3f, \"prebuilt_p99_us\": %.3f, "
           "\"cold_median_us\": %.3f, \"cold_p99_us\": %.3f, "
           "\"fill_seconds\": %.3f, \"file_bytes\": %lld}\n",
           (long long)r.records, r.workloads, r.queries, r.median_us, r.p99_us,
           r.hash_median_us, r.prebuilt_median_us, r.prebuilt_p99_us,
           r.cold_median_us, r.cold_p99_us, r.fill_seconds,
           (long long)r.file_bytes);
    return EXIT_OK;
  }
  printf("db bench: %lld records over %d matmul workloads and 2 targets "
         "(%s)\n",
         (long long)r.records, r.workloads,
         o.url ? "PostgreSQL, a scratch schema" : "SQLite, a scratch file");
  printf("  fill: %.1f s (%.0f records/s), %.1f MiB\n", r.fill_seconds,
         r.fill_seconds > 0 ? (double)r.records / r.fill_seconds : 0.0,
         (double)r.file_bytes / (1 << 20));
  printf("  best by PrimFunc (hash + lookup + structural check), %d queries "
         "at random:\n",
         r.queries);
  printf("    on a function just built:  median %7.2f us, p99 %7.2f us "
         "(ts_func_hash alone: %.2f us)\n",
         r.median_us, r.p99_us, r.hash_median_us);
  printf("    on functions built before: median %7.2f us, p99 %7.2f us\n",
         r.prebuilt_median_us, r.prebuilt_p99_us);
  printf("    first query per workload:  median %7.2f us, p99 %7.2f us "
         "(parses its TIR)\n",
         r.cold_median_us, r.cold_p99_us);
  return EXIT_OK;
}

static int run_sync(const db_args *a) {
  if (!a->from || !a->to)
    return cli_usage_error(a->sub, "sync needs --from DB and --to DB");
  if (!strcmp(a->from, a->to))
    return cli_usage_error(a->sub, "--from and --to are the same database");
  ts_db_options ro = ts_db_defaults();
  ro.create = false;
  ts_db_options rw = ts_db_defaults();
  ts_db *from, *to;
  ts_error err;
  ts_error_clear(&err);
  if (ts_db_open(a->from, &ro, &from, &err) != TS_OK) {
    cli_error("cannot open the source database", &err);
    return EXIT_FAIL;
  }
  if (ts_db_open(a->to, &rw, &to, &err) != TS_OK) {
    ts_db_close(from);
    cli_error("cannot open the destination database", &err);
    return EXIT_FAIL;
  }
  ts_db_import_stats st;
  double t0 = ts_now_seconds();
  if (ts_db_sync(from, to, a->target, &st) != TS_OK) {
    ts_db_close(from);
    return db_fail(to, "sync failed, nothing was copied");
  }
  if (a->json) {
    cJSON *o = import_json(&st);
    cJSON_AddStringToObject(o, "from", ts_db_path(from));
    cJSON_AddStringToObject(o, "to", ts_db_path(to));
    ts_json_add(o, "target",
                a->target ? cJSON_CreateString(a->target) : cJSON_CreateNull());
    cJSON_AddNumberToObject(o, "seconds", ts_now_seconds() - t0);
    cli_print_json(o);
  } else
    printf("synced %s -> %s%s%s: %lld records copied (%lld already there), "
           "%lld baselines, %lld in-model choices; workloads %lld new, %lld "
           "existing; targets %lld new; jobs %lld new (%.1f s)\n",
           ts_db_path(from), ts_db_path(to), a->target ? ", target " : "",
           a->target ? a->target : "", (long long)st.records,
           (long long)st.records_existing, (long long)st.baselines,
           (long long)st.choices, (long long)st.workloads_new,
           (long long)st.workloads_existing, (long long)st.targets_new,
           (long long)st.jobs_new, ts_now_seconds() - t0);
  ts_db_close(from);
  ts_db_close(to);
  return EXIT_OK;
}

/* Confirms one workload on the target; prints its line (or JSON object). */
static int confirm_one(ts_db *db, const db_args *a, const char *target,
                       int64_t id, const char *name, double flops, bool first) {
  ts_confirm_options o = ts_confirm_defaults();
  if (a->top) o.top_k = (int)a->top;
  if (a->rounds) o.rounds = (int)a->rounds;
  if (a->threads) o.threads = (int)a->threads;
  /* the vendor libraries that implement the workload, timed in the same
   * rounds */
  cli_peers peers;
  cli_peers_open_db(db, id, a->spec, target, o.threads, &peers);
  o.peers = peers.peers;
  o.n_peers = peers.n;
  ts_confirm_result r;
  ts_error err;
  ts_error_clear(&err);
  if (!a->json && isatty(fileno(stderr))) {
    fprintf(stderr, "confirming %s ...\r", name);
    fflush(stderr);
  }
  int rc = ts_confirm(db, id, target, &o, &r, &err);
  if (rc) {
    cli_peers_close(&peers);
    fprintf(stderr, "tessera: error: confirming workload %lld (%s): %s\n",
            (long long)id, name, err.msg);
    return EXIT_FAIL;
  }
  bool changed = r.best_record != r.search_best_record;
  if (a->json) {
    printf("%s{\"workload\": %lld, \"name\": ", first ? "" : ", ",
           (long long)id);
    cli_json_string(stdout, name);
    printf(", \"candidates\": %d, \"rounds\": %d, \"best_record\": %lld, "
           "\"best_seconds\": %.9g, \"best_spread\": %.4f, "
           "\"search_best_record\": %lld, \"search_best_seconds\": %.9g, "
           "\"search_best_confirmed_seconds\": %.9g, \"gflops\": %.4g, "
           "\"vendors\": [",
           r.n, o.rounds, (long long)r.best_record, r.best_s, r.best_spread,
           (long long)r.search_best_record, r.search_best_s,
           r.search_best_confirmed_s, flops / r.best_s * 1e-9);
    for (int p = 0; p < peers.n; p++) {
      const ts_confirm_peer_result *pr = &r.peers[p];
      printf("%s{\"vendor\": \"%s\", \"threads\": %d, ", p ? ", " : "",
             peers.peers[p].name, peers.peers[p].threads);
      if (pr->ok)
        printf("\"seconds\": %.9g, \"gflops\": %.4g, \"side_ratio\": %.4f}",
               pr->seconds, flops / pr->seconds * 1e-9, pr->ratio);
      else {
        printf("\"seconds\": null, \"error\": ");
        cli_json_string(stdout, pr->why);
        printf("}");
      }
    }
    printf("]}");
  } else {
    char nm[37];
    snprintf(nm, sizeof nm, "%s", name);
    printf("%-5lld %-36s %4d %12.3f %12.3f %12.3f %6.1f%% %9.2f %s\n",
           (long long)id, nm, r.n, r.search_best_s * 1e6,
           r.search_best_confirmed_s * 1e6, r.best_s * 1e6, r.best_spread * 100,
           flops / r.best_s * 1e-9, changed ? "another record" : "same record");
    for (int p = 0; p < peers.n; p++) {
      const ts_confirm_peer_result *pr = &r.peers[p];
      if (pr->ok)
        printf("%-5s   %s, %d thread%s: %.3f us, %.2f GFLOP/s; tessera x%.2f "
               "side by side (median of the rounds' %s / tessera)\n",
               "", peers.peers[p].name, peers.peers[p].threads,
               peers.peers[p].threads == 1 ? "" : "s", pr->seconds * 1e6,
               flops / pr->seconds * 1e-9, pr->ratio, peers.peers[p].name);
      else
        printf("%-5s   %s: not measured: %s\n", "", peers.peers[p].name,
               pr->why);
    }
  }
  cli_peers_close(&peers);
  fflush(stdout);
  return EXIT_OK;
}

static int run_migrate(const db_args *a) {
  ts_db *db;
  int rc = open_db(a, false, &db); /* read-write: migrates */
  if (rc) return rc;
  ts_db_stats st;
  if (ts_db_get_stats(db, &st)) return db_fail(db, "db migrate");
  if (a->json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "database", ts_db_path(db));
    cJSON_AddNumberToObject(o, "schema_version", st.schema_version);
    cli_print_json(o);
  } else {
    printf("%s: schema version %d\n", ts_db_path(db), st.schema_version);
  }
  ts_db_close(db);
  return EXIT_OK;
}

/* confirm --model: the tasks timed in the compiled model (model_confirm.c),
 * which is built as compile builds it from this database. */
static int confirm_model(const db_args *a, ts_db *db, const char *target) {
  if (a->key || a->spec || a->tir || a->json)
    return cli_usage_error(a->sub, "--model takes no WORKLOAD, --workload, "
                                   "--tir or --json");
  int threads = a->threads > 0 ? (int)a->threads : 0;
  if (!threads) {
    ts_target *t = NULL;
    if (ts_target_parse(target, &t, NULL) == TS_OK)
      threads = ts_target_num_cores(t);
    ts_target_free(t);
  }
  cli_model_confirm_options o = cli_model_confirm_defaults();
  o.target = target;
  o.threads = threads > 0 ? threads : 1;
  if (a->top > 0) o.top = (int)a->top;
  if (a->rounds > 0) o.rounds = (int)a->rounds;
  o.out = stdout;
  o.progress = stderr;
  return cli_confirm_model_file(db, a->model, a->shapes, a->n_shapes, target,
                                &o);
}

static int run_confirm(const db_args *a) {
  if (a->n_shapes && !a->model)
    return cli_usage_error(a->sub, "--input-shape goes with --model");
  if (a->model && a->top > 8)
    return cli_usage_error(a->sub, "--top with --model: at most 8");
  ts_db *db;
  int rc = open_db(a, false, &db);
  if (rc) return rc;
  /* records are filed under their thread count (-num-cores): --threads N
   * confirms this host's (or the target's) records of N threads */
  char *want = NULL;
  rc = cli_target_for_threads("db confirm", a->target, (int)a->threads, &want);
  if (rc) {
    ts_db_close(db);
    return rc;
  }
  char *target = ts_db_canonical_target(db, want);
  free(want);
  if (!target) return db_fail(db, "bad target");
  if (a->model) {
    rc = confirm_model(a, db, target);
    free(target);
    ts_db_close(db);
    return rc;
  }
  int64_t one = 0;
  if ((a->key || a->spec || a->tir) && (rc = resolve(a, db, &one))) {
    free(target);
    return rc;
  }
  ts_db_summary *rows;
  int n;
  if (ts_db_list(db, one, &rows, &n)) {
    free(target);
    return db_fail(db, "db confirm");
  }
  int done = 0, failed = 0;
  if (a->json) {
    printf("{\"target\": ");
    cli_json_string(stdout, target);
    printf(", \"workloads\": [");
  }
  if (!a->json)
    printf("%-5s %-36s %4s %12s %12s %12s %7s %9s %s\n", "id", "workload",
           "cand", "search (us)", "re-run (us)", "best (us)", "spread",
           "GFLOP/s", "best is");
  for (int i = 0; i < n; i++) {
    const ts_db_summary *s = &rows[i];
    if (!s->target || strcmp(s->target, target) || s->n_ok == 0) continue;
    if (confirm_one(db, a, target, s->workload_id, s->name, s->flops,
                    done + failed == 0) == EXIT_OK)
      done++;
    else
      failed++;
  }
  if (a->json)
    printf("]}\n");
  else if (done + failed == 0) {
    printf("no ok record on target '%s'%s\n", target,
           one ? " for this workload" : "");
    /* the targets that have some: often the same host on another thread
     * count (its -num-cores), which --threads or --target selects */
    const char *seen[4] = {0};
    int n_seen = 0;
    for (int i = 0; i < n && n_seen < 4; i++) {
      bool dup = !rows[i].target || rows[i].n_ok == 0;
      for (int k = 0; k < n_seen && !dup; k++)
        dup = !strcmp(seen[k], rows[i].target);
      if (!dup) seen[n_seen++] = rows[i].target;
    }
    for (int k = 0; k < n_seen; k++)
      printf("%s '%s'\n", k ? "   " : "ok records are on target", seen[k]);
  } else
    printf("search: the search-time best; re-run: that record in the "
           "interleaved rounds; best: the confirmed best (ranked by its "
           "time / each round's median candidate)\n");
  ts_db_summaries_free(rows, n);
  free(target);
  ts_db_close(db);
  return failed ? EXIT_FAIL : EXIT_OK;
}

int cmd_db(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    fputs(db_usage, argc < 2 ? stderr : stdout);
    return argc < 2 ? EXIT_USAGE : EXIT_OK;
  }
  for (int i = 2; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      cli_sub_help(db_usage, "db", argv[1], "[--db PATH] [options]");
      return EXIT_OK;
    }
  db_args a = {.sub = "db", .path = "./tessera.db", .last = 10, .queries = -1};
  const char *sub = argv[1];
  struct {
    const char *name;
    const char *options; /* space-separated, with spaces around each */
    bool positional;
    int (*run)(const db_args *a);
  } subs[] = {
      {"list", " --json ", false, run_list},
      {"show", " --workload --tir --last --json ", true, run_show},
      {"best", " --workload --tir --target ", true, run_best},
      {"export", " -o ", false, run_export},
      {"import", " --json ", true, run_import},
      {"prune", " --keep --keep-failed --vacuum --json ", false, run_prune},
      {"stats", " --json ", false, run_stats},
      {"migrate", " --json ", false, run_migrate},
      {"confirm",
       " --workload --tir --target --top --rounds --threads --json --model "
       "--input-shape ",
       true, run_confirm},
      {"sync", " --from --to --target --json ", false, run_sync},
      {"bench", " --records --workloads --queries --json ", false, run_bench},
  };
  for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
    if (strcmp(sub, subs[i].name)) continue;
    int rc = parse_args(argc, argv, subs[i].options, subs[i].positional, &a);
    if (rc != EXIT_OK) return rc;
    return subs[i].run(&a);
  }
  fprintf(stderr, "tessera db: unknown command '%s'\n\n%s", sub, db_usage);
  return EXIT_USAGE;
}
