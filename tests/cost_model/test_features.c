/*
 * test_features.c — per-store features. Hand-written schedules that differ
 * in exactly one way (vectorized or not, parallel or not, unrolled or not,
 * tile size, thread binding, non-temporal stores) differ exactly in the
 * entries that describe that difference; a function lowered by ts_lower (vector
 * ramps) reads like the block form; the entry list is consistent (unique names,
 * documented in docs/features.md); extraction of a scheduled 1024^3 matmul is
 * timed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codegen/codegen.h"
#include "cost_model/cost_model.h"
#include "schedule/schedule.h"

#define OK(x) assert_int_equal((x), TS_OK)

/* A matmul schedule: i split [*, ti], j split [*, tj], k split [*, tk],
 * order i0 j0 k0 i1 k1 j1, with optional kinds on i0 and j1. */
typedef struct mm_opts {
  int64_t ti, tj, tk;
  bool parallel_i0, vectorize_j1, unroll_i1, decompose;
  const char *bind_i0, *bind_j0;
} mm_opts;

static ts_sched *matmul(int64_t n, const mm_opts *o) {
  char spec[128];
  snprintf(spec, sizeof spec, "matmul M=%lld N=%lld K=%lld", (long long)n,
           (long long)n, (long long)n);
  ts_workload *w;
  ts_error err;
  OK(ts_workload_from_spec(spec, &w, &err));
  ts_sched *s;
  OK(ts_sched_create(w->func, 1, &s, &err));
  ts_workload_free(w);
  ts_rv b, l[3], i[2], j[2], k[2];
  int nl;
  OK(ts_sched_get_block(s, "C", &b));
  OK(ts_sched_get_loops(s, b, l, 3, &nl));
  int64_t fi[2] = {TS_SPLIT_INFER, o->ti}, fj[2] = {TS_SPLIT_INFER, o->tj},
          fk[2] = {TS_SPLIT_INFER, o->tk};
  OK(ts_sched_split(s, l[0], fi, 2, i));
  OK(ts_sched_split(s, l[1], fj, 2, j));
  OK(ts_sched_split(s, l[2], fk, 2, k));
  ts_rv order[6] = {i[0], j[0], k[0], i[1], k[1], j[1]};
  OK(ts_sched_reorder(s, order, 6));
  if (o->decompose) {
    ts_rv init;
    OK(ts_sched_decompose_reduction(s, b, k[0], &init));
  }
  if (o->parallel_i0) OK(ts_sched_parallel(s, i[0]));
  if (o->vectorize_j1) OK(ts_sched_vectorize(s, j[1]));
  if (o->unroll_i1) OK(ts_sched_unroll(s, i[1]));
  if (o->bind_i0) OK(ts_sched_bind(s, i[0], o->bind_i0));
  if (o->bind_j0) OK(ts_sched_bind(s, j[0], o->bind_j0));
  return s;
}

static ts_cm_features extract(const ts_sched *s, const ts_target *t) {
  ts_cm_features f;
  ts_error err;
  ts_error_clear(&err);
  int rc = ts_cm_extract(ts_sched_func(s), t, &f, &err);
  if (rc) fprintf(stderr, "extract: %s\n", err.msg);
  OK(rc);
  return f;
}

/* The row of the update store (the one with multiply-adds). */
static const float *update_row(const ts_cm_features *f) {
  for (int r = 0; r < f->n_rows; r++)
    if (f->values[(size_t)r * TS_CM_N_FEATURES + TS_CM_F_FLOAT_MAD] > 0)
      return f->values + (size_t)r * TS_CM_N_FEATURES;
  fail_msg("no row with multiply-adds");
  return NULL;
}

static float val(const float *row, int i) { return row[i]; }
static double raw(const float *row, int i) { return exp2((double)row[i]) - 1; }
/* Stored values are log2(x + 1) in float: compare raw values loosely. */
static bool near(double got, double want) {
  return fabs(got - want) <= 1e-4 * (fabs(want) + 1);
}
#define RAW_EQ(row, i, want)                                                   \
  do {                                                                         \
    if (!near(raw((row), (i)), (want)))                                        \
      fail_msg("%s = %g, expected %g", ts_cm_feature_name(i), raw((row), (i)), \
               (double)(want));                                                \
  } while (0)

