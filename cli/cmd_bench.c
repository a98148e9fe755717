/*
 * cmd_bench.c — `tessera bench`: compiles a workload (unscheduled, or
 * scheduled by a trace file or the database's best record), checks its
 * output, and measures it side by side with OpenBLAS, oneDNN and plain C
 * baselines in the same process and run, printing GFLOP/s and ratios (or
 * one JSON object for scripts).
 */
#include "cli.h"

#include "bench/bench.h"
#include "codegen/codegen.h"
#include "db/db.h"
#include "runtime/runtime.h"
#include "schedule/schedule.h"
#include "tuner/tuner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A library's reason as the table prints it, in its row: the message
 * without the library's name in front ("openblas: not applicable: X" ->
 * "not applicable: X"); a failure while timed keeps its own words. */
static const char *reason_text(const char *name, const char *msg) {
  size_t n = strlen(name);
  if (!strncmp(msg, name, n) && !strncmp(msg + n, ": ", 2)) msg += n + 2;
  return msg;
}

static const char bench_usage[] =
    "usage: tessera bench (--workload SPEC | --tir FILE)\n"
    "                     [--trace FILE | --db PATH |\n"
    "                     --default]\n"
    "                     [--target T]\n"
    "                     [--threads N] [--repeat N] [--min-repeat-ms N]\n"
    "                     [--settle-ms N] [--seed N] [--check-runs N] "
    "[--cold]\n"
    "                     [--json]\n"
    "                     [--max-memory-mb N] [--max-gflop N]\n"
    "\n"
    "Compiles the workload for the target (default: this machine) — as is,\n"
    "scheduled by the trace in FILE (JSON, see docs/schedules.md), or by the\n"
    "best record of the tuning database at PATH for this target, or by the\n"
    "default schedule (--default: what `tessera compile` builds for a task\n"
    "nobody tuned) — checks\n"
    "its output, then measures it and the vendor libraries on the same\n"
    "operation, dtypes and thread count, in this process, in interleaved\n"
    "rounds: tessera, OpenBLAS, oneDNN, and a plain C loop where one exists.\n"
    "With --db, a 3x3 conv's Winograd forms whose every stage the database\n"
    "has (`tessera tune --winograd`) are timed too, a line each.\n"
    "\n"
    "  --tir FILE         a TIR function instead of a library operator (a\n"
    "                     model's task: `tessera graph tasks --tir`); no\n"
    "                     vendor library is measured beside it\n"
    "  --threads N        threads for tessera and the libraries (all cores)\n"
    "  --repeat N         interleaved rounds: each times tessera, then each\n"
    "                     library, one repeat each; medians reported (5)\n"
    "  --min-repeat-ms N  minimum length of one repeat (100)\n"
    "  --settle-ms N      idle time after each library's turn (30), so that\n"
    "                     its spinning worker threads (OpenMP, OpenBLAS) stop\n"
    "                     before the next side is timed\n"
    "  --cold             then time every side as a model's layer runs:\n"
    "                     one call, its weights evicted from the caches\n"
    "                     first (3 x --repeat rounds; oneDNN: conv2d_nhwc;\n"
    "                     --tir: the inputs after the first evicted)\n"
    "  --check-runs N     runs of the kernel whose outputs are each checked\n"
    "                     against the reference (4): a race between the\n"
    "                     threads shows in some runs, not in every one\n"
    "  --max-memory-mb N  refuse a workload whose buffers need more (default:\n"
    "                     half of this machine's memory)\n"
    "  --max-gflop N      refuse a workload of more operations per run\n"
    "                     (default 2000)\n"
    "  --json             one JSON object: workload, flop, tessera_gflops,\n"
    "                     openblas_gflops, onednn_gflops, naive_gflops (null\n"
    "                     where not applicable), compile_ms, check\n"
    "\n"
    "       tessera bench --model MODEL.so [--onnx MODEL.onnx] [--threads K]\n"
    "                     [--json]   (a compiled model against onnxruntime;\n"
    "                     `tessera bench --model x --help` for the options)\n"
    "\n"
    "       tessera bench --suite [--budget quick|full] [--trials N] [--db "
    "PATH]\n"
    "                     [-o DIR] [--set fixed|broad] [--set-seed S]\n"
    "                     [--isa native|avx2] [--only TEXT] [--list]\n"
    "                     [--const-weights]\n"
    "\n"
    "--suite tunes (resuming the database's jobs, so earlier results are\n"
    "reused) and benchmarks a set of workloads, and prints one table, also\n"
    "written to DIR/latest.json and DIR/latest.md (default bench/results).\n"
    "--set fixed (default): fp32/bf16/int8 matmuls, ResNet-50 convolutions,\n"
    "depthwise conv2d, softmax, layer_norm. --set broad: 16 workloads drawn\n"
    "from --set-seed S (default 1): odd, prime and skinny matrix products, a\n"
    "dense layer, attention's batched product, a 3-channel stem, 3x3/1x1/\n"
    "strided/depthwise convolutions at other resolutions, softmax and\n"
    "layer_norm of odd lengths, bf16 and int8 (docs/tuning.md).\n"
    "--isa avx2 tunes for an AVX2 CPU (-mcpu=x86-64-v3) and holds oneDNN and\n"
    "OpenBLAS to their AVX2 kernels, on a machine that has more. --only\n"
    "TEXT keeps the set's workloads whose spec contains TEXT (\"KH=5\",\n"
    "\"depthwise\"): a few rows extended (with --trials) or re-timed. --list\n"
    "prints the set's workloads and runs nothing. --const-weights declares\n"
    "the convolutions' weights constant (const=weight), as in a model and\n"
    "as oneDNN's side has them (reordered outside the timing).\n"
    "--budget full tunes 1000 trials per workload, quick 24 (--trials "
    "overrides).\n"
    "\n"
    "The check compares tessera's output with the reference interpreter for\n"
    "small workloads (up to 5e7 FLOP), otherwise with a vendor library's\n"
    "output (oneDNN, OpenBLAS, plain C) or the unscheduled kernel.\n";

