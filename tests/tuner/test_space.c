/*
 * test_space.c — design spaces: the CPU rules give the expected spaces for
 * matmul (tiling with no / level-1 / level-2 cache write), conv2d (padding
 * left as a producer with a sampled compute location), softmax (inlining,
 * compute locations), and every sampled candidate of every space compiles
 * and computes what the reference interpreter computes. Tensorization
 * variants appear exactly when the target has the feature and a block
 * matches (bf16 matmul -> AVX512-BF16 here and AMX on an AMX target, a
 * uint8 x int8 matmul -> VNNI) and never for a block without a match (fp32
 * matmul, even on an AMX target); tensorized candidates compute the right
 * result. Custom rules replace the default rules of their block. A 1x1
 * convolution's unit kernel loops leave its spatial tiles parallel. A conv
 * whose output columns cannot fill a register tile gets pixel variants. A
 * depthwise conv also gets spaces with its padding inlined. Every
 * registered target family names a rule list the tuner has.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "util.h"

#define OK(x) assert_int_equal((x), TS_OK)
#define AMX_TARGET                                                             \
  "llvm -mcpu=sapphirerapids -mattr=+amx-bf16,+amx-int8,+amx-tile "            \
  "-num-cores=2"

static ts_target *host(void) {
  ts_target *t = NULL;
  ts_error err;
  OK(ts_target_host(&t, &err));
  return t;
}

static bool has_space(const ts_design_space *s, int n, const char *intrin) {
  for (int i = 0; i < n; i++)
    if (!strcmp(s[i].intrin, intrin)) return true;
  return false;
}

static bool any_intrin(const ts_design_space *s, int n) {
  for (int i = 0; i < n; i++)
    if (s[i].intrin[0]) return true;
  return false;
}

/* Asserts that no design space of the workload `spec` on t has `part` in
 * its name. */
static void assert_no_space_named(const char *spec, const ts_target *t,
                                  const char *part) {
  ts_workload *w = tu_workload(spec);
  ts_design_space *s = NULL;
  int n = 0;
  ts_error err;
  OK(ts_space_generate(w->func, t, NULL, &s, &n, &err));
  assert_true(n >= 1);
  for (int i = 0; i < n; i++) assert_null(strstr(s[i].name, part));
  ts_design_spaces_free(s, n);
  ts_workload_free(w);
}

/* Samples `per_space` candidates of every space of f on t and checks them
 * (compiled and run, or only compiled when run is false). */
static void check_samples(const ts_func *f, const ts_target *t,
                          const ts_design_space *s, int n, int per_space,
                          bool run) {
  ts_runtime *rt = NULL;
  ts_error err;
  OK(ts_runtime_create(2, &rt, &err));
  ts_rt_args *want = run ? tu_reference(f, 3) : NULL;
  if (run) assert_non_null(want);
  for (int i = 0; i < n; i++)
    for (int k = 0; k < per_space; k++) {
      ts_candidate c;
      int rc = ts_candidate_sample(&s[i], i, f, t, 100 + (uint64_t)k, &c, &err);
      if (rc) printf("space %d (%s) sample %d: %s\n", i, s[i].name, k, err.msg);
      OK(rc);
      assert_int_equal(c.space, i);
      /* no tuner annotation survives postprocessing */
      char *text = ts_func_print(ts_sched_func(c.sched));
      assert_null(strstr(text, "tuner."));
      free(text);
      if (run) {
        OK(tu_check(ts_sched_func(c.sched), t, want, 3, rt));
      } else {
        ts_build_result br;
        rc = ts_build(ts_sched_func(c.sched), t, NULL, &br, &err);
        if (rc) printf("build: %s\n", err.msg);
        OK(rc);
        ts_build_result_clear(&br);
      }
      ts_candidate_clear(&c);
    }
  ts_rt_args_free(want);
  ts_runtime_destroy(rt);
}

static void test_matmul_spaces(void **state) {
  (void)state;
  ts_workload *w = tu_workload("matmul M=32 N=48 K=64");
  ts_target *t = host();
  ts_design_space *s = NULL;
  int n = 0;
  ts_error err;
  OK(ts_space_generate(w->func, t, NULL, &s, &n, &err));
  /* tiling with no / level-1 / level-2 cache write, each with no / a
   * level-1 / a level-2 read cache of B */
  assert_int_equal(n, 9);
  for (int i = 0; i < n; i++) {
    assert_non_null(strstr(s[i].name, "C: mlt"));
    assert_int_equal(strstr(s[i].name, "cache_write@1") != NULL, i % 3 == 1);
    assert_int_equal(strstr(s[i].name, "cache_write@2") != NULL, i % 3 == 2);
    assert_int_equal(strstr(s[i].name, "cache_read@1") != NULL, i / 3 == 1);
    assert_int_equal(strstr(s[i].name, "cache_read@2") != NULL, i / 3 == 2);
  }
  assert_false(any_intrin(s, n));
  /* every space samples tile sizes and the unroll / parallel plans */
  for (int i = 0; i < n; i++) {
    int tiles = 0, cats = 0;
    for (int k = 0; k < ts_trace_n_insts(s[i].trace); k++) {
      ts_instr_kind ik = ts_trace_inst_kind(s[i].trace, k);
      /* spatial loops: sample_tile (perfect or not), reduce: perfect */
      tiles += ik == TS_INSTR_SAMPLE_PERFECT_TILE || ik == TS_INSTR_SAMPLE_TILE;
      cats += ik == TS_INSTR_SAMPLE_CATEGORICAL;
    }
    assert_int_equal(tiles, 3);
    assert_int_equal(cats, 2);
  }
  check_samples(w->func, t, s, n, 4, true);
  /* the same seed gives the same candidate */
  ts_candidate a, b;
  OK(ts_candidate_sample(&s[1], 1, w->func, t, 77, &a, &err));
  OK(ts_candidate_sample(&s[1], 1, w->func, t, 77, &b, &err));
  assert_true(ts_hash128_eq(a.hash, b.hash));
  ts_candidate_clear(&a);
  ts_candidate_clear(&b);
  /* without cache variants: one space */
  ts_design_spaces_free(s, n);
  ts_space_options o = ts_space_defaults();
  o.cache_write = false;
  o.cache_read = false;
  OK(ts_space_generate(w->func, t, &o, &s, &n, &err));
  assert_int_equal(n, 1);
  ts_design_spaces_free(s, n);
  ts_target_free(t);
  ts_workload_free(w);
}

