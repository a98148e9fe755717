/*
 * test_layout.c — the layout pass: every zoo model gives the same outputs
 * with the pass on and off, compiled, and through the reference kernels
 * right after the pass (channels-last Conv and pools); ResNet, MobileNet
 * and CSRNet keep exactly one transpose (the model's NCHW input), none
 * inside the network, and their outputs keep their names, shapes and
 * layout; a node that cannot change layout (Softmax over channels) is
 * surrounded by transposes and computes the same values; random chains of
 * transposes in front of a conv compose into one (straight from the input
 * when they cancel), keeping the values; random graphs mixing convertible
 * operators with softmax over channels keep their values and leave a
 * structurally minimal set of transposes; unknown layouts are refused;
 * pointwise convs get weights blocked by 16 output channels, larger
 * kernels whose weights do not stay in cache by the output channels of
 * the default register tile for the target, and compute the same values with
 * their epilogue in the group (channel-split) or, when an operand cannot follow
 * the split, in a group of its own; the input's transpose is read through
 * by a stem conv only (few channels, one group); a per-channel gate on a
 * conv's input moves onto its weights; ConvTranspose becomes a conv of its
 * stride phases with the same values.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "graph/internal.h"
#include "build_util.h"
#include "exec_util.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int run(const ts_graph *g, ts_graph_exec_mode mode,
               ts_graph_tensor *outs) {
  return run_seeded(g, mode, outs, 11);
}

static void same(const ts_graph_tensor *a, const ts_graph_tensor *b, int n,
                 const char *what) {
  assert_same_outputs(a, b, n, what);
}

static void free_outs(ts_graph_tensor *t, int n) {
  for (int i = 0; i < n; i++) free(t[i].data);
}

/* The model through the passes up to `after`, with the given layout. */
static ts_graph *load(const char *model, const char *layout,
                      const char *after) {
  char path[512];
  ts_graph_import_options o = {0};
  bool bert = !strcmp(model, "bert_small");
  o.input_shapes = bert ? bert_shapes : NULL;
  o.n_input_shapes = bert ? 2 : 0;
  ts_graph *g = NULL;
  ts_error err;
  if (ts_graph_import_onnx(model_path(model, path), &o, &g, &err))
    fail_msg("import %s: %s", model, err.msg);
  assert_int_equal(ts_graph_set_layout(g, layout, &err), TS_OK);
  if (ts_graph_run_passes(g, after, &err)) fail_msg("%s: %s", model, err.msg);
  return g;
}

/* Transposes (graph operators or call_tir tasks) in g. */
/* Transposes of 4-D values (layout changes; not the 6-D interleave of a
 * ConvTranspose's phases), as nodes or in calls. */
static int count_transposes(const ts_graph *g) {
  int n = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const gr_node *m = &g->nodes[i];
    bool t = (m->kind == TS_GRAPH_OP && !strcmp(m->op, "Transpose")) ||
             (m->kind == TS_GRAPH_CALL && strstr(m->name, "fused_transpose"));
    n += t && g->values[m->outputs[0]].ndim == 4;
  }
  return n;
}

static void test_models_same_outputs(void **state) {
  (void)state;
  static const char *const models[] = {"resnet50_small", "mobilenet_v2_small",
                                       "csrnet_small", "ops_small",
                                       "bert_small"};
  for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
    ts_graph *off = load(models[m], "nchw", NULL);
    ts_graph *on = load(models[m], "nhwc", NULL);
    ts_graph_tensor a[8], b[8];
    int n = run(off, TS_GRAPH_COMPILE, a);
    assert_int_equal(run(on, TS_GRAPH_COMPILE, b), n);
    same(a, b, n, models[m]);
    free_outs(b, n);
    /* right after the pass: the reference kernels run the channels-last
     * Conv and pools (the interpreter is slow: the smaller models) */
    if (m != 4) {
      ts_graph *ref = load(models[m], "nhwc", "layout");
      assert_int_equal(run(ref, TS_GRAPH_INTERPRET, b), n);
      same(a, b, n, models[m]);
      free_outs(b, n);
      ts_graph_free(ref);
    }
    free_outs(a, n);
    ts_graph_free(off);
    ts_graph_free(on);
  }
}

static void test_one_transpose_at_the_input(void **state) {
  (void)state;
  static const char *const models[] = {"resnet50_small", "mobilenet_v2_small",
                                       "csrnet_small"};
  for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
    ts_graph *off = load(models[m], "nchw", "layout");
    ts_graph *g = load(models[m], "nhwc", "layout");
    assert_int_equal(count_transposes(off), 0);
    assert_int_equal(count_transposes(g), 1);
    assert_true(ts_graph_count_op(g, "Conv") > 0);
    /* every Conv runs channels-last; the one transpose of a 4-D value
     * reads the input (CSRNet's ConvTranspose interleaves its phases with
     * a 6-D one) */
    for (int i = 0; i < g->n_nodes; i++) {
      const gr_node *n = &g->nodes[i];
      if (!strcmp(n->op, "Conv")) assert_true(gr_node_channels_last(n));
      if (!strcmp(n->op, "Transpose") && g->values[n->outputs[0]].ndim == 4)
        assert_true(g->values[n->inputs[0]].is_input);
    }
    /* the model's inputs and outputs are unchanged */
    assert_int_equal(ts_graph_n_outputs(g), ts_graph_n_outputs(off));
    for (int k = 0; k < g->n_outputs; k++) {
      const gr_value *a = &g->values[g->outputs[k]],
                     *b = &off->values[off->outputs[k]];
      assert_string_equal(a->name, b->name);
      assert_int_equal(a->ndim, b->ndim);
      for (int d = 0; d < a->ndim; d++)
        assert_int_equal(a->shape[d], b->shape[d]);
    }
    ts_graph_free(off);
    ts_graph_free(g);
    /* after fusion: the transpose is read through by the first conv, one
     * kernel ("fused_transpose_conv_..."), no transpose task of its own */
    g = load(models[m], "nhwc", NULL);
    assert_int_equal(count_transposes(g), 1);
    bool through = false;
    for (int i = 0; i < g->n_nodes; i++)
      through |= g->nodes[i].kind == TS_GRAPH_CALL &&
                 !strncmp(g->nodes[i].name, "fused_transpose_conv", 20);
    assert_true(through);
    ts_graph_free(g);
  }
}

/* ---- hand-built graphs ---- */

static int transpose(ts_graph *g, int x, const int64_t *perm) {
  int out = gr_value_fresh(g, "t", TS_FLOAT32, -1, NULL);
  gr_node *n = gr_node_add(g, "Transpose", NULL, &x, 1, &out, 1);
  gr_attr a = {.name = "perm", .kind = GR_ATTR_INTS, .n = 4};
  a.ints = (int64_t *)perm;
  gr_node_set_attr(g, n, a);
  return out;
}

/* x -> Conv -> Softmax(axis 1) -> Conv -> output: the softmax keeps NCHW
 * and sits between two transposes; values as without the pass. */
static ts_graph *conv_softmax_conv(void) {
  ts_graph *g = ts_graph_new("csc");
  int x = add_input(g, "x", (int64_t[]){1, 6, 7, 5});
  float w[6 * 6 * 3 * 3];
  for (int i = 0; i < 6 * 6 * 9; i++) w[i] = (float)((i * 37) % 17 - 8) / 8;
  int w1 = gr_const_add(g, "w1", TS_FLOAT32, 4, (int64_t[]){6, 6, 3, 3}, w);
  int c1 = node(g, "Conv", (int[]){x, w1}, 2);
  gr_node_set_attr(g, &g->nodes[g->n_nodes - 1],
                   (gr_attr){.name = "pads",
                             .kind = GR_ATTR_INTS,
                             .n = 4,
                             .ints = (int64_t[]){1, 1, 1, 1}});
  int s = node(g, "Softmax", &c1, 1);
  gr_node_set_attr(g, &g->nodes[g->n_nodes - 1],
                   (gr_attr){.name = "axis", .kind = GR_ATTR_INT, .i = 1});
  int c2 = node(g, "Conv", (int[]){s, w1}, 2);
  int r = node(g, "Relu", &c2, 1);
  set_output(g, r);
  return g;
}

/* Runs both one-output graphs compiled, checks their outputs agree, and
 * frees both. */
static void same_and_free(ts_graph *ref, ts_graph *g, const char *what) {
  ts_graph_tensor a[1], b[1];
  assert_int_equal(run(ref, TS_GRAPH_COMPILE, a), 1);
  assert_int_equal(run(g, TS_GRAPH_COMPILE, b), 1);
  same(a, b, 1, what);
  free_outs(a, 1);
  free_outs(b, 1);
  ts_graph_free(ref);
  ts_graph_free(g);
}

