/*
 * graph.h — the public interface of tessera's model graph: the graph IR,
 * ONNX import, the graph passes and their pipeline, and the reference
 * executor.
 *
 * A graph is a list of nodes in topological order over typed tensor values
 * (name, shape, dtype, layout). Constants (weights) live out of the node
 * arena in one constant store owned by the graph. A node is either a graph
 * operator (an ONNX op type with attributes) or a destination-passing call
 * of a TIR PrimFunc (TVM Unity's call_tir): the function's parameters are
 * the node's inputs followed by its outputs, and the caller allocates the
 * outputs. The structs are private (graph/internal.h); this header gives
 * handles, accessors and the passes. Errors use tir's ts_error and TS_E*
 * codes; bad model files are an error naming what and where, never a crash.
 */
#ifndef TESSERA_GRAPH_H
#define TESSERA_GRAPH_H

#include "tir/tir.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ts_graph ts_graph;

/* The two node kinds. */
typedef enum ts_graph_node_kind {
  TS_GRAPH_OP,   /* a graph operator: op type + attributes */
  TS_GRAPH_CALL, /* a destination-passing call of a TIR PrimFunc */
} ts_graph_node_kind;

/* Limits on what an imported model may ask for; zero fields take the
 * defaults (64 GiB of constants, 1e6 nodes, 2^40 elements per tensor). */
typedef struct ts_graph_limits {
  uint64_t max_constant_bytes;
  int64_t max_nodes;
  int64_t max_tensor_elems;
} ts_graph_limits;

/* Import options. input_shapes holds "NAME=1x3x224x224" strings that fix the
 * named input's shape (needed when the model leaves a dimension symbolic).
 * dims holds "SYMBOL=SIZE" strings that give a named dynamic dimension (an
 * ONNX dim_param such as "batch" or "seq") its size in every input that
 * has it; input_shapes win where both apply. With default_dim > 0, every
 * named dynamic dimension left without a size takes default_dim and the
 * graph remembers it as a symbol (ts_graph_n_symbols): how the symbolic
 * import finds a model's symbols. */
typedef struct ts_graph_import_options {
  const char *const *input_shapes;
  int n_input_shapes;
  const char *const *dims;
  int n_dims;
  int64_t default_dim;
  ts_graph_limits limits;
  /* ts_graph_import_padded: called on the graph at the padded size before
   * the passes after cse run (to give it pass settings: layout,
   * quantization, ...); non-zero (err set) stops the import. */
  int (*before_passes)(ts_graph *g, void *ctx, ts_error *err);
  void *ctx;
} ts_graph_import_options;

/* ========================================================================
 * Import (graph/onnx_import.c)
 * ======================================================================== */

/* Reads an ONNX model file (opsets 7-21 of the default domain). External
 * data files are looked up relative to the model's folder. Every dimension of
 * every graph input must be known after opts->input_shapes is applied; a
 * symbolic one is refused with a message naming the input. On success *out
 * is a new graph the caller frees with ts_graph_free; on failure *out is
 * NULL and err names the problem (node name, op type, opset, field). */
int ts_graph_import_onnx(const char *path, const ts_graph_import_options *opts,
                         ts_graph **out, ts_error *err);
/* The same from bytes in memory; base_dir (may be NULL: external data is
 * refused) is the folder external data paths are relative to. */
int ts_graph_import_onnx_bytes(const void *data, size_t len,
                               const char *base_dir,
                               const ts_graph_import_options *opts,
                               ts_graph **out, ts_error *err);

/* ========================================================================
 * Symbolic shapes (graph/symbolic.c)
 * ======================================================================== */

/* Imports a model whose inputs have named dynamic dimensions (ONNX
 * dim_params, at most TS_GRAPH_MAX_SYMBOLS of them left without a size by
 * opts) and derives every value's shape as a function of those symbols.
 * The model is imported at several sizes of its symbols (shape inference
 * and constant folding run at each, Shape/Gather/Concat chains included)
 * and each dimension of each value is fitted by a polynomial of degree two
 * at most in the symbols with integer coefficients (12*seq, seq*seq,
 * batch*seq, seq + 1), then checked at further sizes of mixed parity. A
 * dimension no such polynomial gives at every size (a strided window over
 * a symbolic length: floor((seq - 1) / 2) + 1) is refused with a message
 * naming the value and the sizes, as is a graph whose structure changes
 * with the sizes. The pass pipeline runs at each size up to the pass
 * `after` (NULL: every pass; "none": none), so the shapes after fusion
 * are symbolic too. On success *out is the graph at the first sizes, each
 * value of it carrying its symbolic shape: the text form (ts_graph_print)
 * shows the symbols in place of those sizes. */
#define TS_GRAPH_MAX_SYMBOLS 2
int ts_graph_import_symbolic(const char *path,
                             const ts_graph_import_options *opts,
                             const char *after, ts_graph **out, ts_error *err);
/* Imports a model with one dynamic dimension left without a size (opts
 * give the others) at the padded size `size` (graph/dynamic.c): the graph
 * serves every size n <= size when its inputs are padded with zeros along
 * the dimension and the outputs cut back to n. Operators that mix
 * positions along it (contractions, softmax, reductions) get PadMask nodes
 * that give the padding their neutral value from a length input, a graph
 * input [1] of float32 named TS_GRAPH_LENGTH_PREFIX + the symbol, appended
 * after the model's inputs and holding n at run time (the masks read it,
 * and the kernels cut their loops over the dimension to it). What padding
 * cannot serve (a dimension that is an expression of the symbol, a convolution
 * or normalization over it, a constant computed from the size) is refused with
 * a message naming the node. The passes run up to `after` (NULL: all). */