#define INTERP_FLOP_LIMIT 5e7

typedef struct bench_cfg {
  const char *spec, *tir, *trace, *target, *db;
  bool default_sched; /* --default: what compile builds untuned */
  int threads, repeat, min_repeat_ms;
  int settle_ms;  /* idle after each library's turn (--settle-ms) */
  int check_runs; /* outputs checked this many times (--check-runs) */
  uint64_t seed;
  bool json;
  bool cold;          /* --cold */
  long max_memory_mb; /* admission (0: default) */
  double max_gflop;   /* admission (0: default) */
} bench_cfg;

/* Builds, loads and runs f once on seeded arguments. */
static int kernel_make(const ts_func *f, const ts_target *t, uint64_t seed,
                       ts_runtime *rt, cli_kernel *out, ts_error *err) {
  int rc = cli_kernel_build(f, t, seed, out, err);
  if (!rc)
    rc = ts_rt_kernel_call(out->kernel, ts_rt_args_data(out->args), rt, err);
  if (rc) cli_kernel_free(out);
  return rc;
}

static double compile_ms(const ts_build_result *b) {
  return b->lower_ms + b->emit_ms + b->opt_ms + b->codegen_ms;
}

/* The index of f's output parameter (the last written one). */
static int output_param(const ts_func *f) {
  int out = -1;
  for (int i = 0; i < ts_func_n_params(f); i++)
    if (ts_func_param_is_output(f, i)) out = i;
  return out;
}

/* Compares output `param` of got with want (n elements of t). */
static bool same_output(const void *got, const void *want, ts_dtype t,
                        int64_t n, char *detail, size_t cap) {
  int64_t first;
  double max_err;
  int64_t bad = ts_host_compare(got, want, t, n, &first, &max_err);
  if (bad)
    snprintf(detail, cap,
             "%lld of %lld elements differ (first at %lld: %g vs %g)",
             (long long)bad, (long long)n, (long long)first,
             ts_host_get(got, t, first), ts_host_get(want, t, first));
  else
    snprintf(detail, cap, "largest difference %.3g", max_err);
  return bad == 0;
}

static void json_num(const char *key, bool have, double v, bool comma) {
  if (have)
    printf("\"%s\": %.6g", key, v); /* significant digits: a 72 us kernel */
  else
    printf("\"%s\": null", key);
  if (comma) printf(", ");
}

static void json_str(const char *key, const char *v, bool comma) {
  printf("\"%s\": \"", key);
  for (const char *p = v; *p; p++) {
    if (*p == '"' || *p == '\\') putchar('\\');
    if ((unsigned char)*p < 0x20)
      printf("\\u%04x", *p);
    else
      putchar(*p);
  }
  printf("\"%s", comma ? ", " : "");
}

/* Stores the vendor levels just measured as the workload's baselines in
 * the database (what the report draws beside the tuning curve). A failure
 * is reported and does not change the outcome of the benchmark. */
static void store_baselines(const char *path, int64_t workload,
                            const char *target, int threads,
                            const ts_bench_result *vendor,
                            const int *have_vendor) {
  ts_db *db = NULL;
  ts_error err;
  ts_error_clear(&err);
  if (ts_db_open(path, NULL, &db, &err)) {
    cli_error("cannot store the vendor baselines", &err);
    return;
  }
  for (int v = 0; v < TS_BENCH_N_VENDORS; v++)
    if (have_vendor[v] && vendor[v].gflops > 0 &&
        ts_db_baseline_put(db, workload, target,
                           ts_bench_vendor_name((ts_bench_vendor)v), threads,
                           vendor[v].gflops))
      fprintf(stderr, "tessera: warning: cannot store the %s baseline: %s\n",
              ts_bench_vendor_name((ts_bench_vendor)v), ts_db_errmsg(db));
  ts_db_close(db);
}

/* The Winograd forms of a conv workload that the database has every
 * stage of (`tune --winograd`), built into forms[] (*n of them); a note
 * for a form with some stages but not all. */
static void load_forms(const bench_cfg *cfg, const ts_workload *w,
                       const ts_target *t, cli_form *forms, int *n) {
  *n = 0;
  if (!cfg->db || cfg->tir || cli_conv_form_why_not(w)) return;
  ts_db_options dbo = ts_db_defaults();
  dbo.read_only = true;
  ts_db *db = NULL;
  ts_error err;
  if (ts_db_open(cfg->db, &dbo, &db, &err)) return;
  for (int m = 2; m <= 4; m += 2) {
    ts_error_clear(&err);
    if (!cli_conv_form_build(w, m, db, t, &forms[*n], &err)) {
      (*n)++;
    } else if (err.code != TS_ENOTFOUND || forms[*n].recorded > 0) {
      /* a form never tuned is no news; one tuned in part is */
      fprintf(stderr, "tessera: note: %s of '%s' not timed: %s\n",
              ts_winograd_form_name(m), w->name, err.msg);
    }
  }
  ts_db_close(db);
}

/* Each stage of form f run once and, up to the interpreter's size limit,
 * checked against it on the same seeded arguments; false with the reason
 * in detail. */
static bool check_form(cli_form *f, ts_runtime *rt, char *detail, size_t cap) {
  for (int i = 0; i < f->n; i++) {
    cli_kernel *k = &f->k[i];
    ts_error err;
    int out = output_param(f->func[i]);
    ts_rt_args_zero_outputs(k->args);
    if (ts_rt_kernel_call(k->kernel, ts_rt_args_data(k->args), rt, &err)) {
      snprintf(detail, cap, "%s: %.200s", f->stage[i], err.msg);
      return false;
    }
    if (ts_func_flops(f->func[i]) > INTERP_FLOP_LIMIT) continue;
    ts_rt_args *want = NULL;
    ts_rt_arg_spec *specs = ts_artifact_arg_specs(k->build.artifact);
    int rc = specs ? ts_rt_args_create(specs, k->build.artifact->n_args, 1,
                                       &want, &err)
                   : TS_ENOMEM;
    free(specs);
    if (!rc)
      rc = ts_interp_run(f->func[i], ts_rt_args_data(want),
                         ts_rt_args_count(want), NULL, &err);
    ts_buffer *ob = ts_func_param(f->func[i], out);
    char d[200] = "";
    bool ok =
        !rc &&
        same_output(ts_rt_args_data(k->args)[out], ts_rt_args_data(want)[out],
                    ts_buffer_dtype(ob), ts_buffer_elems(ob), d, sizeof d);
    ts_rt_args_free(want);
    if (!ok) {
      snprintf(detail, cap, "%s: %s", f->stage[i],
               rc ? "the reference interpreter failed" : d);
      return false;
    }
  }
  return true;
}

