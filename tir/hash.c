/*
 * hash.c — structural equality and the 128-bit structural hash of functions.
 *
 * Both serialize a function into a canonical byte stream and compare or hash
 * it. The stream has explicit little-endian integers, the IEEE bits of
 * doubles (one bit pattern for every NaN) and length-prefixed strings. Vars
 * are numbered in order of definition (loop vars, iter vars, let vars) and
 * buffers likewise (parameters in order, then allocations); the function
 * name and the names of vars and buffers are left out, so renaming changes
 * nothing. Block names, dtypes, shapes, strides, scopes, alignments, loop
 * kinds, thread tags, annotations (sorted by key), function attributes,
 * regions, iter kinds and domains, predicates and every expression are in.
 * A var or buffer used but never defined (or used outside the scope that
 * defines it) is numbered by first use under a distinct tag. The hash is
 * MurmurHash3 x64 128 of the stream, computed the same way on every machine.
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define STREAM_VERSION 1

/* Stream tags (expression kinds are written as their ts_expr_kind). */
enum {
  TAG_NULL = 0xF0,
  TAG_VAR_DEF = 0xE0,
  TAG_VAR_FREE = 0xE1,
  TAG_BUF_DEF = 0xE2,
  TAG_BUF_FREE = 0xE3,
  TAG_BUF_USE = 0xE4,
  TAG_STMT = 0xD0, /* + ts_stmt_kind */
  TAG_FUNC = 0xC0,
  TAG_BLOCK = 0xC1,
};

typedef struct stream {
  uint8_t *data;
  size_t len, cap;
  ts_node_map *ids; /* var or buffer -> id + 1 (free ones: | FREE_BIT) */
  uint32_t n_vars, n_free_vars, n_bufs, n_free_bufs;
  bool failed;         /* out of memory: the stream is incomplete */
  uint8_t local[4096]; /* first bytes live here: no malloc for small funcs */
} stream;

#define FREE_BIT ((uintptr_t)1 << 31)

/* Whether n more bytes fit (out of memory: false, and the stream is
 * marked failed). */
static bool reserve(stream *s, size_t n) {
  if (s->failed) return false;
  if (s->len + n <= s->cap) return true;
  size_t cap = s->cap * 2;
  while (cap < s->len + n) cap *= 2;
  uint8_t *d;
  if (s->data == s->local) {
    d = ts_malloc(cap);
    if (d) memcpy(d, s->data, s->len);
  } else {
    d = ts_realloc(s->data, cap);
  }
  if (!d) {
    s->failed = true;
    return false;
  }
  s->data = d;
  s->cap = cap;
  return true;
}

static void put_u8(stream *s, uint8_t v) {
  if (!reserve(s, 1)) return;
  s->data[s->len++] = v;
}

static void put_u32(stream *s, uint32_t v) {
  if (!reserve(s, 4)) return;
  for (int i = 0; i < 4; i++) s->data[s->len++] = (uint8_t)(v >> (8 * i));
}

static void put_u64(stream *s, uint64_t v) {
  if (!reserve(s, 8)) return;
  for (int i = 0; i < 8; i++) s->data[s->len++] = (uint8_t)(v >> (8 * i));
}

static void put_f64(stream *s, double v) {
  uint64_t bits;
  if (isnan(v)) {
    bits = 0x7ff8000000000000ull;
  } else {
    memcpy(&bits, &v, sizeof bits);
  }
  put_u64(s, bits);
}

static void put_str(stream *s, const char *str) {
  if (!str) {
    put_u32(s, 0xFFFFFFFFu);
    return;
  }
  size_t n = strlen(str);
  put_u32(s, (uint32_t)n);
  if (!reserve(s, n)) return;
  memcpy(s->data + s->len, str, n);
  s->len += n;
}

static void put_dtype(stream *s, ts_dtype t) {
  put_u8(s, t.code);
  put_u8(s, t.bits);
  put_u8(s, (uint8_t)(t.lanes & 0xFF));
  put_u8(s, (uint8_t)(t.lanes >> 8));
}

