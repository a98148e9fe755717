/*
 * interp_gpu.c — the reference interpreter's GPU execution mode
 * (ts_interp_run_gpu): runs a function the way the cuda code generator's
 * kernel runs on a device, and checks what a device would not report.
 *
 * The kernel model is codegen/emit.c's: the whole function is the kernel;
 * the grid and block dimensions are the largest extents of the loops bound
 * to blockIdx.x/y/z and threadIdx.x/y/z; such a loop does not iterate (its
 * var is the block's or thread's index plus the loop minimum, and its body
 * runs only when that index is below the loop's own extent); vthread loops
 * are ordinary loops; a "shared" buffer has one storage per thread block,
 * every other buffer one per thread. Blocks run one after another (x
 * fastest). The threads of a block are coroutines (ucontext, one stack
 * each; announced to AddressSanitizer as fibers): each runs until it
 * reaches a barrier (tessera.cuda.syncthreads), a warp shuffle
 * (tessera.cuda.shfl_down) or its end, in thread order, so a run is
 * deterministic. A barrier releases when every thread of the block waits at
 * that same barrier; a thread that finished or waits at another one makes
 * the barrier divergent (TS_ERANGE). A shuffle resolves when every live
 * lane of the warp (32 consecutive linear thread ids, x fastest) is at it.
 * Shared memory is poisoned (all bytes 0xFF: NaN floats, -1 integers) at
 * the start of every block, so a missing copy gives wrong results, and it
 * is shadowed per element (last writer, first two readers, and the barrier
 * interval of each): a thread touching an element another thread wrote in
 * the same interval, or writing one another thread read in it, is a data
 * race (TS_ERANGE naming the buffer, the element and both threads) —
 * except a store of the value the element already got or held in that
 * interval (threads redundantly storing the same result, as code outside
 * the thread loops does), which every order leaves the same.
 * Global memory is not checked for races.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define TS_ASAN_FIBERS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TS_ASAN_FIBERS 1
#endif
#endif
#ifdef TS_ASAN_FIBERS
#include <sanitizer/common_interface_defs.h>
#endif

/* Launch limits: a device's, and what the simulation is willing to run. */
#define MAX_THREADS_PER_BLOCK 1024
#define MAX_GRID_X ((int64_t)INT32_MAX)
#define MAX_GRID_YZ ((int64_t)65535)
#define MAX_TOTAL_THREADS ((int64_t)1 << 28)
#define WARP_SIZE 32
/* Each thread's stack; programs nested deeper than MAX_GPU_DEPTH are
 * refused so that the interpreter's recursion stays inside it (a level
 * takes under 500 bytes even unoptimized with AddressSanitizer: 1 MiB is
 * four times what 512 levels need). */
#define STACK_BYTES ((size_t)1 << 20)
#define GUARD_BYTES ((size_t)1 << 16)
#define MAX_GPU_DEPTH 512

enum { T_READY, T_BARRIER, T_SHUFFLE, T_DONE };

/* The shadow of one shared element: who wrote and read it in which barrier
 * interval (epoch; 0 = never). */
typedef struct shadow {
  uint32_t w_epoch, r_epoch;
  int32_t w_tid;    /* last writer */
  int32_t r_tid[2]; /* the first two distinct readers (-1: none) */
} shadow;

typedef struct gthread {
  interp_thread *state;
  ucontext_t ctx;
  char *stack; /* STACK_BYTES above a guard region, in gpu_sim.stacks */
  int status;  /* T_* */
  bool started;
  const void *site; /* the barrier or shuffle it waits at */
  double shfl_in, shfl_out;
  int64_t shfl_offset;
  void *fake_stack; /* AddressSanitizer's fake stack while switched out */
} gthread;

