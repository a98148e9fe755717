/*
 * cmd_bench_model.c — `tessera bench --model model.so [--onnx MODEL.onnx]`:
 * times a compiled model and, side by side, onnxruntime on the same model,
 * inputs and thread count, in interleaved rounds (a round of tessera runs,
 * then a round of onnxruntime runs, repeated), after checking that their
 * outputs agree. onnxruntime runs in a Python process of the project's
 * virtual environment (scripts/ort_serve.py) that answers "run N" over a
 * pipe, so neither side runs while the other is timed. Prints the medians,
 * the ratio (the median of the rounds' onnxruntime / tessera) and the
 * slowest kernels with their share of the run, so a user sees which task
 * to tune more.
 */
#include "cli.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static const char usage[] =
    "usage: tessera bench --model MODEL.so [--onnx MODEL.onnx]\n"
    "                     [--inputs IN.npz] [--dim SYMBOL=N] [--threads K]\n"
    "                     [--rounds N]\n"
    "                     [--min-round-ms N] [--settle-ms N] [--top N]\n"
    "                     [--tol X] [--seed S]\n"
    "                     [--json]\n"
    "       tessera bench --model MODEL.so --inputs SAMPLES.npz\n"
    "                     (--labels LABELS.npz | --reference REF.so)\n"
    "                     [--threads K] [--json]\n"
    "\n"
    "Times a model compiled by `tessera compile` and, with --onnx, the same\n"
    "model in onnxruntime (same inputs, same thread count) in interleaved\n"
    "rounds, after checking that the outputs agree. onnxruntime runs in the\n"
    "project's Python environment (.venv, made by scripts/install-deps.sh;\n"
    "TESSERA_PYTHON names another interpreter).\n"
    "\n"
    "  --onnx FILE       the ONNX model the library was compiled from\n"
    "  --dim SYMBOL=N    a library with a dynamic dimension (`compile\n"
    "                    --shape-buckets`): run it at this size\n"
    "  --inputs IN.npz   inputs by name (default: seeded random values;\n"
    "                    integer inputs named like a mask get ones)\n"
    "  --threads K       threads of both (default: the online cores)\n"
    "  --rounds N        interleaved rounds, medians reported (default 10)\n"
    "  --min-round-ms N  runs per round so a round lasts this long (200)\n"
    "  --settle-ms N     idle time before each side's round (250), so the\n"
    "                    other side's threads are asleep: onnxruntime's\n"
    "                    workers spin-wait after each run, and on shared\n"
    "                    cores that spinning slows whatever runs next\n"
    "  --top N           the N slowest kernels listed (default 10)\n"
    "  --tol X           largest error of an output relative to its largest\n"
    "                    magnitude (default 1e-3)\n"
    "  --labels L.npz    accuracy instead of timing: SAMPLES.npz holds N\n"
    "                    samples of each input under a leading axis, L.npz\n"
    "                    an integer array 'labels' of N classes; each sample\n"
    "                    runs once and the top-1 accuracy of the first\n"
    "                    output (the class of its largest value) is printed\n"
    "  --reference R.so  agreement instead of timing: both models run on\n"
    "                    each sample of SAMPLES.npz; prints how often their\n"
    "                    first outputs' top classes agree and each output's\n"
    "                    relative L2 error against R.so's (a quantized\n"
    "                    model against its float32 build)\n"
    "  --json            one JSON object on stdout\n"
    "\n"
    "Exit status: 0 done, 1 failure (including outputs that disagree), 2\n"
    "usage error.\n";

#define MAX_IO 64
#define MAX_ROUNDS 1000

typedef struct bm_opts {
  const char *lib, *onnx, *inputs, *labels, *reference;
  const char *dim; /* --dim SYMBOL=N of a library with a dynamic dim */
  int threads, rounds, min_round_ms, settle_ms, top;
  double tol;
  uint64_t seed;
  bool json;
} bm_opts;

typedef struct bm_io {
  ts_model_tensor_info info;
  ts_dtype dtype;
  int64_t elems;
  void *data;
} bm_io;

/* ---- inputs ---- */

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Seeded values: floats uniform in [-1, 1); an integer input named like a
 * mask gets ones with its last quarter zero; other integers [0, 100). */
static void fill_random(bm_io *io, uint64_t seed) {
  uint64_t s = seed * 7919 + 1;
  bool mask = strstr(io->info.name, "mask") != NULL;
  int64_t last = io->info.ndim > 0 ? io->info.shape[io->info.ndim - 1] : 1;
  for (int64_t i = 0; i < io->elems; i++) {
    double u = (double)(splitmix(&s) >> 11) * 0x1p-53;
    double v;
    if (ts_dtype_is_float(io->dtype))
      v = 2 * u - 1;
    else if (mask)
      v = (i % (last > 0 ? last : 1)) < last - last / 4;
    else
      v = (double)(int)(u * 100);
    if (ts_dtype_is_bool(io->dtype)) v = v != 0;
    ts_host_set(io->data, io->dtype, i, v);
  }
}

