/*
 * test_import.c — ONNX import and the pass pipeline on the generated small
 * models: every model imports (BERT's weights as external data), the passes
 * leave the expected operators (no shape chains, no BatchNormalization, no
 * Gemm), the verifier accepts every stage, the text and JSON forms and the
 * structural hash; and every kind of bad input — truncated or corrupt
 * protobuf, unknown operator or opset, inconsistent shapes, symbolic
 * dimensions, absurd sizes, short or missing external data — is an error
 * naming the problem.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "util.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

static void test_models_import(void **state) {
  (void)state;
  static const char *const models[] = {"resnet50_small", "mobilenet_v2_small",
                                       "csrnet_small", "bert_small",
                                       "ops_small"};
  for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
    ts_error err;
    ts_error_clear(&err);
    bool bert = !strcmp(models[i], "bert_small");
    ts_graph *g = load_model(models[i], bert ? bert_shapes : NULL, bert ? 2 : 0,
                             NULL, &err);
    if (!g) fail_msg("%s: %s", models[i], err.msg);
    assert_int_equal(ts_graph_verify(g, &err), TS_OK);
    static const char *const gone[] = {
        "Shape",    "Unsqueeze", "Squeeze", "Flatten",
        "Identity", "Dropout",   "Gemm",    "BatchNormalization"};
    for (size_t k = 0; k < sizeof gone / sizeof gone[0]; k++)
      if (ts_graph_count_op(g, gone[k]))
        fail_msg("%s: %d %s nodes left", models[i],
                 ts_graph_count_op(g, gone[k]), gone[k]);
    for (int k = 0; k < ts_graph_n_outputs(g); k++) {
      ts_graph_value_info o = ts_graph_output(g, k);
      assert_true(o.ndim >= 1);
      for (int d = 0; d < o.ndim; d++) assert_true(o.shape[d] > 0);
    }
    ts_graph_free(g);
  }
}

/* Per stage of the pipeline: the graph verifies, and the op counts move the
 * way each pass promises. */
static void test_pipeline_stages(void **state) {
  (void)state;
  ts_error err;
  ts_graph *g = load_model("bert_small", bert_shapes, 2, "none", &err);
  assert_non_null(g);
  int shapes_before = ts_graph_count_op(g, "Shape");
  assert_true(shapes_before > 0);
  ts_graph_free(g);
  const char *const *passes = ts_graph_pass_names();
  int prev_nodes = 1 << 30;
  for (int p = 0; passes[p]; p++) {
    g = load_model("bert_small", bert_shapes, 2, passes[p], &err);
    if (!g) fail_msg("after %s: %s", passes[p], err.msg);
    assert_int_equal(ts_graph_verify(g, &err), TS_OK);
    if (!strcmp(passes[p], "fold")) {
      assert_int_equal(ts_graph_count_op(g, "Shape"), 0);
      assert_int_equal(ts_graph_count_op(g, "Concat"), 0);
    }
    if (strcmp(passes[p], "lower"))
      assert_true(ts_graph_n_nodes(g) <= prev_nodes);
    prev_nodes = ts_graph_n_nodes(g);
    ts_graph_free(g);
  }
  g = load_model("resnet50_small", NULL, 0, "cse", &err);
  assert_non_null(g);
  int bn = ts_graph_count_op(g, "BatchNormalization");
  assert_true(bn > 0);
  ts_graph_free(g);
  g = load_model("resnet50_small", NULL, 0, "bn_fold", &err);
  assert_int_equal(ts_graph_count_op(g, "BatchNormalization"), 0);
  assert_int_equal(ts_graph_count_op(g, "Gemm"), 1);
  ts_graph_free(g);
  g = load_model("resnet50_small", NULL, 0, "nosuchpass", &err);
  assert_null(g);
  assert_int_equal(err.code, TS_EINVAL);
  assert_non_null(strstr(err.msg, "nosuchpass"));
}

static void test_print_and_hash(void **state) {
  (void)state;
  ts_error err;
  ts_graph *a = load_model("resnet50_small", NULL, 0, NULL, &err);
  ts_graph *b = load_model("resnet50_small", NULL, 0, NULL, &err);
  ts_graph *c = load_model("resnet50_small", NULL, 0, "fold", &err);
  assert_non_null(a);
  assert_non_null(b);
  assert_non_null(c);
  assert_true(ts_hash128_eq(ts_graph_hash(a), ts_graph_hash(b)));
  assert_false(ts_hash128_eq(ts_graph_hash(a), ts_graph_hash(c)));
  char *text = ts_graph_print(a);
  assert_non_null(strstr(text, "input %data: float32[1, 3, 32, 32] NCHW"));
  assert_non_null(strstr(text, " = call_tir[fused_conv_relu"));
  assert_non_null(strstr(text, "; task "));
  assert_non_null(strstr(text, "output %"));
  free(text);
  char *json = ts_graph_print_json(a);
  cJSON *root = cJSON_Parse(json);
  assert_non_null(root);
  cJSON *nodes = cJSON_GetObjectItem(root, "nodes");
  assert_int_equal(cJSON_GetArraySize(nodes), ts_graph_n_nodes(a));
  char hex[33];
  ts_hash128_hex(ts_graph_hash(a), hex);
  assert_string_equal(cJSON_GetObjectItem(root, "hash")->valuestring, hex);
  cJSON_Delete(root);
  free(json);
  ts_graph_free(a);
  ts_graph_free(b);
  ts_graph_free(c);
}

