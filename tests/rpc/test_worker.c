/*
 * test_worker.c — one worker over loopback HTTP, driven by the remote
 * runner with a fixed worker list: /v1/info describes the device; a
 * segfault, an endless loop and a wrong output become run_error, timeout
 * and wrong_result and the worker keeps serving; the bearer token is
 * required everywhere when set; a worker that restarts (losing its
 * references) gets the reference uploaded again; concurrent requests are
 * measured one at a time, and a candidate's timeout counts from its start,
 * not from when it was queued; a GPU worker without a CUDA driver says so
 * in /v1/info and answers measure requests with a clear error; a
 * non-loopback bind without a token is refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cJSON.h>
#include <dlfcn.h>

#include "rpc_test.h"

typedef struct fixture {
  ts_worker *worker;
  char addr[64];
  ts_artifact *add, *add_split, *sub, *segv, *hang;
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  ts_error err;
  ts_error_clear(&err);
  ts_worker_options o = ts_worker_defaults();
  o.port = 0;
  o.key = "cpu-test";
  o.device.threads = 1;
  if (ts_worker_start(&o, &f->worker, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    return -1;
  }
  snprintf(f->addr, sizeof f->addr, "127.0.0.1:%d", ts_worker_port(f->worker));
  f->add = build_tir(TIR_ADD);
  f->add_split = build_tir(TIR_ADD_SPLIT);
  f->sub = build_tir(TIR_SUB);
  f->segv = build_tir(TIR_SEGV);
  f->hang = build_tir(TIR_HANG);
  *state = f;
  return f->add && f->add_split && f->sub && f->segv && f->hang ? 0 : -1;
}

static int teardown(void **state) {
  fixture *f = *state;
  ts_worker_stop(f->worker);
  ts_artifact_release(f->add);
  ts_artifact_release(f->add_split);
  ts_artifact_release(f->sub);
  ts_artifact_release(f->segv);
  ts_artifact_release(f->hang);
  free(f);
  return 0;
}

static ts_runner *direct_runner(const char *addr, const char *token) {
  ts_rpc_runner_options o = ts_rpc_runner_defaults();
  const char *ws[1] = {addr};
  o.workers = ws;
  o.n_workers = 1;
  o.token = token;
  o.max_attempts = 2;
  ts_runner *r = NULL;
  ts_error err;
  ts_error_clear(&err);
  if (ts_runner_rpc_create(&o, &r, &err)) fprintf(stderr, "%s\n", err.msg);
  return r;
}

static void test_info(void **state) {
  fixture *f = *state;
  char *json = NULL;
  ts_error err;
  ts_error_clear(&err);
  assert_int_equal(
      ts_rpc_get_json(f->addr, "/v1/info", NULL, 5000, &json, &err), TS_OK);
  cJSON *j = cJSON_Parse(json);
  assert_non_null(j);
  assert_int_equal(cJSON_GetObjectItem(j, "protocol")->valueint, 1);
  assert_string_equal(cJSON_GetObjectItem(j, "key")->valuestring, "cpu-test");
  assert_string_equal(cJSON_GetObjectItem(j, "tessera_version")->valuestring,
                      TS_VERSION);
  assert_string_equal(cJSON_GetObjectItem(j, "device")->valuestring, "cpu");
  assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "available")));
  const char *target = cJSON_GetObjectItem(j, "target")->valuestring;
  assert_true(!strncmp(target, "llvm -mcpu=", 11));
  assert_non_null(strstr(target, "-num-cores="));
  cJSON *cpu = cJSON_GetObjectItem(j, "cpu");
  assert_true(strlen(cJSON_GetObjectItem(cpu, "model")->valuestring) > 0);
  assert_true(cJSON_GetObjectItem(cpu, "cores")->valueint >= 1);
  assert_true(cJSON_IsArray(cJSON_GetObjectItem(cpu, "features")));
  assert_true(cJSON_IsNull(cJSON_GetObjectItem(j, "gpu")));
  cJSON_Delete(j);
  free(json);
  /* Unknown endpoints and methods. */
  assert_int_equal(
      ts_rpc_get_json(f->addr, "/v1/nothing", NULL, 5000, &json, &err), TS_EIO);
  assert_non_null(strstr(err.msg, "404"));
  assert_int_equal(
      ts_rpc_get_json(f->addr, "/v1/measure", NULL, 5000, &json, &err), TS_EIO);
  assert_non_null(strstr(err.msg, "405"));
}

