/*
 * test_sandbox.c — hostile candidates against the measuring child's
 * sandbox, built at run time from C source with the system's C compiler
 * (cc -c -fPIC) because TIR cannot express them: a kernel that writes to
 * every inherited descriptor, one that writes a garbage result to the
 * result pipe, ones that call open, socket and exec, one that forks a
 * grandchild that would outlive it. Each is a run_error (never a crash of
 * the pool or the worker, never a result taken from garbage), nothing it
 * started is left running, and the next correct candidate still measures
 * ok. Also: the runtime's thread pool works under the filter, and a worker
 * over loopback survives the descriptor-writing candidate of issue 27.
 * Skipped, with the reason, when there is no C compiler.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>

#include "rpc_test.h"

typedef struct fixture {
  bool have_cc;
  ts_artifact *add;
  unsigned char *obj; /* the hostile object */
  size_t obj_len;
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  f->add = build_tir(TIR_ADD);
  f->have_cc = cc_object(HOSTILE_C, &f->obj, &f->obj_len);
  *state = f;
  return f->add ? 0 : -1;
}

static int teardown(void **state) {
  fixture *f = *state;
  ts_artifact_release(f->add);
  free(f->obj);
  free(f);
  return 0;
}

/* The hostile kernel `entry` with the reference's arguments. */
static ts_artifact *hostile(fixture *f, const char *entry) {
  return ts_artifact_new(TS_ARTIFACT_CPU_OBJECT, entry, f->add->args,
                         f->add->n_args, f->obj, f->obj_len);
}

static ts_runner *pool(bool seccomp) {
  ts_device_options d = ts_device_defaults();
  d.threads = 1;
  d.seccomp = seccomp;
  ts_runner *r = NULL;
  ts_error err;
  ts_error_clear(&err);
  if (ts_runner_embedded_create(&d, &r, &err)) fprintf(stderr, "%s\n", err.msg);
  return r;
}

/* Measures one candidate (no reference) and returns its result. */
static ts_measure_result measure1(ts_runner *r, ts_artifact *a) {
  ts_measure_config c = fast_config(5000);
  ts_measure_result res;
  ts_error err;
  ts_error_clear(&err);
  assert_int_equal(ts_runner_measure(r, &c, NULL, &a, 1, &res, &err), TS_OK);
  return res;
}

/* Processes named ts-grandchild (the grandchild kernel's). */
static int grandchildren(void) {
  DIR *d = opendir("/proc");
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d))) {
    char path[300], name[64] = "";
    snprintf(path, sizeof path, "/proc/%s/comm", e->d_name);
    FILE *in = fopen(path, "r");
    if (!in) continue;
    if (fgets(name, sizeof name, in) && !strncmp(name, "ts-grandchild", 13))
      n++;
    fclose(in);
  }
  if (d) closedir(d);
  return n;
}

/* The pool still measures a correct kernel after a hostile one. */
static void still_serves(ts_runner *r, fixture *f) {
  ts_measure_result res = measure1(r, f->add);
  assert_int_equal(res.status, TS_MEASURE_OK);
}

#define NEED_CC(f)                                                             \
  do {                                                                         \
    if (!(f)->have_cc) {                                                       \
      fprintf(stderr, "skipped: no C compiler (cc) to build the hostile "      \
                      "kernels\n");                                            \
      skip();                                                                  \
    }                                                                          \
  } while (0)

static void test_fd_writer(void **state) {
  fixture *f = *state;
  NEED_CC(f);
  ts_artifact *a = hostile(f, "write_fds");
  /* Under the filter: killed at the first descriptor that is not its own
   * (its bytes on the result pipe are never taken for a result). */
  ts_runner *r = pool(true);
  ts_measure_result res = measure1(r, a);
  assert_int_equal(res.status, TS_MEASURE_RUN_ERROR);
  assert_non_null(strstr(res.error, "forbidden system call"));
  still_serves(r, f);
  ts_runner_destroy(r);
  /* Without it: every other descriptor is closed, and what it wrote on the
   * result pipe is refused as malformed. */
  r = pool(false);
  res = measure1(r, a);
  assert_int_equal(res.status, TS_MEASURE_RUN_ERROR);
  assert_non_null(strstr(res.error, "malformed result"));
  assert_int_equal(res.n_seconds, 0);
  still_serves(r, f);
  ts_runner_destroy(r);
  ts_artifact_release(a);
}

