/*
 * tune_internal.h — what `tessera tune`'s files share (cmd_tune.c, the
 * command; cmd_tune_forms.c, the Winograd forms of --winograd): the parsed
 * arguments and a row of the final summary.
 */
#ifndef TESSERA_CLI_TUNE_INTERNAL_H
#define TESSERA_CLI_TUNE_INTERNAL_H

#include "cli.h"

#include <math.h>
#include <stdio.h>

#define MAX_TASKS 256
#define MAX_SHAPES 64
#define MAX_RULES 16

typedef struct tune_args {
  const char *specs[MAX_TASKS];
  const char *names[MAX_TASKS]; /* of a resumed job's stored workloads */
  char *vendor[MAX_TASKS];      /* --model: a task's vendor call, or NULL */
  uint64_t consts[MAX_TASKS];   /* --model: a task's constant parameters */
  bool is_tir[MAX_TASKS];
  double weights[MAX_TASKS];
  int n_tasks;
  /* --winograd: task i is a stage of Winograd form form_m[i] (2 or 4; 0
   * for any other task) of workload task form_of[i] */
  bool winograd;
  int form_m[MAX_TASKS], form_of[MAX_TASKS];
  bool own_name[MAX_TASKS]; /* names[i] malloc'd here */
  const char *rule_block[MAX_RULES], *rule_file[MAX_RULES];
  char *rule_json[MAX_RULES]; /* a resumed job's stored rule traces */
  int n_rules;
  const char *db, *tracker, *key, *token_file, *log;
  const char *model; /* --model: the tasks come from this ONNX model */
  const char *shapes[MAX_SHAPES];
  int n_shapes;
  /* --shape-buckets SYMBOL=S1,S2,...: the sizes to tune a named dimension
   * for (two symbols at most: every pair of their sizes) */
  char bucket_sym[2][128];
  long buckets[2][16];
  int n_buckets[2], n_bucket_syms;
  bool quiet, json, summary_measure, compare_models, compare_rounds_given;
  long compare_rounds; /* --compare-models' side-by-side rounds */
  long confirm_top;    /* --confirm-top (default 6; 0: no confirmation) */
  bool confirm_cold;   /* --confirm-cold */
  int confirm_model;   /* --confirm-in-model 1, --no-confirm-in-model 0,
                          neither -1: on with a confirmation */
  bool target_given, trials_given, strategy_given, cost_model_given,
      policy_given, per_task_given, batch_given, population_given,
      timeout_given, build_timeout_given, tensorize_given;
  long max_memory_mb; /* admission (0: default) */
  long max_gflop;     /* admission (0: default) */
} tune_args;

typedef struct summary_row {
  double best_s, tuned_s, baseline_s, onednn_s, flops;
  double ratio; /* median of the rounds' oneDNN / tuned latency */
  int64_t trial_90;
  bool have_tuned, have_baseline, have_onednn;
  bool side_in_confirm; /* tuned/oneDNN from the confirmation's rounds */
  char onednn_why[160];
} summary_row;

static inline void json_double(FILE *f, const char *key, bool have, double v,
                               bool comma) {
  if (have && isfinite(v))
    fprintf(f, "\"%s\": %.6g%s", key, v, comma ? ", " : "");
  else
    fprintf(f, "\"%s\": null%s", key, comma ? ", " : "");
}

/* --winograd (cmd_tune_forms.c): each conv2d_nhwc workload's Winograd
 * forms added as tasks of the job after the workloads; a resumed job's
 * form tasks recognized by their functions; the summary's comparison of
 * the forms (text, or a JSON member after "tasks"). */
int tune_add_form_tasks(tune_args *a, ts_workload **wl, ts_func **funcs,
                        ts_tune_task *tasks);
void tune_mark_resumed_forms(tune_args *a, ts_workload **wl, ts_func **funcs);
void tune_print_forms(const tune_args *a, ts_db *db, const char *target,
                      ts_workload **wl, const summary_row *rows, int n,
                      FILE *out);

#endif /* TESSERA_CLI_TUNE_INTERNAL_H */
