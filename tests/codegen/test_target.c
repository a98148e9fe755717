/*
 * test_target.c — target strings: the registry of target families and
 * their facts, canonical printing and round trips, CPU-implied features and
 * explicit overrides, resolution of `llvm -mcpu=native` against LLVM's host
 * detection and cpuid, the queries the code generator uses, and malformed
 * strings each with its own error.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

#include "codegen/codegen.h"
#include "runtime/runtime.h"

static ts_target *parse_ok(const char *s) {
  ts_target *t = NULL;
  ts_error err;
  ts_error_clear(&err);
  int rc = ts_target_parse(s, &t, &err);
  if (rc != TS_OK) fprintf(stderr, "parse '%s': %s\n", s, err.msg);
  assert_int_equal(rc, TS_OK);
  assert_non_null(t);
  return t;
}

/* print(parse(s)) == want, and the canonical string parses to itself. */
static void expect_canonical(const char *s, const char *want) {
  ts_target *t = parse_ok(s);
  assert_string_equal(ts_target_str(t), want);
  ts_target *again = parse_ok(ts_target_str(t));
  assert_string_equal(ts_target_str(again), want);
  assert_true(ts_target_equal(t, again));
  ts_target_free(again);
  ts_target_free(t);
}

static void test_canonical_forms(void **state) {
  (void)state;
  expect_canonical("cuda -arch=sm_80",
                   "cuda -arch=sm_80 -max-threads-per-block=1024 "
                   "-max-shared-memory-per-block=49152 "
                   "-max-registers-per-thread=255");
  expect_canonical("  cuda   -max-registers-per-thread=64\t-arch=sm_90 "
                   "-max-shared-memory-per-block=101376 "
                   "-max-threads-per-block=512 ",
                   "cuda -arch=sm_90 -max-threads-per-block=512 "
                   "-max-shared-memory-per-block=101376 "
                   "-max-registers-per-thread=64");
  expect_canonical("llvm -mcpu=x86-64 -num-cores=3",
                   "llvm -mcpu=x86-64 -num-cores=3");
  expect_canonical("llvm -num-cores=2 -mattr=+fma,+avx2 -mcpu=x86-64",
                   "llvm -mcpu=x86-64 -mattr=+avx2,+fma -num-cores=2");
  /* A named CPU's features are stored explicitly. */
  expect_canonical("llvm -mcpu=haswell -num-cores=4",
                   "llvm -mcpu=haswell -mattr=+avx,+avx2,+f16c,+fma,+sse4.2 "
                   "-num-cores=4");
  /* Disabling an implied feature keeps it, with '-'. */
  expect_canonical("llvm -mcpu=haswell -mattr=-fma,+avx512f -num-cores=1",
                   "llvm -mcpu=haswell "
                   "-mattr=+avx,+avx2,+avx512f,+f16c,-fma,+sse4.2 "
                   "-num-cores=1");
  /* Equal targets spelled differently print identically. */
  ts_target *a = parse_ok("llvm -mcpu=cascadelake -num-cores=8");
  ts_target *b =
      parse_ok("llvm -num-cores=8 -mattr=+avx512vnni,+avx2 -mcpu=cascadelake");
  assert_true(ts_target_equal(a, b));
  assert_string_equal(ts_target_str(a), ts_target_str(b));
  ts_target *c = ts_target_copy(a);
  assert_non_null(c);
  assert_true(ts_target_equal(a, c));
  ts_target_free(a);
  ts_target_free(b);
  ts_target_free(c);
}

