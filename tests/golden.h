/*
 * golden.h — golden files for the cmocka tests: a text the test produces,
 * compared byte for byte with a checked-in file; TS_GOLDEN_UPDATE=1 in the
 * environment rewrites the file instead (a change meant to alter the text,
 * whose diff then shows in review). Include after <cmocka.h>.
 */
#ifndef TESSERA_TESTS_GOLDEN_H
#define TESSERA_TESTS_GOLDEN_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The whole file, NUL-terminated (caller frees); NULL when unreadable. */
static inline char *golden_read(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n + 4096 + 1 > cap) {
      cap = cap ? cap * 2 : 65536;
      char *nb = realloc(buf, cap);
      if (!nb) {
        free(buf);
        fclose(f);
        return NULL;
      }
      buf = nb;
    }
    size_t k = fread(buf + n, 1, 4096, f);
    n += k;
    if (k < 4096) break;
  }
  fclose(f);
  buf[n] = '\0';
  return buf;
}

/* Compares got with the file dir/file (or rewrites it, see above); on a
 * difference prints both versions of the first differing line and fails
 * with "FILE: WHAT differs from line N on". */
static inline void golden_compare(const char *dir, const char *file,
                                  const char *got, const char *what) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  const char *update = getenv("TS_GOLDEN_UPDATE");
  if (update && !strcmp(update, "1")) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(got, 1, strlen(got), f), strlen(got));
    assert_int_equal(fclose(f), 0);
    printf("rewrote %s\n", file);
    return;
  }
  char *want = golden_read(path);
  if (!want)
    fail_msg("%s: cannot read it (TS_GOLDEN_UPDATE=1 writes it)", file);
  int line = 1;
  size_t i = 0;
  while (got[i] && got[i] == want[i]) line += got[i++] == '\n';
  int same = got[i] == want[i];
  if (!same) {
    const char *g = got + i, *w = want + i;
    while (g > got && g[-1] != '\n') g--;
    while (w > want && w[-1] != '\n') w--;
    printf("%s line %d\n  got:  %.*s\n  want: %.*s\n", file, line,
           (int)strcspn(g, "\n"), g, (int)strcspn(w, "\n"), w);
  }
  free(want);
  if (!same)
    fail_msg("%s: %s differs from line %d on (rerun with "
             "TS_GOLDEN_UPDATE=1 if the change is meant)",
             file, what, line);
}

#endif /* TESSERA_TESTS_GOLDEN_H */