/* ---- definitions and uses ---- */

/* Defines v for a scope; returns what v meant before, for end_scope. A
 * var used outside its scope (ill-formed, but hashable) then means what it
 * meant outside, so identity and scoping both count. */
static void *def_var(stream *s, const ts_expr *v) {
  put_u8(s, TAG_VAR_DEF);
  put_dtype(s, v->dtype);
  void *old = ts_node_map_get(s->ids, v);
  ts_node_map_put(s->ids, v, (void *)(uintptr_t)(++s->n_vars));
  return old;
}

static void end_scope(stream *s, const void *node, void *old) {
  ts_node_map_put(s->ids, node, old);
}

static void use_var(stream *s, const ts_expr *v) {
  uintptr_t id = (uintptr_t)ts_node_map_get(s->ids, v);
  if (!id) {
    id = (++s->n_free_vars) | FREE_BIT;
    ts_node_map_put(s->ids, v, (void *)id);
    put_u8(s, TAG_VAR_FREE);
    put_dtype(s, v->dtype);
    return;
  }
  put_u8(s, id & FREE_BIT ? TAG_VAR_FREE : TS_EXPR_VAR);
  put_u32(s, (uint32_t)(id & ~FREE_BIT));
}

static void buffer_body(stream *s, const ts_buffer *b) {
  put_dtype(s, b->dtype);
  put_u32(s, (uint32_t)b->ndim);
  for (int i = 0; i < b->ndim; i++) put_u64(s, (uint64_t)b->shape[i]);
  put_u8(s, b->has_strides);
  if (b->has_strides)
    for (int i = 0; i < b->ndim; i++) put_u64(s, (uint64_t)b->strides[i]);
  put_str(s, b->scope);
  put_u32(s, (uint32_t)b->align);
}

static void *def_buffer(stream *s, const ts_buffer *b) {
  put_u8(s, TAG_BUF_DEF);
  buffer_body(s, b);
  void *old = ts_node_map_get(s->ids, b);
  ts_node_map_put(s->ids, b, (void *)(uintptr_t)(++s->n_bufs));
  return old;
}

static void use_buffer(stream *s, const ts_buffer *b) {
  if (!b) {
    put_u8(s, TAG_NULL);
    return;
  }
  uintptr_t id = (uintptr_t)ts_node_map_get(s->ids, b);
  if (!id) {
    id = (++s->n_free_bufs) | FREE_BIT;
    ts_node_map_put(s->ids, b, (void *)id);
    put_u8(s, TAG_BUF_FREE);
    buffer_body(s, b);
    return;
  }
  put_u8(s, id & FREE_BIT ? TAG_BUF_FREE : TAG_BUF_USE);
  put_u32(s, (uint32_t)(id & ~FREE_BIT));
}

/* ---- annotations ---- */

static void put_anns(stream *s, const ann_list *l) {
  put_u32(s, (uint32_t)l->n);
  if (l->n == 0) return;
  /* sorted by key so that the order they were added in does not matter */
  const ts_annotation *local[16];
  const ts_annotation **order =
      l->n <= 16 ? local : ts_malloc(sizeof *order * (size_t)l->n);
  if (!order) {
    s->failed = true;
    return;
  }
  for (int i = 0; i < l->n; i++) {
    const ts_annotation *x = &l->items[i];
    int j = i;
    while (j > 0 && strcmp(order[j - 1]->key, x->key) > 0) {
      order[j] = order[j - 1];
      j--;
    }
    order[j] = x;
  }
  for (int i = 0; i < l->n; i++) {
    const ts_annotation *x = order[i];
    put_str(s, x->key);
    put_u8(s, (uint8_t)x->kind);
    switch (x->kind) {
    case TS_ANN_INT: put_u64(s, (uint64_t)x->i); break;
    case TS_ANN_FLOAT: put_f64(s, x->f); break;
    case TS_ANN_STRING: put_str(s, x->s); break;
    }
  }
  if (order != local) free(order);
}

