/*
 * trace.c — the trace: instruction records and their literal values, the
 * instruction-kind table expanded from instructions.def, decisions of
 * sampling instructions, replay onto a fresh schedule, dead-code
 * simplification, the versioned JSON form (written and read with cJSON) and
 * the readable one-primitive-per-line script.
 */
#include "schedule/internal.h"
#include "tir/strbuf.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ========================================================================
 * Values
 * ======================================================================== */

tval tv_null(void) { return (tval){.kind = TV_NULL}; }
tval tv_int(int64_t v) { return (tval){.kind = TV_INT, .i = v}; }
tval tv_float(double v) { return (tval){.kind = TV_FLOAT, .f = v}; }
tval tv_rv(ts_rv rv) { return (tval){.kind = TV_RV, .i = rv}; }

/* Out of memory in the value constructors and copies below gives a null
 * value (or drops the copy); the failure is counted by ts_alloc_failures
 * and the public function doing the work reports it. */

tval tv_str(const char *s) {
  tval v = {.kind = TV_STR, .s = ts_strdup(s ? s : "")};
  return v.s ? v : tv_null();
}

tval tv_list(const tval *items, int n) {
  tval v = {.kind = TV_LIST, .n = n};
  v.items = ts_calloc((size_t)(n ? n : 1), sizeof *v.items);
  if (!v.items) {
    for (int i = 0; i < n; i++) tv_free((tval *)&items[i]);
    free((void *)items);
    return tv_null();
  }
  for (int i = 0; i < n; i++) v.items[i] = items[i];
  free((void *)items);
  return v;
}

tval tv_copy(const tval *v) {
  tval r = *v;
  if (v->kind == TV_STR) {
    r.s = ts_strdup(v->s);
    if (!r.s) return tv_null();
  } else if (v->kind == TV_LIST) {
    r.items = ts_calloc((size_t)(v->n ? v->n : 1), sizeof *r.items);
    if (!r.items) return tv_null();
    for (int i = 0; i < v->n; i++) r.items[i] = tv_copy(&v->items[i]);
  }
  return r;
}

void tv_free(tval *v) {
  if (v->kind == TV_STR) free(v->s);
  if (v->kind == TV_LIST) {
    for (int i = 0; i < v->n; i++) tv_free(&v->items[i]);
    free(v->items);
  }
  *v = tv_null();
}

static tval *copy_vals(const tval *v, int n) {
  if (n <= 0) return NULL;
  tval *r = ts_calloc((size_t)n, sizeof *r);
  if (!r) return NULL;
  for (int i = 0; i < n; i++) r[i] = tv_copy(&v[i]);
  return r;
}

static void free_vals(tval *v, int n) {
  for (int i = 0; i < n; i++) tv_free(&v[i]);
  free(v);
}

void inst_free(inst *in) {
  free_vals(in->inputs, in->n_inputs);
  free_vals(in->attrs, in->n_attrs);
  free(in->outputs);
  tv_free(&in->decision);
  memset(in, 0, sizeof *in);
}

/* A deep copy; out of memory leaves arrays that could not be copied empty
 * (counted). */
inst inst_copy(const inst *in) {
  inst r = *in;
  r.inputs = copy_vals(in->inputs, in->n_inputs);
  if (!r.inputs) r.n_inputs = 0;
  r.attrs = copy_vals(in->attrs, in->n_attrs);
  if (!r.attrs) r.n_attrs = 0;
  r.outputs = NULL;
  if (in->n_outputs > 0) {
    r.outputs = ts_malloc(sizeof *r.outputs * (size_t)in->n_outputs);
    if (r.outputs)
      memcpy(r.outputs, in->outputs, sizeof *r.outputs * (size_t)in->n_outputs);
    else
      r.n_outputs = 0;
  }
  r.decision = tv_copy(&in->decision);
  return r;
}

/* ========================================================================
 * Instruction kinds
 * ======================================================================== */

typedef struct kind_info {
  const char *name;
  const char *inputs, *attrs, *decision, *outputs;
  bool pure;
} kind_info;

