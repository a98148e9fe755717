/*
 * test_trace.c — traces and sampling: the seeded generator (reference
 * values, splitting), deterministic sampling, the JSON form (lossless
 * round trip, malformed input named by field), replay with changed,
 * removed and illegal decisions, the readable script, dead-code
 * simplification, forking, and the shipped example trace for a 1024^3
 * fp32 matmul.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "util.h"

#include <math.h>

#define OK(x)                                                                  \
  do {                                                                         \
    int rc_ = (x);                                                             \
    if (rc_) fprintf(stderr, "%s: %s\n", #x, ts_sched_errmsg(s));              \
    assert_int_equal(rc_, TS_OK);                                              \
  } while (0)

/* ---- generator ---- */

static void test_rng_reference(void **state) {
  (void)state;
  ts_rng r;
  ts_rng_seed(&r, 0);
  /* SplitMix64's published first outputs for seed 0 */
  assert_true(ts_rng_next(&r) == 0xe220a8397b1dcdafull);
  assert_true(ts_rng_next(&r) == 0x6e789e6aa1b965f4ull);
  assert_true(ts_rng_next(&r) == 0x06c45d188009454full);
  /* splitting is deterministic and gives a different stream */
  ts_rng a, b;
  ts_rng_seed(&a, 42);
  ts_rng_seed(&b, 42);
  ts_rng ca = ts_rng_split(&a), cb = ts_rng_split(&b);
  assert_true(ca.state == cb.state);
  assert_true(ts_rng_next(&ca) != ts_rng_next(&a));
  /* below(n) stays in range and covers it */
  int seen[7] = {0};
  for (int i = 0; i < 7000; i++) {
    uint64_t x = ts_rng_below(&r, 7);
    assert_true(x < 7);
    seen[x]++;
  }
  for (int i = 0; i < 7; i++) assert_true(seen[i] > 800 && seen[i] < 1200);
  for (int i = 0; i < 1000; i++) {
    double u = ts_rng_unit(&r);
    assert_true(u >= 0 && u < 1);
  }
  assert_int_equal(ts_rng_below(&r, 1), 0);
}

/* A schedule with every sampling instruction. */
static ts_sched *sampled(uint64_t seed) {
  ts_workload *w;
  ts_error err;
  assert_int_equal(ts_workload_from_spec("conv2d_nhwc N=1 H=8 W=8 CI=4 CO=16 "
                                         "KH=3 KW=3 pad=1",
                                         &w, &err),
                   TS_OK);
  ts_sched *s;
  assert_int_equal(ts_sched_create(w->func, seed, &s, &err), TS_OK);
  ts_workload_free(w);
  ts_rv c, l[16], t[3], o[3], v, pad, loc;
  int n;
  OK(ts_sched_get_block(s, "conv", &c));
  OK(ts_sched_get_loops(s, c, l, 16, &n));
  OK(ts_sched_sample_perfect_tile(s, l[3], 3, 4, t));
  OK(ts_sched_split_rv(s, l[3], t, 3, o));
  int64_t cand[4] = {0, 16, 64, 512};
  double probs[4] = {0.1, 0.2, 0.3, 0.4};
  OK(ts_sched_sample_categorical(s, cand, probs, 4, &v));
  OK(ts_sched_annotate_rv(s, l[1], TS_ANN_AUTO_UNROLL_MAX_STEP, v));
  OK(ts_sched_get_block(s, "pad", &pad));
  OK(ts_sched_sample_compute_location(s, pad, &loc));
  OK(ts_sched_compute_at(s, pad, loc));
  return s;
}

static void test_sampling_deterministic(void **state) {
  (void)state;
  ts_sched *a = sampled(1234), *b = sampled(1234);
  char *ta = ts_trace_to_json(ts_sched_trace(a));
  char *tb = ts_trace_to_json(ts_sched_trace(b));
  assert_string_equal(ta, tb);
  char *pa = util_print(a), *pb = util_print(b);
  assert_string_equal(pa, pb);
  /* other seeds give other decisions */
  int differ = 0;
  for (uint64_t seed = 1; seed <= 8; seed++) {
    ts_sched *c = sampled(seed);
    char *tc = ts_trace_to_json(ts_sched_trace(c));
    if (strcmp(tc, ta) != 0) differ++;
    assert_int_equal(util_verify(c, 2), TS_OK);
    free(tc);
    ts_sched_destroy(c);
  }
  assert_true(differ >= 6);
  free(ta);
  free(tb);
  free(pa);
  free(pb);
  ts_sched_destroy(a);
  ts_sched_destroy(b);
}