/* The input's array from the .npz file (dtype and shape must match). */
static int fill_from_npz(bm_io *io, const ts_graph_npz *z) {
  ts_graph_tensor t;
  ts_error err;
  ts_error_clear(&err);
  if (ts_graph_npz_find(z, io->info.name, &t, &err)) {
    cli_error("--inputs", &err);
    return EXIT_FAIL;
  }
  bool same = ts_dtype_eq(t.dtype, io->dtype) && t.ndim == io->info.ndim;
  for (int d = 0; same && d < t.ndim; d++)
    same = t.shape[d] == io->info.shape[d];
  if (!same) {
    fprintf(stderr,
            "tessera: error: --inputs: array '%s' differs in dtype or shape "
            "from the model's input\n",
            io->info.name);
    return EXIT_FAIL;
  }
  memcpy(io->data, t.data, (size_t)io->info.bytes);
  return EXIT_OK;
}

static int make_io(const cli_model_lib *m, bool input, int i, bm_io *io) {
  int rc = input ? m->input_info(m->model, i, &io->info)
                 : m->output_info(m->model, i, &io->info);
  if (rc || !cli_onnx_dtype(io->info.dtype, &io->dtype)) {
    fprintf(stderr, "tessera: error: the model's %s %d: %s\n",
            input ? "input" : "output", i,
            rc ? m->last_error() : "unknown dtype");
    return EXIT_FAIL;
  }
  io->elems = 1;
  for (int d = 0; d < io->info.ndim; d++) io->elems *= io->info.shape[d];
  io->data = calloc(1, (size_t)io->info.bytes + 64);
  if (!io->data) {
    fprintf(stderr, "tessera: error: out of memory for '%s'\n", io->info.name);
    return EXIT_FAIL;
  }
  return EXIT_OK;
}

/* ---- the onnxruntime process ---- */

typedef struct ort_proc {
  pid_t pid;
  FILE *to, *from;
  char version[64];
} ort_proc;

/* A file near the tessera binary: a build tree inside the source tree
 * keeps scripts/ and .venv/ beside build/, an installation keeps
 * share/tessera/ beside bin/; an absolute candidate (a build tree
 * elsewhere: the source tree it was configured from, TS_SOURCE_DIR) is
 * taken as it is. */
static bool near_exe(const char *const *rels, int n, char *out, size_t size) {
  char exe[PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len <= 0) return false;
  exe[len] = 0;
  char *slash = strrchr(exe, '/');
  if (!slash) return false;
  *slash = 0;
  for (int i = 0; i < n; i++) {
    int w = rels[i][0] == '/' ? snprintf(out, size, "%s", rels[i])
                              : snprintf(out, size, "%s/%s", exe, rels[i]);
    if (w > 0 && (size_t)w < size && access(out, R_OK) == 0) return true;
  }
  return false;
}

static int ort_start(ort_proc *p, const bm_opts *o, const char *in_npz,
                     const char *out_npz) {
  memset(p, 0, sizeof *p);
  p->pid = -1;
  char script[PATH_MAX], python[PATH_MAX];
#ifndef TS_SOURCE_DIR
#define TS_SOURCE_DIR "/nonexistent"
#endif
  static const char *const scripts[] = {"../scripts/ort_serve.py",
                                        "../share/tessera/ort_serve.py",
                                        TS_SOURCE_DIR "/scripts/ort_serve.py"};
  if (!near_exe(scripts, 3, script, sizeof script)) {
    fprintf(stderr, "tessera: error: ort_serve.py not found beside the "
                    "tessera binary (scripts/ or share/tessera/)\n");
    return EXIT_FAIL;
  }
  const char *env = getenv("TESSERA_PYTHON");
  static const char *const venvs[] = {"../.venv/bin/python",
                                      "../share/tessera/venv/bin/python",
                                      TS_SOURCE_DIR "/.venv/bin/python"};
  if (env && *env)
    snprintf(python, sizeof python, "%s", env);
  else if (!near_exe(venvs, 3, python, sizeof python))
    snprintf(python, sizeof python, "python3");
  char threads[16];
  snprintf(threads, sizeof threads, "%d", o->threads);
  char *argv[] = {python,          script,     (char *)o->onnx, "--threads",
                  threads,         "--inputs", (char *)in_npz,  "--outputs",
                  (char *)out_npz, NULL};
  int to[2], from[2];
  if (pipe(to) || pipe(from)) {
    fprintf(stderr, "tessera: error: pipe: %s\n", strerror(errno));
    return EXIT_FAIL;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, to[0], 0);
  posix_spawn_file_actions_adddup2(&fa, from[1], 1);
  posix_spawn_file_actions_addclose(&fa, to[1]);
  posix_spawn_file_actions_addclose(&fa, from[0]);
  int rc = posix_spawnp(&p->pid, python, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(to[0]);
  close(from[1]);
  if (rc) {
    close(to[1]);
    close(from[0]);
    p->pid = -1;
    fprintf(stderr, "tessera: error: cannot start %s: %s\n", python,
            strerror(rc));
    return EXIT_FAIL;
  }
  p->to = fdopen(to[1], "w");
  p->from = fdopen(from[0], "r");
  char line[4096];
  if (!p->to || !p->from || !fgets(line, sizeof line, p->from)) {
    fprintf(stderr,
            "tessera: error: onnxruntime (%s %s) ended without answering\n",
            python, script);
    return EXIT_FAIL;
  }
  line[strcspn(line, "\n")] = 0;
  if (strncmp(line, "ready ", 6)) {
    fprintf(stderr, "tessera: error: onnxruntime: %s%s\n",
            !strncmp(line, "error ", 6) ? line + 6 : line,
            strstr(line, "not installed")
                ? " (scripts/install-deps.sh makes .venv with it; "
                  "TESSERA_PYTHON names another Python)"
                : "");
    return EXIT_FAIL;
  }
  snprintf(p->version, sizeof p->version, "%.63s", line + 6);
  return EXIT_OK;
}

/* Seconds of n back-to-back onnxruntime runs, or a negative value. */
static double ort_time(ort_proc *p, int n) {
  char line[4096];
  fprintf(p->to, "run %d\n", n);
  fflush(p->to);
  if (!fgets(line, sizeof line, p->from)) return -1;
  double s;
  if (sscanf(line, "time %lf", &s) != 1) {
    fprintf(stderr, "tessera: error: onnxruntime: %s", line);
    return -1;
  }
  return s;
}

static void ort_stop(ort_proc *p) {
  if (p->to) {
    fputs("quit\n", p->to);
    fclose(p->to);
  }
  if (p->from) fclose(p->from);
  if (p->pid > 0) {
    int st;
    waitpid(p->pid, &st, 0);
  }
  memset(p, 0, sizeof *p);
}

/* ---- checking ---- */

/* The largest |a - b| over the largest |b|, of outputs as doubles. */
static double rel_error(const bm_io *io, const ts_graph_tensor *ref) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < io->elems; i++) {
    double a = ts_host_get(io->data, io->dtype, i);
    double b = ts_host_get(ref->data, ref->dtype, i);
    if (isnan(a) != isnan(b)) return INFINITY;
    if (isnan(a)) continue;
    if (fabs(a - b) > num) num = fabs(a - b);
    if (fabs(b) > den) den = fabs(b);
  }
  return den > 0 ? num / den : num;
}

