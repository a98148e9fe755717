/*
 * target_nvptx.c — the NVPTX target family (`cuda -arch=sm_XX
 * -max-threads-per-block=N -max-shared-memory-per-block=N
 * -max-registers-per-thread=N`): parsing its options, its per-block limits,
 * and the hooks code generation takes from it (PTX kernels with their
 * launch geometry, loops bound to blockIdx/threadIdx, shared memory, the
 * GPU math without libm and the CUDA intrinsics of emit_intrin_nvptx.c).
 * Its artifacts are PTX text the CUDA driver loads on a device
 * (runtime/cuda.c, through an RPC worker); the tuner's "gpu" rule list
 * searches it.
 */
#include "codegen/emit_internal.h"

#include <stdio.h>
#include <string.h>

#include <llvm-c/Target.h>

#define CUDA_DEFAULT_THREADS 1024
#define CUDA_DEFAULT_SHARED 49152
#define CUDA_DEFAULT_REGISTERS 255

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

/* ---- options ---- */

static const char *const options[] = {"-arch", "-max-threads-per-block",
                                      "-max-shared-memory-per-block",
                                      "-max-registers-per-thread", NULL};

static int build(target_parser *p, const target_option *opts,
                 const char *kind) {
  ts_target *t = p->t;
  const target_option *arch = &opts[0];
  if (!arch->token)
    return target_fail_at(p, kind,
                          "a cuda target needs -arch=sm_XX (for example "
                          "'cuda -arch=sm_80')");
  const char *v = arch->value;
  size_t n = arch->value_len;
  if (n < 3 || memcmp(v, "sm_", 3) != 0)
    return target_fail_at(
        p, v, "bad -arch value '%.*s' (want sm_XX, e.g. sm_80)", (int)n, v);
  long long sm = 0;
  if (!target_parse_int(v + 3, n - 3, 0, 9999, &sm))
    return target_fail_at(p, v + 3,
                          "sm_ must be followed by a number in '-arch=%.*s'",
                          (int)n, v);
  bool known = false;
  for (size_t i = 0; i < N_CUDA_ARCHS; i++)
    if (cuda_archs[i].sm == sm) known = true;
  if (!known)
    return target_fail_at(p, v,
                          "unsupported CUDA architecture '%.*s' (LLVM 19 "
                          "knows sm_20 to sm_90)",
                          (int)n, v);
  t->sm = (int)sm;
  char cpu[16];
  snprintf(cpu, sizeof cpu, "sm_%d", t->sm);
  struct {
    const target_option *opt;
    long long lo, hi, def;
    int *dst;
  } limits[] = {
      {&opts[1], 1, 1024, CUDA_DEFAULT_THREADS, &t->max_threads_per_block},
      {&opts[2], 1, 1 << 20, CUDA_DEFAULT_SHARED,
       &t->max_shared_memory_per_block},
      {&opts[3], 1, 255, CUDA_DEFAULT_REGISTERS, &t->max_registers_per_thread},
  };
  for (int i = 0; i < 3; i++) {
    const target_option *o = limits[i].opt;
    long long value = limits[i].def;
    if (o->token && !target_parse_int(o->value, o->value_len, limits[i].lo,
                                      limits[i].hi, &value))
      return target_fail_at(
          p, o->value, "bad %s value '%.*s' (want an integer in %lld..%lld)",
          options[i + 1], (int)o->value_len, o->value, limits[i].lo,
          limits[i].hi);
    *limits[i].dst = (int)value;
  }
  t->cpu = ts_strdup(cpu);
  t->triple = ts_strdup("nvptx64-nvidia-cuda");
  if (!t->cpu || !t->triple) return target_oom(p);
  return TS_OK;
}

static void print(const ts_target *t, strbuf *str, strbuf *attrs) {
  for (size_t i = 0; i < N_CUDA_ARCHS; i++)
    if (cuda_archs[i].sm == t->sm) {
      sb_puts(attrs, "+ptx");
      sb_printf(attrs, "%lld", (long long)(cuda_archs[i].ptx));
    }
  sb_puts(str, "cuda -arch=");
  sb_puts(str, t->cpu);
  sb_puts(str, " -max-threads-per-block=");
  sb_printf(str, "%lld", (long long)(t->max_threads_per_block));
  sb_puts(str, " -max-shared-memory-per-block=");
  sb_printf(str, "%lld", (long long)(t->max_shared_memory_per_block));
  sb_puts(str, " -max-registers-per-thread=");
  sb_printf(str, "%lld", (long long)(t->max_registers_per_thread));
}

/* ---- queries ---- */

/* "sm_NN": the architecture is sm_NN or newer. */
static bool has_feature(const ts_target *t, const char *feature) {
  long long sm;
  return strncmp(feature, "sm_", 3) == 0 &&
         target_parse_int(feature + 3, strlen(feature + 3), 0, 9999, &sm) &&
         t->sm >= sm;
}

/* One lane per thread. */
static int vector_bits(const ts_target *t) { return 32; }
static int vector_registers(const ts_target *t) { return 0; }
static int vector_lanes(const ts_target *t, ts_dtype d) { return 1; }

static void isa(const ts_target *t, char *buf, size_t size) {
  snprintf(buf, size, "%s", t->cpu);
}

static bool dtype_native(const ts_target *t, ts_dtype d) { return true; }

static void dtype_path(const ts_target *t, ts_dtype d, char *buf, size_t size) {
  const char *mma =
      (d.code == TS_DT_BFLOAT || (d.code == TS_DT_FLOAT && d.bits == 16)) &&
              t->sm >= 80
          ? " (tensor-core mma.sync where tensorized)"
          : "";
  snprintf(buf, size, "one lane per thread%s", mma);
}

/* ---- code generation ---- */

static void llvm_init(void) {
  LLVMInitializeNVPTXTargetInfo();
  LLVMInitializeNVPTXTarget();
  LLVMInitializeNVPTXTargetMC();
  LLVMInitializeNVPTXAsmPrinter();
}

/* Every conversion with float16 and bfloat16 is an instruction. */
static bool native_half(const emitter *e, bool bf16, bool narrow) {
  return true;
}

/* The launch geometry the emitter collected from the thread-bound loops. */
static void finish_artifact(const emitter *e, ts_artifact *a) {
  for (int i = 0; i < 3; i++) {
    a->grid[i] = (unsigned)(e->grid[i] > 0 ? e->grid[i] : 1);
    a->block[i] = (unsigned)(e->block[i] > 0 ? e->block[i] : 1);
  }
}

static const emit_hooks emit = {
    .kernel = emit_cuda_kernel,
    .parallel_loop = emit_gpu_parallel,
    .thread_loop = emit_thread_loop,
    .scoped_alloc = emit_shared_alloc,
    .heap_alloc = false,
    .fn_attrs = NULL,
    .exp = emit_gpu_exp,
    .math = emit_gpu_math,
    .libm = false,
    .native_half = native_half,
    .intrinsics = emit_nvptx_intrinsics,
};

const target_family target_nvptx = {
    .facts = {.kind = "cuda",
              .family = "nvptx",
              .rules = "gpu",
              .is_gpu = true,
              .runs_on_host = false,
              .artifact = TS_ARTIFACT_PTX},
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
    .output = LLVMAssemblyFile,
    .emit = &emit,
    .finish_artifact = finish_artifact,
};
