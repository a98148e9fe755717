/*
 * interp_internal.h — the reference interpreter's private types and helpers,
 * shared by tir/interp.c (entry points, GPU threads), tir/interp_compile.c
 * (compiling a function into the interpreter's tree) and tir/interp_exec.c
 * (evaluating expressions and executing statements).
 *
 * Only those files include this header; interp_gpu.c sees the interpreter
 * through the interp_* interface of internal.h.
 */
#ifndef TESSERA_TIR_INTERP_INTERNAL_H
#define TESSERA_TIR_INTERP_INTERNAL_H

#include "internal.h"

/* The class of a scalar value: how it is held and how ops treat it. */
enum {
  VC_INT,  /* signed integer, sign-extended in .i */
  VC_UINT, /* unsigned integer, zero-extended in .i (uint64: the bits) */
  VC_BOOL, /* 0 or 1 in .i */
  VC_F16,  /* float16 value in .f */
  VC_BF16, /* bfloat16 value in .f */
  VC_F32,  /* float32 value in .f */
  VC_F64,  /* float64 value in .f */
};
static inline bool class_is_float(int c) { return c >= VC_F16; }

/* One lane of a value; the static dtype of the expression is the tag. */
typedef union value {
  int64_t i;
  double f;
} value;

/* How elements of a buffer are stored. */
enum {
  SK_I8,
  SK_I16,
  SK_I32,
  SK_I64,
  SK_U8,
  SK_U16,
  SK_U32,
  SK_U64,
  SK_BOOL,
  SK_F16,
  SK_BF16,
  SK_F32,
  SK_F64,
};

typedef struct cexpr cexpr;
typedef value (*call_fn)(interp *in, const cexpr *e, int lane);

/* An intrinsic implementation. Later modules add target intrinsics here. */
typedef struct intrinsic_impl {
  const char *name;
  int n_args;             /* -1: any number */
  double (*math)(double); /* unary math on doubles, or NULL */
  call_fn eval;           /* used when math is NULL */
} intrinsic_impl;

/* A compiled expression. */
struct cexpr {
  uint8_t kind;                 /* ts_expr_kind */
  uint8_t cls;                  /* value class of the result */
  uint8_t ocls;                 /* class of the operands (compare, cast, not) */
  uint8_t bits;                 /* result bits, for integer wrap-around */
  int lanes;                    /* result lanes */
  int slot;                     /* VAR, LET: value slot; LOAD: buffer slot */
  int aux;                      /* LET: lanes of the bound var */
  int n;                        /* number of operands */
  cexpr **ops;                  /* operands (LOAD: indices; LET: value, body) */
  value imm;                    /* INT, FLOAT */
  const intrinsic_impl *intrin; /* CALL */
};

/* A buffer definition: parameter, block alloc or allocate. */
typedef struct rbuf {
  const char *name;
  char *data; /* NULL while an allocated buffer is not live */
  uint8_t skind;
  int esize; /* bytes per element */
  int ndim;
  int64_t shape[TS_MAX_DIMS];
  int64_t strides[TS_MAX_DIMS];
  int64_t bytes; /* storage bytes (at least 1) */
  int shared;    /* GPU mode: index of the block's shared storage, else -1 */
} rbuf;

typedef struct cblock {
  const char *name;
  int n_iters;
  int *iter_slot;
  const char **iter_name;
  uint8_t *iter_reduce;
  cexpr **values, **dom_min, **dom_ext;
  cexpr *predicate; /* NULL = true */
  int n_allocs;
  int *alloc_slot;
  struct cstmt *init, *body; /* NULL = nothing */
} cblock;

/* A compiled statement. */
typedef struct cstmt {
  uint8_t kind;              /* ts_stmt_kind */
  uint8_t var_cls, var_bits; /* FOR: loop var class and bits */
  uint8_t launch_axis;       /* FOR in the GPU mode: 1 + the launch axis it
                                is bound to (blockIdx.x .. threadIdx.z), 0
                                for a loop that iterates */
  int lanes;                 /* STORE, EVALUATE: lanes; LET: var lanes */
  int slot;     /* FOR, LET: var slot; STORE, ALLOCATE: buffer slot */
  cexpr *a, *b; /* FOR: min, extent; IF: cond; LET, STORE, EVALUATE: value */
  cexpr **idx;  /* STORE indices */
  int n_idx;
  struct cstmt *body, *else_s; /* FOR/LET/ALLOCATE body, IF then/else */
  struct cstmt **items;        /* SEQ */
  int n_items;
  cblock *blk; /* BLOCK_REALIZE */
} cstmt;

