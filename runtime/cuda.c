/*
 * cuda.c — the CUDA driver loader: opens libcuda.so.1 with dlopen (the
 * binary never links it, so it runs and reports "no CUDA driver" where there
 * is none), resolves the driver API entry points it uses, and wraps device
 * queries, the primary context, PTX modules (cuModuleLoadDataEx with the JIT
 * error log), launches, device memory and event timing. cuda.h is included
 * for types and constants only; a build without it keeps the entry points
 * and answers "built without CUDA headers".
 */
#include "runtime/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TS_HAVE_CUDA_H

#include <cuda.h>
#include <dlfcn.h>

#define DRIVER_LIB "libcuda.so.1"

/* The driver entry points tessera uses, resolved with dlsym. */
typedef struct driver {
  void *lib;
  CUresult (*Init)(unsigned);
  CUresult (*DeviceGetCount)(int *);
  CUresult (*DeviceGet)(CUdevice *, int);
  CUresult (*DeviceGetName)(char *, int, CUdevice);
  CUresult (*DeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
  CUresult (*DeviceTotalMem)(size_t *, CUdevice);
  CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*DevicePrimaryCtxRelease)(CUdevice);
  CUresult (*CtxSetCurrent)(CUcontext);
  CUresult (*CtxSynchronize)(void);
  CUresult (*ModuleLoadDataEx)(CUmodule *, const void *, unsigned,
                               CUjit_option *, void **);
  CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*ModuleUnload)(CUmodule);
  CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                           unsigned, unsigned, unsigned, CUstream, void **,
                           void **);
  CUresult (*MemAlloc)(CUdeviceptr *, size_t);
  CUresult (*MemFree)(CUdeviceptr);
  CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
  CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
  CUresult (*MemsetD8)(CUdeviceptr, unsigned char, size_t);
  CUresult (*EventCreate)(CUevent *, unsigned);
  CUresult (*EventRecord)(CUevent, CUstream);
  CUresult (*EventSynchronize)(CUevent);
  CUresult (*EventElapsedTime)(float *, CUevent, CUevent);
  CUresult (*EventDestroy)(CUevent);
  CUresult (*GetErrorName)(CUresult, const char **);
  CUresult (*GetErrorString)(CUresult, const char **);
} driver;

/* One entry point: its slot in `driver` and the exported symbol names to
 * try, newest ABI version first. */
typedef struct entry_point {
  size_t offset;
  const char *names[2];
} entry_point;

#define EP(field, ...)                                                         \
  {                                                                            \
    offsetof(driver, field), { __VA_ARGS__ }                                   \
  }
