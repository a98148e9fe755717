/*
 * test_mutate.c — mutators and postprocessors. Each mutator changes one
 * decision of the kind it owns and nothing else: tile sizes keep their
 * product and the innermost bound, unroll / parallel pick another
 * candidate of the categorical feeding that annotation, compute location
 * another location; a trace without such a decision is TS_ENOTFOUND;
 * mutated traces mostly replay, and those that replay compute the right
 * result. The default probabilities are the documented ones. The
 * postprocessors turn the root annotations into loop kinds (a parallel
 * outer loop of at least the planned extent when there is one, a
 * vectorized innermost loop, the unroll annotations), decompose reduction
 * inits, leave no tuner annotation behind, and the GPU verifier refuses
 * programs over the target's limits.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "util.h"

#define OK(x) assert_int_equal((x), TS_OK)

static ts_target *host(void) {
  ts_target *t = NULL;
  ts_error err;
  OK(ts_target_host(&t, &err));
  return t;
}

/* The decisions of t as (index, values) so two traces can be compared. */
static int decisions_differing(const ts_trace *a, const ts_trace *b,
                               int *which) {
  assert_int_equal(ts_trace_n_insts(a), ts_trace_n_insts(b));
  int diff = 0;
  for (int i = 0; i < ts_trace_n_insts(a); i++) {
    assert_int_equal(ts_trace_inst_kind(a, i), ts_trace_inst_kind(b, i));
    int64_t x[16], y[16];
    int nx = ts_trace_decision(a, i, x, 16),
        ny = ts_trace_decision(b, i, y, 16);
    assert_int_equal(nx, ny);
    if (nx > 0 && memcmp(x, y, sizeof(int64_t) * (size_t)nx)) {
      diff++;
      *which = i;
    }
  }
  return diff;
}

static void test_probabilities(void **state) {
  (void)state;
  ts_target *t = host();
  double p[TS_N_MUTATORS];
  ts_mutator_probs(t, p);
  assert_true(p[TS_MUTATOR_TILE_SIZE] == 0.9);
  assert_true(p[TS_MUTATOR_COMPUTE_LOCATION] == 0.05);
  assert_true(p[TS_MUTATOR_UNROLL] == 0.03);
  assert_true(p[TS_MUTATOR_PARALLEL] == 0.02);
  for (int k = 0; k < TS_N_MUTATORS; k++) assert_non_null(ts_mutator_name(k));
  assert_null(ts_mutator_name(TS_N_MUTATORS));
  ts_target_free(t);
}

static void test_mutators(void **state) {
  (void)state;
  ts_workload *w =
      tu_workload("conv2d_nhwc N=1 H=8 W=8 CI=8 CO=16 KH=3 KW=3 pad=1");
  ts_target *t = host();
  ts_design_space *s = NULL;
  int n = 0;
  ts_error err;
  OK(ts_space_generate(w->func, t, NULL, &s, &n, &err));
  ts_candidate c;
  OK(ts_candidate_sample(&s[0], 0, w->func, t, 11, &c, &err));
  ts_rng rng;
  ts_rng_seed(&rng, 5);
  ts_rt_args *want = tu_reference(w->func, 2);
  ts_runtime *rt = NULL;
  OK(ts_runtime_create(2, &rt, &err));
  int replayed[TS_N_MUTATORS] = {0}, imperfect = 0, imperfect_replayed = 0;
  for (int k = 0; k < TS_N_MUTATORS; k++)
    for (int rep = 0; rep < 12; rep++) {
      ts_trace *m = NULL;
      OK(ts_mutate(c.design, (ts_mutator_kind)k, &rng, &m, &err));
      int at = -1;
      assert_int_equal(decisions_differing(c.design, m, &at), 1);
      ts_instr_kind ik = ts_trace_inst_kind(m, at);
      int64_t before[16], after[16];
      int nb = ts_trace_decision(c.design, at, before, 16);
      ts_trace_decision(m, at, after, 16);
      switch (k) {
      case TS_MUTATOR_TILE_SIZE: {
        if (ik == TS_INSTR_SAMPLE_TILE) {
          /* the inner factors of an imperfect tile: any positive values
           * with the innermost within its maximum (the padded extent is
           * checked at replay) */
          imperfect++;
          for (int i = 0; i < nb; i++) assert_true(after[i] >= 1);
          assert_true(after[nb - 1] <= 64);
          break;
        }
        assert_int_equal(ik, TS_INSTR_SAMPLE_PERFECT_TILE);
        int64_t pa = 1, pb = 1;
        for (int i = 0; i < nb; i++) {
          pa *= before[i];
          pb *= after[i];
          assert_true(after[i] >= 1);
        }
        assert_true(pa == pb);
        assert_true(after[nb - 1] <= 64);
        break;
      }
      case TS_MUTATOR_COMPUTE_LOCATION:
        assert_int_equal(ik, TS_INSTR_SAMPLE_COMPUTE_LOCATION);
        break;
      default:
        assert_int_equal(ik, TS_INSTR_SAMPLE_CATEGORICAL);
        assert_true(after[0] >= 0 && after[0] != before[0]);
        break;
      }
      ts_candidate mc;
      if (ts_candidate_make(m, w->func, t, 1, &mc, &err) == TS_OK) {
        replayed[k]++;
        imperfect_replayed +=
            k == TS_MUTATOR_TILE_SIZE && ik == TS_INSTR_SAMPLE_TILE;
        if (rep < 2) OK(tu_check(ts_sched_func(mc.sched), t, want, 2, rt));
        ts_candidate_clear(&mc);
      }
      ts_trace_free(m);
    }
  /* perfect tile, unroll and parallel mutations always replay (an
   * imperfect tile may pad too much, which replay refuses); compute
   * locations may pick a location that does not exist */
  assert_true(imperfect > 0);
  assert_int_equal(replayed[TS_MUTATOR_TILE_SIZE] - imperfect_replayed,
                   12 - imperfect);
  assert_int_equal(replayed[TS_MUTATOR_UNROLL], 12);
  assert_int_equal(replayed[TS_MUTATOR_PARALLEL], 12);
  assert_true(replayed[TS_MUTATOR_COMPUTE_LOCATION] >= 1);
  ts_runtime_destroy(rt);
  ts_rt_args_free(want);
  ts_candidate_clear(&c);
  ts_design_spaces_free(s, n);
  /* a trace with nothing of that kind */
  ts_workload *m = tu_workload("matmul M=16 N=16 K=16");
  OK(ts_space_generate(m->func, t, NULL, &s, &n, &err));
  ts_trace *out = NULL;
  assert_int_equal(
      ts_mutate(s[0].trace, TS_MUTATOR_COMPUTE_LOCATION, &rng, &out, &err),
      TS_ENOTFOUND);
  assert_null(out);
  ts_trace *empty = ts_trace_new();
  assert_int_equal(ts_mutate(empty, TS_MUTATOR_TILE_SIZE, &rng, &out, &err),
                   TS_ENOTFOUND);
  ts_trace_free(empty);
  ts_design_spaces_free(s, n);
  ts_workload_free(m);
  ts_target_free(t);
  ts_workload_free(w);
}

