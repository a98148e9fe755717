/*
 * test_cuda.c — the CUDA driver loader where there may be no driver: every
 * entry point that reaches the driver answers TS_EUNSUPPORTED with "no CUDA
 * driver (libcuda.so.1 not found)" (or "built without CUDA headers"), never
 * crashes, and the handle-taking entry points refuse a missing handle. Where
 * a driver and a device exist, the device is opened and described instead.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "runtime/runtime.h"

static const char *const no_driver = "no CUDA driver (libcuda.so.1 not found)";

static bool driver_present(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h) dlclose(h);
  return h != NULL;
}

/* The answer of an unavailable driver: exactly the missing-library message
 * in a build with the CUDA headers (TS_HAVE_CUDA_H comes with the runtime
 * library), the missing-headers one otherwise. */
static void expect_unavailable(int rc, const ts_error *err) {
  assert_int_equal(rc, TS_EUNSUPPORTED);
#ifdef TS_HAVE_CUDA_H
  assert_string_equal(err->msg, no_driver);
#else
  assert_non_null(strstr(err->msg, "built without CUDA headers"));
#endif
}

static void test_no_driver(void **state) {
  (void)state;
  if (driver_present()) {
    printf("  skipped: a CUDA driver is installed on this machine\n");
    skip();
  }
  ts_error err;
  for (int round = 0; round < 3; round++) { /* repeated calls stay clean */
    int count = -1;
    ts_error_clear(&err);
    expect_unavailable(ts_cuda_device_count(&count, &err), &err);
    assert_int_equal(count, -1);
    printf("  device count: %s\n", err.msg);

    ts_cuda *c = NULL;
    ts_error_clear(&err);
    expect_unavailable(ts_cuda_open(0, &c, &err), &err);
    assert_null(c);
    ts_error_clear(&err);
    expect_unavailable(ts_cuda_open(3, &c, &err), &err);
    assert_null(c);
  }
  /* Cleanup functions accept NULL. */
  ts_cuda_close(NULL);
  ts_cuda_module_unload(NULL);
  ts_cuda_free(NULL, 0);
}

static void test_null_handles(void **state) {
  (void)state;
  ts_error err;
  ts_cuda_device_info info;
  ts_cuda_module *m = NULL;
  ts_cuda_function *f = NULL;
  uint64_t p = 0;
  char host[16];
  ts_cuda_dims dims = {{1, 1, 1}, {32, 1, 1}, 0};
  ts_eval_config cfg = ts_eval_config_default();
  double seconds[3];
  int rcs[] = {
      ts_cuda_device_info_get(NULL, &info, &err),
      ts_cuda_module_load(NULL, "// ptx", &m, &err),
      ts_cuda_module_function(NULL, "k", &f, &err),
      ts_cuda_launch(NULL, NULL, &dims, NULL, &err),
      ts_cuda_synchronize(NULL, &err),
      ts_cuda_alloc(NULL, 16, &p, &err),
      ts_cuda_copy_to_device(NULL, 0, host, sizeof host, &err),
      ts_cuda_copy_to_host(NULL, host, 0, sizeof host, &err),
      ts_cuda_eval(NULL, &cfg, NULL, &dims, NULL, seconds, NULL, &err),
  };
  for (size_t i = 0; i < sizeof rcs / sizeof rcs[0]; i++)
    assert_true(rcs[i] == TS_EINVAL || rcs[i] == TS_EUNSUPPORTED);
  assert_null(m);
  assert_null(f);
  assert_int_equal(p, 0);
}

static void test_with_driver(void **state) {
  (void)state;
  if (!driver_present()) {
    printf("  skipped: no CUDA driver (libcuda.so.1 not found)\n");
    skip();
  }
  int count = 0;
  ts_error err;
  ts_error_clear(&err);
  int rc = ts_cuda_device_count(&count, &err);
  if (rc != TS_OK || count == 0) {
    printf("  skipped: driver present but no usable device (%s)\n", err.msg);
    skip();
  }
  ts_cuda *c = NULL;
  assert_int_equal(ts_cuda_open(0, &c, &err), TS_OK);
  ts_cuda_device_info info;
  assert_int_equal(ts_cuda_device_info_get(c, &info, &err), TS_OK);
  printf("  device 0: %s sm_%d%d\n", info.name, info.sm_major, info.sm_minor);
  assert_true(info.max_threads_per_block > 0);
  assert_true(info.total_memory > 0);
  uint64_t p = 0;
  assert_int_equal(ts_cuda_alloc(c, 64, &p, &err), TS_OK);
  char in[64], out[64];
  for (int i = 0; i < 64; i++) in[i] = (char)i;
  assert_int_equal(ts_cuda_copy_to_device(c, p, in, 64, &err), TS_OK);
  assert_int_equal(ts_cuda_copy_to_host(c, out, p, 64, &err), TS_OK);
  assert_memory_equal(in, out, 64);
  ts_cuda_free(c, p);
  ts_cuda_module *m = NULL;
  ts_error_clear(&err);
  assert_int_equal(ts_cuda_module_load(c, "this is not ptx", &m, &err),
                   TS_EINVAL);
  assert_non_null(strstr(err.msg, "JIT error log"));
  ts_cuda_close(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_no_driver),
      cmocka_unit_test(test_null_handles),
      cmocka_unit_test(test_with_driver),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
