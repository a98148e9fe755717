/*
 * test_plan.c — static memory planning: on every small model and on random
 * graphs of elementwise calls, row operators, transposes, concatenations
 * and reshapes, an independent verifier checks the plan (every intermediate
 * has storage; no two values live at the same time share bytes unless one
 * is a view of the other or the second is computed in place as the first
 * dies; nothing writes into an input or a constant), and running the graph
 * with every intermediate in one arena at the planned offsets gives the
 * same outputs as the reference executor. Hand-built graphs check the
 * sharing rules: a Reshape of a graph input is a view of it, intermediates
 * viewed as a graph output live in the output's buffer, a view of a
 * constant as a graph output is a copy, relu runs in place while softmax
 * and transpose never do, and an unknown shape is an error naming the
 * value. With TS_PLAN_ZOO=DIR the full models of DIR are planned and their
 * numbers printed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "util.h"

#include "graph/internal.h"
#include "schedule/schedule.h"

#include <stdlib.h>
#include <string.h>

/* ---- graph building ---- */

static int add_value(ts_graph *g, int64_t a, int64_t b) {
  int64_t shape[2] = {a, b};
  return gr_value_fresh(g, "v", TS_FLOAT32, b > 0 ? 2 : 1, shape);
}

/* A call of the operator library's workload `spec` (inputs then out). */
static void add_call(ts_graph *g, const char *spec, const int *ins, int n_ins,
                     int out) {
  ts_workload *w;
  ts_error err;
  if (ts_workload_from_spec(spec, &w, &err)) fail_msg("%s: %s", spec, err.msg);
  ts_func *f = ts_func_copy(w->func);
  ts_workload_free(w);
  gr_node *n =
      gr_node_add(g, "call_tir", gr_fresh_name(g, "call"), ins, n_ins, &out, 1);
  gr_own_func(g, f);
  n->kind = TS_GRAPH_CALL;
  n->func = f;
}

static void add_reshape(ts_graph *g, int in, int out) {
  int64_t dims[1] = {g->values[out].ndim}, shape[TS_MAX_DIMS];
  memcpy(shape, g->values[out].shape, sizeof shape); /* values may move */
  int s = gr_const_add(g, gr_fresh_name(g, "shape"), TS_INT64, 1, dims, shape);
  int ins[2] = {in, s};
  gr_node_add(g, "Reshape", gr_fresh_name(g, "reshape"), ins, 2, &out, 1);
}

static void set_io(ts_graph *g, const int *ins, int n_ins, const int *outs,
                   int n_outs) {
  g->inputs = ts_arena_alloc(g->arena, sizeof(int) * ((size_t)n_ins + 1));
  memcpy(g->inputs, ins, sizeof(int) * (size_t)n_ins);
  g->n_inputs = n_ins;
  for (int i = 0; i < n_ins; i++) g->values[ins[i]].is_input = true;
  g->outputs = ts_arena_alloc(g->arena, sizeof(int) * ((size_t)n_outs + 1));
  memcpy(g->outputs, outs, sizeof(int) * (size_t)n_outs);
  g->n_outputs = n_outs;
  gr_reindex(g);
}

/* ---- the verifier ---- */

static int64_t vbytes(const ts_graph *g, int v) {
  return gr_value_elems(&g->values[v]) *
         (int64_t)ts_dtype_elem_bytes(g->values[v].dtype);
}

static bool is_output(const ts_graph *g, int v) {
  for (int i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] == v) return true;
  return false;
}

static bool is_view_op(const gr_node *n) {
  return n->kind == TS_GRAPH_OP &&
         (!strcmp(n->op, "Reshape") || !strcmp(n->op, "Flatten") ||
          !strcmp(n->op, "Squeeze") || !strcmp(n->op, "Unsqueeze") ||
          !strcmp(n->op, "Identity"));
}

/* content[v]: the value whose bytes v's bytes equal through view ops (the
 * root of a view chain). */
static int *content_roots(const ts_graph *g) {
  int *c = malloc(sizeof(int) * ((size_t)g->n_values + 1));
  for (int v = 0; v < g->n_values; v++) c[v] = v;
  for (int i = 0; i < g->n_nodes; i++) {
    const gr_node *n = &g->nodes[i];
    if (is_view_op(n) && n->inputs[0] >= 0) c[n->outputs[0]] = c[n->inputs[0]];
  }
  return c;
}