struct gpu_sim {
  interp *in;
  const interp_launch *launch;
  int n_threads;
  gthread *threads;
  int cur;              /* the running thread, -1 in the scheduler */
  interp_thread *last;  /* the thread state made current last */
  ucontext_t sched_ctx; /* the scheduler's context */
  char *stacks;         /* one mapping for every stack */
  size_t stacks_bytes;
  char **shared_data;             /* per shared buffer: this block's storage */
  shadow **shadows;               /* per shared buffer: one entry per element */
  uint32_t epoch;                 /* barrier interval of the block, from 1 */
  int64_t block_index[3];         /* the block being run */
  const void *sched_stack_bottom; /* for AddressSanitizer */
  size_t sched_stack_size;
  void *sched_fake_stack;
};

#define GFAIL(g, code, ...)                                                    \
  interp_fail_at((g)->in, (code), __FILE__, __LINE__, __VA_ARGS__)

/* ---- context switches ---- */

static void switch_begin(void **fake, const void *bottom, size_t size) {
#ifdef TS_ASAN_FIBERS
  __sanitizer_start_switch_fiber(fake, bottom, size);
#else
  (void)fake, (void)bottom, (void)size;
#endif
}

static void switch_end(void *fake, const void **bottom, size_t *size) {
#ifdef TS_ASAN_FIBERS
  __sanitizer_finish_switch_fiber(fake, bottom, size);
#else
  (void)fake, (void)bottom, (void)size;
#endif
}

/* From the running thread back to the scheduler; `exiting` when the
 * thread has finished (its stack is dropped). */
static void yield_thread(gpu_sim *g, bool exiting) {
  gthread *t = &g->threads[g->cur];
  switch_begin(exiting ? NULL : &t->fake_stack, g->sched_stack_bottom,
               g->sched_stack_size);
  swapcontext(&t->ctx, &g->sched_ctx);
  switch_end(t->fake_stack, &g->sched_stack_bottom, &g->sched_stack_size);
}

/* A coroutine's start: the pointer to the simulation comes in two halves
 * (makecontext passes ints). */
static void thread_entry(unsigned hi, unsigned lo) {
  gpu_sim *g = (gpu_sim *)(((uintptr_t)hi << 32) | (uintptr_t)lo);
  switch_end(NULL, &g->sched_stack_bottom, &g->sched_stack_size);
  interp_thread_run(g->in);
  g->threads[g->cur].status = T_DONE;
  yield_thread(g, true);
}

/* Runs thread i until it waits or finishes. */
static void run_thread(gpu_sim *g, int i) {
  gthread *t = &g->threads[i];
  interp_thread_switch(g->in, g->last, t->state);
  g->last = t->state;
  g->cur = i;
  if (!g->launch->yields) { /* nothing to wait for: run it through */
    interp_thread_run(g->in);
    t->status = T_DONE;
    g->cur = -1;
    return;
  }
  if (!t->started) {
    getcontext(&t->ctx);
    t->ctx.uc_stack.ss_sp = t->stack;
    t->ctx.uc_stack.ss_size = STACK_BYTES;
    t->ctx.uc_link = NULL;
    uintptr_t p = (uintptr_t)g;
    makecontext(&t->ctx, (void (*)(void))thread_entry, 2, (unsigned)(p >> 32),
                (unsigned)(p & 0xffffffffu));
    t->started = true;
  }
  switch_begin(&g->sched_fake_stack, t->stack, STACK_BYTES);
  swapcontext(&g->sched_ctx, &t->ctx);
  switch_end(g->sched_fake_stack, NULL, NULL);
  g->cur = -1;
}

/* ---- thread identities in messages ---- */

typedef struct tid_text {
  char s[64];
} tid_text;

static tid_text thread_name(const gpu_sim *g, int tid) {
  const int64_t *b = g->launch->block;
  tid_text r;
  snprintf(r.s, sizeof r.s, "(%lld, %lld, %lld)", (long long)(tid % b[0]),
           (long long)(tid / b[0] % b[1]), (long long)(tid / (b[0] * b[1])));
  return r;
}