struct interp {
  const ts_func *func;
  ts_error *err;
  bool failed;
  int code;          /* the TS_E* code of the first fault */
  const char *block; /* block being compiled or run, for messages */
  ts_arena *arena;   /* the compiled tree */
  /* compile state */
  ts_node_map *var_slot; /* var -> slot + 1 while in scope */
  ts_node_map *buf_slot; /* buffer -> slot + 1 while in scope */
  int n_vals;
  int n_nodes;
  int max_lanes;
  cstmt *body; /* the compiled function body */
  /* run state (in the GPU mode: the running thread's, see interp_thread) */
  value *vals;
  rbuf *bufs;
  int n_bufs, cap_bufs;
  value *scratch_vals; /* vector store staging, max_lanes entries */
  int64_t *scratch_off;
  uint64_t steps, max_steps;
  struct interp_thread *own; /* the run state above as allocated (the
                                GPU mode switches it away) */
  /* GPU mode */
  gpu_sim *gpu;                /* NULL: the serial interpreter */
  rbuf *proto_bufs;            /* the compiled buffer table threads copy */
  const int64_t *launch_index; /* the running thread's blockIdx/threadIdx */
  interp_launch launch;
  int cap_shared;
};

/* One GPU thread's private run state; interp_thread_switch points the
 * interpreter's run state at it. */
struct interp_thread {
  value *vals;
  rbuf *bufs;
  value *scratch_vals;
  int64_t *scratch_off;
  const char *block; /* block being run, for messages */
  int64_t index[6];  /* blockIdx.x/y/z, threadIdx.x/y/z */
};

/* Records a fault (interp_fail_at) at the caller's file and line. */
#define FAIL(in, code, ...)                                                    \
  interp_fail_at((in), (code), __FILE__, __LINE__, __VA_ARGS__)

/* ---- value helpers ---- */

/* Wraps v to `bits` bits of class cls (int, uint or bool). */
static inline int64_t wrap(int64_t v, int cls, int bits) {
  if (cls == VC_BOOL) return v != 0;
  if (bits >= 64) return v;
  uint64_t mask = (1ull << bits) - 1, u = (uint64_t)v & mask;
  if (cls == VC_INT && ((u >> (bits - 1)) & 1)) u |= ~mask;
  return (int64_t)u;
}

static inline double round_cls(double v, int cls) {
  switch (cls) {
  case VC_F32: return (double)(float)v;
  case VC_F16: return ts_f16_to_f32(ts_f32_to_f16((float)v));
  case VC_BF16: return ts_bf16_to_f32(ts_f32_to_bf16((float)v));
  default: return v;
  }
}

/* ---- interp_exec.c ---- */

/* Converts v of class `from` to class `to` (bits: of the target). */
value interp_convert(value v, int from, int to, int bits);
const intrinsic_impl *interp_find_intrinsic(const char *name);
/* The intrinsics meaningful only in the GPU mode. */
bool interp_is_gpu_intrinsic(const intrinsic_impl *im);
/* GPU mode: __shfl_down_sync (full warp, width 32). */
value interp_call_shfl_down(interp *in, const cexpr *e, int lane);
/* Executes s on the current run state (nothing after a fault). */
void interp_exec(interp *in, const cstmt *s);

/* ---- interp_compile.c ---- */

/* Defines buffer b in a new slot (data NULL until allocated); `limit`
 * bounds its storage bytes (0: no limit, for parameters). Returns the slot,
 * or -1 with the fault recorded; *old is b's previous binding. */
int interp_define_buffer(interp *in, const ts_buffer *b, int64_t limit,
                         void **old);
/* Compiles s; NULL statements compile to NULL (nothing to run), so callers
 * check in->failed rather than the result. */
cstmt *interp_compile_stmt(interp *in, const ts_stmt *s, int depth);

#endif /* TESSERA_TIR_INTERP_INTERNAL_H */
