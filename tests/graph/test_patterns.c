/*
 * test_patterns.c — the patterns pass: the small BERT's spelled-out layer
 * norms and erf GELUs become LayerNormalization and Gelu nodes with the
 * same values; hand-built chains are rewritten in each accepted spelling
 * (Pow or Mul for the square, with or without gamma/beta; x/sqrt2 or
 * x*(1/sqrt2), the half first or last) and left alone when an intermediate
 * has another use, when a constant has the wrong value, or when the mean
 * runs over another axis; a channel shuffle becomes one Gather (not when
 * an intermediate escapes or the transpose moves other axes). Fusion takes
 * elementwise diamonds (x *
 * Sigmoid(x)) into the anchor's group, and stops where a value escapes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "util.h"

#include "graph/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- graph building ---- */

enum { ROWS = 3, COLS = 8 };

static int value2(ts_graph *g, int64_t cols) {
  int64_t shape[2] = {ROWS, cols};
  return gr_value_fresh(g, "v", TS_FLOAT32, 2, shape);
}

static int scalar(ts_graph *g, float v) {
  return gr_const_add(g, gr_fresh_name(g, "c"), TS_FLOAT32, 0, NULL, &v);
}

static int channel(ts_graph *g, float base) {
  float v[COLS];
  for (int i = 0; i < COLS; i++) v[i] = base + 0.125f * (float)i;
  int64_t n = COLS;
  return gr_const_add(g, gr_fresh_name(g, "ch"), TS_FLOAT32, 1, &n, v);
}

static int op1(ts_graph *g, const char *op, int a, int64_t cols) {
  int out = value2(g, cols);
  gr_node_add(g, op, gr_fresh_name(g, op), &a, 1, &out, 1);
  return out;
}

static int op2(ts_graph *g, const char *op, int a, int b, int64_t cols) {
  int ins[2] = {a, b}, out = value2(g, cols);
  gr_node_add(g, op, gr_fresh_name(g, op), ins, 2, &out, 1);
  return out;
}

static int mean_last(ts_graph *g, int a, int64_t axis) {
  int out = value2(g, 1);
  gr_node *n =
      gr_node_add(g, "ReduceMean", gr_fresh_name(g, "mean"), &a, 1, &out, 1);
  int64_t *axes = ts_arena_alloc(g->arena, sizeof *axes);
  axes[0] = axis;
  gr_node_set_attr(
      g, n,
      (gr_attr){.name = "axes", .kind = GR_ATTR_INTS, .n = 1, .ints = axes});
  return out;
}

static void set_io(ts_graph *g, int in, const int *outs, int n_outs) {
  g->inputs = ts_arena_alloc(g->arena, sizeof(int));
  g->inputs[0] = in;
  g->n_inputs = 1;
  g->values[in].is_input = true;
  g->outputs = ts_arena_alloc(g->arena, sizeof(int) * (size_t)n_outs);
  memcpy(g->outputs, outs, sizeof(int) * (size_t)n_outs);
  g->n_outputs = n_outs;
  gr_reindex(g);
}

typedef struct ln_opts {
  bool mul_square, affine, extra_use, wrong_axis;
  float eps;
} ln_opts;

/* x -> the spelled-out layer norm; returns the graph. */
static ts_graph *layer_norm_graph(ln_opts o) {
  ts_graph *g = ts_graph_new("ln");
  int x = value2(g, COLS);
  int m = mean_last(g, x, o.wrong_axis ? 0 : -1);
  int d = op2(g, "Sub", x, m, COLS);
  int p = o.mul_square ? op2(g, "Mul", d, d, COLS)
                       : op2(g, "Pow", d, scalar(g, 2), COLS);
  int v = mean_last(g, p, -1);
  int s = op1(g, "Sqrt", op2(g, "Add", v, scalar(g, o.eps), 1), 1);
  int y = op2(g, "Div", d, s, COLS);
  if (o.affine)
    y = op2(g, "Add", op2(g, "Mul", y, channel(g, 0.5f), COLS),
            channel(g, -0.25f), COLS);
  int outs[2] = {y, d};
  set_io(g, x, outs, o.extra_use ? 2 : 1);
  return g;
}

typedef struct gelu_opts {
  bool mul_form, half_first, wrong_one;
} gelu_opts;

