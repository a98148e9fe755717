/*
 * test_model.c — the cost models through their interface. A synthetic data
 * set whose throughput is a known sum over store rows is recovered on
 * held-out candidates (pairwise accuracy > 0.95) with either objective;
 * failed candidates rank low; a single-record workload and all-failed
 * groups are handled; the online rule (64 samples, 20% growth) holds;
 * predictions are deterministic; save/load gives identical predictions;
 * a warm-started model predicts like the saved one and then retrains on
 * top of it; model files of another features version, truncated or foreign
 * files are refused with clear errors; the random model and the metrics
 * behave as documented.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cost_model/cost_model.h"

#define OK(x) assert_int_equal((x), TS_OK)

/* ------------------------------------------------------------------------
 * A synthetic data set: candidates of several groups, 1-3 rows each with
 * random values in the first 8 entries. Throughput = sum over rows of
 * g(row); a candidate with a row whose entry 5 exceeds 3.6 fails.
 * ------------------------------------------------------------------------ */

typedef struct synth {
  int n;
  ts_cm_features *f;
  ts_cm_candidate *c;
  ts_cm_result *r;
  double *thr;
} synth;

static double g(const float *x) {
  return 1 + 2 * x[0] + x[1] * x[2] + 3 * (x[3] > 2) + 0.5 * x[4] * x[4];
}

static synth make_synth(int groups, int per_group, double fail_above,
                        uint64_t seed) {
  synth s = {0};
  s.n = groups * per_group;
  s.f = calloc((size_t)s.n, sizeof *s.f);
  s.c = calloc((size_t)s.n, sizeof *s.c);
  s.r = calloc((size_t)s.n, sizeof *s.r);
  s.thr = calloc((size_t)s.n, sizeof *s.thr);
  ts_rng rng;
  ts_rng_seed(&rng, seed);
  for (int i = 0; i < s.n; i++) {
    int rows = 1 + (int)ts_rng_below(&rng, 3);
    s.f[i].n_rows = rows;
    s.f[i].values = calloc((size_t)rows * TS_CM_N_FEATURES, sizeof(float));
    double thr = 0;
    bool failed = false;
    for (int r = 0; r < rows; r++) {
      float *x = s.f[i].values + (size_t)r * TS_CM_N_FEATURES;
      for (int k = 0; k < 8; k++) x[k] = (float)(4 * ts_rng_unit(&rng));
      thr += g(x);
      failed |= x[5] > fail_above;
    }
    int group = i % groups;
    s.thr[i] = failed ? 0 : thr;
    s.c[i] = (ts_cm_candidate){NULL, &s.f[i], group};
    /* groups run at different speeds: normalization removes the scale */
    s.r[i] = (ts_cm_result){!failed, failed ? 0 : (1.0 + group) / thr};
  }
  return s;
}

static void free_synth(synth *s) {
  for (int i = 0; i < s->n; i++) ts_cm_features_clear(&s->f[i]);
  free(s->f);
  free(s->c);
  free(s->r);
  free(s->thr);
}

/* Pairwise accuracy of scores on candidates [from, n) against the targets
 * of the whole set. */
static ts_cm_metrics held_out_metrics(const synth *s, int from,
                                      const double *scores) {
  int64_t *groups = malloc(sizeof *groups * (size_t)s->n);
  double *t = malloc(sizeof *t * (size_t)s->n);
  for (int i = 0; i < s->n; i++) groups[i] = s->c[i].group;
  ts_cm_targets(groups, s->r, s->n, t);
  ts_cm_metrics_acc acc = {0};
  ts_cm_metrics_add(&acc, scores, t + from, groups + from, s->n - from, 64);
  free(groups);
  free(t);
  return ts_cm_metrics_of(&acc);
}

static ts_cost_model *trained_rounds(const synth *s, int n_train,
                                     ts_cm_objective obj, int nthread,
                                     int rounds) {
  ts_cm_xgb_options o = ts_cm_xgb_defaults();
  o.objective = obj;
  o.nthread = nthread;
  if (rounds) o.rounds = rounds;
  ts_cost_model *m;
  ts_error err;
  OK(ts_cm_xgb_create(&o, &m, &err));
  OK(ts_cm_update(m, s->c, s->r, n_train, &err));
  ts_cm_info info;
  ts_cm_info_get(m, &info);
  assert_true(info.trained); /* n_train >= 64 */
  return m;
}

