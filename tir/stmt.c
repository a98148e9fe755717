/*
 * stmt.c — buffers, statements, blocks, annotations and PrimFuncs:
 * constructors, accessors and the in-place edits schedule primitives use.
 */
#include "internal.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* ---- annotations ---- */

ts_annotation ts_ann_int(const char *key, int64_t v) {
  return (ts_annotation){.key = key, .kind = TS_ANN_INT, .i = v};
}
ts_annotation ts_ann_float(const char *key, double v) {
  return (ts_annotation){.key = key, .kind = TS_ANN_FLOAT, .f = v};
}
ts_annotation ts_ann_string(const char *key, const char *s) {
  return (ts_annotation){.key = key, .kind = TS_ANN_STRING, .s = s};
}

const ts_annotation *ann_list_find(const ann_list *l, const char *key) {
  for (int i = 0; i < l->n; i++)
    if (strcmp(l->items[i].key, key) == 0) return &l->items[i];
  return NULL;
}

void ann_list_set(ts_arena *a, ann_list *l, ts_annotation ann) {
  ts_annotation copy = ann;
  copy.key = ts_arena_strdup(a, ann.key);
  copy.s =
      ann.kind == TS_ANN_STRING ? ts_arena_strdup(a, ann.s ? ann.s : "") : NULL;
  if (!copy.key || (ann.kind == TS_ANN_STRING && !copy.s))
    return; /* out of memory: the arena is failed */
  for (int i = 0; i < l->n; i++)
    if (strcmp(l->items[i].key, ann.key) == 0) {
      l->items[i] = copy;
      return;
    }
  if (l->n == l->cap) {
    int cap = l->cap ? l->cap * 2 : 4;
    ts_annotation *items = ts_arena_alloc(a, sizeof *items * (size_t)cap);
    if (!items) return;
    if (l->n) memcpy(items, l->items, sizeof *items * (size_t)l->n);
    l->items = items;
    l->cap = cap;
  }
  l->items[l->n++] = copy;
}

bool ann_list_remove(ann_list *l, const char *key) {
  for (int i = 0; i < l->n; i++)
    if (strcmp(l->items[i].key, key) == 0) {
      memmove(&l->items[i], &l->items[i + 1],
              sizeof l->items[0] * (size_t)(l->n - i - 1));
      l->n--;
      return true;
    }
  return false;
}

/* ---- buffers ---- */

ts_buffer *ts_buffer_new(ts_arena *a, const char *name, ts_dtype t,
                         const int64_t *shape, int ndim) {
  assert(ndim >= 0 && ndim <= TS_MAX_DIMS);
  ts_buffer *b = ts_arena_alloc(a, sizeof *b);
  if (!b || !(b->name = ts_arena_strdup(a, name ? name : "buf"))) return NULL;
  b->dtype = t;
  b->ndim = ndim;
  for (int i = 0; i < ndim; i++) b->shape[i] = shape[i];
  b->scope = "global";
  b->align = TS_DEFAULT_ALIGN;
  return b;
}

/* A NULL buffer (the result of a constructor or builder call that ran out
 * of memory) has no name, an invalid dtype and rank 0, so code chaining
 * such results reaches the call that reports the failure. */
const char *ts_buffer_name(const ts_buffer *b) { return b ? b->name : NULL; }
ts_dtype ts_buffer_dtype(const ts_buffer *b) {
  return b ? b->dtype : (ts_dtype){0};
}
int ts_buffer_ndim(const ts_buffer *b) { return b ? b->ndim : 0; }
int64_t ts_buffer_dim(const ts_buffer *b, int i) {
  assert(i >= 0 && i < b->ndim);
  return b->shape[i];
}
const int64_t *ts_buffer_shape(const ts_buffer *b) { return b->shape; }
const int64_t *ts_buffer_strides(const ts_buffer *b) {
  return b->has_strides ? b->strides : NULL;
}
int64_t ts_buffer_stride(const ts_buffer *b, int i) {
  assert(i >= 0 && i < b->ndim);
  if (b->has_strides) return b->strides[i];
  int64_t s = 1;
  for (int d = b->ndim - 1; d > i; d--) s *= b->shape[d];
  return s;
}
const char *ts_buffer_scope(const ts_buffer *b) { return b->scope; }
int ts_buffer_align(const ts_buffer *b) { return b->align; }

