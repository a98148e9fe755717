/*
 * tir.h — the public interface of tessera's tensor IR.
 *
 * A TensorIR-like, block-based loop-nest IR: data types, expressions,
 * statements, buffers, blocks and PrimFuncs; the arena that owns every node
 * of a function; the text form (printer and parser); structural equality and
 * the 128-bit structural hash that identifies a workload; the verifier;
 * analyses (FLOP count, read/write regions, loop nests); the tensor-expression
 * builder and operator library; and the reference interpreter that is the
 * ground truth of every correctness test in the project.
 *
 * Node structs are private (tir/internal.h); other modules use the
 * constructors and accessors declared here. Ownership: every node is
 * allocated in an arena; a ts_func owns its arena, so ts_func_free frees every
 * node of the function in one call. Expressions are immutable once built.
 */
#ifndef TESSERA_TIR_H
#define TESSERA_TIR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TS_VERSION "0.1.0"

/* ========================================================================
 * Status codes and errors
 * ======================================================================== */

enum {
  TS_OK = 0,
  TS_EINVAL = -1,    /* bad argument or malformed outside input */
  TS_ENOMEM = -2,    /* allocation failed or a size limit was exceeded */
  TS_EPARSE = -3,    /* text could not be parsed (line:column in the error) */
  TS_EIO = -4,       /* a file could not be read or written */
  TS_ENOTFOUND = -5, /* a named thing does not exist */
  TS_EUNSUPPORTED = -6, /* valid request this build or machine cannot serve */
  TS_ERANGE = -7,     /* out-of-bounds access or arithmetic fault at run time */
  TS_EVERIFY = -8,    /* the IR is ill-formed */
  TS_ESCHEDULE = -9,  /* a schedule primitive refused an illegal request */
  TS_EINTERNAL = -10, /* a broken internal invariant (a bug in tessera) */
};

/* An error report. Functions that can fail take a `ts_error *err` (may be
 * NULL) and fill it when they return a negative code. `line`/`column` are
 * 1-based positions in text input, 0 when not applicable. */
typedef struct ts_error {
  int code;             /* the TS_E* code */
  int line, column;     /* position in the input text, 0 if none */
  const char *src_file; /* where in tessera the error was raised */
  int src_line;
  char msg[1024]; /* human-readable, names what and where */
} ts_error;

/* Records an error (if err is non-NULL) and returns `code`, so that
 * `return TS_ERR(err, TS_EINVAL, "...")` reads naturally. */
int ts_error_set(ts_error *err, int code, const char *src_file, int src_line,
                 const char *fmt, ...) __attribute__((format(printf, 5, 6)));
int ts_error_setv(ts_error *err, int code, const char *src_file, int src_line,
                  const char *fmt, va_list ap);
#define TS_ERR(err, code, ...)                                                 \
  ts_error_set((err), (code), __FILE__, __LINE__, __VA_ARGS__)
