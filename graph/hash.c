/*
 * hash.c — the graph's structural hash, in the style of tir's: a canonical
 * byte stream hashed with ts_structural_key_hash (128 bits, 32 hex digits).
 * Values are numbered by first appearance (inputs, then node by node), so
 * names do not matter; ops, attributes (sorted by name), dtypes, shapes,
 * wiring, constant bytes and called functions' structural hashes do.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct stream {
  uint8_t *data;
  size_t len, cap;
  bool oom; /* a byte could not be stored: the hash is void */
} stream;

static void bytes(stream *s, const void *p, size_t n) {
  if (s->oom) return;
  if (s->len + n > s->cap) {
    size_t ncap = s->cap ? s->cap * 2 : 4096;
    while (ncap < s->len + n) ncap *= 2;
    uint8_t *q = ts_realloc(s->data, ncap);
    if (!q) {
      s->oom = true;
      return;
    }
    s->data = q;
    s->cap = ncap;
  }
  memcpy(s->data + s->len, p, n);
  s->len += n;
}

static void i64(stream *s, int64_t v) { bytes(s, &v, sizeof v); }
static void str(stream *s, const char *t) {
  i64(s, (int64_t)strlen(t));
  bytes(s, t, strlen(t));
}

static void value(stream *s, const ts_graph *g, int v, int64_t *canon,
                  int64_t *next) {
  if (v < 0) {
    i64(s, -1);
    return;
  }
  if (canon[v] >= 0) {
    i64(s, canon[v]);
    return;
  }
  canon[v] = (*next)++;
  const gr_value *x = &g->values[v];
  i64(s, canon[v]);
  i64(s, (int64_t)x->dtype.code << 24 | (int64_t)x->dtype.bits << 16 |
             x->dtype.lanes);
  i64(s, x->ndim);
  for (int i = 0; i < x->ndim; i++) {
    /* a symbolic dimension by its form, not the size it has here */
    if (x->sym && x->sym[i]) {
      i64(s, -2);
      str(s, x->sym[i]);
    } else {
      i64(s, x->shape[i]);
    }
  }
  if (x->const_off >= 0) {
    int64_t e = gr_value_elems(x);
    ts_hash128 h = ts_structural_key_hash(gr_const_data(g, v),
                                          (size_t)(e < 0 ? 0 : e) *
                                              ts_dtype_elem_bytes(x->dtype));
    i64(s, (int64_t)h.hi);
    i64(s, (int64_t)h.lo);
  }
}

static int cmp_attr(const void *a, const void *b) {
  return strcmp(((const gr_attr *)a)->name, ((const gr_attr *)b)->name);
}

/* Node n into the stream; false when out of memory. */
static bool node(stream *s, const ts_graph *g, const gr_node *n, int64_t *canon,
                 int64_t *next) {
  str(s, n->op);
  i64(s, n->n_inputs);
  for (int k = 0; k < n->n_inputs; k++) value(s, g, n->inputs[k], canon, next);
  i64(s, n->n_outputs);
  for (int k = 0; k < n->n_outputs; k++)
    value(s, g, n->outputs[k], canon, next);
  gr_attr *attrs = ts_malloc(sizeof(gr_attr) * ((size_t)n->n_attrs + 1));
  if (!attrs) return false;
  if (n->n_attrs) memcpy(attrs, n->attrs, sizeof(gr_attr) * n->n_attrs);
  qsort(attrs, (size_t)n->n_attrs, sizeof(gr_attr), cmp_attr);
  for (int k = 0; k < n->n_attrs; k++) {
    const gr_attr *a = &attrs[k];
    str(s, a->name);
    i64(s, a->kind);
    switch (a->kind) {
    case GR_ATTR_INT: i64(s, a->i); break;
    case GR_ATTR_FLOAT: bytes(s, &a->f, sizeof a->f); break;
    case GR_ATTR_STRING: str(s, a->s); break;
    case GR_ATTR_INTS:
      i64(s, a->n);
      bytes(s, a->ints, sizeof(int64_t) * (size_t)a->n);
      break;
    case GR_ATTR_FLOATS:
      i64(s, a->n);
      bytes(s, a->floats, sizeof(double) * (size_t)a->n);
      break;
    }
  }
  free(attrs);
  if (n->kind == TS_GRAPH_CALL) {
    ts_hash128 h = ts_func_hash(n->func);
    i64(s, (int64_t)h.hi);
    i64(s, (int64_t)h.lo);
  }
  return true;
}

ts_hash128 ts_graph_hash(const ts_graph *g) {
  stream s = {0};
  int64_t *canon = ts_malloc(sizeof(int64_t) * ((size_t)g->n_values + 1));
  if (!canon) return (ts_hash128){0, 0};
  for (int i = 0; i < g->n_values; i++) canon[i] = -1;
  int64_t next = 0;
  str(&s, "graph");
  i64(&s, g->n_inputs);
  for (int i = 0; i < g->n_inputs; i++)
    value(&s, g, g->inputs[i], canon, &next);
  for (int i = 0; i < g->n_nodes && !s.oom; i++)
    if (!node(&s, g, &g->nodes[i], canon, &next)) s.oom = true;
  i64(&s, g->n_outputs);
  for (int i = 0; i < g->n_outputs; i++)
    value(&s, g, g->outputs[i], canon, &next);
  ts_hash128 h =
      s.oom ? (ts_hash128){0, 0} : ts_structural_key_hash(s.data, s.len);
  free(s.data);
  free(canon);
  return h;
}

ts_hash128 gr_nodes_hash(const ts_graph *g, const gr_node *nodes, int n,
                         const int *outs, int n_outs) {
  stream s = {0};
  int64_t *canon = ts_malloc(sizeof(int64_t) * ((size_t)g->n_values + 1));
  if (!canon) return (ts_hash128){0, 0};
  for (int i = 0; i < g->n_values; i++) canon[i] = -1;
  int64_t next = 0;
  str(&s, "nodes");
  /* the values read from outside, by identity (constants by their bytes,
   * as in the graph's hash): two subprograms that read different data of
   * the same type are different */
  for (int i = 0; i < n; i++)
    for (int k = 0; k < nodes[i].n_inputs; k++) {
      int v = nodes[i].inputs[k];
      if (v < 0 || canon[v] >= 0) continue;
      bool inside = false;
      for (int j = 0; j < i && !inside; j++)
        for (int o = 0; o < nodes[j].n_outputs; o++)
          inside |= nodes[j].outputs[o] == v;
      if (inside) continue;
      i64(&s, gr_is_const(g, v) ? -2 : v);
      value(&s, g, v, canon, &next);
    }
  for (int i = 0; i < n && !s.oom; i++)
    if (!node(&s, g, &nodes[i], canon, &next)) s.oom = true;
  i64(&s, n_outs);
  for (int i = 0; i < n_outs; i++) value(&s, g, outs[i], canon, &next);
  ts_hash128 h =
      s.oom ? (ts_hash128){0, 0} : ts_structural_key_hash(s.data, s.len);
  free(s.data);
  free(canon);
  return h;
}
