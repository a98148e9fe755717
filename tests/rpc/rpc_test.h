/*
 * rpc_test.h — shared by the rpc tests: small kernels built from TIR text
 * for the host (a reference, a correct copy, a wrong one, one that
 * segfaults, one that never ends), a fast measure configuration, raw HTTP
 * over loopback sockets, and servers (worker, tracker) run as separate
 * processes by re-executing the test binary with `--serve ROLE ...`.
 */
#ifndef TESSERA_TESTS_RPC_TEST_H
#define TESSERA_TESTS_RPC_TEST_H

#include "codegen/codegen.h"
#include "rpc/rpc.h"
#include "runtime/runtime.h"
#include "tir/tir.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* B = A + 1: the reference. */
static const char TIR_ADD[] = "func add(A: float32[64], B: float32[64]) {\n"
                              "  for i in range(64) {\n"
                              "    B[i] = A[i] + float32(1)\n"
                              "  }\n"
                              "}\n";
/* The same computation, scheduled differently (two loops). */
static const char TIR_ADD_SPLIT[] =
    "func add2(A: float32[64], B: float32[64]) {\n"
    "  for io in range(8) {\n"
    "    for ii in range(8) {\n"
    "      B[io * 8 + ii] = A[io * 8 + ii] + float32(1)\n"
    "    }\n"
    "  }\n"
    "}\n";
/* B = A - 1: a wrong result. */
static const char TIR_SUB[] = "func sub(A: float32[64], B: float32[64]) {\n"
                              "  for i in range(64) {\n"
                              "    B[i] = A[i] - float32(1)\n"
                              "  }\n"
                              "}\n";
/* Stores far outside B: a segfault. */
static const char TIR_SEGV[] = "func segv(A: float32[64], B: float32[64]) {\n"
                               "  for i in range(64) {\n"
                               "    B[i * 100000000000] = A[i]\n"
                               "  }\n"
                               "}\n";
/* 10^12 iterations: runs forever as far as a test is concerned. */
static const char TIR_HANG[] = "func hang(A: float32[64], B: float32[64]) {\n"
                               "  for t in range(1000000000000) {\n"
                               "    for i in range(64) {\n"
                               "      B[i] = B[i] * A[i] + float32(1)\n"
                               "    }\n"
                               "  }\n"
                               "}\n";
/* A different signature (32 elements): mismatches the reference. */
static const char TIR_SHORT[] =
    "func short_add(A: float32[32], B: float32[32]) {\n"
    "  for i in range(32) {\n"
    "    B[i] = A[i] + float32(1)\n"
    "  }\n"
    "}\n";

/* Builds TIR text for the host; NULL (with a message) on failure. */
static inline ts_artifact *build_tir(const char *text) {
  ts_error err;
  ts_error_clear(&err);
  ts_func *f = NULL;
  ts_target *t = NULL;
  ts_artifact *a = NULL;
  if (ts_func_parse(text, strlen(text), "test", &f, &err) == TS_OK &&
      ts_target_host(&t, &err) == TS_OK) {
    ts_build_options o = ts_build_defaults();
    ts_build_result br = {0};
    if (ts_build(f, t, &o, &br, &err) == TS_OK)
      a = ts_artifact_retain(br.artifact);
    ts_build_result_clear(&br);
  }
  if (!a) fprintf(stderr, "build_tir: %s\n", err.msg);
  ts_func_free(f);
  ts_target_free(t);
  return a;
}

/* Hostile kernels in C (the ABI of generated code: args, runtime), built
 * with cc_object: write_fds writes to every inherited descriptor,
 * garbage_result writes a garbage result and exits, call_open/call_socket/
 * call_exec try what the sandbox forbids, grandchild forks a process that
 * would outlive the measurement. */
