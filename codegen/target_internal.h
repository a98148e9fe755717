/*
 * target_internal.h — the target interface inside codegen/: a target
 * family is one `target_family` (its facts, the parser of its options, its
 * queries and its code generation hooks), defined in one file
 * (target_x86.c, target_nvptx.c) and registered in the table of target.c.
 * target.c parses the kind word and the option tokens, then hands them to
 * the family; build.c and the emitter call the family's hooks. Nothing
 * outside the family's files tests which family a target is.
 * docs/targets.md is the guide to adding one.
 */
#ifndef TESSERA_CODEGEN_TARGET_INTERNAL_H
#define TESSERA_CODEGEN_TARGET_INTERNAL_H

#include "tir/strbuf.h"
#include "codegen/internal.h"

#include <llvm-c/TargetMachine.h>

/* ---- the parsed target ---- */

typedef struct feature_entry {
  char *name;
  bool on;
} feature_entry;

typedef struct target_family target_family;

/* The fields a family fills when it builds a target; the ones it has no
 * use for stay 0 / NULL. */
struct ts_target {
  const target_family *family;
  char *cpu;               /* for LLVMCreateTargetMachine: "skylake", "sm_80" */
  feature_entry *features; /* sorted by name once parsed, n_features */
  int n_features;
  int num_cores; /* CPU families: the runtime's threads */
  int sm;        /* GPU families: the architecture number (80: sm_80) */
  int max_threads_per_block, max_shared_memory_per_block,
      max_registers_per_thread; /* GPU families: per-block limits */
  char *triple;
  char *llvm_features; /* "+a,-b" */
  char *str;           /* canonical */
};

/* ---- parsing helpers (target.c) ---- */

/* Parser state: the input and the target being built. */
typedef struct target_parser {
  const char *src;
  ts_target *t;
  ts_error *err;
} target_parser;

/* One option token "-name=value" split into its parts; token NULL when the
 * option is absent. */
typedef struct target_option {
  const char *token, *value; /* token start; value start */
  size_t token_len, value_len;
} target_option;

/* The most options a family takes. */
#define TARGET_MAX_OPTIONS 8

