/*
 * test_pool.c — the runtime's thread pool and allocation: parallel sums
 * equal the serial sum for several thread counts, every index is visited
 * once in contiguous chunks, nested parallel loops run inline, task
 * failures propagate, 1000 back-to-back calls, 5000 calls on more threads
 * than cores (late workers), concurrent callers, work
 * really spreads over threads, and ts_rt_alloc's alignment and limits,
 * and its keeping of large freed blocks, per thread.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/runtime.h"

#define N_ITEMS 1000000

typedef struct sum_job {
  const int64_t *values;
  unsigned char *visits; /* per index */
  atomic_llong total;
  atomic_int calls;
  atomic_int bad_ranges;
} sum_job;

static int32_t sum_task(void *closure, int64_t begin, int64_t end) {
  sum_job *job = closure;
  atomic_fetch_add(&job->calls, 1);
  if (begin < 0 || end > N_ITEMS || begin >= end)
    atomic_fetch_add(&job->bad_ranges, 1);
  long long s = 0;
  for (int64_t i = begin; i < end; i++) {
    s += job->values[i];
    job->visits[i]++;
  }
  atomic_fetch_add(&job->total, s);
  return 0;
}

static void test_sum_thread_counts(void **state) {
  (void)state;
  int64_t *values = malloc(N_ITEMS * sizeof *values);
  unsigned char *visits = malloc(N_ITEMS);
  long long serial = 0;
  for (int64_t i = 0; i < N_ITEMS; i++) {
    values[i] = (i * 2654435761u) % 1000003 - 500000;
    serial += values[i];
  }
  int counts[] = {1, 2, 3, 4, 7};
  for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
    ts_runtime *rt = NULL;
    assert_int_equal(ts_runtime_create(counts[c], &rt, NULL), TS_OK);
    assert_int_equal(ts_runtime_num_threads(rt), counts[c]);
    int64_t sizes[] = {N_ITEMS, 5, 2, 1};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
      sum_job job = {.values = values, .visits = visits};
      memset(visits, 0, N_ITEMS);
      assert_int_equal(ts_rt_parallel_for(rt, sum_task, &job, sizes[s]), 0);
      long long want = 0;
      for (int64_t i = 0; i < sizes[s]; i++) want += values[i];
      assert_int_equal(atomic_load(&job.total), want);
      for (int64_t i = 0; i < sizes[s]; i++) assert_int_equal(visits[i], 1);
      assert_int_equal(atomic_load(&job.bad_ranges), 0);
      /* At most one chunk per thread, each contiguous. */
      int calls = atomic_load(&job.calls);
      assert_true(calls >= 1);
      assert_true(calls <= counts[c]);
      assert_true(calls <= sizes[s]);
    }
    ts_runtime_destroy(rt);
  }
  assert_true(serial != 0);
  free(values);
  free(visits);
}

/* Nested loops: the inner call happens inside a task and must run inline:
 * once, over the whole range, on the calling thread. */
typedef struct nested_job {
  ts_runtime *rt;
  atomic_int inner_calls, inner_wrong;
  atomic_llong inner_items;
} nested_job;

typedef struct inner_ctx {
  nested_job *job;
  pthread_t outer_thread;
} inner_ctx;

static int32_t inner_task(void *closure, int64_t begin, int64_t end) {
  inner_ctx *ctx = closure;
  atomic_fetch_add(&ctx->job->inner_calls, 1);
  if (begin != 0 || end != 100 ||
      !pthread_equal(ctx->outer_thread, pthread_self()))
    atomic_fetch_add(&ctx->job->inner_wrong, 1);
  atomic_fetch_add(&ctx->job->inner_items, end - begin);
  return 0;
}

static int32_t outer_task(void *closure, int64_t begin, int64_t end) {
  nested_job *job = closure;
  for (int64_t i = begin; i < end; i++) {
    inner_ctx ctx = {job, pthread_self()};
    int32_t r = ts_rt_parallel_for(job->rt, inner_task, &ctx, 100);
    if (r) return r;
  }
  return 0;
}

