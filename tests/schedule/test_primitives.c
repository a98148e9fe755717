/*
 * test_primitives.c — one unit test per schedule primitive. Each case
 * schedules a small workload through the C API; the readable trace and the
 * printed function are compared with a golden file
 * (tests/schedule/golden/<case>.txt: the script, a line "---", the
 * function), the trace is replayed from its JSON form to the same printed
 * function, and the scheduled function is compiled for the host (2
 * threads) and interpreted, both compared with the unscheduled function
 * interpreted on the same seeded inputs. TS_UPDATE_GOLDEN=1 rewrites the
 * golden files (review the diff).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "util.h"

#define OK(x)                                                                  \
  do {                                                                         \
    int rc_ = (x);                                                             \
    if (rc_) fprintf(stderr, "%s: %s\n", #x, ts_sched_errmsg(s));              \
    assert_int_equal(rc_, TS_OK);                                              \
  } while (0)

static char *read_file(const char *path) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return NULL;
  fseek(fp, 0, SEEK_END);
  long n = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  size_t got = fread(buf, 1, (size_t)n, fp);
  buf[got] = 0;
  fclose(fp);
  return buf;
}

/* Compares the schedule's script and function with the golden file, checks
 * the JSON replay and runs the function. compile=false: interpret only
 * (GPU thread bindings). */
static void finish(ts_sched *s, const char *name, bool compile) {
  char *script = ts_trace_print(ts_sched_trace(s));
  char *func = util_print(s);
  size_t n = strlen(script) + strlen(func) + 8;
  char *got = malloc(n);
  snprintf(got, n, "%s---\n%s", script, func);
  char path[512];
  snprintf(path, sizeof path, "%s/tests/schedule/golden/%s.txt", TS_SOURCE_DIR,
           name);
  const char *update = getenv("TS_UPDATE_GOLDEN");
  if (update && strcmp(update, "1") == 0) {
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    fputs(got, fp);
    fclose(fp);
  }
  char *want = read_file(path);
  if (!want) fprintf(stderr, "missing golden file %s\n", path);
  assert_non_null(want);
  if (strcmp(want, got) != 0)
    fprintf(stderr, "golden mismatch for %s; got:\n%s\n", name, got);
  assert_string_equal(want, got);
  /* replay from JSON */
  char *json = ts_trace_to_json(ts_sched_trace(s));
  ts_trace *t;
  ts_sched *again;
  ts_error err;
  assert_int_equal(ts_trace_from_json(json, strlen(json), &t, &err), TS_OK);
  int rc = ts_trace_apply(t, ts_sched_original(s), 5, &again, &err);
  if (rc) fprintf(stderr, "replay: %s\n", err.msg);
  assert_int_equal(rc, TS_OK);
  char *func2 = util_print(again);
  assert_string_equal(func, func2);
  char *json2 = ts_trace_to_json(ts_sched_trace(again));
  assert_string_equal(json, json2);
  /* run */
  if (compile) {
    assert_int_equal(util_verify(s, 2), TS_OK);
  } else {
    assert_int_equal(ts_func_verify(ts_sched_func(s), &err), TS_OK);
    ts_rt_args *want_out, *got_out;
    assert_int_equal(util_reference(ts_sched_original(s), 7, &want_out, &err),
                     TS_OK);
    assert_int_equal(util_reference(ts_sched_func(s), 7, &got_out, &err),
                     TS_OK);
    assert_int_equal(ts_rt_args_compare(got_out, want_out, &err), TS_OK);
    ts_rt_args_free(want_out);
    ts_rt_args_free(got_out);
  }
  free(json);
  free(json2);
  free(func2);
  ts_sched_destroy(again);
  ts_trace_free(t);
  free(want);
  free(got);
  free(script);
  free(func);
  ts_sched_destroy(s);
}

static ts_sched *sched(const char *spec) {
  ts_sched *s = util_sched(spec);
  assert_non_null(s);
  return s;
}

/* The block `name` and its loops. */
static int loops_of(ts_sched *s, const char *name, ts_rv *b, ts_rv *l) {
  int n;
  OK(ts_sched_get_block(s, name, b));
  OK(ts_sched_get_loops(s, *b, l, 16, &n));
  return n;
}

/* ---- loops ---- */

static void test_split(void **state) {
  (void)state;
  ts_sched *s = sched("matmul M=16 N=16 K=16");
  ts_rv b, l[16], o[4];
  loops_of(s, "C", &b, l);
  int64_t f[2] = {TS_SPLIT_INFER, 4};
  OK(ts_sched_split(s, l[0], f, 2, o));
  int64_t g[3] = {2, TS_SPLIT_INFER, 2};
  OK(ts_sched_split(s, l[2], g, 3, o));
  finish(s, "split", true);
}

