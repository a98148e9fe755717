/*
 * host.c — host tensor helpers shared by tests, the CLI and the runtime:
 * a seeded fill whose bytes are identical on every machine (splitmix64 of
 * the seed and the element index, so element i does not depend on n), the
 * per-dtype tolerance comparison that decides whether a kernel's output
 * matches the reference, and element get/set on raw storage (float16 and
 * bfloat16 as 16-bit patterns, bool as one byte, little-endian).
 */
#include "internal.h"

#include <math.h>
#include <string.h>

/* The 64-bit output of splitmix64 for state seed + (i + 1) * golden. */
static uint64_t mix(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Tolerances of ts_host_compare (see tir.h). */
typedef struct tolerance {
  double atol, rtol;
} tolerance;

static tolerance tolerance_of(ts_dtype t) {
  if (t.code == TS_DT_BFLOAT) return (tolerance){2e-2, 2e-2};
  if (t.bits == 16) return (tolerance){1e-2, 1e-2};
  if (t.bits == 32) return (tolerance){1e-3, 1e-4};
  return (tolerance){1e-9, 1e-9};
}

/* The largest value of float dtype t below 1. */
static double below_one(ts_dtype t) {
  if (t.code == TS_DT_BFLOAT) return 1.0 - 0x1p-8;
  if (t.bits == 16) return 1.0 - 0x1p-11;
  if (t.bits == 32) return 1.0 - 0x1p-24;
  return 1.0 - 0x1p-53;
}

static void set_raw_int(void *data, ts_dtype t, int64_t i, int64_t v) {
  unsigned char *p =
      (unsigned char *)data + i * (int64_t)ts_dtype_elem_bytes(t);
  switch (ts_dtype_elem_bytes(t)) {
  case 1: {
    uint8_t x = (uint8_t)v;
    memcpy(p, &x, 1);
    break;
  }
  case 2: {
    uint16_t x = (uint16_t)v;
    memcpy(p, &x, 2);
    break;
  }
  case 4: {
    uint32_t x = (uint32_t)v;
    memcpy(p, &x, 4);
    break;
  }
  default: memcpy(p, &v, 8); break;
  }
}

void ts_host_fill_random(void *data, ts_dtype t, int64_t n, uint64_t seed) {
  if (!data || n <= 0 || !ts_dtype_is_valid(t)) return;
  n *= t.lanes;
  ts_dtype s = ts_dtype_scalar(t);
  for (int64_t i = 0; i < n; i++) {
    uint64_t z = mix(seed, (uint64_t)i);
    switch (s.code) {
    case TS_DT_FLOAT:
    case TS_DT_BFLOAT: {
      double v = round_to_dtype((double)(z >> 11) * 0x1p-52 - 1.0, s);
      if (v >= 1.0) v = below_one(s);
      ts_host_set(data, s, i, v);
      break;
    }
    case TS_DT_BOOL:
      ((unsigned char *)data)[i] = (unsigned char)(z >> 63);
      break;
    case TS_DT_INT:
      set_raw_int(data, s, i,
                  s.bits == 8 ? (int64_t)(z >> 61) - 4
                              : (int64_t)(z >> 57) - 64);
      break;
    case TS_DT_UINT:
      set_raw_int(data, s, i,
                  s.bits == 8 ? (int64_t)(z >> 61) : (int64_t)(z >> 58));
      break;
    default: set_raw_int(data, s, i, 0); break; /* handles: null */
    }
  }
}

double ts_host_get(const void *data, ts_dtype t, int64_t i) {
  const unsigned char *p =
      (const unsigned char *)data + i * (int64_t)ts_dtype_elem_bytes(t);
  switch (t.code) {
  case TS_DT_BOOL: return *p != 0;
  case TS_DT_BFLOAT: {
    uint16_t h;
    memcpy(&h, p, 2);
    return ts_bf16_to_f32(h);
  }
  case TS_DT_FLOAT:
    if (t.bits == 16) {
      uint16_t h;
      memcpy(&h, p, 2);
      return ts_f16_to_f32(h);
    }
    if (t.bits == 32) {
      float f;
      memcpy(&f, p, 4);
      return f;
    } else {
      double d;
      memcpy(&d, p, 8);
      return d;
    }
  case TS_DT_INT:
  case TS_DT_UINT: {
    bool sgn = t.code == TS_DT_INT;
    switch (t.bits) {
    case 8: return sgn ? (double)*(const int8_t *)p : (double)*p;
    case 16: {
      uint16_t x;
      memcpy(&x, p, 2);
      return sgn ? (double)(int16_t)x : (double)x;
    }
    case 32: {
      uint32_t x;
      memcpy(&x, p, 4);
      return sgn ? (double)(int32_t)x : (double)x;
    }
    default: {
      uint64_t x;
      memcpy(&x, p, 8);
      return sgn ? (double)(int64_t)x : (double)x;
    }
    }
  }
  default: return 0;
  }
}

int64_t ts_host_get_int(const void *data, ts_dtype t, int64_t i) {
  if (t.code == TS_DT_INT || t.code == TS_DT_UINT) {
    if (t.bits < 64) return (int64_t)ts_host_get(data, t, i); /* exact */
    uint64_t x;
    memcpy(&x, (const unsigned char *)data + i * 8, 8);
    if (t.code == TS_DT_UINT && x > (uint64_t)INT64_MAX) return INT64_MAX;
    return (int64_t)x;
  }
  double v = ts_host_get(data, t, i);
  if (isnan(v)) return 0;
  if (v >= 9223372036854775807.0) return INT64_MAX;
  if (v <= -9223372036854775808.0) return INT64_MIN;
  return (int64_t)v;
}

/* double -> integer of t: truncate toward zero, saturate, NaN -> 0 (the
 * interpreter's cast rule). */
static int64_t saturate(double v, ts_dtype t) {
  if (isnan(v)) return 0;
  v = trunc(v);
  int bits = t.bits;
  if (t.code == TS_DT_INT) {
    double lim = ldexp(1.0, bits - 1);
    if (v >= lim) return bits >= 64 ? INT64_MAX : (int64_t)(lim - 1);
    if (v <= -lim) return bits >= 64 ? INT64_MIN : (int64_t)-lim;
    return (int64_t)v;
  }
  double lim = ldexp(1.0, bits);
  if (v <= 0) return 0;
  if (v >= lim) return bits >= 64 ? (int64_t)UINT64_MAX : (int64_t)(lim - 1);
  return (int64_t)(uint64_t)v;
}

void ts_host_set(void *data, ts_dtype t, int64_t i, double v) {
  unsigned char *p =
      (unsigned char *)data + i * (int64_t)ts_dtype_elem_bytes(t);
  switch (t.code) {
  case TS_DT_BOOL: *p = v != 0; break;
  case TS_DT_BFLOAT: {
    uint16_t h = ts_f32_to_bf16((float)v);
    memcpy(p, &h, 2);
    break;
  }
  case TS_DT_FLOAT:
    if (t.bits == 16) {
      uint16_t h = ts_f32_to_f16((float)v);
      memcpy(p, &h, 2);
    } else if (t.bits == 32) {
      float f = (float)v;
      memcpy(p, &f, 4);
    } else {
      memcpy(p, &v, 8);
    }
    break;
  case TS_DT_INT:
  case TS_DT_UINT: set_raw_int(data, t, i, saturate(v, t)); break;
  default: break;
  }
}

/* Reads element i of integer type t exactly (as the bits of an int64;
 * unsigned values zero-extended). */
static int64_t get_int(const void *data, ts_dtype t, int64_t i) {
  const unsigned char *p =
      (const unsigned char *)data + i * (int64_t)ts_dtype_elem_bytes(t);
  bool sgn = t.code == TS_DT_INT;
  switch (t.bits) {
  case 8: return sgn ? (int64_t) * (const int8_t *)p : (int64_t)*p;
  case 16: {
    uint16_t x;
    memcpy(&x, p, 2);
    return sgn ? (int64_t)(int16_t)x : (int64_t)x;
  }
  case 32: {
    uint32_t x;
    memcpy(&x, p, 4);
    return sgn ? (int64_t)(int32_t)x : (int64_t)x;
  }
  default: {
    int64_t x;
    memcpy(&x, p, 8);
    return x;
  }
  }
}

int64_t ts_host_compare(const void *got, const void *want, ts_dtype t,
                        int64_t n, int64_t *first_bad, double *max_abs_err) {
  int64_t bad = 0, first = -1;
  double max_err = 0;
  ts_dtype s = ts_dtype_scalar(t);
  n *= t.lanes;
  bool is_float = ts_dtype_is_float(s);
  tolerance tol = tolerance_of(s);
  for (int64_t i = 0; i < n; i++) {
    bool ok;
    double err;
    if (is_float) {
      double g = ts_host_get(got, s, i), w = ts_host_get(want, s, i);
      if (isnan(g) || isnan(w) || isinf(g) || isinf(w)) {
        ok = (isnan(g) && isnan(w)) || g == w;
        err = ok ? 0 : INFINITY;
      } else {
        err = fabs(g - w);
        ok = err <= tol.atol + tol.rtol * fabs(w);
      }
    } else if (s.code == TS_DT_BOOL) {
      bool g = ((const unsigned char *)got)[i] != 0;
      bool w = ((const unsigned char *)want)[i] != 0;
      ok = g == w;
      err = ok ? 0 : 1;
    } else if (ts_dtype_is_int(s)) {
      int64_t g = get_int(got, s, i), w = get_int(want, s, i);
      ok = g == w;
      if (s.code == TS_DT_UINT)
        err = fabs((double)(uint64_t)g - (double)(uint64_t)w);
      else
        err = fabs((double)g - (double)w);
    } else { /* handles and unknown types: compare the bytes */
      size_t eb = ts_dtype_elem_bytes(s);
      ok = memcmp((const char *)got + (size_t)i * eb,
                  (const char *)want + (size_t)i * eb, eb) == 0;
      err = ok ? 0 : INFINITY;
    }
    if (err > max_err) max_err = err;
    if (!ok) {
      if (first < 0) first = i;
      bad++;
    }
  }
  if (first_bad) *first_bad = first;
  if (max_abs_err) *max_abs_err = max_err;
  return bad;
}
