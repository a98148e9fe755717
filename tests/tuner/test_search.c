/*
 * test_search.c — the task scheduler and the search state. Round-robin
 * takes live tasks in turn; the gradient policy runs every task once, then
 * prefers a task without a measurement, then the one whose weighted
 * latency is expected to drop most; finished or capped tasks are skipped
 * and -1 means all are done. The policy and strategy names parse. The
 * defaults are the documented ones. Measured designs are matched to their
 * design space; the evolutionary batch's design-space share never goes to
 * the space holding the fastest design and spreads over the others.
 * Candidates that recompute a producer for every element are refused by
 * the work rule.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "tuner/internal.h"
#include "util.h"

#define OK(x) assert_int_equal((x), TS_OK)

static void set_history(ts_task_state *t, const double *h, int n) {
  t->best_history = (double *)h;
  t->n_history = n;
  t->rounds = n;
}

static void test_round_robin(void **state) {
  (void)state;
  ts_task_state t[3];
  memset(t, 0, sizeof t);
  for (int i = 0; i < 3; i++) t[i].weight = 1;
  assert_int_equal(ts_task_next(TS_TASK_ROUND_ROBIN, t, 3, 0), 0);
  assert_int_equal(ts_task_next(TS_TASK_ROUND_ROBIN, t, 3, 1), 1);
  assert_int_equal(ts_task_next(TS_TASK_ROUND_ROBIN, t, 3, 5), 2);
  t[1].done = true;
  assert_int_equal(ts_task_next(TS_TASK_ROUND_ROBIN, t, 3, 1), 2);
  t[2].max_trials = 10;
  t[2].trials = 10;
  assert_int_equal(ts_task_next(TS_TASK_ROUND_ROBIN, t, 3, 1), 0);
  t[0].done = true;
  assert_int_equal(ts_task_next(TS_TASK_ROUND_ROBIN, t, 3, 1), -1);
}

static void test_gradient(void **state) {
  (void)state;
  ts_task_state t[3];
  memset(t, 0, sizeof t);
  for (int i = 0; i < 3; i++) t[i].weight = 1;
  /* first every task once */
  static const double h0[] = {1e-3, 1e-3, 1e-3, 1e-3, 1e-3};
  set_history(&t[0], h0, 5);
  assert_int_equal(ts_task_next(TS_TASK_GRADIENT, t, 3, 10), 1);
  /* a task that is still improving fast wins over a flat one of the same
   * latency */
  static const double h1[] = {4e-3, 3e-3, 2e-3, 1.5e-3, 1e-3};
  static const double h2[] = {1e-3, 1e-3, 1e-3, 1e-3, 1e-3};
  set_history(&t[1], h1, 5);
  set_history(&t[2], h2, 5);
  assert_int_equal(ts_task_next(TS_TASK_GRADIENT, t, 3, 10), 1);
  /* weight: a task that appears 10 times in the model wins */
  t[2].weight = 10;
  assert_int_equal(ts_task_next(TS_TASK_GRADIENT, t, 3, 10), 2);
  /* a task with nothing measured ok yet goes first */
  static const double h3[] = {INFINITY, INFINITY};
  set_history(&t[0], h3, 2);
  assert_int_equal(ts_task_next(TS_TASK_GRADIENT, t, 3, 10), 0);
  t[0].done = t[1].done = t[2].done = true;
  assert_int_equal(ts_task_next(TS_TASK_GRADIENT, t, 3, 10), -1);
}

