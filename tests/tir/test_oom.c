/*
 * test_oom.c — the arena out of memory once its static reserve is used up
 * (tir/arena.c): an allocation the reserve cannot hold returns NULL instead
 * of aborting, and the code that builds IR turns that NULL into TS_ENOMEM.
 * The reserve is taken first by arenas whose malloc was made to fail
 * (tir/alloc.h's hook), so that every later arena failure is a NULL. Then
 * the out-of-memory walk (tests/schedule/oom_walk.h) fails each allocation
 * in turn over a softmax's text parsed, verified, printed, copied and
 * built with the LLVM backend (lowering included), over the operator
 * library's builders (every operator, from its spec) and over schedules
 * that use every rewriting primitive: every run must return TS_ENOMEM.
 */
#include "../schedule/oom_walk.h"
#include "../schedule/util.h"

static void test_arena_null(void **state) {
  (void)state;
  oom_reserve h;
  unsigned long failures = ts_alloc_failures();
  oom_reserve_take_all(&h);
  assert_true(ts_alloc_failures() == failures + (unsigned long)h.n + 1);

  /* an arena that fails with the reserve gone gives NULL, and so do the
   * constructors building in it */
  ts_arena *a = ts_arena_create();
  assert_non_null(a);
  assert_non_null(ts_arena_alloc(a, 64)); /* the first chunk */
  ts_alloc_fail_nth(1);
  void *big = ts_arena_alloc(a, 1 << 20);
  ts_alloc_fail_nth(-1);
  assert_null(big);
  assert_true(ts_arena_failed(a));
  ts_arena_destroy(a);

  a = ts_arena_create();
  assert_non_null(a);
  ts_alloc_fail_nth(1);
  ts_expr *x = ts_var(a, "x", TS_INDEX);
  ts_alloc_fail_nth(-1);
  assert_null(x);
  assert_true(ts_arena_failed(a));
  /* NULL operands give NULL */
  x = ts_var(a, "x", TS_INDEX);
  assert_non_null(x);
  assert_null(ts_add(a, x, NULL));
  assert_null(ts_cast(a, TS_INT32, NULL));
  assert_null(ts_evaluate(a, NULL));
  ts_arena_destroy(a);

  /* a request larger than a slot fails even with the reserve free */
  oom_reserve_give_back(&h);
  a = ts_arena_create();
  ts_alloc_fail_nth(1);
  big = ts_arena_alloc(a, 1 << 20);
  ts_alloc_fail_nth(-1);
  assert_null(big);
  assert_true(ts_arena_failed(a));
  ts_arena_destroy(a);
  /* an absurd size is refused, not wrapped */
  a = ts_arena_create();
  assert_null(ts_arena_alloc(a, SIZE_MAX - 8));
  assert_true(ts_arena_failed(a));
  ts_arena_destroy(a);

  /* and a smaller one goes on in the reserve, as before */
  a = ts_arena_create();
  ts_alloc_fail_nth(1);
  void *p = ts_arena_alloc(a, 64);
  ts_alloc_fail_nth(-1);
  assert_non_null(p);
  assert_true(ts_arena_failed(a));
  ts_arena_destroy(a);
}

enum { ST_PARSE, ST_BUILD, ST_N };
static const char *const stage_names[ST_N] = {"arena_parse", "arena_build"};

typedef struct walk_ctx {
  const ts_target *t;
  char *text; /* the softmax */
} walk_ctx;