/* --cold: every side timed as a compiled model's layer runs, one call with
 * its constant operands evicted from the caches (ts_rt_eval_cold): for the
 * kernel the operands after the first (a conv's weights, a product's B),
 * for a Winograd form its transformed weights, for oneDNN the call the
 * compiler would make with its reordered weights (cli_peers). Rounds of
 * one call each; prints the medians and the per-round ratios' medians.
 * Only conv2d_nhwc has the oneDNN side so far. */
#define COLD_ROUNDS_PER_REPEAT 3
typedef struct cold_result {
  int rounds;
  double tessera_s, onednn_s, ratio; /* medians; ratio: oneDNN / tessera */
  double form_s[2], form_ratio[2];   /* per form, as forms[] */
  bool dnn;                          /* oneDNN timed */
  char why[300];                     /* why not */
} cold_result;

static int run_cold(const bench_cfg *cfg, const ts_workload *w, int threads,
                    ts_runtime *rt, cli_kernel *main_k, cli_form *forms,
                    int n_forms, cold_result *cr) {
  memset(cr, 0, sizeof *cr);
  int n_par = ts_func_n_params(w->func);
  uint64_t mask = 0;
  for (int i = 1; i < n_par && i < 64; i++)
    if (!ts_func_param_is_output(w->func, i)) mask |= (uint64_t)1 << i;
  cli_peers peers;
  memset(&peers, 0, sizeof peers);
  snprintf(cr->why, sizeof cr->why,
           "oneDNN's cold call exists for conv2d_nhwc only");
  ts_graph *g = NULL;
  ts_graph_task *t = NULL;
  int nt = 0;
  ts_error err;
  ts_error_clear(&err);
  if (!strcmp(w->op, "conv2d_nhwc")) {
    if (cli_conv_form_tasks(w, 0, &g, &t, &nt, &err) || nt != 1 || !t[0].vendor)
      snprintf(cr->why, sizeof cr->why, "%.250s",
               err.msg[0] ? err.msg : "no oneDNN call for it");
    else if (cli_peers_add_vendor_call(&peers, t[0].func, t[0].vendor,
                                       t[0].const_params, threads, &err))
      snprintf(cr->why, sizeof cr->why, "%.250s", err.msg);
  }
  free(t);
  ts_graph_free(g);
  cr->dnn = peers.n == 1 && peers.peers[0].time_cold;
  int rounds = cfg->repeat * COLD_ROUNDS_PER_REPEAT;
  if (rounds > 192) rounds = 192;
  cr->rounds = rounds;
  double mine[192], form_s[2][192], theirs[192], ratios[192];
  int status = EXIT_FAIL;
  for (int r = 0; r < rounds; r++) {
    if (ts_rt_eval_cold(rt, main_k->kernel, main_k->args, mask, &mine[r],
                        &err)) {
      cli_error("a cold timing of the kernel failed", &err);
      goto done;
    }
    for (int i = 0; i < n_forms; i++) {
      form_s[i][r] = 0;
      for (int k = 0; k < forms[i].n; k++) {
        double s = 0;
        if (ts_rt_eval_cold(rt, forms[i].k[k].kernel, forms[i].k[k].args,
                            forms[i].consts[k], &s, &err)) {
          cli_error("a cold timing of a Winograd form failed", &err);
          goto done;
        }
        form_s[i][r] += forms[i].count[k] * s;
      }
    }
    if (cr->dnn &&
        peers.peers[0].time_cold(peers.peers[0].ctx, &theirs[r], &err)) {
      snprintf(cr->why, sizeof cr->why, "%.250s", err.msg);
      cr->dnn = false;
    }
    if (cr->dnn) ts_sleep_ms(cfg->settle_ms);
  }
  cr->tessera_s = ts_median(mine, rounds);
  for (int i = 0; i < n_forms; i++) {
    cr->form_s[i] = ts_median(form_s[i], rounds);
    for (int r = 0; cr->dnn && r < rounds; r++)
      ratios[r] = theirs[r] / form_s[i][r];
    if (cr->dnn) cr->form_ratio[i] = ts_median(ratios, rounds);
  }
  if (cr->dnn) {
    cr->onednn_s = ts_median(theirs, rounds);
    for (int r = 0; r < rounds; r++) ratios[r] = theirs[r] / mine[r];
    cr->ratio = ts_median(ratios, rounds);
  }
  status = EXIT_OK;
done:
  cli_peers_close(&peers);
  return status;
}

/* The index in forms[] of form m, -1 when it was not timed. */
static int form_index(const cli_form *forms, int n, int m) {
  for (int i = 0; i < n; i++)
    if (forms[i].m == m) return i;
  return -1;
}

