/*
 * loader.c — the object loader: links an in-memory ELF object into the
 * process with ORC LLJIT (LLVM C API), resolving the symbols it does not
 * define from the process (the runtime's ts_rt_* functions, libm), and hands
 * out its entry function. Each kernel owns its own LLJIT, so unloading one
 * disposes its execution session, linked memory and symbol tables, and
 * nothing grows over many load/unload cycles.
 *
 * Before linking, the object's symbol table is read to give precise errors:
 * a missing entry symbol is reported by name, as is the first external
 * symbol the process does not export.
 */
#include "runtime/internal.h"

#include <dlfcn.h>
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Core.h>
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Object.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Target.h>

struct ts_rt_kernel {
  LLVMOrcLLJITRef jit;
  ts_rt_kernel_fn fn;
  ts_rt_kernel_fn prologue; /* `<entry>__prologue`, NULL when none */
  const int64_t *hoisted;   /* `<entry>__hoisted`: n, n pointers, n sizes */
  char *entry;
  char session_error[512]; /* the first error ORC reported while linking */
};

static pthread_once_t llvm_once = PTHREAD_ONCE_INIT;
static int llvm_init_failed;

/* Process-wide, once: registers the native target with LLVM. */
static void init_llvm(void) {
  llvm_init_failed =
      LLVMInitializeNativeTarget() || LLVMInitializeNativeAsmPrinter();
}

/* Copies an LLVMErrorRef's message into buf and consumes the error. */
static void take_error(LLVMErrorRef e, char *buf, size_t size) {
  char *msg = LLVMGetErrorMessage(e);
  snprintf(buf, size, "%s", msg);
  LLVMDisposeErrorMessage(msg);
}

/* ORC's error reporter: keeps the first message (instead of printing it). */
static void report_session_error(void *ctx, LLVMErrorRef e) {
  ts_rt_kernel *k = ctx;
  if (k->session_error[0] == '\0')
    take_error(e, k->session_error, sizeof k->session_error);
  else
    LLVMConsumeError(e);
}

/* Walks the ELF symbol tables of an object LLVM already accepted as
 * ELF64: sets *found when `entry` is a global definition, and copies the
 * first non-weak undefined symbol the process does not export into missing.
 * Every offset is bounds-checked; a malformed table is an error. */
static int scan_elf_symbols(const unsigned char *bytes, size_t size,
                            const char *entry, bool *found, const char *entry2,
                            bool *found2, char *missing, size_t missing_size,
                            ts_error *err) {
  Elf64_Ehdr eh;
  if (size < sizeof eh) goto bad;
  memcpy(&eh, bytes, sizeof eh);
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shoff > size ||
      (size - eh.e_shoff) / sizeof(Elf64_Shdr) < eh.e_shnum)
    goto bad;
  for (unsigned s = 0; s < eh.e_shnum; s++) {
    Elf64_Shdr sh, strsh;
    memcpy(&sh, bytes + eh.e_shoff + s * sizeof sh, sizeof sh);
    if (sh.sh_type != SHT_SYMTAB) continue;
    if (sh.sh_link >= eh.e_shnum) goto bad;
    memcpy(&strsh, bytes + eh.e_shoff + sh.sh_link * sizeof strsh,
           sizeof strsh);
    if (sh.sh_offset > size || sh.sh_size > size - sh.sh_offset ||
        strsh.sh_offset > size || strsh.sh_size > size - strsh.sh_offset ||
        strsh.sh_size == 0 || bytes[strsh.sh_offset + strsh.sh_size - 1] != 0)
      goto bad;
    const char *strtab = (const char *)bytes + strsh.sh_offset;
    for (size_t i = 0; i < sh.sh_size / sizeof(Elf64_Sym); i++) {
      Elf64_Sym sym;
      memcpy(&sym, bytes + sh.sh_offset + i * sizeof sym, sizeof sym);
      if (sym.st_name >= strsh.sh_size) goto bad;
      const char *name = strtab + sym.st_name;
      int bind = ELF64_ST_BIND(sym.st_info);
      if (!name[0] || bind == STB_LOCAL) continue;
      if (sym.st_shndx != SHN_UNDEF) {
        if (strcmp(name, entry) == 0) *found = true;
        if (entry2 && strcmp(name, entry2) == 0) *found2 = true;
      } else if (bind != STB_WEAK && !missing[0] &&
                 !dlsym(RTLD_DEFAULT, name)) {
        snprintf(missing, missing_size, "%s", name);
      }
    }
  }
  return TS_OK;
bad:
  return TS_ERR(err, TS_EINVAL, "loader: malformed ELF symbol table");
}

