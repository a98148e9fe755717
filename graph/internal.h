/*
 * internal.h — the graph IR's structs and the helpers shared by the files of
 * graph/: value and node construction, attribute lookup, the constant
 * store, node-list rebuilding for passes, and the reference kernels that
 * constant folding and the executor share. Private to graph/.
 */
#ifndef TESSERA_GRAPH_INTERNAL_H
#define TESSERA_GRAPH_INTERNAL_H

#include "graph/graph.h"
#include "tir/alloc.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum gr_attr_kind {
  GR_ATTR_INT,
  GR_ATTR_FLOAT,
  GR_ATTR_STRING,
  GR_ATTR_INTS,
  GR_ATTR_FLOATS,
} gr_attr_kind;

typedef struct gr_attr {
  const char *name;
  gr_attr_kind kind;
  int64_t i;      /* GR_ATTR_INT */
  double f;       /* GR_ATTR_FLOAT */
  const char *s;  /* GR_ATTR_STRING */
  int n;          /* entries of ints/floats */
  int64_t *ints;  /* GR_ATTR_INTS */
  double *floats; /* GR_ATTR_FLOATS */
} gr_attr;

typedef struct gr_value {
  const char *name;
  ts_dtype dtype;
  int ndim;                   /* -1: rank unknown */
  int64_t shape[TS_MAX_DIMS]; /* -1: dimension unknown */
  const char *layout;         /* "" when it has no meaning */
  int producer;               /* node index, -1 for inputs and constants */
  int64_t const_off;          /* offset in the constant store, or -1 */
  bool is_input;              /* a graph input */
  const char **sym; /* symbolic dimensions (arena; NULL entries or NULL:
                       the sizes are constants) */
} gr_value;

typedef struct gr_node {
  ts_graph_node_kind kind;
  const char *op;   /* op type, "call_tir" for calls */
  const char *name; /* unique within the graph */
  int *inputs;      /* value ids; -1 for an omitted optional input */
  int n_inputs;
  int *outputs; /* value ids */
  int n_outputs;
  gr_attr *attrs;
  int n_attrs;
  ts_func *func; /* TS_GRAPH_CALL: owned by the graph's function list */
} gr_node;

struct ts_graph {
  ts_arena *arena; /* names, attributes, node arrays */
  char *name;
  gr_value *values; /* malloc'd, append-only */
  int n_values, cap_values;
  gr_node *nodes; /* malloc'd, topological order */
  int n_nodes, cap_nodes;
  int *inputs, n_inputs; /* arena */
  int *outputs, n_outputs;
  uint8_t *consts; /* the constant store: one malloc'd buffer */
  size_t consts_len, consts_cap;
  ts_func **funcs; /* functions owned by call nodes */
  int n_funcs, cap_funcs;
  int opset;
  int name_counter;     /* for fresh node and value names */
  bool keep_nchw;       /* ts_graph_set_layout(g, "nchw"): no layout pass */
  bool no_winograd;     /* ts_graph_set_winograd(g, false) */
  int winograd_tile;    /* ts_graph_set_winograd_tile: 2, 4, 0 auto */
  bool input_nhwc;      /* ts_graph_set_io_layout: 4-D inputs given NHWC */
  bool output_nhwc;     /* ... 4-D outputs returned NHWC */
  int vector_lanes;     /* ts_graph_set_target: float32 lanes of the target's
                           vectors (0: this host's, found when needed) */
  int vector_registers; /* ... and its vector registers (with the lanes) */
  bool amx_int8;        /* ... and whether it has AMX-INT8 (with the lanes) */
  const char *target;   /* ... the target string (NULL: this host) */
  struct gr_quant_setup *quant; /* ts_graph_set_quantization (quantize.c) */
  int quant_int8, quant_float;  /* products the quantize pass converted/kept */
  struct gr_pet_setup *pet;     /* ts_graph_set_pet (pet.c) */
  struct gr_block_setup *block; /* blocked layouts (block.c) */
  struct gr_wino_setup *wino;   /* Winograd by measurement (winograd.c) */
  bool winograd_any; /* a candidate's graph: the forced tile whatever the
                        image's size (winograd.c) */
  bool oom;          /* storage the graph needed could not be allocated */
  int passes_run;    /* pipeline passes already run (pipeline.c): a second
                        ts_graph_run_passes continues after them */
  /* symbols: named dynamic dimensions given a size at import (arena) */
  const char *sym_names[TS_MAX_DIMS];
  int64_t sym_sizes[TS_MAX_DIMS];
  int n_syms;
  /* an input has a named dynamic dimension, whatever size it got: the
   * passes must not make the graph's structure depend on the size (the
   * symbolic form compares imports at several sizes) */
  bool named_dims;
};
typedef struct gr_quant_setup gr_quant_setup;
void gr_quant_setup_free(gr_quant_setup *q);
/* Whether the quantize pass leaves operator `op` (Conv, MatMul) float32:
 * no quantization set up, or --keep-float op (quantize.c). */
