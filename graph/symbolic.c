/*
 * symbolic.c — symbolic shapes of a model with named dynamic dimensions.
 *
 * The model is imported, and its passes run, at several sizes of its
 * symbols; every dimension of every value is then fitted by a polynomial
 * of degree two at most in the symbols, with integer coefficients, and the
 * fit is checked at every size. Inferring at sizes rather than over
 * symbolic expressions lets every shape rule, and constant folding of the
 * Shape/Gather/Concat chains exported models compute their reshapes with,
 * serve unchanged; the checks at sizes of both parities catch the
 * dimensions no polynomial gives (a strided window over a symbolic length)
 * and a pipeline whose decisions change with the sizes.
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sizes the symbols take: distinct, both parities, from 5 to 13 (past the
 * sizes 1 and 2 that broadcasting and some rules treat apart, and under
 * the small tables models index by position, e.g. 32 positions). */
static const int64_t probe1[] = {5, 6, 7, 9, 10, 11, 13};
#define N_PROBE1 ((int)(sizeof probe1 / sizeof probe1[0]))
static const int64_t probe2[][2] = {{5, 6},   {6, 5},   {7, 9}, {9, 10},
                                    {10, 7},  {5, 11},  {6, 9}, {9, 5},
                                    {11, 13}, {13, 11}, {7, 7}};
#define N_PROBE2 ((int)(sizeof probe2 / sizeof probe2[0]))
/* basis terms: exponents of (symbol 0, symbol 1) */
static const int terms[][2] = {{2, 0}, {1, 1}, {0, 2}, {1, 0}, {0, 1}, {0, 0}};
#define N_TERMS 6

static double term_value(int t, const int64_t *s) {
  return pow((double)s[0], terms[t][0]) * pow((double)s[1], terms[t][1]);
}

/* Fits y[k] = Σ c[t] term_t(sizes[k]) over the terms that the symbols
 * present use (n_syms 1: s², s, 1), by least squares, rounds c to integers
 * and checks every k exactly; false when that fails. */
static bool fit(int n_syms, int n, int64_t (*sizes)[2], const int64_t *y,
                int64_t c[N_TERMS]) {
  int use[N_TERMS], m = 0;
  for (int t = 0; t < N_TERMS; t++)
    if (n_syms == 2 || terms[t][1] == 0) use[m++] = t;
  double a[N_TERMS][N_TERMS + 1] = {{0}};
  for (int k = 0; k < n; k++)
    for (int i = 0; i < m; i++) {
      double ti = term_value(use[i], sizes[k]);
      for (int j = 0; j < m; j++) a[i][j] += ti * term_value(use[j], sizes[k]);
      a[i][m] += ti * (double)y[k];
    }
  for (int col = 0; col < m; col++) { /* Gauss-Jordan, partial pivoting */
    int piv = col;
    for (int r = col + 1; r < m; r++)
      if (fabs(a[r][col]) > fabs(a[piv][col])) piv = r;
    if (fabs(a[piv][col]) < 1e-9) return false;
    for (int j = 0; j <= m; j++) {
      double tmp = a[col][j];
      a[col][j] = a[piv][j];
      a[piv][j] = tmp;
    }
    for (int r = 0; r < m; r++) {
      if (r == col) continue;
      double f = a[r][col] / a[col][col];
      for (int j = col; j <= m; j++) a[r][j] -= f * a[col][j];
    }
  }
  memset(c, 0, sizeof(int64_t) * N_TERMS);
  for (int i = 0; i < m; i++) {
    double v = a[i][m] / a[i][i];
    if (!(fabs(v) < 1e12)) return false;
    c[use[i]] = llround(v);
  }
  for (int k = 0; k < n; k++) {
    int64_t v = 0;
    for (int t = 0; t < N_TERMS; t++) {
      int64_t p = c[t];
      for (int e = 0; e < terms[t][0]; e++) p *= sizes[k][0];
      for (int e = 0; e < terms[t][1]; e++) p *= sizes[k][1];
      v += p;
    }
    if (v != y[k]) return false;
  }
  return true;
}

