/*
 * task_scheduler.c — which task gets the next round of search when a job
 * tunes several workloads: round-robin, or gradient-based (Ansor's
 * allocation): after one round of every task, the live task with the
 * largest expected reduction of the weighted total latency per round,
 * estimated from its recent improvement (backward difference over a short
 * window) and an optimistic forward term (its latency over the rounds it
 * has had), weighted by how often the workload appears in the model.
 */
#include "tuner/internal.h"

#include <math.h>
#include <string.h>

#define GRADIENT_ALPHA 0.2
#define GRADIENT_WINDOW 3

static const char *const policy_names[] = {"round-robin", "gradient"};

const char *ts_task_policy_name(ts_task_policy p) {
  return (unsigned)p < 2 ? policy_names[p] : NULL;
}

int ts_task_policy_parse(const char *name, ts_task_policy *out) {
  for (int i = 0; i < 2; i++)
    if (name && !strcmp(name, policy_names[i])) {
      *out = (ts_task_policy)i;
      return TS_OK;
    }
  if (name && !strcmp(name, "round_robin")) {
    *out = TS_TASK_ROUND_ROBIN;
    return TS_OK;
  }
  return TS_EINVAL;
}

static bool alive(const ts_task_state *t) {
  return !t->done && (t->max_trials <= 0 || t->trials < t->max_trials);
}

/* Expected latency reduction per round of task t (weighted). */
static double gradient(const ts_task_state *t) {
  int n = t->n_history;
  if (n == 0 || !isfinite(t->best_history[n - 1])) return INFINITY;
  double best = t->best_history[n - 1];
  double backward = 0;
  if (n > GRADIENT_WINDOW && isfinite(t->best_history[n - 1 - GRADIENT_WINDOW]))
    backward =
        (t->best_history[n - 1 - GRADIENT_WINDOW] - best) / GRADIENT_WINDOW;
  double forward = best / (t->rounds > 0 ? t->rounds : 1);
  return t->weight *
         (GRADIENT_ALPHA * backward + (1 - GRADIENT_ALPHA) * forward);
}

int ts_task_next(ts_task_policy p, const ts_task_state *tasks, int n,
                 int64_t turn) {
  int live = 0;
  for (int i = 0; i < n; i++) live += alive(&tasks[i]);
  if (!live) return -1;
  if (p == TS_TASK_ROUND_ROBIN) {
    for (int k = 0; k < n; k++) {
      int i = (int)((turn + k) % n);
      if (alive(&tasks[i])) return i;
    }
    return -1;
  }
  /* gradient: every live task once first */
  for (int i = 0; i < n; i++)
    if (alive(&tasks[i]) && tasks[i].rounds == 0) return i;
  int best = -1;
  double best_g = -INFINITY;
  for (int i = 0; i < n; i++) {
    if (!alive(&tasks[i])) continue;
    double g = gradient(&tasks[i]);
    if (best < 0 || g > best_g) {
      best = i;
      best_g = g;
    }
  }
  return best;
}
