/*
 * mutators.c — mutators: each changes one decision of a design trace.
 *  - tile size: in one sample_perfect_tile decision, a divisor of one
 *    factor moves to another position (the product stays the loop's
 *    extent; the innermost factor stays within its maximum); in one
 *    sample_tile decision (the inner factors; the outermost follows) the
 *    same, or a new innermost factor (a multiple of its step), or an inner
 *    factor multiplied or divided by 2 or 3;
 *  - compute location: another location for one sample_compute_location;
 *  - unroll / parallel: another candidate of the sample_categorical that
 *    feeds the root block's unroll / parallel annotation.
 * Which instruction feeds what is read from the trace's JSON form (the
 * public trace API exposes kinds and decisions only). A mutated decision is
 * checked when the trace is replayed; the search retries on failure.
 */
#include "tuner/rule_framework.h"

#include <cjson/cJSON.h>
#include <string.h>

static const char *const mutator_names[TS_N_MUTATORS] = {
    "mutate_tile_size",
    "mutate_compute_location",
    "mutate_unroll",
    "mutate_parallel",
};

const char *ts_mutator_name(ts_mutator_kind k) {
  return (unsigned)k < TS_N_MUTATORS ? mutator_names[k] : NULL;
}

void ts_mutator_probs(const ts_target *t, double probs[TS_N_MUTATORS]) {
  memcpy(probs, rule_list_of(t)->mutator_probs, sizeof(double) * TS_N_MUTATORS);
}

/* One mutable sampling instruction. */
typedef struct site {
  int index;             /* instruction index */
  ts_mutator_kind kind;  /* which mutator changes it */
  int64_t max_innermost; /* tile: the innermost bound */
  int64_t step;          /* sample_tile: the innermost step (0: perfect) */
  int n_candidates;      /* categorical: candidates */
} site;

/* The output name of instruction `in` (its first output). */
static const char *first_output(const cJSON *in) {
  const cJSON *o =
      cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(in, "outputs"), 0);
  return cJSON_IsString(o) ? o->valuestring : NULL;
}

/* The annotation key an integer handle named `name` feeds, or NULL. */
static const char *annotation_fed(const cJSON *insts, int from,
                                  const char *name) {
  int n = cJSON_GetArraySize(insts);
  for (int i = from + 1; i < n; i++) {
    const cJSON *in = cJSON_GetArrayItem(insts, i);
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(in, "kind");
    if (!cJSON_IsString(kind) || strcmp(kind->valuestring, "annotate"))
      continue;
    const cJSON *value =
        cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(in, "inputs"), 1);
    const cJSON *key =
        cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(in, "attrs"), 0);
    if (cJSON_IsString(value) && !strcmp(value->valuestring, name) &&
        cJSON_IsString(key))
      return key->valuestring;
  }
  return NULL;
}

/* The sites of mutator k in the trace. Returns the count (sites malloc'd,
 * caller frees), -1 when memory runs out. */
static int find_sites(const ts_trace *t, ts_mutator_kind k, site **out) {
  *out = NULL;
  char *text = ts_trace_to_json(t);
  cJSON *j = text ? cJSON_Parse(text) : NULL;
  free(text);
  if (!j) return -1;
  const cJSON *insts = cJSON_GetObjectItemCaseSensitive(j, "instructions");
  int n = cJSON_GetArraySize(insts), count = 0;
  site *sites = calloc((size_t)(n ? n : 1), sizeof *sites);
  if (!sites) {
    cJSON_Delete(j);
    return -1;
  }
  for (int i = 0; i < n; i++) {
    if (!ts_trace_inst_is_sampling(t, i)) continue;
    const cJSON *in = cJSON_GetArrayItem(insts, i);
    const cJSON *attrs = cJSON_GetObjectItemCaseSensitive(in, "attrs");
    ts_instr_kind ik = ts_trace_inst_kind(t, i);
    site s = {i, k, 0, 0, 0};
    if ((ik == TS_INSTR_SAMPLE_PERFECT_TILE || ik == TS_INSTR_SAMPLE_TILE) &&
        k == TS_MUTATOR_TILE_SIZE) {
      const cJSON *mi = cJSON_GetArrayItem(attrs, 1);
      s.max_innermost = cJSON_IsNumber(mi) ? (int64_t)mi->valuedouble : 0;
      if (ik == TS_INSTR_SAMPLE_TILE) {
        const cJSON *st = cJSON_GetArrayItem(attrs, 2);
        s.step = cJSON_IsNumber(st) && st->valuedouble >= 1
                     ? (int64_t)st->valuedouble
                     : 1;
      }
      sites[count++] = s;
    } else if (ik == TS_INSTR_SAMPLE_COMPUTE_LOCATION &&
               k == TS_MUTATOR_COMPUTE_LOCATION) {
      sites[count++] = s;
    } else if (ik == TS_INSTR_SAMPLE_CATEGORICAL &&
               (k == TS_MUTATOR_UNROLL || k == TS_MUTATOR_PARALLEL)) {
      const char *name = first_output(in);
      const char *key = name ? annotation_fed(insts, i, name) : NULL;
      const char *want = k == TS_MUTATOR_UNROLL ? ANN_UNROLL : ANN_PARALLEL;
      s.n_candidates = cJSON_GetArraySize(cJSON_GetArrayItem(attrs, 0));
      if (key && !strcmp(key, want) && s.n_candidates >= 2) sites[count++] = s;
    }
  }
  cJSON_Delete(j);
  *out = sites;
  return count;
}