/* A model with the default options trained on the first n_train. */
static ts_cost_model *trained(const synth *s, int n_train, ts_cm_objective obj,
                              int nthread) {
  return trained_rounds(s, n_train, obj, nthread, 0);
}

static void recover_ranking(ts_cm_objective obj, double min_accuracy) {
  synth s = make_synth(4, 300, 10 /* nothing fails */, 7);
  int n_train = 960;
  ts_cost_model *m = trained(&s, n_train, obj, 1);
  double *scores = malloc(sizeof *scores * (size_t)s.n);
  ts_error err;
  OK(ts_cm_predict(m, s.c + n_train, s.n - n_train, scores, &err));
  ts_cm_metrics x = held_out_metrics(&s, n_train, scores);
  /* the random model on the same candidates */
  ts_cost_model *rnd;
  OK(ts_cm_random_create(3, &rnd, &err));
  OK(ts_cm_predict(rnd, s.c + n_train, s.n - n_train, scores, &err));
  ts_cm_metrics r = held_out_metrics(&s, n_train, scores);
  printf("# %s objective: held-out pairwise accuracy %.4f (random %.4f), "
         "spearman %.4f, %lld pairs\n",
         ts_cm_objective_name(obj), x.pairwise_accuracy, r.pairwise_accuracy,
         x.spearman, (long long)x.pairs);
  assert_true(x.pairs > 3000);
  assert_true(x.pairwise_accuracy > min_accuracy);
  assert_true(x.spearman > 0.9);
  assert_true(fabs(r.pairwise_accuracy - 0.5) < 0.05);
  free(scores);
  ts_cm_destroy(m);
  ts_cm_destroy(rnd);
  free_synth(&s);
}

static void test_recover_rank(void **state) {
  (void)state;
  recover_ranking(TS_CM_OBJ_RANK, 0.95);
}

static void test_recover_squared(void **state) {
  (void)state;
  recover_ranking(TS_CM_OBJ_SQUARED, 0.95);
}

static void test_failed_records(void **state) {
  (void)state;
  /* about a third of the candidates fail */
  synth s = make_synth(3, 150, 3.0, 11);
  int n_train = 360, failed = 0;
  for (int i = 0; i < s.n; i++) failed += !s.r[i].ok;
  assert_true(failed > s.n / 5);
  ts_cost_model *m = trained(&s, n_train, TS_CM_OBJ_RANK, 1);
  int n = s.n - n_train;
  double *scores = malloc(sizeof *scores * (size_t)n);
  ts_error err;
  OK(ts_cm_predict(m, s.c + n_train, n, scores, &err));
  double sum_ok = 0, sum_fail = 0;
  int n_ok = 0, n_fail = 0;
  for (int i = 0; i < n; i++) {
    assert_true(isfinite(scores[i]));
    if (s.r[n_train + i].ok) {
      sum_ok += scores[i];
      n_ok++;
    } else {
      sum_fail += scores[i];
      n_fail++;
    }
  }
  assert_true(n_ok > 0 && n_fail > 0);
  assert_true(sum_fail / n_fail < sum_ok / n_ok);
  ts_cm_metrics x = held_out_metrics(&s, n_train, scores);
  printf("# with failures: held-out pairwise accuracy %.4f\n",
         x.pairwise_accuracy);
  assert_true(x.pairwise_accuracy > 0.85);
  free(scores);
  ts_cm_destroy(m);
  free_synth(&s);
}

static void test_single_record_and_failed_groups(void **state) {
  (void)state;
  synth s = make_synth(2, 40, 10, 5);
  /* group 7: one record; group 8: two records, both failed */
  s.c[0].group = 7;
  s.c[1].group = 8;
  s.c[2].group = 8;
  s.r[1].ok = s.r[2].ok = false;
  for (int obj = 0; obj < 2; obj++) {
    ts_cm_xgb_options o = ts_cm_xgb_defaults();
    o.objective = (ts_cm_objective)obj;
    o.min_samples = 1;
    ts_cost_model *m;
    ts_error err;
    OK(ts_cm_xgb_create(&o, &m, &err));
    /* just the single record: trains on one ok sample */
    OK(ts_cm_update(m, s.c, s.r, 1, &err));
    ts_cm_info info;
    ts_cm_info_get(m, &info);
    assert_true(info.trained);
    OK(ts_cm_update(m, s.c + 1, s.r + 1, s.n - 1, &err));
    double *scores = malloc(sizeof *scores * (size_t)s.n);
    OK(ts_cm_predict(m, s.c, s.n, scores, &err));
    for (int i = 0; i < s.n; i++) assert_true(isfinite(scores[i]));
    free(scores);
    ts_cm_destroy(m);
  }
  /* a model given only failed records does not train (nothing to rank) */
  ts_cm_xgb_options o = ts_cm_xgb_defaults();
  o.min_samples = 1;
  ts_cost_model *m;
  ts_error err;
  OK(ts_cm_xgb_create(&o, &m, &err));
  OK(ts_cm_update(m, s.c + 1, s.r + 1, 2, &err));
  ts_cm_info info;
  ts_cm_info_get(m, &info);
  assert_false(info.trained);
  assert_int_equal(ts_cm_xgb_train(m, &err), TS_EINVAL);
  ts_cm_destroy(m);
  free_synth(&s);
}

