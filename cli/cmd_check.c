/*
 * cmd_check.c — `tessera check`: builds a workload, verifies it, runs it in
 * the reference interpreter on seeded random inputs, checks the result for
 * determinism, for agreement with the function re-read from its own text
 * form and for non-finite outputs, then compiles it for the host and checks
 * the compiled kernel's outputs against the interpreter's.
 */
#include "cli.h"

#include "codegen/codegen.h"
#include "runtime/runtime.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char check_usage[] =
    "usage: tessera check (--workload SPEC | --tir FILE) [--seed N] [--quiet]\n"
    "                     [--json]\n"
    "\n"
    "Builds the workload, prints its TIR (unless --quiet), verifies it, runs\n"
    "it in the reference interpreter on seeded random inputs and checks the\n"
    "outputs: finite, identical when re-run, identical for the function\n"
    "re-parsed from its printed text; then compiles it for this machine\n"
    "(LLVM, in memory) and checks the compiled kernel's outputs against the\n"
    "interpreter's. Exit 0 when every check passes. --json prints the\n"
    "results as one JSON object (docs/cli.md), also when a check fails.\n";

#define MAX_CHECK_BYTES ((int64_t)1 << 30)

int cli_admit(const ts_workload *w, const ts_func *f, long max_memory_mb,
              double max_gflop) {
  ts_workload tmp;
  if (!w) {
    memset(&tmp, 0, sizeof tmp);
    tmp.func = (ts_func *)f;
    snprintf(tmp.spec, sizeof tmp.spec, "%s", ts_func_name(f));
    tmp.flops = ts_func_flops(f);
    w = &tmp;
  }
  ts_workload_limits lim = {0};
  char why[96] = "";
  if (max_memory_mb > 0) {
    lim.max_bytes = (int64_t)max_memory_mb << 20;
  } else {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) {
      lim.max_bytes = (int64_t)pages * page / 2;
      snprintf(why, sizeof why, " (half of this machine's %.1f GB)",
               (double)pages * page / 1e9);
      lim.why = why;
    }
  }
  lim.max_flops = (max_gflop > 0 ? max_gflop : CLI_MAX_GFLOP) * 1e9;
  lim.bytes_flag = "--max-memory-mb N";
  lim.flops_flag = "--max-gflop N";
  ts_error err;
  ts_error_clear(&err);
  if (ts_workload_admit(w, &lim, &err) != TS_OK) {
    cli_error("workload refused", &err);
    return EXIT_FAIL;
  }
  return EXIT_OK;
}

/* Buffers for every parameter of f, filled from the seed. */
static void **make_args(const ts_func *f, uint64_t seed) {
  int n = ts_func_n_params(f);
  void **args = calloc((size_t)n + 1, sizeof *args);
  for (int i = 0; i < n; i++) {
    ts_buffer *b = ts_func_param(f, i);
    args[i] = calloc(1, (size_t)ts_buffer_bytes(b) + 1);
    ts_host_fill_random(args[i], ts_buffer_dtype(b), ts_buffer_storage_elems(b),
                        seed + (uint64_t)i);
  }
  return args;
}

static void free_args(const ts_func *f, void **args) {
  for (int i = 0; i < ts_func_n_params(f); i++) free(args[i]);
  free(args);
}

static int run(const ts_func *f, void **args, double *seconds) {
  ts_error err;
  ts_error_clear(&err);
  double t0 = ts_now_seconds();
  int rc = ts_interp_run(f, args, ts_func_n_params(f), NULL, &err);
  *seconds = ts_now_seconds() - t0;
  if (rc != TS_OK) cli_error("interpreter failed", &err);
  return rc;
}

/* --json: the result object (NULL: text lines on stdout). */
static cJSON *jout;

/* A text line of the result, printed unless the result is JSON. */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
  if (jout) return;
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
}

/* The JSON entry of output parameter `name` (made on first use). */
static cJSON *output_json(const char *name) {
  cJSON *arr = cJSON_GetObjectItemCaseSensitive(jout, "outputs"), *o;
  if (!arr) arr = cJSON_AddArrayToObject(jout, "outputs");
  cJSON_ArrayForEach(o, arr) {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, "name");
    if (cJSON_IsString(n) && !strcmp(n->valuestring, name)) return o;
  }
  o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "name", name);
  if (!cJSON_AddItemToArray(arr, o)) { /* out of memory: no array */
    cJSON_Delete(o);
    return NULL;
  }
  return o;
}

static int64_t count_nonfinite(const void *data, ts_dtype t, int64_t n) {
  if (!ts_dtype_is_float(t)) return 0;
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++)
    if (!isfinite(ts_host_get(data, t, i))) bad++;
  return bad;
}

