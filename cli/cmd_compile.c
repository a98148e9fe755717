/*
 * cmd_compile.c — `tessera compile`: an ONNX model into a shared library.
 * Imports the model, runs the graph passes, and hands the graph to
 * ts_graph_compile with the tuning database (each task's best record for
 * the target, the default schedule otherwise); prints the per-task table,
 * the arena next to its lower bound and the sum of the intermediates, and
 * the time of each phase.
 */
#include "cli.h"

#include "graph/graph.h"
#include "tir/alloc.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char compile_usage[] =
    "usage: tessera compile MODEL.onnx -o MODEL.so [--db PATH] [--target T]\n"
    "                       [--input-shape NAME=DIMS]... [--threads N]\n"
    "                       [--layout L] [--input-layout L]\n"
    "                       [--output-layout L] [--no-winograd]\n"
    "                       [--dispatch best|tuned|vendor] [--no-prepack]\n"
    "                       [--extern TASK=FILE:FUNCTION]...\n"
    "                       [--quantize PROFILE.json [--calibration C]\n"
    "                       [--per-tensor] [--keep-float OP]...]\n"
    "                       [--runtime-dir DIR]\n"
    "                       [--json]\n"
    "\n"
    "Compiles a whole model into a shared library with the C interface of\n"
    "include/tessera/model.h (run it with `tessera run`). Each task (fused\n"
    "group) gets the best schedule in the database for exactly this target,\n"
    "or the default schedule when it has none (one warning lists those, with\n"
    "the command that tunes them).\n"
    "\n"
    "  -o, --output FILE   the library to write (written whole or not at all)\n"
    "  --db PATH           tuning database (default: none, default schedules)\n"
    "  --target T          target string (default: llvm, this machine); the\n"
    "                      graph's MatMul weight panels follow it, so tune\n"
    "                      the model for the same target\n"
    "  --layout L          2-D convolutions channels-last (nhwc, default:\n"
    "                      one transpose at the input), as the model gives\n"
    "                      them (nchw), channel-blocked where a conv can be\n"
    "                      (blocked) or NHWC or blocked per conv by the\n"
    "                      database's latencies (auto; docs/graph.md)\n"
    "  --no-winograd       3x3 convolutions direct, not by Winograd's\n"
    "                      F(2x2, 3x3) (docs/graph.md)\n"
    "  --dispatch best|tuned|vendor\n"
    "                      who runs the tasks a vendor library can run\n"
    "                      (convolutions and matrix products with their\n"
    "                      epilogues): the faster by the database's\n"
    "                      measurements (best, default: oneDNN where `tune\n"
    "                      --model` measured it faster), tessera's kernels\n"
    "                      (tuned) or oneDNN (vendor); a library that calls\n"
    "                      oneDNN links libtessera_dnnl\n"
    "  --no-prepack        run every stage of every kernel at run time; by\n"
    "                      default a kernel's stages that compute only from\n"
    "                      weights (packing them into its tile layout,\n"
    "                      their column sums) run once, at compile time, and\n"
    "                      the library holds their results (docs/graph.md)\n"
    "  --extern TASK=FILE:FUNCTION\n"
    "                      run your own C function instead of a task's\n"
    "                      kernel: TASK is the task's hash or the name of a\n"
    "                      call of it (`tessera graph tasks|show`), FILE a\n"
    "                      .c (compiled with the library), .o or .a, and\n"
    "                      FUNCTION has the kernels' signature, int32_t\n"
    "                      FUNCTION(void *const *args, void *rt), args the\n"
    "                      task's parameters in order (docs/graph.md)\n"
    "  --input-layout nchw|nhwc, --output-layout nchw|nhwc\n"
    "                      the 4-D inputs / outputs as the model declares\n"
    "                      them (nchw, default) or channels-last (nhwc: no\n"
    "                      transpose at that edge; same names, permuted\n"
    "                      shapes)\n"
    "  --input-shape NAME=DIMS  fix a graph input's dimensions, e.g.\n"
    "                      input_ids=1x128 (needed for symbolic dimensions)\n"
    "  --threads N         kernels built at once (default: the online cores)\n"
    "  --runtime-dir DIR   folder of libtessera_rt.so (default: next to this\n"
    "                      program, or its ../lib)\n"
    "  --shape-buckets SYMBOL=S1,S2,...\n"
    "                      one library for every size of the model's dynamic\n"
    "                      dimension SYMBOL up to the largest: a program per\n"
    "                      size (each tuned by `tune --shape-buckets`), a "
    "size\n"
    "                      running on the smallest that holds it, its inputs\n"
    "                      padded (ts_model_set_dim; docs/graph.md)\n"
    "  --dim-max SYMBOL=N  serve sizes up to N too: one more program at N\n"
    "                      (default schedules where it has no records)\n"
    "  --json              print the report as JSON\n"
    "\n"
    "Exit status: 0 written, 1 failure (bad model, a graph operator that is\n"
    "not compiled yet, link error), 2 usage error.\n";

