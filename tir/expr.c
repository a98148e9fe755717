/*
 * expr.c — expression constructors (with constant folding and simple
 * identities), accessors, and the table of built-in intrinsics.
 */
#include "internal.h"

#include <assert.h>
#include <math.h>
#include <string.h>

/* A node of kind k, or NULL when the arena has no memory for it (the
 * arena is then failed: the constructors return NULL, and take NULL for an
 * operand, giving NULL, so the caller sees the failure at the root). */
static ts_expr *new_expr(ts_arena *a, ts_expr_kind k, ts_dtype t) {
  ts_expr *e = ts_arena_alloc(a, sizeof *e);
  if (!e) return NULL;
  e->kind = (uint8_t)k;
  e->dtype = t;
  return e;
}

/* ---- immediates and vars ---- */

ts_expr *ts_int(ts_arena *a, ts_dtype t, int64_t v) {
  ts_expr *e = new_expr(a, TS_EXPR_INT, t);
  if (e) e->u.int_value = wrap_int(v, t);
  return e;
}
ts_expr *ts_index(ts_arena *a, int64_t v) { return ts_int(a, TS_INDEX, v); }
ts_expr *ts_bool(ts_arena *a, bool v) { return ts_int(a, TS_BOOL, v); }

ts_expr *ts_float(ts_arena *a, ts_dtype t, double v) {
  ts_expr *e = new_expr(a, TS_EXPR_FLOAT, t);
  if (e) e->u.float_value = round_to_dtype(v, t);
  return e;
}

ts_expr *ts_var(ts_arena *a, const char *name, ts_dtype t) {
  ts_expr *e = new_expr(a, TS_EXPR_VAR, t);
  if (!e) return NULL;
  e->u.var.name = ts_arena_strdup(a, name ? name : "v");
  return e->u.var.name ? e : NULL;
}

/* ---- kinds ---- */

static const char *const kind_names[TS_EXPR_KIND_COUNT] = {
    [TS_EXPR_INT] = "int",
    [TS_EXPR_FLOAT] = "float",
    [TS_EXPR_VAR] = "var",
    [TS_EXPR_ADD] = "add",
    [TS_EXPR_SUB] = "sub",
    [TS_EXPR_MUL] = "mul",
    [TS_EXPR_DIV] = "div",
    [TS_EXPR_MOD] = "mod",
    [TS_EXPR_FLOORDIV] = "floordiv",
    [TS_EXPR_FLOORMOD] = "floormod",
    [TS_EXPR_MIN] = "min",
    [TS_EXPR_MAX] = "max",
    [TS_EXPR_EQ] = "eq",
    [TS_EXPR_NE] = "ne",
    [TS_EXPR_LT] = "lt",
    [TS_EXPR_LE] = "le",
    [TS_EXPR_GT] = "gt",
    [TS_EXPR_GE] = "ge",
    [TS_EXPR_AND] = "and",
    [TS_EXPR_OR] = "or",
    [TS_EXPR_NOT] = "not",
    [TS_EXPR_SELECT] = "select",
    [TS_EXPR_CAST] = "cast",
    [TS_EXPR_LOAD] = "load",
    [TS_EXPR_RAMP] = "ramp",
    [TS_EXPR_BROADCAST] = "broadcast",
    [TS_EXPR_CALL] = "call",
    [TS_EXPR_LET] = "let",
    [TS_EXPR_ADDRESS_OF] = "address_of",
};

const char *ts_expr_kind_name(ts_expr_kind k) {
  if ((int)k < 0 || k >= TS_EXPR_KIND_COUNT) return "?";
  return kind_names[k];
}

bool ts_expr_is_binary(ts_expr_kind k) {
  return k >= TS_EXPR_ADD && k <= TS_EXPR_OR && k != TS_EXPR_NOT;
}
bool ts_expr_is_compare(ts_expr_kind k) {
  return k >= TS_EXPR_EQ && k <= TS_EXPR_GE;
}

/* ---- binary operators ---- */

static ts_dtype binary_result(ts_expr_kind k, ts_dtype t) {
  if (ts_expr_is_compare(k) || k == TS_EXPR_AND || k == TS_EXPR_OR)
    return TS_DTYPE(TS_DT_BOOL, 1, t.lanes);
  return t;
}

