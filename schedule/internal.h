/*
 * internal.h — structures and helpers shared by the files of schedule/: the
 * trace's instruction records and literal values, the schedule state and its
 * handle table, the replay entry points of every instruction kind (one
 * apply_<name> per line of instructions.def), tree navigation and in-place
 * rewriting, and the interval/numeric analyses the primitives use.
 */
#ifndef TESSERA_SCHEDULE_INTERNAL_H
#define TESSERA_SCHEDULE_INTERNAL_H

#include "schedule/schedule.h"
#include "tir/alloc.h"

#include <stdio.h>

/* A growable list of statements (malloc'd; tree.c). */
typedef struct stmt_vec {
  ts_stmt **v;
  int n, cap;
} stmt_vec;

/* ========================================================================
 * Trace values and instructions (trace.c)
 * ======================================================================== */

typedef enum tval_kind {
  TV_NULL,
  TV_INT,
  TV_FLOAT,
  TV_STR,
  TV_RV,
  TV_LIST,
} tval_kind;

/* An input, attribute or decision: a literal, an RV reference or a list. */
typedef struct tval {
  uint8_t kind;       /* tval_kind */
  int64_t i;          /* TV_INT value; TV_RV id */
  double f;           /* TV_FLOAT */
  char *s;            /* TV_STR (malloc'd) */
  struct tval *items; /* TV_LIST (malloc'd) */
  int n;              /* TV_LIST length */
} tval;

tval tv_null(void);
tval tv_int(int64_t v);
tval tv_float(double v);
tval tv_rv(ts_rv rv);
tval tv_str(const char *s);             /* copies s */
tval tv_list(const tval *items, int n); /* takes the items (shallow) */
tval tv_copy(const tval *v);
void tv_free(tval *v);

/* One recorded primitive call. Owns every array and value. */
typedef struct inst {
  ts_instr_kind kind;
  tval *inputs;
  int n_inputs;
  tval *attrs;
  int n_attrs;
  ts_rv *outputs;
  int n_outputs;
  tval decision; /* TV_NULL when none (or not sampled yet) */
} inst;

void inst_free(inst *in);
inst inst_copy(const inst *in);

struct ts_trace {
  inst *insts;
  int n, cap;
};

/* Appends a copy of in. */
void trace_append(ts_trace *t, const inst *in);

/* ========================================================================
 * Schedule state (state.c)
 * ======================================================================== */

enum { MARK_NONE = 0, MARK_ROOT = 1, MARK_INLINE = 2 };

typedef struct rv_entry {
  uint8_t kind;     /* ts_rv_kind */
  uint8_t mark;     /* loops of sample_compute_location: MARK_* */
  char *block;      /* TS_RV_BLOCK: the block's name (malloc'd) */
  ts_stmt *loop;    /* TS_RV_LOOP */
  int64_t value;    /* TS_RV_INT */
  const char *dead; /* loops: the primitive that removed it, or NULL */
} rv_entry;

/* A growable list of RV ids (instruction outputs). */
typedef struct rv_list {
  ts_rv *v;
  int n, cap;
} rv_list;
void rv_push(rv_list *l, ts_rv rv);

struct ts_sched {
  ts_func *func; /* the scheduled function (owned) */
  ts_func *orig; /* the unscheduled function (owned) */
  ts_trace *trace;
  rv_entry *rvs;
  int n_rvs, cap_rvs;
  ts_rng rng;
  ts_error err;
  bool oom; /* an instruction ran out of memory: every later one fails */
  /* ts_alloc_failures() after the last instruction: a failure on this
   * thread since then (building the next instruction, say) is the next
   * instruction's */
  unsigned long oom_mark;
};

/* A block `name` copying src[v...] into dst[v...] over dst's whole shape,
 * under loops of its own (cache.c); with pad_dim >= 0, the positions whose
 * index on that dimension is ext or more get zero instead (pad_einsum's
 * padded inputs). Its top loop, NULL when out of memory. */
