/*
 * dyn_loops.c — the kernels of a padded program loop to the run-time
 * length.
 *
 * A padded program (dynamic.c) serves every size n <= B: its inputs are
 * padded to the bucket B along the dynamic dimension and each operator
 * that mixes positions along it reads through a mask. Run as scheduled,
 * every kernel computes all B positions, so a size between two buckets
 * pays for the padding. This pass gives a scheduled kernel a parameter
 * holding n and cuts its loops over the dimension to the tiles that hold a
 * position below n: for a loop whose every block instance skipped in
 * iterations past the cut has a position >= n along the dimension, the
 * extent becomes min(E, ceil(n / c) * d), c and d from the block's binding
 * (v = c * (loop / d) + rest, rest >= 0).
 *
 * Positions past n then hold whatever the memory held. That is exact as
 * long as no position below n reads them, which holds when:
 * - every operator that mixes positions along the dimension reads its
 *   input through a mask that is a select (PadMask), which a garbage value
 *   does not get through;
 * - no loop is cut along an axis that a reduction reads (a reduction over
 *   the dimension, a softmax's sum, reads every position it was given),
 *   nor along the axis a mask writes (its consumers may read all of it):
 *   such axes are "pinned", and the pin spreads through every buffer
 *   dimension an index of them touches, in every block of the kernel.
 *
 * Which buffer dimensions are the dimension comes from the graph (the
 * parameters' symbolic axes) and spreads through the blocks' regions where
 * an iter var indexes a dimension by itself; anything the analysis cannot
 * read is left as it is, so the pass only ever removes work it proved
 * needless.
 */
#include "internal.h"

#include "codegen/codegen.h"

#include <stdlib.h>
#include <string.h>

enum { F_SYM = 1, F_PIN = 2 };

typedef struct slot { /* a buffer dimension */
  const ts_buffer *buf;
  int dim;
  unsigned flags;
} slot;

typedef struct ivar { /* an iter var of a leaf block */
  const ts_expr *var;
  unsigned flags;
} ivar;

typedef struct rel {
  int var, slot;
  bool bare; /* the region's min is the var itself */
} rel;

typedef struct leaf {
  ts_block *block;
  int first_var;     /* its iter vars: vars[first_var .. + n_iters) */
  ts_expr **binding; /* composed down to loop vars, one per iter var */
  ts_stmt **loops;   /* the loops above it, outermost first */
  int n_loops;
} leaf;

typedef struct dl {
  ts_arena *a;
  slot *slots;
  int n_slots, cap_slots;
  ivar *vars;
  int n_vars, cap_vars;
  rel *rels;
  int n_rels, cap_rels;
  leaf *leaves;
  int n_leaves, cap_leaves;
  ts_stmt *stack[64];
  int depth;
  ts_node_map *sub; /* outer block iter var -> composed binding */
  bool oom;
} dl;

#define GROW(st, arr, n, cap)                                                  \
  do {                                                                         \
    if ((st)->n >= (st)->cap) {                                                \
      int c = (st)->cap ? 2 * (st)->cap : 16;                                  \
      void *p = realloc((st)->arr, sizeof *(st)->arr * (size_t)c);             \
      if (!p) {                                                                \
        (st)->oom = true;                                                      \
        break;                                                                 \
      }                                                                        \
      (st)->arr = p;                                                           \
      (st)->cap = c;                                                           \
    }                                                                          \
  } while (0)

static int slot_of(dl *st, const ts_buffer *b, int d) {
  for (int i = 0; i < st->n_slots; i++)
    if (st->slots[i].buf == b && st->slots[i].dim == d) return i;
  GROW(st, slots, n_slots, cap_slots);
  if (st->oom) return -1;
  st->slots[st->n_slots] = (slot){b, d, 0};
  return st->n_slots++;
}

static void add_rel(dl *st, int v, int s, bool bare) {
  if (s < 0) return;
  GROW(st, rels, n_rels, cap_rels);
  if (st->oom) return;
  st->rels[st->n_rels++] = (rel){v, s, bare};
}

