/*
 * lower_rnn.c — the recurrent operators (LSTM, GRU, RNN) unrolled over
 * their static sequence length into MatMuls, Slices and elementwise nodes:
 *
 *   XW  = MatMul(X, W[d]^T) + the biases that do not depend on the state
 *         (one product for every step: [S, B, I] x [I, gates * H])
 *   per step t (in reverse for the reverse direction):
 *     g_t = Slice(XW, t) + MatMul(H_{t-1}, R[d]^T)
 *     the gates as Slices of g_t, their activations, the new state
 *   Y     = Concat of the states in sequence order (per direction)
 *   Y_h   = the last state, Y_c (LSTM) the last cell
 *
 * The weight slices and transposes are of constants in the usual export
 * and fold away after lowering; weights fed as inputs work too. The fusion
 * pass then makes each step a small product with its elementwise epilogue.
 * Exact up to float rounding: the same products and sums as the ONNX
 * definition. Refused with a message: a sequence length that is symbolic
 * or over GR_RNN_MAX_STEPS, sequence_lens shorter than the sequence,
 * LSTM's input_forget, activations other than those listed in
 * rnn_activation, dtypes other than float32.
 */
#include "lower.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Steps times directions beyond which unrolling is refused (each step is a
 * few kernels: a longer sequence wants a loop, which the graph has not). */
#define GR_RNN_MAX_STEPS 1024
/* Inputs per Concat node of the outputs (a tree above that; a kernel has at
 * most GR_FUSE_MAX_PARAMS parameters, its output included). */
#define CONCAT_FAN_IN 16
/* An optional input or state the node does not have (not a value id, not
 * an error code). */
#define ABSENT (-1000)

static const char *const activation_names[] = {"Sigmoid",  "Tanh",     "Relu",
                                               "Softsign", "Softplus", NULL};

/* The canonical name of activation `s` (case as ONNX spells it, or any
 * case), NULL when it is not one this lowering emits. */
static const char *rnn_activation(const char *s, size_t len) {
  for (int i = 0; activation_names[i]; i++)
    if (strlen(activation_names[i]) == len &&
        !strncasecmp(activation_names[i], s, len))
      return activation_names[i];
  return NULL;
}

