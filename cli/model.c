/*
 * model.c — what the commands that take a model share: an ONNX model
 * imported with the --input-shape fixes, through the whole pass pipeline
 * and the verifier; a compiled model (`tessera compile`'s shared library)
 * opened with dlopen, its C ABI looked up and checked.
 */
#include "cli.h"

#include <dlfcn.h>
#include <math.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *cli_layout = NULL;
bool cli_no_winograd = false;
int cli_winograd_tile = 0;
const char *cli_input_layout = NULL;
const char *cli_output_layout = NULL;

int cli_io_layout_option(const char *cmd, const char *flag, const char *value,
                         const char **out) {
  if (!value) return cli_usage_error(cmd, "%s needs nchw or nhwc", flag);
  if (strcmp(value, "nhwc") && strcmp(value, "nchw"))
    return cli_usage_error(cmd,
                           "%s: unknown layout '%s' (nchw: the 4-D arrays as "
                           "the model declares them, the default; nhwc: "
                           "channels-last)",
                           flag, value);
  *out = value;
  return EXIT_OK;
}

int cli_layout_option(const char *cmd, const char *value) {
  if (!value)
    return cli_usage_error(cmd, "--layout needs nhwc, nchw, blocked or auto");
  if (strcmp(value, "nhwc") && strcmp(value, "nchw") &&
      strcmp(value, "blocked") && strcmp(value, "auto"))
    return cli_usage_error(cmd,
                           "--layout: unknown layout '%s' (nhwc: "
                           "convolutions channels-last, the default; nchw: "
                           "as the model gives them; blocked: channel-blocked "
                           "where a conv can be; auto: NHWC or blocked per "
                           "conv, by the database)",
                           value);
  cli_layout = value;
  return EXIT_OK;
}

static const char *quant_profile = NULL;
static ts_quant_options quant_opts;
static const char *quant_keep[64];

static bool pet_on = false;
static ts_pet_options pet_opts;
static ts_block_options block_opts;
static ts_winograd_options wino_opts;

/* --dim SYMBOL=SIZE, then the sizes a command sets itself (a bucket of
 * tune --shape-buckets) */
static const char *dim_opts[64 + TS_MAX_DIMS];
static int n_dim_opts, n_extra_dims;

void cli_import_dims(ts_graph_import_options *io) {
  io->dims = dim_opts;
  io->n_dims = n_dim_opts + n_extra_dims;
}

void cli_set_extra_dims(const char *const *dims, int n) {
  n_extra_dims = n < TS_MAX_DIMS ? n : TS_MAX_DIMS;
  for (int i = 0; i < n_extra_dims; i++) dim_opts[n_dim_opts + i] = dims[i];
}

bool cli_passes_set(void) {
  return pet_on || quant_profile || cli_layout || cli_no_winograd ||
         cli_winograd_tile || block_opts.block || cli_input_layout ||
         cli_output_layout;
}

const char cli_pass_usage[] =
    "  --block 8|16        with --layout blocked or auto: the only block\n"
    "                      size (channels per block) to use or weigh\n"
    "  --dim SYMBOL=SIZE   the size of a named dynamic dimension (an ONNX\n"
    "                      dim_param such as batch or seq) in every input\n"
    "                      that has it; repeatable\n"
    "  --pet               partially equivalent transformations: mutants of\n"
    "                      convolutions and of matrix products that read one\n"
    "                      value, checked at random points, corrected where\n"
    "                      they differ, kept when cheaper (docs/pet.md)\n"
    "  --pet-trials T      random input sets per checked position (2)\n"
    "  --pet-depth D       mutants of mutants up to depth D, 1 to 3 (2)\n"
    "  --pet-only KIND     try only the mutator KIND (split_rows,\n"
    "                      batch_shared_input, ...; docs/pet.md)\n"
    "  --pet-apply-all     apply every checked (and corrected) mutant\n"
    "                      whatever its cost: to measure one\n"
    "  --quantize PROFILE.json  int8 convolutions and matrix products from\n"
    "                      the ranges of `tessera quantize profile`\n"
    "                      (docs/quantization.md)\n"
    "  --calibration minmax|percentile|entropy  the profile's range to use\n"
    "                      (default minmax)\n"
    "  --per-tensor        one weight scale per tensor (default: one per\n"
    "                      output channel)\n"
    "  --keep-float OP     leave operator type OP (Conv, MatMul) float32;\n"
    "                      repeatable\n"
    "  --winograd-tile 2|4|auto|measure  Winograd's output tile for 3x3\n"
    "                      convolutions: F(2x2, 3x3), F(4x4, 3x3), per conv "
    "by\n"
    "                      its image size (auto, the default), or per conv "
    "the\n"
    "                      fastest of direct, F(2x2) and F(4x4) by the tuning\n"
    "                      database (measure: tune --model with it tunes the\n"
    "                      three forms, compile --db with it chooses;\n"
    "                      docs/graph.md)\n";

