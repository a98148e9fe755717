/*
 * test_promote.c — register promotion of local accumulators (codegen/
 * promote.c): a tiled matmul whose register tile accumulates in a
 * cache_write buffer gets the tile's places in a small `_reg` buffer around
 * the reduction loop (also in the tail copies of an imperfect tile) and
 * still matches the reference interpreter; accesses the pass cannot prove
 * safe (overlapping places, an index the loop changes, an allocation inside
 * the loop) are left alone, and the program still runs correctly; a tile
 * under an if-condition is promoted where the condition keeps it in
 * bounds; a tile accumulating in an output parameter is promoted too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "check.h"
#include "schedule/schedule.h"

#define OK(x) assert_int_equal((x), TS_OK)
#define SOK(x)                                                                 \
  do {                                                                         \
    int rc_ = (x);                                                             \
    if (rc_) printf("%s\n", ts_sched_errmsg(s));                               \
    assert_int_equal(rc_, TS_OK);                                              \
  } while (0)

static char *lowered_budget(const ts_func *f, bool promote, int max_bytes) {
  ts_error err;
  ts_lower_options o = ts_lower_defaults();
  o.verify_between = true;
  o.no_promote = !promote;
  o.promote_max_bytes = max_bytes;
  ts_func *low = ts_lower(f, &o, &err);
  if (!low) printf("lower: %s\n", err.msg);
  assert_non_null(low);
  char *text = ts_func_print(low);
  ts_func_free(low);
  return text;
}

static char *lowered_text(const ts_func *f, bool promote) {
  return lowered_budget(f, promote, 0);
}

static int count(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

static void check_run(const ts_func *f) {
  ts_error err;
  int rc = check_compiled(f, NULL, 2, 7, &err);
  if (rc) printf("mismatch: %s\n", err.msg);
  OK(rc);
}

/* The text between the header of loop `var` and the end of its body: the
 * lines indented deeper than the header. */
static char *loop_body(const char *text, const char *var) {
  char head[64];
  snprintf(head, sizeof head, "for %s in", var);
  const char *p = strstr(text, head);
  if (!p) return NULL;
  const char *line = p;
  while (line > text && line[-1] != '\n') line--;
  size_t indent = (size_t)(p - line);
  const char *q = strchr(p, '\n');
  const char *end = q;
  while (q && q[1]) {
    const char *next = q + 1;
    size_t sp = 0;
    while (next[sp] == ' ') sp++;
    if (sp <= indent) break;
    q = strchr(next, '\n');
    end = q ? q : next + strlen(next);
  }
  size_t n = end ? (size_t)(end - p) : strlen(p);
  char *out = malloc(n + 1);
  memcpy(out, p, n);
  out[n] = '\0';
  return out;
}

/* matmul with SSRSRS tiles (inner factors per loop), C written through a
 * local cache at the second spatial level: a 6-row, 16-column register
 * tile, vectorized columns, rows left to unroll. */
static ts_sched *tiled(const char *spec, const int64_t *fi, const int64_t *fj,
                       int64_t fk) {
  ts_workload *w = NULL;
  ts_error err;
  OK(ts_workload_from_spec(spec, &w, &err));
  ts_sched *s = NULL;
  OK(ts_sched_create(w->func, 1, &s, &err));
  ts_workload_free(w);
  ts_rv b, l[3], i[4], j[4], k[2], init, cw, loops[10];
  int n = 0;
  SOK(ts_sched_get_block(s, "C", &b));
  SOK(ts_sched_get_loops(s, b, l, 3, &n));
  int64_t a[4] = {TS_SPLIT_INFER, fi[0], fi[1], fi[2]};
  int64_t c[4] = {TS_SPLIT_INFER, fj[0], fj[1], fj[2]};
  int64_t r[2] = {TS_SPLIT_INFER, fk};
  SOK(ts_sched_split(s, l[0], a, 4, i));
  SOK(ts_sched_split(s, l[1], c, 4, j));
  SOK(ts_sched_split(s, l[2], r, 2, k));
  ts_rv order[10] = {i[0], j[0], i[1], j[1], k[0],
                     i[2], j[2], k[1], i[3], j[3]};
  SOK(ts_sched_reorder(s, order, 10));
  SOK(ts_sched_cache_write(s, b, "C", "local", &cw));
  SOK(ts_sched_reverse_compute_at(s, cw, j[1]));
  SOK(ts_sched_decompose_reduction(s, b, k[0], &init));
  SOK(ts_sched_get_loops(s, b, loops, 10, &n));
  SOK(ts_sched_vectorize(s, loops[9]));
  SOK(ts_sched_annotate(s, loops[0],
                        ts_ann_int("pragma_auto_unroll_max_step", 16)));
  return s;
}

