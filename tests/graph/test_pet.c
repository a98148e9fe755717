/*
 * test_pet.c — the pet pass (partially equivalent transformations): a
 * chain of dilated convs becomes dense convs over sub-images in the batch
 * with one re-layout at each end, computing the same values; the row-split
 * mutant differs at its seam and its corrected form matches the original
 * on every generated small zoo model; deliberately wrong mutants (an
 * off-by-one pad, swapped spatial axes, a dropped boundary row) are caught
 * by the checker and either corrected or never applied; the random points
 * are reproducible from the seed; bad options are refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "graph/internal.h"
#include "graph/pet.h"
#include "build_util.h"
#include "db_util.h"
#include "exec_util.h"
#include "util.h"

#include "codegen/codegen.h"
#include "db/db.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int bias(ts_graph *g, const char *name, int64_t c) {
  float b[128];
  assert_true(c <= 128);
  for (int i = 0; i < c; i++) b[i] = (float)(i % 7) / 8 - 0.3f;
  return gr_const_add(g, name, TS_FLOAT32, 1, &c, b);
}

/* x [1, 64, hw, hw] -> conv 3x3 (dilation d, pad p) + bias -> relu ->
 * conv 3x3 (dilation d, pad p) -> relu. */
static ts_graph *dilated_chain(int64_t hw, int64_t d, const int64_t *pads) {
  ts_graph *g = ts_graph_new("dil");
  int x = add_input(g, "x", (int64_t[]){1, 64, hw, hw});
  int w1 = conv_weights(g, "w1", 64, 64, 3, 1),
      w2 = conv_weights(g, "w2", 64, 64, 3, 2);
  int c1 = node(g, "Conv", (int[]){x, w1, bias(g, "b1", 64)}, 3);
  set_ints(g, "pads", 4, pads);
  set_ints(g, "dilations", 2, (int64_t[]){d, d});
  int r1 = node(g, "Relu", &c1, 1);
  int c2 = node(g, "Conv", (int[]){r1, w2}, 2);
  set_ints(g, "pads", 4, pads);
  set_ints(g, "dilations", 2, (int64_t[]){d, d});
  set_output(g, node(g, "Relu", &c2, 1));
  return g;
}

static const int64_t same2[4] = {2, 2, 2, 2}, odd[4] = {3, 3, 1, 1};

static void expect_same(ts_graph *a, ts_graph *b, ts_graph_exec_mode mode,
                        const char *what) {
  ts_graph_tensor x[8], y[8];
  int n = run_seeded(a, mode, x, 7);
  run_seeded(b, mode, y, 7);
  assert_same_outputs(x, y, n, what);
  for (int i = 0; i < n; i++) free(x[i].data), free(y[i].data);
}

static void test_dilated_chain(void **state) {
  (void)state;
  ts_error err;
  ts_graph *plain = dilated_chain(24, 2, same2),
           *pet = dilated_chain(24, 2, same2);
  assert_int_equal(ts_graph_set_pet(pet, NULL, &err), TS_OK);
  assert_int_equal(ts_graph_run_passes(plain, "winograd", &err), TS_OK);
  if (ts_graph_run_passes(pet, "winograd", &err)) fail_msg("%s", err.msg);
  ts_pet_report r;
  const char *log;
  ts_graph_pet_report(pet, &r, &log);
  /* both convs: space to batch (exact), each also split into rows
   * (corrected, kept out by its cost), split by kernel rows (pruned by its
   * estimate before any check) and, at depth 2, the pairs of those */
  if (r.generated < 6 || r.exact != 2 ||
      r.corrected + r.pruned != r.generated - 2)
    fail_msg("%d generated, %d exact, %d corrected, %d pruned\n%s", r.generated,
             r.exact, r.corrected, r.pruned, log);
  assert_non_null(strstr(log, "split_rows+dilated_to_batch"));
  assert_int_equal(r.wrong, 0);
  assert_int_equal(r.applied, 2);
  assert_int_equal(r.relayouts_cancelled, 1);
  assert_non_null(strstr(log, "dilated_to_batch: 9 boxes, 0 differ"));
  /* the dense convs went to Winograd; a dilated one cannot */
  assert_int_equal(ts_graph_count_op(plain, "WinogradInput"), 0);
  assert_int_equal(ts_graph_count_op(pet, "WinogradInput"), 2);
  /* NCHW -> NHWC, space to batch, batch to space, NHWC -> NCHW */
  assert_int_equal(ts_graph_count_op(pet, "Transpose"), 4);
  expect_same(plain, pet, TS_GRAPH_INTERPRET, "pet (reference kernels)");
  ts_graph_free(plain);
  ts_graph_free(pet);
  /* compiled, through fusion */
  plain = dilated_chain(24, 2, same2), pet = dilated_chain(24, 2, same2);
  assert_int_equal(ts_graph_set_pet(pet, NULL, &err), TS_OK);
  assert_int_equal(ts_graph_run_passes(plain, NULL, &err), TS_OK);
  assert_int_equal(ts_graph_run_passes(pet, NULL, &err), TS_OK);
  assert_int_equal(ts_graph_verify(pet, &err), TS_OK);
  expect_same(plain, pet, TS_GRAPH_COMPILE, "pet (compiled)");
  ts_graph_free(plain);
  ts_graph_free(pet);
}

/* Pads that are not multiples of the dilation: the dense conv's pads are
 * rounded (down at the start, up at the end) and every row reads its
 * neighbours shifted by one: caught everywhere, never applied. */
static void test_dilated_odd_pad(void **state) {
  (void)state;
  ts_error err;
  ts_graph *plain = dilated_chain(24, 2, odd), *pet = dilated_chain(24, 2, odd);
  ts_pet_options o = {.only = "dilated_to_batch", .apply_all = true};
  assert_int_equal(ts_graph_set_pet(pet, &o, &err), TS_OK);
  assert_int_equal(ts_graph_run_passes(plain, "pet", &err), TS_OK);
  if (ts_graph_run_passes(pet, "pet", &err)) fail_msg("%s", err.msg);
  ts_pet_report r;
  ts_graph_pet_report(pet, &r, NULL);
  assert_int_equal(r.generated, 2);
  assert_int_equal(r.wrong, 2);
  assert_int_equal(r.applied, 0);
  expect_same(plain, pet, TS_GRAPH_INTERPRET, "pet, odd pads");
  ts_graph_free(plain);
  ts_graph_free(pet);
}

/* An image the dilation does not divide (25 x 25, dilation 2): cropped to
 * 24 x 24 in the batch layout, the last rows and columns corrected (by
 * columns and rows both); the same values compiled. */
static void test_dilated_odd_size(void **state) {
  (void)state;
  ts_error err;
  ts_graph *plain = dilated_chain(25, 2, same2),
           *pet = dilated_chain(25, 2, same2);
  ts_pet_options o = {.only = "dilated_to_batch", .apply_all = true};
  assert_int_equal(ts_graph_set_pet(pet, &o, &err), TS_OK);
  assert_int_equal(ts_graph_run_passes(plain, NULL, &err), TS_OK);
  if (ts_graph_run_passes(pet, NULL, &err)) fail_msg("%s", err.msg);
  ts_pet_report r;
  ts_graph_pet_report(pet, &r, NULL);
  assert_int_equal(r.corrected, 2);
  assert_int_equal(r.applied, 2);
  assert_int_equal(r.relayouts_cancelled, 0); /* the corrections between */
  const char *log;
  ts_graph_pet_report(pet, NULL, &log);
  if (!strstr(log, "corrected by columns [") || !strstr(log, " and rows ["))
    fail_msg("%s", log);
  assert_int_equal(ts_graph_verify(pet, &err), TS_OK);
  expect_same(plain, pet, TS_GRAPH_COMPILE, "pet, 25 x 25 (compiled)");
  ts_graph_free(plain);
  ts_graph_free(pet);
}

/* Every mutant the generator makes on the small zoo models, corrected and
 * applied whatever its cost, computes what the original does. */