#define TS_GRAPH_LENGTH_PREFIX "tessera_length_"
int ts_graph_import_padded(const char *path,
                           const ts_graph_import_options *opts, int64_t size,
                           const char *after, ts_graph **out, ts_error *err);
/* The same at several sizes (sizes[0..n) into outs[0..n)), the model's
 * symbolic shapes derived once. */
int ts_graph_import_padded_sizes(const char *path,
                                 const ts_graph_import_options *opts,
                                 const int64_t *sizes, int n, const char *after,
                                 ts_graph **outs, ts_error *err);
/* The axes (bit d: dimension d) of input or output i of a padded graph that
 * are its dynamic dimension; false when i is out of range or the graph is
 * not padded. */
bool ts_graph_padded_axes(const ts_graph *g, bool output, int i,
                          unsigned *axes);
/* The graph's symbols (named dimensions given default sizes at import or
 * found by ts_graph_import_symbolic), and the size each has in it. */
int ts_graph_n_symbols(const ts_graph *g);
const char *ts_graph_symbol(const ts_graph *g, int i, int64_t *size);
/* The symbolic form of dimension d of the named value ("seq", "12*seq",
 * "768") into buf; false when the value is unknown or d out of range. */
bool ts_graph_value_dim_text(const ts_graph *g, const char *value, int d,
                             char *buf, size_t cap);

/* ========================================================================
 * The graph
 * ======================================================================== */

/* An empty graph; caller frees with ts_graph_free. */
ts_graph *ts_graph_new(const char *name);
void ts_graph_free(ts_graph *g);

/* Counts and node accessors (i in [0, n)). */
int ts_graph_n_nodes(const ts_graph *g);
ts_graph_node_kind ts_graph_node_kind_of(const ts_graph *g, int i);
/* The op type ("Conv", "MatMul", ...) or "call_tir" for a call node. */
const char *ts_graph_node_op(const ts_graph *g, int i);
const char *ts_graph_node_name(const ts_graph *g, int i);
/* The called function of a call node (owned by the graph), else NULL. */
const ts_func *ts_graph_node_func(const ts_graph *g, int i);
/* How many nodes have op type `op`. */
int ts_graph_count_op(const ts_graph *g, const char *op);
/* Bytes held by the constant store. */
size_t ts_graph_constant_bytes(const ts_graph *g);

/* A tensor value's description (a plain copy). ndim is -1 while the rank is
 * unknown, a dimension -1 while unknown. */
typedef struct ts_graph_value_info {
  const char *name; /* owned by the graph */
  ts_dtype dtype;
  int ndim;
  int64_t shape[TS_MAX_DIMS];
  const char *layout; /* "NCHW", "NC", ... or "" when it has no meaning */
  bool is_constant;
} ts_graph_value_info;
/* Graph inputs and outputs, in model order. */
int ts_graph_n_inputs(const ts_graph *g);
int ts_graph_n_outputs(const ts_graph *g);
ts_graph_value_info ts_graph_input(const ts_graph *g, int i);
ts_graph_value_info ts_graph_output(const ts_graph *g, int i);

/* ========================================================================
 * Printer, verifier, hash (graph/printer.c, graph/verify.c, graph/hash.c)
 * ======================================================================== */

/* The text form (one line per value declaration and per node, constants
 * by shape only). Returns a malloc'd string the caller frees; NULL when
 * out of memory. */
char *ts_graph_print(const ts_graph *g);
/* The same as JSON ({"name", "inputs", "outputs", "nodes": [...]}). */
char *ts_graph_print_json(const ts_graph *g);
/* Checks that g is well formed: nodes in topological order, every input
 * defined before use, each value produced once, graph outputs defined,
 * known shapes consistent with call signatures. TS_OK or TS_EVERIFY naming
 * the node and the problem. */
int ts_graph_verify(const ts_graph *g, ts_error *err);
/* The 128-bit structural hash: independent of node and value names,
 * sensitive to ops, attributes, shapes, dtypes, wiring and constant bytes.
 * Out of memory gives the zero hash (the failure is counted in
 * ts_alloc_failures, tir/alloc.h). */
ts_hash128 ts_graph_hash(const ts_graph *g);

/* ========================================================================
 * Passes (one file each) and the pipeline (graph/pipeline.c)
 * ======================================================================== */

/* Each pass returns TS_OK or a negative code with err set; on failure the
 * graph stays well formed and computes the same values (node rewrites are
 * committed only at the end of a pass, but shapes inferred and constants
 * folded before the failing node remain). The contracts are in each file
 * and in docs/graph.md. */
int ts_graph_infer_shapes(ts_graph *g, ts_error *err);     /* shape.c */
int ts_graph_fold_constants(ts_graph *g, ts_error *err);   /* fold.c */
int ts_graph_eliminate_dead(ts_graph *g, ts_error *err);   /* dce.c */
int ts_graph_eliminate_common(ts_graph *g, ts_error *err); /* cse.c */
int ts_graph_fold_batchnorm(ts_graph *g, ts_error *err);   /* bn_fold.c */
int ts_graph_match_patterns(ts_graph *g, ts_error *err);   /* patterns.c */
int ts_graph_lower(ts_graph *g, ts_error *err);            /* lower.c */
int ts_graph_convert_layout(ts_graph *g, ts_error *err);   /* layout.c */
int ts_graph_winograd(ts_graph *g, ts_error *err);         /* winograd.c */
int ts_graph_fuse(ts_graph *g, ts_error *err);             /* fuse.c */
int ts_graph_block(ts_graph *g, ts_error *err);            /* block.c */

