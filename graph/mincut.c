/*
 * mincut.c — minimum s-t cut of a small directed graph with int64
 * capacities (Dinic's algorithm: BFS levels, then blocking flows along
 * them). The graph passes use it for two-way placement decisions, such as
 * which nodes run channels-last, where the cut's weight is the cost of the
 * edges between the two sides.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct arc {
  int to, next;
  int64_t cap; /* residual capacity */
} arc;

struct gr_cut {
  int n;
  int *head, *level, *iter, *queue;
  arc *arcs;
  int n_arcs, cap_arcs;
  bool failed; /* an allocation failed */
};

gr_cut *gr_cut_new(int n) {
  gr_cut *c = ts_calloc(1, sizeof *c);
  if (!c) return NULL;
  c->n = n;
  c->head = ts_malloc(sizeof(int) * (size_t)(n + 1));
  c->level = ts_malloc(sizeof(int) * (size_t)(n + 1));
  c->iter = ts_malloc(sizeof(int) * (size_t)(n + 1));
  c->queue = ts_malloc(sizeof(int) * (size_t)(n + 1));
  if (!c->head || !c->level || !c->iter || !c->queue) {
    gr_cut_free(c);
    return NULL;
  }
  for (int i = 0; i < n; i++) c->head[i] = -1;
  return c;
}

void gr_cut_free(gr_cut *c) {
  if (!c) return;
  free(c->head);
  free(c->level);
  free(c->iter);
  free(c->queue);
  free(c->arcs);
  free(c);
}

static void push_arc(gr_cut *c, int from, int to, int64_t cap) {
  if (c->n_arcs == c->cap_arcs) {
    int cap_arcs = c->cap_arcs ? 2 * c->cap_arcs : 64;
    arc *a = ts_realloc(c->arcs, sizeof(arc) * (size_t)cap_arcs);
    if (!a) {
      c->failed = true;
      return;
    }
    c->arcs = a;
    c->cap_arcs = cap_arcs;
  }
  c->arcs[c->n_arcs] = (arc){to, c->head[from], cap};
  c->head[from] = c->n_arcs++;
}

void gr_cut_edge(gr_cut *c, int from, int to, int64_t cap) {
  if (from < 0 || to < 0 || from >= c->n || to >= c->n || from == to) return;
  /* an arc and its reverse are neighbours: index ^ 1 finds the pair */
  push_arc(c, from, to, cap);
  if (!c->failed) push_arc(c, to, from, 0);
  if (c->failed && c->n_arcs % 2) c->n_arcs--; /* drop half a pair */
}

/* BFS levels from s over arcs with residual capacity; whether t is
 * reached. */
static bool levels(gr_cut *c, int s, int t) {
  for (int i = 0; i < c->n; i++) c->level[i] = -1;
  int qh = 0, qt = 0;
  c->level[s] = 0;
  c->queue[qt++] = s;
  while (qh < qt) {
    int u = c->queue[qh++];
    for (int e = c->head[u]; e >= 0; e = c->arcs[e].next)
      if (c->arcs[e].cap > 0 && c->level[c->arcs[e].to] < 0) {
        c->level[c->arcs[e].to] = c->level[u] + 1;
        c->queue[qt++] = c->arcs[e].to;
      }
  }
  return c->level[t] >= 0;
}

/* One augmenting path of at most `limit` along increasing levels
 * (iterative depth-first search); the flow pushed, 0 when none. */
static int64_t augment(gr_cut *c, int s, int t, int64_t limit) {
  int *path = c->queue; /* arcs of the current path (levels are done) */
  int depth = 0, u = s;
  for (;;) {
    if (u == t) {
      int64_t f = limit;
      for (int d = 0; d < depth; d++)
        if (c->arcs[path[d]].cap < f) f = c->arcs[path[d]].cap;
      for (int d = 0; d < depth; d++) {
        c->arcs[path[d]].cap -= f;
        c->arcs[path[d] ^ 1].cap += f;
      }
      return f;
    }
    int e = c->iter[u];
    while (e >= 0 &&
           (c->arcs[e].cap <= 0 || c->level[c->arcs[e].to] != c->level[u] + 1))
      e = c->arcs[e].next;
    c->iter[u] = e;
    if (e >= 0) {
      path[depth++] = e;
      u = c->arcs[e].to;
      continue;
    }
    /* a dead end: no path through u at this level; back up */
    c->level[u] = -1;
    if (depth == 0) return 0;
    u = c->arcs[path[--depth] ^ 1].to;
    c->iter[u] = c->arcs[c->iter[u]].next;
  }
}

int64_t gr_cut_solve(gr_cut *c, int s, int t, bool *source_side) {
  if (c->failed) return -1;
  int64_t flow = 0;
  while (levels(c, s, t)) {
    for (int i = 0; i < c->n; i++) c->iter[i] = c->head[i];
    for (int64_t f; (f = augment(c, s, t, INT64_MAX)) > 0;) flow += f;
  }
  /* the source side: what s still reaches in the residual graph */
  levels(c, s, t);
  for (int i = 0; i < c->n; i++) source_side[i] = c->level[i] >= 0;
  return flow;
}