static void test_perfect_tile_distribution(void **state) {
  (void)state;
  ts_sched *s = util_sched("matmul M=64 N=8 K=8");
  ts_rv c, l[3], t[3];
  int n, inner_counts[9] = {0};
  OK(ts_sched_get_block(s, "C", &c));
  OK(ts_sched_get_loops(s, c, l, 3, &n));
  for (int i = 0; i < 400; i++) {
    OK(ts_sched_sample_perfect_tile(s, l[0], 3, 8, t));
    int64_t p = 1;
    for (int k = 0; k < 3; k++) p *= ts_sched_rv_int(s, t[k]);
    assert_int_equal(p, 64);
    int64_t inner = ts_sched_rv_int(s, t[2]);
    assert_true(inner >= 1 && inner <= 8);
    inner_counts[inner]++;
  }
  /* innermost: divisors 1, 2, 4, 8 drawn uniformly */
  assert_true(inner_counts[1] > 50 && inner_counts[2] > 50 &&
              inner_counts[4] > 50 && inner_counts[8] > 50);
  ts_sched_destroy(s);
}

/* ---- JSON and replay ---- */

static void test_json_round_trip(void **state) {
  (void)state;
  ts_sched *s = sampled(7);
  ts_rv b;
  OK(ts_sched_get_block(s, "conv", &b));
  OK(ts_sched_annotate(s, b, ts_ann_float("f", 2.0)));
  OK(ts_sched_annotate(s, b, ts_ann_string("s", "a \"b\"\n\\c")));
  OK(ts_sched_annotate(s, b, ts_ann_int("i", -3)));
  char *j1 = ts_trace_to_json(ts_sched_trace(s));
  ts_trace *t;
  ts_error err;
  assert_int_equal(ts_trace_from_json(j1, strlen(j1), &t, &err), TS_OK);
  char *j2 = ts_trace_to_json(t);
  assert_string_equal(j1, j2);
  char *p1 = ts_trace_print(ts_sched_trace(s)), *p2 = ts_trace_print(t);
  assert_string_equal(p1, p2);
  assert_non_null(strstr(p1, "value=2.0)"));
  /* replay reproduces the function exactly, float annotation included */
  ts_sched *r;
  assert_int_equal(ts_trace_apply(t, ts_sched_original(s), 0, &r, &err), TS_OK);
  char *f1 = util_print(s), *f2 = util_print(r);
  assert_string_equal(f1, f2);
  assert_non_null(strstr(f1, "\"f\": 2.0"));
  free(j1);
  free(j2);
  free(p1);
  free(p2);
  free(f1);
  free(f2);
  ts_trace_free(t);
  ts_sched_destroy(r);
  ts_sched_destroy(s);
}

