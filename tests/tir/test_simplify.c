/*
 * test_simplify.c — tests of the simplifier and constant bounds: specific
 * rewrites (affine canonical forms, floordiv/floormod by range, min/max and
 * comparisons decided by bounds), and a randomized equivalence test that
 * evaluates thousands of random integer expressions before and after
 * simplification at random points inside the var ranges.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tir/tir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a tiny evaluator of integer expressions ---- */

#define MAX_VARS 8

typedef struct env {
  const ts_expr *vars[MAX_VARS + 32];
  int64_t values[MAX_VARS + 32];
  int n;
} env;

static int64_t wrap(int64_t v, ts_dtype t) {
  if (t.code == TS_DT_BOOL) return v != 0;
  if (t.bits >= 64) return v;
  uint64_t mask = (UINT64_C(1) << t.bits) - 1, u = (uint64_t)v & mask;
  if (t.code == TS_DT_INT && ((u >> (t.bits - 1)) & 1)) u |= ~mask;
  return (int64_t)u;
}

static int64_t floordiv_ref(int64_t x, int64_t y) {
  int64_t q = x / y;
  if ((x % y != 0) && ((x < 0) != (y < 0))) q--;
  return q;
}

static int64_t eval(const ts_expr *e, env *en) {
  ts_dtype t = ts_expr_dtype(e);
  ts_expr_kind k = ts_expr_kind_of(e);
  switch (k) {
  case TS_EXPR_INT: return ts_expr_int_value(e);
  case TS_EXPR_VAR:
    for (int i = en->n - 1; i >= 0; i--)
      if (en->vars[i] == e) return en->values[i];
    fail_msg("unbound var %s", ts_var_name(e));
    return 0;
  case TS_EXPR_LET: {
    int64_t v = eval(ts_expr_operand(e, 0), en);
    en->vars[en->n] = ts_expr_let_var(e);
    en->values[en->n++] = v;
    int64_t r = eval(ts_expr_operand(e, 1), en);
    en->n--;
    return r;
  }
  case TS_EXPR_CAST: return wrap(eval(ts_expr_operand(e, 0), en), t);
  case TS_EXPR_SELECT:
    return eval(ts_expr_operand(e, 0), en) ? eval(ts_expr_operand(e, 1), en)
                                           : eval(ts_expr_operand(e, 2), en);
  case TS_EXPR_NOT: return !eval(ts_expr_operand(e, 0), en);
  default: break;
  }
  int64_t x = eval(ts_expr_operand(e, 0), en);
  int64_t y = eval(ts_expr_operand(e, 1), en);
  uint64_t ux = (uint64_t)x, uy = (uint64_t)y;
  switch (k) {
  case TS_EXPR_ADD: return wrap((int64_t)(ux + uy), t);
  case TS_EXPR_SUB: return wrap((int64_t)(ux - uy), t);
  case TS_EXPR_MUL: return wrap((int64_t)(ux * uy), t);
  case TS_EXPR_DIV: assert_true(y != 0); return wrap(x / y, t);
  case TS_EXPR_MOD: assert_true(y != 0); return wrap(x % y, t);
  case TS_EXPR_FLOORDIV:
    assert_true(y != 0);
    return wrap(floordiv_ref(x, y), t);
  case TS_EXPR_FLOORMOD:
    assert_true(y != 0);
    return wrap(x - floordiv_ref(x, y) * y, t);
  case TS_EXPR_MIN: return x < y ? x : y;
  case TS_EXPR_MAX: return x > y ? x : y;
  case TS_EXPR_EQ: return x == y;
  case TS_EXPR_NE: return x != y;
  case TS_EXPR_LT: return x < y;
  case TS_EXPR_LE: return x <= y;
  case TS_EXPR_GT: return x > y;
  case TS_EXPR_GE: return x >= y;
  case TS_EXPR_AND: return x && y;
  case TS_EXPR_OR: return x || y;
  default: fail_msg("unexpected kind %s", ts_expr_kind_name(k));
  }
  return 0;
}

