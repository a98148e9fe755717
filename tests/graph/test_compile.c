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

/* Library dispatch: with --dispatch vendor every task oneDNN can run goes
 * to it (convolutions with their epilogues in the CNNs, the matrix products
 * of BERT), and the library still gives the reference outputs. */
static void test_dispatch_vendor(void **state) {
  (void)state;
  static const char *const bert_shapes[] = {"input_ids=1x16",
                                            "attention_mask=1x16"};
  const char *const models[] = {"resnet50_small", "mobilenet_v2_small",
                                "csrnet_small", "bert_small"};
  for (size_t k = 0; k < sizeof models / sizeof models[0]; k++) {
    bool bert = !strcmp(models[k], "bert_small");
    ts_error err;
    ts_graph *g = load_model(models[k], bert ? bert_shapes : NULL, bert ? 2 : 0,
                             NULL, &err);
    if (!g) fail_msg("%s: %s", models[k], err.msg);
    char out[512], name[96];
    snprintf(name, sizeof name, "%s_vendor", models[k]);
    out_path(name, out);
    ts_graph_compile_options o = options(out, NULL);
    o.dispatch = TS_DISPATCH_VENDOR;
    ts_graph_compile_report r;
    memset(&r, 0, sizeof r);
    if (ts_graph_compile(g, &o, &r, &err))
      fail_msg("compile %s: %s", models[k], err.msg);
    ts_graph_task *tasks;
    int n_tasks;
    assert_int_equal(ts_graph_tasks(g, &tasks, &n_tasks, &err), TS_OK);
    int n_vendor = 0;
    for (int i = 0; i < r.n_tasks; i++) {
      bool v = !strcmp(r.tasks[i].source, "vendor");
      n_vendor += v;
      /* every describable task goes to oneDNN; no other does */
      if (!v && tasks[i].vendor)
        fail_msg("%s: task %s not dispatched: %s", models[k], r.tasks[i].name,
                 r.tasks[i].dispatch_note ? r.tasks[i].dispatch_note : "?");
      if (v) assert_non_null(tasks[i].vendor);
    }
    if (n_vendor == 0) fail_msg("%s: no task went to oneDNN", models[k]);
    /* not only products (an attention group, which has no vendor form,
     * aside) */
    for (int i = 0; bert && i < r.n_tasks; i++)
      if ((strstr(r.tasks[i].name, "softmax") &&
           !strstr(r.tasks[i].name, "softmax_matmul")) ||
          strstr(r.tasks[i].name, "layernorm"))
        assert_string_equal(r.tasks[i].source, "vendor");
    free(tasks);
    ts_graph_compile_report_clear(&r);
    run_and_compare(models[k], g, out);
    ts_graph_free(g);
  }
}

/* --dispatch best follows the database: a task whose stored oneDNN level
 * ran faster side by side goes to oneDNN, one where the kernel ran faster
 * stays a kernel, and a task with no measurement stays a kernel. */
