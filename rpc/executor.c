/*
 * executor.c — measures candidates on one device, isolated in processes.
 *
 * Each executor forks a helper process when it is created. The helper is
 * single-threaded and does nothing but receive framed requests over a
 * socket pair, fork one child per measurement, and answer one result per
 * request. A child restores default signal dispositions, enters the
 * sandbox (sandbox.c: its own process group, only the result pipe left
 * open, limits on address space, CPU time, file size and processes, and a
 * seccomp filter for CPU kernels), loads the artifact with ORC LLJIT (or
 * the CUDA driver),
 * creates its own runtime thread pool, checks the output against the cached
 * reference outputs, times the kernel and writes its result to a pipe. The
 * helper enforces the wall-clock timeout from the moment the child is
 * forked, kills its whole process group on expiry, on a cancel from the
 * caller and after every measurement, accepts a report only when it is one
 * well-formed result (anything else is `run_error: malformed result`), and
 * turns a signal or a silent exit into a run_error. Reference outputs are
 * computed once per (reference, seed), in a child too, and kept in the helper,
 * where every later child inherits them through fork.
 *
 * Why a helper: forking the caller directly would copy a process that has
 * other threads (HTTP server threads, LLVM builder threads) whose locks may
 * be held at the instant of fork; a child that then takes such a lock (in
 * malloc under a sanitizer, in LLVM's global registries) would hang. The
 * helper is forked once, before those threads exist when the caller creates
 * the executor early, and forks from a single-threaded process are safe.
 * Its address space is also small, which keeps each fork cheap. If the
 * helper dies it is started again (from the then multi-threaded caller).
 *
 * In the caller, a FIFO ticket lock serializes measurements, so they never
 * overlap on the device and run in arrival order.
 */
#define _GNU_SOURCE /* pipe2, POLLRDHUP, qsort_r */
#include "rpc/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Reference outputs kept per reference (one per seed). */
#define SEEDS_PER_REF 4
/* The largest message between caller and helper. */
#define MAX_MSG ((uint64_t)1 << 31)

enum {
  MSG_MEASURE = 1,   /* caller -> helper: measure_head + artifact */
  MSG_PUT_REF = 2,   /* caller -> helper: ref_head + artifact */
  MSG_CUDA_INFO = 3, /* caller -> helper: nothing */
  MSG_CANCEL = 4,    /* caller -> helper: end the measurement in progress */
  MSG_RESULT = 10,   /* helper -> caller: ts_measure_result */
  MSG_NEED_REF = 11, /* helper -> caller: nothing (send MSG_PUT_REF first) */
  MSG_INFO = 12,     /* helper -> caller: info_reply */
};

typedef struct msg_head {
  uint32_t type;
  uint32_t reserved;
  uint64_t len;
} msg_head;

/* The fixed part of a serialized artifact; args and bytes follow. */
typedef struct art_head {
  int32_t kind, n_args;
  uint64_t n_bytes;
  char entry[128];
  uint32_t grid[3], block[3], shared_bytes;
} art_head;

typedef struct measure_head {
  ts_measure_config cfg;
  char ref_id[REF_ID_MAX + 1]; /* "" for none */
  uint64_t ref_version;
} measure_head;

typedef struct ref_head {
  char id[REF_ID_MAX + 1];
  uint64_t version;
} ref_head;

typedef struct info_reply {
  int32_t rc;
  char error[TS_MEASURE_ERROR_MAX];
  ts_cuda_device_info info;
} info_reply;

/* What the helper needs to know (copied at fork). */
typedef struct helper_config {
  device_spec dev;
  int threads;
  int online_cpus; /* read when the executor is made: a sandboxed child
                      cannot open /sys to ask */
  int64_t memory_limit;
  int max_refs;
  bool filter; /* seccomp filter in CPU measuring children */
} helper_config;

/* A reference as the caller keeps it. */
typedef struct ref_entry {
  char id[REF_ID_MAX + 1];
  ts_artifact *artifact;
  uint64_t version, last_used;
} ref_entry;

struct executor {
  helper_config hc;
  /* measurements: FIFO tickets */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  uint64_t next_ticket, serving;
  bool shutting_down;
  pid_t helper; /* 0 when not running; written under mu by the ticket
                   holder */
  int sock;     /* the ticket holder's */
  /* references */
  pthread_mutex_t ref_mu;
  ref_entry *refs;
  int n_refs;
  uint64_t clock, versions;
  int64_t measurements; /* atomic */
};

/* ======================================================================
 * I/O helpers (both sides)
 * ====================================================================== */

