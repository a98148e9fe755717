/*
 * test_host.c — the host tensor helpers: the seeded fill is deterministic
 * (golden checksums), independent of n and in the documented ranges; the
 * comparison tolerances accept reordered float32 reductions but reject
 * real errors, and treat NaN, infinities, ints and bools as documented;
 * get/set round-trip every 16-bit float pattern and saturate integers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tir/tir.h"

static uint64_t fnv1a(const void *data, size_t n) {
  const unsigned char *p = data;
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

static const struct {
  ts_dtype t;
  const char *name;
  uint64_t golden; /* fnv1a of 1000 elements filled with seed 42 */
} golden[] = {
    {TS_FLOAT32, "float32", 0x7d39a3d5e528f5c1ull},
    {TS_FLOAT64, "float64", 0xe8b2f0d941efe450ull},
    {TS_FLOAT16, "float16", 0x53c8356fee7fdfafull},
    {TS_BFLOAT16, "bfloat16", 0xd2696414c171b801ull},
    {TS_INT8, "int8", 0x9306ed81c26e45a4ull},
    {TS_UINT8, "uint8", 0xdaececa887bd819cull},
    {TS_INT16, "int16", 0x3c9fa5e7b82e2c3bull},
    {TS_INT32, "int32", 0x16e97e4d0b311bd1ull},
    {TS_INT64, "int64", 0x9dd7242fdb128fe5ull},
    {TS_UINT32, "uint32", 0x133ef69c031be52eull},
    {TS_BOOL, "bool", 0x94572ceb3dbbe1b2ull},
};

static void test_fill_golden(void **state) {
  (void)state;
  unsigned char buf[8001];
  for (size_t i = 0; i < sizeof golden / sizeof golden[0]; i++) {
    memset(buf, 0xab, sizeof buf);
    ts_host_fill_random(buf, golden[i].t, 1000, 42);
    size_t bytes = 1000 * ts_dtype_elem_bytes(golden[i].t);
    uint64_t h = fnv1a(buf, bytes);
    if (h != golden[i].golden)
      printf("%s: got checksum 0x%016llx\n", golden[i].name,
             (unsigned long long)h);
    assert_true(h == golden[i].golden);
    assert_int_equal(buf[bytes], 0xab); /* nothing written past the end */
  }
  /* literal values, computed independently from the splitmix64 definition */
  float f[4];
  ts_host_fill_random(f, TS_FLOAT32, 4, 1);
  float fw[4] = {0.133123145f, 0.491563529f, 0.942005515f, -0.111281566f};
  for (int i = 0; i < 4; i++) assert_true(f[i] == fw[i]);
  int8_t c[8];
  ts_host_fill_random(c, TS_INT8, 8, 1);
  int8_t cw[8] = {0, 1, 3, -1, -1, 2, 3, 0};
  assert_memory_equal(c, cw, 8);
}

