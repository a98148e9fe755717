/*
 * simplify.c — arithmetic simplification of integer index expressions:
 * var ranges, constant bounds by interval arithmetic, and the simplifier
 * (constant folding, identities, canonical affine forms `c0 + sum ci*ti`,
 * floordiv/floormod of affine expressions by constants, min/max and
 * comparisons decided by bounds).
 *
 * Soundness rule: a rewrite that relies on ordinary integer arithmetic (not
 * arithmetic modulo 2^bits) is applied only when the bounds of the original
 * expression prove that no intermediate value wraps in its dtype. Rewrites
 * that hold modulo 2^bits (collecting affine terms) need no bounds.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- var ranges: open addressing on var pointers ---- */

typedef struct range_slot {
  const ts_expr *var;
  int64_t min, extent;
} range_slot;

struct ts_var_ranges {
  range_slot *slots;
  size_t cap, size;
};

static size_t hash_ptr(const void *p) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return (size_t)x;
}

/* What ts_var_ranges_create returns when memory ran out: a table that
 * stays empty (the failure is counted by ts_alloc_failures). */
static ts_var_ranges dead_ranges;

ts_var_ranges *ts_var_ranges_create(void) {
  ts_var_ranges *r = ts_calloc(1, sizeof *r);
  return r ? r : &dead_ranges;
}

void ts_var_ranges_destroy(ts_var_ranges *r) {
  if (!r || r == &dead_ranges) return;
  free(r->slots);
  free(r);
}

/* Whether the table could grow (out of memory: it stays as it is). */
static bool ranges_grow(ts_var_ranges *r) {
  if (r == &dead_ranges) return false;
  size_t cap = r->cap ? r->cap * 2 : 16;
  range_slot *slots = ts_calloc(cap, sizeof *slots);
  if (!slots) return false;
  for (size_t i = 0; i < r->cap; i++) {
    if (!r->slots[i].var) continue;
    size_t j = hash_ptr(r->slots[i].var) & (cap - 1);
    while (slots[j].var) j = (j + 1) & (cap - 1);
    slots[j] = r->slots[i];
  }
  free(r->slots);
  r->slots = slots;
  r->cap = cap;
  return true;
}

void ts_var_ranges_set(ts_var_ranges *r, const ts_expr *var, int64_t min,
                       int64_t extent) {
  if (!r || !var) return;
  if ((r->size + 1) * 2 > r->cap && !ranges_grow(r)) return; /* dropped */
  size_t j = hash_ptr(var) & (r->cap - 1);
  while (r->slots[j].var && r->slots[j].var != var) j = (j + 1) & (r->cap - 1);
  if (!r->slots[j].var) r->size++;
  r->slots[j] = (range_slot){var, min, extent};
}

bool ts_var_ranges_get(const ts_var_ranges *r, const ts_expr *var, int64_t *min,
                       int64_t *extent) {
  if (!r || !r->cap || !var) return false;
  size_t j = hash_ptr(var) & (r->cap - 1);
  while (r->slots[j].var) {
    if (r->slots[j].var == var) {
      if (min) *min = r->slots[j].min;
      if (extent) *extent = r->slots[j].extent;
      return true;
    }
    j = (j + 1) & (r->cap - 1);
  }
  return false;
}

/* ---- integer helpers ---- */

static int64_t fdiv(int64_t x, int64_t y) {
  int64_t q = x / y;
  if ((x % y != 0) && ((x < 0) != (y < 0))) q--;
  return q;
}
static int64_t fmod64(int64_t x, int64_t y) { return x - fdiv(x, y) * y; }

/* Whether t is a scalar integer type whose values we track as int64. */
static bool is_int_scalar(ts_dtype t) {
  return t.lanes == 1 && (t.code == TS_DT_INT || t.code == TS_DT_UINT);
}

bool ts_dtype_int_range(ts_dtype t, int64_t *lo, int64_t *hi) {
  if (t.lanes != 1) return false;
  if (t.code == TS_DT_BOOL) {
    *lo = 0;
    *hi = 1;
    return true;
  }
  if (t.code == TS_DT_INT) {
    if (t.bits >= 64) {
      *lo = INT64_MIN;
      *hi = INT64_MAX;
    } else {
      *lo = -(INT64_C(1) << (t.bits - 1));
      *hi = (INT64_C(1) << (t.bits - 1)) - 1;
    }
    return true;
  }
  if (t.code == TS_DT_UINT) {
    *lo = 0;
    *hi = t.bits >= 64 ? INT64_MAX : (int64_t)((UINT64_C(1) << t.bits) - 1);
    return true;
  }
  return false;
}

static bool dtype_range(ts_dtype t, int64_t *lo, int64_t *hi) {
  return ts_dtype_int_range(t, lo, hi);
}

/* ---- constant bounds ---- */

/* A let var's bound, visible while bounding the let's body. */
typedef struct overlay {
  const ts_expr *var;
  bool known;
  int64_t lo, hi;
  const struct overlay *next;
} overlay;

typedef struct bound_ctx {
  const ts_var_ranges *ranges;
  const overlay *lets;
  int depth;
} bound_ctx;

#define MAX_DEPTH 2000

