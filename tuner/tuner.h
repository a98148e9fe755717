/*
 * tuner.h — the public interface of tessera's tuner: design spaces built by
 * schedule rules (with tensorization variants), postprocessors, mutators,
 * the search strategies (evolutionary with a cost model, and random), the
 * task scheduler over several workloads, and resumable tuning jobs that
 * measure candidates through a runner and commit them to the database.
 *
 * The unit everything works on is the trace (schedule/schedule.h). A design
 * space is a trace whose sampling instructions are the open choices; a
 * candidate is that trace with every decision made (the "design trace"),
 * replayed on the unscheduled workload and then postprocessed (parallel,
 * vectorize and unroll annotations rewritten into loop kinds, reduction
 * inits decomposed, tensorize applied, GPU limits verified). Mutators change
 * decisions of a design trace; postprocessors run again after every replay.
 * The database stores the full trace (design + postprocessing), which
 * replays to the measured function without the tuner, and marks where the
 * postprocessing starts so the tuner can continue from stored records.
 *
 * Errors: functions return TS_OK or a negative TS_E* code with `err` (may
 * be NULL) filled, as everywhere in tessera.
 */
#ifndef TESSERA_TUNER_H
#define TESSERA_TUNER_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "codegen/codegen.h"
#include "cost_model/cost_model.h"
#include "db/db.h"
#include "rpc/rpc.h"
#include "schedule/schedule.h"
#include "tir/tir.h"

/* ========================================================================
 * Design spaces (tuner/rule_framework.c, rules_cpu.c, rules_tensorize.c,
 * rules_gpu.c)
 * ======================================================================== */

/* A user rule: the trace (JSON file) is applied instead of the default
 * rules for the block named `block`. Its sampling instructions become part
 * of the design space (their recorded decisions are dropped when sampling). */
typedef struct ts_custom_rule {
  const char *block;     /* block name */
  const ts_trace *trace; /* borrowed for the call */
} ts_custom_rule;

typedef struct ts_space_options {
  int max_innermost_factor;           /* multi-level tiling (64) */
  bool tensorize;                     /* add tensorization variants (true) */
  bool cache_write;                   /* add the cache-write variants (true) */
  bool cache_read;                    /* add the read-cache variants (true) */
  const ts_custom_rule *custom_rules; /* may be NULL */
  int n_custom_rules;
} ts_space_options;

/* max_innermost_factor 64, tensorize, cache_write and cache_read on, no
 * custom rule. */
ts_space_options ts_space_defaults(void);

/* One design space. */
typedef struct ts_design_space {
  char name[160];  /* what it is: "C: mlt; cache_write@2",
                      "C: tensorize avx512_bf16_16x2", "C: custom", ... */
  ts_trace *trace; /* simplified, decisions as sampled once (owned) */
  char intrin[48]; /* the tensor intrinsic of a tensorization variant, or "" */
} ts_design_space;

/* Builds the design spaces of f (an unscheduled workload) for target t by
 * applying the rules of the target's rule list (tuner/rule_lists.c, named
 * by the target family's facts) to every block, consumers first:
 *  cpu (llvm): auto-inline of injective producers (not through if_then_else),
 *        add-rfactor for reductions with little spatial parallelism,
 *        multi-level tiling SSRSRS (sample_perfect_tile per loop, innermost
 *        factor at most max_innermost_factor) with no / level-1 / level-2
 *        cache-write variants, each with no / level-1 / level-2 read cache
 *        of the input the innermost tile streams through (B of a matmul),
 *        parallelize-vectorize-unroll (parallel extent sampled up to
 *        cores x 16, vectorize up to 64 lanes, unroll step
 *        sampled from {0, 16, 64, 512}), random compute location; and, when
 *        the target has the feature and a block matches a registered
 *        intrinsic (AMX bf16/int8, AVX512-VNNI, AVX512-BF16), a tiling with
 *        that intrinsic as the innermost tile, tensorized by postprocessing;
 *  gpu (cuda): auto-inline (into consumers), multi-level tiling SSSRRSRS bound
 *        to blockIdx / vthread / threadIdx with shared-memory read caches
 *        (cooperative fetch, sampled vector length 1..16) and a local write
 *        cache, cross-thread reduction for row reductions, auto-bind of
 *        unbound blocks, and the mma m16n8k16 tensor-core variant for
 *        fp16/bf16 matmul-like blocks on sm_80 and newer.
 * On success *out is a new array of *n spaces (n >= 1) the caller frees
 * with ts_design_spaces_free. Errors: a function the schedule refuses, a
 * custom rule naming no block, a custom trace that does not apply. */
