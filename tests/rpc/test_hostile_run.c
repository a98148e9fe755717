/*
 * test_hostile_run.c — a hostile run against a worker in its own process on
 * loopback, the figures of docs/rpc.md's security section: rounds of
 * mutated binary frames (bytes flipped, cut short, lengths lied about),
 * hostile candidates (writing to every descriptor, a garbage result, open,
 * socket, exec, fork, a segfault), clients that trickle bytes and leave,
 * clients that hang up mid-measurement, bursts over the per-address
 * connection limit, and correct measurements whose results are committed to
 * a tuning database. Every so often the worker must answer /v1/info within
 * 5 s (else a hang) and still be running (else a crash); at the end every
 * correct candidate must have its ok record (else records lost).
 *
 * TS_HOSTILE_REQUESTS sets the number of requests (default 300); the
 * figures are printed as one line:
 *   hostile run: N requests, A answered, crashes 0, hangs 0, records lost 0
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "db/db.h"
#include "rpc_test.h"

#define TOKEN "hostile-run-token"

typedef struct run {
  server_proc worker;
  char addr[64];
  ts_artifact *add, *segv, *hang;
  ts_artifact *hostile[6]; /* NULL without a C compiler */
  unsigned char *frame;    /* a valid measure body */
  size_t frame_len;
  uint64_t rng;
  long requests, answered, crashes, hangs, valid, recorded;
  ts_db *db;
  int64_t workload;
  char db_path[128];
} run;

static uint64_t next(run *r) {
  r->rng ^= r->rng << 13;
  r->rng ^= r->rng >> 7;
  r->rng ^= r->rng << 17;
  return r->rng;
}

/* A measure body for artifact a (JSON header + payload). */
static unsigned char *measure_body(const ts_artifact *a, size_t *len) {
  char head[4096];
  int n = snprintf(
      head, sizeof head,
      "{\"protocol\":1,\"config\":{\"number\":1,\"repeat\":1,"
      "\"min_repeat_ms\":0,\"warmup\":0,\"timeout_ms\":2000,\"threads\":1},"
      "\"candidates\":[{\"id\":0,\"artifact\":{\"kind\":\"cpu_object\","
      "\"entry\":\"%s\",\"args\":[{\"name\":\"A\",\"dtype\":\"float32\","
      "\"shape\":[64],\"output\":false},{\"name\":\"B\",\"dtype\":"
      "\"float32\",\"shape\":[64],\"output\":true}],\"bytes\":{\"offset\":0,"
      "\"length\":%zu}}}]}",
      a->entry, a->n_bytes);
  *len = 8 + (size_t)n + a->n_bytes;
  unsigned char *b = malloc(*len);
  memcpy(b, "TSB1", 4);
  b[4] = (unsigned char)(n >> 24);
  b[5] = (unsigned char)(n >> 16);
  b[6] = (unsigned char)(n >> 8);
  b[7] = (unsigned char)n;
  memcpy(b + 8, head, (size_t)n);
  memcpy(b + 8 + n, a->bytes, a->n_bytes);
  return b;
}

/* POSTs body to /v1/measure; returns the status (0: closed unanswered). */
static int post(run *r, const unsigned char *body, size_t len, bool token) {
  static char reply[1 << 16];
  size_t cap = len + 512;
  char *req = malloc(cap);
  int h = snprintf(req, cap,
                   "POST /v1/measure HTTP/1.1\r\nHost: 127.0.0.1\r\n%s"
                   "Content-Type: application/x-tessera\r\n"
                   "Content-Length: %zu\r\n\r\n",
                   token ? "Authorization: Bearer " TOKEN "\r\n" : "", len);
  memcpy(req + h, body, len);
  int st = raw_http(r->worker.port, req, (size_t)h + len, false, reply,
                    sizeof reply);
  free(req);
  return st;
}

/* A copy of the valid frame with a few bytes flipped, cut or a length
 * changed. */
static void mutated(run *r) {
  size_t len = r->frame_len;
  unsigned char *b = malloc(len + 16);
  memcpy(b, r->frame, len);
  switch (next(r) % 4) {
  case 0:
    for (int i = 0; i < 1 + (int)(next(r) % 8); i++)
      b[next(r) % len] ^= (unsigned char)(1 + next(r) % 255);
    break;
  case 1: len = next(r) % len; break;
  case 2: {
    uint32_t v = (uint32_t)next(r);
    memcpy(b + 4, &v, 4);
    break;
  }
  default: {
    /* a digit of the header's numbers changed */
    for (size_t i = 8; i < len; i++)
      if (b[i] >= '0' && b[i] <= '9' && next(r) % 8 == 0)
        b[i] = (unsigned char)('0' + next(r) % 10);
    break;
  }
  }
  int st = post(r, b, len, next(r) % 16 != 0);
  r->requests++;
  if (st > 0) r->answered++;
  free(b);
}

