/*
 * test_default.c — the default schedule for untuned tasks: for every
 * operator of the codegen suite, for model-sized convolutions, matmuls and
 * row operators, and for every task of the small zoo models, the default-
 * scheduled function builds for the host and computes what the reference
 * interpreter computes; it is deterministic; conv and matmul get register
 * tiles (vectorized, unrolled, parallel) and elementwise and row operators
 * parallel vector loops. With TS_DEFAULT_BENCH=1 it times a few shapes
 * (median of repeats, 2 threads): unscheduled, default, and oneDNN.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../codegen/check.h"
#include "../codegen/operators.h"
#include "bench/bench.h"
#include "graph/graph.h"
#include "tuner/internal.h"
#include "tuner/tuner.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "default_check.h"

static void test_operators(void **state) {
  (void)state;
  ts_target *t = host();
  for (int i = 0; i < N_OPERATOR_SPECS; i++) {
    ts_workload *w = workload(operator_specs[i]);
    free(check_default(w->func, t, operator_specs[i]));
    ts_workload_free(w);
  }
  ts_target_free(t);
}

/* Model-sized operators: the schedule has the expected shape. */
/* The default register tile fits the vector registers with its operands:
 * rows x vectors accumulators, one register per vector of B (used by every
 * row) and one for the broadcast of A. A 3 x 4-vector tile on AVX2's 16
 * registers spilled an accumulator (a 48-row dense layer, a 1x7 conv over
 * 17 columns: 0.6 x and 0.4 x the libraries). Both ISAs, every row count
 * and width up to 64 rows and 8 vectors. */
static void test_register_budget(void **state) {
  (void)state;
  static const struct { int lanes, regs; } isas[] = {{8, 16}, {16, 32}};
  for (int k = 0; k < 2; k++)
    for (int64_t er = 1; er <= 64; er++)
      for (int64_t nv = 1; nv <= 8; nv++) {
        int64_t ev = nv * isas[k].lanes, rows = 0;
        int64_t cols =
            ts_default_vector_tile(er, ev, isas[k].lanes, isas[k].regs, &rows);
        assert_true(cols % isas[k].lanes == 0 && ev % cols == 0);
        /* a divisor of the rows, or (a tile short of 12 accumulators
         * otherwise) a ceil split as even as the budget allows */
        assert_true(rows >= 1 && rows <= er);
        if (er % rows) {
          int64_t tiles = (er + rows - 1) / rows;
          assert_int_equal(rows, (er + tiles - 1) / tiles);
        }
        int64_t v = cols / isas[k].lanes;
        if (rows > 1 && rows * v + v + 1 > isas[k].regs)
          fail_msg("%d lanes: %lld rows x %lld columns: a %lld x %lld tile "
                   "does not fit %d registers",
                   isas[k].lanes, (long long)er, (long long)ev, (long long)rows,
                   (long long)v, isas[k].regs);
      }
  /* the tile of a 48-row dense layer on AVX2: 4 x 3 vectors, 12
   * accumulators with 7 loads a step (was 3 x 4, which spilled, then
   * 6 x 2, 8 loads a step) */
  int64_t rows = 0;
  assert_int_equal(ts_default_vector_tile(48, 768, 8, 16, &rows), 24);
  assert_int_equal(rows, 4);
  /* 56 rows (a 56x56 conv's output columns) have no divisor of 5 or 6:
   * 4 x 2 vectors would hold 8 accumulators, too few to cover the FMA's
   * latency on two pipes; 4 x 3 holds 12 */
  assert_int_equal(ts_default_vector_tile(56, 384, 8, 16, &rows), 24);
  assert_int_equal(rows, 4);
}

static void test_shapes(void **state) {
  (void)state;
  static const struct {
    const char *spec;
    const char *must[5]; /* primitives the trace must contain */
  } cases[] = {
      {"matmul M=128 N=128 K=64", {"vectorize", "unroll", "parallel"}},
      {"batch_matmul B=4 M=32 N=64 K=16", {"vectorize", "parallel"}},
      /* B transposed (attention's Q K^T; dense's [N, K] weights): B copied
       * with its rows last (transform_layout), a panel per vector tile,
       * and the register tile reads the copy along the vector; odd sizes
       * (guarded tiles) too */
      {"batch_matmul B=3 M=32 N=48 K=16 transpose_b=1",
       {"transform_layout", "unroll", "vectorize", "\ncompute_at("}},
      {"batch_matmul B=2 M=37 N=29 K=13 transpose_b=1",
       {"transform_layout", "vectorize"}},
      {"dense M=24 N=64 K=40 bias=1",
       {"transform_layout", "unroll", "vectorize"}},
      /* a 1x7 conv: 11 output columns (prime), 32 channels: a ceil split
       * of the columns into tiles that fit the registers */
      {"conv2d_nhwc N=1 H=17 W=17 CI=16 CO=32 KH=1 KW=7 pad=0",
       {"vectorize", "unroll", "parallel"}},
      {"conv2d_nchw N=1 H=14 W=14 CI=16 CO=32 KH=3 KW=3 pad=1",
       {"vectorize", "unroll", "parallel"}},
      {"conv2d_nhwc N=1 H=14 W=14 CI=16 CO=32 KH=3 KW=3 pad=1",
       {"vectorize", "unroll", "parallel", "\ncompute_at("}},
      /* 11 output columns (prime): a ceil split into two row tiles (6 +
       * 5, the last guarded), not a tile of one row */
      {"conv2d_nhwc N=1 H=22 W=22 CI=32 CO=16 KH=3 KW=3 stride=2 pad=1",
       {"vectorize", "unroll", "parallel"}},
      /* a tile of output pixels (unrolled) reuses each weight vector; a
       * 3 x 3 kernel reads its padding inline (a guarded load, which the
       * code generator partitions away from the image's interior), and
       * so do 5 x 5 and 7 x 7 ones, a kernel row at a time, their tile
       * as wide as lets the registers hold a kernel row's weights beside
       * the accumulators (1 vector on 16 registers for 5 x 5) */
      {"depthwise_conv2d_nhwc N=1 H=28 W=28 C=32 KH=3 KW=3 pad=1",
       {"vectorize", "unroll", "parallel", "compute_inline("}},
      {"depthwise_conv2d_nhwc N=1 H=30 W=30 C=48 KH=3 KW=3 stride=2 pad=1",
       {"vectorize", "parallel", "compute_inline("}},
      {"depthwise_conv2d_nhwc N=1 H=18 W=18 C=32 KH=5 KW=5 pad=2",
       {"vectorize", "parallel", "compute_inline("}},
      {"depthwise_conv2d_nhwc N=1 H=7 W=7 C=32 KH=7 KW=7 pad=3",
       {"vectorize", "parallel", "compute_inline("}},
      {"depthwise_conv2d_nhwc N=1 H=14 W=14 C=64 KH=5 KW=5 pad=2",
       {"vectorize", "parallel", "compute_inline("}},
      {"depthwise_conv2d_nhwc N=1 H=14 W=14 C=32 KH=7 KW=7 pad=3",
       {"vectorize", "parallel", "compute_inline("}},
      /* row reductions combined several vectors at a time (rfactor):
       * the row maximum, sums, and layer norm's sum and sum of squares,
       * which read the row's first element (the shift) at every element,
       * fused into one loop over the row */
      {"softmax N=64 D=128", {"parallel", "rfactor"}},
      /* a row no whole vector divides: half a vector (1000 = 125 x 8) */
      {"softmax N=16 D=1000", {"parallel", "rfactor"}},
      {"reduce op=max N=256 D=512", {"parallel", "rfactor"}},
      /* the fused sums' loop over the row kept a loop (pragma_no_unroll) */
      {"layer_norm N=128 D=256",
       {"parallel", "rfactor", "sq_sum_rf", "fuse_siblings",
        "pragma_no_unroll"}},
      {"elementwise op=gelu shape=128x768", {"vectorize", "parallel"}},
      {"pool2d_nhwc N=1 H=56 W=56 C=64 KH=3 KW=3 stride=2 pad=1 kind=max",
       {"vectorize", "parallel"}},
      {"reduce op=sum N=256 D=512", {"parallel", "rfactor"}},
  };
  ts_target *t = avx2_target();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ts_workload *w = workload(cases[i].spec);
    char *trace = check_default(w->func, t, cases[i].spec);
    for (int k = 0; k < 5 && cases[i].must[k]; k++)
      if (!strstr(trace, cases[i].must[k]))
        fail_msg("%s: no %s in\n%s", cases[i].spec, cases[i].must[k], trace);
    /* a 3 x 3 depthwise conv's tile: its columns and both taps unrolled
     * (neighbouring columns share input loads) */
    if (strstr(cases[i].spec, "depthwise") && strstr(cases[i].spec, "KH=3")) {
      int unrolls = 0;
      for (const char *p = trace; (p = strstr(p, "unroll")); p++) unrolls++;
      if (unrolls < 3)
        fail_msg("%s: %d unrolls, want the tile and both taps:\n%s",
                 cases[i].spec, unrolls, trace);
    }
    free(trace);
    ts_workload_free(w);
  }
  ts_target_free(t);
}