static void test_replay_decisions(void **state) {
  (void)state;
  ts_sched *s = sampled(3);
  const ts_trace *t = ts_sched_trace(s);
  int tile = -1, cat = -1, loc = -1;
  for (int i = 0; i < ts_trace_n_insts(t); i++) {
    ts_instr_kind k = ts_trace_inst_kind(t, i);
    if (k == TS_INSTR_SAMPLE_PERFECT_TILE) tile = i;
    if (k == TS_INSTR_SAMPLE_CATEGORICAL) cat = i;
    if (k == TS_INSTR_SAMPLE_COMPUTE_LOCATION) loc = i;
    assert_int_equal(ts_trace_inst_is_sampling(t, i),
                     k == TS_INSTR_SAMPLE_PERFECT_TILE ||
                         k == TS_INSTR_SAMPLE_CATEGORICAL ||
                         k == TS_INSTR_SAMPLE_COMPUTE_LOCATION);
  }
  assert_true(tile >= 0 && cat >= 0 && loc >= 0);
  int64_t d[4];
  assert_int_equal(ts_trace_decision(t, tile, d, 4), 3);
  assert_int_equal(d[0] * d[1] * d[2], 16);
  assert_int_equal(ts_trace_decision(t, 0, d, 4), -1);
  ts_error err;
  /* a different legal tiling and categorical choice */
  ts_trace *m = ts_trace_copy(t);
  int64_t tiles[3] = {2, 2, 4}, pick = 3, root = -1;
  assert_int_equal(ts_trace_set_decision(m, tile, tiles, 3, &err), TS_OK);
  assert_int_equal(ts_trace_set_decision(m, cat, &pick, 1, &err), TS_OK);
  assert_int_equal(ts_trace_set_decision(m, loc, &root, 1, &err), TS_OK);
  ts_sched *r;
  assert_int_equal(ts_trace_apply(m, ts_sched_original(s), 0, &r, &err), TS_OK);
  char *txt = util_print(r);
  assert_non_null(strstr(txt, "range(2)"));
  assert_non_null(strstr(txt, "\"pragma_auto_unroll_max_step\": 512"));
  assert_int_equal(util_verify(r, 2), TS_OK);
  free(txt);
  ts_sched_destroy(r);
  /* illegal decisions fail cleanly, naming the instruction */
  int64_t bad[3] = {4, 4, 2};
  assert_int_equal(ts_trace_set_decision(m, tile, bad, 3, &err), TS_OK);
  r = (ts_sched *)1;
  assert_int_equal(ts_trace_apply(m, ts_sched_original(s), 0, &r, &err),
                   TS_ESCHEDULE);
  assert_null(r);
  assert_non_null(strstr(err.msg, "replay: instruction"));
  assert_non_null(strstr(err.msg, "sample_perfect_tile"));
  int64_t bad_loc = 1000;
  assert_int_equal(ts_trace_set_decision(m, tile, tiles, 3, &err), TS_OK);
  assert_int_equal(ts_trace_set_decision(m, loc, &bad_loc, 1, &err), TS_OK);
  assert_int_equal(ts_trace_apply(m, ts_sched_original(s), 0, &r, &err),
                   TS_ESCHEDULE);
  assert_non_null(strstr(err.msg, "sample_compute_location: decision 1000"));
  int64_t bad_cat = 9;
  assert_int_equal(ts_trace_set_decision(m, loc, &root, 1, &err), TS_OK);
  assert_int_equal(ts_trace_set_decision(m, cat, &bad_cat, 1, &err), TS_OK);
  assert_int_equal(ts_trace_apply(m, ts_sched_original(s), 0, &r, &err),
                   TS_ESCHEDULE);
  /* removed decisions are sampled afresh from the seed */
  assert_int_equal(ts_trace_set_decision(m, cat, NULL, -1, &err), TS_OK);
  assert_int_equal(ts_trace_set_decision(m, tile, NULL, -1, &err), TS_OK);
  assert_int_equal(ts_trace_apply(m, ts_sched_original(s), 77, &r, &err),
                   TS_OK);
  assert_true(ts_trace_decision(ts_sched_trace(r), tile, d, 4) == 3);
  assert_int_equal(util_verify(r, 2), TS_OK);
  ts_sched_destroy(r);
  /* only sampling instructions take decisions */
  assert_int_equal(ts_trace_set_decision(m, 0, d, 1, &err), TS_EINVAL);
  assert_int_equal(ts_trace_set_decision(m, cat, d, 2, &err), TS_EINVAL);
  ts_trace_free(m);
  ts_sched_destroy(s);
}

static void test_fork(void **state) {
  (void)state;
  ts_sched *s = sampled(11), *f;
  ts_error err;
  assert_int_equal(ts_sched_fork(s, 5, &f, &err), TS_OK);
  char *a = util_print(s), *b = util_print(f);
  assert_string_equal(a, b);
  /* handles carry over: the block RV of "conv" is valid in the fork */
  assert_string_equal(ts_sched_rv_block_name(f, 0), "conv");
  char *ja = ts_trace_to_json(ts_sched_trace(s));
  char *jb = ts_trace_to_json(ts_sched_trace(f));
  assert_string_equal(ja, jb);
  free(a);
  free(b);
  free(ja);
  free(jb);
  ts_sched_destroy(f);
  ts_sched_destroy(s);
}

