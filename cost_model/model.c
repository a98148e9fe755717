/*
 * model.c — the model interface's entry points (argument checks, then the
 * implementation's function), loading a saved model of either kind, and the
 * model-file container every implementation writes: a magic line, a
 * one-line JSON header (kind, features version, vector length, a hash of
 * the feature names, the implementation's fields, payload size), then the
 * payload bytes.
 */
#include "cost_model/internal.h"
#include "tir/alloc.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------------
 * Entry points
 * ------------------------------------------------------------------------ */

static int check_batch(const ts_cm_candidate *c, int n, const char *what,
                       ts_error *err) {
  if (n < 0)
    return TS_ERR(err, TS_EINVAL, "cost model %s: negative count %d", what, n);
  if (n > 0 && !c)
    return TS_ERR(err, TS_EINVAL, "cost model %s: no candidates", what);
  for (int i = 0; i < n; i++)
    if (!c[i].func && !c[i].features)
      return TS_ERR(err, TS_EINVAL,
                    "cost model %s: candidate %d has neither a function nor "
                    "features",
                    what, i);
  return TS_OK;
}

int ts_cm_predict(ts_cost_model *m, const ts_cm_candidate *candidates, int n,
                  double *scores, ts_error *err) {
  if (!m) return TS_ERR(err, TS_EINVAL, "cost model predict: no model");
  int rc = check_batch(candidates, n, "predict", err);
  if (rc) return rc;
  if (n == 0) return TS_OK;
  return m->ops->predict(m, candidates, n, scores, err);
}

int ts_cm_update(ts_cost_model *m, const ts_cm_candidate *candidates,
                 const ts_cm_result *results, int n, ts_error *err) {
  if (!m) return TS_ERR(err, TS_EINVAL, "cost model update: no model");
  int rc = check_batch(candidates, n, "update", err);
  if (rc) return rc;
  if (n > 0 && !results)
    return TS_ERR(err, TS_EINVAL, "cost model update: no results");
  for (int i = 0; i < n; i++)
    if (results[i].ok &&
        !(isfinite(results[i].seconds) && results[i].seconds > 0))
      return TS_ERR(err, TS_EINVAL,
                    "cost model update: result %d is ok with run time %g s "
                    "(must be finite and > 0)",
                    i, results[i].seconds);
  if (n == 0) return TS_OK;
  return m->ops->update(m, candidates, results, n, err);
}

int ts_cm_save(ts_cost_model *m, const char *path, ts_error *err) {
  if (!m || !path)
    return TS_ERR(err, TS_EINVAL, "cost model save: no model or path");
  return m->ops->save(m, path, err);
}

void ts_cm_info_get(const ts_cost_model *m, ts_cm_info *out) {
  memset(out, 0, sizeof *out);
  if (m) m->ops->info(m, out);
}

const char *ts_cm_kind(const ts_cost_model *m) { return m ? m->ops->kind : ""; }

void ts_cm_destroy(ts_cost_model *m) {
  if (m) m->ops->destroy(m);
}

int cm_candidate_features(const ts_cm_candidate *c, const ts_target *t,
                          ts_cm_features *tmp, const ts_cm_features **out,
                          ts_error *err) {
  *out = NULL;
  if (c->features) {
    *out = c->features;
    return TS_OK;
  }
  if (!c->func)
    return TS_ERR(err, TS_EINVAL,
                  "candidate has neither function nor features");
  int rc = ts_cm_extract(c->func, t, tmp, err);
  if (!rc) *out = tmp;
  return rc;
}

/* ------------------------------------------------------------------------
 * Model files
 * ------------------------------------------------------------------------ */

void cm_features_hash(char out[17]) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int i = 0; i < TS_CM_N_FEATURES; i++) {
    for (const char *p = ts_cm_feature_name(i); *p; p++) {
      h ^= (unsigned char)*p;
      h *= 0x100000001b3ull;
    }
    h ^= ',';
    h *= 0x100000001b3ull;
  }
  snprintf(out, 17, "%016llx", (unsigned long long)h);
}

