/*
 * build.c — the build driver: lower a function, emit LLVM IR for the
 * target (the emitter with the target family's hooks), run LLVM's
 * default<O3> pipeline through LLVMRunPasses and emit what the family
 * outputs, an in-memory object (x86-64) or PTX text (NVPTX); plus the
 * refcounted artifact that carries the result to the runtime and workers.
 */
#include "codegen/target_internal.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* LLVM's optimization pipeline for every build that optimizes */
static const char opt_pipeline[] = "default<O3>";

/* ---- artifacts ---- */

ts_artifact *ts_artifact_new(ts_artifact_kind kind, const char *entry,
                             const ts_artifact_arg *args, int n_args,
                             const void *bytes, size_t n_bytes) {
  if (n_args > 0 && !args) return NULL; /* (ts_artifact_args_of failed) */
  ts_artifact *a = ts_calloc(1, sizeof *a);
  if (!a) return NULL;
  a->kind = kind;
  snprintf(a->entry, sizeof a->entry, "%s", entry);
  a->n_args = n_args;
  a->args = ts_calloc((size_t)(n_args > 0 ? n_args : 1), sizeof *a->args);
  a->bytes = ts_malloc(n_bytes + 1);
  if (!a->args || !a->bytes) {
    free(a->args);
    free(a->bytes);
    free(a);
    return NULL;
  }
  if (n_args > 0) memcpy(a->args, args, sizeof *args * (size_t)n_args);
  if (n_bytes) memcpy(a->bytes, bytes, n_bytes);
  a->bytes[n_bytes] = 0;
  a->n_bytes = n_bytes;
  for (int i = 0; i < 3; i++) a->grid[i] = a->block[i] = 1;
  a->refcount = 1;
  return a;
}

ts_artifact *ts_artifact_retain(ts_artifact *a) {
  if (a) __atomic_fetch_add(&a->refcount, 1, __ATOMIC_RELAXED);
  return a;
}

void ts_artifact_release(ts_artifact *a) {
  if (!a) return;
  if (__atomic_fetch_sub(&a->refcount, 1, __ATOMIC_ACQ_REL) != 1) return;
  free(a->args);
  free(a->bytes);
  free(a);
}

ts_artifact_arg *ts_artifact_args_of(const ts_func *f) {
  int n = ts_func_n_params(f);
  ts_artifact_arg *args = ts_calloc((size_t)(n > 0 ? n : 1), sizeof *args);
  if (!args) return NULL;
  for (int i = 0; i < n; i++) {
    ts_buffer *b = ts_func_param(f, i);
    snprintf(args[i].name, sizeof args[i].name, "%s", ts_buffer_name(b));
    args[i].dtype = ts_buffer_dtype(b);
    args[i].ndim = ts_buffer_ndim(b);
    for (int d = 0; d < args[i].ndim; d++)
      args[i].shape[d] = ts_buffer_dim(b, d);
    args[i].is_output = ts_func_param_is_output(f, i);
  }
  return args;
}

/* ---- building ---- */

static pthread_once_t llvm_once = PTHREAD_ONCE_INIT;

static void init_llvm(void) {
  for (int i = 0; target_family_at(i); i++) target_family_at(i)->llvm_init();
}

ts_build_options ts_build_defaults(void) {
  return (ts_build_options){.lower = ts_lower_defaults()};
}

void ts_build_result_clear(ts_build_result *r) {
  if (!r) return;
  ts_artifact_release(r->artifact);
  ts_func_free(r->lowered);
  free(r->llvm_ir);
  free(r->assembly);
  memset(r, 0, sizeof *r);
}

/* The entry symbol: the function name with every character outside
 * [A-Za-z0-9_] replaced, never empty, never starting with a digit. */
static void entry_name(const ts_func *f, char *out, size_t cap) {
  const char *n = ts_func_name(f);
  size_t j = 0;
  if (!n || !*n || (*n >= '0' && *n <= '9'))
    j = (size_t)snprintf(out, cap, "k_");
  for (; n && *n && j + 1 < cap; n++) {
    char c = *n;
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_';
    out[j++] = ok ? c : '_';
  }
  out[j] = 0;
}

static char *take_message(char *msg) {
  char *r = ts_strdup(msg ? msg : "");
  LLVMDisposeMessage(msg);
  return r;
}