static void test_nested_runs_inline(void **state) {
  (void)state;
  ts_runtime *rt = NULL;
  assert_int_equal(ts_runtime_create(3, &rt, NULL), TS_OK);
  nested_job job = {.rt = rt};
  assert_int_equal(ts_rt_parallel_for(rt, outer_task, &job, 12), 0);
  assert_int_equal(atomic_load(&job.inner_calls), 12);
  assert_int_equal(atomic_load(&job.inner_wrong), 0);
  assert_int_equal(atomic_load(&job.inner_items), 1200);
  ts_runtime_destroy(rt);
}

typedef struct fail_job {
  int64_t fail_at; /* the index whose chunk fails */
  int32_t code;
  atomic_int calls;
} fail_job;

static int32_t fail_task(void *closure, int64_t begin, int64_t end) {
  fail_job *job = closure;
  atomic_fetch_add(&job->calls, 1);
  if (job->fail_at >= begin && job->fail_at < end) return job->code;
  return 0;
}

static int32_t always_fail(void *closure, int64_t begin, int64_t end) {
  (void)begin, (void)end;
  return (int32_t)(intptr_t)closure;
}

static void test_error_propagation(void **state) {
  (void)state;
  int counts[] = {1, 2, 4};
  for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
    ts_runtime *rt = NULL;
    assert_int_equal(ts_runtime_create(counts[c], &rt, NULL), TS_OK);
    fail_job job = {.fail_at = 777, .code = 7};
    assert_int_equal(ts_rt_parallel_for(rt, fail_task, &job, 1000), 7);
    /* Every chunk failing: one of their codes comes back. */
    assert_int_equal(
        ts_rt_parallel_for(rt, always_fail, (void *)(intptr_t)-5, 100), -5);
    /* The pool is fine afterwards. */
    fail_job ok = {.fail_at = -1, .code = 9};
    assert_int_equal(ts_rt_parallel_for(rt, fail_task, &ok, 1000), 0);
    ts_runtime_destroy(rt);
  }
  /* No runtime: serial, still reports. */
  fail_job job = {.fail_at = 3, .code = 11};
  assert_int_equal(ts_rt_parallel_for(NULL, fail_task, &job, 10), 11);
  assert_int_equal(atomic_load(&job.calls), 1);
  /* n <= 0 never calls the task. */
  assert_int_equal(ts_rt_parallel_for(NULL, always_fail, (void *)1, 0), 0);
  assert_int_equal(ts_rt_parallel_for(NULL, always_fail, (void *)1, -4), 0);
}

static void test_back_to_back(void **state) {
  (void)state;
  int64_t values[4096];
  unsigned char visits[4096];
  for (int i = 0; i < 4096; i++) values[i] = i;
  ts_runtime *rt = NULL;
  assert_int_equal(ts_runtime_create(2, &rt, NULL), TS_OK);
  for (int r = 0; r < 1000; r++) {
    int64_t n = 1 + (r * 37) % 4096;
    sum_job job = {.values = values, .visits = visits};
    memset(visits, 0, sizeof visits);
    assert_int_equal(ts_rt_parallel_for(rt, sum_task, &job, n), 0);
    assert_int_equal(atomic_load(&job.total), n * (n - 1) / 2);
    /* Every 100th call, let the workers fall asleep first. */
    if (r % 100 == 99) usleep(2000);
  }
  ts_runtime_destroy(rt);
}

/* More threads than cores: workers join jobs late (or a later job than the
 * one that woke them) and the caller does not wait for those that have not
 * started; every index is still visited exactly once per call. */