/* x [1, c, 7, 5] -> 3x3 Conv of `groups` groups -> output. */
static ts_graph *one_conv(int64_t c, int64_t groups) {
  ts_graph *g = ts_graph_new("one_conv");
  int x = add_input(g, "x", (int64_t[]){1, c, 7, 5});
  int64_t cig = c / groups, n = c * cig * 9;
  float *w = ts_arena_alloc(g->arena, sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++) w[i] = (float)((i * 37) % 17 - 8) / 8;
  int wv = gr_const_add(g, "w", TS_FLOAT32, 4, (int64_t[]){c, cig, 3, 3}, w);
  int y = node(g, "Conv", (int[]){x, wv}, 2);
  gr_node *cv = &g->nodes[g->n_nodes - 1];
  gr_node_set_attr(g, cv,
                   (gr_attr){.name = "pads",
                             .kind = GR_ATTR_INTS,
                             .n = 4,
                             .ints = (int64_t[]){1, 1, 1, 1}});
  gr_node_set_attr(
      g, cv, (gr_attr){.name = "group", .kind = GR_ATTR_INT, .i = groups});
  set_output(g, y);
  return g;
}

/* The input's transpose is read through by the first conv only where that
 * is an image's few channels into a conv of one group (the stem): a
 * depthwise conv, or one of many channels, takes the transpose's output
 * (read through, each vector of channels would be a gather, or each
 * channel a plane away). Values as with the layout pass off. */
static void test_transpose_into_conv(void **state) {
  (void)state;
  const int64_t cases[3][3] = {{3, 1, 1}, {8, 8, 0}, {8, 1, 0}};
  for (int k = 0; k < 3; k++) {
    ts_error err;
    ts_graph *ref = one_conv(cases[k][0], cases[k][1]);
    assert_int_equal(ts_graph_set_layout(ref, "nchw", &err), TS_OK);
    assert_int_equal(ts_graph_run_passes(ref, NULL, &err), TS_OK);
    ts_graph *g = one_conv(cases[k][0], cases[k][1]);
    assert_int_equal(ts_graph_run_passes(g, NULL, &err), TS_OK);
    bool through = false;
    for (int i = 0; i < g->n_nodes; i++)
      through |= g->nodes[i].kind == TS_GRAPH_CALL &&
                 !strncmp(g->nodes[i].name, "fused_transpose_conv", 20);
    assert_int_equal(through, cases[k][2] != 0);
    same_and_free(ref, g, "one conv");
  }
}

/* Squeeze-and-excitation's gate between two convs: x [1, 8, hw, hw] ->
 * 1x1 Conv z -> Mul(z, Sigmoid(GlobalAveragePool(z))) -> 1x1 Conv to 4
 * channels. */
static ts_graph *gated_conv(int64_t hw) {
  ts_graph *g = ts_graph_new("gated_conv");
  int x = add_input(g, "x", (int64_t[]){1, 8, hw, hw});
  float w[8 * 8];
  for (int i = 0; i < 64; i++) w[i] = (float)((i * 37) % 17 - 8) / 8;
  int w0 = gr_const_add(g, "w0", TS_FLOAT32, 4, (int64_t[]){8, 8, 1, 1}, w);
  int w1 = gr_const_add(g, "w1", TS_FLOAT32, 4, (int64_t[]){4, 8, 1, 1}, w);
  int z = node(g, "Conv", (int[]){x, w0}, 2);
  int gate =
      node(g, "Sigmoid", (int[]){node(g, "GlobalAveragePool", &z, 1)}, 1);
  int y = node(g, "Mul", (int[]){z, gate}, 2);
  set_output(g, node(g, "Conv", (int[]){y, w1}, 2));
  return g;
}

/* The gate moves onto the conv's weights (a Mul of 8 x 4 factors, not one
 * over the activation) where the activation is the larger; the values are
 * those of the graph without the passes. On a 1 x 1 image it stays. */
static void test_scale_onto_weights(void **state) {
  (void)state;
  for (int64_t hw = 1; hw <= 6; hw += 5) {
    ts_error err;
    ts_graph *ref = gated_conv(hw), *g = gated_conv(hw);
    assert_int_equal(ts_graph_run_passes(ref, "lower", &err), TS_OK);
    assert_int_equal(ts_graph_run_passes(g, NULL, &err), TS_OK);
    int64_t act = 0, weights = 0;
    for (int i = 0; i < g->n_nodes; i++) {
      const gr_node *n = &g->nodes[i];
      if (n->kind != TS_GRAPH_CALL || !strstr(ts_func_name(n->func), "mul"))
        continue;
      int64_t e = gr_value_elems(&g->values[n->outputs[0]]);
      act += e == 8 * hw * hw;
      weights += e == 32;
    }
    assert_int_equal(act, hw > 1 ? 0 : 1);
    assert_int_equal(weights, hw > 1 ? 1 : 0);
    same_and_free(ref, g, "gated conv");
  }
}

/* x [1, 5, 6, 7] -> ConvTranspose to 3 channels (kernel k, strides sh x
 * sw, pads p, output_padding op, a bias when `bias`) -> Relu. */
static ts_graph *conv_transpose(int64_t k, int64_t sh, int64_t sw,
                                const int64_t *p, int64_t op, bool bias) {
  ts_graph *g = ts_graph_new("conv_transpose");
  int x = add_input(g, "x", (int64_t[]){1, 5, 6, 7});
  int64_t n = 5 * 3 * k * k;
  float *w = ts_arena_alloc(g->arena, sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++) w[i] = (float)((i * 29) % 23 - 11) / 16;
  int wv = gr_const_add(g, "w", TS_FLOAT32, 4, (int64_t[]){5, 3, k, k}, w);
  int bv = gr_const_add(g, "b", TS_FLOAT32, 1, (int64_t[]){3},
                        (float[]){0.5f, -0.25f, 0.125f});
  int y = node(g, "ConvTranspose", (int[]){x, wv, bv}, bias ? 3 : 2);
  gr_node *c = &g->nodes[g->n_nodes - 1];
  gr_node_set_attr(g, c,
                   (gr_attr){.name = "kernel_shape",
                             .kind = GR_ATTR_INTS,
                             .n = 2,
                             .ints = (int64_t[]){k, k}});
  gr_node_set_attr(g, c,
                   (gr_attr){.name = "strides",
                             .kind = GR_ATTR_INTS,
                             .n = 2,
                             .ints = (int64_t[]){sh, sw}});
  gr_node_set_attr(
      g, c,
      (gr_attr){
          .name = "pads", .kind = GR_ATTR_INTS, .n = 4, .ints = (int64_t *)p});
  gr_node_set_attr(g, c,
                   (gr_attr){.name = "output_padding",
                             .kind = GR_ATTR_INTS,
                             .n = 2,
                             .ints = (int64_t[]){op, op}});
  set_output(g, node(g, "Relu", &y, 1));
  return g;
}

/* x [1, 5, 9] -> 1-D ConvTranspose to 3 channels, kernel 4, stride 3,
 * pads 1 and 2. */
static ts_graph *conv_transpose_1d(void) {
  ts_graph *g = ts_graph_new("conv_transpose_1d");
  int x = gr_value_add(g, "x", TS_FLOAT32, 3, (int64_t[]){1, 5, 9});
  g->values[x].is_input = true;
  g->inputs = ts_arena_alloc(g->arena, sizeof(int));
  g->inputs[0] = x;
  g->n_inputs = 1;
  float w[5 * 3 * 4];
  for (int i = 0; i < 60; i++) w[i] = (float)((i * 29) % 23 - 11) / 16;
  int wv = gr_const_add(g, "w", TS_FLOAT32, 3, (int64_t[]){5, 3, 4}, w);
  int y = node(g, "ConvTranspose", (int[]){x, wv}, 2);
  set_ints(g, "strides", 1, (int64_t[]){3});
  set_ints(g, "pads", 2, (int64_t[]){1, 2});
  set_output(g, y);
  return g;
}

/* ConvTranspose as a conv of its stride phases (graph/lower_convt.c):
 * strides 1 to 3, kernels shorter, equal to and longer than the stride,
 * unequal strides, pads, output_padding, with and without a bias, and a
 * 1-D one, against the direct form (the layout pass off). */
