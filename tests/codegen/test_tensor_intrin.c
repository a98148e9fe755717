/*
 * test_tensor_intrin.c — the target tensor intrinsics that tensorize calls:
 * AVX512-VNNI (vpdpbusd, 16 and 8 lanes), AVX2's multiply-add pairs (vpmaddwd,
 * exact at the operands' extremes), AVX512-BF16 (vdpbf16ps) and AMX (tdpbf16ps,
 * tdpbssd) tile matmuls compiled from TIR and compared with the reference
 * interpreter running the same computation written as plain loops; the
 * CUDA mma.sync m16n8k16 intrinsic emitted as PTX that ptxas accepts. Runs
 * that need a CPU feature this machine lacks are skipped with the reason
 * printed; compilation is still checked.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <unistd.h>

#include "check.h"

/* Overwrites some inputs of both argument sets alike before the run. */
typedef void (*fill_fn)(ts_rt_args *got, ts_rt_args *want, bool flag);

/* Whether asm has a line holding both `a` and `b`. */
static bool asm_line_has(const char *asm_text, const char *a, const char *b) {
  for (const char *p = strstr(asm_text, a); p; p = strstr(p + 1, a)) {
    const char *line = p, *end = strchr(p, '\n');
    while (line > asm_text && line[-1] != '\n') line--;
    const char *hit = strstr(line, b);
    if (hit && (!end || hit < end)) return true;
  }
  return false;
}

/* Compiles `intrin_text` for `target_str`, runs it (unless the CPU lacks
 * `feature`) and compares with the interpreter running `plain_text` (same
 * parameters, plain loops), the inputs seeded and then, when `fill` is not
 * NULL, changed by fill(..., flag). asm_needle must appear in the
 * assembly; "X&Y" asks for a line holding both X and Y. Returns whether it
 * ran. */
static bool compare_with(const char *intrin_text, const char *plain_text,
                         const char *target_str, const char *feature,
                         const char *asm_needle, fill_fn fill, bool flag) {
  ts_func *fi = NULL, *fp = NULL;
  ts_target *t = NULL;
  ts_error err;
  int rc = ts_func_parse(intrin_text, strlen(intrin_text), "intrin", &fi, &err);
  if (rc) printf("%s\n", err.msg);
  assert_int_equal(rc, TS_OK);
  rc = ts_func_parse(plain_text, strlen(plain_text), "plain", &fp, &err);
  if (rc) printf("%s\n", err.msg);
  assert_int_equal(rc, TS_OK);
  assert_int_equal(ts_target_parse(target_str, &t, &err), TS_OK);
  ts_build_options o = ts_build_defaults();
  o.keep_asm = true;
  ts_build_result br;
  rc = ts_build(fi, t, &o, &br, &err);
  if (rc) printf("build: %s\n", err.msg);
  assert_int_equal(rc, TS_OK);
  char needle[64];
  snprintf(needle, sizeof needle, "%s", asm_needle);
  char *both = strchr(needle, '&');
  if (both) *both++ = 0;
  if (both ? !asm_line_has(br.assembly, needle, both)
           : !strstr(br.assembly, needle))
    fail_msg("no %s%s%s in the assembly", needle, both ? " with " : "",
             both ? both : "");
  bool ran = ts_rt_cpu_has(feature) == 1;
  if (!ran) {
    printf("run skipped: this CPU lacks %s (compiled for '%s' and checked "
           "the assembly for %s only)\n",
           feature, target_str, asm_needle);
  } else {
    if (strncmp(feature, "amx", 3) == 0)
      assert_int_equal(ts_rt_enable_amx(&err), TS_OK);
    ts_rt_kernel *k = NULL;
    assert_int_equal(ts_rt_kernel_load(br.artifact->bytes, br.artifact->n_bytes,
                                       br.artifact->entry, &k, &err),
                     TS_OK);
    ts_rt_arg_spec *specs = check_specs(br.artifact);
    ts_rt_args *got = NULL, *want = NULL;
    assert_int_equal(
        ts_rt_args_create(specs, br.artifact->n_args, 5, &got, &err), TS_OK);
    assert_int_equal(
        ts_rt_args_create(specs, br.artifact->n_args, 5, &want, &err), TS_OK);
    if (fill) fill(got, want, flag);
    assert_int_equal(ts_rt_kernel_call(k, ts_rt_args_data(got), NULL, &err),
                     TS_OK);
    assert_int_equal(ts_interp_run(fp, ts_rt_args_data(want),
                                   ts_rt_args_count(want), NULL, &err),
                     TS_OK);
    rc = ts_rt_args_compare(got, want, &err);
    if (rc) printf("%s\n", err.msg);
    assert_int_equal(rc, TS_OK);
    ts_rt_args_free(got);
    ts_rt_args_free(want);
    free(specs);
    ts_rt_kernel_unload(k);
  }
  ts_build_result_clear(&br);
  ts_target_free(t);
  ts_func_free(fi);
  ts_func_free(fp);
  return ran;
}

