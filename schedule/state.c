/*
 * state.c — the schedule state: creation, forking and freeing; the handle
 * (random variable) table; running one instruction (dispatch through the
 * instruction table, recording into the trace); decoding instruction
 * inputs into blocks, loops and integers with the error messages every
 * primitive shares; and the query primitives (get_block, get_loops,
 * get_child_blocks, get_producers, get_consumers).
 */
#include "schedule/internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ========================================================================
 * Handles
 * ======================================================================== */

/* Out of memory (here and in the RV constructors below) drops the RV;
 * the failure is counted and sched_run reports it. */
void rv_push(rv_list *l, ts_rv rv) {
  if (rv < 0) return;
  if (l->n == l->cap) {
    int cap = l->cap ? l->cap * 2 : 8;
    ts_rv *v = ts_realloc(l->v, sizeof *v * (size_t)cap);
    if (!v) return;
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n++] = rv;
}

static ts_rv rv_alloc(ts_sched *s, uint8_t kind) {
  if (s->n_rvs == s->cap_rvs) {
    int cap = s->cap_rvs ? s->cap_rvs * 2 : 32;
    rv_entry *v = ts_realloc(s->rvs, sizeof *v * (size_t)cap);
    if (!v) return TS_RV_NONE;
    s->rvs = v;
    s->cap_rvs = cap;
  }
  rv_entry *e = &s->rvs[s->n_rvs];
  memset(e, 0, sizeof *e);
  e->kind = kind;
  return s->n_rvs++;
}

ts_rv rv_new_block(ts_sched *s, const char *name, rv_list *out) {
  ts_rv id = rv_alloc(s, TS_RV_BLOCK);
  if (id < 0) return id;
  s->rvs[id].block = ts_strdup(name);
  if (!s->rvs[id].block) {
    s->n_rvs--;
    return TS_RV_NONE;
  }
  if (out) rv_push(out, id);
  return id;
}

ts_rv rv_new_loop(ts_sched *s, ts_stmt *loop, uint8_t mark, rv_list *out) {
  ts_rv id = rv_alloc(s, TS_RV_LOOP);
  if (id < 0) return id;
  s->rvs[id].loop = loop;
  s->rvs[id].mark = mark;
  if (out) rv_push(out, id);
  return id;
}

ts_rv rv_new_int(ts_sched *s, int64_t value, rv_list *out) {
  ts_rv id = rv_alloc(s, TS_RV_INT);
  if (id < 0) return id;
  s->rvs[id].value = value;
  if (out) rv_push(out, id);
  return id;
}

void rv_kill_loops(ts_sched *s, ts_stmt *const *loops, int n, const char *why) {
  for (int i = 0; i < s->n_rvs; i++) {
    rv_entry *e = &s->rvs[i];
    if (e->kind != TS_RV_LOOP || !e->loop || e->dead) continue;
    for (int j = 0; j < n; j++)
      if (e->loop == loops[j]) e->dead = why;
  }
}

void rv_rename_blocks(ts_sched *s, const char *from, const char *to) {
  for (int i = 0; i < s->n_rvs; i++) {
    rv_entry *e = &s->rvs[i];
    if (e->kind != TS_RV_BLOCK || strcmp(e->block, from) != 0) continue;
    char *name = ts_strdup(to);
    if (!name) continue; /* out of memory (counted; sched_run reports it) */
    free(e->block);
    e->block = name;
  }
}

/* Drops RVs created after `n` (a failed or undone instruction). */
static void rv_truncate(ts_sched *s, int n) {
  for (int i = n; i < s->n_rvs; i++) free(s->rvs[i].block);
  s->n_rvs = n;
}

/* ========================================================================
 * Creation
 * ======================================================================== */

static int check_block_names(const ts_func *f, ts_error *err) {
  int n;
  ts_stmt **all = ts_func_blocks(f, &n);
  int rc = TS_OK;
  for (int i = 0; i < n && !rc; i++)
    for (int j = i + 1; j < n && !rc; j++)
      if (strcmp(ts_block_name(ts_realize_block(all[i])),
                 ts_block_name(ts_realize_block(all[j]))) == 0)
        rc = TS_ERR(err, TS_EINVAL,
                    "schedule: block name '%s' is used by two blocks "
                    "(block names must be unique)",
                    ts_block_name(ts_realize_block(all[i])));
  free(all);
  return rc;
}