static void test_zoo_mutants_corrected(void **state) {
  (void)state;
  /* dilations: CSRNet only; matmuls reading one value: BERT's Q, K, V;
   * unpadded convs: U-Net */
  static const struct {
    const char *model, *kind;
  } runs[] = {{"csrnet_small", "split_rows"},
              {"resnet50_small", "split_rows"},
              {"mobilenet_v2_small", "split_rows"},
              {"csrnet_small", "dilated_to_batch"},
              {"resnet50_small", "split_kernel"},
              {"csrnet_small", "split_kernel"},
              {"bert_small", "batch_shared_input"},
              {"unet_small", "pad_same"}};
  for (size_t k = 0; k < sizeof runs / sizeof *runs; k++) {
    ts_error err;
    bool bert = !strcmp(runs[k].model, "bert_small");
    ts_graph *plain = load_model(runs[k].model, bert ? bert_shapes : NULL,
                                 bert ? 2 : 0, "none", &err);
    ts_graph *pet = load_model(runs[k].model, bert ? bert_shapes : NULL,
                               bert ? 2 : 0, "none", &err);
    if (!plain || !pet) fail_msg("%s: %s", runs[k].model, err.msg);
    /* (split_kernel at depth 1: at depth 2 a node has several exact
     * mutants, and one is applied) */
    ts_pet_options o = {.only = runs[k].kind,
                        .apply_all = true,
                        .depth = strcmp(runs[k].kind, "split_kernel") ? 0 : 1};
    assert_int_equal(ts_graph_set_pet(pet, &o, &err), TS_OK);
    assert_int_equal(ts_graph_run_passes(plain, "pet", &err), TS_OK);
    if (ts_graph_run_passes(pet, "pet", &err))
      fail_msg("%s: %s", runs[k].model, err.msg);
    ts_pet_report r;
    ts_graph_pet_report(pet, &r, NULL);
    if (r.applied == 0 || r.wrong || r.unchecked)
      fail_msg("%s, %s: %d applied, %d wrong, %d not checked", runs[k].model,
               runs[k].kind, r.applied, r.wrong, r.unchecked);
    assert_int_equal(r.applied, r.exact + r.corrected);
    if (!strcmp(runs[k].kind, "split_rows")) assert_true(r.corrected > 0);
    char what[128];
    snprintf(what, sizeof what, "%s with every %s mutant", runs[k].model,
             runs[k].kind);
    expect_same(plain, pet, TS_GRAPH_INTERPRET, what);
    ts_graph_free(plain);
    ts_graph_free(pet);
  }
}

/* ---- deliberately wrong mutants ---- */

/* x [1, 32, 12, 12] -> 3x3 conv, pad 1 (24 channels, bias). */
static ts_graph *one_conv(void) {
  ts_graph *g = ts_graph_new("one");
  int x = add_input(g, "x", (int64_t[]){1, 32, 12, 12});
  int c =
      node(g, "Conv",
           (int[]){x, conv_weights(g, "w", 24, 32, 3, 3), bias(g, "b", 24)}, 3);
  set_ints(g, "pads", 4, (int64_t[]){1, 1, 1, 1});
  set_output(g, c);
  return g;
}

/* the same conv with pads [0, 1, 2, 1]: every row reads one row lower */
static int mut_off_by_one(ts_graph *g, const gr_node *n, pet_mutant *m,
                          ts_error *err) {
  if (strcmp(n->op, "Conv")) return 0;
  int v = pet_emit(g, m, "Conv", n->inputs, n->n_inputs, n, err);
  if (v < 0) return v;
  pet_set_ints(g, m, "pads", 4, (int64_t[]){0, 1, 2, 1});
  if (gr_infer_node(g, &m->nodes[m->n - 1], err)) return -1;
  m->out = v;
  m->kind = "off_by_one_pad";
  return 1;
}

static int infer(ts_graph *g, pet_mutant *m, ts_error *err) {
  return gr_infer_node(g, &m->nodes[m->n - 1], err)
             ? -1
             : m->nodes[m->n - 1].outputs[0];
}

/* H and W swapped on the way in and out: the weights act transposed */
static int mut_swapped(ts_graph *g, const gr_node *n, pet_mutant *m,
                       ts_error *err) {
  if (strcmp(n->op, "Conv")) return 0;
  int v = pet_emit(g, m, "Transpose", n->inputs, 1, NULL, err);
  pet_set_ints(g, m, "perm", 4, (int64_t[]){0, 2, 1, 3});
  if ((v = infer(g, m, err)) < 0) return v;
  int ins[3] = {v, n->inputs[1], n->inputs[2]};
  v = pet_emit(g, m, "Conv", ins, 3, n, err);
  if ((v = infer(g, m, err)) < 0) return v;
  v = pet_emit(g, m, "Transpose", &v, 1, NULL, err);
  pet_set_ints(g, m, "perm", 4, (int64_t[]){0, 2, 1, 3});
  if ((v = infer(g, m, err)) < 0) return v;
  m->out = v;
  m->kind = "swapped_axes";
  return 1;
}

/* the conv's last row replaced by the row before it */
static int mut_dropped_row(ts_graph *g, const gr_node *n, pet_mutant *m,
                           ts_error *err) {
  if (strcmp(n->op, "Conv")) return 0;
  int c = pet_emit(g, m, "Conv", n->inputs, n->n_inputs, n, err);
  if ((c = infer(g, m, err)) < 0) return c;
  int64_t h = g->values[c].shape[1];
  int pieces[2];
  for (int k = 0; k < 2; k++) {
    int64_t lo = k ? h - 2 : 0, hi = k ? h - 1 : h - 1, ax = 1;
    int s = pet_int64s(g, "s", 1, &lo), e = pet_int64s(g, "e", 1, &hi),
        a = pet_int64s(g, "a", 1, &ax);
    pet_emit(g, m, "Slice", (int[]){c, s, e, a}, 4, NULL, err);
    if ((pieces[k] = infer(g, m, err)) < 0) return -1;
  }
  pet_emit(g, m, "Concat", pieces, 2, NULL, err);
  gr_node_set_attr(g, &m->nodes[m->n - 1],
                   (gr_attr){.name = "axis", .kind = GR_ATTR_INT, .i = 1});
  if ((m->out = infer(g, m, err)) < 0) return -1;
  m->kind = "dropped_row";
  return 1;
}

static void test_wrong_mutants(void **state) {
  (void)state;
  static const pet_mutator fns[] = {mut_off_by_one, mut_swapped,
                                    mut_dropped_row};
  static const char *const kinds[] = {"off_by_one_pad", "swapped_axes",
                                      "dropped_row"};
  for (int k = 0; k < 3; k++) {
    ts_error err;
    ts_graph *plain = one_conv(), *pet = one_conv();
    ts_pet_options o = {.only = kinds[k], .apply_all = true, .depth = 1};
    assert_int_equal(ts_graph_set_pet(pet, &o, &err), TS_OK);
    assert_int_equal(pet_add_mutator(pet, kinds[k], fns[k], &err), TS_OK);
    assert_int_equal(ts_graph_run_passes(plain, "pet", &err), TS_OK);
    if (ts_graph_run_passes(pet, "pet", &err)) fail_msg("%s", err.msg);
    ts_pet_report r;
    const char *log;
    ts_graph_pet_report(pet, &r, &log);
    assert_int_equal(r.generated, 1);
    assert_int_equal(r.exact, 0); /* caught */
    if (k < 2) {
      /* differs everywhere: no band covers it, never applied */
      assert_int_equal(r.wrong, 1);
      assert_int_equal(r.applied, 0);
      assert_non_null(strstr(log, "dropped"));
    } else {
      /* the last row's boxes differ; one band of the original fixes them */
      assert_int_equal(r.corrected, 1);
      assert_int_equal(r.applied, 1);
    }
    expect_same(plain, pet, TS_GRAPH_INTERPRET, kinds[k]);
    ts_graph_free(plain);
    ts_graph_free(pet);
  }
}

/* x [1, 8, h, w] -> one conv of kernel k x k, stride s, dilation d, pads
 * p (12 channels, bias). */
static ts_graph *conv_geometry(int64_t h, int64_t w, int64_t k, int64_t s,
                               int64_t d, const int64_t *p) {
  ts_graph *g = ts_graph_new("geometry");
  int x = add_input(g, "x", (int64_t[]){1, 8, h, w});
  int c =
      node(g, "Conv",
           (int[]){x, conv_weights(g, "w", 12, 8, k, 5), bias(g, "b", 12)}, 3);
  set_ints(g, "pads", 4, p);
  set_ints(g, "strides", 2, (int64_t[]){s, s});
  set_ints(g, "dilations", 2, (int64_t[]){d, d});
  set_output(g, c);
  return g;
}

/* split_kernel: a conv as two convs over the kernel's first rows and the
 * rest, added. Exact on every geometry (strides, dilations, pads that the
 * lower part's shift takes below zero, kernels taller than the pads), and
 * the compiled graph computes what the original does; at depth 2 the
 * lower part splits again. */
