/*
 * test_cpu.c — CPU feature queries by cpuid agree with the flags Linux
 * reports in /proc/cpuinfo, unknown names are refused, the AMX permission
 * request answers consistently (granted with AMX, a clear refusal without),
 * and the last-level cache size is plausible.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"

/* The "flags" line of the first processor in /proc/cpuinfo, or "". */
static void read_flags(char *buf, size_t size) {
  buf[0] = '\0';
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char *line = NULL;
  size_t cap = 0;
  while (getline(&line, &cap, f) > 0)
    if (strncmp(line, "flags", 5) == 0) {
      char *colon = strchr(line, ':');
      snprintf(buf, size, " %s ", colon ? colon + 1 : "");
      char *nl = strchr(buf, '\n');
      if (nl) strcpy(nl, " ");
      break;
    }
  free(line);
  fclose(f);
}

static void test_features_match_cpuinfo(void **state) {
  (void)state;
  static char flags[16384];
  read_flags(flags, sizeof flags);
  if (!flags[0]) {
    printf("  skipped: /proc/cpuinfo has no flags line\n");
    skip();
  }
  const char *map[][2] = {
      {"sse4.2", "sse4_2"},
      {"avx", "avx"},
      {"fma", "fma"},
      {"f16c", "f16c"},
      {"avx2", "avx2"},
      {"avx512f", "avx512f"},
      {"avx512dq", "avx512dq"},
      {"avx512cd", "avx512cd"},
      {"avx512bw", "avx512bw"},
      {"avx512vl", "avx512vl"},
      {"avx512vnni", "avx512_vnni"},
      {"avx512bf16", "avx512_bf16"},
      {"avx512fp16", "avx512_fp16"},
      {"avxvnni", "avx_vnni"},
      {"amx-tile", "amx_tile"},
      {"amx-bf16", "amx_bf16"},
      {"amx-int8", "amx_int8"},
      {"amx-fp16", "amx_fp16"},
  };
  size_t n_names = 0;
  while (ts_rt_cpu_feature_names()[n_names]) n_names++;
  assert_int_equal(n_names, sizeof map / sizeof map[0]);
  printf("  cpuid:");
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
    char key[64];
    snprintf(key, sizeof key, " %s ", map[i][1]);
    int want = strstr(flags, key) != NULL;
    int got = ts_rt_cpu_has(map[i][0]);
    printf(" %s=%d", map[i][0], got);
    if (got != want)
      fprintf(stderr, "\n%s: cpuid says %d, /proc/cpuinfo %d\n", map[i][0], got,
              want);
    assert_int_equal(got, want);
  }
  printf("\n");
  for (size_t i = 0; i < n_names; i++) {
    int r = ts_rt_cpu_has(ts_rt_cpu_feature_names()[i]);
    assert_true(r == 0 || r == 1);
  }
  assert_int_equal(ts_rt_cpu_has("avx513"), TS_EINVAL);
  assert_int_equal(ts_rt_cpu_has(""), TS_EINVAL);
  assert_int_equal(ts_rt_cpu_has(NULL), TS_EINVAL);
}

static void test_amx_permission(void **state) {
  (void)state;
  ts_error err;
  ts_error_clear(&err);
  int rc = ts_rt_enable_amx(&err);
  for (int i = 0; i < 3; i++) assert_int_equal(ts_rt_enable_amx(NULL), rc);
  if (ts_rt_cpu_has("amx-tile") == 1) {
    /* With AMX the request is granted, or refused with the reason. */
    if (rc != TS_OK) {
      assert_int_equal(rc, TS_EUNSUPPORTED);
      assert_non_null(strstr(err.msg, "refused"));
    }
    printf("  AMX permission: %s\n", rc == TS_OK ? "granted" : err.msg);
  } else {
    assert_int_equal(rc, TS_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "does not report amx-tile"));
    printf("  AMX permission request skipped: this CPU has no AMX (%s)\n",
           err.msg);
  }
}

static void test_llc(void **state) {
  (void)state;
  size_t llc = ts_rt_llc_bytes();
  printf("  last-level cache: %zu KiB\n", llc >> 10);
  assert_true(llc >= 256 * 1024);
  assert_true(llc <= (size_t)4 << 30);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_features_match_cpuinfo),
      cmocka_unit_test(test_amx_permission),
      cmocka_unit_test(test_llc),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