/* "12*seq", "seq*seq + 1", "batch*seq" */
static char *format_poly(ts_arena *a, const int64_t c[N_TERMS],
                         const char *const *names) {
  char buf[256];
  size_t len = 0;
  buf[0] = 0;
  for (int t = 0; t < N_TERMS; t++) {
    if (!c[t]) continue;
    int64_t v = c[t];
    if (len) {
      len += (size_t)snprintf(buf + len, sizeof buf - len, " %c ",
                              v < 0 ? '-' : '+');
      if (v < 0) v = -v;
    } else if (v < 0) {
      len += (size_t)snprintf(buf + len, sizeof buf - len, "-");
      v = -v;
    }
    bool any = false;
    if (v != 1 || (!terms[t][0] && !terms[t][1])) {
      len +=
          (size_t)snprintf(buf + len, sizeof buf - len, "%lld", (long long)v);
      any = true;
    }
    for (int s = 0; s < 2; s++)
      for (int e = 0; e < terms[t][s]; e++) {
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s",
                                any ? "*" : "", names[s]);
        any = true;
      }
    if (len >= sizeof buf) len = sizeof buf - 1;
  }
  return ts_arena_strdup(a, len ? buf : "0");
}

/* The pipeline at one set of sizes. */
int gr_import_at(const char *path, const ts_graph_import_options *opts,
                 const char *after, int n_syms, const char *const *names,
                 const int64_t *sizes, ts_graph **out, ts_error *err) {
  const char *dims[64 + TS_MAX_DIMS];
  char bind[TS_MAX_DIMS][300];
  int nd = 0;
  for (int i = 0; i < opts->n_dims && nd < 64; i++) dims[nd++] = opts->dims[i];
  for (int s = 0; s < n_syms; s++) {
    snprintf(bind[s], sizeof bind[s], "%s=%lld", names[s], (long long)sizes[s]);
    dims[nd++] = bind[s];
  }
  ts_graph_import_options o = *opts;
  o.dims = dims;
  o.n_dims = nd;
  o.default_dim = 0;
  int rc = ts_graph_import_onnx(path, &o, out, err);
  if (!rc && !(after && !strcmp(after, "none"))) {
    rc = ts_graph_run_passes(*out, after, err);
    if (rc) {
      ts_graph_free(*out);
      *out = NULL;
    }
  }
  if (rc && err) { /* name the sizes */
    char msg[sizeof err->msg];
    int len = 0;
    for (int s = 0; s < n_syms; s++)
      len += snprintf(msg + len, sizeof msg - (size_t)len, "%s%s=%lld",
                      s ? ", " : "", names[s], (long long)sizes[s]);
    snprintf(msg + len, sizeof msg - (size_t)len, ": %s", err->msg);
    snprintf(err->msg, sizeof err->msg, "%s", msg);
  }
  return rc;
}

/* Whether g and h have the same nodes and values (names, ranks, types). */
const char *gr_same_structure(const ts_graph *g, const ts_graph *h) {
  if (g->n_nodes != h->n_nodes || g->n_values != h->n_values)
    return "a different number of nodes or values";
  for (int i = 0; i < g->n_nodes; i++)
    if (strcmp(g->nodes[i].op, h->nodes[i].op) ||
        strcmp(g->nodes[i].name, h->nodes[i].name))
      return g->nodes[i].name;
  for (int i = 0; i < g->n_values; i++)
    if (strcmp(g->values[i].name, h->values[i].name) ||
        g->values[i].ndim != h->values[i].ndim ||
        !ts_dtype_eq(g->values[i].dtype, h->values[i].dtype))
      return g->values[i].name;
  return NULL;
}

