/*
 * test_args.c — argument set-up: aligned buffers of the right size for
 * every dtype and rank (including 0-d and empty), inputs from the seeded
 * generator and outputs zeroed, determinism per seed, output comparison
 * naming the first mismatch, and bad argument specs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"

static ts_rt_arg_spec spec(ts_dtype t, ts_rt_arg_role role, int ndim, ...) {
  ts_rt_arg_spec s;
  memset(&s, 0, sizeof s);
  s.dtype = t;
  s.role = role;
  s.ndim = ndim;
  va_list ap;
  va_start(ap, ndim);
  for (int d = 0; d < ndim && d < TS_RT_MAX_NDIM; d++)
    s.shape[d] = va_arg(ap, int64_t);
  va_end(ap);
  return s;
}

#define IN TS_RT_ARG_INPUT
#define OUT TS_RT_ARG_OUTPUT

static void make_specs(ts_rt_arg_spec *s) {
  s[0] = spec(TS_FLOAT32, IN, 2, (int64_t)4, (int64_t)8);
  s[1] = spec(TS_INT8, IN, 3, (int64_t)3, (int64_t)5, (int64_t)2);
  s[2] = spec(TS_FLOAT32, OUT, 2, (int64_t)4, (int64_t)8);
  s[3] = spec(TS_BFLOAT16, OUT, 0);
  s[4] = spec(TS_BOOL, IN, 1, (int64_t)7);
  s[5] = spec(TS_FLOAT64, IN, 2, (int64_t)0, (int64_t)3);
}

static void test_create(void **state) {
  (void)state;
  ts_rt_arg_spec specs[6];
  make_specs(specs);
  ts_rt_args *a = NULL;
  assert_int_equal(ts_rt_args_create(specs, 6, 42, &a, NULL), TS_OK);
  assert_int_equal(ts_rt_args_count(a), 6);
  int64_t elems[6] = {32, 30, 32, 1, 7, 0};
  size_t bytes[6] = {128, 30, 128, 2, 7, 0};
  void *const *data = ts_rt_args_data(a);
  for (int i = 0; i < 6; i++) {
    assert_int_equal(ts_rt_args_elems(a, i), elems[i]);
    assert_int_equal(ts_rt_args_bytes(a, i), bytes[i]);
    assert_non_null(data[i]);
    assert_int_equal((uintptr_t)data[i] % 64, 0);
    assert_int_equal(ts_rt_args_spec(a, i)->role, specs[i].role);
    if (specs[i].role == OUT) {
      for (size_t b = 0; b < bytes[i]; b++)
        assert_int_equal(((unsigned char *)data[i])[b], 0);
    } else if (bytes[i] > 0) {
      void *want = malloc(bytes[i]);
      ts_host_fill_random(want, specs[i].dtype, elems[i], 42 + (uint64_t)i);
      assert_memory_equal(data[i], want, bytes[i]);
      free(want);
    }
  }
  /* Same seed, same bytes; another seed, other inputs. */
  ts_rt_args *same = NULL, *other = NULL;
  assert_int_equal(ts_rt_args_create(specs, 6, 42, &same, NULL), TS_OK);
  assert_int_equal(ts_rt_args_create(specs, 6, 43, &other, NULL), TS_OK);
  for (int i = 0; i < 6; i++)
    assert_memory_equal(data[i], ts_rt_args_data(same)[i], bytes[i]);
  assert_memory_not_equal(data[0], ts_rt_args_data(other)[0], bytes[0]);
  ts_rt_args_free(same);
  ts_rt_args_free(other);
  /* No arguments at all is fine. */
  ts_rt_args *none = NULL;
  assert_int_equal(ts_rt_args_create(NULL, 0, 1, &none, NULL), TS_OK);
  assert_int_equal(ts_rt_args_count(none), 0);
  ts_rt_args_free(none);
  ts_rt_args_free(a);
  ts_rt_args_free(NULL);
}

