/*
 * te.c — the tensor-expression builder: placeholders and computed stages
 * turned into a PrimFunc. Every node is built directly in the arena of the
 * function under construction. Each stage becomes one loop nest (a serial
 * loop per spatial axis, then per reduce axis, named after the axis) around
 * one block whose iter vars are "v" + axis name, bound to the loop vars; the
 * body of the function is a root block that allocates every stage buffer
 * that is not a parameter and runs the stage nests in creation order.
 * Misuse of the builder (bad shapes, wrong stage, dtype mismatch, ...) is
 * recorded as a sticky error and reported by ts_te_finish, so callers can
 * chain calls without checking each one. Out of memory is chained the same
 * way: ts_te_begin gives NULL, the other functions give NULL for a NULL
 * builder or stage (and for what the arena had no memory for), and
 * ts_te_finish reports TS_ENOMEM.
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct reduce_axis {
  ts_expr *iter; /* block iter var ("v" + name) */
  ts_expr *loop; /* loop var */
  int64_t extent;
} reduce_axis;

struct ts_te_stage {
  ts_te *te;
  ts_buffer *buf;
  int index;                   /* creation order among stages */
  ts_expr *iters[TS_MAX_DIMS]; /* block iter vars of the spatial axes */
  ts_expr *loops[TS_MAX_DIMS]; /* loop vars of the spatial axes */
  int order[TS_MAX_DIMS];      /* axis of each spatial loop, outermost first */
  bool ordered;                /* ts_te_loop_order was given */
  reduce_axis *raxes;          /* reduce axes, in creation order */
  int n_raxes, cap_raxes;
  ts_stmt *nest; /* the loop nest, once finished */
};

struct ts_te {
  ts_func *func; /* the function under construction; owns everything */
  ts_arena *a;
  ts_buffer **inputs; /* placeholders, in creation order */
  int n_inputs, cap_inputs;
  ts_te_stage **stages; /* computed stages, in creation order */
  int n_stages, cap_stages;
  bool failed;   /* a misuse was recorded */
  char msg[512]; /* the first misuse */
};

/* Records the first misuse; later ones are usually consequences. */
static void fail(ts_te *te, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void fail(ts_te *te, const char *fmt, ...) {
  if (te->failed) return;
  te->failed = true;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(te->msg, sizeof te->msg, fmt, ap);
  va_end(ap);
}

/* items with room for one more (NULL when out of memory: items and *cap
 * are then unchanged). */
static void *grow(ts_arena *a, void *items, int n, int *cap, size_t elem) {
  if (n < *cap) return items;
  int ncap = *cap ? *cap * 2 : 8;
  void *p = ts_arena_alloc(a, elem * (size_t)ncap);
  if (!p) return NULL;
  if (n) memcpy(p, items, elem * (size_t)n);
  *cap = ncap;
  return p;
}

static bool is_identifier(const char *s) {
  if (!s || !*s) return false;
  if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
    return false;
  for (const char *p = s + 1; *p; p++)
    if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
          (*p >= '0' && *p <= '9') || *p == '_'))
      return false;
  return true;
}

/* The stage whose buffer is b, or NULL. */
static ts_te_stage *stage_of(const ts_te *te, const ts_buffer *b) {
  for (int i = 0; i < te->n_stages; i++)
    if (te->stages[i]->buf == b) return te->stages[i];
  return NULL;
}

static bool is_input(const ts_te *te, const ts_buffer *b) {
  for (int i = 0; i < te->n_inputs; i++)
    if (te->inputs[i] == b) return true;
  return false;
}

static bool name_taken(const ts_te *te, const char *name) {
  for (int i = 0; i < te->n_inputs; i++)
    if (strcmp(te->inputs[i]->name, name) == 0) return true;
  for (int i = 0; i < te->n_stages; i++)
    if (strcmp(te->stages[i]->buf->name, name) == 0) return true;
  return strcmp(name, "root") == 0;
}