bool cli_quantizing(void) { return quant_profile != NULL; }
bool cli_pet_on(void) { return pet_on; }

static void print_log(FILE *f, const char *pass, const char *log);

void cli_pet_measure(ts_db *db, const char *target, bool collect_tasks) {
  pet_opts.db = db;
  pet_opts.target = target;
  pet_opts.collect_tasks = collect_tasks;
  block_opts.db = db;
  block_opts.target = target;
  block_opts.collect_tasks = collect_tasks;
  wino_opts.db = db;
  wino_opts.target = target;
  wino_opts.collect_tasks = collect_tasks;
}

static const char *model_target;
void cli_model_target(const char *target) { model_target = target; }

void cli_block_measure(ts_db *db, const char *target) {
  block_opts.db = db;
  block_opts.target = target;
}

void cli_winograd_measure(ts_db *db, const char *target) {
  wino_opts.db = db;
  wino_opts.target = target;
}

bool cli_block_on(void) {
  return cli_layout &&
         (!strcmp(cli_layout, "blocked") || !strcmp(cli_layout, "auto"));
}

void cli_block_summary(const ts_graph *g, FILE *f, bool each) {
  if (!cli_block_on()) return;
  ts_block_report r;
  const char *log;
  ts_graph_block_report(g, &r, &log);
  if (each) print_log(f, "block", log);
  char weighed[96] = "";
  if (isfinite(r.before_us))
    snprintf(weighed, sizeof weighed, "; %.1f -> %.1f us by the database",
             r.before_us, r.after_us);
  if (r.block)
    fprintf(f,
            "%sblock: %d of %d convolutions blocked by %d, %d layout "
            "transform%s left%s; %.0f ms\n",
            each ? "# " : "", r.blocked, r.convs, r.block, r.transforms,
            r.transforms == 1 ? "" : "s", weighed, r.ms);
  else
    fprintf(f, "%sblock: nothing blocked; %.0f ms\n", each ? "# " : "", r.ms);
}

/* A pass's log, one "# PASS: line" per line. */
static void print_log(FILE *f, const char *pass, const char *log) {
  for (const char *p = log; *p;) {
    const char *e = strchr(p, '\n');
    int len = e ? (int)(e - p) : (int)strlen(p);
    fprintf(f, "# %s: %.*s\n", pass, len, p);
    p += len + (e != NULL);
  }
}

void cli_winograd_summary(const ts_graph *g, FILE *f, bool each) {
  const char *log = ts_graph_winograd_log(g);
  if (!*log) return;
  if (each) {
    print_log(f, "winograd", log);
    return;
  }
  int n = 0; /* one line per weighed conv */
  for (const char *p = log; *p; p++) n += *p == '\n';
  fprintf(f,
          "winograd: %d convolution%s weighed by the database "
          "(`graph show --after winograd --db` lists them)\n",
          n, n == 1 ? "" : "s");
}

void cli_pet_summary(const ts_graph *g, FILE *f, bool each) {
  if (!pet_on) return;
  ts_pet_report r;
  const char *log;
  ts_graph_pet_report(g, &r, &log);
  if (each) print_log(f, "pet", log);
  fprintf(f,
          "%spet: %d of %d mutants applied (%d duplicate, %d pruned, %d "
          "exact, %d corrected, %d wrong, %d not checked), %d re-layout "
          "pair%s cancelled; %d subprogram%s chosen by measurement; %lld "
          "boxes, %lld positions; cost %.1f -> %.1f us in what was "
          "rewritten; %.0f ms\n",
          each ? "# " : "", r.applied, r.generated, r.duplicates, r.pruned,
          r.exact, r.corrected, r.wrong, r.unchecked, r.relayouts_cancelled,
          r.relayouts_cancelled == 1 ? "" : "s", r.by_measurement,
          r.by_measurement == 1 ? "" : "s", (long long)r.boxes,
          (long long)r.points, r.cost_before_us, r.cost_after_us, r.ms);
}