int gr_rnn_parse(const ts_graph *g, const gr_node *n, gr_rnn *r, char *why,
                 size_t size) {
  memset(r, 0, sizeof *r);
  bool lstm = !strcmp(n->op, "LSTM"), gru = !strcmp(n->op, "GRU");
  r->gates = lstm ? 4 : gru ? 3 : 1;
  r->n_act = lstm ? 3 : gru ? 2 : 1;
  if (n->n_inputs < 3 || n->inputs[0] < 0 || n->inputs[1] < 0 ||
      n->inputs[2] < 0)
    return snprintf(why, size, "needs X, W and R"), -1;
  const gr_value *x = &g->values[n->inputs[0]], *w = &g->values[n->inputs[1]],
                 *rv = &g->values[n->inputs[2]];
  for (int i = 0; i < n->n_inputs && i < 8; i++) {
    if (n->inputs[i] < 0) continue;
    const gr_value *v = &g->values[n->inputs[i]];
    if (v->ndim < 0 || gr_value_elems(v) < 0) return -2;
    bool lens = i == 4;
    if (lens ? !ts_dtype_eq(v->dtype, TS_INT32)
             : !ts_dtype_eq(v->dtype, TS_FLOAT32))
      return snprintf(why, size, "input %d must be %s", i,
                      lens ? "int32" : "float32"),
             -3;
  }
  if (x->ndim != 3 || w->ndim != 3 || rv->ndim != 3)
    return snprintf(why, size, "X, W and R must be of rank 3"), -1;
  for (int i = 0; i < 3; i++)
    if (x->sym && x->sym[i])
      return snprintf(why, size,
                      "X's dimension %d is symbolic ('%s'); the sequence is "
                      "unrolled at a static length",
                      i, x->sym[i]),
             -3;
  r->layout = (int)gr_attr_int(n, "layout", 0);
  if (r->layout != 0 && r->layout != 1)
    return snprintf(why, size, "layout %d (0 or 1)", r->layout), -1;
  r->S = x->shape[r->layout ? 1 : 0];
  r->B = x->shape[r->layout ? 0 : 1];
  r->I = x->shape[2];
  const char *dir = gr_attr_string(n, "direction", "forward");
  r->nd = !strcmp(dir, "bidirectional") ? 2 : 1;
  r->reverse = !strcmp(dir, "reverse");
  if (r->nd == 1 && !r->reverse && strcmp(dir, "forward"))
    return snprintf(why, size,
                    "direction '%s' (forward, reverse or bidirectional)", dir),
           -1;
  r->H = rv->shape[2];
  int64_t hs = gr_attr_int(n, "hidden_size", r->H);
  int64_t gh = r->gates * r->H;
  if (hs != r->H || r->H <= 0 || w->shape[0] != r->nd ||
      rv->shape[0] != r->nd || w->shape[1] != gh || rv->shape[1] != gh ||
      w->shape[2] != r->I)
    return snprintf(why, size,
                    "W [%lld, %lld, %lld] and R [%lld, %lld, %lld] do not "
                    "fit %d direction(s), %d gate(s), input size %lld, "
                    "hidden size %lld",
                    (long long)w->shape[0], (long long)w->shape[1],
                    (long long)w->shape[2], (long long)rv->shape[0],
                    (long long)rv->shape[1], (long long)rv->shape[2], r->nd,
                    r->gates, (long long)r->I, (long long)hs),
           -1;
  /* B [nd, 2 gates H], sequence_lens [B], initial_h (and initial_c)
   * [nd, B, H], P [nd, 3 H] */
  for (int i = 3; i < n->n_inputs && i < 8; i++) {
    if (n->inputs[i] < 0) continue;
    const gr_value *v = &g->values[n->inputs[i]];
    int64_t want[3] = {r->nd, r->B, r->H};
    int nd = 3;
    if (i == 3) want[1] = 2 * gh, nd = 2;
    if (i == 4) want[0] = r->B, nd = 1;
    if (i == 6 && !lstm) return snprintf(why, size, "too many inputs"), -1;
    if (i == 7) want[1] = 3 * r->H, nd = 2;
    bool ok = v->ndim == nd;
    for (int k = 0; ok && k < nd; k++) ok = v->shape[k] == want[k];
    if (!ok)
      return snprintf(why, size,
                      "input %d has not the shape the operator "
                      "gives it by X, W and R",
                      i),
             -1;
  }
  if (r->S * r->nd > GR_RNN_MAX_STEPS)
    return snprintf(why, size,
                    "%lld steps in %d direction(s): unrolled up to %d",
                    (long long)r->S, r->nd, GR_RNN_MAX_STEPS),
           -3;
  if (lstm && gr_attr_int(n, "input_forget", 0))
    return snprintf(why, size, "input_forget (coupled gates)"), -3;
  r->lbr = gru && gr_attr_int(n, "linear_before_reset", 0);
  r->clip = gr_attr_float(n, "clip", 0.0);
  if (gr_attr_find(n, "clip") && !(r->clip > 0))
    return snprintf(why, size, "clip must be positive"), -1;
  static const char *const defaults[3][3] = {
      {"Sigmoid", "Tanh", "Tanh"}, {"Sigmoid", "Tanh"}, {"Tanh"}};
  const char *const *dflt = defaults[lstm ? 0 : gru ? 1 : 2];
  for (int d = 0; d < r->nd; d++)
    for (int k = 0; k < r->n_act; k++) r->act[d][k] = dflt[k];
  const char *acts = gr_attr_string(n, "activations", NULL);
  if (acts) {
    const char *names[6];
    int count = 0;
    for (const char *p = acts; *p;) {
      size_t len = strcspn(p, ",");
      if (count == 6) return snprintf(why, size, "more than 6 activations"), -1;
      names[count] = rnn_activation(p, len);
      if (!names[count])
        return snprintf(why, size,
                        "activation '%.*s' (have Sigmoid, Tanh, Relu, "
                        "Softsign, Softplus)",
                        (int)len, p),
               -3;
      count++;
      p += len + (p[len] == ',');
    }
    if (count != r->n_act && count != r->n_act * r->nd)
      return snprintf(why, size, "%d activations, want %d per direction", count,
                      r->n_act),
             -1;
    for (int d = 0; d < r->nd; d++)
      for (int k = 0; k < r->n_act; k++)
        r->act[d][k] = names[(count == r->n_act ? 0 : d * r->n_act) + k];
  }
  return 0;
}

