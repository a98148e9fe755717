/*
 * test_loader.c — the object loader and what generated code calls: kernels
 * are built here with the LLVM C API (an elementwise add, the same through
 * ts_rt_parallel_for with an outlined task, one using ts_rt_alloc, one
 * calling libm, one failing), emitted as in-memory objects, loaded, called
 * and checked; missing entry symbols, unresolved externals and garbage bytes
 * give clear errors; 2000 load/unload cycles keep resident memory flat; and
 * an AMX bf16 16x16x32 tile matmul (after the AMX permission request) matches
 * a scalar reference where the CPU has AMX.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "runtime/runtime.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

#define N 1000

/* ---- building kernels with the LLVM C API ---- */

typedef struct jit {
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  LLVMBuilderRef b;
  LLVMTypeRef ptr, i16, i32, i64, f32, kernel_type, task_type;
} jit;

typedef struct object {
  void *bytes;
  size_t size;
} object;

static void jit_open(jit *j, const char *name) {
  j->ctx = LLVMContextCreate();
  j->mod = LLVMModuleCreateWithNameInContext(name, j->ctx);
  j->b = LLVMCreateBuilderInContext(j->ctx);
  j->ptr = LLVMPointerTypeInContext(j->ctx, 0);
  j->i16 = LLVMInt16TypeInContext(j->ctx);
  j->i32 = LLVMInt32TypeInContext(j->ctx);
  j->i64 = LLVMInt64TypeInContext(j->ctx);
  j->f32 = LLVMFloatTypeInContext(j->ctx);
  LLVMTypeRef kparams[2] = {j->ptr, j->ptr};
  j->kernel_type = LLVMFunctionType(j->i32, kparams, 2, 0);
  LLVMTypeRef tparams[3] = {j->ptr, j->i64, j->i64};
  j->task_type = LLVMFunctionType(j->i32, tparams, 3, 0);
}

/* Optimizes and emits the module as an object (malloc'd copy), then frees
 * every LLVM handle. */
static object jit_finish(jit *j) {
  char *msg = NULL;
  if (LLVMVerifyModule(j->mod, LLVMReturnStatusAction, &msg))
    fail_msg("module does not verify: %s", msg);
  LLVMDisposeMessage(msg);
  char *triple = LLVMGetDefaultTargetTriple();
  LLVMTargetRef target;
  char *error = NULL;
  if (LLVMGetTargetFromTriple(triple, &target, &error))
    fail_msg("no target: %s", error);
  char *cpu = LLVMGetHostCPUName(), *features = LLVMGetHostCPUFeatures();
  LLVMTargetMachineRef tm = LLVMCreateTargetMachine(
      target, triple, cpu, features, LLVMCodeGenLevelDefault, LLVMRelocPIC,
      LLVMCodeModelDefault);
  LLVMSetTarget(j->mod, triple);
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
  LLVMSetModuleDataLayout(j->mod, td);
  LLVMPassBuilderOptionsRef opts = LLVMCreatePassBuilderOptions();
  LLVMErrorRef e = LLVMRunPasses(j->mod, "default<O2>", tm, opts);
  if (e) {
    char *m = LLVMGetErrorMessage(e);
    fail_msg("passes: %s", m);
  }
  LLVMMemoryBufferRef buf = NULL;
  if (LLVMTargetMachineEmitToMemoryBuffer(tm, j->mod, LLVMObjectFile, &error,
                                          &buf))
    fail_msg("emit: %s", error);
  object o;
  o.size = LLVMGetBufferSize(buf);
  o.bytes = malloc(o.size);
  memcpy(o.bytes, LLVMGetBufferStart(buf), o.size);
  LLVMDisposeMemoryBuffer(buf);
  LLVMDisposePassBuilderOptions(opts);
  LLVMDisposeTargetData(td);
  LLVMDisposeTargetMachine(tm);
  LLVMDisposeMessage(cpu);
  LLVMDisposeMessage(features);
  LLVMDisposeMessage(triple);
  LLVMDisposeBuilder(j->b);
  LLVMDisposeModule(j->mod);
  LLVMContextDispose(j->ctx);
  return o;
}

