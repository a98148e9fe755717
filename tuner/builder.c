/*
 * builder.c — builds a batch of candidates, each under a time limit.
 *
 * LLVM's optimizer can take minutes (or practically forever) on a
 * pathological loop nest, and a compiler crash would take the tuner with
 * it. So the batch is built in forked child processes, one per build slot:
 * the parent hands each child one candidate index at a time over a socket
 * and reads the artifact (or the error) back over it. A child that has not
 * answered within the time limit is killed, and so is one that dies: its
 * candidate alone fails as a build_error naming the cause, and a fresh
 * child takes the slot for the rest of the batch.
 *
 * The children are forked by the calling thread while no other thread of
 * the tuner runs (the search's threads have been joined), so no lock of
 * malloc or LLVM can be held at the instant of fork. The children inherit
 * the candidates' functions; only the artifacts travel. A limit of 0 builds
 * in-process on threads instead, without a limit.
 */
#define _GNU_SOURCE
#include "tuner/internal.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* One answer, child -> parent: the head, then `len` bytes (the error text,
 * or a wire_artifact, the arguments and the bytes). */
typedef struct frame_head {
  int32_t index;
  int32_t ok;
  uint64_t len;
} frame_head;

typedef struct wire_artifact {
  int32_t kind;
  int32_t n_args;
  char entry[128];
  uint64_t n_bytes;
  uint32_t grid[3], block[3];
  uint32_t shared_bytes;
} wire_artifact;

/* A built artifact's largest size (as the RPC limits). */
#define MAX_FRAME ((uint64_t)1 << 30)

/* ======================================================================
 * I/O
 * ====================================================================== */

