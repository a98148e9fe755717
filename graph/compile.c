/*
 * compile.c — `tessera compile`: a whole graph into a shared library.
 *
 * The graph (after the passes) is a sequence of call_tir nodes and view
 * operators. Each distinct task gets its schedule — the tuning database's
 * best record for exactly this target, replayed, or the default schedule
 * when there is none or the record is unusable — and is built by codegen
 * on a pool of threads into a relocatable object with an entry symbol of
 * its own. The memory planner places the intermediates in one arena; views
 * alias their input. The result is a program: call sites whose arguments
 * are references into the arena, the weights blob and the caller's inputs
 * and outputs, which compile_emit.c turns into C glue and links.
 */
#define _GNU_SOURCE /* vasprintf, nftw */
#include "compile_internal.h"

#include "codegen/codegen.h"
#include "db/db.h"
#include "schedule/schedule.h"
#include "tuner/tuner.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <dlfcn.h>
#include <ftw.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cp_onnx_dtype(ts_dtype t) {
  if (t.lanes != 1) return 0;
  switch (t.code) {
  case TS_DT_FLOAT:
    return t.bits == 32 ? 1 : t.bits == 16 ? 10 : t.bits == 64 ? 11 : 0;
  case TS_DT_BFLOAT: return t.bits == 16 ? 16 : 0;
  case TS_DT_BOOL: return 9;
  case TS_DT_INT:
    return t.bits == 8    ? 3
           : t.bits == 16 ? 5
           : t.bits == 32 ? 6
           : t.bits == 64 ? 7
                          : 0;
  case TS_DT_UINT:
    return t.bits == 8    ? 2
           : t.bits == 16 ? 4
           : t.bits == 32 ? 12
           : t.bits == 64 ? 13
                          : 0;
  default: return 0;
  }
}

static int64_t value_bytes(const gr_value *v) {
  int64_t e = gr_value_elems(v);
  return e < 0 ? -1 : e * (int64_t)ts_dtype_elem_bytes(v->dtype);
}

/* The view operators: their output is their first input's storage. */
static bool is_view_op(const char *op) {
  static const char *const views[] = {"Reshape",   "Flatten",  "Squeeze",
                                      "Unsqueeze", "Identity", "Dropout"};
  for (size_t i = 0; i < sizeof views / sizeof views[0]; i++)
    if (!strcmp(op, views[i])) return true;
  return false;
}

/* ---- the report ------------------------------------------------------- */

void ts_graph_compile_report_clear(ts_graph_compile_report *r) {
  if (!r) return;
  for (int i = 0; i < r->n_tasks; i++) {
    free(r->tasks[i].name);
    free(r->tasks[i].first_node);
    free(r->tasks[i].fallback_note);
    free(r->tasks[i].dispatch_note);
  }
  free(r->tasks);
  free(r->call_task);
  free(r->target);
  free(r->warning);
  memset(r, 0, sizeof *r);
}

/* ---- building the tasks ----------------------------------------------- */

typedef struct build_task {
  const ts_func *func;
  int index;
  const char *prefix;          /* of its symbol: one library's programs apart */
  const char *vendor;          /* run by the vendor library: nothing to build */
  const ts_graph_extern *user; /* or by a user's function (--extern) */
  char *trace_json;            /* the record's trace, or NULL */
  int64_t record_id;
  /* a padded program's task: its parameters' axes along the dynamic
   * dimension and which are mask positions (dyn_loops.c); NULL otherwise */
  unsigned *sym_axes;
  bool *positions;
  int n_params;
  int n_cut; /* loops cut to the run-time length */
  /* per parameter: a constant at every call (NULL: hoist nothing) */
  bool *const_params;
  ts_hoist hoist; /* its prologue, when the kernel was built without it */
  const ts_target *host;  /* this machine, to build the prologue for */
  cp_kernel prologue_obj; /* the prologue built for it (bytes NULL: none) */
  double latency_s;
  /* results */
  bool from_db;
  char *note; /* why the record was not used */
  cp_kernel kernel;
  ts_error err; /* the default build's failure */
  int rc;
} build_task;

typedef struct build_pool {
  build_task *tasks;
  int n;
  const ts_target *target;
  atomic_int next;
} build_pool;

static char *strdupf(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static char *strdupf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = NULL;
  if (vasprintf(&s, fmt, ap) < 0) s = NULL;
  va_end(ap);
  return s;
}

/* Builds f under the entry name of task `index`; fills t->kernel. */
static int build_named(build_task *t, const ts_func *f, const ts_target *tgt,
                       ts_error *err) {
  ts_func *copy = ts_func_copy(f);
  if (!copy) return TS_ERR(err, TS_ENOMEM, "out of memory");
  char name[96];
  snprintf(name, sizeof name, "%stsk%d_%.60s", t->prefix ? t->prefix : "",
           t->index, ts_func_name(f));
  ts_func_set_name(copy, name);
  t->n_cut = 0;
  if (t->sym_axes && gr_loops_to_length(copy, t->sym_axes, t->positions,
                                        t->n_params, &t->n_cut, err) != TS_OK) {
    ts_func_free(copy);
    return err ? err->code : TS_EINTERNAL;
  }
  ts_build_result br;
  int rc = ts_build(copy, tgt, NULL, &br, err);
  ts_func_free(copy);
  if (rc) return rc;
  if (br.artifact->kind != TS_ARTIFACT_CPU_OBJECT) {
    ts_build_result_clear(&br);
    return TS_ERR(err, TS_EUNSUPPORTED,
                  "only CPU targets can be compiled into a library");
  }
  t->kernel.bytes = ts_malloc(br.artifact->n_bytes ? br.artifact->n_bytes : 1);
  if (!t->kernel.bytes) {
    ts_build_result_clear(&br);
    return TS_ERR(err, TS_ENOMEM, "out of memory");
  }
  memcpy(t->kernel.bytes, br.artifact->bytes, br.artifact->n_bytes);
  t->kernel.n_bytes = br.artifact->n_bytes;
  snprintf(t->kernel.entry, sizeof t->kernel.entry, "%s", br.artifact->entry);
  ts_build_result_clear(&br);
  return TS_OK;
}

/* The task's prologue built for this machine, to run at compile time
 * (t->prologue_obj; left empty when it does not build: the interpreter
 * runs it then). */
static void build_prologue(build_task *t) {
  free(t->prologue_obj.bytes);
  memset(&t->prologue_obj, 0, sizeof t->prologue_obj);
  ts_build_result br;
  if (!t->host || ts_build(t->hoist.prologue, t->host, NULL, &br, NULL)) return;
  if (br.artifact->kind == TS_ARTIFACT_CPU_OBJECT &&
      (t->prologue_obj.bytes = ts_malloc(br.artifact->n_bytes))) {
    memcpy(t->prologue_obj.bytes, br.artifact->bytes, br.artifact->n_bytes);
    t->prologue_obj.n_bytes = br.artifact->n_bytes;
    snprintf(t->prologue_obj.entry, sizeof t->prologue_obj.entry, "%s",
             br.artifact->entry);
  }
  ts_build_result_clear(&br);
}

/* Scheduled function f built: without its constant stages where the
 * task's calls all pass constants to them (ts_func_hoist_const; the
 * prologue kept in t->hoist for make_calls to run per call), else whole.
 * A split that fails, or whose kernel does not build, leaves f whole. */
