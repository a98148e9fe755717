/*
 * test_golden.c — the generated code of two fixed programs, compared byte
 * for byte with the files under tests/codegen/golden/: the x86 assembly of
 * the fp32 matmul example (docs/examples/matmul_fp32_cpu.json applied to a
 * 1024³ matmul, built for a fixed CPU, not the host) and the PTX of the
 * hand-scheduled GPU matmul (tests/codegen/gpu/matmul.tir, sm_80). A
 * refactoring of the code generator or of the targets must leave both
 * unchanged; a change meant to alter the code rewrites them with
 * TS_GOLDEN_UPDATE=1 (and the diff shows in review).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "schedule/schedule.h"
#include "tests/golden.h"

#define GOLDEN_DIR TS_SOURCE_DIR "/tests/codegen/golden"

static void test_fp32_example_assembly(void **state) {
  (void)state;
  ts_error err;
  ts_workload *w = NULL;
  ts_trace *tr = NULL;
  ts_sched *s = NULL;
  ts_target *t = NULL;
  assert_int_equal(
      ts_workload_from_spec("matmul M=1024 N=1024 K=1024", &w, &err), TS_OK);
  int rc = ts_trace_from_json_file(
      TS_SOURCE_DIR "/docs/examples/matmul_fp32_cpu.json", &tr, &err);
  if (!rc) rc = ts_trace_apply(tr, w->func, 1, &s, &err);
  if (rc) fail_msg("example trace: %s", err.msg);
  assert_int_equal(
      ts_target_parse("llvm -mcpu=skylake-avx512 -num-cores=2", &t, &err),
      TS_OK);
  ts_build_options o = ts_build_defaults();
  o.keep_asm = true;
  ts_build_result br;
  rc = ts_build(ts_sched_func(s), t, &o, &br, &err);
  if (rc) fail_msg("build: %s", err.msg);
  assert_non_null(br.assembly);
  golden_compare(GOLDEN_DIR, "matmul_fp32_skylake-avx512.s", br.assembly,
                 "the generated code");
  ts_build_result_clear(&br);
  ts_target_free(t);
  ts_sched_destroy(s);
  ts_trace_free(tr);
  ts_workload_free(w);
}

static void test_gpu_matmul_ptx(void **state) {
  (void)state;
  ts_error err;
  ts_func *f = NULL;
  ts_target *t = NULL;
  if (ts_func_parse_file(TS_SOURCE_DIR "/tests/codegen/gpu/matmul.tir", &f,
                         &err))
    fail_msg("%s", err.msg);
  assert_int_equal(ts_target_parse("cuda -arch=sm_80", &t, &err), TS_OK);
  ts_build_result r;
  if (ts_build(f, t, NULL, &r, &err)) fail_msg("build: %s", err.msg);
  assert_int_equal(r.artifact->kind, TS_ARTIFACT_PTX);
  /* the PTX text (NUL-terminated within its bytes) */
  size_t n = r.artifact->n_bytes;
  char *ptx = malloc(n + 1);
  assert_non_null(ptx);
  memcpy(ptx, r.artifact->bytes, n);
  ptx[n] = '\0';
  golden_compare(GOLDEN_DIR, "gpu_matmul_sm_80.ptx", ptx, "the generated code");
  free(ptx);
  ts_build_result_clear(&r);
  ts_target_free(t);
  ts_func_free(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fp32_example_assembly),
      cmocka_unit_test(test_gpu_matmul_ptx),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
