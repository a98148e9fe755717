/*
 * cmd_show.c — `tessera show`: prints a workload for people investigating
 * it: the TIR text with its structural hash and FLOP count as leading
 * comments (so the output is itself valid TIR), or the operator list; a
 * schedule trace as a readable script, or applied to a workload; the
 * lowered program, LLVM IR or assembly of either; and, from a tuning
 * database, the best record of a workload on a target with its measured
 * latency, GFLOP/s and share of the probed peak.
 */
#include "cli.h"

#include "bench/bench.h"
#include "codegen/codegen.h"
#include "db/db.h"
#include "schedule/schedule.h"
#include "tir/alloc.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char show_usage[] =
    "usage: tessera show (--workload SPEC | --tir FILE) [--target T]\n"
    "                    [--default] [--lowered | --llvm | --asm]\n"
    "       tessera show --trace FILE [--workload SPEC | --tir FILE]\n"
    "       tessera show --db PATH --workload W [--target T] --best\n"
    "                    [--tir | --lowered | --llvm | --asm | --trace]\n"
    "       tessera show --ops\n"
    "       tessera show --target T\n"
    "\n"
    "  --workload SPEC  build an operator from a spec, e.g.\n"
    "                   \"conv2d_nhwc N=1 H=56 W=56 CI=64 CO=64 KH=3 KW=3 "
    "pad=1\"\n"
    "  --tir FILE       read a function in the TIR text form (docs/ir.md)\n"
    "  --ops            list the operators and their keys\n"
    "  --target T       alone: the target's canonical string, its\n"
    "                   instruction-set level and how each dtype runs on it\n"
    "  --trace FILE     print a schedule trace (JSON) as a readable script; "
    "with\n"
    "                   a workload, apply it and print the scheduled TIR (or,\n"
    "                   with --lowered/--llvm/--asm, its code)\n"
    "  --target T       target for --lowered/--llvm/--asm (default: this "
    "machine),\n"
    "                   e.g. \"llvm -mcpu=native\" or \"cuda -arch=sm_90\"\n"
    "  --lowered        print the lowered loop program instead of the TIR\n"
    "  --llvm           print the optimized LLVM IR\n"
    "  --asm            print the assembly (PTX for a cuda target)\n"
    "\n"
    "  --db PATH --best the best record of a workload in a tuning database,\n"
    "                   with its latency, GFLOP/s and % of the probed peak:\n"
    "                   its scheduled TIR (default, or --tir), lowered "
    "program,\n"
    "                   LLVM IR, assembly, or its trace (--trace, no file).\n"
    "                   W is a hash, hash prefix, workload name or spec; the\n"
    "                   target may be left out when the workload has ok\n"
    "                   records on one target only\n"
    "\n"
    "  --json           print one JSON object instead of text: the same\n"
    "                   fields, each view (tir, lowered, llvm, asm, script)\n"
    "                   as a string, a trace as an object (docs/cli.md)\n"
    "\n"
    "Prints the TIR text, preceded by comment lines with the canonical spec,\n"
    "the structural hash (the workload's identity) and the FLOP count.\n";

/* --json: the object the views are added to (NULL: print text). */
static cJSON *json_out;

/* One view of the output: printed, or added under key. */
static void out_text(const char *key, const char *text) {
  if (json_out)
    cJSON_AddStringToObject(json_out, key, text);
  else
    fputs(text, stdout);
}

/* A trace: its readable script, or (JSON) the trace object and script. */
static void out_trace(const ts_trace *t) {
  char *script = ts_trace_print(t);
  if (json_out) {
    char *text = ts_trace_to_json(t);
    cJSON *obj = text ? cJSON_Parse(text) : NULL;
    free(text);
    ts_json_add(json_out, "trace", obj ? obj : cJSON_CreateNull());
  }
  out_text("script", script);
  free(script);
}

/* Prints the lowered program, LLVM IR or assembly of f for target_str,
 * after a "# target:" line unless quiet_target. */
