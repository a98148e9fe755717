/*
 * test_eval.c — the CPU timing evaluator: `number` grows until a repeat
 * lasts min_repeat_ms, the repeat count and warm-up are honoured exactly,
 * seconds are per run, a failing callable is reported, bad configs are
 * refused by field, and the cache flush runs between repeats.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/runtime.h"

typedef struct spinner {
  double seconds; /* busy time per call */
  int calls;
  int fail_on_call; /* 1-based; 0: never */
  int fail_code;
} spinner;

static int spin(void *ctx) {
  spinner *s = ctx;
  s->calls++;
  if (s->fail_on_call && s->calls == s->fail_on_call) return s->fail_code;
  double end = ts_now_seconds() + s->seconds;
  while (ts_now_seconds() < end) {
  }
  return 0;
}

static void test_number_grows(void **state) {
  (void)state;
  spinner s = {.seconds = 0.5e-3};
  ts_eval_config cfg = {
      .number = 1, .repeat = 3, .min_repeat_ms = 20, .warmup = 2};
  double seconds[4] = {-1, -1, -1, -1};
  int number = 0;
  ts_error err;
  ts_error_clear(&err);
  assert_int_equal(ts_rt_eval(NULL, &cfg, spin, &s, seconds, &number, &err),
                   TS_OK);
  printf("  grew number to %d; seconds per run %.6f %.6f %.6f; %d calls\n",
         number, seconds[0], seconds[1], seconds[2], s.calls);
  /* 20 ms of 0.5 ms runs needs about 40 runs. */
  assert_true(number >= 30);
  assert_true(number <= 200);
  for (int r = 0; r < 3; r++) {
    assert_true(seconds[r] >= 0.5e-3);
    assert_true(seconds[r] < 5e-3);
    assert_true(seconds[r] * number >= 20e-3);
  }
  assert_true(seconds[3] == -1); /* nothing written past `repeat` */
  assert_true(s.calls >= 2 + 3 * number);
}

static void test_exact_counts_without_minimum(void **state) {
  (void)state;
  spinner s = {.seconds = 0};
  ts_eval_config cfg = {
      .number = 5, .repeat = 4, .min_repeat_ms = 0, .warmup = 3};
  double seconds[5] = {-1, -1, -1, -1, -1};
  int number = 0;
  assert_int_equal(ts_rt_eval(NULL, &cfg, spin, &s, seconds, &number, NULL),
                   TS_OK);
  assert_int_equal(number, 5);
  assert_int_equal(s.calls, 3 + 5 * 4);
  for (int r = 0; r < 4; r++) assert_true(seconds[r] >= 0);
  assert_true(seconds[4] == -1);
  /* number_used may be NULL; the default config is valid. */
  ts_eval_config d = ts_eval_config_default();
  assert_int_equal(d.number, 1);
  assert_int_equal(d.repeat, 3);
  assert_int_equal(d.warmup, 1);
  assert_false(d.flush_cache);
  d.min_repeat_ms = 1;
  s.calls = 0;
  assert_int_equal(ts_rt_eval(NULL, &d, spin, &s, seconds, NULL, NULL), TS_OK);
  assert_true(s.calls >= 1 + 3);
}

static void test_failure_reported(void **state) {
  (void)state;
  ts_eval_config cfg = {
      .number = 2, .repeat = 3, .min_repeat_ms = 0, .warmup = 1};
  double seconds[3];
  /* In a timed repeat. */
  spinner s = {.fail_on_call = 4, .fail_code = 7};
  ts_error err;
  ts_error_clear(&err);
  assert_int_equal(ts_rt_eval(NULL, &cfg, spin, &s, seconds, NULL, &err),
                   TS_ERANGE);
  assert_non_null(strstr(err.msg, "returned 7"));
  assert_int_equal(s.calls, 4); /* stops at the failure */
  /* In the warm-up. */
  spinner w = {.fail_on_call = 1, .fail_code = -2};
  ts_error_clear(&err);
  assert_int_equal(ts_rt_eval(NULL, &cfg, spin, &w, seconds, NULL, &err),
                   TS_ERANGE);
  assert_non_null(strstr(err.msg, "returned -2"));
  assert_int_equal(w.calls, 1);
}