static int write_full(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n) {
    ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
    if (w < 0 && errno == ENOTSOCK) w = write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    c += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Reads exactly n bytes before the deadline (< 0: none). */
static int read_full(int fd, void *p, size_t n, double deadline) {
  char *c = p;
  while (n) {
    if (deadline >= 0) {
      double left = deadline - mono_seconds();
      if (left <= 0) return -2;
      struct pollfd pf = {fd, POLLIN, 0};
      int pr = poll(&pf, 1, (int)ceil(left * 1000));
      if (pr < 0 && errno == EINTR) continue;
      if (pr == 0) return -2;
    }
    ssize_t r = read(fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    c += r;
    n -= (size_t)r;
  }
  return 0;
}

static int send_msg(int fd, uint32_t type, const void *a, size_t na,
                    const void *b, size_t nb) {
  msg_head h = {type, 0, (uint64_t)na + nb};
  if (write_full(fd, &h, sizeof h)) return -1;
  if (na && write_full(fd, a, na)) return -1;
  if (nb && write_full(fd, b, nb)) return -1;
  return 0;
}

/* Serializes an artifact into a malloc'd buffer. */
static unsigned char *art_pack(const ts_artifact *a, size_t *len) {
  size_t na = sizeof(ts_artifact_arg) * (size_t)a->n_args;
  *len = sizeof(art_head) + na + a->n_bytes;
  unsigned char *buf = malloc(*len);
  if (!buf) return NULL;
  art_head h;
  memset(&h, 0, sizeof h);
  h.kind = a->kind;
  h.n_args = a->n_args;
  h.n_bytes = a->n_bytes;
  snprintf(h.entry, sizeof h.entry, "%s", a->entry);
  for (int i = 0; i < 3; i++) {
    h.grid[i] = a->grid[i];
    h.block[i] = a->block[i];
  }
  h.shared_bytes = a->shared_bytes;
  memcpy(buf, &h, sizeof h);
  if (na) memcpy(buf + sizeof h, a->args, na);
  if (a->n_bytes) memcpy(buf + sizeof h + na, a->bytes, a->n_bytes);
  return buf;
}

/* The inverse of art_pack (NULL for a malformed buffer). */
static ts_artifact *art_unpack(const unsigned char *p, size_t len) {
  art_head h;
  if (len < sizeof h) return NULL;
  memcpy(&h, p, sizeof h);
  if (h.n_args < 0 || h.n_args > 4096) return NULL;
  size_t na = sizeof(ts_artifact_arg) * (size_t)h.n_args;
  if (len - sizeof h < na || len - sizeof h - na != h.n_bytes) return NULL;
  h.entry[sizeof h.entry - 1] = 0;
  ts_artifact_arg *args = NULL;
  if (na) {
    args = malloc(na);
    if (!args) return NULL;
    memcpy(args, p + sizeof h, na);
  }
  ts_artifact *a = ts_artifact_new((ts_artifact_kind)h.kind, h.entry, args,
                                   h.n_args, p + sizeof h + na, h.n_bytes);
  free(args);
  if (!a) return NULL;
  for (int i = 0; i < 3; i++) {
    a->grid[i] = h.grid[i];
    a->block[i] = h.block[i];
  }
  a->shared_bytes = h.shared_bytes;
  return a;
}

ts_device_options ts_device_defaults(void) {
  ts_device_options d;
  d.device = "cpu";
  d.threads = 0;
  d.memory_limit_bytes = (int64_t)8 << 30;
  d.seccomp = true;
  return d;
}

int device_parse(const char *s, device_spec *d, ts_error *err) {
  memset(d, 0, sizeof *d);
  if (!s || !strcmp(s, "cpu")) return TS_OK;
  if (!strncmp(s, "cuda:", 5)) {
    const char *p = s + 5;
    char *end = NULL;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (*p >= '0' && *p <= '9' && !*end && !errno && v >= 0 && v < 1024) {
      d->cuda = true;
      d->index = (int)v;
      return TS_OK;
    }
  }
  return TS_ERR(err, TS_EINVAL, "bad device '%s' (expected cpu or cuda:N)", s);
}

/* ======================================================================
 * Measurement children (run in processes forked by the helper)
 * ====================================================================== */

/* Writes a child's result to its pipe (write, not send: the filter
 * allows no socket call). */
static void report(int fd, const ts_measure_result *r) {
  const char *c = (const char *)r;
  size_t n = sizeof *r;
  while (n) {
    ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    c += w;
    n -= (size_t)w;
  }
}

/* Enters the sandbox (sandbox.c) after setting the child's signal
 * dispositions: the result then goes to the returned descriptor. A child
 * that cannot be confined reports a run_error and exits. */
static int child_setup(const helper_config *hc, pid_t helper, int cpu_seconds,
                       int threads, bool filter, int wfd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != helper) _exit(3); /* the helper died before prctl */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = SIG_DFL;
  sigemptyset(&sa.sa_mask);
  int fatal[] = {SIGSEGV, SIGBUS,  SIGFPE, SIGILL,  SIGABRT,
                 SIGXCPU, SIGXFSZ, SIGSYS, SIGTRAP, SIGTERM};
  for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++)
    sigaction(fatal[i], &sa, NULL);
  sigset_t all;
  sigfillset(&all);
  sigdelset(&all, SIGINT);
  sigprocmask(SIG_UNBLOCK, &all, NULL);
  sandbox_limits l = {hc->memory_limit, cpu_seconds, threads,
                      filter && hc->filter};
  char why[256];
  int fd = sandbox_enter(wfd, &l, why, sizeof why);
  if (fd < 0) {
    ts_measure_result r;
    result_set(&r, TS_MEASURE_RUN_ERROR, "sandbox: %s", why);
    /* wfd is closed once the pipe has moved to its place */
    report(fcntl(wfd, F_GETFD) >= 0 ? wfd : SANDBOX_RESULT_FD, &r);
    _exit(0);
  }
  return fd;
}

ts_rt_arg_spec *ts_artifact_arg_specs(const ts_artifact *a) {
  ts_rt_arg_spec *s = calloc((size_t)(a->n_args ? a->n_args : 1), sizeof *s);
  if (!s) return NULL;
  for (int i = 0; i < a->n_args; i++) {
    s[i].dtype = a->args[i].dtype;
    s[i].ndim = a->args[i].ndim;
    memcpy(s[i].shape, a->args[i].shape, sizeof s[i].shape);
    s[i].role = a->args[i].is_output ? TS_RT_ARG_OUTPUT : TS_RT_ARG_INPUT;
  }
  return s;
}

static int child_threads(const helper_config *hc, const ts_measure_config *c) {
  if (c->threads > 0) return c->threads;
  if (hc->threads > 0) return hc->threads;
  return hc->online_cpus > 0 ? hc->online_cpus : 1;
}

static void set_from_error(ts_measure_result *r, ts_measure_status st,
                           const char *what, const ts_error *e) {
  result_set(r, st, "%s: %s", what, e->msg[0] ? e->msg : ts_strerror(e->code));
}

/* Times a CPU candidate (after checking it against `want`, when given). */
static void run_cpu(const helper_config *hc, const ts_measure_config *cfg,
                    const ts_artifact *a, const ts_rt_args *want,
                    ts_measure_result *r) {
  ts_error err;
  ts_error_clear(&err);
  ts_rt_kernel *k = NULL;
  if (ts_rt_kernel_load(a->bytes, a->n_bytes, a->entry, &k, &err)) {
    set_from_error(r, TS_MEASURE_BUILD_ERROR, "cannot load the object", &err);
    return;
  }
  ts_runtime *rt = NULL;
  if (ts_runtime_create(child_threads(hc, cfg), &rt, &err)) {
    set_from_error(r, TS_MEASURE_RUN_ERROR, "cannot start the runtime", &err);
    return;
  }
  ts_rt_arg_spec *specs = ts_artifact_arg_specs(a);
  ts_rt_args *got = NULL;
  if (!specs || ts_rt_args_create(specs, a->n_args, cfg->seed, &got, &err)) {
    set_from_error(r, TS_MEASURE_RUN_ERROR, "cannot allocate the arguments",
                   &err);
    return;
  }
  if (ts_rt_kernel_prepare(k, ts_rt_args_data(got), rt, &err)) {
    set_from_error(r, TS_MEASURE_RUN_ERROR, "prologue failed", &err);
    return;
  }
  if (want) {
    if (ts_rt_kernel_call(k, ts_rt_args_data(got), rt, &err)) {
      set_from_error(r, TS_MEASURE_RUN_ERROR, "kernel failed", &err);
      return;
    }
    if (ts_rt_args_compare(got, want, &err)) {
      set_from_error(r, TS_MEASURE_WRONG_RESULT,
                     "output differs from the "
                     "reference",
                     &err);
      return;
    }
  }
  double secs[TS_MEASURE_MAX_REPEAT];
  int number = 0;
  if (ts_rt_eval_kernel(rt, &cfg->eval, k, ts_rt_args_data(got), secs, &number,
                        &err)) {
    set_from_error(r, TS_MEASURE_RUN_ERROR, "timing failed", &err);
    return;
  }
  memset(r, 0, sizeof *r);
  r->status = TS_MEASURE_OK;
  r->n_seconds = cfg->eval.repeat;
  memcpy(r->seconds, secs, sizeof(double) * (size_t)cfg->eval.repeat);
  r->number = number;
}

