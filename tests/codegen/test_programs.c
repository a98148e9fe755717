/*
 * test_programs.c — hand-written loop programs (tests/codegen/programs/
 * *.tir) exercising vectorized loops with tails, unrolled, parallel and
 * nested-parallel loops, local allocations, every intrinsic and every
 * dtype, compiled for the host with 1 and 2 threads: outputs equal the
 * reference interpreter's. Also checks what the lowering makes of them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "check.h"

#define PROGRAMS TS_SOURCE_DIR "/tests/codegen/programs"

static ts_func *load(const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", PROGRAMS, name);
  ts_func *f = NULL;
  ts_error err;
  if (ts_func_parse_file(path, &f, &err) != TS_OK) {
    printf("parse %s: %s\n", name, err.msg);
    return NULL;
  }
  return f;
}

static void test_every_program(void **state) {
  (void)state;
  DIR *d = opendir(PROGRAMS);
  assert_non_null(d);
  struct dirent *ent;
  int n = 0, failures = 0;
  while ((ent = readdir(d))) {
    size_t len = strlen(ent->d_name);
    if (len < 5 || strcmp(ent->d_name + len - 4, ".tir") != 0) continue;
    ts_func *f = load(ent->d_name);
    if (!f) {
      failures++;
      continue;
    }
    for (int threads = 1; threads <= 2; threads++) {
      ts_error err;
      ts_error_clear(&err);
      if (check_compiled(f, NULL, threads, 11, &err) != TS_OK) {
        printf("FAIL %s (%d threads): %s\n", ent->d_name, threads, err.msg);
        failures++;
      }
    }
    ts_func_free(f);
    n++;
  }
  closedir(d);
  printf("%d programs compiled and checked\n", n);
  assert_true(n >= 9);
  assert_int_equal(failures, 0);
}

/* The lowered text of a program. */
static char *lowered_text(const char *name) {
  ts_func *f = load(name);
  assert_non_null(f);
  ts_error err;
  ts_lower_options o = ts_lower_defaults();
  o.verify_between = true;
  ts_func *l = ts_lower(f, &o, &err);
  if (!l) printf("lower %s: %s\n", name, err.msg);
  assert_non_null(l);
  char *text = ts_func_print(l);
  ts_func_free(l);
  ts_func_free(f);
  return text;
}

static void test_lowering_shapes(void **state) {
  (void)state;
  /* The tail loop becomes masked vector code, not a scalar fallback. */
  char *t = lowered_text("vec_tail.tir");
  assert_non_null(strstr(t, "ramp("));
  assert_null(strstr(t, "vectorize_fallback"));
  assert_null(strstr(t, "block "));
  free(t);
  /* The unrolled loop is gone (three copies), the vector loop is vector. */
  t = lowered_text("tiled_matmul.tir");
  assert_null(strstr(t, "for jo"));
  assert_null(strstr(t, "for ji"));
  assert_non_null(strstr(t, "ramp("));
  assert_non_null(strstr(t, "parallel"));
  free(t);
  /* Extents that are not powers of two run as power-of-two pieces */
  t = lowered_text("vec_pieces.tir");
  /* (the row accumulates in registers: C is promoted around k) */
  assert_non_null(strstr(t, "C_reg[ramp(0, 1, 16)] = C_reg[ramp(0, 1, 16)]"));
  assert_non_null(strstr(t, "C_reg[ramp(16, 1, 8)] = C_reg[ramp(16, 1, 8)]"));
  assert_non_null(strstr(t, "C[ramp(i * 24 + 16, 1, 8)] ="));
  assert_null(strstr(t, ", 24)"));
  assert_null(strstr(t, ", 7)"));
  assert_non_null(strstr(t, "Y[ramp(o * 7 + 4, 1, 2)] ="));
  assert_non_null(strstr(t, "Y[o * 7 + 6] ="));
  assert_null(strstr(t, "vectorize_fallback"));
  free(t);
  /* A packed layout's groups of 4 (floordiv and floormod of remainders
   * of the vector loop's index): whole 4-lane stores, not scattered
   * bytes. */
  t = lowered_text("group_pack.tir");
  assert_non_null(strstr(t, "P[ramp("));
  assert_non_null(strstr(t, ", 1, 4)] = W[ramp("));
  assert_null(strstr(t, "vectorize_fallback"));
  free(t);
  /* A vectorized reduction loop falls back to scalar code with a reason. */
  t = lowered_text("split_reduce.tir");
  assert_non_null(strstr(t, "vectorize_fallback"));
  assert_non_null(strstr(t, "does not depend on the vectorized loop"));
  free(t);
  /* Auto-unroll removes the small inner loop under the annotated loop. */
  t = lowered_text("nested_parallel.tir");
  assert_null(strstr(t, "for ji"));
  free(t);
  /* A cache tile shrinks to the tile and moves under its loop. */
  t = lowered_text("cache_write.tir");
  assert_non_null(strstr(
      t, "    for j_0 in range(4) {\n      allocate C_local: float32[4]"));
  free(t);
  /* A tile per iteration of a parallel loop fused from three, its last
   * tile overhanging the rows: compacted to the tile all the same. */
  t = lowered_text("fused_tiles.tir");
  assert_non_null(strstr(t, "allocate T: float32[8]"));
  free(t);
  /* Buffers are flat. */
  t = lowered_text("local_alloc.tir");
  assert_non_null(strstr(t, "allocate T: float32[28]"));
  free(t);
}