static const char HOSTILE_C[] =
    "#define _GNU_SOURCE\n"
    "#include <errno.h>\n"
    "#include <fcntl.h>\n"
    "#include <stdint.h>\n"
    "#include <string.h>\n"
    "#include <sys/prctl.h>\n"
    "#include <sys/socket.h>\n"
    "#include <sys/sysinfo.h>\n"
    "#include <time.h>\n"
    "#include <unistd.h>\n"
    "int32_t write_fds(void *const *args, void *rt) {\n"
    "  static char buf[4096];\n"
    "  memset(buf, 0x5a, sizeof buf);\n"
    "  for (int fd = 3; fd < 64; fd++) (void)!write(fd, buf, sizeof buf);\n"
    "  return 0;\n"
    "}\n"
    "int32_t garbage_result(void *const *args, void *rt) {\n"
    "  static char buf[RESULT_BYTES];\n"
    "  memset(buf, 0xff, sizeof buf);\n"
    "  (void)!write(3, buf, sizeof buf);\n"
    "  _exit(0);\n"
    "}\n"
    "int32_t call_open(void *const *args, void *rt) {\n"
    "  int fd = open(\"/etc/hostname\", O_RDONLY);\n"
    "  return fd >= 0 ? 0 : errno == EACCES ? 13 : 7;\n"
    "}\n"
    "int32_t libc_probe(void *const *args, void *rt) {\n"
    "  return get_nprocs() >= 1 ? 0 : 7;\n"
    "}\n"
    "int32_t call_socket(void *const *args, void *rt) {\n"
    "  int fd = socket(AF_INET, SOCK_STREAM, 0);\n"
    "  return fd >= 0 ? 0 : 7;\n"
    "}\n"
    "int32_t call_exec(void *const *args, void *rt) {\n"
    "  char *argv[] = {\"true\", 0};\n"
    "  execv(\"/bin/true\", argv);\n"
    "  return 7;\n"
    "}\n"
    "int32_t grandchild(void *const *args, void *rt) {\n"
    "  pid_t p = fork();\n"
    "  if (p == 0) {\n"
    "    prctl(PR_SET_NAME, \"ts-grandchild\");\n"
    "    for (;;) pause();\n"
    "  }\n"
    "  if (p < 0) return 7;\n"
    "  struct timespec ts = {0, 200000000};\n"
    "  nanosleep(&ts, 0);\n"
    "  return 0;\n"
    "}\n";

/* Compiles C source with the system's C compiler (`cc -c -fPIC`) into a
 * malloc'd relocatable object in *obj; false when there is no compiler or
 * it fails (hostile kernels TIR cannot express are built this way). */
static inline bool cc_object(const char *source, unsigned char **obj,
                             size_t *len) {
  *obj = NULL;
  *len = 0;
  if (system("command -v cc >/dev/null 2>&1") != 0) return false;
  char dir[] = "/tmp/ts-cc-XXXXXX";
  if (!mkdtemp(dir)) return false;
  char src[64], out[64], cmd[512];
  snprintf(src, sizeof src, "%s/k.c", dir);
  snprintf(out, sizeof out, "%s/k.o", dir);
  FILE *f = fopen(src, "w");
  bool ok = f != NULL;
  if (f) {
    fputs(source, f);
    fclose(f);
    snprintf(cmd, sizeof cmd,
             "cc -c -fPIC -O1 -fno-stack-protector "
             "-fno-asynchronous-unwind-tables -DRESULT_BYTES=%zu %s -o %s",
             sizeof(ts_measure_result), src, out);
    ok = system(cmd) == 0;
  }
  FILE *in = ok ? fopen(out, "rb") : NULL;
  if (in) {
    fseek(in, 0, SEEK_END);
    long n = ftell(in);
    fseek(in, 0, SEEK_SET);
    *obj = malloc(n > 0 ? (size_t)n : 1);
    *len = fread(*obj, 1, n > 0 ? (size_t)n : 0, in);
    fclose(in);
    ok = n > 0 && *len == (size_t)n;
  }
  unlink(src);
  unlink(out);
  rmdir(dir);
  return ok;
}

/* One repeat of one run, no warm-up, a short timeout, one thread. */
static inline ts_measure_config fast_config(int timeout_ms) {
  ts_measure_config c = ts_measure_config_default();
  c.eval.number = 1;
  c.eval.repeat = 1;
  c.eval.min_repeat_ms = 0;
  c.eval.warmup = 0;
  c.timeout_ms = timeout_ms;
  c.threads = 1;
  return c;
}

static inline double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- raw HTTP over loopback ---- */

static inline int tcp_connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
    close(fd);
    return -1;
  }
  struct timeval tv = {10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return fd;
}

/* Sends raw bytes (the connection's write side is shut when `shut`), reads
 * the reply until the server closes or `max` bytes, and returns the HTTP
 * status (0 when there is no status line). The reply text goes to out. */
