/*
 * protocol.c — protocol v1's encodings: measure status names, the measure
 * configuration and result as JSON, artifacts as JSON descriptions whose
 * bytes travel in the binary payload, the binary body framing (magic, a
 * length-prefixed JSON header, the payload), and the validating field
 * getters every decoder uses. Everything read here comes from the network:
 * each field is type- and range-checked and errors name the field.
 */
#include "rpc/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Arguments an artifact may have. */
#define MAX_ARGS 256
/* The largest integer a JSON number carries exactly. */
#define JSON_INT_MAX ((int64_t)1 << 53)

static const char *const status_names[] = {
    "ok", "build_error", "run_error", "timeout", "wrong_result", "worker_lost",
};

int ts_measure_reference_limit_ms(const ts_measure_config *c) {
  int64_t t = (int64_t)c->timeout_ms * 4;
  if (t < 600000) t = 600000;
  return t > 3600000 ? 3600000 : (int)t;
}

const char *ts_measure_status_name(ts_measure_status s) {
  if ((unsigned)s < sizeof status_names / sizeof status_names[0])
    return status_names[s];
  return "?";
}

int ts_measure_status_parse(const char *s, ts_measure_status *out) {
  for (unsigned i = 0; i < sizeof status_names / sizeof status_names[0]; i++)
    if (s && !strcmp(s, status_names[i])) {
      *out = (ts_measure_status)i;
      return TS_OK;
    }
  return TS_EINVAL;
}

ts_measure_config ts_measure_config_default(void) {
  ts_measure_config c;
  memset(&c, 0, sizeof c);
  c.eval = ts_eval_config_default();
  c.timeout_ms = 10000;
  c.seed = 1;
  c.threads = 0;
  return c;
}

int ts_measure_config_check(const ts_measure_config *c, ts_error *err) {
  if (c->eval.number < 1 || c->eval.number > TS_EVAL_MAX_NUMBER)
    return TS_ERR(err, TS_EINVAL, "measure config: number %d is not in [1, %d]",
                  c->eval.number, TS_EVAL_MAX_NUMBER);
  if (c->eval.repeat < 1 || c->eval.repeat > TS_MEASURE_MAX_REPEAT)
    return TS_ERR(err, TS_EINVAL, "measure config: repeat %d is not in [1, %d]",
                  c->eval.repeat, TS_MEASURE_MAX_REPEAT);
  if (c->eval.min_repeat_ms < 0 || c->eval.min_repeat_ms > 600000)
    return TS_ERR(err, TS_EINVAL,
                  "measure config: min_repeat_ms %d is not in [0, 600000]",
                  c->eval.min_repeat_ms);
  if (c->eval.warmup < 0 || c->eval.warmup > 1000)
    return TS_ERR(err, TS_EINVAL,
                  "measure config: warmup %d is not in [0, 1000]",
                  c->eval.warmup);
  if (c->timeout_ms < 1 || c->timeout_ms > 3600000)
    return TS_ERR(err, TS_EINVAL,
                  "measure config: timeout_ms %d is not in [1, 3600000]",
                  c->timeout_ms);
  if (c->threads < 0 || c->threads > TS_RT_MAX_THREADS)
    return TS_ERR(err, TS_EINVAL,
                  "measure config: threads %d is not in [0, %d]", c->threads,
                  TS_RT_MAX_THREADS);
  return TS_OK;
}

double ts_measure_result_mean(const ts_measure_result *r) {
  if (r->n_seconds <= 0) return 0;
  double s = 0;
  for (int i = 0; i < r->n_seconds; i++) s += r->seconds[i];
  return s / r->n_seconds;
}

ts_rpc_limits ts_rpc_limits_default(void) {
  ts_rpc_limits l;
  l.max_body_bytes = (int64_t)256 << 20;
  l.max_artifact_bytes = (int64_t)64 << 20;
  l.max_json_bytes = (int64_t)4 << 20;
  l.max_header_bytes = 16 << 10;
  l.max_candidates = 1024;
  l.max_references = 64;
  l.max_connections = 64;
  l.max_connections_per_client = 8;
  l.request_deadline_ms = 30000;
  return l;
}

/* ---- small helpers ---- */

void result_set(ts_measure_result *r, ts_measure_status status, const char *fmt,
                ...) {
  memset(r, 0, sizeof *r);
  r->status = status;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->error, sizeof r->error, fmt, ap);
  va_end(ap);
}

bool secret_equal(const char *got, const char *want) {
  size_t n = strlen(want), m = strlen(got);
  unsigned char diff = (unsigned char)(n != m);
  /* Walk want's length whatever got's is, reading got cyclically. */
  for (size_t i = 0; i < n; i++)
    diff |= (unsigned char)(want[i] ^ (m ? got[i % m] : 0));
  return diff == 0;
}