/* Compiles f for the host, runs it on inputs made from `seed` and compares
 * its outputs with the interpreter's (`want`, one buffer per parameter). */
static int check_compiled(const ts_func *f, void **want, uint64_t seed) {
  ts_error err;
  ts_error_clear(&err);
  ts_target *host = NULL;
  ts_build_result br = {0};
  ts_rt_kernel *k = NULL;
  ts_runtime *rt = NULL;
  void **got = NULL;
  int rc = ts_target_host(&host, &err);
  ts_build_options o = ts_build_defaults();
  if (!rc) rc = ts_build(f, host, &o, &br, &err);
  if (!rc)
    rc = ts_rt_kernel_load(br.artifact->bytes, br.artifact->n_bytes,
                           br.artifact->entry, &k, &err);
  if (!rc) rc = ts_runtime_create(ts_target_num_cores(host), &rt, &err);
  if (!rc) {
    got = make_args(f, seed);
    rc = ts_rt_kernel_call(k, got, rt, &err);
  }
  if (rc) {
    cli_error("compiling or running the kernel failed", &err);
    goto done;
  }
  double ms = br.lower_ms + br.emit_ms + br.opt_ms + br.codegen_ms;
  say("compile:   %.1f ms (lower %.1f, emit %.1f, optimize %.1f, code %.1f) "
      "for %s\n",
      ms, br.lower_ms, br.emit_ms, br.opt_ms, br.codegen_ms,
      ts_target_str(host));
  if (jout) {
    cJSON *c = cJSON_AddObjectToObject(jout, "compile");
    cJSON_AddStringToObject(c, "target", ts_target_str(host));
    cJSON_AddNumberToObject(c, "ms", ms);
    cJSON_AddNumberToObject(c, "lower_ms", br.lower_ms);
    cJSON_AddNumberToObject(c, "emit_ms", br.emit_ms);
    cJSON_AddNumberToObject(c, "optimize_ms", br.opt_ms);
    cJSON_AddNumberToObject(c, "code_ms", br.codegen_ms);
  }
  for (int i = 0; i < ts_func_n_params(f); i++) {
    if (!ts_func_param_is_output(f, i)) continue;
    ts_buffer *b = ts_func_param(f, i);
    int64_t n = ts_buffer_storage_elems(b), first;
    double max_err;
    int64_t bad = ts_host_compare(got[i], want[i], ts_buffer_dtype(b), n,
                                  &first, &max_err);
    say("compiled %s: %s (largest difference %.3g)\n", ts_buffer_name(b),
        bad ? "DIFFERS FROM THE INTERPRETER" : "matches the interpreter",
        max_err);
    if (jout) {
      cJSON *o = output_json(ts_buffer_name(b));
      cJSON_AddBoolToObject(o, "compiled_matches", !bad);
      cJSON_AddNumberToObject(o, "compiled_max_difference", max_err);
    }
    if (bad) rc = TS_ERANGE;
  }
done:
  if (got) free_args(f, got);
  ts_runtime_destroy(rt);
  ts_rt_kernel_unload(k);
  ts_build_result_clear(&br);
  ts_target_free(host);
  return rc;
}