int64_t ts_buffer_elems(const ts_buffer *b) {
  int64_t n = 1;
  for (int i = 0; i < b->ndim; i++) n *= b->shape[i];
  return n;
}

int64_t ts_buffer_storage_elems(const ts_buffer *b) {
  if (!b->has_strides) return ts_buffer_elems(b);
  int64_t last = 0;
  for (int i = 0; i < b->ndim; i++) {
    if (b->shape[i] == 0) return 0;
    last += (b->shape[i] - 1) * b->strides[i];
  }
  return last + 1;
}

int64_t ts_buffer_bytes(const ts_buffer *b) {
  return ts_buffer_storage_elems(b) * (int64_t)ts_dtype_elem_bytes(b->dtype) *
         b->dtype.lanes;
}

/* The edits below leave the node as it was when the arena has no memory
 * for a string or an array (the arena is then failed). */
void ts_buffer_set_name(ts_arena *a, ts_buffer *b, const char *name) {
  const char *copy = ts_arena_strdup(a, name);
  if (copy || !name) b->name = copy;
}
void ts_buffer_set_strides(ts_arena *a, ts_buffer *b, const int64_t *strides) {
  (void)a;
  b->has_strides = strides != NULL;
  for (int i = 0; i < b->ndim; i++) b->strides[i] = strides ? strides[i] : 0;
}
void ts_buffer_set_scope(ts_arena *a, ts_buffer *b, const char *scope) {
  const char *copy =
      strcmp(scope, "global") == 0 ? "global" : ts_arena_strdup(a, scope);
  if (copy) b->scope = copy;
}
void ts_buffer_set_align(ts_buffer *b, int align) { b->align = align; }

/* ---- statements ---- */

/* A statement of kind k, or NULL when the arena has no memory for it (the
 * arena is failed). The constructors then return NULL, and so they do for
 * a NULL in place of a required operand (the NULL result of a constructor
 * that ran out of memory); a NULL body is allowed. */
static ts_stmt *new_stmt(ts_arena *a, ts_stmt_kind k) {
  ts_stmt *s = ts_arena_alloc(a, sizeof *s);
  if (!s) return NULL;
  s->kind = (uint8_t)k;
  return s;
}

static const char *const stmt_kind_names[TS_STMT_KIND_COUNT] = {
    [TS_STMT_FOR] = "for",     [TS_STMT_BLOCK_REALIZE] = "block",
    [TS_STMT_STORE] = "store", [TS_STMT_SEQ] = "seq",
    [TS_STMT_IF] = "if",       [TS_STMT_EVALUATE] = "evaluate",
    [TS_STMT_LET] = "let",     [TS_STMT_ALLOCATE] = "allocate",
};
const char *ts_stmt_kind_name(ts_stmt_kind k) {
  if ((int)k < 0 || k >= TS_STMT_KIND_COUNT) return "?";
  return stmt_kind_names[k];
}

const char *ts_for_kind_name(ts_for_kind k) {
  switch (k) {
  case TS_FOR_SERIAL: return "serial";
  case TS_FOR_PARALLEL: return "parallel";
  case TS_FOR_VECTORIZED: return "vectorized";
  case TS_FOR_UNROLLED: return "unrolled";
  case TS_FOR_THREAD: return "thread";
  }
  return "?";
}

const char *ts_iter_kind_name(ts_iter_kind k) {
  switch (k) {
  case TS_ITER_SPATIAL: return "spatial";
  case TS_ITER_REDUCE: return "reduce";
  case TS_ITER_OPAQUE: return "opaque";
  }
  return "?";
}

