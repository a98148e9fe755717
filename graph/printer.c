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
#include "tir/strbuf.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put_type(strbuf *b, const gr_value *v) {
  char dt[32];
  if (v->ndim < 0) { /* not inferred yet: neither dtype nor shape known */
    sb_printf(b, "?");
    return;
  }
  sb_printf(b, "%s", ts_dtype_str(v->dtype, dt));
  sb_printf(b, "[");
  for (int i = 0; i < v->ndim; i++) {
    if (v->sym && v->sym[i])
      sb_printf(b, "%s%s", i ? ", " : "", v->sym[i]);
    else if (v->shape[i] < 0)
      sb_printf(b, "%s?", i ? ", " : "");
    else
      sb_printf(b, "%s%lld", i ? ", " : "", (long long)v->shape[i]);
  }
  sb_printf(b, "]");
  if (v->layout && v->layout[0]) sb_printf(b, " %s", v->layout);
}

static void put_attr(strbuf *b, const gr_attr *a) {
  sb_printf(b, "%s=", a->name);
  switch (a->kind) {
  case GR_ATTR_INT: sb_printf(b, "%lld", (long long)a->i); break;
  case GR_ATTR_FLOAT: sb_printf(b, "%g", a->f); break;
  case GR_ATTR_STRING: sb_printf(b, "\"%s\"", a->s); break;
  case GR_ATTR_INTS:
    sb_printf(b, "[");
    for (int i = 0; i < a->n; i++)
      sb_printf(b, "%s%lld", i ? ", " : "", (long long)a->ints[i]);
    sb_printf(b, "]");
    break;
  case GR_ATTR_FLOATS:
    sb_printf(b, "[");
    for (int i = 0; i < a->n; i++)
      sb_printf(b, "%s%g", i ? ", " : "", a->floats[i]);
    sb_printf(b, "]");
    break;
  }
}

/* The values a node or the graph's outputs use; NULL when out of memory. */
static bool *used_values(const ts_graph *g) {
  bool *used = ts_calloc((size_t)g->n_values + 1, sizeof *used);
  if (!used) return NULL;
  for (int i = 0; i < g->n_nodes; i++)
    for (int j = 0; j < g->nodes[i].n_inputs; j++)
      if (g->nodes[i].inputs[j] >= 0) used[g->nodes[i].inputs[j]] = true;
  for (int i = 0; i < g->n_outputs; i++) used[g->outputs[i]] = true;
  return used;
}

