/*
 * pet.h — what the PET pass (pet.c) and its checker (pet_check.c) share:
 * a program (a few nodes of the graph, or nodes built beside it and not
 * yet in its node list), the boxes an output splits into, and the
 * randomized check of a mutant against the original. Private to graph/.
 */
#ifndef TESSERA_GRAPH_PET_H
#define TESSERA_GRAPH_PET_H

#include "internal.h"

/* Nodes in topological order. Values no node of the program produces are
 * its inputs: float ones take seeded random values (the same in the
 * original and the mutant, as they are the same graph values); integer
 * constants (shapes, slice bounds) keep theirs. */
typedef struct pet_prog {
  const gr_node *nodes;
  int n;
} pet_prog;

/* A box of an output: [lo, hi) on each axis. */
typedef struct pet_box {
  int64_t lo[TS_MAX_DIMS], hi[TS_MAX_DIMS];
} pet_box;

typedef struct pet_check_opts {
  int trials;         /* t: independent random inputs per position */
  uint64_t seed;      /* of the random inputs and positions */
  int64_t max_boxes;  /* more boxes than this: the mutant is not checked */
  int64_t max_points; /* split points per axis past which propagation
                         gives up (the mutant is not checked) */
  double max_work;    /* input elements the check may read in all (its
                         boxes x (m + 1) positions x trials x both
                         programs' reads per position); past it the mutant
                         is not checked (0: no limit) */
  int memo;           /* keep data-movement values whole per trial: 0 when
                         the positions are many (512), 1 always, -1 never */
} pet_check_opts;

/* What the check found for one output: the boxes (the product of the
 * split points of both programs on each axis), how many positions were
 * evaluated, and the boxes that differ (malloc'd). */
typedef struct pet_check_result {
  int64_t n_boxes, n_points;
  pet_box *diff;
  int64_t n_diff;
} pet_check_result;

/* A 2-D conv's geometry: channels-last or NCHW, weights plain or blocked
 * (pet_check.c). */
typedef struct pet_conv {
  bool nhwc;
  int64_t group, cig, cog, block;
  int64_t k[2], s[2], d[2], pad[4]; /* pads: top, left, bottom, right */
  int cdim, sdim; /* the channel axis and the first spatial axis */
} pet_conv;
/* false when n is not a conv of rank 4 with consistent groups and pads */
bool pet_conv_geo(const ts_graph *g, const gr_node *n, pet_conv *c);

/* Checks output value y of `orig` against y2 of `mut` (same shape): the
 * split points of y in orig and of y2 in mut are merged per axis, and in
 * each resulting box m + 1 positions (m the rank) are evaluated in both
 * programs with `trials` random inputs. TS_EUNSUPPORTED (err names the
 * operator) when a node cannot be evaluated or propagated; the result is
 * then empty. */
int pet_check(const ts_graph *g, const pet_prog *orig, int y,
              const pet_prog *mut, int y2, const pet_check_opts *o,
              pet_check_result *res, ts_error *err);
void pet_check_result_free(pet_check_result *r);

/* The value of v at index idx (in v's shape) in program p, with the
 * program's float inputs random for (seed, trial): its data and the
 * constants it shares with `other` (NULL: all of them); the constants only
 * p reads keep their values, as in pet_check. NAN and *ok false when an
 * operator cannot be evaluated. */
double pet_eval_point(const ts_graph *g, const pet_prog *p, int v,
                      const int64_t *idx, uint64_t seed, int trial,
                      const pet_prog *other, bool *ok);

/* Whether values u and v are the same constant: one value, or two with
 * the same type, shape and bytes (the layout pass gives each node its own
 * transformed copy of shared weights). The checker takes equal constants
 * as one random input. */
bool pet_same_constant(const ts_graph *g, int u, int v);

/* ---- mutants (pet.c, pet_mutate.c) ---- */

#define PET_MAX_NODES 48
#define PET_MAX_SUB 16 /* nodes of a subprogram */
#define PET_MAX_OUTS 8 /* outputs of a subprogram */

/* A subprogram: a few nodes of the graph (copies, in the graph's order;
 * idx their indices there) and the values they compute that are read
 * outside it (its outputs). A single node is a subprogram of one output. */
typedef struct pet_sub {
  gr_node nodes[PET_MAX_SUB];
  int idx[PET_MAX_SUB];
  int n;
  int outs[PET_MAX_OUTS];
  int n_outs;
} pet_sub;

