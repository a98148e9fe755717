/*
 * cmd_tracker.c — `tessera tracker`: runs the tracker (worker registry and
 * leases) until SIGINT or SIGTERM; `tessera tracker status` prints a
 * tracker's workers as a table (or its status JSON).
 */
#include "cli.h"

#include "rpc/rpc.h"

#include <cJSON.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char tracker_usage[] =
    "usage: tessera tracker [--port P] [--bind ADDR] [--token-file F]\n"
    "                       [--heartbeat-timeout-ms N] [--lease-ttl-ms N]\n"
    "       tessera tracker status --tracker HOST:PORT [--token-file F] "
    "[--json]\n"
    "\n"
    "Runs the tracker: workers register with it by device key and send\n"
    "heartbeats; runners lease workers of a key, shared fairly between\n"
    "concurrent jobs (priority, then arrival). `status` shows the workers:\n"
    "key, address, device, state, the runner holding it, measurements done\n"
    "and when it was last heard from.\n"
    "\n"
    "  --port P                 port to listen on (default 9190; 0: any)\n"
    "  --bind ADDR              address to listen on (default 127.0.0.1); a\n"
    "                           non-loopback address requires --token-file\n"
    "  --token-file F           bearer token required on every request\n"
    "  --heartbeat-timeout-ms N evict workers silent this long (5000)\n"
    "  --lease-ttl-ms N         expire leases not renewed this long (15000)\n";

enum { NCOL = 7 };

/* One table row: columns padded to their width (the count right-aligned),
 * the last one not padded. */
static void print_row(const char *const cols[NCOL], const int width[NCOL]) {
  for (int c = 0; c + 1 < NCOL; c++)
    printf(c == 5 ? "%*s  " : "%-*s  ", width[c], cols[c]);
  printf("%s\n", cols[NCOL - 1]);
}

/* The status JSON as a table. */
static int print_status(const char *json) {
  cJSON *s = cJSON_Parse(json);
  cJSON *ws = s ? cJSON_GetObjectItemCaseSensitive(s, "workers") : NULL;
  if (!cJSON_IsArray(ws)) {
    fprintf(stderr, "tessera: error: malformed status reply\n");
    cJSON_Delete(s);
    return EXIT_FAIL;
  }
  static const char *const head[] = {"KEY",       "WORKER",    "DEVICE",
                                     "STATE",     "LEASED BY", "MEASURED",
                                     "LAST HEARD"};
  int n = cJSON_GetArraySize(ws);
  char(*cell)[NCOL][160] = calloc((size_t)n + 1, sizeof *cell);
  if (!cell) {
    cJSON_Delete(s);
    return EXIT_FAIL;
  }
  int width[NCOL];
  for (int c = 0; c < NCOL; c++) width[c] = (int)strlen(head[c]);
  for (int r = 0; r < n; r++) {
    const cJSON *w = cJSON_GetArrayItem(ws, r);
    const char *fields[] = {"key", "address", "device", "state", "leased_by"};
    for (int c = 0; c < 5; c++) {
      const cJSON *v = cJSON_GetObjectItemCaseSensitive(w, fields[c]);
      snprintf(cell[r][c], sizeof cell[r][c], "%s",
               cJSON_IsString(v) ? v->valuestring : "-");
    }
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(w, "measurements");
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(w, "last_heard_ms");
    snprintf(cell[r][5], sizeof cell[r][5], "%.0f",
             cJSON_IsNumber(m) ? m->valuedouble : 0);
    snprintf(cell[r][6], sizeof cell[r][6], "%.1f s ago",
             cJSON_IsNumber(h) ? h->valuedouble / 1000 : 0);
    for (int c = 0; c < NCOL; c++) {
      int len = (int)strlen(cell[r][c]);
      if (len > width[c]) width[c] = len;
    }
  }
  print_row(head, width);
  for (int r = 0; r < n; r++) {
    const char *row[NCOL];
    for (int c = 0; c < NCOL; c++) row[c] = cell[r][c];
    print_row(row, width);
  }
  const cJSON *ls = cJSON_GetObjectItemCaseSensitive(s, "leases");
  printf("%d worker%s, %d lease%s\n", n, n == 1 ? "" : "s",
         cJSON_GetArraySize(ls), cJSON_GetArraySize(ls) == 1 ? "" : "s");
  const cJSON *l;
  cJSON_ArrayForEach(l, ls) {
    const cJSON *runner = cJSON_GetObjectItemCaseSensitive(l, "runner");
    const cJSON *key = cJSON_GetObjectItemCaseSensitive(l, "key");
    const cJSON *got = cJSON_GetObjectItemCaseSensitive(l, "workers");
    const cJSON *want = cJSON_GetObjectItemCaseSensitive(l, "want");
    const cJSON *prio = cJSON_GetObjectItemCaseSensitive(l, "priority");
    printf("  lease %s: key %s, %.0f of %.0f workers, priority %.0f\n",
           cJSON_IsString(runner) ? runner->valuestring : "?",
           cJSON_IsString(key) ? key->valuestring : "?",
           cJSON_IsNumber(got) ? got->valuedouble : 0,
           cJSON_IsNumber(want) ? want->valuedouble : 0,
           cJSON_IsNumber(prio) ? prio->valuedouble : 0);
  }
  free(cell);
  cJSON_Delete(s);
  return EXIT_OK;
}

