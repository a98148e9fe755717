/*
 * test_spec.c — workload specs: every operator builds with its defaults and
 * with non-default keys; canonical spec and short name; malformed specs are
 * rejected with TS_EINVAL and a message naming the key or operator; the
 * operator names and usage strings.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tir/tir.h"

/* One minimal spec per operator (required keys only). */
static const char *const minimal_specs[] = {
    "matmul M=4 N=5 K=6",
    "batch_matmul B=2 M=3 N=4 K=5",
    "dense M=4 N=8 K=16",
    "conv2d_nchw N=1 H=8 W=8 CI=4 CO=8 KH=3 KW=3",
    "conv2d_nhwc N=1 H=8 W=8 CI=4 CO=8 KH=3 KW=3",
    "depthwise_conv2d_nhwc N=1 H=8 W=8 C=4 KH=3 KW=3",
    "conv2d_transpose_nchw N=1 H=4 W=4 CI=2 CO=3 KH=3 KW=3",
    "pool2d_nhwc N=1 H=8 W=8 C=4 KH=2 KW=2",
    "softmax N=4 D=8",
    "layer_norm N=4 D=8",
    "elementwise op=relu shape=2x3x4",
    "reduce op=sum N=3 D=5",
    "transpose shape=2x3x4 perm=2x0x1",
    "layout_transform N=1 C=32 H=2 W=3",
    "pad shape=2x3 before=1x0 after=0x2",
};
#define N_MINIMAL ((int)(sizeof minimal_specs / sizeof minimal_specs[0]))

static ts_workload *build(const char *spec) {
  ts_workload *w = NULL;
  ts_error err = {0};
  int rc = ts_workload_from_spec(spec, &w, &err);
  if (rc != TS_OK) fail_msg("'%s' failed: %s", spec, err.msg);
  assert_non_null(w);
  assert_non_null(w->func);
  return w;
}

static void test_every_op_builds_with_defaults(void **state) {
  (void)state;
  const char *const *names = ts_op_names();
  int n_names = 0;
  while (names[n_names]) n_names++;
  assert_int_equal(n_names, N_MINIMAL);
  for (int i = 0; i < N_MINIMAL; i++) {
    ts_workload *w = build(minimal_specs[i]);
    /* every operator of the list is covered, in order */
    assert_string_equal(w->op, names[i]);
    size_t n = strlen(names[i]);
    assert_memory_equal(w->spec, names[i], n);
    assert_int_equal(w->spec[n], ' ');
    assert_memory_equal(w->name, names[i], n);
    assert_int_equal(w->name[n], '_');
    assert_true(ts_func_n_params(w->func) >= 2);
    /* defaults are filled in: dtype always appears */
    assert_non_null(strstr(w->spec, " dtype=float32"));
    assert_non_null(strstr(w->name, "float32"));
    assert_true(w->flops >= 0);
    ts_workload_free(w);
  }
}

