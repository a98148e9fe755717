/*
 * cmd_bench_suite.c — `tessera bench --suite quick|full` (what `make bench`
 * runs): for a fixed suite of workloads, tunes each one on the embedded pool
 * (resuming the database's job, so results already there are reused and
 * only what remains of the budget is measured), then benchmarks the
 * database's best schedule side by side with OpenBLAS, oneDNN and plain C
 * loops, and prints one table — also written as JSON and markdown.
 *
 * Each step runs as a child `tessera` process (tune, bench, probe), so a
 * failure in one workload is reported in its row and the suite goes on. An
 * interrupt (SIGINT, SIGTERM) goes to the child too: a tune child commits
 * its batch in flight and exits 130, and the suite stops there, saying how
 * to resume.
 */
#include "cli.h"

#include "codegen/codegen.h"
#include "db/db.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct suite_entry {
  const char *spec;
  int threads;             /* 0: all cores */
  const char *vendor_kind; /* which baselines matter: "blas", "dnn", "naive" */
} suite_entry;

/* The suite of issue 9: matmuls fp32/bf16/int8, ResNet-50 convolutions,
 * a depthwise conv, softmax and layer_norm. */
static const suite_entry suite[] = {
    {"matmul M=512 N=512 K=512", 1, "blas"},
    {"matmul M=512 N=512 K=512", 0, "blas"},
    {"matmul M=1024 N=1024 K=1024", 1, "blas"},
    {"matmul M=1024 N=1024 K=1024", 0, "blas"},
    {"matmul M=2048 N=2048 K=2048", 1, "blas"},
    {"matmul M=2048 N=2048 K=2048", 0, "blas"},
    {"matmul M=1024 N=1024 K=1024 dtype=bfloat16", 0, "dnn"},
    {"matmul M=1024 N=1024 K=1024 dtype=int8", 0, "dnn"},
    {"conv2d_nhwc N=1 H=56 W=56 CI=64 CO=64 KH=3 KW=3 pad=1", 0, "dnn"},
    {"conv2d_nhwc N=1 H=28 W=28 CI=128 CO=128 KH=3 KW=3 pad=1", 0, "dnn"},
    {"conv2d_nhwc N=1 H=14 W=14 CI=256 CO=256 KH=3 KW=3 pad=1", 0, "dnn"},
    {"conv2d_nhwc N=1 H=7 W=7 CI=512 CO=512 KH=3 KW=3 pad=1", 0, "dnn"},
    {"conv2d_nhwc N=1 H=56 W=56 CI=64 CO=256 KH=1 KW=1", 0, "dnn"},
    {"depthwise_conv2d_nhwc N=1 H=112 W=112 C=32 KH=3 KW=3 pad=1", 0, "naive"},
    {"softmax N=4096 D=1024", 0, "naive"},
    {"layer_norm N=4096 D=1024", 0, "naive"},
};
#define N_SUITE (int)(sizeof suite / sizeof suite[0])

/* ---- the broad set: workloads drawn at random (seeded) ----
 *
 * Shapes the fixed suite does not have, so that a schedule space tuned to
 * the suite shows here: odd and prime sizes, skinny and small dimensions,
 * layers of real networks at other resolutions, every dtype. Each draw is
 * a pure function of the seed (docs/tuning.md, "The broad set"). */

#define BROAD_MAX 24