static ts_runner *runner_of(run *r, int request_timeout_ms) {
  ts_rpc_runner_options o = ts_rpc_runner_defaults();
  const char *ws[1] = {r->addr};
  o.workers = ws;
  o.n_workers = 1;
  o.token = TOKEN;
  o.max_attempts = 1;
  o.request_timeout_ms = request_timeout_ms;
  ts_runner *x = NULL;
  ts_error err;
  ts_error_clear(&err);
  if (ts_runner_rpc_create(&o, &x, &err)) fail_msg("%s", err.msg);
  return x;
}

static void hostile_candidate(run *r) {
  ts_artifact *a = r->hostile[next(r) % 6];
  if (!a) a = next(r) % 2 ? r->segv : r->hang;
  ts_runner *x = runner_of(r, 0);
  ts_measure_config c = fast_config(1000);
  ts_measure_result res;
  ts_error err;
  ts_error_clear(&err);
  assert_int_equal(ts_runner_measure(x, &c, NULL, &a, 1, &res, &err), TS_OK);
  r->requests++;
  if (res.status != TS_MEASURE_WORKER_LOST) r->answered++;
  /* a grandchild may be left to run only without the filter, and is
   * killed anyway; everything else is refused */
  if (res.status == TS_MEASURE_OK && a != r->hostile[5])
    fail_msg("hostile candidate %s measured ok", a->entry);
  ts_runner_destroy(x);
}

static void slow_client(run *r) {
  int fd = tcp_connect(r->worker.port);
  if (fd < 0) return;
  const char *p = "POST /v1/measure HTTP/1.1\r\nHost: x\r\nX-Slow: ";
  for (int i = 0; p[i] && i < 12; i++) {
    send(fd, p + i, 1, MSG_NOSIGNAL);
    usleep(2000);
  }
  close(fd);
  r->requests++;
}

/* Sends a hanging candidate and gives up after 300 ms. */
static void hang_up(run *r) {
  ts_runner *x = runner_of(r, 300);
  ts_measure_config c = fast_config(20000);
  ts_measure_result res;
  ts_error err;
  ts_error_clear(&err);
  ts_artifact *a = r->hang;
  assert_int_equal(ts_runner_measure(x, &c, NULL, &a, 1, &res, &err), TS_OK);
  r->requests++;
  ts_runner_destroy(x);
}

/* Ten connections at once from one address (the limit is 8). */
static void burst(run *r) {
  int fds[10];
  for (int i = 0; i < 10; i++) fds[i] = tcp_connect(r->worker.port);
  const char *req = "GET /v1/info HTTP/1.1\r\nHost: x\r\nAuthorization: "
                    "Bearer " TOKEN "\r\nConnection: close\r\n\r\n";
  for (int i = 0; i < 10; i++)
    if (fds[i] >= 0) send(fds[i], req, strlen(req), MSG_NOSIGNAL);
  for (int i = 0; i < 10; i++) {
    if (fds[i] < 0) continue;
    char buf[64] = "";
    ssize_t n = recv(fds[i], buf, sizeof buf - 1, 0);
    if (n > 0) {
      buf[n] = 0;
      r->answered++;
      if (!strstr(buf, " 200 ") && !strstr(buf, " 503 "))
        fail_msg("burst: %s", buf);
    }
    close(fds[i]);
    r->requests++;
  }
}

static void valid(run *r) {
  ts_runner *x = runner_of(r, 0);
  ts_error err;
  ts_error_clear(&err);
  assert_int_equal(ts_runner_set_reference(x, "add", r->add, &err), TS_OK);
  ts_measure_config c = fast_config(5000);
  ts_measure_result res;
  ts_artifact *a = r->add;
  assert_int_equal(ts_runner_measure(x, &c, "add", &a, 1, &res, &err), TS_OK);
  r->requests++;
  r->valid++;
  if (res.status != TS_MEASURE_OK)
    fprintf(stderr, "hostile run: a correct candidate got %s: %s\n",
            ts_measure_status_name(res.status), res.error);
  if (res.status == TS_MEASURE_OK) {
    r->answered++;
    char trace[64];
    snprintf(trace, sizeof trace, "{\"version\":1,\"n\":%ld}", r->valid);
    ts_db_measurement m = {.workload_id = r->workload,
                           .target = "llvm -mcpu=x86-64 -num-cores=1",
                           .trace_json = trace,
                           .run_secs = res.seconds,
                           .n_run_secs = res.n_seconds,
                           .worker = res.worker};
    assert_int_equal(ts_db_commit_record(r->db, &m, NULL), TS_OK);
  }
  ts_runner_destroy(x);
}

