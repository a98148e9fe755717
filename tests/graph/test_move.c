/*
 * test_move.c — the data-movement operators as calls of PrimFuncs: graphs
 * built with the IR API (Gather on every axis with int32, int64, negative,
 * scalar and constant indices; Cast between every pair of the importer's
 * dtypes on values that round, overflow and are NaN; Concat on several axes
 * and of up to the parameter limit of inputs; Slice with negative steps,
 * several axes and omitted axes; integer, bool and float16 transposes; a
 * Cast with an elementwise epilogue; integer arithmetic with division by
 * zero and overflow) are run by the reference executor
 * before fusion (reference kernels) and after it (the call nodes in tir's
 * interpreter and compiled), and must give the same elements; reductions
 * over every axis, matmuls with a vector operand, 1-D and 3-D
 * convolutions and pools, a BatchNormalization whose parameters are not
 * constants and float16/bfloat16/float64 arithmetic agree up to float
 * rounding. An out-of-range Gather
 * index, which the reference kernel refuses, is clamped by the call. After the
 * whole pipeline the small models hold no graph operator but views.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "util.h"

#include "graph/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- graph building ---- */

static int input(ts_graph *g, const char *name, ts_dtype t, int ndim,
                 const int64_t *shape) {
  int v = gr_value_add(g, name, t, ndim, shape);
  g->values[v].is_input = true;
  return v;
}

static int out_value(ts_graph *g, const char *base) {
  return gr_value_fresh(g, base, TS_FLOAT32, -1, NULL);
}

static int const_i64(ts_graph *g, const int64_t *v, int64_t n) {
  return gr_const_add(g, gr_fresh_name(g, "c"), TS_INT64, 1, &n, v);
}

static gr_node *node(ts_graph *g, const char *op, const int *ins, int n_ins,
                     int out) {
  return gr_node_add(g, op, gr_fresh_name(g, op), ins, n_ins, &out, 1);
}

static void attr_int(ts_graph *g, gr_node *n, const char *name, int64_t v) {
  gr_attr a = {0};
  a.name = name;
  a.kind = GR_ATTR_INT;
  a.i = v;
  gr_node_set_attr(g, n, a);
}

static void attr_ints(ts_graph *g, gr_node *n, const char *name,
                      const int64_t *v, int count) {
  gr_attr a = {0};
  a.name = name;
  a.kind = GR_ATTR_INTS;
  a.n = count;
  a.ints = (int64_t *)v;
  gr_node_set_attr(g, n, a);
}

/* Makes the inputs (every value marked is_input, in order) and outputs
 * the graph's. */
static void finish(ts_graph *g, const int *outs, int n_outs) {
  int n_in = 0;
  g->inputs = ts_arena_alloc(g->arena, sizeof(int) * ((size_t)g->n_values + 1));
  for (int v = 0; v < g->n_values; v++)
    if (g->values[v].is_input) g->inputs[n_in++] = v;
  g->n_inputs = n_in;
  g->outputs = ts_arena_alloc(g->arena, sizeof(int) * ((size_t)n_outs + 1));
  memcpy(g->outputs, outs, sizeof(int) * (size_t)n_outs);
  g->n_outputs = n_outs;
  gr_reindex(g);
}

/* ---- running ---- */

/* Interesting values: halves, rounding cases, overflow of every narrower
 * type, signed zero, infinities and NaN. */
static const double specials[] = {
    0.0,    1.0,          -1.0,   2.5,      -2.5,      0.7,   -0.7,   127.0,
    128.0,  -128.0,       -129.0, 255.0,    256.0,     300.7, -300.7, 65504.,
    65520., 1e5,          -1e5,   3e9,      -3e9,      1e19,  -1e19,  -0.0,
    1e-8,   1.0009765625, 33.0,   INFINITY, -INFINITY, NAN};
#define N_SPECIALS ((int)(sizeof specials / sizeof specials[0]))

/* Fills input i: integers in [lo, lo + span) when span > 0, else the
 * special values (converted as the reference kernels convert). */
typedef struct fill {
  int64_t lo, span;
} fill;