static void test_online_rule(void **state) {
  (void)state;
  synth s = make_synth(2, 60, 10, 9);
  ts_cm_xgb_options o = ts_cm_xgb_defaults();
  o.rounds = 20;
  ts_cost_model *m;
  ts_error err;
  ts_cm_info info;
  OK(ts_cm_xgb_create(&o, &m, &err));
  OK(ts_cm_update(m, s.c, s.r, 63, &err));
  ts_cm_info_get(m, &info);
  assert_false(info.trained);
  assert_int_equal(info.n_samples, 63);
  /* untrained: random scores in [0, 1) */
  double sc[8];
  OK(ts_cm_predict(m, s.c, 8, sc, &err));
  for (int i = 0; i < 8; i++) assert_true(sc[i] >= 0 && sc[i] < 1);
  OK(ts_cm_update(m, s.c + 63, s.r + 63, 1, &err));
  ts_cm_info_get(m, &info);
  assert_true(info.trained);
  assert_int_equal(info.n_trainings, 1);
  assert_int_equal(info.n_trained_on, 64);
  /* 76 < 64 * 1.2: no retraining yet; 77: retrain */
  OK(ts_cm_update(m, s.c + 64, s.r + 64, 12, &err));
  ts_cm_info_get(m, &info);
  assert_int_equal(info.n_trainings, 1);
  OK(ts_cm_update(m, s.c + 76, s.r + 76, 1, &err));
  ts_cm_info_get(m, &info);
  assert_int_equal(info.n_trainings, 2);
  assert_int_equal(info.n_trained_on, 77);
  assert_true(info.last_train_ms > 0);
  /* bad input */
  ts_cm_candidate none = {NULL, NULL, 0};
  assert_int_equal(ts_cm_predict(m, &none, 1, sc, &err), TS_EINVAL);
  ts_cm_result bad = {true, 0};
  assert_int_equal(ts_cm_update(m, s.c, &bad, 1, &err), TS_EINVAL);
  assert_int_equal(ts_cm_predict(m, s.c, -1, sc, &err), TS_EINVAL);
  ts_cm_destroy(m);
  free_synth(&s);
}

static void test_deterministic(void **state) {
  (void)state;
  synth s = make_synth(2, 100, 10, 13);
  /* two threads: XGBoost's histogram method is deterministic anyway */
  ts_cost_model *a = trained_rounds(&s, 150, TS_CM_OBJ_RANK, 2, 30);
  ts_cost_model *b = trained_rounds(&s, 150, TS_CM_OBJ_RANK, 2, 30);
  double sa[50], sb[50];
  ts_error err;
  OK(ts_cm_predict(a, s.c + 150, 50, sa, &err));
  OK(ts_cm_predict(b, s.c + 150, 50, sb, &err));
  assert_memory_equal(sa, sb, sizeof sa);
  ts_cm_destroy(a);
  ts_cm_destroy(b);
  free_synth(&s);
}

static void tmp_path(char *buf, size_t n, const char *name) {
  snprintf(buf, n, "%s/ts-cm-%ld-%s",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (long)getpid(), name);
}

