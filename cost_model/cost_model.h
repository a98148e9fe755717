/*
 * cost_model.h — the public interface of tessera's learned cost model: the
 * per-store program features of a scheduled and lowered candidate, the
 * model interface (predict / update / save / destroy) with its two
 * implementations (XGBoost trained online from measurements, and a random
 * model for comparison), loading saved models, ranking metrics, data sets
 * built from the tuning database's records, and the small random design
 * space `tessera costmodel collect` samples to build such data sets.
 *
 * The search generates thousands of candidates per round and measures a few
 * dozen: the model scores them (higher = expected faster) so the search
 * measures the promising ones. A score is only meaningful relative to other
 * scores of the same workload. docs/features.md defines every feature and
 * records the measured quality of the model.
 *
 * Models are not thread safe: one model per thread (or a lock around it).
 */
#ifndef TESSERA_COST_MODEL_H
#define TESSERA_COST_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codegen/codegen.h"
#include "db/db.h"
#include "schedule/schedule.h"
#include "tir/tir.h"

/* ========================================================================
 * Features (cost_model/features.c, the list in cost_model/features.def)
 * ======================================================================== */

/* The version of the feature vector's definition. It changes whenever an
 * entry is added, removed, reordered or redefined; saved models record it
 * and a model of another version is refused when loaded. */
#define TS_CM_FEATURES_VERSION 3

/* The entries of one store's vector, in order (see features.def). */
typedef enum ts_cm_feature_id {
#define TS_CM_FEATURE(id, name, meaning) TS_CM_F_##id,
#include "cost_model/features.def"
#undef TS_CM_FEATURE
  TS_CM_N_FEATURES
} ts_cm_feature_id;

/* The name of entry i ("float_mad", "buf0_bytes", ...) or NULL when out of
 * range; its one-line meaning (static storage). */
const char *ts_cm_feature_name(int i);
const char *ts_cm_feature_meaning(int i);

/* The features of one candidate: one row of TS_CM_N_FEATURES values per
 * buffer store (and per evaluated intrinsic call) of the lowered program,
 * each value log2(|x| + 1). */
typedef struct ts_cm_features {
  int n_rows;        /* stores; 0 for a program that stores nothing */
  float *values;     /* n_rows * TS_CM_N_FEATURES, row-major; malloc'd */
  double extract_ms; /* time spent lowering and extracting */
} ts_cm_features;

/* Extracts the features of f. A function in block form (a scheduled or
 * unscheduled workload) is first lowered by the feature pipeline on a copy
 * (ts_lower run as a prefix: blocks, flatten, simplify, vectorize; loop
 * kinds, vector lanes and vectorization fallbacks are then visible,
 * unrolled loops stay loops); a function without blocks (e.g. the output of
 * ts_lower) is used as it is.
 * `target` (may be NULL: one core, not a GPU) supplies the core count and
 * whether the code runs on a GPU. On success *out holds new rows the caller
 * frees with ts_cm_features_clear; on failure (the lowering refused the
 * function) *out is empty and err says why. */
int ts_cm_extract(const ts_func *f, const ts_target *target,
                  ts_cm_features *out, ts_error *err);
/* Frees the rows; safe on a zeroed struct. */
void ts_cm_features_clear(ts_cm_features *f);
/* A deep copy of src into *dst (TS_ENOMEM when memory runs out). */
int ts_cm_features_copy(ts_cm_features *dst, const ts_cm_features *src);
/* A readable table of the rows: one line per nonzero entry, "name  value
 * (raw)" grouped by row. Returns a malloc'd string (caller frees). */
char *ts_cm_features_print(const ts_cm_features *f);

/* ========================================================================
 * Models (cost_model/model.c, xgb.c, random.c)
 * ======================================================================== */

/* One candidate to score or to learn from. Give `features` when they are at
 * hand (they are used as they are); otherwise `func` (block form or lowered)
 * is extracted for the model's target. `group` identifies the workload (and
 * target) the candidate belongs to: training targets are normalized within
 * a group, and scores compare only within a group. */
typedef struct ts_cm_candidate {
  const ts_func *func;            /* NULL when features is given */
  const ts_cm_features *features; /* NULL: extract from func */
  int64_t group;                  /* the workload id, e.g. from the db */
} ts_cm_candidate;

/* A measured outcome. A failed candidate (any status but ok) has
 * ok = false and its seconds are ignored. */
typedef struct ts_cm_result {
  bool ok;
  double seconds; /* run time (median of repeats), > 0 when ok */
} ts_cm_result;

typedef struct ts_cost_model ts_cost_model;

/* Counters a model reports (ts_cm_info). */
typedef struct ts_cm_info {
  const char *kind;      /* "xgb", "random" (static) */
  int64_t n_samples;     /* candidates learned from (in memory) */
  int64_t n_rows;        /* their store rows */
  int64_t n_trained_on;  /* n_samples at the last training, 0 if none */
  int n_trainings;       /* trainings so far */
  bool trained;          /* predictions come from a model (trained here or
                            loaded), not random scores */
  bool warm;             /* started from a loaded model */
  double last_train_ms;  /* wall time of the last training */
  double total_train_ms; /* all trainings */
} ts_cm_info;