/* A TS_EINVAL at the column of `at` (NULL: none) in the input. */
int target_fail_at(target_parser *p, const char *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int target_oom(target_parser *p);
/* Parses a decimal integer in [lo, hi] from s[0, n). */
bool target_parse_int(const char *s, size_t n, long long lo, long long hi,
                      long long *out);
/* Adds a feature or, with override, changes an existing one's sign.
 * TS_OK, TS_ENOMEM, or TS_EINVAL over the feature limit. */
int target_set_feature(target_parser *p, const char *name, size_t len, bool on,
                       bool override);
/* -mattr=ENTRY,ENTRY,...  ENTRY = ('+'|'-') NAME, NAME = [a-z0-9._-]+ */
int target_parse_mattr(target_parser *p, const char *v, size_t n);
/* The index of a stored feature, -1 when absent. */
int target_find_feature(const ts_target *t, const char *name);

/* ---- the emitter's hooks ---- */

/* A call the family implements ("tessera.vnni_dot_16x4",
 * "tessera.cuda.syncthreads", ...). */
typedef struct emit_intrinsic {
  const char *name;
  /* >= 0: the number of arguments, checked and evaluated (integers as
   * int64) before emit is called; -1: emit checks and evaluates them. */
  int n_args;
  /* The call's value, or NULL for an int 0 of its dtype (a statement). */
  LLVMValueRef (*emit)(emitter *e, ts_expr *call, LLVMValueRef *args);
} emit_intrinsic;

struct emit_hooks {
  /* The kernel `entry` (the family's ABI) of the lowered function. */
  int (*kernel)(emitter *e, const ts_func *f, const char *entry);
  /* A `parallel` loop (or the error saying what to do instead). */
  void (*parallel_loop)(emitter *e, ts_stmt *s);
  /* A loop bound to a thread tag; NULL: the family has no threads. */
  void (*thread_loop)(emitter *e, ts_stmt *s);
  /* An allocation in a storage scope the family places itself ("shared");
   * false when the buffer's scope is not one (it is then local). NULL: no
   * such scope. */
  bool (*scoped_alloc)(emitter *e, ts_stmt *s);
  /* Local buffers larger than the stack limit come from ts_rt_alloc (true)
   * or are refused. */
  bool heap_alloc;
  /* Function attributes beyond nounwind; NULL: none. */
  void (*fn_attrs)(emitter *e, LLVMValueRef fn);
  /* exp of a float scalar or vector. */
  LLVMValueRef (*exp)(emitter *e, LLVMTypeRef ty, LLVMValueRef x);
  /* The family's own version of math intrinsic `name`, or NULL for the
   * shared one; NULL: none. */
  LLVMValueRef (*math)(emitter *e, const char *name, LLVMTypeRef ty,
                       LLVMValueRef *args);
  /* Scalar tanh and erf call libm (true), or use the formulas vectors use. */
  bool libm;
  /* Whether float32 <-> float16/bfloat16 (narrow: to the 16-bit format)
   * is a native fptrunc/fpext. */
  bool (*native_half)(const emitter *e, bool bf16, bool narrow);
  /* The family's intrinsics, ending with a NULL name. */
  const emit_intrinsic *intrinsics;
  /* Orders the non-temporal stores emitted before it with later memory
   * operations (TS_ANN_NONTEMPORAL); NULL: the family has no non-temporal
   * stores and the annotation is ignored. */
  void (*store_fence)(emitter *e);
};

/* ---- a family ---- */

struct target_family {
  ts_target_facts facts;
  /* The option names ("-mcpu"), in canonical order, NULL-terminated (at
   * most TARGET_MAX_OPTIONS). */
  const char *const *options;
  /* Fills p->t from the options (opts[i] is options[i]; token NULL when
   * absent): cpu, triple, features, cores or limits; kind is the kind word
   * in the input (for error columns). */
  int (*build)(target_parser *p, const target_option *opts, const char *kind);
  /* The canonical string (kind word first) and LLVM's feature string of a
   * built target whose features are sorted. */
  void (*print)(const ts_target *t, strbuf *str, strbuf *llvm_features);
  /* The queries of codegen.h. */
  bool (*has_feature)(const ts_target *t, const char *feature);
  int (*vector_bits)(const ts_target *t);
  int (*vector_registers)(const ts_target *t);
  int (*vector_lanes)(const ts_target *t, ts_dtype d);
  void (*isa)(const ts_target *t, char *buf, size_t size);
  bool (*dtype_native)(const ts_target *t, ts_dtype d);
  void (*dtype_path)(const ts_target *t, ts_dtype d, char *buf, size_t size);
  /* Code generation: LLVM's target initialization (called once), what
   * LLVM emits (an object file, or assembly text such as PTX), the
   * emitter's hooks, and what the artifact gets from the emitter besides
   * its bytes (launch geometry; NULL: nothing). */
  void (*llvm_init)(void);
  LLVMCodeGenFileType output;
  const emit_hooks *emit;
  void (*finish_artifact)(const emitter *e, ts_artifact *a);
};

extern const target_family target_x86;   /* target_x86.c */
extern const target_family target_nvptx; /* target_nvptx.c */

/* The registered families (target.c), NULL past the last. */
const target_family *target_family_at(int i);

/* Writes into buf (cut to size) the kinds of the registered families for
 * which pred holds, "llvm or cuda". */
void target_kinds(bool (*pred)(const target_family *f), char *buf, size_t size);

/* Appends text to buf (size bytes, NUL-terminated, cut when full). */
void target_append(char *buf, size_t size, const char *text);

/* ---- the build cache (build_cache.c) ---- */

/* "machine\nIR" as one malloc'd string of *len bytes (NULL: no memory). */
char *ts_build_cache_key(const char *machine, const char *ir, size_t *len);
bool ts_build_cache_enabled(void);
/* A new reference to the artifact built from key, or NULL. */
ts_artifact *ts_build_cache_get(const char *key, size_t len);
/* Keeps a reference to a under key (taking key), evicting the least
 * recently used entries past the limit; a no-op when the cache is off. */
void ts_build_cache_put(char *key, size_t len, ts_artifact *a);

#endif /* TESSERA_CODEGEN_TARGET_INTERNAL_H */
