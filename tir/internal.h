/*
 * internal.h — node layouts and helpers shared by the files of tir/.
 *
 * Nothing outside tir/ includes this header: other modules go through the
 * constructors and accessors of tir.h, so these structs can change freely.
 */
#ifndef TESSERA_TIR_INTERNAL_H
#define TESSERA_TIR_INTERNAL_H

#include "alloc.h"
#include "strbuf.h"
#include "tir.h"

#include <stdio.h>

/* ---- expressions ---- */

struct ts_expr {
  uint8_t kind; /* ts_expr_kind */
  ts_dtype dtype;
  union {
    int64_t int_value;  /* TS_EXPR_INT (bool: 0/1) */
    double float_value; /* TS_EXPR_FLOAT, already rounded to dtype */
    struct {
      const char *name;
    } var;
    struct {
      ts_expr *a, *b, *c; /* binary: a,b; not/cast/broadcast: a; select: a?b:c;
                             ramp: base a, stride b */
    } op;
    struct {
      ts_buffer *buffer;
      ts_expr **indices;
      int n_indices;
    } load; /* TS_EXPR_LOAD and TS_EXPR_ADDRESS_OF */
    struct {
      const char *name;
      ts_expr **args;
      int n_args;
    } call;
    struct {
      ts_expr *var, *value, *body;
    } let;
  } u;
};

/* ---- buffers ---- */

struct ts_buffer {
  const char *name;
  ts_dtype dtype;
  int ndim;
  int64_t shape[TS_MAX_DIMS];
  int64_t strides[TS_MAX_DIMS]; /* valid when has_strides */
  bool has_strides;
  const char *scope; /* "global", "local", "shared", "amx.tile", ... */
  int align;         /* bytes */
};

/* ---- annotations (loops, blocks, functions) ---- */

typedef struct ann_list {
  ts_annotation *items;
  int n, cap;
} ann_list;

void ann_list_set(ts_arena *a, ann_list *l, ts_annotation ann);
bool ann_list_remove(ann_list *l, const char *key);
const ts_annotation *ann_list_find(const ann_list *l, const char *key);

/* ---- blocks ---- */

typedef struct iter_var {
  ts_expr *var;
  ts_range dom;
  uint8_t kind; /* ts_iter_kind */
} iter_var;

struct ts_block {
  const char *name;
  iter_var *iters;
  int n_iters, cap_iters;
  ts_region *reads;
  int n_reads;
  ts_region *writes;
  int n_writes;
  ts_buffer **allocs;
  int n_allocs, cap_allocs;
  ts_stmt *init; /* NULL when absent */
  ts_stmt *body;
  ann_list anns;
};

/* ---- statements ---- */

struct ts_stmt {
  uint8_t kind; /* ts_stmt_kind */
  union {
    struct {
      ts_expr *var, *min, *extent;
      uint8_t kind; /* ts_for_kind */
      const char *thread_tag;
      ann_list anns;
      ts_stmt *body;
    } loop;
    struct {
      ts_block *block;
      ts_expr **values;
      int n_values;
      ts_expr *predicate; /* NULL = true */
    } realize;
    struct {
      ts_buffer *buffer;
      ts_expr **indices;
      int n_indices;
      ts_expr *value;
    } store;
    struct {
      ts_stmt **items;
      int n;
    } seq;
    struct {
      ts_expr *cond;
      ts_stmt *then_s, *else_s;
    } cond;
    struct {
      ts_expr *value;
    } eval;
    struct {
      ts_expr *var, *value;
      ts_stmt *body;
    } let;
    struct {
      ts_buffer *buffer;
      ts_stmt *body;
    } alloc;
  } u;
};

/* ---- functions ---- */

struct ts_func {
  ts_arena *arena;
  const char *name;
  ts_buffer **params;
  int n_params, cap_params;
  ts_stmt *body;
  ann_list attrs;
};

/* Marks the arena failed (ts_arena_failed): what it holds is incomplete
 * because memory ran out while it was built. */
void arena_mark_failed(ts_arena *a);

/* Copies an array of n pointers into the arena (NULL when n == 0, and
 * when out of memory: the arena is then failed). */
void *arena_copy_ptrs(ts_arena *a, void *const *items, int n);