static const kind_info kinds[TS_INSTR_KIND_COUNT] = {
#define TS_INSTR(id, name, inputs, attrs, decision, outputs, pure)             \
  [TS_INSTR_##id] = {#name, inputs, attrs, decision, outputs, pure},
#include "schedule/instructions.def"
#undef TS_INSTR
};

const char *ts_instr_kind_name(ts_instr_kind k) {
  if ((int)k < 0 || k >= TS_INSTR_KIND_COUNT) return NULL;
  return kinds[k].name;
}

static int kind_by_name(const char *name) {
  for (int i = 0; i < TS_INSTR_KIND_COUNT; i++)
    if (strcmp(kinds[i].name, name) == 0) return i;
  return -1;
}

/* The i-th name of a space-separated field list into buf; false past the
 * end. *rest: the name takes the rest ("*x"); *optional: "x?". */
static bool field_name(const char *list, int i, char *buf, size_t cap,
                       bool *rest, bool *optional) {
  const char *p = list;
  for (int k = 0;; k++) {
    while (*p == ' ') p++;
    if (!*p) return false;
    const char *e = p;
    while (*e && *e != ' ') e++;
    if (k == i) {
      *rest = *p == '*';
      if (*rest) p++;
      size_t n = (size_t)(e - p);
      *optional = n > 0 && p[n - 1] == '?';
      if (*optional) n--;
      if (n >= cap) n = cap - 1;
      memcpy(buf, p, n);
      buf[n] = 0;
      return true;
    }
    p = e;
  }
}

/* Number of fields and whether the last one takes the rest. */
static int field_count(const char *list, bool *has_rest) {
  char buf[64];
  bool rest = false, opt;
  int n = 0;
  while (field_name(list, n, buf, sizeof buf, &rest, &opt)) n++;
  *has_rest = n > 0 && rest;
  return n;
}

static char output_letter(ts_instr_kind k) {
  const char *o = kinds[k].outputs;
  return o[0] ? o[0] : 'v';
}

/* ========================================================================
 * Traces
 * ======================================================================== */

ts_trace *ts_trace_new(void) { return ts_calloc(1, sizeof(ts_trace)); }

void trace_append(ts_trace *t, const inst *in) {
  if (t->n == t->cap) {
    int cap = t->cap ? t->cap * 2 : 16;
    inst *p = ts_realloc(t->insts, sizeof *p * (size_t)cap);
    if (!p) return; /* out of memory (counted): dropped */
    t->insts = p;
    t->cap = cap;
  }
  t->insts[t->n++] = inst_copy(in);
}

ts_trace *ts_trace_copy(const ts_trace *t) {
  unsigned long oom = ts_alloc_failures();
  ts_trace *r = ts_trace_new();
  for (int i = 0; r && i < t->n; i++) trace_append(r, &t->insts[i]);
  if (r && ts_alloc_failures() != oom) {
    ts_trace_free(r);
    r = NULL;
  }
  return r;
}

void ts_trace_free(ts_trace *t) {
  if (!t) return;
  for (int i = 0; i < t->n; i++) inst_free(&t->insts[i]);
  free(t->insts);
  free(t);
}

int ts_trace_n_insts(const ts_trace *t) { return t->n; }

ts_instr_kind ts_trace_inst_kind(const ts_trace *t, int i) {
  return t->insts[i].kind;
}

bool ts_trace_inst_is_sampling(const ts_trace *t, int i) {
  return i >= 0 && i < t->n && kinds[t->insts[i].kind].decision[0] != 0;
}

int ts_trace_decision(const ts_trace *t, int i, int64_t *values, int cap) {
  if (!ts_trace_inst_is_sampling(t, i)) return -1;
  const tval *d = &t->insts[i].decision;
  if (d->kind == TV_INT) {
    if (cap > 0) values[0] = d->i;
    return 1;
  }
  if (d->kind != TV_LIST) return -1;
  for (int k = 0; k < d->n && k < cap; k++) values[k] = d->items[k].i;
  return d->n;
}

int ts_trace_set_decision(ts_trace *t, int i, const int64_t *values, int n,
                          ts_error *err) {
  if (!ts_trace_inst_is_sampling(t, i))
    return TS_ERR(err, TS_EINVAL,
                  "trace: instruction %d is not a sampling "
                  "instruction",
                  i);
  inst *in = &t->insts[i];
  tv_free(&in->decision);
  if (n < 0) return TS_OK;
  if (strcmp(kinds[in->kind].decision, "int") == 0) {
    if (n != 1)
      return TS_ERR(err, TS_EINVAL,
                    "trace: instruction %d (%s) takes one decision value", i,
                    kinds[in->kind].name);
    in->decision = tv_int(values[0]);
    return TS_OK;
  }
  tval *items = ts_calloc((size_t)(n ? n : 1), sizeof *items);
  if (!items) return TS_ERR(err, TS_ENOMEM, "trace: out of memory");
  for (int k = 0; k < n; k++) items[k] = tv_int(values[k]);
  in->decision = tv_list(items, n);
  return TS_OK;
}

/* ========================================================================
 * Replay
 * ======================================================================== */

static int max_rv_id(const ts_trace *t) {
  int m = -1;
  for (int i = 0; i < t->n; i++) {
    const inst *in = &t->insts[i];
    for (int k = 0; k < in->n_outputs; k++)
      if (in->outputs[k] > m) m = in->outputs[k];
    for (int k = 0; k < in->n_inputs; k++)
      if (in->inputs[k].kind == TV_RV && in->inputs[k].i > m)
        m = (int)in->inputs[k].i;
  }
  return m;
}

int ts_trace_apply(const ts_trace *t, const ts_func *f, uint64_t seed,
                   ts_sched **out, ts_error *err) {
  *out = NULL;
  ts_sched *s;
  int rc = ts_sched_create(f, seed, &s, err);
  if (rc) return rc;
  int n_ids = max_rv_id(t) + 1;
  ts_rv *map = ts_malloc(sizeof *map * (size_t)(n_ids > 0 ? n_ids : 1));
  if (!map) {
    ts_sched_destroy(s);
    return TS_ERR(err, TS_ENOMEM, "replay: out of memory");
  }
  for (int i = 0; i < n_ids; i++) map[i] = TS_RV_NONE;
  for (int i = 0; i < t->n && rc == TS_OK; i++) {
    const inst *orig = &t->insts[i];
    const char *name = kinds[orig->kind].name;
    inst c = inst_copy(orig);
    for (int k = 0; k < c.n_inputs && rc == TS_OK; k++) {
      if (c.inputs[k].kind != TV_RV) continue;
      ts_rv id = (ts_rv)c.inputs[k].i;
      if (id < 0 || id >= n_ids || map[id] == TS_RV_NONE)
        rc = TS_ERR(err, TS_EINVAL,
                    "replay: instruction %d (%s): input %d uses a handle no "
                    "earlier instruction defined",
                    i, name, k);
      else
        c.inputs[k].i = map[id];
    }
    rv_list outs = {0};
    if (rc == TS_OK && (rc = sched_run(s, &c, &outs)) != TS_OK)
      TS_ERR(err, rc, "replay: instruction %d (%s): %s", i, name, s->err.msg);
    if (rc == TS_OK && outs.n != orig->n_outputs)
      rc = TS_ERR(err, TS_EINVAL,
                  "replay: instruction %d (%s) gave %d outputs where the trace "
                  "has %d",
                  i, name, outs.n, orig->n_outputs);
    for (int k = 0; rc == TS_OK && k < outs.n; k++)
      map[orig->outputs[k]] = outs.v[k];
    free(outs.v);
    inst_free(&c);
  }
  free(map);
  if (rc) {
    ts_sched_destroy(s);
    return rc;
  }
  *out = s;
  return TS_OK;
}

/* ========================================================================
 * Simplification
 * ======================================================================== */

ts_trace *ts_trace_simplify(const ts_trace *t) {
  int n_ids = max_rv_id(t) + 1;
  bool *live_rv = ts_calloc((size_t)(n_ids > 0 ? n_ids : 1), sizeof *live_rv);
  bool *live = ts_calloc((size_t)(t->n ? t->n : 1), sizeof *live);
  ts_trace *r = live_rv && live ? ts_trace_new() : NULL;
  if (!r) { /* out of memory (counted) */
    free(live_rv);
    free(live);
    return NULL;
  }
  for (int i = t->n - 1; i >= 0; i--) {
    const inst *in = &t->insts[i];
    bool keep = !kinds[in->kind].pure;
    for (int k = 0; k < in->n_outputs && !keep; k++)
      if (live_rv[in->outputs[k]]) keep = true;
    if (!keep) continue;
    live[i] = true;
    for (int k = 0; k < in->n_inputs; k++)
      if (in->inputs[k].kind == TV_RV && in->inputs[k].i >= 0 &&
          in->inputs[k].i < n_ids)
        live_rv[in->inputs[k].i] = true;
  }
  unsigned long oom = ts_alloc_failures();
  for (int i = 0; i < t->n; i++)
    if (live[i]) trace_append(r, &t->insts[i]);
  free(live_rv);
  free(live);
  if (ts_alloc_failures() != oom) {
    ts_trace_free(r);
    r = NULL;
  }
  return r;
}

/* ========================================================================
 * Names of RVs in JSON and scripts: the output letter and the order of
 * definition.
 * ======================================================================== */

typedef struct namer {
  int *num;  /* id -> definition number, -1 when undefined */
  char *let; /* id -> letter */
  int n_ids;
} namer;

/* False when out of memory (nm is then empty). */
static bool namer_init(namer *nm, const ts_trace *t) {
  nm->n_ids = max_rv_id(t) + 1;
  size_t n = (size_t)(nm->n_ids > 0 ? nm->n_ids : 1);
  nm->num = ts_malloc(sizeof *nm->num * n);
  nm->let = ts_calloc(n, 1);
  if (!nm->num || !nm->let) {
    free(nm->num);
    free(nm->let);
    memset(nm, 0, sizeof *nm);
    return false;
  }
  for (int i = 0; i < nm->n_ids; i++) nm->num[i] = -1;
  int next = 0;
  for (int i = 0; i < t->n; i++)
    for (int k = 0; k < t->insts[i].n_outputs; k++) {
      ts_rv id = t->insts[i].outputs[k];
      nm->num[id] = next++;
      nm->let[id] = output_letter(t->insts[i].kind);
    }
  return true;
}

static void namer_free(namer *nm) {
  free(nm->num);
  free(nm->let);
}

static void rv_name(const namer *nm, ts_rv id, char *buf, size_t cap) {
  if (id < 0 || id >= nm->n_ids || nm->num[id] < 0)
    snprintf(buf, cap, "undefined%d", id);
  else
    snprintf(buf, cap, "%c%d", nm->let[id], nm->num[id]);
}

/* The shortest "%.Ng" of v that reads back exactly, always with a '.' or
 * an exponent so it reads back as a float. */
static void format_double(char *buf, size_t cap, double v) {
  if (isnan(v)) {
    snprintf(buf, cap, "NaN");
    return;
  }
  if (isinf(v)) {
    snprintf(buf, cap, v > 0 ? "Infinity" : "-Infinity");
    return;
  }
  for (int p = 1; p <= 17; p++) {
    snprintf(buf, cap, "%.*g", p, v);
    if (strtod(buf, NULL) == v) break;
  }
  if (!strpbrk(buf, ".eE")) {
    size_t n = strlen(buf);
    if (n + 2 < cap) memcpy(buf + n, ".0", 3);
  }
}

/* ========================================================================
 * JSON
 * ======================================================================== */

static cJSON *json_of(const tval *v, const namer *nm) {
  char buf[64];
  switch (v->kind) {
  case TV_INT: {
    snprintf(buf, sizeof buf, "%lld", (long long)v->i);
    return cJSON_CreateRaw(buf);
  }
  case TV_FLOAT:
    if (!isfinite(v->f)) return cJSON_CreateNull();
    format_double(buf, sizeof buf, v->f);
    return cJSON_CreateRaw(buf);
  case TV_STR: return cJSON_CreateString(v->s);
  case TV_RV:
    rv_name(nm, (ts_rv)v->i, buf, sizeof buf);
    return cJSON_CreateString(buf);
  case TV_LIST: {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < v->n; i++)
      ts_json_add(a, NULL, json_of(&v->items[i], nm));
    return a;
  }
  default: return cJSON_CreateNull();
  }
}

