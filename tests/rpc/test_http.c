/*
 * test_http.c — slow and greedy clients against a worker over loopback:
 * connections that trickle header bytes are closed at the request
 * deadline however steadily they trickle, and meanwhile other clients are
 * served; a client address over its connection limit, and any client over
 * the total limit, gets 503 with Retry-After; a wrong token is refused as
 * soon as the headers are in, without waiting for the declared body; a
 * client that hangs up has its measurement cancelled, so the next request
 * does not wait for it. Every loop here is bounded in count and time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "rpc_test.h"

#define MAX_SLOW 16

/* A connection to 127.0.0.1:port from the loopback address `from`. */
static int connect_from(int port, const char *from) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  inet_pton(AF_INET, from, &a.sin_addr);
  if (bind(fd, (struct sockaddr *)&a, sizeof a)) {
    close(fd);
    return -1;
  }
  a.sin_port = htons((uint16_t)port);
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
    close(fd);
    return -1;
  }
  struct timeval tv = {5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

/* Sends a whole GET /v1/info on fd and returns the reply's status (0 for
 * none); the reply goes to out. */
static int get_info(int fd, const char *token, char *out, size_t max) {
  char req[512];
  snprintf(req, sizeof req,
           "GET /v1/info HTTP/1.1\r\nHost: x\r\n%s%s%sConnection: close\r\n"
           "\r\n",
           token ? "Authorization: Bearer " : "", token ? token : "",
           token ? "\r\n" : "");
  if (send(fd, req, strlen(req), MSG_NOSIGNAL) < 0) return 0;
  size_t got = 0;
  out[0] = 0;
  for (int i = 0; i < 64 && got + 1 < max; i++) {
    ssize_t r = recv(fd, out + got, max - 1 - got, 0);
    if (r <= 0) break;
    got += (size_t)r;
    out[got] = 0;
  }
  int status = 0;
  if (sscanf(out, "HTTP/1.%*d %d", &status) != 1) status = 0;
  return status;
}

static int info_from(int port, const char *from, const char *token) {
  static char reply[1 << 16];
  int fd = connect_from(port, from);
  if (fd < 0) return -1;
  int status = get_info(fd, token, reply, sizeof reply);
  close(fd);
  return status;
}

static ts_worker *start_worker(int max_conn, int per_client, int deadline_ms,
                               const char *token) {
  ts_worker_options o = ts_worker_defaults();
  o.port = 0;
  o.device.threads = 1;
  o.token = token;
  o.limits.max_connections = max_conn;
  o.limits.max_connections_per_client = per_client;
  o.limits.request_deadline_ms = deadline_ms;
  ts_worker *w = NULL;
  ts_error err;
  ts_error_clear(&err);
  if (ts_worker_start(&o, &w, &err)) fprintf(stderr, "%s\n", err.msg);
  return w;
}

/* Opens n connections from `from` that send the start of a request and
 * then one more header byte every 100 ms. */
static void slow_open(int *fds, int n, int port, const char *from) {
  for (int i = 0; i < n; i++) {
    fds[i] = connect_from(port, from);
    assert_true(fds[i] >= 0);
    const char *start = "GET /v1/info HTTP/1.1\r\nX-Slow: ";
    assert_true(send(fds[i], start, strlen(start), MSG_NOSIGNAL) > 0);
  }
}

/* Trickles a byte on every open slow connection every 100 ms until the
 * server has closed them all or `seconds` pass; returns the seconds it
 * took for the last one to be closed (or `seconds`). */
static double slow_until_closed(int *fds, int n, double seconds) {
  double t0 = now_s();
  int open = n;
  while (open > 0 && now_s() - t0 < seconds) {
    for (int i = 0; i < n; i++) {
      if (fds[i] < 0) continue;
      char c;
      ssize_t r = recv(fds[i], &c, 1, MSG_DONTWAIT);
      bool gone = r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
      if (!gone && send(fds[i], "a", 1, MSG_NOSIGNAL) < 0) gone = true;
      if (gone) {
        close(fds[i]);
        fds[i] = -1;
        open--;
      }
    }
    usleep(100000);
  }
  for (int i = 0; i < n; i++)
    if (fds[i] >= 0) close(fds[i]);
  return now_s() - t0;
}

static void test_slowloris_deadline(void **state) {
  (void)state;
  ts_worker *w = start_worker(8, 8, 1000, NULL);
  assert_non_null(w);
  int port = ts_worker_port(w);
  int fds[MAX_SLOW];
  /* Every slot but one held by trickling clients from another address. */
  slow_open(fds, 7, port, "127.0.0.2");
  double t0 = now_s();
  /* Others are served while they trickle. */
  assert_int_equal(info_from(port, "127.0.0.1", NULL), 200);
  double took = slow_until_closed(fds, 7, 6.0);
  /* Closed at the deadline (1 s from their first byte), not at some idle
   * timeout they keep resetting. */
  assert_true(took < 3.0);
  assert_true(now_s() - t0 >= 0.9);
  /* And the slots are free again. */
  assert_int_equal(info_from(port, "127.0.0.2", NULL), 200);
  ts_worker_stop(w);
}

static void test_per_client_limit(void **state) {
  (void)state;
  ts_worker *w = start_worker(16, 4, 2000, NULL);
  assert_non_null(w);
  int port = ts_worker_port(w);
  static char reply[1 << 16];
  int fds[MAX_SLOW];
  slow_open(fds, 4, port, "127.0.0.3");
  usleep(100000);
  /* A fifth connection from the same address: 503 and Retry-After. */
  int fd = connect_from(port, "127.0.0.3");
  assert_true(fd >= 0);
  assert_int_equal(get_info(fd, NULL, reply, sizeof reply), 503);
  assert_non_null(strstr(reply, "Retry-After: 1"));
  assert_non_null(strstr(reply, "over capacity"));
  close(fd);
  /* Another address is not affected. */
  assert_int_equal(info_from(port, "127.0.0.4", NULL), 200);
  slow_until_closed(fds, 4, 6.0);
  assert_int_equal(info_from(port, "127.0.0.3", NULL), 200);
  ts_worker_stop(w);
}

static void test_total_limit(void **state) {
  (void)state;
  ts_worker *w = start_worker(4, 100, 2000, NULL);
  assert_non_null(w);
  int port = ts_worker_port(w);
  static char reply[1 << 16];
  int fds[MAX_SLOW];
  slow_open(fds, 4, port, "127.0.0.5");
  usleep(100000);
  int fd = connect_from(port, "127.0.0.6");
  assert_true(fd >= 0);
  assert_int_equal(get_info(fd, NULL, reply, sizeof reply), 503);
  assert_non_null(strstr(reply, "Retry-After: 1"));
  close(fd);
  slow_until_closed(fds, 4, 6.0);
  assert_int_equal(info_from(port, "127.0.0.6", NULL), 200);
  ts_worker_stop(w);
}

/* A wrong token with a large declared body is refused at once. */
static void test_token_before_body(void **state) {
  (void)state;
  ts_worker *w = start_worker(8, 8, 5000, "right-token");
  assert_non_null(w);
  int port = ts_worker_port(w);
  int fd = connect_from(port, "127.0.0.1");
  assert_true(fd >= 0);
  const char *req = "POST /v1/measure HTTP/1.1\r\nHost: x\r\n"
                    "Authorization: Bearer wrong-token\r\n"
                    "Content-Type: application/x-tessera\r\n"
                    "Content-Length: 1000000\r\n\r\n";
  double t0 = now_s();
  assert_true(send(fd, req, strlen(req), MSG_NOSIGNAL) > 0);
  char reply[4096];
  ssize_t r = recv(fd, reply, sizeof reply - 1, 0);
  assert_true(r > 0);
  reply[r] = 0;
  assert_true(now_s() - t0 < 1.0);
  assert_non_null(strstr(reply, " 401 "));
  close(fd);
  assert_int_equal(info_from(port, "127.0.0.1", "right-token"), 200);
  ts_worker_stop(w);
}

/* A client that gives up on a hanging candidate cancels it: the next
 * request is measured at once, not after the candidate's 20 s limit. */
static void test_cancel_on_hangup(void **state) {
  (void)state;
  ts_worker *w = start_worker(8, 8, 5000, NULL);
  assert_non_null(w);
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", ts_worker_port(w));
  ts_artifact *hang = build_tir(TIR_HANG), *add = build_tir(TIR_ADD);
  assert_non_null(hang);
  assert_non_null(add);
  ts_rpc_runner_options o = ts_rpc_runner_defaults();
  const char *ws[1] = {addr};
  o.workers = ws;
  o.n_workers = 1;
  o.max_attempts = 1;
  o.request_timeout_ms = 700; /* gives up and closes its connection */
  ts_runner *r = NULL;
  ts_error err;
  ts_error_clear(&err);
  assert_int_equal(ts_runner_rpc_create(&o, &r, &err), TS_OK);
  ts_measure_config c = fast_config(20000);
  ts_measure_result res;
  ts_artifact *a = hang;
  assert_int_equal(ts_runner_measure(r, &c, NULL, &a, 1, &res, &err), TS_OK);
  assert_int_equal(res.status, TS_MEASURE_WORKER_LOST);
  ts_runner_destroy(r);
  o.request_timeout_ms = 0;
  assert_int_equal(ts_runner_rpc_create(&o, &r, &err), TS_OK);
  double t0 = now_s();
  a = add;
  c = fast_config(5000);
  assert_int_equal(ts_runner_measure(r, &c, NULL, &a, 1, &res, &err), TS_OK);
  assert_int_equal(res.status, TS_MEASURE_OK);
  assert_true(now_s() - t0 < 3.0);
  ts_runner_destroy(r);
  ts_worker_stop(w);
  ts_artifact_release(hang);
  ts_artifact_release(add);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_slowloris_deadline),
      cmocka_unit_test(test_per_client_limit),
      cmocka_unit_test(test_total_limit),
      cmocka_unit_test(test_token_before_body),
      cmocka_unit_test(test_cancel_on_hangup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
