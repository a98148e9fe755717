/*
 * cmd_worker.c — `tessera worker`: runs a measurement worker (HTTP,
 * protocol v1) for one device until SIGINT or SIGTERM, optionally
 * registered with a tracker. Also holds the option helpers the rpc
 * commands share (integer options, token files).
 */
#include "cli.h"

#include "rpc/rpc.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char worker_usage[] =
    "usage: tessera worker [--port P] [--bind ADDR] [--key KEY]\n"
    "                      [--device cpu|cuda:N] [--tracker HOST:PORT]\n"
    "                      [--token-file F] [--advertise HOST:PORT]\n"
    "                      [--threads N] [--memory-limit-mb N]\n"
    "                      [--max-connections N] [--max-per-client N]\n"
    "                      [--request-deadline-ms MS] [--no-seccomp]\n"
    "\n"
    "Serves measurement requests (protocol v1, see docs/rpc.md) for one\n"
    "device until interrupted. Each candidate runs in its own process with a\n"
    "time limit and resource limits; candidates run one at a time.\n"
    "\n"
    "  --port P            port to listen on (default 9191; 0: any free port)\n"
    "  --bind ADDR         address to listen on (default 127.0.0.1); a\n"
    "                      non-loopback address requires --token-file\n"
    "  --key KEY           device key runners ask for (default from the\n"
    "                      device: cpu-<cpu name>, cuda-sm_XX)\n"
    "  --device D          cpu (default) or cuda:N\n"
    "  --tracker H:P       register with this tracker and send heartbeats\n"
    "  --token-file F      bearer token required on every request (and sent\n"
    "                      to the tracker)\n"
    "  --advertise H:P     the address the tracker hands to runners\n"
    "  --threads N         threads of a CPU kernel (default: all cores)\n"
    "  --memory-limit-mb N address space a candidate may add (default 8192)\n"
    "  --max-connections N connections at once (default 64); beyond: 503\n"
    "  --max-per-client N  connections from one client address (default 8)\n"
    "  --request-deadline-ms MS\n"
    "                      time to receive a request's headers and body\n"
    "                      (default 30000)\n"
    "  --no-seccomp        no system-call filter in measuring children (to\n"
    "                      debug a kernel the sandbox stops; see "
    "docs/rpc.md)\n";

int cli_int_option(const char *sub, const char *name, const char *value,
                   long lo, long hi, long *out) {
  char *end = NULL;
  errno = 0;
  long v = strtol(value, &end, 10);
  if (!*value || *end || errno || v < lo || v > hi) {
    cli_usage_error(sub, "%s: '%s' is not an integer in [%ld, %ld]", name,
                    value, lo, hi);
    return EXIT_USAGE;
  }
  *out = v;
  return EXIT_OK;
}

int cli_read_token(const char *path, char **token) {
  *token = NULL;
  if (!path) return EXIT_OK;
  ts_error err;
  ts_error_clear(&err);
  if (ts_rpc_read_token_file(path, token, &err) != TS_OK) {
    cli_error("bad --token-file", &err);
    return EXIT_FAIL;
  }
  return EXIT_OK;
}

void cli_block_stop_signals(sigset_t *set) {
  sigemptyset(set);
  sigaddset(set, SIGINT);
  sigaddset(set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, set, NULL);
  signal(SIGPIPE, SIG_IGN);
}