/* Every entry that differs between a and b lies in [lo, hi] or in extra. */
static void differ_only_in(const float *a, const float *b, int lo, int hi,
                           const int *extra, int n_extra) {
  for (int i = 0; i < TS_CM_N_FEATURES; i++) {
    if (a[i] == b[i]) continue;
    bool allowed = i >= lo && i <= hi;
    for (int k = 0; k < n_extra; k++) allowed |= extra[k] == i;
    if (!allowed)
      fail_msg("entry %d (%s) differs: %g vs %g", i, ts_cm_feature_name(i),
               (double)a[i], (double)b[i]);
  }
}

static void test_vectorized_vs_not(void **state) {
  (void)state;
  mm_opts o = {.ti = 4, .tj = 16, .tk = 8};
  ts_sched *plain = matmul(64, &o);
  o.vectorize_j1 = true;
  ts_sched *vec = matmul(64, &o);
  ts_cm_features fp = extract(plain, NULL), fv = extract(vec, NULL);
  assert_int_equal(fp.n_rows, 2);
  assert_int_equal(fv.n_rows, 2);
  const float *p = update_row(&fp), *v = update_row(&fv);
  /* the vectorized loop: one loop of 16 lanes, the innermost spatial one */
  assert_true(val(p, TS_CM_F_VEC_NUM) == 0 &&
              val(p, TS_CM_F_VEC_POS_NONE) == 1);
  RAW_EQ(v, TS_CM_F_VEC_NUM, 1);
  RAW_EQ(v, TS_CM_F_VEC_PROD, 16);
  RAW_EQ(v, TS_CM_F_VEC_LEN_INNER, 16);
  RAW_EQ(v, TS_CM_F_VEC_LEN_OUTER, 16);
  assert_true(val(v, TS_CM_F_VEC_POS_INNER_SPATIAL) == 1);
  assert_true(val(v, TS_CM_F_VEC_POS_NONE) == 0);
  RAW_EQ(v, TS_CM_F_STORE_LANES, 16);
  RAW_EQ(p, TS_CM_F_STORE_LANES, 1);
  /* without a target, 128-bit vectors: 16 float32 lanes fill 4 */
  RAW_EQ(v, TS_CM_F_STORE_VECTOR_REGISTERS, 4);
  RAW_EQ(p, TS_CM_F_STORE_VECTOR_REGISTERS, 1);
  /* the work and the memory traffic do not change */
  assert_true(val(p, TS_CM_F_FLOAT_MAD) == val(v, TS_CM_F_FLOAT_MAD));
  RAW_EQ(v, TS_CM_F_FLOAT_MAD, 64.0f * 64 * 64);
  assert_true(val(p, TS_CM_F_OUTER_PROD) == val(v, TS_CM_F_OUTER_PROD));
  assert_true(val(p, TS_CM_F_NUM_LOOPS) == val(v, TS_CM_F_NUM_LOOPS));
  /* the index arithmetic of a vector access is done once per vector (the
   * ramp's base), so integer operation counts may change too */
  int extra[] = {TS_CM_F_STORE_LANES, TS_CM_F_STORE_VECTOR_REGISTERS,
                 TS_CM_F_INT_MAD, TS_CM_F_INT_ADDSUB, TS_CM_F_INT_MUL};
  differ_only_in(p, v, TS_CM_F_VEC_NUM, TS_CM_F_VEC_POS_NONE, extra, 5);
  /* the same vector fills two AVX2 registers and one AVX-512 register */
  ts_target *avx2, *avx512;
  ts_error err;
  OK(ts_target_parse("llvm -mcpu=x86-64-v3 -num-cores=2", &avx2, &err));
  OK(ts_target_parse("llvm -mcpu=skylake-avx512 -num-cores=2", &avx512, &err));
  ts_cm_features f2 = extract(vec, avx2), f5 = extract(vec, avx512);
  RAW_EQ(update_row(&f2), TS_CM_F_STORE_VECTOR_REGISTERS, 2);
  RAW_EQ(update_row(&f5), TS_CM_F_STORE_VECTOR_REGISTERS, 1);
  ts_cm_features_clear(&f2);
  ts_cm_features_clear(&f5);
  ts_target_free(avx2);
  ts_target_free(avx512);
  ts_cm_features_clear(&fp);
  ts_cm_features_clear(&fv);
  ts_sched_destroy(plain);
  ts_sched_destroy(vec);
}

