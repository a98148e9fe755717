/*
 * fuzz_trace_json.c — libFuzzer target for the trace JSON reader.
 *
 * For any input: reading must not crash and a failure hands out no trace;
 * a trace that reads prints as JSON that reads back to a trace printing
 * the same bytes, and its script form prints.
 */
#include "schedule/schedule.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ts_trace *t = NULL;
  ts_error err;
  ts_error_clear(&err);
  if (ts_trace_from_json((const char *)data, size, &t, &err) != TS_OK) {
    if (t) abort();
    return 0;
  }
  char *json = ts_trace_to_json(t);
  ts_trace *u = NULL;
  if (ts_trace_from_json(json, strlen(json), &u, &err) != TS_OK) abort();
  char *json2 = ts_trace_to_json(u);
  if (strcmp(json, json2) != 0) abort();
  free(ts_trace_print(t));
  free(json);
  free(json2);
  ts_trace_free(t);
  ts_trace_free(u);
  return 0;
}