typedef struct bad_case {
  const char *file;
  int code;
  const char *needle; /* the message must contain it */
} bad_case;

static void test_bad_models(void **state) {
  (void)state;
  static const bad_case cases[] = {
      {"truncated", TS_EPARSE, "truncated or corrupt"},
      {"corrupt", TS_EPARSE, "truncated or corrupt"},
      {"unknown_op", TS_EUNSUPPORTED, "'FooBar'"},
      {"unknown_op", TS_EUNSUPPORTED, "node 'mystery'"},
      {"unknown_op", TS_EUNSUPPORTED, "opset 13"},
      {"opset6", TS_EUNSUPPORTED, "opset is 6"},
      {"opset22", TS_EUNSUPPORTED, "opset is 22"},
      {"dynamic", TS_EINVAL, "'x'"},
      {"dynamic", TS_EINVAL, "--input-shape"},
      {"absurd", TS_ENOMEM, "initializer 'w'"},
      {"short_raw", TS_EINVAL, "raw data has 20 bytes"},
      {"missing_external", TS_EIO, "missing.bin"},
      {"escaping_external", TS_EINVAL, "relative path"},
      {"no_such_model", TS_EIO, "cannot open"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ts_error err;
    ts_error_clear(&err);
    ts_graph *g = (ts_graph *)1;
    char path[512];
    int rc =
        ts_graph_import_onnx(model_path(cases[i].file, path), NULL, &g, &err);
    if (rc != cases[i].code)
      fail_msg("%s: code %d, want %d (%s)", cases[i].file, rc, cases[i].code,
               err.msg);
    assert_null(g);
    if (!strstr(err.msg, cases[i].needle))
      fail_msg("%s: message '%s' lacks '%s'", cases[i].file, err.msg,
               cases[i].needle);
  }
  /* inconsistent shapes are found by shape inference */
  ts_error err;
  ts_graph *g = load_model("bad_shapes", NULL, 0, "none", &err);
  assert_non_null(g);
  assert_int_equal(ts_graph_run_passes(g, NULL, &err), TS_EINVAL);
  assert_non_null(strstr(err.msg, "node 'mm' (MatMul"));
  assert_non_null(strstr(err.msg, "inner dimensions differ"));
  ts_graph_free(g);
}

static void test_input_shapes(void **state) {
  (void)state;
  ts_error err;
  const char *const ok[] = {"x=2x4"};
  ts_graph *g = load_model("dynamic", ok, 1, NULL, &err);
  assert_non_null(g);
  assert_int_equal(ts_graph_input(g, 0).shape[0], 2);
  assert_int_equal(ts_graph_output(g, 0).shape[0], 2);
  ts_graph_free(g);
  static const struct {
    const char *opt, *needle;
  } bad[] = {{"x=2x5", "dimension 1 is 4"},
             {"x=2", "rank 1"},
             {"y=2x4", "'y', which is not a graph input"},
             {"x=2xq", "bad dimension list"},
             {"x2x4", "expected NAME="}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    const char *opts[] = {bad[i].opt};
    ts_error_clear(&err);
    assert_null(load_model("dynamic", opts, 1, NULL, &err));
    if (!strstr(err.msg, bad[i].needle))
      fail_msg("%s: '%s' lacks '%s'", bad[i].opt, err.msg, bad[i].needle);
  }
  /* bert without shapes names its symbolic input */
  assert_null(load_model("bert_small", NULL, 0, NULL, &err));
  assert_non_null(strstr(err.msg, "'input_ids'"));
}

/* Byte-level damage of a good model never crashes the importer. */
static void test_damaged_bytes(void **state) {
  (void)state;
  char path[512];
  FILE *f = fopen(model_path("resnet50_small", path), "rb");
  assert_non_null(f);
  static uint8_t buf[1 << 20];
  size_t len = fread(buf, 1, sizeof buf, f);
  fclose(f);
  assert_true(len > 1000);
  uint64_t seed = 12345;
  for (int trial = 0; trial < 200; trial++) {
    static uint8_t copy[1 << 20];
    memcpy(copy, buf, len);
    size_t n = len;
    for (int k = 0; k < 4; k++) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      size_t at = (size_t)(seed >> 33) % 4096; /* the header and first nodes */
      copy[at % n] ^= (uint8_t)(seed >> 20);
    }
    if (trial % 3 == 0) n = (size_t)(seed >> 40) % n;
    ts_graph *g;
    ts_error err;
    if (ts_graph_import_onnx_bytes(copy, n, NULL, NULL, &g, &err) == TS_OK) {
      ts_graph_run_passes(g, NULL, &err); /* may fail; must not crash */
      ts_graph_free(g);
    } else {
      assert_true(err.msg[0] != 0);
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_models_import),
      cmocka_unit_test(test_pipeline_stages),
      cmocka_unit_test(test_print_and_hash),
      cmocka_unit_test(test_bad_models),
      cmocka_unit_test(test_input_shapes),
      cmocka_unit_test(test_damaged_bytes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