typedef struct kernel_time {
  int index;
  double seconds;
} kernel_time;

static int cmp_kt(const void *a, const void *b) {
  double x = ((const kernel_time *)a)->seconds,
         y = ((const kernel_time *)b)->seconds;
  return x > y ? -1 : x < y;
}

/* Whether the compiled model's 4-D inputs (or outputs) are channels-last
 * (`compile --input-layout/--output-layout nhwc`), from its info JSON. */
static bool edge_nhwc(const cli_model_lib *m, const char *key) {
  cJSON *j = cJSON_Parse(m->info());
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
  bool nhwc = cJSON_IsString(v) && !strcmp(v->valuestring, "nhwc");
  cJSON_Delete(j);
  return nhwc;
}

/* A 4-D tensor's data permuted between NCHW and NHWC (to_nhwc: from an
 * NCHW shape; else from an NHWC one) into a new malloc'd buffer; *out gets
 * the permuted shape and the buffer. False when out of memory. */
static bool permute_edge(const ts_graph_tensor *t, bool to_nhwc,
                         ts_graph_tensor *out) {
  *out = *t;
  size_t es = ts_dtype_elem_bytes(t->dtype);
  const int64_t *s = t->shape;
  /* the source's axes as n, c, h, w and their strides */
  int64_t n = s[0], c = to_nhwc ? s[1] : s[3], h = to_nhwc ? s[2] : s[1],
          w = to_nhwc ? s[3] : s[2];
  int64_t dst_shape[4] = {n, to_nhwc ? h : c, to_nhwc ? w : h, to_nhwc ? c : w};
  unsigned char *dst = malloc((size_t)(n * c * h * w) * es + 1);
  if (!dst) return false;
  const unsigned char *src = t->data;
  for (int64_t a = 0; a < n; a++)
    for (int64_t k = 0; k < c; k++)
      for (int64_t y = 0; y < h; y++)
        for (int64_t x = 0; x < w; x++) {
          int64_t nchw = ((a * c + k) * h + y) * w + x;
          int64_t nhwc = ((a * h + y) * w + x) * c + k;
          int64_t from = to_nhwc ? nchw : nhwc, to = to_nhwc ? nhwc : nchw;
          memcpy(dst + to * (int64_t)es, src + from * (int64_t)es, es);
        }
  memcpy(out->shape, dst_shape, sizeof dst_shape);
  out->data = dst;
  return true;
}

/* --dim SYMBOL=N: the size of the library's dynamic dimension. */
static int set_dim(cli_model_lib *m, const char *spec) {
  const char *eq = strchr(spec, '=');
  char name[256], *end = NULL;
  snprintf(name, sizeof name, "%.*s", (int)(eq - spec), spec);
  long long n = strtoll(eq + 1, &end, 10);
  if (!m->num_dims || m->num_dims(m->model) < 1) {
    fprintf(stderr, "tessera: error: --dim %s: %s has no dynamic dimension\n",
            spec, "the model");
    return EXIT_FAIL;
  }
  if (*end || m->set_dim(m->model, name, n) != 0) {
    fprintf(stderr, "tessera: error: --dim %s: %s\n", spec,
            *end ? "not a size" : m->last_error());
    return EXIT_FAIL;
  }
  return EXIT_OK;
}

