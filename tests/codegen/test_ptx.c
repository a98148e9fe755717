/*
 * test_ptx.c — NVPTX code generation: hand-scheduled (thread-bound) GPU
 * programs become PTX for sm_80 and sm_90 with the right launch
 * dimensions, and ptxas from the CUDA toolkit accepts the PTX (skipped with
 * a printed reason when ptxas is absent). Binding errors and CPU-only
 * constructs on a cuda target are refused with a message. The CUDA loader
 * answers "no CUDA driver" on machines without one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/codegen.h"
#include "runtime/runtime.h"

#define GPU_PROGRAMS TS_SOURCE_DIR "/tests/codegen/gpu"

static const char *ptxas_path(void) {
  static const char *const paths[] = {"/usr/local/cuda/bin/ptxas",
                                      "/usr/bin/ptxas"};
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
    if (access(paths[i], X_OK) == 0) return paths[i];
  return NULL;
}

/* Builds `file` for `arch`, checks the launch dims and runs ptxas. */
static void build_ptx(const char *file, const char *arch,
                      const unsigned grid[3], const unsigned block[3]) {
  char path[512], target_str[128];
  snprintf(path, sizeof path, "%s/%s", GPU_PROGRAMS, file);
  snprintf(target_str, sizeof target_str, "cuda -arch=%s", arch);
  ts_func *f = NULL;
  ts_target *t = NULL;
  ts_error err;
  if (ts_func_parse_file(path, &f, &err)) printf("%s\n", err.msg);
  assert_non_null(f);
  assert_int_equal(ts_target_parse(target_str, &t, &err), TS_OK);
  ts_build_result r;
  int rc = ts_build(f, t, NULL, &r, &err);
  if (rc) printf("build %s for %s: %s\n", file, arch, err.msg);
  assert_int_equal(rc, TS_OK);
  assert_int_equal(r.artifact->kind, TS_ARTIFACT_PTX);
  const char *ptx = (const char *)r.artifact->bytes;
  assert_non_null(strstr(ptx, ".entry"));
  char want[64];
  snprintf(want, sizeof want, ".target %s", arch);
  assert_non_null(strstr(ptx, want));
  for (int i = 0; i < 3; i++) {
    assert_int_equal(r.artifact->grid[i], grid[i]);
    assert_int_equal(r.artifact->block[i], block[i]);
  }
  const char *ptxas = ptxas_path();
  if (!ptxas) {
    printf("ptxas check skipped: ptxas not found (install the CUDA toolkit)\n");
  } else {
    char tmpl[] = "/tmp/ts-ptx-XXXXXX";
    int fd = mkstemp(tmpl);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, ptx, r.artifact->n_bytes),
                     (ssize_t)r.artifact->n_bytes);
    close(fd);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s -arch=%s %s -o /dev/null 2>&1", ptxas, arch,
             tmpl);
    int status = system(cmd);
    unlink(tmpl);
    if (status != 0) printf("ptxas rejected %s for %s\n%s\n", file, arch, ptx);
    assert_int_equal(status, 0);
  }
  ts_build_result_clear(&r);
  ts_target_free(t);
  ts_func_free(f);
}

static void test_matmul_ptx(void **state) {
  (void)state;
  const unsigned grid[3] = {8, 8, 1}, block[3] = {16, 16, 1};
  build_ptx("matmul.tir", "sm_80", grid, block);
  build_ptx("matmul.tir", "sm_90", grid, block);
}

static void test_softmax_ptx(void **state) {
  (void)state;
  const unsigned grid[3] = {64, 1, 1}, block[3] = {32, 1, 1};
  build_ptx("softmax.tir", "sm_80", grid, block);
  build_ptx("softmax.tir", "sm_90", grid, block);
}

static int build_text(const char *text, const char *target_str, ts_error *err) {
  ts_func *f = NULL;
  ts_target *t = NULL;
  int rc = ts_func_parse(text, strlen(text), "test", &f, err);
  if (!rc) rc = ts_target_parse(target_str, &t, err);
  ts_build_result r;
  if (!rc) rc = ts_build(f, t, NULL, &r, err);
  if (!rc) ts_build_result_clear(&r);
  ts_target_free(t);
  ts_func_free(f);
  return rc;
}

static void test_refusals(void **state) {
  (void)state;
  ts_error err;
  /* A parallel loop has no meaning on a GPU. */
  const char *par = "func p(A: float32[8]) {\n  for i in range(8) parallel {\n"
                    "    A[i] = float32(1)\n  }\n}\n";
  assert_int_not_equal(build_text(par, "cuda -arch=sm_80", &err), TS_OK);
  assert_non_null(strstr(err.msg, "parallel"));
  /* A thread binding has no meaning on a CPU. */
  const char *thr =
      "func p(A: float32[8]) {\n  for i in range(8) thread(\"threadIdx.x\") {\n"
      "    A[i] = float32(1)\n  }\n}\n";
  assert_int_not_equal(build_text(thr, "llvm", &err), TS_OK);
  assert_non_null(strstr(err.msg, "cuda"));
  /* Too many threads per block for the target. */
  const char *big = "func p(A: float32[4096]) {\n  for i in range(4096) "
                    "thread(\"threadIdx.x\") {\n"
                    "    A[i] = float32(1)\n  }\n}\n";
  assert_int_not_equal(build_text(big, "cuda -arch=sm_80", &err), TS_OK);
  assert_non_null(strstr(err.msg, "threads per block"));
  /* A GPU intrinsic on a CPU target. */
  const char *sync = "func p(A: float32[8]) {\n  evaluate "
                     "call<int32>(\"tessera.cuda.syncthreads\")\n}\n";
  assert_int_not_equal(build_text(sync, "llvm", &err), TS_OK);
  assert_non_null(strstr(err.msg, "tessera.cuda.syncthreads"));
}

static void test_no_driver(void **state) {
  (void)state;
  ts_cuda *c = NULL;
  ts_error err;
  int rc = ts_cuda_open(0, &c, &err);
  if (rc == TS_OK) {
    printf(
        "a CUDA driver is present: the no-driver path is not exercised here\n");
    ts_cuda_close(c);
    return;
  }
  assert_int_equal(rc, TS_EUNSUPPORTED);
  assert_true(strstr(err.msg, "no CUDA driver") || strstr(err.msg, "CUDA"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matmul_ptx),
      cmocka_unit_test(test_softmax_ptx),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_no_driver),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
