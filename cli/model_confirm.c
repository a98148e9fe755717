/*
 * model_confirm.c — a model's tasks confirmed in the compiled model itself.
 *
 * A task's candidates are timed alone (tuner/confirm.c): warm, or cold as
 * an imitation of a model's layer. Neither is the model. In ResNet-50 a
 * stride-2 conv whose best schedule ran 1.37 ms alone (1.54 ms with its
 * weights evicted) took 2.4 ms in the model, where oneDNN's call, slower
 * alone, took 1.8 ms: the layer streams 9 MB of weights from memory into a
 * cache full of the layers before it, and schedules differ in how well they
 * stream.
 *
 * So the model is compiled several times: variant k runs each task's record
 * of rank k in the database (k < top), and one more variant runs every task
 * a vendor library can run with it. The libraries run the same random
 * inputs in interleaved rounds, each run profiled, and each task's time in
 * each variant is the median over the runs of its calls' seconds per call.
 * Every task then has its candidates' times in the model, side by side:
 * they are stored as the task's confirmation (ts_db_confirm, replacing the
 * one before) and the vendor's as its side-by-side level against the
 * fastest record (ts_db_baseline_put_side), which is what `tessera compile`
 * chooses by. A task's time in a variant depends a little on its
 * neighbours' schedules in that variant (what they leave in the caches);
 * that is part of the measurement, not removed from it.
 */
#include "cli/cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db/db.h"
#include "graph/graph.h"
#include "tuner/tuner.h"

cli_model_confirm_options cli_model_confirm_defaults(void) {
  return (cli_model_confirm_options){.top = 3, .rounds = 5, .runs = 6};
}

/* One compiled variant. */
typedef struct variant {
  char path[4200];
  ts_graph_compile_report rep;
  cli_model_lib lib;
  bool built, open;
  double *secs; /* [task][sample] seconds per call, or (the Winograd
                   weighing) [sample][kernel call] seconds */
} variant;

static unsigned long long lcg(unsigned long long *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s >> 33;
}

/* Seconds per call of each task in one profiled run. */
static void task_seconds(const variant *v, const double *kernel_s, int n_tasks,
                         double *out) {
  for (int t = 0; t < n_tasks; t++) out[t] = 0;
  for (int c = 0; c < v->rep.n_calls; c++)
    out[v->rep.call_task[c]] += kernel_s[c];
  for (int t = 0; t < n_tasks; t++)
    if (v->rep.tasks[t].count > 0) out[t] /= v->rep.tasks[t].count;
}

static double median_of(double *x, int n) {
  qsort(x, (size_t)n, sizeof *x, ts_cmp_double);
  return n ? x[n / 2] : NAN;
}

/* The median of task t's seconds per call in variant v (scratch sorted). */
static double task_median(const variant *v, int t, int samples,
                          double *scratch) {
  memcpy(scratch, v->secs + (size_t)t * (size_t)samples,
         sizeof *scratch * (size_t)samples);
  return median_of(scratch, samples);
}

/* Compiles g into variant x (co's dispatch, rank and vendor pool; the
 * rest filled here) and opens it. EXIT_FAIL with the error printed. */
static int build_variant(variant *x, const ts_graph *g,
                         ts_graph_compile_options *co, ts_db *db,
                         const char *rtdir, const cli_model_confirm_options *o,
                         int v, int n_var, const char *what) {
  co->output = x->path;
  co->target = o->target;
  co->db = db;
  co->runtime_dir = rtdir;
  if (o->progress) {
    fprintf(o->progress,
            "in-model confirmation: compiling variant %d of %d (%s)\n", v + 1,
            n_var, what);
    fflush(o->progress);
  }
  ts_error err;
  ts_error_clear(&err);
  if (ts_graph_compile(g, co, &x->rep, &err) != TS_OK) {
    cli_error("in-model confirmation: compile", &err);
    return EXIT_FAIL;
  }
  x->built = true;
  if (cli_model_lib_open(x->path, o->threads, &x->lib) != EXIT_OK)
    return EXIT_FAIL;
  x->open = true;
  if (x->lib.num_kernels(x->lib.model) != x->rep.n_calls) {
    fprintf(stderr,
            "tessera: error: in-model confirmation: variant %d "
            "runs %d kernels, its report says %d\n",
            v, x->lib.num_kernels(x->lib.model), x->rep.n_calls);
    return EXIT_FAIL;
  }
  return EXIT_OK;
}