static void test_compare(void **state) {
  (void)state;
  ts_rt_arg_spec specs[6];
  make_specs(specs);
  ts_rt_args *got = NULL, *want = NULL;
  assert_int_equal(ts_rt_args_create(specs, 6, 7, &got, NULL), TS_OK);
  assert_int_equal(ts_rt_args_create(specs, 6, 7, &want, NULL), TS_OK);
  float *wo = ts_rt_args_data(want)[2], *go = ts_rt_args_data(got)[2];
  for (int i = 0; i < 32; i++) wo[i] = go[i] = (float)i * 0.25f;
  ts_host_set(ts_rt_args_data(want)[3], TS_BFLOAT16, 0, 1.5);
  ts_host_set(ts_rt_args_data(got)[3], TS_BFLOAT16, 0, 1.5);
  ts_error err;
  ts_error_clear(&err);
  assert_int_equal(ts_rt_args_compare(got, want, &err), TS_OK);
  /* A tiny float difference is within tolerance. */
  go[3] += 1e-7f;
  assert_int_equal(ts_rt_args_compare(got, want, &err), TS_OK);
  go[5] = 101.0f;
  go[9] = -3.0f;
  ts_error_clear(&err);
  assert_int_equal(ts_rt_args_compare(got, want, &err), TS_ERANGE);
  printf("  %s\n", err.msg);
  assert_non_null(strstr(err.msg, "output 2 float32[4, 8]"));
  assert_non_null(strstr(err.msg, "2 of 32 elements differ"));
  assert_non_null(strstr(err.msg, "first at index 5: got 101, want 1.25"));
  /* The 0-d bfloat16 output is compared too. */
  go[5] = wo[5];
  go[9] = wo[9];
  ts_host_set(ts_rt_args_data(got)[3], TS_BFLOAT16, 0, 2.0);
  ts_error_clear(&err);
  assert_int_equal(ts_rt_args_compare(got, want, &err), TS_ERANGE);
  assert_non_null(strstr(err.msg, "output 3 bfloat16[]"));
  /* Zeroing the outputs again. */
  ts_rt_args_zero_outputs(got);
  for (int i = 0; i < 32; i++) assert_true(go[i] == 0.0f);
  assert_float_equal(ts_host_get(ts_rt_args_data(got)[0], TS_FLOAT32, 0),
                     ts_host_get(ts_rt_args_data(want)[0], TS_FLOAT32, 0), 0);
  /* Different argument lists cannot be compared. */
  ts_rt_args *fewer = NULL;
  assert_int_equal(ts_rt_args_create(specs, 5, 7, &fewer, NULL), TS_OK);
  ts_error_clear(&err);
  assert_int_equal(ts_rt_args_compare(got, fewer, &err), TS_EINVAL);
  assert_non_null(strstr(err.msg, "6 and 5 arguments"));
  ts_rt_args_free(fewer);
  specs[1].shape[0] = 4;
  ts_rt_args *reshaped = NULL;
  assert_int_equal(ts_rt_args_create(specs, 6, 7, &reshaped, NULL), TS_OK);
  ts_error_clear(&err);
  assert_int_equal(ts_rt_args_compare(got, reshaped, &err), TS_EINVAL);
  assert_non_null(strstr(err.msg, "argument 1 differs"));
  assert_non_null(strstr(err.msg, "int8[3, 5, 2]"));
  ts_rt_args_free(reshaped);
  ts_rt_args_free(got);
  ts_rt_args_free(want);
}

static void test_bad_specs(void **state) {
  (void)state;
  struct {
    ts_rt_arg_spec spec;
    int code;
    const char *message;
  } cases[] = {
      {spec(TS_FLOAT32, IN, 9), TS_EINVAL, "ndim 9"},
      {spec(TS_FLOAT32, IN, -1), TS_EINVAL, "ndim -1"},
      {spec(TS_FLOAT32, IN, 2, (int64_t)4, (int64_t)-2), TS_EINVAL,
       "shape[1] = -2 is negative"},
      {spec(TS_DTYPE(TS_DT_FLOAT, 32, 16), IN, 1, (int64_t)4), TS_EINVAL,
       "scalar"},
      {spec(TS_HANDLE, IN, 1, (int64_t)4), TS_EINVAL, "handle"},
      {spec(TS_DTYPE(TS_DT_FLOAT, 13, 1), IN, 1, (int64_t)4), TS_EINVAL,
       "dtype"},
      {spec(TS_FLOAT32, (ts_rt_arg_role)5, 1, (int64_t)4), TS_EINVAL,
       "bad role 5"},
      {spec(TS_FLOAT32, OUT, 3, (int64_t)1 << 20, (int64_t)1 << 20,
            (int64_t)1 << 20),
       TS_ENOMEM, "exceeds the limit"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ts_rt_arg_spec specs[2] = {spec(TS_FLOAT32, IN, 1, (int64_t)4),
                               cases[i].spec};
    ts_rt_args *a = NULL;
    ts_error err;
    ts_error_clear(&err);
    int rc = ts_rt_args_create(specs, 2, 1, &a, &err);
    if (rc != cases[i].code || !strstr(err.msg, cases[i].message))
      fprintf(stderr, "case %zu: rc %d '%s'\n", i, rc, err.msg);
    assert_int_equal(rc, cases[i].code);
    assert_null(a);
    assert_non_null(strstr(err.msg, "argument 1"));
    assert_non_null(strstr(err.msg, cases[i].message));
  }
  ts_rt_args *a = NULL;
  assert_int_equal(ts_rt_args_create(NULL, 2, 1, &a, NULL), TS_EINVAL);
  assert_int_equal(ts_rt_args_create(NULL, -1, 1, &a, NULL), TS_EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_create),
      cmocka_unit_test(test_compare),
      cmocka_unit_test(test_bad_specs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
