/*
 * fuse_move.h — what fuse.c, fuse_conv.c, fuse_rows.c and fuse_move.c
 * share: the state of the group function under construction (its TE
 * builder and the graph values bound to parameters), the helpers the
 * anchors' builders have in common, and the anchors built outside fuse.c.
 * Private to graph/.
 */
#ifndef TESSERA_GRAPH_FUSE_MOVE_H
#define TESSERA_GRAPH_FUSE_MOVE_H

#include "internal.h"

#define GR_FUSE_MAX_PARAMS 32
#define GR_FUSE_MAX_MEMBERS 32 /* nodes in one group */

/* The group's function under construction. */
typedef struct gr_fuse_builder {
  const ts_graph *g;
  ts_te *te;
  ts_arena *a;
  int values[GR_FUSE_MAX_PARAMS]; /* graph values bound to parameters */
  ts_buffer *bufs[GR_FUSE_MAX_PARAMS];
  int n_params;
  bool failed;
  int stage_no;
  /* A group anchored by a conv with blocked weights iterates its output
   * channels as [C/split_b, split_b] (C = split_c): its stages are one
   * rank higher and every parameter indexed by the channel axis is bound
   * as the same bytes viewed [..., C/split_b, split_b]. 0: no split. */
  int64_t split_c, split_b;
  /* A group anchored by a pointwise channels-last conv (1x1, stride 1, no
   * padding, group 1) is a matrix product: its stages iterate the output's
   * leading merge_lead axes (N, H, W, of extents lead[]) as one axis M,
   * and every parameter of those leading extents is bound as the same
   * bytes viewed [M, ...]; one that is 1 on all of them broadcasts with
   * them dropped. 0: no merge. Applied before the channel split. */
  int merge_lead, merge_rank; /* merge_rank: the output's rank */
  /* The first merged axis: 0 (the leading ones, above), or 2 for a
   * blocked pointwise conv, whose H and W inside [N, C/B, H, W, B] merge
   * into one axis (a present operand's are merged, or broadcast). */
  int merge_at;
  /* The chain's value so far and its stage (set before each member): a
   * conv that reads it as its data (a transpose before it, fused) takes
   * the stage instead of a parameter. chain_v -1: none. */
  int chain_v;
  ts_buffer *chain_buf;
  /* Every member's value and stage so far: an elementwise member reads an
   * earlier member's value from its stage (x * Sigmoid(x) after a conv,
   * where x has two readers in the group), not as a parameter. */
  int inner_v[GR_FUSE_MAX_MEMBERS];
  ts_buffer *inner_buf[GR_FUSE_MAX_MEMBERS];
  int n_inner;
  int64_t lead[TS_MAX_DIMS];
  /* Constants are bound as parameters even when they are one value
   * (quantization scales: layers that differ only in them share a task). */
  bool no_inline;
} gr_fuse_builder;

/* The parameter bound to graph value v (added on first use); NULL and
 * b->failed when the parameter limit is reached (one slot stays free for
 * the output). */
ts_buffer *gr_fuse_param(gr_fuse_builder *b, int v);
/* Like gr_fuse_param, v's bytes viewed as the group's stages see them
 * (merged leading axes; split channels when split is set). */
ts_buffer *gr_fuse_param_as(gr_fuse_builder *b, int v, bool split);
/* The parameter bound to graph value v, its bytes viewed as shape[nd]. */
ts_buffer *gr_fuse_param_shaped(gr_fuse_builder *b, int v, const int64_t *shape,
                                int nd);
/* A fresh stage name from an op name ("Cast" -> "cast_3"). */
const char *gr_fuse_stage_name(gr_fuse_builder *b, const char *op);

/* A float32 stage over v's shape, its axes in axes[] (fuse.c). */
ts_te_stage *gr_fuse_stage_like(gr_fuse_builder *b, const char *op,
                                const gr_value *v, ts_expr **axes);
/* Loads buf broadcast against the last of n_axes output axes (fuse.c). */
ts_expr *gr_fuse_bcast_load(gr_fuse_builder *b, ts_buffer *buf, ts_expr **axes,
                            int n_axes);
/* The name of reduction axis d of nsp spatial ones ("rd", "rh", "rw"). */
const char *gr_fuse_window_axis(int nsp, int d);
/* The accumulator dtype of a conv or matmul anchor (its output's). */
ts_dtype gr_fuse_acc_dtype(const gr_fuse_builder *b, const gr_node *n);
/* One term of a conv or matmul reduction: x * y, 8-bit operands each
 * widened to the int32 accumulator. */
ts_expr *gr_fuse_product(gr_fuse_builder *b, const gr_node *n, ts_expr *x,
                         ts_expr *y);
/* What a conv pads its data x with: 0, or ConvInteger's pad_value. */
ts_expr *gr_fuse_pad_fill(gr_fuse_builder *b, const gr_node *n,
                          const gr_value *x);
/* A stage padding the nsp spatial axes of x (from axis sp0) by pads[d]
 * before and end[d] after, filled with fill. */
ts_buffer *gr_fuse_pad_stage(gr_fuse_builder *b, ts_buffer *data,
                             const gr_value *x, int sp0, int nsp,
                             const int64_t *pads, const int64_t *end,
                             ts_expr *fill);
/* Whether Conv n is pointwise channels-last (2-D, 1x1, stride 1, no
 * padding, group 1): a matrix product over the merged N, H, W axes. */
bool gr_fuse_pointwise_conv(const ts_graph *g, const gr_node *n);
/* A Conv anchor (fuse_conv.c): pad stage, reduction, bias; NULL when it
 * cannot be expressed. */
ts_buffer *gr_fuse_build_conv(gr_fuse_builder *b, const gr_node *n);
/* Softmax and LayerNormalization groups (fuse_rows.c); NULL when the node
 * cannot be expressed. */
ts_buffer *gr_fuse_build_softmax(gr_fuse_builder *b, const gr_node *n);
ts_buffer *gr_fuse_build_layer_norm(gr_fuse_builder *b, const gr_node *n);
/* A Softmax over the last axis of the group's scores and the MatMul that
 * multiplies its result by a value V, as one tail of stages (an attention
 * group, fuse.c); NULL when the shapes do not line up. */
ts_buffer *gr_fuse_build_attention_tail(gr_fuse_builder *b, const gr_node *sm,
                                        ts_buffer *scores, const gr_node *n2);

/* Whether node n is a data-movement operator that becomes a group of its
 * own (Gather, Cast, Concat, Slice, Transpose; any dtype; static shapes and
 * a constant Slice specification). */
bool gr_fuse_is_move(const ts_graph *g, const gr_node *n);
/* Builds the stage of data-movement node n; NULL when it cannot be
 * expressed (b->failed is set). */
ts_buffer *gr_fuse_build_move(gr_fuse_builder *b, const gr_node *n);

#endif /* TESSERA_GRAPH_FUSE_MOVE_H */