static const entry_point entry_points[] = {
    EP(Init, "cuInit"),
    EP(DeviceGetCount, "cuDeviceGetCount"),
    EP(DeviceGet, "cuDeviceGet"),
    EP(DeviceGetName, "cuDeviceGetName"),
    EP(DeviceGetAttribute, "cuDeviceGetAttribute"),
    EP(DeviceTotalMem, "cuDeviceTotalMem_v2"),
    EP(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
    EP(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2",
       "cuDevicePrimaryCtxRelease"),
    EP(CtxSetCurrent, "cuCtxSetCurrent"),
    EP(CtxSynchronize, "cuCtxSynchronize"),
    EP(ModuleLoadDataEx, "cuModuleLoadDataEx"),
    EP(ModuleGetFunction, "cuModuleGetFunction"),
    EP(ModuleUnload, "cuModuleUnload"),
    EP(LaunchKernel, "cuLaunchKernel"),
    EP(MemAlloc, "cuMemAlloc_v2"),
    EP(MemFree, "cuMemFree_v2"),
    EP(MemcpyHtoD, "cuMemcpyHtoD_v2"),
    EP(MemcpyDtoH, "cuMemcpyDtoH_v2"),
    EP(MemsetD8, "cuMemsetD8_v2"),
    EP(EventCreate, "cuEventCreate"),
    EP(EventRecord, "cuEventRecord"),
    EP(EventSynchronize, "cuEventSynchronize"),
    EP(EventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime"),
    EP(EventDestroy, "cuEventDestroy_v2", "cuEventDestroy"),
    EP(GetErrorName, "cuGetErrorName"),
    EP(GetErrorString, "cuGetErrorString"),
};
#undef EP

struct ts_cuda {
  driver drv;
  int device;
  CUdevice dev;
  CUcontext ctx;
};

struct ts_cuda_module {
  ts_cuda *cuda;
  CUmodule mod;
};

/* Records a failed driver call: "CALL: NAME (text)". */
static int cu_fail(const driver *d, CUresult r, const char *call, int code,
                   ts_error *err) {
  const char *name = NULL, *text = NULL;
  if (d->GetErrorName) d->GetErrorName(r, &name);
  if (d->GetErrorString) d->GetErrorString(r, &text);
  return TS_ERR(err, code, "CUDA: %s failed: %s (%s)", call,
                name ? name : "unknown error", text ? text : "no description");
}

static void close_driver(driver *d) {
  if (d->lib) dlclose(d->lib);
  memset(d, 0, sizeof *d);
}

/* Opens the driver library, resolves every entry point and runs cuInit. */
static int open_driver(driver *d, ts_error *err) {
  memset(d, 0, sizeof *d);
  d->lib = dlopen(DRIVER_LIB, RTLD_NOW | RTLD_LOCAL);
  if (!d->lib)
    return TS_ERR(err, TS_EUNSUPPORTED,
                  "no CUDA driver (" DRIVER_LIB " not found)");
  for (size_t i = 0; i < sizeof entry_points / sizeof entry_points[0]; i++) {
    const entry_point *ep = &entry_points[i];
    void *sym = NULL;
    for (int j = 0; j < 2 && ep->names[j] && !sym; j++)
      sym = dlsym(d->lib, ep->names[j]);
    if (!sym) {
      close_driver(d);
      return TS_ERR(err, TS_EUNSUPPORTED,
                    "CUDA driver too old: " DRIVER_LIB " does not export %s",
                    ep->names[0]);
    }
    memcpy((char *)d + ep->offset, &sym, sizeof sym);
  }
  CUresult r = d->Init(0);
  if (r != CUDA_SUCCESS) {
    int rc = cu_fail(d, r, "cuInit", TS_EUNSUPPORTED, err);
    close_driver(d);
    return rc;
  }
  return TS_OK;
}

int ts_cuda_device_count(int *count, ts_error *err) {
  driver d;
  int rc = open_driver(&d, err);
  if (rc) return rc;
  int n = 0;
  CUresult r = d.DeviceGetCount(&n);
  if (r != CUDA_SUCCESS)
    rc = cu_fail(&d, r, "cuDeviceGetCount", TS_EINVAL, err);
  else
    *count = n;
  close_driver(&d);
  return rc;
}

int ts_cuda_open(int device, ts_cuda **out, ts_error *err) {
  ts_cuda *c = calloc(1, sizeof *c);
  if (!c) return TS_ERR(err, TS_ENOMEM, "CUDA: out of memory");
  int rc = open_driver(&c->drv, err);
  if (rc) {
    free(c);
    return rc;
  }
  int n = 0;
  CUresult r = c->drv.DeviceGetCount(&n);
  if (r != CUDA_SUCCESS) {
    rc = cu_fail(&c->drv, r, "cuDeviceGetCount", TS_EUNSUPPORTED, err);
  } else if (device < 0 || device >= n) {
    rc = TS_ERR(err, TS_EUNSUPPORTED,
                "CUDA: no device %d (the driver reports %d device%s)", device,
                n, n == 1 ? "" : "s");
  } else if ((r = c->drv.DeviceGet(&c->dev, device)) != CUDA_SUCCESS) {
    rc = cu_fail(&c->drv, r, "cuDeviceGet", TS_EUNSUPPORTED, err);
  } else if ((r = c->drv.DevicePrimaryCtxRetain(&c->ctx, c->dev)) !=
             CUDA_SUCCESS) {
    rc = cu_fail(&c->drv, r, "cuDevicePrimaryCtxRetain", TS_EUNSUPPORTED, err);
  } else if ((r = c->drv.CtxSetCurrent(c->ctx)) != CUDA_SUCCESS) {
    c->drv.DevicePrimaryCtxRelease(c->dev);
    rc = cu_fail(&c->drv, r, "cuCtxSetCurrent", TS_EUNSUPPORTED, err);
  }
  if (rc) {
    close_driver(&c->drv);
    free(c);
    return rc;
  }
  c->device = device;
  *out = c;
  return TS_OK;
}

void ts_cuda_close(ts_cuda *c) {
  if (!c) return;
  c->drv.CtxSetCurrent(NULL);
  c->drv.DevicePrimaryCtxRelease(c->dev);
  close_driver(&c->drv);
  free(c);
}

/* Makes c's context current on the calling thread. */
static int make_current(ts_cuda *c, ts_error *err) {
  if (!c) return TS_ERR(err, TS_EINVAL, "CUDA: no device handle");
  CUresult r = c->drv.CtxSetCurrent(c->ctx);
  if (r != CUDA_SUCCESS)
    return cu_fail(&c->drv, r, "cuCtxSetCurrent", TS_EINVAL, err);
  return TS_OK;
}

int ts_cuda_device_info_get(const ts_cuda *c, ts_cuda_device_info *out,
                            ts_error *err) {
  if (!c) return TS_ERR(err, TS_EINVAL, "CUDA: no device handle");
  memset(out, 0, sizeof *out);
  const driver *d = &c->drv;
  CUresult r = d->DeviceGetName(out->name, (int)sizeof out->name, c->dev);
  if (r != CUDA_SUCCESS)
    return cu_fail(d, r, "cuDeviceGetName", TS_EINVAL, err);
  struct {
    CUdevice_attribute attr;
    int *dst;
    const char *what;
  } attrs[] = {
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &out->sm_major,
       "compute capability major"},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &out->sm_minor,
       "compute capability minor"},
      {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &out->max_threads_per_block,
       "max threads per block"},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK,
       &out->max_shared_memory_per_block, "max shared memory per block"},
      {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK,
       &out->max_registers_per_block, "max registers per block"},
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &out->multiprocessor_count,
       "multiprocessor count"},
      {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, &out->l2_cache_bytes,
       "L2 cache size"},
  };
  for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
    r = d->DeviceGetAttribute(attrs[i].dst, attrs[i].attr, c->dev);
    if (r != CUDA_SUCCESS) {
      char call[96];
      snprintf(call, sizeof call, "cuDeviceGetAttribute(%s)", attrs[i].what);
      return cu_fail(d, r, call, TS_EINVAL, err);
    }
  }
  size_t total = 0;
  r = d->DeviceTotalMem(&total, c->dev);
  if (r != CUDA_SUCCESS)
    return cu_fail(d, r, "cuDeviceTotalMem", TS_EINVAL, err);
  out->total_memory = (int64_t)total;
  return TS_OK;
}

