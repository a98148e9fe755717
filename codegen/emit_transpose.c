/*
 * emit_transpose.c — a tile of a transposing copy as whole-vector loads,
 * a transpose in registers and whole-vector stores.
 *
 * A copy whose destination and source run along different dimensions
 * (a transpose, NCHW <-> NHWC, B of a product with transpose_b packed with
 * the vector axis last) vectorized along one of them has, in every vector
 * statement, one side strided: L scalar loads into a vector (a gather) or
 * L scalar stores out of one (a scatter). When the loop over the other
 * dimension is unrolled by L over the same L x L tile, the lowered code is
 * a run of L statements
 *
 *     Y[ramp(y + k * ay, sy, L)] = X[ramp(x + k * ax, sx, L)],  k = 0..L-1
 *
 * with one of (sy, ax) and one of (sx, ay) equal to 1: either the stores
 * are contiguous and each load is a column of the tile (sy = 1, ax = 1),
 * or the loads are contiguous and each store is a column (sx = 1, ay = 1).
 * Such a run reads and writes exactly the L x L elements of the tile, so it
 * is emitted as L contiguous loads (the tile's rows in the source), a
 * transpose of the L x L registers by log2(L) stages of two-input
 * shuffles, and L contiguous stores: 1.04 -> 0.4 ms for a 1024 x 1024
 * float32 transpose on two AVX2 cores, where the gathers cost a scalar
 * load and an insert per element.
 *
 * The run must copy between two different buffers of one element type
 * (the loads all happen before the stores), with no vector guard active,
 * and L a power of two; anything else is emitted statement by statement.
 *
 * An interleaving copy (B packed for a dot-product intrinsic: R = 4 int8
 * or 2 bfloat16 consecutive k of one column side by side) is the
 * rectangular case: a run of R statements
 *
 *     Y[ramp(y + k, R, L)] = X[ramp(x + k * ax, 1, L)],  k = 0..R-1
 *
 * whose stores together fill the R L elements from y. It is emitted as R
 * contiguous loads, one shuffle interleaving them (lane i from row i % R,
 * element i / R) and one contiguous store, where the statements stored a
 * lane at a time.
 */
#include "codegen/emit_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- integer index expressions as sum(coef * term) + constant ---- */

#define LIN_TERMS 16

typedef struct lin {
  int n;
  const ts_expr *term[LIN_TERMS];
  int64_t coef[LIN_TERMS];
  int64_t c;
  bool ok;
} lin;

bool emit_same_expr(const ts_expr *a, const ts_expr *b) {
  if (a == b) return true;
  if (!a || !b || ts_expr_kind_of(a) != ts_expr_kind_of(b)) return false;
  ts_dtype ta = ts_expr_dtype(a), tb = ts_expr_dtype(b);
  if (ta.code != tb.code || ta.bits != tb.bits || ta.lanes != tb.lanes)
    return false;
  switch (ts_expr_kind_of(a)) {
  case TS_EXPR_VAR: return false; /* vars are shared nodes: a == b above */
  case TS_EXPR_INT: return ts_expr_int_value(a) == ts_expr_int_value(b);
  case TS_EXPR_FLOAT: return ts_expr_float_value(a) == ts_expr_float_value(b);
  case TS_EXPR_LOAD:
  case TS_EXPR_ADDRESS_OF:
    if (ts_expr_buffer(a) != ts_expr_buffer(b)) return false;
    break;
  case TS_EXPR_CALL:
    if (strcmp(ts_expr_call_name(a), ts_expr_call_name(b))) return false;
    break;
  case TS_EXPR_LET: return false;
  default: break;
  }
  int n = ts_expr_n_operands(a);
  if (n != ts_expr_n_operands(b)) return false;
  for (int i = 0; i < n; i++)
    if (!emit_same_expr(ts_expr_operand(a, i), ts_expr_operand(b, i)))
      return false;
  return true;
}

static void lin_term(lin *f, const ts_expr *x, int64_t k) {
  for (int i = 0; i < f->n; i++)
    if (emit_same_expr(f->term[i], x)) {
      f->coef[i] += k;
      return;
    }
  if (f->n == LIN_TERMS) {
    f->ok = false;
    return;
  }
  f->term[f->n] = x;
  f->coef[f->n++] = k;
}

