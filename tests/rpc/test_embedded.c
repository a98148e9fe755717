/*
 * test_embedded.c — the embedded runner (the in-process local pool): a
 * correct candidate is ok with its timings; one with a wrong output is
 * wrong_result; one that segfaults is run_error; one that never ends is
 * timeout within its limit; the pool keeps serving normally after each;
 * artifacts that cannot load and argument mismatches are build_error; bad
 * requests are refused with every result filled; concurrent callers never
 * overlap their measurements.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "rpc_test.h"

typedef struct fixture {
  ts_runner *runner;
  ts_artifact *add, *add_split, *sub, *segv, *hang, *shortk;
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  ts_error err;
  ts_error_clear(&err);
  ts_device_options d = ts_device_defaults();
  d.threads = 1;
  /* The pool first: its helper process is forked before LLVM runs here. */
  if (ts_runner_embedded_create(&d, &f->runner, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    return -1;
  }
  f->add = build_tir(TIR_ADD);
  f->add_split = build_tir(TIR_ADD_SPLIT);
  f->sub = build_tir(TIR_SUB);
  f->segv = build_tir(TIR_SEGV);
  f->hang = build_tir(TIR_HANG);
  f->shortk = build_tir(TIR_SHORT);
  if (!f->add || !f->add_split || !f->sub || !f->segv || !f->hang || !f->shortk)
    return -1;
  if (ts_runner_set_reference(f->runner, "add", f->add, &err)) return -1;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  ts_runner_destroy(f->runner);
  ts_artifact_release(f->add);
  ts_artifact_release(f->add_split);
  ts_artifact_release(f->sub);
  ts_artifact_release(f->segv);
  ts_artifact_release(f->hang);
  ts_artifact_release(f->shortk);
  free(f);
  return 0;
}

static void test_ok_with_timings(void **state) {
  fixture *f = *state;
  ts_measure_config c = fast_config(5000);
  c.eval.repeat = 3;
  ts_artifact *cands[2] = {f->add, f->add_split};
  ts_measure_result r[2];
  ts_error err;
  ts_error_clear(&err);
  assert_int_equal(ts_runner_measure(f->runner, &c, "add", cands, 2, r, &err),
                   TS_OK);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(r[i].status, TS_MEASURE_OK);
    assert_int_equal(r[i].n_seconds, 3);
    for (int k = 0; k < 3; k++) assert_true(r[i].seconds[k] > 0);
    assert_true(r[i].number >= 1);
    assert_string_equal(r[i].worker, "embedded");
    assert_int_equal(r[i].attempts, 1);
    assert_true(r[i].finished_at >= r[i].started_at);
    assert_string_equal(r[i].error, "");
  }
  assert_string_equal(ts_runner_name(f->runner), "embedded");
  /* Another seed: the reference is recomputed for it. */
  c.seed = 12345;
  assert_int_equal(ts_runner_measure(f->runner, &c, "add", cands, 1, r, &err),
                   TS_OK);
  assert_int_equal(r[0].status, TS_MEASURE_OK);
  /* Without a reference there is no check: the wrong kernel times fine. */
  ts_artifact *wrong = f->sub;
  assert_int_equal(ts_runner_measure(f->runner, &c, NULL, &wrong, 1, r, &err),
                   TS_OK);
  assert_int_equal(r[0].status, TS_MEASURE_OK);
}

static void test_faults(void **state) {
  fixture *f = *state;
  ts_measure_config c = fast_config(1500);
  ts_artifact *cands[5] = {f->sub, f->segv, f->hang, f->add, f->add_split};
  ts_measure_result r[5];
  ts_error err;
  ts_error_clear(&err);
  double t0 = now_s();
  assert_int_equal(ts_runner_measure(f->runner, &c, "add", cands, 5, r, &err),
                   TS_OK);
  double elapsed = now_s() - t0;
  assert_int_equal(r[0].status, TS_MEASURE_WRONG_RESULT);
  assert_non_null(strstr(r[0].error, "differs from the reference"));
  assert_int_equal(r[1].status, TS_MEASURE_RUN_ERROR);
  assert_non_null(strstr(r[1].error, "signal 11"));
  assert_int_equal(r[2].status, TS_MEASURE_TIMEOUT);
  assert_non_null(strstr(r[2].error, "1500 ms"));
  /* Killed within the limit (plus a little slack), not queued time. */
  assert_true(r[2].run_ms >= 1500 && r[2].run_ms < 3000);
  /* The pool keeps serving. */
  assert_int_equal(r[3].status, TS_MEASURE_OK);
  assert_int_equal(r[4].status, TS_MEASURE_OK);
  assert_true(elapsed < 10);
  for (int i = 0; i < 3; i++) assert_int_equal(r[i].n_seconds, 0);
}

