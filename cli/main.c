/*
 * main.c — the `tessera` command: global options and dispatch to the
 * subcommands, plus the helpers they share.
 */
#include "cli.h"

#include <cjson/cJSON.h>

#include "runtime/runtime.h"

#include <stdarg.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage[] =
    "usage: tessera [--help] [--version] <command> [options]\n"
    "\n"
    "tessera is an auto-tuning tensor program generator: it builds a tensor\n"
    "operator as a loop-nest program, searches schedules for it, measures\n"
    "candidates on CPU and GPU workers and keeps the best in a database.\n"
    "\n"
    "commands:\n"
    "  show     print a workload's TIR, structural hash and FLOP count\n"
    "  check    run a workload through the reference interpreter and check it\n"
    "  bench    measure a workload's kernel next to OpenBLAS and oneDNN\n"
    "  probe    measure this machine's peak FLOP/s and memory bandwidth\n"
    "  worker   serve measurement requests for a device (HTTP)\n"
    "  tracker  run the worker registry and lease service; `tracker status`\n"
    "  rpc      `rpc bench`: remote versus embedded measurement throughput\n"
    "  db       inspect, export, import and prune the tuning database\n"
    "  costmodel  cost-model features, data collection and evaluation\n"
    "  tune     tune workloads' schedules (resumable jobs) into the database\n"
    "  report   an HTML report of a tuning database: charts, best traces\n"
    "  graph    import an ONNX model, run the graph passes, show or run it\n"
    "  compile  compile an ONNX model into a shared library (model.so)\n"
    "  run      run a compiled model on the arrays of an .npz file\n"
    "  quantize `quantize profile`: tensor ranges of a model on calibration\n"
    "           inputs, for int8 quantization\n"
    "\n"
    "workloads are given as a spec, e.g.\n"
    "  --workload \"matmul M=1024 N=1024 K=1024 dtype=float32\"\n"
    "or as a TIR text file (--tir FILE). `tessera show --ops` lists the\n"
    "operators and their keys. `tessera <command> --help` for its options.\n";

typedef struct command {
  const char *name;
  int (*run)(int argc, char **argv);
} command;

static const command commands[] = {
    {"show", cmd_show},
    {"check", cmd_check},
    {"bench", cmd_bench},
    {"probe", cmd_probe},
    {"worker", cmd_worker},
    {"tracker", cmd_tracker},
    {"rpc", cmd_rpc},
    {"db", cmd_db},
    {"costmodel", cmd_costmodel},
    {"tune", cmd_tune},
    {"report", cmd_report},
    {"graph", cmd_graph},
    {"compile", cmd_compile},
    {"quantize", cmd_quantize},
    {"run", cmd_run},
};

void cli_error(const char *what, const ts_error *err) {
  if (err && err->msg[0])
    fprintf(stderr, "tessera: error: %s: %s\n", what, err->msg);
  else
    fprintf(stderr, "tessera: error: %s\n", what);
}

int cli_target_for_threads(const char *sub, const char *target, int threads,
                           char **out) {
  ts_error err;
  ts_target *t = NULL;
  *out = NULL;
  if (ts_target_parse(target ? target : "llvm", &t, &err)) {
    cli_error("bad target", &err);
    return EXIT_FAIL;
  }
  const char *str = ts_target_str(t);
  const char *at = strstr(str, " -num-cores=");
  int have = ts_target_num_cores(t), rc = EXIT_OK;
  size_t len = at ? (size_t)(at - str) : strlen(str);
  /* a target without -num-cores (a GPU) is taken as given too */
  if (threads <= 0 || have == threads || !at)
    *out = strdup(target ? target : "llvm"); /* as given */
  else if (target && strstr(target, "-num-cores"))
    rc = cli_usage_error(sub,
                         "--threads %d but the target measures on %d "
                         "thread%s: '%s' (records of one thread count are "
                         "not measured on another)",
                         threads, have, have == 1 ? "" : "s", target);
  else if ((*out = malloc(len + 32)))
    snprintf(*out, len + 32, "%.*s -num-cores=%d", (int)len, str, threads);
  ts_target_free(t);
  if (rc == EXIT_OK && !*out) {
    fprintf(stderr, "tessera: error: out of memory\n");
    rc = EXIT_FAIL;
  }
  return rc;
}

int cli_output_path(const char *sub, const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0 || S_ISREG(st.st_mode)) return EXIT_OK;
  return cli_usage_error(sub,
                         "output '%s' is not a regular file: the output is "
                         "written whole under a temporary name and renamed "
                         "onto it (use a file path; `-` where stdout is "
                         "accepted)",
                         path);
}

int cli_usage_error(const char *sub, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "tessera %s: ", sub);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n(see `tessera %s --help`)\n", sub);
  va_end(ap);
  return EXIT_USAGE;
}