/* Checks plan p of g; fails the test naming the values on a violation.
 * Returns how many values were computed in place. */
static int verify_plan(const ts_graph *g, const ts_graph_plan *p) {
  int nv = g->n_values, nn = g->n_nodes;
  assert_int_equal(p->n_values, nv);
  int *def = malloc(sizeof(int) * ((size_t)nv + 1));
  int *last = malloc(sizeof(int) * ((size_t)nv + 1));
  int *space = malloc(sizeof(int) * ((size_t)nv + 1)); /* -1: the arena */
  int64_t *at = malloc(sizeof(int64_t) * ((size_t)nv + 1));
  bool *needs = calloc((size_t)nv + 1, sizeof(bool));
  int *content = content_roots(g);
  for (int v = 0; v < nv; v++) def[v] = last[v] = -2;
  for (int i = 0; i < g->n_inputs; i++)
    def[g->inputs[i]] = last[g->inputs[i]] = -1;
  for (int v = 0; v < nv; v++)
    if (g->values[v].const_off >= 0) def[v] = last[v] = -1;
  for (int i = 0; i < nn; i++) {
    const gr_node *n = &g->nodes[i];
    for (int k = 0; k < n->n_inputs; k++)
      if (n->inputs[k] >= 0) last[n->inputs[k]] = i;
    for (int k = 0; k < n->n_outputs; k++) {
      def[n->outputs[k]] = last[n->outputs[k]] = i;
      needs[n->outputs[k]] = true;
    }
  }
  for (int i = 0; i < g->n_outputs; i++) last[g->outputs[i]] = nn;
  int in_place = 0;
  for (int v = 0; v < nv; v++) {
    space[v] = v;
    at[v] = 0;
    int a = p->alias_of[v];
    if (a >= 0) {
      assert_true(a < nv);
      if (p->alias_of[a] != -1)
        fail_msg("'%s': alias_of points at an alias", g->values[v].name);
      if (p->offset[v] != -1)
        fail_msg("'%s': an alias with an offset", g->values[v].name);
    }
    if (is_output(g, v)) {
      if (p->offset[v] != -1)
        fail_msg("graph output '%s' in the arena", g->values[v].name);
      /* a copy: its source holds the same bytes */
      if (a >= 0 && content[a] != content[v])
        fail_msg("graph output '%s' copies '%s', another content",
                 g->values[v].name, g->values[a].name);
      continue;
    }
    int r = a >= 0 ? a : v;
    if (p->offset[r] >= 0) {
      space[v] = -1;
      at[v] = p->offset[r];
      assert_int_equal(p->offset[r] % 64, 0);
      if (p->offset[r] + vbytes(g, v) > p->arena_bytes)
        fail_msg("'%s' ends beyond the arena", g->values[v].name);
    } else {
      space[v] = r;
      if (needs[v] && !is_output(g, r) && !g->values[r].is_input &&
          g->values[r].const_off < 0)
        fail_msg("intermediate '%s' has no storage", g->values[v].name);
    }
    if (a >= 0 && needs[v] && content[a] != content[v]) {
      /* in place: a call output (at the start of v's view chain) taking a
       * dying input's storage */
      const gr_node *n = &g->nodes[def[content[v]]];
      if (n->kind != TS_GRAPH_CALL)
        fail_msg("'%s' shares '%s' but is not a call output", g->values[v].name,
                 g->values[a].name);
      if (space[v] != -1 && !is_output(g, space[v]))
        fail_msg("'%s' is computed into an input or constant",
                 g->values[v].name);
      in_place++;
    }
  }
  /* pairwise: live at once and overlapping bytes */
  for (int u = 0; u < nv; u++) {
    if (!needs[u] && def[u] != -1) continue;
    for (int v = u + 1; v < nv; v++) {
      if (!needs[v] && def[v] != -1) continue;
      if (space[u] != space[v]) continue;
      if (last[u] < def[v] || last[v] < def[u]) continue; /* not live at once */
      if (at[u] + vbytes(g, u) <= at[v] || at[v] + vbytes(g, v) <= at[u])
        continue;
      if (content[u] == content[v]) continue; /* views of one another */
      /* a hand-over at one call node: one dies where the other is made */
      int first = def[u] < def[v] ? u : v, second = first == u ? v : u;
      if (last[first] == def[second] && def[second] >= 0 &&
          g->nodes[def[second]].kind == TS_GRAPH_CALL)
        continue;
      fail_msg("'%s' [%d, %d] and '%s' [%d, %d] overlap in %s",
               g->values[u].name, def[u], last[u], g->values[v].name, def[v],
               last[v], space[u] < 0 ? "the arena" : g->values[space[u]].name);
    }
  }
  assert_true(p->lower_bound_bytes <= p->arena_bytes);
  assert_true(p->arena_bytes <= p->total_bytes + 64);
  free(def);
  free(last);
  free(space);
  free(at);
  free(needs);
  free(content);
  return in_place;
}