bool cli_pass_option(const char *cmd, int argc, char **argv, int *i, int *rc) {
  const char *v = NULL;
  bool missing = false;
  *rc = EXIT_OK;
  if (cli_opt_value(argc, argv, i, "--dim", &v, &missing)) {
    if (missing || !strchr(v, '='))
      *rc = cli_usage_error(cmd, "--dim needs SYMBOL=SIZE");
    else if (n_dim_opts >= 64)
      *rc = cli_usage_error(cmd, "more than 64 --dim options");
    else
      dim_opts[n_dim_opts++] = v;
  } else if (cli_opt_value(argc, argv, i, "--quantize", &v, &missing)) {
    if (missing) *rc = cli_usage_error(cmd, "--quantize needs PROFILE.json");
    quant_profile = v;
  } else if (cli_opt_value(argc, argv, i, "--calibration", &v, &missing)) {
    if (missing || (strcmp(v, "minmax") && strcmp(v, "percentile") &&
                    strcmp(v, "entropy")))
      *rc = cli_usage_error(
          cmd, "--calibration wants minmax, percentile or entropy");
    else
      quant_opts.calibration = !strcmp(v, "minmax")       ? TS_QUANT_MINMAX
                               : !strcmp(v, "percentile") ? TS_QUANT_PERCENTILE
                                                          : TS_QUANT_ENTROPY;
  } else if (cli_opt_value(argc, argv, i, "--block", &v, &missing)) {
    if (missing || (strcmp(v, "8") && strcmp(v, "16")))
      *rc = cli_usage_error(cmd, "--block wants 8 or 16 (channels per block)");
    else
      block_opts.block = atoi(v);
  } else if (cli_opt_value(argc, argv, i, "--winograd-tile", &v, &missing)) {
    if (missing || (strcmp(v, "2") && strcmp(v, "4") && strcmp(v, "auto") &&
                    strcmp(v, "measure")))
      *rc = cli_usage_error(cmd, "--winograd-tile wants 2, 4, auto or measure");
    else
      cli_winograd_tile = !strcmp(v, "auto")      ? 0
                          : !strcmp(v, "measure") ? -1
                                                  : atoi(v);
  } else if (!strcmp(argv[*i], "--pet")) {
    pet_on = true;
  } else if (cli_opt_value(argc, argv, i, "--pet-trials", &v, &missing)) {
    char *end = NULL;
    long t = missing ? 0 : strtol(v, &end, 10);
    if (missing || !end || *end || t < 1 || t > 64)
      *rc = cli_usage_error(cmd, "--pet-trials wants a count from 1 to 64");
    else
      pet_opts.trials = (int)t, pet_on = true;
  } else if (cli_opt_value(argc, argv, i, "--pet-depth", &v, &missing)) {
    char *end = NULL;
    long d = missing ? 0 : strtol(v, &end, 10);
    if (missing || !end || *end || d < 1 || d > 3)
      *rc = cli_usage_error(cmd, "--pet-depth wants a depth from 1 to 3");
    else
      pet_opts.depth = (int)d, pet_on = true;
  } else if (cli_opt_value(argc, argv, i, "--pet-only", &v, &missing)) {
    if (missing || !*v)
      *rc = cli_usage_error(cmd, "--pet-only wants a mutator's kind");
    else
      pet_opts.only = v, pet_on = true;
  } else if (!strcmp(argv[*i], "--pet-apply-all")) {
    pet_opts.apply_all = true, pet_on = true;
  } else if (!strcmp(argv[*i], "--no-winograd")) {
    cli_no_winograd = true;
  } else if (cli_opt_value(argc, argv, i, "--layout", &v, &missing)) {
    *rc = cli_layout_option(cmd, missing ? NULL : v);
  } else if (cli_opt_value(argc, argv, i, "--input-layout", &v, &missing)) {
    *rc = cli_io_layout_option(cmd, "--input-layout", missing ? NULL : v,
                               &cli_input_layout);
  } else if (cli_opt_value(argc, argv, i, "--output-layout", &v, &missing)) {
    *rc = cli_io_layout_option(cmd, "--output-layout", missing ? NULL : v,
                               &cli_output_layout);
  } else if (!strcmp(argv[*i], "--per-tensor")) {
    quant_opts.per_tensor = true;
  } else if (cli_opt_value(argc, argv, i, "--keep-float", &v, &missing)) {
    if (missing)
      *rc = cli_usage_error(cmd, "--keep-float needs an operator type");
    else if (quant_opts.n_keep_float >= 64)
      *rc = cli_usage_error(cmd, "more than 64 --keep-float operators");
    else
      quant_keep[quant_opts.n_keep_float++] = v;
  } else {
    return false;
  }
  return true;
}