static void test_late_workers(void **state) {
  (void)state;
  enum { LEN = 512 };
  int64_t values[LEN];
  unsigned char visits[LEN];
  for (int i = 0; i < LEN; i++) values[i] = 3 * i + 1;
  ts_runtime *rt = NULL;
  assert_int_equal(ts_runtime_create(16, &rt, NULL), TS_OK);
  for (int r = 0; r < 5000; r++) {
    int64_t n = 1 + (r * 131) % LEN;
    sum_job job = {.values = values, .visits = visits};
    memset(visits, 0, sizeof visits);
    assert_int_equal(ts_rt_parallel_for(rt, sum_task, &job, n), 0);
    assert_int_equal(atomic_load(&job.total), 3 * n * (n - 1) / 2 + n);
    for (int64_t i = 0; i < n; i++)
      if (visits[i] != 1)
        fail_msg("call %d: index %lld visited %d times", r, (long long)i,
                 visits[i]);
    if (r % 1000 == 999) usleep(3000); /* let the workers fall asleep */
  }
  ts_runtime_destroy(rt);
}

/* Two threads calling parallel_for on one runtime at once: both correct. */
typedef struct caller {
  ts_runtime *rt;
  const int64_t *values;
  int ok;
} caller;

static void *caller_main(void *arg) {
  caller *c = arg;
  unsigned char *visits = malloc(100000);
  c->ok = 1;
  for (int r = 0; r < 200; r++) {
    sum_job job = {.values = c->values, .visits = visits};
    if (ts_rt_parallel_for(c->rt, sum_task, &job, 100000) != 0 ||
        atomic_load(&job.total) != 100000LL * 99999 / 2)
      c->ok = 0;
  }
  free(visits);
  return NULL;
}

static void test_concurrent_callers(void **state) {
  (void)state;
  int64_t *values = malloc(100000 * sizeof *values);
  for (int i = 0; i < 100000; i++) values[i] = i;
  ts_runtime *rt = NULL;
  assert_int_equal(ts_runtime_create(2, &rt, NULL), TS_OK);
  caller cs[2] = {{rt, values, 0}, {rt, values, 0}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++)
    assert_int_equal(pthread_create(&th[i], NULL, caller_main, &cs[i]), 0);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  assert_int_equal(cs[0].ok, 1);
  assert_int_equal(cs[1].ok, 1);
  ts_runtime_destroy(rt);
  free(values);
}

/* Slow chunks: with two threads, both take part. */
typedef struct spread_job {
  pthread_t threads[8];
  atomic_int n_threads;
} spread_job;

static int32_t slow_task(void *closure, int64_t begin, int64_t end) {
  (void)begin, (void)end;
  spread_job *job = closure;
  int slot = atomic_fetch_add(&job->n_threads, 1);
  if (slot < 8) job->threads[slot] = pthread_self();
  struct timespec ts = {0, 5 * 1000 * 1000};
  nanosleep(&ts, NULL);
  return 0;
}

static void test_work_spreads(void **state) {
  (void)state;
  ts_runtime *rt = NULL;
  assert_int_equal(ts_runtime_create(2, &rt, NULL), TS_OK);
  int spread = 0;
  for (int r = 0; r < 10 && !spread; r++) {
    spread_job job = {.n_threads = 0};
    assert_int_equal(ts_rt_parallel_for(rt, slow_task, &job, 2), 0);
    assert_int_equal(atomic_load(&job.n_threads), 2);
    if (!pthread_equal(job.threads[0], job.threads[1])) spread = 1;
  }
  assert_true(spread);
  ts_runtime_destroy(rt);
}

static void test_create_and_alloc(void **state) {
  (void)state;
  ts_runtime *rt = NULL;
  ts_error err;
  ts_error_clear(&err);
  assert_int_equal(ts_runtime_create(TS_RT_MAX_THREADS + 1, &rt, &err),
                   TS_EINVAL);
  assert_null(rt);
  assert_non_null(strstr(err.msg, "thread count"));
  assert_int_equal(ts_runtime_create(0, &rt, NULL), TS_OK);
  assert_int_equal(ts_runtime_num_threads(rt),
                   (int)sysconf(_SC_NPROCESSORS_ONLN));
  ts_runtime_destroy(rt);
  ts_runtime_destroy(NULL);

  int64_t aligns[] = {0, 1, 8, 64, 4096};
  for (size_t i = 0; i < sizeof aligns / sizeof aligns[0]; i++) {
    char *p = ts_rt_alloc(NULL, 1000, aligns[i]);
    assert_non_null(p);
    int64_t want = aligns[i] == 0 ? 64 : aligns[i];
    assert_int_equal((uintptr_t)p % (uintptr_t)want, 0);
    memset(p, 1, 1000);
    ts_rt_free(NULL, p);
  }
  void *z = ts_rt_alloc(NULL, 0, 64);
  assert_non_null(z);
  ts_rt_free(NULL, z);
  assert_null(ts_rt_alloc(NULL, -1, 64));
  assert_null(ts_rt_alloc(NULL, 100, 3));
  assert_null(ts_rt_alloc(NULL, 100, -64));
  assert_null(ts_rt_alloc(NULL, INT64_MAX, 64));
  ts_rt_free(NULL, NULL);
}

