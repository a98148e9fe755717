/*
 * test_property.c — the property test of the schedule module: random
 * sequences of primitives with random (and sampled) arguments over the
 * operator library. Every primitive that refuses must leave the schedule
 * printing exactly as before; every schedule with at least one successful
 * primitive is a "legal schedule" whose compiled output (2 threads) must
 * equal the unscheduled function's interpreted output, and whose trace must
 * replay through JSON to the same printed function. Seeds of failures are
 * printed so a case can be replayed alone:
 *   TS_PROPERTY_SEED=<seed> schedule_test_property
 * The count comes from TS_PROPERTY_COUNT (default 500; 150 under the
 * sanitizers, which are much slower); TS_PROPERTY_FIRST_SEED moves the
 * seed range (default 1) to explore further. Code is compiled for the host,
 * or for TS_TEST_TARGET (ctest runs a reduced count for `x86-64` and
 * `x86-64-v3` too; skipped where this CPU cannot run that code).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "util.h"

#include <time.h>

#if defined(__SANITIZE_ADDRESS__)
#define DEFAULT_COUNT 150
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DEFAULT_COUNT 150
#endif
#endif
#ifndef DEFAULT_COUNT
#define DEFAULT_COUNT 500
#endif

static const char *const workloads[] = {
    "matmul M=12 N=20 K=8",
    "matmul M=8 N=8 K=16 transpose_b=1",
    "matmul M=6 N=10 K=12 dtype=bfloat16",
    "batch_matmul B=2 M=6 N=8 K=4",
    "dense M=6 N=10 K=8",
    "dense M=4 N=12 K=6 dtype=int8",
    "conv2d_nhwc N=1 H=6 W=6 CI=4 CO=8 KH=3 KW=3 pad=1",
    "conv2d_nchw N=1 H=7 W=7 CI=3 CO=4 KH=3 KW=3 stride=2 pad=1",
    "depthwise_conv2d_nhwc N=1 H=6 W=6 C=8 KH=3 KW=3 pad=1",
    "pool2d_nhwc N=1 H=6 W=6 C=4 KH=3 KW=3 pad=1 kind=avg",
    "pool2d_nhwc N=1 H=8 W=8 C=3 KH=2 KW=2 stride=2 kind=max",
    "softmax N=4 D=12",
    "layer_norm N=3 D=16",
    "reduce op=sum N=5 D=24",
    "reduce op=max N=4 D=10",
    "elementwise op=relu shape=6x10",
    "elementwise op=add shape=4x6x5",
    "transpose shape=6x4x5 perm=2x0x1",
    "pad shape=5x6 before=1x2 after=2x1",
    "conv2d_transpose_nchw N=1 H=4 W=4 CI=3 CO=4 KH=3 KW=3 stride=2 pad=1",
};
#define N_WORKLOADS ((int)(sizeof workloads / sizeof workloads[0]))

typedef struct gen {
  ts_rng rng;
  ts_sched *s;
} gen;

static int pick(gen *g, int n) {
  return n <= 0 ? 0 : (int)ts_rng_below(&g->rng, (uint64_t)n);
}

/* A random block of the schedule (not the root); false when none. */
static bool random_block(gen *g, ts_rv *out, char *name, size_t cap) {
  int n;
  ts_stmt **all = ts_func_blocks(ts_sched_func(g->s), &n);
  if (n <= 1) {
    free(all);
    return false;
  }
  const char *bn = ts_block_name(ts_realize_block(all[1 + pick(g, n - 1)]));
  snprintf(name, cap, "%s", bn);
  free(all);
  return ts_sched_get_block(g->s, name, out) == TS_OK;
}

/* The loops of a random block. */
static int random_loops(gen *g, ts_rv *block, ts_rv *loops, int cap) {
  char name[128];
  int n = 0;
  if (!random_block(g, block, name, sizeof name)) return 0;
  if (ts_sched_get_loops(g->s, *block, loops, cap, &n)) return 0;
  return n;
}