/* Whether e mentions var. */
static bool mentions(const ts_expr *e, const ts_expr *var) {
  if (!e) return false;
  if (e == var) return true;
  if (ts_expr_kind_of(e) == TS_EXPR_LET && ts_expr_let_var(e) == var)
    return true;
  for (int i = 0; i < ts_expr_n_operands(e); i++)
    if (mentions(ts_expr_operand(e, i), var)) return true;
  return false;
}

static bool has_realize(const ts_stmt *s) {
  if (!s) return false;
  switch (ts_stmt_kind_of(s)) {
  case TS_STMT_BLOCK_REALIZE: return true;
  case TS_STMT_FOR: return has_realize(ts_for_body(s));
  case TS_STMT_SEQ:
    for (int i = 0; i < ts_seq_n(s); i++)
      if (has_realize(ts_seq_item(s, i))) return true;
    return false;
  case TS_STMT_IF:
    return has_realize(ts_if_then(s)) || has_realize(ts_if_else(s));
  case TS_STMT_LET: return has_realize(ts_let_stmt_body(s));
  case TS_STMT_ALLOCATE: return has_realize(ts_allocate_body(s));
  default: return false;
  }
}

/* The relations of one region of leaf block b (its vars from `first`). */
static void region_rels(dl *st, const ts_block *b, int first,
                        const ts_region *r) {
  for (int d = 0; d < r->ndim; d++) {
    int s = slot_of(st, r->buffer, d);
    const ts_expr *m = r->ranges[d].min;
    for (int i = 0; i < ts_block_n_iters(b); i++) {
      const ts_expr *v = ts_block_iter_var(b, i);
      if (m == v)
        add_rel(st, first + i, s, true);
      else if (mentions(m, v))
        add_rel(st, first + i, s, false);
    }
  }
}

static void add_leaf(dl *st, ts_stmt *realize) {
  ts_block *b = ts_realize_block(realize);
  int n = ts_block_n_iters(b);
  GROW(st, leaves, n_leaves, cap_leaves);
  if (st->oom) return;
  leaf *l = &st->leaves[st->n_leaves];
  memset(l, 0, sizeof *l);
  l->block = b;
  l->first_var = st->n_vars;
  l->binding = ts_arena_alloc(st->a, sizeof *l->binding * (size_t)(n + 1));
  l->loops = ts_arena_alloc(st->a, sizeof *l->loops * (size_t)(st->depth + 1));
  if (!l->binding || !l->loops) {
    st->oom = true;
    return;
  }
  memcpy(l->loops, st->stack, sizeof *l->loops * (size_t)st->depth);
  l->n_loops = st->depth;
  for (int i = 0; i < n && i < ts_realize_n_values(realize); i++) {
    l->binding[i] =
        ts_expr_substitute(st->a, ts_realize_value(realize, i), st->sub, NULL);
    GROW(st, vars, n_vars, cap_vars);
    if (st->oom) return;
    unsigned f = ts_block_iter_kind(b, i) == TS_ITER_SPATIAL ? 0 : F_PIN;
    st->vars[st->n_vars++] = (ivar){ts_block_iter_var(b, i), f};
  }
  if (ts_realize_n_values(realize) < n) { /* malformed: pin everything */
    for (int i = ts_realize_n_values(realize); i < n; i++) {
      GROW(st, vars, n_vars, cap_vars);
      if (st->oom) return;
      l->binding[i] = NULL;
      st->vars[st->n_vars++] = (ivar){ts_block_iter_var(b, i), F_PIN};
    }
  }
  for (int k = 0; k < ts_block_n_reads(b); k++)
    region_rels(st, b, l->first_var, ts_block_read(b, k));
  for (int k = 0; k < ts_block_n_writes(b); k++)
    region_rels(st, b, l->first_var, ts_block_write(b, k));
  st->n_leaves++;
}