static LLVMValueRef i64c(jit *j, long long v) {
  return LLVMConstInt(j->i64, (unsigned long long)v, 1);
}

static LLVMValueRef i32c(jit *j, int v) {
  return LLVMConstInt(j->i32, (unsigned long long)v, 1);
}

/* args[index] as a pointer. */
static LLVMValueRef load_arg(jit *j, LLVMValueRef args, int index) {
  LLVMValueRef idx = i64c(j, index);
  LLVMValueRef slot = LLVMBuildGEP2(j->b, j->ptr, args, &idx, 1, "");
  return LLVMBuildLoad2(j->b, j->ptr, slot, "");
}

/* A counted loop [begin, end): loop_open positions the builder in the body
 * and returns the induction variable; loop_close ends the body. */
typedef struct loop {
  LLVMBasicBlockRef pre, head, exit;
  LLVMValueRef i, begin;
} loop;

static LLVMValueRef loop_open(jit *j, loop *l, LLVMValueRef fn,
                              LLVMValueRef begin, LLVMValueRef end) {
  l->pre = LLVMGetInsertBlock(j->b);
  l->head = LLVMAppendBasicBlockInContext(j->ctx, fn, "head");
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(j->ctx, fn, "body");
  l->exit = LLVMAppendBasicBlockInContext(j->ctx, fn, "exit");
  l->begin = begin;
  LLVMBuildBr(j->b, l->head);
  LLVMPositionBuilderAtEnd(j->b, l->head);
  l->i = LLVMBuildPhi(j->b, j->i64, "i");
  LLVMValueRef cond = LLVMBuildICmp(j->b, LLVMIntSLT, l->i, end, "");
  LLVMBuildCondBr(j->b, cond, body, l->exit);
  LLVMPositionBuilderAtEnd(j->b, body);
  return l->i;
}

static void loop_close(jit *j, loop *l) {
  LLVMValueRef next = LLVMBuildAdd(j->b, l->i, i64c(j, 1), "");
  LLVMBasicBlockRef last = LLVMGetInsertBlock(j->b);
  LLVMBuildBr(j->b, l->head);
  LLVMValueRef vals[2] = {l->begin, next};
  LLVMBasicBlockRef blocks[2] = {l->pre, last};
  LLVMAddIncoming(l->i, vals, blocks, 2);
  LLVMPositionBuilderAtEnd(j->b, l->exit);
}

static LLVMValueRef load_f32(jit *j, LLVMValueRef base, LLVMValueRef i) {
  LLVMValueRef p = LLVMBuildGEP2(j->b, j->f32, base, &i, 1, "");
  return LLVMBuildLoad2(j->b, j->f32, p, "");
}

static void store_f32(jit *j, LLVMValueRef v, LLVMValueRef base,
                      LLVMValueRef i) {
  LLVMValueRef p = LLVMBuildGEP2(j->b, j->f32, base, &i, 1, "");
  LLVMBuildStore(j->b, v, p);
}

/* c[i] = f(a[i]) + b[i] for i in [begin, end), args = {a, b, c}; f is a
 * libm function of float (NULL: identity). */
static void emit_add(jit *j, LLVMValueRef fn, LLVMValueRef args,
                     LLVMValueRef begin, LLVMValueRef end, LLVMValueRef f) {
  LLVMValueRef a = load_arg(j, args, 0), b = load_arg(j, args, 1),
               c = load_arg(j, args, 2);
  loop l;
  LLVMValueRef i = loop_open(j, &l, fn, begin, end);
  LLVMValueRef x = load_f32(j, a, i);
  if (f) {
    LLVMTypeRef ft = LLVMFunctionType(j->f32, &j->f32, 1, 0);
    x = LLVMBuildCall2(j->b, ft, f, &x, 1, "");
  }
  store_f32(j, LLVMBuildFAdd(j->b, x, load_f32(j, b, i), ""), c, i);
  loop_close(j, &l);
}