bool gr_quant_keeps_float(const ts_graph *g, const char *op);
typedef struct gr_pet_setup gr_pet_setup;
void gr_pet_setup_free(gr_pet_setup *p);
/* Tasks a pass built on the side, with owned copies of their functions,
 * names and vendor descriptions (task_set.c); zero-initialised empty. */
typedef struct gr_task_set {
  ts_graph_task *tasks;
  int n, cap;
} gr_task_set;
/* Adds a copy of t named `name`, or adds its calls to the task of the
 * same hash; TS_ENOMEM. */
int gr_task_set_add(gr_task_set *s, const ts_graph_task *t, const char *name);
void gr_task_set_clear(gr_task_set *s); /* empties it */
void gr_task_set_free(gr_task_set *s);  /* and frees its array */
/* Appends one formatted line (and a newline) to a pass's log (*log, *len
 * bytes of *cap, NUL-terminated); a line that cannot be stored is dropped
 * (task_set.c). */
void gr_log_vappend(char **log, size_t *len, size_t *cap, const char *fmt,
                    va_list ap);
/* The canonical name of a target (NULL: this host, "llvm"), the one the
 * tuning database files records under, malloc'd into *out. */
int gr_canonical_target(const char *target, char **out, ts_error *err);
typedef struct gr_block_setup gr_block_setup;
typedef struct gr_wino_setup gr_wino_setup;
void gr_wino_setup_free(gr_wino_setup *s);
void gr_block_setup_free(gr_block_setup *s);
/* The block pass's mode from a layout name ("blocked", "auto"; any other
 * turns it off); TS_ENOMEM. */
int gr_block_set_mode(ts_graph *g, const char *layout);

/* ---- ir.c ---- */
/* Out of memory. The graph's storage (values, nodes, node lists, owned
 * functions, the arena) never aborts: a value or node that cannot be added
 * is refused (TS_ENOMEM, NULL) and marks the graph failed. Code that can
 * hand a failure back does; a pass that cannot drops what it could not
 * store and goes on, and the public function that started the work
 * (gr_alloc_check) then returns TS_ENOMEM. A failed graph is refused by
 * every later pass and is to be freed. */
bool gr_failed(const ts_graph *g);
/* TS_ENOMEM with "WHAT: out of memory" when g (may be NULL) failed or an
 * allocation failed on this thread since `failures` (a ts_alloc_failures
 * value taken before the work), else rc. */
int gr_alloc_check(const ts_graph *g, unsigned long failures, int rc,
                   ts_error *err, const char *what);
/* Appends a value; returns its id (TS_ENOMEM when out of memory). Rank
 * unknown, no constant. */
int gr_value_add(ts_graph *g, const char *name, ts_dtype t, int ndim,
                 const int64_t *shape);
/* A fresh value named after base ("base_1", ...). */
int gr_value_fresh(ts_graph *g, const char *base, ts_dtype t, int ndim,
                   const int64_t *shape);
/* A constant value holding a copy of data (nbytes = elems * elem bytes);
 * returns the id, or TS_ENOMEM when out of memory. */
int gr_const_add(ts_graph *g, const char *name, ts_dtype t, int ndim,
                 const int64_t *shape, const void *data);
