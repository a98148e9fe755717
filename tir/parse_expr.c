/*
 * parse_expr.c — the expressions of the text parser: literals, calls,
 * builtins, intrinsics, unary and binary operators by precedence, each
 * checked for types as it is built.
 */
#include "parse_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

static bool is_numeric(ts_dtype t) {
  return ts_dtype_is_int(t) || ts_dtype_is_float(t);
}
bool tp_is_int_scalar(ts_dtype t) { return ts_dtype_is_int(t) && t.lanes == 1; }

/* Type rule of a binary operator; `op` names it in messages. */
static bool check_binary(tp_parser *p, const tp_token *at, ts_expr_kind k,
                         const char *op, ts_expr *x, ts_expr *y) {
  char b1[32], b2[32];
  if (!ts_dtype_eq(x->dtype, y->dtype))
    return FAIL(p, at, "operands of '%s' have different types: %s and %s", op,
                tp_dtype_name(x->dtype, b1), tp_dtype_name(y->dtype, b2));
  if (k == TS_EXPR_AND || k == TS_EXPR_OR) {
    if (!ts_dtype_is_bool(x->dtype))
      return FAIL(p, at, "operands of '%s' must be bool, not %s", op,
                  tp_dtype_name(x->dtype, b1));
  } else if (!ts_expr_is_compare(k) && !is_numeric(x->dtype)) {
    return FAIL(p, at, "operands of '%s' must be numbers, not %s", op,
                tp_dtype_name(x->dtype, b1));
  }
  return true;
}

static ts_expr *binary(tp_parser *p, const tp_token *at, ts_expr_kind k,
                       const char *op, ts_expr *x, ts_expr *y) {
  if (!check_binary(p, at, k, op, x, y)) return NULL;
  return ts_binary_raw(p->a, k, x, y);
}

/* Whether integer value (negated when neg) of magnitude m fits dtype t. */
static bool int_fits(ts_dtype t, bool neg, uint64_t m) {
  if (t.code == TS_DT_BOOL) return !neg && m <= 1;
  if (t.code == TS_DT_UINT || t.code == TS_DT_HANDLE)
    return neg ? m == 0 : t.bits >= 64 || m < ((uint64_t)1 << t.bits);
  uint64_t lim = (uint64_t)1 << (t.bits - 1); /* |min| */
  return neg ? m <= lim : m < lim;
}

/* typed-literal = DTYPE "(" ["-"] (INT | FLOAT | "inf" | "nan") ")" */
static ts_expr *parse_typed_literal(tp_parser *p, const tp_token *dt,
                                    ts_dtype t) {
  char b1[32], buf[64];
  tp_next(p); /* "(" */
  bool neg = tp_accept(p, "-");
  tp_token *v = tp_peek(p);
  ts_expr *e = NULL;
  if (ts_dtype_is_float(t)) {
    char text[416];
    if (v->kind == TK_INT || v->kind == TK_FLOAT)
      snprintf(text, sizeof text, "%s%.*s", neg ? "-" : "", v->len, v->loc);
    else if (tp_is(v, "inf") || tp_is(v, "nan"))
      snprintf(text, sizeof text, "%s%.*s", neg ? "-" : "", v->len, v->loc);
    else
      return FAIL_NULL(p, v,
                       "expected a number, inf or nan in %s(...) but found %s",
                       tp_dtype_name(t, b1), tp_describe(v, buf));
    tp_next(p);
    errno = 0;
    double d = strtod(text, NULL);
    if (tp_is(v, "nan")) d = NAN; /* one NaN: the printer writes "nan" */
    if ((errno == ERANGE && isinf(d)) ||
        (isfinite(d) && isinf(round_to_dtype(d, t))))
      return FAIL_NULL(p, v, "literal %s is out of range for %s", text,
                       tp_dtype_name(t, b1));
    e = ts_float(p->a, t, d);
  } else if (ts_dtype_is_int(t) || ts_dtype_is_bool(t) ||
             ts_dtype_is_handle(t)) {
    uint64_t m;
    if (v->kind != TK_INT)
      return FAIL_NULL(p, v, "expected an integer in %s(...) but found %s",
                       tp_dtype_name(t, b1), tp_describe(v, buf));
    if (!tp_int_value(v, UINT64_MAX, &m) || !int_fits(t, neg, m))
      return FAIL_NULL(p, v, "literal %s%.*s is out of range for %s",
                       neg ? "-" : "", v->len, v->loc, tp_dtype_name(t, b1));
    tp_next(p);
    e = ts_int(p->a, t, neg ? (int64_t)(0 - m) : (int64_t)m);
  } else {
    return FAIL_NULL(p, dt, "no literals of type %s", tp_dtype_name(t, b1));
  }
  if (!tp_expect(p, ")", "to close the literal")) return NULL;
  return e;
}