static void test_conv_transpose_phases(void **state) {
  (void)state;
  static const struct {
    int64_t k, sh, sw, pads[4], op;
    bool bias;
  } cases[] = {
      {2, 2, 2, {0, 0, 0, 0}, 0, true}, {4, 2, 2, {1, 1, 1, 1}, 0, false},
      {3, 2, 2, {1, 1, 1, 1}, 1, true}, {5, 3, 3, {2, 1, 0, 2}, 2, true},
      {3, 1, 1, {1, 1, 1, 1}, 0, true}, {1, 2, 2, {0, 0, 0, 0}, 1, false},
      {3, 2, 1, {1, 1, 1, 1}, 0, true}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ts_error err;
    ts_graph *ref = conv_transpose(cases[i].k, cases[i].sh, cases[i].sw,
                                   cases[i].pads, cases[i].op, cases[i].bias);
    ts_graph *g = conv_transpose(cases[i].k, cases[i].sh, cases[i].sw,
                                 cases[i].pads, cases[i].op, cases[i].bias);
    assert_int_equal(ts_graph_set_layout(ref, "nchw", &err), TS_OK);
    assert_int_equal(ts_graph_run_passes(ref, NULL, &err), TS_OK);
    if (ts_graph_run_passes(g, NULL, &err)) fail_msg("passes: %s", err.msg);
    bool direct = false;
    for (int k = 0; k < g->n_nodes; k++)
      direct |= g->nodes[k].kind == TS_GRAPH_CALL &&
                strstr(g->nodes[k].name, "convtranspose");
    assert_false(direct);
    same_and_free(ref, g, "conv transpose");
  }
  /* 1-D, viewed as 2-D of height 1 (the direct form has no compiled 1-D
   * kernel: the reference runs it as a graph operator) */
  ts_error err;
  ts_graph *ref = conv_transpose_1d(), *g = conv_transpose_1d();
  assert_int_equal(ts_graph_set_layout(ref, "nchw", &err), TS_OK);
  assert_int_equal(ts_graph_run_passes(ref, NULL, &err), TS_OK);
  assert_int_equal(ts_graph_count_op(ref, "ConvTranspose"), 1);
  if (ts_graph_run_passes(g, NULL, &err)) fail_msg("1-D: %s", err.msg);
  assert_int_equal(ts_graph_count_op(g, "ConvTranspose"), 0);
  same_and_free(ref, g, "1-D conv transpose");
}

/* NCHW [n, c, h, w] data permuted to NHWC (to = true) or back. */
static void permute4(const float *src, float *dst, const int64_t *nchw,
                     bool to) {
  int64_t n = nchw[0], c = nchw[1], h = nchw[2], w = nchw[3];
  for (int64_t a = 0; a < n; a++)
    for (int64_t k = 0; k < c; k++)
      for (int64_t y = 0; y < h; y++)
        for (int64_t x = 0; x < w; x++) {
          int64_t i = ((a * c + k) * h + y) * w + x;
          int64_t j = ((a * h + y) * w + x) * c + k;
          if (to)
            dst[j] = src[i];
          else
            dst[i] = src[j];
        }
}

/* --input-layout / --output-layout nhwc: the model takes and gives
 * channels-last arrays under the same names, with no transpose left at
 * either edge of a channels-last network, and computes the same values;
 * with the pass off (nchw) one transpose at each edge does the same. */
static void test_io_layout(void **state) {
  (void)state;
  ts_error err;
  const int64_t in_shape[4] = {1, 6, 7, 5};
  int64_t n_in = 6 * 7 * 5;
  float *x = malloc(sizeof(float) * (size_t)n_in);
  float *xt = malloc(sizeof(float) * (size_t)n_in);
  ts_host_fill_random(x, TS_FLOAT32, n_in, 5);
  permute4(x, xt, in_shape, true);
  ts_graph *ref = conv_softmax_conv();
  assert_int_equal(ts_graph_run_passes(ref, NULL, &err), TS_OK);
  ts_graph_tensor in = {"x", TS_FLOAT32, 4, {1, 6, 7, 5}, x}, want[1];
  assert_int_equal(
      ts_graph_execute(ref, TS_GRAPH_COMPILE, &in, 1, want, 1, &err), TS_OK);
  for (int pass_on = 0; pass_on < 2; pass_on++) {
    ts_graph *g = conv_softmax_conv();
    if (!pass_on) assert_int_equal(ts_graph_set_layout(g, "nchw", &err), TS_OK);
    assert_int_equal(ts_graph_set_io_layout(g, "nhwc", "nhwc", &err), TS_OK);
    assert_int_equal(ts_graph_run_passes(g, "layout", &err), TS_OK);
    ts_graph_value_info vi = ts_graph_input(g, 0), vo = ts_graph_output(g, 0);
    assert_string_equal(vi.name, "x");
    assert_string_equal(vo.name, ts_graph_output(ref, 0).name);
    int64_t want_in[4] = {1, 7, 5, 6};
    for (int d = 0; d < 4; d++) assert_int_equal(vi.shape[d], want_in[d]);
    assert_int_equal(vo.shape[3], want[0].shape[1]);
    /* pass on: the input's transpose cancels against the first conv's,
     * the output's against the last conv's; the softmax keeps its two */
    assert_int_equal(count_transposes(g), 2);
    ts_graph_free(g);
    g = conv_softmax_conv();
    if (!pass_on) assert_int_equal(ts_graph_set_layout(g, "nchw", &err), TS_OK);
    assert_int_equal(ts_graph_set_io_layout(g, "nhwc", "nhwc", &err), TS_OK);
    if (ts_graph_run_passes(g, NULL, &err)) fail_msg("passes: %s", err.msg);
    ts_graph_tensor tin = {"x", TS_FLOAT32, 4, {1, 7, 5, 6}, xt}, got[1];
    if (ts_graph_execute(g, TS_GRAPH_COMPILE, &tin, 1, got, 1, &err))
      fail_msg("execute: %s", err.msg);
    int64_t n_out = tensor_elems(&want[0]);
    float *back = malloc(sizeof(float) * (size_t)n_out);
    permute4(got[0].data, back, want[0].shape, false);
    int64_t first;
    double max_err;
    assert_int_equal(ts_host_compare(want[0].data, back, TS_FLOAT32, n_out,
                                     &first, &max_err),
                     0);
    free(back);
    free_outs(got, 1);
    ts_graph_free(g);
  }
  free_outs(want, 1);
  ts_graph_free(ref);
  free(x);
  free(xt);
  /* a bad name is refused, naming the side */
  ts_graph *g = ts_graph_new("x");
  assert_int_equal(ts_graph_set_io_layout(g, "nchw", "chwn", &err), TS_EINVAL);
  assert_non_null(strstr(err.msg, "unknown output layout 'chwn'"));
  ts_graph_free(g);
}

static void test_fixed_layout_op(void **state) {
  (void)state;
  ts_error err;
  ts_graph *a = conv_softmax_conv(), *b = conv_softmax_conv();
  assert_int_equal(ts_graph_set_layout(a, "nchw", &err), TS_OK);
  assert_int_equal(ts_graph_run_passes(a, "layout", &err), TS_OK);
  assert_int_equal(ts_graph_run_passes(b, "layout", &err), TS_OK);
  /* in, back for the softmax, in again for the second conv, out */
  assert_int_equal(count_transposes(b), 4);
  for (int i = 0; i < b->n_nodes; i++)
    if (!strcmp(b->nodes[i].op, "Softmax"))
      assert_true(strcmp(b->values[b->nodes[i].inputs[0]].layout, "NHWC"));
  ts_graph_tensor x[1], y[1];
  run(a, TS_GRAPH_INTERPRET, x);
  run(b, TS_GRAPH_INTERPRET, y);
  same(x, y, 1, "conv-softmax-conv");
  free_outs(x, 1);
  free_outs(y, 1);
  ts_graph_free(a);
  ts_graph_free(b);
  /* unknown layouts are refused */
  a = ts_graph_new("x");
  assert_int_equal(ts_graph_set_layout(a, "nchw16c", &err), TS_EINVAL);
  assert_non_null(strstr(err.msg, "unknown layout 'nchw16c'"));
  ts_graph_free(a);
}

/* x [1, 24, 37] -> 1-D conv (k 5, stride 2, pads 2 and 1, bias) -> relu
 * -> 1-D max pool (k 3, stride 2) -> 1-D conv (4 groups, dilation 2,
 * SAME_UPPER) -> 1-D average pool (k 3, pads excluded): the lowering
 * gives each its 2-D form over [N, C, 1, W], which the layout pass runs
 * channels-last. */
static ts_graph *one_d_windows(void) {
  ts_graph *g = ts_graph_new("conv1d");
  int x = gr_value_add(g, "x", TS_FLOAT32, 3, (int64_t[]){1, 24, 37});
  g->values[x].is_input = true;
  g->inputs = ts_arena_alloc(g->arena, sizeof(int));
  g->inputs[0] = x;
  g->n_inputs = 1;
  float w1[32 * 24 * 5], w2[32 * 8 * 3], b1[32];
  for (int i = 0; i < 32 * 24 * 5; i++)
    w1[i] = (float)((i * 29) % 23 - 11) / 32;
  for (int i = 0; i < 32 * 8 * 3; i++) w2[i] = (float)((i * 17) % 19 - 9) / 16;
  for (int i = 0; i < 32; i++) b1[i] = (float)(i % 7) / 8 - 0.4f;
  int cw1 = gr_const_add(g, "w1", TS_FLOAT32, 3, (int64_t[]){32, 24, 5}, w1);
  int cw2 = gr_const_add(g, "w2", TS_FLOAT32, 3, (int64_t[]){32, 8, 3}, w2);
  int cb1 = gr_const_add(g, "b1", TS_FLOAT32, 1, (int64_t[]){32}, b1);
  int c1 = node(g, "Conv", (int[]){x, cw1, cb1}, 3);
  set_ints(g, "strides", 1, (int64_t[]){2});
  set_ints(g, "pads", 2, (int64_t[]){2, 1});
  int r = node(g, "Relu", &c1, 1);
  int p = node(g, "MaxPool", &r, 1);
  set_ints(g, "kernel_shape", 1, (int64_t[]){3});
  set_ints(g, "strides", 1, (int64_t[]){2});
  int c2 = node(g, "Conv", (int[]){p, cw2}, 2);
  set_ints(g, "dilations", 1, (int64_t[]){2});
  gr_node_set_attr(g, &g->nodes[g->n_nodes - 1],
                   (gr_attr){.name = "group", .kind = GR_ATTR_INT, .i = 4});
  gr_node_set_attr(
      g, &g->nodes[g->n_nodes - 1],
      (gr_attr){.name = "auto_pad", .kind = GR_ATTR_STRING, .s = "SAME_UPPER"});
  int a = node(g, "AveragePool", &c2, 1);
  set_ints(g, "kernel_shape", 1, (int64_t[]){3});
  set_ints(g, "pads", 2, (int64_t[]){1, 1});
  set_output(g, a);
  return g;
}