static void test_fill_properties(void **state) {
  (void)state;
  enum { N = 4096 };
  static float a[N], b[N];
  ts_host_fill_random(a, TS_FLOAT32, N, 7);
  ts_host_fill_random(b, TS_FLOAT32, 10, 7);
  /* element i depends on (seed, i) only */
  assert_memory_equal(a, b, 10 * sizeof(float));
  /* other seeds give other data */
  ts_host_fill_random(b, TS_FLOAT32, N, 8);
  int same = 0;
  for (int i = 0; i < N; i++) same += a[i] == b[i];
  assert_true(same < 10);

  /* floats: [-1, 1), mean near 0, both halves and the extremes covered */
  ts_dtype fts[4] = {TS_FLOAT32, TS_FLOAT64, TS_FLOAT16, TS_BFLOAT16};
  static double buf[N];
  for (int k = 0; k < 4; k++) {
    ts_host_fill_random(buf, fts[k], N, 3);
    double sum = 0, lo = 1, hi = -1;
    for (int i = 0; i < N; i++) {
      double v = ts_host_get(buf, fts[k], i);
      assert_true(v >= -1.0 && v < 1.0);
      sum += v;
      lo = fmin(lo, v);
      hi = fmax(hi, v);
      /* values are exact in their dtype: set(get(x)) keeps the bits */
      uint64_t raw = 0;
      ts_host_set(&raw, fts[k], 0, v);
      assert_memory_equal(&raw, (char *)buf + i * ts_dtype_elem_bytes(fts[k]),
                          ts_dtype_elem_bytes(fts[k]));
    }
    assert_true(fabs(sum / N) < 0.05);
    assert_true(lo < -0.99 && hi > 0.99);
  }

  /* ints: documented ranges, every value of the small ranges appears */
  struct {
    ts_dtype t;
    int lo, hi;
  } ranges[] = {{TS_INT8, -4, 4},    {TS_UINT8, 0, 8},    {TS_INT16, -64, 64},
                {TS_INT32, -64, 64}, {TS_INT64, -64, 64}, {TS_UINT16, 0, 64},
                {TS_UINT32, 0, 64},  {TS_UINT64, 0, 64},  {TS_BOOL, 0, 2}};
  for (size_t k = 0; k < sizeof ranges / sizeof ranges[0]; k++) {
    ts_host_fill_random(buf, ranges[k].t, N, 11);
    int seen[128] = {0};
    for (int i = 0; i < N; i++) {
      double v = ts_host_get(buf, ranges[k].t, i);
      assert_true(v >= ranges[k].lo && v < ranges[k].hi);
      assert_true(v == floor(v));
      seen[(int)v - ranges[k].lo] = 1;
    }
    for (int v = 0; v < ranges[k].hi - ranges[k].lo; v++) assert_true(seen[v]);
  }
  /* bool bytes are exactly 0 or 1 */
  unsigned char bools[64];
  ts_host_fill_random(bools, TS_BOOL, 64, 5);
  for (int i = 0; i < 64; i++) assert_true(bools[i] <= 1);
}

static int64_t cmp1(ts_dtype t, double got, double want, double *err) {
  uint64_t g = 0, w = 0;
  ts_host_set(&g, t, 0, got);
  ts_host_set(&w, t, 0, want);
  return ts_host_compare(&g, &w, t, 1, NULL, err);
}

