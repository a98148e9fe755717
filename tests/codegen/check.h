/*
 * check.h — shared by the codegen tests: compile a function for the host,
 * run it through the runtime and compare every output with the reference
 * interpreter on the same seeded inputs.
 */
#ifndef TESSERA_TESTS_CODEGEN_CHECK_H
#define TESSERA_TESTS_CODEGEN_CHECK_H

#include "codegen/codegen.h"
#include "runtime/runtime.h"
#include "tir/tir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Argument specs of an artifact for ts_rt_args_create (malloc'd). */
static inline ts_rt_arg_spec *check_specs(const ts_artifact *a) {
  ts_rt_arg_spec *s = calloc((size_t)(a->n_args ? a->n_args : 1), sizeof *s);
  for (int i = 0; i < a->n_args; i++) {
    s[i].dtype = a->args[i].dtype;
    s[i].ndim = a->args[i].ndim;
    memcpy(s[i].shape, a->args[i].shape, sizeof s[i].shape);
    s[i].role = a->args[i].is_output ? TS_RT_ARG_OUTPUT : TS_RT_ARG_INPUT;
  }
  return s;
}

/* Compiles f for `target` (NULL: the host) and checks that every symbol of
 * the object resolves; then, when `run`, runs it with `threads` threads and
 * compares with the interpreter running `ref` (same parameters; the
 * unscheduled function where f calls tensor intrinsics, which the
 * interpreter does not run). Returns TS_OK or the first failure, with a
 * message in err. */
static inline int check_compiled_ref(const ts_func *f, const ts_func *ref,
                                     const ts_target *target, int threads,
                                     uint64_t seed, bool run, ts_error *err) {
  ts_target *host = NULL;
  int rc = TS_OK;
  if (!target) {
    if ((rc = ts_target_host(&host, err))) return rc;
    target = host;
  }
  ts_build_result br = {0};
  ts_rt_kernel *k = NULL;
  ts_runtime *rt = NULL;
  ts_rt_args *got = NULL, *want = NULL;
  ts_rt_arg_spec *specs = NULL;
  ts_build_options o = ts_build_defaults();
  o.lower.verify_between = true;
  if ((rc = ts_build(f, target, &o, &br, err))) goto done;
  if ((rc = ts_rt_object_check(br.artifact->bytes, br.artifact->n_bytes,
                               br.artifact->entry, err)) ||
      !run)
    goto done;
  if ((rc = ts_rt_kernel_load(br.artifact->bytes, br.artifact->n_bytes,
                              br.artifact->entry, &k, err)))
    goto done;
  if ((rc = ts_runtime_create(threads, &rt, err))) goto done;
  specs = check_specs(br.artifact);
  if ((rc = ts_rt_args_create(specs, br.artifact->n_args, seed, &got, err)))
    goto done;
  if ((rc = ts_rt_args_create(specs, br.artifact->n_args, seed, &want, err)))
    goto done;
  if ((rc = ts_rt_kernel_call(k, ts_rt_args_data(got), rt, err))) goto done;
  if ((rc = ts_interp_run(ref, ts_rt_args_data(want), ts_rt_args_count(want),
                          NULL, err)))
    goto done;
  rc = ts_rt_args_compare(got, want, err);
done:
  ts_rt_args_free(got);
  ts_rt_args_free(want);
  free(specs);
  ts_runtime_destroy(rt);
  ts_rt_kernel_unload(k);
  ts_build_result_clear(&br);
  ts_target_free(host);
  return rc;
}

/* check_compiled_ref against f itself. */
static inline int check_compiled_on(const ts_func *f, const ts_target *target,
                                    int threads, uint64_t seed, bool run,
                                    ts_error *err) {
  return check_compiled_ref(f, f, target, threads, seed, run, err);
}

/* check_compiled_on, run on this machine. */
static inline int check_compiled(const ts_func *f, const ts_target *target,
                                 int threads, uint64_t seed, ts_error *err) {
  return check_compiled_on(f, target, threads, seed, true, err);
}

/* The function of TIR text (NULL with the error printed). */
static inline ts_func *check_parse(const char *text, const char *file) {
  ts_func *f = NULL;
  ts_error err;
  if (ts_func_parse(text, strlen(text), file, &f, &err)) {
    printf("parse: %s\n", err.msg);
    return NULL;
  }
  return f;
}

/* check_compiled_on on this machine for the host, the mismatch printed. */
static inline int check_host_run(const ts_func *f, int threads, uint64_t seed) {
  ts_error err;
  int rc = check_compiled_ref(f, f, NULL, threads, seed, true, &err);
  if (rc) printf("mismatch: %s\n", err.msg);
  return rc;
}

/* The lowered program of f for the host, printed (malloc'd), or NULL with
 * the error printed. */
static inline char *check_lowered(const ts_func *f) {
  ts_error err;
  ts_func *low = ts_lower(f, NULL, &err);
  if (!low) {
    printf("lower: %s\n", err.msg);
    return NULL;
  }
  char *text = ts_func_print(low);
  ts_func_free(low);
  return text;
}

/* How many times needle occurs in text. */
static inline int check_count(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

/* The LLVM IR of f as emitted for the target string `target` (before
 * LLVM's passes; malloc'd), or NULL with the error printed. */
static inline char *check_emitted_ir_for(const ts_func *f, const char *target) {
  ts_error err;
  ts_target *t = NULL;
  if (ts_target_parse(target, &t, &err)) {
    printf("target: %s\n", err.msg);
    return NULL;
  }
  ts_build_options o = ts_build_defaults();
  o.keep_llvm_ir = true;
  o.no_opt = true;
  ts_build_result br = {0};
  char *ir = NULL;
  if (ts_build(f, t, &o, &br, &err))
    printf("build: %s\n", err.msg);
  else
    ir = strdup(br.llvm_ir);
  ts_build_result_clear(&br);
  ts_target_free(t);
  return ir;
}

/* The optimized LLVM IR of f for the host (malloc'd), or NULL with the
 * error printed. */
static inline char *check_llvm_ir(const ts_func *f) {
  ts_error err;
  ts_target *host = NULL;
  if (ts_target_host(&host, &err)) {
    printf("host: %s\n", err.msg);
    return NULL;
  }
  ts_build_options o = ts_build_defaults();
  o.keep_llvm_ir = true;
  ts_build_result br = {0};
  char *ir = NULL;
  if (ts_build(f, host, &o, &br, &err))
    printf("build: %s\n", err.msg);
  else
    ir = strdup(br.llvm_ir);
  ts_build_result_clear(&br);
  ts_target_free(host);
  return ir;
}

#endif /* TESSERA_TESTS_CODEGEN_CHECK_H */