static void test_split_kernel(void **state) {
  (void)state;
  static const struct {
    int64_t h, w, k, s, d, p[4];
  } cases[] = {
      {12, 12, 3, 1, 1, {1, 1, 1, 1}}, /* "same" */
      {13, 11, 3, 2, 1, {1, 1, 1, 1}}, /* stride 2, odd sizes */
      {16, 16, 7, 2, 1, {3, 3, 3, 3}}, /* a stem: the lower rows shifted past
                                          the top pad */
      {14, 14, 3, 1, 2, {2, 2, 2, 2}}, /* dilated */
      {10, 10, 5, 1, 1, {0, 0, 0, 0}}, /* valid */
      {9, 12, 4, 3, 1, {2, 1, 0, 1}},  /* even kernel, uneven pads */
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    ts_error err;
#define GEO(c) conv_geometry(c.h, c.w, c.k, c.s, c.d, c.p)
    ts_graph *plain = GEO(cases[k]), *pet = GEO(cases[k]);
    ts_pet_options o = {.only = "split_kernel", .apply_all = true};
    assert_int_equal(ts_graph_set_pet(pet, &o, &err), TS_OK);
    assert_int_equal(ts_graph_run_passes(plain, "pet", &err), TS_OK);
    if (ts_graph_run_passes(pet, "pet", &err)) fail_msg("%s", err.msg);
    ts_pet_report r;
    const char *log;
    ts_graph_pet_report(pet, &r, &log);
    if (r.generated < 1 || r.exact != r.generated || r.wrong || r.applied != 1)
      fail_msg("case %zu: %d generated, %d exact, %d applied\n%s", k,
               r.generated, r.exact, r.applied, log);
    assert_non_null(strstr(log, "split_kernel: "));
    /* the lower part (two rows or more) splits again at depth 2 */
    assert_non_null(strstr(log, "split_kernel+split_kernel"));
    assert_true(ts_graph_count_op(pet, "Conv") >= 2);
    expect_same(plain, pet, TS_GRAPH_INTERPRET, "split kernel");
    ts_graph_free(plain);
    ts_graph_free(pet);
    plain = GEO(cases[k]), pet = GEO(cases[k]);
#undef GEO
    assert_int_equal(ts_graph_set_pet(pet, &o, &err), TS_OK);
    assert_int_equal(ts_graph_run_passes(plain, NULL, &err), TS_OK);
    assert_int_equal(ts_graph_run_passes(pet, NULL, &err), TS_OK);
    assert_int_equal(ts_graph_verify(pet, &err), TS_OK);
    expect_same(plain, pet, TS_GRAPH_COMPILE, "split kernel, compiled");
    ts_graph_free(plain);
    ts_graph_free(pet);
  }
}

/* The one mutant `fn` makes of pet's conv (a copy of plain) is not exact:
 * found wrong or corrected, and what the pass leaves computes what plain
 * does. Frees both graphs. */
static void expect_caught(ts_graph *plain, ts_graph *pet, const char *kind,
                          pet_mutator fn) {
  ts_error err;
  ts_pet_options o = {.only = kind, .apply_all = true, .depth = 1};
  assert_int_equal(ts_graph_set_pet(pet, &o, &err), TS_OK);
  assert_int_equal(pet_add_mutator(pet, kind, fn, &err), TS_OK);
  assert_int_equal(ts_graph_run_passes(plain, "pet", &err), TS_OK);
  if (ts_graph_run_passes(pet, "pet", &err)) fail_msg("%s", err.msg);
  ts_pet_report r;
  const char *log;
  ts_graph_pet_report(pet, &r, &log);
  if (r.generated != 1 || r.exact != 0 || r.wrong + r.corrected != 1)
    fail_msg("%s: %d generated, %d exact, %d wrong, %d corrected\n%s", kind,
             r.generated, r.exact, r.wrong, r.corrected, log);
  expect_same(plain, pet, TS_GRAPH_INTERPRET, kind);
  ts_graph_free(plain);
  ts_graph_free(pet);
}

/* stride_to_channels: a strided conv as a stride-1 conv over the image's
 * phases in the channels. Exact on every geometry (a stem's 7-row kernel
 * and pad 3, odd sizes, a stride of 3 whose last rows no output reads,
 * uneven pads, a valid conv), interpreted and compiled. */
static void test_stride_to_channels(void **state) {
  (void)state;
  static const struct {
    int64_t h, w, k, s, p[4];
  } cases[] = {
      {16, 16, 7, 2, {3, 3, 3, 3}}, /* a stem (7 x 5 kernel) */
      {13, 11, 3, 2, {1, 1, 1, 1}}, /* odd sizes */
      {14, 14, 3, 3, {0, 0, 0, 0}}, /* the last rows unread: cropped */
      {9, 12, 4, 3, {2, 1, 0, 1}},  /* even kernel, uneven pads */
      {15, 15, 5, 2, {0, 0, 0, 0}}, /* valid */
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    ts_error err;
#define GEO(c) conv_geometry(c.h, c.w, c.k, c.s, 1, c.p)
    for (int compiled = 0; compiled < 2; compiled++) {
      ts_graph *plain = GEO(cases[k]), *pet = GEO(cases[k]);
      ts_pet_options o = {
          .only = "stride_to_channels", .apply_all = true, .depth = 1};
      assert_int_equal(ts_graph_set_pet(pet, &o, &err), TS_OK);
      const char *upto = compiled ? NULL : "pet";
      assert_int_equal(ts_graph_run_passes(plain, upto, &err), TS_OK);
      if (ts_graph_run_passes(pet, upto, &err)) fail_msg("%s", err.msg);
      ts_pet_report r;
      const char *log;
      ts_graph_pet_report(pet, &r, &log);
      if (r.generated != 1 || r.exact != 1 || r.applied != 1)
        fail_msg("case %zu: %d generated, %d exact, %d applied\n%s", k,
                 r.generated, r.exact, r.applied, log);
      assert_non_null(strstr(log, "stride_to_channels: "));
      assert_int_equal(ts_graph_verify(pet, &err), TS_OK);
      expect_same(plain, pet, compiled ? TS_GRAPH_COMPILE : TS_GRAPH_INTERPRET,
                  compiled ? "stride to channels, compiled"
                           : "stride to channels");
      ts_graph_free(plain);
      ts_graph_free(pet);
    }
#undef GEO
  }
}

/* The phases in the channels in the other order than the kernel's (a
 * swapped axis): caught, never applied as it is. */
static int mut_phases_swapped(ts_graph *g, const gr_node *n, pet_mutant *m,
                              ts_error *err) {
  int rc = pet_mut_stride_to_channels(g, n, m, err);
  if (rc <= 0) return rc;
  for (int i = 0; i < m->n; i++) {
    gr_node *t = &m->nodes[i];
    if (strcmp(t->op, "Transpose")) continue;
    int64_t *p = ts_arena_alloc(g->arena, sizeof(int64_t) * 6);
    memcpy(p, (int64_t[]){0, 1, 3, 4, 2, 5}, sizeof(int64_t) * 6);
    gr_node_set_attr(
        g, t,
        (gr_attr){.name = "perm", .kind = GR_ATTR_INTS, .n = 6, .ints = p});
    if (gr_infer_node(g, t, err)) return -1;
  }
  m->kind = "phases_swapped";
  return 1;
}

static void test_stride_to_channels_wrong(void **state) {
  (void)state;
  static const int64_t p[4] = {1, 1, 1, 1};
  expect_caught(conv_geometry(12, 12, 3, 2, 1, p),
                conv_geometry(12, 12, 3, 2, 1, p), "phases_swapped",
                mut_phases_swapped);
}

/* A split kernel whose lower part reads one row too high (its top pad one
 * larger): caught, never applied as it is. */
static int mut_split_off_by_one(ts_graph *g, const gr_node *n, pet_mutant *m,
                                ts_error *err) {
  int rc = pet_mut_split_kernel(g, n, m, err);
  if (rc <= 0) return rc;
  for (int i = m->n - 1; i >= 0; i--) {
    gr_node *c = &m->nodes[i];
    if (strcmp(c->op, "Conv")) continue;
    const gr_attr *pa = gr_attr_find(c, "pads");
    int64_t *p = ts_arena_alloc(g->arena, sizeof(int64_t) * 4);
    memcpy(p, pa->ints, sizeof(int64_t) * 4);
    p[0]++, p[2]--; /* as many rows out, each read one row higher */
    gr_node_set_attr(
        g, c,
        (gr_attr){.name = "pads", .kind = GR_ATTR_INTS, .n = 4, .ints = p});
    if (gr_infer_node(g, c, err)) return -1;
    break;
  }
  m->kind = "split_off_by_one";
  return 1;
}