ts_expr *ts_binary_raw(ts_arena *a, ts_expr_kind k, ts_expr *x, ts_expr *y) {
  assert(ts_expr_is_binary(k));
  if (!x || !y) return NULL;
  ts_expr *e = new_expr(a, k, binary_result(k, x->dtype));
  if (!e) return NULL;
  e->u.op.a = x;
  e->u.op.b = y;
  return e;
}

static int64_t floordiv64(int64_t x, int64_t y) {
  int64_t q = x / y;
  if ((x % y != 0) && ((x < 0) != (y < 0))) q--;
  return q;
}
static int64_t floormod64(int64_t x, int64_t y) {
  return x - floordiv64(x, y) * y;
}

/* Folds two integer immediates; false when the result is undefined. */
static bool fold_int(ts_expr_kind k, int64_t x, int64_t y, int64_t *out) {
  uint64_t ux = (uint64_t)x, uy = (uint64_t)y;
  switch (k) {
  case TS_EXPR_ADD: *out = (int64_t)(ux + uy); return true;
  case TS_EXPR_SUB: *out = (int64_t)(ux - uy); return true;
  case TS_EXPR_MUL: *out = (int64_t)(ux * uy); return true;
  case TS_EXPR_DIV:
  case TS_EXPR_MOD:
  case TS_EXPR_FLOORDIV:
  case TS_EXPR_FLOORMOD:
    if (y == 0 || (x == INT64_MIN && y == -1)) return false;
    *out = k == TS_EXPR_DIV        ? x / y
           : k == TS_EXPR_MOD      ? x % y
           : k == TS_EXPR_FLOORDIV ? floordiv64(x, y)
                                   : floormod64(x, y);
    return true;
  case TS_EXPR_MIN: *out = x < y ? x : y; return true;
  case TS_EXPR_MAX: *out = x > y ? x : y; return true;
  case TS_EXPR_EQ: *out = x == y; return true;
  case TS_EXPR_NE: *out = x != y; return true;
  case TS_EXPR_LT: *out = x < y; return true;
  case TS_EXPR_LE: *out = x <= y; return true;
  case TS_EXPR_GT: *out = x > y; return true;
  case TS_EXPR_GE: *out = x >= y; return true;
  case TS_EXPR_AND: *out = x && y; return true;
  case TS_EXPR_OR: *out = x || y; return true;
  default: return false;
  }
}

static bool fold_uint(ts_expr_kind k, uint64_t x, uint64_t y, int64_t *out) {
  switch (k) {
  case TS_EXPR_DIV:
  case TS_EXPR_FLOORDIV:
    if (y == 0) return false;
    *out = (int64_t)(x / y);
    return true;
  case TS_EXPR_MOD:
  case TS_EXPR_FLOORMOD:
    if (y == 0) return false;
    *out = (int64_t)(x % y);
    return true;
  case TS_EXPR_MIN: *out = (int64_t)(x < y ? x : y); return true;
  case TS_EXPR_MAX: *out = (int64_t)(x > y ? x : y); return true;
  case TS_EXPR_LT: *out = x < y; return true;
  case TS_EXPR_LE: *out = x <= y; return true;
  case TS_EXPR_GT: *out = x > y; return true;
  case TS_EXPR_GE: *out = x >= y; return true;
  default: return fold_int(k, (int64_t)x, (int64_t)y, out);
  }
}

static bool fold_float(ts_expr_kind k, double x, double y, double *out,
                       bool *is_bool) {
  *is_bool = false;
  switch (k) {
  case TS_EXPR_ADD: *out = x + y; return true;
  case TS_EXPR_SUB: *out = x - y; return true;
  case TS_EXPR_MUL: *out = x * y; return true;
  case TS_EXPR_DIV: *out = x / y; return true;
  case TS_EXPR_MIN: *out = fmin(x, y); return true;
  case TS_EXPR_MAX: *out = fmax(x, y); return true;
  default: break;
  }
  *is_bool = true;
  switch (k) {
  case TS_EXPR_EQ: *out = x == y; return true;
  case TS_EXPR_NE: *out = x != y; return true;
  case TS_EXPR_LT: *out = x < y; return true;
  case TS_EXPR_LE: *out = x <= y; return true;
  case TS_EXPR_GT: *out = x > y; return true;
  case TS_EXPR_GE: *out = x >= y; return true;
  default: return false;
  }
}