static double mib(int64_t b) { return (double)b / (1024.0 * 1024.0); }

static void print_text(const ts_graph_compile_report *r, const char *model,
                       const char *output) {
  printf("# %s -> %s\n# target: %s\n", model, output, r->target);
  printf("# %d distinct tasks, %d kernel calls\n", r->n_tasks, r->n_calls);
  printf("%-32s %5s %-8s %12s  %s\n", "task hash", "calls", "source",
         "latency(us)", "function (first node)");
  for (int i = 0; i < r->n_tasks; i++) {
    const ts_graph_compile_task *t = &r->tasks[i];
    char lat[32];
    if (isnan(t->latency_s))
      snprintf(lat, sizeof lat, "-");
    else
      snprintf(lat, sizeof lat, "%.1f", t->latency_s * 1e6);
    printf("%s %5d %-8s %12s  %s (%s)\n", t->hash, t->count, t->source, lat,
           t->name, t->first_node);
  }
  for (int i = 0; i < r->n_tasks; i++)
    if (r->tasks[i].dispatch_note)
      printf("dispatch: %s %s: %s\n", r->tasks[i].hash, r->tasks[i].name,
             r->tasks[i].dispatch_note);
  int n_len = 0, n_kernels = 0, n_loops = 0;
  for (int i = 0; i < r->n_tasks; i++) {
    n_kernels += strcmp(r->tasks[i].source, "vendor") != 0;
    n_len += r->tasks[i].length_loops > 0;
    n_loops += r->tasks[i].length_loops;
  }
  if (n_len)
    printf("length: %d of %d kernels cut %d loops to the run-time length\n",
           n_len, n_kernels, n_loops);
  int n_pre = 0;
  int64_t pre_bytes = 0;
  for (int i = 0; i < r->n_tasks; i++) {
    n_pre += r->tasks[i].prepacked > 0;
    pre_bytes += r->tasks[i].prepacked_bytes;
  }
  if (n_pre)
    printf("prepacked: %d of %d kernels read weights prepared at compile "
           "time (%.2f MiB, %.2f s)\n",
           n_pre, n_kernels, mib(pre_bytes), r->prepack_ms / 1e3);
  printf("arena: %.2f MiB (lower bound %.2f MiB, intermediates %.2f MiB in "
         "all); weights %.2f MiB\n",
         mib(r->arena_bytes), mib(r->lower_bound_bytes), mib(r->total_bytes),
         mib(r->constant_bytes));
  double total = r->import_ms + r->passes_ms + r->plan_ms + r->lookup_ms +
                 r->codegen_ms + r->prepack_ms + r->link_ms;
  printf("time: import %.2f s, passes %.2f s, plan %.3f s, lookups %.3f s, "
         "codegen %.2f s, prepack %.2f s, link %.2f s, total %.2f s\n",
         r->import_ms / 1e3, r->passes_ms / 1e3, r->plan_ms / 1e3,
         r->lookup_ms / 1e3, r->codegen_ms / 1e3, r->prepack_ms / 1e3,
         r->link_ms / 1e3, total / 1e3);
  printf("wrote %s (%.2f MiB)\n", output, mib(r->library_bytes));
}

