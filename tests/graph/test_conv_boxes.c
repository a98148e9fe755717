/*
 * test_conv_boxes.c — convs whose padding takes a large share of their
 * taps become convs over the boxes of their output (graph/conv_boxes.c):
 * atrous convs on maps near or below their dilation split into nine boxes
 * or one (the centre tap), with a bias and groups; convs whose padding
 * wastes little, or whose borders give more than three bands an axis,
 * stay whole; every graph computes what the unlowered one does, through
 * the reference kernels and compiled.
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

#include <string.h>

typedef struct conv_case {
  int64_t kh, kw, dil, pads[4], groups;
  int convs_after; /* Convs after the lowering */
} conv_case;

/* x [1, 8, 8, 9] -> Conv (bias) -> Relu. */
static ts_graph *one_conv(const conv_case *c) {
  ts_graph *g = ts_graph_new("boxes");
  int x = add_input(g, "x", (int64_t[]){1, 8, 8, 9});
  int64_t co = 6, ci = 8 / c->groups, n = co * ci * c->kh * c->kw;
  float w[6 * 8 * 25], b[6];
  for (int64_t i = 0; i < n; i++) w[i] = (float)((i * 29) % 23 - 11) / 16;
  for (int i = 0; i < 6; i++) b[i] = (float)(i % 4) / 4 - 0.3f;
  int cw =
      gr_const_add(g, "w", TS_FLOAT32, 4, (int64_t[]){co, ci, c->kh, c->kw}, w);
  int cb = gr_const_add(g, "b", TS_FLOAT32, 1, (int64_t[]){co}, b);
  int y = node(g, "Conv", (int[]){x, cw, cb}, 3);
  set_ints(g, "dilations", 2, (int64_t[]){c->dil, c->dil});
  set_ints(g, "pads", 4, c->pads);
  gr_node_set_attr(
      g, &g->nodes[g->n_nodes - 1],
      (gr_attr){.name = "group", .kind = GR_ATTR_INT, .i = c->groups});
  set_output(g, node(g, "Relu", &y, 1));
  return g;
}

static void check(const conv_case *c) {
  ts_error err;
  ts_graph *a = one_conv(c), *b = one_conv(c), *d = one_conv(c);
  assert_int_equal(ts_graph_run_passes(a, "patterns", &err), TS_OK);
  if (ts_graph_run_passes(b, "lower", &err) ||
      ts_graph_run_passes(d, NULL, &err))
    fail_msg("%s", err.msg);
  assert_int_equal(ts_graph_count_op(b, "Conv"), c->convs_after);
  for (int i = 0; i < b->n_nodes && c->convs_after > 1; i++)
    if (!strcmp(b->nodes[i].op, "Conv"))
      assert_true(gr_attr_ints_all(&b->nodes[i], "pads", 0));
  ts_graph_tensor x[1], y[1], z[1];
  assert_int_equal(run_seeded(a, TS_GRAPH_INTERPRET, x, 5), 1);
  assert_int_equal(run_seeded(b, TS_GRAPH_INTERPRET, y, 5), 1);
  assert_int_equal(run_seeded(d, TS_GRAPH_COMPILE, z, 5), 1);
  assert_same_outputs(x, y, 1, "boxes, interpreted");
  assert_same_outputs(x, z, 1, "boxes, compiled");
  free(x[0].data);
  free(y[0].data);
  free(z[0].data);
  ts_graph_free(a);
  ts_graph_free(b);
  ts_graph_free(d);
}

static void test_atrous_nine_boxes(void **state) {
  (void)state;
  /* dilation 6 on 8x9: bands [0, 2), [2, 6), [6, 8) of the rows */
  check(&(conv_case){3, 3, 6, {6, 6, 6, 6}, 1, 9});
  check(&(conv_case){3, 3, 6, {6, 6, 6, 6}, 2, 9}); /* groups */
}

static void test_centre_tap(void **state) {
  (void)state;
  /* dilation 12 on 8x9: every position reads the centre tap only */
  check(&(conv_case){3, 3, 12, {12, 12, 12, 12}, 1, 1});
}

static void test_asymmetric(void **state) {
  (void)state;
  /* pads 4 above, 0 below, 2 left, 5 right, a 3x5 kernel of dilation 3:
   * row bands [0, 1) taps {2}, [1, 4) {1, 2}, [4, 6) {0, 1, 2}; column
   * bands [0, 2) taps {1, 2, 3}, [2, 4) {0, 1, 2} (tap 4 reads only
   * padding): six boxes */
  check(&(conv_case){3, 5, 3, {4, 2, 0, 5}, 1, 6});
}

static void test_kept_whole(void **state) {
  (void)state;
  /* "same" 3x3: the padding wastes 16% of the taps */
  check(&(conv_case){3, 3, 1, {1, 1, 1, 1}, 1, 1});
  /* 5x5 of pad 4: eight bands an axis */
  check(&(conv_case){5, 5, 1, {4, 4, 4, 4}, 1, 1});
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_atrous_nine_boxes),
      cmocka_unit_test(test_centre_tap),
      cmocka_unit_test(test_asymmetric),
      cmocka_unit_test(test_kept_whole),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