/* A buffer name the block reads (write=false) or writes. */
static const char *random_buffer(gen *g, const char *block, bool write) {
  ts_stmt *r = ts_func_find_block(ts_sched_func(g->s), block);
  if (!r) return NULL;
  const ts_block *b = ts_realize_block(r);
  int n = write ? ts_block_n_writes(b) : ts_block_n_reads(b);
  if (n == 0) return NULL;
  int i = pick(g, n);
  return ts_buffer_name(write ? ts_block_write(b, i)->buffer
                              : ts_block_read(b, i)->buffer);
}

/* Index maps for transform_layout, by buffer rank. */
static const char *const index_maps[5][3] = {
    {"() -> (0)", "() -> (0, 0)", "() -> (1)"},
    {"(i) -> (floordiv(i, 4), floormod(i, 4))", "(i) -> (i * 2)",
     "(i) -> (0, i)"},
    {"(i, j) -> (j, i)", "(i, j) -> (floordiv(j, 2), i, floormod(j, 2))",
     "(i, j) -> (i * 2 + 1, j)"},
    {"(a, b, c) -> (c, a, b)", "(a, b, c) -> (a, b * 2 + c, c)",
     "(a, b, c) -> (b, floordiv(c, 2), a, floormod(c, 2))"},
    {"(a, b, c, d) -> (a, d, b, c)", "(a, b, c, d) -> (a, b, c, d)",
     "(a, b, c, d) -> (floordiv(d, 4), a, b, c, floormod(d, 4))"},
};

/* The rank of the buffer named `name` accessed by block `block`. */
static int buffer_rank(gen *g, const char *block, const char *name) {
  const ts_block *b =
      ts_realize_block(ts_func_find_block(ts_sched_func(g->s), block));
  for (int i = 0; i < ts_block_n_reads(b); i++)
    if (strcmp(ts_buffer_name(ts_block_read(b, i)->buffer), name) == 0)
      return ts_buffer_ndim(ts_block_read(b, i)->buffer);
  for (int i = 0; i < ts_block_n_writes(b); i++)
    if (strcmp(ts_buffer_name(ts_block_write(b, i)->buffer), name) == 0)
      return ts_buffer_ndim(ts_block_write(b, i)->buffer);
  return 0;
}

#define SKIP 1 /* nothing to try */

