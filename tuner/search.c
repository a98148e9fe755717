/*
 * search.c — what the search strategies share: the per-task search state
 * (design spaces, the cost model, the set of structural hashes already
 * measured, the measured designs ranked by latency), a small parallel map
 * over threads, hash sets, refcounted scored candidates, and the random
 * strategy. The evolutionary strategy is in search_evolutionary.c.
 */
#include "tuner/internal.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

static const char *const strategy_names[] = {"evolutionary", "random"};

const char *ts_strategy_name(ts_strategy_kind k) {
  return (unsigned)k < 2 ? strategy_names[k] : NULL;
}

int ts_strategy_parse(const char *name, ts_strategy_kind *out) {
  for (int i = 0; i < 2; i++)
    if (name && !strcmp(name, strategy_names[i])) {
      *out = (ts_strategy_kind)i;
      return TS_OK;
    }
  return TS_EINVAL;
}

ts_search_options ts_search_defaults(void) {
  ts_search_options o;
  memset(&o, 0, sizeof o);
  o.population = 256;
  o.init_measured_ratio = 0.2;
  o.init_min_unmeasured = 50;
  o.genetic_iters = 3;
  o.mutate_prob = 0.85;
  o.max_fail = 10;
  o.epsilon = 0.05;
  o.batch = 32;
  o.threads = 0;
  o.early_stop_rounds = 3;
  o.space_share = 0.125;
  o.local_share = 0.125;
  return o;
}

/* ========================================================================
 * Parallel map
 * ======================================================================== */

typedef struct pmap {
  void (*fn)(void *ctx, int i, int worker);
  void *ctx;
  int n;
  atomic_int next;
} pmap;

typedef struct pmap_worker {
  pmap *m;
  int id;
} pmap_worker;

static void *pmap_run(void *arg) {
  pmap_worker *w = arg;
  for (;;) {
    int i = atomic_fetch_add(&w->m->next, 1);
    if (i >= w->m->n) break;
    w->m->fn(w->m->ctx, i, w->id);
  }
  return NULL;
}

void tuner_parallel(int threads, int n,
                    void (*fn)(void *ctx, int i, int worker), void *ctx) {
  if (n <= 0) return;
  if (threads > n) threads = n;
  if (threads > TUNER_MAX_THREADS) threads = TUNER_MAX_THREADS;
  pmap m = {fn, ctx, n, 0};
  pmap_worker w[TUNER_MAX_THREADS];
  pthread_t th[TUNER_MAX_THREADS];
  int started = 0;
  for (int t = 1; t < threads; t++) {
    w[t] = (pmap_worker){&m, t};
    if (pthread_create(&th[t], NULL, pmap_run, &w[t]) == 0)
      started = t;
    else
      break;
  }
  w[0] = (pmap_worker){&m, 0};
  pmap_run(&w[0]);
  for (int t = 1; t <= started; t++) pthread_join(th[t], NULL);
}

/* ========================================================================
 * Hash sets
 * ======================================================================== */

static uint64_t slot_of(ts_hash128 h, size_t cap) {
  return (h.lo ^ (h.hi * 0x9e3779b97f4a7c15ull)) & (cap - 1);
}

bool hashset_has(const hashset *s, ts_hash128 h) {
  if (!s->cap) return false;
  for (uint64_t i = slot_of(h, s->cap);; i = (i + 1) & (s->cap - 1)) {
    if (!s->used[i]) return false;
    if (ts_hash128_eq(s->keys[i], h)) return true;
  }
}

bool hashset_add(hashset *s, ts_hash128 h) {
  if (hashset_has(s, h)) return false;
  if ((s->n + 1) * 2 > s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 256;
    hashset bigger = {calloc(cap, sizeof(ts_hash128)), calloc(cap, 1), 0, cap};
    for (size_t i = 0; i < s->cap; i++)
      if (s->used[i]) hashset_add(&bigger, s->keys[i]);
    free(s->keys);
    free(s->used);
    *s = bigger;
  }
  uint64_t i = slot_of(h, s->cap);
  while (s->used[i]) i = (i + 1) & (s->cap - 1);
  s->used[i] = 1;
  s->keys[i] = h;
  s->n++;
  return true;
}

void hashset_free(hashset *s) {
  free(s->keys);
  free(s->used);
  memset(s, 0, sizeof *s);
}

/* ========================================================================
 * Scored candidates
 * ======================================================================== */

cand *cand_new(void) {
  cand *c = calloc(1, sizeof *c);
  if (c) {
    c->refs = 1;
    c->c.space = -1;
    c->score = -INFINITY;
  }
  return c;
}

cand *cand_ref(cand *c) {
  c->refs++;
  return c;
}

void cand_unref(cand *c) {
  if (!c || --c->refs > 0) return;
  ts_candidate_clear(&c->c);
  ts_cm_features_clear(&c->feat);
  free(c);
}