int ts_space_generate(const ts_func *f, const ts_target *t,
                      const ts_space_options *o, ts_design_space **out, int *n,
                      ts_error *err);
void ts_design_spaces_free(ts_design_space *spaces, int n);
/* Whether the tuner has a rule list of that name (the rules a target
 * family's facts name: "cpu", "gpu"; tuner/rule_lists.c). */
bool ts_rule_list_known(const char *name);

/* ========================================================================
 * Postprocessors (tuner/postproc.c)
 * ======================================================================== */

typedef enum ts_postproc_kind {
  TS_POSTPROC_REWRITE_REDUCTION = 0, /* decompose every reduction's init at
                                        its outermost reduce loop */
  TS_POSTPROC_REWRITE_TENSORIZE = 1, /* tensorize blocks annotated by the
                                        tensorization rule */
  TS_POSTPROC_REWRITE_PARALLEL_VECTORIZE_UNROLL = 2, /* the root block's
                                        annotations into loop kinds */
  TS_POSTPROC_VERIFY_GPU = 3, /* threads per block, shared memory,
                                 registers (GPU targets) */
  TS_POSTPROC_REWRITE_COOPERATIVE_FETCH = 4, /* the shared-memory copies
                                 bound to the block's threads (GPU) */
} ts_postproc_kind;
#define TS_N_POSTPROCS 5

/* "rewrite_reduction_block", ... ; NULL when out of range. */
const char *ts_postproc_name(ts_postproc_kind k);

/* Applies the postprocessors of the target's rule list in order (CPU:
 * rewrite_reduction_block, rewrite_tensorize,
 * rewrite_parallel_vectorize_unroll; GPU: the same with
 * rewrite_cooperative_fetch before the last and verify_gpu_code after it)
 * to s, in place; the primitives they call are
 * recorded in s's trace. Returns TS_OK, or an error naming the
 * postprocessor (TS_ESCHEDULE for a candidate it rejects: such a candidate
 * is dropped before measurement; s may then be half-rewritten). */
int ts_postproc_apply(ts_sched *s, const ts_target *t, ts_error *err);

/* What verify_gpu checks, from the lowered candidate. */
typedef struct ts_gpu_usage {
  int64_t threads_per_block; /* product of the threadIdx extents */
  int64_t shared_bytes;      /* shared-memory allocations */
  int64_t registers;         /* estimate: 32-bit words of thread-local
                                allocations + a base of 24 */
  int64_t vthreads;          /* product of the vthread extents */
} ts_gpu_usage;
/* Lowers a copy of the scheduled function f and measures its GPU usage;
 * TS_ESCHEDULE when a target limit is exceeded, or when threads would read
 * a per-thread buffer (neither parameter nor shared) that other threads
 * wrote (the message names which), or the lowering's error. usage may be
 * NULL. */
int ts_verify_gpu(const ts_func *f, const ts_target *t, ts_gpu_usage *usage,
                  ts_error *err);

/* ========================================================================
 * Candidates (tuner/candidate.c)
 * ======================================================================== */

/* One scheduled candidate. */
typedef struct ts_candidate {
  ts_trace *design; /* the design trace: every decision made (owned) */
  ts_sched *sched;  /* after postprocessing (owned) */
  ts_hash128 hash;  /* structural hash of ts_sched_func(sched) */
  int space;        /* index of the design space it came from, -1 unknown */
} ts_candidate;

/* Frees what the candidate owns and zeroes it (safe on a zeroed one). */
void ts_candidate_clear(ts_candidate *c);