static void test_parallel_vs_not(void **state) {
  (void)state;
  ts_target *t;
  ts_error err;
  OK(ts_target_parse("llvm -mcpu=skylake-avx512 -num-cores=3", &t, &err));
  mm_opts o = {.ti = 4, .tj = 16, .tk = 8};
  ts_sched *plain = matmul(64, &o);
  o.parallel_i0 = true;
  ts_sched *par = matmul(64, &o);
  ts_cm_features fp = extract(plain, t), fq = extract(par, t);
  const float *p = update_row(&fp), *q = update_row(&fq);
  RAW_EQ(q, TS_CM_F_PARALLEL_NUM, 1);
  RAW_EQ(q, TS_CM_F_PARALLEL_PROD, 16); /* 64 / 4 */
  RAW_EQ(q, TS_CM_F_PARALLEL_LEN_OUTER, 16);
  /* i0 is the outermost loop the stored element depends on */
  assert_true(val(q, TS_CM_F_PARALLEL_POS_OUTER_SPATIAL) == 1);
  assert_true(val(p, TS_CM_F_PARALLEL_POS_NONE) == 1);
  /* 16 rows of tiles on 3 cores: 16 / 18 of the machine busy */
  assert_float_equal(raw(q, TS_CM_F_PARALLEL_BALANCE), 16.0 / 18.0, 1e-5);
  assert_float_equal(raw(p, TS_CM_F_PARALLEL_BALANCE), 1.0, 1e-6);
  RAW_EQ(q, TS_CM_F_WORK_PER_TASK, 64.0 * 64 * 64 / 16);
  /* i0 is the outermost loop: one parallel loop started per call */
  RAW_EQ(q, TS_CM_F_PARALLEL_DISPATCHES, 1);
  RAW_EQ(q, TS_CM_F_FUNC_PARALLEL_DISPATCHES, 1);
  RAW_EQ(p, TS_CM_F_FUNC_PARALLEL_DISPATCHES, 0);
  int extra[] = {TS_CM_F_PARALLEL_BALANCE, TS_CM_F_WORK_PER_TASK,
                 TS_CM_F_PARALLEL_DISPATCHES, TS_CM_F_FUNC_PARALLEL_DISPATCHES};
  differ_only_in(p, q, TS_CM_F_PARALLEL_NUM, TS_CM_F_PARALLEL_POS_NONE, extra,
                 4);
  ts_cm_features_clear(&fp);
  ts_cm_features_clear(&fq);
  ts_sched_destroy(plain);
  ts_sched_destroy(par);
  ts_target_free(t);
}

static void test_unrolled_vs_not(void **state) {
  (void)state;
  mm_opts o = {.ti = 4, .tj = 16, .tk = 8};
  ts_sched *plain = matmul(64, &o);
  o.unroll_i1 = true;
  ts_sched *un = matmul(64, &o);
  ts_cm_features fp = extract(plain, NULL), fu = extract(un, NULL);
  const float *p = update_row(&fp), *u = update_row(&fu);
  RAW_EQ(u, TS_CM_F_UNROLL_NUM, 1);
  RAW_EQ(u, TS_CM_F_UNROLL_LEN_INNER, 4);
  /* order i0 j0 k0 i1 k1 j1: i1 is a middle spatial loop of the store */
  assert_true(val(u, TS_CM_F_UNROLL_POS_MIDDLE_SPATIAL) == 1);
  differ_only_in(p, u, TS_CM_F_UNROLL_NUM, TS_CM_F_UNROLL_POS_NONE, NULL, 0);
  ts_cm_features_clear(&fp);
  ts_cm_features_clear(&fu);
  ts_sched_destroy(plain);
  ts_sched_destroy(un);
}

/* Buffer slot of the buffer whose stride along its innermost moving loop
 * is `stride` and which is only read (-1 if none). */
static int find_read_slot(const float *row, float stride) {
  for (int k = 0; k < 5; k++) {
    const float *b =
        row + TS_CM_F_BUF0_READ + k * (TS_CM_F_BUF1_READ - TS_CM_F_BUF0_READ);
    if (b[0] == 1 &&
        near(exp2((double)b[TS_CM_F_BUF0_STRIDE - TS_CM_F_BUF0_READ]) - 1,
             stride))
      return k;
  }
  return -1;
}