/* ---- malformed JSON ---- */

static void bad_json(const char *text, int code, const char *needle) {
  ts_trace *t = (ts_trace *)1;
  ts_error err;
  int rc = ts_trace_from_json(text, strlen(text), &t, &err);
  if (rc != code || !strstr(err.msg, needle))
    fprintf(stderr, "for %s\n got %d '%s'\n", text, rc, err.msg);
  assert_int_equal(rc, code);
  assert_null(t);
  assert_non_null(strstr(err.msg, needle));
}

static void test_malformed_json(void **state) {
  (void)state;
  bad_json("{\"version\": 1, \"instructions\": [", TS_EPARSE,
           "malformed JSON at line 1");
  bad_json("[]", TS_EPARSE, "not an object");
  bad_json("{\"instructions\": []}", TS_EPARSE, "\"version\" is missing");
  bad_json("{\"version\": 2, \"instructions\": []}", TS_EPARSE,
           "unsupported version 2");
  bad_json("{\"version\": 1}", TS_EPARSE, "\"instructions\" is missing");
  bad_json("{\"version\": 1, \"instructions\": [{\"kind\": \"spilt\", "
           "\"inputs\": [], \"attrs\": [], \"outputs\": []}]}",
           TS_EPARSE, "instruction 0: unknown kind 'spilt'");
  bad_json("{\"version\": 1, \"instructions\": [{\"kind\": \"get_block\", "
           "\"inputs\": [], \"attrs\": [\"C\"], \"outputs\": []}]}",
           TS_EPARSE, "expected 1 outputs, got 0");
  bad_json("{\"version\": 1, \"instructions\": [{\"kind\": \"get_block\", "
           "\"inputs\": [], \"attrs\": [\"C\"], \"outputs\": [\"b0\"]}, "
           "{\"kind\": \"get_loops\", \"inputs\": [\"b9\"], \"attrs\": [], "
           "\"outputs\": [\"l1\"]}]}",
           TS_EPARSE, "'b9' is not defined by an earlier instruction");
  bad_json("{\"version\": 1, \"instructions\": [{\"kind\": \"get_block\", "
           "\"inputs\": [], \"attrs\": [\"C\"], \"outputs\": [\"b0\"]}, "
           "{\"kind\": \"get_block\", \"inputs\": [], \"attrs\": [\"C\"], "
           "\"outputs\": [\"b0\"]}]}",
           TS_EPARSE, "'b0' is defined twice");
  /* outputs written before inputs: an instruction cannot use its own
   * result, nor define one name twice in its own list */
  bad_json("{\"version\": 1, \"instructions\": [{\"kind\": \"get_loops\", "
           "\"outputs\": [\"x\"], \"inputs\": [\"x\"], \"attrs\": []}]}",
           TS_EPARSE, "'x' is not defined by an earlier instruction");
  bad_json("{\"version\": 1, \"instructions\": [{\"kind\": \"get_block\", "
           "\"inputs\": [], \"attrs\": [\"C\"], \"outputs\": [\"b0\"]}, "
           "{\"kind\": \"get_loops\", \"inputs\": [\"b0\"], \"attrs\": [], "
           "\"outputs\": [\"l0\", \"l0\"]}]}",
           TS_EPARSE, "'l0' is defined twice");
  bad_json("{\"version\": 1, \"instructions\": [{\"kind\": \"parallel\", "
           "\"inputs\": [], \"attrs\": [], \"outputs\": []}]}",
           TS_EPARSE, "expected 1 inputs, got 0");
  bad_json("{\"version\": 1, \"instructions\": [{\"kind\": \"get_block\", "
           "\"inputs\": [], \"attrs\": [], \"outputs\": [\"b0\"]}]}",
           TS_EPARSE, "expected 1 attrs, got 0");
  bad_json("{\"version\": 1, \"instructions\": [{\"kind\": \"get_block\", "
           "\"inputs\": [], \"attrs\": [\"C\"], \"outputs\": [\"b0\"]}], "
           "\"decisions\": [[0, 1]]}",
           TS_EPARSE, "not a sampling instruction");
  bad_json("{\"version\": 1, \"instructions\": [{\"kind\": \"get_block\", "
           "\"inputs\": [], \"attrs\": [\"C\"], \"outputs\": [\"b0\"]}, "
           "{\"kind\": \"get_loops\", \"inputs\": [\"b0\"], \"attrs\": [], "
           "\"outputs\": [\"l1\"]}, {\"kind\": \"sample_perfect_tile\", "
           "\"inputs\": [\"l1\"], \"attrs\": [2, 4], \"outputs\": [\"v2\", "
           "\"v3\"]}], \"decisions\": [[2, 4]]}",
           TS_EPARSE, "takes a list of integers");
  bad_json("{\"version\": 1, \"instructions\": [{\"kind\": \"split\", "
           "\"inputs\": [1.5], \"attrs\": [], \"outputs\": []}]}",
           TS_EPARSE, "a number input must be an integer");
  bad_json("{\"version\": 1, \"instructions\": [{\"kind\": \"parallel\", "
           "\"inputs\": [{}], \"attrs\": [], \"outputs\": []}]}",
           TS_EPARSE, "expected a handle name, an integer or null");
  bad_json("{\"version\": 1, \"instructions\": [7]}", TS_EPARSE,
           "instruction 0 is not an object");
  /* well-formed JSON that names wrong things fails at replay */
  const char *wrong = "{\"version\": 1, \"instructions\": [{\"kind\": "
                      "\"get_block\", \"inputs\": [], \"attrs\": [\"nope\"], "
                      "\"outputs\": [\"b0\"]}]}";
  ts_trace *t;
  ts_error err;
  assert_int_equal(ts_trace_from_json(wrong, strlen(wrong), &t, &err), TS_OK);
  ts_workload *w;
  assert_int_equal(ts_workload_from_spec("matmul M=4 N=4 K=4", &w, &err),
                   TS_OK);
  ts_sched *s = (ts_sched *)1;
  assert_int_equal(ts_trace_apply(t, w->func, 0, &s, &err), TS_ENOTFOUND);
  assert_null(s);
  assert_non_null(strstr(err.msg, "instruction 0 (get_block)"));
  const char *typed = "{\"version\": 1, \"instructions\": [{\"kind\": "
                      "\"get_block\", \"inputs\": [], \"attrs\": [\"C\"], "
                      "\"outputs\": [\"b0\"]}, {\"kind\": \"parallel\", "
                      "\"inputs\": [\"b0\"], \"attrs\": [], \"outputs\": "
                      "[]}]}";
  ts_trace_free(t);
  assert_int_equal(ts_trace_from_json(typed, strlen(typed), &t, &err), TS_OK);
  assert_int_equal(ts_trace_apply(t, w->func, 0, &s, &err), TS_EINVAL);
  assert_non_null(strstr(err.msg, "is not a loop handle"));
  ts_trace_free(t);
  ts_workload_free(w);
  assert_int_equal(ts_trace_from_json_file("/nonexistent/trace.json", &t, &err),
                   TS_EIO);
}

