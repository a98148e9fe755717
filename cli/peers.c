/*
 * peers.c — vendor libraries as confirmation peers: each library that
 * implements a workload (bench/) is opened once and then timed in the same
 * interleaved rounds as tessera's candidates (tuner/confirm.c), so the
 * stored ratio compares figures from the same seconds.
 */
#include "cli/cli.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench.h"
#include <cjson/cJSON.h>

static int peer_time(void *ctx, int min_repeat_ms, double *seconds,
                     ts_error *err) {
  ts_bench_session *s = ctx;
  ts_eval_config one = {.number = 1,
                        .repeat = 1,
                        .min_repeat_ms = min_repeat_ms,
                        .flush_cache = false,
                        .warmup = 1};
  int rc = ts_bench_measure(s, &one, err);
  if (rc) return rc;
  const double *all = NULL;
  int n = ts_bench_samples(s, &all);
  if (n < 1) return TS_ERR(err, TS_ERANGE, "no sample");
  *seconds = all[n - 1];
  return TS_OK;
}

int cli_peers_open(const ts_workload *w, int threads, cli_peers *out) {
  memset(out, 0, sizeof *out);
  if (!w) return 0;
  /* the vendors in the order bench lists them; the plain C loop only
   * where no library applies (it is a floor, not a vendor) */
  for (int v = 0; v < TS_BENCH_N_VENDORS && out->n < TS_CONFIRM_MAX_PEERS;
       v++) {
    if (v == TS_BENCH_NAIVE && out->n > 0) break;
    ts_bench_options bo = ts_bench_options_default();
    bo.threads = threads;
    bo.keep_output = false;
    ts_error err;
    ts_error_clear(&err);
    ts_bench_session *s = NULL;
    if (ts_bench_open((ts_bench_vendor)v, w, &bo, &s, &err) != TS_OK) {
      if (err.code != TS_EUNSUPPORTED)
        snprintf(out->why, sizeof out->why, "%s: %.150s",
                 ts_bench_vendor_name((ts_bench_vendor)v), err.msg);
      continue;
    }
    out->sessions[out->n] = s;
    out->peers[out->n] =
        (ts_confirm_peer){.name = ts_bench_vendor_name((ts_bench_vendor)v),
                          .threads = threads,
                          .time = peer_time,
                          .ctx = s};
    out->n++;
  }
  return out->n;
}

int cli_peers_open_db(ts_db *db, int64_t workload_id, const char *spec,
                      const char *target, int threads, cli_peers *out) {
  memset(out, 0, sizeof *out);
  char *found = spec ? NULL : cli_workload_spec(db, workload_id);
  const char *use = spec ? spec : found;
  ts_workload *w = NULL;
  if (use && ts_workload_from_spec(use, &w, NULL)) w = NULL;
  free(found);
  if (!w) return 0;
  if (threads <= 0) {
    ts_target *t = NULL;
    threads = ts_target_parse(target, &t, NULL) ? 1 : ts_target_num_cores(t);
    ts_target_free(t);
  }
  cli_peers_open(w, threads, out);
  out->owned = w;
  return out->n;
}

/* ---- a graph task's vendor call (libtessera_dnnl) as a peer ---- */

struct cli_vendor_call {
  void *lib, *op;
  int (*run)(void *, void *const *);
  void (*destroy)(void *);
  void (*evict)(void *, void *const *, const size_t *, int, uint64_t);
  void **args;
  size_t *bytes;
  int n_args;
  uint64_t const_params; /* the arguments a cold timing evicts */
};

static void vendor_call_free(struct cli_vendor_call *c) {
  if (!c) return;
  if (c->op) c->destroy(c->op);
  for (int i = 0; i < c->n_args; i++) free(c->args[i]);
  free(c->args);
  free(c->bytes);
  if (c->lib) dlclose(c->lib);
  free(c);
}

/* oneDNN runs on OpenMP threads, tessera's candidates on the tuner's own
 * pool: two pools on the same cores disturb each other while one spins
 * waiting for work. So the call is warmed up for a few milliseconds
 * (tessera's workers stop spinning and sleep) and timed; the confirmation
 * then idles before the next candidate of the round runs
 * (ts_confirm_options.settle_ms), so that the OpenMP workers stop spinning
 * (libgomp's default spin is a few milliseconds). In a compiled
 * model both run on the one OpenMP team (graph/compile_emit.c). */
static int vendor_call_time(void *ctx, int min_repeat_ms, double *seconds,
                            ts_error *err) {
  struct cli_vendor_call *c = ctx;
  double t0 = ts_now_seconds(), t = t0;
  do { /* warm-up */
    if (c->run(c->op, c->args))
      return TS_ERR(err, TS_EINTERNAL, "the vendor call failed");
    t = ts_now_seconds();
  } while (t - t0 < 3e-3);
  long n = 0;
  t0 = t;
  do {
    if (c->run(c->op, c->args))
      return TS_ERR(err, TS_EINTERNAL, "the vendor call failed");
    n++;
    t = ts_now_seconds();
  } while ((t - t0) * 1e3 < (min_repeat_ms > 2 ? min_repeat_ms : 2));
  *seconds = (t - t0) / (double)n;
  return TS_OK;
}

/* A cold timing: one call untimed, the constants evicted (the task's and
 * the weights oneDNN reordered), one call timed (the pause after it as
 * above). */
