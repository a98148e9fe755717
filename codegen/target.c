/*
 * target.c — code generation targets, the part every family shares: the
 * registry of target families (the one table a new family is added to),
 * parsing a target string into its kind word and option tokens (each
 * family then builds the target from its options: target_x86.c,
 * target_nvptx.c), the canonical string, the helpers families parse with
 * (features, -mattr, integers, errors) and the queries of codegen.h, each
 * answered by the target's family.
 */
#include "codegen/target_internal.h"
#include "runtime/runtime.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the registry ---- */

/* Every target family, in the order error messages list their kinds. */
static const target_family *const families[] = {&target_x86, &target_nvptx};
#define N_FAMILIES ((int)(sizeof families / sizeof families[0]))

const target_family *target_family_at(int i) {
  return i >= 0 && i < N_FAMILIES ? families[i] : NULL;
}

const ts_target_facts *ts_target_family(int i) {
  const target_family *f = target_family_at(i);
  return f ? &f->facts : NULL;
}

const ts_target_facts *ts_target_facts_of(const ts_target *t) {
  return &t->family->facts;
}

void target_append(char *buf, size_t size, const char *text) {
  size_t len = strlen(buf);
  if (len + 1 < size) snprintf(buf + len, size - len, "%s", text);
}

void target_kinds(bool (*pred)(const target_family *f), char *buf,
                  size_t size) {
  if (!size) return;
  buf[0] = '\0';
  for (int i = 0; i < N_FAMILIES; i++)
    if (!pred || pred(families[i])) {
      if (buf[0]) target_append(buf, size, " or ");
      target_append(buf, size, families[i]->facts.kind);
    }
}

/* ---- helpers of the families' parsers ---- */

int target_fail_at(target_parser *p, const char *at, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  int column = at ? (int)(at - p->src) + 1 : 0;
  return TS_ERR_AT(p->err, TS_EINVAL, 1, column, "bad target string: %s", msg);
}

int target_oom(target_parser *p) {
  return TS_ERR(p->err, TS_ENOMEM, "target: out of memory");
}

void ts_target_free(ts_target *t) {
  if (!t) return;
  for (int i = 0; i < t->n_features; i++) free(t->features[i].name);
  free(t->features);
  free(t->cpu);
  free(t->triple);
  free(t->llvm_features);
  free(t->str);
  free(t);
}

int target_find_feature(const ts_target *t, const char *name) {
  for (int i = 0; i < t->n_features; i++)
    if (strcmp(t->features[i].name, name) == 0) return i;
  return -1;
}

int target_set_feature(target_parser *p, const char *name, size_t len, bool on,
                       bool override) {
  ts_target *t = p->t;
  char key[64];
  if (len >= sizeof key) len = sizeof key - 1;
  memcpy(key, name, len);
  key[len] = '\0';
  int i = target_find_feature(t, key);
  if (i >= 0) {
    if (override) t->features[i].on = on;
    return TS_OK;
  }
  if (t->n_features >= TS_TARGET_MAX_FEATURES)
    return target_fail_at(p, NULL, "more than %d features",
                          TS_TARGET_MAX_FEATURES);
  if (t->n_features % 32 == 0) {
    feature_entry *f = ts_realloc(t->features, (size_t)(t->n_features + 32) *
                                                   sizeof *t->features);
    if (!f) return target_oom(p);
    t->features = f;
  }
  char *copy = ts_strdup(key);
  if (!copy) return target_oom(p);
  t->features[t->n_features++] = (feature_entry){copy, on};
  return TS_OK;
}

static bool feature_char(char c) {
  return islower((unsigned char)c) || isdigit((unsigned char)c) || c == '.' ||
         c == '-' || c == '_';
}

bool target_parse_int(const char *s, size_t n, long long lo, long long hi,
                      long long *out) {
  if (n == 0 || n > 12) return false;
  long long v = 0;
  for (size_t i = 0; i < n; i++) {
    if (!isdigit((unsigned char)s[i])) return false;
    v = v * 10 + (s[i] - '0');
  }
  if (v < lo || v > hi) return false;
  *out = v;
  return true;
}