/* ---- lowering ---- */

typedef struct {
  gr_lowering *l;
  const gr_node *n;
  const gr_rnn *r;
} rnn_ctx;

static int emit(rnn_ctx *c, const char *op, const int *ins, int k,
                const gr_attr *a, int na, int out) {
  for (int i = 0; i < k; i++)
    if (ins[i] < 0) return ins[i] == ABSENT ? TS_EINVAL : ins[i];
  return gr_lower_node(c->l, c->n, op, ins, k, out, a, na, "rnn");
}

static int op1(rnn_ctx *c, const char *op, int a) {
  return emit(c, op, &a, 1, NULL, 0, -1);
}

static int op2(rnn_ctx *c, const char *op, int a, int b) {
  int ins[2] = {a, b};
  return emit(c, op, ins, 2, NULL, 0, -1);
}

static int reshape(rnn_ctx *c, int x, int nd, const int64_t *shape, int out) {
  return gr_lower_reshape(c->l, c->n, x, nd, shape, out, "rnn");
}

static int slice(rnn_ctx *c, int x, int64_t axis, int64_t start, int64_t end) {
  return gr_lower_slice(c->l, c->n, x, axis, start, end, 1, -1, "rnn");
}

static bool present(const rnn_ctx *c, int input) {
  return input < c->n->n_inputs && c->n->inputs[input] >= 0;
}

/* Direction d of an input [nd, ...] as the given shape (ABSENT when the
 * node has no such input). */
static int dir_part(rnn_ctx *c, int input, int d, int nd,
                    const int64_t *shape) {
  if (!present(c, input)) return ABSENT;
  int v = c->n->inputs[input];
  if (c->r->nd > 1) v = slice(c, v, 0, d, d + 1);
  return v < 0 ? v : reshape(c, v, nd, shape, -1);
}

/* W[d] or R[d] ([rows, cols]) transposed for a MatMul: [cols, rows]. */
static int dir_weight_t(rnn_ctx *c, int input, int d, int64_t rows,
                        int64_t cols) {
  int v = dir_part(c, input, d, 2, (int64_t[]){rows, cols});
  gr_attr perm = {
      .name = "perm", .kind = GR_ATTR_INTS, .n = 2, .ints = (int64_t[]){1, 0}};
  return v < 0 ? v : emit(c, "Transpose", &v, 1, &perm, 1, -1);
}

static int zeros(rnn_ctx *c, int nd, const int64_t *shape, int64_t count) {
  ts_graph *g = c->l->g;
  int id =
      gr_const_reserve(g, gr_fresh_name(g, "rnn_zeros"), TS_FLOAT32, nd, shape);
  if (id >= 0) memset(gr_const_data(g, id), 0, sizeof(float) * (size_t)count);
  return id;
}