static void test_dispatch_best(void **state) {
  (void)state;
  ts_error err;
  ts_graph *g = load_model("resnet50_small", NULL, 0, NULL, &err);
  if (!g) fail_msg("%s", err.msg);
  const char *dbp = OUT_DIR "/dispatch.db";
  mkdir(OUT_DIR, 0755);
  unlink(dbp);
  ts_db *db = NULL;
  if (ts_db_open(dbp, NULL, &db, &err)) fail_msg("db: %s", err.msg);
  ts_graph_task *tasks;
  int n_tasks;
  assert_int_equal(ts_graph_tasks(g, &tasks, &n_tasks, &err), TS_OK);
  ts_target *t;
  assert_int_equal(ts_target_parse("llvm", &t, &err), TS_OK);
  int faster = -1, slower = -1, unmeasured = -1;
  for (int i = 0; i < n_tasks; i++) {
    if (!tasks[i].vendor) continue;
    int *slot = faster < 0 ? &faster : slower < 0 ? &slower : &unmeasured;
    if (*slot >= 0) continue;
    *slot = i;
    if (slot == &unmeasured) continue;
    int64_t wid;
    assert_int_equal(ts_db_commit_workload(db, tasks[i].func, NULL, &wid),
                     TS_OK);
    /* side_ratio: oneDNN latency / the kernel's */
    assert_int_equal(ts_db_baseline_put_side(db, wid, ts_target_str(t),
                                             "onednn", 2, 10.0,
                                             slot == &faster ? 0.5 : 2.0, 7),
                     TS_OK);
  }
  assert_true(faster >= 0 && slower >= 0 && unmeasured >= 0);
  char out[512];
  out_path("resnet50_small_best", out);
  ts_graph_compile_options o = options(out, db);
  o.dispatch = TS_DISPATCH_BEST;
  ts_graph_compile_report r;
  memset(&r, 0, sizeof r);
  if (ts_graph_compile(g, &o, &r, &err)) fail_msg("compile: %s", err.msg);
  assert_string_equal(r.tasks[faster].source, "vendor");
  assert_non_null(r.tasks[faster].dispatch_note);
  assert_non_null(strstr(r.tasks[faster].dispatch_note, "side by side"));
  assert_string_equal(r.tasks[slower].source, "default");
  assert_string_equal(r.tasks[unmeasured].source, "default");
  for (int i = 0; i < r.n_tasks; i++)
    if (i != faster) assert_string_not_equal(r.tasks[i].source, "vendor");
  ts_graph_compile_report_clear(&r);
  run_and_compare("resnet50_small", g, out);

  /* the same with --dispatch tuned: no oneDNN */
  o.dispatch = TS_DISPATCH_TUNED;
  memset(&r, 0, sizeof r);
  if (ts_graph_compile(g, &o, &r, &err)) fail_msg("compile: %s", err.msg);
  for (int i = 0; i < r.n_tasks; i++)
    assert_string_not_equal(r.tasks[i].source, "vendor");
  ts_graph_compile_report_clear(&r);
  ts_target_free(t);
  free(tasks);
  ts_db_close(db);
  ts_graph_free(g);
}

/* Without the vendor library (a runtime folder that lacks
 * libtessera_dnnl.so), --dispatch vendor falls back to the kernels, each
 * task saying why, and the library is still built and right. */
static void test_dispatch_fallback(void **state) {
  (void)state;
  ts_error err;
  ts_graph *g = load_model("mobilenet_v2_small", NULL, 0, NULL, &err);
  if (!g) fail_msg("%s", err.msg);
  const char *rtdir = OUT_DIR "/rt-without-vendor";
  mkdir(OUT_DIR, 0755);
  mkdir(rtdir, 0755);
  char link[600];
  snprintf(link, sizeof link, "%s/libtessera_rt.so", rtdir);
  unlink(link);
  assert_int_equal(symlink(TS_BINARY_DIR "/libtessera_rt.so", link), 0);
  snprintf(link, sizeof link, "%s/libtessera_rt.so.0", rtdir);
  unlink(link);
  assert_int_equal(symlink(TS_BINARY_DIR "/libtessera_rt.so.0", link), 0);
  char out[512];
  out_path("mobilenet_v2_small_fallback", out);
  ts_graph_compile_options o = options(out, NULL);
  o.runtime_dir = rtdir;
  o.dispatch = TS_DISPATCH_VENDOR;
  ts_graph_compile_report r;
  memset(&r, 0, sizeof r);
  if (ts_graph_compile(g, &o, &r, &err)) fail_msg("compile: %s", err.msg);
  int notes = 0;
  for (int i = 0; i < r.n_tasks; i++) {
    assert_string_not_equal(r.tasks[i].source, "vendor");
    if (r.tasks[i].dispatch_note) {
      assert_non_null(strstr(r.tasks[i].dispatch_note, "vendor call refused"));
      notes++;
    }
  }
  assert_true(notes > 0);
  ts_graph_compile_report_clear(&r);
  run_and_compare("mobilenet_v2_small", g, out);
  ts_graph_free(g);
}