static void test_faults(void **state) {
  fixture *f = *state;
  ts_runner *r = direct_runner(f->addr, NULL);
  assert_non_null(r);
  ts_error err;
  ts_error_clear(&err);
  assert_int_equal(ts_runner_set_reference(r, "add", f->add, &err), TS_OK);
  ts_measure_config c = fast_config(1500);
  ts_artifact *cands[5] = {f->segv, f->hang, f->sub, f->add, f->add_split};
  ts_measure_result res[5];
  int64_t before = ts_worker_measurements(f->worker);
  assert_int_equal(ts_runner_measure(r, &c, "add", cands, 5, res, &err), TS_OK);
  assert_int_equal(res[0].status, TS_MEASURE_RUN_ERROR);
  assert_non_null(strstr(res[0].error, "signal 11"));
  assert_int_equal(res[1].status, TS_MEASURE_TIMEOUT);
  assert_true(res[1].run_ms >= 1500 && res[1].run_ms < 3000);
  assert_int_equal(res[2].status, TS_MEASURE_WRONG_RESULT);
  assert_int_equal(res[3].status, TS_MEASURE_OK);
  assert_int_equal(res[4].status, TS_MEASURE_OK);
  for (int i = 0; i < 5; i++) {
    assert_string_equal(res[i].worker, f->addr);
    assert_int_equal(res[i].attempts, 1);
  }
  assert_int_equal(ts_worker_measurements(f->worker) - before, 5);
  /* The worker serves the next request normally. */
  ts_artifact *next[3] = {f->add, f->add_split, f->add};
  assert_int_equal(ts_runner_measure(r, &c, "add", next, 3, res, &err), TS_OK);
  for (int i = 0; i < 3; i++) assert_int_equal(res[i].status, TS_MEASURE_OK);
  /* A seed beyond 2^53 travels as text and still matches the reference. */
  c.seed = ((uint64_t)1 << 60) + 3;
  c.eval.repeat = 5;
  assert_int_equal(ts_runner_measure(r, &c, "add", next, 2, res, &err), TS_OK);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(res[i].status, TS_MEASURE_OK);
    assert_int_equal(res[i].n_seconds, 5);
  }
  ts_runner_destroy(r);
}

static void test_token(void **state) {
  fixture *f = *state;
  ts_error err;
  ts_error_clear(&err);
  ts_worker_options o = ts_worker_defaults();
  o.port = 0;
  o.token = "s3cret-token";
  o.device.threads = 1;
  ts_worker *w = NULL;
  assert_int_equal(ts_worker_start(&o, &w, &err), TS_OK);
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", ts_worker_port(w));
  char *json = NULL;
  assert_int_not_equal(
      ts_rpc_get_json(addr, "/v1/info", NULL, 5000, &json, &err), TS_OK);
  assert_non_null(strstr(err.msg, "401"));
  assert_int_not_equal(
      ts_rpc_get_json(addr, "/v1/info", "s3cret-tokeX", 5000, &json, &err),
      TS_OK);
  assert_non_null(strstr(err.msg, "wrong bearer token"));
  assert_int_equal(
      ts_rpc_get_json(addr, "/v1/info", "s3cret-token", 5000, &json, &err),
      TS_OK);
  free(json);
  ts_measure_config c = fast_config(5000);
  ts_artifact *cands[2] = {f->add, f->add};
  ts_measure_result res[2];
  const char *tokens[3] = {NULL, "wrong", "s3cret-token"};
  for (int t = 0; t < 3; t++) {
    ts_runner *r = direct_runner(addr, tokens[t]);
    assert_int_equal(ts_runner_set_reference(r, "add", f->add, &err), TS_OK);
    assert_int_equal(ts_runner_measure(r, &c, "add", cands, 2, res, &err),
                     TS_OK);
    for (int i = 0; i < 2; i++) {
      if (t < 2) {
        assert_int_equal(res[i].status, TS_MEASURE_WORKER_LOST);
        assert_non_null(strstr(res[i].error, "401"));
      } else {
        assert_int_equal(res[i].status, TS_MEASURE_OK);
      }
    }
    ts_runner_destroy(r);
  }
  ts_worker_stop(w);
}

