/*
 * cmd_graph.c — `tessera graph`: model graphs. `graph show` imports an ONNX
 * model, runs the pass pipeline (or stops after a named pass) and prints the
 * graph as text or JSON; `graph tasks` lists the distinct tasks (fused
 * groups) with their hashes, FLOPs and call counts; `graph run` runs it in
 * the reference executor on inputs from a .npz file and writes the outputs
 * to another.
 */
#include "cli.h"

#include "db/db.h"
#include "graph/graph.h"
#include "tir/alloc.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char graph_usage[] =
    "usage: tessera graph show MODEL.onnx [--after PASS] [--input-shape "
    "NAME=DIMS]...\n"
    "                          [--override NODE=FILE.tir]... [--json]\n"
    "                          [--dim SYMBOL=SIZE]... [--symbolic | --padded "
    "N]\n"
    "                          [--quantize PROFILE.json ...]\n"
    "                          [--pet ... [--db PATH] [--target T]]\n"
    "       tessera graph tasks MODEL.onnx [--input-shape NAME=DIMS]... "
    "[--tir]\n"
    "                          [--json]\n"
    "       tessera graph run MODEL.onnx --inputs IN.npz --outputs OUT.npz\n"
    "                          [--after PASS] [--input-shape NAME=DIMS]...\n"
    "                          [--interpret]\n"
    "\n"
    "  show             import the model, run the graph passes and print the\n"
    "                   graph (values with shape, dtype and layout; nodes)\n"
    "  tasks            the distinct tasks (fused groups) of the graph: task\n"
    "                   hash, FLOPs per call, how many calls; --tir prints\n"
    "                   each task's function\n"
    "  run              run the graph in the reference executor; IN.npz holds\n"
    "                   one array per graph input (by name), OUT.npz gets one\n"
    "                   per graph output. Each fused group is compiled once\n"
    "                   for this machine without a tuned schedule; with\n"
    "                   --interpret it runs in tir's reference interpreter\n"
    "  --after PASS     stop after PASS: none (the imported graph), shape,\n"
    "                   fold, dce, cse, bn_fold, patterns, lower, layout,\n"
    "                   pet, quantize, winograd, fuse\n"
    "                   (default: all)\n"
    "  --layout L          2-D convolutions channels-last (nhwc, default:\n"
    "                      one transpose at the input), as the model gives\n"
    "                      them (nchw), channel-blocked where a conv can be\n"
    "                      (blocked) or NHWC or blocked per conv by the\n"
    "                      database's latencies (auto; docs/graph.md)\n"
    "  --no-winograd       3x3 convolutions direct, not by Winograd's\n"
    "                      F(2x2, 3x3) (docs/graph.md)\n"
    "  --input-layout nchw|nhwc, --output-layout nchw|nhwc\n"
    "                      the 4-D inputs / outputs as the model declares\n"
    "                      them (nchw, default) or channels-last (nhwc: no\n"
    "                      transpose at that edge; same names, permuted\n"
    "                      shapes)\n"
    "  --input-shape NAME=DIMS  fix a graph input's dimensions, e.g.\n"
    "                   input_ids=1x128 (needed for symbolic dimensions)\n"
    "  --symbolic       show: shapes in the model's named dynamic dimensions\n"
    "  --padded SIZE    show, tasks: the graph a model with one dynamic\n"
    "                   dimension compiles to for sizes up to SIZE\n"
    "                   (seq, 12*seq, batch*seq), found by running the\n"
    "                   passes at sizes 5 to 13 of each (docs/graph.md)\n"
    "  --override NODE=FILE.tir  replace a node of the lowered graph (before\n"
    "                   fusion) by a destination-passing call of the TIR\n"
    "                   function in FILE (parameters: inputs, then outputs)\n"
    "  --json           print JSON instead of text\n"
    "  --target T       the target the graph is built for (default: llvm,\n"
    "                   this machine): MatMul weight panels of three of its\n"
    "                   vectors; with --pet and --db, PET's candidates are\n"
    "                   weighed by the database's latencies on it, as\n"
    "                   `tessera compile --pet --db` does\n"
    "  --db PATH        see --target\n";

typedef struct graph_opts {
  const char *model, *after, *inputs_path, *outputs_path, *db_path, *target;
  const char **shapes;
  int n_shapes;
  const char **overrides;
  int n_overrides;
  bool json, tir, interpret, symbolic;
  int64_t padded; /* --padded SIZE: the graph a dynamic model compiles to */
} graph_opts;