static int check(int argc, char **argv) {
  const char *spec = NULL, *tir = NULL;
  uint64_t seed = 1;
  bool quiet = false;
  for (int i = 1; i < argc; i++) {
    const char *v;
    bool missing;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(check_usage, stdout);
      return EXIT_OK;
    } else if (!strcmp(argv[i], "--quiet")) {
      quiet = true;
    } else if (!strcmp(argv[i], "--json")) {
      /* cmd_check made jout */
    } else if (cli_opt_value(argc, argv, &i, "--workload", &v, &missing)) {
      if (missing) return cli_usage_error("check", "--workload needs a spec");
      spec = v;
    } else if (cli_opt_value(argc, argv, &i, "--tir", &v, &missing)) {
      if (missing) return cli_usage_error("check", "--tir needs a file");
      tir = v;
    } else if (cli_opt_value(argc, argv, &i, "--seed", &v, &missing)) {
      char *end;
      if (missing) return cli_usage_error("check", "--seed needs a number");
      seed = strtoull(v, &end, 10);
      if (*v == 0 || *end != 0)
        return cli_usage_error("check", "--seed wants a number, got '%s'", v);
    } else {
      return cli_usage_error("check", "unknown option '%s'", argv[i]);
    }
  }
  if (!spec == !tir)
    return cli_usage_error("check", "give exactly one of --workload or --tir");

  ts_workload *w;
  ts_func *f;
  int rc = cli_load_func(spec, tir, &w, &f);
  if (rc != EXIT_OK) return rc;
  int status = EXIT_FAIL;
  ts_func *g = NULL;
  void **args = NULL, **again = NULL, **reparsed = NULL;
  ts_error err;
  ts_error_clear(&err);

  char hex[33];
  ts_hash128_hex(ts_func_hash(f), hex);
  double flops = w ? w->flops : ts_func_flops(f);
  char *text = ts_func_print(f);
  if (!quiet) say("%s", text);
  say("workload:  %s\n", w ? w->spec : tir);
  say("hash:      %s\n", hex);
  say("flops:     %.0f\n", flops);
  if (jout) {
    cJSON_AddStringToObject(jout, "workload", w ? w->spec : tir);
    cJSON_AddStringToObject(jout, "hash", hex);
    cJSON_AddNumberToObject(jout, "flops", flops);
    if (!quiet) cJSON_AddStringToObject(jout, "tir", text);
  }

  if (ts_func_verify(f, &err) != TS_OK) {
    cli_error("the function does not verify", &err);
    goto done;
  }
  say("verify:    ok\n");
  if (jout) cJSON_AddBoolToObject(jout, "verify", true);
  int64_t total = 0;
  for (int i = 0; i < ts_func_n_params(f); i++)
    total += ts_buffer_bytes(ts_func_param(f, i));
  if (total > MAX_CHECK_BYTES) {
    fprintf(stderr,
            "tessera: error: the parameters need %lld bytes; check runs "
            "workloads up to %lld bytes in the interpreter\n",
            (long long)total, (long long)MAX_CHECK_BYTES);
    goto done;
  }
  if (ts_func_parse(text, strlen(text), "<printed>", &g, &err) != TS_OK) {
    cli_error("the printed text does not parse back", &err);
    goto done;
  }
  if (!ts_func_equal(f, g)) {
    fprintf(stderr, "tessera: error: the re-parsed function differs\n");
    goto done;
  }

  double t1, t2, t3;
  args = make_args(f, seed);
  again = make_args(f, seed);
  reparsed = make_args(g, seed);
  if (run(f, args, &t1) || run(f, again, &t2) || run(g, reparsed, &t3))
    goto done;
  say("interpret: %.3f s (%.1f MFLOP/s)\n", t1,
      t1 > 0 ? flops / t1 * 1e-6 : 0.0);
  if (jout) cJSON_AddNumberToObject(jout, "interpret_s", t1);

  bool ok = true;
  for (int i = 0; i < ts_func_n_params(f); i++) {
    if (!ts_func_param_is_output(f, i)) continue;
    ts_buffer *b = ts_func_param(f, i);
    size_t bytes = (size_t)ts_buffer_bytes(b);
    int64_t n = ts_buffer_storage_elems(b);
    int64_t nonfinite = count_nonfinite(args[i], ts_buffer_dtype(b), n);
    bool same = memcmp(args[i], again[i], bytes) == 0;
    bool same_text = memcmp(args[i], reparsed[i], bytes) == 0;
    say("output %s: %lld elements, %s, %s, %s\n", ts_buffer_name(b),
        (long long)n, nonfinite ? "NON-FINITE VALUES" : "finite",
        same ? "deterministic" : "NOT DETERMINISTIC",
        same_text ? "text round trip identical" : "TEXT ROUND TRIP DIFFERS");
    if (jout) {
      cJSON *o = output_json(ts_buffer_name(b));
      cJSON_AddNumberToObject(o, "elements", (double)n);
      cJSON_AddNumberToObject(o, "nonfinite", (double)nonfinite);
      cJSON_AddBoolToObject(o, "deterministic", same);
      cJSON_AddBoolToObject(o, "text_round_trip", same_text);
    }
    ok = ok && !nonfinite && same && same_text;
  }
  if (ok) ok = check_compiled(f, args, seed) == TS_OK;
  say("check:     %s\n", ok ? "ok" : "FAILED");
  status = ok ? EXIT_OK : EXIT_FAIL;

done:
  free(text);
  if (args) free_args(f, args);
  if (again) free_args(f, again);
  if (reparsed) free_args(g, reparsed);
  ts_func_free(g);
  if (w)
    ts_workload_free(w);
  else
    ts_func_free(f);
  return status;
}

/* --json: every result in one object, printed also when a check fails
 * ("check": "failed"; the reason on stderr); not for usage errors. */
int cmd_check(int argc, char **argv) {
  for (int i = 1; i < argc && !jout; i++)
    if (!strcmp(argv[i], "--json")) jout = cJSON_CreateObject();
  int rc = check(argc, argv);
  if (jout && rc != EXIT_USAGE && jout->child) {
    cJSON_AddStringToObject(jout, "check", rc == EXIT_OK ? "ok" : "failed");
    cli_print_json(jout);
  } else {
    cJSON_Delete(jout);
  }
  jout = NULL;
  return rc;
}
