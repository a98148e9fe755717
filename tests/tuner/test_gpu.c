/*
 * test_gpu.c — GPU design spaces (cuda targets; no device needed). The
 * spaces of a matmul (SSSRRSRS tiling with and without shared-memory read
 * caches, and on sm_80 the mma m16n8k16 variant for fp16 inputs), a conv2d,
 * a softmax (cross-thread reductions) and an elementwise op (auto-bind)
 * give candidates that pass the GPU verifier (threads, shared memory,
 * registers within the target's limits), compile to PTX with every block
 * bound to threads, and are accepted by ptxas when the CUDA toolkit is
 * installed (skipped with a printed reason otherwise). fp32 matmul gets no
 * tensor-core variant, and sm_75 gets none at all.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <unistd.h>

#include "util.h"

#define OK(x) assert_int_equal((x), TS_OK)

static const char *ptxas_path(void) {
  static const char *const paths[] = {"/usr/local/cuda/bin/ptxas",
                                      "/usr/bin/ptxas"};
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
    if (access(paths[i], X_OK) == 0) return paths[i];
  return NULL;
}

static bool has_intrin(const ts_design_space *s, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (!strcmp(s[i].intrin, name)) return true;
  return false;
}

/* Checks up to `want` verified candidates of every space: PTX + ptxas. */
static void check_gpu(const char *spec, const char *arch, int want,
                      int *n_spaces, char names[][256]) {
  ts_workload *w = tu_workload(spec);
  assert_non_null(w);
  char target_str[64];
  snprintf(target_str, sizeof target_str, "cuda -arch=%s", arch);
  ts_target *t = NULL;
  ts_error err;
  OK(ts_target_parse(target_str, &t, &err));
  ts_design_space *s = NULL;
  int n = 0;
  int rc = ts_space_generate(w->func, t, NULL, &s, &n, &err);
  if (rc) printf("%s: %s\n", spec, err.msg);
  OK(rc);
  const char *ptxas = ptxas_path();
  for (int i = 0; i < n; i++) {
    if (names) snprintf(names[i], 256, "%s|%s", s[i].name, s[i].intrin);
    int good = 0;
    for (int k = 0; k < 300 && good < want; k++) {
      ts_candidate c;
      if (ts_candidate_sample(&s[i], i, w->func, t, 1000 + (uint64_t)k, &c,
                              &err))
        continue; /* over a limit: the verifier dropped it */
      ts_gpu_usage u;
      OK(ts_verify_gpu(ts_sched_func(c.sched), t, &u, &err));
      assert_true(u.threads_per_block >= 1 &&
                  u.threads_per_block <= ts_target_max_threads_per_block(t));
      assert_true(u.shared_bytes <= ts_target_max_shared_memory_per_block(t));
      ts_build_result br;
      rc = ts_build(ts_sched_func(c.sched), t, NULL, &br, &err);
      if (rc) {
        char *text = ts_func_print(ts_sched_func(c.sched));
        printf("%s space %d: build failed: %s\n%s\n", spec, i, err.msg, text);
        free(text);
      }
      OK(rc);
      assert_int_equal(br.artifact->kind, TS_ARTIFACT_PTX);
      assert_true(br.artifact->block[0] >= 1);
      if (ptxas) {
        char tmpl[] = "/tmp/ts-tuner-ptx-XXXXXX";
        int fd = mkstemp(tmpl);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, br.artifact->bytes, br.artifact->n_bytes),
                         (ssize_t)br.artifact->n_bytes);
        close(fd);
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "%s -arch=%s %s -o /dev/null 2>&1", ptxas,
                 arch, tmpl);
        int st = system(cmd);
        unlink(tmpl);
        if (st) printf("ptxas rejected a candidate of %s space %d\n", spec, i);
        assert_int_equal(st, 0);
      }
      ts_build_result_clear(&br);
      ts_candidate_clear(&c);
      good++;
    }
    if (good < want)
      printf("%s: space %d (%s): only %d verified candidates\n", spec, i,
             s[i].name, good);
    assert_int_equal(good, want);
  }
  if (!ptxas) printf("ptxas check skipped: ptxas not found\n");
  if (n_spaces) *n_spaces = n;
  ts_design_spaces_free(s, n);
  ts_target_free(t);
  ts_workload_free(w);
}

static void test_matmul(void **state) {
  (void)state;
  int n = 0;
  char names[16][256];
  check_gpu("matmul M=256 N=256 K=256", "sm_80", 2, &n, names);
  assert_int_equal(n, 2); /* with and without shared read caches */
  for (int i = 0; i < n; i++) assert_null(strstr(names[i], "mma"));
}

static void test_tensor_core_variant(void **state) {
  (void)state;
  ts_workload *w = tu_workload("matmul M=128 N=128 K=128 dtype=float16");
  ts_error err;
  const char *arch[2] = {"cuda -arch=sm_80", "cuda -arch=sm_75"};
  for (int a = 0; a < 2; a++) {
    ts_target *t = NULL;
    OK(ts_target_parse(arch[a], &t, &err));
    ts_design_space *s = NULL;
    int n = 0;
    OK(ts_space_generate(w->func, t, NULL, &s, &n, &err));
    assert_int_equal(has_intrin(s, n, "mma_m16n8k16_f16"), a == 0);
    ts_design_spaces_free(s, n);
    ts_target_free(t);
  }
  ts_workload_free(w);
  int n = 0;
  char names[16][256];
  check_gpu("matmul M=128 N=128 K=128 dtype=float16", "sm_80", 2, &n, names);
  bool mma = false;
  for (int i = 0; i < n; i++) mma |= strstr(names[i], "mma_m16n8k16_f16") != 0;
  assert_true(mma);
}

static void test_other_workloads(void **state) {
  (void)state;
  int n = 0;
  char names[16][256];
  check_gpu("softmax N=64 D=1024", "sm_80", 2, &n, names);
  bool cross = false;
  for (int i = 0; i < n; i++) cross |= strstr(names[i], "cross-thread") != 0;
  assert_true(cross);
  check_gpu("elementwise op=gelu shape=128x256", "sm_80", 2, NULL, NULL);
  check_gpu("conv2d_nhwc N=1 H=14 W=14 CI=32 CO=32 KH=3 KW=3 pad=1", "sm_80", 1,
            NULL, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matmul),
      cmocka_unit_test(test_tensor_core_variant),
      cmocka_unit_test(test_other_workloads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