/* A narrow width that no vector divides (61 columns; 13 output channels):
 * besides the nine spaces, padded ones, whose designs pad the width to
 * whole vectors (pad_einsum) before tiling; their samples match the
 * reference. Not for a width the vectors divide (above: 48). */
static void test_padded_spaces(void **state) {
  (void)state;
  static const char *const specs[] = {
      "matmul M=40 N=61 K=24",
      "conv2d_nhwc N=1 H=6 W=6 CI=8 CO=13 KH=3 KW=3 pad=1"};
  ts_target *t = host();
  for (int w_i = 0; w_i < 2; w_i++) {
    ts_workload *w = tu_workload(specs[w_i]);
    ts_design_space *s = NULL;
    int n = 0, padded = 0;
    ts_error err;
    OK(ts_space_generate(w->func, t, NULL, &s, &n, &err));
    for (int i = 0; i < n; i++) {
      bool named = strstr(s[i].name, "padded") != NULL, pads = false;
      for (int k = 0; k < ts_trace_n_insts(s[i].trace); k++)
        pads |= ts_trace_inst_kind(s[i].trace, k) == TS_INSTR_PAD_EINSUM;
      assert_int_equal(named, pads);
      padded += pads;
    }
    printf("%s: %d of %d spaces padded\n", specs[w_i], padded, n);
    assert_true(padded > 0);
    if (w_i == 0) assert_int_equal(n - padded, 9);
    check_samples(w->func, t, s, n, 2, true);
    ts_design_spaces_free(s, n);
    ts_workload_free(w);
  }
  ts_target_free(t);
}

/* The read cache of B is allocated per iteration of the loops around the
 * place it is computed at (inside the parallel loop: never one copy shared
 * and refilled by all the parallel iterations) and compacted to the panel
 * used there, so some samples allocate less than all of B. */
static void test_read_cache_compacted(void **state) {
  (void)state;
  ts_workload *w = tu_workload("matmul M=256 N=256 K=256");
  ts_target *t = host();
  ts_design_space *s = NULL;
  int n = 0, checked = 0, smaller = 0;
  ts_error err;
  OK(ts_space_generate(w->func, t, NULL, &s, &n, &err));
  /* the lowering alone (what the build runs before LLVM) */
  ts_lower_options lo = ts_lower_defaults();
  for (int i = 0; i < n; i++) {
    if (!strstr(s[i].name, "cache_read")) continue;
    for (int k = 0; k < 8; k++) {
      ts_candidate c;
      OK(ts_candidate_sample(&s[i], i, w->func, t, 500 + (uint64_t)k, &c,
                             &err));
      ts_func *lowered = ts_lower(ts_sched_func(c.sched), &lo, &err);
      assert_non_null(lowered);
      char *text = ts_func_print(lowered);
      const char *at = strstr(text, "allocate B_global: float32[");
      assert_non_null(at);
      long elems = strtol(at + strlen("allocate B_global: float32["), NULL, 10);
      const char *par = strstr(text, " parallel");
      if (par && at < par)
        printf("%s: a cache shared by the parallel loop:\n%s\n", s[i].name,
               text);
      assert_true(!par || at > par);
      smaller += elems < 256 * 256;
      checked++;
      free(text);
      ts_func_free(lowered);
      ts_candidate_clear(&c);
    }
  }
  assert_int_equal(checked, 6 * 8);
  print_message("%d of %d read caches smaller than B\n", smaller, checked);
  assert_true(smaller >= checked / 2);
  ts_design_spaces_free(s, n);
  ts_target_free(t);
  ts_workload_free(w);
}

static void test_other_workloads(void **state) {
  (void)state;
  static const char *const specs[] = {
      "conv2d_nhwc N=1 H=8 W=8 CI=8 CO=16 KH=3 KW=3 pad=1",
      "conv2d_nhwc N=1 H=7 W=7 CI=8 CO=32 KH=3 KW=3 pad=1 weight_block=16",
      "softmax N=8 D=64",
      "dense M=16 N=24 K=32",
      "batch_matmul B=2 M=8 N=16 K=8",
      "layer_norm N=4 D=32",
      "elementwise op=relu shape=16x64",
  };
  ts_target *t = host();
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
    ts_workload *w = tu_workload(specs[i]);
    assert_non_null(w);
    ts_design_space *s = NULL;
    int n = 0;
    ts_error err;
    int rc = ts_space_generate(w->func, t, NULL, &s, &n, &err);
    if (rc) printf("%s: %s\n", specs[i], err.msg);
    OK(rc);
    assert_true(n >= 1);
    check_samples(w->func, t, s, n, 2, true);
    ts_design_spaces_free(s, n);
    ts_workload_free(w);
  }
  ts_target_free(t);
}

/* A row no vector of 8 or more divides (131, a prime) is still
 * vectorized: split past its end by 16, the last vector guarded (lowering
 * partitions the guard off). Every sample of every space computes the
 * interpreter's result, and the samples of the materialized-exp states
 * vectorize the exp block's row. */
static void test_odd_rows_vectorized(void **state) {
  (void)state;
  static const char *const specs[] = {"softmax N=6 D=131",
                                      "elementwise op=relu shape=5x131"};
  static const char *const leaf[] = {"exp", "Y"};
  ts_target *t = host();
  for (int w_i = 0; w_i < 2; w_i++) {
    ts_workload *w = tu_workload(specs[w_i]);
    ts_design_space *s = NULL;
    int n = 0, vectorized = 0, seen = 0;
    ts_error err;
    OK(ts_space_generate(w->func, t, NULL, &s, &n, &err));
    for (int i = 0; i < n; i++)
      for (int k = 0; k < 3; k++) {
        ts_candidate c;
        OK(ts_candidate_sample(&s[i], i, w->func, t, 40 + (uint64_t)k, &c,
                               &err));
        const ts_func *f = ts_sched_func(c.sched);
        char name[64];
        snprintf(name, sizeof name, "block %s(", leaf[w_i]);
        char *text = ts_func_print(f);
        const char *blk = strstr(text, name);
        if (blk) {
          seen++;
          /* the loop right around the block: a 16-wide vectorized one */
          const char *p = blk, *loop = NULL;
          while (p > text && !loop) {
            p--;
            if (!strncmp(p, "for ", 4)) loop = p;
          }
          vectorized += loop && strstr(loop, " vectorized") &&
                        strstr(loop, " vectorized") < blk &&
                        strstr(loop, "range(16)") &&
                        strstr(loop, "range(16)") < blk;
        }
        free(text);
        ts_candidate_clear(&c);
      }
    print_message("%s: %d of %d samples vectorize the %s row by 16\n",
                  specs[w_i], vectorized, seen, leaf[w_i]);
    assert_true(seen > 0);
    assert_true(vectorized > 0);
    check_samples(w->func, t, s, n, 2, true);
    ts_design_spaces_free(s, n);
    ts_workload_free(w);
  }
  ts_target_free(t);
}

