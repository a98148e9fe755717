/*
 * util.c — small utilities every module uses: the monotonic clock in
 * seconds, the qsort comparator of doubles, the median of doubles, and the
 * growable string of strbuf.h.
 */
#include "internal.h"

#include "tir/alloc.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double ts_now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int64_t ts_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void ts_sleep_ms(int ms) {
  if (ms <= 0) return;
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

int ts_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double ts_median(const double *v, int n) {
  if (n <= 0) return NAN;
  double local[64];
  double *s = n <= 64 ? local : ts_malloc(sizeof *s * (size_t)n);
  if (!s) return NAN; /* out of memory: no figure rather than an abort */
  memcpy(s, v, sizeof *s * (size_t)n);
  qsort(s, (size_t)n, sizeof *s, ts_cmp_double);
  double m = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  if (s != local) free(s);
  return m;
}

/* ---- strbuf.h ---- */

void sb_init(strbuf *sb) {
  sb->data = NULL;
  sb->len = sb->cap = 0;
  sb->failed = false;
}

void sb_free(strbuf *sb) {
  free(sb->data);
  sb_init(sb);
}

/* Whether extra more bytes fit (after growing); false once growing failed. */
static bool sb_reserve(strbuf *sb, size_t extra) {
  if (sb->failed) return false;
  if (sb->len + extra + 1 <= sb->cap) return true;
  size_t cap = sb->cap ? sb->cap : 256;
  while (cap < sb->len + extra + 1) cap *= 2;
  char *p = ts_realloc(sb->data, cap);
  if (!p) {
    sb->failed = true;
    return false;
  }
  sb->data = p;
  sb->cap = cap;
  return true;
}

void sb_putn(strbuf *sb, const char *s, size_t n) {
  if (!sb_reserve(sb, n)) return;
  memcpy(sb->data + sb->len, s, n);
  sb->len += n;
  sb->data[sb->len] = 0;
}

void sb_putc(strbuf *sb, char c) { sb_putn(sb, &c, 1); }
void sb_puts(strbuf *sb, const char *s) { sb_putn(sb, s, strlen(s)); }

void sb_vprintf(strbuf *sb, const char *fmt, va_list ap) {
  va_list again;
  va_copy(again, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  if (n >= 0 && sb_reserve(sb, (size_t)n)) {
    vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, again);
    sb->len += (size_t)n;
  }
  va_end(again);
}

void sb_printf(strbuf *sb, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sb_vprintf(sb, fmt, ap);
  va_end(ap);
}

void sb_fail(strbuf *sb) { sb->failed = true; }

char *sb_take(strbuf *sb) {
  if (sb->failed) {
    sb_free(sb);
    return NULL;
  }
  char *p = sb->data;
  if (!p && (p = ts_malloc(1))) p[0] = 0;
  sb_init(sb);
  return p;
}

int ts_read_file(const char *path, const char *what, size_t max_bytes,
                 char **data, size_t *len, ts_error *err) {
  *data = NULL;
  if (len) *len = 0;
  FILE *fp = fopen(path, "rb");
  if (!fp)
    return TS_ERR(err, TS_EIO, "cannot read %s '%s' (cannot open it: %s)", what,
                  path, strerror(errno));
  size_t cap = 0, n = 0;
  char *buf = NULL;
  int rc = TS_OK;
  for (;;) {
    if (n + 1 >= cap) { /* room for a chunk and the terminator */
      size_t want = cap ? cap * 2 : 65536;
      if (cap > max_bytes) {
        rc = TS_ERR(err, TS_EINVAL, "%s '%s' is larger than %zu bytes", what,
                    path, max_bytes);
        break;
      }
      char *p = ts_realloc(buf, want);
      if (!p) {
        rc = TS_ERR(err, TS_ENOMEM, "%s '%s': out of memory", what, path);
        break;
      }
      buf = p;
      cap = want;
    }
    size_t got = fread(buf + n, 1, cap - 1 - n, fp);
    n += got;
    if (n > max_bytes) {
      rc = TS_ERR(err, TS_EINVAL, "%s '%s' is larger than %zu bytes", what,
                  path, max_bytes);
      break;
    }
    if (got == 0) {
      if (ferror(fp))
        rc = TS_ERR(err, TS_EIO, "cannot read %s '%s': %s", what, path,
                    strerror(errno));
      break;
    }
  }
  fclose(fp);
  if (rc) {
    free(buf);
    return rc;
  }
  buf[n] = 0;
  *data = buf;
  if (len) *len = n;
  return TS_OK;
}