static void test_restart_reuploads_reference(void **state) {
  fixture *f = *state;
  ts_error err;
  ts_error_clear(&err);
  ts_worker_options o = ts_worker_defaults();
  o.port = 0;
  o.device.threads = 1;
  ts_worker *w = NULL;
  assert_int_equal(ts_worker_start(&o, &w, &err), TS_OK);
  int port = ts_worker_port(w);
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  ts_runner *r = direct_runner(addr, NULL);
  assert_int_equal(ts_runner_set_reference(r, "add", f->add, &err), TS_OK);
  ts_measure_config c = fast_config(5000);
  ts_artifact *cands[2] = {f->add, f->sub};
  ts_measure_result res[2];
  assert_int_equal(ts_runner_measure(r, &c, "add", cands, 2, res, &err), TS_OK);
  assert_int_equal(res[0].status, TS_MEASURE_OK);
  assert_int_equal(res[1].status, TS_MEASURE_WRONG_RESULT);
  /* A new worker on the same port knows no reference. */
  ts_worker_stop(w);
  o.port = port;
  assert_int_equal(ts_worker_start(&o, &w, &err), TS_OK);
  assert_int_equal(ts_runner_measure(r, &c, "add", cands, 2, res, &err), TS_OK);
  assert_int_equal(res[0].status, TS_MEASURE_OK);
  assert_int_equal(res[1].status, TS_MEASURE_WRONG_RESULT);
  ts_runner_destroy(r);
  ts_worker_stop(w);
}

typedef struct job {
  const char *addr;
  ts_artifact *cands[4];
  int n;
  int timeout_ms;
  ts_artifact *ref;
  ts_measure_result res[4];
  int rc;
} job;

static void *job_thread(void *arg) {
  job *j = arg;
  ts_runner *r = direct_runner(j->addr, NULL);
  ts_runner_set_reference(r, "add", j->ref, NULL);
  ts_measure_config c = fast_config(j->timeout_ms);
  c.eval.min_repeat_ms = 20;
  j->rc = ts_runner_measure(r, &c, "add", j->cands, j->n, j->res, NULL);
  ts_runner_destroy(r);
  return NULL;
}

static void test_serialized_and_queue_time(void **state) {
  fixture *f = *state;
  /* Job a hangs the device for 1.5 s; job b's candidates (1 s limit each)
   * queue behind it and must still be ok. */
  job a = {f->addr, {f->hang, f->add}, 2, 1500, f->add, {{0}}, -1};
  job b = {f->addr, {f->add, f->add_split, f->add, f->add_split},
           4,       1000,
           f->add,  {{0}},
           -1};
  pthread_t ta, tb;
  pthread_create(&ta, NULL, job_thread, &a);
  usleep(100000);
  pthread_create(&tb, NULL, job_thread, &b);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  assert_int_equal(a.rc, TS_OK);
  assert_int_equal(b.rc, TS_OK);
  assert_int_equal(a.res[0].status, TS_MEASURE_TIMEOUT);
  assert_int_equal(a.res[1].status, TS_MEASURE_OK);
  ts_measure_result all[6];
  int n = 0;
  for (int i = 0; i < 2; i++) all[n++] = a.res[i];
  for (int i = 0; i < 4; i++) {
    assert_int_equal(b.res[i].status, TS_MEASURE_OK);
    all[n++] = b.res[i];
  }
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      if (i != j)
        assert_true(all[i].finished_at <= all[j].started_at ||
                    all[j].finished_at <= all[i].started_at);
}

static void test_gpu_without_driver(void **state) {
  fixture *f = *state;
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h) {
    dlclose(h);
    skip(); /* a machine with a driver: nothing to check here */
  }
  ts_error err;
  ts_error_clear(&err);
  ts_worker_options o = ts_worker_defaults();
  o.port = 0;
  o.device.device = "cuda:0";
  ts_worker *w = NULL;
  assert_int_equal(ts_worker_start(&o, &w, &err), TS_OK);
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", ts_worker_port(w));
  cJSON *j = cJSON_Parse(ts_worker_info_json(w));
  assert_non_null(j);
  assert_true(cJSON_IsFalse(cJSON_GetObjectItem(j, "available")));
  const char *why = cJSON_GetObjectItem(j, "error")->valuestring;
