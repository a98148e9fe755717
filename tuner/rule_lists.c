/*
 * rule_lists.c — what the tuner does for each kind of target: one rule list
 * per name a target family's facts give (ts_target_facts.rules), composed
 * of the rule families (rules_cpu.c, rules_gpu.c, rules_tensorize.c), the
 * postprocessors (postproc.c), the mutators' default probabilities and the
 * default schedule (default.c). The tuner asks rule_list_of(t) where it
 * used to ask which kind of target it had; a new target family names an
 * existing list (an AArch64 CPU: "cpu", an AMD GPU: "gpu") or adds one
 * here (docs/targets.md).
 */
#include "tuner/rule_framework.h"

#include <string.h>

static const rule_list lists[] = {
    {
        .name = "cpu",
        .keep_materialized = rule_keep_materialized,
        .inline_padding = false,
        .padding_inlined = rule_cpu_padding_inlined,
        .rfactor = rule_cpu_rfactor,
        .tiling = {rule_cpu_tiling, rule_tensorize},
        .tiling_first_only = false,
        .bind = NULL,
        .root_plans = rule_parallel_vectorize_unroll,
        .postprocs = {TS_POSTPROC_REWRITE_REDUCTION,
                      TS_POSTPROC_REWRITE_TENSORIZE,
                      TS_POSTPROC_REWRITE_PARALLEL_VECTORIZE_UNROLL},
        .n_postprocs = 3,
        .parallel_vectorize = true,
        .mutator_probs = {[TS_MUTATOR_TILE_SIZE] = 0.9,
                          [TS_MUTATOR_COMPUTE_LOCATION] = 0.05,
                          [TS_MUTATOR_UNROLL] = 0.03,
                          [TS_MUTATOR_PARALLEL] = 0.02},
        .default_schedule = default_schedule_cpu,
    },
    {
        .name = "gpu",
        .keep_materialized = NULL,
        .inline_padding = true,
        .padding_inlined = NULL,
        .rfactor = NULL,
        .tiling = {rule_gpu_tiling, rule_gpu_cross_thread_reduction},
        .tiling_first_only = true,
        .bind = rule_gpu_auto_bind,
        .root_plans = rule_gpu_unroll,
        .postprocs = {TS_POSTPROC_REWRITE_REDUCTION,
                      TS_POSTPROC_REWRITE_TENSORIZE,
                      TS_POSTPROC_REWRITE_COOPERATIVE_FETCH,
                      TS_POSTPROC_REWRITE_PARALLEL_VECTORIZE_UNROLL,
                      TS_POSTPROC_VERIFY_GPU},
        .n_postprocs = 5,
        .parallel_vectorize = false,
        .mutator_probs = {[TS_MUTATOR_TILE_SIZE] = 0.9,
                          [TS_MUTATOR_COMPUTE_LOCATION] = 0.05,
                          [TS_MUTATOR_UNROLL] = 0.05,
                          [TS_MUTATOR_PARALLEL] = 0},
        .default_schedule = default_schedule_gpu,
    },
};

const rule_list *rule_list_of(const ts_target *t) {
  const char *name = t ? ts_target_facts_of(t)->rules : NULL;
  for (size_t i = 0; name && i < sizeof lists / sizeof lists[0]; i++)
    if (!strcmp(lists[i].name, name)) return &lists[i];
  return &lists[0];
}

bool ts_rule_list_known(const char *name) {
  for (size_t i = 0; name && i < sizeof lists / sizeof lists[0]; i++)
    if (!strcmp(lists[i].name, name)) return true;
  return false;
}