static void test_garbage_result(void **state) {
  fixture *f = *state;
  NEED_CC(f);
  ts_artifact *a = hostile(f, "garbage_result");
  for (int filtered = 0; filtered < 2; filtered++) {
    ts_runner *r = pool(filtered);
    ts_measure_result res = measure1(r, a);
    assert_int_equal(res.status, TS_MEASURE_RUN_ERROR);
    assert_non_null(strstr(res.error, "malformed result"));
    assert_int_equal(res.n_seconds, 0);
    assert_non_null(memchr(res.error, 0, sizeof res.error));
    still_serves(r, f);
    ts_runner_destroy(r);
  }
  ts_artifact_release(a);
}

static void test_open_socket_exec(void **state) {
  fixture *f = *state;
  NEED_CC(f);
  ts_runner *r = pool(true);
  const char *entries[] = {"call_open", "call_socket", "call_exec"};
  /* The error names the call, as the helper resolves its number; an open
   * fails with EACCES (the kernel then returns 13), and the child goes on
   * to report it. */
  const char *errors[] = {"it returned 13", "(socket)", "(execve)"};
  for (int i = 0; i < 3; i++) {
    ts_artifact *a = hostile(f, entries[i]);
    ts_measure_result res = measure1(r, a);
    assert_int_equal(res.status, TS_MEASURE_RUN_ERROR);
    if (!strstr(res.error, errors[i]) ||
        (i > 0 && !strstr(res.error, "forbidden system call")))
      fail_msg("%s: %s", entries[i], res.error);
    ts_artifact_release(a);
    still_serves(r, f);
  }
  ts_runner_destroy(r);
}

/* The C library's own probes of files (the CPU count reads the online
 * list; malloc reads the overcommit setting when a thread's heap shrinks)
 * get EACCES and fall back, instead of stopping the candidate. */
static void test_libc_probe(void **state) {
  fixture *f = *state;
  NEED_CC(f);
  ts_runner *r = pool(true);
  ts_artifact *a = hostile(f, "libc_probe");
  ts_measure_result res = measure1(r, a);
  if (res.status != TS_MEASURE_OK) fail_msg("%s", res.error);
  ts_artifact_release(a);
  ts_runner_destroy(r);
}

static void test_grandchild(void **state) {
  fixture *f = *state;
  NEED_CC(f);
  ts_artifact *a = hostile(f, "grandchild");
  int before = grandchildren();
  /* Under the filter a fork is refused outright. */
  ts_runner *r = pool(true);
  ts_measure_result res = measure1(r, a);
  assert_int_equal(res.status, TS_MEASURE_RUN_ERROR);
  assert_non_null(strstr(res.error, "forbidden system call"));
  assert_int_equal(grandchildren(), before);
  ts_runner_destroy(r);
  /* Without it the fork succeeds, and the grandchild dies with its
   * measurement's process group, before the result is returned. */
  r = pool(false);
  res = measure1(r, a);
  assert_int_equal(res.status, TS_MEASURE_OK);
  assert_int_equal(grandchildren(), before);
  still_serves(r, f);
  ts_runner_destroy(r);
  ts_artifact_release(a);
}

