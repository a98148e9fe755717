/*
 * alloc.c — the allocation wrappers of alloc.h: the per-thread count of
 * failed allocations and the fault-injection hook (fail the N-th
 * allocation) the out-of-memory tests walk. cJSON (traces, the database,
 * RPC, graphs) allocates through them too, hooked once as the library
 * loads.
 */
#include "alloc.h"
#include "tir.h"

#include <cjson/cJSON.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_bool hook_on;
static atomic_long hook_left;  /* allocations until the failing one */
static atomic_long hook_count; /* allocations since the hook was set */
static atomic_long hook_nth;   /* the failing allocation's number, or 0 */
static _Thread_local unsigned long failures;

/* Called when the armed allocation fails: a place for a debugger's
 * breakpoint (`break ts_alloc_injecting`) to see who allocated. */
__attribute__((noinline)) void ts_alloc_injecting(void) {
  __asm__ volatile("");
}

/* Whether this allocation is the one to fail. */
static inline bool inject(void) {
  if (!atomic_load_explicit(&hook_on, memory_order_relaxed)) return false;
  atomic_fetch_add_explicit(&hook_count, 1, memory_order_relaxed);
  if (atomic_fetch_sub_explicit(&hook_left, 1, memory_order_relaxed) != 1)
    return false;
  ts_alloc_injecting();
  return true;
}

static inline void *noted(void *p) {
  if (!p) failures++;
  return p;
}

void *ts_malloc(size_t size) {
  if (inject()) return noted(NULL);
  return noted(malloc(size ? size : 1));
}

void *ts_calloc(size_t n, size_t size) {
  if (inject()) return noted(NULL);
  return noted(calloc(n ? n : 1, size ? size : 1));
}

void *ts_realloc(void *p, size_t size) {
  if (inject()) return noted(NULL);
  return noted(realloc(p, size ? size : 1));
}

void *ts_aligned_alloc(size_t align, size_t size) {
  if (inject()) return noted(NULL);
  size = size ? (size + align - 1) / align * align : align;
  return noted(aligned_alloc(align, size));
}

char *ts_strndup(const char *s, size_t n) {
  size_t len = strnlen(s, n);
  char *p = ts_malloc(len + 1);
  if (!p) return NULL;
  memcpy(p, s, len);
  p[len] = 0;
  return p;
}

char *ts_strdup(const char *s) { return ts_strndup(s, strlen(s)); }

unsigned long ts_alloc_failures(void) { return failures; }

void ts_alloc_note_failure(void) { failures++; }

int ts_alloc_check(unsigned long since, int rc, ts_error *err,
                   const char *what) {
  if (failures == since) return rc;
  if (rc == TS_ENOMEM && err && strstr(err->msg, "out of memory")) return rc;
  return TS_ERR(err, TS_ENOMEM, "%s: out of memory", what);
}

void ts_alloc_fail_nth(long nth) {
  atomic_store(&hook_on, false);
  atomic_store(&hook_count, 0);
  atomic_store(&hook_left, nth > 0 ? nth : 0);
  atomic_store(&hook_nth, nth > 0 ? nth : 0);
  if (nth >= 0) atomic_store(&hook_on, true);
}

long ts_alloc_count(void) { return atomic_load(&hook_count); }

static long *_Atomic arena_numbers;
static long arena_cap, *arena_n;

void ts_alloc_note_arena(long *numbers, long cap, long *n) {
  atomic_store(&arena_numbers, NULL);
  arena_cap = cap;
  arena_n = n;
  if (n) *n = 0;
  atomic_store(&arena_numbers, numbers && n ? numbers : NULL);
}

void *ts_malloc_arena(size_t size) {
  long *numbers = atomic_load_explicit(&arena_numbers, memory_order_relaxed);
  if (numbers && atomic_load_explicit(&hook_on, memory_order_relaxed)) {
    long at = atomic_load(&hook_count) + 1; /* the number ts_malloc takes */
    if (*arena_n < arena_cap) numbers[*arena_n] = at;
    ++*arena_n;
  }
  return ts_malloc(size);
}

bool ts_alloc_injected(void) {
  long nth = atomic_load(&hook_nth);
  return atomic_load(&hook_on) && nth > 0 && atomic_load(&hook_count) >= nth;
}

char *ts_json_print(const cJSON *v, unsigned long failures, bool indent) {
  if (!v || failures != ts_alloc_failures()) return NULL;
  char *text = indent ? cJSON_Print(v) : cJSON_PrintUnformatted(v);
  if (text && failures != ts_alloc_failures()) {
    free(text);
    return NULL;
  }
  return text;
}

void ts_json_add(cJSON *parent, const char *key, cJSON *item) {
  bool added = parent && (key ? cJSON_AddItemToObject(parent, key, item)
                              : cJSON_AddItemToArray(parent, item));
  if (!added) cJSON_Delete(item);
}

/* cJSON's allocations (every JSON text tessera builds or reads) go through
 * ts_malloc, so they are counted, fail in the walks and are reported as
 * TS_ENOMEM by the code that checks for NULL. Set before main (or as
 * libtessera.so is loaded), before any JSON is built. */
__attribute__((constructor)) static void hook_json(void) {
  cJSON_InitHooks(&(cJSON_Hooks){.malloc_fn = ts_malloc, .free_fn = free});
}
