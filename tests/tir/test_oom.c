/*
 * test_oom.c — the arena out of memory once its static reserve is used up
 * (tir/arena.c): an allocation the reserve cannot hold returns NULL instead
 * of aborting, and the code that builds IR turns that NULL into TS_ENOMEM.
 * The reserve is taken first by arenas whose malloc was made to fail
 * (tir/alloc.h's hook), so that every later arena failure is a NULL. Then
 * the out-of-memory walk (tests/schedule/oom_walk.h) fails each allocation
 * in turn over a softmax's text parsed, verified, printed, copied and
 * built with the LLVM backend (lowering included): every run must return
 * TS_ENOMEM. (The operator library is not walked here: its builders chain
 * the tensor-expression builder's results without checking them.)
 */
#include "../schedule/oom_walk.h"
#include "../schedule/util.h"

enum { MAX_HELD = 256 };

/* Arenas created while malloc fails, holding the reserve. */
typedef struct reserve_hold {
  ts_arena *held[MAX_HELD];
  int n;
} reserve_hold;

/* Takes every slot of the reserve. */
static void reserve_take_all(reserve_hold *h) {
  h->n = 0;
  for (;;) {
    assert_true(h->n < MAX_HELD);
    ts_alloc_fail_nth(1);
    ts_arena *a = ts_arena_create();
    assert_true(ts_alloc_injected());
    ts_alloc_fail_nth(-1);
    if (!a) break;
    assert_true(ts_arena_failed(a));
    h->held[h->n++] = a;
  }
  assert_true(h->n > 0);
}

static void reserve_give_back(reserve_hold *h) {
  for (int i = 0; i < h->n; i++) ts_arena_destroy(h->held[i]);
  h->n = 0;
}

static void test_arena_null(void **state) {
  (void)state;
  reserve_hold h;
  unsigned long failures = ts_alloc_failures();
  reserve_take_all(&h);
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
  reserve_give_back(&h);
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
  reserve_hold h;
  reserve_take_all(&h);
  oom_walk ow = {"arena without reserve", stage_names, ST_N, run, NULL, 1};
  oom_walk_run(&ow, &c);
  reserve_give_back(&h);
  free(c.text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_arena_null),
      cmocka_unit_test(test_walk_without_reserve),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