/* ---- random expressions ---- */

typedef struct rng {
  uint64_t s;
} rng;

static uint64_t next(rng *r) {
  r->s ^= r->s << 13;
  r->s ^= r->s >> 7;
  r->s ^= r->s << 17;
  return r->s;
}
static int64_t uniform(rng *r, int64_t lo, int64_t hi) { /* inclusive */
  return lo + (int64_t)(next(r) % (uint64_t)(hi - lo + 1));
}

typedef struct gen {
  ts_arena *a;
  rng r;
  ts_expr *vars[MAX_VARS];
  int64_t mins[MAX_VARS], exts[MAX_VARS];
  int n_vars;
  ts_dtype t;
  int n_lets;
  ts_expr *lets[4];
} gen;

static int64_t small_const(gen *g) {
  static const int64_t picks[] = {-16, -7, -4, -3, -2, -1, 0,  1,  2,
                                  3,   4,  5,  7,  8,  16, 32, 64, 1000};
  return picks[uniform(&g->r, 0,
                       (int64_t)(sizeof picks / sizeof picks[0]) - 1)];
}

static ts_expr *rand_int(gen *g, int depth);

static ts_expr *rand_bool(gen *g, int depth) {
  ts_expr_kind cmp[] = {TS_EXPR_EQ, TS_EXPR_NE, TS_EXPR_LT,
                        TS_EXPR_LE, TS_EXPR_GT, TS_EXPR_GE};
  int pick = (int)uniform(&g->r, 0, 9);
  if (pick == 0 && depth > 0)
    return ts_binary_raw(g->a, uniform(&g->r, 0, 1) ? TS_EXPR_AND : TS_EXPR_OR,
                         rand_bool(g, depth - 1), rand_bool(g, depth - 1));
  if (pick == 1 && depth > 0) return ts_not_raw(g->a, rand_bool(g, depth - 1));
  return ts_binary_raw(g->a, cmp[uniform(&g->r, 0, 5)], rand_int(g, depth - 1),
                       rand_int(g, depth - 1));
}