ts_stmt *ts_for(ts_arena *a, ts_expr *var, ts_expr *min, ts_expr *extent,
                ts_for_kind kind, const char *thread_tag, ts_stmt *body) {
  if (!var || !min || !extent) return NULL;
  ts_stmt *s = new_stmt(a, TS_STMT_FOR);
  if (!s) return NULL;
  s->u.loop.var = var;
  s->u.loop.min = min;
  s->u.loop.extent = extent;
  s->u.loop.kind = (uint8_t)kind;
  s->u.loop.thread_tag =
      kind == TS_FOR_THREAD ? ts_arena_strdup(a, thread_tag) : NULL;
  if (kind == TS_FOR_THREAD && thread_tag && !s->u.loop.thread_tag) return NULL;
  s->u.loop.body = body;
  return s;
}

ts_stmt *ts_store(ts_arena *a, ts_buffer *b, ts_expr *const *indices, int n,
                  ts_expr *value) {
  for (int i = 0; i < n; i++)
    if (!indices[i]) return NULL;
  if (!b || !value) return NULL;
  ts_stmt *s = new_stmt(a, TS_STMT_STORE);
  if (!s) return NULL;
  s->u.store.buffer = b;
  s->u.store.indices = arena_copy_ptrs(a, (void *const *)indices, n);
  s->u.store.n_indices = n;
  s->u.store.value = value;
  return n && !s->u.store.indices ? NULL : s;
}

ts_stmt *ts_seq(ts_arena *a, ts_stmt *const *stmts, int n) {
  ts_stmt *s = new_stmt(a, TS_STMT_SEQ);
  if (!s) return NULL;
  s->u.seq.items = arena_copy_ptrs(a, (void *const *)stmts, n);
  s->u.seq.n = n;
  return n && !s->u.seq.items ? NULL : s;
}

ts_stmt *ts_if(ts_arena *a, ts_expr *cond, ts_stmt *then_s, ts_stmt *else_s) {
  if (!cond) return NULL;
  ts_stmt *s = new_stmt(a, TS_STMT_IF);
  if (!s) return NULL;
  s->u.cond.cond = cond;
  s->u.cond.then_s = then_s;
  s->u.cond.else_s = else_s;
  return s;
}

ts_stmt *ts_evaluate(ts_arena *a, ts_expr *value) {
  if (!value) return NULL;
  ts_stmt *s = new_stmt(a, TS_STMT_EVALUATE);
  if (!s) return NULL;
  s->u.eval.value = value;
  return s;
}

ts_stmt *ts_let_stmt(ts_arena *a, ts_expr *var, ts_expr *value, ts_stmt *body) {
  if (!var || !value) return NULL;
  ts_stmt *s = new_stmt(a, TS_STMT_LET);
  if (!s) return NULL;
  s->u.let.var = var;
  s->u.let.value = value;
  s->u.let.body = body;
  return s;
}

ts_stmt *ts_allocate(ts_arena *a, ts_buffer *b, ts_stmt *body) {
  if (!b) return NULL;
  ts_stmt *s = new_stmt(a, TS_STMT_ALLOCATE);
  if (!s) return NULL;
  s->u.alloc.buffer = b;
  s->u.alloc.body = body;
  return s;
}

ts_stmt *ts_block_realize(ts_arena *a, ts_block *block,
                          ts_expr *const *iter_values, int n,
                          ts_expr *predicate) {
  for (int i = 0; i < n; i++)
    if (!iter_values[i]) return NULL;
  if (!block) return NULL;
  ts_stmt *s = new_stmt(a, TS_STMT_BLOCK_REALIZE);
  if (!s) return NULL;
  s->u.realize.block = block;
  s->u.realize.values = arena_copy_ptrs(a, (void *const *)iter_values, n);
  s->u.realize.n_values = n;
  s->u.realize.predicate = predicate;
  return n && !s->u.realize.values ? NULL : s;
}

/* ---- statement accessors ---- */

ts_stmt_kind ts_stmt_kind_of(const ts_stmt *s) { return (ts_stmt_kind)s->kind; }

