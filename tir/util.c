/*
 * util.c — small utilities every module uses: the monotonic clock in
 * seconds, the qsort comparator of doubles and the median of doubles.
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double ts_now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int ts_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double ts_median(const double *v, int n) {
  if (n <= 0) return NAN;
  double local[64];
  double *s = n <= 64 ? local : malloc(sizeof *s * (size_t)n);
  if (!s) return NAN; /* out of memory: no figure rather than an abort */
  memcpy(s, v, sizeof *s * (size_t)n);
  qsort(s, (size_t)n, sizeof *s, ts_cmp_double);
  double m = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  if (s != local) free(s);
  return m;
}
