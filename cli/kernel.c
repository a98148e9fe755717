/*
 * kernel.c — a function built, loaded and given seeded arguments in this
 * process, so the CLI can time it (the tuning summary, model comparisons).
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

int cli_kernel_build(const ts_func *f, const ts_target *t, cli_kernel *k,
                     ts_error *err) {
  memset(k, 0, sizeof *k);
  int n = ts_func_n_params(f);
  ts_rt_arg_spec *specs = calloc((size_t)(n ? n : 1), sizeof *specs);
  if (!specs) return TS_ERR(err, TS_ENOMEM, "out of memory");
  for (int i = 0; i < n; i++) {
    const ts_buffer *b = ts_func_param(f, i);
    specs[i].dtype = ts_buffer_dtype(b);
    specs[i].ndim = ts_buffer_ndim(b);
    for (int d = 0; d < specs[i].ndim; d++)
      specs[i].shape[d] = ts_buffer_dim(b, d);
    specs[i].role =
        ts_func_param_is_output(f, i) ? TS_RT_ARG_OUTPUT : TS_RT_ARG_INPUT;
  }
  int rc = ts_build(f, t, NULL, &k->build, err);
  if (!rc)
    rc = ts_rt_kernel_load(k->build.artifact->bytes, k->build.artifact->n_bytes,
                           k->build.artifact->entry, &k->kernel, err);
  if (!rc) rc = ts_rt_args_create(specs, n, 1, &k->args, err);
  free(specs);
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
