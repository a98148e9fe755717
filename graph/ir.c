/*
 * ir.c — the graph IR's storage: values (append-only array), nodes
 * (a topologically ordered array that passes rebuild through gr_list),
 * attributes, the constant store (one growing buffer, 64-byte aligned
 * entries, addressed by offset so growth never invalidates a value) and the
 * functions owned by call nodes; plus the public accessors.
 */
#include "internal.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONST_ALIGN 64

/* items with room for n + 1 (the capacity doubled when full); NULL, items
 * unchanged, when out of memory. */
static void *grow(void *items, int n, int *cap, size_t elem) {
  if (n < *cap) return items;
  int ncap = *cap ? *cap * 2 : 16;
  void *p = ts_realloc(items, elem * (size_t)ncap);
  if (!p) return NULL;
  *cap = ncap;
  return p;
}

bool gr_failed(const ts_graph *g) {
  return g->oom || ts_arena_failed(g->arena);
}

int gr_alloc_check(const ts_graph *g, unsigned long failures, int rc,
                   ts_error *err, const char *what) {
  if (g && gr_failed(g) && rc != TS_ENOMEM)
    return TS_ERR(err, TS_ENOMEM, "%s: out of memory", what);
  return ts_alloc_check(failures, rc, err, what);
}

ts_graph *ts_graph_new(const char *name) {
  ts_graph *g = ts_calloc(1, sizeof *g);
  if (!g) return NULL;
  g->arena = ts_arena_create();
  g->name = ts_arena_strdup(g->arena, name ? name : "graph");
  if (!g->name) { /* out of memory */
    ts_arena_destroy(g->arena);
    free(g);
    return NULL;
  }
  g->opset = 17;
  return g;
}

void ts_graph_free(ts_graph *g) {
  if (!g) return;
  for (int i = 0; i < g->n_funcs; i++) ts_func_free(g->funcs[i]);
  free(g->funcs);
  free(g->values);
  free(g->nodes);
  free(g->consts);
  gr_quant_setup_free(g->quant);
  gr_pet_setup_free(g->pet);
  gr_block_setup_free(g->block);
  gr_wino_setup_free(g->wino);
  ts_arena_destroy(g->arena);
  free(g);
}

int gr_value_add(ts_graph *g, const char *name, ts_dtype t, int ndim,
                 const int64_t *shape) {
  /* shape may point into g->values, which growing moves */
  int64_t dims[TS_MAX_DIMS];
  for (int i = 0; i < TS_MAX_DIMS; i++)
    dims[i] = (shape && i < ndim) ? shape[i] : -1;
  gr_value *grown =
      grow(g->values, g->n_values, &g->cap_values, sizeof(gr_value));
  if (!grown) {
    g->oom = true;
    return TS_ENOMEM;
  }
  g->values = grown;
  gr_value *v = &g->values[g->n_values];
  memset(v, 0, sizeof *v);
  v->name = ts_arena_strdup(g->arena, name ? name : "");
  if (!v->name) {
    v->name = "";
    g->oom = true;
  }
  v->dtype = t;
  v->ndim = ndim;
  memcpy(v->shape, dims, sizeof dims);
  v->layout = "";
  v->producer = -1;
  v->const_off = -1;
  return g->n_values++;
}

int gr_value_fresh(ts_graph *g, const char *base, ts_dtype t, int ndim,
                   const int64_t *shape) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s_%d", base, ++g->name_counter);
  return gr_value_add(g, buf, t, ndim, shape);
}

const char *gr_fresh_name(ts_graph *g, const char *base) {
  const char *name =
      ts_arena_printf(g->arena, "%s_%d", base, ++g->name_counter);
  if (!name) g->oom = true;
  return name;
}

void *gr_alloc(ts_graph *g, size_t size) {
  void *p = ts_arena_alloc(g->arena, size);
  if (!p) g->oom = true;
  return p;
}

int64_t gr_value_elems(const gr_value *v) {
  if (v->ndim < 0) return -1;
  int64_t n = 1;
  for (int i = 0; i < v->ndim; i++) {
    if (v->shape[i] < 0) return -1;
    n *= v->shape[i];
  }
  return n;
}