/* Row reductions that already feed every core get a variant with the
 * reduction factored by the vector length (the partial maxima computed a
 * vector at a time); its samples compute the right result and the factored
 * block's loop over the lanes is vectorized. */
static void test_rfactor_vector(void **state) {
  (void)state;
  ts_workload *w = tu_workload("softmax N=64 D=256");
  ts_target *t = host();
  ts_design_space *s = NULL;
  int n = 0;
  ts_error err;
  OK(ts_space_generate(w->func, t, NULL, &s, &n, &err));
  int vec = 0;
  for (int i = 0; i < n; i++) {
    if (!strstr(s[i].name, "rfactor_vector")) continue;
    vec++;
    ts_candidate c;
    OK(ts_candidate_sample(&s[i], i, w->func, t, 5, &c, &err));
    char *text = ts_func_print(ts_sched_func(c.sched));
    /* some vectorized loop directly holds a factored (not init) block */
    bool lanes = false;
    for (const char *p = strstr(text, "vectorized {"); p && !lanes;
         p = strstr(p + 1, "vectorized {")) {
      const char *blk = strstr(p, "block ");
      const char *paren = blk ? strchr(blk, '(') : NULL;
      lanes = paren && paren - blk > 9 && !strncmp(paren - 3, "_rf", 3);
    }
    assert_true(lanes);
    free(text);
    ts_candidate_clear(&c);
  }
  assert_true(vec >= 2); /* the row maximum's and the row sum's */
  check_samples(w->func, t, s, n, 1, true);
  ts_design_spaces_free(s, n);
  ts_workload_free(w);
  /* a matmul (reuse) never gets it */
  assert_no_space_named("matmul M=128 N=128 K=256", t, "rfactor_vector");
  ts_target_free(t);
}

/* Layer norm's sum and sum of squares in one pass over the row: a space
 * factors both four vectors at a time and fuses their nests at the row
 * loop, so every sample has both partial sums in one vectorized loop, and
 * computes what the unscheduled function does. */
static void test_one_pass_rows(void **state) {
  (void)state;
  ts_workload *w = tu_workload("layer_norm N=64 D=256");
  ts_target *t = host();
  ts_design_space *s = NULL;
  int n = 0, one_pass = 0;
  ts_error err;
  OK(ts_space_generate(w->func, t, NULL, &s, &n, &err));
  for (int i = 0; i < n; i++) {
    if (!strstr(s[i].name, "x_sum+sq_sum: one pass")) continue;
    one_pass++;
    char *script = ts_trace_print(s[i].trace);
    assert_non_null(strstr(script, "fuse_siblings("));
    free(script);
    for (uint64_t seed = 1; seed <= 4; seed++) {
      ts_candidate c;
      OK(ts_candidate_sample(&s[i], i, w->func, t, seed, &c, &err));
      const ts_func *f = ts_sched_func(c.sched);
      const ts_stmt *l = tu_inner_loop(f, "x_sum_rf");
      assert_non_null(l);
      assert_ptr_equal(l, tu_inner_loop(f, "sq_sum_rf"));
      assert_int_equal(ts_for_kind_of(l), TS_FOR_VECTORIZED);
      ts_candidate_clear(&c);
    }
  }
  assert_int_equal(one_pass, 1);
  check_samples(w->func, t, s, n, 2, true);
  ts_design_spaces_free(s, n);
  ts_workload_free(w);
  ts_target_free(t);
}

static bool nt_loop(void *ctx, ts_stmt *st) {
  if (ts_stmt_kind_of(st) == TS_STMT_FOR &&
      ts_for_find_annotation(st, TS_ANN_NONTEMPORAL))
    *(int *)ctx += 1;
  return true;
}

/* Loops of f annotated for non-temporal stores. */
static int nt_loops(const ts_func *f) {
  int n = 0;
  ts_visitor v = {nt_loop, NULL, NULL, &n};
  ts_stmt_walk(ts_func_body(f), &v);
  return n;
}

/* Outputs of 4 MiB or more get the decision of non-temporal stores (a
 * layer_norm's rows: some samples have the annotated loop, some not, and
 * a sample with it computes layer_norm); smaller outputs never do, nor a
 * nest whose output is a reduction's accumulator (a matmul's C updated
 * along k). */
static void test_stream_decision(void **state) {
  (void)state;
  ts_target *t = host();
  ts_error err;
  ts_design_space *s = NULL;
  int n = 0;
  ts_workload *small = tu_workload("layer_norm N=64 D=256");
  OK(ts_space_generate(small->func, t, NULL, &s, &n, &err));
  for (int i = 0; i < n; i++) {
    char *script = ts_trace_print(s[i].trace);
    assert_null(strstr(script, "tuner.stream"));
    free(script);
  }
  ts_design_spaces_free(s, n);
  ts_workload_free(small);

  ts_workload *w = tu_workload("layer_norm N=1024 D=1024");
  OK(ts_space_generate(w->func, t, NULL, &s, &n, &err));
  int with = 0, without = 0;
  ts_candidate keep = {0};
  bool kept = false;
  for (int i = 0; i < n; i++) {
    char *script = ts_trace_print(s[i].trace);
    assert_non_null(strstr(script, "tuner.stream"));
    free(script);
    for (uint64_t seed = 1; seed <= 12; seed++) {
      ts_candidate c;
      OK(ts_candidate_sample(&s[i], i, w->func, t, seed, &c, &err));
      if (nt_loops(ts_sched_func(c.sched)) > 0) {
        with++;
        if (!kept) {
          keep = c;
          kept = true;
          continue;
        }
      } else {
        without++;
      }
      ts_candidate_clear(&c);
    }
  }
  assert_true(with > 0);
  assert_true(without > 0);
  ts_runtime *rt = NULL;
  OK(ts_runtime_create(2, &rt, &err));
  ts_rt_args *want = tu_reference(w->func, 3);
  assert_non_null(want);
  OK(tu_check(ts_sched_func(keep.sched), t, want, 3, rt));
  ts_rt_args_free(want);
  ts_runtime_destroy(rt);
  ts_candidate_clear(&keep);
  ts_design_spaces_free(s, n);
  ts_workload_free(w);

  /* a matmul whose C is accumulated in place along k: the decision is
   * there (4 MiB of C), the annotation never */
  ts_workload *mm = tu_workload("matmul M=1024 N=1024 K=64");
  OK(ts_space_generate(mm->func, t, NULL, &s, &n, &err));
  int direct = 0;
  for (int i = 0; i < n; i++) {
    if (strstr(s[i].name, "cache_write")) continue;
    direct++;
    for (uint64_t seed = 1; seed <= 6; seed++) {
      ts_candidate c;
      OK(ts_candidate_sample(&s[i], i, mm->func, t, seed, &c, &err));
      assert_int_equal(nt_loops(ts_sched_func(c.sched)), 0);
      ts_candidate_clear(&c);
    }
  }
  assert_true(direct > 0);
  ts_design_spaces_free(s, n);
  ts_workload_free(mm);
  ts_target_free(t);
}

