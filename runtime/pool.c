/*
 * pool.c — the runtime handle and its thread pool: persistent worker
 * threads, ts_rt_parallel_for over contiguous chunks (the calling thread
 * takes chunks too), and the aligned allocation generated kernels use for
 * large local buffers.
 *
 * Memory comes from the C library, not tir/alloc.h's wrappers: this file is
 * also compiled into libtessera_rt.so, which compiled models link without
 * the rest of tessera. Every failure is reported: TS_ENOMEM from
 * ts_runtime_create, NULL from ts_rt_alloc (the kernel then returns -1).
 *
 * A job is published by opening it and bumping `generation`. A worker that
 * wakes joins it (counts itself `active`, then checks the job is still
 * open), claims chunks (its own first, then any left) until none remain, and
 * leaves. The caller claims chunks too; once none are left it closes the
 * job and waits only for the workers inside it — never for one that has not
 * started (on a loaded machine a sleeping worker may take milliseconds to
 * be scheduled, and the caller will have run its chunks meanwhile). The
 * join is Dekker-style on two sequentially consistent atomics: a worker
 * increments `active` then reads `open`; the caller clears `open` then
 * reads `active`; so a worker either is seen by the caller's wait or sees
 * the job closed and touches none of its fields, which the next job may
 * then rewrite. Waiting threads spin for a short while (back-to-back
 * parallel loops are common) and then sleep on a condition variable.
 */
#include "runtime/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* How long a waiting thread spins before it sleeps. */
#define SPIN_SECONDS 200e-6

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* Claims and runs chunks of the current job until none are left: its own
 * chunk (`self`) first, then any other. Chunks handed out in claim order
 * went to whichever thread came first, so a call's rows moved between the
 * cores' caches from one call to the next: layer_norm 168 x 1024 on 2
 * threads of an AVX-512 Xeon ran 18.6 us against 9.7 us for its half on
 * one thread. */
static void run_chunks(ts_runtime *rt, int self) {
  int64_t n = rt->n, n_chunks = rt->n_chunks;
  int64_t base = n / n_chunks, extra = n % n_chunks;
  for (int64_t k = 0; k < n_chunks; k++) {
    int64_t c = (self + k) % n_chunks;
    bool no = false;
    if (atomic_load_explicit(&rt->claimed[c], memory_order_relaxed) ||
        !atomic_compare_exchange_strong(&rt->claimed[c], &no, true))
      continue;
    if (atomic_load_explicit(&rt->result, memory_order_relaxed) != 0) continue;
    int64_t begin = c * base + (c < extra ? c : extra);
    int64_t end = begin + base + (c < extra ? 1 : 0);
    int32_t r = rt->task(rt->closure, begin, end);
    if (r != 0) {
      int_fast32_t zero = 0;
      atomic_compare_exchange_strong(&rt->result, &zero, r);
    }
  }
}

/* Waits until generation moves past `seen` (or shutdown); returns it. */
static uint64_t wait_for_job(ts_runtime *rt, uint64_t seen) {
  double deadline = 0;
  for (unsigned i = 0;; i++) {
    uint64_t g = atomic_load_explicit(&rt->generation, memory_order_acquire);
    if (g != seen || atomic_load(&rt->shutdown)) return g;
    cpu_relax();
    if ((i & 255) == 255) {
      double now = rt_now();
      if (deadline == 0)
        deadline = now + SPIN_SECONDS;
      else if (now > deadline)
        break;
    }
  }
  pthread_mutex_lock(&rt->mu);
  uint64_t g;
  while ((g = atomic_load_explicit(&rt->generation, memory_order_acquire)) ==
             seen &&
         !atomic_load(&rt->shutdown))
    pthread_cond_wait(&rt->wake, &rt->mu);
  pthread_mutex_unlock(&rt->mu);
  return g;
}