/* ---- expressions and statements ---- */

static void put_expr(stream *s, const ts_expr *e) {
  if (!e) {
    put_u8(s, TAG_NULL);
    return;
  }
  if (e->kind == TS_EXPR_VAR) {
    use_var(s, e);
    return;
  }
  put_u8(s, e->kind);
  put_dtype(s, e->dtype);
  switch (e->kind) {
  case TS_EXPR_INT: put_u64(s, (uint64_t)e->u.int_value); return;
  case TS_EXPR_FLOAT: put_f64(s, e->u.float_value); return;
  case TS_EXPR_LOAD:
  case TS_EXPR_ADDRESS_OF:
    use_buffer(s, e->u.load.buffer);
    put_u32(s, (uint32_t)e->u.load.n_indices);
    for (int i = 0; i < e->u.load.n_indices; i++)
      put_expr(s, e->u.load.indices[i]);
    return;
  case TS_EXPR_CALL:
    put_str(s, e->u.call.name);
    put_u32(s, (uint32_t)e->u.call.n_args);
    for (int i = 0; i < e->u.call.n_args; i++) put_expr(s, e->u.call.args[i]);
    return;
  case TS_EXPR_LET: {
    put_expr(s, e->u.let.value);
    void *old = def_var(s, e->u.let.var);
    put_expr(s, e->u.let.body);
    end_scope(s, e->u.let.var, old);
    return;
  }
  case TS_EXPR_NOT:
  case TS_EXPR_CAST:
  case TS_EXPR_BROADCAST: put_expr(s, e->u.op.a); return;
  case TS_EXPR_SELECT:
    put_expr(s, e->u.op.a);
    put_expr(s, e->u.op.b);
    put_expr(s, e->u.op.c);
    return;
  default: /* binary, ramp */
    put_expr(s, e->u.op.a);
    put_expr(s, e->u.op.b);
    return;
  }
}

static void put_regions(stream *s, const ts_region *r, int n) {
  put_u32(s, (uint32_t)n);
  for (int i = 0; i < n; i++) {
    use_buffer(s, r[i].buffer);
    put_u32(s, (uint32_t)r[i].ndim);
    for (int d = 0; d < r[i].ndim; d++) {
      put_expr(s, r[i].ranges[d].min);
      put_expr(s, r[i].ranges[d].extent);
    }
  }
}

static void put_stmt(stream *s, const ts_stmt *st);

static void put_block(stream *s, const ts_block *b) {
  put_u8(s, TAG_BLOCK);
  put_str(s, b->name);
  put_u32(s, (uint32_t)b->n_iters);
  int n = b->n_iters + b->n_allocs;
  void *local[16];
  void **old = n <= 16 ? local : ts_malloc(sizeof *old * (size_t)n);
  if (!old) {
    s->failed = true;
    return;
  }
  for (int i = 0; i < b->n_iters; i++) {
    put_u8(s, b->iters[i].kind);
    put_expr(s, b->iters[i].dom.min);
    put_expr(s, b->iters[i].dom.extent);
    old[i] = def_var(s, b->iters[i].var);
  }
  put_u32(s, (uint32_t)b->n_allocs);
  for (int i = 0; i < b->n_allocs; i++)
    old[b->n_iters + i] = def_buffer(s, b->allocs[i]);
  put_regions(s, b->reads, b->n_reads);
  put_regions(s, b->writes, b->n_writes);
  put_anns(s, &b->anns);
  put_stmt(s, b->init);
  put_stmt(s, b->body);
  /* leave the scope in reverse order (a node defined twice ends as before) */
  for (int i = b->n_allocs - 1; i >= 0; i--)
    end_scope(s, b->allocs[i], old[b->n_iters + i]);
  for (int i = b->n_iters - 1; i >= 0; i--)
    end_scope(s, b->iters[i].var, old[i]);
  if (old != local) free(old);
}