static void collect(dl *st, ts_stmt *s) {
  if (!s || st->oom) return;
  switch (ts_stmt_kind_of(s)) {
  case TS_STMT_FOR:
    if (st->depth >= 64) {
      st->oom = true; /* deeper than any schedule makes: leave it alone */
      return;
    }
    st->stack[st->depth++] = s;
    collect(st, ts_for_body(s));
    st->depth--;
    return;
  case TS_STMT_SEQ:
    for (int i = 0; i < ts_seq_n(s); i++) collect(st, ts_seq_item(s, i));
    return;
  case TS_STMT_IF:
    collect(st, ts_if_then(s));
    collect(st, ts_if_else(s));
    return;
  case TS_STMT_LET: collect(st, ts_let_stmt_body(s)); return;
  case TS_STMT_ALLOCATE: collect(st, ts_allocate_body(s)); return;
  case TS_STMT_BLOCK_REALIZE: {
    ts_block *b = ts_realize_block(s);
    if (!has_realize(ts_block_body(b))) {
      add_leaf(st, s);
      return;
    }
    for (int i = 0; i < ts_block_n_iters(b) && i < ts_realize_n_values(s); i++)
      ts_node_map_put(
          st->sub, ts_block_iter_var(b, i),
          ts_expr_substitute(st->a, ts_realize_value(s, i), st->sub, NULL));
    collect(st, ts_block_body(b));
    return;
  }
  default: return;
  }
}

/* Symbol and pin flags to a fixed point. */
static void propagate(dl *st) {
  for (bool changed = true; changed;) {
    changed = false;
    for (int i = 0; i < st->n_rels; i++) {
      rel *r = &st->rels[i];
      ivar *v = &st->vars[r->var];
      slot *s = &st->slots[r->slot];
      unsigned pv = v->flags, ps = s->flags;
      if ((v->flags | s->flags) & F_PIN) v->flags |= F_PIN, s->flags |= F_PIN;
      if (r->bare && ((v->flags | s->flags) & F_SYM))
        v->flags |= F_SYM, s->flags |= F_SYM;
      changed |= pv != v->flags || ps != s->flags;
    }
  }
}

/* A binding's terms: e = sum of terms. False when there are too many. */
static bool terms_of(ts_expr *e, ts_expr **out, int *n, int cap) {
  if (ts_expr_kind_of(e) == TS_EXPR_ADD)
    return terms_of(ts_expr_operand(e, 0), out, n, cap) &&
           terms_of(ts_expr_operand(e, 1), out, n, cap);
  if (*n >= cap) return false;
  out[(*n)++] = e;
  return true;
}

/* Whether term t is c * atom with atom the loop var or (var // d), c > 0:
 * fills c and d. */
static bool atom_term(ts_expr *t, const ts_expr *var, int64_t *c, int64_t *d) {
  *c = 1;
  if (ts_expr_kind_of(t) == TS_EXPR_MUL) {
    ts_expr *x = ts_expr_operand(t, 0), *y = ts_expr_operand(t, 1);
    if (!ts_expr_is_const_int(y, c)) {
      ts_expr *z = x;
      x = y;
      y = z;
      if (!ts_expr_is_const_int(y, c)) return false;
    }
    t = x;
  }
  if (*c <= 0) return false;
  *d = 1;
  if (t == var) return true;
  if (ts_expr_kind_of(t) == TS_EXPR_FLOORDIV && ts_expr_operand(t, 0) == var &&
      ts_expr_is_const_int(ts_expr_operand(t, 1), d) && *d > 0)
    return true;
  return false;
}

/* The ranges of the loops above leaf l (those with constant bounds). */
static ts_var_ranges *leaf_ranges(const leaf *l) {
  ts_var_ranges *r = ts_var_ranges_create();
  for (int j = 0; r && j < l->n_loops; j++) {
    int64_t mn, ext;
    if (ts_expr_is_const_int(ts_for_min(l->loops[j]), &mn) &&
        ts_expr_is_const_int(ts_for_extent(l->loops[j]), &ext))
      ts_var_ranges_set(r, ts_for_var(l->loops[j]), mn, ext);
  }
  return r;
}

