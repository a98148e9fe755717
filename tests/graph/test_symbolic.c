/*
 * test_symbolic.c — named dynamic dimensions: --dim gives one a size in
 * every input that has it; the symbolic import derives every value's shape
 * in the symbols (BERT's batch and sequence through the Shape/Gather/Concat
 * chains of its reshapes, through fusion; a CNN's batch through Flatten),
 * and refuses a dimension no polynomial gives (a strided window over a
 * symbolic height) and options that name no dimension.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "util.h"

static ts_graph *symbolic(const char *name, const char *const *dims, int n_dims,
                          const char *after, ts_error *err) {
  char path[512];
  ts_graph_import_options o = {0};
  o.dims = dims;
  o.n_dims = n_dims;
  ts_graph *g = NULL;
  if (ts_graph_import_symbolic(model_path(name, path), &o, after, &g, err))
    return NULL;
  return g;
}

static void dim_is(const ts_graph *g, const char *value, int d,
                   const char *want) {
  char buf[128];
  assert_true(ts_graph_value_dim_text(g, value, d, buf, sizeof buf));
  if (strcmp(buf, want))
    print_error("%s dim %d: '%s', expected '%s'\n", value, d, buf, want);
  assert_string_equal(buf, want);
}

/* the name of the first output of the first node of type op */
static const char *output_of(const ts_graph *g, const char *op) {
  char *text = ts_graph_print(g);
  assert_non_null(text);
  static char name[256];
  name[0] = 0;
  char pat[64];
  snprintf(pat, sizeof pat, " = %s[", op);
  const char *at = strstr(text, pat);
  if (at) {
    const char *line = at;
    while (line > text && line[-1] != '\n') line--;
    while (*line == ' ') line++;
    sscanf(line, "%%%255[^ ,]", name);
  }
  free(text);
  assert_true(name[0]);
  return name;
}

static void test_dim_option(void **state) {
  (void)state;
  ts_error err;
  char path[512];
  ts_graph_import_options o = {0};
  ts_graph *g = NULL;
  /* without a size: the message names the dimension and both options */
  assert_int_equal(
      ts_graph_import_onnx(model_path("bert_small", path), &o, &g, &err),
      TS_EINVAL);
  assert_non_null(strstr(err.msg, "('batch') is dynamic"));
  assert_non_null(strstr(err.msg, "--dim batch=N"));
  /* one --dim per symbol sizes both inputs */
  const char *dims[] = {"batch=2", "sequence=9"};
  o.dims = dims;
  o.n_dims = 2;
  assert_int_equal(ts_graph_import_onnx(path, &o, &g, &err), TS_OK);
  ts_graph_value_info in = ts_graph_input(g, 1);
  assert_int_equal(in.ndim, 2);
  assert_int_equal(in.shape[0], 2);
  assert_int_equal(in.shape[1], 9);
  assert_int_equal(ts_graph_n_symbols(g), 0);
  ts_graph_free(g);
  /* --input-shape wins over --dim */
  const char *shapes[] = {"input_ids=2x9", "attention_mask=2x9"};
  const char *dims2[] = {"batch=3", "sequence=9"};
  o.dims = dims2;
  o.input_shapes = shapes;
  o.n_input_shapes = 2;
  assert_int_equal(ts_graph_import_onnx(path, &o, &g, &err), TS_OK);
  assert_int_equal(ts_graph_input(g, 0).shape[0], 2);
  ts_graph_free(g);
  /* bad options */
  o.n_input_shapes = 0;
  const char *unknown[] = {"seq=9"};
  o.dims = unknown;
  o.n_dims = 1;
  assert_int_equal(ts_graph_import_onnx(path, &o, &g, &err), TS_EINVAL);
  assert_non_null(strstr(err.msg, "'seq', which no graph input's dimension"));
  const char *bad[][1] = {{"batch"}, {"batch=0"}, {"batch=x"}, {"=4"}};
  for (int i = 0; i < 4; i++) {
    o.dims = bad[i];
    assert_int_equal(ts_graph_import_onnx(path, &o, &g, &err), TS_EINVAL);
    assert_non_null(strstr(err.msg, "expected SYMBOL=SIZE"));
  }
}

