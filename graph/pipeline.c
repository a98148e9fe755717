/*
 * pipeline.c — the graph pass pipeline: one straight-line driver, readable
 * top to bottom, that runs the passes in order and stops after the one the
 * caller names (so `tessera graph show --after PASS` can print any stage).
 * With TS_VERIFY=1 in the environment the verifier runs after every pass.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static const char *const pass_names[] = {
    "shape",  "fold", "dce",      "cse",      "bn_fold", "patterns", "lower",
    "layout", "pet",  "quantize", "winograd", "block",   "fuse",     NULL};

/* Lowering leaves dead constants and duplicate small shapes behind, and
 * nodes over constants (an Einsum's transposed weight) that fold. */
static int lower_and_clean(ts_graph *g, ts_error *err) {
  int rc = ts_graph_lower(g, err);
  if (!rc) rc = ts_graph_fold_constants(g, err);
  if (!rc) rc = ts_graph_eliminate_dead(g, err);
  if (!rc) rc = ts_graph_eliminate_common(g, err);
  return rc;
}

const char *const *ts_graph_pass_names(void) { return pass_names; }

/* Runs one pass, then the verifier when asked; true when the pipeline
 * should stop (an error, or the pass is the last one wanted). A graph that
 * failed is refused, and a pass in which an allocation failed (what it
 * could not store it dropped) gives TS_ENOMEM. */
static bool step(ts_graph *g, const char *name,
                 int (*pass)(ts_graph *, ts_error *), const char *stop_after,
                 int *rc, ts_error *err) {
  unsigned long failures = ts_alloc_failures();
  *rc = gr_failed(g) ? TS_ENOMEM : pass(g, err);
  *rc = gr_alloc_check(g, failures, *rc, err, name);
  if (*rc == TS_OK && getenv("TS_VERIFY") && !strcmp(getenv("TS_VERIFY"), "1"))
    *rc = ts_graph_verify(g, err);
  return *rc != TS_OK || (stop_after && !strcmp(stop_after, name));
}

/* The passes in order, from index `first` on. */
static int run_from(ts_graph *g, int first, const char *stop_after,
                    ts_error *err) {
  static int (*const passes[])(ts_graph *,
                               ts_error *) = {ts_graph_infer_shapes,
                                              ts_graph_fold_constants,
                                              ts_graph_eliminate_dead,
                                              ts_graph_eliminate_common,
                                              ts_graph_fold_batchnorm,
                                              ts_graph_match_patterns,
                                              lower_and_clean,
                                              ts_graph_convert_layout,
                                              ts_graph_pet,
                                              ts_graph_quantize,
                                              ts_graph_winograd,
                                              ts_graph_block,
                                              ts_graph_fuse};
  int rc = TS_OK;
  for (int i = first; pass_names[i]; i++) {
    bool stop = step(g, pass_names[i], passes[i], stop_after, &rc, err);
    if (rc == TS_OK) g->passes_run = i + 1;
    if (stop) return rc;
  }
  return rc;
}

static int pass_index(const char *name, ts_error *err) {
  for (int i = 0; pass_names[i]; i++)
    if (!strcmp(pass_names[i], name)) return i;
  return TS_ERR(err, TS_EINVAL,
                "unknown pass '%s' (passes: shape, fold, dce, cse, "
                "bn_fold, patterns, lower, layout, pet, quantize, winograd, "
                "block, fuse)",
                name);
}

/* The passes rewrite the graph in place, and most are not idempotent (the
 * layout pass would transpose the weights it laid out once already): a
 * graph remembers how far it went, and a second call continues there. */
int ts_graph_run_passes(ts_graph *g, const char *stop_after, ts_error *err) {
  if (stop_after) {
    int rc = pass_index(stop_after, err);
    if (rc < 0) return rc;
    if (rc < g->passes_run) return TS_OK; /* already past it */
  }
  return run_from(g, g->passes_run, stop_after, err);
}

int gr_run_passes_after(ts_graph *g, const char *done, const char *stop_after,
                        ts_error *err) {
  int first = pass_index(done, err);
  if (first < 0) return first;
  if (stop_after) {
    int last = pass_index(stop_after, err);
    if (last < 0) return last;
    if (last <= first || last < g->passes_run) return TS_OK;
  }
  return run_from(g, first + 1 > g->passes_run ? first + 1 : g->passes_run,
                  stop_after, err);
}
