/*
 * search_evolutionary.c — the evolutionary search strategy. Per batch:
 *  1. an initial population: the best measured designs of the task (a
 *     share of the population: half the fastest overall, half the fastest
 *     of each design space in turn, so every space's best neighbourhood
 *     is bred) plus fresh samples of the design spaces;
 *  2. genetic iterations: the cost model scores the population, the
 *     best-scored unmeasured candidates are kept (deduplicated by the
 *     structural hash against everything measured), and the next
 *     generation is drawn from parents chosen with probability growing
 *     with their score, each child a mutation (probability mutate_prob,
 *     mutator drawn by the mutator probabilities) or a copy;
 *  3. the batch: mostly the top predicted candidates; once a round has
 *     not improved the task's fastest, a share (local_share) of random
 *     single mutations of the fastest measured designs, measured whatever
 *     the model predicts (its errors of a few per cent otherwise decide
 *     which of the incumbent's close neighbours are ever measured); a
 *     share (space_share) given to the best predicted of the design
 *     spaces ranked by an upper confidence bound (how close the space's
 *     fastest is to the overall fastest, plus a bonus that shrinks with
 *     the trials it has had), so one space cannot take every trial after
 *     an early lead; and a share epsilon of fresh random samples.
 *
 * Sampling, mutation, replay, postprocessing and feature extraction run on
 * the task's threads; the model predicts on the calling thread. Random
 * choices come from the task's generator, split per child before the
 * threads start, so a seed gives the same search on any thread count.
 */
#include "tuner/internal.h"

#include <math.h>
#include <string.h>

/* ---- the kept best: a bounded list ordered by score ---- */

typedef struct best_list {
  cand **v;
  int n, cap;
  hashset in;
} best_list;

static void best_push(best_list *b, cand *c) {
  if (!isfinite(c->score) || !hashset_add(&b->in, c->c.hash)) return;
  if (b->n < b->cap) {
    b->v[b->n++] = cand_ref(c);
  } else {
    int worst = 0;
    for (int i = 1; i < b->n; i++)
      if (b->v[i]->score < b->v[worst]->score) worst = i;
    if (b->v[worst]->score >= c->score) return;
    cand_unref(b->v[worst]);
    b->v[worst] = cand_ref(c);
  }
}

static int by_score_desc(const void *a, const void *b) {
  const cand *x = *(cand *const *)a, *y = *(cand *const *)b;
  return x->score < y->score ? 1 : x->score > y->score ? -1 : 0;
}

/* ---- replay of measured designs ---- */

typedef struct replay_job {
  search_task *st;
  cand **out;
  uint64_t *seeds;
  const int *idx; /* the measured design of output i */
} replay_job;

static void replay_one(void *ctx, int i, int worker) {
  (void)worker;
  replay_job *j = ctx;
  cand *c = cand_new();
  if (!c) return;
  if (ts_candidate_make(j->st->measured[j->idx[i]].design, j->st->func,
                        j->st->target, j->seeds[i], &c->c, NULL)) {
    cand_unref(c);
    return;
  }
  c->c.space = j->st->measured[j->idx[i]].space;
  j->out[i] = c;
}

/* The measured designs seeding the population: half of n the fastest
 * overall, the rest the fastest of each design space in turn (then the
 * second fastest of each, ...), then the fastest left. Writes indices into
 * st->measured; returns how many. */
static int pick_seeds(const search_task *st, int n, int *idx) {
  if (n > st->n_measured) n = st->n_measured;
  bool *taken = calloc((size_t)st->n_measured + 1, sizeof *taken);
  if (!taken) return 0;
  int got = 0;
  for (; got < (n + 1) / 2; got++) {
    idx[got] = got;
    taken[got] = true;
  }
  for (int rank = 0; got < n && st->n_spaces > 1; rank++) {
    bool any = false;
    for (int sp = 0; sp < st->n_spaces && got < n; sp++) {
      int seen = 0;
      for (int i = 0; i < st->n_measured; i++) {
        if (st->measured[i].space != sp) continue;
        if (seen++ < rank) continue;
        any = true;
        if (!taken[i]) {
          taken[i] = true;
          idx[got++] = i;
        }
        break;
      }
    }
    if (!any) break;
  }
  for (int i = 0; i < st->n_measured && got < n; i++)
    if (!taken[i]) {
      taken[i] = true;
      idx[got++] = i;
    }
  free(taken);
  return got;
}

/* ---- children ---- */

typedef struct child_job {
  search_task *st;
  cand **parents; /* parent of child i */
  ts_rng *rngs;   /* generator of child i */
  bool *mutate;   /* whether child i is a mutation */
  cand **out;     /* NULL: copy the parent */
} child_job;

