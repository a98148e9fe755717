/*
 * test_tensorize.c — blockize/tensorize onto the registered tensor
 * intrinsics: the registry itself; AVX512-VNNI and AVX512-BF16 dot
 * products tensorized, compiled and run against the interpreter of the
 * unscheduled function (when this CPU has the feature); AMX bf16 and int8
 * tiles tensorized and compiled for a Sapphire Rapids target (assembly
 * checked; run only on a CPU with AMX); CUDA mma.sync matched; and the
 * printed results compared with golden files.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "util.h"

#define OK(x)                                                                  \
  do {                                                                         \
    int rc_ = (x);                                                             \
    if (rc_) fprintf(stderr, "%s: %s\n", #x, ts_sched_errmsg(s));              \
    assert_int_equal(rc_, TS_OK);                                              \
  } while (0)

static char *read_file(const char *path) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return NULL;
  fseek(fp, 0, SEEK_END);
  long n = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  size_t got = fread(buf, 1, (size_t)n, fp);
  buf[got] = 0;
  fclose(fp);
  return buf;
}

/* Golden comparison of script + function (TS_UPDATE_GOLDEN=1 rewrites). */
static void golden(ts_sched *s, const char *name) {
  char *script = ts_trace_print(ts_sched_trace(s));
  char *func = util_print(s);
  size_t n = strlen(script) + strlen(func) + 8;
  char *got = malloc(n);
  snprintf(got, n, "%s---\n%s", script, func);
  char path[512];
  snprintf(path, sizeof path, "%s/tests/schedule/golden/%s.txt", TS_SOURCE_DIR,
           name);
  const char *update = getenv("TS_UPDATE_GOLDEN");
  if (update && strcmp(update, "1") == 0) {
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    fputs(got, fp);
    fclose(fp);
  }
  char *want = read_file(path);
  assert_non_null(want);
  if (strcmp(want, got) != 0) fprintf(stderr, "got:\n%s\n", got);
  assert_string_equal(want, got);
  /* the trace replays from JSON to the same function */
  char *json = ts_trace_to_json(ts_sched_trace(s));
  ts_trace *t;
  ts_sched *r;
  ts_error err;
  assert_int_equal(ts_trace_from_json(json, strlen(json), &t, &err), TS_OK);
  assert_int_equal(ts_trace_apply(t, ts_sched_original(s), 0, &r, &err), TS_OK);
  char *again = util_print(r);
  assert_string_equal(func, again);
  free(again);
  ts_sched_destroy(r);
  ts_trace_free(t);
  free(json);
  free(want);
  free(got);
  free(script);
  free(func);
}

/* Compiles for `target` (NULL: host); when the CPU has `feature`, runs on 2
 * threads and compares with the unscheduled function interpreted. Checks
 * that the assembly contains `needle`. Returns whether it ran: the caller
 * frees what it holds and reports the test skipped when not. */
static bool compile_and_run(ts_sched *s, const char *target,
                            const char *feature, const char *needle) {
  ts_target *t;
  ts_error err;
  if (target)
    assert_int_equal(ts_target_parse(target, &t, &err), TS_OK);
  else
    assert_int_equal(ts_target_host(&t, &err), TS_OK);
  ts_build_options o = ts_build_defaults();
  o.keep_asm = true;
  o.lower.verify_between = true;
  ts_build_result br;
  int rc = ts_build(ts_sched_func(s), t, &o, &br, &err);
  if (rc) fprintf(stderr, "build: %s\n", err.msg);
  assert_int_equal(rc, TS_OK);
  assert_non_null(strstr(br.assembly, needle));
  ts_build_result_clear(&br);
  ts_target_free(t);
  if (ts_rt_cpu_has(feature) != 1) {
    printf("run skipped: this CPU lacks %s (compiled for '%s' and checked "
           "the assembly for %s only)\n",
           feature, target ? target : "the host", needle);
    return false;
  }
  if (strncmp(feature, "amx", 3) == 0)
    assert_int_equal(ts_rt_enable_amx(&err), TS_OK);
  ts_rt_args *want;
  assert_int_equal(util_reference(ts_sched_original(s), 7, &want, &err), TS_OK);
  rc = util_check_against(ts_sched_func(s), want, 7, 2, false, &err);
  if (rc) fprintf(stderr, "run: %s\n", err.msg);
  assert_int_equal(rc, TS_OK);
  ts_rt_args_free(want);
  return true;
}