static LLVMValueRef add_kernel_fn(jit *j, const char *name) {
  LLVMValueRef fn = LLVMAddFunction(j->mod, name, j->kernel_type);
  LLVMPositionBuilderAtEnd(j->b,
                           LLVMAppendBasicBlockInContext(j->ctx, fn, "entry"));
  return fn;
}

/* add_kernel: c = a + b, serially. */
static object build_add(void) {
  jit j;
  jit_open(&j, "add");
  LLVMValueRef fn = add_kernel_fn(&j, "add_kernel");
  emit_add(&j, fn, LLVMGetParam(fn, 0), i64c(&j, 0), i64c(&j, N), NULL);
  LLVMBuildRet(j.b, i32c(&j, 0));
  return jit_finish(&j);
}

/* par_kernel: c = a + b through ts_rt_parallel_for with an outlined task
 * whose closure is the args array. */
static object build_parallel(void) {
  jit j;
  jit_open(&j, "parallel");
  LLVMValueRef task = LLVMAddFunction(j.mod, "par_task", j.task_type);
  LLVMSetLinkage(task, LLVMInternalLinkage);
  LLVMPositionBuilderAtEnd(j.b,
                           LLVMAppendBasicBlockInContext(j.ctx, task, "entry"));
  emit_add(&j, task, LLVMGetParam(task, 0), LLVMGetParam(task, 1),
           LLVMGetParam(task, 2), NULL);
  LLVMBuildRet(j.b, i32c(&j, 0));

  LLVMTypeRef pf_params[4] = {j.ptr, j.ptr, j.ptr, j.i64};
  LLVMTypeRef pf_type = LLVMFunctionType(j.i32, pf_params, 4, 0);
  LLVMValueRef pf = LLVMAddFunction(j.mod, "ts_rt_parallel_for", pf_type);
  LLVMValueRef fn = add_kernel_fn(&j, "par_kernel");
  LLVMValueRef call_args[4] = {LLVMGetParam(fn, 1), task, LLVMGetParam(fn, 0),
                               i64c(&j, N)};
  LLVMBuildRet(j.b, LLVMBuildCall2(j.b, pf_type, pf, call_args, 4, ""));
  return jit_finish(&j);
}

/* alloc_kernel: tmp = ts_rt_alloc(N floats); tmp = a + b; c = tmp + tmp;
 * ts_rt_free(tmp); returns 1 if the allocation failed. */
static object build_alloc(void) {
  jit j;
  jit_open(&j, "alloc");
  LLVMTypeRef alloc_params[3] = {j.ptr, j.i64, j.i64};
  LLVMTypeRef alloc_type = LLVMFunctionType(j.ptr, alloc_params, 3, 0);
  LLVMValueRef alloc = LLVMAddFunction(j.mod, "ts_rt_alloc", alloc_type);
  LLVMTypeRef free_params[2] = {j.ptr, j.ptr};
  LLVMTypeRef free_type =
      LLVMFunctionType(LLVMVoidTypeInContext(j.ctx), free_params, 2, 0);
  LLVMValueRef free_fn = LLVMAddFunction(j.mod, "ts_rt_free", free_type);
  LLVMValueRef fn = add_kernel_fn(&j, "alloc_kernel");
  LLVMValueRef args = LLVMGetParam(fn, 0), rt = LLVMGetParam(fn, 1);
  LLVMValueRef aargs[3] = {rt, i64c(&j, N * 4), i64c(&j, 64)};
  LLVMValueRef tmp = LLVMBuildCall2(j.b, alloc_type, alloc, aargs, 3, "tmp");
  LLVMBasicBlockRef ok = LLVMAppendBasicBlockInContext(j.ctx, fn, "ok");
  LLVMBasicBlockRef bad = LLVMAppendBasicBlockInContext(j.ctx, fn, "bad");
  LLVMBuildCondBr(j.b, LLVMBuildIsNull(j.b, tmp, ""), bad, ok);
  LLVMPositionBuilderAtEnd(j.b, bad);
  LLVMBuildRet(j.b, i32c(&j, 1));
  LLVMPositionBuilderAtEnd(j.b, ok);
  LLVMValueRef a = load_arg(&j, args, 0), b = load_arg(&j, args, 1),
               c = load_arg(&j, args, 2);
  loop l;
  LLVMValueRef i = loop_open(&j, &l, fn, i64c(&j, 0), i64c(&j, N));
  store_f32(&j, LLVMBuildFAdd(j.b, load_f32(&j, a, i), load_f32(&j, b, i), ""),
            tmp, i);
  loop_close(&j, &l);
  i = loop_open(&j, &l, fn, i64c(&j, 0), i64c(&j, N));
  LLVMValueRef t = load_f32(&j, tmp, i);
  store_f32(&j, LLVMBuildFAdd(j.b, t, t, ""), c, i);
  loop_close(&j, &l);
  LLVMValueRef fargs[2] = {rt, tmp};
  LLVMBuildCall2(j.b, free_type, free_fn, fargs, 2, "");
  LLVMBuildRet(j.b, i32c(&j, 0));
  return jit_finish(&j);
}