static void make_inputs(const ts_graph *g, const fill *fills,
                        ts_graph_tensor *ins) {
  for (int i = 0; i < ts_graph_n_inputs(g); i++) {
    ts_graph_value_info v = ts_graph_input(g, i);
    ins[i] = (ts_graph_tensor){v.name, v.dtype, v.ndim, {0}, NULL};
    int64_t n = 1;
    for (int d = 0; d < v.ndim; d++) n *= (ins[i].shape[d] = v.shape[d]);
    ins[i].data = calloc((size_t)n + 1, ts_dtype_elem_bytes(v.dtype));
    for (int64_t k = 0; k < n; k++) {
      double x = fills && fills[i].span
                     ? (double)(fills[i].lo + (k * 7 + 3) % fills[i].span)
                     : specials[(k + i) % N_SPECIALS];
      ts_host_set(ins[i].data, v.dtype, k, x);
    }
  }
}

static void free_tensors(ts_graph_tensor *t, int n) {
  for (int i = 0; i < n; i++) free(t[i].data);
}

static int64_t elems(const ts_graph_tensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
  return n;
}

/* Element-exact comparison (NaN equals NaN), or with ts_host_compare's
 * tolerance when !exact. */
static void assert_equal_elements(const ts_graph_tensor *want,
                                  const ts_graph_tensor *got, int n,
                                  const char *what, bool exact) {
  for (int i = 0; i < n; i++) {
    if (!exact) {
      int64_t first;
      double max_err;
      if (ts_host_compare(got[i].data, want[i].data, want[i].dtype,
                          elems(&want[i]), &first, &max_err))
        fail_msg("%s: output %d: element %lld differs (max error %g)", what, i,
                 (long long)first, max_err);
      continue;
    }
    assert_int_equal(want[i].ndim, got[i].ndim);
    assert_true(ts_dtype_eq(want[i].dtype, got[i].dtype));
    int64_t e = elems(&want[i]);
    assert_int_equal(e, elems(&got[i]));
    for (int64_t k = 0; k < e; k++) {
      double w = ts_host_get(want[i].data, want[i].dtype, k);
      double r = ts_host_get(got[i].data, got[i].dtype, k);
      if (!(w == r || (isnan(w) && isnan(r)))) {
        char b[32];
        fail_msg("%s: output %d (%s) element %lld: want %.17g, got %.17g", what,
                 i, ts_dtype_str(want[i].dtype, b), (long long)k, w, r);
      }
    }
  }
}

typedef void (*build_fn)(ts_graph *g);

/* The graph built by `build`, after the passes up to `after` (NULL: all). */
static ts_graph *built(build_fn build, const char *after) {
  ts_graph *g = ts_graph_new("move");
  build(g);
  ts_error err;
  if (ts_graph_run_passes(g, after, &err)) fail_msg("passes: %s", err.msg);
  return g;
}

/* Graph operators other than views after fusion. */
static int non_views(const ts_graph *g) {
  int n = 0;
  for (int i = 0; i < ts_graph_n_nodes(g); i++)
    if (ts_graph_node_kind_of(g, i) != TS_GRAPH_CALL &&
        strcmp(ts_graph_node_op(g, i), "Reshape"))
      n++;
  return n;
}

/* Runs the graph of `build` with the reference kernels (before lowering
 * and fusion) and fused (interpreted and compiled): equal elements
 * (exactly, or within float tolerance). The fused graph must hold
 * want_graph_ops graph operators other than views; returns its number of
 * calls. */
static int check_tol(build_fn build, const fill *fills, const char *what,
                     int want_graph_ops, bool exact) {
  ts_graph *ref = built(build, "cse"), *fused = built(build, NULL);
  assert_int_equal(non_views(fused), want_graph_ops);
  ts_error err;
  if (ts_graph_verify(fused, &err)) fail_msg("%s: verify: %s", what, err.msg);
  int n_in = ts_graph_n_inputs(ref), n_out = ts_graph_n_outputs(ref);
  ts_graph_tensor ins[64], want[96], got[96];
  assert_true(n_in <= 64 && n_out <= 96);
  make_inputs(ref, fills, ins);
  if (ts_graph_execute(ref, TS_GRAPH_INTERPRET, ins, n_in, want, n_out, &err))
    fail_msg("%s: reference: %s", what, err.msg);
  static const ts_graph_exec_mode modes[2] = {TS_GRAPH_INTERPRET,
                                              TS_GRAPH_COMPILE};
  for (int m = 0; m < 2; m++) {
    if (ts_graph_execute(fused, modes[m], ins, n_in, got, n_out, &err))
      fail_msg("%s: fused (%s): %s", what, m ? "compiled" : "interpreted",
               err.msg);
    char name[128];
    snprintf(name, sizeof name, "%s (%s)", what,
             m ? "compiled" : "interpreted");
    assert_equal_elements(want, got, n_out, name, exact);
    free_tensors(got, n_out);
  }
  int calls = ts_graph_count_op(fused, "call_tir");
  free_tensors(want, n_out);
  free_tensors(ins, n_in);
  ts_graph_free(ref);
  ts_graph_free(fused);
  return calls;
}