static int build_scheduled(build_task *t, const ts_func *f,
                           const ts_target *tgt, ts_error *err) {
  ts_hoist_clear(&t->hoist);
  if (t->const_params &&
      ts_func_hoist_const(f, t->const_params, &t->hoist, NULL) == TS_OK &&
      t->hoist.prologue) {
    int rc = build_named(t, t->hoist.main, tgt, NULL);
    ts_func_free(t->hoist.main);
    t->hoist.main = NULL;
    if (rc == TS_OK) {
      build_prologue(t);
      return TS_OK;
    }
  }
  ts_hoist_clear(&t->hoist);
  return build_named(t, f, tgt, err);
}

/* The record's trace replayed on the task's function, then built. */
static int build_from_record(build_task *t, const ts_target *tgt,
                             ts_error *err) {
  ts_trace *full = NULL;
  ts_sched *s = NULL;
  int rc = ts_record_traces(t->trace_json, &full, NULL, err);
  if (!rc) rc = ts_trace_apply(full, t->func, 1, &s, err);
  if (!rc) rc = build_scheduled(t, ts_sched_func(s), tgt, err);
  ts_sched_destroy(s);
  ts_trace_free(full);
  return rc;
}

/* The default schedule of the task's function, built. */
static int build_default(build_task *t, const ts_target *tgt, ts_error *err) {
  ts_sched *s = NULL;
  int rc = ts_default_schedule(t->func, tgt, &s, err);
  if (!rc) rc = build_scheduled(t, ts_sched_func(s), tgt, err);
  ts_sched_destroy(s);
  return rc;
}

static void run_build(build_task *t, const ts_target *tgt) {
  ts_error err;
  ts_error_clear(&err);
  if (t->vendor || t->user) return;
  if (t->trace_json) {
    if (build_from_record(t, tgt, &err) == TS_OK) {
      t->from_db = true;
      return;
    }
    t->note = strdupf("record %lld: %s", (long long)t->record_id, err.msg);
    ts_hoist_clear(&t->hoist);
    free(t->kernel.bytes);
    memset(&t->kernel, 0, sizeof t->kernel);
    ts_error_clear(&err);
  }
  t->rc = build_default(t, tgt, &t->err);
}

static void *build_worker(void *arg) {
  build_pool *p = arg;
  for (;;) {
    int i = atomic_fetch_add(&p->next, 1);
    if (i >= p->n) return NULL;
    run_build(&p->tasks[i], p->target);
  }
}

/* Builds every task on up to n_threads threads (the caller is one). */
static void build_all(build_pool *p, int n_threads) {
  if (n_threads <= 0) {
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    n_threads = c > 0 ? (int)c : 1;
  }
  if (n_threads > p->n) n_threads = p->n;
  if (n_threads > 256) n_threads = 256;
  pthread_t th[256];
  int started = 0;
  for (int i = 1; i < n_threads; i++)
    if (pthread_create(&th[started], NULL, build_worker, p) == 0) started++;
  build_worker(p);
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
}

/* ---- the program ------------------------------------------------------ */

/* Where value v is at run time. */
static int value_ref(const ts_graph *g, const ts_graph_plan *plan, int v,
                     cp_ref *out, ts_error *err) {
  if (plan->alias_of[v] >= 0) v = plan->alias_of[v];
  const gr_value *val = &g->values[v];
  for (int i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] == v && val->const_off < 0 && !val->is_input) {
      *out = (cp_ref){CP_OUTPUT, i, 0};
      return TS_OK;
    }
  for (int i = 0; i < g->n_inputs; i++)
    if (g->inputs[i] == v) {
      *out = (cp_ref){CP_INPUT, i, 0};
      return TS_OK;
    }
  if (val->const_off >= 0) {
    *out = (cp_ref){CP_WEIGHT, 0, val->const_off};
    return TS_OK;
  }
  if (plan->offset[v] >= 0) {
    *out = (cp_ref){CP_ARENA, 0, plan->offset[v]};
    return TS_OK;
  }
  return TS_ERR(err, TS_EINTERNAL,
                "value '%s' has no storage in the memory plan", val->name);
}

static void program_free(cp_program *p) {
  for (int i = 0; i < p->n_kernels; i++) free(p->kernels[i].bytes);
  free(p->kernels);
  free(p->calls);
  free(p->args);
  free(p->copies);
  free(p->info_json);
  free(p->extra);
  memset(p, 0, sizeof *p);
}

/* Checks that every node can be compiled: calls and views only, with
 * known shapes. */
static int check_graph(const ts_graph *g, ts_error *err) {
  for (int i = 0; i < g->n_nodes; i++) {
    const gr_node *n = &g->nodes[i];
    if (n->kind == TS_GRAPH_OP && !is_view_op(n->op))
      return TS_ERR(err, TS_EUNSUPPORTED,
                    "node '%s' (%s): this operator is not a kernel "
                    "(call_tir) yet, so it cannot be compiled; compile "
                    "handles call_tir nodes and the views Reshape, Flatten, "
                    "Squeeze, Unsqueeze, Identity and Dropout",
                    n->name, n->op);
    for (int k = 0; k < n->n_outputs; k++)
      if (value_bytes(&g->values[n->outputs[k]]) < 0)
        return TS_ERR(err, TS_EINVAL,
                      "node '%s': output shapes are not known (run the "
                      "passes first)",
                      n->name);
    if (n->kind == TS_GRAPH_OP) {
      if (n->n_inputs < 1 || n->inputs[0] < 0 || n->n_outputs != 1)
        return TS_ERR(err, TS_EINVAL, "node '%s' (%s): malformed view", n->name,
                      n->op);
      const gr_value *a = &g->values[n->inputs[0]];
      const gr_value *b = &g->values[n->outputs[0]];
      if (value_bytes(a) != value_bytes(b) || !ts_dtype_eq(a->dtype, b->dtype))
        return TS_ERR(err, TS_EINVAL,
                      "node '%s' (%s): the view's output differs in size or "
                      "dtype from its input",
                      n->name, n->op);
    }
  }
  for (int i = 0; i < g->n_inputs; i++)
    if (value_bytes(&g->values[g->inputs[i]]) < 0)
      return TS_ERR(err, TS_EINVAL, "graph input '%s': shape not known",
                    g->values[g->inputs[i]].name);
  for (int i = 0; i < g->n_outputs; i++)
    if (value_bytes(&g->values[g->outputs[i]]) < 0)
      return TS_ERR(err, TS_EINVAL, "graph output '%s': shape not known",
                    g->values[g->outputs[i]].name);
  return TS_OK;
}

static int length_input_index(const ts_graph *g);

/* Which parameters of task `task` every call passes a constant (NULL when
 * none, or out of memory). */
static bool *constant_params(const ts_graph *g, const ts_graph_plan *plan,
                             const ts_graph_task *t) {
  int np = ts_func_n_params(t->func), n_const = 0;
  bool *c = ts_calloc((size_t)np + 1, sizeof *c), seen = false;
  for (int i = 0; c && i < np; i++) c[i] = true;
  for (int i = 0; c && i < g->n_nodes; i++) {
    const gr_node *n = &g->nodes[i];
    if (n->kind != TS_GRAPH_CALL ||
        !ts_hash128_eq(ts_func_hash(n->func), t->hash) ||
        !ts_func_equal(n->func, t->func))
      continue;
    seen = true;
    for (int k = 0, param = 0; k < n->n_inputs + n->n_outputs; k++) {
      int v = k < n->n_inputs ? n->inputs[k] : n->outputs[k - n->n_inputs];
      if (v < 0) continue; /* omitted optional input: not a parameter */
      cp_ref r;
      bool weight = k < n->n_inputs &&
                    value_ref(g, plan, v, &r, NULL) == TS_OK &&
                    r.kind == CP_WEIGHT;
      if (param < np && !weight) c[param] = false;
      param++;
    }
  }
  for (int i = 0; c && i < np; i++) n_const += c[i];
  if (!seen || !n_const) {
    free(c);
    return NULL;
  }
  return c;
}

