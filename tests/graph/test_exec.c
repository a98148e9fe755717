/*
 * test_exec.c — the reference executor and user TIR in the graph: every
 * small model computes the same outputs after constant folding alone and
 * after the whole pipeline (BN folding, lowering, elimination and fusion
 * keep the values; the fused groups run in tir's interpreter and compiled); a
 * Relu node replaced by the operator library's relu PrimFunc (a
 * destination-passing call run in tir's interpreter) gives the same outputs; an
 * override whose shapes differ is refused naming both; fusion leaves no conv,
 * matmul, bias or ReLU node of its own and identical layers share tasks; and
 * .npz files round-trip. The fused graphs run every group in tir's interpreter,
 * so the first test checks fusion's values too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "exec_util.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

static void run_mode(const ts_graph *g, ts_graph_exec_mode mode,
                     ts_graph_tensor *outs, int seed) {
  run_seeded(g, mode, outs, seed);
}

static void run(const ts_graph *g, ts_graph_tensor *outs, int seed) {
  run_seeded(g, TS_GRAPH_INTERPRET, outs, seed);
}

static void test_passes_keep_values(void **state) {
  (void)state;
  static const char *const models[] = {"resnet50_small", "mobilenet_v2_small",
                                       "csrnet_small", "bert_small",
                                       "ops_small"};
  for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
    bool bert = !strcmp(models[m], "bert_small");
    ts_error err;
    ts_graph *folded = load_model(models[m], bert ? bert_shapes : NULL,
                                  bert ? 2 : 0, "fold", &err);
    ts_graph *full = load_model(models[m], bert ? bert_shapes : NULL,
                                bert ? 2 : 0, NULL, &err);
    assert_non_null(folded);
    assert_non_null(full);
    int n = ts_graph_n_outputs(full);
    ts_graph_tensor a[8], b[8], c[8];
    assert_true(n <= 8);
    run(folded, a, 7);
    run_mode(full, TS_GRAPH_COMPILE, c, 7);
    assert_same_outputs(a, c, n, models[m]);
    /* the interpreter is slow (more so under the sanitizers): two models */
    bool interpret = m == 0 || m == 4;
    if (interpret) {
      run(full, b, 7);
      assert_same_outputs(a, b, n, models[m]);
    }
    for (int i = 0; i < n; i++) {
      free(a[i].data);
      free(c[i].data);
      if (interpret) free(b[i].data);
    }
    ts_graph_free(folded);
    ts_graph_free(full);
  }
}

/* The first node with op type `op`, or -1. */
static int find_op(const ts_graph *g, const char *op) {
  for (int i = 0; i < ts_graph_n_nodes(g); i++)
    if (!strcmp(ts_graph_node_op(g, i), op)) return i;
  return -1;
}

static void test_override_with_tir(void **state) {
  (void)state;
  ts_error err;
  ts_graph *g = load_model("resnet50_small", NULL, 0, "lower", &err);
  assert_non_null(g);
  ts_graph_tensor want[1], got[1];
  run(g, want, 3);
  int relu = find_op(g, "Relu");
  assert_true(relu >= 0);
  char node[256];
  snprintf(node, sizeof node, "%s", ts_graph_node_name(g, relu));
  /* the first Relu follows the 7x7 stem conv: [1, 8, 16, 16] */
  ts_workload *w;
  assert_int_equal(
      ts_workload_from_spec("elementwise op=relu shape=1x8x16x16", &w, &err),
      TS_OK);
  assert_int_equal(ts_graph_override(g, node, w->func, &err), TS_OK);
  ts_workload_free(w);
  assert_int_equal(ts_graph_node_kind_of(g, relu), TS_GRAPH_CALL);
  assert_non_null(ts_graph_node_func(g, relu));
  assert_int_equal(ts_graph_verify(g, &err), TS_OK);
  char *text = ts_graph_print(g);
  assert_non_null(strstr(text, "call_tir["));
  assert_non_null(strstr(text, "; task "));
  free(text);
  run(g, got, 3);
  assert_same_outputs(want, got, 1, "override");
  free(want[0].data), free(got[0].data);

  /* a function of another shape is refused, naming both */
  int relu2 = find_op(g, "Relu");
  assert_true(relu2 >= 0);
  snprintf(node, sizeof node, "%s", ts_graph_node_name(g, relu2));
  assert_int_equal(
      ts_workload_from_spec("elementwise op=relu shape=1x8x16x16", &w, &err),
      TS_OK);
  uint64_t before_hi = ts_graph_hash(g).hi;
  assert_int_equal(ts_graph_override(g, node, w->func, &err), TS_EINVAL);
  ts_workload_free(w);
  assert_non_null(strstr(err.msg, "float32[1, 8, 16, 16]"));
  assert_non_null(strstr(err.msg, "float32[1, 8, 8, 8]"));
  assert_true(ts_graph_hash(g).hi == before_hi);
  assert_int_equal(ts_graph_override(g, "no_such_node", NULL, &err),
                   TS_ENOTFOUND);
  ts_graph_free(g);
}

