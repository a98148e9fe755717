/*
 * json.c — the JSON the database stores and moves: the built-in trace check
 * (one object with an integer "version"; the schedule module replaces it
 * with a full trace parser through ts_db_options), JSON-object checks for
 * job configurations and probe figures, the human rendering of a trace, and
 * the rule that lets export write a stored JSON text as a nested value while
 * keeping every stored byte (so export -> import -> export is exact).
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int db_json_parse(const char *text, size_t len, cJSON **out,
                  size_t *error_offset) {
  *out = NULL;
  if (error_offset) *error_offset = 0;
  unsigned long failures = ts_alloc_failures();
  /* cJSON wants the terminating NUL inside the length to insist that
   * nothing follows the value. */
  char *copy = NULL;
  const char *p = text;
  if (text[len] != 0) {
    if (!(copy = ts_strndup(text, len))) return TS_ENOMEM;
    p = copy;
  }
  const char *end = NULL;
  cJSON *v = cJSON_ParseWithLengthOpts(p, len + 1, &end, 1);
  free(copy);
  /* cJSON allocates through ts_malloc (tir/alloc.h): a failure there is
   * out of memory, not a syntax error */
  if (ts_alloc_failures() != failures) {
    cJSON_Delete(v);
    return TS_ENOMEM;
  }
  if (!v) {
    if (error_offset) *error_offset = end ? (size_t)(end - p) : 0;
    return TS_EINVAL;
  }
  *out = v;
  return TS_OK;
}

int db_check_json_object(const char *text, const char *what, ts_error *err) {
  size_t off = 0;
  cJSON *v;
  int rc = db_json_parse(text, strlen(text), &v, &off);
  if (rc == TS_ENOMEM) return TS_ERR(err, TS_ENOMEM, "%s: out of memory", what);
  if (rc)
    return TS_ERR(err, TS_EINVAL,
                  "%s is not valid JSON (syntax error at byte %zu)", what, off);
  bool object = cJSON_IsObject(v);
  cJSON_Delete(v);
  if (!object) return TS_ERR(err, TS_EINVAL, "%s is not a JSON object", what);
  return TS_OK;
}

int ts_db_check_trace_json(void *ctx, const char *json, size_t len,
                           ts_error *err) {
  (void)ctx;
  if (!json) return TS_ERR(err, TS_EINVAL, "trace JSON is missing");
  /* the caller's buffer may end at json + len: parse a terminated copy */
  char *text = ts_malloc(len + 1);
  if (!text) return TS_ERR(err, TS_ENOMEM, "trace JSON: out of memory");
  memcpy(text, json, len);
  text[len] = 0;
  size_t off = 0;
  cJSON *v;
  int prc = db_json_parse(text, len, &v, &off);
  free(text);
  if (prc == TS_ENOMEM)
    return TS_ERR(err, TS_ENOMEM, "trace JSON: out of memory");
  if (prc)
    return TS_ERR(err, TS_EINVAL,
                  "trace JSON is corrupt: syntax error at byte %zu of %zu", off,
                  len);
  int rc = TS_OK;
  const cJSON *version = cJSON_GetObjectItemCaseSensitive(v, "version");
  if (!cJSON_IsObject(v)) {
    rc = TS_ERR(err, TS_EINVAL, "trace JSON is not an object");
  } else if (!version) {
    rc = TS_ERR(err, TS_EINVAL, "trace JSON has no \"version\" field");
  } else if (!cJSON_IsNumber(version) || version->valuedouble < 1 ||
             version->valuedouble > 1e9 ||
             version->valuedouble != floor(version->valuedouble)) {
    rc = TS_ERR(err, TS_EINVAL,
                "trace JSON field \"version\" is not a positive integer");
  }
  cJSON_Delete(v);
  return rc;
}

/* cJSON indents with tabs and writes a tab after each colon; people read
 * two spaces and one space. */
static char *untab(const char *s) {
  size_t tabs = 0;
  for (const char *p = s; *p; p++) tabs += *p == '\t';
  char *out = ts_malloc(strlen(s) + tabs + 1), *o = out;
  if (!out) return NULL;
  for (const char *p = s; *p; p++) {
    if (*p != '\t') {
      *o++ = *p;
    } else if (p > s && p[-1] == ':') {
      *o++ = ' ';
    } else {
      *o++ = ' ';
      *o++ = ' ';
    }
  }
  *o = 0;
  return out;
}

char *ts_db_format_trace(ts_db *db, const char *json) {
  db_begin_call(db);
  if (!json) {
    TS_ERR(&db->err, TS_EINVAL, "trace JSON is missing");
    return NULL;
  }
  if (db->opts.print_trace) {
    char *s = db->opts.print_trace(db->opts.trace_ctx, json, &db->err);
    if (!s && !db->err.code)
      TS_ERR(&db->err, TS_EINVAL, "the trace printer failed");
    return s;
  }
  size_t off = 0;
  cJSON *v;
  int rc = db_json_parse(json, strlen(json), &v, &off);
  if (rc == TS_ENOMEM) {
    db_nomem(db, "printing a trace");
    return NULL;
  }
  if (rc) {
    TS_ERR(&db->err, TS_EINVAL,
           "trace JSON is corrupt: syntax error at byte %zu of %zu", off,
           strlen(json));
    return NULL;
  }
  char *pretty = cJSON_Print(v);
  cJSON_Delete(v);
  char *out = pretty ? untab(pretty) : NULL;
  cJSON_free(pretty);
  if (!out) db_nomem(db, "printing a trace");
  return out;
}

void db_json_add_stored(cJSON *obj, const char *key, const char *text) {
  if (!text) {
    cJSON_AddNullToObject(obj, key);
    return;
  }
  cJSON *v;
  db_json_parse(text, strlen(text), &v, NULL);
  char *compact = v ? cJSON_PrintUnformatted(v) : NULL;
  if (compact && !strcmp(compact, text))
    ts_json_add(obj, key, v);
  else {
    cJSON_Delete(v);
    cJSON_AddStringToObject(obj, key, text);
  }
  cJSON_free(compact);
}

char *db_json_stored_text(const cJSON *v) {
  if (cJSON_IsString(v)) return ts_strdup(v->valuestring);
  char *s = cJSON_PrintUnformatted(v);
  if (!s) return NULL;
  char *out = ts_strdup(s);
  cJSON_free(s);
  return out;
}
