/*
 * test_compile.c — `tessera compile` as a library call: the small models
 * compiled into shared libraries (no database; a database holding sampled
 * records for two tasks; a database of another target, which is not used;
 * a corrupt record, which falls back to the default schedule with the
 * warning) are loaded with dlopen and give the reference executor's
 * outputs through include/tessera/model.h; a graph operator that is not a
 * kernel yet is refused naming the node, and nothing is written on
 * failure.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "util.h"

#include "codegen/codegen.h"
#include "db/db.h"
#include "include/tessera/model.h"
#include "tuner/tuner.h"

#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OUT_DIR TS_BINARY_DIR "/graph_models/compile_test"

static void out_path(const char *name, char buf[512]) {
  mkdir(OUT_DIR, 0755);
  snprintf(buf, 512, "%s/%s.so", OUT_DIR, name);
}

static ts_graph_compile_options options(const char *output, ts_db *db) {
  ts_graph_compile_options o;
  memset(&o, 0, sizeof o);
  o.output = output;
  o.db = db;
  o.build_threads = 2;
  o.runtime_dir = TS_BINARY_DIR;
  o.model_path = "model.onnx";
  return o;
}

/* Seeded inputs for g's graph inputs (ints in [0, 50)); malloc'd. */
static void make_inputs(const ts_graph *g, ts_graph_tensor *ins) {
  for (int i = 0; i < ts_graph_n_inputs(g); i++) {
    ts_graph_value_info v = ts_graph_input(g, i);
    ins[i] = (ts_graph_tensor){v.name, v.dtype, v.ndim, {0}, NULL};
    int64_t n = 1;
    for (int d = 0; d < v.ndim; d++) n *= (ins[i].shape[d] = v.shape[d]);
    ins[i].data = malloc((size_t)n * ts_dtype_elem_bytes(v.dtype));
    if (ts_dtype_is_float(v.dtype))
      ts_host_fill_random(ins[i].data, v.dtype, n, 7u + (unsigned)i);
    else
      for (int64_t k = 0; k < n; k++)
        ts_host_set(ins[i].data, v.dtype, k, (double)((k * 7 + i) % 50));
  }
}

static int64_t elems(const ts_graph_tensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
  return n;
}

/* The reference executor's outputs on make_inputs, computed once per
 * model. */
typedef struct reference {
  char name[64];
  ts_graph_tensor want[8];
  int n;
} reference;
static reference refs[8];
static int n_refs;

static const ts_graph_tensor *
reference_outputs(const char *model, const ts_graph *g, ts_graph_tensor *ins) {
  for (int i = 0; i < n_refs; i++)
    if (!strcmp(refs[i].name, model)) return refs[i].want;
  assert_true(n_refs < 8);
  reference *r = &refs[n_refs++];
  snprintf(r->name, sizeof r->name, "%s", model);
  r->n = ts_graph_n_outputs(g);
  ts_error err;
  if (ts_graph_execute(g, TS_GRAPH_COMPILE, ins, ts_graph_n_inputs(g), r->want,
                       r->n, &err))
    fail_msg("execute: %s", err.msg);
  return r->want;
}

static int free_references(void **state) {
  (void)state;
  for (int i = 0; i < n_refs; i++)
    for (int k = 0; k < refs[i].n; k++) free(refs[i].want[k].data);
  n_refs = 0;
  return 0;
}

/* Loads the library at path, checks its metadata against g, runs it on
 * seeded inputs (once from aligned, once from unaligned buffers) and
 * compares with the reference executor. */
