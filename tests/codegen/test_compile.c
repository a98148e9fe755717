/*
 * test_compile.c — every operator of the library, unscheduled, compiled
 * for the host through lowering + LLVM + ORC and run through the runtime:
 * outputs equal the reference interpreter's on seeded inputs, for every
 * dtype the library supports.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "check.h"

static const char *const specs[] = {
    "matmul M=8 N=12 K=16",
    "matmul M=8 N=12 K=16 transpose_a=1",
    "matmul M=8 N=12 K=16 transpose_b=1",
    "matmul M=7 N=5 K=3 transpose_a=1 transpose_b=1 dtype=float64",
    "matmul M=8 N=8 K=32 dtype=bfloat16",
    "matmul M=8 N=8 K=32 dtype=float16",
    "matmul M=8 N=8 K=32 dtype=int8",
    "matmul M=8 N=8 K=32 dtype=uint8",
    "batch_matmul B=2 M=4 N=6 K=8",
    "dense M=4 N=6 K=8",
    "dense M=4 N=6 K=8 bias=0",
    "conv2d_nchw N=1 H=7 W=7 CI=4 CO=6 KH=3 KW=3 stride=2 pad=1",
    "conv2d_nhwc N=2 H=6 W=6 CI=4 CO=4 KH=3 KW=3 pad=1 dilation=2 groups=2",
    "conv2d_nhwc N=1 H=5 W=5 CI=4 CO=8 KH=1 KW=1 dtype=int8",
    "depthwise_conv2d_nhwc N=1 H=8 W=8 C=4 KH=3 KW=3 stride=2 pad=1",
    "conv2d_transpose_nchw N=1 H=4 W=4 CI=3 CO=2 KH=3 KW=3 stride=2 pad=1",
    "pool2d_nhwc N=1 H=6 W=6 C=3 KH=3 KW=3 stride=2 pad=1 kind=max",
    "pool2d_nhwc N=1 H=6 W=6 C=3 KH=2 KW=2 stride=2 kind=avg",
    "softmax N=4 D=33",
    "layer_norm N=3 D=20",
    "elementwise op=add shape=3x5",
    "elementwise op=mul shape=4x4 dtype=bfloat16",
    "elementwise op=relu shape=17",
    "elementwise op=gelu shape=2x9",
    "elementwise op=sigmoid shape=10",
    "elementwise op=tanh shape=3x3 dtype=float16",
    "reduce op=sum N=5 D=7",
    "reduce op=max N=5 D=7 dtype=int32",
    "transpose shape=2x3x4 perm=2x0x1",
    "layout_transform N=1 C=32 H=3 W=2 src=NCHW dst=NCHW16c",
    "layout_transform N=2 C=3 H=2 W=2 src=NCHW dst=NHWC",
    "pad shape=3x4 before=1x2 after=2x0",
};

static void test_every_operator(void **state) {
  (void)state;
  int failures = 0;
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
    ts_workload *w = NULL;
    ts_error err;
    ts_error_clear(&err);
    int rc = ts_workload_from_spec(specs[i], &w, &err);
    if (rc == TS_OK) rc = check_compiled(w->func, NULL, 2, 7 + i, &err);
    if (rc != TS_OK) {
      printf("FAIL %s: %s\n", specs[i], err.msg);
      failures++;
    }
    ts_workload_free(w);
  }
  assert_int_equal(failures, 0);
}

/* Counts the vector divisions ("fdiv ... <N x float>") in LLVM IR text. */
static int vector_fdivs(const char *ir) {
  int n = 0;
  for (const char *p = strstr(ir, "fdiv "); p; p = strstr(p + 1, "fdiv ")) {
    const char *eol = strchr(p, '\n');
    const char *lt = strchr(p, '<');
    if (lt && (!eol || lt < eol)) n++;
  }
  return n;
}

/* softmax divides every element of a row by the row's sum: the code
 * generator lets LLVM compute the reciprocal once per row and multiply, so
 * the optimized IR has no vector division left (a vector divide costs
 * several multiplies), and the result still matches the interpreter. */
static void test_division_by_invariant(void **state) {
  (void)state;
  ts_workload *w = NULL;
  ts_target *host = NULL;
  ts_error err;
  ts_error_clear(&err);
  assert_int_equal(ts_workload_from_spec("softmax N=4 D=256", &w, &err), TS_OK);
  assert_int_equal(ts_target_host(&host, &err), TS_OK);
  ts_build_options o = ts_build_defaults();
  o.keep_llvm_ir = true;
  ts_build_result br = {0};
  int rc = ts_build(w->func, host, &o, &br, &err);
  if (rc) printf("build: %s\n", err.msg);
  assert_int_equal(rc, TS_OK);
  assert_non_null(br.llvm_ir);
  assert_non_null(strstr(br.llvm_ir, "fdiv"));
  assert_int_equal(vector_fdivs(br.llvm_ir), 0);
  rc = check_compiled(w->func, host, 2, 3, &err);
  if (rc) printf("softmax: %s\n", err.msg);
  assert_int_equal(rc, TS_OK);
  ts_build_result_clear(&br);
  ts_target_free(host);
  ts_workload_free(w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_operator),
      cmocka_unit_test(test_division_by_invariant),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