/* Replays `design` on f (missing decisions sampled from seed), copies the
 * replayed trace as the candidate's design trace and postprocesses. On
 * failure *out is zeroed and err names the instruction or postprocessor. */
int ts_candidate_make(const ts_trace *design, const ts_func *f,
                      const ts_target *t, uint64_t seed, ts_candidate *out,
                      ts_error *err);
/* A fresh sample of a design space: every decision dropped, then
 * ts_candidate_make with `seed`. */
int ts_candidate_sample(const ts_design_space *space, int space_index,
                        const ts_func *f, const ts_target *t, uint64_t seed,
                        ts_candidate *out, ts_error *err);

/* The JSON stored in a record: the candidate's full trace (simplified)
 * with an extra top-level key "postproc_from" (the number of design
 * instructions). Returns a malloc'd string (caller frees) or NULL when
 * memory runs out. */
char *ts_candidate_record_json(const ts_candidate *c);
/* Reads a record's trace JSON back: *full (may be NULL) the whole trace,
 * *design (may be NULL) the design part (the whole trace when the record
 * has no "postproc_from"). Caller frees both. */
int ts_record_traces(const char *json, ts_trace **full, ts_trace **design,
                     ts_error *err);

/* ========================================================================
 * Mutators (tuner/mutators.c)
 * ======================================================================== */

typedef enum ts_mutator_kind {
  TS_MUTATOR_TILE_SIZE = 0,        /* move a factor between two tile levels */
  TS_MUTATOR_COMPUTE_LOCATION = 1, /* another compute location */
  TS_MUTATOR_UNROLL = 2,           /* another auto-unroll step */
  TS_MUTATOR_PARALLEL = 3,         /* another parallel extent */
} ts_mutator_kind;
#define TS_N_MUTATORS 4

/* "mutate_tile_size", ...; NULL when out of range. */
const char *ts_mutator_name(ts_mutator_kind k);
/* The default probabilities of the mutators on target t, from its rule
 * list (they sum to 1): cpu tile 0.9, compute location 0.05, unroll 0.03,
 * parallel 0.02; gpu tile 0.9, compute location 0.05, unroll 0.05,
 * parallel 0. A NULL target gets the cpu ones. */
void ts_mutator_probs(const ts_target *t, double probs[TS_N_MUTATORS]);

/* A copy of `design` with one decision of kind k changed at random (rng).
 * TS_ENOTFOUND when the trace has no decision that mutator can change. The
 * new decision is not checked here (replay does that: a mutated trace may
 * fail to apply, and callers try again). Caller frees *out. */
int ts_mutate(const ts_trace *design, ts_mutator_kind k, ts_rng *rng,
              ts_trace **out, ts_error *err);

/* ========================================================================
 * Search (tuner/search.c, search_evolutionary.c, search_random.c)
 * ======================================================================== */

typedef enum ts_strategy_kind {
  TS_STRATEGY_EVOLUTIONARY = 0,
  TS_STRATEGY_RANDOM = 1,
} ts_strategy_kind;
const char *ts_strategy_name(ts_strategy_kind k);
int ts_strategy_parse(const char *name, ts_strategy_kind *out);

/* Evolutionary search settings. The defaults are the best-known tuner's
 * scaled for a small machine (docs/tuning.md): population 256 (512 there),
 * 20% from the measured best, 3 genetic iterations (4), mutation
 * probability 0.85, epsilon 0.05, 32 candidates per batch (64). */
typedef struct ts_search_options {
  int population;             /* candidates per generation */
  double init_measured_ratio; /* share of the initial population taken
                              from the best measured records */
  int init_min_unmeasured;    /* fresh samples at least */
  int genetic_iters;          /* generations evolved per batch */
  double mutate_prob;         /* chance a child is a mutation (else a copy) */
  int max_fail;               /* attempts per child before giving up */
  double epsilon;             /* share of a batch picked at random */
  int batch;                  /* candidates measured per round */
  int threads;                /* threads sampling, mutating and extracting
                                 features (0: the target's cores) */
  double mutator_probs[TS_N_MUTATORS]; /* all 0: ts_mutator_probs */
  int early_stop_rounds; /* stop a task after this many rounds in a row
                            that found nothing new (3) */
  double space_share;    /* share of a batch given to the design spaces by
                            an upper confidence bound on how fast their
                            best could be (0.125), so the search does not
                            settle on one space early */
  double local_share;    /* share of a batch given, once a round has not
                            improved the task's fastest, to random single
                            mutations of its fastest measured designs,
                            measured whatever the model predicts (0.125):
                            a local search the model's errors cannot
                            steer away from the incumbent's neighbours */
} ts_search_options;
ts_search_options ts_search_defaults(void);