/* For a binding c * (loop / d) + rest with 0 <= rest < c: the position's
 * tile is the loop's (loop / d), so iterations from ceil(n / c) * d on
 * hold positions >= n only. */
static bool tile_major(ts_expr *e, const ts_expr *var,
                       const ts_var_ranges *ranges, int64_t *c, int64_t *d) {
  ts_expr *t[64];
  int n = 0;
  if (!terms_of(e, t, &n, 64)) return false;
  bool found = false;
  int64_t lo_sum = 0, hi_sum = 0;
  for (int i = 0; i < n; i++) {
    if (mentions(t[i], var)) {
      if (found || !atom_term(t[i], var, c, d)) return false;
      found = true;
      continue;
    }
    int64_t lo, hi;
    if (!ts_expr_const_bound(t[i], ranges, &lo, &hi)) return false;
    lo_sum += lo;
    hi_sum += hi;
  }
  return found && lo_sum >= 0 && hi_sum < *c;
}

/* For a binding base + inner, inner >= 0 a sum of terms in the loops
 * inside loop `at` alone: base, which must mention the loop (the position
 * is >= base in the whole iteration). NULL otherwise. */
static ts_expr *iteration_base(ts_arena *a, const leaf *l, int at, ts_expr *e,
                               const ts_var_ranges *ranges) {
  ts_expr *t[64];
  int n = 0;
  if (!terms_of(e, t, &n, 64)) return NULL;
  ts_expr *base = NULL;
  for (int i = 0; i < n; i++) {
    bool inner = false, outer = false;
    for (int j = 0; j < l->n_loops; j++)
      if (mentions(t[i], ts_for_var(l->loops[j]))) {
        if (j > at)
          inner = true;
        else
          outer = true;
      }
    if (!inner) {
      base = base ? ts_add(a, base, t[i]) : t[i];
      continue;
    }
    int64_t lo, hi;
    if (outer || !ts_expr_const_bound(t[i], ranges, &lo, &hi) || lo < 0)
      return NULL;
  }
  return base && mentions(base, ts_for_var(l->loops[at])) ? base : NULL;
}

static bool expr_same(const ts_expr *x, const ts_expr *y) {
  if (x == y) return true;
  if (!x || !y || ts_expr_kind_of(x) != ts_expr_kind_of(y) ||
      ts_expr_n_operands(x) != ts_expr_n_operands(y))
    return false;
  switch (ts_expr_kind_of(x)) {
  case TS_EXPR_INT: return ts_expr_int_value(x) == ts_expr_int_value(y);
  case TS_EXPR_ADD:
  case TS_EXPR_SUB:
  case TS_EXPR_MUL:
  case TS_EXPR_FLOORDIV:
  case TS_EXPR_FLOORMOD:
  case TS_EXPR_MIN:
  case TS_EXPR_MAX: break;
  default: return false; /* vars are equal only as the same node */
  }
  for (int i = 0; i < ts_expr_n_operands(x); i++)
    if (!expr_same(ts_expr_operand(x, i), ts_expr_operand(y, i))) return false;
  return true;
}

/* What to do with a loop: cut its extent to max over (c, d) of ceil(n / c)
 * * d, or guard its body with "some base < n". */
typedef struct plan {
  int64_t cs[16], ds[16];
  int n_cuts; /* > 0: cut */
  ts_expr *bases[16];
  int n_bases; /* > 0: guard */
} plan;

static bool cut_var(const ivar *v) {
  return (v->flags & (F_SYM | F_PIN)) == F_SYM;
}

/* Plans loop `loop`: false when some block under it that depends on it
 * cannot tell, for an iteration, that it holds positions >= n only. */