static int run_model_bench(const bm_opts *o) {
  int status = EXIT_FAIL;
  cli_model_lib m;
  bm_io in[MAX_IO], out[MAX_IO];
  memset(in, 0, sizeof in);
  memset(out, 0, sizeof out);
  int n_in = 0, n_out = 0, n_k = 0;
  ort_proc ort;
  memset(&ort, 0, sizeof ort);
  ort.pid = -1;
  char dir[PATH_MAX];
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/tessera-bench-XXXXXX",
           tmp && *tmp ? tmp : "/tmp");
  bool have_dir = false;
  ts_graph_npz *z = NULL, *ref = NULL;
  double *tess = NULL, *orts = NULL, *ratios = NULL, *prof = NULL;
  kernel_time *kt = NULL;
  double *errs = NULL;
  ts_error err;
  ts_error_clear(&err);

  if (cli_model_lib_open(o->lib, o->threads, &m) != EXIT_OK) return EXIT_FAIL;
  if (o->dim && set_dim(&m, o->dim) != EXIT_OK) goto done;
  n_in = m.num_inputs(m.model);
  n_out = m.num_outputs(m.model);
  if (n_in > MAX_IO || n_out > MAX_IO) {
    fprintf(stderr, "tessera: error: more than %d inputs or outputs\n", MAX_IO);
    goto done;
  }
  if (o->inputs && ts_graph_npz_read(o->inputs, &z, &err)) {
    cli_error("cannot read --inputs", &err);
    goto done;
  }
  for (int i = 0; i < n_in; i++) {
    if (make_io(&m, true, i, &in[i]) != EXIT_OK) goto done;
    if (z) {
      if (fill_from_npz(&in[i], z) != EXIT_OK) goto done;
    } else {
      fill_random(&in[i], o->seed + (uint64_t)i);
    }
  }
  for (int i = 0; i < n_out; i++)
    if (make_io(&m, false, i, &out[i]) != EXIT_OK) goto done;
  const void *ins[MAX_IO];
  void *outs[MAX_IO];
  for (int i = 0; i < n_in; i++) ins[i] = in[i].data;
  for (int i = 0; i < n_out; i++) outs[i] = out[i].data;
  double t0 = ts_now_seconds();
  if (m.run(m.model, ins, outs)) {
    fprintf(stderr, "tessera: error: the model failed: %s\n", m.last_error());
    goto done;
  }
  double first = ts_now_seconds() - t0;

  /* onnxruntime: same inputs (through an .npz file), its outputs back */
  if (o->onnx) {
    if (!mkdtemp(dir)) {
      fprintf(stderr, "tessera: error: cannot make a temporary folder: %s\n",
              strerror(errno));
      goto done;
    }
    have_dir = true;
    char in_npz[PATH_MAX + 16], out_npz[PATH_MAX + 16];
    snprintf(in_npz, sizeof in_npz, "%s/in.npz", dir);
    snprintf(out_npz, sizeof out_npz, "%s/out.npz", dir);
    ts_graph_tensor ts[MAX_IO];
    void *owned[MAX_IO] = {0};
    /* a model compiled with channels-last edges: onnxruntime gets (and
     * gives) the model's own NCHW arrays */
    bool in_nhwc = edge_nhwc(&m, "input_layout");
    bool out_nhwc = edge_nhwc(&m, "output_layout");
    int wrc = 0;
    for (int i = 0; i < n_in; i++) {
      ts[i].name = in[i].info.name;
      ts[i].dtype = in[i].dtype;
      ts[i].ndim = in[i].info.ndim;
      for (int d = 0; d < in[i].info.ndim; d++)
        ts[i].shape[d] = in[i].info.shape[d];
      ts[i].data = in[i].data;
      if (in_nhwc && ts[i].ndim == 4) {
        ts_graph_tensor p;
        if (!permute_edge(&ts[i], false, &p)) wrc = TS_ENOMEM;
        ts[i] = p;
        owned[i] = p.data;
      }
    }
    if (wrc)
      TS_ERR(&err, wrc, "out of memory");
    else
      wrc = ts_graph_npz_write(in_npz, ts, n_in, &err);
    for (int i = 0; i < n_in; i++) free(owned[i]);
    if (wrc) {
      cli_error("cannot write the inputs for onnxruntime", &err);
      goto done;
    }
    if (ort_start(&ort, o, in_npz, out_npz) != EXIT_OK) goto done;
    if (ts_graph_npz_read(out_npz, &ref, &err)) {
      cli_error("cannot read onnxruntime's outputs", &err);
      goto done;
    }
    errs = calloc((size_t)n_out + 1, sizeof *errs);
    bool agree = errs != NULL;
    for (int i = 0; errs && i < n_out; i++) {
      ts_graph_tensor r;
      if (ts_graph_npz_find(ref, out[i].info.name, &r, &err)) {
        cli_error("onnxruntime's outputs", &err);
        goto done;
      }
      int64_t e = 1;
      for (int d = 0; d < r.ndim; d++) e *= r.shape[d];
      ts_graph_tensor rp = r;
      if (out_nhwc && r.ndim == 4 && !permute_edge(&r, true, &rp)) {
        fprintf(stderr, "tessera: error: out of memory\n");
        goto done;
      }
      errs[i] = e == out[i].elems ? rel_error(&out[i], &rp) : INFINITY;
      if (rp.data != r.data) free(rp.data);
      if (!(errs[i] <= o->tol)) {
        agree = false;
        fprintf(stderr,
                "tessera: error: output '%s' differs from onnxruntime's: "
                "relative error %.3g over the tolerance %.3g\n",
                out[i].info.name, errs[i], o->tol);
      }
    }
    if (!agree) goto done;
  }

  /* interleaved rounds of n runs each */
  int n = (int)ceil(o->min_round_ms * 1e-3 / (first > 1e-6 ? first : 1e-6));
  if (n < 1) n = 1;
  if (n > 100000) n = 100000;
  tess = calloc((size_t)o->rounds, sizeof *tess);
  orts = calloc((size_t)o->rounds, sizeof *orts);
  ratios = calloc((size_t)o->rounds, sizeof *ratios);
  if (!tess || !orts || !ratios) goto done;
  if (!o->json)
    fprintf(stderr, "timing: %d rounds of %d runs%s, %d threads\n", o->rounds,
            n, o->onnx ? " each (tessera, onnxruntime)" : "", o->threads);
  for (int r = 0; r < o->rounds; r++) {
    ts_sleep_ms(o->settle_ms);
    t0 = ts_now_seconds();
    for (int k = 0; k < n; k++)
      if (m.run(m.model, ins, outs)) {
        fprintf(stderr, "tessera: error: the model failed: %s\n",
                m.last_error());
        goto done;
      }
    tess[r] = (ts_now_seconds() - t0) / n;
    if (o->onnx) {
      ts_sleep_ms(o->settle_ms);
      double s = ort_time(&ort, n);
      if (s < 0) {
        fprintf(stderr, "tessera: error: onnxruntime stopped answering\n");
        goto done;
      }
      orts[r] = s / n;
      ratios[r] = orts[r] / tess[r];
    }
  }

  /* the slowest kernels: per call site, the median of 5 profiled runs */
  n_k = m.num_kernels(m.model);
  enum { PROF_RUNS = 5 };
  prof = calloc((size_t)n_k * PROF_RUNS + 1, sizeof *prof);
  kt = calloc((size_t)n_k + 1, sizeof *kt);
  if (!prof || !kt) goto done;
  double *one = calloc((size_t)n_k + 1, sizeof *one);
  if (!one) goto done;
  for (int r = 0; r < PROF_RUNS; r++) {
    if (m.profile(m.model, ins, outs, one)) {
      fprintf(stderr, "tessera: error: profiling failed: %s\n", m.last_error());
      free(one);
      goto done;
    }
    for (int k = 0; k < n_k; k++) prof[k * PROF_RUNS + r] = one[k];
  }
  free(one);
  double prof_sum = 0;
  for (int k = 0; k < n_k; k++) {
    kt[k].index = k;
    kt[k].seconds = ts_median(&prof[k * PROF_RUNS], PROF_RUNS);
    prof_sum += kt[k].seconds;
  }
  qsort(kt, (size_t)n_k, sizeof *kt, cmp_kt);

  double med_t = ts_median(tess, o->rounds);
  double med_o = ts_median(orts, o->rounds);
  double med_r = ts_median(ratios, o->rounds);
  int top = o->top < n_k ? o->top : n_k;
  if (o->json) {
    printf("{\"model\": ");
    cli_json_string(stdout, o->lib);
    printf(", \"threads\": %d, \"rounds\": %d, \"runs_per_round\": %d, "
           "\"settle_ms\": %d, \"tessera_seconds\": %.9g",
           o->threads, o->rounds, n, o->settle_ms, med_t);
    if (o->onnx) {
      printf(", \"onnxruntime_seconds\": %.9g, \"speedup\": %.4f, "
             "\"onnxruntime_version\": ",
             med_o, med_r);
      cli_json_string(stdout, ort.version);
      printf(", \"max_relative_error\": [");
      for (int i = 0; i < n_out; i++) printf("%s%.3g", i ? ", " : "", errs[i]);
      printf("]");
    } else {
      printf(", \"onnxruntime_seconds\": null, \"speedup\": null");
    }
    printf(", \"kernels\": [");
    for (int i = 0; i < top; i++) {
      printf("%s{\"name\": ", i ? ", " : "");
      cli_json_string(stdout, m.kernel_name(m.model, kt[i].index));
      printf(", \"seconds\": %.9g, \"share\": %.4f}", kt[i].seconds,
             prof_sum > 0 ? kt[i].seconds / prof_sum : 0);
    }
    printf("]}\n");
  } else {
    printf("model %s: %d inputs, %d outputs, %d kernel calls per run, %d "
           "threads\n",
           o->lib, n_in, n_out, n_k, o->threads);
    if (o->onnx) {
      printf("outputs agree with onnxruntime %s (largest relative error ",
             ort.version);
      double worst = 0;
      for (int i = 0; i < n_out; i++)
        if (errs[i] > worst) worst = errs[i];
      printf("%.2g, tolerance %.2g)\n", worst, o->tol);
    }
    printf("%-12s %12s\n", "", "latency(ms)");
    printf("%-12s %12.3f\n", "tessera", med_t * 1e3);
    if (o->onnx) {
      printf("%-12s %12.3f\n", "onnxruntime", med_o * 1e3);
      printf("speedup over onnxruntime: %.2fx (median of %d interleaved "
             "rounds' ratios)\n",
             med_r, o->rounds);
    }
    printf("\nslowest kernels (median of %d profiled runs; share of the "
           "kernels' %.3f ms):\n",
           PROF_RUNS, prof_sum * 1e3);
    for (int i = 0; i < top; i++)
      printf("  %8.3f ms %5.1f%%  %s\n", kt[i].seconds * 1e3,
             prof_sum > 0 ? 100 * kt[i].seconds / prof_sum : 0,
             m.kernel_name(m.model, kt[i].index));
  }
  status = EXIT_OK;

