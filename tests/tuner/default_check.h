/*
 * default_check.h — helpers of the default-schedule tests: the host and
 * AVX2 targets, a workload from its spec, and check_default (schedule
 * twice, compare, build and run against the interpreter).
 */
#ifndef TS_TESTS_TUNER_DEFAULT_CHECK_H
#define TS_TESTS_TUNER_DEFAULT_CHECK_H

#include "../codegen/check.h"
#include "tuner/tuner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Under the sanitizers, the interpreter runs about 20 times slower than
 * in the normal build, while the kernels themselves are not instrumented
 * (LLVM compiles them, not the sanitized compiler): a large workload's run
 * there checks no more of tessera's own C code than a small one's. So the
 * sanitizer build compiles every default schedule but runs only those up
 * to SANITIZED_RUN_FLOPS against the interpreter; the normal build runs
 * them all. (tuner_test_default_tiles went from 163 s to 68 s there, on 2
 * cores.) */
#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED_RUN_FLOPS 3.2e7
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED_RUN_FLOPS 3.2e7
#endif
#endif

static inline bool default_check_runs(const ts_func *f) {
#ifdef SANITIZED_RUN_FLOPS
  return ts_func_flops(f) <= SANITIZED_RUN_FLOPS;
#else
  (void)f;
  return true;
#endif
}

static inline ts_target *host(void) {
  ts_target *t;
  ts_error err;
  if (ts_target_host(&t, &err)) fail_msg("host target: %s", err.msg);
  return t;
}

/* Default-schedules f, builds and runs it against the interpreter. Returns
 * the printed trace (caller frees). */
/* The structural expectations below are the AVX2 register budget's (16
 * vectors of 8 floats): an AVX-512 host draws other tiles (48 columns are
 * one panel of 3 vectors there), so the shapes are scheduled for AVX2,
 * which every x86-64-v3 host runs, whatever CPU the tests run on. */
static inline ts_target *avx2_target(void) {
  ts_target *t;
  ts_error err;
  if (ts_rt_cpu_has("avx2") != 1) return host();
  if (ts_target_parse("llvm -mcpu=x86-64-v3", &t, &err))
    fail_msg("AVX2 target: %s", err.msg);
  return t;
}

static inline char *check_default(const ts_func *f, const ts_target *t,
                                  const char *what) {
  ts_sched *s = NULL, *s2 = NULL;
  ts_error err;
  if (ts_default_schedule(f, t, &s, &err))
    fail_msg("%s: default schedule: %s", what, err.msg);
  if (ts_default_schedule(f, t, &s2, &err))
    fail_msg("%s: default schedule: %s", what, err.msg);
  if (!ts_hash128_eq(ts_func_hash(ts_sched_func(s)),
                     ts_func_hash(ts_sched_func(s2))))
    fail_msg("%s: two default schedules differ", what);
  if (check_compiled_ref(ts_sched_func(s), f, t, 2, 7, default_check_runs(f),
                         &err))
    fail_msg("%s: %s", what, err.msg);
  char *trace = ts_trace_print(ts_sched_trace(s));
  const char *show = getenv("TS_DEFAULT_SHOW"); /* a spec to print */
  if (show && strstr(what, show)) {
    char *text = ts_func_print(ts_sched_func(s));
    printf("%s\n%s\n", trace, text);
    free(text);
  }
  ts_sched_destroy(s);
  ts_sched_destroy(s2);
  return trace;
}

static inline ts_workload *workload(const char *spec) {
  ts_workload *w;
  ts_error err;
  if (ts_workload_from_spec(spec, &w, &err)) fail_msg("%s: %s", spec, err.msg);
  return w;
}

#endif