/* Checks the object's format and symbols before linking: an ELF64
 * relocatable object defining `entry`; the first external symbol the
 * process does not export goes into missing (reported if linking fails). */
static int scan_symbols(const void *bytes, size_t size, const char *entry,
                        bool *has_prologue, char *missing, size_t missing_size,
                        ts_error *err) {
  LLVMMemoryBufferRef mb = LLVMCreateMemoryBufferWithMemoryRange(
      bytes, size, "kernel", /*RequiresNullTerminator=*/0);
  char *msg = NULL;
  LLVMBinaryRef bin = LLVMCreateBinary(mb, NULL, &msg);
  if (!bin) {
    int rc = TS_ERR(err, TS_EINVAL, "loader: not an object file: %s",
                    msg ? msg : "unknown format");
    LLVMDisposeMessage(msg);
    LLVMDisposeMemoryBuffer(mb);
    return rc;
  }
  LLVMBinaryType type = LLVMBinaryGetType(bin);
  LLVMDisposeBinary(bin);
  LLVMDisposeMemoryBuffer(mb);
  if (type != LLVMBinaryTypeELF64L)
    return TS_ERR(err, TS_EINVAL,
                  "loader: not a 64-bit little-endian ELF object (binary "
                  "type %d)",
                  (int)type);
  bool found = false, found2 = false;
  missing[0] = '\0';
  char prologue[300];
  snprintf(prologue, sizeof prologue, "%s__prologue", entry);
  int rc = scan_elf_symbols(bytes, size, entry, &found, prologue, &found2,
                            missing, missing_size, err);
  if (has_prologue) *has_prologue = found2;
  if (rc) return rc;
  if (!found)
    return TS_ERR(err, TS_EINVAL, "loader: object defines no symbol '%s'",
                  entry);
  return TS_OK;
}

int ts_rt_object_check(const void *bytes, size_t size, const char *entry,
                       ts_error *err) {
  if (!bytes || size == 0)
    return TS_ERR(err, TS_EINVAL, "loader: empty object");
  if (!entry || !entry[0])
    return TS_ERR(err, TS_EINVAL, "loader: empty entry symbol name");
  char missing[256];
  int rc = scan_symbols(bytes, size, entry, NULL, missing, sizeof missing, err);
  if (rc) return rc;
  if (missing[0])
    return TS_ERR(err, TS_EINVAL,
                  "loader: unresolved external symbol '%s' (not defined by "
                  "the object nor exported by the process) in '%s'",
                  missing, entry);
  return TS_OK;
}

void ts_rt_kernel_unload(ts_rt_kernel *k) {
  if (!k) return;
  if (k->jit) {
    LLVMErrorRef e = LLVMOrcDisposeLLJIT(k->jit);
    if (e) LLVMConsumeError(e);
  }
  free(k->entry);
  free(k);
}

