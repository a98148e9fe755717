/*
 * test_partition.c — loop partitioning of imperfect tiles (codegen/
 * partition.c): matmuls, dense layers and convolutions of odd and prime
 * sizes tiled with factors that do not divide their extents, at every tile
 * level (register rows and vector columns, cache tiles, parallel outer
 * loops, the reduction), compiled and compared with the reference
 * interpreter; the lowered program keeps a main copy of the kernel
 * without the predicate (vectorized, unrolled) next to a predicated tail;
 * padding inlined into convs (guarded loads) gets an unguarded interior.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "check.h"
#include "schedule/schedule.h"

#define OK(x) assert_int_equal((x), TS_OK)
/* a primitive of schedule s: its message printed when it refuses */
#define SOK(x)                                                                 \
  do {                                                                         \
    int rc_ = (x);                                                             \
    if (rc_) printf("%s\n", ts_sched_errmsg(s));                               \
    assert_int_equal(rc_, TS_OK);                                              \
  } while (0)

static ts_sched *sched_of(const char *spec) {
  ts_workload *w = NULL;
  ts_error err;
  OK(ts_workload_from_spec(spec, &w, &err));
  ts_sched *s = NULL;
  OK(ts_sched_create(w->func, 1, &s, &err));
  ts_workload_free(w);
  return s;
}

/* The lowered program of s (malloc'd text). */
static char *lowered_text(const ts_sched *s) {
  ts_error err;
  ts_lower_options o = ts_lower_defaults();
  o.verify_between = true;
  ts_func *low = ts_lower(ts_sched_func(s), &o, &err);
  if (!low) printf("lower: %s\n", err.msg);
  assert_non_null(low);
  char *text = ts_func_print(low);
  ts_func_free(low);
  return text;
}

static void check_run(const ts_sched *s) {
  ts_error err;
  int rc = check_compiled(ts_sched_func(s), NULL, 2, 5, &err);
  if (rc) {
    char *t = ts_func_print(ts_sched_func(s));
    printf("mismatch: %s\n%s\n", err.msg, t);
    free(t);
  }
  OK(rc);
}

