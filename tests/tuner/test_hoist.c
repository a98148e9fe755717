/*
 * test_hoist.c — the constant stages of a scheduled function split off
 * (ts_func_hoist_const): what goes to the prologue and what stays, and the
 * prologue run on the constants followed by the main function computing
 * what the scheduled function computes (interpreted, and for the
 * tensorized int8 product natively where the host has VNNI).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>

#include "default_check.h"
#include "runtime/runtime.h"

/* The default schedule of `spec` for `target` (caller destroys). */
static ts_sched *scheduled(const char *spec, const char *target,
                           ts_workload **w) {
  ts_target *t;
  ts_error err;
  if (ts_target_parse(target, &t, &err)) fail_msg("%s", err.msg);
  *w = workload(spec);
  ts_sched *s = NULL;
  if (ts_default_schedule((*w)->func, t, &s, &err))
    fail_msg("%s: %s", spec, err.msg);
  ts_target_free(t);
  return s;
}

/* Runs f on args: interpreted, or built for the host and run natively. */
static void run(const ts_func *f, void *const *args, bool native) {
  ts_error err;
  if (!native) {
    if (ts_interp_run(f, args, ts_func_n_params(f), NULL, &err))
      fail_msg("%s: %s", ts_func_name(f), err.msg);
    return;
  }
  ts_target *t;
  ts_build_result br;
  ts_rt_kernel *k;
  ts_runtime *rt;
  if (ts_target_host(&t, &err) || ts_build(f, t, NULL, &br, &err) ||
      ts_rt_kernel_load(br.artifact->bytes, br.artifact->n_bytes,
                        br.artifact->entry, &k, &err) ||
      ts_runtime_create(2, &rt, &err) || ts_rt_kernel_call(k, args, rt, &err))
    fail_msg("%s: %s", ts_func_name(f), err.msg);
  ts_runtime_destroy(rt);
  ts_rt_kernel_unload(k);
  ts_build_result_clear(&br);
  ts_target_free(t);
}

/* Seeded bytes for every parameter of f. */
static void **seeded_args(const ts_func *f, unsigned seed) {
  int n = ts_func_n_params(f);
  void **a = calloc((size_t)n, sizeof *a);
  for (int i = 0; i < n; i++) {
    const ts_buffer *b = ts_func_param(f, i);
    size_t bytes = (size_t)ts_buffer_bytes(b);
    unsigned char *p = malloc(bytes);
    bool fl = ts_dtype_is_float(ts_buffer_dtype(b));
    for (size_t k = 0; k < bytes; k++) {
      seed = seed * 1103515245u + 12345u;
      /* floats: small values (the top byte kept in range) */
      p[k] = fl && k % 4 == 3 ? (unsigned char)(0x3e + (seed >> 16) % 2)
                              : (unsigned char)(seed >> 16);
    }
    a[i] = p;
  }
  return a;
}

static void free_args(void **a, int n) {
  for (int i = 0; i < n; i++) free(a[i]);
  free(a);
}

/* f against its split h: the same output (parameter `out`) from the same
 * inputs, within `tol` relative for floats. */
static void check_split(const ts_func *f, const ts_hoist *h, int out,
                        double tol, bool native) {
  int n = ts_func_n_params(f);
  void **want = seeded_args(f, 7), **got = seeded_args(f, 7);
  run(f, want, native);
  /* the prologue: its constant inputs, then its outputs */
  int np = ts_func_n_params(h->prologue);
  void **pa = calloc((size_t)np, sizeof *pa);
  for (int i = 0; i < h->n_inputs; i++) pa[i] = got[h->inputs[i]];
  for (int i = h->n_inputs; i < np; i++)
    pa[i] = calloc(1, (size_t)ts_buffer_bytes(ts_func_param(h->prologue, i)));
  run(h->prologue, pa, native);
  /* the kernel: f's arguments, then the prologue's outputs */
  int nm = ts_func_n_params(h->main);
  assert_int_equal(nm, n + h->n_outputs);
  void **ma = calloc((size_t)nm, sizeof *ma);
  for (int i = 0; i < n; i++) ma[i] = got[i];
  for (int i = 0; i < h->n_outputs; i++) ma[n + i] = pa[h->n_inputs + i];
  memset(got[out], 0, (size_t)ts_buffer_bytes(ts_func_param(f, out)));
  run(h->main, ma, native);
  const ts_buffer *ob = ts_func_param(f, out);
  int64_t elems = ts_buffer_elems(ob);
  for (int64_t e = 0; e < elems; e++) {
    if (ts_dtype_is_float(ts_buffer_dtype(ob))) {
      float x = ((float *)got[out])[e], y = ((float *)want[out])[e];
      if (!(fabsf(x - y) <= tol * (1 + fabsf(y))))
        fail_msg("%s: element %lld: %g against %g", ts_func_name(f),
                 (long long)e, x, y);
    } else if (((int32_t *)got[out])[e] != ((int32_t *)want[out])[e]) {
      fail_msg("%s: element %lld: %d against %d", ts_func_name(f), (long long)e,
               ((int32_t *)got[out])[e], ((int32_t *)want[out])[e]);
    }
  }
  for (int i = h->n_inputs; i < np; i++) free(pa[i]);
  free(pa);
  free(ma);
  free_args(want, n);
  free_args(got, n);
}