/* Validates a tensor declaration; on a bad shape records the misuse and
 * returns a substitute shape so that the caller still gets a buffer. */
static int check_tensor(ts_te *te, const char *what, const char *name,
                        const int64_t *shape, int ndim, int64_t *fixed) {
  if (!is_identifier(name)) {
    fail(te, "%s name '%s' is not an identifier", what, name ? name : "(null)");
  } else if (name_taken(te, name)) {
    fail(te, "%s name '%s' is already used", what, name);
  }
  if (ndim < 0 || ndim > TS_MAX_DIMS || (ndim > 0 && !shape)) {
    fail(te, "%s '%s': rank %d is outside [0, %d]", what, name ? name : "",
         ndim, TS_MAX_DIMS);
    ndim = ndim < 0 || !shape ? 0 : TS_MAX_DIMS;
  }
  for (int i = 0; i < ndim; i++) {
    fixed[i] = shape[i];
    if (shape[i] <= 0) {
      fail(te, "%s '%s': dimension %d has non-positive size %lld", what,
           name ? name : "", i, (long long)shape[i]);
      fixed[i] = 1;
    }
  }
  return ndim;
}

ts_te *ts_te_begin(const char *func_name) {
  ts_func *f = ts_func_new(func_name ? func_name : "main");
  if (!f) return NULL;
  ts_arena *a = ts_func_arena(f);
  ts_te *te = ts_arena_alloc(a, sizeof *te);
  if (!te) {
    ts_func_free(f);
    return NULL;
  }
  te->func = f;
  te->a = a;
  if (func_name && !is_identifier(func_name))
    fail(te, "function name '%s' is not an identifier", func_name);
  return te;
}

ts_arena *ts_te_arena(ts_te *te) { return te ? te->a : NULL; }

ts_buffer *ts_te_placeholder(ts_te *te, const char *name, ts_dtype t,
                             const int64_t *shape, int ndim) {
  if (!te) return NULL;
  int64_t fixed[TS_MAX_DIMS];
  ndim = check_tensor(te, "placeholder", name, shape, ndim, fixed);
  if (!ts_dtype_is_valid(t) || ts_dtype_is_handle(t))
    fail(te, "placeholder '%s' has an unusable dtype", name ? name : "");
  ts_buffer *b = ts_buffer_new(te->a, is_identifier(name) ? name : "input", t,
                               fixed, ndim);
  ts_buffer **inputs = grow(te->a, te->inputs, te->n_inputs, &te->cap_inputs,
                            sizeof *te->inputs);
  if (!b || !inputs) return NULL;
  te->inputs = inputs;
  te->inputs[te->n_inputs++] = b;
  return b;
}

static const char *default_axis_name(ts_arena *a, int i) {
  static const char *const names[] = {"i", "j", "k", "l"};
  if (i < 4) return names[i];
  return ts_arena_printf(a, "i%d", i);
}

ts_te_stage *ts_te_compute(ts_te *te, const char *name, ts_dtype t,
                           const int64_t *shape, int ndim,
                           const char *const *axis_names) {
  if (!te) return NULL;
  int64_t fixed[TS_MAX_DIMS];
  ndim = check_tensor(te, "stage", name, shape, ndim, fixed);
  if (!ts_dtype_is_valid(t) || ts_dtype_is_handle(t) || t.lanes != 1)
    fail(te, "stage '%s' has an unusable dtype", name ? name : "");
  ts_te_stage *st = ts_arena_alloc(te->a, sizeof *st);
  if (!st) return NULL;
  st->te = te;
  st->buf = ts_buffer_new(te->a, is_identifier(name) ? name : "stage", t, fixed,
                          ndim);
  if (!st->buf) return NULL;
  st->index = te->n_stages;
  for (int i = 0; i < ndim; i++) {
    const char *ax = axis_names ? axis_names[i] : default_axis_name(te->a, i);
    if (!is_identifier(ax)) {
      fail(te, "stage '%s': axis %d name '%s' is not an identifier",
           st->buf->name, i, ax ? ax : "(null)");
      ax = default_axis_name(te->a, i);
    }
    if (!ax) return NULL; /* no memory for a default name */
    for (int j = 0; j < i; j++)
      if (strcmp(ts_var_name(st->loops[j]), ax) == 0)
        fail(te, "stage '%s': axis name '%s' is used twice", st->buf->name, ax);
    st->loops[i] = ts_var(te->a, ax, TS_INDEX);
    st->iters[i] = ts_var(te->a, ts_arena_printf(te->a, "v%s", ax), TS_INDEX);
    if (!st->loops[i] || !st->iters[i]) return NULL;
  }
  ts_te_stage **stages = grow(te->a, te->stages, te->n_stages, &te->cap_stages,
                              sizeof *te->stages);
  if (!stages) return NULL;
  te->stages = stages;
  te->stages[te->n_stages++] = st;
  return st;
}