#define CHECK_KIND(s, k) assert((s)->kind == (k))
ts_expr *ts_for_var(const ts_stmt *s) {
  CHECK_KIND(s, TS_STMT_FOR);
  return s->u.loop.var;
}
ts_expr *ts_for_min(const ts_stmt *s) {
  CHECK_KIND(s, TS_STMT_FOR);
  return s->u.loop.min;
}
ts_expr *ts_for_extent(const ts_stmt *s) {
  CHECK_KIND(s, TS_STMT_FOR);
  return s->u.loop.extent;
}
ts_for_kind ts_for_kind_of(const ts_stmt *s) {
  CHECK_KIND(s, TS_STMT_FOR);
  return (ts_for_kind)s->u.loop.kind;
}
const char *ts_for_thread_tag(const ts_stmt *s) {
  CHECK_KIND(s, TS_STMT_FOR);
  return s->u.loop.thread_tag;
}
ts_stmt *ts_for_body(const ts_stmt *s) {
  CHECK_KIND(s, TS_STMT_FOR);
  return s->u.loop.body;
}

ts_buffer *ts_store_buffer(const ts_stmt *s) {
  CHECK_KIND(s, TS_STMT_STORE);
  return s->u.store.buffer;
}
int ts_store_n_indices(const ts_stmt *s) {
  CHECK_KIND(s, TS_STMT_STORE);
  return s->u.store.n_indices;
}
ts_expr *ts_store_index(const ts_stmt *s, int i) {
  CHECK_KIND(s, TS_STMT_STORE);
  assert(i >= 0 && i < s->u.store.n_indices);
  return s->u.store.indices[i];
}
ts_expr *ts_store_value(const ts_stmt *s) {
  CHECK_KIND(s, TS_STMT_STORE);
  return s->u.store.value;
}

int ts_seq_n(const ts_stmt *s) {
  CHECK_KIND(s, TS_STMT_SEQ);
  return s->u.seq.n;
}
ts_stmt *ts_seq_item(const ts_stmt *s, int i) {
  CHECK_KIND(s, TS_STMT_SEQ);
  assert(i >= 0 && i < s->u.seq.n);
  return s->u.seq.items[i];
}

ts_expr *ts_if_cond(const ts_stmt *s) {
  CHECK_KIND(s, TS_STMT_IF);
  return s->u.cond.cond;
}
ts_stmt *ts_if_then(const ts_stmt *s) {
  CHECK_KIND(s, TS_STMT_IF);
  return s->u.cond.then_s;
}
ts_stmt *ts_if_else(const ts_stmt *s) {
  CHECK_KIND(s, TS_STMT_IF);
  return s->u.cond.else_s;
}

ts_expr *ts_evaluate_value(const ts_stmt *s) {
  CHECK_KIND(s, TS_STMT_EVALUATE);
  return s->u.eval.value;
}

ts_expr *ts_let_stmt_var(const ts_stmt *s) {
  CHECK_KIND(s, TS_STMT_LET);
  return s->u.let.var;
}
ts_expr *ts_let_stmt_value(const ts_stmt *s) {
  CHECK_KIND(s, TS_STMT_LET);
  return s->u.let.value;
}
ts_stmt *ts_let_stmt_body(const ts_stmt *s) {
  CHECK_KIND(s, TS_STMT_LET);
  return s->u.let.body;
}

ts_buffer *ts_allocate_buffer(const ts_stmt *s) {
  CHECK_KIND(s, TS_STMT_ALLOCATE);
  return s->u.alloc.buffer;
}
ts_stmt *ts_allocate_body(const ts_stmt *s) {
  CHECK_KIND(s, TS_STMT_ALLOCATE);
  return s->u.alloc.body;
}

ts_block *ts_realize_block(const ts_stmt *s) {
  CHECK_KIND(s, TS_STMT_BLOCK_REALIZE);
  return s->u.realize.block;
}
int ts_realize_n_values(const ts_stmt *s) {
  CHECK_KIND(s, TS_STMT_BLOCK_REALIZE);
  return s->u.realize.n_values;
}
ts_expr *ts_realize_value(const ts_stmt *s, int i) {
  CHECK_KIND(s, TS_STMT_BLOCK_REALIZE);
  assert(i >= 0 && i < s->u.realize.n_values);
  return s->u.realize.values[i];
}
ts_expr *ts_realize_predicate(const ts_stmt *s) {
  CHECK_KIND(s, TS_STMT_BLOCK_REALIZE);
  return s->u.realize.predicate;
}