static int check_same(build_fn build, const fill *fills, const char *what,
                      int want_graph_ops) {
  return check_tol(build, fills, what, want_graph_ops, true);
}

/* ---- Gather ---- */

static void build_gather(ts_graph *g) {
  int64_t xs[3] = {4, 5, 6}, i0[2] = {2, 3}, i1[1] = {7}, i2[2] = {2, 2};
  int x = input(g, "x", TS_FLOAT32, 3, xs);
  int a = input(g, "idx0", TS_INT64, 2, i0);  /* axis 0: [-4, 4) */
  int b = input(g, "idx1", TS_INT32, 1, i1);  /* axis 1: [-5, 5) */
  int c = input(g, "idx2", TS_INT64, 2, i2);  /* axis 2 / -1: [-6, 6) */
  int s = input(g, "idx_s", TS_INT32, 0, xs); /* a scalar: -2 */
  int y = input(g, "y", TS_INT64, 1, i1 + 0); /* int64 data [7] */
  int outs[7];
  int ins[2] = {x, a};
  node(g, "Gather", ins, 2, outs[0] = out_value(g, "g0"));
  ins[1] = b;
  attr_int(g, node(g, "Gather", ins, 2, outs[1] = out_value(g, "g1")), "axis",
           1);
  ins[1] = c;
  attr_int(g, node(g, "Gather", ins, 2, outs[2] = out_value(g, "g2")), "axis",
           -1);
  ins[1] = s;
  attr_int(g, node(g, "Gather", ins, 2, outs[3] = out_value(g, "g3")), "axis",
           1);
  ins[0] = y, ins[1] = b; /* [7] gathered by [-5, 5) */
  node(g, "Gather", ins, 2, outs[4] = out_value(g, "g4"));
  ins[0] = x, ins[1] = s; /* scalar index of axis 0: a [5, 6] row */
  node(g, "Gather", ins, 2, outs[5] = out_value(g, "g5"));
  int64_t last = -1; /* a constant scalar index: an immediate */
  ins[1] = gr_const_add(g, "last", TS_INT64, 0, NULL, &last);
  attr_int(g, node(g, "Gather", ins, 2, outs[6] = out_value(g, "g6")), "axis",
           2);
  finish(g, outs, 7);
}

static void test_gather(void **state) {
  (void)state;
  fill f[6] = {{0, 0}, {-4, 8}, {-5, 10}, {-6, 12}, {-2, 1}, {-50, 100}};
  assert_int_equal(check_same(build_gather, f, "gather", 0), 7);
}

/* An index outside [-len, len): the reference kernel refuses it, the call
 * clamps it into [0, len). */
static void build_gather_out_of_range(ts_graph *g) {
  int64_t xs[1] = {4}, is[1] = {6};
  int ins[2] = {input(g, "x", TS_FLOAT32, 1, xs),
                input(g, "i", TS_INT64, 1, is)};
  int out = out_value(g, "g");
  node(g, "Gather", ins, 2, out);
  finish(g, &out, 1);
}

static void test_gather_out_of_range(void **state) {
  (void)state;
  ts_graph *ref = built(build_gather_out_of_range, "cse");
  ts_graph *fused = built(build_gather_out_of_range, NULL);
  assert_int_equal(non_views(fused), 0);
  float x[4] = {10, 11, 12, 13};
  int64_t idx[6] = {-100, -5, -4, -1, 4, 1000};
  ts_graph_tensor ins[2] = {{"x", TS_FLOAT32, 1, {4}, x},
                            {"i", TS_INT64, 1, {6}, idx}};
  ts_graph_tensor out[1];
  ts_error err;
  assert_int_equal(
      ts_graph_execute(ref, TS_GRAPH_INTERPRET, ins, 2, out, 1, &err),
      TS_ERANGE);
  assert_non_null(strstr(err.msg, "out of range"));
  static const float want[6] = {10, 10, 10, 13, 13, 13};
  for (int m = 0; m < 2; m++) {
    assert_int_equal(ts_graph_execute(fused,
                                      m ? TS_GRAPH_COMPILE : TS_GRAPH_INTERPRET,
                                      ins, 2, out, 1, &err),
                     TS_OK);
    assert_memory_equal(out[0].data, want, sizeof want);
    free(out[0].data);
  }
  ts_graph_free(ref);
  ts_graph_free(fused);
}

