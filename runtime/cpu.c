/*
 * cpu.c — what the host CPU can run: feature queries by cpuid (checked
 * against the register state the OS enables in XCR0), the Linux AMX
 * permission request, and the size of the last-level cache for the
 * evaluator's cache flush.
 */
#include "runtime/internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#endif

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

/* Where a feature's bit lives: cpuid leaf/subleaf, register, bit; and the
 * XCR0 state components the OS must enable for it. */
typedef struct feature {
  const char *name;
  unsigned leaf, subleaf;
  char reg; /* 'b', 'c' or 'd' (ebx/ecx/edx) or 'a' */
  unsigned bit;
  uint64_t xcr0; /* required XCR0 bits */
} feature;

#define XCR0_AVX 0x6ull     /* SSE + AVX state */
#define XCR0_AVX512 0xe6ull /* + opmask, ZMM_Hi256, Hi16_ZMM */
#define XCR0_AMX 0x60000ull /* XTILECFG + XTILEDATA */

static const feature features[] = {
    {"sse4.2", 1, 0, 'c', 20, 0},
    {"avx", 1, 0, 'c', 28, XCR0_AVX},
    {"fma", 1, 0, 'c', 12, XCR0_AVX},
    {"f16c", 1, 0, 'c', 29, XCR0_AVX},
    {"avx2", 7, 0, 'b', 5, XCR0_AVX},
    {"avx512f", 7, 0, 'b', 16, XCR0_AVX512},
    {"avx512dq", 7, 0, 'b', 17, XCR0_AVX512},
    {"avx512cd", 7, 0, 'b', 28, XCR0_AVX512},
    {"avx512bw", 7, 0, 'b', 30, XCR0_AVX512},
    {"avx512vl", 7, 0, 'b', 31, XCR0_AVX512},
    {"avx512vnni", 7, 0, 'c', 11, XCR0_AVX512},
    {"avx512bf16", 7, 1, 'a', 5, XCR0_AVX512},
    {"avx512fp16", 7, 0, 'd', 23, XCR0_AVX512},
    {"avxvnni", 7, 1, 'a', 4, XCR0_AVX},
    {"amx-bf16", 7, 0, 'd', 22, XCR0_AMX},
    {"amx-tile", 7, 0, 'd', 24, XCR0_AMX},
    {"amx-int8", 7, 0, 'd', 25, XCR0_AMX},
    {"amx-fp16", 7, 1, 'a', 21, XCR0_AMX},
};
#define N_FEATURES (sizeof features / sizeof features[0])

static const char *const feature_names[] = {
    "sse4.2",     "avx",        "fma",        "f16c",     "avx2",
    "avx512f",    "avx512dq",   "avx512cd",   "avx512bw", "avx512vl",
    "avx512vnni", "avx512bf16", "avx512fp16", "avxvnni",  "amx-bf16",
    "amx-tile",   "amx-int8",   "amx-fp16",   NULL};

const char *const *ts_rt_cpu_feature_names(void) { return feature_names; }

#if defined(__x86_64__)
static uint64_t read_xcr0(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) /* OSXSAVE */
    return 0;
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((uint64_t)hi << 32) | lo;
}

static bool has_feature(const feature *f) {
  if (f->leaf > (unsigned)__get_cpuid_max(0, NULL)) return false;
  unsigned r[4] = {0, 0, 0, 0}; /* eax ebx ecx edx */
  if (f->subleaf > 0) {
    /* Leaf 7 reports its highest subleaf in eax of subleaf 0. */
    __cpuid_count(f->leaf, 0, r[0], r[1], r[2], r[3]);
    if (f->subleaf > r[0]) return false;
  }
  __cpuid_count(f->leaf, f->subleaf, r[0], r[1], r[2], r[3]);
  int index = f->reg == 'a' ? 0 : f->reg == 'b' ? 1 : f->reg == 'c' ? 2 : 3;
  if (!(r[index] & (1u << f->bit))) return false;
  return (read_xcr0() & f->xcr0) == f->xcr0;
}
#else
static bool has_feature(const feature *f) {
  (void)f;
  return false;
}
#endif

int ts_rt_cpu_has(const char *name) {
  if (!name) return TS_EINVAL;
  for (size_t i = 0; i < N_FEATURES; i++)
    if (strcmp(features[i].name, name) == 0)
      return has_feature(&features[i]) ? 1 : 0;
  return TS_EINVAL;
}

/* The outcome of the one AMX request of this process. */
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;
static int amx_errno; /* 0: granted; else the errno of arch_prctl */

static void request_amx(void) {
#if defined(__x86_64__) && defined(SYS_arch_prctl)
  if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0)
    amx_errno = errno ? errno : EPERM;
#else
  amx_errno = ENOSYS;
#endif
}

int ts_rt_enable_amx(ts_error *err) {
  if (ts_rt_cpu_has("amx-tile") != 1)
    return TS_ERR(err, TS_EUNSUPPORTED,
                  "AMX unavailable: the CPU does not report amx-tile "
                  "(cpuid leaf 7 edx bit 24, with tile state enabled in "
                  "XCR0)");
  pthread_once(&amx_once, request_amx);
  if (amx_errno != 0)
    return TS_ERR(err, TS_EUNSUPPORTED,
                  "AMX unavailable: the kernel refused tile data permission "
                  "(arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA): "
                  "%s)",
                  strerror(amx_errno));
  return TS_OK;
}

/* Parses a sysfs cache size ("48K", "32M", "266240K"). */
static size_t parse_cache_size(const char *s) {
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s) return 0;
  if (*end == 'K')
    v <<= 10;
  else if (*end == 'M')
    v <<= 20;
  else if (*end == 'G')
    v <<= 30;
  return (size_t)v;
}

/* The largest data/unified cache of the highest level cpu0 lists in sysfs. */
static size_t sysfs_llc_bytes(void) {
  size_t best = 0;
  int best_level = 0;
  for (int i = 0; i < 16; i++) {
    char path[128], buf[64];
    int level = 0;
    snprintf(path, sizeof path,
             "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
    FILE *f = fopen(path, "r");
    if (!f) break;
    if (fscanf(f, "%d", &level) != 1) level = 0;
    fclose(f);
    snprintf(path, sizeof path,
             "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
    f = fopen(path, "r");
    if (!f) continue;
    bool instruction =
        fgets(buf, sizeof buf, f) && strncmp(buf, "Instr", 5) == 0;
    fclose(f);
    if (instruction) continue;
    snprintf(path, sizeof path,
             "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
    f = fopen(path, "r");
    if (!f) continue;
    size_t size = fgets(buf, sizeof buf, f) ? parse_cache_size(buf) : 0;
    fclose(f);
    if (level > best_level || (level == best_level && size > best)) {
      best_level = level;
      best = size;
    }
  }
  return best;
}

static size_t llc_bytes;
static pthread_once_t llc_once = PTHREAD_ONCE_INIT;

static void read_llc_bytes(void) {
  long v = 0;
#ifdef _SC_LEVEL3_CACHE_SIZE
  v = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
#ifdef _SC_LEVEL2_CACHE_SIZE
  if (v <= 0) v = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
  if (v > 0) {
    llc_bytes = (size_t)v;
    return;
  }
  size_t s = sysfs_llc_bytes();
  llc_bytes = s > 0 ? s : (size_t)32 << 20;
}

/* Read once and kept: a sandboxed measuring child (no file access) asks
 * too, and gets what its parent read before it was forked. */
size_t ts_rt_llc_bytes(void) {
  pthread_once(&llc_once, read_llc_bytes);
  return llc_bytes;
}