/* Runs bt's prologue on args: its object for this machine on 2 threads,
 * or where there is none (or it does not load), interpreted. */
static int run_prologue(const build_task *bt, void *const *args, int n,
                        ts_error *err) {
  ts_rt_kernel *k = NULL;
  ts_runtime *rt = NULL;
  if (bt->prologue_obj.bytes &&
      ts_rt_kernel_load(bt->prologue_obj.bytes, bt->prologue_obj.n_bytes,
                        bt->prologue_obj.entry, &k, NULL) == TS_OK &&
      ts_runtime_create(2, &rt, NULL) == TS_OK) {
    int rc = ts_rt_kernel_call(k, args, rt, err);
    ts_runtime_destroy(rt);
    ts_rt_kernel_unload(k);
    return rc;
  }
  ts_rt_kernel_unload(k);
  return ts_interp_run(bt->hoist.prologue, args, n, NULL, err);
}

/* The prologue of call c's kernel (bt's hoisted stages) run on the call's
 * constants, its outputs appended to p->extra, and a weights reference to
 * each pushed as the call's next arguments; a call with the same
 * constants as an earlier call of the task shares that call's. */
static int prepack_args(const ts_graph *g, const build_task *bt,
                        const cp_call *c, cp_program *p,
                        ts_graph_compile_task *rt, ts_error *err) {
  const ts_hoist *h = &bt->hoist;
  int np = ts_func_n_params(bt->func);
  for (int k = 0; k < h->n_inputs; k++)
    if (p->args[c->first + h->inputs[k]].kind != CP_WEIGHT)
      return TS_ERR(err, TS_EINTERNAL,
                    "task %d: the prologue's input %d is not a constant",
                    bt->index, k);
  for (int e = 0; e < p->n_calls - 1; e++) { /* an earlier call, the same */
    const cp_call *o = &p->calls[e];
    bool same = o->task == c->task;
    for (int k = 0; same && k < h->n_inputs; k++)
      same = p->args[o->first + h->inputs[k]].offset ==
             p->args[c->first + h->inputs[k]].offset;
    if (!same) continue;
    for (int j = 0; j < h->n_outputs; j++)
      p->args[p->n_args++] = p->args[o->first + np + j];
    return TS_OK;
  }
  int n = ts_func_n_params(h->prologue), rc = TS_OK;
  void **args = ts_calloc((size_t)n, sizeof *args);
  if (!args) return TS_ERR(err, TS_ENOMEM, "compile: out of memory");
  for (int k = 0; k < h->n_inputs; k++)
    args[k] = g->consts + p->args[c->first + h->inputs[k]].offset;
  for (int j = 0; j < h->n_outputs && !rc; j++) {
    int64_t bytes =
        ts_buffer_bytes(ts_func_param(h->prologue, h->n_inputs + j));
    if (!(args[h->n_inputs + j] = ts_calloc(1, (size_t)bytes)))
      rc = TS_ERR(err, TS_ENOMEM, "compile: out of memory");
  }
  if (!rc) rc = run_prologue(bt, args, n, err);
  int64_t base = (int64_t)((g->consts_len + 63) & ~(size_t)63);
  for (int j = 0; j < h->n_outputs && !rc; j++) {
    int64_t bytes =
        ts_buffer_bytes(ts_func_param(h->prologue, h->n_inputs + j));
    int64_t at = (p->extra_len + 63) & ~(int64_t)63;
    if (at + bytes > p->extra_cap) {
      int64_t cap = p->extra_cap ? 2 * p->extra_cap : 1 << 20;
      while (cap < at + bytes) cap *= 2;
      unsigned char *x = realloc(p->extra, (size_t)cap);
      if (!x) {
        rc = TS_ERR(err, TS_ENOMEM, "compile: out of memory");
        break;
      }
      p->extra = x;
      p->extra_cap = cap;
    }
    memset(p->extra + p->extra_len, 0, (size_t)(at - p->extra_len));
    memcpy(p->extra + at, args[h->n_inputs + j], (size_t)bytes);
    p->extra_len = at + bytes;
    p->args[p->n_args++] = (cp_ref){CP_WEIGHT, 0, base + at};
    rt->prepacked_bytes += bytes;
  }
  for (int j = 0; j < h->n_outputs; j++) free(args[h->n_inputs + j]);
  free(args);
  if (rc && err && !strstr(err->msg, "prologue")) {
    char msg[sizeof err->msg];
    snprintf(msg, sizeof msg, "%s", err->msg);
    TS_ERR(err, rc, "task %d: its prologue on the constants: %s", bt->index,
           msg);
  }
  return rc;
}

/* Call sites, their argument references and the output copies. */
static int make_calls(const ts_graph *g, const ts_graph_plan *plan,
                      const ts_graph_task *tasks, int n_tasks,
                      const build_task *bt, ts_graph_compile_report *rep,
                      cp_program *p, ts_error *err) {
  int n_args = 0, n_calls = 0;
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].kind == TS_GRAPH_CALL) {
      n_calls++;
      n_args += g->nodes[i].n_inputs + g->nodes[i].n_outputs + 1;
    }
  for (int k = 0; k < n_tasks; k++)
    n_args += bt[k].hoist.n_outputs * tasks[k].count;
  p->calls = ts_calloc((size_t)n_calls + 1, sizeof *p->calls);
  p->args = ts_calloc((size_t)n_args + 1, sizeof *p->args);
  p->copies = ts_calloc((size_t)g->n_outputs + 1, sizeof *p->copies);
  if (!p->calls || !p->args || !p->copies)
    return TS_ERR(err, TS_ENOMEM, "compile: out of memory");
  int64_t scratch = plan->arena_bytes;
  for (int i = 0; i < g->n_nodes; i++) {
    const gr_node *n = &g->nodes[i];
    if (n->kind != TS_GRAPH_CALL) continue;
    ts_hash128 h = ts_func_hash(n->func);
    int task = -1;
    for (int k = 0; k < n_tasks && task < 0; k++)
      if (ts_hash128_eq(tasks[k].hash, h) &&
          ts_func_equal(tasks[k].func, n->func))
        task = k;
    if (task < 0)
      return TS_ERR(err, TS_EINTERNAL, "node '%s': no task", n->name);
    cp_call *c = &p->calls[p->n_calls++];
    c->task = task;
    c->node = i;
    c->first = p->n_args;
    for (int k = 0; k < n->n_inputs + n->n_outputs; k++) {
      bool is_in = k < n->n_inputs;
      int v = is_in ? n->inputs[k] : n->outputs[k - n->n_inputs];
      if (v < 0) continue; /* omitted optional input: not a parameter */
      cp_ref r;
      if (value_ref(g, plan, v, &r, NULL) != TS_OK) {
        if (is_in) return value_ref(g, plan, v, &r, err);
        /* an output nothing reads: scratch after the arena */
        r = (cp_ref){CP_ARENA, 0, scratch};
        scratch += (value_bytes(&g->values[v]) + 63) & ~(int64_t)63;
      }
      if (!is_in && (r.kind == CP_WEIGHT || r.kind == CP_INPUT))
        return TS_ERR(err, TS_EINTERNAL,
                      "node '%s': output '%s' would overwrite a %s", n->name,
                      g->values[v].name,
                      r.kind == CP_WEIGHT ? "constant" : "graph input");
      p->args[p->n_args++] = r;
    }
    int hoisted = bt[task].hoist.prologue ? bt[task].hoist.n_outputs : 0;
    if (hoisted) {
      int rc = prepack_args(g, &bt[task], c, p, &rep->tasks[task], err);
      if (rc) return rc;
      rep->tasks[task].prepacked = hoisted;
    }
    if (p->kernels[task].with_length) /* dyn_loops.c: the last parameter */
      p->args[p->n_args++] = (cp_ref){CP_INPUT, length_input_index(g), 0};
    c->n = p->n_args - c->first;
    if (c->n !=
        ts_func_n_params(n->func) + hoisted + p->kernels[task].with_length)
      return TS_ERR(err, TS_EINTERNAL,
                    "node '%s': %d arguments for %d parameters", n->name, c->n,
                    ts_func_n_params(n->func));
    if (c->n > p->max_args) p->max_args = c->n;
  }
  p->arena_bytes = scratch;
  /* graph outputs not written in place by a kernel */
  for (int i = 0; i < g->n_outputs; i++) {
    int v = g->outputs[i];
    cp_ref r;
    int rc = value_ref(g, plan, v, &r, err);
    if (rc) return rc;
    if (r.kind == CP_OUTPUT && r.index == i) continue;
    p->copies[p->n_copies++] = (cp_copy){i, r, value_bytes(&g->values[v])};
  }
  return TS_OK;
}