/* ========================================================================
 * Task scheduler (tuner/task_scheduler.c)
 * ======================================================================== */

typedef enum ts_task_policy {
  TS_TASK_ROUND_ROBIN = 0,
  TS_TASK_GRADIENT = 1, /* Ansor-style: the task with the largest expected
                           reduction of the weighted latency per trial */
} ts_task_policy;
const char *ts_task_policy_name(ts_task_policy p);
int ts_task_policy_parse(const char *name, ts_task_policy *out);

/* What the scheduler knows of one task. */
typedef struct ts_task_state {
  double weight; /* occurrences in the model (>= 0) */
  double flops;
  int64_t trials;       /* measured so far */
  int64_t max_trials;   /* this task's cap */
  int rounds;           /* rounds run */
  bool done;            /* finished: cap reached or converged */
  double *best_history; /* best latency (s) after each round; INFINITY
                           while nothing measured ok */
  int n_history;
} ts_task_state;

/* The next task to run a round of, or -1 when every task is done.
 * round_robin: the tasks in turn. gradient: one round each first, then
 * argmax over live tasks of weight * (alpha * backward improvement over
 * the last `window` rounds + (1 - alpha) * best / rounds) (alpha 0.2,
 * window 3); a task without an ok measurement goes first. `turn` is the
 * number of rounds scheduled so far. */
int ts_task_next(ts_task_policy p, const ts_task_state *tasks, int n,
                 int64_t turn);

/* ========================================================================
 * Building candidates (tuner/builder.c)
 * ======================================================================== */

/* Builds f[0..n) for t as a tuning job does: art[i] is the artifact
 * (released with ts_artifact_release) or NULL with why[i] saying why.
 * timeout_ms > 0: in up to `procs` forked processes, each build limited to
 * timeout_ms, so a build that hangs or crashes fails alone (call it while
 * no other thread of the process runs). timeout_ms <= 0: on `procs`
 * threads of this process, no limit. */
void ts_build_batch(const ts_func *const *f, int n, const ts_target *t,
                    uint64_t const_params, int procs, int timeout_ms,
                    ts_artifact **art, char (*why)[TS_MEASURE_ERROR_MAX]);

/* Builds scheduled f as a measurement runs it. The parameters in
 * const_params and f's own (ts_func_const_params; bit i: parameter i) are
 * constants, as a model's weights: on a CPU target the stages that read
 * only them (a weight packed into a kernel's layout) go to the kernel's
 * prologue (ts_func_hoist_const, ts_build_split_kernel), which whoever
 * loads it runs once before timing (ts_rt_kernel_prepare), as a compiled
 * model prepares them at compile time. Otherwise, or when no stage reads
 * only constants, ts_build. */
int ts_build_measured(const ts_func *f, uint64_t const_params,
                      const ts_target *t, const ts_build_options *o,
                      ts_build_result *out, ts_error *err);

/* ========================================================================
 * Tuning jobs (tuner/job.c)
 * ======================================================================== */

/* One task of a job: a workload and its weight. */
typedef struct ts_tune_task {
  const ts_func *func; /* unscheduled workload (borrowed) */
  const char *name;    /* short name for tables, e.g. the workload's */
  const char *spec;    /* the spec it came from, or NULL (a TIR file) */
  double weight;       /* 1 unless given */
  double flops;        /* 0: ts_func_flops */
  /* Bit i: parameter i is a constant at every call (a model's weights);
   * candidates are built and timed with the stages that read only such
   * parameters run once before timing (ts_build_measured). The function's
   * own declaration (ts_func_const_params) counts too. */
  uint64_t const_params;
} ts_tune_task;