/* Whether the sampled function of space i (seed 7) still has a block named
 * `name` (it was not inlined). */
static bool sample_has_block(const ts_func *f, const ts_target *t,
                             const ts_design_space *s, int i,
                             const char *name) {
  ts_candidate c;
  ts_error err;
  OK(ts_candidate_sample(&s[i], i, f, t, 7, &c, &err));
  bool has = ts_func_find_block(ts_sched_func(c.sched), name) != NULL;
  ts_candidate_clear(&c);
  return has;
}

/* softmax's exp is read by the row sum and by the normalization: inlined,
 * it is computed twice per element. The CPU space keeps it as a stage of
 * its own in some states ("exp: materialized"), inlined in the others, and
 * every sample of both computes softmax. A producer with one consumer
 * (exp summed once), one without an expensive call (layer_norm's stages)
 * and a GPU target never get such a state. */
static void test_materialized_expensive(void **state) {
  (void)state;
  ts_workload *w = tu_workload("softmax N=64 D=256");
  ts_target *t = host();
  ts_design_space *s = NULL;
  int n = 0;
  ts_error err;
  OK(ts_space_generate(w->func, t, NULL, &s, &n, &err));
  int kept = 0, inlined = 0;
  for (int i = 0; i < n; i++) {
    bool m = strstr(s[i].name, "exp: materialized") != NULL;
    assert_int_equal(sample_has_block(w->func, t, s, i, "exp"), m);
    if (m)
      kept++;
    else
      inlined++;
  }
  assert_true(kept >= 1);
  assert_true(inlined >= 1);
  check_samples(w->func, t, s, n, 1, true);
  ts_design_spaces_free(s, n);
  ts_workload_free(w);

  static const char one_consumer[] =
      "func f(X: float32[8, 64], S: float32[8]) {\n"
      "  block root() {\n"
      "    reads(X[0 +: 8, 0 +: 64])\n"
      "    writes(S[0 +: 8])\n"
      "    alloc E: float32[8, 64]\n"
      "    for i in range(8) {\n"
      "      for j in range(64) {\n"
      "        block E(vi: spatial(8) = i, vj: spatial(64) = j) {\n"
      "          reads(X[vi, vj])\n"
      "          writes(E[vi, vj])\n"
      "          E[vi, vj] = exp(X[vi, vj])\n"
      "        }\n"
      "      }\n"
      "    }\n"
      "    for i in range(8) {\n"
      "      for k in range(64) {\n"
      "        block S(vi: spatial(8) = i, vk: reduce(64) = k) {\n"
      "          reads(S[vi], E[vi, vk])\n"
      "          writes(S[vi])\n"
      "          init {\n"
      "            S[vi] = float32(0)\n"
      "          }\n"
      "          S[vi] = S[vi] + E[vi, vk]\n"
      "        }\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n";
  ts_func *f = NULL;
  int rc =
      ts_func_parse(one_consumer, sizeof one_consumer - 1, "one", &f, &err);
  if (rc) printf("parse: %s\n", err.msg);
  OK(rc);
  OK(ts_space_generate(f, t, NULL, &s, &n, &err));
  assert_true(n >= 1);
  for (int i = 0; i < n; i++) {
    assert_null(strstr(s[i].name, "materialized"));
    assert_false(sample_has_block(f, t, s, i, "E"));
  }
  ts_design_spaces_free(s, n);
  ts_func_free(f);

  assert_no_space_named("layer_norm N=64 D=256", t, "materialized");
  ts_target_free(t);
  OK(ts_target_parse("cuda -arch=sm_80", &t, &err));
  assert_no_space_named("softmax N=64 D=256", t, "materialized");
  ts_target_free(t);
}

/* A 1x1 convolution's kernel loops (reduce loops of one iteration) do not
 * stop the outer spatial tiles from running in parallel: they used to sit
 * above every tile, so no sample had a parallel loop. Now many samples do
 * (a sample whose outer tiles are all 1 cannot), and all compute the right
 * result. */
static void test_unit_reduce_loops_parallel(void **state) {
  (void)state;
  ts_workload *w =
      tu_workload("conv2d_nhwc N=1 H=14 W=14 CI=32 CO=64 KH=1 KW=1");
  ts_target *t = host();
  ts_design_space *s = NULL;
  int n = 0;
  ts_error err;
  OK(ts_space_generate(w->func, t, NULL, &s, &n, &err));
  assert_true(n >= 3);
  int sampled = 0, parallel = 0;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < 4; k++) {
      ts_candidate c;
      OK(ts_candidate_sample(&s[i], i, w->func, t, 30 + (uint64_t)k, &c, &err));
      char *text = ts_func_print(ts_sched_func(c.sched));
      sampled++;
      parallel += strstr(text, ") parallel {") != NULL;
      free(text);
      ts_candidate_clear(&c);
    }
  printf("%d of %d samples have a parallel loop\n", parallel, sampled);
  assert_true(4 * parallel >= sampled);
  check_samples(w->func, t, s, n, 1, true);
  ts_design_spaces_free(s, n);
  ts_workload_free(w);
  ts_target_free(t);
}

