/*
 * emit_minmax.c — float max and min whose accumulator is known not to be
 * NaN, as one compare-select.
 *
 * The IR's max and min are fmax and fmin (a NaN operand yields the other
 * one), LLVM's maxnum and minnum, which x86 has no instruction for: each is
 * a vmaxps, a compare for NaN and a blend, three vector operations. A row
 * maximum (softmax's, a max pool's) folds its row into an accumulator
 * initialized to -inf: such an accumulator never holds a NaN, and then
 * maxnum(acc, x) equals `x > acc ? x : acc` (a NaN x compares false and
 * yields acc), which is vmaxps alone.
 *
 * NaN-free buffers: the buffers the kernel allocates (not its parameters,
 * whose contents come from outside) of a float dtype, every store to which
 * is a float constant other than NaN, a load of a NaN-free buffer (a copy:
 * the register promotion's), or a max or min of which one operand is such a
 * load: by induction over the stores, none of them ever holds a NaN. The
 * set is the largest one closed under those rules, found by removing
 * buffers until no store breaks them. Each max or min with an operand
 * loaded from one of them is emitted as the compare-select, that operand
 * as the accumulator. CPU targets only: a GPU's max.f32 is maxnum already.
 */
#include "codegen/emit_internal.h"

#include <math.h>
#include <stdlib.h>

typedef struct {
  ts_stmt **stores;
  int n, cap;
  bool oom;
} store_list;

static bool collect_store(void *ctx, ts_stmt *s) {
  store_list *l = ctx;
  if (ts_stmt_kind_of(s) != TS_STMT_STORE) return true;
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 64;
    ts_stmt **p = ts_realloc(l->stores, sizeof *p * (size_t)cap);
    if (!p) {
      l->oom = true;
      return false;
    }
    l->stores = p;
    l->cap = cap;
  }
  l->stores[l->n++] = s;
  return true;
}

static bool is_param(const ts_func *f, const ts_buffer *b) {
  for (int i = 0; i < ts_func_n_params(f); i++)
    if (ts_func_param(f, i) == b) return true;
  return false;
}

static bool in_set(ts_buffer *const *set, int n, const ts_buffer *b) {
  for (int i = 0; i < n; i++)
    if (set[i] == b) return true;
  return false;
}

static bool load_of(ts_buffer *const *set, int n, const ts_expr *x) {
  return ts_expr_kind_of(x) == TS_EXPR_LOAD &&
         in_set(set, n, ts_expr_buffer(x));
}

/* Whether storing v keeps a NaN-free buffer NaN-free, given the set. */
static bool keeps_nan_free(ts_buffer *const *set, int n, const ts_expr *v) {
  switch (ts_expr_kind_of(v)) {
  case TS_EXPR_FLOAT: return !isnan(ts_expr_float_value(v));
  case TS_EXPR_BROADCAST: return keeps_nan_free(set, n, ts_expr_operand(v, 0));
  case TS_EXPR_LOAD: return load_of(set, n, v);
  case TS_EXPR_MAX:
  case TS_EXPR_MIN:
    return load_of(set, n, ts_expr_operand(v, 0)) ||
           load_of(set, n, ts_expr_operand(v, 1));
  default: return false;
  }
}

void emit_find_nan_free(emitter *e, const ts_func *f) {
  e->nan_free = NULL;
  e->n_nan_free = 0;
  if (ts_target_facts_of(e->target)->is_gpu) return;
  store_list l = {0};
  ts_visitor v = {collect_store, NULL, NULL, &l};
  ts_stmt_walk(ts_func_body(f), &v);
  ts_buffer **set =
      l.n && !l.oom ? ts_arena_alloc(e->tmp, sizeof *set * (size_t)l.n) : NULL;
  int n = 0;
  for (int i = 0; set && i < l.n; i++) {
    ts_buffer *b = ts_store_buffer(l.stores[i]);
    if (ts_dtype_is_float(ts_buffer_dtype(b)) && !is_param(f, b) &&
        !in_set(set, n, b))
      set[n++] = b;
  }
  for (bool changed = true; changed && n > 0;) {
    changed = false;
    for (int i = 0; i < l.n; i++) {
      ts_buffer *b = ts_store_buffer(l.stores[i]);
      if (!in_set(set, n, b) ||
          keeps_nan_free(set, n, ts_store_value(l.stores[i])))
        continue;
      for (int k = 0; k < n; k++)
        if (set[k] == b) set[k] = set[--n];
      changed = true;
    }
  }
  free(l.stores);
  e->nan_free = set;
  e->n_nan_free = n;
}

int emit_nan_free_operand(const emitter *e, const ts_expr *x) {
  if (ts_expr_kind_of(x) != TS_EXPR_MAX && ts_expr_kind_of(x) != TS_EXPR_MIN)
    return -1;
  for (int k = 0; k < 2; k++)
    if (load_of(e->nan_free, e->n_nan_free, ts_expr_operand(x, k))) return k;
  return -1;
}

LLVMValueRef emit_minmax_select(emitter *e, bool is_max, LLVMValueRef acc,
                                LLVMValueRef x) {
  LLVMValueRef better =
      LLVMBuildFCmp(e->b, is_max ? LLVMRealOGT : LLVMRealOLT, x, acc, "");
  return LLVMBuildSelect(e->b, better, x, acc, "");
}