/* Times a PTX candidate on the CUDA device. */
static void run_cuda(const helper_config *hc, const ts_measure_config *cfg,
                     const ts_artifact *a, const ts_rt_args *want,
                     ts_measure_result *r) {
  ts_error err;
  ts_error_clear(&err);
  ts_cuda *c = NULL;
  ts_cuda_module *m = NULL;
  ts_cuda_function *f = NULL;
  char what[64];
  snprintf(what, sizeof what, "device cuda:%d", hc->dev.index);
  if (ts_cuda_open(hc->dev.index, &c, &err)) {
    set_from_error(r, TS_MEASURE_RUN_ERROR, what, &err);
    return;
  }
  if (ts_cuda_module_load(c, (const char *)a->bytes, &m, &err) ||
      ts_cuda_module_function(m, a->entry, &f, &err)) {
    set_from_error(r, TS_MEASURE_BUILD_ERROR, "cannot load the PTX", &err);
    return;
  }
  ts_rt_arg_spec *specs = ts_artifact_arg_specs(a);
  ts_rt_args *got = NULL;
  if (!specs || ts_rt_args_create(specs, a->n_args, cfg->seed, &got, &err)) {
    set_from_error(r, TS_MEASURE_RUN_ERROR, "cannot allocate the arguments",
                   &err);
    return;
  }
  int n = a->n_args;
  uint64_t *dptr = calloc((size_t)(n ? n : 1), sizeof *dptr);
  void **params = calloc((size_t)(n ? n : 1), sizeof *params);
  if (!dptr || !params) {
    result_set(r, TS_MEASURE_RUN_ERROR, "out of memory");
    return;
  }
  for (int i = 0; i < n; i++) {
    size_t bytes = ts_rt_args_bytes(got, i);
    if (ts_cuda_alloc(c, bytes ? bytes : 1, &dptr[i], &err) ||
        ts_cuda_copy_to_device(c, dptr[i], ts_rt_args_data(got)[i], bytes,
                               &err)) {
      set_from_error(r, TS_MEASURE_RUN_ERROR, "cannot set up device memory",
                     &err);
      return;
    }
    params[i] = &dptr[i];
  }
  ts_cuda_dims dims;
  for (int i = 0; i < 3; i++) {
    dims.grid[i] = a->grid[i];
    dims.block[i] = a->block[i];
  }
  dims.shared_bytes = a->shared_bytes;
  if (want) {
    if (ts_cuda_launch(c, f, &dims, params, &err) ||
        ts_cuda_synchronize(c, &err)) {
      set_from_error(r, TS_MEASURE_RUN_ERROR, "kernel failed", &err);
      return;
    }
    for (int i = 0; i < n; i++)
      if (a->args[i].is_output &&
          ts_cuda_copy_to_host(c, ts_rt_args_data(got)[i], dptr[i],
                               ts_rt_args_bytes(got, i), &err)) {
        set_from_error(r, TS_MEASURE_RUN_ERROR, "cannot read the output", &err);
        return;
      }
    if (ts_rt_args_compare(got, want, &err)) {
      set_from_error(r, TS_MEASURE_WRONG_RESULT,
                     "output differs from the "
                     "reference",
                     &err);
      return;
    }
  }
  double secs[TS_MEASURE_MAX_REPEAT];
  int number = 0;
  if (ts_cuda_eval(c, &cfg->eval, f, &dims, params, secs, &number, &err)) {
    set_from_error(r, TS_MEASURE_RUN_ERROR, "timing failed", &err);
    return;
  }
  memset(r, 0, sizeof *r);
  r->status = TS_MEASURE_OK;
  r->n_seconds = cfg->eval.repeat;
  memcpy(r->seconds, secs, sizeof(double) * (size_t)cfg->eval.repeat);
  r->number = number;
}

/* How an artifact of each kind runs: the runtime's loader behind a run
 * function (ts_rt_kernel_load for CPU objects, runtime/cuda.c for PTX), the
 * device it needs, and whether its measuring children take the seccomp
 * filter (the CUDA driver opens device files and starts threads of its
 * own: a PTX child is confined by everything but the filter). A target
 * family whose artifacts need another loader adds a row. */
typedef struct artifact_runner {
  ts_artifact_kind kind;
  const char *name; /* as the protocol names it */
  bool on_gpu;      /* runs on a cuda:N device, else on the cpu device */
  bool filter;
  void (*run)(const helper_config *hc, const ts_measure_config *cfg,
              const ts_artifact *a, const ts_rt_args *want,
              ts_measure_result *r);
} artifact_runner;

static const artifact_runner runners[] = {
    {TS_ARTIFACT_CPU_OBJECT, "cpu_object", false, true, run_cpu},
    {TS_ARTIFACT_PTX, "ptx", true, false, run_cuda},
};

static const artifact_runner *runner_of(ts_artifact_kind k) {
  for (size_t i = 0; i < sizeof runners / sizeof runners[0]; i++)
    if (runners[i].kind == k) return &runners[i];
  return NULL;
}

/* ======================================================================
 * The helper process
 * ====================================================================== */

typedef struct seed_outputs {
  uint64_t seed;
  ts_rt_args *want; /* NULL when the reference failed */
  char error[TS_MEASURE_ERROR_MAX];
  uint64_t last_used;
} seed_outputs;

typedef struct helper_ref {
  char id[REF_ID_MAX + 1];
  uint64_t version, last_used;
  ts_artifact *artifact;
  seed_outputs seeds[SEEDS_PER_REF];
  int n_seeds;
} helper_ref;

typedef struct helper {
  helper_config hc;
  int sock;
  pid_t self;
  helper_ref *refs;
  int n_refs;
  uint64_t clock;
} helper;

/* How a child ended. */
typedef struct child_end {
  bool timed_out, hangup, cancelled, exited;
  int wstatus;
  size_t got;   /* report bytes kept */
  size_t total; /* bytes the child wrote in all */
} child_end;

/* Whether the caller asked to cancel the measurement in progress
 * (MSG_CANCEL); anything else on the socket is a broken caller. */
static bool caller_cancels(helper *h, child_end *e) {
  msg_head mh;
  if (read_full(h->sock, &mh, sizeof mh, mono_seconds() + 1) == 0 &&
      mh.type == MSG_CANCEL && mh.len == 0) {
    e->cancelled = true;
    return true;
  }
  e->hangup = true;
  return true;
}

/* Waits for child pid until `deadline`, reading its report (at most cap
 * bytes, the rest counted) from rfd; kills its whole process group on
 * expiry, when the caller cancels or hangs up, and in any case once the
 * child has ended (its grandchildren do not outlive it). */
static void wait_child(helper *h, pid_t pid, int rfd, double deadline,
                       void *rep, size_t cap, child_end *e) {
  memset(e, 0, sizeof *e);
  int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
  bool pipe_open = true;
  char scratch[512];
  while (pipe_open || !e->exited) {
    double left = deadline - mono_seconds();
    if (left <= 0) {
      e->timed_out = true;
      break;
    }
    struct pollfd fds[3];
    int n = 0, ip = -1, id = -1;
    if (pipe_open) {
      ip = n;
      fds[n++] = (struct pollfd){rfd, POLLIN, 0};
    }
    if (pfd >= 0 && !e->exited) {
      id = n;
      fds[n++] = (struct pollfd){pfd, POLLIN, 0};
    }
    int is = n;
    fds[n++] = (struct pollfd){h->sock, POLLIN | POLLRDHUP, 0};
    int ms = (int)ceil(left * 1000);
    if (pfd < 0 && !e->exited && ms > 5) ms = 5;
    if (e->exited) ms = 0; /* drain what is left in the pipe */
    int pr = poll(fds, (nfds_t)n, ms);
    if (pr < 0 && errno != EINTR) break;
    if (pr > 0 && (fds[is].revents & POLLIN) && caller_cancels(h, e)) break;
    if (fds[is].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
      e->hangup = true;
      break;
    }
    if (ip >= 0 && fds[ip].revents) {
      ssize_t r = e->got < cap ? read(rfd, (char *)rep + e->got, cap - e->got)
                               : read(rfd, scratch, sizeof scratch);
      if (r > 0) {
        if (e->got < cap) e->got += (size_t)r;
        e->total += (size_t)r;
      }
      if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN))
        pipe_open = false;
    } else if (e->exited && pr == 0) {
      pipe_open = false; /* exited and nothing more to read */
    }
    if (!e->exited && (pfd < 0 || (id >= 0 && fds[id].revents))) {
      /* Not reaped yet: the group id stays the child's until the group is
       * killed below. */
      siginfo_t si;
      memset(&si, 0, sizeof si);
      if (!waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) &&
          si.si_pid == pid)
        e->exited = true;
    }
  }
  kill(-pid, SIGKILL);
  kill(pid, SIGKILL);
  while (waitpid(pid, &e->wstatus, 0) < 0 && errno == EINTR) {
  }
  e->exited = true;
  sandbox_kill_group(pid);
  if (pfd >= 0) close(pfd);
}