static int vendor_call_time_cold(void *ctx, double *seconds, ts_error *err) {
  struct cli_vendor_call *c = ctx;
  if (c->run(c->op, c->args))
    return TS_ERR(err, TS_EINTERNAL, "the vendor call failed");
  c->evict(c->op, c->args, c->bytes, c->n_args, c->const_params);
  double t0 = ts_now_seconds();
  if (c->run(c->op, c->args))
    return TS_ERR(err, TS_EINTERNAL, "the vendor call failed");
  *seconds = ts_now_seconds() - t0;
  return TS_OK;
}

int cli_peers_add_vendor_call(cli_peers *p, const ts_func *f, const char *desc,
                              uint64_t const_params, int threads,
                              ts_error *err) {
  if (p->n >= TS_CONFIRM_MAX_PEERS || p->call)
    return TS_ERR(err, TS_ERANGE, "no room for another peer");
  char dir[4096], path[4200];
  int rc = ts_graph_runtime_dir(dir, sizeof dir, err);
  if (rc) return rc;
  snprintf(path, sizeof path, "%s/libtessera_dnnl.so", dir);
  struct cli_vendor_call *c = calloc(1, sizeof *c);
  if (!c) return TS_ERR(err, TS_ENOMEM, "out of memory");
  c->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  int (*create)(const char *, void *const *, int, void **, char *, size_t) =
      NULL;
  if (c->lib) {
    *(void **)&create = dlsym(c->lib, "ts_vendor_dnnl_create");
    *(void **)&c->run = dlsym(c->lib, "ts_vendor_dnnl_run");
    *(void **)&c->destroy = dlsym(c->lib, "ts_vendor_dnnl_destroy");
    *(void **)&c->evict = dlsym(c->lib, "ts_vendor_dnnl_evict");
  }
  if (!c->lib || !create || !c->run || !c->destroy || !c->evict) {
    rc = TS_ERR(err, TS_ENOTFOUND, "the vendor library '%s': %s", path,
                c->lib ? "lacks its functions" : dlerror());
    vendor_call_free(c);
    return rc;
  }
  /* every argument a buffer of its parameter's size (a call's timing does
   * not depend on the values): float32 ones random in [0.5, 1.5), so that
   * the scales an int8 call reads when it is created are valid; integer
   * ones zero (zero points oneDNN takes with any padding) */
  c->n_args = ts_func_n_params(f);
  c->const_params = const_params;
  c->args = calloc((size_t)c->n_args + 1, sizeof *c->args);
  c->bytes = calloc((size_t)c->n_args + 1, sizeof *c->bytes);
  unsigned seed = 12345;
  for (int i = 0; c->args && i < c->n_args; i++) {
    const ts_buffer *b = ts_func_param(f, i);
    int64_t bytes = ts_buffer_bytes(b);
    size_t size = (size_t)((bytes + 63) & ~(int64_t)63) + 64;
    c->args[i] = aligned_alloc(64, size);
    if (!c->args[i] || !c->bytes) break;
    c->bytes[i] = (size_t)bytes;
    memset(c->args[i], 0, size);
    if (!ts_dtype_eq(ts_buffer_dtype(b), TS_FLOAT32)) continue;
    float *x = c->args[i];
    for (int64_t k = 0; k < bytes / 4; k++)
      x[k] =
          (float)((seed = seed * 1103515245u + 12345u) >> 16) / 65536.f + 0.5f;
  }
  if (!c->args || !c->bytes || (c->n_args && !c->args[c->n_args - 1])) {
    vendor_call_free(c);
    return TS_ERR(err, TS_ENOMEM, "out of memory");
  }
  char why[600] = "";
  if (create(desc, c->args, threads, &c->op, why, sizeof why)) {
    c->op = NULL;
    vendor_call_free(c);
    return TS_ERR(err, TS_EUNSUPPORTED, "%s", why);
  }
  p->call = c;
  p->peers[p->n++] = (ts_confirm_peer){.name = "onednn",
                                       .threads = threads,
                                       .time = vendor_call_time,
                                       .time_cold = vendor_call_time_cold,
                                       .ctx = c};
  return TS_OK;
}

void cli_peers_close(cli_peers *p) {
  /* reverse order of opening: each session restores its library's thread
   * count */
  for (int i = p->n - 1; i >= 0; i--)
    if (p->sessions[i]) ts_bench_close(p->sessions[i], NULL);
  vendor_call_free(p->call);
  ts_workload_free(p->owned);
  memset(p, 0, sizeof *p);
}

char *cli_workload_spec(ts_db *db, int64_t workload_id) {
  ts_db_workload w;
  if (ts_db_get_workload(db, workload_id, &w)) return NULL;
  ts_db_job *jobs = NULL;
  int n = 0;
  char *spec = NULL;
  if (ts_db_jobs(db, &jobs, &n) == TS_OK)
    for (int i = n - 1; i >= 0 && !spec; i--) {
      cJSON *cfg =
          jobs[i].config_json ? cJSON_Parse(jobs[i].config_json) : NULL;
      const cJSON *t;
      cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(cfg, "tasks")) {
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(t, "hash");
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(t, "workload");
        if (cJSON_IsString(h) && cJSON_IsString(s) &&
            !strcmp(h->valuestring, w.hash)) {
          spec = strdup(s->valuestring);
          break;
        }
      }
      cJSON_Delete(cfg);
    }
  ts_db_jobs_free(jobs, n);
  ts_db_workload_clear(&w);
  return spec;
}