/* The register tile's innermost reduction split by 4, the 4 steps
 * unrolled right above the tile's rows (BLAS micro-kernels unroll K the
 * same way); where 4 does not divide it, a guarded ceil split when it has
 * 16 steps or more (K = 30, 37), none below (K = 13, a stem's 3 channels);
 * never a depthwise conv's taps. The values are checked against the
 * interpreter (check_default). */
static void test_reduction_unrolled(void **state) {
  (void)state;
  static const struct {
    const char *spec;
    const char *inner; /* the unrolled reduction loop, NULL: none */
  } cases[] = {
      {"matmul M=128 N=128 K=64", "for k_1 in range(4) unrolled {"},
      {"conv2d_nhwc N=1 H=14 W=14 CI=16 CO=32 KH=3 KW=3 pad=1",
       "for rc_1 in range(4) unrolled {"},
      {"conv2d_nhwc N=1 H=14 W=14 CI=64 CO=32 KH=1 KW=1 pad=0",
       "for rc_1 in range(4) unrolled {"},
      /* a K that 4 does not divide: a guarded ceil split (8 x 4 for 30) */
      {"matmul M=64 N=64 K=30", "for k_1 in range(4) unrolled {"},
      {"matmul M=61 N=19 K=37", "for k_1 in range(4) unrolled {"},
      {"matmul M=64 N=64 K=13", NULL},
      {"conv2d_nhwc N=1 H=32 W=32 CI=3 CO=16 KH=7 KW=7 stride=2 pad=3", NULL},
      {"depthwise_conv2d_nhwc N=1 H=28 W=28 C=32 KH=8 KW=8 pad=3", NULL},
  };
  ts_target *t = avx2_target();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ts_workload *w = workload(cases[i].spec);
    free(check_default(w->func, t, cases[i].spec));
    ts_sched *s = NULL;
    ts_error err;
    if (ts_default_schedule(w->func, t, &s, &err))
      fail_msg("%s: %s", cases[i].spec, err.msg);
    char *text = ts_func_print(ts_sched_func(s));
    if (cases[i].inner) {
      const char *at = strstr(text, cases[i].inner);
      const char *next = at ? strstr(at + 1, "\n") : NULL;
      const char *eol = next ? strchr(next + 1, '\n') : NULL;
      /* the next line: the tile's rows, unrolled */
      const char *u = next ? strstr(next, " unrolled {") : NULL;
      if (!at || !u || (eol && u > eol))
        fail_msg("%s: no '%s' over the unrolled rows in\n%s", cases[i].spec,
                 cases[i].inner, text);
    } else {
      static const char *const reds[] = {"for k_1 in", "for rc_1 in",
                                         "for rw_1 in", "for rh_1 in"};
      for (int r = 0; r < 4; r++)
        if (strstr(text, reds[r]))
          fail_msg("%s: a reduction split ('%s') in\n%s", cases[i].spec,
                   reds[r], text);
    }
    free(text);
    ts_sched_destroy(s);
    ts_workload_free(w);
  }
  ts_target_free(t);
}

/* Row operators of any rank (a softmax over [1, 4, 32, 32] as the graph's
 * attention gives it, a layer norm over [1, 128, 64]): the producers go to
 * the innermost row loop, so the whole operator is one parallel loop over
 * the rows, and lowering compacts the row intermediates to one row each
 * (the fused row loop's split-back indices are disjoint per iteration).
 * Before, a leading loop of one iteration kept every stage a loop nest of
 * its own over full-size buffers, 9 times slower for BERT's softmax. */
