/*
 * test_oom.c — out of memory is an error, not a crash. A 16x16x16 matmul
 * goes through the whole pipeline: from its spec to TIR, printed and
 * parsed back, scheduled (split, reorder, cache_write, the trace printed,
 * reverse_compute_at, decompose_reduction, parallel, unroll, vectorize),
 * lowered and built with the LLVM backend. The pipeline runs once to count
 * tessera's allocations K, then once for every N in 1..K with the N-th
 * allocation failing (tir/alloc.h's fault-injection hook): each run must
 * return TS_ENOMEM with "out of memory" in the message (never crash, never
 * succeed). Before and after the walk, with the hook off, the pipeline
 * succeeds with the same lowered function. LLVM's own allocations are not
 * hooked; the walk takes every allocation (no stride), about half a
 * second, three under the sanitizers. The walk itself, and the environment
 * variables that shorten it, are in oom_walk.h.
 */
#include "oom_walk.h"
#include "util.h"

/* The sched's message as the pipeline's error. */
static int sched_rc(int rc, const ts_sched *s, ts_error *err) {
  if (rc) *err = *ts_sched_error(s);
  return rc;
}

#define SCHED(x) STEP(sched_rc((x), s, err))

/* The stages of the pipeline, in order. */
enum {
  ST_CACHE_WRITE, /* spec, print, parse, split x3, reorder, cache_write,
                     the trace printed */
  ST_COMPUTE_AT,  /* reverse_compute_at */
  ST_DECOMPOSE,   /* decompose_reduction */
  ST_ANNOTATE,    /* parallel, unroll, vectorize */
  ST_LOWER,       /* ts_lower on its own */
  ST_BUILD,       /* ts_build with the LLVM backend (lowering again) */
  ST_N
};
static const char *const stage_names[ST_N] = {
    "cache_write", "compute_at", "decompose_reduction",
    "annotate",    "lower",      "build"};

/* The pipeline through stage `last` (ts_lower on its own only when it is
 * the last stage: the build lowers too). On success through ST_BUILD,
 * *lowered is the printed lowered function (malloc'd), else NULL. */
static int pipeline(const ts_target *t, int last, char **lowered,
                    ts_error *err) {
  int rc = TS_OK;
  ts_workload *w = NULL;
  ts_func *f = NULL, *low = NULL;
  ts_sched *s = NULL;
  char *text = NULL, *script = NULL;
  ts_build_result br = {0};
  ts_rv b, cw, init, l[3], i2[2], j2[2], k2[2];
  int n;
  *lowered = NULL;
  ts_error_clear(err);

  STEP(ts_workload_from_spec("matmul M=16 N=16 K=16 dtype=float32", &w, err));
  text = ts_func_print(w->func);
  if (!text) STEP(TS_ERR(err, TS_ENOMEM, "print: out of memory"));
  STEP(ts_func_parse(text, strlen(text), "matmul.tir", &f, err));
  STEP(ts_sched_create(f, 7, &s, err));
  SCHED(ts_sched_get_block(s, "C", &b));
  SCHED(ts_sched_get_loops(s, b, l, 3, &n));
  SCHED(ts_sched_split(s, l[0], (int64_t[]){TS_SPLIT_INFER, 4}, 2, i2));
  SCHED(ts_sched_split(s, l[1], (int64_t[]){TS_SPLIT_INFER, 8}, 2, j2));
  SCHED(ts_sched_split(s, l[2], (int64_t[]){TS_SPLIT_INFER, 4}, 2, k2));
  SCHED(ts_sched_reorder(s, (ts_rv[]){i2[0], j2[0], k2[0], i2[1], k2[1], j2[1]},
                         6));
  SCHED(ts_sched_cache_write(s, b, "C", "local", &cw));
  script = ts_trace_print(ts_sched_trace(s));
  if (!script) STEP(TS_ERR(err, TS_ENOMEM, "trace: out of memory"));
  if (last < ST_COMPUTE_AT) goto done;
  SCHED(ts_sched_reverse_compute_at(s, cw, j2[0]));
  if (last < ST_DECOMPOSE) goto done;
  SCHED(ts_sched_decompose_reduction(s, b, k2[0], &init));
  if (last < ST_ANNOTATE) goto done;
  SCHED(ts_sched_parallel(s, i2[0]));
  SCHED(ts_sched_unroll(s, k2[1]));
  SCHED(ts_sched_vectorize(s, j2[1]));
  if (last == ST_LOWER) {
    ts_lower_options lo = ts_lower_defaults();
    low = ts_lower(ts_sched_func(s), &lo, err);
    if (!low) STEP(err->code ? err->code : TS_EINTERNAL);
  }
  if (last < ST_BUILD) goto done;
  ts_build_options o = ts_build_defaults();
  o.keep_lowered = true;
  STEP(ts_build(ts_sched_func(s), t, &o, &br, err));
  if (!br.artifact || !br.artifact->n_bytes || !br.lowered)
    STEP(TS_ERR(err, TS_EINTERNAL, "build succeeded without a result"));
  *lowered = ts_func_print(br.lowered);
  if (!*lowered) STEP(TS_ERR(err, TS_ENOMEM, "print: out of memory"));
done:
  ts_build_result_clear(&br);
  ts_func_free(low);
  free(script);
  ts_sched_destroy(s);
  ts_func_free(f);
  free(text);
  ts_workload_free(w);
  return rc;
}

static int run(void *ctx, int last, char **out, ts_error *err) {
  return pipeline(ctx, last, out, err);
}

static void test_walk(void **state) {
  (void)state;
  ts_error err;
  ts_target *t = util_target(&err);
  assert_non_null(t);
  oom_walk w = {"pipeline", stage_names, ST_N, run, NULL, 1, false};
  oom_walk_run(&w, t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_walk),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