bool ref_id_valid(const char *id) {
  size_t n = id ? strlen(id) : 0;
  if (n == 0 || n > REF_ID_MAX) return false;
  for (size_t i = 0; i < n; i++) {
    char c = id[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
      return false;
  }
  return true;
}

/* Whether s is a symbol name: [A-Za-z_.$][A-Za-z0-9_.$]*. */
static bool symbol_valid(const char *s) {
  if (!s[0] || (s[0] >= '0' && s[0] <= '9')) return false;
  for (const char *p = s; *p; p++) {
    char c = *p;
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '$'))
      return false;
  }
  return true;
}

/* ---- JSON field getters ---- */

cJSON *json_message(void) {
  cJSON *o = cJSON_CreateObject();
  if (o && !cJSON_AddNumberToObject(o, "protocol", TS_RPC_PROTOCOL)) {
    cJSON_Delete(o);
    return NULL;
  }
  return o;
}

int json_check_protocol(const cJSON *root, ts_error *err) {
  if (!cJSON_IsObject(root))
    return TS_ERR(err, TS_EINVAL, "the message is not a JSON object");
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "protocol");
  if (!p)
    return TS_ERR(err, TS_EINVAL,
                  "the message has no \"protocol\" field (this side speaks "
                  "protocol %d)",
                  TS_RPC_PROTOCOL);
  if (!cJSON_IsNumber(p) || p->valuedouble != TS_RPC_PROTOCOL) {
    if (cJSON_IsNumber(p))
      return TS_ERR(err, TS_EINVAL,
                    "protocol version mismatch: the message has %g, this side "
                    "speaks %d",
                    p->valuedouble, TS_RPC_PROTOCOL);
    return TS_ERR(err, TS_EINVAL,
                  "protocol version mismatch: \"protocol\" is not a number "
                  "(this side speaks %d)",
                  TS_RPC_PROTOCOL);
  }
  return TS_OK;
}

int json_get_int(const cJSON *obj, const char *where, const char *name,
                 int64_t lo, int64_t hi, bool required, int64_t *out,
                 ts_error *err) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
  if (!v) {
    if (required)
      return TS_ERR(err, TS_EINVAL, "%s: missing field \"%s\"", where, name);
    return TS_OK;
  }
  if (!cJSON_IsNumber(v))
    return TS_ERR(err, TS_EINVAL, "%s.%s: not a number", where, name);
  double d = v->valuedouble;
  if (!isfinite(d) || d != floor(d) || d < -(double)JSON_INT_MAX ||
      d > (double)JSON_INT_MAX)
    return TS_ERR(err, TS_EINVAL, "%s.%s: %g is not an integer", where, name,
                  d);
  int64_t x = (int64_t)d;
  if (x < lo || x > hi)
    return TS_ERR(err, TS_EINVAL,
                  "%s.%s: %" PRId64 " is not in [%" PRId64 ", %" PRId64 "]",
                  where, name, x, lo, hi);
  *out = x;
  return TS_OK;
}

int json_get_str(const cJSON *obj, const char *where, const char *name,
                 size_t max_len, bool required, const char **out,
                 ts_error *err) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
  if (!v) {
    if (required)
      return TS_ERR(err, TS_EINVAL, "%s: missing field \"%s\"", where, name);
    return TS_OK;
  }
  if (!cJSON_IsString(v) || !v->valuestring)
    return TS_ERR(err, TS_EINVAL, "%s.%s: not a string", where, name);
  if (strlen(v->valuestring) > max_len)
    return TS_ERR(err, TS_EINVAL, "%s.%s: longer than %zu characters", where,
                  name, max_len);
  *out = v->valuestring;
  return TS_OK;
}

int json_get_bool(const cJSON *obj, const char *where, const char *name,
                  bool required, bool *out, ts_error *err) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
  if (!v) {
    if (required)
      return TS_ERR(err, TS_EINVAL, "%s: missing field \"%s\"", where, name);
    return TS_OK;
  }
  if (!cJSON_IsBool(v))
    return TS_ERR(err, TS_EINVAL, "%s.%s: not true or false", where, name);
  *out = cJSON_IsTrue(v);
  return TS_OK;
}

