/*
 * target.c — code generation targets: parsing and printing canonical target
 * strings (`llvm -mcpu=... -mattr=... -num-cores=N`, `cuda -arch=sm_XX ...`),
 * resolving `-mcpu=native` through LLVM's host detection, and the queries
 * lowering and emission ask (features, vector width, SM version, limits).
 *
 * The C API cannot say which features a named CPU implies, so a table here
 * lists, for every x86 CPU name LLVM 19 knows, the features tessera queries;
 * parsing adds them to the stored set, which makes the canonical string
 * self-describing: the stored features alone answer has_feature.
 */
#include "codegen/codegen.h"
#include "tir/alloc.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

#define CUDA_DEFAULT_THREADS 1024
#define CUDA_DEFAULT_SHARED 49152
#define CUDA_DEFAULT_REGISTERS 255

typedef struct feature_entry {
  char *name;
  bool on;
} feature_entry;

struct ts_target {
  ts_target_kind kind;
  char *cpu;               /* x86 CPU name, or "sm_XX" */
  feature_entry *features; /* sorted by name, n_features */
  int n_features;
  int num_cores; /* llvm */
  int sm, max_threads_per_block, max_shared_memory_per_block,
      max_registers_per_thread; /* cuda */
  char *triple;
  char *llvm_features; /* "+a,-b" */
  char *str;           /* canonical */
};

/* ---- the x86 CPU table ---- */

/* The features tessera queries, one bit each. */
static const char *const known_features[] = {
    "sse4.2",     "avx",        "f16c",       "fma",      "avx2",
    "avx512f",    "avx512dq",   "avx512cd",   "avx512bw", "avx512vl",
    "avx512vnni", "avx512bf16", "avx512fp16", "avxvnni",  "amx-tile",
    "amx-bf16",   "amx-int8",   "amx-fp16"};
enum {
  F_SSE42 = 1u << 0,
  F_AVX = 1u << 1,
  F_F16C = 1u << 2,
  F_FMA = 1u << 3,
  F_AVX2 = 1u << 4,
  F_AVX512F = 1u << 5,
  F_AVX512DQ = 1u << 6,
  F_AVX512CD = 1u << 7,
  F_AVX512BW = 1u << 8,
  F_AVX512VL = 1u << 9,
  F_AVX512VNNI = 1u << 10,
  F_AVX512BF16 = 1u << 11,
  F_AVX512FP16 = 1u << 12,
  F_AVXVNNI = 1u << 13,
  F_AMXTILE = 1u << 14,
  F_AMXBF16 = 1u << 15,
  F_AMXINT8 = 1u << 16,
  F_AMXFP16 = 1u << 17,
};
#define N_KNOWN_FEATURES (sizeof known_features / sizeof known_features[0])

/* CPU generations as feature sets. */
#define G_SSE42 F_SSE42
#define G_SNB (G_SSE42 | F_AVX)
#define G_IVB (G_SNB | F_F16C)
#define G_BDVER2 (G_IVB | F_FMA)
#define G_HSW (G_IVB | F_FMA | F_AVX2)
#define G_ADL (G_HSW | F_AVXVNNI)
#define G_KNL (G_HSW | F_AVX512F | F_AVX512CD)
#define G_SKX                                                                  \
  (G_HSW | F_AVX512F | F_AVX512DQ | F_AVX512CD | F_AVX512BW | F_AVX512VL)
#define G_CLX (G_SKX | F_AVX512VNNI)
#define G_CPX (G_CLX | F_AVX512BF16)
#define G_SPR                                                                  \
  (G_CPX | F_AVX512FP16 | F_AVXVNNI | F_AMXTILE | F_AMXBF16 | F_AMXINT8)
#define G_GNR (G_SPR | F_AMXFP16)
#define G_ZN5 (G_CPX | F_AVXVNNI)

typedef struct cpu_entry {
  const char *name;
  unsigned features;
} cpu_entry;