/* Reserves an uninitialized constant of the given shape; its storage is
 * gr_const_data(g, id) (valid until the next constant is added). The id,
 * or TS_ENOMEM. */
int gr_const_reserve(ts_graph *g, const char *name, ts_dtype t, int ndim,
                     const int64_t *shape);
void *gr_const_data(const ts_graph *g, int value);
bool gr_is_const(const ts_graph *g, int value);
int64_t gr_value_elems(const gr_value *v); /* -1 when not fully known */
/* The structural hash of a node list (hash.c): ops, attributes, shapes,
 * wiring and constant bytes as ts_graph_hash, the values it reads from
 * outside by identity, and which values are its outputs. {0, 0} when out of
 * memory. */
ts_hash128 gr_nodes_hash(const ts_graph *g, const gr_node *nodes, int n,
                         const int *outs, int n_outs);
/* The oneDNN level the tuning database holds for function f on target
 * (compile.c): the one measured side by side with the confirmed best in
 * the most rounds, else one measured on its own (side_rounds 0). Only its
 * numbers are filled (no strings); false when there is none. */
struct ts_db_baseline;
bool gr_onednn_level(struct ts_db *db, const ts_func *f, const char *target,
                     struct ts_db_baseline *out);
/* The latency of task t on target: its best record's, or oneDNN's when
 * the task has a vendor call that the database measured faster (as
 * `compile --dispatch best` decides). NAN when it has no record (pet.c). */
struct ts_graph_task;
double gr_task_seconds(struct ts_db *db, const char *target,
                       const struct ts_graph_task *t);
/* Nodes nodes[0..n) of g (topological; outs the values they compute) as a
 * graph of its own: the values they read from outside are its inputs (a
 * constant stays a constant, a value keeps its layout), outs its outputs.
 * NULL when out of memory (pet.c). */
ts_graph *gr_candidate_graph(const ts_graph *g, const gr_node *nodes, int n,
                             const int *outs, int n_outs);
/* Evaluates node n, whose inputs are all constants, with the reference
 * kernels, and replaces every use of its outputs in g's node list by new
 * constants (fold.c). */
int gr_fold_node(ts_graph *g, gr_node *n, ts_error *err);
/* Folds every node whose inputs are all constants (only those whose first
 * output `only` marks, by value id; NULL: all), without running shape
 * inference again (fold.c). */
int gr_fold_marked(ts_graph *g, const uint8_t *only, ts_error *err);

/* Appends a node built from the arguments (copied into the arena); NULL
 * when out of memory. */
gr_node *gr_node_add(ts_graph *g, const char *op, const char *name,
                     const int *inputs, int n_inputs, const int *outputs,
                     int n_outputs);
/* A fresh node name from base. */
const char *gr_fresh_name(ts_graph *g, const char *base);

/* The name (a prefix: gr_fresh_name adds a number) of the positions
 * constants a padded graph's masks compare with the length (dynamic.c). */
#define GR_PAD_POSITIONS "pad_positions"
/* Cuts the loops over a padded program's dynamic dimension in the
 * scheduled kernel f to the run-time length (dyn_loops.c): sym_axes[i] are
 * parameter i's axes along the dimension, positions[i] whether it is a
 * mask's positions. When some loop is cut (*n_cut > 0), f gets one more
 * parameter, float32 [1] holding the length. */
int gr_loops_to_length(ts_func *f, const unsigned *sym_axes,
                       const bool *positions, int n_params, int *n_cut,
                       ts_error *err);
/* Memory in the graph's arena; NULL when out of memory, the graph then
 * marked failed (gr_failed). */
void *gr_alloc(ts_graph *g, size_t size);
void gr_node_set_attr(ts_graph *g, gr_node *n, gr_attr a);
const gr_attr *gr_attr_find(const gr_node *n, const char *name);
int64_t gr_attr_int(const gr_node *n, const char *name, int64_t dflt);
double gr_attr_float(const gr_node *n, const char *name, double dflt);
const char *gr_attr_string(const gr_node *n, const char *name,
                           const char *dflt);