/* Parses exactly len bytes of JSON (the error names the byte offset). */
static int parse_json(const char *text, size_t len, const char *what,
                      cJSON **out, ts_error *err) {
  const char *end = NULL;
  unsigned long failures = ts_alloc_failures();
  cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
  if (failures != ts_alloc_failures()) {
    cJSON_Delete(root);
    return TS_ERR(err, TS_ENOMEM, "%s: out of memory", what);
  }
  if (!root) {
    size_t at =
        end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
    return TS_ERR(err, TS_EINVAL, "%s: malformed JSON at byte %zu", what, at);
  }
  /* Only white space may follow the value. */
  for (const char *p = end; p && p < text + len; p++)
    if (*p != ' ' && *p != '\n' && *p != '\r' && *p != '\t') {
      cJSON_Delete(root);
      return TS_ERR(err, TS_EINVAL,
                    "%s: trailing data after the JSON value at "
                    "byte %zu",
                    what, (size_t)(p - text));
    }
  *out = root;
  return TS_OK;
}

int json_parse_message(const char *body, size_t len, const ts_rpc_limits *lim,
                       cJSON **root, ts_error *err) {
  *root = NULL;
  if (len == 0)
    return TS_ERR(err, TS_EINVAL,
                  "empty body: a JSON message is "
                  "required");
  if ((int64_t)len > lim->max_json_bytes)
    return TS_ERR(err, TS_ENOMEM,
                  "JSON body of %zu bytes exceeds the limit of "
                  "%" PRId64 " bytes",
                  len, lim->max_json_bytes);
  cJSON *r = NULL;
  int rc = parse_json(body, len, "body", &r, err);
  if (rc) return rc;
  if ((rc = json_check_protocol(r, err))) {
    cJSON_Delete(r);
    return rc;
  }
  *root = r;
  return TS_OK;
}

/* ---- the binary body ---- */

static int writer_add(wire_writer *w, const unsigned char *p, size_t n,
                      size_t *offset) {
  if (w->n == w->cap) {
    int cap = w->cap ? 2 * w->cap : 8;
    const unsigned char **b = realloc(w->blobs, sizeof *b * (size_t)cap);
    if (!b) return TS_ENOMEM;
    w->blobs = b;
    size_t *s = realloc(w->sizes, sizeof *s * (size_t)cap);
    if (!s) return TS_ENOMEM;
    w->sizes = s;
    w->cap = cap;
  }
  w->blobs[w->n] = p;
  w->sizes[w->n] = n;
  w->n++;
  *offset = w->payload_len;
  w->payload_len += n;
  return TS_OK;
}

void wire_writer_free(wire_writer *w) {
  free(w->blobs);
  free(w->sizes);
  memset(w, 0, sizeof *w);
}

static cJSON *dims_json(const unsigned v[3]) {
  int d[3] = {(int)v[0], (int)v[1], (int)v[2]};
  return cJSON_CreateIntArray(d, 3);
}

cJSON *artifact_to_json(const ts_artifact *a, wire_writer *w) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  cJSON_AddStringToObject(o, "kind",
                          a->kind == TS_ARTIFACT_PTX ? "ptx" : "cpu_object");
  cJSON_AddStringToObject(o, "entry", a->entry);
  cJSON *args = cJSON_AddArrayToObject(o, "args");
  for (int i = 0; args && i < a->n_args; i++) {
    const ts_artifact_arg *g = &a->args[i];
    char dt[32];
    cJSON *x = cJSON_CreateObject();
    if (!x) break;
    cJSON_AddItemToArray(args, x); /* (args is not NULL: cannot fail) */
    cJSON_AddStringToObject(x, "name", g->name);
    cJSON_AddStringToObject(x, "dtype", ts_dtype_str(g->dtype, dt));
    cJSON *shape = cJSON_AddArrayToObject(x, "shape");
    for (int d = 0; shape && d < g->ndim; d++)
      ts_json_add(shape, NULL, cJSON_CreateNumber((double)g->shape[d]));
    cJSON_AddBoolToObject(x, "output", g->is_output);
  }
  size_t off = 0;
  if (writer_add(w, a->bytes, a->n_bytes, &off)) {
    cJSON_Delete(o);
    return NULL;
  }
  cJSON *b = cJSON_AddObjectToObject(o, "bytes");
  if (b) {
    cJSON_AddNumberToObject(b, "offset", (double)off);
    cJSON_AddNumberToObject(b, "length", (double)a->n_bytes);
  }
  if (a->kind == TS_ARTIFACT_PTX) {
    cJSON *l = cJSON_AddObjectToObject(o, "launch");
    if (l) {
      ts_json_add(l, "grid", dims_json(a->grid));
      ts_json_add(l, "block", dims_json(a->block));
      cJSON_AddNumberToObject(l, "shared_bytes", a->shared_bytes);
    }
  }
  return o;
}