static ts_graph *gelu_graph(gelu_opts o) {
  ts_graph *g = ts_graph_new("gelu");
  int x = value2(g, COLS);
  int a = o.mul_form ? op2(g, "Mul", x, scalar(g, (float)M_SQRT1_2), COLS)
                     : op2(g, "Div", x, scalar(g, (float)M_SQRT2), COLS);
  int b = op2(g, "Add", op1(g, "Erf", a, COLS),
              scalar(g, o.wrong_one ? 2.f : 1.f), COLS);
  int y;
  if (o.half_first)
    y = op2(g, "Mul", op2(g, "Mul", x, scalar(g, 0.5f), COLS), b, COLS);
  else
    y = op2(g, "Mul", op2(g, "Mul", x, b, COLS), scalar(g, 0.5f), COLS);
  set_io(g, x, &y, 1);
  return g;
}

/* Runs g on a seeded input before and after `pass`; returns how many
 * nodes of `op` the pass left, and checks the values agree. */
static int pass_and_compare(ts_graph *g, const char *op,
                            int (*pass)(ts_graph *, ts_error *)) {
  ts_error err;
  if (ts_graph_infer_shapes(g, &err)) fail_msg("shapes: %s", err.msg);
  float in[ROWS * COLS];
  for (int i = 0; i < ROWS * COLS; i++)
    in[i] = (float)sin(1.7 * i) * 2 + 0.1f * (float)i;
  ts_graph_tensor t = {.name = "x",
                       .dtype = TS_FLOAT32,
                       .ndim = 2,
                       .shape = {ROWS, COLS},
                       .data = in};
  int n_out = ts_graph_n_outputs(g);
  ts_graph_tensor before[2], after[2];
  memset(before, 0, sizeof before);
  memset(after, 0, sizeof after);
  if (ts_graph_execute(g, TS_GRAPH_INTERPRET, &t, 1, before, n_out, &err))
    fail_msg("before: %s", err.msg);
  if (pass(g, &err)) fail_msg("pass: %s", err.msg);
  if (ts_graph_verify(g, &err)) fail_msg("verify: %s", err.msg);
  if (ts_graph_execute(g, TS_GRAPH_INTERPRET, &t, 1, after, n_out, &err))
    fail_msg("after: %s", err.msg);
  for (int k = 0; k < n_out; k++) {
    const float *a = before[k].data, *b = after[k].data;
    int64_t n = 1;
    for (int d = 0; d < before[k].ndim; d++) n *= before[k].shape[d];
    for (int64_t i = 0; i < n; i++)
      if (fabsf(a[i] - b[i]) > 1e-5f * (1 + fabsf(a[i])))
        fail_msg("output %d [%lld]: %g before, %g after", k, (long long)i,
                 (double)a[i], (double)b[i]);
    free(before[k].data);
    free(after[k].data);
  }
  return ts_graph_count_op(g, op);
}

static int rewrite_and_compare(ts_graph *g, const char *op) {
  return pass_and_compare(g, op, ts_graph_match_patterns);
}

static void test_layer_norm_spellings(void **state) {
  (void)state;
  for (int v = 0; v < 4; v++) {
    ln_opts o = {.mul_square = v & 1, .affine = v & 2, .eps = 1e-5f};
    ts_graph *g = layer_norm_graph(o);
    assert_int_equal(rewrite_and_compare(g, "LayerNormalization"), 1);
    assert_int_equal(ts_graph_count_op(g, "ReduceMean"), 0);
    assert_int_equal(ts_graph_count_op(g, "Sqrt"), 0);
    ts_graph_free(g);
  }
}

static void test_layer_norm_refused(void **state) {
  (void)state;
  ln_opts extra = {.affine = true, .extra_use = true, .eps = 1e-5f};
  ln_opts axis = {.affine = true, .wrong_axis = true, .eps = 1e-5f};
  ln_opts negative = {.eps = -1};
  ln_opts cases[] = {extra, axis, negative};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ts_graph *g = layer_norm_graph(cases[i]);
    assert_int_equal(rewrite_and_compare(g, "LayerNormalization"), 0);
    assert_int_equal(ts_graph_count_op(g, "ReduceMean"), 2);
    ts_graph_free(g);
  }
}

static void test_gelu_spellings(void **state) {
  (void)state;
  for (int v = 0; v < 4; v++) {
    gelu_opts o = {.mul_form = v & 1, .half_first = v & 2};
    ts_graph *g = gelu_graph(o);
    assert_int_equal(rewrite_and_compare(g, "Gelu"), 1);
    assert_int_equal(ts_graph_count_op(g, "Erf"), 0);
    assert_int_equal(ts_graph_n_nodes(g), 1);
    ts_graph_free(g);
  }
  ts_graph *g = gelu_graph((gelu_opts){.wrong_one = true});
  assert_int_equal(rewrite_and_compare(g, "Gelu"), 0);
  assert_int_equal(ts_graph_count_op(g, "Erf"), 1);
  ts_graph_free(g);
}