static void test_compare_tolerances(void **state) {
  (void)state;
  double e;
  /* float32: atol 1e-3, rtol 1e-4 */
  assert_int_equal(cmp1(TS_FLOAT32, 10.0015, 10, &e), 0);
  assert_int_equal(cmp1(TS_FLOAT32, 10.003, 10, &e), 1);
  assert_true(fabs(e - 0.003) < 1e-5);
  assert_int_equal(cmp1(TS_FLOAT32, 9e-4, 0, &e), 0);
  assert_int_equal(cmp1(TS_FLOAT32, 1.2e-3, 0, &e), 1);
  assert_int_equal(cmp1(TS_FLOAT32, 1000.09, 1000, &e), 0);
  assert_int_equal(cmp1(TS_FLOAT32, 1000.2, 1000, &e), 1);
  /* float64: 1e-9 */
  assert_int_equal(cmp1(TS_FLOAT64, 1 + 1e-9, 1, &e), 0);
  assert_int_equal(cmp1(TS_FLOAT64, 1 + 1e-8, 1, &e), 1);
  /* float16: 1e-2; bfloat16: 2e-2 */
  assert_int_equal(cmp1(TS_FLOAT16, 1.0 + 0x1p-7, 1, &e), 0);
  assert_int_equal(cmp1(TS_FLOAT16, 1.03125, 1, &e), 1);
  assert_int_equal(cmp1(TS_BFLOAT16, 1.0 + 0x1p-6, 1, &e), 0);
  assert_int_equal(cmp1(TS_BFLOAT16, 1.0625, 1, &e), 1);
  /* NaN and infinities */
  assert_int_equal(cmp1(TS_FLOAT32, NAN, NAN, &e), 0);
  assert_int_equal(cmp1(TS_FLOAT32, NAN, 1, &e), 1);
  assert_true(isinf(e));
  assert_int_equal(cmp1(TS_FLOAT32, 1, NAN, &e), 1);
  assert_int_equal(cmp1(TS_FLOAT32, INFINITY, INFINITY, &e), 0);
  assert_int_equal(cmp1(TS_FLOAT16, -INFINITY, -INFINITY, &e), 0);
  assert_int_equal(cmp1(TS_FLOAT32, INFINITY, -INFINITY, &e), 1);
  assert_int_equal(cmp1(TS_FLOAT32, INFINITY, 3e38, &e), 1);
  assert_int_equal(cmp1(TS_BFLOAT16, NAN, NAN, &e), 0);
  /* ints are exact; bools compare as truth values */
  assert_int_equal(cmp1(TS_INT32, 5, 5, &e), 0);
  assert_int_equal(cmp1(TS_INT32, 5, 6, &e), 1);
  assert_true(e == 1.0);
  assert_int_equal(cmp1(TS_UINT8, 255, 0, &e), 1);
  assert_true(e == 255.0);
  unsigned char bg[3] = {2, 0, 1}, bw[3] = {1, 0, 0};
  int64_t first;
  assert_int_equal(ts_host_compare(bg, bw, TS_BOOL, 3, &first, &e), 1);
  assert_int_equal(first, 2);
  int64_t ig = INT64_MAX, iw = INT64_MAX - 1;
  assert_int_equal(ts_host_compare(&ig, &iw, TS_INT64, 1, NULL, NULL), 1);
  /* counts, first index, largest error */
  float g[5] = {1, 2, 3.5f, 4, 5.25f}, w[5] = {1, 2, 3, 4, 5};
  assert_int_equal(ts_host_compare(g, w, TS_FLOAT32, 5, &first, &e), 2);
  assert_int_equal(first, 2);
  assert_true(e == 0.5);
  assert_int_equal(ts_host_compare(g, g, TS_FLOAT32, 5, &first, &e), 0);
  assert_int_equal(first, -1);
  assert_true(e == 0.0);
}

/* float32 dot products of length 4096 summed in different orders all
 * match the straightforward order; dropping one term or adding a term
 * twice does not. */
static void test_compare_reordered_reductions(void **state) {
  (void)state;
  enum { K = 4096, M = 256 };
  float *a = malloc(sizeof(float) * K * M), *b = malloc(sizeof(float) * K);
  ts_host_fill_random(a, TS_FLOAT32, (int64_t)K * M, 100);
  ts_host_fill_random(b, TS_FLOAT32, K, 101);
  float want[M], lanes16[M], reversed[M], blocked[M], dropped[M], doubled[M];
  for (int m = 0; m < M; m++) {
    const float *x = a + (size_t)m * K;
    float s = 0, r = 0, acc[16] = {0}, blk = 0;
    for (int k = 0; k < K; k++) s += x[k] * b[k];
    for (int k = K - 1; k >= 0; k--) r += x[k] * b[k];
    for (int k = 0; k < K; k++) acc[k % 16] = fmaf(x[k], b[k], acc[k % 16]);
    float t = 0;
    for (int l = 0; l < 16; l++) t += acc[l];
    for (int k0 = 0; k0 < K; k0 += 64) {
      float p = 0;
      for (int k = k0; k < k0 + 64; k++) p += x[k] * b[k];
      blk += p;
    }
    want[m] = s;
    reversed[m] = r;
    lanes16[m] = t;
    blocked[m] = blk;
    /* bugs: the last term missing (a loop bound off by one), or the first
     * term counted twice (an init that does not reset) */
    dropped[m] = s - x[K - 1] * b[K - 1];
    doubled[m] = s + x[0] * b[0];
  }
  double e;
  assert_int_equal(ts_host_compare(reversed, want, TS_FLOAT32, M, NULL, &e), 0);
  assert_int_equal(ts_host_compare(lanes16, want, TS_FLOAT32, M, NULL, &e), 0);
  assert_int_equal(ts_host_compare(blocked, want, TS_FLOAT32, M, NULL, &e), 0);
  assert_true(ts_host_compare(dropped, want, TS_FLOAT32, M, NULL, &e) > M / 2);
  assert_true(ts_host_compare(doubled, want, TS_FLOAT32, M, NULL, &e) > M / 2);
  free(a);
  free(b);
}

