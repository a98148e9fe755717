/*
 * verify.c — the well-formedness checker of functions.
 *
 * One walk over the function with the scope of vars and buffers: every var
 * defined before use; block bodies and inits use only their own iter vars
 * and vars defined inside the block; iter values use only outer vars; init
 * does not use reduce iter vars; operand and store dtypes agree; conditions
 * and predicates are bool; loads and stores have one index per dimension
 * and, where constant bounds of the indices are known and the access is not
 * guarded by a condition, stay inside the buffer; loops have positive
 * extents and thread loops a thread tag. Up to MAX_ERRORS distinct problems
 * are reported, each naming the block (and loop) where it was found.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define MAX_ERRORS 8
#define MAX_DEPTH TS_TIR_MAX_DEPTH

typedef enum var_kind { VK_LOOP, VK_ITER, VK_LET } var_kind;

/* What a var in scope is. */
typedef struct var_info {
  var_kind kind;
  int level;           /* number of enclosing blocks where it was defined */
  bool reduce;         /* a reduce iter var */
  const ts_block *blk; /* the block of an iter var */
} var_info;

/* How the expression being checked is used. */
typedef enum mode {
  M_OUTER,      /* outside any block, or loop bounds etc. at block level */
  M_BODY,       /* inside the body of the current block */
  M_INIT,       /* inside the init of the current block */
  M_ITER_VALUE, /* an iter value or predicate of a block being realized */
} mode;

typedef struct vctx {
  const ts_func *f;
  ts_arena *tmp;             /* var_info records */
  ts_node_map *vars;         /* var -> var_info* (NULL when out of scope) */
  ts_node_map *buffers;      /* buffer -> non-NULL when declared in scope */
  ts_node_map *all_iters;    /* iter var -> its block, over the whole func */
  ts_var_ranges *ranges;     /* constant ranges of vars */
  const ts_block *block;     /* innermost block (NULL outside) */
  int level;                 /* number of enclosing blocks */
  const ts_stmt *loop;       /* innermost loop inside the innermost block */
  const ts_block *realizing; /* block whose iter values are checked */
  int guard;                 /* > 0 under an if, predicate or lazy branch */
  int depth;
  strbuf msgs;
  int n_errors;
} vctx;

/* ---- reporting ---- */

static void where(vctx *c, strbuf *sb) {
  if (c->block) {
    sb_printf(sb, "block '%s'", c->block->name);
    if (c->loop) sb_printf(sb, ", loop '%s'", c->loop->u.loop.var->u.var.name);
  } else if (c->loop) {
    sb_printf(sb, "loop '%s'", c->loop->u.loop.var->u.var.name);
  } else {
    sb_printf(sb, "function '%s'", c->f->name);
  }
}

