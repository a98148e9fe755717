/*
 * test_illegal.c — illegal schedule requests: each case sets up a schedule
 * (legal steps), snapshots it, makes one illegal request and checks that it
 * fails with the expected code and a message naming the problem, and that
 * the function, the trace and the RNG are exactly as before.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "util.h"

static const char *const two_stage =
    "func two(A: float32[8, 6], C: float32[8, 6]) {\n"
    "  block root() {\n"
    "    alloc B: float32[8, 6]\n"
    "    for i in range(8) {\n"
    "      for j in range(6) {\n"
    "        block B(vi: spatial(8) = i, vj: spatial(6) = j) {\n"
    "          B[vi, vj] = A[vi, vj] * float32(2)\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "    for i in range(8) {\n"
    "      for j in range(6) {\n"
    "        block C(vi: spatial(8) = i, vj: spatial(6) = j) {\n"
    "          C[vi, vj] = B[vi, vj] + B[vi, 0]\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

/* A sum whose loop runs the reduction backwards. */
static const char *const reversed_sum =
    "func rev(A: float32[8], C: float32[1]) {\n"
    "  block root() {\n"
    "    for k in range(8) {\n"
    "      block C(vk: reduce(8) = 7 - k) {\n"
    "        init {\n"
    "          C[0] = float32(0)\n"
    "        }\n"
    "        C[0] = C[0] + A[vk]\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

/* A sum whose block runs from k = 1 on (a hand-written predicate over the
 * reduction loop): the init cannot move before the loop. */
static const char *const sum_from_one =
    "func from1(A: float32[4, 8], C: float32[4]) {\n"
    "  block root() {\n"
    "    for i in range(4) {\n"
    "      for k in range(8) {\n"
    "        block C(vi: spatial(4) = i, vk: reduce(8) = k) where k >= 1 {\n"
    "          init {\n"
    "            C[vi] = float32(0)\n"
    "          }\n"
    "          C[vi] = C[vi] + A[vi, vk]\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

typedef struct snapshot {
  char *text;
  int n_insts;
  ts_rng rng;
} snapshot;

static snapshot snap;
static char replay_msg[1024]; /* the message of a failed replay */

static void take(ts_sched *s) {
  free(snap.text);
  snap.text = util_print(s);
  snap.n_insts = ts_trace_n_insts(ts_sched_trace(s));
  snap.rng = *ts_sched_rng(s);
}