int64_t ts_gcd64(int64_t a, int64_t b) {
  if (a < 0) a = -a;
  if (b < 0) b = -b;
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* A positive number every value of integer expression e is a multiple
 * of (0: e is always 0), from its constant factors: 8 x + 16 y gives 8. */
static int64_t known_multiple(const ts_expr *e, int depth) {
  if (depth > 16) return 1;
  int64_t v;
  switch (e->kind) {
  case TS_EXPR_INT:
    v = e->u.int_value;
    return v < 0 ? (v == INT64_MIN ? 1 : -v) : v;
  case TS_EXPR_MUL: {
    int64_t x = known_multiple(e->u.op.a, depth + 1);
    int64_t y = known_multiple(e->u.op.b, depth + 1);
    return __builtin_mul_overflow(x, y, &v) ? 1 : v;
  }
  case TS_EXPR_ADD:
  case TS_EXPR_SUB:
    return ts_gcd64(known_multiple(e->u.op.a, depth + 1),
                    known_multiple(e->u.op.b, depth + 1));
  default: return 1;
  }
}

static bool bound_rec(bound_ctx *c, const ts_expr *e, int64_t *lo, int64_t *hi);

static bool add_ov(int64_t a, int64_t b, int64_t *r) {
  return !__builtin_add_overflow(a, b, r);
}
static bool sub_ov(int64_t a, int64_t b, int64_t *r) {
  return !__builtin_sub_overflow(a, b, r);
}
static bool mul_ov(int64_t a, int64_t b, int64_t *r) {
  return !__builtin_mul_overflow(a, b, r);
}

static bool bound_mul(int64_t al, int64_t ah, int64_t bl, int64_t bh,
                      int64_t *lo, int64_t *hi) {
  int64_t p[4];
  if (!mul_ov(al, bl, &p[0]) || !mul_ov(al, bh, &p[1]) ||
      !mul_ov(ah, bl, &p[2]) || !mul_ov(ah, bh, &p[3]))
    return false;
  *lo = *hi = p[0];
  for (int i = 1; i < 4; i++) {
    if (p[i] < *lo) *lo = p[i];
    if (p[i] > *hi) *hi = p[i];
  }
  return true;
}

/* Division (floor or truncating) over a divisor range not containing 0:
 * the quotient is monotone in each argument, so the corners bound it. */
static bool bound_div(bool floor, int64_t al, int64_t ah, int64_t bl,
                      int64_t bh, int64_t *lo, int64_t *hi) {
  if (bl <= 0 && bh >= 0) return false;
  int64_t xs[2] = {al, ah}, ys[2] = {bl, bh};
  bool first = true;
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++) {
      if (xs[i] == INT64_MIN && ys[j] == -1) return false;
      int64_t q = floor ? fdiv(xs[i], ys[j]) : xs[i] / ys[j];
      if (first || q < *lo) *lo = q;
      if (first || q > *hi) *hi = q;
      first = false;
    }
  return true;
}

static bool bound_compare(ts_expr_kind k, int64_t al, int64_t ah, int64_t bl,
                          int64_t bh, int64_t *lo, int64_t *hi) {
  int truth = -1; /* -1 unknown */
  switch (k) {
  case TS_EXPR_LT: truth = ah < bl ? 1 : al >= bh ? 0 : -1; break;
  case TS_EXPR_LE: truth = ah <= bl ? 1 : al > bh ? 0 : -1; break;
  case TS_EXPR_GT: truth = al > bh ? 1 : ah <= bl ? 0 : -1; break;
  case TS_EXPR_GE: truth = al >= bh ? 1 : ah < bl ? 0 : -1; break;
  case TS_EXPR_EQ:
    truth = (al == ah && bl == bh && al == bl) ? 1
            : (ah < bl || bh < al)             ? 0
                                               : -1;
    break;
  case TS_EXPR_NE:
    truth = (al == ah && bl == bh && al == bl) ? 0
            : (ah < bl || bh < al)             ? 1
                                               : -1;
    break;
  default: break;
  }
  *lo = truth == 1 ? 1 : 0;
  *hi = truth == 0 ? 0 : 1;
  return true;
}

