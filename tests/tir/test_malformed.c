/*
 * test_malformed.c — the parser on bad input: every file in
 * tests/tir/malformed (its first line says `# expect-error line N: what`)
 * must fail with TS_EPARSE, a message that starts with FILE:LINE:COL, that
 * line, a column inside it, and no function handed out; plus empty and
 * binary input, every prefix and many one-byte mutations of a valid text
 * (which must fail cleanly or round-trip), and the input limits.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tir/tir.h"

static char *read_file(const char *path, size_t *len) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return NULL;
  fseek(fp, 0, SEEK_END);
  long n = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  size_t got = fread(buf, 1, (size_t)n, fp);
  fclose(fp);
  buf[got] = 0;
  *len = got;
  return buf;
}

/* Length of line `line` (1-based) of text, or -1 past the end. */
static long line_length(const char *text, size_t len, int line) {
  size_t i = 0;
  for (int l = 1; l < line; l++) {
    while (i < len && text[i] != '\n') i++;
    if (i >= len) return -1;
    i++;
  }
  size_t start = i;
  while (i < len && text[i] != '\n') i++;
  return (long)(i - start);
}

static int count_lines(const char *text, size_t len) {
  int n = 1;
  for (size_t i = 0; i < len; i++)
    if (text[i] == '\n') n++;
  return n;
}

/* A failed parse: code, no function, a message with the position, and a
 * position inside the text. */
static void check_failure(int rc, const ts_func *f, const ts_error *err,
                          const char *file, const char *text, size_t len) {
  assert_int_equal(rc, TS_EPARSE);
  assert_null(f);
  assert_int_equal(err->code, TS_EPARSE);
  assert_true(err->msg[0] != 0);
  assert_true(err->line >= 1);
  assert_true(err->line <= count_lines(text, len));
  long ll = line_length(text, len, err->line);
  assert_true(ll >= 0);
  assert_true(err->column >= 1);
  assert_true(err->column <= ll + 1);
  char prefix[1200];
  snprintf(prefix, sizeof prefix, "%s:%d:%d: ", file, err->line, err->column);
  if (strncmp(err->msg, prefix, strlen(prefix)) != 0) {
    print_error("message '%s' does not start with '%s'\n", err->msg, prefix);
    fail();
  }
}

static void test_malformed_files(void **state) {
  (void)state;
  const char *dir = TS_SOURCE_DIR "/tests/tir/malformed";
  DIR *d = opendir(dir);
  assert_non_null(d);
  int files = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t n = strlen(e->d_name);
    if (n < 5 || strcmp(e->d_name + n - 4, ".tir") != 0) continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    size_t len = 0;
    char *text = read_file(path, &len);
    assert_non_null(text);
    int want_line = 0;
    if (sscanf(text, "# expect-error line %d:", &want_line) != 1) {
      print_error("%s: first line must be '# expect-error line N: ...'\n",
                  path);
      fail();
    }
    /* Through the file reader... */
    ts_func *f = (ts_func *)&files; /* must be reset to NULL */
    ts_error err;
    ts_error_clear(&err);
    int rc = ts_func_parse_file(path, &f, &err);
    check_failure(rc, f, &err, path, text, len);
    if (err.line != want_line) {
      print_error("%s: error at line %d, expected %d: %s\n", path, err.line,
                  want_line, err.msg);
      fail();
    }
    /* ...and from memory with no file name: the same position. */
    ts_error err2;
    f = (ts_func *)&files;
    rc = ts_func_parse(text, len, NULL, &f, &err2);
    check_failure(rc, f, &err2, "<input>", text, len);
    assert_int_equal(err2.line, err.line);
    assert_int_equal(err2.column, err.column);
    /* A NULL error record is allowed. */
    f = (ts_func *)&files;
    assert_int_equal(ts_func_parse(text, len, "x", &f, NULL), TS_EPARSE);
    assert_null(f);
    free(text);
    files++;
  }
  closedir(d);
  assert_true(files >= 40);
}