/* Whether every entry of INTS attribute `name` is v (true when absent). */
bool gr_attr_ints_all(const gr_node *n, const char *name, int64_t v);
/* The ints of an INTS attribute (count in *n), or NULL with *n = 0. */
const int64_t *gr_attr_ints(const gr_node *n, const char *name, int *count);
/* A minimum s-t cut (mincut.c): a directed graph of n vertices, arcs
 * with int64 capacities (a very large one for "never cut"); solve returns
 * the cut's weight (-1 when an allocation failed) and marks the vertices
 * on the source side of a minimum cut. */
typedef struct gr_cut gr_cut;
gr_cut *gr_cut_new(int n);
void gr_cut_edge(gr_cut *c, int from, int to, int64_t cap);
int64_t gr_cut_solve(gr_cut *c, int s, int t, bool *source_side);
void gr_cut_free(gr_cut *c);

/* Recomputes each value's producer from the node list. */
void gr_reindex(ts_graph *g);
/* Replaces every use of value `from` (node inputs, graph outputs) by `to`. */
void gr_replace_uses(ts_graph *g, int from, int to);
/* Number of uses of each value (node inputs + graph outputs); malloc'd,
 * NULL when out of memory. */
int *gr_use_counts(const ts_graph *g);

/* A node list under construction, for passes that rewrite the graph: the
 * old node list stays valid until gr_list_commit swaps it in. */
typedef struct gr_list {
  gr_node *nodes;
  int n, cap;
  bool oom; /* a node could not be pushed */
} gr_list;
/* Appends a copy of n; out of memory drops it and marks the list. */
void gr_list_push(gr_list *l, const gr_node *n);
/* Makes l the graph's node list (the old array is freed), reindexes. A
 * list that lost a node is freed instead, the graph marked failed:
 * TS_ENOMEM. */
int gr_list_commit(ts_graph *g, gr_list *l);
/* A node (not yet in any list) with the given op and wiring. */
gr_node gr_node_make(ts_graph *g, const char *op, const char *name,
                     const int *inputs, int n_inputs, const int *outputs,
                     int n_outputs);
/* Takes ownership of f for a call node; false (f still the caller's, the
 * graph failed) when out of memory. */
bool gr_own_func(ts_graph *g, ts_func *f);

/* Moves each per-channel scale of a channels-last conv's input onto its
 * weights (scale_fold.c; the fuse pass runs it first). */
int gr_fold_channel_scales(ts_graph *g, ts_error *err);

/* ---- layout.c, fuse.c ---- */
/* Whether the layout pass made n channels-last (attribute layout="NHWC"):
 * a Conv reads [N, H, W, C] data and [KH, KW, C/group, CO] weights and
 * writes [N, OH, OW, CO]; a pool reads and writes [N, H, W, C]. */
bool gr_node_channels_last(const gr_node *n);
/* The float32 lanes of the graph's target's vectors (this host's when no
 * target was set). */
int gr_target_lanes(ts_graph *g);
/* ... and its vector registers. */
int gr_target_registers(ts_graph *g);
/* Whether node n is a channel-blocked Conv (layout "NCHWc", block.c). */
bool gr_node_blocked(const gr_node *n);
/* Conv or its int8 form ConvInteger; MatMul or MatMulInteger. */
bool gr_op_is_conv(const char *op);
bool gr_op_is_matmul(const char *op);
/* QuantizeLinear or DequantizeLinear. */
bool gr_op_is_quant(const char *op);
/* The output-channel block of a channels-last Conv's weights (the layout
 * pass's): its weights are [CO/B, KH, KW, CI, B] instead of [KH, KW, CI,
 * CO]; 0 when they are not blocked. */
int64_t gr_conv_weight_block(const gr_node *n);
/* The columns per block of a MatMul whose constant weights the layout pass
 * blocked: [N/B, K, B] instead of [K, N]; 0 when they are not blocked. */
int64_t gr_matmul_weight_block(const gr_node *n);
/* Whether function parameter p can stand for graph value val: the same
 * dtype and element count (the parameter views the value's bytes in
 * row-major order, in its own shape: fuse.c splits the channel axis of a
 * group anchored by a blocked conv and merges the N, H, W axes of one
 * anchored by a pointwise conv). */