#define OK(x)                                                                  \
  do {                                                                         \
    int rc_ = (x);                                                             \
    if (rc_) fprintf(stderr, "setup %s: %s\n", #x, ts_sched_errmsg(s));        \
    assert_int_equal(rc_, TS_OK);                                              \
  } while (0)

static int block_loops(ts_sched *s, const char *name, ts_rv *b, ts_rv *l) {
  int n = 0;
  OK(ts_sched_get_block(s, name, b));
  OK(ts_sched_get_loops(s, *b, l, 16, &n));
  return n;
}

typedef struct illegal_case {
  const char *workload; /* a spec, or "two", "rev", "from1": a TIR above */
  int code;
  const char *needle; /* expected in the message */
} illegal_case;

static const illegal_case cases[] = {
    /* 0 */ {"matmul M=8 N=8 K=8", TS_EINVAL, "is not a loop handle"},
    {"matmul M=8 N=8 K=8", TS_ESCHEDULE, "was removed by split"},
    {"matmul M=8 N=8 K=8", TS_ESCHEDULE, "more than one factor is inferred"},
    {"matmul M=8 N=8 K=8", TS_ESCHEDULE, "is not positive"},
    {"matmul M=8 N=8 K=8", TS_ESCHEDULE, "less than its extent 8"},
    /* 5 */
    {"matmul M=8 N=8 K=8", TS_ESCHEDULE, "only serial loops can be split"},
    {"matmul M=8 N=8 K=8", TS_ESCHEDULE, "is not the only statement directly"},
    {"matmul M=8 N=8 K=8", TS_ESCHEDULE, "is given twice"},
    {"matmul M=8 N=8 K=8", TS_ESCHEDULE, "only serial loops can be fused"},
    {"matmul M=16 N=16 K=16", TS_ESCHEDULE, "across a block boundary"},
    /* 10 */ {"dense M=4 N=8 K=8", TS_ESCHEDULE, "are not in one loop nest"},
    {"matmul M=8 N=8 K=8", TS_ESCHEDULE, "reorder: loop 'i' is given twice"},
    {"dense M=4 N=8 K=8", TS_ESCHEDULE, "holds more than one statement"},
    {"matmul M=8 N=8 K=8", TS_ESCHEDULE,
     "vectorize: loop 'k' carries a reduction in block 'C'"},
    {"matmul M=8 N=8 K=8", TS_ESCHEDULE,
     "parallel: loop 'k' carries a reduction in block 'C'"},
    /* 15 */
    {"softmax N=4 D=8", TS_ESCHEDULE, "is recomputed in every iteration"},
    {"matmul M=8 N=8 K=8", TS_ESCHEDULE, "is already parallel"},
    {"matmul M=8 N=8 K=8", TS_EINVAL, "unknown thread axis 'warpIdx.x'"},
    {"matmul M=8 N=8 K=8", TS_ENOTFOUND, "has no annotation 'nope'"},
    {"matmul M=8 N=8 K=8", TS_EINVAL, "the key is empty"},
    /* 20 */
    {"layer_norm N=3 D=8", TS_ESCHEDULE, "does not contain consumer block 'Y'"},
    {"dense M=4 N=8 K=8", TS_ESCHEDULE, "is a loop of block 'dense' itself"},
    {"matmul M=8 N=8 K=8", TS_ESCHEDULE, "is the root block"},
    {"dense M=4 N=8 K=8", TS_ESCHEDULE, "has no consumer under loop"},
    {"dense M=4 N=8 K=8", TS_ESCHEDULE,
     "reverse_compute_at: block 'dense' is a reduction block"},
    /* 25 */
    {"dense M=4 N=8 K=8", TS_ESCHEDULE,
     "carries the reduction of producer block 'dense'"},
    {"layer_norm N=3 D=8", TS_ESCHEDULE, "is neither under nor before loop"},
    {"matmul M=8 N=8 K=8", TS_ESCHEDULE,
     "compute_inline: block 'C' is a reduction block"},
    {"two", TS_ESCHEDULE, "writes 'C', a parameter of the function"},
    {"matmul M=8 N=8 K=8", TS_ESCHEDULE,
     "compute_inline: block 'root' is the root"},
    /* 30 */
    {"dense M=4 N=8 K=8", TS_ESCHEDULE,
     "producer block 'dense' of block 'Y' is a reduction block"},
    {"two", TS_ESCHEDULE, "does not read 'B' at exactly its iter vars"},
    {"matmul M=8 N=8 K=8", TS_ENOTFOUND, "does not read a buffer named 'X'"},
    {"matmul M=8 N=8 K=8", TS_ESCHEDULE, "also writes 'C' (use cache_write)"},
    {"matmul M=8 N=8 K=8", TS_EINVAL, "unknown storage scope 'texture'"},
    /* 35 */
    {"matmul M=8 N=8 K=8", TS_ENOTFOUND, "does not write a buffer named 'A'"},
    {"matmul M=8 N=8 K=8", TS_ESCHEDULE, "'C' is a parameter of the function"},
    {"softmax N=4 D=8", TS_ESCHEDULE, "axis 1 of buffer 'exp' is not in 0..0"},
    {"softmax N=4 D=8", TS_ESCHEDULE, "need factor >= 1 and 0 <= offset"},
    {"matmul M=8 N=8 K=8", TS_ESCHEDULE,
     "transform_layout: buffer 'B' is a parameter"},
    /* 40 */ {"softmax N=4 D=8", TS_ESCHEDULE, "is not injective"},
    {"softmax N=4 D=8", TS_EINVAL, "index map"},
    {"softmax N=4 D=8", TS_EINVAL, "has 1 inputs; the buffer has 2"},
    {"elementwise op=relu shape=4x4", TS_ESCHEDULE, "has no init"},
    {"dense M=4 N=8 K=8", TS_ESCHEDULE, "is not above block 'dense'"},
    /* 45 */
    {"matmul M=8 N=8 K=8", TS_ESCHEDULE,
     "loop 'k' above loop 'i' is a reduction loop of block 'C'"},
    {"matmul M=8 N=8 K=8", TS_ESCHEDULE, "is not bound to a reduce iter"},
    {"elementwise op=relu shape=4x4", TS_ESCHEDULE, "is not a reduction"},
    {"reduce op=sum N=4 D=8", TS_ESCHEDULE, "factor_axis 3 is not in 0..1"},
    {"dense M=4 N=8 K=8", TS_ESCHEDULE, "holds 2 blocks"},
    /* 50 */ {"matmul M=8 N=8 K=8", TS_ESCHEDULE, "cannot divide the binding"},
    {"matmul M=16 N=16 K=32 dtype=bfloat16", TS_ESCHEDULE,
     "does not match 'amx_bf16_16x16x32'"},
    {"matmul M=16 N=16 K=32", TS_ENOTFOUND, "no tensor intrinsic named 'amx'"},
    {"matmul M=16 N=16 K=16 dtype=bfloat16", TS_ESCHEDULE,
     "the loop extents (16, 16, 16) do not match the intrinsic's (16, 16, 32)"},
    {"matmul M=16 N=16 K=32 dtype=bfloat16", TS_ESCHEDULE,
     "has an init statement (decompose_reduction first)"},
    /* 55 */ {"matmul M=8 N=8 K=8", TS_EINVAL, "n = 0 is not in 1..16"},
    {"matmul M=8 N=8 K=8", TS_EINVAL, "the probabilities sum to 0"},
    {"matmul M=8 N=8 K=8", TS_ENOTFOUND, "no block named 'D'"},
    {"matmul M=8 N=8 K=8", TS_EINVAL, "is not a block handle"},
    {"two", TS_ESCHEDULE, "block 'B' (b0) no longer exists"},
    /* 60 */ {"matmul M=8 N=8 K=8", TS_ESCHEDULE, "was removed by fuse"},
    {"matmul M=8 N=8 K=8", TS_ESCHEDULE, "sample_perfect_tile: the decision"},
    {"matmul M=4 N=16 K=4 dtype=bfloat16", TS_ESCHEDULE,
     "has stride 4 in dimension 0 where the intrinsic needs 2"},
    {"dense M=4 N=8 K=8", TS_ESCHEDULE, "is already under loop"},
    /* 64 */
    {"layer_norm N=3 D=8", TS_ESCHEDULE,
     "loop 'i_0' runs over [0, 2) and loop 'i' over [0, 3) (the ranges must "
     "be equal)"},
    /* 65 */
    {"layer_norm N=3 D=8", TS_ESCHEDULE,
     "block 'mean' under loop 'i' reads buffer 'x_sum' that block 'x_sum' "
     "writes under loop 'i'"},
    {"softmax N=4 D=8", TS_ESCHEDULE,
     "block 'expsum' under loop 'i' reads buffer 'exp' that block 'exp' "
     "writes between the loops"},
    {"layer_norm N=3 D=8", TS_ESCHEDULE, "loops 'i' and 'k' are not siblings"},
    {"layer_norm N=3 D=8", TS_ESCHEDULE,
     "loop 'i' is parallel and loop 'i' serial (the kinds must be equal)"},
    {"layer_norm N=3 D=8", TS_ESCHEDULE,
     "comes before loop 'i' (give the loops in program order)"},
    /* 70 */
    {"layer_norm N=3 D=8", TS_ESCHEDULE,
     "fuse_siblings: loop 'i' is given twice"},
    /* a guarded (imperfect) split's predicate: rfactor over the only
     * reduction loop, and over a loop whose sibling reductions' first
     * iteration the predicate does not cover */
    {"reduce op=max N=3 D=37", TS_ESCHEDULE,
     "is its only reduction loop, so the elements the predicate skips"},
    {"reduce op=max N=3 D=37", TS_ESCHEDULE,
     "does not hold at the first iteration of its other reduction loops"},
    /* 73: the write-back block would span the whole buffer inside one
     * instance of the outer block */
    {"matmul M=8 N=8 K=8", TS_ESCHEDULE,
     "rfactor: block 'C' is inside block 'C_o' (rfactor needs a block "
     "directly under the root)"},
    /* 74: partition */
    {"matmul M=8 N=8 K=8", TS_ESCHEDULE,
     "partition: loop 'i' runs 8 iterations; the point 8 is not strictly "
     "inside (0, 8)"},
    {"rev", TS_ESCHEDULE,
     "partition: loop 'k' does not start the reduction of block 'C' over "
     "iter 'vk' in its first part (the second part runs without the init)"},
    {"matmul M=8 N=8 K=8", TS_ESCHEDULE,
     "partition: loop 'i' is parallel; only serial loops can be partitioned"},
    /* 77: the bias block would add only to the rows the tail wrote */
    {"dense M=9 N=8 K=8 bias=1", TS_ESCHEDULE,
     "reverse_compute_at: buffer 'dense' that block 'Y' reads is written by "
     "block 'dense_tail' under loop 'i_tail' and by block 'dense' outside "
     "it"},
    /* 78: a predicate over the reduction loop that fails at its start */
    {"from1", TS_ESCHEDULE,
     "decompose_reduction: the predicate of block 'C' depends on reduction "
     "loop 'k' and does not hold at the reduction's first iteration"},
    /* 79: pad_einsum */
    {"matmul M=8 N=7 K=5", TS_ESCHEDULE,
     "pad_einsum: iter 'vk' of block 'C' is not spatial"},
    {"matmul M=8 N=7 K=5", TS_ESCHEDULE,
     "pad_einsum: iter 'vj' of block 'C' is not bound to a loop of its own "
     "over 0 .. 7 (pad before splitting or fusing it)"},
    {"dense M=4 N=7 K=8 bias=1", TS_ESCHEDULE,
     "pad_einsum: output 'dense' of block 'dense' is also read by block "
     "'Y' in the same loop nest"},
    {"conv2d_nhwc N=1 H=5 W=5 CI=3 CO=5 KH=3 KW=3 pad=1", TS_ESCHEDULE,
     "pad_einsum: block 'conv' uses iter 'vh' other than as a whole index of "
     "one dimension of each buffer"},
    {"matmul M=8 N=7 K=5", TS_ESCHEDULE, "pad_einsum: factor 1 is not in"},
    /* 84 */
    {"matmul M=8 N=7 K=5", TS_ESCHEDULE,
     "pad_einsum: block 'C' has no iter 7 (it has 3)"},
    {"matmul M=8 N=7 K=5", TS_ESCHEDULE,
     "pad_einsum: output 'C' of block 'C' is also written by block 'C_init'"},
    {"matmul M=8 N=7 K=5", TS_ESCHEDULE,
     "pad_einsum: loop 'j' of iter 'vj' holds other blocks than 'C'"},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

/* Sets up case `id` on s, snapshots, and makes the illegal request. */
static int run_case(int id, ts_sched *s) {
  ts_rv b, c, l[16], m[16], o[8], x;
  int n;
  int64_t f2[2] = {TS_SPLIT_INFER, 2};
  switch (id) {
  case 0:
    OK(ts_sched_get_block(s, "C", &b));
    take(s);
    return ts_sched_split(s, b, f2, 2, o);
  case 1:
    block_loops(s, "C", &b, l);
    OK(ts_sched_split(s, l[0], f2, 2, o));
    take(s);
    return ts_sched_split(s, l[0], f2, 2, o);
  case 2: {
    block_loops(s, "C", &b, l);
    int64_t f[2] = {TS_SPLIT_INFER, TS_SPLIT_INFER};
    take(s);
    return ts_sched_split(s, l[0], f, 2, o);
  }
  case 3: {
    block_loops(s, "C", &b, l);
    int64_t f[2] = {0, 8};
    take(s);
    return ts_sched_split(s, l[0], f, 2, o);
  }
  case 4: {
    block_loops(s, "C", &b, l);
    int64_t f[2] = {2, 3};
    take(s);
    return ts_sched_split(s, l[0], f, 2, o);
  }
  case 5:
    block_loops(s, "C", &b, l);
    OK(ts_sched_parallel(s, l[0]));
    take(s);
    return ts_sched_split(s, l[0], f2, 2, o);
  case 6: {
    block_loops(s, "C", &b, l);
    ts_rv ik[2] = {l[0], l[2]};
    take(s);
    return ts_sched_fuse(s, ik, 2, &x);
  }
  case 7: {
    block_loops(s, "C", &b, l);
    ts_rv ii[2] = {l[0], l[0]};
    take(s);
    return ts_sched_fuse(s, ii, 2, &x);
  }
  case 8:
    block_loops(s, "C", &b, l);
    OK(ts_sched_vectorize(s, l[1]));
    take(s);
    return ts_sched_fuse(s, l, 2, &x);
  case 9: {
    block_loops(s, "C", &b, l);
    int64_t f[2] = {TS_SPLIT_INFER, 4};
    ts_rv i2[2], j2[2], k2[2];
    OK(ts_sched_split(s, l[0], f, 2, i2));
    OK(ts_sched_split(s, l[1], f, 2, j2));
    OK(ts_sched_split(s, l[2], f, 2, k2));
    ts_rv order[6] = {i2[0], j2[0], k2[0], i2[1], j2[1], k2[1]};
    OK(ts_sched_reorder(s, order, 6));
    OK(ts_sched_blockize(s, i2[1], &x));
    ts_rv across[2] = {j2[1], i2[0]};
    take(s);
    return ts_sched_reorder(s, across, 2);
  }
  case 10: {
    block_loops(s, "dense", &b, l);
    block_loops(s, "Y", &c, m);
    ts_rv two[2] = {m[1], l[0]};
    take(s);
    return ts_sched_reorder(s, two, 2);
  }
  case 11: {
    block_loops(s, "C", &b, l);
    ts_rv dup[3] = {l[0], l[1], l[0]};
    take(s);
    return ts_sched_reorder(s, dup, 3);
  }
  case 12: {
    block_loops(s, "dense", &b, l);
    OK(ts_sched_get_block(s, "Y", &c));
    OK(ts_sched_reverse_compute_at(s, c, l[0]));
    ts_rv ik[2] = {l[2], l[0]};
    take(s);
    return ts_sched_reorder(s, ik, 2);
  }
  case 13:
    block_loops(s, "C", &b, l);
    take(s);
    return ts_sched_vectorize(s, l[2]);
  case 14:
    block_loops(s, "C", &b, l);
    take(s);
    return ts_sched_parallel(s, l[2]);
  case 15:
    OK(ts_sched_get_block(s, "maxelem", &b));
    block_loops(s, "exp", &c, l);
    OK(ts_sched_compute_at(s, b, l[1]));
    take(s);
    return ts_sched_parallel(s, l[1]);
  case 16:
    block_loops(s, "C", &b, l);
    OK(ts_sched_parallel(s, l[0]));
    take(s);
    return ts_sched_parallel(s, l[0]);
  case 17:
    block_loops(s, "C", &b, l);
    take(s);
    return ts_sched_bind(s, l[0], "warpIdx.x");
  case 18:
    block_loops(s, "C", &b, l);
    OK(ts_sched_annotate(s, l[0], ts_ann_int("yes", 1)));
    take(s);
    return ts_sched_unannotate(s, l[0], "nope");
  case 19:
    block_loops(s, "C", &b, l);
    take(s);
    return ts_sched_annotate(s, l[0], ts_ann_int("", 1));
  case 20:
    OK(ts_sched_get_block(s, "mean", &b));
    block_loops(s, "sq_sum", &c, l);
    take(s);
    return ts_sched_compute_at(s, b, l[0]);
  case 21:
    block_loops(s, "dense", &b, l);
    take(s);
    return ts_sched_compute_at(s, b, l[1]);
  case 22:
    OK(ts_sched_get_block(s, "root", &b));
    block_loops(s, "C", &c, l);
    take(s);
    return ts_sched_compute_at(s, b, l[0]);
  case 23:
    OK(ts_sched_get_block(s, "Y", &b));
    block_loops(s, "dense", &c, l);
    take(s);
    return ts_sched_compute_at(s, b, l[0]);
  case 24:
    OK(ts_sched_get_block(s, "dense", &b));
    block_loops(s, "Y", &c, l);
    take(s);
    return ts_sched_reverse_compute_at(s, b, l[0]);
  case 25:
    block_loops(s, "dense", &b, l);
    OK(ts_sched_get_block(s, "Y", &c));
    take(s);
    return ts_sched_reverse_compute_at(s, c, l[2]);
  case 26:
    block_loops(s, "x_sum", &b, l);
    OK(ts_sched_get_block(s, "Y", &c));
    take(s);
    return ts_sched_reverse_compute_at(s, c, l[0]);
  case 27:
    OK(ts_sched_get_block(s, "C", &b));
    take(s);
    return ts_sched_compute_inline(s, b);
  case 28:
    OK(ts_sched_get_block(s, "C", &b));
    take(s);
    return ts_sched_compute_inline(s, b);
  case 29:
    OK(ts_sched_get_block(s, "root", &b));
    take(s);
    return ts_sched_compute_inline(s, b);
  case 30:
    OK(ts_sched_get_block(s, "Y", &b));
    take(s);
    return ts_sched_reverse_compute_inline(s, b);
  case 31:
    OK(ts_sched_get_block(s, "C", &b));
    take(s);
    return ts_sched_reverse_compute_inline(s, b);
  case 32:
    OK(ts_sched_get_block(s, "C", &b));
    take(s);
    return ts_sched_cache_read(s, b, "X", "shared", &x);
  case 33:
    OK(ts_sched_get_block(s, "C", &b));
    take(s);
    return ts_sched_cache_read(s, b, "C", "local", &x);
  case 34:
    OK(ts_sched_get_block(s, "C", &b));
    take(s);
    return ts_sched_cache_read(s, b, "A", "texture", &x);
  case 35:
    OK(ts_sched_get_block(s, "C", &b));
    take(s);
    return ts_sched_cache_write(s, b, "A", "local", &x);
  case 36:
    OK(ts_sched_get_block(s, "C", &b));
    take(s);
    return ts_sched_set_scope(s, b, "C", "shared");
  case 37:
    OK(ts_sched_get_block(s, "exp", &b));
    take(s);
    return ts_sched_storage_align(s, b, "exp", 1, 8, 0);
  case 38:
    OK(ts_sched_get_block(s, "exp", &b));
    take(s);
    return ts_sched_storage_align(s, b, "exp", 0, 8, 8);
  case 39:
    OK(ts_sched_get_block(s, "C", &b));
    take(s);
    return ts_sched_transform_layout(s, b, "B", "(k, j) -> (j, k)");
  case 40:
    OK(ts_sched_get_block(s, "exp", &b));
    take(s);
    return ts_sched_transform_layout(s, b, "exp",
                                     "(i, j) -> (floordiv(i, 2), j)");
  case 41:
    OK(ts_sched_get_block(s, "exp", &b));
    take(s);
    return ts_sched_transform_layout(s, b, "exp", "(i, j) -> (j i)");
  case 42:
    OK(ts_sched_get_block(s, "exp", &b));
    take(s);
    return ts_sched_transform_layout(s, b, "exp", "(i) -> (i)");
  case 43:
    block_loops(s, "Y", &b, l);
    take(s);
    return ts_sched_decompose_reduction(s, b, l[0], &x);
  case 44:
    OK(ts_sched_get_block(s, "dense", &b));
    block_loops(s, "Y", &c, l);
    take(s);
    return ts_sched_decompose_reduction(s, b, l[0], &x);
  case 45: {
    block_loops(s, "C", &b, l);
    ts_rv ki[2] = {l[2], l[0]};
    OK(ts_sched_reorder(s, ki, 2));
    take(s);
    return ts_sched_decompose_reduction(s, b, l[0], &x);
  }
  case 46:
    block_loops(s, "C", &b, l);
    take(s);
    return ts_sched_rfactor(s, l[0], 0, &x);
  case 47:
    block_loops(s, "Y", &b, l);
    take(s);
    return ts_sched_rfactor(s, l[1], 0, &x);
  case 48:
    block_loops(s, "Y", &b, l);
    take(s);
    return ts_sched_rfactor(s, l[1], 3, &x);
  case 49:
    block_loops(s, "dense", &b, l);
    OK(ts_sched_get_block(s, "Y", &c));
    OK(ts_sched_reverse_compute_at(s, c, l[1]));
    take(s);
    return ts_sched_blockize(s, l[1], &x);
  case 50: {
    block_loops(s, "C", &b, l);
    ts_rv fu;
    OK(ts_sched_fuse(s, l, 2, &fu));
    int64_t f[2] = {TS_SPLIT_INFER, 4};
    OK(ts_sched_split(s, fu, f, 2, o));
    take(s);
    return ts_sched_blockize(s, o[1], &x);
  }
  case 51:
    OK(ts_sched_get_block(s, "C", &b));
    take(s);
    return ts_sched_tensorize(s, b, "amx_bf16_16x16x32");
  case 52:
    OK(ts_sched_get_block(s, "C", &b));
    take(s);
    return ts_sched_tensorize(s, b, "amx");
  case 53:
    block_loops(s, "C", &b, l);
    take(s);
    return ts_sched_tensorize(s, l[0], "amx_bf16_16x16x32");
  case 54:
    block_loops(s, "C", &b, l);
    take(s);
    return ts_sched_tensorize(s, l[0], "amx_bf16_16x16x32");
  case 55:
    block_loops(s, "C", &b, l);
    take(s);
    return ts_sched_sample_perfect_tile(s, l[0], 0, 4, o);
  case 56: {
    int64_t cand[2] = {1, 2};
    double probs[2] = {0, 0};
    take(s);
    return ts_sched_sample_categorical(s, cand, probs, 2, &x);
  }
  case 57: take(s); return ts_sched_get_block(s, "D", &b);
  case 58:
    block_loops(s, "C", &b, l);
    take(s);
    return ts_sched_get_loops(s, l[0], m, 16, &n);
  case 59:
    OK(ts_sched_get_block(s, "B", &b));
    OK(ts_sched_compute_inline(s, b));
    take(s);
    return ts_sched_get_loops(s, b, l, 16, &n);
  case 60:
    block_loops(s, "C", &b, l);
    OK(ts_sched_fuse(s, l, 2, &x));
    take(s);
    return ts_sched_parallel(s, l[1]);
  case 61: {
    /* a mutator's decision that does not tile the loop: replay refuses */
    block_loops(s, "C", &b, l);
    OK(ts_sched_sample_perfect_tile(s, l[0], 2, 4, o));
    ts_trace *t = ts_trace_copy(ts_sched_trace(s));
    int64_t bad[2] = {3, 3};
    ts_error err;
    assert_int_equal(ts_trace_set_decision(t, 2, bad, 2, &err), TS_OK);
    ts_sched *again = NULL;
    int rc = ts_trace_apply(t, ts_sched_original(s), 1, &again, &err);
    assert_null(again);
    ts_trace_free(t);
    snprintf(replay_msg, sizeof replay_msg, "%s", err.msg);
    take(s);
    return rc;
  }
  case 62: {
    /* B in [N, K] layout has row stride K = 4; the dot needs [16][2] */
    block_loops(s, "C", &b, l);
    ts_rv k2[2], init, p;
    OK(ts_sched_split(s, l[2], f2, 2, k2));
    ts_rv order[4] = {l[0], k2[0], l[1], k2[1]};
    OK(ts_sched_reorder(s, order, 4));
    OK(ts_sched_decompose_reduction(s, b, k2[0], &init));
    OK(ts_sched_cache_read(s, b, "B", "global", &p));
    OK(ts_sched_transform_layout(s, p, "B_global", "(k, j) -> (j, k)"));
    take(s);
    return ts_sched_tensorize(s, l[1], "avx512_bf16_16x2");
  }
  case 63:
    block_loops(s, "dense", &b, l);
    OK(ts_sched_get_block(s, "Y", &c));
    OK(ts_sched_reverse_compute_at(s, c, l[1]));
    take(s);
    return ts_sched_reverse_compute_at(s, c, l[0]);
  case 64: { /* fuse_siblings: different ranges */
    block_loops(s, "x_sum", &b, l);
    block_loops(s, "sq_sum", &c, m);
    OK(ts_sched_split(s, m[0], f2, 2, o));
    ts_rv pair[2] = {l[0], o[0]};
    take(s);
    return ts_sched_fuse_siblings(s, pair, 2);
  }
  case 65: { /* the later loop reads what the earlier writes */
    block_loops(s, "x_sum", &b, l);
    block_loops(s, "mean", &c, m);
    ts_rv pair[2] = {l[0], m[0]};
    take(s);
    return ts_sched_fuse_siblings(s, pair, 2);
  }
  case 66: { /* ... what a statement between the loops writes */
    block_loops(s, "maxelem", &b, l);
    block_loops(s, "expsum", &c, m);
    ts_rv pair[2] = {l[0], m[0]};
    take(s);
    return ts_sched_fuse_siblings(s, pair, 2);
  }
  case 67: { /* a loop and the loop inside it */
    block_loops(s, "x_sum", &b, l);
    ts_rv pair[2] = {l[0], l[1]};
    take(s);
    return ts_sched_fuse_siblings(s, pair, 2);
  }
  case 68: { /* a parallel loop and a serial one */
    block_loops(s, "x_sum", &b, l);
    block_loops(s, "sq_sum", &c, m);
    OK(ts_sched_parallel(s, m[0]));
    ts_rv pair[2] = {l[0], m[0]};
    take(s);
    return ts_sched_fuse_siblings(s, pair, 2);
  }
  case 69: { /* out of program order */
    block_loops(s, "x_sum", &b, l);
    block_loops(s, "sq_sum", &c, m);
    ts_rv pair[2] = {m[0], l[0]};
    take(s);
    return ts_sched_fuse_siblings(s, pair, 2);
  }
  case 70: { /* one loop twice */
    block_loops(s, "x_sum", &b, l);
    ts_rv pair[2] = {l[0], l[0]};
    take(s);
    return ts_sched_fuse_siblings(s, pair, 2);
  }
  case 71: { /* D = 37 split 5 x 8 and fused back: 40 iterations, guarded */
    block_loops(s, "Y", &b, l);
    int64_t f[2] = {TS_SPLIT_INFER, 8};
    OK(ts_sched_split(s, l[1], f, 2, o));
    OK(ts_sched_fuse(s, o, 2, &x));
    take(s);
    return ts_sched_rfactor(s, x, 0, &o[2]);
  }
  case 72: { /* 5 x 8 x 4: at p1 = p2 = 0, p0 * 32 < 37 fails for p0 >= 2 */
    block_loops(s, "Y", &b, l);
    int64_t f[3] = {5, 8, 4};
    OK(ts_sched_split(s, l[1], f, 3, o));
    take(s);
    return ts_sched_rfactor(s, o[0], 0, &x);
  }
  case 74: /* partition outside the loop's range */
    block_loops(s, "C", &b, l);
    take(s);
    return ts_sched_partition(s, l[0], 8, o);
  case 75: /* a reduction loop whose first part ends the reduction */
    block_loops(s, "C", &b, l);
    take(s);
    return ts_sched_partition(s, l[0], 4, o);
  case 76: /* partition of a parallel loop */
    block_loops(s, "C", &b, l);
    OK(ts_sched_parallel(s, l[0]));
    take(s);
    return ts_sched_partition(s, l[0], 4, o);
  case 77: /* consumer moved under the second part of a partitioned nest
             (under the first, its producer 'dense_tail' runs after) */
    block_loops(s, "dense", &b, l);
    OK(ts_sched_partition(s, l[0], 8, o));
    OK(ts_sched_get_block(s, "Y", &c));
    take(s);
    return ts_sched_reverse_compute_at(s, c, o[1]);
  case 78:
    block_loops(s, "C", &b, l);
    take(s);
    return ts_sched_decompose_reduction(s, b, l[1], &x);
  case 79:
  case 83:
  case 84:
    block_loops(s, "C", &b, l);
    take(s);
    return ts_sched_pad_einsum(s, b, id == 84 ? 7 : 2, id == 83 ? 1 : 8, NULL,
                               0, NULL);
  case 80: {
    block_loops(s, "C", &b, l);
    int64_t f[2] = {TS_SPLIT_INFER, 4};
    OK(ts_sched_split(s, l[1], f, 2, o));
    take(s);
    return ts_sched_pad_einsum(s, b, 1, 8, NULL, 0, NULL);
  }
  case 81:
    block_loops(s, "dense", &b, l);
    OK(ts_sched_get_block(s, "Y", &c));
    OK(ts_sched_reverse_compute_at(s, c, l[0]));
    take(s);
    return ts_sched_pad_einsum(s, b, 1, 8, NULL, 0, NULL);
  case 82:
    block_loops(s, "conv", &b, l);
    take(s);
    return ts_sched_pad_einsum(s, b, 1, 8, NULL, 0, NULL);
  case 85: /* the init in a nest of its own, before the block's */
    block_loops(s, "C", &b, l);
    OK(ts_sched_decompose_reduction(s, b, l[0], &x));
    take(s);
    return ts_sched_pad_einsum(s, b, 1, 8, NULL, 0, NULL);
  case 86: { /* the loop of j also holds the init that decomposition put
                under it (before k) */
    block_loops(s, "C", &b, l);
    OK(ts_sched_decompose_reduction(s, b, l[2], &x));
    take(s);
    return ts_sched_pad_einsum(s, b, 1, 8, NULL, 0, NULL);
  }
  case 73: { /* rfactor under a blockized tile */
    block_loops(s, "C", &b, l);
    OK(ts_sched_blockize(s, l[2], &x));
    OK(ts_sched_get_block(s, "C", &b));
    OK(ts_sched_get_loops(s, b, o, 1, &n));
    take(s);
    return ts_sched_rfactor(s, o[0], 0, &x);
  }
  }
  fail_msg("no case %d", id);
  return 0;
}

static void test_illegal(void **state) {
  (void)state;
  int checked = 0;
  for (int id = 0; id < N_CASES; id++) {
    const illegal_case *c = &cases[id];
    ts_sched *s =
        strcmp(c->workload, "two") == 0     ? util_sched_text(two_stage)
        : strcmp(c->workload, "rev") == 0   ? util_sched_text(reversed_sum)
        : strcmp(c->workload, "from1") == 0 ? util_sched_text(sum_from_one)
                                            : util_sched(c->workload);
    assert_non_null(s);
    replay_msg[0] = 0;
    int rc = run_case(id, s);
    const char *msg = replay_msg[0] ? replay_msg : ts_sched_errmsg(s);
    if (getenv("TS_SHOW_MESSAGES")) printf("%2d: %s\n", id, msg);
    if (rc != c->code || !strstr(msg, c->needle))
      fprintf(stderr, "case %d: got %d '%s', want %d '...%s...'\n", id, rc, msg,
              c->code, c->needle);
    assert_int_equal(rc, c->code);
    assert_non_null(strstr(msg, c->needle));
    char *now = util_print(s);
    assert_string_equal(now, snap.text);
    assert_int_equal(ts_trace_n_insts(ts_sched_trace(s)), snap.n_insts);
    assert_true(ts_sched_rng(s)->state == snap.rng.state);
    /* still usable: the schedule checks out */
    assert_int_equal(ts_func_verify(ts_sched_func(s), NULL), TS_OK);
    free(now);
    ts_sched_destroy(s);
    checked++;
  }
  printf("%d illegal requests refused with the schedule unchanged\n", checked);
  assert_true(checked >= 40);
  free(snap.text);
  snap.text = NULL;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_illegal),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