static int show_compiled(const ts_func *f, const char *target_str,
                         const char *what, bool quiet_target) {
  ts_error err;
  ts_error_clear(&err);
  ts_target *t = NULL;
  int rc = target_str ? ts_target_parse(target_str, &t, &err)
                      : ts_target_host(&t, &err);
  if (rc) {
    cli_error("bad target", &err);
    return EXIT_FAIL;
  }
  ts_build_options o = ts_build_defaults();
  o.keep_lowered = !strcmp(what, "lowered");
  o.keep_llvm_ir = !strcmp(what, "llvm");
  o.keep_asm = !strcmp(what, "asm");
  ts_build_result r;
  if (ts_build(f, t, &o, &r, &err)) {
    cli_error("code generation failed", &err);
    ts_target_free(t);
    return EXIT_FAIL;
  }
  if (json_out && !quiet_target)
    cJSON_AddStringToObject(json_out, "target", ts_target_str(t));
  else if (!quiet_target)
    printf("# target: %s\n", ts_target_str(t));
  if (o.keep_lowered) {
    char *text = ts_func_print(r.lowered);
    out_text("lowered", text);
    free(text);
  } else if (o.keep_llvm_ir) {
    out_text("llvm", r.llvm_ir);
  } else {
    out_text("asm", r.assembly); /* PTX: the artifact's text */
  }
  ts_build_result_clear(&r);
  ts_target_free(t);
  return EXIT_OK;
}

static void print_ops(void) {
  const char *const *names = ts_op_names();
  if (json_out) {
    cJSON *arr = cJSON_AddArrayToObject(json_out, "operators");
    for (int i = 0; names[i]; i++) {
      cJSON *op = cJSON_CreateObject();
      cJSON_AddStringToObject(op, "name", names[i]);
      cJSON_AddStringToObject(op, "usage", ts_op_usage(names[i]));
      ts_json_add(arr, NULL, op);
    }
    return;
  }
  printf("operators (spec: NAME key=value ...; [key=default]):\n");
  for (int i = 0; names[i]; i++) printf("  %s\n", ts_op_usage(names[i]));
}

/* ---- the best record of a tuning database ---- */

/* Whether argv[i] is `name` used as a flag: no value follows (the end, or
 * another option). `--tir` and `--trace` take a file otherwise. */
static bool bare_flag(int argc, char **argv, int i, const char *name) {
  return !strcmp(argv[i], name) && (i + 1 >= argc || argv[i + 1][0] == '-');
}

static int db_failure(ts_db *db, const char *what) {
  cli_error(what, ts_db_error(db));
  return EXIT_FAIL;
}

/* The workload named by W (a hash, hash prefix or name; else a spec, built
 * and looked up by structure) or by a TIR file. */
static int find_workload(ts_db *db, const char *key, const char *tir_path,
                         int64_t *id) {
  if (key) {
    int rc = ts_db_resolve_workload(db, key, id);
    if (rc != TS_ENOTFOUND || !strpbrk(key, " ="))
      return rc ? db_failure(db, "no such workload") : EXIT_OK;
  }
  ts_workload *w = NULL;
  ts_func *f = NULL;
  int rc = cli_load_func(tir_path ? NULL : key, tir_path, &w, &f);
  if (rc != EXIT_OK) return rc;
  rc = ts_db_find_workload(db, f, id);
  if (w)
    ts_workload_free(w);
  else
    ts_func_free(f);
  if (rc == TS_ENOTFOUND) {
    fprintf(stderr,
            "tessera: error: no workload: %s: nothing structurally equal to "
            "%s\n",
            ts_db_path(db), tir_path ? tir_path : key);
    return EXIT_FAIL;
  }
  return rc ? db_failure(db, "cannot look the workload up") : EXIT_OK;
}

/* The target to use when none was given: the only one with ok records, or
 * this host among several. Returns a malloc'd string or NULL (error
 * printed). */
static char *choose_target(ts_db *db, int64_t workload_id) {
  ts_db_summary *rows;
  int n;
  if (ts_db_list(db, workload_id, &rows, &n)) {
    db_failure(db, "cannot list the workload's records");
    return NULL;
  }
  char *host = ts_db_canonical_target(db, "llvm");
  const char *only = NULL, *host_match = NULL;
  int with_ok = 0;
  for (int i = 0; i < n; i++) {
    if (!rows[i].target || rows[i].n_ok == 0) continue;
    with_ok++;
    only = rows[i].target;
    if (host && !strcmp(host, rows[i].target)) host_match = rows[i].target;
  }
  const char *pick = with_ok == 1 ? only : host_match;
  char *out = pick ? strdup(pick) : NULL;
  if (!pick && with_ok == 0) {
    fprintf(stderr,
            "tessera: error: no ok record: workload %s has no successful "
            "measurement in %s\n",
            n ? rows[0].name : "?", ts_db_path(db));
  } else if (!pick) {
    fprintf(stderr,
            "tessera: error: workload %s has ok records on %d targets; "
            "choose one with --target:\n",
            rows[0].name, with_ok);
    for (int i = 0; i < n; i++)
      if (rows[i].target && rows[i].n_ok)
        fprintf(stderr, "  %s\n", rows[i].target);
  }
  free(host);
  ts_db_summaries_free(rows, n);
  return out;
}