static void test_queries(void **state) {
  (void)state;
  ts_target *t = parse_ok("llvm -mcpu=skylake-avx512 -num-cores=2");
  const ts_target_facts *facts = ts_target_facts_of(t);
  assert_string_equal(facts->kind, "llvm");
  assert_string_equal(facts->family, "x86");
  assert_string_equal(facts->rules, "cpu");
  assert_false(facts->is_gpu);
  assert_true(facts->runs_on_host);
  assert_int_equal(facts->artifact, TS_ARTIFACT_CPU_OBJECT);
  assert_int_equal(ts_target_vector_lanes(t, TS_FLOAT32), 16);
  assert_int_equal(ts_target_vector_lanes(t, TS_FLOAT64), 8);
  assert_true(ts_target_has_feature(t, "avx512f"));
  assert_true(ts_target_has_feature(t, "avx512bw"));
  assert_false(ts_target_has_feature(t, "avx512vnni"));
  assert_false(ts_target_has_feature(t, "amx-tile"));
  assert_false(ts_target_has_feature(t, "no-such-feature"));
  assert_int_equal(ts_target_vector_bits(t), 512);
  assert_int_equal(ts_target_num_cores(t), 2);
  assert_int_equal(ts_target_sm(t), 0);
  assert_string_equal(ts_target_cpu(t), "skylake-avx512");
  assert_false(ts_target_strided_prefetch(t)); /* an Intel core */
  assert_non_null(strstr(ts_target_llvm_features(t), "+avx512f"));
  assert_non_null(strstr(ts_target_triple(t), "x86_64"));
  /* Features come back sorted with their signs. */
  int n = ts_target_num_features(t);
  assert_true(n >= 10);
  for (int i = 1; i < n; i++)
    assert_true(strcmp(ts_target_feature(t, i - 1, NULL),
                       ts_target_feature(t, i, NULL)) < 0);
  assert_null(ts_target_feature(t, n, NULL));
  ts_target_free(t);

  /* Disabling avx512f disables what needs it; the width drops to 256. */
  t = parse_ok("llvm -mcpu=skylake-avx512 -mattr=-avx512f -num-cores=1");
  assert_false(ts_target_has_feature(t, "avx512f"));
  assert_false(ts_target_has_feature(t, "avx512bw"));
  assert_true(ts_target_has_feature(t, "avx2"));
  assert_int_equal(ts_target_vector_bits(t), 256);
  bool on = true;
  assert_string_equal(ts_target_feature(t, 5, &on), "avx512f");
  assert_false(on);
  ts_target_free(t);

  t = parse_ok("llvm -mcpu=x86-64 -num-cores=1");
  assert_int_equal(ts_target_vector_bits(t), 128);
  assert_string_equal(ts_target_llvm_features(t), "");
  ts_target_free(t);
  t = parse_ok("llvm -mcpu=sapphirerapids -num-cores=1");
  assert_true(ts_target_has_feature(t, "amx-bf16"));
  assert_true(ts_target_has_feature(t, "avx512bf16"));
  ts_target_free(t);

  t = parse_ok("cuda -arch=sm_90");
  facts = ts_target_facts_of(t);
  assert_string_equal(facts->kind, "cuda");
  assert_string_equal(facts->family, "nvptx");
  assert_string_equal(facts->rules, "gpu");
  assert_true(facts->is_gpu);
  assert_false(facts->runs_on_host);
  assert_int_equal(facts->artifact, TS_ARTIFACT_PTX);
  assert_int_equal(ts_target_vector_lanes(t, TS_FLOAT32), 1);
  /* architectures as features: sm_90 has what sm_80 has */
  assert_true(ts_target_has_feature(t, "sm_80"));
  assert_true(ts_target_has_feature(t, "sm_90"));
  assert_false(ts_target_has_feature(t, "sm_100"));
  assert_false(ts_target_has_feature(t, "sm_"));
  assert_int_equal(ts_target_sm(t), 90);
  assert_int_equal(ts_target_max_threads_per_block(t), 1024);
  assert_int_equal(ts_target_max_shared_memory_per_block(t), 49152);
  assert_int_equal(ts_target_max_registers_per_thread(t), 255);
  assert_string_equal(ts_target_cpu(t), "sm_90");
  assert_string_equal(ts_target_triple(t), "nvptx64-nvidia-cuda");
  assert_string_equal(ts_target_llvm_features(t), "+ptx80");
  assert_false(ts_target_has_feature(t, "avx2"));
  assert_int_equal(ts_target_num_cores(t), 0);
  assert_int_equal(ts_target_vector_bits(t), 32);
  ts_target_free(t);
  t = parse_ok("cuda -arch=sm_80");
  assert_string_equal(ts_target_llvm_features(t), "+ptx70");
  ts_target_free(t);
}

