/*
 * cmd_show.c — `tessera show`: prints a workload for people investigating
 * it: the TIR text with its structural hash and FLOP count as leading
 * comments (so the output is itself valid TIR), or the operator list.
 */
#include "cli.h"

#include "codegen/codegen.h"
#include "schedule/schedule.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char show_usage[] =
    "usage: tessera show (--workload SPEC | --tir FILE) [--target T]\n"
    "                    [--lowered | --llvm | --asm]\n"
    "       tessera show --trace FILE [--workload SPEC | --tir FILE]\n"
    "       tessera show --ops\n"
    "\n"
    "  --workload SPEC  build an operator from a spec, e.g.\n"
    "                   \"conv2d_nhwc N=1 H=56 W=56 CI=64 CO=64 KH=3 KW=3 "
    "pad=1\"\n"
    "  --tir FILE       read a function in the TIR text form (docs/ir.md)\n"
    "  --ops            list the operators and their keys\n"
    "  --trace FILE     print a schedule trace (JSON) as a readable script; "
    "with\n"
    "                   a workload, apply it and print the scheduled TIR (or,\n"
    "                   with --lowered/--llvm/--asm, its code)\n"
    "  --target T       target for --lowered/--llvm/--asm (default: this "
    "machine),\n"
    "                   e.g. \"llvm -mcpu=native\" or \"cuda -arch=sm_90\"\n"
    "  --lowered        print the lowered loop program instead of the TIR\n"
    "  --llvm           print the optimized LLVM IR\n"
    "  --asm            print the assembly (PTX for a cuda target)\n"
    "\n"
    "Prints the TIR text, preceded by comment lines with the canonical spec,\n"
    "the structural hash (the workload's identity) and the FLOP count.\n";

/* Prints the lowered program, LLVM IR or assembly of f for target_str. */
static int show_compiled(const ts_func *f, const char *target_str,
                         const char *what) {
  ts_error err;
  ts_error_clear(&err);
  ts_target *t = NULL;
  int rc = target_str ? ts_target_parse(target_str, &t, &err)
                      : ts_target_host(&t, &err);
  if (rc) {
    cli_error("bad target", &err);
    return EXIT_FAIL;
  }
  ts_build_options o = ts_build_defaults();
  o.keep_lowered = !strcmp(what, "lowered");
  o.keep_llvm_ir = !strcmp(what, "llvm");
  o.keep_asm = !strcmp(what, "asm");
  ts_build_result r;
  if (ts_build(f, t, &o, &r, &err)) {
    cli_error("code generation failed", &err);
    ts_target_free(t);
    return EXIT_FAIL;
  }
  printf("# target: %s\n", ts_target_str(t));
  if (o.keep_lowered) {
    char *text = ts_func_print(r.lowered);
    fputs(text, stdout);
    free(text);
  } else if (o.keep_llvm_ir) {
    fputs(r.llvm_ir, stdout);
  } else if (r.artifact->kind == TS_ARTIFACT_PTX) {
    fwrite(r.artifact->bytes, 1, r.artifact->n_bytes, stdout);
  } else {
    fputs(r.assembly, stdout);
  }
  ts_build_result_clear(&r);
  ts_target_free(t);
  return EXIT_OK;
}

static void print_ops(void) {
  const char *const *names = ts_op_names();
  printf("operators (spec: NAME key=value ...; [key=default]):\n");
  for (int i = 0; names[i]; i++) printf("  %s\n", ts_op_usage(names[i]));
}

int cmd_show(int argc, char **argv) {
  const char *spec = NULL, *tir = NULL, *target = NULL, *what = NULL;
  const char *trace_path = NULL;
  bool ops = false;
  for (int i = 1; i < argc; i++) {
    const char *v;
    bool missing;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(show_usage, stdout);
      return EXIT_OK;
    } else if (!strcmp(argv[i], "--ops")) {
      ops = true;
    } else if (!strcmp(argv[i], "--lowered") || !strcmp(argv[i], "--llvm") ||
               !strcmp(argv[i], "--asm")) {
      if (what && strcmp(what, argv[i] + 2))
        return cli_usage_error("show", "give one of --lowered, --llvm, --asm");
      what = argv[i] + 2;
    } else if (cli_opt_value(argc, argv, &i, "--trace", &v, &missing)) {
      if (missing) return cli_usage_error("show", "--trace needs a file");
      trace_path = v;
    } else if (cli_opt_value(argc, argv, &i, "--target", &v, &missing)) {
      if (missing) return cli_usage_error("show", "--target needs a target");
      target = v;
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
  ts_trace *trace = NULL;
  if (trace_path) {
    ts_error terr;
    ts_error_clear(&terr);
    if (ts_trace_from_json_file(trace_path, &trace, &terr)) {
      cli_error("cannot read the trace", &terr);
      return EXIT_FAIL;
    }
    if (!spec && !tir) {
      char *script = ts_trace_print(trace);
      fputs(script, stdout);
      free(script);
      ts_trace_free(trace);
      return EXIT_OK;
    }
  }
  if (!spec == !tir) {
    ts_trace_free(trace);
    return cli_usage_error("show", "give exactly one of --workload or --tir");
  }

  ts_workload *w;
  ts_func *f;
  int rc = cli_load_func(spec, tir, &w, &f);
  if (rc != EXIT_OK) {
    ts_trace_free(trace);
    return rc;
  }
  if (trace) {
    /* Replace the function by its scheduled form. */
    ts_error terr;
    ts_error_clear(&terr);
    ts_sched *sch = NULL;
    rc = ts_trace_apply(trace, f, 1, &sch, &terr);
    ts_trace_free(trace);
    ts_func *scheduled = rc ? NULL : ts_func_copy(ts_sched_func(sch));
    ts_sched_destroy(sch);
    if (w) {
      ts_workload_free(w);
      w = NULL;
    } else {
      ts_func_free(f);
    }
    if (rc) {
      cli_error("cannot apply the trace", &terr);
      return EXIT_FAIL;
    }
    f = scheduled;
  }
  if (what) {
    rc = show_compiled(f, target, what);
    if (w)
      ts_workload_free(w);
    else
      ts_func_free(f);
    return rc;
  }
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
  if (w)
    ts_workload_free(w);
  else
    ts_func_free(f);
  return EXIT_OK;
}
