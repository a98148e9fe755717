/*
 * cmd_report.c — `tessera report`: writes the tuning report of a database
 * (ts_bench_report_write) to an HTML file, or its numbers to a JSON file
 * (--json), through a temporary file renamed into place when complete, so
 * a failure never leaves a partial report.
 */
#include "cli.h"

#include "bench/bench.h"
#include "db/db.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char report_usage[] =
    "usage: tessera report [--db PATH] [-o FILE] [--workload W] [--title "
    "TEXT]\n"
    "                      [--points N] [--bins N] [--json]\n"
    "\n"
    "Writes one self-contained HTML page (inline SVG, no scripts, nothing\n"
    "fetched) about a tuning database: a summary of every workload x target\n"
    "(best latency, GFLOP/s, % of the probed peak and of the roofline, the\n"
    "best vendor level, records and failures by status), a roofline chart\n"
    "per target, then per workload x target the tuning curve, the latency\n"
    "histogram, the best trace, its lowered loops and the workload's TIR.\n"
    "\n"
    "  --db PATH      the database (default ./tessera.db)\n"
    "  -o FILE        the file to write (default report.html, with --json\n"
    "                 report.json; '-': stdout)\n"
    "  --workload W   only this workload: hash, hash prefix, name or spec\n"
    "  --title TEXT   the page title\n"
    "  --points N     measurements drawn as dots per curve before they are\n"
    "                 summarized as min-max bars (1000)\n"
    "  --bins N       bars per latency histogram (40)\n"
    "  --json         write the report's numbers as one JSON object instead\n"
    "                 of the page (docs/report.md gives its shape)\n";

/* A count option in [lo, hi]; prints the usage error otherwise. */
static bool count_value(const char *name, const char *v, long lo, long hi,
                        int *out) {
  char *end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (errno || end == v || *end || x < lo || x > hi) {
    cli_usage_error("report", "%s wants a number in [%ld, %ld], not '%s'", name,
                    lo, hi, v);
    return false;
  }
  *out = (int)x;
  return true;
}

int cmd_report(int argc, char **argv) {
  const char *db_path = "tessera.db", *output = NULL;
  ts_bench_report_options o = ts_bench_report_defaults();
  char workload_hex[33];
  for (int i = 1; i < argc; i++) {
    const char *v;
    bool missing;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(report_usage, stdout);
      return EXIT_OK;
    } else if (!strcmp(argv[i], "--json")) {
      o.json = true;
    } else if (cli_opt_value(argc, argv, &i, "--db", &v, &missing)) {
      if (missing) return cli_usage_error("report", "--db needs a path");
      db_path = v;
    } else if (cli_opt_value(argc, argv, &i, "-o", &v, &missing) ||
               cli_opt_value(argc, argv, &i, "--output", &v, &missing)) {
      if (missing) return cli_usage_error("report", "-o needs a file");
      output = v;
    } else if (cli_opt_value(argc, argv, &i, "--workload", &v, &missing)) {
      if (missing) return cli_usage_error("report", "--workload needs a key");
      o.workload = cli_workload_key(v, workload_hex);
    } else if (cli_opt_value(argc, argv, &i, "--title", &v, &missing)) {
      if (missing) return cli_usage_error("report", "--title needs a text");
      o.title = v;
    } else if (cli_opt_value(argc, argv, &i, "--points", &v, &missing)) {
      if (missing) return cli_usage_error("report", "--points needs a number");
      if (!count_value("--points", v, 10, 100000, &o.curve_points))
        return EXIT_USAGE;
    } else if (cli_opt_value(argc, argv, &i, "--bins", &v, &missing)) {
      if (missing) return cli_usage_error("report", "--bins needs a number");
      if (!count_value("--bins", v, 1, 1000, &o.histogram_bins))
        return EXIT_USAGE;
    } else {
      return cli_usage_error("report", "unknown option '%s'", argv[i]);
    }
  }

  if (!output) output = o.json ? "report.json" : "report.html";
  ts_error err;
  ts_error_clear(&err);
  ts_db_options dbo = ts_db_defaults();
  dbo.create = false;
  if (strcmp(output, "-") && cli_output_path("report", output) != EXIT_OK)
    return EXIT_USAGE;
  ts_db *db;
  if (ts_db_open(db_path, &dbo, &db, &err)) {
    cli_error("cannot open the database", &err);
    return EXIT_FAIL;
  }
  bool to_stdout = !strcmp(output, "-");
  char *part = NULL;
  FILE *out = stdout;
  if (!to_stdout) {
    size_t n = strlen(output) + 6;
    part = malloc(n);
    if (!part) {
      fputs("tessera: error: out of memory\n", stderr);
      ts_db_close(db);
      return EXIT_FAIL;
    }
    snprintf(part, n, "%s.part", output);
    if (!(out = fopen(part, "w"))) {
      fprintf(stderr, "tessera: error: cannot write %s: %s\n", part,
              strerror(errno));
      free(part);
      ts_db_close(db);
      return EXIT_FAIL;
    }
  }
  ts_bench_report_stats stats;
  int rc = ts_bench_report_write(db, &o, out, &stats, &err);
  ts_db_close(db);
  if (!to_stdout) {
    if (fclose(out) != 0 && rc == TS_OK)
      rc = TS_ERR(&err, TS_EIO, "%s: %s", part, strerror(errno));
    if (rc == TS_OK && rename(part, output) != 0)
      rc = TS_ERR(&err, TS_EIO, "cannot rename %s to %s: %s", part, output,
                  strerror(errno));
    if (rc != TS_OK) remove(part);
    free(part);
  }
  if (rc != TS_OK) {
    cli_error("cannot make the report", &err);
    return EXIT_FAIL;
  }
  fprintf(to_stdout ? stderr : stdout,
          "%s: %d workload%s, %d workload x target pair%s, %lld "
          "measurement%s, %.1f KiB\n",
          to_stdout ? "report" : output, stats.workloads,
          stats.workloads == 1 ? "" : "s", stats.tasks,
          stats.tasks == 1 ? "" : "s", (long long)stats.records,
          stats.records == 1 ? "" : "s", (double)stats.bytes / 1024);
  return EXIT_OK;
}