/* ---- Cast ---- */

/* The importer's Cast targets with their ONNX codes. */
static const struct {
  ts_dtype t;
  int onnx;
} cast_types[] = {{{TS_DT_FLOAT, 32, 1}, 1},  {{TS_DT_UINT, 8, 1}, 2},
                  {{TS_DT_INT, 8, 1}, 3},     {{TS_DT_INT, 32, 1}, 6},
                  {{TS_DT_INT, 64, 1}, 7},    {{TS_DT_BOOL, 1, 1}, 9},
                  {{TS_DT_FLOAT, 16, 1}, 10}, {{TS_DT_FLOAT, 64, 1}, 11},
                  {{TS_DT_BFLOAT, 16, 1}, 16}};
#define N_CAST ((int)(sizeof cast_types / sizeof cast_types[0]))

static void build_cast(ts_graph *g) {
  int64_t shape[2] = {3, N_SPECIALS};
  int outs[N_CAST * N_CAST], n = 0;
  for (int s = 0; s < N_CAST; s++) {
    char name[16];
    snprintf(name, sizeof name, "x%d", s);
    int x = input(g, name, cast_types[s].t, 2, shape);
    for (int t = 0; t < N_CAST; t++) {
      outs[n] = out_value(g, "cast");
      attr_int(g, node(g, "Cast", &x, 1, outs[n]), "to", cast_types[t].onnx);
      n++;
    }
  }
  finish(g, outs, n);
}

static void test_cast(void **state) {
  (void)state;
  /* every pair, identity casts included: one call each */
  assert_int_equal(check_same(build_cast, NULL, "cast", 0), N_CAST * N_CAST);
}

/* BERT's attention mask: Cast -> Sub -> Mul is one call. */
static void build_cast_epilogue(ts_graph *g) {
  int64_t shape[2] = {1, 16};
  int m = input(g, "mask", TS_INT64, 2, shape);
  int c = out_value(g, "cast");
  attr_int(g, node(g, "Cast", &m, 1, c), "to", 1);
  float one = 1, big = -10000;
  int k1 = gr_const_add(g, "one", TS_FLOAT32, 0, NULL, &one);
  int k2 = gr_const_add(g, "big", TS_FLOAT32, 0, NULL, &big);
  int s = out_value(g, "sub"), out = out_value(g, "mul");
  int in1[2] = {k1, c}, in2[2] = {s, k2};
  node(g, "Sub", in1, 2, s);
  node(g, "Mul", in2, 2, out);
  finish(g, &out, 1);
}

static void test_cast_epilogue(void **state) {
  (void)state;
  fill f[1] = {{0, 2}};
  assert_int_equal(check_same(build_cast_epilogue, f, "mask", 0), 1);
  ts_graph *g = built(build_cast_epilogue, NULL);
  const ts_func *fn = ts_graph_node_func(g, 0);
  assert_non_null(fn);
  assert_string_equal(ts_func_name(fn), "fused_cast_sub_mul");
  ts_graph_free(g);
}

/* ---- Concat ---- */

#define WIDE 31 /* a 31-input concat is a call; one more input is not */