static uint64_t broad_next(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* uniform in [lo, hi] */
static int broad_int(uint64_t *s, int lo, int hi) {
  return lo + (int)(broad_next(s) % (uint64_t)(hi - lo + 1));
}

static int broad_pick(uint64_t *s, const int *v, int n) {
  return v[broad_next(s) % (uint64_t)n];
}

static int broad_odd(uint64_t *s, int lo, int hi) {
  return broad_int(s, lo, hi) | 1;
}

static int broad_prime(uint64_t *s, int lo, int hi) {
  for (int n = broad_int(s, lo, hi);; n++) {
    bool prime = n > 1;
    for (int d = 2; d * d <= n && prime; d++) prime = n % d != 0;
    if (prime) return n;
  }
}

/* Fills specs[] (each BROAD_SPEC bytes) and threads[]; returns the count. */
#define BROAD_SPEC 128
static int broad_set(uint64_t seed, char (*specs)[BROAD_SPEC], int *threads,
                     const char **kinds) {
  /* dimensions that real networks use: hidden sizes, classes, channels */
  static const int dims[] = {384,  512,  576,  768,  960,
                             1000, 1024, 1280, 2048, 3072};
  static const int chans[] = {24,  32,  40,  48,  64,  80,  96,  112,
                              128, 144, 160, 192, 256, 320, 384, 512};
  static const int spatial[] = {7, 9, 14, 17, 19, 28, 35, 38, 56, 73};
  static const int heads[] = {8, 12, 16}, stem_out[] = {24, 32, 64};
  static const int expand[] = {1, 3, 6}, rows[] = {384, 576, 768, 1000, 1027};
#define PICK(v) broad_pick(s, v, (int)(sizeof v / sizeof v[0]))
  uint64_t st = seed * 0x2545f4914f6cdd1dull + 1;
  uint64_t *s = &st;
  int n = 0;
#define ADD(thr, kind, ...)                                                    \
  do {                                                                         \
    snprintf(specs[n], BROAD_SPEC, __VA_ARGS__);                               \
    threads[n] = (thr);                                                        \
    kinds[n++] = (kind);                                                       \
  } while (0)
  /* Each draw is a statement of its own, so that the set does not depend
   * on the order a compiler evaluates function arguments in (the order
   * below is the one that drew the set docs/tuning.md measures). */
  int a, b, c, d;
  /* fp32 matrix products: odd sizes (both thread counts), primes, a
   * skinny K, a dense layer of few rows, attention's batched product */
  a = broad_odd(s, 300, 1100);
  b = broad_odd(s, 300, 1100);
  c = broad_odd(s, 200, 900);
  ADD(0, "blas", "matmul M=%d N=%d K=%d", a, b, c);
  ADD(1, "blas", "matmul M=%d N=%d K=%d", a, b, c);
  c = broad_prime(s, 100, 700);
  b = broad_prime(s, 100, 700);
  a = broad_prime(s, 100, 700);
  ADD(0, "blas", "matmul M=%d N=%d K=%d", a, b, c);
  c = broad_int(s, 12, 80);
  b = PICK(dims);
  a = broad_int(s, 256, 1024);
  ADD(0, "blas", "matmul M=%d N=%d K=%d", a, b, c);
  c = PICK(dims);
  b = PICK(dims);
  a = broad_int(s, 1, 48);
  ADD(0, "blas", "dense M=%d N=%d K=%d bias=1", a, b, c);
  c = broad_int(s, 50, 200);
  b = broad_int(s, 50, 200);
  a = PICK(heads);
  ADD(0, "blas", "batch_matmul B=%d M=%d N=%d K=64 transpose_b=1", a, b, c);
  /* convolutions: a stem of 3 channels, 3x3 and 1x1 layers at other
   * resolutions (odd ones too), stride 2, depthwise */
  a = 2 * broad_int(s, 56, 128);
  c = PICK(stem_out);
  ADD(0, "dnn", "conv2d_nhwc N=1 H=%d W=%d CI=3 CO=%d KH=7 KW=7 stride=2 pad=3",
      a, a, c);
  a = PICK(spatial);
  c = PICK(chans);
  b = PICK(chans);
  ADD(0, "dnn", "conv2d_nhwc N=1 H=%d W=%d CI=%d CO=%d KH=3 KW=3 pad=1", a, a,
      b, c);
  a = PICK(spatial);
  c = 2 * PICK(chans);
  b = PICK(chans);
  ADD(0, "dnn", "conv2d_nhwc N=1 H=%d W=%d CI=%d CO=%d KH=1 KW=1", a, a, b, c);
  a = 2 * broad_int(s, 10, 40);
  c = PICK(chans);
  b = PICK(chans);
  ADD(0, "dnn",
      "conv2d_nhwc N=1 H=%d W=%d CI=%d CO=%d KH=3 KW=3 stride=2 pad=1", a, a, b,
      c);
  a = PICK(spatial) * 2;
  b = PICK(chans);
  d = PICK(expand);
  ADD(0, "dnn", "depthwise_conv2d_nhwc N=1 H=%d W=%d C=%d KH=3 KW=3 pad=1", a,
      a, b * d);
  a = PICK(spatial) * 2;
  b = PICK(chans);
  ADD(0, "dnn", "depthwise_conv2d_nhwc N=1 H=%d W=%d C=%d KH=5 KW=5 pad=2", a,
      a, b * 3);
  /* row reductions whose length is not a multiple of a vector */
  b = broad_odd(s, 100, 1100);
  a = broad_int(s, 200, 4000);
  ADD(0, "naive", "softmax N=%d D=%d", a, b);
  b = PICK(rows);
  a = broad_int(s, 100, 2500);
  ADD(0, "naive", "layer_norm N=%d D=%d", a, b);
  /* bf16 and int8 products */
  c = PICK(dims);
  b = PICK(dims);
  a = broad_int(s, 200, 1000);
  ADD(0, "dnn", "matmul M=%d N=%d K=%d dtype=bfloat16", a, b, c);
  c = PICK(dims);
  b = PICK(dims);
  a = broad_int(s, 200, 1000);
  ADD(0, "dnn", "matmul M=%d N=%d K=%d dtype=int8", a, b, c);
#undef PICK
#undef ADD
  return n;
}

typedef struct row {
  char name[128];
  int threads;
  long long trials;
  double tessera, openblas, onednn, naive, peak; /* GFLOP/s; < 0 unknown */
  char check[32];
  char error[256];
} row;

/* The running child and whether an interrupt arrived: what the signal
 * handler needs (it can reach nothing else). */
static volatile sig_atomic_t child_pid, interrupted;

/* Passes SIGINT/SIGTERM on to the child (in a process group of its own, so
 * nothing else sends it one) and remembers it. */
static void on_interrupt(int sig) {
  interrupted = 1;
  if (child_pid > 0) kill((pid_t)child_pid, sig);
}

/* Runs this executable with argv, capturing stdout (malloc'd, caller
 * frees); stderr passes through. Returns the exit status, -1 on failure to
 * run. */
static int run_self(char *const *argv, char **out) {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n < 0) return -1;
  self[n] = 0;
  if (interrupted) return EXIT_INTERRUPTED;
  int fds[2];
  if (pipe(fds)) return -1;
  /* interrupts wait until the child is known: one arriving between fork and
   * `child_pid = pid` would otherwise be lost, and the child run to its end */
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  sigprocmask(SIG_BLOCK, &block, &old);
  pid_t pid = fork();
  if (pid < 0) {
    sigprocmask(SIG_SETMASK, &old, NULL);
    close(fds[0]);
    close(fds[1]);
    return -1;
  }
  if (pid == 0) {
    /* its own process group: a terminal's Ctrl-C reaches only this process,
     * which passes it on once (a second interrupt would make tune quit
     * without committing its batch in flight) */
    setpgid(0, 0);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    sigprocmask(SIG_SETMASK, &old, NULL);
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    execv(self, argv);
    _exit(127);
  }
  child_pid = pid;
  /* one that came before the fork (still blocked: a pending one is passed
   * on by the handler when unblocked, so the child gets each only once) */
  if (interrupted) kill(pid, SIGINT);
  sigprocmask(SIG_SETMASK, &old, NULL);
  close(fds[1]);
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  for (;;) {
    if (len + 1024 > cap) buf = realloc(buf, cap *= 2);
    ssize_t r = read(fds[0], buf + len, cap - len - 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    len += (size_t)r;
  }
  buf[len] = 0;
  close(fds[0]);
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  child_pid = 0;
  *out = buf;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static double json_num(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* The probed peak for a row: all-core or per-core fp32 figures (the
 * suite's fp32 rows), -1 when not probed or not fp32. */
static double probed_peak(const char *probe_json, const char *spec, int threads,
                          int cores) {
  if (!probe_json || strstr(spec, "dtype=")) return -1;
  cJSON *p = cJSON_Parse(probe_json);
  if (!p) return -1;
  double v = threads == 1 ? json_num(p, "fp32_gflops_per_core")
                          : json_num(p, "fp32_gflops_all_cores");
  if (threads != 1 && v < 0) {
    double pc = json_num(p, "fp32_gflops_per_core");
    if (pc > 0) v = pc * cores;
  }
  cJSON_Delete(p);
  return v;
}

static char *target_probe(const char *db_path, const char *target) {
  ts_db *db = NULL;
  ts_error err;
  ts_db_options o = ts_db_defaults();
  o.create = false;
  char *json = NULL;
  int64_t id;
  if (ts_db_open(db_path, &o, &db, &err) == TS_OK &&
      ts_db_find_target(db, target, &id) == TS_OK)
    ts_db_get_target_probe(db, id, &json);
  ts_db_close(db);
  return json;
}

static void fmt(char *buf, size_t cap, double v) {
  if (v < 0)
    snprintf(buf, cap, "-");
  else
    snprintf(buf, cap, "%.1f", v);
}

static int suite_run(const bench_suite_options *o, const suite_entry *entries,
                     int n_entries, long long trials);

int bench_suite(const bench_suite_options *o) {
  const char *budget = o->budget;
  long long trials = !strcmp(budget, "full")    ? 1000
                     : !strcmp(budget, "quick") ? 24
                                                : -1;
  if (trials < 0)
    return cli_usage_error("bench", "--budget wants quick or full, got '%s'",
                           budget);
  if (o->trials > 0) trials = o->trials;
  bool broad = !strcmp(o->set, "broad");
  if (!broad && strcmp(o->set, "fixed"))
    return cli_usage_error("bench", "--set wants fixed or broad, got '%s'",
                           o->set);
  if (strcmp(o->isa, "native") && strcmp(o->isa, "avx2"))
    return cli_usage_error("bench", "--isa wants native or avx2, got '%s'",
                           o->isa);
  if (!strcmp(o->isa, "avx2") && ts_rt_cpu_has("avx2") != 1) {
    fprintf(stderr, "tessera: error: bench: --isa avx2 needs a CPU with AVX2 "
                    "and FMA; this one has not\n");
    return EXIT_FAIL;
  }
  static char specs[BROAD_MAX][BROAD_SPEC];
  suite_entry broad_entries[BROAD_MAX];
  int n_entries = N_SUITE;
  const suite_entry *entries = suite;
  if (broad) {
    int thr[BROAD_MAX];
    const char *kinds[BROAD_MAX];
    n_entries = broad_set(o->set_seed, specs, thr, kinds);
    for (int i = 0; i < n_entries; i++)
      broad_entries[i] = (suite_entry){specs[i], thr[i], kinds[i]};
    entries = broad_entries;
  }
  static suite_entry kept[BROAD_MAX > N_SUITE ? BROAD_MAX : N_SUITE];
  static char cw_specs[BROAD_MAX > N_SUITE ? BROAD_MAX : N_SUITE][BROAD_SPEC];
  static suite_entry cw[BROAD_MAX > N_SUITE ? BROAD_MAX : N_SUITE];
  if (o->const_weights) {
    for (int i = 0; i < n_entries; i++) {
      const char *sp = entries[i].spec;
      bool conv =
          !strncmp(sp, "conv2d_", 7) || !strncmp(sp, "depthwise_conv2d_", 17);
      snprintf(cw_specs[i], BROAD_SPEC, "%s%s", sp,
               conv ? " const=weight" : "");
      cw[i] = entries[i];
      cw[i].spec = cw_specs[i];
    }
    entries = cw;
  }
  if (o->only) {
    int n = 0;
    for (int i = 0; i < n_entries; i++)
      if (strstr(entries[i].spec, o->only)) kept[n++] = entries[i];
    if (n == 0)
      return cli_usage_error("bench",
                             "--only '%s': no workload of the %s set "
                             "contains it (--list shows the set)",
                             o->only, o->set);
    entries = kept;
    n_entries = n;
  }
  if (o->list) {
    for (int i = 0; i < n_entries; i++)
      printf("%s  [%s]\n", entries[i].spec,
             entries[i].threads == 1 ? "1 thread" : "all cores");
    return EXIT_OK;
  }
  struct sigaction sa, old_int, old_term;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  int status = suite_run(o, entries, n_entries, trials);
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  return status;
}

/* Whether the suite must stop: an interrupt arrived, or the child was
 * interrupted (exit 130). Says so and how to resume. */
static bool stop_after(int rc, const char *what, const char *db_path) {
  if (!interrupted && rc != EXIT_INTERRUPTED) return false;
  fprintf(stderr,
          "\nbench suite: interrupted during %s; every finished measurement "
          "is in %s: run the same command again to resume\n",
          what, db_path);
  return true;
}

/* The suite itself, with the interrupt handlers in place. */
static int suite_run(const bench_suite_options *o, const suite_entry *entries,
                     int n_entries, long long trials) {
  const char *budget = o->budget, *db_path = o->db, *out_dir = o->out_dir;
  ts_error err;
  ts_error_clear(&err);
  ts_target *host = NULL;
  if (ts_target_host(&host, &err)) {
    cli_error("cannot resolve this machine's target", &err);
    return EXIT_FAIL;
  }
  int cores = ts_target_num_cores(host);
  char target_all[96], target_one[96];
  /* AVX2 on a newer machine: the code for an AVX2 CPU, and the vendor
   * libraries held to their AVX2 kernels (read when each child starts) */
  const char *mcpu = "";
  if (!strcmp(o->isa, "avx2")) {
    mcpu = " -mcpu=x86-64-v3";
    setenv("ONEDNN_MAX_CPU_ISA", "AVX2", 1);
    setenv("DNNL_MAX_CPU_ISA", "AVX2", 1);
    setenv("OPENBLAS_CORETYPE", "Haswell", 1);
  }
  snprintf(target_all, sizeof target_all, "llvm%s -num-cores=%d", mcpu, cores);
  snprintf(target_one, sizeof target_one, "llvm%s -num-cores=1", mcpu);
  ts_target_free(host);

  /* The machine's peaks, probed once per target when the database has none. */
  const char *targets[2] = {target_one, target_all};
  char *probes[2] = {NULL, NULL};
  for (int i = 0; i < 2; i++) {
    probes[i] = target_probe(db_path, targets[i]);
    if (!probes[i]) {
      fprintf(stderr, "bench suite: probing %s ...\n", targets[i]);
      char *argv[] = {"tessera",          "probe", "--target",
                      (char *)targets[i], "--db",  (char *)db_path,
                      "--json",           NULL};
      char *out = NULL;
      int rc = run_self(argv, &out);
      free(out);
      if (stop_after(rc, "the machine probe", db_path)) {
        free(probes[0]);
        return EXIT_INTERRUPTED;
      }
      if (rc == 0) probes[i] = target_probe(db_path, targets[i]);
    }
  }

  row rows[BROAD_MAX > N_SUITE ? BROAD_MAX : N_SUITE];
  memset(rows, 0, sizeof rows);
  char trials_str[32];
  snprintf(trials_str, sizeof trials_str, "%lld", trials);
  for (int i = 0; i < n_entries; i++) {
    const suite_entry *e = &entries[i];
    row *r = &rows[i];
    int threads = e->threads ? e->threads : cores;
    const char *target = e->threads == 1 ? target_one : target_all;
    r->threads = threads;
    r->tessera = r->openblas = r->onednn = r->naive = -1;
    snprintf(r->name, sizeof r->name, "%s", e->spec);
    char job[256];
    snprintf(job, sizeof job, "bench: %s [%dt]", e->spec, threads);
    fprintf(stderr, "\nbench suite %d/%d: %s, %d thread%s, %lld trials\n",
            i + 1, n_entries, e->spec, threads, threads == 1 ? "" : "s",
            trials);
    char *tune_argv[] = {"tessera",    "tune",
                         "--workload", (char *)e->spec,
                         "--target",   (char *)target,
                         "--trials",   trials_str,
                         "--db",       (char *)db_path,
                         "--job",      job,
                         "--json",     "--no-summary-measure",
                         NULL};
    char *out = NULL;
    int rc = run_self(tune_argv, &out);
    if (stop_after(rc, e->spec, db_path)) {
      free(out);
      free(probes[0]);
      free(probes[1]);
      return EXIT_INTERRUPTED;
    }
    cJSON *j = cJSON_Parse(out ? out : "");
    if (rc != 0 || !j) {
      snprintf(r->error, sizeof r->error, "tune failed (exit %d)", rc);
    } else {
      r->trials = (long long)json_num(j, "trials_done");
    }
    cJSON_Delete(j);
    free(out);
    if (r->error[0]) continue;
    char threads_str[16];
    snprintf(threads_str, sizeof threads_str, "%d", threads);
    /* the search's fastest figures re-timed side by side, with the
     * default schedule (its first record), so the row benchmarks the
     * confirmed best and not the luckiest moment of the search */
    char *confirm_argv[] = {"tessera",       "db",           "confirm",
                            (char *)e->spec, "--db",         (char *)db_path,
                            "--target",      (char *)target, "--threads",
                            threads_str,     "--json",       NULL};
    out = NULL;
    rc = run_self(confirm_argv, &out);
    free(out);
    if (stop_after(rc, e->spec, db_path)) {
      free(probes[0]);
      free(probes[1]);
      return EXIT_INTERRUPTED;
    }
    if (rc != 0)
      fprintf(stderr,
              "tessera: warning: %s: the confirmation failed (exit %d); the "
              "row benchmarks the search's fastest record\n",
              e->spec, rc);
    char *bench_argv[] = {"tessera",       "bench",        "--workload",
                          (char *)e->spec, "--db",         (char *)db_path,
                          "--target",      (char *)target, "--threads",
                          threads_str,     "--json",       NULL};
    out = NULL;
    rc = run_self(bench_argv, &out);
    if (stop_after(rc, e->spec, db_path)) {
      free(out);
      free(probes[0]);
      free(probes[1]);
      return EXIT_INTERRUPTED;
    }
    j = cJSON_Parse(out ? out : "");
    if (!j) {
      snprintf(r->error, sizeof r->error, "bench failed (exit %d)", rc);
    } else {
      r->tessera = json_num(j, "tessera_gflops");
      r->openblas = json_num(j, "openblas_gflops");
      r->onednn = json_num(j, "onednn_gflops");
      r->naive = json_num(j, "naive_gflops");
      const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "check");
      snprintf(r->check, sizeof r->check, "%s",
               cJSON_IsString(c) ? c->valuestring : "?");
    }
    cJSON_Delete(j);
    free(out);
    r->peak =
        probed_peak(probes[e->threads == 1 ? 0 : 1], e->spec, threads, cores);
  }

  /* The table, the JSON and the markdown. */
  mkdir(out_dir, 0755);
  char json_path[PATH_MAX], md_path[PATH_MAX];
  snprintf(json_path, sizeof json_path, "%s/latest.json", out_dir);
  snprintf(md_path, sizeof md_path, "%s/latest.md", out_dir);
  FILE *js = fopen(json_path, "w"), *md = fopen(md_path, "w");
  if (js)
    fprintf(js,
            "{\"budget\": \"%s\", \"set\": \"%s\", \"set_seed\": %llu, "
            "\"isa\": \"%s\", \"targets\": [\"%s\", \"%s\"], "
            "\"trials_per_workload\": %lld, \"rows\": [\n",
            budget, o->set, (unsigned long long)o->set_seed, o->isa, target_one,
            target_all, trials);
  if (md) {
    fprintf(md, "| workload | threads | trials | tessera GFLOP/s | %% of peak "
                "| OpenBLAS | "
                "oneDNN | plain C | tessera / best vendor | check |\n");
    fprintf(md,
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  }
  printf("\n%-58s %3s %6s %9s %6s %9s %9s %9s %7s  %s\n", "workload", "thr",
         "trials", "tessera", "%peak", "OpenBLAS", "oneDNN", "plain C", "ratio",
         "check");
  int failures = 0;
  for (int i = 0; i < n_entries; i++) {
    row *r = &rows[i];
    double best = r->openblas > r->onednn ? r->openblas : r->onednn;
    if (best < 0 && r->naive > 0) best = r->naive;
    double ratio = (best > 0 && r->tessera > 0) ? r->tessera / best : -1;
    double pct =
        (r->peak > 0 && r->tessera > 0) ? 100 * r->tessera / r->peak : -1;
    char t[16], p[16], o[16], d[16], n[16], q[16];
    fmt(t, sizeof t, r->tessera);
    fmt(p, sizeof p, pct);
    fmt(o, sizeof o, r->openblas);
    fmt(d, sizeof d, r->onednn);
    fmt(n, sizeof n, r->naive);
    if (ratio < 0)
      snprintf(q, sizeof q, "-");
    else
      snprintf(q, sizeof q, "%.2f", ratio);
    const char *status = r->error[0] ? r->error : r->check;
    if (r->error[0] || strcmp(r->check, "ok")) failures++;
    printf("%-58s %3d %6lld %9s %6s %9s %9s %9s %7s  %s\n", r->name, r->threads,
           r->trials, t, p, o, d, n, q, status);
    if (md)
      fprintf(md, "| %s | %d | %lld | %s | %s | %s | %s | %s | %s | %s |\n",
              r->name, r->threads, r->trials, t, p, o, d, n, q, status);
    if (js) {
      fprintf(js,
              "  {\"workload\": \"%s\", \"threads\": %d, \"trials\": %lld, "
              "\"tessera_gflops\": %s, \"percent_of_peak\": %s, "
              "\"openblas_gflops\": %s, \"onednn_gflops\": %s, "
              "\"naive_gflops\": %s, "
              "\"ratio_to_best_vendor\": %s, \"check\": \"%s\"}%s\n",
              r->name, r->threads, r->trials, r->tessera < 0 ? "null" : t,
              pct < 0 ? "null" : p, r->openblas < 0 ? "null" : o,
              r->onednn < 0 ? "null" : d, r->naive < 0 ? "null" : n,
              ratio < 0 ? "null" : q, status, i + 1 < n_entries ? "," : "");
    }
  }
  if (js) {
    fprintf(js, "]}\n");
    fclose(js);
  }
  if (md) fclose(md);
  printf(
      "\nGFLOP/s measured side by side in one process per row (median of 5 "
      "repeats); ratio = tessera / the best vendor library of the row (plain C "
      "where no library applies); %% of peak against `tessera probe`.\n"
      "written: %s, %s\n",
      json_path, md_path);
  free(probes[0]);
  free(probes[1]);
  return failures ? EXIT_FAIL : EXIT_OK;
}