static bool bound_node(bound_ctx *c, const ts_expr *e, int64_t *lo,
                       int64_t *hi) {
  int64_t al, ah, bl, bh;
  ts_expr_kind k = (ts_expr_kind)e->kind;
  switch (k) {
  case TS_EXPR_INT:
    if (e->dtype.code == TS_DT_UINT && e->u.int_value < 0) return false;
    *lo = *hi = e->u.int_value;
    return true;
  case TS_EXPR_VAR: {
    for (const overlay *o = c->lets; o; o = o->next)
      if (o->var == e) {
        if (!o->known) return false;
        *lo = o->lo;
        *hi = o->hi;
        return true;
      }
    int64_t min, extent;
    if (ts_var_ranges_get(c->ranges, e, &min, &extent)) {
      if (extent <= 0) return false;
      if (!add_ov(min, extent - 1, hi)) return false;
      *lo = min;
      return true;
    }
    /* An unranged var of a narrow type is still bounded by its type. */
    if (e->dtype.code == TS_DT_BOOL || e->dtype.bits < 64)
      return dtype_range(e->dtype, lo, hi);
    return false;
  }
  case TS_EXPR_ADD:
  case TS_EXPR_SUB:
  case TS_EXPR_MUL:
  case TS_EXPR_DIV:
  case TS_EXPR_MOD:
  case TS_EXPR_FLOORDIV:
  case TS_EXPR_FLOORMOD:
  case TS_EXPR_MIN:
  case TS_EXPR_MAX:
    if (!is_int_scalar(e->dtype)) return false;
    if (!bound_rec(c, e->u.op.b, &bl, &bh)) return false;
    if (!bound_rec(c, e->u.op.a, &al, &ah)) {
      /* a remainder is bounded by the divisor alone */
      if (k != TS_EXPR_MOD && k != TS_EXPR_FLOORMOD) return false;
      if (!dtype_range(e->dtype, &al, &ah)) return false;
    }
    switch (k) {
    case TS_EXPR_ADD: return add_ov(al, bl, lo) && add_ov(ah, bh, hi);
    case TS_EXPR_SUB: return sub_ov(al, bh, lo) && sub_ov(ah, bl, hi);
    case TS_EXPR_MUL: return bound_mul(al, ah, bl, bh, lo, hi);
    case TS_EXPR_DIV: return bound_div(false, al, ah, bl, bh, lo, hi);
    case TS_EXPR_FLOORDIV: return bound_div(true, al, ah, bl, bh, lo, hi);
    case TS_EXPR_MOD: {
      if (bl <= 0 && bh >= 0) return false;
      if (bl == INT64_MIN) return false;
      int64_t m = bh > 0 ? bh : -bl; /* largest |divisor| */
      if (-bh > m) m = -bh;
      if (bl < 0 && -bl > m) m = -bl;
      if (al >= 0 && ah < (bl > 0 ? bl : -bh)) { /* |x| < |divisor| */
        *lo = al;
        *hi = ah;
      } else if (al >= 0) {
        *lo = 0;
        *hi = ah < m - 1 ? ah : m - 1;
      } else if (ah <= 0) {
        *lo = al > -(m - 1) ? al : -(m - 1);
        *hi = 0;
      } else {
        *lo = -(m - 1);
        *hi = m - 1;
      }
      return true;
    }
    case TS_EXPR_FLOORMOD:
      if (bl <= 0 && bh >= 0) return false;
      if (bl == bh && bl > 0 && fdiv(al, bl) == fdiv(ah, bl)) {
        *lo = fmod64(al, bl);
        *hi = fmod64(ah, bl);
        return true;
      }
      if (bl > 0) {
        *lo = 0;
        *hi = bh - 1;
        if (al >= 0 && ah < *hi) *hi = ah;
        /* a multiple of g modulo m is a multiple of gcd(g, m) below m:
         * floormod(8 x, 16) <= 8 */
        if (bl == bh) {
          int64_t g = ts_gcd64(known_multiple(e->u.op.a, 0), bl);
          if (g > 1 && *hi > bl - g) *hi = bl - g;
        }
      } else {
        *lo = bl + 1;
        *hi = 0;
      }
      return true;
    case TS_EXPR_MIN:
      *lo = al < bl ? al : bl;
      *hi = ah < bh ? ah : bh;
      return true;
    case TS_EXPR_MAX:
      *lo = al > bl ? al : bl;
      *hi = ah > bh ? ah : bh;
      return true;
    default: return false;
    }
  case TS_EXPR_EQ:
  case TS_EXPR_NE:
  case TS_EXPR_LT:
  case TS_EXPR_LE:
  case TS_EXPR_GT:
  case TS_EXPR_GE:
    if (e->dtype.lanes != 1) return false;
    if (bound_rec(c, e->u.op.a, &al, &ah) && bound_rec(c, e->u.op.b, &bl, &bh))
      return bound_compare(k, al, ah, bl, bh, lo, hi);
    *lo = 0;
    *hi = 1;
    return true;
  case TS_EXPR_AND:
  case TS_EXPR_OR:
    if (e->dtype.lanes != 1) return false;
    if (!bound_rec(c, e->u.op.a, &al, &ah)) al = 0, ah = 1;
    if (!bound_rec(c, e->u.op.b, &bl, &bh)) bl = 0, bh = 1;
    if (k == TS_EXPR_AND) {
      *lo = (al != 0 && bl != 0) ? 1 : 0; /* both surely true */
      *hi = (ah == 0 || bh == 0) ? 0 : 1;
    } else {
      *lo = (al != 0 || bl != 0) ? 1 : 0;
      *hi = (ah == 0 && bh == 0) ? 0 : 1;
    }
    return true;
  case TS_EXPR_NOT:
    if (e->dtype.lanes != 1) return false;
    if (!bound_rec(c, e->u.op.a, &al, &ah)) al = 0, ah = 1;
    *lo = ah == 0 ? 1 : 0;
    *hi = al != 0 ? 0 : 1;
    return true;
  case TS_EXPR_SELECT: {
    if (e->dtype.lanes != 1) return false;
    int64_t cl = 0, ch = 1;
    if (!bound_rec(c, e->u.op.a, &cl, &ch)) cl = 0, ch = 1;
    if (cl != 0) return bound_rec(c, e->u.op.b, lo, hi);
    if (ch == 0) return bound_rec(c, e->u.op.c, lo, hi);
    if (!bound_rec(c, e->u.op.b, &al, &ah) ||
        !bound_rec(c, e->u.op.c, &bl, &bh))
      return false;
    *lo = al < bl ? al : bl;
    *hi = ah > bh ? ah : bh;
    return true;
  }
  case TS_EXPR_CAST: {
    ts_dtype src = e->u.op.a->dtype;
    int64_t tl, th;
    if (!dtype_range(e->dtype, &tl, &th)) return false;
    if (e->dtype.code == TS_DT_BOOL) {
      if (bound_rec(c, e->u.op.a, &al, &ah)) {
        *lo = (al > 0 || ah < 0) ? 1 : 0;
        *hi = (al == 0 && ah == 0) ? 0 : 1;
        return true;
      }
      *lo = 0;
      *hi = 1;
      return true;
    }
    if ((is_int_scalar(src) || src.code == TS_DT_BOOL) &&
        bound_rec(c, e->u.op.a, &al, &ah) && al >= tl && ah <= th) {
      *lo = al;
      *hi = ah;
      return true;
    }
    if (e->dtype.bits < 64) { /* whatever the source, the type bounds it */
      *lo = tl;
      *hi = th;
      return true;
    }
    return false;
  }
  case TS_EXPR_LET: {
    overlay o = {e->u.let.var, false, 0, 0, c->lets};
    o.known = bound_rec(c, e->u.let.value, &o.lo, &o.hi);
    const overlay *saved = c->lets;
    c->lets = &o;
    bool ok = bound_rec(c, e->u.let.body, lo, hi);
    c->lets = saved;
    return ok;
  }
  case TS_EXPR_CALL:
    if (strcmp(e->u.call.name, "if_then_else") == 0 && e->u.call.n_args == 3 &&
        e->dtype.lanes == 1) {
      if (!bound_rec(c, e->u.call.args[1], &al, &ah) ||
          !bound_rec(c, e->u.call.args[2], &bl, &bh))
        break;
      *lo = al < bl ? al : bl;
      *hi = ah > bh ? ah : bh;
      return true;
    }
    break;
  default: break;
  }
  /* Loads, calls and the rest: only the dtype bounds them. */
  if (e->dtype.lanes == 1 && (e->dtype.code == TS_DT_BOOL ||
                              (is_int_scalar(e->dtype) && e->dtype.bits < 64)))
    return dtype_range(e->dtype, lo, hi);
  return false;
}