/* The layout the layout pass gives 2-D convolutions and pools: "nhwc"
 * (channels-last, the default), "nchw" (the pass does nothing), or NHWC
 * then channel-blocked by the block pass: "blocked" (every conv that
 * can) or "auto" (by measurement; see ts_block_options). Other names:
 * TS_EINVAL. */
int ts_graph_set_layout(ts_graph *g, const char *layout, ts_error *err);

/* Channel-blocked activations (graph/block.c): ts_graph_set_layout(g,
 * "blocked") runs every ungrouped 2-D conv whose channels the block
 * divides on [N, C/B, H, W, B] data; "auto" chooses per conv between
 * NHWC and blocked (and the block, 8 or 16) by the latencies the tuning
 * database holds for each conv's group and each transform, built alone. */
typedef struct ts_block_options {
  int block;          /* 8 or 16: the only block size; 0: 16 for "blocked",
                         both weighed for "auto" */
  struct ts_db *db;   /* the latencies ("auto"; NULL: nothing measured, so
                         nothing is blocked) */
  const char *target; /* the target the records are for */
  bool collect_tasks; /* build every candidate's tasks even without a
                         database (ts_graph_block_candidate_tasks) */
} ts_block_options;
/* TS_EINVAL for a block other than 0, 8 or 16. */
int ts_graph_set_block_options(ts_graph *g, const ts_block_options *o,
                               ts_error *err);
typedef struct ts_block_report {
  int convs;                  /* convs that could run blocked */
  int blocked;                /* convs the plan blocked */
  int block;                  /* the block size chosen (0: nothing blocked) */
  int transforms;             /* layout transforms the plan left */
  double before_us, after_us; /* the weighed convs and transforms, all
                                 NHWC and as planned (NAN: not weighed,
                                 "blocked") */
  double ms;                  /* the pass's own time */
} ts_block_report;
/* What the block pass did and, in *log (may be NULL), one line per conv
 * and per transform (owned by the graph; "" when it did not run). */
void ts_graph_block_report(const ts_graph *g, ts_block_report *r,
                           const char **log);

/* The target the graph is compiled for (a target string; NULL: this
 * host). The layout pass lays MatMul weights out in panels of columns as
 * wide as the target's register tile wants (three vectors: 24 float32 on
 * AVX2, 48 on AVX-512; docs/graph.md), so the graph's tasks, hence their
 * hashes, depend on it: tune and compile a model for the same target.
 * TS_EINVAL for a target string that does not parse. */
int ts_graph_set_target(ts_graph *g, const char *target, ts_error *err);

/* Winograd's tile by measurement (winograd.c). With a database, each 3x3
 * conv the pass can take (whatever its image size) is weighed as a direct
 * conv, F(2x2, 3x3) and F(4x4, 3x3), each alone and fused as the compiler
 * will, by the latencies of its tasks on `target`; the fastest is taken.
 * Where one of them has no record the rule decides (the tile by the image
 * size, ts_graph_set_winograd_tile). A forced tile (2 or 4) is not
 * weighed. collect_tasks builds the candidates' tasks without a database
 * (ts_graph_winograd_candidate_tasks): `tune --model` measures them so
 * that `compile --db` chooses by latency. */
typedef struct ts_winograd_options {
  struct ts_db *db;
  const char *target; /* NULL: this host ("llvm") */
  bool collect_tasks;
  /* Forms forced per conv: the convs whose key (ts_winograd_conv.key) is
   * force_keys[i] take form force_tiles[i] (0 direct, 2 or 4), whatever
   * the database says; the in-model weighing compiles its variants so. The
   * strings are copied. */
  const char *const *force_keys;
  const int *force_tiles;
  int n_force;
} ts_winograd_options;
/* What the pass decided for one conv it weighed (with a database, with
 * collect_tasks, or with forms forced): its node, its key (the task hash
 * of the conv alone in the direct form: identical convs share it), the
 * form taken (0 direct, 2, 4), the rule's form, and how it was decided:
 * "forced", "model" (the in-model figures of the database's `choices`),
 * "records" (the candidates' records) or "rule". */
typedef struct ts_winograd_conv {
  const char *node;
  char key[33];
  int tile, rule;
  const char *by;
} ts_winograd_conv;
/* The pass's decisions, in graph order; owned by the graph, valid until
 * the pass runs again or the graph is freed. */
int ts_graph_winograd_convs(const ts_graph *g, const ts_winograd_conv **convs,
                            int *n);
/* The option names of the `choices` rows of kind "winograd" for tile m
 * (0, 2, 4): "direct", "F(2x2)", "F(4x4)". */
const char *ts_winograd_form_name(int m);
int ts_graph_set_winograd_options(ts_graph *g, const ts_winograd_options *o,
                                  ts_error *err);
/* Whether the winograd pass rewrites 3x3 convolutions (on by default). */
void ts_graph_set_winograd(ts_graph *g, bool on);
/* The output tile of the Winograd rewrite: 2 (F(2x2, 3x3)) or 4
 * (F(4x4, 3x3)) for every conv it takes, or 0 (the default) to choose per
 * conv: 4 where the image has at least 16 tiles of 4x4, 2 where it has 32
 * tiles of 2x2 (docs/graph.md). */
