/*
 * openblas.c — the OpenBLAS baseline: matmul, batch_matmul (one GEMM per
 * batch; this OpenBLAS has no batched GEMM) and dense (the output rows set
 * to the bias, then a GEMM with beta 1) as row-major CBLAS calls, the
 * workload's transposes as CBLAS transposes. float32 uses cblas_sgemm,
 * float64 cblas_dgemm, bfloat16 inputs with a float32 output cblas_sbgemm —
 * looked up at run time, because OpenBLAS declares it in cblas.h whether or
 * not the library was built with bfloat16 support (Debian's is not).
 * OpenBLAS chooses its kernels from the CPU model when it is loaded; when
 * those are older than the CPU (a model it did not know), the result's note
 * says so.
 */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include "bench/internal.h"

#include <cblas.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cblas_sbgemm's signature, as OpenBLAS's cblas.h declares it. */
typedef void (*sbgemm_fn)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE,
                          enum CBLAS_TRANSPOSE, blasint, blasint, blasint,
                          float, const bfloat16 *, blasint, const bfloat16 *,
                          blasint, float, float *, blasint);

typedef enum gemm_kind { GEMM_S, GEMM_D, GEMM_SB } gemm_kind;

typedef struct gemm_ctx {
  gemm_kind kind;
  sbgemm_fn sbgemm;
  int64_t batch;
  blasint m, n, k, lda, ldb;
  enum CBLAS_TRANSPOSE ta, tb;
  const void *a, *b, *bias; /* bias NULL when there is none */
  void *c;
  int saved_threads; /* OpenBLAS's thread count before prepare */
} gemm_ctx;

static int gemm_run(void *ctx) {
  gemm_ctx *g = ctx;
  size_t in_bytes = g->kind == GEMM_D ? 8 : g->kind == GEMM_S ? 4 : 2;
  size_t out_bytes = g->kind == GEMM_D ? 8 : 4;
  size_t a_step = (size_t)g->m * (size_t)g->k * in_bytes;
  size_t b_step = (size_t)g->k * (size_t)g->n * in_bytes;
  size_t c_step = (size_t)g->m * (size_t)g->n * out_bytes;
  double beta = 0;
  if (g->bias) {
    /* dense: every output row starts as the bias; the GEMM adds X * W^T */
    for (blasint i = 0; i < g->m; i++)
      memcpy((char *)g->c + (size_t)i * (size_t)g->n * out_bytes, g->bias,
             (size_t)g->n * out_bytes);
    beta = 1;
  }
  for (int64_t bi = 0; bi < g->batch; bi++) {
    const char *a = (const char *)g->a + (size_t)bi * a_step;
    const char *b = (const char *)g->b + (size_t)bi * b_step;
    char *c = (char *)g->c + (size_t)bi * c_step;
    switch (g->kind) {
    case GEMM_S:
      cblas_sgemm(CblasRowMajor, g->ta, g->tb, g->m, g->n, g->k, 1.0f,
                  (const float *)a, g->lda, (const float *)b, g->ldb,
                  (float)beta, (float *)c, g->n);
      break;
    case GEMM_D:
      cblas_dgemm(CblasRowMajor, g->ta, g->tb, g->m, g->n, g->k, 1.0,
                  (const double *)a, g->lda, (const double *)b, g->ldb, beta,
                  (double *)c, g->n);
      break;
    case GEMM_SB:
      g->sbgemm(CblasRowMajor, g->ta, g->tb, g->m, g->n, g->k, 1.0f,
                (const bfloat16 *)a, g->lda, (const bfloat16 *)b, g->ldb,
                (float)beta, (float *)c, g->n);
      break;
    }
  }
  return 0;
}

/* When OpenBLAS runs kernels that leave this CPU's vector units idle —
 * it did not recognize the CPU — says so and how to fix it. */
static void check_core(char *note, size_t size) {
  const char *core = openblas_get_corename();
  if (!core) return;
  static const char *const avx512_cores[] = {"SkylakeX", "Cooperlake",
                                             "SapphireRapids"};
  bool avx512 = false;
  for (size_t i = 0; i < sizeof avx512_cores / sizeof *avx512_cores; i++)
    avx512 |= strcmp(core, avx512_cores[i]) == 0;
  if (ts_rt_cpu_has("avx512f") == 1 && !avx512)
    snprintf(note, size,
             "OpenBLAS runs its %s kernels, not its AVX-512 ones: it did not "
             "recognize this CPU; set OPENBLAS_CORETYPE=SkylakeX in the "
             "environment for a fair baseline",
             core);
  else if (ts_rt_cpu_has("avx2") == 1 && strcmp(core, "Prescott") == 0)
    snprintf(note, size,
             "OpenBLAS runs its Prescott (SSE3) kernels: it did not recognize "
             "this CPU; set OPENBLAS_CORETYPE=Haswell in the environment for "
             "a fair baseline");
}