static void run_and_compare(const char *model, const ts_graph *g,
                            const char *path) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) fail_msg("dlopen %s: %s", path, dlerror());
  __typeof__(ts_model_create) *create = dlsym(h, "ts_model_create");
  __typeof__(ts_model_run) *run = dlsym(h, "ts_model_run");
  __typeof__(ts_model_destroy) *destroy = dlsym(h, "ts_model_destroy");
  __typeof__(ts_model_last_error) *last_error = dlsym(h, "ts_model_last_error");
  __typeof__(ts_model_num_inputs) *num_inputs = dlsym(h, "ts_model_num_inputs");
  __typeof__(ts_model_output_info) *output_info =
      dlsym(h, "ts_model_output_info");
  assert_non_null(create);
  assert_non_null(run);
  assert_non_null(destroy);
  assert_non_null(output_info);
  /* kernels are not exported */
  assert_null(dlsym(h, "tsk0_fused_conv_relu"));
  ts_model *m = NULL;
  if (create(2, &m)) fail_msg("create: %s", last_error());
  int n_in = ts_graph_n_inputs(g), n_out = ts_graph_n_outputs(g);
  assert_int_equal(num_inputs(m), n_in);
  ts_graph_tensor ins[8];
  assert_true(n_in <= 8 && n_out <= 8);
  make_inputs(g, ins);
  const ts_graph_tensor *want = reference_outputs(model, g, ins);
  for (int pass = 0; pass < 2; pass++) {
    const void *in_ptrs[8];
    void *out_ptrs[8];
    unsigned char *in_bufs[8], *out_bufs[8];
    for (int i = 0; i < n_in; i++) {
      size_t b = (size_t)elems(&ins[i]) * ts_dtype_elem_bytes(ins[i].dtype);
      in_bufs[i] = malloc(b + 64);
      memcpy(in_bufs[i] + pass, ins[i].data, b);
      in_ptrs[i] = in_bufs[i] + pass;
    }
    for (int i = 0; i < n_out; i++) {
      ts_model_tensor_info info;
      assert_int_equal(output_info(m, i, &info), 0);
      assert_string_equal(info.name, ts_graph_output(g, i).name);
      assert_int_equal(info.ndim, want[i].ndim);
      assert_int_equal(info.bytes,
                       elems(&want[i]) *
                           (int64_t)ts_dtype_elem_bytes(want[i].dtype));
      out_bufs[i] = aligned_alloc(64, ((size_t)info.bytes + 127) & ~(size_t)63);
      memset(out_bufs[i], 0xff, (size_t)info.bytes + 64);
      out_ptrs[i] = out_bufs[i] + pass * 3;
    }
    if (run(m, in_ptrs, out_ptrs)) fail_msg("run: %s", last_error());
    for (int i = 0; i < n_out; i++) {
      int64_t first;
      double max_err;
      int64_t bad = ts_host_compare(out_ptrs[i], want[i].data, want[i].dtype,
                                    elems(&want[i]), &first, &max_err);
      if (bad)
        fail_msg("%s: output %d: %lld mismatches, first at %lld, max error %g",
                 path, i, (long long)bad, (long long)first, max_err);
      free(out_bufs[i]);
    }
    for (int i = 0; i < n_in; i++) free(in_bufs[i]);
  }
  destroy(m);
  for (int i = 0; i < n_in; i++) free(ins[i].data);
  dlclose(h);
}

static const char *const small_models[] = {
    "resnet50_small", "mobilenet_v2_small", "csrnet_small"};

static void test_compile_no_db(void **state) {
  (void)state;
  for (size_t k = 0; k < sizeof small_models / sizeof small_models[0]; k++) {
    ts_error err;
    ts_graph *g = load_model(small_models[k], NULL, 0, NULL, &err);
    if (!g) fail_msg("%s: %s", small_models[k], err.msg);
    char out[512];
    out_path(small_models[k], out);
    ts_graph_compile_options o = options(out, NULL);
    ts_graph_compile_report r;
    memset(&r, 0, sizeof r);
    if (ts_graph_compile(g, &o, &r, &err))
      fail_msg("compile %s: %s", small_models[k], err.msg);
    assert_true(r.n_tasks > 0);
    assert_true(r.n_calls >= r.n_tasks);
    for (int i = 0; i < r.n_tasks; i++) {
      assert_string_equal(r.tasks[i].source, "default");
      assert_true(isnan(r.tasks[i].latency_s));
    }
    assert_true(r.arena_bytes > 0);
    assert_true(r.lower_bound_bytes <= r.arena_bytes);
    assert_true(r.arena_bytes <= r.total_bytes);
    assert_true(r.library_bytes > r.constant_bytes);
    assert_non_null(r.warning);
    assert_non_null(strstr(r.warning, "tessera tune --model model.onnx"));
    assert_non_null(strstr(r.warning, "(no database)"));
    ts_graph_compile_report_clear(&r);
    run_and_compare(small_models[k], g, out);
    ts_graph_free(g);
  }
}