/* One random primitive; returns its status. */
static int random_step(gen *g) {
  ts_sched *s = g->s;
  ts_rv b, loops[32], out[8], x;
  char name[128];
  int n;
  switch (pick(g, 26)) {
  case 0:
  case 1:
  case 2: { /* split, literal or sampled factors */
    if (!(n = random_loops(g, &b, loops, 32))) return SKIP;
    ts_rv l = loops[pick(g, n)];
    int parts = 2 + pick(g, 2);
    if (pick(g, 2)) {
      /* sampled: a perfect tile, or one that need not divide the extent */
      ts_rv f[4];
      int rc = pick(g, 2) ? ts_sched_sample_perfect_tile(s, l, parts,
                                                         1 + pick(g, 8), f)
                          : ts_sched_sample_tile(s, l, parts, 1 + pick(g, 8),
                                                 1 + pick(g, 4), f);
      if (rc) return rc;
      if (pick(g, 4) == 0) f[0] = TS_RV_NONE;
      return ts_sched_split_rv(s, l, f, parts, out);
    }
    int64_t f[4];
    for (int i = 0; i < parts; i++) f[i] = 1 + pick(g, 5);
    f[pick(g, parts)] = TS_SPLIT_INFER;
    return ts_sched_split(s, l, f, parts, out);
  }
  case 3: { /* fuse two or three adjacent loops */
    if ((n = random_loops(g, &b, loops, 32)) < 2) return SKIP;
    int k = 2 + pick(g, n >= 3 ? 2 : 1);
    int at = pick(g, n - k + 1);
    return ts_sched_fuse(s, loops + at, k, &x);
  }
  case 4:
  case 5: { /* reorder a random subset */
    if ((n = random_loops(g, &b, loops, 32)) < 2) return SKIP;
    ts_rv sub[32];
    int m = 0;
    for (int i = 0; i < n; i++)
      if (pick(g, 2)) sub[m++] = loops[i];
    for (int i = m - 1; i > 0; i--) {
      int j = pick(g, i + 1);
      ts_rv t = sub[i];
      sub[i] = sub[j];
      sub[j] = t;
    }
    return ts_sched_reorder(s, sub, m);
  }
  case 6:
    if (!(n = random_loops(g, &b, loops, 32))) return SKIP;
    return ts_sched_parallel(s, loops[pick(g, n)]);
  case 7:
    if (!(n = random_loops(g, &b, loops, 32))) return SKIP;
    return ts_sched_vectorize(s, loops[pick(g, n)]);
  case 8:
    if (!(n = random_loops(g, &b, loops, 32))) return SKIP;
    return ts_sched_unroll(s, loops[pick(g, n)]);
  case 9: { /* annotate with a sampled unroll step */
    if (!(n = random_loops(g, &b, loops, 32))) return SKIP;
    int64_t cand[3] = {0, 16, 64};
    double probs[3] = {1, 1, 1};
    int rc = ts_sched_sample_categorical(s, cand, probs, 3, &x);
    if (rc) return rc;
    return ts_sched_annotate_rv(s, loops[pick(g, n)],
                                TS_ANN_AUTO_UNROLL_MAX_STEP, x);
  }
  case 10:
  case 11: { /* compute_at at a sampled location */
    if (!random_block(g, &b, name, sizeof name)) return SKIP;
    int rc = ts_sched_sample_compute_location(s, b, &x);
    if (rc) return rc;
    return ts_sched_compute_at(s, b, x);
  }
  case 12: { /* compute_at / reverse_compute_at at any loop */
    ts_rv c;
    if (!random_block(g, &b, name, sizeof name)) return SKIP;
    if (!(n = random_loops(g, &c, loops, 32))) return SKIP;
    if (pick(g, 2)) return ts_sched_compute_at(s, b, loops[pick(g, n)]);
    return ts_sched_reverse_compute_at(s, b, loops[pick(g, n)]);
  }
  case 13:
    if (!random_block(g, &b, name, sizeof name)) return SKIP;
    return ts_sched_compute_inline(s, b);
  case 14:
    if (!random_block(g, &b, name, sizeof name)) return SKIP;
    return ts_sched_reverse_compute_inline(s, b);
  case 15: {
    if (!random_block(g, &b, name, sizeof name)) return SKIP;
    const char *buf = random_buffer(g, name, false);
    if (!buf) return SKIP;
    char copy[128];
    snprintf(copy, sizeof copy, "%s", buf);
    return ts_sched_cache_read(s, b, copy, pick(g, 2) ? "global" : "local", &x);
  }
  case 16: {
    if (!random_block(g, &b, name, sizeof name)) return SKIP;
    const char *buf = random_buffer(g, name, true);
    if (!buf) return SKIP;
    char copy[128];
    snprintf(copy, sizeof copy, "%s", buf);
    return ts_sched_cache_write(s, b, copy, pick(g, 2) ? "global" : "local",
                                &x);
  }
  case 17: {
    if (!random_block(g, &b, name, sizeof name)) return SKIP;
    const char *buf = random_buffer(g, name, true);
    if (!buf) return SKIP;
    char copy[128];
    snprintf(copy, sizeof copy, "%s", buf);
    if (pick(g, 2))
      return ts_sched_storage_align(s, b, copy, pick(g, 2), 4 + pick(g, 5),
                                    pick(g, 3));
    return ts_sched_set_scope(s, b, copy, pick(g, 2) ? "local" : "global");
  }
  case 18: {
    if (!random_block(g, &b, name, sizeof name)) return SKIP;
    const char *buf = random_buffer(g, name, pick(g, 2));
    if (!buf) return SKIP;
    char copy[128];
    snprintf(copy, sizeof copy, "%s", buf);
    int rank = buffer_rank(g, name, copy);
    if (rank > 4) return SKIP;
    return ts_sched_transform_layout(s, b, copy, index_maps[rank][pick(g, 3)]);
  }
  case 19:
    if (!(n = random_loops(g, &b, loops, 32))) return SKIP;
    return ts_sched_decompose_reduction(s, b, loops[pick(g, n)], &x);
  case 20:
    if (!(n = random_loops(g, &b, loops, 32))) return SKIP;
    return ts_sched_rfactor(s, loops[pick(g, n)], pick(g, 2), &x);
  case 21:
    if (!(n = random_loops(g, &b, loops, 32))) return SKIP;
    return ts_sched_blockize(s, loops[pick(g, n)], &x);
  case 22:
  case 23: { /* compute_at into a consumer's loops, or reverse_compute_at
              * into a producer's */
    bool rev = pick(g, 2);
    ts_rv rel[16];
    int m;
    if (!random_block(g, &b, name, sizeof name)) return SKIP;
    int rc = rev ? ts_sched_get_producers(s, b, rel, 16, &m)
                 : ts_sched_get_consumers(s, b, rel, 16, &m);
    if (rc) return rc;
    if (m == 0) return SKIP;
    if ((rc = ts_sched_get_loops(s, rel[pick(g, m)], loops, 32, &n))) return rc;
    if (n == 0) return SKIP;
    return rev ? ts_sched_reverse_compute_at(s, b, loops[pick(g, n)])
               : ts_sched_compute_at(s, b, loops[pick(g, n)]);
  }
  case 24: { /* inline a child block of a random loop */
    ts_rv kids[16];
    int m, rc;
    if (!(n = random_loops(g, &b, loops, 32))) return SKIP;
    if ((rc = ts_sched_get_child_blocks(s, loops[pick(g, n)], kids, 16, &m)))
      return rc;
    if (m == 0) return SKIP;
    return pick(g, 2) ? ts_sched_compute_inline(s, kids[pick(g, m)])
                      : ts_sched_reverse_compute_inline(s, kids[pick(g, m)]);
  }
  default: { /* remove an annotation that may not be there */
    if (!(n = random_loops(g, &b, loops, 32))) return SKIP;
    return ts_sched_unannotate(s, loops[pick(g, n)],
                               TS_ANN_AUTO_UNROLL_MAX_STEP);
  }
  }
}