static void test_get_set_round_trips(void **state) {
  (void)state;
  /* every 16-bit pattern survives get then set (NaNs stay NaN) */
  ts_dtype t16[2] = {TS_FLOAT16, TS_BFLOAT16};
  for (int k = 0; k < 2; k++)
    for (uint32_t h = 0; h < 65536; h++) {
      uint16_t in = (uint16_t)h, out = 0;
      double v = ts_host_get(&in, t16[k], 0);
      ts_host_set(&out, t16[k], 0, v);
      if (isnan(v))
        assert_true(isnan(ts_host_get(&out, t16[k], 0)));
      else
        assert_int_equal(out, in);
    }
  /* set rounds to the format (nearest even) */
  uint16_t h = 0;
  ts_host_set(&h, TS_BFLOAT16, 0, 1.0 + 0x1p-8);
  assert_true(ts_host_get(&h, TS_BFLOAT16, 0) == 1.0);
  ts_host_set(&h, TS_BFLOAT16, 0, 1.0 + 0x1p-8 + 0x1p-10);
  assert_true(ts_host_get(&h, TS_BFLOAT16, 0) == 1.0 + 0x1p-7);
  ts_host_set(&h, TS_FLOAT16, 0, 65520);
  assert_true(isinf(ts_host_get(&h, TS_FLOAT16, 0)));
  ts_host_set(&h, TS_FLOAT16, 0, 0x1p-24);
  assert_true(ts_host_get(&h, TS_FLOAT16, 0) == 0x1p-24);
  assert_int_equal(h, 1);
  ts_host_set(&h, TS_BFLOAT16, 0, -2.0);
  assert_int_equal(h, 0xc000);
  /* ints truncate and saturate, NaN -> 0, bools are != 0 */
  int8_t c = 0;
  ts_host_set(&c, TS_INT8, 0, 300);
  assert_int_equal(c, 127);
  ts_host_set(&c, TS_INT8, 0, -2.9);
  assert_int_equal(c, -2);
  ts_host_set(&c, TS_INT8, 0, NAN);
  assert_int_equal(c, 0);
  uint8_t u = 9;
  ts_host_set(&u, TS_UINT8, 0, -3);
  assert_int_equal(u, 0);
  uint32_t u32;
  ts_host_set(&u32, TS_UINT32, 0, 4294967295.0);
  assert_true(u32 == 4294967295u);
  assert_true(ts_host_get(&u32, TS_UINT32, 0) == 4294967295.0);
  int64_t i64[2] = {0, 0};
  ts_host_set(i64, TS_INT64, 1, -1e300);
  assert_true(i64[1] == INT64_MIN);
  assert_true(i64[0] == 0);
  unsigned char bb = 0;
  ts_host_set(&bb, TS_BOOL, 0, -0.5);
  assert_int_equal(bb, 1);
  assert_true(ts_host_get(&bb, TS_BOOL, 0) == 1.0);
  double d[3];
  ts_host_set(d, TS_FLOAT64, 2, 0.1);
  assert_true(d[2] == 0.1);
  float f[2];
  ts_host_set(f, TS_FLOAT32, 1, 0.1);
  assert_true(f[1] == 0.1f);
  assert_true(ts_host_get(f, TS_FLOAT32, 1) == (double)0.1f);
  int16_t s16 = -3;
  assert_true(ts_host_get(&s16, TS_INT16, 0) == -3.0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fill_golden),
      cmocka_unit_test(test_fill_properties),
      cmocka_unit_test(test_compare_tolerances),
      cmocka_unit_test(test_compare_reordered_reductions),
      cmocka_unit_test(test_get_set_round_trips),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