/* Bounds e and checks that the value fits e's dtype, so that a successful
 * bound also proves the evaluation of e never wraps. */
static bool bound_rec(bound_ctx *c, const ts_expr *e, int64_t *lo,
                      int64_t *hi) {
  if (!e || c->depth > MAX_DEPTH) return false;
  c->depth++;
  bool ok = bound_node(c, e, lo, hi);
  c->depth--;
  if (!ok || *lo > *hi) return false;
  int64_t tl, th;
  if (!dtype_range(e->dtype, &tl, &th)) return false;
  return *lo >= tl && *hi <= th;
}

bool ts_expr_const_bound(const ts_expr *e, const ts_var_ranges *ranges,
                         int64_t *lo, int64_t *hi) {
  bound_ctx c = {ranges, NULL, 0};
  int64_t l, h;
  if (!bound_rec(&c, e, &l, &h)) return false;
  if (lo) *lo = l;
  if (hi) *hi = h;
  return true;
}

/* ---- structural equality of expressions (vars by identity) ---- */

static bool expr_same(const ts_expr *a, const ts_expr *b, int depth) {
  if (a == b) return true;
  if (!a || !b || a->kind != b->kind || !ts_dtype_eq(a->dtype, b->dtype))
    return false;
  if (depth > MAX_DEPTH) return false;
  switch (a->kind) {
  case TS_EXPR_INT: return a->u.int_value == b->u.int_value;
  case TS_EXPR_FLOAT:
    return memcmp(&a->u.float_value, &b->u.float_value, sizeof(double)) == 0;
  case TS_EXPR_VAR: return false; /* distinct nodes are distinct vars */
  case TS_EXPR_LOAD:
  case TS_EXPR_ADDRESS_OF:
    if (a->u.load.buffer != b->u.load.buffer) return false;
    break;
  case TS_EXPR_CALL:
    if (strcmp(a->u.call.name, b->u.call.name) != 0) return false;
    break;
  case TS_EXPR_LET:
    if (a->u.let.var != b->u.let.var) return false;
    break;
  default: break;
  }
  int n = ts_expr_n_operands(a);
  if (n != ts_expr_n_operands(b)) return false;
  for (int i = 0; i < n; i++)
    if (!expr_same(ts_expr_operand(a, i), ts_expr_operand(b, i), depth + 1))
      return false;
  return true;
}

/* ---- affine forms: c0 + sum ci * ti over atoms ti ----
 * Coefficients are kept modulo 2^64 and wrapped to the dtype when built,
 * which is exact for wrapping arithmetic. Rewrites that need the form to be
 * an identity over the integers (floor division, differences decided by
 * bounds) also require `exact`: no coefficient overflowed or wrapped. */

typedef struct term {
  ts_expr *atom;
  uint64_t coef;
} term;

typedef struct affine {
  ts_dtype t;
  uint64_t konst;
  term *terms;
  int n, cap;
  bool inexact; /* some coefficient overflowed int64 or the dtype */
} affine;

static void affine_free(affine *f) { free(f->terms); }

static uint64_t acc_add(affine *f, uint64_t x, uint64_t y) {
  int64_t r;
  if (__builtin_add_overflow((int64_t)x, (int64_t)y, &r)) f->inexact = true;
  return x + y;
}

static uint64_t acc_mul(affine *f, uint64_t x, uint64_t y) {
  int64_t r;
  if (__builtin_mul_overflow((int64_t)x, (int64_t)y, &r)) f->inexact = true;
  return x * y;
}

static void affine_add_term(affine *f, ts_expr *atom, uint64_t coef) {
  for (int i = 0; i < f->n; i++)
    if (expr_same(f->terms[i].atom, atom, 0)) {
      f->terms[i].coef = acc_add(f, f->terms[i].coef, coef);
      return;
    }
  if (f->n == f->cap) {
    int cap = f->cap ? f->cap * 2 : 8;
    term *p = ts_realloc(f->terms, sizeof *p * (size_t)cap);
    if (!p) { /* out of memory (counted): the form is no longer exact */
      f->inexact = true;
      return;
    }
    f->terms = p;
    f->cap = cap;
  }
  f->terms[f->n++] = (term){atom, coef};
}

/* Whether affine canonicalization applies to integers of type t: signed
 * scalars (unsigned forms would print as huge coefficients). */
static bool affine_type(ts_dtype t) {
  return t.lanes == 1 && t.code == TS_DT_INT;
}

static void affine_collect(affine *f, ts_expr *e, uint64_t scale, int depth);

/* Whether e is + or - on operands of type t. */
static bool is_sum(const ts_expr *e, ts_dtype t) {
  return (e->kind == TS_EXPR_ADD || e->kind == TS_EXPR_SUB) &&
         ts_dtype_eq(e->dtype, t) && ts_dtype_eq(e->u.op.a->dtype, t) &&
         ts_dtype_eq(e->u.op.b->dtype, t);
}

/* The left spine of a chain of sums (a + b - c + d ...), bottom first:
 * returns the nodes in a malloc'd array (caller frees), count in *n, and the
 * leftmost operand in *leaf. Walking it iteratively keeps long chains from
 * deepening the recursion. */
static ts_expr **sum_spine(ts_expr *e, ts_dtype t, int *n, ts_expr **leaf) {
  int count = 0;
  for (ts_expr *x = e; is_sum(x, t); x = x->u.op.a) count++;
  ts_expr **nodes = ts_malloc(sizeof *nodes * (size_t)(count ? count : 1));
  if (!nodes) return NULL; /* out of memory (counted) */
  int i = count;
  ts_expr *x = e;
  for (; is_sum(x, t); x = x->u.op.a) nodes[--i] = x;
  *leaf = x;
  *n = count;
  return nodes;
}