/* The runtime's thread pool (clone, futex) runs under the filter. */
static void test_threads_under_filter(void **state) {
  fixture *f = *state;
  ts_device_options d = ts_device_defaults();
  d.threads = 2;
  ts_runner *r = NULL;
  ts_error err;
  ts_error_clear(&err);
  assert_int_equal(ts_runner_embedded_create(&d, &r, &err), TS_OK);
  assert_int_equal(ts_runner_set_reference(r, "add", f->add, &err), TS_OK);
  ts_measure_config c = fast_config(5000);
  c.threads = 2;
  c.eval.repeat = 3;
  c.eval.flush_cache = true;
  ts_measure_result res;
  ts_artifact *a = f->add;
  assert_int_equal(ts_runner_measure(r, &c, "add", &a, 1, &res, &err), TS_OK);
  if (res.status != TS_MEASURE_OK) fail_msg("%s", res.error);
  assert_int_equal(res.n_seconds, 3);
  ts_runner_destroy(r);
}

/* No thread count anywhere (device 0, request 0): the measuring child
 * runs on every online core, a count read before the filter is installed
 * (asking the system from inside the sandbox is a forbidden open). */
static void test_default_threads_under_filter(void **state) {
  fixture *f = *state;
  ts_device_options d = ts_device_defaults();
  d.threads = 0;
  d.seccomp = true;
  ts_runner *r = NULL;
  ts_error err;
  ts_error_clear(&err);
  assert_int_equal(ts_runner_embedded_create(&d, &r, &err), TS_OK);
  ts_measure_config c = fast_config(5000);
  c.threads = 0;
  c.eval.flush_cache = true;
  ts_measure_result res;
  ts_artifact *a = f->add;
  assert_int_equal(ts_runner_measure(r, &c, NULL, &a, 1, &res, &err), TS_OK);
  if (res.status != TS_MEASURE_OK) fail_msg("%s", res.error);
  ts_runner_destroy(r);
}

/* Issue 27's attack: the descriptor writer sent to a worker over loopback;
 * the worker answers run_error and keeps measuring. */
static void test_worker_survives(void **state) {
  fixture *f = *state;
  NEED_CC(f);
  ts_worker_options o = ts_worker_defaults();
  o.port = 0;
  o.device.threads = 1;
  ts_worker *w = NULL;
  ts_error err;
  ts_error_clear(&err);
  assert_int_equal(ts_worker_start(&o, &w, &err), TS_OK);
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", ts_worker_port(w));
  ts_rpc_runner_options ro = ts_rpc_runner_defaults();
  const char *ws[1] = {addr};
  ro.workers = ws;
  ro.n_workers = 1;
  ts_runner *r = NULL;
  assert_int_equal(ts_runner_rpc_create(&ro, &r, &err), TS_OK);
  ts_artifact *a = hostile(f, "write_fds");
  ts_artifact *g = hostile(f, "garbage_result");
  ts_artifact *cands[3] = {a, g, f->add};
  ts_measure_result res[3];
  ts_measure_config c = fast_config(5000);
  assert_int_equal(ts_runner_measure(r, &c, NULL, cands, 3, res, &err), TS_OK);
  assert_int_equal(res[0].status, TS_MEASURE_RUN_ERROR);
  assert_int_equal(res[1].status, TS_MEASURE_RUN_ERROR);
  assert_non_null(strstr(res[1].error, "malformed result"));
  assert_int_equal(res[2].status, TS_MEASURE_OK);
  for (int i = 0; i < 3; i++) assert_int_equal(res[i].attempts, 1);
  assert_int_equal(ts_worker_measurements(w), 3);
  ts_runner_destroy(r);
  ts_worker_stop(w);
  ts_artifact_release(a);
  ts_artifact_release(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fd_writer),
      cmocka_unit_test(test_garbage_result),
      cmocka_unit_test(test_open_socket_exec),
      cmocka_unit_test(test_libc_probe),
      cmocka_unit_test(test_grandchild),
      cmocka_unit_test(test_threads_under_filter),
      cmocka_unit_test(test_default_threads_under_filter),
      cmocka_unit_test(test_worker_survives),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