static int run(void *ctx, int last, char **out, ts_error *err) {
  const walk_ctx *c = ctx;
  int rc = TS_OK;
  ts_func *f = NULL, *copy = NULL;
  char *text = NULL;
  ts_build_result br = {0};
  *out = NULL;
  ts_error_clear(err);
  STEP(ts_func_parse(c->text, strlen(c->text), "softmax.tir", &f, err));
  STEP(ts_func_verify(f, err));
  text = ts_func_print(f);
  if (!text) STEP(TS_ERR(err, TS_ENOMEM, "print: out of memory"));
  if (last < ST_BUILD) goto done;
  copy = ts_func_copy(f);
  if (!copy) STEP(TS_ERR(err, TS_ENOMEM, "copy: out of memory"));
  ts_build_options o = ts_build_defaults();
  o.keep_lowered = true;
  STEP(ts_build(copy, c->t, &o, &br, err));
  if (!br.artifact || !br.lowered)
    STEP(TS_ERR(err, TS_EINTERNAL, "build succeeded without a result"));
  *out = ts_func_print(br.lowered);
  if (!*out) STEP(TS_ERR(err, TS_ENOMEM, "print: out of memory"));
done:
  ts_build_result_clear(&br);
  ts_func_free(copy);
  ts_func_free(f);
  free(text);
  return rc;
}

static void test_walk_without_reserve(void **state) {
  (void)state;
  ts_error err;
  walk_ctx c = {util_target(&err), NULL};
  assert_non_null(c.t);
  ts_workload *w = NULL;
  assert_int_equal(
      ts_workload_from_spec("softmax N=8 D=16 dtype=float32", &w, &err), TS_OK);
  c.text = ts_func_print(w->func);
  assert_non_null(c.text);
  ts_workload_free(w);
  oom_reserve h;
  oom_reserve_take_all(&h);
  oom_walk ow = {
      "arena without reserve", stage_names, ST_N, run, NULL, 1, false};
  oom_walk_run(&ow, &c);
  oom_reserve_give_back(&h);
  free(c.text);
}

/* ---- the operator library ---- */

/* Every operator, with the options that add stages or expressions (padding,
 * groups, dilation, strides, bias, transposed operands, casts). */
static const char *const op_specs[] = {
    "matmul M=4 N=4 K=4 transpose_a=1 dtype=float16",
    "batch_matmul B=2 M=4 N=4 K=4 transpose_b=1",
    "dense M=4 N=8 K=4 bias=1",
    "conv2d_nchw N=1 H=6 W=6 CI=4 CO=4 KH=3 KW=3 pad=1 dilation=2",
    "conv2d_nhwc N=1 H=6 W=6 CI=4 CO=4 KH=3 KW=3 pad=1 stride=2 groups=2",
    "depthwise_conv2d_nhwc N=1 H=6 W=6 C=4 KH=3 KW=3 pad=1",
    "conv2d_transpose_nchw N=1 H=4 W=4 CI=2 CO=3 KH=3 KW=3 stride=2 pad=1",
    "pool2d_nhwc N=1 H=6 W=6 C=4 KH=2 KW=2 stride=2 pad=1 kind=avg",
    "pool2d_nhwc N=1 H=6 W=6 C=4 KH=3 KW=3 pad=1",
    "softmax N=4 D=8",
    "layer_norm N=4 D=8",
    "elementwise op=gelu shape=2x3",
    "elementwise op=tanh shape=2x1x3x1x2",
    "elementwise op=add shape=2x3 dtype=int32",
    "reduce op=max N=3 D=5",
    "transpose shape=2x3x4 perm=2x0x1",
    "layout_transform N=1 C=32 H=2 W=3 src=NCHW16c dst=NHWC",
    "pad shape=2x3 before=1x0 after=0x2",
};
enum { N_OPS = (int)(sizeof op_specs / sizeof *op_specs) };

enum { ST_OPS, ST_OPS_N };
static const char *const ops_stage_names[ST_OPS_N] = {"arena_ops"};

/* Builds every operator; *out is the last one printed. */
static int run_ops(void *ctx, int last, char **out, ts_error *err) {
  (void)ctx;
  (void)last;
  int rc = TS_OK;
  ts_workload *w = NULL;
  *out = NULL;
  ts_error_clear(err);
  for (int i = 0; i < N_OPS; i++) {
    ts_workload_free(w);
    w = NULL;
    STEP(ts_workload_from_spec(op_specs[i], &w, err));
    if (!w || !w->func)
      STEP(TS_ERR(err, TS_EINTERNAL, "%s: no function", op_specs[i]));
  }
  *out = ts_func_print(w->func);
  if (!*out) STEP(TS_ERR(err, TS_ENOMEM, "print: out of memory"));
done:
  ts_workload_free(w);
  return rc;
}