static int parse_opts(const char *sub, int argc, char **argv, graph_opts *o) {
  for (int i = 1; i < argc; i++) {
    const char *v = NULL;
    bool missing = false;
    int qrc;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(graph_usage, stdout);
      fputs(cli_pass_usage, stdout);
      exit(EXIT_OK);
    } else if (!strcmp(argv[i], "--json")) {
      o->json = true;
    } else if (!strcmp(argv[i], "--tir")) {
      o->tir = true;
    } else if (!strcmp(argv[i], "--interpret")) {
      o->interpret = true;
    } else if (!strcmp(argv[i], "--symbolic")) {
      o->symbolic = true;
    } else if (cli_opt_value(argc, argv, &i, "--padded", &v, &missing)) {
      char *end = NULL;
      long long n = missing ? 0 : strtoll(v, &end, 10);
      if (missing || *end || n < 1 || n > (1LL << 30))
        return cli_usage_error(sub, "--padded needs a size from 1 to 2^30");
      o->padded = n;
    } else if (cli_opt_value(argc, argv, &i, "--after", &v, &missing)) {
      if (missing) return cli_usage_error(sub, "--after needs a pass name");
      o->after = v;
    } else if (cli_opt_value(argc, argv, &i, "--input-shape", &v, &missing)) {
      if (missing) return cli_usage_error(sub, "--input-shape needs NAME=DIMS");
      o->shapes[o->n_shapes++] = v;
    } else if (cli_pass_option(sub, argc, argv, &i, &qrc)) {
      if (qrc != EXIT_OK) return qrc;
    } else if (cli_opt_value(argc, argv, &i, "--override", &v, &missing)) {
      if (missing || !strchr(v, '='))
        return cli_usage_error(sub, "--override needs NODE=FILE.tir");
      o->overrides[o->n_overrides++] = v;
    } else if (cli_opt_value(argc, argv, &i, "--db", &v, &missing)) {
      if (missing) return cli_usage_error(sub, "--db needs a database path");
      o->db_path = v;
    } else if (cli_opt_value(argc, argv, &i, "--target", &v, &missing)) {
      if (missing) return cli_usage_error(sub, "--target needs a target");
      o->target = v;
    } else if (cli_opt_value(argc, argv, &i, "--inputs", &v, &missing)) {
      if (missing) return cli_usage_error(sub, "--inputs needs a file");
      o->inputs_path = v;
    } else if (cli_opt_value(argc, argv, &i, "--outputs", &v, &missing)) {
      if (missing) return cli_usage_error(sub, "--outputs needs a file");
      o->outputs_path = v;
    } else if (argv[i][0] == '-') {
      return cli_usage_error(sub, "unknown option '%s'", argv[i]);
    } else if (!o->model) {
      o->model = argv[i];
    } else {
      return cli_usage_error(sub, "more than one model given");
    }
  }
  if (!o->model) return cli_usage_error(sub, "no model given");
  return EXIT_OK;
}

/* Imports and runs the passes (up to opts->after), then applies overrides.
 * On success *out owns the graph. */