/* A new tile decision from d (n factors): a divisor > 1 of one factor
 * moves to another position. False when none was found in a few tries. */
static bool mutate_tile(int64_t *d, int n, int64_t max_inner, ts_rng *rng) {
  if (n < 2) return false;
  for (int attempt = 0; attempt < 16; attempt++) {
    int x = (int)ts_rng_below(rng, (uint64_t)n);
    int y = (int)ts_rng_below(rng, (uint64_t)n - 1);
    if (y >= x) y++;
    if (d[x] <= 1) continue;
    /* the divisors of d[x] greater than 1 */
    int64_t divs[64];
    int nd = 0;
    for (int64_t v = 2; v <= d[x] && nd < 64; v++)
      if (d[x] % v == 0) divs[nd++] = v;
    int64_t f = divs[ts_rng_below(rng, (uint64_t)nd)];
    int64_t nx = d[x] / f, ny = d[y] * f;
    int64_t inner = y == n - 1 ? ny : x == n - 1 ? nx : d[n - 1];
    if (max_inner > 0 && inner > max_inner) continue;
    d[x] = nx;
    d[y] = ny;
    return true;
  }
  return false;
}

/* A new sample_tile decision from d (the n inner factors): a divisor
 * moved between them, a new innermost factor (a multiple of step up to
 * max_inner), or one factor multiplied or divided by 2 or 3. The padded
 * extent is checked at replay. */
static bool mutate_imperfect(int64_t *d, int n, int64_t max_inner, int64_t step,
                             ts_rng *rng) {
  for (int attempt = 0; attempt < 16; attempt++) {
    switch (ts_rng_below(rng, 3)) {
    case 0:
      if (mutate_tile(d, n, max_inner, rng)) return true;
      break;
    case 1: {
      int64_t nc = max_inner > 0 ? max_inner / step : 0;
      if (nc < 2) break;
      int64_t v = step * (1 + (int64_t)ts_rng_below(rng, (uint64_t)nc));
      if (v == d[n - 1]) break;
      d[n - 1] = v;
      return true;
    }
    default: {
      int x = (int)ts_rng_below(rng, (uint64_t)n);
      int64_t p = ts_rng_below(rng, 2) ? 2 : 3, v;
      if (ts_rng_below(rng, 2)) {
        if (d[x] % p) break;
        v = d[x] / p;
      } else {
        v = d[x] * p;
      }
      if (x == n - 1 && ((max_inner > 0 && v > max_inner) || v % step)) break;
      d[x] = v;
      return true;
    }
    }
  }
  return false;
}

int ts_mutate(const ts_trace *design, ts_mutator_kind k, ts_rng *rng,
              ts_trace **out, ts_error *err) {
  *out = NULL;
  if ((unsigned)k >= TS_N_MUTATORS)
    return TS_ERR(err, TS_EINVAL, "mutate: unknown mutator %d", (int)k);
  site *sites = NULL;
  int n = find_sites(design, k, &sites);
  if (n < 0) return TS_ERR(err, TS_ENOMEM, "mutate: out of memory");
  if (n == 0) {
    free(sites);
    return TS_ERR(err, TS_ENOTFOUND, "%s: the trace has nothing to mutate",
                  ts_mutator_name(k));
  }
  int rc = TS_ESCHEDULE;
  ts_trace *t = ts_trace_copy(design);
  for (int attempt = 0; attempt < 8 && rc; attempt++) {
    const site *s = &sites[ts_rng_below(rng, (uint64_t)n)];
    int64_t d[16];
    int nd = ts_trace_decision(t, s->index, d, 16);
    switch (k) {
    case TS_MUTATOR_TILE_SIZE:
      if (s->step > 0) {
        int64_t keep[16];
        memcpy(keep, d, sizeof keep);
        if (nd >= 1 && nd <= 16 &&
            mutate_imperfect(d, nd, s->max_innermost, s->step, rng))
          rc = ts_trace_set_decision(t, s->index, d, nd, err);
        else
          memcpy(d, keep, sizeof keep);
      } else if (nd >= 2 && nd <= 16 &&
                 mutate_tile(d, nd, s->max_innermost, rng)) {
        rc = ts_trace_set_decision(t, s->index, d, nd, err);
      }
      break;
    case TS_MUTATOR_COMPUTE_LOCATION: {
      /* -2 inline, -1 root, 0.. loops; an illegal one fails at replay */
      int64_t cur = nd == 1 ? d[0] : -1;
      int64_t v = cur;
      int64_t hi = cur + 4 > 8 ? cur + 4 : 8;
      while (v == cur) v = (int64_t)ts_rng_below(rng, (uint64_t)(hi + 2)) - 2;
      rc = ts_trace_set_decision(t, s->index, &v, 1, err);
      break;
    }
    case TS_MUTATOR_UNROLL:
    case TS_MUTATOR_PARALLEL: {
      int64_t cur = nd == 1 ? d[0] : 0;
      int64_t v = (int64_t)ts_rng_below(rng, (uint64_t)s->n_candidates - 1);
      if (v >= cur) v++;
      rc = ts_trace_set_decision(t, s->index, &v, 1, err);
      break;
    }
    }
  }
  free(sites);
  if (rc) {
    ts_trace_free(t);
    return TS_ERR(err, TS_ESCHEDULE, "%s: no other decision found",
                  ts_mutator_name(k));
  }
  *out = t;
  return TS_OK;
}