static void lin_add(lin *f, const ts_expr *x, int64_t k) {
  int64_t v;
  if (!f->ok) return;
  if (ts_expr_is_const_int(x, &v)) {
    f->c += k * v;
    return;
  }
  switch (ts_expr_kind_of(x)) {
  case TS_EXPR_ADD:
    lin_add(f, ts_expr_operand(x, 0), k);
    lin_add(f, ts_expr_operand(x, 1), k);
    return;
  case TS_EXPR_SUB:
    lin_add(f, ts_expr_operand(x, 0), k);
    lin_add(f, ts_expr_operand(x, 1), -k);
    return;
  case TS_EXPR_MUL:
    if (ts_expr_is_const_int(ts_expr_operand(x, 1), &v)) {
      lin_add(f, ts_expr_operand(x, 0), k * v);
      return;
    }
    if (ts_expr_is_const_int(ts_expr_operand(x, 0), &v)) {
      lin_add(f, ts_expr_operand(x, 1), k * v);
      return;
    }
    break;
  default: break;
  }
  lin_term(f, x, k);
}

/* Whether a - b is a constant, into *d. */
static bool const_difference(const ts_expr *a, const ts_expr *b, int64_t *d) {
  lin f = {.ok = true};
  lin_add(&f, a, 1);
  lin_add(&f, b, -1);
  if (!f.ok) return false;
  for (int i = 0; i < f.n; i++)
    if (f.coef[i]) return false;
  *d = f.c;
  return true;
}

/* ---- the run ---- */

typedef struct access {
  ts_buffer *buf;
  ts_expr *base;
  int64_t stride;
} access;

/* The ramp of a flattened vector access of `lanes` lanes with a constant
 * stride. */
static bool ramp_access(ts_buffer *b, ts_expr *idx, int lanes, access *out) {
  if (ts_expr_kind_of(idx) != TS_EXPR_RAMP || ts_expr_dtype(idx).lanes != lanes)
    return false;
  out->buf = b;
  out->base = ts_expr_operand(idx, 0);
  return ts_expr_is_const_int(ts_expr_operand(idx, 1), &out->stride);
}

/* Statement k of the run: a store of a plain load, both ramps of L lanes. */
static bool copy_stmt(ts_stmt *s, int lanes, access *dst, access *src) {
  if (ts_stmt_kind_of(s) != TS_STMT_STORE || ts_store_n_indices(s) != 1)
    return false;
  ts_expr *v = ts_store_value(s);
  if (ts_expr_kind_of(v) != TS_EXPR_LOAD || ts_expr_n_operands(v) != 1)
    return false;
  return ramp_access(ts_store_buffer(s), ts_store_index(s, 0), lanes, dst) &&
         ramp_access(ts_expr_buffer(v), ts_expr_operand(v, 0), lanes, src);
}

static bool same_type(ts_dtype a, ts_dtype b) {
  return a.code == b.code && a.bits == b.bits;
}

/* rows[0..L) transposed in place by log2(L) stages of two-input shuffles:
 * stage i swaps bit i of the row index with bit i of the lane index. */
static void transpose_regs(emitter *e, LLVMValueRef *rows, int L) {
  LLVMValueRef lo_mask[64], hi_mask[64];
  for (int bit = 1; bit < L; bit <<= 1) {
    for (int l = 0; l < L; l++) {
      bool set = (l & bit) != 0;
      lo_mask[l] =
          LLVMConstInt(emit_i32t(e), (unsigned)(set ? L + (l ^ bit) : l), 0);
      hi_mask[l] =
          LLVMConstInt(emit_i32t(e), (unsigned)(set ? L + l : (l | bit)), 0);
    }
    LLVMValueRef mlo = LLVMConstVector(lo_mask, (unsigned)L);
    LLVMValueRef mhi = LLVMConstVector(hi_mask, (unsigned)L);
    for (int r = 0; r < L; r++) {
      if (r & bit) continue;
      LLVMValueRef a = rows[r], b = rows[r | bit];
      rows[r] = LLVMBuildShuffleVector(e->b, a, b, mlo, "");
      rows[r | bit] = LLVMBuildShuffleVector(e->b, a, b, mhi, "");
    }
  }
}