static ts_expr *rand_int(gen *g, int depth) {
  ts_arena *a = g->a;
  ts_dtype t = g->t;
  if (depth <= 0 || uniform(&g->r, 0, 5) == 0) {
    int64_t pick = uniform(&g->r, 0, 9);
    if (pick < 3) return ts_int(a, t, small_const(g));
    if (pick == 3 && g->n_lets > 0)
      return g->lets[uniform(&g->r, 0, g->n_lets - 1)];
    return g->vars[uniform(&g->r, 0, g->n_vars - 1)];
  }
  int64_t c;
  switch (uniform(&g->r, 0, 13)) {
  case 0:
  case 1:
    return ts_binary_raw(a, TS_EXPR_ADD, rand_int(g, depth - 1),
                         rand_int(g, depth - 1));
  case 2:
    return ts_binary_raw(a, TS_EXPR_SUB, rand_int(g, depth - 1),
                         rand_int(g, depth - 1));
  case 3:
    return ts_binary_raw(a, TS_EXPR_MUL, rand_int(g, depth - 1),
                         ts_int(a, t, small_const(g)));
  case 4:
    return ts_binary_raw(a, TS_EXPR_MUL, rand_int(g, depth - 1),
                         rand_int(g, depth - 2));
  case 5:
  case 6: {
    do c = small_const(g);
    while (c == 0);
    if (uniform(&g->r, 0, 3)) c = c < 0 ? -c : c; /* mostly positive */
    return ts_binary_raw(
        a, uniform(&g->r, 0, 1) ? TS_EXPR_FLOORDIV : TS_EXPR_FLOORMOD,
        rand_int(g, depth - 1), ts_int(a, t, c));
  }
  case 7: {
    do c = small_const(g);
    while (c == 0);
    return ts_binary_raw(a, uniform(&g->r, 0, 1) ? TS_EXPR_DIV : TS_EXPR_MOD,
                         rand_int(g, depth - 1), ts_int(a, t, c));
  }
  case 8:
    return ts_binary_raw(a, uniform(&g->r, 0, 1) ? TS_EXPR_MIN : TS_EXPR_MAX,
                         rand_int(g, depth - 1), rand_int(g, depth - 1));
  case 9:
    return ts_select_raw(a, rand_bool(g, depth - 1), rand_int(g, depth - 1),
                         rand_int(g, depth - 1));
  case 10:
    /* a pattern the simplifier targets: (x*c + y) by c */
    c = uniform(&g->r, 1, 32);
    return ts_binary_raw(
        a, uniform(&g->r, 0, 1) ? TS_EXPR_FLOORDIV : TS_EXPR_FLOORMOD,
        ts_binary_raw(a, TS_EXPR_ADD,
                      ts_binary_raw(a, TS_EXPR_MUL, rand_int(g, depth - 2),
                                    ts_int(a, t, c)),
                      rand_int(g, depth - 2)),
        ts_int(a, t, c));
  case 11:
    if (g->n_lets < 4) {
      ts_expr *v = ts_var(a, "t", t);
      ts_expr *value = rand_int(g, depth - 1);
      g->lets[g->n_lets++] = v;
      ts_expr *body = rand_int(g, depth - 1);
      g->n_lets--;
      return ts_let(a, v, value, body);
    }
    return rand_int(g, depth - 1);
  case 12: {
    /* a round trip through the other integer width */
    ts_dtype other = t.bits == 64 ? TS_INT32 : TS_INT64;
    return ts_cast_raw(a, t, ts_cast_raw(a, other, rand_int(g, depth - 1)));
  }
  default:
    return ts_binary_raw(a, TS_EXPR_SUB, ts_int(a, t, small_const(g)),
                         rand_int(g, depth - 1));
  }
}

static void run_random(ts_dtype t, uint64_t seed, int n_exprs, int *n_changed,
                       int *n_bounded) {
  gen g;
  memset(&g, 0, sizeof g);
  g.r.s = seed;
  g.t = t;
  g.n_vars = 4;
  ts_var_ranges *ranges = ts_var_ranges_create();
  for (int i = 0; i < g.n_vars; i++) {
    char name[16];
    snprintf(name, sizeof name, "v%d", i);
    g.mins[i] = uniform(&g.r, -20, 20);
    if (i == 0) g.mins[i] = 0;
    g.exts[i] = uniform(&g.r, 1, 40);
  }
  for (int n = 0; n < n_exprs; n++) {
    g.a = ts_arena_create();
    for (int i = 0; i < g.n_vars; i++) {
      char name[16];
      snprintf(name, sizeof name, "v%d", i);
      g.vars[i] = ts_var(g.a, name, t);
      ts_var_ranges_set(ranges, g.vars[i], g.mins[i], g.exts[i]);
    }
    ts_expr *e = rand_int(&g, (int)uniform(&g.r, 1, 6));
    ts_expr *s = ts_simplify(g.a, e, ranges);
    assert_true(ts_dtype_eq(ts_expr_dtype(s), ts_expr_dtype(e)));
    if (s != e) (*n_changed)++;
    int64_t lo = 0, hi = 0;
    bool bounded = ts_expr_const_bound(e, ranges, &lo, &hi);
    if (bounded) (*n_bounded)++;
    for (int p = 0; p < 12; p++) {
      env en = {.n = g.n_vars};
      for (int i = 0; i < g.n_vars; i++) {
        en.vars[i] = g.vars[i];
        en.values[i] =
            p == 0   ? g.mins[i]
            : p == 1 ? g.mins[i] + g.exts[i] - 1
                     : uniform(&g.r, g.mins[i], g.mins[i] + g.exts[i] - 1);
      }
      int64_t want = eval(e, &en), got = eval(s, &en);
      if (want != got || (bounded && (want < lo || want > hi))) {
        char *te = ts_expr_print(e), *ts = ts_expr_print(s);
        fprintf(stderr, "expr: %s\nsimplified: %s\nat", te, ts);
        for (int i = 0; i < g.n_vars; i++)
          fprintf(stderr, " v%d=%lld", i, (long long)en.values[i]);
        fprintf(stderr, "\nwant %lld got %lld bound %d [%lld, %lld]\n",
                (long long)want, (long long)got, bounded, (long long)lo,
                (long long)hi);
        free(te);
        free(ts);
        fail();
      }
    }
    ts_arena_destroy(g.a);
  }
  ts_var_ranges_destroy(ranges);
}