ts_stmt *copy_nest_padded(ts_arena *a, const char *name, ts_buffer *dst,
                          ts_buffer *src, int pad_dim, int64_t ext);

/* Buffer `from` replaced by `to` in the loads (and, with stores, the
 * stores) of the block of realize r (cache.c). */
void swap_in_block(ts_sched *s, ts_stmt *r, const ts_buffer *from,
                   ts_buffer *to, bool stores);

/* the most buffers pad_einsum pads in one block (pad.c) */
#define PAD_EINSUM_MAX_OUT 16

#define FAIL(s, code, ...)                                                     \
  ts_error_set(&(s)->err, (code), __FILE__, __LINE__, __VA_ARGS__)

/* Prefixes the current message with "prim: " and returns rc. */
int fail_prefix(ts_sched *s, int rc, const char *prim);
/* TS_ENOMEM with "prim: out of memory": a primitive that found a NULL
 * (an arena with no memory left) before it changed the function. */
int fail_oom(ts_sched *s, const char *prim);

/* New RVs (appended to out when out is non-NULL). */
ts_rv rv_new_block(ts_sched *s, const char *name, rv_list *out);
ts_rv rv_new_loop(ts_sched *s, ts_stmt *loop, uint8_t mark, rv_list *out);
ts_rv rv_new_int(ts_sched *s, int64_t value, rv_list *out);
/* Marks every loop RV whose loop is one of `loops` as removed by `why`. */
void rv_kill_loops(ts_sched *s, ts_stmt *const *loops, int n, const char *why);
/* Renames block RVs (a primitive that renames a block). */
void rv_rename_blocks(ts_sched *s, const char *from, const char *to);

/* Runs one instruction on s (inputs name s's RVs): dispatches to its
 * apply_<name>, and on success records it in the trace (with its decision
 * and outputs) and appends the outputs to out. On failure nothing changes
 * and the message is on s. */
int sched_run(ts_sched *s, inst *in, rv_list *out);

/* --- decoding instruction inputs (messages start with the primitive) --- */
const char *prim_name(const inst *in);
/* The block realize named by input i (a live block RV). */
int in_block(ts_sched *s, const inst *in, int i, ts_stmt **realize);
/* The loop named by input i (a live loop RV, not a mark). */
int in_loop(ts_sched *s, const inst *in, int i, ts_stmt **loop);
/* Either; exactly one of *realize / *loop is set. */
int in_block_or_loop(ts_sched *s, const inst *in, int i, ts_stmt **realize,
                     ts_stmt **loop);
/* An integer literal or integer RV; null gives *is_null (when allowed). */
int in_int(ts_sched *s, const inst *in, int i, bool allow_null, int64_t *v,
           bool *is_null);
int attr_str(ts_sched *s, const inst *in, int i, const char **v);
int attr_int(ts_sched *s, const inst *in, int i, int64_t *v);
/* Checks the input/attr counts (min..max, max < 0 = unbounded). */
int check_arity(ts_sched *s, const inst *in, int min_in, int max_in,
                int n_attrs);

/* The loops where compute_at(block, loop) is legal, outermost first, and
 * whether the block can be inlined (compute_at.c). */
void compute_location_candidates(ts_sched *s, ts_stmt *realize, stmt_vec *loops,
                                 bool *can_inline);

/* blockize in two steps (blockize.c), shared with tensorize. */
typedef struct bz_plan {
  stmt_vec chain;       /* the perfect nest, outermost first */
  ts_stmt *inner;       /* the block under it */
  int n;                /* its iter count */
  ts_expr **inner_vals; /* new bindings of the inner block */
  ts_expr **outer_vals; /* outer block bindings (NULL: no outer iter) */
  ts_expr **outer_vars; /* outer block iter vars (NULL: none) */
  ts_range *outer_doms;
} bz_plan;
/* The perfect nest from loop down to one realize (or an error). */
int blockize_chain(ts_sched *s, const char *prim, ts_stmt *loop,
                   stmt_vec *chain, ts_stmt **realize);