bool gr_param_fits_value(const ts_buffer *p, const gr_value *val);
/* Whether op is one of the elementwise operators fusion takes in. */
bool gr_is_elementwise_op(const char *op);

/* ---- shape.c and lower_more.c: operators lowered into the core set ---- */
/* Split's part sizes along *axis (n->n_outputs of them): 0, -1 when they
 * do not split the axis, -2 when the sizes are not constants yet. */
int gr_split_sizes(const ts_graph *g, const gr_node *n, int64_t *sizes,
                   int *axis);
/* Pad's begin pads (rank entries) then end pads: 0, -1 malformed, -2 not
 * constants yet. */
int gr_pad_amounts(const ts_graph *g, const gr_node *n, int64_t *pads);
/* Resize's output shape and, per axis, the scale its coordinates map by:
 * 0, -2 when the scales or sizes are not constants yet, else an error
 * naming what is not supported. */
int gr_resize_plan(const ts_graph *g, const gr_node *n, int64_t *out,
                   double *scale, ts_error *err);
/* Rewrites the operators above (and Trilu, the Reduce variants,
 * Instance/GroupNormalization, DepthToSpace, SpaceToDepth) at node n into
 * core nodes through emit; see lower_more.c. 1 when n is not one of them. */
typedef struct gr_lowering gr_lowering;
/* The operators only lowering handles (no reference kernel: Split, Pad,
 * Resize, Einsum, ...); shape inference knows them. */
bool gr_lowered_only(const char *op);
/* Einsum's equation over its operands' shapes: labels per operand (an
 * ellipsis as '0'.. from the right), the output's labels and shape. */
typedef struct gr_einsum {
  int n_in, rank[2], n_out;
  char in[2][TS_MAX_DIMS], out[TS_MAX_DIMS];
  int64_t out_shape[TS_MAX_DIMS];
  int64_t size[128]; /* per label character, -1: absent */
} gr_einsum;
/* 0, or -1 with the reason (what is malformed or not supported) in why. */
int gr_einsum_parse(const ts_graph *g, const gr_node *n, gr_einsum *e,
                    char *why, size_t size);
int gr_lower_more(gr_lowering *l, const gr_node *n);
/* A recurrent node (LSTM, GRU, RNN) read and checked against its inputs'
 * shapes (lower_rnn.c): 0; -2 when shapes are not known yet; -1 malformed
 * or -3 not supported, with the reason in why. */
typedef struct gr_rnn {
  int gates, n_act;      /* 4 and 3 (LSTM), 3 and 2 (GRU), 1 and 1 (RNN) */
  int64_t S, B, I, H;    /* sequence, batch, input and hidden sizes */
  int nd;                /* directions */
  bool reverse;          /* direction "reverse" */
  int layout;            /* 0: X [S, B, I]; 1: X [B, S, I] */
  bool lbr;              /* GRU's linear_before_reset */
  double clip;           /* 0: none */
  const char *act[2][3]; /* per direction: f, g, h */
} gr_rnn;
int gr_rnn_parse(const ts_graph *g, const gr_node *n, gr_rnn *r, char *why,
                 size_t size);

/* The tessera dtype of ONNX TensorProto dtype code `code` (false: none),
 * and back (-1: none). */
bool gr_onnx_dtype(int64_t code, ts_dtype *t);
int gr_onnx_dtype_code(ts_dtype t);

/* ---- upgrade.c ---- */
/* Rewrites node n of an opset-7..12 graph into its opset-13 form (Slice's
 * and Pad's attributes as inputs, Upsample and opset-10 Resize as Resize). */
int gr_upgrade_node(ts_graph *g, gr_node *n, ts_error *err);

/* ---- ew_ops.c ---- */
/* The elementwise operators past the core arithmetic (activations, math,
 * variadic Min/Max/Sum/Mean, comparisons, logic, Where): NULL when op is
 * not one of them. */