int wire_finish(wire_writer *w, const cJSON *head, unsigned char **out,
                size_t *out_len, ts_error *err) {
  *out = NULL;
  *out_len = 0;
  char *json = cJSON_PrintUnformatted(head);
  if (!json) {
    wire_writer_free(w);
    return TS_ERR(err, TS_ENOMEM, "out of memory printing a request");
  }
  size_t jn = strlen(json);
  if (jn > UINT32_MAX) {
    free(json);
    wire_writer_free(w);
    return TS_ERR(err, TS_ENOMEM, "request header of %zu bytes is too large",
                  jn);
  }
  size_t total = WIRE_PREFIX + jn + w->payload_len;
  unsigned char *buf = malloc(total ? total : 1);
  if (!buf) {
    free(json);
    wire_writer_free(w);
    return TS_ERR(err, TS_ENOMEM, "out of memory for a %zu-byte request",
                  total);
  }
  memcpy(buf, WIRE_MAGIC, 4);
  buf[4] = (unsigned char)(jn >> 24);
  buf[5] = (unsigned char)(jn >> 16);
  buf[6] = (unsigned char)(jn >> 8);
  buf[7] = (unsigned char)jn;
  memcpy(buf + WIRE_PREFIX, json, jn);
  size_t at = WIRE_PREFIX + jn;
  for (int i = 0; i < w->n; i++) {
    if (w->sizes[i]) memcpy(buf + at, w->blobs[i], w->sizes[i]);
    at += w->sizes[i];
  }
  free(json);
  wire_writer_free(w);
  *out = buf;
  *out_len = total;
  return TS_OK;
}

int wire_parse(const unsigned char *body, size_t len, const ts_rpc_limits *lim,
               cJSON **head, const unsigned char **payload, size_t *payload_len,
               ts_error *err) {
  *head = NULL;
  if (len < WIRE_PREFIX)
    return TS_ERR(err, TS_EINVAL,
                  "body of %zu bytes is shorter than the "
                  "%d-byte binary prefix (magic \"" WIRE_MAGIC "\" + header "
                  "length)",
                  len, WIRE_PREFIX);
  if (memcmp(body, WIRE_MAGIC, 4) != 0)
    return TS_ERR(err, TS_EINVAL,
                  "body does not start with the magic \"" WIRE_MAGIC
                  "\" of a binary message (content type " WIRE_CONTENT_TYPE
                  ")");
  uint32_t jn = (uint32_t)body[4] << 24 | (uint32_t)body[5] << 16 |
                (uint32_t)body[6] << 8 | (uint32_t)body[7];
  if ((int64_t)jn > lim->max_json_bytes)
    return TS_ERR(err, TS_ENOMEM,
                  "JSON header length %" PRIu32 " exceeds the "
                  "limit of %" PRId64 " bytes",
                  jn, lim->max_json_bytes);
  if (jn > len - WIRE_PREFIX)
    return TS_ERR(err, TS_EINVAL,
                  "JSON header length %" PRIu32 " runs past the "
                  "end of the %zu-byte body",
                  jn, len);
  cJSON *root = NULL;
  int rc = parse_json((const char *)body + WIRE_PREFIX, jn, "JSON header",
                      &root, err);
  if (rc) return rc;
  if ((rc = json_check_protocol(root, err))) {
    cJSON_Delete(root);
    return rc;
  }
  *head = root;
  *payload = body + WIRE_PREFIX + jn;
  *payload_len = len - WIRE_PREFIX - jn;
  return TS_OK;
}

/* ---- artifacts ---- */

static int launch_dims(const cJSON *l, const char *where, const char *name,
                       unsigned out[3], ts_error *err) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(l, name);
  if (!a) return TS_OK;
  if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != 3)
    return TS_ERR(err, TS_EINVAL, "%s.launch.%s: not an array of 3 integers",
                  where, name);
  for (int i = 0; i < 3; i++) {
    const cJSON *v = cJSON_GetArrayItem(a, i);
    double d = cJSON_IsNumber(v) ? v->valuedouble : -1;
    if (!(d >= 1 && d <= 2147483647.0) || d != floor(d))
      return TS_ERR(err, TS_EINVAL,
                    "%s.launch.%s[%d]: not an integer in [1, "
                    "2147483647]",
                    where, name, i);
    out[i] = (unsigned)d;
  }
  return TS_OK;
}