/* The operations of one model implementation (STYLE rule 3). */
typedef struct ts_cost_model_ops {
  const char *kind; /* "xgb", "random" */
  /* scores[i] for candidates[i], higher = expected faster. */
  int (*predict)(ts_cost_model *m, const ts_cm_candidate *candidates, int n,
                 double *scores, ts_error *err);
  /* Adds measured candidates to the model's data and retrains when its
   * rule says so. */
  int (*update)(ts_cost_model *m, const ts_cm_candidate *candidates,
                const ts_cm_result *results, int n, ts_error *err);
  /* Writes the model to a file (see docs/features.md, "Model files"). */
  int (*save)(ts_cost_model *m, const char *path, ts_error *err);
  void (*info)(const ts_cost_model *m, ts_cm_info *out);
  void (*destroy)(ts_cost_model *m);
} ts_cost_model_ops;

/* Every implementation's handle starts with this. */
struct ts_cost_model {
  const ts_cost_model_ops *ops;
};

/* Scores n candidates into scores[0, n). A candidate whose features cannot
 * be extracted (its lowering fails) gets -inf, not an error: the search
 * should not measure it. TS_EINVAL for n < 0 or a candidate with neither
 * func nor features. */
int ts_cm_predict(ts_cost_model *m, const ts_cm_candidate *candidates, int n,
                  double *scores, ts_error *err);
/* Learns from n measured candidates (results[i] belongs to candidates[i]).
 * The model keeps its own copy of their features. A candidate whose
 * features cannot be extracted is skipped. */
int ts_cm_update(ts_cost_model *m, const ts_cm_candidate *candidates,
                 const ts_cm_result *results, int n, ts_error *err);
/* Saves the model to `path` (written to a temporary file, then renamed, so
 * a failure leaves no partial file). TS_EIO naming the path on failure. */
int ts_cm_save(ts_cost_model *m, const char *path, ts_error *err);
/* Fills *out with the model's counters (all zero for NULL). */
void ts_cm_info_get(const ts_cost_model *m, ts_cm_info *out);
/* "xgb" or "random". */
const char *ts_cm_kind(const ts_cost_model *m);
/* Frees the model; NULL is a no-op. */
void ts_cm_destroy(ts_cost_model *m);

/* The training objective of the XGBoost model (docs/features.md explains
 * both; the default is the one that measured better). */
typedef enum ts_cm_objective {
  TS_CM_OBJ_RANK = 0,    /* pairwise logistic loss on candidate scores,
                            pairs within a group */
  TS_CM_OBJ_SQUARED = 1, /* squared error of the candidate score against the
                            normalized throughput, weighted by it */
} ts_cm_objective;

/* "rank" / "squared"; NULL when out of range. */
const char *ts_cm_objective_name(ts_cm_objective o);
/* TS_EINVAL (no message) for an unknown name. */
int ts_cm_objective_parse(const char *name, ts_cm_objective *out);

typedef struct ts_cm_xgb_options {
  const ts_target *target; /* features' target and default thread count;
                              NULL: one core (copied, not kept) */
  int nthread;             /* XGBoost threads; 0: the target's cores */
  uint64_t seed;           /* random scores and XGBoost's seed */
  ts_cm_objective objective;
  int rounds; /* boosting rounds per training */
  int max_depth;
  double eta; /* learning rate */
  double min_child_weight;
  int min_samples;       /* train only with at least this many (64) */
  double retrain_growth; /* and after the data grew by this fraction
                            since the last training (0.2) */
} ts_cm_xgb_options;

/* The defaults (docs/features.md says how they were chosen): no target
 * (nthread 0 then means 1), seed 1, TS_CM_OBJ_RANK, 150 rounds, depth 4,
 * eta 0.2, min_child_weight 1, 64 samples, 20% growth. */
ts_cm_xgb_options ts_cm_xgb_defaults(void);

/* A new XGBoost model with no data: it scores randomly until it first
 * trains. TS_EINVAL naming a bad option. Free with ts_cm_destroy. */
int ts_cm_xgb_create(const ts_cm_xgb_options *o, ts_cost_model **out,
                     ts_error *err);
/* Trains now on every sample held, whatever the retraining rule says
 * (evaluation and `costmodel train`). TS_EINVAL when m is not an XGBoost
 * model or holds no ok sample. */
int ts_cm_xgb_train(ts_cost_model *m, ts_error *err);

/* A model that scores uniformly at random in [0, 1) (seeded); update only
 * counts samples. Free with ts_cm_destroy. */
int ts_cm_random_create(uint64_t seed, ts_cost_model **out, ts_error *err);

/* Loads a saved model of either kind. An XGBoost model starts warm: it
 * predicts with the loaded trees at once, and when it retrains on data of
 * the new task it boosts on top of them. `o` (may be NULL: defaults)
 * supplies what the file does not: target, threads, retraining rule; the
 * objective, rounds, depth, rate and seed come from the file. A file that
 * is not a model, is truncated, or was saved with another features version
 * or vector length is refused (TS_EINVAL, naming the file and both
 * versions). Free with ts_cm_destroy. */