static void test_registry(void **state) {
  (void)state;
  const char *const *names = ts_intrin_names();
  int n = 0;
  for (; names[n]; n++) {
    ts_func *d, *i;
    const char *feature = NULL;
    ts_error err;
    int rc = ts_intrin_get(names[n], &d, &i, &feature, &err);
    if (rc) fprintf(stderr, "%s: %s\n", names[n], err.msg);
    assert_int_equal(rc, TS_OK);
    assert_non_null(feature);
    assert_int_equal(ts_func_n_params(d), ts_func_n_params(i));
    assert_int_equal(ts_func_verify(d, NULL), TS_OK);
    ts_func_free(d);
    ts_func_free(i);
  }
  assert_int_equal(n, 24);
  /* the 8-lane VNNI dots need AVX512VL too */
  assert_string_equal(ts_intrin_also_needs("avx512_vnni_s8_8x16"), "avx512vl");
  assert_null(ts_intrin_also_needs("avx512_vnni_s8_16x16"));
  assert_null(ts_intrin_also_needs("nope"));
  /* AVX2's multiply-add pairs give way to VNNI; VNNI to nothing */
  assert_string_equal(ts_intrin_superseded_by("avx2_madd_s8_8x8"),
                      "avx512vnni");
  assert_null(ts_intrin_superseded_by("avx512_vnni_s8_16x16"));
  assert_null(ts_intrin_superseded_by("nope"));
  ts_func *d = (ts_func *)1, *i = (ts_func *)1;
  assert_int_equal(ts_intrin_get("nope", &d, &i, NULL, NULL), TS_ENOTFOUND);
  assert_null(d);
  assert_null(i);
  /* the AMX row edges: 0 < R < the tile rows, no leading zero */
  const char *feature = NULL;
  assert_int_equal(
      ts_intrin_get("amx_int8_32x32x256_r23", &d, &i, &feature, NULL), TS_OK);
  assert_string_equal(feature, "amx-int8");
  assert_int_equal(ts_func_verify(d, NULL), TS_OK);
  char *text = ts_func_print(i);
  assert_non_null(strstr(text, "tessera.amx_int8_gemm_rows"));
  assert_non_null(strstr(text, "int32(2), int32(2), int32(23))"));
  free(text);
  ts_func_free(d);
  ts_func_free(i);
  static const char *const bad[] = {
      "amx_int8_32x32x256_r0",  "amx_int8_32x32x256_r32",
      "amx_int8_32x32x256_r05", "amx_int8_16x16x64_r16",
      "amx_int8_16x16x64_r",    "amx_int8_16x16x64_r3x",
      "avx512_vnni_16x4_r3"};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
    assert_int_equal(ts_intrin_get(bad[k], &d, &i, NULL, NULL), TS_ENOTFOUND);
}

/* int8 dense: Y[i, j] += X[i, k] (uint8) * W[j, k] (int8), W packed so a
 * 16 x 4 tile is contiguous, j by 16 and k by 4 tensorized with vpdpbusd. */
static const char *const dense_u8s8 =
    "func dense(X: uint8[4, 64], W: int8[32, 64], Y: int32[4, 32]) {\n"
    "  block root() {\n"
    "    for i in range(4) {\n"
    "      for j in range(32) {\n"
    "        for k in range(64) {\n"
    "          block Y(vi: spatial(4) = i, vj: spatial(32) = j, "
    "vk: reduce(64) = k) {\n"
    "            init {\n"
    "              Y[vi, vj] = int32(0)\n"
    "            }\n"
    "            Y[vi, vj] = Y[vi, vj] + cast(int32, X[vi, vk]) * "
    "cast(int32, W[vj, vk])\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