static bool is_int_const(const ts_expr *e, int64_t v) {
  return e->kind == TS_EXPR_INT && e->dtype.lanes == 1 && e->u.int_value == v;
}
static bool is_float_const(const ts_expr *e, double v) {
  return e->kind == TS_EXPR_FLOAT && e->dtype.lanes == 1 &&
         e->u.float_value == v;
}

ts_expr *ts_binary(ts_arena *a, ts_expr_kind k, ts_expr *x, ts_expr *y) {
  if (!x || !y) return NULL;
  ts_dtype t = x->dtype;
  bool same = ts_dtype_eq(x->dtype, y->dtype);
  if (same && t.lanes == 1) {
    if (x->kind == TS_EXPR_INT && y->kind == TS_EXPR_INT) {
      int64_t r;
      bool ok = t.code == TS_DT_UINT
                    ? fold_uint(k, (uint64_t)x->u.int_value,
                                (uint64_t)y->u.int_value, &r)
                    : fold_int(k, x->u.int_value, y->u.int_value, &r);
      if (ok) return ts_int(a, binary_result(k, t), r);
    }
    if (x->kind == TS_EXPR_FLOAT && y->kind == TS_EXPR_FLOAT) {
      double r;
      bool is_bool;
      if (fold_float(k, x->u.float_value, y->u.float_value, &r, &is_bool))
        return is_bool ? ts_bool(a, r != 0) : ts_float(a, t, r);
    }
  }
  if (same && ts_dtype_is_int(t)) {
    switch (k) {
    case TS_EXPR_ADD:
      if (is_int_const(y, 0)) return x;
      if (is_int_const(x, 0)) return y;
      break;
    case TS_EXPR_SUB:
      if (is_int_const(y, 0)) return x;
      break;
    case TS_EXPR_MUL:
      if (is_int_const(y, 1)) return x;
      if (is_int_const(x, 1)) return y;
      if (is_int_const(y, 0)) return y;
      if (is_int_const(x, 0)) return x;
      break;
    case TS_EXPR_DIV:
    case TS_EXPR_FLOORDIV:
      if (is_int_const(y, 1)) return x;
      if (is_int_const(x, 0) && y->kind == TS_EXPR_INT && y->u.int_value != 0)
        return x;
      break;
    case TS_EXPR_MOD:
    case TS_EXPR_FLOORMOD:
      if (is_int_const(y, 1)) return ts_int(a, t, 0);
      break;
    default: break;
    }
  }
  if (same && ts_dtype_is_float(t)) {
    if (k == TS_EXPR_MUL && is_float_const(y, 1.0)) return x;
    if (k == TS_EXPR_MUL && is_float_const(x, 1.0)) return y;
    if (k == TS_EXPR_DIV && is_float_const(y, 1.0)) return x;
  }
  if (same && ts_dtype_is_bool(t) && t.lanes == 1) {
    if (k == TS_EXPR_AND) {
      if (is_int_const(x, 1)) return y;
      if (is_int_const(y, 1)) return x;
      if (is_int_const(x, 0)) return x;
      if (is_int_const(y, 0)) return y;
    }
    if (k == TS_EXPR_OR) {
      if (is_int_const(x, 0)) return y;
      if (is_int_const(y, 0)) return x;
      if (is_int_const(x, 1)) return x;
      if (is_int_const(y, 1)) return y;
    }
  }
  return ts_binary_raw(a, k, x, y);
}

#define BINARY(fn, K)                                                          \
  ts_expr *fn(ts_arena *a, ts_expr *x, ts_expr *y) {                           \
    return ts_binary(a, K, x, y);                                              \
  }
BINARY(ts_add, TS_EXPR_ADD)
BINARY(ts_sub, TS_EXPR_SUB)
BINARY(ts_mul, TS_EXPR_MUL)
BINARY(ts_div, TS_EXPR_DIV)
BINARY(ts_mod, TS_EXPR_MOD)
BINARY(ts_floordiv, TS_EXPR_FLOORDIV)
BINARY(ts_floormod, TS_EXPR_FLOORMOD)
BINARY(ts_min, TS_EXPR_MIN)
BINARY(ts_max, TS_EXPR_MAX)
BINARY(ts_eq, TS_EXPR_EQ)
BINARY(ts_ne, TS_EXPR_NE)
BINARY(ts_lt, TS_EXPR_LT)
BINARY(ts_le, TS_EXPR_LE)
BINARY(ts_gt, TS_EXPR_GT)
BINARY(ts_ge, TS_EXPR_GE)
BINARY(ts_and, TS_EXPR_AND)
BINARY(ts_or, TS_EXPR_OR)
#undef BINARY