static int tracker_status(int argc, char **argv) {
  const char *tracker = NULL, *token_file = NULL;
  bool json = false;
  for (int i = 1; i < argc; i++) {
    const char *val = NULL;
    bool missing = false;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(tracker_usage, stdout);
      return EXIT_OK;
    } else if (!strcmp(argv[i], "--json")) {
      json = true;
    } else if (cli_opt_value(argc, argv, &i, "--tracker", &val, &missing)) {
      if (missing) return cli_usage_error("tracker", "--tracker needs a value");
      tracker = val;
    } else if (cli_opt_value(argc, argv, &i, "--token-file", &val, &missing)) {
      if (missing)
        return cli_usage_error("tracker", "--token-file needs a value");
      token_file = val;
    } else {
      return cli_usage_error("tracker", "unknown option '%s'", argv[i]);
    }
  }
  if (!tracker)
    return cli_usage_error("tracker", "status needs --tracker HOST:PORT");
  char *token = NULL;
  if (cli_read_token(token_file, &token)) return EXIT_FAIL;
  ts_error err;
  ts_error_clear(&err);
  char *text = NULL;
  int rc = ts_rpc_get_json(tracker, "/v1/status", token, 10000, &text, &err);
  free(token);
  if (rc != TS_OK) {
    cli_error("cannot get the tracker's status", &err);
    return EXIT_FAIL;
  }
  int code = EXIT_OK;
  if (json)
    printf("%s\n", text);
  else
    code = print_status(text);
  free(text);
  return code;
}

int cmd_tracker(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "status"))
    return tracker_status(argc - 1, argv + 1);
  ts_tracker_options o = ts_tracker_defaults();
  const char *token_file = NULL;
  long v;
  for (int i = 1; i < argc; i++) {
    const char *val = NULL;
    bool missing = false;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(tracker_usage, stdout);
      return EXIT_OK;
    } else if (cli_opt_value(argc, argv, &i, "--port", &val, &missing)) {
      if (missing) return cli_usage_error("tracker", "--port needs a value");
      if (cli_int_option("tracker", "--port", val, 0, 65535, &v))
        return EXIT_USAGE;
      o.port = (int)v;
    } else if (cli_opt_value(argc, argv, &i, "--bind", &val, &missing)) {
      if (missing) return cli_usage_error("tracker", "--bind needs a value");
      o.bind = val;
    } else if (cli_opt_value(argc, argv, &i, "--token-file", &val, &missing)) {
      if (missing)
        return cli_usage_error("tracker", "--token-file needs a value");
      token_file = val;
    } else if (cli_opt_value(argc, argv, &i, "--heartbeat-timeout-ms", &val,
                             &missing)) {
      if (missing)
        return cli_usage_error("tracker",
                               "--heartbeat-timeout-ms needs a value");
      if (cli_int_option("tracker", "--heartbeat-timeout-ms", val, 100, 3600000,
                         &v))
        return EXIT_USAGE;
      o.heartbeat_timeout_ms = (int)v;
    } else if (cli_opt_value(argc, argv, &i, "--lease-ttl-ms", &val,
                             &missing)) {
      if (missing)
        return cli_usage_error("tracker", "--lease-ttl-ms needs a value");
      if (cli_int_option("tracker", "--lease-ttl-ms", val, 100, 3600000, &v))
        return EXIT_USAGE;
      o.lease_ttl_ms = (int)v;
    } else {
      return cli_usage_error("tracker", "unknown option '%s'", argv[i]);
    }
  }
  char *token = NULL;
  if (cli_read_token(token_file, &token)) return EXIT_FAIL;
  o.token = token;
  sigset_t stop;
  cli_block_stop_signals(&stop);
  ts_error err;
  ts_error_clear(&err);
  ts_tracker *t = NULL;
  if (ts_tracker_start(&o, &t, &err) != TS_OK) {
    cli_error("cannot start the tracker", &err);
    free(token);
    return EXIT_FAIL;
  }
  printf("tessera tracker: listening on %s:%d\n", o.bind, ts_tracker_port(t));
  fflush(stdout);
  int sig = 0;
  sigwait(&stop, &sig);
  printf("tessera tracker: stopping (%s)\n",
         sig == SIGINT ? "SIGINT" : "SIGTERM");
  ts_tracker_stop(t);
  free(token);
  return EXIT_OK;
}
