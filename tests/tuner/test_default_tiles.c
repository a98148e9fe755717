/*
 * test_default_tiles.c — the default schedule's register tiles and loop
 * orders on a fixed 2-core AVX2 target: B packed or read in place by the
 * panels' count, ragged two-vector tiles for widths of 8 x odd, A packed
 * into row micro-panels where its rows alias, row tiles before small
 * weights, column blocks beside a large A, a depthwise conv's order, 16-bit
 * floats with a ragged tile, tensorized products whose column tiles 4 does not
 * divide, a grouped conv's tile within one group, AMX's tile blocks where the
 * target has them. Each kernel is checked against the interpreter where the
 * host runs AVX2.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "default_check.h"
#include "tuner/internal.h"

/* The default schedule of `spec` for `target`: its trace (when trace is
 * not NULL) and scheduled function as text into *trace and *text (the
 * caller frees them); with `run`, the compiled kernel checked against the
 * reference on this host. */
static void target_default(const char *spec, const char *target, bool run,
                           char **trace, char **text) {
  ts_target *t;
  ts_error err;
  if (ts_target_parse(target, &t, &err)) fail_msg("%s", err.msg);
  ts_workload *w = workload(spec);
  ts_sched *s = NULL;
  if (ts_default_schedule(w->func, t, &s, &err))
    fail_msg("%s: %s", spec, err.msg);
  if (trace) *trace = ts_trace_print(ts_sched_trace(s));
  *text = ts_func_print(ts_sched_func(s));
  ts_sched_destroy(s);
  if (run) free(check_default(w->func, t, spec));
  ts_workload_free(w);
  ts_target_free(t);
}

#define AVX2_TARGET "llvm -mcpu=x86-64-v3 -num-cores=2"

/* The target of string s (parsed or the test fails). */
static ts_target *target_of(const char *s) {
  ts_target *t;
  ts_error err;
  if (ts_target_parse(s, &t, &err)) fail_msg("%s", err.msg);
  return t;
}

/* The L1 ways of the target of string s. */
static int l1d_ways_of(const char *s) {
  ts_target *t = target_of(s);
  int w = ts_target_l1d_ways(t);
  ts_target_free(t);
  return w;
}

/* target_default for a fixed 2-core AVX2 target, checked where this host
 * runs AVX2. */
static void avx2_default(const char *spec, char **trace, char **text) {
  target_default(spec, AVX2_TARGET, ts_rt_cpu_has("avx2") == 1, trace, text);
}

/* B of a product packed per column panel only when the panels keep the
 * cores evenly busy or B is too large for the caches: 100 x 100 has 5
 * panels of 20 columns, which 2 cores split 3 + 2, so B is read in place
 * and the row tiles join the parallel loop (125 tiles); 128 x 128 has 8
 * panels of 16 and packs them. */