/* Adds scale * e to f, decomposing +, -, and multiplication by constants. */
static void affine_collect(affine *f, ts_expr *e, uint64_t scale, int depth) {
  if (is_sum(e, f->t) && depth < MAX_DEPTH) {
    int n;
    ts_expr *leaf;
    ts_expr **nodes = sum_spine(e, f->t, &n, &leaf);
    if (!nodes) {
      f->inexact = true;
      return;
    }
    affine_collect(f, leaf, scale, depth + 1);
    for (int i = 0; i < n; i++)
      affine_collect(f, nodes[i]->u.op.b,
                     nodes[i]->kind == TS_EXPR_SUB
                         ? acc_mul(f, scale, (uint64_t)-1)
                         : scale,
                     depth + 1);
    free(nodes);
    return;
  }
  if (e->kind == TS_EXPR_INT && ts_dtype_eq(e->dtype, f->t)) {
    f->konst =
        acc_add(f, f->konst, acc_mul(f, scale, (uint64_t)e->u.int_value));
    return;
  }
  bool same = depth < MAX_DEPTH && ts_dtype_eq(e->dtype, f->t) &&
              ts_expr_is_binary((ts_expr_kind)e->kind) &&
              ts_dtype_eq(e->u.op.a->dtype, f->t) &&
              ts_dtype_eq(e->u.op.b->dtype, f->t);
  if (same && e->kind == TS_EXPR_ADD) {
    affine_collect(f, e->u.op.a, scale, depth + 1);
    affine_collect(f, e->u.op.b, scale, depth + 1);
    return;
  }
  if (same && e->kind == TS_EXPR_SUB) {
    affine_collect(f, e->u.op.a, scale, depth + 1);
    affine_collect(f, e->u.op.b, acc_mul(f, scale, (uint64_t)-1), depth + 1);
    return;
  }
  if (same && e->kind == TS_EXPR_MUL) {
    if (e->u.op.b->kind == TS_EXPR_INT) {
      affine_collect(f, e->u.op.a,
                     acc_mul(f, scale, (uint64_t)e->u.op.b->u.int_value),
                     depth + 1);
      return;
    }
    if (e->u.op.a->kind == TS_EXPR_INT) {
      affine_collect(f, e->u.op.b,
                     acc_mul(f, scale, (uint64_t)e->u.op.a->u.int_value),
                     depth + 1);
      return;
    }
  }
  affine_add_term(f, e, scale);
}

static void affine_of(affine *f, ts_expr *e) {
  memset(f, 0, sizeof *f);
  f->t = e->dtype;
  affine_collect(f, e, 1, 0);
}

/* Wraps coefficients to the dtype and drops zero terms. */
static void affine_normalize(affine *f) {
  int64_t k = wrap_int((int64_t)f->konst, f->t);
  if (k != (int64_t)f->konst) f->inexact = true;
  f->konst = (uint64_t)k;
  int m = 0;
  for (int i = 0; i < f->n; i++) {
    int64_t c = wrap_int((int64_t)f->terms[i].coef, f->t);
    if (c != (int64_t)f->terms[i].coef) f->inexact = true;
    f->terms[i].coef = (uint64_t)c;
    if (c) f->terms[m++] = f->terms[i];
  }
  f->n = m;
}

static ts_expr *scaled(ts_arena *a, ts_dtype t, ts_expr *atom, int64_t c) {
  if (c == 1) return atom;
  return ts_binary_raw(a, TS_EXPR_MUL, atom, ts_int(a, t, c));
}

/* Merges k*c*floordiv(x, c) + k*floormod(x, c) into k*x (floor division
 * and modulus by a positive constant always satisfy x = floordiv(x, c)*c +
 * floormod(x, c)): the flat index of a fused loop's split-back bindings,
 * floordiv(i, 128) * 128 + floormod(i, 128), becomes i again. */
static void affine_merge_divmod(affine *f) {
  for (bool again = true; again;) {
    again = false;
    for (int i = 0; i < f->n && !again; i++) {
      ts_expr *d = f->terms[i].atom;
      int64_t c;
      if (d->kind != TS_EXPR_FLOORDIV || !ts_dtype_eq(d->dtype, f->t) ||
          !ts_expr_is_const_int(d->u.op.b, &c) || c <= 0)
        continue;
      for (int j = 0; j < f->n; j++) {
        ts_expr *m = f->terms[j].atom;
        int64_t cm;
        if (m->kind != TS_EXPR_FLOORMOD ||
            !ts_expr_is_const_int(m->u.op.b, &cm) || cm != c ||
            !expr_same(m->u.op.a, d->u.op.a, 0))
          continue;
        uint64_t k = f->terms[j].coef;
        int64_t kc;
        if (__builtin_mul_overflow((int64_t)k, c, &kc) ||
            (uint64_t)kc != f->terms[i].coef)
          continue;
        ts_expr *x = d->u.op.a;
        int lo = i < j ? i : j, hi = i < j ? j : i;
        f->terms[hi] = f->terms[--f->n];
        f->terms[lo] = f->terms[--f->n];
        affine_collect(f, x, k, 1);
        again = true;
        break;
      }
    }
  }
}

/* Builds the canonical expression: positive terms in order, then negative
 * terms, then the constant. */