/* Building `text` for `target_str` is refused (TS_EUNSUPPORTED) with a
 * message containing `needle`. */
static void expect_refused(const char *text, const char *target_str,
                           const char *needle) {
  ts_func *f = NULL;
  ts_target *t = NULL;
  ts_error err;
  assert_int_equal(ts_func_parse(text, strlen(text), "t", &f, &err), TS_OK);
  assert_int_equal(ts_target_parse(target_str, &t, &err), TS_OK);
  ts_build_result br;
  assert_int_equal(ts_build(f, t, NULL, &br, &err), TS_EUNSUPPORTED);
  if (!strstr(err.msg, needle))
    fail_msg("refused without \"%s\": %s", needle, err.msg);
  ts_target_free(t);
  ts_func_free(f);
}

/* compare_with, seeded inputs only; where the CPU lacks the feature the
 * test is reported as skipped after the compile and assembly checks. */
static void compare(const char *intrin_text, const char *plain_text,
                    const char *target_str, const char *feature,
                    const char *asm_needle) {
  if (!compare_with(intrin_text, plain_text, target_str, feature, asm_needle,
                    NULL, false))
    skip();
}

static void test_vnni(void **state) {
  (void)state;
  const char *intrin =
      "func vnni(A: uint8[64], B: int8[16, 16, 4], C: int32[16]) {\n"
      "  for j in range(16) {\n    C[j] = int32(0)\n  }\n"
      "  for ko in range(16) {\n"
      "    evaluate call<int32>(\"tessera.vnni_dot_16x4\", &C[0], &A[ko * 4], "
      "&B[ko, 0, 0])\n"
      "  }\n}\n";
  const char *plain =
      "func plain(A: uint8[64], B: int8[16, 16, 4], C: int32[16]) {\n"
      "  for j in range(16) {\n    C[j] = int32(0)\n"
      "    for k in range(64) {\n"
      "      C[j] = C[j] + cast(int32, A[k]) * cast(int32, B[floordiv(k, 4), "
      "j, floormod(k, 4)])\n"
      "    }\n  }\n}\n";
  compare(intrin, plain, "llvm -mcpu=cascadelake", "avx512vnni", "vpdpbusd");
}

/* Fills args 0 (A) and 1 (B) of both sets with the extremes of their
 * types and values between: pair sums of 2 * 255 * -128 (unsigned A) and
 * 2 * -128 * -128 (signed A) are among them, which a 16-bit multiply-add
 * would saturate; the kernel must stay exact. */
static void fill_extremes(ts_rt_args *got, ts_rt_args *want, bool a_unsigned) {
  static const int8_t s8[] = {-128, 127, -128, -128, 127, 127, -1, 0, 1, -77};
  static const uint8_t u8[] = {255, 255, 0, 128, 254, 1, 255, 7, 200, 99};
  for (int arg = 0; arg < 2; arg++) {
    int64_t n = ts_rt_args_elems(got, arg);
    for (int64_t i = 0; i < n; i++) {
      int8_t v = arg == 0 && a_unsigned ? (int8_t)u8[(i * 7 + arg) % 10]
                                        : s8[(i * 3 + 2 * arg) % 10];
      ((int8_t *)ts_rt_args_data(got)[arg])[i] = v;
      ((int8_t *)ts_rt_args_data(want)[arg])[i] = v;
    }
  }
}

/* AVX2's exact multiply-add pairs: C[j] over K = 32 in steps of 2 (8x2) or
 * 8 (8x8), A signed or unsigned, B packed as [K / 2][8][2], operands at
 * their extremes. */