/* The worker still runs and answers /v1/info within 5 s. */
static void health(run *r) {
  int status = 0;
  if (waitpid(r->worker.pid, &status, WNOHANG) == r->worker.pid) {
    r->crashes++;
    fail_msg("the worker died (wait status %d)", status);
  }
  char *json = NULL;
  ts_error err;
  ts_error_clear(&err);
  if (ts_rpc_get_json(r->addr, "/v1/info", TOKEN, 5000, &json, &err)) {
    r->hangs++;
    fail_msg("the worker did not answer: %s", err.msg);
  }
  free(json);
}

/* The worker of a failed run is stopped by the teardown. */
static server_proc *running;

static int stop_worker(void **state) {
  (void)state;
  if (running) serve_kill(running, SIGKILL);
  return 0;
}

static void test_hostile_run(void **state) {
  (void)state;
  static run r;
  memset(&r, 0, sizeof r);
  running = &r.worker;
  r.rng = 0x9e3779b97f4a7c15ull;
  long n =
      getenv("TS_HOSTILE_REQUESTS") ? atol(getenv("TS_HOSTILE_REQUESTS")) : 300;
  char *args[] = {"worker", "0", "cpu-hostile", "-", TOKEN, NULL};
  assert_int_equal(serve_start(&r.worker, args), 0);
  snprintf(r.addr, sizeof r.addr, "127.0.0.1:%d", r.worker.port);
  r.add = build_tir(TIR_ADD);
  r.segv = build_tir(TIR_SEGV);
  r.hang = build_tir(TIR_HANG);
  assert_non_null(r.add);
  unsigned char *obj = NULL;
  size_t obj_len = 0;
  const char *entries[6] = {"write_fds",   "garbage_result", "call_open",
                            "call_socket", "call_exec",      "grandchild"};
  if (cc_object(HOSTILE_C, &obj, &obj_len))
    for (int i = 0; i < 6; i++)
      r.hostile[i] = ts_artifact_new(TS_ARTIFACT_CPU_OBJECT, entries[i],
                                     r.add->args, r.add->n_args, obj, obj_len);
  else
    fprintf(stderr, "hostile run: no C compiler; segfaulting and hanging "
                    "kernels stand in for the C ones\n");
  free(obj);
  r.frame = measure_body(r.add, &r.frame_len);
  snprintf(r.db_path, sizeof r.db_path, "/tmp/ts-hostile-run-%d.db",
           (int)getpid());
  ts_error err;
  ts_error_clear(&err);
  assert_int_equal(ts_db_open(r.db_path, NULL, &r.db, &err), TS_OK);
  ts_workload *w = NULL;
  assert_int_equal(
      ts_workload_from_spec("elementwise op=add shape=64", &w, &err), TS_OK);
  assert_int_equal(ts_db_commit_workload(r.db, w->func, "add", &r.workload),
                   TS_OK);
  ts_workload_free(w);

  double t0 = now_s();
  for (long k = 0; r.requests < n; k++) {
    switch (k % 16) {
    case 0:
    case 1:
    case 2:
    case 3:
    case 4:
    case 5:
    case 6:
    case 7: mutated(&r); break;
    case 8:
    case 9: hostile_candidate(&r); break;
    case 10: slow_client(&r); break;
    case 11:
      if (k % 64 == 11)
        hang_up(&r);
      else
        mutated(&r);
      break;
    case 12:
      if (k % 48 == 12)
        burst(&r);
      else
        mutated(&r);
      break;
    default: valid(&r); break;
    }
    if (k % 25 == 24) health(&r);
    if (k % 200 == 199)
      fprintf(stderr, "hostile run: %ld requests, %.0f s\n", r.requests,
              now_s() - t0);
  }
  health(&r);
  ts_db_stats s;
  assert_int_equal(ts_db_get_stats(r.db, &s), TS_OK);
  r.recorded = s.n_records;
  long lost = r.valid - r.recorded;
  printf("hostile run: %ld requests, %ld answered, crashes %ld, hangs %ld, "
         "records lost %ld (%ld correct candidates, %.0f s)\n",
         r.requests, r.answered, r.crashes, r.hangs, lost, r.valid,
         now_s() - t0);
  assert_int_equal(r.crashes, 0);
  assert_int_equal(r.hangs, 0);
  assert_int_equal(lost, 0);
  /* the worker stops cleanly */
  assert_int_equal(serve_kill(&r.worker, SIGTERM), 0);
  ts_db_close(r.db);
  unlink(r.db_path);
  char side[160];
  snprintf(side, sizeof side, "%s-wal", r.db_path);
  unlink(side);
  snprintf(side, sizeof side, "%s-shm", r.db_path);
  unlink(side);
  for (int i = 0; i < 6; i++) ts_artifact_release(r.hostile[i]);
  ts_artifact_release(r.add);
  ts_artifact_release(r.segv);
  ts_artifact_release(r.hang);
  free(r.frame);
}

int main(int argc, char **argv) {
  if (argc > 2 && !strcmp(argv[1], "--serve")) return serve_main(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hostile_run),
  };
  return cmocka_run_group_tests(tests, NULL, stop_worker);
}
