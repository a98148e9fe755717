/*
 * pet_check.c — PET's mutation checker: box propagation and evaluation at
 * random points.
 *
 * A mutant computes the same output as the original program on most of
 * it and may differ on some regions (at the seams of a re-laid image, at
 * a padding that moved). Which regions is found without enumerating the
 * output:
 *
 * Box propagation. Each axis of each value carries split points (0 and its
 * extent always): between two neighbouring points every element of the
 * value is computed by the same expression of the program's inputs, with
 * the same taps falling inside or outside the padding. Inputs have no
 * interior points; each operator pushes its inputs' points to its output
 * by its index expressions: a conv or pool window adds the output
 * positions where one of its taps crosses an input point (the image's own
 * edges among them), a slice shifts them, a concat offsets them, a
 * transpose permutes them, a reshape flattens them and splits the flat
 * points over the new axes (rounding both ways where they do not fall on a
 * row boundary). The boxes of an output are the products of the intervals
 * between its points, merged from both programs.
 *
 * Evaluation. Within one box both programs are multilinear expressions of
 * fixed form in their inputs (conv, matmul and data movement; no relu
 * inside a program). PET's theorem: if two such expressions agree at m + 1
 * positions of an m-dimensional box for inputs drawn at random, they agree
 * on the whole box except with a probability that falls with the number of
 * independent draws t (docs/pet.md gives the argument and the bound). So
 * each box is evaluated at its lowest corner and m random positions, each
 * with t sets of random inputs, in double precision; a box where any pair
 * differs needs a correction.
 *
 * The random inputs are a hash of (seed, trial, value, element): the same
 * for the original and the mutant, which read the same graph values, and
 * reproducible from the seed. Constants both programs read (weights) are
 * inputs like the data; constants only the mutant reads (the zero rows it
 * pads an image with) keep their values.
 */
#include "pet.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- random inputs ---- */

static uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static double uniform(uint64_t h) {
  return (double)(h >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0;
}

/* ---- index helpers ---- */

static int64_t flat_of(const int64_t *shape, int nd, const int64_t *idx) {
  int64_t f = 0;
  for (int d = 0; d < nd; d++) f = f * shape[d] + idx[d];
  return f;
}

static void unflat(const int64_t *shape, int nd, int64_t f, int64_t *idx) {
  for (int d = nd - 1; d >= 0; d--) {
    idx[d] = f % shape[d];
    f /= shape[d];
  }
}

static int64_t ceil_div(int64_t a, int64_t b) {
  return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

static const gr_node *producer(const pet_prog *p, int v) {
  for (int i = 0; i < p->n; i++)
    for (int k = 0; k < p->nodes[i].n_outputs; k++)
      if (p->nodes[i].outputs[k] == v) return &p->nodes[i];
  return NULL;
}

/* The ints of constant input k of n (int64 or int32), count in *c. */
static bool const_ints(const ts_graph *g, const gr_node *n, int k, int64_t *out,
                       int *c) {
  if (k >= n->n_inputs || n->inputs[k] < 0 || !gr_is_const(g, n->inputs[k]))
    return false;
  const gr_value *v = &g->values[n->inputs[k]];
  int64_t e = gr_value_elems(v);
  if (e < 0 || e > TS_MAX_DIMS || !ts_dtype_is_int(v->dtype)) return false;
  const void *d = gr_const_data(g, n->inputs[k]);
  for (int64_t i = 0; i < e; i++) out[i] = ts_host_get_int(d, v->dtype, i);
  *c = (int)e;
  return true;
}

/* Start and step of every axis of a Slice (positive steps only). */
static bool slice_spec(const ts_graph *g, const gr_node *n, int64_t *start,
                       int64_t *step) {
  const gr_value *x = &g->values[n->inputs[0]];
  int64_t st[TS_MAX_DIMS], en[TS_MAX_DIMS], ax[TS_MAX_DIMS], sp[TS_MAX_DIMS];
  int ns, ne, na = 0, nsp = 0;
  if (!const_ints(g, n, 1, st, &ns) || !const_ints(g, n, 2, en, &ne) ||
      ns != ne)
    return false;
  if (n->n_inputs > 3 && n->inputs[3] >= 0 && !const_ints(g, n, 3, ax, &na))
    return false;
  if (n->n_inputs > 4 && n->inputs[4] >= 0 && !const_ints(g, n, 4, sp, &nsp))
    return false;
  if ((na && na != ns) || (nsp && nsp != ns)) return false;
  for (int d = 0; d < x->ndim; d++) start[d] = 0, step[d] = 1;
  for (int i = 0; i < ns; i++) {
    int64_t a = na ? ax[i] : i;
    if (a < 0) a += x->ndim;
    if (a < 0 || a >= x->ndim) return false;
    int64_t s = st[i], dim = x->shape[a];
    if (nsp && sp[i] <= 0) return false;
    if (s < 0) s += dim;
    start[a] = s < 0 ? 0 : s > dim ? dim : s;
    step[a] = nsp ? sp[i] : 1;
  }
  return true;
}

bool pet_conv_geo(const ts_graph *g, const gr_node *n, pet_conv *c) {
  if (strcmp(n->op, "Conv") || n->n_inputs < 2) return false;
  const gr_value *x = &g->values[n->inputs[0]], *w = &g->values[n->inputs[1]];
  const gr_value *y = &g->values[n->outputs[0]];
  if (x->ndim != 4 || y->ndim != 4) return false;
  c->nhwc = gr_node_channels_last(n);
  c->block = gr_conv_weight_block(n);
  c->cdim = c->nhwc ? 3 : 1;
  c->sdim = c->nhwc ? 1 : 2;
  c->group = gr_attr_int(n, "group", 1);
  int64_t co = y->shape[c->cdim], ci = x->shape[c->cdim];
  if (c->group <= 0 || co % c->group || ci % c->group) return false;
  c->cig = ci / c->group;
  c->cog = co / c->group;
  if (c->block) /* [CO/B, KH, KW, CI/g, B] */
    c->k[0] = w->shape[1], c->k[1] = w->shape[2];
  else if (c->nhwc) /* [KH, KW, CI/g, CO] */
    c->k[0] = w->shape[0], c->k[1] = w->shape[1];
  else /* [CO, CI/g, KH, KW] */
    c->k[0] = w->shape[2], c->k[1] = w->shape[3];
  int cnt;
  const int64_t *p;
  c->s[0] = c->s[1] = c->d[0] = c->d[1] = 1;
  if ((p = gr_attr_ints(n, "strides", &cnt)) && cnt == 2)
    c->s[0] = p[0], c->s[1] = p[1];
  if ((p = gr_attr_ints(n, "dilations", &cnt)) && cnt == 2)
    c->d[0] = p[0], c->d[1] = p[1];
  int64_t in_sp[2] = {x->shape[c->sdim], x->shape[c->sdim + 1]};
  return gr_resolve_pads(n, 2, in_sp, c->k, c->s, c->d, c->pad) == 0;
}

/* ---- evaluation at a point ---- */

typedef struct ev {
  const ts_graph *g;
  const pet_prog *p;
  const int *node_of;   /* value -> index of its producer in p, -1 (or NULL:
                           search) */
  const uint8_t *exact; /* values whose constant data is used as it is (or
                           NULL: none) */
  double **memo;        /* per value: the elements computed so far (NAN:
                           not yet) of data-movement and elementwise
                           values, for the current trial (or NULL) */
  const int *canon;     /* value -> the input it stands for: equal constants are
                           one input (or NULL: itself) */
  uint64_t seed;
  int trial;
  bool ok;
} ev;

static double at(ev *e, int v, const int64_t *idx);

static double leaf(ev *e, int v, const int64_t *idx) {
  const gr_value *x = &e->g->values[v];
  int64_t f = flat_of(x->shape, x->ndim, idx);
  if (!ts_dtype_is_float(x->dtype) || (e->exact && e->exact[v])) {
    if (!gr_is_const(e->g, v)) {
      e->ok = false;
      return NAN;
    }
    return ts_host_get(gr_const_data(e->g, v), x->dtype, f);
  }
  int id = e->canon ? e->canon[v] : v;
  uint64_t h = mix(e->seed ^ mix((uint64_t)id * 0x100000001b3ull +
                                 (uint64_t)e->trial * 0x9e3779b9ull));
  return uniform(mix(h ^ (uint64_t)f));
}

static double eval_conv(ev *e, const gr_node *n, const int64_t *idx) {
  pet_conv c;
  const ts_graph *g = e->g;
  if (!pet_conv_geo(g, n, &c)) {
    e->ok = false;
    return NAN;
  }
  int x = n->inputs[0], w = n->inputs[1];
  int b = n->n_inputs > 2 ? n->inputs[2] : -1;
  const gr_value *xv = &g->values[x];
  int64_t co = idx[c.cdim], grp = co / c.cog;
  int64_t ih0 = idx[c.sdim] * c.s[0] - c.pad[0];
  int64_t iw0 = idx[c.sdim + 1] * c.s[1] - c.pad[1];
  double sum = 0;
  for (int64_t kh = 0; kh < c.k[0]; kh++) {
    int64_t ih = ih0 + kh * c.d[0];
    if (ih < 0 || ih >= xv->shape[c.sdim]) continue;
    for (int64_t kw = 0; kw < c.k[1]; kw++) {
      int64_t iw = iw0 + kw * c.d[1];
      if (iw < 0 || iw >= xv->shape[c.sdim + 1]) continue;
      for (int64_t ci = 0; ci < c.cig && e->ok; ci++) {
        int64_t xi[4], wi[5];
        xi[0] = idx[0];
        xi[c.cdim] = grp * c.cig + ci;
        xi[c.sdim] = ih;
        xi[c.sdim + 1] = iw;
        if (c.block) {
          wi[0] = co / c.block, wi[1] = kh, wi[2] = kw, wi[3] = ci;
          wi[4] = co % c.block;
        } else if (c.nhwc) {
          wi[0] = kh, wi[1] = kw, wi[2] = ci, wi[3] = co;
        } else {
          wi[0] = co, wi[1] = ci, wi[2] = kh, wi[3] = kw;
        }
        sum += at(e, x, xi) * at(e, w, wi);
      }
    }
  }
  if (b >= 0) sum += at(e, b, (int64_t[]){co});
  return sum;
}

static double eval_matmul(ev *e, const gr_node *n, const int64_t *idx) {
  const ts_graph *g = e->g;
  int a = n->inputs[0], b = n->inputs[1];
  const gr_value *av = &g->values[a], *bv = &g->values[b];
  const gr_value *yv = &g->values[n->outputs[0]];
  int64_t B = gr_matmul_weight_block(n);
  if (av->ndim < 2 || (B ? bv->ndim != 3 : bv->ndim < 2)) {
    e->ok = false;
    return NAN;
  }
  int r = yv->ndim;
  int64_t K = av->shape[av->ndim - 1], m = idx[r - 2], col = idx[r - 1];
  int64_t ai[TS_MAX_DIMS], bi[TS_MAX_DIMS];
  for (int d = 0; d < av->ndim - 2; d++) {
    int od = d + (r - av->ndim);
    ai[d] = av->shape[d] == 1 ? 0 : idx[od];
  }
  if (!B)
    for (int d = 0; d < bv->ndim - 2; d++) {
      int od = d + (r - bv->ndim);
      bi[d] = bv->shape[d] == 1 ? 0 : idx[od];
    }
  double sum = 0;
  for (int64_t k = 0; k < K && e->ok; k++) {
    ai[av->ndim - 2] = m, ai[av->ndim - 1] = k;
    if (B)
      bi[0] = col / B, bi[1] = k, bi[2] = col % B;
    else
      bi[bv->ndim - 2] = k, bi[bv->ndim - 1] = col;
    sum += at(e, a, ai) * at(e, b, bi);
  }
  return sum;
}

static double eval_binary(ev *e, const gr_node *n, const int64_t *idx) {
  const gr_value *yv = &e->g->values[n->outputs[0]];
  double v[2];
  for (int k = 0; k < 2; k++) {
    const gr_value *x = &e->g->values[n->inputs[k]];
    int64_t xi[TS_MAX_DIMS];
    int off = yv->ndim - x->ndim;
    for (int d = 0; d < x->ndim; d++)
      xi[d] = x->shape[d] == 1 ? 0 : idx[d + off];
    v[k] = at(e, n->inputs[k], xi);
  }
  if (!strcmp(n->op, "Add")) return v[0] + v[1];
  if (!strcmp(n->op, "Sub")) return v[0] - v[1];
  return v[0] * v[1];
}

static double eval_node(ev *e, const gr_node *n, const int64_t *idx) {
  const ts_graph *g = e->g;
  const char *op = n->op;
  const gr_value *yv = &g->values[n->outputs[0]];
  int x = n->n_inputs ? n->inputs[0] : -1;
  int64_t xi[TS_MAX_DIMS];
  if (x < 0 || n->kind != TS_GRAPH_OP || n->n_outputs != 1) {
    e->ok = false;
    return NAN;
  }
  const gr_value *xv = &g->values[x];
  if (!strcmp(op, "Identity")) return at(e, x, idx);
  if (!strcmp(op, "Reshape")) {
    unflat(xv->shape, xv->ndim, flat_of(yv->shape, yv->ndim, idx), xi);
    return at(e, x, xi);
  }
  if (!strcmp(op, "Transpose")) {
    int c;
    const int64_t *perm = gr_attr_ints(n, "perm", &c);
    for (int d = 0; d < yv->ndim; d++)
      xi[perm ? perm[d] : yv->ndim - 1 - d] = idx[d];
    return at(e, x, xi);
  }
  if (!strcmp(op, "Slice")) {
    int64_t start[TS_MAX_DIMS], step[TS_MAX_DIMS];
    if (!slice_spec(g, n, start, step)) {
      e->ok = false;
      return NAN;
    }
    for (int d = 0; d < yv->ndim; d++) xi[d] = start[d] + idx[d] * step[d];
    return at(e, x, xi);
  }
  if (!strcmp(op, "Concat")) {
    int64_t axis = gr_attr_int(n, "axis", 0);
    if (axis < 0) axis += yv->ndim;
    int64_t pos = idx[axis];
    for (int k = 0; k < n->n_inputs; k++) {
      const gr_value *xk = &g->values[n->inputs[k]];
      if (pos < xk->shape[axis]) {
        memcpy(xi, idx, sizeof(int64_t) * (size_t)yv->ndim);
        xi[axis] = pos;
        return at(e, n->inputs[k], xi);
      }
      pos -= xk->shape[axis];
    }
    e->ok = false;
    return NAN;
  }
  if ((!strcmp(op, "Add") || !strcmp(op, "Sub") || !strcmp(op, "Mul")) &&
      n->n_inputs == 2)
    return eval_binary(e, n, idx);
  if (!strcmp(op, "Conv")) return eval_conv(e, n, idx);
  if (!strcmp(op, "MatMul") && n->n_inputs == 2) return eval_matmul(e, n, idx);
  e->ok = false;
  return NAN;
}

/* Whether value v of p (produced by n) is kept whole per trial: data
 * movement and elementwise values, read many times by the windows of the
 * convs after them, up to 2^24 elements. */
static bool memoized(const ts_graph *g, const gr_node *n) {
  if (!strcmp(n->op, "Conv") || !strcmp(n->op, "MatMul")) return false;
  int64_t e = gr_value_elems(&g->values[n->outputs[0]]);
  return e > 0 && e <= (1 << 24);
}

static double at(ev *e, int v, const int64_t *idx) {
  if (!e->ok) return NAN;
  const gr_node *n;
  if (e->node_of)
    n = e->node_of[v] >= 0 ? &e->p->nodes[e->node_of[v]] : NULL;
  else
    n = producer(e->p, v);
  if (!n) return leaf(e, v, idx);
  if (!e->memo || !memoized(e->g, n)) return eval_node(e, n, idx);
  const gr_value *x = &e->g->values[v];
  if (!e->memo[v]) {
    int64_t k = gr_value_elems(x);
    e->memo[v] = ts_malloc(sizeof(double) * (size_t)k);
    if (!e->memo[v]) return eval_node(e, n, idx);
    for (int64_t i = 0; i < k; i++) e->memo[v][i] = NAN;
  }
  int64_t f = flat_of(x->shape, x->ndim, idx);
  if (isnan(e->memo[v][f])) e->memo[v][f] = eval_node(e, n, idx);
  return e->memo[v][f];
}

static void memo_clear(const ts_graph *g, double **memo) {
  for (int v = 0; memo && v < g->n_values; v++) {
    free(memo[v]);
    memo[v] = NULL;
  }
}

/* exact[v] = 1 for the constants p reads and `other` does not (malloc'd;
 * all 0 when other is NULL) */
bool pet_same_constant(const ts_graph *g, int u, int v) {
  if (u == v) return true;
  if (u < 0 || v < 0 || !gr_is_const(g, u) || !gr_is_const(g, v)) return false;
  const gr_value *a = &g->values[u], *b = &g->values[v];
  if (!ts_dtype_eq(a->dtype, b->dtype) || a->ndim != b->ndim) return false;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return false;
  int64_t e = gr_value_elems(a);
  return e >= 0 && !memcmp(gr_const_data(g, u), gr_const_data(g, v),
                           (size_t)e * ts_dtype_elem_bytes(a->dtype));
}

/* value -> the value it stands for as an input: for a float constant that
 * a or b reads, the first one read with the same type, shape and bytes (a
 * mutant may read one copy of shared weights where the original read
 * another); every other value itself. malloc'd; NULL when out of memory. */
static int *canon_constants(const ts_graph *g, const pet_prog *a,
                            const pet_prog *b) {
  int *canon = ts_malloc(sizeof(int) * (size_t)(g->n_values + 1));
  int *seen = ts_malloc(sizeof(int) * (size_t)(g->n_values + 1));
  if (!canon || !seen) {
    free(canon), free(seen);
    return NULL;
  }
  int n_seen = 0;
  for (int v = 0; v < g->n_values; v++) canon[v] = v;
  for (int q = 0; q < 2; q++) {
    const pet_prog *p = q ? b : a;
    for (int i = 0; p && i < p->n; i++)
      for (int k = 0; k < p->nodes[i].n_inputs; k++) {
        int v = p->nodes[i].inputs[k];
        if (v < 0 || !gr_is_const(g, v) ||
            !ts_dtype_is_float(g->values[v].dtype) || canon[v] != v)
          continue;
        int j = 0;
        while (j < n_seen && seen[j] != v && !pet_same_constant(g, seen[j], v))
          j++;
        if (j < n_seen)
          canon[v] = canon[seen[j]];
        else
          seen[n_seen++] = v;
      }
  }
  free(seen);
  return canon;
}

/* The constants p reads and `other` does not (by canon): part of p's
 * structure, used with their values; the others are random inputs. */
static uint8_t *own_constants(const ts_graph *g, const pet_prog *p,
                              const pet_prog *other, const int *canon) {
  uint8_t *exact = ts_calloc((size_t)g->n_values + 1, 1);
  uint8_t *read = ts_calloc((size_t)g->n_values + 1, 1);
  if (!exact || !read || !other) {
    free(read);
    if (!other) return exact;
    free(exact);
    return NULL;
  }
  for (int i = 0; i < other->n; i++)
    for (int k = 0; k < other->nodes[i].n_inputs; k++) {
      int v = other->nodes[i].inputs[k];
      if (v >= 0) read[canon ? canon[v] : v] = 1;
    }
  for (int i = 0; i < p->n; i++)
    for (int k = 0; k < p->nodes[i].n_inputs; k++) {
      int v = p->nodes[i].inputs[k];
      if (v >= 0 && gr_is_const(g, v) && !read[canon ? canon[v] : v])
        exact[v] = 1;
    }
  free(read);
  return exact;
}

double pet_eval_point(const ts_graph *g, const pet_prog *p, int v,
                      const int64_t *idx, uint64_t seed, int trial,
                      const pet_prog *other, bool *ok) {
  int *canon = canon_constants(g, p, other);
  uint8_t *exact = canon ? own_constants(g, p, other, canon) : NULL;
  ev e = {g, p, NULL, exact, NULL, canon, seed, trial, exact != NULL};
  double r = at(&e, v, idx);
  free(exact);
  free(canon);
  if (ok) *ok = e.ok;
  return e.ok ? r : NAN;
}

/* value -> index of its producer in p (-1: an input of p); malloc'd */
static int *producers(const ts_graph *g, const pet_prog *p) {
  int *m = ts_malloc(sizeof(int) * (size_t)(g->n_values + 1));
  if (!m) return NULL;
  for (int v = 0; v < g->n_values; v++) m[v] = -1;
  for (int i = 0; i < p->n; i++)
    for (int k = 0; k < p->nodes[i].n_outputs; k++)
      m[p->nodes[i].outputs[k]] = i;
  return m;
}

/* ---- box propagation ---- */

typedef struct splits {
  int nd;
  int n[TS_MAX_DIMS], cap[TS_MAX_DIMS];
  int64_t ext[TS_MAX_DIMS];
  int64_t *p[TS_MAX_DIMS];
} splits;

typedef struct prop {
  const ts_graph *g;
  const pet_prog *prog;
  int64_t max_points;
  ts_error *err;
  int rc;
} prop;

static void sp_free(splits *s) {
  for (int d = 0; d < s->nd; d++) free(s->p[d]);
  memset(s, 0, sizeof *s);
}

static void sp_add(prop *pr, splits *s, int d, int64_t v) {
  if (pr->rc) return;
  if (v < 0) v = 0;
  if (v > s->ext[d]) v = s->ext[d];
  if (s->n[d] == s->cap[d]) {
    if (s->cap[d] >= pr->max_points * 4) {
      pr->rc = TS_ERR(pr->err, TS_EUNSUPPORTED,
                      "more than %lld split points on one axis",
                      (long long)pr->max_points);
      return;
    }
    int cap = s->cap[d] ? s->cap[d] * 2 : 8;
    int64_t *q = ts_realloc(s->p[d], sizeof(int64_t) * (size_t)cap);
    if (!q) {
      pr->rc = TS_ERR(pr->err, TS_ENOMEM, "out of memory");
      return;
    }
    s->p[d] = q;
    s->cap[d] = cap;
  }
  s->p[d][s->n[d]++] = v;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static void sp_finish(prop *pr, splits *s) {
  for (int d = 0; d < s->nd && !pr->rc; d++) {
    qsort(s->p[d], (size_t)s->n[d], sizeof(int64_t), cmp_i64);
    int k = 0;
    for (int i = 0; i < s->n[d]; i++)
      if (!k || s->p[d][i] != s->p[d][k - 1]) s->p[d][k++] = s->p[d][i];
    s->n[d] = k;
    if (k > pr->max_points)
      pr->rc = TS_ERR(pr->err, TS_EUNSUPPORTED,
                      "more than %lld split points on one axis",
                      (long long)pr->max_points);
  }
}

static void sp_init(prop *pr, splits *s, const gr_value *v) {
  memset(s, 0, sizeof *s);
  s->nd = v->ndim;
  for (int d = 0; d < v->ndim; d++) {
    s->ext[d] = v->shape[d];
    sp_add(pr, s, d, 0);
    sp_add(pr, s, d, v->shape[d]);
  }
}

static void splits_of(prop *pr, int v, splits *out);

/* out's axis od takes the points of in's axis id, mapped by
 * ceil((p + add) / div) (a slice, a window tap). */
static void take(prop *pr, splits *out, int od, const splits *in, int id,
                 int64_t add, int64_t div) {
  for (int i = 0; i < in->n[id]; i++)
    sp_add(pr, out, od, ceil_div(in->p[id][i] + add, div));
}

/* One group of a reshape: input axes [i0, i1) hold the same elements as
 * output axes [j0, j1). Flat points within the group: for each input axis
 * a, every element whose coordinate on a is one of a's points and whose
 * coordinates on the group's later axes are 0 (between two such flat
 * points no input coordinate crosses a point). They are split over the
 * output axes, both ways where a point falls inside a row of an axis. */
static void reshape_group(prop *pr, const splits *in, int i0, int i1,
                          splits *out, int j0, int j1) {
  int64_t *flat = NULL, total = 1, outer = 1;
  size_t nf = 0, cap = 0;
  for (int a = i0; a < i1; a++) total *= in->ext[a];
  for (int a = i0; a < i1 && !pr->rc; a++) {
    int64_t inner = 1;
    for (int d = a + 1; d < i1; d++) inner *= in->ext[d];
    if (a > i0 && in->n[a] <= 2) { /* no interior point: its wrapping from
                                      row to row crosses nothing */
      outer *= in->ext[a];
      continue;
    }
    if (outer * in->n[a] > pr->max_points * 64) {
      pr->rc = TS_ERR(pr->err, TS_EUNSUPPORTED,
                      "a reshape would need %lld split points",
                      (long long)(outer * in->n[a]));
      break;
    }
    for (int64_t o = 0; o < outer && !pr->rc; o++)
      for (int i = 0; i < in->n[a]; i++) {
        if (nf == cap) {
          cap = cap ? cap * 2 : 64;
          int64_t *q = ts_realloc(flat, sizeof(int64_t) * cap);
          if (!q) {
            pr->rc = TS_ERR(pr->err, TS_ENOMEM, "out of memory");
            break;
          }
          flat = q;
        }
        flat[nf++] = (o * in->ext[a] + in->p[a][i]) * inner;
      }
    outer *= in->ext[a];
  }
  for (int k = j0; k < j1 && !pr->rc; k++) {
    int64_t inner = 1;
    for (int d = k + 1; d < j1; d++) inner *= out->ext[d];
    for (size_t i = 0; i < nf; i++) {
      if (flat[i] >= total) continue;
      int64_t c = (flat[i] / inner) % out->ext[k];
      sp_add(pr, out, k, c);
      if (flat[i] % inner) sp_add(pr, out, k, c + 1);
    }
  }
  free(flat);
}

/* A reshape in groups of axes with equal element counts. */
static void prop_reshape(prop *pr, const splits *in, splits *out) {
  int i = 0, j = 0;
  while ((i < in->nd || j < out->nd) && !pr->rc) {
    int i0 = i, j0 = j;
    int64_t pi = 1, pj = 1;
    if (i < in->nd) pi *= in->ext[i++];
    if (j < out->nd) pj *= out->ext[j++];
    while (pi != pj) {
      if (pi < pj && i < in->nd)
        pi *= in->ext[i++];
      else if (pj < pi && j < out->nd)
        pj *= out->ext[j++];
      else {
        pr->rc = TS_ERR(pr->err, TS_EUNSUPPORTED, "a reshape changes the size");
        return;
      }
    }
    reshape_group(pr, in, i0, i, out, j0, j);
  }
}

static void prop_conv(prop *pr, const gr_node *n, splits *out) {
  pet_conv c;
  if (!pet_conv_geo(pr->g, n, &c)) {
    pr->rc = TS_ERR(pr->err, TS_EUNSUPPORTED,
                    "cannot propagate boxes through %s '%s'", n->op, n->name);
    return;
  }
  splits x;
  splits_of(pr, n->inputs[0], &x);
  if (pr->rc) return;
  take(pr, out, 0, &x, 0, 0, 1);
  for (int a = 0; a < 2; a++)
    for (int64_t t = 0; t < c.k[a]; t++)
      take(pr, out, c.sdim + a, &x, c.sdim + a, c.pad[a] - t * c.d[a], c.s[a]);
  /* input channel gi * cig + ci of output channel co in group gi = co /
   * cog: affine in co within a group, or everywhere when cog = 1
   * (depthwise) */
  for (int64_t gi = 1; c.cog > 1 && gi < c.group; gi++)
    sp_add(pr, out, c.cdim, gi * c.cog);
  sp_free(&x);
  /* output channels split where the weights or the bias are */
  if (!c.block) {
    splits w;
    splits_of(pr, n->inputs[1], &w);
    if (!pr->rc) take(pr, out, c.cdim, &w, c.nhwc ? 3 : 0, 0, 1);
    sp_free(&w);
  }
  if (n->n_inputs > 2 && n->inputs[2] >= 0) {
    splits b;
    splits_of(pr, n->inputs[2], &b);
    if (!pr->rc) take(pr, out, c.cdim, &b, 0, 0, 1);
    sp_free(&b);
  }
}

static void prop_node(prop *pr, const gr_node *n, splits *out) {
  const ts_graph *g = pr->g;
  const char *op = n->op;
  const gr_value *yv = &g->values[n->outputs[0]];
  splits x;
  if (!strcmp(op, "Conv")) {
    prop_conv(pr, n, out);
    return;
  }
  if (!strcmp(op, "Concat")) {
    int64_t axis = gr_attr_int(n, "axis", 0), off = 0;
    if (axis < 0) axis += yv->ndim;
    for (int k = 0; k < n->n_inputs && !pr->rc; k++) {
      splits_of(pr, n->inputs[k], &x);
      for (int d = 0; d < yv->ndim && !pr->rc; d++)
        take(pr, out, d, &x, d, d == axis ? off : 0, 1);
      off += g->values[n->inputs[k]].shape[axis];
      sp_free(&x);
    }
    return;
  }
  if (!strcmp(op, "Add") || !strcmp(op, "Sub") || !strcmp(op, "Mul")) {
    for (int k = 0; k < n->n_inputs && !pr->rc; k++) {
      const gr_value *xv = &g->values[n->inputs[k]];
      splits_of(pr, n->inputs[k], &x);
      int off = yv->ndim - xv->ndim;
      for (int d = 0; d < xv->ndim && !pr->rc; d++)
        if (xv->shape[d] == yv->shape[d + off])
          take(pr, out, d + off, &x, d, 0, 1);
      sp_free(&x);
    }
    return;
  }
  if (!strcmp(op, "MatMul")) {
    const gr_value *av = &g->values[n->inputs[0]];
    const gr_value *bv = &g->values[n->inputs[1]];
    int64_t B = gr_matmul_weight_block(n);
    int r = yv->ndim;
    splits a, b;
    splits_of(pr, n->inputs[0], &a);
    splits_of(pr, n->inputs[1], &b);
    if (!pr->rc) {
      for (int d = 0; d < av->ndim - 2; d++)
        if (av->shape[d] == yv->shape[d + r - av->ndim])
          take(pr, out, d + r - av->ndim, &a, d, 0, 1);
      take(pr, out, r - 2, &a, av->ndim - 2, 0, 1);
      if (B) {
        for (int i = 0; i < b.n[0]; i++) sp_add(pr, out, r - 1, b.p[0][i] * B);
      } else {
        for (int d = 0; d < bv->ndim - 2; d++)
          if (bv->shape[d] == yv->shape[d + r - bv->ndim])
            take(pr, out, d + r - bv->ndim, &b, d, 0, 1);
        take(pr, out, r - 1, &b, bv->ndim - 1, 0, 1);
      }
    }
    sp_free(&a);
    sp_free(&b);
    return;
  }
  splits_of(pr, n->inputs[0], &x);
  if (pr->rc) return;
  if (!strcmp(op, "Identity")) {
    for (int d = 0; d < yv->ndim; d++) take(pr, out, d, &x, d, 0, 1);
  } else if (!strcmp(op, "Transpose")) {
    int c;
    const int64_t *perm = gr_attr_ints(n, "perm", &c);
    for (int d = 0; d < yv->ndim; d++)
      take(pr, out, d, &x, (int)(perm ? perm[d] : yv->ndim - 1 - d), 0, 1);
  } else if (!strcmp(op, "Slice")) {
    int64_t start[TS_MAX_DIMS], step[TS_MAX_DIMS];
    if (!slice_spec(g, n, start, step))
      pr->rc = TS_ERR(pr->err, TS_EUNSUPPORTED,
                      "Slice '%s' has no constant bounds", n->name);
    for (int d = 0; d < yv->ndim && !pr->rc; d++)
      take(pr, out, d, &x, d, -start[d], step[d]);
  } else if (!strcmp(op, "Reshape")) {
    prop_reshape(pr, &x, out);
  } else {
    pr->rc = TS_ERR(pr->err, TS_EUNSUPPORTED,
                    "PET cannot check through %s '%s'", op, n->name);
  }
  sp_free(&x);
}

static void splits_of(prop *pr, int v, splits *out) {
  sp_init(pr, out, &pr->g->values[v]);
  const gr_node *n = producer(pr->prog, v);
  if (!n || pr->rc) return;
  if (n->n_outputs != 1 || n->kind != TS_GRAPH_OP) {
    pr->rc = TS_ERR(pr->err, TS_EUNSUPPORTED,
                    "PET cannot check through %s '%s'", n->op, n->name);
    return;
  }
  prop_node(pr, n, out);
  sp_finish(pr, out);
}

/* ---- the check ---- */

/* Elements one evaluation of v in p reads, counting each level it passes
 * through; with memo, a memoized value is one read (its elements are
 * computed once, counted by fill_cost). */
static double point_cost(const ts_graph *g, const pet_prog *p, int v,
                         bool memo) {
  const gr_node *n = producer(p, v);
  if (!n || (memo && memoized(g, n))) return 1;
  if (!strcmp(n->op, "Conv") || !strcmp(n->op, "MatMul")) {
    const gr_value *w = &g->values[n->inputs[1]];
    const gr_value *y = &g->values[n->outputs[0]];
    double reads = (double)gr_value_elems(w);
    if (!strcmp(n->op, "Conv")) /* the window of one output channel */
      reads /= (double)y->shape[gr_node_channels_last(n) ? 3 : 1];
    else
      reads = (double)g->values[n->inputs[0]]
                  .shape[g->values[n->inputs[0]].ndim - 1];
    return reads * (point_cost(g, p, n->inputs[0], memo) +
                    point_cost(g, p, n->inputs[1], memo)) +
           1;
  }
  double c = 0;
  for (int k = 0; k < n->n_inputs; k++)
    if (n->inputs[k] >= 0) c += point_cost(g, p, n->inputs[k], memo);
  return c + 1;
}

/* The memoized values' elements, each computed at most once per trial
 * (a few reads each through data movement) and set up once. */
static double fill_cost(const ts_graph *g, const pet_prog *p) {
  double c = 0;
  for (int i = 0; i < p->n; i++)
    if (memoized(g, &p->nodes[i]))
      c += 4.0 * (double)gr_value_elems(&g->values[p->nodes[i].outputs[0]]);
  return c;
}

void pet_check_result_free(pet_check_result *r) {
  free(r->diff);
  memset(r, 0, sizeof *r);
}

/* Whether the programs differ at one of the box's m + 1 positions (its
 * lowest corner and m drawn from the seed) for the ev's current trial. */
static bool box_differs(ev *eo, int y, ev *em, int y2, const pet_box *b, int nd,
                        const pet_check_opts *o, uint64_t box_no,
                        int64_t *points, bool *ok) {
  for (int q = 0; q <= nd; q++) {
    int64_t idx[TS_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
      int64_t span = b->hi[d] - b->lo[d];
      uint64_t h = mix(o->seed ^ mix(box_no * 1315423911ull + (uint64_t)q) ^
                       (uint64_t)d * 0x632be59bd9b4e019ull);
      idx[d] = b->lo[d] + (q == 0 ? 0 : (int64_t)(h % (uint64_t)span));
    }
    eo->ok = em->ok = true;
    double a = at(eo, y, idx), c = at(em, y2, idx);
    ++*points;
    if (!eo->ok || !em->ok) {
      *ok = false;
      return true;
    }
    if (fabs(a - c) > 1e-9 * (1 + fabs(a) + fabs(c))) return true;
  }
  return false;
}

int pet_check(const ts_graph *g, const pet_prog *orig, int y,
              const pet_prog *mut, int y2, const pet_check_opts *o,
              pet_check_result *res, ts_error *err) {
  memset(res, 0, sizeof *res);
  const gr_value *yv = &g->values[y], *y2v = &g->values[y2];
  if (yv->ndim != y2v->ndim ||
      memcmp(yv->shape, y2v->shape, sizeof(int64_t) * (size_t)yv->ndim))
    return TS_ERR(err, TS_EINVAL, "the mutant's output has another shape");
  prop pa = {g, orig, o->max_points, err, 0},
       pb = {g, mut, o->max_points, err, 0};
  splits a, b;
  splits_of(&pa, y, &a);
  if (pa.rc) {
    sp_free(&a);
    return pa.rc;
  }
  splits_of(&pb, y2, &b);
  if (pb.rc) {
    sp_free(&a), sp_free(&b);
    return pb.rc;
  }
  for (int d = 0; d < a.nd; d++)
    for (int i = 0; i < b.n[d]; i++) sp_add(&pa, &a, d, b.p[d][i]);
  sp_finish(&pa, &a);
  sp_free(&b);
  int nd = a.nd;
  int64_t n_boxes = 1;
  for (int d = 0; d < nd && !pa.rc; d++) {
    n_boxes *= a.n[d] - 1;
    if (n_boxes > o->max_boxes)
      pa.rc = TS_ERR(err, TS_EUNSUPPORTED, "more than %lld boxes to check",
                     (long long)o->max_boxes);
  }
  /* values of data movement are kept whole per trial when the positions
   * are many (their windows overlap); with few, setting them up would
   * cost more than reading through */
  double positions = (double)n_boxes * (a.nd + 1) * o->trials;
  bool memo = o->memo ? o->memo > 0 : positions >= 512;
  double work =
      positions *
          (point_cost(g, orig, y, memo) + point_cost(g, mut, y2, memo)) +
      (memo ? o->trials * (fill_cost(g, orig) + fill_cost(g, mut)) : 0);
  if (!pa.rc && o->max_work > 0 && work > o->max_work)
    pa.rc = TS_ERR(err, TS_EUNSUPPORTED,
                   "%lld boxes would read %.2g input elements, over the "
                   "budget of %.2g",
                   (long long)n_boxes, work, o->max_work);
  if (pa.rc) {
    sp_free(&a);
    return pa.rc;
  }
  res->n_boxes = n_boxes;
  int pos[TS_MAX_DIMS] = {0};
  int rc = TS_OK;
  int *po = producers(g, orig), *pm = producers(g, mut);
  /* the mutant's own float constants (zero rows it pads with) are part of
   * its structure and keep their values; the constants both programs read
   * (weights) are inputs, random like the data */
  int *canon = canon_constants(g, orig, mut);
  uint8_t *eo_x = canon ? own_constants(g, orig, mut, canon) : NULL,
          *em_x = canon ? own_constants(g, mut, orig, canon) : NULL;
  ev eo = {g, orig, po, eo_x, NULL, canon, o->seed, 0, true},
     em = {g, mut, pm, em_x, NULL, canon, o->seed, 0, true};
  if (!po || !pm || !canon || !eo_x || !em_x)
    rc = TS_ERR(err, TS_ENOMEM, "out of memory");
  /* trial by trial (the memoized values hold one trial's inputs), each
   * box until it is found to differ */
  bool *apart = ts_calloc((size_t)n_boxes + 1, sizeof *apart);
  double **mo = ts_calloc((size_t)g->n_values + 1, sizeof *mo);
  double **mm = ts_calloc((size_t)g->n_values + 1, sizeof *mm);
  if (!rc && (!apart || !mo || !mm))
    rc = TS_ERR(err, TS_ENOMEM, "out of memory");
  if (memo) eo.memo = mo, em.memo = mm;
  for (int t = 0; t < o->trials && !rc; t++) {
    eo.trial = em.trial = t;
    memset(pos, 0, sizeof pos);
    for (int64_t k = 0; k < n_boxes && !rc; k++) {
      pet_box box;
      for (int d = 0; d < nd; d++) {
        box.lo[d] = a.p[d][pos[d]];
        box.hi[d] = a.p[d][pos[d] + 1];
      }
      bool ok = true;
      if (!apart[k] && box_differs(&eo, y, &em, y2, &box, nd, o, (uint64_t)k,
                                   &res->n_points, &ok)) {
        if (!ok)
          rc = TS_ERR(err, TS_EUNSUPPORTED,
                      "a node of the program cannot be evaluated");
        apart[k] = true;
      }
      for (int d = nd - 1; d >= 0; d--) { /* next box, row-major */
        if (++pos[d] < a.n[d] - 1) break;
        pos[d] = 0;
      }
    }
    memo_clear(g, mo);
    memo_clear(g, mm);
  }
  /* the differing boxes, row-major */
  memset(pos, 0, sizeof pos);
  for (int64_t k = 0; k < n_boxes && !rc; k++) {
    if (apart[k]) {
      pet_box *q = ts_realloc(res->diff, sizeof *q * (size_t)(res->n_diff + 1));
      if (!q) {
        rc = TS_ERR(err, TS_ENOMEM, "out of memory");
        break;
      }
      res->diff = q;
      for (int d = 0; d < nd; d++) {
        q[res->n_diff].lo[d] = a.p[d][pos[d]];
        q[res->n_diff].hi[d] = a.p[d][pos[d] + 1];
      }
      res->n_diff++;
    }
    for (int d = nd - 1; d >= 0; d--) {
      if (++pos[d] < a.n[d] - 1) break;
      pos[d] = 0;
    }
  }
  memo_clear(g, mo); /* after an error inside a trial */
  memo_clear(g, mm);
  free(apart);
  free(mo);
  free(mm);
  sp_free(&a);
  free(po);
  free(pm);
  free(eo_x);
  free(canon);
  free(em_x);
  if (rc) pet_check_result_free(res);
  return rc;
}