char *ts_trace_to_json(const ts_trace *t) {
  /* a value cJSON could not allocate would be left out: count failures */
  unsigned long failures = ts_alloc_failures();
  namer nm;
  if (!namer_init(&nm, t)) return NULL;
  cJSON *root = cJSON_CreateObject();
  cJSON_AddNumberToObject(root, "version", 1);
  cJSON *insts = cJSON_AddArrayToObject(root, "instructions");
  cJSON *decisions = cJSON_CreateArray();
  for (int i = 0; i < t->n; i++) {
    const inst *in = &t->insts[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "kind", kinds[in->kind].name);
    cJSON *a = cJSON_AddArrayToObject(o, "inputs");
    for (int k = 0; k < in->n_inputs; k++)
      ts_json_add(a, NULL, json_of(&in->inputs[k], &nm));
    a = cJSON_AddArrayToObject(o, "attrs");
    for (int k = 0; k < in->n_attrs; k++)
      ts_json_add(a, NULL, json_of(&in->attrs[k], &nm));
    a = cJSON_AddArrayToObject(o, "outputs");
    for (int k = 0; k < in->n_outputs; k++) {
      char buf[64];
      rv_name(&nm, in->outputs[k], buf, sizeof buf);
      ts_json_add(a, NULL, cJSON_CreateString(buf));
    }
    ts_json_add(insts, NULL, o);
    if (in->decision.kind != TV_NULL) {
      cJSON *d = cJSON_CreateArray();
      char buf[32];
      snprintf(buf, sizeof buf, "%d", i);
      ts_json_add(d, NULL, cJSON_CreateRaw(buf));
      ts_json_add(d, NULL, json_of(&in->decision, &nm));
      ts_json_add(decisions, NULL, d);
    }
  }
  ts_json_add(root, "decisions", decisions);
  char *text = ts_json_print(root, failures, true);
  cJSON_Delete(root);
  namer_free(&nm);
  return text;
}