/* The register tile's six rows of two vectors live in C_local_reg during
 * the reduction loop k_1: no access to C_local is left inside it. */
static void test_register_tile(void **state) {
  (void)state;
  int64_t fi[3] = {1, 4, 6}, fj[3] = {1, 1, 16};
  ts_sched *s = tiled("matmul M=48 N=32 K=40", fi, fj, 8);
  const ts_func *f = ts_sched_func(s);
  char *plain = lowered_text(f, false);
  assert_int_equal(count(plain, "_reg"), 0);
  char *text = lowered_text(f, true);

  char *k1 = loop_body(text, "k_1");
  assert_non_null(k1);
  assert_int_equal(count(k1, "C_local["), 0);
  assert_int_equal(count(k1, "C_local_reg[ramp("), 12);
  free(k1);
  /* a budget below the tile: nothing promoted */
  char *small = lowered_budget(f, true, 128);
  assert_int_equal(count(small, "_reg"), 0);
  free(small);
  free(text);
  free(plain);
  check_run(f);
  ts_sched_destroy(s);
}

/* An imperfect register tile: the main copy and the tail copies are all
 * promoted where their indices allow, and the result is still exact. */
static void test_imperfect_tile(void **state) {
  (void)state;
  static const struct {
    const char *spec;
    int64_t fi[3], fj[3], fk;
  } cases[] = {
      {"matmul M=61 N=48 K=24", {1, 3, 6}, {1, 1, 16}, 8},
      {"matmul M=29 N=40 K=17", {1, 2, 5}, {1, 1, 8}, 17},
      {"matmul M=1000 N=16 K=9", {1, 7, 6}, {1, 1, 16}, 3},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    ts_sched *s = tiled(cases[c].spec, cases[c].fi, cases[c].fj, cases[c].fk);
    char *text = lowered_text(ts_sched_func(s), true);
    printf("  %s: %d promoted loops\n", cases[c].spec,
           count(text, "allocate C_local_reg"));
    assert_true(count(text, "allocate C_local_reg") >= 1);
    free(text);
    check_run(ts_sched_func(s));
    ts_sched_destroy(s);
  }
}

static ts_func *parse(const char *text) {
  ts_func *f = NULL;
  ts_error err;
  int rc = ts_func_parse(text, strlen(text), "promote", &f, &err);
  if (rc) printf("parse: %s\n", err.msg);
  OK(rc);
  return f;
}

/* Left alone: places that overlap (T[0..3] and T[2..5]), an index the loop
 * changes, a buffer allocated inside the loop, a buffer whose address is
 * taken. Each program still computes what the interpreter does. */