static void test_split_imperfect(void **state) {
  (void)state;
  ts_sched *s = sched("matmul M=12 N=20 K=8");
  ts_rv b, l[16], o[4];
  loops_of(s, "C", &b, l);
  int64_t f[2] = {3, TS_SPLIT_INFER}; /* 20 = 3 x 7 - 1: a predicate */
  OK(ts_sched_split(s, l[1], f, 2, o));
  int64_t g[2] = {TS_SPLIT_INFER, 5}; /* 12 -> 3 x 5 */
  OK(ts_sched_split(s, l[0], g, 2, o));
  finish(s, "split_imperfect", true);
}

static void test_fuse(void **state) {
  (void)state;
  ts_sched *s = sched("matmul M=8 N=12 K=8");
  ts_rv b, l[16], f;
  loops_of(s, "C", &b, l);
  OK(ts_sched_fuse(s, l, 2, &f));
  OK(ts_sched_parallel(s, f));
  finish(s, "fuse", true);
}

/* A matmul whose 13 rows are 8 + 5: the first 8 rows' nest partitioned
 * again along the 12 columns (8 + 4), the tail rows split by 2 (guarded),
 * the bias epilogue computed under each part of the row tail. */
static void test_partition(void **state) {
  (void)state;
  ts_sched *s = sched("dense M=13 N=12 K=8 bias=1");
  ts_rv b, l[16], rows[2], cols[2], o[2];
  loops_of(s, "dense", &b, l);
  OK(ts_sched_partition(s, l[0], 8, rows));
  OK(ts_sched_partition(s, l[1], 8, cols));
  OK(ts_sched_vectorize(s, cols[0]));
  ts_rv tb, tl[16];
  int n = loops_of(s, "dense_tail", &tb, tl);
  assert_int_equal(n, 3);
  int64_t f[2] = {TS_SPLIT_INFER, 2};
  OK(ts_sched_split(s, tl[0], f, 2, o));
  OK(ts_sched_parallel(s, rows[0]));
  /* the blocks' domains are what each part covers */
  const ts_stmt *r = ts_func_find_block(ts_sched_func(s), "dense_tail");
  ts_range d = ts_block_iter_dom(ts_realize_block(r), 0);
  int64_t mn = -1, ext = -1;
  assert_true(ts_expr_is_const_int(d.min, &mn));
  assert_true(ts_expr_is_const_int(d.extent, &ext));
  assert_int_equal(mn, 8);
  assert_int_equal(ext, 5);
  finish(s, "partition", true);
}

/* A reduction partitioned (K = 13 as 8 + 5): the second part has no init
 * and adds to what the first computed; then its k split by 2 (guarded). */
static void test_partition_reduce(void **state) {
  (void)state;
  ts_sched *s = sched("matmul M=4 N=8 K=13");
  ts_rv b, l[16], ks[2], o[2];
  loops_of(s, "C", &b, l);
  OK(ts_sched_partition(s, l[2], 8, ks));
  int64_t f[2] = {TS_SPLIT_INFER, 2};
  OK(ts_sched_split(s, ks[1], f, 2, o));
  const ts_stmt *r = ts_func_find_block(ts_sched_func(s), "C_tail");
  assert_null(ts_block_init(ts_realize_block(r)));
  r = ts_func_find_block(ts_sched_func(s), "C");
  assert_non_null(ts_block_init(ts_realize_block(r)));
  finish(s, "partition_reduce", true);
}

/* layer norm's two sums (sum and sum of squares of the shifted row) in one
 * loop nest over the rows and the row */
static void test_fuse_siblings(void **state) {
  (void)state;
  ts_sched *s = sched("layer_norm N=3 D=16");
  ts_rv b, c, l[16], m[16];
  loops_of(s, "x_sum", &b, l);
  loops_of(s, "sq_sum", &c, m);
  ts_rv rows[2] = {l[0], m[0]}, cols[2] = {l[1], m[1]};
  OK(ts_sched_fuse_siblings(s, rows, 2));
  OK(ts_sched_fuse_siblings(s, cols, 2));
  /* the second loop is gone, the first keeps its handle */
  assert_null(ts_sched_rv_loop(s, m[0]));
  assert_non_null(ts_sched_rv_loop(s, l[0]));
  OK(ts_sched_parallel(s, l[0]));
  finish(s, "fuse_siblings", true);
}

/* The sums factored four lanes at a time (rfactor) and their nests fused
 * across the first sum's final reduction, which lies between them: one
 * vectorized loop accumulates both. */
