/*
 * metrics.c — training targets and ranking metrics. Targets are normalized
 * throughputs within a group (best seconds / seconds, failures 0). The
 * metrics say how well scores order candidates of one group: pairwise
 * accuracy over pairs with different targets, top-1/top-8 recall of the
 * true best over batches the size of a search round's choice, and the
 * Spearman rank correlation per group.
 */
#include "cost_model/internal.h"
#include "tir/alloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_keyed(const void *x, const void *y) {
  const cm_keyed *a = x, *b = y;
  if (a->group != b->group) return a->group < b->group ? -1 : 1;
  return a->index < b->index ? -1 : a->index > b->index;
}

cm_keyed *cm_by_group(const int64_t *group, int64_t n) {
  cm_keyed *k = ts_malloc(sizeof *k * (size_t)(n ? n : 1));
  if (!k) return NULL;
  for (int64_t i = 0; i < n; i++) k[i] = (cm_keyed){group[i], i};
  qsort(k, (size_t)n, sizeof *k, cmp_keyed);
  return k;
}

void ts_cm_targets(const int64_t *group, const ts_cm_result *results, int n,
                   double *targets) {
  cm_keyed *k = cm_by_group(group, n);
  if (!k) { /* quadratic, allocation-free fallback */
    for (int i = 0; i < n; i++) {
      double best = INFINITY;
      for (int j = 0; j < n; j++)
        if (group[j] == group[i] && results[j].ok && results[j].seconds < best)
          best = results[j].seconds;
      targets[i] = results[i].ok ? best / results[i].seconds : 0;
    }
    return;
  }
  for (int s = 0; s < n;) {
    int e = s;
    double best = INFINITY;
    while (e < n && k[e].group == k[s].group) {
      const ts_cm_result *r = &results[k[e].index];
      if (r->ok && r->seconds < best) best = r->seconds;
      e++;
    }
    for (int i = s; i < e; i++) {
      const ts_cm_result *r = &results[k[i].index];
      targets[k[i].index] = r->ok ? best / r->seconds : 0;
    }
    s = e;
  }
  free(k);
}

/* Average ranks (1-based; ties share their mean rank) of v[idx[0..n)]. */
typedef struct ranked {
  double v;
  int pos;
} ranked;

static int cmp_ranked(const void *x, const void *y) {
  const ranked *a = x, *b = y;
  if (a->v != b->v) return a->v < b->v ? -1 : 1;
  return a->pos - b->pos;
}

static bool ranks(const double *v, const cm_keyed *idx, int n, double *out) {
  ranked *r = malloc(sizeof *r * (size_t)n);
  if (!r) return false;
  for (int i = 0; i < n; i++) r[i] = (ranked){v[idx[i].index], i};
  qsort(r, (size_t)n, sizeof *r, cmp_ranked);
  for (int i = 0; i < n;) {
    int j = i;
    while (j < n && r[j].v == r[i].v) j++;
    double mean = (i + 1 + j) / 2.0;
    for (int k = i; k < j; k++) out[r[k].pos] = mean;
    i = j;
  }
  free(r);
  return true;
}

/* Spearman's rho of scores and targets over one group; NAN when undefined
 * (fewer than 2 members or a constant side). */
static double spearman(const double *scores, const double *targets,
                       const cm_keyed *idx, int n) {
  if (n < 2) return NAN;
  double *rs = malloc(sizeof *rs * (size_t)n);
  double *rt = malloc(sizeof *rt * (size_t)n);
  double rho = NAN;
  if (rs && rt && ranks(scores, idx, n, rs) && ranks(targets, idx, n, rt)) {
    double ms = 0, mt = 0;
    for (int i = 0; i < n; i++) {
      ms += rs[i];
      mt += rt[i];
    }
    ms /= n;
    mt /= n;
    double sst = 0, sss = 0, sst2 = 0;
    for (int i = 0; i < n; i++) {
      sst += (rs[i] - ms) * (rt[i] - mt);
      sss += (rs[i] - ms) * (rs[i] - ms);
      sst2 += (rt[i] - mt) * (rt[i] - mt);
    }
    if (sss > 0 && sst2 > 0) rho = sst / sqrt(sss * sst2);
  }
  free(rs);
  free(rt);
  return rho;
}

void ts_cm_metrics_add(ts_cm_metrics_acc *acc, const double *scores,
                       const double *targets, const int64_t *group, int n,
                       int batch) {
  if (batch <= 0) batch = 64;
  cm_keyed *k = cm_by_group(group, n);
  if (!k) return;
  acc->records += n;
  for (int s = 0; s < n;) {
    int e = s;
    while (e < n && k[e].group == k[s].group) e++;
    /* pairs */
    for (int i = s; i < e; i++)
      for (int j = i + 1; j < e; j++) {
        int a = (int)k[i].index, b = (int)k[j].index;
        double dt = targets[a] - targets[b];
        if (dt == 0) continue;
        double ds = scores[a] - scores[b];
        acc->pairs++;
        acc->correct_pairs += ds == 0 ? 0.5 : (ds > 0) == (dt > 0);
      }
    /* Spearman */
    double rho = spearman(scores, targets, k + s, e - s);
    if (!isnan(rho)) {
      acc->spearman_weighted += rho * (e - s);
      acc->spearman_weight += e - s;
    }
    /* recall over batches in the given order: ceil(size / batch) batches
     * of near-equal sizes */
    int n_batches = (e - s + batch - 1) / batch;
    for (int q = 0; q < n_batches; q++) {
      int b = s + (int)((int64_t)(e - s) * q / n_batches);
      int end = s + (int)((int64_t)(e - s) * (q + 1) / n_batches);
      if (end - b < 2) continue;
      double best = 0;
      for (int i = b; i < end; i++)
        if (targets[k[i].index] > best) best = targets[k[i].index];
      if (best <= 0) continue; /* nothing ran: no true best */
      /* the best-placed true best: how many others score at least as high */
      int place = end - b;
      for (int i = b; i < end; i++) {
        if (targets[k[i].index] != best) continue;
        int ahead = 0;
        for (int j = b; j < end; j++)
          if (j != i && scores[k[j].index] >= scores[k[i].index]) ahead++;
        if (ahead < place) place = ahead;
      }
      acc->batches++;
      acc->top1_hits += place < 1;
      acc->top8_hits += place < 8;
    }
    s = e;
  }
  free(k);
}

ts_cm_metrics ts_cm_metrics_of(const ts_cm_metrics_acc *acc) {
  ts_cm_metrics m = {0};
  m.records = acc->records;
  m.pairs = acc->pairs;
  m.batches = acc->batches;
  if (acc->pairs) m.pairwise_accuracy = acc->correct_pairs / (double)acc->pairs;
  if (acc->batches) {
    m.top1_recall = acc->top1_hits / (double)acc->batches;
    m.top8_recall = acc->top8_hits / (double)acc->batches;
  }
  if (acc->spearman_weight)
    m.spearman = acc->spearman_weighted / (double)acc->spearman_weight;
  return m;
}