static void print_cold(const ts_workload *w, const cold_result *cr,
                       const cli_form *forms, int n_forms, bool json) {
  if (json) {
    printf("\"cold\": {\"rounds\": %d, ", cr->rounds);
    json_num("tessera_seconds", true, cr->tessera_s, true);
    for (int m = 2; m <= 4; m += 2) {
      int i = form_index(forms, n_forms, m);
      char key[64]; /* two ints of any size fit */
      snprintf(key, sizeof key, "winograd_f%dx%d_seconds", m, m);
      json_num(key, i >= 0, i >= 0 ? cr->form_s[i] : 0, true);
      snprintf(key, sizeof key, "winograd_f%dx%d_ratio_to_onednn", m, m);
      json_num(key, i >= 0 && cr->dnn, i >= 0 ? cr->form_ratio[i] : 0, true);
    }
    json_num("onednn_seconds", cr->dnn, cr->onednn_s, true);
    json_num("ratio_to_onednn", cr->dnn, cr->ratio, false);
    printf("}, ");
    return;
  }
  printf("\ncold: %d rounds of one call each, the constant operands "
         "evicted from every cache level first\n",
         cr->rounds);
  printf("%-10s %12s %12s %10s\n", "", "GFLOP/s", "median ms", "ratio");
  printf("%-10s %12.2f %12.4f %10s\n", "tessera",
         w->flops / cr->tessera_s * 1e-9, cr->tessera_s * 1e3, "1.00");
  for (int i = 0; i < n_forms; i++) {
    char rs[32] = "-";
    if (cr->dnn) snprintf(rs, sizeof rs, "%.2f", cr->form_ratio[i]);
    printf("%-10s %12.2f %12.4f %10s  %s\n", ts_winograd_form_name(forms[i].m),
           w->flops / cr->form_s[i] * 1e-9, cr->form_s[i] * 1e3, rs,
           cr->dnn ? "its speed over oneDNN's" : "");
  }
  if (cr->dnn)
    printf("%-10s %12.2f %12.4f %10.2f\n", "onednn",
           w->flops / cr->onednn_s * 1e-9, cr->onednn_s * 1e3, cr->ratio);
  else
    printf("%-10s %12s %12s %10s  %s\n", "onednn", "-", "-", "-", cr->why);
}