char *ts_graph_print(const ts_graph *g) {
  /* (out of memory in a task's hash would print a wrong hash) */
  unsigned long failures = ts_alloc_failures();
  strbuf b = {0};
  sb_printf(&b, "graph %s (opset %d)\n", g->name, g->opset);
  for (int i = 0; i < g->n_inputs; i++) {
    sb_printf(&b, "  input %%%s: ", g->values[g->inputs[i]].name);
    put_type(&b, &g->values[g->inputs[i]]);
    sb_printf(&b, "\n");
  }
  bool *used = used_values(g);
  bool lost = !used;
  for (int v = 0; used && v < g->n_values; v++) {
    const gr_value *val = &g->values[v];
    if (!used[v] || val->const_off < 0) continue;
    sb_printf(&b, "  const %%%s: ", val->name);
    put_type(&b, val);
    int64_t e = gr_value_elems(val);
    if (ts_dtype_is_int(val->dtype) && e <= 8) {
      sb_printf(&b, " = [");
      for (int64_t k = 0; k < e; k++)
        sb_printf(
            &b, "%s%lld", k ? ", " : "",
            (long long)ts_host_get_int(gr_const_data(g, v), val->dtype, k));
      sb_printf(&b, "]");
    }
    sb_printf(&b, "\n");
  }
  free(used);
  for (int i = 0; i < g->n_nodes; i++) {
    const gr_node *n = &g->nodes[i];
    sb_printf(&b, "  ");
    for (int k = 0; k < n->n_outputs; k++)
      sb_printf(&b, "%s%%%s", k ? ", " : "", g->values[n->outputs[k]].name);
    sb_printf(&b, " = %s[%s]", n->op, n->name);
    if (n->kind == TS_GRAPH_CALL) sb_printf(&b, " @%s", ts_func_name(n->func));
    sb_printf(&b, "(");
    for (int k = 0; k < n->n_inputs; k++) {
      if (n->inputs[k] < 0)
        sb_printf(&b, "%s_", k ? ", " : "");
      else
        sb_printf(&b, "%s%%%s", k ? ", " : "", g->values[n->inputs[k]].name);
    }
    sb_printf(&b, ")");
    if (n->n_attrs) {
      sb_printf(&b, " {");
      for (int k = 0; k < n->n_attrs; k++) {
        if (k) sb_printf(&b, ", ");
        put_attr(&b, &n->attrs[k]);
      }
      sb_printf(&b, "}");
    }
    sb_printf(&b, " : ");
    for (int k = 0; k < n->n_outputs; k++) {
      if (k) sb_printf(&b, ", ");
      put_type(&b, &g->values[n->outputs[k]]);
    }
    if (n->kind == TS_GRAPH_CALL) {
      char hex[33];
      ts_hash128_hex(ts_func_hash(n->func), hex);
      sb_printf(&b, " ; task %s", hex);
    }
    sb_printf(&b, "\n");
  }
  for (int i = 0; i < g->n_outputs; i++)
    sb_printf(&b, "  output %%%s\n", g->values[g->outputs[i]].name);
  if (lost || failures != ts_alloc_failures()) {
    sb_free(&b);
    return NULL;
  }
  return sb_take(&b);
}

static cJSON *json_type(const gr_value *v) {
  cJSON *o = cJSON_CreateObject();
  char dt[32];
  cJSON_AddStringToObject(o, "name", v->name);
  cJSON_AddStringToObject(o, "dtype", ts_dtype_str(v->dtype, dt));
  cJSON *s = cJSON_AddArrayToObject(o, "shape");
  for (int i = 0; i < v->ndim; i++)
    ts_json_add(s, NULL, cJSON_CreateNumber((double)v->shape[i]));
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
    ts_json_add(ins, NULL, json_type(&g->values[g->inputs[i]]));
  cJSON *outs = cJSON_AddArrayToObject(root, "outputs");
  for (int i = 0; i < g->n_outputs; i++)
    ts_json_add(outs, NULL, json_type(&g->values[g->outputs[i]]));
  cJSON *consts = cJSON_AddArrayToObject(root, "constants");
  bool *used = used_values(g);
  for (int v = 0; used && v < g->n_values; v++)
    if (used[v] && g->values[v].const_off >= 0)
      ts_json_add(consts, NULL, json_type(&g->values[v]));
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
      ts_json_add(ni, NULL,
                  n->inputs[k] < 0
                      ? cJSON_CreateNull()
                      : cJSON_CreateString(g->values[n->inputs[k]].name));
    cJSON *no = cJSON_AddArrayToObject(o, "outputs");
    for (int k = 0; k < n->n_outputs; k++)
      ts_json_add(no, NULL, json_type(&g->values[n->outputs[k]]));
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
          ts_json_add(arr, NULL, cJSON_CreateNumber((double)a->ints[j]));
        break;
      }
      case GR_ATTR_FLOATS: {
        cJSON *arr = cJSON_AddArrayToObject(at, a->name);
        for (int j = 0; j < a->n; j++)
          ts_json_add(arr, NULL, cJSON_CreateNumber(a->floats[j]));
        break;
      }
      }
    }
    if (n->kind == TS_GRAPH_CALL) {
      ts_hash128_hex(ts_func_hash(n->func), hex);
      cJSON_AddStringToObject(o, "func", ts_func_name(n->func));
      cJSON_AddStringToObject(o, "task", hex);
    }
    ts_json_add(nodes, NULL, o);
  }
  char *s = ts_json_print(root, failures, true);
  cJSON_Delete(root);
  return s;
}