static char *emit_to_string(LLVMTargetMachineRef tm, LLVMModuleRef mod,
                            LLVMCodeGenFileType kind, size_t *len,
                            char **errmsg) {
  LLVMMemoryBufferRef buf = NULL;
  char *msg = NULL;
  if (LLVMTargetMachineEmitToMemoryBuffer(tm, mod, kind, &msg, &buf)) {
    *errmsg = take_message(msg);
    return NULL;
  }
  size_t n = LLVMGetBufferSize(buf);
  char *out = ts_malloc(n + 1);
  if (!out) {
    LLVMDisposeMemoryBuffer(buf);
    *errmsg = NULL;
    return NULL;
  }
  memcpy(out, LLVMGetBufferStart(buf), n);
  out[n] = 0;
  *len = n;
  LLVMDisposeMemoryBuffer(buf);
  return out;
}

/* The build cache's side of ts_build: the key of the module as emitted
 * (*key, for ts_build_cache_put after a miss; NULL without memory) and,
 * on a hit, out->artifact made from the cached bytes with f's arguments.
 * Returns whether it hit. */
static bool cache_lookup(LLVMModuleRef mod, LLVMTargetMachineRef tm,
                         const ts_func *f, const char *entry, bool no_opt,
                         char **key, size_t *key_len, ts_build_result *out) {
  char *triple = LLVMGetTargetMachineTriple(tm);
  char *cpu = LLVMGetTargetMachineCPU(tm);
  char *features = LLVMGetTargetMachineFeatureString(tm);
  size_t n = strlen(triple) + strlen(cpu) + strlen(features) + 64;
  char *machine = ts_malloc(n);
  char *ir = LLVMPrintModuleToString(mod);
  if (machine) {
    /* everything besides the IR that decides the bytes: the machine, the
     * pipeline and the LLVM that runs it (a disk cache outlives a process) */
    unsigned major, minor, patch;
    LLVMGetVersion(&major, &minor, &patch);
    snprintf(machine, n, "%s %s %s %s pic llvm-%u.%u.%u", triple, cpu, features,
             no_opt ? "O0" : opt_pipeline, major, minor, patch);
    *key = ts_build_cache_key(machine, ir, key_len);
  }
  free(machine);
  LLVMDisposeMessage(ir);
  LLVMDisposeMessage(triple);
  LLVMDisposeMessage(cpu);
  LLVMDisposeMessage(features);
  ts_artifact *hit = *key ? ts_build_cache_get(*key, *key_len) : NULL;
  if (!hit) return false;
  ts_artifact_arg *args = ts_artifact_args_of(f);
  ts_artifact *a = ts_artifact_new(hit->kind, entry, args, ts_func_n_params(f),
                                   hit->bytes, hit->n_bytes);
  free(args);
  if (a) {
    memcpy(a->grid, hit->grid, sizeof a->grid);
    memcpy(a->block, hit->block, sizeof a->block);
    a->shared_bytes = hit->shared_bytes;
  }
  ts_artifact_release(hit);
  if (!a) return false; /* built again instead */
  out->artifact = a;
  free(*key);
  *key = NULL;
  return true;
}

/* Emits the split kernel (ts_build_split_kernel): main as
 * `<entry>__main`, the prologue as `<entry>__pre`, and the entries that
 * call them on the object's hoisted buffers. */
static int emit_split(emitter *e, const ts_build_split *sp,
                      ts_func *lowered_pro, const char *entry) {
  char main_name[160], pre_name[160];
  snprintf(main_name, sizeof main_name, "%s__main", entry);
  snprintf(pre_name, sizeof pre_name, "%s__pre", entry);
  int rc = emit_kernel(e, e->func, main_name);
  if (rc) return rc;
  emitter p = *e;
  p.ranges = ts_var_ranges_create();
  p.tmp = ts_func_arena(lowered_pro);
  p.n_tasks = 0;
  p.cur = NULL;
  p.mask = NULL;
  p.nontemporal = 0;
  rc = emit_kernel(&p, lowered_pro, pre_name);
  ts_var_ranges_destroy(p.ranges);
  if (rc) return rc;
  rc = emit_cpu_split_entries(e, sp->main, sp->inputs, sp->n_inputs,
                              sp->n_hoisted, entry, main_name, pre_name);
  e->entry = entry;
  return rc;
}