static int run_bench(const bench_cfg *cfg) {
  ts_error err;
  ts_error_clear(&err);
  ts_workload *w = NULL;
  ts_target *t = NULL;
  ts_runtime *rt = NULL;
  ts_func *scheduled = NULL;
  cli_kernel main_k = {0}, ref_k = {0};
  cli_form forms[2];
  int n_forms = 0;
  double form_secs[2][64];
  ts_bench_result vendor[TS_BENCH_N_VENDORS];
  ts_bench_session *session[TS_BENCH_N_VENDORS] = {0};
  int have_vendor[TS_BENCH_N_VENDORS] = {0};
  char vendor_why[TS_BENCH_N_VENDORS][1024];
  int status = EXIT_FAIL;
  memset(vendor, 0, sizeof vendor);

  if (cfg->tir) {
    /* a TIR function (a model's task, say): no vendor operation to match */
    ts_func *tf = NULL;
    if (cli_load_func(NULL, cfg->tir, &w, &tf) != EXIT_OK) return EXIT_FAIL;
    if (!(w = calloc(1, sizeof *w))) {
      ts_func_free(tf);
      fprintf(stderr, "tessera: error: out of memory\n");
      return EXIT_FAIL;
    }
    w->func = tf;
    snprintf(w->op, sizeof w->op, "tir");
    snprintf(w->spec, sizeof w->spec, "%s", cfg->tir);
    snprintf(w->name, sizeof w->name, "%s", ts_func_name(tf));
    w->flops = ts_func_flops(tf);
  } else if (ts_workload_from_spec(cfg->spec, &w, &err)) {
    cli_error("bad workload spec", &err);
    return EXIT_FAIL;
  }
  /* Everything below allocates the workload's buffers in this process. */
  if (cli_admit(w, w->func, cfg->max_memory_mb, cfg->max_gflop) != EXIT_OK) {
    ts_workload_free(w);
    return EXIT_FAIL;
  }
  /* with --db, the records of --threads N threads (their -num-cores) */
  char *tstr = NULL;
  int rc = EXIT_OK;
  if (cfg->db && (rc = cli_target_for_threads(
                      "bench", cfg->target, cfg->threads, &tstr)) != EXIT_OK) {
    ts_workload_free(w);
    return rc;
  }
  const char *tname = tstr ? tstr : cfg->target;
  rc = tname ? ts_target_parse(tname, &t, &err) : ts_target_host(&t, &err);
  free(tstr);
  if (rc) {
    cli_error("bad target", &err);
    goto done;
  }
  /* Measuring happens here: a device target, or one that asks for what
   * this CPU lacks, is refused. */
  if (ts_target_check_runs_here(t, "bench", &err)) {
    fprintf(stderr, "tessera: error: %s\n", err.msg);
    goto done;
  }
  int threads = cfg->threads > 0 ? cfg->threads : ts_target_num_cores(t);
  if (ts_target_has_feature(t, "amx-tile") && ts_rt_enable_amx(&err)) {
    cli_error("AMX is not available", &err);
    goto done;
  }
  if (ts_runtime_create(threads, &rt, &err)) {
    cli_error("cannot start the thread pool", &err);
    goto done;
  }
  const ts_func *f = w->func;
  char *db_trace = NULL;
  int64_t db_workload = 0;
  if (cfg->db) {
    /* the database's best record of this workload on this target */
    ts_db_options dbo = ts_db_defaults();
    dbo.read_only = true;
    ts_db *db = NULL;
    ts_db_record best;
    memset(&best, 0, sizeof best);
    if (ts_db_open(cfg->db, &dbo, &db, &err)) {
      cli_error("cannot open the database", &err);
      goto done;
    }
    rc = ts_db_best_by_func(db, w->func, ts_target_str(t), &best);
    ts_target *host = NULL;
    if (rc && !cfg->target && cfg->threads > 0 &&
        ts_target_host(&host, &err) == TS_OK &&
        strcmp(ts_target_str(host), ts_target_str(t)) &&
        ts_db_best_by_func(db, w->func, ts_target_str(host), &best) == TS_OK) {
      /* none of N threads: the host's own (all-core) records, said so */
      fprintf(stderr,
              "tessera: note: %s has no record of '%s' measured on %d "
              "thread%s; benchmarking the best of its %d-thread records on "
              "%d\n",
              cfg->db, w->name, cfg->threads, cfg->threads == 1 ? "" : "s",
              ts_target_num_cores(host), cfg->threads);
      rc = TS_OK;
    }
    ts_target_free(host);
    if (rc) {
      fprintf(stderr,
              "tessera: error: no measured schedule of '%s' for this target "
              "in %s: %s\n",
              w->name, cfg->db, ts_db_errmsg(db));
      ts_db_close(db);
      goto done;
    }
    db_trace = strdup(best.trace_json);
    db_workload = best.workload_id;
    ts_db_record_clear(&best);
    ts_db_close(db);
  }
  if (cfg->trace || db_trace) {
    ts_trace *trace = NULL;
    ts_sched *sch = NULL;
    rc = db_trace ? ts_trace_from_json(db_trace, strlen(db_trace), &trace, &err)
                  : ts_trace_from_json_file(cfg->trace, &trace, &err);
    free(db_trace);
    if (rc || ts_trace_apply(trace, w->func, cfg->seed, &sch, &err)) {
      cli_error("cannot apply the trace", &err);
      ts_trace_free(trace);
      goto done;
    }
    scheduled = ts_func_copy(ts_sched_func(sch));
    ts_sched_destroy(sch);
    ts_trace_free(trace);
    if (!scheduled) {
      fprintf(stderr, "tessera: error: out of memory\n");
      goto done;
    }
    f = scheduled;
  } else if (cfg->default_sched) {
    ts_sched *sch = NULL;
    if (ts_default_schedule(w->func, t, &sch, &err)) {
      cli_error("the default schedule failed", &err);
      goto done;
    }
    scheduled = ts_func_copy(ts_sched_func(sch));
    ts_sched_destroy(sch);
    if (!scheduled) {
      fprintf(stderr, "tessera: error: out of memory\n");
      goto done;
    }
    f = scheduled;
  }
  if (kernel_make(f, t, cfg->seed, rt, &main_k, &err)) {
    cli_error("compiling or running the kernel failed", &err);
    goto done;
  }
  load_forms(cfg, w, t, forms, &n_forms);
  for (int i = 0; i < n_forms; i++) {
    char d[256];
    if (!check_form(&forms[i], rt, d, sizeof d)) {
      fprintf(stderr, "tessera: error: %s of '%s': %s\n",
              ts_winograd_form_name(forms[i].m), w->name, d);
      goto done;
    }
  }
  int out = output_param(w->func);
  ts_buffer *ob = ts_func_param(w->func, out);
  ts_dtype odt = ts_buffer_dtype(ob);
  int64_t on = ts_buffer_elems(ob);
  const void *got = ts_rt_args_data(main_k.args)[out];

  /* Every side is prepared first, then timed in interleaved rounds (one
   * repeat of each side per round): a slow phase of a shared machine then
   * falls on all sides of a round, and each round gives a ratio. */
  ts_bench_options bo = ts_bench_options_default();
  bo.threads = threads;
  bo.seed = cfg->seed;
  bo.eval.repeat = 1;
  bo.eval.warmup = 1;
  bo.eval.min_repeat_ms = cfg->min_repeat_ms;
  bo.rt = rt;
  for (int v = 0; v < TS_BENCH_N_VENDORS; v++) {
    ts_error verr;
    ts_error_clear(&verr);
    have_vendor[v] =
        ts_bench_open((ts_bench_vendor)v, w, &bo, &session[v], &verr) == TS_OK;
    snprintf(vendor_why[v], sizeof vendor_why[v], "%s", verr.msg);
  }
  double secs[64];
  int number = 1;
  for (int r = 0; r < cfg->repeat; r++) {
    ts_eval_config ev = bo.eval;
    ev.number = number;
    if (ts_rt_eval_kernel(rt, &ev, main_k.kernel, ts_rt_args_data(main_k.args),
                          &secs[r], &number, &err)) {
      cli_error("timing the kernel failed", &err);
      goto done;
    }
    for (int i = 0; i < n_forms; i++)
      if (cli_conv_form_time(&forms[i], rt, &bo.eval, &form_secs[i][r], &err)) {
        cli_error("timing a Winograd form failed", &err);
        goto done;
      }
    for (int v = 0; v < TS_BENCH_N_VENDORS; v++) {
      ts_error verr;
      ts_error_clear(&verr);
      if (!have_vendor[v]) continue;
      int failed = ts_bench_measure(session[v], NULL, &verr);
      ts_sleep_ms(cfg->settle_ms);
      if (!failed) continue;
      /* a library that fails while timed drops out, saying why */
      snprintf(vendor_why[v], sizeof vendor_why[v], "%s", verr.msg);
      have_vendor[v] = 0;
    }
  }
  double median = ts_median(secs, cfg->repeat);
  double gflops = w->flops / median * 1e-9;
  double vendor_ratio[TS_BENCH_N_VENDORS] = {0};
  double form_ratio[2][TS_BENCH_N_VENDORS] = {{0}}, form_median[2] = {0};
  for (int i = 0; i < n_forms; i++)
    form_median[i] = ts_median(form_secs[i], cfg->repeat);
  for (int v = TS_BENCH_N_VENDORS - 1; v >= 0; v--) {
    if (!session[v]) continue;
    if (have_vendor[v]) {
      const double *vs = NULL;
      int n = ts_bench_samples(session[v], &vs);
      double ratios[64];
      for (int r = 0; r < n && r < cfg->repeat; r++)
        ratios[r] = secs[r] > 0 ? vs[r] / secs[r] : 0;
      vendor_ratio[v] = ts_median(ratios, n < cfg->repeat ? n : cfg->repeat);
      for (int i = 0; i < n_forms; i++) {
        for (int r = 0; r < n && r < cfg->repeat; r++)
          ratios[r] = form_secs[i][r] > 0 ? vs[r] / form_secs[i][r] : 0;
        form_ratio[i][v] = ts_median(ratios, n < cfg->repeat ? n : cfg->repeat);
      }
    }
    ts_bench_close(session[v], have_vendor[v] ? &vendor[v] : NULL);
    session[v] = NULL;
  }

  /* The check: the output of each of cfg->check_runs runs against one
   * reference. */
  char check_against[64] = "", detail[256] = "";
  bool ok = false;
  const void *want_out = NULL;
  ts_rt_args *want = NULL;
  ts_rt_args_zero_outputs(main_k.args);
  if (ts_rt_kernel_call(main_k.kernel, ts_rt_args_data(main_k.args), rt,
                        &err)) {
    cli_error("re-running the kernel failed", &err);
    goto done;
  }
  if (w->flops <= INTERP_FLOP_LIMIT) {
    ts_rt_arg_spec *specs = ts_artifact_arg_specs(main_k.build.artifact);
    rc = ts_rt_args_create(specs, main_k.build.artifact->n_args, cfg->seed,
                           &want, &err);
    free(specs);
    if (!rc)
      rc = ts_interp_run(w->func, ts_rt_args_data(want), ts_rt_args_count(want),
                         NULL, &err);
    if (rc) {
      cli_error("the reference interpreter failed", &err);
      ts_rt_args_free(want);
      goto done;
    }
    snprintf(check_against, sizeof check_against, "the reference interpreter");
    want_out = ts_rt_args_data(want)[out];
  } else if (have_vendor[TS_BENCH_ONEDNN] && vendor[TS_BENCH_ONEDNN].output) {
    snprintf(check_against, sizeof check_against, "oneDNN");
    want_out = vendor[TS_BENCH_ONEDNN].output;
  } else if (have_vendor[TS_BENCH_OPENBLAS] &&
             vendor[TS_BENCH_OPENBLAS].output) {
    snprintf(check_against, sizeof check_against, "OpenBLAS");
    want_out = vendor[TS_BENCH_OPENBLAS].output;
  } else if (have_vendor[TS_BENCH_NAIVE] && vendor[TS_BENCH_NAIVE].output) {
    snprintf(check_against, sizeof check_against, "the plain C loop");
    want_out = vendor[TS_BENCH_NAIVE].output;
  } else if (scheduled) {
    if (kernel_make(w->func, t, cfg->seed, rt, &ref_k, &err)) {
      cli_error("compiling the unscheduled reference failed", &err);
      goto done;
    }
    snprintf(check_against, sizeof check_against, "the unscheduled kernel");
    want_out = ts_rt_args_data(ref_k.args)[out];
  } else {
    snprintf(check_against, sizeof check_against, "nothing");
    snprintf(detail, sizeof detail,
             "too large for the interpreter and no other reference");
    ok = true;
  }
  for (int run = 0; want_out && run < cfg->check_runs; run++) {
    if (run > 0) {
      ts_rt_args_zero_outputs(main_k.args);
      if (ts_rt_kernel_call(main_k.kernel, ts_rt_args_data(main_k.args), rt,
                            &err)) {
        cli_error("re-running the kernel failed", &err);
        ts_rt_args_free(want);
        goto done;
      }
    }
    char d[200];
    ok = same_output(got, want_out, odt, on, d, sizeof d);
    if (!ok) {
      snprintf(detail, sizeof detail, "run %d of %d: %s", run + 1,
               cfg->check_runs, d);
      break;
    }
    snprintf(detail, sizeof detail, "%s, %d run%s", d, cfg->check_runs,
             cfg->check_runs == 1 ? "" : "s");
  }
  ts_rt_args_free(want);

  /* the best library: the fastest by median; its ratio is the median of
   * the per-round ratios */
  int best_v = -1;
  for (int v = 0; v < TS_BENCH_N_VENDORS; v++)
    if (have_vendor[v] && v != TS_BENCH_NAIVE &&
        (best_v < 0 || vendor[v].gflops > vendor[best_v].gflops))
      best_v = v;
  if (best_v < 0 && have_vendor[TS_BENCH_NAIVE]) best_v = TS_BENCH_NAIVE;
  cold_result cold;
  if (ok && cfg->cold &&
      run_cold(cfg, w, threads, rt, &main_k, forms, n_forms, &cold) != EXIT_OK)
    goto done;

  if (cfg->json) {
    printf("{");
    json_str("workload", w->spec, true);
    json_str("name", w->name, true);
    printf("\"flop\": %.0f, ", w->flops);
    printf("\"threads\": %d, ", threads);
    json_str("schedule",
             cfg->trace           ? cfg->trace
             : cfg->db            ? "database best"
             : cfg->default_sched ? "default"
                                  : "unscheduled",
             true);
    json_num("tessera_gflops", true, gflops, true);
    json_num("tessera_seconds", true, median, true);
    json_num("openblas_gflops", have_vendor[TS_BENCH_OPENBLAS],
             vendor[TS_BENCH_OPENBLAS].gflops, true);
    json_num("onednn_gflops", have_vendor[TS_BENCH_ONEDNN],
             vendor[TS_BENCH_ONEDNN].gflops, true);
    json_num("naive_gflops", have_vendor[TS_BENCH_NAIVE],
             vendor[TS_BENCH_NAIVE].gflops, true);
    json_num("ratio_to_best_vendor", best_v >= 0,
             best_v >= 0 ? vendor_ratio[best_v] : 0, true);
    json_str("best_vendor",
             best_v >= 0 ? ts_bench_vendor_name((ts_bench_vendor)best_v) : "",
             true);
    for (int m = 2; m <= 4; m += 2) {
      int i = form_index(forms, n_forms, m);
      char key[64]; /* two ints of any size fit */
      snprintf(key, sizeof key, "winograd_f%dx%d_gflops", m, m);
      json_num(key, i >= 0, i >= 0 ? w->flops / form_median[i] * 1e-9 : 0,
               true);
      snprintf(key, sizeof key, "winograd_f%dx%d_ratio_to_best_vendor", m, m);
      json_num(key, i >= 0 && best_v >= 0,
               i >= 0 && best_v >= 0 ? form_ratio[i][best_v] : 0, true);
    }
    printf("\"rounds\": %d, \"settle_ms\": %d, ", cfg->repeat, cfg->settle_ms);
    json_num("compile_ms", true, compile_ms(&main_k.build), true);
    json_str("check", ok ? "ok" : "mismatch", true);
    json_str("check_against", check_against, true);
    if (ok && cfg->cold) print_cold(w, &cold, forms, n_forms, true);
    json_str("target", ts_target_str(t), false);
    printf("}\n");
  } else {
    printf("workload:  %s\n", w->spec);
    if (cfg->db)
      printf("schedule:  the best record in %s\n", cfg->db);
    else
      printf("schedule:  %s\n", cfg->trace           ? cfg->trace
                                : cfg->default_sched ? "the default schedule"
                                                     : "unscheduled");
    printf("threads:   %d   flop: %.4g   compile: %.1f ms\n", threads, w->flops,
           compile_ms(&main_k.build));
    printf("check:     %s against %s (%s)\n", ok ? "ok" : "MISMATCH",
           check_against, detail);
    if (n_forms)
      printf("forms:     %d Winograd form%s from the database, each stage "
             "checked against the reference interpreter where it is small "
             "enough\n",
             n_forms, n_forms == 1 ? "" : "s");
    printf("\n%-10s %12s %12s %10s  %s\n", "", "GFLOP/s", "median ms", "ratio",
           "notes");
    printf("%-10s %12.2f %12.4f %10s  %s\n", "tessera", gflops, median * 1e3,
           "1.00", n_forms ? "the direct form" : "");
    for (int i = 0; i < n_forms; i++) {
      char ratio[32] = "-", note[160];
      if (best_v >= 0)
        snprintf(ratio, sizeof ratio, "%.2f", form_ratio[i][best_v]);
      snprintf(note, sizeof note,
               "Winograd %s, %d kernels (input transform, product, output "
               "transform)%s%s",
               ts_winograd_form_name(forms[i].m), forms[i].n,
               best_v >= 0 ? "; ratio over " : "",
               best_v >= 0 ? ts_bench_vendor_name((ts_bench_vendor)best_v)
                           : "");
      printf(
          "%-10s %12.2f %12.4f %10s  %s\n", ts_winograd_form_name(forms[i].m),
          w->flops / form_median[i] * 1e-9, form_median[i] * 1e3, ratio, note);
    }
    for (int v = 0; v < TS_BENCH_N_VENDORS; v++) {
      const char *name = ts_bench_vendor_name((ts_bench_vendor)v);
      if (have_vendor[v])
        printf("%-10s %12.2f %12.4f %10.2f  %s%s%s\n", name, vendor[v].gflops,
               vendor[v].seconds * 1e3, vendor_ratio[v], vendor[v].impl,
               vendor[v].note[0] ? "; " : "", vendor[v].note);
      else
        printf("%-10s %12s %12s %10s  %s\n", name, "-", "-", "-",
               reason_text(name, vendor_why[v]));
    }
    printf("\n%d interleaved rounds (tessera, then each library, one repeat "
           "each, %d ms idle after each library);\nratio = tessera's speed "
           "over the library's, the median of the rounds' ratios\n",
           cfg->repeat, cfg->settle_ms);
    if (n_forms)
      printf("a Winograd form's ratio: its speed over the fastest library's; "
             "GFLOP/s count the direct form's FLOPs\n");
    if (ok && cfg->cold) print_cold(w, &cold, forms, n_forms, false);
  }
  status = ok ? EXIT_OK : EXIT_FAIL;
  if (ok && db_workload > 0)
    store_baselines(cfg->db, db_workload, ts_target_str(t), threads, vendor,
                    have_vendor);

done:
  for (int v = TS_BENCH_N_VENDORS - 1; v >= 0; v--)
    ts_bench_close(session[v], NULL);
  for (int v = 0; v < TS_BENCH_N_VENDORS; v++)
    if (have_vendor[v]) ts_bench_result_free(&vendor[v]);
  cli_kernel_free(&main_k);
  cli_kernel_free(&ref_k);
  for (int i = 0; i < n_forms; i++) cli_conv_form_free(&forms[i]);
  ts_func_free(scheduled);
  ts_runtime_destroy(rt);
  ts_target_free(t);
  ts_workload_free(w);
  return status;
}