/* Decodes args[i] into g. */
static int arg_from_json(const cJSON *x, const char *where, int i,
                         ts_artifact_arg *g, ts_error *err) {
  char w[96];
  snprintf(w, sizeof w, "%s.args[%d]", where, i);
  if (!cJSON_IsObject(x)) return TS_ERR(err, TS_EINVAL, "%s: not an object", w);
  const char *name = "", *dtype = NULL;
  int rc = json_get_str(x, w, "name", sizeof g->name - 1, false, &name, err);
  if (!rc) rc = json_get_str(x, w, "dtype", 31, true, &dtype, err);
  if (rc) return rc;
  for (const char *p = name; *p; p++)
    if (*p < 0x21 || *p > 0x7e)
      return TS_ERR(err, TS_EINVAL, "%s.name: not printable ASCII", w);
  snprintf(g->name, sizeof g->name, "%s", name);
  if (ts_dtype_parse(dtype, strlen(dtype), &g->dtype) != TS_OK ||
      g->dtype.lanes != 1 || ts_dtype_is_handle(g->dtype) ||
      !ts_dtype_is_valid(g->dtype))
    return TS_ERR(err, TS_EINVAL, "%s.dtype: '%s' is not a scalar data type", w,
                  dtype);
  const cJSON *shape = cJSON_GetObjectItemCaseSensitive(x, "shape");
  if (!cJSON_IsArray(shape))
    return TS_ERR(err, TS_EINVAL, "%s.shape: missing or not an array", w);
  int nd = cJSON_GetArraySize(shape);
  int max_nd = TS_MAX_DIMS < TS_RT_MAX_NDIM ? TS_MAX_DIMS : TS_RT_MAX_NDIM;
  if (nd > max_nd)
    return TS_ERR(err, TS_EINVAL, "%s.shape: %d dimensions (at most %d)", w, nd,
                  max_nd);
  g->ndim = nd;
  double elems = 1;
  for (int d = 0; d < nd; d++) {
    const cJSON *v = cJSON_GetArrayItem(shape, d);
    double x2 = cJSON_IsNumber(v) ? v->valuedouble : -1;
    if (!(x2 >= 0 && x2 <= (double)((int64_t)1 << 40)) || x2 != floor(x2))
      return TS_ERR(err, TS_EINVAL, "%s.shape[%d]: not an integer in [0, 2^40]",
                    w, d);
    g->shape[d] = (int64_t)x2;
    elems *= x2;
  }
  if (elems * (double)ts_dtype_elem_bytes(g->dtype) >
      (double)TS_RT_MAX_ARG_BYTES)
    return TS_ERR(err, TS_EINVAL,
                  "%s: %.0f elements exceed the %" PRId64
                  "-byte argument limit",
                  w, elems, (int64_t)TS_RT_MAX_ARG_BYTES);
  bool out = false;
  if ((rc = json_get_bool(x, w, "output", false, &out, err))) return rc;
  g->is_output = out;
  return TS_OK;
}

int artifact_from_json(const cJSON *j, const char *where,
                       const unsigned char *payload, size_t payload_len,
                       const ts_rpc_limits *lim, ts_artifact **out,
                       ts_error *err) {
  *out = NULL;
  if (!cJSON_IsObject(j))
    return TS_ERR(err, TS_EINVAL, "%s: not an object", where);
  const char *kind = NULL, *entry = NULL;
  int rc = json_get_str(j, where, "kind", 32, true, &kind, err);
  if (!rc) rc = json_get_str(j, where, "entry", 127, true, &entry, err);
  if (rc) return rc;
  ts_artifact_kind k;
  if (!strcmp(kind, "cpu_object"))
    k = TS_ARTIFACT_CPU_OBJECT;
  else if (!strcmp(kind, "ptx"))
    k = TS_ARTIFACT_PTX;
  else
    return TS_ERR(err, TS_EINVAL, "%s.kind: '%s' is not cpu_object or ptx",
                  where, kind);
  if (!symbol_valid(entry))
    return TS_ERR(err, TS_EINVAL, "%s.entry: '%s' is not a symbol name", where,
                  entry);
  const cJSON *args = cJSON_GetObjectItemCaseSensitive(j, "args");
  if (!cJSON_IsArray(args))
    return TS_ERR(err, TS_EINVAL, "%s.args: missing or not an array", where);
  int n_args = cJSON_GetArraySize(args);
  if (n_args > MAX_ARGS)
    return TS_ERR(err, TS_EINVAL, "%s.args: %d arguments (at most %d)", where,
                  n_args, MAX_ARGS);
  const cJSON *b = cJSON_GetObjectItemCaseSensitive(j, "bytes");
  if (!cJSON_IsObject(b))
    return TS_ERR(err, TS_EINVAL, "%s.bytes: missing or not an object", where);
  char bw[96];
  snprintf(bw, sizeof bw, "%s.bytes", where);
  int64_t off = 0, len = 0;
  if ((rc = json_get_int(b, bw, "offset", 0, JSON_INT_MAX, true, &off, err)) ||
      (rc = json_get_int(b, bw, "length", 0, JSON_INT_MAX, true, &len, err)))
    return rc;
  if (len > lim->max_artifact_bytes)
    return TS_ERR(err, TS_ENOMEM,
                  "%s: artifact of %" PRId64 " bytes exceeds "
                  "the limit of %" PRId64 " bytes",
                  where, len, lim->max_artifact_bytes);
  if (len == 0)
    return TS_ERR(err, TS_EINVAL, "%s.bytes: empty artifact", where);
  if ((uint64_t)off > payload_len ||
      (uint64_t)len > payload_len - (uint64_t)off)
    return TS_ERR(err, TS_EINVAL,
                  "%s.bytes: [%" PRId64 ", +%" PRId64 ") runs "
                  "past the %zu-byte payload",
                  where, off, len, payload_len);
  ts_artifact_arg *ga = calloc((size_t)(n_args ? n_args : 1), sizeof *ga);
  if (!ga) return TS_ERR(err, TS_ENOMEM, "out of memory");
  for (int i = 0; i < n_args; i++)
    if ((rc = arg_from_json(cJSON_GetArrayItem(args, i), where, i, &ga[i],
                            err))) {
      free(ga);
      return rc;
    }
  unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
  int64_t shared = 0;
  const cJSON *l = cJSON_GetObjectItemCaseSensitive(j, "launch");
  if (k == TS_ARTIFACT_PTX && l) {
    char lw[96];
    snprintf(lw, sizeof lw, "%s.launch", where);
    if (!cJSON_IsObject(l))
      rc = TS_ERR(err, TS_EINVAL, "%s: not an object", lw);
    if (!rc) rc = launch_dims(l, where, "grid", grid, err);
    if (!rc) rc = launch_dims(l, where, "block", block, err);
    if (!rc)
      rc = json_get_int(l, lw, "shared_bytes", 0, 1 << 24, false, &shared, err);
    if (rc) {
      free(ga);
      return rc;
    }
  }
  ts_artifact *a =
      ts_artifact_new(k, entry, ga, n_args, payload + off, (size_t)len);
  free(ga);
  if (!a) return TS_ERR(err, TS_ENOMEM, "out of memory for %s", where);
  memcpy(a->grid, grid, sizeof grid);
  memcpy(a->block, block, sizeof block);
  a->shared_bytes = (unsigned)shared;
  *out = a;
  return TS_OK;
}