static void test_random_int64(void **state) {
  (void)state;
  int changed = 0, bounded = 0;
  for (uint64_t seed = 1; seed <= 8; seed++)
    run_random(TS_INDEX, seed * 0x9e3779b97f4a7c15ull, 500, &changed, &bounded);
  /* the test is meaningful only if many expressions were rewritten */
  assert_true(changed > 2000);
  assert_true(bounded > 1000);
}

static void test_random_int32(void **state) {
  (void)state;
  int changed = 0, bounded = 0;
  for (uint64_t seed = 1; seed <= 4; seed++)
    run_random(TS_INT32, seed * 0x2545f4914f6cdd1dull, 500, &changed, &bounded);
  assert_true(changed > 1000);
}

/* ---- specific rewrites ---- */

typedef struct fixture {
  ts_arena *a;
  ts_var_ranges *r;
  ts_expr *i, *j, *k;
} fixture;

static void fx_init(fixture *f) {
  f->a = ts_arena_create();
  f->r = ts_var_ranges_create();
  f->i = ts_var(f->a, "i", TS_INDEX);
  f->j = ts_var(f->a, "j", TS_INDEX);
  f->k = ts_var(f->a, "k", TS_INDEX);
  ts_var_ranges_set(f->r, f->i, 0, 8);
  ts_var_ranges_set(f->r, f->j, 0, 16);
}

static void fx_free(fixture *f) {
  ts_var_ranges_destroy(f->r);
  ts_arena_destroy(f->a);
}

static ts_expr *C(fixture *f, int64_t v) { return ts_index(f->a, v); }
static ts_expr *B(fixture *f, ts_expr_kind k, ts_expr *x, ts_expr *y) {
  return ts_binary_raw(f->a, k, x, y);
}

static void assert_prints(ts_expr *e, const char *want) {
  char *got = ts_expr_print(e);
  if (strcmp(got, want) != 0) {
    fprintf(stderr, "got '%s', want '%s'\n", got, want);
    free(got);
    fail();
  }
  free(got);
}