done:
  ort_stop(&ort);
  if (have_dir) { /* the two files ort_serve.py reads and writes */
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/in.npz", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/out.npz", dir);
    unlink(path);
    rmdir(dir);
  }
  ts_graph_npz_free(z);
  ts_graph_npz_free(ref);
  for (int i = 0; i < MAX_IO; i++) {
    free(in[i].data);
    free(out[i].data);
  }
  free(tess);
  free(orts);
  free(ratios);
  free(prof);
  free(kt);
  free(errs);
  cli_model_lib_close(&m);
  return status;
}

/* ---- accuracy (--labels) and agreement (--reference) ---- */

static int64_t argmax(const bm_io *o) {
  int64_t best = 0;
  for (int64_t k = 1; k < o->elems; k++)
    if (ts_host_get(o->data, o->dtype, k) >
        ts_host_get(o->data, o->dtype, best))
      best = k;
  return best;
}

/* Opens a model for run_accuracy with its input and output buffers. */
static int open_for_samples(const char *lib, int threads, cli_model_lib *m,
                            bm_io *in, int *n_in, bm_io *out, int *n_out) {
  if (cli_model_lib_open(lib, threads, m) != EXIT_OK) return EXIT_FAIL;
  *n_in = m->num_inputs(m->model);
  *n_out = m->num_outputs(m->model);
  if (*n_in > MAX_IO || *n_out > MAX_IO || *n_out < 1) {
    fprintf(stderr, "tessera: error: %s has %d inputs and %d outputs\n", lib,
            *n_in, *n_out);
    return EXIT_FAIL;
  }
  for (int i = 0; i < *n_in; i++)
    if (make_io(m, true, i, &in[i]) != EXIT_OK) return EXIT_FAIL;
  for (int i = 0; i < *n_out; i++)
    if (make_io(m, false, i, &out[i]) != EXIT_OK) return EXIT_FAIL;
  return EXIT_OK;
}

