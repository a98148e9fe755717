/*
 * test_build_cache.c — the process's cache of built kernels: a second
 * build of the same function for the same machine takes the first one's
 * bytes (no optimization, no code generation) and still computes what the
 * interpreter does; another machine, another function or a build that
 * keeps its IR is built anew; the size limit evicts the least recently
 * used entries, and TS_BUILD_CACHE_MB=0 turns the cache off. With
 * TS_BUILD_CACHE_DIR, a build another process made (here: the memory level
 * cleared) comes from the folder; a damaged file or one holding another key
 * is a miss and is rebuilt; the folder is trimmed to its limit.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "check.h"

static ts_workload *workload(const char *spec) {
  ts_workload *w = NULL;
  ts_error err;
  assert_int_equal(ts_workload_from_spec(spec, &w, &err), TS_OK);
  return w;
}

static int setup(void **state) {
  (void)state;
  unsetenv("TS_BUILD_CACHE_MB");
  unsetenv("TS_BUILD_CACHE_DIR");
  unsetenv("TS_BUILD_CACHE_DIR_MB");
  ts_build_cache_clear();
  return 0;
}

static void build(const ts_func *f, const ts_target *t, ts_build_result *br) {
  ts_error err;
  ts_build_options o = ts_build_defaults();
  assert_int_equal(ts_build(f, t, &o, br, &err), TS_OK);
}

static void test_second_build_hits(void **state) {
  (void)state;
  ts_workload *w = workload("matmul M=24 N=40 K=16 dtype=float32");
  ts_error err;
  ts_target *host = NULL;
  assert_int_equal(ts_target_host(&host, &err), TS_OK);
  ts_build_result a = {0}, b = {0};
  build(w->func, host, &a);
  ts_build_cache_stats s = ts_build_cache_get_stats();
  assert_int_equal(s.hits, 0);
  assert_int_equal(s.misses, 1);
  assert_int_equal(s.entries, 1);
  build(w->func, host, &b);
  s = ts_build_cache_get_stats();
  assert_int_equal(s.hits, 1);
  assert_true(b.opt_ms == 0 && b.codegen_ms == 0);
  assert_true(a.artifact != b.artifact); /* its own artifact... */
  assert_int_equal(a.artifact->n_bytes, b.artifact->n_bytes); /* same code */
  assert_memory_equal(a.artifact->bytes, b.artifact->bytes,
                      a.artifact->n_bytes);
  assert_string_equal(a.artifact->entry, b.artifact->entry);
  assert_int_equal(b.artifact->n_args, 3);
  assert_string_equal(a.artifact->args[2].name, b.artifact->args[2].name);
  ts_build_result_clear(&a);
  ts_build_result_clear(&b);
  /* the cached code runs and matches the interpreter */
  long long hits = s.hits;
  assert_int_equal(check_compiled(w->func, NULL, 2, 5, &err), TS_OK);
  assert_int_equal(check_compiled(w->func, NULL, 2, 6, &err), TS_OK);
  assert_true(ts_build_cache_get_stats().hits >= hits + 1);
  ts_target_free(host);
  ts_workload_free(w);
}

static void test_other_machine_or_function_misses(void **state) {
  (void)state;
  ts_workload *w = workload("matmul M=24 N=40 K=16 dtype=float32");
  ts_workload *w2 = workload("matmul M=24 N=40 K=17 dtype=float32");
  ts_error err;
  ts_target *host = NULL, *sse = NULL;
  assert_int_equal(ts_target_host(&host, &err), TS_OK);
  assert_int_equal(ts_target_parse("llvm -mcpu=x86-64", &sse, &err), TS_OK);
  ts_build_result r = {0};
  build(w->func, host, &r);
  ts_build_result_clear(&r);
  build(w->func, sse, &r); /* another machine */
  ts_build_result_clear(&r);
  build(w2->func, host, &r); /* another function */
  ts_build_result_clear(&r);
  ts_build_cache_stats s = ts_build_cache_get_stats();
  assert_int_equal(s.hits, 0);
  assert_int_equal(s.misses, 3);
  /* a build that keeps its IR or assembly neither reads nor fills it */
  ts_build_options o = ts_build_defaults();
  o.keep_llvm_ir = true;
  assert_int_equal(ts_build(w->func, host, &o, &r, &err), TS_OK);
  assert_non_null(r.llvm_ir);
  assert_true(r.opt_ms > 0);
  ts_build_result_clear(&r);
  s = ts_build_cache_get_stats();
  assert_int_equal(s.hits + s.misses, 3);
  ts_target_free(host);
  ts_target_free(sse);
  ts_workload_free(w);
  ts_workload_free(w2);
}

