/*
 * test_block.c — channel-blocked activations (graph/block.c): the zoo's
 * convolutional models give the same outputs blocked by 16 and by 8 as
 * channels-last, compiled and through the reference kernels right after
 * the pass; `blocked` blocks every conv that can be and leaves transforms
 * only where a node that cannot follow reads a blocked value; `auto`
 * follows the database: the blocked groups measured faster block every
 * conv (once the whole blocked graph's fused tasks have records too, and
 * beat the NHWC graph's), measured slower none, and transforms measured
 * dearer than the convs gain keep everything NHWC; a conv without records
 * stays NHWC; bad
 * block sizes and layout names are refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "graph/internal.h"
#include "codegen/codegen.h"
#include "db/db.h"
#include "db_util.h"
#include "exec_util.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static ts_graph *load(const char *model, const char *layout, int block,
                      ts_db *db, bool collect, const char *after) {
  char path[512];
  ts_graph_import_options o = {0};
  ts_graph *g = NULL;
  ts_error err;
  if (ts_graph_import_onnx(model_path(model, path), &o, &g, &err))
    fail_msg("import %s: %s", model, err.msg);
  assert_int_equal(ts_graph_set_layout(g, layout, &err), TS_OK);
  ts_block_options bo = {.block = block, .db = db, .collect_tasks = collect};
  assert_int_equal(ts_graph_set_block_options(g, &bo, &err), TS_OK);
  if (ts_graph_run_passes(g, after, &err)) fail_msg("%s: %s", model, err.msg);
  return g;
}

static void free_outs(ts_graph_tensor *t, int n) {
  for (int i = 0; i < n; i++) free(t[i].data);
}

static int count_blocked_convs(const ts_graph *g) {
  int n = 0;
  for (int i = 0; i < g->n_nodes; i++)
    n += g->nodes[i].kind == TS_GRAPH_OP && gr_node_blocked(&g->nodes[i]);
  return n;
}

static void test_models_same_outputs(void **state) {
  (void)state;
  static const char *const models[] = {"resnet50_small", "mobilenet_v2_small",
                                       "csrnet_small", "unet_small"};
  for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
    ts_graph *plain = load(models[m], "nhwc", 0, NULL, false, NULL);
    ts_graph_tensor a[8], b[8];
    int n = run_seeded(plain, TS_GRAPH_COMPILE, a, 5);
    for (int block = 8; block <= 16; block += 8) {
      ts_graph *g = load(models[m], "blocked", block, NULL, false, NULL);
      ts_block_report r;
      ts_graph_block_report(g, &r, NULL);
      if (r.blocked == 0)
        fail_msg("%s: nothing blocked by %d", models[m], block);
      assert_int_equal(r.block, block);
      assert_int_equal(run_seeded(g, TS_GRAPH_COMPILE, b, 5), n);
      char what[96];
      snprintf(what, sizeof what, "%s blocked by %d", models[m], block);
      assert_same_outputs(a, b, n, what);
      free_outs(b, n);
      ts_graph_free(g);
      /* the reference kernels run the blocked Conv and the transforms */
      g = load(models[m], "blocked", block, NULL, false, "block");
      assert_int_equal(count_blocked_convs(g), r.blocked);
      assert_int_equal(run_seeded(g, TS_GRAPH_INTERPRET, b, 5), n);
      assert_same_outputs(a, b, n, what);
      free_outs(b, n);
      ts_graph_free(g);
    }
    free_outs(a, n);
    ts_graph_free(plain);
  }
}

/* ResNet's convs: every one but the stem (3 input channels) blocked; the
 * transforms left are at the stem's pool and before the global pool. */
static void test_blocked_everywhere(void **state) {
  (void)state;
  ts_graph *g = load("resnet50_small", "blocked", 16, NULL, false, "block");
  ts_block_report r;
  const char *log;
  ts_graph_block_report(g, &r, &log);
  if (r.blocked != r.convs || r.transforms > 2)
    fail_msg("%d of %d blocked, %d transforms\n%s", r.blocked, r.convs,
             r.transforms, log);
  assert_true(r.convs >= 4);
  /* each transform is a Reshape (a view) and a Transpose */
  assert_int_equal(ts_graph_count_op(g, "Transpose"), 1 + r.transforms);
  ts_graph_free(g);
}

