/*
 * arena.c — the bump allocator that owns every IR node of a function.
 *
 * Memory comes in chunks of 64 KiB (larger requests get a chunk of their
 * own); nothing is freed until the whole arena is destroyed. When malloc
 * fails the arena goes on in a static reserve and remembers the failure
 * (ts_arena_failed); when the reserve cannot help either, the allocation
 * returns NULL.
 */
#include "alloc.h"
#include "internal.h"

#include <stdatomic.h>
#include <stdint.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_SIZE (64 * 1024)

typedef struct chunk {
  struct chunk *next;
  size_t used, cap;
  int slot; /* CHUNK_MALLOC, CHUNK_HOME or the reserve slot it occupies */
  _Alignas(16) unsigned char data[];
} chunk;

enum { CHUNK_MALLOC = -1, CHUNK_HOME = -2 };

struct ts_arena {
  chunk *head;
  size_t bytes;
  int home; /* the reserve slot holding this struct, or -1 (malloc'd) */
  bool failed;
};

/* ---- the reserve ----
 * When malloc refuses a chunk (or the arena itself), the arena takes one
 * of these static slots instead, marks itself failed and goes on: the
 * nodes being built stay valid memory, so the operation in progress ends
 * normally and its public function reports TS_ENOMEM (the failure is
 * counted by ts_malloc; see ts_alloc_failures). A slot returns to the
 * reserve when its arena is destroyed. When the reserve is used up, or a
 * single request is larger than a slot, the allocation returns NULL (the
 * arena is failed all the same) and the caller reports TS_ENOMEM. */

#define RESERVE_SLOTS 16
#define SLOT_BYTES (sizeof(chunk) + CHUNK_SIZE)

static _Alignas(16) unsigned char reserve[RESERVE_SLOTS][SLOT_BYTES];
static atomic_uint reserve_busy; /* bit i: slot i is taken */

static int reserve_take(void) {
  unsigned busy = atomic_load(&reserve_busy);
  for (;;) {
    int i = 0;
    while (i < RESERVE_SLOTS && (busy >> i & 1u)) i++;
    if (i == RESERVE_SLOTS) return -1;
    if (atomic_compare_exchange_weak(&reserve_busy, &busy, busy | 1u << i))
      return i;
  }
}

static void reserve_put(int i) { atomic_fetch_and(&reserve_busy, ~(1u << i)); }

/* A chunk with room for cap bytes (at least), or NULL when neither malloc
 * nor the reserve has one. */
static chunk *chunk_new(ts_arena *a, size_t cap) {
  chunk *c = ts_malloc_arena(sizeof(chunk) + cap);
  if (c) {
    c->slot = CHUNK_MALLOC;
    c->cap = cap;
  } else {
    a->failed = true;
    int i = cap <= CHUNK_SIZE ? reserve_take() : -1;
    if (i < 0) return NULL;
    c = (chunk *)reserve[i];
    c->slot = i;
    c->cap = CHUNK_SIZE;
  }
  c->used = 0;
  c->next = NULL;
  return c;
}

ts_arena *ts_arena_create(void) {
  ts_arena *a = ts_malloc_arena(sizeof *a);
  if (a) {
    *a = (ts_arena){.home = -1};
    return a;
  }
  /* The struct and a first chunk share one reserve slot. */
  int i = reserve_take();
  if (i < 0) return NULL;
  a = (ts_arena *)reserve[i];
  *a = (ts_arena){.home = i, .failed = true};
  size_t off = (sizeof *a + 15) & ~(size_t)15;
  chunk *c = (chunk *)(reserve[i] + off);
  c->next = NULL;
  c->used = 0;
  c->cap = SLOT_BYTES - off - sizeof(chunk);
  c->slot = CHUNK_HOME;
  a->head = c;
  return a;
}

void ts_arena_destroy(ts_arena *a) {
  if (!a) return;
  chunk *c = a->head;
  while (c) {
    chunk *next = c->next;
    if (c->slot == CHUNK_MALLOC)
      free(c);
    else if (c->slot >= 0)
      reserve_put(c->slot);
    c = next;
  }
  if (a->home >= 0)
    reserve_put(a->home);
  else
    free(a);
}

bool ts_arena_failed(const ts_arena *a) { return a && a->failed; }

void arena_mark_failed(ts_arena *a) { a->failed = true; }

void *ts_arena_alloc(ts_arena *a, size_t size) {
  if (!a) return NULL;
  if (size > SIZE_MAX - sizeof(chunk) - 15) {
    ts_alloc_note_failure();
    a->failed = true;
    return NULL;
  }
  size = (size + 15) & ~(size_t)15;
  if (size == 0) size = 16;
  chunk *c = a->head;
  if (!c || c->cap - c->used < size) {
    size_t cap = size > CHUNK_SIZE / 2 ? size : CHUNK_SIZE;
    chunk *n = chunk_new(a, cap);
    if (!n) return NULL;
    if (cap == size && c) {
      /* A big block gets its own chunk behind the current one, so the
       * current chunk's free space stays usable. */
      n->next = c->next;
      c->next = n;
    } else {
      n->next = c;
      a->head = n;
    }
    c = n;
  }
  void *p = c->data + c->used;
  c->used += size;
  a->bytes += size;
  memset(p, 0, size);
  return p;
}

char *ts_arena_strndup(ts_arena *a, const char *s, size_t n) {
  if (!s) return NULL;
  char *p = n < SIZE_MAX ? ts_arena_alloc(a, n + 1) : NULL;
  if (!p) return NULL;
  memcpy(p, s, n);
  p[n] = 0;
  return p;
}

char *ts_arena_strdup(ts_arena *a, const char *s) {
  if (!s) return NULL;
  return ts_arena_strndup(a, s, strlen(s));
}

char *ts_arena_printf(ts_arena *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *p = n >= 0 ? ts_arena_alloc(a, (size_t)n + 1) : NULL;
  if (!p) return NULL;
  va_start(ap, fmt);
  vsnprintf(p, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return p;
}

size_t ts_arena_bytes(const ts_arena *a) { return a ? a->bytes : 0; }

void *arena_copy_ptrs(ts_arena *a, void *const *items, int n) {
  if (n <= 0) return NULL;
  void **p = ts_arena_alloc(a, sizeof(void *) * (size_t)n);
  if (!p) return NULL;
  memcpy(p, items, sizeof(void *) * (size_t)n);
  return p;
}