/* ---- execution ---- */

static void make_inputs(const ts_graph *g, ts_graph_tensor *ins, int seed) {
  for (int i = 0; i < ts_graph_n_inputs(g); i++) {
    ts_graph_value_info v = ts_graph_input(g, i);
    ins[i] = (ts_graph_tensor){v.name, v.dtype, v.ndim, {0}, NULL};
    int64_t n = 1;
    for (int d = 0; d < v.ndim; d++) n *= (ins[i].shape[d] = v.shape[d]);
    ins[i].data = malloc((size_t)n * ts_dtype_elem_bytes(v.dtype) + 1);
    if (ts_dtype_is_float(v.dtype))
      ts_host_fill_random(ins[i].data, v.dtype, n, (uint64_t)seed + i);
    else
      for (int64_t k = 0; k < n; k++)
        ts_host_set(ins[i].data, v.dtype, k, (double)((k * 7 + i) % 50));
  }
}

/* Runs g with and without the plan and compares the outputs. */
static void check_planned_run(const ts_graph *g, const ts_graph_plan *p,
                              ts_graph_exec_mode mode, const char *what) {
  int n_in = ts_graph_n_inputs(g), n_out = ts_graph_n_outputs(g);
  ts_graph_tensor ins[8], want[8], got[8];
  assert_true(n_in <= 8 && n_out <= 8);
  make_inputs(g, ins, 11);
  ts_error err;
  if (ts_graph_execute(g, mode, ins, n_in, want, n_out, &err))
    fail_msg("%s: execute: %s", what, err.msg);
  if (ts_graph_execute_planned(g, p, mode, ins, n_in, got, n_out, &err))
    fail_msg("%s: planned execute: %s", what, err.msg);
  for (int i = 0; i < n_out; i++) {
    int64_t n = 1, first;
    for (int d = 0; d < want[i].ndim; d++) n *= want[i].shape[d];
    double max_err;
    int64_t bad = ts_host_compare(got[i].data, want[i].data, want[i].dtype, n,
                                  &first, &max_err);
    if (bad)
      fail_msg("%s: output %d: %lld mismatches (first at %lld), max error %g",
               what, i, (long long)bad, (long long)first, max_err);
    free(want[i].data);
    free(got[i].data);
  }
  for (int i = 0; i < n_in; i++) free(ins[i].data);
}

/* ---- tests ---- */

