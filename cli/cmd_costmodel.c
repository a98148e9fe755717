/*
 * cmd_costmodel.c — `tessera costmodel`: the learned cost model for people.
 * features (the per-store vectors of a workload, scheduled by a trace or
 * not, and the table of entries), bench (how long extraction and
 * prediction take), collect (sample random schedules of workloads, build
 * them as a tuning job does — forked, each under a time limit — measure
 * them on the embedded pool, commit the records: a data set),
 * eval (train on part of a database's records and report ranking quality
 * on the rest, next to the random model), and train (fit a model on a
 * database and save it, to start a new tuning task warm).
 */
#include "cli.h"

#include "codegen/codegen.h"
#include "cost_model/cost_model.h"
#include "db/db.h"
#include "rpc/rpc.h"
#include "schedule/schedule.h"
#include "tuner/tuner.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char cm_usage[] =
    "usage: tessera costmodel <command> [options]\n"
    "\n"
    "commands:\n"
    "  features (--workload SPEC | --tir FILE) [--trace FILE] [--target T]\n"
    "           [--json]        the feature vector of every store\n"
    "  features --list          the entries: index, name, meaning\n"
    "  bench [--n N] [--json]   time feature extraction of a scheduled\n"
    "                           1024^3 matmul, and prediction\n"
    "  collect --db PATH --workload SPEC [--workload SPEC ...] --n N\n"
    "          [--seed S] [--batch B] [--repeat R] [--min-repeat-ms MS]\n"
    "          [--threads T] [--timeout-ms MS]\n"
    "                           measure N random schedules of each workload\n"
    "                           on the embedded pool and store the records\n"
    "  eval --db PATH [--workload W] [--folds K] [--split random|workload]\n"
    "       [--objective rank|squared] [--model FILE] [--seed S]\n"
    "       [--threads N] [--batch B] [--json]\n"
    "                           train on part of the records, report ranking\n"
    "                           quality on the rest next to a random model\n"
    "  train --db PATH -o FILE [--workload W | --exclude W]\n"
    "        [--objective rank|squared] [--seed S] [--threads N]\n"
    "                           fit a model on the records and save it (a\n"
    "                           warm start for new tasks)\n"
    "\n"
    "docs/features.md defines the features and records measured figures.\n";

/* Options shared by the subcommands; each accepts a subset. */
typedef struct cm_args {
  const char *sub;
  const char *db, *spec, *tir, *trace, *target, *out, *model, *exclude;
  const char *workload; /* eval/train: a database workload key */
  const char **specs;   /* collect: every --workload */
  int n_specs;
  const char *split;
  ts_cm_objective objective;
  long n, folds, batch, threads, timeout_ms, nthread, repeat, min_repeat_ms;
  unsigned long long seed;
  bool json, list;
} cm_args;

static bool parse_long(const char *sub, const char *opt, const char *v, long lo,
                       long hi, long *out, int *rc) {
  if (cli_int_option(sub, opt, v, lo, hi, out)) {
    *rc = EXIT_USAGE;
    return false;
  }
  return true;
}

/* Whether `name` is one of the space-separated option names in `allowed`. */
static bool option_allowed(const char *allowed, const char *name) {
  size_t n = strlen(name);
  for (const char *p = allowed; *p;) {
    size_t len = strcspn(p, " ");
    if (len == n && !strncmp(p, name, n)) return true;
    p += len;
    while (*p == ' ') p++;
  }
  return false;
}

/* Parses argv[1..] into a; returns -1 when parsing succeeded, else the exit
 * code (usage printed). `allowed` lists the options the subcommand takes. */
