/*
 * arena.c — the bump allocator that owns every IR node of a function.
 *
 * Memory comes in chunks of 64 KiB (larger requests get a chunk of their
 * own); nothing is freed until the whole arena is destroyed. Also the small
 * string builder used by the printer and error messages.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_SIZE (64 * 1024)

typedef struct chunk {
  struct chunk *next;
  size_t used, cap;
  _Alignas(16) unsigned char data[];
} chunk;

struct ts_arena {
  chunk *head;
  size_t bytes;
};

static void *xmalloc(size_t n) {
  void *p = malloc(n);
  if (!p) {
    fprintf(stderr, "tessera: out of memory (allocating %zu bytes)\n", n);
    abort();
  }
  return p;
}

ts_arena *ts_arena_create(void) {
  ts_arena *a = xmalloc(sizeof *a);
  a->head = NULL;
  a->bytes = 0;
  return a;
}

void ts_arena_destroy(ts_arena *a) {
  if (!a) return;
  chunk *c = a->head;
  while (c) {
    chunk *next = c->next;
    free(c);
    c = next;
  }
  free(a);
}

void *ts_arena_alloc(ts_arena *a, size_t size) {
  size = (size + 15) & ~(size_t)15;
  if (size == 0) size = 16;
  chunk *c = a->head;
  if (!c || c->cap - c->used < size) {
    size_t cap = size > CHUNK_SIZE / 2 ? size : CHUNK_SIZE;
    chunk *n = xmalloc(sizeof(chunk) + cap);
    n->used = 0;
    n->cap = cap;
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
  char *p = ts_arena_alloc(a, n + 1);
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
  char *p = ts_arena_alloc(a, (size_t)n + 1);
  va_start(ap, fmt);
  vsnprintf(p, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return p;
}

size_t ts_arena_bytes(const ts_arena *a) { return a->bytes; }

void *arena_copy_ptrs(ts_arena *a, void *const *items, int n) {
  if (n <= 0) return NULL;
  void **p = ts_arena_alloc(a, sizeof(void *) * (size_t)n);
  memcpy(p, items, sizeof(void *) * (size_t)n);
  return p;
}

/* ---- strbuf ---- */

void sb_init(strbuf *sb) {
  sb->data = NULL;
  sb->len = sb->cap = 0;
}

void sb_free(strbuf *sb) {
  free(sb->data);
  sb_init(sb);
}

static void sb_reserve(strbuf *sb, size_t extra) {
  if (sb->len + extra + 1 <= sb->cap) return;
  size_t cap = sb->cap ? sb->cap : 256;
  while (cap < sb->len + extra + 1) cap *= 2;
  char *p = realloc(sb->data, cap);
  if (!p) {
    fprintf(stderr, "tessera: out of memory (string of %zu bytes)\n", cap);
    abort();
  }
  sb->data = p;
  sb->cap = cap;
}

void sb_putn(strbuf *sb, const char *s, size_t n) {
  sb_reserve(sb, n);
  memcpy(sb->data + sb->len, s, n);
  sb->len += n;
  sb->data[sb->len] = 0;
}

void sb_putc(strbuf *sb, char c) { sb_putn(sb, &c, 1); }
void sb_puts(strbuf *sb, const char *s) { sb_putn(sb, s, strlen(s)); }

void sb_printf(strbuf *sb, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  sb_reserve(sb, (size_t)n);
  va_start(ap, fmt);
  vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  sb->len += (size_t)n;
}

char *sb_take(strbuf *sb) {
  if (!sb->data) {
    char *p = xmalloc(1);
    p[0] = 0;
    return p;
  }
  char *p = sb->data;
  sb_init(sb);
  return p;
}