/* Copies sample s of each input's array in and runs the model. */
static int run_sample(cli_model_lib *m, bm_io *in, int n_in, bm_io *out,
                      int n_out, const ts_graph_tensor *arr, int64_t s) {
  const void *ins[MAX_IO];
  void *outs[MAX_IO];
  for (int i = 0; i < n_in; i++) {
    memcpy(in[i].data,
           (const char *)arr[i].data + (size_t)s * (size_t)in[i].info.bytes,
           (size_t)in[i].info.bytes);
    ins[i] = in[i].data;
  }
  for (int i = 0; i < n_out; i++) outs[i] = out[i].data;
  if (m->run(m->model, ins, outs)) {
    fprintf(stderr, "tessera: error: the model failed on sample %lld: %s\n",
            (long long)s, m->last_error());
    return EXIT_FAIL;
  }
  return EXIT_OK;
}

/* Checks that each input of the model has an array of n samples (n < 0:
 * the first array's count, set) in z; arr gets the arrays. */
static int sample_arrays(const ts_graph_npz *z, const char *path,
                         const bm_io *in, int n_in, int64_t *n,
                         ts_graph_tensor *arr) {
  ts_error err;
  ts_error_clear(&err);
  for (int i = 0; i < n_in; i++) {
    ts_graph_tensor t;
    if (ts_graph_npz_find(z, in[i].info.name, &t, &err)) {
      cli_error("--inputs", &err);
      return EXIT_FAIL;
    }
    arr[i] = t;
    if (*n < 0 && t.ndim > 0) *n = t.shape[0];
    bool ok = ts_dtype_eq(t.dtype, in[i].dtype) &&
              t.ndim == in[i].info.ndim + 1 && t.shape[0] == *n;
    for (int d = 0; ok && d < in[i].info.ndim; d++)
      ok = t.shape[d + 1] == in[i].info.shape[d];
    if (!ok) {
      fprintf(stderr,
              "tessera: error: %s: array '%s' must hold %lld samples of the "
              "input (its dtype, under a leading axis of %lld)\n",
              path, in[i].info.name, (long long)*n, (long long)*n);
      return EXIT_FAIL;
    }
  }
  if (*n < 0) *n = 0;
  return EXIT_OK;
}

