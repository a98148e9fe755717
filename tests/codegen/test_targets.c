/*
 * test_targets.c — the code paths of the x86-64 machines this suite does not
 * run on: every operator of the library, every program of the codegen corpus
 * and the 16-bit float conversions, compiled for `x86-64` (SSE2 only),
 * `x86-64-v3` (AVX2 + FMA) and the host. Each object must reference no
 * symbol the loader cannot resolve (no compiler-rt helper, whatever the
 * target lacks); where this CPU can run the target's code it is run with 2
 * threads and compared with the reference interpreter, else the run is
 * reported as skipped. The random-schedule property test runs for the same
 * targets as separate ctest entries (schedule_test_property_x86-64, ...).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>

#include "check.h"
#include "operators.h"

#define PROGRAMS TS_SOURCE_DIR "/tests/codegen/programs"

static const char *const target_strs[] = {
    "llvm -mcpu=x86-64 -num-cores=2", "llvm -mcpu=x86-64-v3 -num-cores=2",
    "llvm -num-cores=2", /* the host */
};
#define N_TARGETS 3

typedef struct fixture {
  ts_target *targets[N_TARGETS];
  bool runnable[N_TARGETS]; /* this CPU has every feature the target uses */
  ts_runtime *rt;           /* for the conversion kernel */
} fixture;

/* Whether this CPU has every feature target t enables. */
static bool host_runs(const ts_target *t) {
  for (int i = 0; i < ts_target_num_features(t); i++) {
    bool on = false;
    const char *name = ts_target_feature(t, i, &on);
    /* features the runtime cannot query (sse, 64bit, ...) are every
     * x86-64 CPU's or irrelevant to the generated code */
    if (on && ts_rt_cpu_has(name) == 0) return false;
  }
  return true;
}

static int setup(void **state) {
  fixture *fx = calloc(1, sizeof *fx);
  ts_error err;
  for (int i = 0; i < N_TARGETS; i++) {
    if (ts_target_parse(target_strs[i], &fx->targets[i], &err)) {
      printf("target '%s': %s\n", target_strs[i], err.msg);
      return -1;
    }
    fx->runnable[i] = host_runs(fx->targets[i]);
    printf("target %s: %s\n", ts_target_str(fx->targets[i]),
           fx->runnable[i] ? "compiled and run"
                           : "compiled only (this CPU lacks some of its "
                             "features)");
  }
  if (ts_runtime_create(2, &fx->rt, &err)) return -1;
  *state = fx;
  return 0;
}

static int teardown(void **state) {
  fixture *fx = *state;
  for (int i = 0; i < N_TARGETS; i++) ts_target_free(fx->targets[i]);
  ts_runtime_destroy(fx->rt);
  free(fx);
  return 0;
}

/* check_compiled_on for target ti, run where this CPU can. */
static int check_target(fixture *fx, int ti, const ts_func *f, uint64_t seed,
                        ts_error *err) {
  return check_compiled_on(f, fx->targets[ti], 2, seed, fx->runnable[ti], err);
}

static void test_every_operator(void **state) {
  fixture *fx = *state;
  int failures = 0, checked = 0;
  for (int i = 0; i < N_OPERATOR_SPECS; i++) {
    ts_workload *w = NULL;
    ts_error err;
    if (ts_workload_from_spec(operator_specs[i], &w, &err)) {
      printf("FAIL %s: %s\n", operator_specs[i], err.msg);
      failures++;
      continue;
    }
    for (int t = 0; t < N_TARGETS; t++) {
      ts_error_clear(&err);
      if (check_target(fx, t, w->func, 3 + (uint64_t)i, &err)) {
        printf("FAIL %s on %s: %s\n", operator_specs[i], target_strs[t],
               err.msg);
        failures++;
      }
      checked++;
    }
    ts_workload_free(w);
  }
  printf("%d operator builds checked\n", checked);
  assert_int_equal(failures, 0);
}