/* How a job reports while it runs. */
typedef struct ts_tune_output {
  FILE *out; /* the task table, progress bar and summary (stdout); NULL:
                silent */
  FILE *log; /* JSON Lines, one line per measured candidate; NULL: none */
  bool tty;  /* redraw the progress bar in place */
} ts_tune_output;

typedef struct ts_tune_options {
  const char *target;      /* target string */
  int64_t trials;          /* the job's total budget */
  int64_t trials_per_task; /* cap per task; 0: no cap beyond trials */
  const char *job_name;    /* NULL: a new generated name */
  uint64_t seed;
  ts_strategy_kind strategy;
  const char *cost_model; /* "xgb" or "random" */
  ts_task_policy policy;
  ts_search_options search;
  ts_space_options space;
  ts_measure_config measure;   /* timeout 0: adapted per round (10 s at
                                  first, then 20 x the best latency +
                                  1 s, at most 10 s) */
  int build_threads;           /* parallel builds (0: the target's cores or
                                  the online cores) */
  int build_timeout_ms;        /* time limit of one candidate's build (60 s);
                                  builds run in forked processes so a hung
                                  or crashing compile fails alone (0: in
                                  this process, no limit) */
  volatile sig_atomic_t *stop; /* set (by a signal handler) to stop after
                                  the batch in flight; may be NULL */
  ts_tune_output output;
} ts_tune_options;
ts_tune_options ts_tune_defaults(void);

/* The outcome of a job, per task. */
typedef struct ts_tune_task_result {
  int64_t workload_id;
  double best_seconds;     /* INFINITY when nothing measured ok */
  double baseline_seconds; /* the unscheduled function, measured once
                              (NAN when it was not measured) */
  int64_t trials;          /* measured in this job, all runs */
  int64_t trials_now;      /* measured by this invocation */
  int64_t by_status[TS_DB_N_STATUS];
  int64_t pruned; /* candidates not measured by this invocation: more than
                     16 times the float arithmetic of the fastest measured
                     (docs/tuning.md, "Candidates not measured") */
  int64_t trial_of_best; /* job trial index of the best (-1 none) */
  char *best_trace_json; /* malloc'd; NULL when none */
} ts_tune_task_result;

typedef struct ts_tune_result {
  int64_t job_id;
  char job_name[128];
  ts_db_job_state state; /* finished or interrupted */
  bool resumed;
  int n_tasks;
  ts_tune_task_result *tasks; /* n_tasks entries */
  int64_t trials_done;        /* the job's total, every run */
  int64_t trials_now;         /* measured by this invocation */
  double seconds;             /* wall time of this invocation */
  double build_seconds, measure_seconds, search_seconds;
} ts_tune_result;
void ts_tune_result_clear(ts_tune_result *r);
/* Takes task i's best as the database now ranks it on `target` (after a
 * confirmation: the confirmed best) into r: its trace, latency and, when
 * this job measured it, its trial. TS_ENOTFOUND (r unchanged) when the
 * task has no ok record there. */
int ts_tune_result_refresh_best(ts_db *db, const char *target,
                                ts_tune_result *r, int i);

/* Runs (or resumes) a tuning job over tasks[0, n) on `runner`, committing
 * every measured candidate to db under the job. A job of the same name
 * resumes: the budget becomes opts->trials, the trials already committed
 * count, the cost model is trained on the stored records of each task, the
 * population starts from the best of them and nothing measured before is
 * measured again. When *opts->stop becomes non-zero, the batch in flight is
 * measured and committed, the job is marked interrupted and TS_OK is
 * returned with result->state == TS_DB_JOB_INTERRUPTED. Errors: a bad
 * option, a task whose design space cannot be built, a database error (the
 * job is then marked failed). result is filled on TS_OK (clear it with
 * ts_tune_result_clear); on failure only result->job_name is set, once the
 * job was named (empty before). */
int ts_tune(ts_db *db, ts_runner *runner, const ts_tune_task *tasks, int n,
            const ts_tune_options *opts, ts_tune_result *result, ts_error *err);