static char *info_json(const cp_program *p, const char *target,
                       const ts_graph_compile_report *r) {
  unsigned long failures = ts_alloc_failures();
  cJSON *root = cJSON_CreateObject();
  cJSON_AddNumberToObject(root, "abi", 1);
  cJSON_AddStringToObject(root, "model", p->model_name);
  cJSON_AddStringToObject(root, "target", target);
  cJSON_AddNumberToObject(root, "arena_bytes", (double)p->arena_bytes);
  cJSON_AddNumberToObject(root, "constant_bytes",
                          (double)(p->g->consts_len + (size_t)p->extra_len));
  cJSON_AddNumberToObject(root, "calls", p->n_calls);
  /* how the 4-D inputs and outputs are laid out (--input-layout,
   * --output-layout): "nchw" as the model declares them, or "nhwc" */
  cJSON_AddStringToObject(root, "input_layout",
                          p->g->input_nhwc ? "nhwc" : "nchw");
  cJSON_AddStringToObject(root, "output_layout",
                          p->g->output_nhwc ? "nhwc" : "nchw");
  cJSON *arr = cJSON_AddArrayToObject(root, "tasks");
  for (int i = 0; i < r->n_tasks; i++) {
    const ts_graph_compile_task *t = &r->tasks[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "hash", t->hash);
    cJSON_AddStringToObject(o, "name", t->name ? t->name : "");
    cJSON_AddNumberToObject(o, "count", t->count);
    cJSON_AddStringToObject(o, "source", t->source);
    if (isnan(t->latency_s))
      cJSON_AddNullToObject(o, "latency_s");
    else
      cJSON_AddNumberToObject(o, "latency_s", t->latency_s);
    ts_json_add(arr, NULL, o);
  }
  char *s = ts_json_print(root, failures, false);
  cJSON_Delete(root);
  return s;
}

/* The one warning: tasks on the default schedule, why, and the command
 * that tunes them. */
static char *make_warning(const ts_graph_compile_options *o,
                          const ts_graph_compile_report *r) {
  int n_default = 0;
  for (int i = 0; i < r->n_tasks; i++)
    n_default += !strcmp(r->tasks[i].source, "default");
  if (!n_default) return NULL;
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return NULL;
  const char *db = o->db ? ts_db_path(o->db) : NULL;
  fprintf(f,
          "%d of %d tasks have no usable tuned record for this target%s%s "
          "and use the default schedule:",
          n_default, r->n_tasks, db ? " in " : " (no database)", db ? db : "");
  for (int i = 0; i < r->n_tasks; i++) {
    const ts_graph_compile_task *t = &r->tasks[i];
    if (strcmp(t->source, "default")) continue;
    fprintf(f, "\n  %s %s (%s)", t->hash, t->name, t->first_node);
    if (t->fallback_note) fprintf(f, ": unusable %s", t->fallback_note);
  }
  fprintf(f, "\ntune them with: tessera tune --model %s --db %s",
          o->model_path ? o->model_path : "MODEL.onnx", db ? db : "tessera.db");
  for (int i = 0; i < o->n_input_shapes; i++)
    fprintf(f, " --input-shape %s", o->input_shapes[i]);
  for (int i = 0; i < o->n_dims; i++) fprintf(f, " --dim %s", o->dims[i]);
  if (o->target) fprintf(f, " --target '%s'", o->target);
  fprintf(f, " --trials N");
  fclose(f);
  return buf;
}

static int rm_entry(const char *path, const struct stat *sb, int flag,
                    struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  remove(path);
  return 0;
}

/* ---- user functions (--extern) --------------------------------------- */

static bool c_identifier(const char *s) {
  if (!s || !(isalpha((unsigned char)*s) || *s == '_')) return false;
  for (; *s; s++)
    if (!(isalnum((unsigned char)*s) || *s == '_')) return false;
  return true;
}

/* Which task each --extern names (its hash, or a call node of it), after
 * checking the file and the symbol; bt[i].user is set. */
static int resolve_externs(const ts_graph *g, const ts_graph_task *tasks,
                           int n_tasks, const ts_graph_compile_options *o,
                           const ts_graph_compile_report *r, build_task *bt,
                           ts_error *err) {
  for (int e = 0; e < o->n_externs; e++) {
    const ts_graph_extern *x = &o->externs[e];
    const char *key = x->key ? x->key : "";
    if (!c_identifier(x->symbol))
      return TS_ERR(err, TS_EINVAL,
                    "--extern %s: '%s' is not a C function name", key,
                    x->symbol ? x->symbol : "");
    const char *dot = x->path ? strrchr(x->path, '.') : NULL;
    if (!dot || (strcmp(dot, ".c") && strcmp(dot, ".o") && strcmp(dot, ".a")))
      return TS_ERR(err, TS_EINVAL,
                    "--extern %s: '%s' is not a C source (.c), an object "
                    "(.o) or an archive (.a)",
                    key, x->path ? x->path : "");
    struct stat st;
    errno = 0;
    if (stat(x->path, &st) != 0 || !S_ISREG(st.st_mode) ||
        access(x->path, R_OK) != 0)
      return TS_ERR(err, TS_ENOTFOUND, "--extern %s: cannot read '%s': %s", key,
                    x->path, errno ? strerror(errno) : "not a regular file");
    int task = -1;
    for (int i = 0; task < 0 && i < n_tasks; i++)
      if (!strcmp(r->tasks[i].hash, key)) task = i;
    for (int c = 0; task < 0 && c < g->n_nodes; c++) {
      const gr_node *n = &g->nodes[c];
      if (n->kind != TS_GRAPH_CALL || strcmp(n->name, key)) continue;
      for (int i = 0; task < 0 && i < n_tasks; i++)
        if (ts_func_equal(tasks[i].func, n->func)) task = i;
    }
    if (task < 0)
      return TS_ERR(err, TS_ENOTFOUND,
                    "--extern %s: no task has this hash and no kernel call is "
                    "named so ('tessera graph tasks MODEL' lists the tasks' "
                    "hashes, 'tessera graph show MODEL' the calls)",
                    key);
    if (bt[task].user)
      return TS_ERR(err, TS_EINVAL,
                    "--extern %s: task %s (%s) already runs '%s' from '%s'",
                    key, r->tasks[task].hash, r->tasks[task].name,
                    bt[task].user->symbol, bt[task].user->path);
    bt[task].user = x;
  }
  return TS_OK;
}