static void test_names_and_defaults(void **state) {
  (void)state;
  ts_task_policy p;
  OK(ts_task_policy_parse("gradient", &p));
  assert_int_equal(p, TS_TASK_GRADIENT);
  OK(ts_task_policy_parse("round-robin", &p));
  assert_int_equal(p, TS_TASK_ROUND_ROBIN);
  assert_int_equal(ts_task_policy_parse("fifo", &p), TS_EINVAL);
  ts_strategy_kind k;
  OK(ts_strategy_parse("evolutionary", &k));
  assert_int_equal(k, TS_STRATEGY_EVOLUTIONARY);
  OK(ts_strategy_parse("random", &k));
  assert_int_equal(k, TS_STRATEGY_RANDOM);
  assert_int_equal(ts_strategy_parse("greedy", &k), TS_EINVAL);
  assert_string_equal(ts_strategy_name(TS_STRATEGY_RANDOM), "random");
  ts_search_options o = ts_search_defaults();
  assert_int_equal(o.population, 256);
  assert_true(o.init_measured_ratio == 0.2);
  assert_int_equal(o.genetic_iters, 3);
  assert_true(o.mutate_prob == 0.85);
  assert_true(o.epsilon == 0.05);
  assert_int_equal(o.batch, 32);
  assert_true(o.space_share == 0.125);
  assert_true(o.local_share == 0.125);
  ts_tune_options to = ts_tune_defaults();
  assert_int_equal(to.strategy, TS_STRATEGY_EVOLUTIONARY);
  assert_int_equal(to.policy, TS_TASK_GRADIENT);
  assert_string_equal(to.cost_model, "xgb");
}

static void test_space_share(void **state) {
  (void)state;
  ts_workload *w = tu_workload("matmul M=32 N=48 K=64");
  ts_target *t = NULL;
  ts_error err;
  OK(ts_target_host(&t, &err));
  ts_design_space *sp = NULL;
  int n = 0;
  OK(ts_space_generate(w->func, t, NULL, &sp, &n, &err));
  assert_true(n >= 3);
  ts_search_options o = ts_search_defaults();
  o.population = 64;
  o.init_min_unmeasured = 32;
  o.genetic_iters = 1;
  o.epsilon = 0;
  o.space_share = 1; /* the whole batch by the design spaces' bound */
  o.threads = 1;
  search_task st;
  OK(search_task_init(&st, w->func, t, sp, n, NULL, 1, &o, 7));
  /* one measured design per space; space 0 is by far the fastest */
  for (int i = 0; i < n; i++) {
    ts_candidate c;
    OK(ts_candidate_sample(&sp[i], i, w->func, t, 100 + (uint64_t)i, &c, &err));
    assert_int_equal(search_task_space_of(&st, c.design), i);
    search_task_add_measured(&st, c.design, c.hash, true, i ? 1.0 : 0.001);
    ts_candidate_clear(&c);
  }
  for (int i = 0; i < n; i++) assert_int_equal(st.space_trials[i], 1);
  assert_true(st.space_best[0] == 0.001);
  assert_int_equal(st.measured[0].space, 0);
  /* a design of no space matches none */
  ts_trace *other = ts_trace_new();
  assert_int_equal(search_task_space_of(&st, other), -1);
  ts_trace_free(other);
  cand *out[8];
  int got = strategy_evolutionary.pick(&st, 8, out, &err);
  assert_true(got > 0);
  int per_space[64] = {0};
  for (int i = 0; i < got; i++) {
    assert_true(out[i]->c.space >= 0 && out[i]->c.space < n);
    per_space[out[i]->c.space]++;
    cand_unref(out[i]);
  }
  assert_int_equal(per_space[0], 0); /* the leader is left out */
  int used = 0;
  for (int i = 1; i < n; i++) used += per_space[i] > 0;
  assert_true(used >= 3); /* the bound spreads the share */
  search_task_free(&st);
  ts_design_spaces_free(sp, n);
  ts_target_free(t);
  ts_workload_free(w);
}

/* How many sampling decisions two designs of one instruction list differ
 * in; -1 when the lists differ. */
static int decisions_apart(const ts_trace *a, const ts_trace *b) {
  int n = ts_trace_n_insts(a), apart = 0;
  if (n != ts_trace_n_insts(b)) return -1;
  for (int i = 0; i < n; i++) {
    if (ts_trace_inst_kind(a, i) != ts_trace_inst_kind(b, i)) return -1;
    int64_t x[16], y[16];
    int nx = ts_trace_decision(a, i, x, 16),
        ny = ts_trace_decision(b, i, y, 16);
    if (nx != ny || (nx > 0 && memcmp(x, y, sizeof(int64_t) * (size_t)nx)))
      apart++;
  }
  return apart;
}

/* The local share: once a pick finds the task's fastest unchanged, the
 * share goes to unmeasured single mutations of the fastest measured
 * designs; a faster measurement ends the stall. */