static void print_accuracy(const bm_opts *o, int64_t n, int64_t correct,
                           const bm_io *out, int n_out, const double *num,
                           const double *den) {
  double acc = n ? 100.0 * (double)correct / (double)n : 0;
  if (o->json) {
    printf("{\"model\": \"%s\", \"samples\": %lld, \"correct\": %lld, "
           "\"%s\": %.4f",
           o->lib, (long long)n, (long long)correct,
           o->reference ? "top1_agreement_percent" : "top1_percent", acc);
    if (o->reference) {
      printf(", \"reference\": \"%s\", \"relative_l2\": [", o->reference);
      for (int i = 0; i < n_out; i++)
        printf("%s%.6g", i ? ", " : "",
               sqrt(num[i] / (den[i] > 0 ? den[i] : 1)));
      printf("]");
    }
    printf("}\n");
  } else if (o->reference) {
    printf("top-1 agreement of %s with %s: %.2f %% (%lld of %lld samples)\n",
           o->lib, o->reference, acc, (long long)correct, (long long)n);
    for (int i = 0; i < n_out; i++)
      printf("  output '%s': relative L2 error %.4g\n", out[i].info.name,
             sqrt(num[i] / (den[i] > 0 ? den[i] : 1)));
  } else {
    printf("top-1 accuracy of %s: %.2f %% (%lld of %lld samples)\n", o->lib,
           acc, (long long)correct, (long long)n);
  }
}

/* Runs the model on each of the N samples of o->inputs and prints the
 * top-1 accuracy of its first output against o->labels, or (with
 * o->reference) how often its first output's top class is the reference
 * model's and each output's relative L2 error against the reference's. */
static int run_accuracy(const bm_opts *o) {
  int status = EXIT_FAIL;
  cli_model_lib m, r;
  memset(&m, 0, sizeof m);
  memset(&r, 0, sizeof r);
  bm_io in[MAX_IO], out[MAX_IO], rin[MAX_IO], rout[MAX_IO];
  memset(in, 0, sizeof in);
  memset(out, 0, sizeof out);
  memset(rin, 0, sizeof rin);
  memset(rout, 0, sizeof rout);
  ts_graph_npz *z = NULL, *lz = NULL;
  ts_error err;
  ts_error_clear(&err);
  int n_in = 0, n_out = 0, rn_in = 0, rn_out = 0;
  double num[MAX_IO] = {0}, den[MAX_IO] = {0};
  ts_graph_tensor lab = {0}, arr[MAX_IO];
  if (open_for_samples(o->lib, o->threads, &m, in, &n_in, out, &n_out) !=
      EXIT_OK)
    goto done;
  if (o->reference) {
    if (open_for_samples(o->reference, o->threads, &r, rin, &rn_in, rout,
                         &rn_out) != EXIT_OK)
      goto done;
    bool same = rn_in == n_in && rn_out == n_out;
    for (int i = 0; same && i < n_out; i++)
      same = rout[i].elems == out[i].elems;
    for (int i = 0; same && i < n_in; i++)
      same = rin[i].info.bytes == in[i].info.bytes &&
             ts_dtype_eq(rin[i].dtype, in[i].dtype);
    if (!same) {
      fprintf(stderr,
              "tessera: error: %s and %s differ in their inputs or outputs\n",
              o->lib, o->reference);
      goto done;
    }
  }
  if (ts_graph_npz_read(o->inputs, &z, &err) ||
      (o->labels && ts_graph_npz_read(o->labels, &lz, &err))) {
    cli_error("cannot read the samples or the labels", &err);
    goto done;
  }
  if (lz && ts_graph_npz_find(lz, "labels", &lab, &err)) {
    cli_error("--labels", &err);
    goto done;
  }
  if (lz && (lab.ndim != 1 || !ts_dtype_is_int(lab.dtype))) {
    fprintf(stderr,
            "tessera: error: %s: 'labels' must be a vector of integers\n",
            o->labels);
    goto done;
  }
  int64_t n = lz ? lab.shape[0] : -1, correct = 0;
  if (sample_arrays(z, o->inputs, in, n_in, &n, arr) != EXIT_OK) goto done;
  for (int64_t s = 0; s < n; s++) {
    if (run_sample(&m, in, n_in, out, n_out, arr, s) != EXIT_OK) goto done;
    int64_t want;
    if (o->reference) {
      if (run_sample(&r, rin, rn_in, rout, rn_out, arr, s) != EXIT_OK)
        goto done;
      want = argmax(&rout[0]);
      for (int i = 0; i < n_out; i++)
        for (int64_t k = 0; k < out[i].elems; k++) {
          double x = ts_host_get(rout[i].data, rout[i].dtype, k);
          double d = ts_host_get(out[i].data, out[i].dtype, k) - x;
          num[i] += d * d;
          den[i] += x * x;
        }
    } else {
      want = (int64_t)ts_host_get(lab.data, lab.dtype, s);
    }
    correct += argmax(&out[0]) == want;
  }
  print_accuracy(o, n, correct, out, n_out, num, den);
  status = EXIT_OK;
done:
  for (int i = 0; i < MAX_IO; i++) {
    free(in[i].data), free(out[i].data);
    free(rin[i].data), free(rout[i].data);
  }
  ts_graph_npz_free(z);
  ts_graph_npz_free(lz);
  if (r.handle) cli_model_lib_close(&r);
  if (m.handle) cli_model_lib_close(&m);
  return status;
}