static void test_tile_sizes(void **state) {
  (void)state;
  mm_opts o = {.ti = 4, .tj = 16, .tk = 8};
  ts_sched *small = matmul(64, &o);
  o.tk = 32;
  ts_sched *large = matmul(64, &o);
  ts_cm_features fs = extract(small, NULL), fl = extract(large, NULL);
  const float *s = update_row(&fs), *l = update_row(&fl);
  /* the same work, loops, annotations */
  for (int i = 0; i <= TS_CM_F_VTHREAD_LEN; i++) assert_true(s[i] == l[i]);
  assert_true(s[TS_CM_F_OUTER_PROD] == l[TS_CM_F_OUTER_PROD]);
  assert_true(s[TS_CM_F_NUM_LOOPS] == l[TS_CM_F_NUM_LOOPS]);
  /* C[i, j] (read-write, largest) is reused across k1: every k1 iteration
   * reuses it after the j1 loop (16 iterations); the reuse count is k1's
   * extent, the tile size */
  assert_true(s[TS_CM_F_BUF0_READWRITE] == 1 && l[TS_CM_F_BUF0_READWRITE] == 1);
  RAW_EQ(s, TS_CM_F_BUF0_REUSE_LOOP, 1);
  RAW_EQ(s, TS_CM_F_BUF0_REUSE_COUNT, 8);
  RAW_EQ(l, TS_CM_F_BUF0_REUSE_COUNT, 32);
  RAW_EQ(s, TS_CM_F_BUF0_REUSE_DIST_ITER, 16);
  /* A[i, k] is read with stride 1 along k1: its tile is 4 x tk */
  int as = find_read_slot(s, 1), al = find_read_slot(l, 1);
  assert_true(as >= 0 && al >= 0);
  int stride = TS_CM_F_BUF1_READ - TS_CM_F_BUF0_READ;
  /* the arithmetic-intensity curve sees the larger tile */
  bool curve_differs = false;
  for (int i = TS_CM_F_INTENSITY_0; i <= TS_CM_F_INTENSITY_9; i++)
    curve_differs |= s[i] != l[i];
  assert_true(curve_differs);
  /* totals over the whole nest do not depend on the tiling */
  assert_true(s[TS_CM_F_BUF0_BYTES + as * stride] ==
              l[TS_CM_F_BUF0_BYTES + al * stride]);
  assert_true(s[TS_CM_F_BUF0_UNIQUE_BYTES + as * stride] ==
              l[TS_CM_F_BUF0_UNIQUE_BYTES + al * stride]);
  RAW_EQ(s, TS_CM_F_BUF0_UNIQUE_BYTES + as * stride, 64.0f * 64 * 4);
  ts_cm_features_clear(&fs);
  ts_cm_features_clear(&fl);
  ts_sched_destroy(small);
  ts_sched_destroy(large);
}

static void test_gpu_binding(void **state) {
  (void)state;
  ts_target *t;
  ts_error err;
  OK(ts_target_parse("cuda -arch=sm_80", &t, &err));
  mm_opts o = {.ti = 4,
               .tj = 16,
               .tk = 8,
               .bind_i0 = "blockIdx.x",
               .bind_j0 = "threadIdx.x"};
  ts_sched *g = matmul(64, &o);
  ts_cm_features f = extract(g, t);
  const float *r = update_row(&f);
  assert_true(val(r, TS_CM_F_IS_GPU) == 1);
  RAW_EQ(r, TS_CM_F_BLOCKIDX_X_LEN, 16);
  RAW_EQ(r, TS_CM_F_THREADIDX_X_LEN, 4);
  assert_true(val(r, TS_CM_F_BLOCKIDX_Y_LEN) == 0);
  ts_cm_features_clear(&f);
  ts_sched_destroy(g);
  ts_target_free(t);
}

/* ts_lower output (ramps instead of vectorized loops) reads like the block
 * form: the same vector features. */
static void test_lowered_input(void **state) {
  (void)state;
  mm_opts o = {.ti = 4, .tj = 16, .tk = 8, .vectorize_j1 = true};
  ts_sched *s = matmul(64, &o);
  ts_error err;
  ts_lower_options lo = ts_lower_defaults();
  lo.no_promote = true; /* (the promotion adds copy stores of its own) */
  ts_func *low = ts_lower(ts_sched_func(s), &lo, &err);
  assert_non_null(low);
  ts_cm_features a = extract(s, NULL), b;
  OK(ts_cm_extract(low, NULL, &b, &err));
  assert_int_equal(a.n_rows, b.n_rows);
  const float *ra = update_row(&a), *rb = update_row(&b);
  for (int i = TS_CM_F_VEC_NUM; i <= TS_CM_F_VEC_POS_NONE; i++)
    assert_true(ra[i] == rb[i]);
  assert_true(ra[TS_CM_F_FLOAT_MAD] == rb[TS_CM_F_FLOAT_MAD]);
  ts_cm_features_clear(&a);
  ts_cm_features_clear(&b);
  ts_func_free(low);
  ts_sched_destroy(s);
}

