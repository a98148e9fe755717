/*
 * cmd_show.c — `tessera show`: prints a workload for people investigating
 * it: the TIR text with its structural hash and FLOP count as leading
 * comments (so the output is itself valid TIR), or the operator list.
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char show_usage[] =
    "usage: tessera show (--workload SPEC | --tir FILE) | --ops\n"
    "\n"
    "  --workload SPEC  build an operator from a spec, e.g.\n"
    "                   \"conv2d_nhwc N=1 H=56 W=56 CI=64 CO=64 KH=3 KW=3 pad=1\"\n"
    "  --tir FILE       read a function in the TIR text form (docs/ir.md)\n"
    "  --ops            list the operators and their keys\n"
    "\n"
    "Prints the TIR text, preceded by comment lines with the canonical spec,\n"
    "the structural hash (the workload's identity) and the FLOP count.\n";

static void print_ops(void) {
  const char *const *names = ts_op_names();
  printf("operators (spec: NAME key=value ...; [key=default]):\n");
  for (int i = 0; names[i]; i++) printf("  %s\n", ts_op_usage(names[i]));
}

int cmd_show(int argc, char **argv) {
  const char *spec = NULL, *tir = NULL;
  bool ops = false;
  for (int i = 1; i < argc; i++) {
    const char *v;
    bool missing;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(show_usage, stdout);
      return EXIT_OK;
    } else if (!strcmp(argv[i], "--ops")) {
      ops = true;
    } else if (cli_opt_value(argc, argv, &i, "--workload", &v, &missing)) {
      if (missing) return cli_usage_error("show", "--workload needs a spec");
      spec = v;
    } else if (cli_opt_value(argc, argv, &i, "--tir", &v, &missing)) {
      if (missing) return cli_usage_error("show", "--tir needs a file");
      tir = v;
    } else {
      return cli_usage_error("show", "unknown option '%s'", argv[i]);
    }
  }
  if (ops) {
    print_ops();
    return EXIT_OK;
  }
  if (!spec == !tir)
    return cli_usage_error("show", "give exactly one of --workload or --tir");

  ts_workload *w;
  ts_func *f;
  int rc = cli_load_func(spec, tir, &w, &f);
  if (rc != EXIT_OK) return rc;
  char hex[33];
  ts_hash128_hex(ts_func_hash(f), hex);
  if (w) {
    printf("# workload: %s\n", w->spec);
    printf("# name: %s\n", w->name);
  }
  printf("# hash: %s\n", hex);
  printf("# flops: %.0f\n", w ? w->flops : ts_func_flops(f));
  char *text = ts_func_print(f);
  fputs(text, stdout);
  free(text);
  if (w) ts_workload_free(w);
  else ts_func_free(f);
  return EXIT_OK;
}