/* ---- vendor dispatch ------------------------------------------------- */

typedef struct vendor_lib {
  void *handle;
  int (*create)(const char *, void *const *, int, void **, char *, size_t);
  void (*destroy)(void *);
  char why[512]; /* why it could not be loaded */
} vendor_lib;

static void vendor_open(vendor_lib *v, const char *runtime_dir) {
  char path[4200];
  snprintf(path, sizeof path, "%s/libtessera_dnnl.so", runtime_dir);
  v->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!v->handle) {
    snprintf(v->why, sizeof v->why, "the vendor library: %s", dlerror());
    return;
  }
  *(void **)&v->create = dlsym(v->handle, "ts_vendor_dnnl_create");
  *(void **)&v->destroy = dlsym(v->handle, "ts_vendor_dnnl_destroy");
  if (!v->create || !v->destroy) {
    snprintf(v->why, sizeof v->why, "'%.400s' lacks ts_vendor_dnnl_create",
             path);
    dlclose(v->handle);
    v->handle = NULL;
  }
}

/* Whether the vendor library builds node n's call as the model will at
 * create: the graph's constants as the weights, and in place of the
 * arena's addresses stand-ins equal where the memory plan shares storage
 * (an in-place residual becomes oneDNN's sum post-op); why not into note. */
static bool vendor_usable(const vendor_lib *v, const ts_graph *g,
                          const ts_graph_plan *plan, const gr_node *n,
                          const char *desc, char **note) {
  if (!v->handle) {
    *note = strdupf("vendor call refused: %s", v->why);
    return false;
  }
  void *args[66] = {0}; /* the vendor call takes at most 64 arguments */
  int k = 0;
  for (int i = 0; i < n->n_inputs + n->n_outputs && k < 64; i++) {
    bool in = i < n->n_inputs;
    int val = in ? n->inputs[i] : n->outputs[i - n->n_inputs];
    if (val < 0) continue;
    cp_ref r;
    if (gr_is_const(g, val))
      args[k] = gr_const_data(g, val);
    else if (value_ref(g, plan, val, &r, NULL) == TS_OK && r.kind == CP_ARENA)
      args[k] = (void *)(uintptr_t)(4096 + r.offset); /* never read */
    k++;
  }
  void *op = NULL;
  char why[600] = "";
  if (v->create(desc, args, 1, &op, why, sizeof why) != 0) {
    *note = strdupf("vendor call refused: %s", why);
    return false;
  }
  v->destroy(op);
  return true;
}

/* Whether the vendor call beat the task's kernel in the database's
 * measurements on exactly this target: the oneDNN level the confirmation
 * stored side by side with the confirmed best (tessera tune --model), or,
 * measured apart, its latency against the best record's. *why says which
 * figures decided. */
bool gr_onednn_level(struct ts_db *db, const ts_func *f, const char *target,
                     ts_db_baseline *out) {
  int64_t wid = 0;
  ts_db_baseline *bl = NULL;
  int n = 0;
  memset(out, 0, sizeof *out);
  if (!db || ts_db_find_workload(db, f, &wid) != TS_OK ||
      ts_db_baselines(db, wid, target, &bl, &n) != TS_OK)
    return false;
  const ts_db_baseline *use = NULL;
  for (int i = 0; i < n; i++)
    if (!strcmp(bl[i].vendor, "onednn") &&
        (!use || bl[i].side_rounds > use->side_rounds))
      use = &bl[i];
  if (use) {
    *out = *use;
    out->target = out->vendor = NULL;
  }
  ts_db_baselines_free(bl, n);
  return use != NULL;
}

static bool vendor_faster(ts_db *db, const ts_func *f, const char *target,
                          double flops, double tuned_s, double bar, char *why,
                          size_t size) {
  ts_db_baseline use;
  if (!gr_onednn_level(db, f, target, &use)) return false;
  bool faster = false;
  if (use.side_rounds > 0 && isfinite(use.side_ratio)) {
    faster = use.side_ratio < bar;
    snprintf(why, size, "side by side: oneDNN %.2fx the kernel's latency",
             use.side_ratio);
  } else if (use.gflops > 0 && flops > 0 && isfinite(tuned_s)) {
    double vs = flops / (use.gflops * 1e9);
    faster = vs < tuned_s * bar;
    snprintf(why, size, "oneDNN %.1f us against the record's %.1f us", vs * 1e6,
             tuned_s * 1e6);
  }
  return faster;
}

/* The workload's record of rank `rank` in the database's order, or its
 * last when it has fewer (ts_graph_compile_options.rank). */
static int ranked_record(ts_db *db, const ts_func *f, const char *target,
                         int rank, ts_db_record *out) {
  int64_t wid;
  ts_db_record *top = NULL;
  int n = 0;
  if (ts_db_find_workload(db, f, &wid) != TS_OK ||
      ts_db_top_k(db, wid, target, rank + 1, &top, &n) != TS_OK || n == 0)
    return TS_ENOTFOUND;
  int k = rank < n ? rank : n - 1;
  *out = top[k];
  memset(&top[k], 0, sizeof top[k]);
  ts_db_records_free(top, n);
  return TS_OK;
}

/* Graph g into *prog (kernels built, calls placed, its info): the part of
 * a compile before the link. Kernel symbols start with `prefix`; the
 * report's tasks are filled (r->target set by the caller). */
/* ---- kernels over the run-time length (padded programs) -------------- */

/* The index of a padded program's length input, or -1. */
static int length_input_index(const ts_graph *g) {
  if (g->n_syms != 1 || !g->sym_names[0]) return -1;
  char name[300];
  snprintf(name, sizeof name, "%s%s", TS_GRAPH_LENGTH_PREFIX, g->sym_names[0]);
  for (int i = 0; i < g->n_inputs; i++)
    if (!strcmp(g->values[g->inputs[i]].name, name)) return i;
  return -1;
}

static unsigned value_sym_axes(const ts_graph *g, int v) {
  const gr_value *val = &g->values[v];
  unsigned m = 0;
  for (int d = 0; val->sym && d < val->ndim && d < 32; d++)
    if (val->sym[d] && !strcmp(val->sym[d], g->sym_names[0])) m |= 1u << d;
  return m;
}

/* For each task of a padded program, its parameters' axes along the
 * dynamic dimension (those of every call site) and which parameters are a
 * mask's positions: what dyn_loops.c needs to cut its loops. */