static void test_avx2_madd(void **state) {
  (void)state;
  for (int v = 0; v < 4; v++) {
    bool u8 = v & 1, k8 = v & 2;
    const char *at = u8 ? "uint8" : "int8";
    char name[48], intrin[1024], plain[1024];
    snprintf(name, sizeof name, "tessera.avx2_madd_%s_8x%d", u8 ? "u8" : "s8",
             k8 ? 8 : 2);
    snprintf(intrin, sizeof intrin,
             "func madd(A: %s[32], B: int8[16, 8, 2], C: int32[8]) {\n"
             "  for j in range(8) {\n    C[j] = int32(0)\n  }\n"
             "  for ko in range(%d) {\n"
             "    evaluate call<int32>(\"%s\", &C[0], &A[ko * %d], "
             "&B[ko * %d, 0, 0])\n"
             "  }\n}\n",
             at, k8 ? 4 : 16, name, k8 ? 8 : 2, k8 ? 4 : 1);
    snprintf(plain, sizeof plain,
             "func plain(A: %s[32], B: int8[16, 8, 2], C: int32[8]) {\n"
             "  for j in range(8) {\n    C[j] = int32(0)\n"
             "    for k in range(32) {\n"
             "      C[j] = C[j] + cast(int32, A[k]) * cast(int32, "
             "B[floordiv(k, 2), j, floormod(k, 2)])\n"
             "    }\n  }\n}\n",
             at);
    if (!compare_with(intrin, plain, "llvm -mcpu=haswell", "avx2", "vpmaddwd",
                      fill_extremes, u8))
      skip();
  }
}

/* The 8-lane VNNI dots (AVX512VL's 256-bit vpdpbusd), for the columns
 * tiles of 16 leave: C[j] over K = 64 in calls of 4 (8x4) or 16 (8x16), A
 * unsigned or signed (the biased form), operands at their extremes. */
static void test_vnni8(void **state) {
  (void)state;
  for (int v = 0; v < 4; v++) {
    bool u8 = v & 1, k16 = v & 2;
    const char *at = u8 ? "uint8" : "int8";
    char name[48], intrin[1024], plain[1024];
    snprintf(name, sizeof name, "tessera.vnni%s_dot_8x%d", u8 ? "" : "_s8",
             k16 ? 16 : 4);
    snprintf(intrin, sizeof intrin,
             "func vnni8(A: %s[64], B: int8[16, 8, 4], C: int32[8]) {\n"
             "  for j in range(8) {\n    C[j] = int32(0)\n  }\n"
             "  for ko in range(%d) {\n"
             "    evaluate call<int32>(\"%s\", &C[0], &A[ko * %d], "
             "&B[ko * %d, 0, 0])\n"
             "  }\n}\n",
             at, k16 ? 4 : 16, name, k16 ? 16 : 4, k16 ? 4 : 1);
    snprintf(plain, sizeof plain,
             "func plain(A: %s[64], B: int8[16, 8, 4], C: int32[8]) {\n"
             "  for j in range(8) {\n    C[j] = int32(0)\n"
             "    for k in range(64) {\n"
             "      C[j] = C[j] + cast(int32, A[k]) * cast(int32, "
             "B[floordiv(k, 4), j, floormod(k, 4)])\n"
             "    }\n  }\n}\n",
             at);
    if (!compare_with(intrin, plain, "llvm -mcpu=cascadelake", "avx512vnni",
                      "vpdpbusd&%ymm", fill_extremes, u8))
      skip();
  }
}

static void test_avx512_bf16(void **state) {
  (void)state;
  const char *intrin =
      "func bdot(A: bfloat16[64], B: bfloat16[32, 16, 2], C: float32[16]) {\n"
      "  for j in range(16) {\n    C[j] = float32(0)\n  }\n"
      "  for ko in range(32) {\n"
      "    evaluate call<int32>(\"tessera.avx512bf16_dot_16x2\", &C[0], &A[ko "
      "* 2], &B[ko, 0, 0])\n"
      "  }\n}\n";
  const char *plain =
      "func plain(A: bfloat16[64], B: bfloat16[32, 16, 2], C: float32[16]) {\n"
      "  for j in range(16) {\n    C[j] = float32(0)\n"
      "    for k in range(64) {\n"
      "      C[j] = C[j] + cast(float32, A[k]) * cast(float32, B[floordiv(k, "
      "2), j, floormod(k, 2)])\n"
      "    }\n  }\n}\n";
  compare(intrin, plain, "llvm -mcpu=cooperlake", "avx512bf16", "vdpbf16ps");
}

