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
  double *secs; /* [task][sample] seconds per call */
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
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/tessera-confirm-XXXXXX",
           tmp && *tmp ? tmp : "/tmp");
  int rc = EXIT_FAIL;
  void **ins = NULL, **outs = NULL;
  double *kern = NULL, *per = NULL;
  int n_in = 0, n_out = 0;
  bool made_dir = false;
  if (!vs || !scratch) {
    fprintf(stderr, "tessera: error: out of memory\n");
    goto done;
  }
  if (!mkdtemp(dir)) {
    fprintf(stderr, "tessera: error: cannot make a folder in '%s': %s\n",
            tmp && *tmp ? tmp : "/tmp", strerror(errno));
    goto done;
  }
  made_dir = true;
  /* the variants */
  for (int v = 0; v < n_var; v++) {
    variant *x = &vs[v];
    snprintf(x->path, sizeof x->path, "%s/v%d.so", dir, v);
    ts_graph_compile_options co;
    memset(&co, 0, sizeof co);
    co.output = x->path;
    co.target = o.target;
    co.db = db;
    co.runtime_dir = rtdir;
    co.dispatch = v == vendor_v ? TS_DISPATCH_VENDOR
                  : v == now_v  ? TS_DISPATCH_BEST
                                : TS_DISPATCH_TUNED;
    co.rank = v < o.top ? v : 0;
    co.vendor_pool = any_vendor; /* the same threads in every variant */
    if (o.progress) {
      fprintf(o.progress,
              "in-model confirmation: compiling variant %d of %d"
              " (%s)\n",
              v + 1, n_var,
              v == vendor_v ? "vendor calls"
              : v == now_v  ? "as compiled now"
                            : "records");
      fflush(o.progress);
    }
    ts_error_clear(&err);
    if (ts_graph_compile(g, &co, &x->rep, &err) != TS_OK) {
      cli_error("in-model confirmation: compile", &err);
      goto done;
    }
    x->built = true;
    if (x->rep.n_tasks != n_tasks) {
      fprintf(stderr,
              "tessera: error: in-model confirmation: variant %d "
              "has %d tasks, the graph %d\n",
              v, x->rep.n_tasks, n_tasks);
      goto done;
    }
    if (cli_model_lib_open(x->path, o.threads, &x->lib) != EXIT_OK) goto done;
    x->open = true;
    if (x->lib.num_kernels(x->lib.model) != x->rep.n_calls) {
      fprintf(stderr,
              "tessera: error: in-model confirmation: variant %d "
              "runs %d kernels, its report says %d\n",
              v, x->lib.num_kernels(x->lib.model), x->rep.n_calls);
      goto done;
    }
    x->secs = calloc((size_t)n_tasks * (size_t)samples + 1, sizeof *x->secs);
    if (!x->secs) {
      fprintf(stderr, "tessera: error: out of memory\n");
      goto done;
    }
  }
  /* the inputs: uniform in [-1, 1) for floating-point ones, zero for
   * integer ones (indices stay in range) */
  const cli_model_lib *l0 = &vs[0].lib;
  n_in = l0->num_inputs(l0->model);
  n_out = l0->num_outputs(l0->model);
  ins = calloc((size_t)n_in + 1, sizeof *ins);
  outs = calloc((size_t)n_out + 1, sizeof *outs);
  int max_calls = 0;
  for (int v = 0; v < n_var; v++)
    if (vs[v].rep.n_calls > max_calls) max_calls = vs[v].rep.n_calls;
  kern = calloc((size_t)max_calls + 1, sizeof *kern);
  per = calloc((size_t)n_tasks + 1, sizeof *per);
  if (!ins || !outs || !kern || !per) {
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
  /* interleaved rounds: each variant warmed by one run, then profiled */
  for (int r = 0; r < o.rounds; r++) {
    if (o.progress) {
      fprintf(o.progress, "in-model confirmation: round %d of %d\n", r + 1,
              o.rounds);
      fflush(o.progress);
    }
    for (int j = 0; j < n_var; j++) {
      variant *x = &vs[(j + r) % n_var];
      cli_model_lib *l = &x->lib;
      if (l->run(l->model, (const void *const *)ins, outs)) {
        fprintf(stderr, "tessera: error: in-model confirmation: %s\n",
                l->last_error());
        goto done;
      }
      for (int k = 0; k < o.runs; k++) {
        if (l->profile(l->model, (const void *const *)ins, outs, kern)) {
          fprintf(stderr, "tessera: error: in-model confirmation: %s\n",
                  l->last_error());
          goto done;
        }
        task_seconds(x, kern, n_tasks, per);
        for (int t = 0; t < n_tasks; t++)
          x->secs[(size_t)t * (size_t)samples + (size_t)(r * o.runs + k)] =
              per[t];
      }
    }
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
  for (int i = 0; ins && i < n_in; i++) free(ins[i]);
  for (int i = 0; outs && i < n_out; i++) free(outs[i]);
  free(ins);
  free(outs);
  free(kern);
  free(per);
  for (int v = 0; vs && v < n_var; v++) {
    if (vs[v].open) cli_model_lib_close(&vs[v].lib);
    if (vs[v].built) ts_graph_compile_report_clear(&vs[v].rep);
    free(vs[v].secs);
    if (made_dir) unlink(vs[v].path);
  }
  if (made_dir) rmdir(dir);
  free(vs);
  free(scratch);
  free(gt);
  return rc;
}