/* args = [expr ("," expr)*] ")"  (after the "(") */
static bool parse_args(tp_parser *p, tp_vec *out, const char *what) {
  char ctx[96];
  snprintf(ctx, sizeof ctx, "after the arguments of %s", what);
  if (tp_accept(p, ")")) return true;
  for (;;) {
    if (out->n == MAX_LIST)
      return FAIL(p, tp_peek(p), "more than %d arguments to %s", MAX_LIST,
                  what);
    ts_expr *e = tp_parse_expr(p);
    if (!e) return false;
    tp_vec_push(p, out, e);
    if (tp_accept(p, ",")) continue;
    return tp_expect_list_end(p, ")", ctx);
  }
}

/* A fixed number of arguments. */
static bool parse_n_args(tp_parser *p, const tp_token *name, tp_vec *out,
                         int n) {
  char what[64];
  snprintf(what, sizeof what, "%.*s", name->len, name->loc);
  if (!tp_expect(p, "(", "after the function name")) return false;
  if (!parse_args(p, out, what)) return false;
  if (out->n != n)
    return FAIL(p, name, "%s takes %d argument%s but got %d", what, n,
                n == 1 ? "" : "s", out->n);
  return true;
}

/* lanes = INT in 1..65535 */
static bool parse_lanes(tp_parser *p, int *lanes) {
  tp_token *t = tp_peek(p);
  uint64_t v;
  char buf[64];
  if (t->kind != TK_INT)
    return FAIL(p, t, "expected a lane count but found %s",
                tp_describe(t, buf));
  if (!tp_int_value(t, UINT64_MAX, &v) || v < 1 || v > MAX_LANES)
    return FAIL(p, t, "lane count must be in 1..%d", MAX_LANES);
  tp_next(p);
  *lanes = (int)v;
  return true;
}

/* dtype = IDENT naming a data type ("float32", "int8x4", ...) */
bool tp_parse_dtype(tp_parser *p, ts_dtype *out) {
  tp_token *t = tp_peek(p);
  char buf[64];
  if (t->kind != TK_IDENT)
    return FAIL(p, t, "expected a dtype but found %s", tp_describe(t, buf));
  if (ts_dtype_parse(t->loc, (size_t)t->len, out) != TS_OK)
    return FAIL(p, t, "unknown dtype '%.*s'", t->len, t->loc);
  tp_next(p);
  return true;
}

/* indices = "[" [expr ("," expr)*] "]", one integer index per dimension */
bool tp_parse_indices(tp_parser *p, const tp_token *name, ts_buffer *b,
                      tp_vec *out) {
  char b1[32];
  if (!tp_expect(p, "[", "after the buffer name")) return false;
  if (!tp_accept(p, "]")) {
    for (;;) {
      tp_token *at = tp_peek(p);
      if (out->n == b->ndim)
        return FAIL(p, at, "too many indices for buffer '%s' of %d dimension%s",
                    b->name, b->ndim, b->ndim == 1 ? "" : "s");
      ts_expr *e = tp_parse_expr(p);
      if (!e) return false;
      if (!ts_dtype_is_int(e->dtype))
        return FAIL(p, at, "index of '%s' must be an integer, not %s", b->name,
                    tp_dtype_name(e->dtype, b1));
      tp_vec_push(p, out, e);
      if (tp_accept(p, ",")) continue;
      if (!tp_expect_list_end(p, "]", "after the indices")) return false;
      break;
    }
  }
  if (out->n != b->ndim)
    return FAIL(p, name, "buffer '%s' has %d dimension%s but got %d index%s",
                b->name, b->ndim, b->ndim == 1 ? "" : "s", out->n,
                out->n == 1 ? "" : "es");
  return true;
}