/* Closes, clears and removes the variants (and the folder dir, or NULL). */
static void free_variants(variant *vs, int n_var, const char *dir) {
  for (int v = 0; vs && v < n_var; v++) {
    if (vs[v].open) cli_model_lib_close(&vs[v].lib);
    if (vs[v].built) ts_graph_compile_report_clear(&vs[v].rep);
    free(vs[v].secs);
    if (dir) unlink(vs[v].path);
  }
  if (dir) rmdir(dir);
  free(vs);
}

/* A temporary folder for the variants' libraries into dir; false (the
 * error printed) when none can be made. */
static bool make_dir(char *dir, size_t cap) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, cap, "%s/tessera-confirm-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (mkdtemp(dir)) return true;
  fprintf(stderr, "tessera: error: cannot make a folder in '%s': %s\n",
          tmp && *tmp ? tmp : "/tmp", strerror(errno));
  return false;
}

/* Receives one profiled run: variant v, sample index, each kernel call's
 * seconds. */
typedef void (*sample_fn)(void *ctx, int v, int sample, const double *kern);

/* The same random inputs (uniform in [-1, 1) for floating-point ones, zero
 * for integer ones, so indices stay in range) through every variant in
 * o->rounds interleaved rounds, each variant warmed by one run and then
 * profiled o->runs times; fn gets every profiled run. */
static int run_rounds(variant *vs, int n_var,
                      const cli_model_confirm_options *o, sample_fn fn,
                      void *ctx) {
  const cli_model_lib *l0 = &vs[0].lib;
  int n_in = l0->num_inputs(l0->model), n_out = l0->num_outputs(l0->model);
  void **ins = calloc((size_t)n_in + 1, sizeof *ins);
  void **outs = calloc((size_t)n_out + 1, sizeof *outs);
  int max_calls = 0, rc = EXIT_FAIL;
  for (int v = 0; v < n_var; v++)
    if (vs[v].rep.n_calls > max_calls) max_calls = vs[v].rep.n_calls;
  double *kern = calloc((size_t)max_calls + 1, sizeof *kern);
  if (!ins || !outs || !kern) {
    fprintf(stderr, "tessera: error: out of memory\n");
    goto done;
  }
  unsigned long long seed = 1;
  for (int i = 0; i < n_in; i++) {
    ts_model_tensor_info ti;
    if (l0->input_info(l0->model, i, &ti)) goto done;
    size_t bytes = (size_t)((ti.bytes + 63) & ~(int64_t)63) + 64;
    if (!(ins[i] = aligned_alloc(64, bytes))) goto done;
    memset(ins[i], 0, bytes);
    if (ti.dtype == TS_MODEL_FLOAT32)
      for (int64_t k = 0; k < ti.bytes / 4; k++)
        ((float *)ins[i])[k] = (float)lcg(&seed) / 2147483648.0f * 2 - 1;
  }
  for (int i = 0; i < n_out; i++) {
    ts_model_tensor_info ti;
    if (l0->output_info(l0->model, i, &ti)) goto done;
    if (!(outs[i] = aligned_alloc(64, (size_t)((ti.bytes + 63) & ~63) + 64)))
      goto done;
  }
  for (int r = 0; r < o->rounds; r++) {
    if (o->progress) {
      fprintf(o->progress, "in-model confirmation: round %d of %d\n", r + 1,
              o->rounds);
      fflush(o->progress);
    }
    for (int j = 0; j < n_var; j++) {
      int v = (j + r) % n_var;
      cli_model_lib *l = &vs[v].lib;
      if (l->run(l->model, (const void *const *)ins, outs)) {
        fprintf(stderr, "tessera: error: in-model confirmation: %s\n",
                l->last_error());
        goto done;
      }
      for (int k = 0; k < o->runs; k++) {
        if (l->profile(l->model, (const void *const *)ins, outs, kern)) {
          fprintf(stderr, "tessera: error: in-model confirmation: %s\n",
                  l->last_error());
          goto done;
        }
        fn(ctx, v, r * o->runs + k, kern);
      }
    }
  }
  rc = EXIT_OK;
done:
  for (int i = 0; ins && i < n_in; i++) free(ins[i]);
  for (int i = 0; outs && i < n_out; i++) free(outs[i]);
  free(ins);
  free(outs);
  free(kern);
  return rc;
}

