/*
 * test_rnn.c — LSTM, GRU and RNN (graph/lower_rnn.c): each, unrolled and
 * compiled, against a plain C transcription of the ONNX equations — both
 * layouts, forward, reverse and bidirectional, biases, initial states,
 * LSTM's peepholes, GRU's linear_before_reset, clip, per-direction
 * activations, all three outputs — and what is not supported (sequence
 * lengths shorter than X, an unknown activation) refused with a message
 * naming it; the products of every step read one blocked copy of R, or R
 * itself where a core keeps it in cache.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "graph/internal.h"
#include "build_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const char *op; /* LSTM, GRU, RNN */
  int layout, nd; /* nd 2: bidirectional */
  bool reverse, bias, init, peep, lbr;
  double clip;
  const char *acts; /* NULL: the defaults */
  int64_t S, B, I, H;
} rnn_case;

static int gates_of(const rnn_case *c) {
  return !strcmp(c->op, "LSTM") ? 4 : !strcmp(c->op, "GRU") ? 3 : 1;
}

static float det(int64_t i, int seed) {
  return (float)((i * 37 + seed * 11) % 41 - 20) / 40.0f;
}

static float *filled(int64_t n, int seed) {
  float *p = malloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++) p[i] = det(i, seed);
  return p;
}

/* ---- the reference ---- */

static double act(const char *name, double x) {
  if (!strcmp(name, "Sigmoid")) return 1 / (1 + exp(-x));
  if (!strcmp(name, "Tanh")) return tanh(x);
  if (!strcmp(name, "Relu")) return x > 0 ? x : 0;
  if (!strcmp(name, "Softsign")) return x / (1 + fabs(x));
  fail_msg("no activation %s", name);
  return 0;
}

static double clipped(const rnn_case *c, double x) {
  if (c->clip > 0) x = x < -c->clip ? -c->clip : x > c->clip ? c->clip : x;
  return x;
}

/* x W[d]^T row for gate k, unit j, at step t, batch b (+ both biases
 * unless skip_rb) */
static double proj(const rnn_case *c, const float *x, const float *w,
                   const float *bias, int d, int k, int64_t j, int64_t t,
                   int64_t b) {
  int G = gates_of(c);
  double s = 0;
  for (int64_t i = 0; i < c->I; i++) {
    int64_t xi =
        c->layout ? (b * c->S + t) * c->I + i : (t * c->B + b) * c->I + i;
    s += (double)x[xi] * w[((int64_t)d * G * c->H + k * c->H + j) * c->I + i];
  }
  if (bias) s += bias[(int64_t)d * 2 * G * c->H + k * c->H + j];
  return s;
}

static double hproj(const rnn_case *c, const double *h, const float *r, int d,
                    int k, int64_t j) {
  int G = gates_of(c);
  double s = 0;
  for (int64_t i = 0; i < c->H; i++)
    s += h[i] * r[((int64_t)d * G * c->H + k * c->H + j) * c->H + i];
  return s;
}