static void test_conv_pad_compute_location(void **state) {
  (void)state;
  ts_workload *w =
      tu_workload("conv2d_nhwc N=1 H=8 W=8 CI=8 CO=16 KH=3 KW=3 pad=1");
  ts_target *t = host();
  ts_design_space *s = NULL;
  int n = 0;
  ts_error err;
  OK(ts_space_generate(w->func, t, NULL, &s, &n, &err));
  /* padding (if_then_else) is not inlined on CPU: it gets a location */
  for (int i = 0; i < n; i++) {
    int locs = 0;
    for (int k = 0; k < ts_trace_n_insts(s[i].trace); k++)
      locs +=
          ts_trace_inst_kind(s[i].trace, k) == TS_INSTR_SAMPLE_COMPUTE_LOCATION;
    assert_int_equal(locs, 1);
  }
  ts_design_spaces_free(s, n);
  ts_target_free(t);
  ts_workload_free(w);
}

/* A depthwise conv, which reads each padded element once per tap, also
 * gets spaces with its padding inlined (`pad: inlined`, no compute
 * location sampled for it), whose samples compute the interpreter's
 * result, odd sizes and a stride included; so do the dense convs whose
 * padding the default schedule reads inline; a 5 x 5 dense conv at
 * stride 1 (its output channels share each read) and a padding-free
 * depthwise conv get none. */
static void test_depthwise_padding_inlined(void **state) {
  (void)state;
  ts_target *t = host();
  const char *specs[] = {
      "depthwise_conv2d_nhwc N=1 H=9 W=11 C=16 KH=3 KW=3 pad=1",
      "depthwise_conv2d_nhwc N=1 H=10 W=7 C=8 KH=5 KW=5 pad=2 stride=2",
  };
  for (int j = 0; j < 2; j++) {
    ts_workload *w = tu_workload(specs[j]);
    ts_design_space *s = NULL;
    int n = 0, inlined = 0;
    ts_error err;
    OK(ts_space_generate(w->func, t, NULL, &s, &n, &err));
    for (int i = 0; i < n; i++) {
      if (!strstr(s[i].name, "pad: inlined")) continue;
      inlined++;
      for (int k = 0; k < ts_trace_n_insts(s[i].trace); k++)
        assert_int_not_equal(ts_trace_inst_kind(s[i].trace, k),
                             TS_INSTR_SAMPLE_COMPUTE_LOCATION);
    }
    assert_true(inlined >= 1 && inlined < n);
    check_samples(w->func, t, s, n, 2, true);
    ts_design_spaces_free(s, n);
    ts_workload_free(w);
  }
  /* a dense conv the default reads inline (a 3 x 3 kernel at stride 1,
   * and a strided one whose padded copy is costly): a state with it
   * inlined, its samples right; a 5 x 5 kernel at stride 1 none */
  const char *dense[] = {
      "conv2d_nhwc N=1 H=18 W=18 CI=32 CO=16 KH=3 KW=3 stride=2 pad=1",
      "conv2d_nhwc N=1 H=9 W=9 CI=32 CO=32 KH=3 KW=3 pad=1",
  };
  for (int j = 0; j < 2; j++) {
    ts_workload *w = tu_workload(dense[j]);
    ts_design_space *s = NULL;
    int n = 0, inlined = 0;
    ts_error err;
    OK(ts_space_generate(w->func, t, NULL, &s, &n, &err));
    for (int i = 0; i < n; i++) inlined += !!strstr(s[i].name, "pad: inlined");
    assert_true(inlined >= 1 && inlined < n);
    check_samples(w->func, t, s, n, 2, true);
    ts_design_spaces_free(s, n);
    ts_workload_free(w);
  }
  assert_no_space_named("conv2d_nhwc N=1 H=9 W=9 CI=32 CO=32 KH=5 KW=5 pad=2",
                        t, "pad: inlined");
  assert_no_space_named("depthwise_conv2d_nhwc N=1 H=8 W=8 C=16 KH=3 KW=3", t,
                        "pad: inlined");
  ts_target_free(t);
}

/* A conv whose output columns cannot fill a register tile (7 columns on
 * AVX2's 8 lanes) gets pixel variants of its tiling (rows fused with
 * columns), three of them, whose samples compute the interpreter's result;
 * one with enough columns, or on AVX-512 (7 x 2 vectors already fill the
 * tile), gets none. */
static void test_pixel_spaces(void **state) {
  (void)state;
  const char *spec = "conv2d_nhwc N=1 H=7 W=7 CI=16 CO=32 KH=3 KW=3 pad=1";
  ts_target *avx2 = NULL, *avx512 = NULL;
  ts_error err;
  OK(ts_target_parse("llvm -mcpu=x86-64-v3 -num-cores=2", &avx2, &err));
  OK(ts_target_parse("llvm -mcpu=skylake-avx512 -num-cores=2", &avx512, &err));
  ts_workload *w = tu_workload(spec);
  ts_design_space *s = NULL;
  int n = 0, pixels = 0;
  OK(ts_space_generate(w->func, avx2, NULL, &s, &n, &err));
  for (int i = 0; i < n; i++) {
    if (!strstr(s[i].name, "pixels")) continue;
    pixels++;
    /* the pixel variants neither cache the output nor fuse a consumer */
    assert_null(strstr(s[i].name, "cache_write"));
  }
  assert_int_equal(pixels, 3);
  check_samples(w->func, avx2, s, n, 2, true);
  ts_design_spaces_free(s, n);
  ts_workload_free(w);
  assert_no_space_named(spec, avx512, "pixels");
  assert_no_space_named("conv2d_nhwc N=1 H=8 W=48 CI=16 CO=32 KH=3 KW=3 pad=1",
                        avx2, "pixels");
  assert_no_space_named("conv2d_nhwc N=1 H=7 W=7 CI=3 CO=32 KH=3 KW=3 pad=1",
                        avx2, "pixels");
  ts_target_free(avx2);
  ts_target_free(avx512);
}