static void *worker_main(void *arg) {
  ts_runtime *rt = ((struct rt_worker *)arg)->rt;
  int self = ((struct rt_worker *)arg)->self;
  uint64_t seen = 0;
  for (;;) {
    seen = wait_for_job(rt, seen);
    if (atomic_load(&rt->shutdown)) return NULL;
    atomic_fetch_add(&rt->active, 1);
    if (atomic_load(&rt->open)) run_chunks(rt, self);
    if (atomic_fetch_sub(&rt->active, 1) == 1) {
      /* Under the mutex, so a caller about to sleep cannot miss it. */
      pthread_mutex_lock(&rt->mu);
      pthread_cond_signal(&rt->done);
      pthread_mutex_unlock(&rt->mu);
    }
  }
}

/* Closes the current job and waits until the workers inside it left. */
static void wait_for_workers(ts_runtime *rt) {
  atomic_store(&rt->open, false);
  double deadline = 0;
  for (unsigned i = 0;; i++) {
    if (atomic_load(&rt->active) == 0) return;
    cpu_relax();
    if ((i & 255) == 255) {
      double now = rt_now();
      if (deadline == 0)
        deadline = now + SPIN_SECONDS;
      else if (now > deadline)
        break;
    }
  }
  pthread_mutex_lock(&rt->mu);
  while (atomic_load(&rt->active) != 0) pthread_cond_wait(&rt->done, &rt->mu);
  pthread_mutex_unlock(&rt->mu);
}

/* Stops and joins the first n_started workers. */
static void stop_workers(ts_runtime *rt, int n_started) {
  pthread_mutex_lock(&rt->mu);
  atomic_store(&rt->shutdown, true);
  atomic_fetch_add(&rt->generation, 1);
  pthread_cond_broadcast(&rt->wake);
  pthread_mutex_unlock(&rt->mu);
  for (int i = 0; i < n_started; i++) pthread_join(rt->workers[i], NULL);
}

int ts_runtime_create(int n_threads, ts_runtime **out, ts_error *err) {
  if (n_threads <= 0) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    n_threads =
        online > 0
            ? (int)(online < TS_RT_MAX_THREADS ? online : TS_RT_MAX_THREADS)
            : 1;
  }
  if (n_threads > TS_RT_MAX_THREADS)
    return TS_ERR(err, TS_EINVAL,
                  "runtime: thread count %d is over the limit of %d", n_threads,
                  TS_RT_MAX_THREADS);
  ts_runtime *rt = calloc(1, sizeof *rt);
  if (!rt) return TS_ERR(err, TS_ENOMEM, "runtime: out of memory");
  rt->n_threads = n_threads;
  rt->n_workers = n_threads - 1;
  pthread_mutex_init(&rt->mu, NULL);
  pthread_cond_init(&rt->wake, NULL);
  pthread_cond_init(&rt->done, NULL);
  pthread_mutex_init(&rt->flush_mu, NULL);
  atomic_init(&rt->generation, 0);
  atomic_init(&rt->shutdown, false);
  atomic_init(&rt->busy, false);
  for (int c = 0; c < TS_RT_MAX_THREADS; c++)
    atomic_init(&rt->claimed[c], false);
  atomic_init(&rt->result, 0);
  atomic_init(&rt->open, false);
  atomic_init(&rt->active, 0);
  if (rt->n_workers > 0) {
    rt->workers = calloc((size_t)rt->n_workers, sizeof *rt->workers);
    rt->worker_args = calloc((size_t)rt->n_workers, sizeof *rt->worker_args);
    if (!rt->workers || !rt->worker_args) {
      rt->n_workers = 0;
      ts_runtime_destroy(rt);
      return TS_ERR(err, TS_ENOMEM, "runtime: out of memory");
    }
  }
  for (int i = 0; i < rt->n_workers; i++) {
    rt->worker_args[i] = (struct rt_worker){rt, i + 1};
    int rc =
        pthread_create(&rt->workers[i], NULL, worker_main, &rt->worker_args[i]);
    if (rc != 0) {
      stop_workers(rt, i);
      rt->n_workers = 0;
      ts_runtime_destroy(rt);
      return TS_ERR(err, TS_ENOMEM,
                    "runtime: cannot start worker thread %d of %d: %s", i + 1,
                    n_threads - 1, strerror(rc));
    }
  }
  *out = rt;
  return TS_OK;
}