static tid_text block_name(const gpu_sim *g) {
  tid_text r;
  snprintf(r.s, sizeof r.s, "(%lld, %lld, %lld)", (long long)g->block_index[0],
           (long long)g->block_index[1], (long long)g->block_index[2]);
  return r;
}

/* ---- hooks called by the running thread ---- */

void gpu_barrier(gpu_sim *g, const void *site) {
  if (interp_failed(g->in) || g->cur < 0) return;
  gthread *t = &g->threads[g->cur];
  t->status = T_BARRIER;
  t->site = site;
  yield_thread(g, false);
}

double gpu_shfl_down(gpu_sim *g, const void *site, double v, int64_t offset) {
  if (interp_failed(g->in) || g->cur < 0) return v;
  gthread *t = &g->threads[g->cur];
  t->status = T_SHUFFLE;
  t->site = site;
  t->shfl_in = v;
  t->shfl_offset = offset;
  yield_thread(g, false);
  return t->shfl_out;
}

static void report_race(gpu_sim *g, int shared, int64_t off, int first,
                        const char *first_did, const char *then_did) {
  GFAIL(g, TS_ERANGE,
        "data race on shared buffer '%s', element %lld, in thread block %s: "
        "%s by thread %s and %s by thread %s with no barrier in between",
        g->launch->shared[shared].name, (long long)off, block_name(g).s,
        first_did, thread_name(g, first).s, then_did, thread_name(g, g->cur).s);
}

void gpu_shared_access(gpu_sim *g, int shared, int64_t off, bool write,
                       bool same) {
  if (g->cur < 0 || interp_failed(g->in)) return;
  shadow *sh = &g->shadows[shared][off];
  int32_t t = g->cur;
  uint32_t e = g->epoch;
  /* threads redundantly storing the value an element got in this
   * interval (or held when it was read in it): whichever order they run
   * in, every reader sees that value */
  if (write && same && (sh->w_epoch == e || sh->r_epoch == e)) return;
  if (sh->w_epoch == e && sh->w_tid != t) {
    report_race(g, shared, off, sh->w_tid, "written",
                write ? "written" : "read");
    return;
  }
  if (write) {
    if (sh->r_epoch == e) {
      int32_t other = sh->r_tid[0] != t ? sh->r_tid[0] : sh->r_tid[1];
      if (other >= 0) {
        report_race(g, shared, off, other, "read", "written");
        return;
      }
    }
    sh->w_epoch = e;
    sh->w_tid = t;
  } else if (sh->r_epoch != e) {
    sh->r_epoch = e;
    sh->r_tid[0] = t;
    sh->r_tid[1] = -1;
  } else if (sh->r_tid[0] != t && sh->r_tid[1] < 0) {
    sh->r_tid[1] = t;
  }
}

/* ---- the scheduler ---- */

/* Reports a divergence unless threads lo..hi-1 all wait (with `status`) at
 * the site thread `at` waits at. */
static void check_converged(gpu_sim *g, int lo, int hi, int status, int at,
                            const char *what) {
  const void *site = g->threads[at].site;
  for (int i = lo; i < hi && !interp_failed(g->in); i++) {
    const gthread *t = &g->threads[i];
    if (t->status != status || t->site != site)
      GFAIL(g, TS_ERANGE,
            "divergent %s in thread block %s: thread %s waits at a %s that "
            "thread %s %s",
            what, block_name(g).s, thread_name(g, at).s, what,
            thread_name(g, i).s,
            t->status == T_DONE ? "never reaches (it finished)"
                                : "does not reach (it waits elsewhere)");
  }
}

/* Resolves the warps whose lanes all wait at one shuffle; a warp some of
 * whose live lanes wait elsewhere is divergent. Returns whether a thread
 * became ready. */