static int activate(rnn_ctx *c, const char *act, int x) {
  if (c->r->clip > 0) {
    int lo = gr_lower_const_f32(c->l->g, gr_fresh_name(c->l->g, "clip"), 0,
                                NULL, (double[]){-c->r->clip}, 1);
    int hi = gr_lower_const_f32(c->l->g, gr_fresh_name(c->l->g, "clip"), 0,
                                NULL, (double[]){c->r->clip}, 1);
    if (lo < 0 || hi < 0) return TS_ENOMEM;
    int ins[3] = {x, lo, hi};
    x = emit(c, "Clip", ins, 3, NULL, 0, -1);
  }
  return x < 0 ? x : op1(c, act, x);
}

/* Gate k of a [B, gates H] value. */
static int gate(rnn_ctx *c, int v, int k) {
  return slice(c, v, 1, k * c->r->H, (k + 1) * c->r->H);
}

typedef struct {
  int xw;      /* [S, B, gates H] or [B, S, gates H]: inputs and biases */
  int rt;      /* R[d]^T [H, gates H] */
  int rt_zr;   /* GRU without linear_before_reset: R^T of z and r */
  int rt_h;    /* ... and of h */
  int rb_h;    /* GRU with linear_before_reset: R's bias of h, or -1 */
  int p[3];    /* LSTM peepholes i, o, f, or -1 */
  int h, cell; /* the state */
} dir_state;

/* The state after step t of direction d. */
static int step(rnn_ctx *c, dir_state *s, int d, int64_t t) {
  const gr_rnn *r = c->r;
  int64_t gh = r->gates * r->H;
  int xt = slice(c, s->xw, r->layout ? 1 : 0, t, t + 1);
  xt = xt < 0 ? xt : reshape(c, xt, 2, (int64_t[]){r->B, gh}, -1);
  if (xt < 0) return xt;
  const char *const *act = r->act[d];
  if (r->gates == 1) { /* RNN */
    int a = op2(c, "Add", xt, op2(c, "MatMul", s->h, s->rt));
    s->h = activate(c, act[0], a);
    return s->h < 0 ? s->h : TS_OK;
  }
  if (r->gates == 4) { /* LSTM: gates i, o, f, c */
    int a = op2(c, "Add", xt, op2(c, "MatMul", s->h, s->rt));
    int gi = gate(c, a, 0), go = gate(c, a, 1), gf = gate(c, a, 2),
        gc = gate(c, a, 3);
    if (s->p[0] != ABSENT) {
      gi = op2(c, "Add", gi, op2(c, "Mul", s->p[0], s->cell));
      gf = op2(c, "Add", gf, op2(c, "Mul", s->p[2], s->cell));
    }
    int i = activate(c, act[0], gi), f = activate(c, act[0], gf);
    int cc = activate(c, act[1], gc);
    int cell = op2(c, "Add", op2(c, "Mul", f, s->cell), op2(c, "Mul", i, cc));
    if (s->p[1] != ABSENT) go = op2(c, "Add", go, op2(c, "Mul", s->p[1], cell));
    int o = activate(c, act[0], go);
    s->h = op2(c, "Mul", o, activate(c, act[2], cell));
    s->cell = cell;
    return s->h < 0 ? s->h : TS_OK;
  }
  /* GRU: gates z, r, h */
  int hr = op2(c, "MatMul", s->h, r->lbr ? s->rt : s->rt_zr);
  int z = activate(c, act[0], op2(c, "Add", gate(c, xt, 0), gate(c, hr, 0)));
  int rg = activate(c, act[0], op2(c, "Add", gate(c, xt, 1), gate(c, hr, 1)));
  int lin;
  if (r->lbr) {
    int hh = gate(c, hr, 2);
    if (s->rb_h != ABSENT) hh = op2(c, "Add", hh, s->rb_h);
    lin = op2(c, "Mul", rg, hh);
  } else {
    lin = op2(c, "MatMul", op2(c, "Mul", rg, s->h), s->rt_h);
  }
  int cand = activate(c, act[1], op2(c, "Add", gate(c, xt, 2), lin));
  /* (1 - z) cand + z h = cand + z (h - cand) */
  s->h = op2(c, "Add", cand, op2(c, "Mul", z, op2(c, "Sub", s->h, cand)));
  return s->h < 0 ? s->h : TS_OK;
}