/* Specific messages name what was expected and where. */
static void test_messages(void **state) {
  (void)state;
  struct {
    const char *text;
    int line, column;
    const char *msg;
  } cases[] = {
      {"", 1, 1,
       "t.tir:1:1: expected 'func' at the start of the text but "
       "found end of input"},
      {"func f() {\n  evaluate min(1, 2\n}\n", 3, 1,
       "t.tir:3:1: expected ',' or ')' after the arguments of min but found "
       "'}'"},
      {"func f(A: float32[4]) {\n  A[0] = A[0] + int64(1)\n}\n", 2, 15,
       "t.tir:2:15: operands of '+' have different types: float32 and int64"},
      {"func f() {\n  for i in range(4) {\n    evaluate j\n  }\n}\n", 3, 14,
       "t.tir:3:14: undefined variable or buffer 'j'"},
      {"func f(A: float32[4]) {\n  block b() {\n", 3, 1,
       "t.tir:3:1: expected '}' to close block 'b' (opened at 2:13) but found "
       "end of input"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    ts_func *f = NULL;
    ts_error err;
    int rc =
        ts_func_parse(cases[k].text, strlen(cases[k].text), "t.tir", &f, &err);
    assert_int_equal(rc, TS_EPARSE);
    assert_null(f);
    assert_int_equal(err.line, cases[k].line);
    assert_int_equal(err.column, cases[k].column);
    assert_string_equal(err.msg, cases[k].msg);
  }
}

static void test_empty_and_binary(void **state) {
  (void)state;
  ts_func *f = (ts_func *)state;
  ts_error err;
  assert_int_equal(ts_func_parse(NULL, 0, NULL, &f, &err), TS_EPARSE);
  assert_null(f);
  assert_int_equal(err.line, 1);
  assert_int_equal(err.column, 1);
  assert_int_equal(ts_func_parse("   \n\n  # nothing\n", 17, NULL, &f, &err),
                   TS_EPARSE);
  assert_int_equal(err.line, 4);
  /* Only the first len bytes count: the rest is never read. */
  const char *text = "func f() {\n}\ngarbage";
  assert_int_equal(ts_func_parse(text, 13, NULL, &f, &err), TS_OK);
  ts_func_free(f);
  /* Seeded random bytes. */
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  unsigned char buf[512];
  for (int k = 0; k < 400; k++) {
    size_t n = 1 + (size_t)(k * 37 % 500);
    for (size_t i = 0; i < n; i++) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      buf[i] = (unsigned char)(seed >> 56);
      /* Half the inputs are mostly printable, to get past the lexer. */
      if (k % 2) buf[i] = (unsigned char)" (){}[],:=+-*<>fx0\n"[buf[i] % 19];
    }
    f = (ts_func *)state;
    int rc = ts_func_parse((const char *)buf, n, "rand", &f, &err);
    if (rc != TS_OK) {
      check_failure(rc, f, &err, "rand", (const char *)buf, n);
    } else {
      ts_func_free(f);
    }
  }
}

/* A valid text used for prefixes and mutations. */
static const char valid[] =
    "func f(A: float32[16], B: int32[4, 4], flag: bool[]) attrs {\"k\": 1} {\n"
    "  for i in range(16) parallel annotate {\"u\": 2.5} {\n"
    "    block b(vi: spatial(16) = i) where i < 15 {\n"
    "      reads(A[vi], flag[])\n"
    "      writes(A[vi])\n"
    "      alloc T: float32[2] scope \"local\"\n"
    "      let x = A[vi] * float32(2) {\n"
    "        if x > float32(0) && flag[] {\n"
    "          A[vi] = sqrt(x)\n"
    "        } else {\n"
    "          T[0] = select(vi % 2 == 0, x, float32(-1.5))\n"
    "          A[vi] = (let y = T[0] in y + T[1])\n"
    "        }\n"
    "      }\n"
    "      evaluate call<int32>(\"f\", &B[0, floormod(vi, 4)], -3)\n"
    "    }\n"
    "  }\n"
    "}\n";

/* Parses text; a success must round-trip, a failure must be clean. */
static void parse_any(const char *text, size_t len) {
  ts_func *f = (ts_func *)text;
  ts_error err;
  int rc = ts_func_parse(text, len, "m", &f, &err);
  if (rc != TS_OK) {
    check_failure(rc, f, &err, "m", text, len);
    return;
  }
  char *p1 = ts_func_print(f);
  ts_func *g = NULL;
  rc = ts_func_parse(p1, strlen(p1), "reprint", &g, &err);
  if (rc != TS_OK) {
    print_error("reprint does not parse: %s\n--- input ---\n%.*s\n--- "
                "printed ---\n%s",
                err.msg, (int)len, text, p1);
    fail();
  }
  char *p2 = ts_func_print(g);
  assert_string_equal(p1, p2);
  assert_true(ts_func_equal(f, g));
  free(p1);
  free(p2);
  ts_func_free(f);
  ts_func_free(g);
}

