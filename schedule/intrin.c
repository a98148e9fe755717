/*
 * intrin.c — the registry of tensor intrinsics for tensorize: per
 * intrinsic, a description PrimFunc (what one call computes, as a loop nest
 * over one block that tensorize matches structurally) and an
 * implementation PrimFunc (the target call, through address_of pointers;
 * call<int32>("tessera.buffer_stride", &P[0, ...], d) stands for the row
 * stride, in elements, of the buffer that parameter P is mapped to). The
 * texts are parsed on demand, so the registry is constant data.
 */
#include "schedule/internal.h"

#include <string.h>

typedef struct intrin_def {
  const char *name;
  const char *feature; /* what the implementation needs on the target */
  const char *desc, *impl;
  const char *superseded_by; /* a feature whose intrinsics do better */
  const char *also;          /* a second feature it needs, or NULL */
} intrin_def;

#define STRIDE(BUF) "call<int32>(\"tessera.buffer_stride\", &" BUF "[0, 0], 0)"

/* L lanes of dot products of K elements (4 for int8, 2 for bf16):
 * C[j] += sum_k A[k] * B[j][k]. */
#define DOTL_DESC(NAME, AT, BT, CT, K, L)                                      \
  "func " NAME "_desc(A: " AT "[" #K "], B: " BT "[" #L ", " #K "], C: " CT    \
  "[" #L "]) {\n"                                                              \
  "  block root() {\n"                                                         \
  "    for j in range(" #L ") {\n"                                             \
  "      for k in range(" #K ") {\n"                                           \
  "        block update(vj: spatial(" #L ") = j, vk: reduce(" #K ") = k) {\n"  \
  "          C[vj] = C[vj] + cast(" CT ", A[vk]) * cast(" CT ", B[vj, vk])\n"  \
  "        }\n"                                                                \
  "      }\n"                                                                  \
  "    }\n"                                                                    \
  "  }\n"                                                                      \
  "}\n"

#define DOTL_IMPL(NAME, CALL, AT, BT, CT, K, L)                                \
  "func " NAME "_impl(A: " AT "[" #K "], B: " BT "[" #L ", " #K "], C: " CT    \
  "[" #L "]) {\n"                                                              \
  "  block root() {\n"                                                         \
  "    evaluate call<int32>(\"" CALL "\", &C[0], &A[0], &B[0, 0])\n"           \
  "  }\n"                                                                      \
  "}\n"

#define DOT_DESC(NAME, AT, BT, CT, K) DOTL_DESC(NAME, AT, BT, CT, K, 16)
#define DOT_IMPL(NAME, CALL, AT, BT, CT, K)                                    \
  DOTL_IMPL(NAME, CALL, AT, BT, CT, K, 16)

/* L lanes (16 or 8) of int8 dot products over K = 16 in four steps of 4:
 * C[j] += sum_k A[k] * B[k / 4][j][k % 4], B a [4][L][4] tile (each step
 * one vector of BW = 4 L bytes). A longer K than the 16x4 dot lets the
 * implementation subtract its compensation once per call instead of once
 * per step. */
#define DOT4L_DESC(NAME, AT, BT, CT, L, BW)                                    \
  "func " NAME "_desc(A: " AT "[16], B: " BT "[4, " #BW "], C: " CT "[" #L     \
  "]) {\n"                                                                     \
  "  block root() {\n"                                                         \
  "    for j in range(" #L ") {\n"                                             \
  "      for k in range(16) {\n"                                               \
  "        block update(vj: spatial(" #L ") = j, vk: reduce(16) = k) {\n"      \
  "          C[vj] = C[vj] + cast(" CT ", A[vk]) * cast(" CT                   \
  ", B[floordiv(vk, 4), vj * 4 + floormod(vk, 4)])\n"                          \
  "        }\n"                                                                \
  "      }\n"                                                                  \
  "    }\n"                                                                    \
  "  }\n"                                                                      \
  "}\n"

#define DOT4L_IMPL(NAME, CALL, AT, BT, CT, L, BW)                              \
  "func " NAME "_impl(A: " AT "[16], B: " BT "[4, " #BW "], C: " CT "[" #L     \
  "]) {\n"                                                                     \
  "  block root() {\n"                                                         \
  "    evaluate call<int32>(\"" CALL "\", &C[0], &A[0], &B[0, 0])\n"           \
  "  }\n"                                                                      \
  "}\n"

