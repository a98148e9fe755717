/*
 * test_confirm.c — confirmations: the top candidates of a workload measured
 * again side by side override the search-time ranking. A slow schedule
 * stored with a lucky (tiny) search-time figure loses to a fast one stored
 * with an unlucky (huge) figure once both are confirmed; the confirmed best
 * stays the best against a later search-time figure until the next
 * confirmation, which measures that new record beside the old winner and
 * replaces the previous confirmation; bad requests are refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <unistd.h>

#include "util.h"

#define OK(x) assert_int_equal((x), TS_OK)

#include "jobutil.h"

/* The unscheduled function: a scalar triple loop. */
static const char *plain_trace = "{\"version\":1,\"instructions\":[]}";

/* The default schedule's trace (vectorized, parallel): many times faster. */
static char *default_trace(const ts_func *f, const char *target) {
  ts_target *t = NULL;
  ts_sched *s = NULL;
  ts_error err;
  OK(ts_target_parse(target, &t, &err));
  OK(ts_default_schedule(f, t, &s, &err));
  char *json = ts_trace_to_json(ts_sched_trace(s));
  assert_non_null(json);
  ts_sched_destroy(s);
  ts_target_free(t);
  return json;
}

static int64_t put(ts_db *db, int64_t w, const char *target, const char *trace,
                   double seconds) {
  double run[2] = {seconds, seconds};
  ts_db_measurement m = {.workload_id = w,
                         .target = target,
                         .trace_json = trace,
                         .run_secs = run,
                         .n_run_secs = 2,
                         .status = TS_DB_STATUS_OK};
  int64_t id = 0;
  OK(ts_db_commit_record(db, &m, &id));
  return id;
}

static ts_confirm_options quick(void) {
  ts_confirm_options o = ts_confirm_defaults();
  o.rounds = 3;
  o.min_repeat_ms = 2;
  o.threads = 1;
  return o;
}

/* A database holding the workload matmul 64^3. */
static ts_db *open_matmul(const char *file, ts_workload **w, int64_t *wid) {
  ts_db *db = open_db(file);
  ts_error err;
  OK(ts_workload_from_spec("matmul M=64 N=64 K=64", w, &err));
  OK(ts_db_commit_workload(db, (*w)->func, (*w)->name, wid));
  return db;
}

#define TARGET "llvm -num-cores=1"

/* open_matmul's database with two records on TARGET: the default
 * schedule (*fast, 1 ms) and the plain loops (2 ms). */
static ts_db *two_schedules(const char *file, ts_workload **w, int64_t *wid,
                            char **fast) {
  ts_db *db = open_matmul(file, w, wid);
  *fast = default_trace((*w)->func, TARGET);
  put(db, *wid, TARGET, *fast, 1e-3);
  put(db, *wid, TARGET, plain_trace, 2e-3);
  return db;
}