static int load_graph(const graph_opts *o, ts_graph **out) {
  ts_error err;
  ts_error_clear(&err);
  ts_graph *g;
  if (o->symbolic || o->padded) {
    ts_graph_import_options io;
    memset(&io, 0, sizeof io);
    io.input_shapes = o->shapes;
    io.n_input_shapes = o->n_shapes;
    cli_import_dims(&io);
    if (o->padded
            ? ts_graph_import_padded(o->model, &io, o->padded, o->after, out,
                                     &err)
            : ts_graph_import_symbolic(o->model, &io, o->after, out, &err)) {
      cli_error(o->padded ? "cannot pad the dynamic dimension"
                          : "cannot derive the symbolic shapes",
                &err);
      return EXIT_FAIL;
    }
    return EXIT_OK;
  }
  cli_model_target(o->target);
  if (cli_import_model(o->model, o->shapes, o->n_shapes, &g) != EXIT_OK)
    return EXIT_FAIL;
  /* Overrides apply to the lowered graph's nodes, before fusion, so a
   * node keeps its imported name and its call becomes a task of its own. */
  bool none = o->after && !strcmp(o->after, "none");
  bool fuse_later =
      o->n_overrides > 0 && (!o->after || !strcmp(o->after, "fuse"));
  const char *stop = fuse_later ? "lower" : o->after;
  if (!none && ts_graph_run_passes(g, stop, &err) != TS_OK) {
    cli_error("graph passes failed", &err);
    ts_graph_free(g);
    return EXIT_FAIL;
  }
  for (int i = 0; i < o->n_overrides; i++) {
    char node[512];
    const char *eq = strchr(o->overrides[i], '=');
    snprintf(node, sizeof node, "%.*s", (int)(eq - o->overrides[i]),
             o->overrides[i]);
    ts_func *f;
    if (ts_func_parse_file(eq + 1, &f, &err) != TS_OK) {
      cli_error("cannot read the override's TIR", &err);
      ts_graph_free(g);
      return EXIT_FAIL;
    }
    int rc = ts_graph_override(g, node, f, &err);
    ts_func_free(f);
    if (rc != TS_OK) {
      cli_error("cannot override", &err);
      ts_graph_free(g);
      return EXIT_FAIL;
    }
  }
  if (fuse_later && ts_graph_fuse(g, &err) != TS_OK) {
    cli_error("fusion failed", &err);
    ts_graph_free(g);
    return EXIT_FAIL;
  }
  if (ts_graph_verify(g, &err) != TS_OK) {
    cli_error("the graph does not verify", &err);
    ts_graph_free(g);
    return EXIT_FAIL;
  }
  *out = g;
  return EXIT_OK;
}

static int graph_show(const graph_opts *o) {
  ts_graph *g;
  ts_db *db = NULL;
  if (o->db_path) { /* before the passes: --pet weighs candidates by it */
    ts_error err;
    ts_db_options dbo = ts_db_defaults();
    dbo.read_only = true;
    if (ts_db_open(o->db_path, &dbo, &db, &err) != TS_OK) {
      cli_error("cannot open the database", &err);
      return EXIT_FAIL;
    }
    cli_pet_measure(db, o->target, false);
  }
  int rc = load_graph(o, &g);
  cli_pet_measure(NULL, NULL, false);
  if (db) ts_db_close(db);
  if (rc) return rc;
  char *text = o->json ? ts_graph_print_json(g) : ts_graph_print(g);
  if (!text) {
    fputs("tessera: error: out of memory printing the graph\n", stderr);
    ts_graph_free(g);
    return EXIT_FAIL;
  }
  if (!o->json) {
    char hex[33];
    ts_hash128_hex(ts_graph_hash(g), hex);
    printf("# hash: %s\n# nodes: %d, constants: %zu bytes\n", hex,
           ts_graph_n_nodes(g), ts_graph_constant_bytes(g));
    cli_pet_summary(g, stdout, true);
    cli_block_summary(g, stdout, true);
    cli_winograd_summary(g, stdout, true);
  }
  fputs(text, stdout);
  if (o->json) putchar('\n');
  free(text);
  ts_graph_free(g);
  return EXIT_OK;
}

static int graph_tasks(const graph_opts *o) {
  ts_graph *g;
  int rc = load_graph(o, &g);
  if (rc) return rc;
  ts_error err;
  ts_graph_task *tasks;
  int n;
  if (ts_graph_tasks(g, &tasks, &n, &err) != TS_OK) {
    cli_error("tasks", &err);
    ts_graph_free(g);
    return EXIT_FAIL;
  }
  double total = 0;
  int calls = 0;
  for (int i = 0; i < n; i++) {
    total += tasks[i].flops * tasks[i].count;
    calls += tasks[i].count;
  }
  if (o->json) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "calls", calls);
    cJSON_AddNumberToObject(root, "flops", total);
    cJSON *arr = cJSON_AddArrayToObject(root, "tasks");
    for (int i = 0; i < n; i++) {
      char hex[33];
      ts_hash128_hex(tasks[i].hash, hex);
      cJSON *t = cJSON_CreateObject();
      cJSON_AddStringToObject(t, "hash", hex);
      cJSON_AddStringToObject(t, "name", ts_func_name(tasks[i].func));
      cJSON_AddStringToObject(t, "first_node", tasks[i].first_node);
      cJSON_AddNumberToObject(t, "count", tasks[i].count);
      cJSON_AddNumberToObject(t, "flops", tasks[i].flops);
      if (o->tir) {
        char *text = ts_func_print(tasks[i].func);
        cJSON_AddStringToObject(t, "tir", text);
        free(text);
      }
      ts_json_add(arr, NULL, t);
    }
    cli_print_json(root);
  } else {
    printf("# %d distinct tasks, %d calls, %.3f GFLOP per run\n", n, calls,
           total / 1e9);
    printf("%-32s %5s %12s  %s\n", "task hash", "calls", "MFLOP/call",
           "function (first node)");
    for (int i = 0; i < n; i++) {
      char hex[33];
      ts_hash128_hex(tasks[i].hash, hex);
      printf("%s %5d %12.3f  %s (%s)\n", hex, tasks[i].count,
             tasks[i].flops / 1e6, ts_func_name(tasks[i].func),
             tasks[i].first_node);
      if (o->tir) {
        char *text = ts_func_print(tasks[i].func);
        fputs(text, stdout);
        putchar('\n');
        free(text);
      }
    }
  }
  free(tasks);
  ts_graph_free(g);
  return EXIT_OK;
}

