/*
 * util.h — shared by the schedule tests: build a workload, run a schedule
 * check (the scheduled function compiled for the host and interpreted,
 * both compared with the unscheduled function interpreted on the same
 * seeded inputs), and check that a failing primitive left the schedule
 * printing exactly as before.
 */
#ifndef TESSERA_TESTS_SCHEDULE_UTIL_H
#define TESSERA_TESTS_SCHEDULE_UTIL_H

#include "codegen/codegen.h"
#include "runtime/runtime.h"
#include "schedule/schedule.h"
#include "tir/tir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Argument specs of a function for ts_rt_args_create (malloc'd). */
static inline ts_rt_arg_spec *util_specs(const ts_func *f) {
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

/* The reference outputs of f (interpreted) on seeded inputs; caller frees
 * with ts_rt_args_free. */
static inline int util_reference(const ts_func *f, uint64_t seed,
                                 ts_rt_args **out, ts_error *err) {
  ts_rt_arg_spec *specs = util_specs(f);
  int rc = ts_rt_args_create(specs, ts_func_n_params(f), seed, out, err);
  free(specs);
  if (rc) return rc;
  rc = ts_interp_run(f, ts_rt_args_data(*out), ts_rt_args_count(*out), NULL,
                     err);
  if (rc) {
    ts_rt_args_free(*out);
    *out = NULL;
  }
  return rc;
}

/* The target the schedule tests compile for: TS_TEST_TARGET when set (the
 * ctest entries that cover other x86-64 machines set it), else the host.
 * Parsed once; NULL with err set when the string is not a target. */
static inline ts_target *util_target(ts_error *err) {
  static ts_target *target;
  if (target) return target;
  const char *s = getenv("TS_TEST_TARGET");
  int rc =
      s && *s ? ts_target_parse(s, &target, err) : ts_target_host(&target, err);
  return rc ? NULL : target;
}

/* Whether this CPU runs code built for the test target (it has every
 * feature the target enables that the runtime can query). */
static inline bool util_target_runs_here(void) {
  ts_error err;
  ts_target *t = util_target(&err);
  if (!t) return false;
  for (int i = 0; i < ts_target_num_features(t); i++) {
    bool on = false;
    const char *name = ts_target_feature(t, i, &on);
    if (on && ts_rt_cpu_has(name) == 0) return false;
  }
  return true;
}

/* Compiles `f` for the test target (util_target; with the verifier between
 * lowering passes), runs it with `threads` threads and compares with `want`
 * (the reference outputs for `seed`). With `interp` also interprets f and
 * compares. */
static inline int util_check_against(const ts_func *f, const ts_rt_args *want,
                                     uint64_t seed, int threads, bool interp,
                                     ts_error *err) {
  static ts_runtime *rt[3];
  int rc = TS_OK;
  ts_target *host = util_target(err);
  if (!host) return err->code;
  if (threads < 1) threads = 1;
  if (threads > 2) threads = 2;
  if (!rt[threads] && (rc = ts_runtime_create(threads, &rt[threads], err)))
    return rc;
  ts_build_result br = {0};
  ts_rt_kernel *k = NULL;
  ts_rt_args *got = NULL;
  ts_rt_arg_spec *specs = util_specs(f);
  ts_build_options o = ts_build_defaults();
  o.lower.verify_between = true;
  if ((rc = ts_build(f, host, &o, &br, err))) goto done;
  if ((rc = ts_rt_kernel_load(br.artifact->bytes, br.artifact->n_bytes,
                              br.artifact->entry, &k, err)))
    goto done;
  if ((rc = ts_rt_args_create(specs, ts_func_n_params(f), seed, &got, err)))
    goto done;
  if ((rc = ts_rt_kernel_call(k, ts_rt_args_data(got), rt[threads], err)))
    goto done;
  if ((rc = ts_rt_args_compare(got, want, err))) goto done;
  if (interp) {
    ts_rt_args_zero_outputs(got);
    if ((rc = ts_interp_run(f, ts_rt_args_data(got), ts_rt_args_count(got),
                            NULL, err)))
      goto done;
    rc = ts_rt_args_compare(got, want, err);
  }
done:
  ts_rt_args_free(got);
  free(specs);
  ts_rt_kernel_unload(k);
  ts_build_result_clear(&br);
  return rc;
}

/* util_check_against with the reference computed from `ref`. */
static inline int util_check(const ts_func *f, const ts_func *ref, int threads,
                             ts_error *err) {
  ts_rt_args *want;
  int rc = util_reference(ref, 7, &want, err);
  if (rc) return rc;
  rc = util_check_against(f, want, 7, threads, true, err);
  ts_rt_args_free(want);
  return rc;
}

/* A schedule over a workload spec (the workload is freed). */
static inline ts_sched *util_sched(const char *spec) {
  ts_workload *w;
  ts_error err;
  if (ts_workload_from_spec(spec, &w, &err)) {
    fprintf(stderr, "workload '%s': %s\n", spec, err.msg);
    return NULL;
  }
  ts_sched *s;
  int rc = ts_sched_create(w->func, 1, &s, &err);
  ts_workload_free(w);
  if (rc) {
    fprintf(stderr, "schedule: %s\n", err.msg);
    return NULL;
  }
  return s;
}

/* Two spatial stages, B = A * 2 then C = B + 1 (8x6 each), as TIR text. */
static inline const char *util_two_stage(void) {
  return "func two(A: float32[8, 6], C: float32[8, 6]) {\n"
         "  block root() {\n"
         "    alloc B: float32[8, 6]\n"
         "    for i in range(8) {\n"
         "      for j in range(6) {\n"
         "        block B(vi: spatial(8) = i, vj: spatial(6) = j) {\n"
         "          B[vi, vj] = A[vi, vj] * float32(2)\n"
         "        }\n"
         "      }\n"
         "    }\n"
         "    for i in range(8) {\n"
         "      for j in range(6) {\n"
         "        block C(vi: spatial(8) = i, vj: spatial(6) = j) {\n"
         "          C[vi, vj] = B[vi, vj] + float32(1)\n"
         "        }\n"
         "      }\n"
         "    }\n"
         "  }\n"
         "}\n";
}

/* A schedule over TIR text. */
static inline ts_sched *util_sched_text(const char *text) {
  ts_func *f;
  ts_error err;
  if (ts_func_parse(text, strlen(text), "test", &f, &err)) {
    fprintf(stderr, "parse: %d:%d: %s\n", err.line, err.column, err.msg);
    return NULL;
  }
  ts_sched *s;
  int rc = ts_sched_create(f, 1, &s, &err);
  ts_func_free(f);
  if (rc) {
    fprintf(stderr, "schedule: %s\n", err.msg);
    return NULL;
  }
  return s;
}

/* The printed scheduled function (malloc'd). */
static inline char *util_print(const ts_sched *s) {
  return ts_func_print(ts_sched_func(s));
}

/* Checks the scheduled function of s against its original: compiled and
 * interpreted. Prints the failure (with the function) and returns it. */
static inline int util_verify(const ts_sched *s, int threads) {
  ts_error err;
  int rc = ts_func_verify(ts_sched_func(s), &err);
  if (!rc)
    rc = util_check(ts_sched_func(s), ts_sched_original(s), threads, &err);
  if (rc) {
    char *txt = util_print(s);
    fprintf(stderr, "schedule check failed: %s\n%s\n", err.msg, txt);
    free(txt);
  }
  return rc;
}

#endif /* TESSERA_TESTS_SCHEDULE_UTIL_H */
