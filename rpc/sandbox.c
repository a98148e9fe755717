/*
 * sandbox.c — what confines a measuring child and what the helper trusts of
 * it. A child forked by the executor's helper enters the sandbox before it
 * touches the candidate: it leads its own process group (so the helper can
 * kill everything it started in one call), keeps only the result pipe (on
 * descriptor 3) with /dev/null as its standard descriptors, gets resource
 * limits on address space, CPU time, file size, processes and core files,
 * and installs a seccomp filter (libseccomp) that allows the system calls a
 * kernel, the runtime's thread pool and the object loader make and stops
 * the process on any other: no socket, no exec, no fork, no ptrace, no
 * signals to other processes, writes only to descriptors 0-3, and opening
 * a file fails with EACCES.
 * A forbidden call is never carried out: the filter traps it (SIGSYS), and
 * the child's handler reports its number as a run_error and exits with
 * SANDBOX_TRAP_EXIT; the helper adds the call's name (sandbox_trapped). A
 * candidate that replaces the handler only gets the call refused, or is
 * killed by the signal.
 *
 * On the helper's side, the result a child writes is untrusted bytes: it is
 * accepted only when it is exactly one ts_measure_result whose status, repeat
 * count, timings and strings are all well-formed (sandbox_result_check);
 * anything else is `run_error: malformed result`. After every measurement
 * the child's process group is killed and reaped whole (the helper is a
 * child subreaper, so a grandchild orphaned by the child comes back to it).
 */
#define _GNU_SOURCE /* close_range, clone flags */
#include "rpc/internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Tasks (threads included) the user may start beyond those it has. */
#define NPROC_MARGIN 16

/* The tasks (threads) of real user uid, from /proc; -1 when unknown. */
static long user_tasks(uid_t uid) {
  DIR *d = opendir("/proc");
  if (!d) return -1;
  long total = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%.20s/status", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    long u = -1, threads = 0;
    while (fgets(line, sizeof line, f)) {
      if (!strncmp(line, "Uid:", 4)) u = strtol(line + 4, NULL, 10);
      if (!strncmp(line, "Threads:", 8)) threads = strtol(line + 8, NULL, 10);
    }
    fclose(f);
    if (u == (long)uid) total += threads;
  }
  closedir(d);
  return total;
}

static int set_limit(int resource, rlim_t value) {
  struct rlimit rl = {value, value};
  struct rlimit old;
  /* Never raise a hard limit the process already has (it cannot). */
  if (!getrlimit(resource, &old) && old.rlim_max != RLIM_INFINITY &&
      old.rlim_max < value)
    rl.rlim_cur = rl.rlim_max = old.rlim_max;
  return setrlimit(resource, &rl);
}

static int limits(const sandbox_limits *l, char *why, size_t size) {
  if (set_limit(RLIMIT_CORE, 0) || set_limit(RLIMIT_FSIZE, 0)) {
    snprintf(why, size, "cannot limit core and file sizes: %s",
             strerror(errno));
    return -1;
  }
  if (l->cpu_seconds > 0) {
    struct rlimit rl = {(rlim_t)l->cpu_seconds, (rlim_t)l->cpu_seconds + 1};
    if (setrlimit(RLIMIT_CPU, &rl)) {
      snprintf(why, size, "cannot limit CPU time: %s", strerror(errno));
      return -1;
    }
  }
  if (l->memory_bytes > 0) {
    /* Relative to the address space the child starts with (a sanitizer
     * build reserves terabytes of shadow memory up front). */
    long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
      if (fscanf(f, "%ld", &pages) != 1) pages = 0;
      fclose(f);
    }
    if (pages > 0) {
      rlim_t cur = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE);
      if (set_limit(RLIMIT_AS, cur + (rlim_t)l->memory_bytes)) {
        snprintf(why, size, "cannot limit the address space: %s",
                 strerror(errno));
        return -1;
      }
    }
  }
  /* RLIMIT_NPROC counts every task of the real user and does not bind
   * root; the filter below is what stops a fork. */
  if (getuid() != 0) {
    long tasks = user_tasks(getuid());
    if (tasks >= 0 &&
        set_limit(RLIMIT_NPROC, (rlim_t)(tasks + l->threads + NPROC_MARGIN))) {
      snprintf(why, size, "cannot limit processes: %s", strerror(errno));
      return -1;
    }
  }
  return 0;
}

/* Keeps result_fd as SANDBOX_RESULT_FD, /dev/null as 0-2, closes the
 * rest. */
static int descriptors(int result_fd, char *why, size_t size) {
  int keep = fcntl(result_fd, F_DUPFD_CLOEXEC, 16);
  int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (keep < 0 || null < 0) {
    snprintf(why, size, "cannot set up descriptors: %s", strerror(errno));
    return -1;
  }
  for (int fd = 0; fd <= 2; fd++)
    if (dup2(null, fd) != fd) {
      snprintf(why, size, "cannot redirect descriptor %d: %s", fd,
               strerror(errno));
      return -1;
    }
  if (dup2(keep, SANDBOX_RESULT_FD) != SANDBOX_RESULT_FD) {
    snprintf(why, size, "cannot move the result pipe: %s", strerror(errno));
    return -1;
  }
  if (syscall(SYS_close_range, (unsigned)SANDBOX_RESULT_FD + 1, ~0U, 0U))
    for (int fd = SANDBOX_RESULT_FD + 1; fd < 65536; fd++) close(fd);
  return 0;
}