typedef struct stats {
  int legal, attempts, refused, mismatches;
  int per_kind[TS_INSTR_KIND_COUNT];
} stats;

/* One random schedule from `seed`; returns false on a failure (printed). */
static bool run_one(uint64_t seed, ts_workload **wls, ts_rt_args **refs,
                    stats *st) {
  gen g;
  ts_rng_seed(&g.rng, seed);
  int wi = pick(&g, N_WORKLOADS);
  ts_error err;
  if (ts_sched_create(wls[wi]->func, seed, &g.s, &err)) {
    fprintf(stderr, "seed %llu: create: %s\n", (unsigned long long)seed,
            err.msg);
    return false;
  }
  int steps = 1 + pick(&g, 12), ok_steps = 0;
  bool good = true;
  for (int i = 0; i < steps && good; i++) {
    char *before = util_print(g.s);
    int n_before = ts_trace_n_insts(ts_sched_trace(g.s));
    int rc = random_step(&g);
    if (rc == SKIP) {
      free(before);
      continue;
    }
    st->attempts++;
    if (rc == TS_OK) {
      ok_steps++;
      free(before);
      continue;
    }
    st->refused++;
    /* a refused primitive changes nothing (queries/samplings before it
     * may have been recorded) */
    char *after = util_print(g.s);
    if (strcmp(before, after) != 0) {
      fprintf(stderr,
              "seed %llu (%s): a refused primitive changed the schedule: "
              "%s\n--- before\n%s--- after\n%s",
              (unsigned long long)seed, workloads[wi], ts_sched_errmsg(g.s),
              before, after);
      good = false;
    }
    if (rc != SKIP && ts_sched_errmsg(g.s)[0] == 0) {
      fprintf(stderr, "seed %llu: a refusal without a message\n",
              (unsigned long long)seed);
      good = false;
    }
    (void)n_before;
    free(before);
    free(after);
  }
  if (good && ok_steps > 0) {
    st->legal++;
    const ts_trace *t = ts_sched_trace(g.s);
    for (int i = 0; i < ts_trace_n_insts(t); i++)
      st->per_kind[ts_trace_inst_kind(t, i)]++;
    if (ts_func_verify(ts_sched_func(g.s), &err) ||
        util_check_against(ts_sched_func(g.s), refs[wi], 7, 2, false, &err)) {
      char *txt = util_print(g.s), *tr = ts_trace_print(t);
      fprintf(stderr, "seed %llu (%s): MISMATCH: %s\n%s\n%s\n",
              (unsigned long long)seed, workloads[wi], err.msg, tr, txt);
      free(txt);
      free(tr);
      st->mismatches++;
      good = false;
    }
    /* replay through JSON gives the same function */
    char *json = ts_trace_to_json(t);
    ts_trace *back = NULL;
    ts_sched *again = NULL;
    if (good && (ts_trace_from_json(json, strlen(json), &back, &err) ||
                 ts_trace_apply(back, wls[wi]->func, 99, &again, &err))) {
      fprintf(stderr, "seed %llu: replay failed: %s\n%s\n",
              (unsigned long long)seed, err.msg, json);
      good = false;
    }
    if (good) {
      char *p1 = util_print(g.s), *p2 = util_print(again);
      if (strcmp(p1, p2) != 0) {
        fprintf(stderr, "seed %llu: replay printed differently\n%s\n%s\n",
                (unsigned long long)seed, p1, p2);
        good = false;
      }
      free(p1);
      free(p2);
    }
    ts_sched_destroy(again);
    ts_trace_free(back);
    free(json);
  }
  ts_sched_destroy(g.s);
  return good;
}