/* After fusion no conv, matmul, bias, BN or ReLU is a node of its own, and
 * BERT's identical layers share their tasks. */
static void test_fusion_tasks(void **state) {
  (void)state;
  ts_error err;
  ts_graph *g = load_model("resnet50_small", NULL, 0, NULL, &err);
  assert_non_null(g);
  static const char *const fused_away[] = {
      "Conv", "MatMul", "Add", "Relu", "Mul", "BatchNormalization"};
  for (size_t k = 0; k < sizeof fused_away / sizeof fused_away[0]; k++)
    assert_int_equal(ts_graph_count_op(g, fused_away[k]), 0);
  assert_true(ts_graph_count_op(g, "call_tir") >= 17);
  ts_graph_task *tasks;
  int n;
  assert_int_equal(ts_graph_tasks(g, &tasks, &n, &err), TS_OK);
  assert_int_equal(n, ts_graph_count_op(g, "call_tir"));
  for (int i = 0; i < n; i++) {
    /* data movement (the layout pass's transpose of the input, the
     * subsample a strided 1x1 conv reads) has none */
    assert_true(tasks[i].flops > 0 ||
                !strcmp(ts_func_name(tasks[i].func), "fused_transpose") ||
                !strcmp(ts_func_name(tasks[i].func), "fused_slice"));
    assert_int_equal(ts_func_verify(tasks[i].func, &err), TS_OK);
    /* a conv's weights are constants (tuning's cold confirmation evicts
     * them), its data is not; a task without weights has none */
    const char *name = ts_func_name(tasks[i].func);
    if (strstr(name, "conv") && strncmp(name, "fused_transpose", 15)) {
      assert_int_equal(tasks[i].const_params & 1, 0);
      assert_int_not_equal(tasks[i].const_params & 2, 0);
    }
    if (!strcmp(name, "fused_maxpool") || !strcmp(name, "fused_slice"))
      assert_int_equal(tasks[i].const_params, 0);
  }
  free(tasks);
  ts_graph_free(g);

  g = load_model("bert_small", bert_shapes, 2, NULL, &err);
  assert_non_null(g);
  assert_int_equal(ts_graph_count_op(g, "MatMul"), 0);
  assert_int_equal(ts_graph_tasks(g, &tasks, &n, &err), TS_OK);
  int calls = 0, shared = 0;
  for (int i = 0; i < n; i++) {
    calls += tasks[i].count;
    if (tasks[i].count >= 2) shared++;
  }
  assert_int_equal(calls, ts_graph_count_op(g, "call_tir"));
  assert_true(shared >= 5);
  assert_true(n < calls / 2);
  free(tasks);
  ts_graph_free(g);
}

static void test_npz_roundtrip(void **state) {
  (void)state;
  float a[6] = {1, 2, 3, 4, 5, 6};
  int64_t b[3] = {7, -8, 9};
  ts_graph_tensor t[2] = {{"alpha", TS_FLOAT32, 2, {2, 3}, a},
                          {"beta/x", TS_INT64, 1, {3}, b}};
  const char *path = TS_BINARY_DIR "/graph_models/roundtrip.npz";
  ts_error err;
  assert_int_equal(ts_graph_npz_write(path, t, 2, &err), TS_OK);
  ts_graph_npz *z;
  assert_int_equal(ts_graph_npz_read(path, &z, &err), TS_OK);
  ts_graph_tensor r;
  assert_int_equal(ts_graph_npz_find(z, "alpha", &r, &err), TS_OK);
  assert_int_equal(r.ndim, 2);
  assert_int_equal(r.shape[1], 3);
  assert_memory_equal(r.data, a, sizeof a);
  assert_int_equal(ts_graph_npz_find(z, "beta/x", &r, &err), TS_OK);
  assert_memory_equal(r.data, b, sizeof b);
  assert_int_equal(ts_graph_npz_find(z, "gamma", &r, &err), TS_ENOTFOUND);
  assert_non_null(strstr(err.msg, "'alpha'"));
  ts_graph_npz_free(z);
  /* not a zip */
  char model[512];
  assert_int_not_equal(ts_graph_npz_read(model_path("good", model), &z, &err),
                       TS_OK);
  assert_null(z);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_passes_keep_values),
      cmocka_unit_test(test_override_with_tir),
      cmocka_unit_test(test_fusion_tasks),
      cmocka_unit_test(test_npz_roundtrip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