/* The record confirmation's sample: each task's seconds per call. */
typedef struct per_task_ctx {
  variant *vs;
  int n_tasks, samples;
  double *per;
} per_task_ctx;

static void per_task_sample(void *ctx, int v, int sample, const double *kern) {
  per_task_ctx *c = ctx;
  variant *x = &c->vs[v];
  task_seconds(x, kern, c->n_tasks, c->per);
  for (int t = 0; t < c->n_tasks; t++)
    x->secs[(size_t)t * (size_t)c->samples + (size_t)sample] = c->per[t];
}

/* Stores task t's figures; prints its line. Variants 0..n_rec-1 run the
 * records of each rank, vendor_v (or -1) the vendor calls, now_v the model
 * as compile builds it now: where a candidate ran there too, that figure
 * is kept, its neighbours being the ones it will have. */
static void store_task(ts_db *db, const ts_graph_task *gt, int t,
                       const variant *vs, int n_rec, int vendor_v, int now_v,
                       const cli_model_confirm_options *o, int samples,
                       double *scratch, double sums[3]) {
  int64_t ids[16];
  double secs[16], spread[16];
  int n = 0;
  for (int v = 0; v < n_rec; v++) {
    const ts_graph_compile_task *ct = &vs[v].rep.tasks[t];
    if (strcmp(ct->source, "db")) continue;
    bool dup = false;
    for (int k = 0; k < n && !dup; k++) dup = ids[k] == ct->record_id;
    if (dup) continue;
    memcpy(scratch, vs[v].secs + (size_t)t * (size_t)samples,
           sizeof *scratch * (size_t)samples);
    double med = median_of(scratch, samples);
    if (!(med > 0)) continue;
    ids[n] = ct->record_id;
    secs[n] = med;
    spread[n++] = (scratch[samples - 1] - scratch[0]) / med;
  }
  double vendor_s = NAN;
  if (vendor_v >= 0 && !strcmp(vs[vendor_v].rep.tasks[t].source, "vendor"))
    vendor_s = task_median(&vs[vendor_v], t, samples, scratch);
  const ts_graph_compile_task *nt = &vs[now_v].rep.tasks[t];
  double now_s = task_median(&vs[now_v], t, samples, scratch);
  if (!strcmp(nt->source, "vendor") && now_s > 0) vendor_s = now_s;
  if (!strcmp(nt->source, "db") && now_s > 0) {
    int k = 0;
    while (k < n && ids[k] != nt->record_id) k++;
    if (k == n && n < 16) ids[n++] = nt->record_id;
    if (k < n) {
      secs[k] = now_s;
      spread[k] = (scratch[samples - 1] - scratch[0]) / now_s;
    }
  }
  int best = -1;
  for (int k = 0; k < n; k++)
    if (best < 0 || secs[k] < secs[best]) best = k;
  int64_t wid = 0;
  bool have = n > 0 && ts_db_find_workload(db, gt->func, &wid) == TS_OK;
  if (have &&
      ts_db_confirm(db, wid, o->target, ids, secs, spread, n, samples) != TS_OK)
    fprintf(stderr, "tessera: warning: task %s: not stored: %s\n",
            vs[0].rep.tasks[t].name, ts_db_errmsg(db));
  /* (without a record, no side-by-side level is stored: compile keeps the
   * default kernel) */
  bool vendor_wins = isfinite(vendor_s) && best >= 0 && vendor_s < secs[best];
  if (have && isfinite(vendor_s) && best >= 0 && gt->flops > 0 &&
      ts_db_baseline_put_side(db, wid, o->target, "onednn", o->threads,
                              gt->flops / vendor_s * 1e-9,
                              vendor_s / secs[best], samples) != TS_OK)
    fprintf(stderr, "tessera: warning: task %s: vendor level not stored: %s\n",
            vs[0].rep.tasks[t].name, ts_db_errmsg(db));
  double chosen = vendor_wins ? vendor_s : best >= 0 ? secs[best] : NAN;
  /* the sums: the model as compiled before, oneDNN wherever it runs the
   * task, and the choice */
  sums[0] += now_s * gt->count;
  sums[1] += (isfinite(vendor_s) ? vendor_s : now_s) * gt->count;
  sums[2] += (isfinite(chosen) ? chosen : now_s) * gt->count;
  if (!o->out) return;
  fprintf(o->out, "%3d  %-34.34s %5d", t, vs[0].rep.tasks[t].name, gt->count);
  for (int k = 0; k < o->top; k++)
    if (k < n)
      fprintf(o->out, " %10.1f", secs[k] * 1e6);
    else
      fprintf(o->out, " %10s", "-");
  if (isfinite(vendor_s))
    fprintf(o->out, " %10.1f", vendor_s * 1e6);
  else
    fprintf(o->out, " %10s", "-");
  fprintf(o->out, " %10.1f", now_s * 1e6);
  if (vendor_wins)
    fprintf(o->out, "  oneDNN\n");
  else if (best >= 0)
    fprintf(o->out, "  record %lld\n", (long long)ids[best]);
  else
    fprintf(o->out, "  -\n");
}