/* ---- in-place edits ---- */

void ts_for_set_body(ts_stmt *s, ts_stmt *body) {
  CHECK_KIND(s, TS_STMT_FOR);
  s->u.loop.body = body;
}
void ts_for_set_kind(ts_arena *a, ts_stmt *s, ts_for_kind kind,
                     const char *thread_tag) {
  CHECK_KIND(s, TS_STMT_FOR);
  const char *tag =
      kind == TS_FOR_THREAD ? ts_arena_strdup(a, thread_tag) : NULL;
  if (kind == TS_FOR_THREAD && thread_tag && !tag) return;
  s->u.loop.kind = (uint8_t)kind;
  s->u.loop.thread_tag = tag;
}
void ts_for_set_range(ts_stmt *s, ts_expr *min, ts_expr *extent) {
  CHECK_KIND(s, TS_STMT_FOR);
  s->u.loop.min = min;
  s->u.loop.extent = extent;
}
void ts_seq_set_item(ts_stmt *s, int i, ts_stmt *item) {
  CHECK_KIND(s, TS_STMT_SEQ);
  assert(i >= 0 && i < s->u.seq.n);
  s->u.seq.items[i] = item;
}
void ts_if_set_branches(ts_stmt *s, ts_stmt *then_s, ts_stmt *else_s) {
  CHECK_KIND(s, TS_STMT_IF);
  s->u.cond.then_s = then_s;
  s->u.cond.else_s = else_s;
}
void ts_let_stmt_set_body(ts_stmt *s, ts_stmt *body) {
  CHECK_KIND(s, TS_STMT_LET);
  s->u.let.body = body;
}
void ts_allocate_set_body(ts_stmt *s, ts_stmt *body) {
  CHECK_KIND(s, TS_STMT_ALLOCATE);
  s->u.alloc.body = body;
}
void ts_realize_set_values(ts_arena *a, ts_stmt *s, ts_expr *const *values,
                           int n, ts_expr *predicate) {
  CHECK_KIND(s, TS_STMT_BLOCK_REALIZE);
  ts_expr **copy = arena_copy_ptrs(a, (void *const *)values, n);
  if (n > 0 && !copy) return;
  s->u.realize.values = copy;
  s->u.realize.n_values = n;
  s->u.realize.predicate = predicate;
}

/* ---- loop annotations ---- */

int ts_for_n_annotations(const ts_stmt *s) {
  CHECK_KIND(s, TS_STMT_FOR);
  return s->u.loop.anns.n;
}
const ts_annotation *ts_for_annotation(const ts_stmt *s, int i) {
  CHECK_KIND(s, TS_STMT_FOR);
  assert(i >= 0 && i < s->u.loop.anns.n);
  return &s->u.loop.anns.items[i];
}
const ts_annotation *ts_for_find_annotation(const ts_stmt *s, const char *key) {
  CHECK_KIND(s, TS_STMT_FOR);
  return ann_list_find(&s->u.loop.anns, key);
}
void ts_for_annotate(ts_arena *a, ts_stmt *s, ts_annotation ann) {
  CHECK_KIND(s, TS_STMT_FOR);
  ann_list_set(a, &s->u.loop.anns, ann);
}
bool ts_for_unannotate(ts_stmt *s, const char *key) {
  CHECK_KIND(s, TS_STMT_FOR);
  return ann_list_remove(&s->u.loop.anns, key);
}

/* ---- blocks ---- */

ts_block *ts_block_new(ts_arena *a, const char *name) {
  ts_block *b = ts_arena_alloc(a, sizeof *b);
  if (!b || !(b->name = ts_arena_strdup(a, name ? name : "block"))) return NULL;
  return b;
}