void ts_graph_set_winograd_tile(ts_graph *g, int m);

/* One conv2d_nhwc workload alone as the compiled model runs it in form m
 * (0 direct, 2 F(2x2, 3x3), 4 F(4x4, 3x3); conv_forms.c): its graph after
 * every pass, with channels-last input and output, so that its tasks
 * (ts_graph_tasks) are the conv's own — for a Winograd form the input
 * transform, the batched product over the weights transformed at compile
 * time, and the output transform. `tune --workload --winograd` tunes them,
 * `bench --workload` times them. */
typedef struct ts_conv_form_spec {
  int64_t n, h, w, ci, co, kh, kw; /* NHWC data, HWIO weights */
  int64_t stride, pad, dilation, groups, weight_block; /* as the spec's keys */
  bool float32;                                        /* every dtype */
} ts_conv_form_spec;
/* Why c has no Winograd form ("its stride is not 1", ...); NULL when it
 * has both. */
const char *ts_conv_form_why_not(const ts_conv_form_spec *c);
/* The graph of c in form m into *out (the caller frees it); hwio: the
 * weights [kh, kw, ci, co] (NULL: fixed values, enough to tune and time).
 * The direct form (m 0) takes any float32 conv of one group with HWIO
 * weights (its task's `vendor` is the oneDNN call the compiler would
 * make); TS_EUNSUPPORTED with the reason for a form c has not. */
int ts_conv_form_graph(const ts_conv_form_spec *c, const float *hwio, int m,
                       ts_graph **out, ts_error *err);

/* The layout of the compiled model's 4-D inputs and outputs: "nchw" (as
 * the ONNX model declares them, the default) or "nhwc" (the caller passes
 * and receives channels-last arrays, so no transpose runs at that edge of
 * a channels-last network); NULL leaves that side as it is. The names stay
 * the model's; the shapes are permuted. Applied by the layout pass (even
 * with the pass off, as one Transpose at the edge). TS_EINVAL for another
 * name. */
int ts_graph_set_io_layout(ts_graph *g, const char *inputs, const char *outputs,
                           ts_error *err);

/* The pass names in pipeline order, NULL-terminated ("shape", "fold",
 * "dce", "cse", "bn_fold", "patterns", "lower", "layout", "winograd",
 * "fuse"). */
const char *const *ts_graph_pass_names(void);
/* Runs the pipeline up to and including the pass named stop_after (NULL:
 * all), from where an earlier call on g stopped (a pass g is already past:
 * nothing to do). With the environment variable TS_VERIFY=1 the verifier
 * runs after every pass. Unknown stop_after: TS_EINVAL. */
int ts_graph_run_passes(ts_graph *g, const char *stop_after, ts_error *err);

/* One distinct task of a graph: a called PrimFunc and how often the graph
 * calls it (structurally equal functions are one task). */
typedef struct ts_graph_task {
  const ts_func *func;    /* owned by the graph */
  ts_hash128 hash;        /* the task's identity in the tuning database */
  int count;              /* calls of it in the graph */
  double flops;           /* per call (ts_func_flops) */
  const char *first_node; /* the first call node's name */
  /* How a vendor library would run it (graph/dispatch.c: the call's
   * `vendor` description), NULL when none can */
  const char *vendor;
  /* Bit k: the first call's argument k (k < 64) is a constant of the graph
   * (weights, a bias): in a run of the compiled model it comes from memory,
   * the layers since the last run having evicted it, while the other
   * inputs were just written by the layer before (tuning's cold
   * confirmation, tuner.h) */
  uint64_t const_params;
} ts_graph_task;
/* The distinct tasks of g's call nodes, in order of first call. *tasks is
 * a malloc'd array the caller frees with free(). */
int ts_graph_tasks(const ts_graph *g, ts_graph_task **tasks, int *n_tasks,
                   ts_error *err);

/* ========================================================================
 * User TIR in the graph (graph/call.c)
 * ======================================================================== */

/* Replaces the node named `node_name` by a destination-passing call of a
 * copy of f: f's parameters must be the node's inputs then its outputs,
 * with equal shapes and dtypes (a mismatch names both). Shapes must be
 * known (run shape inference first). f stays owned by the caller. */
int ts_graph_override(ts_graph *g, const char *node_name, const ts_func *f,
                      ts_error *err);

/* ========================================================================
 * Reference executor (graph/exec.c)
 * ======================================================================== */

/* A host tensor: dtype, shape and row-major data. */
typedef struct ts_graph_tensor {
  const char *name; /* not owned */
  ts_dtype dtype;
  int ndim;
  int64_t shape[TS_MAX_DIMS];
  void *data; /* row-major storage */
} ts_graph_tensor;

/* How the executor runs call nodes. */
typedef enum ts_graph_exec_mode {
  TS_GRAPH_INTERPRET, /* tir's reference interpreter (slow, the ground truth) */
  TS_GRAPH_COMPILE,   /* each distinct task compiled once for this machine
                         without a tuned schedule (codegen), then called */
} ts_graph_exec_mode;

/* Runs g (after shape inference) on inputs (one per graph input, matched by
 * position; shapes and dtypes must equal the graph's), node by node: graph
 * operators in the reference kernels, call nodes as `mode` says, with the
 * caller-allocated outputs passed in. outputs[i] is filled with a malloc'd
 * data buffer the caller frees with free(); shapes and dtypes are set.
 * n_outputs must equal ts_graph_n_outputs. */