static void test_local_share(void **state) {
  (void)state;
  ts_workload *w = tu_workload("matmul M=32 N=48 K=64");
  ts_target *t = NULL;
  ts_error err;
  OK(ts_target_host(&t, &err));
  ts_design_space *sp = NULL;
  int n = 0;
  OK(ts_space_generate(w->func, t, NULL, &sp, &n, &err));
  ts_search_options o = ts_search_defaults();
  o.population = 64;
  o.init_min_unmeasured = 32;
  o.genetic_iters = 1;
  o.epsilon = 0;
  o.space_share = 0;
  o.local_share = 1; /* the whole batch, once stalled */
  o.threads = 1;
  search_task st;
  OK(search_task_init(&st, w->func, t, sp, n, NULL, 1, &o, 11));
  enum { INC = 3 };
  ts_candidate inc[INC];
  for (int i = 0; i < INC; i++) {
    OK(ts_candidate_sample(&sp[0], 0, w->func, t, 200 + (uint64_t)i, &inc[i],
                           &err));
    search_task_add_measured(&st, inc[i].design, inc[i].hash, true,
                             0.001 * (i + 1));
  }
  cand *out[8];
  int got = strategy_evolutionary.pick(&st, 8, out, &err);
  assert_true(got > 0);
  assert_int_equal(st.stalled, 0); /* the first pick: progress */
  for (int i = 0; i < got; i++) cand_unref(out[i]);
  /* nothing faster measured since: stalled, the batch is neighbours */
  got = strategy_evolutionary.pick(&st, 8, out, &err);
  assert_int_equal(st.stalled, 1);
  assert_int_equal(got, 8);
  for (int i = 0; i < got; i++) {
    bool near = false;
    for (int k = 0; k < INC && !near; k++)
      near = decisions_apart(out[i]->c.design, inc[k].design) == 1;
    assert_true(near);
    for (int k = 0; k < INC; k++)
      assert_false(out[i]->c.hash.hi == inc[k].hash.hi &&
                   out[i]->c.hash.lo == inc[k].hash.lo);
    cand_unref(out[i]);
  }
  /* a design 2x faster than the fastest ends the stall */
  ts_candidate fast;
  OK(ts_candidate_sample(&sp[0], 0, w->func, t, 300, &fast, &err));
  search_task_add_measured(&st, fast.design, fast.hash, true, 0.0005);
  got = strategy_evolutionary.pick(&st, 8, out, &err);
  assert_int_equal(st.stalled, 0);
  for (int i = 0; i < got; i++) cand_unref(out[i]);
  ts_candidate_clear(&fast);
  for (int i = 0; i < INC; i++) ts_candidate_clear(&inc[i]);
  search_task_free(&st);
  ts_design_spaces_free(sp, n);
  ts_target_free(t);
  ts_workload_free(w);
}

/* The batch builder: built in child processes, sampled candidates give
 * the same objects as built in this process; a limit no compile meets
 * fails every one with the reason. */