static void test_every_program(void **state) {
  fixture *fx = *state;
  DIR *d = opendir(PROGRAMS);
  assert_non_null(d);
  struct dirent *ent;
  int n = 0, failures = 0;
  while ((ent = readdir(d))) {
    size_t len = strlen(ent->d_name);
    if (len < 5 || strcmp(ent->d_name + len - 4, ".tir") != 0) continue;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", PROGRAMS, ent->d_name);
    ts_func *f = NULL;
    ts_error err;
    if (ts_func_parse_file(path, &f, &err)) {
      printf("FAIL parse %s: %s\n", ent->d_name, err.msg);
      failures++;
      continue;
    }
    for (int t = 0; t < N_TARGETS; t++) {
      ts_error_clear(&err);
      if (check_target(fx, t, f, 11, &err)) {
        printf("FAIL %s on %s: %s\n", ent->d_name, target_strs[t], err.msg);
        failures++;
      }
    }
    ts_func_free(f);
    n++;
  }
  closedir(d);
  printf("%d programs checked on %d targets\n", n, N_TARGETS);
  assert_true(n >= 8);
  assert_int_equal(failures, 0);
}

/* ---- 16-bit float conversions, bit for bit ---- */

/* Every 16-bit pattern, converted to float32 (HF, GF) and back (H2, G2);
 * float32 patterns converted to both formats (XH, XG). The loops of 16
 * lanes are vectorized, the tail of 3 is scalar. */
static const char *conv_text =
    "func conv16(H: float16[65539], G: bfloat16[65539], X: float32[65539], "
    "HF: float32[65539], GF: float32[65539], XH: float16[65539], "
    "XG: bfloat16[65539]) {\n"
    "  for o in range(4096) {\n"
    "    for v in range(16) vectorized {\n"
    "      HF[o * 16 + v] = cast(float32, H[o * 16 + v])\n"
    "      GF[o * 16 + v] = cast(float32, G[o * 16 + v])\n"
    "      XH[o * 16 + v] = cast(float16, X[o * 16 + v])\n"
    "      XG[o * 16 + v] = cast(bfloat16, X[o * 16 + v])\n"
    "    }\n"
    "  }\n"
    "  for t in range(3) {\n"
    "    HF[65536 + t] = cast(float32, H[65536 + t])\n"
    "    GF[65536 + t] = cast(float32, G[65536 + t])\n"
    "    XH[65536 + t] = cast(float16, X[65536 + t])\n"
    "    XG[65536 + t] = cast(bfloat16, X[65536 + t])\n"
    "  }\n"
    "}\n";

#define N_CONV 65539

static uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

/* float32 patterns that exercise every rounding path: specials, both
 * formats' overflow and subnormal boundaries (and a neighbourhood of each
 * on both sides), exact ties, then pseudo-random patterns. */
static void conv_inputs(uint32_t *x) {
  static const uint32_t edges[] = {
      0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00001,
      0x7f800001, 0x7fbfffff, 0x00000001, 0x807fffff, 0x477fe000, 0x477fefff,
      0x477ff000, 0x477ff001, 0x47800000, 0x38800000, 0x387fffff, 0x33800000,
      0x33000000, 0x33000001, 0x32ffffff, 0x3f808000, 0x3f818000, 0x3f800001,
      0x7f7fffff, 0x7f7f8000, 0x3effffff, 0x00800000, 0xc77ff000, 0xb3000000};
  int n = 0;
  for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
    for (int d = -3; d <= 3; d++) x[n++] = edges[i] + (uint32_t)d;
  }
  uint64_t s = 0x9e3779b97f4a7c15ull;
  while (n < N_CONV) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    uint32_t r = (uint32_t)(s >> 16);
    /* half of them near float16's range, where its rounding happens */
    if (n % 2) r = (r & 0x80ffffffu) | ((uint32_t)(100 + (s >> 56) % 46) << 23);
    x[n++] = r;
  }
}

/* Equal bit patterns, or two NaNs of the same sign: the F16C and
 * AVX512-BF16 instructions keep a NaN's payload and quiet signalling NaNs
 * where the written-out code (and the interpreter) give the canonical quiet
 * NaN or keep the pattern. */
static bool same16(uint16_t got, uint16_t want, bool bf16) {
  if (got == want) return true;
  uint16_t exp = bf16 ? 0x7f80 : 0x7c00, man = bf16 ? 0x007f : 0x03ff;
  bool got_nan = (got & exp) == exp && (got & man);
  bool want_nan = (want & exp) == exp && (want & man);
  return got_nan && want_nan && (got & 0x8000) == (want & 0x8000);
}