static int parse_args(int argc, char **argv, const char *allowed, cm_args *a) {
  memset(a, 0, sizeof *a);
  a->sub = argv[0];
  a->objective = ts_cm_xgb_defaults().objective;
  a->folds = 5;
  a->batch = 64;
  a->seed = 1;
  a->timeout_ms = 4000;
  a->repeat = 3;
  a->min_repeat_ms = 20;
  char sub[64];
  snprintf(sub, sizeof sub, "costmodel %s", argv[0]);
  a->specs = calloc((size_t)argc, sizeof *a->specs);
  if (!a->specs) return EXIT_FAIL;
  for (int i = 1; i < argc; i++) {
    const char *v = NULL;
    bool missing = false;
    int rc = -1;
    const char *arg = argv[i];
    char name[32];
    snprintf(name, sizeof name, "%.*s", (int)strcspn(arg, "="), arg);
    if (arg[0] == '-' && arg[1] == '-' && !option_allowed(allowed, name))
      return cli_usage_error(sub, "unknown option '%s'", arg);
    if (!strcmp(arg, "--json")) {
      a->json = true;
    } else if (!strcmp(arg, "--list")) {
      a->list = true;
    } else if (cli_opt_value(argc, argv, &i, "--db", &v, &missing)) {
      a->db = v;
    } else if (cli_opt_value(argc, argv, &i, "--workload", &v, &missing)) {
      a->spec = a->workload = v;
      if (v) a->specs[a->n_specs++] = v;
    } else if (cli_opt_value(argc, argv, &i, "--tir", &v, &missing)) {
      a->tir = v;
    } else if (cli_opt_value(argc, argv, &i, "--trace", &v, &missing)) {
      a->trace = v;
    } else if (cli_opt_value(argc, argv, &i, "--target", &v, &missing)) {
      a->target = v;
    } else if (cli_opt_value(argc, argv, &i, "-o", &v, &missing) ||
               cli_opt_value(argc, argv, &i, "--output", &v, &missing) ||
               cli_opt_value(argc, argv, &i, "--out", &v, &missing)) {
      a->out = v; /* --out: the older spelling */
    } else if (cli_opt_value(argc, argv, &i, "--model", &v, &missing)) {
      a->model = v;
    } else if (cli_opt_value(argc, argv, &i, "--exclude", &v, &missing)) {
      a->exclude = v;
    } else if (cli_opt_value(argc, argv, &i, "--split", &v, &missing)) {
      if (v && strcmp(v, "random") && strcmp(v, "workload"))
        return cli_usage_error(sub, "--split is random or workload, not '%s'",
                               v);
      a->split = v;
    } else if (cli_opt_value(argc, argv, &i, "--objective", &v, &missing)) {
      if (v && ts_cm_objective_parse(v, &a->objective))
        return cli_usage_error(sub, "--objective is rank or squared, not '%s'",
                               v);
    } else if (cli_opt_value(argc, argv, &i, "--seed", &v, &missing)) {
      if (v) {
        char *end;
        errno = 0;
        a->seed = strtoull(v, &end, 10);
        if (errno || !*v || *end || *v == '-')
          return cli_usage_error(sub,
                                 "--seed wants an unsigned integer, not "
                                 "'%s'",
                                 v);
      }
    } else if (cli_opt_value(argc, argv, &i, "--n", &v, &missing)) {
      if (v) parse_long(sub, "--n", v, 1, 10000000, &a->n, &rc);
    } else if (cli_opt_value(argc, argv, &i, "--folds", &v, &missing)) {
      if (v) parse_long(sub, "--folds", v, 2, 100, &a->folds, &rc);
    } else if (cli_opt_value(argc, argv, &i, "--batch", &v, &missing)) {
      if (v) parse_long(sub, "--batch", v, 2, 100000, &a->batch, &rc);
    } else if (cli_opt_value(argc, argv, &i, "--threads", &v, &missing)) {
      if (v) parse_long(sub, "--threads", v, 0, 1024, &a->threads, &rc);
    } else if (cli_opt_value(argc, argv, &i, "--nthread", &v, &missing)) {
      /* the older spelling of eval's and train's --threads */
      if (v) parse_long(sub, "--nthread", v, 0, 1024, &a->nthread, &rc);
    } else if (cli_opt_value(argc, argv, &i, "--repeat", &v, &missing)) {
      if (v)
        parse_long(sub, "--repeat", v, 1, TS_MEASURE_MAX_REPEAT, &a->repeat,
                   &rc);
    } else if (cli_opt_value(argc, argv, &i, "--min-repeat-ms", &v, &missing)) {
      if (v)
        parse_long(sub, "--min-repeat-ms", v, 0, 10000, &a->min_repeat_ms, &rc);
    } else if (cli_opt_value(argc, argv, &i, "--timeout-ms", &v, &missing)) {
      if (v)
        parse_long(sub, "--timeout-ms", v, 10, 3600000, &a->timeout_ms, &rc);
    } else {
      return cli_usage_error(sub, "unexpected argument '%s'", arg);
    }
    if (missing) return cli_usage_error(sub, "%s needs a value", name);
    if (rc >= 0) return rc;
  }
  return -1;
}

static void free_args(cm_args *a) { free(a->specs); }

/* The target named by --target (default: this host). */
static int load_target(const char *s, ts_target **t) {
  ts_error err;
  ts_error_clear(&err);
  int rc = s ? ts_target_parse(s, t, &err) : ts_target_host(t, &err);
  if (rc) {
    cli_error("bad target", &err);
    return EXIT_FAIL;
  }
  return EXIT_OK;
}

static int open_db(const char *path, bool read_only, ts_db **db) {
  ts_db_options o = ts_db_defaults();
  o.read_only = read_only;
  o.create = !read_only;
  ts_error err;
  ts_error_clear(&err);
  if (ts_db_open(path, &o, db, &err)) {
    cli_error("cannot open the database", &err);
    return EXIT_FAIL;
  }
  return EXIT_OK;
}

/* ========================================================================
 * features
 * ======================================================================== */

static int features_list(bool json) {
  if (json) printf("[");
  for (int i = 0; i < TS_CM_N_FEATURES; i++) {
    if (json) {
      printf("%s{\"index\": %d, \"name\": ", i ? ", " : "", i);
      cli_json_string(stdout, ts_cm_feature_name(i));
      printf(", \"meaning\": ");
      cli_json_string(stdout, ts_cm_feature_meaning(i));
      printf("}");
    } else {
      printf("%3d  %-30s %s\n", i, ts_cm_feature_name(i),
             ts_cm_feature_meaning(i));
    }
  }
  if (json) printf("]\n");
  return EXIT_OK;
}

static int cm_features_cmd(int argc, char **argv) {
  cm_args a;
  int rc = parse_args(argc, argv,
                      "--workload --tir --trace --target --json --list", &a);
  if (rc >= 0) {
    free_args(&a);
    return rc;
  }
  if (a.list) {
    free_args(&a);
    return features_list(a.json);
  }
  if (!!a.spec == !!a.tir) {
    free_args(&a);
    return cli_usage_error("costmodel features",
                           "give exactly one of --workload SPEC or --tir FILE");
  }
  ts_workload *w = NULL;
  ts_func *f = NULL;
  ts_target *t = NULL;
  ts_trace *trace = NULL;
  ts_sched *s = NULL;
  ts_cm_features ft = {0};
  ts_error err;
  ts_error_clear(&err);
  int code = EXIT_FAIL;
  if (cli_load_func(a.spec, a.tir, &w, &f) || load_target(a.target, &t))
    goto done;
  const ts_func *use = f;
  if (a.trace) {
    if (ts_trace_from_json_file(a.trace, &trace, &err) ||
        ts_trace_apply(trace, f, 0, &s, &err)) {
      cli_error("cannot apply the trace", &err);
      goto done;
    }
    use = ts_sched_func(s);
  }
  if (ts_cm_extract(use, t, &ft, &err)) {
    cli_error("cannot extract features", &err);
    goto done;
  }
  if (a.json) {
    printf("{\"features_version\": %d, \"n_features\": %d, \"stores\": [",
           TS_CM_FEATURES_VERSION, TS_CM_N_FEATURES);
    for (int r = 0; r < ft.n_rows; r++) {
      printf("%s[", r ? ", " : "");
      for (int i = 0; i < TS_CM_N_FEATURES; i++)
        printf("%s%.6g", i ? ", " : "",
               ft.values[(size_t)r * TS_CM_N_FEATURES + i]);
      printf("]");
    }
    printf("], \"extract_ms\": %.4f}\n", ft.extract_ms);
  } else {
    char *p = ts_cm_features_print(&ft);
    printf("# features version %d, %d entries per store, %d stores; nonzero "
           "entries as log2(x+1) (x)\n%s",
           TS_CM_FEATURES_VERSION, TS_CM_N_FEATURES, ft.n_rows, p ? p : "");
    printf("# extracted in %.3f ms\n", ft.extract_ms);
    free(p);
  }
  code = EXIT_OK;
done:
  ts_cm_features_clear(&ft);
  ts_sched_destroy(s);
  ts_trace_free(trace);
  ts_target_free(t);
  if (w)
    ts_workload_free(w);
  else
    ts_func_free(f);
  free_args(&a);
  return code;
}