/* x [3, 8] -> Reshape [3, a, 8 / a] -> Transpose perm -> Reshape [3, 8]
 * -> Relu; with `escape`, the transposed value is a graph output too. */
static ts_graph *shuffle_graph(int64_t a, const int64_t *perm, bool escape) {
  ts_graph *g = ts_graph_new("shuffle");
  int x = value2(g, COLS);
  int64_t split[3] = {ROWS, a, COLS / a}, two = 2, three = 3;
  int64_t back[2] = {ROWS, COLS};
  int s1 = gr_const_add(g, gr_fresh_name(g, "s"), TS_INT64, 1, &three, split);
  int s2 = gr_const_add(g, gr_fresh_name(g, "s"), TS_INT64, 1, &two, back);
  int ins[2] = {x, s1};
  int r = gr_value_fresh(g, "r", TS_FLOAT32, -1, NULL);
  gr_node_add(g, "Reshape", gr_fresh_name(g, "Reshape"), ins, 2, &r, 1);
  int t = gr_value_fresh(g, "t", TS_FLOAT32, -1, NULL);
  gr_node *tn =
      gr_node_add(g, "Transpose", gr_fresh_name(g, "T"), &r, 1, &t, 1);
  gr_node_set_attr(g, tn,
                   (gr_attr){.name = "perm",
                             .kind = GR_ATTR_INTS,
                             .n = 3,
                             .ints = (int64_t *)perm});
  int ins2[2] = {t, s2};
  int y = value2(g, COLS);
  gr_node_add(g, "Reshape", gr_fresh_name(g, "Reshape"), ins2, 2, &y, 1);
  int outs[2] = {op1(g, "Relu", y, COLS), t};
  set_io(g, x, outs, escape ? 2 : 1);
  return g;
}

/* ShuffleNet's channel shuffle (split an axis, swap the halves, merge)
 * becomes one Gather of the axis, with the same values; a transpose that
 * moves other axes, or an intermediate read elsewhere, is left alone. */
static void test_axis_shuffle(void **state) {
  (void)state;
  static const int64_t swap[3] = {0, 2, 1}, other[3] = {1, 0, 2};
  for (int64_t a = 2; a <= 4; a *= 2) {
    ts_graph *g = shuffle_graph(a, swap, false);
    assert_int_equal(rewrite_and_compare(g, "Gather"), 1);
    assert_int_equal(ts_graph_count_op(g, "Transpose"), 0);
    ts_graph_free(g);
  }
  ts_graph *g = shuffle_graph(2, other, false);
  assert_int_equal(rewrite_and_compare(g, "Gather"), 0);
  ts_graph_free(g);
  g = shuffle_graph(2, swap, true);
  assert_int_equal(rewrite_and_compare(g, "Gather"), 0);
  ts_graph_free(g);
}

/* Fusion takes an elementwise diamond after an anchor into the anchor's
 * group: x * Sigmoid(x) and the tanh GELU (x read by four nodes) after a
 * MatMul are one call each. Where the anchor's value is also read outside
 * (a graph output, or a reduction between the diamond's nodes), the group
 * stops before the diamond. Values are the same as before fusion. */
enum { DIAMOND_SILU, DIAMOND_GELU, DIAMOND_ESCAPES, DIAMOND_REDUCED };
static ts_graph *diamond_graph(int kind) {
  ts_graph *g = ts_graph_new("diamond");
  int x = value2(g, COLS);
  float w[COLS * COLS];
  for (int i = 0; i < COLS * COLS; i++) w[i] = (float)cos(0.3 * i) * 0.5f;
  int64_t wshape[2] = {COLS, COLS};
  int wv = gr_const_add(g, gr_fresh_name(g, "w"), TS_FLOAT32, 2, wshape, w);
  int m = op2(g, "MatMul", x, wv, COLS), y, outs[2];
  if (kind == DIAMOND_GELU) {
    int cube = op2(g, "Pow", m, scalar(g, 3), COLS);
    int inner =
        op2(g, "Add", m, op2(g, "Mul", cube, scalar(g, 0.044715f), COLS), COLS);
    int t =
        op1(g, "Tanh", op2(g, "Mul", inner, scalar(g, 0.7978846f), COLS), COLS);
    y = op2(g, "Mul", op2(g, "Mul", m, scalar(g, 0.5f), COLS),
            op2(g, "Add", t, scalar(g, 1), COLS), COLS);
  } else {
    int sg = op1(g, "Sigmoid", m, COLS);
    if (kind == DIAMOND_REDUCED) outs[1] = mean_last(g, m, 1);
    y = op2(g, "Mul", m, sg, COLS);
  }
  outs[0] = y;
  if (kind == DIAMOND_ESCAPES) outs[1] = m;
  set_io(g, x, outs, kind >= DIAMOND_ESCAPES ? 2 : 1);
  return g;
}