static void test_refused(void **state) {
  (void)state;
  static const char *const programs[] = {
      "func overlap(A: float32[64], B: float32[8]) {\n"
      "  allocate T: float32[8] scope \"local\" {\n"
      "    for i in range(8) { T[i] = float32(0) }\n"
      "    for k in range(16) {\n"
      "      T[ramp(0, 1, 4)] = T[ramp(0, 1, 4)] + A[ramp(k * 4, 1, 4)]\n"
      "      T[ramp(2, 1, 4)] = T[ramp(2, 1, 4)] * broadcast(float32(0.5), 4)\n"
      "    }\n"
      "    for i in range(8) { B[i] = T[i] }\n"
      "  }\n"
      "}\n",
      "func moving(A: float32[64], B: float32[16]) {\n"
      "  allocate T: float32[16] scope \"local\" {\n"
      "    for i in range(16) { T[i] = float32(0) }\n"
      "    for k in range(64) {\n"
      "      T[floormod(k, 16)] = T[floormod(k, 16)] + A[k]\n"
      "    }\n"
      "    for i in range(16) { B[i] = T[i] }\n"
      "  }\n"
      "}\n",
      "func inside(A: float32[64], B: float32[16]) {\n"
      "  for k in range(16) {\n"
      "    allocate T: float32[4] scope \"local\" {\n"
      "      T[0] = float32(0)\n"
      "      for r in range(4) { T[0] = T[0] + A[k * 4 + r] }\n"
      "      B[k] = T[0]\n"
      "    }\n"
      "  }\n"
      "}\n",
  };
  for (size_t i = 0; i < sizeof programs / sizeof programs[0]; i++) {
    ts_func *f = parse(programs[i]);
    char *text = lowered_text(f, true);
    if (i == 2) {
      /* promoted inside the loop over r, never around the loop over k */
      char *kb = loop_body(text, "k");
      assert_non_null(kb);
      assert_true(strstr(kb, "allocate T") < strstr(kb, "allocate T_reg") ||
                  !strstr(kb, "allocate T_reg"));
      free(kb);
    } else {
      assert_int_equal(count(text, "_reg"), 0);
    }
    free(text);
    check_run(f);
    ts_func_free(f);
  }
}

/* A buffer the parallel iterations share, stored under a condition inside
 * the loop (the masked lanes of the last, partial tile): promoting it would
 * write back, after the loop, places that only the other iteration owns
 * (in a tuned ResNet-50 task the last iteration of a parallel loop loaded
 * and stored back the next row's columns, which the other iteration was
 * accumulating into: lost updates, a quarter of the outputs wrong in one
 * run of four). The condition here reads data, so no pass hoists it out
 * of the loop. Not promoted around that loop; without the condition the
 * same buffer is. */
static void test_shared_guarded(void **state) {
  (void)state;
  ts_func *f = parse("func shared(A: float32[64], B: float32[8]) {\n"
                     "  allocate T: float32[8] {\n"
                     "    for i in range(8) { T[i] = float32(0) }\n"
                     "    for o in range(2) parallel {\n"
                     "      for k in range(16) {\n"
                     "        T[o * 6] = T[o * 6] + A[k]\n"
                     "        if A[k] > float32(0.5) {\n"
                     "          T[o * 6 + 1] = T[o * 6 + 1] + A[k + 16]\n"
                     "        }\n"
                     "      }\n"
                     "    }\n"
                     "    for i in range(8) { B[i] = T[i] }\n"
                     "  }\n"
                     "}\n");
  char *text = lowered_text(f, true);
  assert_int_equal(count(text, "T_reg"), 0);
  free(text);
  check_run(f);
  ts_func_free(f);
  /* the same with the condition outside the loop: promoted */
  f = parse("func unguarded(A: float32[64], B: float32[8]) {\n"
            "  allocate T: float32[8] {\n"
            "    for i in range(8) { T[i] = float32(0) }\n"
            "    for o in range(2) parallel {\n"
            "      for k in range(16) {\n"
            "        T[o * 6] = T[o * 6] + A[k]\n"
            "        T[o * 6 + 1] = T[o * 6 + 1] + A[k + 16]\n"
            "      }\n"
            "    }\n"
            "    for i in range(8) { B[i] = T[i] }\n"
            "  }\n"
            "}\n");
  text = lowered_text(f, true);
  assert_true(count(text, "T_reg") > 0);
  free(text);
  check_run(f);
  ts_func_free(f);
}

/* The main part of a partitioned tile runs under an if-condition: its
 * places lie past the buffer's end for loop values that the condition
 * sends elsewhere (i = 2, 3 here: T[8..16) of 12). Promoted there (the
 * condition checked point by point), not in the else-branch, whose index
 * moves with the loop; the result is still exact. */