static void test_save_load(void **state) {
  (void)state;
  synth s = make_synth(3, 80, 10, 17);
  ts_cost_model *m = trained_rounds(&s, 200, TS_CM_OBJ_RANK, 1, 60);
  char path[256];
  tmp_path(path, sizeof path, "model");
  ts_error err;
  OK(ts_cm_save(m, path, &err));
  ts_cost_model *l;
  OK(ts_cm_load(path, NULL, &l, &err));
  assert_string_equal(ts_cm_kind(l), "xgb");
  ts_cm_info info;
  ts_cm_info_get(l, &info);
  assert_true(info.trained && info.warm);
  assert_int_equal(info.n_samples, 0);
  double a[40], b[40];
  OK(ts_cm_predict(m, s.c + 200, 40, a, &err));
  OK(ts_cm_predict(l, s.c + 200, 40, b, &err));
  assert_memory_equal(a, b, sizeof a);
  /* saving the loaded model gives the same predictions again */
  char path2[256];
  tmp_path(path2, sizeof path2, "model2");
  OK(ts_cm_save(l, path2, &err));
  ts_cost_model *l2;
  OK(ts_cm_load(path2, NULL, &l2, &err));
  OK(ts_cm_predict(l2, s.c + 200, 40, b, &err));
  assert_memory_equal(a, b, sizeof a);
  /* an untrained model saves and loads (and still scores randomly) */
  ts_cost_model *u;
  OK(ts_cm_xgb_create(NULL, &u, &err));
  OK(ts_cm_save(u, path2, &err));
  ts_cm_destroy(u);
  OK(ts_cm_load(path2, NULL, &u, &err));
  ts_cm_info_get(u, &info);
  assert_false(info.trained);
  ts_cm_destroy(u);
  ts_cm_destroy(l2);
  ts_cm_destroy(l);
  ts_cm_destroy(m);
  remove(path);
  remove(path2);
  free_synth(&s);
}

static void test_warm_start(void **state) {
  (void)state;
  /* "other workloads": groups 0-1; the new task: group 2 */
  synth s = make_synth(3, 120, 10, 19);
  ts_cm_candidate *old_c = malloc(sizeof *old_c * (size_t)s.n);
  ts_cm_result *old_r = malloc(sizeof *old_r * (size_t)s.n);
  ts_cm_candidate *new_c = malloc(sizeof *new_c * (size_t)s.n);
  ts_cm_result *new_r = malloc(sizeof *new_r * (size_t)s.n);
  int n_old = 0, n_new = 0;
  for (int i = 0; i < s.n; i++)
    if (s.c[i].group < 2) {
      old_c[n_old] = s.c[i];
      old_r[n_old++] = s.r[i];
    } else {
      new_c[n_new] = s.c[i];
      new_r[n_new++] = s.r[i];
    }
  ts_cm_xgb_options o = ts_cm_xgb_defaults();
  ts_cost_model *m, *w;
  ts_error err;
  OK(ts_cm_xgb_create(&o, &m, &err));
  OK(ts_cm_update(m, old_c, old_r, n_old, &err));
  char path[256];
  tmp_path(path, sizeof path, "warm");
  OK(ts_cm_save(m, path, &err));
  OK(ts_cm_load(path, &o, &w, &err));
  /* the warm model ranks the new task before seeing any of it */
  double *a = malloc(sizeof *a * (size_t)n_new);
  double *b = malloc(sizeof *b * (size_t)n_new);
  OK(ts_cm_predict(m, new_c, n_new, a, &err));
  OK(ts_cm_predict(w, new_c, n_new, b, &err));
  assert_memory_equal(a, b, sizeof *a * (size_t)n_new);
  int64_t *gr = malloc(sizeof *gr * (size_t)n_new);
  double *t = malloc(sizeof *t * (size_t)n_new);
  for (int i = 0; i < n_new; i++) gr[i] = 2;
  ts_cm_targets(gr, new_r, n_new, t);
  ts_cm_metrics_acc acc = {0};
  ts_cm_metrics_add(&acc, b, t, gr, n_new, 64);
  ts_cm_metrics cold = ts_cm_metrics_of(&acc);
  printf("# warm start on an unseen group: pairwise accuracy %.4f\n",
         cold.pairwise_accuracy);
  assert_true(cold.pairwise_accuracy > 0.85);
  /* 64 samples of the new task: it retrains on top of the loaded trees */
  OK(ts_cm_update(w, new_c, new_r, 64, &err));
  ts_cm_info info;
  ts_cm_info_get(w, &info);
  assert_true(info.warm && info.trained);
  assert_int_equal(info.n_trainings, 1);
  OK(ts_cm_predict(w, new_c, n_new, b, &err));
  assert_true(memcmp(a, b, sizeof *a * (size_t)n_new) != 0);
  ts_cm_metrics_acc acc2 = {0};
  ts_cm_metrics_add(&acc2, b + 64, t + 64, gr + 64, n_new - 64, 64);
  ts_cm_metrics after = ts_cm_metrics_of(&acc2);
  printf("# after 64 samples of it: pairwise accuracy %.4f on the rest\n",
         after.pairwise_accuracy);
  assert_true(after.pairwise_accuracy > 0.85);
  remove(path);
  free(a);
  free(b);
  free(gr);
  free(t);
  free(old_c);
  free(old_r);
  free(new_c);
  free(new_r);
  ts_cm_destroy(m);
  ts_cm_destroy(w);
  free_synth(&s);
}