static void test_fuse_siblings_rows(void **state) {
  (void)state;
  ts_sched *s = sched("layer_norm N=3 D=32");
  const char *sums[2] = {"x_sum", "sq_sum"};
  ts_rv rf[2], b, l[16], parts[2];
  for (int i = 0; i < 2; i++) {
    loops_of(s, sums[i], &b, l);
    int64_t f[2] = {TS_SPLIT_INFER, 4};
    OK(ts_sched_split(s, l[1], f, 2, parts));
    OK(ts_sched_rfactor(s, parts[1], 1, &rf[i]));
  }
  ts_rv la[16], lb[16];
  int na = 0, nb = 0;
  OK(ts_sched_get_loops(s, rf[0], la, 16, &na));
  OK(ts_sched_get_loops(s, rf[1], lb, 16, &nb));
  assert_int_equal(na, 3);
  assert_int_equal(nb, 3);
  for (int d = 0; d < 3; d++) {
    ts_rv pair[2] = {la[d], lb[d]};
    OK(ts_sched_fuse_siblings(s, pair, 2));
  }
  OK(ts_sched_vectorize(s, la[2]));
  finish(s, "fuse_siblings_rows", true);
}

static void test_reorder(void **state) {
  (void)state;
  ts_sched *s = sched("matmul M=8 N=12 K=8");
  ts_rv b, l[16], o[4];
  loops_of(s, "C", &b, l);
  int64_t f[2] = {TS_SPLIT_INFER, 4};
  OK(ts_sched_split(s, l[1], f, 2, o));
  ts_rv order[4] = {l[2], o[0], l[0], o[1]};
  OK(ts_sched_reorder(s, order, 4));
  finish(s, "reorder", true);
}

static void test_loop_kinds(void **state) {
  (void)state;
  ts_sched *s = sched("matmul M=8 N=32 K=8");
  ts_rv b, l[16], o[4];
  loops_of(s, "C", &b, l);
  int64_t f[2] = {TS_SPLIT_INFER, 16};
  OK(ts_sched_split(s, l[1], f, 2, o));
  ts_rv order[4] = {l[0], o[0], l[2], o[1]};
  OK(ts_sched_reorder(s, order, 4));
  OK(ts_sched_parallel(s, l[0]));
  OK(ts_sched_unroll(s, l[2]));
  OK(ts_sched_vectorize(s, o[1]));
  finish(s, "loop_kinds", true);
}

static void test_bind(void **state) {
  (void)state;
  ts_sched *s = sched("elementwise op=relu shape=64x32");
  ts_rv b, l[16], f, o[2];
  loops_of(s, "Y", &b, l);
  OK(ts_sched_fuse(s, l, 2, &f));
  int64_t sp[2] = {TS_SPLIT_INFER, 128};
  OK(ts_sched_split(s, f, sp, 2, o));
  OK(ts_sched_bind(s, o[0], "blockIdx.x"));
  OK(ts_sched_bind(s, o[1], "threadIdx.x"));
  finish(s, "bind", false);
}

static void test_annotate(void **state) {
  (void)state;
  ts_sched *s = sched("matmul M=8 N=8 K=8");
  ts_rv b, l[16];
  loops_of(s, "C", &b, l);
  OK(ts_sched_annotate(s, l[0], ts_ann_int(TS_ANN_AUTO_UNROLL_MAX_STEP, 16)));
  OK(ts_sched_annotate(s, l[0], ts_ann_int(TS_ANN_UNROLL_EXPLICIT, 1)));
  OK(ts_sched_annotate(s, b, ts_ann_string("note", "tiled \"by hand\"")));
  OK(ts_sched_annotate(s, l[1], ts_ann_float("weight", 0.5)));
  OK(ts_sched_unannotate(s, l[0], TS_ANN_UNROLL_EXPLICIT));
  finish(s, "annotate", true);
}

/* ---- compute location ---- */

static void test_compute_at(void **state) {
  (void)state;
  ts_sched *s = sched("conv2d_nhwc N=1 H=6 W=6 CI=4 CO=8 KH=3 KW=3 pad=1");
  ts_rv pad, c, l[16];
  OK(ts_sched_get_block(s, "pad", &pad));
  loops_of(s, "conv", &c, l);
  OK(ts_sched_compute_at(s, pad, l[2]));
  OK(ts_sched_parallel(s, l[1]));
  finish(s, "compute_at", true);
}

static void test_compute_at_reduction(void **state) {
  (void)state;
  ts_sched *s = sched("softmax N=4 D=12");
  ts_rv mx, sum, e, l[16];
  OK(ts_sched_get_block(s, "maxelem", &mx));
  OK(ts_sched_get_block(s, "expsum", &sum));
  loops_of(s, "exp", &e, l);
  OK(ts_sched_compute_at(s, mx, l[0]));
  ts_rv y, yl[16];
  loops_of(s, "Y", &y, yl);
  OK(ts_sched_compute_at(s, sum, yl[0]));
  finish(s, "compute_at_reduction", true);
}

static void test_reverse_compute_at(void **state) {
  (void)state;
  ts_sched *s = sched("dense M=8 N=16 K=16");
  ts_rv d, y, l[16], o[2];
  loops_of(s, "dense", &d, l);
  int64_t f[2] = {TS_SPLIT_INFER, 4};
  OK(ts_sched_split(s, l[1], f, 2, o));
  OK(ts_sched_get_block(s, "Y", &y));
  OK(ts_sched_reverse_compute_at(s, y, o[0]));
  finish(s, "reverse_compute_at", true);
}

