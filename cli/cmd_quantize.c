/*
 * cmd_quantize.c — `tessera quantize profile`: runs a model on calibration
 * inputs with the quantization profile observing every float32 tensor it
 * computes (graph/quant.c), and writes the profile as JSON: each tensor's
 * range, NaN/infinity counts, histograms and the range each calibration
 * picks. The quantized compile reads it (docs/quantization.md).
 */
#include "cli.h"

#include "graph/graph.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char quantize_usage[] =
    "usage: tessera quantize profile MODEL.onnx --inputs CALIB.npz\n"
    "                        -o PROFILE.json [--input-shape NAME=DIMS]...\n"
    "                        [--bins N] [--percentile P] [--interpret]\n"
    "                        [--pet [--pet-trials T] [--pet-depth D]]\n"
    "\n"
    "Runs the model on the calibration samples and records, for every\n"
    "float32 tensor it computes, the range of its values, how many were NaN\n"
    "or infinite, and histograms, with the range each calibration (minmax,\n"
    "percentile, entropy) keeps.\n"
    "\n"
    "  --inputs CALIB.npz  one array per model input, by name: the input's\n"
    "                      shape (one sample) or that shape under a leading\n"
    "                      axis of N samples (the same N for every input)\n"
    "  -o, --output FILE   the profile (JSON; written whole or not at all)\n"
    "  --bins N            bins of each histogram (default 2048)\n"
    "  --percentile P      the share the percentile calibration keeps, in %\n"
    "                      (default 99.99)\n"
    "  --interpret         run in the reference interpreter (slow) instead\n"
    "                      of kernels compiled for this machine\n"
    "  --pet, --pet-trials T  the graph with PET's rewrites, as `compile\n"
    "                      --pet --quantize` quantizes it (docs/pet.md)\n"
    "\n"
    "Exit status: 0 written, 1 failure (bad model or inputs), 2 usage error.\n";

/* The samples: for input i, n samples of bytes[i] each at data[i]. */
typedef struct samples {
  ts_graph_tensor *t; /* one per graph input: sample 0's view */
  const unsigned char **data;
  size_t *bytes;
  int n;
} samples;

static int find_samples(const ts_graph *g, const ts_graph_npz *npz,
                        const char *path, samples *s) {
  int n_in = ts_graph_n_inputs(g);
  s->t = calloc((size_t)n_in + 1, sizeof *s->t);
  s->data = calloc((size_t)n_in + 1, sizeof *s->data);
  s->bytes = calloc((size_t)n_in + 1, sizeof *s->bytes);
  if (!s->t || !s->data || !s->bytes) {
    fprintf(stderr, "tessera: error: out of memory\n");
    return EXIT_FAIL;
  }
  s->n = -1;
  for (int i = 0; i < n_in; i++) {
    ts_graph_value_info info = ts_graph_input(g, i);
    ts_graph_tensor a;
    ts_error err;
    ts_error_clear(&err);
    if (ts_graph_npz_find(npz, info.name, &a, &err) != TS_OK) {
      cli_error("bad calibration inputs", &err);
      return EXIT_FAIL;
    }
    char want[32], got[32];
    if (!ts_dtype_eq(a.dtype, info.dtype)) {
      fprintf(stderr,
              "tessera: error: %s: array '%s' is %s; the model's input is %s\n",
              path, info.name, ts_dtype_str(a.dtype, got),
              ts_dtype_str(info.dtype, want));
      return EXIT_FAIL;
    }
    int lead = a.ndim - info.ndim;
    bool fits = lead == 0 || lead == 1;
    for (int d = 0; fits && d < info.ndim; d++)
      fits = a.shape[lead + d] == info.shape[d];
    int n = lead ? (int)a.shape[0] : 1;
    if (!fits || n < 1) {
      fprintf(stderr,
              "tessera: error: %s: array '%s' has %d dimensions; the model's "
              "input is one sample of %d dimensions (or N samples of them "
              "under a leading axis) with the shape `tessera graph show` "
              "prints\n",
              path, info.name, a.ndim, info.ndim);
      return EXIT_FAIL;
    }
    if (s->n >= 0 && n != s->n) {
      fprintf(stderr,
              "tessera: error: %s: array '%s' holds %d samples, an earlier "
              "input %d\n",
              path, info.name, n, s->n);
      return EXIT_FAIL;
    }
    s->n = n;
    s->t[i] = (ts_graph_tensor){info.name, info.dtype, info.ndim, {0}, a.data};
    memcpy(s->t[i].shape, info.shape, sizeof(int64_t) * (size_t)info.ndim);
    s->bytes[i] = ts_dtype_elem_bytes(info.dtype);
    for (int d = 0; d < info.ndim; d++) s->bytes[i] *= (size_t)info.shape[d];
    s->data[i] = a.data;
  }
  if (s->n < 0) s->n = 1; /* a model without inputs: one run */
  return EXIT_OK;
}