/* A kernel calling an external float function `fname` elementwise (libm, or
 * a name nothing defines). */
static object build_call(const char *entry, const char *fname) {
  jit j;
  jit_open(&j, "call");
  LLVMTypeRef ft = LLVMFunctionType(j.f32, &j.f32, 1, 0);
  LLVMValueRef f = LLVMAddFunction(j.mod, fname, ft);
  LLVMValueRef fn = add_kernel_fn(&j, entry);
  emit_add(&j, fn, LLVMGetParam(fn, 0), i64c(&j, 0), i64c(&j, N), f);
  LLVMBuildRet(j.b, i32c(&j, 0));
  return jit_finish(&j);
}

/* fail_kernel: returns 3. */
static object build_fail(void) {
  jit j;
  jit_open(&j, "fail");
  add_kernel_fn(&j, "fail_kernel");
  LLVMBuildRet(j.b, i32c(&j, 3));
  return jit_finish(&j);
}

/* ---- tests ---- */

typedef struct buffers {
  float a[N], b[N], c[N];
  void *args[3];
} buffers;

static void buffers_init(buffers *t) {
  for (int i = 0; i < N; i++) {
    t->a[i] = (float)i * 0.5f;
    t->b[i] = 1000.0f - (float)i;
    t->c[i] = -1;
  }
  t->args[0] = t->a;
  t->args[1] = t->b;
  t->args[2] = t->c;
}

static ts_rt_kernel *load_ok(object o, const char *entry) {
  ts_rt_kernel *k = NULL;
  ts_error err;
  ts_error_clear(&err);
  int rc = ts_rt_kernel_load(o.bytes, o.size, entry, &k, &err);
  if (rc) fprintf(stderr, "load %s: %s\n", entry, err.msg);
  assert_int_equal(rc, TS_OK);
  assert_non_null(k);
  assert_string_equal(ts_rt_kernel_name(k), entry);
  return k;
}

static void test_add_kernel(void **state) {
  (void)state;
  object o = build_add();
  assert_true(o.size > 0);
  ts_rt_kernel *k = load_ok(o, "add_kernel");
  buffers *t = malloc(sizeof *t);
  buffers_init(t);
  assert_int_equal(ts_rt_kernel_call(k, t->args, NULL, NULL), TS_OK);
  for (int i = 0; i < N; i++) assert_float_equal(t->c[i], t->a[i] + t->b[i], 0);
  /* The entry pointer works directly too. */
  memset(t->c, 0, sizeof t->c);
  assert_int_equal(ts_rt_kernel_entry(k)(t->args, NULL), 0);
  assert_float_equal(t->c[N - 1], t->a[N - 1] + t->b[N - 1], 0);
  ts_rt_kernel_unload(k);
  free(t);
  free(o.bytes);
}