/* Each pass on its own: blocks first, then flattening. */
static void test_passes_one_by_one(void **state) {
  (void)state;
  ts_func *f = load("split_reduce.tir");
  assert_non_null(f);
  ts_error err;
  ts_func *g = ts_func_copy(f);
  assert_int_equal(ts_lower_blocks(g, &err), TS_OK);
  char *t = ts_func_print(g);
  assert_null(strstr(t, "block "));
  assert_non_null(strstr(t, "if "));
  assert_non_null(strstr(t, "A[i, ko * 8 + ki]"));
  free(t);
  assert_int_equal(ts_func_verify(g, &err), TS_OK);
  assert_int_equal(ts_lower_flatten(g, &err), TS_OK);
  t = ts_func_print(g);
  assert_non_null(strstr(t, "A: float32[120]"));
  free(t);
  assert_int_equal(ts_func_verify(g, &err), TS_OK);
  /* The lowered-but-not-vectorized function still computes the same. */
  assert_int_equal(ts_lower_simplify(g, &err), TS_OK);
  ts_func_free(g);
  ts_func_free(f);
}

/* The compiled exp (a polynomial, emit_math.c), vectorized and scalar,
 * against the C library's double exp: within 2 ulp over [-86.9, 88.7],
 * special values exact (NaN, inf, overflow past 88.73, 0 at -inf), and
 * below -86.98 either 0 (2^n built in the exponent bits) or within the
 * smallest normal float of the exact value (AVX-512's vscalefps, which
 * goes through the subnormals), as the comments there state. */
/* Parses a program, builds it for this host and runs it once on args. */
static void run_source(const char *src, void **args) {
  ts_func *f = NULL;
  ts_error err;
  assert_int_equal(ts_func_parse(src, strlen(src), "test.tir", &f, &err),
                   TS_OK);
  ts_target *host = NULL;
  assert_int_equal(ts_target_host(&host, &err), TS_OK);
  ts_build_result br = {0};
  ts_build_options o = ts_build_defaults();
  assert_int_equal(ts_build(f, host, &o, &br, &err), TS_OK);
  ts_rt_kernel *k = NULL;
  assert_int_equal(ts_rt_kernel_load(br.artifact->bytes, br.artifact->n_bytes,
                                     br.artifact->entry, &k, &err),
                   TS_OK);
  assert_int_equal(ts_rt_kernel_call(k, args, NULL, &err), TS_OK);
  ts_rt_kernel_unload(k);
  ts_build_result_clear(&br);
  ts_target_free(host);
  ts_func_free(f);
}