/* Loops of a kind in a printed function. */
static int count(const char *text, const char *what) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, what)); p += strlen(what)) n++;
  return n;
}

static void test_postprocessors(void **state) {
  (void)state;
  ts_workload *w = tu_workload("matmul M=64 N=64 K=64");
  ts_target *t = host();
  ts_design_space *s = NULL;
  int n = 0;
  ts_error err;
  OK(ts_space_generate(w->func, t, NULL, &s, &n, &err));
  int parallel = 0;
  for (int k = 0; k < 8; k++) {
    ts_candidate c;
    OK(ts_candidate_sample(&s[k % n], k % n, w->func, t, 40 + (uint64_t)k, &c,
                           &err));
    char *text = ts_func_print(ts_sched_func(c.sched));
    assert_null(strstr(text, "tuner."));
    /* the init is decomposed out of the reduction */
    assert_non_null(strstr(text, "block C_init"));
    assert_null(strstr(text, "init {"));
    /* at most one parallel loop, over the outer tiles (none when they all
     * have extent 1 and the parallelism is in inner tiles) */
    assert_true(count(text, ") parallel") <= 1);
    parallel += count(text, ") parallel");
    assert_true(count(text, ") vectorized") >= 1);
    ts_candidate_clear(&c);
    free(text);
  }
  assert_true(parallel >= 4);
  ts_design_spaces_free(s, n);
  for (int k = 0; k < TS_N_POSTPROCS; k++) assert_non_null(ts_postproc_name(k));
  ts_target_free(t);
  ts_workload_free(w);
}

static const char gpu_prog[] =
    "func g(A: float32[4096], B: float32[4096]) {\n"
    "  block root() {\n"
    "    for bx in range(4) thread(\"blockIdx.x\") {\n"
    "      for tx in range(%d) thread(\"threadIdx.x\") {\n"
    "        block b(v: spatial(4096) = bx * 1024 + tx) {\n"
    "          alloc S: float32[%d] scope \"shared\"\n"
    "          for i in range(%d) {\n"
    "            S[i] = A[v]\n"
    "          }\n"
    "          B[v] = S[tx]\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

static void test_verify_gpu(void **state) {
  (void)state;
  ts_target *t = NULL;
  ts_error err;
  OK(ts_target_parse("cuda -arch=sm_80", &t, &err));
  char text[2048];
  ts_func *f = NULL;
  ts_gpu_usage u;
  snprintf(text, sizeof text, gpu_prog, 1024, 1024, 1024);
  OK(ts_func_parse(text, strlen(text), "g", &f, &err));
  OK(ts_verify_gpu(f, t, &u, &err));
  assert_int_equal(u.threads_per_block, 1024);
  assert_true(u.shared_bytes >= 4);
  ts_func_free(f);
  /* too many threads for the target */
  ts_target *small = NULL;
  OK(ts_target_parse("cuda -arch=sm_80 -max-threads-per-block=512", &small,
                     &err));
  OK(ts_func_parse(text, strlen(text), "g", &f, &err));
  assert_int_equal(ts_verify_gpu(f, small, &u, &err), TS_ESCHEDULE);
  assert_non_null(strstr(err.msg, "threads per block"));
  ts_func_free(f);
  /* too much shared memory */
  snprintf(text, sizeof text, gpu_prog, 256, 20000, 20000);
  OK(ts_func_parse(text, strlen(text), "g", &f, &err));
  assert_int_equal(ts_verify_gpu(f, t, &u, &err), TS_ESCHEDULE);
  assert_non_null(strstr(err.msg, "shared memory"));
  ts_func_free(f);
  ts_target_free(small);
  ts_target_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_probabilities),
      cmocka_unit_test(test_mutators),
      cmocka_unit_test(test_postprocessors),
      cmocka_unit_test(test_verify_gpu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