void ts_te_loop_order(ts_te_stage *st, const int *order) {
  if (!st) return;
  int nd = st->buf->ndim;
  bool seen[TS_MAX_DIMS] = {false};
  for (int i = 0; i < nd; i++) {
    if (order[i] < 0 || order[i] >= nd || seen[order[i]]) {
      fail(st->te, "stage '%s': loop order is not a permutation of its %d axes",
           st->buf->name, nd);
      return;
    }
    seen[order[i]] = true;
  }
  if (st->nest) {
    fail(st->te, "stage '%s': loop order set after its value", st->buf->name);
    return;
  }
  memcpy(st->order, order, sizeof(int) * (size_t)nd);
  st->ordered = true;
}

ts_expr *ts_te_axis(ts_te_stage *st, int i) {
  if (!st) return NULL;
  if (i < 0 || i >= st->buf->ndim) {
    fail(st->te, "stage '%s' has no spatial axis %d (rank %d)", st->buf->name,
         i, st->buf->ndim);
    return ts_index(st->te->a, 0);
  }
  return st->iters[i];
}

ts_expr *ts_te_reduce_axis(ts_te_stage *st, const char *name, int64_t extent) {
  if (!st) return NULL;
  ts_te *te = st->te;
  const char *nm = name;
  if (!nm && !(nm = ts_arena_printf(te->a, "r%d", st->n_raxes))) return NULL;
  if (!is_identifier(nm)) {
    fail(te, "stage '%s': reduce axis name '%s' is not an identifier",
         st->buf->name, nm);
    nm = ts_arena_printf(te->a, "r%d", st->n_raxes);
    if (!nm) return NULL;
  }
  if (st->nest)
    fail(te, "stage '%s': reduce axis '%s' added after the stage was finished",
         st->buf->name, nm);
  if (extent <= 0) {
    fail(te, "stage '%s': reduce axis '%s' has non-positive extent %lld",
         st->buf->name, nm, (long long)extent);
    extent = 1;
  }
  for (int i = 0; i < st->buf->ndim; i++)
    if (strcmp(ts_var_name(st->loops[i]), nm) == 0)
      fail(te, "stage '%s': axis name '%s' is used twice", st->buf->name, nm);
  for (int i = 0; i < st->n_raxes; i++)
    if (strcmp(ts_var_name(st->raxes[i].loop), nm) == 0)
      fail(te, "stage '%s': axis name '%s' is used twice", st->buf->name, nm);
  reduce_axis *raxes =
      grow(te->a, st->raxes, st->n_raxes, &st->cap_raxes, sizeof *st->raxes);
  if (!raxes) return NULL;
  st->raxes = raxes;
  reduce_axis *r = &st->raxes[st->n_raxes];
  r->loop = ts_var(te->a, nm, TS_INDEX);
  r->iter = ts_var(te->a, ts_arena_printf(te->a, "v%s", nm), TS_INDEX);
  r->extent = extent;
  if (!r->loop || !r->iter) return NULL;
  st->n_raxes++;
  return r->iter;
}

