/*
 * interp_compile.c — the reference interpreter's first phase: compiles a
 * PrimFunc into the private tree interp_exec.c runs, giving every variable
 * definition a value slot and every buffer definition a buffer slot, and
 * checking scoping, arities, dtypes, buffer sizes and intrinsic names.
 */
#include "interp_internal.h"

#include <stdlib.h>
#include <string.h>

/* Limits that keep malformed input from exhausting memory or the stack. */
#define MAX_ALLOC_BYTES ((int64_t)1 << 30) /* per block/allocate buffer */
#define MAX_DEPTH TS_TIR_MAX_DEPTH /* nesting of statements and expressions */
#define MAX_NODES (1 << 20)        /* compiled expression nodes (shared DAGs) */
#define MAX_VALUE_SLOTS (1 << 24)  /* variable lanes defined by the program */

static const char *dtype_name(ts_dtype t, char buf[32]) {
  return ts_dtype_str(t, buf);
}

/* ---- dtypes ---- */

static int class_of(ts_dtype t) {
  if (t.lanes < 1) return -1;
  switch (t.code) {
  case TS_DT_INT:
  case TS_DT_UINT:
    if (t.bits != 8 && t.bits != 16 && t.bits != 32 && t.bits != 64) return -1;
    return t.code == TS_DT_INT ? VC_INT : VC_UINT;
  case TS_DT_BOOL: return t.bits == 1 ? VC_BOOL : -1;
  case TS_DT_FLOAT:
    return t.bits == 16   ? VC_F16
           : t.bits == 32 ? VC_F32
           : t.bits == 64 ? VC_F64
                          : -1;
  case TS_DT_BFLOAT: return t.bits == 16 ? VC_BF16 : -1;
  default: return -1;
  }
}

static int storage_kind(int cls, int bits) {
  switch (cls) {
  case VC_INT:
    return bits == 8    ? SK_I8
           : bits == 16 ? SK_I16
           : bits == 32 ? SK_I32
                        : SK_I64;
  case VC_UINT:
    return bits == 8    ? SK_U8
           : bits == 16 ? SK_U16
           : bits == 32 ? SK_U32
                        : SK_U64;
  case VC_BOOL: return SK_BOOL;
  case VC_F16: return SK_F16;
  case VC_BF16: return SK_BF16;
  case VC_F32: return SK_F32;
  default: return SK_F64;
  }
}

/* ---- compiling expressions ---- */

static int new_value_slot(interp *in, int lanes) {
  if (in->n_vals > MAX_VALUE_SLOTS - lanes) {
    FAIL(in, TS_EUNSUPPORTED,
         "program too large to interpret (over %d variable lanes)",
         MAX_VALUE_SLOTS);
    return 0; /* a valid slot; compiling stops at the failure */
  }
  int s = in->n_vals;
  in->n_vals += lanes;
  return s;
}

/* Binds var to a fresh slot; returns the previous binding for unbind. */
static void *bind_var(interp *in, const ts_expr *var, int *slot) {
  void *old = ts_node_map_get(in->var_slot, var);
  *slot = new_value_slot(in, var->dtype.lanes);
  ts_node_map_put(in->var_slot, var, (void *)(intptr_t)(*slot + 1));
  return old;
}
static void unbind_var(interp *in, const ts_expr *var, void *old) {
  ts_node_map_put(in->var_slot, var, old);
}

/* Memory of the compiled program; NULL (the interpreter failed with
 * TS_ENOMEM) when there is none. */
static void *ialloc(interp *in, size_t size) {
  void *p = ts_arena_alloc(in->arena, size);
  if (!p) FAIL(in, TS_ENOMEM, "interpreter: out of memory");
  return p;
}

static cexpr *new_cexpr(interp *in, const ts_expr *e, int n) {
  if (++in->n_nodes > MAX_NODES) {
    FAIL(in, TS_EUNSUPPORTED,
         "program too large to interpret (over %d "
         "expression nodes after expanding shared sub-expressions)",
         MAX_NODES);
    return NULL;
  }
  cexpr *c = ialloc(in, sizeof *c);
  if (!c) return NULL;
  c->kind = e->kind;
  c->lanes = e->dtype.lanes;
  c->bits = e->dtype.bits;
  c->n = n;
  if (n && !(c->ops = ialloc(in, sizeof *c->ops * (size_t)n))) return NULL;
  return c;
}

