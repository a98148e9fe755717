/*
 * exec.c — the reference executor: runs a graph node by node on host
 * tensors. Graph operators run in the reference kernels (kernels.c), call
 * nodes in tir's interpreter with the caller-allocated outputs passed in
 * (destination passing). Each intermediate tensor is freed after its last
 * use, so peak memory stays near the live set.
 */
#include "internal.h"

#include "codegen/codegen.h"
#include "runtime/runtime.h"

#include <stdlib.h>
#include <string.h>

/* Every tensor is 64-byte aligned: compiled kernels may use aligned vector
 * accesses on their parameters. */
static void *aligned_zeroed(size_t bytes) {
  size_t n = (bytes + 63) & ~(size_t)63;
  void *p = ts_aligned_alloc(64, n ? n : 64);
  if (p) memset(p, 0, n ? n : 64);
  return p;
}

static void *tensor_alloc(const gr_value *v) {
  int64_t e = gr_value_elems(v);
  return aligned_zeroed((size_t)(e < 0 ? 0 : e) *
                        ts_dtype_elem_bytes(v->dtype));
}

/* Compiled tasks, one per distinct function. */
typedef struct compiled {
  const ts_func *func;
  ts_rt_kernel *kernel;
} compiled;

typedef struct jit {
  ts_target *target;
  ts_runtime *rt;
  compiled *items;
  int n;
} jit;

static void jit_free(jit *j) {
  for (int i = 0; i < j->n; i++) ts_rt_kernel_unload(j->items[i].kernel);
  free(j->items);
  ts_runtime_destroy(j->rt);
  ts_target_free(j->target);
}

/* Builds and loads every distinct called function of g. */
static int jit_build(const ts_graph *g, jit *j, ts_error *err) {
  memset(j, 0, sizeof *j);
  j->items = ts_calloc((size_t)g->n_nodes + 1, sizeof *j->items);
  if (!j->items) return TS_ERR(err, TS_ENOMEM, "executor");
  int rc = ts_target_host(&j->target, err);
  if (!rc) rc = ts_runtime_create(0, &j->rt, err);
  for (int i = 0; i < g->n_nodes && !rc; i++) {
    const gr_node *n = &g->nodes[i];
    if (n->kind != TS_GRAPH_CALL) continue;
    bool seen = false;
    for (int k = 0; k < j->n && !seen; k++)
      seen = ts_func_equal(j->items[k].func, n->func);
    if (seen) continue;
    ts_build_result br;
    rc = ts_build(n->func, j->target, NULL, &br, err);
    if (rc) break;
    rc = ts_rt_kernel_load(br.artifact->bytes, br.artifact->n_bytes,
                           br.artifact->entry, &j->items[j->n].kernel, err);
    ts_build_result_clear(&br);
    if (!rc) j->items[j->n++].func = n->func;
  }
  return rc;
}

static const ts_rt_kernel *jit_find(const jit *j, const ts_func *f) {
  for (int k = 0; k < j->n; k++)
    if (j->items[k].func == f || ts_func_equal(j->items[k].func, f))
      return j->items[k].kernel;
  return NULL;
}

/* The checks both executors make on their arguments. */
static int check_args(const ts_graph *g, const ts_graph_tensor *inputs,
                      int n_inputs, int n_outputs, ts_error *err) {
  if (n_inputs != g->n_inputs || n_outputs != g->n_outputs)
    return TS_ERR(err, TS_EINVAL,
                  "the graph has %d inputs and %d outputs; %d and %d given",
                  g->n_inputs, g->n_outputs, n_inputs, n_outputs);
  for (int i = 0; i < n_inputs; i++) {
    const gr_value *v = &g->values[g->inputs[i]];
    bool same = ts_dtype_eq(v->dtype, inputs[i].dtype) &&
                v->ndim == inputs[i].ndim && inputs[i].data;
    for (int d = 0; same && d < v->ndim; d++)
      same = v->shape[d] == inputs[i].shape[d];
    if (!same)
      return TS_ERR(err, TS_EINVAL,
                    "input %d ('%s'): shape or dtype differs from the graph's",
                    i, v->name);
  }
  for (int i = 0; i < g->n_nodes; i++)
    for (int k = 0; k < g->nodes[i].n_outputs; k++)
      if (gr_value_elems(&g->values[g->nodes[i].outputs[k]]) < 0)
        return TS_ERR(err, TS_EINVAL,
                      "node '%s': output shapes are not known (run the "
                      "passes first)",
                      g->nodes[i].name);
  return TS_OK;
}

/* Tells the observer about value v, computed into data. */
static void observe(const ts_graph *g, ts_graph_observer fn, void *ctx, int v,
                    void *data) {
  if (!fn || !data) return;
  const gr_value *val = &g->values[v];
  ts_graph_tensor t = {val->name, val->dtype, val->ndim, {0}, data};
  memcpy(t.shape, val->shape, sizeof(int64_t) * (size_t)val->ndim);
  fn(ctx, v, &t);
}