static void samples_free(samples *s) {
  free(s->t);
  free(s->data);
  free(s->bytes);
}

/* Writes text to path through a temporary name in the same folder. */
static int write_whole(const char *path, const char *text) {
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp-%ld", path, (long)getpid());
  FILE *f = fopen(tmp, "w");
  if (!f) {
    fprintf(stderr, "tessera: error: cannot write '%s': %s\n", tmp,
            strerror(errno));
    return EXIT_FAIL;
  }
  bool ok = fputs(text, f) >= 0 && fputc('\n', f) != EOF;
  ok = (fclose(f) == 0) && ok;
  if (!ok || rename(tmp, path) != 0) {
    fprintf(stderr, "tessera: error: cannot write '%s': %s\n", path,
            strerror(errno ? errno : EIO));
    unlink(tmp);
    return EXIT_FAIL;
  }
  return EXIT_OK;
}

/* The warnings a user acts on: tensors with NaN or infinite values (left
 * out of their ranges), with none finite (not quantizable), constant ones
 * (a zero-width range). */
static void warn(const ts_quant_profile *p) {
  int bad = 0, none = 0, constant = 0;
  for (int i = 0; i < ts_quant_profile_n(p); i++) {
    const ts_quant_stats *s = ts_quant_profile_get(p, i);
    if (s->count == 0) {
      if (none++ < 5)
        fprintf(stderr,
                "tessera: warning: tensor '%s' held no finite value (%lld "
                "NaN, %lld infinite): it cannot be quantized\n",
                s->name, (long long)s->nan, (long long)s->inf);
      continue;
    }
    if (s->nan || s->inf) {
      if (bad++ < 5)
        fprintf(stderr,
                "tessera: warning: tensor '%s' held %lld NaN and %lld "
                "infinite values, left out of its range [%g, %g]\n",
                s->name, (long long)s->nan, (long long)s->inf, s->min, s->max);
    }
    if (s->min == s->max && constant++ < 5)
      fprintf(stderr,
              "note: tensor '%s' is constant (%g) over the samples: its range "
              "is widened to hold 0\n",
              s->name, s->min);
  }
  if (bad > 5 || none > 5 || constant > 5)
    fprintf(stderr,
            "(%d tensors with NaN or infinity, %d with no finite "
            "value, %d constant in all)\n",
            bad, none, constant);
}