/* Features of candidates in parallel. */
typedef struct feat_job {
  cand **v;
  const ts_target *t;
} feat_job;

static void feat_one(void *ctx, int i, int worker) {
  (void)worker;
  feat_job *j = ctx;
  cand *c = j->v[i];
  if (c->have_feat || c->feat_failed) return;
  ts_error err;
  ts_error_clear(&err);
  if (ts_cm_extract(ts_sched_func(c->c.sched), j->t, &c->feat, &err))
    c->feat_failed = true;
  else
    c->have_feat = true;
}

void cands_features(const ts_target *t, int threads, cand **v, int n) {
  feat_job j = {v, t};
  if (n > 0) tuner_parallel(threads, n, feat_one, &j);
}

double features_float_work(const ts_cm_features *f) {
  static const ts_cm_feature_id ops[] = {
      TS_CM_F_FLOAT_MAD,    TS_CM_F_FLOAT_ADDSUB, TS_CM_F_FLOAT_MUL,
      TS_CM_F_FLOAT_DIVMOD, TS_CM_F_FLOAT_CMP,    TS_CM_F_FLOAT_MATH_FUNC};
  if (!f->values) return -1;
  double w = 0;
  for (int r = 0; r < f->n_rows; r++) {
    const float *x = f->values + (size_t)r * TS_CM_N_FEATURES;
    if (x[TS_CM_F_FLOAT_OTHER_FUNC] > 0 || x[TS_CM_F_INT_OTHER_FUNC] > 0)
      return -1;
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
      w += exp2((double)x[ops[k]]) - 1; /* features are log2(x + 1) */
  }
  return w;
}

double cand_float_work(const cand *c) {
  return c->have_feat ? features_float_work(&c->feat) : -1;
}

bool cand_too_heavy(const cand *c, double best_work) {
  return best_work > 0 && cand_float_work(c) > TS_PRUNE_WORK_RATIO * best_work;
}

int cands_score(search_task *st, cand **v, int n, ts_error *err) {
  if (n <= 0) return TS_OK;
  if (!st->model) {
    for (int i = 0; i < n; i++)
      if (!v[i]->scored) {
        v[i]->score = ts_rng_unit(&st->rng);
        v[i]->scored = true;
      }
    return TS_OK;
  }
  feat_job j = {v, st->target};
  tuner_parallel(st->threads, n, feat_one, &j);
  ts_cm_candidate *cc = calloc((size_t)n, sizeof *cc);
  double *scores = calloc((size_t)n, sizeof *scores);
  int *idx = calloc((size_t)n, sizeof *idx);
  int m = 0;
  for (int i = 0; i < n; i++) {
    if (v[i]->scored) continue;
    if (!v[i]->have_feat) {
      v[i]->score = -INFINITY;
      v[i]->scored = true;
      continue;
    }
    cc[m].features = &v[i]->feat;
    cc[m].group = st->group;
    idx[m++] = i;
  }
  int rc = m ? ts_cm_predict(st->model, cc, m, scores, err) : TS_OK;
  if (!rc)
    for (int k = 0; k < m; k++) {
      v[idx[k]]->score = scores[k];
      v[idx[k]]->scored = true;
    }
  free(cc);
  free(scores);
  free(idx);
  return rc;
}

/* ========================================================================
 * The task's search state
 * ======================================================================== */

/* What identifies a design space: its instructions, decisions left out. */
static char *design_key(const ts_trace *t) {
  ts_trace *bare = trace_without_decisions(t);
  char *key = bare ? ts_trace_to_json(bare) : NULL;
  ts_trace_free(bare);
  return key;
}

int search_task_init(search_task *st, const ts_func *f, const ts_target *t,
                     ts_design_space *spaces, int n_spaces,
                     ts_cost_model *model, int64_t group,
                     const ts_search_options *o, uint64_t seed) {
  memset(st, 0, sizeof *st);
  st->func = f;
  st->target = t;
  st->spaces = spaces;
  st->n_spaces = n_spaces;
  st->model = model;
  st->group = group;
  st->opts = *o;
  ts_rng_seed(&st->rng, seed);
  st->threads = o->threads > 0 ? o->threads : ts_target_num_cores(t);
  if (st->threads < 1) st->threads = 1;
  if (st->threads > TUNER_MAX_THREADS) st->threads = TUNER_MAX_THREADS;
  ts_mutator_probs(t, st->mutator_probs);
  if (n_spaces > 0) {
    st->space_key = calloc((size_t)n_spaces, sizeof *st->space_key);
    st->space_trials = calloc((size_t)n_spaces, sizeof *st->space_trials);
    st->space_best = calloc((size_t)n_spaces, sizeof *st->space_best);
    if (!st->space_key || !st->space_trials || !st->space_best) {
      search_task_free(st);
      return TS_ENOMEM;
    }
    for (int i = 0; i < n_spaces; i++) {
      st->space_key[i] = design_key(spaces[i].trace);
      st->space_best[i] = INFINITY;
    }
  }
  st->last_best = INFINITY;
  double sum = 0;
  for (int k = 0; k < TS_N_MUTATORS; k++) sum += o->mutator_probs[k];
  if (sum > 0)
    for (int k = 0; k < TS_N_MUTATORS; k++)
      st->mutator_probs[k] = o->mutator_probs[k] / sum;
  return TS_OK;
}