static void test_split_kernel_wrong(void **state) {
  (void)state;
  expect_caught(one_conv(), one_conv(), "split_off_by_one",
                mut_split_off_by_one);
}

/* The checker's boxes for the dropped row: exactly those of the last row
 * differ. */
static void test_boxes_of_dropped_row(void **state) {
  (void)state;
  ts_error err;
  ts_graph *g = one_conv();
  assert_int_equal(ts_graph_run_passes(g, "layout", &err), TS_OK);
  const gr_node *conv = NULL;
  for (int i = 0; i < g->n_nodes; i++)
    if (!strcmp(g->nodes[i].op, "Conv")) conv = &g->nodes[i];
  assert_non_null(conv);
  gr_node n = *conv;
  pet_mutant *m = calloc(1, sizeof *m);
  assert_int_equal(mut_dropped_row(g, &n, m, &err), 1);
  pet_prog orig = {&n, 1}, mp = {m->nodes, m->n};
  pet_check_opts o = {2, 11, 4096, 4096, 0, 0};
  pet_check_result res;
  assert_int_equal(
      pet_check(g, &orig, n.outputs[0], &mp, m->out, &o, &res, &err), TS_OK);
  /* rows {0, 1, 11, 12} x columns {0, 1, 11, 12} */
  assert_int_equal(res.n_boxes, 9);
  assert_int_equal(res.n_diff, 3);
  for (int64_t i = 0; i < res.n_diff; i++) {
    assert_int_equal(res.diff[i].lo[1], 11);
    assert_int_equal(res.diff[i].hi[1], 12);
  }
  /* m + 1 = 5 positions, t = 2 each; a differing box stops at its first */
  assert_int_equal(res.n_points, 6 * 5 * 2 + 3 * 1);
  pet_check_result_free(&res);
  /* reproducible: the same seed, the same values; another seed, others */
  int64_t idx[4] = {0, 3, 4, 5};
  bool ok;
  double a = pet_eval_point(g, &orig, n.outputs[0], idx, 11, 0, NULL, &ok);
  assert_true(ok);
  assert_true(a ==
              pet_eval_point(g, &orig, n.outputs[0], idx, 11, 0, NULL, &ok));
  assert_true(a !=
              pet_eval_point(g, &orig, n.outputs[0], idx, 12, 0, NULL, &ok));
  assert_true(a !=
              pet_eval_point(g, &orig, n.outputs[0], idx, 11, 1, NULL, &ok));
  free(m);
  ts_graph_free(g);
}

/* ---- the checker against brute force on random geometries ---- */

static uint64_t rnd(uint64_t *st) {
  *st ^= *st << 13, *st ^= *st >> 7, *st ^= *st << 17;
  return *st;
}

/* row (axis 1) or column (axis 2) r of the conv's output replaced by
 * r - 1 (r >= 1) */
static int dropped_row_at(ts_graph *g, const gr_node *n, pet_mutant *m,
                          int axis, int64_t r, ts_error *err) {
  int c = pet_emit(g, m, "Conv", n->inputs, n->n_inputs, n, err);
  if ((c = infer(g, m, err)) < 0) return c;
  int64_t h = g->values[c].shape[axis];
  int64_t spans[3][2] = {{0, r}, {r - 1, r}, {r + 1, h}};
  int pieces[3], np = 0;
  for (int k = 0; k < 3; k++) {
    if (spans[k][1] <= spans[k][0]) continue;
    int64_t ax = axis;
    int s = pet_int64s(g, "s", 1, &spans[k][0]),
        e = pet_int64s(g, "e", 1, &spans[k][1]), a = pet_int64s(g, "a", 1, &ax);
    pet_emit(g, m, "Slice", (int[]){c, s, e, a}, 4, NULL, err);
    if ((pieces[np++] = infer(g, m, err)) < 0) return -1;
  }
  pet_emit(g, m, "Concat", pieces, np, NULL, err);
  gr_node_set_attr(g, &m->nodes[m->n - 1],
                   (gr_attr){.name = "axis", .kind = GR_ATTR_INT, .i = axis});
  if ((m->out = infer(g, m, err)) < 0) return -1;
  m->kind = axis == 1 ? "dropped_row" : "dropped_column";
  return 1;
}

/* the conv on its input transposed twice (H <-> W and back): exact */
static int through_transposes(ts_graph *g, const gr_node *n, pet_mutant *m,
                              ts_error *err) {
  int v = n->inputs[0];
  for (int k = 0; k < 2; k++) {
    pet_emit(g, m, "Transpose", &v, 1, NULL, err);
    pet_set_ints(g, m, "perm", 4, (int64_t[]){0, 2, 1, 3});
    if ((v = infer(g, m, err)) < 0) return v;
  }
  int ins[3] = {v, n->inputs[1], n->n_inputs > 2 ? n->inputs[2] : -1};
  pet_emit(g, m, "Conv", ins, n->n_inputs, n, err);
  if ((m->out = infer(g, m, err)) < 0) return -1;
  m->kind = "through_transposes";
  return 1;
}

/* Every position where brute force finds the two programs apart lies in a
 * box the checker reports as differing, and every such box holds one, on
 * random conv geometries (kernel,
 * stride, dilation, asymmetric pads, image size) and mutants (the built-in
 * ones, a dropped row or column, a shifted pad, transposes that cancel). */