/* --- reading --- */

/* Whether each number token of the text, in document order, is written as
 * a float ('.', 'e' or 'E'): cJSON keeps only the double. */
typedef struct num_kinds {
  bool *is_float;
  int n, next;
} num_kinds;

static void scan_numbers(const char *text, size_t len, num_kinds *k) {
  int cap = 0;
  for (size_t i = 0; i < len;) {
    char c = text[i];
    if (c == '"') {
      for (i++; i < len && text[i] != '"'; i++)
        if (text[i] == '\\') i++;
      i++;
      continue;
    }
    if (c == '-' || isdigit((unsigned char)c)) {
      bool fl = false;
      while (i < len && (isdigit((unsigned char)text[i]) || text[i] == '-' ||
                         text[i] == '+' || text[i] == '.' || text[i] == 'e' ||
                         text[i] == 'E')) {
        if (text[i] == '.' || text[i] == 'e' || text[i] == 'E') fl = true;
        i++;
      }
      if (k->n == cap) {
        size_t c2 = cap ? cap * 2 : 64;
        bool *p = ts_realloc(k->is_float, sizeof *p * c2);
        if (!p) return; /* out of memory (counted): the reader reports it */
        k->is_float = p;
        cap = c2;
      }
      k->is_float[k->n++] = fl;
      continue;
    }
    i++;
  }
}

typedef struct reader {
  num_kinds nums;
  ts_error *err;
  /* RV names defined so far -> id */
  char **names;
  int n_names, cap_names;
} reader;

static int name_lookup(const reader *r, const char *name) {
  for (int i = 0; i < r->n_names; i++)
    if (strcmp(r->names[i], name) == 0) return i;
  return -1;
}

static int name_define(reader *r, const char *name) {
  if (r->n_names == r->cap_names) {
    int cap = r->cap_names ? r->cap_names * 2 : 32;
    char **p = ts_realloc(r->names, sizeof *p * (size_t)cap);
    if (!p) return -1; /* out of memory (counted): the reader reports it */
    r->names = p;
    r->cap_names = cap;
  }
  r->names[r->n_names] = ts_strdup(name);
  if (!r->names[r->n_names]) return -1;
  return r->n_names++;
}