static void expect_exp(const float *x, const float *y, int n) {
  int bad = 0;
  for (int i = 0; i < n && bad < 5; i++) {
    double want = exp((double)x[i]);
    bool ok;
    if (isnan(x[i]))
      ok = isnan(y[i]);
    else if (x[i] > 88.7229f)
      ok = isinf(y[i]) && y[i] > 0;
    else if (x[i] < -86.98f)
      ok = y[i] == 0.0f ||
           (y[i] > 0.0f && fabs((double)y[i] - want) <= (double)FLT_MIN);
    else
      ok = fabs((double)y[i] - want) <=
           2.0 * (double)nextafterf((float)want, INFINITY) - 2.0 * want + 1e-45;
    if (!ok) {
      printf("exp(%.9g) = %.9g, want %.9g\n", x[i], y[i], want);
      bad++;
    }
  }
  assert_int_equal(bad, 0);
}

/* exp four ways: a long vectorized loop (which LLVM's loop vectorizer
 * widens), a scalar loop, and loops of 64 and 8 lanes inside a row loop,
 * which the code generator emits as vectors itself (vscalefps on AVX-512,
 * the 8-lane one with AVX512VL). */
static const char exp_src[] =
    "func e(A: float32[4096], O: float32[4, 4096]) {\n"
    "  block root() {\n"
    "    for j in range(4096) vectorized {\n"
    "      block v(vj: spatial(4096) = j) { O[0, vj] = exp(A[vj]) }\n"
    "    }\n"
    "    for j in range(4096) {\n"
    "      block s(vj: spatial(4096) = j) { O[1, vj] = exp(A[vj]) }\n"
    "    }\n"
    "    for i in range(64) {\n"
    "      for j in range(64) vectorized {\n"
    "        block w(vj: spatial(4096) = i * 64 + j) {\n"
    "          O[2, vj] = exp(A[vj])\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "    for i in range(512) {\n"
    "      for j in range(8) vectorized {\n"
    "        block y(vj: spatial(4096) = i * 8 + j) {\n"
    "          O[3, vj] = exp(A[vj])\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

static void test_exp_accuracy(void **state) {
  (void)state;
  enum { N = 4096 };
  const char *src = exp_src;
  float *a = malloc(N * sizeof *a), *out = calloc(4 * N, sizeof *out);
  assert_non_null(a);
  assert_non_null(out);
  const float special[] = {NAN,       -NAN,     INFINITY, -INFINITY, 0.0f,
                           -0.0f,     88.72f,   88.7228f, 88.73f,    89.0f,
                           1e30f,     -86.97f,  -86.99f,  -87.5f,    -104.0f,
                           -1e30f,    1e-30f,   -1e-30f,  0.3465f,   -0.3466f,
                           0.693147f, 44.3614f, -44.3614f};
  int ns = (int)(sizeof special / sizeof special[0]);
  for (int i = 0; i < N; i++)
    a[i] = i < ns ? special[i]
                  : -86.9f + (88.7f + 86.9f) * (float)(i - ns) / (N - ns);
  void *args[2] = {a, out};
  run_source(src, args);
  expect_exp(a, out, N);
  expect_exp(a, out + N, N);
  expect_exp(a, out + 2 * N, N);
  expect_exp(a, out + 3 * N, N);
  free(a);
  free(out);
}

static int count_of(const char *text, const char *what);

/* The 64- and 8-lane exps' emitted IR: vscalefps for an AVX-512 target
 * (four calls of 16 lanes, one of 8), none for an AVX2 one, whatever this
 * host is. */
static void test_exp_scalef(void **state) {
  (void)state;
  const char *targets[2] = {"llvm -mcpu=skylake-avx512", "llvm -mcpu=haswell"};
  ts_func *f = NULL;
  ts_error err;
  assert_int_equal(ts_func_parse(exp_src, strlen(exp_src), "exp.tir", &f, &err),
                   TS_OK);
  for (int k = 0; k < 2; k++) {
    char *ir = check_emitted_ir_for(f, targets[k]);
    assert_non_null(ir);
    if (k == 0) {
      assert_int_equal(
          count_of(ir, "call <16 x float> @llvm.x86.avx512.mask.scalef.ps.512"),
          4);
      assert_int_equal(
          count_of(ir, "call <8 x float> @llvm.x86.avx512.mask.scalef.ps.256"),
          1);
    } else {
      assert_int_equal(count_of(ir, "scalef"), 0);
    }
    free(ir);
  }
  ts_func_free(f);
}

/* y is within `ulps` units in the last place of the float32 nearest to
 * want (infinities and NaN must match exactly). */
static bool within_ulps(float y, double want, int ulps) {
  if (isnan(want)) return isnan(y);
  if (isinf(want)) return y == (float)want;
  float w = (float)want;
  float lo = w, hi = w;
  for (int i = 0; i < ulps; i++) {
    lo = nextafterf(lo, -INFINITY);
    hi = nextafterf(hi, INFINITY);
  }
  return y >= lo && y <= hi;
}

/* log and log2 of float32, vectorized and scalar (the polynomial that
 * replaces libm's logf): within 2 ulp over the whole range, denormals
 * included, and exact at the special values. */
static void test_log_accuracy(void **state) {
  (void)state;
  enum { N = 8192 };
  const char *src = "func l(A: float32[8192], O: float32[4, 8192]) {\n"
                    "  block root() {\n"
                    "    for j in range(8192) vectorized {\n"
                    "      block v(vj: spatial(8192) = j) {\n"
                    "        O[0, vj] = log(A[vj])\n"
                    "        O[1, vj] = log2(A[vj])\n"
                    "      }\n"
                    "    }\n"
                    "    for j in range(8192) {\n"
                    "      block s(vj: spatial(8192) = j) {\n"
                    "        O[2, vj] = log(A[vj])\n"
                    "        O[3, vj] = log2(A[vj])\n"
                    "      }\n"
                    "    }\n"
                    "  }\n"
                    "}\n";
  float *a = malloc(N * sizeof *a), *out = calloc(4 * N, sizeof *out);
  assert_non_null(a);
  assert_non_null(out);
  const float special[] = {
      NAN,     -NAN,    INFINITY,   -INFINITY,  0.0f,    -0.0f,
      -1.0f,   1.0f,    2.0f,       0.5f,       8.0f,    1024.0f,
      1e-45f,  1e-40f,  1.1e-38f,   1.2e-38f,   3.4e38f, 0.7071f,
      0.7072f, 1.4142f, 1.0000001f, 0.99999994f};
  int ns = (int)(sizeof special / sizeof special[0]);
  uint64_t seed = 11;
  for (int i = 0; i < N; i++) {
    if (i < ns) {
      a[i] = special[i];
      continue;
    }
    /* every exponent from the denormals up, random mantissas */
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    uint32_t bits = (uint32_t)(seed >> 33) % 0x7f800000u;
    memcpy(&a[i], &bits, sizeof bits);
  }
  void *args[2] = {a, out};
  run_source(src, args);
  int bad = 0;
  for (int r = 0; r < 4; r++)
    for (int i = 0; i < N && bad < 8; i++) {
      double x = a[i];
      double want = x < 0 ? NAN : r % 2 ? log2(x) : log(x);
      if (isnan(x)) want = NAN;
      float y = out[(size_t)r * N + i];
      if (!within_ulps(y, want, 2)) {
        printf("%s(%.9g) = %.9g, want %.9g\n", r % 2 ? "log2" : "log",
               (double)a[i], (double)y, want);
        bad++;
      }
    }
  assert_int_equal(bad, 0);
  free(a);
  free(out);
}

/* Occurrences of `what` in text. */
static int count_of(const char *text, const char *what) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, what)); p += strlen(what)) n++;
  return n;
}

