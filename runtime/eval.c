/*
 * eval.c — the CPU timing evaluator: warm-up runs, then `repeat` timed
 * repeats of `number` back-to-back runs on CLOCK_MONOTONIC, growing `number`
 * until a repeat lasts at least min_repeat_ms, with an optional last-level
 * cache flush before each repeat. Also the config check and growth rule the
 * CUDA evaluator shares.
 */
#include "runtime/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The flush buffer is the last-level cache plus an eighth, capped. */
#define FLUSH_MAX_BYTES ((size_t)1 << 30)

ts_eval_config ts_eval_config_default(void) {
  return (ts_eval_config){.number = 1,
                          .repeat = 3,
                          .min_repeat_ms = 40,
                          .flush_cache = false,
                          .warmup = 1};
}

int eval_check_config(const ts_eval_config *cfg, ts_error *err) {
  if (!cfg) return TS_ERR(err, TS_EINVAL, "evaluator: no config");
  if (cfg->number < 1 || cfg->number > TS_EVAL_MAX_NUMBER)
    return TS_ERR(err, TS_EINVAL,
                  "evaluator: bad config field number = %d (want 1..%d)",
                  cfg->number, TS_EVAL_MAX_NUMBER);
  if (cfg->repeat < 1 || cfg->repeat > 100000)
    return TS_ERR(err, TS_EINVAL,
                  "evaluator: bad config field repeat = %d (want 1..100000)",
                  cfg->repeat);
  if (cfg->min_repeat_ms < 0 || cfg->min_repeat_ms > 3600 * 1000)
    return TS_ERR(err, TS_EINVAL,
                  "evaluator: bad config field min_repeat_ms = %d (want "
                  "0..3600000)",
                  cfg->min_repeat_ms);
  if (cfg->warmup < 0 || cfg->warmup > 1000000)
    return TS_ERR(err, TS_EINVAL,
                  "evaluator: bad config field warmup = %d (want 0..1000000)",
                  cfg->warmup);
  return TS_OK;
}

int eval_grow_number(int number, double elapsed, int min_repeat_ms) {
  double target = min_repeat_ms * 1e-3;
  double next = elapsed > 0 ? number * (target / elapsed) * 1.2 : number * 10.0;
  if (next < number + 1.0) next = number + 1.0;
  if (next > TS_EVAL_MAX_NUMBER) next = TS_EVAL_MAX_NUMBER;
  return (int)ceil(next);
}

/* Writes and reads rt's flush buffer (allocated on first use) so that the
 * caches hold none of the callable's data. */
static int flush_caches(ts_runtime *rt, ts_error *err) {
  pthread_mutex_lock(&rt->flush_mu);
  if (!rt->flush_buf) {
    size_t llc = ts_rt_llc_bytes();
    size_t bytes = llc + llc / 8;
    if (bytes > FLUSH_MAX_BYTES) bytes = FLUSH_MAX_BYTES;
    bytes = (bytes + 63) & ~(size_t)63;
    rt->flush_buf = ts_rt_alloc(rt, (int64_t)bytes, 64);
    if (!rt->flush_buf) {
      pthread_mutex_unlock(&rt->flush_mu);
      return TS_ERR(err, TS_ENOMEM,
                    "evaluator: cannot allocate the %zu-byte cache flush "
                    "buffer",
                    bytes);
    }
    rt->flush_bytes = bytes;
  }
  unsigned char *buf = rt->flush_buf;
  size_t n = rt->flush_bytes / sizeof(uint64_t);
  uint64_t *words = (uint64_t *)(void *)buf;
  uint64_t stamp = (uint64_t)(rt_now() * 1e9);
  for (size_t i = 0; i < n; i++) words[i] = stamp + i;
  /* The barrier makes the reads below really load from memory. */
  __asm__ volatile("" ::: "memory");
  uint64_t sum = 0;
  for (size_t i = 0; i < n; i++) sum += words[i];
  /* The result is stored so the reads cannot be optimized away. */
  words[0] = sum;
  pthread_mutex_unlock(&rt->flush_mu);
  return TS_OK;
}

int ts_rt_flush_caches(ts_runtime *rt, ts_error *err) {
  if (!rt)
    return TS_ERR(err, TS_EINVAL,
                  "evaluator: a cache flush needs a runtime (it owns the "
                  "flush buffer)");
  return flush_caches(rt, err);
}

/* One buffer's lines, shared among the pool's threads. */
typedef struct evict_job {
  unsigned char *base;
  size_t lines;
} evict_job;

static int32_t evict_lines(void *closure, int64_t begin, int64_t end) {
  const evict_job *j = closure;
  size_t per = (j->lines + 63) / 64, lo = (size_t)begin * per,
         hi = (size_t)end * per;
  if (hi > j->lines) hi = j->lines;
  for (size_t i = lo; i < hi; i++) {
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("clflush %0" : "+m"(*(volatile char *)(j->base + i * 64)));
#else
    (void)j;
#endif
  }
  return 0;
}