static void test_no_tensorize_without_match(void **state) {
  (void)state;
  ts_error err;
  ts_target *amx = NULL;
  OK(ts_target_parse(AMX_TARGET, &amx, &err));
  static const char *const specs[] = {
      "matmul M=64 N=64 K=64",
      "conv2d_nhwc N=1 H=8 W=8 CI=16 CO=16 KH=3 KW=3 pad=1",
      "softmax N=8 D=64",
      "matmul M=64 N=64 K=64 dtype=int8",
  };
  ts_target *h = host();
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
    ts_workload *w = tu_workload(specs[i]);
    const ts_target *targets[2] = {amx, h};
    for (int k = 0; k < 2; k++) {
      ts_design_space *s = NULL;
      int n = 0;
      OK(ts_space_generate(w->func, targets[k], NULL, &s, &n, &err));
      /* int8 x int8 matmul matches the AMX int8 tile and the signed VNNI
       * dot, and the unsigned-A VNNI dot only after shift_int8 */
      bool int8 = strstr(specs[i], "int8") != NULL;
      if (int8) {
        assert_int_equal(has_space(s, n, "amx_int8_16x16x64"),
                         ts_target_has_feature(targets[k], "amx-int8"));
        assert_int_equal(has_space(s, n, "avx512_vnni_s8_16x4"),
                         ts_target_has_feature(targets[k], "avx512vnni"));
        assert_int_equal(has_space(s, n, "avx512_vnni_s8_16x16"),
                         ts_target_has_feature(targets[k], "avx512vnni"));
        bool vnni = ts_target_has_feature(targets[k], "avx512vnni");
        assert_int_equal(has_space(s, n, "avx512_vnni_16x4"), vnni);
        assert_int_equal(has_space(s, n, "avx512_vnni_16x16"), vnni);
        for (int j = 0; j < n; j++)
          if (!strncmp(s[j].intrin, "avx512_vnni_16x", 15))
            assert_non_null(strstr(s[j].name, "shift_int8"));
      } else {
        assert_false(any_intrin(s, n));
      }
      ts_design_spaces_free(s, n);
    }
    ts_workload_free(w);
  }
  /* the option turns the variants off */
  ts_workload *w = tu_workload("matmul M=64 N=64 K=64 dtype=bfloat16");
  ts_space_options o = ts_space_defaults();
  o.tensorize = false;
  ts_design_space *s = NULL;
  int n = 0;
  OK(ts_space_generate(w->func, amx, &o, &s, &n, &err));
  assert_false(any_intrin(s, n));
  ts_design_spaces_free(s, n);
  ts_workload_free(w);
  ts_target_free(h);
  ts_target_free(amx);
}

static void test_amx_variant_compiles(void **state) {
  (void)state;
  ts_error err;
  ts_target *amx = NULL;
  OK(ts_target_parse(AMX_TARGET, &amx, &err));
  ts_workload *w = tu_workload("matmul M=64 N=64 K=64 dtype=bfloat16");
  ts_design_space *s = NULL;
  int n = 0;
  OK(ts_space_generate(w->func, amx, NULL, &s, &n, &err));
  assert_true(has_space(s, n, "amx_bf16_16x16x32"));
  assert_true(has_space(s, n, "avx512_bf16_16x2"));
  for (int i = 0; i < n; i++) {
    if (strcmp(s[i].intrin, "amx_bf16_16x16x32")) continue;
    ts_design_space one = s[i];
    check_samples(w->func, amx, &one, 1, 3, ts_rt_enable_amx(NULL) == TS_OK);
    ts_candidate c;
    OK(ts_candidate_sample(&s[i], i, w->func, amx, 5, &c, &err));
    char *text = ts_func_print(ts_sched_func(c.sched));
    assert_non_null(strstr(text, "tessera.amx_bf16_gemm"));
    free(text);
    ts_candidate_clear(&c);
  }
  ts_design_spaces_free(s, n);
  ts_workload_free(w);
  ts_target_free(amx);
}

/* Rows that no AMX tile divides (69 = 4 x 16 + 5 = 2 x 32 + 5, 7 < 16): the AMX
 * variants take the whole tiles and give the rows left a block of their
 * own on the intrinsic's row edge (tiles configured with fewer rows),
 * reading the same packed B; K and columns that no tile divides leave
 * blocks with the default schedule. Every sample computes the
 * interpreter's result where the host has AMX, else it compiles. */
static void test_amx_rows_partitioned(void **state) {
  (void)state;
  ts_error err;
  ts_target *amx = NULL;
  OK(ts_target_parse(AMX_TARGET, &amx, &err));
  static const char *const cases[][4] = {
      {"matmul M=69 N=32 K=256 dtype=int8", "amx_int8_16x16x64",
       "tessera.amx_int8_gemm_rows", "block C_tail_o("},
      {"matmul M=69 N=32 K=256 dtype=int8", "amx_int8_32x32x256",
       "tessera.amx_int8_gemm_rows", "block C_tail_o("},
      {"matmul M=69 N=32 K=128 dtype=bfloat16", "amx_bf16_32x32x128",
       "tessera.amx_bf16_gemm_rows", "block C_tail_o("},
      {"matmul M=7 N=32 K=128 dtype=bfloat16", "amx_bf16_16x16x32",
       "tessera.amx_bf16_gemm_rows", "block C_o("},
      /* K and columns the tiles do not divide either: 260 = 256 + 4,
       * 40 = 32 + 8, each rest a block with the default schedule */
      {"matmul M=69 N=40 K=260 dtype=int8", "amx_int8_16x16x64",
       "tessera.amx_int8_gemm_rows", "block C_tail_1("},
      {"matmul M=69 N=40 K=130 dtype=bfloat16", "amx_bf16_32x32x128",
       "tessera.amx_bf16_gemm_rows", "block C_tail_2_o("},
      {"matmul M=40 N=72 K=516 dtype=int8", "amx_int8_32x32x256",
       "tessera.amx_int8_gemm_rows", "block C_tail_1("},
      {"matmul M=35 N=48 K=100 dtype=bfloat16", "amx_bf16_16x16x32",
       "tessera.amx_bf16_gemm_rows", "block C_tail_1_o("},
      /* a dot product's columns and K: 40 = 32 + 8, 68 = 64 + 4 */
      {"matmul M=8 N=40 K=68 dtype=int8", "avx512_vnni_s8_16x4",
       "tessera.vnni_s8_dot", "block C_tail("},
      {"matmul M=8 N=40 K=68 dtype=int8", "avx512_vnni_s8_16x16",
       "tessera.vnni_s8_dot", "block C_tail_1("},
      {"matmul M=8 N=40 K=34 dtype=bfloat16", "avx512_bf16_16x2",
       "tessera.avx512bf16_dot", "block C_tail("},
      /* one row, one column and two k left: no edge call, default parts */
      {"matmul M=17 N=33 K=66 dtype=bfloat16", "amx_bf16_16x16x32",
       "tessera.amx_bf16_gemm\"", "block C_tail_2("},
  };
  /* the target is a Sapphire Rapids: its code runs where AMX does */
  bool run = ts_rt_enable_amx(NULL) == TS_OK;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    ts_workload *w = tu_workload(cases[c][0]);
    ts_design_space *s = NULL;
    int n = 0;
    OK(ts_space_generate(w->func, amx, NULL, &s, &n, &err));
    if (!has_space(s, n, cases[c][1]))
      for (int i = 0; i < n; i++)
        printf("%s: space %s (%s)\n", cases[c][0], s[i].name, s[i].intrin);
    assert_true(has_space(s, n, cases[c][1]));
    for (int i = 0; i < n; i++) {
      if (strcmp(s[i].intrin, cases[c][1])) continue;
      ts_design_space one = s[i];
      printf("%s on %s\n", cases[c][0], cases[c][1]);
      check_samples(w->func, amx, &one, 1, 2, run);
      ts_candidate cand;
      OK(ts_candidate_sample(&s[i], i, w->func, amx, 5, &cand, &err));
      char *text = ts_func_print(ts_sched_func(cand.sched));
      assert_non_null(strstr(text, cases[c][2]));
      assert_non_null(strstr(text, cases[c][3]));
      /* one packed copy of B (a default-scheduled part packs its own) */
      if (!strstr(cases[c][3], "C_tail_1"))
        assert_null(strstr(text, "alloc B_global_1"));
      free(text);
      ts_candidate_clear(&cand);
    }
    ts_design_spaces_free(s, n);
    ts_workload_free(w);
  }
  ts_target_free(amx);
}