static cJSON *report_json(const ts_graph_compile_report *r, const char *model,
                          const char *output) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "model", model);
  cJSON_AddStringToObject(root, "output", output);
  cJSON_AddStringToObject(root, "target", r->target);
  cJSON_AddNumberToObject(root, "calls", r->n_calls);
  cJSON *arr = cJSON_AddArrayToObject(root, "tasks");
  for (int i = 0; i < r->n_tasks; i++) {
    const ts_graph_compile_task *t = &r->tasks[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "hash", t->hash);
    cJSON_AddStringToObject(o, "name", t->name);
    cJSON_AddStringToObject(o, "first_node", t->first_node);
    cJSON_AddNumberToObject(o, "count", t->count);
    cJSON_AddNumberToObject(o, "flops", t->flops);
    cJSON_AddStringToObject(o, "source", t->source);
    if (t->record_id)
      cJSON_AddNumberToObject(o, "record", (double)t->record_id);
    if (isnan(t->latency_s))
      cJSON_AddNullToObject(o, "latency_s");
    else
      cJSON_AddNumberToObject(o, "latency_s", t->latency_s);
    if (t->fallback_note)
      cJSON_AddStringToObject(o, "fallback", t->fallback_note);
    if (t->length_loops)
      cJSON_AddNumberToObject(o, "length_loops", t->length_loops);
    if (t->dispatch_note)
      cJSON_AddStringToObject(o, "dispatch", t->dispatch_note);
    if (t->prepacked) {
      cJSON_AddNumberToObject(o, "prepacked", t->prepacked);
      cJSON_AddNumberToObject(o, "prepacked_bytes", (double)t->prepacked_bytes);
    }
    ts_json_add(arr, NULL, o);
  }
  cJSON *a = cJSON_AddObjectToObject(root, "memory");
  cJSON_AddNumberToObject(a, "arena_bytes", (double)r->arena_bytes);
  cJSON_AddNumberToObject(a, "lower_bound_bytes", (double)r->lower_bound_bytes);
  cJSON_AddNumberToObject(a, "intermediate_bytes", (double)r->total_bytes);
  cJSON_AddNumberToObject(a, "constant_bytes", (double)r->constant_bytes);
  cJSON_AddNumberToObject(a, "library_bytes", (double)r->library_bytes);
  cJSON *tm = cJSON_AddObjectToObject(root, "seconds");
  cJSON_AddNumberToObject(tm, "import", r->import_ms / 1e3);
  cJSON_AddNumberToObject(tm, "passes", r->passes_ms / 1e3);
  cJSON_AddNumberToObject(tm, "plan", r->plan_ms / 1e3);
  cJSON_AddNumberToObject(tm, "lookups", r->lookup_ms / 1e3);
  cJSON_AddNumberToObject(tm, "codegen", r->codegen_ms / 1e3);
  cJSON_AddNumberToObject(tm, "link", r->link_ms / 1e3);
  cJSON_AddNumberToObject(tm, "prepack", r->prepack_ms / 1e3);
  if (r->warning)
    cJSON_AddStringToObject(root, "warning", r->warning);
  else
    cJSON_AddNullToObject(root, "warning");
  return root;
}

static void print_json(const ts_graph_compile_report *r, const char *model,
                       const char *output) {
  cli_print_json(report_json(r, model, output));
}

#define MAX_BUCKETS 17

/* --shape-buckets: the model imported at each padded size, compiled into
 * one library. */