/* Y, Y_h, Y_c of the case into y, yh, yc (their ONNX shapes). */
static void reference(const rnn_case *c, const float *x, const float *w,
                      const float *r, const float *bias, const float *h0,
                      const float *c0, const float *p, float *y, float *yh,
                      float *yc) {
  int G = gates_of(c);
  int64_t S = c->S, B = c->B, H = c->H;
  const char *names[6];
  static const char *const dl[] = {"Sigmoid", "Tanh", "Tanh"};
  static const char *const dg[] = {"Sigmoid", "Tanh"};
  static const char *const dr[] = {"Tanh"};
  const char *const *dflt = G == 4 ? dl : G == 3 ? dg : dr;
  int na = G == 4 ? 3 : G == 3 ? 2 : 1;
  for (int d = 0; d < c->nd; d++)
    for (int k = 0; k < na; k++) names[d * na + k] = dflt[k];
  if (c->acts) { /* "A,B,..." for every direction */
    char buf[128];
    snprintf(buf, sizeof buf, "%s", c->acts);
    int k = 0;
    for (char *s = strtok(buf, ","); s; s = strtok(NULL, ",")) {
      static char keep[6][16];
      snprintf(keep[k], 16, "%s", s);
      names[k] = keep[k];
      k++;
    }
  }
  double *h = calloc((size_t)H, sizeof *h),
         *cell = calloc((size_t)H, sizeof *cell);
  double *nh = calloc((size_t)H, sizeof *nh),
         *rh = calloc((size_t)H, sizeof *rh);
  for (int d = 0; d < c->nd; d++) {
    const char *const *a = names + d * na;
    bool back = c->reverse || d == 1;
    for (int64_t b = 0; b < B; b++) {
      for (int64_t j = 0; j < H; j++) {
        h[j] = h0 ? h0[(d * B + b) * H + j] : 0;
        cell[j] = c0 ? c0[(d * B + b) * H + j] : 0;
      }
      for (int64_t i = 0; i < S; i++) {
        int64_t t = back ? S - 1 - i : i;
        const float *rb = bias ? bias + (int64_t)d * 2 * G * H + G * H : NULL;
        for (int64_t j = 0; j < H; j++) {
          double g[4];
          for (int k = 0; k < G; k++) g[k] = proj(c, x, w, bias, d, k, j, t, b);
          if (G == 1) {
            nh[j] = act(a[0], clipped(c, g[0] + hproj(c, h, r, d, 0, j) +
                                             (rb ? rb[j] : 0)));
          } else if (G == 4) {
            const float *pp = p ? p + (int64_t)d * 3 * H : NULL;
            for (int k = 0; k < 4; k++)
              g[k] += hproj(c, h, r, d, k, j) + (rb ? rb[k * H + j] : 0);
            double ig =
                act(a[0], clipped(c, g[0] + (pp ? pp[j] * cell[j] : 0)));
            double fg = act(
                a[0], clipped(c, g[2] + (pp ? pp[2 * H + j] * cell[j] : 0)));
            double cg = act(a[1], clipped(c, g[3]));
            double cn = fg * cell[j] + ig * cg;
            double og = act(a[0], clipped(c, g[1] + (pp ? pp[H + j] * cn : 0)));
            rh[j] = cn; /* the new cell, stored after the row */
            nh[j] = og * act(a[2], cn);
          } else {
            double z = act(a[0], clipped(c, g[0] + hproj(c, h, r, d, 0, j) +
                                                (rb ? rb[j] : 0)));
            double rr_j = 0; /* r_t for unit j */
            rr_j = act(a[0], clipped(c, g[1] + hproj(c, h, r, d, 1, j) +
                                            (rb ? rb[H + j] : 0)));
            double lin;
            if (c->lbr) {
              lin = rr_j * (hproj(c, h, r, d, 2, j) + (rb ? rb[2 * H + j] : 0));
            } else { /* (r (.) h) R_h^T needs every unit's r */
              double s = 0;
              for (int64_t m = 0; m < H; m++) {
                double rm =
                    act(a[0], clipped(c, proj(c, x, w, bias, d, 1, m, t, b) +
                                             hproj(c, h, r, d, 1, m) +
                                             (rb ? rb[H + m] : 0)));
                s += rm * h[m] * r[((int64_t)d * 3 * H + 2 * H + j) * H + m];
              }
              lin = s + (rb ? rb[2 * H + j] : 0);
            }
            double hh = act(a[1], clipped(c, g[2] + lin));
            nh[j] = (1 - z) * hh + z * h[j];
          }
        }
        for (int64_t j = 0; j < H; j++) {
          h[j] = nh[j];
          if (G == 4) cell[j] = rh[j];
          int64_t yi = c->layout ? ((b * S + t) * c->nd + d) * H + j
                                 : ((t * c->nd + d) * B + b) * H + j;
          y[yi] = (float)h[j];
        }
      }
      for (int64_t j = 0; j < H; j++) {
        int64_t si = c->layout ? (b * c->nd + d) * H + j : (d * B + b) * H + j;
        yh[si] = (float)h[j];
        if (yc) yc[si] = (float)cell[j];
      }
    }
  }
  free(h), free(cell), free(nh), free(rh);
}