static void test_affine(void **state) {
  (void)state;
  fixture f;
  fx_init(&f);
  ts_expr *i16 = B(&f, TS_EXPR_MUL, f.i, C(&f, 16));
  /* (i*16 + j) - i*16 -> j */
  ts_expr *e = B(&f, TS_EXPR_SUB, B(&f, TS_EXPR_ADD, i16, f.j), i16);
  assert_ptr_equal(ts_simplify(f.a, e, NULL), f.j);
  /* i*4 + i*2 -> i*6 */
  e = B(&f, TS_EXPR_ADD, B(&f, TS_EXPR_MUL, f.i, C(&f, 4)),
        B(&f, TS_EXPR_MUL, f.i, C(&f, 2)));
  ts_expr *s = ts_simplify(f.a, e, NULL);
  assert_int_equal(ts_expr_kind_of(s), TS_EXPR_MUL);
  assert_ptr_equal(ts_expr_operand(s, 0), f.i);
  assert_int_equal(ts_expr_int_value(ts_expr_operand(s, 1)), 6);
  /* x - x -> 0, x*1 + 0 -> x, (3 + 4) * 2 -> 14 */
  ts_expr *x = B(&f, TS_EXPR_FLOORDIV, f.k, C(&f, 3));
  ts_expr *x2 = B(&f, TS_EXPR_FLOORDIV, f.k, C(&f, 3));
  s = ts_simplify(f.a, B(&f, TS_EXPR_SUB, x, x2), NULL);
  assert_true(ts_expr_is_const_int(s, NULL) && ts_expr_int_value(s) == 0);
  s = ts_simplify(
      f.a, B(&f, TS_EXPR_ADD, B(&f, TS_EXPR_MUL, f.k, C(&f, 1)), C(&f, 0)),
      NULL);
  assert_ptr_equal(s, f.k);
  s = ts_simplify(
      f.a, B(&f, TS_EXPR_MUL, B(&f, TS_EXPR_ADD, C(&f, 3), C(&f, 4)), C(&f, 2)),
      NULL);
  assert_int_equal(ts_expr_int_value(s), 14);
  /* (k + 2)*4 - 8 -> k*4 ; 5 - k + k - 5 -> 0 */
  s = ts_simplify(
      f.a,
      B(&f, TS_EXPR_SUB,
        B(&f, TS_EXPR_MUL, B(&f, TS_EXPR_ADD, f.k, C(&f, 2)), C(&f, 4)),
        C(&f, 8)),
      NULL);
  assert_prints(s, "k * 4");
  s = ts_simplify(f.a,
                  B(&f, TS_EXPR_SUB,
                    B(&f, TS_EXPR_ADD, B(&f, TS_EXPR_SUB, C(&f, 5), f.k), f.k),
                    C(&f, 5)),
                  NULL);
  assert_int_equal(ts_expr_int_value(s), 0);
  /* a negative leading term: 0 - k + 3 -> 3 - k */
  s = ts_simplify(
      f.a, B(&f, TS_EXPR_ADD, B(&f, TS_EXPR_SUB, C(&f, 0), f.k), C(&f, 3)),
      NULL);
  assert_prints(s, "3 - k");
  fx_free(&f);
}

/* A long sum minus itself, reversed: linear in the number of terms. */
static void test_long_chain(void **state) {
  (void)state;
  ts_arena *a = ts_arena_create();
  enum { N = 5000 };
  ts_expr **vars = malloc(sizeof *vars * N);
  for (int i = 0; i < N; i++) vars[i] = ts_var(a, "x", TS_INDEX);
  ts_expr *sum = vars[0];
  ts_expr *rev =
      ts_binary_raw(a, TS_EXPR_MUL, vars[N - 1], ts_index(a, (N - 1) % 7 + 1));
  for (int i = 1; i < N; i++) {
    sum = ts_binary_raw(
        a, TS_EXPR_ADD, sum,
        ts_binary_raw(a, TS_EXPR_MUL, vars[i], ts_index(a, i % 7 + 1)));
    rev = ts_binary_raw(a, TS_EXPR_ADD, rev,
                        ts_binary_raw(a, TS_EXPR_MUL, vars[N - 1 - i],
                                      ts_index(a, (N - 1 - i) % 7 + 1)));
  }
  rev = ts_binary_raw(a, TS_EXPR_ADD, rev,
                      ts_binary_raw(a, TS_EXPR_MUL, vars[0], ts_index(a, 0)));
  ts_expr *s = ts_simplify(a, ts_binary_raw(a, TS_EXPR_SUB, sum, rev), NULL);
  if (!ts_expr_is_const_int(s, NULL)) {
    char *t = ts_expr_print(s);
    fprintf(stderr, "%.300s\n", t);
    free(t);
  }
  assert_true(ts_expr_is_const_int(s, NULL));
  assert_int_equal(ts_expr_int_value(s), 0);
  free(vars);
  ts_arena_destroy(a);
}