int ts_sched_create(const ts_func *f, uint64_t seed, ts_sched **out,
                    ts_error *err) {
  *out = NULL;
  if (!f) return TS_ERR(err, TS_EINVAL, "schedule: no function");
  unsigned long oom = ts_alloc_failures();
  int rc = ts_func_verify(f, err);
  if (rc) return rc;
  if ((rc = check_block_names(f, err)))
    return ts_alloc_check(oom, rc, err, "schedule");
  ts_sched *s = ts_calloc(1, sizeof *s);
  if (!s) return TS_ERR(err, TS_ENOMEM, "schedule: out of memory");
  s->func = ts_func_copy(f);
  s->orig = ts_func_copy(f);
  s->trace = ts_trace_new();
  if (!s->func || !s->orig || !s->trace || ts_alloc_failures() != oom) {
    ts_sched_destroy(s);
    return TS_ERR(err, TS_ENOMEM, "schedule: out of memory");
  }
  ts_rng_seed(&s->rng, seed);
  s->oom_mark = ts_alloc_failures();
  *out = s;
  return TS_OK;
}

void ts_sched_destroy(ts_sched *s) {
  if (!s) return;
  ts_func_free(s->func);
  ts_func_free(s->orig);
  ts_trace_free(s->trace);
  rv_truncate(s, 0);
  free(s->rvs);
  free(s);
}

int ts_sched_fork(const ts_sched *s, uint64_t seed, ts_sched **out,
                  ts_error *err) {
  int rc = ts_trace_apply(s->trace, s->orig, seed, out, err);
  if (rc) return rc;
  ts_rng_seed(&(*out)->rng, seed);
  return TS_OK;
}

const ts_func *ts_sched_func(const ts_sched *s) { return s->func; }
const ts_func *ts_sched_original(const ts_sched *s) { return s->orig; }
const ts_trace *ts_sched_trace(const ts_sched *s) { return s->trace; }
const ts_error *ts_sched_error(const ts_sched *s) { return &s->err; }
const char *ts_sched_errmsg(const ts_sched *s) { return s->err.msg; }
ts_rng *ts_sched_rng(ts_sched *s) { return &s->rng; }

ts_rv_kind ts_sched_rv_kind(const ts_sched *s, ts_rv rv) {
  if (rv < 0 || rv >= s->n_rvs) return TS_RV_INVALID;
  return (ts_rv_kind)s->rvs[rv].kind;
}

int64_t ts_sched_rv_int(const ts_sched *s, ts_rv rv) {
  if (ts_sched_rv_kind(s, rv) != TS_RV_INT) return 0;
  return s->rvs[rv].value;
}

const char *ts_sched_rv_block_name(const ts_sched *s, ts_rv rv) {
  if (ts_sched_rv_kind(s, rv) != TS_RV_BLOCK) return NULL;
  return s->rvs[rv].block;
}

const ts_stmt *ts_sched_rv_loop(const ts_sched *s, ts_rv rv) {
  if (ts_sched_rv_kind(s, rv) != TS_RV_LOOP) return NULL;
  const rv_entry *e = &s->rvs[rv];
  if (e->mark || e->dead || !tree_contains(ts_func_body(s->func), e->loop))
    return NULL;
  return e->loop;
}

/* Re-infers regions bottom-up, keeping those of tensorized blocks (their
 * body is an opaque call; the regions of the matched nest stay true). */
static void refresh_leave(void *ctx, ts_stmt *st) {
  if (ts_stmt_kind_of(st) != TS_STMT_BLOCK_REALIZE) return;
  ts_block *b = ts_realize_block(st);
  if (!ts_block_find_annotation(b, TS_ANN_TENSOR_INTRIN))
    ts_block_infer_regions(ctx, b);
}

void sched_refresh(ts_sched *s) {
  ts_visitor v = {NULL, refresh_leave, NULL, ts_func_arena(s->func)};
  ts_stmt_walk(ts_func_body(s->func), &v);
}

/* ========================================================================
 * Running instructions
 * ======================================================================== */

typedef int (*apply_fn)(ts_sched *s, inst *in, rv_list *out);