int ts_block_add_iter_var(ts_arena *a, ts_block *b, ts_expr *var, ts_range dom,
                          ts_iter_kind kind) {
  if (b->n_iters == b->cap_iters) {
    int cap = b->cap_iters ? b->cap_iters * 2 : 4;
    iter_var *iters = ts_arena_alloc(a, sizeof *iters * (size_t)cap);
    if (!iters) return -1;
    if (b->n_iters) memcpy(iters, b->iters, sizeof *iters * (size_t)b->n_iters);
    b->iters = iters;
    b->cap_iters = cap;
  }
  b->iters[b->n_iters] = (iter_var){var, dom, (uint8_t)kind};
  return b->n_iters++;
}

void ts_block_set_body(ts_block *b, ts_stmt *body) { b->body = body; }
void ts_block_set_init(ts_block *b, ts_stmt *init) { b->init = init; }
void ts_block_set_name(ts_arena *a, ts_block *b, const char *name) {
  const char *copy = ts_arena_strdup(a, name);
  if (copy || !name) b->name = copy;
}

void ts_block_add_alloc(ts_arena *a, ts_block *b, ts_buffer *buf) {
  if (b->n_allocs == b->cap_allocs) {
    int cap = b->cap_allocs ? b->cap_allocs * 2 : 4;
    ts_buffer **allocs = ts_arena_alloc(a, sizeof *allocs * (size_t)cap);
    if (!allocs) return;
    if (b->n_allocs)
      memcpy(allocs, b->allocs, sizeof *allocs * (size_t)b->n_allocs);
    b->allocs = allocs;
    b->cap_allocs = cap;
  }
  b->allocs[b->n_allocs++] = buf;
}

static ts_region *copy_regions(ts_arena *a, const ts_region *r, int n) {
  if (n <= 0 || !r) return NULL;
  ts_region *out = ts_arena_alloc(a, sizeof *out * (size_t)n);
  if (!out) return NULL;
  for (int i = 0; i < n; i++) {
    out[i].buffer = r[i].buffer;
    out[i].ndim = r[i].ndim;
    out[i].ranges = ts_arena_alloc(a, sizeof(ts_range) *
                                          (size_t)(r[i].ndim ? r[i].ndim : 1));
    if (!out[i].ranges) return NULL;
    for (int d = 0; d < r[i].ndim; d++) out[i].ranges[d] = r[i].ranges[d];
  }
  return out;
}

void ts_block_set_regions(ts_arena *a, ts_block *b, const ts_region *reads,
                          int n_reads, const ts_region *writes, int n_writes) {
  b->reads = copy_regions(a, reads, n_reads);
  b->n_reads = b->reads ? n_reads : 0;
  b->writes = copy_regions(a, writes, n_writes);
  b->n_writes = b->writes ? n_writes : 0;
}

const char *ts_block_name(const ts_block *b) { return b->name; }
int ts_block_n_iters(const ts_block *b) { return b->n_iters; }
ts_expr *ts_block_iter_var(const ts_block *b, int i) {
  assert(i >= 0 && i < b->n_iters);
  return b->iters[i].var;
}
ts_range ts_block_iter_dom(const ts_block *b, int i) {
  assert(i >= 0 && i < b->n_iters);
  return b->iters[i].dom;
}
void ts_block_set_iter_dom(ts_block *b, int i, ts_range dom) {
  assert(i >= 0 && i < b->n_iters);
  b->iters[i].dom = dom;
}
ts_iter_kind ts_block_iter_kind(const ts_block *b, int i) {
  assert(i >= 0 && i < b->n_iters);
  return (ts_iter_kind)b->iters[i].kind;
}
int ts_block_n_reads(const ts_block *b) { return b->n_reads; }
const ts_region *ts_block_read(const ts_block *b, int i) {
  assert(i >= 0 && i < b->n_reads);
  return &b->reads[i];
}
int ts_block_n_writes(const ts_block *b) { return b->n_writes; }
const ts_region *ts_block_write(const ts_block *b, int i) {
  assert(i >= 0 && i < b->n_writes);
  return &b->writes[i];
}
int ts_block_n_allocs(const ts_block *b) { return b->n_allocs; }
ts_buffer *ts_block_alloc(const ts_block *b, int i) {
  assert(i >= 0 && i < b->n_allocs);
  return b->allocs[i];
}
ts_stmt *ts_block_init(const ts_block *b) { return b->init; }
ts_stmt *ts_block_body(const ts_block *b) { return b->body; }

