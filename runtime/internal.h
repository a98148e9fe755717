/*
 * internal.h — structs and helpers shared by the files of runtime/ only: the
 * ts_runtime handle (thread pool state and the evaluator's cache-flush
 * buffer), the monotonic clock and the evaluator's number-growth rule, which
 * the CPU and the CUDA evaluator share.
 */
#ifndef TESSERA_RUNTIME_INTERNAL_H
#define TESSERA_RUNTIME_INTERNAL_H

#include "runtime/runtime.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

struct ts_runtime;
struct rt_worker {
  struct ts_runtime *rt;
  int self; /* 1 + the worker's index: the chunk it claims first */
};

struct ts_runtime {
  int n_threads;       /* workers + the calling thread */
  int n_workers;       /* started worker threads */
  pthread_t *workers;  /* n_workers */
  pthread_mutex_t mu;  /* guards the sleeping side of wake/done */
  pthread_cond_t wake; /* workers sleep here between jobs */
  pthread_cond_t done; /* the caller sleeps here until joined workers leave */
  atomic_uint_fast64_t generation; /* bumped to publish a job */
  atomic_bool shutdown;
  atomic_bool busy; /* a parallel_for is in flight */
  /* The current job: written by the caller before it opens the job, read
   * by workers that joined it; stable until every joined worker left. */
  ts_rt_task task;
  void *closure;
  int64_t n, n_chunks;
  /* chunk c is claimed first by thread c (the caller is 0, worker i is
   * i + 1), so a row range runs on the same core from one call to the
   * next; a thread with its own chunk done claims any left */
  atomic_bool claimed[TS_RT_MAX_THREADS];
  struct rt_worker *worker_args; /* n_workers: each worker's index */
  atomic_int_fast32_t result;    /* first non-zero task result */
  atomic_bool open;              /* the job can be joined */
  atomic_int active;             /* workers inside the job */
  /* The evaluator's cache-flush buffer, allocated on first use. */
  pthread_mutex_t flush_mu;
  unsigned char *flush_buf;
  size_t flush_bytes;
};

/* Seconds on CLOCK_MONOTONIC. */
static inline double rt_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Checks an evaluator config; TS_EINVAL naming the bad field. */
int eval_check_config(const ts_eval_config *cfg, ts_error *err);
/* The next `number` after a repeat of `number` runs took `elapsed` seconds,
 * shorter than min_repeat_ms: scaled to reach the minimum with a margin,
 * at least one more, at most TS_EVAL_MAX_NUMBER. */
int eval_grow_number(int number, double elapsed, int min_repeat_ms);

#endif /* TESSERA_RUNTIME_INTERNAL_H */