static void test_build_errors(void **state) {
  fixture *f = *state;
  ts_measure_config c = fast_config(5000);
  ts_artifact *garbage =
      ts_artifact_new(TS_ARTIFACT_CPU_OBJECT, "add", f->add->args,
                      f->add->n_args, "not an object file", 18);
  ts_artifact *noentry =
      ts_artifact_new(TS_ARTIFACT_CPU_OBJECT, "missing_symbol", f->add->args,
                      f->add->n_args, f->add->bytes, f->add->n_bytes);
  ts_artifact *ptx = ts_artifact_new(TS_ARTIFACT_PTX, "k", f->add->args,
                                     f->add->n_args, ".version 8.0", 12);
  ts_artifact *cands[5] = {garbage, noentry, ptx, f->shortk, NULL};
  ts_measure_result r[5];
  ts_error err;
  ts_error_clear(&err);
  assert_int_equal(ts_runner_measure(f->runner, &c, "add", cands, 5, r, &err),
                   TS_OK);
  for (int i = 0; i < 5; i++) {
    assert_int_equal(r[i].status, TS_MEASURE_BUILD_ERROR);
    assert_true(strlen(r[i].error) > 0);
  }
  assert_non_null(strstr(r[1].error, "missing_symbol"));
  assert_non_null(strstr(r[2].error, "ptx"));
  assert_non_null(strstr(r[3].error, "differ from reference"));
  ts_artifact_release(garbage);
  ts_artifact_release(noentry);
  ts_artifact_release(ptx);
}

static void test_bad_requests(void **state) {
  fixture *f = *state;
  ts_measure_config c = fast_config(5000);
  ts_artifact *cands[2] = {f->add, f->add};
  ts_measure_result r[2];
  ts_error err;
  ts_error_clear(&err);
  assert_int_equal(ts_runner_measure(f->runner, &c, "nope", cands, 2, r, &err),
                   TS_ENOTFOUND);
  assert_non_null(strstr(err.msg, "nope"));
  assert_int_equal(r[0].status, TS_MEASURE_WORKER_LOST);
  assert_int_equal(r[1].status, TS_MEASURE_WORKER_LOST);
  c.eval.repeat = TS_MEASURE_MAX_REPEAT + 1;
  assert_int_equal(ts_runner_measure(f->runner, &c, NULL, cands, 2, r, &err),
                   TS_EINVAL);
  assert_non_null(strstr(err.msg, "repeat"));
  c = fast_config(0);
  assert_int_equal(ts_runner_measure(f->runner, &c, NULL, cands, 2, r, &err),
                   TS_EINVAL);
  assert_int_equal(
      ts_runner_set_reference(f->runner, "bad id/..", f->add, &err), TS_EINVAL);
  c = fast_config(5000);
  assert_int_equal(
      ts_runner_measure(f->runner, &c, "bad/id", cands, 2, r, &err), TS_EINVAL);
  assert_int_equal(ts_runner_measure(f->runner, &c, NULL, cands, 0, r, &err),
                   TS_OK);
}

typedef struct caller {
  fixture *f;
  ts_measure_result r[6];
  int rc;
} caller;

static void *call_thread(void *arg) {
  caller *c = arg;
  ts_measure_config cfg = fast_config(5000);
  cfg.eval.min_repeat_ms = 5; /* long enough to overlap if it could */
  ts_artifact *cands[6];
  for (int i = 0; i < 6; i++) cands[i] = c->f->add;
  c->rc = ts_runner_measure(c->f->runner, &cfg, "add", cands, 6, c->r, NULL);
  return NULL;
}