int target_parse_mattr(target_parser *p, const char *v, size_t n) {
  const char *end = v + n;
  /* Validate everything first, then apply: a failure leaves no partial
   * state that matters (the target is freed anyway). */
  for (const char *s = v; s <= end;) {
    const char *comma = memchr(s, ',', (size_t)(end - s));
    const char *e = comma ? comma : end;
    size_t len = (size_t)(e - s);
    if (len == 0) return target_fail_at(p, s, "empty entry in the -mattr list");
    if (s[0] != '+' && s[0] != '-')
      return target_fail_at(p, s,
                            "bad -mattr entry '%.*s': a feature starts with "
                            "'+' or '-'",
                            (int)len, s);
    if (len == 1 || len > 48)
      return target_fail_at(p, s, "bad -mattr entry '%.*s': bad feature name",
                            (int)len, s);
    for (size_t i = 1; i < len; i++)
      if (!feature_char(s[i]))
        return target_fail_at(p, s + i,
                              "bad -mattr entry '%.*s': character '%c' is not "
                              "allowed in a feature name",
                              (int)len, s, s[i]);
    /* Duplicates (with either sign) among the earlier entries. */
    for (const char *q = v; q < s;) {
      const char *qc = memchr(q, ',', (size_t)(end - q));
      const char *qe = qc ? qc : end;
      if ((size_t)(qe - q) == len && memcmp(q + 1, s + 1, len - 1) == 0)
        return target_fail_at(p, s, "feature '%.*s' listed twice in -mattr",
                              (int)(len - 1), s + 1);
      q = qe + 1;
    }
    s = e + 1;
  }
  for (const char *s = v; s < end;) {
    const char *comma = memchr(s, ',', (size_t)(end - s));
    const char *e = comma ? comma : end;
    int rc =
        target_set_feature(p, s + 1, (size_t)(e - s - 1), s[0] == '+', true);
    if (rc) return rc;
    s = e + 1;
  }
  return TS_OK;
}

/* ---- the parser ---- */

static int compare_features(const void *a, const void *b) {
  return strcmp(((const feature_entry *)a)->name,
                ((const feature_entry *)b)->name);
}

/* Sorts the features and prints the canonical and LLVM feature strings. */
static int finish(target_parser *p) {
  ts_target *t = p->t;
  if (t->n_features > 1)
    qsort(t->features, (size_t)t->n_features, sizeof *t->features,
          compare_features);
  strbuf attrs = {0}, str = {0};
  sb_puts(&attrs, "");
  t->family->print(t, &str, &attrs);
  t->llvm_features = attrs.data;
  t->str = str.data;
  if (attrs.failed || str.failed) return target_oom(p);
  return TS_OK;
}

/* target = KIND option*   KIND = a registered family's kind word
 * option = '-' NAME '=' VALUE   (separated by blanks; each option once) */
static int parse_target(target_parser *p) {
  char kinds[128];
  target_kinds(NULL, kinds, sizeof kinds);
  const char *s = p->src;
  while (isspace((unsigned char)*s)) s++;
  if (!*s) return target_fail_at(p, s, "empty target string (want %s)", kinds);
  const char *kind = s;
  while (*s && !isspace((unsigned char)*s)) s++;
  size_t kind_len = (size_t)(s - kind);
  for (int i = 0; i < N_FAMILIES && !p->t->family; i++)
    if (strlen(families[i]->facts.kind) == kind_len &&
        memcmp(kind, families[i]->facts.kind, kind_len) == 0)
      p->t->family = families[i];
  if (!p->t->family)
    return target_fail_at(p, kind, "unknown target kind '%.*s' (want %s)",
                          (int)kind_len, kind, kinds);
  const char *const *names = p->t->family->options;
  target_option opts[TARGET_MAX_OPTIONS];
  memset(opts, 0, sizeof opts);
  for (;;) {
    while (isspace((unsigned char)*s)) s++;
    if (!*s) break;
    const char *tok = s;
    while (*s && !isspace((unsigned char)*s)) s++;
    size_t tok_len = (size_t)(s - tok);
    if (tok[0] != '-')
      return target_fail_at(
          p, tok, "unexpected token '%.*s' (options look like -name=value)",
          (int)tok_len, tok);
    const char *eq = memchr(tok, '=', tok_len);
    size_t name_len = eq ? (size_t)(eq - tok) : tok_len;
    int index = -1;
    for (int i = 0; names[i] && i < TARGET_MAX_OPTIONS; i++)
      if (strlen(names[i]) == name_len && memcmp(names[i], tok, name_len) == 0)
        index = i;
    if (index < 0)
      return target_fail_at(p, tok,
                            "unknown option '%.*s' for target kind '%s'",
                            (int)name_len, tok, p->t->family->facts.kind);
    if (!eq)
      return target_fail_at(p, tok, "option '%.*s' needs a value ('%.*s=...')",
                            (int)name_len, tok, (int)name_len, tok);
    if (eq + 1 == s)
      return target_fail_at(p, tok, "option '%.*s' has an empty value",
                            (int)name_len, tok);
    if (opts[index].token)
      return target_fail_at(p, tok, "option '%s' given twice", names[index]);
    opts[index] = (target_option){tok, eq + 1, tok_len, (size_t)(s - eq - 1)};
  }
  int rc = p->t->family->build(p, opts, kind);
  return rc ? rc : finish(p);
}

int ts_target_parse(const char *s, ts_target **out, ts_error *err) {
  if (!s) return TS_ERR(err, TS_EINVAL, "bad target string: none given");
  ts_target *t = ts_calloc(1, sizeof *t);
  if (!t) return TS_ERR(err, TS_ENOMEM, "target: out of memory");
  target_parser p = {s, t, err};
  int rc = parse_target(&p);
  if (rc) {
    ts_target_free(t);
    return rc;
  }
  *out = t;
  return TS_OK;
}

int ts_target_host(ts_target **out, ts_error *err) {
  return ts_target_parse("llvm -mcpu=native", out, err);
}