static bool resolve_shuffles(gpu_sim *g) {
  bool any = false;
  for (int lo = 0; lo < g->n_threads; lo += WARP_SIZE) {
    int hi = lo + WARP_SIZE < g->n_threads ? lo + WARP_SIZE : g->n_threads;
    int at = -1;
    for (int i = lo; i < hi && at < 0; i++)
      if (g->threads[i].status == T_SHUFFLE) at = i;
    if (at < 0) continue;
    check_converged(g, lo, hi, T_SHUFFLE, at, "warp shuffle");
    for (int i = lo; i < hi; i++) {
      gthread *t = &g->threads[i];
      if (t->status != T_SHUFFLE) continue;
      int64_t src = i + t->shfl_offset;
      t->shfl_out = src >= lo && src < hi && !interp_failed(g->in)
                        ? g->threads[src].shfl_in
                        : t->shfl_in;
      t->status = T_READY;
      any = true;
    }
  }
  return any;
}

/* Releases a barrier every thread waits at; reports a divergent one (and
 * releases the waiting threads, which then unwind). False when every
 * thread has finished. */
static bool release_barrier(gpu_sim *g) {
  int at = -1;
  for (int i = 0; i < g->n_threads && at < 0; i++)
    if (g->threads[i].status == T_BARRIER) at = i;
  if (at < 0) return false;
  check_converged(g, 0, g->n_threads, T_BARRIER, at, "barrier");
  g->epoch++;
  for (int i = 0; i < g->n_threads; i++)
    if (g->threads[i].status == T_BARRIER) g->threads[i].status = T_READY;
  return true;
}

static void run_block(gpu_sim *g) {
  const interp_launch *l = g->launch;
  for (int k = 0; k < l->n_shared; k++) {
    memset(g->shared_data[k], 0xff, (size_t)l->shared[k].bytes);
    memset(g->shadows[k], 0,
           sizeof(shadow) * (size_t)(l->shared[k].bytes / l->shared[k].esize));
  }
  g->epoch = 1;
  for (int i = 0; i < g->n_threads; i++) {
    gthread *t = &g->threads[i];
    int64_t index[6] = {g->block_index[0],
                        g->block_index[1],
                        g->block_index[2],
                        i % l->block[0],
                        i / l->block[0] % l->block[1],
                        i / (l->block[0] * l->block[1])};
    interp_thread_reset(g->in, t->state, index, g->shared_data);
    t->status = T_READY;
    t->started = false;
  }
  for (;;) {
    for (int i = 0; i < g->n_threads; i++)
      if (g->threads[i].status == T_READY) run_thread(g, i);
    if (resolve_shuffles(g)) continue;
    if (!release_barrier(g)) break;
  }
}

/* ---- the launch ---- */

static int check_launch(gpu_sim *g) {
  const interp_launch *l = g->launch;
  int64_t threads = l->block[0] * l->block[1] * l->block[2];
  if (threads > MAX_THREADS_PER_BLOCK) {
    GFAIL(g, TS_EINVAL,
          "GPU launch of %lld threads per block (%lld x %lld x %lld) exceeds "
          "the limit of %d",
          (long long)threads, (long long)l->block[0], (long long)l->block[1],
          (long long)l->block[2], MAX_THREADS_PER_BLOCK);
    return -1;
  }
  if (l->grid[0] > MAX_GRID_X || l->grid[1] > MAX_GRID_YZ ||
      l->grid[2] > MAX_GRID_YZ) {
    GFAIL(g, TS_EINVAL,
          "GPU grid of %lld x %lld x %lld blocks exceeds the limits "
          "(%lld x %lld x %lld)",
          (long long)l->grid[0], (long long)l->grid[1], (long long)l->grid[2],
          (long long)MAX_GRID_X, (long long)MAX_GRID_YZ,
          (long long)MAX_GRID_YZ);
    return -1;
  }
  int64_t blocks = l->grid[0] * l->grid[1] * l->grid[2];
  if (blocks > MAX_TOTAL_THREADS / threads) {
    GFAIL(g, TS_EUNSUPPORTED,
          "GPU launch of %lld blocks of %lld threads is too large to "
          "simulate (limit: %lld threads)",
          (long long)blocks, (long long)threads, (long long)MAX_TOTAL_THREADS);
    return -1;
  }
  if (l->yields && l->max_depth > MAX_GPU_DEPTH) {
    GFAIL(g, TS_EUNSUPPORTED,
          "statements or expressions nested %d deep: the GPU mode runs "
          "programs nested up to %d",
          l->max_depth, MAX_GPU_DEPTH);
    return -1;
  }
  g->n_threads = (int)threads;
  return 0;
}