/* The vendor library refuses malformed call descriptions with a message. */
static void test_vendor_descriptions(void **state) {
  (void)state;
  void *h = dlopen(TS_BINARY_DIR "/libtessera_dnnl.so", RTLD_NOW | RTLD_LOCAL);
  if (!h) fail_msg("dlopen: %s", dlerror());
  int (*create)(const char *, void *const *, int, void **, char *, size_t);
  void (*destroy)(void *);
  *(void **)&create = dlsym(h, "ts_vendor_dnnl_create");
  *(void **)&destroy = dlsym(h, "ts_vendor_dnnl_destroy");
  assert_non_null(create);
  assert_non_null(destroy);
  static float w[64 * 64];
  void *args[4] = {NULL, w, NULL, NULL};
  const struct {
    const char *desc, *want;
  } bad[] = {
      {"", "no operation"},
      {"gemm src=0 wei=1 dst=2", "unknown word 'gemm'"},
      {"matmul A=4x8 B=8x4 C=4x4 wconst=1 src=0 wei=1", "operand places"},
      {"matmul A=4x0 B=8x4 C=4x4 src=0 wei=1 dst=2", "bad shape"},
      {"matmul A=4x8 B=8x4 C=4x4 wconst=1 src=0 wei=1 dst=2 post=swish",
       "unknown post-op"},
      {"matmul A=4x8 B=8x4 C=4x4 src=0 wei=1 dst=2 post=add:x:c",
       "bad operand"},
      {"conv layout=nhwc n=1 c=8 h=4 w=4 o=8 oh=4 ow=4 wconst=0 src=0 wei=1 "
       "dst=2",
       "not constant"},
      {"matmul A=4x8 B=8x4 C=4x4 wconst=1 src=0 wei=2 dst=3",
       "no constant weights"},
      {"matmul A=4x8 B=9x4 C=4x4 wconst=1 src=0 wei=1 dst=2", "failed"},
      {"softmax X=4x8 axis=2 src=0 dst=1", "axis in it"},
      {"softmax axis=0 src=0 dst=1", "axis in it"},
      {"softmax X=4x8 axis=1 src=0 dst=1 post=relu", "takes no post-ops"},
      {"lnorm X=4x8 eps=1e-5 src=0 dst=1", "needs X=ROWSxLEN and scale"},
      {"lnorm X=32 eps=1e-5 src=0 scale=1 dst=2", "needs X=ROWSxLEN"},
      {"lnorm X=4x8 eps=x src=0 scale=1 dst=2", "bad epsilon"},
      {"matmul A=4x8 B=8x4 C=4x4 wconst=1 src=0 wei=1 dst=2 dt=s8s8",
       "unknown data types"},
      {"matmul A=4x8 B=8x4 C=4x4 wconst=1 src=0 wei=1 dst=2 dt=u8s8",
       "needs a conv or matmul without bias and dq"},
      {"matmul A=4x8 B=8x4 C=4x4 wconst=1 src=0 wei=1 dst=2 dq=2:3",
       "need dt=u8s8"},
      {"matmul A=4x8 B=8x4 C=4x4 wconst=1 src=0 wei=1 dst=2 dt=u8s8 dq=2",
       "bad dq"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    void *op = NULL;
    char why[700] = "";
    if (create(bad[i].desc, args, 1, &op, why, sizeof why) == 0)
      fail_msg("'%s' accepted", bad[i].desc);
    assert_null(op);
    if (!strstr(why, bad[i].want))
      fail_msg("'%s': got '%s', want '%s'", bad[i].desc, why, bad[i].want);
  }
  void *op = NULL;
  char why[700] = "";
  if (create("matmul A=4x8 B=8x4 C=4x4 wconst=1 src=0 wei=1 dst=2 post=relu",
             args, 1, &op, why, sizeof why))
    fail_msg("a good description refused: %s", why);
  destroy(op);

  /* an in-place residual (the output overwrites the tensor it adds, as
   * the memory plan arranges) with a long reduction, which oneDNN splits:
   * the result is still A.B + R */
  int (*run)(void *, void *const *);
  *(void **)&run = dlsym(h, "ts_vendor_dnnl_run");
  assert_non_null(run);
  enum { M = 8, K = 4096, N = 64 };
  float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N);
  float *io = malloc(sizeof(float) * M * N),
        *want = malloc(sizeof(float) * M * N);
  for (int i = 0; i < M * K; i++) a[i] = (float)((i * 37) % 11) / 8 - 0.5f;
  for (int i = 0; i < K * N; i++) b[i] = (float)((i * 13) % 7) / 8 - 0.4f;
  for (int i = 0; i < M * N; i++) io[i] = (float)(i % 5);
  for (int m = 0; m < M; m++)
    for (int n = 0; n < N; n++) {
      double acc = io[m * N + n];
      for (int k = 0; k < K; k++) acc += (double)a[m * K + k] * b[k * N + n];
      want[m * N + n] = (float)acc;
    }
  void *ip[4] = {a, b, io, io};
  if (create("matmul A=8x4096 B=4096x64 C=8x64 wconst=1 src=0 wei=1 "
             "post=add:2:full dst=3",
             ip, 2, &op, why, sizeof why))
    fail_msg("in-place residual refused: %s", why);
  assert_int_equal(run(op, ip), 0);
  for (int i = 0; i < M * N; i++)
    if (fabsf(io[i] - want[i]) > 1e-3f * (1 + fabsf(want[i])))
      fail_msg("in-place residual: element %d is %g, want %g", i, io[i],
               want[i]);
  destroy(op);
  free(a), free(b), free(io), free(want);

  /* softmax over the middle axis of [3, 5, 4], and a layer normalization
   * of [4, 32] rows with scale and shift, in place (the output overwrites
   * the input), against double-precision references */
  float x[3 * 5 * 4], sm[3 * 5 * 4];
  for (int i = 0; i < 60; i++) x[i] = sm[i] = (float)((i * 29) % 17) / 4 - 2;
  void *sp[2] = {sm, sm};
  if (create("softmax X=3x5x4 axis=1 src=0 dst=1", sp, 1, &op, why, sizeof why))
    fail_msg("softmax refused: %s", why);
  assert_int_equal(run(op, sp), 0);
  destroy(op);
  for (int o = 0; o < 3; o++)
    for (int in = 0; in < 4; in++) {
      double mx = -1e30, sum = 0;
      for (int k = 0; k < 5; k++) mx = fmax(mx, x[(o * 5 + k) * 4 + in]);
      for (int k = 0; k < 5; k++) sum += exp(x[(o * 5 + k) * 4 + in] - mx);
      for (int k = 0; k < 5; k++) {
        int at = (o * 5 + k) * 4 + in;
        double want1 = exp(x[at] - mx) / sum;
        if (fabs(sm[at] - want1) > 1e-6)
          fail_msg("softmax: element %d is %g, want %g", at, sm[at], want1);
      }
    }
  float ln[4 * 32], lx[4 * 32], gamma[32], beta[32];
  for (int i = 0; i < 4 * 32; i++) lx[i] = ln[i] = (float)((i * 7) % 13) - 6;
  for (int i = 0; i < 32; i++) gamma[i] = 0.5f + i / 32.f, beta[i] = i / 8.f;
  void *lp[4] = {ln, gamma, beta, ln};
  if (create("lnorm X=4x32 eps=1e-5 src=0 scale=1 shift=2 dst=3", lp, 1, &op,
             why, sizeof why))
    fail_msg("lnorm refused: %s", why);
  assert_int_equal(run(op, lp), 0);
  destroy(op);
  for (int r = 0; r < 4; r++) {
    double mean = 0, var = 0;
    for (int k = 0; k < 32; k++) mean += lx[r * 32 + k] / 32.0;
    for (int k = 0; k < 32; k++)
      var += (lx[r * 32 + k] - mean) * (lx[r * 32 + k] - mean) / 32.0;
    for (int k = 0; k < 32; k++) {
      double want1 =
          (lx[r * 32 + k] - mean) / sqrt(var + 1e-5) * gamma[k] + beta[k];
      if (fabs(ln[r * 32 + k] - want1) > 1e-4 * (1 + fabs(want1)))
        fail_msg("lnorm: element %d is %g, want %g", r * 32 + k, ln[r * 32 + k],
                 want1);
    }
  }
  dlclose(h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_compile_no_db),
      cmocka_unit_test(test_compile_with_db),
      cmocka_unit_test(test_corrupt_record_falls_back),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_dispatch_vendor),
      cmocka_unit_test(test_dispatch_best),
      cmocka_unit_test(test_dispatch_fallback),
      cmocka_unit_test(test_vendor_descriptions),
  };
  return cmocka_run_group_tests(tests, NULL, free_references);
}