/* Rewrites `key`'s value in the header line of a model file. */
static void edit_header(const char *path, const char *from, const char *to) {
  FILE *fp = fopen(path, "rb");
  assert_non_null(fp);
  static char buf[1 << 21];
  size_t n = fread(buf, 1, sizeof buf, fp);
  fclose(fp);
  char *at = strstr(buf, from);
  assert_non_null(at);
  size_t lf = strlen(from), lt = strlen(to);
  static char out[1 << 21];
  size_t head = (size_t)(at - buf);
  memcpy(out, buf, head);
  memcpy(out + head, to, lt);
  memcpy(out + head + lt, at + lf, n - head - lf);
  fp = fopen(path, "wb");
  fwrite(out, 1, n - lf + lt, fp);
  fclose(fp);
}

static void expect_refused(const char *path, const char *needle) {
  ts_cost_model *m = NULL;
  ts_error err;
  ts_error_clear(&err);
  assert_int_not_equal(ts_cm_load(path, NULL, &m, &err), TS_OK);
  assert_null(m);
  if (!strstr(err.msg, needle))
    fail_msg("error '%s' lacks '%s'", err.msg, needle);
}

static void test_refused_files(void **state) {
  (void)state;
  synth s = make_synth(1, 70, 10, 23);
  ts_cost_model *m = trained_rounds(&s, 70, TS_CM_OBJ_RANK, 1, 40);
  char path[256];
  tmp_path(path, sizeof path, "bad");
  ts_error err;
  char want[64];
  /* another features version */
  OK(ts_cm_save(m, path, &err));
  snprintf(want, sizeof want, "\"features_version\":%d",
           TS_CM_FEATURES_VERSION);
  edit_header(path, want, "\"features_version\":999");
  expect_refused(path, "features version 999");
  /* another vector length */
  OK(ts_cm_save(m, path, &err));
  snprintf(want, sizeof want, "\"n_features\":%d", TS_CM_N_FEATURES);
  edit_header(path, want, "\"n_features\":164");
  expect_refused(path, "164 entries");
  /* the same version with a different list */
  OK(ts_cm_save(m, path, &err));
  edit_header(path, "\"features_hash\":\"", "\"features_hash\":\"0");
  expect_refused(path, "feature list");
  /* an unknown kind */
  OK(ts_cm_save(m, path, &err));
  edit_header(path, "\"kind\":\"xgb\"", "\"kind\":\"mlp\"");
  expect_refused(path, "unknown kind");
  /* truncated payload */
  OK(ts_cm_save(m, path, &err));
  FILE *fp = fopen(path, "rb");
  fseek(fp, 0, SEEK_END);
  long size = ftell(fp);
  fclose(fp);
  assert_int_equal(truncate(path, size - 100), 0);
  expect_refused(path, "truncated");
  /* corrupt payload of the right size */
  OK(ts_cm_save(m, path, &err));
  fp = fopen(path, "r+b");
  fseek(fp, size - 2000, SEEK_SET);
  for (int i = 0; i < 1000; i++) fputc('x', fp);
  fclose(fp);
  expect_refused(path, "does not load");
  /* not a model; a missing file */
  fp = fopen(path, "wb");
  fputs("hello\n", fp);
  fclose(fp);
  expect_refused(path, "not a tessera cost model");
  remove(path);
  expect_refused(path, "cannot open");
  ts_cm_destroy(m);
  free_synth(&s);
}