static LLVMValueRef vec_ptr(emitter *e, ts_buffer *b, LLVMValueRef base,
                            LLVMValueRef index) {
  return LLVMBuildInBoundsGEP2(e->b, emit_mem_type(e, ts_buffer_dtype(b)), base,
                               &index, 1, "");
}

/* The lanes of the vector store that statement i of seq is (its first
 * statement *first), 0 when it is not one a run can start with. */
static int run_lanes(emitter *e, ts_stmt *seq, int i, ts_stmt **first) {
  *first = ts_seq_item(seq, i);
  if (e->mask || ts_stmt_kind_of(*first) != TS_STMT_STORE ||
      ts_store_n_indices(*first) != 1)
    return 0;
  return ts_expr_dtype(ts_store_index(*first, 0)).lanes;
}

int emit_transpose_run(emitter *e, ts_stmt *seq, int i) {
  int n = ts_seq_n(seq);
  ts_stmt *first;
  int L = run_lanes(e, seq, i, &first);
  if (L < 2 || L > 64 || (L & (L - 1)) || i + L > n) return 0;
  access d0, s0;
  if (!copy_stmt(first, L, &d0, &s0) || d0.buf == s0.buf ||
      !same_type(ts_buffer_dtype(d0.buf), ts_buffer_dtype(s0.buf)) ||
      ts_buffer_dtype(d0.buf).code == TS_DT_BOOL)
    return 0;
  /* contiguous stores of gathered columns, or contiguous loads scattered */
  bool gather = d0.stride == 1 && s0.stride != 1;
  bool scatter = s0.stride == 1 && d0.stride != 1;
  if (!gather && !scatter) return 0;
  int64_t ad = 0, as = 0; /* the per-statement steps of the bases */
  for (int k = 1; k < L; k++) {
    access dk, sk;
    int64_t dd, ds;
    if (!copy_stmt(ts_seq_item(seq, i + k), L, &dk, &sk) || dk.buf != d0.buf ||
        sk.buf != s0.buf || dk.stride != d0.stride || sk.stride != s0.stride ||
        !const_difference(dk.base, d0.base, &dd) ||
        !const_difference(sk.base, s0.base, &ds))
      return 0;
    if (k == 1) {
      ad = dd;
      as = ds;
    }
    if (dd != k * ad || ds != k * as) return 0;
  }
  /* gather: element (k, l) is X[x + k + l*sx] -> rows l of the source;
   * scatter: element (k, l) goes to Y[y + k + l*sy] -> rows l of the
   * destination */
  if ((gather && as != 1) || (scatter && ad != 1)) return 0;
  /* in the scatter form the stores go column by column: they must not
   * overlap, or their order would matter */
  if (scatter && (d0.stride < L && d0.stride > -L)) return 0;
  LLVMValueRef sdata = emit_buffer_data(e, s0.buf),
               ddata = emit_buffer_data(e, d0.buf);
  if (!sdata || !ddata) return 0;
  ts_dtype et = ts_buffer_dtype(s0.buf);
  LLVMTypeRef vt = LLVMVectorType(emit_mem_type(e, et), (unsigned)L);
  unsigned align = (unsigned)ts_dtype_elem_bytes(et);
  LLVMValueRef rows[64];
  LLVMValueRef sb = emit_expr(e, s0.base), db = emit_expr(e, d0.base);
  LLVMTypeRef it = LLVMTypeOf(sb);
  /* the source rows: stride sx (gather) or the statements' step (scatter) */
  int64_t srow = gather ? s0.stride : as;
  for (int r = 0; r < L; r++) {
    LLVMValueRef idx = LLVMBuildAdd(
        e->b, sb, LLVMConstInt(it, (unsigned long long)(r * srow), 1), "");
    LLVMValueRef p = vec_ptr(e, s0.buf, sdata, idx);
    rows[r] = emit_load_vec(e, vt, p, align);
  }
  transpose_regs(e, rows, L);
  LLVMTypeRef dt = LLVMTypeOf(db);
  int64_t drow = gather ? ad : d0.stride;
  for (int r = 0; r < L; r++) {
    LLVMValueRef idx = LLVMBuildAdd(
        e->b, db, LLVMConstInt(dt, (unsigned long long)(r * drow), 1), "");
    LLVMValueRef p = vec_ptr(e, d0.buf, ddata, idx);
    LLVMValueRef st = LLVMBuildStore(e->b, rows[r], p);
    LLVMSetAlignment(st, align);
  }
  return L;
}