static void test_parallel_kernel(void **state) {
  (void)state;
  object o = build_parallel();
  ts_rt_kernel *k = load_ok(o, "par_kernel");
  buffers *t = malloc(sizeof *t);
  int counts[] = {1, 2, 3};
  for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
    ts_runtime *rt = NULL;
    assert_int_equal(ts_runtime_create(counts[c], &rt, NULL), TS_OK);
    for (int rep = 0; rep < 20; rep++) {
      buffers_init(t);
      assert_int_equal(ts_rt_kernel_call(k, t->args, rt, NULL), TS_OK);
      for (int i = 0; i < N; i++)
        assert_float_equal(t->c[i], t->a[i] + t->b[i], 0);
    }
    ts_runtime_destroy(rt);
  }
  /* With no runtime the loop runs serially. */
  buffers_init(t);
  assert_int_equal(ts_rt_kernel_call(k, t->args, NULL, NULL), TS_OK);
  assert_float_equal(t->c[7], t->a[7] + t->b[7], 0);
  ts_rt_kernel_unload(k);
  free(t);
  free(o.bytes);
}

static void test_alloc_and_libm_kernels(void **state) {
  (void)state;
  buffers *t = malloc(sizeof *t);
  object o = build_alloc();
  ts_rt_kernel *k = load_ok(o, "alloc_kernel");
  buffers_init(t);
  assert_int_equal(ts_rt_kernel_call(k, t->args, NULL, NULL), TS_OK);
  for (int i = 0; i < N; i++)
    assert_float_equal(t->c[i], 2 * (t->a[i] + t->b[i]), 0);
  ts_rt_kernel_unload(k);
  free(o.bytes);

  o = build_call("tanh_kernel", "tanhf");
  k = load_ok(o, "tanh_kernel");
  buffers_init(t);
  for (int i = 0; i < N; i++) t->a[i] = (float)(i - N / 2) / 100.0f;
  assert_int_equal(ts_rt_kernel_call(k, t->args, NULL, NULL), TS_OK);
  for (int i = 0; i < N; i++)
    assert_float_equal(t->c[i], tanhf(t->a[i]) + t->b[i], 1e-4);
  ts_rt_kernel_unload(k);
  free(o.bytes);
  free(t);
}

static void test_load_errors(void **state) {
  (void)state;
  ts_error err;
  ts_rt_kernel *k = NULL;
  object o = build_add();

  ts_error_clear(&err);
  assert_int_equal(
      ts_rt_kernel_load(o.bytes, o.size, "no_such_entry", &k, &err), TS_EINVAL);
  assert_null(k);
  printf("  missing entry: %s\n", err.msg);
  assert_non_null(strstr(err.msg, "object defines no symbol 'no_such_entry'"));

  char garbage[256];
  for (size_t i = 0; i < sizeof garbage; i++) garbage[i] = (char)(i * 7);
  ts_error_clear(&err);
  assert_int_equal(
      ts_rt_kernel_load(garbage, sizeof garbage, "add_kernel", &k, &err),
      TS_EINVAL);
  printf("  garbage: %s\n", err.msg);
  assert_non_null(strstr(err.msg, "not an object file"));
  ts_error_clear(&err);
  assert_int_equal(ts_rt_kernel_load(o.bytes, 0, "add_kernel", &k, &err),
                   TS_EINVAL);
  assert_int_equal(ts_rt_kernel_load(o.bytes, o.size, "", &k, &err), TS_EINVAL);
  /* A truncated object. */
  ts_error_clear(&err);
  assert_int_not_equal(
      ts_rt_kernel_load(o.bytes, o.size / 2, "add_kernel", &k, &err), TS_OK);
  printf("  truncated: %s\n", err.msg);
  assert_null(k);
  free(o.bytes);

  o = build_call("ext_kernel", "ts_no_such_function");
  ts_error_clear(&err);
  assert_int_equal(ts_rt_kernel_load(o.bytes, o.size, "ext_kernel", &k, &err),
                   TS_EINVAL);
  assert_null(k);
  printf("  unresolved: %s\n", err.msg);
  assert_non_null(
      strstr(err.msg, "unresolved external symbol 'ts_no_such_function'"));
  free(o.bytes);

  o = build_fail();
  k = load_ok(o, "fail_kernel");
  ts_error_clear(&err);
  assert_int_equal(ts_rt_kernel_call(k, NULL, NULL, &err), TS_ERANGE);
  assert_non_null(strstr(err.msg, "kernel 'fail_kernel' failed"));
  assert_non_null(strstr(err.msg, "returned 3"));
  ts_rt_kernel_unload(k);
  ts_rt_kernel_unload(NULL);
  free(o.bytes);
}