/* The measured figures of a best record: its latency and the shares of
 * the probed peak and of the roofline bound (NAN where unknown). */
typedef struct best_figures {
  double seconds, gflops, peak_gflops, roof_gflops;
  char peak_source[64];
  bool probed;
} best_figures;

static best_figures figures_of(ts_db *db, const ts_db_workload *w,
                               const ts_db_record *r, const ts_func *f) {
  best_figures x = {ts_db_record_seconds(r), NAN, NAN, NAN, "", false};
  /* (peak_source is copied: the peak's own string lives in `peak`) */
  x.gflops = w->flops > 0 && x.seconds > 0 ? w->flops / x.seconds * 1e-9 : NAN;
  char *probe = NULL;
  if (ts_db_get_target_probe(db, r->target_id, &probe) != TS_OK || !probe) {
    free(probe);
    return x;
  }
  x.probed = true;
  ts_target *t = NULL;
  ts_error err;
  ts_error_clear(&err);
  int cores = 0;
  if (ts_target_parse(r->target, &t, &err) == TS_OK) {
    cores = ts_target_num_cores(t);
    ts_target_free(t);
  }
  ts_dtype dtype = {0, 0, 0};
  double bytes = 0;
  for (int i = 0; f && i < ts_func_n_params(f); i++) {
    const ts_buffer *b = ts_func_param(f, i);
    if (i == 0) dtype = ts_buffer_dtype(b);
    bytes += (double)ts_buffer_bytes(b);
  }
  ts_bench_peak peak = ts_bench_peak_of(probe, dtype, cores);
  free(probe);
  x.peak_gflops = peak.gflops;
  snprintf(x.peak_source, sizeof x.peak_source, "%s", peak.source);
  x.roof_gflops = ts_bench_roofline_gflops(&peak, w->flops, bytes);
  return x;
}

/* The job name of a record ("" when it has none). */
static void job_name_of(ts_db *db, const ts_db_record *r, char *out,
                        size_t cap) {
  out[0] = 0;
  ts_db_job *jobs = NULL;
  int n_jobs = 0;
  if (r->job_id && ts_db_jobs(db, &jobs, &n_jobs) == TS_OK)
    for (int i = 0; i < n_jobs; i++)
      if (jobs[i].id == r->job_id) snprintf(out, cap, "%s", jobs[i].name);
  ts_db_jobs_free(jobs, n_jobs);
}

/* A number, or null when it is not finite. */
static void add_number(cJSON *o, const char *key, double v) {
  ts_json_add(o, key, isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull());
}

/* The header as JSON fields of json_out. */
static void best_header_json(const ts_db_workload *w, const ts_db_record *r,
                             const char *job, const best_figures *x) {
  cJSON *o = json_out;
  cJSON_AddStringToObject(o, "workload", w->name);
  cJSON_AddStringToObject(o, "hash", w->hash);
  cJSON_AddNumberToObject(o, "flops", w->flops);
  cJSON_AddStringToObject(o, "target", r->target);
  cJSON_AddNumberToObject(o, "record", (double)r->id);
  ts_json_add(o, "job", job[0] ? cJSON_CreateString(job) : cJSON_CreateNull());
  ts_json_add(o, "trial",
              job[0] ? cJSON_CreateNumber((double)r->trial)
                     : cJSON_CreateNull());
  cJSON_AddStringToObject(o, "measured", r->created);
  cJSON_AddStringToObject(o, "worker", r->worker);
  add_number(o, "latency_s", x->seconds);
  add_number(o, "search_latency_s", r->median_s);
  cJSON_AddNumberToObject(o, "runs", r->n_run_secs);
  if (r->confirmed_rounds > 0) {
    cJSON *c = cJSON_AddObjectToObject(o, "confirmed");
    cJSON_AddNumberToObject(c, "rounds", r->confirmed_rounds);
    cJSON_AddNumberToObject(c, "spread", r->confirmed_spread);
  } else {
    cJSON_AddNullToObject(o, "confirmed");
  }
  add_number(o, "gflops", x->gflops);
  add_number(o, "peak_gflops", x->peak_gflops);
  add_number(o, "peak_percent", 100 * x->gflops / x->peak_gflops);
  add_number(o, "roofline_gflops", x->roof_gflops);
  add_number(o, "roofline_percent", 100 * x->gflops / x->roof_gflops);
}