static void test_non_default_keys(void **state) {
  (void)state;
  static const struct {
    const char *spec, *canonical_part, *name;
  } cases[] = {
      {"matmul M=4 N=5 K=6 transpose_a=1 transpose_b=1 dtype=bfloat16",
       "transpose_a=1 transpose_b=1 dtype=bfloat16 out_dtype=float32",
       "matmul_4x5x6_bfloat16_transpose_a1_transpose_b1"},
      {"matmul M=4 N=5 K=6 dtype=float16 out_dtype=float16",
       "dtype=float16 out_dtype=float16", "matmul_4x5x6_float16_outfloat16"},
      {"batch_matmul B=2 M=3 N=4 K=5 transpose_b=1 dtype=int8",
       "transpose_b=1 dtype=int8 out_dtype=int32",
       "batch_matmul_2x3x4x5_int8_transpose_b1"},
      {"dense M=4 N=8 K=16 bias=0 dtype=uint8", "bias=0 dtype=uint8",
       "dense_4x8x16_uint8_bias0"},
      {"conv2d_nchw N=2 H=9 W=9 CI=4 CO=8 KH=3 KW=3 stride=2 pad=1 "
       "dilation=2 groups=2 dtype=float64",
       "stride=2 pad=1 dilation=2 groups=2 dtype=float64 out_dtype=float64",
       "conv2d_nchw_2x9x9x4x8x3x3_float64_stride2_pad1_dilation2_groups2"},
      {"conv2d_nhwc N=1 H=56 W=56 CI=64 CO=64 KH=3 KW=3 stride=1 pad=1 "
       "dtype=float32",
       "stride=1 pad=1 dilation=1 groups=1 dtype=float32 out_dtype=float32",
       "conv2d_nhwc_1x56x56x64x64x3x3_float32_pad1"},
      {"conv2d_nhwc N=1 H=7 W=7 CI=64 CO=64 KH=3 KW=3 pad=1 weight_block=16",
       "groups=1 weight_block=16 dtype=float32 out_dtype=float32",
       "conv2d_nhwc_1x7x7x64x64x3x3_float32_pad1_weight_block16"},
      {"depthwise_conv2d_nhwc N=1 H=8 W=8 C=4 KH=3 KW=3 stride=2 pad=1 "
       "dtype=int8",
       "stride=2 pad=1 dtype=int8 out_dtype=int32",
       "depthwise_conv2d_nhwc_1x8x8x4x3x3_int8_stride2_pad1"},
      {"conv2d_transpose_nchw N=1 H=4 W=4 CI=2 CO=3 KH=3 KW=3 stride=2 pad=1",
       "stride=2 pad=1",
       "conv2d_transpose_nchw_1x4x4x2x3x3x3_float32_stride2_"
       "pad1"},
      {"pool2d_nhwc N=1 H=8 W=8 C=4 KH=3 KW=3 stride=2 pad=1 kind=avg",
       "stride=2 pad=1 kind=avg",
       "pool2d_nhwc_1x8x8x4x3x3_float32_stride2_"
       "pad1_kindavg"},
      {"pool2d_nhwc N=1 H=8 W=8 C=4 KH=3 KW=3 pad=1 dtype=int32", "kind=max",
       "pool2d_nhwc_1x8x8x4x3x3_int32_pad1"},
      {"softmax N=4 D=8 dtype=float64", "dtype=float64", "softmax_4x8_float64"},
      {"layer_norm N=4 D=8 dtype=bfloat16", "dtype=bfloat16",
       "layer_norm_4x8_bfloat16"},
      {"elementwise op=gelu shape=2x3 dtype=float16", "op=gelu shape=2x3",
       "elementwise_gelu_2x3_float16"},
      {"elementwise op=add shape=7 dtype=int32", "op=add shape=7",
       "elementwise_add_7_int32"},
      {"reduce op=max N=3 D=5 dtype=uint8", "op=max N=3 D=5",
       "reduce_max_3x5_uint8"},
      {"transpose shape=2x3 perm=1x0 dtype=int8", "shape=2x3 perm=1x0",
       "transpose_2x3_1x0_int8"},
      {"layout_transform N=1 C=32 H=2 W=3 dst=NCHW16c", "src=NCHW dst=NCHW16c",
       "layout_transform_1x32x2x3_float32_dstNCHW16c"},
      {"layout_transform N=1 C=32 H=2 W=3 src=NCHW16c dst=NHWC",
       "src=NCHW16c dst=NHWC", "layout_transform_1x32x2x3_float32_srcNCHW16c"},
      {"pad shape=2x3x4 before=0x1x2 after=3x0x1 dtype=bfloat16",
       "before=0x1x2 after=3x0x1", "pad_2x3x4_0x1x2_3x0x1_bfloat16"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ts_workload *w = build(cases[i].spec);
    if (!strstr(w->spec, cases[i].canonical_part))
      fail_msg("'%s': canonical '%s' lacks '%s'", cases[i].spec, w->spec,
               cases[i].canonical_part);
    assert_string_equal(w->name, cases[i].name);
    ts_workload_free(w);
  }
}

static void test_canonical_spec(void **state) {
  (void)state;
  ts_workload *w = build("  matmul\tK=32 N=16\nM=8  ");
  assert_string_equal(w->op, "matmul");
  assert_string_equal(w->spec, "matmul M=8 N=16 K=32 transpose_a=0 "
                               "transpose_b=0 dtype=float32 "
                               "out_dtype=float32");
  assert_string_equal(w->name, "matmul_8x16x32_float32");
  assert_true(w->flops == 2.0 * 8 * 16 * 32);

  /* the canonical spec rebuilds the same function and canonical spec */
  ts_workload *again = build(w->spec);
  assert_string_equal(again->spec, w->spec);
  assert_string_equal(again->name, w->name);
  assert_true(ts_func_equal(again->func, w->func));
  char h1[33], h2[33];
  ts_hash128_hex(ts_func_hash(w->func), h1);
  ts_hash128_hex(ts_func_hash(again->func), h2);
  assert_string_equal(h1, h2);
  ts_workload_free(again);

  /* explicit defaults give the same canonical spec; a different value not */
  ts_workload *same =
      build("matmul M=8 N=16 K=32 transpose_a=0 dtype=float32 out_dtype=auto");
  assert_string_equal(same->spec, w->spec);
  ts_workload_free(same);
  ts_workload *other = build("matmul M=8 N=16 K=32 transpose_a=1");
  assert_string_not_equal(other->spec, w->spec);
  assert_false(ts_func_equal(other->func, w->func));
  ts_workload_free(other);
  ts_workload_free(w);

  /* every minimal spec's canonical form round-trips */
  for (int i = 0; i < N_MINIMAL; i++) {
    ts_workload *a = build(minimal_specs[i]);
    ts_workload *b = build(a->spec);
    assert_string_equal(a->spec, b->spec);
    assert_string_equal(a->name, b->name);
    assert_true(a->flops == b->flops);
    assert_true(ts_func_equal(a->func, b->func));
    ts_workload_free(a);
    ts_workload_free(b);
  }
}

static void test_out_dtype_defaults(void **state) {
  (void)state;
  static const struct {
    const char *dtype, *out;
  } cases[] = {
      {"float32", "float32"},  {"float64", "float64"}, {"float16", "float32"},
      {"bfloat16", "float32"}, {"int8", "int32"},      {"uint8", "int32"},
      {"int32", "int32"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char spec[128], want[64];
    snprintf(spec, sizeof spec, "matmul M=2 N=2 K=2 dtype=%s", cases[i].dtype);
    ts_workload *w = build(spec);
    snprintf(want, sizeof want, "out_dtype=%s", cases[i].out);
    assert_non_null(strstr(w->spec, want));
    /* the output parameter has the out dtype, the inputs the dtype */
    char buf[32];
    assert_string_equal(
        ts_dtype_str(ts_buffer_dtype(ts_func_param(w->func, 0)), buf),
        cases[i].dtype);
    assert_string_equal(
        ts_dtype_str(ts_buffer_dtype(ts_func_param(w->func, 2)), buf),
        cases[i].out);
    ts_workload_free(w);
  }
}

/* Malformed specs: each gives TS_EINVAL, no workload, and a message with
 * the fragment. */
static void test_malformed_specs(void **state) {
  (void)state;
  static const struct {
    const char *spec, *fragment;
  } cases[] = {
      {"", "operator"},
      {"   \t ", "operator"},
      {"matmull M=1 N=1 K=1", "unknown operator 'matmull'"},
      {"matmull M=1 N=1 K=1", "batch_matmul"}, /* lists the known ones */
      {"M=1 N=1 K=1", "unknown operator 'M=1'"},
      {"matmul M=1 N=2", "missing required key 'K'"},
      {"matmul M=1 N=2 K=3 Q=4", "unknown key 'Q'"},
      {"matmul M=1 N=2 K=3 Q=4", "transpose_a"}, /* lists the valid keys */
      {"matmul M=1 N=2 K=3 =4", "unknown key ''"},
      {"matmul M=1 M=2 N=1 K=1", "'M' is given more than once"},
      {"matmul M=x N=1 K=1", "M='x' is not an integer"},
      {"matmul M=1.5 N=1 K=1", "M='1.5' is not an integer"},
      {"matmul M= N=1 K=1", "M='' is not an integer"},
      {"matmul M=0 N=1 K=1", "M=0 is out of range"},
      {"matmul M=-3 N=1 K=1", "M=-3 is out of range"},
      {"matmul M=99999999999999999999999 N=1 K=1", "M=999"},
      {"matmul M=1 N=1 K=1 transpose_a=2", "transpose_a=2 is out of range"},
      {"matmul M=1 N=1 K=1 dtype=float31", "dtype='float31' is not a data"},
      {"matmul M=1 N=1 K=1 dtype=int16", "dtype=int16 is not supported"},
      {"matmul M=1 N=1 K=1 dtype=float32x4", "dtype=float32x4"},
      {"matmul M=1 N=1 K=1 out_dtype=int32", "out_dtype=int32"},
      {"matmul M=1 N=1 K=1 out_dtype=auto2", "out_dtype='auto2'"},
      {"matmul M=1 N=1 K=1 junk", "'junk' is not key=value"},
      {"matmul M=65536 N=65536 K=1", "tensor 'C'"},
      {"matmul M=65536 N=65536 K=1", "2^31"},
      {"batch_matmul M=1 N=1 K=1", "missing required key 'B'"},
      {"dense M=1 N=1 K=1 bias=yes", "bias='yes' is not an integer"},
      {"conv2d_nchw N=1 H=3 W=3 CI=4 CO=4 KH=5 KW=3", "KH=5"},
      {"conv2d_nhwc N=1 H=3 W=3 CI=4 CO=4 KH=3 KW=4 pad=0", "KW=4"},
      {"conv2d_nchw N=1 H=5 W=5 CI=4 CO=4 KH=3 KW=3 dilation=3", "KH=3"},
      {"conv2d_nchw N=1 H=3 W=3 CI=4 CO=4 KH=3 KW=3 groups=3",
       "groups=3 does not divide CI=4"},
      {"conv2d_nhwc N=1 H=3 W=3 CI=4 CO=6 KH=3 KW=3 groups=4",
       "groups=4 does not divide"},
      {"conv2d_nhwc N=1 H=3 W=3 CI=4 CO=6 KH=3 KW=3 stride=0", "stride=0"},
      {"conv2d_nhwc N=1 H=3 W=3 CI=4 CO=6 KH=3 KW=3 pad=-1", "pad=-1"},
      {"conv2d_nhwc N=1 H=3 W=3 CI=4 CO=6 KH=3 KW=3 weight_block=4",
       "weight_block=4 does not divide CO=6"},
      {"conv2d_nchw N=1 H=3 W=3 CI=4 CO=6 KH=3 KW=3 weight_block=2",
       "conv2d_nhwc only"},
      {"conv2d_nhwc N=1 H=3 W=3 CI=4 CO=6 KH=3 KW=3 groups=2 weight_block=3",
       "needs groups=1"},
      {"depthwise_conv2d_nhwc N=1 H=2 W=2 C=1 KH=3 KW=1", "KH=3"},
      {"depthwise_conv2d_nhwc N=1 H=2 W=2 C=1 KH=1 KW=1 groups=1",
       "unknown key 'groups'"},
      {"conv2d_transpose_nchw N=1 H=2 W=2 CI=1 CO=1 KH=2 KW=2 pad=2", "pad=2"},
      {"conv2d_transpose_nchw N=1 H=1 W=1 CI=1 CO=1 KH=2 KW=2 pad=1", "pad=1"},
      {"pool2d_nhwc N=1 H=4 W=4 C=1 KH=2 KW=2 kind=min", "kind='min'"},
      {"pool2d_nhwc N=1 H=4 W=4 C=1 KH=2 KW=2 kind=avg dtype=int32",
       "kind=avg"},
      {"pool2d_nhwc N=1 H=4 W=4 C=1 KH=5 KW=2", "KH=5"},
      {"softmax N=1 D=2 dtype=int8", "dtype=int8 is not supported by softmax"},
      {"layer_norm N=1", "missing required key 'D'"},
      {"elementwise op=gelu shape=2 dtype=int8", "op=gelu"},
      {"elementwise op=foo shape=2", "op='foo' is not one of"},
      {"elementwise shape=2", "missing required key 'op'"},
      {"elementwise op=add shape=2xx3", "shape='2xx3'"},
      {"elementwise op=add shape=x", "shape='x'"},
      {"elementwise op=add shape=2x0", "shape=2x0 is out of range"},
      {"elementwise op=add shape=1x1x1x1x1x1x1x1x1", "shape=1x1x1x1x1x1x1x1x1"},
      {"elementwise op=add shape=2147483647x2147483647x2147483647x2147483647",
       "2^31"},
      {"elementwise op=add shape=2147483648", "shape=2147483648"},
      {"reduce op=mean N=2 D=2", "op='mean'"},
      {"transpose shape=2x3 perm=0x0", "perm is not a permutation"},
      {"transpose shape=2x3 perm=0x2", "perm is not a permutation"},
      {"transpose shape=2x3 perm=0x1x2", "perm has rank 3"},
      {"layout_transform N=1 C=3 H=2 W=2 dst=NCHW16c", "NCHW16c"},
      {"layout_transform N=1 C=3 H=2 W=2 dst=NCHW16c", "C=3"},
      {"layout_transform N=1 C=16 H=1 W=1 src=NHWC dst=NHWC", "dst=NHWC"},
      {"layout_transform N=1 C=16 H=1 W=1 src=CHWN", "src='CHWN'"},
      {"pad shape=2x3 before=1 after=1x1", "before has rank 1"},
      {"pad shape=2x3 before=1x1 after=1x-1", "after=1x-1 is out of range"},
      {"pad shape=2x3 before=1x1", "missing required key 'after'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ts_workload *w = (ts_workload *)(uintptr_t)1;
    ts_error err = {0};
    int rc = ts_workload_from_spec(cases[i].spec, &w, &err);
    if (rc != TS_EINVAL)
      fail_msg("'%s': expected TS_EINVAL, got %d (%s)", cases[i].spec, rc,
               err.msg);
    assert_int_equal(err.code, TS_EINVAL);
    assert_null(w);
    if (!strstr(err.msg, cases[i].fragment))
      fail_msg("'%s': message '%s' lacks '%s'", cases[i].spec, err.msg,
               cases[i].fragment);
    /* a NULL error report is fine too */
    w = NULL;
    assert_int_equal(ts_workload_from_spec(cases[i].spec, &w, NULL), TS_EINVAL);
    assert_null(w);
  }
  ts_error err = {0};
  ts_workload *w = NULL;
  assert_int_equal(ts_workload_from_spec(NULL, &w, &err), TS_EINVAL);
  assert_int_equal(ts_workload_from_spec("matmul M=1 N=1 K=1", NULL, &err),
                   TS_EINVAL);
  ts_workload_free(NULL);
}

/* A long value is shown shortened, never overflowing the message. */
static void test_long_values(void **state) {
  (void)state;
  char spec[4096];
  int n = snprintf(spec, sizeof spec, "matmul M=1 N=1 K=1 dtype=");
  memset(spec + n, 'z', 3000);
  spec[n + 3000] = 0;
  ts_error err = {0};
  ts_workload *w = NULL;
  assert_int_equal(ts_workload_from_spec(spec, &w, &err), TS_EINVAL);
  assert_non_null(strstr(err.msg, "dtype='zzz"));
  assert_true(strlen(err.msg) < 300);
  assert_null(w);
}

static void test_names_and_usage(void **state) {
  (void)state;
  const char *const *names = ts_op_names();
  assert_non_null(names);
  assert_null(ts_op_usage("nope"));
  assert_null(ts_op_usage(NULL));
  assert_null(ts_op_usage("matmu"));
  assert_string_equal(ts_op_usage("matmul"),
                      "matmul M N K [transpose_a=0] [transpose_b=0] "
                      "[dtype=float32|float64|float16|bfloat16|int8|uint8|"
                      "int32] [out_dtype=auto|float32|float64|float16|"
                      "bfloat16|int32]");
  assert_non_null(strstr(ts_op_usage("pool2d_nhwc"), "[kind=max|avg]"));
  assert_non_null(strstr(ts_op_usage("elementwise"),
                         "op=add|mul|relu|gelu|sigmoid|tanh shape=AxBx..."));
  assert_non_null(strstr(ts_op_usage("softmax"),
                         "[dtype=float32|float64|float16|"
                         "bfloat16]"));
  assert_null(strstr(ts_op_usage("softmax"), "int8"));
  for (int i = 0; names[i]; i++) {
    const char *u = ts_op_usage(names[i]);
    assert_non_null(u);
    assert_memory_equal(u, names[i], strlen(names[i]));
    assert_int_equal(u[strlen(names[i])], ' ');
    /* every key of the canonical spec is in the usage string */
    ts_workload *w = build(minimal_specs[i]);
    char spec[512];
    snprintf(spec, sizeof spec, "%s", w->spec);
    for (char *tok = strtok(spec, " "); tok; tok = strtok(NULL, " ")) {
      char *eq = strchr(tok, '=');
      if (!eq) continue; /* the operator name */
      *eq = 0;
      char want[64];
      snprintf(want, sizeof want, " %s", tok);
      if (!strstr(u, want)) {
        snprintf(want, sizeof want, "[%s=", tok);
        if (!strstr(u, want)) fail_msg("usage '%s' lacks key '%s'", u, tok);
      }
    }
    ts_workload_free(w);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_op_builds_with_defaults),
      cmocka_unit_test(test_non_default_keys),
      cmocka_unit_test(test_canonical_spec),
      cmocka_unit_test(test_out_dtype_defaults),
      cmocka_unit_test(test_malformed_specs),
      cmocka_unit_test(test_long_values),
      cmocka_unit_test(test_names_and_usage),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