/* ---- configuration and results ---- */

/* The settings that change what a measurement measures, in the order the
 * records' measurement context lists them. */
static cJSON *settings_json(const ts_measure_config *c) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  cJSON_AddNumberToObject(o, "number", c->eval.number);
  cJSON_AddNumberToObject(o, "repeat", c->eval.repeat);
  cJSON_AddNumberToObject(o, "min_repeat_ms", c->eval.min_repeat_ms);
  cJSON_AddNumberToObject(o, "warmup", c->eval.warmup);
  cJSON_AddBoolToObject(o, "flush_cache", c->eval.flush_cache);
  cJSON_AddNumberToObject(o, "threads", c->threads);
  cJSON_AddNumberToObject(o, "timeout_ms", c->timeout_ms);
  return o;
}

cJSON *config_to_json(const ts_measure_config *c) {
  cJSON *o = settings_json(c);
  if (!o) return NULL;
  /* Seeds beyond 2^53 do not survive a JSON number: send them as text. */
  if (c->seed <= (uint64_t)JSON_INT_MAX) {
    cJSON_AddNumberToObject(o, "seed", (double)c->seed);
  } else {
    char s[32];
    snprintf(s, sizeof s, "%" PRIu64, c->seed);
    cJSON_AddStringToObject(o, "seed", s);
  }
  return o;
}

char *ts_measure_context_json(const ts_measure_config *c, const char *cpus) {
  unsigned long failures = ts_alloc_failures();
  cJSON *o = settings_json(c);
  if (!o) return NULL;
  if (cpus && cpus[0])
    cJSON_AddStringToObject(o, "cpus", cpus);
  else
    cJSON_AddNullToObject(o, "cpus");
  char *text = ts_json_print(o, failures, false);
  cJSON_Delete(o);
  return text;
}