/* ---- the graph ---- */

static int add_input3(ts_graph *g, const char *name, int nd,
                      const int64_t *shape) {
  int v = gr_value_add(g, name, TS_FLOAT32, nd, shape);
  g->values[v].is_input = true;
  int *ins = ts_arena_alloc(g->arena, sizeof(int) * (size_t)(g->n_inputs + 1));
  if (g->n_inputs) memcpy(ins, g->inputs, sizeof(int) * (size_t)g->n_inputs);
  ins[g->n_inputs++] = v;
  g->inputs = ins;
  return v;
}

typedef struct {
  float *x, *w, *r, *b, *h0, *c0, *p;
  int32_t *lens;
} rnn_data;

static ts_graph *build(const rnn_case *c, const rnn_data *dt) {
  int G = gates_of(c);
  int64_t S = c->S, B = c->B, H = c->H, nd = c->nd;
  ts_graph *g = ts_graph_new("rnn");
  int64_t xs[3] = {c->layout ? B : S, c->layout ? S : B, c->I};
  int ins[8] = {
      add_input3(g, "x", 3, xs),
      gr_const_add(g, "w", TS_FLOAT32, 3, (int64_t[]){nd, G * H, c->I}, dt->w),
      gr_const_add(g, "r", TS_FLOAT32, 3, (int64_t[]){nd, G * H, H}, dt->r),
      -1,
      -1,
      -1,
      -1,
      -1};
  int n_in = 3;
  if (c->bias)
    ins[3] =
        gr_const_add(g, "b", TS_FLOAT32, 2, (int64_t[]){nd, 2 * G * H}, dt->b),
    n_in = 4;
  if (dt->lens)
    ins[4] = gr_const_add(g, "lens", TS_INT32, 1, &B, dt->lens), n_in = 5;
  int64_t st[3] = {nd, B, H};
  if (c->init) {
    ins[5] = gr_const_add(g, "h0", TS_FLOAT32, 3, st, dt->h0), n_in = 6;
    if (G == 4)
      ins[6] = gr_const_add(g, "c0", TS_FLOAT32, 3, st, dt->c0), n_in = 7;
  }
  if (c->peep)
    ins[7] = gr_const_add(g, "p", TS_FLOAT32, 2, (int64_t[]){nd, 3 * H}, dt->p),
    n_in = 8;
  int n_out = G == 4 ? 3 : 2, outs[3];
  for (int k = 0; k < n_out; k++)
    outs[k] = gr_value_fresh(g, "y", TS_FLOAT32, -1, NULL);
  gr_node *n = gr_node_add(g, c->op, "rnn", ins, n_in, outs, n_out);
  gr_node_set_attr(
      g, n, (gr_attr){.name = "hidden_size", .kind = GR_ATTR_INT, .i = H});
  gr_node_set_attr(
      g, n, (gr_attr){.name = "layout", .kind = GR_ATTR_INT, .i = c->layout});
  const char *dir = nd == 2      ? "bidirectional"
                    : c->reverse ? "reverse"
                                 : "forward";
  gr_node_set_attr(
      g, n, (gr_attr){.name = "direction", .kind = GR_ATTR_STRING, .s = dir});
  if (c->lbr)
    gr_node_set_attr(
        g, n,
        (gr_attr){.name = "linear_before_reset", .kind = GR_ATTR_INT, .i = 1});
  if (c->clip > 0)
    gr_node_set_attr(
        g, n, (gr_attr){.name = "clip", .kind = GR_ATTR_FLOAT, .f = c->clip});
  if (c->acts)
    gr_node_set_attr(
        g, n,
        (gr_attr){.name = "activations", .kind = GR_ATTR_STRING, .s = c->acts});
  g->outputs = ts_arena_alloc(g->arena, sizeof(int) * 3);
  memcpy(g->outputs, outs, sizeof(int) * (size_t)n_out);
  g->n_outputs = n_out;
  return g;
}

