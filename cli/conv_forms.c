/*
 * conv_forms.c — Winograd's forms of a conv2d_nhwc workload in the
 * commands that take a workload: `tune --workload ... --winograd` adds the
 * forms' tasks to the job, its summary and `bench --workload --db` weigh
 * them against the direct kernel. A form is the graph compiler's
 * (graph/conv_forms.c): the input transform, the batched product over the
 * weights transformed ahead of time, the output transform.
 */
#include "cli.h"

#include "bench/bench.h"
#include "db/db.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The graph's view of a conv2d_nhwc workload; false for another one. */
static bool form_spec(const ts_workload *w, ts_conv_form_spec *s) {
  ts_bench_conv c;
  if (!ts_bench_conv_of(w, &c)) return false;
  *s = (ts_conv_form_spec){.n = c.n,
                           .h = c.h,
                           .w = c.w,
                           .ci = c.ci,
                           .co = c.co,
                           .kh = c.kh,
                           .kw = c.kw,
                           .stride = c.stride,
                           .pad = c.pad,
                           .dilation = c.dilation,
                           .groups = c.groups,
                           .weight_block = c.weight_block,
                           .float32 = c.float32};
  return true;
}

const char *cli_conv_form_why_not(const ts_workload *w) {
  ts_conv_form_spec s;
  if (!form_spec(w, &s)) return "it is not a conv2d_nhwc workload";
  return ts_conv_form_why_not(&s);
}

int cli_conv_form_tasks(const ts_workload *w, int m, ts_graph **g,
                        ts_graph_task **tasks, int *n, ts_error *err) {
  *g = NULL;
  *tasks = NULL;
  *n = 0;
  ts_conv_form_spec s;
  if (!form_spec(w, &s))
    return TS_ERR(err, TS_EUNSUPPORTED,
                  "conv forms: '%s' is not a conv2d_nhwc workload", w->name);
  int rc = ts_conv_form_graph(&s, NULL, m, g, err);
  if (!rc && (rc = ts_graph_tasks(*g, tasks, n, err))) {
    ts_graph_free(*g);
    *g = NULL;
  }
  return rc;
}

const char *cli_conv_form_stage(const ts_graph_task *t) {
  const char *f = t->first_node ? t->first_node : "";
  if (strstr(f, "winogradinput")) return "input transform";
  if (strstr(f, "winogradoutput")) return "output transform";
  return "product";
}

double cli_conv_form_seconds(const ts_workload *w, int m, ts_db *db,
                             const char *target, double *stage_s,
                             int max_stages, int *n_stages) {
  ts_graph *g = NULL;
  ts_graph_task *t = NULL;
  int n = 0;
  ts_error err;
  double sum = NAN;
  *n_stages = 0;
  if (cli_conv_form_tasks(w, m, &g, &t, &n, &err) || n > max_stages) goto done;
  sum = 0;
  for (int i = 0; i < n && isfinite(sum); i++) {
    ts_db_record rec;
    memset(&rec, 0, sizeof rec);
    if (ts_db_best_by_func(db, t[i].func, target, &rec) == TS_OK) {
      stage_s[i] = t[i].count * ts_db_record_seconds(&rec);
      sum += stage_s[i];
    } else {
      sum = NAN;
    }
    ts_db_record_clear(&rec);
  }
  *n_stages = n;
done:
  free(t);
  ts_graph_free(g);
  return sum;
}

int cli_conv_form_build(const ts_workload *w, int m, ts_db *db,
                        const ts_target *t, cli_form *f, ts_error *err) {
  memset(f, 0, sizeof *f);
  f->m = m;
  ts_graph *g = NULL;
  ts_graph_task *tasks = NULL;
  int n = 0, rc = cli_conv_form_tasks(w, m, &g, &tasks, &n, err);
  if (!rc && n > CLI_FORM_STAGES)
    rc = TS_ERR(err, TS_EINTERNAL, "conv forms: %d stages (at most %d)", n,
                CLI_FORM_STAGES);
  for (int i = 0; !rc && i < n; i++) {
    ts_db_record rec;
    memset(&rec, 0, sizeof rec);
    if (ts_db_best_by_func(db, tasks[i].func, ts_target_str(t), &rec) == TS_OK)
      f->recorded++;
    ts_db_record_clear(&rec);
  }
  for (int i = 0; !rc && i < n; i++) {
    ts_db_record rec;
    memset(&rec, 0, sizeof rec);
    if (ts_db_best_by_func(db, tasks[i].func, ts_target_str(t), &rec)) {
      rc = TS_ERR(err, TS_ENOTFOUND,
                  "no record of its %s (tune it with `tessera tune "
                  "--workload ... --winograd`)",
                  cli_conv_form_stage(&tasks[i]));
    } else if (!(f->func[i] = ts_func_copy(tasks[i].func))) {
      rc = TS_ERR(err, TS_ENOMEM, "conv forms: out of memory");
    } else if (!(rc = cli_kernel_build_record(rec.trace_json, f->func[i], t,
                                              &f->k[i], err))) {
      f->n = i + 1;
      f->count[i] = tasks[i].count;
      f->consts[i] = tasks[i].const_params;
      f->number[i] = 1;
      f->stage[i] = cli_conv_form_stage(&tasks[i]);
    }
    ts_db_record_clear(&rec);
  }
  free(tasks);
  ts_graph_free(g);
  if (rc) cli_conv_form_free(f);
  return rc;
}

int cli_conv_form_time(cli_form *f, ts_runtime *rt, const ts_eval_config *ev,
                       double *seconds, ts_error *err) {
  double sum = 0;
  for (int i = 0; i < f->n; i++) {
    ts_eval_config e = *ev;
    e.number = f->number[i];
    double s = 0;
    int rc =
        ts_rt_eval_kernel(rt, &e, f->k[i].kernel, ts_rt_args_data(f->k[i].args),
                          &s, &f->number[i], err);
    if (rc) return rc;
    sum += f->count[i] * s;
  }
  *seconds = sum;
  return TS_OK;
}

void cli_conv_form_free(cli_form *f) {
  for (int i = 0; i < CLI_FORM_STAGES; i++) {
    cli_kernel_free(&f->k[i]);
    ts_func_free(f->func[i]);
    f->func[i] = NULL;
  }
  f->n = 0;
}