int ts_graph_execute(const ts_graph *g, ts_graph_exec_mode mode,
                     const ts_graph_tensor *inputs, int n_inputs,
                     ts_graph_tensor *outputs, int n_outputs, ts_error *err);

/* Told of every value the executor computes (the graph inputs first, then
 * each node's outputs as the node finishes): its id and a view of its data,
 * valid only during the call. */
typedef void (*ts_graph_observer)(void *ctx, int value_id,
                                  const ts_graph_tensor *t);
/* An executor for running g many times: in TS_GRAPH_COMPILE mode its
 * kernels are built once, at create. g must outlive it. */
typedef struct ts_graph_runner ts_graph_runner;
int ts_graph_runner_create(const ts_graph *g, ts_graph_exec_mode mode,
                           ts_graph_runner **out, ts_error *err);
/* ts_graph_execute_observed with the runner's graph and mode. */
int ts_graph_runner_run(ts_graph_runner *r, const ts_graph_tensor *inputs,
                        int n_inputs, ts_graph_tensor *outputs, int n_outputs,
                        ts_graph_observer observer, void *ctx, ts_error *err);
void ts_graph_runner_free(ts_graph_runner *r);
/* ts_graph_execute with an observer (NULL: none), e.g. the quantization
 * profile's (graph/quant.c). */
int ts_graph_execute_observed(const ts_graph *g, ts_graph_exec_mode mode,
                              const ts_graph_tensor *inputs, int n_inputs,
                              ts_graph_tensor *outputs, int n_outputs,
                              ts_graph_observer observer, void *ctx,
                              ts_error *err);

/* ========================================================================
 * Quantization profile (graph/quant.c)
 * ======================================================================== */

/* How a tensor's quantization range is chosen from its profile. */
typedef enum ts_quant_calibration {
  TS_QUANT_MINMAX = 0,     /* the observed range */
  TS_QUANT_PERCENTILE = 1, /* the range holding a share of the values */
  TS_QUANT_ENTROPY = 2,    /* the least-information-loss threshold (KL) */
} ts_quant_calibration;

/* What the profile observed of one float32 value over every sample. */
typedef struct ts_quant_stats {
  const char *name; /* the value's (owned by the graph) */
  int value_id;
  double min, max;   /* of the finite values */
  int64_t count;     /* finite values seen */
  int64_t nan, inf;  /* NaN and infinite values seen (not in the range) */
  int n_bins;        /* of each histogram */
  int64_t *bins;     /* the finite values over [min, max] */
  int64_t *abs_bins; /* their magnitudes over [0, max(|min|, |max|)] */
} ts_quant_stats;

typedef struct ts_quant_profile ts_quant_profile;
/* A profile of every float32 value g computes (graph inputs and node
 * outputs; constants are not profiled), histograms of n_bins bins. */
int ts_quant_profile_create(const ts_graph *g, int n_bins,
                            ts_quant_profile **out, ts_error *err);
/* Runs g on one sample with the profile observing: pass 0 gathers the
 * ranges; pass 1 (after every sample's pass 0) the histograms over them.
 * The kernels are built at the first call, in its mode. */
int ts_quant_profile_add(ts_quant_profile *p, int pass, ts_graph_exec_mode mode,
                         const ts_graph_tensor *inputs, int n_inputs,
                         ts_error *err);
int ts_quant_profile_n(const ts_quant_profile *p);
const ts_quant_stats *ts_quant_profile_get(const ts_quant_profile *p, int i);
void ts_quant_profile_free(ts_quant_profile *p);
/* The profile as JSON (malloc'd): per tensor its statistics, histograms and
 * the range each calibration picks (percentile: the share for it, in %). */
char *ts_quant_profile_json(const ts_quant_profile *p, const char *model,
                            double percentile);
/* The range [lo, hi] (holding 0) a calibration keeps for a tensor; symmetric
 * ranges are [-t, t]. TS_EINVAL for a tensor with no finite value. */
int ts_quant_range(const ts_quant_stats *s, ts_quant_calibration c,
                   double percentile, bool symmetric, double *lo, double *hi,
                   ts_error *err);
/* The scale and zero point of a range: symmetric int8 ([-127, 127], zero
 * point 0) or asymmetric uint8 ([0, 255]); a range of zero width (a
 * constant 0) gets scale 1. */
void ts_quant_params(double lo, double hi, bool symmetric, double *scale,
                     int *zero_point);
const char *ts_quant_calibration_name(ts_quant_calibration c);
/* Requantization in integers (the int32 accumulator of an int8 product to
 * the output's int8/uint8): a positive real scale (input scale x weight
 * scale / output scale) as multiplier * 2^-31 * 2^-shift, the multiplier in
 * [2^30, 2^31) (relative error under 2^-31); TS_EINVAL for a scale that is
 * not finite and positive, TS_ERANGE outside [2^-31, 2^30). */
int ts_quant_multiplier(double scale, int32_t *multiplier, int *shift);
/* round(acc * multiplier * 2^-(31 + shift)) (ties away from zero) +
 * zero_point, saturated to [qmin, qmax]. */
int32_t ts_quant_requantize(int32_t acc, int32_t multiplier, int shift,
                            int32_t zero_point, int32_t qmin, int32_t qmax);