/* Imperfect tiles: the block form (predicated) and ts_lower's output
 * (partitioned into main and tail copies) both give finite features. */
static void test_imperfect_tiles(void **state) {
  (void)state;
  mm_opts o = {
      .ti = 6, .tj = 16, .tk = 8, .parallel_i0 = true, .vectorize_j1 = true};
  ts_sched *s = matmul(61, &o);
  ts_error err;
  ts_lower_options lo = ts_lower_defaults();
  ts_func *low = ts_lower(ts_sched_func(s), &lo, &err);
  assert_non_null(low);
  char *text = ts_func_print(low);
  assert_non_null(strstr(text, "else")); /* partitioned */
  free(text);
  ts_cm_features a = extract(s, NULL), b;
  OK(ts_cm_extract(low, NULL, &b, &err));
  assert_true(a.n_rows > 0 && b.n_rows >= a.n_rows);
  for (size_t i = 0; i < (size_t)a.n_rows * TS_CM_N_FEATURES; i++)
    assert_true(isfinite(a.values[i]));
  for (size_t i = 0; i < (size_t)b.n_rows * TS_CM_N_FEATURES; i++)
    assert_true(isfinite(b.values[i]));
  ts_cm_features_clear(&a);
  ts_cm_features_clear(&b);
  ts_func_free(low);
  ts_sched_destroy(s);
}

static void test_other_workloads(void **state) {
  (void)state;
  ts_workload *w;
  ts_error err;
  ts_cm_features f;
  /* softmax: four blocks, three allocated temporaries, one exp per element */
  OK(ts_workload_from_spec("softmax N=32 D=64", &w, &err));
  OK(ts_cm_extract(w->func, NULL, &f, &err));
  assert_int_equal(f.n_rows, 6); /* 4 stores + 2 reduction inits */
  double exps = 0;
  for (int r = 0; r < f.n_rows; r++) {
    const float *row = f.values + (size_t)r * TS_CM_N_FEATURES;
    RAW_EQ(row, TS_CM_F_FUNC_ALLOC_COUNT, 3);
    exps += raw(row, TS_CM_F_FLOAT_MATH_FUNC);
  }
  assert_true(near(exps, 32.0 * 64));
  ts_cm_features_clear(&f);
  ts_workload_free(w);
  /* conv2d with padding: the pad store selects */
  OK(ts_workload_from_spec("conv2d_nhwc N=1 H=8 W=8 CI=4 CO=4 KH=3 KW=3 pad=1",
                           &w, &err));
  OK(ts_cm_extract(w->func, NULL, &f, &err));
  assert_true(f.n_rows == 3);
  assert_true(f.values[TS_CM_F_SELECT_OP] > 0);
  ts_cm_features_clear(&f);
  ts_workload_free(w);
  /* no function */
  assert_int_equal(ts_cm_extract(NULL, NULL, &f, &err), TS_EINVAL);
}

/* Y = 2 X with j vectorized; `ann` is the row loop's annotation. T is a
 * buffer of the function's own written the same way. */
static ts_func *scaled(const char *ann) {
  char text[1400];
  snprintf(text, sizeof text,
           "func nt(X: float32[64, 16], Y: float32[64, 16]) {\n"
           "  block root() {\n"
           "    reads(X[0 +: 64, 0 +: 16])\n"
           "    writes(Y[0 +: 64, 0 +: 16])\n"
           "    alloc T: float32[64, 16]\n"
           "    for i in range(64) %s {\n"
           "      for j in range(16) vectorized {\n"
           "        block T(vi: spatial(64) = i, vj: spatial(16) = j) {\n"
           "          reads(X[vi, vj])\n"
           "          writes(T[vi, vj])\n"
           "          T[vi, vj] = X[vi, vj] * float32(2)\n"
           "        }\n"
           "      }\n"
           "      for j in range(16) vectorized {\n"
           "        block Y(vi: spatial(64) = i, vj: spatial(16) = j) {\n"
           "          reads(T[vi, vj])\n"
           "          writes(Y[vi, vj])\n"
           "          Y[vi, vj] = T[vi, vj]\n"
           "        }\n"
           "      }\n"
           "    }\n"
           "  }\n"
           "}\n",
           ann);
  ts_func *f = NULL;
  ts_error err;
  int rc = ts_func_parse(text, strlen(text), "nt.tir", &f, &err);
  if (rc) fprintf(stderr, "parse: %s\n", err.msg);
  OK(rc);
  return f;
}