static int pick_mutator(const double *probs, const bool *usable, ts_rng *r) {
  double total = 0;
  for (int k = 0; k < TS_N_MUTATORS; k++)
    if (usable[k]) total += probs[k];
  if (!(total > 0)) return -1;
  double u = ts_rng_unit(r) * total, acc = 0;
  int last = -1;
  for (int k = 0; k < TS_N_MUTATORS; k++) {
    if (!usable[k] || probs[k] <= 0) continue;
    acc += probs[k];
    last = k;
    if (u < acc) return k;
  }
  return last;
}

static void child_one(void *ctx, int i, int worker) {
  (void)worker;
  child_job *j = ctx;
  if (!j->mutate[i]) return;
  search_task *st = j->st;
  const cand *p = j->parents[i];
  ts_rng *r = &j->rngs[i];
  bool usable[TS_N_MUTATORS];
  for (int k = 0; k < TS_N_MUTATORS; k++) usable[k] = true;
  for (int attempt = 0; attempt < st->opts.max_fail; attempt++) {
    int k = pick_mutator(st->mutator_probs, usable, r);
    if (k < 0) return;
    ts_trace *t = NULL;
    int rc = ts_mutate(p->c.design, (ts_mutator_kind)k, r, &t, NULL);
    if (rc == TS_ENOTFOUND) {
      usable[k] = false;
      continue;
    }
    if (rc) continue;
    cand *c = cand_new();
    if (!c) {
      ts_trace_free(t);
      return;
    }
    rc =
        ts_candidate_make(t, st->func, st->target, ts_rng_next(r), &c->c, NULL);
    ts_trace_free(t);
    if (rc) {
      cand_unref(c);
      continue;
    }
    c->c.space = p->c.space;
    j->out[i] = c;
    return;
  }
}

/* Parent i drawn with probability growing with its score. */
static int draw_parent(const double *w, int n, double total, ts_rng *r) {
  if (!(total > 0)) return (int)ts_rng_below(r, (uint64_t)n);
  double u = ts_rng_unit(r) * total, acc = 0;
  for (int i = 0; i < n; i++) {
    acc += w[i];
    if (u < acc) return i;
  }
  return n - 1;
}

/* Moves the next unseen candidates of the sorted list b (from *used on)
 * into out until *got reaches `until`, marking them seen. */
static void take_best(search_task *st, const best_list *b, int *used, int until,
                      cand **out, int *got) {
  for (; *used < b->n && *got < until; (*used)++) {
    cand *c = b->v[*used];
    if (search_task_seen(st, c->c.hash)) continue;
    search_task_mark(st, c->c.hash);
    out[(*got)++] = cand_ref(c);
  }
}

/* Weight of the exploration bonus in the design spaces' upper confidence
 * bound (the exploitation term is at most 1). */
#define SPACE_UCB_C 0.5

static bool space_has_pick(const search_task *st, const best_list *b,
                           int *next) {
  while (*next < b->n && search_task_seen(st, b->v[*next]->c.hash)) (*next)++;
  return *next < b->n;
}

/* Up to `want` candidates from the per-space lists `sb` (sorted by score),
 * each slot to the design space with the highest upper confidence bound:
 * its fastest relative to the fastest overall, plus SPACE_UCB_C *
 * sqrt(ln(trials) / (its trials + 1)). The space holding the fastest design
 * is left out: the top predicted candidates already exploit it. */
static int space_picks(search_task *st, best_list *sb, int want, cand **out) {
  int n = st->n_spaces, got = 0, total = 0, leader = -1;
  double fastest = INFINITY;
  for (int sp = 0; sp < n; sp++) {
    total += st->space_trials[sp];
    if (st->space_best[sp] < fastest) {
      fastest = st->space_best[sp];
      leader = sp;
    }
  }
  int *next = calloc((size_t)n, sizeof *next);
  int *extra = calloc((size_t)n, sizeof *extra);
  while (next && extra && got < want) {
    int pick = -1;
    double top = -INFINITY;
    for (int sp = 0; sp < n; sp++) {
      if (sp == leader || !space_has_pick(st, &sb[sp], &next[sp])) continue;
      double r =
          isfinite(st->space_best[sp]) ? fastest / st->space_best[sp] : 0;
      double u = r + SPACE_UCB_C * sqrt(log(total + 1.0) /
                                        (st->space_trials[sp] + extra[sp] + 1));
      if (u > top) {
        top = u;
        pick = sp;
      }
    }
    if (pick < 0) break;
    cand *c = sb[pick].v[next[pick]++];
    search_task_mark(st, c->c.hash);
    out[got++] = cand_ref(c);
    extra[pick]++;
  }
  free(next);
  free(extra);
  return got;
}

/* A pick that finds the task's fastest less than this much faster than at
 * the pick before counts as stalled. */
