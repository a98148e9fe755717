/*
 * test_trace_input.c — a trace is one JSON object and nothing else: trailing
 * garbage or a second concatenated object is a parse error naming the line
 * and column where the extra input starts (from text and from a file),
 * while trailing white space and a terminating NUL are fine; workload specs
 * refuse trailing input too (an extra word, a repeated key, a stray
 * character after a value).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "schedule/schedule.h"
#include "tir/tir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *example(size_t *len) {
  FILE *f = fopen(TS_SOURCE_DIR "/docs/examples/matmul_fp32_cpu.json", "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = calloc(1, (size_t)n * 2 + 64);
  assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *len = (size_t)n;
  return text;
}

static int parse(const char *text, size_t len, ts_error *err) {
  ts_trace *t = NULL;
  ts_error_clear(err);
  int rc = ts_trace_from_json(text, len, &t, err);
  if (rc == TS_OK) {
    assert_non_null(t);
    assert_true(ts_trace_n_insts(t) > 0);
    ts_trace_free(t);
  } else {
    assert_null(t);
  }
  return rc;
}

static void test_trailing_input(void **state) {
  (void)state;
  size_t n;
  char *text = example(&n);
  ts_error err;
  assert_int_equal(parse(text, n, &err), TS_OK);
  /* white space, and a NUL counted in the length, are not input */
  strcpy(text + n, " \n\t\r\n");
  assert_int_equal(parse(text, n + 5, &err), TS_OK);
  assert_int_equal(parse(text, strlen(text) + 1, &err), TS_OK);
  /* garbage after the object */
  strcpy(text + n, "\ngarbage");
  assert_int_equal(parse(text, strlen(text), &err), TS_EPARSE);
  assert_non_null(strstr(err.msg, "unexpected input after the trace object"));
  int lines = 1;
  for (size_t i = 0; i < n; i++) lines += text[i] == '\n';
  char where[64];
  snprintf(where, sizeof where, "line %d, column 1", lines + 1);
  assert_non_null(strstr(err.msg, where));
  /* two concatenated objects */
  memcpy(text + n, text, n);
  text[2 * n] = 0;
  assert_int_equal(parse(text, 2 * n, &err), TS_EPARSE);
  assert_non_null(strstr(err.msg, "unexpected input"));
  /* a lone brace, a NUL in the middle of the rest */
  strcpy(text + n, "}");
  assert_int_equal(parse(text, n + 1, &err), TS_EPARSE);
  text[n] = 0;
  text[n + 1] = 'x';
  assert_int_equal(parse(text, n + 2, &err), TS_EPARSE);
  free(text);
}

static void test_trailing_input_in_a_file(void **state) {
  (void)state;
  size_t n;
  char *text = example(&n);
  char path[] = "/tmp/ts-trace-input-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  FILE *f = fdopen(fd, "wb");
  fwrite(text, 1, n, f);
  fputs("{\"version\": 1}\n", f);
  fclose(f);
  ts_trace *t = NULL;
  ts_error err;
  ts_error_clear(&err);
  assert_int_equal(ts_trace_from_json_file(path, &t, &err), TS_EPARSE);
  assert_null(t);
  assert_non_null(strstr(err.msg, "unexpected input"));
  unlink(path);
  free(text);
}

static void test_spec_trailing_input(void **state) {
  (void)state;
  const char *bad[] = {
      "matmul M=64 N=64 K=64 garbage",
      "matmul M=64 N=64 K=64 M=64",
      "matmul M=64 N=64 K=64x",
      "matmul M=64 N=64 K=64 dtype=float32;",
      "matmul M=64 N=64 K=64\nmatmul M=1 N=1 K=1",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ts_workload *w = NULL;
    ts_error err;
    ts_error_clear(&err);
    if (ts_workload_from_spec(bad[i], &w, &err) == TS_OK)
      fail_msg("accepted: %s", bad[i]);
    assert_null(w);
    assert_true(err.msg[0] != 0);
  }
  ts_workload *w = NULL;
  ts_error err;
  assert_int_equal(ts_workload_from_spec("matmul M=64 N=64 K=64", &w, &err),
                   TS_OK);
  ts_workload_free(w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_trailing_input),
      cmocka_unit_test(test_trailing_input_in_a_file),
      cmocka_unit_test(test_spec_trailing_input),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
