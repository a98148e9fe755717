/*
 * fuzz_tir_parser.c — libFuzzer target for the TIR text parser.
 *
 * For any input: parsing must not crash; when it succeeds, the printed text
 * must parse back to a structurally equal function that prints identically,
 * the verifier must answer, and (for a verified function with small
 * buffers) the interpreter must run under a step limit without crashing.
 */
#include "tir/tir.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BUFFER_BYTES (1 << 20)

static void run_interpreter(const ts_func *f) {
  int n = ts_func_n_params(f);
  void **args = calloc((size_t)n + 1, sizeof *args);
  int ok = 1;
  for (int i = 0; i < n && ok; i++) {
    int64_t bytes = ts_buffer_bytes(ts_func_param(f, i));
    if (bytes < 0 || bytes > MAX_BUFFER_BYTES)
      ok = 0;
    else
      args[i] = calloc(1, (size_t)bytes + 1);
  }
  if (ok) {
    ts_interp_options opts = {.max_steps = 20000};
    ts_error err;
    ts_interp_run(f, args, n, &opts, &err);
  }
  for (int i = 0; i < n; i++) free(args[i]);
  free(args);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ts_func *f = NULL;
  ts_error err;
  if (ts_func_parse((const char *)data, size, "fuzz", &f, &err) != TS_OK) {
    if (f) abort(); /* a failed parse must not hand out a function */
    return 0;
  }
  char *text = ts_func_print(f);
  ts_func *g = NULL;
  if (ts_func_parse(text, strlen(text), "reprint", &g, &err) != TS_OK) abort();
  char *text2 = ts_func_print(g);
  if (strcmp(text, text2) != 0) abort();
  if (!ts_func_equal(f, g)) abort();
  if (!ts_hash128_eq(ts_func_hash(f), ts_func_hash(g))) abort();
  if (ts_func_verify(f, &err) == TS_OK) run_interpreter(f);
  free(text);
  free(text2);
  ts_func_free(f);
  ts_func_free(g);
  return 0;
}