static void test_one_d_windows(void **state) {
  (void)state;
  ts_error err;
  ts_graph *a = one_d_windows(), *b = one_d_windows(), *c = one_d_windows();
  assert_int_equal(ts_graph_run_passes(a, "patterns", &err), TS_OK);
  if (ts_graph_run_passes(b, "layout", &err) ||
      ts_graph_run_passes(c, NULL, &err))
    fail_msg("%s", err.msg);
  int windows = 0;
  for (int i = 0; i < b->n_nodes; i++) {
    const gr_node *n = &b->nodes[i];
    if (strcmp(n->op, "Conv") && strcmp(n->op, "MaxPool") &&
        strcmp(n->op, "AveragePool"))
      continue;
    windows++;
    assert_int_equal(b->values[n->outputs[0]].ndim, 4);
    if (!gr_node_channels_last(n)) fail_msg("%s not channels-last", n->name);
  }
  assert_int_equal(windows, 4);
  ts_graph_tensor x[1], y[1], z[1];
  run(a, TS_GRAPH_INTERPRET, x);
  run(b, TS_GRAPH_INTERPRET, y);
  run(c, TS_GRAPH_COMPILE, z);
  assert_int_equal(x[0].ndim, 3);
  assert_int_equal(x[0].shape[2], 8); /* 37 -> 18 -> 8 -> 8 -> 8 */
  same(x, y, 1, "1-D windows as 2-D, interpreted");
  same(x, z, 1, "1-D windows as 2-D, compiled");
  free_outs(x, 1);
  free_outs(y, 1);
  free_outs(z, 1);
  ts_graph_free(a);
  ts_graph_free(b);
  ts_graph_free(c);
}

/* Two 3-D convs with a batch norm's scale and shift, a ReLU and a residual
 * Add between them, then a strided 1x1x1 conv and a per-depth constant
 * added: batch 2, a depth stride with asymmetric depth pads, a depth
 * dilation, a bias. */
static ts_graph *three_d_convs(void) {
  ts_graph *g = ts_graph_new("conv3d");
  int x = gr_value_add(g, "x", TS_FLOAT32, 5, (int64_t[]){2, 6, 7, 9, 8});
  g->values[x].is_input = true;
  g->inputs = ts_arena_alloc(g->arena, sizeof(int));
  g->inputs[0] = x;
  g->n_inputs = 1;
  static float w1[8 * 6 * 27], w2[8 * 8 * 27], w3[4 * 8], b1[8], sc[8], sh[8];
  for (int i = 0; i < 8 * 6 * 27; i++) w1[i] = (float)((i * 29) % 23 - 11) / 64;
  for (int i = 0; i < 8 * 8 * 27; i++) w2[i] = (float)((i * 17) % 19 - 9) / 64;
  for (int i = 0; i < 4 * 8; i++) w3[i] = (float)((i * 13) % 11 - 5) / 8;
  for (int i = 0; i < 8; i++)
    b1[i] = (float)(i % 7) / 8 - 0.4f, sc[i] = 1 + i / 16.f,
    sh[i] = (float)(i % 3) / 4 - 0.25f;
  int cw1 =
      gr_const_add(g, "w1", TS_FLOAT32, 5, (int64_t[]){8, 6, 3, 3, 3}, w1);
  int cw2 =
      gr_const_add(g, "w2", TS_FLOAT32, 5, (int64_t[]){8, 8, 3, 3, 3}, w2);
  int cw3 =
      gr_const_add(g, "w3", TS_FLOAT32, 5, (int64_t[]){4, 8, 1, 1, 1}, w3);
  int cb1 = gr_const_add(g, "b1", TS_FLOAT32, 1, (int64_t[]){8}, b1);
  int csc =
      gr_const_add(g, "sc", TS_FLOAT32, 5, (int64_t[]){1, 8, 1, 1, 1}, sc);
  int csh = gr_const_add(g, "sh", TS_FLOAT32, 4, (int64_t[]){8, 1, 1, 1}, sh);
  int c1 = node(g, "Conv", (int[]){x, cw1, cb1}, 3);
  set_ints(g, "strides", 3, (int64_t[]){2, 1, 1});
  set_ints(g, "pads", 6, (int64_t[]){1, 1, 1, 0, 1, 1});
  int m = node(g, "Mul", (int[]){c1, csc}, 2);
  int a = node(g, "Add", (int[]){m, csh}, 2);
  int r = node(g, "Relu", &a, 1);
  int c2 = node(g, "Conv", (int[]){r, cw2}, 2);
  set_ints(g, "dilations", 3, (int64_t[]){2, 1, 1});
  set_ints(g, "pads", 6, (int64_t[]){2, 1, 1, 2, 1, 1});
  int s = node(g, "Add", (int[]){c2, r}, 2);
  int r2 = node(g, "Relu", &s, 1);
  int c3 = node(g, "Conv", (int[]){r2, cw3}, 2);
  set_ints(g, "strides", 3, (int64_t[]){1, 2, 2});
  /* a constant that varies along the depth: this Add stays 5-D */
  float pd[3] = {0.5f, -0.25f, 1};
  int cpd = gr_const_add(g, "pd", TS_FLOAT32, 3, (int64_t[]){3, 1, 1}, pd);
  set_output(g, node(g, "Add", (int[]){c3, cpd}, 2));
  return g;
}

static void test_three_d_convs(void **state) {
  (void)state;
  ts_error err;
  ts_graph *a = three_d_convs(), *b = three_d_convs(), *c = three_d_convs();
  assert_int_equal(ts_graph_run_passes(a, "patterns", &err), TS_OK);
  if (ts_graph_run_passes(b, "layout", &err) ||
      ts_graph_run_passes(c, NULL, &err))
    fail_msg("%s", err.msg);
  int convs = 0, transposes5 = 0;
  for (int i = 0; i < b->n_nodes; i++) {
    const gr_node *n = &b->nodes[i];
    if (!strcmp(n->op, "Transpose") && b->values[n->outputs[0]].ndim == 5)
      transposes5++;
    if (strcmp(n->op, "Conv")) continue;
    convs++;
    assert_int_equal(b->values[n->outputs[0]].ndim, 4);
    if (!gr_node_channels_last(n)) fail_msg("%s not channels-last", n->name);
  }
  assert_int_equal(convs, 3);
  /* the model's input and output only: none between the convs */
  assert_int_equal(transposes5, 2);
  ts_graph_tensor x[1], y[1], z[1];
  run(a, TS_GRAPH_INTERPRET, x);
  run(b, TS_GRAPH_INTERPRET, y);
  run(c, TS_GRAPH_COMPILE, z);
  assert_int_equal(x[0].ndim, 5);
  int64_t want[5] = {2, 4, 3, 5, 4}; /* D 7 -> 3 -> 3 -> 3 */
  for (int d = 0; d < 5; d++) assert_int_equal(x[0].shape[d], want[d]);
  same(x, y, 1, "3-D convs as 2-D, interpreted");
  same(x, z, 1, "3-D convs as 2-D, compiled");
  free_outs(x, 1);
  free_outs(y, 1);
  free_outs(z, 1);
  ts_graph_free(a);
  ts_graph_free(b);
  ts_graph_free(c);
}

/* x -> two 1x1 convs (32 output channels: blocked by 16) -> bias, scale
 * per channel, add -> relu; the second branch adds a per-pixel constant
 * (a [1, 1, 5, 5] plane), which cannot follow the channel split. */