static void test_divmod(void **state) {
  (void)state;
  fixture f;
  fx_init(&f);
  ts_expr *x = B(&f, TS_EXPR_ADD, B(&f, TS_EXPR_MUL, f.i, C(&f, 16)), f.j);
  /* j in [0, 16): floordiv -> i, floormod -> j */
  assert_ptr_equal(ts_simplify(f.a, B(&f, TS_EXPR_FLOORDIV, x, C(&f, 16)), f.r),
                   f.i);
  assert_ptr_equal(ts_simplify(f.a, B(&f, TS_EXPR_FLOORMOD, x, C(&f, 16)), f.r),
                   f.j);
  /* truncating division of a nonnegative value behaves the same */
  assert_ptr_equal(ts_simplify(f.a, B(&f, TS_EXPR_DIV, x, C(&f, 16)), f.r),
                   f.i);
  /* without ranges nothing is assumed */
  ts_expr *s = ts_simplify(f.a, B(&f, TS_EXPR_FLOORDIV, x, C(&f, 16)), NULL);
  assert_int_equal(ts_expr_kind_of(s), TS_EXPR_FLOORDIV);
  /* (i*16 + j + 16) / 16 -> i + 1 */
  ts_expr *x1 = B(&f, TS_EXPR_ADD, x, C(&f, 16));
  assert_prints(ts_simplify(f.a, B(&f, TS_EXPR_FLOORDIV, x1, C(&f, 16)), f.r),
                "i + 1");
  /* partial: (i*16 + j) / 4 -> i*4 + floordiv(j, 4) */
  assert_prints(ts_simplify(f.a, B(&f, TS_EXPR_FLOORDIV, x, C(&f, 4)), f.r),
                "i * 4 + floordiv(j, 4)");
  assert_prints(ts_simplify(f.a, B(&f, TS_EXPR_FLOORMOD, x, C(&f, 4)), f.r),
                "floormod(j, 4)");
  /* j / 16 with j in [0,16) -> 0; floormod(j, 32) -> j */
  s = ts_simplify(f.a, B(&f, TS_EXPR_FLOORDIV, f.j, C(&f, 16)), f.r);
  assert_true(ts_expr_is_const_int(s, NULL) && ts_expr_int_value(s) == 0);
  assert_ptr_equal(
      ts_simplify(f.a, B(&f, TS_EXPR_FLOORMOD, f.j, C(&f, 32)), f.r), f.j);
  /* nested floordiv by constants */
  s = ts_simplify(
      f.a,
      B(&f, TS_EXPR_FLOORDIV, B(&f, TS_EXPR_FLOORDIV, f.k, C(&f, 4)), C(&f, 8)),
      NULL);
  assert_prints(s, "floordiv(k, 32)");
  fx_free(&f);
}

/* floordiv(x, c) * c + floormod(x, c) is x for every x (a fused loop's
 * split-back bindings, flattened), scaled or inside a longer sum; other
 * coefficients or divisors stay as they are. */