/* A mutant of a subprogram: new nodes (not in the graph's node list)
 * reading the subprogram's inputs. Of one node: `out`, a fresh value of the
 * node's output shape. Of several outputs: outs[k] computes the
 * subprogram's outs[k] (n_outs of them; the pass fills outs from out for a
 * mutant of one node). */
typedef struct pet_mutant {
  const char *kind;
  gr_node nodes[PET_MAX_NODES];
  int n, out;
  int outs[PET_MAX_OUTS], n_outs;
} pet_mutant;

/* Builds a mutant of node n into m: 1 built, 0 when n is not one the
 * mutator applies to, negative with err set on failure. */
typedef int (*pet_mutator)(ts_graph *g, const gr_node *n, pet_mutant *m,
                           ts_error *err);

/* Builds a mutant of a subprogram of several nodes (sub->n > 1) into m,
 * setting m->outs and m->n_outs; returns as pet_mutator. */
typedef int (*pet_sub_mutator)(ts_graph *g, const pet_sub *sub, pet_mutant *m,
                               ts_error *err);

/* Runs the built-in mutator `kind` ("dilated_to_batch", "split_rows",
 * "pad_same") on
 * n: as a mutator does; TS_EINVAL for an unknown kind. For tests. */
int pet_mutate(ts_graph *g, const gr_node *n, const char *kind, pet_mutant *m,
               ts_error *err);

/* Adds a mutator to those the pass tries (after ts_graph_set_pet; tests
 * add deliberately wrong ones). */
int pet_add_mutator(ts_graph *g, const char *kind, pet_mutator fn,
                    ts_error *err);

/* Adds a mutator of subprograms of several nodes (the pass forms them:
 * multilinear nodes that read one value, with their bias additions). */
int pet_add_sub_mutator(ts_graph *g, const char *kind, pet_sub_mutator fn,
                        ts_error *err);
/* The subprograms of several nodes the pass forms on g (at most max):
 * the convs or matmuls with constant weights that read the same value and
 * could run as one (same attributes and weight shapes but for the output
 * channels), each with its bias addition when every one has one. */
int pet_batch_groups(const ts_graph *g, pet_sub *subs, int max);
/* Runs the built-in mutator of subprograms `kind` ("batch_shared_input"). */
int pet_mutate_sub(ts_graph *g, const pet_sub *sub, const char *kind,
                   pet_mutant *m, ts_error *err);

/* The built-in mutators (pet_mutate.c), as the pass registers them. */
int pet_mut_dilated(ts_graph *g, const gr_node *n, pet_mutant *m,
                    ts_error *err);
int pet_mut_split_rows(ts_graph *g, const gr_node *n, pet_mutant *m,
                       ts_error *err);
int pet_mut_pad_same(ts_graph *g, const gr_node *n, pet_mutant *m,
                     ts_error *err);
int pet_mut_split_kernel(ts_graph *g, const gr_node *n, pet_mutant *m,
                         ts_error *err);
int pet_mut_stride_to_channels(ts_graph *g, const gr_node *n, pet_mutant *m,
                               ts_error *err);
int pet_mut_batch(ts_graph *g, const pet_sub *sub, pet_mutant *m,
                  ts_error *err);
int pet_mut_concat(ts_graph *g, const pet_sub *sub, pet_mutant *m,
                   ts_error *err);
/* Replaces mutant m's output m->out on the differing boxes of res by
 * corrections computing conv n of the original there (bands of rows or
 * columns); appends what it did to note. 1 done, 0 when no choice of bands
 * covers them, negative on failure. */
int pet_correct(ts_graph *g, const gr_node *n, pet_mutant *m,
                const pet_check_result *res, char *note, size_t note_size,
                ts_error *err);

/* Appends node op(ins) to m with the attributes of attrs_of (may be NULL)
 * and a fresh output whose shape inference fills; returns the output value
 * or a negative code (err set). */
int pet_emit(ts_graph *g, pet_mutant *m, const char *op, const int *ins,
             int n_ins, const gr_node *attrs_of, ts_error *err);
/* An int64 constant of n entries. */
int pet_int64s(ts_graph *g, const char *base, int n, const int64_t *v);
/* Sets an INTS attribute on the last node of m. */
void pet_set_ints(ts_graph *g, pet_mutant *m, const char *name, int n,
                  const int64_t *v);

#endif /* TESSERA_GRAPH_PET_H */