static ts_graph *pointwise(void) {
  ts_graph *g = ts_graph_new("pw");
  ts_error err; /* AVX2's vectors: 16 channels are two */
  assert_int_equal(ts_graph_set_target(g, "llvm -mcpu=haswell", &err), TS_OK);
  int x = add_input(g, "x", (int64_t[]){1, 16, 5, 5});
  float w[32 * 16], b[32], sc[32], pl[25];
  for (int i = 0; i < 32 * 16; i++) w[i] = (float)((i * 29) % 23 - 11) / 16;
  for (int i = 0; i < 32; i++) b[i] = (float)(i % 7) / 8, sc[i] = 1 + i / 64.f;
  for (int i = 0; i < 25; i++) pl[i] = (float)(i % 5) / 4;
  int w1 = gr_const_add(g, "w1", TS_FLOAT32, 4, (int64_t[]){32, 16, 1, 1}, w);
  int b1 = gr_const_add(g, "b1", TS_FLOAT32, 1, (int64_t[]){32}, b);
  int s1 = gr_const_add(g, "s1", TS_FLOAT32, 4, (int64_t[]){1, 32, 1, 1}, sc);
  int p1 = gr_const_add(g, "p1", TS_FLOAT32, 4, (int64_t[]){1, 1, 5, 5}, pl);
  int c1 = node(g, "Conv", (int[]){x, w1, b1}, 3);
  set_ints(g, "kernel_shape", 2, (int64_t[]){1, 1});
  int m1 = node(g, "Mul", (int[]){c1, s1}, 2);
  int c2 = node(g, "Conv", (int[]){x, w1}, 2);
  int a2 = node(g, "Add", (int[]){c2, p1}, 2);
  int sum = node(g, "Add", (int[]){m1, a2}, 2);
  set_output(g, node(g, "Relu", &sum, 1));
  return g;
}

static void test_blocked_pointwise(void **state) {
  (void)state;
  ts_error err;
  ts_graph *ref = pointwise(), *lay = pointwise(), *all = pointwise();
  assert_int_equal(ts_graph_set_layout(ref, "nchw", &err), TS_OK);
  assert_int_equal(ts_graph_run_passes(ref, "layout", &err), TS_OK);
  assert_int_equal(ts_graph_run_passes(lay, "layout", &err), TS_OK);
  int convs = 0;
  for (int i = 0; i < lay->n_nodes; i++) {
    const gr_node *n = &lay->nodes[i];
    if (strcmp(n->op, "Conv")) continue;
    convs++;
    assert_int_equal(gr_conv_weight_block(n), 16);
    const gr_value *w = &lay->values[n->inputs[1]];
    assert_int_equal(w->ndim, 5);
    int64_t want[5] = {2, 1, 1, 16, 16};
    for (int d = 0; d < 5; d++) assert_int_equal(w->shape[d], want[d]);
  }
  assert_int_equal(convs, 2);
  ts_graph_tensor a[1], b[1], c[1];
  run(ref, TS_GRAPH_INTERPRET, a);
  run(lay, TS_GRAPH_INTERPRET, b); /* the reference kernels, blocked */
  same(a, b, 1, "pointwise, reference kernels");
  assert_int_equal(ts_graph_run_passes(all, NULL, &err), TS_OK);
  assert_int_equal(ts_graph_count_op(all, "Conv"), 0); /* all compiled */
  /* the second conv's epilogue could not follow the split: the conv is a
   * group of its own ("fused_conv_N"), the first keeps its epilogue */
  bool alone = false, with_epilogue = false;
  for (int i = 0; i < all->n_nodes; i++) {
    const char *nm = all->nodes[i].name;
    if (all->nodes[i].kind != TS_GRAPH_CALL) continue;
    if (!strncmp(nm, "fused_conv_", 11) && nm[11] >= '0' && nm[11] <= '9')
      alone = true;
    if (strstr(nm, "fused_conv_mul_add")) with_epilogue = true;
  }
  assert_true(alone);
  assert_true(with_epilogue);
  run(all, TS_GRAPH_COMPILE, c);
  same(a, c, 1, "pointwise, compiled");
  free_outs(a, 1);
  free_outs(b, 1);
  free_outs(c, 1);
  ts_graph_free(ref);
  ts_graph_free(lay);
  ts_graph_free(all);
}

/* The compiled call whose name starts with `prefix`, or NULL. */
static const gr_node *call_named(const ts_graph *g, const char *prefix) {
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].kind == TS_GRAPH_CALL &&
        !strncmp(g->nodes[i].name, prefix, strlen(prefix)))
      return &g->nodes[i];
  return NULL;
}

/* Pointwise channels-last convs are matrix products over the merged N, H,
 * W axes: x -> 1x1 conv (24 channels: not blocked) + bias -> relu, and
 * x -> 1x1 conv with stride 2 -> sigmoid, which reads every other row and
 * column: a Slice, then a pointwise conv of stride 1. */
static void test_pointwise_matmul(void **state) {
  (void)state;
  ts_error err;
  ts_graph *g[2];
  for (int k = 0; k < 2; k++) {
    g[k] = ts_graph_new("pwm");
    int x = add_input(g[k], "x", (int64_t[]){1, 16, 6, 6});
    float w[24 * 16], b[24];
    for (int i = 0; i < 24 * 16; i++) w[i] = (float)((i * 31) % 19 - 9) / 16;
    for (int i = 0; i < 24; i++) b[i] = (float)(i % 5) / 8 - 0.25f;
    int w1 =
        gr_const_add(g[k], "w1", TS_FLOAT32, 4, (int64_t[]){24, 16, 1, 1}, w);
    int b1 = gr_const_add(g[k], "b1", TS_FLOAT32, 1, (int64_t[]){24}, b);
    int c1 = node(g[k], "Conv", (int[]){x, w1, b1}, 3);
    set_ints(g[k], "kernel_shape", 2, (int64_t[]){1, 1});
    int r1 = node(g[k], "Relu", &c1, 1);
    int c2 = node(g[k], "Conv", (int[]){x, w1}, 2);
    set_ints(g[k], "strides", 2, (int64_t[]){2, 2});
    int s2 = node(g[k], "Sigmoid", &c2, 1);
    g[k]->outputs = ts_arena_alloc(g[k]->arena, sizeof(int) * 2);
    g[k]->outputs[0] = r1;
    g[k]->outputs[1] = s2;
    g[k]->n_outputs = 2;
  }
  assert_int_equal(ts_graph_set_layout(g[0], "nchw", &err), TS_OK);
  assert_int_equal(ts_graph_run_passes(g[0], "layout", &err), TS_OK);
  assert_int_equal(ts_graph_run_passes(g[1], NULL, &err), TS_OK);
  assert_int_equal(ts_graph_count_op(g[1], "Conv"), 0);
  const gr_node *pw = call_named(g[1], "fused_conv_relu");
  const gr_node *st = call_named(g[1], "fused_conv_sigmoid");
  assert_non_null(pw);
  assert_non_null(st);
  /* data [36, 16], weights [16, 24], bias [24], output [36, 24] */
  static const int64_t want[4][2] = {{36, 16}, {16, 24}, {24, 0}, {36, 24}};
  assert_int_equal(ts_func_n_params(pw->func), 4);
  for (int k = 0; k < 4; k++) {
    const ts_buffer *p = ts_func_param(pw->func, k);
    assert_int_equal(ts_buffer_ndim(p), want[k][1] ? 2 : 1);
    for (int d = 0; d < ts_buffer_ndim(p); d++)
      assert_int_equal(ts_buffer_dim(p, d), want[k][d]);
  }
  /* the subsample [1, 3, 3, 16] read as [9, 16] */
  assert_non_null(call_named(g[1], "fused_slice"));
  const ts_buffer *sp = ts_func_param(st->func, 0);
  assert_int_equal(ts_buffer_ndim(sp), 2);
  assert_int_equal(ts_buffer_dim(sp, 0), 9);
  assert_int_equal(ts_buffer_dim(sp, 1), 16);
  assert_int_equal(ts_graph_verify(g[1], &err), TS_OK);
  ts_graph_tensor a[2], c[2];
  run(g[0], TS_GRAPH_INTERPRET, a);
  run(g[1], TS_GRAPH_COMPILE, c);
  same(a, c, 2, "pointwise as a matrix product, compiled");
  free_outs(a, 2);
  free_outs(c, 2);
  ts_graph_free(g[0]);
  ts_graph_free(g[1]);
}

/* MatMul's constant weights [K, N] are blocked [N/16, K, 16] when 16
 * divides N (two blocks at least) and three of the target's vectors do
 * not: x [2, 4, 8] -> MatMul (N = 32) -> + bias -> relu, and -> MatMul
 * (N = 24: not blocked) -> sigmoid, for an AVX2 target (panels of 24 where
 * they fit) on any host. The reference kernels after the pass, and the
 * compiled graph, agree with the graph as imported. */