/* ========================================================================
 * bench
 * ======================================================================== */

/* The hand-written 1024^3 schedule of docs/schedules.md: 8 x 32 register
 * tiles, a 256-deep k panel, init decomposed and vectorized, rows in
 * parallel. */
static int tiled_matmul(const ts_func *f, ts_sched **out, ts_error *err) {
  ts_sched *s;
  int rc = ts_sched_create(f, 1, &s, err);
  if (rc) return rc;
  ts_rv b, l[3], i[2], j[3], k[2], init, il[5];
  int n;
  const int64_t fi[2] = {TS_SPLIT_INFER, 8}, fj[3] = {TS_SPLIT_INFER, 8, 32},
                fk[2] = {TS_SPLIT_INFER, 256};
  if ((rc = ts_sched_get_block(s, "C", &b)) ||
      (rc = ts_sched_get_loops(s, b, l, 3, &n)) ||
      (rc = ts_sched_split(s, l[0], fi, 2, i)) ||
      (rc = ts_sched_split(s, l[1], fj, 3, j)) ||
      (rc = ts_sched_split(s, l[2], fk, 2, k)))
    goto fail;
  ts_rv order[7] = {j[0], k[0], i[0], j[1], k[1], i[1], j[2]};
  if ((rc = ts_sched_reorder(s, order, 7)) ||
      (rc = ts_sched_decompose_reduction(s, b, k[0], &init)) ||
      (rc = ts_sched_get_loops(s, init, il, 5, &n)) ||
      (rc = ts_sched_vectorize(s, il[n - 1])) ||
      (rc = ts_sched_parallel(s, i[0])) || (rc = ts_sched_unroll(s, i[1])) ||
      (rc = ts_sched_vectorize(s, j[2])))
    goto fail;
  *out = s;
  return TS_OK;
fail:
  TS_ERR(err, rc, "%s", ts_sched_errmsg(s));
  ts_sched_destroy(s);
  return rc;
}

typedef struct timing {
  double median, mean, max;
} timing;

static timing summarize(const double *v, int n) {
  timing t = {0};
  if (n == 0) return t;
  t.median = ts_median(v, n);
  for (int i = 0; i < n; i++) {
    t.mean += v[i];
    t.max = i && t.max > v[i] ? t.max : v[i];
  }
  t.mean /= n;
  return t;
}