/* Turns how a child ended into a result when it reported none (or was
 * killed). limit_ms names the time limit in messages. */
static void classify(const child_end *e, int limit_ms, ts_measure_result *r) {
  if (e->cancelled) {
    result_set(r, TS_MEASURE_RUN_ERROR,
               "measurement cancelled: the client went away");
  } else if (e->hangup) {
    result_set(r, TS_MEASURE_RUN_ERROR,
               "measurement cancelled: the worker is "
               "shutting down");
  } else if (e->timed_out) {
    result_set(r, TS_MEASURE_TIMEOUT,
               "exceeded the time limit of %d ms "
               "(killed)",
               limit_ms);
  } else if (WIFSIGNALED(e->wstatus)) {
    int sig = WTERMSIG(e->wstatus);
    if (sig == SIGXCPU)
      result_set(r, TS_MEASURE_TIMEOUT,
                 "exceeded the CPU time limit (signal "
                 "%d, %s)",
                 sig, strsignal(sig));
    else if (sig == SIGKILL)
      result_set(r, TS_MEASURE_RUN_ERROR,
                 "killed by signal 9 (out of memory, "
                 "or killed from outside)");
    else if (sig == SIGSYS)
      result_set(r, TS_MEASURE_RUN_ERROR,
                 "stopped by the sandbox: a forbidden system call "
                 "(signal %d, %s)",
                 sig, strsignal(sig));
    else if (sig == SIGXFSZ)
      result_set(r, TS_MEASURE_RUN_ERROR,
                 "stopped by the sandbox: wrote to a file (signal %d, %s)", sig,
                 strsignal(sig));
    else
      result_set(r, TS_MEASURE_RUN_ERROR, "crashed: signal %d (%s)", sig,
                 strsignal(sig));
  } else if (WIFEXITED(e->wstatus)) {
    result_set(r, TS_MEASURE_RUN_ERROR,
               "exited with status %d without a "
               "result",
               WEXITSTATUS(e->wstatus));
  } else {
    result_set(r, TS_MEASURE_RUN_ERROR, "ended without a result");
  }
}

/* The CPUs the calling process may run on (sched_getaffinity) as ranges,
 * "0-3" or "0,2-3", into out; "" when they cannot be read or do not fit. */
static void cpuset_text(char *out, size_t cap) {
  out[0] = 0;
  /* a fixed cpu_set_t holds 1024 CPUs; a larger machine needs more */
  for (int n = 1024; n <= (1 << 16); n *= 2) {
    cpu_set_t *set = CPU_ALLOC(n);
    size_t size = CPU_ALLOC_SIZE(n);
    if (!set) return;
    if (sched_getaffinity(0, size, set) != 0) {
      CPU_FREE(set);
      if (errno == EINVAL) continue;
      return;
    }
    size_t o = 0;
    for (int c = 0; c < n; c++) {
      if (!CPU_ISSET_S(c, size, set)) continue;
      int last = c;
      while (last + 1 < n && CPU_ISSET_S(last + 1, size, set)) last++;
      int k = last == c ? snprintf(out + o, cap - o, "%s%d", o ? "," : "", c)
                        : snprintf(out + o, cap - o, "%s%d-%d", o ? "," : "", c,
                                   last);
      if (k < 0 || (size_t)k >= cap - o) {
        out[0] = 0;
        break;
      }
      o += (size_t)k;
      c = last;
    }
    CPU_FREE(set);
    return;
  }
}

/* Forks a child running `body`; fills *res from its report or its end. */
typedef void (*child_fn)(helper *h, void *ctx, int wfd);

static void run_child(helper *h, child_fn body, void *ctx, int limit_ms,
                      int repeat, ts_measure_result *res) {
  int p[2];
  if (pipe2(p, O_CLOEXEC)) {
    result_set(res, TS_MEASURE_RUN_ERROR, "cannot create a pipe: %s",
               strerror(errno));
    return;
  }
  /* the child inherits the helper's CPU affinity and keeps it */
  char cpus[TS_MEASURE_CPUS_MAX];
  cpuset_text(cpus, sizeof cpus);
  double start = mono_seconds();
  pid_t pid = fork();
  if (pid < 0) {
    close(p[0]);
    close(p[1]);
    result_set(res, TS_MEASURE_RUN_ERROR, "cannot fork: %s", strerror(errno));
    return;
  }
  if (pid == 0) {
    close(p[0]);
    close(h->sock);
    body(h, ctx, p[1]);
    _exit(0);
  }
  setpgid(pid, pid); /* also done by the child: no window without it */
  close(p[1]);
  ts_measure_result rep;
  memset(&rep, 0, sizeof rep);
  child_end e;
  wait_child(h, pid, p[0], start + limit_ms / 1000.0, &rep, sizeof rep, &e);
  close(p[0]);
  double end = mono_seconds();
  bool clean = WIFEXITED(e.wstatus) && WEXITSTATUS(e.wstatus) == 0;
  char why[128];
  if (!e.timed_out && !e.hangup && !e.cancelled && WIFEXITED(e.wstatus) &&
      WEXITSTATUS(e.wstatus) == SANDBOX_TRAP_EXIT)
    sandbox_trapped(&rep, e.total, res);
  else if (e.timed_out || e.hangup || e.cancelled || !clean || e.total == 0)
    classify(&e, limit_ms, res);
  else if (e.total != sizeof rep)
    result_set(res, TS_MEASURE_RUN_ERROR,
               "malformed result: %zu bytes from the measuring process, "
               "want %zu",
               e.total, sizeof rep);
  else if (!sandbox_result_check(&rep, repeat, why, sizeof why))
    result_set(res, TS_MEASURE_RUN_ERROR, "malformed result: %s", why);
  else
    *res = rep;
  res->started_at = start;
  res->finished_at = end;
  res->run_ms = (end - start) * 1000;
  memcpy(res->cpus, cpus, sizeof res->cpus);
}

typedef struct ref_ctx {
  const helper_ref *ref;
  const ts_measure_config *cfg;
  unsigned char *shm; /* shared with the helper: the outputs */
} ref_ctx;