static void report(vctx *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void report(vctx *c, const char *fmt, ...) {
  if (c->n_errors >= MAX_ERRORS) return;
  strbuf one;
  sb_init(&one);
  where(c, &one);
  sb_puts(&one, ": ");
  char text[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  sb_puts(&one, text);
  char *msg = sb_take(&one);
  if (!msg) { /* out of memory (counted; ts_func_verify reports it) */
    c->n_errors++;
    return;
  }
  /* the same problem found again (a var used twice) is reported once */
  bool dup = false;
  if (c->msgs.data) {
    const char *p = c->msgs.data;
    size_t n = strlen(msg);
    while ((p = strstr(p, msg)) != NULL) {
      if ((p == c->msgs.data || p[-1] == '\n') && (p[n] == '\n' || !p[n])) {
        dup = true;
        break;
      }
      p++;
    }
  }
  if (!dup) {
    if (c->n_errors > 0) sb_putc(&c->msgs, '\n');
    sb_puts(&c->msgs, msg);
    c->n_errors++;
  }
  free(msg);
}

static const char *dt(ts_dtype t, char buf[32]) { return ts_dtype_str(t, buf); }

/* ---- scope ---- */

static var_info *define_var(vctx *c, const ts_expr *v, var_kind kind,
                            bool reduce, var_info **saved) {
  var_info *info = ts_arena_alloc(c->tmp, sizeof *info);
  *saved = ts_node_map_get(c->vars, v);
  if (!info) return NULL; /* out of memory (counted): reported at the end */
  *info = (var_info){kind, c->level, reduce, c->block};
  ts_node_map_put(c->vars, v, info);
  return info;
}

static void undefine_var(vctx *c, const ts_expr *v, var_info *saved) {
  ts_node_map_put(c->vars, v, saved);
}

static bool is_int(ts_dtype t) {
  return t.code == TS_DT_INT || t.code == TS_DT_UINT;
}

static bool is_bool(ts_dtype t) { return t.code == TS_DT_BOOL; }

/* Sets the constant range of a var from bounds of min and extent. */
static void set_range(vctx *c, const ts_expr *var, const ts_expr *min,
                      const ts_expr *extent) {
  int64_t ml, mh, el, eh;
  if (!ts_expr_const_bound(min, c->ranges, &ml, &mh) ||
      !ts_expr_const_bound(extent, c->ranges, &el, &eh) || eh <= 0)
    return;
  int64_t span;
  if (__builtin_sub_overflow(mh, ml, &span) ||
      __builtin_add_overflow(span, eh, &span))
    return;
  ts_var_ranges_set(c->ranges, var, ml, span);
}

/* ---- expressions ---- */

static void check_expr(vctx *c, const ts_expr *e, mode m);

static void check_var(vctx *c, const ts_expr *v, mode m) {
  var_info *info = ts_node_map_get(c->vars, v);
  const char *name = v->u.var.name;
  if (!info) {
    const ts_block *owner = ts_node_map_get(c->all_iters, v);
    if (m == M_ITER_VALUE && owner == c->realizing)
      report(c, "iter value of block '%s' uses its own iter var '%s'",
             c->realizing->name, name);
    else if (m == M_ITER_VALUE && owner)
      report(c, "iter value of block '%s' uses iter var '%s' of block '%s'",
             c->realizing->name, name, owner->name);
    else if (owner)
      report(c,
             "var '%s' is used but not defined here (an iter var of block "
             "'%s')",
             name, owner->name);
    else
      report(c, "var '%s' is used but not defined", name);
    return;
  }
  if ((m == M_BODY || m == M_INIT) && info->level < c->level)
    report(c,
           "uses %s '%s' defined outside the block; a block may use only "
           "its own iter vars and vars defined inside it",
           info->kind == VK_LOOP   ? "loop var"
           : info->kind == VK_ITER ? "iter var"
                                   : "let var",
           name);
  if (m == M_INIT && info->kind == VK_ITER && info->reduce &&
      info->blk == c->block)
    report(c, "init uses reduce iter var '%s'", name);
}

/* Constant bounds of an index (ramps: over their lanes). */
static bool index_bound(vctx *c, const ts_expr *e, int64_t *lo, int64_t *hi) {
  if (e->kind == TS_EXPR_RAMP) {
    int64_t bl, bh, sl, sh, n = e->dtype.lanes - 1;
    if (!ts_expr_const_bound(e->u.op.a, c->ranges, &bl, &bh) ||
        !ts_expr_const_bound(e->u.op.b, c->ranges, &sl, &sh))
      return false;
    int64_t l = sl < 0 ? sl : 0, h = sh > 0 ? sh : 0, x, y;
    if (__builtin_mul_overflow(l, n, &x) || __builtin_mul_overflow(h, n, &y) ||
        __builtin_add_overflow(bl, x, lo) || __builtin_add_overflow(bh, y, hi))
      return false;
    return true;
  }
  if (e->kind == TS_EXPR_BROADCAST) e = e->u.op.a;
  return ts_expr_const_bound(e, c->ranges, lo, hi);
}

static void check_access(vctx *c, const char *what, const ts_buffer *b,
                         ts_expr *const *indices, int n, mode m) {
  const char *name = b ? b->name : "?";
  if (!b) {
    report(c, "%s of a missing buffer", what);
  } else if (!ts_node_map_get(c->buffers, b)) {
    report(c,
           "%s '%s': buffer is used but not declared (not a parameter or an "
           "allocation in scope)",
           what, name);
  }
  for (int i = 0; i < n; i++) {
    check_expr(c, indices[i], m);
    char buf[32];
    if (!is_int(indices[i]->dtype))
      report(c, "%s '%s' index %d has type %s, not an integer", what, name, i,
             dt(indices[i]->dtype, buf));
  }
  if (!b) return;
  if (n != b->ndim) {
    report(c, "%s '%s' has %d indices but the buffer has %d dimensions", what,
           name, n, b->ndim);
    return;
  }
  if (c->guard > 0) return;
  for (int i = 0; i < n; i++) {
    int64_t lo, hi;
    if (!is_int(indices[i]->dtype) || !index_bound(c, indices[i], &lo, &hi))
      continue;
    if (lo < 0 || hi >= b->shape[i])
      report(c,
             "%s '%s' index %d may be out of bounds [%lld, %lld) for dim "
             "%lld",
             what, name, i, (long long)lo,
             (long long)(hi == INT64_MAX ? hi : hi + 1),
             (long long)b->shape[i]);
  }
}

static void check_call(vctx *c, const ts_expr *e, mode m) {
  const char *name = e->u.call.name;
  int n = e->u.call.n_args;
  ts_expr *const *args = e->u.call.args;
  const ts_intrinsic_info *info = ts_intrinsic_lookup(name);
  char b1[32], b2[32];
  if (info && info->rule == TS_INTRIN_SAME_AS_ARG1 && n == 3) {
    /* if_then_else evaluates only the chosen branch */
    check_expr(c, args[0], m);
    if (!is_bool(args[0]->dtype))
      report(c, "condition of if_then_else has type %s, not bool",
             dt(args[0]->dtype, b1));
    c->guard++;
    check_expr(c, args[1], m);
    check_expr(c, args[2], m);
    c->guard--;
    if (!ts_dtype_eq(args[1]->dtype, args[2]->dtype))
      report(c, "branches of if_then_else have different types %s and %s",
             dt(args[1]->dtype, b1), dt(args[2]->dtype, b2));
    else if (!ts_dtype_eq(e->dtype, args[1]->dtype))
      report(c, "if_then_else of type %s has branches of type %s",
             dt(e->dtype, b1), dt(args[1]->dtype, b2));
    return;
  }
  for (int i = 0; i < n; i++) check_expr(c, args[i], m);
  if (!info) return;
  if (info->n_args >= 0 && n != info->n_args) {
    report(c, "intrinsic '%s' takes %d arguments, not %d", name, info->n_args,
           n);
    return;
  }
  for (int i = 0; i < n; i++) {
    if (info->float_only && !ts_dtype_is_float(args[i]->dtype))
      report(c, "argument %d of '%s' has type %s, not a float type", i, name,
             dt(args[i]->dtype, b1));
    if (i > 0 && info->rule == TS_INTRIN_SAME_AS_ARG0 &&
        !ts_dtype_eq(args[i]->dtype, args[0]->dtype))
      report(c, "arguments of '%s' have different types %s and %s", name,
             dt(args[0]->dtype, b1), dt(args[i]->dtype, b2));
  }
  if (n > 0 && info->rule == TS_INTRIN_SAME_AS_ARG0 &&
      !ts_dtype_eq(e->dtype, args[0]->dtype))
    report(c, "'%s' of type %s has an argument of type %s", name,
           dt(e->dtype, b1), dt(args[0]->dtype, b2));
}

static void check_expr(vctx *c, const ts_expr *e, mode m) {
  if (!e) {
    report(c, "missing expression");
    return;
  }
  if (c->depth > MAX_DEPTH) {
    report(c, "expression nesting deeper than %d", MAX_DEPTH);
    return;
  }
  c->depth++;
  char b1[32], b2[32];
  ts_expr_kind k = (ts_expr_kind)e->kind;
  const char *kname = ts_expr_kind_name(k);
  switch (k) {
  case TS_EXPR_INT:
    if (!is_int(e->dtype) && !is_bool(e->dtype))
      report(c, "integer literal of type %s", dt(e->dtype, b1));
    break;
  case TS_EXPR_FLOAT:
    if (!ts_dtype_is_float(e->dtype))
      report(c, "float literal of type %s", dt(e->dtype, b1));
    break;
  case TS_EXPR_VAR: check_var(c, e, m); break;
  case TS_EXPR_NOT:
    check_expr(c, e->u.op.a, m);
    if (!is_bool(e->u.op.a->dtype))
      report(c, "operand of 'not' has type %s, not bool",
             dt(e->u.op.a->dtype, b1));
    break;
  case TS_EXPR_SELECT:
    check_expr(c, e->u.op.a, m);
    check_expr(c, e->u.op.b, m);
    check_expr(c, e->u.op.c, m);
    if (!is_bool(e->u.op.a->dtype))
      report(c, "condition of select has type %s, not bool",
             dt(e->u.op.a->dtype, b1));
    if (!ts_dtype_eq(e->u.op.b->dtype, e->u.op.c->dtype))
      report(c, "branches of select have different types %s and %s",
             dt(e->u.op.b->dtype, b1), dt(e->u.op.c->dtype, b2));
    break;
  case TS_EXPR_CAST: check_expr(c, e->u.op.a, m); break;
  case TS_EXPR_LOAD:
  case TS_EXPR_ADDRESS_OF:
    check_access(c, k == TS_EXPR_LOAD ? "load from" : "address of",
                 e->u.load.buffer, e->u.load.indices, e->u.load.n_indices, m);
    if (k == TS_EXPR_LOAD && e->u.load.buffer &&
        !ts_dtype_eq(ts_dtype_scalar(e->dtype), e->u.load.buffer->dtype))
      report(c, "load from '%s' has type %s but the buffer holds %s",
             e->u.load.buffer->name, dt(e->dtype, b1),
             dt(e->u.load.buffer->dtype, b2));
    break;
  case TS_EXPR_RAMP:
    check_expr(c, e->u.op.a, m);
    check_expr(c, e->u.op.b, m);
    if (!is_int(e->u.op.a->dtype) || e->u.op.a->dtype.lanes != 1 ||
        !ts_dtype_eq(e->u.op.a->dtype, e->u.op.b->dtype))
      report(c, "ramp needs scalar integer base and stride of one type");
    break;
  case TS_EXPR_BROADCAST:
    check_expr(c, e->u.op.a, m);
    if (e->u.op.a->dtype.lanes != 1)
      report(c, "broadcast of a vector of type %s", dt(e->u.op.a->dtype, b1));
    break;
  case TS_EXPR_CALL: check_call(c, e, m); break;
  case TS_EXPR_LET: {
    check_expr(c, e->u.let.value, m);
    const ts_expr *v = e->u.let.var;
    if (!v || v->kind != TS_EXPR_VAR) {
      report(c, "let binds something that is not a var");
      break;
    }
    if (!ts_dtype_eq(v->dtype, e->u.let.value->dtype))
      report(c, "let var '%s' of type %s bound to a value of type %s",
             v->u.var.name, dt(v->dtype, b1), dt(e->u.let.value->dtype, b2));
    var_info *saved;
    define_var(c, v, VK_LET, false, &saved);
    int64_t lo, hi;
    if (ts_expr_const_bound(e->u.let.value, c->ranges, &lo, &hi) &&
        hi - lo < INT64_MAX)
      ts_var_ranges_set(c->ranges, v, lo, hi - lo + 1);
    check_expr(c, e->u.let.body, m);
    undefine_var(c, v, saved);
    break;
  }
  default: {
    /* binary operators */
    const ts_expr *x = e->u.op.a, *y = e->u.op.b;
    check_expr(c, x, m);
    check_expr(c, y, m);
    if (!x || !y) break;
    if (!ts_dtype_eq(x->dtype, y->dtype)) {
      report(c, "operands of '%s' have different types %s and %s", kname,
             dt(x->dtype, b1), dt(y->dtype, b2));
    } else if ((k == TS_EXPR_AND || k == TS_EXPR_OR) && !is_bool(x->dtype)) {
      report(c, "operands of '%s' have type %s, not bool", kname,
             dt(x->dtype, b1));
    } else if ((k == TS_EXPR_MOD || k == TS_EXPR_FLOORDIV ||
                k == TS_EXPR_FLOORMOD) &&
               !is_int(x->dtype)) {
      report(c, "operands of '%s' have type %s, not an integer type", kname,
             dt(x->dtype, b1));
    }
    break;
  }
  }
  c->depth--;
}

static void check_cond(vctx *c, const ts_expr *e, mode m, const char *what) {
  check_expr(c, e, m);
  char buf[32];
  if (e && !is_bool(e->dtype))
    report(c, "%s has type %s, not bool", what, dt(e->dtype, buf));
}

/* ---- statements ---- */

static void check_stmt(vctx *c, const ts_stmt *s, mode m);

static void check_regions(vctx *c, const ts_region *r, int n, mode m,
                          const char *what) {
  for (int i = 0; i < n; i++) {
    const ts_buffer *b = r[i].buffer;
    if (!b) {
      report(c, "%s region of a missing buffer", what);
      continue;
    }
    if (!ts_node_map_get(c->buffers, b))
      report(c, "%s region of '%s': buffer is not declared", what, b->name);
    if (r[i].ndim != b->ndim)
      report(c, "%s region of '%s' has %d dimensions but the buffer has %d",
             what, b->name, r[i].ndim, b->ndim);
    for (int d = 0; d < r[i].ndim; d++) {
      check_expr(c, r[i].ranges[d].min, m);
      check_expr(c, r[i].ranges[d].extent, m);
    }
  }
}

static void check_realize(vctx *c, const ts_stmt *s, mode m) {
  const ts_block *b = s->u.realize.block;
  if (!b) {
    report(c, "block-realize without a block");
    return;
  }
  /* iter values and predicate, in the enclosing scope */
  const ts_block *saved_realizing = c->realizing;
  c->realizing = b;
  int nv = s->u.realize.n_values;
  for (int i = 0; i < nv; i++) {
    const ts_expr *v = s->u.realize.values[i];
    check_expr(c, v, M_ITER_VALUE);
    char buf[32];
    if (v && !is_int(v->dtype))
      report(c, "iter value %d of block '%s' has type %s, not an integer", i,
             b->name, dt(v->dtype, buf));
  }
  if (s->u.realize.predicate)
    check_cond(c, s->u.realize.predicate, M_ITER_VALUE, "block predicate");
  c->realizing = saved_realizing;
  if (nv != b->n_iters)
    report(c, "block '%s' has %d iter vars but is realized with %d values",
           b->name, b->n_iters, nv);
  for (int i = 0; i < b->n_iters; i++) {
    check_expr(c, b->iters[i].dom.min, m);
    check_expr(c, b->iters[i].dom.extent, m);
  }

  /* the block itself */
  var_info **saved_vars = ts_calloc((size_t)b->n_iters + 1, sizeof *saved_vars);
  if (!saved_vars) { /* out of memory (counted; ts_func_verify reports it) */
    c->n_errors++;
    return;
  }
  const ts_block *saved_block = c->block;
  const ts_stmt *saved_loop = c->loop;
  c->block = b;
  c->loop = NULL;
  c->level++;
  if (s->u.realize.predicate) c->guard++;
  bool has_reduce = false;
  for (int i = 0; i < b->n_iters; i++) {
    const ts_expr *var = b->iters[i].var;
    if (!var || var->kind != TS_EXPR_VAR) {
      report(c, "iter %d is not a var", i);
      continue;
    }
    bool reduce = b->iters[i].kind == TS_ITER_REDUCE;
    has_reduce |= reduce;
    define_var(c, var, VK_ITER, reduce, &saved_vars[i]);
    int64_t ext;
    if (ts_expr_is_const_int(b->iters[i].dom.extent, &ext) && ext <= 0)
      report(c, "iter var '%s' has a non-positive extent %lld", var->u.var.name,
             (long long)ext);
    set_range(c, var, b->iters[i].dom.min, b->iters[i].dom.extent);
    /* the value must stay inside the domain */
    int64_t vl, vh, dl, dh, el, eh;
    if (i < nv && c->guard == 0 && s->u.realize.values[i] &&
        ts_expr_const_bound(s->u.realize.values[i], c->ranges, &vl, &vh) &&
        ts_expr_const_bound(b->iters[i].dom.min, c->ranges, &dl, &dh) &&
        ts_expr_const_bound(b->iters[i].dom.extent, c->ranges, &el, &eh) &&
        dl == dh && el == eh && (vl < dl || vh - dl >= el))
      report(c,
             "value of iter var '%s' may be outside its domain [%lld, %lld) "
             "(bounds [%lld, %lld])",
             var->u.var.name, (long long)dl, (long long)(dl + el),
             (long long)vl, (long long)vh);
  }
  for (int i = 0; i < b->n_allocs; i++)
    ts_node_map_put(c->buffers, b->allocs[i], (void *)b->allocs[i]);
  check_regions(c, b->reads, b->n_reads, M_BODY, "read");
  check_regions(c, b->writes, b->n_writes, M_BODY, "write");
  if (b->init) {
    if (!has_reduce) report(c, "has an init but no reduce iter var");
    check_stmt(c, b->init, M_INIT);
  }
  if (b->body) check_stmt(c, b->body, M_BODY);
  for (int i = 0; i < b->n_allocs; i++)
    ts_node_map_put(c->buffers, b->allocs[i], NULL);
  for (int i = b->n_iters - 1; i >= 0; i--)
    if (b->iters[i].var && b->iters[i].var->kind == TS_EXPR_VAR)
      undefine_var(c, b->iters[i].var, saved_vars[i]);
  free(saved_vars);
  if (s->u.realize.predicate) c->guard--;
  c->level--;
  c->block = saved_block;
  c->loop = saved_loop;
}

static void check_stmt(vctx *c, const ts_stmt *s, mode m) {
  if (!s) return;
  if (c->depth > MAX_DEPTH) {
    report(c, "statement nesting deeper than %d", MAX_DEPTH);
    return;
  }
  c->depth++;
  char b1[32], b2[32];
  switch (s->kind) {
  case TS_STMT_FOR: {
    const ts_expr *var = s->u.loop.var;
    check_expr(c, s->u.loop.min, m);
    check_expr(c, s->u.loop.extent, m);
    if (!var || var->kind != TS_EXPR_VAR) {
      report(c, "loop variable is not a var");
      break;
    }
    const ts_stmt *saved_loop = c->loop;
    c->loop = s;
    int64_t ext;
    if (s->u.loop.extent && !is_int(s->u.loop.extent->dtype))
      report(c, "loop extent has type %s, not an integer",
             dt(s->u.loop.extent->dtype, b1));
    else if (ts_expr_is_const_int(s->u.loop.extent, &ext) && ext <= 0)
      report(c, "non-positive loop extent %lld", (long long)ext);
    if (s->u.loop.min && !ts_dtype_eq(s->u.loop.min->dtype, var->dtype))
      report(c, "loop min has type %s but the loop var has type %s",
             dt(s->u.loop.min->dtype, b1), dt(var->dtype, b2));
    if (s->u.loop.kind == TS_FOR_THREAD &&
        (!s->u.loop.thread_tag || !s->u.loop.thread_tag[0]))
      report(c, "thread loop without a thread tag");
    var_info *saved;
    define_var(c, var, VK_LOOP, false, &saved);
    set_range(c, var, s->u.loop.min, s->u.loop.extent);
    check_stmt(c, s->u.loop.body, m);
    undefine_var(c, var, saved);
    c->loop = saved_loop;
    break;
  }
  case TS_STMT_BLOCK_REALIZE: check_realize(c, s, m); break;
  case TS_STMT_STORE: {
    const ts_buffer *b = s->u.store.buffer;
    check_access(c, "store to", b, s->u.store.indices, s->u.store.n_indices, m);
    const ts_expr *v = s->u.store.value;
    check_expr(c, v, m);
    if (!b || !v) break;
    int lanes = 1;
    for (int i = 0; i < s->u.store.n_indices; i++)
      if (s->u.store.indices[i]->dtype.lanes > lanes)
        lanes = s->u.store.indices[i]->dtype.lanes;
    ts_dtype want = ts_dtype_with_lanes(b->dtype, lanes);
    if (!ts_dtype_eq(v->dtype, want))
      report(c, "store to '%s' of a value of type %s, expected %s", b->name,
             dt(v->dtype, b1), dt(want, b2));
    break;
  }
  case TS_STMT_SEQ:
    for (int i = 0; i < s->u.seq.n; i++) check_stmt(c, s->u.seq.items[i], m);
    break;
  case TS_STMT_IF:
    check_cond(c, s->u.cond.cond, m, "if condition");
    c->guard++;
    check_stmt(c, s->u.cond.then_s, m);
    check_stmt(c, s->u.cond.else_s, m);
    c->guard--;
    break;
  case TS_STMT_EVALUATE: check_expr(c, s->u.eval.value, m); break;
  case TS_STMT_LET: {
    const ts_expr *var = s->u.let.var, *v = s->u.let.value;
    check_expr(c, v, m);
    if (!var || var->kind != TS_EXPR_VAR) {
      report(c, "let binds something that is not a var");
      break;
    }
    if (v && !ts_dtype_eq(var->dtype, v->dtype))
      report(c, "let var '%s' of type %s bound to a value of type %s",
             var->u.var.name, dt(var->dtype, b1), dt(v->dtype, b2));
    var_info *saved;
    define_var(c, var, VK_LET, false, &saved);
    int64_t lo, hi;
    if (v && ts_expr_const_bound(v, c->ranges, &lo, &hi) && hi - lo < INT64_MAX)
      ts_var_ranges_set(c->ranges, var, lo, hi - lo + 1);
    check_stmt(c, s->u.let.body, m);
    undefine_var(c, var, saved);
    break;
  }
  case TS_STMT_ALLOCATE: {
    const ts_buffer *b = s->u.alloc.buffer;
    if (!b) {
      report(c, "allocate without a buffer");
      break;
    }
    void *saved = ts_node_map_get(c->buffers, b);
    ts_node_map_put(c->buffers, b, (void *)b);
    check_stmt(c, s->u.alloc.body, m);
    ts_node_map_put(c->buffers, b, saved);
    break;
  }
  default: report(c, "unknown statement kind %d", s->kind); break;
  }
  c->depth--;
}

static bool collect_iters(void *ctx, ts_stmt *s) {
  if (s->kind == TS_STMT_BLOCK_REALIZE && s->u.realize.block) {
    const ts_block *b = s->u.realize.block;
    for (int i = 0; i < b->n_iters; i++)
      if (b->iters[i].var) ts_node_map_put(ctx, b->iters[i].var, (void *)b);
  }
  return true;
}

int ts_func_verify(const ts_func *f, ts_error *err) {
  if (!f) return TS_ERR(err, TS_EINVAL, "verify: no function");
  if (ts_arena_failed(f->arena))
    return TS_ERR(err, TS_ENOMEM,
                  "verify: out of memory while the function was built");
  unsigned long oom = ts_alloc_failures();
  /* First: every walk below recurses over the tree. */
  int depth_rc = ts_func_check_depth(f, err);
  if (depth_rc) return depth_rc;
  vctx c;
  memset(&c, 0, sizeof c);
  c.f = f;
  c.tmp = ts_arena_create();
  c.vars = ts_node_map_create();
  c.buffers = ts_node_map_create();
  c.all_iters = ts_node_map_create();
  c.ranges = ts_var_ranges_create();
  sb_init(&c.msgs);
  ts_visitor v = {collect_iters, NULL, NULL, c.all_iters};
  ts_stmt_walk(f->body, &v);
  for (int i = 0; i < f->n_params; i++)
    ts_node_map_put(c.buffers, f->params[i], f->params[i]);
  check_stmt(&c, f->body, M_OUTER);
  int rc = TS_OK;
  if (c.n_errors > 0)
    rc = TS_ERR(err, TS_EVERIFY, "%s", c.msgs.data ? c.msgs.data : "");
  sb_free(&c.msgs);
  ts_var_ranges_destroy(c.ranges);
  ts_node_map_destroy(c.all_iters);
  ts_node_map_destroy(c.buffers);
  ts_node_map_destroy(c.vars);
  ts_arena_destroy(c.tmp);
  return ts_alloc_check(oom, rc, err, "verify");
}
