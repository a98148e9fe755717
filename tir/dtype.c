/*
 * dtype.c — data types: predicates, names, parsing, and the conversions
 * between float32 and the 16-bit float formats (bfloat16, float16).
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool ts_dtype_eq(ts_dtype a, ts_dtype b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}
bool ts_dtype_is_int(ts_dtype t) {
  return t.code == TS_DT_INT || t.code == TS_DT_UINT;
}
bool ts_dtype_is_signed(ts_dtype t) { return t.code == TS_DT_INT; }
bool ts_dtype_is_float(ts_dtype t) {
  return t.code == TS_DT_FLOAT || t.code == TS_DT_BFLOAT;
}
bool ts_dtype_is_bool(ts_dtype t) { return t.code == TS_DT_BOOL; }
bool ts_dtype_is_handle(ts_dtype t) { return t.code == TS_DT_HANDLE; }

ts_dtype ts_dtype_with_lanes(ts_dtype t, int lanes) {
  t.lanes = (uint16_t)lanes;
  return t;
}
ts_dtype ts_dtype_scalar(ts_dtype t) { return ts_dtype_with_lanes(t, 1); }

size_t ts_dtype_elem_bytes(ts_dtype t) {
  if (t.code == TS_DT_BOOL) return 1;
  return t.bits / 8;
}

bool ts_dtype_is_valid(ts_dtype t) {
  if (t.lanes < 1) return false;
  switch (t.code) {
  case TS_DT_INT:
  case TS_DT_UINT:
    return t.bits == 8 || t.bits == 16 || t.bits == 32 || t.bits == 64;
  case TS_DT_FLOAT: return t.bits == 16 || t.bits == 32 || t.bits == 64;
  case TS_DT_BFLOAT: return t.bits == 16;
  case TS_DT_BOOL: return t.bits == 1;
  case TS_DT_HANDLE: return t.bits == 64;
  default: return false;
  }
}

static const char *code_name(int code) {
  switch (code) {
  case TS_DT_INT: return "int";
  case TS_DT_UINT: return "uint";
  case TS_DT_FLOAT: return "float";
  case TS_DT_BFLOAT: return "bfloat";
  case TS_DT_BOOL: return "bool";
  case TS_DT_HANDLE: return "handle";
  default: return "?";
  }
}

const char *ts_dtype_str(ts_dtype t, char buf[32]) {
  if (t.code == TS_DT_BOOL || t.code == TS_DT_HANDLE)
    snprintf(buf, 32, "%s", code_name(t.code));
  else
    snprintf(buf, 32, "%s%d", code_name(t.code), t.bits);
  if (t.lanes != 1) {
    size_t n = strlen(buf);
    snprintf(buf + n, 32 - n, "x%d", t.lanes);
  }
  return buf;
}

int ts_dtype_parse(const char *s, size_t n, ts_dtype *out) {
  static const struct {
    const char *prefix;
    int code;
  } codes[] = {{"bfloat", TS_DT_BFLOAT}, {"float", TS_DT_FLOAT},
               {"uint", TS_DT_UINT},     {"int", TS_DT_INT},
               {"bool", TS_DT_BOOL},     {"handle", TS_DT_HANDLE}};
  for (size_t c = 0; c < sizeof codes / sizeof codes[0]; c++) {
    size_t pl = strlen(codes[c].prefix);
    if (n < pl || memcmp(s, codes[c].prefix, pl) != 0) continue;
    const char *p = s + pl, *end = s + n;
    long bits = 0, lanes = 1;
    if (codes[c].code == TS_DT_BOOL) {
      bits = 1;
    } else if (codes[c].code == TS_DT_HANDLE) {
      bits = 64;
    } else {
      if (p >= end || *p < '0' || *p > '9') return TS_EINVAL;
      while (p < end && *p >= '0' && *p <= '9' && bits < 1000)
        bits = bits * 10 + (*p++ - '0');
    }
    if (p < end && *p == 'x') {
      p++;
      if (p >= end || *p < '1' || *p > '9') return TS_EINVAL;
      lanes = 0;
      while (p < end && *p >= '0' && *p <= '9' && lanes < 100000)
        lanes = lanes * 10 + (*p++ - '0');
    }
    if (p != end) return TS_EINVAL;
    if (lanes < 1 || lanes > 65535) return TS_EINVAL;
    ts_dtype t = TS_DTYPE(codes[c].code, bits, lanes);
    if (bits > 64 || !ts_dtype_is_valid(t)) return TS_EINVAL;
    *out = t;
    return TS_OK;
  }
  return TS_EINVAL;
}

/* ---- 16-bit float conversions ---- */

static uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

uint16_t ts_f32_to_bf16(float f) {
  uint32_t x = f32_bits(f);
  if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

float ts_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t ts_f32_to_f16(float f) {
  uint32_t x = f32_bits(f);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t exp = (x >> 23) & 0xff, mant = x & 0x7fffff;
  if (exp == 0xff) return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 : 0));
  int e = (int)exp - 127 + 15;
  if (e >= 31) return (uint16_t)(sign | 0x7c00);
  if (e <= 0) {
    if (e < -10) return (uint16_t)sign;
    mant |= 0x800000;
    int shift = 14 - e;
    uint32_t half = mant >> shift, rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) half++;
    return (uint16_t)(sign | half);
  }
  uint32_t h = ((uint32_t)e << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
  return (uint16_t)(sign | h);
}

float ts_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 0x1f) return bits_f32(sign | 0x7f800000 | (mant << 13));
  if (exp == 0) {
    if (mant == 0) return bits_f32(sign);
    float v = ldexpf((float)mant, -24);
    return sign ? -v : v;
  }
  return bits_f32(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

double round_to_dtype(double v, ts_dtype t) {
  if (t.code == TS_DT_BFLOAT) return ts_bf16_to_f32(ts_f32_to_bf16((float)v));
  if (t.code == TS_DT_FLOAT && t.bits == 16)
    return ts_f16_to_f32(ts_f32_to_f16((float)v));
  if (t.code == TS_DT_FLOAT && t.bits == 32) return (double)(float)v;
  return v;
}

int64_t wrap_int(int64_t v, ts_dtype t) {
  if (t.code == TS_DT_BOOL) return v != 0;
  if (t.bits >= 64) return v;
  uint64_t mask = (1ull << t.bits) - 1, u = (uint64_t)v & mask;
  if (t.code == TS_DT_INT && (u >> (t.bits - 1)) & 1) u |= ~mask;
  return (int64_t)u;
}

void format_float(char *buf, size_t cap, double v, ts_dtype t) {
  if (isnan(v)) {
    snprintf(buf, cap, "nan");
    return;
  }
  if (isinf(v)) {
    snprintf(buf, cap, v < 0 ? "-inf" : "inf");
    return;
  }
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, cap, "%.*g", prec, v);
    double back = strtod(buf, NULL);
    if (round_to_dtype(back, t) == v) return;
  }
  snprintf(buf, cap, "%.17g", v);
}