/* A buffer named by token t, or NULL with an error. */
ts_buffer *tp_find_buffer(tp_parser *p, const tp_token *t) {
  tp_sym *s = tp_lookup(p, t);
  if (!s) return FAIL_NULL(p, t, "undefined buffer '%.*s'", t->len, t->loc);
  if (!s->buffer)
    return FAIL_NULL(p, t, "'%.*s' is a variable, not a buffer", t->len,
                     t->loc);
  return s->buffer;
}

/* intrinsic-call = NAME "(" [expr ("," expr)*] ")" (a built-in intrinsic) */
static ts_expr *parse_intrinsic(tp_parser *p, const tp_token *name,
                                const ts_intrinsic_info *info) {
  char b1[32];
  tp_vec args = {0};
  if (!tp_expect(p, "(", "after the intrinsic name")) return NULL;
  if (!parse_args(p, &args, info->name)) return NULL;
  ts_expr **a = (ts_expr **)args.items;
  if (info->n_args >= 0 && args.n != info->n_args)
    return FAIL_NULL(p, name, "%s takes %d argument%s but got %d", info->name,
                     info->n_args, info->n_args == 1 ? "" : "s", args.n);
  if (info->rule == TS_INTRIN_EXPLICIT)
    return FAIL_NULL(
        p, name, "%s needs an explicit result type: call<DTYPE>(\"%s\", ...)",
        info->name, info->name);
  if (args.n < 1) return FAIL_NULL(p, name, "%s needs an argument", info->name);
  for (int i = 0; i < args.n; i++)
    if (info->float_only && !ts_dtype_is_float(a[i]->dtype))
      return FAIL_NULL(p, name, "%s needs floating-point arguments, not %s",
                       info->name, tp_dtype_name(a[i]->dtype, b1));
  ts_dtype t = a[0]->dtype;
  if (info->rule == TS_INTRIN_SAME_AS_ARG1) {
    char b2[32];
    if (args.n != 3)
      return FAIL_NULL(p, name, "%s takes 3 arguments", info->name);
    if (!ts_dtype_is_bool(a[0]->dtype))
      return FAIL_NULL(p, name, "condition of %s must be bool, not %s",
                       info->name, tp_dtype_name(a[0]->dtype, b1));
    if (!ts_dtype_eq(a[1]->dtype, a[2]->dtype))
      return FAIL_NULL(
          p, name, "branches of %s have different types: %s and %s", info->name,
          tp_dtype_name(a[1]->dtype, b1), tp_dtype_name(a[2]->dtype, b2));
    t = a[1]->dtype;
  }
  return ts_call(p->a, t, info->name, a, args.n);
}

/* call = "call" "<" DTYPE ">" "(" STRING ("," expr)* ")" */
static ts_expr *parse_call(tp_parser *p) {
  ts_dtype t;
  char buf[64];
  if (!tp_expect(p, "<", "after 'call'") || !tp_parse_dtype(p, &t) ||
      !tp_expect(p, ">", "after the result type of call") ||
      !tp_expect(p, "(", "after call<...>"))
    return NULL;
  tp_token *nt = tp_peek(p);
  if (nt->kind != TK_STRING)
    return FAIL_NULL(p, nt,
                     "expected the quoted name of the called function but "
                     "found %s",
                     tp_describe(nt, buf));
  tp_next(p);
  const char *name = tp_string_value(p, nt);
  if (!name) return NULL;
  if (!name[0]) return FAIL_NULL(p, nt, "called function name is empty");
  tp_vec args = {0};
  if (!tp_accept(p, ")")) {
    if (!tp_expect(p, ",", "after the called function's name")) return NULL;
    if (!parse_args(p, &args, name)) return NULL;
    if (args.n == 0)
      return FAIL_NULL(p, tp_peek_at(p, -1), "expected an argument after ','");
  }
  return ts_call(p->a, t, name, (ts_expr **)args.items, args.n);
}