static void ref_child(helper *h, void *vctx, int wfd) {
  ref_ctx *c = vctx;
  ts_measure_result r;
  memset(&r, 0, sizeof r);
  ts_measure_config one = *c->cfg;
  one.threads = 1;
  wfd = child_setup(&h->hc, h->self,
                    (ts_measure_reference_limit_ms(c->cfg) + 999) / 1000 + 1,
                    child_threads(&h->hc, &one), true, wfd);
  const ts_artifact *a = c->ref->artifact;
  ts_error err;
  ts_error_clear(&err);
  ts_rt_kernel *k = NULL;
  ts_runtime *rt = NULL;
  ts_rt_arg_spec *specs = ts_artifact_arg_specs(a);
  ts_rt_args *args = NULL;
  if (ts_rt_kernel_load(a->bytes, a->n_bytes, a->entry, &k, &err))
    set_from_error(&r, TS_MEASURE_BUILD_ERROR, "cannot load the object", &err);
  else if (ts_runtime_create(child_threads(&h->hc, &one), &rt, &err))
    set_from_error(&r, TS_MEASURE_RUN_ERROR, "cannot start the runtime", &err);
  else if (!specs ||
           ts_rt_args_create(specs, a->n_args, c->cfg->seed, &args, &err))
    set_from_error(&r, TS_MEASURE_RUN_ERROR, "cannot allocate the arguments",
                   &err);
  else if (ts_rt_kernel_call(k, ts_rt_args_data(args), rt, &err))
    set_from_error(&r, TS_MEASURE_RUN_ERROR, "kernel failed", &err);
  else {
    size_t at = 0;
    for (int i = 0; i < a->n_args; i++)
      if (a->args[i].is_output) {
        size_t b = ts_rt_args_bytes(args, i);
        memcpy(c->shm + at, ts_rt_args_data(args)[i], b);
        at += b;
      }
  }
  report(wfd, &r);
  _exit(0);
}

/* The reference outputs for (ref, seed), computed on first use. NULL with
 * *why set when the reference itself failed. */
static const ts_rt_args *ref_outputs(helper *h, helper_ref *ref,
                                     const ts_measure_config *cfg,
                                     const char **why) {
  for (int i = 0; i < ref->n_seeds; i++)
    if (ref->seeds[i].seed == cfg->seed) {
      ref->seeds[i].last_used = ++h->clock;
      *why = ref->seeds[i].error;
      return ref->seeds[i].want;
    }
  int slot = ref->n_seeds < SEEDS_PER_REF ? ref->n_seeds++ : 0;
  for (int i = 0; i < ref->n_seeds && ref->n_seeds == SEEDS_PER_REF; i++)
    if (ref->seeds[i].last_used < ref->seeds[slot].last_used) slot = i;
  seed_outputs *so = &ref->seeds[slot];
  ts_rt_args_free(so->want);
  memset(so, 0, sizeof *so);
  so->seed = cfg->seed;
  so->last_used = ++h->clock;
  *why = so->error;

  const ts_artifact *a = ref->artifact;
  ts_error err;
  ts_error_clear(&err);
  ts_rt_arg_spec *specs = ts_artifact_arg_specs(a);
  ts_rt_args *want = NULL;
  if (!specs || ts_rt_args_create(specs, a->n_args, cfg->seed, &want, &err)) {
    free(specs);
    snprintf(so->error, sizeof so->error,
             "cannot allocate the reference's "
             "arguments: %.900s",
             err.msg);
    return NULL;
  }
  free(specs);
  size_t total = 0;
  for (int i = 0; i < a->n_args; i++)
    if (a->args[i].is_output) total += ts_rt_args_bytes(want, i);
  unsigned char *shm = NULL;
  if (total) {
    shm = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
               -1, 0);
    if (shm == MAP_FAILED) {
      ts_rt_args_free(want);
      snprintf(so->error, sizeof so->error,
               "cannot map %zu bytes for the "
               "reference outputs",
               total);
      return NULL;
    }
  }
  ref_ctx ctx = {ref, cfg, shm};
  ts_measure_result r;
  run_child(h, ref_child, &ctx, ts_measure_reference_limit_ms(cfg), 0, &r);
  if (r.status != TS_MEASURE_OK) {
    char id[REF_ID_MAX + 1];
    snprintf(id, sizeof id, "%s", ref->id);
    snprintf(so->error, sizeof so->error, "reference '%s' failed (%s): %.900s",
             id, ts_measure_status_name(r.status), r.error);
    ts_rt_args_free(want);
    want = NULL;
  } else {
    size_t at = 0;
    for (int i = 0; i < a->n_args; i++)
      if (a->args[i].is_output) {
        size_t b = ts_rt_args_bytes(want, i);
        memcpy(ts_rt_args_data(want)[i], shm + at, b);
        at += b;
      }
  }
  if (shm) munmap(shm, total);
  so->want = want;
  return want;
}

/* Describes the first difference between two argument lists, or returns
 * false when they match. */
static bool args_differ(const ts_artifact *a, const ts_artifact *b, char *why,
                        size_t size) {
  if (a->n_args != b->n_args) {
    snprintf(why, size, "%d arguments, the reference has %d", a->n_args,
             b->n_args);
    return true;
  }
  for (int i = 0; i < a->n_args; i++) {
    const ts_artifact_arg *x = &a->args[i], *y = &b->args[i];
    bool same = x->dtype.code == y->dtype.code &&
                x->dtype.bits == y->dtype.bits && x->ndim == y->ndim &&
                x->is_output == y->is_output;
    for (int d = 0; same && d < x->ndim; d++) same = x->shape[d] == y->shape[d];
    if (!same) {
      char t1[32], t2[32];
      snprintf(why, size,
               "argument %d (%s) is %s%s with %d dims, the "
               "reference's is %s%s with %d dims (or shapes differ)",
               i, x->name, ts_dtype_str(x->dtype, t1),
               x->is_output ? " output" : "", x->ndim,
               ts_dtype_str(y->dtype, t2), y->is_output ? " output" : "",
               y->ndim);
      return true;
    }
  }
  return false;
}

typedef struct cand_ctx {
  const ts_measure_config *cfg;
  const ts_artifact *a;
  const ts_rt_args *want;
} cand_ctx;

static void cand_child(helper *h, void *vctx, int wfd) {
  cand_ctx *c = vctx;
  int threads = child_threads(&h->hc, c->cfg);
  int cpu = (int)ceil(c->cfg->timeout_ms / 1000.0 * threads) + 1;
  /* helper_measure checked that the kind has a runner */
  const artifact_runner *ar = runner_of(c->a->kind);
  wfd = child_setup(&h->hc, h->self, cpu, threads, ar->filter, wfd);
  ts_measure_result r;
  memset(&r, 0, sizeof r);
  ar->run(&h->hc, c->cfg, c->a, c->want, &r);
  report(wfd, &r);
  _exit(0);
}

static helper_ref *helper_find(helper *h, const char *id) {
  for (int i = 0; i < h->n_refs; i++)
    if (!strcmp(h->refs[i].id, id)) return &h->refs[i];
  return NULL;
}

static void helper_ref_clear(helper_ref *r) {
  for (int i = 0; i < r->n_seeds; i++) ts_rt_args_free(r->seeds[i].want);
  ts_artifact_release(r->artifact);
  memset(r, 0, sizeof *r);
}