static void test_confirmation_reranks(void **state) {
  (void)state;
  ts_workload *w = NULL;
  int64_t wid;
  ts_db *db = open_matmul("confirm.db", &w, &wid);
  ts_error err;
  const char *target = "llvm -num-cores=1";
  char *fast = default_trace(w->func, target);

  /* nothing to confirm yet */
  ts_confirm_options o = quick();
  ts_confirm_result r;
  assert_int_equal(ts_confirm(db, wid, target, &o, &r, &err), TS_ENOTFOUND);

  /* the slow schedule looks fastest at search time */
  int64_t slow_id = put(db, wid, target, plain_trace, 1e-9);
  int64_t fast_id = put(db, wid, target, fast, 10.0);
  ts_db_record best;
  OK(ts_db_best(db, wid, target, &best));
  assert_int_equal(best.id, slow_id);
  assert_int_equal(best.confirmed_rounds, 0);
  ts_db_record_clear(&best);

  OK(ts_confirm(db, wid, target, &o, &r, &err));
  assert_int_equal(r.n, 2);
  assert_int_equal(r.search_best_record, slow_id);
  assert_int_equal(r.best_record, fast_id);
  assert_true(r.best_s > 0 && r.best_s < r.search_best_confirmed_s);
  OK(ts_db_best(db, wid, target, &best));
  assert_int_equal(best.id, fast_id);
  assert_int_equal(best.confirmed_rounds, 3);
  assert_true(ts_db_record_seconds(&best) == best.confirmed_s);
  assert_true(best.median_s == 10.0); /* the search-time figure is kept */
  ts_db_record_clear(&best);
  /* the compile-time lookup agrees */
  OK(ts_db_best_by_func(db, w->func, target, &best));
  assert_int_equal(best.id, fast_id);
  ts_db_record_clear(&best);

  /* a later, luckier search-time figure does not unseat the confirmed
   * best; the next confirmation measures it beside the old winner */
  int64_t lucky = put(db, wid, target, plain_trace, 1e-12);
  OK(ts_db_best(db, wid, target, &best));
  assert_int_equal(best.id, fast_id);
  ts_db_record_clear(&best);
  o.top_k = 1; /* only the lucky record by search time, plus the winner */
  OK(ts_confirm(db, wid, target, &o, &r, &err));
  assert_int_equal(r.n, 2);
  assert_int_equal(r.search_best_record, lucky);
  assert_int_equal(r.best_record, fast_id);
  /* the first confirmation of the slow record is gone: only this one's two
   * records are confirmed */
  ts_db_record *recs = NULL;
  int n = 0;
  OK(ts_db_records_of(db, wid, target, &recs, &n));
  int confirmed = 0;
  for (int i = 0; i < n; i++) {
    if (recs[i].confirmed_rounds > 0) confirmed++;
    if (recs[i].id == slow_id) assert_int_equal(recs[i].confirmed_rounds, 0);
  }
  assert_int_equal(confirmed, 2);
  ts_db_records_free(recs, n);

  /* the top-k by search time ignores confirmations and repeats no trace */
  OK(ts_db_top_k_search(db, wid, target, 5, &recs, &n));
  assert_int_equal(n, 2);
  assert_int_equal(recs[0].id, lucky);
  assert_int_equal(recs[1].id, fast_id);
  ts_db_records_free(recs, n);

  /* refused: bad options, a GPU target, a record of another workload */
  o.rounds = 0;
  assert_int_equal(ts_confirm(db, wid, target, &o, &r, &err), TS_EINVAL);
  o = quick();
  assert_int_equal(ts_confirm(db, wid, "cuda -arch=sm_80", &o, &r, &err),
                   TS_EUNSUPPORTED);
  assert_non_null(strstr(err.msg, "GPU"));
  double s = 1e-3, sp = 0;
  assert_int_equal(
      ts_db_confirm(db, wid + 1000, target, &fast_id, &s, &sp, 1, 3),
      TS_EINVAL);
  assert_non_null(strstr(ts_db_errmsg(db), "not an ok record"));
  /* ... and the failed call changed nothing */
  OK(ts_db_best(db, wid, target, &best));
  assert_int_equal(best.id, fast_id);
  assert_int_equal(best.confirmed_rounds, 3);
  ts_db_record_clear(&best);
  assert_int_equal(ts_db_confirm(db, wid, target, &fast_id, &s, &sp, 1, 0),
                   TS_EINVAL);

  free(fast);
  ts_workload_free(w);
  ts_db_close(db);
}

/* The first record of a workload (a job's trial 0: the default schedule)
 * is measured again beside the top k however slow its search-time figure:
 * a figure taken in a slow minute cannot leave a slower schedule as the
 * best. */
static void test_confirmation_keeps_first(void **state) {
  (void)state;
  ts_workload *w = NULL;
  int64_t wid;
  ts_db *db = open_matmul("confirm_first.db", &w, &wid);
  ts_error err;
  char *fast = default_trace(w->func, TARGET);
  int64_t first = put(db, wid, TARGET, fast, 10.0);
  int64_t lucky = put(db, wid, TARGET, plain_trace, 1e-9);
  ts_confirm_options o = quick();
  o.top_k = 1; /* the lucky record alone by search time */
  ts_confirm_result r;
  OK(ts_confirm(db, wid, TARGET, &o, &r, &err));
  assert_int_equal(r.n, 2);
  assert_int_equal(r.search_best_record, lucky);
  assert_int_equal(r.best_record, first);
  ts_db_record best;
  OK(ts_db_best(db, wid, TARGET, &best));
  assert_int_equal(best.id, first);
  ts_db_record_clear(&best);
  free(fast);
  ts_workload_free(w);
  ts_db_close(db);
}