static void test_no_overlap(void **state) {
  fixture *f = *state;
  caller a = {f, {{0}}, -1}, b = {f, {{0}}, -1};
  pthread_t ta, tb;
  pthread_create(&ta, NULL, call_thread, &a);
  pthread_create(&tb, NULL, call_thread, &b);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  assert_int_equal(a.rc, TS_OK);
  assert_int_equal(b.rc, TS_OK);
  ts_measure_result all[12];
  for (int i = 0; i < 6; i++) {
    all[i] = a.r[i];
    all[6 + i] = b.r[i];
  }
  for (int i = 0; i < 12; i++) {
    assert_int_equal(all[i].status, TS_MEASURE_OK);
    for (int j = 0; j < 12; j++)
      if (i != j)
        assert_true(all[i].finished_at <= all[j].started_at ||
                    all[j].finished_at <= all[i].started_at);
  }
}

/* More references than the executor keeps (64): one evicted long ago is
 * handed back when a measurement needs it; a wrong kernel still fails
 * the check against it. */
static void test_many_references(void **state) {
  fixture *f = *state;
  ts_error err;
  ts_error_clear(&err);
  char id[32];
  for (int i = 0; i < 80; i++) {
    snprintf(id, sizeof id, "ref%d", i);
    assert_int_equal(
        ts_runner_set_reference(f->runner, id, i % 2 ? f->sub : f->add, &err),
        TS_OK);
  }
  ts_measure_config c = fast_config(5000);
  ts_artifact *cands[2] = {f->add, f->sub};
  ts_measure_result r[2];
  assert_int_equal(ts_runner_measure(f->runner, &c, "ref0", cands, 2, r, &err),
                   TS_OK);
  assert_int_equal(r[0].status, TS_MEASURE_OK);
  assert_int_equal(r[1].status, TS_MEASURE_WRONG_RESULT);
  assert_int_equal(ts_runner_measure(f->runner, &c, "ref1", cands, 2, r, &err),
                   TS_OK);
  assert_int_equal(r[0].status, TS_MEASURE_WRONG_RESULT);
  assert_int_equal(r[1].status, TS_MEASURE_OK);
  assert_int_equal(ts_runner_measure(f->runner, &c, "ref80", cands, 1, r, &err),
                   TS_ENOTFOUND);
}

/* The reference's time limit: ten minutes at least (the unscheduled 2048^3
 * matmul takes over two on one core), four candidate limits when longer,
 * an hour at most. */
static void test_reference_limit(void **state) {
  (void)state;
  ts_measure_config c = fast_config(10000);
  assert_int_equal(ts_measure_reference_limit_ms(&c), 600000);
  c.timeout_ms = 200000;
  assert_int_equal(ts_measure_reference_limit_ms(&c), 800000);
  c.timeout_ms = 2000000;
  assert_int_equal(ts_measure_reference_limit_ms(&c), 3600000);
}

/* One AMX tile product (C += A B, 16 x 16 from K = 32 bf16): on a CPU
 * with AMX the measuring process must hold Linux's permission for the
 * tile state, which a process asks for (without it the first tile
 * instruction is an illegal instruction). Elsewhere: nothing to check. */
static void test_amx_candidate_runs(void **state) {
  fixture *f = *state;
  if (ts_rt_cpu_has("amx-tile") != 1 || ts_rt_cpu_has("amx-bf16") != 1) {
    printf("skipped: this CPU has no AMX\n");
    return;
  }
  static const char tir[] =
      "func amx(A: bfloat16[16, 32], B: bfloat16[16, 32], C: float32[16, "
      "16]) {\n"
      "  evaluate call<int32>(\"tessera.amx_bf16_gemm\", &C[0, 0], 16, "
      "&A[0, 0], 32, &B[0, 0], 32, 32)\n"
      "}\n";
  ts_artifact *a = build_tir(tir);
  assert_non_null(a);
  ts_measure_config c = fast_config(5000);
  ts_measure_result r;
  ts_error err;
  ts_error_clear(&err);
  assert_int_equal(ts_runner_measure(f->runner, &c, NULL, &a, 1, &r, &err),
                   TS_OK);
  if (r.status != TS_MEASURE_OK) fail_msg("AMX candidate: %s", r.error);
  ts_artifact_release(a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ok_with_timings),
      cmocka_unit_test(test_faults),
      cmocka_unit_test(test_build_errors),
      cmocka_unit_test(test_bad_requests),
      cmocka_unit_test(test_no_overlap),
      cmocka_unit_test(test_many_references),
      cmocka_unit_test(test_amx_candidate_runs),
      cmocka_unit_test(test_reference_limit),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
