/*
 * test_oom.c — out of memory in the graph compiler's front end is an
 * error, not a crash. The walk (tests/schedule/oom_walk.h) fails
 * tessera's allocations in turn (protobuf-c's unpacking and cJSON
 * included) over importing an ONNX model, the whole pass pipeline through
 * fusion, the model's distinct tasks, the memory plan and the graph
 * printed as JSON; every run with a failing allocation returns TS_ENOMEM.
 * Three of the generated small models: ops_small (pooling, a grouped
 * transposed convolution, softmax, layer normalization, slices,
 * reductions, gathers and casts) at every allocation, resnet50_small
 * (batch-norm folding, the layout pass, Winograd) and bert_small (the
 * layer-norm and GELU patterns, Gemm lowering) at every 37th (about 20 s
 * under the sanitizers, 3 s without). ops_small and resnet50_small are
 * walked once more with the arena's static reserve taken first
 * (oom_walk.h), so that an arena allocation that fails returns NULL: the
 * tensor-expression builders of fusion and Winograd meet the NULLs. That
 * walk fails each of the arena's own allocations (structs and chunks; a
 * failure elsewhere runs as in the walk with the reserve), which took the
 * test from 93 s to about 20 s under the sanitizers.
 * Compiling a model into a library is not walked: each run would build
 * every kernel with LLVM and link with the system C compiler.
 */
#include "../schedule/oom_walk.h"

#include "util.h"

enum { ST_IMPORT, ST_PASSES, ST_TASKS, ST_N };
static const char *const stage_names[ST_N] = {"graph_import", "graph_passes",
                                              "graph_tasks"};

typedef struct model {
  const char *name;
  const char *const *shapes; /* --input-shape */
  int n_shapes;
  char path[512];
} model;

static int run(void *ctx, int last, char **out, ts_error *err) {
  const model *m = ctx;
  int rc = TS_OK;
  ts_graph *g = NULL;
  ts_graph_task *tasks = NULL;
  ts_graph_plan plan = {0};
  char *json = NULL;
  int n_tasks = 0;
  *out = NULL;
  ts_error_clear(err);
  ts_graph_import_options o = {0};
  o.input_shapes = m->shapes;
  o.n_input_shapes = m->n_shapes;
  STEP(ts_graph_import_onnx(m->path, &o, &g, err));
  if (last < ST_PASSES) goto done;
  STEP(ts_graph_run_passes(g, NULL, err));
  if (last < ST_TASKS) goto done;
  STEP(ts_graph_tasks(g, &tasks, &n_tasks, err));
  STEP(ts_graph_plan_memory(g, &plan, err));
  json = ts_graph_print_json(g);
  if (!json) STEP(TS_ERR(err, TS_ENOMEM, "printing: out of memory"));
  char text[128];
  snprintf(text, sizeof text, "%d tasks, %d nodes, arena %lld bytes", n_tasks,
           ts_graph_n_nodes(g), (long long)plan.arena_bytes);
  *out = strdup(text);
done:
  free(json);
  ts_graph_plan_clear(&plan);
  free(tasks);
  ts_graph_free(g);
  return rc;
}

static void walk(const char *walk_name, const char *name,
                 const char *const *shapes, int n_shapes, long stride,
                 bool arena_only) {
  model m = {name, shapes, n_shapes, ""};
  model_path(name, m.path);
  oom_walk w = {walk_name, stage_names, ST_N, run, NULL, stride, arena_only};
  oom_walk_run(&w, &m);
}

/* The walk with the arena's reserve held, at the arena's allocations: at
 * the others it runs as the walk with the reserve does. */
static void walk_without_reserve(const char *walk_name, const char *name,
                                 long stride) {
  oom_reserve h;
  oom_reserve_take_all(&h);
  walk(walk_name, name, NULL, 0, stride, true);
  oom_reserve_give_back(&h);
}

static void test_ops(void **state) {
  (void)state;
  walk("graph ops_small", "ops_small", NULL, 0, 1, false);
}

static void test_resnet(void **state) {
  (void)state;
  walk("graph resnet50_small", "resnet50_small", NULL, 0, 37, false);
}

static void test_bert(void **state) {
  (void)state;
  walk("graph bert_small", "bert_small", bert_shapes, 2, 37, false);
}

static void test_ops_without_reserve(void **state) {
  (void)state;
  walk_without_reserve("graph ops_small without reserve", "ops_small", 1);
}

static void test_resnet_without_reserve(void **state) {
  (void)state;
  walk_without_reserve("graph resnet50_small without reserve", "resnet50_small",
                       1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ops),
      cmocka_unit_test(test_resnet),
      cmocka_unit_test(test_bert),
      cmocka_unit_test(test_ops_without_reserve),
      cmocka_unit_test(test_resnet_without_reserve),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