int config_from_json(const cJSON *j, ts_measure_config *c, ts_error *err) {
  const char *w = "config";
  if (!cJSON_IsObject(j))
    return TS_ERR(err, TS_EINVAL, "config: not an object");
  int64_t number = c->eval.number, repeat = c->eval.repeat,
          min_ms = c->eval.min_repeat_ms, warmup = c->eval.warmup,
          timeout = c->timeout_ms, threads = c->threads;
  bool flush = c->eval.flush_cache;
  int rc;
  if ((rc = json_get_int(j, w, "number", 1, TS_EVAL_MAX_NUMBER, false, &number,
                         err)) ||
      (rc = json_get_int(j, w, "repeat", 1, TS_MEASURE_MAX_REPEAT, false,
                         &repeat, err)) ||
      (rc = json_get_int(j, w, "min_repeat_ms", 0, 600000, false, &min_ms,
                         err)) ||
      (rc = json_get_int(j, w, "warmup", 0, 1000, false, &warmup, err)) ||
      (rc = json_get_int(j, w, "timeout_ms", 1, 3600000, false, &timeout,
                         err)) ||
      (rc = json_get_int(j, w, "threads", 0, TS_RT_MAX_THREADS, false, &threads,
                         err)) ||
      (rc = json_get_bool(j, w, "flush_cache", false, &flush, err)))
    return rc;
  const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "seed");
  uint64_t seed = c->seed;
  if (cJSON_IsString(s)) {
    const char *p = s->valuestring;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(p, &end, 10);
    if (!p[0] || *end || errno || p[0] == '-' || p[0] == '+' || p[0] == ' ')
      return TS_ERR(err, TS_EINVAL,
                    "config.seed: '%.40s' is not a decimal "
                    "unsigned 64-bit integer",
                    p);
    seed = v;
  } else if (s) {
    int64_t v = 0;
    if ((rc = json_get_int(j, w, "seed", 0, JSON_INT_MAX, true, &v, err)))
      return rc;
    seed = (uint64_t)v;
  }
  c->eval.number = (int)number;
  c->eval.repeat = (int)repeat;
  c->eval.min_repeat_ms = (int)min_ms;
  c->eval.warmup = (int)warmup;
  c->eval.flush_cache = flush;
  c->timeout_ms = (int)timeout;
  c->threads = (int)threads;
  c->seed = seed;
  return TS_OK;
}

void measure_request_clear(measure_request *r) {
  for (int i = 0; r->artifacts && i < r->n; i++)
    ts_artifact_release(r->artifacts[i]);
  free(r->artifacts);
  free(r->ids);
  cJSON_Delete(r->head);
  memset(r, 0, sizeof *r);
}

int measure_request_decode(const unsigned char *body, size_t len,
                           const ts_rpc_limits *lim, measure_request *out,
                           ts_error *err) {
  memset(out, 0, sizeof *out);
  const unsigned char *payload = NULL;
  size_t plen = 0;
  int rc = wire_parse(body, len, lim, &out->head, &payload, &plen, err);
  if (rc) return rc;
  const cJSON *head = out->head;
  out->cfg = ts_measure_config_default();
  const cJSON *cj = cJSON_GetObjectItemCaseSensitive(head, "config");
  const cJSON *cands = cJSON_GetObjectItemCaseSensitive(head, "candidates");
  if (cj && (rc = config_from_json(cj, &out->cfg, err))) goto bad;
  if ((rc = json_get_str(head, "request", "reference", REF_ID_MAX, false,
                         &out->reference, err)))
    goto bad;
  if (out->reference && !ref_id_valid(out->reference)) {
    rc = TS_ERR(err, TS_EINVAL, "request.reference: bad reference id");
    goto bad;
  }
  if (!cJSON_IsArray(cands)) {
    rc = TS_ERR(err, TS_EINVAL, "request: missing \"candidates\" array");
    goto bad;
  }
  int n = cJSON_GetArraySize(cands);
  if (n < 1) {
    rc = TS_ERR(err, TS_EINVAL, "request: \"candidates\" is empty");
    goto bad;
  }
  if (n > lim->max_candidates) {
    rc = TS_ERR(err, TS_ENOMEM,
                "request: %d candidates exceed the limit of %d "
                "per request",
                n, lim->max_candidates);
    goto bad;
  }
  out->artifacts = calloc((size_t)n, sizeof *out->artifacts);
  out->ids = calloc((size_t)n, sizeof *out->ids);
  if (!out->artifacts || !out->ids) {
    rc = TS_ERR(err, TS_ENOMEM, "out of memory for %d candidates", n);
    goto bad;
  }
  out->n = n;
  for (int i = 0; i < n; i++) {
    const cJSON *c = cJSON_GetArrayItem(cands, i);
    char where[48];
    snprintf(where, sizeof where, "candidates[%d]", i);
    if ((rc = json_get_int(c, where, "id", 0, (int64_t)1 << 53, true,
                           &out->ids[i], err)))
      goto bad;
    for (int j = 0; j < i; j++)
      if (out->ids[j] == out->ids[i]) {
        rc = TS_ERR(err, TS_EINVAL, "%s.id: %" PRId64 " repeats candidates[%d]",
                    where, out->ids[i], j);
        goto bad;
      }
    if ((rc = artifact_from_json(
             cJSON_GetObjectItemCaseSensitive(c, "artifact"), where, payload,
             plen, lim, &out->artifacts[i], err)))
      goto bad;
  }
  return TS_OK;
bad:
  measure_request_clear(out);
  return rc;
}