int cli_model_confirm(ts_db *db, const ts_graph *g,
                      const cli_model_confirm_options *opts) {
  cli_model_confirm_options o = *opts;
  if (o.top < 1 || o.top > 8 || o.rounds < 1 || o.runs < 1 || o.threads < 1 ||
      !o.target) {
    fprintf(stderr, "tessera: error: in-model confirmation: bad options\n");
    return EXIT_FAIL;
  }
  ts_error err;
  ts_error_clear(&err);
  ts_graph_task *gt = NULL;
  int n_tasks = 0;
  if (ts_graph_tasks(g, &gt, &n_tasks, &err) != TS_OK) {
    cli_error("in-model confirmation", &err);
    return EXIT_FAIL;
  }
  bool any_vendor = false;
  for (int t = 0; t < n_tasks; t++) any_vendor |= gt[t].vendor != NULL;
  char rtdir[4096], dnnl[4200];
  if (ts_graph_runtime_dir(rtdir, sizeof rtdir, &err) != TS_OK) {
    cli_error("cannot find the runtime library", &err);
    free(gt);
    return EXIT_FAIL;
  }
  /* a build without oneDNN has no vendor variant */
  snprintf(dnnl, sizeof dnnl, "%s/libtessera_dnnl.so", rtdir);
  if (access(dnnl, R_OK) != 0) any_vendor = false;
  /* ranks, the vendor calls, and the model as compile builds it now */
  int n_var = o.top + (any_vendor ? 1 : 0) + 1;
  int vendor_v = any_vendor ? o.top : -1, now_v = n_var - 1;
  int samples = o.rounds * o.runs;
  variant *vs = calloc((size_t)n_var, sizeof *vs);
  double *scratch = calloc((size_t)samples + 1, sizeof *scratch);
  char dir[4096];
  int rc = EXIT_FAIL;
  bool made_dir = false;
  if (!vs || !scratch) {
    fprintf(stderr, "tessera: error: out of memory\n");
    goto done;
  }
  if (!(made_dir = make_dir(dir, sizeof dir))) goto done;
  /* the variants */
  for (int v = 0; v < n_var; v++) {
    variant *x = &vs[v];
    snprintf(x->path, sizeof x->path, "%s/v%d.so", dir, v);
    ts_graph_compile_options co;
    memset(&co, 0, sizeof co);
    co.dispatch = v == vendor_v ? TS_DISPATCH_VENDOR
                  : v == now_v  ? TS_DISPATCH_BEST
                                : TS_DISPATCH_TUNED;
    co.rank = v < o.top ? v : 0;
    co.vendor_pool = any_vendor; /* the same threads in every variant */
    char what[64];
    snprintf(what, sizeof what, "%s",
             v == vendor_v ? "vendor calls"
             : v == now_v  ? "as compiled now"
                           : "records");
    if (build_variant(x, g, &co, db, rtdir, &o, v, n_var, what) != EXIT_OK)
      goto done;
    if (x->rep.n_tasks != n_tasks) {
      fprintf(stderr,
              "tessera: error: in-model confirmation: variant %d "
              "has %d tasks, the graph %d\n",
              v, x->rep.n_tasks, n_tasks);
      goto done;
    }
    x->secs = calloc((size_t)n_tasks * (size_t)samples + 1, sizeof *x->secs);
    if (!x->secs) {
      fprintf(stderr, "tessera: error: out of memory\n");
      goto done;
    }
  }
  {
    per_task_ctx pc = {vs, n_tasks, samples, NULL};
    pc.per = calloc((size_t)n_tasks + 1, sizeof *pc.per);
    int trc =
        pc.per ? run_rounds(vs, n_var, &o, per_task_sample, &pc) : EXIT_FAIL;
    if (!pc.per) fprintf(stderr, "tessera: error: out of memory\n");
    free(pc.per);
    if (trc != EXIT_OK) goto done;
  }
  if (o.out) {
    fprintf(o.out,
            "in-model confirmation (%d variants, %d rounds of %d runs; "
            "microseconds per call in the model):\n"
            "  #  %-34s %5s",
            n_var, o.rounds, o.runs, "task", "calls");
    for (int k = 0; k < o.top; k++) fprintf(o.out, "     rank %d", k);
    fprintf(o.out, " %10s %10s  runs it\n", "oneDNN", "before");
  }
  double sums[3] = {0, 0, 0};
  for (int t = 0; t < n_tasks; t++)
    store_task(db, &gt[t], t, vs, o.top, vendor_v, now_v, &o, samples, scratch,
               sums);
  if (o.out)
    fprintf(o.out,
            "the tasks' time per run in the model: %.2f ms as compiled "
            "before, %.2f ms with oneDNN wherever it runs the task, %.2f ms "
            "with the choices now stored\n",
            sums[0] * 1e3, sums[1] * 1e3, sums[2] * 1e3);
  rc = EXIT_OK;
done:
  free_variants(vs, n_var, made_dir ? dir : NULL);
  free(scratch);
  free(gt);
  return rc;
}