/* Consumes the number kinds of every number inside item, in order. */
static void skip_numbers(reader *r, const cJSON *item) {
  if (cJSON_IsNumber(item)) r->nums.next++;
  for (const cJSON *c = item ? item->child : NULL; c; c = c->next)
    skip_numbers(r, c);
}

/* A JSON number as a value: an integer unless written as a float. */
static int number_value(reader *r, const cJSON *item, tval *out,
                        const char *where) {
  bool fl = r->nums.next < r->nums.n ? r->nums.is_float[r->nums.next] : true;
  r->nums.next++;
  double d = item->valuedouble;
  if (!fl) {
    if (!(d >= -9.2e18 && d <= 9.2e18) || d != floor(d))
      return TS_ERR(r->err, TS_EPARSE, "trace JSON: %s: integer out of range",
                    where);
    *out = tv_int((int64_t)d);
  } else {
    *out = tv_float(d);
  }
  return TS_OK;
}

/* An attribute or decision: number, string, null or list of them. */
static int literal_value(reader *r, const cJSON *item, tval *out,
                         const char *where, int depth) {
  if (depth > 8)
    return TS_ERR(r->err, TS_EPARSE, "trace JSON: %s: nested too deeply",
                  where);
  if (cJSON_IsNumber(item)) return number_value(r, item, out, where);
  if (cJSON_IsString(item)) {
    *out = tv_str(item->valuestring);
    return TS_OK;
  }
  if (cJSON_IsNull(item)) {
    *out = tv_null();
    return TS_OK;
  }
  if (cJSON_IsArray(item)) {
    int n = cJSON_GetArraySize(item);
    tval *items = ts_calloc((size_t)(n ? n : 1), sizeof *items);
    if (!items) return TS_ERR(r->err, TS_ENOMEM, "trace JSON: out of memory");
    int k = 0, rc = TS_OK;
    for (const cJSON *c = item->child; c && rc == TS_OK; c = c->next, k++)
      rc = literal_value(r, c, &items[k], where, depth + 1);
    if (rc) {
      free_vals(items, k);
      return rc;
    }
    *out = tv_list(items, n);
    return TS_OK;
  }
  skip_numbers(r, item);
  return TS_ERR(r->err, TS_EPARSE,
                "trace JSON: %s: expected a number, string, null or list",
                where);
}