/* A 32x32 output from 16x16 AMX tiles, K = 64 (two bf16 steps). */
static void test_amx_bf16(void **state) {
  (void)state;
  const char *intrin = "func amx(A: bfloat16[32, 64], Bp: bfloat16[32, 64], C: "
                       "float32[32, 32]) {\n"
                       "  for i in range(32) {\n    for j in range(32) {\n     "
                       " C[i, j] = float32(0)\n    }\n  }\n"
                       "  for io in range(2) {\n    for jo in range(2) {\n"
                       "      evaluate call<int32>(\"tessera.amx_bf16_gemm\", "
                       "&C[io * 16, jo * 16], 32, "
                       "&A[io * 16, 0], 64, &Bp[0, jo * 32], 64, 64)\n"
                       "    }\n  }\n}\n";
  const char *plain =
      "func plain(A: bfloat16[32, 64], Bp: bfloat16[32, 64], C: float32[32, "
      "32]) {\n"
      "  for i in range(32) {\n    for j in range(32) {\n      C[i, j] = "
      "float32(0)\n"
      "      for k in range(64) {\n"
      "        C[i, j] = C[i, j] + cast(float32, A[i, k]) * cast(float32, "
      "Bp[floordiv(k, 2), j * 2 + floormod(k, 2)])\n"
      "      }\n    }\n  }\n}\n";
  compare(intrin, plain, "llvm -mcpu=sapphirerapids", "amx-bf16", "tdpbf16ps");
}

static void test_amx_int8(void **state) {
  (void)state;
  const char *intrin =
      "func amx8(A: int8[16, 128], Bp: int8[32, 64], C: int32[16, 16]) {\n"
      "  for i in range(16) {\n    for j in range(16) {\n      C[i, j] = "
      "int32(0)\n    }\n  }\n"
      "  evaluate call<int32>(\"tessera.amx_int8_gemm\", &C[0, 0], 16, &A[0, "
      "0], 128, "
      "&Bp[0, 0], 64, 128)\n}\n";
  const char *plain =
      "func plain(A: int8[16, 128], Bp: int8[32, 64], C: int32[16, 16]) {\n"
      "  for i in range(16) {\n    for j in range(16) {\n      C[i, j] = "
      "int32(0)\n"
      "      for k in range(128) {\n"
      "        C[i, j] = C[i, j] + cast(int32, A[i, k]) * cast(int32, "
      "Bp[floordiv(k, 4), j * 4 + floormod(k, 4)])\n"
      "      }\n    }\n  }\n}\n";
  compare(intrin, plain, "llvm -mcpu=sapphirerapids", "amx-int8", "tdpbssd");
}

/* The blocked form: 2 x 2 tiles kept in tile registers over K = 128 (four
 * bf16 steps), placed over a 64 x 64 output of row stride 64 (B's rows 64
 * columns wide, the block's second tile 64 bytes in). */
static void test_amx_bf16_blocked(void **state) {
  (void)state;
  const char *intrin =
      "func amx(A: bfloat16[64, 128], Bp: bfloat16[64, 128], C: "
      "float32[64, 64]) {\n"
      "  for i in range(64) {\n    for j in range(64) {\n     "
      " C[i, j] = float32(0)\n    }\n  }\n"
      "  for io in range(2) {\n    for jo in range(2) {\n"
      "      evaluate call<int32>(\"tessera.amx_bf16_gemm_blk\", "
      "&C[io * 32, jo * 32], 64, &A[io * 32, 0], 128, &Bp[0, jo * 64], 128, "
      "128, 2, 2)\n"
      "    }\n  }\n}\n";
  const char *plain =
      "func plain(A: bfloat16[64, 128], Bp: bfloat16[64, 128], C: "
      "float32[64, 64]) {\n"
      "  for i in range(64) {\n    for j in range(64) {\n      C[i, j] = "
      "float32(0)\n"
      "      for k in range(128) {\n"
      "        C[i, j] = C[i, j] + cast(float32, A[i, k]) * cast(float32, "
      "Bp[floordiv(k, 2), j * 2 + floormod(k, 2)])\n"
      "      }\n    }\n  }\n}\n";
  compare(intrin, plain, "llvm -mcpu=sapphirerapids", "amx-bf16", "tdpbf16ps");
}