void ts_runtime_destroy(ts_runtime *rt) {
  if (!rt) return;
  if (rt->n_workers > 0) stop_workers(rt, rt->n_workers);
  free(rt->workers);
  free(rt->worker_args);
  ts_rt_free(rt, rt->flush_buf);
  pthread_mutex_destroy(&rt->mu);
  pthread_cond_destroy(&rt->wake);
  pthread_cond_destroy(&rt->done);
  pthread_mutex_destroy(&rt->flush_mu);
  free(rt);
}

int ts_runtime_num_threads(const ts_runtime *rt) { return rt->n_threads; }

int32_t ts_rt_parallel_for(void *rt_handle, ts_rt_task task, void *closure,
                           int64_t n) {
  ts_runtime *rt = rt_handle;
  if (n <= 0) return 0;
  bool idle = false;
  if (!rt || rt->n_workers == 0 || n == 1 ||
      !atomic_compare_exchange_strong(&rt->busy, &idle, true))
    return task(closure, 0, n);

  pthread_mutex_lock(&rt->mu);
  rt->task = task;
  rt->closure = closure;
  rt->n = n;
  rt->n_chunks = n < rt->n_threads ? n : rt->n_threads;
  for (int64_t c = 0; c < rt->n_chunks; c++)
    atomic_store_explicit(&rt->claimed[c], false, memory_order_relaxed);
  atomic_store(&rt->result, 0);
  atomic_store(&rt->open, true);
  atomic_fetch_add_explicit(&rt->generation, 1, memory_order_release);
  pthread_cond_broadcast(&rt->wake);
  pthread_mutex_unlock(&rt->mu);

  run_chunks(rt, 0);
  wait_for_workers(rt);
  int32_t result = (int32_t)atomic_load(&rt->result);
  atomic_store(&rt->busy, false);
  return result;
}

/* ---- ts_rt_alloc: the C library's memory, with large blocks kept ----
 *
 * A kernel allocates its large local buffers (packed panels, padded
 * images) at every call and frees them at its end. glibc serves a block
 * over its mmap threshold from fresh pages, and gives the top of its heap
 * back to the kernel once more than its trim threshold is free there: two
 * freed 516 KiB packing buffers of an int8 product did that at every call,
 * and the next call then took a page fault on every 4 KiB of them (an int8
 * product of 52 rows ran 3.5 x slower for it). So each thread keeps up to
 * BLOCK_KEEP_N freed blocks of BLOCK_KEEP_MIN bytes or more
 * (BLOCK_KEEP_BYTES in all) and gives one again to its own request of the
 * same alignment that needs at least half of it. The blocks are the
 * thread's own: a cache shared by the threads handed a panel buffer that
 * one core had just written to the other, at every parallel iteration (a
 * dense layer's per-panel copies of W: 0.24 -> 0.35 ms). No lock, so a
 * child forked at any moment has a consistent cache. Every block carries
 * a header before the pointer returned (its base, size and alignment). A
 * thread's blocks are freed when it exits. Not kept under
 * AddressSanitizer, whose use-after-free checks a reused block would hide. */
#define BLOCK_KEEP_MIN ((size_t)64 << 10)
#define BLOCK_KEEP_N 4
#define BLOCK_KEEP_BYTES ((size_t)64 << 20)
#define BLOCK_MAGIC 0x7473726c626c6b31ull /* "tsrlblk1" */

#if defined(__SANITIZE_ADDRESS__)
#define BLOCK_KEEP 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BLOCK_KEEP 0
#endif
#endif
#ifndef BLOCK_KEEP
#define BLOCK_KEEP 1
#endif

typedef struct block_header {
  void *base;     /* what posix_memalign returned */
  size_t total;   /* its size */
  size_t head;    /* bytes from base to the pointer returned */
  uint64_t magic; /* BLOCK_MAGIC while allocated */
} block_header;

typedef struct kept_blocks {
  block_header kept[BLOCK_KEEP_N];
  int n;
  size_t bytes;
} kept_blocks;