static void test_eval_kernel(void **state) {
  (void)state;
  object o = build_add();
  ts_rt_kernel *k = load_ok(o, "add_kernel");
  buffers *t = malloc(sizeof *t);
  buffers_init(t);
  ts_eval_config cfg = {
      .number = 1, .repeat = 3, .min_repeat_ms = 2, .warmup = 1};
  double seconds[3] = {0, 0, 0};
  int number = 0;
  assert_int_equal(
      ts_rt_eval_kernel(NULL, &cfg, k, t->args, seconds, &number, NULL), TS_OK);
  for (int r = 0; r < 3; r++) {
    assert_true(seconds[r] > 0);
    assert_true(seconds[r] * number >= 2e-3);
  }
  assert_float_equal(t->c[5], t->a[5] + t->b[5], 0);
  ts_rt_kernel_unload(k);
  free(o.bytes);

  o = build_fail();
  k = load_ok(o, "fail_kernel");
  ts_error err;
  ts_error_clear(&err);
  assert_int_equal(
      ts_rt_eval_kernel(NULL, &cfg, k, t->args, seconds, NULL, &err),
      TS_ERANGE);
  printf("  failing kernel: %s\n", err.msg);
  assert_non_null(strstr(err.msg, "kernel 'fail_kernel' failed"));
  assert_non_null(strstr(err.msg, "returned 3"));
  ts_rt_kernel_unload(k);
  free(o.bytes);
  free(t);
}

/* Two threads loading and running at once. */
typedef struct load_job {
  object o;
  int ok;
} load_job;

static void *load_thread(void *arg) {
  load_job *job = arg;
  buffers *t = malloc(sizeof *t);
  job->ok = 1;
  for (int r = 0; r < 10; r++) {
    ts_rt_kernel *k = NULL;
    if (ts_rt_kernel_load(job->o.bytes, job->o.size, "add_kernel", &k, NULL)) {
      job->ok = 0;
      break;
    }
    buffers_init(t);
    if (ts_rt_kernel_call(k, t->args, NULL, NULL) ||
        t->c[10] != t->a[10] + t->b[10])
      job->ok = 0;
    ts_rt_kernel_unload(k);
  }
  free(t);
  return NULL;
}

static void test_concurrent_loads(void **state) {
  (void)state;
  object o = build_add();
  load_job jobs[2] = {{o, 0}, {o, 0}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++)
    assert_int_equal(pthread_create(&th[i], NULL, load_thread, &jobs[i]), 0);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  assert_int_equal(jobs[0].ok, 1);
  assert_int_equal(jobs[1].ok, 1);
  free(o.bytes);
}

static long resident_kib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long size = 0, resident = 0;
  if (f) {
    if (fscanf(f, "%ld %ld", &size, &resident) != 2) resident = 0;
    fclose(f);
  }
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static void load_run_unload(object o, buffers *t, ts_runtime *rt) {
  ts_rt_kernel *k = NULL;
  assert_int_equal(ts_rt_kernel_load(o.bytes, o.size, "par_kernel", &k, NULL),
                   TS_OK);
  assert_int_equal(ts_rt_kernel_call(k, t->args, rt, NULL), TS_OK);
  ts_rt_kernel_unload(k);
}