/* ========================================================================
 * Confirmation (tuner/confirm.c)
 * ======================================================================== */

/* Another implementation of the workload timed in the same rounds as the
 * candidates (a vendor library: the CLI opens them from bench/), so that
 * tessera's confirmed best and the vendor's figure come from the same
 * seconds of a machine whose speed drifts. */
typedef struct ts_confirm_peer {
  const char *name; /* stored as the baseline's vendor ("onednn") */
  int threads;      /* the threads it was given (>= 1) */
  /* Times the call for at least min_repeat_ms (warm) and gives the seconds
   * per call; non-zero (err set) when it fails, and the peer is left out of
   * the later rounds. */
  int (*time)(void *ctx, int min_repeat_ms, double *seconds, ts_error *err);
  /* A cold confirmation's timing: runs the call once, evicts its constant
   * arguments (and its own copies of them, such as weights it reordered)
   * from the caches, and times one call; NULL: the peer cannot, and a cold
   * confirmation leaves it out. */
  int (*time_cold)(void *ctx, double *seconds, ts_error *err);
  void *ctx;
} ts_confirm_peer;

#define TS_CONFIRM_MAX_PEERS 4

/* How a confirmation measures. */
typedef struct ts_confirm_options {
  int top_k;         /* distinct traces by search-time median (6), plus the
                        previous confirmed best */
  int rounds;        /* interleaved rounds (7); the median is kept */
  int min_repeat_ms; /* minimum length of one timing (20) */
  int threads;       /* 0: the target's cores */
  uint64_t seed;     /* argument data (1) */
  const ts_confirm_peer *peers; /* timed in every round (may be NULL) */
  int n_peers;                  /* 0..TS_CONFIRM_MAX_PEERS */
  /* Idle milliseconds after each peer's turn (30): a library's OpenMP
   * workers spin-wait for some milliseconds after each call, and a
   * candidate timed while they spin runs on a shared core. */
  int settle_ms;
  /* Each timing is one call as a compiled model's layer runs: the call
   * runs once untimed, the parameters in cold_params (bit i: parameter i;
   * a model's weights) are evicted from the caches (ts_rt_evict), and one
   * call is timed on the awake pool (min_repeat_ms unused). The input the
   * layer before just wrote stays cached; the weights, evicted by the
   * layers since the last run, come from memory. It is an imitation: in
   * the model the caches are also full of the layers before, which a
   * layer streaming megabytes of weights feels (a ResNet-50 conv ran 1.54
   * ms so and 2.4 ms in the model); the in-model confirmation of `tune
   * --model --confirm-in-model` times the model itself. */
  bool cold;
  uint64_t cold_params;
  /* The workload's constant parameters (ts_tune_task.const_params): the
   * candidates are built as the search measured them (ts_build_measured),
   * their prologues run once before the rounds. */
  uint64_t const_params;
} ts_confirm_options;
ts_confirm_options ts_confirm_defaults(void);

/* A peer's figures from the rounds. */
typedef struct ts_confirm_peer_result {
  bool ok;        /* timed in every round */
  double seconds; /* median of the rounds */
  double ratio;   /* median over the rounds of peer / confirmed best's
                     seconds in that round (> 1: tessera faster) */
  char why[160];  /* why not ok */
} ts_confirm_peer_result;

typedef struct ts_confirm_result {
  int n;                          /* candidates measured again */
  int rounds;                     /* interleaved rounds */
  int64_t best_record;            /* the confirmed best */
  double best_s, best_spread;     /* its ranked figure (ts_confirm_rank) */
  double best_median_s;           /* its median time over the rounds */
  int64_t search_best_record;     /* the best by search-time median */
  double search_best_s;           /* ... its search-time median */
  double search_best_confirmed_s; /* ... and its confirmed latency */
  ts_confirm_peer_result peers[TS_CONFIRM_MAX_PEERS]; /* as opts->peers */
} ts_confirm_result;

