/*
 * lower.h — what the lowering pass (lower.c) shares with the lowerings of
 * the wider operator set (lower_more.c): the pass state and the helpers
 * that emit a node (its shapes inferred) and make fresh values and
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

/* Emits a node of one output and infers its shapes. */
int gr_lower_emit(gr_lowering *l, const char *op, const char *name,
                  const int *ins, int n_ins, int out);
/* A fresh value named after v with a suffix (shape set when emitted). */
int gr_lower_fresh(ts_graph *g, int v, const char *suffix);
/* A float32 constant of shape (ndim, shape) from doubles. */
int gr_lower_const_f32(ts_graph *g, const char *name, int ndim,
                       const int64_t *shape, const double *v, int64_t n);

#endif
