/*
 * shift.c — shift_int8: the signed int8 operand of an integer
 * multiply-accumulate rewritten as uint8 with the bias compensated in the
 * init.
 *
 * A block C[s] = C[s] + int32(A[fa]) * int32(B[fb]) with A int8, B an 8-bit
 * integer and C int32 (init C[s] = 0) becomes
 *
 *   A_u8[v] = uint8(int32(A[v]) + 128)                 (a block of its own)
 *   B_sum[t] = B_sum[t] + int32(B[fb])   over every reduce iter of the block
 *   C[s] = -128 * B_sum[t]                             (the new init)
 *   C[s] = C[s] + int32(A_u8[fa]) * int32(B[fb])       (the new update)
 *
 * where t are the spatial iters B's index uses. The sum over the reduce
 * iters of (A + 128) B is the sum of A B plus 128 times the sum of B, so
 * the result is the same, exactly: every step is int32 arithmetic, which
 * wraps, and the identity holds modulo 2^32. Reduce iters B does not index
 * are summed over too (they repeat B's terms as often as the product
 * does). What it buys: the update is an unsigned-times-signed byte product
 * (VNNI's vpdpbusd) with nothing to subtract in the reduction loop.
 */
#include "schedule/internal.h"

#include <stdio.h>
#include <string.h>

/* The one store of a block body (a sequence of one included), or NULL. */
static ts_stmt *one_store(ts_stmt *s) {
  if (s && ts_stmt_kind_of(s) == TS_STMT_SEQ && ts_seq_n(s) == 1)
    s = ts_seq_item(s, 0);
  return s && ts_stmt_kind_of(s) == TS_STMT_STORE ? s : NULL;
}

/* A load under a cast to int32 (the cast is required: the product is
 * taken in int32), or NULL. */
static ts_expr *int32_load(ts_expr *e) {
  if (!e || ts_expr_kind_of(e) != TS_EXPR_CAST ||
      !ts_dtype_eq(ts_expr_dtype(e), TS_INT32))
    return NULL;
  ts_expr *x = ts_expr_operand(e, 0);
  return x && ts_expr_kind_of(x) == TS_EXPR_LOAD ? x : NULL;
}

static bool same_indices(const ts_stmt *x, const ts_stmt *y) {
  if (ts_store_buffer(x) != ts_store_buffer(y) ||
      ts_store_n_indices(x) != ts_store_n_indices(y))
    return false;
  for (int d = 0; d < ts_store_n_indices(x); d++)
    if (ts_store_index(x, d) != ts_store_index(y, d)) return false;
  return true;
}

/* Where a new root-level nest reading `x` goes in scope sc: after the last
 * top-level item that writes x and before the item holding block r. */
static int place_after_writer(ts_sched *s, ts_stmt *sc, ts_stmt *r,
                              const ts_buffer *x, int *pos) {
  stmt_vec all = {0};
  tree_realizes(ts_block_body(ts_realize_block(sc)), false, &all);
  int b_item = tree_index_in(sc, r), rc = TS_OK;
  if (b_item < 0) rc = fail_oom(s, "shift_int8");
  for (int i = 0; i < all.n && !rc; i++) {
    if (!block_writes(ts_realize_block(all.v[i]), x)) continue;
    int it = tree_index_in(sc, all.v[i]);
    if (it == b_item && all.v[i] != r)
      rc = FAIL(s, TS_ESCHEDULE,
                "shift_int8: producer block '%s' of '%s' is in the same loop "
                "nest as block '%s'",
                ts_block_name(ts_realize_block(all.v[i])), ts_buffer_name(x),
                ts_block_name(ts_realize_block(r)));
    else if (it < b_item && it + 1 > *pos)
      *pos = it + 1;
  }
  sv_free(&all);
  return rc;
}

/* A nest of serial loops over `vars` (extents `ext`) around block b's
 * realize with those vars as values, outermost first. */