ts_target *ts_target_copy(const ts_target *t) {
  ts_target *copy = NULL;
  if (ts_target_parse(t->str, &copy, NULL) != TS_OK) return NULL;
  return copy;
}

/* ---- the queries: stored fields, or the family's answer ---- */

const char *ts_target_str(const ts_target *t) { return t->str; }

int ts_target_check_runs_here(const ts_target *t, const char *what,
                              ts_error *err) {
  const ts_target_facts *facts = ts_target_facts_of(t);
  if (!facts->runs_on_host)
    return TS_ERR(err, TS_EUNSUPPORTED,
                  "%s: target '%s' runs on %s, not on this machine's CPU: "
                  "measure it through a `tessera rpc` worker",
                  what, t->str, facts->is_gpu ? "a GPU" : "a device");
  for (const char *const *f = ts_rt_cpu_feature_names(); *f; f++)
    if (ts_target_has_feature(t, *f) && ts_rt_cpu_has(*f) != 1)
      return TS_ERR(err, TS_EUNSUPPORTED,
                    "%s: target '%s' uses '%s', which this CPU lacks: "
                    "measure it through a `tessera rpc` worker on a machine "
                    "that has it",
                    what, t->str, *f);
  return TS_OK;
}

bool ts_target_equal(const ts_target *a, const ts_target *b) {
  return strcmp(a->str, b->str) == 0;
}

const char *ts_target_triple(const ts_target *t) { return t->triple; }

const char *ts_target_cpu(const ts_target *t) { return t->cpu; }

const char *ts_target_llvm_features(const ts_target *t) {
  return t->llvm_features;
}

bool ts_target_has_feature(const ts_target *t, const char *feature) {
  return feature && t->family->has_feature(t, feature);
}

int ts_target_num_features(const ts_target *t) { return t->n_features; }

const char *ts_target_feature(const ts_target *t, int i, bool *enabled) {
  if (i < 0 || i >= t->n_features) return NULL;
  if (enabled) *enabled = t->features[i].on;
  return t->features[i].name;
}

int ts_target_num_cores(const ts_target *t) { return t->num_cores; }

int ts_target_vector_bits(const ts_target *t) {
  return t->family->vector_bits(t);
}

int ts_target_vector_registers(const ts_target *t) {
  return t->family->vector_registers(t);
}

int ts_target_l1d_ways(const ts_target *t) {
  if (t->family->facts.is_gpu) return 0;
  static const char *const wide[] = {
      "icelake-client", "icelake-server", "tigerlake",       "rocketlake",
      "alderlake",      "raptorlake",     "meteorlake",      "arrowlake",
      "arrowlake-s",    "lunarlake",      "pantherlake",     "sapphirerapids",
      "emeraldrapids",  "graniterapids",  "graniterapids-d", "znver5"};
  const char *cpu = ts_target_cpu(t);
  for (size_t i = 0; cpu && i < sizeof wide / sizeof wide[0]; i++)
    if (!strcmp(cpu, wide[i])) return 12;
  return 8;
}

bool ts_target_strided_prefetch(const ts_target *t) {
  if (t->family->facts.is_gpu) return false;
  static const char *const intel[] = {
      "haswell",        "broadwell",        "core-avx2",
      "skylake",        "skylake-avx512",   "skx",
      "cascadelake",    "cooperlake",       "cannonlake",
      "icelake-client", "icelake-server",   "tigerlake",
      "rocketlake",     "alderlake",        "raptorlake",
      "meteorlake",     "arrowlake",        "arrowlake-s",
      "lunarlake",      "pantherlake",      "sapphirerapids",
      "emeraldrapids",  "graniterapids",    "graniterapids-d",
      "sierraforest",   "clearwaterforest", "gracemont",
      "grandridge"};
  const char *cpu = ts_target_cpu(t);
  for (size_t i = 0; cpu && i < sizeof intel / sizeof intel[0]; i++)
    if (!strcmp(cpu, intel[i])) return false;
  return true;
}

int ts_target_vector_lanes(const ts_target *t, ts_dtype d) {
  return t->family->vector_lanes(t, d);
}

const char *ts_target_isa(const ts_target *t, char *buf, size_t size) {
  if (!size) return buf;
  buf[0] = '\0';
  t->family->isa(t, buf, size);
  return buf;
}

bool ts_target_dtype_native(const ts_target *t, ts_dtype d) {
  return t->family->dtype_native(t, d);
}

const char *ts_target_dtype_path(const ts_target *t, ts_dtype d, char *buf,
                                 size_t size) {
  if (!size) return buf;
  buf[0] = '\0';
  t->family->dtype_path(t, d, buf, size);
  return buf;
}

int ts_target_sm(const ts_target *t) { return t->sm; }

int ts_target_max_threads_per_block(const ts_target *t) {
  return t->max_threads_per_block;
}

int ts_target_max_shared_memory_per_block(const ts_target *t) {
  return t->max_shared_memory_per_block;
}

int ts_target_max_registers_per_thread(const ts_target *t) {
  return t->max_registers_per_thread;
}