static int cm_bench_cmd(int argc, char **argv) {
  cm_args a;
  int rc = parse_args(argc, argv, "--n --json --target", &a);
  if (rc >= 0) {
    free_args(&a);
    return rc;
  }
  int n = a.n ? (int)a.n : 200;
  ts_error err;
  ts_error_clear(&err);
  ts_workload *w = NULL;
  ts_target *t = NULL;
  ts_sched *tiled = NULL;
  ts_sched **rand_s = calloc((size_t)n, sizeof *rand_s);
  double *times = calloc((size_t)n, sizeof *times);
  ts_cm_features *feats = calloc((size_t)n, sizeof *feats);
  ts_cm_candidate *cands = calloc((size_t)n, sizeof *cands);
  double *scores = calloc((size_t)n, sizeof *scores);
  ts_cm_result *res = calloc((size_t)n, sizeof *res);
  ts_cost_model *m = NULL;
  int code = EXIT_FAIL;
  if (!rand_s || !times || !feats || !cands || !scores || !res) goto done;
  if (load_target(a.target, &t)) goto done;
  if (ts_workload_from_spec("matmul M=1024 N=1024 K=1024", &w, &err) ||
      tiled_matmul(w->func, &tiled, &err)) {
    cli_error("cannot schedule the benchmark matmul", &err);
    goto done;
  }
  /* the hand-written schedule, n times */
  int rows = 0;
  for (int i = 0; i < n; i++) {
    ts_cm_features f;
    if (ts_cm_extract(ts_sched_func(tiled), t, &f, &err)) {
      cli_error("extraction failed", &err);
      goto done;
    }
    times[i] = f.extract_ms;
    rows = f.n_rows;
    ts_cm_features_clear(&f);
  }
  timing tiled_t = summarize(times, n);
  /* n random schedules of the same workload */
  int n_rand = 0;
  for (int i = 0; i < n; i++) {
    if (ts_cm_sample_schedule(w->func, (uint64_t)i + 1, &rand_s[i], &err)) {
      cli_error("sampling failed", &err);
      goto done;
    }
    if (ts_cm_extract(ts_sched_func(rand_s[i]), t, &feats[n_rand], &err))
      continue;
    times[n_rand] = feats[n_rand].extract_ms;
    cands[n_rand] = (ts_cm_candidate){NULL, &feats[n_rand], 0};
    res[n_rand] = (ts_cm_result){true, 1e-3 * (1 + (i % 17))};
    n_rand++;
  }
  timing rand_t = summarize(times, n_rand);
  /* prediction: a model trained on these (made-up targets), then scoring
   * all of them from their functions (extraction included) */
  ts_cm_xgb_options o = ts_cm_xgb_defaults();
  o.target = t;
  o.min_samples = 1;
  o.rounds = 50;
  if (ts_cm_xgb_create(&o, &m, &err) ||
      ts_cm_update(m, cands, res, n_rand, &err) || ts_cm_xgb_train(m, &err)) {
    cli_error("training failed", &err);
    goto done;
  }
  for (int i = 0; i < n_rand; i++)
    cands[i] = (ts_cm_candidate){ts_sched_func(rand_s[i]), NULL, 0};
  double t0 = ts_now_seconds();
  if (ts_cm_predict(m, cands, n_rand, scores, &err)) {
    cli_error("prediction failed", &err);
    goto done;
  }
  double predict_ms = (ts_now_seconds() - t0) * 1e3 / (n_rand ? n_rand : 1);
  if (a.json) {
    printf("{\"n\": %d, \"tiled_extract_ms_median\": %.4f, "
           "\"tiled_extract_ms_mean\": %.4f, \"tiled_extract_ms_max\": %.4f, "
           "\"tiled_stores\": %d, \"random_extract_ms_median\": %.4f, "
           "\"random_extract_ms_mean\": %.4f, \"random_extract_ms_max\": "
           "%.4f, \"predict_ms_per_candidate\": %.4f}\n",
           n, tiled_t.median, tiled_t.mean, tiled_t.max, rows, rand_t.median,
           rand_t.mean, rand_t.max, predict_ms);
  } else {
    printf("costmodel bench: feature extraction of a 1024^3 fp32 matmul "
           "(lowering included), %d runs each\n",
           n);
    printf("  %-34s %9s %9s %9s\n", "candidate", "median ms", "mean ms",
           "max ms");
    printf("  %-34s %9.4f %9.4f %9.4f\n", "hand-written schedule (2 stores)",
           tiled_t.median, tiled_t.mean, tiled_t.max);
    printf("  %-34s %9.4f %9.4f %9.4f\n", "random schedules of the space",
           rand_t.median, rand_t.mean, rand_t.max);
    printf("  prediction (extraction + XGBoost, batch of %d): %.4f ms per "
           "candidate\n",
           n_rand, predict_ms);
    printf("  target: under 1 ms per candidate\n");
  }
  code = EXIT_OK;
done:
  ts_cm_destroy(m);
  for (int i = 0; rand_s && i < n; i++) ts_sched_destroy(rand_s[i]);
  for (int i = 0; feats && i < n; i++) ts_cm_features_clear(&feats[i]);
  free(rand_s);
  free(times);
  free(feats);
  free(cands);
  free(scores);
  free(res);
  ts_sched_destroy(tiled);
  ts_workload_free(w);
  ts_target_free(t);
  free_args(&a);
  return code;
}

/* ========================================================================
 * collect
 * ======================================================================== */

typedef struct seen_set {
  ts_hash128 *h;
  int n, cap;
} seen_set;

static bool seen_add(seen_set *s, ts_hash128 h) {
  for (int i = 0; i < s->n; i++)
    if (ts_hash128_eq(s->h[i], h)) return false;
  if (s->n == s->cap) {
    int cap = s->cap ? 2 * s->cap : 256;
    ts_hash128 *p = realloc(s->h, sizeof *p * (size_t)cap);
    if (!p) return false;
    s->h = p;
    s->cap = cap;
  }
  s->h[s->n++] = h;
  return true;
}