/* The LLVM IR a program is emitted as, before LLVM's optimizations. */
static char *emitted_ir(const char *name) {
  ts_func *f = load(name);
  assert_non_null(f);
  ts_target *host = NULL;
  ts_error err;
  assert_int_equal(ts_target_host(&host, &err), TS_OK);
  ts_build_options o = ts_build_defaults();
  o.keep_llvm_ir = true;
  o.no_opt = true;
  ts_build_result br = {0};
  assert_int_equal(ts_build(f, host, &o, &br, &err), TS_OK);
  char *ir = br.llvm_ir;
  br.llvm_ir = NULL;
  ts_build_result_clear(&br);
  ts_target_free(host);
  ts_func_free(f);
  assert_non_null(ir);
  return ir;
}

/* Every tile of transpose.tir is a transpose in registers (shuffles, no
 * lane-by-lane gather or scatter); the look-alikes of transpose_strided.tir
 * are not (test_every_program checks both against the interpreter). */
static void test_transpose_runs(void **state) {
  (void)state;
  char *ir = emitted_ir("transpose.tir");
  assert_int_equal(count_of(ir, "insertelement"), 0);
  assert_int_equal(count_of(ir, "extractelement"), 0);
  /* float32 8x8 and 4x4, float64 4x4, int8 8x8: L log2 L shuffles each;
   * bfloat16 16x16: 64 */
  assert_true(count_of(ir, "shufflevector") >= 24 + 8 + 8 + 24 + 64);
  free(ir);
  ir = emitted_ir("transpose_strided.tir");
  assert_int_equal(count_of(ir, "shufflevector"), 0);
  assert_true(count_of(ir, "insertelement") >= 8 * 8 + 6 * 8);
  free(ir);
}