static void put_stmt(stream *s, const ts_stmt *st) {
  if (!st) {
    put_u8(s, TAG_NULL);
    return;
  }
  put_u8(s, (uint8_t)(TAG_STMT + st->kind));
  switch (st->kind) {
  case TS_STMT_FOR: {
    put_expr(s, st->u.loop.min);
    put_expr(s, st->u.loop.extent);
    void *old = def_var(s, st->u.loop.var);
    put_u8(s, st->u.loop.kind);
    put_str(s, st->u.loop.kind == TS_FOR_THREAD ? st->u.loop.thread_tag : NULL);
    put_anns(s, &st->u.loop.anns);
    put_stmt(s, st->u.loop.body);
    end_scope(s, st->u.loop.var, old);
    return;
  }
  case TS_STMT_BLOCK_REALIZE:
    put_u32(s, (uint32_t)st->u.realize.n_values);
    for (int i = 0; i < st->u.realize.n_values; i++)
      put_expr(s, st->u.realize.values[i]);
    put_expr(s, st->u.realize.predicate);
    put_block(s, st->u.realize.block);
    return;
  case TS_STMT_STORE:
    use_buffer(s, st->u.store.buffer);
    put_u32(s, (uint32_t)st->u.store.n_indices);
    for (int i = 0; i < st->u.store.n_indices; i++)
      put_expr(s, st->u.store.indices[i]);
    put_expr(s, st->u.store.value);
    return;
  case TS_STMT_SEQ:
    put_u32(s, (uint32_t)st->u.seq.n);
    for (int i = 0; i < st->u.seq.n; i++) put_stmt(s, st->u.seq.items[i]);
    return;
  case TS_STMT_IF:
    put_expr(s, st->u.cond.cond);
    put_stmt(s, st->u.cond.then_s);
    put_stmt(s, st->u.cond.else_s);
    return;
  case TS_STMT_EVALUATE: put_expr(s, st->u.eval.value); return;
  case TS_STMT_LET: {
    put_expr(s, st->u.let.value);
    void *old = def_var(s, st->u.let.var);
    put_stmt(s, st->u.let.body);
    end_scope(s, st->u.let.var, old);
    return;
  }
  case TS_STMT_ALLOCATE: {
    void *old = def_buffer(s, st->u.alloc.buffer);
    put_stmt(s, st->u.alloc.body);
    end_scope(s, st->u.alloc.buffer, old);
    return;
  }
  }
}

/* Streams f into s; s->failed when an allocation failed on the way (the
 * ids map too: a var it lost would be streamed as free). */
static void stream_func(stream *s, const ts_func *f) {
  unsigned long oom = ts_alloc_failures();
  memset(s, 0, offsetof(stream, local));
  s->data = s->local;
  s->cap = sizeof s->local;
  s->ids = ts_node_map_create();
  put_u8(s, TAG_FUNC);
  put_u8(s, STREAM_VERSION);
  put_anns(s, &f->attrs);
  put_u32(s, (uint32_t)f->n_params);
  for (int i = 0; i < f->n_params; i++) (void)def_buffer(s, f->params[i]);
  put_stmt(s, f->body);
  if (ts_alloc_failures() != oom) s->failed = true;
}

static void stream_free(stream *s) {
  if (s->data != s->local) free(s->data);
  ts_node_map_destroy(s->ids);
}

/* ---- MurmurHash3 x64 128, reading the stream as little-endian words ---- */

static uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static uint64_t fmix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ull;
  k ^= k >> 33;
  return k;
}