cJSON *result_to_json(const ts_measure_result *r, int64_t id) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  cJSON_AddNumberToObject(o, "id", (double)id);
  cJSON_AddStringToObject(o, "status", ts_measure_status_name(r->status));
  /* Bounded whatever the result holds: it may come from a broken child. */
  int n = r->n_seconds < 0                       ? 0
          : r->n_seconds > TS_MEASURE_MAX_REPEAT ? TS_MEASURE_MAX_REPEAT
                                                 : r->n_seconds;
  char error[TS_MEASURE_ERROR_MAX];
  snprintf(error, sizeof error, "%.*s", (int)sizeof r->error - 1, r->error);
  cJSON *s = cJSON_AddArrayToObject(o, "seconds");
  for (int i = 0; s && i < n; i++)
    ts_json_add(s, NULL, cJSON_CreateNumber(r->seconds[i]));
  cJSON_AddNumberToObject(o, "number", r->number);
  cJSON_AddNumberToObject(o, "run_ms", r->run_ms);
  cJSON_AddNumberToObject(o, "started_at", r->started_at);
  cJSON_AddNumberToObject(o, "finished_at", r->finished_at);
  cJSON_AddStringToObject(o, "error", error);
  /* optional: runners of older versions ignore it */
  char cpus[TS_MEASURE_CPUS_MAX];
  snprintf(cpus, sizeof cpus, "%.*s", (int)sizeof r->cpus - 1, r->cpus);
  if (cpus[0] && cpus_valid(cpus)) cJSON_AddStringToObject(o, "cpus", cpus);
  return o;
}

bool cpus_valid(const char *s) {
  return s[0] && strspn(s, "0123456789,-") == strlen(s);
}

/* A finite number field (missing: 0). */
static int get_double(const cJSON *o, const char *name, double *out,
                      ts_error *err) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
  if (!v) return TS_OK;
  if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
    return TS_ERR(err, TS_EINVAL, "result.%s: not a finite number", name);
  *out = v->valuedouble;
  return TS_OK;
}

int result_from_json(const cJSON *j, ts_measure_result *r, int64_t *id,
                     ts_error *err) {
  memset(r, 0, sizeof *r);
  if (!cJSON_IsObject(j))
    return TS_ERR(err, TS_EINVAL, "result: not an object");
  const char *status = NULL, *error = "", *cpus = "";
  int64_t number = 0;
  int rc;
  if ((rc = json_get_int(j, "result", "id", 0, JSON_INT_MAX, true, id, err)) ||
      (rc = json_get_str(j, "result", "status", 32, true, &status, err)) ||
      (rc = json_get_str(j, "result", "error", 1 << 20, false, &error, err)) ||
      (rc = json_get_int(j, "result", "number", 0, TS_EVAL_MAX_NUMBER, false,
                         &number, err)) ||
      (rc = json_get_str(j, "result", "cpus", TS_MEASURE_CPUS_MAX - 1, false,
                         &cpus, err)))
    return rc;
  if (cpus[0] && !cpus_valid(cpus))
    return TS_ERR(err, TS_EINVAL,
                  "result.cpus: not a CPU list (\"0-3\", \"0,2-3\")");
  if (ts_measure_status_parse(status, &r->status) ||
      r->status == TS_MEASURE_WORKER_LOST)
    return TS_ERR(err, TS_EINVAL, "result.status: '%s' is not a worker status",
                  status);
  const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "seconds");
  if (s) {
    if (!cJSON_IsArray(s) || cJSON_GetArraySize(s) > TS_MEASURE_MAX_REPEAT)
      return TS_ERR(err, TS_EINVAL,
                    "result.seconds: not an array of at most "
                    "%d numbers",
                    TS_MEASURE_MAX_REPEAT);
    int n = cJSON_GetArraySize(s);
    for (int i = 0; i < n; i++) {
      const cJSON *v = cJSON_GetArrayItem(s, i);
      if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0)
        return TS_ERR(err, TS_EINVAL,
                      "result.seconds[%d]: not a non-negative "
                      "number",
                      i);
      r->seconds[i] = v->valuedouble;
    }
    r->n_seconds = n;
  }
  if (r->status == TS_MEASURE_OK && r->n_seconds == 0)
    return TS_ERR(err, TS_EINVAL, "result: status ok without seconds");
  if ((rc = get_double(j, "run_ms", &r->run_ms, err)) ||
      (rc = get_double(j, "started_at", &r->started_at, err)) ||
      (rc = get_double(j, "finished_at", &r->finished_at, err)))
    return rc;
  r->number = (int)number;
  snprintf(r->error, sizeof r->error, "%s", error);
  snprintf(r->cpus, sizeof r->cpus, "%s", cpus);
  return TS_OK;
}