static void test_ops_without_reserve(void **state) {
  (void)state;
  oom_reserve h;
  oom_reserve_take_all(&h);
  oom_walk ow = {"operators without reserve",
                 ops_stage_names,
                 ST_OPS_N,
                 run_ops,
                 NULL,
                 1,
                 false};
  oom_walk_run(&ow, NULL);
  oom_reserve_give_back(&h);
}

/* ---- the schedule primitives ---- */

/* The sched's message as the run's error. */
static int sched_rc(int rc, const ts_sched *s, ts_error *err) {
  if (rc) *err = *ts_sched_error(s);
  return rc;
}

#define SCHED(x) STEP(sched_rc((x), s, err))

/* A schedule of the spec (or, for a spec starting with "func", of the
 * text). */
static int new_sched(const char *spec, ts_sched **s, ts_error *err) {
  ts_workload *w = NULL;
  ts_func *f = NULL;
  *s = NULL;
  int rc = strncmp(spec, "func", 4)
               ? ts_workload_from_spec(spec, &w, err)
               : ts_func_parse(spec, strlen(spec), "two.tir", &f, err);
  if (!rc) rc = ts_sched_create(w ? w->func : f, 1, s, err);
  ts_workload_free(w);
  ts_func_free(f);
  return rc;
}

/* Tiles a matmul: split (one factor not dividing its loop), reorder,
 * cache_read with compute_at and storage_align, cache_write with
 * reverse_compute_at, decompose_reduction, parallel, unroll, vectorize,
 * annotate. */
static int sched_tile(ts_sched *s, ts_error *err) {
  int rc = TS_OK, n;
  ts_rv b, l[3], i2[2], j2[2], k2[2], ca, cw, init;
  SCHED(ts_sched_get_block(s, "C", &b));
  SCHED(ts_sched_get_loops(s, b, l, 3, &n));
  SCHED(ts_sched_split(s, l[0], (int64_t[]){TS_SPLIT_INFER, 4}, 2, i2));
  SCHED(ts_sched_split(s, l[1], (int64_t[]){3, TS_SPLIT_INFER}, 2, j2));
  SCHED(ts_sched_split(s, l[2], (int64_t[]){TS_SPLIT_INFER, 4}, 2, k2));
  SCHED(ts_sched_reorder(s, (ts_rv[]){i2[0], j2[0], k2[0], i2[1], k2[1], j2[1]},
                         6));
  SCHED(ts_sched_cache_read(s, b, "A", "shared", &ca));
  SCHED(ts_sched_compute_at(s, ca, k2[0]));
  SCHED(ts_sched_storage_align(s, ca, "A_shared", 0, 8, 1));
  SCHED(ts_sched_cache_write(s, b, "C", "local", &cw));
  SCHED(ts_sched_reverse_compute_at(s, cw, j2[0]));
  SCHED(ts_sched_decompose_reduction(s, b, k2[0], &init));
  SCHED(ts_sched_parallel(s, i2[0]));
  SCHED(ts_sched_unroll(s, k2[1]));
  SCHED(ts_sched_vectorize(s, j2[1]));
  SCHED(ts_sched_annotate(s, b, ts_ann_string("note", "tiled")));
done:
  return rc;
}

/* compute_inline of a conv's padding. */
static int sched_inline(ts_sched *s, ts_error *err) {
  int rc = TS_OK;
  ts_rv pad;
  SCHED(ts_sched_get_block(s, "pad", &pad));
  SCHED(ts_sched_compute_inline(s, pad));
done:
  return rc;
}

/* reverse_compute_inline of the second of two stages. */
static int sched_reverse_inline(ts_sched *s, ts_error *err) {
  int rc = TS_OK;
  ts_rv c;
  SCHED(ts_sched_get_block(s, "C", &c));
  SCHED(ts_sched_reverse_compute_inline(s, c));
done:
  return rc;
}