/* Collects n records of one workload. */
static int collect_workload(ts_db *db, ts_runner *runner, const ts_target *t,
                            const cm_args *a, const char *spec, int index,
                            int64_t counts[TS_DB_N_STATUS]) {
  ts_error err;
  ts_error_clear(&err);
  ts_workload *w = NULL;
  ts_build_result ref = {0};
  ts_build_options bo = ts_build_defaults();
  int code = EXIT_FAIL;
  int batch = (int)a->batch;
  ts_sched **c = calloc((size_t)batch, sizeof *c);
  const ts_func **fs = calloc((size_t)batch, sizeof *fs);
  ts_artifact **arts = calloc((size_t)batch, sizeof *arts);
  char(*why)[TS_MEASURE_ERROR_MAX] = calloc((size_t)batch, sizeof *why);
  ts_measure_result *res = calloc((size_t)batch, sizeof *res);
  ts_db_measurement *ms = calloc((size_t)batch, sizeof *ms);
  char **jsons = calloc((size_t)batch, sizeof *jsons);
  char **hows = calloc((size_t)batch, sizeof *hows);
  seen_set seen = {0};
  int64_t wid;
  char ref_id[33];
  if (!c || !fs || !arts || !why || !res || !ms || !jsons || !hows) goto done;
  if (ts_workload_from_spec(spec, &w, &err)) {
    cli_error("bad workload spec", &err);
    goto done;
  }
  if (ts_db_commit_workload(db, w->func, w->name, &wid)) {
    fprintf(stderr, "tessera: error: cannot store the workload: %s\n",
            ts_db_errmsg(db));
    goto done;
  }
  ts_hash128_hex(ts_func_hash(w->func), ref_id);
  if (ts_build(w->func, t, &bo, &ref, &err) ||
      ts_runner_set_reference(runner, ref_id, ref.artifact, &err)) {
    cli_error("cannot build the reference", &err);
    goto done;
  }
  ts_measure_config cfg = ts_measure_config_default();
  cfg.eval.number = 1;
  cfg.eval.repeat = (int)a->repeat;
  cfg.eval.min_repeat_ms = (int)a->min_repeat_ms;
  cfg.eval.warmup = 1;
  cfg.timeout_ms = (int)a->timeout_ms;
  cfg.threads = (int)a->threads;
  cfg.seed = 1;
  /* what each record says it was measured with: the thread count resolved */
  ts_measure_config ctx_cfg = cfg;
  if (ctx_cfg.threads <= 0) ctx_cfg.threads = ts_target_num_cores(t);
  ts_rng rng;
  ts_rng_seed(&rng, a->seed * 0x9e3779b97f4a7c15ull + (uint64_t)index);
  double t0 = ts_now_seconds();
  bool tty = isatty(2);
  long done_n = 0;
  int64_t ok = 0;
  char first_error[256] = "";
  while (done_n < a->n) {
    int m = 0, tries = 0;
    while (m < batch && done_n + m < a->n && tries < 20 * batch) {
      tries++;
      ts_sched *s;
      if (ts_cm_sample_schedule(w->func, ts_rng_next(&rng), &s, &err)) {
        cli_error("cannot sample a schedule", &err);
        goto done;
      }
      if (!seen_add(&seen, ts_func_hash(ts_sched_func(s)))) {
        ts_sched_destroy(s); /* measured already */
        continue;
      }
      c[m++] = s;
    }
    if (m == 0) break; /* the space is exhausted */
    /* built as a tuning job builds: in forked processes, each under the
     * job's time limit, so a build that hangs or crashes fails alone */
    for (int i = 0; i < m; i++) fs[i] = ts_sched_func(c[i]);
    ts_build_batch(fs, m, t, 0, ts_target_num_cores(t),
                   ts_tune_defaults().build_timeout_ms, arts, why);
    if (ts_runner_measure(runner, &cfg, ref_id, arts, m, res, &err)) {
      cli_error("measurement failed", &err);
      goto done;
    }
    for (int i = 0; i < m; i++) {
      jsons[i] = ts_trace_to_json(ts_sched_trace(c[i]));
      ts_db_status st = (ts_db_status)res[i].status;
      const char *error = res[i].error;
      if (!arts[i]) {
        st = TS_DB_STATUS_BUILD_ERROR;
        error = why[i];
      }
      ms[i] = (ts_db_measurement){
          .workload_id = wid,
          .target = ts_target_str(t),
          .trace_json = jsons[i],
          .run_secs = res[i].seconds,
          .n_run_secs = st == TS_DB_STATUS_OK ? res[i].n_seconds : 0,
          .status = st,
          .error = error,
          .worker = res[i].worker,
          .measure_json = hows[i] =
              ts_measure_context_json(&ctx_cfg, res[i].cpus),
      };
      counts[st]++;
      ok += st == TS_DB_STATUS_OK;
      if (st != TS_DB_STATUS_OK && !first_error[0])
        snprintf(first_error, sizeof first_error, "%s: %.200s",
                 ts_db_status_name(st), error ? error : "");
    }
    int crc = ts_db_commit_records(db, ms, m, NULL);
    for (int i = 0; i < m; i++) {
      free(jsons[i]);
      jsons[i] = NULL;
      free(hows[i]);
      hows[i] = NULL;
      ts_artifact_release(arts[i]);
      arts[i] = NULL;
      ts_sched_destroy(c[i]);
      c[i] = NULL;
    }
    if (crc) {
      fprintf(stderr, "tessera: error: cannot store the records: %s\n",
              ts_db_errmsg(db));
      goto done;
    }
    done_n += m;
    if (tty || done_n >= a->n)
      fprintf(stderr, "%s  %-40.40s %6ld / %ld  ok %6lld  %6.1f s",
              tty ? "\r" : "", w->name, done_n, a->n, (long long)ok,
              ts_now_seconds() - t0);
  }
  fprintf(stderr, "\n");
  if (ok == 0) { /* the records are kept: they say what went wrong */
    fprintf(stderr,
            "tessera: error: no candidate of %s was measured successfully "
            "(the first failure: %s)\n",
            w->name, first_error);
    goto done;
  }
  code = EXIT_OK;
done:
  for (int i = 0; c && i < batch; i++) {
    if (arts) ts_artifact_release(arts[i]);
    ts_sched_destroy(c[i]);
  }
  for (int i = 0; jsons && i < batch; i++) free(jsons[i]);
  for (int i = 0; hows && i < batch; i++) free(hows[i]);
  ts_build_result_clear(&ref);
  ts_workload_free(w);
  free(seen.h);
  free(c);
  free(fs);
  free(arts);
  free(why);
  free(res);
  free(ms);
  free(jsons);
  free(hows);
  return code;
}

static int cm_collect_cmd(int argc, char **argv) {
  cm_args a;
  int rc = parse_args(argc, argv,
                      "--db --workload --n --seed --batch --threads "
                      "--timeout-ms --target --repeat --min-repeat-ms",
                      &a);
  if (rc >= 0) {
    free_args(&a);
    return rc;
  }
  if (!a.db || !a.n_specs || !a.n) {
    free_args(&a);
    return cli_usage_error("costmodel collect",
                           "--db, at least one --workload and --n are needed");
  }
  ts_runner *runner = NULL;
  ts_target *t = NULL;
  ts_db *db = NULL;
  ts_error err;
  ts_error_clear(&err);
  int code = EXIT_FAIL;
  signal(SIGPIPE, SIG_IGN);
  /* the pool forks its helper before any thread starts */
  ts_device_options dev = ts_device_defaults();
  if (ts_runner_embedded_create(&dev, &runner, &err)) {
    cli_error("cannot start the embedded pool", &err);
    goto done;
  }
  if (load_target(a.target, &t)) goto done;
  if (ts_target_check_runs_here(t, "collect", &err)) {
    fprintf(stderr, "tessera: error: %s\n", err.msg);
    goto done;
  }
  ts_db_options o = ts_db_defaults();
  o.check_trace = ts_trace_check_json;
  if (ts_db_open(a.db, &o, &db, &err)) {
    cli_error("cannot open the database", &err);
    goto done;
  }
  int64_t counts[TS_DB_N_STATUS] = {0};
  double t0 = ts_now_seconds();
  fprintf(stderr, "collecting %ld random schedules of %d workload%s into %s\n",
          a.n, a.n_specs, a.n_specs == 1 ? "" : "s", a.db);
  for (int i = 0; i < a.n_specs; i++)
    if (collect_workload(db, runner, t, &a, a.specs[i], i, counts)) goto done;
  int64_t total = 0;
  for (int s = 0; s < TS_DB_N_STATUS; s++) total += counts[s];
  printf("collected %lld records in %.1f s:", (long long)total,
         ts_now_seconds() - t0);
  for (int s = 0; s < TS_DB_N_STATUS; s++)
    if (counts[s])
      printf(" %s %lld", ts_db_status_name((ts_db_status)s),
             (long long)counts[s]);
  printf("\n");
  code = EXIT_OK;
done:
  ts_db_close(db);
  ts_runner_destroy(runner);
  ts_target_free(t);
  free_args(&a);
  return code;
}