static void test_boxes_sound_random(void **state) {
  (void)state;
  uint64_t st = 0x9e3779b97f4a7c15ull;
  int checked = 0, with_diff = 0;
  for (int iter = 0; iter < 60; iter++) {
    int64_t k = 1 + (int64_t)(rnd(&st) % 5), s = 1 + (int64_t)(rnd(&st) % 2);
    int64_t d = 1 + (int64_t)(rnd(&st) % 3);
    int64_t H = 6 + (int64_t)(rnd(&st) % 9), W = 6 + (int64_t)(rnd(&st) % 9);
    int64_t pads[4];
    bool same = rnd(&st) % 2 && k % 2;
    for (int i = 0; i < 4; i++)
      pads[i] = same ? d * (k - 1) / 2
                     : (int64_t)(rnd(&st) % (uint64_t)((k - 1) * d + 1));
    if (rnd(&st) % 3 == 0) s = 1, d = 2, H = 2 * (H / 2), W = 2 * (W / 2);
    if ((H + pads[0] + pads[2] - d * (k - 1) - 1) < 0 ||
        (W + pads[1] + pads[3] - d * (k - 1) - 1) < 0)
      continue;
    ts_graph *g = ts_graph_new("rand");
    int x = add_input(g, "x", (int64_t[]){1, 3, H, W});
    int c = node(
        g, "Conv",
        (int[]){x, conv_weights(g, "w", 4, 3, k, iter), bias(g, "b", 4)}, 3);
    set_ints(g, "pads", 4, pads);
    set_ints(g, "strides", 2, (int64_t[]){s, s});
    set_ints(g, "dilations", 2, (int64_t[]){d, d});
    set_output(g, c);
    ts_error err;
    if (ts_graph_run_passes(g, "layout", &err)) fail_msg("%s", err.msg);
    gr_node n = g->nodes[0];
    for (int i = 0; i < g->n_nodes; i++)
      if (!strcmp(g->nodes[i].op, "Conv")) n = g->nodes[i];
    assert_string_equal(n.op, "Conv");
    int64_t OH = g->values[n.outputs[0]].shape[1];
    int64_t OW = g->values[n.outputs[0]].shape[2];
    for (int kind = 0; kind < 6; kind++) {
      pet_mutant *m = calloc(1, sizeof *m);
      int rc = 0;
      if (kind == 0) rc = pet_mutate(g, &n, "dilated_to_batch", m, &err);
      if (kind == 1) rc = pet_mutate(g, &n, "split_rows", m, &err);
      if (kind == 2 && OH >= 2)
        rc = dropped_row_at(g, &n, m, 1,
                            1 + (int64_t)(rnd(&st) % (uint64_t)(OH - 1)), &err);
      if (kind == 5 && OW >= 2)
        rc = dropped_row_at(g, &n, m, 2,
                            1 + (int64_t)(rnd(&st) % (uint64_t)(OW - 1)), &err);
      if (kind == 3 && pads[2] > 0 && s == 1) {
        rc = pet_emit(g, m, "Conv", n.inputs, n.n_inputs, &n, &err);
        pet_set_ints(g, m, "pads", 4,
                     (int64_t[]){pads[0] + 1, pads[1], pads[2] - 1, pads[3]});
        if (rc >= 0 && (m->out = infer(g, m, &err)) >= 0) rc = 1;
      }
      if (kind == 4) rc = through_transposes(g, &n, m, &err);
      if (rc != 1) {
        free(m);
        continue;
      }
      pet_prog orig = {&n, 1}, mp = {m->nodes, m->n};
      /* both evaluation paths: values kept whole per trial, or not */
      pet_check_opts o = {2, (uint64_t)iter + 1, 1 << 20, 4096,
                          0, iter % 2 ? 1 : -1};
      pet_check_result res;
      if (pet_check(g, &orig, n.outputs[0], &mp, m->out, &o, &res, &err))
        fail_msg("iteration %d, mutant %d: %s", iter, kind, err.msg);
      checked++;
      with_diff += res.n_diff > 0;
      const gr_value *y = &g->values[n.outputs[0]];
      bool *seen = calloc((size_t)res.n_diff + 1, sizeof *seen);
      int64_t idx[4], total = 1;
      for (int a = 0; a < 4; a++) total *= y->shape[a];
      for (int64_t f = 0; f < total; f++) {
        int64_t r = f;
        for (int a = 3; a >= 0; a--) idx[a] = r % y->shape[a], r /= y->shape[a];
        bool ok1, ok2, apart = false;
        for (int t = 0; t < 2 && !apart; t++) {
          double a =
              pet_eval_point(g, &orig, n.outputs[0], idx, 99, t, &mp, &ok1);
          double b = pet_eval_point(g, &mp, m->out, idx, 99, t, &orig, &ok2);
          assert_true(ok1 && ok2);
          apart = fabs(a - b) > 1e-9 * (1 + fabs(a) + fabs(b));
        }
        if (!apart) continue;
        bool covered = false;
        for (int64_t i = 0; i < res.n_diff && !covered; i++) {
          covered = true;
          for (int a = 0; a < 4; a++)
            covered = covered && idx[a] >= res.diff[i].lo[a] &&
                      idx[a] < res.diff[i].hi[a];
          if (covered) seen[i] = true;
        }
        if (!covered)
          fail_msg("iteration %d (k %lld, stride %lld, dilation %lld, pads "
                   "%lld %lld %lld %lld, %lldx%lld), mutant %s: position "
                   "[%lld, %lld, %lld, %lld] differs outside every "
                   "differing box",
                   iter, (long long)k, (long long)s, (long long)d,
                   (long long)pads[0], (long long)pads[1], (long long)pads[2],
                   (long long)pads[3], (long long)H, (long long)W, m->kind,
                   (long long)idx[0], (long long)idx[1], (long long)idx[2],
                   (long long)idx[3]);
      }
      /* and no box is reported without a position that differs in it */
      for (int64_t i = 0; i < res.n_diff; i++)
        if (!seen[i])
          fail_msg("iteration %d, mutant %s: box %lld reported as differing, "
                   "but no position in it does",
                   iter, m->kind, (long long)i);
      free(seen);
      pet_check_result_free(&res);
      free(m);
    }
    ts_graph_free(g);
  }
  /* the mix covers both verdicts */
  assert_true(checked >= 100);
  assert_true(with_diff >= 30 && with_diff < checked);
}

/* A mutant through an operator the checker cannot evaluate is not checked
 * and not applied. */
static int mut_relu(ts_graph *g, const gr_node *n, pet_mutant *m,
                    ts_error *err) {
  if (strcmp(n->op, "Conv")) return 0;
  int c = pet_emit(g, m, "Conv", n->inputs, n->n_inputs, n, err);
  if ((c = infer(g, m, err)) < 0) return c;
  pet_emit(g, m, "Relu", &c, 1, NULL, err);
  if ((m->out = infer(g, m, err)) < 0) return -1;
  return 1;
}

/* A mutator that fails: logged, the pass goes on. */
static int mut_fails(ts_graph *g, const gr_node *n, pet_mutant *m,
                     ts_error *err) {
  (void)g, (void)n, (void)m;
  return TS_ERR(err, TS_EINVAL, "deliberately broken");
}

static void test_unchecked_and_options(void **state) {
  (void)state;
  ts_error err;
  ts_graph *g = one_conv();
  ts_pet_options o = {.only = "relu", .apply_all = true, .depth = 1};
  assert_int_equal(ts_graph_set_pet(g, &o, &err), TS_OK);
  assert_int_equal(pet_add_mutator(g, "relu", mut_relu, &err), TS_OK);
  assert_int_equal(ts_graph_run_passes(g, "pet", &err), TS_OK);
  ts_pet_report r;
  const char *log;
  ts_graph_pet_report(g, &r, &log);
  assert_int_equal(r.unchecked, 1);
  assert_int_equal(r.applied, 0);
  assert_non_null(strstr(log, "not checked (PET cannot check through Relu"));
  assert_int_equal(ts_graph_count_op(g, "Relu"), 0);
  ts_graph_free(g);
  g = one_conv();
  ts_pet_options of = {.only = "fails"};
  assert_int_equal(ts_graph_set_pet(g, &of, &err), TS_OK);
  assert_int_equal(pet_add_mutator(g, "fails", mut_fails, &err), TS_OK);
  assert_int_equal(ts_graph_run_passes(g, NULL, &err), TS_OK);
  ts_graph_pet_report(g, &r, &log);
  assert_int_equal(r.generated, 0);
  assert_non_null(strstr(log, "fails: not built (deliberately broken)"));
  ts_graph_free(g);
  g = one_conv();
  ts_pet_options bad = {.trials = -1};
  assert_int_equal(ts_graph_set_pet(g, &bad, &err), TS_EINVAL);
  bad = (ts_pet_options){.min_gain = 1.5};
  assert_int_equal(ts_graph_set_pet(g, &bad, &err), TS_EINVAL);
  assert_int_equal(pet_add_mutator(g, "x", mut_relu, &err), TS_EINVAL);
  /* off: the pass does nothing and reports zeros */
  assert_int_equal(ts_graph_run_passes(g, "pet", &err), TS_OK);
  ts_graph_pet_report(g, &r, &log);
  assert_int_equal(r.generated, 0);
  assert_string_equal(log, "");
  ts_graph_free(g);
}

/* ---- batching what reads one value ---- */

static int matrix(ts_graph *g, const char *name, int64_t r, int64_t c,
                  int seed) {
  float *w = malloc(sizeof(float) * (size_t)(r * c));
  for (int64_t i = 0; i < r * c; i++)
    w[i] = (float)((i * 31 + seed) % 23 - 11) / 32;
  int v = gr_const_add(g, name, TS_FLOAT32, 2, (int64_t[]){r, c}, w);
  free(w);
  return v;
}

static void set_outputs(ts_graph *g, const int *v, int n) {
  g->outputs = ts_arena_alloc(g->arena, sizeof(int) * (size_t)n);
  memcpy(g->outputs, v, sizeof(int) * (size_t)n);
  g->n_outputs = n;
}

/* x [1, 16, 512] -> three MatMuls (512 -> 48, 72 and 48 columns: blocked
 * weights, panels of 24 for an AVX2 target whatever the host) each + bias,
 * as BERT's Q, K and V projections; the second one through a Relu; a
 * fourth MatMul reads the first's result. */
static ts_graph *qkv(void) {
  ts_graph *g = ts_graph_new("qkv");
  assert_int_equal(ts_graph_set_target(g, "llvm -mcpu=haswell", NULL), TS_OK);
  int x = gr_value_add(g, "x", TS_FLOAT32, 3, (int64_t[]){1, 16, 512});
  g->values[x].is_input = true;
  g->inputs = ts_arena_alloc(g->arena, sizeof(int));
  g->inputs[0] = x;
  g->n_inputs = 1;
  static const int64_t cols[3] = {48, 72, 48};
  int outs[4];
  for (int k = 0; k < 3; k++) {
    char wn[16], bn[16];
    snprintf(wn, sizeof wn, "w%d", k);
    snprintf(bn, sizeof bn, "b%d", k);
    int m = node(g, "MatMul", (int[]){x, matrix(g, wn, 512, cols[k], k)}, 2);
    outs[k] = node(g, "Add", (int[]){m, bias(g, bn, cols[k])}, 2);
  }
  outs[1] = node(g, "Relu", &outs[1], 1);
  outs[3] = node(g, "MatMul", (int[]){outs[0], matrix(g, "w3", 48, 16, 3)}, 2);
  set_outputs(g, outs, 4);
  return g;
}