int ts_cm_load(const char *path, const ts_cm_xgb_options *o,
               ts_cost_model **out, ts_error *err);

/* ========================================================================
 * Metrics (cost_model/metrics.c)
 * ======================================================================== */

/* Ranking quality of scores against measured outcomes. */
typedef struct ts_cm_metrics {
  int64_t records;          /* candidates evaluated */
  int64_t pairs;            /* comparable pairs (same group, different
                               targets) */
  double pairwise_accuracy; /* fraction of pairs ordered like the targets
                               (equal scores count one half) */
  int64_t batches;          /* batches the recalls average over */
  double top1_recall;       /* fraction of batches whose true best candidate
                               has the highest score */
  double top8_recall;       /* ... is among the 8 highest scores */
  double spearman;          /* rank correlation of scores and targets per
                               group, averaged weighted by group size */
} ts_cm_metrics;

/* Accumulates metrics over several evaluations (folds). */
typedef struct ts_cm_metrics_acc {
  int64_t records, pairs, batches;
  double correct_pairs, top1_hits, top8_hits;
  double spearman_weighted; /* sum of group size * rho */
  int64_t spearman_weight;
} ts_cm_metrics_acc;

/* Normalized throughput targets: per group, best seconds / seconds for ok
 * results, 0 for failed ones (a group without ok results gets all 0).
 * targets has n entries. */
void ts_cm_targets(const int64_t *group, const ts_cm_result *results, int n,
                   double *targets);
/* Adds n scored candidates (targets as from ts_cm_targets) to acc: pairs
 * and Spearman within each group; recalls over batches of one group's
 * candidates in the given order: ceil(size / batch) batches of near-equal
 * sizes (batch 0: 64); a batch of fewer than 2 candidates or without an ok
 * one does not count. */
void ts_cm_metrics_add(ts_cm_metrics_acc *acc, const double *scores,
                       const double *targets, const int64_t *group, int n,
                       int batch);
/* The figures of acc (zeros for an empty accumulator). */
ts_cm_metrics ts_cm_metrics_of(const ts_cm_metrics_acc *acc);

/* ========================================================================
 * Data sets from the tuning database (cost_model/dataset.c)
 * ======================================================================== */

/* Measured candidates with their features, ready to train or evaluate on. */
typedef struct ts_cm_dataset {
  int n;                       /* candidates */
  ts_cm_features *features;    /* n entries */
  ts_cm_candidate *candidates; /* n entries pointing at features */
  ts_cm_result *results;       /* n entries */
  int64_t *record_ids;         /* n entries */
  int n_groups;                /* distinct (workload, target) pairs */
  char **group_names;          /* n_groups workload names (malloc'd) */
  int64_t *group_workload;     /* n_groups workload ids */
  int64_t skipped;             /* records left out: worker_lost, or a trace
                                  that no longer replays or lowers */
  int64_t merged;              /* records folded into a candidate with the
                                  same trace (measured again) */
  double extract_ms;           /* replay + feature extraction, all records */
} ts_cm_dataset;

/* Reads the records of one workload (key as ts_db_resolve_workload takes:
 * hash, prefix or name) or of every workload (NULL), on any target, and
 * extracts their features: every record's trace is replayed on its
 * workload, and candidate.group is the index of its (workload, target)
 * group in group_names. A candidate's time is its fastest repeat (noise
 * from other work only slows runs down); records of one group with the
 * same trace are one candidate with the fastest time over them (ok when
 * any is). worker_lost records are skipped (the candidate was never run).
 * On success *out is a new data set the caller frees with
 * ts_cm_dataset_free. */
int ts_cm_dataset_from_db(ts_db *db, const char *workload, ts_cm_dataset **out,
                          ts_error *err);
void ts_cm_dataset_free(ts_cm_dataset *ds);

/* ========================================================================
 * Random design space for data collection (cost_model/space.c)
 * ======================================================================== */

/* A random schedule of f, for building data sets: per block, consumers
 * first, random multi-level tiling of its loops (sample_perfect_tile,
 * spatial loops in 3 levels and reduction loops in 2), one of several loop
 * orders, optional decomposition of the reduction init, a random compute
 * location for producer blocks, a parallel outer loop (the outer spatial
 * tiles fused), a vectorized innermost loop, an optional unrolled inner
 * loop and a sampled auto-unroll step {0, 16, 64, 512}. Each step happens
 * with some probability and a step the schedule refuses is skipped, so
 * every result is a valid schedule. Works on any workload of the operator
 * library (designed for matmul, conv2d and softmax). On success *out is a
 * new schedule (its trace replays to it) the caller frees with
 * ts_sched_destroy. */
int ts_cm_sample_schedule(const ts_func *f, uint64_t seed, ts_sched **out,
                          ts_error *err);

#endif /* TESSERA_COST_MODEL_H */