static void build_concat(ts_graph *g) {
  int64_t sa[3] = {2, 3, 4}, sb[3] = {2, 1, 4}, sc[3] = {2, 2, 4};
  int64_t sd[3] = {2, 3, 1}, se[2] = {3, 2}, sw[2] = {1, 2};
  int a = input(g, "a", TS_FLOAT32, 3, sa),
      b = input(g, "b", TS_FLOAT32, 3, sb);
  int c = input(g, "c", TS_FLOAT32, 3, sc),
      d = input(g, "d", TS_FLOAT32, 3, sd);
  int e = input(g, "e", TS_INT64, 2, se);
  int w[WIDE + 1];
  for (int i = 0; i <= WIDE; i++) {
    char name[16];
    snprintf(name, sizeof name, "w%d", i);
    w[i] = input(g, name, TS_FLOAT32, 2, sw);
  }
  int outs[6];
  int i1[3] = {a, b, c}, i2[3] = {a, d, a}, i3[2] = {e, e};
  attr_int(g, node(g, "Concat", i1, 3, outs[0] = out_value(g, "c1")), "axis",
           1);
  attr_int(g, node(g, "Concat", i2, 3, outs[1] = out_value(g, "c2")), "axis",
           -1);
  attr_int(g, node(g, "Concat", i3, 2, outs[2] = out_value(g, "c3")), "axis",
           0);
  attr_int(g, node(g, "Concat", &b, 1, outs[3] = out_value(g, "c4")), "axis",
           0);
  attr_int(g, node(g, "Concat", w, WIDE, outs[4] = out_value(g, "c5")), "axis",
           1);
  attr_int(g, node(g, "Concat", w, WIDE + 1, outs[5] = out_value(g, "c6")),
           "axis", 0);
  finish(g, outs, 6);
}

static void test_concat(void **state) {
  (void)state;
  /* the 32-input concat stays a graph operator (the parameter limit) */
  assert_int_equal(check_same(build_concat, NULL, "concat", 1), 5);
}

/* ---- Slice ---- */

static void build_slice(ts_graph *g) {
  int64_t xs[3] = {6, 7, 8}, ys[1] = {9};
  int x = input(g, "x", TS_FLOAT32, 3, xs);
  int y = input(g, "y", TS_INT32, 1, ys);
  static const int64_t spec[][4][3] = {
      /* starts, ends, axes, steps (count in [3][2] ... see below) */
      {{5}, {-100}, {0}, {-2}},
      {{1, -2}, {100, 0}, {2, 1}, {3, -1}},
      {{1, 2}, {3, 7}, {0}, {0}},
      {{-1, 0, 8}, {-7, 7, -9}, {0, 1, 2}, {-1, 2, -3}},
  };
  static const int counts[] = {1, 2, 2, 3};
  static const bool has_axes[] = {true, true, false, true};
  int outs[5];
  for (int k = 0; k < 4; k++) {
    int n = counts[k];
    int ins[5] = {x, const_i64(g, spec[k][0], n), const_i64(g, spec[k][1], n),
                  -1, -1};
    int n_ins = 3;
    if (has_axes[k]) {
      ins[3] = const_i64(g, spec[k][2], n);
      ins[4] = const_i64(g, spec[k][3], n);
      n_ins = 5;
    }
    node(g, "Slice", ins, n_ins, outs[k] = out_value(g, "s"));
  }
  int64_t st = 7, en = 0, step = -3;
  int ins[5] = {y, const_i64(g, &st, 1), const_i64(g, &en, 1), -1,
                const_i64(g, &step, 1)};
  node(g, "Slice", ins, 5, outs[4] = out_value(g, "s"));
  finish(g, outs, 5);
}

static void test_slice(void **state) {
  (void)state;
  fill f[2] = {{0, 0}, {-20, 40}};
  assert_int_equal(check_same(build_slice, f, "slice", 0), 5);
}

/* ---- Transpose of other dtypes ---- */

static void build_transpose(ts_graph *g) {
  int64_t s[3] = {2, 3, 4};
  int x = input(g, "x", TS_INT64, 3, s), b = input(g, "b", TS_BOOL, 3, s);
  int h = input(g, "h", TS_FLOAT16, 3, s);
  static const int64_t perm[3] = {2, 0, 1};
  int outs[3];
  attr_ints(g, node(g, "Transpose", &x, 1, outs[0] = out_value(g, "t")), "perm",
            perm, 3);
  node(g, "Transpose", &b, 1, outs[1] = out_value(g, "t"));
  attr_ints(g, node(g, "Transpose", &h, 1, outs[2] = out_value(g, "t")), "perm",
            perm, 3);
  finish(g, outs, 3);
}

static void test_transpose(void **state) {
  (void)state;
  fill f[3] = {{-1000, 5000}, {0, 2}, {0, 0}};
  assert_int_equal(check_same(build_transpose, f, "transpose", 0), 3);
}

