/*
 * test_prefetch.c — the "pragma_prefetch" loop annotation (TS_ANN_PREFETCH,
 * codegen/prefetch.c): under the annotated loop, a load of an input whose
 * region stays the same for several iterations (a weight panel W[p] read
 * by the 16 row tiles of panel p) gets prefetches of the next panel, spread
 * over the row tiles and their reduction loop; a load whose region changes
 * every iteration (A's rows), an output, a region that is not one
 * contiguous run or an annotation of 0 gets none. Every variant computes
 * the interpreter's result on 1 and 2 threads, and a GPU target builds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "check.h"

#define OK(x) assert_int_equal((x), TS_OK)

/* C[64 rows, 4 panels, 16] = A[64, 256] x W[4 panels, 256, 16]: the loop f
 * runs panel floordiv(f, 16), row tile floormod(f, 16) of 4 rows. `loop` is
 * f's header after `for f in range(64)`; `w` W's type and `wl` its load
 * (the packed panels, or the columns of an unpacked [256, 64]). */
static char *panel_text(const char *loop, const char *w, const char *wl) {
  static const char fmt[] =
      "func pf(A: float32[64, 256], W: %s, C: float32[64, 4, 16]) {\n"
      "  block root() {\n"
      "    reads(A[0 +: 64, 0 +: 256], W[%s])\n"
      "    writes(C[0 +: 64, 0 +: 4, 0 +: 16])\n"
      "    for f in range(64) %s {\n"
      "      for k in range(256) {\n"
      "        for r in range(4) unrolled {\n"
      "          for l in range(16) vectorized {\n"
      "            block C(vi: spatial(64) = floormod(f, 16) * 4 + r, "
      "vp: spatial(4) = floordiv(f, 16), vl: spatial(16) = l, "
      "vk: reduce(256) = k) {\n"
      "              reads(C[vi, vp, vl], A[vi, vk], %s)\n"
      "              writes(C[vi, vp, vl])\n"
      "              init {\n"
      "                C[vi, vp, vl] = float32(0)\n"
      "              }\n"
      "              C[vi, vp, vl] = C[vi, vp, vl] + A[vi, vk] * %s\n"
      "            }\n"
      "          }\n"
      "        }\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n";
  const char *region = strstr(w, "[4, 256, 16]") ? "0 +: 4, 0 +: 256, 0 +: 16"
                                                 : "0 +: 256, 0 +: 64";
  size_t n =
      sizeof fmt + strlen(w) + strlen(region) + strlen(loop) + 2 * strlen(wl);
  char *s = malloc(n);
  snprintf(s, n, fmt, w, region, loop, wl, wl);
  return s;
}

static char *packed(const char *loop) {
  return panel_text(loop, "float32[4, 256, 16]", "W[vp, vk, vl]");
}

static ts_func *parse(const char *text) {
  ts_func *f = check_parse(text, "pf.tir");
  assert_non_null(f);
  return f;
}

static char *lowered(const ts_func *f) {
  char *text = check_lowered(f);
  assert_non_null(text);
  return text;
}

static char *llvm_ir(const ts_func *f) {
  char *ir = check_llvm_ir(f);
  assert_non_null(ir);
  return ir;
}

static void check_run(const ts_func *f, int threads) {
  OK(check_host_run(f, threads, 7));
}

/* The packed panels: W's next panel is prefetched, A's next rows are not.
 * A panel is 256 x 16 floats (16 KiB) over 16 row tiles x 256 steps: a
 * line (16 floats) every 16 steps, so the reduction loop runs in groups of
 * 16 with one prefetch each. */
static void test_next_panel(void **state) {
  (void)state;
  char *text = packed("parallel annotate {\"pragma_prefetch\": 1}");
  ts_func *f = parse(text);
  char *low = lowered(f);
  assert_int_equal(check_count(low, "tessera.prefetch\", &W["), 1);
  assert_int_equal(check_count(low, "tessera.prefetch\", &A["), 0);
  assert_int_equal(check_count(low, "tessera.prefetch\", &C["), 0);
  /* the next panel, clamped to the last one */
  assert_non_null(strstr(low, "min(f + 16, 63)"));
  assert_non_null(strstr(low, "for k in range(16)"));
  /* the panel's first element and a byte offset without a division: row
   * tile floormod(f, 16) of 16 fetches its sixteenth of the 16 KiB, one
   * line per group of 16 steps */
  assert_non_null(
      strstr(low, "\"tessera.prefetch\", &W[floordiv(min(f + 16, 63), 16) * "
                  "4096], floormod(f, 16) * 1024 + k * 64)"));
  free(low);
  char *ir = llvm_ir(f);
  assert_true(check_count(ir, "llvm.prefetch") > 0);
  free(ir);
  check_run(f, 1);
  check_run(f, 2);
  ts_func_free(f);
  free(text);
}

/* Value 0, or no annotation: no prefetch, the same results. */
static void test_off(void **state) {
  (void)state;
  const char *loops[2] = {"parallel annotate {\"pragma_prefetch\": 0}",
                          "parallel"};
  for (int k = 0; k < 2; k++) {
    char *text = packed(loops[k]);
    ts_func *f = parse(text);
    char *low = lowered(f);
    assert_int_equal(check_count(low, "tessera.prefetch"), 0);
    free(low);
    check_run(f, 2);
    ts_func_free(f);
    free(text);
  }
}

/* W unpacked, [256, 64]: a panel's 16 columns of every row are not one
 * run of memory, so no prefetch (the hardware's strided streams are left
 * alone); a serial annotated loop works as a parallel one. */
static void test_not_contiguous(void **state) {
  (void)state;
  char *text = panel_text("annotate {\"pragma_prefetch\": 1}",
                          "float32[256, 64]", "W[vk, vp * 16 + vl]");
  ts_func *f = parse(text);
  char *low = lowered(f);
  assert_int_equal(check_count(low, "tessera.prefetch"), 0);
  free(low);
  check_run(f, 1);
  ts_func_free(f);
  free(text);
  /* the same packed layout under a serial loop does get it */
  text = packed("annotate {\"pragma_prefetch\": 1}");
  f = parse(text);
  low = lowered(f);
  assert_int_equal(check_count(low, "tessera.prefetch\", &W["), 1);
  free(low);
  check_run(f, 1);
  ts_func_free(f);
  free(text);
}

/* A GPU target has no prefetch: the annotated kernel still builds. */
static void test_gpu_ignores(void **state) {
  (void)state;
  char *text =
      packed("thread(\"blockIdx.x\") annotate {\"pragma_prefetch\": 1}");
  ts_func *f = parse(text);
  ts_error err;
  ts_target *t = NULL;
  OK(ts_target_parse("cuda -arch=sm_80", &t, &err));
  ts_build_result br = {0};
  ts_build_options o = ts_build_defaults();
  int rc = ts_build(f, t, &o, &br, &err);
  if (rc) printf("build: %s\n", err.msg);
  OK(rc);
  ts_build_result_clear(&br);
  ts_target_free(t);
  ts_func_free(f);
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_next_panel),
      cmocka_unit_test(test_off),
      cmocka_unit_test(test_not_contiguous),
      cmocka_unit_test(test_gpu_ignores),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