int ts_cuda_module_load(ts_cuda *c, const char *ptx, ts_cuda_module **out,
                        ts_error *err) {
  int rc = make_current(c, err);
  if (rc) return rc;
  if (!ptx || !ptx[0]) return TS_ERR(err, TS_EINVAL, "CUDA: empty PTX");
  ts_cuda_module *m = calloc(1, sizeof *m);
  if (!m) return TS_ERR(err, TS_ENOMEM, "CUDA: out of memory");
  char log[4096] = "";
  CUjit_option opts[2] = {CU_JIT_ERROR_LOG_BUFFER,
                          CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[2] = {log, (void *)(uintptr_t)sizeof log};
  CUresult r = c->drv.ModuleLoadDataEx(&m->mod, ptx, 2, opts, values);
  if (r != CUDA_SUCCESS) {
    free(m);
    log[sizeof log - 1] = '\0';
    ts_error tmp;
    cu_fail(&c->drv, r, "cuModuleLoadDataEx", TS_EINVAL, &tmp);
    return TS_ERR(err, TS_EINVAL, "%s; JIT error log: %s", tmp.msg,
                  log[0] ? log : "(empty)");
  }
  m->cuda = c;
  *out = m;
  return TS_OK;
}

void ts_cuda_module_unload(ts_cuda_module *m) {
  if (!m) return;
  if (make_current(m->cuda, NULL) == TS_OK) m->cuda->drv.ModuleUnload(m->mod);
  free(m);
}

int ts_cuda_module_function(ts_cuda_module *m, const char *name,
                            ts_cuda_function **out, ts_error *err) {
  if (!m) return TS_ERR(err, TS_EINVAL, "CUDA: no module");
  CUfunction f = NULL;
  CUresult r = m->cuda->drv.ModuleGetFunction(&f, m->mod, name);
  if (r == CUDA_ERROR_NOT_FOUND)
    return TS_ERR(err, TS_ENOTFOUND, "CUDA: the module has no kernel '%s'",
                  name);
  if (r != CUDA_SUCCESS)
    return cu_fail(&m->cuda->drv, r, "cuModuleGetFunction", TS_EINVAL, err);
  *out = (ts_cuda_function *)f;
  return TS_OK;
}

static int check_dims(const ts_cuda_dims *dims, ts_error *err) {
  if (!dims) return TS_ERR(err, TS_EINVAL, "CUDA: no launch dimensions");
  for (int i = 0; i < 3; i++)
    if (dims->grid[i] == 0 || dims->block[i] == 0)
      return TS_ERR(err, TS_EINVAL,
                    "CUDA: launch dimensions must be >= 1 (grid %u,%u,%u "
                    "block %u,%u,%u)",
                    dims->grid[0], dims->grid[1], dims->grid[2], dims->block[0],
                    dims->block[1], dims->block[2]);
  return TS_OK;
}

/* Launches without making the context current again (the caller did). */
static int launch(ts_cuda *c, ts_cuda_function *f, const ts_cuda_dims *dims,
                  void **params, ts_error *err) {
  CUresult r = c->drv.LaunchKernel((CUfunction)f, dims->grid[0], dims->grid[1],
                                   dims->grid[2], dims->block[0],
                                   dims->block[1], dims->block[2],
                                   dims->shared_bytes, NULL, params, NULL);
  if (r != CUDA_SUCCESS)
    return cu_fail(&c->drv, r, "cuLaunchKernel", TS_EINVAL, err);
  return TS_OK;
}

int ts_cuda_launch(ts_cuda *c, ts_cuda_function *f, const ts_cuda_dims *dims,
                   void **params, ts_error *err) {
  int rc = make_current(c, err);
  if (rc || (rc = check_dims(dims, err))) return rc;
  return launch(c, f, dims, params, err);
}

int ts_cuda_synchronize(ts_cuda *c, ts_error *err) {
  int rc = make_current(c, err);
  if (rc) return rc;
  CUresult r = c->drv.CtxSynchronize();
  if (r != CUDA_SUCCESS)
    return cu_fail(&c->drv, r, "cuCtxSynchronize", TS_EINVAL, err);
  return TS_OK;
}

int ts_cuda_alloc(ts_cuda *c, size_t bytes, uint64_t *dptr, ts_error *err) {
  int rc = make_current(c, err);
  if (rc) return rc;
  CUdeviceptr p = 0;
  CUresult r = c->drv.MemAlloc(&p, bytes ? bytes : 1);
  if (r == CUDA_ERROR_OUT_OF_MEMORY)
    return TS_ERR(err, TS_ENOMEM, "CUDA: out of device memory (%zu bytes)",
                  bytes);
  if (r != CUDA_SUCCESS)
    return cu_fail(&c->drv, r, "cuMemAlloc", TS_EINVAL, err);
  *dptr = (uint64_t)p;
  return TS_OK;
}

void ts_cuda_free(ts_cuda *c, uint64_t dptr) {
  if (!c || !dptr) return;
  if (make_current(c, NULL) == TS_OK) c->drv.MemFree((CUdeviceptr)dptr);
}

int ts_cuda_copy_to_device(ts_cuda *c, uint64_t dst, const void *src,
                           size_t bytes, ts_error *err) {
  int rc = make_current(c, err);
  if (rc) return rc;
  CUresult r = c->drv.MemcpyHtoD((CUdeviceptr)dst, src, bytes);
  if (r != CUDA_SUCCESS)
    return cu_fail(&c->drv, r, "cuMemcpyHtoD", TS_EINVAL, err);
  return TS_OK;
}

int ts_cuda_copy_to_host(ts_cuda *c, void *dst, uint64_t src, size_t bytes,
                         ts_error *err) {
  int rc = make_current(c, err);
  if (rc) return rc;
  CUresult r = c->drv.MemcpyDtoH(dst, (CUdeviceptr)src, bytes);
  if (r != CUDA_SUCCESS)
    return cu_fail(&c->drv, r, "cuMemcpyDtoH", TS_EINVAL, err);
  return TS_OK;
}

/* Times `number` launches between two events; seconds in *elapsed. */
static int time_launches(ts_cuda *c, ts_cuda_function *f,
                         const ts_cuda_dims *dims, void **params, int number,
                         CUevent start, CUevent stop, double *elapsed,
                         ts_error *err) {
  const driver *d = &c->drv;
  CUresult r = d->EventRecord(start, NULL);
  if (r != CUDA_SUCCESS) return cu_fail(d, r, "cuEventRecord", TS_EINVAL, err);
  for (int i = 0; i < number; i++) {
    int rc = launch(c, f, dims, params, err);
    if (rc) return rc;
  }
  if ((r = d->EventRecord(stop, NULL)) != CUDA_SUCCESS)
    return cu_fail(d, r, "cuEventRecord", TS_EINVAL, err);
  if ((r = d->EventSynchronize(stop)) != CUDA_SUCCESS)
    return cu_fail(d, r, "cuEventSynchronize (a kernel failed)", TS_ERANGE,
                   err);
  float ms = 0;
  if ((r = d->EventElapsedTime(&ms, start, stop)) != CUDA_SUCCESS)
    return cu_fail(d, r, "cuEventElapsedTime", TS_EINVAL, err);
  *elapsed = ms * 1e-3;
  return TS_OK;
}

int ts_cuda_eval(ts_cuda *c, const ts_eval_config *cfg, ts_cuda_function *f,
                 const ts_cuda_dims *dims, void **params, double *seconds,
                 int *number_used, ts_error *err) {
  int rc = make_current(c, err);
  if (rc || (rc = eval_check_config(cfg, err)) || (rc = check_dims(dims, err)))
    return rc;
  if (!f || !seconds)
    return TS_ERR(err, TS_EINVAL, "CUDA evaluator: no kernel or no output");
  const driver *d = &c->drv;
  CUevent start = NULL, stop = NULL;
  CUdeviceptr flush = 0;
  size_t flush_bytes = 0;
  CUresult r;
  if ((r = d->EventCreate(&start, CU_EVENT_DEFAULT)) != CUDA_SUCCESS ||
      (r = d->EventCreate(&stop, CU_EVENT_DEFAULT)) != CUDA_SUCCESS) {
    rc = cu_fail(d, r, "cuEventCreate", TS_EINVAL, err);
    goto done;
  }
  if (cfg->flush_cache) {
    int l2 = 0;
    d->DeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, c->dev);
    flush_bytes = (size_t)(l2 > 0 ? l2 : 64 << 20) * 2;
    if ((r = d->MemAlloc(&flush, flush_bytes)) != CUDA_SUCCESS) {
      flush = 0;
      rc = cu_fail(d, r, "cuMemAlloc (L2 flush buffer)", TS_ENOMEM, err);
      goto done;
    }
  }
  for (int i = 0; i < cfg->warmup && !rc; i++)
    rc = launch(c, f, dims, params, err);
  if (rc) goto done;
  if ((r = d->CtxSynchronize()) != CUDA_SUCCESS) {
    rc = cu_fail(d, r, "cuCtxSynchronize (a warm-up run failed)", TS_ERANGE,
                 err);
    goto done;
  }
  int number = cfg->number;
  for (int rep = 0; rep < cfg->repeat && !rc; rep++) {
    for (;;) {
      if (flush && (r = d->MemsetD8(flush, (unsigned char)rep, flush_bytes)) !=
                       CUDA_SUCCESS) {
        rc = cu_fail(d, r, "cuMemsetD8 (L2 flush)", TS_EINVAL, err);
        break;
      }
      double elapsed = 0;
      rc =
          time_launches(c, f, dims, params, number, start, stop, &elapsed, err);
      if (rc) break;
      if (elapsed * 1e3 >= cfg->min_repeat_ms || number >= TS_EVAL_MAX_NUMBER) {
        seconds[rep] = elapsed / number;
        break;
      }
      number = eval_grow_number(number, elapsed, cfg->min_repeat_ms);
    }
  }
  if (!rc && number_used) *number_used = number;
done:
  if (flush) d->MemFree(flush);
  if (stop) d->EventDestroy(stop);
  if (start) d->EventDestroy(start);
  return rc;
}