static void test_vnni(void **state) {
  (void)state;
  ts_sched *s = util_sched_text(dense_u8s8);
  assert_non_null(s);
  ts_rv b, l[3], j2[2], k2[2], init, p;
  int n;
  OK(ts_sched_get_block(s, "Y", &b));
  OK(ts_sched_get_loops(s, b, l, 3, &n));
  int64_t fj[2] = {TS_SPLIT_INFER, 16}, fk[2] = {TS_SPLIT_INFER, 4};
  OK(ts_sched_split(s, l[1], fj, 2, j2));
  OK(ts_sched_split(s, l[2], fk, 2, k2));
  ts_rv order[5] = {l[0], j2[0], k2[0], j2[1], k2[1]};
  OK(ts_sched_reorder(s, order, 5));
  OK(ts_sched_decompose_reduction(s, b, k2[0], &init));
  OK(ts_sched_cache_read(s, b, "W", "global", &p));
  OK(ts_sched_transform_layout(s, p, "W_global",
                               "(j, k) -> (floordiv(j, 16), floordiv(k, 4), "
                               "floormod(j, 16), floormod(k, 4))"));
  OK(ts_sched_tensorize(s, j2[1], "avx512_vnni_16x4"));
  OK(ts_sched_parallel(s, l[0]));
  golden(s, "tensorize_vnni");
  bool ran = compile_and_run(s, "llvm -mcpu=cascadelake -num-cores=2",
                             "avx512vnni", "vpdpbusd");
  ts_sched_destroy(s);
  if (!ran) skip();
}

/* shift_int8: the signed product of an int8 dense rewritten as uint8 A +
 * 128 with -128 * the sums of W as the init; the same values as the
 * unscheduled function interpreted, then tensorized onto the uint8 x int8
 * VNNI dot (no compensation in the call) and run. */
static void test_shift_int8(void **state) {
  (void)state;
  char text[1024];
  snprintf(text, sizeof text, "%s", dense_u8s8);
  char *x = strstr(text, "X: uint8");
  assert_non_null(x);
  memcpy(x, "X:  int8", 8);
  ts_sched *s = util_sched_text(text);
  assert_non_null(s);
  ts_rv b, l[3], j2[2], k2[2], init, p, blocks[2];
  int n;
  OK(ts_sched_get_block(s, "Y", &b));
  /* refusals: an operand that is not int8, a buffer the block does not
   * multiply, the accumulator */
  assert_int_equal(ts_sched_shift_int8(s, b, "W_nope", blocks), TS_ESCHEDULE);
  assert_non_null(strstr(ts_sched_errmsg(s), "multiplies no buffer 'W_nope'"));
  OK(ts_sched_shift_int8(s, b, "X", blocks));
  assert_string_equal(ts_sched_rv_block_name(s, blocks[0]), "X_u8");
  assert_string_equal(ts_sched_rv_block_name(s, blocks[1]), "W_sum");
  ts_error err;
  int rc = util_check(ts_sched_func(s), ts_sched_original(s), 2, &err);
  if (rc) fprintf(stderr, "check: %s\n", err.msg);
  assert_int_equal(rc, TS_OK);
  /* the init is the compensation now: shifting again is refused */
  assert_int_equal(ts_sched_shift_int8(s, b, "X_u8", NULL), TS_ESCHEDULE);
  assert_non_null(strstr(ts_sched_errmsg(s), "init of block 'Y' is not zero"));
  OK(ts_sched_get_loops(s, b, l, 3, &n));
  int64_t fj[2] = {TS_SPLIT_INFER, 16}, fk[2] = {TS_SPLIT_INFER, 4};
  OK(ts_sched_split(s, l[1], fj, 2, j2));
  OK(ts_sched_split(s, l[2], fk, 2, k2));
  ts_rv order[5] = {l[0], j2[0], k2[0], j2[1], k2[1]};
  OK(ts_sched_reorder(s, order, 5));
  OK(ts_sched_decompose_reduction(s, b, k2[0], &init));
  /* after the init is decomposed there is nothing to compensate in */
  assert_int_equal(ts_sched_shift_int8(s, b, "W", NULL), TS_ESCHEDULE);
  assert_non_null(strstr(ts_sched_errmsg(s), "before decompose_reduction"));
  OK(ts_sched_cache_read(s, b, "W", "global", &p));
  OK(ts_sched_transform_layout(s, p, "W_global",
                               "(j, k) -> (floordiv(j, 16), floordiv(k, 4), "
                               "floormod(j, 16), floormod(k, 4))"));
  OK(ts_sched_tensorize(s, j2[1], "avx512_vnni_16x4"));
  golden(s, "shift_int8");
  bool ran = compile_and_run(s, "llvm -mcpu=cascadelake -num-cores=2",
                             "avx512vnni", "vpdpbusd");
  ts_sched_destroy(s);
  if (!ran) skip();
}