#if defined(__SANITIZE_ADDRESS__)
#define KEEPS_BLOCKS 0
#else
#define KEEPS_BLOCKS 1
#endif

/* Large blocks are kept when freed and given again (not under
 * AddressSanitizer): to a request of the same alignment needing at least
 * half of one, at that alignment, whole; small blocks and other alignments
 * get blocks of their own. */
static void test_alloc_keeps_large_blocks(void **state) {
  (void)state;
  enum { BIG = 1 << 20 };
  char *a = ts_rt_alloc(NULL, BIG, 64);
  assert_non_null(a);
  memset(a, 7, BIG);
  ts_rt_free(NULL, a);
  char *b = ts_rt_alloc(NULL, BIG - 100, 64); /* same block, if kept */
  assert_non_null(b);
  assert_int_equal((uintptr_t)b % 64, 0);
  if (KEEPS_BLOCKS) assert_ptr_equal(a, b);
  memset(b, 1, BIG - 100);
  char *c = ts_rt_alloc(NULL, BIG, 4096); /* another alignment */
  assert_non_null(c);
  assert_int_equal((uintptr_t)c % 4096, 0);
  assert_ptr_not_equal(b, c);
  memset(c, 2, BIG);
  ts_rt_free(NULL, b);
  char *d = ts_rt_alloc(NULL, BIG / 4, 64); /* needs under half of it */
  assert_non_null(d);
  assert_ptr_not_equal(d, b);
  memset(d, 3, BIG / 4);
  for (int i = 0; i < BIG; i += 4096) assert_int_equal(c[i], 2);
  ts_rt_free(NULL, c);
  ts_rt_free(NULL, d);
}

static void *alloc_in_thread(void *arg) {
  (void)arg;
  char *p = ts_rt_alloc(NULL, 1 << 20, 64);
  if (p) {
    memset(p, 5, 1 << 20);
    ts_rt_free(NULL, p); /* kept by this thread, freed at its exit */
  }
  return p;
}

/* Kept blocks are the freeing thread's own: another thread never gets
 * them (a block one core has just written is not handed to the other). */
static void test_alloc_blocks_per_thread(void **state) {
  (void)state;
  char *a = ts_rt_alloc(NULL, 1 << 20, 64);
  assert_non_null(a);
  ts_rt_free(NULL, a);
  pthread_t th;
  void *other = NULL;
  assert_int_equal(pthread_create(&th, NULL, alloc_in_thread, NULL), 0);
  assert_int_equal(pthread_join(th, &other), 0);
  assert_non_null(other);
  if (KEEPS_BLOCKS) assert_ptr_not_equal(other, a);
  char *b = ts_rt_alloc(NULL, 1 << 20, 64);
  assert_non_null(b);
  if (KEEPS_BLOCKS) assert_ptr_equal(b, a);
  ts_rt_free(NULL, b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_alloc_keeps_large_blocks),
      cmocka_unit_test(test_alloc_blocks_per_thread),
      cmocka_unit_test(test_sum_thread_counts),
      cmocka_unit_test(test_nested_runs_inline),
      cmocka_unit_test(test_error_propagation),
      cmocka_unit_test(test_back_to_back),
      cmocka_unit_test(test_late_workers),
      cmocka_unit_test(test_concurrent_callers),
      cmocka_unit_test(test_work_spreads),
      cmocka_unit_test(test_create_and_alloc),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