static int profile(int argc, char **argv) {
  const char *model = NULL, *inputs = NULL, *output = NULL;
  long bins = 2048;
  double percentile = 99.99;
  bool interpret = false;
  const char **shapes = calloc((size_t)argc + 1, sizeof *shapes);
  int n_shapes = 0, rc = EXIT_OK;
  if (!shapes) return EXIT_FAIL;
  for (int i = 1; i < argc && rc == EXIT_OK; i++) {
    const char *v = NULL;
    bool missing = false;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(quantize_usage, stdout);
      free(shapes);
      return EXIT_OK;
    } else if (cli_opt_value(argc, argv, &i, "--inputs", &v, &missing)) {
      if (missing) rc = cli_usage_error("quantize", "--inputs needs a file");
      inputs = v;
    } else if (cli_opt_value(argc, argv, &i, "-o", &v, &missing) ||
               cli_opt_value(argc, argv, &i, "--output", &v, &missing)) {
      if (missing) rc = cli_usage_error("quantize", "-o needs a file");
      output = v;
    } else if (cli_opt_value(argc, argv, &i, "--input-shape", &v, &missing)) {
      if (missing)
        rc = cli_usage_error("quantize", "--input-shape needs NAME=DIMS");
      shapes[n_shapes++] = v;
    } else if (cli_opt_value(argc, argv, &i, "--bins", &v, &missing)) {
      rc = missing ? cli_usage_error("quantize", "--bins needs a number")
                   : cli_int_option("quantize", "--bins", v, 16, 65536, &bins);
    } else if (cli_opt_value(argc, argv, &i, "--percentile", &v, &missing)) {
      char *end = NULL;
      percentile = missing ? 0 : strtod(v, &end);
      if (missing || !end || *end || !(percentile > 0 && percentile <= 100))
        rc = cli_usage_error("quantize",
                             "--percentile wants a share in (0, 100]");
    } else if (!strcmp(argv[i], "--interpret")) {
      interpret = true;
    } else if (!strcmp(argv[i], "--pet") || !strcmp(argv[i], "--pet-trials") ||
               !strcmp(argv[i], "--pet-depth") ||
               !strcmp(argv[i], "--pet-only") ||
               !strcmp(argv[i], "--pet-apply-all")) {
      /* profile the graph that `compile --pet` quantizes */
      int prc;
      cli_pass_option("quantize", argc, argv, &i, &prc);
      if (prc != EXIT_OK) rc = prc;
    } else if (argv[i][0] == '-') {
      rc = cli_usage_error("quantize", "unknown option '%s'", argv[i]);
    } else if (!model) {
      model = argv[i];
    } else {
      rc = cli_usage_error("quantize", "more than one model given");
    }
  }
  if (rc == EXIT_OK && !model)
    rc = cli_usage_error("quantize", "no model given");
  if (rc == EXIT_OK && !inputs)
    rc = cli_usage_error("quantize", "no calibration inputs (--inputs)");
  if (rc == EXIT_OK && !output)
    rc = cli_usage_error("quantize", "no output given (-o PROFILE.json)");
  if (rc == EXIT_OK) rc = cli_output_path("quantize", output);
  if (rc != EXIT_OK) {
    free(shapes);
    return rc;
  }
  ts_graph *g = NULL;
  ts_graph_npz *npz = NULL;
  ts_quant_profile *p = NULL;
  samples s = {0};
  char *json = NULL;
  ts_error err;
  ts_error_clear(&err);
  rc = EXIT_FAIL;
  if (cli_load_model(model, shapes, n_shapes, &g) != EXIT_OK) goto done;
  if (ts_graph_npz_read(inputs, &npz, &err) != TS_OK) {
    cli_error("cannot read the calibration inputs", &err);
    goto done;
  }
  if (find_samples(g, npz, inputs, &s) != EXIT_OK) goto done;
  if (ts_quant_profile_create(g, (int)bins, &p, &err) != TS_OK) {
    cli_error("cannot start the profile", &err);
    goto done;
  }
  bool tty = isatty(fileno(stderr));
  ts_graph_exec_mode mode = interpret ? TS_GRAPH_INTERPRET : TS_GRAPH_COMPILE;
  for (int pass = 0; pass < 2; pass++)
    for (int k = 0; k < s.n; k++) {
      fprintf(stderr,
              tty ? "\rprofile: %s, sample %d of %d\033[K"
                  : "profile: %s, sample %d of %d\n",
              pass ? "histograms" : "ranges", k + 1, s.n);
      int n_in = ts_graph_n_inputs(g);
      for (int i = 0; i < n_in; i++)
        s.t[i].data = (void *)(s.data[i] + (size_t)k * s.bytes[i]);
      if (ts_quant_profile_add(p, pass, mode, s.t, n_in, &err) != TS_OK) {
        if (tty) fputc('\n', stderr);
        cli_error("the model failed on a calibration sample", &err);
        goto done;
      }
    }
  if (tty) fputs("\r\033[K", stderr);
  warn(p);
  json = ts_quant_profile_json(p, model, percentile);
  if (!json) {
    fprintf(stderr, "tessera: error: out of memory\n");
    goto done;
  }
  if (write_whole(output, json) != EXIT_OK) goto done;
  printf("profiled %d tensors of %s over %d samples -> %s\n",
         ts_quant_profile_n(p), model, s.n, output);
  rc = EXIT_OK;
done:
  free(json);
  ts_quant_profile_free(p);
  samples_free(&s);
  ts_graph_npz_free(npz);
  ts_graph_free(g);
  free(shapes);
  return rc;
}

int cmd_quantize(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    fputs(quantize_usage, argc < 2 ? stderr : stdout);
    return argc < 2 ? EXIT_USAGE : EXIT_OK;
  }
  if (!strcmp(argv[1], "profile")) return profile(argc - 1, argv + 1);
  return cli_usage_error("quantize", "unknown subcommand '%s' (profile)",
                         argv[1]);
}