/* Reads the whole text file path (malloc'd, NUL-terminated) or prints why
 * not. */
static char *read_text(const char *path, const char *what) {
  char *text = NULL;
  ts_error err;
  ts_error_clear(&err);
  if (ts_read_file(path, what, (size_t)1 << 30, &text, NULL, &err)) {
    fprintf(stderr, "tessera: error: %s\n", err.msg);
    return NULL;
  }
  return text;
}

/* The pass settings of the command line on g (layout, Winograd, PET,
 * quantization); EXIT_FAIL after printing why. */
static int graph_setup(ts_graph *g) {
  ts_error err;
  ts_error_clear(&err);
  if (ts_graph_set_target(g, model_target, &err) != TS_OK) {
    cli_error("bad target", &err);
    return EXIT_FAIL;
  }
  if ((cli_layout && ts_graph_set_layout(g, cli_layout, &err) != TS_OK) ||
      ts_graph_set_io_layout(g, cli_input_layout, cli_output_layout, &err) !=
          TS_OK) {
    cli_error("bad layout", &err);
    return EXIT_FAIL;
  }
  if (cli_no_winograd) ts_graph_set_winograd(g, false);
  ts_graph_set_winograd_tile(g, cli_winograd_tile);
  if (cli_winograd_tile < 0 &&
      (wino_opts.db || wino_opts.collect_tasks || wino_opts.n_force) &&
      ts_graph_set_winograd_options(g, &wino_opts, &err) != TS_OK) {
    cli_error("bad Winograd options", &err);
    return EXIT_FAIL;
  }
  if (cli_block_on() &&
      ts_graph_set_block_options(g, &block_opts, &err) != TS_OK) {
    cli_error("bad block options", &err);
    return EXIT_FAIL;
  }
  if (pet_on && ts_graph_set_pet(g, &pet_opts, &err) != TS_OK) {
    cli_error("bad PET options", &err);
    return EXIT_FAIL;
  }
  if (quant_profile) {
    char *text = read_text(quant_profile, "the quantization profile");
    quant_opts.keep_float = quant_keep;
    if (!text || ts_graph_set_quantization(g, text, &quant_opts, &err)) {
      if (text) {
        char what[4200];
        snprintf(what, sizeof what, "bad quantization profile '%s'",
                 quant_profile);
        cli_error(what, &err);
      }
      free(text);
      return EXIT_FAIL;
    }
    free(text);
  }
  return EXIT_OK;
}

/* The import options of the command line: input shapes and --dim. */
static ts_graph_import_options import_options(const char *const *shapes,
                                              int n_shapes) {
  ts_graph_import_options io;
  memset(&io, 0, sizeof io);
  io.input_shapes = shapes;
  io.n_input_shapes = n_shapes;
  cli_import_dims(&io);
  return io;
}

int cli_import_model(const char *path, const char *const *shapes, int n_shapes,
                     ts_graph **out) {
  ts_error err;
  ts_error_clear(&err);
  ts_graph_import_options io = import_options(shapes, n_shapes);
  if (ts_graph_import_onnx(path, &io, out, &err) != TS_OK) {
    cli_error("cannot import the model", &err);
    return EXIT_FAIL;
  }
  if (graph_setup(*out) != EXIT_OK) {
    ts_graph_free(*out);
    *out = NULL;
    return EXIT_FAIL;
  }
  return EXIT_OK;
}

static int padded_setup(ts_graph *g, void *ctx, ts_error *err) {
  (void)ctx;
  if (graph_setup(g) == EXIT_OK) return TS_OK;
  return TS_ERR(err, TS_EINVAL, "the pass settings were refused");
}

