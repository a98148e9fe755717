/*
 * strbuf.h — a growable malloc'd string: what the printers (TIR, traces,
 * graphs) and messages are written into, shared by every module. Memory
 * comes from tir/alloc.h's wrappers; when growing fails the buffer is
 * marked failed, later writes are dropped, and sb_take returns NULL, so a
 * printer writes on and checks once at the end. (tir/util.c)
 */
#ifndef TESSERA_TIR_STRBUF_H
#define TESSERA_TIR_STRBUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct strbuf {
  char *data;
  size_t len, cap;
  bool failed; /* growing failed: later writes are dropped */
} strbuf;

/* An empty buffer (a zeroed strbuf is one too). */
void sb_init(strbuf *sb);
void sb_free(strbuf *sb);
void sb_putc(strbuf *sb, char c);
void sb_puts(strbuf *sb, const char *s);
void sb_putn(strbuf *sb, const char *s, size_t n);
void sb_printf(strbuf *sb, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void sb_vprintf(strbuf *sb, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
/* Marks the buffer failed, as growing it does: for a writer that could
 * not make a part of its text (sb_take then returns NULL). */
void sb_fail(strbuf *sb);
/* Returns the malloc'd NUL-terminated string and leaves sb empty; NULL
 * when memory ran out while it was written. */
char *sb_take(strbuf *sb);

#endif /* TESSERA_TIR_STRBUF_H */