/* How the quantized compile (graph/quantize.c) uses a profile. */
typedef struct ts_quant_options {
  ts_quant_calibration calibration; /* which of the profile's ranges */
  bool per_tensor; /* one weight scale per tensor (default: per channel) */
  const char *const *keep_float; /* operator types kept float32 */
  int n_keep_float;
} ts_quant_options;
/* Makes the pass pipeline's `quantize` pass (after `layout`) turn every
 * conv and matmul with constant weights whose data the profile (the JSON
 * of ts_quant_profile_json) covers into an int8 product: uint8 data,
 * per-channel int8 weights, int32 accumulation, dequantized in the
 * product's epilogue. TS_EPARSE for a text that is not such a profile. */
int ts_graph_set_quantization(ts_graph *g, const char *profile_json,
                              const ts_quant_options *o, ts_error *err);
/* The pass itself (a no-op without ts_graph_set_quantization). */
int ts_graph_quantize(ts_graph *g, ts_error *err);
/* After the passes: how many convs/matmuls became int8 products and how
 * many stayed float32. */
void ts_graph_quant_counts(const ts_graph *g, int *int8, int *float32);

/* ========================================================================
 * Partially equivalent transformations (graph/pet.c, pet_check.c)
 * ======================================================================== */

/* How the `pet` pass (after `layout`) searches. Zero fields take the
 * defaults. */
typedef struct ts_pet_options {
  int trials;         /* t: random input sets per checked position (2) */
  uint64_t seed;      /* of the random inputs and positions (1) */
  double min_gain;    /* apply a mutant only when its estimated cost is this
                         fraction below the original's (0.05) */
  int64_t max_boxes;  /* boxes per output past which a mutant is not
                         checked (and not applied) (4096) */
  int top_k;          /* candidates per subprogram weighed by measurement,
                         the original included (2); mutants estimated more
                         than 10 % dearer than the original are not */
  struct ts_db *db;   /* the tuning database: when every task of every
                         weighed candidate (each built alone) has a record
                         on `target`, the choice is by those latencies,
                         otherwise by the estimate (NULL: the estimate) */
  const char *target; /* NULL: this host ("llvm") */
  bool collect_tasks; /* build the weighed candidates' tasks even without a
                         database (ts_graph_pet_candidate_tasks) */
  int depth;          /* mutants of mutants up to this depth: each
                         single-node mutator on the convs and matmuls of
                         the mutants one level up (2; at most 3) */
  const char *only;   /* try only the mutator of this kind (NULL: all) */
  bool apply_all;     /* apply every checked (and corrected) mutant whatever
                         its cost, the last one tried where a node has
                         several: for testing */
} ts_pet_options;
/* Turns the pet pass on for g (o NULL: the defaults); TS_EINVAL for a
 * negative field. */
int ts_graph_set_pet(ts_graph *g, const ts_pet_options *o, ts_error *err);
/* The pass itself (a no-op unless ts_graph_set_pet was called). */
int ts_graph_pet(ts_graph *g, ts_error *err);
/* What the pass did (zeros when it did not run). */
typedef struct ts_pet_report {
  int subprograms;       /* subprograms (a node, or the nodes batched
                            together) some mutator applied to */
  int generated, pruned; /* pruned: estimated too dear to check */
  int duplicates;        /* the same program as the original or an
                            earlier mutant (structural hash), skipped */
  int verified, exact, corrected, wrong, unchecked, applied;
  int relayouts_cancelled; /* re-layout pairs removed after applying */
  int by_measurement;      /* nodes whose choice the database's latencies
                              made (the others: the estimate) */
  int64_t boxes, points;   /* boxes checked, positions evaluated */
  double cost_before_us, cost_after_us; /* estimated, of the rewritten
                                            subprograms */
  double ms;                            /* the pass's own time */
} ts_pet_report;
/* The report and, in *log (may be NULL), one line per mutant (owned by
 * the graph; "" when the pass did not run). */
void ts_graph_pet_report(const ts_graph *g, ts_pet_report *r, const char **log);
/* The tasks of every candidate the pass weighed by measurement (the
 * original and its best mutants, each built alone; with a database or
 * collect_tasks), owned by the graph: `tune --model --pet` measures them
 * so that `compile --pet --db` chooses by latency. */
/* The tasks of every candidate the pass weighed (each conv's group alone
 * in each layout, each transform), owned by the graph: `tune --model
 * --layout auto` measures them so that `compile --layout auto --db`
 * chooses by latency. */
int ts_graph_block_candidate_tasks(const ts_graph *g,
                                   const ts_graph_task **tasks, int *n);
int ts_graph_pet_candidate_tasks(const ts_graph *g, const ts_graph_task **tasks,
                                 int *n);
/* The Winograd pass's candidates' tasks (each conv it can take alone as a
 * direct conv, F(2x2) and F(4x4); with a database or collect_tasks, see
 * ts_winograd_options), owned by the graph, and its log, one line per
 * weighed conv ("" when it weighed none). */
int ts_graph_winograd_candidate_tasks(const ts_graph *g,
                                      const ts_graph_task **tasks, int *n);
const char *ts_graph_winograd_log(const ts_graph *g);

/* ========================================================================
 * Memory planning (graph/plan.c)
 * ======================================================================== */