#define DOT4_DESC(NAME, AT, BT, CT) DOT4L_DESC(NAME, AT, BT, CT, 16, 64)
#define DOT4_IMPL(NAME, CALL, AT, BT, CT)                                      \
  DOT4L_IMPL(NAME, CALL, AT, BT, CT, 16, 64)

/* 8 lanes of dot products over K = 2 (one step) or K = 8 (four steps)
 * for AVX2's 16-bit multiply-add pairs: C[j] += sum_k A[k] * B[k / 2][2 j +
 * k % 2], B a [KH = K / 2][16] tile (each step 16 bytes, two k per
 * lane). */
#define PAIR_DESC(NAME, AT, BT, CT, K, KH)                                     \
  "func " NAME "_desc(A: " AT "[" #K "], B: " BT "[" #KH ", 16], C: " CT       \
  "[8]) {\n"                                                                   \
  "  block root() {\n"                                                         \
  "    for j in range(8) {\n"                                                  \
  "      for k in range(" #K ") {\n"                                           \
  "        block update(vj: spatial(8) = j, vk: reduce(" #K ") = k) {\n"       \
  "          C[vj] = C[vj] + cast(" CT ", A[vk]) * cast(" CT                   \
  ", B[floordiv(vk, 2), vj * 2 + floormod(vk, 2)])\n"                          \
  "        }\n"                                                                \
  "      }\n"                                                                  \
  "    }\n"                                                                    \
  "  }\n"                                                                      \
  "}\n"

#define PAIR_IMPL(NAME, CALL, AT, BT, CT, K, KH)                               \
  "func " NAME "_impl(A: " AT "[" #K "], B: " BT "[" #KH ", 16], C: " CT       \
  "[8]) {\n"                                                                   \
  "  block root() {\n"                                                         \
  "    evaluate call<int32>(\"" CALL "\", &C[0], &A[0], &B[0, 0])\n"           \
  "  }\n"                                                                      \
  "}\n"

/* One warp's mma.sync m16n8k16: C[16, 8] += A[16, 16] x B[16, 8]. */
#define MMA_DESC(NAME, AT)                                                     \
  "func " NAME "_desc(A: " AT "[16, 16], B: " AT "[16, 8], C: float32[16, "    \
  "8]) {\n"                                                                    \
  "  block root() {\n"                                                         \
  "    for i in range(16) {\n"                                                 \
  "      for j in range(8) {\n"                                                \
  "        for k in range(16) {\n"                                             \
  "          block update(vi: spatial(16) = i, vj: spatial(8) = j, "           \
  "vk: reduce(16) = k) {\n"                                                    \
  "            C[vi, vj] = C[vi, vj] + cast(float32, A[vi, vk]) * "            \
  "cast(float32, B[vk, vj])\n"                                                 \
  "          }\n"                                                              \
  "        }\n"                                                                \
  "      }\n"                                                                  \
  "    }\n"                                                                    \
  "  }\n"                                                                      \
  "}\n"

#define MMA_IMPL(NAME, AT)                                                     \
  "func " NAME "_impl(A: " AT "[16, 16], B: " AT "[16, 8], C: float32[16, "    \
  "8]) {\n"                                                                    \
  "  block root() {\n"                                                         \
  "    for tx in range(32) thread(\"threadIdx.x\") {\n"                        \
  "      evaluate call<int32>(\"tessera.mma_m16n8k16\", &C[0, 0], " STRIDE(    \
      "C") ", &A[0, 0], " STRIDE("A") ", &B[0, 0], " STRIDE("B") ")\n"         \
                                                                 "    }\n"     \
                                                                 "  }\n"       \
                                                                 "}\n"

