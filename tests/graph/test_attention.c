/*
 * test_attention.c — the attention group (graph/fuse.c) and its default
 * schedule (tuner/default_attention.c): MatMul(Q, K^T) -> scale -> mask ->
 * Softmax(last axis) -> MatMul(., V) becomes one task whose default
 * schedule computes the scores a row tile at a time; its results match the
 * graph run node by node (reference kernels) interpreted and compiled, for
 * rows that the tile divides and a prime count of rows (a guarded last
 * tile), V broadcast over the heads, and no mask. Patterns that are not
 * attention (the softmax over another axis, the probabilities read twice)
 * stay apart, as does everything with TESSERA_ATTENTION=0.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../tuner/default_check.h"
#include "util.h"

#include "graph/internal.h"
#include "tuner/tuner.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct att_case {
  int64_t heads, rows, keys, dim, vdim;
  bool mask, scale, v_shared; /* V [1, 1, keys, vdim] for every head */
  int softmax_axis;           /* -1: the last */
  bool probs_out;             /* the probabilities a graph output too */
} att_case;

static int input(ts_graph *g, const char *name, int ndim,
                 const int64_t *shape) {
  int v = gr_value_add(g, name, TS_FLOAT32, ndim, shape);
  g->values[v].is_input = true;
  return v;
}

static int add(ts_graph *g, const char *op, const int *ins, int n) {
  int out = gr_value_fresh(g, op, TS_FLOAT32, -1, NULL);
  gr_node_add(g, op, gr_fresh_name(g, op), ins, n, &out, 1);
  return out;
}

static ts_graph *build(const att_case *c) {
  ts_graph *g = ts_graph_new("attention");
  int64_t qs[4] = {1, c->heads, c->rows, c->dim};
  int64_t ks[4] = {1, c->heads, c->dim, c->keys};
  int64_t vs[4] = {1, c->v_shared ? 1 : c->heads, c->keys, c->vdim};
  int64_t ms[4] = {1, 1, 1, c->keys};
  int q = input(g, "q", 4, qs), k = input(g, "kt", 4, ks),
      v = input(g, "v", 4, vs);
  int m = c->mask ? input(g, "mask", 4, ms) : -1;
  int ins[2] = {q, k};
  int s = add(g, "MatMul", ins, 2);
  if (c->scale) {
    float f = 0.125f;
    ins[0] = s;
    ins[1] = gr_const_add(g, "scale", TS_FLOAT32, 0, NULL, &f);
    s = add(g, "Mul", ins, 2);
  }
  if (m >= 0) {
    ins[0] = s, ins[1] = m;
    s = add(g, "Add", ins, 2);
  }
  int p = add(g, "Softmax", &s, 1);
  gr_attr a = {.name = "axis", .kind = GR_ATTR_INT, .i = c->softmax_axis};
  gr_node_set_attr(g, &g->nodes[g->n_nodes - 1], a);
  ins[0] = p, ins[1] = v;
  int o = add(g, "MatMul", ins, 2);
  int n_in = 0;
  g->inputs = ts_arena_alloc(g->arena, sizeof(int) * 4);
  for (int i = 0; i < g->n_values; i++)
    if (g->values[i].is_input) g->inputs[n_in++] = i;
  g->n_inputs = n_in;
  g->outputs = ts_arena_alloc(g->arena, sizeof(int) * 2);
  g->outputs[0] = o;
  if (c->probs_out) g->outputs[1] = p;
  g->n_outputs = c->probs_out ? 2 : 1;
  gr_reindex(g);
  ts_error err;
  if (ts_graph_infer_shapes(g, &err)) fail_msg("shapes: %s", err.msg);
  return g;
}

/* Inputs of varied values (a pseudo-random walk in [-2, 2]), the mask
 * with some large negative entries (masked keys). */
static void make_inputs(const ts_graph *g, ts_graph_tensor *ins) {
  uint64_t x = 0x9e3779b97f4a7c15u;
  for (int i = 0; i < ts_graph_n_inputs(g); i++) {
    ts_graph_value_info v = ts_graph_input(g, i);
    ins[i] = (ts_graph_tensor){v.name, v.dtype, v.ndim, {0}, NULL};
    int64_t n = 1;
    for (int d = 0; d < v.ndim; d++) n *= (ins[i].shape[d] = v.shape[d]);
    float *p = calloc((size_t)n, sizeof(float));
    for (int64_t e = 0; e < n; e++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      p[e] = (float)((double)(x % 4001) / 1000.0 - 2.0);
      if (!strcmp(v.name, "mask")) p[e] = e % 5 == 3 ? -1e9f : 0.0f;
    }
    ins[i].data = p;
  }
}

/* The calls of g whose function is an attention group's. */
static const gr_node *attention_call(const ts_graph *g, int *count) {
  const gr_node *found = NULL;
  *count = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const gr_node *n = &g->nodes[i];
    if (n->kind == TS_GRAPH_CALL && strstr(n->name, "softmax_matmul")) {
      found = n;
      ++*count;
    }
  }
  return found;
}

/* The task's design spaces hold the attention one (the row tile and the
 * products' widths sampled); candidates of several seeds from it, checked
 * against the interpreter. */