int cli_load_padded(const char *path, const char *const *shapes, int n_shapes,
                    const char *symbol, const int64_t *sizes, int n,
                    ts_graph **outs) {
  ts_error err;
  ts_error_clear(&err);
  ts_graph_import_options io = import_options(shapes, n_shapes);
  io.before_passes = padded_setup;
  int rc = ts_graph_import_padded_sizes(path, &io, sizes, n, NULL, outs, &err);
  if (rc != TS_OK) {
    cli_error("cannot compile the model for a padded size", &err);
    return rc == TS_EUNSUPPORTED ? CLI_CANNOT_PAD : EXIT_FAIL;
  }
  const char *have = ts_graph_symbol(outs[0], 0, NULL);
  if (!have || strcmp(have, symbol))
    fprintf(stderr,
            "tessera: error: --shape-buckets %s: the model's dynamic "
            "dimension left is '%s'\n",
            symbol, have ? have : "(none)");
  for (int b = 0; have && !strcmp(have, symbol) && b < n; b++)
    if (ts_graph_verify(outs[b], &err) != TS_OK) {
      cli_error("the graph does not verify", &err);
      have = NULL;
    }
  if (!have || strcmp(have, symbol)) {
    for (int b = 0; b < n; b++) {
      ts_graph_free(outs[b]);
      outs[b] = NULL;
    }
    return EXIT_FAIL;
  }
  return EXIT_OK;
}

int cli_bucket_option(const char *cmd, const char *v, char *sym, size_t cap,
                      long *sizes, int *n, int max) {
  const char *eq = strchr(v, '=');
  if (!eq || eq == v || !eq[1])
    return cli_usage_error(cmd, "--shape-buckets needs SYMBOL=S1,S2,...");
  *n = 0;
  for (const char *p = eq + 1; *p;) {
    char *end = NULL;
    long size = strtol(p, &end, 10);
    if (end == p || size < 1 || size > (1l << 31) || (*end && *end != ','))
      return cli_usage_error(cmd,
                             "--shape-buckets '%s': sizes are positive "
                             "integers separated by commas",
                             v);
    if (*n == max)
      return cli_usage_error(cmd, "--shape-buckets: %d sizes at most", max);
    if (*n && size <= sizes[*n - 1])
      return cli_usage_error(cmd, "--shape-buckets '%s': sizes ascending", v);
    sizes[(*n)++] = size;
    p = *end ? end + 1 : end;
  }
  if ((size_t)(eq - v) >= cap)
    return cli_usage_error(cmd, "--shape-buckets: symbol name too long");
  memcpy(sym, v, (size_t)(eq - v));
  sym[eq - v] = 0;
  return EXIT_OK;
}

int cli_load_model(const char *path, const char *const *shapes, int n_shapes,
                   ts_graph **out) {
  ts_error err;
  ts_error_clear(&err);
  ts_graph *g = NULL;
  if (cli_import_model(path, shapes, n_shapes, &g) != EXIT_OK) return EXIT_FAIL;
  if (ts_graph_run_passes(g, NULL, &err) != TS_OK) {
    cli_error("graph passes failed", &err);
    ts_graph_free(g);
    return EXIT_FAIL;
  }
  if (ts_graph_verify(g, &err) != TS_OK) {
    cli_error("the graph does not verify", &err);
    ts_graph_free(g);
    return EXIT_FAIL;
  }
  *out = g;
  return EXIT_OK;
}

bool cli_onnx_dtype(int code, ts_dtype *out) {
  switch (code) {
  case 1: *out = TS_FLOAT32; return true;
  case 2: *out = TS_UINT8; return true;
  case 3: *out = TS_INT8; return true;
  case 6: *out = TS_INT32; return true;
  case 7: *out = TS_INT64; return true;
  case 9: *out = TS_BOOL; return true;
  case 10: *out = TS_FLOAT16; return true;
  case 11: *out = TS_FLOAT64; return true;
  case 16: *out = TS_BFLOAT16; return true;
  default: return false;
  }
}

void cli_model_lib_close(cli_model_lib *m) {
  if (m->model && m->destroy) m->destroy(m->model);
  if (m->handle) dlclose(m->handle);
  memset(m, 0, sizeof *m);
}

/* dlsym into a function pointer of any type. */
#define LOOKUP(field, sym)                                                     \
  do {                                                                         \
    void *p_ = dlsym(m->handle, sym);                                          \
    if (!p_) {                                                                 \
      missing = sym;                                                           \
      goto fail;                                                               \
    }                                                                          \
    memcpy(&m->field, &p_, sizeof p_);                                         \
  } while (0)