/* shift_int8 on a batched product with a reduce iter B does not index:
 * the sums count B's terms as often as the product repeats them. */
static const char *const bmm_s8 =
    "func f(A: int8[2, 5, 3, 6], B: int8[2, 6, 7], C: int32[2, 5, 7]) {\n"
    "  block root() {\n"
    "    for b in range(2) {\n"
    "      for i in range(5) {\n"
    "        for j in range(7) {\n"
    "          for r in range(3) {\n"
    "            for k in range(6) {\n"
    "              block C(vb: spatial(2) = b, vi: spatial(5) = i, "
    "vj: spatial(7) = j, vr: reduce(3) = r, vk: reduce(6) = k) {\n"
    "                init {\n"
    "                  C[vb, vi, vj] = int32(0)\n"
    "                }\n"
    "                C[vb, vi, vj] = C[vb, vi, vj] + cast(int32, B[vb, vk, "
    "vj]) * cast(int32, A[vb, vi, vr, vk])\n"
    "              }\n"
    "            }\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

static void test_shift_int8_batched(void **state) {
  (void)state;
  ts_sched *s = util_sched_text(bmm_s8);
  assert_non_null(s);
  ts_rv b;
  OK(ts_sched_get_block(s, "C", &b));
  OK(ts_sched_shift_int8(s, b, "A", NULL));
  char *txt = util_print(s);
  /* B's sums over b and j (the spatial iters B uses), summed over r and k */
  assert_non_null(strstr(txt, "B_sum: int32[2, 7]"));
  free(txt);
  ts_error err;
  int rc = util_check(ts_sched_func(s), ts_sched_original(s), 1, &err);
  if (rc) fprintf(stderr, "check: %s\n", err.msg);
  assert_int_equal(rc, TS_OK);
  ts_sched_destroy(s);
}

static void test_bf16_dot(void **state) {
  (void)state;
  ts_sched *s = util_sched("matmul M=4 N=32 K=8 dtype=bfloat16");
  assert_non_null(s);
  ts_rv b, l[3], j2[2], k2[2], init, p, o;
  int n;
  OK(ts_sched_get_block(s, "C", &b));
  OK(ts_sched_get_loops(s, b, l, 3, &n));
  int64_t fj[2] = {TS_SPLIT_INFER, 16}, fk[2] = {TS_SPLIT_INFER, 2};
  OK(ts_sched_split(s, l[1], fj, 2, j2));
  OK(ts_sched_split(s, l[2], fk, 2, k2));
  ts_rv order[5] = {l[0], j2[0], k2[0], j2[1], k2[1]};
  OK(ts_sched_reorder(s, order, 5));
  OK(ts_sched_decompose_reduction(s, b, k2[0], &init));
  OK(ts_sched_cache_read(s, b, "B", "global", &p));
  OK(ts_sched_transform_layout(s, p, "B_global",
                               "(k, j) -> (floordiv(j, 16), floordiv(k, 2), "
                               "floormod(j, 16), floormod(k, 2))"));
  /* tensorize a block made by blockize */
  OK(ts_sched_blockize(s, j2[1], &o));
  OK(ts_sched_tensorize(s, o, "avx512_bf16_16x2"));
  golden(s, "tensorize_bf16_dot");
  bool ran = compile_and_run(s, "llvm -mcpu=cooperlake -num-cores=2",
                             "avx512bf16", "vdpbf16ps");
  ts_sched_destroy(s);
  if (!ran) skip();
}

/* C[M, N] += A[M, K] x B[K, N] on 16 x 16 x (32 | 64) AMX tiles; B packed
 * by pairs (bf16) or quadruples (int8) of k. */