static void test_blocked_matmul(void **state) {
  (void)state;
  ts_error err;
  ts_graph *g[3];
  for (int k = 0; k < 3; k++) {
    g[k] = ts_graph_new("bmm");
    assert_int_equal(ts_graph_set_target(g[k], "llvm -mcpu=haswell", &err),
                     TS_OK);
    int64_t xs[3] = {2, 4, 8}; /* 8 rows: blocked (fewer keep [K, N]) */
    int x = gr_value_add(g[k], "x", TS_FLOAT32, 3, xs);
    g[k]->values[x].is_input = true;
    g[k]->inputs = ts_arena_alloc(g[k]->arena, sizeof(int));
    g[k]->inputs[0] = x;
    g[k]->n_inputs = 1;
    float w[8 * 32], b[32];
    for (int i = 0; i < 8 * 32; i++) w[i] = (float)((i * 37) % 29 - 14) / 16;
    for (int i = 0; i < 32; i++) b[i] = (float)(i % 9) / 8 - 0.5f;
    int w1 = gr_const_add(g[k], "w1", TS_FLOAT32, 2, (int64_t[]){8, 32}, w);
    int w2 = gr_const_add(g[k], "w2", TS_FLOAT32, 2, (int64_t[]){8, 24}, w);
    int b1 = gr_const_add(g[k], "b1", TS_FLOAT32, 1, (int64_t[]){32}, b);
    int m1 = node(g[k], "MatMul", (int[]){x, w1}, 2);
    int a1 = node(g[k], "Add", (int[]){m1, b1}, 2);
    int r1 = node(g[k], "Relu", &a1, 1);
    int m2 = node(g[k], "MatMul", (int[]){x, w2}, 2);
    int s2 = node(g[k], "Sigmoid", &m2, 1);
    g[k]->outputs = ts_arena_alloc(g[k]->arena, sizeof(int) * 2);
    g[k]->outputs[0] = r1;
    g[k]->outputs[1] = s2;
    g[k]->n_outputs = 2;
  }
  assert_int_equal(ts_graph_run_passes(g[0], "lower", &err), TS_OK);
  assert_int_equal(ts_graph_run_passes(g[1], "layout", &err), TS_OK);
  int blocked = 0, plain = 0;
  for (int i = 0; i < g[1]->n_nodes; i++) {
    const gr_node *n = &g[1]->nodes[i];
    if (strcmp(n->op, "MatMul")) continue;
    const gr_value *w = &g[1]->values[n->inputs[1]];
    if (gr_matmul_weight_block(n)) {
      blocked++;
      assert_int_equal(w->ndim, 3);
      assert_int_equal(w->shape[0], 2);
      assert_int_equal(w->shape[1], 8);
      assert_int_equal(w->shape[2], 16);
    } else {
      plain++;
      assert_int_equal(w->ndim, 2);
    }
  }
  assert_int_equal(blocked, 1);
  assert_int_equal(plain, 1);
  ts_graph_tensor a[2], b[2], c[2];
  run(g[0], TS_GRAPH_INTERPRET, a);
  run(g[1], TS_GRAPH_INTERPRET, b); /* the reference kernels, blocked */
  same(a, b, 2, "blocked matmul, reference kernels");
  assert_int_equal(ts_graph_run_passes(g[2], NULL, &err), TS_OK);
  assert_int_equal(ts_graph_count_op(g[2], "MatMul"), 0); /* all compiled */
  const gr_node *call = call_named(g[2], "fused_matmul_add_relu");
  assert_non_null(call);
  /* x [1, 3, 8], weights [2, 8, 16], bias [2, 16], out [1, 3, 2, 16] */
  const ts_buffer *p1 = ts_func_param(call->func, 1);
  assert_int_equal(ts_buffer_ndim(p1), 3);
  assert_int_equal(ts_buffer_ndim(ts_func_param(call->func, 3)), 4);
  run(g[2], TS_GRAPH_COMPILE, c);
  same(a, c, 2, "blocked matmul, compiled");
  free_outs(a, 2);
  free_outs(b, 2);
  free_outs(c, 2);
  for (int k = 0; k < 3; k++) ts_graph_free(g[k]);
}

/* g (its passes run up to some point for a target) finished and compiled
 * for this host, against ref (the same graph, fresh) in the reference
 * kernels after lowering: one output. */
static void check_compiled(ts_graph *g, ts_graph *ref, const char *what) {
  ts_error err;
  assert_int_equal(ts_graph_run_passes(ref, "lower", &err), TS_OK);
  assert_int_equal(ts_graph_run_passes(g, NULL, &err), TS_OK);
  ts_graph_tensor a[1], c[1];
  run(ref, TS_GRAPH_INTERPRET, a);
  run(g, TS_GRAPH_COMPILE, c);
  same(a, c, 1, what);
  free_outs(a, 1);
  free_outs(c, 1);
}

/* x [1, 9, 8] -> MatMul with N columns, laid out for a target: panels as
 * wide as the default register tile of the 9 x N product where that
 * divides N into two or more, else of three vectors, else 16, else none. */
static int64_t panel_for(const char *target, int64_t N, bool check) {
  ts_error err;
  ts_graph *g[2];
  for (int k = 0; k < 2; k++) {
    g[k] = ts_graph_new("panel");
    if (target && ts_graph_set_target(g[k], target, &err))
      fail_msg("%s: %s", target, err.msg);
    int x = gr_value_add(g[k], "x", TS_FLOAT32, 3, (int64_t[]){1, 9, 8});
    g[k]->values[x].is_input = true;
    g[k]->inputs = ts_arena_alloc(g[k]->arena, sizeof(int));
    g[k]->inputs[0] = x;
    g[k]->n_inputs = 1;
    float *w = malloc(sizeof(float) * 8 * (size_t)N);
    assert_non_null(w);
    for (int64_t i = 0; i < 8 * N; i++) w[i] = (float)((i * 37) % 29 - 14) / 16;
    int wv = gr_const_add(g[k], "w", TS_FLOAT32, 2, (int64_t[]){8, N}, w);
    free(w);
    int m = node(g[k], "MatMul", (int[]){x, wv}, 2);
    int r = node(g[k], "Relu", &m, 1);
    g[k]->outputs = ts_arena_alloc(g[k]->arena, sizeof(int));
    g[k]->outputs[0] = r;
    g[k]->n_outputs = 1;
  }
  assert_int_equal(ts_graph_run_passes(g[0], "layout", &err), TS_OK);
  int64_t B = 0;
  for (int i = 0; i < g[0]->n_nodes; i++)
    if (!strcmp(g[0]->nodes[i].op, "MatMul")) {
      B = gr_matmul_weight_block(&g[0]->nodes[i]);
      const gr_value *w = &g[0]->values[g[0]->nodes[i].inputs[1]];
      if (B) assert_int_equal(w->shape[2], B);
    }
  if (check) check_compiled(g[0], g[1], "matmul in panels, compiled");
  ts_graph_free(g[0]);
  ts_graph_free(g[1]);
  return B;
}

static void test_matmul_panels(void **state) {
  (void)state;
  const char *avx2 = "llvm -mcpu=haswell",
             *avx512 = "llvm -mcpu=skylake-avx512";
  assert_int_equal(panel_for(avx2, 72, true), 24);
  assert_int_equal(panel_for(avx2, 48, false), 24);
  assert_int_equal(panel_for(avx2, 32, false), 16);
  assert_int_equal(panel_for(avx2, 24, false), 0);
  assert_int_equal(panel_for(avx512, 96, true), 48);
  assert_int_equal(panel_for(avx512, 48, false), 16);
  /* powers of two: the default tile's width (4 vectors), not 16 */
  assert_int_equal(panel_for(avx512, 128, true), 64);
  assert_int_equal(panel_for(avx512, 2048, false), 64);
  assert_int_equal(panel_for(avx2, 2048, false), 16);
  assert_int_equal(panel_for("cuda -arch=sm_80", 48, false), 16);
  /* no target: this host's, whichever it is, and still correct */
  int64_t host = panel_for(NULL, 96, true);
  assert_true(host == 12 || host == 24 || host == 48 || host == 16);
  ts_graph *g = ts_graph_new("bad");
  ts_error err;
  assert_int_equal(ts_graph_set_target(g, "bogus", &err), TS_EINVAL);
  ts_graph_free(g);
}

/* x [1, CI, H, H] -> Conv KxK pad K/2 (CO outputs, stride 1 or 2) -> Relu,
 * through every pass for a target: the conv's weight block (0: not
 * blocked, -1: no conv left, Winograd's). With check, compiled for this
 * host as laid out for the target and compared with the reference
 * kernels of the graph before layout. */
static int64_t conv_block_for_g(const char *target, int64_t K, int64_t CI,
                                int64_t CO, int64_t H, int64_t stride,
                                int64_t G, bool check) {
  ts_error err;
  ts_graph *g[2];
  for (int k = 0; k < 2; k++) {
    g[k] = ts_graph_new("streamed");
    if (target && ts_graph_set_target(g[k], target, &err))
      fail_msg("%s: %s", target, err.msg);
    int x = add_input(g[k], "x", (int64_t[]){1, CI, H, H});
    size_t nw = (size_t)(CO * (CI / G) * K * K);
    float *w = malloc(sizeof(float) * nw);
    assert_non_null(w);
    for (size_t i = 0; i < nw; i++)
      w[i] = (float)((int64_t)(i * 37) % 29 - 14) / 64;
    int wv = gr_const_add(g[k], "w", TS_FLOAT32, 4,
                          (int64_t[]){CO, CI / G, K, K}, w);
    free(w);
    int c = node(g[k], "Conv", (int[]){x, wv}, 2);
    if (G > 1)
      gr_node_set_attr(g[k], &g[k]->nodes[g[k]->n_nodes - 1],
                       (gr_attr){.name = "group", .kind = GR_ATTR_INT, .i = G});
    set_ints(g[k], "pads", 4, (int64_t[]){K / 2, K / 2, K / 2, K / 2});
    set_ints(g[k], "strides", 2, (int64_t[]){stride, stride});
    set_output(g[k], node(g[k], "Relu", &c, 1));
  }
  assert_int_equal(ts_graph_run_passes(g[0], "block", &err), TS_OK);
  int64_t B = -1;
  for (int i = 0; i < g[0]->n_nodes; i++)
    if (!strcmp(g[0]->nodes[i].op, "Conv")) {
      B = gr_conv_weight_block(&g[0]->nodes[i]);
      const gr_value *w = &g[0]->values[g[0]->nodes[i].inputs[1]];
      if (B) {
        assert_int_equal(w->ndim, 5);
        assert_int_equal(w->shape[0] * w->shape[4], CO);
        assert_int_equal(w->shape[4], B);
      }
    }
  if (check) check_compiled(g[0], g[1], "conv with blocked weights, compiled");
  ts_graph_free(g[0]);
  ts_graph_free(g[1]);
  return B;
}