/* ---- Winograd's forms weighed in the model ----
 *
 * The winograd pass chooses per conv between the direct form, F(2x2) and
 * F(4x4) by the records of each form's tasks, timed alone and warm. In the
 * model the transformed weights come from memory and the neighbours'
 * schedules leave the caches otherwise (ResNet-18's 14x14x256 convs: F(4x4)
 * slower alone, faster in the model). So the model is compiled once as
 * compile builds it now and once per other form of each distinct conv (the
 * convs of one key, all of them), the variants timed side by side, and
 * each form's time is what its variant runs beyond the base (and the base
 * beyond it): per task, its calls in one and not the other times its
 * seconds per call. The figures go to the database's `choices`, by which
 * the pass then chooses. */

/* A distinct conv the pass weighed: its key, a node, how many, and the
 * form the base variant has. */
typedef struct wino_key {
  char key[33];
  char node[128];
  int count, base_tile;
  double sec[3]; /* per form (0, 2, 4): seconds per run, NAN unmeasured */
  int64_t samples[3];
} wino_key;

static int tile_index(int m) { return m == 4 ? 2 : m == 2 ? 1 : 0; }

/* The distinct keys of g's weighed convs into *keys (malloc'd). */
static int collect_keys(const ts_graph *g, wino_key **keys, int *n) {
  const ts_winograd_conv *c = NULL;
  int nc = 0;
  ts_graph_winograd_convs(g, &c, &nc);
  *keys = calloc((size_t)nc + 1, sizeof **keys);
  *n = 0;
  if (!*keys) return EXIT_FAIL;
  for (int i = 0; i < nc; i++) {
    if (!c[i].key[0]) continue;
    int k = 0;
    while (k < *n && strcmp((*keys)[k].key, c[i].key)) k++;
    wino_key *w = &(*keys)[k];
    if (k == *n) {
      (*n)++;
      memcpy(w->key, c[i].key, sizeof w->key);
      snprintf(w->node, sizeof w->node, "%s", c[i].node);
      w->base_tile = c[i].tile;
      for (int f = 0; f < 3; f++) w->sec[f] = NAN;
    }
    w->count++;
  }
  return EXIT_OK;
}