int cmd_worker(int argc, char **argv) {
  ts_worker_options o = ts_worker_defaults();
  const char *token_file = NULL;
  long v;
  for (int i = 1; i < argc; i++) {
    const char *val = NULL;
    bool missing = false;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(worker_usage, stdout);
      return EXIT_OK;
    } else if (cli_opt_value(argc, argv, &i, "--port", &val, &missing)) {
      if (missing) return cli_usage_error("worker", "--port needs a value");
      if (cli_int_option("worker", "--port", val, 0, 65535, &v))
        return EXIT_USAGE;
      o.port = (int)v;
    } else if (cli_opt_value(argc, argv, &i, "--bind", &val, &missing)) {
      if (missing) return cli_usage_error("worker", "--bind needs a value");
      o.bind = val;
    } else if (cli_opt_value(argc, argv, &i, "--key", &val, &missing)) {
      if (missing) return cli_usage_error("worker", "--key needs a value");
      o.key = val;
    } else if (cli_opt_value(argc, argv, &i, "--device", &val, &missing)) {
      if (missing) return cli_usage_error("worker", "--device needs a value");
      o.device.device = val;
    } else if (cli_opt_value(argc, argv, &i, "--tracker", &val, &missing)) {
      if (missing) return cli_usage_error("worker", "--tracker needs a value");
      o.tracker = val;
    } else if (cli_opt_value(argc, argv, &i, "--token-file", &val, &missing)) {
      if (missing)
        return cli_usage_error("worker", "--token-file needs a value");
      token_file = val;
    } else if (cli_opt_value(argc, argv, &i, "--advertise", &val, &missing)) {
      if (missing)
        return cli_usage_error("worker", "--advertise needs a value");
      o.advertise = val;
    } else if (cli_opt_value(argc, argv, &i, "--threads", &val, &missing)) {
      if (missing) return cli_usage_error("worker", "--threads needs a value");
      if (cli_int_option("worker", "--threads", val, 0, TS_RT_MAX_THREADS, &v))
        return EXIT_USAGE;
      o.device.threads = (int)v;
    } else if (cli_opt_value(argc, argv, &i, "--memory-limit-mb", &val,
                             &missing)) {
      if (missing)
        return cli_usage_error("worker", "--memory-limit-mb needs a value");
      if (cli_int_option("worker", "--memory-limit-mb", val, 64, 1 << 24, &v))
        return EXIT_USAGE;
      o.device.memory_limit_bytes = (int64_t)v << 20;
    } else if (cli_opt_value(argc, argv, &i, "--max-connections", &val,
                             &missing)) {
      if (missing)
        return cli_usage_error("worker", "--max-connections needs a value");
      if (cli_int_option("worker", "--max-connections", val, 1, 65536, &v))
        return EXIT_USAGE;
      o.limits.max_connections = (int)v;
    } else if (cli_opt_value(argc, argv, &i, "--max-per-client", &val,
                             &missing)) {
      if (missing)
        return cli_usage_error("worker", "--max-per-client needs a value");
      if (cli_int_option("worker", "--max-per-client", val, 1, 65536, &v))
        return EXIT_USAGE;
      o.limits.max_connections_per_client = (int)v;
    } else if (cli_opt_value(argc, argv, &i, "--request-deadline-ms", &val,
                             &missing)) {
      if (missing)
        return cli_usage_error("worker", "--request-deadline-ms needs a value");
      if (cli_int_option("worker", "--request-deadline-ms", val, 100, 3600000,
                         &v))
        return EXIT_USAGE;
      o.limits.request_deadline_ms = (int)v;
    } else if (!strcmp(argv[i], "--no-seccomp")) {
      o.device.seccomp = false;
    } else {
      return cli_usage_error("worker", "unknown option '%s'", argv[i]);
    }
  }
  char *token = NULL;
  if (cli_read_token(token_file, &token)) return EXIT_FAIL;
  o.token = token;
  sigset_t stop;
  cli_block_stop_signals(&stop);
  ts_error err;
  ts_error_clear(&err);
  ts_worker *w = NULL;
  if (ts_worker_start(&o, &w, &err) != TS_OK) {
    cli_error("cannot start the worker", &err);
    free(token);
    return EXIT_FAIL;
  }
  printf("tessera worker: key %s, device %s, listening on %s:%d%s%s\n",
         ts_worker_key(w), o.device.device, o.bind, ts_worker_port(w),
         o.tracker ? ", tracker " : "", o.tracker ? o.tracker : "");
  printf("%s\n", ts_worker_info_json(w)); /* the /v1/info document */
  fflush(stdout);
  int sig = 0;
  sigwait(&stop, &sig);
  printf("tessera worker: stopping (%s), %lld candidates measured\n",
         sig == SIGINT ? "SIGINT" : "SIGTERM",
         (long long)ts_worker_measurements(w));
  ts_worker_stop(w);
  free(token);
  return EXIT_OK;
}