int ts_rt_evict(ts_runtime *rt, void *const *bufs, const size_t *bytes, int n,
                ts_error *err) {
  if (n < 0 || (n > 0 && (!bufs || !bytes)))
    return TS_ERR(err, TS_EINVAL, "evict: no buffers");
#if defined(__x86_64__) || defined(__i386__)
  for (int i = 0; i < n; i++) {
    if (!bufs[i] || !bytes[i]) continue;
    uintptr_t lo = (uintptr_t)bufs[i] & ~(uintptr_t)63;
    uintptr_t hi = (uintptr_t)bufs[i] + bytes[i];
    evict_job j = {(unsigned char *)lo, (size_t)((hi - lo + 63) / 64)};
    /* 64 chunks: every thread of the pool takes some, so the workers are
     * awake when the timed call starts, as between a model's layers */
    if (ts_rt_parallel_for(rt, evict_lines, &j, 64))
      return TS_ERR(err, TS_EINTERNAL, "evict: a worker failed");
  }
  __asm__ volatile("mfence" ::: "memory");
  return TS_OK;
#else
  /* no line flush here: the whole cache goes */
  (void)bufs, (void)bytes;
  return rt ? flush_caches(rt, err) : TS_OK;
#endif
}

/* Runs fn `count` times; TS_ERANGE on the first non-zero result. */
static int run_times(ts_eval_fn fn, void *ctx, int count, ts_error *err) {
  for (int i = 0; i < count; i++) {
    int r = fn(ctx);
    if (r != 0)
      return TS_ERR(err, TS_ERANGE,
                    "evaluator: the timed function failed: it returned %d", r);
  }
  return TS_OK;
}

int ts_rt_eval(ts_runtime *rt, const ts_eval_config *cfg, ts_eval_fn fn,
               void *ctx, double *seconds, int *number_used, ts_error *err) {
  int rc = eval_check_config(cfg, err);
  if (rc) return rc;
  if (!fn || !seconds)
    return TS_ERR(err, TS_EINVAL, "evaluator: no function or no output array");
  if (cfg->flush_cache && !rt)
    return TS_ERR(err, TS_EINVAL,
                  "evaluator: flush_cache needs a runtime (it owns the "
                  "flush buffer)");
  if ((rc = run_times(fn, ctx, cfg->warmup, err))) return rc;
  int number = cfg->number;
  for (int r = 0; r < cfg->repeat; r++) {
    for (;;) {
      if (cfg->flush_cache && (rc = flush_caches(rt, err))) return rc;
      double start = rt_now();
      if ((rc = run_times(fn, ctx, number, err))) return rc;
      double elapsed = rt_now() - start;
      if (elapsed * 1e3 >= cfg->min_repeat_ms || number >= TS_EVAL_MAX_NUMBER) {
        seconds[r] = elapsed / number;
        break;
      }
      number = eval_grow_number(number, elapsed, cfg->min_repeat_ms);
    }
  }
  if (number_used) *number_used = number;
  return TS_OK;
}

/* The closure of ts_rt_eval_kernel. */
typedef struct kernel_call {
  const ts_rt_kernel *kernel;
  void *const *args;
  ts_runtime *rt;
  int32_t result; /* the last call's return value */
} kernel_call;

static int call_kernel(void *ctx) {
  kernel_call *c = ctx;
  c->result = ts_rt_kernel_entry(c->kernel)(c->args, c->rt);
  return c->result != 0;
}

int ts_rt_eval_kernel(ts_runtime *rt, const ts_eval_config *cfg,
                      const ts_rt_kernel *k, void *const *args, double *seconds,
                      int *number_used, ts_error *err) {
  kernel_call c = {k, args, rt, 0};
  int rc = ts_rt_eval(rt, cfg, call_kernel, &c, seconds, number_used, err);
  if (rc == TS_ERANGE && c.result != 0)
    return TS_ERR(err, TS_ERANGE,
                  "evaluator: kernel '%s' failed: it returned %d",
                  ts_rt_kernel_name(k), (int)c.result);
  return rc;
}

int ts_rt_eval_cold(ts_runtime *rt, const ts_rt_kernel *k, const ts_rt_args *a,
                    uint64_t mask, double *seconds, ts_error *err) {
  void *const *data = ts_rt_args_data(a);
  int rc = ts_rt_kernel_call(k, data, rt, err);
  if (rc) return rc;
  void *bufs[128];
  size_t bytes[128];
  int n = 0;
  for (int i = 0; i < ts_rt_args_count(a) && i < 64; i++)
    if (mask >> i & 1) {
      bufs[n] = data[i];
      bytes[n++] = ts_rt_args_bytes(a, i);
    }
  void *const *hb;
  const int64_t *hbytes;
  int nh = mask ? ts_rt_kernel_hoisted(k, &hb, &hbytes) : 0;
  for (int i = 0; i < nh && n < 128; i++) {
    bufs[n] = hb[i];
    bytes[n++] = (size_t)hbytes[i];
  }
  if ((rc = ts_rt_evict(rt, bufs, bytes, n, err))) return rc;
  double t0 = rt_now();
  if ((rc = ts_rt_kernel_call(k, data, rt, err))) return rc;
  *seconds = rt_now() - t0;
  return TS_OK;
}