int emit_interleave_run(emitter *e, ts_stmt *seq, int i) {
  int n = ts_seq_n(seq);
  ts_stmt *first;
  int L = run_lanes(e, seq, i, &first);
  access d0, s0;
  if (L < 2 || !copy_stmt(first, L, &d0, &s0) || d0.buf == s0.buf ||
      !same_type(ts_buffer_dtype(d0.buf), ts_buffer_dtype(s0.buf)) ||
      ts_buffer_dtype(d0.buf).code == TS_DT_BOOL || s0.stride != 1)
    return 0;
  int64_t R = d0.stride;
  if (R < 2 || R > 8 || (R & (R - 1)) || i + R > n || R * L > 256) return 0;
  int64_t as = 0; /* the source rows' step */
  for (int k = 1; k < R; k++) {
    access dk, sk;
    int64_t dd, ds;
    if (!copy_stmt(ts_seq_item(seq, i + k), L, &dk, &sk) || dk.buf != d0.buf ||
        sk.buf != s0.buf || dk.stride != R || sk.stride != 1 ||
        !const_difference(dk.base, d0.base, &dd) ||
        !const_difference(sk.base, s0.base, &ds) || dd != k)
      return 0;
    if (k == 1) as = ds;
    if (ds != k * as) return 0;
  }
  LLVMValueRef sdata = emit_buffer_data(e, s0.buf),
               ddata = emit_buffer_data(e, d0.buf);
  if (!sdata || !ddata) return 0;
  ts_dtype et = ts_buffer_dtype(s0.buf);
  LLVMTypeRef elt = emit_mem_type(e, et);
  unsigned align = (unsigned)ts_dtype_elem_bytes(et);
  LLVMValueRef rows[8];
  LLVMValueRef sb = emit_expr(e, s0.base), db = emit_expr(e, d0.base);
  LLVMTypeRef it = LLVMTypeOf(sb);
  for (int r = 0; r < R; r++) {
    LLVMValueRef idx = LLVMBuildAdd(
        e->b, sb, LLVMConstInt(it, (unsigned long long)(r * as), 1), "");
    rows[r] = emit_load_vec(e, LLVMVectorType(elt, (unsigned)L),
                            vec_ptr(e, s0.buf, sdata, idx), align);
  }
  /* the rows concatenated pairwise into one vector of R L lanes */
  LLVMValueRef mask[256];
  for (int w = L; w < R * L; w *= 2) {
    for (int l = 0; l < 2 * w; l++)
      mask[l] = LLVMConstInt(emit_i32t(e), (unsigned)l, 0);
    LLVMValueRef m = LLVMConstVector(mask, (unsigned)(2 * w));
    for (int r = 0; r < R * L / w; r += 2)
      rows[r / 2] = LLVMBuildShuffleVector(e->b, rows[r], rows[r + 1], m, "");
  }
  for (int l = 0; l < R * L; l++)
    mask[l] = LLVMConstInt(emit_i32t(e), (unsigned)((l % R) * L + l / R), 0);
  LLVMValueRef all = rows[0];
  LLVMValueRef v =
      LLVMBuildShuffleVector(e->b, all, LLVMGetUndef(LLVMTypeOf(all)),
                             LLVMConstVector(mask, (unsigned)(R * L)), "");
  LLVMValueRef st = LLVMBuildStore(e->b, v, vec_ptr(e, d0.buf, ddata, db));
  LLVMSetAlignment(st, align);
  return (int)R;
}