int cm_file_write(const char *path, const char *kind, cJSON *header,
                  const void *payload, size_t n_payload, ts_error *err) {
  char hash[17];
  cm_features_hash(hash);
  cJSON *h = cJSON_CreateObject();
  if (!h) {
    cJSON_Delete(header);
    return TS_ERR(err, TS_ENOMEM, "cost model save: out of memory");
  }
  cJSON_AddNumberToObject(h, "format", CM_FILE_FORMAT);
  cJSON_AddStringToObject(h, "kind", kind);
  cJSON_AddNumberToObject(h, "features_version", TS_CM_FEATURES_VERSION);
  cJSON_AddNumberToObject(h, "n_features", TS_CM_N_FEATURES);
  cJSON_AddStringToObject(h, "features_hash", hash);
  cJSON_AddStringToObject(h, "tessera", TS_VERSION);
  for (cJSON *it = header ? header->child : NULL; it; it = it->next)
    ts_json_add(h, it->string, cJSON_Duplicate(it, true));
  cJSON_Delete(header);
  cJSON_AddNumberToObject(h, "payload_bytes", (double)n_payload);
  char *text = cJSON_PrintUnformatted(h);
  cJSON_Delete(h);
  if (!text) return TS_ERR(err, TS_ENOMEM, "cost model save: out of memory");
  size_t n_path = strlen(path);
  char *tmp = malloc(n_path + 16);
  if (!tmp) {
    free(text);
    return TS_ERR(err, TS_ENOMEM, "cost model save: out of memory");
  }
  snprintf(tmp, n_path + 16, "%s.tmp%ld", path, (long)getpid());
  int rc = TS_OK;
  FILE *fp = fopen(tmp, "wb");
  if (!fp) {
    rc = TS_ERR(err, TS_EIO, "cost model save: cannot write '%s': %s", path,
                strerror(errno));
  } else {
    bool ok =
        fprintf(fp, "%s\n%s\n", CM_FILE_MAGIC, text) > 0 &&
        (n_payload == 0 || fwrite(payload, 1, n_payload, fp) == n_payload);
    ok = fclose(fp) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
      rc = TS_ERR(err, TS_EIO, "cost model save: cannot write '%s': %s", path,
                  strerror(errno));
      remove(tmp);
    }
  }
  free(tmp);
  free(text);
  return rc;
}

void cm_file_free(cm_file *f) {
  if (!f) return;
  cJSON_Delete(f->header);
  free(f->data);
  memset(f, 0, sizeof *f);
}

int cm_header_number(const cm_file *f, const char *path, const char *key,
                     double *out, ts_error *err) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(f->header, key);
  if (!cJSON_IsNumber(v))
    return TS_ERR(err, TS_EINVAL,
                  "cost model '%s': header field \"%s\" is missing or not a "
                  "number",
                  path, key);
  *out = v->valuedouble;
  return TS_OK;
}

int cm_header_string(const cm_file *f, const char *path, const char *key,
                     const char **out, ts_error *err) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(f->header, key);
  if (!cJSON_IsString(v))
    return TS_ERR(err, TS_EINVAL,
                  "cost model '%s': header field \"%s\" is missing or not a "
                  "string",
                  path, key);
  *out = v->valuestring;
  return TS_OK;
}