static int int_opt(const char *name, const char *v, long lo, long hi,
                   int *out) {
  char *end;
  long x = strtol(v, &end, 10);
  if (!*v || *end || x < lo || x > hi)
    return cli_usage_error("bench",
                           "%s wants an integer in [%ld, %ld], got '%s'", name,
                           lo, hi, v);
  *out = (int)x;
  return EXIT_OK;
}

int cmd_bench(int argc, char **argv) {
  bench_cfg cfg = {.repeat = 5,
                   .min_repeat_ms = 100,
                   .settle_ms = 30,
                   .seed = 1,
                   .check_runs = 4};
  bool suite = false;
  const char *budget = "full", *out_dir = "bench/results";
  int suite_trials = 0;
  const char *set = "fixed", *isa = "native", *only = NULL;
  unsigned long long set_seed = 1;
  bool set_given = false, list = false, const_weights = false;
  /* a compiled model is a bench of its own (cmd_bench_model.c) */
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--model") || !strncmp(argv[i], "--model=", 8))
      return bench_model(argc, argv);
  for (int i = 1; i < argc; i++) {
    const char *v;
    bool missing;
    int rc = EXIT_OK;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(bench_usage, stdout);
      return EXIT_OK;
    } else if (!strcmp(argv[i], "--json")) {
      cfg.json = true;
    } else if (!strcmp(argv[i], "--suite")) {
      suite = true;
    } else if (!strcmp(argv[i], "--list")) {
      list = true;
      set_given = true;
    } else if (cli_opt_value(argc, argv, &i, "--set", &v, &missing)) {
      if (missing)
        return cli_usage_error("bench", "--set needs fixed or broad");
      set = v;
      set_given = true;
    } else if (cli_opt_value(argc, argv, &i, "--isa", &v, &missing)) {
      if (missing)
        return cli_usage_error("bench", "--isa needs native or avx2");
      isa = v;
      set_given = true;
    } else if (!strcmp(argv[i], "--const-weights")) {
      const_weights = true;
      set_given = true;
    } else if (cli_opt_value(argc, argv, &i, "--only", &v, &missing)) {
      if (missing || !*v)
        return cli_usage_error("bench", "--only needs a text to look for in "
                                        "the workloads' specs");
      only = v;
      set_given = true;
    } else if (cli_opt_value(argc, argv, &i, "--set-seed", &v, &missing)) {
      int x;
      if (missing) return cli_usage_error("bench", "--set-seed needs a number");
      rc = int_opt("--set-seed", v, 0, 2147483647, &x);
      set_seed = (unsigned long long)x;
      set_given = true;
    } else if (cli_opt_value(argc, argv, &i, "--budget", &v, &missing)) {
      if (missing)
        return cli_usage_error("bench", "--budget needs quick or full");
      budget = v;
    } else if (cli_opt_value(argc, argv, &i, "-o", &v, &missing) ||
               cli_opt_value(argc, argv, &i, "--output", &v, &missing) ||
               cli_opt_value(argc, argv, &i, "--out", &v, &missing)) {
      /* --out: the older spelling */
      if (missing)
        return cli_usage_error("bench", "-o/--output needs a folder");
      out_dir = v;
    } else if (cli_opt_value(argc, argv, &i, "--trials", &v, &missing)) {
      if (missing) return cli_usage_error("bench", "--trials needs a number");
      rc = int_opt("--trials", v, 1, 1000000, &suite_trials);
    } else if (cli_opt_value(argc, argv, &i, "--workload", &v, &missing)) {
      if (missing) return cli_usage_error("bench", "--workload needs a spec");
      cfg.spec = v;
    } else if (cli_opt_value(argc, argv, &i, "--tir", &v, &missing)) {
      if (missing) return cli_usage_error("bench", "--tir needs a file");
      cfg.tir = v;
    } else if (cli_opt_value(argc, argv, &i, "--trace", &v, &missing)) {
      if (missing) return cli_usage_error("bench", "--trace needs a file");
      cfg.trace = v;
    } else if (cli_opt_value(argc, argv, &i, "--db", &v, &missing)) {
      if (missing) return cli_usage_error("bench", "--db needs a path");
      cfg.db = v;
    } else if (!strcmp(argv[i], "--default")) {
      cfg.default_sched = true;
    } else if (!strcmp(argv[i], "--cold")) {
      cfg.cold = true;
    } else if (cli_opt_value(argc, argv, &i, "--target", &v, &missing)) {
      if (missing) return cli_usage_error("bench", "--target needs a target");
      cfg.target = v;
    } else if (cli_opt_value(argc, argv, &i, "--threads", &v, &missing)) {
      if (missing) return cli_usage_error("bench", "--threads needs a number");
      rc = int_opt("--threads", v, 1, TS_RT_MAX_THREADS, &cfg.threads);
    } else if (cli_opt_value(argc, argv, &i, "--repeat", &v, &missing)) {
      if (missing) return cli_usage_error("bench", "--repeat needs a number");
      rc = int_opt("--repeat", v, 1, 64, &cfg.repeat);
    } else if (cli_opt_value(argc, argv, &i, "--min-repeat-ms", &v, &missing)) {
      if (missing)
        return cli_usage_error("bench", "--min-repeat-ms needs a number");
      rc = int_opt("--min-repeat-ms", v, 0, 60000, &cfg.min_repeat_ms);
    } else if (cli_opt_value(argc, argv, &i, "--settle-ms", &v, &missing)) {
      if (missing)
        return cli_usage_error("bench", "--settle-ms needs a number");
      rc = int_opt("--settle-ms", v, 0, 10000, &cfg.settle_ms);
    } else if (cli_opt_value(argc, argv, &i, "--max-memory-mb", &v, &missing)) {
      if (missing)
        return cli_usage_error("bench", "--max-memory-mb needs a number");
      rc = cli_int_option("bench", "--max-memory-mb", v, 1, 1L << 40,
                          &cfg.max_memory_mb);
    } else if (cli_opt_value(argc, argv, &i, "--max-gflop", &v, &missing)) {
      if (missing)
        return cli_usage_error("bench", "--max-gflop needs a number");
      long g = 0;
      rc = cli_int_option("bench", "--max-gflop", v, 1, 1L << 40, &g);
      cfg.max_gflop = (double)g;
    } else if (cli_opt_value(argc, argv, &i, "--check-runs", &v, &missing)) {
      if (missing)
        return cli_usage_error("bench", "--check-runs needs a number");
      rc = int_opt("--check-runs", v, 1, 1000, &cfg.check_runs);
    } else if (cli_opt_value(argc, argv, &i, "--seed", &v, &missing)) {
      int s;
      if (missing) return cli_usage_error("bench", "--seed needs a number");
      rc = int_opt("--seed", v, 0, 2147483647, &s);
      cfg.seed = (uint64_t)s;
    } else {
      return cli_usage_error("bench", "unknown option '%s'", argv[i]);
    }
    if (rc != EXIT_OK) return rc;
  }
  if (suite) {
    bench_suite_options so = {.budget = budget,
                              .trials = suite_trials,
                              .db = cfg.db ? cfg.db : "tessera.db",
                              .out_dir = out_dir,
                              .set = set,
                              .set_seed = set_seed,
                              .isa = isa,
                              .list = list,
                              .const_weights = const_weights,
                              .only = only};
    return bench_suite(&so);
  }
  if (set_given)
    return cli_usage_error("bench", "--set, --set-seed, --isa, --only and "
                                    "--list go with --suite");
  if (!cfg.spec == !cfg.tir)
    return cli_usage_error("bench", "give exactly one of --workload or --tir");
  if ((cfg.trace != NULL) + (cfg.db != NULL) + cfg.default_sched > 1)
    return cli_usage_error("bench", "give one of --trace, --db, --default");
  return run_bench(&cfg);
}
