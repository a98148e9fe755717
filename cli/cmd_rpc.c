/*
 * cmd_rpc.c — `tessera rpc bench`: measures a trivial kernel N times
 * through the embedded pool and through tracker + worker over HTTP, and
 * prints candidates per second for each side by side, with the remote
 * path's overhead per candidate. Without --tracker it starts a tracker and
 * one worker in this process on loopback.
 */
#include "cli.h"

#include "codegen/codegen.h"
#include "rpc/rpc.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char rpc_usage[] =
    "usage: tessera rpc bench [--tracker HOST:PORT --key KEY] [--n N]\n"
    "                         [--token-file F] [--json]\n"
    "\n"
    "Measures a trivial kernel (a 64-element add, one run per candidate, the\n"
    "output checked against a reference) N times (default 500) through the\n"
    "embedded pool and through a tracker and its workers, and prints\n"
    "candidates per second for each and the remote path's overhead in\n"
    "milliseconds per candidate. Without --tracker, a tracker and one worker\n"
    "are started in this process on loopback.\n"
    "--json prints {\"remote_per_s\", \"embedded_per_s\", \"overhead_ms\", "
    "...}.\n";

/* The benchmark's kernel. */
static const char bench_tir[] =
    "func bench_add(A: float32[64], B: float32[64]) {\n"
    "  for i in range(64) {\n"
    "    B[i] = A[i] + float32(1)\n"
    "  }\n"
    "}\n";

static ts_artifact *build_bench_kernel(ts_error *err) {
  ts_func *f = NULL;
  ts_target *t = NULL;
  ts_artifact *a = NULL;
  ts_build_result br = {0};
  ts_build_options o = ts_build_defaults();
  if (ts_func_parse(bench_tir, strlen(bench_tir), "bench", &f, err) == TS_OK &&
      ts_target_host(&t, err) == TS_OK && ts_build(f, t, &o, &br, err) == TS_OK)
    a = ts_artifact_retain(br.artifact);
  ts_build_result_clear(&br);
  ts_target_free(t);
  ts_func_free(f);
  return a;
}

typedef struct side {
  ts_runner *runner;
  double seconds; /* summed over the rounds */
  int ok;
  char first_error[300];
} side;

static ts_measure_config bench_config(void) {
  ts_measure_config c = ts_measure_config_default();
  c.eval.number = 1;
  c.eval.repeat = 1;
  c.eval.min_repeat_ms = 0;
  c.eval.warmup = 0;
  c.threads = 1;
  return c;
}

/* Measures n candidates on one side, adding the time to s. */
static int measure_side(side *s, ts_artifact **cands, ts_measure_result *res,
                        int n, ts_error *err) {
  ts_measure_config c = bench_config();
  double t0 = ts_now_seconds();
  int rc = ts_runner_measure(s->runner, &c, "bench", cands, n, res, err);
  s->seconds += ts_now_seconds() - t0;
  for (int i = 0; !rc && i < n; i++) {
    if (res[i].status == TS_MEASURE_OK)
      s->ok++;
    else if (!s->first_error[0])
      snprintf(s->first_error, sizeof s->first_error, "%s: %.250s",
               ts_measure_status_name(res[i].status), res[i].error);
  }
  return rc;
}

/* A warm-up batch on each side (reference outputs, connections), then n
 * candidates per side in rounds that alternate which side goes first, so
 * that load from elsewhere on the machine falls on both alike. */
static int run_bench(side *sides, ts_artifact *a, int n, ts_error *err) {
  ts_artifact **cands = calloc((size_t)n, sizeof *cands);
  ts_measure_result *res = calloc((size_t)n, sizeof *res);
  int rc = cands && res ? TS_OK : TS_ERR(err, TS_ENOMEM, "out of memory");
  for (int i = 0; !rc && i < n; i++) cands[i] = a;
  for (int k = 0; !rc && k < 2; k++) {
    ts_measure_config c = bench_config();
    rc = ts_runner_set_reference(sides[k].runner, "bench", a, err);
    if (!rc)
      rc = ts_runner_measure(sides[k].runner, &c, "bench", cands, n < 8 ? n : 8,
                             res, err);
  }
  int rounds = n < 10 ? n : 10;
  for (int r = 0; !rc && r < rounds; r++) {
    int m = n / rounds + (r < n % rounds);
    for (int k = 0; !rc && k < 2; k++)
      rc = measure_side(&sides[(k + r) % 2], cands, res, m, err);
  }
  free(cands);
  free(res);
  return rc;
}

/* Waits until the worker is registered with the tracker. */
static bool wait_registered(ts_worker *w, double seconds) {
  double end = ts_now_seconds() + seconds;
  while (ts_now_seconds() < end) {
    if (ts_worker_registered(w)) return true;
    usleep(20000);
  }
  return false;
}