static void test_guarded_tile(void **state) {
  (void)state;
  ts_func *f = parse(
      "func guarded(A: float32[64], B: float32[12]) {\n"
      "  allocate T: float32[12] scope \"local\" {\n"
      "    for i in range(12) { T[i] = float32(0) }\n"
      "    for i in range(4) {\n"
      "      if i * 4 - 8 < 0 {\n"
      "        for k in range(16) {\n"
      "          T[ramp(i * 4, 1, 4)] = T[ramp(i * 4, 1, 4)] + A[ramp(k * 4, "
      "1, 4)]\n"
      "        }\n"
      "      } else {\n"
      "        for k in range(16) {\n"
      "          T[8 + floormod(k, 4)] = T[8 + floormod(k, 4)] + A[k]\n"
      "        }\n"
      "      }\n"
      "    }\n"
      "    for i in range(12) { B[i] = T[i] }\n"
      "  }\n"
      "}\n");
  char *text = lowered_text(f, true);
  assert_int_equal(count(text, "allocate T_reg"), 1);
  assert_true(strstr(text, "allocate T_reg") < strstr(text, "else"));
  free(text);
  check_run(f);
  ts_func_free(f);
}

/* A tile that accumulates in the function's output parameter (no local
 * cache): the parameter is noalias, so it is promoted like an allocation.
 * Of the loops inside the promoted one, only the one that indexes the
 * accumulator (j) is unrolled; q indexes only the operands and stays a
 * loop. A guarded store to the output inside a loop that parallel
 * iterations run is not promoted (they share the parameter). */
static void test_output_param(void **state) {
  (void)state;
  ts_func *f = parse(
      "func outacc(A: float32[64], W: float32[256], C: float32[16]) {\n"
      "  for i in range(2) {\n"
      "    for j in range(2) {\n"
      "      C[ramp(i * 8 + j * 4, 1, 4)] = broadcast(float32(0), 4)\n"
      "    }\n"
      "    for k in range(16) {\n"
      "      for q in range(2) {\n"
      "        for j in range(2) {\n"
      "          C[ramp(i * 8 + j * 4, 1, 4)] = C[ramp(i * 8 + j * 4, 1, 4)] "
      "+ broadcast(A[i * 32 + k * 2 + q], 4) * W[ramp((k * 2 + q) * 8 + j "
      "* 4, 1, 4)]\n"
      "        }\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n");
  char *plain = lowered_text(f, false);
  assert_int_equal(count(plain, "_reg"), 0);
  free(plain);
  char *text = lowered_text(f, true);
  char *kb = loop_body(text, "k");
  assert_non_null(kb);
  assert_int_equal(count(kb, "C["), 0);
  assert_int_equal(count(kb, "C_reg[ramp("), 4);
  assert_non_null(strstr(kb, "for q in"));
  assert_null(strstr(kb, "for j in"));
  free(kb);
  free(text);
  check_run(f);
  ts_func_free(f);

  f = parse("func outshared(A: float32[64], B: float32[8]) {\n"
            "  for i in range(8) { B[i] = float32(0) }\n"
            "  for o in range(2) parallel {\n"
            "    for k in range(16) {\n"
            "      B[o * 6] = B[o * 6] + A[k]\n"
            "      if A[k] > float32(0.5) {\n"
            "        B[o * 6 + 1] = B[o * 6 + 1] + A[k + 16]\n"
            "      }\n"
            "    }\n"
            "  }\n"
            "}\n");
  text = lowered_text(f, true);
  assert_int_equal(count(text, "B_reg"), 0);
  free(text);
  check_run(f);
  ts_func_free(f);
}

/* A reduction whose extent the unrolled step does not divide (K = 18 in
 * steps of 4): the partitioner leaves `if k * 4 - 17 < 0` inside the k
 * loop, its else-branch the tail step. The condition reads only k and
 * holds at k's first iteration, so every slot is stored by this thread
 * whichever branch runs: promoted, though parallel iterations share the
 * output (a matmul of 359 x 160 x 569 on an AVX2 target kept a load and a
 * store per FMA for it: 0.45 x oneDNN, 1.1 promoted). Not promoted where
 * a store's condition also reads the parallel var (it may never hold in
 * this thread), nor where the only store of a slot runs under a
 * condition that holds at neither end of k. */
