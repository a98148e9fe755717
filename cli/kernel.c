/*
 * kernel.c — a function built, loaded and given seeded arguments in this
 * process, so the CLI can time it (the tuning summary, model comparisons).
 */
#include "cli.h"

#include <cjson/cJSON.h>

#include <math.h>
#include <stdio.h>

#include <stdlib.h>
#include <string.h>

int cli_kernel_build(const ts_func *f, const ts_target *t, uint64_t seed,
                     cli_kernel *k, ts_error *err) {
  memset(k, 0, sizeof *k);
  int rc = ts_build_measured(f, 0, t, NULL, &k->build, err);
  if (!rc)
    rc = ts_rt_kernel_load(k->build.artifact->bytes, k->build.artifact->n_bytes,
                           k->build.artifact->entry, &k->kernel, err);
  if (!rc) {
    ts_rt_arg_spec *specs = ts_artifact_arg_specs(k->build.artifact);
    rc = specs ? ts_rt_args_create(specs, k->build.artifact->n_args, seed,
                                   &k->args, err)
               : TS_ERR(err, TS_ENOMEM, "out of memory");
    free(specs);
  }
  if (!rc)
    rc = ts_rt_kernel_prepare(k->kernel, ts_rt_args_data(k->args), NULL, err);
  if (rc) cli_kernel_free(k);
  return rc;
}

int cli_kernel_build_record(const char *trace_json, const ts_func *f,
                            const ts_target *t, cli_kernel *k, ts_error *err) {
  ts_trace *full = NULL;
  ts_sched *s = NULL;
  int rc = ts_record_traces(trace_json, &full, NULL, err);
  if (!rc) rc = ts_trace_apply(full, f, 1, &s, err);
  if (!rc) rc = cli_kernel_build(ts_sched_func(s), t, 1, k, err);
  ts_sched_destroy(s);
  ts_trace_free(full);
  return rc;
}

int cli_kernel_time(cli_kernel *k, ts_runtime *rt, const ts_eval_config *cfg,
                    double *median_s, ts_error *err) {
  double secs[64];
  int number;
  ts_eval_config c = *cfg;
  if (c.repeat > 64) c.repeat = 64;
  int rc = ts_rt_eval_kernel(rt, &c, k->kernel, ts_rt_args_data(k->args), secs,
                             &number, err);
  if (rc) return rc;
  *median_s = ts_median(secs, c.repeat);
  return TS_OK;
}

void cli_kernel_free(cli_kernel *k) {
  ts_rt_args_free(k->args);
  ts_rt_kernel_unload(k->kernel);
  ts_build_result_clear(&k->build);
  memset(k, 0, sizeof *k);
}

void cli_print_target_isa(FILE *out, const ts_target *t) {
  char isa[160], path[200];
  fprintf(out, "isa: %s", ts_target_isa(t, isa, sizeof isa));
  if (ts_target_vector_registers(t) > 0)
    fprintf(out, " (%d vector registers of %d bits)",
            ts_target_vector_registers(t), ts_target_vector_bits(t));
  fprintf(out, "\n");
  const ts_dtype dtypes[] = {TS_FLOAT32, TS_FLOAT64, TS_BFLOAT16, TS_FLOAT16,
                             TS_INT8};
  for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
    char name[32];
    fprintf(out, "  %-10s %s\n", ts_dtype_str(dtypes[i], name),
            ts_target_dtype_path(t, dtypes[i], path, sizeof path));
  }
}

void cli_target_isa_json(cJSON *o, const ts_target *t) {
  char isa[160], path[200];
  cJSON_AddStringToObject(o, "isa", ts_target_isa(t, isa, sizeof isa));
  if (ts_target_vector_registers(t) > 0) {
    cJSON_AddNumberToObject(o, "vector_registers",
                            ts_target_vector_registers(t));
    cJSON_AddNumberToObject(o, "vector_bits", ts_target_vector_bits(t));
  }
  cJSON *d = cJSON_AddObjectToObject(o, "dtypes");
  const ts_dtype dtypes[] = {TS_FLOAT32, TS_FLOAT64, TS_BFLOAT16, TS_FLOAT16,
                             TS_INT8};
  for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
    char name[32];
    cJSON_AddStringToObject(
        d, ts_dtype_str(dtypes[i], name),
        ts_target_dtype_path(t, dtypes[i], path, sizeof path));
  }
}