static const char rank_softmax[] =
    "func fused_softmax(p0: float32[1, 4, 48, 48], softmax_3: float32[1, 4, "
    "48, 48]) {\n"
    "  block root() {\n"
    "    reads(p0[0, 0 +: 4, 0 +: 48, 0 +: 48])\n"
    "    writes(softmax_3[0, 0 +: 4, 0 +: 48, 0 +: 48])\n"
    "    alloc max_0: float32[1, 4, 48]\n"
    "    alloc exp_1: float32[1, 4, 48, 48]\n"
    "    alloc sum_2: float32[1, 4, 48]\n"
    "    for i in range(1) {\n"
    "      for j in range(4) {\n"
    "        for k in range(48) {\n"
    "          for rk in range(48) {\n"
    "            block max_0(vi: spatial(1) = i, vj: spatial(4) = j, vk: "
    "spatial(48) = k, vrk: reduce(48) = rk) {\n"
    "              reads(max_0[0, vj, vk], p0[0, vj, vk, vrk])\n"
    "              writes(max_0[0, vj, vk])\n"
    "              init {\n"
    "                max_0[vi, vj, vk] = float32(-inf)\n"
    "              }\n"
    "              max_0[vi, vj, vk] = max(max_0[vi, vj, vk], p0[vi, vj, vk, "
    "vrk])\n"
    "            }\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "    for i in range(1) {\n"
    "      for j in range(4) {\n"
    "        for k in range(48) {\n"
    "          for l in range(48) {\n"
    "            block exp_1(vi: spatial(1) = i, vj: spatial(4) = j, vk: "
    "spatial(48) = k, vl: spatial(48) = l) {\n"
    "              reads(p0[0, vj, vk, vl], max_0[0, vj, vk])\n"
    "              writes(exp_1[0, vj, vk, vl])\n"
    "              exp_1[vi, vj, vk, vl] = exp(p0[vi, vj, vk, vl] - max_0[vi, "
    "vj, vk])\n"
    "            }\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "    for i in range(1) {\n"
    "      for j in range(4) {\n"
    "        for k in range(48) {\n"
    "          for rk in range(48) {\n"
    "            block sum_2(vi: spatial(1) = i, vj: spatial(4) = j, vk: "
    "spatial(48) = k, vrk: reduce(48) = rk) {\n"
    "              reads(sum_2[0, vj, vk], exp_1[0, vj, vk, vrk])\n"
    "              writes(sum_2[0, vj, vk])\n"
    "              init {\n"
    "                sum_2[vi, vj, vk] = float32(0)\n"
    "              }\n"
    "              sum_2[vi, vj, vk] = sum_2[vi, vj, vk] + exp_1[vi, vj, vk, "
    "vrk]\n"
    "            }\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "    for i in range(1) {\n"
    "      for j in range(4) {\n"
    "        for k in range(48) {\n"
    "          for l in range(48) {\n"
    "            block softmax_3(vi: spatial(1) = i, vj: spatial(4) = j, vk: "
    "spatial(48) = k, vl: spatial(48) = l) {\n"
    "              reads(exp_1[0, vj, vk, vl], sum_2[0, vj, vk])\n"
    "              writes(softmax_3[0, vj, vk, vl])\n"
    "              softmax_3[vi, vj, vk, vl] = exp_1[vi, vj, vk, vl] / "
    "sum_2[vi, vj, vk]\n"
    "            }\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";
static const char rank_layer_norm[] =
    "func fused_layernormalization(p0: float32[1, 128, 64], p1: float32[64], "
    "p2: float32[64], layer_norm_2: float32[1, 128, 64]) {\n"
    "  block root() {\n"
    "    reads(p0[0, 0 +: 128, 0 +: 64], p1[0 +: 64], p2[0 +: 64])\n"
    "    writes(layer_norm_2[0, 0 +: 128, 0 +: 64])\n"
    "    alloc sum_0: float32[1, 128]\n"
    "    alloc sqsum_1: float32[1, 128]\n"
    "    for i in range(1) {\n"
    "      for j in range(128) {\n"
    "        for r2 in range(64) {\n"
    "          block sum_0(vi: spatial(1) = i, vj: spatial(128) = j, vr2: "
    "reduce(64) = r2) {\n"
    "            reads(sum_0[0, vj], p0[0, vj, 0 +: 64])\n"
    "            writes(sum_0[0, vj])\n"
    "            init {\n"
    "              sum_0[vi, vj] = float32(0)\n"
    "            }\n"
    "            sum_0[vi, vj] = sum_0[vi, vj] + (p0[vi, vj, vr2] - p0[vi, vj, "
    "0])\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "    for i in range(1) {\n"
    "      for j in range(128) {\n"
    "        for r2 in range(64) {\n"
    "          block sqsum_1(vi: spatial(1) = i, vj: spatial(128) = j, vr2: "
    "reduce(64) = r2) {\n"
    "            reads(sqsum_1[0, vj], p0[0, vj, 0 +: 64])\n"
    "            writes(sqsum_1[0, vj])\n"
    "            init {\n"
    "              sqsum_1[vi, vj] = float32(0)\n"
    "            }\n"
    "            sqsum_1[vi, vj] = sqsum_1[vi, vj] + (p0[vi, vj, vr2] - p0[vi, "
    "vj, 0]) * (p0[vi, vj, vr2] - p0[vi, vj, 0])\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "    for i in range(1) {\n"
    "      for j in range(128) {\n"
    "        for k in range(64) {\n"
    "          block layer_norm_2(vi: spatial(1) = i, vj: spatial(128) = j, "
    "vk: spatial(64) = k) {\n"
    "            reads(p0[0, vj, 0 +: 64], sum_0[0, vj], sqsum_1[0, vj], "
    "p1[vk], p2[vk])\n"
    "            writes(layer_norm_2[0, vj, vk])\n"
    "            layer_norm_2[vi, vj, vk] = (p0[vi, vj, vk] - (p0[vi, vj, 0] + "
    "sum_0[vi, vj] * float32(0.015625))) * rsqrt(max(sqsum_1[vi, vj] * "
    "float32(0.015625) - sum_0[vi, vj] * float32(0.015625) * (sum_0[vi, vj] * "
    "float32(0.015625)), float32(0)) + float32(1e-12)) * p1[vk] + p2[vk]\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

static void test_row_operators_any_rank(void **state) {
  (void)state;
  const char *texts[] = {rank_softmax, rank_layer_norm};
  ts_target *t = host();
  for (int i = 0; i < 2; i++) {
    ts_func *f;
    ts_error err;
    if (ts_func_parse(texts[i], strlen(texts[i]), "rank.tir", &f, &err))
      fail_msg("parse: %s", err.msg);
    free(check_default(
        f, t, i ? "layer norm [1, 128, 64]" : "softmax [1, 4, 32, 32]"));
    ts_sched *s;
    if (ts_default_schedule(f, t, &s, &err)) fail_msg("%s", err.msg);
    ts_lower_options lo = ts_lower_defaults();
    ts_func *l = ts_lower(ts_sched_func(s), &lo, &err);
    if (!l) fail_msg("lower: %s", err.msg);
    char *text = ts_func_print(l);
    const char *par = strstr(text, " parallel {");
    const char *alloc = strstr(text, "allocate ");
    if (!par || !alloc || alloc < par)
      fail_msg("%s: not one parallel loop over rows with its intermediates "
               "inside:\n%s",
               ts_func_name(f), text);
    /* no intermediate larger than a row (32 or 64 floats) */
    for (const char *p = alloc; (p = strstr(p, "allocate ")); p++) {
      const char *br = strchr(p, '[');
      if (br && atoi(br + 1) > 64)
        fail_msg("%s: an intermediate of %d elements:\n%s", ts_func_name(f),
                 atoi(br + 1), text);
    }
    free(text);
    ts_func_free(l);
    ts_sched_destroy(s);
    ts_func_free(f);
  }
  ts_target_free(t);
}

/* A reduction over a middle axis (NCHW's softmax over channels): its rows
 * are strided, so the default keeps the reduce loop whole (no vector
 * accumulators along it, which would gather lane by lane) and vectorizes
 * the contiguous spatial loop under it. */
static const char *column_max =
    "func colmax(p0: float32[1, 24, 10, 40], m: float32[1, 1, 10, 40], "
    "s: float32[1, 1, 10, 40]) {\n"
    "  block root() {\n"
    "    for j in range(10) {\n"
    "      for k in range(40) {\n"
    "        for r in range(24) {\n"
    "          block m(vj: spatial(10) = j, vk: spatial(40) = k, vr: "
    "reduce(24) = r) {\n"
    "            reads(m[0, 0, vj, vk], p0[0, vr, vj, vk])\n"
    "            writes(m[0, 0, vj, vk])\n"
    "            init { m[0, 0, vj, vk] = float32(-inf) }\n"
    "            m[0, 0, vj, vk] = max(m[0, 0, vj, vk], p0[0, vr, vj, vk])\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "    for j in range(10) {\n"
    "      for k in range(40) {\n"
    "        for r in range(24) {\n"
    "          block s(vj: spatial(10) = j, vk: spatial(40) = k, vr: "
    "reduce(24) = r) {\n"
    "            reads(s[0, 0, vj, vk], p0[0, vr, vj, vk])\n"
    "            writes(s[0, 0, vj, vk])\n"
    "            init { s[0, 0, vj, vk] = float32(0) }\n"
    "            s[0, 0, vj, vk] = s[0, 0, vj, vk] + exp(p0[0, vr, vj, vk])\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

static void test_column_reductions(void **state) {
  (void)state;
  ts_target *t = host();
  ts_func *f;
  ts_error err;
  if (ts_func_parse(column_max, strlen(column_max), "col.tir", &f, &err))
    fail_msg("parse: %s", err.msg);
  free(check_default(f, t, "max and sum over [1, 24, 10, 40]'s axis 1"));
  ts_sched *s;
  if (ts_default_schedule(f, t, &s, &err)) fail_msg("%s", err.msg);
  char *text = ts_func_print(ts_sched_func(s));
  if (strstr(text, "_rf"))
    fail_msg("a column reduction factored along its strided rows:\n%s", text);
  const char *names[] = {"m", "s"};
  for (int i = 0; i < 2; i++) {
    const ts_stmt *l = tu_inner_loop(ts_sched_func(s), names[i]);
    if (!l || ts_for_kind_of(l) != TS_FOR_VECTORIZED ||
        loop_binding(ts_func_find_block(ts_sched_func(s), names[i]), l) !=
            BIND_SPATIAL)
      fail_msg("%s: the innermost loop is not the vectorized spatial one:\n%s",
               names[i], text);
  }
  free(text);
  ts_sched_destroy(s);
  ts_func_free(f);
  ts_target_free(t);
}

/* A conv whose weight panels would be packed again under each image row
 * (the rows loop above the output-channel tiles), 12 rows of at least 7
 * row tiles: the weights packed once, before the anchor, in panels
 * [CO / cols, KH, KW, CI, cols], and not computed at a tile. (Over 2
 * rows, too few tiles read them to pay for the copy: read in place.) A
 * matmul has no loop above its panels: its B is packed per vector tile as
 * before. */
static void test_pack_once(void **state) {
  (void)state;
  ts_target *t = host();
  ts_workload *w = workload("conv2d_nhwc N=1 H=12 W=56 CI=32 CO=96 KH=1 KW=1");
  char *trace = check_default(w->func, t, "1x1 conv, pack once");
  if (!strstr(trace, "transform_layout") || !strstr(trace, "floordiv(d3, ") ||
      strstr(trace, "\ncompute_at("))
    fail_msg("1x1 conv: the weights not packed once in panels:\n%s", trace);
  free(trace);
  ts_workload_free(w);
  w = workload("conv2d_nhwc N=1 H=2 W=56 CI=32 CO=96 KH=1 KW=1");
  trace = check_default(w->func, t, "1x1 conv over 2 rows, in place");
  if (strstr(trace, "transform_layout") || strstr(trace, "cache_read"))
    fail_msg("1x1 conv over 2 rows: the weights packed:\n%s", trace);
  free(trace);
  ts_workload_free(w);
  w = workload("matmul M=256 N=96 K=32");
  trace = check_default(w->func, t, "matmul, pack per panel");
  if (strstr(trace, "transform_layout") || !strstr(trace, "\ncompute_at("))
    fail_msg("matmul: B not packed per vector tile:\n%s", trace);
  free(trace);
  ts_workload_free(w);
  ts_target_free(t);
}

/* Whether, in spec's default schedule on t, the padding block shares its
 * outermost loop with the conv (computed inside the conv's loops). */
static bool pad_in_conv(const char *spec, const ts_target *t) {
  ts_workload *w = workload(spec);
  char *trace = check_default(w->func, t, spec);
  free(trace);
  ts_sched *s = NULL;
  ts_error err;
  if (ts_default_schedule(w->func, t, &s, &err)) fail_msg("%s", err.msg);
  ts_rv pb, cb, pl[16], cl[16];
  int np = 0, nc = 0;
  if (ts_sched_get_block(s, "pad", &pb) ||
      ts_sched_get_loops(s, pb, pl, 16, &np) ||
      ts_sched_get_block(s, "conv", &cb) ||
      ts_sched_get_loops(s, cb, cl, 16, &nc) || np == 0 || nc == 0)
    fail_msg("%s: no pad and conv blocks with loops", spec);
  bool in = ts_sched_rv_loop(s, pl[0]) == ts_sched_rv_loop(s, cl[0]);
  ts_sched_destroy(s);
  ts_workload_free(w);
  return in;
}

/* The extent of the innermost loop of block `name` in f's default
 * schedule on t, and whether it is vectorized. */
static int64_t inner_extent(const ts_func *f, const ts_target *t,
                            const char *name, bool *vectorized) {
  ts_sched *s = NULL;
  ts_error err;
  if (ts_default_schedule(f, t, &s, &err)) fail_msg("%s", err.msg);
  ts_rv b, l[16];
  int n = 0;
  if (ts_sched_get_block(s, name, &b) || ts_sched_get_loops(s, b, l, 16, &n) ||
      n == 0)
    fail_msg("no block '%s' with loops", name);
  const ts_stmt *in = ts_sched_rv_loop(s, l[n - 1]);
  int64_t ext = 0;
  ts_expr_is_const_int(ts_for_extent(in), &ext);
  *vectorized = ts_for_kind_of(in) == TS_FOR_VECTORIZED;
  ts_sched_destroy(s);
  return ext;
}

/* A stem's padding (3 channels, fewer than a vector) runs once before the
 * conv, over the whole image, its pixels and channels fused into one
 * loop in whole vectors (not a vector of 3 lanes per pixel); a conv of
 * wider channels pads the window of each tile (computed inside the conv's
 * loops). A block whose short inner loop is not contiguous with the one
 * above it in every buffer (a per-pixel value broadcast over the
 * channels) keeps the two loops. */
static void test_stem_pads_once(void **state) {
  (void)state;
  ts_target *t = avx2_target();
  const char *stem =
      "conv2d_nhwc N=1 H=16 W=16 CI=3 CO=16 KH=7 KW=7 stride=2 pad=3";
  if (pad_in_conv(stem, t)) fail_msg("the stem's padding is computed per tile");
  if (!pad_in_conv("conv2d_nhwc N=1 H=12 W=12 CI=32 CO=64 KH=5 KW=5 pad=2", t))
    fail_msg("a 32-channel conv's padding is not computed per tile");
  ts_workload *w = workload(stem);
  bool vec = false;
  int64_t ext = inner_extent(w->func, t, "pad", &vec);
  if (!vec || ext < 8)
    fail_msg("the stem's padding: inner loop of %lld%s", (long long)ext,
             vec ? "" : ", not vectorized");
  ts_workload_free(w);
  static const char *scale =
      "func scale(x: float32[6, 9], s: float32[3], y: float32[6, 9, 3]) {\n"
      "  for h in range(6) {\n"
      "    for w in range(9) {\n"
      "      for c in range(3) {\n"
      "        block y(vh: spatial(6) = h, vw: spatial(9) = w,\n"
      "                vc: spatial(3) = c) {\n"
      "          y[vh, vw, vc] = x[vh, vw] * s[vc]\n"
      "        }\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n";
  ts_func *f = NULL;
  ts_error err;
  if (ts_func_parse(scale, strlen(scale), "scale.tir", &f, &err))
    fail_msg("parse: %s", err.msg);
  free(check_default(f, t, "broadcast over 3 channels"));
  if (inner_extent(f, t, "y", &vec) != 3)
    fail_msg("a broadcast over 3 channels: its pixel loop fused");
  ts_func_free(f);
  ts_target_free(t);
}

/* Whether the default schedule of spec on t inlines its padding (no
 * "pad" block left), checked against the interpreter. */
static bool pad_inlined(const char *spec, const ts_target *t) {
  ts_workload *w = workload(spec);
  free(check_default(w->func, t, spec));
  ts_sched *s = NULL;
  ts_error err;
  if (ts_default_schedule(w->func, t, &s, &err)) fail_msg("%s", err.msg);
  ts_rv pb;
  bool inlined = ts_sched_get_block(s, "pad", &pb) != TS_OK;
  ts_sched_destroy(s);
  ts_workload_free(w);
  return inlined;
}

/* A dense conv reads its padding inlined (default_pads_read_inline) with
 * a kernel of at most 3 x 3, whatever the stride (the code generator drops
 * the taps outside the image), or a strided one whose padded copy is a
 * large share of its work (few multiply-adds per padded element); a 5 x 5
 * kernel at stride 1, a strided one with many output channels, and a stem
 * of 3 channels keep the copy. */
static void test_pads_inline(void **state) {
  (void)state;
  ts_target *t = avx2_target();
  static const struct {
    const char *spec;
    bool inlined;
  } cases[] = {
      {"conv2d_nhwc N=1 H=30 W=30 CI=64 CO=16 KH=3 KW=3 stride=2 pad=1", true},
      {"conv2d_nhwc N=1 H=19 W=19 CI=32 CO=24 KH=3 KW=3 stride=2 pad=1", true},
      {"conv2d_nhwc N=1 H=30 W=30 CI=64 CO=16 KH=3 KW=3 pad=1", true},
      {"conv2d_nhwc N=1 H=14 W=14 CI=32 CO=256 KH=3 KW=3 stride=2 pad=1", true},
      {"conv2d_nhwc N=1 H=15 W=15 CI=32 CO=32 KH=5 KW=5 pad=2", false},
      {"conv2d_nhwc N=1 H=24 W=24 CI=64 CO=16 KH=5 KW=5 stride=2 pad=2", true},
      {"conv2d_nhwc N=1 H=24 W=24 CI=32 CO=256 KH=5 KW=5 stride=2 pad=2",
       false},
      {"conv2d_nhwc N=1 H=32 W=32 CI=3 CO=16 KH=7 KW=7 stride=2 pad=3", false},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    if (pad_inlined(cases[c].spec, t) != cases[c].inlined)
      fail_msg("%s: padding %s", cases[c].spec,
               cases[c].inlined ? "copied" : "inlined");
  ts_target_free(t);
}

/* The default schedule of f on t: its trace has `has` and not `not`. */
static void expect_trace(const ts_func *f, const ts_target *t, const char *what,
                         const char *has, const char * not ) {
  ts_sched *s = NULL;
  ts_error err;
  if (ts_default_schedule(f, t, &s, &err)) fail_msg("%s: %s", what, err.msg);
  char *trace = ts_trace_print(ts_sched_trace(s));
  if (!strstr(trace, has)) fail_msg("%s: no '%s' in\n%s", what, has, trace);
  if (strstr(trace, not )) fail_msg("%s: '%s' in\n%s", what, not, trace);
  free(trace);
  ts_sched_destroy(s);
}

/* An axis that no whole vector divides gets the divisor that fills the
 * vector instructions best (N = 72 on 16 lanes: 36, 32 + 4), unless a ceil
 * split into whole vectors fills them clearly better: N = 1000 on 16 lanes
 * runs in tiles of 32 (31 whole tiles and one of 8, 98 % of the lanes
 * computed), not 40 (32 + 8: 83 %) or 25 (16 + 8 + one scalar lane); 24 is
 * its own tile (16 + 8). Scheduled for a fixed AVX-512 target, checked for
 * correctness on the host. */
static void test_odd_vector_tiles(void **state) {
  (void)state;
  ts_target *avx512 = NULL;
  ts_error err;
  if (ts_target_parse("llvm -mcpu=skylake-avx512 -num-cores=2", &avx512, &err))
    fail_msg("%s", err.msg);
  static const struct {
    const char *spec, *factor, *not ;
  } cases[] = {
      {"matmul M=64 N=1000 K=32", "factors=[None, 32]", "factors=[None, 40]"},
      {"matmul M=64 N=72 K=32", "factors=[None, 36]", "factors=[None, 32]"},
      /* 24: the whole axis, not split (no 8 or 12) */
      {"matmul M=3136 N=24 K=16", "vectorize", "factors=[None, 12]"},
      /* three vectors when they are the whole axis (48 on 16 lanes, 24
       * on 8: the input read once, not once per vector) */
      {"matmul M=64 N=48 K=32", "factors=[None, 8]", "factors=[None, 16]"},
      /* a single row: the register budget in vectors (20 x 16 lanes of
       * the 28 vector registers), not four */
      {"matmul M=1 N=960 K=32", "factors=[None, 320]", "factors=[None, 64]"},
      /* a matrix-vector product with B transposed reads it in place:
       * no row reuses a packed copy */
      {"dense M=1 N=96 K=32", "vectorize", "transform_layout"},
  };
  ts_target *t = host();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ts_workload *w = workload(cases[i].spec);
    expect_trace(w->func, avx512, cases[i].spec, cases[i].factor,
                 cases[i].not );
    free(check_default(w->func, t, cases[i].spec));
    ts_workload_free(w);
  }
  ts_target_free(t);
  ts_target_free(avx512);
}

/* An AVX2 and an AVX-512 target of two cores, in that order. */
static void two_isas(ts_target *tg[2]) {
  ts_error err;
  if (ts_target_parse("llvm -mcpu=haswell -num-cores=2", &tg[0], &err) ||
      ts_target_parse("llvm -mcpu=skylake-avx512 -num-cores=2", &tg[1], &err))
    fail_msg("%s", err.msg);
}

/* An elementwise loop (softmax's exp and its division) is vectorized in
 * whole vectors, up to four: four with a guarded last step when no whole
 * vector divides the row (97, prime: 32 lanes on AVX2, 64 on AVX-512),
 * the most whole vectors that divide it otherwise (880: 16 lanes, not 22,
 * its largest divisor up to four vectors, which runs 16 + 4 + 2). Each is
 * checked against the interpreter on the host. */
static void test_elementwise_vectors(void **state) {
  (void)state;
  ts_target *tg[2];
  two_isas(tg);
  static const struct {
    const char *spec, *has[2], *not ;
  } cases[] = {
      {"softmax N=3 D=97",
       {"factors=[None, 32]", "factors=[None, 64]"},
       "factors=[None, 97]"},
      {"softmax N=3 D=880",
       {"factors=[None, 16]", "factors=[None, 16]"},
       "factors=[None, 22]"},
  };
  ts_target *t = host();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ts_workload *w = workload(cases[i].spec);
    for (int k = 0; k < 2; k++)
      expect_trace(w->func, tg[k], cases[i].spec, cases[i].has[k],
                   cases[i].not );
    free(check_default(w->func, t, cases[i].spec));
    ts_workload_free(w);
  }
  ts_target_free(t);
  ts_target_free(tg[0]);
  ts_target_free(tg[1]);
}

/* Extents no vector tile divides (primes): the vector axis is split ceil-wise
 * by one or two vectors, the rows by the register budget, the tile
 * accumulates in a local buffer (cache_write) and the guard stays only on
 * the tail; each checked against the interpreter on the host. */
static void test_ragged_tiles(void **state) {
  (void)state;
  ts_error err;
  ts_target *tg[2] = {NULL, NULL};
  two_isas(tg);
  /* the vector split on AVX2 and on AVX-512 (NULL: the whole axis, 37
   * being under four AVX-512 vectors) */
  static const struct {
    const char *spec, *factor[2];
  } cases[] = {
      {"matmul M=61 N=37 K=29", {"factors=[None, 16]", NULL}},
      {"matmul M=43 N=71 K=13", {"factors=[None, 16]", "factors=[None, 32]"}},
      {"batch_matmul B=2 M=13 N=67 K=11",
       {"factors=[None, 16]", "factors=[None, 32]"}},
      /* whole vectors, prime rows: the rows alone split ceil-wise */
      {"matmul M=61 N=32 K=13", {NULL, NULL}},
  };
  ts_target *t = host();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ts_workload *w = workload(cases[i].spec);
    for (int k = 0; k < 2; k++) {
      if (!cases[i].factor[k]) continue;
      ts_sched *s = NULL;
      if (ts_default_schedule(w->func, tg[k], &s, &err))
        fail_msg("%s: %s", cases[i].spec, err.msg);
      char *trace = ts_trace_print(ts_sched_trace(s));
      if (!strstr(trace, cases[i].factor[k]) || !strstr(trace, "cache_write"))
        fail_msg("%s: no '%s' and cache_write in\n%s", cases[i].spec,
                 cases[i].factor[k], trace);
      free(trace);
      ts_sched_destroy(s);
    }
    free(check_default(w->func, t, cases[i].spec));
    ts_workload_free(w);
  }
  ts_target_free(t);
  ts_target_free(tg[0]);
  ts_target_free(tg[1]);
}

/* Output columns too few for a register tile (a 7x7, 11x11 or 14x14
 * conv): on AVX2 the rows are fused with the columns and split ceil-wise
 * by the register budget (49 pixels: tiles of 6, 2 vectors of channels);
 * on AVX-512, whose 7 columns x 2 vectors already hold 14 accumulators,
 * they are not; nor where the columns fill the tile (28 columns of 192
 * channels: 4 x 3 vectors), the reduction is a stem's 3 input channels or
 * a strided conv reads its padding inlined.
 * Each checked against the interpreter on the host. */
static void test_short_rows(void **state) {
  (void)state;
  ts_error err;
  ts_target *tg[2] = {NULL, NULL};
  two_isas(tg);
  static const struct {
    const char *spec;
    bool fused[2];
    const char *split; /* AVX2's pixel split, or NULL */
  } cases[] = {
      {"conv2d_nhwc N=1 H=7 W=7 CI=64 CO=64 KH=3 KW=3 pad=1",
       {true, false},
       "factors=[None, 6]"},
      /* (a strided conv whose padded copy is costly: its padding inlined,
       * tiles of a row's columns, test_pads_inline) */
      {"conv2d_nhwc N=1 H=22 W=22 CI=24 CO=16 KH=3 KW=3 stride=2 pad=1",
       {false, false},
       NULL},
      {"conv2d_nhwc N=1 H=14 W=14 CI=32 CO=64 KH=3 KW=3 pad=1",
       {true, false},
       "factors=[None, 6]"},
      {"conv2d_nhwc N=1 H=28 W=28 CI=32 CO=192 KH=1 KW=1",
       {false, false},
       NULL},
      {"conv2d_nhwc N=1 H=30 W=30 CI=3 CO=16 KH=3 KW=3 stride=2 pad=1",
       {false, false},
       NULL},
  };
  ts_target *t = host();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ts_workload *w = workload(cases[i].spec);
    for (int k = 0; k < 2; k++) {
      ts_sched *s = NULL;
      if (ts_default_schedule(w->func, tg[k], &s, &err))
        fail_msg("%s: %s", cases[i].spec, err.msg);
      char *trace = ts_trace_print(ts_sched_trace(s));
      bool fused = strstr(trace, "fuse(loops=[l2, l3])") != NULL;
      if (fused != cases[i].fused[k] ||
          (k == 0 && cases[i].split && !strstr(trace, cases[i].split)))
        fail_msg("%s on %s: expected the rows %sfused%s%s in\n%s",
                 cases[i].spec, k ? "AVX-512" : "AVX2",
                 cases[i].fused[k] ? "" : "not ",
                 k == 0 && cases[i].split ? " and " : "",
                 k == 0 && cases[i].split ? cases[i].split : "", trace);
      free(trace);
      ts_sched_destroy(s);
    }
    free(check_default(w->func, t, cases[i].spec));
    ts_workload_free(w);
  }
  ts_target_free(t);
  ts_target_free(tg[0]);
  ts_target_free(tg[1]);
}

/* A product's rows whose divisors leave the tile short of 12 accumulators
 * (49: 7 x 1 vector on AVX2) split ceil-wise where that gives it more (6 x
 * 2 vectors); AVX-512's 7 x 2 vectors keep their divisor. Checked against
 * the interpreter on the host. */
static void test_short_product_rows(void **state) {
  (void)state;
  ts_error err;
  ts_target *tg[2] = {NULL, NULL};
  two_isas(tg);
  const char *spec = "matmul M=49 N=64 K=32";
  ts_workload *w = workload(spec);
  for (int k = 0; k < 2; k++) {
    ts_sched *s = NULL;
    if (ts_default_schedule(w->func, tg[k], &s, &err))
      fail_msg("%s: %s", spec, err.msg);
    char *trace = ts_trace_print(ts_sched_trace(s));
    bool ceil6 = strstr(trace, "factors=[None, 6]") != NULL;
    if (ceil6 != (k == 0) || (k == 0 && !strstr(trace, "factors=[None, 16]")))
      fail_msg("%s on %s: expected %s in\n%s", spec, k ? "AVX-512" : "AVX2",
               k ? "no 6-row tiles" : "6 rows x 16 columns", trace);
    free(trace);
    ts_sched_destroy(s);
  }
  ts_target *t = host();
  free(check_default(w->func, t, spec));
  ts_workload_free(w);
  ts_target_free(t);
  ts_target_free(tg[0]);
  ts_target_free(tg[1]);
}

/* A product whose columns are blocked, C[i, j / 16, j % 16] (the
 * quantized compile's 1x1 convs): the rows are C's first index, not its
 * second-to-last; tensorized on VNNI, the same values as the interpreter
 * on the host. */
static const char blocked_u8s8[] =
    "func blk(A: uint8[24, 32], B: int8[2, 32, 16], C: int32[24, 2, 16]) {\n"
    "  block root() {\n"
    "    for i in range(24) {\n"
    "      for j in range(2) {\n"
    "        for k in range(16) {\n"
    "          for rc in range(32) {\n"
    "            block C(vi: spatial(24) = i, vj: spatial(2) = j, vk: "
    "spatial(16) = k, vrc: reduce(32) = rc) {\n"
    "              init {\n"
    "                C[vi, vj, vk] = int32(0)\n"
    "              }\n"
    "              C[vi, vj, vk] = C[vi, vj, vk] + cast(int32, A[vi, vrc]) * "
    "cast(int32, B[vj, vrc, vk])\n"
    "            }\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

static void test_tensorized_blocked(void **state) {
  (void)state;
  ts_func *f = NULL;
  ts_target *vnni = NULL;
  ts_error err;
  if (ts_func_parse(blocked_u8s8, strlen(blocked_u8s8), "blk", &f, &err) ||
      ts_target_parse("llvm -mcpu=cooperlake -num-cores=2", &vnni, &err))
    fail_msg("%s", err.msg);
  ts_sched *s = NULL;
  if (ts_default_schedule(f, vnni, &s, &err)) fail_msg("%s", err.msg);
  char *trace = ts_trace_print(ts_sched_trace(s));
  if (!strstr(trace, "tensorize(") || !strstr(trace, "avx512_vnni_16x16"))
    fail_msg("blocked columns not tensorized:\n%s", trace);
  free(trace);
  ts_sched_destroy(s);
  ts_target *t = host();
  free(check_default(f, t, "blocked columns"));
  ts_target_free(t);
  ts_target_free(vnni);
  ts_func_free(f);
}

/* Winograd's batched product of ResNet-50's second stage ([36, 56, 128] x
 * blocked [36, 8, 128, 16]): its default register tile reads A's rows at
 * constant offsets from one index, in groups of steps with prefetches.
 * In the inner loop every load takes its offset in the addressing mode, so
 * the loop is the FMAs, B's loads and a few instructions of loop control
 * (an index x + c emitted as one sum became x | c where x's low bits are
 * zero, and then a mov and an or per FMA: 84 instructions for 32 FMAs).
 * Compiled for a fixed AVX-512 target and checked in its assembly; the
 * values checked on the host. */
static const char winograd_product[] =
    "func wp(p0: float32[36, 56, 128], p1: float32[36, 8, 128, 16], m: "
    "float32[36, 56, 8, 16]) {\n"
    "  block root() {\n"
    "    for i in range(36) {\n"
    "      for j in range(56) {\n"
    "        for k in range(8) {\n"
    "          for l in range(16) {\n"
    "            for rk in range(128) {\n"
    "              block m(vi: spatial(36) = i, vj: spatial(56) = j, vk: "
    "spatial(8) = k, vl: spatial(16) = l, vrk: reduce(128) = rk) {\n"
    "                init {\n"
    "                  m[vi, vj, vk, vl] = float32(0)\n"
    "                }\n"
    "                m[vi, vj, vk, vl] = m[vi, vj, vk, vl] + p0[vi, vj, vrk] "
    "* p1[vi, vk, vrk, vl]\n"
    "              }\n"
    "            }\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

/* The single-block loops of x86 assembly `as` that contain FMAs: the most
 * instructions per FMA among them, and whether any has an `or` of a
 * constant into a register. */
static double fma_loop_cost(const char *as, bool *or_const) {
  double worst = 0;
  *or_const = false;
  const char *p = as;
  while ((p = strstr(p, "\n.LBB"))) {
    const char *label = p + 1, *colon = strchr(label, ':');
    if (!colon) break;
    char name[64];
    int len = (int)(colon - label);
    if (len >= (int)sizeof name) break;
    snprintf(name, sizeof name, "%.*s", len, label);
    /* a loop: the lines from the label to a jump back to it, no label
     * between */
    const char *end = strstr(colon, "\n.LBB");
    if (!end) end = colon + strlen(colon);
    int n = 0, fma = 0;
    bool back = false, orc = false;
    for (const char *l = strchr(colon, '\n'); l && l < end && !back;
         l = strchr(l + 1, '\n')) {
      if (l[1] != '\t' || l[2] == '.') continue;
      n++;
      if (!strncmp(l + 2, "vfmadd", 6)) fma++;
      if (!strncmp(l + 2, "orq\t$", 5)) orc = true;
      if (l[2] == 'j') { /* a jump back to the label closes the loop */
        const char *eol = strchr(l + 1, '\n'), *t = strstr(l, name);
        back = t && (!eol || t < eol) && t[len] == '\n';
      }
    }
    if (back && fma) {
      if ((double)n / fma > worst) worst = (double)n / fma;
      *or_const = *or_const || orc;
    }
    p = end;
  }
  return worst;
}

static void test_constant_offsets(void **state) {
  (void)state;
  ts_func *f = NULL;
  ts_target *t = NULL;
  ts_error err;
  if (ts_func_parse(winograd_product, strlen(winograd_product), "wp", &f,
                    &err) ||
      ts_target_parse("llvm -mcpu=skylake-avx512 -num-cores=2", &t, &err))
    fail_msg("%s", err.msg);
  ts_sched *s = NULL;
  if (ts_default_schedule(f, t, &s, &err)) fail_msg("%s", err.msg);
  ts_build_options o = ts_build_defaults();
  o.keep_asm = true;
  ts_build_result br = {0};
  if (ts_build(ts_sched_func(s), t, &o, &br, &err)) fail_msg("%s", err.msg);
  bool or_const = false;
  double cost = fma_loop_cost(br.assembly, &or_const);
  if (cost <= 0 || cost > 1.5 || or_const)
    fail_msg("inner loop: %.2f instructions per FMA%s", cost,
             or_const ? ", an or of a constant" : "");
  ts_build_result_clear(&br);
  ts_sched_destroy(s);
  ts_target_free(t);
  t = host();
  free(check_default(f, t, "constant offsets"));
  ts_target_free(t);
  ts_func_free(f);
}

/* A GEMM whose operand types a dot intrinsic of the target computes (int8
 * with AVX512-VNNI, or else with AVX2's multiply-add pairs; bf16 with
 * AVX512-BF16; a signed int8 A made unsigned by shift_int8 first on
 * VNNI) is tensorized onto it, the most lanes and then the longest
 * K tile that divides K first (the shortest for AVX2's pairs, which
 * widen B per step), with a register tile of calls (on AVX-512
 * 8 rows x 2 column tiles, or 6 x 4 where each core still gets a column
 * panel, the rows left partitioned off) and B packed per column panel;
 * a target without the feature keeps the plain register tile. Scheduled
 * for fixed targets; every case checked against the interpreter on the
 * host (tensorized where the host has the feature). */
static void test_tensorized(void **state) {
  (void)state;
  static const struct {
    const char *spec; /* NULL: tu_u8s8_matmul */
    const char *intrin, *factors;
    const char *avx2; /* the intrinsic on AVX2, NULL: none */
  } cases[] = {
      {"matmul M=64 N=64 K=64 dtype=int8", "avx512_vnni_16x16",
       "factors=[None, 8]", "avx2_madd_s8_8x2"},
      /* 8 column tiles: 4 per panel, 6 rows (64 = 10 x 6 + 4, the 4
       * partitioned) */
      {"matmul M=64 N=128 K=64 dtype=int8", "avx512_vnni_16x16",
       "factors=[None, 6]", "avx2_madd_s8_8x2"},
      /* K 20: the K = 4 form; 3 column tiles: one per
       * register tile; 12 rows: 6 */
      {"matmul M=12 N=48 K=20 dtype=int8", "avx512_vnni_16x4",
       "factors=[None, 6]", "avx2_madd_s8_8x2"},
      {"batch_matmul B=2 M=16 N=32 K=32 dtype=int8", "avx512_vnni_16x16",
       "factors=[None, 8]", "avx2_madd_s8_8x2"},
      /* a conv: its kernel taps are reduce loops around the K tiles, its
       * output rows inside the column panels (the weights packed once per
       * panel, not once per row) */
      {"conv2d_nhwc N=1 H=6 W=6 CI=16 CO=32 KH=3 KW=3 pad=1 dtype=int8",
       "avx512_vnni_16x16", "shift_int8(", "avx2_madd_s8_8x2"},
      /* the bias added per column panel */
      {"dense M=16 N=64 K=64 dtype=int8", "avx512_vnni_16x16",
       "reverse_compute_at(", "avx2_madd_s8_8x2"},
      /* one column panel of 32: serial */
      {NULL, "avx512_vnni_16x16", "factors=[None, 8]", "avx2_madd_u8_8x2"},
      {"matmul M=32 N=64 K=32 dtype=bfloat16", "avx512_bf16_16x2",
       "factors=[None, 8]", NULL},
      /* columns and K no VNNI tile divides (40 = 32 + 8, 68 = 64 + 4):
       * partitioned off, the 8 columns left on the 8-lane VNNI dot;
       * AVX2's 8 x 2 pairs divide both */
      {"matmul M=12 N=40 K=68 dtype=int8", "avx512_vnni_16x16", "partition(",
       "avx2_madd_s8_8x2"},
      {"matmul M=16 N=40 K=34 dtype=bfloat16", "avx512_bf16_16x2", "partition(",
       NULL},
  };
  ts_target *vnni = NULL, *avx2 = NULL;
  ts_error err;
  if (ts_target_parse("llvm -mcpu=cooperlake -num-cores=2", &vnni, &err) ||
      ts_target_parse("llvm -mcpu=haswell -num-cores=2", &avx2, &err))
    fail_msg("%s", err.msg);
  ts_target *t = host();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *what = cases[i].spec ? cases[i].spec : "u8s8 matmul";
    ts_workload *w = NULL;
    ts_func *f = NULL;
    if (cases[i].spec) {
      w = workload(cases[i].spec);
    } else if (ts_func_parse(tu_u8s8_matmul, strlen(tu_u8s8_matmul), "u8s8", &f,
                             &err)) {
      fail_msg("%s", err.msg);
    }
    const ts_func *fn = w ? w->func : f;
    for (int k = 0; k < 2; k++) {
      ts_sched *s = NULL;
      if (ts_default_schedule(fn, k ? avx2 : vnni, &s, &err))
        fail_msg("%s: %s", what, err.msg);
      char *trace = ts_trace_print(ts_sched_trace(s));
      bool tensorized = strstr(trace, "tensorize(") != NULL;
      if (k && tensorized != (cases[i].avx2 != NULL))
        fail_msg("%s: %s on AVX2:\n%s", what,
                 tensorized ? "tensorized" : "not tensorized", trace);
      if (k && cases[i].avx2 &&
          (!strstr(trace, cases[i].avx2) || !strstr(trace, "unroll") ||
           !strstr(trace, "\ncompute_at(")))
        fail_msg("%s: no %s tensorized, unrolled, B packed per panel on "
                 "AVX2 in\n%s",
                 what, cases[i].avx2, trace);
      /* signed int8 A made unsigned on VNNI (vpdpbusd's form), kept on
       * AVX2 (whose pairs are exact for either sign) */
      bool s8 = cases[i].spec && strstr(cases[i].spec, "dtype=int8");
      if ((strstr(trace, "shift_int8(") != NULL) != (s8 && !k))
        fail_msg("%s: shift_int8 %s on %s in\n%s", what,
                 s8 && !k ? "missing" : "applied", k ? "AVX2" : "VNNI", trace);
      if (!k && (!strstr(trace, cases[i].intrin) ||
                 !strstr(trace, cases[i].factors) || !strstr(trace, "unroll") ||
                 !strstr(trace, "\ncompute_at(") ||
                 (cases[i].spec && !strstr(trace, "parallel"))))
        fail_msg("%s: no %s tensorized with %s, unrolled, B packed per "
                 "panel, parallel in\n%s",
                 what, cases[i].intrin, cases[i].factors, trace);
      if (!k && cases[i].spec && strstr(cases[i].spec, "N=40 K=68") &&
          strstr(cases[i].spec, "int8") && !strstr(trace, "avx512_vnni_8x"))
        fail_msg("%s: the 8 columns left are not on the 8-lane VNNI dot "
                 "in\n%s",
                 what, trace);
      /* a dense layer's W ([N, K], contiguous along K) packed a group of
       * 4 k at a time: one 4-byte vector per column, not 4 scattered
       * bytes (tile_group_copy) */
      if (!k && cases[i].spec && !strncmp(cases[i].spec, "dense", 5)) {
        char *text = ts_func_print(ts_sched_func(s));
        char *pack = strstr(text, "block W_global");
        char *line = pack;
        while (line && line > text && line[-1] != '\n') line--;
        char *prev = line && line > text + 1 ? line - 2 : NULL;
        while (prev && prev > text && prev[-1] != '\n') prev--;
        if (prev) line[-1] = 0; /* the loop's line alone */
        if (!prev || !strstr(prev, "in range(4) vectorized"))
          fail_msg("%s: W not packed 4 k at a time (%s)", what,
                   prev ? prev : "no pack");
        free(text);
      }
      /* a conv's weights packed in the panel loop, before its row loop */
      if (!k && cases[i].spec && strstr(cases[i].spec, "conv2d")) {
        char *text = ts_func_print(ts_sched_func(s));
        const char *pack = strstr(text, "block weight_global(");
        const char *rows = strstr(text, "for h in range(6)"); /* not pad's 8 */
        if (!pack || !rows || pack > rows)
          fail_msg("%s: the weights are not packed before the row loop:\n%s",
                   what, text);
        free(text);
      }
      free(trace);
      ts_sched_destroy(s);
    }
    /* on the host: as the interpreter computes it, also on 2 threads */
    ts_sched *s = NULL, *s2 = NULL;
    if (ts_default_schedule(fn, t, &s, &err) ||
        ts_default_schedule(fn, t, &s2, &err))
      fail_msg("%s: %s", what, err.msg);
    if (!ts_hash128_eq(ts_func_hash(ts_sched_func(s)),
                       ts_func_hash(ts_sched_func(s2))))
      fail_msg("%s: two default schedules differ", what);
    ts_rt_args *want = tu_reference(fn, 7);
    assert_non_null(want);
    for (int threads = 1; threads <= 2; threads++) {
      ts_runtime *rt = NULL;
      if (ts_runtime_create(threads, &rt, &err)) fail_msg("%s", err.msg);
      if (tu_check(ts_sched_func(s), t, want, 7, rt))
        fail_msg("%s: wrong result on %d threads", what, threads);
      ts_runtime_destroy(rt);
    }
    ts_rt_args_free(want);
    ts_sched_destroy(s);
    ts_sched_destroy(s2);
    ts_workload_free(w);
    ts_func_free(f);
  }
  ts_target_free(t);
  ts_target_free(vnni);
  ts_target_free(avx2);
}

/* Every task of the small zoo models (generated by the graph tests'
 * fixture; skipped when they are absent). */
static void test_zoo_tasks(void **state) {
  (void)state;
  static const char *const models[] = {"resnet50_small", "mobilenet_v2_small",
                                       "csrnet_small", "bert_small",
                                       "ops_small"};
  static const char *const bert_shapes[] = {"input_ids=1x16",
                                            "attention_mask=1x16"};
  char path[512];
  snprintf(path, sizeof path, "%s/graph_models/%s.onnx", TS_BINARY_DIR,
           models[0]);
  FILE *probe = fopen(path, "rb");
  if (!probe) skip();
  fclose(probe);
  ts_target *t = host();
  int checked = 0;
  for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
    snprintf(path, sizeof path, "%s/graph_models/%s.onnx", TS_BINARY_DIR,
             models[m]);
    ts_graph_import_options o = {0};
    if (!strcmp(models[m], "bert_small")) {
      o.input_shapes = bert_shapes;
      o.n_input_shapes = 2;
    }
    ts_graph *g;
    ts_error err;
    if (ts_graph_import_onnx(path, &o, &g, &err) ||
        ts_graph_run_passes(g, NULL, &err))
      fail_msg("%s: %s", models[m], err.msg);
    ts_graph_task *tasks;
    int n;
    if (ts_graph_tasks(g, &tasks, &n, &err)) fail_msg("%s", err.msg);
    for (int i = 0; i < n; i++) {
      char what[256];
      snprintf(what, sizeof what, "%s: task %s", models[m],
               tasks[i].first_node);
      free(check_default(tasks[i].func, t, what));
      checked++;
    }
    free(tasks);
    ts_graph_free(g);
  }
  assert_true(checked > 20);
  ts_target_free(t);
}

static void test_bad_arguments(void **state) {
  (void)state;
  ts_target *t = host();
  ts_sched *s = (ts_sched *)1;
  ts_error err;
  assert_int_equal(ts_default_schedule(NULL, t, &s, &err), TS_EINVAL);
  assert_null(s);
  assert_int_equal(ts_default_schedule(NULL, t, NULL, &err), TS_EINVAL);
  ts_target_free(t);
}

/* ---- timing (TS_DEFAULT_BENCH=1) ---- */

static double time_func(const ts_func *f, const ts_target *t, ts_runtime *rt) {
  ts_build_result br;
  ts_error err;
  if (ts_build(f, t, NULL, &br, &err)) fail_msg("build: %s", err.msg);
  ts_rt_kernel *k;
  if (ts_rt_kernel_load(br.artifact->bytes, br.artifact->n_bytes,
                        br.artifact->entry, &k, &err))
    fail_msg("load: %s", err.msg);
  ts_rt_arg_spec *specs = check_specs(br.artifact);
  ts_rt_args *args;
  if (ts_rt_args_create(specs, br.artifact->n_args, 1, &args, &err))
    fail_msg("args: %s", err.msg);
  ts_eval_config cfg = ts_eval_config_default();
  cfg.repeat = 7;
  cfg.min_repeat_ms = 30;
  cfg.warmup = 1;
  double secs[7];
  int number;
  if (ts_rt_eval_kernel(rt, &cfg, k, ts_rt_args_data(args), secs, &number,
                        &err))
    fail_msg("eval: %s", err.msg);
  for (int i = 1; i < 7; i++) /* the median of the repeats */
    for (int j = i; j > 0 && secs[j] < secs[j - 1]; j--) {
      double x = secs[j];
      secs[j] = secs[j - 1];
      secs[j - 1] = x;
    }
  double sec = secs[3];
  ts_rt_args_free(args);
  free(specs);
  ts_rt_kernel_unload(k);
  ts_build_result_clear(&br);
  return sec;
}

static void test_bench(void **state) {
  (void)state;
  const char *on = getenv("TS_DEFAULT_BENCH");
  if (!on || !*on) skip();
  static const char *const specs[] = {
      "matmul M=512 N=512 K=512",
      "matmul M=128 N=3072 K=768",
      "matmul M=128 N=768 K=3072",
      "dense M=128 N=768 K=768",
      "dense M=128 N=3072 K=768",
      "batch_matmul B=12 M=128 N=128 K=64",
      "conv2d_nchw N=1 H=56 W=56 CI=64 CO=64 KH=3 KW=3 pad=1",
      "conv2d_nchw N=1 H=28 W=28 CI=128 CO=128 KH=3 KW=3 pad=1",
      "conv2d_nchw N=1 H=14 W=14 CI=256 CO=256 KH=3 KW=3 pad=1",
      "conv2d_nchw N=1 H=7 W=7 CI=512 CO=512 KH=3 KW=3 pad=1",
      "conv2d_nchw N=1 H=56 W=56 CI=64 CO=256 KH=1 KW=1",
      "conv2d_nhwc N=1 H=56 W=56 CI=64 CO=64 KH=3 KW=3 pad=1",
      "softmax N=1536 D=128",
      "layer_norm N=128 D=768",
      "elementwise op=gelu shape=128x3072",
      "pool2d_nhwc N=1 H=112 W=112 C=64 KH=3 KW=3 stride=2 pad=1 kind=max",
  };
  ts_target *t = host();
  ts_runtime *rt;
  ts_error err;
  const char *th = getenv("TS_DEFAULT_BENCH_THREADS");
  const char *only = getenv("TS_DEFAULT_BENCH_ONLY"); /* a substring */
  int threads = th ? atoi(th) : 2;
  if (ts_runtime_create(threads, &rt, &err)) fail_msg("%s", err.msg);
  printf("%-62s %11s %11s %11s %8s %8s\n", "workload", "unsched ms",
         "default ms", "onednn ms", "speedup", "/onednn");
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
    if (only && !strstr(specs[i], only)) continue;
    ts_workload *w = workload(specs[i]);
    ts_sched *s;
    if (ts_default_schedule(w->func, t, &s, &err)) fail_msg("%s", err.msg);
    const char *show = getenv("TS_DEFAULT_SHOW");
    if (show && strstr(specs[i], show)) {
      char *text = ts_func_print(ts_sched_func(s));
      printf("%s\n", text);
      free(text);
    }
    double d = time_func(ts_sched_func(s), t, rt);
    double u =
        getenv("TS_DEFAULT_BENCH_NO_UNSCHED") ? 0 : time_func(w->func, t, rt);
    ts_bench_options bo = ts_bench_options_default();
    bo.threads = threads;
    bo.keep_output = false;
    ts_bench_result br;
    double v = 0;
    if (!ts_bench_run(TS_BENCH_ONEDNN, w, &bo, &br, &err)) {
      v = br.seconds;
      ts_bench_result_free(&br);
    }
    printf("%-62s %11.3f %11.3f %11.3f %8.1f %8.2f\n", specs[i], u * 1e3,
           d * 1e3, v * 1e3, u > 0 ? u / d : 0, v > 0 ? d / v : 0);
    fflush(stdout);
    ts_sched_destroy(s);
    ts_workload_free(w);
  }
  ts_runtime_destroy(rt);
  ts_target_free(t);
}