/* One direction's weights, biases and initial state. */
static int setup(rnn_ctx *c, dir_state *s, int d) {
  const gr_rnn *r = c->r;
  const gr_node *n = c->n;
  int64_t gh = r->gates * r->H, H = r->H;
  s->rt_zr = s->rt_h = s->rb_h = s->cell = ABSENT;
  s->p[0] = s->p[1] = s->p[2] = ABSENT;
  int wt = dir_weight_t(c, 1, d, gh, r->I);
  s->rt = dir_weight_t(c, 2, d, gh, H);
  if (wt < 0 || s->rt < 0) return wt < 0 ? wt : s->rt;
  s->xw = op2(c, "MatMul", n->inputs[0], wt);
  if (present(c, 3)) {
    int b = dir_part(c, 3, d, 1, (int64_t[]){2 * gh});
    int wb = slice(c, b, 0, 0, gh), rb = slice(c, b, 0, gh, 2 * gh);
    if (r->lbr) { /* R's bias of h is added after the reset gate */
      s->rb_h = slice(c, rb, 0, 2 * H, 3 * H);
      double *mask = ts_malloc(sizeof(double) * (size_t)gh);
      if (!mask) return TS_ENOMEM;
      for (int64_t k = 0; k < gh; k++) mask[k] = k < 2 * H;
      int m = gr_lower_const_f32(c->l->g, gr_fresh_name(c->l->g, "rnn_mask"), 1,
                                 &gh, mask, gh);
      free(mask);
      rb = op2(c, "Mul", rb, m);
    }
    s->xw = op2(c, "Add", s->xw, op2(c, "Add", wb, rb));
  }
  if (r->gates == 3 && !r->lbr) {
    s->rt_zr = slice(c, s->rt, 1, 0, 2 * H);
    s->rt_h = slice(c, s->rt, 1, 2 * H, 3 * H);
  }
  if (r->gates == 4 && present(c, 7)) {
    int p = dir_part(c, 7, d, 1, (int64_t[]){3 * H});
    for (int k = 0; k < 3; k++) s->p[k] = slice(c, p, 0, k * H, (k + 1) * H);
  }
  int64_t state[2] = {r->B, H};
  s->h = present(c, 5) ? dir_part(c, 5, d, 2, state)
                       : zeros(c, 2, state, r->B * H);
  if (r->gates == 4)
    s->cell = present(c, 6) ? dir_part(c, 6, d, 2, state)
                            : zeros(c, 2, state, r->B * H);
  return s->xw < 0 ? s->xw : s->h < 0 ? s->h : TS_OK;
}

/* Concat of parts[0..k) along axis into out (a tree of CONCAT_FAN_IN). */
static int concat(rnn_ctx *c, int *parts, int k, int64_t axis, int out) {
  gr_attr a = {.name = "axis", .kind = GR_ATTR_INT, .i = axis};
  while (k > CONCAT_FAN_IN) {
    int m = 0;
    for (int i = 0; i < k; i += CONCAT_FAN_IN) {
      int len = k - i < CONCAT_FAN_IN ? k - i : CONCAT_FAN_IN;
      parts[m++] =
          len == 1 ? parts[i] : emit(c, "Concat", parts + i, len, &a, 1, -1);
      if (parts[m - 1] < 0) return parts[m - 1];
    }
    k = m;
  }
  if (k == 1) return emit(c, "Identity", parts, 1, NULL, 0, out);
  return emit(c, "Concat", parts, k, &a, 1, out);
}