static void test_reduction_tail(void **state) {
  (void)state;
  const char *conds[][2] = {
      {"k * 4 - 17 < 0", "1"},         /* the k tail: promoted */
      {"k * 4 - 17 >= 0", "1"},        /* holds at the last iteration */
      {"o * 5 + k * 4 - 17 < 0", "0"}, /* reads the parallel var */
      {"k - 2 == 0", "1"},             /* the else-branch holds at the first */
  };
  for (size_t c = 0; c < sizeof conds / sizeof *conds; c++) {
    char src[1024];
    snprintf(src, sizeof src,
             "func tail(A: float32[64], C: float32[8]) {\n"
             "  for i in range(8) { C[i] = float32(0) }\n"
             "  for o in range(2) parallel {\n"
             "    for k in range(5) {\n"
             "      if %s {\n"
             "        C[ramp(o * 4, 1, 4)] = C[ramp(o * 4, 1, 4)] + "
             "A[ramp(k * 4, 1, 4)]\n"
             "      } else {\n"
             "        C[ramp(o * 4, 1, 4)] = C[ramp(o * 4, 1, 4)] + "
             "A[ramp(k * 4 + 32, 1, 4)]\n"
             "      }\n"
             "    }\n"
             "  }\n"
             "}\n",
             conds[c][0]);
    ts_func *f = parse(src);
    char *text = lowered_text(f, true);
    if (conds[c][1][0] == '1')
      assert_true(count(text, "C_reg") > 0);
    else
      assert_int_equal(count(text, "C_reg"), 0);
    free(text);
    check_run(f);
    ts_func_free(f);
  }
  /* a slot stored only under a condition that holds at neither end of
   * k: not promoted */
  const char *only[] = {"k - 2 == 0", "floormod(k, 2) == 1"};
  for (size_t c = 0; c < sizeof only / sizeof *only; c++) {
    char src[1024];
    snprintf(src, sizeof src,
             "func middle(A: float32[64], C: float32[8]) {\n"
             "  for i in range(8) { C[i] = float32(0) }\n"
             "  for o in range(2) parallel {\n"
             "    for k in range(5) {\n"
             "      C[o * 4] = C[o * 4] + A[k]\n"
             "      if %s {\n"
             "        C[o * 4 + 1] = C[o * 4 + 1] + A[k + 8]\n"
             "      }\n"
             "    }\n"
             "  }\n"
             "}\n",
             only[c]);
    ts_func *f = parse(src);
    char *text = lowered_text(f, true);
    assert_int_equal(count(text, "C_reg"), 0);
    free(text);
    check_run(f);
    ts_func_free(f);
  }
}

/* A function the pass leaves alone (no `reg` buffer in its lowered
 * text) that still runs correctly. */
static void check_not_promoted(const char *src, const char *reg) {
  ts_func *f = parse(src);
  char *text = lowered_text(f, true);
  assert_int_equal(count(text, reg), 0);
  free(text);
  check_run(f);
  ts_func_free(f);
}

/* A parallel loop whose body is straight-line code (a depthwise conv's
 * tile with every tap unrolled and its padding read under conditions on
 * the parallel var): the accumulators are promoted inside one iteration,
 * loaded at the top of the body and stored at its end (14x14x960 3x3 on
 * AVX-512 kept a store at every if-merge: 0.72 x oneDNN, 1.6 promoted).
 * A slot stored by both branches of an if counts as stored. Not where a
 * slot's only store runs under a condition (another iteration may own
 * it), nor for slots only stored (nothing to keep). */