struct ts_graph_runner {
  const ts_graph *g;
  ts_graph_exec_mode mode;
  jit j; /* TS_GRAPH_COMPILE: the kernels, built once */
};

int ts_graph_runner_create(const ts_graph *g, ts_graph_exec_mode mode,
                           ts_graph_runner **out, ts_error *err) {
  *out = NULL;
  ts_graph_runner *r = ts_calloc(1, sizeof *r);
  if (!r) return TS_ERR(err, TS_ENOMEM, "executor: out of memory");
  r->g = g;
  r->mode = mode;
  if (mode == TS_GRAPH_COMPILE) {
    int rc = jit_build(g, &r->j, err);
    if (rc) {
      ts_graph_runner_free(r);
      return rc;
    }
  }
  *out = r;
  return TS_OK;
}

void ts_graph_runner_free(ts_graph_runner *r) {
  if (!r) return;
  jit_free(&r->j);
  free(r);
}

int ts_graph_execute(const ts_graph *g, ts_graph_exec_mode mode,
                     const ts_graph_tensor *inputs, int n_inputs,
                     ts_graph_tensor *outputs, int n_outputs, ts_error *err) {
  return ts_graph_execute_observed(g, mode, inputs, n_inputs, outputs,
                                   n_outputs, NULL, NULL, err);
}

int ts_graph_execute_observed(const ts_graph *g, ts_graph_exec_mode mode,
                              const ts_graph_tensor *inputs, int n_inputs,
                              ts_graph_tensor *outputs, int n_outputs,
                              ts_graph_observer observer, void *ctx,
                              ts_error *err) {
  int crc = check_args(g, inputs, n_inputs, n_outputs, err);
  if (crc) return crc;
  ts_graph_runner *r = NULL;
  int rc = ts_graph_runner_create(g, mode, &r, err);
  if (!rc)
    rc = ts_graph_runner_run(r, inputs, n_inputs, outputs, n_outputs, observer,
                             ctx, err);
  ts_graph_runner_free(r);
  return rc;
}

int ts_graph_runner_run(ts_graph_runner *runner, const ts_graph_tensor *inputs,
                        int n_inputs, ts_graph_tensor *outputs, int n_outputs,
                        ts_graph_observer observer, void *ctx, ts_error *err) {
  const ts_graph *g = runner->g;
  ts_graph_exec_mode mode = runner->mode;
  const jit *jp = &runner->j;
  int crc = check_args(g, inputs, n_inputs, n_outputs, err);
  if (crc) return crc;
  void **data = ts_calloc((size_t)g->n_values + 1, sizeof *data);
  int *uses = gr_use_counts(g);
  int rc = TS_OK;
  if (!data || !uses) rc = TS_ERR(err, TS_ENOMEM, "executor: out of memory");
  for (int i = 0; i < n_inputs && !rc; i++) { /* aligned input copies */
    const gr_value *v = &g->values[g->inputs[i]];
    void *copy = tensor_alloc(v);
    if (!copy) {
      rc = TS_ERR(err, TS_ENOMEM, "input '%s': out of memory", v->name);
      break;
    }
    memcpy(copy, inputs[i].data,
           (size_t)gr_value_elems(v) * ts_dtype_elem_bytes(v->dtype));
    data[g->inputs[i]] = copy;
    observe(g, observer, ctx, g->inputs[i], copy);
  }
  /* graph outputs are never freed early */
  for (int i = 0; i < g->n_outputs; i++) uses[g->outputs[i]] += 1 << 20;
  for (int i = 0; i < g->n_nodes && !rc; i++) {
    const gr_node *n = &g->nodes[i];
    gr_tensor ins[64], outs[16];
    for (int k = 0; k < n->n_inputs; k++) {
      memset(&ins[k], 0, sizeof ins[k]);
      int v = n->inputs[k];
      if (v < 0) continue;
      const gr_value *val = &g->values[v];
      ins[k].dtype = val->dtype;
      ins[k].ndim = val->ndim;
      memcpy(ins[k].shape, val->shape, sizeof val->shape);
      ins[k].data = val->const_off >= 0 ? gr_const_data(g, v) : data[v];
    }
    for (int k = 0; k < n->n_outputs; k++) {
      const gr_value *val = &g->values[n->outputs[k]];
      outs[k].dtype = val->dtype;
      outs[k].ndim = val->ndim;
      memcpy(outs[k].shape, val->shape, sizeof val->shape);
      outs[k].data = data[n->outputs[k]] = tensor_alloc(val);
      if (!outs[k].data) rc = TS_ERR(err, TS_ENOMEM, "node '%s'", n->name);
    }
    if (rc) break;
    if (n->kind == TS_GRAPH_CALL) {
      void *args[80];
      int na = 0;
      for (int k = 0; k < n->n_inputs; k++) args[na++] = ins[k].data;
      for (int k = 0; k < n->n_outputs; k++) args[na++] = outs[k].data;
      if (mode == TS_GRAPH_COMPILE)
        rc = ts_rt_kernel_call(jit_find(jp, n->func), args, jp->rt, err);
      else
        rc = ts_interp_run(n->func, args, na, NULL, err);
    } else {
      rc = gr_kernel_run(g, n, ins, outs, err);
    }
    for (int k = 0; k < n->n_outputs && !rc; k++)
      observe(g, observer, ctx, n->outputs[k], outs[k].data);
    for (int k = 0; k < n->n_inputs; k++) {
      int v = n->inputs[k];
      if (v < 0 || g->values[v].const_off >= 0) continue;
      if (--uses[v] == 0) {
        free(data[v]);
        data[v] = NULL;
      }
    }
  }
  for (int i = 0; i < g->n_outputs; i++) {
    int v = g->outputs[i];
    const gr_value *val = &g->values[v];
    outputs[i].name = val->name;
    outputs[i].dtype = val->dtype;
    outputs[i].ndim = val->ndim;
    memcpy(outputs[i].shape, val->shape, sizeof val->shape);
    outputs[i].data = NULL;
    if (rc) continue;
    size_t bytes =
        (size_t)gr_value_elems(val) * ts_dtype_elem_bytes(val->dtype);
    outputs[i].data = ts_malloc(bytes ? bytes : 1);
    if (!outputs[i].data) {
      rc = TS_ERR(err, TS_ENOMEM, "graph output '%s'", val->name);
      continue;
    }
    const void *src = val->const_off >= 0 ? gr_const_data(g, v) : data[v];
    memcpy(outputs[i].data, src, bytes);
  }
  if (rc)
    for (int i = 0; i < n_outputs; i++) {
      free(outputs[i].data);
      outputs[i].data = NULL;
    }
  for (int v = 0; v < g->n_values; v++) free(data[v]);
  free(data);
  free(uses);
  return rc;
}

