/*
 * interp.c — the reference interpreter: executes a PrimFunc on host buffers,
 * the ground truth every correctness test compares against.
 *
 * ts_interp_run works in two phases. First it compiles the function into a
 * private tree (in a scratch arena) in which every variable definition has a
 * slot in a flat value array and every buffer definition a slot in a buffer
 * table, so the run never looks anything up by name or pointer; scoping,
 * arities, dtypes, buffer sizes and intrinsic names are checked here, so the
 * run itself can only fail on data-dependent faults. Then it executes that
 * tree serially, whatever the loop kinds say. Vector expressions are
 * evaluated one lane at a time (a ramp gives base + lane * stride, a
 * broadcast ignores the lane, a vector load loads one element per lane).
 * The compiler is in interp_compile.c, evaluation and execution in
 * interp_exec.c (their shared types in interp_internal.h), the GPU mode in
 * interp_gpu.c; this file holds the entry points and the GPU threads' run
 * states.
 *
 * Semantics (the contract the code generators must match):
 * - integers wrap to their width and signedness (computed in 64-bit unsigned
 *   arithmetic, then sign- or zero-extended); `/` and `%` truncate like C,
 *   floordiv/floormod round toward negative infinity; dividing by zero is a
 *   TS_ERANGE fault; INT_MIN / -1 wraps to INT_MIN (remainder 0);
 * - float32 operations are computed in double and rounded to float32 after
 *   every operation (which equals IEEE float32 arithmetic for + - * /);
 *   float16 and bfloat16 likewise round to their format after every
 *   operation; float64 is plain double arithmetic; float `%` is fmod,
 *   float floordiv is floor(x / y), floormod x - floordiv(x, y) * y;
 * - min/max on floats are fmin/fmax (a NaN operand yields the other one);
 * - comparisons give bool; && and || evaluate both operands (like select;
 *   only if_then_else is lazy);
 * - casts: float -> int truncates toward zero and saturates: NaN gives 0,
 *   values below the target's range give its minimum (0 for unsigned), values
 *   above give its maximum; int -> float rounds to nearest; anything -> bool
 *   is `!= 0`; int -> int wraps;
 * - math intrinsics are computed in double and rounded to the result dtype;
 *   `round` rounds half to even (nearbyint); rsqrt is 1 / sqrt(x), sigmoid
 *   1 / (1 + exp(-x)); abs works on integers too (abs(INT_MIN) wraps);
 * - a block runs when its predicate holds; its iter values must then lie in
 *   the iter domains (TS_ERANGE otherwise); the init runs when every reduce
 *   iter var is at its domain minimum; block alloc buffers and `allocate`
 *   buffers are zero-filled for every execution and freed after it.
 */
#include "interp_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- errors ---- */

/* Records the first fault; later ones are ignored. */
void interp_fail_at(interp *in, int code, const char *file, int line,
                    const char *fmt, ...) {
  if (in->failed) return;
  in->failed = true;
  in->code = code;
  char msg[900];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (in->block)
    ts_error_set(in->err, code, file, line, "block '%s': %s", in->block, msg);
  else
    ts_error_set(in->err, code, file, line, "function '%s': %s",
                 ts_func_name(in->func), msg);
}

/* ---- entry points ---- */