static void test_load_unload_memory(void **state) {
  (void)state;
  object o = build_parallel();
  buffers *t = malloc(sizeof *t);
  buffers_init(t);
  ts_runtime *rt = NULL;
  assert_int_equal(ts_runtime_create(2, &rt, NULL), TS_OK);
  if (UNDER_ASAN) {
    /* ASan's quarantine holds freed memory, so resident memory says nothing
     * here; a few cycles still check that nothing leaks. */
    for (int i = 0; i < 20; i++) load_run_unload(o, t, rt);
    printf("  2000-cycle resident-memory check skipped: AddressSanitizer "
           "build (its quarantine distorts RSS); ran 20 cycles for leak "
           "checking\n");
  } else {
    for (int i = 0; i < 200; i++) load_run_unload(o, t, rt);
    long before = resident_kib();
    double start = (double)clock() / CLOCKS_PER_SEC;
    for (int i = 0; i < 2000; i++) load_run_unload(o, t, rt);
    double cpu = (double)clock() / CLOCKS_PER_SEC - start;
    long after = resident_kib();
    printf("  2000 load/call/unload cycles: resident %ld KiB -> %ld KiB "
           "(%+ld KiB), %.2f ms CPU per cycle\n",
           before, after, after - before, cpu * 1000 / 2000);
    assert_true(after - before < 4096);
  }
  assert_float_equal(t->c[3], t->a[3] + t->b[3], 0);
  ts_runtime_destroy(rt);
  free(t);
  free(o.bytes);
}

/* ---- AMX ---- */

#define TM 16
#define TN 16
#define TK 32

/* amx_kernel(args = {A bf16[16][32], Bp bf16[16][32] (VNNI-packed B),
 * C float[16][16]}): C = A * B with one tdpbf16ps. */
static object build_amx(void) {
  jit j;
  jit_open(&j, "amx");
  LLVMTypeRef amx = LLVMX86AMXTypeInContext(j.ctx);
  LLVMTypeRef void_t = LLVMVoidTypeInContext(j.ctx);
  LLVMTypeRef load_params[4] = {j.i16, j.i16, j.ptr, j.i64};
  LLVMTypeRef load_t = LLVMFunctionType(amx, load_params, 4, 0);
  LLVMValueRef tload =
      LLVMAddFunction(j.mod, "llvm.x86.tileloadd64.internal", load_t);
  LLVMTypeRef zero_params[2] = {j.i16, j.i16};
  LLVMTypeRef zero_t = LLVMFunctionType(amx, zero_params, 2, 0);
  LLVMValueRef tzero =
      LLVMAddFunction(j.mod, "llvm.x86.tilezero.internal", zero_t);
  LLVMTypeRef dp_params[6] = {j.i16, j.i16, j.i16, amx, amx, amx};
  LLVMTypeRef dp_t = LLVMFunctionType(amx, dp_params, 6, 0);
  LLVMValueRef tdp =
      LLVMAddFunction(j.mod, "llvm.x86.tdpbf16ps.internal", dp_t);
  LLVMTypeRef store_params[5] = {j.i16, j.i16, j.ptr, j.i64, amx};
  LLVMTypeRef store_t = LLVMFunctionType(void_t, store_params, 5, 0);
  LLVMValueRef tstore =
      LLVMAddFunction(j.mod, "llvm.x86.tilestored64.internal", store_t);

  LLVMValueRef fn = add_kernel_fn(&j, "amx_kernel");
  const char *key = "target-features", *value = "+amx-tile,+amx-bf16";
  LLVMAddAttributeAtIndex(
      fn, LLVMAttributeFunctionIndex,
      LLVMCreateStringAttribute(j.ctx, key, (unsigned)strlen(key), value,
                                (unsigned)strlen(value)));
  LLVMValueRef args = LLVMGetParam(fn, 0);
  LLVMValueRef a = load_arg(&j, args, 0), bp = load_arg(&j, args, 1),
               c = load_arg(&j, args, 2);
  LLVMValueRef rows = LLVMConstInt(j.i16, TM, 0);
  LLVMValueRef bytes64 = LLVMConstInt(j.i16, 64, 0);
  LLVMValueRef la[4] = {rows, bytes64, a, i64c(&j, 64)};
  LLVMValueRef ta = LLVMBuildCall2(j.b, load_t, tload, la, 4, "ta");
  LLVMValueRef lb[4] = {LLVMConstInt(j.i16, TK / 2, 0), bytes64, bp,
                        i64c(&j, 64)};
  LLVMValueRef tb = LLVMBuildCall2(j.b, load_t, tload, lb, 4, "tb");
  LLVMValueRef lz[2] = {rows, bytes64};
  LLVMValueRef tc = LLVMBuildCall2(j.b, zero_t, tzero, lz, 2, "tc");
  LLVMValueRef ld[6] = {rows, bytes64, bytes64, tc, ta, tb};
  LLVMValueRef td = LLVMBuildCall2(j.b, dp_t, tdp, ld, 6, "td");
  LLVMValueRef ls[5] = {rows, bytes64, c, i64c(&j, 64), td};
  LLVMBuildCall2(j.b, store_t, tstore, ls, 5, "");
  LLVMBuildRet(j.b, i32c(&j, 0));
  return jit_finish(&j);
}