/* ---- other operators ---- */

ts_expr *ts_not_raw(ts_arena *a, ts_expr *x) {
  if (!x) return NULL;
  ts_expr *e =
      new_expr(a, TS_EXPR_NOT, TS_DTYPE(TS_DT_BOOL, 1, x->dtype.lanes));
  if (!e) return NULL;
  e->u.op.a = x;
  return e;
}

ts_expr *ts_not(ts_arena *a, ts_expr *x) {
  if (!x) return NULL;
  if (x->kind == TS_EXPR_INT && x->dtype.lanes == 1 &&
      ts_dtype_is_bool(x->dtype))
    return ts_bool(a, !x->u.int_value);
  if (x->kind == TS_EXPR_NOT) return x->u.op.a;
  return ts_not_raw(a, x);
}

ts_expr *ts_select_raw(ts_arena *a, ts_expr *c, ts_expr *t, ts_expr *f) {
  if (!c || !t || !f) return NULL;
  ts_expr *e = new_expr(a, TS_EXPR_SELECT, t->dtype);
  if (!e) return NULL;
  e->u.op.a = c;
  e->u.op.b = t;
  e->u.op.c = f;
  return e;
}

ts_expr *ts_select(ts_arena *a, ts_expr *c, ts_expr *t, ts_expr *f) {
  if (!c || !t || !f) return NULL;
  if (c->kind == TS_EXPR_INT && c->dtype.lanes == 1)
    return c->u.int_value ? t : f;
  return ts_select_raw(a, c, t, f);
}

ts_expr *ts_cast_raw(ts_arena *a, ts_dtype t, ts_expr *x) {
  if (!x) return NULL;
  ts_expr *e = new_expr(a, TS_EXPR_CAST, t);
  if (!e) return NULL;
  e->u.op.a = x;
  return e;
}

ts_expr *ts_cast(ts_arena *a, ts_dtype t, ts_expr *x) {
  if (!x) return NULL;
  if (ts_dtype_eq(t, x->dtype)) return x;
  if (t.lanes == 1 && x->dtype.lanes == 1) {
    if (x->kind == TS_EXPR_INT) {
      int64_t v = x->u.int_value;
      if (ts_dtype_is_float(t)) {
        double d =
            x->dtype.code == TS_DT_UINT ? (double)(uint64_t)v : (double)v;
        return ts_float(a, t, d);
      }
      if (ts_dtype_is_int(t) || ts_dtype_is_bool(t)) return ts_int(a, t, v);
    } else if (x->kind == TS_EXPR_FLOAT) {
      double v = x->u.float_value;
      if (ts_dtype_is_float(t)) return ts_float(a, t, v);
      if (ts_dtype_is_bool(t)) return ts_bool(a, v != 0);
      if (ts_dtype_is_int(t) && isfinite(v) && v > -9.2e18 && v < 9.2e18)
        return ts_int(a, t, (int64_t)v);
    }
  }
  return ts_cast_raw(a, t, x);
}

static bool any_null(ts_expr *const *es, int n) {
  for (int i = 0; i < n; i++)
    if (!es[i]) return true;
  return false;
}

static int max_lanes(ts_expr *const *es, int n) {
  int lanes = 1;
  for (int i = 0; i < n; i++)
    if (es[i]->dtype.lanes > lanes) lanes = es[i]->dtype.lanes;
  return lanes;
}

ts_expr *ts_load(ts_arena *a, ts_buffer *b, ts_expr *const *indices, int n) {
  if (!b || any_null(indices, n)) return NULL;
  ts_expr *e = new_expr(a, TS_EXPR_LOAD,
                        ts_dtype_with_lanes(b->dtype, max_lanes(indices, n)));
  if (!e) return NULL;
  e->u.load.buffer = b;
  e->u.load.indices = arena_copy_ptrs(a, (void *const *)indices, n);
  e->u.load.n_indices = n;
  return n && !e->u.load.indices ? NULL : e;
}