static __thread kept_blocks blocks;
static pthread_key_t blocks_key;
static pthread_once_t blocks_once = PTHREAD_ONCE_INIT;
static bool blocks_key_ok;

/* At a thread's exit: its kept blocks go back to the C library. */
static void blocks_release(void *unused) {
  (void)unused;
  for (int i = 0; i < blocks.n; i++) free(blocks.kept[i].base);
  blocks.n = 0;
  blocks.bytes = 0;
}

static void blocks_key_init(void) {
  blocks_key_ok = pthread_key_create(&blocks_key, blocks_release) == 0;
}

/* One of the thread's kept blocks of `head` alignment holding `total` bytes
 * and not more than twice as many, the smallest; NULL when none. */
static void *block_take(size_t total, size_t head, size_t *got) {
  if (!BLOCK_KEEP || total < BLOCK_KEEP_MIN) return NULL;
  int best = -1;
  for (int i = 0; i < blocks.n; i++)
    if (blocks.kept[i].head == head && blocks.kept[i].total >= total &&
        blocks.kept[i].total / 2 <= total &&
        (best < 0 || blocks.kept[i].total < blocks.kept[best].total))
      best = i;
  if (best < 0) return NULL;
  void *base = blocks.kept[best].base;
  *got = blocks.kept[best].total;
  blocks.bytes -= *got;
  blocks.kept[best] = blocks.kept[--blocks.n];
  return base;
}

/* Keeps a freed block; false when it is not kept (the caller frees it). */
static bool block_keep(const block_header *h) {
  if (!BLOCK_KEEP || h->total < BLOCK_KEEP_MIN || h->total > BLOCK_KEEP_BYTES)
    return false;
  pthread_once(&blocks_once, blocks_key_init);
  /* without the key the blocks could not be given back at the thread's
   * exit */
  if (!blocks_key_ok || pthread_setspecific(blocks_key, &blocks)) return false;
  if (blocks.n == BLOCK_KEEP_N || blocks.bytes + h->total > BLOCK_KEEP_BYTES) {
    /* the oldest goes, the newest is kept */
    if (blocks.n == 0) return false;
    blocks.bytes -= blocks.kept[0].total;
    free(blocks.kept[0].base);
    memmove(&blocks.kept[0], &blocks.kept[1],
            (size_t)(blocks.n - 1) * sizeof blocks.kept[0]);
    blocks.n--;
    if (blocks.bytes + h->total > BLOCK_KEEP_BYTES) return false;
  }
  blocks.kept[blocks.n++] = *h;
  blocks.bytes += h->total;
  return true;
}

void *ts_rt_alloc(void *rt, int64_t bytes, int64_t align) {
  (void)rt;
  if (bytes < 0 || align < 0) return NULL;
  if (align == 0) align = 64;
  if ((align & (align - 1)) != 0) return NULL;
  if (align < (int64_t)sizeof(void *)) align = sizeof(void *);
  if (bytes > TS_RT_MAX_ALLOC_BYTES) return NULL;
  /* the header fits in `head` bytes, a multiple of the alignment */
  size_t head = (size_t)align < sizeof(block_header) ? sizeof(block_header)
                                                     : (size_t)align;
  size_t total = head + (bytes > 0 ? (size_t)bytes : 1);
  size_t got = total;
  void *base = block_take(total, head, &got);
  if (!base && posix_memalign(&base, head, total) != 0) return NULL;
  char *p = (char *)base + head;
  block_header *h = (block_header *)(void *)(p - sizeof(block_header));
  h->base = base;
  h->total = got;
  h->head = head;
  h->magic = BLOCK_MAGIC;
  return p;
}

void ts_rt_free(void *rt, void *p) {
  (void)rt;
  if (!p) return;
  block_header *h = (block_header *)(void *)((char *)p - sizeof(block_header));
  if (h->magic != BLOCK_MAGIC) return; /* not from ts_rt_alloc, or freed */
  h->magic = 0;
  block_header copy = *h;
  if (!block_keep(&copy)) free(copy.base);
}