/* ========================================================================
 * eval and train
 * ======================================================================== */

static ts_cm_xgb_options model_options(const cm_args *a) {
  ts_cm_xgb_options o = ts_cm_xgb_defaults();
  o.objective = a->objective;
  o.seed = a->seed;
  o.nthread = (int)a->nthread;
  o.min_samples = 1; /* train when told to */
  return o;
}

/* Trains a model on the candidates with in_train[i] and scores the others
 * into scores (NAN for training candidates). */
static int train_and_score(const ts_cm_dataset *ds, const bool *in_train,
                           const ts_cm_xgb_options *o, double *scores,
                           double *train_ms, ts_error *err) {
  ts_cost_model *m = NULL;
  int n_train = 0, n_test = 0;
  ts_cm_candidate *c = malloc(sizeof *c * (size_t)ds->n);
  ts_cm_result *r = malloc(sizeof *r * (size_t)ds->n);
  double *s = malloc(sizeof *s * (size_t)ds->n);
  int *test = malloc(sizeof *test * (size_t)ds->n);
  int rc = c && r && s && test ? TS_OK : TS_ENOMEM;
  if (rc) {
    TS_ERR(err, rc, "out of memory");
    goto done;
  }
  for (int i = 0; i < ds->n; i++)
    if (in_train[i]) {
      c[n_train] = ds->candidates[i];
      r[n_train++] = ds->results[i];
    }
  if ((rc = ts_cm_xgb_create(o, &m, err)) ||
      (rc = ts_cm_update(m, c, r, n_train, err)))
    goto done;
  ts_cm_info info;
  ts_cm_info_get(m, &info);
  if (!info.trained && (rc = ts_cm_xgb_train(m, err))) goto done;
  ts_cm_info_get(m, &info);
  *train_ms += info.total_train_ms;
  for (int i = 0; i < ds->n; i++) {
    scores[i] = NAN;
    if (!in_train[i]) {
      c[n_test] = ds->candidates[i];
      test[n_test++] = i;
    }
  }
  if ((rc = ts_cm_predict(m, c, n_test, s, err))) goto done;
  for (int k = 0; k < n_test; k++) scores[test[k]] = s[k];
done:
  ts_cm_destroy(m);
  free(c);
  free(r);
  free(s);
  free(test);
  return rc;
}

/* Adds the held-out candidates (in `order`) with finite scores to acc. */
/* Adds the held-out candidates (in `order`, finite scores) of group `only`
 * (-1: every group) to acc. */
static void add_fold(ts_cm_metrics_acc *acc, const ts_cm_dataset *ds,
                     const int *order, const double *scores,
                     const double *targets, int batch, int only) {
  double *s = malloc(sizeof *s * (size_t)ds->n);
  double *t = malloc(sizeof *t * (size_t)ds->n);
  int64_t *g = malloc(sizeof *g * (size_t)ds->n);
  int k = 0;
  for (int i = 0; s && t && g && i < ds->n; i++) {
    int j = order[i];
    if (isnan(scores[j])) continue;
    if (only >= 0 && ds->candidates[j].group != only) continue;
    s[k] = scores[j];
    t[k] = targets[j];
    g[k++] = ds->candidates[j].group;
  }
  if (s && t && g) ts_cm_metrics_add(acc, s, t, g, k, batch);
  free(s);
  free(t);
  free(g);
}

static void print_metrics_json(const char *prefix, const ts_cm_metrics *m) {
  printf("\"%srecords\": %lld, \"%spairwise_accuracy\": %.4f, "
         "\"%stop1_recall\": %.4f, \"%stop8_recall\": %.4f, "
         "\"%sspearman\": %.4f",
         prefix, (long long)m->records, prefix, m->pairwise_accuracy, prefix,
         m->top1_recall, prefix, m->top8_recall, prefix, m->spearman);
}