/* A database with one sampled candidate per task for tasks[0 .. n) on
 * target_str. */
static ts_db *make_db(const char *path, const ts_graph *g, int n,
                      const char *target_str, bool corrupt) {
  unlink(path);
  ts_db *db = NULL;
  ts_error err;
  if (ts_db_open(path, NULL, &db, &err)) fail_msg("db: %s", err.msg);
  ts_graph_task *tasks;
  int n_tasks;
  assert_int_equal(ts_graph_tasks(g, &tasks, &n_tasks, &err), TS_OK);
  assert_true(n_tasks >= n);
  ts_target *t;
  assert_int_equal(ts_target_parse(target_str, &t, &err), TS_OK);
  for (int i = 0; i < n; i++) {
    int64_t wid;
    assert_int_equal(ts_db_commit_workload(db, tasks[i].func, NULL, &wid),
                     TS_OK);
    char *json = NULL;
    if (corrupt) {
      json = strdup("{\"version\": 1, \"insts\": [[\"no_such_primitive\"]]}");
    } else {
      ts_design_space *spaces;
      int n_spaces;
      if (ts_space_generate(tasks[i].func, t, NULL, &spaces, &n_spaces, &err))
        fail_msg("space: %s", err.msg);
      ts_candidate c;
      int rc = TS_EINVAL;
      for (uint64_t seed = 1; rc && seed < 20; seed++)
        rc = ts_candidate_sample(&spaces[0], 0, tasks[i].func, t, seed, &c,
                                 &err);
      if (rc) fail_msg("sample: %s", err.msg);
      json = ts_candidate_record_json(&c);
      ts_candidate_clear(&c);
      ts_design_spaces_free(spaces, n_spaces);
    }
    double secs[2] = {1e-3 * (i + 1), 1e-3 * (i + 1)};
    ts_db_measurement m = {.workload_id = wid,
                           .target = ts_target_str(t),
                           .trace_json = json,
                           .run_secs = secs,
                           .n_run_secs = 2,
                           .status = TS_DB_STATUS_OK};
    if (ts_db_commit_record(db, &m, NULL))
      fail_msg("commit: %s", ts_db_errmsg(db));
    free(json);
  }
  ts_target_free(t);
  free(tasks);
  return db;
}

static void test_compile_with_db(void **state) {
  (void)state;
  ts_error err;
  ts_graph *g = load_model("resnet50_small", NULL, 0, NULL, &err);
  if (!g) fail_msg("%s", err.msg);
  const char *dbp = OUT_DIR "/records.db";
  mkdir(OUT_DIR, 0755);
  ts_db *db = make_db(dbp, g, 2, "llvm", false);
  char out[512];
  out_path("resnet50_small_db", out);
  ts_graph_compile_options o = options(out, db);
  ts_graph_compile_report r;
  memset(&r, 0, sizeof r);
  if (ts_graph_compile(g, &o, &r, &err)) fail_msg("compile: %s", err.msg);
  for (int i = 0; i < r.n_tasks; i++) {
    if (i < 2) {
      assert_string_equal(r.tasks[i].source, "db");
      assert_true(fabs(r.tasks[i].latency_s - 1e-3 * (i + 1)) < 1e-9);
      assert_true(r.tasks[i].record_id > 0);
    } else {
      assert_string_equal(r.tasks[i].source, "default");
    }
    assert_null(r.tasks[i].fallback_note);
  }
  assert_non_null(r.warning);
  assert_non_null(strstr(r.warning, dbp));
  assert_null(strstr(r.warning, r.tasks[0].hash));
  ts_graph_compile_report_clear(&r);
  ts_db_close(db);
  run_and_compare("resnet50_small", g, out);

  /* records of another target are not used */
  db = make_db(dbp, g, 2, "llvm -mcpu=x86-64 -num-cores=3", false);
  o = options(out, db);
  memset(&r, 0, sizeof r);
  if (ts_graph_compile(g, &o, &r, &err)) fail_msg("compile: %s", err.msg);
  for (int i = 0; i < r.n_tasks; i++)
    assert_string_equal(r.tasks[i].source, "default");
  ts_graph_compile_report_clear(&r);
  ts_db_close(db);
  ts_graph_free(g);
}

