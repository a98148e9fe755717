/*
 * build_cache.c — the process's cache of built kernels. LLVM's optimizer
 * and code generator are most of a build's time, and one process often
 * builds the same kernel more than once: a model's profile run and then
 * its compile, a tuning job's best schedule confirmed after the search,
 * the original of a rewritten subgraph weighed beside its mutants. The
 * cache maps the module as emitted (its LLVM IR text, before any
 * optimization) and the target machine (triple, CPU, features, whether
 * optimized) to the bytes LLVM produced. A hit compares the whole IR
 * text, not only its hash, so it never returns another kernel's code.
 *
 * Bounded: TS_BUILD_CACHE_MB megabytes of IR text and artifact bytes
 * (default 64, fractions allowed; 0 turns the cache off; an entry above a
 * quarter of the limit is not kept), the least recently used entries
 * leaving first. Thread safe.
 */
#include "codegen/target_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct cache_entry {
  uint64_t hash;
  char *key; /* target machine key, then the IR text */
  size_t key_len;
  ts_artifact *artifact; /* the cache's reference */
  size_t bytes;          /* what the entry holds */
  uint64_t last_use;
  struct cache_entry *next;
} cache_entry;

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static cache_entry *cache_head;
static size_t cache_bytes;
static uint64_t cache_clock;
static long long cache_limit = -1; /* bytes; -1: not read yet */
static ts_build_cache_stats cache_stats;

static size_t limit_locked(void) {
  if (cache_limit < 0) {
    const char *v = getenv("TS_BUILD_CACHE_MB");
    char *end = NULL;
    double mb = v && *v ? strtod(v, &end) : 64;
    if (v && *v && (*end || !(mb >= 0) || mb > 1 << 20)) mb = 64;
    cache_limit = (long long)(mb * (1 << 20));
  }
  return (size_t)cache_limit;
}

/* FNV-1a over the key: only to skip most comparisons */
static uint64_t hash_bytes(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)s[i];
    h *= 1099511628211ull;
  }
  return h;
}

char *ts_build_cache_key(const char *machine, const char *ir, size_t *len) {
  size_t a = strlen(machine), b = strlen(ir);
  char *k = ts_malloc(a + 1 + b + 1);
  if (!k) return NULL;
  memcpy(k, machine, a);
  k[a] = '\n';
  memcpy(k + a + 1, ir, b + 1);
  *len = a + 1 + b;
  return k;
}

bool ts_build_cache_enabled(void) {
  pthread_mutex_lock(&cache_mu);
  bool on = limit_locked() > 0;
  pthread_mutex_unlock(&cache_mu);
  return on;
}

ts_artifact *ts_build_cache_get(const char *key, size_t len) {
  uint64_t h = hash_bytes(key, len);
  ts_artifact *found = NULL;
  pthread_mutex_lock(&cache_mu);
  for (cache_entry *e = cache_head; e; e = e->next) {
    if (e->hash == h && e->key_len == len && !memcmp(e->key, key, len)) {
      e->last_use = ++cache_clock;
      found = ts_artifact_retain(e->artifact);
      break;
    }
  }
  if (found)
    cache_stats.hits++;
  else
    cache_stats.misses++;
  pthread_mutex_unlock(&cache_mu);
  return found;
}

static void evict_locked(size_t limit) {
  while (cache_bytes > limit && cache_head) {
    cache_entry **oldest = &cache_head;
    for (cache_entry **p = &cache_head; *p; p = &(*p)->next)
      if ((*p)->last_use < (*oldest)->last_use) oldest = p;
    cache_entry *e = *oldest;
    *oldest = e->next;
    cache_bytes -= e->bytes;
    ts_artifact_release(e->artifact);
    free(e->key);
    free(e);
  }
}

void ts_build_cache_put(char *key, size_t len, ts_artifact *a) {
  pthread_mutex_lock(&cache_mu);
  size_t limit = limit_locked();
  size_t bytes = len + a->n_bytes + sizeof(cache_entry);
  cache_entry *e = bytes <= limit / 4 ? ts_calloc(1, sizeof *e) : NULL;
  if (!e) { /* off, too large for it, or out of memory: not kept */
    pthread_mutex_unlock(&cache_mu);
    free(key);
    return;
  }
  *e = (cache_entry){.hash = hash_bytes(key, len),
                     .key = key,
                     .key_len = len,
                     .artifact = ts_artifact_retain(a),
                     .bytes = bytes,
                     .last_use = ++cache_clock,
                     .next = cache_head};
  cache_head = e;
  cache_bytes += bytes;
  evict_locked(limit);
  pthread_mutex_unlock(&cache_mu);
}

ts_build_cache_stats ts_build_cache_get_stats(void) {
  pthread_mutex_lock(&cache_mu);
  ts_build_cache_stats s = cache_stats;
  s.bytes = cache_bytes;
  for (cache_entry *e = cache_head; e; e = e->next) s.entries++;
  pthread_mutex_unlock(&cache_mu);
  return s;
}

void ts_build_cache_clear(void) {
  pthread_mutex_lock(&cache_mu);
  evict_locked(0);
  cache_stats = (ts_build_cache_stats){0};
  cache_limit = -1; /* read the environment again */
  pthread_mutex_unlock(&cache_mu);
}