static const intrin_def intrins[] = {
    {"avx512_vnni_16x4", "avx512vnni",
     DOT_DESC("vnni", "uint8", "int8", "int32", 4),
     DOT_IMPL("vnni", "tessera.vnni_dot_16x4", "uint8", "int8", "int32", 4),
     NULL, NULL},
    {"avx512_vnni_16x16", "avx512vnni",
     DOT4_DESC("vnnik16", "uint8", "int8", "int32"),
     DOT4_IMPL("vnnik16", "tessera.vnni_dot_16x16", "uint8", "int8", "int32"),
     NULL, NULL},
    {"avx512_vnni_s8_16x4", "avx512vnni",
     DOT_DESC("vnnis8", "int8", "int8", "int32", 4),
     DOT_IMPL("vnnis8", "tessera.vnni_s8_dot_16x4", "int8", "int8", "int32", 4),
     NULL, NULL},
    {"avx512_vnni_s8_16x16", "avx512vnni",
     DOT4_DESC("vnnis8k16", "int8", "int8", "int32"),
     DOT4_IMPL("vnnis8k16", "tessera.vnni_s8_dot_16x16", "int8", "int8",
               "int32"),
     NULL, NULL},
    /* 8 lanes (AVX512VL's 256-bit vpdpbusd), for the columns that tiles
     * of 16 leave */
    {"avx512_vnni_8x4", "avx512vnni",
     DOTL_DESC("vnni8", "uint8", "int8", "int32", 4, 8),
     DOTL_IMPL("vnni8", "tessera.vnni_dot_8x4", "uint8", "int8", "int32", 4, 8),
     NULL, "avx512vl"},
    {"avx512_vnni_8x16", "avx512vnni",
     DOT4L_DESC("vnni8k16", "uint8", "int8", "int32", 8, 32),
     DOT4L_IMPL("vnni8k16", "tessera.vnni_dot_8x16", "uint8", "int8", "int32",
                8, 32),
     NULL, "avx512vl"},
    {"avx512_vnni_s8_8x4", "avx512vnni",
     DOTL_DESC("vnnis8_8", "int8", "int8", "int32", 4, 8),
     DOTL_IMPL("vnnis8_8", "tessera.vnni_s8_dot_8x4", "int8", "int8", "int32",
               4, 8),
     NULL, "avx512vl"},
    {"avx512_vnni_s8_8x16", "avx512vnni",
     DOT4L_DESC("vnnis8_8k16", "int8", "int8", "int32", 8, 32),
     DOT4L_IMPL("vnnis8_8k16", "tessera.vnni_s8_dot_8x16", "int8", "int8",
                "int32", 8, 32),
     NULL, "avx512vl"},
    {"avx512_bf16_16x2", "avx512bf16",
     DOT_DESC("bf16dot", "bfloat16", "bfloat16", "float32", 2),
     DOT_IMPL("bf16dot", "tessera.avx512bf16_dot_16x2", "bfloat16", "bfloat16",
              "float32", 2),
     NULL, NULL},
    {"avx2_madd_s8_8x2", "avx2",
     PAIR_DESC("madds8", "int8", "int8", "int32", 2, 1),
     PAIR_IMPL("madds8", "tessera.avx2_madd_s8_8x2", "int8", "int8", "int32", 2,
               1),
     "avx512vnni", NULL},
    {"avx2_madd_s8_8x8", "avx2",
     PAIR_DESC("madds8k8", "int8", "int8", "int32", 8, 4),
     PAIR_IMPL("madds8k8", "tessera.avx2_madd_s8_8x8", "int8", "int8", "int32",
               8, 4),
     "avx512vnni", NULL},
    {"avx2_madd_u8_8x2", "avx2",
     PAIR_DESC("maddu8", "uint8", "int8", "int32", 2, 1),
     PAIR_IMPL("maddu8", "tessera.avx2_madd_u8_8x2", "uint8", "int8", "int32",
               2, 1),
     "avx512vnni", NULL},
    {"avx2_madd_u8_8x8", "avx2",
     PAIR_DESC("maddu8k8", "uint8", "int8", "int32", 8, 4),
     PAIR_IMPL("maddu8k8", "tessera.avx2_madd_u8_8x8", "uint8", "int8", "int32",
               8, 4),
     "avx512vnni", NULL},
    {"mma_m16n8k16_f16", "sm_80", MMA_DESC("mma_f16", "float16"),
     MMA_IMPL("mma_f16", "float16"), NULL, NULL},
    {"mma_m16n8k16_bf16", "sm_80", MMA_DESC("mma_bf16", "bfloat16"),
     MMA_IMPL("mma_bf16", "bfloat16"), NULL, NULL},
};

#define N_INTRINS ((int)(sizeof intrins / sizeof intrins[0]))

