/*
 * cmd_probe.c — `tessera probe`: measures this machine's limits with kernels
 * tessera generates itself: fp32 FMA throughput for each vector width the
 * target has (512/256/128 bits; on some CPUs narrower FMAs run faster), on
 * one core and on all cores; AMX bf16 tile throughput where present; and
 * memory bandwidth (copy and triad over buffers much larger than the
 * last-level cache). Prints a table and stores the figures with the target
 * in the tuning database (the report's "% of peak").
 */
#include "cli.h"

#include "codegen/codegen.h"
#include "db/db.h"
#include "runtime/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char probe_usage[] =
    "usage: tessera probe [--target T] [--db PATH] [--no-store] [--json]\n"
    "\n"
    "Measures peak fp32 FMA GFLOP/s per core and on all cores for each vector\n"
    "width of the target, AMX bf16 TFLOP/s where the CPU has AMX, and memory\n"
    "bandwidth (copy, triad). Stores the figures for the target in the tuning\n"
    "database (default ./tessera.db) unless --no-store; --json prints them as\n"
    "one JSON object.\n";

/* Independent FMA chains per thread: enough to cover the FMA latency on
 * two pipes (8 on current x86 cores), few enough that the code generator
 * keeps them in vector registers on every target (its register promotion
 * leaves four of AVX2's sixteen to the operands; with 16 they stayed in
 * memory and the probe read half the peak). */
#define ACCUMULATORS 10
#define FMA_STEPS 100000

typedef struct probe {
  const ts_target *t;
  ts_runtime *rt1, *rt_all;
  ts_error *err;
} probe;

/* Builds TIR text and times it; returns seconds per run of the fastest
 * repeat, or a negative value with err set. */
static double time_text(probe *p, const char *text, ts_runtime *rt) {
  ts_func *f = NULL;
  cli_kernel k;
  double result = -1;
  if (ts_func_parse(text, strlen(text), "probe", &f, p->err)) return result;
  if (!cli_kernel_build(f, p->t, 1, &k, p->err)) {
    ts_eval_config cfg = ts_eval_config_default();
    cfg.repeat = 5;
    cfg.min_repeat_ms = 100;
    cfg.warmup = 1;
    double secs[5];
    if (!ts_rt_eval_kernel(rt, &cfg, k.kernel, ts_rt_args_data(k.args), secs,
                           NULL, p->err)) {
      /* A peak is the best the machine does: the fastest repeat (the
       * others lost time to whatever else ran). */
      result = secs[0];
      for (int i = 1; i < 5; i++)
        if (secs[i] < result) result = secs[i];
    }
    cli_kernel_free(&k);
  }
  ts_func_free(f);
  return result;
}

/* FMA throughput with `lanes`-wide vectors on `threads` threads: each
 * thread runs ACCUMULATORS independent vector FMA chains. */
static double fma_gflops(probe *p, int lanes, int threads, ts_runtime *rt) {
  char text[4096];
  snprintf(
      text, sizeof text,
      "func fma_peak(X: float32[%d, %d]) {\n"
      "  for t in range(%d) parallel {\n"
      "    block w(vt: spatial(%d) = t) {\n"
      "      alloc acc: float32[%d, %d] scope \"local\"\n"
      "      for j in range(%d) unrolled {\n"
      "        for l in range(%d) vectorized {\n"
      "          acc[j, l] = X[vt, l] + cast(float32, j)\n"
      "        }\n      }\n"
      "      for r in range(%d) {\n"
      "        for j in range(%d) unrolled {\n"
      "          for l in range(%d) vectorized {\n"
      "            acc[j, l] = fma(acc[j, l], float32(0.999), float32(0.001))\n"
      "          }\n        }\n      }\n"
      "      for j in range(%d) unrolled {\n"
      "        for l in range(%d) vectorized {\n"
      "          X[vt, l] = X[vt, l] + acc[j, l]\n"
      "        }\n      }\n"
      "    }\n  }\n}\n",
      threads, lanes, threads, threads, ACCUMULATORS, lanes, ACCUMULATORS,
      lanes, FMA_STEPS, ACCUMULATORS, lanes, ACCUMULATORS, lanes);
  double s = time_text(p, text, rt);
  if (s <= 0) return -1;
  return 2.0 * ACCUMULATORS * lanes * (double)FMA_STEPS * threads / s * 1e-9;
}

/* Memory bandwidth in GB/s: copy (B = A) or triad (A = B + 3 C) over
 * n floats per buffer, parallel over the threads. */