int interp_open(const ts_func *f, void *const *args, int n_args,
                const ts_interp_options *opts, gpu_sim *gpu, interp **out,
                ts_error *err) {
  *out = NULL;
  if (!f) return TS_ERR(err, TS_EINVAL, "interpreter: no function given");
  if (n_args != f->n_params)
    return TS_ERR(err, TS_EINVAL,
                  "function '%s' takes %d buffer arguments, "
                  "%d given",
                  f->name, f->n_params, n_args);
  for (int i = 0; i < n_args; i++)
    if (!args || !args[i])
      return TS_ERR(err, TS_EINVAL,
                    "function '%s': no storage given for "
                    "parameter %d ('%s')",
                    f->name, i, f->params[i] ? f->params[i]->name : "?");
  interp *in = calloc(1, sizeof *in);
  if (!in) return TS_ERR(err, TS_ENOMEM, "interpreter: out of memory");
  in->func = f;
  in->err = err;
  in->max_steps = opts ? opts->max_steps : 0;
  in->gpu = gpu;
  for (int d = 0; d < 3; d++) in->launch.grid[d] = in->launch.block[d] = 1;
  in->arena = ts_arena_create();
  in->var_slot = ts_node_map_create();
  in->buf_slot = ts_node_map_create();
  for (int i = 0; i < n_args && !in->failed; i++) {
    void *old;
    int slot = interp_define_buffer(in, f->params[i], 0, &old);
    if (slot >= 0) in->bufs[slot].data = args[i];
  }
  if (!in->failed) in->body = interp_compile_stmt(in, f->body, 0);
  in->proto_bufs = in->bufs;
  in->block = NULL;
  if (!in->failed && (in->own = interp_thread_new(in))) {
    free(in->own->bufs);
    in->own->bufs = in->proto_bufs;
    interp_thread_switch(in, NULL, in->own);
  }
  if (in->failed) return interp_close(in);
  *out = in;
  return TS_OK;
}

int interp_close(interp *in) {
  int code = in->failed ? in->code : TS_OK;
  if (in->own) in->own->bufs = NULL; /* (the prototype table, freed below) */
  interp_thread_free(in->own);
  free(in->proto_bufs);
  free(in->launch.shared);
  ts_node_map_destroy(in->var_slot);
  ts_node_map_destroy(in->buf_slot);
  ts_arena_destroy(in->arena);
  free(in);
  return code;
}

const interp_launch *interp_launch_of(const interp *in) { return &in->launch; }

bool interp_failed(const interp *in) { return in->failed; }

int ts_interp_run(const ts_func *f, void *const *args, int n_args,
                  const ts_interp_options *opts, ts_error *err) {
  interp *in;
  int rc = interp_open(f, args, n_args, opts, NULL, &in, err);
  if (rc) return rc;
  interp_exec(in, in->body);
  return interp_close(in);
}

/* ---- GPU threads ---- */

void interp_thread_free(interp_thread *t) {
  if (!t) return;
  free(t->vals);
  free(t->bufs);
  free(t->scratch_vals);
  free(t->scratch_off);
  free(t);
}

interp_thread *interp_thread_new(interp *in) {
  interp_thread *t = calloc(1, sizeof *t);
  int lanes = in->max_lanes > 0 ? in->max_lanes : 1;
  if (t) {
    t->vals = calloc((size_t)(in->n_vals ? in->n_vals : 1), sizeof *t->vals);
    t->bufs = calloc((size_t)(in->n_bufs ? in->n_bufs : 1), sizeof *t->bufs);
    t->scratch_vals = calloc((size_t)lanes, sizeof *t->scratch_vals);
    t->scratch_off = calloc((size_t)lanes, sizeof *t->scratch_off);
  }
  if (!t || !t->vals || !t->bufs || !t->scratch_vals || !t->scratch_off) {
    interp_thread_free(t);
    FAIL(in, TS_ENOMEM, "out of memory for the GPU threads");
    return NULL;
  }
  return t;
}

void interp_thread_reset(interp *in, interp_thread *t, const int64_t index[6],
                         char *const *shared_data) {
  memcpy(t->bufs, in->proto_bufs, sizeof *t->bufs * (size_t)in->n_bufs);
  for (int i = 0; i < in->n_bufs; i++)
    if (t->bufs[i].shared >= 0)
      t->bufs[i].data = shared_data[t->bufs[i].shared];
  memcpy(t->index, index, sizeof t->index);
  t->block = NULL;
}

void interp_thread_switch(interp *in, interp_thread *from, interp_thread *to) {
  if (from) from->block = in->block;
  in->vals = to->vals;
  in->bufs = to->bufs;
  in->scratch_vals = to->scratch_vals;
  in->scratch_off = to->scratch_off;
  in->launch_index = to->index;
  in->block = to->block;
}

void interp_thread_run(interp *in) { interp_exec(in, in->body); }

void interp_thread_restore(interp *in, interp_thread *from) {
  interp_thread_switch(in, from, in->own);
}