static void test_bad_config(void **state) {
  (void)state;
  spinner s = {0};
  double seconds[4];
  struct {
    ts_eval_config cfg;
    const char *field;
  } cases[] = {
      {{.number = 0, .repeat = 1}, "number"},
      {{.number = 1, .repeat = 0}, "repeat"},
      {{.number = 1, .repeat = 1, .min_repeat_ms = -1}, "min_repeat_ms"},
      {{.number = 1, .repeat = 1, .warmup = -1}, "warmup"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ts_error err;
    ts_error_clear(&err);
    assert_int_equal(
        ts_rt_eval(NULL, &cases[i].cfg, spin, &s, seconds, NULL, &err),
        TS_EINVAL);
    assert_non_null(strstr(err.msg, cases[i].field));
  }
  assert_int_equal(s.calls, 0);
  ts_eval_config ok = {.number = 1, .repeat = 1};
  assert_int_equal(ts_rt_eval(NULL, NULL, spin, &s, seconds, NULL, NULL),
                   TS_EINVAL);
  assert_int_equal(ts_rt_eval(NULL, &ok, NULL, &s, seconds, NULL, NULL),
                   TS_EINVAL);
  assert_int_equal(ts_rt_eval(NULL, &ok, spin, &s, NULL, NULL, NULL),
                   TS_EINVAL);
  /* A cache flush needs the runtime that owns the buffer. */
  ok.flush_cache = true;
  ts_error err;
  ts_error_clear(&err);
  assert_int_equal(ts_rt_eval(NULL, &ok, spin, &s, seconds, NULL, &err),
                   TS_EINVAL);
  assert_non_null(strstr(err.msg, "flush_cache"));
}

static void test_cache_flush(void **state) {
  (void)state;
  ts_runtime *rt = NULL;
  assert_int_equal(ts_runtime_create(1, &rt, NULL), TS_OK);
  size_t llc = ts_rt_llc_bytes();
  assert_true(llc >= 64 * 1024);
  spinner s = {.seconds = 0};
  ts_eval_config cfg = {.number = 1,
                        .repeat = 2,
                        .min_repeat_ms = 0,
                        .flush_cache = true,
                        .warmup = 0};
  double seconds[2];
  double start = ts_now_seconds();
  assert_int_equal(ts_rt_eval(rt, &cfg, spin, &s, seconds, NULL, NULL), TS_OK);
  double with_flush = ts_now_seconds() - start;
  assert_int_equal(s.calls, 2);
  /* Two flushes write and read more than the last-level cache: that takes
   * measurable time (at most ~100 GB/s), unlike two empty calls. */
  double min_expected = 2.0 * 2 * (double)llc / 100e9;
  printf("  last-level cache %zu KiB; 2 repeats with flush took %.1f ms\n",
         llc >> 10, with_flush * 1e3);
  assert_true(with_flush >= min_expected);
  ts_runtime_destroy(rt);
}

/* Eviction (tuning's cold confirmation) leaves every byte as it was, on a
 * buffer at any alignment, with a pool or without, skips empty entries,
 * and refuses a count without buffers. */
static void test_evict(void **state) {
  (void)state;
  size_t n_big = 100003;
  unsigned char *big = malloc(n_big + 3), *small = malloc(5);
  assert_non_null(big);
  assert_non_null(small);
  for (size_t i = 0; i < n_big + 3; i++) big[i] = (unsigned char)(i * 7 + 1);
  memcpy(small, "abcde", 5);
  void *bufs[3] = {big + 3, small, NULL};
  size_t bytes[3] = {n_big, 5, 64};
  ts_runtime *rt = NULL;
  assert_int_equal(ts_runtime_create(2, &rt, NULL), TS_OK);
  ts_error err;
  ts_error_clear(&err);
  assert_int_equal(ts_rt_evict(rt, bufs, bytes, 3, &err), TS_OK);
  assert_int_equal(ts_rt_evict(NULL, bufs, bytes, 2, &err), TS_OK);
  assert_int_equal(ts_rt_evict(rt, NULL, NULL, 0, &err), TS_OK);
  for (size_t i = 0; i < n_big + 3; i++)
    assert_int_equal(big[i], (unsigned char)(i * 7 + 1));
  assert_memory_equal(small, "abcde", 5);
  assert_int_equal(ts_rt_evict(rt, NULL, bytes, 1, &err), TS_EINVAL);
  assert_non_null(strstr(err.msg, "evict"));
  assert_int_equal(ts_rt_evict(rt, bufs, bytes, -1, &err), TS_EINVAL);
  ts_runtime_destroy(rt);
  free(big);
  free(small);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_number_grows),
      cmocka_unit_test(test_exact_counts_without_minimum),
      cmocka_unit_test(test_failure_reported),
      cmocka_unit_test(test_bad_config),
      cmocka_unit_test(test_cache_flush),
      cmocka_unit_test(test_evict),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