static void test_build_batch(void **state) {
  (void)state;
  ts_workload *w = tu_workload("matmul M=32 N=48 K=64");
  ts_target *t = NULL;
  ts_error err;
  OK(ts_target_host(&t, &err));
  ts_design_space *sp = NULL;
  int n = 0;
  OK(ts_space_generate(w->func, t, NULL, &sp, &n, &err));
  enum { N = 5 };
  ts_candidate c[N];
  const ts_func *f[N];
  for (int i = 0; i < N; i++) {
    OK(ts_candidate_sample(&sp[i % n], i % n, w->func, t, 40 + (uint64_t)i,
                           &c[i], &err));
    f[i] = ts_sched_func(c[i].sched);
  }
  ts_artifact *forked[N], *inproc[N], *late[N];
  char why[N][TS_MEASURE_ERROR_MAX];
  ts_build_batch(f, N, t, 0, 2, 60000, forked, why);
  for (int i = 0; i < N; i++) {
    if (!forked[i]) printf("%s\n", why[i]);
    assert_non_null(forked[i]);
  }
  ts_build_batch(f, N, t, 0, 2, 0, inproc, why);
  for (int i = 0; i < N; i++) {
    assert_non_null(inproc[i]);
    assert_int_equal(forked[i]->kind, inproc[i]->kind);
    assert_string_equal(forked[i]->entry, inproc[i]->entry);
    assert_int_equal(forked[i]->n_args, inproc[i]->n_args);
    assert_memory_equal(forked[i]->args, inproc[i]->args,
                        sizeof(ts_artifact_arg) * (size_t)inproc[i]->n_args);
    assert_int_equal(forked[i]->n_bytes, inproc[i]->n_bytes);
    assert_memory_equal(forked[i]->bytes, inproc[i]->bytes, inproc[i]->n_bytes);
    ts_artifact_release(forked[i]);
    ts_artifact_release(inproc[i]);
  }
  /* (no cache: a kernel taken from it can be ready within the limit) */
  setenv("TS_BUILD_CACHE_MB", "0", 1);
  ts_build_cache_clear();
  ts_build_batch(f, N, t, 0, 2, 1, late, why);
  for (int i = 0; i < N; i++) {
    assert_null(late[i]);
    assert_non_null(strstr(why[i], "build timed out"));
  }
  unsetenv("TS_BUILD_CACHE_MB");
  ts_build_cache_clear();
  for (int i = 0; i < N; i++) ts_candidate_clear(&c[i]);
  ts_design_spaces_free(sp, n);
  ts_target_free(t);
  ts_workload_free(w);
}

/* A candidate of schedule s (taken over). */
static cand *cand_of(ts_sched *s) {
  cand *c = cand_new();
  assert_non_null(c);
  c->c.sched = s;
  return c;
}

/* The work rule that keeps a job from measuring recomputation: softmax's
 * exps computed inside the output's column loop (each row's exps again for
 * every element) do D times the default's exp work and are refused; the
 * default, and the exps kept apart but not vectorized, are not. */
static void test_heavy(void **state) {
  (void)state;
  ts_workload *w = tu_workload("softmax N=64 D=256");
  ts_target *t = NULL;
  ts_error err;
  OK(ts_target_host(&t, &err));
  ts_sched *d = NULL;
  OK(ts_default_schedule(w->func, t, &d, &err));
  cand *def = cand_of(d);
  ts_sched *r = NULL;
  OK(ts_sched_create(w->func, 1, &r, &err));
  /* the row's exp sum, then its exps, inside Y's column loop (a trace
   * the search sampled: every output element recomputes its row) */
  const char *moved[2] = {"expsum", "exp"};
  for (int k = 0; k < 2; k++) {
    ts_rv y, e, loops[4];
    int nl = 0;
    OK(ts_sched_get_block(r, "Y", &y));
    OK(ts_sched_get_block(r, moved[k], &e));
    OK(ts_sched_get_loops(r, y, loops, 4, &nl));
    assert_int_equal(nl, 2);
    OK(ts_sched_compute_at(r, e, loops[1]));
  }
  cand *heavy = cand_of(r);
  ts_sched *p = NULL;
  OK(ts_sched_create(w->func, 1, &p, &err));
  cand *plain = cand_of(p);
  cand *v[3] = {def, heavy, plain};
  cands_features(t, 2, v, 3);
  double wd = cand_float_work(def), wh = cand_float_work(heavy),
         wp = cand_float_work(plain);
  assert_true(wd > 0 && wp > 0);
  assert_true(wh > 100 * wd);
  assert_true(cand_too_heavy(heavy, wd));
  assert_false(cand_too_heavy(def, wp));
  assert_false(cand_too_heavy(plain, wd));
  assert_false(cand_too_heavy(heavy, 0));  /* nothing measured yet */
  assert_false(cand_too_heavy(heavy, -1)); /* the fastest calls intrinsics */
  for (int i = 0; i < 3; i++) cand_unref(v[i]);
  ts_target_free(t);
  ts_workload_free(w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_robin),
      cmocka_unit_test(test_gradient),
      cmocka_unit_test(test_names_and_defaults),
      cmocka_unit_test(test_space_share),
      cmocka_unit_test(test_local_share),
      cmocka_unit_test(test_build_batch),
      cmocka_unit_test(test_heavy),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