static void test_native(void **state) {
  (void)state;
  char *host_cpu = LLVMGetHostCPUName();
  char *host_features = LLVMGetHostCPUFeatures();
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  const char *spellings[] = {"llvm", "llvm -mcpu=native", "  llvm  "};
  for (size_t s = 0; s < sizeof spellings / sizeof spellings[0]; s++) {
    ts_target *t = parse_ok(spellings[s]);
    printf("  '%s' -> %.160s...\n", spellings[s], ts_target_str(t));
    assert_string_equal(ts_target_cpu(t), host_cpu);
    assert_null(strstr(ts_target_str(t), "native"));
    assert_int_equal(ts_target_num_cores(t), (int)online);
    /* Every feature the host enables is stored, enabled. */
    for (const char *f = host_features; *f;) {
      const char *comma = strchr(f, ',');
      size_t len = comma ? (size_t)(comma - f) : strlen(f);
      if (f[0] == '+') {
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(len - 1), f + 1);
        bool found = false, on = false;
        for (int i = 0; i < ts_target_num_features(t); i++)
          if (strcmp(ts_target_feature(t, i, &on), name) == 0) {
            found = true;
            break;
          }
        assert_true(found);
        assert_true(on);
      }
      f += len + (comma ? 1 : 0);
    }
    /* The queries agree with cpuid. */
    const char *check[] = {"avx2",       "fma",        "avx512f",    "avx512bw",
                           "avx512vnni", "avx512bf16", "avx512fp16", "amx-tile",
                           "amx-bf16",   "amx-int8"};
    for (size_t i = 0; i < sizeof check / sizeof check[0]; i++) {
      int cpu = ts_rt_cpu_has(check[i]);
      assert_true(cpu == 0 || cpu == 1);
      if ((cpu == 1) != ts_target_has_feature(t, check[i]))
        fprintf(stderr, "feature %s: cpuid %d, target %d\n", check[i], cpu,
                ts_target_has_feature(t, check[i]));
      assert_int_equal(cpu == 1, ts_target_has_feature(t, check[i]));
    }
    int want_bits = ts_rt_cpu_has("avx512f") == 1 ? 512
                    : ts_rt_cpu_has("avx2") == 1  ? 256
                                                  : 128;
    assert_int_equal(ts_target_vector_bits(t), want_bits);
    /* The resolved string is concrete: it parses to itself. */
    ts_target *again = parse_ok(ts_target_str(t));
    assert_string_equal(ts_target_str(again), ts_target_str(t));
    ts_target_free(again);
    ts_target_free(t);
  }
  ts_target *h = NULL;
  assert_int_equal(ts_target_host(&h, NULL), TS_OK);
  ts_target *n = parse_ok("llvm -mcpu=native -num-cores=3");
  assert_int_equal(ts_target_num_cores(n), 3);
  assert_int_equal(ts_target_num_features(n), ts_target_num_features(h));
  ts_target_free(n);
  ts_target_free(h);
  /* Native with an explicit override. */
  n = parse_ok("llvm -mcpu=native -mattr=-avx2");
  assert_false(ts_target_has_feature(n, "avx2"));
  assert_false(ts_target_has_feature(n, "avx512f"));
  assert_non_null(strstr(ts_target_str(n), "-avx2"));
  ts_target_free(n);
  LLVMDisposeMessage(host_cpu);
  LLVMDisposeMessage(host_features);
}

typedef struct bad_case {
  const char *text;
  const char *message; /* a substring of the error */
  int column;          /* 0: not checked */
} bad_case;

