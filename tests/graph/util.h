/*
 * util.h — helpers shared by the graph tests: where the generated test
 * models are (the graph_models ctest fixture writes them into the build
 * directory) and a one-call import with the pass pipeline.
 */
#ifndef TESSERA_TESTS_GRAPH_UTIL_H
#define TESSERA_TESTS_GRAPH_UTIL_H

#include "graph/graph.h"

#include <stdio.h>

#define MODEL_DIR TS_BINARY_DIR "/graph_models"

/* The path of a generated model ("resnet50_small" -> .../resnet50_small.onnx).
 */
static inline const char *model_path(const char *name, char buf[512]) {
  snprintf(buf, 512, "%s/%s.onnx", MODEL_DIR, name);
  return buf;
}

/* Imports a model with the given input shapes and runs the passes up to
 * `after` (NULL: all; "none": none). Returns the graph or NULL (err set). */
static inline ts_graph *load_model(const char *name, const char *const *shapes,
                                   int n_shapes, const char *after,
                                   ts_error *err) {
  char path[512];
  ts_graph_import_options o = {0};
  o.input_shapes = shapes;
  o.n_input_shapes = n_shapes;
  ts_graph *g;
  if (ts_graph_import_onnx(model_path(name, path), &o, &g, err) != TS_OK)
    return NULL;
  if (after && !__builtin_strcmp(after, "none")) return g;
  if (ts_graph_run_passes(g, after, err) != TS_OK) {
    ts_graph_free(g);
    return NULL;
  }
  return g;
}

static const char *const bert_shapes[] = {"input_ids=1x16",
                                          "attention_mask=1x16"};

#endif /* TESSERA_TESTS_GRAPH_UTIL_H */