int ts_rt_kernel_load(const void *bytes, size_t size, const char *entry,
                      ts_rt_kernel **out, ts_error *err) {
  if (!bytes || size == 0)
    return TS_ERR(err, TS_EINVAL, "loader: empty object");
  if (!entry || !entry[0])
    return TS_ERR(err, TS_EINVAL, "loader: empty entry symbol name");
  pthread_once(&llvm_once, init_llvm);
  if (llvm_init_failed)
    return TS_ERR(err, TS_EUNSUPPORTED,
                  "loader: LLVM has no native target in this build");

  char missing[256];
  bool has_prologue = false;
  int rc = scan_symbols(bytes, size, entry, &has_prologue, missing,
                        sizeof missing, err);
  if (rc) return rc;
  /* a kernel built for the host may hold AMX tile code (the default
   * schedule of a bf16 or int8 product does): Linux faults on its first
   * tile instruction unless the process asked for tile data first. Once
   * per process, where the CPU has AMX; a refusal surfaces when such a
   * kernel runs, not here. */
  if (ts_rt_cpu_has("amx-tile") == 1) (void)ts_rt_enable_amx(NULL);

  ts_rt_kernel *k = calloc(1, sizeof *k);
  if (!k || !(k->entry = strdup(entry))) {
    free(k);
    return TS_ERR(err, TS_ENOMEM, "loader: out of memory");
  }
  char msg[512];
  LLVMErrorRef e = LLVMOrcCreateLLJIT(&k->jit, NULL);
  if (e) {
    k->jit = NULL;
    take_error(e, msg, sizeof msg);
    ts_rt_kernel_unload(k);
    return TS_ERR(err, TS_EUNSUPPORTED, "loader: cannot create LLJIT: %s", msg);
  }
  LLVMOrcExecutionSessionSetErrorReporter(
      LLVMOrcLLJITGetExecutionSession(k->jit), report_session_error, k);
  LLVMOrcJITDylibRef jd = LLVMOrcLLJITGetMainJITDylib(k->jit);
  LLVMOrcDefinitionGeneratorRef gen = NULL;
  e = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
      &gen, LLVMOrcLLJITGetGlobalPrefix(k->jit), NULL, NULL);
  if (e) {
    take_error(e, msg, sizeof msg);
    ts_rt_kernel_unload(k);
    return TS_ERR(err, TS_EUNSUPPORTED,
                  "loader: cannot search the process for symbols: %s", msg);
  }
  LLVMOrcJITDylibAddGenerator(jd, gen);

  LLVMMemoryBufferRef mb =
      LLVMCreateMemoryBufferWithMemoryRangeCopy(bytes, size, "kernel");
  e = LLVMOrcLLJITAddObjectFile(k->jit, jd, mb); /* takes mb */
  if (e) {
    take_error(e, msg, sizeof msg);
    ts_rt_kernel_unload(k);
    return TS_ERR(err, TS_EINVAL, "loader: cannot add the object: %s", msg);
  }
  LLVMOrcExecutorAddress addr = 0;
  e = LLVMOrcLLJITLookup(k->jit, &addr, entry);
  if (e || addr == 0) {
    if (e)
      take_error(e, msg, sizeof msg);
    else
      snprintf(msg, sizeof msg, "address 0");
    /* The symbol table's guess is used only when ORC names it too. */
    if (missing[0] &&
        (strstr(k->session_error, missing) || strstr(msg, missing)))
      rc = TS_ERR(err, TS_EINVAL,
                  "loader: unresolved external symbol '%s' (not defined by "
                  "the object nor exported by the process) while linking "
                  "'%s'",
                  missing, entry);
    else
      rc = TS_ERR(err, TS_EINVAL, "loader: cannot link '%s': %s%s%s", entry,
                  k->session_error[0] ? k->session_error : msg,
                  k->session_error[0] ? "; " : "",
                  k->session_error[0] ? msg : "");
    ts_rt_kernel_unload(k);
    return rc;
  }
  k->fn = (ts_rt_kernel_fn)(uintptr_t)addr;
  if (has_prologue) {
    char name[300];
    LLVMOrcExecutorAddress pa = 0, ha = 0;
    snprintf(name, sizeof name, "%s__prologue", entry);
    e = LLVMOrcLLJITLookup(k->jit, &pa, name);
    if (!e) {
      snprintf(name, sizeof name, "%s__hoisted", entry);
      e = LLVMOrcLLJITLookup(k->jit, &ha, name);
    }
    if (e || !pa || !ha) {
      if (e)
        take_error(e, msg, sizeof msg);
      else
        snprintf(msg, sizeof msg, "address 0");
      ts_rt_kernel_unload(k);
      return TS_ERR(err, TS_EINVAL,
                    "loader: cannot link the prologue of '%s': %s", entry, msg);
    }
    k->prologue = (ts_rt_kernel_fn)(uintptr_t)pa;
    k->hoisted = (const int64_t *)(uintptr_t)ha;
  }
  *out = k;
  return TS_OK;
}

bool ts_rt_kernel_has_prologue(const ts_rt_kernel *k) {
  return k->prologue != NULL;
}

int ts_rt_kernel_prepare(const ts_rt_kernel *k, void *const *args,
                         ts_runtime *rt, ts_error *err) {
  if (!k->prologue) return TS_OK;
  int32_t r = k->prologue(args, rt);
  if (r != 0)
    return TS_ERR(err, TS_ERANGE,
                  "the prologue of kernel '%s' failed: it returned %d",
                  k->entry, (int)r);
  return TS_OK;
}

int ts_rt_kernel_hoisted(const ts_rt_kernel *k, void *const **bufs,
                         const int64_t **bytes) {
  if (!k->hoisted) return 0;
  int n = (int)k->hoisted[0];
  *bufs = (void *const *)(k->hoisted + 1);
  *bytes = k->hoisted + 1 + n;
  return n;
}

ts_rt_kernel_fn ts_rt_kernel_entry(const ts_rt_kernel *k) { return k->fn; }

const char *ts_rt_kernel_name(const ts_rt_kernel *k) { return k->entry; }

int ts_rt_kernel_call(const ts_rt_kernel *k, void *const *args, ts_runtime *rt,
                      ts_error *err) {
  int32_t r = k->fn(args, rt);
  if (r != 0)
    return TS_ERR(err, TS_ERANGE, "kernel '%s' failed: it returned %d",
                  k->entry, (int)r);
  return TS_OK;
}
