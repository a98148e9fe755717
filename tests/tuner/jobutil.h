/*
 * jobutil.h — shared by the tuning-job tests (included after cmocka.h and
 * util.h): a scratch directory, small search settings, the records of a
 * job, and the check that a database's best record computes the right
 * result.
 */
#ifndef TESSERA_TESTS_TUNER_JOBUTIL_H
#define TESSERA_TESTS_TUNER_JOBUTIL_H

/* The scratch directory of the test executable (made by its setup). */
static char dir[256];

/* cmocka group setup and teardown: the scratch directory made and removed. */
static inline int scratch_setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/ts-tune-test-XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static inline int scratch_teardown(void **state) {
  (void)state;
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

static inline void path_in(char *out, size_t cap, const char *name) {
  snprintf(out, cap, "%s/%s", dir, name);
}

static inline ts_tune_options small_options(void) {
  ts_tune_options o = ts_tune_defaults();
  o.output.out = NULL;
  o.search.population = 24;
  o.search.init_min_unmeasured = 12;
  o.search.genetic_iters = 2;
  o.search.batch = 8;
  o.measure.eval.repeat = 2;
  o.measure.eval.min_repeat_ms = 0;
  o.measure.eval.warmup = 0;
  o.measure.timeout_ms = 10000;
  return o;
}

static inline ts_db *open_db(const char *name) {
  char p[512];
  path_in(p, sizeof p, name);
  ts_db *db = NULL;
  ts_error err;
  if (ts_db_open(p, NULL, &db, &err)) printf("open %s: %s\n", p, err.msg);
  assert_non_null(db);
  return db;
}

static inline ts_tune_task task_of(const ts_workload *w) {
  ts_tune_task t = {w->func, w->name, w->spec, 1, w->flops, 0};
  return t;
}

/* Records of a job in the database: count, distinct trial indexes, and
 * whether two of them have the same schedule. */
static inline int64_t job_records(ts_db *db, int64_t workload,
                                  const char *target, int64_t job,
                                  bool *distinct_trials,
                                  bool *distinct_schedules, const ts_func *f) {
  ts_db_record *r = NULL;
  int n = 0;
  OK(ts_db_records_of(db, workload, target, &r, &n));
  int64_t count = 0;
  *distinct_trials = *distinct_schedules = true;
  ts_hash128 *h = calloc((size_t)(n ? n : 1), sizeof *h);
  for (int i = 0; i < n; i++) {
    if (r[i].job_id == job) count++;
    for (int k = 0; k < i; k++)
      if (r[k].job_id == job && r[i].job_id == job && r[k].trial == r[i].trial)
        *distinct_trials = false;
    ts_trace *full = NULL;
    ts_sched *s = NULL;
    ts_error err;
    OK(ts_record_traces(r[i].trace_json, &full, NULL, &err));
    OK(ts_trace_apply(full, f, 1, &s, &err));
    h[i] = ts_func_hash(ts_sched_func(s));
    for (int k = 0; k < i; k++)
      if (ts_hash128_eq(h[k], h[i])) *distinct_schedules = false;
    ts_sched_destroy(s);
    ts_trace_free(full);
  }
  free(h);
  ts_db_records_free(r, n);
  return count;
}

/* The best record of the workload replays and matches the interpreter. */
static inline void check_best(ts_db *db, int64_t workload, const char *target,
                              const ts_func *f) {
  ts_db_record best;
  OK(ts_db_best(db, workload, target, &best));
  ts_trace *full = NULL;
  ts_sched *s = NULL;
  ts_error err;
  OK(ts_record_traces(best.trace_json, &full, NULL, &err));
  OK(ts_trace_apply(full, f, 1, &s, &err));
  ts_target *t = NULL;
  OK(ts_target_parse(target, &t, &err));
  ts_runtime *rt = NULL;
  OK(ts_runtime_create(2, &rt, &err));
  ts_rt_args *want = tu_reference(f, 1);
  OK(tu_check(ts_sched_func(s), t, want, 1, rt));
  ts_rt_args_free(want);
  ts_runtime_destroy(rt);
  ts_target_free(t);
  ts_sched_destroy(s);
  ts_trace_free(full);
  ts_db_record_clear(&best);
}

#endif /* TESSERA_TESTS_TUNER_JOBUTIL_H */