static rnn_data data_of(const rnn_case *c) {
  int G = gates_of(c);
  int64_t S = c->S, B = c->B, H = c->H, nd = c->nd;
  return (rnn_data){filled(S * B * c->I, 1),   filled(nd * G * H * c->I, 2),
                    filled(nd * G * H * H, 3), filled(nd * 2 * G * H, 4),
                    filled(nd * B * H, 5),     filled(nd * B * H, 6),
                    filled(nd * 3 * H, 7),     NULL};
}

static void data_free(rnn_data *d) {
  free(d->x), free(d->w), free(d->r), free(d->b);
  free(d->h0), free(d->c0), free(d->p), free(d->lens);
}

static void check_case(const rnn_case *c) {
  rnn_data dt = data_of(c);
  ts_graph *g = build(c, &dt);
  ts_error err;
  if (ts_graph_run_passes(g, NULL, &err))
    fail_msg("%s: passes: %s", c->op, err.msg);
  assert_int_equal(ts_graph_count_op(g, c->op), 0);
  int G = gates_of(c), n_out = G == 4 ? 3 : 2;
  int64_t S = c->S, B = c->B, H = c->H;
  ts_graph_tensor in = {"x", TS_FLOAT32, 3, {0}, dt.x}, out[3];
  in.shape[0] = c->layout ? B : S, in.shape[1] = c->layout ? S : B,
  in.shape[2] = c->I;
  if (ts_graph_execute(g, TS_GRAPH_COMPILE, &in, 1, out, n_out, &err))
    fail_msg("%s: execute: %s", c->op, err.msg);
  int64_t ny = S * c->nd * B * H, ns = c->nd * B * H;
  float *y = calloc((size_t)ny, sizeof *y),
        *yh = calloc((size_t)ns, sizeof *yh),
        *yc = calloc((size_t)ns, sizeof *yc);
  reference(c, dt.x, dt.w, dt.r, c->bias ? dt.b : NULL, c->init ? dt.h0 : NULL,
            c->init ? dt.c0 : NULL, c->peep ? dt.p : NULL, y, yh,
            G == 4 ? yc : NULL);
  const float *want[3] = {y, yh, yc};
  int64_t count[3] = {ny, ns, ns};
  for (int k = 0; k < n_out; k++) {
    int64_t e = 1;
    for (int i = 0; i < out[k].ndim; i++) e *= out[k].shape[i];
    assert_int_equal(e, count[k]);
    for (int64_t i = 0; i < e; i++) {
      float got = ((float *)out[k].data)[i];
      if (fabsf(got - want[k][i]) > 2e-5f * (1 + fabsf(want[k][i])))
        fail_msg("%s (layout %d, %d dir): output %d [%lld]: %g, want %g", c->op,
                 c->layout, c->nd, k, (long long)i, got, want[k][i]);
    }
    free(out[k].data);
  }
  free(y), free(yh), free(yc);
  data_free(&dt);
  ts_graph_free(g);
}