static int cm_eval_cmd(int argc, char **argv) {
  cm_args a;
  int rc = parse_args(argc, argv,
                      "--db --workload --folds --split --objective --model "
                      "--seed --threads --nthread --batch --json",
                      &a);
  if (a.threads) a.nthread = a.threads; /* XGBoost's threads */
  if (rc >= 0) {
    free_args(&a);
    return rc;
  }
  if (!a.db) {
    free_args(&a);
    return cli_usage_error("costmodel eval", "--db PATH is needed");
  }
  bool by_workload = a.split && !strcmp(a.split, "workload");
  ts_db *db = NULL;
  ts_cm_dataset *ds = NULL;
  ts_cost_model *loaded = NULL, *random = NULL;
  ts_error err;
  ts_error_clear(&err);
  int code = EXIT_FAIL;
  double *targets = NULL, *scores = NULL, *rscores = NULL;
  int *order = NULL, *fold = NULL;
  bool *in_train = NULL;
  ts_cm_metrics_acc acc = {0}, racc = {0};
  ts_cm_metrics_acc *per = NULL, *rper = NULL; /* per group */
  double train_ms = 0;
  int n_folds = 0;
  if (open_db(a.db, true, &db)) goto done;
  double t0 = ts_now_seconds();
  if (ts_cm_dataset_from_db(db, a.workload, &ds, &err)) {
    cli_error("cannot read the records", &err);
    goto done;
  }
  double read_s = ts_now_seconds() - t0;
  if (ds->n < 2) {
    fprintf(stderr,
            "tessera: error: %s holds %d usable record%s%s: nothing to "
            "evaluate (collect some with `tessera costmodel collect`)\n",
            a.db, ds->n, ds->n == 1 ? "" : "s",
            a.workload ? " of that workload" : "");
    goto done;
  }
  if (by_workload && ds->n_groups < 2 && !a.model) {
    fprintf(stderr, "tessera: error: --split workload needs records of at "
                    "least two workloads\n");
    goto done;
  }
  int n = ds->n;
  targets = malloc(sizeof *targets * (size_t)n);
  scores = malloc(sizeof *scores * (size_t)n);
  rscores = malloc(sizeof *rscores * (size_t)n);
  order = malloc(sizeof *order * (size_t)n);
  fold = malloc(sizeof *fold * (size_t)n);
  in_train = malloc(sizeof *in_train * (size_t)n);
  int64_t *groups = malloc(sizeof *groups * (size_t)n);
  if (!targets || !scores || !rscores || !order || !fold || !in_train ||
      !groups) {
    free(groups);
    goto done;
  }
  for (int i = 0; i < n; i++) groups[i] = ds->candidates[i].group;
  ts_cm_targets(groups, ds->results, n, targets);
  free(groups);
  /* a seeded shuffle; folds deal each group's records round-robin */
  ts_rng rng;
  ts_rng_seed(&rng, a.seed);
  for (int i = 0; i < n; i++) order[i] = i;
  for (int i = n - 1; i > 0; i--) {
    int j = (int)ts_rng_below(&rng, (uint64_t)i + 1);
    int x = order[i];
    order[i] = order[j];
    order[j] = x;
  }
  int *dealt = calloc((size_t)ds->n_groups, sizeof *dealt);
  if (!dealt) goto done;
  for (int k = 0; k < n; k++) {
    int i = order[k];
    int g = (int)ds->candidates[i].group;
    fold[i] = by_workload ? g : dealt[g]++ % (int)a.folds;
  }
  free(dealt);
  n_folds = a.model ? 1 : by_workload ? ds->n_groups : (int)a.folds;
  per = calloc((size_t)ds->n_groups, sizeof *per);
  rper = calloc((size_t)ds->n_groups, sizeof *rper);
  if (!per || !rper) goto done;
  ts_cm_xgb_options o = model_options(&a);
  if (ts_cm_random_create(a.seed, &random, &err)) goto done;
  if (a.model) {
    if (ts_cm_load(a.model, &o, &loaded, &err)) {
      cli_error("cannot load the model", &err);
      goto done;
    }
  }
  for (int f = 0; f < n_folds; f++) {
    int n_test = 0;
    for (int i = 0; i < n; i++) {
      in_train[i] = !a.model && fold[i] != f;
      n_test += !in_train[i];
    }
    if (n_test == 0) continue;
    if (a.model) {
      ts_cm_candidate *c = malloc(sizeof *c * (size_t)n);
      if (!c) goto done;
      for (int i = 0; i < n; i++) c[i] = ds->candidates[i];
      rc = ts_cm_predict(loaded, c, n, scores, &err);
      free(c);
      if (rc) {
        cli_error("prediction failed", &err);
        goto done;
      }
    } else if (train_and_score(ds, in_train, &o, scores, &train_ms, &err)) {
      cli_error("training failed", &err);
      goto done;
    }
    for (int i = 0; i < n; i++) {
      rscores[i] = NAN;
      if (!in_train[i]) {
        double r;
        ts_cm_predict(random, &ds->candidates[i], 1, &r, &err);
        rscores[i] = r;
      }
    }
    add_fold(&acc, ds, order, scores, targets, (int)a.batch, -1);
    add_fold(&racc, ds, order, rscores, targets, (int)a.batch, -1);
    for (int g = 0; g < ds->n_groups; g++) {
      add_fold(&per[g], ds, order, scores, targets, (int)a.batch, g);
      add_fold(&rper[g], ds, order, rscores, targets, (int)a.batch, g);
    }
    if (!a.json && isatty(2))
      fprintf(stderr, "\r  fold %d / %d", f + 1, n_folds);
  }
  if (!a.json && isatty(2)) fprintf(stderr, "\n");
  ts_cm_metrics xm = ts_cm_metrics_of(&acc), rm = ts_cm_metrics_of(&racc);
  const char *how = a.model       ? "a saved model"
                    : by_workload ? "leave-one-workload-out"
                                  : "k-fold";
  if (a.json) {
    printf("{");
    print_metrics_json("", &xm);
    printf(", ");
    print_metrics_json("random_", &rm);
    printf(", \"workloads\": [");
    for (int g = 0; g < ds->n_groups; g++) {
      ts_cm_metrics wm = ts_cm_metrics_of(&per[g]);
      ts_cm_metrics wr = ts_cm_metrics_of(&rper[g]);
      printf("%s{\"name\": ", g ? ", " : "");
      cli_json_string(stdout, ds->group_names[g]);
      printf(", ");
      print_metrics_json("", &wm);
      printf(", ");
      print_metrics_json("random_", &wr);
      printf("}");
    }
    printf("]");
    printf(", \"pairs\": %lld, \"batches\": %lld, \"groups\": %d, "
           "\"skipped\": %lld, \"merged\": %lld, \"objective\": \"%s\", "
           "\"split\": \"%s\", "
           "\"folds\": %d, \"train_seconds\": %.3f, \"features_seconds\": "
           "%.3f}\n",
           (long long)xm.pairs, (long long)xm.batches, ds->n_groups,
           (long long)ds->skipped, (long long)ds->merged,
           ts_cm_objective_name(a.objective),
           a.model       ? "model"
           : by_workload ? "workload"
                         : "random",
           n_folds, train_ms / 1e3, read_s);
  } else {
    int64_t ok = 0;
    for (int i = 0; i < n; i++) ok += ds->results[i].ok;
    printf("costmodel eval: %d candidates (%lld ok) of %d workload group%s in "
           "%s; %lld records skipped, %lld repeated measurements merged\n",
           n, (long long)ok, ds->n_groups, ds->n_groups == 1 ? "" : "s", a.db,
           (long long)ds->skipped, (long long)ds->merged);
    if (a.model)
      printf("  model %s, scored on every record\n", a.model);
    else
      printf("  %s, %d folds, objective %s; training %.2f s in all; "
             "replay + features %.2f s\n",
             how, n_folds, ts_cm_objective_name(a.objective), train_ms / 1e3,
             read_s);
    printf("  %-20s %10s %10s\n", "held-out figure", "xgboost", "random");
    printf("  %-20s %10.4f %10.4f   (%lld pairs)\n", "pairwise accuracy",
           xm.pairwise_accuracy, rm.pairwise_accuracy, (long long)xm.pairs);
    printf("  %-20s %10.4f %10.4f   (%lld batches of <= %ld)\n", "top-1 recall",
           xm.top1_recall, rm.top1_recall, (long long)xm.batches, a.batch);
    printf("  %-20s %10.4f %10.4f\n", "top-8 recall", xm.top8_recall,
           rm.top8_recall);
    printf("  %-20s %10.4f %10.4f\n", "spearman", xm.spearman, rm.spearman);
    printf("  per workload (xgboost / random):\n");
    printf("  %-44s %7s %15s %15s %15s\n", "workload", "records", "pairwise",
           "top-8 recall", "spearman");
    for (int g = 0; g < ds->n_groups; g++) {
      ts_cm_metrics wm = ts_cm_metrics_of(&per[g]);
      ts_cm_metrics wr = ts_cm_metrics_of(&rper[g]);
      printf("  %-44.44s %7lld %7.4f/%.4f %7.4f/%.4f %7.4f/%.4f\n",
             ds->group_names[g], (long long)wm.records, wm.pairwise_accuracy,
             wr.pairwise_accuracy, wm.top8_recall, wr.top8_recall, wm.spearman,
             wr.spearman);
    }
  }
  code = EXIT_OK;
done:
  free(per);
  free(rper);
  free(targets);
  free(scores);
  free(rscores);
  free(order);
  free(fold);
  free(in_train);
  ts_cm_destroy(loaded);
  ts_cm_destroy(random);
  ts_cm_dataset_free(ds);
  ts_db_close(db);
  free_args(&a);
  return code;
}