/* The same on an AVX2 target (x86-64-v3, which every host runs): the
 * multiply-add pairs' variants with 20 = 16 + 4 columns and K = 18 = 16 +
 * 2 (the K = 8 form), run against the interpreter. */
static void test_dot_columns_partitioned(void **state) {
  (void)state;
  ts_error err;
  ts_target *t = NULL;
  OK(ts_target_parse("llvm -mcpu=x86-64-v3", &t, &err));
  ts_workload *w = tu_workload("matmul M=6 N=20 K=18 dtype=int8");
  ts_design_space *s = NULL;
  int n = 0;
  OK(ts_space_generate(w->func, t, NULL, &s, &n, &err));
  static const char *const intrins[] = {"avx2_madd_s8_8x2", "avx2_madd_s8_8x8"};
  for (size_t k = 0; k < 2; k++) {
    assert_true(has_space(s, n, intrins[k]));
    for (int i = 0; i < n; i++) {
      if (strcmp(s[i].intrin, intrins[k])) continue;
      ts_design_space one = s[i];
      check_samples(w->func, t, &one, 1, 2, true);
    }
  }
  ts_design_spaces_free(s, n);
  ts_workload_free(w);
  ts_target_free(t);
}

static void test_bf16_dot_variant_runs(void **state) {
  (void)state;
  ts_target *t = host();
  if (!ts_target_has_feature(t, "avx512bf16") ||
      ts_rt_cpu_has("avx512bf16") != 1) {
    printf("skipped: this CPU has no AVX512-BF16\n");
    ts_target_free(t);
    return;
  }
  ts_workload *w = tu_workload("matmul M=32 N=64 K=64 dtype=bfloat16");
  ts_design_space *s = NULL;
  int n = 0;
  ts_error err;
  OK(ts_space_generate(w->func, t, NULL, &s, &n, &err));
  assert_true(has_space(s, n, "avx512_bf16_16x2"));
  /* (a host with AMX has the AMX tile's variant too) */
  for (int i = 0; i < n; i++)
    if (strcmp(s[i].intrin, "avx512_bf16_16x2") == 0) {
      ts_candidate c;
      OK(ts_candidate_sample(&s[i], i, w->func, t, 9, &c, &err));
      char *text = ts_func_print(ts_sched_func(c.sched));
      assert_non_null(strstr(text, "tessera.avx512bf16_dot_16x2"));
      free(text);
      ts_candidate_clear(&c);
      ts_design_space one = s[i];
      check_samples(w->func, t, &one, 1, 3, true);
    }
  ts_design_spaces_free(s, n);
  ts_workload_free(w);
  ts_target_free(t);
}

static void test_vnni_variant(void **state) {
  (void)state;
  ts_target *t = host();
  ts_func *f = NULL;
  ts_error err;
  OK(ts_func_parse(tu_u8s8_matmul, strlen(tu_u8s8_matmul), "u8s8", &f, &err));
  ts_design_space *s = NULL;
  int n = 0;
  OK(ts_space_generate(f, t, NULL, &s, &n, &err));
  bool vnni = ts_target_has_feature(t, "avx512vnni");
  assert_int_equal(has_space(s, n, "avx512_vnni_16x4"), vnni);
  assert_int_equal(has_space(s, n, "avx512_vnni_16x16"), vnni); /* K 64 */
  if (vnni && ts_rt_cpu_has("avx512vnni") == 1)
    for (int i = 0; i < n; i++)
      if (s[i].intrin[0]) {
        ts_design_space one = s[i];
        check_samples(f, t, &one, 1, 3, true);
      }
  ts_design_spaces_free(s, n);
  ts_func_free(f);
  ts_target_free(t);
}

/* A signed int8 matmul (both operands int8, as the operator library
 * builds it) gets the signed VNNI variants (K tiles of 4 and of 16) and
 * the unsigned-A ones after shift_int8, whose samples all compute the
 * exact result (the bias of A compensated in the call, or in the init). */
static void test_vnni_s8_variant(void **state) {
  (void)state;
  ts_target *t = host();
  ts_workload *w = tu_workload("matmul M=32 N=64 K=64 dtype=int8");
  assert_non_null(w);
  ts_design_space *s = NULL;
  int n = 0;
  ts_error err;
  OK(ts_space_generate(w->func, t, NULL, &s, &n, &err));
  bool vnni = ts_target_has_feature(t, "avx512vnni");
  assert_int_equal(has_space(s, n, "avx512_vnni_s8_16x4"), vnni);
  assert_int_equal(has_space(s, n, "avx512_vnni_s8_16x16"), vnni);
  assert_int_equal(has_space(s, n, "avx512_vnni_16x4"), vnni); /* shifted */
  assert_int_equal(has_space(s, n, "avx512_vnni_16x16"), vnni);
  if (vnni && ts_rt_cpu_has("avx512vnni") == 1)
    for (int i = 0; i < n; i++)
      if (s[i].intrin[0]) {
        ts_design_space one = s[i];
        check_samples(w->func, t, &one, 1, 3, true);
      }
  ts_design_spaces_free(s, n);
  ts_workload_free(w);
  ts_target_free(t);
}