/* Measures the top candidates of the workload on the target again, side by
 * side in this process (interleaved rounds, so a machine whose speed drifts
 * slows all of them alike), ranks them by ts_confirm_rank, and stores each
 * one's figure and spread as the workload x target's confirmation
 * (ts_db_confirm), which the database's best queries rank first. The target
 * must be this machine's CPU kind (TS_EUNSUPPORTED otherwise); TS_ENOTFOUND
 * without an ok record. A candidate that no longer builds or runs is left out.
 * Each peer that ran in every round is stored as a baseline of the workload x
 * target with its side-by-side ratio (ts_db_baseline_put_side; FLOPs 0: not
 * stored). */
int ts_confirm(ts_db *db, int64_t workload_id, const char *target,
               const ts_confirm_options *opts, ts_confirm_result *result,
               ts_error *err);

/* A confirmation's ranking, from secs[i * rounds + r], candidate i's time
 * in round r (all > 0). Within a round every candidate runs within a second
 * or two, so a host whose speed changes over minutes moves them together:
 * each time is divided by its round's median candidate, and a candidate's
 * figure is the median over the rounds of those ratios, times the median
 * of the rounds' references, in seconds (latency[i]); spread[i] is the
 * range of its ratios over their median. A candidate faster than another
 * in most rounds ranks ahead of it even when its absolute median is not
 * (its fast rounds fell in a slow minute). TS_OK, or TS_EINVAL / TS_ENOMEM. */
int ts_confirm_rank(const double *secs, int n, int rounds, double *latency,
                    double *spread);

/* ========================================================================
 * Default schedules (tuner/default.c)
 * ======================================================================== */

/* A generic schedule for a task nobody tuned: parallel outer loops,
 * vectorized inner loop, register blocking for reductions such as conv and
 * matmul where the design space allows it. Deterministic. *out is a new
 * schedule state (ts_sched_destroy) whose function ts_build accepts.
 * On CPU: spatial intermediates inlined; the anchor reduction register-
 * tiled (the innermost spatial loop split by whole vector lengths and
 * vectorized, a rows axis that shares no input with it split by what the
 * vector registers hold and unrolled, the reductions between, the init
 * decomposed, the streamed input packed per vector tile, the elementwise
 * consumer computed at the tile, the outer loops fused and parallel);
 * every other block vectorized and parallel over its leading spatial
 * loops when it does enough work. When that does not lower, the plainer
 * schedule without register tiling, and at last the unscheduled function.
 * On CUDA: the first design-space sample (fixed seeds) that postprocesses.
 * Errors only for a function the schedule refuses (TS_EINVAL) or NULL
 * arguments. */
/* Whether the default schedule of f for t is the attention one (the
 * graph compiler's attention group, scheduled a row tile at a time:
 * default_attention.c); the graph compiler keeps a group only then. */
bool ts_default_attention_applies(const ts_func *f, const ts_target *t);
int ts_default_schedule(const ts_func *f, const ts_target *t, ts_sched **out,
                        ts_error *err);

/* Bytes above which the default schedule treats an input read across the
 * outer loops as streamed (packs it once per panel, panels outermost);
 * the graph compiler blocks conv weights above it at compile time. */
#define TS_DEFAULT_STREAMED_BYTES (256 << 10)

/* The default schedule's register tile for an output of `er` rows and `ev`
 * contiguous columns, `ev` a multiple of the target's `lanes`, on a target
 * with `regs` vector registers: returns the columns (a multiple of lanes
 * dividing ev) and sets *rows (may be NULL) to the rows. When ev is not a
 * multiple of lanes: ev and 1 row. The graph compiler blocks constant
 * weights by the columns it returns. */
int64_t ts_default_vector_tile(int64_t er, int64_t ev, int lanes, int regs,
                               int64_t *rows);
/* The same for a conv's output of h rows of w columns and ev channels,
 * whose innermost reduction (the input channels) has `red` iterations:
 * where the columns alone leave the tile short (7 columns: 7 x 1 vector),
 * the tile runs over the pixels (6 pixels x 2 vectors); *rows (may be
 * NULL) gets the rows or pixels of the tile. */
int64_t ts_default_conv_tile(int64_t h, int64_t w, int64_t ev, int64_t red,
                             int lanes, int regs, int64_t *rows);

#endif /* TESSERA_TUNER_H */