/* ---- reductions over every axis (no axes given), scalar results ---- */

static void build_reduce_all(ts_graph *g) {
  int64_t s[3] = {2, 3, 4};
  int x = input(g, "x", TS_FLOAT32, 3, s);
  int outs[5];
  node(g, "ReduceSum", &x, 1, outs[0] = out_value(g, "r"));
  node(g, "ReduceMax", &x, 1, outs[1] = out_value(g, "r"));
  int e = gr_value_fresh(g, "e", TS_FLOAT32, -1, NULL);
  node(g, "Exp", &x, 1, e);
  node(g, "ReduceMean", &e, 1, outs[2] = out_value(g, "r"));
  /* scalar (0-d) results: a sum over every axis without kept dimensions,
   * times a 0-d input, and an elementwise op on 0-d inputs */
  int sc = input(g, "sc", TS_FLOAT32, 0, NULL), r = out_value(g, "r");
  attr_int(g, node(g, "ReduceSum", &x, 1, r), "keepdims", 0);
  int rs[2] = {r, sc};
  node(g, "Mul", rs, 2, outs[3] = out_value(g, "m"));
  int ss[2] = {sc, sc};
  node(g, "Add", ss, 2, outs[4] = out_value(g, "a"));
  finish(g, outs, 5);
}

static void test_reduce_all(void **state) {
  (void)state;
  fill f[2] = {{-6, 12}, {3, 1}};
  assert_int_equal(check_tol(build_reduce_all, f, "reduce all", 0, false), 5);
}

/* ---- MatMul with a vector operand ---- */

static void build_matmul_vector(ts_graph *g) {
  int64_t v3[1] = {3}, v4[1] = {4}, b3[3] = {2, 3, 4}, m3[3] = {2, 5, 3};
  int64_t m46[2] = {4, 6};
  int a = input(g, "a", TS_FLOAT32, 1, v3),
      b = input(g, "b", TS_FLOAT32, 3, b3);
  int c = input(g, "c", TS_FLOAT32, 3, m3),
      d = input(g, "d", TS_FLOAT32, 1, v4);
  int e = input(g, "e", TS_FLOAT32, 2, m46);
  int outs[3], i1[2] = {a, b}, i2[2] = {c, a}, i3[2] = {d, e};
  node(g, "MatMul", i1, 2, outs[0] = out_value(g, "mm")); /* [2, 4] */
  node(g, "MatMul", i2, 2, outs[1] = out_value(g, "mm")); /* [2, 5] */
  node(g, "MatMul", i3, 2, outs[2] = out_value(g, "mm")); /* [6] */
  finish(g, outs, 3);
}

static void test_matmul_vector(void **state) {
  (void)state;
  fill f[5] = {{-3, 7}, {-4, 9}, {-5, 11}, {-2, 5}, {-6, 13}};
  assert_int_equal(check_tol(build_matmul_vector, f, "matmul", 0, false), 3);
}

/* ---- 1-D and 3-D convolutions and pools ---- */

