/*
 * test_cluster.c — a tracker and workers as separate processes on
 * loopback (this binary re-executed with --serve), driven by remote
 * runners that lease workers from the tracker:
 *  - two concurrent runners with 200 candidates each over three workers:
 *    every candidate gets exactly one result, and the workers measured
 *    exactly 400 candidates in all (nothing measured twice);
 *  - a worker killed with SIGKILL in the middle of a batch: every candidate
 *    is still measured (re-sent elsewhere), one result each;
 *  - a tracker restarted on the same port: the worker registers again and
 *    runners measure through it;
 *  - the status document names the runner holding each leased worker.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cJSON.h>

#include "rpc_test.h"

#define TOKEN "cluster-token"
#define KEY "cpu-cluster"

typedef struct cluster {
  server_proc tracker;
  server_proc workers[3];
  int n_workers;
  char tracker_addr[64];
  ts_artifact *add, *add_split, *hang;
} cluster;

static int start_worker(cluster *c, int i) {
  char port[16] = "0";
  char *args[] = {"worker", port, KEY, c->tracker_addr, TOKEN, NULL};
  return serve_start(&c->workers[i], args);
}

static int start_tracker(cluster *c, int port) {
  char p[16];
  snprintf(p, sizeof p, "%d", port);
  char *args[] = {"tracker", p, TOKEN, NULL};
  if (serve_start(&c->tracker, args)) return -1;
  snprintf(c->tracker_addr, sizeof c->tracker_addr, "127.0.0.1:%d",
           c->tracker.port);
  return 0;
}

/* The tracker's status, parsed (NULL when unreachable). */
static cJSON *status(cluster *c) {
  char *json = NULL;
  if (ts_rpc_get_json(c->tracker_addr, "/v1/status", TOKEN, 5000, &json, NULL))
    return NULL;
  cJSON *s = cJSON_Parse(json);
  free(json);
  return s;
}

/* Waits until the tracker lists n workers. */
static bool wait_workers(cluster *c, int n, double seconds) {
  double end = now_s() + seconds;
  while (now_s() < end) {
    cJSON *s = status(c);
    int have = s ? cJSON_GetArraySize(cJSON_GetObjectItem(s, "workers")) : -1;
    cJSON_Delete(s);
    if (have == n) return true;
    usleep(50000);
  }
  char *json = NULL;
  ts_rpc_get_json(c->tracker_addr, "/v1/status", TOKEN, 5000, &json, NULL);
  fprintf(stderr, "wait_workers: want %d: %s\n", n, json ? json : "(none)");
  free(json);
  for (int i = 0; i < c->n_workers; i++) {
    char a[64];
    snprintf(a, sizeof a, "127.0.0.1:%d", c->workers[i].port);
    json = NULL;
    ts_error e;
    ts_error_clear(&e);
    ts_rpc_get_json(a, "/v1/info", TOKEN, 2000, &json, &e);
    fprintf(stderr, "worker %d pid %d %s: %.300s\n", i, (int)c->workers[i].pid,
            a, json ? strstr(json, "\"registered\"") : e.msg);
    free(json);
  }
  return false;
}

/* Sum of the measurements the tracker heard of. */
static int64_t total_measurements(cluster *c) {
  cJSON *s = status(c);
  int64_t total = 0;
  cJSON *w;
  cJSON_ArrayForEach(w, cJSON_GetObjectItem(s, "workers")) {
    total += (int64_t)cJSON_GetObjectItem(w, "measurements")->valuedouble;
  }
  cJSON_Delete(s);
  return total;
}

static int setup(void **state) {
  cluster *c = calloc(1, sizeof *c);
  if (start_tracker(c, 0)) return -1;
  c->n_workers = 3;
  for (int i = 0; i < 3; i++)
    if (start_worker(c, i)) return -1;
  if (!wait_workers(c, 3, 20)) return -1;
  c->add = build_tir(TIR_ADD);
  c->add_split = build_tir(TIR_ADD_SPLIT);
  c->hang = build_tir(TIR_HANG);
  *state = c;
  return c->add && c->add_split && c->hang ? 0 : -1;
}

static int teardown(void **state) {
  cluster *c = *state;
  /* A clean exit: no sanitizer report in the servers either. */
  int bad = 0;
  for (int i = 0; i < c->n_workers; i++)
    bad += serve_kill(&c->workers[i], SIGTERM) != 0;
  bad += serve_kill(&c->tracker, SIGTERM) != 0;
  ts_artifact_release(c->add);
  ts_artifact_release(c->add_split);
  ts_artifact_release(c->hang);
  free(c);
  return bad ? -1 : 0;
}

