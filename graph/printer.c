/*
 * printer.c — the graph's text and JSON forms. Text: a header line, one
 * line per graph input and per used constant (small integer constants show
 * their values), one line per node — outputs, op type, node name, inputs,
 * attributes, then the outputs' types — and the graph outputs:
 *
 *   graph resnet (opset 13)
 *     input %x: float32[1, 3, 224, 224] NCHW
 *     const %w: float32[64, 3, 7, 7]
 *     %y = Conv[conv1](%x, %w, %b) {strides=[2, 2]} : float32[1, 64, 112, 112]
 * NCHW %z = call_tir[fused_3] @fused_conv2d(%y, %w2) : float32[...] ; task
 * 1a2b... output %z
 */
#include "internal.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sbuf {
  char *data;
  size_t len, cap;
} sbuf;

static void put(sbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (b->len + (size_t)n + 1 > b->cap) {
    size_t ncap = b->cap ? b->cap * 2 : 4096;
    while (ncap < b->len + (size_t)n + 1) ncap *= 2;
    char *p = realloc(b->data, ncap);
    if (!p) abort();
    b->data = p;
    b->cap = ncap;
  }
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

static void put_type(sbuf *b, const gr_value *v) {
  char dt[32];
  if (v->ndim < 0) { /* not inferred yet: neither dtype nor shape known */
    put(b, "?");
    return;
  }
  put(b, "%s", ts_dtype_str(v->dtype, dt));
  put(b, "[");
  for (int i = 0; i < v->ndim; i++) {
    if (v->shape[i] < 0)
      put(b, "%s?", i ? ", " : "");
    else
      put(b, "%s%lld", i ? ", " : "", (long long)v->shape[i]);
  }
  put(b, "]");
  if (v->layout && v->layout[0]) put(b, " %s", v->layout);
}

static void put_attr(sbuf *b, const gr_attr *a) {
  put(b, "%s=", a->name);
  switch (a->kind) {
  case GR_ATTR_INT: put(b, "%lld", (long long)a->i); break;
  case GR_ATTR_FLOAT: put(b, "%g", a->f); break;
  case GR_ATTR_STRING: put(b, "\"%s\"", a->s); break;
  case GR_ATTR_INTS:
    put(b, "[");
    for (int i = 0; i < a->n; i++)
      put(b, "%s%lld", i ? ", " : "", (long long)a->ints[i]);
    put(b, "]");
    break;
  case GR_ATTR_FLOATS:
    put(b, "[");
    for (int i = 0; i < a->n; i++) put(b, "%s%g", i ? ", " : "", a->floats[i]);
    put(b, "]");
    break;
  }
}

static bool *used_values(const ts_graph *g) {
  bool *used = calloc((size_t)g->n_values + 1, sizeof *used);
  if (!used) abort();
  for (int i = 0; i < g->n_nodes; i++)
    for (int j = 0; j < g->nodes[i].n_inputs; j++)
      if (g->nodes[i].inputs[j] >= 0) used[g->nodes[i].inputs[j]] = true;
  for (int i = 0; i < g->n_outputs; i++) used[g->outputs[i]] = true;
  return used;
}

char *ts_graph_print(const ts_graph *g) {
  sbuf b = {0};
  put(&b, "graph %s (opset %d)\n", g->name, g->opset);
  for (int i = 0; i < g->n_inputs; i++) {
    put(&b, "  input %%%s: ", g->values[g->inputs[i]].name);
    put_type(&b, &g->values[g->inputs[i]]);
    put(&b, "\n");
  }
  bool *used = used_values(g);
  for (int v = 0; v < g->n_values; v++) {
    const gr_value *val = &g->values[v];
    if (!used[v] || val->const_off < 0) continue;
    put(&b, "  const %%%s: ", val->name);
    put_type(&b, val);
    int64_t e = gr_value_elems(val);
    if (ts_dtype_is_int(val->dtype) && e <= 8) {
      put(&b, " = [");
      for (int64_t k = 0; k < e; k++)
        put(&b, "%s%lld", k ? ", " : "",
            (long long)ts_host_get(gr_const_data(g, v), val->dtype, k));
      put(&b, "]");
    }
    put(&b, "\n");
  }
  free(used);
  for (int i = 0; i < g->n_nodes; i++) {
    const gr_node *n = &g->nodes[i];
    put(&b, "  ");
    for (int k = 0; k < n->n_outputs; k++)
      put(&b, "%s%%%s", k ? ", " : "", g->values[n->outputs[k]].name);
    put(&b, " = %s[%s]", n->op, n->name);
    if (n->kind == TS_GRAPH_CALL) put(&b, " @%s", ts_func_name(n->func));
    put(&b, "(");
    for (int k = 0; k < n->n_inputs; k++) {
      if (n->inputs[k] < 0)
        put(&b, "%s_", k ? ", " : "");
      else
        put(&b, "%s%%%s", k ? ", " : "", g->values[n->inputs[k]].name);
    }
    put(&b, ")");
    if (n->n_attrs) {
      put(&b, " {");
      for (int k = 0; k < n->n_attrs; k++) {
        if (k) put(&b, ", ");
        put_attr(&b, &n->attrs[k]);
      }
      put(&b, "}");
    }
    put(&b, " : ");
    for (int k = 0; k < n->n_outputs; k++) {
      if (k) put(&b, ", ");
      put_type(&b, &g->values[n->outputs[k]]);
    }
    if (n->kind == TS_GRAPH_CALL) {
      char hex[33];
      ts_hash128_hex(ts_func_hash(n->func), hex);
      put(&b, " ; task %s", hex);
    }
    put(&b, "\n");
  }
  for (int i = 0; i < g->n_outputs; i++)
    put(&b, "  output %%%s\n", g->values[g->outputs[i]].name);
  if (!b.data) put(&b, "%s", "");
  return b.data;
}

static cJSON *json_type(const gr_value *v) {
  cJSON *o = cJSON_CreateObject();
  char dt[32];
  cJSON_AddStringToObject(o, "name", v->name);
  cJSON_AddStringToObject(o, "dtype", ts_dtype_str(v->dtype, dt));
  cJSON *s = cJSON_AddArrayToObject(o, "shape");
  for (int i = 0; i < v->ndim; i++)
    cJSON_AddItemToArray(s, cJSON_CreateNumber((double)v->shape[i]));
  if (v->layout && v->layout[0])
    cJSON_AddStringToObject(o, "layout", v->layout);
  return o;
}

char *ts_graph_print_json(const ts_graph *g) {
  unsigned long failures = ts_alloc_failures();
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "name", g->name);
  cJSON_AddNumberToObject(root, "opset", g->opset);
  char hex[33];
  ts_hash128_hex(ts_graph_hash(g), hex);
  cJSON_AddStringToObject(root, "hash", hex);
  cJSON *ins = cJSON_AddArrayToObject(root, "inputs");
  for (int i = 0; i < g->n_inputs; i++)
    cJSON_AddItemToArray(ins, json_type(&g->values[g->inputs[i]]));
  cJSON *outs = cJSON_AddArrayToObject(root, "outputs");
  for (int i = 0; i < g->n_outputs; i++)
    cJSON_AddItemToArray(outs, json_type(&g->values[g->outputs[i]]));
  cJSON *consts = cJSON_AddArrayToObject(root, "constants");
  bool *used = used_values(g);
  for (int v = 0; v < g->n_values; v++)
    if (used[v] && g->values[v].const_off >= 0)
      cJSON_AddItemToArray(consts, json_type(&g->values[v]));
  free(used);
  cJSON *nodes = cJSON_AddArrayToObject(root, "nodes");
  for (int i = 0; i < g->n_nodes; i++) {
    const gr_node *n = &g->nodes[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", n->name);
    cJSON_AddStringToObject(o, "op", n->op);
    cJSON_AddStringToObject(o, "kind",
                            n->kind == TS_GRAPH_CALL ? "call" : "op");
    cJSON *ni = cJSON_AddArrayToObject(o, "inputs");
    for (int k = 0; k < n->n_inputs; k++)
      cJSON_AddItemToArray(
          ni, n->inputs[k] < 0
                  ? cJSON_CreateNull()
                  : cJSON_CreateString(g->values[n->inputs[k]].name));
    cJSON *no = cJSON_AddArrayToObject(o, "outputs");
    for (int k = 0; k < n->n_outputs; k++)
      cJSON_AddItemToArray(no, json_type(&g->values[n->outputs[k]]));
    cJSON *at = cJSON_AddObjectToObject(o, "attrs");
    for (int k = 0; k < n->n_attrs; k++) {
      const gr_attr *a = &n->attrs[k];
      switch (a->kind) {
      case GR_ATTR_INT:
        cJSON_AddNumberToObject(at, a->name, (double)a->i);
        break;
      case GR_ATTR_FLOAT: cJSON_AddNumberToObject(at, a->name, a->f); break;
      case GR_ATTR_STRING: cJSON_AddStringToObject(at, a->name, a->s); break;
      case GR_ATTR_INTS: {
        cJSON *arr = cJSON_AddArrayToObject(at, a->name);
        for (int j = 0; j < a->n; j++)
          cJSON_AddItemToArray(arr, cJSON_CreateNumber((double)a->ints[j]));
        break;
      }
      case GR_ATTR_FLOATS: {
        cJSON *arr = cJSON_AddArrayToObject(at, a->name);
        for (int j = 0; j < a->n; j++)
          cJSON_AddItemToArray(arr, cJSON_CreateNumber(a->floats[j]));
        break;
      }
      }
    }
    if (n->kind == TS_GRAPH_CALL) {
      ts_hash128_hex(ts_func_hash(n->func), hex);
      cJSON_AddStringToObject(o, "func", ts_func_name(n->func));
      cJSON_AddStringToObject(o, "task", hex);
    }
    cJSON_AddItemToArray(nodes, o);
  }
  char *s = ts_json_print(root, failures, true);
  cJSON_Delete(root);
  return s;
}