static void test_malformed(void **state) {
  (void)state;
  const bad_case cases[] = {
      {"", "empty target string", 1},
      {"   ", "empty target string", 0},
      {"lvm", "unknown target kind 'lvm'", 1},
      {"LLVM -mcpu=haswell", "unknown target kind 'LLVM'", 1},
      {"llvm -foo=1", "unknown option '-foo' for target kind 'llvm'", 6},
      {"llvm -foo", "unknown option '-foo'", 6},
      {"llvm --mcpu=haswell", "unknown option '--mcpu'", 6},
      {"llvm -mcpu", "option '-mcpu' needs a value", 6},
      {"llvm -mcpu=", "option '-mcpu' has an empty value", 6},
      {"llvm -mcpu=x86-64 -mcpu=haswell", "option '-mcpu' given twice", 19},
      {"llvm -num-cores=0", "bad -num-cores value '0'", 17},
      {"llvm -num-cores=-3", "bad -num-cores value '-3'", 0},
      {"llvm -num-cores=4x", "bad -num-cores value '4x'", 0},
      {"llvm -num-cores=99999999999999", "bad -num-cores value", 0},
      {"llvm -num-cores=5000", "bad -num-cores value '5000'", 0},
      {"llvm -mcpu=skylake_avx", "unknown CPU 'skylake_avx'", 12},
      {"llvm -mattr=avx2", "bad -mattr entry 'avx2'", 13},
      {"llvm -mattr=+avx2,,+fma", "empty entry in the -mattr list", 19},
      {"llvm -mattr=+avx2,", "empty entry in the -mattr list", 0},
      {"llvm -mattr=+avx2,-avx2", "feature 'avx2' listed twice", 0},
      {"llvm -mattr=+AVX2", "character 'A' is not allowed", 0},
      {"llvm -mattr=+", "bad feature name", 0},
      {"llvm haswell", "unexpected token 'haswell'", 6},
      {"llvm -arch=sm_80", "unknown option '-arch' for target kind 'llvm'", 0},
      {"cuda", "needs -arch=sm_XX", 1},
      {"cuda -max-threads-per-block=256", "needs -arch=sm_XX", 0},
      {"cuda -arch=sm_", "sm_ must be followed by a number", 0},
      {"cuda -arch=sm_x", "sm_ must be followed by a number", 0},
      {"cuda -arch=sm_90a", "sm_ must be followed by a number", 0},
      {"cuda -arch=compute_80", "bad -arch value 'compute_80'", 12},
      {"cuda -arch=sm_91", "unsupported CUDA architecture 'sm_91'", 0},
      {"cuda -arch=sm_80 -max-threads-per-block=2048",
       "bad -max-threads-per-block value '2048'", 0},
      {"cuda -arch=sm_80 -max-shared-memory-per-block=0",
       "bad -max-shared-memory-per-block value '0'", 0},
      {"cuda -arch=sm_80 -max-registers-per-thread=256",
       "bad -max-registers-per-thread value '256'", 0},
      {"cuda -arch=sm_80 -mcpu=native",
       "unknown option '-mcpu' for target kind 'cuda'", 0},
      {"cuda -arch=sm_80 -arch=sm_90", "option '-arch' given twice", 0},
  };
  size_t n = sizeof cases / sizeof cases[0];
  assert_true(n >= 20);
  for (size_t i = 0; i < n; i++) {
    ts_target *t = NULL;
    ts_error err;
    ts_error_clear(&err);
    int rc = ts_target_parse(cases[i].text, &t, &err);
    if (rc != TS_EINVAL || !strstr(err.msg, cases[i].message) ||
        (cases[i].column && err.column != cases[i].column))
      fprintf(stderr, "case '%s': rc %d, column %d, message '%s'\n",
              cases[i].text, rc, err.column, err.msg);
    assert_int_equal(rc, TS_EINVAL);
    assert_null(t);
    assert_non_null(strstr(err.msg, cases[i].message));
    if (cases[i].column) assert_int_equal(err.column, cases[i].column);
  }
  ts_target *t = NULL;
  assert_int_equal(ts_target_parse(NULL, &t, NULL), TS_EINVAL);
}

/* The instruction-set level and the per-dtype answers follow the target's
 * features, not the host's. */