static const char custom_rule[] =
    "{\"version\": 1, \"instructions\": ["
    "{\"kind\": \"get_block\", \"inputs\": [], \"attrs\": [\"C\"], "
    "\"outputs\": [\"b0\"]},"
    "{\"kind\": \"get_loops\", \"inputs\": [\"b0\"], \"attrs\": [], "
    "\"outputs\": [\"l1\", \"l2\", \"l3\"]},"
    "{\"kind\": \"sample_perfect_tile\", \"inputs\": [\"l2\"], "
    "\"attrs\": [2, 16], \"outputs\": [\"v4\", \"v5\"]},"
    "{\"kind\": \"split\", \"inputs\": [\"l2\", \"v4\", \"v5\"], "
    "\"attrs\": [], \"outputs\": [\"l6\", \"l7\"]},"
    "{\"kind\": \"reorder\", \"inputs\": [\"l1\", \"l6\", \"l3\", \"l7\"], "
    "\"attrs\": [], \"outputs\": []}"
    "], \"decisions\": []}";

static void test_custom_rule(void **state) {
  (void)state;
  ts_workload *w = tu_workload("matmul M=16 N=32 K=16");
  ts_target *t = host();
  ts_trace *rule = NULL;
  ts_error err;
  OK(ts_trace_from_json(custom_rule, strlen(custom_rule), &rule, &err));
  ts_custom_rule cr = {"C", rule};
  ts_space_options o = ts_space_defaults();
  o.custom_rules = &cr;
  o.n_custom_rules = 1;
  ts_design_space *s = NULL;
  int n = 0;
  OK(ts_space_generate(w->func, t, &o, &s, &n, &err));
  /* the block got the custom rule only: one space, one tile sample */
  assert_int_equal(n, 1);
  assert_non_null(strstr(s[0].name, "custom"));
  int tiles = 0;
  for (int k = 0; k < ts_trace_n_insts(s[0].trace); k++)
    tiles += ts_trace_inst_kind(s[0].trace, k) == TS_INSTR_SAMPLE_PERFECT_TILE;
  assert_int_equal(tiles, 1);
  check_samples(w->func, t, s, n, 3, true);
  ts_design_spaces_free(s, n);
  /* a rule for a block the workload does not have */
  cr.block = "nope";
  assert_int_equal(ts_space_generate(w->func, t, &o, &s, &n, &err),
                   TS_ENOTFOUND);
  assert_non_null(strstr(err.msg, "nope"));
  ts_trace_free(rule);
  ts_target_free(t);
  ts_workload_free(w);
}

static void test_record_json(void **state) {
  (void)state;
  ts_workload *w = tu_workload("matmul M=16 N=16 K=16");
  ts_target *t = host();
  ts_design_space *s = NULL;
  int n = 0;
  ts_error err;
  OK(ts_space_generate(w->func, t, NULL, &s, &n, &err));
  ts_candidate c;
  OK(ts_candidate_sample(&s[2], 2, w->func, t, 4, &c, &err));
  char *json = ts_candidate_record_json(&c);
  assert_non_null(json);
  assert_non_null(strstr(json, "\"postproc_from\""));
  ts_trace *full = NULL, *design = NULL;
  OK(ts_record_traces(json, &full, &design, &err));
  assert_int_equal(ts_trace_n_insts(design), ts_trace_n_insts(c.design));
  /* the full trace replays to the candidate; the design part replays and
   * postprocesses to it too */
  ts_sched *r = NULL;
  OK(ts_trace_apply(full, w->func, 1, &r, &err));
  assert_true(ts_hash128_eq(ts_func_hash(ts_sched_func(r)), c.hash));
  ts_candidate again;
  OK(ts_candidate_make(design, w->func, t, 1, &again, &err));
  assert_true(ts_hash128_eq(again.hash, c.hash));
  ts_candidate_clear(&again);
  ts_sched_destroy(r);
  ts_trace_free(full);
  ts_trace_free(design);
  /* a trace without the key: the design part is the whole trace */
  char *plain = ts_trace_to_json(s[0].trace);
  OK(ts_record_traces(plain, NULL, &design, &err));
  assert_int_equal(ts_trace_n_insts(design), ts_trace_n_insts(s[0].trace));
  ts_trace_free(design);
  assert_int_not_equal(ts_record_traces("{bad", NULL, &design, &err), TS_OK);
  free(plain);
  free(json);
  ts_candidate_clear(&c);
  ts_design_spaces_free(s, n);
  ts_target_free(t);
  ts_workload_free(w);
}

static void test_every_family_has_rules(void **state) {
  (void)state;
  int n = 0;
  for (; ts_target_family(n); n++)
    assert_true(ts_rule_list_known(ts_target_family(n)->rules));
  assert_true(n >= 2);
  assert_false(ts_rule_list_known("no-such-list"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_family_has_rules),
      cmocka_unit_test(test_matmul_spaces),
      cmocka_unit_test(test_padded_spaces),
      cmocka_unit_test(test_read_cache_compacted),
      cmocka_unit_test(test_other_workloads),
      cmocka_unit_test(test_rfactor_vector),
      cmocka_unit_test(test_odd_rows_vectorized),
      cmocka_unit_test(test_one_pass_rows),
      cmocka_unit_test(test_stream_decision),
      cmocka_unit_test(test_materialized_expensive),
      cmocka_unit_test(test_unit_reduce_loops_parallel),
      cmocka_unit_test(test_conv_pad_compute_location),
      cmocka_unit_test(test_depthwise_padding_inlined),
      cmocka_unit_test(test_pixel_spaces),
      cmocka_unit_test(test_no_tensorize_without_match),
      cmocka_unit_test(test_amx_variant_compiles),
      cmocka_unit_test(test_amx_rows_partitioned),
      cmocka_unit_test(test_dot_columns_partitioned),
      cmocka_unit_test(test_bf16_dot_variant_runs),
      cmocka_unit_test(test_vnni_variant),
      cmocka_unit_test(test_vnni_s8_variant),
      cmocka_unit_test(test_custom_rule),
      cmocka_unit_test(test_record_json),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
