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
#include "db_util.h"
#include "tuner/tuner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* x [n, 32, h, w] -> 3x3 conv (40 channels) + bias -> relu -> 3x3 conv
 * (32 channels) -> + x -> relu; tile -1: no Winograd, 0: the pass's
 * choice, 2 or 4: that tile. */
static ts_graph *residual_nhw(int tile, int64_t n, int64_t h, int64_t w) {
  ts_graph *g = ts_graph_new("wino");
  ts_graph_set_winograd(g, tile >= 0);
  ts_graph_set_winograd_tile(g, tile > 0 ? tile : 0);
  int x = add_input(g, "x", (int64_t[]){n, 32, h, w});
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

static ts_graph *residual_hw(int tile, int64_t h, int64_t w) {
  return residual_nhw(tile, 1, h, w);
}

static ts_graph *residual(bool winograd) {
  return residual_hw(winograd ? 0 : -1, 11, 13);
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

/* The rows of every WinogradInput's V (alpha^2: 16 for F(2x2), 36 for
 * F(4x4)); fails unless all agree. */
static int64_t transform_rows(const ts_graph *g) {
  int64_t rows = 0;
  for (int i = 0; i < g->n_nodes; i++)
    if (!strcmp(g->nodes[i].op, "WinogradInput")) {
      int64_t r = g->values[g->nodes[i].outputs[0]].shape[0];
      assert_true(rows == 0 || rows == r);
      rows = r;
    }
  return rows;
}

/* The largest difference between a and b over the largest magnitude of b. */
static double scaled_error(const ts_graph_tensor *a, const ts_graph_tensor *b) {
  double err = 0, scale = 0;
  const float *x = a->data, *y = b->data;
  for (int64_t i = 0; i < tensor_elems(b); i++) {
    err = fmax(err, fabs((double)x[i] - y[i]));
    scale = fmax(scale, fabs((double)y[i]));
  }
  return scale > 0 ? err / scale : err;
}

/* F(4x4, 3x3): taken by default where the image has 16 tiles of 4x4
 * (23x21: 6 x 6, with partial tiles of 3 rows and 1 column at the edges),
 * F(2x2) below that (11x13: 3 x 4 tiles of 4x4); either forced by
 * ts_graph_set_winograd_tile. Each form against the direct convs, in the
 * reference kernels and compiled, within its error bound: the largest
 * difference over the largest output, 3e-6 for F(2x2) and 2e-5 for
 * F(4x4), whose matrices' larger entries round more (measured: see
 * docs/graph.md). A batch of two puts tiles of both images in one product
 * (18 tiles of 4x4 at 9x10, rounded up to 24 rows; 50 of 2x2, to 56). */
static void test_tile_sizes(void **state) {
  (void)state;
  struct {
    int tile;
    int64_t h, w, rows;
    double bound;
    int64_t n;
  } cases[] = {
      {0, 23, 21, 36, 2e-5, 1}, {2, 23, 21, 16, 3e-6, 1},
      {0, 11, 13, 16, 3e-6, 1}, {4, 11, 13, 36, 2e-5, 1},
      {4, 9, 10, 36, 2e-5, 2},  {2, 9, 10, 16, 3e-6, 2},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    ts_error err;
    int64_t n = cases[k].n, h = cases[k].h, w = cases[k].w;
    ts_graph *direct = residual_nhw(-1, n, h, w),
             *ref = residual_nhw(cases[k].tile, n, h, w),
             *fused = residual_nhw(cases[k].tile, n, h, w);
    assert_int_equal(ts_graph_run_passes(direct, NULL, &err), TS_OK);
    assert_int_equal(ts_graph_run_passes(ref, "winograd", &err), TS_OK);
    assert_int_equal(ts_graph_run_passes(fused, NULL, &err), TS_OK);
    assert_int_equal(ts_graph_count_op(ref, "WinogradInput"), 2);
    assert_int_equal(transform_rows(ref), cases[k].rows);
    ts_graph_tensor a[1], b[1], c[1];
    run_seeded(direct, TS_GRAPH_COMPILE, a, 5);
    run_seeded(ref, TS_GRAPH_COMPILE, b, 5);
    run_seeded(fused, TS_GRAPH_COMPILE, c, 5);
    double eb = scaled_error(b, a), ec = scaled_error(c, a);
    if (getenv("TS_WINOGRAD_ERRORS"))
      printf("tile %d, %lldx%lld: reference %.3g, compiled %.3g\n",
             (int)cases[k].rows == 36 ? 4 : 2, (long long)cases[k].h,
             (long long)cases[k].w, eb, ec);
    if (eb > cases[k].bound || ec > cases[k].bound)
      fail_msg("case %zu: error %g (reference), %g (compiled) over %g", k, eb,
               ec, cases[k].bound);
    assert_same_outputs(a, c, 1, "winograd compiled vs direct");
    free(a[0].data), free(b[0].data), free(c[0].data);
    ts_graph_free(direct);
    ts_graph_free(ref);
    ts_graph_free(fused);
  }
}

/* x [n, 32, h, w] -> 3x3 conv (40 channels, pads p1) + bias -> relu -> 3x3
 * conv (32 channels, pads p2); tile as in residual_nhw. */
static ts_graph *padded(int tile, int64_t h, int64_t w, const int64_t *p1,
                        const int64_t *p2) {
  ts_graph *g = ts_graph_new("wino_pads");
  ts_graph_set_winograd(g, tile >= 0);
  ts_graph_set_winograd_tile(g, tile > 0 ? tile : 0);
  g->winograd_any = true; /* small images: the tile asked for */
  int x = add_input(g, "x", (int64_t[]){1, 32, h, w});
  float b[40];
  for (int i = 0; i < 40; i++) b[i] = (float)(i % 7) / 6 - 0.5f;
  int w1 = conv_weights(g, "w1", 40, 32, 3, 2),
      w2 = conv_weights(g, "w2", 32, 40, 3, 7);
  int b1 = gr_const_add(g, "b1", TS_FLOAT32, 1, (int64_t[]){40}, b);
  int c1 = node(g, "Conv", (int[]){x, w1, b1}, 3);
  set_ints(g, "pads", 4, p1);
  int r1 = node(g, "Relu", (int[]){c1}, 1);
  int y = node(g, "Conv", (int[]){r1, w2}, 2);
  set_ints(g, "pads", 4, p2);
  g->outputs = ts_arena_alloc(g->arena, sizeof(int));
  g->outputs[0] = y;
  g->n_outputs = 1;
  return g;
}

/* Pads other than one pixel: "valid" convs (U-Net's), two pixels, and
 * asymmetric ones ([top, left, bottom, right]), at odd sizes where the
 * last tiles are partial; both tiles, in the reference kernels and
 * compiled, against the direct convs. */
static void test_pads(void **state) {
  (void)state;
  static const int64_t pads[][4] = {
      {0, 0, 0, 0}, {2, 2, 2, 2}, {0, 1, 2, 1}, {2, 0, 1, 0}, {1, 2, 0, 1}};
  static const int64_t sizes[][2] = {{17, 15}, {12, 19}};
  int n_pads = (int)(sizeof pads / sizeof pads[0]);
  for (int k = 0; k < 2 * n_pads; k++) {
    const int64_t *p1 = pads[k % n_pads], *p2 = pads[(k + 1) % n_pads];
    int tile = k < n_pads ? 2 : 4;
    int64_t h = sizes[k % 2][0], w = sizes[k % 2][1];
    ts_error err;
    ts_graph *direct = padded(-1, h, w, p1, p2),
             *ref = padded(tile, h, w, p1, p2),
             *fused = padded(tile, h, w, p1, p2);
    assert_int_equal(ts_graph_run_passes(direct, NULL, &err), TS_OK);
    if (ts_graph_run_passes(ref, "winograd", &err) ||
        ts_graph_run_passes(fused, NULL, &err))
      fail_msg("case %d: %s", k, err.msg);
    assert_int_equal(ts_graph_count_op(ref, "WinogradInput"), 2);
    assert_int_equal(ts_graph_count_op(ref, "Conv"), 0);
    ts_graph_tensor a[1], b[1], c[1];
    run_seeded(direct, TS_GRAPH_COMPILE, a, 9);
    run_seeded(ref, TS_GRAPH_COMPILE, b, 9);
    run_seeded(fused, TS_GRAPH_COMPILE, c, 9);
    assert_int_equal(a[0].shape[2], h + p1[0] + p1[2] - 2 + p2[0] + p2[2] - 2);
    assert_int_equal(a[0].shape[3], w + p1[1] + p1[3] - 2 + p2[1] + p2[3] - 2);
    double bound = tile == 4 ? 2e-5 : 3e-6;
    double eb = scaled_error(b, a), ec = scaled_error(c, a);
    if (eb > bound || ec > bound)
      fail_msg("case %d (tile %d, pads %lld %lld %lld %lld): error %g "
               "(reference), %g (compiled) over %g",
               k, tile, (long long)p1[0], (long long)p1[1], (long long)p1[2],
               (long long)p1[3], eb, ec, bound);
    free(a[0].data), free(b[0].data), free(c[0].data);
    ts_graph_free(direct);
    ts_graph_free(ref);
    ts_graph_free(fused);
  }
}

/* The rule by the target: a 14x14 image (16 tiles of 4x4) takes F(4x4)
 * with AVX2's 8 lanes and F(2x2) with AVX-512's 16, whose products would
 * wait on their transformed weights (winograd.c, tile_for); 28x28 (49
 * tiles) takes F(4x4) on both. */
static void test_tile_by_target(void **state) {
  (void)state;
  struct {
    const char *target;
    int64_t hw, rows;
  } cases[] = {
      {"llvm -mcpu=haswell", 14, 36},
      {"llvm -mcpu=skylake-avx512", 14, 16},
      {"llvm -mcpu=skylake-avx512", 28, 36},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    ts_error err;
    ts_graph *g = residual_hw(0, cases[k].hw, cases[k].hw);
    assert_int_equal(ts_graph_set_target(g, cases[k].target, &err), TS_OK);
    assert_int_equal(ts_graph_run_passes(g, "winograd", &err), TS_OK);
    assert_int_equal(ts_graph_count_op(g, "WinogradInput"), 2);
    if (transform_rows(g) != cases[k].rows)
      fail_msg("%s, %lldx%lld: %lld rows", cases[k].target,
               (long long)cases[k].hw, (long long)cases[k].hw,
               (long long)transform_rows(g));
    ts_graph_free(g);
  }
}

/* F(4x4)'s output transform runs in two steps (winograd.c, output_rows);
 * the default schedule computes the first, its rows stage, under the
 * output's row loop in a buffer of one image row's tiles (6 tiles x 6 x 40
 * channels at 23x21), not as an image-sized buffer written and read
 * back. */
static void test_output_rows_per_row(void **state) {
  (void)state;
  ts_graph *g = residual_hw(4, 23, 21);
  ts_error err;
  assert_int_equal(ts_graph_run_passes(g, NULL, &err), TS_OK);
  ts_target *t;
  if (ts_target_host(&t, &err)) fail_msg("host target: %s", err.msg);
  int seen = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const gr_node *n = &g->nodes[i];
    if (n->kind != TS_GRAPH_CALL ||
        strncmp(n->name, "fused_winogradoutput", 20))
      continue;
    ts_sched *s;
    if (ts_default_schedule(n->func, t, &s, &err)) fail_msg("%s", err.msg);
    ts_lower_options lo = ts_lower_defaults();
    ts_func *l = ts_lower(ts_sched_func(s), &lo, &err);
    if (!l) fail_msg("lower: %s", err.msg);
    char *text = ts_func_print(l);
    const char *alloc = strstr(text, "allocate winograd_rows");
    const char *loop = strstr(text, "for ");
    if (!alloc || !loop || loop > alloc)
      fail_msg("%s: no rows stage under a loop:\n%s", n->name, text);
    const char *br = strchr(alloc, '[');
    if (!br || atoi(br + 1) > 6 * 6 * 40)
      fail_msg("%s: a rows buffer larger than a row:\n%s", n->name, text);
    free(text);
    ts_func_free(l);
    ts_sched_destroy(s);
    seen++;
  }
  assert_int_equal(seen, 2);
  ts_target_free(t);
  ts_graph_free(g);
}

/* Convs the pass must leave direct: stride 2, dilation 2, two groups,
 * three pixels of padding, 16 input channels, a 5x5 kernel, a 7x7 image
 * (16 tiles). */
static void test_leaves_others(void **state) {
  (void)state;
  for (int k = 0; k < 7; k++) {
    ts_graph *g = ts_graph_new("skip");
    int64_t ci = k == 4 ? 16 : 32, ks = k == 5 ? 5 : 3;
    int64_t hw = k == 6 ? 7 : 12;
    int x = add_input(g, "x", (int64_t[]){1, ci, hw, hw});
    int w = conv_weights(g, "w", 32, k == 2 ? ci / 2 : ci, ks, k);
    int y = node(g, "Conv", (int[]){x, w}, 2);
    int64_t p = k == 3 ? 3 : k == 1 ? 2 : ks / 2;
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

/* --winograd-tile measure: each conv the pass can take is weighed as a
 * direct conv, F(2x2) and F(4x4) by the records of its candidates' tasks
 * (each form alone); without a record for every form, the rule. The 7x7
 * image the rule leaves direct is weighed too. */
static ts_graph *measured(ts_db *db, int64_t hw, bool collect) {
  ts_graph *g = residual_hw(0, hw, hw);
  ts_winograd_options o = {.db = db, .collect_tasks = collect};
  ts_error err;
  assert_int_equal(ts_graph_set_winograd_options(g, &o, &err), TS_OK);
  assert_int_equal(ts_graph_run_passes(g, "winograd", &err), TS_OK);
  return g;
}

static void test_tile_by_measurement(void **state) {
  (void)state;
  static const struct {
    int64_t hw;
    const char *slow; /* the candidates' tasks named so take 1 s */
    int64_t rows;     /* the transform's rows: 0 direct, 16 F(2x2), 36 */
  } cases[] = {
      {11, "(direct)", 16}, /* F(2x2) and F(4x4) tie: the first */
      {11, "(F(2x2))", 0},  /* one task against three */
      {11, "(F(", 0},
      {7, "(direct)", 16}, /* the rule leaves 7x7 direct */
  };
  char path[512];
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    ts_db *db = fresh_db("wino_measure", path, sizeof path);
    /* the candidates' tasks, then their records */
    ts_graph *g = measured(NULL, cases[k].hw, true);
    const ts_graph_task *t;
    int n;
    ts_graph_winograd_candidate_tasks(g, &t, &n);
    assert_true(n >= 6); /* two convs: direct, and each form's stages */
    assert_string_equal(ts_graph_winograd_log(g), ""); /* nothing weighed */
    fill_task_records(db, t, n, cases[k].slow, 1.0, false);
    ts_graph_free(g);
    g = measured(db, cases[k].hw, false);
    const char *log = ts_graph_winograd_log(g);
    if (!strstr(log, cases[k].rows == 0    ? ": direct ("
                     : cases[k].rows == 16 ? ": F(2x2) ("
                                           : ": F(4x4) ("))
      fail_msg("case %zu: %s", k, log);
    assert_int_equal(ts_graph_count_op(g, "WinogradInput"),
                     cases[k].rows ? 2 : 0);
    if (cases[k].rows) assert_int_equal(transform_rows(g), cases[k].rows);
    ts_graph_free(g);
    ts_db_close(db);
    unlink(path);
  }
  /* no records: the rule (F(2x2) at 11x13... here 11x11: 9 tiles of 4x4,
   * 36 of 2x2) */
  ts_db *db = fresh_db("wino_measure", path, sizeof path);
  ts_graph *g = measured(db, 11, false);
  if (!strstr(ts_graph_winograd_log(g),
              "no record for every form: F(2x2) by the rule"))
    fail_msg("%s", ts_graph_winograd_log(g));
  assert_int_equal(ts_graph_count_op(g, "WinogradInput"), 2);
  ts_graph_free(g);
  ts_db_close(db);
  unlink(path);
}

/* ts_conv_form_graph: one conv2d_nhwc workload in each form, channels-last
 * in and out, its tasks the conv's own; the forms compute the direct conv
 * of the HWIO weights given (checked against a plain loop here); the forms
 * a conv has not are refused with the reason. */
static void test_conv_forms(void **state) {
  (void)state;
  const int64_t H = 9, W = 11, CI = 32, CO = 40;
  ts_conv_form_spec c = {1, H, W, CI, CO, 3, 3, 1, 1, 1, 1, 0, true};
  float *hwio = malloc(sizeof(float) * 9 * CI * CO);
  for (int64_t i = 0; i < 9 * CI * CO; i++)
    hwio[i] = (float)((i * 13) % 23 - 11) / 32;
  ts_graph_tensor out[3][1];
  for (int m = 0; m <= 4; m += 2) {
    ts_graph *g = NULL;
    ts_error err;
    assert_int_equal(ts_conv_form_graph(&c, hwio, m, &g, &err), TS_OK);
    ts_graph_task *t = NULL;
    int n = 0;
    assert_int_equal(ts_graph_tasks(g, &t, &n, &err), TS_OK);
    assert_int_equal(n, m ? 3 : 1);
    if (m) {
      assert_non_null(strstr(t[0].first_node, "winogradinput"));
      assert_non_null(strstr(t[1].first_node, "matmul"));
      assert_non_null(strstr(t[2].first_node, "winogradoutput"));
      assert_int_equal(t[1].const_params, 2); /* the transformed weights */
    }
    free(t);
    ts_graph_value_info in = ts_graph_input(g, 0);
    assert_int_equal(in.ndim, 4);
    assert_int_equal(in.shape[1], H); /* NHWC */
    assert_int_equal(in.shape[3], CI);
    run_seeded(g, TS_GRAPH_COMPILE, out[m / 2], 7);
    assert_int_equal(out[m / 2][0].shape[3], CO);
    ts_graph_free(g);
  }
  /* the direct form against a plain loop over the same seeded input */
  float *x = malloc(sizeof(float) * H * W * CI);
  ts_host_fill_random(x, TS_FLOAT32, H * W * CI, 7);
  const float *y = out[0][0].data;
  double worst = 0;
  for (int64_t p = 0; p < H * W; p++)
    for (int64_t o = 0; o < CO; o++) {
      double acc = 0;
      for (int k = 0; k < 9; k++) {
        int64_t r = p / W + k / 3 - 1, q = p % W + k % 3 - 1;
        if (r < 0 || r >= H || q < 0 || q >= W) continue;
        for (int64_t i = 0; i < CI; i++)
          acc += (double)x[(r * W + q) * CI + i] * hwio[(k * CI + i) * CO + o];
      }
      double d = fabs(acc - y[p * CO + o]) / (1 + fabs(acc));
      if (d > worst) worst = d;
    }
  assert_true(worst < 1e-5);
  assert_same_outputs(out[0], out[1], 1, "F(2x2) form vs direct");
  assert_same_outputs(out[0], out[2], 1, "F(4x4) form vs direct");
  for (int k = 0; k < 3; k++) free(out[k][0].data);
  free(x);
  free(hwio);
  /* refusals, each naming the reason */
  struct {
    ts_conv_form_spec c;
    const char *why;
  } bad[] = {
      {{1, 8, 8, 32, 32, 3, 3, 2, 1, 1, 1, 0, true}, "stride"},
      {{1, 8, 8, 32, 32, 5, 5, 1, 2, 1, 1, 0, true}, "3x3"},
      {{1, 8, 8, 32, 32, 3, 3, 1, 3, 1, 1, 0, true}, "padding"},
      {{1, 8, 8, 32, 32, 3, 3, 1, 2, 2, 1, 0, true}, "dilated"},
      {{1, 8, 8, 32, 32, 3, 3, 1, 1, 1, 2, 0, true}, "grouped"},
      {{1, 8, 8, 32, 32, 3, 3, 1, 1, 1, 1, 16, true}, "weight_block"},
      {{1, 8, 8, 32, 32, 3, 3, 1, 1, 1, 1, 0, false}, "float32"},
      {{1, 8, 8, 16, 32, 3, 3, 1, 1, 1, 1, 0, true}, "32 input or output"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ts_graph *g = NULL;
    ts_error err;
    assert_int_equal(ts_conv_form_graph(&bad[i].c, NULL, 2, &g, &err),
                     TS_EUNSUPPORTED);
    assert_null(g);
    assert_non_null(strstr(err.msg, bad[i].why));
    assert_non_null(strstr(ts_conv_form_why_not(&bad[i].c), bad[i].why));
  }
  ts_graph *g = NULL;
  ts_error err;
  /* the direct form of a strided 5x5 conv: one task, its oneDNN call */
  ts_conv_form_spec c5 = {1, 12, 12, 8, 16, 5, 5, 2, 2, 1, 1, 0, true};
  assert_int_equal(ts_conv_form_graph(&c5, NULL, 0, &g, &err), TS_OK);
  ts_graph_task *t5 = NULL;
  int n5 = 0;
  assert_int_equal(ts_graph_tasks(g, &t5, &n5, &err), TS_OK);
  assert_int_equal(n5, 1);
  assert_non_null(t5[0].vendor);
  assert_non_null(strstr(t5[0].vendor, "kh=5 kw=5 sh=2 sw=2 pt=2"));
  assert_int_equal(t5[0].const_params, 2);
  free(t5);
  ts_graph_free(g);
  g = NULL;
  c5.groups = 2;
  assert_int_equal(ts_conv_form_graph(&c5, NULL, 0, &g, &err), TS_EUNSUPPORTED);
  assert_int_equal(ts_conv_form_graph(&c, NULL, 3, &g, &err), TS_EINVAL);
  assert_non_null(strstr(err.msg, "tile 3"));
  assert_null(ts_conv_form_why_not(&c));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_same_values),
      cmocka_unit_test(test_conv_forms),
      cmocka_unit_test(test_tile_sizes),
      cmocka_unit_test(test_pads),
      cmocka_unit_test(test_tile_by_target),
      cmocka_unit_test(test_output_rows_per_row),
      cmocka_unit_test(test_leaves_others),
      cmocka_unit_test(test_tile_by_measurement),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
