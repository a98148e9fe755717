/*
 * build_util.h — building small graphs node by node in the graph tests
 * (inputs, nodes with a fresh output of unknown shape, attributes on the
 * last node added). Include after graph/internal.h.
 */
#ifndef TESSERA_TESTS_GRAPH_BUILD_UTIL_H
#define TESSERA_TESTS_GRAPH_BUILD_UTIL_H

#include <stdlib.h>
#include <string.h>

/* A float32 4-D graph input (NCHW). */
static inline int add_input(ts_graph *g, const char *name,
                            const int64_t *shape) {
  int v = gr_value_add(g, name, TS_FLOAT32, 4, shape);
  g->values[v].is_input = true;
  g->values[v].layout = "NCHW";
  int *ins = ts_arena_alloc(g->arena, sizeof(int) * (size_t)(g->n_inputs + 1));
  if (g->n_inputs) memcpy(ins, g->inputs, sizeof(int) * (size_t)g->n_inputs);
  ins[g->n_inputs++] = v;
  g->inputs = ins;
  return v;
}

/* A node of op on ins; returns its (float32, shape unknown) output. */
static inline int node(ts_graph *g, const char *op, const int *ins, int n_ins) {
  int out = gr_value_fresh(g, "v", TS_FLOAT32, -1, NULL);
  gr_node_add(g, op, NULL, ins, n_ins, &out, 1);
  return out;
}

/* v as the graph's one output. */
static inline void set_output(ts_graph *g, int v) {
  g->outputs = ts_arena_alloc(g->arena, sizeof(int));
  g->outputs[0] = v;
  g->n_outputs = 1;
}

/* An INTS attribute (copied) on the last node added. */
static inline void set_ints(ts_graph *g, const char *name, int n,
                            const int64_t *v) {
  int64_t *copy = ts_arena_alloc(g->arena, sizeof(int64_t) * (size_t)n);
  memcpy(copy, v, sizeof(int64_t) * (size_t)n);
  gr_node_set_attr(
      g, &g->nodes[g->n_nodes - 1],
      (gr_attr){.name = name, .kind = GR_ATTR_INTS, .n = n, .ints = copy});
}

/* A constant OIHW conv weight [co, ci, k, k] with deterministic small
 * values. */
static inline int conv_weights(ts_graph *g, const char *name, int64_t co,
                               int64_t ci, int64_t k, int seed) {
  int64_t n = co * ci * k * k;
  float *w = malloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++)
    w[i] = (float)((i * 37 + seed) % 29 - 14) / 64;
  int v = gr_const_add(g, name, TS_FLOAT32, 4, (int64_t[]){co, ci, k, k}, w);
  free(w);
  return v;
}

#endif /* TESSERA_TESTS_GRAPH_BUILD_UTIL_H */