/* Random edits of a valid trace's JSON: parsing and replay must answer
 * with a result or an error, never crash (the sanitizer build checks
 * memory errors). */
static void test_json_mutations(void **state) {
  (void)state;
  ts_sched *s = sampled(21);
  ts_rv b, c, l[16], o[2], x;
  int n;
  OK(ts_sched_get_block(s, "conv", &c));
  OK(ts_sched_get_loops(s, c, l, 16, &n));
  int64_t f[2] = {TS_SPLIT_INFER, 2};
  OK(ts_sched_split(s, l[1], f, 2, o));
  OK(ts_sched_cache_write(s, c, "conv", "local", &x));
  OK(ts_sched_get_block(s, "pad", &b));
  OK(ts_sched_annotate(s, b, ts_ann_string("k", "v")));
  char *json = ts_trace_to_json(ts_sched_trace(s));
  size_t len = strlen(json);
  static const char *const pieces[] = {
      "0", "-1", "99999999999", "null",   "\"", "[",  "]",   "{",
      "}", ",",  "1.5",         "\"l1\"", "",   "b0", "true"};
  ts_rng r;
  ts_rng_seed(&r, 3);
  int parsed = 0, applied = 0, iters = 400;
  const char *env = getenv("TS_MUTATIONS");
  if (env && atoi(env) > 0) iters = atoi(env);
  for (int iter = 0; iter < iters; iter++) {
    char *m = malloc(len + 64);
    size_t at = (size_t)ts_rng_below(&r, len);
    size_t cut = (size_t)ts_rng_below(&r, 4);
    if (at + cut > len) cut = len - at;
    const char *piece = pieces[ts_rng_below(&r, 15)];
    size_t pl = strlen(piece);
    memcpy(m, json, at);
    memcpy(m + at, piece, pl);
    memcpy(m + at + pl, json + at + cut, len - at - cut);
    size_t mlen = len - cut + pl;
    m[mlen] = 0;
    ts_trace *t;
    ts_error err;
    if (ts_trace_from_json(m, mlen, &t, &err) == TS_OK) {
      parsed++;
      ts_sched *again;
      if (ts_trace_apply(t, ts_sched_original(s), 1, &again, &err) == TS_OK) {
        applied++;
        assert_int_equal(ts_func_verify(ts_sched_func(again), NULL), TS_OK);
        ts_sched_destroy(again);
      } else {
        assert_true(err.msg[0] != 0);
      }
      char *back = ts_trace_to_json(t);
      free(back);
      ts_trace_free(t);
    } else {
      assert_true(err.msg[0] != 0);
    }
    free(m);
  }
  printf("mutated traces: %d parsed, %d replayed\n", parsed, applied);
  free(json);
  ts_sched_destroy(s);
}