/* System calls allowed without conditions: memory, threads and their
 * synchronization, signals to oneself, clocks and sleeping, exiting. */
static const int allowed[] = {
    SCMP_SYS(read),
    SCMP_SYS(close),
    SCMP_SYS(fstat),
    SCMP_SYS(lseek),
    SCMP_SYS(mmap),
    SCMP_SYS(munmap),
    SCMP_SYS(mprotect),
    SCMP_SYS(mremap),
    SCMP_SYS(madvise),
    SCMP_SYS(brk),
    SCMP_SYS(futex),
    SCMP_SYS(sched_yield),
    SCMP_SYS(sched_getaffinity),
    SCMP_SYS(getcpu),
    SCMP_SYS(set_robust_list),
    SCMP_SYS(rseq),
    SCMP_SYS(set_tid_address),
    SCMP_SYS(rt_sigaction),
    SCMP_SYS(rt_sigprocmask),
    SCMP_SYS(rt_sigreturn),
    SCMP_SYS(sigaltstack),
    SCMP_SYS(exit),
    SCMP_SYS(exit_group),
    SCMP_SYS(getpid),
    SCMP_SYS(gettid),
    SCMP_SYS(clock_gettime),
    SCMP_SYS(clock_getres),
    SCMP_SYS(gettimeofday),
    SCMP_SYS(clock_nanosleep),
    SCMP_SYS(nanosleep),
    SCMP_SYS(getrusage),
    SCMP_SYS(getrandom),
    SCMP_SYS(arch_prctl),
};

/* What the SIGSYS handler writes: prepared before the filter is installed,
 * so that the handler only formats a number and makes two allowed calls
 * (write, exit_group). */
static ts_measure_result trap_report;
static size_t trap_text_len;

static void on_forbidden_call(int sig, siginfo_t *si, void *uc) {
  (void)sig;
  (void)uc;
  char digits[16];
  int n = 0;
  unsigned v = (unsigned)si->si_syscall;
  do digits[n++] = (char)('0' + v % 10);
  while ((v /= 10) && n < (int)sizeof digits);
  char *e = trap_report.error + trap_text_len;
  *e++ = ' ';
  while (n) *e++ = digits[--n];
  *e = 0;
  const char *c = (const char *)&trap_report;
  size_t left = sizeof trap_report;
  while (left) {
    ssize_t w = write(SANDBOX_RESULT_FD, c, left);
    if (w <= 0) break;
    c += w;
    left -= (size_t)w;
  }
  _exit(SANDBOX_TRAP_EXIT);
}

static int trap_handler(char *why, size_t size) {
  memset(&trap_report, 0, sizeof trap_report);
  trap_report.status = TS_MEASURE_RUN_ERROR;
  snprintf(trap_report.error, sizeof trap_report.error, "%s",
           SANDBOX_TRAP_TEXT);
  trap_text_len = strlen(trap_report.error);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_forbidden_call;
  sa.sa_flags = SA_SIGINFO;
  sigfillset(&sa.sa_mask);
  if (sigaction(SIGSYS, &sa, NULL)) {
    snprintf(why, size, "cannot handle SIGSYS: %s", strerror(errno));
    return -1;
  }
  return 0;
}

void sandbox_trapped(const ts_measure_result *rep, size_t total,
                     ts_measure_result *r) {
  size_t n = strlen(SANDBOX_TRAP_TEXT);
  long nr = -1;
  /* The report is the candidate's bytes too: only its number is taken. */
  if (total == sizeof *rep && !strncmp(rep->error, SANDBOX_TRAP_TEXT, n) &&
      rep->error[n] == ' ') {
    char *end;
    nr = strtol(rep->error + n + 1, &end, 10);
    if (end == rep->error + n + 1 || *end || nr > 100000) nr = -1;
  }
  char *name = nr >= 0
                   ? seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, (int)nr)
                   : NULL;
  memset(r, 0, sizeof *r);
  r->status = TS_MEASURE_RUN_ERROR;
  if (nr < 0)
    snprintf(r->error, sizeof r->error, "%s (its number was not reported)",
             SANDBOX_TRAP_TEXT);
  else
    snprintf(r->error, sizeof r->error, "%s %ld (%s)", SANDBOX_TRAP_TEXT, nr,
             name ? name : "unknown to libseccomp");
  free(name);
}

