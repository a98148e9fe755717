/*
 * fuzz_onnx_import.c — libFuzzer target for the ONNX importer.
 *
 * For any input: import must not crash and either fail with a message or
 * give a graph that verifies; the pass pipeline must then answer (success
 * or an error) without crashing, and a graph that passes prints and hashes.
 * Limits are small so the fuzzer spends its time on structure, not size.
 */
#include "graph/graph.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ts_graph_import_options o = {0};
  o.limits.max_constant_bytes = 16 << 20;
  o.limits.max_nodes = 4096;
  o.limits.max_tensor_elems = 1 << 20;
  ts_graph *g;
  ts_error err;
  if (ts_graph_import_onnx_bytes(data, size, NULL, &o, &g, &err) != TS_OK) {
    if (!err.msg[0]) abort();
    return 0;
  }
  if (ts_graph_verify(g, &err) != TS_OK) abort();
  if (ts_graph_run_passes(g, NULL, &err) == TS_OK) {
    char *text = ts_graph_print(g);
    free(text);
    (void)ts_graph_hash(g);
  }
  ts_graph_free(g);
  return 0;
}