#ifdef TS_HAVE_CUDA_H
  assert_non_null(strstr(why, "no CUDA driver (libcuda.so.1 not found)"));
#else
  assert_non_null(strstr(why, "built without CUDA headers"));
#endif
  assert_string_equal(cJSON_GetObjectItem(j, "device")->valuestring, "cuda:0");
  cJSON_Delete(j);
  /* A measure request is refused with the reason (503). */
  ts_runner *r = direct_runner(addr, NULL);
  ts_measure_config c = fast_config(5000);
  ts_artifact *ptx = ts_artifact_new(TS_ARTIFACT_PTX, "k", f->add->args,
                                     f->add->n_args, ".version 8.0\n", 13);
  ts_measure_result res[1];
  assert_int_equal(ts_runner_measure(r, &c, NULL, &ptx, 1, res, &err), TS_OK);
  assert_int_equal(res[0].status, TS_MEASURE_WORKER_LOST);
  assert_non_null(strstr(res[0].error, "503"));
  assert_non_null(strstr(res[0].error, "cuda:0 is unavailable"));
  ts_artifact_release(ptx);
  ts_runner_destroy(r);
  ts_worker_stop(w);
}

static void test_bind_rules(void **state) {
  (void)state;
  ts_error err;
  ts_error_clear(&err);
  ts_worker_options o = ts_worker_defaults();
  o.port = 0;
  o.bind = "0.0.0.0";
  ts_worker *w = NULL;
  assert_int_equal(ts_worker_start(&o, &w, &err), TS_EINVAL);
  assert_non_null(strstr(err.msg, "without a token"));
  assert_null(w);
  ts_tracker_options t = ts_tracker_defaults();
  t.port = 0;
  t.bind = "10.1.2.3";
  ts_tracker *tr = NULL;
  assert_int_equal(ts_tracker_start(&t, &tr, &err), TS_EINVAL);
  assert_non_null(strstr(err.msg, "without a token"));
  /* A port in use is an error naming it; nothing is left running. */
  o = ts_worker_defaults();
  o.port = 0;
  assert_int_equal(ts_worker_start(&o, &w, &err), TS_OK);
  ts_worker_options o2 = ts_worker_defaults();
  o2.port = ts_worker_port(w);
  ts_worker *w2 = NULL;
  assert_int_equal(ts_worker_start(&o2, &w2, &err), TS_EIO);
  assert_non_null(strstr(err.msg, "cannot listen on 127.0.0.1:"));
  assert_null(w2);
  ts_worker_stop(w);
  assert_true(ts_rpc_is_loopback("127.0.0.1"));
  assert_true(ts_rpc_is_loopback("127.3.2.1"));
  assert_true(ts_rpc_is_loopback("::1"));
  assert_true(ts_rpc_is_loopback("localhost"));
  assert_false(ts_rpc_is_loopback("0.0.0.0"));
  assert_false(ts_rpc_is_loopback("::"));
  assert_false(ts_rpc_is_loopback("192.168.1.1"));
  assert_false(ts_rpc_is_loopback("example.com"));
  char host[64];
  int port = 0;
  assert_int_equal(
      ts_rpc_parse_hostport("[::1]:80", host, sizeof host, &port, &err), TS_OK);
  assert_string_equal(host, "::1");
  assert_int_equal(port, 80);
  const char *bad[] = {"",    "host",     "host:",   "host:0",  "host:65536",
                       ":80", "ho/st:80", "host:8x", "[::1:80", "a b:1"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_int_equal(
        ts_rpc_parse_hostport(bad[i], host, sizeof host, &port, &err),
        TS_EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_info),
      cmocka_unit_test(test_faults),
      cmocka_unit_test(test_token),
      cmocka_unit_test(test_restart_reuploads_reference),
      cmocka_unit_test(test_serialized_and_queue_time),
      cmocka_unit_test(test_gpu_without_driver),
      cmocka_unit_test(test_bind_rules),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