static int length_params(const ts_graph *g, const ts_graph_task *tasks,
                         int n_tasks, build_task *bt, ts_error *err) {
  const char *off = getenv("TESSERA_LENGTH_LOOPS"); /* "0": compare */
  if (length_input_index(g) < 0 || (off && !strcmp(off, "0"))) return TS_OK;
  ts_hash128 *h = ts_calloc((size_t)g->n_nodes + 1, sizeof *h);
  if (!h) return TS_ERR(err, TS_ENOMEM, "compile: out of memory");
  for (int c = 0; c < g->n_nodes; c++)
    if (g->nodes[c].kind == TS_GRAPH_CALL)
      h[c] = ts_func_hash(g->nodes[c].func);
  size_t plen = strlen(GR_PAD_POSITIONS);
  int rc = TS_OK;
  for (int i = 0; i < n_tasks && !rc; i++) {
    int np = ts_func_n_params(tasks[i].func);
    unsigned *ax = ts_calloc((size_t)np + 1, sizeof *ax);
    bool *pos = ts_calloc((size_t)np + 1, sizeof *pos);
    if (!ax || !pos) {
      free(ax), free(pos);
      rc = TS_ERR(err, TS_ENOMEM, "compile: out of memory");
      break;
    }
    for (int k = 0; k < np; k++) ax[k] = ~0u;
    bool seen = false;
    for (int c = 0; c < g->n_nodes; c++) {
      const gr_node *n = &g->nodes[c];
      if (n->kind != TS_GRAPH_CALL || !ts_hash128_eq(h[c], tasks[i].hash) ||
          !ts_func_equal(n->func, tasks[i].func))
        continue;
      seen = true;
      int k = 0;
      for (int j = 0; j < n->n_inputs + n->n_outputs && k < np; j++) {
        int v = j < n->n_inputs ? n->inputs[j] : n->outputs[j - n->n_inputs];
        if (v < 0) continue;
        ax[k] &= value_sym_axes(g, v);
        pos[k] |= !strncmp(g->values[v].name, GR_PAD_POSITIONS, plen);
        k++;
      }
    }
    bool any = false;
    for (int k = 0; seen && k < np; k++) any |= ax[k] != 0;
    if (!any) {
      free(ax), free(pos);
      continue;
    }
    bt[i].sym_axes = ax;
    bt[i].positions = pos;
    bt[i].n_params = np;
  }
  free(h);
  return rc;
}

/* One program: prev_size is the bucket below a padded program's (0 for
 * the first), -1 for a program of fixed sizes. */
static int compile_program(const ts_graph *g, const ts_graph_compile_options *o,
                           const ts_target *tgt, const char *prefix,
                           int64_t prev_size, ts_graph_compile_report *r,
                           cp_program *prog, ts_error *err) {
  int rc;
  ts_graph_task *tasks = NULL;
  int n_tasks = 0;
  ts_graph_plan plan;
  memset(&plan, 0, sizeof plan);
  build_task *bt = NULL;
  ts_target *host = NULL; /* this machine: the prologues run here */

  rc = ts_graph_tasks(g, &tasks, &n_tasks, err);
  if (rc) goto done;
  r->tasks = ts_calloc((size_t)n_tasks + 1, sizeof *r->tasks);
  bt = ts_calloc((size_t)n_tasks + 1, sizeof *bt);
  if (!r->target || !r->tasks || !bt) {
    rc = TS_ERR(err, TS_ENOMEM, "compile: out of memory");
    goto done;
  }
  r->n_tasks = n_tasks;
  for (int i = 0; i < n_tasks; i++) {
    ts_graph_compile_task *t = &r->tasks[i];
    ts_hash128_hex(tasks[i].hash, t->hash);
    t->name = ts_strdup(ts_func_name(tasks[i].func));
    t->first_node = ts_strdup(tasks[i].first_node);
    t->count = tasks[i].count;
    t->flops = tasks[i].flops;
    t->source = "default";
    t->latency_s = NAN;
    bt[i].func = tasks[i].func;
    bt[i].index = i;
    bt[i].prefix = prefix;
    bt[i].latency_s = NAN;
    if (!t->name || !t->first_node) {
      rc = TS_ERR(err, TS_ENOMEM, "compile: out of memory");
      goto done;
    }
  }

  /* memory plan */
  double t0 = ts_now_seconds();
  rc = ts_graph_plan_memory(g, &plan, err);
  if (rc) goto done;
  r->plan_ms = (ts_now_seconds() - t0) * 1e3;

  /* the database's best record of each task on exactly this target */
  t0 = ts_now_seconds();
  for (int i = 0; o->db && i < n_tasks; i++) {
    ts_db_record rec;
    memset(&rec, 0, sizeof rec);
    if (o->rank > 0 ? ranked_record(o->db, tasks[i].func, r->target, o->rank,
                                    &rec) == TS_OK
                    : ts_db_best_by_func(o->db, tasks[i].func, r->target,
                                         &rec) == TS_OK) {
      bt[i].trace_json = rec.trace_json;
      rec.trace_json = NULL;
      bt[i].record_id = rec.id;
      bt[i].latency_s = ts_db_record_seconds(&rec);
    }
    ts_db_record_clear(&rec);
  }
  r->lookup_ms = (ts_now_seconds() - t0) * 1e3;

  /* the tasks users' functions run */
  rc = resolve_externs(g, tasks, n_tasks, o, r, bt, err);
  if (rc) goto done;

  /* the loops a padded program's kernels cut to the run-time length */
  rc = length_params(g, tasks, n_tasks, bt, err);
  if (rc) goto done;
  /* A vendor call runs the bucket's size whatever the length; a kernel
   * that loops to the length does about n / B of the work. Over the sizes
   * a bucket serves (the one below it + 1 .. B), that is on average
   * (1 + below / B) / 2 of its time at B, the bar the vendor must beat. */
  double len_bar = 1;
  if (prev_size >= 0 && g->n_syms == 1 && g->sym_sizes[0] > 0)
    len_bar = (1 + (double)prev_size / (double)g->sym_sizes[0]) / 2;

  /* the tasks the vendor library runs */
  vendor_lib vlib;
  memset(&vlib, 0, sizeof vlib);
  for (int i = 0; o->dispatch != TS_DISPATCH_TUNED && i < n_tasks; i++) {
    const char *desc = tasks[i].vendor;
    if (!desc || bt[i].user) continue;
    char why[160] = "";
    double bar = bt[i].sym_axes ? len_bar : 1;
    bool at_b = o->dispatch != TS_DISPATCH_BEST ||
                vendor_faster(o->db, tasks[i].func, r->target, tasks[i].flops,
                              bt[i].latency_s, 1, why, sizeof why);
    if (!at_b) continue;
    if (o->dispatch == TS_DISPATCH_BEST && bar < 1 &&
        !vendor_faster(o->db, tasks[i].func, r->target, tasks[i].flops,
                       bt[i].latency_s, bar, why, sizeof why)) {
      r->tasks[i].dispatch_note = strdupf(
          "%s; the kernel kept: it loops to the length, and "
          "oneDNN must be below %.2fx, the kernel's mean share "
          "over the sizes %lld..%lld",
          why, bar, (long long)prev_size + 1, (long long)g->sym_sizes[0]);
      continue;
    }
    if (!vlib.handle && !vlib.why[0]) vendor_open(&vlib, o->runtime_dir);
    char *refused = NULL;
    bool ok = true;
    for (int c = 0; ok && c < g->n_nodes; c++) /* every call site */
      ok = g->nodes[c].kind != TS_GRAPH_CALL ||
           !ts_func_equal(g->nodes[c].func, tasks[i].func) ||
           vendor_usable(&vlib, g, &plan, &g->nodes[c], desc, &refused);
    if (ok) {
      bt[i].vendor = desc;
      r->tasks[i].dispatch_note = why[0] ? ts_strdup(why) : NULL;
    } else {
      r->tasks[i].dispatch_note = refused; /* the kernel runs it */
    }
  }
  if (vlib.handle) dlclose(vlib.handle);

  /* the tasks whose constant stages may run ahead of time: one program
   * (a padded library's programs share their weights blob), the kernel
   * ours and not cut to a run-time length */
  if (!o->no_prepack && prev_size < 0 && ts_target_host(&host, NULL) != TS_OK)
    host = NULL; /* the prologues interpreted */
  for (int i = 0; !o->no_prepack && prev_size < 0 && i < n_tasks; i++)
    if (!bt[i].vendor && !bt[i].user && !bt[i].sym_axes) {
      bt[i].const_params = constant_params(g, &plan, &tasks[i]);
      bt[i].host = host;
    }

  /* kernels, in parallel */
  t0 = ts_now_seconds();
  build_pool pool = {.tasks = bt, .n = n_tasks, .target = tgt};
  atomic_init(&pool.next, 0);
  build_all(&pool, o->build_threads);
  r->codegen_ms = (ts_now_seconds() - t0) * 1e3;
  for (int i = 0; i < n_tasks; i++) {
    if (bt[i].rc) {
      rc = TS_ERR(err, bt[i].rc, "task %s (%s, first node '%s'): %s",
                  r->tasks[i].hash, r->tasks[i].name, r->tasks[i].first_node,
                  bt[i].err.msg);
      goto done;
    }
    ts_graph_compile_task *t = &r->tasks[i];
    t->fallback_note = bt[i].note;
    bt[i].note = NULL;
    if (bt[i].from_db) {
      t->source = "db";
      t->record_id = bt[i].record_id;
      t->latency_s = bt[i].latency_s;
    }
    if (bt[i].vendor) {
      t->source = "vendor";
      t->record_id = 0;
      t->latency_s = NAN;
    }
    if (bt[i].user) {
      t->source = "extern";
      t->record_id = 0;
      t->latency_s = NAN;
      t->dispatch_note =
          strdupf("runs %s() from %s", bt[i].user->symbol, bt[i].user->path);
      snprintf(bt[i].kernel.entry, sizeof bt[i].kernel.entry, "%s",
               bt[i].user->symbol);
      bt[i].kernel.user = bt[i].user->path;
    }
  }

  /* the program */
  prog->g = g;
  prog->model_name = o->model_name ? o->model_name : g->name ? g->name : "";
  prog->kernels = ts_calloc((size_t)n_tasks + 1, sizeof *prog->kernels);
  if (!prog->kernels) {
    rc = TS_ERR(err, TS_ENOMEM, "compile: out of memory");
    goto done;
  }
  for (int i = 0; i < n_tasks; i++) {
    prog->kernels[i] = bt[i].kernel;
    prog->kernels[i].vendor = bt[i].vendor;
    prog->kernels[i].with_length =
        !bt[i].vendor && !bt[i].user && bt[i].n_cut > 0;
    r->tasks[i].length_loops = prog->kernels[i].with_length ? bt[i].n_cut : 0;
    prog->n_vendor += bt[i].vendor != NULL;
    memset(&bt[i].kernel, 0, sizeof bt[i].kernel);
  }
  prog->n_kernels = n_tasks;
  prog->need_amx = ts_target_has_feature(tgt, "amx-tile");
  t0 = ts_now_seconds();
  rc = make_calls(g, &plan, tasks, n_tasks, bt, r, prog, err);
  if (rc) goto done;
  r->prepack_ms = (ts_now_seconds() - t0) * 1e3;
  r->n_calls = prog->n_calls;
  r->call_task = ts_calloc((size_t)prog->n_calls + 1, sizeof *r->call_task);
  if (!r->call_task) {
    rc = TS_ERR(err, TS_ENOMEM, "compile: out of memory");
    goto done;
  }
  for (int c = 0; c < prog->n_calls; c++) r->call_task[c] = prog->calls[c].task;
  r->arena_bytes = prog->arena_bytes;
  r->lower_bound_bytes = plan.lower_bound_bytes;
  r->total_bytes = plan.total_bytes + (prog->arena_bytes - plan.arena_bytes);
  r->constant_bytes = (int64_t)g->consts_len + prog->extra_len;
  prog->info_json = info_json(prog, r->target, r);
  if (!prog->info_json) {
    rc = TS_ERR(err, TS_ENOMEM, "compile: out of memory");
    goto done;
  }

done:
  for (int i = 0; bt && i < n_tasks; i++) {
    free(bt[i].trace_json);
    free(bt[i].note);
    free(bt[i].kernel.bytes);
    free(bt[i].sym_axes);
    free(bt[i].positions);
    free(bt[i].const_params);
    ts_hoist_clear(&bt[i].hoist);
    free(bt[i].prologue_obj.bytes);
  }
  free(bt);
  ts_target_free(host);
  ts_graph_plan_clear(&plan);
  free(tasks);
  return rc;
}

