/*
 * util.h — shared by the tuner tests: build a workload from a spec, and
 * check a scheduled function by compiling it for a target, running it and
 * comparing its outputs with the reference interpreter on the unscheduled
 * function (same seeded inputs).
 */
#ifndef TESSERA_TESTS_TUNER_UTIL_H
#define TESSERA_TESTS_TUNER_UTIL_H

#include "codegen/codegen.h"
#include "runtime/runtime.h"
#include "schedule/schedule.h"
#include "tir/tir.h"
#include "tuner/tuner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline ts_rt_arg_spec *tu_specs(const ts_func *f) {
  int n = ts_func_n_params(f);
  ts_rt_arg_spec *s = calloc((size_t)(n ? n : 1), sizeof *s);
  for (int i = 0; i < n; i++) {
    const ts_buffer *b = ts_func_param(f, i);
    s[i].dtype = ts_buffer_dtype(b);
    s[i].ndim = ts_buffer_ndim(b);
    for (int d = 0; d < s[i].ndim; d++) s[i].shape[d] = ts_buffer_dim(b, d);
    s[i].role =
        ts_func_param_is_output(f, i) ? TS_RT_ARG_OUTPUT : TS_RT_ARG_INPUT;
  }
  return s;
}

/* A uint8 x int8 matmul into int32 (activations after a ReLU, as a
 * quantized model has them), which the operator library does not build. */
static const char tu_u8s8_matmul[] =
    "func mm(A: uint8[16, 64], B: int8[64, 32], C: int32[16, 32]) {\n"
    "  block root() {\n"
    "    for i in range(16) {\n"
    "      for j in range(32) {\n"
    "        for k in range(64) {\n"
    "          block C(vi: spatial(16) = i, vj: spatial(32) = j, "
    "vk: reduce(64) = k) {\n"
    "            init {\n"
    "              C[vi, vj] = int32(0)\n"
    "            }\n"
    "            C[vi, vj] = C[vi, vj] + cast(int32, A[vi, vk]) * "
    "cast(int32, B[vk, vj])\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

/* The interpreter's outputs of f on seeded inputs (caller frees). */
static inline ts_rt_args *tu_reference(const ts_func *f, uint64_t seed) {
  ts_rt_arg_spec *specs = tu_specs(f);
  ts_rt_args *want = NULL;
  ts_error err;
  if (ts_rt_args_create(specs, ts_func_n_params(f), seed, &want, &err) ||
      ts_interp_run(f, ts_rt_args_data(want), ts_rt_args_count(want), NULL,
                    &err)) {
    printf("reference failed: %s\n", err.msg);
    ts_rt_args_free(want);
    want = NULL;
  }
  free(specs);
  return want;
}

/* Compiles f for t, runs it on `threads` threads and compares with want.
 * Returns TS_OK or the failing step's code (message printed). */
static inline int tu_check(const ts_func *f, const ts_target *t,
                           const ts_rt_args *want, uint64_t seed,
                           ts_runtime *rt) {
  ts_error err;
  ts_error_clear(&err);
  ts_build_result br;
  memset(&br, 0, sizeof br);
  ts_rt_kernel *k = NULL;
  ts_rt_args *got = NULL;
  ts_rt_arg_spec *specs = tu_specs(f);
  ts_build_options o = ts_build_defaults();
  o.lower.verify_between = true;
  int rc = ts_build(f, t, &o, &br, &err);
  if (!rc)
    rc = ts_rt_kernel_load(br.artifact->bytes, br.artifact->n_bytes,
                           br.artifact->entry, &k, &err);
  if (!rc) rc = ts_rt_args_create(specs, ts_func_n_params(f), seed, &got, &err);
  if (!rc) rc = ts_rt_kernel_call(k, ts_rt_args_data(got), rt, &err);
  if (!rc) rc = ts_rt_args_compare(got, want, &err);
  if (rc) {
    char *text = ts_func_print(f);
    printf("check failed: %s\n%s\n", err.msg, text);
    free(text);
  }
  ts_rt_args_free(got);
  ts_rt_kernel_unload(k);
  ts_build_result_clear(&br);
  free(specs);
  return rc;
}

static inline ts_workload *tu_workload(const char *spec) {
  ts_workload *w = NULL;
  ts_error err;
  if (ts_workload_from_spec(spec, &w, &err)) printf("%s: %s\n", spec, err.msg);
  return w;
}

/* The innermost loop above block `name` in f (NULL when none). */
static inline const ts_stmt *tu_inner_loop(const ts_func *f, const char *name) {
  const ts_stmt *r = ts_func_find_block(f, name);
  int n = 0;
  ts_stmt **loops = r ? ts_func_loops_above(f, r, true, &n) : NULL;
  const ts_stmt *l = n > 0 ? loops[n - 1] : NULL;
  free(loops);
  return l;
}

#endif /* TESSERA_TESTS_TUNER_UTIL_H */