int gr_const_reserve(ts_graph *g, const char *name, ts_dtype t, int ndim,
                     const int64_t *shape) {
  int id = gr_value_add(g, name, t, ndim, shape);
  if (id < 0) return id;
  int64_t elems = gr_value_elems(&g->values[id]);
  size_t bytes = (size_t)(elems < 0 ? 0 : elems) * ts_dtype_elem_bytes(t);
  size_t off = (g->consts_len + CONST_ALIGN - 1) & ~(size_t)(CONST_ALIGN - 1);
  if (off + bytes > g->consts_cap) {
    size_t ncap = g->consts_cap ? g->consts_cap : 4096;
    while (ncap < off + bytes) ncap *= 2;
    /* 64-byte aligned like every tensor a compiled kernel receives */
    uint8_t *p = ts_aligned_alloc(CONST_ALIGN, ncap);
    if (!p) {
      g->n_values--;
      return TS_ENOMEM;
    }
    if (g->consts_len) memcpy(p, g->consts, g->consts_len);
    free(g->consts);
    g->consts = p;
    g->consts_cap = ncap;
  }
  memset(g->consts + g->consts_len, 0, off + bytes - g->consts_len);
  g->consts_len = off + bytes;
  g->values[id].const_off = (int64_t)off;
  return id;
}

/* Where p lies inside [base, base + bytes): its offset, else -1. */
static ptrdiff_t offset_in(const void *p, const void *base, size_t bytes) {
  uintptr_t a = (uintptr_t)p, b = (uintptr_t)base;
  return base && a >= b && a < b + bytes ? (ptrdiff_t)(a - b) : -1;
}

int gr_const_add(ts_graph *g, const char *name, ts_dtype t, int ndim,
                 const int64_t *shape, const void *data) {
  /* data may point into the graph's own values (a view's shape) or
   * constants (a copy of another constant), which reserving moves */
  ptrdiff_t in_values =
      offset_in(data, g->values, sizeof(gr_value) * (size_t)g->cap_values);
  ptrdiff_t in_consts = offset_in(data, g->consts, g->consts_cap);
  int id = gr_const_reserve(g, name, t, ndim, shape);
  if (id < 0) return id;
  if (in_values >= 0) data = (const char *)g->values + in_values;
  if (in_consts >= 0) data = g->consts + in_consts;
  int64_t elems = gr_value_elems(&g->values[id]);
  if (data && elems > 0)
    memcpy(gr_const_data(g, id), data, (size_t)elems * ts_dtype_elem_bytes(t));
  return id;
}

void *gr_const_data(const ts_graph *g, int value) {
  if (value < 0 || g->values[value].const_off < 0) return NULL;
  return g->consts + g->values[value].const_off;
}

bool gr_is_const(const ts_graph *g, int value) {
  return value >= 0 && g->values[value].const_off >= 0;
}

gr_node gr_node_make(ts_graph *g, const char *op, const char *name,
                     const int *inputs, int n_inputs, const int *outputs,
                     int n_outputs) {
  gr_node n;
  memset(&n, 0, sizeof n);
  n.kind = TS_GRAPH_OP;
  n.op = ts_arena_strdup(g->arena, op);
  n.name = ts_arena_strdup(g->arena, name ? name : gr_fresh_name(g, op));
  n.inputs = gr_alloc(g, sizeof(int) * (size_t)(n_inputs + 1));
  n.outputs = gr_alloc(g, sizeof(int) * (size_t)(n_outputs + 1));
  if (!n.op || !n.name || !n.inputs || !n.outputs) {
    /* out of memory: an empty node of a failed graph */
    g->oom = true;
    n.op = n.name = "";
    n.inputs = n.outputs = NULL;
    return n;
  }
  n.n_inputs = n_inputs;
  if (n_inputs) memcpy(n.inputs, inputs, sizeof(int) * (size_t)n_inputs);
  n.n_outputs = n_outputs;
  if (n_outputs) memcpy(n.outputs, outputs, sizeof(int) * (size_t)n_outputs);
  return n;
}

