/*
 * sampling.c — the seeded splittable random number generator (SplitMix64,
 * defined here so every machine draws the same numbers) and the sampling
 * instructions: sample_perfect_tile, sample_tile (tiles that need not
 * divide the extent), sample_categorical and sample_compute_location. A
 * sampling instruction with a recorded decision uses it (after checking it) and
 * leaves the generator alone; otherwise it draws and records the decision.
 */
#include "schedule/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ========================================================================
 * Generator
 * ======================================================================== */

void ts_rng_seed(ts_rng *r, uint64_t seed) { r->state = seed; }

uint64_t ts_rng_next(ts_rng *r) {
  uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

ts_rng ts_rng_split(ts_rng *r) {
  /* the child's state is a scrambled draw of the parent: the streams do
   * not overlap in practice and the split is deterministic */
  uint64_t x = ts_rng_next(r) ^ 0x6a09e667f3bcc909ull;
  x = (x ^ (x >> 33)) * 0xff51afd7ed558ccdull;
  x = (x ^ (x >> 33)) * 0xc4ceb9fe1a85ec53ull;
  return (ts_rng){x ^ (x >> 33)};
}

uint64_t ts_rng_below(ts_rng *r, uint64_t n) {
  if (n <= 1) return 0;
  uint64_t threshold = (0 - n) % n; /* 2^64 mod n */
  uint64_t x;
  do x = ts_rng_next(r);
  while (x < threshold);
  return x % n;
}

double ts_rng_unit(ts_rng *r) {
  return (double)(ts_rng_next(r) >> 11) * 0x1p-53;
}

/* ========================================================================
 * sample_perfect_tile
 * ======================================================================== */

#define MAX_TILE_PARTS 16

static bool decision_ints(const tval *d, int64_t *v, int cap, int *n) {
  if (d->kind != TV_LIST || d->n > cap) return false;
  for (int i = 0; i < d->n; i++) {
    if (d->items[i].kind != TV_INT) return false;
    v[i] = d->items[i].i;
  }
  *n = d->n;
  return true;
}

/* Multiplies each prime factor of `rest` into a random one of f[0, m). */
static void distribute_primes(ts_rng *rng, int64_t rest, int64_t *f, int m) {
  for (int64_t p = 2; m > 0 && rest > 1;) {
    if (p * p > rest) p = rest;
    if (rest % p == 0) {
      f[ts_rng_below(rng, (uint64_t)m)] *= p;
      rest /= p;
    } else {
      p++;
    }
  }
}

/* Draws a perfect tile of `extent` into f[0, n): the innermost a divisor
 * up to max_inner, uniformly, and each prime factor of the rest to a
 * random outer part. False when n = 1 and the extent exceeds max_inner. */
static bool draw_perfect(ts_rng *rng, int64_t extent, int64_t n,
                         int64_t max_inner, int64_t *f) {
  int64_t divisors[4096];
  int nd = 0;
  for (int64_t d = 1; d * d <= extent && nd < 4094; d++) {
    if (extent % d) continue;
    if (d <= max_inner) divisors[nd++] = d;
    if (extent / d != d && extent / d <= max_inner) divisors[nd++] = extent / d;
  }
  /* ascending, so the draw does not depend on the enumeration order */
  for (int i = 1; i < nd; i++)
    for (int j = i; j > 0 && divisors[j - 1] > divisors[j]; j--) {
      int64_t t = divisors[j];
      divisors[j] = divisors[j - 1];
      divisors[j - 1] = t;
    }
  if (n == 1 && extent > max_inner) return false;
  for (int i = 0; i < n; i++) f[i] = 1;
  int64_t inner = n == 1 ? extent : divisors[ts_rng_below(rng, (uint64_t)nd)];
  f[n - 1] = inner;
  distribute_primes(rng, extent / inner, f, n - 1);
  return true;
}

int apply_sample_perfect_tile(ts_sched *s, inst *in, rv_list *out) {
  ts_stmt *loop;
  int64_t n, max_inner, extent;
  int rc = check_arity(s, in, 1, 1, 2);
  if (rc || (rc = in_loop(s, in, 0, &loop)) || (rc = attr_int(s, in, 0, &n)) ||
      (rc = attr_int(s, in, 1, &max_inner)))
    return rc;
  if (n < 1 || n > MAX_TILE_PARTS)
    return FAIL(s, TS_EINVAL, "sample_perfect_tile: n = %lld is not in 1..%d",
                (long long)n, MAX_TILE_PARTS);
  if (max_inner < 1)
    return FAIL(s, TS_EINVAL,
                "sample_perfect_tile: max_innermost_factor = %lld is not "
                "positive",
                (long long)max_inner);
  if (!ts_expr_is_const_int(ts_for_extent(loop), &extent) || extent < 1)
    return FAIL(s, TS_ESCHEDULE,
                "sample_perfect_tile: loop '%s' has no constant extent",
                loop_name(loop));
  int64_t f[MAX_TILE_PARTS];
  if (in->decision.kind != TV_NULL) {
    int m;
    bool ok = decision_ints(&in->decision, f, MAX_TILE_PARTS, &m) && m == n;
    int64_t prod = 1;
    for (int i = 0; ok && i < m; i++) {
      if (f[i] < 1 || __builtin_mul_overflow(prod, f[i], &prod)) ok = false;
    }
    if (!ok || prod != extent || f[n - 1] > max_inner)
      return FAIL(s, TS_ESCHEDULE,
                  "sample_perfect_tile: the decision is not %lld positive "
                  "factors of loop '%s''s extent %lld with the innermost at "
                  "most %lld",
                  (long long)n, loop_name(loop), (long long)extent,
                  (long long)max_inner);
  } else {
    if (!draw_perfect(&s->rng, extent, n, max_inner, f))
      return FAIL(s, TS_ESCHEDULE,
                  "sample_perfect_tile: loop '%s''s extent %lld exceeds "
                  "max_innermost_factor %lld with n = 1",
                  loop_name(loop), (long long)extent, (long long)max_inner);
    tval *items = ts_calloc(MAX_TILE_PARTS, sizeof *items);
    if (!items) return FAIL(s, TS_ENOMEM, "sample_perfect_tile: out of memory");
    for (int i = 0; i < n; i++) items[i] = tv_int(f[i]);
    in->decision = tv_list(items, (int)n);
  }
  for (int i = 0; i < n; i++) rv_new_int(s, f[i], out);
  return TS_OK;
}

/* ========================================================================
 * sample_tile
 * ======================================================================== */

/* ceil(extent / inner) * inner: the extent a tile with inner factors of
 * product `inner` pads to; -1 on overflow. */
static int64_t padded_extent(int64_t extent, int64_t inner) {
  int64_t outer = (extent + inner - 1) / inner, p;
  return __builtin_mul_overflow(outer, inner, &p) ? -1 : p;
}

int apply_sample_tile(ts_sched *s, inst *in, rv_list *out) {
  ts_stmt *loop;
  int64_t n, max_inner, step, extent;
  int rc = check_arity(s, in, 1, 1, 3);
  if (rc || (rc = in_loop(s, in, 0, &loop)) || (rc = attr_int(s, in, 0, &n)) ||
      (rc = attr_int(s, in, 1, &max_inner)) || (rc = attr_int(s, in, 2, &step)))
    return rc;
  if (n < 2 || n > MAX_TILE_PARTS)
    return FAIL(s, TS_EINVAL, "sample_tile: n = %lld is not in 2..%d",
                (long long)n, MAX_TILE_PARTS);
  if (max_inner < 1)
    return FAIL(s, TS_EINVAL,
                "sample_tile: max_innermost_factor = %lld is not positive",
                (long long)max_inner);
  if (step < 1)
    return FAIL(s, TS_EINVAL,
                "sample_tile: innermost_step = %lld is not "
                "positive",
                (long long)step);
  if (!ts_expr_is_const_int(ts_for_extent(loop), &extent) || extent < 1)
    return FAIL(s, TS_ESCHEDULE,
                "sample_tile: loop '%s' has no constant extent",
                loop_name(loop));
  int64_t f[MAX_TILE_PARTS];
  int64_t inner = 1;
  if (in->decision.kind != TV_NULL) {
    int m;
    bool ok = decision_ints(&in->decision, f + 1, MAX_TILE_PARTS - 1, &m) &&
              m == n - 1;
    for (int i = 1; ok && i < n; i++)
      if (f[i] < 1 || __builtin_mul_overflow(inner, f[i], &inner)) ok = false;
    int64_t padded = ok ? padded_extent(extent, inner) : -1;
    if (!ok || f[n - 1] > max_inner || padded < 0 || padded >= 2 * extent)
      return FAIL(s, TS_ESCHEDULE,
                  "sample_tile: the decision is not %lld positive inner "
                  "factors of loop '%s' (extent %lld) with the innermost at "
                  "most %lld and a padded extent below %lld",
                  (long long)(n - 1), loop_name(loop), (long long)extent,
                  (long long)max_inner, (long long)(2 * extent));
  } else {
    /* the innermost candidates: multiples of step up to the maximum */
    int64_t top = max_inner < extent ? max_inner : extent;
    int64_t nc = top / step;
    if (nc == 0 || ts_rng_below(&s->rng, 2) == 0) {
      draw_perfect(&s->rng, extent, n, max_inner, f);
    } else {
      for (int i = 0; i < n; i++) f[i] = 1;
      f[n - 1] = step * (1 + (int64_t)ts_rng_below(&s->rng, (uint64_t)nc));
      int64_t rest = (extent + f[n - 1] - 1) / f[n - 1];
      /* sometimes pad the rest to a multiple of 2, 4 or 8 (at most an
       * eighth more): the middle levels get tiles that do not divide it */
      int64_t m = (int64_t)2 << ts_rng_below(&s->rng, 3);
      int64_t up = (rest + m - 1) / m * m;
      if (ts_rng_below(&s->rng, 2) && up != rest && (up - rest) * 8 <= rest)
        rest = up;
      distribute_primes(&s->rng, rest, f, (int)n - 1);
    }
    for (int i = 1; i < n; i++) inner *= f[i];
    tval *items = ts_calloc(MAX_TILE_PARTS, sizeof *items);
    if (!items) return FAIL(s, TS_ENOMEM, "sample_tile: out of memory");
    for (int i = 1; i < n; i++) items[i - 1] = tv_int(f[i]);
    in->decision = tv_list(items, (int)n - 1);
  }
  f[0] = (extent + inner - 1) / inner;
  for (int i = 0; i < n; i++) rv_new_int(s, f[i], out);
  return TS_OK;
}

/* ========================================================================
 * sample_categorical
 * ======================================================================== */

static bool number_of(const tval *v, double *out) {
  if (v->kind == TV_INT)
    *out = (double)v->i;
  else if (v->kind == TV_FLOAT)
    *out = v->f;
  else
    return false;
  return true;
}

int apply_sample_categorical(ts_sched *s, inst *in, rv_list *out) {
  int rc = check_arity(s, in, 0, 0, 2);
  if (rc) return rc;
  const tval *c = &in->attrs[0], *p = &in->attrs[1];
  if (c->kind != TV_LIST || p->kind != TV_LIST || c->n != p->n || c->n < 1)
    return FAIL(s, TS_EINVAL,
                "sample_categorical: candidates and probs must be lists of "
                "one length (at least 1)");
  double total = 0;
  for (int i = 0; i < c->n; i++) {
    double w;
    if (c->items[i].kind != TV_INT)
      return FAIL(s, TS_EINVAL,
                  "sample_categorical: candidate %d is not an integer", i);
    if (!number_of(&p->items[i], &w) || !(w >= 0) || !isfinite(w))
      return FAIL(s, TS_EINVAL,
                  "sample_categorical: probability %d is not a non-negative "
                  "number",
                  i);
    total += w;
  }
  if (!(total > 0))
    return FAIL(s, TS_EINVAL, "sample_categorical: the probabilities sum to 0");
  int64_t idx;
  if (in->decision.kind != TV_NULL) {
    if (in->decision.kind != TV_INT || in->decision.i < 0 ||
        in->decision.i >= c->n)
      return FAIL(s, TS_ESCHEDULE,
                  "sample_categorical: the decision is not an index into the "
                  "%d candidates",
                  c->n);
    idx = in->decision.i;
  } else {
    double u = ts_rng_unit(&s->rng) * total, acc = 0;
    idx = c->n - 1;
    for (int i = 0; i < c->n; i++) {
      double w = 0;
      number_of(&p->items[i], &w);
      acc += w;
      if (u < acc && w > 0) {
        idx = i;
        break;
      }
    }
    /* never land on a zero-probability tail candidate */
    while (idx > 0) {
      double w = 0;
      number_of(&p->items[idx], &w);
      if (w > 0) break;
      idx--;
    }
    in->decision = tv_int(idx);
  }
  rv_new_int(s, c->items[idx].i, out);
  return TS_OK;
}

/* ========================================================================
 * sample_compute_location
 * ======================================================================== */

int apply_sample_compute_location(ts_sched *s, inst *in, rv_list *out) {
  ts_stmt *r;
  int rc = check_arity(s, in, 1, 1, 0);
  if (rc || (rc = in_block(s, in, 0, &r))) return rc;
  stmt_vec loops = {0};
  bool can_inline = false;
  compute_location_candidates(s, r, &loops, &can_inline);
  int64_t d;
  if (in->decision.kind != TV_NULL) {
    d = in->decision.i;
    bool ok = in->decision.kind == TV_INT &&
              (d == -1 || (d == -2 && can_inline) || (d >= 0 && d < loops.n));
    if (!ok) {
      int n = loops.n;
      sv_free(&loops);
      return FAIL(s, TS_ESCHEDULE,
                  "sample_compute_location: decision %lld is not a location "
                  "of block '%s' (-1 root%s, or 0..%d)",
                  (long long)d, ts_block_name(ts_realize_block(r)),
                  can_inline ? ", -2 inline" : "", n - 1);
    }
  } else {
    uint64_t choices = (uint64_t)loops.n + 1 + (can_inline ? 1 : 0);
    uint64_t k = ts_rng_below(&s->rng, choices);
    if (k == 0)
      d = -1;
    else if (can_inline && k == 1)
      d = -2;
    else
      d = (int64_t)k - 1 - (can_inline ? 1 : 0);
    in->decision = tv_int(d);
  }
  if (d == -1)
    rv_new_loop(s, NULL, MARK_ROOT, out);
  else if (d == -2)
    rv_new_loop(s, NULL, MARK_INLINE, out);
  else
    rv_new_loop(s, loops.v[d], MARK_NONE, out);
  sv_free(&loops);
  return TS_OK;
}