static void test_compute_inline(void **state) {
  (void)state;
  ts_sched *s = sched("conv2d_nhwc N=1 H=6 W=6 CI=4 CO=8 KH=3 KW=3 pad=1");
  ts_rv pad;
  OK(ts_sched_get_block(s, "pad", &pad));
  OK(ts_sched_compute_inline(s, pad));
  finish(s, "compute_inline", true);
}

static void test_reverse_compute_inline(void **state) {
  (void)state;
  ts_sched *s = util_sched_text(util_two_stage());
  assert_non_null(s);
  ts_rv c;
  OK(ts_sched_get_block(s, "C", &c));
  OK(ts_sched_reverse_compute_inline(s, c));
  finish(s, "reverse_compute_inline", true);
}

/* ---- caching and storage ---- */

static void test_cache_read(void **state) {
  (void)state;
  ts_sched *s = sched("matmul M=16 N=16 K=16");
  ts_rv b, l[16], a, o[2];
  loops_of(s, "C", &b, l);
  int64_t f[2] = {TS_SPLIT_INFER, 4};
  OK(ts_sched_split(s, l[2], f, 2, o));
  OK(ts_sched_cache_read(s, b, "A", "shared", &a));
  OK(ts_sched_compute_at(s, a, o[0]));
  finish(s, "cache_read", true);
}

static void test_cache_write(void **state) {
  (void)state;
  ts_sched *s = sched("matmul M=16 N=16 K=16");
  ts_rv b, l[16], w, o[2];
  loops_of(s, "C", &b, l);
  int64_t f[2] = {TS_SPLIT_INFER, 4};
  OK(ts_sched_split(s, l[1], f, 2, o));
  OK(ts_sched_cache_write(s, b, "C", "local", &w));
  OK(ts_sched_reverse_compute_at(s, w, o[0]));
  finish(s, "cache_write", true);
}

static void test_set_scope_storage_align(void **state) {
  (void)state;
  ts_sched *s = sched("softmax N=4 D=12");
  ts_rv e, a;
  OK(ts_sched_get_block(s, "exp", &e));
  OK(ts_sched_set_scope(s, e, "exp", "local"));
  OK(ts_sched_storage_align(s, e, "exp", 0, 16, 1));
  OK(ts_sched_cache_read(s, e, "X", "shared", &a));
  OK(ts_sched_storage_align(s, a, "X_shared", 0, 8, 4));
  finish(s, "set_scope_storage_align", true);
}

static void test_pad_einsum(void **state) {
  (void)state;
  /* 13 columns padded to 16: B read through a zero-padded copy, C
   * written into a padded buffer and copied out; the padded loop then
   * splits into whole vectors */
  ts_sched *s = sched("matmul M=6 N=13 K=5");
  ts_rv b, l[16], out[4], p[2];
  int n = 0;
  loops_of(s, "C", &b, l);
  OK(ts_sched_pad_einsum(s, b, 1, 8, out, 4, &n));
  assert_int_equal(n, 2);
  assert_string_equal(ts_sched_rv_block_name(s, out[0]), "B_pad");
  assert_string_equal(ts_sched_rv_block_name(s, out[1]), "C_unpad");
  int64_t f[2] = {TS_SPLIT_INFER, 8};
  OK(ts_sched_split(s, l[1], f, 2, p));
  OK(ts_sched_vectorize(s, p[1]));
  /* the copy out at the rows, the padded buffer then a row's tile */
  OK(ts_sched_reverse_compute_at(s, out[1], l[0]));
  finish(s, "pad_einsum", true);
}

static void test_pad_einsum_conv(void **state) {
  (void)state;
  /* a conv's output channels (the weights padded; the image, which the
   * channels do not index, read as it is), and a batch matmul's rows of
   * a transposed B */
  ts_sched *s = sched("conv2d_nhwc N=1 H=5 W=5 CI=3 CO=5 KH=3 KW=3 pad=1");
  ts_rv b, l[16];
  int n = 0;
  loops_of(s, "conv", &b, l);
  OK(ts_sched_pad_einsum(s, b, 3, 4, NULL, 0, &n));
  assert_int_equal(n, 2);
  finish(s, "pad_einsum_conv", true);
  s = sched("batch_matmul B=2 M=3 N=7 K=4 transpose_b=1");
  loops_of(s, "C", &b, l);
  OK(ts_sched_pad_einsum(s, b, 2, 4, NULL, 0, NULL));
  finish(s, "pad_einsum_bmm", true);
}

static void test_transform_layout(void **state) {
  (void)state;
  ts_sched *s = sched("matmul M=8 N=16 K=8");
  ts_rv b, l[16], p;
  loops_of(s, "C", &b, l);
  OK(ts_sched_cache_read(s, b, "B", "global", &p));
  OK(ts_sched_transform_layout(
      s, p, "B_global", "(k, j) -> (floordiv(j, 4), k, floormod(j, 4))"));
  ts_rv pl[16];
  int n;
  OK(ts_sched_get_loops(s, p, pl, 16, &n));
  OK(ts_sched_vectorize(s, pl[n - 1]));
  finish(s, "transform_layout", true);
}