/* builtin = ("floordiv" | "floormod" | "min" | "max") "(" expr "," expr ")"
 *         | "select" "(" expr "," expr "," expr ")"
 *         | "cast" "(" DTYPE "," expr ")"
 *         | "ramp" "(" expr "," expr "," LANES ")"
 *         | "broadcast" "(" expr "," LANES ")" */
static ts_expr *parse_builtin(tp_parser *p, const tp_token *name) {
  char b1[32], b2[32];
  static const struct {
    const char *name;
    ts_expr_kind kind;
  } binops[] = {{"floordiv", TS_EXPR_FLOORDIV},
                {"floormod", TS_EXPR_FLOORMOD},
                {"min", TS_EXPR_MIN},
                {"max", TS_EXPR_MAX}};
  for (size_t i = 0; i < sizeof binops / sizeof binops[0]; i++)
    if (tp_is(name, binops[i].name)) {
      tp_vec args = {0};
      if (!parse_n_args(p, name, &args, 2)) return NULL;
      return binary(p, name, binops[i].kind, binops[i].name, args.items[0],
                    args.items[1]);
    }
  if (tp_is(name, "select")) {
    tp_vec args = {0};
    if (!parse_n_args(p, name, &args, 3)) return NULL;
    ts_expr *c = args.items[0], *t = args.items[1], *f = args.items[2];
    if (!ts_dtype_is_bool(c->dtype) ||
        (c->dtype.lanes != 1 && c->dtype.lanes != t->dtype.lanes))
      return FAIL_NULL(p, name,
                       "condition of select must be bool (scalar or with "
                       "the lanes of the values), not %s",
                       tp_dtype_name(c->dtype, b1));
    if (!ts_dtype_eq(t->dtype, f->dtype))
      return FAIL_NULL(
          p, name, "branches of select have different types: %s and %s",
          tp_dtype_name(t->dtype, b1), tp_dtype_name(f->dtype, b2));
    return ts_select_raw(p->a, c, t, f);
  }
  if (tp_is(name, "cast")) {
    ts_dtype t;
    if (!tp_expect(p, "(", "after 'cast'") || !tp_parse_dtype(p, &t) ||
        !tp_expect(p, ",", "after the target type of cast"))
      return NULL;
    ts_expr *x = tp_parse_expr(p);
    if (!x || !tp_expect(p, ")", "after the operand of cast")) return NULL;
    if (x->dtype.lanes != t.lanes)
      return FAIL_NULL(p, name,
                       "cast from %s to %s changes the number of lanes",
                       tp_dtype_name(x->dtype, b1), tp_dtype_name(t, b2));
    return ts_cast_raw(p->a, t, x);
  }
  if (tp_is(name, "ramp")) {
    int lanes;
    if (!tp_expect(p, "(", "after 'ramp'")) return NULL;
    ts_expr *base = tp_parse_expr(p);
    if (!base || !tp_expect(p, ",", "after the base of ramp")) return NULL;
    ts_expr *stride = tp_parse_expr(p);
    if (!stride || !tp_expect(p, ",", "after the stride of ramp") ||
        !parse_lanes(p, &lanes) ||
        !tp_expect(p, ")", "after the lanes of ramp"))
      return NULL;
    if (!tp_is_int_scalar(base->dtype) ||
        !ts_dtype_eq(base->dtype, stride->dtype))
      return FAIL_NULL(p, name,
                       "ramp needs scalar integer base and stride of one "
                       "type, not %s and %s",
                       tp_dtype_name(base->dtype, b1),
                       tp_dtype_name(stride->dtype, b2));
    return ts_ramp(p->a, base, stride, lanes);
  }
  /* broadcast */
  int lanes;
  if (!tp_expect(p, "(", "after 'broadcast'")) return NULL;
  ts_expr *v = tp_parse_expr(p);
  if (!v || !tp_expect(p, ",", "after the value of broadcast") ||
      !parse_lanes(p, &lanes) ||
      !tp_expect(p, ")", "after the lanes of broadcast"))
    return NULL;
  if (v->dtype.lanes != 1)
    return FAIL_NULL(p, name, "broadcast needs a scalar value, not %s",
                     tp_dtype_name(v->dtype, b1));
  return ts_broadcast(p->a, v, lanes);
}