int cli_model_lib_open(const char *path, int n_threads, cli_model_lib *m) {
  memset(m, 0, sizeof *m);
  const char *missing = NULL;
  /* a bare file name would be searched on the library path: make it a path */
  char buf[4096];
  if (!strchr(path, '/')) {
    snprintf(buf, sizeof buf, "./%s", path);
    path = buf;
  }
  m->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!m->handle) {
    fprintf(stderr, "tessera: error: cannot load the compiled model: %s\n",
            dlerror());
    return EXIT_FAIL;
  }
  LOOKUP(abi_version, "ts_model_abi_version");
  LOOKUP(create, "ts_model_create");
  LOOKUP(last_error, "ts_model_last_error");
  LOOKUP(num_inputs, "ts_model_num_inputs");
  LOOKUP(num_outputs, "ts_model_num_outputs");
  LOOKUP(input_info, "ts_model_input_info");
  LOOKUP(output_info, "ts_model_output_info");
  LOOKUP(run, "ts_model_run");
  LOOKUP(set_num_threads, "ts_model_set_num_threads");
  LOOKUP(num_kernels, "ts_model_num_kernels");
  LOOKUP(kernel_name, "ts_model_kernel_name");
  LOOKUP(profile, "ts_model_profile");
  LOOKUP(info, "ts_model_info");
  LOOKUP(destroy, "ts_model_destroy");
  *(void **)&m->num_dims = dlsym(m->handle, "ts_model_num_dims");
  *(void **)&m->dim = dlsym(m->handle, "ts_model_dim");
  *(void **)&m->set_dim = dlsym(m->handle, "ts_model_set_dim");
  if (!m->dim || !m->set_dim) m->num_dims = NULL;
  if (m->abi_version() != TS_MODEL_ABI_VERSION) {
    fprintf(stderr,
            "tessera: error: %s: compiled-model interface version %d; this "
            "tessera reads version %d (recompile the model)\n",
            path, m->abi_version(), TS_MODEL_ABI_VERSION);
    cli_model_lib_close(m);
    return EXIT_FAIL;
  }
  if (m->create(n_threads, &m->model)) {
    fprintf(stderr, "tessera: error: %s: cannot create the model: %s\n", path,
            m->last_error());
    m->model = NULL;
    cli_model_lib_close(m);
    return EXIT_FAIL;
  }
  return EXIT_OK;
fail:
  fprintf(stderr,
          "tessera: error: %s is not a compiled tessera model (no symbol "
          "'%s')\n",
          path, missing);
  cli_model_lib_close(m);
  return EXIT_FAIL;
}

/* The loader of cli_model_confirm_winograd: the model file as compile
 * builds it from the database, with the given Winograd forms forced. */
typedef struct file_loader {
  ts_db *db;
  const char *target, *model;
  const char *const *shapes;
  int n_shapes;
} file_loader;

static int load_forced(void *ctx, const char *const *keys, const int *tiles,
                       int n, ts_graph **g) {
  file_loader *f = ctx;
  cli_pet_measure(f->db, f->target, false); /* as compile: the passes weigh */
  wino_opts.force_keys = keys;
  wino_opts.force_tiles = tiles;
  wino_opts.n_force = n;
  int rc = cli_load_model(f->model, f->shapes, f->n_shapes, g);
  wino_opts.force_keys = NULL;
  wino_opts.force_tiles = NULL;
  wino_opts.n_force = 0;
  cli_pet_measure(NULL, NULL, false);
  return rc;
}

int cli_confirm_model_file(ts_db *db, const char *model,
                           const char *const *shapes, int n_shapes,
                           const char *target,
                           const cli_model_confirm_options *o) {
  file_loader f = {db, target, model, shapes, n_shapes};
  if (cli_winograd_tile < 0 && !cli_no_winograd &&
      cli_model_confirm_winograd(db, load_forced, &f, o) != EXIT_OK)
    return EXIT_FAIL;
  ts_graph *g = NULL;
  if (load_forced(&f, NULL, NULL, 0, &g) != EXIT_OK) return EXIT_FAIL;
  int rc = cli_model_confirm(db, g, o);
  ts_graph_free(g);
  return rc;
}
