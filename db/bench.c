/*
 * bench.c — the benchmark behind `tessera db bench`: fills a scratch
 * database through the public API (matmul workloads of distinct shapes, two
 * targets, records with realistic trace JSON, statuses and run times,
 * committed in batches under one job), then times the compile-time query
 * ts_db_best_by_func on a new connection (measure() says how).
 */
#include "internal.h"

#include "codegen/codegen.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BENCH_BATCH 1000

static const char *const bench_targets[2] = {
    "llvm -mcpu=skylake-avx512 -num-cores=2",
    "cuda -arch=sm_80",
};

ts_db_bench_options ts_db_bench_defaults(void) {
  return (ts_db_bench_options){
      .records = 1000000, .workloads = 10000, .queries = 20000, .seed = 1};
}

static uint64_t next_random(uint64_t *s) {
  uint64_t x = *s += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/* The spec of workload i: a matmul whose (M, N, K) is the i-th point of an
 * n×n×n grid of multiples of 16. */
static void workload_spec(int i, int n, char out[96]) {
  snprintf(out, 96, "matmul M=%d N=%d K=%d", 16 * (i % n + 1),
           16 * (i / n % n + 1), 16 * (i / (n * n) + 1));
}

/* A trace of the size and shape the tuner writes: a few sampling
 * instructions and their decisions. */
static void make_trace(uint64_t *rng, char *out, size_t cap) {
  int t[4], u = (int)(next_random(rng) % 4);
  for (int i = 0; i < 4; i++) t[i] = 1 << (next_random(rng) % 6);
  snprintf(
      out, cap,
      "{\"version\":1,\"insts\":["
      "{\"kind\":\"get_block\",\"inputs\":[],\"attrs\":{\"name\":\"C\"},"
      "\"outputs\":[\"b0\"]},"
      "{\"kind\":\"get_loops\",\"inputs\":[\"b0\"],\"attrs\":{},"
      "\"outputs\":[\"l1\",\"l2\",\"l3\"]},"
      "{\"kind\":\"sample_perfect_tile\",\"inputs\":[\"l1\"],\"attrs\":"
      "{\"n\":4,\"max_innermost\":64},\"outputs\":[\"v4\",\"v5\",\"v6\","
      "\"v7\"]},"
      "{\"kind\":\"split\",\"inputs\":[\"l1\",\"v4\",\"v5\",\"v6\",\"v7\"],"
      "\"attrs\":{},\"outputs\":[\"l8\",\"l9\",\"l10\",\"l11\"]},"
      "{\"kind\":\"sample_categorical\",\"inputs\":[],\"attrs\":"
      "{\"candidates\":[0,16,64,512]},\"outputs\":[\"v12\"]},"
      "{\"kind\":\"annotate\",\"inputs\":[\"b0\",\"v12\"],\"attrs\":"
      "{\"key\":\"" TS_ANN_AUTO_UNROLL_MAX_STEP "\"},\"outputs\":[]}],"
      "\"decisions\":[[2,[%d,%d,%d,%d]],[4,%d]]}",
      t[0], t[1], t[2], t[3], u);
}

static double percentile(double *v, int n, double p) {
  if (n == 0) return NAN;
  qsort(v, (size_t)n, sizeof *v, ts_cmp_double);
  int i = (int)ceil(p * n) - 1;
  return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

static void remove_db_files(const char *path) {
  static const char *const suffix[] = {"", "-wal", "-shm", "-journal"};
  char buf[4200];
  for (int i = 0; i < 4; i++) {
    snprintf(buf, sizeof buf, "%s%s", path, suffix[i]);
    unlink(buf);
  }
}

static int fill(ts_db *db, const ts_db_bench_options *o, ts_workload **w,
                int64_t *ids, ts_db_bench_result *out, ts_error *err) {
  uint64_t rng = o->seed;
  int rc;
  for (int i = 0; i < o->workloads; i++) {
    if ((rc = ts_db_commit_workload(db, w[i]->func, w[i]->name, &ids[i])))
      return TS_ERR(err, rc, "%s", ts_db_errmsg(db));
  }
  int64_t job;
  if ((rc = ts_db_job_create(db, "bench", "{\"purpose\":\"db bench\"}",
                             o->records, &job)))
    return TS_ERR(err, rc, "%s", ts_db_errmsg(db));
  ts_db_measurement *m = ts_malloc(sizeof *m * BENCH_BATCH);
  char(*traces)[1024] = ts_malloc(sizeof *traces * BENCH_BATCH);
  double(*secs)[3] = ts_malloc(sizeof *secs * BENCH_BATCH);
  if (!m || !traces || !secs) {
    free(m);
    free(traces);
    free(secs);
    return TS_ERR(err, TS_ENOMEM, "db bench: out of memory");
  }
  for (int64_t done = 0; done < o->records;) {
    int n = o->records - done < BENCH_BATCH ? (int)(o->records - done)
                                            : BENCH_BATCH;
    for (int i = 0; i < n; i++) {
      int64_t r = done + i;
      int wl = (int)(r % o->workloads);
      uint64_t x = next_random(&rng);
      ts_db_status status =
          x % 100 < 85 ? TS_DB_STATUS_OK
                       : (ts_db_status)(1 + (x >> 8) % (TS_DB_N_STATUS - 1));
      double base = w[wl]->flops / 50e9; /* around 50 GFLOP/s */
      for (int k = 0; k < 3; k++)
        secs[i][k] =
            base * (0.5 + (double)(next_random(&rng) % 10000) / 5000.0);
      make_trace(&rng, traces[i], sizeof traces[i]);
      m[i] = (ts_db_measurement){
          .workload_id = ids[wl],
          .target = bench_targets[(x >> 16) % 10 < 7 ? 0 : 1],
          .trace_json = traces[i],
          .run_secs = secs[i],
          .n_run_secs = status == TS_DB_STATUS_OK ? 3 : 0,
          .status = status,
          .error = status == TS_DB_STATUS_OK ? "" : "synthetic failure",
          .job_id = job,
          .worker = "bench",
      };
    }
    if ((rc = ts_db_commit_records(db, m, n, NULL))) break;
    done += n;
    if (o->progress && (done % 100000 == 0 || done == o->records))
      fprintf(stderr, "db bench: %lld / %lld records\n", (long long)done,
              (long long)o->records);
  }
  free(m);
  free(traces);
  free(secs);
  if (rc) return TS_ERR(err, rc, "%s", ts_db_errmsg(db));
  out->records = o->records;
  return TS_OK;
}

/* One timed query; checks that the answer is the expected workload. */
static int query(ts_db *db, const ts_func *f, int64_t want, double *us,
                 ts_error *err) {
  ts_db_record r;
  double t0 = ts_now_seconds();
  int rc = ts_db_best_by_func(db, f, bench_targets[0], &r);
  *us = (ts_now_seconds() - t0) * 1e6;
  if (rc == TS_ENOTFOUND) return TS_OK; /* a workload without ok records */
  if (rc) return TS_ERR(err, rc, "%s", ts_db_errmsg(db));
  bool right = r.workload_id == want;
  ts_db_record_clear(&r);
  if (!right)
    return TS_ERR(err, TS_EINTERNAL, "best_by_func answered another workload");
  return TS_OK;
}

static int build(int i, int grid, ts_workload **w, ts_error *err) {
  char spec[96];
  workload_spec(i, grid, spec);
  return ts_workload_from_spec(spec, w, err);
}

/* Times the query three ways on a new connection: the first query of each
 * workload (cold: its stored TIR is parsed), queries at random on functions
 * just built (as a compiler builds a PrimFunc and asks), and queries on
 * functions built long before (out of the CPU caches); and the hash alone
 * on functions just built. */
static int measure(const char *path, const ts_db_bench_options *o, int grid,
                   const int64_t *ids, ts_db_bench_result *out, ts_error *err) {
  ts_db *db;
  int rc = ts_db_open(path, NULL, &db, err);
  if (rc) return rc;
  int nq = o->queries, nw = o->workloads;
  double *cold = ts_malloc(sizeof *cold * (size_t)nw);
  double *warm = ts_malloc(sizeof *warm * (size_t)(nq ? nq : 1));
  double *old = ts_malloc(sizeof *old * (size_t)(nq ? nq : 1));
  double *hash = ts_malloc(sizeof *hash * (size_t)(nq ? nq : 1));
  ts_workload **all = ts_calloc((size_t)nw, sizeof *all);
  if (!cold || !warm || !old || !hash || !all)
    rc = TS_ERR(err, TS_ENOMEM, "db bench: out of memory");
  ts_workload *w;
  for (int i = 0; i < nw && !rc; i++) {
    if ((rc = build(i, grid, &w, err))) break;
    rc = query(db, w->func, ids[i], &cold[i], err);
    ts_workload_free(w);
  }
  uint64_t rng = o->seed ^ 0x5DEECE66Dull;
  volatile uint64_t sink = 0; /* keeps the timed hash from being dropped */
  for (int q = 0; q < nq && !rc; q++) {
    int i = (int)(next_random(&rng) % (uint64_t)nw);
    if ((rc = build(i, grid, &w, err))) break;
    double t0 = ts_now_seconds();
    ts_hash128 h = ts_func_hash(w->func);
    hash[q] = (ts_now_seconds() - t0) * 1e6;
    sink ^= h.lo;
    ts_workload_free(w);
    if ((rc = build(i, grid, &w, err))) break;
    rc = query(db, w->func, ids[i], &warm[q], err);
    ts_workload_free(w);
  }
  for (int i = 0; i < nw && !rc; i++) rc = build(i, grid, &all[i], err);
  for (int q = 0; q < nq && !rc; q++) {
    int i = (int)(next_random(&rng) % (uint64_t)nw);
    rc = query(db, all[i]->func, ids[i], &old[q], err);
  }
  for (int i = 0; i < nw && all; i++)
    if (all[i]) ts_workload_free(all[i]);
  free(all);
  if (!rc) {
    out->cold_median_us = percentile(cold, nw, 0.5);
    out->cold_p99_us = percentile(cold, nw, 0.99);
    out->median_us = percentile(warm, nq, 0.5);
    out->p99_us = percentile(warm, nq, 0.99);
    out->hash_median_us = percentile(hash, nq, 0.5);
    out->prebuilt_median_us = percentile(old, nq, 0.5);
    out->prebuilt_p99_us = percentile(old, nq, 0.99);
  }
  free(cold);
  free(warm);
  free(old);
  free(hash);
  ts_db_close(db);
  return rc;
}

int ts_db_bench(const ts_db_bench_options *opts, ts_db_bench_result *out,
                ts_error *err) {
  ts_db_bench_options o = opts ? *opts : ts_db_bench_defaults();
  memset(out, 0, sizeof *out);
  if (o.workloads < 1 || o.records < o.workloads || o.queries < 0)
    return TS_ERR(err, TS_EINVAL,
                  "db bench: need workloads >= 1, records >= workloads and "
                  "queries >= 0");
  if (o.workloads > 1000000)
    return TS_ERR(err, TS_EINVAL, "db bench: at most 1000000 workloads");
  int grid = 1;
  while ((int64_t)grid * grid * grid < o.workloads) grid++;

  char dir[4096] = "";
  char path[4200];
  char *url = NULL;
  bool own_dir = !o.dir && !o.url;
  if (o.url) {
    if (!ts_db_is_url(o.url))
      return TS_ERR(err, TS_EINVAL, "db bench: '%s' is not a postgresql:// URL",
                    o.url);
    char schema[64];
    snprintf(schema, sizeof schema, "tessera_bench_%ld_%lld", (long)getpid(),
             (long long)(ts_now_seconds() * 1000) % 1000000);
    int rc = db_pg_schema(o.url, schema, true, err);
    if (rc) return rc;
    url = db_pg_schema_url(o.url, schema);
    if (!url) {
      db_pg_schema(o.url, schema, false, NULL);
      return TS_ERR(err, TS_ENOMEM, "db bench: out of memory");
    }
  } else if (own_dir) {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/tessera-db-bench-XXXXXX",
             tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(dir))
      return TS_ERR(err, TS_EIO,
                    "db bench: cannot create a scratch directory "
                    "under %s",
                    tmp && tmp[0] ? tmp : "/tmp");
  } else {
    snprintf(dir, sizeof dir, "%s", o.dir);
  }
  if (url) {
    snprintf(path, sizeof path, "%s", url);
  } else {
    snprintf(path, sizeof path, "%s/bench.db", dir);
    remove_db_files(path);
  }

  ts_workload **w = ts_calloc((size_t)o.workloads, sizeof *w);
  int64_t *ids = ts_calloc((size_t)o.workloads, sizeof *ids);
  int rc = TS_OK;
  if (!w || !ids) rc = TS_ERR(err, TS_ENOMEM, "db bench: out of memory");
  for (int i = 0; i < o.workloads && !rc; i++) {
    char spec[96];
    workload_spec(i, grid, spec);
    rc = ts_workload_from_spec(spec, &w[i], err);
  }
  ts_db *db = NULL;
  if (!rc) rc = ts_db_open(path, NULL, &db, err);
  if (!rc) {
    double t0 = ts_now_seconds();
    rc = fill(db, &o, w, ids, out, err);
    /* the planner's statistics, as a server's autovacuum (or an SQLite
     * file's ANALYZE) would have them for a filled database: planned on an
     * empty table, the query would not use the rank index */
    if (!rc &&
        (rc = db_exec(db, "ANALYZE workloads; ANALYZE records;", "analyzing")))
      rc = TS_ERR(err, rc, "%s", ts_db_errmsg(db));
    out->fill_seconds = ts_now_seconds() - t0;
    ts_db_stats st;
    if (!rc && ts_db_get_stats(db, &st) == TS_OK)
      out->file_bytes = st.file_bytes;
    ts_db_close(db);
  }
  for (int i = 0; i < o.workloads && w; i++)
    if (w[i]) ts_workload_free(w[i]);
  free(w);
  if (!rc) rc = measure(path, &o, grid, ids, out, err);
  out->workloads = o.workloads;
  out->queries = o.queries;
  free(ids);
  if (own_dir) {
    remove_db_files(path);
    rmdir(dir);
  }
  if (url) {
    /* the scratch schema goes; a failure to drop it is reported only when
     * the bench itself succeeded */
    const char *schema = strstr(url, "search_path%3D") + 14;
    ts_error drop_err;
    ts_error_clear(&drop_err);
    int drc = db_pg_schema(o.url, schema, false, &drop_err);
    if (!rc && drc) {
      if (err) *err = drop_err;
      rc = drc;
    }
    free(url);
  }
  return rc;
}