int blockize_plan(ts_sched *s, const char *prim, ts_stmt *loop, bz_plan *p);
void blockize_plan_free(bz_plan *p);
/* Links the outer block in; *name_out (in the function's arena) is its
 * name. NULL when out of memory (the function is then as it was). */
ts_stmt *blockize_commit(ts_sched *s, ts_stmt *loop, bz_plan *p,
                         char **name_out);

/* Re-infers the regions of every block after a structural change. */
void sched_refresh(ts_sched *s);

/* The replay entry point of each instruction kind. */
#define TS_INSTR(id, name, inputs, attrs, decision, outputs, pure)             \
  int apply_##name(ts_sched *s, inst *in, rv_list *out);
#include "schedule/instructions.def"
#undef TS_INSTR

/* ========================================================================
 * Tree navigation and rewriting (tree.c)
 * ======================================================================== */

/* False when out of memory (counted; the item is dropped and sched_run
 * reports the failure). */
bool sv_push(stmt_vec *l, ts_stmt *s);
void sv_free(stmt_vec *l);
bool sv_has(const stmt_vec *l, const ts_stmt *s);

/* The path from the function body down to target: every statement that
 * contains it, outermost first, target excluded. False when absent. */
bool tree_path(const ts_func *f, const ts_stmt *target, stmt_vec *path);
bool tree_contains(const ts_stmt *root, const ts_stmt *target);
/* The nearest enclosing block-realize of stmt (its scope), or NULL. */
ts_stmt *tree_scope(const ts_func *f, const ts_stmt *stmt);
/* The loops between stmt's scope and stmt, outermost first. */
void tree_loops_above(const ts_func *f, const ts_stmt *stmt, stmt_vec *out);
/* Replaces child `old` of `parent` (NULL = the function body) by `repl`. */
void tree_replace(ts_func *f, ts_stmt *parent, ts_stmt *old, ts_stmt *repl);
/* The statement directly in `scope`'s block body (a top-level statement
 * of the scope) that contains stmt, or NULL. */
ts_stmt *tree_top_in_scope(const ts_func *f, const ts_stmt *scope,
                           const ts_stmt *stmt);
/* Block-realizes under s in program order; with cross_blocks false the
 * walk does not enter a realize's block (s itself counts when it is one). */
void tree_realizes(ts_stmt *s, bool cross_blocks, stmt_vec *out);
/* Every for loop under s (not entering blocks when cross_blocks is false). */
void tree_loops(ts_stmt *s, bool cross_blocks, stmt_vec *out);
/* The statements of a body as a list (a seq's items, else the one). */
int body_items(ts_stmt *body, ts_stmt ***items, ts_stmt **one);
/* A seq of the items without nesting (n == 1 gives the item); NULL when
 * out of memory or an item is NULL (a constructor that ran out). */
ts_stmt *make_seq(ts_arena *a, ts_stmt *const *items, int n);
/* Removes stmt from the tree, together with the loops (and seq slots) that
 * become empty, up to its scope. The removed loops are appended to
 * removed_loops when non-NULL. False when out of memory (the tree is then
 * as it was). */
bool tree_remove(ts_func *f, ts_stmt *stmt, stmt_vec *removed_loops);
/* Inserts item into the body of `loop` (or of a block's body when loop is a
 * realize) at position pos of its statement list. False when out of memory
 * or item is NULL (the tree is then as it was). */
bool tree_insert(ts_func *f, ts_stmt *container, int pos, ts_stmt *item);
/* Position in the statement list of `container`'s body of the item that
 * contains stmt (-1 when none). */
int tree_index_in(ts_stmt *container, const ts_stmt *stmt);
/* The body of a loop or of a realize's block. */
ts_stmt *container_body(ts_stmt *container);

/* In-place rewriting that keeps every for and block-realize node (handles
 * stay valid): expressions go through `expr`, rebuilt stores through
 * `store`; blocks' inits and bodies are entered when into_blocks. */