/* The static memory plan of a graph after the passes (shapes known). Value
 * indices are the graph's value ids (0 .. ts_graph_n_values(g) - 1).
 *
 * Intermediates (values produced by nodes that are not graph outputs) live
 * in one arena at fixed offsets; graph inputs and outputs live in the
 * caller's buffers, constants in the graph's constant store. Storage is
 * shared in two ways:
 *  - views: the output of Reshape, Flatten, Squeeze, Unsqueeze, Identity or
 *    a same-dtype Dropout is its input's bytes and shares its storage (a
 *    view of a graph input or a constant is a view of the caller's or the
 *    library's buffer). When a graph output is a view of intermediates,
 *    those intermediates are placed in the output's buffer: their alias_of
 *    is the output (offset -1).
 *  - in place: a call_tir output takes the storage of an intermediate input
 *    of equal bytes that dies at the call when the called function is
 *    provably elementwise in it (every access of the input is a load in
 *    the one pointwise block that stores the output, at the store's
 *    indices; same shape and dtype). Graph ops other than views never run
 *    in place.
 * A graph output with alias_of >= 0 is a view whose storage cannot be
 * shared (its source is a graph input, a constant, or another graph
 * output): the caller copies alias_of's bytes into the output's buffer
 * (when the output's producer runs, or after the run). */
typedef struct ts_graph_plan {
  int n_values;
  int64_t *offset;           /* per value: byte offset in the arena, or -1
                                when the value has no arena storage of its
                                own (a graph input, a graph output, a
                                constant, an alias, unused) */
  int *alias_of;             /* per value: the value whose storage it shares
                                (a view, or an in-place result), else -1;
                                chains are resolved: alias_of never points
                                at an alias */
  int64_t arena_bytes;       /* the arena's size (64-byte aligned blocks) */
  int64_t lower_bound_bytes; /* the largest total of intermediates live at
                                once (after sharing) */
  int64_t total_bytes;       /* the sum of every intermediate's bytes */
} ts_graph_plan;

/* The number of values of g (value ids are 0 .. n - 1). */
int ts_graph_n_values(const ts_graph *g);
/* Plans g's memory into *out (freed with ts_graph_plan_clear): liveness
 * over the node order, then offsets by greedy placement (four orders tried,
 * the smallest arena kept), 64-byte aligned. TS_EINVAL naming the value
 * when a shape is unknown. */
int ts_graph_plan_memory(const ts_graph *g, ts_graph_plan *out, ts_error *err);
/* Frees what p holds and zeroes it (safe on a zeroed plan). */
void ts_graph_plan_clear(ts_graph_plan *p);
/* ts_graph_execute with every intermediate at its planned offset in one
 * arena (filled with a non-zero byte pattern first, so that a kernel
 * reading storage it did not write shows), in-place calls given the same
 * buffer for input and output, and views whose storage is shared not run.
 * Checks the plan against the executor's results. */
int ts_graph_execute_planned(const ts_graph *g, const ts_graph_plan *plan,
                             ts_graph_exec_mode mode,
                             const ts_graph_tensor *inputs, int n_inputs,
                             ts_graph_tensor *outputs, int n_outputs,
                             ts_error *err);

/* ========================================================================
 * numpy files (graph/npz.c): .npz archives of .npy arrays (libzip)
 * ======================================================================== */

typedef struct ts_graph_npz ts_graph_npz;
/* Reads every array of an .npz file (stored or deflated entries; C order;
 * dtypes float16/32/64, int8..64, uint8..64, bool). On success *out owns
 * the arrays (free with ts_graph_npz_free); malformed files give TS_EINVAL
 * naming the entry. */
int ts_graph_npz_read(const char *path, ts_graph_npz **out, ts_error *err);
/* Points t at the array named `name` (data owned by z). TS_ENOTFOUND when
 * absent (the message lists the names present). */
int ts_graph_npz_find(const ts_graph_npz *z, const char *name,
                      ts_graph_tensor *t, ts_error *err);
void ts_graph_npz_free(ts_graph_npz *z);
/* Writes tensors (named by their name fields) as an .npz file. */
int ts_graph_npz_write(const char *path, const ts_graph_tensor *tensors, int n,
                       ts_error *err);

/* ========================================================================
 * Compile (graph/compile.c)
 * ======================================================================== */

typedef struct ts_db ts_db;

/* What ts_graph_compile needs besides the graph. */
/* A user's C function run instead of a task's kernel (`compile --extern`).
 * It has the kernels' signature, int32_t SYMBOL(void *const *args, void
 * *rt): args are the task function's parameters in their order (dense,
 * row-major, 64-byte aligned), rt the model's thread pool for
 * ts_rt_parallel_for; 0 means success. Every call of the task runs it. */
typedef struct ts_graph_extern {
  const char *key;    /* the task's hash, or the name of a call node of it */
  const char *path;   /* a C source (.c), an object (.o) or an archive (.a) */
  const char *symbol; /* the function's name */
} ts_graph_extern;

/* Who runs a task that a vendor library can run (see graph/dispatch.c):
 * the tuned (or default) kernel, the vendor library (oneDNN), or the faster
 * of the two by the tuning database's measurements. */
typedef enum ts_graph_dispatch {
  TS_DISPATCH_TUNED = 0,
  TS_DISPATCH_VENDOR = 1,
  TS_DISPATCH_BEST = 2,
} ts_graph_dispatch;