typedef struct gr_ew_op gr_ew_op;
const gr_ew_op *gr_ew_lookup(const char *op);
/* The i-th operator of the table, NULL past its end. */
const char *gr_ew_name(size_t i);
/* Their shape rule: operands broadcast; a bool result for comparisons and
 * logic. */
int gr_ew_infer(ts_graph *g, gr_node *n, const gr_ew_op *op, ts_error *err);
/* The reference value from k operands (converted to double). */
double gr_ew_ref(const gr_ew_op *op, const gr_node *n, const double *x, int k);
/* The TIR form from k operand expressions in compute dtype ct. */
ts_expr *gr_ew_tir(const gr_ew_op *op, ts_arena *a, const gr_node *n,
                   ts_expr **x, int k, ts_dtype ct);
/* Whether input k is a bool operand that only selects (And, Or, Xor, Not,
 * Where's condition). */
bool gr_ew_bool_operand(const gr_ew_op *op, int k);

/* ---- dispatch.c ---- */
/* The post-ops a vendor call takes at most (runtime/vendor/dnnl.c). */
#define GR_VENDOR_MAX_POST 8
/* Whether a vendor library can run the fused group members[0..n) (a Conv
 * or MatMul and the elementwise operators after it): if so, its
 * description for the vendor call goes into buf (see dispatch.c); params
 * are the group function's parameters (graph values), its output the
 * argument after them. */
bool gr_vendor_describe(const ts_graph *g, const int *members, int n,
                        const int *params, int n_params, char *buf,
                        size_t size);

/* ---- symbolic.c, pipeline.c ---- */
/* The import at the given sizes of the named symbols (every other option
 * as in opts), then the passes up to `after` ("none": none); an error
 * names the sizes. */
int gr_import_at(const char *path, const ts_graph_import_options *opts,
                 const char *after, int n_syms, const char *const *names,
                 const int64_t *sizes, ts_graph **out, ts_error *err);
/* NULL when g and h have the same nodes and values (names, ranks, dtypes),
 * else what differs. */
const char *gr_same_structure(const ts_graph *g, const ts_graph *h);
/* The passes after the one named `done`, up to stop_after (NULL: all). */
int gr_run_passes_after(ts_graph *g, const char *done, const char *stop_after,
                        ts_error *err);

/* ---- shape.c ---- */
/* Infers output dtypes and shapes of one node from its inputs; fills the
 * output values. Unknown ops: TS_EUNSUPPORTED naming op, node and opset; a
 * node wired to a value id that is an error code (a value its pass could
 * not add): TS_ENOMEM. */
int gr_infer_node(ts_graph *g, gr_node *n, ts_error *err);
/* Whether shape inference knows the op type. */
bool gr_op_known(const char *op);
/* Broadcast shape of two shapes (numpy rules); false when incompatible. */
bool gr_broadcast(const int64_t *a, int na, const int64_t *b, int nb,
                  int64_t *out, int *nout);
/* Explicit begin/end pads (2 * nsp entries) of a conv or pool window from
 * its pads/auto_pad attributes; -1 when they are malformed. */
int gr_resolve_pads(const gr_node *n, int nsp, const int64_t *in_sp,
                    const int64_t *kernel, const int64_t *strides,
                    const int64_t *dil, int64_t *pads);

/* ---- kernels.c: reference kernels over host tensors ---- */
typedef struct gr_tensor {
  ts_dtype dtype;
  int ndim;
  int64_t shape[TS_MAX_DIMS];
  void *data;
} gr_tensor;
int64_t gr_tensor_elems(const gr_tensor *t);
/* Computes node n's outputs from ins (n->n_inputs entries, NULL for an
 * omitted input); outs are preallocated with the inferred shapes. */
int gr_kernel_run(const ts_graph *g, const gr_node *n, const gr_tensor *ins,
                  gr_tensor *outs, ts_error *err);
/* Whether the reference kernels evaluate op (the operators that only
 * lowering rewrites, such as Split or Resize, have none). */
bool gr_kernel_folds(const char *op);

/* The layout name of a rank for conv-style values. */
const char *gr_layout_for(int ndim, bool image);

#endif /* TESSERA_GRAPH_INTERNAL_H */