#define STALL_GAIN 0.01
/* Incumbents whose neighbours the local share measures: the fastest
 * measured designs, the first of them taking every other draw. */
#define LOCAL_PARENTS 3

/* Counts the picks in a row since the task's fastest last improved. */
static void note_progress(search_task *st) {
  double cur = st->n_measured ? st->measured[0].seconds : INFINITY;
  if (st->n_measured && !(cur < st->last_best * (1 - STALL_GAIN)))
    st->stalled++;
  else
    st->stalled = 0;
  if (cur < st->last_best) st->last_best = cur;
}

/* Up to `want` unmeasured single mutations of the incumbents par[0..n_par)
 * (replayed fastest measured designs), in the order drawn, whatever the
 * model predicts for them; marks them seen. */
static int local_picks(search_task *st, cand **par, int n_par, int want,
                       cand **out) {
  if (want <= 0 || n_par <= 0) return 0;
  int nc = want * 4, got = 0;
  child_job cj = {st, calloc((size_t)nc, sizeof(cand *)),
                  calloc((size_t)nc, sizeof(ts_rng)),
                  calloc((size_t)nc, sizeof(bool)),
                  calloc((size_t)nc, sizeof(cand *))};
  if (cj.parents && cj.rngs && cj.mutate && cj.out) {
    for (int i = 0; i < nc; i++) {
      cj.parents[i] = par[i % 2 ? (i / 2) % n_par : 0];
      cj.mutate[i] = true;
      cj.rngs[i] = ts_rng_split(&st->rng);
    }
    tuner_parallel(st->threads, nc, child_one, &cj);
    for (int i = 0; i < nc; i++) {
      cand *c = cj.out[i];
      if (!c || got == want || search_task_seen(st, c->c.hash)) continue;
      search_task_mark(st, c->c.hash);
      out[got++] = cand_ref(c);
    }
    for (int i = 0; i < nc; i++)
      if (cj.out[i]) cand_unref(cj.out[i]);
  }
  free(cj.parents);
  free(cj.rngs);
  free(cj.mutate);
  free(cj.out);
  return got;
}