ts_expr *ts_te_load(ts_te *te, ts_buffer *b, ts_expr *const *indices, int n) {
  if (!te) return NULL;
  if (!b) {
    fail(te, "load from a NULL buffer");
    return ts_int(te->a, TS_INT32, 0);
  }
  if (!is_input(te, b) && !stage_of(te, b))
    fail(te, "load from buffer '%s', which is not a tensor of this builder",
         b->name);
  if (n != b->ndim)
    fail(te, "load from '%s' with %d indices; it has rank %d", b->name, n,
         b->ndim);
  return ts_load(te->a, b, indices, n);
}

/* ---- checking a stage's value ---- */

typedef struct value_check {
  ts_te_stage *st;
} value_check;

static bool is_stage_iter(const ts_te_stage *st, const ts_expr *v) {
  for (int i = 0; i < st->buf->ndim; i++)
    if (st->iters[i] == v) return true;
  for (int i = 0; i < st->n_raxes; i++)
    if (st->raxes[i].iter == v) return true;
  return false;
}

static void check_value_node(void *ctx, ts_expr *e) {
  value_check *c = ctx;
  ts_te_stage *st = c->st;
  ts_te *te = st->te;
  if (e->kind == TS_EXPR_LOAD || e->kind == TS_EXPR_ADDRESS_OF) {
    ts_buffer *b = e->u.load.buffer;
    ts_te_stage *src = stage_of(te, b);
    if (src == st)
      fail(te, "stage '%s' reads its own output", st->buf->name);
    else if (src && src->index > st->index)
      fail(te, "stage '%s' reads stage '%s', which is created after it",
           st->buf->name, b->name);
    else if (!src && !is_input(te, b))
      fail(te,
           "stage '%s' reads buffer '%s', which is not a tensor of this "
           "builder",
           st->buf->name, b->name);
  } else if (e->kind == TS_EXPR_VAR) {
    if (!is_stage_iter(st, e))
      fail(te, "stage '%s' uses variable '%s', which is not one of its axes",
           st->buf->name, e->u.var.name);
  } else if (e->kind == TS_EXPR_LET) {
    fail(te, "stage '%s': let expressions are not supported in stage values",
         st->buf->name);
  }
}

static bool start_finish(ts_te_stage *st, ts_expr *value, const char *how) {
  ts_te *te = st->te;
  if (st->nest) {
    fail(te, "stage '%s' is finished twice", st->buf->name);
    return false;
  }
  if (!value) {
    fail(te, "stage '%s': %s with a NULL value", st->buf->name, how);
    return false;
  }
  if (!ts_dtype_eq(value->dtype, st->buf->dtype)) {
    char want[32], got[32];
    fail(te, "stage '%s': value has dtype %s, the stage has %s", st->buf->name,
         ts_dtype_str(value->dtype, got), ts_dtype_str(st->buf->dtype, want));
  }
  value_check c = {st};
  ts_expr_walk(value, check_value_node, &c);
  return true;
}

/* Wraps the block in its loop nest and records it on the stage. */
static void build_nest(ts_te_stage *st, ts_stmt *body, ts_stmt *init) {
  ts_arena *a = st->te->a;
  int nd = st->buf->ndim, nr = st->n_raxes;
  ts_block *blk = ts_block_new(a, st->buf->name);
  ts_expr **vals = ts_arena_alloc(a, sizeof *vals * (size_t)(nd + nr + 1));
  if (!blk || !vals) return; /* out of memory: ts_te_finish reports it */
  for (int i = 0; i < nd; i++) {
    ts_range dom = {ts_index(a, 0), ts_index(a, st->buf->shape[i])};
    ts_block_add_iter_var(a, blk, st->iters[i], dom, TS_ITER_SPATIAL);
    vals[i] = st->loops[i];
  }
  for (int i = 0; i < nr; i++) {
    ts_range dom = {ts_index(a, 0), ts_index(a, st->raxes[i].extent)};
    ts_block_add_iter_var(a, blk, st->raxes[i].iter, dom, TS_ITER_REDUCE);
    vals[nd + i] = st->raxes[i].loop;
  }
  ts_block_set_body(blk, body);
  ts_block_set_init(blk, init);
  ts_stmt *s = ts_block_realize(a, blk, vals, nd + nr, NULL);
  for (int i = nr - 1; i >= 0; i--)
    s = ts_for(a, st->raxes[i].loop, ts_index(a, 0),
               ts_index(a, st->raxes[i].extent), TS_FOR_SERIAL, NULL, s);
  for (int i = nd - 1; i >= 0; i--) {
    int ax = st->ordered ? st->order[i] : i;
    s = ts_for(a, st->loops[ax], ts_index(a, 0),
               ts_index(a, st->buf->shape[ax]), TS_FOR_SERIAL, NULL, s);
  }
  st->nest = s;
}

