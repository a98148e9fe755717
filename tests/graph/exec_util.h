/*
 * exec_util.h — running a graph on seeded inputs and comparing outputs,
 * for the graph tests that check a pass keeps the values. Include after
 * cmocka.h.
 */
#ifndef TESSERA_TESTS_GRAPH_EXEC_UTIL_H
#define TESSERA_TESTS_GRAPH_EXEC_UTIL_H

#include "graph/graph.h"

#include <stdlib.h>

/* Runs g on seeded random inputs (ints in [0, 50)); outputs malloc'd.
 * Returns the number of outputs. */
static inline int run_seeded(const ts_graph *g, ts_graph_exec_mode mode,
                             ts_graph_tensor *outs, int seed) {
  int n_in = ts_graph_n_inputs(g);
  ts_graph_tensor ins[8];
  assert_true(n_in <= 8);
  assert_true(ts_graph_n_outputs(g) <= 8);
  for (int i = 0; i < n_in; i++) {
    ts_graph_value_info v = ts_graph_input(g, i);
    ins[i] = (ts_graph_tensor){v.name, v.dtype, v.ndim, {0}, NULL};
    int64_t n = 1;
    for (int d = 0; d < v.ndim; d++) n *= (ins[i].shape[d] = v.shape[d]);
    ins[i].data = malloc((size_t)n * ts_dtype_elem_bytes(v.dtype));
    if (ts_dtype_is_float(v.dtype))
      ts_host_fill_random(ins[i].data, v.dtype, n, (uint64_t)seed + i);
    else
      for (int64_t k = 0; k < n; k++)
        ts_host_set(ins[i].data, v.dtype, k, (double)((k * 7 + i) % 50));
  }
  ts_error err;
  int rc =
      ts_graph_execute(g, mode, ins, n_in, outs, ts_graph_n_outputs(g), &err);
  if (rc) fail_msg("execute: %s", err.msg);
  for (int i = 0; i < n_in; i++) free(ins[i].data);
  return ts_graph_n_outputs(g);
}

static inline int64_t tensor_elems(const ts_graph_tensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
  return n;
}

/* The n outputs of a and b have the same shapes and values. */
static inline void assert_same_outputs(const ts_graph_tensor *a,
                                       const ts_graph_tensor *b, int n,
                                       const char *what) {
  for (int i = 0; i < n; i++) {
    assert_int_equal(a[i].ndim, b[i].ndim);
    for (int d = 0; d < a[i].ndim; d++)
      assert_int_equal(a[i].shape[d], b[i].shape[d]);
    int64_t first;
    double max_err;
    int64_t bad = ts_host_compare(a[i].data, b[i].data, a[i].dtype,
                                  tensor_elems(&a[i]), &first, &max_err);
    if (bad)
      fail_msg("%s: output %d: %lld mismatches, max error %g", what, i,
               (long long)bad, max_err);
  }
}

#endif /* TESSERA_TESTS_GRAPH_EXEC_UTIL_H */