static uint64_t load_le64(const uint8_t *p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

static ts_hash128 murmur3_128(const uint8_t *data, size_t len, uint64_t seed) {
  const uint64_t c1 = 0x87c37b91114253d5ull, c2 = 0x4cf5ad432745937full;
  uint64_t h1 = seed, h2 = seed;
  size_t nblocks = len / 16;
  for (size_t i = 0; i < nblocks; i++) {
    uint64_t k1 = load_le64(data + 16 * i, 8);
    uint64_t k2 = load_le64(data + 16 * i + 8, 8);
    k1 *= c1;
    k1 = rotl64(k1, 31);
    k1 *= c2;
    h1 ^= k1;
    h1 = rotl64(h1, 27);
    h1 += h2;
    h1 = h1 * 5 + 0x52dce729;
    k2 *= c2;
    k2 = rotl64(k2, 33);
    k2 *= c1;
    h2 ^= k2;
    h2 = rotl64(h2, 31);
    h2 += h1;
    h2 = h2 * 5 + 0x38495ab5;
  }
  const uint8_t *tail = data + nblocks * 16;
  size_t rest = len & 15;
  uint64_t k1 = load_le64(tail, rest < 8 ? rest : 8);
  uint64_t k2 = rest > 8 ? load_le64(tail + 8, rest - 8) : 0;
  if (rest > 8) {
    k2 *= c2;
    k2 = rotl64(k2, 33);
    k2 *= c1;
    h2 ^= k2;
  }
  if (rest > 0) {
    k1 *= c1;
    k1 = rotl64(k1, 31);
    k1 *= c2;
    h1 ^= k1;
  }
  h1 ^= (uint64_t)len;
  h2 ^= (uint64_t)len;
  h1 += h2;
  h2 += h1;
  h1 = fmix64(h1);
  h2 = fmix64(h2);
  h1 += h2;
  h2 += h1;
  return (ts_hash128){h1, h2};
}

/* ---- public ---- */

#define HASH_SEED 0x7465737365726131ull

ts_hash128 ts_func_hash(const ts_func *f) {
  if (!f) return (ts_hash128){0, 0};
  stream s;
  stream_func(&s, f);
  ts_hash128 h =
      s.failed ? (ts_hash128){0, 0} : murmur3_128(s.data, s.len, HASH_SEED);
  stream_free(&s);
  return h;
}

uint8_t *ts_func_structural_key(const ts_func *f, size_t *len) {
  stream s;
  stream_func(&s, f);
  uint8_t *key = s.failed ? NULL : ts_malloc(s.len ? s.len : 1);
  if (!key) {
    *len = 0;
    stream_free(&s);
    return NULL;
  }
  memcpy(key, s.data, s.len);
  *len = s.len;
  stream_free(&s);
  return key;
}

ts_hash128 ts_structural_key_hash(const uint8_t *key, size_t len) {
  return murmur3_128(key, len, HASH_SEED);
}

bool ts_func_equal(const ts_func *a, const ts_func *b) {
  if (a == b) return true;
  if (!a || !b) return false;
  stream *sa = ts_malloc(sizeof *sa), *sb = ts_malloc(sizeof *sb);
  if (!sa || !sb) {
    free(sa);
    free(sb);
    return false;
  }
  stream_func(sa, a);
  stream_func(sb, b);
  bool eq = !sa->failed && !sb->failed && sa->len == sb->len &&
            memcmp(sa->data, sb->data, sa->len) == 0;
  stream_free(sa);
  stream_free(sb);
  free(sa);
  free(sb);
  return eq;
}

void ts_hash128_hex(ts_hash128 h, char out[33]) {
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < 16; i++) {
    out[i] = digits[(h.hi >> (60 - 4 * i)) & 15];
    out[16 + i] = digits[(h.lo >> (60 - 4 * i)) & 15];
  }
  out[32] = '\0';
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int ts_hash128_parse(const char *hex, ts_hash128 *out) {
  if (!hex || !out) return TS_EINVAL;
  uint64_t w[2] = {0, 0};
  for (int i = 0; i < 32; i++) {
    int d = hex_digit(hex[i]);
    if (d < 0) return TS_EINVAL; /* also stops at a short string's NUL */
    w[i / 16] = (w[i / 16] << 4) | (uint64_t)d;
  }
  if (hex[32] != '\0') return TS_EINVAL;
  out->hi = w[0];
  out->lo = w[1];
  return TS_OK;
}

bool ts_hash128_eq(ts_hash128 a, ts_hash128 b) {
  return a.hi == b.hi && a.lo == b.lo;
}