static void test_random_model(void **state) {
  (void)state;
  synth s = make_synth(1, 20, 10, 29);
  ts_cost_model *a, *b;
  ts_error err;
  OK(ts_cm_random_create(42, &a, &err));
  OK(ts_cm_random_create(42, &b, &err));
  assert_string_equal(ts_cm_kind(a), "random");
  double x[20], y[20];
  OK(ts_cm_predict(a, s.c, 20, x, &err));
  OK(ts_cm_predict(b, s.c, 20, y, &err));
  assert_memory_equal(x, y, sizeof x);
  for (int i = 0; i < 20; i++) assert_true(x[i] >= 0 && x[i] < 1);
  OK(ts_cm_update(a, s.c, s.r, 20, &err));
  ts_cm_info info;
  ts_cm_info_get(a, &info);
  assert_int_equal(info.n_samples, 20);
  assert_false(info.trained);
  char path[256];
  tmp_path(path, sizeof path, "random");
  OK(ts_cm_save(b, path, &err));
  ts_cost_model *c;
  OK(ts_cm_load(path, NULL, &c, &err));
  assert_string_equal(ts_cm_kind(c), "random");
  /* a fresh generator with the same seed */
  OK(ts_cm_predict(c, s.c, 20, y, &err));
  assert_memory_equal(x, y, sizeof x);
  remove(path);
  ts_cm_destroy(a);
  ts_cm_destroy(b);
  ts_cm_destroy(c);
  free_synth(&s);
}

static void test_metrics(void **state) {
  (void)state;
  int64_t g[6] = {0, 0, 0, 1, 1, 1};
  ts_cm_result r[6] = {{true, 1}, {true, 2}, {false, 0},
                       {true, 4}, {true, 2}, {true, 1}};
  double t[6];
  ts_cm_targets(g, r, 6, t);
  assert_float_equal(t[0], 1, 1e-12);
  assert_float_equal(t[1], 0.5, 1e-12);
  assert_float_equal(t[2], 0, 1e-12);
  assert_float_equal(t[3], 0.25, 1e-12);
  /* scores ordered like the targets */
  double good[6] = {3, 2, 1, 1, 2, 3};
  ts_cm_metrics_acc acc = {0};
  ts_cm_metrics_add(&acc, good, t, g, 6, 64);
  ts_cm_metrics m = ts_cm_metrics_of(&acc);
  assert_int_equal(m.pairs, 6);
  assert_float_equal(m.pairwise_accuracy, 1, 1e-12);
  assert_float_equal(m.top1_recall, 1, 1e-12);
  assert_float_equal(m.spearman, 1, 1e-12);
  /* reversed */
  double bad[6] = {1, 2, 3, 3, 2, 1};
  memset(&acc, 0, sizeof acc);
  ts_cm_metrics_add(&acc, bad, t, g, 6, 64);
  m = ts_cm_metrics_of(&acc);
  assert_float_equal(m.pairwise_accuracy, 0, 1e-12);
  assert_float_equal(m.top1_recall, 0, 1e-12);
  assert_float_equal(m.top8_recall, 1, 1e-12);
  assert_float_equal(m.spearman, -1, 1e-12);
  /* equal scores: half right, and never a top-1 hit */
  double flat[6] = {0, 0, 0, 0, 0, 0};
  memset(&acc, 0, sizeof acc);
  ts_cm_metrics_add(&acc, flat, t, g, 6, 64);
  m = ts_cm_metrics_of(&acc);
  assert_float_equal(m.pairwise_accuracy, 0.5, 1e-12);
  assert_float_equal(m.top1_recall, 0, 1e-12);
  /* batches of at most 2: each group of 3 splits into {first} (too small
   * to count) and {second, third} */
  memset(&acc, 0, sizeof acc);
  ts_cm_metrics_add(&acc, good, t, g, 6, 2);
  assert_int_equal(acc.batches, 2);
  ts_cm_metrics_acc empty = {0};
  m = ts_cm_metrics_of(&empty);
  assert_int_equal(m.records, 0);
  assert_float_equal(m.pairwise_accuracy, 0, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_recover_rank),
      cmocka_unit_test(test_recover_squared),
      cmocka_unit_test(test_failed_records),
      cmocka_unit_test(test_single_record_and_failed_groups),
      cmocka_unit_test(test_online_rule),
      cmocka_unit_test(test_deterministic),
      cmocka_unit_test(test_save_load),
      cmocka_unit_test(test_warm_start),
      cmocka_unit_test(test_refused_files),
      cmocka_unit_test(test_random_model),
      cmocka_unit_test(test_metrics),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
