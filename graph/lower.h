/*
 * lower.h — what the lowering pass (lower.c) shares with the lowerings of
 * the wider operator set (lower_more.c, lower_index.c): the pass state and the
 * helpers that emit a node (its shapes inferred) and make fresh values and
 * constants.
 */
#ifndef TS_GRAPH_LOWER_H
#define TS_GRAPH_LOWER_H

#include "internal.h"

struct gr_lowering {
  ts_graph *g;
  gr_list out;
  ts_error *err;
};

/* The gathers and scatters at constant indices (lower_index.c), as
 * gr_lower_more: TS_OK or an error when n was rewritten, 1 when n is not
 * theirs. */
int gr_lower_index(gr_lowering *l, const gr_node *n);

/* ConvTranspose as a conv of its stride phases and an interleave
 * (lower_convt.c), as gr_lower_more: 1 when n is not taken. */
int gr_lower_conv_transpose(gr_lowering *l, const gr_node *n);

/* LSTM, GRU and RNN unrolled over their sequence (lower_rnn.c), as
 * gr_lower_more: 1 when n is not one of them. */
int gr_lower_rnn(gr_lowering *l, const gr_node *n);

/* A conv whose padding takes a third of its taps or more as convs over
 * the boxes of its output with the same taps inside the image
 * (conv_boxes.c), as gr_lower_more: 1 when n is not taken. */
int gr_lower_conv_boxes(gr_lowering *l, const gr_node *n);
/* A 3-D Conv as a 2-D one over depth-stacked slices (lower_conv3d.c), as
 * gr_lower_more: 1 when n is not taken. */
int gr_lower_conv3d(gr_lowering *l, const gr_node *n);
/* Elementwise chains between such convs on their 4-D form (depth_views.c):
 * run after the lowering. */
int gr_lower_depth_views(ts_graph *g, ts_error *err);
/* Elementwise chains between 1-D windows on the windows' 2-D form
 * (unit_views.c): run after the lowering. */
int gr_lower_unit_views(ts_graph *g, ts_error *err);

/* An unsupported use of node n (in scope with the lowering l): TS_ERR
 * naming the node, its operator and the model's opset. */
#define GR_LOWER_FAIL(...)                                                     \
  TS_ERR(l->err, TS_EUNSUPPORTED,                                              \
         "node '%s' (%s, opset %d): " GR_FMT_FIRST(__VA_ARGS__), n->name,      \
         n->op, l->g->opset GR_REST_ARGS(__VA_ARGS__))
#define GR_FMT_FIRST(f, ...) f
#define GR_REST_ARGS(f, ...) , ##__VA_ARGS__

/* Emits a node of one output and infers its shapes. */
int gr_lower_emit(gr_lowering *l, const char *op, const char *name,
                  const int *ins, int n_ins, int out);
/* Emits op(ins) with attributes, for node n: into `out`, named n (the
 * last node of n's rewrite), or into a fresh value named after n's output
 * with `suffix` when out < 0. The value, or an error code (< 0). */
int gr_lower_node(gr_lowering *l, const gr_node *n, const char *op,
                  const int *ins, int n_ins, int out, const gr_attr *attrs,
                  int n_attrs, const char *suffix);
/* Reshape of x to (nd, shape), and Slice of x along axis, emitted as
 * gr_lower_node does (their int64 operands new constants); the value, or
 * an error code (also when x is one). */
int gr_lower_reshape(gr_lowering *l, const gr_node *n, int x, int nd,
                     const int64_t *shape, int out, const char *suffix);
int gr_lower_slice(gr_lowering *l, const gr_node *n, int x, int64_t axis,
                   int64_t start, int64_t end, int64_t step, int out,
                   const char *suffix);
/* Runs fn on each operator node of g whose first output is one of the
 * first nv values: fn pushes the node's rewrite to *out and returns TS_OK,
 * returns 1 to keep the node (pushed here), or an error, which stops the
 * walk. When any node was rewritten (*changed) the list replaces g's
 * nodes; otherwise it is freed. TS_OK or the error. */
int gr_lower_rewrite_ops(ts_graph *g, int nv,
                         int (*fn)(void *ctx, const gr_node *n), void *ctx,
                         gr_list *out, bool *changed);
/* A fresh value named after v with a suffix (shape set when emitted). */
int gr_lower_fresh(ts_graph *g, int v, const char *suffix);
/* A float32 constant of shape (ndim, shape) from doubles. */
int gr_lower_const_f32(ts_graph *g, const char *name, int ndim,
                       const int64_t *shape, const double *v, int64_t n);

#endif