static ts_expr *affine_build(ts_arena *a, affine *f) {
  affine_merge_divmod(f);
  affine_normalize(f);
  ts_dtype t = f->t;
  int64_t tmin = INT64_MIN, tmax = INT64_MAX;
  dtype_range(t, &tmin, &tmax);
  int64_t k = (int64_t)f->konst;
  ts_expr *r = NULL;
  for (int i = 0; i < f->n; i++) {
    int64_t c = (int64_t)f->terms[i].coef;
    if (c <= 0 && c != tmin) continue;
    ts_expr *x = scaled(a, t, f->terms[i].atom, c);
    r = r ? ts_binary_raw(a, TS_EXPR_ADD, r, x) : x;
  }
  bool used_const = false;
  if (!r && k != 0) {
    r = ts_int(a, t, k);
    used_const = true;
  }
  for (int i = 0; i < f->n; i++) {
    int64_t c = (int64_t)f->terms[i].coef;
    if (c > 0 || c == tmin) continue;
    ts_expr *x = scaled(a, t, f->terms[i].atom, -c);
    r = r ? ts_binary_raw(a, TS_EXPR_SUB, r, x)
          : ts_binary_raw(a, TS_EXPR_SUB, ts_int(a, t, 0), x);
  }
  if (!r) return ts_int(a, t, k);
  if (!used_const && k != 0) {
    if (k > 0 || k == tmin)
      r = ts_binary_raw(a, TS_EXPR_ADD, r, ts_int(a, t, k));
    else
      r = ts_binary_raw(a, TS_EXPR_SUB, r, ts_int(a, t, -k));
  }
  return r;
}

/* ---- the simplifier ---- */

typedef struct simp_ctx {
  ts_arena *a;
  bound_ctx b;
} simp_ctx;

static ts_expr *simp(simp_ctx *c, ts_expr *e);

static bool cbound(simp_ctx *c, const ts_expr *e, int64_t *lo, int64_t *hi) {
  int saved = c->b.depth;
  c->b.depth = 0;
  bool ok = bound_rec(&c->b, e, lo, hi);
  c->b.depth = saved;
  return ok;
}

/* Bounds of x - y over the integers, through their affine difference (so
 * that shared terms cancel): x and y must evaluate without wrapping and the
 * difference must be an exact identity. */
static bool diff_bound(simp_ctx *c, ts_expr *x, ts_expr *y, int64_t *lo,
                       int64_t *hi) {
  if (!affine_type(x->dtype) || !ts_dtype_eq(x->dtype, y->dtype)) return false;
  int64_t xl, xh, yl, yh, dl, dh;
  if (!cbound(c, x, &xl, &xh) || !cbound(c, y, &yl, &yh)) return false;
  if (!sub_ov(xl, yh, &dl) || !sub_ov(xh, yl, &dh)) return false;
  affine f;
  affine_of(&f, x);
  affine_collect(&f, y, (uint64_t)-1, 0);
  affine_normalize(&f);
  bool ok = !f.inexact;
  if (ok && f.n == 0) {
    *lo = *hi = (int64_t)f.konst;
  } else if (ok) {
    ok = cbound(c, affine_build(c->a, &f), lo, hi);
  }
  affine_free(&f);
  if (!ok) return false;
  /* the interval arithmetic bound of x - y may be tighter on one side */
  if (dl > *lo) *lo = dl;
  if (dh < *hi) *hi = dh;
  return *lo <= *hi;
}

/* floordiv/floormod(q cnt + r, cnt) where every coefficient of r's terms
 * is a multiple of g, a divisor of cnt greater than 1: r = g y + rc with
 * y the terms over g plus floor(rc / g) and 0 <= rc mod g < g, so
 * floordiv = q + floordiv(y, cnt / g) and floormod = g floormod(y, cnt / g)
 * + rc mod g (a packed layout's floordiv(4 x + 1, 16) = floordiv(x, 4)).
 * NULL when there is no such g. */
static ts_expr *simp_divmod(simp_ctx *c, ts_expr_kind k, ts_expr *x,
                            int64_t cnt);
static ts_expr *divmod_common_factor(simp_ctx *c, ts_expr_kind k, affine *q,
                                     affine *r, int64_t cnt) {
  int64_t g = cnt;
  for (int i = 0; i < r->n && g > 1; i++) {
    int64_t ci = (int64_t)r->terms[i].coef, a0 = ci < 0 ? -ci : ci, b0 = g;
    while (b0) {
      int64_t t = a0 % b0;
      a0 = b0;
      b0 = t;
    }
    g = a0;
  }
  if (g <= 1 || g == cnt) return NULL;
  ts_arena *a = c->a;
  ts_dtype t = r->t;
  int64_t rc = (int64_t)r->konst;
  affine y;
  memset(&y, 0, sizeof y);
  y.t = t;
  y.konst = (uint64_t)fdiv(rc, g);
  for (int i = 0; i < r->n; i++)
    affine_add_term(&y, r->terms[i].atom,
                    (uint64_t)((int64_t)r->terms[i].coef / g));
  ts_expr *ye = affine_build(a, &y);
  affine_free(&y);
  ts_expr_kind inner =
      k == TS_EXPR_FLOORDIV ? TS_EXPR_FLOORDIV : TS_EXPR_FLOORMOD;
  ts_expr *d = simp_divmod(c, inner, ye, cnt / g);
  if (!d) d = ts_binary_raw(a, inner, ye, ts_int(a, t, cnt / g));
  if (k == TS_EXPR_FLOORDIV) {
    affine_collect(q, d, 1, 0);
    return affine_build(a, q);
  }
  affine m;
  memset(&m, 0, sizeof m);
  m.t = t;
  m.konst = (uint64_t)fmod64(rc, g);
  affine_collect(&m, d, (uint64_t)g, 0);
  ts_expr *res = affine_build(a, &m);
  affine_free(&m);
  return res;
}

/* floordiv/floormod (and truncating div/mod of nonnegative values) of x by a
 * positive constant cnt. */