static void helper_put_ref(helper *h, const unsigned char *p, size_t len) {
  ref_head rh;
  if (len < sizeof rh) return;
  memcpy(&rh, p, sizeof rh);
  rh.id[REF_ID_MAX] = 0;
  ts_artifact *a = art_unpack(p + sizeof rh, len - sizeof rh);
  if (!a) return;
  helper_ref *r = helper_find(h, rh.id);
  if (!r) {
    if (h->n_refs < h->hc.max_refs) {
      helper_ref *nr = realloc(h->refs, sizeof *nr * (size_t)(h->n_refs + 1));
      if (!nr) {
        ts_artifact_release(a);
        return;
      }
      h->refs = nr;
      r = &h->refs[h->n_refs++];
      memset(r, 0, sizeof *r);
    } else {
      r = &h->refs[0];
      for (int i = 1; i < h->n_refs; i++)
        if (h->refs[i].last_used < r->last_used) r = &h->refs[i];
    }
  }
  helper_ref_clear(r);
  snprintf(r->id, sizeof r->id, "%s", rh.id);
  r->version = rh.version;
  r->artifact = a;
  r->last_used = ++h->clock;
}

static void helper_measure(helper *h, const unsigned char *p, size_t len) {
  measure_head mh;
  ts_measure_result res;
  if (len < sizeof mh) {
    result_set(&res, TS_MEASURE_RUN_ERROR, "internal: short measure request");
    send_msg(h->sock, MSG_RESULT, &res, sizeof res, NULL, 0);
    return;
  }
  memcpy(&mh, p, sizeof mh);
  mh.ref_id[REF_ID_MAX] = 0;
  ts_artifact *a = art_unpack(p + sizeof mh, len - sizeof mh);
  const ts_rt_args *want = NULL;
  if (!a) {
    result_set(&res, TS_MEASURE_RUN_ERROR, "internal: malformed artifact");
    goto reply;
  }
  const artifact_runner *ar = runner_of(a->kind);
  if (!ar) {
    result_set(&res, TS_MEASURE_BUILD_ERROR, "artifact kind %d cannot run here",
               (int)a->kind);
    goto reply;
  }
  if (ar->on_gpu != h->hc.dev.cuda) {
    char dev[32];
    if (h->hc.dev.cuda)
      snprintf(dev, sizeof dev, "cuda:%d", h->hc.dev.index);
    else
      snprintf(dev, sizeof dev, "cpu");
    result_set(&res, TS_MEASURE_BUILD_ERROR,
               "a %s artifact cannot run on device %s", ar->name, dev);
    goto reply;
  }
  if (mh.ref_id[0]) {
    helper_ref *ref = helper_find(h, mh.ref_id);
    if (!ref || ref->version != mh.ref_version) {
      ts_artifact_release(a);
      send_msg(h->sock, MSG_NEED_REF, NULL, 0, NULL, 0);
      return;
    }
    ref->last_used = ++h->clock;
    char why[512];
    if (args_differ(a, ref->artifact, why, sizeof why)) {
      result_set(&res, TS_MEASURE_BUILD_ERROR,
                 "arguments differ from "
                 "reference '%s': %s",
                 ref->id, why);
      goto reply;
    }
    const char *failure = "";
    want = ref_outputs(h, ref, &mh.cfg, &failure);
    if (!want) {
      result_set(&res, TS_MEASURE_RUN_ERROR, "%s", failure);
      goto reply;
    }
  }
  cand_ctx ctx = {&mh.cfg, a, want};
  run_child(h, cand_child, &ctx, mh.cfg.timeout_ms, mh.cfg.eval.repeat, &res);
reply:
  ts_artifact_release(a);
  send_msg(h->sock, MSG_RESULT, &res, sizeof res, NULL, 0);
}

static void info_child(helper *h, void *ctx, int wfd) {
  (void)ctx;
  wfd = child_setup(&h->hc, h->self, 30, 1, false, wfd);
  info_reply ir;
  memset(&ir, 0, sizeof ir);
  ts_error err;
  ts_error_clear(&err);
  ts_cuda *c = NULL;
  ir.rc = ts_cuda_open(h->hc.dev.index, &c, &err);
  if (!ir.rc) ir.rc = ts_cuda_device_info_get(c, &ir.info, &err);
  if (ir.rc) snprintf(ir.error, sizeof ir.error, "%s", err.msg);
  (void)!write_full(wfd, &ir, sizeof ir);
  _exit(0);
}

static void helper_info(helper *h) {
  info_reply ir;
  memset(&ir, 0, sizeof ir);
  int p[2];
  if (pipe2(p, O_CLOEXEC)) {
    ir.rc = TS_EIO;
    snprintf(ir.error, sizeof ir.error, "cannot create a pipe");
  } else {
    pid_t pid = fork();
    if (pid == 0) {
      close(p[0]);
      close(h->sock);
      info_child(h, NULL, p[1]);
    }
    close(p[1]);
    if (pid < 0) {
      ir.rc = TS_EIO;
      snprintf(ir.error, sizeof ir.error, "cannot fork: %s", strerror(errno));
    } else {
      child_end e;
      wait_child(h, pid, p[0], mono_seconds() + 30, &ir, sizeof ir, &e);
      if (e.got != sizeof ir) {
        memset(&ir, 0, sizeof ir);
        ir.rc = TS_EUNSUPPORTED;
        snprintf(ir.error, sizeof ir.error, "the CUDA probe %s",
                 e.timed_out ? "timed out" : "crashed");
      }
    }
    close(p[0]);
  }
  send_msg(h->sock, MSG_INFO, &ir, sizeof ir, NULL, 0);
}

static void close_other_fds(int keep) {
  if (keep != 3) {
    dup2(keep, 3);
    keep = 3;
  }
  if (syscall(SYS_close_range, 4U, ~0U, 0U) != 0)
    for (int fd = 4; fd < 4096; fd++) close(fd);
}

/* The helper's main loop; never returns. */
static void helper_main(int sock, const helper_config *hc) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sigemptyset(&sa.sa_mask);
  for (int s = 1; s < NSIG; s++) {
    if (s == SIGKILL || s == SIGSTOP) continue;
    sa.sa_handler =
        (s == SIGINT || s == SIGPIPE || s == SIGHUP) ? SIG_IGN : SIG_DFL;
    sigaction(s, &sa, NULL);
  }
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_UNBLOCK, &all, NULL);
  close_other_fds(sock);
  prctl(PR_SET_NAME, "tessera-measure");
  /* Orphans of a measuring child come back here to be killed and reaped. */
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  helper h;
  memset(&h, 0, sizeof h);
  h.hc = *hc;
  h.sock = 3;
  h.self = getpid();
  /* Linux hands out the AMX tile state only to a process that asks for it
   * (without, the first tile instruction is an illegal instruction); the
   * permission is inherited by the measuring children forked from here. A
   * refusal leaves AMX candidates to fail by themselves. */
  if (ts_rt_cpu_has("amx-tile") == 1) (void)ts_rt_enable_amx(NULL);
  for (;;) {
    msg_head mh;
    if (read_full(h.sock, &mh, sizeof mh, -1)) _exit(0);
    if (mh.len > MAX_MSG) _exit(2);
    unsigned char *p = malloc(mh.len ? mh.len : 1);
    if (!p || read_full(h.sock, p, mh.len, -1)) _exit(0);
    if (mh.type == MSG_MEASURE)
      helper_measure(&h, p, mh.len);
    else if (mh.type == MSG_PUT_REF)
      helper_put_ref(&h, p, mh.len);
    else if (mh.type == MSG_CUDA_INFO)
      helper_info(&h);
    free(p);
    /* No child of ours is running now: reap any stray one. */
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
  }
}