static void test_divmod_merge(void **state) {
  (void)state;
  fixture f;
  fx_init(&f);
  ts_expr *x = B(&f, TS_EXPR_ADD, f.k, C(&f, 3));
  ts_expr *q = B(&f, TS_EXPR_FLOORDIV, x, C(&f, 128));
  ts_expr *m = B(&f, TS_EXPR_FLOORMOD, x, C(&f, 128));
  assert_prints(
      ts_simplify(f.a, B(&f, TS_EXPR_ADD, B(&f, TS_EXPR_MUL, q, C(&f, 128)), m),
                  NULL),
      "k + 3");
  /* 2*(q*128 + m) + i*7 - 6 -> 2*k + i*7 */
  ts_expr *two =
      B(&f, TS_EXPR_MUL,
        B(&f, TS_EXPR_ADD, B(&f, TS_EXPR_MUL, q, C(&f, 128)), m), C(&f, 2));
  ts_expr *s = ts_simplify(
      f.a,
      B(&f, TS_EXPR_SUB,
        B(&f, TS_EXPR_ADD, two, B(&f, TS_EXPR_MUL, f.i, C(&f, 7))), C(&f, 6)),
      NULL);
  ts_expr *want =
      ts_simplify(f.a,
                  B(&f, TS_EXPR_ADD, B(&f, TS_EXPR_MUL, f.k, C(&f, 2)),
                    B(&f, TS_EXPR_MUL, f.i, C(&f, 7))),
                  NULL);
  ts_expr *diff = ts_simplify(f.a, B(&f, TS_EXPR_SUB, s, want), NULL);
  assert_true(ts_expr_is_const_int(diff, NULL));
  assert_int_equal(ts_expr_int_value(diff), 0);
  /* q*64 + m, and q*128 + floormod(x, 64): not the identity */
  s = ts_simplify(f.a, B(&f, TS_EXPR_ADD, B(&f, TS_EXPR_MUL, q, C(&f, 64)), m),
                  NULL);
  assert_prints(s, "floordiv(k + 3, 128) * 64 + floormod(k + 3, 128)");
  s = ts_simplify(f.a,
                  B(&f, TS_EXPR_ADD, B(&f, TS_EXPR_MUL, q, C(&f, 128)),
                    B(&f, TS_EXPR_FLOORMOD, x, C(&f, 64))),
                  NULL);
  assert_prints(s, "floordiv(k + 3, 128) * 128 + floormod(k + 3, 64)");
  fx_free(&f);
}

static void test_minmax_compare(void **state) {
  (void)state;
  fixture f;
  fixture *F = &f;
  fx_init(F);
  /* disjoint constant bounds */
  assert_ptr_equal(ts_simplify(f.a, B(F, TS_EXPR_MIN, f.j, C(F, 20)), f.r),
                   f.j);
  ts_expr *s = ts_simplify(f.a, B(F, TS_EXPR_MAX, f.j, C(F, 20)), f.r);
  assert_int_equal(ts_expr_int_value(s), 20);
  /* overlapping bounds stay */
  s = ts_simplify(f.a, B(F, TS_EXPR_MIN, f.j, C(F, 10)), f.r);
  assert_int_equal(ts_expr_kind_of(s), TS_EXPR_MIN);
  /* a constant difference decides: min(i, i + 1) -> i */
  assert_ptr_equal(
      ts_simplify(f.a, B(F, TS_EXPR_MIN, f.i, B(F, TS_EXPR_ADD, f.i, C(F, 1))),
                  f.r),
      f.i);
  /* comparisons by bounds and by constant differences */
  s = ts_simplify(f.a, B(F, TS_EXPR_LT, f.j, C(F, 16)), f.r);
  assert_true(ts_expr_is_const_int(s, NULL) && ts_expr_int_value(s) == 1);
  s = ts_simplify(f.a, B(F, TS_EXPR_GE, f.j, C(F, 16)), f.r);
  assert_true(ts_expr_is_const_int(s, NULL) && ts_expr_int_value(s) == 0);
  ts_expr *i16 = B(F, TS_EXPR_MUL, f.i, C(F, 16));
  s = ts_simplify(f.a,
                  B(F, TS_EXPR_LT, B(F, TS_EXPR_ADD, i16, f.j),
                    B(F, TS_EXPR_ADD, i16, C(F, 16))),
                  f.r);
  assert_true(ts_expr_is_const_int(s, NULL) && ts_expr_int_value(s) == 1);
  /* undecidable stays a comparison */
  s = ts_simplify(f.a, B(F, TS_EXPR_LT, f.j, C(F, 8)), f.r);
  assert_int_equal(ts_expr_kind_of(s), TS_EXPR_LT);
  /* select with a decided condition */
  s = ts_simplify(
      f.a, ts_select_raw(f.a, B(F, TS_EXPR_LT, f.j, C(F, 16)), f.i, f.k), f.r);
  assert_ptr_equal(s, f.i);
  fx_free(F);
}

