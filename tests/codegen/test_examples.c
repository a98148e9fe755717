/*
 * test_examples.c — the hand-scheduled example traces shipped under
 * docs/examples/ still apply to their workloads and compile, and their
 * kernels compute what the unscheduled kernel computes (run where the CPU
 * has the features; AMX is compile-only on CPUs without it, the reason
 * printed).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "check.h"
#include "schedule/schedule.h"

/* Applies docs/examples/<file> to `spec`, builds for `target_str`; when the
 * CPU has `feature` (or feature is NULL), runs it and the unscheduled
 * kernel on the same inputs and compares. */
static void check_example(const char *file, const char *spec,
                          const char *target_str, const char *feature,
                          const char *asm_needle) {
  char path[512];
  snprintf(path, sizeof path, "%s/docs/examples/%s", TS_SOURCE_DIR, file);
  ts_error err;
  ts_workload *w = NULL;
  ts_trace *tr = NULL;
  ts_sched *s = NULL;
  ts_target *t = NULL;
  assert_int_equal(ts_workload_from_spec(spec, &w, &err), TS_OK);
  int rc = ts_trace_from_json_file(path, &tr, &err);
  if (!rc) rc = ts_trace_apply(tr, w->func, 1, &s, &err);
  if (rc) printf("%s: %s\n", file, err.msg);
  assert_int_equal(rc, TS_OK);
  assert_int_equal(ts_target_parse(target_str, &t, &err), TS_OK);
  ts_build_options o = ts_build_defaults();
  o.keep_asm = true;
  ts_build_result br;
  rc = ts_build(ts_sched_func(s), t, &o, &br, &err);
  if (rc) printf("%s: %s\n", file, err.msg);
  assert_int_equal(rc, TS_OK);
  assert_non_null(strstr(br.assembly, asm_needle));
  bool ran = !feature || ts_rt_cpu_has(feature) == 1;
  if (!ran) {
    printf("%s: run skipped, this CPU lacks %s (compiled for '%s'; the "
           "assembly uses %s)\n",
           file, feature, target_str, asm_needle);
  } else {
    if (feature && !strncmp(feature, "amx", 3))
      assert_int_equal(ts_rt_enable_amx(&err), TS_OK);
    ts_build_result ref;
    assert_int_equal(ts_build(w->func, t, NULL, &ref, &err), TS_OK);
    ts_rt_kernel *k = NULL, *kr = NULL;
    ts_runtime *rt = NULL;
    assert_int_equal(ts_runtime_create(2, &rt, &err), TS_OK);
    assert_int_equal(ts_rt_kernel_load(br.artifact->bytes, br.artifact->n_bytes,
                                       br.artifact->entry, &k, &err),
                     TS_OK);
    assert_int_equal(ts_rt_kernel_load(ref.artifact->bytes,
                                       ref.artifact->n_bytes,
                                       ref.artifact->entry, &kr, &err),
                     TS_OK);
    ts_rt_arg_spec *specs = check_specs(br.artifact);
    ts_rt_args *got = NULL, *want = NULL;
    assert_int_equal(
        ts_rt_args_create(specs, br.artifact->n_args, 3, &got, &err), TS_OK);
    assert_int_equal(
        ts_rt_args_create(specs, br.artifact->n_args, 3, &want, &err), TS_OK);
    assert_int_equal(ts_rt_kernel_call(k, ts_rt_args_data(got), rt, &err),
                     TS_OK);
    assert_int_equal(ts_rt_kernel_call(kr, ts_rt_args_data(want), rt, &err),
                     TS_OK);
    rc = ts_rt_args_compare(got, want, &err);
    if (rc) printf("%s: %s\n", file, err.msg);
    assert_int_equal(rc, TS_OK);
    ts_rt_args_free(got);
    ts_rt_args_free(want);
    free(specs);
    ts_rt_kernel_unload(k);
    ts_rt_kernel_unload(kr);
    ts_runtime_destroy(rt);
    ts_build_result_clear(&ref);
  }
  ts_build_result_clear(&br);
  ts_target_free(t);
  ts_sched_destroy(s);
  ts_trace_free(tr);
  ts_workload_free(w);
  if (!ran) skip();
}

static void test_matmul_fp32(void **state) {
  (void)state;
  check_example("matmul_fp32_cpu.json", "matmul M=1024 N=1024 K=1024",
                "llvm -mcpu=skylake-avx512", "avx512f", "vfmadd");
}

static void test_matmul_bf16_amx(void **state) {
  (void)state;
  check_example("matmul_bf16_amx.json",
                "matmul M=1024 N=1024 K=1024 dtype=bfloat16",
                "llvm -mcpu=sapphirerapids", "amx-bf16", "tdpbf16ps");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matmul_fp32),
      cmocka_unit_test(test_matmul_bf16_amx),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