static void test_isa_levels(void **state) {
  (void)state;
  static const struct {
    const char *target, *isa;
    int bits, registers;
    bool bf16_native;
  } cases[] = {
      {"llvm -mcpu=x86-64", "SSE2", 128, 16, false},
      {"llvm -mcpu=x86-64-v2", "SSE4.2", 128, 16, false},
      {"llvm -mcpu=sandybridge", "AVX", 256, 16, false},
      {"llvm -mcpu=x86-64-v3", "AVX2", 256, 16, false},
      {"llvm -mcpu=znver3", "AVX2", 256, 16, false},
      {"llvm -mcpu=skylake-avx512", "AVX-512", 512, 32, false},
      {"llvm -mcpu=cascadelake", "AVX-512 + VNNI", 512, 32, false},
      {"llvm -mcpu=znver4", "AVX-512 + VNNI + AVX512-BF16", 512, 32, true},
      {"llvm -mcpu=sapphirerapids",
       "AVX-512 + VNNI + AVX-VNNI + AVX512-BF16 + AVX512-FP16 + AMX-BF16 + "
       "AMX-INT8",
       512, 32, true},
      {"llvm -mcpu=znver4 -mattr=-avx512f", "AVX2", 256, 16, false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ts_target *t = parse_ok(cases[i].target);
    char isa[160], path[200];
    ts_target_isa(t, isa, sizeof isa);
    if (strcmp(isa, cases[i].isa))
      printf("%s: isa '%s', want '%s'\n", cases[i].target, isa, cases[i].isa);
    assert_string_equal(isa, cases[i].isa);
    assert_int_equal(ts_target_vector_bits(t), cases[i].bits);
    assert_int_equal(ts_target_vector_registers(t), cases[i].registers);
    assert_int_equal(ts_target_dtype_native(t, TS_BFLOAT16),
                     cases[i].bf16_native);
    assert_true(ts_target_dtype_native(t, TS_FLOAT32));
    assert_false(ts_target_dtype_native(t, TS_FLOAT16));
    ts_target_dtype_path(t, TS_BFLOAT16, path, sizeof path);
    assert_int_equal(strstr(path, "computed in float32") != NULL,
                     !cases[i].bf16_native);
    ts_target_dtype_path(t, TS_FLOAT32, path, sizeof path);
    char lanes[32];
    snprintf(lanes, sizeof lanes, "%d lanes", cases[i].bits / 32);
    assert_non_null(strstr(path, lanes));
    ts_target_dtype_path(t, TS_INT8, path, sizeof path);
    assert_int_equal(strstr(path, "no VNNI") != NULL,
                     !ts_target_has_feature(t, "avx512vnni"));
    ts_target_free(t);
  }
  ts_target *c = parse_ok("cuda -arch=sm_80");
  char isa[32];
  assert_string_equal(ts_target_isa(c, isa, sizeof isa), "sm_80");
  assert_true(ts_target_dtype_native(c, TS_BFLOAT16));
  assert_int_equal(ts_target_vector_registers(c), 0);
  /* a small buffer is cut, never overrun */
  ts_target *s = parse_ok("llvm -mcpu=sapphirerapids");
  assert_int_equal(strlen(ts_target_isa(s, isa, 8)), 7);
  ts_target_free(s);
  ts_target_free(c);
}

/* Every registered family parses its kind word (with the options its
 * target strings need) and answers for itself; the parser's messages list
 * the registered kinds. */
static void test_registry(void **state) {
  (void)state;
  int n = 0;
  for (; ts_target_family(n); n++) {
    const ts_target_facts *f = ts_target_family(n);
    assert_non_null(f->kind);
    assert_non_null(f->family);
    assert_non_null(f->rules);
    for (int k = 0; k < n; k++)
      assert_string_not_equal(ts_target_family(k)->kind, f->kind);
  }
  assert_int_equal(n, 2);
  ts_error err;
  ts_target *t = NULL;
  assert_int_equal(ts_target_parse("rocm", &t, &err), TS_EINVAL);
  assert_non_null(strstr(err.msg, "(want llvm or cuda)"));
  t = parse_ok("llvm -mcpu=x86-64 -num-cores=1");
  assert_ptr_equal(ts_target_facts_of(t), ts_target_family(0));
  ts_target_free(t);
  t = parse_ok("cuda -arch=sm_70");
  assert_ptr_equal(ts_target_facts_of(t), ts_target_family(1));
  assert_false(ts_target_has_feature(t, "sm_80"));
  ts_target_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_registry),  cmocka_unit_test(test_canonical_forms),
      cmocka_unit_test(test_queries),   cmocka_unit_test(test_native),
      cmocka_unit_test(test_malformed), cmocka_unit_test(test_isa_levels),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
