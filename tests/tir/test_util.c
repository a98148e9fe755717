/*
 * test_util.c — tests of the small utilities of tir/util.c: the monotonic
 * clock in seconds (the CLOCK_MONOTONIC reading, never going back), the
 * qsort comparator of doubles (order, equal values, NaN comparing equal to
 * everything) and the median of doubles (odd and even counts, no values,
 * the input left as it is).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tir/tir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double clock_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ts_now_seconds reads CLOCK_MONOTONIC: a reading lies between two direct
 * readings taken around it. */
static void test_now_is_monotonic_clock(void **state) {
  (void)state;
  for (int i = 0; i < 100; i++) {
    double before = clock_seconds();
    double t = ts_now_seconds();
    double after = clock_seconds();
    assert_true(before <= t);
    assert_true(t <= after);
  }
}

/* Successive readings never decrease, and a sleep shows up in full. */
static void test_now_non_decreasing(void **state) {
  (void)state;
  double prev = ts_now_seconds();
  for (int i = 0; i < 100000; i++) {
    double t = ts_now_seconds();
    assert_true(t >= prev);
    prev = t;
  }
  double t0 = ts_now_seconds();
  struct timespec nap = {0, 2000000}; /* 2 ms */
  while (nanosleep(&nap, &nap) != 0) continue;
  double elapsed = ts_now_seconds() - t0;
  assert_true(elapsed >= 0.002 - 1e-6);
  assert_true(elapsed < 60);
}

static void test_cmp_double_orders(void **state) {
  (void)state;
  double a = 1, b = 2, c = -0.0, d = 0.0, inf = INFINITY, ninf = -INFINITY;
  assert_int_equal(ts_cmp_double(&a, &b), -1);
  assert_int_equal(ts_cmp_double(&b, &a), 1);
  assert_int_equal(ts_cmp_double(&a, &a), 0);
  assert_int_equal(ts_cmp_double(&c, &d), 0);
  assert_int_equal(ts_cmp_double(&ninf, &a), -1);
  assert_int_equal(ts_cmp_double(&inf, &b), 1);

  double v[] = {3.5, -1, 1e-9, 2, -7.25, 0, 1e9, 2};
  const double want[] = {-7.25, -1, 0, 1e-9, 2, 2, 3.5, 1e9};
  qsort(v, sizeof v / sizeof v[0], sizeof v[0], ts_cmp_double);
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
    assert_true(v[i] == want[i]);
}

/* A NaN is neither less nor greater than anything: it compares equal (0)
 * to every value, itself included, in either order. */
static void test_cmp_double_nan(void **state) {
  (void)state;
  double nan = NAN, one = 1, inf = INFINITY;
  assert_int_equal(ts_cmp_double(&nan, &one), 0);
  assert_int_equal(ts_cmp_double(&one, &nan), 0);
  assert_int_equal(ts_cmp_double(&nan, &inf), 0);
  assert_int_equal(ts_cmp_double(&inf, &nan), 0);
  assert_int_equal(ts_cmp_double(&nan, &nan), 0);
}

static void test_median(void **state) {
  (void)state;
  const double odd[] = {5, 1, 4, 2, 3};
  assert_true(ts_median(odd, 5) == 3);
  assert_true(odd[0] == 5 && odd[1] == 1 && odd[4] == 3); /* unchanged */
  const double even[] = {4, 1, 3, 2};
  assert_true(ts_median(even, 4) == 2.5);
  const double one = 7;
  assert_true(ts_median(&one, 1) == 7);
  assert_true(isnan(ts_median(NULL, 0)));
  assert_true(isnan(ts_median(odd, -1)));

  /* more values than the on-stack copy holds */
  enum { N = 201 };
  double *big = malloc(sizeof *big * N);
  assert_non_null(big);
  for (int i = 0; i < N; i++) big[i] = (double)((i * 37) % N);
  assert_true(ts_median(big, N) == 100);
  assert_true(ts_median(big, N - 1) == 99.5);
  for (int i = 0; i < N; i++) assert_true(big[i] == (double)((i * 37) % N));
  free(big);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_now_is_monotonic_clock),
      cmocka_unit_test(test_now_non_decreasing),
      cmocka_unit_test(test_cmp_double_orders),
      cmocka_unit_test(test_cmp_double_nan),
      cmocka_unit_test(test_median),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