static int filter(char *why, size_t size) {
  if (trap_handler(why, size)) return -1;
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_TRAP);
  if (!ctx) {
    snprintf(why, size, "cannot create the system-call filter");
    return -1;
  }
  int rc = 0;
  for (size_t i = 0; !rc && i < sizeof allowed / sizeof allowed[0]; i++)
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, allowed[i], 0);
  /* Writes to /dev/null (0-2) and the result pipe only. */
  if (!rc)
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(write), 1,
                          SCMP_A0(SCMP_CMP_LE, SANDBOX_RESULT_FD));
  if (!rc)
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(writev), 1,
                          SCMP_A0(SCMP_CMP_LE, SANDBOX_RESULT_FD));
  /* New threads, never new processes; clone3's flags are out of the
   * filter's reach, so clone3 answers ENOSYS and the C library falls back
   * to clone, whose flags the filter checks. */
  if (!rc)
    rc = seccomp_rule_add(
        ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
        SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
  if (!rc)
    rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
  /* Signals only to itself (abort, the thread pool). */
  if (!rc)
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1,
                          SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)getpid()));
  /* Opening a file answers "permission denied" instead of stopping the
   * child: the C library opens files of its own accord and copes without
   * them (malloc reads the overcommit setting the first time a thread's
   * heap shrinks, the CPU count reads the online list). Nothing is opened
   * either way. */
  const int opens[] = {SCMP_SYS(open), SCMP_SYS(openat), SCMP_SYS(openat2),
                       SCMP_SYS(creat)};
  for (size_t i = 0; !rc && i < sizeof opens / sizeof opens[0]; i++)
    rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), opens[i], 0);
  /* Reading a resource limit, never setting one. */
  if (!rc)
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prlimit64), 1,
                          SCMP_A2(SCMP_CMP_EQ, 0));
  if (!rc) rc = seccomp_load(ctx);
  seccomp_release(ctx);
  if (rc) {
    snprintf(why, size, "cannot install the system-call filter: %s",
             strerror(-rc));
    return -1;
  }
  return 0;
}

int sandbox_enter(int result_fd, const sandbox_limits *l, char *why,
                  size_t size) {
  /* Also done by the helper: whichever runs first wins the race. */
  if (setpgid(0, 0) && getpgid(0) != getpid()) {
    snprintf(why, size, "cannot lead a process group: %s", strerror(errno));
    return -1;
  }
  if (descriptors(result_fd, why, size) || limits(l, why, size)) return -1;
  if (l->filter && filter(why, size)) return -1;
  return SANDBOX_RESULT_FD;
}

void sandbox_kill_group(pid_t pgid) {
  if (pgid <= 1) return;
  kill(-pgid, SIGKILL);
  /* Reap what came back to us (the helper is a subreaper); SIGKILL is
   * prompt, but a task in uninterruptible sleep is given up on after a
   * second rather than blocking the next measurement. */
  double deadline = ts_now_seconds() + 1;
  for (;;) {
    pid_t w = waitpid(-pgid, NULL, WNOHANG);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return; /* ECHILD: none left */
    if (w == 0) {
      if (ts_now_seconds() > deadline) return;
      kill(-pgid, SIGKILL);
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
  }
}

/* Whether s (of size n) holds a terminated string; unprintable bytes are
 * replaced so that the text can go into JSON and logs as it is. */
static bool clean_string(char *s, size_t n) {
  char *end = memchr(s, 0, n);
  if (!end) return false;
  for (char *p = s; p < end; p++)
    if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f) *p = '?';
  memset(end, 0, n - (size_t)(end - s));
  return true;
}

bool sandbox_result_check(ts_measure_result *r, int repeat, char *why,
                          size_t size) {
  if (r->status != TS_MEASURE_OK && r->status != TS_MEASURE_BUILD_ERROR &&
      r->status != TS_MEASURE_RUN_ERROR &&
      r->status != TS_MEASURE_WRONG_RESULT) {
    snprintf(why, size, "status %d", (int)r->status);
    return false;
  }
  int want = r->status == TS_MEASURE_OK ? repeat : 0;
  if (r->n_seconds != want) {
    snprintf(why, size, "%d repeats for a %s result (want %d)", r->n_seconds,
             ts_measure_status_name(r->status), want);
    return false;
  }
  for (int i = 0; i < TS_MEASURE_MAX_REPEAT; i++) {
    double s = r->seconds[i];
    if (i < r->n_seconds ? !(isfinite(s) && s >= 0 && s < 1e9) : s != 0) {
      snprintf(why, size, "seconds[%d] is %g", i, s);
      return false;
    }
  }
  if (r->number < 0 || r->number > TS_EVAL_MAX_NUMBER ||
      (r->status == TS_MEASURE_OK && repeat > 0 && r->number < 1)) {
    snprintf(why, size, "number %d", r->number);
    return false;
  }
  if (!clean_string(r->error, sizeof r->error) ||
      !clean_string(r->worker, sizeof r->worker)) {
    snprintf(why, size, "an unterminated string");
    return false;
  }
  if (r->status != TS_MEASURE_OK && !r->error[0]) {
    snprintf(why, size, "a %s result without an error text",
             ts_measure_status_name(r->status));
    return false;
  }
  /* What the helper and the caller fill in themselves. */
  r->run_ms = r->started_at = r->finished_at = 0;
  r->attempts = 0;
  return true;
}