static int graph_run(const graph_opts *o) {
  if (!o->inputs_path || !o->outputs_path)
    return cli_usage_error("graph run", "--inputs and --outputs are needed");
  ts_graph *g;
  int rc = load_graph(o, &g);
  if (rc) return rc;
  ts_error err;
  ts_error_clear(&err);
  int n_in = ts_graph_n_inputs(g), n_out = ts_graph_n_outputs(g);
  ts_graph_tensor *ins = calloc((size_t)n_in + 1, sizeof *ins);
  ts_graph_tensor *outs = calloc((size_t)n_out + 1, sizeof *outs);
  ts_graph_npz *npz = NULL;
  rc = EXIT_FAIL;
  if (!ins || !outs) goto done;
  if (ts_graph_npz_read(o->inputs_path, &npz, &err) != TS_OK) {
    cli_error("cannot read the inputs", &err);
    goto done;
  }
  for (int i = 0; i < n_in; i++) {
    ts_graph_value_info info = ts_graph_input(g, i);
    if (ts_graph_npz_find(npz, info.name, &ins[i], &err) != TS_OK) {
      cli_error("bad inputs", &err);
      goto done;
    }
  }
  ts_graph_exec_mode mode =
      o->interpret ? TS_GRAPH_INTERPRET : TS_GRAPH_COMPILE;
  if (ts_graph_execute(g, mode, ins, n_in, outs, n_out, &err) != TS_OK) {
    cli_error("execution failed", &err);
    goto done;
  }
  if (ts_graph_npz_write(o->outputs_path, outs, n_out, &err) != TS_OK) {
    cli_error("cannot write the outputs", &err);
    goto done;
  }
  rc = EXIT_OK;
done:
  for (int i = 0; outs && i < n_out; i++) free(outs[i].data);
  free(ins);
  free(outs);
  ts_graph_npz_free(npz);
  ts_graph_free(g);
  return rc;
}

int cmd_graph(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    fputs(graph_usage, argc < 2 ? stderr : stdout);
    return argc < 2 ? EXIT_USAGE : EXIT_OK;
  }
  const char *sub = argv[1];
  char name[32];
  snprintf(name, sizeof name, "graph %s", sub);
  graph_opts o;
  memset(&o, 0, sizeof o);
  o.shapes = calloc((size_t)argc, sizeof *o.shapes);
  o.overrides = calloc((size_t)argc, sizeof *o.overrides);
  int rc;
  if (!o.shapes || !o.overrides)
    rc = EXIT_FAIL;
  else if (strcmp(sub, "show") && strcmp(sub, "run") && strcmp(sub, "tasks"))
    rc = cli_usage_error("graph", "unknown subcommand '%s'", sub);
  else if ((rc = parse_opts(name, argc - 1, argv + 1, &o)) == EXIT_OK &&
           (o.symbolic || o.padded) &&
           ((o.symbolic && o.padded) || !strcmp(sub, "run") ||
            (o.symbolic && strcmp(sub, "show")) || o.n_overrides || o.db_path ||
            cli_passes_set()))
    rc = cli_usage_error(name, "--symbolic (graph show) and --padded (graph "
                               "show, graph tasks) go alone, with the "
                               "default passes (no --override, --layout, "
                               "--pet, --quantize, --db)");
  else if (rc == EXIT_OK)
    rc = !strcmp(sub, "show")    ? graph_show(&o)
         : !strcmp(sub, "tasks") ? graph_tasks(&o)
                                 : graph_run(&o);
  free(o.shapes);
  free(o.overrides);
  return rc;
}
