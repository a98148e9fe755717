/*
 * fuzz_rpc_request.c — libFuzzer target for what a worker and a runner
 * decode from the network, and what the measuring helper reads from a
 * child: the input is tried as a POST /v1/measure body (the worker's own
 * decoder, measure_request_decode), as a JSON control message (a runner's
 * view of a worker's reply: results, config, artifact), and as the raw
 * bytes of a child's result (sandbox_result_check, then the JSON encoder).
 *
 * For any input: nothing crashes or leaks; a decoded request honours every
 * limit; a failed decode hands nothing out; a result that passes the check
 * is within range.
 */
#include "rpc/internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static ts_rpc_limits small_limits(void) {
  ts_rpc_limits lim = ts_rpc_limits_default();
  lim.max_body_bytes = 1 << 20;
  lim.max_json_bytes = 256 << 10;
  lim.max_artifact_bytes = 256 << 10;
  lim.max_candidates = 16;
  return lim;
}

static void as_measure_body(const uint8_t *data, size_t size,
                            const ts_rpc_limits *lim) {
  measure_request mr;
  ts_error err;
  ts_error_clear(&err);
  if (measure_request_decode(data, size, lim, &mr, &err) != TS_OK) {
    if (mr.artifacts || mr.ids || mr.head || mr.n) abort();
    if (!err.msg[0]) abort(); /* a refusal says why */
    return;
  }
  if (mr.n < 1 || mr.n > lim->max_candidates) abort();
  if (ts_measure_config_check(&mr.cfg, &err) != TS_OK) abort();
  for (int i = 0; i < mr.n; i++) {
    const ts_artifact *a = mr.artifacts[i];
    if (!a || (int64_t)a->n_bytes > lim->max_artifact_bytes) abort();
    for (int j = 0; j < i; j++)
      if (mr.ids[j] == mr.ids[i]) abort();
  }
  measure_request_clear(&mr);
}

static void as_json_message(const uint8_t *data, size_t size,
                            const ts_rpc_limits *lim) {
  cJSON *root = NULL;
  ts_error err;
  ts_error_clear(&err);
  if (json_parse_message((const char *)data, size, lim, &root, &err) != TS_OK)
    return;
  const cJSON *results = cJSON_GetObjectItemCaseSensitive(root, "results");
  const cJSON *x;
  cJSON_ArrayForEach(x, results) {
    ts_measure_result r;
    int64_t id = 0;
    if (result_from_json(x, &r, &id, &err) != TS_OK) continue;
    if (r.n_seconds < 0 || r.n_seconds > TS_MEASURE_MAX_REPEAT) abort();
    if (!memchr(r.error, 0, sizeof r.error)) abort();
    cJSON_Delete(result_to_json(&r, id));
  }
  const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(root, "config");
  if (cfg) {
    ts_measure_config c = ts_measure_config_default();
    if (config_from_json(cfg, &c, &err) == TS_OK &&
        ts_measure_config_check(&c, &err) != TS_OK)
      abort();
  }
  const cJSON *art = cJSON_GetObjectItemCaseSensitive(root, "artifact");
  if (art) {
    static const unsigned char payload[64];
    ts_artifact *a = NULL;
    if (artifact_from_json(art, "artifact", payload, sizeof payload, lim, &a,
                           &err) == TS_OK)
      ts_artifact_release(a);
    else if (a)
      abort();
  }
  cJSON_Delete(root);
}

static void as_child_result(const uint8_t *data, size_t size) {
  ts_measure_result r;
  memset(&r, 0, sizeof r);
  memcpy(&r, data, size < sizeof r ? size : sizeof r);
  /* The encoder is bounded even on what the check would refuse. */
  cJSON_Delete(result_to_json(&r, 0));
  char why[128];
  for (int repeat = 0; repeat <= 2; repeat++) {
    ts_measure_result c = r;
    if (!sandbox_result_check(&c, repeat, why, sizeof why)) continue;
    if (c.n_seconds < 0 || c.n_seconds > TS_MEASURE_MAX_REPEAT) abort();
    if (c.status != TS_MEASURE_OK && c.status != TS_MEASURE_BUILD_ERROR &&
        c.status != TS_MEASURE_RUN_ERROR && c.status != TS_MEASURE_WRONG_RESULT)
      abort();
    if (!memchr(c.error, 0, sizeof c.error)) abort();
    cJSON_Delete(result_to_json(&c, 0));
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ts_rpc_limits lim = small_limits();
  as_measure_body(data, size, &lim);
  as_json_message(data, size, &lim);
  as_child_result(data, size);
  return 0;
}