/* x [1, 8, 10, 10] -> two 3x3 convs (pad 1, 16 and 32 channels, bias) and
 * a 1x1 conv that cannot join them. */
static ts_graph *convs_sharing_input(void) {
  ts_graph *g = ts_graph_new("convs");
  int x = add_input(g, "x", (int64_t[]){1, 8, 10, 10});
  int outs[3];
  for (int k = 0; k < 3; k++) {
    int64_t co = k == 1 ? 32 : 16, kk = k == 2 ? 1 : 3;
    char wn[16], bn[16];
    snprintf(wn, sizeof wn, "w%d", k);
    snprintf(bn, sizeof bn, "b%d", k);
    outs[k] =
        node(g, "Conv",
             (int[]){x, conv_weights(g, wn, co, 8, kk, k), bias(g, bn, co)}, 3);
    if (kk == 3) set_ints(g, "pads", 4, (int64_t[]){1, 1, 1, 1});
  }
  set_outputs(g, outs, 3);
  return g;
}

static void test_batch_shared_input(void **state) {
  (void)state;
  for (int which = 0; which < 2; which++) {
    ts_error err;
    ts_graph *(*make)(void) = which ? convs_sharing_input : qkv;
    const char *op = which ? "Conv" : "MatMul";
    ts_graph *plain = make(), *pet = make();
    ts_pet_options o = {.only = "batch_shared_input", .apply_all = true};
    assert_int_equal(ts_graph_set_pet(pet, &o, &err), TS_OK);
    assert_int_equal(ts_graph_run_passes(plain, "pet", &err), TS_OK);
    if (ts_graph_run_passes(pet, "pet", &err)) fail_msg("%s", err.msg);
    ts_pet_report r;
    const char *log;
    ts_graph_pet_report(pet, &r, &log);
    if (r.applied != 1 || r.exact != 1 || r.generated != 1)
      fail_msg("%s: %d applied, %d exact of %d\n%s", op, r.applied, r.exact,
               r.generated, log);
    assert_non_null(strstr(log, "batch_shared_input"));
    /* one op instead of the batched ones; the weights concatenated at
     * compile time (no Concat left), a slice per result */
    assert_int_equal(ts_graph_count_op(pet, op), which ? 2 : 2);
    assert_int_equal(ts_graph_count_op(pet, "Concat"), 0);
    assert_int_equal(ts_graph_count_op(pet, "Slice"), which ? 2 : 3);
    if (!which) assert_int_equal(ts_graph_count_op(pet, "Add"), 1);
    assert_int_equal(ts_graph_verify(pet, &err), TS_OK);
    expect_same(plain, pet, TS_GRAPH_INTERPRET, op);
    ts_graph_free(plain);
    ts_graph_free(pet);
    /* compiled, through fusion */
    plain = make(), pet = make();
    assert_int_equal(ts_graph_set_pet(pet, &o, &err), TS_OK);
    assert_int_equal(ts_graph_run_passes(plain, NULL, &err), TS_OK);
    assert_int_equal(ts_graph_run_passes(pet, NULL, &err), TS_OK);
    expect_same(plain, pet, TS_GRAPH_COMPILE, op);
    ts_graph_free(plain);
    ts_graph_free(pet);
  }
}

/* x [1, 16, 24, 24] -> two 3x3 convs of dilation 2 ("same" pads; 16 and
 * 32 channels). */
static ts_graph *dilated_pair(void) {
  ts_graph *g = ts_graph_new("dilated_pair");
  int x = add_input(g, "x", (int64_t[]){1, 16, 24, 24});
  int outs[2];
  for (int k = 0; k < 2; k++) {
    int64_t co = k ? 32 : 16;
    outs[k] = node(g, "Conv",
                   (int[]){x, conv_weights(g, k ? "w1" : "w0", co, 16, 3, k),
                           bias(g, k ? "b1" : "b0", co)},
                   3);
    set_ints(g, "pads", 4, (int64_t[]){2, 2, 2, 2});
    set_ints(g, "dilations", 2, (int64_t[]){2, 2});
  }
  set_outputs(g, outs, 2);
  return g;
}

/* Depth 2: the batched conv is itself mutated (space to batch), checked
 * against the two original convs, and applied; at depth 1 it is not made. */
static void test_depth_two(void **state) {
  (void)state;
  for (int depth = 1; depth <= 2; depth++) {
    ts_error err;
    ts_graph *plain = dilated_pair(), *pet = dilated_pair();
    ts_pet_options o = {.apply_all = true, .depth = depth};
    assert_int_equal(ts_graph_set_pet(pet, &o, &err), TS_OK);
    assert_int_equal(ts_graph_run_passes(plain, NULL, &err), TS_OK);
    assert_int_equal(ts_graph_run_passes(pet, NULL, &err), TS_OK);
    ts_pet_report r;
    const char *log;
    ts_graph_pet_report(pet, &r, &log);
    const char *line = strstr(log, "batch_shared_input+dilated_to_batch: ");
    if (depth == 1) {
      assert_null(line);
      assert_int_equal(r.generated, 1);
    } else {
      if (!line || strncmp(strchr(line, ':') + 2, "18 boxes, 0 differ", 18))
        fail_msg("depth 2:\n%s", log);
      /* split into rows after batching: both outputs differ at the seam,
       * each corrected by bands of its own conv */
      const char *split = strstr(log, "batch_shared_input+split_rows: ");
      if (!split || !strstr(split, "12 differ, corrected by rows [10, 14); by "
                                   "rows [10, 14)"))
        fail_msg("depth 2, rows:\n%s", log);
      assert_int_equal(r.applied, 1);
    }
    expect_same(plain, pet, depth == 2 ? TS_GRAPH_COMPILE : TS_GRAPH_INTERPRET,
                "depth");
    ts_graph_free(plain);
    ts_graph_free(pet);
  }
  ts_graph *g = dilated_pair();
  ts_error err;
  ts_pet_options bad = {.depth = 4};
  assert_int_equal(ts_graph_set_pet(g, &bad, &err), TS_EINVAL);
  ts_graph_free(g);
}

static int input3(ts_graph *g, const char *name, int64_t a, int64_t b,
                  int64_t c) {
  int x = gr_value_add(g, name, TS_FLOAT32, 3, (int64_t[]){a, b, c});
  g->values[x].is_input = true;
  int *ins = ts_arena_alloc(g->arena, sizeof(int) * (size_t)(g->n_inputs + 1));
  if (g->n_inputs) memcpy(ins, g->inputs, sizeof(int) * (size_t)g->n_inputs);
  ins[g->n_inputs++] = x;
  g->inputs = ins;
  return x;
}

/* kind 0: two matmuls applying one weight matrix to x1 [1, 16, 512] and
 * x2 [1, 24, 512]; kind 1: two convs applying one 3x3 weight and bias to
 * x1, x2 [1, 8, 10, 10]; kind 2: the second matmul reads the first's
 * result (through a Relu), so they cannot run as one. */
static ts_graph *shared_weights(int kind) {
  ts_graph *g = ts_graph_new("shared_weights");
  int outs[2];
  if (kind == 1) {
    int x1 = add_input(g, "x1", (int64_t[]){1, 8, 10, 10}),
        x2 = add_input(g, "x2", (int64_t[]){1, 8, 10, 10});
    int w = conv_weights(g, "w", 16, 8, 3, 1), b = bias(g, "b", 16);
    for (int k = 0; k < 2; k++) {
      outs[k] = node(g, "Conv", (int[]){k ? x2 : x1, w, b}, 3);
      set_ints(g, "pads", 4, (int64_t[]){1, 1, 1, 1});
    }
  } else if (kind == 0) {
    int x1 = input3(g, "x1", 1, 16, 512), x2 = input3(g, "x2", 1, 24, 512);
    int w = matrix(g, "w", 512, 32, 1);
    outs[0] = node(g, "MatMul", (int[]){x1, w}, 2);
    outs[1] = node(g, "MatMul", (int[]){x2, w}, 2);
  } else {
    int x = input3(g, "x", 1, 16, 32);
    int w = matrix(g, "w", 32, 32, 1);
    outs[0] = node(g, "MatMul", (int[]){x, w}, 2);
    int r = node(g, "Relu", &outs[0], 1);
    outs[1] = node(g, "MatMul", (int[]){r, w}, 2);
  }
  set_outputs(g, outs, 2);
  return g;
}

