/*
 * cache.c — the per-connection caches that keep the compile-time query fast:
 * parsed workload functions by workload id (a chained hash table with a
 * recency list; the least recently used functions are freed once their
 * arenas pass the byte budget), and target strings as callers give them
 * mapped to their canonical form and id (parsing a target can ask LLVM
 * about the host, far slower than the query itself).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

struct func_entry {
  int64_t id;
  ts_func *func;
  uint8_t *key; /* ts_func_structural_key of func */
  size_t key_len;
  size_t bytes;
  func_entry *chain;         /* next in the bucket */
  func_entry *newer, *older; /* recency list */
};

static size_t bucket_of(const func_cache *c, int64_t id) {
  uint64_t x = (uint64_t)id * 0x9E3779B97F4A7C15ull;
  return (size_t)(x >> 32) & (c->n_buckets - 1);
}

void func_cache_init(func_cache *c, size_t budget) {
  memset(c, 0, sizeof *c);
  c->budget = budget;
}

void func_cache_free(func_cache *c) {
  for (func_entry *e = c->newest, *next; e; e = next) {
    next = e->older;
    ts_func_free(e->func);
    free(e->key);
    free(e);
  }
  free(c->buckets);
  memset(c, 0, sizeof *c);
}

static func_entry *find(const func_cache *c, int64_t id) {
  if (!c->n_buckets) return NULL;
  for (func_entry *e = c->buckets[bucket_of(c, id)]; e; e = e->chain)
    if (e->id == id) return e;
  return NULL;
}

static void unlink_recency(func_cache *c, func_entry *e) {
  if (e->newer)
    e->newer->older = e->older;
  else
    c->newest = e->older;
  if (e->older)
    e->older->newer = e->newer;
  else
    c->oldest = e->newer;
  e->newer = e->older = NULL;
}

static void push_newest(func_cache *c, func_entry *e) {
  e->older = c->newest;
  e->newer = NULL;
  if (c->newest) c->newest->newer = e;
  c->newest = e;
  if (!c->oldest) c->oldest = e;
}

static void remove_entry(func_cache *c, func_entry *e) {
  func_entry **p = &c->buckets[bucket_of(c, e->id)];
  while (*p != e) p = &(*p)->chain;
  *p = e->chain;
  unlink_recency(c, e);
  c->bytes -= e->bytes;
  c->size--;
  ts_func_free(e->func);
  free(e->key);
  free(e);
}

static bool grow(func_cache *c) {
  size_t n = c->n_buckets ? c->n_buckets * 2 : 64;
  func_entry **b = ts_calloc(n, sizeof *b);
  if (!b) return false;
  func_entry **old = c->buckets;
  size_t n_old = c->n_buckets;
  c->buckets = b;
  c->n_buckets = n;
  for (size_t i = 0; i < n_old; i++)
    for (func_entry *e = old[i], *next; e; e = next) {
      next = e->chain;
      size_t j = bucket_of(c, e->id);
      e->chain = b[j];
      b[j] = e;
    }
  free(old);
  return true;
}

const ts_func *func_cache_get(func_cache *c, int64_t id) {
  func_entry *e = find(c, id);
  if (!e) return NULL;
  if (c->newest != e) {
    unlink_recency(c, e);
    push_newest(c, e);
  }
  return e->func;
}

const uint8_t *func_cache_key(func_cache *c, int64_t id, size_t *len) {
  func_entry *e = find(c, id);
  if (!e) return NULL;
  *len = e->key_len;
  return e->key;
}

const ts_func *func_cache_put(func_cache *c, int64_t id, ts_func *f) {
  func_entry *old = find(c, id);
  if (old) remove_entry(c, old);
  /* (a table that cannot grow still chains; only an empty one fails) */
  func_entry *e = NULL;
  if ((c->size + 1 > c->n_buckets && !grow(c) && !c->n_buckets) ||
      !(e = ts_malloc(sizeof *e))) {
    ts_func_free(f);
    return NULL;
  }
  e->id = id;
  e->func = f;
  e->key = ts_func_structural_key(f, &e->key_len);
  if (!e->key) {
    ts_func_free(f);
    free(e);
    return NULL;
  }
  e->bytes = ts_arena_bytes(ts_func_arena(f)) + e->key_len;
  size_t j = bucket_of(c, id);
  e->chain = c->buckets[j];
  c->buckets[j] = e;
  push_newest(c, e);
  c->bytes += e->bytes;
  c->size++;
  while (c->bytes > c->budget && c->oldest && c->oldest != e)
    remove_entry(c, c->oldest);
  return f;
}

/* ---- targets ---- */

void target_cache_free(target_cache *c) {
  for (int i = 0; i < TARGET_CACHE_SIZE; i++) {
    free(c->items[i].given);
    free(c->items[i].canonical);
  }
  memset(c, 0, sizeof *c);
}

target_entry *target_cache_find(target_cache *c, const char *given) {
  for (int i = 0; i < TARGET_CACHE_SIZE; i++)
    if (c->items[i].given && !strcmp(c->items[i].given, given))
      return &c->items[i];
  return NULL;
}

target_entry *target_cache_add(target_cache *c, const char *given,
                               const char *canonical) {
  target_entry *e = &c->items[c->next];
  c->next = (c->next + 1) % TARGET_CACHE_SIZE;
  free(e->given);
  free(e->canonical);
  e->given = ts_strdup(given);
  e->canonical = ts_strdup(canonical);
  e->id = 0;
  if (!e->given || !e->canonical) {
    free(e->given);
    free(e->canonical);
    e->given = e->canonical = NULL;
    return NULL;
  }
  return e;
}