/* let-expr = "(" "let" IDENT "=" expr "in" expr ")"  (after the "(") */
static ts_expr *parse_let_expr(tp_parser *p) {
  tp_token *nt;
  tp_next(p); /* let */
  if (!tp_expect_ident(p, "a variable name after 'let'", &nt)) return NULL;
  char *name = tp_new_name(p, nt, "variable");
  if (!name || !tp_expect(p, "=", "after the let variable")) return NULL;
  ts_expr *value = tp_parse_expr(p);
  if (!value || !tp_expect(p, "in", "after the value of let")) return NULL;
  int saved = tp_open_scope(p);
  ts_expr *var = ts_var(p->a, name, value->dtype);
  ts_expr *body = NULL;
  if (tp_declare(p, nt, name, var, NULL)) body = tp_parse_expr(p);
  tp_close_scope(p, saved);
  if (!body || !tp_expect(p, ")", "to close the let expression")) return NULL;
  return ts_let(p->a, var, value, body);
}

/* primary = INT | FLOAT-with-dtype | "true" | "false" | typed-literal
 *         | "(" expr ")" | let-expr | "&" IDENT indices | IDENT indices
 *         | IDENT | builtin | intrinsic-call | call */
static ts_expr *parse_primary(tp_parser *p) {
  tp_token *t = tp_peek(p);
  char buf[64];
  if (t->kind == TK_INT) {
    uint64_t m;
    if (!tp_int_value(t, INT64_MAX, &m))
      return FAIL_NULL(p, t, "integer literal %.*s does not fit int64", t->len,
                       t->loc);
    tp_next(p);
    return ts_int(p->a, TS_INDEX, (int64_t)m);
  }
  if (t->kind == TK_FLOAT)
    return FAIL_NULL(
        p, t, "floating-point literal %.*s needs a dtype, e.g. float32(%.*s)",
        t->len, t->loc, t->len, t->loc);
  if (tp_accept(p, "(")) {
    if (tp_is(tp_peek(p), "let")) return parse_let_expr(p);
    ts_expr *e = tp_parse_expr(p);
    if (!e || !tp_expect(p, ")", "to close the parenthesized expression"))
      return NULL;
    return e;
  }
  if (tp_accept(p, "&")) {
    tp_token *nt;
    if (!tp_expect_ident(p, "a buffer name after '&'", &nt)) return NULL;
    ts_buffer *b = tp_find_buffer(p, nt);
    tp_vec idx = {0};
    if (!b || !tp_parse_indices(p, nt, b, &idx)) return NULL;
    return ts_address_of(p->a, b, (ts_expr **)idx.items, idx.n);
  }
  if (t->kind != TK_IDENT)
    return FAIL_NULL(p, t, "expected an expression but found %s",
                     tp_describe(t, buf));
  tp_next(p);
  if (tp_is(t, "true") || tp_is(t, "false"))
    return ts_bool(p->a, tp_is(t, "true"));
  if (tp_is(t, "call")) return parse_call(p);
  bool call = tp_is(tp_peek(p), "(");
  if (tp_is(t, "floordiv") || tp_is(t, "floormod") || tp_is(t, "min") ||
      tp_is(t, "max") || tp_is(t, "select") || tp_is(t, "cast") ||
      tp_is(t, "ramp") || tp_is(t, "broadcast"))
    return parse_builtin(p, t);
  char name[MAX_IDENT + 1];
  snprintf(name, sizeof name, "%.*s", t->len, t->loc);
  const ts_intrinsic_info *info = ts_intrinsic_lookup(name);
  if (info) return parse_intrinsic(p, t, info);
  ts_dtype dt;
  if (ts_dtype_parse(t->loc, (size_t)t->len, &dt) == TS_OK) {
    if (!call)
      return FAIL_NULL(p, t,
                       "dtype '%s' used as a value; write %s(0) for a literal "
                       "or cast(%s, x) for a conversion",
                       name, name, name);
    return parse_typed_literal(p, t, dt);
  }
  if (ts_text_name_is_reserved(name))
    return FAIL_NULL(p, t, "unexpected keyword '%s' in an expression", name);
  tp_sym *s = tp_lookup(p, t);
  if (!s) {
    if (call) return FAIL_NULL(p, t, "unknown function '%s'", name);
    return FAIL_NULL(p, t, "undefined variable or buffer '%s'", name);
  }
  if (s->var) {
    if (tp_is(tp_peek(p), "["))
      return FAIL_NULL(p, t, "'%s' is a variable, not a buffer", name);
    if (call)
      return FAIL_NULL(p, t, "'%s' is a variable, not a function", name);
    return s->var;
  }
  if (!tp_is(tp_peek(p), "["))
    return FAIL_NULL(p, t, "buffer '%s' used as a value; index it: %s[...]",
                     name, name);
  tp_vec idx = {0};
  if (!tp_parse_indices(p, t, s->buffer, &idx)) return NULL;
  return ts_load(p->a, s->buffer, (ts_expr **)idx.items, idx.n);
}