/* The variants' per-call samples. */
typedef struct call_ctx {
  variant *vs;
  int samples;
} call_ctx;

static void per_call_sample(void *ctx, int v, int sample, const double *kern) {
  call_ctx *c = ctx;
  variant *x = &c->vs[v];
  memcpy(x->secs + (size_t)sample * (size_t)x->rep.n_calls, kern,
         sizeof *kern * (size_t)x->rep.n_calls);
}

/* The calls of task hash h in variant x. */
static int task_calls(const variant *x, const char *h) {
  for (int t = 0; t < x->rep.n_tasks; t++)
    if (!strcmp(x->rep.tasks[t].hash, h)) return x->rep.tasks[t].count;
  return 0;
}

/* Median over the samples of what a runs beyond b: per task of a, its
 * calls beyond b's count of the same task times its seconds per call in
 * that sample. NAN when a runs nothing beyond b. */
static double beyond(const variant *a, const variant *b, int samples,
                     double *scratch) {
  int n_tasks = a->rep.n_tasks, n_calls = a->rep.n_calls;
  int *extra = calloc((size_t)n_tasks + 1, sizeof *extra);
  double *sum = calloc((size_t)n_tasks + 1, sizeof *sum);
  double med = NAN;
  bool any = false;
  for (int t = 0; extra && t < n_tasks; t++) {
    extra[t] = a->rep.tasks[t].count - task_calls(b, a->rep.tasks[t].hash);
    any |= extra[t] > 0;
  }
  for (int s = 0; extra && sum && any && s < samples; s++) {
    memset(sum, 0, sizeof *sum * (size_t)n_tasks);
    const double *k = a->secs + (size_t)s * (size_t)n_calls;
    for (int c = 0; c < n_calls; c++) sum[a->rep.call_task[c]] += k[c];
    double x = 0;
    for (int t = 0; t < n_tasks; t++)
      if (extra[t] > 0) x += sum[t] / a->rep.tasks[t].count * extra[t];
    scratch[s] = x;
  }
  if (extra && sum && any) med = median_of(scratch, samples);
  free(extra);
  free(sum);
  return med;
}

static void print_form(FILE *f, double s) {
  if (isfinite(s))
    fprintf(f, " %10.1f", s * 1e6);
  else
    fprintf(f, " %10s", "-");
}