static void test_concat_shared_weights(void **state) {
  (void)state;
  for (int kind = 0; kind < 3; kind++) {
    ts_error err;
    ts_graph *plain = shared_weights(kind), *pet = shared_weights(kind);
    ts_pet_options o = {
        .only = "concat_shared_weights", .apply_all = true, .depth = 1};
    assert_int_equal(ts_graph_set_pet(pet, &o, &err), TS_OK);
    assert_int_equal(ts_graph_run_passes(plain, "pet", &err), TS_OK);
    if (ts_graph_run_passes(pet, "pet", &err)) fail_msg("%s", err.msg);
    ts_pet_report r;
    const char *log;
    ts_graph_pet_report(pet, &r, &log);
    const char *op = kind == 1 ? "Conv" : "MatMul";
    if (r.generated != 1 || r.exact != 1 || r.applied != (kind < 2))
      fail_msg("kind %d: %d generated, %d exact, %d applied\n%s", kind,
               r.generated, r.exact, r.applied, log);
    assert_non_null(strstr(log, "applying w"));
    if (kind < 2) {
      assert_int_equal(ts_graph_count_op(pet, op), 1);
      assert_int_equal(ts_graph_count_op(pet, "Concat"), 1); /* the data */
    } else {
      assert_non_null(strstr(log, "not applied (one member reads"));
      assert_int_equal(ts_graph_count_op(pet, op), 2);
    }
    assert_int_equal(ts_graph_verify(pet, &err), TS_OK);
    expect_same(plain, pet, TS_GRAPH_INTERPRET, "concat_shared_weights");
    ts_graph_free(plain);
    ts_graph_free(pet);
    /* compiled, through fusion (the convs' batched form stands where the
     * second conv stood: the first one's output transpose moves after it) */
    if (kind != 1) continue;
    plain = shared_weights(kind), pet = shared_weights(kind);
    assert_int_equal(ts_graph_set_pet(pet, &o, &err), TS_OK);
    assert_int_equal(ts_graph_run_passes(plain, NULL, &err), TS_OK);
    assert_int_equal(ts_graph_run_passes(pet, NULL, &err), TS_OK);
    expect_same(plain, pet, TS_GRAPH_COMPILE, "concat_shared_weights");
    ts_graph_free(plain);
    ts_graph_free(pet);
  }
}

/* x [1, 64, 20, 20] -> 3x3 conv without padding (bias) -> relu -> 3x3
 * conv padded on the top and left only: the "valid" convs of U-Net. */
static ts_graph *valid_convs(void) {
  ts_graph *g = ts_graph_new("valid");
  int x = add_input(g, "x", (int64_t[]){1, 64, 20, 20});
  int c1 = node(
      g, "Conv",
      (int[]){x, conv_weights(g, "w1", 64, 64, 3, 1), bias(g, "b1", 64)}, 3);
  int r = node(g, "Relu", &c1, 1);
  int c2 = node(g, "Conv", (int[]){r, conv_weights(g, "w2", 64, 64, 3, 2)}, 2);
  set_ints(g, "pads", 4, (int64_t[]){1, 1, 0, 0});
  set_output(g, c2);
  return g;
}

/* pad_same: exact (applied whatever its cost), and the compiled model
 * computes what the original does. The estimate prunes it: the winograd
 * pass takes the valid convs as they are, so the "same" form only adds
 * the border it computes and drops. */
static void test_pad_same(void **state) {
  (void)state;
  ts_error err;
  ts_graph *plain = valid_convs(), *pet = valid_convs();
  ts_pet_options o = {.only = "pad_same", .apply_all = true};
  assert_int_equal(ts_graph_set_pet(pet, &o, &err), TS_OK);
  assert_int_equal(ts_graph_run_passes(plain, NULL, &err), TS_OK);
  assert_int_equal(ts_graph_run_passes(pet, NULL, &err), TS_OK);
  ts_pet_report r;
  const char *log;
  ts_graph_pet_report(pet, &r, &log);
  if (r.generated != 2 || r.exact != 2 || r.applied != 2)
    fail_msg("%d generated, %d exact, %d applied\n%s", r.generated, r.exact,
             r.applied, log);
  /* the valid conv is one box; the other has a padding band on top and
   * on the left */
  if (!strstr(log, "pad_same: 1 boxes, 0 differ") ||
      !strstr(log, "pad_same: 4 boxes, 0 differ"))
    fail_msg("%s", log);
  expect_same(plain, pet, TS_GRAPH_COMPILE, "pad_same");
  ts_graph_free(plain);
  ts_graph_free(pet);
  /* by the estimate: both mutants pruned, and the Winograd stages replace
   * both direct convs as they are */
  pet = valid_convs();
  o.apply_all = false;
  assert_int_equal(ts_graph_set_pet(pet, &o, &err), TS_OK);
  assert_int_equal(ts_graph_run_passes(pet, "winograd", &err), TS_OK);
  ts_graph_pet_report(pet, &r, &log);
  if (r.generated != 2 || r.pruned != 2 || r.applied != 0)
    fail_msg("%d generated, %d pruned, %d applied\n%s", r.generated, r.pruned,
             r.applied, log);
  assert_int_equal(ts_graph_count_op(pet, "WinogradInput"), 2);
  assert_int_equal(ts_graph_count_op(pet, "Conv"), 0);
  assert_int_equal(ts_graph_count_op(pet, "Slice"), 0);
  ts_graph_free(pet);
}

/* The batched matmul with the first two results exchanged (the same
 * widths: [48] and [48] in qkv's first and last) */
static int mut_batch_swapped(ts_graph *g, const pet_sub *sub, pet_mutant *m,
                             ts_error *err) {
  int rc = pet_mutate_sub(g, sub, "batch_shared_input", m, err);
  if (rc <= 0) return rc;
  int t = m->outs[0];
  m->outs[0] = m->outs[2];
  m->outs[2] = t;
  m->kind = "batch_swapped";
  return 1;
}

/* ... with the first result one column off (its slice starts one later) */
static int mut_batch_shifted(ts_graph *g, const pet_sub *sub, pet_mutant *m,
                             ts_error *err) {
  int rc = pet_mutate_sub(g, sub, "batch_shared_input", m, err);
  if (rc <= 0) return rc;
  for (int i = 0; i < m->n; i++) {
    gr_node *n = &m->nodes[i];
    if (strcmp(n->op, "Slice") || n->outputs[0] != m->outs[0]) continue;
    const int64_t *s = gr_const_data(g, n->inputs[1]),
                  *e = gr_const_data(g, n->inputs[2]);
    int64_t lo = s[0] + 1, hi = e[0] + 1;
    n->inputs[1] = pet_int64s(g, "s", 1, &lo);
    n->inputs[2] = pet_int64s(g, "e", 1, &hi);
    if (gr_infer_node(g, n, err)) return -1;
  }
  m->kind = "batch_shifted";
  return 1;
}

/* the batched mutant again, under another name: a duplicate */
static int mut_batch_again(ts_graph *g, const pet_sub *sub, pet_mutant *m,
                           ts_error *err) {
  int rc = pet_mutate_sub(g, sub, "batch_shared_input", m, err);
  if (rc > 0) m->kind = "batch_again";
  return rc;
}

/* a conv copied as it is: the same program as the original */
static int mut_copy(ts_graph *g, const gr_node *n, pet_mutant *m,
                    ts_error *err) {
  if (strcmp(n->op, "Conv")) return 0;
  m->out = pet_emit(g, m, "Conv", n->inputs, n->n_inputs, n, err);
  if (m->out < 0 || gr_infer_node(g, &m->nodes[m->n - 1], err)) return -1;
  m->kind = "copy";
  return 1;
}

