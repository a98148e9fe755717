/*
 * test_tracker.c — the tracker's registry and leases over its HTTP API
 * (fake workers registered by hand): fair sharing between equal leases,
 * priority first, workers given back when a lease ends, silent workers
 * evicted, unrenewed leases expired, reported workers removed, the status
 * document, and bad requests answered 4xx.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cJSON.h>

#include "rpc_test.h"

static char reply[1 << 16];

/* POSTs a JSON body; returns the status and parses the reply into *out. */
static int post(int port, const char *path, const char *json, cJSON **out) {
  char req[8192];
  snprintf(req, sizeof req,
           "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
           path, strlen(json), json);
  int status = raw_http(port, req, strlen(req), false, reply, sizeof reply);
  char *body = strstr(reply, "\r\n\r\n");
  if (out) *out = body ? cJSON_Parse(body + 4) : NULL;
  return status;
}

static cJSON *status_doc(int port) {
  const char req[] =
      "GET /v1/status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  if (raw_http(port, req, strlen(req), false, reply, sizeof reply) != 200)
    return NULL;
  return cJSON_Parse(strstr(reply, "\r\n\r\n") + 4);
}

static void register_fake(int port, const char *key, int wport, char *id_out) {
  char json[512];
  snprintf(json, sizeof json,
           "{\"protocol\":1,\"key\":\"%s\",\"port\":%d,\"device\":\"cpu\","
           "\"target\":\"llvm -mcpu=x\",\"measurements\":%d}",
           key, wport, wport % 7);
  cJSON *r = NULL;
  assert_int_equal(post(port, "/v1/workers/register", json, &r), 200);
  snprintf(id_out, 48, "%s", cJSON_GetObjectItem(r, "worker_id")->valuestring);
  cJSON_Delete(r);
}

/* Acquires a lease; returns its worker count and id. */
static int acquire(int port, const char *key, int want, int priority,
                   const char *runner, char *id_out) {
  char json[512];
  snprintf(json, sizeof json,
           "{\"protocol\":1,\"key\":\"%s\",\"want\":%d,\"priority\":%d,"
           "\"runner\":\"%s\"}",
           key, want, priority, runner);
  cJSON *r = NULL;
  assert_int_equal(post(port, "/v1/leases", json, &r), 200);
  snprintf(id_out, 48, "%s", cJSON_GetObjectItem(r, "lease_id")->valuestring);
  int n = cJSON_GetArraySize(cJSON_GetObjectItem(r, "workers"));
  cJSON_Delete(r);
  return n;
}

/* Renews a lease: its worker count, or -1 when the lease is unknown. */
static int renew(int port, const char *lease) {
  char json[256];
  snprintf(json, sizeof json, "{\"protocol\":1,\"lease_id\":\"%s\"}", lease);
  cJSON *r = NULL;
  int status = post(port, "/v1/leases/renew", json, &r);
  int n = status == 200 ? cJSON_GetArraySize(cJSON_GetObjectItem(r, "workers"))
                        : -1;
  cJSON_Delete(r);
  return n;
}

static void release(int port, const char *lease) {
  char json[256];
  snprintf(json, sizeof json, "{\"protocol\":1,\"lease_id\":\"%s\"}", lease);
  assert_int_equal(post(port, "/v1/leases/release", json, NULL), 200);
}

static void heartbeat_all(int port, char ids[][48], int n) {
  for (int i = 0; i < n; i++) {
    char json[256];
    snprintf(json, sizeof json, "{\"protocol\":1,\"worker_id\":\"%s\"}",
             ids[i]);
    post(port, "/v1/workers/heartbeat", json, NULL);
  }
}