/* Threads, their stacks, shared storage and shadows. */
static int setup(gpu_sim *g) {
  const interp_launch *l = g->launch;
  int n = g->n_threads;
  g->threads = calloc((size_t)n, sizeof *g->threads);
  g->shared_data = calloc((size_t)(l->n_shared + 1), sizeof *g->shared_data);
  g->shadows = calloc((size_t)(l->n_shared + 1), sizeof *g->shadows);
  if (!g->threads || !g->shared_data || !g->shadows) goto oom;
  for (int k = 0; k < l->n_shared; k++) {
    g->shared_data[k] = malloc((size_t)l->shared[k].bytes);
    g->shadows[k] = malloc(sizeof(shadow) *
                           (size_t)(l->shared[k].bytes / l->shared[k].esize));
    if (!g->shared_data[k] || !g->shadows[k]) goto oom;
  }
  for (int i = 0; i < n; i++)
    if (!(g->threads[i].state = interp_thread_new(g->in))) return -1;
  if (l->yields) {
    size_t each = STACK_BYTES + GUARD_BYTES;
    g->stacks_bytes = each * (size_t)n;
    void *m = mmap(NULL, g->stacks_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
      g->stacks_bytes = 0;
      goto oom;
    }
    g->stacks = m;
    for (int i = 0; i < n; i++) {
      char *base = g->stacks + each * (size_t)i;
      mprotect(base, GUARD_BYTES, PROT_NONE); /* overflow faults, not
                                                 corrupts */
      g->threads[i].stack = base + GUARD_BYTES;
    }
  }
  return 0;
oom:
  GFAIL(g, TS_ENOMEM, "out of memory for a GPU launch of %d threads per block",
        n);
  return -1;
}

static void teardown(gpu_sim *g) {
  if (g->threads)
    for (int i = 0; i < g->n_threads; i++)
      interp_thread_free(g->threads[i].state);
  for (int k = 0; g->shared_data && k < g->launch->n_shared; k++) {
    free(g->shared_data[k]);
    free(g->shadows[k]);
  }
  if (g->stacks) munmap(g->stacks, g->stacks_bytes);
  free(g->threads);
  free(g->shared_data);
  free(g->shadows);
}

int ts_interp_run_gpu(const ts_func *f, void *const *args, int n_args,
                      const ts_interp_options *opts, ts_error *err) {
  gpu_sim g;
  memset(&g, 0, sizeof g);
  g.cur = -1;
  interp *in;
  int rc = interp_open(f, args, n_args, opts, &g, &in, err);
  if (rc) return rc;
  g.in = in;
  g.launch = interp_launch_of(in);
  if (!check_launch(&g) && !setup(&g)) {
    const int64_t *grid = g.launch->grid;
    for (int64_t z = 0; z < grid[2] && !interp_failed(in); z++)
      for (int64_t y = 0; y < grid[1] && !interp_failed(in); y++)
        for (int64_t x = 0; x < grid[0] && !interp_failed(in); x++) {
          g.block_index[0] = x;
          g.block_index[1] = y;
          g.block_index[2] = z;
          run_block(&g);
        }
  }
  interp_thread_restore(in, g.last);
  teardown(&g);
  return interp_close(in);
}