ts_buffer *ts_te_set_value(ts_te_stage *st, ts_expr *value) {
  if (!st) return NULL;
  ts_te *te = st->te;
  if (!start_finish(st, value, "set_value")) return st->buf;
  if (st->n_raxes > 0)
    fail(te, "stage '%s' has reduce axes; finish it with ts_te_set_reduce",
         st->buf->name);
  ts_stmt *store = ts_store(te->a, st->buf, st->iters, st->buf->ndim, value);
  build_nest(st, store, NULL);
  return st->buf;
}

/* The identity of reducer r in dtype t. */
static ts_expr *reducer_identity(ts_arena *a, ts_te_reducer r, ts_dtype t) {
  bool fl = ts_dtype_is_float(t);
  if (r == TS_TE_SUM) return fl ? ts_float(a, t, 0.0) : ts_int(a, t, 0);
  bool lowest = r == TS_TE_MAX;
  if (fl) return ts_float(a, t, lowest ? -INFINITY : INFINITY);
  if (ts_dtype_is_bool(t)) return ts_bool(a, !lowest);
  if (t.code == TS_DT_UINT)
    return ts_int(a, t, lowest ? 0 : -1); /* -1 wraps to the maximum */
  if (t.bits >= 64) return ts_int(a, t, lowest ? INT64_MIN : INT64_MAX);
  int64_t hi = ((int64_t)1 << (t.bits - 1)) - 1;
  return ts_int(a, t, lowest ? -hi - 1 : hi);
}

ts_buffer *ts_te_set_reduce(ts_te_stage *st, ts_te_reducer r, ts_expr *value) {
  if (!st) return NULL;
  ts_te *te = st->te;
  if (!start_finish(st, value, "set_reduce")) return st->buf;
  if (r != TS_TE_SUM && r != TS_TE_MAX && r != TS_TE_MIN) {
    fail(te, "stage '%s': unknown reducer %d", st->buf->name, (int)r);
    r = TS_TE_SUM;
  }
  ts_arena *a = te->a;
  int nd = st->buf->ndim;
  ts_expr *cur = ts_load(a, st->buf, st->iters, nd);
  ts_expr_kind k = r == TS_TE_SUM   ? TS_EXPR_ADD
                   : r == TS_TE_MAX ? TS_EXPR_MAX
                                    : TS_EXPR_MIN;
  ts_stmt *store =
      ts_store(a, st->buf, st->iters, nd, ts_binary_raw(a, k, cur, value));
  ts_stmt *init = ts_store(a, st->buf, st->iters, nd,
                           reducer_identity(a, r, st->buf->dtype));
  build_nest(st, store, init);
  return st->buf;
}