/* ONNX's sequence_lens must be the whole sequence for every batch row. */
static int check_lengths(rnn_ctx *c) {
  const gr_node *n = c->n;
  gr_lowering *l = c->l;
  if (!present(c, 4)) return TS_OK;
  if (!gr_is_const(l->g, n->inputs[4]))
    return GR_LOWER_FAIL("sequence_lens is not a constant (sequences shorter "
                         "than X are not supported)");
  const int32_t *len = gr_const_data(l->g, n->inputs[4]);
  for (int64_t b = 0; b < c->r->B; b++)
    if (len[b] != c->r->S)
      return GR_LOWER_FAIL("sequence_lens[%lld] is %d, not the sequence "
                           "length %lld (shorter sequences are not supported)",
                           (long long)b, (int)len[b], (long long)c->r->S);
  return TS_OK;
}

int gr_lower_rnn(gr_lowering *l, const gr_node *n) {
  if (strcmp(n->op, "LSTM") && strcmp(n->op, "GRU") && strcmp(n->op, "RNN"))
    return 1;
  gr_rnn r;
  char why[256];
  int rc = gr_rnn_parse(l->g, n, &r, why, sizeof why);
  if (rc) return GR_LOWER_FAIL("%s", rc == -2 ? "shapes unknown" : why);
  rnn_ctx c = {l, n, &r};
  if ((rc = check_lengths(&c))) return rc;
  int64_t S = r.S, B = r.B, H = r.H;
  int *ys = ts_calloc((size_t)(S * r.nd) + 1, sizeof *ys);
  int last_h[2], last_c[2];
  if (!ys) return TS_ERR(l->err, TS_ENOMEM, "lowering '%s'", n->name);
  for (int d = 0; d < r.nd && !rc; d++) {
    dir_state s;
    if ((rc = setup(&c, &s, d))) break;
    bool back = r.reverse || d == 1;
    for (int64_t i = 0; i < S && !rc; i++) {
      int64_t t = back ? S - 1 - i : i;
      if ((rc = step(&c, &s, d, t))) break;
      /* Y [S, nd, B, H] or [B, S, nd, H] */
      int64_t y0[4] = {1, 1, B, H}, y1[4] = {B, 1, 1, H};
      ys[d * S + t] = reshape(&c, s.h, 4, r.layout ? y1 : y0, -1);
      if (ys[d * S + t] < 0) rc = ys[d * S + t];
    }
    last_h[d] = s.h, last_c[d] = s.cell;
  }
  int seq_axis = r.layout ? 1 : 0, dir_axis = r.layout ? 2 : 1;
  if (!rc && n->n_outputs > 0) {
    int dirs[2];
    for (int d = 0; d < r.nd && !rc; d++) {
      dirs[d] = concat(&c, ys + d * S, (int)S, seq_axis,
                       r.nd > 1 ? -1 : n->outputs[0]);
      if (dirs[d] < 0) rc = dirs[d];
    }
    if (!rc && r.nd > 1) rc = concat(&c, dirs, 2, dir_axis, n->outputs[0]);
  }
  /* Y_h, Y_c [nd, B, H] or [B, nd, H] */
  for (int k = 1; k < n->n_outputs && k < 3 && rc >= 0; k++) {
    int parts[2];
    for (int d = 0; d < r.nd && rc >= 0; d++) {
      int64_t s0[3] = {1, B, H}, s1[3] = {B, 1, H};
      parts[d] = reshape(&c, k == 1 ? last_h[d] : last_c[d], 3,
                         r.layout ? s1 : s0, -1);
      if (parts[d] < 0) rc = parts[d];
    }
    if (rc >= 0) rc = concat(&c, parts, r.nd, r.layout ? 1 : 0, n->outputs[k]);
  }
  free(ys);
  if (rc == TS_ENOMEM && l->err && !l->err->msg[0])
    TS_ERR(l->err, TS_ENOMEM, "lowering '%s': out of memory", n->name);
  return rc < 0 ? rc : TS_OK;
}