static double bandwidth(probe *p, bool triad, int64_t n, int threads,
                        ts_runtime *rt) {
  int64_t q = n / (16 * (int64_t)threads);
  n = q * 16 * threads;
  char text[2048];
  if (triad)
    snprintf(
        text, sizeof text,
        "func triad(A: float32[%lld], B: float32[%lld], C: float32[%lld]) {\n"
        "  for p in range(%d) parallel {\n    for q in range(%lld) {\n"
        "      for l in range(16) vectorized {\n"
        "        block t(vi: spatial(%lld) = (p * %lld + q) * 16 + l) {\n"
        "          A[vi] = B[vi] + float32(3) * C[vi]\n"
        "        }\n      }\n    }\n  }\n}\n",
        (long long)n, (long long)n, (long long)n, threads, (long long)q,
        (long long)n, (long long)q);
  else
    snprintf(text, sizeof text,
             "func copy(A: float32[%lld], B: float32[%lld]) {\n"
             "  for p in range(%d) parallel {\n    for q in range(%lld) {\n"
             "      for l in range(16) vectorized {\n"
             "        block c(vi: spatial(%lld) = (p * %lld + q) * 16 + l) {\n"
             "          B[vi] = A[vi]\n"
             "        }\n      }\n    }\n  }\n}\n",
             (long long)n, (long long)n, threads, (long long)q, (long long)n,
             (long long)q);
  double s = time_text(p, text, rt);
  if (s <= 0) return -1;
  double bytes = (triad ? 3.0 : 2.0) * 4.0 * (double)n;
  return bytes / s * 1e-9;
}

/* AMX bf16: repeated 16x16x512 tile products (16 tdpbf16ps per call). */
static double amx_tflops(probe *p, ts_runtime *rt) {
  const char *text = "func amx_peak(A: bfloat16[16, 512], Bp: bfloat16[256, "
                     "32], C: float32[16, 16]) {\n"
                     "  for r in range(2000) {\n"
                     "    evaluate call<int32>(\"tessera.amx_bf16_gemm\", "
                     "&C[0, 0], 16, &A[0, 0], 512, "
                     "&Bp[0, 0], 32, 512)\n"
                     "  }\n}\n";
  double s = time_text(p, text, rt);
  if (s <= 0) return -1;
  return 2.0 * 16 * 16 * 512 * 2000.0 / s * 1e-12;
}