/* ======================================================================
 * The caller's side
 * ====================================================================== */

/* Forks the helper; requires the ticket (or exclusive use). */
static int spawn_helper(executor *ex, ts_error *err) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
    return TS_ERR(err, TS_EIO, "cannot create a socket pair: %s",
                  strerror(errno));
  pid_t pid = fork();
  if (pid < 0) {
    close(sv[0]);
    close(sv[1]);
    return TS_ERR(err, TS_EIO, "cannot fork the measurement process: %s",
                  strerror(errno));
  }
  if (pid == 0) {
    close(sv[0]);
    helper_main(sv[1], &ex->hc);
    _exit(0);
  }
  close(sv[1]);
  pthread_mutex_lock(&ex->mu);
  ex->helper = pid;
  pthread_mutex_unlock(&ex->mu);
  ex->sock = sv[0];
  return TS_OK;
}

/* Kills and reaps the helper (its child dies with it: PR_SET_PDEATHSIG).
 * Under ex->mu, so executor_shutdown never signals a reaped pid. */
static void kill_helper(executor *ex) {
  pthread_mutex_lock(&ex->mu);
  if (ex->helper > 0) {
    kill(ex->helper, SIGKILL);
    while (waitpid(ex->helper, NULL, 0) < 0 && errno == EINTR) {
    }
    ex->helper = 0;
  }
  pthread_mutex_unlock(&ex->mu);
  if (ex->sock >= 0) close(ex->sock);
  ex->sock = -1;
}

static void ticket_acquire(executor *ex) {
  pthread_mutex_lock(&ex->mu);
  uint64_t t = ex->next_ticket++;
  while (ex->serving != t) pthread_cond_wait(&ex->cv, &ex->mu);
  pthread_mutex_unlock(&ex->mu);
}

static void ticket_release(executor *ex) {
  pthread_mutex_lock(&ex->mu);
  ex->serving++;
  pthread_cond_broadcast(&ex->cv);
  pthread_mutex_unlock(&ex->mu);
}

void executor_shutdown(executor *ex) {
  pthread_mutex_lock(&ex->mu);
  ex->shutting_down = true;
  if (ex->helper > 0) kill(ex->helper, SIGKILL);
  pthread_cond_broadcast(&ex->cv);
  pthread_mutex_unlock(&ex->mu);
}

bool executor_stopping(executor *ex) {
  pthread_mutex_lock(&ex->mu);
  bool s = ex->shutting_down;
  pthread_mutex_unlock(&ex->mu);
  return s;
}

int executor_create(const ts_device_options *o, int max_references,
                    executor **out, ts_error *err) {
  *out = NULL;
  ts_device_options d = o ? *o : ts_device_defaults();
  device_spec dev;
  int rc = device_parse(d.device, &dev, err);
  if (rc) return rc;
  if (d.threads < 0 || d.threads > TS_RT_MAX_THREADS)
    return TS_ERR(err, TS_EINVAL, "device threads %d is not in [0, %d]",
                  d.threads, TS_RT_MAX_THREADS);
  if (d.memory_limit_bytes < 0)
    return TS_ERR(err, TS_EINVAL, "negative memory limit");
  executor *ex = calloc(1, sizeof *ex);
  if (!ex) return TS_ERR(err, TS_ENOMEM, "out of memory");
  ex->hc.dev = dev;
  ex->hc.threads = d.threads;
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  ex->hc.online_cpus = online > 0 ? (int)online : 1;
  (void)ts_rt_llc_bytes(); /* read now: the cache flush of a sandboxed
                              child needs it and cannot open /sys */
  ex->hc.memory_limit = d.memory_limit_bytes;
  ex->hc.filter = d.seccomp;
  ex->hc.max_refs = max_references > 0 ? max_references : 64;
  ex->sock = -1;
  pthread_mutex_init(&ex->mu, NULL);
  pthread_cond_init(&ex->cv, NULL);
  pthread_mutex_init(&ex->ref_mu, NULL);
  if ((rc = spawn_helper(ex, err))) {
    executor_destroy(ex);
    return rc;
  }
  *out = ex;
  return TS_OK;
}

void executor_destroy(executor *ex) {
  if (!ex) return;
  kill_helper(ex);
  for (int i = 0; i < ex->n_refs; i++)
    ts_artifact_release(ex->refs[i].artifact);
  free(ex->refs);
  pthread_mutex_destroy(&ex->mu);
  pthread_cond_destroy(&ex->cv);
  pthread_mutex_destroy(&ex->ref_mu);
  free(ex);
}

const device_spec *executor_device(const executor *ex) { return &ex->hc.dev; }

int64_t executor_measurements(executor *ex) {
  return __atomic_load_n(&ex->measurements, __ATOMIC_RELAXED);
}

int executor_put_reference(executor *ex, const char *id, ts_artifact *a,
                           ts_error *err) {
  if (!ref_id_valid(id))
    return TS_ERR(err, TS_EINVAL,
                  "bad reference id '%.80s' (1 to %d characters "
                  "of [A-Za-z0-9._-])",
                  id ? id : "", REF_ID_MAX);
  if (!a || a->kind != TS_ARTIFACT_CPU_OBJECT)
    return TS_ERR(err, TS_EINVAL,
                  "reference '%s' must be a cpu_object "
                  "artifact",
                  id);
  pthread_mutex_lock(&ex->ref_mu);
  ref_entry *e = NULL;
  for (int i = 0; i < ex->n_refs; i++)
    if (!strcmp(ex->refs[i].id, id)) e = &ex->refs[i];
  if (e && e->artifact->n_bytes == a->n_bytes &&
      e->artifact->n_args == a->n_args &&
      !memcmp(e->artifact->bytes, a->bytes, a->n_bytes) &&
      !memcmp(e->artifact->args, a->args,
              sizeof *a->args * (size_t)a->n_args) &&
      !strcmp(e->artifact->entry, a->entry)) {
    /* The same reference again: keep its cached outputs. */
    e->last_used = ++ex->clock;
    pthread_mutex_unlock(&ex->ref_mu);
    return TS_OK;
  }
  if (!e && ex->n_refs < ex->hc.max_refs) {
    ref_entry *nr = realloc(ex->refs, sizeof *nr * (size_t)(ex->n_refs + 1));
    if (!nr) {
      pthread_mutex_unlock(&ex->ref_mu);
      return TS_ERR(err, TS_ENOMEM, "out of memory");
    }
    ex->refs = nr;
    e = &ex->refs[ex->n_refs++];
    memset(e, 0, sizeof *e);
  } else if (!e) {
    e = &ex->refs[0];
    for (int i = 1; i < ex->n_refs; i++)
      if (ex->refs[i].last_used < e->last_used) e = &ex->refs[i];
  }
  ts_artifact_release(e->artifact);
  snprintf(e->id, sizeof e->id, "%s", id);
  e->artifact = ts_artifact_retain(a);
  e->version = ++ex->versions;
  e->last_used = ++ex->clock;
  pthread_mutex_unlock(&ex->ref_mu);
  return TS_OK;
}