static int cm_train_cmd(int argc, char **argv) {
  cm_args a;
  int rc = parse_args(argc, argv,
                      "--db --output --out --workload --exclude --objective "
                      "--seed --threads --nthread",
                      &a);
  if (a.threads) a.nthread = a.threads; /* XGBoost's threads */
  if (rc >= 0) {
    free_args(&a);
    return rc;
  }
  if (!a.db || !a.out || (a.workload && a.exclude)) {
    free_args(&a);
    return cli_usage_error("costmodel train",
                           "--db and -o/--output are needed; --workload and "
                           "--exclude exclude each other");
  }
  ts_db *db = NULL;
  ts_cm_dataset *ds = NULL;
  ts_cost_model *m = NULL;
  ts_cm_candidate *c = NULL;
  ts_cm_result *r = NULL;
  ts_error err;
  ts_error_clear(&err);
  int code = EXIT_FAIL;
  int64_t excluded = 0;
  if (open_db(a.db, true, &db)) goto done;
  if (a.exclude && ts_db_resolve_workload(db, a.exclude, &excluded)) {
    fprintf(stderr, "tessera: error: --exclude: %s\n", ts_db_errmsg(db));
    goto done;
  }
  if (ts_cm_dataset_from_db(db, a.workload, &ds, &err)) {
    cli_error("cannot read the records", &err);
    goto done;
  }
  c = malloc(sizeof *c * (size_t)(ds->n ? ds->n : 1));
  r = malloc(sizeof *r * (size_t)(ds->n ? ds->n : 1));
  if (!c || !r) goto done;
  int k = 0;
  for (int i = 0; i < ds->n; i++) {
    if (excluded && ds->group_workload[ds->candidates[i].group] == excluded)
      continue;
    c[k] = ds->candidates[i];
    r[k++] = ds->results[i];
  }
  ts_cm_xgb_options o = model_options(&a);
  if (ts_cm_xgb_create(&o, &m, &err) || ts_cm_update(m, c, r, k, &err) ||
      ts_cm_xgb_train(m, &err) || ts_cm_save(m, a.out, &err)) {
    cli_error("cannot train the model", &err);
    goto done;
  }
  ts_cm_info info;
  ts_cm_info_get(m, &info);
  printf("trained on %d records (%lld store rows) in %.2f s, objective %s; "
         "saved %s\n",
         k, (long long)info.n_rows, info.total_train_ms / 1e3,
         ts_cm_objective_name(a.objective), a.out);
  code = EXIT_OK;
done:
  free(c);
  free(r);
  ts_cm_destroy(m);
  ts_cm_dataset_free(ds);
  ts_db_close(db);
  free_args(&a);
  return code;
}

int cmd_costmodel(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    fputs(cm_usage, argc < 2 ? stderr : stdout);
    return argc < 2 ? EXIT_USAGE : EXIT_OK;
  }
  const char *sub = argv[1];
  for (int i = 2; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      cli_sub_help(cm_usage, "costmodel", sub, "[options]");
      return EXIT_OK;
    }
  if (!strcmp(sub, "features")) return cm_features_cmd(argc - 1, argv + 1);
  if (!strcmp(sub, "bench")) return cm_bench_cmd(argc - 1, argv + 1);
  if (!strcmp(sub, "collect")) return cm_collect_cmd(argc - 1, argv + 1);
  if (!strcmp(sub, "eval")) return cm_eval_cmd(argc - 1, argv + 1);
  if (!strcmp(sub, "train")) return cm_train_cmd(argc - 1, argv + 1);
  return cli_usage_error("costmodel",
                         "unknown command '%s' (expected features, bench, "
                         "collect, eval or train)",
                         sub);
}