/* A stand-in vendor: reports a fixed time per call (or fails from call
 * fail_at on) and counts its calls. */
typedef struct fake_peer {
  double seconds;
  int calls, fail_at;
} fake_peer;

static int fake_time(void *ctx, int min_repeat_ms, double *seconds,
                     ts_error *err) {
  fake_peer *p = ctx;
  assert_int_equal(min_repeat_ms, 2);
  if (++p->calls >= p->fail_at && p->fail_at > 0)
    return TS_ERR(err, TS_ERANGE, "the library call failed");
  *seconds = p->seconds;
  return TS_OK;
}

/* Vendor peers take a turn in every round; the ratio stored with each
 * level is the median of the rounds' vendor / confirmed-best seconds, which
 * for a constant vendor time is that time over the best's median. A
 * peer that fails is dropped from the later rounds and not stored. */
static void test_confirmation_with_vendors(void **state) {
  (void)state;
  ts_workload *w = NULL;
  int64_t wid;
  char *fast = NULL;
  ts_db *db = two_schedules("confirm_peers.db", &w, &wid, &fast);
  ts_error err;
  const char *target = TARGET;

  fake_peer lib = {.seconds = 0.5e-3}, broken = {.seconds = 1e-3, .fail_at = 2};
  ts_confirm_peer peers[2] = {
      {.name = "fastlib", .threads = 1, .time = fake_time, .ctx = &lib},
      {.name = "brokenlib", .threads = 1, .time = fake_time, .ctx = &broken},
  };
  ts_confirm_options o = quick();
  o.rounds = 5;
  o.peers = peers;
  o.n_peers = 2;
  ts_confirm_result r;
  OK(ts_confirm(db, wid, target, &o, &r, &err));
  assert_int_equal(r.rounds, 5);
  assert_int_equal(lib.calls, 5);
  assert_int_equal(broken.calls, 2); /* failed in round 2, then left out */
  assert_true(r.peers[0].ok);
  assert_true(r.peers[0].seconds == 0.5e-3);
  assert_true(r.peers[0].ratio == 0.5e-3 / r.best_median_s);
  assert_false(r.peers[1].ok);
  assert_non_null(strstr(r.peers[1].why, "the library call failed"));

  ts_db_baseline b;
  OK(ts_db_baseline_get(db, wid, target, "fastlib", 1, &b));
  assert_int_equal(b.side_rounds, 5);
  assert_true(b.side_ratio == r.peers[0].ratio);
  assert_true(fabs(b.gflops - ts_func_flops(w->func) / 0.5e-3 * 1e-9) < 1e-9);
  ts_db_baseline_clear(&b);
  assert_int_equal(ts_db_baseline_get(db, wid, target, "brokenlib", 1, &b),
                   TS_ENOTFOUND);

  /* more peers than a confirmation takes, or a count without peers */
  o.n_peers = TS_CONFIRM_MAX_PEERS + 1;
  assert_int_equal(ts_confirm(db, wid, target, &o, &r, &err), TS_EINVAL);
  assert_non_null(strstr(err.msg, "peers"));
  o.n_peers = 1;
  o.peers = NULL;
  assert_int_equal(ts_confirm(db, wid, target, &o, &r, &err), TS_EINVAL);

  free(fast);
  ts_workload_free(w);
  ts_db_close(db);
}

static int fake_time_cold(void *ctx, double *seconds, ts_error *err) {
  (void)err;
  fake_peer *p = ctx;
  p->fail_at--; /* counts the cold calls down */
  *seconds = p->seconds;
  return TS_OK;
}