/* One random quasi-affine output of a layout map over (k, j): up to two
 * terms coef * {k, j, floordiv(v, c), floormod(v, c), and the two nested
 * forms}. */
typedef struct map_term {
  int var;  /* 0: k, 1: j */
  int kind; /* 0: v, 1: floordiv, 2: floormod, 3: floordiv(floormod(v, c2),
               c), 4: floormod(floordiv(v, c2), c) */
  int64_t c, c2, coef;
} map_term;

static int64_t term_value(const map_term *t, const int64_t *pt) {
  int64_t v = pt[t->var];
  switch (t->kind) {
  case 1: v /= t->c; break;
  case 2: v %= t->c; break;
  case 3: v = v % t->c2 / t->c; break;
  case 4: v = v / t->c2 % t->c; break;
  default: break;
  }
  return t->coef * v;
}

static int term_text(const map_term *t, char *out, size_t cap) {
  const char *v = t->var ? "j" : "k";
  long long coef = (long long)t->coef, c = (long long)t->c,
            c2 = (long long)t->c2;
  switch (t->kind) {
  case 1: return snprintf(out, cap, "%lld * floordiv(%s, %lld)", coef, v, c);
  case 2: return snprintf(out, cap, "%lld * floormod(%s, %lld)", coef, v, c);
  case 3:
    return snprintf(out, cap, "%lld * floordiv(floormod(%s, %lld), %lld)", coef,
                    v, c2, c);
  case 4:
    return snprintf(out, cap, "%lld * floormod(floordiv(%s, %lld), %lld)", coef,
                    v, c2, c);
  default: return snprintf(out, cap, "%lld * %s", coef, v);
  }
}

/* transform_layout accepts exactly the injective maps: random quasi-affine
 * maps over an 8 x 16 buffer, nested floordiv/floormod among them (many
 * not injective), against a brute-force
 * check here. The primitive proves most of them injective without
 * enumerating (digits and superincreasing weights), so an unsound proof
 * shows up as an accepted map that collides. And a map that can only be
 * proven, on a buffer too large to enumerate (8192 x 8192), is accepted. */
static void test_transform_layout_injective(void **state) {
  (void)state;
  static const int64_t divs[] = {2, 4, 8, 16};
  static const int64_t coefs[] = {1, 2, 4, 8, 16, 3};
  uint64_t g = 12345;
  int accepted = 0, refused = 0;
  for (int trial = 0; trial < 600; trial++) {
    map_term terms[3][2];
    int n_out = 2 + (int)((g >> 7) % 2), n_terms[3];
    char text[512];
    int len = snprintf(text, sizeof text, "(k, j) -> (");
    for (int o = 0; o < n_out; o++) {
      n_terms[o] = 1 + (int)((g >> 11) % 2);
      for (int t = 0; t < n_terms[o]; t++) {
        g = g * 6364136223846793005ull + 1442695040888963407ull;
        map_term *m = &terms[o][t];
        m->var = (int)((g >> 20) % 2);
        m->kind = (int)((g >> 24) % 5);
        m->c = divs[(g >> 28) % 4];
        m->c2 = divs[(g >> 40) % 4];
        m->coef = t == 0 && (g >> 32) % 2 ? 1 : coefs[(g >> 36) % 6];
        len += snprintf(text + len, sizeof text - (size_t)len, "%s",
                        t ? " + " : (o ? ", " : ""));
        len += term_text(m, text + len, sizeof text - (size_t)len);
      }
    }
    snprintf(text + len, sizeof text - (size_t)len, ")");
    /* brute force over B_global[k < 8, j < 16] */
    int64_t max[3] = {0, 0, 0}, vals[128][3];
    for (int e = 0; e < 128; e++) {
      int64_t pt[2] = {e / 16, e % 16};
      for (int o = 0; o < n_out; o++) {
        vals[e][o] = 0;
        for (int t = 0; t < n_terms[o]; t++)
          vals[e][o] += term_value(&terms[o][t], pt);
        if (vals[e][o] > max[o]) max[o] = vals[e][o];
      }
    }
    bool injective = true;
    for (int a = 0; a < 128 && injective; a++)
      for (int b = a + 1; b < 128 && injective; b++)
        injective = memcmp(vals[a], vals[b], sizeof vals[a][0] * n_out) != 0;
    ts_sched *s = sched("matmul M=8 N=16 K=8");
    ts_rv b, l[16], p;
    loops_of(s, "C", &b, l);
    OK(ts_sched_cache_read(s, b, "B", "global", &p));
    int rc = ts_sched_transform_layout(s, p, "B_global", text);
    if ((rc == TS_OK) != injective)
      fprintf(stderr, "map %s: injective %d, transform_layout %d (%s)\n", text,
              injective, rc, rc ? ts_sched_errmsg(s) : "");
    assert_int_equal(rc == TS_OK, injective);
    if (!injective) assert_non_null(strstr(ts_sched_errmsg(s), "injective"));
    accepted += injective;
    refused += !injective;
    ts_sched_destroy(s);
  }
  /* both outcomes are well represented */
  assert_true(accepted >= 50);
  assert_true(refused >= 50);
  /* 64M elements: beyond enumeration; the packed-B map is proven */
  ts_sched *s = sched("matmul M=16 N=8192 K=8192");
  ts_rv b, l[16], p;
  loops_of(s, "C", &b, l);
  OK(ts_sched_cache_read(s, b, "B", "global", &p));
  OK(ts_sched_transform_layout(s, p, "B_global",
                               "(k, j) -> (floordiv(j, 16), floordiv(k, 4), "
                               "floormod(j, 16), floormod(k, 4))"));
  ts_sched_destroy(s);
  /* a nested packing (a K = 16 tile read 4 at a time) too */
  s = sched("matmul M=16 N=8192 K=8192");
  loops_of(s, "C", &b, l);
  OK(ts_sched_cache_read(s, b, "B", "global", &p));
  OK(ts_sched_transform_layout(
      s, p, "B_global",
      "(k, j) -> (floordiv(j, 16), floordiv(k, 16), floordiv(floormod(k, 16), "
      "4), floormod(j, 16) * 4 + floormod(floormod(k, 16), 4))"));
  ts_sched_destroy(s);
  /* a colliding map there is refused (it cannot be enumerated) */
  s = sched("matmul M=16 N=8192 K=8192");
  loops_of(s, "C", &b, l);
  OK(ts_sched_cache_read(s, b, "B", "global", &p));
  assert_int_not_equal(ts_sched_transform_layout(
                           s, p, "B_global", "(k, j) -> (floordiv(j, 2), k)"),
                       TS_OK);
  ts_sched_destroy(s);
}