static const char *const names[] = {"amx_bf16_16x16x32",
                                    "amx_int8_16x16x64",
                                    "amx_uint8_16x16x64",
                                    "amx_bf16_32x32x128",
                                    "amx_bf16_32x32x512",
                                    "amx_int8_32x32x256",
                                    "amx_int8_32x32x1024",
                                    "amx_uint8_32x32x256",
                                    "amx_uint8_32x32x1024",
                                    "avx512_vnni_16x4",
                                    "avx512_vnni_16x16",
                                    "avx512_vnni_s8_16x4",
                                    "avx512_vnni_s8_16x16",
                                    "avx512_vnni_8x4",
                                    "avx512_vnni_8x16",
                                    "avx512_vnni_s8_8x4",
                                    "avx512_vnni_s8_8x16",
                                    "avx512_bf16_16x2",
                                    "avx2_madd_s8_8x2",
                                    "avx2_madd_s8_8x8",
                                    "avx2_madd_u8_8x2",
                                    "avx2_madd_u8_8x8",
                                    "mma_m16n8k16_f16",
                                    "mma_m16n8k16_bf16",
                                    NULL};

const char *const *ts_intrin_names(void) { return names; }

const char *ts_intrin_superseded_by(const char *name) {
  for (int i = 0; i < N_INTRINS; i++)
    if (!strcmp(intrins[i].name, name)) return intrins[i].superseded_by;
  return NULL;
}

const char *ts_intrin_also_needs(const char *name) {
  for (int i = 0; i < N_INTRINS; i++)
    if (!strcmp(intrins[i].name, name)) return intrins[i].also;
  return NULL;
}

/* ---- AMX: C[R, MN] += A[R, K] x B[K, MN] with B packed in pairs (bf16)
 * or quadruples (int8) of k: Bp[k / p][p * j + k % p] = B[k][j] ----
 * MN = 16: one tile per call (tessera.amx_*_gemm); MN = 32: a block of
 * 2 x 2 tiles kept in tile registers over the call's K (_gemm_blk, B's
 * rows 32 columns wide, the second tile 64 bytes in). The listed names
 * are a few K; ts_intrin_get answers to every K that is a multiple of
 * the packed group (2 for bf16, 4 for int8) up to AMX_MAX_STEPS tile
 * steps (32 for bf16, 64 for int8): "amx_int8_32x32x576", a K of 576
 * with no rest, or "amx_int8_32x32x1000", 15 whole steps and one of 40
 * (the code generator's narrower last step), so a product whose K none
 * of the listed ones divides keeps the long call. Each also has
 * row edges, "<name>_r<R>" (0 < R < MN): the same product over R rows
 * (_gemm_rows: the last row tile's A and C configured with the rows
 * left), so a product whose rows the tiles do not divide runs its last
 * rows on AMX too, reading the same packed B. */
typedef struct amx_form {
  const char *kind, *feature, *call; /* call: the one-tile form's name */
  const char *at, *bt, *ct;
  int p; /* k per packed element group; the tile step is 16 p */
} amx_form;

/* the most tile steps of one call (what the code generator unrolls) */
#define AMX_MAX_STEPS 32

#define AMX_BF16 "amx-bf16", "tessera.amx_bf16_gemm"
#define AMX_INT8 "amx-int8", "tessera.amx_int8_gemm"
static const amx_form amx_forms[] = {
    {"bf16", AMX_BF16, "bfloat16", "bfloat16", "float32", 2},
    {"int8", AMX_INT8, "int8", "int8", "int32", 4},
    {"uint8", AMX_INT8, "uint8", "int8", "int32", 4},
};
#undef AMX_BF16
#undef AMX_INT8

/* A decimal of 1 to 6 digits, no leading zero, at *s; advances *s. */
static bool parse_count(const char **s, int *out) {
  const char *d = *s;
  int v = 0;
  for (; *d >= '0' && *d <= '9' && d - *s < 6; d++) v = v * 10 + (*d - '0');
  if (d == *s || **s == '0' || (*d >= '0' && *d <= '9')) return false;
  *s = d;
  *out = v;
  return true;
}

/* The form of an AMX name "amx_<kind>_<MN>x<MN>x<K>[_r<R>]": its tile
 * columns (16 or 32), K and rows (MN, or R of an edge); NULL if it is
 * not one. */