/* ---- the executor over a memory plan ---- */

typedef struct planned {
  const ts_graph *g;
  const ts_graph_plan *plan;
  uint8_t *arena;
  void **own; /* per value: the input copy or output buffer, else NULL */
  bool *is_output;
} planned;

/* Where value v's bytes are under the plan, or NULL when it has none. */
static void *planned_storage(const planned *p, int v) {
  int r = v;
  if (!p->is_output[v] && p->plan->alias_of[v] >= 0) r = p->plan->alias_of[v];
  if (p->plan->offset[r] >= 0) return p->arena + p->plan->offset[r];
  if (p->own[r]) return p->own[r];
  if (p->g->values[r].const_off >= 0) return gr_const_data(p->g, r);
  return NULL;
}

int ts_graph_execute_planned(const ts_graph *g, const ts_graph_plan *plan,
                             ts_graph_exec_mode mode,
                             const ts_graph_tensor *inputs, int n_inputs,
                             ts_graph_tensor *outputs, int n_outputs,
                             ts_error *err) {
  if (!plan || plan->n_values != g->n_values || !plan->offset ||
      !plan->alias_of)
    return TS_ERR(err, TS_EINVAL,
                  "the plan is not one of this graph (%d values, %d given)",
                  g->n_values, plan ? plan->n_values : 0);
  int rc = check_args(g, inputs, n_inputs, n_outputs, err);
  if (rc) return rc;
  for (int v = 0; v < g->n_values; v++) {
    int a = plan->alias_of[v];
    if (a < -1 || a >= g->n_values || (a >= 0 && plan->alias_of[a] >= 0) ||
        plan->offset[v] < -1 ||
        (plan->offset[v] >= 0 &&
         plan->offset[v] + (int64_t)ts_dtype_elem_bytes(g->values[v].dtype) *
                               gr_value_elems(&g->values[v]) >
             plan->arena_bytes))
      return TS_ERR(err, TS_EINVAL,
                    "plan: value '%s' has an invalid offset or alias",
                    g->values[v].name);
  }
  jit j;
  memset(&j, 0, sizeof j);
  if (mode == TS_GRAPH_COMPILE) {
    rc = jit_build(g, &j, err);
    if (rc) {
      jit_free(&j);
      return rc;
    }
  }
  planned p = {.g = g, .plan = plan};
  size_t arena_n = (size_t)((plan->arena_bytes + 63) & ~(int64_t)63);
  p.arena = ts_aligned_alloc(64, arena_n ? arena_n : 64);
  p.own = ts_calloc((size_t)g->n_values + 1, sizeof *p.own);
  p.is_output = ts_calloc((size_t)g->n_values + 1, sizeof *p.is_output);
  if (!p.arena || !p.own || !p.is_output)
    rc = TS_ERR(err, TS_ENOMEM, "executor: out of memory");
  else
    memset(p.arena, 0xff, arena_n); /* NaN for floats, -1 for integers */
  for (int i = 0; i < g->n_outputs && !rc; i++) {
    int v = g->outputs[i];
    p.is_output[v] = true;
    if (p.own[v] || g->values[v].const_off >= 0 || g->values[v].is_input)
      continue;
    if (!(p.own[v] = tensor_alloc(&g->values[v])))
      rc = TS_ERR(err, TS_ENOMEM, "graph output '%s'", g->values[v].name);
  }
  for (int i = 0; i < n_inputs && !rc; i++) {
    const gr_value *v = &g->values[g->inputs[i]];
    void *copy = tensor_alloc(v);
    if (!copy) {
      rc = TS_ERR(err, TS_ENOMEM, "input '%s': out of memory", v->name);
      break;
    }
    memcpy(copy, inputs[i].data,
           (size_t)gr_value_elems(v) * ts_dtype_elem_bytes(v->dtype));
    p.own[g->inputs[i]] = copy;
  }
  for (int i = 0; i < g->n_nodes && !rc; i++) {
    const gr_node *n = &g->nodes[i];
    gr_tensor ins[64], outs[16];
    if (n->n_inputs > 64 || n->n_outputs > 16) {
      rc =
          TS_ERR(err, TS_EUNSUPPORTED, "node '%s': too many operands", n->name);
      break;
    }
    for (int k = 0; k < n->n_inputs && !rc; k++) {
      memset(&ins[k], 0, sizeof ins[k]);
      int v = n->inputs[k];
      if (v < 0) continue;
      const gr_value *val = &g->values[v];
      ins[k].dtype = val->dtype;
      ins[k].ndim = val->ndim;
      memcpy(ins[k].shape, val->shape, sizeof val->shape);
      if (!(ins[k].data = planned_storage(&p, v)))
        rc = TS_ERR(err, TS_EINVAL, "plan: value '%s' has no storage",
                    val->name);
    }
    for (int k = 0; k < n->n_outputs && !rc; k++) {
      const gr_value *val = &g->values[n->outputs[k]];
      outs[k].dtype = val->dtype;
      outs[k].ndim = val->ndim;
      memcpy(outs[k].shape, val->shape, sizeof val->shape);
      if (!(outs[k].data = planned_storage(&p, n->outputs[k])))
        rc = TS_ERR(err, TS_EINVAL, "plan: value '%s' has no storage",
                    val->name);
    }
    if (rc) break;
    if (n->kind == TS_GRAPH_CALL) {
      void *args[80];
      int na = 0;
      for (int k = 0; k < n->n_inputs; k++) args[na++] = ins[k].data;
      for (int k = 0; k < n->n_outputs; k++) args[na++] = outs[k].data;
      if (mode == TS_GRAPH_COMPILE)
        rc = ts_rt_kernel_call(jit_find(&j, n->func), args, j.rt, err);
      else
        rc = ts_interp_run(n->func, args, na, NULL, err);
    } else if (n->n_outputs == 1 && n->n_inputs >= 1 &&
               outs[0].data == ins[0].data) {
      continue; /* a view whose storage is shared: nothing to do */
    } else {
      rc = gr_kernel_run(g, n, ins, outs, err);
    }
  }
  for (int i = 0; i < g->n_outputs; i++) {
    int v = g->outputs[i];
    const gr_value *val = &g->values[v];
    outputs[i].name = val->name;
    outputs[i].dtype = val->dtype;
    outputs[i].ndim = val->ndim;
    memcpy(outputs[i].shape, val->shape, sizeof val->shape);
    outputs[i].data = NULL;
    if (rc) continue;
    size_t bytes =
        (size_t)gr_value_elems(val) * ts_dtype_elem_bytes(val->dtype);
    outputs[i].data = ts_malloc(bytes ? bytes : 1);
    if (!outputs[i].data) {
      rc = TS_ERR(err, TS_ENOMEM, "graph output '%s'", val->name);
      continue;
    }
    memcpy(outputs[i].data, planned_storage(&p, v), bytes);
  }
  if (rc)
    for (int i = 0; i < n_outputs; i++) {
      free(outputs[i].data);
      outputs[i].data = NULL;
    }
  if (p.own)
    for (int v = 0; v < g->n_values; v++) free(p.own[v]);
  free(p.own);
  free(p.is_output);
  free(p.arena);
  jit_free(&j);
  return rc;
}