static void test_small_models(void **state) {
  (void)state;
  static const char *const models[] = {"resnet50_small", "mobilenet_v2_small",
                                       "csrnet_small", "bert_small",
                                       "ops_small"};
  int total_in_place = 0;
  for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
    ts_error err;
    bool bert = !strcmp(models[m], "bert_small");
    ts_graph *g = load_model(models[m], bert ? bert_shapes : NULL, bert ? 2 : 0,
                             NULL, &err);
    if (!g) fail_msg("%s: %s", models[m], err.msg);
    ts_graph_plan p;
    if (ts_graph_plan_memory(g, &p, &err))
      fail_msg("%s: %s", models[m], err.msg);
    int ip = verify_plan(g, &p);
    total_in_place += ip;
    if (getenv("TS_PLAN_DEBUG") && !strcmp(models[m], getenv("TS_PLAN_DEBUG")))
      for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].kind == TS_GRAPH_CALL) {
          char *t = ts_func_print(g->nodes[i].func);
          printf("node %s inputs %d\n%s\n", g->nodes[i].name,
                 g->nodes[i].n_inputs, t);
          free(t);
        }
    print_message("%-20s arena %9lld  lower bound %9lld  total %9lld  in "
                  "place %d\n",
                  models[m], (long long)p.arena_bytes,
                  (long long)p.lower_bound_bytes, (long long)p.total_bytes, ip);
    assert_true(p.arena_bytes <= p.lower_bound_bytes * 12 / 10 + 64);
    check_planned_run(g, &p, TS_GRAPH_COMPILE, models[m]);
    if (!strcmp(models[m], "ops_small"))
      check_planned_run(g, &p, TS_GRAPH_INTERPRET, models[m]);
    ts_graph_plan_clear(&p);
    ts_graph_free(g);
  }
  assert_true(total_in_place > 0);
}

/* x (input) -> reshape -> relu -> a -> relu -> b -> softmax -> c ->
 * transpose -> d -> reshape -> out; const -> reshape -> out2. */
static void test_sharing_rules(void **state) {
  (void)state;
  ts_graph *g = ts_graph_new("rules");
  int x = add_value(g, 64, 0);
  int xv = add_value(g, 8, 8);
  add_reshape(g, x, xv);
  int a = add_value(g, 8, 8), b = add_value(g, 8, 8), c = add_value(g, 8, 8),
      d = add_value(g, 8, 8), out = add_value(g, 64, 0);
  add_call(g, "elementwise op=relu shape=8x8", &xv, 1, a);
  add_call(g, "elementwise op=relu shape=8x8", &a, 1, b);
  add_call(g, "softmax N=8 D=8", &b, 1, c);
  add_call(g, "transpose shape=8x8 perm=1x0", &c, 1, d);
  add_reshape(g, d, out);
  float cdata[64];
  for (int i = 0; i < 64; i++) cdata[i] = (float)i;
  int k = gr_const_add(g, "k", TS_FLOAT32, 2, (int64_t[]){8, 8}, cdata);
  int out2 = add_value(g, 64, 0);
  add_reshape(g, k, out2);
  set_io(g, &x, 1, (int[]){out, out2}, 2);
  ts_error err;
  if (ts_graph_verify(g, &err)) fail_msg("%s", err.msg);
  ts_graph_plan p;
  if (ts_graph_plan_memory(g, &p, &err)) fail_msg("%s", err.msg);
  assert_int_equal(p.alias_of[xv], x); /* a view of the input */
  assert_int_equal(p.offset[xv], -1);
  assert_int_equal(p.alias_of[b], a); /* relu in place */
  assert_int_equal(p.offset[b], -1);
  assert_true(p.offset[a] >= 0);
  assert_true(p.alias_of[c] != b && p.alias_of[c] != a); /* not softmax */
  assert_int_equal(p.alias_of[d], out); /* viewed as the output */
  assert_int_equal(p.offset[d], -1);
  assert_int_equal(p.alias_of[out2], k); /* the caller copies */
  assert_int_equal(p.offset[out], -1);
  assert_true(p.offset[c] >= 0);
  verify_plan(g, &p);
  /* a (= b's storage) is dead when c is made: they may share... but c
   * must not alias b through in-place; both in the arena */
  check_planned_run(g, &p, TS_GRAPH_INTERPRET, "rules");
  check_planned_run(g, &p, TS_GRAPH_COMPILE, "rules");
  ts_graph_plan_clear(&p);
  ts_graph_free(g);
}

/* A transpose of a square matrix and a relu whose input lives on: never in
 * place. */
