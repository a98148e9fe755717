/*
 * target_x86.c — the x86-64 target family (`llvm -mcpu=NAME -mattr=...
 * -num-cores=N`): parsing its options (resolving `-mcpu=native` through
 * LLVM's host detection), the CPU features it queries, its vector width and
 * registers, and the hooks code generation takes from it (the CPU kernel
 * ABI of runtime/runtime.h, parallel loops through the runtime's thread
 * pool, libm replacements, the x86 tensor intrinsics of
 * emit_intrin_x86.c). Its artifacts are relocatable objects the runtime
 * loads in process; the tuner's "cpu" rule list searches it.
 *
 * The C API cannot say which features a named CPU implies, so a table here
 * lists, for every x86 CPU name LLVM 19 knows, the features tessera queries;
 * parsing adds them to the stored set, which makes the canonical string
 * self-describing: the stored features alone answer has_feature.
 */
#include "codegen/emit_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <llvm-c/Target.h>

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

/* Adds this host's features: every enabled one, and the disabled ones the
 * CPU table would otherwise imply. */
static int add_host_features(target_parser *p, unsigned implied) {
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
      if (keep) rc = target_set_feature(p, s + 1, len - 1, on, false);
    }
    s += len + (comma ? 1 : 0);
  }
  LLVMDisposeMessage(host);
  return rc;
}

static int online_cores(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1) return 1;
  return n > TS_TARGET_MAX_CORES ? TS_TARGET_MAX_CORES : (int)n;
}

/* ---- options ---- */

static const char *const options[] = {"-mcpu", "-mattr", "-num-cores", NULL};

static int build(target_parser *p, const target_option *opts,
                 const char *kind) {
  (void)kind;
  ts_target *t = p->t;
  /* opts[i] follows options; token NULL when absent. */
  const target_option *cpu = &opts[0], *mattr = &opts[1], *cores = &opts[2];
  char *host_cpu = LLVMGetHostCPUName();
  bool native = !cpu->token ||
                (cpu->value_len == 6 && memcmp(cpu->value, "native", 6) == 0);
  t->cpu = native ? ts_strdup(host_cpu && host_cpu[0] ? host_cpu : "generic")
                  : ts_strndup(cpu->value, cpu->value_len);
  bool is_host_name = t->cpu && host_cpu && strcmp(t->cpu, host_cpu) == 0;
  LLVMDisposeMessage(host_cpu);
  if (!t->cpu) return target_oom(p);
  const cpu_entry *entry = find_cpu(t->cpu);
  if (!entry && !is_host_name)
    return target_fail_at(p, cpu->value, "unknown CPU '%s' in -mcpu", t->cpu);
  unsigned implied = entry ? entry->features : 0;
  int rc;
  if (native && (rc = add_host_features(p, implied))) return rc;
  if (mattr->token &&
      (rc = target_parse_mattr(p, mattr->value, mattr->value_len)))
    return rc;
  for (size_t k = 0; k < N_KNOWN_FEATURES; k++)
    if ((implied & (1u << k)) &&
        (rc = target_set_feature(p, known_features[k],
                                 strlen(known_features[k]), true, false)))
      return rc;
  long long n = online_cores();
  if (cores->token && !target_parse_int(cores->value, cores->value_len, 1,
                                        TS_TARGET_MAX_CORES, &n))
    return target_fail_at(
        p, cores->value,
        "bad -num-cores value '%.*s' (want an integer in 1..%d)",
        (int)cores->value_len, cores->value, TS_TARGET_MAX_CORES);
  t->num_cores = (int)n;
  char *triple = LLVMGetDefaultTargetTriple();
  t->triple = ts_strdup(triple ? triple : "x86_64-unknown-linux-gnu");
  LLVMDisposeMessage(triple);
  if (!t->triple) return target_oom(p);
  return TS_OK;
}

static void print(const ts_target *t, strbuf *str, strbuf *attrs) {
  for (int i = 0; i < t->n_features; i++) {
    if (i) sb_puts(attrs, ",");
    sb_puts(attrs, t->features[i].on ? "+" : "-");
    sb_puts(attrs, t->features[i].name);
  }
  sb_puts(str, "llvm -mcpu=");
  sb_puts(str, t->cpu);
  if (t->n_features > 0) {
    sb_puts(str, " -mattr=");
    sb_puts(str, attrs->data ? attrs->data : "");
  }
  sb_puts(str, " -num-cores=");
  sb_printf(str, "%lld", (long long)(t->num_cores));
}

/* ---- queries ---- */

/* depth bounds the walk over `requires` (it has no cycles). */
static bool has_feature_at(const ts_target *t, const char *name, int depth) {
  int i = target_find_feature(t, name);
  if (i < 0 || !t->features[i].on || depth > 8) return false;
  for (size_t k = 0; k < sizeof requires / sizeof requires[0]; k++)
    if (strcmp(requires[k].feature, name) == 0 &&
        target_find_feature(t, requires[k].needs) >= 0 &&
        !has_feature_at(t, requires[k].needs, depth + 1))
      return false;
  return true;
}

static bool has_feature(const ts_target *t, const char *feature) {
  return has_feature_at(t, feature, 0);
}

static int vector_bits(const ts_target *t) {
  if (has_feature(t, "avx512f")) return 512;
  if (has_feature(t, "avx2") || has_feature(t, "avx")) return 256;
  return 128;
}

static int vector_registers(const ts_target *t) {
  return has_feature(t, "avx512f") ? 32 : 16;
}