/* set_scope, then compute_at of a reduction into a softmax's rows. */
static int sched_softmax(ts_sched *s, ts_error *err) {
  int rc = TS_OK, n;
  ts_rv mx, e, l[2];
  SCHED(ts_sched_get_block(s, "maxelem", &mx));
  SCHED(ts_sched_get_block(s, "exp", &e));
  SCHED(ts_sched_set_scope(s, e, "exp", "local"));
  SCHED(ts_sched_get_loops(s, e, l, 2, &n));
  SCHED(ts_sched_compute_at(s, mx, l[0]));
done:
  return rc;
}

/* split and rfactor of a row sum. */
static int sched_rfactor(ts_sched *s, ts_error *err) {
  int rc = TS_OK, n;
  ts_rv b, l[2], o[2], rf;
  SCHED(ts_sched_get_block(s, "Y", &b));
  SCHED(ts_sched_get_loops(s, b, l, 2, &n));
  SCHED(ts_sched_split(s, l[1], (int64_t[]){TS_SPLIT_INFER, 8}, 2, o));
  SCHED(ts_sched_rfactor(s, o[1], 1, &rf));
done:
  return rc;
}

/* fuse, split and bind to GPU threads. */
static int sched_bind(ts_sched *s, ts_error *err) {
  int rc = TS_OK, n;
  ts_rv b, l[2], f, o[2];
  SCHED(ts_sched_get_block(s, "Y", &b));
  SCHED(ts_sched_get_loops(s, b, l, 2, &n));
  SCHED(ts_sched_fuse(s, l, 2, &f));
  SCHED(ts_sched_split(s, f, (int64_t[]){TS_SPLIT_INFER, 32}, 2, o));
  SCHED(ts_sched_bind(s, o[0], "blockIdx.x"));
  SCHED(ts_sched_bind(s, o[1], "threadIdx.x"));
done:
  return rc;
}

/* A bfloat16 matmul tiled for a dot-product intrinsic: split, reorder,
 * decompose_reduction, cache_read, transform_layout, blockize and
 * tensorize of the block made by blockize. */
static int sched_tensorize(ts_sched *s, ts_error *err) {
  int rc = TS_OK, n;
  ts_rv b, l[3], j2[2], k2[2], init, p, o;
  SCHED(ts_sched_get_block(s, "C", &b));
  SCHED(ts_sched_get_loops(s, b, l, 3, &n));
  SCHED(ts_sched_split(s, l[1], (int64_t[]){TS_SPLIT_INFER, 16}, 2, j2));
  SCHED(ts_sched_split(s, l[2], (int64_t[]){TS_SPLIT_INFER, 2}, 2, k2));
  SCHED(ts_sched_reorder(s, (ts_rv[]){l[0], j2[0], k2[0], j2[1], k2[1]}, 5));
  SCHED(ts_sched_decompose_reduction(s, b, k2[0], &init));
  SCHED(ts_sched_cache_read(s, b, "B", "global", &p));
  SCHED(ts_sched_transform_layout(s, p, "B_global",
                                  "(k, j) -> (floordiv(j, 16), floordiv(k, 2), "
                                  "floormod(j, 16), floormod(k, 2))"));
  SCHED(ts_sched_blockize(s, j2[1], &o));
  SCHED(ts_sched_tensorize(s, o, "avx512_bf16_16x2"));
done:
  return rc;
}

/* An int8 matmul's signed A made unsigned (shift_int8: two new blocks,
 * two new buffers, the init and update rewritten). */
static int sched_shift_int8(ts_sched *s, ts_error *err) {
  int rc = TS_OK;
  ts_rv b, made[2];
  SCHED(ts_sched_get_block(s, "C", &b));
  SCHED(ts_sched_shift_int8(s, b, "A", made));
done:
  return rc;
}