ts_expr *ts_address_of(ts_arena *a, ts_buffer *b, ts_expr *const *indices,
                       int n) {
  if (!b || any_null(indices, n)) return NULL;
  ts_expr *e = new_expr(a, TS_EXPR_ADDRESS_OF, TS_HANDLE);
  if (!e) return NULL;
  e->u.load.buffer = b;
  e->u.load.indices = arena_copy_ptrs(a, (void *const *)indices, n);
  e->u.load.n_indices = n;
  return n && !e->u.load.indices ? NULL : e;
}

ts_expr *ts_ramp(ts_arena *a, ts_expr *base, ts_expr *stride, int lanes) {
  if (!base || !stride) return NULL;
  ts_expr *e =
      new_expr(a, TS_EXPR_RAMP, ts_dtype_with_lanes(base->dtype, lanes));
  if (!e) return NULL;
  e->u.op.a = base;
  e->u.op.b = stride;
  return e;
}

ts_expr *ts_broadcast(ts_arena *a, ts_expr *value, int lanes) {
  if (!value) return NULL;
  ts_expr *e =
      new_expr(a, TS_EXPR_BROADCAST, ts_dtype_with_lanes(value->dtype, lanes));
  if (!e) return NULL;
  e->u.op.a = value;
  return e;
}

ts_expr *ts_call(ts_arena *a, ts_dtype t, const char *name,
                 ts_expr *const *args, int n) {
  if (any_null(args, n)) return NULL;
  ts_expr *e = new_expr(a, TS_EXPR_CALL, t);
  if (!e) return NULL;
  e->u.call.name = ts_arena_strdup(a, name);
  e->u.call.args = arena_copy_ptrs(a, (void *const *)args, n);
  e->u.call.n_args = n;
  return (name && !e->u.call.name) || (n && !e->u.call.args) ? NULL : e;
}

ts_expr *ts_let(ts_arena *a, ts_expr *var, ts_expr *value, ts_expr *body) {
  if (!var || !value || !body) return NULL;
  ts_expr *e = new_expr(a, TS_EXPR_LET, body->dtype);
  if (!e) return NULL;
  e->u.let.var = var;
  e->u.let.value = value;
  e->u.let.body = body;
  return e;
}

/* ---- inspection ---- */

ts_expr_kind ts_expr_kind_of(const ts_expr *e) { return (ts_expr_kind)e->kind; }
/* An invalid dtype for NULL (a constructor that ran out of memory). */
ts_dtype ts_expr_dtype(const ts_expr *e) {
  return e ? e->dtype : (ts_dtype){0};
}

int ts_expr_n_operands(const ts_expr *e) {
  switch (e->kind) {
  case TS_EXPR_INT:
  case TS_EXPR_FLOAT:
  case TS_EXPR_VAR: return 0;
  case TS_EXPR_NOT:
  case TS_EXPR_CAST:
  case TS_EXPR_BROADCAST: return 1;
  case TS_EXPR_SELECT: return 3;
  case TS_EXPR_RAMP:
  case TS_EXPR_LET: return 2;
  case TS_EXPR_LOAD:
  case TS_EXPR_ADDRESS_OF: return e->u.load.n_indices;
  case TS_EXPR_CALL: return e->u.call.n_args;
  default: return 2; /* binary */
  }
}

ts_expr *ts_expr_operand(const ts_expr *e, int i) {
  assert(i >= 0 && i < ts_expr_n_operands(e));
  switch (e->kind) {
  case TS_EXPR_LOAD:
  case TS_EXPR_ADDRESS_OF: return e->u.load.indices[i];
  case TS_EXPR_CALL: return e->u.call.args[i];
  case TS_EXPR_LET: return i == 0 ? e->u.let.value : e->u.let.body;
  default: return i == 0 ? e->u.op.a : i == 1 ? e->u.op.b : e->u.op.c;
  }
}