static int read_inst(reader *r, const cJSON *o, int index, inst *in) {
  char where[96];
  memset(in, 0, sizeof *in);
  if (!cJSON_IsObject(o)) {
    skip_numbers(r, o);
    return TS_ERR(r->err, TS_EPARSE,
                  "trace JSON: instruction %d is not an object", index);
  }
  const cJSON *kind = cJSON_GetObjectItemCaseSensitive(o, "kind");
  const cJSON *inputs = cJSON_GetObjectItemCaseSensitive(o, "inputs");
  const cJSON *attrs = cJSON_GetObjectItemCaseSensitive(o, "attrs");
  const cJSON *outputs = cJSON_GetObjectItemCaseSensitive(o, "outputs");
  /* keep the number order: visit fields in document order */
  int k = cJSON_IsString(kind) ? kind_by_name(kind->valuestring) : -1;
  int rc = TS_OK;
  if (!cJSON_IsString(kind))
    rc = TS_ERR(r->err, TS_EPARSE,
                "trace JSON: instruction %d: \"kind\" is missing or not a "
                "string",
                index);
  else if (k < 0)
    rc = TS_ERR(r->err, TS_EPARSE,
                "trace JSON: instruction %d: unknown kind '%s'", index,
                kind->valuestring);
  else if (!cJSON_IsArray(inputs) || !cJSON_IsArray(attrs) ||
           !cJSON_IsArray(outputs))
    rc = TS_ERR(r->err, TS_EPARSE,
                "trace JSON: instruction %d (%s): \"inputs\", \"attrs\" and "
                "\"outputs\" must be lists",
                index, kind->valuestring);
  if (rc) {
    skip_numbers(r, o);
    return rc;
  }
  in->kind = (ts_instr_kind)k;
  in->decision = tv_null();
  const kind_info *ki = &kinds[k];
  /* the fields may come in any order: read them in document order */
  for (const cJSON *f = o->child; f; f = f->next) {
    if (rc) {
      skip_numbers(r, f);
      continue;
    }
    if (f == inputs) {
      int n = cJSON_GetArraySize(inputs);
      bool rest;
      int want = field_count(ki->inputs, &rest);
      if (rest ? n < want - 1 : n != want) {
        rc = TS_ERR(r->err, TS_EPARSE,
                    "trace JSON: instruction %d (%s): expected %s%d inputs, "
                    "got %d",
                    index, ki->name, rest ? "at least " : "",
                    rest ? want - 1 : want, n);
        skip_numbers(r, f);
        continue;
      }
      in->inputs = ts_calloc((size_t)(n ? n : 1), sizeof *in->inputs);
      if (!in->inputs)
        rc = TS_ERR(r->err, TS_ENOMEM, "trace JSON: out of memory");
      int j = 0;
      for (const cJSON *c = inputs->child; c && !rc; c = c->next, j++) {
        snprintf(where, sizeof where, "instruction %d (%s) input %d", index,
                 ki->name, j);
        if (cJSON_IsString(c)) {
          int id = name_lookup(r, c->valuestring);
          if (id < 0)
            rc = TS_ERR(r->err, TS_EPARSE,
                        "trace JSON: %s: '%s' is not defined by an earlier "
                        "instruction",
                        where, c->valuestring);
          else
            in->inputs[j] = tv_rv(id);
        } else if (cJSON_IsNull(c)) {
          in->inputs[j] = tv_null();
        } else if (cJSON_IsNumber(c)) {
          rc = number_value(r, c, &in->inputs[j], where);
          if (!rc && in->inputs[j].kind != TV_INT)
            rc = TS_ERR(r->err, TS_EPARSE,
                        "trace JSON: %s: a number input must be an integer",
                        where);
        } else {
          skip_numbers(r, c);
          rc = TS_ERR(r->err, TS_EPARSE,
                      "trace JSON: %s: expected a handle name, an integer or "
                      "null",
                      where);
        }
        in->n_inputs = j + 1;
      }
    } else if (f == attrs) {
      int n = cJSON_GetArraySize(attrs);
      bool rest;
      int want = field_count(ki->attrs, &rest);
      if (n != want) {
        rc = TS_ERR(r->err, TS_EPARSE,
                    "trace JSON: instruction %d (%s): expected %d attrs, got "
                    "%d",
                    index, ki->name, want, n);
        skip_numbers(r, f);
        continue;
      }
      in->attrs = ts_calloc((size_t)(n ? n : 1), sizeof *in->attrs);
      if (!in->attrs)
        rc = TS_ERR(r->err, TS_ENOMEM, "trace JSON: out of memory");
      int j = 0;
      for (const cJSON *c = attrs->child; c && !rc; c = c->next, j++) {
        snprintf(where, sizeof where, "instruction %d (%s) attr %d", index,
                 ki->name, j);
        rc = literal_value(r, c, &in->attrs[j], where, 0);
        in->n_attrs = j + 1;
      }
    } else if (f == outputs) {
      int n = cJSON_GetArraySize(outputs);
      const char *o_kind = ki->outputs;
      bool var = strchr(o_kind, '*') != NULL;
      int want = o_kind[0] ? 1 : 0;
      if (!var && n != want) {
        rc = TS_ERR(r->err, TS_EPARSE,
                    "trace JSON: instruction %d (%s): expected %d outputs, "
                    "got %d",
                    index, ki->name, want, n);
        continue;
      }
      for (const cJSON *c = outputs->child; c && !rc; c = c->next) {
        if (!cJSON_IsString(c)) {
          skip_numbers(r, c);
          rc = TS_ERR(r->err, TS_EPARSE,
                      "trace JSON: instruction %d (%s): outputs must be "
                      "names",
                      index, ki->name);
          continue;
        }
        bool twice = name_lookup(r, c->valuestring) >= 0;
        for (const cJSON *e = outputs->child; e != c && !twice; e = e->next)
          twice = strcmp(e->valuestring, c->valuestring) == 0;
        if (twice)
          rc = TS_ERR(r->err, TS_EPARSE,
                      "trace JSON: instruction %d (%s): '%s' is defined twice",
                      index, ki->name, c->valuestring);
      }
    } else {
      skip_numbers(r, f);
    }
  }
  /* The outputs are defined once the whole instruction is read: its inputs
   * may name only what earlier instructions define, whatever the order of
   * the fields ("outputs" before "inputs" would otherwise let an
   * instruction consume its own result). */
  if (!rc) {
    int n = cJSON_GetArraySize(outputs);
    in->outputs = ts_malloc(sizeof *in->outputs * (size_t)(n ? n : 1));
    if (!in->outputs)
      rc = TS_ERR(r->err, TS_ENOMEM, "trace JSON: out of memory");
    for (const cJSON *c = outputs->child; c && !rc; c = c->next)
      in->outputs[in->n_outputs++] = name_define(r, c->valuestring);
  }
  return rc;
}