/* Writes the shortest decimal text of v that reads back to the same value of
 * dtype t (float16/bfloat16/float32/float64); "inf", "-inf", "nan". */
void format_float(char *buf, size_t cap, double v, ts_dtype t);
/* Rounds a double to the precision of float dtype t. */
double round_to_dtype(double v, ts_dtype t);
/* Wraps an integer to the width and signedness of t (bool: 0/1). */
int64_t wrap_int(int64_t v, ts_dtype t);

/* ---- the interpreter's GPU mode (tir/interp.c <-> tir/interp_gpu.c) ----
 * interp.c (with interp_compile.c and interp_exec.c) compiles and executes;
 * interp_gpu.c simulates the launch: it gives every thread its own run
 * state, switches between threads at barriers and warp shuffles, and keeps
 * the shadow of shared memory. */

typedef struct interp interp; /* a compiled function + run state */
typedef struct interp_thread interp_thread; /* one GPU thread's private state */
typedef struct gpu_sim gpu_sim;             /* one simulated launch */

/* A shared-memory buffer definition: one storage per thread block. */
typedef struct interp_shared {
  const char *name;
  int64_t bytes; /* storage bytes (at least 1) */
  int esize;     /* bytes per element */
} interp_shared;

/* What a compiled function needs from a launch. */
typedef struct interp_launch {
  int64_t grid[3], block[3]; /* maxima of the extents bound to blockIdx.x/y/z
                                and threadIdx.x/y/z (1 when unbound) */
  interp_shared *shared;     /* n_shared entries, by shared index */
  int n_shared;
  bool yields;   /* has barriers or warp shuffles (threads must interleave) */
  int max_depth; /* deepest nesting of statements and expressions */
} interp_launch;

/* Compiles f against args (checks as ts_interp_run). With gpu non-NULL the
 * GPU mode is on: thread-bound loops take the running thread's indices,
 * "shared" buffers get a shared index, the tessera.cuda intrinsics call the
 * simulator. On success *out is the interpreter (free with interp_close);
 * on failure returns the code with err set and *out NULL. */
int interp_open(const ts_func *f, void *const *args, int n_args,
                const ts_interp_options *opts, gpu_sim *gpu, interp **out,
                ts_error *err);
/* Frees the interpreter; returns TS_OK or the code of its first fault. */
int interp_close(interp *in);
const interp_launch *interp_launch_of(const interp *in);
/* Whether a fault has been recorded (every thread then unwinds). */
bool interp_failed(const interp *in);
/* Records a fault (the first one wins), with the block being run. */
void interp_fail_at(interp *in, int code, const char *file, int line,
                    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* A thread's private state: values, buffer table (local buffers), vector
 * staging. NULL when memory runs out (fault recorded). */
interp_thread *interp_thread_new(interp *in);
void interp_thread_free(interp_thread *t);
/* Prepares t to run from the start as the thread with launch indices
 * index[0..5] (blockIdx.x/y/z, threadIdx.x/y/z), shared buffer i at
 * shared_data[i]. */
void interp_thread_reset(interp *in, interp_thread *t, const int64_t index[6],
                         char *const *shared_data);
/* Makes t the running thread (from: the one that ran before, or NULL). */
void interp_thread_switch(interp *in, interp_thread *from, interp_thread *to);
/* Runs the function body as the running thread. */
void interp_thread_run(interp *in);
/* Makes the interpreter's own run state current again (from: the thread
 * that ran last, or NULL); before interp_close and before freeing the
 * threads. */
void interp_thread_restore(interp *in, interp_thread *from);

/* interp_gpu.c: called by the running thread. A block-wide barrier at
 * `site` (returns when every thread of the block has arrived, or at once
 * after a fault); a warp shuffle down returning lane (lane + offset)'s
 * value; an access to element `off` of shared buffer `shared` (checked for
 * data races against the other threads since the last barrier; `same`: a
 * write of the value the element already holds). */
void gpu_barrier(gpu_sim *g, const void *site);
double gpu_shfl_down(gpu_sim *g, const void *site, double v, int64_t offset);
void gpu_shared_access(gpu_sim *g, int shared, int64_t off, bool write,
                       bool same);

#endif /* TESSERA_TIR_INTERNAL_H */