static void test_no_in_place(void **state) {
  (void)state;
  ts_graph *g = ts_graph_new("no_in_place");
  int x = add_value(g, 8, 8), a = add_value(g, 8, 8), t = add_value(g, 8, 8),
      r = add_value(g, 8, 8), s = add_value(g, 8, 8);
  add_call(g, "elementwise op=relu shape=8x8", &x, 1, a);
  add_call(g, "transpose shape=8x8 perm=1x0", &a, 1, t);
  add_call(g, "elementwise op=relu shape=8x8", &t, 1, r); /* t lives on */
  add_call(g, "elementwise op=add shape=8x8", (int[]){r, t}, 2, s);
  set_io(g, &x, 1, &s, 1);
  ts_error err;
  ts_graph_plan p;
  if (ts_graph_plan_memory(g, &p, &err)) fail_msg("%s", err.msg);
  assert_int_equal(p.alias_of[a], -1); /* x is an input */
  assert_int_equal(p.alias_of[t], -1); /* transpose */
  assert_int_equal(p.alias_of[r], -1); /* t is read after */
  assert_int_equal(p.alias_of[s], -1); /* a graph output */
  verify_plan(g, &p);
  check_planned_run(g, &p, TS_GRAPH_INTERPRET, "no_in_place");
  ts_graph_plan_clear(&p);
  ts_graph_free(g);
}

static void test_unknown_shape(void **state) {
  (void)state;
  ts_graph *g = ts_graph_new("unknown");
  int x = add_value(g, 8, 8);
  int y = gr_value_add(g, "mystery", TS_FLOAT32, -1, NULL);
  int z = add_value(g, 8, 8);
  gr_node_add(g, "Relu", "r1", &x, 1, &y, 1);
  gr_node_add(g, "Relu", "r2", &y, 1, &z, 1);
  set_io(g, &x, 1, &z, 1);
  ts_error err;
  ts_graph_plan p;
  assert_int_equal(ts_graph_plan_memory(g, &p, &err), TS_EINVAL);
  assert_non_null(strstr(err.msg, "'mystery'"));
  assert_null(p.offset);
  ts_graph_plan_clear(&p);
  ts_graph_free(g);
}

/* Random graphs over 2-D float tensors: relu, add, softmax, transpose
 * (calls), Concat (a graph op), Reshape (a view). */
static void test_random_graphs(void **state) {
  (void)state;
  ts_rng rng;
  ts_rng_seed(&rng, 2024);
  int in_place = 0;
  for (int trial = 0; trial < 60; trial++) {
    ts_graph *g = ts_graph_new("random");
    int vals[64], n = 0;
    int x = add_value(g, 4, 8);
    vals[n++] = x;
    int inputs[2] = {x, -1}, n_inputs = 1;
    if (ts_rng_below(&rng, 2)) {
      inputs[1] = vals[n++] = add_value(g, 8, 4);
      n_inputs = 2;
    }
    int steps = 4 + (int)ts_rng_below(&rng, 16);
    for (int s = 0; s < steps && n < 60; s++) {
      int src =
          vals[n - 1 - (int)ts_rng_below(&rng, (uint64_t)(n < 4 ? n : 4))];
      const gr_value *sv = &g->values[src];
      int64_t r0 = sv->shape[0], r1 = sv->ndim == 2 ? sv->shape[1] : 1;
      char spec[128];
      int out;
      switch (ts_rng_below(&rng, 6)) {
      case 0:
        out = add_value(g, r0, r1);
        snprintf(spec, sizeof spec, "elementwise op=relu shape=%lldx%lld",
                 (long long)r0, (long long)r1);
        add_call(g, spec, &src, 1, out);
        break;
      case 1: { /* add with another value of the same shape, or itself */
        int other = src;
        for (int k = n - 1; k >= 0; k--) {
          const gr_value *ov = &g->values[vals[k]];
          if (vals[k] != src && ov->ndim == 2 && ov->shape[0] == r0 &&
              ov->shape[1] == r1 && ts_rng_below(&rng, 2)) {
            other = vals[k];
            break;
          }
        }
        out = add_value(g, r0, r1);
        snprintf(spec, sizeof spec, "elementwise op=add shape=%lldx%lld",
                 (long long)r0, (long long)r1);
        add_call(g, spec, (int[]){src, other}, 2, out);
        break;
      }
      case 2:
        out = add_value(g, r0, r1);
        snprintf(spec, sizeof spec, "softmax N=%lld D=%lld", (long long)r0,
                 (long long)r1);
        add_call(g, spec, &src, 1, out);
        break;
      case 3:
        out = add_value(g, r1, r0);
        snprintf(spec, sizeof spec, "transpose shape=%lldx%lld perm=1x0",
                 (long long)r0, (long long)r1);
        add_call(g, spec, &src, 1, out);
        break;
      case 4: { /* concat with itself along axis 0 (rows up to 32) */
        if (r0 > 16) {
          s--;
          continue;
        }
        out = add_value(g, 2 * r0, r1);
        gr_node *cn = gr_node_add(g, "Concat", gr_fresh_name(g, "concat"),
                                  (int[]){src, src}, 2, &out, 1);
        gr_node_set_attr(
            g, cn, (gr_attr){.name = "axis", .kind = GR_ATTR_INT, .i = 0});
        break;
      }
      default: /* a reshape swapping the dimensions */
        out = add_value(g, r1, r0);
        add_reshape(g, src, out);
        break;
      }
      vals[n++] = out;
    }
    int outs[3] = {vals[n - 1], -1, -1}, n_outs = 1;
    if (n > 3 && ts_rng_below(&rng, 2)) {
      int o = vals[1 + (int)ts_rng_below(&rng, (uint64_t)(n - 2))];
      if (o != outs[0] && !g->values[o].is_input) outs[n_outs++] = o;
    }
    if (ts_rng_below(&rng, 3) == 0) { /* an output that views another */
      const gr_value *lv = &g->values[outs[0]];
      int v = add_value(g, lv->shape[0] * lv->shape[1], 0);
      add_reshape(g, outs[0], v);
      outs[n_outs++] = v;
    }
    set_io(g, inputs, n_inputs, outs, n_outs);
    ts_error err;
    if (ts_graph_verify(g, &err)) fail_msg("trial %d: %s", trial, err.msg);
    ts_graph_plan p;
    if (ts_graph_plan_memory(g, &p, &err))
      fail_msg("trial %d: %s", trial, err.msg);
    in_place += verify_plan(g, &p);
    char what[32];
    snprintf(what, sizeof what, "random graph %d", trial);
    check_planned_run(g, &p, TS_GRAPH_INTERPRET, what);
    ts_graph_plan_clear(&p);
    ts_graph_free(g);
  }
  assert_true(in_place > 0);
}