int ts_block_n_annotations(const ts_block *b) { return b->anns.n; }
const ts_annotation *ts_block_annotation(const ts_block *b, int i) {
  assert(i >= 0 && i < b->anns.n);
  return &b->anns.items[i];
}
const ts_annotation *ts_block_find_annotation(const ts_block *b,
                                              const char *key) {
  return ann_list_find(&b->anns, key);
}
void ts_block_annotate(ts_arena *a, ts_block *b, ts_annotation ann) {
  ann_list_set(a, &b->anns, ann);
}
bool ts_block_unannotate(ts_block *b, const char *key) {
  return ann_list_remove(&b->anns, key);
}

/* ---- functions ---- */

ts_func *ts_func_new(const char *name) {
  ts_arena *a = ts_arena_create();
  ts_func *f = ts_arena_alloc(a, sizeof *f);
  if (!f || !(f->name = ts_arena_strdup(a, name ? name : "main"))) {
    ts_arena_destroy(a);
    return NULL;
  }
  f->arena = a;
  return f;
}

void ts_func_free(ts_func *f) {
  if (f) ts_arena_destroy(f->arena);
}

ts_arena *ts_func_arena(const ts_func *f) { return f->arena; }
const char *ts_func_name(const ts_func *f) { return f->name; }
void ts_func_set_name(ts_func *f, const char *name) {
  const char *copy = ts_arena_strdup(f->arena, name);
  if (copy || !name) f->name = copy;
}

void ts_func_add_param(ts_func *f, ts_buffer *b) {
  if (f->n_params == f->cap_params) {
    int cap = f->cap_params ? f->cap_params * 2 : 4;
    ts_buffer **p = ts_arena_alloc(f->arena, sizeof *p * (size_t)cap);
    if (!p) return;
    if (f->n_params) memcpy(p, f->params, sizeof *p * (size_t)f->n_params);
    f->params = p;
    f->cap_params = cap;
  }
  f->params[f->n_params++] = b;
}

void ts_func_set_param(ts_func *f, int i, ts_buffer *b) {
  assert(i >= 0 && i < f->n_params);
  f->params[i] = b;
}

void ts_func_set_params(ts_func *f, ts_buffer *const *bufs, int n) {
  ts_buffer **p = n ? ts_arena_alloc(f->arena, sizeof *p * (size_t)n) : NULL;
  if (n && !p) return; /* out of memory: counted, the arena failed */
  if (n) memcpy(p, bufs, sizeof *p * (size_t)n);
  f->params = p;
  f->n_params = f->cap_params = n;
}

int ts_func_n_params(const ts_func *f) { return f->n_params; }
ts_buffer *ts_func_param(const ts_func *f, int i) {
  assert(i >= 0 && i < f->n_params);
  return f->params[i];
}
ts_stmt *ts_func_body(const ts_func *f) { return f->body; }
void ts_func_set_body(ts_func *f, ts_stmt *body) { f->body = body; }
int ts_func_n_attrs(const ts_func *f) { return f->attrs.n; }
const ts_annotation *ts_func_attr(const ts_func *f, int i) {
  assert(i >= 0 && i < f->attrs.n);
  return &f->attrs.items[i];
}
const ts_annotation *ts_func_find_attr(const ts_func *f, const char *key) {
  return ann_list_find(&f->attrs, key);
}
void ts_func_set_attr(ts_func *f, ts_annotation ann) {
  ann_list_set(f->arena, &f->attrs, ann);
}
uint64_t ts_func_const_params(const ts_func *f) {
  const ts_annotation *a = ann_list_find(&f->attrs, TS_ATTR_CONST_PARAMS);
  return a && a->kind == TS_ANN_INT ? (uint64_t)a->i : 0;
}