/* A cold confirmation (a model's tasks: each timing one call with the
 * weights evicted) times its candidates and the peers that can be timed
 * cold, through their cold call only; a peer without one is left out with
 * a reason, and nothing is stored for it. */
static void test_cold_confirmation(void **state) {
  (void)state;
  ts_workload *w = NULL;
  int64_t wid;
  char *fast = NULL;
  ts_db *db = two_schedules("confirm_cold.db", &w, &wid, &fast);
  ts_error err;
  const char *target = TARGET;
  fake_peer cold = {.seconds = 0.25e-3}, warm = {.seconds = 1e-3};
  ts_confirm_peer peers[2] = {
      {.name = "coldlib",
       .threads = 1,
       .time = fake_time,
       .time_cold = fake_time_cold,
       .ctx = &cold},
      {.name = "warmlib", .threads = 1, .time = fake_time, .ctx = &warm},
  };
  ts_confirm_options o = quick();
  o.rounds = 3;
  o.cold = true;
  o.cold_params = 2; /* B, the matmul's "weights" */
  o.peers = peers;
  o.n_peers = 2;
  ts_confirm_result r;
  OK(ts_confirm(db, wid, target, &o, &r, &err));
  assert_int_equal(r.rounds, 3);
  assert_true(r.best_s > 0 && isfinite(r.best_s));
  assert_int_equal(cold.calls, 0); /* never timed warm */
  assert_int_equal(cold.fail_at, -3);
  assert_true(r.peers[0].ok);
  assert_true(r.peers[0].seconds == 0.25e-3);
  assert_int_equal(warm.calls, 0);
  assert_false(r.peers[1].ok);
  assert_non_null(strstr(r.peers[1].why, "cannot be timed cold"));
  ts_db_baseline b;
  assert_int_equal(ts_db_baseline_get(db, wid, target, "warmlib", 1, &b),
                   TS_ENOTFOUND);
  OK(ts_db_baseline_get(db, wid, target, "coldlib", 1, &b));
  ts_db_baseline_clear(&b);
  free(fast);
  ts_workload_free(w);
  ts_db_close(db);
}

/* The ranking follows the rounds, not the minutes: A is faster than B in
 * two rounds of three, but B's one fast round fell in the slow minute that
 * also took A's middle value, so B has the smaller absolute median. */
static void test_rank_by_rounds(void **state) {
  (void)state;
  /* rows A, B, C; the host twice as slow in round 1, three times in 2 */
  const double secs[] = {1.00, 2.00, 3.00, /* A */
                         1.05, 1.90, 3.15, /* B */
                         1.20, 2.40, 3.60 /* C */};
  double lat[3], spread[3];
  assert_int_equal(ts_confirm_rank(secs, 3, 3, lat, spread), TS_OK);
  assert_true(lat[0] < lat[1] && lat[1] < lat[2]);
  /* the absolute medians would have put B first */
  assert_true(secs[4] < secs[1]);
  /* figures in seconds at the rounds' middle level: the reference is B in
   * rounds 0 and 2 and A in round 1, the level their median, 2.0 s */
  assert_float_equal(lat[0], 2.0 * (1.00 / 1.05), 1e-12);
  assert_float_equal(lat[1], 2.0, 1e-12);
  assert_float_equal(spread[1], 0.05, 1e-12);
  /* one candidate: its own median, no spread */
  const double one[] = {3.0, 1.0, 2.0};
  assert_int_equal(ts_confirm_rank(one, 1, 3, lat, spread), TS_OK);
  assert_float_equal(lat[0], 2.0, 1e-12);
  assert_float_equal(spread[0], 0.0, 1e-12);
  assert_int_equal(ts_confirm_rank(one, 0, 3, lat, spread), TS_EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_confirmation_reranks),
      cmocka_unit_test(test_confirmation_keeps_first),
      cmocka_unit_test(test_confirmation_with_vendors),
      cmocka_unit_test(test_cold_confirmation),
      cmocka_unit_test(test_rank_by_rounds),
  };
  return cmocka_run_group_tests(tests, scratch_setup, scratch_teardown);
}