/* The header lines: what was measured, how fast, against which peak. */
static void print_best_header(ts_db *db, const ts_db_workload *w,
                              const ts_db_record *r, const ts_func *f) {
  char job[256];
  job_name_of(db, r, job, sizeof job);
  best_figures x = figures_of(db, w, r, f);
  if (json_out) {
    best_header_json(w, r, job, &x);
    return;
  }
  printf("# workload: %s (hash %s)\n", w->name, w->hash);
  printf("# target: %s\n", r->target);
  printf("# record: %lld", (long long)r->id);
  if (job[0]) printf(", job %s trial %lld", job, (long long)r->trial);
  printf(", measured %s%s%s\n", r->created, r->worker[0] ? " on " : "",
         r->worker);
  double s = x.seconds;
  const char *unit = s < 1e-3 ? "µs" : s < 1 ? "ms" : "s";
  double scale = s < 1e-3 ? 1e6 : s < 1 ? 1e3 : 1;
  if (r->confirmed_rounds > 0)
    printf("# latency: %.4g %s (confirmed: median of %d interleaved rounds, "
           "spread %.0f%%; at search time %.4g %s)\n",
           s * scale, unit, r->confirmed_rounds, r->confirmed_spread * 100,
           r->median_s * scale, unit);
  else
    printf("# latency: %.4g %s (median of %d run%s)\n", s * scale, unit,
           r->n_run_secs, r->n_run_secs == 1 ? "" : "s");
  if (isfinite(x.gflops)) printf("# GFLOP/s: %.4g\n", x.gflops);
  if (!x.probed) {
    printf("# %% of peak: unknown (target not probed: `tessera probe`)\n");
    return;
  }
  if (isfinite(x.peak_gflops) && isfinite(x.gflops))
    printf("# %% of peak: %.1f%% of %.4g GFLOP/s (%s)%s\n",
           100 * x.gflops / x.peak_gflops, x.peak_gflops, x.peak_source,
           x.gflops > x.peak_gflops ? "; above the probed peak: run `tessera "
                                      "probe` again on an idle machine"
                                    : "");
  else
    printf("# %% of peak: unknown (no peak for this data type in the "
           "target's probe figures)\n");
  if (isfinite(x.roof_gflops) && isfinite(x.gflops))
    printf("# %% of roofline: %.1f%% of %.4g GFLOP/s\n",
           100 * x.gflops / x.roof_gflops, x.roof_gflops);
}

/* `show --db PATH --workload W [--target T] --best [--tir|...|--trace]`. */
static int show_best(const char *db_path, const char *key, const char *tir_path,
                     const char *target, const char *what) {
  ts_error err;
  ts_error_clear(&err);
  ts_db_options o = ts_db_defaults();
  o.create = false;
  ts_db *db;
  if (ts_db_open(db_path, &o, &db, &err)) {
    cli_error("cannot open the database", &err);
    return EXIT_FAIL;
  }
  int64_t id = 0;
  int rc = find_workload(db, key, tir_path, &id);
  char *chosen = NULL;
  if (rc == EXIT_OK && !target && !(target = chosen = choose_target(db, id)))
    rc = EXIT_FAIL;
  ts_db_workload w = {0};
  ts_db_record r = {0};
  ts_func *f = NULL;
  if (rc == EXIT_OK && ts_db_get_workload(db, id, &w))
    rc = db_failure(db, "cannot read the workload");
  if (rc == EXIT_OK && ts_db_best(db, id, target, &r))
    rc = db_failure(db, "no best record");
  if (rc == EXIT_OK && ts_db_workload_func(db, id, &f))
    rc = db_failure(db, "cannot read the workload");
  ts_trace *trace = NULL;
  if (rc == EXIT_OK &&
      ts_trace_from_json(r.trace_json, strlen(r.trace_json), &trace, &err)) {
    cli_error("the best record's trace does not parse", &err);
    rc = EXIT_FAIL;
  }
  if (rc == EXIT_OK) {
    print_best_header(db, &w, &r, f);
    if (!strcmp(what, "trace")) {
      out_trace(trace);
    } else {
      ts_sched *sch = NULL;
      if (ts_trace_apply(trace, f, 1, &sch, &err)) {
        cli_error("cannot apply the best record's trace", &err);
        rc = EXIT_FAIL;
      } else if (!strcmp(what, "tir")) {
        char *text = ts_func_print(ts_sched_func(sch));
        out_text("tir", text);
        free(text);
      } else {
        rc = show_compiled(ts_sched_func(sch), r.target, what, true);
      }
      ts_sched_destroy(sch);
    }
  }
  ts_trace_free(trace);
  ts_func_free(f);
  ts_db_record_clear(&r);
  ts_db_workload_clear(&w);
  free(chosen);
  ts_db_close(db);
  return rc;
}