static int64_t conv_block_for(const char *target, int64_t K, int64_t CI,
                              int64_t CO, int64_t H, int64_t stride,
                              bool check) {
  return conv_block_for_g(target, K, CI, CO, H, stride, 1, check);
}

/* A conv larger than 1x1 whose weights do not stay in cache (> 256 KiB)
 * gets them blocked by the output channels of the default schedule's
 * register tile for the target; small weights, and convs that Winograd
 * rewrites, are left alone. */
static void test_streamed_conv_weights(void **state) {
  (void)state;
  const char *avx2 = "llvm -mcpu=haswell",
             *avx512 = "llvm -mcpu=skylake-avx512";
  /* 96 x 96 x 3 x 3 floats: 324 KiB; 5 x 5 output: rows of 5 would hold
   * 5 x 2 vectors, its 25 pixels 4 x 3 (ts_default_conv_tile) */
  assert_int_equal(conv_block_for(avx2, 3, 96, 96, 5, 1, true), 24);
  /* AVX-512: 5 rows x 3 vectors */
  assert_int_equal(conv_block_for(avx512, 3, 96, 96, 5, 1, false), 48);
  /* strided, 4 x 4 output on AVX2: 4 rows x 3 vectors */
  assert_int_equal(conv_block_for(avx2, 3, 96, 96, 8, 2, true), 24);
  /* 7 rows (ResNet-50's last stage): 7 x 1 vector on AVX2, its 49 pixels
   * 6 x 2 */
  assert_int_equal(conv_block_for(avx2, 3, 64, 128, 7, 1, true), 16);
  /* 32 x 32 x 3 x 3: 36 KiB, in cache */
  assert_int_equal(conv_block_for(avx2, 3, 32, 32, 5, 1, true), 0);
  /* 16 x 16 output: 64 Winograd tiles, no conv left */
  assert_int_equal(conv_block_for(avx2, 3, 96, 96, 16, 1, false), -1);
  /* the host's own target, whichever it is: correct */
  assert_true(conv_block_for(NULL, 3, 96, 96, 5, 1, true) >= 8);
  /* pointwise: 16; 49 rows on AVX2 in 6-row tiles of 2 vectors (7 x 1
   * vector would hold 7 accumulators) */
  assert_int_equal(conv_block_for(avx2, 1, 16, 32, 7, 1, true), 16);
  assert_int_equal(conv_block_for(avx2, 1, 16, 64, 16, 1, false), 16);
  assert_int_equal(conv_block_for(avx2, 1, 16, 24, 5, 1, true), 0);
  /* AVX-512, where 16 channels are one vector: the tile's width, 4 rows
   * x 4 vectors over 256 pixels; no block where the tile spans every
   * channel (49 pixels: 7 rows x 2 vectors, all 32) */
  assert_int_equal(conv_block_for(avx512, 1, 16, 256, 16, 1, true), 64);
  assert_int_equal(conv_block_for(avx512, 1, 16, 32, 7, 1, true), 0);
  assert_int_equal(conv_block_for(avx512, 1, 16, 64, 16, 1, false), 0);
  /* grouped, 4 groups of 48 channels (324 KiB): blocks within a group,
   * the widest multiple of the lanes up to 4 vectors dividing 48; none
   * where the lanes do not divide a group (20 groups of 12, 5 x 5) */
  assert_int_equal(conv_block_for_g(avx2, 3, 192, 192, 9, 1, 4, true), 24);
  assert_int_equal(conv_block_for_g(avx512, 3, 192, 192, 9, 1, 4, false), 48);
  assert_true(conv_block_for_g(NULL, 3, 192, 192, 9, 1, 4, true) >= 16);
  assert_int_equal(conv_block_for_g(avx2, 5, 240, 240, 9, 1, 20, false), 0);
}

/* Random chains of 4-D transposes around a conv: after the pass at most
 * one transpose is left between the input and the conv (none when the
 * chain composes to the identity), and the values are the same. */
static void test_transpose_chains(void **state) {
  (void)state;
  static const int64_t perms[][4] = {{0, 2, 3, 1}, {0, 3, 1, 2}, {0, 1, 3, 2},
                                     {0, 2, 1, 3}, {0, 1, 2, 3}, {0, 3, 2, 1}};
  uint64_t rng = 12345;
  for (int trial = 0; trial < 24; trial++) {
    int len = 1 + trial % 4;
    int pick[4];
    int64_t comp[4] = {0, 1, 2, 3};
    for (int k = 0; k < len; k++) {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      pick[k] = (int)((rng >> 33) % 6);
      int64_t next[4];
      for (int d = 0; d < 4; d++) next[d] = comp[perms[pick[k]][d]];
      memcpy(comp, next, sizeof comp);
    }
    /* a last transpose that brings it back to NCHW half of the time */
    bool to_identity = trial % 2 == 0;
    ts_graph *gs[2];
    for (int v = 0; v < 2; v++) {
      ts_graph *g = ts_graph_new("chain");
      int x = add_input(g, "x", (int64_t[]){1, 4, 4, 4});
      int cur = x;
      for (int k = 0; k < len; k++) cur = transpose(g, cur, perms[pick[k]]);
      if (to_identity) {
        int64_t inv[4];
        for (int d = 0; d < 4; d++) inv[comp[d]] = d;
        cur = transpose(g, cur, inv);
      }
      float w[4 * 4];
      for (int i = 0; i < 16; i++) w[i] = (float)(i % 5) - 2;
      int wc = gr_const_add(g, "w", TS_FLOAT32, 4, (int64_t[]){4, 4, 1, 1}, w);
      int c = node(g, "Conv", (int[]){cur, wc}, 2);
      set_output(g, node(g, "Relu", &c, 1));
      ts_error err;
      assert_int_equal(ts_graph_set_layout(g, v ? "nhwc" : "nchw", &err),
                       TS_OK);
      if (ts_graph_run_passes(g, "layout", &err)) fail_msg("%s", err.msg);
      gs[v] = g;
    }
    /* one transpose into the conv (composed from the chain), one out */
    assert_true(count_transposes(gs[1]) <= 2);
    if (to_identity) {
      bool direct = false;
      for (int i = 0; i < gs[1]->n_nodes; i++)
        if (!strcmp(gs[1]->nodes[i].op, "Transpose") &&
            gs[1]->values[gs[1]->nodes[i].inputs[0]].is_input)
          direct = true;
      if (!direct) {
        char *txt = ts_graph_print(gs[1]);
        printf("trial %d len %d\n%s\n", trial, len, txt);
        free(txt);
      }
      assert_true(direct); /* the input goes straight into NHWC */
      assert_int_equal(count_transposes(gs[1]), 2);
    }
    ts_graph_tensor a[1], b[1];
    run(gs[0], TS_GRAPH_INTERPRET, a);
    run(gs[1], TS_GRAPH_INTERPRET, b);
    same(a, b, 1, "transpose chain");
    free_outs(a, 1);
    free_outs(b, 1);
    ts_graph_free(gs[0]);
    ts_graph_free(gs[1]);
  }
}

/* The minimum cut the layout plan is built on, on the textbook network
 * whose maximum flow is 23: the source side is {s, v1, v2, v4}. */
static void test_min_cut(void **state) {
  (void)state;
  static const int arcs[][3] = {{0, 1, 16}, {0, 2, 13}, {1, 2, 10}, {2, 1, 4},
                                {1, 3, 12}, {3, 2, 9},  {2, 4, 14}, {4, 3, 7},
                                {3, 5, 20}, {4, 5, 4}};
  gr_cut *c = gr_cut_new(6);
  assert_non_null(c);
  for (size_t k = 0; k < sizeof arcs / sizeof arcs[0]; k++)
    gr_cut_edge(c, arcs[k][0], arcs[k][1], arcs[k][2]);
  bool side[6];
  assert_int_equal(gr_cut_solve(c, 0, 5, side), 23);
  static const bool want[6] = {true, true, true, false, true, false};
  for (int v = 0; v < 6; v++) assert_int_equal(side[v], want[v]);
  gr_cut_free(c);
}