/* A product's 13 columns padded to 16 (pad_einsum: a padded copy of B,
 * a padded output and its copy out), then split into whole vectors. */
static int sched_pad_einsum(ts_sched *s, ts_error *err) {
  int rc = TS_OK, n;
  ts_rv b, l[3], made[2], j2[2];
  SCHED(ts_sched_get_block(s, "C", &b));
  SCHED(ts_sched_get_loops(s, b, l, 3, &n));
  SCHED(ts_sched_pad_einsum(s, b, 1, 8, made, 2, &n));
  SCHED(ts_sched_split(s, l[1], (int64_t[]){TS_SPLIT_INFER, 8}, 2, j2));
  SCHED(ts_sched_reverse_compute_at(s, made[1], l[0]));
done:
  return rc;
}

typedef struct sched_case {
  const char *spec;
  int (*apply)(ts_sched *s, ts_error *err);
} sched_case;

static const sched_case sched_cases[] = {
    {"matmul M=16 N=16 K=16", sched_tile},
    {"conv2d_nhwc N=1 H=6 W=6 CI=4 CO=8 KH=3 KW=3 pad=1", sched_inline},
    {NULL, sched_reverse_inline}, /* util_two_stage() */
    {"softmax N=4 D=12", sched_softmax},
    {"reduce op=sum N=4 D=64", sched_rfactor},
    {"elementwise op=relu shape=8x12", sched_bind},
    {"matmul M=4 N=32 K=8 dtype=bfloat16", sched_tensorize},
    {"matmul M=4 N=16 K=8 dtype=int8", sched_shift_int8},
    {"matmul M=4 N=13 K=8", sched_pad_einsum},
};
enum { N_SCHED = (int)(sizeof sched_cases / sizeof *sched_cases) };

enum { ST_SCHED_TILE, ST_SCHED_ALL, ST_SCHED_N };
static const char *const sched_stage_names[ST_SCHED_N] = {"arena_tile",
                                                          "arena_primitives"};

/* Schedules every case (only the tiled matmul through ST_SCHED_TILE);
 * *out is every scheduled function and trace printed. */
static int run_sched(void *ctx, int last, char **out, ts_error *err) {
  (void)ctx;
  int rc = TS_OK;
  ts_sched *s = NULL;
  char *all = NULL;
  *out = NULL;
  ts_error_clear(err);
  for (int i = 0; i < (last < ST_SCHED_ALL ? 1 : N_SCHED); i++) {
    const sched_case *c = &sched_cases[i];
    ts_sched_destroy(s);
    s = NULL;
    STEP(new_sched(c->spec ? c->spec : util_two_stage(), &s, err));
    STEP(c->apply(s, err));
    char *text = ts_func_print(ts_sched_func(s));
    char *trace = ts_trace_print(ts_sched_trace(s));
    size_t n = (all ? strlen(all) : 0) + (text ? strlen(text) : 0) +
               (trace ? strlen(trace) : 0) + 1;
    char *grown = text && trace ? realloc(all, n) : NULL;
    if (grown) {
      if (!all) grown[0] = 0;
      strcat(strcat(grown, text), trace);
      all = grown;
    }
    free(text);
    free(trace);
    if (!grown) STEP(TS_ERR(err, TS_ENOMEM, "print: out of memory"));
  }
  *out = all;
  all = NULL;
done:
  free(all);
  ts_sched_destroy(s);
  return rc;
}

static void test_schedule_without_reserve(void **state) {
  (void)state;
  oom_reserve h;
  oom_reserve_take_all(&h);
  oom_walk ow = {"schedule primitives without reserve",
                 sched_stage_names,
                 ST_SCHED_N,
                 run_sched,
                 NULL,
                 1,
                 false};
  oom_walk_run(&ow, NULL);
  oom_reserve_give_back(&h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_arena_null),
      cmocka_unit_test(test_walk_without_reserve),
      cmocka_unit_test(test_ops_without_reserve),
      cmocka_unit_test(test_schedule_without_reserve),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