static void check_space(const ts_func *f, const char *what) {
  ts_target *t = host();
  ts_design_space *spaces = NULL;
  int n = 0, found = -1;
  ts_error err;
  if (ts_space_generate(f, t, NULL, &spaces, &n, &err))
    fail_msg("%s: design spaces: %s", what, err.msg);
  for (int i = 0; i < n; i++)
    if (!strcmp(spaces[i].name, "attention")) found = i;
  if (found < 0) fail_msg("%s: no attention design space", what);
  int ok = 0;
  for (uint64_t seed = 1; seed <= 4; seed++) {
    ts_candidate c;
    if (ts_candidate_sample(&spaces[found], found, f, t, seed, &c, &err))
      continue; /* a decision that does not apply: the search retries */
    if (check_compiled_ref(ts_sched_func(c.sched), f, t, 2, 7, true, &err))
      fail_msg("%s: attention candidate %llu: %s", what,
               (unsigned long long)seed, err.msg);
    ts_candidate_clear(&c);
    ok++;
  }
  if (!ok) fail_msg("%s: no candidate of the attention space applies", what);
  ts_design_spaces_free(spaces, n);
  ts_target_free(t);
}

/* c fused (or not, as `fused` says), its outputs equal to the reference
 * kernels' within float tolerance, interpreted and compiled. */
static void check(const att_case *c, bool fused, const char *what) {
  ts_graph *ref = build(c), *g = build(c);
  ts_error err;
  if (ts_graph_run_passes(ref, "cse", &err) ||
      ts_graph_run_passes(g, NULL, &err))
    fail_msg("%s: passes: %s", what, err.msg);
  int calls = 0;
  const gr_node *call = attention_call(g, &calls);
  if (calls != (fused ? 1 : 0))
    fail_msg("%s: %d attention groups, want %d", what, calls, fused ? 1 : 0);
  if (call) {
    /* its default schedule is the attention one: every stage inside one
     * loop nest under the root (one loop at the root's indentation) */
    ts_target *t;
    ts_sched *s;
    if (ts_target_host(&t, &err) ||
        ts_default_schedule(call->func, t, &s, &err))
      fail_msg("%s: %s", what, err.msg);
    char *text = ts_func_print(ts_sched_func(s));
    int nests = 0;
    for (const char *p = strstr(text, "\n    for "); p;
         p = strstr(p + 1, "\n    for "))
      nests++;
    if (nests != 1) fail_msg("%s: not the attention schedule:\n%s", what, text);
    free(text);
    ts_sched_destroy(s);
    ts_target_free(t);
    /* AVX2's tiles too (16 registers: other rows and widths), against the
     * interpreter where the host runs AVX2 */
    t = avx2_target();
    free(check_default(call->func, t, what));
    ts_target_free(t);
    check_space(call->func, what);
  }
  int n_in = ts_graph_n_inputs(ref), n_out = ts_graph_n_outputs(ref);
  ts_graph_tensor ins[4], want[2], got[2];
  make_inputs(ref, ins);
  if (ts_graph_execute(ref, TS_GRAPH_INTERPRET, ins, n_in, want, n_out, &err))
    fail_msg("%s: reference: %s", what, err.msg);
  static const ts_graph_exec_mode modes[2] = {TS_GRAPH_INTERPRET,
                                              TS_GRAPH_COMPILE};
  for (int m = 0; m < 2; m++) {
    if (ts_graph_execute(g, modes[m], ins, n_in, got, n_out, &err))
      fail_msg("%s: %s", what, err.msg);
    for (int o = 0; o < n_out; o++) {
      int64_t n = 1, first;
      for (int d = 0; d < want[o].ndim; d++) n *= want[o].shape[d];
      double max_err;
      if (ts_host_compare(got[o].data, want[o].data, TS_FLOAT32, n, &first,
                          &max_err))
        fail_msg("%s (%s): output %d element %lld differs (%g)", what,
                 m ? "compiled" : "interpreted", o, (long long)first, max_err);
      free(got[o].data);
    }
  }
  for (int o = 0; o < n_out; o++) free(want[o].data);
  for (int i = 0; i < n_in; i++) free(ins[i].data);
  ts_graph_free(ref);
  ts_graph_free(g);
}

static void test_fused(void **state) {
  (void)state;
  /* rows the register tile divides; a prime number of rows and keys;
   * V shared by the heads; no scale or mask; keys fewer than a vector */
  const att_case cases[] = {
      {2, 30, 37, 16, 24, true, true, false, -1, false},
      {3, 31, 53, 8, 16, true, true, false, -1, false},
      {2, 12, 40, 16, 20, false, true, true, -1, false},
      {1, 7, 5, 4, 3, false, false, false, 3, false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char what[64];
    snprintf(what, sizeof what, "case %zu", i);
    check(&cases[i], true, what);
  }
}

static void test_not_attention(void **state) {
  (void)state;
  att_case c = {2, 12, 12, 8, 8, true, true, false, 2, false};
  check(&c, false, "softmax over the rows");
  c.softmax_axis = -1;
  c.probs_out = true;
  check(&c, false, "probabilities read twice");
  c.probs_out = false;
  setenv("TESSERA_ATTENTION", "0", 1);
  check(&c, false, "TESSERA_ATTENTION=0");
  unsetenv("TESSERA_ATTENTION");
  check(&c, true, "the same, on");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fused),
      cmocka_unit_test(test_not_attention),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