static void test_batch_wrong_and_duplicates(void **state) {
  (void)state;
  static const pet_sub_mutator fns[] = {mut_batch_swapped, mut_batch_shifted};
  static const char *const kinds[] = {"batch_swapped", "batch_shifted"};
  ts_error err;
  for (int k = 0; k < 2; k++) {
    ts_graph *plain = qkv(), *pet = qkv();
    ts_pet_options o = {.only = kinds[k], .apply_all = true};
    assert_int_equal(ts_graph_set_pet(pet, &o, &err), TS_OK);
    assert_int_equal(pet_add_sub_mutator(pet, kinds[k], fns[k], &err), TS_OK);
    assert_int_equal(ts_graph_run_passes(plain, "pet", &err), TS_OK);
    int rc = ts_graph_run_passes(pet, "pet", &err);
    ts_pet_report r;
    const char *log;
    ts_graph_pet_report(pet, &r, &log);
    if (rc || r.generated != 1 || r.wrong != 1 || r.applied)
      fail_msg("%s: rc %d, %d generated, %d wrong, %d applied\n%s", kinds[k],
               rc, r.generated, r.wrong, r.applied, log);
    expect_same(plain, pet, TS_GRAPH_INTERPRET, kinds[k]);
    ts_graph_free(plain);
    ts_graph_free(pet);
  }
  /* the same mutant twice, and a mutant that is the original: skipped by
   * their structural hash, before any check */
  ts_graph *g = qkv();
  ts_pet_options oa = {.apply_all = true};
  assert_int_equal(ts_graph_set_pet(g, &oa, &err), TS_OK);
  assert_int_equal(pet_add_sub_mutator(g, "batch_again", mut_batch_again, &err),
                   TS_OK);
  assert_int_equal(ts_graph_run_passes(g, "pet", &err), TS_OK);
  ts_pet_report r;
  const char *log;
  ts_graph_pet_report(g, &r, &log);
  if (r.generated != 2 || r.duplicates != 1)
    fail_msg("%d generated, %d duplicates\n%s", r.generated, r.duplicates, log);
  assert_int_equal(r.verified, 1);
  assert_non_null(strstr(log, "batch_again: the same program as a mutant"));
  ts_graph_free(g);
  g = one_conv();
  ts_pet_options oc = {.only = "copy"};
  assert_int_equal(ts_graph_set_pet(g, &oc, &err), TS_OK);
  assert_int_equal(pet_add_mutator(g, "copy", mut_copy, &err), TS_OK);
  assert_int_equal(ts_graph_run_passes(g, "pet", &err), TS_OK);
  ts_graph_pet_report(g, &r, &log);
  /* the copy, and at depth 2 the copy of the copy */
  assert_int_equal(r.duplicates, 2);
  assert_int_equal(r.verified, 0);
  assert_non_null(strstr(log, "copy: the same program as the original"));
  ts_graph_free(g);
}

/* Records for the candidates' tasks: `slow` names the candidate kind
 * whose tasks take 1 ms each, the others 10 us. */
static void fill_db(ts_db *db, const ts_graph *g, const char *slow) {
  const ts_graph_task *t;
  int n;
  ts_graph_pet_candidate_tasks(g, &t, &n);
  fill_task_records(db, t, n, slow, 1e-3, false);
}

/* With a database the choice follows the candidates' measured latencies,
 * whatever the estimate says; without records for all, the estimate. */
static void test_measured_choice(void **state) {
  (void)state;
  static const char *const slow[2] = {"dilated_to_batch", "original"};
  for (int k = 0; k < 2; k++) {
    ts_error err;
    char path[256];
    snprintf(path, sizeof path, "%s/pet_test_%d_%d.db", TS_BINARY_DIR, k,
             (int)getpid());
    unlink(path);
    ts_db *db;
    ts_db_options dbo = ts_db_defaults();
    assert_int_equal(ts_db_open(path, &dbo, &db, &err), TS_OK);
    /* the tasks the pass weighs, built for tuning */
    ts_graph *g = dilated_chain(24, 2, same2);
    ts_pet_options o = {.collect_tasks = true};
    assert_int_equal(ts_graph_set_pet(g, &o, &err), TS_OK);
    assert_int_equal(ts_graph_run_passes(g, "pet", &err), TS_OK);
    const ts_graph_task *t;
    int n;
    ts_graph_pet_candidate_tasks(g, &t, &n);
    int orig = 0, mut = 0;
    for (int i = 0; i < n; i++) {
      orig += strstr(t[i].first_node, "original") != NULL;
      mut += strstr(t[i].first_node, "dilated_to_batch") != NULL;
    }
    assert_true(orig >= 1 && mut >= 3); /* re-layouts, Winograd stages */
    /* no records yet: the estimate chooses (the mutants) */
    ts_graph *h = dilated_chain(24, 2, same2);
    ts_pet_options od = {.db = db};
    assert_int_equal(ts_graph_set_pet(h, &od, &err), TS_OK);
    assert_int_equal(ts_graph_run_passes(h, "pet", &err), TS_OK);
    ts_pet_report r;
    const char *log;
    ts_graph_pet_report(h, &r, &log);
    assert_int_equal(r.applied, 2);
    assert_null(strstr(log, "measured"));
    ts_graph_free(h);
    fill_db(db, g, slow[k]);
    h = dilated_chain(24, 2, same2);
    assert_int_equal(ts_graph_set_pet(h, &od, &err), TS_OK);
    assert_int_equal(ts_graph_run_passes(h, "pet", &err), TS_OK);
    ts_graph_pet_report(h, &r, &log);
    assert_non_null(strstr(log, "measured"));
    assert_int_equal(r.by_measurement, 2);
    assert_int_equal(r.applied, k == 0 ? 0 : 2);
    ts_graph_free(h);
    ts_graph_free(g);
    ts_db_close(db);
    unlink(path);
  }
}

/* The batched matmul is chosen when the database says it is faster, and
 * not when it says it is slower (the estimate alone never takes it: the
 * slices add to the same FLOPs). */
static void test_batch_measured_choice(void **state) {
  (void)state;
  static const char *const slow[2] = {"batch_shared_input", "original"};
  for (int k = 0; k < 2; k++) {
    ts_error err;
    char path[256];
    snprintf(path, sizeof path, "%s/pet_batch_%d_%d.db", TS_BINARY_DIR, k,
             (int)getpid());
    unlink(path);
    ts_db *db;
    ts_db_options dbo = ts_db_defaults();
    assert_int_equal(ts_db_open(path, &dbo, &db, &err), TS_OK);
    ts_graph *g = qkv();
    ts_pet_options o = {.collect_tasks = true};
    assert_int_equal(ts_graph_set_pet(g, &o, &err), TS_OK);
    assert_int_equal(ts_graph_run_passes(g, "pet", &err), TS_OK);
    ts_pet_report r;
    const char *log;
    ts_graph_pet_report(g, &r, &log);
    assert_int_equal(r.applied, 0); /* by the estimate */
    fill_db(db, g, slow[k]);
    ts_graph *h = qkv(), *plain = qkv();
    ts_pet_options od = {.db = db};
    assert_int_equal(ts_graph_set_pet(h, &od, &err), TS_OK);
    assert_int_equal(ts_graph_run_passes(h, NULL, &err), TS_OK);
    assert_int_equal(ts_graph_run_passes(plain, NULL, &err), TS_OK);
    ts_graph_pet_report(h, &r, &log);
    if (r.by_measurement != 1 || r.applied != k)
      fail_msg("%d by measurement, %d applied\n%s", r.by_measurement, r.applied,
               log);
    assert_non_null(strstr(log, "measured"));
    if (k == 1)
      expect_same(plain, h, TS_GRAPH_COMPILE, "batched by measurement");
    ts_graph_free(h);
    ts_graph_free(plain);
    ts_graph_free(g);
    ts_db_close(db);
    unlink(path);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dilated_chain),
      cmocka_unit_test(test_dilated_odd_pad),
      cmocka_unit_test(test_dilated_odd_size),
      cmocka_unit_test(test_zoo_mutants_corrected),
      cmocka_unit_test(test_wrong_mutants),
      cmocka_unit_test(test_split_kernel),
      cmocka_unit_test(test_split_kernel_wrong),
      cmocka_unit_test(test_stride_to_channels),
      cmocka_unit_test(test_stride_to_channels_wrong),
      cmocka_unit_test(test_boxes_of_dropped_row),
      cmocka_unit_test(test_unchecked_and_options),
      cmocka_unit_test(test_measured_choice),
      cmocka_unit_test(test_boxes_sound_random),
      cmocka_unit_test(test_batch_shared_input),
      cmocka_unit_test(test_batch_wrong_and_duplicates),
      cmocka_unit_test(test_batch_measured_choice),
      cmocka_unit_test(test_depth_two),
      cmocka_unit_test(test_concat_shared_weights),
      cmocka_unit_test(test_pad_same),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