static ts_expr *simp_divmod(simp_ctx *c, ts_expr_kind k, ts_expr *x,
                            int64_t cnt) {
  ts_arena *a = c->a;
  ts_dtype t = x->dtype;
  bool is_div = k == TS_EXPR_FLOORDIV || k == TS_EXPR_DIV;
  int64_t xl, xh;
  if (!cbound(c, x, &xl, &xh)) return NULL;
  if ((k == TS_EXPR_DIV || k == TS_EXPR_MOD) && xl < 0) return NULL;
  if (!affine_type(t)) {
    if (fdiv(xl, cnt) == fdiv(xh, cnt))
      return is_div ? ts_int(a, t, fdiv(xl, cnt))
                    : ts_binary(a, TS_EXPR_SUB, x,
                                ts_int(a, t,
                                       (int64_t)((uint64_t)fdiv(xl, cnt) *
                                                 (uint64_t)cnt)));
    return NULL;
  }
  affine f, q, r;
  affine_of(&f, x);
  affine_normalize(&f);
  if (f.inexact) {
    affine_free(&f);
    return NULL;
  }
  memset(&q, 0, sizeof q);
  memset(&r, 0, sizeof r);
  q.t = r.t = t;
  int64_t k0 = (int64_t)f.konst;
  q.konst = (uint64_t)fdiv(k0, cnt);
  r.konst = (uint64_t)fmod64(k0, cnt);
  for (int i = 0; i < f.n; i++) {
    int64_t ci = (int64_t)f.terms[i].coef;
    if (ci % cnt == 0)
      affine_add_term(&q, f.terms[i].atom, (uint64_t)(ci / cnt));
    else
      affine_add_term(&r, f.terms[i].atom, (uint64_t)ci);
  }
  affine_free(&f);
  ts_expr *result = NULL;
  ts_expr *rest = affine_build(a, &r);
  int64_t rl, rh;
  if (cbound(c, rest, &rl, &rh) && fdiv(rl, cnt) == fdiv(rh, cnt)) {
    int64_t kq = fdiv(rl, cnt);
    if (is_div) {
      q.konst += (uint64_t)kq;
      result = affine_build(a, &q);
    } else {
      /* modulo 2^64 the product is exact enough: the result is in [0, c) */
      affine_collect(&r, ts_int(a, t, (int64_t)((uint64_t)kq * (uint64_t)cnt)),
                     (uint64_t)-1, 0);
      result = affine_build(a, &r);
    }
  } else if (r.n > 0 && k != TS_EXPR_DIV && k != TS_EXPR_MOD &&
             (result = divmod_common_factor(c, k, &q, &r, cnt))) {
    /* (below) */
  } else if (q.n > 0 && r.n > 0 && k != TS_EXPR_DIV && k != TS_EXPR_MOD &&
             cbound(c, rest, &rl, &rh)) {
    /* floordiv(q*c + r, c) = q + floordiv(r, c); floormod drops q*c. */
    if (is_div) {
      affine_collect(
          &q, ts_binary_raw(a, TS_EXPR_FLOORDIV, rest, ts_int(a, t, cnt)), 1,
          0);
      result = affine_build(a, &q);
    } else {
      result = ts_binary_raw(a, TS_EXPR_FLOORMOD, rest, ts_int(a, t, cnt));
    }
  }
  affine_free(&q);
  affine_free(&r);
  return result;
}

static ts_expr *simp_binary(simp_ctx *c, ts_expr *e, ts_expr *x, ts_expr *y) {
  ts_arena *a = c->a;
  ts_expr_kind k = (ts_expr_kind)e->kind;
  bool same = ts_dtype_eq(x->dtype, y->dtype);
  ts_dtype t = x->dtype;
  if (!same || t.lanes != 1) return ts_expr_rebuild(a, e, (ts_expr *[]){x, y});
  ts_expr *folded = ts_binary(a, k, x, y);
  if (folded->kind == TS_EXPR_INT || folded->kind == TS_EXPR_FLOAT ||
      !ts_dtype_is_int(t))
    return folded;
  int64_t cy;
  bool y_const = ts_expr_is_const_int(y, &cy);
  switch (k) {
  case TS_EXPR_ADD:
  case TS_EXPR_SUB:
  case TS_EXPR_MUL: {
    if (!affine_type(t)) return folded;
    affine f;
    affine_of(&f, folded);
    ts_expr *r = affine_build(a, &f);
    affine_free(&f);
    return r;
  }
  case TS_EXPR_FLOORDIV:
  case TS_EXPR_FLOORMOD:
  case TS_EXPR_DIV:
  case TS_EXPR_MOD: {
    if (!y_const || cy <= 0 || t.code == TS_DT_UINT) return folded;
    /* nested floor division / modulus by constants */
    int64_t ci;
    if (k == TS_EXPR_FLOORDIV && x->kind == TS_EXPR_FLOORDIV &&
        ts_expr_is_const_int(x->u.op.b, &ci) && ci > 0) {
      int64_t prod;
      if (mul_ov(ci, cy, &prod) && wrap_int(prod, t) == prod)
        return simp_binary(c, x, x->u.op.a, ts_int(a, t, prod));
    }
    if (k == TS_EXPR_FLOORMOD && x->kind == TS_EXPR_FLOORMOD &&
        ts_expr_is_const_int(x->u.op.b, &ci) && ci > 0 && ci % cy == 0)
      return simp_binary(c, e, x->u.op.a, y);
    ts_expr *r = simp_divmod(c, k, x, cy);
    return r ? r : folded;
  }
  case TS_EXPR_MIN:
  case TS_EXPR_MAX: {
    if (expr_same(x, y, 0)) return x;
    int64_t dl, dh, xl, xh, yl, yh;
    bool is_min = k == TS_EXPR_MIN;
    if (diff_bound(c, x, y, &dl, &dh)) {
      if (dh <= 0) return is_min ? x : y;
      if (dl >= 0) return is_min ? y : x;
    }
    if (cbound(c, x, &xl, &xh) && cbound(c, y, &yl, &yh)) {
      if (xh <= yl) return is_min ? x : y;
      if (yh <= xl) return is_min ? y : x;
    }
    return folded;
  }
  case TS_EXPR_EQ:
  case TS_EXPR_NE:
  case TS_EXPR_LT:
  case TS_EXPR_LE:
  case TS_EXPR_GT:
  case TS_EXPR_GE: {
    int64_t dl, dh, lo, hi;
    if (diff_bound(c, x, y, &dl, &dh)) {
      /* decide the comparison of x - y with 0 */
      int64_t v0 = 0, v1 = 1;
      bound_compare(k, dl, dh, 0, 0, &v0, &v1);
      if (v0 == v1) return ts_bool(a, v0 != 0);
    }
    if (cbound(c, folded, &lo, &hi) && lo == hi) return ts_bool(a, lo != 0);
    return folded;
  }
  default: return folded;
  }
}