/* Programs of graphs gs[0..n) linked into one library: one program (dyn
 * NULL) or a dispatcher over several. rs[b] is graph b's report. */
static int compile_many(const ts_graph *const *gs, int n, const cp_dynamic *dyn,
                        const ts_graph_compile_options *o,
                        ts_graph_compile_report *rs, ts_error *err) {
  for (int b = 0; b < n; b++) {
    double keep_import = rs[b].import_ms, keep_passes = rs[b].passes_ms;
    memset(&rs[b], 0, sizeof rs[b]);
    rs[b].import_ms = keep_import;
    rs[b].passes_ms = keep_passes;
  }
  if (n < 1 || !o || !o->output || !*o->output)
    return TS_ERR(err, TS_EINVAL, "compile: no graph or no output path");
  if (!o->runtime_dir || !*o->runtime_dir)
    return TS_ERR(err, TS_EINVAL,
                  "compile: no runtime folder (where libtessera_rt.so is)");
  int rc = TS_OK;
  for (int b = 0; !rc && b < n; b++)
    rc = gs[b] ? check_graph(gs[b], err)
               : TS_ERR(err, TS_EINVAL, "compile: no graph");
  if (rc) return rc;
  /* before the long part: the places the link needs */
  char probe[4200];
  snprintf(probe, sizeof probe, "%s/libtessera_rt.so", o->runtime_dir);
  if (access(probe, R_OK) != 0)
    return TS_ERR(err, TS_ENOTFOUND, "the runtime library '%s': %s", probe,
                  strerror(errno));
  snprintf(probe, sizeof probe, "%s", o->output);
  char *slash = strrchr(probe, '/');
  if (slash) *slash = 0;
  struct stat st;
  if (slash && probe[0] && (stat(probe, &st) != 0 || !S_ISDIR(st.st_mode)))
    return TS_ERR(err, TS_ENOTFOUND, "the output's folder '%s' %s", probe,
                  errno == ENOENT ? "does not exist" : "is not a folder");

  ts_target *tgt = NULL;
  rc = ts_target_parse(o->target ? o->target : "llvm", &tgt, err);
  if (rc) return rc;
  if (ts_target_facts_of(tgt)->artifact != TS_ARTIFACT_CPU_OBJECT) {
    ts_target_free(tgt);
    return TS_ERR(err, TS_EUNSUPPORTED,
                  "compile: target '%s': only CPU (llvm) targets can be "
                  "compiled into a library",
                  o->target);
  }
  cp_program *progs = ts_calloc((size_t)n, sizeof *progs);
  const cp_program **pp = ts_calloc((size_t)n, sizeof *pp);
  char tmpdir[4096] = "";
  if (!progs || !pp) {
    rc = TS_ERR(err, TS_ENOMEM, "compile: out of memory");
    goto done;
  }
  for (int b = 0; !rc && b < n; b++) {
    char prefix[16] = "";
    if (dyn) snprintf(prefix, sizeof prefix, "b%d_", b);
    rs[b].target = ts_strdup(ts_target_str(tgt));
    rc = rs[b].target ? compile_program(gs[b], o, tgt, prefix,
                                        dyn ? (b ? dyn->sizes[b - 1] : 0) : -1,
                                        &rs[b], &progs[b], err)
                      : TS_ERR(err, TS_ENOMEM, "compile: out of memory");
    if (rc && dyn && err) { /* which program */
      char head[300];
      int k = snprintf(head, sizeof head, "%.200s=%lld: ", dyn->symbol,
                       (long long)dyn->sizes[b]);
      size_t len = strlen(err->msg);
      if (len + (size_t)k >= sizeof err->msg)
        len = sizeof err->msg - (size_t)k - 1;
      memmove(err->msg + k, err->msg, len);
      memcpy(err->msg, head, (size_t)k);
      err->msg[(size_t)k + len] = 0;
    }
    pp[b] = &progs[b];
  }
  if (rc) goto done;

  /* emit and link */
  double t0 = ts_now_seconds();
  const char *tmp = getenv("TMPDIR");
  snprintf(tmpdir, sizeof tmpdir, "%s/tessera-compile-XXXXXX",
           tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(tmpdir)) {
    rc = TS_ERR(err, TS_EIO, "cannot create a temporary folder '%s': %s",
                tmpdir, strerror(errno));
    tmpdir[0] = 0;
    goto done;
  }
  int64_t bytes = 0;
  rc = cp_emit_and_link(pp, n, dyn, o, tmpdir, &bytes, err);
  for (int b = 0; b < n; b++) {
    rs[b].link_ms = (ts_now_seconds() - t0) * 1e3;
    rs[b].library_bytes = bytes;
    if (!rc) rs[b].warning = make_warning(o, &rs[b]);
  }

done:
  if (tmpdir[0]) nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  for (int b = 0; progs && b < n; b++) program_free(&progs[b]);
  free(progs);
  free(pp);
  ts_target_free(tgt);
  if (rc)
    for (int b = 0; b < n; b++) {
      double x = rs[b].import_ms, y = rs[b].passes_ms;
      ts_graph_compile_report_clear(&rs[b]);
      rs[b].import_ms = x;
      rs[b].passes_ms = y;
    }
  return rc;
}