int cm_file_read(const char *path, cm_file *out, ts_error *err) {
  memset(out, 0, sizeof *out);
  size_t n;
  char *bytes = NULL;
  int rc = ts_read_file(path, "cost model", CM_FILE_MAX_BYTES, &bytes, &n, err);
  out->data = (unsigned char *)bytes;
  if (rc) return rc;
  char *text = (char *)out->data;
  size_t magic = strlen(CM_FILE_MAGIC);
  char *nl1 = memchr(text, '\n', n);
  if (!nl1 || (size_t)(nl1 - text) != magic ||
      memcmp(text, CM_FILE_MAGIC, magic)) {
    cm_file_free(out);
    return TS_ERR(err, TS_EINVAL,
                  "cost model '%s': not a tessera cost model file (the first "
                  "line is not '%s')",
                  path, CM_FILE_MAGIC);
  }
  char *hdr = nl1 + 1;
  char *nl2 = memchr(hdr, '\n', n - (size_t)(hdr - text));
  if (!nl2) {
    cm_file_free(out);
    return TS_ERR(err, TS_EINVAL,
                  "cost model '%s': truncated (the header line has no end)",
                  path);
  }
  out->header = cJSON_ParseWithLength(hdr, (size_t)(nl2 - hdr));
  if (!cJSON_IsObject(out->header)) {
    cm_file_free(out);
    return TS_ERR(err, TS_EINVAL,
                  "cost model '%s': line 2: the header is not a JSON object",
                  path);
  }
  double format = 0, version = 0, n_features = 0, payload = 0;
  const char *hash = "", *kind = "";
  if ((rc = cm_header_number(out, path, "format", &format, err)) ||
      (rc = cm_header_string(out, path, "kind", &kind, err)) ||
      (rc = cm_header_number(out, path, "features_version", &version, err)) ||
      (rc = cm_header_number(out, path, "n_features", &n_features, err)) ||
      (rc = cm_header_string(out, path, "features_hash", &hash, err)) ||
      (rc = cm_header_number(out, path, "payload_bytes", &payload, err))) {
    cm_file_free(out);
    return rc;
  }
  if (format != CM_FILE_FORMAT) {
    cm_file_free(out);
    return TS_ERR(err, TS_EINVAL,
                  "cost model '%s': file format %g, this build reads format %d",
                  path, format, CM_FILE_FORMAT);
  }
  if (version != TS_CM_FEATURES_VERSION || n_features != TS_CM_N_FEATURES) {
    cm_file_free(out);
    return TS_ERR(err, TS_EINVAL,
                  "cost model '%s' was trained on features version %g (%g "
                  "entries per store), but this build extracts version %d "
                  "(%d entries): the model cannot be used; retrain it "
                  "(`tessera costmodel train`)",
                  path, version, n_features, TS_CM_FEATURES_VERSION,
                  TS_CM_N_FEATURES);
  }
  char mine[17];
  cm_features_hash(mine);
  if (strcmp(hash, mine) != 0) {
    rc = TS_ERR(err, TS_EINVAL,
                "cost model '%s': its feature list (hash %.16s) differs from "
                "this build's (hash %s) under the same version %d: retrain "
                "the model",
                path, hash, mine, TS_CM_FEATURES_VERSION);
    cm_file_free(out);
    return rc;
  }
  size_t have = n - (size_t)(nl2 + 1 - text);
  if (payload < 0 || payload != (double)have) {
    cm_file_free(out);
    return TS_ERR(err, TS_EINVAL,
                  "cost model '%s': truncated or padded (the header announces "
                  "%g payload bytes, the file holds %zu)",
                  path, payload, have);
  }
  out->kind = kind;
  out->payload = (const unsigned char *)nl2 + 1;
  out->n_payload = have;
  return TS_OK;
}

int ts_cm_load(const char *path, const ts_cm_xgb_options *o,
               ts_cost_model **out, ts_error *err) {
  *out = NULL;
  if (!path) return TS_ERR(err, TS_EINVAL, "cost model load: no path");
  cm_file f;
  int rc = cm_file_read(path, &f, err);
  if (rc) return rc;
  if (!strcmp(f.kind, "xgb"))
    rc = cm_xgb_load(&f, path, o, out, err);
  else if (!strcmp(f.kind, "random"))
    rc = cm_random_load(&f, path, out, err);
  else
    rc = TS_ERR(err, TS_EINVAL,
                "cost model '%s': unknown kind \"%s\" (expected xgb or "
                "random)",
                path, f.kind);
  cm_file_free(&f);
  return rc;
}

/* ------------------------------------------------------------------------
 * Objectives
 * ------------------------------------------------------------------------ */

const char *ts_cm_objective_name(ts_cm_objective o) {
  switch (o) {
  case TS_CM_OBJ_RANK: return "rank";
  case TS_CM_OBJ_SQUARED: return "squared";
  }
  return NULL;
}

int ts_cm_objective_parse(const char *name, ts_cm_objective *out) {
  if (!name) return TS_EINVAL;
  if (!strcmp(name, "rank")) {
    *out = TS_CM_OBJ_RANK;
    return TS_OK;
  }
  if (!strcmp(name, "squared")) {
    *out = TS_CM_OBJ_SQUARED;
    return TS_OK;
  }
  return TS_EINVAL;
}