static void test_fusion_diamonds(void **state) {
  (void)state;
  for (int kind = 0; kind < 4; kind++) {
    ts_graph *g = diamond_graph(kind);
    int calls = pass_and_compare(g, "call_tir", ts_graph_fuse);
    if (kind <= DIAMOND_GELU) {
      assert_int_equal(calls, 1);
      assert_int_equal(ts_graph_count_op(g, "Mul"), 0);
    } else {
      /* the MatMul alone; Sigmoid and Mul (and the mean) apart */
      assert_true(calls >= 2);
      const char *name = NULL;
      for (int i = 0; i < ts_graph_n_nodes(g) && !name; i++)
        if (ts_graph_node_func(g, i) &&
            strstr(ts_func_name(ts_graph_node_func(g, i)), "matmul"))
          name = ts_func_name(ts_graph_node_func(g, i));
      assert_non_null(name);
      assert_string_equal(name, "fused_matmul");
    }
    ts_graph_free(g);
  }
}

/* The small BERT: every layer norm and GELU recognized, the values kept. */
static void test_bert(void **state) {
  (void)state;
  ts_error err;
  ts_graph *g = load_model("bert_small", bert_shapes, 2, "bn_fold", &err);
  if (!g) fail_msg("%s", err.msg);
  int means = ts_graph_count_op(g, "ReduceMean"),
      erfs = ts_graph_count_op(g, "Erf");
  assert_true(means > 0 && means % 2 == 0);
  assert_true(erfs > 0);
  int64_t ids[16], mask[16];
  for (int i = 0; i < 16; i++) {
    ids[i] = (i * 7 + 3) % 50;
    mask[i] = i < 12;
  }
  ts_graph_tensor in[2] = {{.name = "input_ids",
                            .dtype = TS_INT64,
                            .ndim = 2,
                            .shape = {1, 16},
                            .data = ids},
                           {.name = "attention_mask",
                            .dtype = TS_INT64,
                            .ndim = 2,
                            .shape = {1, 16},
                            .data = mask}};
  int n_out = ts_graph_n_outputs(g);
  ts_graph_tensor before[4], after[4];
  assert_true(n_out <= 4);
  memset(before, 0, sizeof before);
  memset(after, 0, sizeof after);
  if (ts_graph_execute(g, TS_GRAPH_COMPILE, in, 2, before, n_out, &err))
    fail_msg("before: %s", err.msg);
  if (ts_graph_match_patterns(g, &err)) fail_msg("%s", err.msg);
  assert_int_equal(ts_graph_count_op(g, "LayerNormalization"), means / 2);
  assert_int_equal(ts_graph_count_op(g, "Gelu"), erfs);
  assert_int_equal(ts_graph_count_op(g, "ReduceMean"), 0);
  assert_int_equal(ts_graph_count_op(g, "Erf"), 0);
  if (ts_graph_execute(g, TS_GRAPH_COMPILE, in, 2, after, n_out, &err))
    fail_msg("after: %s", err.msg);
  for (int k = 0; k < n_out; k++) {
    int64_t n = 1;
    for (int d = 0; d < before[k].ndim; d++) n *= before[k].shape[d];
    const float *a = before[k].data, *b = after[k].data;
    for (int64_t i = 0; i < n; i++)
      if (fabsf(a[i] - b[i]) > 1e-4f * (1 + fabsf(a[i])))
        fail_msg("output %d [%lld]: %g before, %g after", k, (long long)i,
                 (double)a[i], (double)b[i]);
    free(before[k].data);
    free(after[k].data);
  }
  ts_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layer_norm_spellings),
      cmocka_unit_test(test_layer_norm_refused),
      cmocka_unit_test(test_gelu_spellings),
      cmocka_unit_test(test_bert),
      cmocka_unit_test(test_fusion_diamonds),
      cmocka_unit_test(test_axis_shuffle),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
