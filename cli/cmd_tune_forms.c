/*
 * cmd_tune_forms.c — `tessera tune --winograd`: each 3x3 stride-1
 * conv2d_nhwc workload's Winograd forms (conv_forms.c) tuned as tasks of
 * the job, recognized again when the job resumes, and weighed against the
 * direct form in the summary.
 */
#include "tune_internal.h"

#include "db/db.h"

#include <stdlib.h>
#include <string.h>

/* --winograd: per conv workload, its direct best against each Winograd
 * form's stages' bests summed (text, or a JSON member after "tasks"). */
void tune_print_forms(const tune_args *a, ts_db *db, const char *target,
                      ts_workload **wl, const summary_row *rows, int n,
                      FILE *out) {
  bool any = false;
  for (int i = 0; a->winograd && i < n; i++) {
    if (a->form_m[i] || !wl[i] || cli_conv_form_why_not(wl[i])) continue;
    double sec[3] = {rows[i].best_s, NAN, NAN}, st[2][CLI_FORM_STAGES];
    int ns[2] = {0, 0};
    for (int k = 0; k < 2; k++)
      sec[k + 1] = cli_conv_form_seconds(wl[i], 2 + 2 * k, db, target, st[k],
                                         CLI_FORM_STAGES, &ns[k]);
    int best = -1;
    for (int k = 0; k < 3; k++)
      if (isfinite(sec[k]) && (best < 0 || sec[k] < sec[best])) best = k;
    const char *names[3] = {"direct", ts_winograd_form_name(2),
                            ts_winograd_form_name(4)};
    if (a->json) {
      fprintf(out, "%s{\"workload\": \"%s\", ",
              any ? ", " : ", \"winograd_forms\": [", wl[i]->name);
      json_double(out, "direct_seconds", isfinite(sec[0]), sec[0], true);
      json_double(out, "f2x2_seconds", isfinite(sec[1]), sec[1], true);
      json_double(out, "f4x4_seconds", isfinite(sec[2]), sec[2], true);
      fprintf(out, "\"fastest\": \"%s\"}", best >= 0 ? names[best] : "");
      any = true;
      continue;
    }
    fprintf(out, "\nforms of %s (the best record of each task, summed):\n",
            wl[i]->name);
    for (int k = 0; k < 3; k++) {
      char lat[32] = "no record";
      if (isfinite(sec[k])) snprintf(lat, sizeof lat, "%.1f us", sec[k] * 1e6);
      fprintf(out, "  %-8s %12s", names[k], lat);
      if (k && isfinite(sec[k])) {
        fprintf(out, "  (");
        for (int j = 0; j < ns[k - 1]; j++)
          fprintf(out, "%s%.1f", j ? " + " : "", st[k - 1][j] * 1e6);
        fprintf(out, ": input transform, product, output transform)");
      }
      if (k && isfinite(sec[k]) && isfinite(sec[0]))
        fprintf(out, "  %.2fx the direct form", sec[0] / sec[k]);
      fprintf(out, "\n");
    }
    if (best >= 0) fprintf(out, "  fastest: %s\n", names[best]);
  }
  if (a->json && any) fprintf(out, "]");
}

/* A resumed job: its TIR tasks that are Winograd stages of one of its conv
 * workloads (by function hash) are marked so, as --winograd marked them. */
void tune_mark_resumed_forms(tune_args *a, ts_workload **wl, ts_func **funcs) {
  for (int i = 0; i < a->n_tasks; i++) {
    if (!wl[i] || cli_conv_form_why_not(wl[i])) continue;
    for (int m = 2; m <= 4; m += 2) {
      ts_graph *g = NULL;
      ts_graph_task *t = NULL;
      int n = 0;
      ts_error err;
      if (cli_conv_form_tasks(wl[i], m, &g, &t, &n, &err)) continue;
      for (int k = 0; k < n; k++)
        for (int j = 0; j < a->n_tasks; j++)
          if (!wl[j] && funcs[j] && !a->form_m[j] &&
              ts_hash128_eq(ts_func_hash(funcs[j]), ts_func_hash(t[k].func))) {
            a->form_m[j] = m;
            a->form_of[j] = i;
            a->winograd = true;
          }
      free(t);
      ts_graph_free(g);
    }
  }
}

/* --winograd: the Winograd forms of each conv2d_nhwc workload, their
 * stages added as tasks of the job after the workloads (a workload without
 * a form is said so and tuned alone). */
int tune_add_form_tasks(tune_args *a, ts_workload **wl, ts_func **funcs,
                        ts_tune_task *tasks) {
  int n0 = a->n_tasks, forms = 0, added = 0;
  for (int i = 0; i < n0; i++) {
    const char *why =
        wl[i] ? cli_conv_form_why_not(wl[i]) : "it is a TIR function";
    if (why) {
      fprintf(stderr,
              "tessera: note: --winograd: %s has no Winograd form: %s\n",
              wl[i] ? wl[i]->name : ts_func_name(funcs[i]), why);
      continue;
    }
    for (int m = 2; m <= 4; m += 2) {
      ts_graph *g = NULL;
      ts_graph_task *t = NULL;
      int n = 0, rc = EXIT_OK;
      ts_error err;
      if (cli_conv_form_tasks(wl[i], m, &g, &t, &n, &err)) {
        cli_error("cannot build a Winograd form", &err);
        return EXIT_FAIL;
      }
      for (int k = 0; k < n && rc == EXIT_OK; k++) {
        int j = a->n_tasks;
        if (j == MAX_TASKS) {
          fprintf(stderr,
                  "tessera: error: --winograd: a job takes at most %d "
                  "tasks\n",
                  MAX_TASKS);
          rc = EXIT_FAIL;
          break;
        }
        char name[300];
        snprintf(name, sizeof name, "%s %s (%s)", ts_winograd_form_name(m),
                 cli_conv_form_stage(&t[k]), wl[i]->name);
        funcs[j] = ts_func_copy(t[k].func);
        a->names[j] = strdup(name);
        a->own_name[j] = true;
        a->form_m[j] = m;
        a->n_tasks++; /* freed at the end either way */
        if (!funcs[j] || !a->names[j]) {
          fprintf(stderr, "tessera: error: out of memory\n");
          rc = EXIT_FAIL;
          break;
        }
        a->form_of[j] = i;
        a->is_tir[j] = true;
        a->weights[j] = a->weights[i] * t[k].count;
        tasks[j].func = funcs[j];
        tasks[j].name = a->names[j];
        tasks[j].weight = a->weights[j];
        tasks[j].flops = t[k].flops;
        added++;
      }
      free(t);
      ts_graph_free(g);
      if (rc != EXIT_OK) return rc;
      forms++;
    }
  }
  if (forms)
    fprintf(stderr, "--winograd: %d form%s, %d task%s added\n", forms,
            forms == 1 ? "" : "s", added, added == 1 ? "" : "s");
  return EXIT_OK;
}