static const apply_fn apply_table[TS_INSTR_KIND_COUNT] = {
#define TS_INSTR(id, name, inputs, attrs, decision, outputs, pure)             \
  [TS_INSTR_##id] = apply_##name,
#include "schedule/instructions.def"
#undef TS_INSTR
};

int sched_run(ts_sched *s, inst *in, rv_list *out) {
  ts_error_clear(&s->err);
  if (s->oom)
    return FAIL(s, TS_ENOMEM,
                "%s: out of memory earlier; the schedule is to be discarded",
                prim_name(in));
  if ((int)in->kind < 0 || in->kind >= TS_INSTR_KIND_COUNT)
    return FAIL(s, TS_EINVAL, "schedule: unknown instruction kind %d",
                (int)in->kind);
  for (int i = 0; i < in->n_inputs; i++)
    if (in->inputs[i].kind == TV_RV &&
        (in->inputs[i].i < 0 || in->inputs[i].i >= s->n_rvs))
      return FAIL(s, TS_EINVAL, "%s: input %d is not a handle of this schedule",
                  prim_name(in), i);
  int n_before = s->n_rvs;
  rv_list outs = {0};
  /* since the last instruction: the public entry point building `in` may
   * have run out of memory too */
  unsigned long oom = s->oom_mark;
  int rc = apply_table[in->kind](s, in, &outs);
  s->oom_mark = ts_alloc_failures();
  if (s->oom_mark != oom) {
    /* the function may be half rewritten: nothing more runs on it (the
     * instruction is not recorded, its new handles are dropped) */
    s->oom = true;
    rv_truncate(s, n_before);
    free(outs.v);
    return FAIL(s, TS_ENOMEM, "%s: out of memory", prim_name(in));
  }
  if (!rc) {
    free(in->outputs);
    in->outputs = outs.v;
    in->n_outputs = outs.n;
    outs = (rv_list){0};
    trace_append(s->trace, in);
  }
  if (rc) {
    rv_truncate(s, n_before);
    free(outs.v);
    if (!s->err.msg[0]) FAIL(s, rc, "%s: failed", prim_name(in));
    return rc;
  }
  for (int i = 0; i < in->n_outputs && out; i++) rv_push(out, in->outputs[i]);
  if (ts_alloc_failures() != s->oom_mark) {
    s->oom = true;
    s->oom_mark = ts_alloc_failures();
    return FAIL(s, TS_ENOMEM, "%s: out of memory", prim_name(in));
  }
  return TS_OK;
}

/* Runs an instruction built by a public entry point and frees it; copies
 * up to cap outputs. A pure instruction whose result does not fit is
 * undone. */
static int run_public(ts_sched *s, inst *in, ts_rv *out, int cap, int *n) {
  int rvs_n = s->n_rvs;
  rv_list outs = {0};
  int rc = sched_run(s, in, &outs);
  if (rc == TS_OK && outs.n > cap) {
    /* only queries have unbounded outputs; they changed nothing else */
    inst_free(&s->trace->insts[--s->trace->n]);
    rv_truncate(s, rvs_n);
    rc = FAIL(s, TS_EINVAL, "%s: %d results do not fit in %d", prim_name(in),
              outs.n, cap);
  }
  if (rc == TS_OK)
    for (int i = 0; i < outs.n; i++) out[i] = outs.v[i];
  if (n) *n = rc == TS_OK ? outs.n : 0;
  free(outs.v);
  inst_free(in);
  return rc;
}

/* Builds an instruction from inputs and attrs (taken, not copied). */
static inst make_inst(ts_instr_kind kind, tval *inputs, int n_inputs,
                      tval *attrs, int n_attrs) {
  inst in = {0};
  in.kind = kind;
  in.inputs = inputs;
  in.n_inputs = n_inputs;
  in.attrs = attrs;
  in.n_attrs = n_attrs;
  in.decision = tv_null();
  return in;
}

/* n null values (NULL when out of memory). */
static tval *vals(int n) {
  return ts_calloc((size_t)(n ? n : 1), sizeof(tval));
}

static int no_memory(ts_sched *s) {
  return FAIL(s, TS_ENOMEM, "schedule: out of memory");
}

/* ========================================================================
 * Decoding inputs
 * ======================================================================== */

const char *prim_name(const inst *in) { return ts_instr_kind_name(in->kind); }

int fail_prefix(ts_sched *s, int rc, const char *prim) {
  char tmp[sizeof s->err.msg];
  memcpy(tmp, s->err.msg, sizeof tmp);
  int room = (int)(sizeof s->err.msg - strlen(prim) - 3);
  snprintf(s->err.msg, sizeof s->err.msg, "%s: %.*s", prim, room > 0 ? room : 0,
           tmp);
  s->err.code = rc;
  return rc;
}

int fail_oom(ts_sched *s, const char *prim) {
  return FAIL(s, TS_ENOMEM, "%s: out of memory", prim);
}

int check_arity(ts_sched *s, const inst *in, int min_in, int max_in,
                int n_attrs) {
  if (in->n_inputs < min_in || (max_in >= 0 && in->n_inputs > max_in))
    return FAIL(s, TS_EINVAL, "%s: expected %d%s inputs, got %d", prim_name(in),
                min_in,
                max_in < 0        ? " or more"
                : max_in > min_in ? " to ..."
                                  : "",
                in->n_inputs);
  if (in->n_attrs != n_attrs)
    return FAIL(s, TS_EINVAL, "%s: expected %d attributes, got %d",
                prim_name(in), n_attrs, in->n_attrs);
  return TS_OK;
}

/* A description of RV id for messages: "l3 (loop 'i')". */
static void describe(const ts_sched *s, ts_rv id, char *buf, size_t cap) {
  const rv_entry *e = &s->rvs[id];
  switch (e->kind) {
  case TS_RV_BLOCK: snprintf(buf, cap, "b%d (block '%s')", id, e->block); break;
  case TS_RV_LOOP:
    if (e->mark)
      snprintf(buf, cap, "l%d (the %s mark)", id,
               e->mark == MARK_ROOT ? "root" : "inline");
    else
      snprintf(buf, cap, "l%d (loop '%s')", id, loop_name(e->loop));
    break;
  default:
    snprintf(buf, cap, "v%d (integer %lld)", id, (long long)e->value);
    break;
  }
}

static int in_rv(ts_sched *s, const inst *in, int i, ts_rv *id) {
  if (i >= in->n_inputs)
    return FAIL(s, TS_EINVAL, "%s: missing input %d", prim_name(in), i);
  if (in->inputs[i].kind != TV_RV)
    return FAIL(s, TS_EINVAL, "%s: input %d is not a handle", prim_name(in), i);
  *id = (ts_rv)in->inputs[i].i;
  return TS_OK;
}

static int resolve_block(ts_sched *s, const inst *in, ts_rv id,
                         ts_stmt **realize) {
  const rv_entry *e = &s->rvs[id];
  ts_stmt *r = ts_func_find_block(s->func, e->block);
  if (!r)
    return FAIL(s, TS_ESCHEDULE, "%s: block '%s' (b%d) no longer exists",
                prim_name(in), e->block, id);
  *realize = r;
  return TS_OK;
}

static int resolve_loop(ts_sched *s, const inst *in, ts_rv id, ts_stmt **loop) {
  const rv_entry *e = &s->rvs[id];
  char d[160];
  describe(s, id, d, sizeof d);
  if (e->mark)
    return FAIL(s, TS_ESCHEDULE, "%s: %s is not a loop", prim_name(in), d);
  if (e->dead)
    return FAIL(s, TS_ESCHEDULE, "%s: %s was removed by %s", prim_name(in), d,
                e->dead);
  if (!tree_contains(ts_func_body(s->func), e->loop))
    return FAIL(s, TS_ESCHEDULE, "%s: %s is no longer in the function",
                prim_name(in), d);
  *loop = e->loop;
  return TS_OK;
}

int in_block(ts_sched *s, const inst *in, int i, ts_stmt **realize) {
  ts_rv id;
  int rc = in_rv(s, in, i, &id);
  if (rc) return rc;
  if (s->rvs[id].kind != TS_RV_BLOCK) {
    char d[160];
    describe(s, id, d, sizeof d);
    return FAIL(s, TS_EINVAL, "%s: %s is not a block handle", prim_name(in), d);
  }
  return resolve_block(s, in, id, realize);
}

int in_loop(ts_sched *s, const inst *in, int i, ts_stmt **loop) {
  ts_rv id;
  int rc = in_rv(s, in, i, &id);
  if (rc) return rc;
  if (s->rvs[id].kind != TS_RV_LOOP) {
    char d[160];
    describe(s, id, d, sizeof d);
    return FAIL(s, TS_EINVAL, "%s: %s is not a loop handle", prim_name(in), d);
  }
  return resolve_loop(s, in, id, loop);
}

int in_block_or_loop(ts_sched *s, const inst *in, int i, ts_stmt **realize,
                     ts_stmt **loop) {
  ts_rv id;
  *realize = *loop = NULL;
  int rc = in_rv(s, in, i, &id);
  if (rc) return rc;
  if (s->rvs[id].kind == TS_RV_BLOCK) return resolve_block(s, in, id, realize);
  if (s->rvs[id].kind == TS_RV_LOOP) return resolve_loop(s, in, id, loop);
  char d[160];
  describe(s, id, d, sizeof d);
  return FAIL(s, TS_EINVAL, "%s: %s is neither a block nor a loop handle",
              prim_name(in), d);
}

int in_int(ts_sched *s, const inst *in, int i, bool allow_null, int64_t *v,
           bool *is_null) {
  if (is_null) *is_null = false;
  if (i >= in->n_inputs)
    return FAIL(s, TS_EINVAL, "%s: missing input %d", prim_name(in), i);
  const tval *t = &in->inputs[i];
  if (t->kind == TV_INT) {
    *v = t->i;
    return TS_OK;
  }
  if (t->kind == TV_NULL && allow_null) {
    *is_null = true;
    return TS_OK;
  }
  if (t->kind == TV_RV && s->rvs[t->i].kind == TS_RV_INT) {
    *v = s->rvs[t->i].value;
    return TS_OK;
  }
  return FAIL(s, TS_EINVAL, "%s: input %d is not an integer%s", prim_name(in),
              i, allow_null ? " or null" : "");
}

int attr_str(ts_sched *s, const inst *in, int i, const char **v) {
  if (i >= in->n_attrs || in->attrs[i].kind != TV_STR)
    return FAIL(s, TS_EINVAL, "%s: attribute %d is not a string", prim_name(in),
                i);
  *v = in->attrs[i].s;
  return TS_OK;
}

int attr_int(ts_sched *s, const inst *in, int i, int64_t *v) {
  if (i >= in->n_attrs || in->attrs[i].kind != TV_INT)
    return FAIL(s, TS_EINVAL, "%s: attribute %d is not an integer",
                prim_name(in), i);
  *v = in->attrs[i].i;
  return TS_OK;
}

/* ========================================================================
 * Queries
 * ======================================================================== */

int apply_get_block(ts_sched *s, inst *in, rv_list *out) {
  const char *name;
  int rc = check_arity(s, in, 0, 0, 1);
  if (rc || (rc = attr_str(s, in, 0, &name))) return rc;
  if (!ts_func_find_block(s->func, name))
    return FAIL(s, TS_ENOTFOUND, "get_block: no block named '%s'", name);
  rv_new_block(s, name, out);
  return TS_OK;
}

int apply_get_loops(ts_sched *s, inst *in, rv_list *out) {
  ts_stmt *r;
  int rc = check_arity(s, in, 1, 1, 0);
  if (rc || (rc = in_block(s, in, 0, &r))) return rc;
  stmt_vec loops = {0};
  tree_loops_above(s->func, r, &loops);
  for (int i = 0; i < loops.n; i++) rv_new_loop(s, loops.v[i], MARK_NONE, out);
  sv_free(&loops);
  return TS_OK;
}

int apply_get_child_blocks(ts_sched *s, inst *in, rv_list *out) {
  ts_stmt *r, *loop;
  int rc = check_arity(s, in, 1, 1, 0);
  if (rc || (rc = in_block_or_loop(s, in, 0, &r, &loop))) return rc;
  stmt_vec blocks = {0};
  tree_realizes(r ? ts_block_body(ts_realize_block(r)) : ts_for_body(loop),
                false, &blocks);
  for (int i = 0; i < blocks.n; i++)
    rv_new_block(s, ts_block_name(ts_realize_block(blocks.v[i])), out);
  sv_free(&blocks);
  return TS_OK;
}

/* Blocks of r's scope that write what r reads (producers) or read what r
 * writes (consumers), in program order. */
static void related_blocks(ts_sched *s, ts_stmt *r, bool producers,
                           stmt_vec *out) {
  ts_stmt *scope = tree_scope(s->func, r);
  if (!scope) return;
  stmt_vec all = {0};
  tree_realizes(ts_block_body(ts_realize_block(scope)), false, &all);
  const ts_block *b = ts_realize_block(r);
  for (int i = 0; i < all.n; i++) {
    if (all.v[i] == r) continue;
    const ts_block *o = ts_realize_block(all.v[i]);
    bool hit = false;
    if (producers) {
      for (int j = 0; j < ts_block_n_reads(b) && !hit; j++)
        hit = block_writes(o, ts_block_read(b, j)->buffer);
    } else {
      for (int j = 0; j < ts_block_n_writes(b) && !hit; j++)
        hit = block_reads(o, ts_block_write(b, j)->buffer);
    }
    if (hit) sv_push(out, all.v[i]);
  }
  sv_free(&all);
}

static int apply_related(ts_sched *s, inst *in, rv_list *out, bool producers) {
  ts_stmt *r;
  int rc = check_arity(s, in, 1, 1, 0);
  if (rc || (rc = in_block(s, in, 0, &r))) return rc;
  stmt_vec blocks = {0};
  related_blocks(s, r, producers, &blocks);
  for (int i = 0; i < blocks.n; i++)
    rv_new_block(s, ts_block_name(ts_realize_block(blocks.v[i])), out);
  sv_free(&blocks);
  return TS_OK;
}

int apply_get_producers(ts_sched *s, inst *in, rv_list *out) {
  return apply_related(s, in, out, true);
}
int apply_get_consumers(ts_sched *s, inst *in, rv_list *out) {
  return apply_related(s, in, out, false);
}

/* ========================================================================
 * Public entry points (every primitive builds its instruction here)
 * ======================================================================== */

int ts_sched_get_block(ts_sched *s, const char *name, ts_rv *out) {
  tval *a = vals(1);
  if (!a) return no_memory(s);
  a[0] = tv_str(name ? name : "");
  inst in = make_inst(TS_INSTR_GET_BLOCK, NULL, 0, a, 1);
  return run_public(s, &in, out, 1, NULL);
}

static int query(ts_sched *s, ts_instr_kind k, ts_rv rv, ts_rv *out, int cap,
                 int *n) {
  tval *i = vals(1);
  if (!i) return no_memory(s);
  i[0] = tv_rv(rv);
  inst in = make_inst(k, i, 1, NULL, 0);
  return run_public(s, &in, out, cap, n);
}

int ts_sched_get_loops(ts_sched *s, ts_rv block, ts_rv *out, int cap, int *n) {
  return query(s, TS_INSTR_GET_LOOPS, block, out, cap, n);
}
int ts_sched_get_child_blocks(ts_sched *s, ts_rv parent, ts_rv *out, int cap,
                              int *n) {
  return query(s, TS_INSTR_GET_CHILD_BLOCKS, parent, out, cap, n);
}
int ts_sched_get_producers(ts_sched *s, ts_rv block, ts_rv *out, int cap,
                           int *n) {
  return query(s, TS_INSTR_GET_PRODUCERS, block, out, cap, n);
}
int ts_sched_get_consumers(ts_sched *s, ts_rv block, ts_rv *out, int cap,
                           int *n) {
  return query(s, TS_INSTR_GET_CONSUMERS, block, out, cap, n);
}

/* An instruction of RV inputs and the given attrs. */
static int run_rvs(ts_sched *s, ts_instr_kind k, const ts_rv *rvs, int n_rvs,
                   tval *attrs, int n_attrs, ts_rv *out, int cap) {
  tval *i = vals(n_rvs);
  if (!i || (n_attrs && !attrs)) {
    free(i);
    for (int j = 0; attrs && j < n_attrs; j++) tv_free(&attrs[j]);
    free(attrs);
    return no_memory(s);
  }
  for (int j = 0; j < n_rvs; j++) i[j] = tv_rv(rvs[j]);
  inst in = make_inst(k, i, n_rvs, attrs, n_attrs);
  return run_public(s, &in, out, cap, NULL);
}

int ts_sched_split(ts_sched *s, ts_rv loop, const int64_t *factors, int n,
                   ts_rv *out) {
  if (n < 1 || !factors)
    return FAIL(s, TS_EINVAL, "split: at least one factor is needed");
  tval *i = vals(n + 1);
  if (!i) return no_memory(s);
  i[0] = tv_rv(loop);
  for (int j = 0; j < n; j++)
    i[j + 1] = factors[j] == TS_SPLIT_INFER ? tv_null() : tv_int(factors[j]);
  inst in = make_inst(TS_INSTR_SPLIT, i, n + 1, NULL, 0);
  return run_public(s, &in, out, n, NULL);
}

int ts_sched_split_rv(ts_sched *s, ts_rv loop, const ts_rv *factors, int n,
                      ts_rv *out) {
  if (n < 1 || !factors)
    return FAIL(s, TS_EINVAL, "split: at least one factor is needed");
  tval *i = vals(n + 1);
  if (!i) return no_memory(s);
  i[0] = tv_rv(loop);
  for (int j = 0; j < n; j++)
    i[j + 1] = factors[j] == TS_RV_NONE ? tv_null() : tv_rv(factors[j]);
  inst in = make_inst(TS_INSTR_SPLIT, i, n + 1, NULL, 0);
  return run_public(s, &in, out, n, NULL);
}

int ts_sched_partition(ts_sched *s, ts_rv loop, int64_t at, ts_rv *out) {
  tval *i = vals(2);
  if (!i) return no_memory(s);
  i[0] = tv_rv(loop);
  i[1] = tv_int(at);
  inst in = make_inst(TS_INSTR_PARTITION, i, 2, NULL, 0);
  return run_public(s, &in, out, 2, NULL);
}

int ts_sched_fuse(ts_sched *s, const ts_rv *loops, int n, ts_rv *out) {
  return run_rvs(s, TS_INSTR_FUSE, loops, n, NULL, 0, out, 1);
}
int ts_sched_reorder(ts_sched *s, const ts_rv *loops, int n) {
  return run_rvs(s, TS_INSTR_REORDER, loops, n, NULL, 0, NULL, 0);
}
int ts_sched_fuse_siblings(ts_sched *s, const ts_rv *loops, int n) {
  return run_rvs(s, TS_INSTR_FUSE_SIBLINGS, loops, n, NULL, 0, NULL, 0);
}
int ts_sched_parallel(ts_sched *s, ts_rv loop) {
  return run_rvs(s, TS_INSTR_PARALLEL, &loop, 1, NULL, 0, NULL, 0);
}
int ts_sched_vectorize(ts_sched *s, ts_rv loop) {
  return run_rvs(s, TS_INSTR_VECTORIZE, &loop, 1, NULL, 0, NULL, 0);
}
int ts_sched_unroll(ts_sched *s, ts_rv loop) {
  return run_rvs(s, TS_INSTR_UNROLL, &loop, 1, NULL, 0, NULL, 0);
}

static tval *str_attrs(int n, ...) {
  tval *a = vals(n);
  if (!a) return NULL;
  va_list ap;
  va_start(ap, n);
  for (int i = 0; i < n; i++) {
    const char *x = va_arg(ap, const char *);
    a[i] = tv_str(x ? x : "");
  }
  va_end(ap);
  return a;
}

int ts_sched_bind(ts_sched *s, ts_rv loop, const char *thread_axis) {
  return run_rvs(s, TS_INSTR_BIND, &loop, 1, str_attrs(1, thread_axis), 1, NULL,
                 0);
}

int ts_sched_annotate(ts_sched *s, ts_rv target, ts_annotation ann) {
  tval *i = vals(2), *a = vals(2);
  if (!i || !a) {
    free(i);
    free(a);
    return no_memory(s);
  }
  i[0] = tv_rv(target);
  i[1] = tv_null();
  a[0] = tv_str(ann.key ? ann.key : "");
  switch (ann.kind) {
  case TS_ANN_INT: a[1] = tv_int(ann.i); break;
  case TS_ANN_FLOAT: a[1] = tv_float(ann.f); break;
  default: a[1] = tv_str(ann.s ? ann.s : ""); break;
  }
  inst in = make_inst(TS_INSTR_ANNOTATE, i, 2, a, 2);
  return run_public(s, &in, NULL, 0, NULL);
}

int ts_sched_annotate_rv(ts_sched *s, ts_rv target, const char *key,
                         ts_rv value) {
  tval *i = vals(2), *a = vals(2);
  if (!i || !a) {
    free(i);
    free(a);
    return no_memory(s);
  }
  i[0] = tv_rv(target);
  i[1] = tv_rv(value);
  a[0] = tv_str(key ? key : "");
  a[1] = tv_null();
  inst in = make_inst(TS_INSTR_ANNOTATE, i, 2, a, 2);
  return run_public(s, &in, NULL, 0, NULL);
}

int ts_sched_unannotate(ts_sched *s, ts_rv target, const char *key) {
  return run_rvs(s, TS_INSTR_UNANNOTATE, &target, 1, str_attrs(1, key), 1, NULL,
                 0);
}

int ts_sched_compute_at(ts_sched *s, ts_rv block, ts_rv loop) {
  ts_rv rvs[2] = {block, loop};
  return run_rvs(s, TS_INSTR_COMPUTE_AT, rvs, 2, NULL, 0, NULL, 0);
}
int ts_sched_reverse_compute_at(ts_sched *s, ts_rv block, ts_rv loop) {
  ts_rv rvs[2] = {block, loop};
  return run_rvs(s, TS_INSTR_REVERSE_COMPUTE_AT, rvs, 2, NULL, 0, NULL, 0);
}
int ts_sched_compute_inline(ts_sched *s, ts_rv block) {
  return run_rvs(s, TS_INSTR_COMPUTE_INLINE, &block, 1, NULL, 0, NULL, 0);
}
int ts_sched_reverse_compute_inline(ts_sched *s, ts_rv block) {
  return run_rvs(s, TS_INSTR_REVERSE_COMPUTE_INLINE, &block, 1, NULL, 0, NULL,
                 0);
}

int ts_sched_cache_read(ts_sched *s, ts_rv block, const char *buffer,
                        const char *scope, ts_rv *out) {
  return run_rvs(s, TS_INSTR_CACHE_READ, &block, 1, str_attrs(2, buffer, scope),
                 2, out, 1);
}
int ts_sched_cache_write(ts_sched *s, ts_rv block, const char *buffer,
                         const char *scope, ts_rv *out) {
  return run_rvs(s, TS_INSTR_CACHE_WRITE, &block, 1,
                 str_attrs(2, buffer, scope), 2, out, 1);
}
int ts_sched_set_scope(ts_sched *s, ts_rv block, const char *buffer,
                       const char *scope) {
  return run_rvs(s, TS_INSTR_SET_SCOPE, &block, 1, str_attrs(2, buffer, scope),
                 2, NULL, 0);
}

int ts_sched_storage_align(ts_sched *s, ts_rv block, const char *buffer,
                           int axis, int factor, int offset) {
  tval *a = vals(4);
  if (!a) return no_memory(s);
  a[0] = tv_str(buffer ? buffer : "");
  a[1] = tv_int(axis);
  a[2] = tv_int(factor);
  a[3] = tv_int(offset);
  return run_rvs(s, TS_INSTR_STORAGE_ALIGN, &block, 1, a, 4, NULL, 0);
}

int ts_sched_transform_layout(ts_sched *s, ts_rv block, const char *buffer,
                              const char *index_map) {
  return run_rvs(s, TS_INSTR_TRANSFORM_LAYOUT, &block, 1,
                 str_attrs(2, buffer, index_map), 2, NULL, 0);
}

int ts_sched_shift_int8(ts_sched *s, ts_rv block, const char *buffer,
                        ts_rv *out) {
  ts_rv dropped[2];
  return run_rvs(s, TS_INSTR_SHIFT_INT8, &block, 1, str_attrs(1, buffer), 1,
                 out ? out : dropped, 2);
}

int ts_sched_pad_einsum(ts_sched *s, ts_rv block, int iter, int factor,
                        ts_rv *out, int cap, int *n) {
  tval *i = vals(1), *a = vals(2);
  if (!i || !a) {
    free(i);
    free(a);
    return no_memory(s);
  }
  i[0] = tv_rv(block);
  a[0] = tv_int(iter);
  a[1] = tv_int(factor);
  inst in = make_inst(TS_INSTR_PAD_EINSUM, i, 1, a, 2);
  ts_rv all[PAD_EINSUM_MAX_OUT];
  int got = 0;
  int rc = run_public(s, &in, all, PAD_EINSUM_MAX_OUT, &got);
  for (int k = 0; k < got && k < cap && out; k++) out[k] = all[k];
  if (n) *n = got;
  return rc;
}

int ts_sched_decompose_reduction(ts_sched *s, ts_rv block, ts_rv loop,
                                 ts_rv *out) {
  ts_rv rvs[2] = {block, loop};
  return run_rvs(s, TS_INSTR_DECOMPOSE_REDUCTION, rvs, 2, NULL, 0, out, 1);
}

int ts_sched_rfactor(ts_sched *s, ts_rv loop, int factor_axis, ts_rv *out) {
  tval *a = vals(1);
  if (!a) return no_memory(s);
  a[0] = tv_int(factor_axis);
  return run_rvs(s, TS_INSTR_RFACTOR, &loop, 1, a, 1, out, 1);
}

int ts_sched_blockize(ts_sched *s, ts_rv loop, ts_rv *out) {
  return run_rvs(s, TS_INSTR_BLOCKIZE, &loop, 1, NULL, 0, out, 1);
}

int ts_sched_tensorize(ts_sched *s, ts_rv target, const char *intrin) {
  return run_rvs(s, TS_INSTR_TENSORIZE, &target, 1, str_attrs(1, intrin), 1,
                 NULL, 0);
}

int ts_sched_sample_perfect_tile(ts_sched *s, ts_rv loop, int n,
                                 int max_innermost_factor, ts_rv *out) {
  tval *a = vals(2);
  if (!a) return no_memory(s);
  a[0] = tv_int(n);
  a[1] = tv_int(max_innermost_factor);
  return run_rvs(s, TS_INSTR_SAMPLE_PERFECT_TILE, &loop, 1, a, 2, out,
                 n > 0 ? n : 0);
}

int ts_sched_sample_tile(ts_sched *s, ts_rv loop, int n,
                         int max_innermost_factor, int innermost_step,
                         ts_rv *out) {
  tval *a = vals(3);
  if (!a) return no_memory(s);
  a[0] = tv_int(n);
  a[1] = tv_int(max_innermost_factor);
  a[2] = tv_int(innermost_step);
  return run_rvs(s, TS_INSTR_SAMPLE_TILE, &loop, 1, a, 3, out, n > 0 ? n : 0);
}

int ts_sched_sample_categorical(ts_sched *s, const int64_t *candidates,
                                const double *probs, int n, ts_rv *out) {
  if (n < 1 || !candidates || !probs)
    return FAIL(s, TS_EINVAL, "sample_categorical: no candidates");
  tval *c = vals(n), *p = vals(n), *a = vals(2);
  if (!c || !p || !a) {
    free(c);
    free(p);
    free(a);
    return no_memory(s);
  }
  for (int i = 0; i < n; i++) {
    c[i] = tv_int(candidates[i]);
    p[i] = tv_float(probs[i]);
  }
  a[0] = tv_list(c, n);
  a[1] = tv_list(p, n);
  inst in = make_inst(TS_INSTR_SAMPLE_CATEGORICAL, NULL, 0, a, 2);
  return run_public(s, &in, out, 1, NULL);
}

int ts_sched_sample_compute_location(ts_sched *s, ts_rv block, ts_rv *out) {
  return run_rvs(s, TS_INSTR_SAMPLE_COMPUTE_LOCATION, &block, 1, NULL, 0, out,
                 1);
}