/* Every x86 CPU name of LLVM 19 (`llc -march=x86-64 -mcpu=help`). */
static const cpu_entry cpus[] = {
    {"alderlake", G_ADL},
    {"amdfam10", 0},
    {"arrowlake", G_ADL},
    {"arrowlake-s", G_ADL},
    {"arrowlake_s", G_ADL},
    {"athlon", 0},
    {"athlon-4", 0},
    {"athlon-fx", 0},
    {"athlon-mp", 0},
    {"athlon-tbird", 0},
    {"athlon-xp", 0},
    {"athlon64", 0},
    {"athlon64-sse3", 0},
    {"atom", 0},
    {"atom_sse4_2", G_SSE42},
    {"atom_sse4_2_movbe", G_SSE42},
    {"barcelona", 0},
    {"bdver1", G_SNB},
    {"bdver2", G_BDVER2},
    {"bdver3", G_BDVER2},
    {"bdver4", G_HSW},
    {"bonnell", 0},
    {"broadwell", G_HSW},
    {"btver1", 0},
    {"btver2", G_IVB},
    {"c3", 0},
    {"c3-2", 0},
    {"cannonlake", G_SKX},
    {"cascadelake", G_CLX},
    {"clearwaterforest", G_ADL},
    {"cooperlake", G_CPX},
    {"core-avx-i", G_IVB},
    {"core-avx2", G_HSW},
    {"core2", 0},
    {"core_2_duo_sse4_1", 0},
    {"core_2_duo_ssse3", 0},
    {"core_2nd_gen_avx", G_SNB},
    {"core_3rd_gen_avx", G_IVB},
    {"core_4th_gen_avx", G_HSW},
    {"core_4th_gen_avx_tsx", G_HSW},
    {"core_5th_gen_avx", G_HSW},
    {"core_5th_gen_avx_tsx", G_HSW},
    {"core_aes_pclmulqdq", G_SSE42},
    {"core_i7_sse4_2", G_SSE42},
    {"corei7", G_SSE42},
    {"corei7-avx", G_SNB},
    {"emeraldrapids", G_SPR},
    {"generic", 0},
    {"geode", 0},
    {"goldmont", G_SSE42},
    {"goldmont-plus", G_SSE42},
    {"goldmont_plus", G_SSE42},
    {"gracemont", G_ADL},
    {"grandridge", G_ADL},
    {"graniterapids", G_GNR},
    {"graniterapids-d", G_GNR},
    {"graniterapids_d", G_GNR},
    {"haswell", G_HSW},
    {"i386", 0},
    {"i486", 0},
    {"i586", 0},
    {"i686", 0},
    {"icelake-client", G_CLX},
    {"icelake-server", G_CLX},
    {"icelake_client", G_CLX},
    {"icelake_server", G_CLX},
    {"ivybridge", G_IVB},
    {"k6", 0},
    {"k6-2", 0},
    {"k6-3", 0},
    {"k8", 0},
    {"k8-sse3", 0},
    {"knl", G_KNL},
    {"knm", G_KNL},
    {"lakemont", 0},
    {"lunarlake", G_ADL},
    {"meteorlake", G_ADL},
    {"mic_avx512", G_KNL},
    {"nehalem", G_SSE42},
    {"nocona", 0},
    {"opteron", 0},
    {"opteron-sse3", 0},
    {"pantherlake", G_ADL},
    {"penryn", 0},
    {"pentium", 0},
    {"pentium-m", 0},
    {"pentium-mmx", 0},
    {"pentium2", 0},
    {"pentium3", 0},
    {"pentium3m", 0},
    {"pentium4", 0},
    {"pentium4m", 0},
    {"pentium_4", 0},
    {"pentium_4_sse3", 0},
    {"pentium_ii", 0},
    {"pentium_iii", 0},
    {"pentium_iii_no_xmm_regs", 0},
    {"pentium_m", 0},
    {"pentium_mmx", 0},
    {"pentium_pro", 0},
    {"pentiumpro", 0},
    {"prescott", 0},
    {"raptorlake", G_ADL},
    {"rocketlake", G_CLX},
    {"sandybridge", G_SNB},
    {"sapphirerapids", G_SPR},
    {"sierraforest", G_ADL},
    {"silvermont", G_SSE42},
    {"skx", G_SKX},
    {"skylake", G_HSW},
    {"skylake-avx512", G_SKX},
    {"skylake_avx512", G_SKX},
    {"slm", G_SSE42},
    {"tigerlake", G_CLX},
    {"tremont", G_SSE42},
    {"westmere", G_SSE42},
    {"winchip-c6", 0},
    {"winchip2", 0},
    {"x86-64", 0},
    {"x86-64-v2", G_SSE42},
    {"x86-64-v3", G_HSW},
    {"x86-64-v4", G_SKX},
    {"yonah", 0},
    {"znver1", G_HSW},
    {"znver2", G_HSW},
    {"znver3", G_HSW},
    {"znver4", G_CPX},
    {"znver5", G_ZN5},
};