/* The literal -x for an immediate x, or NULL with an error. */
static ts_expr *negate_literal(tp_parser *p, const tp_token *at, ts_expr *x) {
  char b1[32];
  ts_dtype t = x->dtype;
  if (x->kind == TS_EXPR_FLOAT) return ts_float(p->a, t, -x->u.float_value);
  int64_t v = x->u.int_value;
  if (t.code == TS_DT_UINT && v == 0) return ts_int(p->a, t, 0);
  int64_t lowest = t.bits >= 64 ? INT64_MIN : -((int64_t)1 << (t.bits - 1));
  if (t.code != TS_DT_INT || v == lowest)
    return FAIL_NULL(p, at, "negated literal is out of range for %s",
                     tp_dtype_name(t, b1));
  return ts_int(p->a, t, -v);
}

/* unary = ("!" | "-") unary | primary
 * A "-" before a literal makes a negative literal; before anything else it
 * means 0 - x. */
static ts_expr *parse_unary(tp_parser *p) {
  tp_token *t = tp_peek(p);
  char b1[32];
  if (tp_is(t, "-") && tp_peek_at(p, 1)->kind == TK_INT) {
    tp_token *v = tp_peek_at(p, 1);
    uint64_t m;
    if (!tp_int_value(v, (uint64_t)INT64_MAX + 1, &m))
      return FAIL_NULL(p, v, "integer literal -%.*s does not fit int64", v->len,
                       v->loc);
    p->pos += 2;
    return ts_int(p->a, TS_INDEX, (int64_t)(0 - m));
  }
  if (!tp_is(t, "!") && !tp_is(t, "-")) return parse_primary(p);
  tp_next(p);
  if (!tp_enter(p, t)) return NULL;
  ts_expr *x = parse_unary(p);
  tp_leave(p);
  if (!x) return NULL;
  if (tp_is(t, "!")) {
    if (!ts_dtype_is_bool(x->dtype))
      return FAIL_NULL(p, t, "operand of '!' must be bool, not %s",
                       tp_dtype_name(x->dtype, b1));
    return ts_not_raw(p->a, x);
  }
  if (x->kind == TS_EXPR_INT || x->kind == TS_EXPR_FLOAT) {
    if (ts_dtype_is_bool(x->dtype) || ts_dtype_is_handle(x->dtype))
      return FAIL_NULL(p, t, "cannot negate a %s", tp_dtype_name(x->dtype, b1));
    return negate_literal(p, t, x);
  }
  if (!is_numeric(x->dtype))
    return FAIL_NULL(p, t, "operand of '-' must be a number, not %s",
                     tp_dtype_name(x->dtype, b1));
  ts_expr *zero = ts_dtype_is_float(x->dtype) ? ts_float(p->a, x->dtype, 0)
                                              : ts_int(p->a, x->dtype, 0);
  return ts_binary_raw(p->a, TS_EXPR_SUB, zero, x);
}