/* ---- reductions ---- */

static void test_decompose_reduction(void **state) {
  (void)state;
  ts_sched *s = sched("matmul M=8 N=16 K=8");
  ts_rv b, l[16], o[2], init;
  loops_of(s, "C", &b, l);
  int64_t f[2] = {TS_SPLIT_INFER, 8};
  OK(ts_sched_split(s, l[1], f, 2, o));
  ts_rv order[4] = {l[0], o[0], l[2], o[1]};
  OK(ts_sched_reorder(s, order, 4));
  OK(ts_sched_decompose_reduction(s, b, l[2], &init));
  OK(ts_sched_vectorize(s, o[1]));
  finish(s, "decompose_reduction", true);
}

/* K = 37 split 10 x 4 past its end (the last 3 steps guarded): the guard
 * is over the reduction loops alone and holds at their first iteration, so
 * it stays on the update and the init runs unguarded before k_0. */
static void test_decompose_reduction_guarded(void **state) {
  (void)state;
  ts_sched *s = sched("matmul M=8 N=16 K=37");
  ts_rv b, l[16], o[2], init;
  loops_of(s, "C", &b, l);
  int64_t f[2] = {TS_SPLIT_INFER, 4};
  OK(ts_sched_split(s, l[2], f, 2, o));
  OK(ts_sched_decompose_reduction(s, b, o[0], &init));
  OK(ts_sched_unroll(s, o[1]));
  finish(s, "decompose_reduction_guarded", true);
}

static void test_rfactor(void **state) {
  (void)state;
  ts_sched *s = sched("reduce op=sum N=4 D=64");
  ts_rv b, l[16], o[2], rf;
  loops_of(s, "Y", &b, l);
  int64_t f[2] = {TS_SPLIT_INFER, 8};
  OK(ts_sched_split(s, l[1], f, 2, o));
  OK(ts_sched_rfactor(s, o[1], 1, &rf));
  finish(s, "rfactor", true);
}

/* A row of 37 split 8 wide past its end (5 x 8, the last 3 lanes
 * guarded): the guard stays on the factored update, every lane of the
 * factored buffer still gets its init at the first of the 5 steps. */
static void test_rfactor_guarded(void **state) {
  (void)state;
  ts_sched *s = sched("reduce op=max N=3 D=37");
  ts_rv b, l[16], o[2], rf;
  loops_of(s, "Y", &b, l);
  int64_t f[2] = {TS_SPLIT_INFER, 8};
  OK(ts_sched_split(s, l[1], f, 2, o));
  OK(ts_sched_rfactor(s, o[1], 1, &rf));
  finish(s, "rfactor_guarded", true);
}

/* softmax's row max over 37 factored 8 wide past the row's end, the
 * factored block then moved under the row loop: compute_at rebuilds its
 * nest over the iters' domains (5 x 8 = 40), so the guard must move with
 * it or the last step reads 3 elements of the next row. */