static const cpu_entry *find_cpu(const char *name) {
  for (size_t i = 0; i < sizeof cpus / sizeof cpus[0]; i++)
    if (strcmp(cpus[i].name, name) == 0) return &cpus[i];
  return NULL;
}

/* A feature that needs another: disabling the second disables the first. */
static const struct {
  const char *feature, *needs;
} requires[] = {
    {"avx", "sse4.2"},
    {"f16c", "avx"},
    {"fma", "avx"},
    {"avx2", "avx"},
    {"avxvnni", "avx2"},
    {"avx512f", "avx2"},
    {"avx512f", "fma"},
    {"avx512f", "f16c"},
    {"avx512dq", "avx512f"},
    {"avx512cd", "avx512f"},
    {"avx512bw", "avx512f"},
    {"avx512vl", "avx512f"},
    {"avx512vnni", "avx512f"},
    {"avx512bf16", "avx512bw"},
    {"avx512fp16", "avx512bw"},
    {"avx512fp16", "avx512dq"},
    {"avx512fp16", "avx512vl"},
    {"amx-bf16", "amx-tile"},
    {"amx-int8", "amx-tile"},
    {"amx-fp16", "amx-tile"},
};

/* Known NVPTX architectures of LLVM 19 and the PTX ISA version used for
 * each (the oldest that supports it, at least 6.0 for the sync shuffles). */
static const struct {
  int sm;
  int ptx;
} cuda_archs[] = {{20, 60}, {21, 60}, {30, 60}, {32, 60}, {35, 60},
                  {37, 60}, {50, 60}, {52, 60}, {53, 60}, {60, 60},
                  {61, 60}, {62, 60}, {70, 60}, {72, 61}, {75, 63},
                  {80, 70}, {86, 71}, {87, 74}, {89, 78}, {90, 80}};
#define N_CUDA_ARCHS (sizeof cuda_archs / sizeof cuda_archs[0])

/* ---- a small growable string ---- */

typedef struct strbuf {
  char *data;
  size_t len, cap;
  bool failed; /* an allocation failed */
} strbuf;

static void sb_put(strbuf *b, const char *s, size_t n) {
  if (b->failed) return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 128;
    while (cap < b->len + n + 1) cap *= 2;
    char *p = ts_realloc(b->data, cap);
    if (!p) {
      b->failed = true;
      return;
    }
    b->data = p;
    b->cap = cap;
  }
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