void search_task_free(search_task *st) {
  for (int i = 0; i < st->n_measured; i++)
    ts_trace_free(st->measured[i].design);
  free(st->measured);
  for (int i = 0; st->space_key && i < st->n_spaces; i++)
    free(st->space_key[i]);
  free(st->space_key);
  free(st->space_trials);
  free(st->space_best);
  hashset_free(&st->seen);
  memset(st, 0, sizeof *st);
}

bool search_task_seen(const search_task *st, ts_hash128 h) {
  return hashset_has(&st->seen, h);
}

void search_task_mark(search_task *st, ts_hash128 h) {
  hashset_add(&st->seen, h);
}

int search_task_space_of(const search_task *st, const ts_trace *design) {
  if (!design || !st->space_key) return -1;
  char *key = design_key(design);
  int found = -1;
  for (int i = 0; key && i < st->n_spaces && found < 0; i++)
    if (st->space_key[i] && !strcmp(key, st->space_key[i])) found = i;
  free(key);
  return found;
}

void search_task_add_measured(search_task *st, const ts_trace *design,
                              ts_hash128 h, bool ok, double seconds) {
  hashset_add(&st->seen, h);
  int space = search_task_space_of(st, design);
  if (space >= 0) {
    st->space_trials[space]++;
    if (ok && seconds < st->space_best[space]) st->space_best[space] = seconds;
  }
  if (!ok || !design) return;
  if (st->n_measured == st->cap_measured) {
    int cap = st->cap_measured ? st->cap_measured * 2 : 64;
    measured_design *v = realloc(st->measured, sizeof *v * (size_t)cap);
    if (!v) return;
    st->measured = v;
    st->cap_measured = cap;
  }
  ts_trace *copy = ts_trace_copy(design);
  if (!copy) return;
  /* insertion in latency order, fastest first */
  int at = st->n_measured;
  while (at > 0 && st->measured[at - 1].seconds > seconds) {
    st->measured[at] = st->measured[at - 1];
    at--;
  }
  st->measured[at].design = copy;
  st->measured[at].seconds = seconds;
  st->measured[at].space = space;
  st->n_measured++;
}

/* ========================================================================
 * Fresh samples (both strategies)
 * ======================================================================== */

typedef struct sample_job {
  search_task *st;
  cand **out;
  uint64_t *seeds;
  int *space;
} sample_job;

static void sample_one(void *ctx, int i, int worker) {
  (void)worker;
  sample_job *j = ctx;
  cand *c = cand_new();
  if (!c) return;
  int sp = j->space[i];
  if (ts_candidate_sample(&j->st->spaces[sp], sp, j->st->func, j->st->target,
                          j->seeds[i], &c->c, NULL)) {
    cand_unref(c);
    return;
  }
  j->out[i] = c;
}

int sample_fresh(search_task *st, int want, int max_tries, cand **out) {
  int got = 0, tries = 0;
  while (got < want && tries < max_tries) {
    int n = want - got;
    if (n > max_tries - tries) n = max_tries - tries;
    cand **v = calloc((size_t)n, sizeof *v);
    uint64_t *seeds = calloc((size_t)n, sizeof *seeds);
    int *space = calloc((size_t)n, sizeof *space);
    for (int i = 0; i < n; i++) {
      seeds[i] = ts_rng_next(&st->rng);
      space[i] = (int)ts_rng_below(&st->rng, (uint64_t)st->n_spaces);
    }
    sample_job j = {st, v, seeds, space};
    tuner_parallel(st->threads, n, sample_one, &j);
    for (int i = 0; i < n; i++)
      if (v[i]) out[got++] = v[i];
    tries += n;
    free(v);
    free(seeds);
    free(space);
  }
  return got;
}

/* ========================================================================
 * The random strategy: fresh samples, deduplicated, no model.
 * ======================================================================== */

static int random_pick(search_task *st, int want, cand **out, ts_error *err) {
  (void)err;
  int got = 0;
  for (int round = 0; round < 8 && got < want; round++) {
    cand **v = calloc((size_t)(want - got), sizeof *v);
    int n = sample_fresh(st, want - got, (want - got) * 4, v);
    for (int i = 0; i < n; i++) {
      if (search_task_seen(st, v[i]->c.hash)) {
        cand_unref(v[i]);
        continue;
      }
      search_task_mark(st, v[i]->c.hash);
      out[got++] = v[i];
    }
    free(v);
  }
  return got;
}

const strategy_ops strategy_random = {"random", random_pick};