ts_func *ts_te_finish(ts_te *te, ts_buffer *const *params, int n_params,
                      ts_error *err) {
  if (!te) {
    /* ts_te_begin gives NULL only when out of memory */
    TS_ERR(err, TS_ENOMEM, "te: out of memory");
    return NULL;
  }
  ts_func *f = te->func;
  const char *fname = ts_func_name(f);
  int rc = TS_OK;
  if (ts_arena_failed(te->a)) {
    rc = TS_ERR(err, TS_ENOMEM, "te '%s': out of memory", fname);
    goto fail;
  }
  if (te->failed) {
    rc = TS_ERR(err, TS_EINVAL, "te '%s': %s", fname, te->msg);
    goto fail;
  }
  if (te->n_stages == 0) {
    rc = TS_ERR(err, TS_EINVAL, "te '%s': no computed stages", fname);
    goto fail;
  }
  for (int i = 0; i < te->n_stages; i++)
    if (!te->stages[i]->nest) {
      rc = TS_ERR(err, TS_EINVAL,
                  "te '%s': stage '%s' has no value (call ts_te_set_value or "
                  "ts_te_set_reduce)",
                  fname, te->stages[i]->buf->name);
      goto fail;
    }
  if (n_params < 0 || (n_params > 0 && !params)) {
    rc = TS_ERR(err, TS_EINVAL, "te '%s': bad parameter list", fname);
    goto fail;
  }
  bool has_output = false;
  for (int i = 0; i < n_params; i++) {
    ts_buffer *b = params[i];
    if (!b) {
      rc = TS_ERR(err, TS_EINVAL, "te '%s': parameter %d is NULL", fname, i);
      goto fail;
    }
    if (!is_input(te, b) && !stage_of(te, b)) {
      rc = TS_ERR(err, TS_EINVAL,
                  "te '%s': parameter %d ('%s') is not a placeholder or stage "
                  "of this builder",
                  fname, i, b->name);
      goto fail;
    }
    for (int j = 0; j < i; j++)
      if (params[j] == b) {
        rc = TS_ERR(err, TS_EINVAL,
                    "te '%s': tensor '%s' is listed twice as a parameter "
                    "(%d and %d)",
                    fname, b->name, j, i);
        goto fail;
      }
    if (stage_of(te, b)) has_output = true;
  }
  for (int i = 0; i < te->n_inputs; i++) {
    bool listed = false;
    for (int j = 0; j < n_params; j++)
      if (params[j] == te->inputs[i]) listed = true;
    if (!listed) {
      rc = TS_ERR(err, TS_EINVAL,
                  "te '%s': placeholder '%s' is not listed as a parameter",
                  fname, te->inputs[i]->name);
      goto fail;
    }
  }
  if (!has_output) {
    rc = TS_ERR(err, TS_EINVAL,
                "te '%s': no stage is a parameter, so the function has no "
                "output",
                fname);
    goto fail;
  }

  ts_arena *a = te->a;
  ts_block *root = ts_block_new(a, "root");
  ts_stmt **nests = ts_arena_alloc(a, sizeof *nests * (size_t)te->n_stages);
  if (!root || !nests) {
    rc = TS_ERR(err, TS_ENOMEM, "te '%s': out of memory", fname);
    goto fail;
  }
  for (int i = 0; i < te->n_stages; i++) {
    ts_te_stage *st = te->stages[i];
    nests[i] = st->nest;
    bool is_param = false;
    for (int j = 0; j < n_params; j++)
      if (params[j] == st->buf) is_param = true;
    if (!is_param) ts_block_add_alloc(a, root, st->buf);
  }
  ts_block_set_body(root, te->n_stages == 1 ? nests[0]
                                            : ts_seq(a, nests, te->n_stages));
  for (int i = 0; i < n_params; i++) ts_func_add_param(f, params[i]);
  ts_func_set_body(f, ts_block_realize(a, root, NULL, 0, NULL));
  ts_func_infer_regions(f);
  if (ts_arena_failed(a)) {
    rc = TS_ERR(err, TS_ENOMEM, "te '%s': out of memory", fname);
    goto fail;
  }
  return f;

fail:
  (void)rc;
  ts_func_free(f);
  return NULL;
}

void ts_te_abort(ts_te *te) {
  if (te) ts_func_free(te->func);
}