static void test_random_schedules(void **state) {
  (void)state;
  ts_error terr;
  ts_target *target = util_target(&terr);
  if (!target) fprintf(stderr, "TS_TEST_TARGET: %s\n", terr.msg);
  assert_non_null(target);
  printf("target: %s\n", ts_target_str(target));
  if (!util_target_runs_here()) {
    printf("skipped: this CPU cannot run code for %s\n", ts_target_str(target));
    skip();
  }
  int count = DEFAULT_COUNT;
  const char *env = getenv("TS_PROPERTY_COUNT");
  if (env && atoi(env) > 0) count = atoi(env);
  const char *one = getenv("TS_PROPERTY_SEED");
  ts_workload *wls[N_WORKLOADS];
  ts_rt_args *refs[N_WORKLOADS];
  ts_error err;
  for (int i = 0; i < N_WORKLOADS; i++) {
    assert_int_equal(ts_workload_from_spec(workloads[i], &wls[i], &err), TS_OK);
    assert_int_equal(util_reference(wls[i]->func, 7, &refs[i], &err), TS_OK);
  }
  stats st = {0};
  int failures = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if (one) {
    if (!run_one(strtoull(one, NULL, 10), wls, refs, &st)) failures++;
  } else {
    const char *first_env = getenv("TS_PROPERTY_FIRST_SEED");
    uint64_t first = first_env ? strtoull(first_env, NULL, 10) : 1;
    for (uint64_t seed = first;
         st.legal < count && seed < first + (uint64_t)count * 20; seed++)
      if (!run_one(seed, wls, refs, &st)) failures++;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double secs = (double)(t1.tv_sec - t0.tv_sec) +
                (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
  printf("property: %d legal schedules (%d primitives tried, %d refused), "
         "%d mismatches, %d failures, %.1f s\n",
         st.legal, st.attempts, st.refused, st.mismatches, failures, secs);
  printf("recorded instructions by kind:");
  for (int k = 0; k < TS_INSTR_KIND_COUNT; k++)
    printf(" %s=%d", ts_instr_kind_name((ts_instr_kind)k), st.per_kind[k]);
  printf("\n");
  for (int i = 0; i < N_WORKLOADS; i++) {
    ts_rt_args_free(refs[i]);
    ts_workload_free(wls[i]);
  }
  assert_int_equal(failures, 0);
  assert_int_equal(st.mismatches, 0);
  if (!one) assert_true(st.legal >= count);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_random_schedules),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