gr_node *gr_node_add(ts_graph *g, const char *op, const char *name,
                     const int *inputs, int n_inputs, const int *outputs,
                     int n_outputs) {
  gr_node n = gr_node_make(g, op, name, inputs, n_inputs, outputs, n_outputs);
  if (!n.inputs) return NULL; /* out of memory: the graph is failed */
  gr_node *grown = grow(g->nodes, g->n_nodes, &g->cap_nodes, sizeof(gr_node));
  if (!grown) {
    g->oom = true;
    return NULL;
  }
  g->nodes = grown;
  g->nodes[g->n_nodes] = n;
  for (int i = 0; i < n_outputs; i++)
    g->values[outputs[i]].producer = g->n_nodes;
  return &g->nodes[g->n_nodes++];
}

void gr_node_set_attr(ts_graph *g, gr_node *n, gr_attr a) {
  /* out of memory: the attribute is dropped and the graph failed */
  if (!(a.name = ts_arena_strdup(g->arena, a.name))) {
    g->oom = true;
    return;
  }
  if (a.kind == GR_ATTR_STRING && !(a.s = ts_arena_strdup(g->arena, a.s))) {
    g->oom = true;
    return;
  }
  if (a.kind == GR_ATTR_INTS) {
    int64_t *p = gr_alloc(g, sizeof *p * (size_t)(a.n + 1));
    if (!p) return;
    if (a.n) memcpy(p, a.ints, sizeof *p * (size_t)a.n);
    a.ints = p;
  }
  if (a.kind == GR_ATTR_FLOATS) {
    double *p = gr_alloc(g, sizeof *p * (size_t)(a.n + 1));
    if (!p) return;
    if (a.n) memcpy(p, a.floats, sizeof *p * (size_t)a.n);
    a.floats = p;
  }
  for (int i = 0; i < n->n_attrs; i++)
    if (!strcmp(n->attrs[i].name, a.name)) {
      n->attrs[i] = a;
      return;
    }
  gr_attr *na = gr_alloc(g, sizeof *na * (size_t)(n->n_attrs + 1));
  if (!na) return;
  if (n->n_attrs) memcpy(na, n->attrs, sizeof *na * (size_t)n->n_attrs);
  na[n->n_attrs++] = a;
  n->attrs = na;
}

const gr_attr *gr_attr_find(const gr_node *n, const char *name) {
  for (int i = 0; i < n->n_attrs; i++)
    if (!strcmp(n->attrs[i].name, name)) return &n->attrs[i];
  return NULL;
}

int64_t gr_attr_int(const gr_node *n, const char *name, int64_t dflt) {
  const gr_attr *a = gr_attr_find(n, name);
  if (!a) return dflt;
  if (a->kind == GR_ATTR_INT) return a->i;
  if (a->kind == GR_ATTR_FLOAT) return (int64_t)a->f;
  return dflt;
}

double gr_attr_float(const gr_node *n, const char *name, double dflt) {
  const gr_attr *a = gr_attr_find(n, name);
  if (!a) return dflt;
  if (a->kind == GR_ATTR_FLOAT) return a->f;
  if (a->kind == GR_ATTR_INT) return (double)a->i;
  return dflt;
}

const char *gr_attr_string(const gr_node *n, const char *name,
                           const char *dflt) {
  const gr_attr *a = gr_attr_find(n, name);
  return a && a->kind == GR_ATTR_STRING ? a->s : dflt;
}

bool gr_attr_ints_all(const gr_node *n, const char *name, int64_t v) {
  int c;
  const int64_t *p = gr_attr_ints(n, name, &c);
  for (int d = 0; p && d < c; d++)
    if (p[d] != v) return false;
  return true;
}

const int64_t *gr_attr_ints(const gr_node *n, const char *name, int *count) {
  const gr_attr *a = gr_attr_find(n, name);
  if (!a || a->kind != GR_ATTR_INTS) {
    *count = 0;
    return NULL;
  }
  *count = a->n;
  return a->ints;
}

void gr_reindex(ts_graph *g) {
  for (int i = 0; i < g->n_values; i++) g->values[i].producer = -1;
  for (int i = 0; i < g->n_nodes; i++)
    for (int j = 0; j < g->nodes[i].n_outputs; j++)
      g->values[g->nodes[i].outputs[j]].producer = i;
}