bool executor_has_reference(executor *ex, const char *id) {
  bool found = false;
  pthread_mutex_lock(&ex->ref_mu);
  for (int i = 0; i < ex->n_refs && !found; i++)
    found = !strcmp(ex->refs[i].id, id);
  pthread_mutex_unlock(&ex->ref_mu);
  return found;
}

/* Whether the client on fd (>= 0) has hung up. */
static bool client_gone(int fd) {
  if (fd < 0) return false;
  struct pollfd pf = {fd, POLLRDHUP, 0};
  return poll(&pf, 1, 0) > 0 && (pf.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* Waits for the helper's reply to be readable before the deadline; when
 * the client on watch_fd hangs up meanwhile, asks the helper (once) to
 * cancel, which makes it answer at once. */
static void wait_reply(executor *ex, int watch_fd, double deadline) {
  bool cancelled = false;
  for (;;) {
    double left = deadline - mono_seconds();
    if (left <= 0) return;
    struct pollfd pf[2] = {{ex->sock, POLLIN, 0}, {watch_fd, POLLRDHUP, 0}};
    nfds_t n = watch_fd >= 0 && !cancelled ? 2 : 1;
    int pr = poll(pf, n, (int)ceil(left * 1000));
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0 || pf[0].revents) return;
    if (pf[1].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
      cancelled = true;
      if (send_msg(ex->sock, MSG_CANCEL, NULL, 0, NULL, 0)) return;
    }
  }
}

/* Sends a request and waits for a reply of `want` type and size. Returns 0,
 * -1 when the helper is gone or broken, or 1 for MSG_NEED_REF. */
static int helper_call(executor *ex, uint32_t type, const void *a, size_t na,
                       const void *b, size_t nb, double deadline, uint32_t want,
                       void *reply, size_t reply_size, int watch_fd) {
  if (send_msg(ex->sock, type, a, na, b, nb)) return -1;
  if (watch_fd >= 0) wait_reply(ex, watch_fd, deadline);
  msg_head h;
  if (read_full(ex->sock, &h, sizeof h, deadline)) return -1;
  if (h.type == MSG_NEED_REF && h.len == 0) return 1;
  if (h.type != want || h.len != reply_size) return -1;
  if (read_full(ex->sock, reply, reply_size, deadline)) return -1;
  return 0;
}

void executor_measure(executor *ex, const ts_measure_config *cfg,
                      const char *ref_id, const ts_artifact *a, int watch_fd,
                      ts_measure_result *res) {
  ts_artifact *ref = NULL;
  uint64_t version = 0;
  if (ref_id && ref_id[0]) {
    pthread_mutex_lock(&ex->ref_mu);
    for (int i = 0; i < ex->n_refs; i++)
      if (!strcmp(ex->refs[i].id, ref_id)) {
        ref = ts_artifact_retain(ex->refs[i].artifact);
        version = ex->refs[i].version;
        ex->refs[i].last_used = ++ex->clock;
      }
    pthread_mutex_unlock(&ex->ref_mu);
    if (!ref) {
      result_set(res, TS_MEASURE_RUN_ERROR, "unknown reference '%s'", ref_id);
      return;
    }
  }
  measure_head mh;
  memset(&mh, 0, sizeof mh);
  mh.cfg = *cfg;
  if (ref) snprintf(mh.ref_id, sizeof mh.ref_id, "%s", ref_id);
  mh.ref_version = version;
  size_t na = 0, nr = 0;
  unsigned char *art = art_pack(a, &na);
  unsigned char *refbuf = NULL;
  if (!art) {
    result_set(res, TS_MEASURE_RUN_ERROR, "out of memory");
    ts_artifact_release(ref);
    return;
  }
  ticket_acquire(ex);
  /* The helper answers within the candidate's limit plus a reference run;
   * beyond that it is considered stuck. */
  double budget =
      (cfg->timeout_ms + ts_measure_reference_limit_ms(cfg)) / 1000.0 + 30;
  char failure[256] = "";
  bool done = false;
  for (int attempt = 0; attempt < 2 && !done; attempt++) {
    ts_error err;
    ts_error_clear(&err);
    if (executor_stopping(ex)) {
      snprintf(failure, sizeof failure, "the device is shutting down");
      break;
    }
    if (ex->helper <= 0 && spawn_helper(ex, &err)) {
      snprintf(failure, sizeof failure, "%.200s", err.msg);
      break;
    }
    double deadline = mono_seconds() + budget;
    if (client_gone(watch_fd)) {
      snprintf(failure, sizeof failure,
               "measurement cancelled: the client went away");
      break;
    }
    int rc = helper_call(ex, MSG_MEASURE, &mh, sizeof mh, art, na, deadline,
                         MSG_RESULT, res, sizeof *res, watch_fd);
    if (rc == 1) {
      ref_head rh;
      memset(&rh, 0, sizeof rh);
      snprintf(rh.id, sizeof rh.id, "%s", ref_id);
      rh.version = version;
      if (!refbuf) refbuf = art_pack(ref, &nr);
      if (!refbuf) {
        snprintf(failure, sizeof failure, "out of memory");
        break;
      }
      rc = send_msg(ex->sock, MSG_PUT_REF, &rh, sizeof rh, refbuf, nr);
      if (!rc)
        rc = helper_call(ex, MSG_MEASURE, &mh, sizeof mh, art, na, deadline,
                         MSG_RESULT, res, sizeof *res, watch_fd);
    }
    if (rc == 0 &&
        ((unsigned)res->status > TS_MEASURE_WRONG_RESULT ||
         res->n_seconds < 0 || res->n_seconds > TS_MEASURE_MAX_REPEAT)) {
      result_set(res, TS_MEASURE_RUN_ERROR,
                 "malformed result from the measurement process");
      done = true;
    } else if (rc == 0) {
      done = true;
    } else {
      snprintf(failure, sizeof failure, "the measurement process %s",
               mono_seconds() >= deadline ? "stopped responding" : "died");
      kill_helper(ex);
    }
  }
  if (done)
    __atomic_fetch_add(&ex->measurements, 1, __ATOMIC_RELAXED);
  else
    result_set(res, TS_MEASURE_RUN_ERROR, "%s", failure);
  ticket_release(ex);
  res->error[sizeof res->error - 1] = 0;
  free(art);
  free(refbuf);
  ts_artifact_release(ref);
}

int executor_cuda_info(executor *ex, ts_cuda_device_info *info, ts_error *err) {
  if (!ex->hc.dev.cuda) return TS_ERR(err, TS_EINVAL, "not a CUDA device");
  info_reply ir;
  memset(&ir, 0, sizeof ir);
  ticket_acquire(ex);
  int rc = -1;
  if (ex->helper > 0 || !spawn_helper(ex, err))
    rc = helper_call(ex, MSG_CUDA_INFO, NULL, 0, NULL, 0, mono_seconds() + 60,
                     MSG_INFO, &ir, sizeof ir, -1);
  if (rc) kill_helper(ex);
  ticket_release(ex);
  if (rc)
    return TS_ERR(err, TS_EIO,
                  "the measurement process failed while "
                  "probing cuda:%d",
                  ex->hc.dev.index);
  if (ir.rc)
    return TS_ERR(err, ir.rc < 0 ? ir.rc : TS_EUNSUPPORTED, "%s", ir.error);
  *info = ir.info;
  return TS_OK;
}