static void test_fair_shares_and_priority(void **state) {
  (void)state;
  ts_tracker_options o = ts_tracker_defaults();
  o.port = 0;
  ts_tracker *t = NULL;
  ts_error err;
  ts_error_clear(&err);
  assert_int_equal(ts_tracker_start(&o, &t, &err), TS_OK);
  int port = ts_tracker_port(t);
  char ids[4][48];
  for (int i = 0; i < 3; i++) register_fake(port, "cpu-k", 2001 + i, ids[i]);
  register_fake(port, "other", 2100, ids[3]);
  assert_int_equal(ts_tracker_num_workers(t), 4);

  char a[48], b[48], c[48], d[48];
  assert_int_equal(acquire(port, "cpu-k", 3, 0, "job-a", a), 3);
  /* An equal job arriving later gets a fair share at once... */
  assert_int_equal(acquire(port, "cpu-k", 3, 0, "job-b", b), 1);
  /* ...taken from the first, which keeps the larger half (arrival). */
  assert_int_equal(renew(port, a), 2);
  /* A higher priority job is served first. */
  assert_int_equal(acquire(port, "cpu-k", 3, 5, "job-c", c), 3);
  assert_int_equal(renew(port, a), 0);
  assert_int_equal(renew(port, b), 0);
  /* When it ends, the others get their shares back. */
  release(port, c);
  assert_int_equal(renew(port, a), 2);
  assert_int_equal(renew(port, b), 1);
  /* A job wanting one worker takes one; the split follows. */
  release(port, b);
  assert_int_equal(renew(port, a), 3);
  assert_int_equal(acquire(port, "cpu-k", 1, 0, "job-d", d), 1);
  assert_int_equal(renew(port, a), 2);
  /* Keys do not mix; an unknown key leases nothing. */
  char e[48];
  assert_int_equal(acquire(port, "other", 5, 0, "job-e", e), 1);
  char z[48];
  assert_int_equal(acquire(port, "no-such-key", 2, 0, "job-z", z), 0);

  /* The status document. */
  cJSON *s = status_doc(port);
  assert_non_null(s);
  assert_int_equal(cJSON_GetObjectItem(s, "protocol")->valueint, 1);
  cJSON *ws = cJSON_GetObjectItem(s, "workers");
  assert_int_equal(cJSON_GetArraySize(ws), 4);
  int leased_a = 0, leased_d = 0;
  cJSON *w;
  cJSON_ArrayForEach(w, ws) {
    assert_non_null(cJSON_GetObjectItem(w, "key"));
    /* No host given: the tracker uses the address it saw. */
    assert_true(!strncmp(cJSON_GetObjectItem(w, "address")->valuestring,
                         "127.0.0.1:2", 11));
    assert_string_equal(cJSON_GetObjectItem(w, "device")->valuestring, "cpu");
    assert_true(cJSON_GetObjectItem(w, "last_heard_ms")->valuedouble >= 0);
    assert_true(cJSON_IsNumber(cJSON_GetObjectItem(w, "measurements")));
    const cJSON *by = cJSON_GetObjectItem(w, "leased_by");
    if (cJSON_IsString(by) && !strcmp(by->valuestring, "job-a")) leased_a++;
    if (cJSON_IsString(by) && !strcmp(by->valuestring, "job-d")) leased_d++;
    assert_string_equal(cJSON_GetObjectItem(w, "state")->valuestring,
                        cJSON_IsString(by) ? "leased" : "free");
  }
  assert_int_equal(leased_a, 2);
  assert_int_equal(leased_d, 1);
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(s, "leases")), 4);
  cJSON_Delete(s);

  /* A reported worker is removed and its lease refilled when possible. */
  char json[256];
  snprintf(json, sizeof json,
           "{\"protocol\":1,\"worker_id\":\"%s\",\"error\":\"x\"}", ids[0]);
  assert_int_equal(post(port, "/v1/workers/report", json, NULL), 200);
  assert_int_equal(ts_tracker_num_workers(t), 3);
  assert_int_equal(renew(port, a) + renew(port, d), 2);
  snprintf(json, sizeof json, "{\"protocol\":1,\"worker_id\":\"%s\"}", ids[0]);
  assert_int_equal(post(port, "/v1/workers/heartbeat", json, NULL), 404);
  ts_tracker_stop(t);
}

static void test_eviction_and_expiry(void **state) {
  (void)state;
  ts_tracker_options o = ts_tracker_defaults();
  o.port = 0;
  o.heartbeat_timeout_ms = 400;
  o.lease_ttl_ms = 600;
  ts_tracker *t = NULL;
  ts_error err;
  ts_error_clear(&err);
  assert_int_equal(ts_tracker_start(&o, &t, &err), TS_OK);
  int port = ts_tracker_port(t);
  char ids[2][48];
  register_fake(port, "k", 3001, ids[0]);
  register_fake(port, "k", 3002, ids[1]);
  char a[48];
  assert_int_equal(acquire(port, "k", 2, 0, "job", a), 2);
  /* Heartbeats keep both; the lease is renewed. */
  for (int i = 0; i < 5; i++) {
    usleep(150000);
    heartbeat_all(port, ids, 2);
    assert_int_equal(renew(port, a), 2);
  }
  /* Only the first keeps beating: the second is evicted. */
  for (int i = 0; i < 6; i++) {
    usleep(150000);
    heartbeat_all(port, ids, 1);
  }
  assert_int_equal(ts_tracker_num_workers(t), 1);
  /* The unrenewed lease expired. */
  assert_int_equal(renew(port, a), -1);
  assert_non_null(strstr(reply, "unknown_lease"));
  /* Registering again under the same address replaces, not duplicates. */
  register_fake(port, "k", 3001, ids[0]);
  assert_int_equal(ts_tracker_num_workers(t), 1);
  ts_tracker_stop(t);
}

static void test_bad_requests(void **state) {
  (void)state;
  ts_tracker_options o = ts_tracker_defaults();
  o.port = 0;
  ts_tracker *t = NULL;
  ts_error err;
  ts_error_clear(&err);
  assert_int_equal(ts_tracker_start(&o, &t, &err), TS_OK);
  int port = ts_tracker_port(t);
  const char *bodies[] = {
      "{\"protocol\":2,\"key\":\"k\",\"port\":1}",
      "{\"key\":\"k\",\"port\":1}",
      "{\"protocol\":1,\"port\":1}",
      "{\"protocol\":1,\"key\":\"k\",\"port\":0}",
      "{\"protocol\":1,\"key\":\"k/..\",\"port\":5}",
      "{\"protocol\":1,\"key\":\"k\",\"port\":5,\"host\":\"a b\"}",
      "not json",
      "[1,2,3]",
      "",
  };
  for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
    int st = post(port, "/v1/workers/register", bodies[i], NULL);
    if (st != 400) fail_msg("body %zu: status %d: %s", i, st, reply);
  }
  assert_int_equal(
      post(port, "/v1/leases", "{\"protocol\":1,\"want\":2}", NULL), 400);
  assert_int_equal(post(port, "/v1/leases",
                        "{\"protocol\":1,\"key\":\"k\",\"want\":0}", NULL),
                   400);
  assert_int_equal(post(port, "/v1/leases/renew",
                        "{\"protocol\":1,\"lease_id\":\"l999\"}", NULL),
                   404);
  assert_int_equal(post(port, "/v1/nothing", "{}", NULL), 404);
  assert_int_equal(post(port, "/v1/status", "{}", NULL), 405);
  assert_int_equal(ts_tracker_num_workers(t), 0);
  ts_tracker_stop(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fair_shares_and_priority),
      cmocka_unit_test(test_eviction_and_expiry),
      cmocka_unit_test(test_bad_requests),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