/* ---- script and simplification ---- */

static void test_print_and_simplify(void **state) {
  (void)state;
  ts_sched *s = util_sched("matmul M=8 N=8 K=8");
  ts_rv c, d, l[3], t[2], o[2], v, x;
  int n;
  OK(ts_sched_get_block(s, "C", &c));
  OK(ts_sched_get_block(s, "C", &d));     /* dead */
  OK(ts_sched_get_loops(s, d, l, 3, &n)); /* dead */
  OK(ts_sched_get_loops(s, c, l, 3, &n));
  OK(ts_sched_sample_perfect_tile(s, l[2], 2, 4, t)); /* dead */
  int64_t cand[2] = {1, 2};
  double probs[2] = {1, 0};
  OK(ts_sched_sample_categorical(s, cand, probs, 2, &v)); /* dead */
  int64_t f[2] = {TS_SPLIT_INFER, 4};
  OK(ts_sched_split(s, l[0], f, 2, o));
  OK(ts_sched_vectorize(s, l[1]));
  OK(ts_sched_get_block(s, "C", &x)); /* dead */
  char *script = ts_trace_print(ts_sched_trace(s));
  const char *want =
      "b0 = get_block(name=\"C\")\n"
      "b1 = get_block(name=\"C\")\n"
      "l2, l3, l4 = get_loops(block=b1)\n"
      "l5, l6, l7 = get_loops(block=b0)\n"
      "v8, v9 = sample_perfect_tile(loop=l7, n=2, max_innermost_factor=4, "
      "decision=[";
  assert_memory_equal(script, want, strlen(want));
  assert_non_null(strstr(script, "v10 = sample_categorical(candidates=[1, 2], "
                                 "probs=[1.0, 0.0], decision=0)\n"));
  assert_non_null(strstr(script, "l11, l12 = split(loop=l5, factors=[None, "
                                 "4])\nvectorize(loop=l6)\nb13 = "
                                 "get_block(name=\"C\")\n"));
  ts_trace *simple = ts_trace_simplify(ts_sched_trace(s));
  char *ss = ts_trace_print(simple);
  assert_string_equal(ss, "b0 = get_block(name=\"C\")\n"
                          "l1, l2, l3 = get_loops(block=b0)\n"
                          "l4, l5 = split(loop=l1, factors=[None, 4])\n"
                          "vectorize(loop=l2)\n");
  ts_sched *r;
  ts_error err;
  assert_int_equal(ts_trace_apply(simple, ts_sched_original(s), 0, &r, &err),
                   TS_OK);
  char *a = util_print(s), *b = util_print(r);
  assert_string_equal(a, b);
  free(a);
  free(b);
  free(ss);
  free(script);
  ts_trace_free(simple);
  ts_sched_destroy(r);
  ts_sched_destroy(s);
}