/* Every tile of interleave.tir is one interleaving shuffle between
 * contiguous loads and a contiguous store (no lane-by-lane scatter). */
static void test_interleave_runs(void **state) {
  (void)state;
  char *ir = emitted_ir("interleave.tir");
  assert_int_equal(count_of(ir, "insertelement"), 0);
  assert_int_equal(count_of(ir, "extractelement"), 0);
  /* int8: 2 concatenations + 1 interleave; bfloat16: 1 + 1; float32 with
   * 8 rows: 4 + 2 + 1 + 1 */
  assert_true(count_of(ir, "shufflevector") >= 3 + 2 + 8);
  free(ir);
}

/* pow with a constant exponent of 1 to 4 is emitted as multiplies, vector
 * or scalar (a vector llvm.pow becomes powf lane by lane); other exponents
 * keep llvm.pow. float32 log and log2 call no intrinsic either.
 * test_every_program checks the values. */
static void test_pow_by_multiplies(void **state) {
  (void)state;
  char *ir = emitted_ir("pow_const.tir");
  /* the vector 2.5 (40 lanes: pieces of 32 and 8) and the scalar 0.5: one
   * call and one declaration each */
  assert_int_equal(count_of(ir, "@llvm.pow.v"), 4);
  assert_int_equal(count_of(ir, "@llvm.pow.f32"), 2);
  free(ir);
  ir = emitted_ir("log.tir"); /* float32 log and log2: no libm */
  assert_int_equal(count_of(ir, "@llvm.log"), 0);
  free(ir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_program),
      cmocka_unit_test(test_exp_accuracy),
      cmocka_unit_test(test_exp_scalef),
      cmocka_unit_test(test_log_accuracy),
      cmocka_unit_test(test_transpose_runs),
      cmocka_unit_test(test_interleave_runs),
      cmocka_unit_test(test_pow_by_multiplies),
      cmocka_unit_test(test_lowering_shapes),
      cmocka_unit_test(test_passes_one_by_one),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