static void test_limit_and_off(void **state) {
  (void)state;
  ts_error err;
  ts_target *host = NULL;
  assert_int_equal(ts_target_host(&host, &err), TS_OK);
  ts_workload *w[6];
  char spec[96];
  for (int i = 0; i < 6; i++) {
    snprintf(spec, sizeof spec, "matmul M=16 N=16 K=%d dtype=float32", 8 + i);
    w[i] = workload(spec);
  }
  /* a limit of about four entries: building six in turn keeps the last
   * four, the least recently used leaving first */
  ts_build_result r = {0};
  size_t biggest = 0;
  for (int i = 0; i < 6; i++) {
    ts_build_cache_clear();
    build(w[i]->func, host, &r);
    ts_build_result_clear(&r);
    size_t b = ts_build_cache_get_stats().bytes;
    if (b > biggest) biggest = b;
  }
  assert_true(biggest > 0);
  char mb[64];
  snprintf(mb, sizeof mb, "%.9f", 4.5 * (double)biggest / (1 << 20));
  setenv("TS_BUILD_CACHE_MB", mb, 1);
  ts_build_cache_clear();
  for (int i = 0; i < 6; i++) {
    build(w[i]->func, host, &r);
    ts_build_result_clear(&r);
    assert_true(ts_build_cache_get_stats().bytes <= 4.5 * (double)biggest);
  }
  ts_build_cache_stats s = ts_build_cache_get_stats();
  assert_true(s.entries >= 3 && s.entries <= 4);
  build(w[5]->func, host, &r); /* the newest: kept */
  ts_build_result_clear(&r);
  assert_int_equal(ts_build_cache_get_stats().hits, 1);
  build(w[0]->func, host, &r); /* the oldest: gone */
  ts_build_result_clear(&r);
  assert_int_equal(ts_build_cache_get_stats().hits, 1);

  /* off */
  setenv("TS_BUILD_CACHE_MB", "0", 1);
  ts_build_cache_clear();
  for (int i = 0; i < 2; i++) {
    build(w[0]->func, host, &r);
    assert_true(r.opt_ms > 0);
    ts_build_result_clear(&r);
  }
  s = ts_build_cache_get_stats();
  assert_int_equal(s.hits, 0);
  assert_int_equal(s.entries, 0);
  unsetenv("TS_BUILD_CACHE_MB");
  ts_build_cache_clear();
  for (int i = 0; i < 6; i++) ts_workload_free(w[i]);
  ts_target_free(host);
}

/* the cache files in dir (names into names[], up to max) */
static int cache_files(const char *dir, char names[][512], int max) {
  DIR *d = opendir(dir);
  int n = 0;
  if (!d) return 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    size_t l = strlen(de->d_name);
    if (l > 4 && !strcmp(de->d_name + l - 4, ".tsk")) {
      if (n < max) snprintf(names[n], 512, "%s/%s", dir, de->d_name);
      n++;
    }
  }
  closedir(d);
  return n;
}

/* A build in a fresh process that finds no usable file: a miss, and the
 * same bytes as the first build (want). */
