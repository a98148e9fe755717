/*
 * test_build_cache.c — the process's cache of built kernels: a second
 * build of the same function for the same machine takes the first one's
 * bytes (no optimization, no code generation) and still computes what the
 * interpreter does; another machine, another function or a build that
 * keeps its IR is built anew; the size limit evicts the least recently
 * used entries, and TS_BUILD_CACHE_MB=0 turns the cache off.
 */
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_second_build_hits, setup),
      cmocka_unit_test_setup(test_other_machine_or_function_misses, setup),
      cmocka_unit_test_setup(test_limit_and_off, setup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
