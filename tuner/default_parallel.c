/*
 * default_parallel.c — the default schedule's parallel loops: the leading
 * spatial loops of a block fused and parallel, and the reduction blocks
 * that go outside them when a tile's weights span the whole width.
 */
#include "tuner/internal.h"
#include "tuner/rule_framework.h"

#define MIN_PARALLEL_WORK DEFAULT_MIN_PARALLEL_WORK

static int64_t loop_extent(ts_sched *s, ts_rv l) { return rv_extent(s, l); }

/* Fuses the leading spatial loops of `block` (stopping at a reduce loop or
 * at `stop`) and makes them parallel when the block does enough work. */
void default_parallel_outer(ts_sched *s, const ts_target *t, const char *name,
                            int64_t work) {
  (void)t;
  if (work < MIN_PARALLEL_WORK) return;
  ts_rv b, loops[MAX_LOOPS];
  int nl = 0;
  if (ts_sched_get_block(s, name, &b) ||
      ts_sched_get_loops(s, b, loops, MAX_LOOPS, &nl) || nl == 0)
    return;
  const ts_stmt *r = ts_func_find_block(ts_sched_func(s), name);
  if (!r) return;
  int np = 0;
  int64_t prod = 1;
  for (int i = 0; i < nl; i++) {
    const ts_stmt *l = ts_sched_rv_loop(s, loops[i]);
    if (!l || ts_for_kind_of(l) != TS_FOR_SERIAL) break;
    if (loop_binding(r, l) & BIND_REDUCE) break;
    /* stop at a loop that is not the only statement of its parent chain */
    if (i + 1 < nl) {
      const ts_stmt *body = ts_for_body(l);
      if (body != ts_sched_rv_loop(s, loops[i + 1])) {
        np = i + 1;
        prod *= loop_extent(s, loops[i]);
        break;
      }
    }
    np = i + 1;
    prod *= loop_extent(s, loops[i]);
    if (prod >= 1024) break;
  }
  if (np == 0 || prod < 2) return;
  ts_rv p = loops[0];
  if (np > 1 && ts_sched_fuse(s, loops, np, &p)) p = loops[0];
  ts_sched_parallel(s, p);
}

int64_t default_block_work(ts_sched *s, const char *name) {
  ts_rv b, loops[MAX_LOOPS];
  int nl = 0;
  if (ts_sched_get_block(s, name, &b) ||
      ts_sched_get_loops(s, b, loops, MAX_LOOPS, &nl))
    return 0;
  int64_t w = 1;
  for (int i = 0; i < nl; i++) w *= loop_extent(s, loops[i]);
  return w;
}

/* A register tile whose weights span the whole width (112 output
 * channels on AVX-512: one vector tile of 64 and one of 48, too few for
 * a panel per core) streams all of them from L3 again for every output
 * tile when they are larger than the L2. The reduction is then split into
 * blocks whose weights fit in half of `budget` (default_reduction_block),
 * the blocks' loop placed outside everything, the parallel loop of the
 * output tiles inside it: each block's weights go to each core's L2 once
 * and serve all of its tiles, and the output (at most a quarter of
 * `budget`, so that it stays in the caches) accumulates across the
 * blocks. `streamed` is the bytes of the weights, `out_bytes` the
 * output's. Returns the blocked loop's index and the block in *chunk, or
 * -1. `bench --workload W --default --threads 2 --repeat 7`, AVX-512
 * EPYC (1 MiB L2), old and new binaries alternating, x oneDNN: 3x3 convs
 * 7x7 480->112 0.74/0.77 -> 1.01/0.99, 9x9 768->112 0.91/0.95 ->
 * 1.09/1.03, 14x14 640->112 (five rounds) median 0.88 -> 0.92, 10x10
 * 512->112 1.07/0.99 -> 1.06/1.11, stride 2 30x30 512->112 1.01/1.00 ->
 * 1.07/1.10, 22x22 384->112 1.06/1.07 -> 1.10/1.10; 1x1 14x14
 * 4096->112 0.80/0.80 -> 0.93/0.93; matmul 49x112x4096 0.89/1.03 ->
 * 1.08/1.15; matmul 256x112x4096, 64x128x4096 and 100x128x3000 within
 * noise. Hand traces put blocks of 96 to 192 channels (0.4 to 0.8 MiB)
 * level; 256 (1 MiB) lost 5 %. (Not where one tile is the whole width:
 * see tile_anchor.) */
int default_outer_reduction_block(const int64_t *ext, const int *bind, int n,
                                  int64_t streamed, int64_t out_bytes,
                                  int64_t budget, int unroll, int64_t *chunk) {
  if (streamed <= budget || out_bytes > budget / 4) return -1;
  return default_reduction_block(ext, bind, n, streamed, budget / 2, unroll,
                                 chunk);
}