static int build_impl(const ts_func *f, const ts_build_split *sp,
                      const ts_target *t, const ts_build_options *opts,
                      ts_build_result *out, ts_error *err) {
  memset(out, 0, sizeof *out);
  if (ts_arena_failed(ts_func_arena(f)))
    return TS_ERR(err, TS_ENOMEM,
                  "build: out of memory while the function was built");
  ts_build_options o = opts ? *opts : ts_build_defaults();
  pthread_once(&llvm_once, init_llvm);
  /* tessera's own allocations (LLVM's are not counted: it has no way to
   * report a failure) */
  unsigned long oom = ts_alloc_failures();
  int rc = TS_OK;
  const target_family *fam = t->family;

  /* register promotion keeps to what the vector registers hold beside a
   * register tile's operands */
  if (o.lower.promote_max_bytes <= 0) {
    int regs = ts_target_vector_registers(t);
    int vbytes = ts_target_vector_bits(t) / 8;
    if (regs > 4 && vbytes > 0) o.lower.promote_max_bytes = (regs - 4) * vbytes;
  }
  double t0 = ts_now_seconds();
  ts_func *lowered = ts_lower(sp ? sp->main : f, &o.lower, err);
  if (!lowered) return err ? err->code : TS_EINVAL;
  ts_func *lowered_pro = NULL;
  if (sp && !(lowered_pro = ts_lower(sp->prologue, &o.lower, err))) {
    ts_func_free(lowered);
    return err ? err->code : TS_EINVAL;
  }
  out->lower_ms = (ts_now_seconds() - t0) * 1e3;

  char entry[128];
  entry_name(f, entry, sizeof entry);
  const char *triple = ts_target_triple(t);
  LLVMTargetRef target;
  char *msg = NULL;
  if (LLVMGetTargetFromTriple(triple, &target, &msg)) {
    rc = TS_ERR(err, TS_EUNSUPPORTED, "LLVM has no target for '%s': %s", triple,
                msg ? msg : "");
    LLVMDisposeMessage(msg);
    ts_func_free(lowered);
    ts_func_free(lowered_pro);
    return rc;
  }
  LLVMTargetMachineRef tm = LLVMCreateTargetMachine(
      target, triple, ts_target_cpu(t), ts_target_llvm_features(t),
      LLVMCodeGenLevelAggressive, LLVMRelocPIC, LLVMCodeModelDefault);
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef mod = LLVMModuleCreateWithNameInContext(entry, ctx);
  LLVMSetTarget(mod, triple);
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
  LLVMSetModuleDataLayout(mod, td);
  LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
  emitter e = {.ctx = ctx,
               .mod = mod,
               .b = b,
               .target = t,
               .hooks = fam->emit,
               .ranges = ts_var_ranges_create(),
               .err = err,
               .tmp = ts_func_arena(lowered),
               .oom = oom};
  double t1 = ts_now_seconds();
  if (sp) {
    e.func = lowered;
    rc = emit_split(&e, sp, lowered_pro, entry);
  } else {
    rc = emit_kernel(&e, lowered, entry);
  }
  if (!rc && LLVMVerifyModule(mod, LLVMReturnStatusAction, &msg)) {
    rc = TS_ERR(err, TS_EINTERNAL, "generated LLVM IR does not verify: %s",
                msg ? msg : "");
  }
  if (msg) LLVMDisposeMessage(msg);
  msg = NULL;
  out->emit_ms = (ts_now_seconds() - t1) * 1e3;
  rc = ts_alloc_check(oom, rc, err, "build");

  /* the same module for the same machine built before: its bytes */
  size_t ckey_len = 0;
  char *ckey = NULL;
  bool cached = false;
  if (!rc && !o.keep_llvm_ir && !o.keep_asm && ts_build_cache_enabled())
    cached = cache_lookup(mod, tm, f, entry, o.no_opt, &ckey, &ckey_len, out);

  if (!rc && !cached && !o.no_opt) {
    double t2 = ts_now_seconds();
    LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
    LLVMErrorRef perr = LLVMRunPasses(mod, opt_pipeline, tm, po);
    LLVMDisposePassBuilderOptions(po);
    if (perr) {
      char *m = LLVMGetErrorMessage(perr);
      rc = TS_ERR(err, TS_EINTERNAL, "LLVM optimization failed: %s", m);
      LLVMDisposeErrorMessage(m);
    }
    out->opt_ms = (ts_now_seconds() - t2) * 1e3;
    if (getenv("TS_BUILD_LOG")) {
      char *ir = LLVMPrintModuleToString(mod);
      unsigned long h = 5381;
      for (char *q = ir; *q; q++) h = h * 33 + (unsigned char)*q;
      LLVMDisposeMessage(ir);
      fprintf(stdout, "BUILD %s %.1f %lx\n", entry, out->opt_ms, h);
      fflush(stdout);
    }
  }
  if (!rc && o.keep_llvm_ir)
    out->llvm_ir = take_message(LLVMPrintModuleToString(mod));

  double t3 = ts_now_seconds();
  /* x86 assembly, beside the object; a family whose output is assembly
   * text (PTX) gives a copy of the artifact's text below */
  bool text_output = fam->output == LLVMAssemblyFile;
  if (!rc && o.keep_asm && !text_output) {
    LLVMModuleRef clone = LLVMCloneModule(mod);
    size_t n;
    char *emsg = NULL;
    out->assembly = emit_to_string(tm, clone, LLVMAssemblyFile, &n, &emsg);
    LLVMDisposeModule(clone);
    if (!out->assembly) {
      rc = TS_ERR(err, TS_EINTERNAL, "LLVM assembly emission failed: %s",
                  emsg ? emsg : "out of memory");
      free(emsg);
    }
  }
  if (!rc && !cached) {
    size_t n = 0;
    char *emsg = NULL;
    char *bytes = emit_to_string(tm, mod, fam->output, &n, &emsg);
    if (!bytes) {
      rc = TS_ERR(err, TS_EINTERNAL, "LLVM code emission failed: %s",
                  emsg ? emsg : "out of memory");
      free(emsg);
    } else {
      ts_artifact_arg *args = ts_artifact_args_of(f);
      out->artifact = ts_artifact_new(fam->facts.artifact, entry, args,
                                      ts_func_n_params(f), bytes, n);
      free(args);
      if (!out->artifact)
        rc = TS_ERR(err, TS_ENOMEM, "out of memory for the artifact");
      else if (fam->finish_artifact)
        fam->finish_artifact(&e, out->artifact);
      if (out->artifact && ckey) {
        ts_build_cache_put(ckey, ckey_len, out->artifact);
        ckey = NULL;
      }
      if (!rc && o.keep_asm && text_output) {
        out->assembly = bytes;
        bytes = NULL;
      }
      free(bytes);
    }
  }
  out->codegen_ms = cached ? 0 : (ts_now_seconds() - t3) * 1e3;
  free(ckey);
  rc = ts_alloc_check(oom, rc, err, "build");

  ts_var_ranges_destroy(e.ranges);
  LLVMDisposeBuilder(b);
  LLVMDisposeModule(mod);
  LLVMDisposeTargetData(td);
  LLVMDisposeTargetMachine(tm);
  LLVMContextDispose(ctx);
  if (!rc && o.keep_lowered)
    out->lowered = lowered;
  else
    ts_func_free(lowered);
  ts_func_free(lowered_pro);
  if (rc) ts_build_result_clear(out);
  return rc;
}