static const amx_form *amx_form_of(const char *name, int *mn, int *k,
                                   int *rows) {
  if (strncmp(name, "amx_", 4)) return NULL;
  for (size_t i = 0; i < sizeof amx_forms / sizeof amx_forms[0]; i++) {
    const amx_form *f = &amx_forms[i];
    size_t n = strlen(f->kind);
    const char *s = name + 4 + n;
    if (strncmp(name + 4, f->kind, n) || *s++ != '_') continue;
    if (!strncmp(s, "16x16x", 6))
      *mn = 16;
    else if (!strncmp(s, "32x32x", 6))
      *mn = 32;
    else
      return NULL;
    s += 6;
    int step = 16 * f->p;
    if (!parse_count(&s, k) || *k % f->p || *k > step * AMX_MAX_STEPS)
      return NULL;
    *rows = *mn;
    if (!*s) return f;
    if (strncmp(s, "_r", 2)) return NULL;
    s += 2;
    if (!parse_count(&s, rows) || *s || *rows >= *mn) return NULL;
    return f;
  }
  return NULL;
}

static int amx_get(const amx_form *f, int mn, int k, int r, const char *name,
                   ts_func **desc, ts_func **impl, ts_error *err) {
  int brows = k / f->p, bcols = mn * f->p;
  char d[2048], m[2048], extra[64] = "";
  snprintf(d, sizeof d,
           "func amx_desc(A: %s[%d, %d], B: %s[%d, %d], C: %s[%d, %d]) {\n"
           "  block root() {\n"
           "    for i in range(%d) {\n"
           "      for j in range(%d) {\n"
           "        for k in range(%d) {\n"
           "          block update(vi: spatial(%d) = i, vj: spatial(%d) = j, "
           "vk: reduce(%d) = k) {\n"
           "            C[vi, vj] = C[vi, vj] + cast(%s, A[vi, vk]) * cast(%s, "
           "B[floordiv(vk, %d), vj * %d + floormod(vk, %d)])\n"
           "          }\n"
           "        }\n"
           "      }\n"
           "    }\n"
           "  }\n"
           "}\n",
           f->at, r, k, f->bt, brows, bcols, f->ct, r, mn, r, mn, k, r, mn, k,
           f->ct, f->ct, f->p, f->p, f->p);
  const char *suffix = "";
  if (r < mn) {
    suffix = "_rows";
    snprintf(extra, sizeof extra, ", int32(%d), int32(%d), int32(%d)",
             (r + 15) / 16, mn / 16, r);
  } else if (mn > 16) {
    suffix = "_blk";
    snprintf(extra, sizeof extra, ", int32(%d), int32(%d)", mn / 16, mn / 16);
  }
  static const char impl_fmt[] =
      "func amx_impl(A: %s[%d, %d], B: %s[%d, %d], C: %s[%d, %d]) {\n"
      "  block root() {\n"
      "    evaluate call<int32>(\"%s%s\", &C[0, 0], " STRIDE(
          "C") ", "
               "&A[0, 0], " STRIDE("A") ", &B[0, 0], " STRIDE(
                   "B") ", "
                        "int32(%d)%s)\n"
                        "  }\n"
                        "}\n";
  snprintf(m, sizeof m, impl_fmt, f->at, r, k, f->bt, brows, bcols, f->ct, r,
           mn, f->call, suffix, k, extra);
  int rc = ts_func_parse(d, strlen(d), name, desc, err);
  if (!rc && (rc = ts_func_parse(m, strlen(m), name, impl, err))) {
    ts_func_free(*desc);
    *desc = NULL;
  }
  return rc;
}

int ts_intrin_get(const char *name, ts_func **desc, ts_func **impl,
                  const char **feature, ts_error *err) {
  *desc = *impl = NULL;
  int mn = 0, k = 0, rows = 0;
  const amx_form *amx = amx_form_of(name, &mn, &k, &rows);
  if (amx) {
    if (feature) *feature = amx->feature;
    return amx_get(amx, mn, k, rows, name, desc, impl, err);
  }
  for (int i = 0; i < N_INTRINS; i++) {
    if (strcmp(intrins[i].name, name) != 0) continue;
    int rc = ts_func_parse(intrins[i].desc, strlen(intrins[i].desc),
                           intrins[i].name, desc, err);
    if (rc) return rc;
    rc = ts_func_parse(intrins[i].impl, strlen(intrins[i].impl),
                       intrins[i].name, impl, err);
    if (rc) {
      ts_func_free(*desc);
      *desc = NULL;
      return rc;
    }
    if (feature) *feature = intrins[i].feature;
    return TS_OK;
  }
  return TS_ERR(err, TS_ENOTFOUND,
                "no tensor intrinsic named '%s' (see ts_intrin_names)", name);
}