static bool has_block(const ts_func *f, const char *name) {
  char *text = ts_func_print(f);
  char pat[128];
  snprintf(pat, sizeof pat, "block %s(", name);
  bool r = strstr(text, pat) != NULL;
  free(text);
  return r;
}

/* fp32 on AVX2: B packed per column panel inside the parallel loop, A
 * packed into row panels at the root. With B constant, B's packing goes to
 * the prologue (under the same panel loop) and A's stays; with nothing
 * constant nothing moves. */
static void test_fp32_panels(void **state) {
  (void)state;
  ts_workload *w;
  ts_sched *s = scheduled("matmul M=128 N=128 K=64",
                          "llvm -mcpu=x86-64-v3 -num-cores=2", &w);
  const ts_func *f = ts_sched_func(s);
  assert_true(has_block(f, "B_global"));
  ts_hoist h;
  ts_error err;
  bool none[3] = {false, false, false}, b_const[3] = {false, true, false};
  assert_int_equal(ts_func_hoist_const(f, none, &h, &err), TS_OK);
  assert_null(h.prologue);
  assert_int_equal(ts_func_hoist_const(f, b_const, &h, &err), TS_OK);
  assert_non_null(h.prologue);
  assert_int_equal(h.n_inputs, 1);
  assert_int_equal(h.inputs[0], 1);
  assert_int_equal(h.n_outputs, 1);
  assert_true(has_block(h.prologue, "B_global"));
  assert_false(has_block(h.prologue, "C"));
  assert_false(has_block(h.main, "B_global"));
  assert_true(has_block(h.main, "C"));
  assert_string_equal(
      ts_buffer_name(ts_func_param(h.main, ts_func_n_params(h.main) - 1)),
      "B_global");
  check_split(f, &h, 2, 1e-5, false);
  ts_hoist_clear(&h);
  ts_sched_destroy(s);
  ts_workload_free(w);
}

/* int8 on VNNI: A made unsigned (a stage of A: stays), B's column sums (an
 * init and a reduction) and B's VNNI packing (both to the prologue, the
 * sums read by the product's init). Run natively where the host has
 * VNNI; the split structure everywhere. */
static void test_int8_vnni(void **state) {
  (void)state;
  ts_workload *w;
  ts_sched *s = scheduled("matmul M=64 N=96 K=128 dtype=int8",
                          "llvm -mcpu=cascadelake -num-cores=2", &w);
  const ts_func *f = ts_sched_func(s);
  ts_hoist h;
  ts_error err;
  bool b_const[3] = {false, true, false};
  assert_int_equal(ts_func_hoist_const(f, b_const, &h, &err), TS_OK);
  assert_non_null(h.prologue);
  assert_int_equal(h.n_outputs, 2); /* the sums and the packed B */
  assert_true(has_block(h.prologue, "B_sum"));
  assert_true(has_block(h.prologue, "B_sum_init"));
  assert_true(has_block(h.prologue, "B_global"));
  assert_false(has_block(h.prologue, "A_u8"));
  assert_true(has_block(h.main, "A_u8"));
  assert_false(has_block(h.main, "B_sum"));
  assert_false(has_block(h.main, "B_global"));
  if (ts_rt_cpu_has("avx512vnni") == 1 && ts_rt_cpu_has("avx512bw") == 1)
    check_split(f, &h, 2, 0, true);
  ts_hoist_clear(&h);
  /* A constant instead: A's stage moves, B's stay */
  bool a_const[3] = {true, false, false};
  assert_int_equal(ts_func_hoist_const(f, a_const, &h, &err), TS_OK);
  assert_non_null(h.prologue);
  assert_true(has_block(h.prologue, "A_u8"));
  assert_false(has_block(h.prologue, "B_global"));
  ts_hoist_clear(&h);
  ts_sched_destroy(s);
  ts_workload_free(w);
}

/* A stage that reads a constant and a non-constant buffer does not move,
 * nor what only it feeds: a layer norm's stages all read the input. */
static void test_nothing_constant_enough(void **state) {
  (void)state;
  ts_workload *w;
  ts_sched *s = scheduled("layer_norm N=64 D=100",
                          "llvm -mcpu=x86-64-v3 -num-cores=2", &w);
  const ts_func *f = ts_sched_func(s);
  int n = ts_func_n_params(f);
  bool *c = calloc((size_t)n, sizeof *c);
  for (int i = 1; i < n - 1; i++) c[i] = true; /* gamma, beta */
  ts_hoist h;
  ts_error err;
  assert_int_equal(ts_func_hoist_const(f, c, &h, &err), TS_OK);
  assert_null(h.prologue);
  free(c);
  ts_sched_destroy(s);
  ts_workload_free(w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fp32_panels),
      cmocka_unit_test(test_int8_vnni),
      cmocka_unit_test(test_nothing_constant_enough),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