static void test_bert_symbolic(void **state) {
  (void)state;
  ts_error err;
  ts_graph *g = symbolic("bert_small", NULL, 0, "dce", &err);
  if (!g) print_error("%s\n", err.msg);
  assert_non_null(g);
  assert_int_equal(ts_graph_n_symbols(g), 2);
  int64_t size;
  assert_string_equal(ts_graph_symbol(g, 0, &size), "batch");
  assert_string_equal(ts_graph_symbol(g, 1, NULL), "sequence");
  assert_null(ts_graph_symbol(g, 2, NULL));
  dim_is(g, "input_ids", 0, "batch");
  dim_is(g, "input_ids", 1, "sequence");
  /* attention scores: [batch, heads, sequence, sequence] */
  const char *p = output_of(g, "Softmax");
  dim_is(g, p, 0, "batch");
  dim_is(g, p, 1, "4");
  dim_is(g, p, 2, "sequence");
  dim_is(g, p, 3, "sequence");
  char *text = ts_graph_print(g);
  assert_non_null(strstr(text, "input %input_ids: int64[batch, sequence]"));
  assert_non_null(strstr(text, "float32[batch, sequence, 64]"));
  free(text);
  /* the hash covers the symbolic form: not the first sizes' graph's */
  ts_hash128 h = ts_graph_hash(g);
  ts_graph *again = symbolic("bert_small", NULL, 0, "dce", &err);
  assert_non_null(again);
  assert_true(ts_hash128_eq(h, ts_graph_hash(again)));
  ts_graph_free(again);
  char path[512];
  const char *first[] = {"batch=5", "sequence=6"};
  ts_graph_import_options o = {0};
  o.dims = first;
  o.n_dims = 2;
  assert_int_equal(
      ts_graph_import_onnx(model_path("bert_small", path), &o, &again, &err),
      TS_OK);
  assert_int_equal(ts_graph_run_passes(again, "dce", &err), TS_OK);
  assert_false(ts_hash128_eq(h, ts_graph_hash(again)));
  ts_graph_free(again);
  ts_graph_free(g);

  /* one symbol sized: the other stays; through fusion the calls' values
   * keep it (the graph's outputs among them) */
  const char *dims[] = {"batch=1"};
  g = symbolic("bert_small", dims, 1, NULL, &err);
  if (!g) print_error("%s\n", err.msg);
  assert_non_null(g);
  assert_int_equal(ts_graph_n_symbols(g), 1);
  assert_string_equal(ts_graph_symbol(g, 0, NULL), "sequence");
  ts_graph_value_info out = ts_graph_output(g, 0);
  dim_is(g, out.name, 0, "1");
  dim_is(g, out.name, 1, "sequence");
  dim_is(g, out.name, 2, "64");
  assert_true(ts_graph_count_op(g, "call_tir") > 0);
  text = ts_graph_print(g);
  assert_non_null(strstr(text, "call_tir"));
  /* the attention group's scores [1, 4, sequence, sequence] are inside
   * its function; its output keeps the symbol */
  assert_non_null(strstr(text, "softmax_matmul"));
  assert_non_null(strstr(text, "float32[1, 4, sequence, 16]"));
  free(text);
  ts_graph_free(g);
}

static void test_cnn_batch(void **state) {
  (void)state;
  ts_error err;
  ts_graph *g = symbolic("dyn_cnn", NULL, 0, "dce", &err);
  if (!g) print_error("%s\n", err.msg);
  assert_non_null(g);
  dim_is(g, "x", 0, "batch");
  dim_is(g, "x", 1, "3");
  dim_is(g, "f", 0, "batch"); /* Flatten: [batch, 4*8*8] */
  dim_is(g, "f", 1, "256");
  dim_is(g, "y", 0, "batch");
  dim_is(g, "y", 1, "10");
  assert_false(ts_graph_value_dim_text(g, "y", 2, (char[8]){0}, 8));
  assert_false(ts_graph_value_dim_text(g, "nope", 0, (char[8]){0}, 8));
  ts_graph_free(g);
}

static void test_refusals(void **state) {
  (void)state;
  ts_error err;
  /* a strided window over the symbolic height */
  assert_null(symbolic("dyn_strided", NULL, 0, "dce", &err));
  assert_int_equal(err.code, TS_EUNSUPPORTED);
  assert_non_null(strstr(err.msg, "dimension 2 of 'y' follows no polynomial "
                                  "in height"));
  assert_non_null(strstr(err.msg, "--dim"));
  /* given a size, the same model imports */
  const char *dims[] = {"height=16"};
  ts_graph *g = symbolic("dyn_strided", dims, 1, "dce", &err);
  assert_non_null(g);
  assert_int_equal(ts_graph_n_symbols(g), 0);
  dim_is(g, "y", 2, "8");
  ts_graph_free(g);
  /* an unknown pass is named */
  assert_null(symbolic("dyn_cnn", NULL, 0, "nosuchpass", &err));
  assert_non_null(strstr(err.msg, "unknown pass 'nosuchpass'"));
  assert_non_null(strstr(err.msg, "batch=5: "));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dim_option),
      cmocka_unit_test(test_bert_symbolic),
      cmocka_unit_test(test_cnn_batch),
      cmocka_unit_test(test_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