void gr_replace_uses(ts_graph *g, int from, int to) {
  for (int i = 0; i < g->n_nodes; i++)
    for (int j = 0; j < g->nodes[i].n_inputs; j++)
      if (g->nodes[i].inputs[j] == from) g->nodes[i].inputs[j] = to;
  for (int i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] == from) g->outputs[i] = to;
}

int *gr_use_counts(const ts_graph *g) {
  int *uses = ts_calloc((size_t)g->n_values + 1, sizeof *uses);
  if (!uses) return NULL;
  for (int i = 0; i < g->n_nodes; i++)
    for (int j = 0; j < g->nodes[i].n_inputs; j++)
      if (g->nodes[i].inputs[j] >= 0) uses[g->nodes[i].inputs[j]]++;
  for (int i = 0; i < g->n_outputs; i++) uses[g->outputs[i]]++;
  return uses;
}

void gr_list_push(gr_list *l, const gr_node *n) {
  gr_node *grown = grow(l->nodes, l->n, &l->cap, sizeof(gr_node));
  if (!grown) {
    l->oom = true;
    return;
  }
  l->nodes = grown;
  l->nodes[l->n++] = *n;
}

int gr_list_commit(ts_graph *g, gr_list *l) {
  if (l->oom) {
    free(l->nodes);
    memset(l, 0, sizeof *l);
    g->oom = true;
    return TS_ENOMEM;
  }
  free(g->nodes);
  g->nodes = l->nodes;
  g->n_nodes = l->n;
  g->cap_nodes = l->cap;
  l->nodes = NULL;
  l->n = l->cap = 0;
  gr_reindex(g);
  return TS_OK;
}

bool gr_own_func(ts_graph *g, ts_func *f) {
  ts_func **grown =
      grow(g->funcs, g->n_funcs, &g->cap_funcs, sizeof(ts_func *));
  if (!grown) {
    g->oom = true;
    return false;
  }
  g->funcs = grown;
  g->funcs[g->n_funcs++] = f;
  return true;
}

const char *gr_layout_for(int ndim, bool image) {
  if (!image) return "";
  switch (ndim) {
  case 3: return "NCW";
  case 4: return "NCHW";
  case 5: return "NCDHW";
  default: return "";
  }
}

/* ---- public accessors ---- */

int ts_graph_n_nodes(const ts_graph *g) { return g->n_nodes; }

ts_graph_node_kind ts_graph_node_kind_of(const ts_graph *g, int i) {
  return g->nodes[i].kind;
}

const char *ts_graph_node_op(const ts_graph *g, int i) {
  return g->nodes[i].op;
}

const char *ts_graph_node_name(const ts_graph *g, int i) {
  return g->nodes[i].name;
}

const ts_func *ts_graph_node_func(const ts_graph *g, int i) {
  return g->nodes[i].func;
}

int ts_graph_count_op(const ts_graph *g, const char *op) {
  int c = 0;
  for (int i = 0; i < g->n_nodes; i++)
    if (!strcmp(g->nodes[i].op, op)) c++;
  return c;
}

size_t ts_graph_constant_bytes(const ts_graph *g) { return g->consts_len; }

int ts_graph_n_inputs(const ts_graph *g) { return g->n_inputs; }
int ts_graph_n_outputs(const ts_graph *g) { return g->n_outputs; }

static ts_graph_value_info value_info(const ts_graph *g, int id) {
  const gr_value *v = &g->values[id];
  ts_graph_value_info info;
  memset(&info, 0, sizeof info);
  info.name = v->name;
  info.dtype = v->dtype;
  info.ndim = v->ndim;
  memcpy(info.shape, v->shape, sizeof info.shape);
  info.layout = v->layout;
  info.is_constant = v->const_off >= 0;
  return info;
}

ts_graph_value_info ts_graph_input(const ts_graph *g, int i) {
  return value_info(g, g->inputs[i]);
}

ts_graph_value_info ts_graph_output(const ts_graph *g, int i) {
  return value_info(g, g->outputs[i]);
}