/* pragma_nontemporal marks the vector store to the parameter Y, not the
 * one to the function's own T, and changes no other entry. */
static void test_nontemporal(void **state) {
  (void)state;
  ts_func *plain = scaled(""),
          *nt = scaled("annotate {\"pragma_nontemporal\": 1}");
  ts_cm_features a, b;
  ts_error err;
  OK(ts_cm_extract(plain, NULL, &a, &err));
  OK(ts_cm_extract(nt, NULL, &b, &err));
  assert_int_equal(a.n_rows, 2);
  assert_int_equal(b.n_rows, 2);
  int marked = 0;
  for (int r = 0; r < 2; r++) {
    const float *p = a.values + (size_t)r * TS_CM_N_FEATURES;
    const float *q = b.values + (size_t)r * TS_CM_N_FEATURES;
    assert_true(val(p, TS_CM_F_NONTEMPORAL) == 0);
    bool local = raw(q, TS_CM_F_ALLOC_BYTES) > 0;
    assert_true(val(q, TS_CM_F_NONTEMPORAL) == (local ? 0 : 1));
    marked += !local;
    differ_only_in(p, q, TS_CM_F_NONTEMPORAL, TS_CM_F_NONTEMPORAL, NULL, 0);
  }
  assert_int_equal(marked, 1);
  ts_cm_features_clear(&a);
  ts_cm_features_clear(&b);
  ts_func_free(plain);
  ts_func_free(nt);
}

static void test_entry_list(void **state) {
  (void)state;
  assert_int_equal(TS_CM_N_FEATURES, 179);
  assert_null(ts_cm_feature_name(TS_CM_N_FEATURES));
  assert_null(ts_cm_feature_name(-1));
  char path[512];
  snprintf(path, sizeof path, "%s/docs/features.md", TS_SOURCE_DIR);
  FILE *fp = fopen(path, "rb");
  assert_non_null(fp);
  static char doc[1 << 18];
  size_t n = fread(doc, 1, sizeof doc - 1, fp);
  doc[n] = 0;
  fclose(fp);
  for (int i = 0; i < TS_CM_N_FEATURES; i++) {
    const char *name = ts_cm_feature_name(i);
    assert_non_null(name);
    assert_true(strlen(ts_cm_feature_meaning(i)) > 0);
    for (int j = 0; j < i; j++)
      if (!strcmp(name, ts_cm_feature_name(j)))
        fail_msg("duplicate feature name %s", name);
    /* the doc's table has the line "| i | `name` | ..." */
    char line[96];
    snprintf(line, sizeof line, "| %d | `%s` |", i, name);
    if (!strstr(doc, line)) fail_msg("docs/features.md lacks '%s'", line);
  }
}

/* The 1024^3 candidate of docs/schedules.md: extraction, lowering
 * included, takes well under a millisecond in a release build (see
 * `tessera costmodel bench`); under the sanitizers it is several times
 * slower, so this checks a loose bound and prints the figure. */
static void test_extract_time(void **state) {
  (void)state;
  mm_opts o = {.ti = 8,
               .tj = 32,
               .tk = 256,
               .parallel_i0 = true,
               .vectorize_j1 = true,
               .unroll_i1 = true,
               .decompose = true};
  ts_sched *s = matmul(1024, &o);
  double times[50];
  for (int i = 0; i < 50; i++) {
    double t0 = (ts_now_seconds() * 1e3);
    ts_cm_features f = extract(s, NULL);
    times[i] = (ts_now_seconds() * 1e3) - t0;
    assert_int_equal(f.n_rows, 2);
    ts_cm_features_clear(&f);
  }
  double best = times[0];
  for (int i = 1; i < 50; i++)
    if (times[i] < best) best = times[i];
  printf("# feature extraction, scheduled 1024^3 matmul: %.3f ms (best of "
         "50, this build)\n",
         best);
  assert_true(best < 10.0);
  ts_sched_destroy(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_vectorized_vs_not),
      cmocka_unit_test(test_parallel_vs_not),
      cmocka_unit_test(test_unrolled_vs_not),
      cmocka_unit_test(test_tile_sizes),
      cmocka_unit_test(test_gpu_binding),
      cmocka_unit_test(test_lowered_input),
      cmocka_unit_test(test_imperfect_tiles),
      cmocka_unit_test(test_other_workloads),
      cmocka_unit_test(test_nontemporal),
      cmocka_unit_test(test_entry_list),
      cmocka_unit_test(test_extract_time),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