static void test_parallel_body(void **state) {
  (void)state;
  const char *cases[][3] = {
      /* init, the guarded tap, promoted */
      {"C[ramp(o * 8, 1, 4)] = broadcast(float32(0), 4)",
       "C[ramp(o * 8, 1, 4)] = C[ramp(o * 8, 1, 4)] + A[ramp(o * 8 - 4, 1, "
       "4)]",
       "1"},
      {"if o > 0 { C[ramp(o * 8, 1, 4)] = broadcast(float32(0), 4) }",
       "C[ramp(o * 8, 1, 4)] = C[ramp(o * 8, 1, 4)] + A[ramp(o * 8 - 4, 1, "
       "4)]",
       "0"},
      /* stored by both branches (a partitioned tile's interior test) */
      {"if o > 0 { C[ramp(o * 8, 1, 4)] = broadcast(float32(0), 4) } else { "
       "C[ramp(o * 8, 1, 4)] = broadcast(float32(1), 4) }",
       "C[ramp(o * 8, 1, 4)] = C[ramp(o * 8, 1, 4)] + A[ramp(o * 8 - 4, 1, "
       "4)]",
       "1"},
      /* the else-branch stores another slot: not owned */
      {"if o > 0 { C[ramp(o * 8, 1, 4)] = broadcast(float32(0), 4) } else { "
       "C[ramp(o * 8 + 4, 1, 4)] = broadcast(float32(1), 4) }",
       "C[ramp(o * 8, 1, 4)] = C[ramp(o * 8, 1, 4)] + A[ramp(o * 8 - 4, 1, "
       "4)]",
       "0"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    char src[2048];
    snprintf(src, sizeof src,
             "func body(A: float32[40], C: float32[40]) {\n"
             "  for i in range(40) { C[i] = float32(0) }\n"
             "  for o in range(4) parallel {\n"
             "    %s\n"
             "    C[ramp(o * 8 + 4, 1, 4)] = broadcast(float32(0), 4)\n"
             "    if o > 0 {\n"
             "      %s\n"
             "      C[ramp(o * 8 + 4, 1, 4)] = C[ramp(o * 8 + 4, 1, 4)] + "
             "A[ramp(o * 8, 1, 4)]\n"
             "    }\n"
             "    C[ramp(o * 8 + 4, 1, 4)] = C[ramp(o * 8 + 4, 1, 4)] + "
             "A[ramp(o * 8 + 4, 1, 4)] * A[ramp(o * 8, 1, 4)]\n"
             "    if o < 3 {\n"
             "      C[ramp(o * 8 + 4, 1, 4)] = C[ramp(o * 8 + 4, 1, 4)] + "
             "A[ramp(o * 8 + 8, 1, 4)]\n"
             "    }\n"
             "  }\n"
             "}\n",
             cases[c][0], cases[c][1]);
    ts_func *f = parse(src);
    char *text = lowered_text(f, true);
    char *body = loop_body(text, "o");
    assert_non_null(body);
    if (cases[c][2][0] == '1') {
      /* both slots: a load at the top, a store at the end, nothing else */
      assert_int_equal(count(body, "C[ramp("), 4);
      assert_true(count(body, "C_reg[ramp(") > 4);
    } else {
      assert_int_equal(count(body, "C_reg"), 0);
    }
    free(body);
    free(text);
    check_run(f);
    ts_func_free(f);
  }
  /* stored twice, never read: nothing to keep in registers */
  check_not_promoted("func stores(A: float32[40], C: float32[40]) {\n"
                     "  for o in range(4) parallel {\n"
                     "    C[ramp(o * 8, 1, 4)] = A[ramp(o * 8, 1, 4)]\n"
                     "    if o > 0 {\n"
                     "      C[ramp(o * 8, 1, 4)] = A[ramp(o * 8 - 4, 1, 4)]\n"
                     "    }\n"
                     "    C[ramp(o * 8 + 4, 1, 4)] = A[ramp(o * 8 + 4, 1, 4)]\n"
                     "  }\n"
                     "}\n",
                     "C_reg");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_register_tile),
      cmocka_unit_test(test_imperfect_tile),
      cmocka_unit_test(test_refused),
      cmocka_unit_test(test_guarded_tile),
      cmocka_unit_test(test_shared_guarded),
      cmocka_unit_test(test_output_param),
      cmocka_unit_test(test_reduction_tail),
      cmocka_unit_test(test_parallel_body),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
