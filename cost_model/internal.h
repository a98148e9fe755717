/*
 * internal.h — what the files of cost_model/ share: the model-file container
 * (a magic line, a one-line JSON header, the implementation's payload), the
 * loaders of each implementation, and the helper that gets a candidate's
 * features (given or extracted).
 */
#ifndef TESSERA_COST_MODEL_INTERNAL_H
#define TESSERA_COST_MODEL_INTERNAL_H

#include "cost_model/cost_model.h"

#include <cjson/cJSON.h>

/* The first line of every model file. */
#define CM_FILE_MAGIC "tessera-cost-model"
/* The container's own version ("format" in the header). */
#define CM_FILE_FORMAT 1
/* The largest model file read. */
#define CM_FILE_MAX_BYTES ((size_t)1 << 30)

/* A model file read into memory and checked: magic, format, features
 * version, vector length and feature-list hash all match this build. */
typedef struct cm_file {
  unsigned char *data;          /* the whole file (malloc'd) */
  cJSON *header;                /* the parsed header (owned) */
  const unsigned char *payload; /* into data */
  size_t n_payload;
  const char *kind; /* the header's "kind" (owned by header) */
} cm_file;

/* Reads and checks `path`; errors are TS_EIO (cannot read) or TS_EINVAL
 * (not a model, truncated, other features version or length) naming the
 * file. On failure *out is zeroed. Free with cm_file_free. */
int cm_file_read(const char *path, cm_file *out, ts_error *err);
void cm_file_free(cm_file *f);
/* Writes a model file: `header` (the implementation's fields; the common
 * ones — magic, format, kind, features version, length and hash, payload
 * size — are added here) then the payload. Written to PATH.tmp and renamed.
 * Takes ownership of header. */
int cm_file_write(const char *path, const char *kind, cJSON *header,
                  const void *payload, size_t n_payload, ts_error *err);
/* A hash of the feature names in order (16 hex digits): catches a changed
 * list whose version was not bumped. */
void cm_features_hash(char out[17]);

/* Header field readers: TS_EINVAL naming the field and the file when it is
 * absent or of the wrong type. */
int cm_header_number(const cm_file *f, const char *path, const char *key,
                     double *out, ts_error *err);
int cm_header_string(const cm_file *f, const char *path, const char *key,
                     const char **out, ts_error *err);

/* The implementations' loaders (the file is already checked). */
int cm_xgb_load(const cm_file *f, const char *path, const ts_cm_xgb_options *o,
                ts_cost_model **out, ts_error *err);
int cm_random_load(const cm_file *f, const char *path, ts_cost_model **out,
                   ts_error *err);

/* The features of a candidate: c->features when given, else extracted from
 * c->func into *tmp (which the caller clears). *out points at the one used.
 * Fails (with err) when there is neither or the extraction fails. */
int cm_candidate_features(const ts_cm_candidate *c, const ts_target *t,
                          ts_cm_features *tmp, const ts_cm_features **out,
                          ts_error *err);

/* Indices 0..n-1 sorted by group, in index order within a group (the
 * groups of the rank loss and of the metrics: one workload's candidates);
 * malloc'd, NULL when out of memory. (metrics.c) */
typedef struct cm_keyed {
  int64_t group, index;
} cm_keyed;
cm_keyed *cm_by_group(const int64_t *group, int64_t n);

#endif /* TESSERA_COST_MODEL_INTERNAL_H */
