/*
 * kernel.c — a function built, loaded and given seeded arguments in this
 * process, so the CLI can time it (the tuning summary, model comparisons).
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

ts_rt_arg_spec *cli_arg_specs(const ts_artifact *a) {
  ts_rt_arg_spec *s = calloc((size_t)(a->n_args ? a->n_args : 1), sizeof *s);
  for (int i = 0; s && i < a->n_args; i++) {
    s[i].dtype = a->args[i].dtype;
    s[i].ndim = a->args[i].ndim;
    memcpy(s[i].shape, a->args[i].shape, sizeof s[i].shape);
    s[i].role = a->args[i].is_output ? TS_RT_ARG_OUTPUT : TS_RT_ARG_INPUT;
  }
  return s;
}

int cli_kernel_build(const ts_func *f, const ts_target *t, uint64_t seed,
                     cli_kernel *k, ts_error *err) {
  memset(k, 0, sizeof *k);
  int rc = ts_build(f, t, NULL, &k->build, err);
  if (!rc)
    rc = ts_rt_kernel_load(k->build.artifact->bytes, k->build.artifact->n_bytes,
                           k->build.artifact->entry, &k->kernel, err);
  if (!rc) {
    ts_rt_arg_spec *specs = cli_arg_specs(k->build.artifact);
    rc = specs ? ts_rt_args_create(specs, k->build.artifact->n_args, seed,
                                   &k->args, err)
               : TS_ERR(err, TS_ENOMEM, "out of memory");
    free(specs);
  }
  if (rc) cli_kernel_free(k);
  return rc;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
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
  qsort(secs, (size_t)c.repeat, sizeof secs[0], cmp_double);
  *median_s = secs[c.repeat / 2];
  return TS_OK;
}

void cli_kernel_free(cli_kernel *k) {
  ts_rt_args_free(k->args);
  ts_rt_kernel_unload(k->kernel);
  ts_build_result_clear(&k->build);
  memset(k, 0, sizeof *k);
}