/* 3 x 1 tiles of int8 (uint8 A: tdpbusd), K = 128; and tile counts that
 * need more than the 8 tile registers are refused by name. */
static void test_amx_int8_blocked(void **state) {
  (void)state;
  const char *intrin =
      "func amx8(A: uint8[48, 128], Bp: int8[32, 64], C: int32[48, 16]) {\n"
      "  for i in range(48) {\n    for j in range(16) {\n      C[i, j] = "
      "int32(0)\n    }\n  }\n"
      "  evaluate call<int32>(\"tessera.amx_int8_gemm_blk\", &C[0, 0], 16, "
      "&A[0, 0], 128, &Bp[0, 0], 64, 128, 3, 1)\n}\n";
  const char *plain =
      "func plain(A: uint8[48, 128], Bp: int8[32, 64], C: int32[48, 16]) {\n"
      "  for i in range(48) {\n    for j in range(16) {\n      C[i, j] = "
      "int32(0)\n"
      "      for k in range(128) {\n"
      "        C[i, j] = C[i, j] + cast(int32, A[i, k]) * cast(int32, "
      "Bp[floordiv(k, 4), j * 4 + floormod(k, 4)])\n"
      "      }\n    }\n  }\n}\n";
  compare(intrin, plain, "llvm -mcpu=sapphirerapids", "amx-int8", "tdpbusd");
  const char *big =
      "func amx8(A: int8[48, 128], Bp: int8[32, 192], C: int32[48, 48]) {\n"
      "  evaluate call<int32>(\"tessera.amx_int8_gemm_blk\", &C[0, 0], 48, "
      "&A[0, 0], 128, &Bp[0, 0], 192, 128, 3, 3)\n}\n";
  expect_refused(big, "llvm -mcpu=sapphirerapids", "8 tile registers");
}

/* The rows form: a 2 x 2 block (all eight tile registers) and, in the
 * same function, the last 21 rows of a 53-row product (a 16-row tile and
 * a 5-row one, two column tiles); then a row count outside its tiles is
 * refused by name. */
static void test_amx_int8_rows(void **state) {
  (void)state;
  const char *intrin =
      "func amxr(A: int8[53, 256], Bp: int8[64, 128], C: int32[53, 32]) {\n"
      "  for i in range(53) {\n    for j in range(32) {\n      C[i, j] = "
      "int32(0)\n    }\n  }\n"
      "  evaluate call<int32>(\"tessera.amx_int8_gemm_blk\", &C[0, 0], 32, "
      "&A[0, 0], 256, &Bp[0, 0], 128, 256, 2, 2)\n"
      "  evaluate call<int32>(\"tessera.amx_int8_gemm_rows\", &C[32, 0], 32, "
      "&A[32, 0], 256, &Bp[0, 0], 128, 256, 2, 2, 21)\n}\n";
  const char *plain =
      "func plain(A: int8[53, 256], Bp: int8[64, 128], C: int32[53, 32]) {\n"
      "  for i in range(53) {\n    for j in range(32) {\n      C[i, j] = "
      "int32(0)\n"
      "      for k in range(256) {\n"
      "        C[i, j] = C[i, j] + cast(int32, A[i, k]) * cast(int32, "
      "Bp[floordiv(k, 4), j * 4 + floormod(k, 4)])\n"
      "      }\n    }\n  }\n}\n";
  compare(intrin, plain, "llvm -mcpu=sapphirerapids", "amx-int8", "tdpbssd");
  const char *bad =
      "func amxr(A: int8[53, 256], Bp: int8[64, 128], C: int32[53, 32]) {\n"
      "  evaluate call<int32>(\"tessera.amx_int8_gemm_rows\", &C[0, 0], 32, "
      "&A[0, 0], 256, &Bp[0, 0], 128, 256, 2, 2, 40)\n}\n";
  expect_refused(bad, "llvm -mcpu=sapphirerapids", "row count R");
}