static void test_const_bound(void **state) {
  (void)state;
  fixture f;
  fixture *F = &f;
  fx_init(F);
  int64_t lo, hi;
  ts_expr *x = B(F, TS_EXPR_ADD, B(F, TS_EXPR_MUL, f.i, C(F, 16)), f.j);
  assert_true(ts_expr_const_bound(x, f.r, &lo, &hi));
  assert_int_equal(lo, 0);
  assert_int_equal(hi, 127);
  assert_true(
      ts_expr_const_bound(B(F, TS_EXPR_FLOORMOD, f.k, C(F, 8)), f.r, &lo, &hi));
  assert_int_equal(lo, 0);
  assert_int_equal(hi, 7);
  assert_true(ts_expr_const_bound(B(F, TS_EXPR_SUB, f.i, f.j), f.r, &lo, &hi));
  assert_int_equal(lo, -15);
  assert_int_equal(hi, 7);
  assert_true(ts_expr_const_bound(B(F, TS_EXPR_FLOORDIV, f.j, C(F, -4)), f.r,
                                  &lo, &hi));
  assert_int_equal(lo, -4);
  assert_int_equal(hi, 0);
  assert_true(ts_expr_const_bound(
      ts_select_raw(f.a, B(F, TS_EXPR_LT, f.i, C(F, 4)), f.j, C(F, 100)), f.r,
      &lo, &hi));
  assert_int_equal(lo, 0);
  assert_int_equal(hi, 100);
  /* a multiple of 8 modulo 16 is at most 8 (i ranges over [0, 8)): the
   * bound of a packing copy's half-panel index */
  assert_true(ts_expr_const_bound(
      B(F, TS_EXPR_FLOORMOD, B(F, TS_EXPR_MUL, f.i, C(F, 8)), C(F, 16)), f.r,
      &lo, &hi));
  assert_int_equal(lo, 0);
  assert_int_equal(hi, 8);
  assert_true(ts_expr_const_bound(
      B(F, TS_EXPR_FLOORMOD,
        B(F, TS_EXPR_ADD, B(F, TS_EXPR_MUL, f.i, C(F, 12)), C(F, 18)),
        C(F, 16)),
      f.r, &lo, &hi));
  assert_int_equal(hi, 14);
  /* an unranged int64 var is unbounded; an int8 var is bounded by its type */
  assert_false(ts_expr_const_bound(f.k, f.r, &lo, &hi));
  ts_expr *b = ts_var(f.a, "b", TS_INT8);
  assert_true(ts_expr_const_bound(b, f.r, &lo, &hi));
  assert_int_equal(lo, -128);
  assert_int_equal(hi, 127);
  /* overflow is not a bound */
  ts_expr *big = B(F, TS_EXPR_MUL, C(F, INT64_MAX / 2), C(F, 4));
  assert_false(ts_expr_const_bound(big, NULL, &lo, &hi));
  /* ranges map round trip */
  int64_t m, e;
  assert_true(ts_var_ranges_get(f.r, f.j, &m, &e));
  assert_int_equal(m, 0);
  assert_int_equal(e, 16);
  assert_false(ts_var_ranges_get(f.r, f.k, &m, &e));
  ts_var_ranges_set(f.r, f.j, 4, 2);
  assert_true(ts_var_ranges_get(f.r, f.j, &m, &e));
  assert_int_equal(m, 4);
  assert_int_equal(e, 2);
  fx_free(F);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_affine),
      cmocka_unit_test(test_divmod),
      cmocka_unit_test(test_divmod_merge),
      cmocka_unit_test(test_long_chain),
      cmocka_unit_test(test_minmax_compare),
      cmocka_unit_test(test_const_bound),
      cmocka_unit_test(test_random_int64),
      cmocka_unit_test(test_random_int32),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