int ts_build(const ts_func *f, const ts_target *t, const ts_build_options *opts,
             ts_build_result *out, ts_error *err) {
  return build_impl(f, NULL, t, opts, out, err);
}

int ts_build_split_kernel(const ts_func *f, const ts_build_split *sp,
                          const ts_target *t, const ts_build_options *opts,
                          ts_build_result *out, ts_error *err) {
  memset(out, 0, sizeof *out);
  if (!sp || !sp->main || !sp->prologue || sp->n_hoisted < 1 ||
      sp->n_inputs < 0 ||
      ts_func_n_params(sp->main) != ts_func_n_params(f) + sp->n_hoisted ||
      ts_func_n_params(sp->prologue) != sp->n_inputs + sp->n_hoisted)
    return TS_ERR(err, TS_EINVAL,
                  "build: the split of '%s' does not match its parameters",
                  ts_func_name(f));
  for (int i = 0; i < sp->n_inputs; i++)
    if (sp->inputs[i] < 0 || sp->inputs[i] >= ts_func_n_params(f))
      return TS_ERR(err, TS_EINVAL,
                    "build: the prologue of '%s' reads parameter %d of %d",
                    ts_func_name(f), sp->inputs[i], ts_func_n_params(f));
  if (t->family->facts.artifact != TS_ARTIFACT_CPU_OBJECT)
    return TS_ERR(err, TS_EUNSUPPORTED,
                  "build: a kernel with a prologue is built for CPU targets "
                  "only, not '%s'",
                  ts_target_triple(t));
  return build_impl(f, sp, t, opts, out, err);
}