bool cli_opt_value(int argc, char **argv, int *i, const char *name,
                   const char **value, bool *missing) {
  const char *arg = argv[*i];
  size_t n = strlen(name);
  if (strncmp(arg, name, n) != 0) return false;
  *missing = false;
  if (arg[n] == '=') {
    *value = arg + n + 1;
    return true;
  }
  if (arg[n] != 0) return false;
  /* the next word is the value, unless it is an option itself (`--db -o
   * r.html`: the path is missing; a negative number is a value; --opt=-x
   * passes a value that starts with a letter after '-') */
  const char *next = *i + 1 < argc ? argv[*i + 1] : NULL;
  if (!next || (next[0] == '-' &&
                ((next[1] >= 'a' && next[1] <= 'z') ||
                 (next[1] >= 'A' && next[1] <= 'Z') || next[1] == '-'))) {
    *missing = true;
    return true;
  }
  *value = argv[++*i];
  return true;
}

void cli_sub_help(const char *usage, const char *parent, const char *sub,
                  const char *synopsis) {
  const char *list = strstr(usage, "commands:\n");
  const char *tail = list ? strstr(list, "\n\n") : NULL;
  size_t n = strlen(sub);
  bool found = false;
  for (const char *p = list; p && tail && p < tail;) {
    p = strchr(p, '\n');
    if (!p || ++p >= tail) break;
    if (strncmp(p, "  ", 2) || strncmp(p + 2, sub, n) ||
        (p[2 + n] != ' ' && p[2 + n] != '\n'))
      continue;
    if (!found) printf("usage: tessera %s %s %s\n\n", parent, sub, synopsis);
    found = true;
    const char *end = p;
    do { /* the entry: its line, then lines indented deeper than 2 */
      end = strchr(end, '\n') + 1;
    } while (end < tail && !strncmp(end, "   ", 3));
    fwrite(p, 1, (size_t)(end - p), stdout);
    p = end - 1;
  }
  if (!found)
    fputs(usage, stdout);
  else
    fputs(tail + 1, stdout);
}

void cli_print_json(cJSON *v) {
  char *txt = cJSON_Print(v);
  if (txt)
    puts(txt);
  else
    fputs("tessera: error: out of memory printing JSON\n", stderr);
  cJSON_free(txt);
  cJSON_Delete(v);
}

void cli_json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\')
      fprintf(f, "\\%c", *s);
    else if ((unsigned char)*s < 0x20)
      fprintf(f, "\\u%04x", *s);
    else
      fputc(*s, f);
  }
  fputc('"', f);
}

int cli_load_func(const char *spec, const char *tir_path,
                  ts_workload **workload, ts_func **func) {
  ts_error err;
  ts_error_clear(&err);
  *workload = NULL;
  *func = NULL;
  if (spec) {
    if (ts_workload_from_spec(spec, workload, &err) != TS_OK) {
      cli_error("bad workload spec", &err);
      return EXIT_FAIL;
    }
    *func = (*workload)->func;
    return EXIT_OK;
  }
  if (ts_func_parse_file(tir_path, func, &err) != TS_OK) {
    cli_error("cannot read TIR", &err);
    return EXIT_FAIL;
  }
  return EXIT_OK;
}

const char *cli_workload_key(const char *key, char hex[33]) {
  if (!key || !strpbrk(key, " =")) return key;
  ts_workload *w = NULL;
  ts_error err;
  ts_error_clear(&err);
  if (ts_workload_from_spec(key, &w, &err) != TS_OK) return key;
  ts_hash128_hex(ts_func_hash(w->func), hex);
  ts_workload_free(w);
  return hex;
}

/* OpenBLAS chooses its kernels when it is loaded, before main runs; release
 * 0.3.21 does not know recent Xeons and falls back to its SSE3 kernels,
 * which would make every OpenBLAS baseline a straw man. Commands that
 * measure baselines re-execute themselves once with OPENBLAS_CORETYPE set
 * to the AVX-512 kernels when the CPU has them and the user did not choose. */
static void openblas_coretype_reexec(char **argv) {
  if (getenv("OPENBLAS_CORETYPE") || getenv("TESSERA_NO_REEXEC")) return;
  if (ts_rt_cpu_has("avx512f") != 1 || ts_rt_cpu_has("avx512bw") != 1) return;
  setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
  setenv("TESSERA_NO_REEXEC", "1", 1);
  execv("/proc/self/exe", argv);
  /* exec failed: carry on with whatever OpenBLAS picked */
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs(usage, stderr);
    return EXIT_USAGE;
  }
  const char *sub = argv[1];
  if (!strcmp(sub, "--help") || !strcmp(sub, "-h") || !strcmp(sub, "help")) {
    fputs(usage, stdout);
    return EXIT_OK;
  }
  if (!strcmp(sub, "--version") || !strcmp(sub, "version")) {
    printf("tessera %s\n", TS_VERSION);
    return EXIT_OK;
  }
  if (!strcmp(sub, "bench") || !strcmp(sub, "tune"))
    openblas_coretype_reexec(argv);
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (!strcmp(sub, commands[i].name))
      return commands[i].run(argc - 1, argv + 1);
  fprintf(stderr, "tessera: unknown command '%s'\n\n%s", sub, usage);
  return EXIT_USAGE;
}