typedef struct rewriter {
  ts_expr *(*expr)(void *ctx, ts_arena *a, ts_expr *e);
  ts_stmt *(*store)(void *ctx, ts_arena *a, ts_stmt *s);
  bool into_blocks;
  void *ctx;
} rewriter;
ts_stmt *rewrite_stmt(ts_arena *a, ts_stmt *s, const rewriter *r);

/* Names: a block / buffer name not used in f, from base (in f's arena);
 * NULL when out of memory. */
char *unique_block_name(const ts_func *f, const char *base);
char *unique_buffer_name(const ts_func *f, const char *base);
/* The buffer named `name` among the buffers the block reads (want_read) or
 * writes (want_write); TS_ENOTFOUND / ambiguous errors on s. */
int block_buffer(ts_sched *s, const ts_block *b, const char *name,
                 bool want_read, bool want_write, ts_buffer **out);
bool block_reads(const ts_block *b, const ts_buffer *buf);
bool block_writes(const ts_block *b, const ts_buffer *buf);
/* Whether buf is a parameter of f. */
bool is_param(const ts_func *f, const ts_buffer *buf);
/* The block that allocates buf (its realize), or NULL. */
ts_stmt *alloc_site(const ts_func *f, const ts_buffer *buf);
/* A loop's name for messages (its var's name). */
const char *loop_name(const ts_stmt *loop);
/* Whether e mentions var v / any var of the set (a node map used as set). */
bool uses_var(const ts_expr *e, const ts_expr *v);
bool uses_any_var(const ts_expr *e, const ts_node_map *set);
/* Whether every var of e is the var of one of the loops. */
bool vars_among_loops(const ts_expr *e, ts_stmt *const *loops, int n);
/* Whether the loop's min is 0 and extent a constant (> 0): *extent. */
bool loop_const(const ts_stmt *loop, int64_t *extent);
/* Iter domain as constants (min, extent). */
bool iter_const(const ts_block *b, int i, int64_t *min, int64_t *extent);
/* Loop var ranges of every loop in `loops` into r. */
void ranges_of_loops(ts_var_ranges *r, ts_stmt *const *loops, int n);

/* ========================================================================
 * Analyses (bound.c)
 * ======================================================================== */

/* var -> inclusive interval [lo, hi] (exprs) to relax over. */
typedef struct relax_map relax_map;
relax_map *relax_create(void);
void relax_destroy(relax_map *m);
void relax_set(relax_map *m, const ts_expr *var, ts_expr *lo, ts_expr *hi);
/* Relaxes a loop: [min, min + extent - 1]. */
void relax_loop(ts_arena *a, relax_map *m, const ts_stmt *loop);
/* Symbolic bounds of an integer expression with relaxed vars replaced by
 * their intervals (other vars stay symbolic). False when unbounded. */
bool bound_expr(ts_arena *a, ts_expr *e, const relax_map *m,
                const ts_var_ranges *ranges, ts_expr **lo, ts_expr **hi);

/* Numeric evaluation of integer index expressions. */
typedef struct env {
  const ts_expr *vars[64];
  int64_t vals[64];
  int n;
} env;
void env_set(env *e, const ts_expr *var, int64_t v);
/* False when e has an unbound var or an unsupported node. */
bool eval_int(const ts_expr *e, const env *en, int64_t *out);

/* A linear form sum(coef_i * var_i) + constant. */
typedef struct linear {
  const ts_expr *vars[32];
  int64_t coefs[32];
  int n;
  int64_t constant;
} linear;
/* False when e is not linear in its vars with constant coefficients. */
bool linear_of(const ts_expr *e, linear *out);

/* Whether, for a realize under loop `loop` of a parallel-like kind, the
 * block is safe: iters bound to the loop var are spatial, and a block with
 * reduce iters that is not bound to the loop (recomputed per iteration)
 * or whose writes collide between iterations is refused. On refusal
 * writes the reason (naming the block) into why. */
bool parallel_safe(ts_sched *s, const ts_stmt *loop, const ts_stmt *realize,
                   char *why, size_t why_cap);

#endif /* TESSERA_SCHEDULE_INTERNAL_H */