#else /* !TS_HAVE_CUDA_H */

#define NO_HEADERS(err)                                                        \
  TS_ERR(err, TS_EUNSUPPORTED,                                                 \
         "CUDA support is unavailable: tessera was built without CUDA "        \
         "headers")

int ts_cuda_device_count(int *count, ts_error *err) {
  (void)count;
  return NO_HEADERS(err);
}
int ts_cuda_open(int device, ts_cuda **out, ts_error *err) {
  (void)device, (void)out;
  return NO_HEADERS(err);
}
void ts_cuda_close(ts_cuda *c) { (void)c; }
int ts_cuda_device_info_get(const ts_cuda *c, ts_cuda_device_info *out,
                            ts_error *err) {
  (void)c, (void)out;
  return NO_HEADERS(err);
}
int ts_cuda_module_load(ts_cuda *c, const char *ptx, ts_cuda_module **out,
                        ts_error *err) {
  (void)c, (void)ptx, (void)out;
  return NO_HEADERS(err);
}
void ts_cuda_module_unload(ts_cuda_module *m) { (void)m; }
int ts_cuda_module_function(ts_cuda_module *m, const char *name,
                            ts_cuda_function **out, ts_error *err) {
  (void)m, (void)name, (void)out;
  return NO_HEADERS(err);
}
int ts_cuda_launch(ts_cuda *c, ts_cuda_function *f, const ts_cuda_dims *dims,
                   void **params, ts_error *err) {
  (void)c, (void)f, (void)dims, (void)params;
  return NO_HEADERS(err);
}
int ts_cuda_synchronize(ts_cuda *c, ts_error *err) {
  (void)c;
  return NO_HEADERS(err);
}
int ts_cuda_alloc(ts_cuda *c, size_t bytes, uint64_t *dptr, ts_error *err) {
  (void)c, (void)bytes, (void)dptr;
  return NO_HEADERS(err);
}
void ts_cuda_free(ts_cuda *c, uint64_t dptr) { (void)c, (void)dptr; }
int ts_cuda_copy_to_device(ts_cuda *c, uint64_t dst, const void *src,
                           size_t bytes, ts_error *err) {
  (void)c, (void)dst, (void)src, (void)bytes;
  return NO_HEADERS(err);
}
int ts_cuda_copy_to_host(ts_cuda *c, void *dst, uint64_t src, size_t bytes,
                         ts_error *err) {
  (void)c, (void)dst, (void)src, (void)bytes;
  return NO_HEADERS(err);
}
int ts_cuda_eval(ts_cuda *c, const ts_eval_config *cfg, ts_cuda_function *f,
                 const ts_cuda_dims *dims, void **params, double *seconds,
                 int *number_used, ts_error *err) {
  (void)c, (void)cfg, (void)f, (void)dims, (void)params, (void)seconds,
      (void)number_used;
  return NO_HEADERS(err);
}

#endif /* TS_HAVE_CUDA_H */