static void test_rfactor_guarded_moved(void **state) {
  (void)state;
  ts_sched *s = sched("softmax N=3 D=37");
  ts_rv b, l[16], o[2], rf, wb, wl[16];
  loops_of(s, "maxelem", &b, l);
  int64_t f[2] = {TS_SPLIT_INFER, 8};
  OK(ts_sched_split(s, l[1], f, 2, o));
  OK(ts_sched_rfactor(s, o[1], 1, &rf));
  loops_of(s, "maxelem", &wb, wl);
  OK(ts_sched_compute_at(s, rf, wl[0]));
  finish(s, "rfactor_guarded_moved", true);
}

/* A dot product's row of 40 factored 16 wide past its end, under a column
 * tile of 8 over 13 columns (two guards on the factored block: the
 * columns' and the row's), then moved twice. The second move rebuilds the
 * nest (under the output's row loop, with the combining block) over the
 * column iter's domain, which implies its guard, but the
 * row's guard over the factored lanes must stay, or the last step reads 8
 * elements past each row of 40. */
static void test_rfactor_guarded_moved_twice(void **state) {
  (void)state;
  ts_sched *s = sched("dense M=2 N=13 K=40");
  ts_rv b, l[16], ko[2], jo[2], rf, fb, fl[16], yb, yl[16];
  loops_of(s, "dense", &b, l);
  int64_t fk[2] = {TS_SPLIT_INFER, 16}, fj[2] = {TS_SPLIT_INFER, 8};
  OK(ts_sched_split(s, l[2], fk, 2, ko));
  OK(ts_sched_rfactor(s, ko[1], 2, &rf));
  loops_of(s, "dense", &fb, fl);
  OK(ts_sched_split(s, fl[1], fj, 2, jo));
  OK(ts_sched_compute_at(s, rf, jo[0]));
  loops_of(s, "Y", &yb, yl);
  OK(ts_sched_compute_at(s, fb, yl[0]));
  loops_of(s, "Y", &yb, yl);
  OK(ts_sched_compute_at(s, rf, yl[0]));
  finish(s, "rfactor_guarded_moved_twice", true);
}

/* The factored row of 40 (16 lanes, its last step guarded) zeroed before
 * its reduction: the guard mixes the reduction loop with the lanes, a
 * spatial loop of the factored block, and holds at the reduction's first
 * step for every lane, so the init runs unguarded and the update keeps
 * the guard. */
static void test_rfactor_guarded_decomposed(void **state) {
  (void)state;
  ts_sched *s = sched("dense M=2 N=13 K=40");
  ts_rv b, l[16], ko[2], rf, rl[16], init;
  loops_of(s, "dense", &b, l);
  int64_t fk[2] = {TS_SPLIT_INFER, 16};
  OK(ts_sched_split(s, l[2], fk, 2, ko));
  OK(ts_sched_rfactor(s, ko[1], 2, &rf));
  loops_of(s, "dense_rf", &rf, rl);
  OK(ts_sched_decompose_reduction(s, rf, rl[2], &init));
  OK(ts_sched_vectorize(s, rl[3]));
  finish(s, "rfactor_guarded_decomposed", true);
}

static void test_rfactor_max(void **state) {
  (void)state;
  ts_sched *s = sched("reduce op=max N=3 D=16");
  ts_rv b, l[16], rf;
  loops_of(s, "Y", &b, l);
  OK(ts_sched_rfactor(s, l[1], 0, &rf));
  finish(s, "rfactor_max", true);
}

/* ---- blockize ---- */

static void test_blockize(void **state) {
  (void)state;
  ts_sched *s = sched("matmul M=16 N=16 K=16");
  ts_rv b, l[16], i[2], j[2], k[2], o;
  loops_of(s, "C", &b, l);
  int64_t f[2] = {TS_SPLIT_INFER, 4};
  OK(ts_sched_split(s, l[0], f, 2, i));
  OK(ts_sched_split(s, l[1], f, 2, j));
  OK(ts_sched_split(s, l[2], f, 2, k));
  ts_rv order[6] = {i[0], j[0], k[0], i[1], j[1], k[1]};
  OK(ts_sched_reorder(s, order, 6));
  OK(ts_sched_blockize(s, i[1], &o));
  finish(s, "blockize", true);
}

/* ---- sampling ---- */

static void test_sampling(void **state) {
  (void)state;
  ts_sched *s = sched("matmul M=16 N=24 K=8");
  ts_rv b, l[16], t[3], o[3], v;
  loops_of(s, "C", &b, l);
  OK(ts_sched_sample_perfect_tile(s, l[1], 3, 4, t));
  int64_t prod = 1;
  for (int i = 0; i < 3; i++) prod *= ts_sched_rv_int(s, t[i]);
  assert_int_equal(prod, 24);
  assert_true(ts_sched_rv_int(s, t[2]) <= 4);
  OK(ts_sched_split_rv(s, l[1], t, 3, o));
  int64_t cand[3] = {0, 16, 64};
  double probs[3] = {0.25, 0.5, 0.25};
  OK(ts_sched_sample_categorical(s, cand, probs, 3, &v));
  OK(ts_sched_annotate_rv(s, o[0], TS_ANN_AUTO_UNROLL_MAX_STEP, v));
  finish(s, "sampling", true);
}