int cli_model_confirm_winograd(ts_db *db, cli_wino_loader load, void *ctx,
                               const cli_model_confirm_options *opts) {
  static const int ms[3] = {0, 2, 4};
  cli_model_confirm_options o = *opts;
  if (o.rounds < 1 || o.runs < 1 || o.threads < 1 || !o.target) {
    fprintf(stderr, "tessera: error: in-model weighing: bad options\n");
    return EXIT_FAIL;
  }
  ts_graph *base = NULL;
  wino_key *keys = NULL;
  int n_keys = 0, rc = EXIT_FAIL, n_var = 0;
  variant *vs = NULL;
  int *var_key = NULL, *var_tile = NULL;
  double *scratch = NULL;
  char dir[4096] = "", rtdir[4096];
  bool made_dir = false;
  ts_error err;
  ts_error_clear(&err);
  if (load(ctx, NULL, NULL, 0, &base) != EXIT_OK) goto done;
  if (collect_keys(base, &keys, &n_keys) != EXIT_OK) {
    fprintf(stderr, "tessera: error: out of memory\n");
    goto done;
  }
  if (n_keys == 0) {
    if (o.out) fprintf(o.out, "winograd in the model: no conv to weigh\n");
    rc = EXIT_OK;
    goto done;
  }
  if (ts_graph_runtime_dir(rtdir, sizeof rtdir, &err) != TS_OK) {
    cli_error("cannot find the runtime library", &err);
    goto done;
  }
  /* the base, then each key in each other form */
  n_var = 1 + 2 * n_keys;
  int samples = o.rounds * o.runs;
  vs = calloc((size_t)n_var, sizeof *vs);
  var_key = calloc((size_t)n_var, sizeof *var_key);
  var_tile = calloc((size_t)n_var, sizeof *var_tile);
  scratch = calloc((size_t)samples + 1, sizeof *scratch);
  if (!vs || !var_key || !var_tile || !scratch) {
    fprintf(stderr, "tessera: error: out of memory\n");
    goto done;
  }
  if (!(made_dir = make_dir(dir, sizeof dir))) goto done;
  var_key[0] = -1;
  for (int k = 0, v = 1; k < n_keys; k++)
    for (int f = 0; f < 3; f++)
      if (ms[f] != keys[k].base_tile) {
        var_key[v] = k;
        var_tile[v++] = ms[f];
      }
  for (int v = 0; v < n_var; v++) {
    variant *x = &vs[v];
    snprintf(x->path, sizeof x->path, "%s/w%d.so", dir, v);
    ts_graph *g = base;
    char what[300];
    if (v == 0) {
      snprintf(what, sizeof what, "as compiled now");
    } else {
      const wino_key *w = &keys[var_key[v]];
      const char *key = w->key;
      snprintf(what, sizeof what, "%s%s as %s", w->node,
               w->count > 1 ? " and its like" : "",
               ts_winograd_form_name(var_tile[v]));
      if (load(ctx, &key, &var_tile[v], 1, &g) != EXIT_OK) goto done;
    }
    ts_graph_compile_options co;
    memset(&co, 0, sizeof co);
    co.dispatch = TS_DISPATCH_BEST;
    co.vendor_pool = true; /* the same threads in every variant */
    int brc = build_variant(x, g, &co, db, rtdir, &o, v, n_var, what);
    if (g != base) ts_graph_free(g);
    if (brc != EXIT_OK) goto done;
    x->secs =
        calloc((size_t)samples * (size_t)x->rep.n_calls + 1, sizeof *x->secs);
    if (!x->secs) {
      fprintf(stderr, "tessera: error: out of memory\n");
      goto done;
    }
  }
  call_ctx cc = {vs, samples};
  if (run_rounds(vs, n_var, &o, per_call_sample, &cc) != EXIT_OK) goto done;
  /* each form's time: its variant beyond the base; the base form's: the
   * base beyond the variant (the median of its two variants' figures) */
  for (int v = 1; v < n_var; v++) {
    wino_key *w = &keys[var_key[v]];
    int fi = tile_index(var_tile[v]), bi = tile_index(w->base_tile);
    w->sec[fi] = beyond(&vs[v], &vs[0], samples, scratch);
    w->samples[fi] = samples;
    double b = beyond(&vs[0], &vs[v], samples, scratch);
    if (isfinite(b))
      w->sec[bi] = isfinite(w->sec[bi]) ? (w->sec[bi] + b) / 2 : b;
    w->samples[bi] += samples;
  }
  if (o.out)
    fprintf(o.out,
            "winograd in the model (%d variants, %d rounds of %d runs; "
            "microseconds per run of the convs of one kind):\n"
            "  %-34s %5s %10s %10s %10s  %-8s %s\n",
            n_var, o.rounds, o.runs, "conv", "convs", "direct", "F(2x2)",
            "F(4x4)", "before", "chosen");
  for (int k = 0; k < n_keys; k++) {
    wino_key *w = &keys[k];
    int best = -1;
    for (int f = 0; f < 3; f++) {
      if (!isfinite(w->sec[f]) || !(w->sec[f] > 0)) continue;
      if (best < 0 || w->sec[f] < w->sec[best]) best = f;
      if (ts_db_choice_put(db, o.target, "winograd", w->key,
                           ts_winograd_form_name(ms[f]), w->sec[f],
                           w->samples[f]) != TS_OK)
        fprintf(stderr, "tessera: warning: %s: not stored: %s\n", w->node,
                ts_db_errmsg(db));
    }
    if (!o.out) continue;
    fprintf(o.out, "  %-34.34s %5d", w->node, w->count);
    for (int f = 0; f < 3; f++) print_form(o.out, w->sec[f]);
    fprintf(o.out, "  %-8s %s\n", ts_winograd_form_name(w->base_tile),
            best >= 0 ? ts_winograd_form_name(ms[best]) : "-");
  }
  rc = EXIT_OK;
done:
  free_variants(vs, n_var, made_dir ? dir : NULL);
  ts_graph_free(base);
  free(keys);
  free(var_key);
  free(var_tile);
  free(scratch);
  return rc;
}