/* TS_PLAN_ZOO=DIR: the full models' numbers (resnet50, mobilenet_v2, bert
 * with 1x128 inputs), planned and verified. */
static void test_zoo_numbers(void **state) {
  (void)state;
  const char *dir = getenv("TS_PLAN_ZOO");
  if (!dir || !*dir) skip();
  static const char *const models[] = {"resnet50", "mobilenet_v2", "bert"};
  static const char *const shapes[] = {"input_ids=1x128",
                                       "attention_mask=1x128"};
  for (int m = 0; m < 3; m++) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.onnx", dir, models[m]);
    ts_graph_import_options o = {0};
    if (m == 2) {
      o.input_shapes = shapes;
      o.n_input_shapes = 2;
    }
    ts_graph *g;
    ts_error err;
    if (ts_graph_import_onnx(path, &o, &g, &err) ||
        ts_graph_run_passes(g, NULL, &err))
      fail_msg("%s: %s", path, err.msg);
    ts_graph_plan p;
    if (ts_graph_plan_memory(g, &p, &err)) fail_msg("%s", err.msg);
    int ip = verify_plan(g, &p);
    printf("%-14s arena %11lld  lower bound %11lld  total %11lld  (%.3f x "
           "lower bound, %.1f%% of total; %d in place)\n",
           models[m], (long long)p.arena_bytes, (long long)p.lower_bound_bytes,
           (long long)p.total_bytes,
           (double)p.arena_bytes / (double)p.lower_bound_bytes,
           100.0 * (double)p.arena_bytes / (double)p.total_bytes, ip);
    assert_true(p.arena_bytes * 10 <= p.lower_bound_bytes * 11);
    ts_graph_plan_clear(&p);
    ts_graph_free(g);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sharing_rules),
      cmocka_unit_test(test_no_in_place),
      cmocka_unit_test(test_unknown_shape),
      cmocka_unit_test(test_random_graphs),
      cmocka_unit_test(test_small_models),
      cmocka_unit_test(test_zoo_numbers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