static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16); /* the values used are exact in bf16 */
}

static float from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static void test_amx(void **state) {
  (void)state;
  /* The object is built and loaded everywhere; it runs only with AMX. */
  object o = build_amx();
  ts_rt_kernel *k = load_ok(o, "amx_kernel");
  ts_error err;
  ts_error_clear(&err);
  int rc = ts_rt_enable_amx(&err);
  bool cpu_amx =
      ts_rt_cpu_has("amx-tile") == 1 && ts_rt_cpu_has("amx-bf16") == 1;
  if (!cpu_amx) {
    assert_int_equal(rc, TS_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "amx-tile"));
    printf("  AMX tile matmul skipped: this CPU has no AMX (%s)\n", err.msg);
    ts_rt_kernel_unload(k);
    free(o.bytes);
    skip();
  }
  if (rc != TS_OK) {
    printf("  AMX tile matmul skipped: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "refused"));
    ts_rt_kernel_unload(k);
    free(o.bytes);
    skip();
  }
  /* A second request answers the same. */
  assert_int_equal(ts_rt_enable_amx(NULL), TS_OK);
  _Alignas(64) uint16_t A[TM][TK], B[TK][TN], Bp[TK / 2][2 * TN];
  _Alignas(64) float C[TM][TN];
  for (int i = 0; i < TM; i++)
    for (int kk = 0; kk < TK; kk++)
      A[i][kk] = to_bf16((float)((i * 7 + kk * 3) % 17 - 8) / 8.0f);
  for (int kk = 0; kk < TK; kk++)
    for (int jj = 0; jj < TN; jj++)
      B[kk][jj] = to_bf16((float)((kk * 5 + jj * 11) % 13 - 6) / 4.0f);
  for (int kk = 0; kk < TK; kk++)
    for (int jj = 0; jj < TN; jj++) Bp[kk / 2][2 * jj + kk % 2] = B[kk][jj];
  memset(C, 0xff, sizeof C);
  void *args[3] = {A, Bp, C};
  assert_int_equal(ts_rt_kernel_call(k, args, NULL, NULL), TS_OK);
  for (int i = 0; i < TM; i++)
    for (int jj = 0; jj < TN; jj++) {
      float want = 0;
      for (int kk = 0; kk < TK; kk++)
        want += from_bf16(A[i][kk]) * from_bf16(B[kk][jj]);
      assert_float_equal(C[i][jj], want, 1e-3);
    }
  printf("  AMX bf16 16x16x32 tile matmul matches the scalar reference\n");
  ts_rt_kernel_unload(k);
  free(o.bytes);
}

int main(void) {
  LLVMInitializeNativeTarget();
  LLVMInitializeNativeAsmPrinter();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_add_kernel),
      cmocka_unit_test(test_parallel_kernel),
      cmocka_unit_test(test_alloc_and_libm_kernels),
      cmocka_unit_test(test_load_errors),
      cmocka_unit_test(test_eval_kernel),
      cmocka_unit_test(test_concurrent_loads),
      cmocka_unit_test(test_load_unload_memory),
      cmocka_unit_test(test_amx),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