typedef struct ts_graph_compile_options {
  const char *output;      /* path of the shared library to write */
  const char *target;      /* target string (NULL: "llvm", this machine) */
  ts_db *db;               /* tuning database (NULL: default schedules) */
  int build_threads;       /* kernels built at once (<= 0: online cores) */
  const char *runtime_dir; /* folder holding libtessera_rt.so: linked
                              against, and the library's run path */
  const char *cc;          /* C compiler driver (NULL: "cc") */
  const char *model_name;  /* name in the library's info (NULL: graph's) */
  /* Only for the tuning hint of the warning: the model file and the
   * --input-shape and --dim strings it was imported with (may be NULL /
   * 0). */
  const char *model_path;
  const char *const *input_shapes;
  int n_input_shapes;
  const char *const *dims;
  int n_dims;
  ts_graph_dispatch dispatch;     /* default TS_DISPATCH_TUNED */
  const ts_graph_extern *externs; /* user functions replacing kernels */
  int n_externs;
  /* 0: each task's best record. k > 0: its record of rank k in the
   * database's order (ts_db_top_k: confirmed records first), or its last
   * when it has fewer: the variants an in-model confirmation times. */
  int rank;
  /* Link the vendor library and run the kernels on its thread team even
   * when no task calls it (a model that calls it runs every kernel there):
   * an in-model confirmation's variants all run on the same threads. */
  bool vendor_pool;
  /* Run every stage of every kernel at run time: no stage computed from
   * constants alone (a weight packed into a kernel's layout) is run ahead
   * of time into the library (ts_func_hoist_const). */
  bool no_prepack;
} ts_graph_compile_options;

/* One distinct task as compiled. */
typedef struct ts_graph_compile_task {
  char hash[33];       /* the task's identity in the tuning database */
  char *name;          /* the function's name (malloc'd) */
  char *first_node;    /* the first call node's name (malloc'd) */
  int count;           /* calls of it in the graph */
  double flops;        /* per call */
  const char *source;  /* "db" (the best record), "default" (static),
                          "vendor" (a oneDNN call) or "extern" (a user's
                          function, --extern) */
  int64_t record_id;   /* the record used; 0 for "default" */
  double latency_s;    /* the record's median run time; NAN for "default" */
  char *fallback_note; /* why a record was not used (malloc'd), or NULL */
  char *dispatch_note; /* why the vendor call was chosen (malloc'd), or NULL */
  int length_loops;    /* a padded program's kernel: its loops cut to the
                          run-time length (0: it computes every position) */
  int prepacked;       /* buffers its kernel reads that were computed at
                          compile time from the call's constants (a
                          weight in the kernel's layout), per call */
  int64_t prepacked_bytes; /* their bytes in the library, all calls */
} ts_graph_compile_task;

/* What ts_graph_compile did. Times in milliseconds; import_ms and
 * passes_ms are the caller's to fill (compile starts from a graph after
 * the passes). */
typedef struct ts_graph_compile_report {
  char *target; /* canonical target string (malloc'd) */
  ts_graph_compile_task *tasks;
  int n_tasks;
  int n_calls;         /* kernel call sites in one run */
  int *call_task;      /* n_calls: the task (index into tasks) of each call, in
                          the library's kernel order (ts_model_kernel_name) */
  int64_t arena_bytes; /* the intermediate arena */
  int64_t lower_bound_bytes; /* the planner's lower bound (live-set peak) */
  int64_t total_bytes;       /* every intermediate in its own storage */
  int64_t constant_bytes;    /* weights in the library */
  int64_t library_bytes;     /* size of the written library */
  double import_ms, passes_ms;
  double plan_ms, lookup_ms, codegen_ms, link_ms;
  double prepack_ms; /* running the kernels' constant stages */
  char *warning;     /* one message for people, or NULL: tasks without a
                        usable record and the command that tunes them */
} ts_graph_compile_report;

/* Compiles g (after the passes: call_tir nodes and view operators) into a
 * shared library at o->output that implements include/tessera/model.h.
 * Each distinct task gets the best record of the tuning database for
 * exactly this target (its trace replayed), or the default schedule when
 * there is none or the record cannot be used (the report says which and
 * why; nothing is fatal about a bad record). Kernels are built in parallel,
 * intermediates are placed in one arena by the memory planner, weights go
 * into the library as one blob, and the system C compiler links it all
 * against libtessera_rt. A graph operator other than a view (Reshape,
 * Flatten, Squeeze, Unsqueeze, Identity, Dropout) is refused with
 * TS_EUNSUPPORTED naming the node. The library is written under a
 * temporary name and renamed, so on failure nothing is left at o->output.
 * report (may be NULL) is filled; clear it with
 * ts_graph_compile_report_clear. */
int ts_graph_compile(const ts_graph *g, const ts_graph_compile_options *o,
                     ts_graph_compile_report *report, ts_error *err);
/* Compiles the padded graphs gs[0..n) of one model (ts_graph_import_padded
 * at ascending sizes of its dynamic dimension) into one library at
 * o->output: each graph's program, and a C ABI that serves every size from
 * 1 to the largest (ts_model_set_dim: the smallest program whose size
 * holds it runs, on inputs padded with zeros; outputs cut back). The
 * largest size is the generic program of the range. reports[b] receives
 * graph b's compile. */
#define TS_GRAPH_MAX_IO 64
int ts_graph_compile_padded(const ts_graph *const *gs, int n,
                            const ts_graph_compile_options *o,
                            ts_graph_compile_report *reports, ts_error *err);
/* Frees what a report holds and zeroes it (import_ms and passes_ms too). */
void ts_graph_compile_report_clear(ts_graph_compile_report *r);
/* Where libtessera_rt.so is for the program running: the folder of
 * /proc/self/exe when it holds the library, else its ../lib. Writes the
 * folder into buf; TS_ENOTFOUND naming both places when neither holds it. */
int ts_graph_runtime_dir(char *buf, size_t size, ts_error *err);

#endif /* TESSERA_GRAPH_H */