static bool plan_loop(const dl *st, ts_stmt *loop, plan *p) {
  memset(p, 0, sizeof *p);
  const ts_expr *var = ts_for_var(loop);
  bool can_cut = ts_for_kind_of(loop) == TS_FOR_SERIAL ||
                 ts_for_kind_of(loop) == TS_FOR_PARALLEL;
  const ts_annotation *u =
      ts_for_find_annotation(loop, TS_ANN_LLVM_UNROLL_FULL);
  can_cut &= !(u && u->kind == TS_ANN_INT && u->i);
  int64_t mn, ext;
  can_cut &= ts_expr_is_const_int(ts_for_min(loop), &mn) && mn == 0 &&
             ts_expr_is_const_int(ts_for_extent(loop), &ext) && ext > 1;
  bool can_guard = ts_for_kind_of(loop) != TS_FOR_VECTORIZED &&
                   ts_for_kind_of(loop) != TS_FOR_THREAD;
  bool any = false;
  for (int k = 0; k < st->n_leaves && (can_cut || can_guard); k++) {
    const leaf *l = &st->leaves[k];
    int at = -1;
    for (int j = 0; j < l->n_loops; j++)
      if (l->loops[j] == loop) at = j;
    if (at < 0) continue;
    int n = ts_block_n_iters(l->block);
    bool uses = false;
    for (int i = 0; i < n; i++) uses |= mentions(l->binding[i], var);
    if (!uses) continue; /* recomputed alike in every iteration */
    any = true;
    ts_var_ranges *r = leaf_ranges(l);
    if (!r) return false;
    /* cut: any one var past n skips the block; take the earliest */
    bool cut_ok = false, guard_ok = false;
    int64_t bc = 0, bd = 0;
    ts_expr *base = NULL;
    for (int i = 0; i < n; i++) {
      const ivar *v = &st->vars[l->first_var + i];
      if (!cut_var(v) || !l->binding[i]) continue;
      int64_t c, d;
      if (can_cut && tile_major(l->binding[i], var, r, &c, &d)) {
        if (!cut_ok || d * bc < bd * c) bc = c, bd = d;
        cut_ok = true;
      }
      if (can_guard && !base)
        base = iteration_base(((dl *)st)->a, l, at, l->binding[i], r);
    }
    guard_ok = base != NULL;
    ts_var_ranges_destroy(r);
    if (!cut_ok) can_cut = false;
    if (!guard_ok) can_guard = false;
    if (cut_ok) {
      bool seen = false;
      for (int i = 0; i < p->n_cuts; i++)
        seen |= p->cs[i] == bc && p->ds[i] == bd;
      if (!seen && p->n_cuts < 16) {
        p->cs[p->n_cuts] = bc;
        p->ds[p->n_cuts++] = bd;
      } else if (!seen) {
        can_cut = false;
      }
    }
    if (guard_ok) {
      bool seen = false;
      for (int i = 0; i < p->n_bases; i++) seen |= expr_same(p->bases[i], base);
      if (!seen && p->n_bases < 16)
        p->bases[p->n_bases++] = base;
      else if (!seen)
        can_guard = false;
    }
  }
  if (!any) return false;
  if (!can_cut) p->n_cuts = 0;
  if (!can_guard || can_cut) p->n_bases = 0;
  return can_cut || can_guard;
}

/* ceil(n / c) * d as an index expression. */
static ts_expr *bound_expr(ts_arena *a, ts_expr *n, int64_t c, int64_t d) {
  ts_expr *q = ts_floordiv(a, ts_add(a, n, ts_index(a, c - 1)), ts_index(a, c));
  return ts_mul(a, q, ts_index(a, d));
}