static ts_stmt *nest_over(ts_arena *a, ts_block *b, ts_expr **loop_vars,
                          ts_expr **values, int nv, const int64_t *ext,
                          const int *order) {
  ts_stmt *body = ts_block_realize(a, b, values, nv, NULL);
  for (int d = nv - 1; d >= 0; d--)
    body = ts_for(a, loop_vars[order[d]], ts_index(a, 0),
                  ts_index(a, ext[order[d]]), TS_FOR_SERIAL, NULL, body);
  return body;
}

/* The block writing A_u8 = uint8(int32(A) + 128) over A's whole shape. */
static ts_stmt *shift_nest(ts_arena *a, const char *name, ts_buffer *dst,
                           ts_buffer *src) {
  int nd = ts_buffer_ndim(dst);
  ts_block *b = ts_block_new(a, name);
  if (!b) return NULL;
  ts_expr *iters[TS_MAX_DIMS], *lv[TS_MAX_DIMS];
  int64_t ext[TS_MAX_DIMS];
  int order[TS_MAX_DIMS];
  for (int d = 0; d < nd; d++) {
    ext[d] = ts_buffer_dim(dst, d);
    order[d] = d;
    iters[d] = ts_var(a, ts_arena_printf(a, "v%d", d), TS_INDEX);
    lv[d] = ts_var(a, ts_arena_printf(a, "ax%d", d), TS_INDEX);
    if (!iters[d] || !lv[d] ||
        ts_block_add_iter_var(a, b, iters[d],
                              (ts_range){ts_index(a, 0), ts_index(a, ext[d])},
                              TS_ITER_SPATIAL) < 0)
      return NULL;
  }
  ts_expr *v =
      ts_cast(a, TS_UINT8,
              ts_add(a, ts_cast(a, TS_INT32, ts_load(a, src, iters, nd)),
                     ts_int(a, TS_INT32, 128)));
  ts_stmt *st = ts_store(a, dst, iters, nd, v);
  if (!st || ts_arena_failed(a)) return NULL;
  ts_block_set_body(b, st);
  ts_block_infer_regions(a, b);
  return nest_over(a, b, lv, lv, nd, ext, order);
}