static int bench(int argc, char **argv) {
  const char *tracker = NULL, *key = NULL, *token_file = NULL;
  long n = 500;
  bool json = false;
  for (int i = 1; i < argc; i++) {
    const char *val = NULL;
    bool missing = false;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(rpc_usage, stdout);
      return EXIT_OK;
    } else if (!strcmp(argv[i], "--json")) {
      json = true;
    } else if (cli_opt_value(argc, argv, &i, "--tracker", &val, &missing)) {
      if (missing) return cli_usage_error("rpc", "--tracker needs a value");
      tracker = val;
    } else if (cli_opt_value(argc, argv, &i, "--key", &val, &missing)) {
      if (missing) return cli_usage_error("rpc", "--key needs a value");
      key = val;
    } else if (cli_opt_value(argc, argv, &i, "--token-file", &val, &missing)) {
      if (missing) return cli_usage_error("rpc", "--token-file needs a value");
      token_file = val;
    } else if (cli_opt_value(argc, argv, &i, "--n", &val, &missing)) {
      if (missing) return cli_usage_error("rpc", "--n needs a value");
      if (cli_int_option("rpc", "--n", val, 1, 1000000, &n)) return EXIT_USAGE;
    } else {
      return cli_usage_error("rpc", "unknown option '%s'", argv[i]);
    }
  }
  if (tracker && !key)
    return cli_usage_error("rpc", "--tracker needs --key (the device key)");
  char *token = NULL;
  if (cli_read_token(token_file, &token)) return EXIT_FAIL;
  signal(SIGPIPE, SIG_IGN);
  ts_error err;
  ts_error_clear(&err);
  int code = EXIT_FAIL;
  ts_runner *embedded = NULL, *remote = NULL;
  ts_worker *worker = NULL;
  ts_tracker *trk = NULL;
  ts_artifact *kernel = NULL;
  char tracker_addr[64];
  ts_device_options dev = ts_device_defaults();
  dev.threads = 1;
  /* Processes that fork measurement helpers start before any thread. */
  if (ts_runner_embedded_create(&dev, &embedded, &err)) {
    cli_error("cannot start the embedded pool", &err);
    goto done;
  }
  if (!tracker) {
    ts_worker_options wo = ts_worker_defaults();
    ts_tracker_options to = ts_tracker_defaults();
    wo.port = to.port = 0;
    wo.key = key = "bench";
    wo.token = to.token = token;
    wo.device = dev;
    wo.heartbeat_ms = 200;
    if (ts_tracker_start(&to, &trk, &err)) {
      cli_error("cannot start a local tracker", &err);
      goto done;
    }
    snprintf(tracker_addr, sizeof tracker_addr, "127.0.0.1:%d",
             ts_tracker_port(trk));
    wo.tracker = tracker = tracker_addr;
    if (ts_worker_start(&wo, &worker, &err)) {
      cli_error("cannot start a local worker", &err);
      goto done;
    }
    if (!wait_registered(worker, 10)) {
      fprintf(stderr, "tessera: error: the local worker did not register\n");
      goto done;
    }
  }
  ts_rpc_runner_options ro = ts_rpc_runner_defaults();
  ro.tracker = tracker;
  ro.key = key;
  ro.token = token;
  ro.name = "rpc-bench";
  if (ts_runner_rpc_create(&ro, &remote, &err)) {
    cli_error("bad tracker address", &err);
    goto done;
  }
  if (!(kernel = build_bench_kernel(&err))) {
    cli_error("cannot build the benchmark kernel", &err);
    goto done;
  }
  side sides[2];
  memset(sides, 0, sizeof sides);
  sides[0].runner = embedded;
  sides[1].runner = remote;
  if (run_bench(sides, kernel, (int)n, &err)) {
    cli_error("benchmark failed", &err);
    goto done;
  }
  side emb = sides[0], rem = sides[1];
  double emb_ps = n / emb.seconds, rem_ps = n / rem.seconds;
  double overhead = (rem.seconds - emb.seconds) * 1000 / (double)n;
  if (json) {
    printf(
        "{\"n\": %ld, \"remote_per_s\": %.2f, \"embedded_per_s\": %.2f, "
        "\"overhead_ms\": %.3f, \"remote_seconds\": %.3f, "
        "\"embedded_seconds\": %.3f, \"remote_ok\": %d, \"embedded_ok\": %d, "
        "\"tracker\": \"%s\", \"key\": \"%s\"}\n",
        n, rem_ps, emb_ps, overhead, rem.seconds, emb.seconds, rem.ok, emb.ok,
        tracker, key);
  } else {
    printf("rpc bench: %ld candidates of a 64-element add, one run each, "
           "checked against the reference\n",
           n);
    printf("  %-9s %8s %9s %14s %15s\n", "path", "ok", "seconds",
           "candidates/s", "ms/candidate");
    printf("  %-9s %8d %9.3f %14.1f %15.3f\n", "embedded", emb.ok, emb.seconds,
           emb_ps, emb.seconds * 1000 / (double)n);
    printf("  %-9s %8d %9.3f %14.1f %15.3f   (tracker %s, key %s%s)\n",
           "remote", rem.ok, rem.seconds, rem_ps,
           rem.seconds * 1000 / (double)n, tracker, key,
           worker ? ", one worker in this process" : "");
    printf("  overhead of the remote path: %.3f ms per candidate (target < 2 "
           "ms)\n",
           overhead);
  }
  if (emb.ok != n || rem.ok != n) {
    fprintf(stderr,
            "tessera: error: not every candidate was measured ok "
            "(embedded %d, remote %d of %ld)%s%s%s%s\n",
            emb.ok, rem.ok, n, emb.first_error[0] ? "; embedded: " : "",
            emb.first_error, rem.first_error[0] ? "; remote: " : "",
            rem.first_error);
    goto done;
  }
  code = EXIT_OK;
done:
  ts_runner_destroy(remote);
  ts_runner_destroy(embedded);
  ts_worker_stop(worker);
  ts_tracker_stop(trk);
  ts_artifact_release(kernel);
  free(token);
  return code;
}

int cmd_rpc(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    fputs(rpc_usage, argc < 2 ? stderr : stdout);
    return argc < 2 ? EXIT_USAGE : EXIT_OK;
  }
  if (!strcmp(argv[1], "bench")) return bench(argc - 1, argv + 1);
  return cli_usage_error("rpc", "unknown subcommand '%s' (expected bench)",
                         argv[1]);
}