/* Replaces *f (owned by *w when set) by its default schedule for the target
 * (this machine when NULL): what `tessera compile` builds for an untuned
 * task. Frees the input on every path; EXIT_OK or EXIT_FAIL. */
static int show_default(ts_workload **w, ts_func **f, const char *target) {
  ts_error err;
  ts_error_clear(&err);
  ts_target *t = NULL;
  ts_sched *sch = NULL;
  ts_func *scheduled = NULL;
  if (target ? ts_target_parse(target, &t, &err) : ts_target_host(&t, &err))
    cli_error("bad target", &err);
  else if (ts_default_schedule(*f, t, &sch, &err))
    cli_error("the default schedule failed", &err);
  else if (!(scheduled = ts_func_copy(ts_sched_func(sch))))
    fprintf(stderr, "tessera: error: out of memory\n");
  ts_sched_destroy(sch);
  ts_target_free(t);
  if (*w) {
    ts_workload_free(*w);
    *w = NULL;
  } else {
    ts_func_free(*f);
  }
  *f = scheduled;
  return scheduled ? EXIT_OK : EXIT_FAIL;
}

static int show(int argc, char **argv) {
  const char *spec = NULL, *tir = NULL, *target = NULL, *what = NULL;
  const char *trace_path = NULL, *db_path = NULL;
  bool ops = false, best = false, dflt = false;
  for (int i = 1; i < argc; i++) {
    const char *v;
    bool missing;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(show_usage, stdout);
      return EXIT_OK;
    } else if (!strcmp(argv[i], "--ops")) {
      ops = true;
    } else if (!strcmp(argv[i], "--json")) {
      /* cmd_show made json_out */
    } else if (!strcmp(argv[i], "--best")) {
      best = true;
    } else if (!strcmp(argv[i], "--default")) {
      dflt = true;
    } else if (!strcmp(argv[i], "--lowered") || !strcmp(argv[i], "--llvm") ||
               !strcmp(argv[i], "--asm") || bare_flag(argc, argv, i, "--tir") ||
               bare_flag(argc, argv, i, "--trace")) {
      if (what && strcmp(what, argv[i] + 2))
        return cli_usage_error("show", "give one of --lowered, --llvm, --asm"
                                       " (or, with --best, --tir, --trace)");
      what = argv[i] + 2;
    } else if (cli_opt_value(argc, argv, &i, "--trace", &v, &missing)) {
      trace_path = v;
    } else if (cli_opt_value(argc, argv, &i, "--db", &v, &missing)) {
      if (missing) return cli_usage_error("show", "--db needs a path");
      db_path = v;
    } else if (cli_opt_value(argc, argv, &i, "--target", &v, &missing)) {
      if (missing) return cli_usage_error("show", "--target needs a target");
      target = v;
    } else if (cli_opt_value(argc, argv, &i, "--workload", &v, &missing)) {
      if (missing) return cli_usage_error("show", "--workload needs a spec");
      spec = v;
    } else if (cli_opt_value(argc, argv, &i, "--tir", &v, &missing)) {
      tir = v;
    } else {
      return cli_usage_error("show", "unknown option '%s'", argv[i]);
    }
  }
  if (ops) {
    print_ops();
    return EXIT_OK;
  }
  if (target && !spec && !tir && !db_path && !best && !trace_path && !what) {
    /* --target alone: what the target is and what each dtype runs on */
    ts_target *t = NULL;
    ts_error terr;
    ts_error_clear(&terr);
    if (ts_target_parse(target, &t, &terr)) {
      cli_error("bad target", &terr);
      return EXIT_FAIL;
    }
    if (json_out) {
      cJSON_AddStringToObject(json_out, "target", ts_target_str(t));
      cli_target_isa_json(json_out, t);
    } else {
      printf("target: %s\n", ts_target_str(t));
      cli_print_target_isa(stdout, t);
    }
    ts_target_free(t);
    return EXIT_OK;
  }
  if (dflt && (trace_path || db_path || best))
    return cli_usage_error("show", "--default does not go with --trace, --db "
                                   "or --best");
  if (db_path || best) {
    if (!db_path || !best)
      return cli_usage_error("show", "--db and --best go together: "
                                     "--db PATH --workload W --best");
    if (trace_path)
      return cli_usage_error("show", "--trace FILE does not apply to --best "
                                     "(--trace alone prints the best trace)");
    if (!spec == !tir)
      return cli_usage_error("show", "give exactly one of --workload or --tir");
    return show_best(db_path, spec, tir, target, what ? what : "tir");
  }
  if (what && (!strcmp(what, "tir") || !strcmp(what, "trace")))
    return cli_usage_error("show", "--%s needs a file", what);
  ts_trace *trace = NULL;
  if (trace_path) {
    ts_error terr;
    ts_error_clear(&terr);
    if (ts_trace_from_json_file(trace_path, &trace, &terr)) {
      cli_error("cannot read the trace", &terr);
      return EXIT_FAIL;
    }
    if (!spec && !tir) {
      out_trace(trace);
      ts_trace_free(trace);
      return EXIT_OK;
    }
  }
  if (!spec == !tir) {
    ts_trace_free(trace);
    return cli_usage_error("show", "give exactly one of --workload or --tir");
  }

  ts_workload *w;
  ts_func *f;
  int rc = cli_load_func(spec, tir, &w, &f);
  if (rc != EXIT_OK) {
    ts_trace_free(trace);
    return rc;
  }
  if (trace) {
    /* Replace the function by its scheduled form. */
    ts_error terr;
    ts_error_clear(&terr);
    ts_sched *sch = NULL;
    rc = ts_trace_apply(trace, f, 1, &sch, &terr);
    ts_trace_free(trace);
    ts_func *scheduled = rc ? NULL : ts_func_copy(ts_sched_func(sch));
    ts_sched_destroy(sch);
    if (w) {
      ts_workload_free(w);
      w = NULL;
    } else {
      ts_func_free(f);
    }
    if (rc) {
      cli_error("cannot apply the trace", &terr);
      return EXIT_FAIL;
    }
    if (!scheduled) {
      fprintf(stderr, "tessera: error: out of memory\n");
      return EXIT_FAIL;
    }
    f = scheduled;
  } else if (dflt) {
    rc = show_default(&w, &f, target);
    if (rc != EXIT_OK) return rc;
  }
  if (what) {
    rc = show_compiled(f, target, what, false);
    if (w)
      ts_workload_free(w);
    else
      ts_func_free(f);
    return rc;
  }
  char hex[33];
  ts_hash128_hex(ts_func_hash(f), hex);
  double flops = w ? w->flops : ts_func_flops(f);
  if (json_out) {
    ts_json_add(json_out, "workload",
                w ? cJSON_CreateString(w->spec) : cJSON_CreateNull());
    cJSON_AddStringToObject(json_out, "name", w ? w->name : ts_func_name(f));
    cJSON_AddStringToObject(json_out, "hash", hex);
    cJSON_AddNumberToObject(json_out, "flops", flops);
  } else {
    if (w) {
      printf("# workload: %s\n", w->spec);
      printf("# name: %s\n", w->name);
    }
    printf("# hash: %s\n", hex);
    printf("# flops: %.0f\n", flops);
  }
  char *text = ts_func_print(f);
  out_text("tir", text);
  free(text);
  if (w)
    ts_workload_free(w);
  else
    ts_func_free(f);
  return EXIT_OK;
}

int cmd_show(int argc, char **argv) {
  for (int i = 1; i < argc && !json_out; i++)
    if (!strcmp(argv[i], "--json")) json_out = cJSON_CreateObject();
  int rc = show(argc, argv);
  if (json_out && rc == EXIT_OK && json_out->child) /* not --help */
    cli_print_json(json_out);
  else
    cJSON_Delete(json_out);
  json_out = NULL;
  return rc;
}
