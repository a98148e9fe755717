/*
 * test_hardening.c — the command line against the inputs of issue 27,
 * through the real binary: the 50 000-term chain is a clear error (exit 1,
 * no crash) in show, check and tune --tir; a dimension beyond the range
 * says the range; a workload whose buffers exceed the memory limit, or
 * whose operations exceed the FLOP limit, is refused before anything is
 * allocated, naming the size, the limit and the option that raises it; and
 * a tuning job none of whose trials measured ok exits 1. The library's
 * side of admission (ts_workload_bytes, ts_workload_admit) is checked too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tir/tir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[128];

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/ts-hardening-XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  return system(cmd) == 0 ? 0 : -1;
}

/* Runs `tessera ARGS` (stdout discarded); returns the exit status (128 +
 * signal when killed) and the first 4 KiB of its stderr in err. */
static int tessera(const char *args, char *err, size_t size) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s/tessera %s >/dev/null 2>%s/stderr",
           TS_BINARY_DIR, args, dir);
  int st = system(cmd);
  snprintf(cmd, sizeof cmd, "%s/stderr", dir);
  FILE *f = fopen(cmd, "r");
  size_t n = f ? fread(err, 1, size - 1, f) : 0;
  if (f) fclose(f);
  err[n] = 0;
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void test_chain_in_every_command(void **state) {
  (void)state;
  static char err[4096];
  char path[256], args[512];
  snprintf(path, sizeof path, "%s/chain.tir", dir);
  size_t cap = 50000 * 9 + 512;
  char *text = malloc(cap), *p = text;
  p += sprintf(p, "func elementwise(A: float32[8], B: float32[8], "
                  "Y: float32[8]) {\n"
                  "  block root() {\n"
                  "    reads(A[0 +: 8], B[0 +: 8])\n"
                  "    writes(Y[0 +: 8])\n"
                  "    for i in range(8) {\n"
                  "      block Y(vi: spatial(8) = i) {\n"
                  "        reads(A[vi], B[vi])\n"
                  "        writes(Y[vi])\n"
                  "        Y[vi] = ");
  for (int k = 0; k < 50000; k++)
    p += sprintf(p, "A[vi]%s", k + 1 < 50000 ? " + " : "\n");
  sprintf(p, "      }\n    }\n  }\n}\n");
  write_file(path, text);
  free(text);
  const char *cmds[] = {"show --tir", "check --tir", "tune --trials 1 --tir"};
  for (int i = 0; i < 3; i++) {
    snprintf(args, sizeof args, "%s %s --db %s/t.db", cmds[i], path, dir);
    if (i < 2) snprintf(args, sizeof args, "%s %s", cmds[i], path);
    int st = tessera(args, err, sizeof err);
    if (st != 1) fail_msg("%s: exit %d: %s", cmds[i], st, err);
    assert_non_null(strstr(err, "deeper than 256 levels"));
    assert_non_null(strstr(err, "chain.tir:9:"));
  }
}

static void test_range_says_the_range(void **state) {
  (void)state;
  static char err[4096];
  assert_int_equal(tessera("show --workload \"matmul M=99999999999 N=8 K=8\"",
                           err, sizeof err),
                   1);
  assert_non_null(strstr(err, "must be in 1..2147483647"));
  assert_null(strstr(err, "at least"));
}

static void test_oversized_refused(void **state) {
  (void)state;
  static char err[4096];
  /* 25.8 GB of buffers: over a 1 GiB limit here, over half of the memory
   * of any machine this runs on by default. */
  assert_int_equal(
      tessera("bench --workload \"matmul M=46340 N=46340 K=46340\" "
              "--max-memory-mb 1024",
              err, sizeof err),
      1);
  assert_non_null(strstr(err, "25.8 GB"));
  assert_non_null(strstr(err, "1.1 GB"));
  assert_non_null(strstr(err, "--max-memory-mb"));
  char args[512];
  snprintf(args, sizeof args,
           "tune --workload \"matmul M=20000 N=20000 K=20000\" --db %s/t.db",
           dir);
  assert_int_equal(tessera(args, err, sizeof err), 1);
  assert_non_null(strstr(err, "16000 GFLOP"));
  assert_non_null(strstr(err, "2000 GFLOP"));
  assert_non_null(strstr(err, "--max-gflop"));
}

/* Every trial of this kernel outlasts a 100 ms limit (10^11 additions:
 * about half a second on a 2-core AVX-512 machine even when a schedule
 * spreads them over every vector lane and thread; 10^9 did not), so the
 * job measures nothing ok. The unscheduled reference that checks the
 * outputs has a limit of its own (a minute) and takes a few seconds. */
static const char SLOW_TIR[] =
    "func slow(A: float32[1], Y: float32[1]) {\n"
    "  block root() {\n"
    "    reads(Y[0 +: 1], A[0 +: 1])\n"
    "    writes(Y[0 +: 1])\n"
    "    for i in range(1) {\n"
    "      for k in range(100000000000) {\n"
    "        block Y(vi: spatial(1) = i, vk: reduce(100000000000) = k) {\n"
    "          reads(Y[vi], A[vi])\n"
    "          writes(Y[vi])\n"
    "          init {\n"
    "            Y[vi] = float32(0)\n"
    "          }\n"
    "          Y[vi] = Y[vi] + A[vi]\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

static void test_tune_without_success_fails(void **state) {
  (void)state;
  static char err[4096];
  char path[256], args[1024];
  snprintf(path, sizeof path, "%s/slow.tir", dir);
  write_file(path, SLOW_TIR);
  snprintf(args, sizeof args,
           "tune --tir %s --trials 4 --batch 4 --timeout-ms 100 "
           "--no-summary-measure --quiet --db %s/slow.db",
           path, dir);
  int st = tessera(args, err, sizeof err);
  if (st != 1) fail_msg("exit %d: %s", st, err);
  assert_non_null(strstr(err, "none of the job's 4 trials measured ok"));
}

static void test_admission_library(void **state) {
  (void)state;
  ts_workload *w = NULL;
  ts_error err;
  ts_error_clear(&err);
  assert_int_equal(ts_workload_from_spec("matmul M=64 N=32 K=16", &w, &err),
                   TS_OK);
  assert_int_equal(ts_workload_bytes(w), (64 * 16 + 16 * 32 + 64 * 32) * 4);
  ts_workload_limits lim = {0};
  assert_int_equal(ts_workload_admit(w, &lim, &err), TS_OK);
  lim.max_bytes = 999;
  lim.bytes_flag = "--max-memory-mb N";
  assert_int_equal(ts_workload_admit(w, &lim, &err), TS_ERANGE);
  assert_non_null(strstr(err.msg, "14.3 kB"));
  assert_non_null(strstr(err.msg, "999 bytes"));
  assert_non_null(strstr(err.msg, "--max-memory-mb N"));
  lim.max_bytes = 0;
  lim.max_flops = 1000;
  assert_int_equal(ts_workload_admit(w, &lim, &err), TS_ERANGE);
  ts_workload_free(w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_admission_library),
      cmocka_unit_test(test_range_says_the_range),
      cmocka_unit_test(test_chain_in_every_command),
      cmocka_unit_test(test_oversized_refused),
      cmocka_unit_test(test_tune_without_success_fails),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
