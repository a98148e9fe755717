/*
 * cli.h — shared declarations of the `tessera` command's subcommands and
 * their small helpers (argument parsing, error printing). Private to cli/.
 */
#ifndef TESSERA_CLI_H
#define TESSERA_CLI_H

#include "codegen/codegen.h"
#include "graph/graph.h"
#include "include/tessera/model.h"
#include "runtime/runtime.h"
#include "tir/tir.h"
#include "tuner/tuner.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

/* Exit codes: 0 success, 1 failure of the requested work (bad input file,
 * wrong result, ...), 2 usage error (unknown subcommand or option). */
enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_INTERRUPTED = 130 };

/* `PARENT SUB --help`: the usage line of SUB, its entries of the
 * "commands:" list in `usage` (an entry is a line starting "  SUB " and the
 * lines indented deeper after it) and the text after the list; the whole
 * usage when SUB has no entry. */
void cli_sub_help(const char *usage, const char *parent, const char *sub,
                  const char *synopsis);
/* Prints a JSON value (indented) and a newline to stdout, then frees it. */
struct cJSON;
void cli_print_json(struct cJSON *v);
/* Adds the target's instruction-set level, vector registers and how each
 * dtype runs on it to a JSON object (the fields `show --target` prints). */
void cli_target_isa_json(struct cJSON *o, const ts_target *t);

/* Prints s as a JSON string (quoted, escaped) to f. */
void cli_json_string(FILE *f, const char *s);

/* Each subcommand gets argv after the subcommand name (argv[0] is the
 * subcommand) and returns the process exit code. */