static int vector_lanes(const ts_target *t, ts_dtype d) {
  int bits = d.code == TS_DT_BOOL ? 8 : d.bits;
  int lanes = bits > 0 ? vector_bits(t) / bits : 1;
  return lanes > 1 ? lanes : 1;
}

static void isa(const ts_target *t, char *buf, size_t size) {
  const char *level = has_feature(t, "avx512f")  ? "AVX-512"
                      : has_feature(t, "avx2")   ? "AVX2"
                      : has_feature(t, "avx")    ? "AVX"
                      : has_feature(t, "sse4.2") ? "SSE4.2"
                                                 : "SSE2";
  target_append(buf, size, level);
  if (has_feature(t, "avx2") && !has_feature(t, "fma"))
    target_append(buf, size, " (no FMA)");
  static const struct {
    const char *feature, *name;
  } extensions[] = {
      {"avx512vnni", "VNNI"},        {"avxvnni", "AVX-VNNI"},
      {"avx512bf16", "AVX512-BF16"}, {"avx512fp16", "AVX512-FP16"},
      {"amx-bf16", "AMX-BF16"},      {"amx-int8", "AMX-INT8"},
      {"amx-fp16", "AMX-FP16"},
  };
  for (size_t i = 0; i < sizeof extensions / sizeof extensions[0]; i++)
    if (has_feature(t, extensions[i].feature)) {
      target_append(buf, size, " + ");
      target_append(buf, size, extensions[i].name);
    }
}

static bool dtype_native(const ts_target *t, ts_dtype d) {
  if (d.code == TS_DT_BFLOAT)
    return has_feature(t, "avx512bf16") || has_feature(t, "amx-bf16");
  if (d.code == TS_DT_FLOAT && d.bits == 16) return false;
  return true;
}

static void dtype_path(const ts_target *t, ts_dtype d, char *buf, size_t size) {
  int bits = vector_bits(t), regs = vector_registers(t);
  bool fma = has_feature(t, "fma");
  if (d.code == TS_DT_BFLOAT) {
    if (has_feature(t, "amx-bf16"))
      snprintf(buf, size,
               "AMX tiles (tdpbf16ps) where tensorized, else "
               "float32");
    else if (has_feature(t, "avx512bf16"))
      snprintf(buf, size,
               "AVX512-BF16 dot products (vdpbf16ps) where "
               "tensorized, else float32");
    else
      snprintf(buf, size,
               "computed in float32 (converted on load, rounded on store): "
               "no AVX512-BF16 or AMX");
    return;
  }
  if (d.code == TS_DT_FLOAT && d.bits == 16) {
    snprintf(buf, size, "computed in float32 (%s)",
             has_feature(t, "f16c") ? "F16C conversions"
                                    : "conversions written out: no F16C");
    return;
  }
  if (d.code == TS_DT_FLOAT) {
    snprintf(buf, size, "%s on %d-bit vectors (%d lanes, %d registers)",
             fma ? "FMA" : "multiply and add", bits, vector_lanes(t, d), regs);
    return;
  }
  if ((d.code == TS_DT_INT || d.code == TS_DT_UINT) && d.bits == 8) {
    if (has_feature(t, "amx-int8"))
      snprintf(buf, size, "AMX tiles (tdpbssd/tdpbusd) where tensorized");
    else if (has_feature(t, "avx512vnni"))
      snprintf(buf, size, "VNNI dot products (vpdpbusd) where tensorized");
    else
      snprintf(buf, size,
               "widened to int16/int32 multiply-adds on %d-bit vectors: no "
               "VNNI",
               bits);
    return;
  }
  snprintf(buf, size, "integer operations on %d-bit vectors", bits);
}

/* ---- code generation ---- */

/* F16C converts float16 both ways; AVX512-BF16 widens bfloat16, but its
 * narrowing flushes subnormal inputs to zero, so float32 -> bfloat16 is
 * always written out (codegen/convert.c). */
static bool native_half(const emitter *e, bool bf16, bool narrow) {
  if (bf16 && narrow) return false;
  return has_feature(e->target, bf16 ? "avx512bf16" : "f16c");
}

static void llvm_init(void) {
  LLVMInitializeX86TargetInfo();
  LLVMInitializeX86Target();
  LLVMInitializeX86TargetMC();
  LLVMInitializeX86AsmPrinter();
}

/* sfence: orders the non-temporal stores before it (TS_ANN_NONTEMPORAL). */
static void x86_sfence(emitter *e) {
  emit_call_fixed(e, "llvm.x86.sse.sfence", NULL, 0);
}

static const emit_hooks emit = {
    .kernel = emit_cpu_kernel,
    .parallel_loop = emit_parallel,
    .thread_loop = NULL,
    .scoped_alloc = NULL,
    .heap_alloc = true,
    .fn_attrs = emit_cpu_fn_attrs,
    .exp = emit_cpu_exp,
    .math = NULL,
    .libm = true,
    .native_half = native_half,
    .intrinsics = emit_x86_intrinsics,
    .store_fence = x86_sfence,
};

const target_family target_x86 = {
    .facts = {.kind = "llvm",
              .family = "x86",
              .rules = "cpu",
              .is_gpu = false,
              .runs_on_host = true,
              .artifact = TS_ARTIFACT_CPU_OBJECT},
    .options = options,
    .build = build,
    .print = print,
    .has_feature = has_feature,
    .vector_bits = vector_bits,
    .vector_registers = vector_registers,
    .vector_lanes = vector_lanes,
    .isa = isa,
    .dtype_native = dtype_native,
    .dtype_path = dtype_path,
    .llvm_init = llvm_init,
    .output = LLVMObjectFile,
    .emit = &emit,
    .finish_artifact = NULL,
};