static void test_prefixes(void **state) {
  (void)state;
  size_t n = strlen(valid);
  char *copy = malloc(n + 1);
  for (size_t k = 0; k < n; k++) {
    memcpy(copy, valid, k); /* exactly k bytes, no terminator in reach */
    ts_func *f = (ts_func *)state;
    ts_error err;
    int rc = ts_func_parse(copy, k, "prefix", &f, &err);
    /* Only the whole text (or it without its final newline) parses. */
    if (k == n - 1) {
      assert_int_equal(rc, TS_OK);
      ts_func_free(f);
      continue;
    }
    check_failure(rc, f, &err, "prefix", copy, k);
  }
  parse_any(valid, n);
  free(copy);
}

static void test_mutations(void **state) {
  (void)state;
  const char subst[] = "(){}[]0x -\"#\n,!<";
  size_t n = strlen(valid);
  char *copy = malloc(n + 1);
  for (size_t pos = 0; pos < n; pos++) {
    for (size_t s = 0; s < sizeof subst - 1; s++) {
      memcpy(copy, valid, n + 1);
      copy[pos] = subst[s];
      parse_any(copy, n);
    }
    /* and deletion of the byte */
    memcpy(copy, valid, pos);
    memcpy(copy + pos, valid + pos + 1, n - pos);
    parse_any(copy, n - 1);
  }
  free(copy);
}

/* Generates a text with `depth` nested parentheses around 1. */
static char *nested_parens(int depth) {
  size_t n = (size_t)depth * 2 + 64;
  char *s = malloc(n);
  int k = snprintf(s, n, "func f() {\n  evaluate ");
  for (int i = 0; i < depth; i++) s[k++] = '(';
  s[k++] = '1';
  for (int i = 0; i < depth; i++) s[k++] = ')';
  snprintf(s + k, n - (size_t)k, "\n}\n");
  return s;
}

static void test_limits(void **state) {
  (void)state;
  ts_func *f;
  ts_error err;
  char *s = nested_parens(250);
  assert_int_equal(ts_func_parse(s, strlen(s), NULL, &f, &err), TS_OK);
  ts_func_free(f);
  free(s);
  s = nested_parens(300);
  assert_int_equal(ts_func_parse(s, strlen(s), NULL, &f, &err), TS_EPARSE);
  assert_non_null(strstr(err.msg, "nesting deeper than 256 levels"));
  free(s);
  s = nested_parens(100000);
  assert_int_equal(ts_func_parse(s, strlen(s), NULL, &f, &err), TS_EPARSE);
  assert_null(f);
  free(s);
  /* Identifiers of 255 characters are fine, 256 are not. */
  char text[1024];
  for (int len = 255; len <= 256; len++) {
    char name[300];
    memset(name, 'a', (size_t)len);
    name[len] = 0;
    snprintf(text, sizeof text, "func f(%s: int8[1]) {\n}\n", name);
    int rc = ts_func_parse(text, strlen(text), NULL, &f, &err);
    assert_int_equal(rc, len == 255 ? TS_OK : TS_EPARSE);
    if (rc == TS_OK) ts_func_free(f);
  }
  /* Strings up to 64 KiB. */
  for (int len = 60000; len <= 70000; len += 10000) {
    size_t n = (size_t)len + 64;
    char *t = malloc(n);
    int k = snprintf(t, n, "func f() attrs {\"k\": \"");
    memset(t + k, 'z', (size_t)len);
    snprintf(t + k + len, n - (size_t)k - (size_t)len, "\"} {\n}\n");
    int rc = ts_func_parse(t, strlen(t), NULL, &f, &err);
    assert_int_equal(rc, len == 60000 ? TS_OK : TS_EPARSE);
    if (rc == TS_OK) {
      assert_int_equal(strlen(ts_func_find_attr(f, "k")->s), 60000);
      ts_func_free(f);
    } else {
      assert_non_null(strstr(err.msg, "string longer than"));
    }
    free(t);
  }
  /* Many parameters: fine up to the limit. */
  size_t cap = 40000;
  char *t = malloc(cap);
  int k = snprintf(t, cap, "func f(");
  for (int i = 0; i < 1025; i++)
    k += snprintf(t + k, cap - (size_t)k, "%sp%d: int8[1]", i ? ", " : "", i);
  snprintf(t + k, cap - (size_t)k, ") {\n}\n");
  assert_int_equal(ts_func_parse(t, strlen(t), NULL, &f, &err), TS_EPARSE);
  assert_non_null(strstr(err.msg, "more than 1024 parameters"));
  free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_malformed_files),  cmocka_unit_test(test_messages),
      cmocka_unit_test(test_empty_and_binary), cmocka_unit_test(test_prefixes),
      cmocka_unit_test(test_mutations),        cmocka_unit_test(test_limits),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