static void test_corrupt_record_falls_back(void **state) {
  (void)state;
  ts_error err;
  ts_graph *g = load_model("resnet50_small", NULL, 0, NULL, &err);
  if (!g) fail_msg("%s", err.msg);
  const char *dbp = OUT_DIR "/corrupt.db";
  mkdir(OUT_DIR, 0755);
  ts_db *db = make_db(dbp, g, 1, "llvm", true);
  char out[512];
  out_path("resnet50_small_corrupt", out);
  ts_graph_compile_options o = options(out, db);
  ts_graph_compile_report r;
  memset(&r, 0, sizeof r);
  if (ts_graph_compile(g, &o, &r, &err)) fail_msg("compile: %s", err.msg);
  assert_string_equal(r.tasks[0].source, "default");
  assert_non_null(r.tasks[0].fallback_note);
  assert_non_null(r.warning);
  assert_non_null(strstr(r.warning, "unusable record"));
  assert_non_null(strstr(r.warning, r.tasks[0].hash));
  ts_graph_compile_report_clear(&r);
  ts_db_close(db);
  run_and_compare("resnet50_small", g, out);
  ts_graph_free(g);
}

static void test_refusals(void **state) {
  (void)state;
  ts_error err;
  /* a graph operator that is not a kernel: refused, naming it */
  ts_graph *g = load_model("ops_small", NULL, 0, NULL, &err);
  if (!g) fail_msg("%s", err.msg);
  char out[512];
  out_path("ops_small", out);
  unlink(out);
  ts_graph_compile_options o = options(out, NULL);
  ts_graph_compile_report r;
  memset(&r, 0, sizeof r);
  int rc = ts_graph_compile(g, &o, &r, &err);
  bool has_op = false;
  for (int i = 0; i < ts_graph_n_nodes(g); i++)
    if (ts_graph_node_kind_of(g, i) == TS_GRAPH_OP &&
        strcmp(ts_graph_node_op(g, i), "Reshape"))
      has_op = true;
  if (has_op) {
    assert_int_equal(rc, TS_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "node '"));
    assert_int_equal(access(out, F_OK), -1);
  } else {
    assert_int_equal(rc, TS_OK);
    ts_graph_compile_report_clear(&r);
    run_and_compare("ops_small", g, out);
  }
  ts_graph_free(g);

  /* a folder that does not exist, a missing runtime, a bad target */
  g = load_model("resnet50_small", NULL, 0, NULL, &err);
  assert_non_null(g);
  o = options(OUT_DIR "/no/such/dir/m.so", NULL);
  assert_int_not_equal(ts_graph_compile(g, &o, &r, &err), TS_OK);
  out_path("resnet50_small_norT", out);
  unlink(out);
  o = options(out, NULL);
  o.runtime_dir = OUT_DIR "/no-runtime-here";
  assert_int_not_equal(ts_graph_compile(g, &o, &r, &err), TS_OK);
  assert_int_equal(access(out, F_OK), -1);
  o = options(out, NULL);
  o.target = "lvm";
  assert_int_equal(ts_graph_compile(g, &o, &r, &err), TS_EINVAL);
  ts_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_compile_no_db),
      cmocka_unit_test(test_compile_with_db),
      cmocka_unit_test(test_corrupt_record_falls_back),
      cmocka_unit_test(test_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, free_references);
}
