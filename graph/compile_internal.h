/*
 * compile_internal.h — what the two halves of `tessera compile` share: the
 * compiled program (built kernels, call sites with their argument
 * references, output copies) that compile.c assembles from the graph and
 * compile_emit.c writes out as a C glue file, a weights blob and kernel
 * objects, then links into the shared library. Private to graph/.
 */
#ifndef TESSERA_GRAPH_COMPILE_INTERNAL_H
#define TESSERA_GRAPH_COMPILE_INTERNAL_H

#include "graph/internal.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Where a kernel argument lives at run time. */
typedef enum cp_ref_kind {
  CP_ARENA = 0,  /* arena base + offset */
  CP_WEIGHT = 1, /* the weights blob + offset */
  CP_INPUT = 2,  /* the caller's input `index` (or its staging copy) */
  CP_OUTPUT = 3, /* the caller's output `index` (or its staging copy) */
} cp_ref_kind;

typedef struct cp_ref {
  cp_ref_kind kind;
  int index;
  int64_t offset;
} cp_ref;

/* One built task: its object and entry symbol. */
typedef struct cp_kernel {
  char entry[128];
  unsigned char *bytes; /* malloc'd ELF object */
  size_t n_bytes;
  const char *vendor; /* or: a vendor call's description (no object) */
  const char *user;   /* or: a user's source/object file, entry its symbol */
  bool with_length;   /* takes the length input as one more argument */
} cp_kernel;

/* One call site: node `node` calls kernel `task` with args[first ..
 * first + n). */
typedef struct cp_call {
  int task, node;
  int first, n;
} cp_call;

/* After the calls: output `out` is a copy of `src` (a graph output that is
 * a view of something stored elsewhere, an input, a constant, or an output
 * listed twice). */
typedef struct cp_copy {
  int out;
  cp_ref src;
  int64_t bytes;
} cp_copy;

typedef struct cp_program {
  const ts_graph *g;
  const char *model_name;
  cp_kernel *kernels; /* one per task */
  int n_kernels;
  cp_call *calls;
  int n_calls;
  cp_ref *args;
  int n_args;
  cp_copy *copies;
  int n_copies;
  int max_args;        /* the most arguments of one call */
  int n_vendor;        /* tasks run by the vendor library */
  int64_t arena_bytes; /* including scratch for outputs nobody reads */
  bool need_amx;       /* the target has AMX: ask Linux for it at create */
  /* constants computed at compile time by the kernels' prologues: in the
   * weights blob at g->consts_len rounded up to 64 (CP_WEIGHT offsets
   * there and past it) */
  unsigned char *extra;
  int64_t extra_len, extra_cap;
  char *info_json; /* ts_model_info's text (malloc'd) */
} cp_program;

/* A library of several programs, one per padded size of a dynamic
 * dimension (ts_graph_compile_padded): which program serves which sizes,
 * and where the dimension is in the inputs and outputs. */
typedef struct cp_dynamic {
  const char *symbol;
  const int64_t *sizes;               /* ascending, one per program */
  const unsigned *in_axes, *out_axes; /* bit d: dimension d is the symbol */
  int n_in;                           /* the model's own inputs */
} cp_dynamic;

/* Writes the kernel objects, the weights blobs and the glue of programs
 * ps[0..n) into tmpdir and links them with o->cc into o->output (through
 * a temporary name in the same folder, renamed at the end). One program
 * and dyn NULL: the library is that program; otherwise each program's
 * interface is internal and a dispatcher serves the dynamic dimension.
 * *library_bytes receives the size of the library. */
int cp_emit_and_link(const cp_program *const *ps, int n, const cp_dynamic *dyn,
                     const ts_graph_compile_options *o, const char *tmpdir,
                     int64_t *library_bytes, ts_error *err);

/* Writes model.c of a library of several programs (compile_dynamic.c):
 * the C ABI over programs ps[0..n), whose own interfaces carry the
 * prefixes b0_, b1_, ...; link_vendor: the library calls oneDNN, and its
 * kernels' parallel loops run on oneDNN's pool. */
int cp_write_dispatcher(const cp_program *const *ps, int n,
                        const cp_dynamic *dyn, const char *dir,
                        bool link_vendor, ts_error *err);

/* Glue text: the C declarations every glue file starts with (types, the
 * thread's last error and fail()), ts_model_run/ts_model_profile over the
 * file's static run(), and the
 * ts_rt_parallel_for of a library that calls oneDNN (its kernels' loops
 * on oneDNN's pool; defined once per library). */
extern const char cp_glue_types[];
extern const char cp_glue_run_api[];
extern const char cp_dnnl_parallel_for[];

/* Where the constants of one program went in a library's shared weights
 * blob: the constant at [from, from + len) of its graph's store is at
 * `to` (sorted by from). */
typedef struct cp_moved {
  int64_t from, len, to;
} cp_moved;
typedef struct cp_remap {
  cp_moved *moved;
  int n;
} cp_remap;
/* The weights of programs ps[0..n) as one blob, each distinct constant
 * once (the buckets of a dynamic model share their weights): writes
 * weights.bin and weights.S (symbol tsm_weights) into dir and fills
 * remaps[0..n) (free with cp_remap_free). */
int cp_write_shared_weights(const cp_program *const *ps, int n, const char *dir,
                            cp_remap *remaps, ts_error *err);
/* weights.bin holding bytes[0..len) (then, where extra_len > 0, zeros to
 * a multiple of 64 bytes and extra[0..extra_len)) and weights.S pulling it
 * in as the library's tsm_weights (compile_emit.c). */
int cp_write_weights_blob(const char *dir, const void *bytes, size_t len,
                          const void *extra, size_t extra_len, ts_error *err);
/* A weights reference of a program moved by its remap (r NULL: as is). */
int64_t cp_remap_offset(const cp_remap *r, int64_t offset);
void cp_remap_free(cp_remap *r);

/* A C string literal of s (every byte outside a safe set escaped). */
void cp_c_string(FILE *f, const char *s);

/* The ONNX TensorProto code of a dtype (0 when ONNX has none). */
int cp_onnx_dtype(ts_dtype t);

#endif /* TESSERA_GRAPH_COMPILE_INTERNAL_H */