static void rebuilt(const ts_func *f, const ts_target *t,
                    const ts_artifact *want) {
  ts_build_result b = {0};
  ts_build_cache_clear();
  build(f, t, &b);
  ts_build_cache_stats s = ts_build_cache_get_stats();
  assert_int_equal(s.disk_hits, 0);
  assert_int_equal(s.misses, 1);
  assert_memory_equal(want->bytes, b.artifact->bytes, want->n_bytes);
  ts_build_result_clear(&b);
}

static void test_disk_level(void **state) {
  (void)state;
  char dir[] = "/tmp/ts-build-cache-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char sub[600];
  snprintf(sub, sizeof sub, "%s/cache/kernels", dir); /* made by a put */
  setenv("TS_BUILD_CACHE_DIR", sub, 1);
  ts_build_cache_clear();
  ts_workload *w = workload("matmul M=24 N=40 K=16 dtype=float32");
  ts_workload *w2 = workload("matmul M=24 N=40 K=18 dtype=float32");
  ts_error err;
  ts_target *host = NULL;
  assert_int_equal(ts_target_host(&host, &err), TS_OK);
  ts_build_result a = {0}, b = {0};
  build(w->func, host, &a);
  char files[4][512];
  assert_int_equal(cache_files(sub, files, 4), 1);
  /* another process: nothing in memory, the file is found */
  ts_build_cache_clear();
  build(w->func, host, &b);
  ts_build_cache_stats s = ts_build_cache_get_stats();
  assert_int_equal(s.disk_hits, 1);
  assert_int_equal(s.misses, 0);
  assert_true(b.opt_ms == 0 && b.codegen_ms == 0);
  assert_int_equal(a.artifact->n_bytes, b.artifact->n_bytes);
  assert_memory_equal(a.artifact->bytes, b.artifact->bytes,
                      a.artifact->n_bytes);
  assert_string_equal(b.artifact->entry, a.artifact->entry);
  assert_int_equal(b.artifact->n_args, 3);
  ts_build_result_clear(&b);
  /* the kernel from the folder runs and matches the interpreter */
  ts_build_cache_clear();
  assert_int_equal(check_compiled(w->func, NULL, 2, 7, &err), TS_OK);
  assert_true(ts_build_cache_get_stats().disk_hits >= 1);

  /* a cut file and a file holding another module: misses, rebuilt */
  FILE *f = fopen(files[0], "r+b");
  assert_non_null(f);
  assert_int_equal(ftruncate(fileno(f), 100), 0);
  fclose(f);
  rebuilt(w->func, host, a.artifact);
  build(w2->func, host, &b); /* a second file */
  ts_build_result_clear(&b);
  char two[4][512];
  assert_int_equal(cache_files(sub, two, 4), 2);
  const char *other = strcmp(two[0], files[0]) ? two[0] : two[1];
  assert_int_equal(rename(other, files[0]), 0); /* w2's bytes under w's name */
  rebuilt(w->func, host, a.artifact);

  /* the limit: a folder of a few kilobytes keeps at most a file or two
   * (each file is over an eighth of it: trimmed after every write) */
  setenv("TS_BUILD_CACHE_DIR_MB", "0.002", 1);
  ts_build_cache_clear();
  for (int i = 0; i < 4; i++) {
    char spec[96];
    snprintf(spec, sizeof spec, "matmul M=8 N=8 K=%d dtype=float32", 1 + i);
    ts_workload *wi = workload(spec);
    build(wi->func, host, &b);
    ts_build_result_clear(&b);
    ts_workload_free(wi);
  }
  assert_true(cache_files(sub, two, 4) <= 2);

  ts_build_result_clear(&a);
  char cmd[700];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
  unsetenv("TS_BUILD_CACHE_DIR");
  unsetenv("TS_BUILD_CACHE_DIR_MB");
  ts_build_cache_clear();
  ts_target_free(host);
  ts_workload_free(w);
  ts_workload_free(w2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_second_build_hits, setup),
      cmocka_unit_test_setup(test_other_machine_or_function_misses, setup),
      cmocka_unit_test_setup(test_limit_and_off, setup),
      cmocka_unit_test_setup(test_disk_level, setup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
