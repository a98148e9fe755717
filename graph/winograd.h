/*
 * winograd.h — the Winograd F(2x2, 3x3) and F(4x4, 3x3) rewrite of 3x3
 * convolutions (winograd.c): the reference kernels of its two transform
 * operators and their TE stages for fusion. Private to graph/.
 */
#ifndef TESSERA_GRAPH_WINOGRAD_H
#define TESSERA_GRAPH_WINOGRAD_H

#include "fuse_move.h"

/* Whether the winograd pass would rewrite conv n (and is on in g). */
bool gr_winograd_applies(const ts_graph *g, const gr_node *n);
/* The share of conv n's direct FLOPs its Winograd form costs, transforms
 * included (an estimate: 1 where the pass leaves n direct). */
double gr_winograd_flop_share(const ts_graph *g, const gr_node *n);
/* WinogradInput node n: x [N, H, W, CI] -> v [alpha^2, P, CI]. */
int gr_winograd_run_input(const gr_node *n, const gr_tensor *x, gr_tensor *v);
/* WinogradOutput: m [alpha^2, P, CO] (+ bias [CO], may be NULL) -> y [N, H, W,
 * CO]. */
int gr_winograd_run_output(const gr_tensor *m, const gr_tensor *bias,
                           gr_tensor *y);
/* The stage of each transform in the group under construction; NULL when
 * a parameter cannot be bound (b->failed is set by the caller). */
ts_buffer *gr_winograd_build_input(gr_fuse_builder *b, const gr_node *n);
ts_buffer *gr_winograd_build_output(gr_fuse_builder *b, const gr_node *n);

#endif /* TESSERA_GRAPH_WINOGRAD_H */