static int write_full(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n) {
    ssize_t w = send(fd, c, n, MSG_NOSIGNAL); /* a dead peer: EPIPE */
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    c += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Reads exactly n bytes before the deadline (< 0: none). -2 on expiry, -1
 * on EOF or error. */
static int read_full(int fd, void *p, size_t n, double deadline) {
  char *c = p;
  while (n) {
    if (deadline >= 0) {
      double left = deadline - ts_now_seconds();
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

/* ======================================================================
 * The child
 * ====================================================================== */

static int send_error(int fd, int32_t index, const char *msg) {
  frame_head h = {index, 0, strlen(msg)};
  if (write_full(fd, &h, sizeof h)) return -1;
  return write_full(fd, msg, h.len);
}

static int send_artifact(int fd, int32_t index, const ts_artifact *a) {
  wire_artifact w;
  memset(&w, 0, sizeof w);
  w.kind = a->kind;
  w.n_args = a->n_args;
  snprintf(w.entry, sizeof w.entry, "%s", a->entry);
  w.n_bytes = a->n_bytes;
  for (int d = 0; d < 3; d++) {
    w.grid[d] = a->grid[d];
    w.block[d] = a->block[d];
  }
  w.shared_bytes = a->shared_bytes;
  size_t args = sizeof(ts_artifact_arg) * (size_t)a->n_args;
  frame_head h = {index, 1, sizeof w + args + a->n_bytes};
  if (write_full(fd, &h, sizeof h) || write_full(fd, &w, sizeof w) ||
      (args && write_full(fd, a->args, args)))
    return -1;
  return a->n_bytes ? write_full(fd, a->bytes, a->n_bytes) : 0;
}

/* Builds the indices the parent sends until it closes the socket. */
static void child_main(const ts_func *const *f, int n, const ts_target *t,
                       uint64_t consts, int fd) {
  for (;;) {
    int32_t i;
    if (read_full(fd, &i, sizeof i, -1) || i < 0 || i >= n) _exit(0);
    ts_error err;
    ts_error_clear(&err);
    ts_build_result br;
    memset(&br, 0, sizeof br);
    int rc = ts_build_measured(f[i], consts, t, NULL, &br, &err)
                 ? send_error(fd, i, err.msg)
                 : send_artifact(fd, i, br.artifact);
    ts_build_result_clear(&br);
    if (rc) _exit(1);
  }
}

/* ======================================================================
 * The parent
 * ====================================================================== */

typedef struct slot {
  pid_t pid;
  int fd;       /* socket to the child: indices out, answers in */
  int index;    /* the candidate in progress (-1: idle) */
  double since; /* when it was handed out */
} slot;

static void slot_close(slot *s) {
  if (s->fd >= 0) close(s->fd);
  s->fd = -1;
}

/* Kills (when kill_it) and reaps the slot's child; returns its wait
 * status. */
static int slot_reap(slot *s, bool kill_it) {
  int ws = 0;
  if (s->pid > 0) {
    if (kill_it) kill(s->pid, SIGKILL);
    while (waitpid(s->pid, &ws, 0) < 0 && errno == EINTR) {
    }
  }
  s->pid = -1;
  slot_close(s);
  return ws;
}

static int slot_start(slot *all, int n_all, slot *s, const ts_func *const *f,
                      int n, const ts_target *t, uint64_t consts) {
  int sv[2];
  s->pid = -1;
  s->fd = -1;
  s->index = -1;
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) return -1;
  pid_t pid = fork();
  if (pid < 0) {
    close(sv[0]);
    close(sv[1]);
    return -1;
  }
  if (pid == 0) {
    /* dies with the tuner; a terminal's SIGINT is the parent's business */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    signal(SIGINT, SIG_IGN);
    close(sv[0]);
    for (int k = 0; k < n_all; k++) /* the other children's sockets */
      if (&all[k] != s) slot_close(&all[k]);
    child_main(f, n, t, consts, sv[1]);
    _exit(0);
  }
  close(sv[1]);
  s->pid = pid;
  s->fd = sv[0];
  return 0;
}

static bool slot_give(slot *s, int32_t i) {
  if (write_full(s->fd, &i, sizeof i)) return false;
  s->index = i;
  s->since = ts_now_seconds();
  return true;
}

/* Reads one answer from the slot; fills art/why of its index. Returns 0, or
 * -1 when the child is gone or spoke nonsense. */
static int slot_answer(slot *s, double deadline, ts_artifact **art,
                       char (*why)[TS_MEASURE_ERROR_MAX]) {
  frame_head h;
  if (read_full(s->fd, &h, sizeof h, deadline) || h.index != s->index ||
      h.len > MAX_FRAME)
    return -1;
  unsigned char *buf = malloc(h.len + 1);
  if (!buf || (h.len && read_full(s->fd, buf, h.len, deadline))) {
    free(buf);
    return -1;
  }
  buf[h.len] = 0;
  int i = s->index;
  int rc = 0;
  if (!h.ok) {
    snprintf(why[i], TS_MEASURE_ERROR_MAX, "build failed: %.1000s",
             (char *)buf);
  } else {
    wire_artifact w;
    size_t args = 0;
    if (h.len >= sizeof w) {
      memcpy(&w, buf, sizeof w);
      w.entry[sizeof w.entry - 1] = 0;
      args = sizeof(ts_artifact_arg) * (size_t)(w.n_args > 0 ? w.n_args : 0);
    }
    if (h.len < sizeof w || w.n_args < 0 || w.n_args > 4096 ||
        h.len != sizeof w + args + w.n_bytes) {
      rc = -1;
    } else {
      ts_artifact *a =
          ts_artifact_new((ts_artifact_kind)w.kind, w.entry,
                          (const ts_artifact_arg *)(buf + sizeof w), w.n_args,
                          buf + sizeof w + args, (size_t)w.n_bytes);
      if (!a) {
        snprintf(why[i], TS_MEASURE_ERROR_MAX,
                 "build failed: out of memory receiving the object");
      } else {
        for (int d = 0; d < 3; d++) {
          a->grid[d] = w.grid[d];
          a->block[d] = w.block[d];
        }
        a->shared_bytes = w.shared_bytes;
        art[i] = a;
      }
    }
  }
  free(buf);
  s->index = -1;
  return rc;
}

/* Why a child died, for its candidate's error. */
static void death_note(int ws, char *out, size_t n) {
  if (WIFSIGNALED(ws))
    snprintf(out, n, "the build process died of signal %d (%s)", WTERMSIG(ws),
             strsignal(WTERMSIG(ws)));
  else
    snprintf(out, n, "the build process exited (status %d) without a result",
             WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
}

static void build_forked(const ts_func *const *f, int n, const ts_target *t,
                         uint64_t consts, int procs, int timeout_ms,
                         ts_artifact **art, char (*why)[TS_MEASURE_ERROR_MAX]) {
  if (procs > n) procs = n;
  if (procs > TUNER_MAX_THREADS) procs = TUNER_MAX_THREADS;
  if (procs < 1) procs = 1;
  slot s[TUNER_MAX_THREADS];
  int next = 0, done = 0, live = 0;
  double limit = timeout_ms / 1000.0;
  for (int k = 0; k < procs; k++) s[k] = (slot){-1, -1, -1, 0};
  for (int k = 0; k < procs; k++) {
    if (slot_start(s, procs, &s[k], f, n, t, consts)) continue;
    live++;
    if (!slot_give(&s[k], next)) {
      slot_reap(&s[k], true);
      live--;
      continue;
    }
    next++;
  }
  if (!live) {
    /* no process at all: say so for each candidate */
    for (int i = 0; i < n; i++)
      snprintf(why[i], TS_MEASURE_ERROR_MAX,
               "build failed: cannot start a build process: %s",
               strerror(errno));
    return;
  }
  while (done < n) {
    struct pollfd pf[TUNER_MAX_THREADS];
    int who[TUNER_MAX_THREADS], np = 0;
    double now = ts_now_seconds(), first = INFINITY;
    for (int k = 0; k < procs; k++)
      if (s[k].pid > 0 && s[k].index >= 0) {
        pf[np] = (struct pollfd){s[k].fd, POLLIN, 0};
        who[np++] = k;
        if (s[k].since + limit < first) first = s[k].since + limit;
      }
    if (!np) break; /* every slot lost and nothing could be restarted */
    int wait_ms = (int)ceil((first - now) * 1000);
    int pr = poll(pf, (nfds_t)np, wait_ms > 0 ? wait_ms : 0);
    if (pr < 0 && errno != EINTR) break;
    now = ts_now_seconds();
    for (int p = 0; p < np; p++) {
      slot *sl = &s[who[p]];
      int i = sl->index;
      bool lost = false;
      /* the limit first: an answer found only after it counts as late
       * (the parent may have been descheduled, but the limit is judged
       * the same way for every candidate) */
      if (now >= sl->since + limit) {
        slot_reap(sl, true);
        snprintf(why[i], TS_MEASURE_ERROR_MAX,
                 "build timed out after %.0f s (the limit is %d ms: "
                 "--build-timeout-ms)",
                 now - sl->since, timeout_ms);
        lost = true;
        done++;
      } else if (pr > 0 && (pf[p].revents & (POLLIN | POLLHUP | POLLERR))) {
        if (slot_answer(sl, now + limit, art, why)) {
          int ws = slot_reap(sl, true);
          death_note(ws, why[i], TS_MEASURE_ERROR_MAX);
          lost = true;
        }
        done++;
      } else {
        continue;
      }
      if (lost && next < n && slot_start(s, procs, sl, f, n, t, consts))
        continue;
      if (next < n && slot_give(sl, next))
        next++;
      else if (next < n) {
        /* the fresh child is gone already: try again next time round */
        slot_reap(sl, true);
      }
    }
    /* slots without a process while work remains: restart them */
    for (int k = 0; k < procs && next < n; k++)
      if (s[k].pid <= 0 && !slot_start(s, procs, &s[k], f, n, t, consts)) {
        if (slot_give(&s[k], next))
          next++;
        else
          slot_reap(&s[k], true);
      }
  }
  for (int i = 0; i < n; i++)
    if (!art[i] && !why[i][0])
      snprintf(why[i], TS_MEASURE_ERROR_MAX,
               "build failed: no build process could be started");
  for (int k = 0; k < procs; k++)
    slot_close(&s[k]); /* EOF on its socket: the child exits */
  for (int k = 0; k < procs; k++)
    if (s[k].pid > 0)
      while (waitpid(s[k].pid, NULL, 0) < 0 && errno == EINTR) {
      }
}

/* ======================================================================
 * In-process (no limit)
 * ====================================================================== */

typedef struct inproc {
  const ts_func *const *f;
  const ts_target *t;
  uint64_t consts;
  ts_artifact **art;
  char (*why)[TS_MEASURE_ERROR_MAX];
} inproc;

static void build_inproc(void *ctx, int i, int worker) {
  (void)worker;
  inproc *b = ctx;
  ts_error err;
  ts_error_clear(&err);
  ts_build_result br;
  memset(&br, 0, sizeof br);
  if (ts_build_measured(b->f[i], b->consts, b->t, NULL, &br, &err))
    snprintf(b->why[i], TS_MEASURE_ERROR_MAX, "build failed: %.1000s", err.msg);
  else
    b->art[i] = ts_artifact_retain(br.artifact);
  ts_build_result_clear(&br);
}

void ts_build_batch(const ts_func *const *f, int n, const ts_target *t,
                    uint64_t const_params, int procs, int timeout_ms,
                    ts_artifact **art, char (*why)[TS_MEASURE_ERROR_MAX]) {
  for (int i = 0; i < n; i++) {
    art[i] = NULL;
    why[i][0] = 0;
  }
  if (n <= 0) return;
  if (timeout_ms > 0) {
    build_forked(f, n, t, const_params, procs, timeout_ms, art, why);
    return;
  }
  inproc b = {f, t, const_params, art, why};
  tuner_parallel(procs, n, build_inproc, &b);
}

/* ======================================================================
 * Builds as measured
 * ====================================================================== */

int ts_build_measured(const ts_func *f, uint64_t const_params,
                      const ts_target *t, const ts_build_options *o,
                      ts_build_result *out, ts_error *err) {
  int n = ts_func_n_params(f);
  uint64_t mask = const_params | ts_func_const_params(f);
  bool *flags = NULL;
  bool any = false;
  if (mask && ts_target_facts_of(t)->artifact == TS_ARTIFACT_CPU_OBJECT &&
      n > 0 && (flags = calloc((size_t)n, sizeof *flags))) {
    for (int i = 0; i < n && i < 64; i++) {
      flags[i] = (mask >> i & 1) && !ts_func_param_is_output(f, i);
      any = any || flags[i];
    }
  }
  ts_hoist h;
  memset(&h, 0, sizeof h);
  if (!any || ts_func_hoist_const(f, flags, &h, NULL) != TS_OK || !h.prologue) {
    free(flags);
    ts_hoist_clear(&h);
    return ts_build(f, t, o, out, err);
  }
  free(flags);
  ts_build_split sp = {h.main, h.prologue, h.inputs, h.n_inputs, h.n_outputs};
  int rc = ts_build_split_kernel(f, &sp, t, o, out, err);
  ts_hoist_clear(&h);
  return rc;
}