static void build_window_1d_3d(ts_graph *g) {
  int64_t x1s[3] = {1, 4, 11}, w1s[3] = {6, 2, 3}, b1s[1] = {6};
  int64_t x3s[5] = {1, 2, 5, 6, 7}, w3s[5] = {3, 2, 2, 3, 2};
  int x1 = input(g, "x1", TS_FLOAT32, 3, x1s);
  int w1 = input(g, "w1", TS_FLOAT32, 3, w1s);
  int b1 = input(g, "b1", TS_FLOAT32, 1, b1s);
  int x3 = input(g, "x3", TS_FLOAT32, 5, x3s);
  int w3 = input(g, "w3", TS_FLOAT32, 5, w3s);
  int outs[8];
  static const int64_t p1[2] = {2, 1}, s1[1] = {2}, d1[1] = {2}, k1[1] = {3};
  int ci[3] = {x1, w1, b1};
  gr_node *n = node(g, "Conv", ci, 3, outs[0] = out_value(g, "conv1"));
  attr_ints(g, n, "pads", p1, 2);
  attr_ints(g, n, "strides", s1, 1);
  attr_ints(g, n, "dilations", d1, 1);
  attr_int(g, n, "group", 2);
  static const int64_t p3[6] = {1, 0, 1, 0, 1, 1}, s3[3] = {1, 2, 1};
  int c3[2] = {x3, w3};
  n = node(g, "Conv", c3, 2, outs[1] = out_value(g, "conv3"));
  attr_ints(g, n, "pads", p3, 6);
  attr_ints(g, n, "strides", s3, 3);
  n = node(g, "MaxPool", &x1, 1, outs[2] = out_value(g, "max1"));
  attr_ints(g, n, "kernel_shape", k1, 1);
  attr_ints(g, n, "strides", s1, 1);
  attr_int(g, n, "ceil_mode", 1);
  static const int64_t k3[3] = {2, 3, 2}, ps3[6] = {0, 1, 1, 1, 1, 0};
  n = node(g, "AveragePool", &x3, 1, outs[3] = out_value(g, "avg3"));
  attr_ints(g, n, "kernel_shape", k3, 3);
  attr_ints(g, n, "pads", ps3, 6);
  attr_ints(g, n, "strides", s3, 3);
  n = node(g, "AveragePool", &x3, 1, outs[4] = out_value(g, "avg3i"));
  attr_ints(g, n, "kernel_shape", k3, 3);
  attr_ints(g, n, "pads", ps3, 6);
  attr_int(g, n, "count_include_pad", 1);
  attr_int(g, n, "ceil_mode", 1);
  attr_ints(g, n, "strides", s3, 3);
  static const int64_t ps1[2] = {1, 2};
  n = node(g, "AveragePool", &x1, 1, outs[5] = out_value(g, "avg1"));
  attr_ints(g, n, "kernel_shape", k1, 1);
  attr_ints(g, n, "pads", ps1, 2);
  node(g, "GlobalAveragePool", &x1, 1, outs[6] = out_value(g, "gap1"));
  node(g, "GlobalAveragePool", &x3, 1, outs[7] = out_value(g, "gap3"));
  finish(g, outs, 8);
}

static void test_window_1d_3d(void **state) {
  (void)state;
  fill f[5] = {{-5, 11}, {-3, 7}, {-2, 5}, {-4, 9}, {-3, 7}};
  assert_int_equal(check_tol(build_window_1d_3d, f, "window", 0, false), 8);
}

/* ---- BatchNormalization with parameters that are not constants ---- */

static void build_batchnorm_values(ts_graph *g) {
  int64_t xs[4] = {2, 3, 4, 5}, cs[1] = {3};
  int ins[5] = {input(g, "x", TS_FLOAT32, 4, xs)};
  static const char *const names[] = {"scale", "bias", "mean", "var"};
  for (int k = 1; k < 5; k++)
    ins[k] = input(g, names[k - 1], TS_FLOAT32, 1, cs);
  int out = out_value(g, "bn");
  node(g, "BatchNormalization", ins, 5, out);
  finish(g, &out, 1);
}

static void test_batchnorm_values(void **state) {
  (void)state;
  fill f[5] = {{-9, 19}, {-2, 5}, {-3, 7}, {-4, 9}, {1, 5}};
  assert_int_equal(check_tol(build_batchnorm_values, f, "bn", 0, false), 2);
}

/* ---- elementwise arithmetic on other dtypes than float32 ---- */

static int scalar_of(ts_graph *g, ts_dtype t, double v) {
  unsigned char buf[16] = {0};
  ts_host_set(buf, t, 0, v);
  return gr_const_add(g, gr_fresh_name(g, "k"), t, 0, NULL, buf);
}

static const ts_dtype int_types[] = {{TS_DT_INT, 8, 1},
                                     {TS_DT_UINT, 8, 1},
                                     {TS_DT_INT, 32, 1},
                                     {TS_DT_INT, 64, 1}};