/* Whether e is +, - or * on signed integer scalars of type t. */
static bool is_additive(const ts_expr *e, ts_dtype t) {
  return (e->kind == TS_EXPR_ADD || e->kind == TS_EXPR_SUB ||
          e->kind == TS_EXPR_MUL) &&
         affine_type(t) && ts_dtype_eq(e->dtype, t) &&
         ts_dtype_eq(e->u.op.a->dtype, t) && ts_dtype_eq(e->u.op.b->dtype, t);
}

/* Adds scale * e to f, simplifying the atoms. Walking a whole chain of
 * additions once (instead of canonicalizing every level) keeps long sums
 * linear in the number of terms. */
static void simp_collect(simp_ctx *c, affine *f, ts_expr *e, uint64_t scale,
                         int depth) {
  if (depth > MAX_DEPTH || !is_additive(e, f->t)) {
    c->b.depth++;
    affine_collect(f, simp(c, e), scale, 0);
    c->b.depth--;
    return;
  }
  if (e->kind == TS_EXPR_ADD || e->kind == TS_EXPR_SUB) {
    int n;
    ts_expr *leaf;
    ts_expr **nodes = sum_spine(e, f->t, &n, &leaf);
    if (!nodes) {
      f->inexact = true;
      return;
    }
    simp_collect(c, f, leaf, scale, depth + 1);
    for (int i = 0; i < n; i++)
      simp_collect(c, f, nodes[i]->u.op.b,
                   nodes[i]->kind == TS_EXPR_SUB
                       ? acc_mul(f, scale, (uint64_t)-1)
                       : scale,
                   depth + 1);
    free(nodes);
    return;
  }
  c->b.depth++;
  ts_expr *x = simp(c, e->u.op.a), *y = simp(c, e->u.op.b);
  c->b.depth--;
  int64_t k;
  if (ts_expr_is_const_int(y, &k)) {
    affine_collect(f, x, acc_mul(f, scale, (uint64_t)k), 0);
  } else if (ts_expr_is_const_int(x, &k)) {
    affine_collect(f, y, acc_mul(f, scale, (uint64_t)k), 0);
  } else {
    ts_expr *ops[2] = {x, y};
    affine_add_term(f, ts_expr_rebuild(c->a, e, ops), scale);
  }
}

static ts_expr *simp(simp_ctx *c, ts_expr *e) {
  ts_arena *a = c->a;
  if (!e) return NULL;
  if (c->b.depth > MAX_DEPTH) return e;
  ts_expr_kind k = (ts_expr_kind)e->kind;
  switch (k) {
  case TS_EXPR_INT:
  case TS_EXPR_FLOAT: return e;
  case TS_EXPR_VAR: {
    /* a loop var whose range holds one value is that value */
    int64_t min, extent;
    if (c->b.ranges && e->dtype.lanes == 1 &&
        (e->dtype.code == TS_DT_INT || e->dtype.code == TS_DT_UINT) &&
        ts_var_ranges_get(c->b.ranges, e, &min, &extent) && extent == 1)
      return ts_int(a, e->dtype, min);
    return e;
  }
  case TS_EXPR_LET: {
    ts_expr *value = simp(c, e->u.let.value);
    overlay o = {e->u.let.var, false, 0, 0, c->b.lets};
    o.known = cbound(c, value, &o.lo, &o.hi);
    const overlay *saved = c->b.lets;
    c->b.lets = &o;
    c->b.depth++;
    ts_expr *body = simp(c, e->u.let.body);
    c->b.depth--;
    c->b.lets = saved;
    if (value == e->u.let.value && body == e->u.let.body) return e;
    return ts_let(a, e->u.let.var, value, body);
  }
  case TS_EXPR_ADD:
  case TS_EXPR_SUB:
  case TS_EXPR_MUL:
    if (is_additive(e, e->dtype)) {
      affine f;
      memset(&f, 0, sizeof f);
      f.t = e->dtype;
      simp_collect(c, &f, e, 1, 0);
      ts_expr *r = affine_build(a, &f);
      affine_free(&f);
      return r;
    }
    break;
  default: break;
  }
  int n = ts_expr_n_operands(e);
  ts_expr *local[8];
  ts_expr **ops = n <= 8 ? local : ts_malloc(sizeof *ops * (size_t)n);
  if (!ops) return e; /* out of memory (counted): left as it is */
  c->b.depth++;
  for (int i = 0; i < n; i++) ops[i] = simp(c, ts_expr_operand(e, i));
  c->b.depth--;
  ts_expr *r;
  if (ts_expr_is_binary(k)) {
    r = simp_binary(c, e, ops[0], ops[1]);
  } else {
    switch (k) {
    case TS_EXPR_NOT:
      r = ops[0]->dtype.lanes == 1 && ts_dtype_is_bool(ops[0]->dtype)
              ? ts_not(a, ops[0])
              : ts_expr_rebuild(a, e, ops);
      break;
    case TS_EXPR_SELECT:
      if (ops[0]->kind == TS_EXPR_INT && ops[0]->dtype.lanes == 1)
        r = ops[0]->u.int_value ? ops[1] : ops[2];
      else if (expr_same(ops[1], ops[2], 0) && ops[0]->dtype.lanes == 1)
        r = ops[1];
      else
        r = ts_expr_rebuild(a, e, ops);
      break;
    case TS_EXPR_CAST: r = ts_cast(a, e->dtype, ops[0]); break;
    default: r = ts_expr_rebuild(a, e, ops); break;
    }
  }
  if (ops != local) free(ops);
  return r;
}

ts_expr *ts_simplify(ts_arena *a, ts_expr *e, const ts_var_ranges *ranges) {
  if (!e) return NULL;
  simp_ctx c = {a, {ranges, NULL, 0}};
  return simp(&c, e);
}