/* Cuts or guards the outermost loops it can (not the ones inside). */
static void apply(dl *st, ts_stmt *s, ts_expr *n, int *n_cut) {
  if (!s) return;
  switch (ts_stmt_kind_of(s)) {
  case TS_STMT_FOR: {
    plan p;
    if (!plan_loop(st, s, &p)) {
      apply(st, ts_for_body(s), n, n_cut);
      return;
    }
    ts_arena *a = st->a;
    if (p.n_cuts) {
      int64_t ext;
      ts_expr_is_const_int(ts_for_extent(s), &ext);
      ts_expr *b = bound_expr(a, n, p.cs[0], p.ds[0]);
      for (int i = 1; i < p.n_cuts; i++)
        b = ts_max(a, b, bound_expr(a, n, p.cs[i], p.ds[i]));
      ts_for_set_range(s, ts_for_min(s), ts_min(a, b, ts_index(a, ext)));
    } else {
      ts_expr *c = ts_lt(a, p.bases[0], n);
      for (int i = 1; i < p.n_bases; i++)
        c = ts_or(a, c, ts_lt(a, p.bases[i], n));
      ts_for_set_body(s, ts_if(a, c, ts_for_body(s), NULL));
    }
    (*n_cut)++;
    return;
  }
  case TS_STMT_SEQ:
    for (int i = 0; i < ts_seq_n(s); i++)
      apply(st, ts_seq_item(s, i), n, n_cut);
    return;
  case TS_STMT_IF:
    apply(st, ts_if_then(s), n, n_cut);
    apply(st, ts_if_else(s), n, n_cut);
    return;
  case TS_STMT_LET: apply(st, ts_let_stmt_body(s), n, n_cut); return;
  case TS_STMT_ALLOCATE: apply(st, ts_allocate_body(s), n, n_cut); return;
  case TS_STMT_BLOCK_REALIZE:
    apply(st, ts_block_body(ts_realize_block(s)), n, n_cut);
    return;
  default: return;
  }
}

int gr_loops_to_length(ts_func *f, const unsigned *sym_axes,
                       const bool *positions, int n_params, int *n_cut,
                       ts_error *err) {
  *n_cut = 0;
  if (n_params != ts_func_n_params(f))
    return TS_ERR(err, TS_EINTERNAL,
                  "length loops: %d parameter descriptions for %d parameters",
                  n_params, ts_func_n_params(f));
  dl st;
  memset(&st, 0, sizeof st);
  st.a = ts_func_arena(f);
  st.sub = ts_node_map_create();
  int rc = TS_OK;
  bool any_sym = false;
  for (int i = 0; i < n_params; i++) any_sym |= sym_axes[i] != 0;
  if (!any_sym) goto done;
  collect(&st, ts_func_body(f));
  for (int i = 0; !st.oom && i < n_params; i++) {
    const ts_buffer *b = ts_func_param(f, i);
    for (int d = 0; d < ts_buffer_ndim(b); d++) {
      unsigned fl = ((sym_axes[i] >> d) & 1) ? F_SYM : 0;
      if (positions[i]) fl |= F_PIN;
      if (!fl) continue;
      int s = slot_of(&st, b, d);
      if (s >= 0) st.slots[s].flags |= fl;
    }
  }
  if (st.oom) goto done; /* leave the kernel as it is */
  propagate(&st);
  int64_t one = 1;
  ts_buffer *len = ts_buffer_new(st.a, "tessera_length", TS_FLOAT32, &one, 1);
  if (!len) {
    rc = TS_ERR(err, TS_ENOMEM, "length loops: out of memory");
    goto done;
  }
  ts_expr *zero = ts_index(st.a, 0);
  ts_expr *n = ts_cast(st.a, TS_INDEX, ts_load(st.a, len, &zero, 1));
  apply(&st, ts_func_body(f), n, n_cut);
  if (*n_cut) ts_func_add_param(f, len);
  if (ts_arena_failed(st.a))
    rc = TS_ERR(err, TS_ENOMEM, "length loops: out of memory");
done:
  ts_node_map_destroy(st.sub);
  free(st.slots);
  free(st.vars);
  free(st.rels);
  free(st.leaves);
  return rc;
}
