/*
 * test_winograd.c — the winograd pass: which 3x3 convolutions it rewrites
 * (and which it leaves alone), and that the rewritten graph computes the
 * same values as the direct convolutions, both in the reference kernels
 * (the graph stopped after the pass) and compiled (the transforms fused,
 * with the conv's bias, residual add and relu in the output transform's
 * group; transformed weights blocked by 16 output channels and not).
 * Odd image sizes exercise the partial tiles at the edges; an
 * image of too few tiles (7x7) stays direct.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "graph/internal.h"
#include "build_util.h"
#include "exec_util.h"

#include <stdlib.h>
#include <string.h>

static void set_int(ts_graph *g, const char *name, int64_t v) {
  gr_node_set_attr(g, &g->nodes[g->n_nodes - 1],
                   (gr_attr){.name = name, .kind = GR_ATTR_INT, .i = v});
}

static int conv(ts_graph *g, int x, int w, int bias) {
  int out = bias >= 0 ? node(g, "Conv", (int[]){x, w, bias}, 3)
                      : node(g, "Conv", (int[]){x, w}, 2);
  set_ints(g, "pads", 4, (int64_t[]){1, 1, 1, 1});
  return out;
}

/* x [1, 32, 11, 13] -> 3x3 conv (40 channels) + bias -> relu -> 3x3 conv
 * (32 channels) -> + x -> relu. */
static ts_graph *residual(bool winograd) {
  ts_graph *g = ts_graph_new("wino");
  ts_graph_set_winograd(g, winograd);
  int x = add_input(g, "x", (int64_t[]){1, 32, 11, 13});
  float b[40];
  for (int i = 0; i < 40; i++) b[i] = (float)(i % 9) / 8 - 0.5f;
  int w1 = conv_weights(g, "w1", 40, 32, 3, 1),
      w2 = conv_weights(g, "w2", 32, 40, 3, 5);
  int b1 = gr_const_add(g, "b1", TS_FLOAT32, 1, (int64_t[]){40}, b);
  int r1 = node(g, "Relu", (int[]){conv(g, x, w1, b1)}, 1);
  int c2 = conv(g, r1, w2, -1);
  int y = node(g, "Relu", (int[]){node(g, "Add", (int[]){c2, x}, 2)}, 1);
  g->outputs = ts_arena_alloc(g->arena, sizeof(int));
  g->outputs[0] = y;
  g->n_outputs = 1;
  return g;
}

static bool has_call(const ts_graph *g, const char *prefix) {
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].kind == TS_GRAPH_CALL &&
        !strncmp(g->nodes[i].name, prefix, strlen(prefix)))
      return true;
  return false;
}

static void test_same_values(void **state) {
  (void)state;
  ts_error err;
  ts_graph *direct = residual(false), *ref = residual(true),
           *fused = residual(true);
  assert_int_equal(ts_graph_run_passes(direct, NULL, &err), TS_OK);
  assert_int_equal(ts_graph_run_passes(ref, "winograd", &err), TS_OK);
  assert_int_equal(ts_graph_run_passes(fused, NULL, &err), TS_OK);
  assert_int_equal(ts_graph_verify(fused, &err), TS_OK);
  /* both convs rewritten: two transforms each, no conv left */
  assert_int_equal(ts_graph_count_op(ref, "WinogradInput"), 2);
  assert_int_equal(ts_graph_count_op(ref, "WinogradOutput"), 2);
  assert_int_equal(ts_graph_count_op(ref, "Conv"), 0);
  /* the transformed weights blocked by 16 output channels where 16
   * divides them (32), not where it does not (40) */
  int blocked = 0;
  for (int i = 0; i < ref->n_nodes; i++)
    if (gr_matmul_weight_block(&ref->nodes[i])) {
      blocked++;
      const gr_value *u = &ref->values[ref->nodes[i].inputs[1]];
      assert_int_equal(u->ndim, 4);
      assert_int_equal(u->shape[0], 16);
      assert_int_equal(u->shape[1], 2);
      assert_int_equal(u->shape[2], 40);
      assert_int_equal(u->shape[3], 16);
    }
  assert_int_equal(blocked, 1);
  assert_false(has_call(direct, "fused_winograd"));
  assert_true(has_call(fused, "fused_winogradinput"));
  assert_true(has_call(fused, "fused_winogradoutput_relu"));
  assert_true(has_call(fused, "fused_winogradoutput_add_relu"));
  ts_graph_tensor a[1], b[1], c[1];
  run_seeded(direct, TS_GRAPH_COMPILE, a, 3);
  run_seeded(ref, TS_GRAPH_COMPILE, b, 3);
  run_seeded(fused, TS_GRAPH_COMPILE, c, 3);
  assert_same_outputs(a, b, 1, "winograd reference kernels vs direct");
  assert_same_outputs(a, c, 1, "winograd compiled vs direct");
  free(a[0].data), free(b[0].data), free(c[0].data);
  ts_graph_free(direct);
  ts_graph_free(ref);
  ts_graph_free(fused);
}

/* Convs the pass must leave direct: stride 2, dilation 2, two groups, no
 * padding, 16 input channels, a 5x5 kernel, a 7x7 image (16 tiles). */
static void test_leaves_others(void **state) {
  (void)state;
  for (int k = 0; k < 7; k++) {
    ts_graph *g = ts_graph_new("skip");
    int64_t ci = k == 4 ? 16 : 32, ks = k == 5 ? 5 : 3;
    int64_t hw = k == 6 ? 7 : 12;
    int x = add_input(g, "x", (int64_t[]){1, ci, hw, hw});
    int w = conv_weights(g, "w", 32, k == 2 ? ci / 2 : ci, ks, k);
    int y = node(g, "Conv", (int[]){x, w}, 2);
    int64_t p = k == 3 ? 0 : k == 1 ? 2 : ks / 2;
    set_ints(g, "pads", 4, (int64_t[]){p, p, p, p});
    if (k == 0) set_ints(g, "strides", 2, (int64_t[]){2, 2});
    if (k == 1) set_ints(g, "dilations", 2, (int64_t[]){2, 2});
    if (k == 2) set_int(g, "group", 2);
    g->outputs = ts_arena_alloc(g->arena, sizeof(int));
    g->outputs[0] = y;
    g->n_outputs = 1;
    ts_error err;
    if (ts_graph_run_passes(g, "winograd", &err))
      fail_msg("case %d: %s", k, err.msg);
    assert_int_equal(ts_graph_count_op(g, "WinogradInput"), 0);
    assert_int_equal(ts_graph_count_op(g, "Conv"), 1);
    ts_graph_free(g);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_same_values),
      cmocka_unit_test(test_leaves_others),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