int cmd_probe(int argc, char **argv) {
  const char *target_str = NULL, *db_path = "tessera.db";
  bool store = true, json = false;
  for (int i = 1; i < argc; i++) {
    const char *v;
    bool missing;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(probe_usage, stdout);
      return EXIT_OK;
    } else if (!strcmp(argv[i], "--no-store")) {
      store = false;
    } else if (!strcmp(argv[i], "--json")) {
      json = true;
    } else if (cli_opt_value(argc, argv, &i, "--target", &v, &missing)) {
      if (missing) return cli_usage_error("probe", "--target needs a target");
      target_str = v;
    } else if (cli_opt_value(argc, argv, &i, "--db", &v, &missing)) {
      if (missing) return cli_usage_error("probe", "--db needs a path");
      db_path = v;
    } else {
      return cli_usage_error("probe", "unknown option '%s'", argv[i]);
    }
  }
  ts_error err;
  ts_error_clear(&err);
  ts_target *t = NULL;
  int rc = target_str ? ts_target_parse(target_str, &t, &err)
                      : ts_target_host(&t, &err);
  if (rc) {
    cli_error("bad target", &err);
    return EXIT_FAIL;
  }
  int status = EXIT_FAIL;
  probe p = {.t = t, .err = &err};
  /* probe measures this machine's CPU; devices are probed by their
   * workers */
  if (ts_target_check_runs_here(t, "probe", &err)) {
    fprintf(stderr, "tessera: error: %s\n", err.msg);
    goto done;
  }
  int cores = ts_target_num_cores(t);
  if (ts_runtime_create(1, &p.rt1, &err) ||
      ts_runtime_create(cores, &p.rt_all, &err)) {
    cli_error("cannot start the thread pool", &err);
    goto done;
  }
  int widths[3] = {512, 256, 128};
  double per_core[3] = {-1, -1, -1}, all[3] = {-1, -1, -1};
  double best1 = 0, best_all = 0;
  int best_width = 0;
  for (int w = 0; w < 3; w++) {
    if (widths[w] > ts_target_vector_bits(t)) continue;
    if (!json) fprintf(stderr, "probing %d-bit FMA...\n", widths[w]);
    per_core[w] = fma_gflops(&p, widths[w] / 32, 1, p.rt1);
    all[w] = fma_gflops(&p, widths[w] / 32, cores, p.rt_all);
    if (per_core[w] < 0 || all[w] < 0) {
      cli_error("the FMA kernel failed", &err);
      goto done;
    }
    if (per_core[w] > best1) {
      best1 = per_core[w];
      best_width = widths[w];
    }
    if (all[w] > best_all) best_all = all[w];
  }
  double amx = -1;
  if (ts_target_has_feature(t, "amx-bf16")) {
    if (ts_rt_enable_amx(&err) == TS_OK) amx = amx_tflops(&p, p.rt1);
    if (amx < 0) fprintf(stderr, "tessera: AMX not measured: %s\n", err.msg);
  }
  if (!json) fprintf(stderr, "probing memory bandwidth...\n");
  int64_t llc = (int64_t)ts_rt_llc_bytes();
  int64_t n = 4 * llc / 4; /* floats: each buffer 4x the last-level cache */
  if (n < (int64_t)64 << 20) n = (int64_t)64 << 20;
  if (n > (int64_t)256 << 20) n = (int64_t)256 << 20;
  double copy = bandwidth(&p, false, n, cores, p.rt_all);
  double triad = bandwidth(&p, true, n, cores, p.rt_all);
  if (copy < 0 || triad < 0) {
    cli_error("the bandwidth kernel failed", &err);
    goto done;
  }

  char probe_json[1024], isa[160];
  int len = snprintf(
      probe_json, sizeof probe_json,
      "{\"isa\": \"%s\", \"cores\": %d, "
      "\"fp32_gflops_per_core\": %.1f, "
      "\"fp32_gflops_all_cores\": %.1f, \"fp32_best_vector_bits\": %d",
      ts_target_isa(t, isa, sizeof isa), cores, best1, best_all, best_width);
  for (int w = 0; w < 3; w++)
    if (per_core[w] >= 0)
      len += snprintf(probe_json + len, sizeof probe_json - (size_t)len,
                      ", \"fp32_gflops_per_core_%d\": %.1f, "
                      "\"fp32_gflops_all_cores_%d\": %.1f",
                      widths[w], per_core[w], widths[w], all[w]);
  if (amx >= 0)
    len += snprintf(probe_json + len, sizeof probe_json - (size_t)len,
                    ", \"amx_bf16_tflops_per_core\": %.2f", amx);
  snprintf(probe_json + len, sizeof probe_json - (size_t)len,
           ", \"mem_copy_gbs\": %.1f, \"mem_triad_gbs\": %.1f, "
           "\"mem_bandwidth_gbs\": %.1f, \"buffer_mib\": %lld}",
           copy, triad, copy > triad ? copy : triad, (long long)(n * 4 >> 20));

  if (json) {
    printf("%s\n", probe_json);
  } else {
    printf("target: %s\n", ts_target_str(t));
    cli_print_target_isa(stdout, t);
    printf("\n");
    printf("%-28s %14s %14s\n", "fp32 FMA", "per core", "all cores");
    for (int w = 0; w < 3; w++)
      if (per_core[w] >= 0)
        printf("%-28s %9.1f GF/s %9.1f GF/s%s\n",
               widths[w] == 512   ? "  512-bit vectors"
               : widths[w] == 256 ? "  256-bit vectors"
                                  : "  128-bit vectors",
               per_core[w], all[w], widths[w] == best_width ? "  (best)" : "");
    if (amx >= 0)
      printf("%-28s %9.2f TF/s\n", "AMX bf16", amx);
    else
      printf("%-28s %14s\n", "AMX bf16", "not present");
    printf("%-28s %9.1f GB/s\n", "memory copy", copy);
    printf("%-28s %9.1f GB/s\n", "memory triad", triad);
  }
  if (store) {
    ts_db *db = NULL;
    int64_t tid;
    if (ts_db_open(db_path, NULL, &db, &err) ||
        ts_db_commit_target(db, ts_target_str(t), &tid) ||
        ts_db_set_target_probe(db, tid, probe_json)) {
      if (db)
        fprintf(stderr, "tessera: error: storing the figures: %s\n",
                ts_db_errmsg(db));
      else
        cli_error("cannot open the database", &err);
      ts_db_close(db);
      goto done;
    }
    ts_db_close(db);
    if (!json) printf("\nstored for this target in %s\n", db_path);
  }
  status = EXIT_OK;
done:
  ts_runtime_destroy(p.rt1);
  ts_runtime_destroy(p.rt_all);
  ts_target_free(t);
  return status;
}