static void sb_str(strbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_int(strbuf *b, long long v) {
  char buf[32];
  sb_put(b, buf, (size_t)snprintf(buf, sizeof buf, "%lld", v));
}

/* ---- the parser ---- */

/* Parser state: the input and the target being built. */
typedef struct parser {
  const char *src;
  ts_target *t;
  ts_error *err;
} parser;

static int fail_at(parser *p, const char *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A TS_EINVAL at the column of `at` in the input. */
static int fail_at(parser *p, const char *at, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  int column = at ? (int)(at - p->src) + 1 : 0;
  return TS_ERR_AT(p->err, TS_EINVAL, 1, column, "bad target string: %s", msg);
}

static int oom(parser *p) {
  return TS_ERR(p->err, TS_ENOMEM, "target: out of memory");
}

void ts_target_free(ts_target *t) {
  if (!t) return;
  for (int i = 0; i < t->n_features; i++) free(t->features[i].name);
  free(t->features);
  free(t->cpu);
  free(t->triple);
  free(t->llvm_features);
  free(t->str);
  free(t);
}

static int find_feature(const ts_target *t, const char *name) {
  for (int i = 0; i < t->n_features; i++)
    if (strcmp(t->features[i].name, name) == 0) return i;
  return -1;
}

/* Adds a feature or, with override, changes an existing one's sign.
 * TS_OK, TS_ENOMEM, or TS_EINVAL over the feature limit. */
static int set_feature(parser *p, const char *name, size_t len, bool on,
                       bool override) {
  ts_target *t = p->t;
  char key[64];
  if (len >= sizeof key) len = sizeof key - 1;
  memcpy(key, name, len);
  key[len] = '\0';
  int i = find_feature(t, key);
  if (i >= 0) {
    if (override) t->features[i].on = on;
    return TS_OK;
  }
  if (t->n_features >= TS_TARGET_MAX_FEATURES)
    return fail_at(p, NULL, "more than %d features", TS_TARGET_MAX_FEATURES);
  if (t->n_features % 32 == 0) {
    feature_entry *f = ts_realloc(t->features, (size_t)(t->n_features + 32) *
                                                   sizeof *t->features);
    if (!f) return oom(p);
    t->features = f;
  }
  char *copy = ts_strdup(key);
  if (!copy) return oom(p);
  t->features[t->n_features++] = (feature_entry){copy, on};
  return TS_OK;
}

static bool feature_char(char c) {
  return islower((unsigned char)c) || isdigit((unsigned char)c) || c == '.' ||
         c == '-' || c == '_';
}

/* Parses a positive decimal integer in [lo, hi] from s[0, n). */
static bool parse_int(const char *s, size_t n, long long lo, long long hi,
                      long long *out) {
  if (n == 0 || n > 12) return false;
  long long v = 0;
  for (size_t i = 0; i < n; i++) {
    if (!isdigit((unsigned char)s[i])) return false;
    v = v * 10 + (s[i] - '0');
  }
  if (v < lo || v > hi) return false;
  *out = v;
  return true;
}

/* -mattr=ENTRY,ENTRY,...  ENTRY = ('+'|'-') NAME, NAME = [a-z0-9._-]+ */
static int parse_mattr(parser *p, const char *v, size_t n) {
  const char *end = v + n;
  /* Validate everything first, then apply: a failure leaves no partial
   * state that matters (the target is freed anyway). */
  for (const char *s = v; s <= end;) {
    const char *comma = memchr(s, ',', (size_t)(end - s));
    const char *e = comma ? comma : end;
    size_t len = (size_t)(e - s);
    if (len == 0) return fail_at(p, s, "empty entry in the -mattr list");
    if (s[0] != '+' && s[0] != '-')
      return fail_at(p, s,
                     "bad -mattr entry '%.*s': a feature starts with '+' or "
                     "'-'",
                     (int)len, s);
    if (len == 1 || len > 48)
      return fail_at(p, s, "bad -mattr entry '%.*s': bad feature name",
                     (int)len, s);
    for (size_t i = 1; i < len; i++)
      if (!feature_char(s[i]))
        return fail_at(p, s + i,
                       "bad -mattr entry '%.*s': character '%c' is not "
                       "allowed in a feature name",
                       (int)len, s, s[i]);
    /* Duplicates (with either sign) among the earlier entries. */
    for (const char *q = v; q < s;) {
      const char *qc = memchr(q, ',', (size_t)(end - q));
      const char *qe = qc ? qc : end;
      if ((size_t)(qe - q) == len && memcmp(q + 1, s + 1, len - 1) == 0)
        return fail_at(p, s, "feature '%.*s' listed twice in -mattr",
                       (int)(len - 1), s + 1);
      q = qe + 1;
    }
    s = e + 1;
  }
  for (const char *s = v; s < end;) {
    const char *comma = memchr(s, ',', (size_t)(end - s));
    const char *e = comma ? comma : end;
    int rc = set_feature(p, s + 1, (size_t)(e - s - 1), s[0] == '+', true);
    if (rc) return rc;
    s = e + 1;
  }
  return TS_OK;
}

/* Adds this host's features: every enabled one, and the disabled ones the
 * CPU table would otherwise imply. */
static int add_host_features(parser *p, unsigned implied) {
  char *host = LLVMGetHostCPUFeatures();
  int rc = TS_OK;
  for (const char *s = host ? host : ""; *s && rc == TS_OK;) {
    const char *comma = strchr(s, ',');
    size_t len = comma ? (size_t)(comma - s) : strlen(s);
    if (len > 1 && (s[0] == '+' || s[0] == '-')) {
      bool on = s[0] == '+';
      bool keep = on;
      for (size_t k = 0; !on && k < N_KNOWN_FEATURES; k++)
        if ((implied & (1u << k)) && strlen(known_features[k]) == len - 1 &&
            memcmp(known_features[k], s + 1, len - 1) == 0)
          keep = true;
      if (keep) rc = set_feature(p, s + 1, len - 1, on, false);
    }
    s += len + (comma ? 1 : 0);
  }
  LLVMDisposeMessage(host);
  return rc;
}

static int compare_features(const void *a, const void *b) {
  return strcmp(((const feature_entry *)a)->name,
                ((const feature_entry *)b)->name);
}

/* Builds the canonical string and the LLVM feature string. */
static int finish(parser *p) {
  ts_target *t = p->t;
  if (t->n_features > 1)
    qsort(t->features, (size_t)t->n_features, sizeof *t->features,
          compare_features);
  strbuf attrs = {0}, str = {0};
  sb_str(&attrs, "");
  if (t->kind == TS_TARGET_LLVM) {
    for (int i = 0; i < t->n_features; i++) {
      if (i) sb_str(&attrs, ",");
      sb_str(&attrs, t->features[i].on ? "+" : "-");
      sb_str(&attrs, t->features[i].name);
    }
    sb_str(&str, "llvm -mcpu=");
    sb_str(&str, t->cpu);
    if (t->n_features > 0) {
      sb_str(&str, " -mattr=");
      sb_str(&str, attrs.data ? attrs.data : "");
    }
    sb_str(&str, " -num-cores=");
    sb_int(&str, t->num_cores);
  } else {
    for (size_t i = 0; i < N_CUDA_ARCHS; i++)
      if (cuda_archs[i].sm == t->sm) {
        sb_str(&attrs, "+ptx");
        sb_int(&attrs, cuda_archs[i].ptx);
      }
    sb_str(&str, "cuda -arch=");
    sb_str(&str, t->cpu);
    sb_str(&str, " -max-threads-per-block=");
    sb_int(&str, t->max_threads_per_block);
    sb_str(&str, " -max-shared-memory-per-block=");
    sb_int(&str, t->max_shared_memory_per_block);
    sb_str(&str, " -max-registers-per-thread=");
    sb_int(&str, t->max_registers_per_thread);
  }
  t->llvm_features = attrs.data;
  t->str = str.data;
  if (attrs.failed || str.failed) return oom(p);
  return TS_OK;
}

static int online_cores(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1) return 1;
  return n > TS_TARGET_MAX_CORES ? TS_TARGET_MAX_CORES : (int)n;
}

/* One option token "-name=value" split into its parts. */
typedef struct option {
  const char *token, *value; /* token start; value start */
  size_t token_len, value_len;
} option;

/* The options of each kind, in canonical order. */
static const char *const llvm_options[] = {"-mcpu", "-mattr", "-num-cores",
                                           NULL};
static const char *const cuda_options[] = {"-arch", "-max-threads-per-block",
                                           "-max-shared-memory-per-block",
                                           "-max-registers-per-thread", NULL};

static int build_llvm(parser *p, option *opts) {
  ts_target *t = p->t;
  /* opts[i] follows llvm_options; token NULL when absent. */
  option *cpu = &opts[0], *mattr = &opts[1], *cores = &opts[2];
  char *host_cpu = LLVMGetHostCPUName();
  bool native = !cpu->token ||
                (cpu->value_len == 6 && memcmp(cpu->value, "native", 6) == 0);
  t->cpu = native ? ts_strdup(host_cpu && host_cpu[0] ? host_cpu : "generic")
                  : ts_strndup(cpu->value, cpu->value_len);
  bool is_host_name = t->cpu && host_cpu && strcmp(t->cpu, host_cpu) == 0;
  LLVMDisposeMessage(host_cpu);
  if (!t->cpu) return oom(p);
  const cpu_entry *entry = find_cpu(t->cpu);
  if (!entry && !is_host_name)
    return fail_at(p, cpu->value, "unknown CPU '%s' in -mcpu", t->cpu);
  unsigned implied = entry ? entry->features : 0;
  int rc;
  if (native && (rc = add_host_features(p, implied))) return rc;
  if (mattr->token && (rc = parse_mattr(p, mattr->value, mattr->value_len)))
    return rc;
  for (size_t k = 0; k < N_KNOWN_FEATURES; k++)
    if ((implied & (1u << k)) &&
        (rc = set_feature(p, known_features[k], strlen(known_features[k]), true,
                          false)))
      return rc;
  long long n = online_cores();
  if (cores->token &&
      !parse_int(cores->value, cores->value_len, 1, TS_TARGET_MAX_CORES, &n))
    return fail_at(p, cores->value,
                   "bad -num-cores value '%.*s' (want an integer in 1..%d)",
                   (int)cores->value_len, cores->value, TS_TARGET_MAX_CORES);
  t->num_cores = (int)n;
  char *triple = LLVMGetDefaultTargetTriple();
  t->triple = ts_strdup(triple ? triple : "x86_64-unknown-linux-gnu");
  LLVMDisposeMessage(triple);
  if (!t->triple) return oom(p);
  return TS_OK;
}

static int build_cuda(parser *p, option *opts, const char *kind_token) {
  ts_target *t = p->t;
  option *arch = &opts[0];
  if (!arch->token)
    return fail_at(p, kind_token,
                   "a cuda target needs -arch=sm_XX (for example "
                   "'cuda -arch=sm_80')");
  const char *v = arch->value;
  size_t n = arch->value_len;
  if (n < 3 || memcmp(v, "sm_", 3) != 0)
    return fail_at(p, v, "bad -arch value '%.*s' (want sm_XX, e.g. sm_80)",
                   (int)n, v);
  long long sm = 0;
  if (!parse_int(v + 3, n - 3, 0, 9999, &sm))
    return fail_at(p, v + 3, "sm_ must be followed by a number in '-arch=%.*s'",
                   (int)n, v);
  bool known = false;
  for (size_t i = 0; i < N_CUDA_ARCHS; i++)
    if (cuda_archs[i].sm == sm) known = true;
  if (!known)
    return fail_at(p, v,
                   "unsupported CUDA architecture '%.*s' (LLVM 19 knows sm_20 "
                   "to sm_90)",
                   (int)n, v);
  t->sm = (int)sm;
  char cpu[16];
  snprintf(cpu, sizeof cpu, "sm_%d", t->sm);
  struct {
    option *opt;
    long long lo, hi, def;
    int *dst;
  } limits[] = {
      {&opts[1], 1, 1024, CUDA_DEFAULT_THREADS, &t->max_threads_per_block},
      {&opts[2], 1, 1 << 20, CUDA_DEFAULT_SHARED,
       &t->max_shared_memory_per_block},
      {&opts[3], 1, 255, CUDA_DEFAULT_REGISTERS, &t->max_registers_per_thread},
  };
  for (int i = 0; i < 3; i++) {
    option *o = limits[i].opt;
    long long value = limits[i].def;
    if (o->token &&
        !parse_int(o->value, o->value_len, limits[i].lo, limits[i].hi, &value))
      return fail_at(p, o->value,
                     "bad %s value '%.*s' (want an integer in %lld..%lld)",
                     cuda_options[i + 1], (int)o->value_len, o->value,
                     limits[i].lo, limits[i].hi);
    *limits[i].dst = (int)value;
  }
  t->cpu = ts_strdup(cpu);
  t->triple = ts_strdup("nvptx64-nvidia-cuda");
  if (!t->cpu || !t->triple) return oom(p);
  return TS_OK;
}

/* target = KIND option*   KIND = 'llvm' | 'cuda'
 * option = '-' NAME '=' VALUE   (separated by blanks; each option once) */
static int parse_target(parser *p) {
  const char *s = p->src;
  while (isspace((unsigned char)*s)) s++;
  if (!*s) return fail_at(p, s, "empty target string (want llvm or cuda)");
  const char *kind = s;
  while (*s && !isspace((unsigned char)*s)) s++;
  size_t kind_len = (size_t)(s - kind);
  if (kind_len == 4 && memcmp(kind, "llvm", 4) == 0)
    p->t->kind = TS_TARGET_LLVM;
  else if (kind_len == 4 && memcmp(kind, "cuda", 4) == 0)
    p->t->kind = TS_TARGET_CUDA;
  else
    return fail_at(p, kind, "unknown target kind '%.*s' (want llvm or cuda)",
                   (int)kind_len, kind);
  const char *const *names =
      p->t->kind == TS_TARGET_LLVM ? llvm_options : cuda_options;
  option opts[4];
  memset(opts, 0, sizeof opts);
  for (;;) {
    while (isspace((unsigned char)*s)) s++;
    if (!*s) break;
    const char *tok = s;
    while (*s && !isspace((unsigned char)*s)) s++;
    size_t tok_len = (size_t)(s - tok);
    if (tok[0] != '-')
      return fail_at(p, tok,
                     "unexpected token '%.*s' (options look like -name=value)",
                     (int)tok_len, tok);
    const char *eq = memchr(tok, '=', tok_len);
    size_t name_len = eq ? (size_t)(eq - tok) : tok_len;
    int index = -1;
    for (int i = 0; names[i]; i++)
      if (strlen(names[i]) == name_len && memcmp(names[i], tok, name_len) == 0)
        index = i;
    if (index < 0)
      return fail_at(p, tok, "unknown option '%.*s' for target kind '%s'",
                     (int)name_len, tok,
                     p->t->kind == TS_TARGET_LLVM ? "llvm" : "cuda");
    if (!eq)
      return fail_at(p, tok, "option '%.*s' needs a value ('%.*s=...')",
                     (int)name_len, tok, (int)name_len, tok);
    if (eq + 1 == s)
      return fail_at(p, tok, "option '%.*s' has an empty value", (int)name_len,
                     tok);
    if (opts[index].token)
      return fail_at(p, tok, "option '%s' given twice", names[index]);
    opts[index] = (option){tok, eq + 1, tok_len, (size_t)(s - eq - 1)};
  }
  int rc = p->t->kind == TS_TARGET_LLVM ? build_llvm(p, opts)
                                        : build_cuda(p, opts, kind);
  return rc ? rc : finish(p);
}

int ts_target_parse(const char *s, ts_target **out, ts_error *err) {
  if (!s) return TS_ERR(err, TS_EINVAL, "bad target string: none given");
  ts_target *t = ts_calloc(1, sizeof *t);
  if (!t) return TS_ERR(err, TS_ENOMEM, "target: out of memory");
  parser p = {s, t, err};
  int rc = parse_target(&p);
  if (rc) {
    ts_target_free(t);
    return rc;
  }
  *out = t;
  return TS_OK;
}

int ts_target_host(ts_target **out, ts_error *err) {
  return ts_target_parse("llvm -mcpu=native", out, err);
}

ts_target *ts_target_copy(const ts_target *t) {
  ts_target *copy = NULL;
  if (ts_target_parse(t->str, &copy, NULL) != TS_OK) return NULL;
  return copy;
}

const char *ts_target_str(const ts_target *t) { return t->str; }

bool ts_target_equal(const ts_target *a, const ts_target *b) {
  return strcmp(a->str, b->str) == 0;
}

ts_target_kind ts_target_get_kind(const ts_target *t) { return t->kind; }

bool ts_target_is_cuda(const ts_target *t) { return t->kind == TS_TARGET_CUDA; }

const char *ts_target_triple(const ts_target *t) { return t->triple; }

const char *ts_target_cpu(const ts_target *t) { return t->cpu; }

const char *ts_target_llvm_features(const ts_target *t) {
  return t->llvm_features;
}

/* depth bounds the walk over `requires` (it has no cycles). */
static bool has_feature(const ts_target *t, const char *name, int depth) {
  int i = find_feature(t, name);
  if (i < 0 || !t->features[i].on || depth > 8) return false;
  for (size_t k = 0; k < sizeof requires / sizeof requires[0]; k++)
    if (strcmp(requires[k].feature, name) == 0 &&
        find_feature(t, requires[k].needs) >= 0 &&
        !has_feature(t, requires[k].needs, depth + 1))
      return false;
  return true;
}

bool ts_target_has_feature(const ts_target *t, const char *feature) {
  if (t->kind != TS_TARGET_LLVM || !feature) return false;
  return has_feature(t, feature, 0);
}

int ts_target_num_features(const ts_target *t) { return t->n_features; }

const char *ts_target_feature(const ts_target *t, int i, bool *enabled) {
  if (i < 0 || i >= t->n_features) return NULL;
  if (enabled) *enabled = t->features[i].on;
  return t->features[i].name;
}

int ts_target_num_cores(const ts_target *t) {
  return t->kind == TS_TARGET_LLVM ? t->num_cores : 0;
}

int ts_target_vector_bits(const ts_target *t) {
  if (t->kind == TS_TARGET_CUDA) return 32;
  if (ts_target_has_feature(t, "avx512f")) return 512;
  if (ts_target_has_feature(t, "avx2") || ts_target_has_feature(t, "avx"))
    return 256;
  return 128;
}

int ts_target_vector_registers(const ts_target *t) {
  if (t->kind == TS_TARGET_CUDA) return 0;
  return ts_target_has_feature(t, "avx512f") ? 32 : 16;
}

/* Appends text to buf (size bytes, NUL-terminated, cut when full). */
static void append(char *buf, size_t size, const char *text) {
  size_t len = strlen(buf);
  if (len + 1 < size) snprintf(buf + len, size - len, "%s", text);
}

const char *ts_target_isa(const ts_target *t, char *buf, size_t size) {
  if (!size) return buf;
  buf[0] = '\0';
  if (t->kind == TS_TARGET_CUDA) {
    snprintf(buf, size, "%s", t->cpu);
    return buf;
  }
  const char *level = ts_target_has_feature(t, "avx512f")  ? "AVX-512"
                      : ts_target_has_feature(t, "avx2")   ? "AVX2"
                      : ts_target_has_feature(t, "avx")    ? "AVX"
                      : ts_target_has_feature(t, "sse4.2") ? "SSE4.2"
                                                           : "SSE2";
  append(buf, size, level);
  if (ts_target_has_feature(t, "avx2") && !ts_target_has_feature(t, "fma"))
    append(buf, size, " (no FMA)");
  static const struct {
    const char *feature, *name;
  } extensions[] = {
      {"avx512vnni", "VNNI"},        {"avxvnni", "AVX-VNNI"},
      {"avx512bf16", "AVX512-BF16"}, {"avx512fp16", "AVX512-FP16"},
      {"amx-bf16", "AMX-BF16"},      {"amx-int8", "AMX-INT8"},
      {"amx-fp16", "AMX-FP16"},
  };
  for (size_t i = 0; i < sizeof extensions / sizeof extensions[0]; i++)
    if (ts_target_has_feature(t, extensions[i].feature)) {
      append(buf, size, " + ");
      append(buf, size, extensions[i].name);
    }
  return buf;
}

bool ts_target_dtype_native(const ts_target *t, ts_dtype d) {
  if (t->kind == TS_TARGET_CUDA) return true;
  if (d.code == TS_DT_BFLOAT)
    return ts_target_has_feature(t, "avx512bf16") ||
           ts_target_has_feature(t, "amx-bf16");
  if (d.code == TS_DT_FLOAT && d.bits == 16) return false;
  return true;
}

const char *ts_target_dtype_path(const ts_target *t, ts_dtype d, char *buf,
                                 size_t size) {
  if (!size) return buf;
  if (t->kind == TS_TARGET_CUDA) {
    const char *mma =
        (d.code == TS_DT_BFLOAT || (d.code == TS_DT_FLOAT && d.bits == 16)) &&
                t->sm >= 80
            ? " (tensor-core mma.sync where tensorized)"
            : "";
    snprintf(buf, size, "one lane per thread%s", mma);
    return buf;
  }
  int bits = ts_target_vector_bits(t), regs = ts_target_vector_registers(t);
  bool fma = ts_target_has_feature(t, "fma");
  if (d.code == TS_DT_BFLOAT) {
    if (ts_target_has_feature(t, "amx-bf16"))
      snprintf(buf, size,
               "AMX tiles (tdpbf16ps) where tensorized, else "
               "float32");
    else if (ts_target_has_feature(t, "avx512bf16"))
      snprintf(buf, size,
               "AVX512-BF16 dot products (vdpbf16ps) where "
               "tensorized, else float32");
    else
      snprintf(buf, size,
               "computed in float32 (converted on load, rounded on store): "
               "no AVX512-BF16 or AMX");
    return buf;
  }
  if (d.code == TS_DT_FLOAT && d.bits == 16) {
    snprintf(buf, size, "computed in float32 (%s)",
             ts_target_has_feature(t, "f16c")
                 ? "F16C conversions"
                 : "conversions written out: no F16C");
    return buf;
  }
  if (d.code == TS_DT_FLOAT) {
    snprintf(buf, size, "%s on %d-bit vectors (%d lanes, %d registers)",
             fma ? "FMA" : "multiply and add", bits, bits / d.bits, regs);
    return buf;
  }
  if ((d.code == TS_DT_INT || d.code == TS_DT_UINT) && d.bits == 8) {
    if (ts_target_has_feature(t, "amx-int8"))
      snprintf(buf, size, "AMX tiles (tdpbssd/tdpbusd) where tensorized");
    else if (ts_target_has_feature(t, "avx512vnni"))
      snprintf(buf, size, "VNNI dot products (vpdpbusd) where tensorized");
    else
      snprintf(buf, size,
               "widened to int16/int32 multiply-adds on %d-bit vectors: no "
               "VNNI",
               bits);
    return buf;
  }
  snprintf(buf, size, "integer operations on %d-bit vectors", bits);
  return buf;
}

int ts_target_sm(const ts_target *t) { return t->sm; }

int ts_target_max_threads_per_block(const ts_target *t) {
  return t->max_threads_per_block;
}

int ts_target_max_shared_memory_per_block(const ts_target *t) {
  return t->max_shared_memory_per_block;
}

int ts_target_max_registers_per_thread(const ts_target *t) {
  return t->max_registers_per_thread;
}