int apply_shift_int8(ts_sched *s, inst *in, rv_list *out) {
  ts_stmt *r;
  const char *bufname;
  int rc = check_arity(s, in, 1, 1, 1);
  if (rc || (rc = in_block(s, in, 0, &r)) ||
      (rc = attr_str(s, in, 0, &bufname)))
    return rc;
  ts_block *b = ts_realize_block(r);
  const char *bn = ts_block_name(b);
  ts_stmt *sc = tree_scope(s->func, r);
  if (!sc)
    return FAIL(s, TS_ESCHEDULE, "shift_int8: block '%s' is the root block",
                bn);
  if (tree_scope(s->func, sc))
    return FAIL(s, TS_ESCHEDULE,
                "shift_int8: block '%s' is inside block '%s' (shift_int8 "
                "needs a block directly under the root)",
                bn, ts_block_name(ts_realize_block(sc)));
  ts_stmt *st = one_store(ts_block_body(b));
  ts_stmt *init = one_store(ts_block_init(b));
  int64_t zero = -1;
  if (!ts_block_init(b))
    return FAIL(s, TS_ESCHEDULE,
                "shift_int8: block '%s' has no init (not a reduction, or its "
                "init is decomposed already: apply shift_int8 before "
                "decompose_reduction)",
                bn);
  if (!init || !st || !same_indices(init, st))
    return FAIL(s, TS_ESCHEDULE,
                "shift_int8: block '%s' is not one init store and one update "
                "store of the same element",
                bn);
  if (!ts_expr_is_const_int(ts_store_value(init), &zero) || zero != 0)
    return FAIL(s, TS_ESCHEDULE,
                "shift_int8: the init of block '%s' is not zero (shifted "
                "already?)",
                bn);
  ts_buffer *c = ts_store_buffer(st);
  ts_expr *v = ts_store_value(st);
  ts_expr *mul = NULL;
  if (ts_expr_kind_of(v) == TS_EXPR_ADD)
    for (int k = 0; k < 2 && !mul; k++) {
      ts_expr *acc = ts_expr_operand(v, k), *m = ts_expr_operand(v, 1 - k);
      if (ts_expr_kind_of(acc) == TS_EXPR_LOAD && ts_expr_buffer(acc) == c &&
          ts_expr_kind_of(m) == TS_EXPR_MUL)
        mul = m;
    }
  ts_expr *x = mul ? int32_load(ts_expr_operand(mul, 0)) : NULL;
  ts_expr *y = mul ? int32_load(ts_expr_operand(mul, 1)) : NULL;
  if (!x || !y || !ts_dtype_eq(ts_buffer_dtype(c), TS_INT32))
    return FAIL(s, TS_ESCHEDULE,
                "shift_int8: the update of block '%s' is not C = C + "
                "int32(A[...]) * int32(B[...]) into an int32 C",
                bn);
  bool x_is = !strcmp(ts_buffer_name(ts_expr_buffer(x)), bufname);
  bool y_is = !strcmp(ts_buffer_name(ts_expr_buffer(y)), bufname);
  if (x_is == y_is)
    return FAIL(s, TS_ESCHEDULE,
                x_is ? "shift_int8: both operands of block '%s' are '%s'"
                     : "shift_int8: block '%s' multiplies no buffer '%s'",
                bn, bufname);
  ts_expr *la = x_is ? x : y, *lb = x_is ? y : x;
  ts_buffer *abuf = ts_expr_buffer(la), *bbuf = ts_expr_buffer(lb);
  if (!ts_dtype_eq(ts_buffer_dtype(abuf), TS_INT8))
    return FAIL(s, TS_ESCHEDULE,
                "shift_int8: operand '%s' of block '%s' is not int8", bufname,
                bn);
  ts_dtype bt = ts_buffer_dtype(bbuf);
  if (!ts_dtype_eq(bt, TS_INT8) && !ts_dtype_eq(bt, TS_UINT8))
    return FAIL(s, TS_ESCHEDULE,
                "shift_int8: the other operand '%s' of block '%s' is not int8 "
                "or uint8",
                ts_buffer_name(bbuf), bn);
  /* the iters: the spatial ones B indexes (the sums' dimensions) and every
   * reduce iter (summed over) */
  int n = ts_block_n_iters(b), n_sp = 0, n_red = 0;
  int sp[TS_MAX_DIMS], red[TS_MAX_DIMS];
  int64_t mins[64], exts[64];
  if (n > 64)
    return FAIL(s, TS_ESCHEDULE, "shift_int8: block '%s' has too many iters",
                bn);
  for (int k = 0; k < n; k++) {
    ts_iter_kind kind = ts_block_iter_kind(b, k);
    if (kind == TS_ITER_OPAQUE)
      return FAIL(s, TS_ESCHEDULE, "shift_int8: block '%s' has an opaque iter",
                  bn);
    if (!iter_const(b, k, &mins[k], &exts[k]))
      return FAIL(s, TS_ESCHEDULE,
                  "shift_int8: iter %d of block '%s' has no constant domain", k,
                  bn);
    bool in_b = false;
    for (int d = 0; d < ts_expr_n_operands(lb); d++)
      in_b |= uses_var(ts_expr_operand(lb, d), ts_block_iter_var(b, k));
    if (kind == TS_ITER_REDUCE) {
      if (n_red == TS_MAX_DIMS)
        return FAIL(s, TS_ESCHEDULE,
                    "shift_int8: block '%s' has more than %d reduce iters", bn,
                    TS_MAX_DIMS);
      red[n_red++] = k;
    } else if (in_b) {
      if (n_sp == TS_MAX_DIMS)
        return FAIL(s, TS_ESCHEDULE,
                    "shift_int8: operand '%s' of block '%s' is indexed by more "
                    "than %d spatial iters",
                    ts_buffer_name(bbuf), bn, TS_MAX_DIMS);
      sp[n_sp++] = k;
    }
  }
  if (!n_red)
    return FAIL(s, TS_ESCHEDULE, "shift_int8: block '%s' has no reduce iter",
                bn);
  int pos = 0;
  if ((rc = place_after_writer(s, sc, r, abuf, &pos)) ||
      (rc = place_after_writer(s, sc, r, bbuf, &pos)))
    return rc;

  ts_arena *a = ts_func_arena(s->func);
  const ts_func *f = s->func;
  /* A_u8 and the block writing it */
  char *ua = ts_arena_printf(a, "%s_u8", ts_buffer_name(abuf));
  char *ua_buf = ua ? unique_buffer_name(f, ua) : NULL;
  char *ua_blk = ua ? unique_block_name(f, ua) : NULL;
  ts_buffer *au =
      ua_buf ? ts_buffer_new(a, ua_buf, TS_UINT8, ts_buffer_shape(abuf),
                             ts_buffer_ndim(abuf))
             : NULL;
  ts_stmt *shift = au && ua_blk ? shift_nest(a, ua_blk, au, abuf) : NULL;
  /* B_sum and the block summing B */
  char *sb = ts_arena_printf(a, "%s_sum", ts_buffer_name(bbuf));
  char *sb_buf = sb ? unique_buffer_name(f, sb) : NULL;
  char *sb_blk = sb ? unique_block_name(f, sb) : NULL;
  int64_t shape[TS_MAX_DIMS] = {1};
  for (int i = 0; i < n_sp; i++) shape[i] = exts[sp[i]];
  ts_buffer *sum =
      sb_buf ? ts_buffer_new(a, sb_buf, TS_INT32, shape, n_sp ? n_sp : 1)
             : NULL;
  ts_block *sblk = sb_blk ? ts_block_new(a, sb_blk) : NULL;
  if (!shift || !sum || !sblk) return fail_oom(s, "shift_int8");
  /* the sum block's iters: B's spatial iters, then the reduce iters */
  int nv = n_sp + n_red;
  ts_expr *iv[2 * TS_MAX_DIMS], *lv[2 * TS_MAX_DIMS], *vals[2 * TS_MAX_DIMS];
  int64_t ext[2 * TS_MAX_DIMS];
  int order[2 * TS_MAX_DIMS];
  ts_node_map *m = ts_node_map_create();
  for (int i = 0; i < nv; i++) {
    int k = i < n_sp ? sp[i] : red[i - n_sp];
    ts_expr *bv = ts_block_iter_var(b, k);
    iv[i] = ts_var(a, ts_arena_printf(a, "v%d", i), TS_INDEX);
    lv[i] = ts_var(a, ts_arena_printf(a, "ax%d", i), TS_INDEX);
    ext[i] = exts[k];
    vals[i] = lv[i];
    if (!iv[i] || !lv[i] ||
        ts_block_add_iter_var(
            a, sblk, iv[i], (ts_range){ts_index(a, 0), ts_index(a, exts[k])},
            i < n_sp ? TS_ITER_SPATIAL : TS_ITER_REDUCE) < 0) {
      ts_node_map_destroy(m);
      return fail_oom(s, "shift_int8");
    }
    /* the original iter is the new one (from 0) plus its min */
    ts_node_map_put(m, bv, ts_add(a, iv[i], ts_index(a, mins[k])));
  }
  /* reduce loops outside, spatial inside, and innermost whichever iter
   * indexes B's last dimension (contiguous): a matmul's columns, a dense
   * layer's K */
  int inner = -1;
  ts_expr *blast = ts_expr_operand(lb, ts_expr_n_operands(lb) - 1);
  for (int i = 0; i < nv && inner < 0; i++) {
    int k = i < n_sp ? sp[i] : red[i - n_sp];
    if (uses_var(blast, ts_block_iter_var(b, k))) inner = i;
  }
  int no = 0;
  for (int i = 0; i < n_red; i++)
    if (n_sp + i != inner) order[no++] = n_sp + i;
  for (int i = 0; i < n_sp; i++)
    if (i != inner) order[no++] = i;
  if (inner >= 0) order[no++] = inner;
  ts_expr *bidx[TS_MAX_DIMS + 1];
  int nbi = ts_expr_n_operands(lb);
  for (int d = 0; d < nbi && d <= TS_MAX_DIMS; d++)
    bidx[d] = ts_expr_substitute(a, ts_expr_operand(lb, d), m, NULL);
  ts_node_map_destroy(m);
  ts_expr *zero_i[1] = {ts_index(a, 0)};
  ts_expr *const *sidx = n_sp ? iv : zero_i;
  int nsi = n_sp ? n_sp : 1;
  ts_stmt *sinit = ts_store(a, sum, sidx, nsi, ts_int(a, TS_INT32, 0));
  ts_stmt *supd =
      ts_store(a, sum, sidx, nsi,
               ts_add(a, ts_load(a, sum, sidx, nsi),
                      ts_cast(a, TS_INT32, ts_load(a, bbuf, bidx, nbi))));
  if (!sinit || !supd || ts_arena_failed(a)) return fail_oom(s, "shift_int8");
  ts_block_set_init(sblk, sinit);
  ts_block_set_body(sblk, supd);
  ts_block_infer_regions(a, sblk);
  ts_stmt *sum_nest = nest_over(a, sblk, lv, vals, nv, ext, order);
  /* the block's new init and update */
  ts_expr *tidx[TS_MAX_DIMS];
  for (int i = 0; i < n_sp; i++)
    tidx[i] = ts_sub(a, ts_block_iter_var(b, sp[i]), ts_index(a, mins[sp[i]]));
  ts_expr *const *tix = n_sp ? tidx : zero_i;
  ts_expr *cidx[TS_MAX_DIMS + 1];
  int nci = ts_store_n_indices(init);
  for (int d = 0; d < nci && d <= TS_MAX_DIMS; d++)
    cidx[d] = ts_store_index(init, d);
  ts_stmt *ninit =
      ts_store(a, c, cidx, nci,
               ts_mul(a, ts_int(a, TS_INT32, -128), ts_load(a, sum, tix, nsi)));
  ts_node_map *bm = ts_node_map_create();
  ts_node_map_put(bm, abuf, au);
  ts_expr *nla = ts_expr_substitute(a, la, NULL, bm);
  ts_node_map_destroy(bm);
  ts_expr *ncast = nla ? ts_cast(a, TS_INT32, nla) : NULL;
  ts_expr *bcast = x_is ? ts_expr_operand(mul, 1) : ts_expr_operand(mul, 0);
  ts_expr *nmul =
      ncast ? (x_is ? ts_mul(a, ncast, bcast) : ts_mul(a, bcast, ncast)) : NULL;
  ts_expr *acc = ts_expr_operand(v, ts_expr_operand(v, 1) == mul ? 0 : 1);
  ts_expr *nval = nmul ? ts_add(a, acc, nmul) : NULL;
  ts_expr *sidx2[TS_MAX_DIMS + 1];
  int nsti = ts_store_n_indices(st);
  for (int d = 0; d < nsti && d <= TS_MAX_DIMS; d++)
    sidx2[d] = ts_store_index(st, d);
  ts_stmt *nupd = nval ? ts_store(a, c, sidx2, nsti, nval) : NULL;
  if (!sum_nest || !ninit || !nupd || ts_arena_failed(a))
    return fail_oom(s, "shift_int8");
  /* linked in: nothing above can fail half-way */
  if (!tree_insert(s->func, sc, pos, sum_nest) ||
      !tree_insert(s->func, sc, pos, shift))
    return fail_oom(s, "shift_int8");
  ts_block_set_init(b, ninit);
  ts_block_set_body(b, nupd);
  ts_block_infer_regions(a, b);
  ts_block_add_alloc(a, ts_realize_block(sc), au);
  ts_block_add_alloc(a, ts_realize_block(sc), sum);
  rv_new_block(s, ua_blk, out);
  rv_new_block(s, sb_blk, out);
  sched_refresh(s);
  return TS_OK;
}