static int read_decision(reader *r, ts_trace *t, const cJSON *d, int j) {
  if (!cJSON_IsArray(d) || cJSON_GetArraySize(d) != 2 ||
      !cJSON_IsNumber(d->child)) {
    skip_numbers(r, d);
    return TS_ERR(r->err, TS_EPARSE,
                  "trace JSON: decision %d must be [instruction index, value]",
                  j);
  }
  tval idx, val;
  char where[64];
  snprintf(where, sizeof where, "decision %d", j);
  int rc = number_value(r, d->child, &idx, where);
  if (rc) {
    skip_numbers(r, d->child->next);
    return rc;
  }
  if ((rc = literal_value(r, d->child->next, &val, where, 0))) return rc;
  rc = TS_OK;
  if (idx.kind != TV_INT || idx.i < 0 || idx.i >= t->n ||
      !ts_trace_inst_is_sampling(t, (int)idx.i))
    rc = TS_ERR(r->err, TS_EPARSE,
                "trace JSON: decision %d names instruction %lld, which is "
                "not a sampling instruction",
                j, (long long)idx.i);
  else if (t->insts[idx.i].decision.kind != TV_NULL)
    rc = TS_ERR(r->err, TS_EPARSE,
                "trace JSON: decision %d: instruction %lld has two decisions",
                j, (long long)idx.i);
  else {
    const char *dk = kinds[t->insts[idx.i].kind].decision;
    bool ok = strcmp(dk, "int") == 0 ? val.kind == TV_INT : val.kind == TV_LIST;
    for (int k = 0; ok && val.kind == TV_LIST && k < val.n; k++)
      ok = val.items[k].kind == TV_INT;
    if (!ok)
      rc = TS_ERR(r->err, TS_EPARSE,
                  "trace JSON: decision %d: instruction %lld (%s) takes %s", j,
                  (long long)idx.i, kinds[t->insts[idx.i].kind].name,
                  strcmp(dk, "int") == 0 ? "an integer" : "a list of integers");
  }
  if (rc) {
    tv_free(&val);
    return rc;
  }
  t->insts[idx.i].decision = val;
  return TS_OK;
}

/* The line and column (from 1) of byte `off` of text. */
static void line_col(const char *text, size_t len, size_t off, int *line,
                     int *col) {
  *line = 1;
  *col = 1;
  for (size_t i = 0; i < off && i < len; i++) {
    if (text[i] == '\n') {
      (*line)++;
      *col = 1;
    } else {
      (*col)++;
    }
  }
}

static int from_json(const char *text, size_t len, ts_trace **out,
                     ts_error *err);

int ts_trace_from_json(const char *text, size_t len, ts_trace **out,
                       ts_error *err) {
  unsigned long oom = ts_alloc_failures();
  int rc = from_json(text, len, out, err);
  if (!rc && ts_alloc_failures() != oom) {
    ts_trace_free(*out);
    *out = NULL;
  }
  return ts_alloc_check(oom, rc, err, "trace JSON");
}

static int from_json(const char *text, size_t len, ts_trace **out,
                     ts_error *err) {
  *out = NULL;
  if (!text) return TS_ERR(err, TS_EINVAL, "trace JSON: no text");
  const char *end = NULL;
  int line, col;
  cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
  if (!root) {
    size_t off = end && end >= text ? (size_t)(end - text) : 0;
    line_col(text, len, off, &line, &col);
    return TS_ERR_AT(err, TS_EPARSE, line, col,
                     "trace JSON: malformed JSON at line %d, column %d", line,
                     col);
  }
  /* One value and nothing after it but white space (a terminating NUL
   * counted in len included): garbage or a second object is an error. */
  size_t rest = end && end >= text ? (size_t)(end - text) : len;
  while (rest < len && (text[rest] == ' ' || text[rest] == '\t' ||
                        text[rest] == '\n' || text[rest] == '\r'))
    rest++;
  if (rest < len && !(text[rest] == 0 && rest + 1 == len)) {
    cJSON_Delete(root);
    line_col(text, len, rest, &line, &col);
    return TS_ERR_AT(err, TS_EPARSE, line, col,
                     "trace JSON: unexpected input after the trace object at "
                     "line %d, column %d (a trace is one JSON object)",
                     line, col);
  }
  reader r = {0};
  r.err = err;
  scan_numbers(text, len, &r.nums);
  ts_trace *t = ts_trace_new();
  int rc = TS_OK;
  const cJSON *version = cJSON_GetObjectItemCaseSensitive(root, "version");
  const cJSON *insts = cJSON_GetObjectItemCaseSensitive(root, "instructions");
  const cJSON *decisions = cJSON_GetObjectItemCaseSensitive(root, "decisions");
  if (!t)
    rc = TS_ERR(err, TS_ENOMEM, "trace JSON: out of memory");
  else if (!cJSON_IsObject(root))
    rc = TS_ERR(err, TS_EPARSE, "trace JSON: the top level is not an object");
  else if (!cJSON_IsNumber(version))
    rc = TS_ERR(err, TS_EPARSE, "trace JSON: \"version\" is missing");
  else if (version->valuedouble != 1)
    rc = TS_ERR(err, TS_EPARSE,
                "trace JSON: unsupported version %g (this tessera reads "
                "version 1)",
                version->valuedouble);
  else if (!cJSON_IsArray(insts))
    rc = TS_ERR(err, TS_EPARSE,
                "trace JSON: \"instructions\" is missing or not a list");
  else if (decisions && !cJSON_IsArray(decisions))
    rc = TS_ERR(err, TS_EPARSE, "trace JSON: \"decisions\" is not a list");
  /* top-level fields in document order, so numbers line up */
  for (const cJSON *f = root->child; f && rc == TS_OK; f = f->next) {
    if (f == insts) {
      int i = 0;
      for (const cJSON *o = insts->child; o && rc == TS_OK; o = o->next, i++) {
        inst in;
        rc = read_inst(&r, o, i, &in);
        if (rc == TS_OK) trace_append(t, &in);
        inst_free(&in);
      }
    } else if (f == decisions) {
      int j = 0;
      for (const cJSON *d = decisions->child; d && rc == TS_OK;
           d = d->next, j++)
        rc = read_decision(&r, t, d, j);
    } else {
      skip_numbers(&r, f);
    }
  }
  cJSON_Delete(root);
  for (int i = 0; i < r.n_names; i++) free(r.names[i]);
  free(r.names);
  free(r.nums.is_float);
  if (rc) {
    ts_trace_free(t);
    return rc;
  }
  *out = t;
  return TS_OK;
}