int bench_model(int argc, char **argv) {
  bm_opts o = {.threads = 0,
               .rounds = 10,
               .min_round_ms = 200,
               .settle_ms = 250,
               .top = 10,
               .tol = 1e-3,
               .seed = 1};
  for (int i = 1; i < argc; i++) {
    const char *v;
    bool missing = false;
    long x;
    int rc = EXIT_OK;
#define NEED(name)                                                             \
  if (missing) return cli_usage_error("bench", "%s needs a value", name)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(usage, stdout);
      return EXIT_OK;
    } else if (!strcmp(argv[i], "--json")) {
      o.json = true;
    } else if (cli_opt_value(argc, argv, &i, "--model", &v, &missing)) {
      NEED("--model");
      o.lib = v;
    } else if (cli_opt_value(argc, argv, &i, "--onnx", &v, &missing)) {
      NEED("--onnx");
      o.onnx = v;
    } else if (cli_opt_value(argc, argv, &i, "--inputs", &v, &missing)) {
      NEED("--inputs");
      o.inputs = v;
    } else if (cli_opt_value(argc, argv, &i, "--dim", &v, &missing)) {
      NEED("--dim");
      const char *eq = strchr(v, '=');
      if (!eq || eq == v || !eq[1])
        return cli_usage_error("bench", "--dim needs SYMBOL=N");
      o.dim = v;
    } else if (cli_opt_value(argc, argv, &i, "--labels", &v, &missing)) {
      NEED("--labels");
      o.labels = v;
    } else if (cli_opt_value(argc, argv, &i, "--reference", &v, &missing)) {
      NEED("--reference");
      o.reference = v;
    } else if (cli_opt_value(argc, argv, &i, "--threads", &v, &missing)) {
      NEED("--threads");
      rc = cli_int_option("bench", "--threads", v, 1, TS_RT_MAX_THREADS, &x);
      o.threads = (int)x;
    } else if (cli_opt_value(argc, argv, &i, "--rounds", &v, &missing)) {
      NEED("--rounds");
      rc = cli_int_option("bench", "--rounds", v, 1, MAX_ROUNDS, &x);
      o.rounds = (int)x;
    } else if (cli_opt_value(argc, argv, &i, "--settle-ms", &v, &missing)) {
      NEED("--settle-ms");
      rc = cli_int_option("bench", "--settle-ms", v, 0, 10000, &x);
      o.settle_ms = (int)x;
    } else if (cli_opt_value(argc, argv, &i, "--min-round-ms", &v, &missing)) {
      NEED("--min-round-ms");
      rc = cli_int_option("bench", "--min-round-ms", v, 0, 600000, &x);
      o.min_round_ms = (int)x;
    } else if (cli_opt_value(argc, argv, &i, "--top", &v, &missing)) {
      NEED("--top");
      rc = cli_int_option("bench", "--top", v, 0, 100000, &x);
      o.top = (int)x;
    } else if (cli_opt_value(argc, argv, &i, "--seed", &v, &missing)) {
      NEED("--seed");
      rc = cli_int_option("bench", "--seed", v, 0, 2147483647, &x);
      o.seed = (uint64_t)x;
    } else if (cli_opt_value(argc, argv, &i, "--tol", &v, &missing)) {
      NEED("--tol");
      char *end;
      o.tol = strtod(v, &end);
      if (!*v || *end || !(o.tol >= 0) || !isfinite(o.tol))
        return cli_usage_error("bench", "--tol: '%s' is not a number >= 0", v);
    } else {
      return cli_usage_error("bench", "unknown option '%s' with --model",
                             argv[i]);
    }
#undef NEED
    if (rc != EXIT_OK) return rc;
  }
  if (!o.lib) return cli_usage_error("bench", "--model needs a compiled model");
  if (o.threads <= 0) {
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    o.threads = c > 0 ? (int)c : 1;
  }
  if ((o.labels || o.reference) && (!o.inputs || o.onnx))
    return cli_usage_error("bench", "--labels and --reference need --inputs "
                                    "SAMPLES.npz (and no --onnx)");
  if (o.labels && o.reference)
    return cli_usage_error("bench", "--labels or --reference, not both");
  return o.labels || o.reference ? run_accuracy(&o) : run_model_bench(&o);
}