static void test_against_reference(void **state) {
  (void)state;
  static const rnn_case cases[] = {
      {"LSTM", 0, 1, false, true, false, false, false, 0, NULL, 5, 2, 3, 4},
      {"LSTM", 1, 2, false, true, true, true, false, 0, NULL, 4, 3, 5, 6},
      {"LSTM", 0, 1, true, false, true, false, false, 0.75, NULL, 3, 1, 4, 5},
      {"GRU", 0, 1, false, true, false, false, false, 0, NULL, 5, 2, 3, 4},
      {"GRU", 1, 2, false, true, true, false, true, 0, NULL, 4, 2, 3, 5},
      {"GRU", 0, 2, false, false, true, false, false, 0.5,
       "Sigmoid,Tanh,Sigmoid,Softsign", 3, 2, 4, 3},
      {"RNN", 0, 1, true, true, true, false, false, 0, "Relu", 6, 2, 3, 4},
      {"RNN", 1, 2, false, true, false, false, false, 0, NULL, 4, 3, 2, 5},
      /* past one Concat's inputs: a tree of them */
      {"GRU", 0, 1, false, true, false, false, true, 0, NULL, 37, 1, 3, 4},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    check_case(&cases[i]);
}

static void expect_refused(const rnn_case *c, bool short_lens,
                           const char *want) {
  rnn_data dt = data_of(c);
  if (short_lens) {
    dt.lens = malloc(sizeof(int32_t) * (size_t)c->B);
    for (int64_t b = 0; b < c->B; b++) dt.lens[b] = (int32_t)(c->S - b);
  }
  ts_graph *g = build(c, &dt);
  ts_error err;
  int rc = ts_graph_run_passes(g, NULL, &err);
  assert_int_not_equal(rc, TS_OK);
  if (!strstr(err.msg, want))
    fail_msg("'%s' does not name '%s'", err.msg, want);
  data_free(&dt);
  ts_graph_free(g);
}

static void test_refused(void **state) {
  (void)state;
  rnn_case c = {"LSTM", 0, 1,    false, true, false, false,
                false,  0, NULL, 4,     2,    3,     4};
  expect_refused(&c, true, "sequence_lens[1] is 3");
  c.acts = "Sigmoid,HardSigmoid,Tanh";
  expect_refused(&c, false, "activation 'HardSigmoid'");
  c.acts = "Sigmoid,Tanh";
  expect_refused(&c, false, "2 activations");
}

/* The layout pass blocks a constant MatMul weight once, whichever products
 * read it (an unrolled layer's every step), and leaves it [K, N] for a
 * product of one row over weights a core keeps in cache (1 MiB) but not
 * for one of many rows or over larger weights. */
static void test_step_weights(void **state) {
  (void)state;
  static const struct {
    int64_t k, n;
    bool one_row_blocked;
  } cases[] = {{256, 1024, false}, {512, 1536, true}};
  for (int c = 0; c < 2; c++) {
    int64_t K = cases[c].k, N = cases[c].n;
    ts_graph *g = ts_graph_new("products");
    float *w = filled(K * N, 9);
    int wv = gr_const_add(g, "w", TS_FLOAT32, 2, (int64_t[]){K, N}, w);
    free(w);
    int64_t rows[3] = {1, 16, 8};
    int outs[3];
    for (int i = 0; i < 3; i++) {
      char name[8];
      snprintf(name, sizeof name, "x%d", i);
      int x = add_input3(g, name, 2, (int64_t[]){rows[i], K});
      outs[i] = node(g, "MatMul", (int[]){x, wv}, 2);
    }
    g->outputs = ts_arena_alloc(g->arena, sizeof outs);
    memcpy(g->outputs, outs, sizeof outs);
    g->n_outputs = 3;
    ts_error err;
    if (ts_graph_run_passes(g, "layout", &err)) fail_msg("passes: %s", err.msg);
    int weight[3];
    for (int i = 0; i < 3; i++)
      for (int k = 0; k < g->n_nodes; k++)
        if (g->nodes[k].outputs[0] == outs[i]) {
          weight[i] = g->nodes[k].inputs[1];
          assert_int_equal(gr_matmul_weight_block(&g->nodes[k]) != 0,
                           i > 0 || cases[c].one_row_blocked);
        }
    assert_int_equal(weight[1], weight[2]); /* one blocked copy */
    assert_int_equal(weight[0] == weight[1], cases[c].one_row_blocked);
    ts_graph_free(g);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_against_reference),
      cmocka_unit_test(test_refused),
      cmocka_unit_test(test_step_weights),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