static int compile_buckets(const ts_graph_compile_options *co, const char *sym,
                           const long *sizes, int n, ts_graph **gs,
                           ts_graph_compile_report *reps, bool json) {
  const char *model = co->model_path, *output = co->output;
  double t0 = ts_now_seconds();
  int64_t sz[MAX_BUCKETS];
  for (int b = 0; b < n; b++) sz[b] = sizes[b];
  if (cli_load_padded(model, co->input_shapes, co->n_input_shapes, sym, sz, n,
                      gs) != EXIT_OK)
    return EXIT_FAIL; /* said why */
  for (int b = 0; b < n; b++) {
    reps[b].passes_ms = (ts_now_seconds() - t0) * 1e3 / n;
    if (!json)
      fprintf(stderr, "padded %s=%ld: %d nodes\n", sym, sizes[b],
              ts_graph_n_nodes(gs[b]));
  }
  ts_error err;
  ts_error_clear(&err);
  if (ts_graph_compile_padded((const ts_graph *const *)gs, n, co, reps, &err) !=
      TS_OK) {
    cli_error("cannot compile the model", &err);
    return EXIT_FAIL;
  }
  if (reps[0].warning)
    fprintf(stderr, "tessera: warning: %s=%ld: %s\n", sym, sizes[0],
            reps[0].warning);
  for (int b = 1; b < n; b++)
    if (reps[b].warning)
      fprintf(stderr, "tessera: warning: %s=%ld: %s\n", sym, sizes[b],
              reps[b].warning);
  if (json) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "model", model);
    cJSON_AddStringToObject(root, "output", output);
    cJSON_AddStringToObject(root, "symbol", sym);
    cJSON *arr = cJSON_AddArrayToObject(root, "buckets");
    for (int b = 0; b < n; b++) {
      cJSON *o = report_json(&reps[b], model, output);
      cJSON_AddNumberToObject(o, "size", (double)sizes[b]);
      ts_json_add(arr, NULL, o);
    }
    cli_print_json(root);
  } else {
    for (int b = 0; b < n; b++) {
      printf("## %s up to %ld%s\n", sym, sizes[b],
             b == n - 1 ? " (the largest: the range is 1 to it)" : "");
      print_text(&reps[b], model, output);
    }
  }
  return EXIT_OK;
}