/* A K that whole tile steps do not divide ends with one narrower step in
 * a function of its own: int8 K = 104 (a step of 64, then 40) over a 2 x 2
 * block and a 21-row edge in one function; int8 K = 40 (no whole step) and
 * bf16 K = 40 (a step of 32, then 8) on single tiles. A K that is not a
 * multiple of the packed group is refused by name. */
static void test_amx_k_tail(void **state) {
  (void)state;
  const char *intrin =
      "func amxk(A: int8[53, 104], Bp: int8[26, 128], C: int32[53, 32]) {\n"
      "  for i in range(53) {\n    for j in range(32) {\n      C[i, j] = "
      "int32(0)\n    }\n  }\n"
      "  evaluate call<int32>(\"tessera.amx_int8_gemm_blk\", &C[0, 0], 32, "
      "&A[0, 0], 104, &Bp[0, 0], 128, 104, 2, 2)\n"
      "  evaluate call<int32>(\"tessera.amx_int8_gemm_rows\", &C[32, 0], 32, "
      "&A[32, 0], 104, &Bp[0, 0], 128, 104, 2, 2, 21)\n}\n";
  const char *plain =
      "func plain(A: int8[53, 104], Bp: int8[26, 128], C: int32[53, 32]) {\n"
      "  for i in range(53) {\n    for j in range(32) {\n      C[i, j] = "
      "int32(0)\n"
      "      for k in range(104) {\n"
      "        C[i, j] = C[i, j] + cast(int32, A[i, k]) * cast(int32, "
      "Bp[floordiv(k, 4), j * 4 + floormod(k, 4)])\n"
      "      }\n    }\n  }\n}\n";
  compare(intrin, plain, "llvm -mcpu=sapphirerapids", "amx-int8", "tdpbssd");
  const char *short_k =
      "func amxs(A: uint8[16, 40], Bp: int8[10, 64], C: int32[16, 16]) {\n"
      "  for i in range(16) {\n    for j in range(16) {\n      C[i, j] = "
      "int32(0)\n    }\n  }\n"
      "  evaluate call<int32>(\"tessera.amx_int8_gemm\", &C[0, 0], 16, "
      "&A[0, 0], 40, &Bp[0, 0], 64, 40)\n}\n";
  const char *short_plain =
      "func plain(A: uint8[16, 40], Bp: int8[10, 64], C: int32[16, 16]) {\n"
      "  for i in range(16) {\n    for j in range(16) {\n      C[i, j] = "
      "int32(0)\n"
      "      for k in range(40) {\n"
      "        C[i, j] = C[i, j] + cast(int32, A[i, k]) * cast(int32, "
      "Bp[floordiv(k, 4), j * 4 + floormod(k, 4)])\n"
      "      }\n    }\n  }\n}\n";
  compare(short_k, short_plain, "llvm -mcpu=sapphirerapids", "amx-int8",
          "tdpbusd");
  const char *bf =
      "func amxb(A: bfloat16[16, 40], Bp: bfloat16[20, 32], C: "
      "float32[16, 16]) {\n"
      "  for i in range(16) {\n    for j in range(16) {\n      C[i, j] = "
      "float32(0)\n    }\n  }\n"
      "  evaluate call<int32>(\"tessera.amx_bf16_gemm\", &C[0, 0], 16, "
      "&A[0, 0], 40, &Bp[0, 0], 32, 40)\n}\n";
  const char *bf_plain =
      "func plain(A: bfloat16[16, 40], Bp: bfloat16[20, 32], C: "
      "float32[16, 16]) {\n"
      "  for i in range(16) {\n    for j in range(16) {\n      C[i, j] = "
      "float32(0)\n"
      "      for k in range(40) {\n"
      "        C[i, j] = C[i, j] + cast(float32, A[i, k]) * cast(float32, "
      "Bp[floordiv(k, 2), j * 2 + floormod(k, 2)])\n"
      "      }\n    }\n  }\n}\n";
  compare(bf, bf_plain, "llvm -mcpu=sapphirerapids", "amx-bf16", "tdpbf16ps");
  const char *bad =
      "func amxk(A: int8[16, 102], Bp: int8[26, 64], C: int32[16, 16]) {\n"
      "  evaluate call<int32>(\"tessera.amx_int8_gemm\", &C[0, 0], 16, "
      "&A[0, 0], 102, &Bp[0, 0], 64, 102)\n}\n";
  expect_refused(bad, "llvm -mcpu=sapphirerapids", "multiple of 4");
}