static void build_int_arith(ts_graph *g) {
  int64_t sa[2] = {4, 5}, sb[1] = {5};
  int outs[64], n = 0;
  for (int t = 0; t < 4; t++) {
    ts_dtype T = int_types[t];
    char name[16];
    snprintf(name, sizeof name, "a%d", t);
    int a = input(g, name, T, 2, sa);
    snprintf(name, sizeof name, "b%d", t);
    int b = input(g, name, T, 1, sb);
    static const char *const bin[] = {"Add", "Sub", "Mul", "Div"};
    for (int k = 0; k < 4; k++) {
      int ins[2] = {a, b};
      node(g, bin[k], ins, 2, outs[n++] = out_value(g, "r"));
    }
    static const char *const un[] = {"Neg", "Abs", "Relu"};
    for (int k = 0; k < 3; k++)
      node(g, un[k], &a, 1, outs[n++] = out_value(g, "r"));
    int clip[3] = {a, scalar_of(g, T, -3), scalar_of(g, T, 9)};
    node(g, "Clip", clip, 3, outs[n++] = out_value(g, "r"));
    /* a chain: one call */
    int s = out_value(g, "s"), m = out_value(g, "m");
    int i1[2] = {a, b}, i2[2] = {s, scalar_of(g, T, 7)};
    node(g, "Add", i1, 2, s);
    node(g, "Mul", i2, 2, m);
    node(g, "Relu", &m, 1, outs[n++] = out_value(g, "r"));
  }
  finish(g, outs, n);
}

static void test_int_arith(void **state) {
  (void)state;
  fill f[8];
  for (int t = 0; t < 4; t++) {
    f[2 * t] = (fill){-70, 141};
    f[2 * t + 1] = (fill){-3, 7}; /* zeros: division by zero gives 0 */
  }
  /* 9 calls per dtype: 4 binary, 3 unary, Clip, the fused chain */
  assert_int_equal(check_same(build_int_arith, f, "int arithmetic", 0), 4 * 9);
}

static void build_float_arith(ts_graph *g) {
  static const ts_dtype types[] = {
      {TS_DT_FLOAT, 16, 1}, {TS_DT_FLOAT, 64, 1}, {TS_DT_BFLOAT, 16, 1}};
  int64_t sa[2] = {3, N_SPECIALS}, sb[1] = {N_SPECIALS};
  int outs[64], n = 0;
  for (int t = 0; t < 3; t++) {
    char name[16];
    snprintf(name, sizeof name, "a%d", t);
    int a = input(g, name, types[t], 2, sa);
    snprintf(name, sizeof name, "b%d", t);
    int b = input(g, name, types[t], 1, sb);
    static const char *const bin[] = {"Add", "Mul", "Div", "Pow"};
    for (int k = 0; k < 4; k++) {
      int ins[2] = {a, b};
      node(g, bin[k], ins, 2, outs[n++] = out_value(g, "r"));
    }
    static const char *const un[] = {"Sqrt", "Exp", "Sigmoid",
                                     "Tanh", "Erf", "Gelu"};
    for (int k = 0; k < 6; k++)
      node(g, un[k], &a, 1, outs[n++] = out_value(g, "r"));
  }
  finish(g, outs, n);
}

static void test_float_arith(void **state) {
  (void)state;
  assert_int_equal(
      check_tol(build_float_arith, NULL, "float arithmetic", 0, false), 3 * 10);
}

/* ---- the small models ---- */

static void test_models_only_views(void **state) {
  (void)state;
  static const char *const models[] = {"resnet50_small", "mobilenet_v2_small",
                                       "csrnet_small", "bert_small",
                                       "ops_small"};
  for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
    bool bert = !strcmp(models[m], "bert_small");
    ts_error err;
    ts_graph *g = load_model(models[m], bert ? bert_shapes : NULL, bert ? 2 : 0,
                             NULL, &err);
    if (!g) fail_msg("%s: %s", models[m], err.msg);
    for (int i = 0; i < ts_graph_n_nodes(g); i++)
      if (ts_graph_node_kind_of(g, i) != TS_GRAPH_CALL &&
          strcmp(ts_graph_node_op(g, i), "Reshape"))
        fail_msg("%s: node '%s' (%s) is not a call", models[m],
                 ts_graph_node_name(g, i), ts_graph_node_op(g, i));
    ts_graph_free(g);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gather),
      cmocka_unit_test(test_gather_out_of_range),
      cmocka_unit_test(test_cast),
      cmocka_unit_test(test_cast_epilogue),
      cmocka_unit_test(test_concat),
      cmocka_unit_test(test_slice),
      cmocka_unit_test(test_transpose),
      cmocka_unit_test(test_reduce_all),
      cmocka_unit_test(test_matmul_vector),
      cmocka_unit_test(test_window_1d_3d),
      cmocka_unit_test(test_batchnorm_values),
      cmocka_unit_test(test_int_arith),
      cmocka_unit_test(test_float_arith),
      cmocka_unit_test(test_models_only_views),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