static bool same32(uint32_t got, uint32_t want) {
  if (got == want) return true;
  bool got_nan = (got & 0x7f800000) == 0x7f800000 && (got & 0x7fffff);
  bool want_nan = (want & 0x7f800000) == 0x7f800000 && (want & 0x7fffff);
  return got_nan && want_nan && (got >> 31) == (want >> 31);
}

static void test_half_conversions(void **state) {
  fixture *fx = *state;
  ts_func *f = NULL;
  ts_error err;
  int rc = ts_func_parse(conv_text, strlen(conv_text), "conv16", &f, &err);
  if (rc) printf("%d:%d: %s\n", err.line, err.column, err.msg);
  assert_int_equal(rc, TS_OK);
  uint16_t *h = malloc(N_CONV * 2), *g = malloc(N_CONV * 2);
  uint16_t *xh = malloc(N_CONV * 2), *xg = malloc(N_CONV * 2);
  uint32_t *x = malloc(N_CONV * 4), *hf = malloc(N_CONV * 4),
           *gf = malloc(N_CONV * 4);
  for (int i = 0; i < N_CONV; i++) h[i] = g[i] = (uint16_t)(i & 0xffff);
  conv_inputs(x);
  int bad = 0;
  for (int t = 0; t < N_TARGETS; t++) {
    ts_build_result br = {0};
    ts_build_options o = ts_build_defaults();
    o.keep_asm = true;
    assert_int_equal(ts_build(f, fx->targets[t], &o, &br, &err), TS_OK);
    rc = ts_rt_object_check(br.artifact->bytes, br.artifact->n_bytes,
                            br.artifact->entry, &err);
    if (rc) printf("%s: %s\n", target_strs[t], err.msg);
    assert_int_equal(rc, TS_OK);
    /* no helper calls of any kind in the conversion code */
    assert_null(strstr(br.assembly, "call"));
    if (!fx->runnable[t]) {
      printf("conversions on %s: compiled only\n", target_strs[t]);
      ts_build_result_clear(&br);
      continue;
    }
    ts_rt_kernel *k = NULL;
    assert_int_equal(ts_rt_kernel_load(br.artifact->bytes, br.artifact->n_bytes,
                                       br.artifact->entry, &k, &err),
                     TS_OK);
    memset(hf, 0xab, N_CONV * 4);
    memset(gf, 0xab, N_CONV * 4);
    memset(xh, 0xab, N_CONV * 2);
    memset(xg, 0xab, N_CONV * 2);
    void *args[7] = {h, g, x, hf, gf, xh, xg};
    assert_int_equal(ts_rt_kernel_call(k, args, fx->rt, &err), TS_OK);
    int wrong = 0;
    for (int i = 0; i < N_CONV; i++) {
      float xf;
      memcpy(&xf, &x[i], 4);
      uint32_t want_hf = f32_bits(ts_f16_to_f32(h[i]));
      uint32_t want_gf = f32_bits(ts_bf16_to_f32(g[i]));
      uint16_t want_xh = ts_f32_to_f16(xf), want_xg = ts_f32_to_bf16(xf);
      if (!same32(hf[i], want_hf) || !same32(gf[i], want_gf) ||
          !same16(xh[i], want_xh, false) || !same16(xg[i], want_xg, true)) {
        if (wrong++ < 5)
          printf("%s: element %d: f16 %04x -> %08x (want %08x), bf16 %04x "
                 "-> %08x (want %08x), f32 %08x -> f16 %04x (want %04x), "
                 "bf16 %04x (want %04x)\n",
                 target_strs[t], i, h[i], hf[i], want_hf, g[i], gf[i], want_gf,
                 x[i], xh[i], want_xh, xg[i], want_xg);
      }
    }
    printf("conversions on %s: %d of %d elements differ\n", target_strs[t],
           wrong, N_CONV);
    bad += wrong;
    ts_rt_kernel_unload(k);
    ts_build_result_clear(&br);
  }
  free(h);
  free(g);
  free(xh);
  free(xg);
  free(x);
  free(hf);
  free(gf);
  ts_func_free(f);
  assert_int_equal(bad, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_half_conversions),
      cmocka_unit_test(test_every_operator),
      cmocka_unit_test(test_every_program),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