int cmd_show(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_bench(int argc, char **argv);
/* `tessera bench --suite`: tunes and benchmarks a set of workloads
 * (cmd_bench_suite.c): the fixed suite or the broad set drawn from a seed,
 * for this machine or its AVX2 subset. */
typedef struct bench_suite_options {
  const char *budget; /* "quick" or "full" */
  int trials;         /* > 0: overrides the budget's */
  const char *db, *out_dir;
  const char *set; /* "fixed" or "broad" */
  unsigned long long set_seed;
  const char *isa;  /* "native" or "avx2" */
  bool list;        /* print the set's workloads, run nothing */
  const char *only; /* non-NULL: the workloads whose spec contains it */
  /* the convolutions' weights declared constant (const=weight), as a
   * model's are and as oneDNN's side has them, reordered outside the
   * timing */
  bool const_weights;
} bench_suite_options;
int bench_suite(const bench_suite_options *o);
/* `tessera bench --model`: a compiled model timed against onnxruntime in
 * interleaved rounds (cmd_bench_model.c). */
int bench_model(int argc, char **argv);
int cmd_probe(int argc, char **argv);
int cmd_worker(int argc, char **argv);
int cmd_tracker(int argc, char **argv);
int cmd_rpc(int argc, char **argv);
int cmd_db(int argc, char **argv);
int cmd_costmodel(int argc, char **argv);
int cmd_tune(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_graph(int argc, char **argv);
int cmd_compile(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_run(int argc, char **argv);

/* Prints "tessera: error: <what>" plus the error's message to stderr. */
void cli_error(const char *what, const ts_error *err);
/* Prints "tessera <sub>: <message>" and a hint to use --help; returns
 * EXIT_USAGE. */
/* Whether an output file may be written at path: the commands write a
 * finished file under a temporary name and rename it onto path, which
 * would replace a device (-o /dev/null) or fail on a directory; EXIT_OK,
 * or EXIT_USAGE with a message naming the path. */
int cli_output_path(const char *sub, const char *path);
/* The target whose records were measured on `threads` threads: `target`
 * (NULL: this host) with its -num-cores set to `threads` (0: left as it
 * is; a target that already measures on `threads`, or not a CPU one, is
 * returned as given). A target that names another -num-cores is a usage error
 * for `sub` (records of one thread count are not measured on another). *out is
 * malloc'd; EXIT_FAIL (message printed) for a bad target. */
int cli_target_for_threads(const char *sub, const char *target, int threads,
                           char **out);
int cli_usage_error(const char *sub, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Option matching: returns true when argv[*i] is `name` (taking the next
 * argument as *value) or `name=value`. Sets *missing when the value is
 * absent: no next argument, or one that is an option itself (`-x`, `--x`;
 * a negative number is a value). */
bool cli_opt_value(int argc, char **argv, int *i, const char *name,
                   const char **value, bool *missing);

/* The rpc commands' helpers (cmd_worker.c): an integer option in [lo, hi]
 * (prints the usage error and returns EXIT_USAGE otherwise); the token of
 * --token-file (NULL path: none; prints the error and returns EXIT_FAIL);
 * SIGINT/SIGTERM blocked in every thread so a server can sigwait for them
 * (SIGPIPE ignored). */
int cli_int_option(const char *sub, const char *name, const char *value,
                   long lo, long hi, long *out);
int cli_read_token(const char *path, char **token);
void cli_block_stop_signals(sigset_t *set);

/* Loads the function named by exactly one of --workload SPEC / --tir FILE.
 * On success *func is owned by the caller (ts_func_free) and *workload is set
 * when a spec was given (ts_workload_free; its func is the same *func).
 * Prints the error and returns EXIT_FAIL otherwise. */
int cli_load_func(const char *spec, const char *tir_path,
                  ts_workload **workload, ts_func **func);

/* A workload key as the database resolves it: a key that reads as an
 * operator spec ("matmul M=64 N=64 K=64") becomes the hex structural hash
 * of that spec's function, written in hex; anything else (a hash, a hash
 * prefix, a name, or a spec that does not build) is returned as it is. */
const char *cli_workload_key(const char *key, char hex[33]);

/* A model with one dynamic dimension (the others sized by --dim) imported
 * (`symbol`; another is refused) at the padded sizes sizes[0..n) into
 * outs (ts_graph_import_padded_sizes) with the command
 * line's pass settings, every pass run and verified. Prints the error and
 * returns CLI_CANNOT_PAD when padding cannot serve the model, EXIT_FAIL on
 * other failures. */
#define CLI_CANNOT_PAD 3
int cli_load_padded(const char *path, const char *const *shapes, int n_shapes,
                    const char *symbol, const int64_t *sizes, int n,
                    ts_graph **outs);
/* --shape-buckets SYMBOL=S1,S2,...: the symbol into sym (cap bytes) and
 * up to max ascending positive sizes into sizes[0 .. *n). EXIT_OK, or the
 * usage error printed for command cmd. */
int cli_bucket_option(const char *cmd, const char *v, char *sym, size_t cap,
                      long *sizes, int *n, int max);
/* Imports an ONNX model (shapes: "NAME=DIMS" fixes of its inputs), runs
 * every graph pass and verifies the result (model.c). On success *out is
 * the caller's (ts_graph_free); otherwise the error is printed and
 * EXIT_FAIL returned. */
int cli_load_model(const char *path, const char *const *shapes, int n_shapes,
                   ts_graph **out);
/* The import alone (no passes), the error printed on failure. */
/* The layout the graph's layout pass uses (--layout nhwc|nchw; NULL: the
 * default, nhwc), applied by cli_import_model; cli_layout_option checks
 * and sets it (a usage error for other names). */
extern const char *cli_layout;
/* --no-winograd: the winograd pass off (cli_import_model applies it). */
extern bool cli_no_winograd;
/* --winograd-tile 2|4|auto (0)|measure (-1): the Winograd output tile. */
extern int cli_winograd_tile;
int cli_layout_option(const char *cmd, const char *value);
/* --input-layout / --output-layout (nchw or nhwc; NULL: the model's),
 * applied by cli_import_model; cli_io_layout_option checks a value into
 * *out (a usage error naming the flag otherwise). */
extern const char *cli_input_layout, *cli_output_layout;
int cli_io_layout_option(const char *cmd, const char *flag, const char *value,
                         const char **out);
int cli_import_model(const char *path, const char *const *shapes, int n_shapes,
                     ts_graph **out);
/* The optional passes' options (--pet, --pet-trials T; the quantized
 * compile's --quantize PROFILE.json, --calibration
 * minmax|percentile|entropy, --per-tensor, --keep-float OP), applied by
 * cli_import_model. cli_pass_option consumes argv[*i] (and its value)
 * when it is one of them: true then, with *rc a usage error or EXIT_OK. */
bool cli_pass_option(const char *cmd, int argc, char **argv, int *i, int *rc);
/* Whether --layout blocked or auto is on; the block pass's report (each:
 * one line per conv and transform, "# " comments). */
bool cli_block_on(void);
/* The database the block pass weighs by (tune: the job's, read before the
 * job starts, so that a second `tune --model --layout auto` measures the
 * tasks of the plan the first one's records give). */
void cli_block_measure(ts_db *db, const char *target);
/* Before cli_import_model: the target the model's graphs are built for
 * (ts_graph_set_target; NULL: this host), the command's --target. */
void cli_model_target(const char *target);
void cli_block_summary(const ts_graph *g, FILE *f, bool each);
/* The options' text for a usage message. */
extern const char cli_pass_usage[];
/* The --dim options into an import's options. */
void cli_import_dims(ts_graph_import_options *io);
/* Sizes of named dimensions added to the --dim options for the imports
 * that follow (n = 0: none). */
void cli_set_extra_dims(const char *const *dims, int n);
/* Whether any option that changes the passes (layouts, winograd, pet,
 * quantize) was given. */
bool cli_passes_set(void);
/* Whether --quantize was given. */
bool cli_quantizing(void);
/* Whether --pet was given. */
bool cli_pet_on(void);
/* Before cli_import_model: the pet pass weighs its candidates by the
 * latencies of db on target (compile), or builds their tasks for tuning
 * (collect_tasks: tune --model). */
void cli_pet_measure(ts_db *db, const char *target, bool collect_tasks);
/* With --pet: one line of what the pass did (each: the line of every
 * mutant first, all as '# ' comments). */
void cli_pet_summary(const ts_graph *g, FILE *f, bool each);
/* What the winograd pass weighed by the database (nothing when it weighed
 * nothing): a count, or with `each` its log. */
void cli_winograd_summary(const ts_graph *g, FILE *f, bool each);
/* The database --winograd-tile measure weighs by (tune: the job's own, so
 * that a second job measures the chosen forms' fused tasks). */
void cli_winograd_measure(ts_db *db, const char *target);

/* A compiled model (`tessera compile`'s shared library) opened with dlopen
 * and its C ABI (include/tessera/model.h) looked up (model.c). */
typedef struct cli_model_lib {
  void *handle;
  ts_model *model;
  int (*abi_version)(void);
  int (*create)(int, ts_model **);
  const char *(*last_error)(void);
  int (*num_inputs)(const ts_model *);
  int (*num_outputs)(const ts_model *);
  int (*input_info)(const ts_model *, int, ts_model_tensor_info *);
  int (*output_info)(const ts_model *, int, ts_model_tensor_info *);
  int (*run)(ts_model *, const void *const *, void *const *);
  int (*set_num_threads)(ts_model *, int);
  int (*num_kernels)(const ts_model *);
  const char *(*kernel_name)(const ts_model *, int);
  int (*profile)(ts_model *, const void *const *, void *const *, double *);
  const char *(*info)(void);
  void (*destroy)(ts_model *);
  /* optional (NULL in libraries of older versions: no dynamic dims) */
  int (*num_dims)(const ts_model *);
  int (*dim)(const ts_model *, int, ts_model_dim_info *);
  int (*set_dim)(ts_model *, const char *, int64_t);
} cli_model_lib;
/* Opens the library at path, checks its ABI version and creates the model
 * with n_threads threads. Prints the error and returns EXIT_FAIL
 * otherwise. */
int cli_model_lib_open(const char *path, int n_threads, cli_model_lib *out);
void cli_model_lib_close(cli_model_lib *m);
/* The tir dtype of an ONNX TensorProto data type code; false if none. */
bool cli_onnx_dtype(int code, ts_dtype *out);

/* Workload admission before anything is allocated for it (cmd_check.c):
 * its buffers at most max_memory_mb (0: half of this machine's memory) and
 * its operations at most max_gflop * 1e9 (0: CLI_MAX_GFLOP). w may be NULL
 * for a function read from TIR. Prints the refusal (size, limit, and the
 * --max-memory-mb / --max-gflop option that raises it) and returns
 * EXIT_FAIL, or EXIT_OK. */
#define CLI_MAX_GFLOP 2000.0
int cli_admit(const ts_workload *w, const ts_func *f, long max_memory_mb,
              double max_gflop);

/* A function built for a target, loaded, with seeded arguments (kernel.c):
 * what the CLI times in its own process. */
typedef struct cli_kernel {
  ts_build_result build;
  ts_rt_kernel *kernel;
  ts_rt_args *args;
} cli_kernel;
/* Builds and loads f and creates its arguments, inputs filled from seed. */
int cli_kernel_build(const ts_func *f, const ts_target *t, uint64_t seed,
                     cli_kernel *k, ts_error *err);
/* Times the kernel with cfg (repeat at most 64); *median_s is the median
 * repeat. */
int cli_kernel_time(cli_kernel *k, ts_runtime *rt, const ts_eval_config *cfg,
                    double *median_s, ts_error *err);
void cli_kernel_free(cli_kernel *k);
/* Builds a stored record's trace (record JSON, as in the database) applied
 * to f. */
int cli_kernel_build_record(const char *trace_json, const ts_func *f,
                            const ts_target *t, cli_kernel *k, ts_error *err);
/* Winograd's forms of a conv2d_nhwc workload (conv_forms.c): m = 2 for
 * F(2x2, 3x3), 4 for F(4x4, 3x3), each as the graph compiler builds it
 * (ts_conv_form_graph). */
/* Why w has no Winograd form; NULL when it has. */
const char *cli_conv_form_why_not(const ts_workload *w);
/* Form m's tasks: *g owns their functions (free it after *tasks). */
int cli_conv_form_tasks(const ts_workload *w, int m, ts_graph **g,
                        ts_graph_task **tasks, int *n, ts_error *err);
/* "input transform", "product" or "output transform". */
const char *cli_conv_form_stage(const ts_graph_task *t);
/* The seconds of form m by the database's best records on target: the sum
 * over its stages (each into stage_s, *n_stages of them); NAN when a stage
 * has no record. */
struct ts_db;
double cli_conv_form_seconds(const ts_workload *w, int m, struct ts_db *db,
                             const char *target, double *stage_s,
                             int max_stages, int *n_stages);
#define CLI_FORM_STAGES 4
/* Form m built from the database's best record of each stage, with seeded
 * arguments; TS_ENOTFOUND (saying which stage) when one has none, with
 * f->recorded telling whether any has one. */
typedef struct cli_form {
  int m, n;
  int recorded; /* stages with a record (kept when the build fails) */
  ts_func *func[CLI_FORM_STAGES];
  cli_kernel k[CLI_FORM_STAGES];
  int count[CLI_FORM_STAGES], number[CLI_FORM_STAGES];
  uint64_t consts[CLI_FORM_STAGES]; /* the stage's constant arguments */
  const char *stage[CLI_FORM_STAGES];
} cli_form;
int cli_conv_form_build(const ts_workload *w, int m, struct ts_db *db,
                        const ts_target *t, cli_form *f, ts_error *err);
/* One timing of the form: one repeat of each stage (cfg, the runs per
 * repeat found by the first call kept per stage), summed. */
int cli_conv_form_time(cli_form *f, ts_runtime *rt, const ts_eval_config *cfg,
                       double *seconds, ts_error *err);
void cli_conv_form_free(cli_form *f);

/* Prints the target's instruction-set level (ts_target_isa) and, one line
 * per dtype family, how its arithmetic runs there (kernel.c). */
void cli_print_target_isa(FILE *out, const ts_target *t);

/* Vendor libraries opened as confirmation peers of a workload (peers.c):
 * every library of bench/ that implements it (the plain C loop only where
 * none does), with `threads` threads. */
typedef struct cli_peers {
  ts_confirm_peer peers[TS_CONFIRM_MAX_PEERS];
  struct ts_bench_session *sessions[TS_CONFIRM_MAX_PEERS];
  int n;
  ts_workload *owned; /* the workload cli_peers_open_db built, or NULL */
  struct cli_vendor_call *call; /* cli_peers_add_vendor_call's, or NULL */
  char why[192]; /* a library that applies but failed to open, or "" */
} cli_peers;
/* Opens them (w NULL: none); returns how many. */
int cli_peers_open(const ts_workload *w, int threads, cli_peers *out);
/* The same for a stored workload, its operator from `spec` (NULL: the
 * spec a job stored, cli_workload_spec), `threads` threads (0: the
 * target's cores). A workload without a spec has no peers. */
int cli_peers_open_db(ts_db *db, int64_t workload_id, const char *spec,
                      const char *target, int threads, cli_peers *out);
/* Adds the vendor call that `tessera compile --dispatch` would make for a
 * graph task (desc: the call node's `vendor` description, graph/dispatch.c)
 * as the peer "onednn", on buffers of f's parameter sizes; a cold timing
 * evicts the parameters in const_params (bit i: parameter i). */
int cli_peers_add_vendor_call(cli_peers *p, const ts_func *f, const char *desc,
                              uint64_t const_params, int threads,
                              ts_error *err);
/* Closes them in the reverse order of opening. */
void cli_peers_close(cli_peers *p);

/* In-model confirmation (model_confirm.c): graph g compiled once per rank
 * 0..top-1 of each task's records in db, and once with every task a vendor
 * library can run given to it; the libraries timed in interleaved rounds
 * of profiled runs, and each task's candidates stored with their time in
 * the model as its confirmation (and the vendor's level side by side), so
 * that `tessera compile` chooses by the model's own timings. */
typedef struct cli_model_confirm_options {
  const char *target; /* canonical target of the records */
  int threads;        /* the model's threads (>= 1) */
  int top;            /* records per task (3, at most 8) */
  int rounds;         /* interleaved rounds (5) */
  int runs;           /* profiled runs of each variant per round (6) */
  FILE *out;          /* the per-task table, or NULL */
  FILE *progress;     /* progress lines, or NULL */
} cli_model_confirm_options;
cli_model_confirm_options cli_model_confirm_defaults(void);
/* EXIT_OK, or EXIT_FAIL with the error printed. */
int cli_model_confirm(ts_db *db, const ts_graph *g,
                      const cli_model_confirm_options *o);
/* Loads the model as `tessera compile` builds it from the database, with
 * the Winograd forms of the convs of the given keys forced (n may be 0);
 * EXIT_FAIL with the error printed. */
typedef int (*cli_wino_loader)(void *ctx, const char *const *keys,
                               const int *tiles, int n, ts_graph **g);
/* The Winograd forms weighed in the model (model_confirm.c): the model
 * compiled as now and once per other form of each distinct conv the pass
 * weighs, timed side by side; each form's seconds per run stored in the
 * database's `choices` (kind "winograd"), by which the pass then chooses.
 * o->top is not used. */
int cli_model_confirm_winograd(ts_db *db, cli_wino_loader load, void *ctx,
                               const cli_model_confirm_options *o);
/* Both, on a model file, as `tune --model` ends and `db confirm --model`
 * runs: with --winograd-tile measure the forms first, then the records of
 * the model as compile builds it after that. target is what the passes
 * look records up by (o->target is the canonical one). */
int cli_confirm_model_file(ts_db *db, const char *model,
                           const char *const *shapes, int n_shapes,
                           const char *target,
                           const cli_model_confirm_options *o);
/* The operator spec a job stored for the workload (the newest job that
 * lists it by spec), malloc'd; NULL when none did (a graph task, a TIR
 * file). */
char *cli_workload_spec(ts_db *db, int64_t workload_id);

/* The first trial of job_id at which a task reached 90% of its final best
 * throughput (latency <= best / 0.9), or -1 (cmd_tune.c). */
int64_t cli_trial_at_90(ts_db *db, int64_t workload, const char *target,
                        int64_t job_id, double best);

/* `tessera tune --compare-models` (cmd_tune_compare.c): runs the job once
 * with the XGBoost model and once with the random model, each in its own
 * database, then times both bests side by side in `rounds` interleaved
 * rounds (1..99) and prints the comparison. */
int tune_compare_models(ts_runner *runner, const char *db_path,
                        const ts_tune_options *opts, const ts_tune_task *tasks,
                        int n_tasks, int threads, int rounds, bool json);

#endif /* TESSERA_CLI_H */