/* TS_DEFAULT_ZOO=DIR: every task of the full models of DIR (resnet50,
 * mobilenet_v2, bert at 1x128) default-scheduled, built and timed; prints
 * the sum over the calls of the graph (the model's kernel time). */
static void test_zoo_full(void **state) {
  (void)state;
  const char *dir = getenv("TS_DEFAULT_ZOO");
  if (!dir || !*dir) skip();
  static const char *const models[] = {"resnet50", "mobilenet_v2", "bert"};
  static const char *const shapes[] = {"input_ids=1x128",
                                       "attention_mask=1x128"};
  ts_target *t = host();
  ts_runtime *rt;
  ts_error err;
  if (ts_runtime_create(2, &rt, &err)) fail_msg("%s", err.msg);
  for (int m = 0; m < 3; m++) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.onnx", dir, models[m]);
    ts_graph_import_options o = {0};
    if (m == 2) {
      o.input_shapes = shapes;
      o.n_input_shapes = 2;
    }
    ts_graph *g;
    if (ts_graph_import_onnx(path, &o, &g, &err) ||
        ts_graph_run_passes(g, NULL, &err))
      fail_msg("%s: %s", path, err.msg);
    ts_graph_task *tasks;
    int n;
    if (ts_graph_tasks(g, &tasks, &n, &err)) fail_msg("%s", err.msg);
    double total = 0;
    for (int i = 0; i < n; i++) {
      ts_sched *s;
      if (ts_default_schedule(tasks[i].func, t, &s, &err))
        fail_msg("%s: %s", tasks[i].first_node, err.msg);
      const char *show = getenv("TS_DEFAULT_SHOW");
      if (show && !strcmp(show, tasks[i].first_node)) {
        char *text = ts_func_print(ts_sched_func(s));
        printf("%s\n", text);
        free(text);
      }
      double sec = time_func(ts_sched_func(s), t, rt);
      total += sec * tasks[i].count;
      printf("  %-40s x%-3d %9.3f ms %8.1f GFLOP/s\n", tasks[i].first_node,
             tasks[i].count, sec * 1e3, tasks[i].flops / sec / 1e9);
      fflush(stdout);
      ts_sched_destroy(s);
    }
    printf("%s: %d tasks, kernels %.2f ms per run (2 threads)\n", models[m], n,
           total * 1e3);
    free(tasks);
    ts_graph_free(g);
  }
  ts_runtime_destroy(rt);
  ts_target_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_arguments),
      cmocka_unit_test(test_operators),
      cmocka_unit_test(test_shapes),
      cmocka_unit_test(test_reduction_unrolled),
      cmocka_unit_test(test_register_budget),
      cmocka_unit_test(test_row_operators_any_rank),
      cmocka_unit_test(test_column_reductions),
      cmocka_unit_test(test_odd_vector_tiles),
      cmocka_unit_test(test_pack_once),
      cmocka_unit_test(test_stem_pads_once),
      cmocka_unit_test(test_pads_inline),
      cmocka_unit_test(test_elementwise_vectors),
      cmocka_unit_test(test_ragged_tiles),
      cmocka_unit_test(test_short_rows),
      cmocka_unit_test(test_short_product_rows),
      cmocka_unit_test(test_tensorized),
      cmocka_unit_test(test_tensorized_blocked),
      cmocka_unit_test(test_constant_offsets),
      cmocka_unit_test(test_zoo_tasks),
      cmocka_unit_test(test_bench),
      cmocka_unit_test(test_zoo_full),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