/* ---- the shipped example ---- */

static void test_example_matmul(void **state) {
  (void)state;
  char path[512];
  snprintf(path, sizeof path, "%s/docs/examples/matmul_fp32_cpu.json",
           TS_SOURCE_DIR);
  ts_trace *t;
  ts_error err;
  int rc = ts_trace_from_json_file(path, &t, &err);
  if (rc) fprintf(stderr, "%s\n", err.msg);
  assert_int_equal(rc, TS_OK);
  ts_workload *w;
  assert_int_equal(
      ts_workload_from_spec("matmul M=1024 N=1024 K=1024", &w, &err), TS_OK);
  ts_sched *s;
  rc = ts_trace_apply(t, w->func, 0, &s, &err);
  if (rc) fprintf(stderr, "%s\n", err.msg);
  assert_int_equal(rc, TS_OK);
  assert_int_equal(ts_func_verify(ts_sched_func(s), &err), TS_OK);
  char *txt = util_print(s);
  assert_non_null(strstr(txt, "parallel"));
  assert_non_null(strstr(txt, "vectorized"));
  free(txt);
  /* compile, run on 2 threads, spot-check outputs in double precision */
  ts_target *host;
  assert_int_equal(ts_target_host(&host, &err), TS_OK);
  ts_build_result br;
  ts_build_options o = ts_build_defaults();
  assert_int_equal(ts_build(ts_sched_func(s), host, &o, &br, &err), TS_OK);
  ts_rt_kernel *k;
  assert_int_equal(ts_rt_kernel_load(br.artifact->bytes, br.artifact->n_bytes,
                                     br.artifact->entry, &k, &err),
                   TS_OK);
  ts_runtime *rt;
  assert_int_equal(ts_runtime_create(2, &rt, &err), TS_OK);
  ts_rt_arg_spec *specs = util_specs(w->func);
  ts_rt_args *args;
  assert_int_equal(ts_rt_args_create(specs, 3, 9, &args, &err), TS_OK);
  assert_int_equal(ts_rt_kernel_call(k, ts_rt_args_data(args), rt, &err),
                   TS_OK);
  const float *A = ts_rt_args_data(args)[0], *B = ts_rt_args_data(args)[1],
              *C = ts_rt_args_data(args)[2];
  ts_rng r;
  ts_rng_seed(&r, 5);
  for (int probe = 0; probe < 256; probe++) {
    int i = (int)ts_rng_below(&r, 1024), j = (int)ts_rng_below(&r, 1024);
    if (probe < 4) i = probe == 0 || probe == 2 ? 0 : 1023;
    if (probe < 4) j = probe < 2 ? 0 : 1023;
    double want = 0;
    for (int kk = 0; kk < 1024; kk++)
      want += (double)A[i * 1024 + kk] * (double)B[kk * 1024 + j];
    assert_true(fabs(C[i * 1024 + j] - want) <= 1e-3 + 1e-4 * fabs(want));
  }
  ts_rt_args_free(args);
  free(specs);
  ts_runtime_destroy(rt);
  ts_rt_kernel_unload(k);
  ts_build_result_clear(&br);
  ts_target_free(host);
  ts_sched_destroy(s);
  ts_workload_free(w);
  ts_trace_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rng_reference),
      cmocka_unit_test(test_sampling_deterministic),
      cmocka_unit_test(test_perfect_tile_distribution),
      cmocka_unit_test(test_json_round_trip),
      cmocka_unit_test(test_replay_decisions),
      cmocka_unit_test(test_fork),
      cmocka_unit_test(test_malformed_json),
      cmocka_unit_test(test_json_mutations),
      cmocka_unit_test(test_print_and_simplify),
      cmocka_unit_test(test_example_matmul),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