int ts_graph_compile(const ts_graph *g, const ts_graph_compile_options *o,
                     ts_graph_compile_report *report, ts_error *err) {
  ts_graph_compile_report local;
  memset(&local, 0, sizeof local);
  int rc = compile_many(&g, 1, NULL, o, report ? report : &local, err);
  ts_graph_compile_report_clear(&local);
  return rc;
}

int ts_graph_compile_padded(const ts_graph *const *gs, int n,
                            const ts_graph_compile_options *o,
                            ts_graph_compile_report *reports, ts_error *err) {
  if (n < 1 || !gs || !reports)
    return TS_ERR(err, TS_EINVAL, "compile: no padded graphs");
  if (n > 64) return TS_ERR(err, TS_EINVAL, "compile: %d sizes; at most 64", n);
  const ts_graph *g0 = gs[0];
  int64_t sizes[64];
  unsigned in_axes[TS_GRAPH_MAX_IO], out_axes[TS_GRAPH_MAX_IO];
  int n_in = 0;
  for (int i = 0; gs[n - 1] && i < gs[n - 1]->n_inputs; i++)
    n_in +=
        strncmp(gs[n - 1]->values[gs[n - 1]->inputs[i]].name,
                TS_GRAPH_LENGTH_PREFIX, strlen(TS_GRAPH_LENGTH_PREFIX)) != 0;
  for (int b = 0; b < n; b++) {
    const ts_graph *g = gs[b];
    if (!g || g->n_syms != 1 || strcmp(g->sym_names[0], g0->sym_names[0]))
      return TS_ERR(err, TS_EINVAL,
                    "compile: graph %d is not a padded graph of the same "
                    "dynamic dimension",
                    b);
    sizes[b] = g->sym_sizes[0];
    if (b && sizes[b] <= sizes[b - 1])
      return TS_ERR(err, TS_EINVAL,
                    "compile: the padded sizes must ascend (%lld after %lld)",
                    (long long)sizes[b], (long long)sizes[b - 1]);
    if (g->n_outputs != g0->n_outputs || g->n_outputs > TS_GRAPH_MAX_IO ||
        n_in > TS_GRAPH_MAX_IO ||
        (g->n_inputs != n_in && g->n_inputs != n_in + 1))
      return TS_ERR(err, TS_EINVAL,
                    "compile: the padded graphs' inputs and outputs differ");
    for (int i = 0; i < n_in; i++) {
      unsigned a = 0;
      ts_graph_padded_axes(g, false, i, &a);
      if (b && a != in_axes[i])
        return TS_ERR(err, TS_EINVAL, "compile: input %d differs", i);
      in_axes[i] = a;
    }
    for (int i = 0; i < g->n_outputs; i++) {
      unsigned a = 0;
      ts_graph_padded_axes(g, true, i, &a);
      if (b && a != out_axes[i])
        return TS_ERR(err, TS_EINVAL, "compile: output %d differs", i);
      out_axes[i] = a;
    }
  }
  /* the dimensions that differ between the first and the last size must
   * be the symbol's (an edge whose layout a pass changed would not be) */
  const ts_graph *gl = gs[n - 1];
  for (int k = 0; n > 1 && k < n_in + g0->n_outputs; k++) {
    bool out = k >= n_in;
    int i = out ? k - n_in : k;
    const gr_value *a = &g0->values[out ? g0->outputs[i] : g0->inputs[i]];
    const gr_value *z = &gl->values[out ? gl->outputs[i] : gl->inputs[i]];
    unsigned differ = 0;
    for (int d = 0; d < a->ndim && d < z->ndim; d++)
      if (a->shape[d] != z->shape[d]) differ |= 1u << d;
    if (a->ndim != z->ndim || differ != (out ? out_axes[i] : in_axes[i]))
      return TS_ERR(err, TS_EUNSUPPORTED,
                    "compile: %s '%s': the dimensions that change with '%s' "
                    "are not the ones padded (did a pass change the "
                    "edge's layout?)",
                    out ? "output" : "input", a->name, g0->sym_names[0]);
  }
  cp_dynamic dyn = {.symbol = g0->sym_names[0],
                    .sizes = sizes,
                    .in_axes = in_axes,
                    .out_axes = out_axes,
                    .n_in = n_in};
  return compile_many(gs, n, &dyn, o, reports, err);
}

int ts_graph_runtime_dir(char *buf, size_t size, ts_error *err) {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0)
    return TS_ERR(err, TS_ENOTFOUND,
                  "cannot find this program's path (/proc/self/exe): %s",
                  strerror(errno));
  exe[n] = 0;
  char *slash = strrchr(exe, '/');
  if (slash) *slash = 0;
  char cand[2][4200];
  snprintf(cand[0], sizeof cand[0], "%s", exe);
  snprintf(cand[1], sizeof cand[1], "%s/../lib", exe);
  for (int i = 0; i < 2; i++) {
    char lib[4300];
    snprintf(lib, sizeof lib, "%s/libtessera_rt.so", cand[i]);
    if (access(lib, R_OK) == 0) {
      char *real = realpath(cand[i], NULL);
      snprintf(buf, size, "%s", real ? real : cand[i]);
      free(real);
      return TS_OK;
    }
  }
  return TS_ERR(err, TS_ENOTFOUND,
                "libtessera_rt.so is neither in %s nor in %s (give "
                "--runtime-dir DIR)",
                cand[0], cand[1]);
}