int ts_trace_check_json(void *ctx, const char *json, size_t len,
                        ts_error *err) {
  (void)ctx;
  ts_trace *t = NULL;
  int rc = ts_trace_from_json(json, len, &t, err);
  ts_trace_free(t);
  return rc;
}

int ts_trace_from_json_file(const char *path, ts_trace **out, ts_error *err) {
  *out = NULL;
  char *text = NULL;
  size_t n = 0;
  int rc = ts_read_file(path, "trace file", (size_t)1 << 30, &text, &n, err);
  if (rc) return rc;
  rc = ts_trace_from_json(text, n, out, err);
  free(text);
  return rc;
}

/* ========================================================================
 * Readable script
 * ======================================================================== */

static void print_string(strbuf *b, const char *s) {
  sb_puts(b, "\"");
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    char esc[8];
    if (*p == '"' || *p == '\\') {
      esc[0] = '\\';
      esc[1] = (char)*p;
      sb_putn(b, esc, 2);
    } else if (*p == '\n') {
      sb_puts(b, "\\n");
    } else if (*p == '\t') {
      sb_puts(b, "\\t");
    } else if (*p < 0x20 || *p == 0x7f) {
      snprintf(esc, sizeof esc, "\\x%02x", *p);
      sb_puts(b, esc);
    } else {
      sb_putn(b, (const char *)p, 1);
    }
  }
  sb_puts(b, "\"");
}

static void print_value(strbuf *b, const tval *v, const namer *nm) {
  char buf[64];
  switch (v->kind) {
  case TV_INT:
    snprintf(buf, sizeof buf, "%lld", (long long)v->i);
    sb_puts(b, buf);
    break;
  case TV_FLOAT:
    format_double(buf, sizeof buf, v->f);
    sb_puts(b, buf);
    break;
  case TV_STR: print_string(b, v->s); break;
  case TV_RV:
    rv_name(nm, (ts_rv)v->i, buf, sizeof buf);
    sb_puts(b, buf);
    break;
  case TV_LIST:
    sb_puts(b, "[");
    for (int i = 0; i < v->n; i++) {
      if (i) sb_puts(b, ", ");
      print_value(b, &v->items[i], nm);
    }
    sb_puts(b, "]");
    break;
  default: sb_puts(b, "None"); break;
  }
}

/* Prints name=value pairs of a field list; "*x" gathers the rest into a
 * list, "x?" is left out when null. */
static void print_fields(strbuf *b, const char *list, const tval *v, int n,
                         const namer *nm, bool *first) {
  char name[64];
  bool rest, opt;
  for (int i = 0; field_name(list, i, name, sizeof name, &rest, &opt); i++) {
    if (rest) {
      if (!*first) sb_puts(b, ", ");
      *first = false;
      sb_puts(b, name);
      sb_puts(b, "=[");
      for (int k = i; k < n; k++) {
        if (k > i) sb_puts(b, ", ");
        print_value(b, &v[k], nm);
      }
      sb_puts(b, "]");
      return;
    }
    if (i >= n) return;
    if (opt && v[i].kind == TV_NULL) continue;
    if (!*first) sb_puts(b, ", ");
    *first = false;
    sb_puts(b, name);
    sb_puts(b, "=");
    print_value(b, &v[i], nm);
  }
}

char *ts_trace_print(const ts_trace *t) {
  namer nm;
  if (!namer_init(&nm, t)) return NULL;
  strbuf b = {0};
  for (int i = 0; i < t->n; i++) {
    const inst *in = &t->insts[i];
    char buf[64];
    for (int k = 0; k < in->n_outputs; k++) {
      if (k) sb_puts(&b, ", ");
      rv_name(&nm, in->outputs[k], buf, sizeof buf);
      sb_puts(&b, buf);
    }
    if (in->n_outputs) sb_puts(&b, " = ");
    sb_puts(&b, kinds[in->kind].name);
    sb_puts(&b, "(");
    bool first = true;
    print_fields(&b, kinds[in->kind].inputs, in->inputs, in->n_inputs, &nm,
                 &first);
    print_fields(&b, kinds[in->kind].attrs, in->attrs, in->n_attrs, &nm,
                 &first);
    if (in->decision.kind != TV_NULL) {
      if (!first) sb_puts(&b, ", ");
      sb_puts(&b, "decision=");
      print_value(&b, &in->decision, &nm);
    }
    sb_puts(&b, ")\n");
  }
  namer_free(&nm);
  return sb_take(&b);
}