static inline int raw_http(int port, const void *req, size_t len, bool shut,
                           char *out, size_t max) {
  int fd = tcp_connect(port);
  if (fd < 0) return -1;
  const char *p = req;
  size_t left = len;
  while (left) {
    ssize_t w = send(fd, p, left, MSG_NOSIGNAL);
    if (w <= 0) break; /* the server may answer early and close */
    p += w;
    left -= (size_t)w;
  }
  if (shut) shutdown(fd, SHUT_WR);
  size_t got = 0;
  out[0] = 0;
  for (;;) {
    ssize_t r = recv(fd, out + got, max - 1 - got, 0);
    if (r <= 0) break;
    got += (size_t)r;
    out[got] = 0;
    /* Stop after a complete reply with a Content-Length. */
    char *hdr_end = strstr(out, "\r\n\r\n");
    char *cl = strstr(out, "Content-Length:");
    if (hdr_end && cl && cl < hdr_end) {
      size_t n = strtoul(cl + 15, NULL, 10);
      if (got >= (size_t)(hdr_end + 4 - out) + n) break;
    }
    if (got + 1 >= max) break;
  }
  close(fd);
  int status = 0;
  if (sscanf(out, "HTTP/1.%*d %d", &status) != 1) status = 0;
  return status;
}

/* ---- servers in separate processes ---- */

typedef struct server_proc {
  pid_t pid;
  int port;
} server_proc;

/* Starts `<this test> --serve ROLE ARGS...` and waits for the port it
 * prints. Returns 0 on success. */
static inline int serve_start(server_proc *s, char *const args[]) {
  int p[2];
  if (pipe(p)) return -1;
  char *argv[32];
  int n = 0;
  argv[n++] = "rpc-test";
  argv[n++] = "--serve";
  for (int i = 0; args[i] && n < 30; i++) argv[n++] = args[i];
  argv[n] = NULL;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    dup2(p[1], 1);
    close(p[0]);
    close(p[1]);
    execv("/proc/self/exe", argv);
    _exit(127);
  }
  close(p[1]);
  char line[64];
  size_t got = 0;
  struct pollfd pf = {p[0], POLLIN, 0};
  while (got < sizeof line - 1 && poll(&pf, 1, 20000) > 0) {
    ssize_t r = read(p[0], line + got, 1);
    if (r <= 0) break;
    if (line[got] == '\n') break;
    got++;
  }
  line[got] = 0;
  close(p[0]);
  s->pid = pid;
  s->port = atoi(line);
  return s->port > 0 ? 0 : -1;
}

/* Signals a server and reaps it; returns its wait status (0: it exited
 * cleanly, leak checks included, after SIGTERM). */
static inline int serve_kill(server_proc *s, int sig) {
  if (s->pid <= 0) return 0;
  kill(s->pid, sig);
  int status = -1;
  waitpid(s->pid, &status, 0);
  s->pid = 0;
  return status;
}

/* The server side of serve_start: `--serve worker PORT KEY TRACKER|- TOKEN|-`
 * or `--serve tracker PORT TOKEN|-`. Prints the port, runs until SIGTERM. */
static inline int serve_main(int argc, char **argv) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  signal(SIGPIPE, SIG_IGN);
  ts_error err;
  ts_error_clear(&err);
  const char *role = argv[2];
  int port = argc > 3 ? atoi(argv[3]) : 0;
  ts_worker *w = NULL;
  ts_tracker *t = NULL;
  if (!strcmp(role, "worker") && argc >= 7) {
    ts_worker_options o = ts_worker_defaults();
    o.port = port;
    o.key = argv[4];
    o.tracker = strcmp(argv[5], "-") ? argv[5] : NULL;
    o.token = strcmp(argv[6], "-") ? argv[6] : NULL;
    o.heartbeat_ms = 200;
    o.device.threads = 1;
    if (ts_worker_start(&o, &w, &err)) {
      fprintf(stderr, "serve worker: %s\n", err.msg);
      return 1;
    }
    printf("%d\n", ts_worker_port(w));
  } else if (!strcmp(role, "tracker") && argc >= 5) {
    ts_tracker_options o = ts_tracker_defaults();
    o.port = port;
    o.token = strcmp(argv[4], "-") ? argv[4] : NULL;
    o.heartbeat_timeout_ms = 1500;
    o.lease_ttl_ms = 5000;
    if (ts_tracker_start(&o, &t, &err)) {
      fprintf(stderr, "serve tracker: %s\n", err.msg);
      return 1;
    }
    printf("%d\n", ts_tracker_port(t));
  } else {
    fprintf(stderr, "serve: bad arguments\n");
    return 2;
  }
  fflush(stdout);
  int sig = 0;
  sigwait(&set, &sig);
  ts_worker_stop(w);
  ts_tracker_stop(t);
  return 0;
}

#endif /* TESSERA_TESTS_RPC_TEST_H */