static void test_few_panels(void **state) {
  (void)state;
  static const struct {
    const char *spec;
    bool packed;
  } cases[] = {
      {"matmul M=100 N=100 K=100", false},
      {"matmul M=128 N=128 K=64", true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *trace, *text;
    avx2_default(cases[i].spec, &trace, &text);
    if ((strstr(trace, "cache_read(") != NULL) != cases[i].packed)
      fail_msg("%s: B %s packed in\n%s", cases[i].spec,
               cases[i].packed ? "not" : "", trace);
    if (!cases[i].packed && !strstr(text, "in range(125) parallel"))
      fail_msg("%s: the row tiles not in the parallel loop:\n%s", cases[i].spec,
               text);
    free(trace);
    free(text);
  }
}

/* Widths that whole vectors divide only one at a time (200 on AVX2's 8
 * lanes: 8 x 25): a ceil split two vectors wide, accumulated in a local
 * tile, where its last tile wastes 5 % of the lanes or less; a narrower
 * one (40, whose 16-wide tiles would leave a third of the columns in the
 * guarded last tile) and one that two vectors divide (128) keep their
 * divisor tiles. */
static void test_wide_ragged(void **state) {
  (void)state;
  static const struct {
    const char *spec;
    bool ragged;
  } cases[] = {
      {"matmul M=24 N=200 K=32", true},
      {"matmul M=24 N=40 K=32", false},
      {"batch_matmul B=2 M=128 N=128 K=64", false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *trace, *text;
    avx2_default(cases[i].spec, &trace, &text);
    bool local = strstr(trace, "cache_write(") != NULL;
    bool wide = strstr(trace, "factors=[None, 16]") != NULL;
    if (local != cases[i].ragged || (wide && local) != cases[i].ragged)
      fail_msg("%s: expected %s tile in\n%s", cases[i].spec,
               cases[i].ragged ? "a ragged 16-wide" : "a divisor", trace);
    free(trace);
    free(text);
  }
}

/* A product of one to seven rows against a transposed operand (a dense
 * layer, W [N, K]): each output a dot product of two contiguous rows, the
 * reduction in the lanes (rfactor), the rows by a tile of columns zeroed
 * and accumulated in registers, the column tiles parallel; a prime width
 * takes a guarded last tile, a row no vector divides a guarded last step.
 * Eight rows pack W transposed instead (default_pack_transposed). */
static void test_dot_rows(void **state) {
  (void)state;
  static const struct {
    const char *spec;
    bool dot;
  } cases[] = {
      {"dense M=1 N=1000 K=2048 bias=1", true},
      {"dense M=2 N=576 K=576", true},
      {"dense M=3 N=13 K=40", true},
      {"dense M=2 N=997 K=1001", true},
      {"batch_matmul B=3 M=1 N=17 K=35 transpose_b=1", true},
      {"dense M=4 N=64 K=64", true},
      {"dense M=7 N=37 K=50", true},
      {"dense M=8 N=64 K=64", false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *trace, *text;
    avx2_default(cases[i].spec, &trace, &text);
    bool dot = strstr(trace, "rfactor(") && strstr(text, "_rf_init") &&
               strstr(text, ") parallel");
    if (dot != cases[i].dot)
      fail_msg("%s: expected %s in\n%s\n%s", cases[i].spec,
               cases[i].dot ? "the dot-product form" : "another form", trace,
               text);
    free(trace);
    free(text);
  }
}

/* A weight declared constant (const=) is packed once, in panels of the
 * vector tile (a conv's [CO / cols, KH, KW, CI, cols]; a dense layer's W
 * transposed, [N / cols, K, cols]), as a compiled model's layout pass
 * blocks it: a stage that reads only the weight, and so runs ahead of the
 * calls. Without const= the panel is copied inside the panel loop (in
 * place for the conv, transposed for the dense layer), for locality. */
static void test_const_weight_packed(void **state) {
  (void)state;
  static const struct {
    const char *spec, *layout;
    bool packed;
  } cases[] = {
      {"conv2d_nhwc N=1 H=7 W=7 CI=64 CO=64 KH=3 KW=3 pad=1 const=weight",
       "alloc weight_global: float32[4, 3, 3, 64, 16]", true},
      {"conv2d_nhwc N=1 H=7 W=7 CI=64 CO=64 KH=3 KW=3 pad=1",
       "alloc weight_global: float32[4, 3, 3, 64, 16]", false},
      {"dense M=16 N=96 K=64 const=W", "alloc W_global: float32[4, 64, 24]",
       true},
      {"dense M=16 N=96 K=64", "alloc W_global: float32[4, 64, 24]", false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *trace, *text;
    avx2_default(cases[i].spec, &trace, &text);
    bool packed = strstr(text, cases[i].layout);
    if (packed != cases[i].packed)
      fail_msg("%s: the weight %s in panels in\n%s", cases[i].spec,
               cases[i].packed ? "not packed" : "packed", text);
    free(trace);
    free(text);
  }
}

/* 16-bit float products whose register tile is ragged (a prime width, a
 * width of 8 x odd): the guarded edge tile's masked loads and stores of
 * bfloat16/float16 used to be legalized through compiler-rt conversions
 * (__truncsfbf2) that a kernel does not link, so the kernel failed to
 * load; they now move the bits as 16-bit integers. */
static void test_half_ragged(void **state) {
  (void)state;
  static const char *const specs[] = {
      "matmul M=24 N=200 K=32 dtype=bfloat16",
      "matmul M=16 N=191 K=16 dtype=bfloat16",
      "matmul M=16 N=191 K=16 dtype=float16",
  };
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
    char *trace, *text;
    avx2_default(specs[i], &trace, &text);
    if (!strstr(trace, "cache_write("))
      fail_msg("%s: expected a ragged tile in\n%s", specs[i], trace);
    free(trace);
    free(text);
  }
}

/* A's rows 4 KiB apart (K = 1024 floats) and read again by each of four
 * vector tiles: A packed once into micro-panels of the tile's rows
 * (A_global, [M / rows, K, rows]); at K = 1000 it is read in place. Only
 * where the L1 has 8 ways: a CPU of 12 (icelake-server) keeps the rows in
 * place (on AVX2 too), one of 8 (skylake-avx512) packs them. A transposed
 * A ([K, M], whose tile read a line a row of M apart per step) is packed
 * into the same panels on any CPU where 24 vector tiles or more read it
 * (512 columns: 32 tiles), not for 4 tiles (64 columns). */
static void test_rows_packed(void **state) {
  (void)state;
  static const struct {
    const char *spec, *target;
    bool packed;
  } cases[] = {
      {"matmul M=48 N=64 K=1024", AVX2_TARGET, true},
      {"matmul M=48 N=64 K=1000", AVX2_TARGET, false},
      {"matmul M=48 N=64 K=1024",
       "llvm -mcpu=icelake-server -mattr=-avx512f -num-cores=2", false},
      {"matmul M=48 N=64 K=1024",
       "llvm -mcpu=skylake-avx512 -mattr=-avx512f -num-cores=2", true},
      {"matmul M=48 N=512 K=1024 transpose_a=1", AVX2_TARGET, true},
      {"matmul M=48 N=512 K=1024 transpose_a=1",
       "llvm -mcpu=icelake-server -mattr=-avx512f -num-cores=2", true},
      {"matmul M=48 N=64 K=1024 transpose_a=1",
       "llvm -mcpu=icelake-server -mattr=-avx512f -num-cores=2", false},
  };
  assert_int_equal(l1d_ways_of("llvm -mcpu=icelake-server"), 12);
  assert_int_equal(l1d_ways_of("llvm -mcpu=znver4"), 8);
  assert_int_equal(l1d_ways_of("llvm -mcpu=x86-64-v3"), 8);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *trace, *text;
    target_default(cases[i].spec, cases[i].target,
                   !strcmp(cases[i].target, AVX2_TARGET) &&
                       ts_rt_cpu_has("avx2") == 1,
                   &trace, &text);
    bool packed = strstr(text, "A_global[floordiv(") != NULL;
    if (packed != cases[i].packed)
      fail_msg("%s: A %s packed in\n%s", cases[i].spec,
               cases[i].packed ? "not" : "", text);
    if (packed && !strstr(text, "alloc A_global: float32[8, 1024, 6]"))
      fail_msg("%s: not in micro-panels of 6 rows:\n%s", cases[i].spec, text);
    free(trace);
    free(text);
  }
}

/* Small weights beside a large image: the row tiles outside the column
 * panels, the panels packed once and kept a serial loop inside the
 * parallel row tiles (64 -> 256 channels at 56x56: 64 KiB of weights, an
 * 800 KiB image; 523 tiles of 6 pixels). Not with larger weights (512 ->
 * 128 at 28x28: 256 KiB, whose 1.6 MiB image makes column blocks: two of
 * four panels), nor where the streamed input is a transposed copy packed
 * per panel (a dense layer's [N, K] weights): their parallel loops stay
 * over the panels. */
static void test_rows_first(void **state) {
  (void)state;
  static const struct {
    const char *spec;
    const char *parallel; /* the parallel loop */
  } cases[] = {
      {"conv2d_nhwc N=1 H=56 W=56 CI=64 CO=256 KH=1 KW=1",
       "for n_h_w_fused_0_fused in range(523) parallel"},
      {"conv2d_nhwc N=1 H=28 W=28 CI=512 CO=128 KH=1 KW=1",
       "for n_co_0_0_fused in range(2) parallel"},
      {"dense M=3000 N=128 K=100", "for j_0 in range(8) parallel"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *trace, *text;
    avx2_default(cases[i].spec, &trace, &text);
    if (!strstr(text, cases[i].parallel))
      fail_msg("%s: expected '%s' in\n%s", cases[i].spec, cases[i].parallel,
               text);
    free(trace);
    free(text);
  }
}

/* Column blocks: a product whose A is larger than the L2 holds runs its
 * vector tiles in blocks (B packed per block, in parallel), the row tiles
 * inside the blocks and the block's tiles inside those, so each row
 * tile's slice of A is read once per block and not once per tile: 1031 x
 * 300 x 129 (19 tiles, 532 KiB of A) in 4 blocks of 5; 1031 x 1065 x 489
 * (67 tiles) in 10 blocks of 7, not 9 of 8 that 2 cores share 5 + 4.
 * Not where A fits (200 rows): one panel per tile, as before. */
static void test_column_blocks(void **state) {
  (void)state;
  static const struct {
    const char *spec;
    bool run;
    const char *loops[3]; /* in this order */
  } cases[] = {
      {"matmul M=1031 N=300 K=129",
       true,
       {"for j_0_0 in range(4) parallel", "for i_0 in range(172)",
        "for j_0_1 in range(5)"}},
      {"matmul M=1031 N=1065 K=489",
       false,
       {"for j_0_0 in range(10) parallel", "for i_0 in range(172)",
        "for j_0_1 in range(7)"}},
      {"matmul M=200 N=300 K=129",
       true,
       {"for j_0 in range(19) parallel", "for i_0 in range(34)", NULL}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *text;
    target_default(cases[i].spec, AVX2_TARGET,
                   cases[i].run && ts_rt_cpu_has("avx2") == 1, NULL, &text);
    const char *at = text;
    for (int k = 0; k < 3 && cases[i].loops[k]; k++) {
      const char *p = strstr(at, cases[i].loops[k]);
      if (!p)
        fail_msg("%s: expected '%s' after the loops before in\n%s",
                 cases[i].spec, cases[i].loops[k], text);
      at = p;
    }
    /* B packed per block: its copy inside the block loop, before rows */
    const char *pack = strstr(text, "block B_global");
    const char *rows = strstr(text, cases[i].loops[1]);
    if (!pack || !rows || pack > rows)
      fail_msg("%s: B not packed above the row tiles in\n%s", cases[i].spec,
               text);
    free(text);
  }
}

/* Row tiles before the panels (a small B beside a large A): B packed once
 * in panels where the tile divides its columns (64 in tiles of 16) and
 * 100 row tiles read each panel, read in place where 50 do; where the tile
 * does not divide them (77), B is read in place rather than copied again
 * under every row tile. */
static void test_rows_first_ragged(void **state) {
  (void)state;
  char *text;
  avx2_default("matmul M=600 N=64 K=500", NULL, &text);
  if (!strstr(text, "alloc B_global: float32[4, 500, 16]"))
    fail_msg("B not packed once in panels:\n%s", text);
  free(text);
  avx2_default("matmul M=300 N=64 K=500", NULL, &text);
  if (strstr(text, "B_global"))
    fail_msg("B packed for 50 row tiles:\n%s", text);
  free(text);
  /* (77 columns: past the widths padded to whole vectors) */
  avx2_default("matmul M=400 N=77 K=400", NULL, &text);
  if (strstr(text, "B_global") ||
      !strstr(text, "for i_0_j_0_fused in range(335) parallel"))
    fail_msg("B not read in place under the row tiles:\n%s", text);
  free(text);
}

/* A narrow width that no vector divides, where the unpadded tiles are
 * ragged (30 = 3 x 8 + 6 on AVX2: tiles of one vector, the last masked):
 * padded to whole vectors by pad_einsum, tiles with no guard; B's
 * padding part of its copy in panels (or of its transposing copy), a bias
 * folded into the copy out. Not where a whole-width tile of whole vectors and a
 * part is not ragged (12 = 8 + 4), nor where too few rows read a B copied
 * per call (128 rows), unless B is constant. */
static void test_narrow_padded(void **state) {
  (void)state;
  char *text;
  avx2_default("matmul M=300 N=30 K=500", NULL, &text);
  const char *anchor = strstr(text, "block C(");
  char line[512] = "";
  if (anchor)
    snprintf(line, sizeof line, "%.*s", (int)strcspn(anchor, "\n"), anchor);
  if (!strstr(text, "alloc B_pad_global: float32[2, 500, 16]") ||
      !strstr(text, "if_then_else(v1 < 30") || strstr(text, "block B_pad(") ||
      !strstr(text, "alloc C_pad") || !line[0] || strstr(line, " where "))
    fail_msg("30 columns not padded to 32, unguarded:\n%s", text);
  free(text);
  avx2_default("batch_matmul B=8 M=100 N=29 K=64 transpose_b=1", NULL, &text);
  if (strstr(text, "block B_pad(") || !strstr(text, "alloc B_pad_global") ||
      !strstr(text, "if_then_else(v1 < 29"))
    fail_msg("the padding not part of the transposing copy:\n%s", text);
  free(text);
  /* keys of 50 tokens transposed in tiles of 8 x 8 (two whole tiles a
   * side, the last partial), not element by element */
  avx2_default("batch_matmul B=12 M=50 N=50 K=64 transpose_b=1", NULL, &text);
  if (!strstr(text, "for ax0_1 in range(8) unrolled"))
    fail_msg("the keys not transposed in tiles:\n%s", text);
  free(text);
  avx2_default("dense M=256 N=30 K=128 bias=1", NULL, &text);
  if (!strstr(text, "alloc dense_pad") || strstr(text, "block Y(") ||
      !strstr(text, "block dense_unpad("))
    fail_msg("the bias not folded into the copy out:\n%s", text);
  free(text);
  avx2_default("matmul M=500 N=12 K=300", NULL, &text);
  if (strstr(text, "_pad"))
    fail_msg("a width of a vector and a part padded:\n%s", text);
  free(text);
  avx2_default("matmul M=128 N=27 K=768", NULL, &text);
  if (strstr(text, "_pad"))
    fail_msg("B copied per call for 128 rows:\n%s", text);
  free(text);
  avx2_default(
      "conv2d_nhwc N=1 H=8 W=8 CI=16 CO=30 KH=3 KW=3 pad=1 const=weight", NULL,
      &text);
  if (!strstr(text, "alloc conv_pad: float32[1, 8, 8, 32]") ||
      !strstr(text, "if_then_else(v3 < 30"))
    fail_msg("constant weights of 8 x 8 rows not padded:\n%s", text);
  free(text);
  /* past four vectors: 45 columns on AVX2 (K = 300) padded to 48; a 1x1
   * conv to 61 channels of 256 inputs padded, its copy out not under the
   * tile of fused pixels (whose region is the whole image) */
  avx2_default("matmul M=500 N=45 K=300", NULL, &text);
  if (!strstr(text, "alloc C_pad: float32[500, 48]"))
    fail_msg("45 columns not padded on AVX2:\n%s", text);
  free(text);
  avx2_default("conv2d_nhwc N=1 H=28 W=28 CI=256 CO=61 KH=1 KW=1", NULL, &text);
  /* (the copy out a parallel nest of its own after the tiles') */
  const char *tile = strstr(text, "range(131) parallel");
  const char *own = tile ? strstr(tile + 1, "range(1568) parallel") : NULL;
  const char *un = own ? strstr(own, "block conv_unpad(") : NULL;
  if (!strstr(text, "alloc conv_pad: float32[1, 28, 28, 64]") || !un)
    fail_msg("the 1x1 conv not padded, or its copy out under the tiles:\n%s",
             text);
  free(text);
  /* 64 inputs padded too, the copy out not at the column stripes (which
   * would then be all of the parallel loop): a nest of its own; 32 not */
  avx2_default("conv2d_nhwc N=1 H=28 W=28 CI=64 CO=61 KH=1 KW=1", NULL, &text);
  if (!strstr(text, "alloc conv_pad: float32[1, 28, 28, 64]") ||
      !strstr(text, "range(1568) parallel"))
    fail_msg("64 inputs not padded, or the copy out at the stripes:\n%s", text);
  free(text);
  avx2_default("conv2d_nhwc N=1 H=28 W=28 CI=32 CO=61 KH=1 KW=1", NULL, &text);
  if (strstr(text, "_pad:"))
    fail_msg("a 32-product output past 4 vectors padded:\n%s", text);
  free(text);
  /* 60 channels on 16 lanes */
  target_default("conv2d_nhwc N=1 H=28 W=28 CI=64 CO=60 KH=3 KW=3 pad=1",
                 "llvm -mcpu=skylake-avx512 -num-cores=2",
                 ts_rt_cpu_has("avx512f") == 1, NULL, &text);
  if (!strstr(text, "alloc conv_pad: float32[1, 28, 28, 64]"))
    fail_msg("60 channels not padded to 64 on AVX-512:\n%s", text);
  free(text);
}

/* A depthwise conv of many channel tiles over an image larger than the
 * caches: the channel tiles outermost, so each tile's rows stay cached as
 * the window slides down (112 x 112 x 336, 5 x 5: 21 tiles; 14 x 14 x
 * 864, whose window of 3 x 16 pixels spans 48 pages); not a small image
 * (7 x 7 x 32 with 7 x 7 taps), nor channel tiles narrower than a cache
 * line (58 x 58 x 72: 8 channels), and not where each pixel's channels span
 * more than 2 KiB and the window more pages than the L1 TLB holds (70 x
 * 70 x 960: 3 x 72 pages): there the column tiles go outside the channel
 * tiles. And the parallel loop stops where the race check's enumeration
 * does: 512 x 512 x 32 (2 channel tiles, columns first) has 512 x 128 x 2
 * = 131072 outer iterations, past which the fused loop was refused and
 * the whole conv ran on one core. Where the columns go first because a
 * pixel spans 2 KiB or more, a 5 x 5 kernel's window of all channels'
 * rows larger than 1 MiB goes in channel chunks of 2 KiB, outermost
 * (default_depthwise_chunk). */
static bool strided_prefetch_of(const char *s) {
  ts_target *t = target_of(s);
  bool r = ts_target_strided_prefetch(t);
  ts_target_free(t);
  return r;
}

static void test_depthwise_order(void **state) {
  (void)state;
  static const struct {
    const char *spec;
    const char *parallel;
    bool run; /* small enough to check against the reference */
  } cases[] = {
      {"depthwise_conv2d_nhwc N=1 H=112 W=112 C=336 KH=3 KW=3 pad=1",
       "for c_0_n_h_fused in range(2352) parallel", false},
      {"depthwise_conv2d_nhwc N=1 H=7 W=7 C=32 KH=7 KW=7 pad=3",
       "for n_h_c_0_fused in range(28) parallel", true},
      {"depthwise_conv2d_nhwc N=1 H=70 W=70 C=960 KH=3 KW=3 pad=1",
       "for n_h_w_0_c_0_fused in range(58800) parallel", false},
      {"depthwise_conv2d_nhwc N=1 H=14 W=14 C=864 KH=3 KW=3 pad=1",
       "for c_0_n_h_w_0_fused in range(2646) parallel", false},
      {"depthwise_conv2d_nhwc N=1 H=512 W=512 C=32 KH=3 KW=3 pad=1",
       "for n_h_w_0_fused in range(65536) parallel", false},
      /* channel tiles of one vector (32 bytes, half a cache line): columns
       * first, so that no line of the image is fetched by two tiles */
      {"depthwise_conv2d_nhwc N=1 H=58 W=58 C=72 KH=3 KW=3 pad=1",
       "for n_h_w_0_c_0_fused in range(4176) parallel", false},
      /* columns first, in chunks of 512 channels outermost: 5 x 5 taps
       * over a window of all channels' rows larger than 1 MiB (5 x 60
       * pixels x 6 KiB; 5 x 56 x 4 KiB, with a ragged last column tile) */
      {"depthwise_conv2d_nhwc N=1 H=56 W=56 C=1536 KH=5 KW=5 pad=2",
       "for c_0_0_n_h_w_0_fused in range(1176) parallel", false},
      {"depthwise_conv2d_nhwc N=1 H=5 W=52 C=1024 KH=5 KW=5 pad=2",
       "for c_0_0_n_h_w_0_c_0_1_fused in range(4480) parallel", true},
      /* no chunks for a smaller window (5 x 38 x 3.75 KiB; in row pairs,
       * test_depthwise_row_pairs) or a 3 x 3 kernel: whole pixels in one
       * run */
      {"depthwise_conv2d_nhwc N=1 H=34 W=34 C=960 KH=5 KW=5 pad=2",
       "for n_h_0_fused in range(17) parallel", false},
      {"depthwise_conv2d_nhwc N=1 H=112 W=112 C=3072 KH=3 KW=3 pad=1",
       "for n_h_w_0_fused in range(3136) parallel", false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *text;
    target_default(cases[i].spec, AVX2_TARGET,
                   cases[i].run && ts_rt_cpu_has("avx2") == 1, NULL, &text);
    if (!strstr(text, cases[i].parallel))
      fail_msg("%s: expected '%s' in\n%s", cases[i].spec, cases[i].parallel,
               text);
    free(text);
  }
  /* On Intel's cores the columns go first wherever the channel tiles
   * would have: there a channel tile's reads, a line or two of every
   * pixel, ran slower than whole pixels at a time. AMD's Zen (and a CPU
   * the target does not name) keep the order above. */
  assert_true(strided_prefetch_of(AVX2_TARGET));
  assert_true(strided_prefetch_of("llvm -mcpu=znver3 -num-cores=2"));
  assert_false(strided_prefetch_of("llvm -mcpu=sapphirerapids -num-cores=2"));
  static const struct {
    const char *spec, *target, *parallel;
  } intel[] = {
      {"depthwise_conv2d_nhwc N=1 H=112 W=112 C=336 KH=3 KW=3 pad=1",
       "llvm -mcpu=haswell -num-cores=2",
       "for n_h_w_0_fused in range(3136) parallel"},
      {"depthwise_conv2d_nhwc N=1 H=76 W=76 C=288 KH=3 KW=3 pad=1",
       "llvm -mcpu=sapphirerapids -num-cores=2",
       "for n_h_w_0_c_0_fused in range(6840) parallel"},
      {"depthwise_conv2d_nhwc N=1 H=76 W=76 C=288 KH=3 KW=3 pad=1",
       "llvm -mcpu=znver4 -num-cores=2",
       "for c_0_n_h_fused in range(684) parallel"},
      /* nor channel chunks on Intel's */
      {"depthwise_conv2d_nhwc N=1 H=56 W=56 C=1536 KH=5 KW=5 pad=2",
       "llvm -mcpu=haswell -num-cores=2",
       "for n_h_w_0_fused in range(392) parallel"},
  };
  for (size_t i = 0; i < sizeof intel / sizeof intel[0]; i++) {
    char *text;
    target_default(intel[i].spec, intel[i].target, false, NULL, &text);
    if (!strstr(text, intel[i].parallel))
      fail_msg("%s on %s: expected '%s' in\n%s", intel[i].spec, intel[i].target,
               intel[i].parallel, text);
    free(text);
  }
}

/* A depthwise conv's tile on 32 registers: 2 vectors wide where 4 would
 * hold more than 16 accumulators (18 x 18 x 192 with 5 x 5 taps: 6 rows x
 * 4 -> 6 x 2), and at 16 for a kernel of more than 9 taps (56 x 56 x 192
 * 5 x 5: 4 rows x 4 -> 8 x 2); a 3 x 3 kernel stays 4 wide at 16 (56 x 56
 * x 192: 4 rows x 4). A 5 x 5 kernel's padding read inline, its inner tap
 * loop unrolled and its outer one kept a loop; a 3 x 3 kernel's both
 * unrolled. On 16 registers a 5 x 5 tile one vector wide (an odd number
 * of image rows, not in row pairs; 8 rows: the
 * accumulators and a kernel row's 5 weight vectors fit). A tile of no
 * whole vectors (40 channels on 16 lanes: 3 vector instructions a row)
 * fewer rows instead (8 -> 5), and so does a 3 x 3 kernel's tile of 3
 * vectors (48 channels: 8 rows -> 5, at most half the registers as
 * accumulators). A 3 x 3 tile of 4 vectors x 2 columns whose columns go
 * first 2 vectors x 4 columns (default_depthwise_narrow). Those marked
 * run are checked against the
 * interpreter where the host has the target's vectors. */
#define SKX_TARGET "llvm -mcpu=skylake-avx512 -num-cores=2"
static void test_depthwise_narrow_tile(void **state) {
  (void)state;
  static const struct {
    const char *spec, *target;
    bool run, copied;
    const char *must[4];
  } cases[] = {
      {"depthwise_conv2d_nhwc N=1 H=18 W=18 C=192 KH=5 KW=5 pad=2",
       SKX_TARGET,
       true,
       false,
       {"for w_1 in range(6) unrolled", "for c_1 in range(32) vectorized",
        "for rh in range(5) {", "for rw in range(5) unrolled"}},
      {"depthwise_conv2d_nhwc N=1 H=56 W=56 C=192 KH=5 KW=5 pad=2",
       SKX_TARGET,
       false,
       false,
       {"for w_1 in range(8) unrolled", "for c_1 in range(32) vectorized",
        "for rh in range(5) {", "for rw in range(5) unrolled"}},
      {"depthwise_conv2d_nhwc N=1 H=56 W=56 C=192 KH=3 KW=3 pad=1",
       SKX_TARGET,
       false,
       false,
       {"for w_1 in range(4) unrolled", "for c_1 in range(64) vectorized",
        "for rh in range(3) unrolled", "for rw in range(3) unrolled"}},
      {"depthwise_conv2d_nhwc N=1 H=111 W=112 C=336 KH=5 KW=5 pad=2",
       AVX2_TARGET,
       false,
       false,
       {"for w_1 in range(8) unrolled", "for c_1 in range(8) vectorized",
        "for rh in range(5) {", "for rw in range(5) unrolled"}},
      /* the same as a conv of one channel per group (a model's graph),
       * whose reduction ends in a loop of 1 after the kernel's width */
      {"conv2d_nhwc N=1 H=15 W=14 CI=480 CO=480 KH=5 KW=5 pad=2 groups=480",
       AVX2_TARGET,
       false,
       false,
       {"for w_1 in range(7) unrolled", "for co_1 in range(8) vectorized",
        "for rh in range(5) {", "for rw in range(5) unrolled"}},
      {"depthwise_conv2d_nhwc N=1 H=15 W=16 C=64 KH=5 KW=5 pad=2",
       AVX2_TARGET,
       true,
       false,
       {"for w_1 in range(8) unrolled", "for c_1 in range(8) vectorized",
        "for rh in range(5) {", "for rw in range(5) unrolled"}},
      {"depthwise_conv2d_nhwc N=1 H=38 W=38 C=48 KH=3 KW=3 pad=1",
       SKX_TARGET,
       true,
       false,
       {"for w_1 in range(5) unrolled", "for c in range(48) vectorized",
        "for rh in range(3) unrolled", "for rw in range(3) unrolled"}},
      {"depthwise_conv2d_nhwc N=1 H=23 W=23 C=40 KH=5 KW=5 pad=2",
       SKX_TARGET,
       true,
       false,
       {"for w_1 in range(5) unrolled", "for c in range(40) vectorized",
        "for rh in range(5) {", "for rw in range(5) unrolled"}},
      /* 7 x 7 on 16 registers: 2 vectors whose accumulators take more
       * than half the registers (14 = 5 + 5 + 4 columns) one vector wide
       * instead (7 columns); 4 columns x 2 vectors stay */
      {"depthwise_conv2d_nhwc N=1 H=14 W=14 C=384 KH=7 KW=7 pad=3",
       AVX2_TARGET,
       false,
       false,
       {"for w_1 in range(7) unrolled", "for c_1 in range(8) vectorized",
        "for rh in range(7) {", "for rw in range(7) unrolled"}},
      {"depthwise_conv2d_nhwc N=1 H=12 W=12 C=32 KH=7 KW=7 pad=3",
       AVX2_TARGET,
       true,
       false,
       {"for w_1 in range(6) unrolled", "for c_1 in range(8) vectorized",
        "for rh in range(7) {", "for rw in range(7) unrolled"}},
      {"depthwise_conv2d_nhwc N=1 H=28 W=28 C=192 KH=7 KW=7 pad=3",
       AVX2_TARGET,
       false,
       false,
       {"for w_1 in range(4) unrolled", "for c_1 in range(16) vectorized",
        "for rh in range(7) {", "for rw in range(7) unrolled"}},
      /* 3 x 3, columns first: 4 vectors x 2 columns -> 2 x 4 (34 = 8 x
       * 4 + 2), as on 16 registers the channels-first 14 x 14 x 512 is
       * not */
      {"depthwise_conv2d_nhwc N=1 H=34 W=34 C=672 KH=3 KW=3 pad=1",
       AVX2_TARGET,
       true,
       false,
       {"for w_1 in range(4) unrolled", "for c_1 in range(16) vectorized",
        "for rh in range(3) unrolled", "for rw in range(3) unrolled"}},
      {"depthwise_conv2d_nhwc N=1 H=14 W=14 C=512 KH=3 KW=3 pad=1",
       AVX2_TARGET,
       false,
       false,
       {"for w_1 in range(2) unrolled", "for c_1 in range(32) vectorized",
        "for rh in range(3) unrolled", "for rw in range(3) unrolled"}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *text;
    const char *isa = strstr(cases[i].target, "avx512") ? "avx512f" : "avx2";
    target_default(cases[i].spec, cases[i].target,
                   cases[i].run && ts_rt_cpu_has(isa) == 1, NULL, &text);
    for (int k = 0; k < 4; k++)
      if (!strstr(text, cases[i].must[k]))
        fail_msg("%s: no '%s' in\n%s", cases[i].spec, cases[i].must[k], text);
    if ((strstr(text, "block pad(") != NULL) != cases[i].copied)
      fail_msg("%s: padded copy %s expected:\n%s", cases[i].spec,
               cases[i].copied ? "" : "not", text);
    free(text);
  }
  /* a kernel row at a time where the accumulators and a kernel row's
   * weights fit the registers together, or for a 7 x 7 kernel; never for
   * a 3 x 3 one */
  assert_true(default_depthwise_row_loop(25, 5, 6, 2, 32));
  assert_false(default_depthwise_row_loop(25, 5, 6, 2, 16));
  assert_true(default_depthwise_row_loop(25, 5, 7, 1, 16));
  assert_true(default_depthwise_row_loop(49, 7, 4, 2, 16));
  assert_false(default_depthwise_row_loop(9, 3, 4, 4, 32));
}

/* A depthwise conv, channel tiles first, whose column tiles do not
 * divide its width (17 = 9 x 2 - 1): the column tile loop stays serial
 * inside the parallel loop, so that the code generator runs every tile
 * but the last unguarded, rather than fused into it (a guard on every
 * element of the unrolled tile). */
static void test_depthwise_ragged_columns(void **state) {
  (void)state;
  char *trace, *text;
  avx2_default("depthwise_conv2d_nhwc N=1 H=17 W=17 C=576 KH=3 KW=3 pad=1",
               &trace, &text);
  if (!strstr(text, "for c_0_n_h_fused in range(306) parallel") ||
      !strstr(text, "for w_0 in range(9) {"))
    fail_msg("the column tiles not serial inside the parallel loop:\n%s", text);
  free(trace);
  free(text);
}

/* A 5 x 5 depthwise conv on 16 registers in row pairs
 * (default_depthwise_pairs): a tile of 2 image rows x 4 columns x 1
 * vector, every tap unrolled, accumulated in a local buffer; the pairs of
 * rows outermost, then the channel tiles, then the column tiles. Not a 3 x
 * 3 kernel, an odd number of rows or 32 registers. The small ones are
 * checked against the interpreter where the host runs AVX2 (10 columns
 * in tiles of 4: a ragged last one; a grouped conv of one channel per
 * group, as in a model's graph). */
static void test_depthwise_row_pairs(void **state) {
  (void)state;
  static const struct {
    const char *spec, *target;
    bool run, pairs;
  } cases[] = {
      {"depthwise_conv2d_nhwc N=1 H=112 W=112 C=384 KH=5 KW=5 pad=2",
       AVX2_TARGET, false, true},
      /* (a window of all channels past 1 MiB: in channel chunks instead,
       * test_depthwise_order) */
      {"depthwise_conv2d_nhwc N=1 H=56 W=56 C=1536 KH=5 KW=5 pad=2",
       AVX2_TARGET, false, false},
      {"depthwise_conv2d_nhwc N=1 H=12 W=10 C=16 KH=5 KW=5 pad=2", AVX2_TARGET,
       true, true},
      {"conv2d_nhwc N=1 H=8 W=8 CI=24 CO=24 KH=5 KW=5 pad=2 groups=24",
       AVX2_TARGET, true, true},
      {"depthwise_conv2d_nhwc N=1 H=112 W=112 C=96 KH=3 KW=3 pad=1",
       AVX2_TARGET, false, false},
      {"depthwise_conv2d_nhwc N=1 H=5 W=52 C=1024 KH=5 KW=5 pad=2", AVX2_TARGET,
       false, false},
      {"depthwise_conv2d_nhwc N=1 H=56 W=56 C=192 KH=5 KW=5 pad=2", SKX_TARGET,
       false, false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *text;
    target_default(cases[i].spec, cases[i].target,
                   cases[i].run && ts_rt_cpu_has("avx2") == 1, NULL, &text);
    const char *must[] = {"for h_1 in range(2) unrolled",
                          "for rh in range(5) unrolled",
                          "for w_1 in range(4) unrolled", "scope \"local\""};
    for (int k = 0; k < (cases[i].pairs ? 4 : 1); k++)
      if ((strstr(text, must[k]) != NULL) != cases[i].pairs)
        fail_msg("%s on %s: '%s' %sexpected in\n%s", cases[i].spec,
                 cases[i].target, must[k], cases[i].pairs ? "" : "not ", text);
    free(text);
  }
  /* the order: pairs of rows, channel tiles, then the column tiles */
  char *text;
  target_default(cases[0].spec, AVX2_TARGET, false, NULL, &text);
  if (!strstr(text, "for n_h_0_fused in range(56) parallel") ||
      !strstr(text, "for c_0 in range(48) {") ||
      !strstr(text, "for w_0 in range(28) {"))
    fail_msg("not in pairs of rows, channel tiles, column tiles:\n%s", text);
  free(text);
}

/* A grouped conv's vector tile stays within one group, so its input
 * channels are one broadcast per tile rather than a gather (a tile across
 * two groups reads floordiv(co, G) per lane): 48 channels a group take a
 * tile of two vectors (16 of AVX2's 8 lanes divide 48), 4 a group a tile
 * of 4 lanes. Lowered, no index divides a ramp; checked against the
 * interpreter where the host runs AVX2. */
static void test_grouped_tiles(void **state) {
  (void)state;
  static const char *const specs[] = {
      "conv2d_nhwc N=1 H=12 W=12 CI=96 CO=96 KH=3 KW=3 pad=1 groups=2",
      "conv2d_nhwc N=1 H=10 W=10 CI=64 CO=64 KH=3 KW=3 pad=1 groups=16",
      "conv2d_nhwc N=1 H=1 W=20 CI=96 CO=96 KH=1 KW=9 pad=4 groups=2",
  };
  ts_target *t;
  ts_error err;
  if (ts_target_parse(AVX2_TARGET, &t, &err)) fail_msg("%s", err.msg);
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
    ts_workload *w = workload(specs[i]);
    ts_sched *s = NULL;
    if (ts_default_schedule(w->func, t, &s, &err))
      fail_msg("%s: %s", specs[i], err.msg);
    ts_lower_options lo = ts_lower_defaults();
    ts_func *l = ts_lower(ts_sched_func(s), &lo, &err);
    if (!l) fail_msg("%s: lower: %s", specs[i], err.msg);
    char *text = ts_func_print(l);
    if (strstr(text, "floordiv(ramp(") || !strstr(text, "ramp("))
      fail_msg("%s: a gather of the input channels, or no vectors:\n%s",
               specs[i], text);
    free(text);
    ts_func_free(l);
    ts_sched_destroy(s);
    if (ts_rt_cpu_has("avx2") == 1) free(check_default(w->func, t, specs[i]));
    ts_workload_free(w);
  }
  ts_target_free(t);
}

/* A stem (fewer input channels than a vector) reads its padding inlined,
 * through the guard, where its kernel has 9 taps or fewer (a halo of one
 * pixel) and the copy would move one element per 144 multiply-adds or
 * more (stride 2, 24 output channels: 1/54); a 7 x 7 one, or a stride-1
 * one of 64 output channels (1/576), keeps the padded copy before the
 * conv. */
static void test_stem_pads(void **state) {
  (void)state;
  static const struct {
    const char *spec;
    bool copied;
  } cases[] = {
      {"conv2d_nhwc N=1 H=34 W=34 CI=3 CO=24 KH=3 KW=3 stride=2 pad=1", false},
      {"conv2d_nhwc N=1 H=30 W=30 CI=3 CO=16 KH=7 KW=7 stride=2 pad=3", true},
      {"conv2d_nhwc N=1 H=16 W=16 CI=4 CO=64 KH=3 KW=3 pad=1", true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *trace, *text;
    avx2_default(cases[i].spec, &trace, &text);
    if ((strstr(text, "alloc pad") != NULL) != cases[i].copied)
      fail_msg("%s: the padding %s in\n%s", cases[i].spec,
               cases[i].copied ? "not copied" : "copied", text);
    free(trace);
    free(text);
  }
}

/* A tensorized product whose column tiles 2 and 4 do not divide (17 of
 * 8 columns with AVX2's multiply-add pairs, 33 of 16 with VNNI): the
 * register tile keeps its 4 column tiles and the columns left (one tile)
 * are partitioned off with the default tiling, rather than a tile of one
 * column vector (8 rows x 1: half the speed, int8 533 x 1000 x 512 95
 * against 195 GOP/s). Where 2 column tiles leave fewer columns to that
 * slower tiling than 4 do (1000 columns on VNNI: 8 left against 40), 2.
 * Checked against the interpreter where the host runs AVX2. */
static void test_tensorized_odd_panels(void **state) {
  (void)state;
  static const struct {
    const char *spec, *target, *intrin, *tile;
  } cases[] = {
      {"matmul M=20 N=136 K=32 dtype=int8", AVX2_TARGET, "avx2_madd_s8_8x2",
       "for j_1 in range(4) unrolled"},
      {"matmul M=20 N=528 K=32 dtype=int8",
       "llvm -mcpu=cooperlake -num-cores=2", "avx512_vnni_16x16",
       "for j_1 in range(4) unrolled"},
      {"matmul M=20 N=1000 K=32 dtype=int8",
       "llvm -mcpu=cooperlake -num-cores=2", "avx512_vnni_16x16",
       "for j_1 in range(2) unrolled"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *text;
    bool avx2 = !strcmp(cases[i].target, AVX2_TARGET);
    target_default(cases[i].spec, cases[i].target,
                   avx2 && ts_rt_cpu_has("avx2") == 1, NULL, &text);
    if (!strstr(text, cases[i].intrin) || !strstr(text, cases[i].tile) ||
        !strstr(text, "j_tail"))
      fail_msg("%s: expected %s with '%s' and the columns left partitioned "
               "off in\n%s",
               cases[i].spec, cases[i].intrin, cases[i].tile, text);
    free(text);
  }
}

/* A conv's weights that few row tiles read per panel: read in place, not
 * copied per panel; copied where a row of them is a multiple of 4 KiB
 * (1024 floats). Small weights that few row tiles read in all: read in
 * place rather than packed once. Checked against the interpreter where the
 * host has the target's ISA. */
static void test_weights_in_place(void **state) {
  (void)state;
  const char *avx512 = "llvm -mcpu=skylake-avx512 -num-cores=2";
  char *text;
  target_default("conv2d_nhwc N=1 H=7 W=7 CI=32 CO=320 KH=3 KW=3 pad=1", avx512,
                 ts_rt_cpu_has("avx512f") == 1, NULL, &text);
  if (strstr(text, "weight_global"))
    fail_msg("7x7 32->320: weights copied per panel:\n%s", text);
  free(text);
  target_default("conv2d_nhwc N=1 H=14 W=14 CI=128 CO=1024 KH=1 KW=1", avx512,
                 false, NULL, &text);
  if (!strstr(text, "weight_global"))
    fail_msg("14x14 128->1024: weights read in place:\n%s", text);
  free(text);
  /* 98 KiB of weights, 60 row tiles of the fused image and no outer
   * loop: read in place, not packed once ahead of the kernel */
  avx2_default("conv2d_nhwc N=1 H=19 W=19 CI=384 CO=64 KH=1 KW=1", NULL, &text);
  if (strstr(text, "weight_global"))
    fail_msg("19x19 384->64: weights packed:\n%s", text);
  free(text);
  /* the stem's panels, read by 56 row tiles in each of 113 image rows,
   * and the same weights declared constant: packed once */
  const char *packed[] = {
      "conv2d_nhwc N=1 H=226 W=226 CI=3 CO=64 KH=7 KW=7 stride=2 pad=3",
      "conv2d_nhwc N=1 H=19 W=19 CI=384 CO=64 KH=1 KW=1 const=weight"};
  for (int i = 0; i < 2; i++) {
    avx2_default(packed[i], NULL, &text);
    if (!strstr(text, "weight_global"))
      fail_msg("%s: weights read in place:\n%s", packed[i], text);
    free(text);
  }
}

/* Weights larger than the L2 over a width of too few vector tiles for a
 * panel per core (112 channels: 64 + 48): the reduction in blocks outside
 * the parallel loop of the output tiles, the init a nest of its own
 * before them; checked against the interpreter where the host has
 * AVX-512. Not where the output is large (it would go through memory at
 * every block), nor where one vector tile is the whole width. */
static void test_outer_reduction_blocks(void **state) {
  (void)state;
  const char *avx512 = "llvm -mcpu=skylake-avx512 -num-cores=2";
  bool run = ts_rt_cpu_has("avx512f") == 1;
  static const struct {
    const char *spec;
    const char *blocks, *parallel; /* the blocks' loop, the parallel one */
  } cases[] = {
      /* 3 x 3 x 288 x 112 floats, 1.1 MiB: 3 blocks of 96 channels */
      {"conv2d_nhwc N=1 H=5 W=5 CI=288 CO=112 KH=3 KW=3 pad=1",
       "for rc_0 in range(3)", "for n_h_co_0_fused in range(10) parallel"},
      {"matmul M=12 N=112 K=2400", "for k_0 in range(3)",
       "for j_0_i_0_fused in range(4) parallel"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *text;
    target_default(cases[i].spec, avx512, run, NULL, &text);
    const char *bl = strstr(text, cases[i].blocks);
    const char *par = strstr(text, cases[i].parallel);
    if (!bl || !par || par < bl)
      fail_msg("%s: expected '%s' around '%s' in\n%s", cases[i].spec,
               cases[i].blocks, cases[i].parallel, text);
    free(text);
  }
  /* not over a 351 KiB output, nor where one tile is the whole width
   * (its weights streamed in order) */
  static const char *const kept[] = {
      "conv2d_nhwc N=1 H=28 W=28 CI=512 CO=112 KH=3 KW=3 pad=1",
      "conv2d_nhwc N=1 H=6 W=6 CI=1024 CO=64 KH=3 KW=3 pad=1",
  };
  for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++) {
    char *text;
    target_default(kept[i], avx512, false, NULL, &text);
    const char *rc = strstr(text, "for rc"), *par = strstr(text, "parallel");
    if (!rc || !par || rc < par)
      fail_msg("%s: reduction blocks outside the parallel loop:\n%s", kept[i],
               text);
    free(text);
  }
}

/* A deep conv with few output channels on a small image (weights over
 * 1 MiB in fewer 3-vector panels than twice the cores): each image row's
 * columns in tiles of up to 9 x 3 vectors, not fused with the image rows
 * into runs of 8 pixels; the image rows, column tiles and channel panels
 * in the parallel loop (default_deep_rows). Its weights neither constant
 * nor blocked are copied into panels only up to 2 MiB: 11 x 11 768 -> 96
 * (2.6 MiB) keeps the fused pixels unless they are constant. */
static void test_deep_rows(void **state) {
  (void)state;
  const char *avx512 = "llvm -mcpu=skylake-avx512 -num-cores=2";
  bool run = ts_rt_cpu_has("avx512f") == 1;
  /* (two image rows: the interpreter checks the first one's kernel) */
  static const struct {
    const char *spec, *tile, *parallel;
  } cases[] = {
      {"conv2d_nhwc N=1 H=2 W=17 CI=512 CO=96 KH=3 KW=3 pad=1",
       "for w_1 in range(9) unrolled", "for co_0_n_h_w_0_fused in range(8)"},
      {"conv2d_nhwc N=1 H=2 W=9 CI=256 CO=144 KH=3 KW=3 pad=1",
       "for w in range(9) unrolled", "parallel"},
      {"conv2d_nhwc N=1 H=2 W=11 CI=768 CO=96 KH=3 KW=3 pad=1 const=weight",
       "for w_1 in range(6) unrolled", "parallel"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *text;
    target_default(cases[i].spec, avx512, run && i == 0, NULL, &text);
    if (!strstr(text, cases[i].tile) || !strstr(text, cases[i].parallel) ||
        !strstr(text, "in range(48) vectorized") || strstr(text, "h_w_fused"))
      fail_msg("%s: expected '%s' and '%s', tiles of 48 channels, no fused "
               "pixels, in\n%s",
               cases[i].spec, cases[i].tile, cases[i].parallel, text);
    free(text);
  }
  static const char *const kept[] = {
      "conv2d_nhwc N=1 H=2 W=11 CI=768 CO=96 KH=3 KW=3 pad=1",
  };
  for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++) {
    char *text;
    target_default(kept[i], avx512, false, NULL, &text);
    if (!strstr(text, "h_w_fused"))
      fail_msg("%s: expected fused pixels in\n%s", kept[i], text);
    free(text);
  }
  /* a model's form: the weights blocked by 48 output channels (the layout
   * pass's [CO/48, KH, KW, CI, 48]), the output too; the panels' loop goes
   * first in the parallel loop, so each core reads one panel */
  static const char blocked[] =
      "func deep(x: float32[1, 3, 9, 512], w: float32[2, 3, 3, 512, 48], "
      "y: float32[1, 3, 9, 2, 48]) {\n"
      "  block root() {\n"
      "    alloc p: float32[1, 5, 11, 512]\n"
      "    for i in range(1) { for j in range(5) { for k in range(11) {\n"
      "      for l in range(512) {\n"
      "        block p(vi: spatial(1) = i, vj: spatial(5) = j, "
      "vk: spatial(11) = k, vl: spatial(512) = l) {\n"
      "          p[vi, vj, vk, vl] = if_then_else(vj >= 1 && vj < 4 && "
      "(vk >= 1 && vk < 10), x[vi, vj - 1, vk - 1, vl], float32(0))\n"
      "        } } } } }\n"
      "    for i in range(1) { for j in range(3) { for k in range(9) {\n"
      "      for l in range(2) { for c in range(48) {\n"
      "        for rh in range(3) { for rw in range(3) {\n"
      "          for rc in range(512) {\n"
      "            block y(vi: spatial(1) = i, vj: spatial(3) = j, "
      "vk: spatial(9) = k, vl: spatial(2) = l, vc: spatial(48) = c, "
      "vrh: reduce(3) = rh, vrw: reduce(3) = rw, vrc: reduce(512) = rc) {\n"
      "              init {\n"
      "                y[vi, vj, vk, vl, vc] = float32(0)\n"
      "              }\n"
      "              y[vi, vj, vk, vl, vc] = y[vi, vj, vk, vl, vc] + "
      "p[vi, vj + vrh, vk + vrw, vrc] * w[vl, vrh, vrw, vrc, vc]\n"
      "            } } } } } } } } }\n"
      "  }\n"
      "}\n";
  ts_func *f = check_parse(blocked, "deep");
  assert_non_null(f);
  ts_target *t = target_of(avx512);
  ts_sched *s = NULL;
  ts_error err;
  if (ts_default_schedule(f, t, &s, &err)) fail_msg("%s", err.msg);
  char *text = ts_func_print(ts_sched_func(s));
  if (!strstr(text, "for l_i_j_fused in range(6) parallel") ||
      !strstr(text, "for k in range(9) unrolled"))
    fail_msg("blocked weights: expected the panels first and 9 columns in\n%s",
             text);
  free(text);
  if (run) free(check_default(f, t, "deep blocked"));
  ts_sched_destroy(s);
  ts_target_free(t);
  ts_func_free(f);
}

/* A conv whose column tile spans all its channels compares the fused
 * pixels against its rows split ceil-wise (default_pixels_better): 17
 * columns of 112 channels on AVX-512 get 3 rows x 7 vectors per tile (21
 * accumulators), not 8 fused pixels x 1 vector. Where the column tile is
 * one panel of wider channels (512), the pixels stay fused. */
static void test_ceil_rows_unfused(void **state) {
  (void)state;
  assert_false(default_pixels_better(17, 17, 112, 512, 16, 32));
  assert_true(default_pixels_better(17, 17, 512, 128, 16, 32));
  const char *avx512 = "llvm -mcpu=skylake-avx512 -num-cores=2";
  const char *spec = "conv2d_nhwc N=1 H=17 W=17 CI=16 CO=112 KH=3 KW=3 pad=1";
  char *text;
  target_default(spec, avx512, ts_rt_cpu_has("avx512f") == 1, NULL, &text);
  if (!strstr(text, "for w_1 in range(3) unrolled") ||
      !strstr(text, "for co_0 in range(7) unrolled") ||
      strstr(text, "h_w_fused"))
    fail_msg("%s: expected 3 columns x 7 vectors, no fused pixels, in\n%s",
             spec, text);
  free(text);
}

static void test_five_vector_tiles(void **state) {
  (void)state;
  const char *avx512 = "llvm -mcpu=skylake-avx512 -num-cores=2";
  bool run = ts_rt_cpu_has("avx512f") == 1;
  static const struct {
    const char *spec;
    const char *tile;
  } cases[] = {
      {"conv2d_nhwc N=1 H=12 W=12 CI=32 CO=80 KH=3 KW=3 pad=1",
       "in range(5) unrolled"},
      {"matmul M=60 N=112 K=64", "in range(7) unrolled"},
      /* 7 columns: 7 vectors over rows of 3 + 3 + 1, not 1 x 7 */
      {"conv2d_nhwc N=1 H=7 W=7 CI=32 CO=112 KH=3 KW=3 pad=1",
       "co_0 in range(7) unrolled"},
      {"conv2d_nhwc N=1 H=7 W=7 CI=64 CO=112 KH=1 KW=1",
       "co_0 in range(7) unrolled"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *text;
    target_default(cases[i].spec, avx512, run, NULL, &text);
    if (!strstr(text, cases[i].tile) ||
        !strstr(text, "in range(16) vectorized"))
      fail_msg("%s: no tile of whole vectors (%s):\n%s", cases[i].spec,
               cases[i].tile, text);
    free(text);
  }
  /* 7 vectors of weights larger than a reduction block (2400 x 112
   * floats, 1.03 MiB): tiles of 4 whole vectors x 6 rows, the last tile
   * 3 vectors, each vector unrolled and decided */
  char *text;
  target_default("matmul M=12 N=112 K=2400", avx512, run, NULL, &text);
  if (!strstr(text, "j_1_0 in range(4) unrolled") ||
      !strstr(text, "in range(6) unrolled") ||
      !strstr(text, "in range(16) vectorized"))
    fail_msg("matmul M=12 N=112 K=2400: no tile of 4 x 16 x 6 rows:\n%s", text);
  free(text);
  int64_t rows;
  assert_int_equal(ts_default_vector_tile(144, 80, 16, 32, &rows), 80);
  assert_int_equal(ts_default_vector_tile(144, 80, 8, 16, &rows), 16);
  assert_int_equal(ts_default_vector_tile(144, 80, 16, 16, &rows), 16);
  /* a product's rows split evenly: 49 rows on a budget of 3 for 7
   * vectors (17 tiles, 51 rows computed) beat 1 vector x 7 rows; 7 rows
   * keep the one-vector tile that holds them all and reads B once */
  assert_int_equal(ts_default_vector_tile(49, 112, 16, 32, &rows), 112);
  assert_int_equal(ts_default_vector_tile(7, 112, 16, 32, &rows), 16);
  assert_int_equal(ts_default_vector_tile(49, 112, 8, 16, &rows), 16);
}

/* A vector tile's panel of weights larger than the L2 budget (3 x 3 x
 * 2048 x 16 floats, 1.1 MiB): the channel reduction split in blocks of
 * 1024, the blocks' loop just inside the vector tiles, the panel packed
 * per block there, the init before the blocks and the rows inside (run
 * against the interpreter on AVX2 hosts), also where the weights come
 * in panels already, and a product's long K; a panel of half the size
 * (1024 channels) stays whole. */
static void test_reduction_blocks(void **state) {
  (void)state;
  char *text;
  avx2_default("conv2d_nhwc N=1 H=3 W=12 CI=2048 CO=64 KH=3 KW=3 pad=1", NULL,
               &text);
  const char *blocks = strstr(text, "for rc_0 in range(2)");
  const char *init = strstr(text, "block conv_init");
  const char *pack = blocks ? strstr(blocks, "block weight_global") : NULL;
  const char *rows = pack ? strstr(pack, "for h in range(3)") : NULL;
  if (!blocks || !init || init > blocks || !pack || !rows ||
      !strstr(rows, "vrc: reduce(2048) = rc_0 * 1024 +"))
    fail_msg("no reduction blocks of 1024 around the rows:\n%s", text);
  free(text);
  target_default("conv2d_nhwc N=1 H=3 W=12 CI=1024 CO=64 KH=3 KW=3 pad=1",
                 AVX2_TARGET, false, NULL, &text);
  if (strstr(text, "rc_0 in range(2)") || !strstr(text, "rc_0 in range(256)"))
    fail_msg("a 576 KiB panel was blocked:\n%s", text);
  free(text);
  /* a product's K blocks: between the column panels and the row tiles,
   * B packed per block (and A in row micro-panels, its rows 68 KiB
   * apart) */
  avx2_default("matmul M=24 N=64 K=17408", NULL, &text);
  const char *cols = strstr(text, "for j_0 in range(4) parallel");
  blocks = cols ? strstr(cols, "for k_0 in range(2)") : NULL;
  pack = blocks ? strstr(blocks, "block B_global") : NULL;
  rows = pack ? strstr(pack, "for i_0 in range(4)") : NULL;
  if (!rows || !strstr(text, "block A_global"))
    fail_msg("no K blocks between the panels and the rows:\n%s", text);
  free(text);
  /* a transposed B (dense: W [N, K]) transposed per block */
  avx2_default("dense M=12 N=64 K=17408", NULL, &text);
  cols = strstr(text, "for j_0 in range(4) parallel");
  blocks = cols ? strstr(cols, "for k_0 in range(2)") : NULL;
  pack = blocks ? strstr(blocks, "block W_global") : NULL;
  if (!pack || !strstr(pack, "for i_0 in range(2)"))
    fail_msg("no K blocks in the dense layer:\n%s", text);
  free(text);
  /* and a batch of them, the batch in the parallel loop */
  target_default("batch_matmul B=2 M=24 N=32 K=17408", AVX2_TARGET, false, NULL,
                 &text);
  cols = strstr(text, "for b_j_0_fused in range(4) parallel");
  blocks = cols ? strstr(cols, "for k_0 in range(2)") : NULL;
  if (!blocks || !strstr(blocks, "block B_global"))
    fail_msg("no K blocks in the batched product:\n%s", text);
  free(text);
  /* the same with weights blocked by output channels at compile time (a
   * compiled model's conv): the panels' loop first, then the blocks */
  static const char blocked[] =
      "func conv(p0: float32[1, 4, 8, 2048], p1: float32[4, 3, 3, 2048, 16], "
      "c: float32[1, 2, 6, 4, 16]) {\n"
      "  for i in range(1) { for j in range(2) { for k in range(6) {\n"
      "  for l in range(4) { for m in range(16) {\n"
      "  for rh in range(3) { for rw in range(3) { for rc in range(2048) {\n"
      "    block c(vi: spatial(1) = i, vj: spatial(2) = j, vk: spatial(6) = "
      "k, vl: spatial(4) = l, vm: spatial(16) = m, vrh: reduce(3) = rh, vrw: "
      "reduce(3) = rw, vrc: reduce(2048) = rc) {\n"
      "      init { c[vi, vj, vk, vl, vm] = float32(0) }\n"
      "      c[vi, vj, vk, vl, vm] = c[vi, vj, vk, vl, vm] + p0[vi, vj + vrh, "
      "vk + vrw, vrc] * p1[vl, vrh, vrw, vrc, vm]\n"
      "    }\n"
      "  } } } } } } } }\n"
      "}\n";
  ts_func *f;
  ts_error err;
  if (ts_func_parse(blocked, strlen(blocked), "blocked.tir", &f, &err))
    fail_msg("parse: %s", err.msg);
  ts_target *t;
  if (ts_target_parse(AVX2_TARGET, &t, &err)) fail_msg("%s", err.msg);
  ts_sched *s;
  if (ts_default_schedule(f, t, &s, &err)) fail_msg("%s", err.msg);
  text = ts_func_print(ts_sched_func(s));
  const char *panels = strstr(text, "for l in range(4) parallel");
  blocks = panels ? strstr(panels, "for rc_0 in range(2)") : NULL;
  if (!blocks || !strstr(blocks, "for j in range(2)"))
    fail_msg("blocked weights: no reduction blocks inside the panels:\n%s",
             text);
  free(text);
  ts_sched_destroy(s);
  if (ts_rt_cpu_has("avx2") == 1) free(check_default(f, t, "blocked weights"));
  ts_target_free(t);
  ts_func_free(f);
  int64_t chunk = 0;
  const int64_t ext[] = {1, 24, 4, 64, 3, 3, 2048};
  const int bind[] = {BIND_SPATIAL, BIND_SPATIAL, BIND_SPATIAL, BIND_SPATIAL,
                      BIND_REDUCE,  BIND_REDUCE,  BIND_REDUCE};
  int64_t panel = 3 * 3 * 2048 * 64 * 4;
  assert_int_equal(
      default_reduction_block(ext, bind, 7, panel, 1 << 20, 4, &chunk), 6);
  assert_int_equal(chunk, 256);
  assert_int_equal(
      default_reduction_block(ext, bind, 7, panel, panel, 4, &chunk), -1);
  const int64_t prime[] = {24, 2039};
  const int pbind[] = {BIND_SPATIAL, BIND_REDUCE};
  assert_int_equal(default_reduction_block(prime, pbind, 2, 2039 * 4 * 1024,
                                           1 << 20, 4, &chunk),
                   -1);
}

/* On a target with AMX, a bf16 or int8 product of 32 rows and columns
 * or more gets AMX's 2 x 2 tile blocks (amx_default): the K of the call
 * fitted to the product's (576 -> one call of 576; 100 bf16 -> one call of
 * 100, three whole steps and a narrower one), the rows the 32-row
 * tiles leave on AMX's row edge (one row: the default tiling), the
 * columns or K left partitioned off (int8 columns onto VNNI), a bias per task
 * block, a signed A kept signed (tdpbssd); fewer rows, or a conv's kernel taps,
 * keep the dot intrinsic. Each builds for the AMX target (its assembly holds
 * tile products) and, where this host has AMX, runs against the interpreter on
 * two threads. */
static void test_amx_default(void **state) {
  (void)state;
  const char *amx = "llvm -mcpu=sapphirerapids -num-cores=2";
  bool run = ts_rt_cpu_has("amx-int8") == 1 && ts_rt_cpu_has("amx-bf16") == 1;
  static const struct {
    const char *spec, *intrin, *also; /* intrin NULL: no AMX */
  } cases[] = {
      {"matmul M=71 N=80 K=576 dtype=int8", "amx_int8_32x32x576",
       "amx_int8_32x32x576_r7"},
      {"matmul M=40 N=64 K=100 dtype=bfloat16", "amx_bf16_32x32x100",
       "amx_bf16_32x32x100_r8"},
      {"dense M=40 N=64 K=200 dtype=int8", "amx_int8_32x32x200",
       "amx_int8_32x32x200_r8"},
      {"batch_matmul B=2 M=33 N=32 K=64 dtype=bfloat16", "amx_bf16_32x32x64",
       "i_tail"},
      {"dense M=64 N=64 K=128 dtype=int8", "amx_int8_32x32x128",
       "reverse_compute_at("},
      {"matmul M=16 N=64 K=64 dtype=int8", NULL, "avx512_vnni"},
      {"conv2d_nhwc N=1 H=6 W=6 CI=16 CO=32 KH=3 KW=3 pad=1 dtype=int8", NULL,
       "avx512_vnni"},
  };
  ts_target *t;
  ts_error err;
  if (ts_target_parse(amx, &t, &err)) fail_msg("%s", err.msg);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *trace, *text;
    target_default(cases[i].spec, amx, run, &trace, &text);
    const char *want = cases[i].intrin ? cases[i].intrin : cases[i].also;
    if (!strstr(trace, want) ||
        (!strstr(trace, cases[i].also) && !strstr(text, cases[i].also)))
      fail_msg("%s: expected %s and %s in\n%s\n%s", cases[i].spec, want,
               cases[i].also, trace, text);
    if (cases[i].intrin ? !strstr(trace, "parallel")
                        : strstr(trace, "amx_") != NULL)
      fail_msg("%s: %s in\n%s", cases[i].spec,
               cases[i].intrin ? "no parallel loop" : "AMX", trace);
    /* int8 columns the 32-column tiles leave (80 = 64 + 16): VNNI's dot
     * products, not the plain tiling */
    if (!strcmp(cases[i].spec, "matmul M=71 N=80 K=576 dtype=int8") &&
        !strstr(trace, "avx512_vnni_16x16"))
      fail_msg("%s: the 16 columns left are not on VNNI:\n%s", cases[i].spec,
               trace);
    free(trace);
    free(text);
    /* the code: tile products for the AMX cases */
    ts_workload *w = workload(cases[i].spec);
    ts_sched *s = NULL;
    if (ts_default_schedule(w->func, t, &s, &err)) fail_msg("%s", err.msg);
    ts_build_options o = ts_build_defaults();
    o.keep_asm = true;
    ts_build_result br;
    if (ts_build(ts_sched_func(s), t, &o, &br, &err))
      fail_msg("%s: %s", cases[i].spec, err.msg);
    if ((strstr(br.assembly, "\ttdpb") != NULL) != (cases[i].intrin != NULL))
      fail_msg("%s: tile products %s", cases[i].spec,
               cases[i].intrin ? "missing" : "present");
    /* a signed int8 A multiplied as it is (the shift to unsigned is
     * VNNI's, for the columns left only) */
    if (cases[i].intrin && strstr(cases[i].intrin, "int8") &&
        !strstr(br.assembly, "\ttdpbssd"))
      fail_msg("%s: no signed tile product (tdpbssd)", cases[i].spec);
    ts_build_result_clear(&br);
    ts_sched_destroy(s);
    ts_workload_free(w);
  }
  ts_target_free(t);
}

/* A product's epilogue that computes in float32 and writes bytes (an int8
 * layer's GELU and requantization, 256 columns per task on AMX): vectors of
 * at most the 64 lanes a vectorized loop lowers to, not one loop of 256
 * bytes, which lowered to a scalar loop (erf through libm, lane by lane:
 * 18x the product's time). */
static void test_byte_epilogue_vectors(void **state) {
  (void)state;
  static const char text[] =
      "func f(A: uint8[128, 64], B: int8[64, 2048], s: float32[2048], "
      "q: uint8[128, 2048]) {\n"
      "  block root() {\n"
      "    alloc C: int32[128, 2048]\n"
      "    for i in range(128) { for j in range(2048) { for k in range(64) {\n"
      "      block C(vi: spatial(128) = i, vj: spatial(2048) = j, "
      "vk: reduce(64) = k) {\n"
      "        init { C[vi, vj] = int32(0) }\n"
      "        C[vi, vj] = C[vi, vj] + cast(int32, A[vi, vk]) * "
      "cast(int32, B[vk, vj])\n"
      "      } } } }\n"
      "    for i in range(128) { for j in range(2048) {\n"
      "      block q(vi: spatial(128) = i, vj: spatial(2048) = j) {\n"
      "        q[vi, vj] = cast(uint8, min(max(round(erf(cast(float32, "
      "C[vi, vj]) * s[vj]) * float32(100)), float32(0)), float32(255)))\n"
      "      } } }\n"
      "  }\n"
      "}\n";
  ts_func *f = check_parse(text, "byte_epilogue");
  assert_non_null(f);
  ts_target *t;
  ts_error err;
  if (ts_target_parse("llvm -mcpu=sapphirerapids -num-cores=2", &t, &err))
    fail_msg("%s", err.msg);
  ts_sched *s = NULL;
  if (ts_default_schedule(f, t, &s, &err)) fail_msg("%s", err.msg);
  char *trace = ts_trace_print(ts_sched_trace(s));
  assert_non_null(strstr(trace, "amx_uint8_32x32x64"));
  free(trace);
  ts_build_options o = ts_build_defaults();
  o.keep_lowered = true;
  ts_build_result br;
  if (ts_build(ts_sched_func(s), t, &o, &br, &err)) fail_msg("%s", err.msg);
  char *low = ts_func_print(br.lowered);
  if (strstr(low, "vectorize_fallback") || !strstr(low, "uint8x64"))
    fail_msg("the epilogue is not in vectors of 64 bytes:\n%s", low);
  free(low);
  ts_build_result_clear(&br);
  if (ts_rt_cpu_has("amx-int8") == 1)
    free(check_default(f, t, "byte epilogue"));
  ts_sched_destroy(s);
  ts_target_free(t);
  ts_func_free(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_byte_epilogue_vectors),
      cmocka_unit_test(test_few_panels),
      cmocka_unit_test(test_wide_ragged),
      cmocka_unit_test(test_dot_rows),
      cmocka_unit_test(test_const_weight_packed),
      cmocka_unit_test(test_rows_packed),
      cmocka_unit_test(test_half_ragged),
      cmocka_unit_test(test_rows_first),
      cmocka_unit_test(test_column_blocks),
      cmocka_unit_test(test_rows_first_ragged),
      cmocka_unit_test(test_narrow_padded),
      cmocka_unit_test(test_depthwise_order),
      cmocka_unit_test(test_depthwise_narrow_tile),
      cmocka_unit_test(test_tensorized_odd_panels),
      cmocka_unit_test(test_depthwise_ragged_columns),
      cmocka_unit_test(test_depthwise_row_pairs),
      cmocka_unit_test(test_stem_pads),
      cmocka_unit_test(test_grouped_tiles),
      cmocka_unit_test(test_five_vector_tiles),
      cmocka_unit_test(test_outer_reduction_blocks),
      cmocka_unit_test(test_deep_rows),
      cmocka_unit_test(test_ceil_rows_unfused),
      cmocka_unit_test(test_weights_in_place),
      cmocka_unit_test(test_reduction_blocks),
      cmocka_unit_test(test_amx_default),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