static ts_sched *amx_schedule(const char *spec, int kstep, const char *map,
                              const char *intrin) {
  ts_sched *s = util_sched(spec);
  assert_non_null(s);
  ts_rv b, l[3], i2[2], j2[2], k2[2], init, p;
  int n;
  OK(ts_sched_get_block(s, "C", &b));
  OK(ts_sched_get_loops(s, b, l, 3, &n));
  int64_t f16[2] = {TS_SPLIT_INFER, 16}, fk[2] = {TS_SPLIT_INFER, kstep};
  OK(ts_sched_split(s, l[0], f16, 2, i2));
  OK(ts_sched_split(s, l[1], f16, 2, j2));
  OK(ts_sched_split(s, l[2], fk, 2, k2));
  ts_rv order[6] = {i2[0], j2[0], k2[0], i2[1], j2[1], k2[1]};
  OK(ts_sched_reorder(s, order, 6));
  OK(ts_sched_decompose_reduction(s, b, k2[0], &init));
  OK(ts_sched_cache_read(s, b, "B", "global", &p));
  OK(ts_sched_transform_layout(s, p, "B_global", map));
  OK(ts_sched_tensorize(s, i2[1], intrin));
  OK(ts_sched_parallel(s, i2[0]));
  return s;
}

static void test_amx_bf16(void **state) {
  (void)state;
  ts_sched *s =
      amx_schedule("matmul M=32 N=32 K=64 dtype=bfloat16", 32,
                   "(k, j) -> (floordiv(k, 2), j * 2 + floormod(k, 2))",
                   "amx_bf16_16x16x32");
  golden(s, "tensorize_amx_bf16");
  bool ran = compile_and_run(s, "llvm -mcpu=sapphirerapids -num-cores=2",
                             "amx-bf16", "tdpbf16ps");
  ts_sched_destroy(s);
  if (!ran) skip();
}

static void test_amx_int8(void **state) {
  (void)state;
  ts_sched *s =
      amx_schedule("matmul M=16 N=32 K=128 dtype=int8", 64,
                   "(k, j) -> (floordiv(k, 4), j * 4 + floormod(k, 4))",
                   "amx_int8_16x16x64");
  char *txt = util_print(s);
  assert_non_null(strstr(txt, "tessera.amx_int8_gemm"));
  free(txt);
  bool ran = compile_and_run(s, "llvm -mcpu=sapphirerapids -num-cores=2",
                             "amx-int8", "tdpbssd");
  ts_sched_destroy(s);
  if (!ran) skip();
}

static void test_mma(void **state) {
  (void)state;
  ts_sched *s = util_sched("matmul M=32 N=16 K=16 dtype=float16");
  assert_non_null(s);
  ts_rv b, l[3], i2[2], j2[2], init;
  int n;
  OK(ts_sched_get_block(s, "C", &b));
  OK(ts_sched_get_loops(s, b, l, 3, &n));
  int64_t fi[2] = {TS_SPLIT_INFER, 16}, fj[2] = {TS_SPLIT_INFER, 8};
  OK(ts_sched_split(s, l[0], fi, 2, i2));
  OK(ts_sched_split(s, l[1], fj, 2, j2));
  ts_rv order[5] = {i2[0], j2[0], i2[1], j2[1], l[2]};
  OK(ts_sched_reorder(s, order, 5));
  OK(ts_sched_decompose_reduction(s, b, i2[1], &init));
  /* bf16 operands do not match the fp16 intrinsic, and vice versa */
  assert_int_equal(ts_sched_tensorize(s, i2[1], "mma_m16n8k16_bf16"),
                   TS_ESCHEDULE);
  assert_non_null(strstr(ts_sched_errmsg(s), "buffer 'A' is float16 where "
                                             "the intrinsic's 'A' is "
                                             "bfloat16"));
  OK(ts_sched_tensorize(s, i2[1], "mma_m16n8k16_f16"));
  OK(ts_sched_bind(s, i2[0], "blockIdx.x"));
  OK(ts_sched_bind(s, j2[0], "blockIdx.y"));
  golden(s, "tensorize_mma");
  ts_sched_destroy(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_registry),
      cmocka_unit_test(test_vnni),
      cmocka_unit_test(test_bf16_dot),
      cmocka_unit_test(test_amx_bf16),
      cmocka_unit_test(test_amx_int8),
      cmocka_unit_test(test_mma),
      cmocka_unit_test(test_shift_int8),
      cmocka_unit_test(test_shift_int8_batched),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