/* Same, with a text position. */
int ts_error_at(ts_error *err, int code, int line, int column,
                const char *src_file, int src_line, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
#define TS_ERR_AT(err, code, line, col, ...)                                   \
  ts_error_at((err), (code), (line), (col), __FILE__, __LINE__, __VA_ARGS__)
/* Resets err to "no error". */
void ts_error_clear(ts_error *err);
/* A short constant name for a code ("invalid input", "parse error", ...). */
const char *ts_strerror(int code);

/* ========================================================================
 * Arena
 * ======================================================================== */

typedef struct ts_arena ts_arena;

/* Creates an empty arena; caller destroys with ts_arena_destroy.
 * When malloc fails the arena takes its memory from a small static reserve
 * and is marked failed (the nodes stay valid; the failure is counted by
 * ts_alloc_failures in tir/alloc.h), so that the operation building the
 * nodes can finish and report TS_ENOMEM; a function whose arena failed is
 * refused with TS_ENOMEM by the verifier, scheduling, lowering and
 * building. When the reserve is used up too (or a single request is
 * larger than 64 KiB), the arena functions return NULL: ts_arena_create
 * NULL, and the allocations below NULL with the arena marked failed; the
 * caller reports TS_ENOMEM. */
ts_arena *ts_arena_create(void);
void ts_arena_destroy(ts_arena *a);
/* Whether an allocation of the arena failed (see above). */
bool ts_arena_failed(const ts_arena *a);
/* Returns zeroed memory aligned to 16 bytes, owned by the arena; NULL when
 * out of memory (see above) or when a is NULL. */
void *ts_arena_alloc(ts_arena *a, size_t size);
/* Copies a string (or the first n bytes) into the arena. NULL stays NULL,
 * and out of memory gives NULL. */
char *ts_arena_strdup(ts_arena *a, const char *s);
char *ts_arena_strndup(ts_arena *a, const char *s, size_t n);
/* printf into arena memory (NULL when out of memory). */
char *ts_arena_printf(ts_arena *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Bytes handed out so far (for tests and memory accounting). */
size_t ts_arena_bytes(const ts_arena *a);

/* ========================================================================
 * Data types
 * ======================================================================== */

typedef enum ts_dtype_code {
  TS_DT_INT = 0,
  TS_DT_UINT = 1,
  TS_DT_FLOAT = 2,  /* IEEE float16/32/64 */
  TS_DT_BFLOAT = 3, /* bfloat16 */
  TS_DT_BOOL = 4,
  TS_DT_HANDLE = 5, /* an opaque pointer */
} ts_dtype_code;

/* A scalar or vector type: code, bits per lane, lanes. A plain value. */
typedef struct ts_dtype {
  uint8_t code;   /* ts_dtype_code */
  uint8_t bits;   /* 1 for bool, 8..64 otherwise */
  uint16_t lanes; /* 1 for scalars */
} ts_dtype;

#define TS_DTYPE(c, b, l)                                                      \
  ((ts_dtype){(uint8_t)(c), (uint8_t)(b), (uint16_t)(l)})
#define TS_BOOL TS_DTYPE(TS_DT_BOOL, 1, 1)
#define TS_INT8 TS_DTYPE(TS_DT_INT, 8, 1)
#define TS_INT16 TS_DTYPE(TS_DT_INT, 16, 1)
#define TS_INT32 TS_DTYPE(TS_DT_INT, 32, 1)
#define TS_INT64 TS_DTYPE(TS_DT_INT, 64, 1)
#define TS_UINT8 TS_DTYPE(TS_DT_UINT, 8, 1)
#define TS_UINT16 TS_DTYPE(TS_DT_UINT, 16, 1)
#define TS_UINT32 TS_DTYPE(TS_DT_UINT, 32, 1)
#define TS_UINT64 TS_DTYPE(TS_DT_UINT, 64, 1)
#define TS_FLOAT16 TS_DTYPE(TS_DT_FLOAT, 16, 1)
#define TS_BFLOAT16 TS_DTYPE(TS_DT_BFLOAT, 16, 1)
#define TS_FLOAT32 TS_DTYPE(TS_DT_FLOAT, 32, 1)
#define TS_FLOAT64 TS_DTYPE(TS_DT_FLOAT, 64, 1)
#define TS_HANDLE TS_DTYPE(TS_DT_HANDLE, 64, 1)
/* The type of loop variables, iter vars and indices. */
#define TS_INDEX TS_INT64

bool ts_dtype_eq(ts_dtype a, ts_dtype b);
/* int/uint */
bool ts_dtype_is_int(ts_dtype t);
bool ts_dtype_is_signed(ts_dtype t);
/* float16/32/64 and bfloat16 */
bool ts_dtype_is_float(ts_dtype t);
bool ts_dtype_is_bool(ts_dtype t);
bool ts_dtype_is_handle(ts_dtype t);
ts_dtype ts_dtype_with_lanes(ts_dtype t, int lanes);
ts_dtype ts_dtype_scalar(ts_dtype t);
/* Storage bytes of one element of one lane (bool: 1). */
size_t ts_dtype_elem_bytes(ts_dtype t);
/* Parses "float32", "int8", "bfloat16", "bool", "handle", and vector forms
 * "float32x16". Returns TS_OK or TS_EINVAL (no error text; callers add
 * their own context). */
int ts_dtype_parse(const char *s, size_t n, ts_dtype *out);
/* Writes the canonical name into buf (at least 32 bytes) and returns buf. */
const char *ts_dtype_str(ts_dtype t, char buf[32]);
/* Whether the scalar type is one the library can store in buffers. */
bool ts_dtype_is_valid(ts_dtype t);

/* Conversions between float32 and the 16-bit float formats
 * (round to nearest even; NaN stays NaN). */
uint16_t ts_f32_to_bf16(float f);
float ts_bf16_to_f32(uint16_t h);
uint16_t ts_f32_to_f16(float f);
float ts_f16_to_f32(uint16_t h);

/* ========================================================================
 * IR node handles
 * ======================================================================== */

typedef struct ts_expr ts_expr;     /* an immutable expression (vars too) */
typedef struct ts_stmt ts_stmt;     /* a statement */
typedef struct ts_buffer ts_buffer; /* a multi-dimensional buffer */
typedef struct ts_block ts_block;   /* a block (under a block-realize stmt) */
typedef struct ts_func ts_func;     /* a PrimFunc: owns its arena */

/* A half-open integer range [min, min + extent). A plain value. */
typedef struct ts_range {
  ts_expr *min;
  ts_expr *extent;
} ts_range;

/* A region of a buffer: one range per dimension. */
typedef struct ts_region {
  ts_buffer *buffer;
  int ndim;
  ts_range *ranges; /* ndim entries, in the arena of the owner */
} ts_region;

/* An annotation value on a loop, block or function. */
typedef enum ts_ann_kind {
  TS_ANN_INT,
  TS_ANN_FLOAT,
  TS_ANN_STRING
} ts_ann_kind;
typedef struct ts_annotation {
  const char *key;
  ts_ann_kind kind;
  int64_t i;     /* TS_ANN_INT */
  double f;      /* TS_ANN_FLOAT */
  const char *s; /* TS_ANN_STRING */
} ts_annotation;
ts_annotation ts_ann_int(const char *key, int64_t v);
ts_annotation ts_ann_float(const char *key, double v);
ts_annotation ts_ann_string(const char *key, const char *s);

/* ========================================================================
 * Expressions
 * ======================================================================== */

typedef enum ts_expr_kind {
  TS_EXPR_INT,   /* integer (or bool) immediate */
  TS_EXPR_FLOAT, /* floating immediate */
  TS_EXPR_VAR,   /* a variable; identity is the node */
  /* binary arithmetic: operands a, b of the same dtype */
  TS_EXPR_ADD,
  TS_EXPR_SUB,
  TS_EXPR_MUL,
  TS_EXPR_DIV, /* float division, or C truncating integer division */
  TS_EXPR_MOD, /* C truncating remainder (integers) */
  TS_EXPR_FLOORDIV,
  TS_EXPR_FLOORMOD,
  TS_EXPR_MIN,
  TS_EXPR_MAX,
  /* comparisons: bool result (with the operands' lanes) */
  TS_EXPR_EQ,
  TS_EXPR_NE,
  TS_EXPR_LT,
  TS_EXPR_LE,
  TS_EXPR_GT,
  TS_EXPR_GE,
  /* logical, on bool */
  TS_EXPR_AND,
  TS_EXPR_OR,
  TS_EXPR_NOT,
  TS_EXPR_SELECT,     /* operands cond, true value, false value */
  TS_EXPR_CAST,       /* operand value; dtype is the target type */
  TS_EXPR_LOAD,       /* buffer, operands = indices */
  TS_EXPR_RAMP,       /* operands base, stride (scalars); dtype has lanes */
  TS_EXPR_BROADCAST,  /* operand value (scalar); dtype has lanes */
  TS_EXPR_CALL,       /* named intrinsic, operands = arguments */
  TS_EXPR_LET,        /* let var = operand 0 in operand 1 */
  TS_EXPR_ADDRESS_OF, /* &buffer[indices] (handle), for intrinsic calls */
  TS_EXPR_KIND_COUNT
} ts_expr_kind;

/* --- construction (all nodes go in `a`) ---
 * The folding constructors apply constant folding and simple identities
 * (x+0, x*1, x*0 for integers, floordiv/floormod by 1, constant operands).
 * The *_raw forms build exactly the node asked for (the parser uses them so
 * text round-trips exactly). Operand dtypes are not checked here; the
 * verifier reports mismatches. */
ts_expr *ts_int(ts_arena *a, ts_dtype t, int64_t v); /* t int/uint/bool */
ts_expr *ts_index(ts_arena *a, int64_t v);           /* TS_INDEX immediate */
ts_expr *ts_bool(ts_arena *a, bool v);
ts_expr *ts_float(ts_arena *a, ts_dtype t, double v); /* rounded to t */
/* A fresh variable (distinct from every other node even if names match). */
ts_expr *ts_var(ts_arena *a, const char *name, ts_dtype t);

ts_expr *ts_binary(ts_arena *a, ts_expr_kind k, ts_expr *x, ts_expr *y);
ts_expr *ts_binary_raw(ts_arena *a, ts_expr_kind k, ts_expr *x, ts_expr *y);
ts_expr *ts_add(ts_arena *a, ts_expr *x, ts_expr *y);
ts_expr *ts_sub(ts_arena *a, ts_expr *x, ts_expr *y);
ts_expr *ts_mul(ts_arena *a, ts_expr *x, ts_expr *y);
ts_expr *ts_div(ts_arena *a, ts_expr *x, ts_expr *y);
ts_expr *ts_mod(ts_arena *a, ts_expr *x, ts_expr *y);
ts_expr *ts_floordiv(ts_arena *a, ts_expr *x, ts_expr *y);
ts_expr *ts_floormod(ts_arena *a, ts_expr *x, ts_expr *y);
/* The greatest common divisor of |a| and |b| (0 when both are 0). */
int64_t ts_gcd64(int64_t a, int64_t b);
ts_expr *ts_min(ts_arena *a, ts_expr *x, ts_expr *y);
ts_expr *ts_max(ts_arena *a, ts_expr *x, ts_expr *y);
ts_expr *ts_eq(ts_arena *a, ts_expr *x, ts_expr *y);
ts_expr *ts_ne(ts_arena *a, ts_expr *x, ts_expr *y);
ts_expr *ts_lt(ts_arena *a, ts_expr *x, ts_expr *y);
ts_expr *ts_le(ts_arena *a, ts_expr *x, ts_expr *y);
ts_expr *ts_gt(ts_arena *a, ts_expr *x, ts_expr *y);
ts_expr *ts_ge(ts_arena *a, ts_expr *x, ts_expr *y);
ts_expr *ts_and(ts_arena *a, ts_expr *x, ts_expr *y);
ts_expr *ts_or(ts_arena *a, ts_expr *x, ts_expr *y);
ts_expr *ts_not(ts_arena *a, ts_expr *x);
ts_expr *ts_not_raw(ts_arena *a, ts_expr *x);
ts_expr *ts_select(ts_arena *a, ts_expr *c, ts_expr *t, ts_expr *f);
ts_expr *ts_select_raw(ts_arena *a, ts_expr *c, ts_expr *t, ts_expr *f);
/* Cast to t (no node when x already has type t; constants fold). */
ts_expr *ts_cast(ts_arena *a, ts_dtype t, ts_expr *x);
ts_expr *ts_cast_raw(ts_arena *a, ts_dtype t, ts_expr *x);
/* Load buffer[indices]; the dtype is the buffer's, with the lanes of the
 * indices (a ramp index gives a vector load). */
ts_expr *ts_load(ts_arena *a, ts_buffer *b, ts_expr *const *indices, int n);
ts_expr *ts_ramp(ts_arena *a, ts_expr *base, ts_expr *stride, int lanes);
ts_expr *ts_broadcast(ts_arena *a, ts_expr *value, int lanes);
/* Call of a named intrinsic returning `t`. See ts_intrinsic_lookup. */
ts_expr *ts_call(ts_arena *a, ts_dtype t, const char *name,
                 ts_expr *const *args, int n);
ts_expr *ts_let(ts_arena *a, ts_expr *var, ts_expr *value, ts_expr *body);
ts_expr *ts_address_of(ts_arena *a, ts_buffer *b, ts_expr *const *indices,
                       int n);

/* --- inspection --- */
ts_expr_kind ts_expr_kind_of(const ts_expr *e);
ts_dtype ts_expr_dtype(const ts_expr *e);
/* Name of a kind, as the printer writes it ("add", "floordiv", "load"...). */
const char *ts_expr_kind_name(ts_expr_kind k);
/* Operands in a fixed order per kind (see ts_expr_kind); LET has
 * (value, body) with the var separate; LOAD/ADDRESS_OF have the indices;
 * CALL has the arguments. */
int ts_expr_n_operands(const ts_expr *e);
ts_expr *ts_expr_operand(const ts_expr *e, int i);
int64_t ts_expr_int_value(const ts_expr *e);  /* TS_EXPR_INT */
double ts_expr_float_value(const ts_expr *e); /* TS_EXPR_FLOAT */
const char *ts_var_name(const ts_expr *e);    /* TS_EXPR_VAR */
ts_buffer *ts_expr_buffer(const ts_expr *e);  /* LOAD, ADDRESS_OF */
const char *ts_expr_call_name(const ts_expr *e);
ts_expr *ts_expr_let_var(const ts_expr *e);
/* True (and *v set) when e is an integer immediate. */
bool ts_expr_is_const_int(const ts_expr *e, int64_t *v);
bool ts_expr_is_binary(ts_expr_kind k);
bool ts_expr_is_compare(ts_expr_kind k);
/* A node of the same kind and non-operand fields with new operands
 * (n must equal ts_expr_n_operands(e)). Returns e itself when every operand
 * is unchanged. Does not fold. */
ts_expr *ts_expr_rebuild(ts_arena *a, const ts_expr *e, ts_expr *const *ops);

/* Named intrinsics known to the IR: name, arity, and how the result type
 * follows from the arguments. Target intrinsics (later modules) are called
 * with an explicit result type and need not be listed. */
typedef enum ts_intrinsic_rule {
  TS_INTRIN_SAME_AS_ARG0, /* float math: result type = first argument's */
  TS_INTRIN_SAME_AS_ARG1, /* if_then_else(c, a, b): result type = a's */
  TS_INTRIN_EXPLICIT,     /* result type given at the call */
} ts_intrinsic_rule;
typedef struct ts_intrinsic_info {
  const char *name; /* "exp", "log", "sqrt", "tanh", "erf", "sigmoid", ... */
  int n_args;       /* -1: variadic */
  ts_intrinsic_rule rule;
  bool float_only; /* arguments must be floating point */
} ts_intrinsic_info;
/* The table entry for `name`, or NULL when the name is not a built-in
 * intrinsic. Built-ins: exp exp2 log log2 log10 sqrt rsqrt tanh erf sigmoid
 * sin cos floor ceil round trunc pow fma abs, and if_then_else(c, a, b),
 * which (unlike select) evaluates only the chosen branch, so a guarded load
 * may be out of bounds when its guard is false (padding uses it). */
const ts_intrinsic_info *ts_intrinsic_lookup(const char *name);

/* --- simplification (tir/simplify.c) --- */
/* Returns an equivalent simplified expression (constant folding, identities,
 * floordiv/floormod of affine expressions by constants when var ranges make
 * them exact). `ranges` may be NULL; otherwise it maps a var to its
 * [min, min+extent) range (see ts_var_ranges). */
typedef struct ts_var_ranges ts_var_ranges;
ts_var_ranges *ts_var_ranges_create(void);
void ts_var_ranges_destroy(ts_var_ranges *r);
void ts_var_ranges_set(ts_var_ranges *r, const ts_expr *var, int64_t min,
                       int64_t extent);
bool ts_var_ranges_get(const ts_var_ranges *r, const ts_expr *var, int64_t *min,
                       int64_t *extent);
ts_expr *ts_simplify(ts_arena *a, ts_expr *e, const ts_var_ranges *ranges);
/* The values of scalar integer or bool dtype t as int64 ([0, 1] for
 * bool; uint64 capped at INT64_MAX); false for other types. */
bool ts_dtype_int_range(ts_dtype t, int64_t *lo, int64_t *hi);
/* Constant bounds of an integer expression given var ranges: returns true and
 * sets [*lo, *hi] (inclusive) when bounded. */
bool ts_expr_const_bound(const ts_expr *e, const ts_var_ranges *ranges,
                         int64_t *lo, int64_t *hi);

/* ========================================================================
 * Buffers
 * ======================================================================== */

#define TS_MAX_DIMS 8
#define TS_DEFAULT_ALIGN 64

/* A buffer of `ndim` (1..TS_MAX_DIMS) static dims, compact row-major unless
 * strides are set; scope "global", alignment TS_DEFAULT_ALIGN bytes. */
ts_buffer *ts_buffer_new(ts_arena *a, const char *name, ts_dtype t,
                         const int64_t *shape, int ndim);
/* For NULL (a constructor or tensor-expression call that ran out of
 * memory): NULL, an invalid dtype (lanes 0) and rank 0. */
const char *ts_buffer_name(const ts_buffer *b);
ts_dtype ts_buffer_dtype(const ts_buffer *b);
int ts_buffer_ndim(const ts_buffer *b);
int64_t ts_buffer_dim(const ts_buffer *b, int i);
const int64_t *ts_buffer_shape(const ts_buffer *b);
/* Element strides, or NULL for compact row-major. */
const int64_t *ts_buffer_strides(const ts_buffer *b);
/* Stride of dim i in elements (computed when compact). */
int64_t ts_buffer_stride(const ts_buffer *b, int i);
const char *ts_buffer_scope(const ts_buffer *b);
int ts_buffer_align(const ts_buffer *b);
/* Number of elements (product of shape), and bytes spanned in storage. */
int64_t ts_buffer_elems(const ts_buffer *b);
int64_t ts_buffer_storage_elems(const ts_buffer *b);
int64_t ts_buffer_bytes(const ts_buffer *b);
void ts_buffer_set_name(ts_arena *a, ts_buffer *b, const char *name);
/* strides == NULL resets to compact. */
void ts_buffer_set_strides(ts_arena *a, ts_buffer *b, const int64_t *strides);
void ts_buffer_set_scope(ts_arena *a, ts_buffer *b, const char *scope);
void ts_buffer_set_align(ts_buffer *b, int align);

/* ========================================================================
 * Statements and blocks
 * ======================================================================== */

typedef enum ts_stmt_kind {
  TS_STMT_FOR,
  TS_STMT_BLOCK_REALIZE,
  TS_STMT_STORE,
  TS_STMT_SEQ,
  TS_STMT_IF,
  TS_STMT_EVALUATE,
  TS_STMT_LET,
  TS_STMT_ALLOCATE,
  TS_STMT_KIND_COUNT
} ts_stmt_kind;

typedef enum ts_for_kind {
  TS_FOR_SERIAL,
  TS_FOR_PARALLEL,
  TS_FOR_VECTORIZED,
  TS_FOR_UNROLLED,
  TS_FOR_THREAD, /* bound to the thread axis named by its thread tag */
} ts_for_kind;
const char *ts_for_kind_name(ts_for_kind k);

typedef enum ts_iter_kind {
  TS_ITER_SPATIAL,
  TS_ITER_REDUCE,
  TS_ITER_OPAQUE,
} ts_iter_kind;
const char *ts_iter_kind_name(ts_iter_kind k);

/* --- construction --- */
/* for var in [min, min+extent) of the given kind; thread_tag only for
 * TS_FOR_THREAD ("blockIdx.x", "threadIdx.y", "vthread", ...). */
ts_stmt *ts_for(ts_arena *a, ts_expr *var, ts_expr *min, ts_expr *extent,
                ts_for_kind kind, const char *thread_tag, ts_stmt *body);
ts_stmt *ts_store(ts_arena *a, ts_buffer *b, ts_expr *const *indices, int n,
                  ts_expr *value);
ts_stmt *ts_seq(ts_arena *a, ts_stmt *const *stmts, int n);
ts_stmt *ts_if(ts_arena *a, ts_expr *cond, ts_stmt *then_s, ts_stmt *else_s);
ts_stmt *ts_evaluate(ts_arena *a, ts_expr *value);
ts_stmt *ts_let_stmt(ts_arena *a, ts_expr *var, ts_expr *value, ts_stmt *body);
ts_stmt *ts_allocate(ts_arena *a, ts_buffer *b, ts_stmt *body);
/* Realizes `block` with one value per iter var; predicate NULL = true. */
ts_stmt *ts_block_realize(ts_arena *a, ts_block *block,
                          ts_expr *const *iter_values, int n,
                          ts_expr *predicate);

/* A new empty block: no iter vars, no regions, body NULL. */
ts_block *ts_block_new(ts_arena *a, const char *name);
/* Appends an iter var (a TS_INDEX var) with domain dom; returns its index
 * (-1 when out of memory: the block is unchanged and the arena failed). */
int ts_block_add_iter_var(ts_arena *a, ts_block *b, ts_expr *var, ts_range dom,
                          ts_iter_kind kind);
void ts_block_set_body(ts_block *b, ts_stmt *body);
void ts_block_set_init(ts_block *b, ts_stmt *init); /* NULL removes it */
void ts_block_add_alloc(ts_arena *a, ts_block *b, ts_buffer *buf);
/* Replaces allocation `old` of b by `repl` in place (repl NULL removes it,
 * keeping the order of the others). Returns whether old was allocated by b.
 * (tir/edit.c) */
bool ts_block_replace_alloc(ts_block *b, const ts_buffer *old, ts_buffer *repl);
/* Replaces the block's read and write regions (copied into the arena). */
void ts_block_set_regions(ts_arena *a, ts_block *b, const ts_region *reads,
                          int n_reads, const ts_region *writes, int n_writes);
void ts_block_set_name(ts_arena *a, ts_block *b, const char *name);
/* Replaces the domain of iter var i (the caller keeps every binding of it
 * inside the new domain). */
void ts_block_set_iter_dom(ts_block *b, int i, ts_range dom);

/* --- inspection --- */
ts_stmt_kind ts_stmt_kind_of(const ts_stmt *s);
const char *ts_stmt_kind_name(ts_stmt_kind k);

ts_expr *ts_for_var(const ts_stmt *s);
ts_expr *ts_for_min(const ts_stmt *s);
ts_expr *ts_for_extent(const ts_stmt *s);
ts_for_kind ts_for_kind_of(const ts_stmt *s);
const char *ts_for_thread_tag(const ts_stmt *s); /* NULL unless THREAD */
ts_stmt *ts_for_body(const ts_stmt *s);

ts_buffer *ts_store_buffer(const ts_stmt *s);
int ts_store_n_indices(const ts_stmt *s);
ts_expr *ts_store_index(const ts_stmt *s, int i);
ts_expr *ts_store_value(const ts_stmt *s);

int ts_seq_n(const ts_stmt *s);
ts_stmt *ts_seq_item(const ts_stmt *s, int i);

ts_expr *ts_if_cond(const ts_stmt *s);
ts_stmt *ts_if_then(const ts_stmt *s);
ts_stmt *ts_if_else(const ts_stmt *s); /* NULL when absent */

ts_expr *ts_evaluate_value(const ts_stmt *s);

ts_expr *ts_let_stmt_var(const ts_stmt *s);
ts_expr *ts_let_stmt_value(const ts_stmt *s);
ts_stmt *ts_let_stmt_body(const ts_stmt *s);

ts_buffer *ts_allocate_buffer(const ts_stmt *s);
ts_stmt *ts_allocate_body(const ts_stmt *s);

ts_block *ts_realize_block(const ts_stmt *s);
int ts_realize_n_values(const ts_stmt *s);
ts_expr *ts_realize_value(const ts_stmt *s, int i);
ts_expr *ts_realize_predicate(const ts_stmt *s); /* NULL = true */

const char *ts_block_name(const ts_block *b);
int ts_block_n_iters(const ts_block *b);
ts_expr *ts_block_iter_var(const ts_block *b, int i);
ts_range ts_block_iter_dom(const ts_block *b, int i);
ts_iter_kind ts_block_iter_kind(const ts_block *b, int i);
int ts_block_n_reads(const ts_block *b);
const ts_region *ts_block_read(const ts_block *b, int i);
int ts_block_n_writes(const ts_block *b);
const ts_region *ts_block_write(const ts_block *b, int i);
int ts_block_n_allocs(const ts_block *b);
ts_buffer *ts_block_alloc(const ts_block *b, int i);
ts_stmt *ts_block_init(const ts_block *b); /* NULL when absent */
ts_stmt *ts_block_body(const ts_block *b);

/* --- annotations: loops (TS_STMT_FOR), blocks and functions --- */
int ts_for_n_annotations(const ts_stmt *s);
const ts_annotation *ts_for_annotation(const ts_stmt *s, int i);
const ts_annotation *ts_for_find_annotation(const ts_stmt *s, const char *key);
/* Adds or replaces by key (the value is copied into the arena). */
void ts_for_annotate(ts_arena *a, ts_stmt *s, ts_annotation ann);
/* Returns true if the key was present. */
bool ts_for_unannotate(ts_stmt *s, const char *key);
int ts_block_n_annotations(const ts_block *b);
const ts_annotation *ts_block_annotation(const ts_block *b, int i);
const ts_annotation *ts_block_find_annotation(const ts_block *b,
                                              const char *key);
void ts_block_annotate(ts_arena *a, ts_block *b, ts_annotation ann);
bool ts_block_unannotate(ts_block *b, const char *key);

/* --- in-place edits (schedule primitives and passes) --- */
void ts_for_set_body(ts_stmt *s, ts_stmt *body);
void ts_for_set_kind(ts_arena *a, ts_stmt *s, ts_for_kind kind,
                     const char *thread_tag);
void ts_for_set_range(ts_stmt *s, ts_expr *min, ts_expr *extent);
void ts_seq_set_item(ts_stmt *s, int i, ts_stmt *item);
void ts_if_set_branches(ts_stmt *s, ts_stmt *then_s, ts_stmt *else_s);
void ts_let_stmt_set_body(ts_stmt *s, ts_stmt *body);
void ts_allocate_set_body(ts_stmt *s, ts_stmt *body);
void ts_realize_set_values(ts_arena *a, ts_stmt *s, ts_expr *const *values,
                           int n, ts_expr *predicate);

/* ========================================================================
 * PrimFunc
 * ======================================================================== */

/* A new function with its own arena (NULL when out of memory); caller frees
 * with ts_func_free. */
ts_func *ts_func_new(const char *name);
void ts_func_free(ts_func *f);
ts_arena *ts_func_arena(const ts_func *f);
const char *ts_func_name(const ts_func *f);
void ts_func_set_name(ts_func *f, const char *name);
/* Appends a parameter buffer (allocated in this function's arena). */
void ts_func_add_param(ts_func *f, ts_buffer *b);
/* Replaces parameter i (passes that change buffer layouts). */
void ts_func_set_param(ts_func *f, int i, ts_buffer *b);
/* Replaces the whole parameter list with bufs[0..n) (buffers of f). */
void ts_func_set_params(ts_func *f, ts_buffer *const *bufs, int n);
int ts_func_n_params(const ts_func *f);
ts_buffer *ts_func_param(const ts_func *f, int i);
ts_stmt *ts_func_body(const ts_func *f);
void ts_func_set_body(ts_func *f, ts_stmt *body);
int ts_func_n_attrs(const ts_func *f);
const ts_annotation *ts_func_attr(const ts_func *f, int i);
const ts_annotation *ts_func_find_attr(const ts_func *f, const char *key);
void ts_func_set_attr(ts_func *f, ts_annotation ann);
/* The parameters whose values are known ahead of every call (a model's
 * weights): the function's "const_params" attribute, an int whose bit i is
 * parameter i (0 when it has none). A measurement builds such a function
 * with the stages that read only them run once before the timed calls,
 * as a compiled model prepares them at compile time. */
#define TS_ATTR_CONST_PARAMS "const_params"
uint64_t ts_func_const_params(const ts_func *f);
/* A deep copy into a new arena (fresh vars, buffers and blocks, same names
 * and structure); caller frees with ts_func_free. */
ts_func *ts_func_copy(const ts_func *f);

/* ========================================================================
 * Traversal, substitution and copying (tir/walk.c)
 * ======================================================================== */

/* Calls fn on e and every sub-expression, pre-order (LET vars included). */
void ts_expr_walk(ts_expr *e, void (*fn)(void *ctx, ts_expr *e), void *ctx);

/* Walks statements pre/post order. enter_stmt may return false to skip the
 * children of s. visit_expr is called on each expression directly held by a
 * statement, block or block-realize (loop min/extent, store indices/value,
 * conditions, iter values, predicates, iter domains, region bounds),
 * not on its sub-expressions. Any callback may be NULL. A block-realize's
 * children are its block's init (if any) then body. */
typedef struct ts_visitor {
  bool (*enter_stmt)(void *ctx, ts_stmt *s);
  void (*leave_stmt)(void *ctx, ts_stmt *s);
  void (*visit_expr)(void *ctx, ts_expr *e);
  void *ctx;
} ts_visitor;
void ts_stmt_walk(ts_stmt *s, const ts_visitor *v);

/* A map from IR nodes (vars, buffers, blocks) to nodes; malloc-backed. Out
 * of memory drops the entry being put (or gives a map that stays empty)
 * and is counted by ts_alloc_failures (tir/alloc.h), so the public function
 * doing the work returns TS_ENOMEM. */
typedef struct ts_node_map ts_node_map;
ts_node_map *ts_node_map_create(void);
void ts_node_map_destroy(ts_node_map *m);
void ts_node_map_put(ts_node_map *m, const void *key, void *value);
void *ts_node_map_get(const ts_node_map *m, const void *key);
size_t ts_node_map_size(const ts_node_map *m);

/* Rebuilds e bottom-up: each node gets new operands, then `post` (if
 * non-NULL) may return a replacement for the rebuilt node. Unchanged
 * sub-trees are shared, not copied. */
typedef ts_expr *(*ts_expr_post_fn)(void *ctx, ts_arena *a, ts_expr *e);
ts_expr *ts_expr_mutate(ts_arena *a, ts_expr *e, ts_expr_post_fn post,
                        void *ctx);
/* Replaces variables (and buffers in loads) using `vars` (var -> expr) and
 * `buffers` (buffer -> buffer); either map may be NULL. Shares unchanged
 * sub-trees. Folds constants created by the substitution. */
ts_expr *ts_expr_substitute(ts_arena *a, ts_expr *e, const ts_node_map *vars,
                            const ts_node_map *buffers);
/* Deep-copies a statement tree into `a`. Every var, buffer and block defined
 * inside s is copied fresh; references to outside vars/buffers are looked
 * up in `remap` (node -> node, may be NULL; unmapped outside nodes are kept),
 * and the new definitions are added to `remap` when it is non-NULL. */
ts_stmt *ts_stmt_copy(ts_arena *a, const ts_stmt *s, ts_node_map *remap);
/* Like ts_stmt_copy but substitutes var->expr (`vars`) and buffer->buffer
 * (`buffers`) without copying definitions that are not remapped. */
ts_stmt *ts_stmt_substitute(ts_arena *a, ts_stmt *s, const ts_node_map *vars,
                            const ts_node_map *buffers);

/* Rebuilds a statement tree. For each statement, `pre` (if non-NULL) may
 * return a replacement, which is used as is (its children are not visited);
 * otherwise the children and the statement's own expressions (through
 * `expr`, if non-NULL) are rebuilt, then `post` (if non-NULL) may replace the
 * rebuilt statement. A statement whose parts are all unchanged is shared,
 * not copied; a changed block-realize gets a new block (same iter vars,
 * allocations and annotations). `pre`/`post` also serve to track scopes
 * (they are called in matching pairs when pre returns NULL). */
typedef struct ts_stmt_mutator {
  ts_stmt *(*pre)(void *ctx, ts_arena *a, ts_stmt *s);
  ts_stmt *(*post)(void *ctx, ts_arena *a, ts_stmt *s);
  ts_expr *(*expr)(void *ctx, ts_arena *a, ts_expr *e);
  void *ctx;
} ts_stmt_mutator;
ts_stmt *ts_stmt_mutate(ts_arena *a, ts_stmt *s, const ts_stmt_mutator *m);

/* The deepest nesting the text form, the verifier, the printer and the
 * interpreter accept, counted the same way by all of them: every statement
 * and every expression node is one level below its parent, so a chain
 * `a + b + c + ...` of n operators is n levels deep whichever way it
 * leans, and the function body is level 1. Deeper input is an error, never
 * a stack overflow. */
#define TS_TIR_MAX_DEPTH 256

/* The depth of e's tree (a leaf is 1) when it is at most limit, else
 * limit + 1; never recurses more than limit + 1 levels. */
int ts_expr_depth(const ts_expr *e, int limit);
/* The same for a statement tree (its expressions included). */
int ts_stmt_depth(const ts_stmt *s, int limit);
/* TS_OK when f's body is at most TS_TIR_MAX_DEPTH levels deep, else
 * TS_EVERIFY saying so. */
int ts_func_check_depth(const ts_func *f, ts_error *err);

/* ========================================================================
 * Text form (tir/printer.c, tir/parser.c) — grammar in docs/ir.md
 * ======================================================================== */

/* Prints the function in the canonical text form. Returns a malloc'd string
 * the caller frees with free(), or NULL when memory ran out. Distinct
 * vars/buffers that share a name are printed with a numeric suffix so the
 * text parses back. */
char *ts_func_print(const ts_func *f);
char *ts_stmt_print(const ts_stmt *s);
char *ts_expr_print(const ts_expr *e);
/* Parses one function. `filename` is used in messages (may be NULL).
 * On success *out owns a new function (free with ts_func_free). On failure
 * returns TS_EPARSE (or TS_EVERIFY for a well-formed text that breaks IR
 * rules) with line:column in err, and *out is NULL. */
int ts_func_parse(const char *text, size_t len, const char *filename,
                  ts_func **out, ts_error *err);
/* Reads a whole file and parses it. */
int ts_func_parse_file(const char *path, ts_func **out, ts_error *err);
/* Whether `name` is reserved in the text form: a keyword (`for`, `min`,
 * `select`, ...), a dtype name (`float32`, `int8x4`) or a built-in intrinsic
 * name (`exp`). The printer never prints a var or buffer under a reserved
 * name and the parser rejects one. */
bool ts_text_name_is_reserved(const char *name);

/* ========================================================================
 * Structural equality and hash (tir/hash.c)
 * ======================================================================== */

typedef struct ts_hash128 {
  uint64_t hi, lo;
} ts_hash128;

/* The structural hash: independent of var, buffer and function names and of
 * the machine; sensitive to shapes, dtypes, computation, layout, loop kinds,
 * annotations and block names (traces refer to blocks by name). */
ts_hash128 ts_func_hash(const ts_func *f);
/* True when a and b are equal up to the names of vars, buffers and the
 * function (the same relation the hash respects). Out of memory (counted
 * by ts_alloc_failures): ts_func_hash gives the zero hash, ts_func_equal
 * false and ts_func_structural_key NULL. */
bool ts_func_equal(const ts_func *a, const ts_func *b);
/* The canonical byte stream behind ts_func_hash and ts_func_equal: two
 * functions are equal exactly when their keys are byte-equal, and
 * ts_func_hash(f) == ts_structural_key_hash(key). Lets a caller that
 * compares one function with many serialize it once (the database's
 * compile-time lookup). Returns malloc'd bytes the caller frees, length in
 * *len. */
uint8_t *ts_func_structural_key(const ts_func *f, size_t *len);
ts_hash128 ts_structural_key_hash(const uint8_t *key, size_t len);
/* 32 lowercase hex digits + NUL. */
void ts_hash128_hex(ts_hash128 h, char out[33]);
int ts_hash128_parse(const char *hex, ts_hash128 *out);
bool ts_hash128_eq(ts_hash128 a, ts_hash128 b);

/* ========================================================================
 * Verifier and analyses (tir/verify.c, tir/analysis.c)
 * ======================================================================== */

/* Checks that f is well formed: every var defined before use, operand dtypes
 * agree, loads/stores provably inside buffer bounds (when index bounds are
 * constant), block iter vars used correctly (block bodies use only their
 * own iter vars and vars defined inside, iter values only outer loop vars,
 * init does not read reduce vars), buffers declared. Returns TS_OK or
 * TS_EVERIFY with a message naming the block/loop and the problem. */
int ts_func_verify(const ts_func *f, ts_error *err);

/* Floating-point (or integer, for integer data) operations of f: each
 * arithmetic op and math call on data values counts 1 (fma 2), multiplied
 * by the trip counts of enclosing loops; index arithmetic is not counted. */
double ts_func_flops(const ts_func *f);

/* Derives the block's read and write regions from its body and init
 * (accesses to buffers allocated inside the block excluded; loops inside
 * the block relaxed over their ranges) and stores them on the block. */
void ts_block_infer_regions(ts_arena *a, ts_block *b);
/* Infers regions of every block in f (inner blocks first). */
void ts_func_infer_regions(ts_func *f);

/* All block-realize statements of f in pre-order (the root block first).
 * Returns a malloc'd array (caller frees) and its count in *n. */
ts_stmt **ts_func_blocks(const ts_func *f, int *n);
/* The block-realize of the block named `name`, or NULL. */
ts_stmt *ts_func_find_block(const ts_func *f, const char *name);
/* The for loops enclosing `stmt` from outermost to innermost (up to the
 * nearest enclosing block-realize when stop_at_block). Returns a malloc'd
 * array (caller frees), count in *n; NULL with *n = -1 if stmt is not in f. */
ts_stmt **ts_func_loops_above(const ts_func *f, const ts_stmt *stmt,
                              bool stop_at_block, int *n);
/* The statement that directly contains `stmt` (for, seq, if, let, allocate
 * or the block-realize whose block holds it), or NULL for the body root. */
ts_stmt *ts_func_parent(const ts_func *f, const ts_stmt *stmt);
/* Whether parameter i is written by f (an output). */
bool ts_func_param_is_output(const ts_func *f, int i);

/* ========================================================================
 * Tensor-expression builder (tir/te.c)
 * ======================================================================== */

typedef struct ts_te ts_te;             /* a function under construction */
typedef struct ts_te_stage ts_te_stage; /* one computed tensor */

typedef enum ts_te_reducer {
  TS_TE_SUM,
  TS_TE_MAX,
  TS_TE_MIN,
} ts_te_reducer;

/* Starts a function; finish with ts_te_finish or drop with ts_te_abort. */
ts_te *ts_te_begin(const char *func_name);
ts_arena *ts_te_arena(ts_te *te);
/* An input tensor (becomes a parameter if listed in ts_te_finish). */
ts_buffer *ts_te_placeholder(ts_te *te, const char *name, ts_dtype t,
                             const int64_t *shape, int ndim);
/* A computed tensor of the given shape. axis_names may be NULL ("i", "j",
 * "k", ... then "i4", ...). Its spatial axes are the block's iter vars. */
ts_te_stage *ts_te_compute(ts_te *te, const char *name, ts_dtype t,
                           const int64_t *shape, int ndim,
                           const char *const *axis_names);
/* The order of the stage's spatial loops, outermost first, as a
 * permutation of its axes (default: axis order), before its value is set.
 * The buffer keeps its layout: a stage whose outermost axis only selects
 * among a few nearby reads (a stencil's taps) can run that axis inside, so
 * each neighbourhood is read from cache for all of them. */
void ts_te_loop_order(ts_te_stage *st, const int *order);
/* The block iter var of spatial axis i, to use in the value expression. */
ts_expr *ts_te_axis(ts_te_stage *st, int i);
/* A new reduction axis of the given extent (iter var of the block). */
ts_expr *ts_te_reduce_axis(ts_te_stage *st, const char *name, int64_t extent);
/* Loads stage/placeholder buffer b at indices (convenience for ts_load). */
ts_expr *ts_te_load(ts_te *te, ts_buffer *b, ts_expr *const *indices, int n);
/* Finishes a stage as out[axes] = value. Returns its buffer. */
ts_buffer *ts_te_set_value(ts_te_stage *st, ts_expr *value);
/* Finishes a stage as a reduction over its reduce axes:
 * out[axes] = reducer(out[axes], value), with the reducer's identity as
 * init (0, lowest, highest of the output dtype). */
ts_buffer *ts_te_set_reduce(ts_te_stage *st, ts_te_reducer r, ts_expr *value);
/* Builds the function: `params` lists the parameters in order (inputs and
 * outputs); other stages become buffers allocated in the root block. Each
 * stage is one loop nest (spatial axes, then reduce axes) around one block
 * with inferred regions. Consumes te. On failure returns NULL with err set. */
ts_func *ts_te_finish(ts_te *te, ts_buffer *const *params, int n_params,
                      ts_error *err);
void ts_te_abort(ts_te *te);

/* ========================================================================
 * Operator library and workload specs (tir/ops/)
 * ======================================================================== */

/* One built workload. */
typedef struct ts_workload {
  ts_func *func;  /* owned; freed by ts_workload_free */
  char op[32];    /* operator name, e.g. "matmul" */
  char spec[512]; /* canonical spec: every key, defaults filled in */
  char name[128]; /* short name, e.g. "matmul_1024x1024x1024_float32" */
  double flops;   /* the operator's FLOP count (formula) */
} ts_workload;

/* Parses a workload spec ("NAME key=value ...") and builds it. Unknown
 * operators, unknown or repeated keys, missing or out-of-range values and
 * malformed values give TS_EINVAL with a message naming the key. On success
 * *out is a new workload the caller frees with ts_workload_free. */
int ts_workload_from_spec(const char *spec, ts_workload **out, ts_error *err);
void ts_workload_free(ts_workload *w);

/* Bytes of every buffer of w's function (parameters and the root block's
 * allocations); INT64_MAX when that overflows. No data is allocated. */
int64_t ts_workload_bytes(const ts_workload *w);

/* The rate run-time estimates assume (FLOP/s): a rough figure for one
 * core running well-scheduled code. */
#define TS_NOMINAL_FLOPS 100e9

/* What a command admits before it allocates anything for a workload. */
typedef struct ts_workload_limits {
  int64_t max_bytes;      /* buffers (0: no limit) */
  double max_flops;       /* operations per run (0: no limit) */
  const char *why;        /* says where max_bytes comes from, or NULL */
  const char *bytes_flag; /* the option that raises max_bytes, or NULL */
  const char *flops_flag; /* the option that raises max_flops, or NULL */
} ts_workload_limits;

/* TS_OK when w fits lim; else TS_ERANGE with a message naming the size, the
 * limit and the option that raises it. */
int ts_workload_admit(const ts_workload *w, const ts_workload_limits *lim,
                      ts_error *err);
/* The operator names, NULL-terminated (for help text and tests). */
const char *const *ts_op_names(void);
/* A one-line usage string of an operator ("matmul M N K [transpose_a=0 ...]")
 * or NULL if unknown. */
const char *ts_op_usage(const char *op);

/* ========================================================================
 * Reference interpreter (tir/interp.c)
 * ======================================================================== */

typedef struct ts_interp_options {
  uint64_t max_steps; /* stop with TS_ERANGE after this many statement
                         executions; 0 = unlimited */
} ts_interp_options;

/* Executes f on host buffers: args[i] points to the storage of parameter i
 * (its dtype, shape and strides; bfloat16/float16 as 16-bit patterns,
 * bool as one byte). Block-allocated buffers are allocated per block
 * execution. Reduction init runs when every reduce iter var is at its
 * domain minimum. Out-of-bounds accesses, integer division by zero and
 * exceeding max_steps stop with TS_ERANGE and a message naming the block
 * and buffer; the outputs are then partially written.
 * Also TS_ERANGE: a block whose predicate holds with an iter value outside
 * its iter domain. Before running anything the function is checked:
 * n_args != number of parameters, a NULL storage pointer, a var or buffer
 * used outside its scope, or operand types that disagree give TS_EINVAL;
 * an intrinsic the interpreter does not implement (and address_of) gives
 * TS_EUNSUPPORTED naming it; a block/allocate buffer over 1 GiB gives
 * TS_ENOMEM. Loops of every kind run serially. The arithmetic semantics
 * (wrap-around, per-operation rounding of 16/32-bit floats, saturating
 * float -> int casts, round half to even) are listed in tir/interp.c. */
int ts_interp_run(const ts_func *f, void *const *args, int n_args,
                  const ts_interp_options *opts, ts_error *err);

/* Executes f as a CUDA kernel (tir/interp_gpu.c), with the kernel model of
 * the cuda code generator: the grid and block dimensions are the largest
 * extents of the loops bound to blockIdx.x/y/z and threadIdx.x/y/z; such a
 * loop does not iterate — its var is the block's (thread's) index plus the
 * loop minimum and its body runs only when that index is below the loop's
 * extent; vthread loops are ordinary loops; a "shared" buffer has one
 * storage per thread block (poisoned with 0xFF bytes at the block's start),
 * every other allocated buffer one per thread; args are global memory.
 * "tessera.cuda.syncthreads" is a block-wide barrier and
 * "tessera.cuda.shfl_down" a full-warp shuffle (warps: 32 consecutive
 * linear thread ids, x fastest). Blocks run one after another, the threads
 * of a block interleaved deterministically (switching at barriers and
 * shuffles). Everything ts_interp_run checks is checked (max_steps counts
 * the statements of all threads); in addition, TS_ERANGE with a message:
 * a data race on shared memory (an element written by one thread and read
 * or written by another with no barrier in between, or read by one and
 * then written by another; the message names the buffer, the element
 * offset, the thread block and both threads; a store of the value the
 * element already got or held in that barrier interval is not a race —
 * threads redundantly storing one result), a divergent barrier (some
 * thread of the block finishes or waits at another barrier while others
 * wait at it) or shuffle. TS_EINVAL: a thread-bound loop whose extent is not
 * a positive constant, an unknown thread tag, more than 1024 threads per
 * block, a grid over 2^31-1 x 65535 x 65535 blocks; TS_EUNSUPPORTED: over
 * 2^28 threads in all, or (with barriers or shuffles) statements or
 * expressions nested over 512 deep. Races on global memory are not
 * detected. The serial ts_interp_run refuses the tessera.cuda intrinsics. */
int ts_interp_run_gpu(const ts_func *f, void *const *args, int n_args,
                      const ts_interp_options *opts, ts_error *err);

/* Host tensor helpers used by tests, the CLI and the runtime. */
/* Fills n elements of dtype t with seeded pseudo-random values suited to t
 * (floats uniform in [-1, 1), ints in a small range so products do not
 * overflow). The same seed gives the same bytes on every machine.
 * Ranges: floats uniform in [-1, 1) rounded to the dtype; int8 [-4, 4),
 * uint8 [0, 8), wider signed ints [-64, 64), wider unsigned [0, 64), bool
 * 0/1. Element i depends only on (seed, i), not on n. A vector dtype fills
 * n * lanes scalars. */
void ts_host_fill_random(void *data, ts_dtype t, int64_t n, uint64_t seed);
/* Compares n elements of got against want with the tolerance of dtype t
 * (exact for integers; relative+absolute for floats, looser for 16-bit).
 * Returns the number of mismatches; *first_bad (if non-NULL) gets the index
 * of the first, *max_abs_err the largest absolute difference.
 * A float element matches when |got - want| <= atol + rtol * |want|:
 *   float64  atol 1e-9, rtol 1e-9;
 *   float32  atol 1e-3, rtol 1e-4 (accepts float32 sums of up to 4096
 *            products of [-1, 1) inputs in any order — measured worst
 *            reordering error about 4e-4 — while a wrong, missing or
 *            duplicated term of such inputs is usually far larger);
 *   float16  atol 1e-2, rtol 1e-2;  bfloat16  atol 2e-2, rtol 2e-2.
 * NaN matches NaN, an infinity matches the same infinity only (a
 * mismatch involving NaN or inf counts as an infinite error). Ints must be
 * equal, bools equal as truth values (any nonzero byte is true).
 * *first_bad is -1 when every element matches. */
int64_t ts_host_compare(const void *got, const void *want, ts_dtype t,
                        int64_t n, int64_t *first_bad, double *max_abs_err);
/* Reads element i of dtype t as a double (for messages and tests). */
double ts_host_get(const void *data, ts_dtype t, int64_t i);
/* Reads element i as an integer: integer dtypes exactly (a uint64 past
 * INT64_MAX saturates), floats truncated toward zero and saturated, NaN 0
 * (indices, shapes and axes read from a model's constants). */
int64_t ts_host_get_int(const void *data, ts_dtype t, int64_t i);
void ts_host_set(void *data, ts_dtype t, int64_t i, double v);

/* ========================================================================
 * Small utilities (tir/util.c)
 * ======================================================================== */

/* Seconds on CLOCK_MONOTONIC, from an arbitrary epoch (only differences
 * mean anything). */
double ts_now_seconds(void);
/* The same clock in whole milliseconds. */
int64_t ts_now_ms(void);
/* Sleeps ms milliseconds (nothing when ms <= 0), resumed after signals. */
void ts_sleep_ms(int ms);
/* The qsort comparator of doubles: ascending order; a NaN compares equal
 * to everything. */
int ts_cmp_double(const void *a, const void *b);
/* The median of v[0..n): the middle value, the mean of the two middle
 * values when n is even; NAN when n <= 0 (or, for n > 64, when no memory
 * is left for the sorted copy). v is left as it is. */
double ts_median(const double *v, int n);
/* Reads the whole file at path (a regular file or a pipe) into *data,
 * malloc'd and NUL-terminated (so text can be used as a string), its
 * length in *len. A file of more than max_bytes is refused (TS_EINVAL,
 * naming the limit); TS_EIO when it cannot be opened or read, TS_ENOMEM
 * when out of memory; `what` names the file in messages ("trace file").
 * On failure *data is NULL. */
int ts_read_file(const char *path, const char *what, size_t max_bytes,
                 char **data, size_t *len, ts_error *err);

#endif /* TESSERA_TIR_H */