/* mul = unary (("*" | "/" | "%") unary)* */
static ts_expr *parse_mul(tp_parser *p) {
  ts_expr *x = parse_unary(p);
  while (x) {
    tp_token *t = tp_peek(p);
    ts_expr_kind k;
    if (tp_is(t, "*"))
      k = TS_EXPR_MUL;
    else if (tp_is(t, "/"))
      k = TS_EXPR_DIV;
    else if (tp_is(t, "%"))
      k = TS_EXPR_MOD;
    else
      break;
    tp_next(p);
    ts_expr *y = parse_unary(p);
    if (!y) return NULL;
    x = binary(p, t, k,
               t->len == 1 && *t->loc == '*'   ? "*"
               : t->len == 1 && *t->loc == '/' ? "/"
                                               : "%",
               x, y);
  }
  return x;
}

/* add = mul (("+" | "-") mul)* */
static ts_expr *parse_add(tp_parser *p) {
  ts_expr *x = parse_mul(p);
  while (x) {
    tp_token *t = tp_peek(p);
    bool plus = tp_is(t, "+");
    if (!plus && !tp_is(t, "-")) break;
    tp_next(p);
    ts_expr *y = parse_mul(p);
    if (!y) return NULL;
    x = binary(p, t, plus ? TS_EXPR_ADD : TS_EXPR_SUB, plus ? "+" : "-", x, y);
  }
  return x;
}

static const struct {
  const char *op;
  ts_expr_kind kind;
} compare_ops[] = {{"==", TS_EXPR_EQ}, {"!=", TS_EXPR_NE}, {"<", TS_EXPR_LT},
                   {"<=", TS_EXPR_LE}, {">", TS_EXPR_GT},  {">=", TS_EXPR_GE}};

static int compare_op(const tp_token *t) {
  for (int i = 0; i < 6; i++)
    if (tp_is(t, compare_ops[i].op)) return i;
  return -1;
}

/* cmp = add [("==" | "!=" | "<" | "<=" | ">" | ">=") add]  (no chaining) */
static ts_expr *parse_cmp(tp_parser *p) {
  ts_expr *x = parse_add(p);
  if (!x) return NULL;
  tp_token *t = tp_peek(p);
  int i = compare_op(t);
  if (i < 0) return x;
  tp_next(p);
  ts_expr *y = parse_add(p);
  if (!y) return NULL;
  if (compare_op(tp_peek(p)) >= 0)
    return FAIL_NULL(p, tp_peek(p),
                     "comparisons do not chain; add parentheses");
  return binary(p, t, compare_ops[i].kind, compare_ops[i].op, x, y);
}

/* and = cmp ("&&" cmp)* */
static ts_expr *parse_and(tp_parser *p) {
  ts_expr *x = parse_cmp(p);
  while (x && tp_is(tp_peek(p), "&&")) {
    tp_token *t = tp_next(p);
    ts_expr *y = parse_cmp(p);
    if (!y) return NULL;
    x = binary(p, t, TS_EXPR_AND, "&&", x, y);
  }
  return x;
}

/* expr = and ("||" and)*
 * The operator loops build chains without recursing, so the tree's depth
 * (each operator one level, TS_TIR_MAX_DEPTH's counting) is checked here,
 * under the levels already open around it. */
ts_expr *tp_parse_expr(tp_parser *p) {
  tp_token *t = tp_peek(p);
  if (!tp_enter(p, t)) return NULL;
  ts_expr *x = parse_and(p);
  while (x && tp_is(tp_peek(p), "||")) {
    tp_token *op = tp_next(p);
    ts_expr *y = parse_and(p);
    if (!y) {
      x = NULL;
      break;
    }
    x = binary(p, op, TS_EXPR_OR, "||", x, y);
  }
  tp_leave(p);
  int room = MAX_DEPTH - p->depth;
  if (x && ts_expr_depth(x, room) > room) {
    FAIL(p, t,
         "expression nested deeper than %d levels (each operator of a "
         "chain such as a + b + c is one level)",
         MAX_DEPTH);
    return NULL;
  }
  return x;
}