static int evolve_pick(search_task *st, int want, cand **out, ts_error *err) {
  const ts_search_options *o = &st->opts;
  int P = o->population > 0 ? o->population : 1;
  note_progress(st);
  int n_rand = (int)floor(want * o->epsilon + 0.5);
  if (n_rand > want) n_rand = want;
  int n_space = st->n_spaces > 1 && st->space_trials
                    ? (int)floor(want * o->space_share + 0.5)
                    : 0;
  if (n_space > want - n_rand) n_space = want - n_rand;
  int n_local = st->stalled > 0 ? (int)floor(want * o->local_share + 0.5) : 0;
  if (n_local > want - n_rand - n_space) n_local = want - n_rand - n_space;
  int n_top = want - n_rand - n_space - n_local;

  /* 1. the initial population */
  int n_meas = (int)(P * o->init_measured_ratio);
  if (n_meas > st->n_measured) n_meas = st->n_measured;
  int n_fresh = P - n_meas;
  if (n_fresh < o->init_min_unmeasured) n_fresh = o->init_min_unmeasured;
  cand **pop = calloc((size_t)(n_meas + n_fresh + 1), sizeof *pop);
  cand **fresh = calloc((size_t)(n_fresh + 1), sizeof *fresh);
  int np = 0, n_inc = 0;
  cand *inc[LOCAL_PARENTS]; /* the incumbents, fastest first */
  if (n_meas > 0) {
    cand **v = calloc((size_t)n_meas, sizeof *v);
    uint64_t *seeds = calloc((size_t)n_meas, sizeof *seeds);
    int *idx = calloc((size_t)n_meas, sizeof *idx);
    int ns = v && seeds && idx ? pick_seeds(st, n_meas, idx) : 0;
    for (int i = 0; i < ns; i++) seeds[i] = ts_rng_next(&st->rng);
    replay_job rj = {st, v, seeds, idx};
    tuner_parallel(st->threads, ns, replay_one, &rj);
    for (int i = 0; i < ns; i++)
      if (v[i]) pop[np++] = v[i];
    for (; n_inc < np && n_inc < LOCAL_PARENTS; n_inc++)
      inc[n_inc] = cand_ref(pop[n_inc]);
    free(v);
    free(seeds);
    free(idx);
  }
  int nf = sample_fresh(st, n_fresh, n_fresh * 2, fresh);
  for (int i = 0; i < nf; i++) pop[np++] = cand_ref(fresh[i]);

  best_list best = {calloc((size_t)(want + 1), sizeof(cand *)), 0, want, {0}};
  /* the best predicted of each design space, for the space share */
  int nsb = n_space > 0 ? st->n_spaces : 0;
  best_list *sb = calloc((size_t)nsb + 1, sizeof *sb);
  for (int k = 0; sb && k < nsb; k++) {
    sb[k].v = calloc((size_t)n_space + 1, sizeof(cand *));
    sb[k].cap = sb[k].v ? n_space : 0;
  }
  int rc = TS_OK;
  double *w = calloc((size_t)(np + 1), sizeof *w);
  int popcap = np;
  for (int it = 0; np > 0; it++) {
    /* 2. score, keep the best unmeasured, breed */
    if ((rc = cands_score(st, pop, np, err))) break;
    for (int i = 0; i < np; i++) {
      if (search_task_seen(st, pop[i]->c.hash)) continue;
      best_push(&best, pop[i]);
      int sp = pop[i]->c.space;
      if (sb && sp >= 0 && sp < nsb && sb[sp].cap > 0)
        best_push(&sb[sp], pop[i]);
    }
    if (it >= o->genetic_iters) break;
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < np; i++)
      if (isfinite(pop[i]->score)) {
        if (pop[i]->score < lo) lo = pop[i]->score;
        if (pop[i]->score > hi) hi = pop[i]->score;
      }
    double total = 0;
    for (int i = 0; i < np; i++) {
      double s = pop[i]->score;
      w[i] = !isfinite(s) ? 0 : hi > lo ? (s - lo) / (hi - lo) + 1e-3 : 1;
      total += w[i];
    }
    int nc = popcap;
    child_job cj;
    cj.st = st;
    cj.parents = calloc((size_t)nc, sizeof(cand *));
    cj.rngs = calloc((size_t)nc, sizeof(ts_rng));
    cj.mutate = calloc((size_t)nc, sizeof(bool));
    cj.out = calloc((size_t)nc, sizeof(cand *));
    for (int i = 0; i < nc; i++) {
      cj.parents[i] = pop[draw_parent(w, np, total, &st->rng)];
      cj.mutate[i] = ts_rng_unit(&st->rng) < o->mutate_prob;
      cj.rngs[i] = ts_rng_split(&st->rng);
    }
    tuner_parallel(st->threads, nc, child_one, &cj);
    cand **next = calloc((size_t)nc, sizeof *next);
    for (int i = 0; i < nc; i++)
      next[i] = cj.out[i] ? cj.out[i] : cand_ref(cj.parents[i]);
    for (int i = 0; i < np; i++) cand_unref(pop[i]);
    free(pop);
    pop = next;
    np = nc;
    free(cj.parents);
    free(cj.rngs);
    free(cj.mutate);
    free(cj.out);
  }

  /* 3. the batch: the incumbents' neighbours, the top predicted, the
   * design spaces' share (what the shares leave unused goes to the top
   * predicted), random fresh samples */
  int got = 0;
  if (!rc) {
    got = local_picks(st, inc, n_inc, n_local, out);
    n_top += got;
    qsort(best.v, (size_t)best.n, sizeof *best.v, by_score_desc);
    int used_best = 0;
    take_best(st, &best, &used_best, n_top, out, &got);
    /* the design spaces' share */
    if (sb && nsb > 0) {
      for (int k = 0; k < nsb; k++)
        qsort(sb[k].v, (size_t)sb[k].n, sizeof *sb[k].v, by_score_desc);
      got += space_picks(st, sb, n_space, out + got);
    }
    take_best(st, &best, &used_best, want - n_rand, out, &got);
    /* random ones from the fresh samples, in a random order */
    for (int i = nf - 1; i > 0; i--) {
      int k = (int)ts_rng_below(&st->rng, (uint64_t)i + 1);
      cand *x = fresh[i];
      fresh[i] = fresh[k];
      fresh[k] = x;
    }
    for (int i = 0; i < nf && got < want; i++) {
      if (search_task_seen(st, fresh[i]->c.hash)) continue;
      search_task_mark(st, fresh[i]->c.hash);
      out[got++] = cand_ref(fresh[i]);
    }
    take_best(st, &best, &used_best, want, out, &got);
  }
  for (int i = 0; i < np; i++) cand_unref(pop[i]);
  for (int i = 0; i < n_inc; i++) cand_unref(inc[i]);
  for (int i = 0; i < nf; i++) cand_unref(fresh[i]);
  for (int i = 0; i < best.n; i++) cand_unref(best.v[i]);
  hashset_free(&best.in);
  free(best.v);
  for (int k = 0; sb && k < nsb; k++) {
    for (int i = 0; i < sb[k].n; i++) cand_unref(sb[k].v[i]);
    hashset_free(&sb[k].in);
    free(sb[k].v);
  }
  free(sb);
  free(pop);
  free(fresh);
  free(w);
  return rc ? rc : got;
}

const strategy_ops strategy_evolutionary = {"evolutionary", evolve_pick};