/* Counts occurrences of needle in text. */
static int count(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

/* SSRSRS of a matmul-like block C with the given inner factors per loop
 * (outermost inferred), output written in place; the reduction init
 * decomposed, the outer loops fused and parallel, the innermost spatial
 * loop vectorized and the rest unrolled up to `unroll` steps. */
static void mlt(ts_sched *s, const char *block, const int64_t *fi,
                const int64_t *fj, const int64_t *fk, int unroll) {
  ts_rv b, l[3], i[4], j[4], k[2], init, loops[10], fused;
  int n = 0;
  SOK(ts_sched_get_block(s, block, &b));
  SOK(ts_sched_get_loops(s, b, l, 3, &n));
  int64_t a[4] = {TS_SPLIT_INFER, fi[0], fi[1], fi[2]};
  int64_t c[4] = {TS_SPLIT_INFER, fj[0], fj[1], fj[2]};
  int64_t r[2] = {TS_SPLIT_INFER, fk[0]};
  SOK(ts_sched_split(s, l[0], a, 4, i));
  SOK(ts_sched_split(s, l[1], c, 4, j));
  SOK(ts_sched_split(s, l[2], r, 2, k));
  ts_rv order[10] = {i[0], j[0], i[1], j[1], k[0],
                     i[2], j[2], k[1], i[3], j[3]};
  SOK(ts_sched_reorder(s, order, 10));
  /* refused when the reduction's tile is imperfect too (the predicate
   * depends on k): the init then stays in the block */
  if (ts_sched_decompose_reduction(s, b, k[0], &init))
    assert_non_null(strstr(ts_sched_errmsg(s), "depends on reduction loop"));
  SOK(ts_sched_get_loops(s, b, loops, 10, &n));
  SOK(ts_sched_vectorize(s, loops[9]));
  SOK(ts_sched_fuse(s, loops, 2, &fused));
  SOK(ts_sched_parallel(s, fused));
  SOK(ts_sched_annotate(s, fused,
                        ts_ann_int("pragma_auto_unroll_max_step", unroll)));
}

/* A 6x16 register tile over 1024-like rows that 6 does not divide: the
 * main copy of the kernel has no predicate and its column loop becomes
 * vectors; the tail keeps it. */
static void test_register_tile_rows(void **state) {
  (void)state;
  ts_sched *s = sched_of("matmul M=64 N=32 K=16");
  int64_t fi[3] = {1, 1, 6}, fj[3] = {1, 1, 16}, fk[1] = {8};
  mlt(s, "C", fi, fj, fk, 512);
  char *text = lowered_text(s);
  /* partitioned: a test on the parallel loop with an else */
  assert_true(count(text, "} else {") >= 1);
  /* the main kernel: vector stores with no condition on the rows */
  assert_true(count(text, "C[ramp(") >= 2);
  free(text);
  check_run(s);
  ts_sched_destroy(s);
}

/* After unrolling, the rows of a ragged register tile in its tail copy
 * (26 rows in tiles of 6: the last tile holds 2) are decided by the tail's
 * test: the rows past the end leave no branch behind (an `if` whose else
 * is empty, per row and reduction step, without it), the rows inside none
 * either; the copy's accumulators are the tail's 2 rows. */
static void test_tail_rows_decided(void **state) {
  (void)state;
  static const char *specs[] = {"matmul M=26 N=64 K=16",
                                "dense M=26 N=48 K=40"};
  for (int c = 0; c < 2; c++) {
    ts_sched *s = sched_of(specs[c]);
    int64_t fi[3] = {1, 1, 6}, fj[3] = {1, 1, 16}, fk[1] = {4};
    mlt(s, c ? "dense" : "C", fi, fj, fk, 512);
    char *text = lowered_text(s);
    bool ok = count(text, "} else {\n") >= 1 && !strstr(text, "else {\n }") &&
              count(text, "if ") <= 4;
    if (!ok) printf("%s\n%s\n", specs[c], text);
    assert_true(ok);
    free(text);
    check_run(s);
    ts_sched_destroy(s);
  }
}

/* After unrolling, a tile of whole vectors whose last tile is shorter
 * (112 columns in tiles of 4 x 16: the last holds 3 vectors) keeps no
 * test on its vectors: each unrolled vector's test is decided by the
 * tail copy's, the fourth vector of the last tile removed, the others
 * unguarded, so both copies keep their accumulators in registers. */
static void test_tail_vectors_decided(void **state) {
  (void)state;
  ts_sched *s = sched_of("matmul M=12 N=112 K=32");
  int64_t fi[3] = {1, 1, 6}, fj[3] = {1, 4, 16}, fk[1] = {4};
  mlt(s, "C", fi, fj, fk, 512);
  char *text = lowered_text(s);
  /* the vector tests left: the init's and write-back's at most, none per
   * reduction step */
  int left = count(text, "< broadcast(112");
  if (left > 2) printf("%d vector tests left:\n%s\n", left, text);
  assert_true(left <= 2);
  free(text);
  check_run(s);
  ts_sched_destroy(s);
}

/* Vector tiles in blocks that do not divide them (67 columns: 5 tiles of
 * 16, in blocks of 3), under a ragged row tile and reduction: the last
 * block holds a whole tile, a masked one (3 columns) and a slot past the
 * end. The column test partitions the block at its tiles; the slot's test,
 * a conjunct of the same `if`, is partitioned there too, so the empty slot
 * is removed instead of running its products under a mask that is off in
 * every lane (it once was frozen with the column test, three tails deep:
 * a 359 x 163 x 569 product on AVX2 ran at 0.7 x oneDNN). */
static void test_slot_past_last_tile(void **state) {
  (void)state;
  ts_sched *s = sched_of("matmul M=13 N=67 K=18");
  ts_rv b, l[3], j[2], jb[2], i[2], k[2], cw;
  int n = 0;
  SOK(ts_sched_get_block(s, "C", &b));
  SOK(ts_sched_get_loops(s, b, l, 3, &n));
  int64_t f16[2] = {TS_SPLIT_INFER, 16}, f3[2] = {TS_SPLIT_INFER, 3},
          f6[2] = {TS_SPLIT_INFER, 6}, f4[2] = {TS_SPLIT_INFER, 4};
  SOK(ts_sched_split(s, l[1], f16, 2, j));
  SOK(ts_sched_split(s, l[0], f6, 2, i));
  SOK(ts_sched_split(s, j[0], f3, 2, jb));
  SOK(ts_sched_split(s, l[2], f4, 2, k));
  ts_rv order[7] = {jb[0], i[0], jb[1], k[0], k[1], i[1], j[1]};
  SOK(ts_sched_reorder(s, order, 7));
  SOK(ts_sched_cache_write(s, b, "C", "local", &cw));
  SOK(ts_sched_reverse_compute_at(s, cw, jb[1]));
  SOK(ts_sched_vectorize(s, j[1]));
  SOK(ts_sched_unroll(s, i[1]));
  SOK(ts_sched_unroll(s, k[1]));
  char *text = lowered_text(s);
  bool ok = !strstr(text, " < 5, 16)");
  if (!ok) printf("the slot's test inside the masks:\n%s\n", text);
  assert_true(ok);
  free(text);
  check_run(s);
  ts_sched_destroy(s);
}

/* Odd and prime sizes with imperfect factors at every level. */
static void test_imperfect_every_level(void **state) {
  (void)state;
  static const struct {
    const char *spec, *block;
    int64_t fi[3], fj[3], fk[1];
    int unroll;
  } cases[] = {
      {"matmul M=127 N=77 K=53", "C", {3, 2, 6}, {2, 1, 16}, {8}, 512},
      {"matmul M=31 N=17 K=13", "C", {2, 3, 5}, {1, 3, 8}, {4}, 64},
      {"matmul M=1000 N=7 K=9", "C", {5, 1, 7}, {1, 1, 8}, {2}, 16},
      {"matmul M=13 N=101 K=7", "C", {1, 2, 3}, {3, 1, 24}, {7}, 0},
      {"matmul M=23 N=41 K=29", "C", {2, 2, 2}, {2, 2, 8}, {5}, 512},
      {"dense M=11 N=37 K=19", "dense", {1, 2, 4}, {1, 2, 16}, {3}, 64},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    ts_sched *s = sched_of(cases[c].spec);
    mlt(s, cases[c].block, cases[c].fi, cases[c].fj, cases[c].fk,
        cases[c].unroll);
    char *text = lowered_text(s);
    assert_true(count(text, "} else {") >= 1);
    free(text);
    check_run(s);
    ts_sched_destroy(s);
  }
}

/* Imperfect tiles under caches: a read cache of B at the column tile and a
 * local write cache of C at the row tile, both compacted or not, and a
 * convolution of odd spatial sizes. */
static void test_caches_and_conv(void **state) {
  (void)state;
  ts_sched *s = sched_of("matmul M=29 N=45 K=17");
  ts_rv b, l[3], i[3], j[3], k[2], cr, cw, loops[8];
  int n = 0;
  SOK(ts_sched_get_block(s, "C", &b));
  SOK(ts_sched_get_loops(s, b, l, 3, &n));
  int64_t a[3] = {TS_SPLIT_INFER, 2, 4}, c[3] = {TS_SPLIT_INFER, 2, 8},
          r[2] = {TS_SPLIT_INFER, 5};
  SOK(ts_sched_split(s, l[0], a, 3, i));
  SOK(ts_sched_split(s, l[1], c, 3, j));
  SOK(ts_sched_split(s, l[2], r, 2, k));
  ts_rv order[8] = {i[0], j[0], i[1], j[1], k[0], k[1], i[2], j[2]};
  SOK(ts_sched_reorder(s, order, 8));
  SOK(ts_sched_cache_read(s, b, "B", "global", &cr));
  SOK(ts_sched_compute_at(s, cr, j[0]));
  SOK(ts_sched_cache_write(s, b, "C", "local", &cw));
  SOK(ts_sched_reverse_compute_at(s, cw, j[1]));
  SOK(ts_sched_get_loops(s, b, loops, 8, &n));
  SOK(ts_sched_vectorize(s, loops[n - 1]));
  SOK(ts_sched_parallel(s, loops[0]));
  check_run(s);
  ts_sched_destroy(s);

  s = sched_of("conv2d_nhwc N=1 H=7 W=11 CI=3 CO=13 KH=3 KW=3 pad=1");
  ts_rv cb, cl[7], w[3], co[3];
  SOK(ts_sched_get_block(s, "conv", &cb));
  SOK(ts_sched_get_loops(s, cb, cl, 7, &n));
  int64_t fw[3] = {TS_SPLIT_INFER, 2, 3}, fc[3] = {TS_SPLIT_INFER, 1, 8};
  SOK(ts_sched_split(s, cl[2], fw, 3, w));
  SOK(ts_sched_split(s, cl[3], fc, 3, co));
  ts_rv ord[10] = {cl[0], cl[1], w[0],  co[0], w[1],
                   co[1], cl[4], cl[5], cl[6], w[2]};
  SOK(ts_sched_reorder(s, ord, 10));
  ts_rv all[16];
  SOK(ts_sched_get_loops(s, cb, all, 16, &n));
  SOK(ts_sched_parallel(s, all[0]));
  check_run(s);
  ts_sched_destroy(s);
}

/* Padding inlined into a conv (a guarded load per tap): the main copy,
 * taken where every tap of the tile is inside the image, reads without a
 * guard; the border copy keeps every guard. Depthwise and dense convs,
 * strided, with tiles that do and do not divide the output, the taps
 * unrolled or looped, the guard scalar (an unvectorized channel loop) or
 * broadcast to the vector. */
static void test_padding_guards(void **state) {
  (void)state;
  static const struct {
    const char *spec, *block;
    int64_t fh, fw; /* inner factors of the output rows and columns */
    bool vec, unroll_taps;
  } cases[] = {
      {"depthwise_conv2d_nhwc N=1 H=12 W=12 C=16 KH=3 KW=3 pad=1",
       "depthwise_conv", 2, 2, true, true},
      {"depthwise_conv2d_nhwc N=1 H=11 W=13 C=8 KH=3 KW=3 pad=1",
       "depthwise_conv", 2, 3, true, false},
      {"depthwise_conv2d_nhwc N=1 H=9 W=10 C=8 KH=5 KW=5 pad=2 stride=2",
       "depthwise_conv", 1, 2, true, true},
      {"conv2d_nhwc N=1 H=7 W=9 CI=3 CO=8 KH=3 KW=3 pad=1", "conv", 1, 3, false,
       true},
      {"conv2d_nhwc N=2 H=10 W=6 CI=4 CO=16 KH=3 KW=3 pad=2 dilation=2", "conv",
       2, 2, true, false},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    ts_sched *s = sched_of(cases[c].spec);
    ts_rv pad, b, l[8], h[2], w[2], loops[16];
    int n = 0;
    SOK(ts_sched_get_block(s, "pad", &pad));
    SOK(ts_sched_compute_inline(s, pad));
    SOK(ts_sched_get_block(s, cases[c].block, &b));
    SOK(ts_sched_get_loops(s, b, l, 8, &n));
    /* n h w c kh kw (depthwise) or n h w co kh kw ci (conv) */
    int64_t fh[2] = {TS_SPLIT_INFER, cases[c].fh},
            fw[2] = {TS_SPLIT_INFER, cases[c].fw};
    SOK(ts_sched_split(s, l[1], fh, 2, h));
    SOK(ts_sched_split(s, l[2], fw, 2, w));
    ts_rv taps[3];
    int nt = 0;
    for (int i = 4; i < n; i++) taps[nt++] = l[i];
    ts_rv order[16];
    int no = 0;
    order[no++] = l[0];
    order[no++] = h[0];
    order[no++] = w[0];
    for (int i = 0; i < nt; i++) order[no++] = taps[i];
    order[no++] = h[1];
    order[no++] = w[1];
    order[no++] = l[3];
    SOK(ts_sched_reorder(s, order, no));
    SOK(ts_sched_get_loops(s, b, loops, 16, &n));
    if (cases[c].vec) SOK(ts_sched_vectorize(s, loops[n - 1]));
    for (int i = 3; i < n - 1; i++)
      if (cases[c].unroll_taps || i >= 3 + nt)
        SOK(ts_sched_unroll(s, loops[i]));
    SOK(ts_sched_parallel(s, loops[0]));
    char *text = lowered_text(s);
    /* partitioned, and the main copy reads the image without guards
     * (without the pass every read of data is under one) */
    if (count(text, "} else {") < 1 ||
        count(text, "if_then_else") >= count(text, "data["))
      printf("%s\n%s\n", cases[c].spec, text);
    assert_true(count(text, "} else {") >= 1);
    assert_true(count(text, "if_then_else") < count(text, "data["));
    free(text);
    check_run(s);
    ts_sched_destroy(s);
  }
}

/* Whether `needle` occurs in text between `from` (a place in it) and the
 * first `to` after it. */
static bool between(const char *text, const char *from, const char *to,
                    const char *needle) {
  (void)text;
  const char *end = strstr(from + 1, to), *p = strstr(from, needle);
  return end && p && p < end;
}

/* A dense conv with its padding inlined, a tile of `tile` output columns
 * (or of fused pixels) unrolled over its output channels (vectorized),
 * under the kernel's rows and columns and its input channels in steps of
 * 4 (a serial loop, then unrolled). */
static ts_sched *conv_tiles(const char *spec, bool fused, int64_t tile) {
  ts_sched *s = sched_of(spec);
  ts_rv pad, b, l[8], px[2], rc[2], hw, loops[16];
  int n = 0;
  SOK(ts_sched_get_block(s, "pad", &pad));
  SOK(ts_sched_compute_inline(s, pad));
  SOK(ts_sched_get_block(s, "conv", &b));
  SOK(ts_sched_get_loops(s, b, l, 8, &n)); /* n h w co rh rw rc */
  int64_t fp[2] = {TS_SPLIT_INFER, tile};
  int64_t fr[2] = {TS_SPLIT_INFER, 4};
  ts_rv order[16];
  int no = 0;
  order[no++] = l[0];
  if (fused) {
    ts_rv pair[2] = {l[1], l[2]};
    SOK(ts_sched_fuse(s, pair, 2, &hw));
    SOK(ts_sched_split(s, hw, fp, 2, px));
  } else {
    SOK(ts_sched_split(s, l[2], fp, 2, px));
    order[no++] = l[1];
  }
  SOK(ts_sched_split(s, l[6], fr, 2, rc));
  order[no++] = px[0];
  order[no++] = l[4];
  order[no++] = l[5];
  order[no++] = rc[0];
  order[no++] = rc[1];
  order[no++] = px[1];
  order[no++] = l[3];
  SOK(ts_sched_reorder(s, order, no));
  SOK(ts_sched_get_loops(s, b, loops, 16, &n));
  SOK(ts_sched_vectorize(s, loops[n - 1]));
  SOK(ts_sched_unroll(s, loops[n - 2]));
  SOK(ts_sched_unroll(s, loops[n - 3]));
  return s;
}

/* A dense conv's border tiles: with its padding inlined and a tile of
 * output columns, the tile's loop over the kernel's rows and columns
 * (serial, the input channels below them) partitions the border copy
 * again, so the interior taps of a border tile read without guards (a
 * test on the kernel row `rh` inside the border copy). With the pixels
 * fused into one loop (a tile of 4 pixels crossing image rows), each
 * pixel's guard is floordiv/floormod of the tile and the unrolled pixel:
 * the pixel's values are enumerated into the tile's test. */
static void test_conv_border_again(void **state) {
  (void)state;
  static const struct {
    const char *spec;
    bool fused;
    int64_t tile; /* columns, or fused pixels */
  } cases[] = {
      {"conv2d_nhwc N=1 H=23 W=23 CI=16 CO=16 KH=3 KW=3 stride=2 pad=1", false,
       4},
      {"conv2d_nhwc N=1 H=9 W=10 CI=8 CO=16 KH=3 KW=3 pad=1", false, 3},
      {"conv2d_nhwc N=1 H=23 W=23 CI=16 CO=16 KH=3 KW=3 stride=2 pad=1", true,
       4},
      {"conv2d_nhwc N=1 H=13 W=13 CI=8 CO=16 KH=3 KW=3 pad=1", true, 5},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    ts_sched *s = conv_tiles(cases[c].spec, cases[c].fused, cases[c].tile);
    char *text = lowered_text(s);
    /* the tile's interior test (a conjunction, above the kernel's loops),
     * then in a border copy a test between the kernel row loop and the
     * kernel column loop */
    bool ok = between(text, text, "for rh", "&&") &&
              count(text, "if_then_else") < count(text, "data[");
    bool row_test = false;
    for (const char *p = strstr(text, "for rh"); p && !row_test;
         p = strstr(p + 1, "for rh"))
      row_test = between(text, p, "for rw", "if ");
    ok = ok && row_test;
    if (!ok) printf("%s\n%s\n", cases[c].spec, text);
    assert_true(ok);
    free(text);
    check_run(s);
    ts_sched_destroy(s);
  }
}

/* The fewest input reads (taps) in one copy of the input channel loop
 * `for rc_0` of a lowered program (0 when there is none). */
static int fewest_taps(const char *text) {
  int fewest = 0;
  for (const char *p = strstr(text, "for rc_0"); p;) {
    const char *next = strstr(p + 1, "for rc_0");
    int n = 0;
    for (const char *q = strstr(p, "data["); q && (!next || q < next);
         q = strstr(q + 1, "data["))
      n++;
    if (n && (!fewest || n < fewest)) fewest = n;
    p = next;
  }
  return fewest;
}

/* Padded taps dropped: after unrolling, a border copy's guards that no
 * loop below changes (each unrolled column's test) split it once more,
 * until every guard is decided; a tap whose guard fails is outside the
 * image, and its multiply-add of the padding's zero is removed. No guard
 * is left, and a border tile runs fewer taps than an interior one: a 7 x 7
 * image in tiles of a whole row (7 columns x 4 channels per step), a
 * strided conv, and the 7 x 7 image in tiles of 5 fused pixels. */
static void test_padded_taps_dropped(void **state) {
  (void)state;
  static const struct {
    const char *spec;
    bool fused;
    int64_t tile;
    int guards; /* left at most */
  } cases[] = {
      {"conv2d_nhwc N=1 H=7 W=7 CI=8 CO=16 KH=3 KW=3 pad=1", false, 7, 0},
      {"conv2d_nhwc N=1 H=12 W=12 CI=8 CO=16 KH=3 KW=3 stride=2 pad=1", false,
       6, 0},
      /* each fused pixel's column test is a guard of its own: the copies'
       * budget (MAX_UNSWITCH) ends before all are decided */
      {"conv2d_nhwc N=1 H=7 W=7 CI=8 CO=16 KH=3 KW=3 pad=1", true, 5, 8},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    ts_sched *s = conv_tiles(cases[c].spec, cases[c].fused, cases[c].tile);
    char *text = lowered_text(s);
    int fewest = fewest_taps(text);
    bool ok = count(text, "if_then_else") <= cases[c].guards && fewest > 0 &&
              fewest < 4 * cases[c].tile;
    if (!ok)
      printf("%s: %d guards, fewest taps %d\n%s\n", cases[c].spec,
             count(text, "if_then_else"), fewest, text);
    assert_true(ok);
    free(text);
    check_run(s);
    ts_sched_destroy(s);
  }
}

/* Tests decided by the copies around them. A depthwise conv with its
 * padding inlined and 5-column tiles over 12 columns (5 + 5 + 2): the
 * image's interior in columns is tile 1 alone, where the last tile's test
 * (`w_0 * 5 + 4 < 12`) always holds, so the interior copy holds no test
 * and no tail copy of its own (without the branch conditions it held
 * both); in the border copy, the last tile's column tests are left only
 * in tile 2's copy. */
static void test_tests_decided_by_copies(void **state) {
  (void)state;
  ts_sched *s =
      sched_of("depthwise_conv2d_nhwc N=1 H=6 W=12 C=8 KH=3 KW=3 pad=1");
  ts_rv pad, b, l[8], w[2], loops[16];
  int n = 0;
  SOK(ts_sched_get_block(s, "pad", &pad));
  SOK(ts_sched_compute_inline(s, pad));
  SOK(ts_sched_get_block(s, "depthwise_conv", &b));
  SOK(ts_sched_get_loops(s, b, l, 8, &n)); /* n h w c kh kw */
  int64_t fw[2] = {TS_SPLIT_INFER, 5};
  SOK(ts_sched_split(s, l[2], fw, 2, w));
  ts_rv order[7] = {l[0], l[1], w[0], l[4], l[5], w[1], l[3]};
  SOK(ts_sched_reorder(s, order, 7));
  SOK(ts_sched_get_loops(s, b, loops, 16, &n));
  SOK(ts_sched_vectorize(s, loops[n - 1]));
  for (int i = 3; i < n - 1; i++) SOK(ts_sched_unroll(s, loops[i]));
  char *text = lowered_text(s);
  /* the interior copy: from its test to its else, no if */
  const char *in = strstr(text, "if 0 - w_0 * 5 < 0 && w_0 * 5 - 7 < 0 {");
  const char *end = in ? strstr(in, "} else {") : NULL;
  if (!in || !end) printf("%s\n", text);
  assert_non_null(in);
  assert_non_null(end);
  const char *inner_if = strstr(in + 1, "if ");
  if (inner_if && inner_if < end) printf("%s\n", text);
  assert_true(!inner_if || inner_if > end);
  /* tile 0's copy in the border rows and columns keeps no column test of
   * the last tile: each test `w_0 * 5 - K < 0` (K = 8, 9, 10) is left
   * where w_0 = 2 only, one per unrolled tap and column */
  assert_true(count(text, "if w_0 * 5 - 10 < 0") <= 2 * 9);
  free(text);
  check_run(s);
  ts_sched_destroy(s);
}

/* A function without predicates lowers as before: nothing partitioned. */
static void test_perfect_unchanged(void **state) {
  (void)state;
  ts_sched *s = sched_of("matmul M=32 N=32 K=16");
  int64_t fi[3] = {2, 1, 4}, fj[3] = {1, 1, 16}, fk[1] = {8};
  mlt(s, "C", fi, fj, fk, 64);
  char *text = lowered_text(s);
  assert_int_equal(count(text, "else"), 0);
  free(text);
  check_run(s);
  ts_sched_destroy(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_register_tile_rows),
      cmocka_unit_test(test_imperfect_every_level),
      cmocka_unit_test(test_tail_rows_decided),
      cmocka_unit_test(test_tail_vectors_decided),
      cmocka_unit_test(test_caches_and_conv),
      cmocka_unit_test(test_padding_guards),
      cmocka_unit_test(test_conv_border_again),
      cmocka_unit_test(test_padded_taps_dropped),
      cmocka_unit_test(test_tests_decided_by_copies),
      cmocka_unit_test(test_perfect_unchanged),
      cmocka_unit_test(test_slot_past_last_tile),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