static ts_runner *leasing_runner(cluster *c, const char *name) {
  ts_rpc_runner_options o = ts_rpc_runner_defaults();
  o.tracker = c->tracker_addr;
  o.key = KEY;
  o.token = TOKEN;
  o.name = name;
  o.chunk = 4;
  o.lease_wait_ms = 20000;
  ts_runner *r = NULL;
  ts_error err;
  ts_error_clear(&err);
  if (ts_runner_rpc_create(&o, &r, &err)) fprintf(stderr, "%s\n", err.msg);
  return r;
}

typedef struct job {
  cluster *c;
  const char *name;
  int n;
  ts_artifact **cands;
  ts_measure_result *res;
  int rc;
  double seconds;
} job;

static void *job_thread(void *arg) {
  job *j = arg;
  ts_runner *r = leasing_runner(j->c, j->name);
  ts_runner_set_reference(r, "add", j->c->add, NULL);
  ts_measure_config cfg = fast_config(5000);
  double t0 = now_s();
  j->rc = ts_runner_measure(r, &cfg, "add", j->cands, j->n, j->res, NULL);
  j->seconds = now_s() - t0;
  ts_runner_destroy(r);
  return NULL;
}

static void job_init(job *j, cluster *c, const char *name, int n) {
  j->c = c;
  j->name = name;
  j->n = n;
  j->cands = calloc((size_t)n, sizeof *j->cands);
  j->res = calloc((size_t)n, sizeof *j->res);
  for (int i = 0; i < n; i++) j->cands[i] = i % 2 ? c->add_split : c->add;
  j->rc = -1;
}

static void job_free(job *j) {
  free(j->cands);
  free(j->res);
}

static bool known_worker(cluster *c, const char *addr) {
  for (int i = 0; i < 3; i++) {
    char a[64];
    snprintf(a, sizeof a, "127.0.0.1:%d", c->workers[i].port);
    if (!strcmp(a, addr)) return true;
  }
  return false;
}

static void test_two_runners_three_workers(void **state) {
  cluster *c = *state;
  int64_t before = total_measurements(c);
  job a, b;
  job_init(&a, c, "job-a", 200);
  job_init(&b, c, "job-b", 200);
  pthread_t ta, tb;
  pthread_create(&ta, NULL, job_thread, &a);
  pthread_create(&tb, NULL, job_thread, &b);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  assert_int_equal(a.rc, TS_OK);
  assert_int_equal(b.rc, TS_OK);
  job *jobs[2] = {&a, &b};
  for (int k = 0; k < 2; k++) {
    int per_worker[3] = {0};
    for (int i = 0; i < jobs[k]->n; i++) {
      ts_measure_result *r = &jobs[k]->res[i];
      if (r->status != TS_MEASURE_OK)
        fail_msg("%s[%d]: %s: %s", jobs[k]->name, i,
                 ts_measure_status_name(r->status), r->error);
      assert_int_equal(r->attempts, 1);
      assert_true(known_worker(c, r->worker));
      for (int w = 0; w < 3; w++) {
        char addr[64];
        snprintf(addr, sizeof addr, "127.0.0.1:%d", c->workers[w].port);
        if (!strcmp(addr, r->worker)) per_worker[w]++;
      }
    }
    printf("%s: %.2f s, per worker %d %d %d\n", jobs[k]->name, jobs[k]->seconds,
           per_worker[0], per_worker[1], per_worker[2]);
  }
  /* Heartbeats carry the counts: exactly 400 more measurements. */
  double end = now_s() + 5;
  int64_t got = 0;
  while (now_s() < end && (got = total_measurements(c) - before) < 400)
    usleep(100000);
  usleep(500000);
  got = total_measurements(c) - before;
  assert_int_equal(got, 400);
  job_free(&a);
  job_free(&b);
}

typedef struct killer {
  cluster *c;
  int victim;
  bool done;
} killer;

/* Kills the victim once it has measured a few candidates. */
static void *kill_thread(void *arg) {
  killer *k = arg;
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", k->c->workers[k->victim].port);
  double end = now_s() + 30;
  while (now_s() < end) {
    char *json = NULL;
    if (ts_rpc_get_json(addr, "/v1/info", TOKEN, 2000, &json, NULL) == TS_OK) {
      cJSON *j = cJSON_Parse(json);
      double m = cJSON_GetObjectItem(j, "measurements")->valuedouble;
      cJSON_Delete(j);
      free(json);
      if (m >= 10) break;
    }
    usleep(5000);
  }
  kill(k->c->workers[k->victim].pid, SIGKILL);
  k->done = true;
  return NULL;
}