/* Records for the candidates' tasks that have none: a task whose name
 * holds `slow` takes slow_s, every other 10 us. */
static void fill_db(ts_db *db, const ts_graph *g, const char *slow,
                    double slow_s) {
  const ts_graph_task *t;
  int n;
  ts_graph_block_candidate_tasks(g, &t, &n);
  fill_task_records(db, t, n, slow, slow_s, true);
}

/* auto: by the records of each conv's group in each layout and of each
 * transform; without records nothing is blocked. */
static void test_measured_choice(void **state) {
  (void)state;
  static const struct {
    const char *slow;
    double slow_s;
    bool blocked; /* every conv blocked, else none */
  } cases[] = {
      {"(nhwc)", 1e-3, true},     /* blocked groups faster */
      {"(NCHW16c)", 1e-3, false}, /* NHWC faster */
      {"to_", 1.0, false},        /* transforms dearer than the gains */
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    char path[256];
    ts_db *db = fresh_db("block_test", path, sizeof path);
    /* the candidates, built for tuning */
    ts_graph *g = load("resnet50_small", "auto", 16, NULL, true, "block");
    ts_block_report r;
    const char *log;
    ts_graph_block_report(g, &r, &log);
    assert_int_equal(r.blocked, 0); /* nothing measured */
    assert_int_equal(count_blocked_convs(g), 0);
    ts_graph *h = load("resnet50_small", "auto", 16, db, false, "block");
    ts_graph_block_report(h, &r, &log);
    assert_int_equal(r.blocked, 0);
    assert_non_null(strstr(log, "no record"));
    ts_graph_free(h);
    fill_db(db, g, cases[k].slow, cases[k].slow_s);
    /* "(nhwc)" slow: the NHWC groups, not the transforms' names */
    h = load("resnet50_small", "auto", 16, db, false, "block");
    ts_graph_block_report(h, &r, &log);
    if (cases[k].blocked) {
      /* the cut's plan stands only once the whole graph's fused tasks
       * have records (a second tune): here the NHWC graph's are slower */
      assert_int_equal(r.blocked, 0);
      assert_non_null(strstr(log, "not all in the database"));
      fill_db(db, h, "NHWC", 1e-3);
      ts_graph_free(h);
      h = load("resnet50_small", "auto", 16, db, false, "block");
      ts_graph_block_report(h, &r, &log);
      assert_non_null(strstr(log, "the whole model by its fused tasks"));
    }
    if (cases[k].blocked ? r.blocked != r.convs || r.convs == 0
                         : r.blocked != 0)
      fail_msg("case %zu: %d of %d blocked\n%s", k, r.blocked, r.convs, log);
    assert_int_equal(count_blocked_convs(h), r.blocked);
    assert_null(strstr(log, "no record"));
    if (cases[k].blocked) {
      assert_true(r.after_us < r.before_us);
      assert_non_null(strstr(log, "(measured)"));
      /* and the compiled model computes what the NHWC one does */
      ts_graph_free(h);
      h = load("resnet50_small", "auto", 16, db, false, NULL);
      ts_graph *plain = load("resnet50_small", "nhwc", 0, NULL, false, NULL);
      ts_graph_tensor a[8], b[8];
      int n = run_seeded(plain, TS_GRAPH_COMPILE, a, 3);
      assert_int_equal(run_seeded(h, TS_GRAPH_COMPILE, b, 3), n);
      assert_same_outputs(a, b, n, "auto");
      free_outs(a, n);
      free_outs(b, n);
      ts_graph_free(plain);
    }
    ts_graph_free(h);
    ts_graph_free(g);
    ts_db_close(db);
    unlink(path);
  }
}

static void test_bad_options(void **state) {
  (void)state;
  ts_graph *g = ts_graph_new("empty");
  ts_error err;
  ts_block_options o = {.block = 12};
  assert_int_equal(ts_graph_set_block_options(g, &o, &err), TS_EINVAL);
  assert_non_null(strstr(err.msg, "8 or 16"));
  assert_int_equal(ts_graph_set_layout(g, "nchwc", &err), TS_EINVAL);
  assert_non_null(strstr(err.msg, "auto"));
  ts_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_models_same_outputs),
      cmocka_unit_test(test_blocked_everywhere),
      cmocka_unit_test(test_measured_choice),
      cmocka_unit_test(test_bad_options),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
