/*
 * test_golden_space.c — what the tuner samples for a fixed seed, compared
 * with the files under tests/tuner/golden/: for a few workloads on fixed
 * targets (explicit -mcpu and -num-cores, never the host; the cuda target
 * needs no GPU), the design spaces (names, intrinsics, a hash of each
 * design trace), the mutator probabilities, the default schedule, and for
 * every space three candidates sampled with fixed seeds: their decisions, the
 * structural hash of the postprocessed function, a hash of the whole
 * recorded trace (postprocessor primitives included), a hash of the cost
 * model's features and the outcome of each mutator on the design. A
 * refactoring of the targets, the rules, the postprocessors or the
 * features must leave every file unchanged; a change meant to alter the
 * search rewrites them with TS_GOLDEN_UPDATE=1 (and the diff shows in
 * review).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cost_model/cost_model.h"
#include "tests/golden.h"
#include "util.h"

#define GOLDEN_DIR TS_SOURCE_DIR "/tests/tuner/golden"
#define SAMPLES_PER_SPACE 3

/* A growable text. */
typedef struct text {
  char *s;
  size_t n, cap;
} text;

static void put(text *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void put(text *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  assert_true(k >= 0);
  if (t->n + (size_t)k + 1 > t->cap) {
    size_t cap = t->cap ? t->cap : 4096;
    while (cap < t->n + (size_t)k + 1) cap *= 2;
    t->s = realloc(t->s, cap);
    assert_non_null(t->s);
    t->cap = cap;
  }
  va_start(ap, fmt);
  vsnprintf(t->s + t->n, t->cap - t->n, fmt, ap);
  va_end(ap);
  t->n += (size_t)k;
}

/* FNV-1a of a string. */
static uint64_t fnv(const char *s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
  return h;
}

static uint64_t trace_hash(const ts_trace *tr) {
  char *json = ts_trace_to_json(tr);
  assert_non_null(json);
  uint64_t h = fnv(json);
  free(json);
  return h;
}

/* The decisions of a trace, "index:v,v index:v ...". */
static void put_decisions(text *t, const ts_trace *tr) {
  for (int i = 0; i < ts_trace_n_insts(tr); i++) {
    int64_t v[64];
    int n = ts_trace_decision(tr, i, v, 64);
    if (n <= 0) continue;
    put(t, " %d:", i);
    for (int k = 0; k < n && k < 64; k++)
      put(t, "%s%lld", k ? "," : "", (long long)v[k]);
  }
}

/* The features rounded to four digits (the rows are log-scaled: a last-bit
 * difference of a libm does not show), hashed. */
static uint64_t features_hash(const ts_func *f, const ts_target *t) {
  ts_cm_features feat;
  memset(&feat, 0, sizeof feat);
  ts_error err;
  if (ts_cm_extract(f, t, &feat, &err)) return 0;
  text s = {0};
  put(&s, "%d", feat.n_rows);
  for (int i = 0; i < feat.n_rows * TS_CM_N_FEATURES; i++)
    put(&s, " %.4g", (double)feat.values[i]);
  uint64_t h = fnv(s.s);
  free(s.s);
  ts_cm_features_clear(&feat);
  return h;
}

static void put_candidate(text *t, const ts_func *f, const ts_target *tg,
                          const ts_design_space *space, int i, int k) {
  ts_candidate c;
  ts_error err;
  uint64_t seed = 1000 + (uint64_t)i * 10 + (uint64_t)k;
  put(t, "  sample %d:", k);
  if (ts_candidate_sample(space, i, f, tg, seed, &c, &err)) {
    put(t, " error %d\n", err.code);
    return;
  }
  put_decisions(t, c.design);
  ts_hash128 fh = ts_func_hash(ts_sched_func(c.sched));
  char *record = ts_candidate_record_json(&c);
  assert_non_null(record);
  put(t, "\n    func %016llx%016llx record %016llx features %016llx\n",
      (unsigned long long)fh.hi, (unsigned long long)fh.lo,
      (unsigned long long)fnv(record),
      (unsigned long long)features_hash(ts_sched_func(c.sched), tg));
  free(record);
  /* each mutator once on the design, from a fixed generator */
  put(t, "    mutate");
  for (int m = 0; m < TS_N_MUTATORS; m++) {
    ts_rng rng;
    ts_rng_seed(&rng, seed * 7 + (uint64_t)m);
    ts_trace *mut = NULL;
    int rc = ts_mutate(c.design, (ts_mutator_kind)m, &rng, &mut, &err);
    if (rc)
      put(t, " %d", rc);
    else
      put(t, " %016llx", (unsigned long long)trace_hash(mut));
    ts_trace_free(mut);
  }
  put(t, "\n");
  ts_candidate_clear(&c);
}

static char *golden_text(const char *spec, const char *target) {
  ts_error err;
  ts_workload *w = tu_workload(spec);
  assert_non_null(w);
  ts_target *tg = NULL;
  assert_int_equal(ts_target_parse(target, &tg, &err), TS_OK);
  text t = {0};
  put(&t, "workload %s\ntarget %s\n", spec, ts_target_str(tg));
  double p[TS_N_MUTATORS];
  ts_mutator_probs(tg, p);
  put(&t, "mutator_probs");
  for (int m = 0; m < TS_N_MUTATORS; m++) put(&t, " %g", p[m]);
  put(&t, "\n");
  ts_sched *ds = NULL;
  if (ts_default_schedule(w->func, tg, &ds, &err)) {
    put(&t, "default error %d\n", err.code);
  } else {
    ts_hash128 h = ts_func_hash(ts_sched_func(ds));
    put(&t, "default func %016llx%016llx trace %016llx\n",
        (unsigned long long)h.hi, (unsigned long long)h.lo,
        (unsigned long long)trace_hash(ts_sched_trace(ds)));
    ts_sched_destroy(ds);
  }
  ts_design_space *s = NULL;
  int n = 0;
  assert_int_equal(ts_space_generate(w->func, tg, NULL, &s, &n, &err), TS_OK);
  for (int i = 0; i < n; i++) {
    put(&t, "space %d \"%s\" intrin \"%s\" design %016llx\n", i, s[i].name,
        s[i].intrin, (unsigned long long)trace_hash(s[i].trace));
    for (int k = 0; k < SAMPLES_PER_SPACE; k++)
      put_candidate(&t, w->func, tg, &s[i], i, k);
  }
  ts_design_spaces_free(s, n);
  ts_target_free(tg);
  ts_workload_free(w);
  return t.s;
}

typedef struct golden_case {
  const char *file, *spec, *target;
} golden_case;

#define SKX "llvm -mcpu=skylake-avx512 -num-cores=2"
#define SM80 "cuda -arch=sm_80"

static const golden_case cases[] = {
    {"matmul_fp32_skx.txt", "matmul M=64 N=64 K=64", SKX},
    {"matmul_fp32_avx2.txt", "matmul M=64 N=64 K=64",
     "llvm -mcpu=x86-64-v3 -num-cores=4"},
    {"conv2d_skx.txt", "conv2d_nhwc N=1 H=8 W=8 CI=8 CO=16 KH=3 KW=3 pad=1",
     SKX},
    {"reduce_skx.txt", "reduce op=sum N=4 D=4096", SKX},
    {"softmax_skx.txt", "softmax N=64 D=256", SKX},
    {"matmul_int8_vnni.txt", "matmul M=64 N=64 K=64 dtype=int8",
     "llvm -mcpu=cascadelake -num-cores=2"},
    {"matmul_bf16_amx.txt", "matmul M=64 N=64 K=64 dtype=bfloat16",
     "llvm -mcpu=sapphirerapids -num-cores=2"},
    {"matmul_fp32_sm80.txt", "matmul M=128 N=128 K=128", SM80},
    {"matmul_fp16_sm80.txt", "matmul M=128 N=128 K=128 dtype=float16", SM80},
    {"softmax_sm80.txt", "softmax N=64 D=256", SM80},
    {"conv2d_sm80.txt", "conv2d_nhwc N=1 H=8 W=8 CI=8 CO=16 KH=3 KW=3 pad=1",
     SM80},
};

static void test_golden_case(void **state) {
  const golden_case *c = *state;
  char *got = golden_text(c->spec, c->target);
  golden_compare(GOLDEN_DIR, c->file, got, "the sampled schedules");
  free(got);
}

int main(void) {
  struct CMUnitTest tests[sizeof cases / sizeof cases[0]];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    tests[i] = (struct CMUnitTest){cases[i].file, test_golden_case, NULL, NULL,
                                   (void *)&cases[i]};
  return _cmocka_run_group_tests("tuner_golden_space", tests,
                                 sizeof cases / sizeof cases[0], NULL, NULL);
}