/* ---- random mixed-layout graphs ---- */

/* A random graph of convs (1x1, 3x3), relu, add, per-channel mul, channel
 * concat, max pool and softmax over channels (an operator the pass leaves
 * in NCHW), built from `seed`; one or two outputs. *n_softmax gets the
 * number of softmax nodes. */
static ts_graph *random_mixed(uint64_t seed, int *n_softmax) {
  uint64_t rng = seed * 2862933555777941757ull + 3037000493ull;
#define NEXT(n)                                                                \
  ((rng = rng * 6364136223846793005ull + 1442695040888963407ull),              \
   (int)((rng >> 33) % (uint64_t)(n)))
  ts_graph *g = ts_graph_new("mixed");
  int vals[16], chans[16], n = 0;
  vals[n] = add_input(g, "x", (int64_t[]){1, 4, 5, 6});
  chans[n++] = 4;
  *n_softmax = 0;
  int steps = 4 + NEXT(6);
  for (int s = 0; s < steps && n < 16; s++) {
    int a = NEXT(n), c = chans[a], out = -1, oc = c;
    float buf[16 * 16 * 9];
    char name[32];
    snprintf(name, sizeof name, "k%d", s);
    switch (NEXT(8)) {
    case 0: /* conv 1x1 or 3x3, with or without bias */
    case 1: {
      int k = NEXT(2) ? 3 : 1;
      oc = NEXT(2) ? 8 : 4;
      for (int i = 0; i < oc * c * k * k; i++)
        buf[i] = (float)((i * 37 + s) % 17 - 8) / 16;
      int w =
          gr_const_add(g, name, TS_FLOAT32, 4, (int64_t[]){oc, c, k, k}, buf);
      int ins[3] = {vals[a], w, -1};
      if (NEXT(2)) {
        for (int i = 0; i < oc; i++) buf[i] = (float)(i % 3) / 4;
        snprintf(name, sizeof name, "b%d", s);
        ins[2] = gr_const_add(g, name, TS_FLOAT32, 1, (int64_t[]){oc}, buf);
      }
      out = node(g, "Conv", ins, ins[2] >= 0 ? 3 : 2);
      set_ints(g, "kernel_shape", 2, (int64_t[]){k, k});
      if (k == 3) set_ints(g, "pads", 4, (int64_t[]){1, 1, 1, 1});
      break;
    }
    case 2: out = node(g, "Relu", &vals[a], 1); break;
    case 3: { /* add two values of the same channel count */
      int b = -1;
      for (int t = 0; t < n; t++)
        if (t != a && chans[t] == c) b = t;
      out = b < 0 ? node(g, "Relu", &vals[a], 1)
                  : node(g, "Add", (int[]){vals[a], vals[b]}, 2);
      break;
    }
    case 4: /* a per-channel scale (a constant the pass must permute) */
      for (int i = 0; i < c; i++) buf[i] = 0.5f + (float)i / 8;
      out = node(g, "Mul",
                 (int[]){vals[a], gr_const_add(g, name, TS_FLOAT32, 4,
                                               (int64_t[]){1, c, 1, 1}, buf)},
                 2);
      break;
    case 5: { /* concat along channels */
      int b = NEXT(n);
      if (c + chans[b] > 16) b = a;
      if (c + chans[b] > 16) {
        out = node(g, "Relu", &vals[a], 1);
        break;
      }
      oc = c + chans[b];
      out = node(g, "Concat", (int[]){vals[a], vals[b]}, 2);
      gr_node_set_attr(g, &g->nodes[g->n_nodes - 1],
                       (gr_attr){.name = "axis", .kind = GR_ATTR_INT, .i = 1});
      break;
    }
    case 6: /* softmax over channels: stays NCHW */
      out = node(g, "Softmax", &vals[a], 1);
      gr_node_set_attr(g, &g->nodes[g->n_nodes - 1],
                       (gr_attr){.name = "axis", .kind = GR_ATTR_INT, .i = 1});
      ++*n_softmax;
      break;
    default: /* 3x3 max pool, stride 1, same size */
      out = node(g, "MaxPool", &vals[a], 1);
      set_ints(g, "kernel_shape", 2, (int64_t[]){3, 3});
      set_ints(g, "pads", 4, (int64_t[]){1, 1, 1, 1});
      break;
    }
    vals[n] = out;
    chans[n++] = oc;
  }
  int n_out = n > 2 && NEXT(2) ? 2 : 1;
  g->outputs = ts_arena_alloc(g->arena, sizeof(int) * 2);
  g->outputs[0] = vals[n - 1];
  if (n_out == 2) g->outputs[1] = vals[1 + NEXT(n - 2)];
  g->n_outputs = n_out;
#undef NEXT
  return g;
}

/* Random graphs mixing convertible operators with one that is not: the
 * values are the same with the pass on and off, and what is left is
 * minimal in structure: no transpose of a transpose (they compose), none
 * of a constant (folded), no two of one value with the same permutation,
 * at most one at the input, one per output and two per softmax. */
static void test_random_mixed_layouts(void **state) {
  (void)state;
  for (uint64_t seed = 1; seed <= 40; seed++) {
    ts_graph *gs[2];
    int n_softmax = 0;
    for (int v = 0; v < 2; v++) {
      ts_graph *g = random_mixed(seed, &n_softmax);
      ts_error err;
      assert_int_equal(ts_graph_set_layout(g, v ? "nhwc" : "nchw", &err),
                       TS_OK);
      if (ts_graph_run_passes(g, "layout", &err))
        fail_msg("seed %llu: %s", (unsigned long long)seed, err.msg);
      gs[v] = g;
    }
    ts_graph *g = gs[1];
    char *txt = ts_graph_print(g);
    for (int i = 0; i < g->n_nodes; i++) {
      const gr_node *t = &g->nodes[i];
      if (t->kind != TS_GRAPH_OP || strcmp(t->op, "Transpose")) continue;
      int src = t->inputs[0];
      int p = g->values[src].producer;
      if (p >= 0 && !strcmp(g->nodes[p].op, "Transpose"))
        fail_msg("seed %llu: a transpose of a transpose\n%s",
                 (unsigned long long)seed, txt);
      if (gr_is_const(g, src))
        fail_msg("seed %llu: a transpose of a constant\n%s",
                 (unsigned long long)seed, txt);
      for (int j = i + 1; j < g->n_nodes; j++) {
        const gr_node *u = &g->nodes[j];
        if (u->kind != TS_GRAPH_OP || strcmp(u->op, "Transpose") ||
            u->inputs[0] != src)
          continue;
        const gr_attr *pa = gr_attr_find(t, "perm");
        const gr_attr *pb = gr_attr_find(u, "perm");
        if (pa && pb && pa->n == pb->n &&
            !memcmp(pa->ints, pb->ints, sizeof(int64_t) * (size_t)pa->n))
          fail_msg("seed %llu: one value transposed twice the same way\n%s",
                   (unsigned long long)seed, txt);
      }
    }
    for (int i = 0; i < g->n_nodes; i++)
      if (!strcmp(g->nodes[i].op, "Softmax"))
        assert_true(strcmp(g->values[g->nodes[i].inputs[0]].layout, "NHWC"));
    int bound = 1 + g->n_outputs + 2 * n_softmax;
    if (count_transposes(g) > bound)
      fail_msg("seed %llu: %d transposes, at most %d expected\n%s",
               (unsigned long long)seed, count_transposes(g), bound, txt);
    free(txt);
    ts_graph_tensor a[2], b[2];
    run(gs[0], TS_GRAPH_INTERPRET, a);
    run(gs[1], TS_GRAPH_INTERPRET, b);
    char what[64];
    snprintf(what, sizeof what, "random mixed graph %llu",
             (unsigned long long)seed);
    same(a, b, gs[0]->n_outputs, what);
    free_outs(a, gs[0]->n_outputs);
    free_outs(b, gs[1]->n_outputs);
    ts_graph_free(gs[0]);
    ts_graph_free(gs[1]);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_models_same_outputs),
      cmocka_unit_test(test_one_transpose_at_the_input),
      cmocka_unit_test(test_fixed_layout_op),
      cmocka_unit_test(test_one_d_windows),
      cmocka_unit_test(test_three_d_convs),
      cmocka_unit_test(test_io_layout),
      cmocka_unit_test(test_transpose_into_conv),
      cmocka_unit_test(test_scale_onto_weights),
      cmocka_unit_test(test_conv_transpose_phases),
      cmocka_unit_test(test_blocked_pointwise),
      cmocka_unit_test(test_pointwise_matmul),
      cmocka_unit_test(test_blocked_matmul),
      cmocka_unit_test(test_matmul_panels),
      cmocka_unit_test(test_streamed_conv_weights),
      cmocka_unit_test(test_transpose_chains),
      cmocka_unit_test(test_min_cut),
      cmocka_unit_test(test_random_mixed_layouts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