static bool is_int_class(int c) {
  return c == VC_INT || c == VC_UINT || c == VC_BOOL;
}

static cexpr *compile_expr(interp *in, const ts_expr *e, int depth);

static bool compile_ops(interp *in, cexpr *c, ts_expr *const *ops, int n,
                        int depth) {
  for (int i = 0; i < n; i++) {
    c->ops[i] = compile_expr(in, ops[i], depth + 1);
    if (!c->ops[i]) return false;
  }
  return true;
}

static int buffer_slot(interp *in, const ts_buffer *b, const char *what) {
  intptr_t s = b ? (intptr_t)ts_node_map_get(in->buf_slot, b) : 0;
  if (!s) {
    FAIL(in, TS_EINVAL,
         "%s of buffer '%s', which is neither a parameter nor allocated "
         "in an enclosing scope",
         what, b ? b->name : "(null)");
    return -1;
  }
  return (int)s - 1;
}

static cexpr *compile_expr(interp *in, const ts_expr *e, int depth) {
  char tb[32], tb2[32];
  if (!e) {
    FAIL(in, TS_EINVAL, "missing expression");
    return NULL;
  }
  if (depth > MAX_DEPTH) {
    FAIL(in, TS_EUNSUPPORTED, "expression nested deeper than %d", MAX_DEPTH);
    return NULL;
  }
  if (depth > in->launch.max_depth) in->launch.max_depth = depth;
  int cls = class_of(e->dtype);
  if (cls < 0 && e->kind != TS_EXPR_ADDRESS_OF) {
    FAIL(in, TS_EUNSUPPORTED, "cannot evaluate a %s expression of type %s",
         ts_expr_kind_name((ts_expr_kind)e->kind), dtype_name(e->dtype, tb));
    return NULL;
  }
  cexpr *c;
  switch ((ts_expr_kind)e->kind) {
  case TS_EXPR_INT:
    if (!(c = new_cexpr(in, e, 0))) return NULL;
    if (class_is_float(cls))
      c->imm.f = round_cls((double)e->u.int_value, cls);
    else
      c->imm.i = wrap(e->u.int_value, cls, e->dtype.bits);
    break;
  case TS_EXPR_FLOAT: {
    if (!(c = new_cexpr(in, e, 0))) return NULL;
    value v = {.f = e->u.float_value};
    c->imm = interp_convert(v, VC_F64, cls, e->dtype.bits);
    break;
  }
  case TS_EXPR_VAR: {
    intptr_t s = (intptr_t)ts_node_map_get(in->var_slot, e);
    if (!s) {
      FAIL(in, TS_EINVAL, "variable '%s' used outside the scope defining it",
           e->u.var.name);
      return NULL;
    }
    if (!(c = new_cexpr(in, e, 0))) return NULL;
    c->slot = (int)s - 1;
    break;
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
  case TS_EXPR_EQ:
  case TS_EXPR_NE:
  case TS_EXPR_LT:
  case TS_EXPR_LE:
  case TS_EXPR_GT:
  case TS_EXPR_GE:
  case TS_EXPR_AND:
  case TS_EXPR_OR: {
    if (!(c = new_cexpr(in, e, 2))) return NULL;
    ts_expr *ops[2] = {e->u.op.a, e->u.op.b};
    if (!compile_ops(in, c, ops, 2, depth)) return NULL;
    cexpr *x = c->ops[0];
    ts_dtype tx = ts_dtype_scalar(ops[0]->dtype),
             ty = ts_dtype_scalar(ops[1]->dtype);
    if (!ts_dtype_eq(tx, ty)) {
      FAIL(in, TS_EINVAL, "operands of %s have different types %s and %s",
           ts_expr_kind_name((ts_expr_kind)e->kind), dtype_name(tx, tb),
           dtype_name(ty, tb2));
      return NULL;
    }
    bool logical = e->kind == TS_EXPR_AND || e->kind == TS_EXPR_OR;
    bool cmp = ts_expr_is_compare((ts_expr_kind)e->kind);
    if (logical && !is_int_class(x->cls)) {
      FAIL(in, TS_EINVAL, "operands of %s must be bool, not %s",
           ts_expr_kind_name((ts_expr_kind)e->kind), dtype_name(tx, tb));
      return NULL;
    }
    if ((cmp || logical) && cls != VC_BOOL) {
      FAIL(in, TS_EINVAL, "%s must have a bool type",
           ts_expr_kind_name((ts_expr_kind)e->kind));
      return NULL;
    }
    if (!cmp && !logical && (cls != x->cls || e->dtype.bits != tx.bits)) {
      FAIL(in, TS_EINVAL, "%s of %s operands has type %s",
           ts_expr_kind_name((ts_expr_kind)e->kind), dtype_name(tx, tb),
           dtype_name(e->dtype, tb2));
      return NULL;
    }
    c->ocls = x->cls;
    break;
  }
  case TS_EXPR_NOT:
  case TS_EXPR_CAST:
  case TS_EXPR_BROADCAST: {
    if (!(c = new_cexpr(in, e, 1))) return NULL;
    if (!compile_ops(in, c, &e->u.op.a, 1, depth)) return NULL;
    c->ocls = c->ops[0]->cls;
    if (e->kind == TS_EXPR_NOT && !is_int_class(c->ocls)) {
      FAIL(in, TS_EINVAL, "operand of not must be bool");
      return NULL;
    }
    if (e->kind == TS_EXPR_BROADCAST && c->ocls != cls) {
      FAIL(in, TS_EINVAL, "broadcast changes the type of its operand");
      return NULL;
    }
    break;
  }
  case TS_EXPR_SELECT: {
    if (!(c = new_cexpr(in, e, 3))) return NULL;
    ts_expr *ops[3] = {e->u.op.a, e->u.op.b, e->u.op.c};
    if (!compile_ops(in, c, ops, 3, depth)) return NULL;
    if (!is_int_class(c->ops[0]->cls) || c->ops[1]->cls != cls ||
        c->ops[2]->cls != cls) {
      FAIL(in, TS_EINVAL,
           "select needs a bool condition and two values of "
           "its type");
      return NULL;
    }
    break;
  }
  case TS_EXPR_RAMP: {
    if (!(c = new_cexpr(in, e, 2))) return NULL;
    ts_expr *ops[2] = {e->u.op.a, e->u.op.b};
    if (!compile_ops(in, c, ops, 2, depth)) return NULL;
    if (c->ops[0]->cls != cls || c->ops[1]->cls != cls || cls == VC_BOOL) {
      FAIL(in, TS_EINVAL, "ramp needs a base and stride of its type");
      return NULL;
    }
    break;
  }
  case TS_EXPR_LOAD: {
    const ts_buffer *b = e->u.load.buffer;
    int slot = buffer_slot(in, b, "load");
    if (slot < 0) return NULL;
    const rbuf *rb = &in->bufs[slot];
    if (e->u.load.n_indices != rb->ndim) {
      FAIL(in, TS_EINVAL,
           "load of buffer '%s' with %d indices; it has %d "
           "dimensions",
           rb->name, e->u.load.n_indices, rb->ndim);
      return NULL;
    }
    if (!ts_dtype_eq(ts_dtype_scalar(e->dtype), b->dtype)) {
      FAIL(in, TS_EINVAL, "load of %s buffer '%s' has type %s",
           dtype_name(b->dtype, tb), rb->name, dtype_name(e->dtype, tb2));
      return NULL;
    }
    if (!(c = new_cexpr(in, e, e->u.load.n_indices))) return NULL;
    c->slot = slot;
    if (!compile_ops(in, c, e->u.load.indices, c->n, depth)) return NULL;
    for (int d = 0; d < c->n; d++)
      if (!is_int_class(c->ops[d]->cls) || c->ops[d]->cls == VC_BOOL) {
        FAIL(in, TS_EINVAL,
             "index %d of a load of buffer '%s' is not an "
             "integer",
             d, rb->name);
        return NULL;
      }
    break;
  }
  case TS_EXPR_CALL: {
    const intrinsic_impl *im = interp_find_intrinsic(e->u.call.name);
    if (!im) {
      FAIL(in, TS_EUNSUPPORTED,
           "the interpreter has no implementation of "
           "intrinsic '%s'",
           e->u.call.name);
      return NULL;
    }
    if (interp_is_gpu_intrinsic(im) && !in->gpu) {
      FAIL(in, TS_EUNSUPPORTED,
           "intrinsic '%s' has a meaning only on a GPU: run the function "
           "with ts_interp_run_gpu",
           im->name);
      return NULL;
    }
    if (im->n_args >= 0 && e->u.call.n_args != im->n_args) {
      FAIL(in, TS_EINVAL, "intrinsic '%s' takes %d arguments, not %d", im->name,
           im->n_args, e->u.call.n_args);
      return NULL;
    }
    if (!(c = new_cexpr(in, e, e->u.call.n_args))) return NULL;
    c->intrin = im;
    if (!compile_ops(in, c, e->u.call.args, c->n, depth)) return NULL;
    if (strcmp(im->name, "if_then_else") == 0 &&
        (!is_int_class(c->ops[0]->cls) || c->ops[1]->cls != cls ||
         c->ops[2]->cls != cls)) {
      FAIL(in, TS_EINVAL,
           "if_then_else needs a bool condition and two "
           "values of its type");
      return NULL;
    }
    if (interp_is_gpu_intrinsic(im)) {
      in->launch.yields = true;
      if (im->eval == interp_call_shfl_down &&
          (cls != VC_F32 || e->dtype.lanes != 1 || c->ops[0]->cls != VC_F32 ||
           c->ops[0]->lanes != 1 || !is_int_class(c->ops[1]->cls) ||
           c->ops[1]->cls == VC_BOOL)) {
        FAIL(in, TS_EINVAL,
             "intrinsic '%s' takes (float32 value, integer offset) and "
             "returns float32",
             im->name);
        return NULL;
      }
    }
    break;
  }
  case TS_EXPR_LET: {
    const ts_expr *var = e->u.let.var;
    if (!var || var->kind != TS_EXPR_VAR) {
      FAIL(in, TS_EINVAL, "let binds something that is not a variable");
      return NULL;
    }
    if (!(c = new_cexpr(in, e, 2))) return NULL;
    if (!(c->ops[0] = compile_expr(in, e->u.let.value, depth + 1))) return NULL;
    if (class_of(var->dtype) != c->ops[0]->cls) {
      FAIL(in, TS_EINVAL, "let binds %s variable '%s' to a %s value",
           dtype_name(var->dtype, tb), var->u.var.name,
           dtype_name(e->u.let.value->dtype, tb2));
      return NULL;
    }
    void *old = bind_var(in, var, &c->slot);
    c->aux = var->dtype.lanes;
    c->ops[1] = compile_expr(in, e->u.let.body, depth + 1);
    unbind_var(in, var, old);
    if (!c->ops[1]) return NULL;
    break;
  }
  case TS_EXPR_ADDRESS_OF:
    FAIL(in, TS_EUNSUPPORTED,
         "address_of (of buffer '%s') is not supported "
         "by the interpreter",
         e->u.load.buffer ? e->u.load.buffer->name : "?");
    return NULL;
  default:
    FAIL(in, TS_EINVAL, "unknown expression kind %d", e->kind);
    return NULL;
  }
  c->cls = (uint8_t)cls;
  if (c->lanes > in->max_lanes) in->max_lanes = c->lanes;
  return c;
}

/* A scalar integer (or bool, when want_bool) expression. */
static cexpr *compile_scalar(interp *in, const ts_expr *e, bool want_bool,
                             const char *what, int depth) {
  cexpr *c = compile_expr(in, e, depth);
  if (!c) return NULL;
  if (c->lanes != 1 || !is_int_class(c->cls) ||
      (want_bool ? c->cls != VC_BOOL : c->cls == VC_BOOL)) {
    char tb[32];
    FAIL(in, TS_EINVAL, "%s must be a scalar %s, not %s", what,
         want_bool ? "bool" : "integer", dtype_name(e->dtype, tb));
    return NULL;
  }
  return c;
}

/* ---- compiling buffers and statements ---- */

/* GPU mode: registers the block-wide storage of a "shared" buffer
 * definition; returns its shared index or -1. */
static int define_shared(interp *in, const rbuf *r) {
  interp_launch *l = &in->launch;
  if (l->n_shared == in->cap_shared) {
    int cap = in->cap_shared ? 2 * in->cap_shared : 8;
    interp_shared *ns = realloc(l->shared, sizeof *ns * (size_t)cap);
    if (!ns) {
      FAIL(in, TS_ENOMEM, "out of memory");
      return -1;
    }
    l->shared = ns;
    in->cap_shared = cap;
  }
  l->shared[l->n_shared] =
      (interp_shared){.name = r->name, .bytes = r->bytes, .esize = r->esize};
  return l->n_shared++;
}

/* Defines buffer b in a new slot (data NULL until allocated); `limit`
 * bounds its storage bytes (0: no limit, for parameters). In the GPU mode a
 * "shared" buffer (not a parameter) gets block-wide storage. */
int interp_define_buffer(interp *in, const ts_buffer *b, int64_t limit,
                         void **old) {
  char tb[32];
  if (!b) {
    FAIL(in, TS_EINVAL, "missing buffer");
    return -1;
  }
  int cls = class_of(b->dtype);
  if (cls < 0 || b->dtype.lanes != 1) {
    FAIL(in, TS_EUNSUPPORTED,
         "buffer '%s' has type %s, which the "
         "interpreter cannot store",
         b->name, dtype_name(b->dtype, tb));
    return -1;
  }
  if (b->ndim < 0 || b->ndim > TS_MAX_DIMS) {
    FAIL(in, TS_EINVAL, "buffer '%s' has %d dimensions", b->name, b->ndim);
    return -1;
  }
  rbuf r = {.name = b->name,
            .skind = (uint8_t)storage_kind(cls, b->dtype.bits),
            .esize = (int)ts_dtype_elem_bytes(b->dtype),
            .ndim = b->ndim,
            .shared = -1};
  int64_t last = 0; /* largest element offset */
  bool empty = false;
  for (int d = b->ndim - 1; d >= 0; d--) {
    r.shape[d] = b->shape[d];
    if (b->shape[d] < 0) {
      FAIL(in, TS_EINVAL, "buffer '%s' has negative extent %lld in dim %d",
           b->name, (long long)b->shape[d], d);
      return -1;
    }
    if (b->shape[d] == 0) empty = true;
  }
  for (int d = b->ndim - 1; d >= 0; d--) {
    if (b->has_strides) {
      r.strides[d] = b->strides[d];
      if (r.strides[d] < 0) {
        FAIL(in, TS_EUNSUPPORTED,
             "buffer '%s' has negative stride %lld in "
             "dim %d",
             b->name, (long long)r.strides[d], d);
        return -1;
      }
    } else if (d == b->ndim - 1) {
      r.strides[d] = 1;
    } else if (__builtin_mul_overflow(r.strides[d + 1], r.shape[d + 1],
                                      &r.strides[d])) {
      goto too_big;
    }
    int64_t span;
    if (!empty &&
        (__builtin_mul_overflow(r.shape[d] - 1, r.strides[d], &span) ||
         __builtin_add_overflow(last, span, &last)))
      goto too_big;
  }
  int64_t bytes;
  if (__builtin_mul_overflow(empty ? 0 : last + 1, (int64_t)r.esize, &bytes))
    goto too_big;
  if (limit && bytes > limit) {
    FAIL(in, TS_ENOMEM,
         "buffer '%s' needs %lld bytes, over the interpreter's "
         "limit of %lld",
         b->name, (long long)bytes, (long long)limit);
    return -1;
  }
  r.bytes = bytes ? bytes : 1;
  if (in->gpu && limit && b->scope && !strcmp(b->scope, "shared") &&
      (r.shared = define_shared(in, &r)) < 0)
    return -1;
  if (in->n_bufs == in->cap_bufs) {
    int cap = in->cap_bufs ? in->cap_bufs * 2 : 16;
    rbuf *nb = realloc(in->bufs, sizeof *nb * (size_t)cap);
    if (!nb) {
      FAIL(in, TS_ENOMEM, "out of memory");
      return -1;
    }
    in->bufs = nb;
    in->cap_bufs = cap;
  }
  int slot = in->n_bufs++;
  in->bufs[slot] = r;
  *old = ts_node_map_get(in->buf_slot, b);
  ts_node_map_put(in->buf_slot, b, (void *)(intptr_t)(slot + 1));
  return slot;
too_big:
  FAIL(in, limit ? TS_ENOMEM : TS_EINVAL, "buffer '%s' is too large", b->name);
  return -1;
}

/* GPU mode: a loop bound to blockIdx/threadIdx does not iterate (the
 * launch's dimension on its axis is the largest such extent); vthread is a
 * serial loop. The same rules as the cuda code generator. */
static bool compile_launch_axis(interp *in, const ts_stmt *s, cstmt *c) {
  static const char *const tags[] = {"blockIdx.x",  "blockIdx.y",
                                     "blockIdx.z",  "threadIdx.x",
                                     "threadIdx.y", "threadIdx.z"};
  const char *tag = s->u.loop.thread_tag ? s->u.loop.thread_tag : "";
  const char *name = s->u.loop.var->u.var.name;
  if (!strcmp(tag, "vthread")) return true;
  int axis = -1;
  for (int i = 0; i < 6; i++)
    if (!strcmp(tag, tags[i])) axis = i;
  int64_t ext = 0;
  if (axis < 0) {
    FAIL(in, TS_EINVAL, "unknown thread tag '%s' on loop '%s'", tag, name);
    return false;
  }
  if (!ts_expr_is_const_int(s->u.loop.extent, &ext) || ext < 1) {
    FAIL(in, TS_EINVAL,
         "loop '%s' bound to '%s' needs a constant positive extent", name, tag);
    return false;
  }
  int64_t *dim =
      axis < 3 ? &in->launch.grid[axis] : &in->launch.block[axis - 3];
  if (ext > *dim) *dim = ext;
  c->launch_axis = (uint8_t)(axis + 1);
  return true;
}

static cstmt *new_cstmt(interp *in, const ts_stmt *s) {
  cstmt *c = ialloc(in, sizeof *c);
  if (c) c->kind = s->kind;
  return c;
}

/* Compiles a store's or load's index list against buffer slot `slot`. */
static bool compile_indices(interp *in, int slot, ts_expr *const *idx, int n,
                            cexpr ***out, int depth) {
  const rbuf *rb = &in->bufs[slot];
  if (n != rb->ndim) {
    FAIL(in, TS_EINVAL,
         "store to buffer '%s' with %d indices; it has %d "
         "dimensions",
         rb->name, n, rb->ndim);
    return false;
  }
  *out = n ? ialloc(in, sizeof **out * (size_t)n) : NULL;
  if (n && !*out) return false;
  for (int d = 0; d < n; d++) {
    cexpr *c = compile_expr(in, idx[d], depth + 1);
    if (!c) return false;
    if (!is_int_class(c->cls) || c->cls == VC_BOOL) {
      FAIL(in, TS_EINVAL,
           "index %d of a store to buffer '%s' is not an "
           "integer",
           d, in->bufs[slot].name);
      return false;
    }
    (*out)[d] = c;
  }
  return true;
}

static cstmt *compile_realize(interp *in, const ts_stmt *s, int depth) {
  const ts_block *b = s->u.realize.block;
  if (!b) {
    FAIL(in, TS_EINVAL, "block-realize without a block");
    return NULL;
  }
  cstmt *c = new_cstmt(in, s);
  cblock *k = c ? c->blk = ialloc(in, sizeof *k) : NULL;
  if (!k) return NULL;
  k->name = b->name;
  k->n_iters = b->n_iters;
  if (s->u.realize.n_values != b->n_iters) {
    FAIL(in, TS_EINVAL,
         "block '%s' has %d iter vars but is realized with "
         "%d values",
         b->name, b->n_iters, s->u.realize.n_values);
    return NULL;
  }
  /* Iter values, predicate and domains are in the enclosing scope. */
  int n = b->n_iters ? b->n_iters : 1;
  if (!(k->iter_slot = ialloc(in, sizeof *k->iter_slot * (size_t)n)) ||
      !(k->iter_reduce = ialloc(in, (size_t)n)) ||
      !(k->iter_name = ialloc(in, sizeof *k->iter_name * (size_t)n)) ||
      !(k->values = ialloc(in, sizeof *k->values * (size_t)n)) ||
      !(k->dom_min = ialloc(in, sizeof *k->dom_min * (size_t)n)) ||
      !(k->dom_ext = ialloc(in, sizeof *k->dom_ext * (size_t)n)))
    return NULL;
  for (int i = 0; i < b->n_iters; i++) {
    const iter_var *iv = &b->iters[i];
    if (!(k->values[i] = compile_scalar(in, s->u.realize.values[i], false,
                                        "a block iter value", depth + 1)) ||
        !(k->dom_min[i] = compile_scalar(in, iv->dom.min, false,
                                         "an iter domain bound", depth + 1)) ||
        !(k->dom_ext[i] = compile_scalar(in, iv->dom.extent, false,
                                         "an iter domain bound", depth + 1)))
      return NULL;
    k->iter_reduce[i] = iv->kind == TS_ITER_REDUCE;
    k->iter_name[i] =
        iv->var && iv->var->kind == TS_EXPR_VAR ? iv->var->u.var.name : "?";
  }
  if (s->u.realize.predicate &&
      !(k->predicate = compile_scalar(in, s->u.realize.predicate, true,
                                      "a block predicate", depth + 1)))
    return NULL;

  const char *outer = in->block;
  in->block = b->name;
  void **old_vars = calloc((size_t)n, sizeof *old_vars);
  int na = b->n_allocs ? b->n_allocs : 1;
  void **old_bufs = calloc((size_t)na, sizeof *old_bufs);
  k->alloc_slot = ialloc(in, sizeof *k->alloc_slot * (size_t)na);
  int bound_vars = 0, bound_bufs = 0;
  if (!old_vars || !old_bufs || !k->alloc_slot) {
    FAIL(in, TS_ENOMEM, "out of memory");
    goto done;
  }
  for (; bound_vars < b->n_iters; bound_vars++) {
    const ts_expr *v = b->iters[bound_vars].var;
    if (!v || v->kind != TS_EXPR_VAR || class_of(v->dtype) < 0 ||
        !is_int_class(class_of(v->dtype)) || v->dtype.lanes != 1) {
      FAIL(in, TS_EINVAL, "iter var %d is not a scalar integer variable",
           bound_vars);
      goto done;
    }
    old_vars[bound_vars] = bind_var(in, v, &k->iter_slot[bound_vars]);
  }
  for (; bound_bufs < b->n_allocs; bound_bufs++) {
    int slot = interp_define_buffer(in, b->allocs[bound_bufs], MAX_ALLOC_BYTES,
                                    &old_bufs[bound_bufs]);
    if (slot < 0) goto done;
    k->alloc_slot[bound_bufs] = slot;
  }
  k->n_allocs = b->n_allocs;
  if (b->init && !(k->init = interp_compile_stmt(in, b->init, depth + 1)))
    goto done;
  if (b->body) k->body = interp_compile_stmt(in, b->body, depth + 1);
done:
  while (bound_bufs-- > 0)
    ts_node_map_put(in->buf_slot, b->allocs[bound_bufs], old_bufs[bound_bufs]);
  while (bound_vars-- > 0)
    unbind_var(in, b->iters[bound_vars].var, old_vars[bound_vars]);
  free(old_vars);
  free(old_bufs);
  if (!in->failed) in->block = outer;
  return in->failed ? NULL : c;
}

/* Compiles s; NULL statements compile to NULL (nothing to run), so callers
 * check in->failed rather than the result. */
cstmt *interp_compile_stmt(interp *in, const ts_stmt *s, int depth) {
  char tb[32], tb2[32];
  if (!s || in->failed) return NULL;
  if (depth > MAX_DEPTH) {
    FAIL(in, TS_EUNSUPPORTED, "statements nested deeper than %d", MAX_DEPTH);
    return NULL;
  }
  if (depth > in->launch.max_depth) in->launch.max_depth = depth;
  cstmt *c;
  switch ((ts_stmt_kind)s->kind) {
  case TS_STMT_FOR: {
    const ts_expr *var = s->u.loop.var;
    if (!var || var->kind != TS_EXPR_VAR || var->dtype.lanes != 1 ||
        class_of(var->dtype) < 0 || !is_int_class(class_of(var->dtype)) ||
        var->dtype.code == TS_DT_BOOL) {
      FAIL(in, TS_EINVAL,
           "a loop variable must be a scalar integer "
           "variable");
      return NULL;
    }
    if (!(c = new_cstmt(in, s))) return NULL;
    if (!(c->a = compile_scalar(in, s->u.loop.min, false, "a loop minimum",
                                depth + 1)) ||
        !(c->b = compile_scalar(in, s->u.loop.extent, false, "a loop extent",
                                depth + 1)))
      return NULL;
    c->var_cls = (uint8_t)class_of(var->dtype);
    c->var_bits = var->dtype.bits;
    if (in->gpu && s->u.loop.kind == TS_FOR_THREAD &&
        !compile_launch_axis(in, s, c))
      return NULL;
    void *old = bind_var(in, var, &c->slot);
    c->body = interp_compile_stmt(in, s->u.loop.body, depth + 1);
    unbind_var(in, var, old);
    break;
  }
  case TS_STMT_BLOCK_REALIZE: return compile_realize(in, s, depth);
  case TS_STMT_STORE: {
    if (!(c = new_cstmt(in, s))) return NULL;
    const ts_buffer *b = s->u.store.buffer;
    if ((c->slot = buffer_slot(in, b, "store")) < 0) return NULL;
    if (!(c->a = compile_expr(in, s->u.store.value, depth + 1))) return NULL;
    if (!ts_dtype_eq(ts_dtype_scalar(s->u.store.value->dtype), b->dtype)) {
      FAIL(in, TS_EINVAL, "store of a %s value to %s buffer '%s'",
           dtype_name(s->u.store.value->dtype, tb), dtype_name(b->dtype, tb2),
           b->name);
      return NULL;
    }
    if (!compile_indices(in, c->slot, s->u.store.indices, s->u.store.n_indices,
                         &c->idx, depth))
      return NULL;
    c->n_idx = s->u.store.n_indices;
    c->lanes = c->a->lanes;
    for (int d = 0; d < c->n_idx; d++)
      if (c->idx[d]->lanes > c->lanes) c->lanes = c->idx[d]->lanes;
    if (c->lanes > in->max_lanes) in->max_lanes = c->lanes;
    break;
  }
  case TS_STMT_SEQ: {
    if (!(c = new_cstmt(in, s))) return NULL;
    c->n_items = s->u.seq.n;
    if (c->n_items > 0 &&
        !(c->items = ialloc(in, sizeof *c->items * (size_t)c->n_items)))
      return NULL;
    for (int i = 0; i < c->n_items; i++)
      c->items[i] = interp_compile_stmt(in, s->u.seq.items[i], depth + 1);
    break;
  }
  case TS_STMT_IF:
    if (!(c = new_cstmt(in, s))) return NULL;
    if (!(c->a = compile_scalar(in, s->u.cond.cond, true, "an if condition",
                                depth + 1)))
      return NULL;
    c->body = interp_compile_stmt(in, s->u.cond.then_s, depth + 1);
    c->else_s = interp_compile_stmt(in, s->u.cond.else_s, depth + 1);
    break;
  case TS_STMT_EVALUATE:
    if (!(c = new_cstmt(in, s))) return NULL;
    if (!(c->a = compile_expr(in, s->u.eval.value, depth + 1))) return NULL;
    c->lanes = c->a->lanes;
    break;
  case TS_STMT_LET: {
    const ts_expr *var = s->u.let.var;
    if (!var || var->kind != TS_EXPR_VAR) {
      FAIL(in, TS_EINVAL, "let binds something that is not a variable");
      return NULL;
    }
    if (!(c = new_cstmt(in, s))) return NULL;
    if (!(c->a = compile_expr(in, s->u.let.value, depth + 1))) return NULL;
    if (class_of(var->dtype) != c->a->cls) {
      FAIL(in, TS_EINVAL, "let binds %s variable '%s' to a %s value",
           dtype_name(var->dtype, tb), var->u.var.name,
           dtype_name(s->u.let.value->dtype, tb2));
      return NULL;
    }
    c->lanes = var->dtype.lanes;
    void *old = bind_var(in, var, &c->slot);
    c->body = interp_compile_stmt(in, s->u.let.body, depth + 1);
    unbind_var(in, var, old);
    break;
  }
  case TS_STMT_ALLOCATE: {
    if (!(c = new_cstmt(in, s))) return NULL;
    void *old;
    if ((c->slot = interp_define_buffer(in, s->u.alloc.buffer, MAX_ALLOC_BYTES,
                                        &old)) < 0)
      return NULL;
    c->body = interp_compile_stmt(in, s->u.alloc.body, depth + 1);
    ts_node_map_put(in->buf_slot, s->u.alloc.buffer, old);
    break;
  }
  default:
    FAIL(in, TS_EINVAL, "unknown statement kind %d", s->kind);
    return NULL;
  }
  return in->failed ? NULL : c;
}