int cmd_compile(int argc, char **argv) {
  const char *model = NULL, *output = NULL, *db_path = NULL, *target = NULL,
             *runtime_dir = NULL;
  long threads = 0;
  bool json = false, no_prepack = false;
  ts_graph_dispatch dispatch = TS_DISPATCH_BEST;
  char bucket_sym[128] = "", max_sym[128] = "";
  long buckets[MAX_BUCKETS], dim_max = 0;
  int n_buckets = 0;
  const char **shapes = calloc((size_t)argc + 1, sizeof *shapes);
  int n_shapes = 0;
  ts_graph_extern *externs = calloc((size_t)argc + 1, sizeof *externs);
  char **extern_text = calloc((size_t)argc + 1, sizeof *extern_text);
  int n_externs = 0;
  if (!shapes || !externs || !extern_text) {
    free(shapes);
    free(externs);
    free(extern_text);
    return EXIT_FAIL;
  }
  int rc = EXIT_OK;
  for (int i = 1; i < argc && rc == EXIT_OK; i++) {
    const char *v = NULL;
    bool missing = false;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(compile_usage, stdout);
      fputs(cli_pass_usage, stdout);
      n_shapes = -1; /* done: no compile */
      break;
    } else if (!strcmp(argv[i], "--json")) {
      json = true;
    } else if (!strcmp(argv[i], "--no-prepack")) {
      no_prepack = true;
    } else if (cli_opt_value(argc, argv, &i, "-o", &v, &missing) ||
               cli_opt_value(argc, argv, &i, "--output", &v, &missing)) {
      if (missing) rc = cli_usage_error("compile", "-o needs a file");
      output = v;
    } else if (cli_opt_value(argc, argv, &i, "--db", &v, &missing)) {
      if (missing) rc = cli_usage_error("compile", "--db needs a path");
      db_path = v;
    } else if (cli_opt_value(argc, argv, &i, "--target", &v, &missing)) {
      if (missing) rc = cli_usage_error("compile", "--target needs a target");
      target = v;
    } else if (cli_opt_value(argc, argv, &i, "--runtime-dir", &v, &missing)) {
      if (missing) rc = cli_usage_error("compile", "--runtime-dir needs DIR");
      runtime_dir = v;
    } else if (cli_opt_value(argc, argv, &i, "--input-shape", &v, &missing)) {
      if (missing)
        rc = cli_usage_error("compile", "--input-shape needs NAME=DIMS");
      shapes[n_shapes++] = v;
    } else if (cli_opt_value(argc, argv, &i, "--shape-buckets", &v, &missing)) {
      if (missing)
        rc = cli_usage_error("compile", "--shape-buckets needs SYMBOL=S1,...");
      else if (n_buckets)
        rc = cli_usage_error("compile", "--shape-buckets: one symbol");
      else
        rc = cli_bucket_option("compile", v, bucket_sym, sizeof bucket_sym,
                               buckets, &n_buckets, MAX_BUCKETS - 1);
    } else if (cli_opt_value(argc, argv, &i, "--dim-max", &v, &missing)) {
      const char *eq = missing ? NULL : strchr(v, '=');
      char *end = NULL;
      dim_max = eq ? strtol(eq + 1, &end, 10) : 0;
      if (!eq || eq == v || !end || *end || dim_max < 1 || dim_max > (1l << 31))
        rc = cli_usage_error("compile", "--dim-max needs SYMBOL=N (N >= 1)");
      else
        snprintf(max_sym, sizeof max_sym, "%.*s", (int)(eq - v), v);
    } else if (cli_opt_value(argc, argv, &i, "--dispatch", &v, &missing)) {
      if (missing ||
          (strcmp(v, "tuned") && strcmp(v, "vendor") && strcmp(v, "best")))
        rc = cli_usage_error("compile",
                             "--dispatch wants tuned, vendor or best");
      else
        dispatch = !strcmp(v, "vendor")  ? TS_DISPATCH_VENDOR
                   : !strcmp(v, "tuned") ? TS_DISPATCH_TUNED
                                         : TS_DISPATCH_BEST;
    } else if (cli_opt_value(argc, argv, &i, "--extern", &v, &missing)) {
      char *t = missing ? NULL : strdup(v);
      char *eq = t ? strchr(t, '=') : NULL;
      char *colon = eq ? strrchr(eq + 1, ':') : NULL;
      if (!eq || eq == t || !colon || colon == eq + 1 || !colon[1]) {
        rc = cli_usage_error("compile",
                             "--extern needs TASK=FILE:FUNCTION, got '%s'",
                             missing ? "" : v);
        free(t);
      } else {
        *eq = *colon = 0;
        extern_text[n_externs] = t;
        externs[n_externs++] = (ts_graph_extern){t, eq + 1, colon + 1};
      }
    } else if (cli_pass_option("compile", argc, argv, &i, &rc)) {
      /* consumed */
    } else if (cli_opt_value(argc, argv, &i, "--threads", &v, &missing)) {
      if (missing)
        rc = cli_usage_error("compile", "--threads needs a number");
      else
        rc = cli_int_option("compile", "--threads", v, 1, 4096, &threads);
    } else if (argv[i][0] == '-') {
      rc = cli_usage_error("compile", "unknown option '%s'", argv[i]);
    } else if (!model) {
      model = argv[i];
    } else {
      rc = cli_usage_error("compile", "more than one model given");
    }
  }
  if (n_shapes < 0) goto usage_done; /* --help */
  if (rc == EXIT_OK && !model)
    rc = cli_usage_error("compile", "no model given");
  if (rc == EXIT_OK && !output)
    rc = cli_usage_error("compile", "no output given (-o MODEL.so)");
  if (rc == EXIT_OK) rc = cli_output_path("compile", output);
  if (rc == EXIT_OK && dim_max && strcmp(max_sym, bucket_sym))
    rc = cli_usage_error("compile", "--dim-max %s: no --shape-buckets %s=...",
                         max_sym, max_sym);
  if (rc == EXIT_OK && dim_max && n_buckets && dim_max < buckets[n_buckets - 1])
    rc = cli_usage_error("compile",
                         "--dim-max %ld is below the largest "
                         "bucket %ld",
                         dim_max, buckets[n_buckets - 1]);
  if (rc == EXIT_OK && n_buckets && dim_max > buckets[n_buckets - 1])
    buckets[n_buckets++] = dim_max; /* the generic program of the range */
  ts_graph_compile_report rep, reps[MAX_BUCKETS];
  memset(&rep, 0, sizeof rep);
  memset(reps, 0, sizeof reps);
  ts_graph *g = NULL, *gs[MAX_BUCKETS] = {0};
  ts_db *db = NULL;
  if (rc != EXIT_OK) goto done;

  ts_error err;
  ts_error_clear(&err);
  char rtdir[4096];
  rc = EXIT_FAIL;
  if (!runtime_dir) {
    if (ts_graph_runtime_dir(rtdir, sizeof rtdir, &err) != TS_OK) {
      cli_error("cannot find the runtime library", &err);
      goto done;
    }
    runtime_dir = rtdir;
  }
  cli_model_target(target); /* the graph's weight panels follow it */
  if (db_path) { /* before the passes: --pet weighs candidates by it */
    ts_db_options dbo = ts_db_defaults();
    dbo.read_only = true;
    if (ts_db_open(db_path, &dbo, &db, &err) != TS_OK) {
      cli_error("cannot open the database", &err);
      goto done;
    }
    cli_pet_measure(db, target, false);
  }
  ts_graph_compile_options co;
  memset(&co, 0, sizeof co);
  co.output = output;
  co.target = target;
  co.db = db;
  co.build_threads = (int)threads;
  co.runtime_dir = runtime_dir;
  co.model_path = model;
  co.input_shapes = shapes;
  co.n_input_shapes = n_shapes;
  ts_graph_import_options dims;
  memset(&dims, 0, sizeof dims);
  cli_import_dims(&dims);
  co.dims = dims.dims;
  co.n_dims = dims.n_dims;
  co.dispatch = dispatch;
  co.no_prepack = no_prepack;
  co.externs = externs;
  co.n_externs = n_externs;
  double t0 = ts_now_seconds();
  if (n_buckets) { /* one program per padded size, and a dispatcher */
    rc = compile_buckets(&co, bucket_sym, buckets, n_buckets, gs, reps, json);
    goto done;
  }
  if (cli_import_model(model, shapes, n_shapes, &g) != EXIT_OK) goto done;
  double t1 = ts_now_seconds();
  if (ts_graph_run_passes(g, NULL, &err) != TS_OK ||
      ts_graph_verify(g, &err) != TS_OK) {
    cli_error("graph passes failed", &err);
    goto done;
  }
  double t2 = ts_now_seconds();
  cli_pet_summary(g, stderr, false);
  cli_block_summary(g, stderr, false);
  cli_winograd_summary(g, stderr, false);
  if (cli_quantizing()) {
    int n8, n32;
    ts_graph_quant_counts(g, &n8, &n32);
    fprintf(stderr,
            "quantized: %d convolution%s and matrix product%s int8, %d kept "
            "float32\n",
            n8, n8 == 1 ? "" : "s", n8 == 1 ? "" : "s", n32);
  }
  rep.import_ms = (t1 - t0) * 1e3;
  rep.passes_ms = (t2 - t1) * 1e3;
  if (ts_graph_compile(g, &co, &rep, &err) != TS_OK) {
    cli_error("cannot compile the model", &err);
    goto done;
  }
  if (rep.warning) fprintf(stderr, "tessera: warning: %s\n", rep.warning);
  if (json)
    print_json(&rep, model, output);
  else
    print_text(&rep, model, output);
  rc = EXIT_OK;
done:
  ts_graph_compile_report_clear(&rep);
  for (int b = 0; b < n_buckets; b++) {
    ts_graph_compile_report_clear(&reps[b]);
    ts_graph_free(gs[b]);
  }
  ts_db_close(db);
  ts_graph_free(g);
usage_done:
  free(shapes);
  for (int k = 0; k < n_externs; k++) free(extern_text[k]);
  free(externs);
  free(extern_text);
  return rc;
}