int64_t ts_expr_int_value(const ts_expr *e) {
  assert(e->kind == TS_EXPR_INT);
  return e->u.int_value;
}
double ts_expr_float_value(const ts_expr *e) {
  assert(e->kind == TS_EXPR_FLOAT);
  return e->u.float_value;
}
const char *ts_var_name(const ts_expr *e) {
  assert(e->kind == TS_EXPR_VAR);
  return e->u.var.name;
}
ts_buffer *ts_expr_buffer(const ts_expr *e) {
  assert(e->kind == TS_EXPR_LOAD || e->kind == TS_EXPR_ADDRESS_OF);
  return e->u.load.buffer;
}
const char *ts_expr_call_name(const ts_expr *e) {
  assert(e->kind == TS_EXPR_CALL);
  return e->u.call.name;
}
ts_expr *ts_expr_let_var(const ts_expr *e) {
  assert(e->kind == TS_EXPR_LET);
  return e->u.let.var;
}

bool ts_expr_is_const_int(const ts_expr *e, int64_t *v) {
  if (!e || e->kind != TS_EXPR_INT || e->dtype.lanes != 1) return false;
  if (v) *v = e->u.int_value;
  return true;
}

ts_expr *ts_expr_rebuild(ts_arena *a, const ts_expr *e, ts_expr *const *ops) {
  int n = ts_expr_n_operands(e);
  bool changed = false;
  for (int i = 0; i < n; i++)
    if (ops[i] != ts_expr_operand(e, i)) changed = true;
  if (!changed) return (ts_expr *)e;
  switch (e->kind) {
  case TS_EXPR_NOT: return ts_not_raw(a, ops[0]);
  case TS_EXPR_CAST: return ts_cast_raw(a, e->dtype, ops[0]);
  case TS_EXPR_BROADCAST: return ts_broadcast(a, ops[0], e->dtype.lanes);
  case TS_EXPR_SELECT: return ts_select_raw(a, ops[0], ops[1], ops[2]);
  case TS_EXPR_RAMP: return ts_ramp(a, ops[0], ops[1], e->dtype.lanes);
  case TS_EXPR_LET: return ts_let(a, e->u.let.var, ops[0], ops[1]);
  case TS_EXPR_LOAD: return ts_load(a, e->u.load.buffer, ops, n);
  case TS_EXPR_ADDRESS_OF: return ts_address_of(a, e->u.load.buffer, ops, n);
  case TS_EXPR_CALL: return ts_call(a, e->dtype, e->u.call.name, ops, n);
  default: return ts_binary_raw(a, (ts_expr_kind)e->kind, ops[0], ops[1]);
  }
}

/* ---- intrinsics ---- */

static const ts_intrinsic_info intrinsics[] = {
    {"exp", 1, TS_INTRIN_SAME_AS_ARG0, true},
    {"exp2", 1, TS_INTRIN_SAME_AS_ARG0, true},
    {"log", 1, TS_INTRIN_SAME_AS_ARG0, true},
    {"log2", 1, TS_INTRIN_SAME_AS_ARG0, true},
    {"log10", 1, TS_INTRIN_SAME_AS_ARG0, true},
    {"sqrt", 1, TS_INTRIN_SAME_AS_ARG0, true},
    {"rsqrt", 1, TS_INTRIN_SAME_AS_ARG0, true},
    {"tanh", 1, TS_INTRIN_SAME_AS_ARG0, true},
    {"erf", 1, TS_INTRIN_SAME_AS_ARG0, true},
    {"sigmoid", 1, TS_INTRIN_SAME_AS_ARG0, true},
    {"sin", 1, TS_INTRIN_SAME_AS_ARG0, true},
    {"cos", 1, TS_INTRIN_SAME_AS_ARG0, true},
    {"floor", 1, TS_INTRIN_SAME_AS_ARG0, true},
    {"ceil", 1, TS_INTRIN_SAME_AS_ARG0, true},
    {"round", 1, TS_INTRIN_SAME_AS_ARG0, true},
    {"trunc", 1, TS_INTRIN_SAME_AS_ARG0, true},
    {"pow", 2, TS_INTRIN_SAME_AS_ARG0, true},
    {"fma", 3, TS_INTRIN_SAME_AS_ARG0, true},
    {"abs", 1, TS_INTRIN_SAME_AS_ARG0, false},
    {"if_then_else", 3, TS_INTRIN_SAME_AS_ARG1, false},
};

const ts_intrinsic_info *ts_intrinsic_lookup(const char *name) {
  for (size_t i = 0; i < sizeof intrinsics / sizeof intrinsics[0]; i++)
    if (strcmp(intrinsics[i].name, name) == 0) return &intrinsics[i];
  return NULL;
}