static void gemm_destroy(void *ctx) {
  gemm_ctx *g = ctx;
  openblas_set_num_threads(g->saved_threads);
  free(g);
}

int openblas_prepare(const bench_case *c, bench_kernel *k, ts_error *err) {
  const bench_op *op = &c->op;
  char a[32], b[32];
  if (op->kind != BENCH_MATMUL && op->kind != BENCH_DENSE)
    return TS_ERR(err, TS_EUNSUPPORTED,
                  "openblas: not applicable: OpenBLAS has no %s (only GEMM "
                  "workloads: matmul, batch_matmul, dense)",
                  op->op);
  gemm_kind kind;
  sbgemm_fn sbgemm = NULL;
  if (ts_dtype_eq(op->in, TS_FLOAT32) && ts_dtype_eq(op->out, TS_FLOAT32)) {
    kind = GEMM_S;
  } else if (ts_dtype_eq(op->in, TS_FLOAT64) &&
             ts_dtype_eq(op->out, TS_FLOAT64)) {
    kind = GEMM_D;
  } else if (ts_dtype_eq(op->in, TS_BFLOAT16) &&
             ts_dtype_eq(op->out, TS_FLOAT32)) {
    kind = GEMM_SB;
    /* dlsym hands back an object pointer; POSIX guarantees it converts. */
    *(void **)&sbgemm = dlsym(RTLD_DEFAULT, "cblas_sbgemm");
    if (!sbgemm)
      return TS_ERR(err, TS_EUNSUPPORTED,
                    "openblas: not applicable: this OpenBLAS has no bfloat16 "
                    "GEMM (it was built without BUILD_BFLOAT16: cblas_sbgemm "
                    "is not exported)");
  } else {
    return TS_ERR(err, TS_EUNSUPPORTED,
                  "openblas: not applicable: OpenBLAS has no GEMM for %s "
                  "inputs with a %s output",
                  ts_dtype_str(op->in, a), ts_dtype_str(op->out, b));
  }
  if (op->m > INT_MAX || op->n > INT_MAX || op->k > INT_MAX)
    return TS_ERR(err, TS_EUNSUPPORTED,
                  "openblas: not applicable: a dimension is over the 32-bit "
                  "BLAS index range");

  gemm_ctx *g = calloc(1, sizeof *g);
  if (!g) return TS_ERR(err, TS_ENOMEM, "openblas: out of memory");
  g->kind = kind;
  g->sbgemm = sbgemm;
  g->batch = op->batch;
  g->m = (blasint)op->m;
  g->n = (blasint)op->n;
  g->k = (blasint)op->k;
  g->a = c->data[0];
  g->b = c->data[1];
  g->c = c->data[c->out];
  if (op->kind == BENCH_DENSE) {
    /* Y = X W^T: X is [M, K], W is [N, K] */
    g->ta = CblasNoTrans;
    g->tb = CblasTrans;
    g->lda = g->k;
    g->ldb = g->k;
    g->bias = op->bias ? c->data[2] : NULL;
  } else {
    /* A is [M, K] or [K, M] (transpose_a), B is [K, N] or [N, K] */
    g->ta = op->trans_a ? CblasTrans : CblasNoTrans;
    g->tb = op->trans_b ? CblasTrans : CblasNoTrans;
    g->lda = op->trans_a ? g->m : g->k;
    g->ldb = op->trans_b ? g->k : g->n;
  }
  g->saved_threads = openblas_get_num_threads();
  openblas_set_num_threads(c->threads);

  const char *routine = kind == GEMM_S   ? "cblas_sgemm"
                        : kind == GEMM_D ? "cblas_dgemm"
                                         : "cblas_sbgemm";
  char *config = openblas_get_config();
  snprintf(k->impl, sizeof k->impl, "%s%s%s; %s", routine,
           op->batch > 1 ? " per batch" : "",
           g->bias ? " after a bias copy" : "", config ? config : "OpenBLAS");
  check_core(k->note, sizeof k->note);
  k->run = gemm_run;
  k->ctx = g;
  k->destroy = gemm_destroy;
  return TS_OK;
}
