/*
 * oom_walk.h — the out-of-memory walk the OOM tests share (the pipeline in
 * tests/schedule/test_oom.c, the database in tests/db/test_oom.c, graphs
 * in tests/graph/test_oom.c). A walk is a piece of work in named stages.
 * It runs once with the hook off (the result to compare), once counting
 * tessera's allocations K (tir/alloc.h), then once for every N in 1..K
 * with the N-th allocation failing: each such run must return TS_ENOMEM
 * with "out of memory" in the message — never crash, leak, assert or
 * succeed — and no result. After each failed run the walk's own check
 * (when it has one) looks at what the run left behind (a database written
 * half). Finally, with the hook off, the work must give the same result as
 * before the walk.
 *
 * oom_reserve_take_all takes the arena's static reserve first (tir/arena.c),
 * so that in a walk run while it is held every arena allocation that fails
 * returns NULL instead of going on in the reserve.
 *
 * For a quick look or a debugger: TS_OOM_STAGE=NAME ends the walk at that
 * stage (a walk without a stage of that name is skipped), TS_OOM_FROM=N
 * starts at the N-th allocation (of an arena-only walk: its N-th arena
 * allocation), TS_OOM_STRIDE=S takes every S-th only;
 * with a breakpoint on ts_alloc_injecting the debugger stops in the
 * failing allocation.
 */
#ifndef TESSERA_TEST_OOM_WALK_H
#define TESSERA_TEST_OOM_WALK_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tir/alloc.h"
#include "tir/tir.h"

/* In a walk's run: rc = x, and on failure on to the run's `done:`. */
#define STEP(x)                                                                \
  do {                                                                         \
    if ((rc = (x))) goto done;                                                 \
  } while (0)

typedef struct oom_walk {
  const char *name;
  const char *const *stages; /* in order */
  int n_stages;
  /* Runs the work through stage `last` (an index into stages). On success
   * through the last stage *out may be a malloc'd result that the runs
   * before and after the walk must agree on; on failure *out is NULL. */
  int (*run)(void *ctx, int last, char **out, ts_error *err);
  /* After each failed run (hook off): asserts that nothing was left half
   * done. NULL: no check. */
  void (*check_failed)(void *ctx);
  long stride; /* walk every stride-th allocation (1: all) */
  /* Fail only the arena's own allocations (ts_malloc_arena): a walk with
   * the reserve held (oom_reserve_take_all) differs from the same walk
   * with it only where an arena allocation fails, so when that walk runs
   * too, these are the runs left to make. */
  bool arena_only;
} oom_walk;

static inline void oom_walk_run(const oom_walk *w, void *ctx) {
  ts_error err;
  int last = w->n_stages - 1;
  const char *env = getenv("TS_OOM_STAGE");
  if (env && env[0]) {
    last = -1;
    for (int i = 0; i < w->n_stages; i++)
      if (!strcmp(env, w->stages[i])) last = i;
    if (last < 0) {
      printf("%s: no stage %s, skipped\n", w->name, env);
      return;
    }
  }

  /* the whole work succeeds */
  char *want = NULL;
  int rc = w->run(ctx, w->n_stages - 1, &want, &err);
  if (rc) fprintf(stderr, "%s: %s\n", w->name, err.msg);
  assert_int_equal(rc, TS_OK);

  /* count the walked part's allocations (and note the arena's) */
  char *out = NULL;
  enum { MAX_ARENA = 1 << 16 };
  long *arena = w->arena_only ? calloc(MAX_ARENA, sizeof *arena) : NULL,
       n_arena = 0;
  if (w->arena_only) {
    assert_non_null(arena);
    ts_alloc_note_arena(arena, MAX_ARENA, &n_arena);
  }
  ts_alloc_fail_nth(0);
  rc = w->run(ctx, last, &out, &err);
  long k = ts_alloc_count();
  ts_alloc_fail_nth(-1);
  ts_alloc_note_arena(NULL, 0, NULL);
  assert_true(n_arena <= MAX_ARENA);
  if (rc) fprintf(stderr, "%s, counting: %s\n", w->name, err.msg);
  assert_int_equal(rc, TS_OK);
  free(out);
  assert_true(k > 10);

  env = getenv("TS_OOM_STRIDE");
  long stride = env && atol(env) > 0 ? atol(env) : w->stride;
  env = getenv("TS_OOM_FROM");
  long from = env && atol(env) > 0 ? atol(env) : 1;
  double t0 = ts_now_seconds();
  long n_walked = 0, n_runs = w->arena_only ? n_arena : k;
  for (long i = from; i <= n_runs; i += stride) {
    long nth = w->arena_only ? arena[i - 1] : i;
    unsigned long failures = ts_alloc_failures();
    ts_alloc_fail_nth(nth);
    rc = w->run(ctx, last, &out, &err);
    bool injected = ts_alloc_injected();
    ts_alloc_fail_nth(-1);
    if (rc != TS_ENOMEM || !strstr(err.msg, "out of memory"))
      fprintf(stderr, "%s: allocation %ld of %ld failing: rc %d (%s)\n",
              w->name, nth, k, rc, rc ? err.msg : "success");
    assert_true(injected);
    assert_true(ts_alloc_failures() == failures + 1);
    assert_int_equal(rc, TS_ENOMEM);
    assert_non_null(strstr(err.msg, "out of memory"));
    assert_null(out);
    if (w->check_failed) w->check_failed(ctx);
    n_walked++;
  }
  double secs = ts_now_seconds() - t0;

  /* and with the hook off everything works as before */
  char *again = NULL;
  rc = w->run(ctx, w->n_stages - 1, &again, &err);
  if (rc) fprintf(stderr, "%s after the walk: %s\n", w->name, err.msg);
  assert_int_equal(rc, TS_OK);
  if (want || again) {
    assert_non_null(want);
    assert_non_null(again);
    assert_string_equal(again, want);
  }
  printf("%s: out of memory at each of %ld of %ld allocations%s through %s: "
         "%.1f s\n",
         w->name, n_walked, k, w->arena_only ? " (the arena's)" : "",
         w->stages[last], secs);
  free(arena);
  free(again);
  free(want);
}

enum { OOM_MAX_HELD = 256 };

/* Arenas created while malloc failed, holding the arena's reserve. */
typedef struct oom_reserve {
  ts_arena *held[OOM_MAX_HELD];
  int n;
} oom_reserve;

/* Takes every slot of the reserve. */
static inline void oom_reserve_take_all(oom_reserve *h) {
  h->n = 0;
  for (;;) {
    assert_true(h->n < OOM_MAX_HELD);
    ts_alloc_fail_nth(1);
    ts_arena *a = ts_arena_create();
    assert_true(ts_alloc_injected());
    ts_alloc_fail_nth(-1);
    if (!a) break;
    assert_true(ts_arena_failed(a));
    h->held[h->n++] = a;
  }
  assert_true(h->n > 0);
}

static inline void oom_reserve_give_back(oom_reserve *h) {
  for (int i = 0; i < h->n; i++) ts_arena_destroy(h->held[i]);
  h->n = 0;
}

#endif /* TESSERA_TEST_OOM_WALK_H */