int ts_graph_import_symbolic(const char *path,
                             const ts_graph_import_options *opts,
                             const char *after, ts_graph **out, ts_error *err) {
  *out = NULL;
  ts_graph_import_options none;
  memset(&none, 0, sizeof none);
  if (!opts) opts = &none;
  /* the symbols: the dimensions no option gives a size */
  ts_graph_import_options o = *opts;
  o.default_dim = probe1[0];
  ts_graph *g0 = NULL;
  int rc = ts_graph_import_onnx(path, &o, &g0, err);
  if (rc) return rc;
  int n_syms = g0->n_syms;
  const char *names[TS_MAX_DIMS];
  char keep[TS_MAX_DIMS][256];
  for (int s = 0; s < n_syms; s++) {
    snprintf(keep[s], sizeof keep[s], "%s", g0->sym_names[s]);
    names[s] = keep[s];
  }
  ts_graph_free(g0);
  if (n_syms > TS_GRAPH_MAX_SYMBOLS)
    return TS_ERR(err, TS_EUNSUPPORTED,
                  "the model has %d named dynamic dimensions (%s, %s, %s%s); "
                  "symbolic shapes follow at most %d: give the others a size "
                  "with --dim",
                  n_syms, names[0], names[1], names[2],
                  n_syms > 3 ? ", ..." : "", TS_GRAPH_MAX_SYMBOLS);
  int n_probes = n_syms == 2 ? N_PROBE2 : n_syms == 1 ? N_PROBE1 : 1;
  int64_t(*sizes)[2] = calloc((size_t)n_probes, sizeof *sizes);
  ts_graph **gs = calloc((size_t)n_probes, sizeof *gs);
  if (!sizes || !gs) {
    free(sizes);
    free(gs);
    return TS_ERR(err, TS_ENOMEM, "symbolic import: out of memory");
  }
  for (int k = 0; k < n_probes; k++) {
    sizes[k][0] = n_syms == 2 ? probe2[k][0] : probe1[k];
    sizes[k][1] = n_syms == 2 ? probe2[k][1] : 1;
  }
  for (int k = 0; k < n_probes && !rc; k++) {
    rc = gr_import_at(path, opts, after, n_syms, names, sizes[k], &gs[k], err);
    const char *diff = !rc && k ? gr_same_structure(gs[0], gs[k]) : NULL;
    if (diff)
      rc = TS_ERR(err, TS_EUNSUPPORTED,
                  "the graph's structure changes with the sizes of %s%s%s "
                  "(at '%s'): give %s with --dim",
                  names[0], n_syms > 1 ? " and " : "",
                  n_syms > 1 ? names[1] : "", diff,
                  n_syms > 1 ? "them sizes" : "it a size");
  }
  ts_graph *g = gs[0];
  int64_t *y = calloc((size_t)n_probes, sizeof *y);
  if (!rc && !y) rc = TS_ERR(err, TS_ENOMEM, "symbolic import: out of memory");
  for (int v = 0; !rc && n_syms && v < g->n_values; v++) {
    gr_value *val = &g->values[v];
    for (int d = 0; !rc && d < val->ndim; d++) {
      bool varies = false;
      for (int k = 0; k < n_probes; k++) {
        y[k] = gs[k]->values[v].shape[d];
        varies = varies || y[k] != y[0];
      }
      if (!varies) continue;
      int64_t c[N_TERMS];
      if (!fit(n_syms, n_probes, sizes, y, c)) {
        char seen[512];
        int len = 0;
        for (int k = 0; k < n_probes && len < (int)sizeof seen - 64; k++)
          len += snprintf(seen + len, sizeof seen - (size_t)len, "%s%lld",
                          k ? ", " : "", (long long)y[k]);
        rc = TS_ERR(err, TS_EUNSUPPORTED,
                    "dimension %d of '%s' follows no polynomial in %s%s%s "
                    "(sizes %s at the probed sizes): a strided window over "
                    "a symbolic length? give it a size with --dim",
                    d, val->name, names[0], n_syms > 1 ? " and " : "",
                    n_syms > 1 ? names[1] : "", seen);
        break;
      }
      if (!val->sym) {
        val->sym = ts_arena_alloc(g->arena, sizeof(char *) * TS_MAX_DIMS);
        if (!val->sym) {
          rc = TS_ERR(err, TS_ENOMEM, "symbolic import: out of memory");
          break;
        }
      }
      if (!(val->sym[d] = format_poly(g->arena, c, names)))
        rc = TS_ERR(err, TS_ENOMEM, "symbolic import: out of memory");
    }
  }
  for (int s = 0; !rc && s < n_syms; s++) {
    g->sym_names[s] = ts_arena_strdup(g->arena, names[s]);
    g->sym_sizes[s] = sizes[0][s];
    if (!g->sym_names[s])
      rc = TS_ERR(err, TS_ENOMEM, "symbolic import: out of memory");
  }
  if (!rc) g->n_syms = n_syms;
  for (int k = rc ? 0 : 1; k < n_probes; k++) ts_graph_free(gs[k]);
  free(gs);
  free(sizes);
  free(y);
  if (rc) return rc;
  *out = g;
  return TS_OK;
}

int ts_graph_n_symbols(const ts_graph *g) { return g->n_syms; }

const char *ts_graph_symbol(const ts_graph *g, int i, int64_t *size) {
  if (i < 0 || i >= g->n_syms) return NULL;
  if (size) *size = g->sym_sizes[i];
  return g->sym_names[i];
}

bool ts_graph_value_dim_text(const ts_graph *g, const char *value, int d,
                             char *buf, size_t cap) {
  for (int v = 0; v < g->n_values; v++) {
    const gr_value *val = &g->values[v];
    if (strcmp(val->name, value)) continue;
    if (d < 0 || d >= val->ndim) return false;
    if (val->sym && val->sym[d])
      snprintf(buf, cap, "%s", val->sym[d]);
    else
      snprintf(buf, cap, "%lld", (long long)val->shape[d]);
    return true;
  }
  return false;
}