static void test_sample_compute_location(void **state) {
  (void)state;
  ts_sched *s = sched("conv2d_nhwc N=1 H=6 W=6 CI=4 CO=8 KH=3 KW=3 pad=1");
  ts_rv pad, loc;
  OK(ts_sched_get_block(s, "pad", &pad));
  /* seed 1 draws some location; whatever it is, it is legal */
  OK(ts_sched_sample_compute_location(s, pad, &loc));
  OK(ts_sched_compute_at(s, pad, loc));
  finish(s, "sample_compute_location", true);
}

/* ---- queries ---- */

static void test_queries(void **state) {
  (void)state;
  ts_sched *s = sched("layer_norm N=3 D=16");
  ts_rv mean, out[16], root;
  int n;
  OK(ts_sched_get_block(s, "mean", &mean));
  OK(ts_sched_get_producers(s, mean, out, 16, &n));
  assert_int_equal(n, 1);
  assert_string_equal(ts_sched_rv_block_name(s, out[0]), "x_sum");
  OK(ts_sched_get_consumers(s, mean, out, 16, &n));
  assert_int_equal(n, 1);
  assert_string_equal(ts_sched_rv_block_name(s, out[0]), "Y");
  ts_rv rstd;
  OK(ts_sched_get_block(s, "rstd", &rstd));
  OK(ts_sched_get_producers(s, rstd, out, 16, &n));
  assert_int_equal(n, 2);
  assert_string_equal(ts_sched_rv_block_name(s, out[0]), "x_sum");
  assert_string_equal(ts_sched_rv_block_name(s, out[1]), "sq_sum");
  OK(ts_sched_get_block(s, "root", &root));
  OK(ts_sched_get_child_blocks(s, root, out, 16, &n));
  assert_int_equal(n, 5);
  assert_string_equal(ts_sched_rv_block_name(s, out[4]), "Y");
  ts_rv l[4];
  OK(ts_sched_get_loops(s, mean, l, 4, &n));
  assert_int_equal(n, 1);
  assert_int_equal(ts_sched_rv_kind(s, l[0]), TS_RV_LOOP);
  assert_non_null(ts_sched_rv_loop(s, l[0]));
  OK(ts_sched_get_child_blocks(s, l[0], out, 16, &n));
  assert_int_equal(n, 1);
  /* a result that does not fit is refused and not recorded */
  int before = ts_trace_n_insts(ts_sched_trace(s));
  assert_int_equal(ts_sched_get_child_blocks(s, root, out, 2, &n), TS_EINVAL);
  assert_int_equal(ts_trace_n_insts(ts_sched_trace(s)), before);
  assert_int_equal(ts_sched_rv_kind(s, 999), TS_RV_INVALID);
  finish(s, "queries", true);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_split),
      cmocka_unit_test(test_split_imperfect),
      cmocka_unit_test(test_fuse),
      cmocka_unit_test(test_fuse_siblings),
      cmocka_unit_test(test_fuse_siblings_rows),
      cmocka_unit_test(test_reorder),
      cmocka_unit_test(test_loop_kinds),
      cmocka_unit_test(test_bind),
      cmocka_unit_test(test_annotate),
      cmocka_unit_test(test_compute_at),
      cmocka_unit_test(test_compute_at_reduction),
      cmocka_unit_test(test_reverse_compute_at),
      cmocka_unit_test(test_compute_inline),
      cmocka_unit_test(test_reverse_compute_inline),
      cmocka_unit_test(test_cache_read),
      cmocka_unit_test(test_cache_write),
      cmocka_unit_test(test_set_scope_storage_align),
      cmocka_unit_test(test_pad_einsum),
      cmocka_unit_test(test_pad_einsum_conv),
      cmocka_unit_test(test_transform_layout),
      cmocka_unit_test(test_transform_layout_injective),
      cmocka_unit_test(test_decompose_reduction),
      cmocka_unit_test(test_decompose_reduction_guarded),
      cmocka_unit_test(test_rfactor),
      cmocka_unit_test(test_rfactor_max),
      cmocka_unit_test(test_rfactor_guarded),
      cmocka_unit_test(test_rfactor_guarded_moved),
      cmocka_unit_test(test_rfactor_guarded_moved_twice),
      cmocka_unit_test(test_rfactor_guarded_decomposed),
      cmocka_unit_test(test_blockize),
      cmocka_unit_test(test_partition),
      cmocka_unit_test(test_partition_reduce),
      cmocka_unit_test(test_sampling),
      cmocka_unit_test(test_sample_compute_location),
      cmocka_unit_test(test_queries),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