/* A target without the feature gets a clear error, not a backend crash. */
static void test_missing_feature(void **state) {
  (void)state;
  const char *text = "func amx(A: bfloat16[16, 32], Bp: bfloat16[16, 32], C: "
                     "float32[16, 16]) {\n"
                     "  evaluate call<int32>(\"tessera.amx_bf16_gemm\", &C[0, "
                     "0], 16, &A[0, 0], 32, "
                     "&Bp[0, 0], 32, 32)\n}\n";
  expect_refused(text, "llvm -mcpu=skylake-avx512", "amx");
}

static void test_mma_ptx(void **state) {
  (void)state;
  const char *text =
      "func mma(A: float16[16, 16], B: float16[16, 8], C: float32[16, 8]) {\n"
      "  for tx in range(32) thread(\"threadIdx.x\") {\n"
      "    evaluate call<int32>(\"tessera.mma_m16n8k16\", &C[0, 0], 8, &A[0, "
      "0], 16, &B[0, 0], 8)\n"
      "  }\n}\n";
  const char *texts[2] = {text, NULL};
  /* bfloat16 variant: same program with bfloat16 inputs */
  static const char bf16_text[] =
      "func mma(A: bfloat16[16, 16], B: bfloat16[16, 8], C: float32[16, 8]) {\n"
      "  for tx in range(32) thread(\"threadIdx.x\") {\n"
      "    evaluate call<int32>(\"tessera.mma_m16n8k16\", &C[0, 0], 8, &A[0, "
      "0], 16, &B[0, 0], 8)\n"
      "  }\n}\n";
  texts[1] = bf16_text;
  for (int v = 0; v < 2; v++) {
    ts_func *f = NULL;
    ts_target *t = NULL;
    ts_error err;
    assert_int_equal(ts_func_parse(texts[v], strlen(texts[v]), "mma", &f, &err),
                     TS_OK);
    assert_int_equal(ts_target_parse("cuda -arch=sm_80", &t, &err), TS_OK);
    ts_build_result br;
    int rc = ts_build(f, t, NULL, &br, &err);
    if (rc) printf("%s\n", err.msg);
    assert_int_equal(rc, TS_OK);
    assert_non_null(
        strstr((char *)br.artifact->bytes, "mma.sync.aligned.m16n8k16"));
    if (access("/usr/local/cuda/bin/ptxas", X_OK) == 0) {
      char tmpl[] = "/tmp/ts-mma-XXXXXX";
      int fd = mkstemp(tmpl);
      assert_true(fd >= 0);
      assert_int_equal(write(fd, br.artifact->bytes, br.artifact->n_bytes),
                       (ssize_t)br.artifact->n_bytes);
      close(fd);
      char cmd[512];
      snprintf(cmd, sizeof cmd,
               "/usr/local/cuda/bin/ptxas -arch=sm_80 %s -o /dev/null", tmpl);
      int status = system(cmd);
      unlink(tmpl);
      assert_int_equal(status, 0);
    } else {
      printf("ptxas check skipped: ptxas not found\n");
    }
    /* sm_70 has no m16n8k16 */
    ts_target *old = NULL;
    assert_int_equal(ts_target_parse("cuda -arch=sm_70", &old, &err), TS_OK);
    ts_build_result br2;
    assert_int_equal(ts_build(f, old, NULL, &br2, &err), TS_EUNSUPPORTED);
    ts_target_free(old);
    ts_build_result_clear(&br);
    ts_target_free(t);
    ts_func_free(f);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_vnni),
      cmocka_unit_test(test_vnni8),
      cmocka_unit_test(test_avx2_madd),
      cmocka_unit_test(test_avx512_bf16),
      cmocka_unit_test(test_amx_bf16),
      cmocka_unit_test(test_amx_int8),
      cmocka_unit_test(test_amx_bf16_blocked),
      cmocka_unit_test(test_amx_int8_blocked),
      cmocka_unit_test(test_amx_int8_rows),
      cmocka_unit_test(test_amx_k_tail),
      cmocka_unit_test(test_missing_feature),
      cmocka_unit_test(test_mma_ptx),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