static void test_kill_worker_mid_batch(void **state) {
  cluster *c = *state;
  job a;
  job_init(&a, c, "job-kill", 300);
  killer k = {c, 1, false};
  pthread_t ta, tk;
  pthread_create(&tk, NULL, kill_thread, &k);
  pthread_create(&ta, NULL, job_thread, &a);
  pthread_join(ta, NULL);
  pthread_join(tk, NULL);
  assert_true(k.done);
  waitpid(c->workers[1].pid, NULL, 0);
  c->workers[1].pid = 0;
  assert_int_equal(a.rc, TS_OK);
  int retried = 0;
  for (int i = 0; i < a.n; i++) {
    if (a.res[i].status != TS_MEASURE_OK)
      fail_msg("candidate %d: %s: %s", i,
               ts_measure_status_name(a.res[i].status), a.res[i].error);
    assert_true(a.res[i].attempts >= 1 && a.res[i].attempts <= 3);
    if (a.res[i].attempts > 1) retried++;
  }
  printf("kill: %.2f s, %d candidates re-sent\n", a.seconds, retried);
  assert_true(retried >= 1);
  /* The runner reported the dead worker: the tracker dropped it. */
  assert_true(wait_workers(c, 2, 10));
  job_free(&a);
  /* A replacement joins the farm. */
  assert_int_equal(start_worker(c, 1), 0);
  assert_true(wait_workers(c, 3, 20));
}

static void test_tracker_restart(void **state) {
  cluster *c = *state;
  int port = c->tracker.port;
  serve_kill(&c->tracker, SIGKILL);
  assert_int_equal(start_tracker(c, port), 0);
  assert_int_equal(c->tracker.port, port);
  /* Heartbeats get "unknown worker" (or fail) and the workers register
   * again with the new tracker. */
  assert_true(wait_workers(c, 3, 20));
  job a;
  job_init(&a, c, "job-after-restart", 12);
  job_thread(&a);
  assert_int_equal(a.rc, TS_OK);
  for (int i = 0; i < a.n; i++)
    assert_int_equal(a.res[i].status, TS_MEASURE_OK);
  job_free(&a);
}

typedef struct hang_job {
  cluster *c;
  ts_measure_result res[3];
  int rc;
} hang_job;

static void *hang_thread(void *arg) {
  hang_job *h = arg;
  ts_runner *r = leasing_runner(h->c, "job-status");
  ts_measure_config cfg = fast_config(1500);
  ts_artifact *cands[3] = {h->c->hang, h->c->hang, h->c->hang};
  h->rc = ts_runner_measure(r, &cfg, NULL, cands, 3, h->res, NULL);
  ts_runner_destroy(r);
  return NULL;
}

static void test_status_names_lease_holder(void **state) {
  cluster *c = *state;
  hang_job h = {c, {{0}}, -1};
  pthread_t th;
  pthread_create(&th, NULL, hang_thread, &h);
  bool seen = false;
  double end = now_s() + 5;
  while (!seen && now_s() < end) {
    cJSON *s = status(c);
    cJSON *w;
    cJSON_ArrayForEach(w, cJSON_GetObjectItem(s, "workers")) {
      cJSON *by = cJSON_GetObjectItem(w, "leased_by");
      if (cJSON_IsString(by) && !strcmp(by->valuestring, "job-status")) {
        assert_string_equal(cJSON_GetObjectItem(w, "state")->valuestring,
                            "leased");
        assert_string_equal(cJSON_GetObjectItem(w, "key")->valuestring, KEY);
        seen = true;
      }
    }
    cJSON_Delete(s);
    usleep(50000);
  }
  pthread_join(th, NULL);
  assert_true(seen);
  assert_int_equal(h.rc, TS_OK);
  for (int i = 0; i < 3; i++)
    assert_int_equal(h.res[i].status, TS_MEASURE_TIMEOUT);
  /* Released at the end of the batch. */
  cJSON *s = status(c);
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(s, "leases")), 0);
  cJSON_Delete(s);
}

int main(int argc, char **argv) {
  if (argc > 2 && !strcmp(argv[1], "--serve")) return serve_main(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two_runners_three_workers),
      cmocka_unit_test(test_kill_worker_mid_batch),
      cmocka_unit_test(test_status_names_lease_holder),
      cmocka_unit_test(test_tracker_restart),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
