/*
 * candidate.c — candidates: a design trace replayed on the unscheduled
 * workload and postprocessed, with the structural hash of the result (what
 * deduplication compares); fresh samples of a design space; and the record
 * form stored in the database — the full trace with the index where the
 * postprocessing starts, so a stored record can be continued (mutated)
 * from its design part.
 */
#include "tuner/internal.h"
#include "tir/alloc.h"

#include <cjson/cJSON.h>
#include <string.h>

void ts_candidate_clear(ts_candidate *c) {
  if (!c) return;
  ts_trace_free(c->design);
  ts_sched_destroy(c->sched);
  memset(c, 0, sizeof *c);
  c->space = -1;
}

int ts_candidate_make(const ts_trace *design, const ts_func *f,
                      const ts_target *t, uint64_t seed, ts_candidate *out,
                      ts_error *err) {
  memset(out, 0, sizeof *out);
  out->space = -1;
  ts_sched *s = NULL;
  int rc = ts_trace_apply(design, f, seed, &s, err);
  if (rc) return rc;
  ts_trace *d = ts_trace_copy(ts_sched_trace(s));
  if (!d) {
    ts_sched_destroy(s);
    return TS_ERR(err, TS_ENOMEM, "candidate: out of memory");
  }
  if ((rc = ts_postproc_apply(s, t, err))) {
    ts_trace_free(d);
    ts_sched_destroy(s);
    return rc;
  }
  out->design = d;
  out->sched = s;
  out->hash = ts_func_hash(ts_sched_func(s));
  return TS_OK;
}

int ts_candidate_sample(const ts_design_space *space, int space_index,
                        const ts_func *f, const ts_target *t, uint64_t seed,
                        ts_candidate *out, ts_error *err) {
  ts_trace *fresh = trace_without_decisions(space->trace);
  if (!fresh) {
    memset(out, 0, sizeof *out);
    return TS_ERR(err, TS_ENOMEM, "candidate: out of memory");
  }
  int rc = ts_candidate_make(fresh, f, t, seed, out, err);
  ts_trace_free(fresh);
  if (!rc) out->space = space_index;
  return rc;
}

char *ts_candidate_record_json(const ts_candidate *c) {
  unsigned long failures = ts_alloc_failures();
  ts_trace *full = ts_trace_simplify(ts_sched_trace(c->sched));
  char *text = full ? ts_trace_to_json(full) : NULL;
  ts_trace_free(full);
  if (!text) return NULL;
  cJSON *j = cJSON_Parse(text);
  free(text);
  if (!j) return NULL;
  cJSON_AddNumberToObject(j, "postproc_from", ts_trace_n_insts(c->design));
  char *out = ts_json_print(j, failures, false); /* NULL: a field was lost */
  cJSON_Delete(j);
  return out;
}

int ts_record_traces(const char *json, ts_trace **full, ts_trace **design,
                     ts_error *err) {
  if (full) *full = NULL;
  if (design) *design = NULL;
  ts_trace *f = NULL;
  int rc = ts_trace_from_json(json, strlen(json), &f, err);
  if (rc) return rc;
  if (design) {
    cJSON *j = cJSON_Parse(json);
    cJSON *from =
        j ? cJSON_GetObjectItemCaseSensitive(j, "postproc_from") : NULL;
    if (!from || !cJSON_IsNumber(from)) {
      *design = ts_trace_copy(f);
    } else {
      /* the design part: the first postproc_from instructions */
      int keep = from->valueint;
      cJSON *insts = cJSON_GetObjectItemCaseSensitive(j, "instructions");
      cJSON *decs = cJSON_GetObjectItemCaseSensitive(j, "decisions");
      while (cJSON_GetArraySize(insts) > keep)
        cJSON_DeleteItemFromArray(insts, cJSON_GetArraySize(insts) - 1);
      for (int i = cJSON_GetArraySize(decs) - 1; i >= 0; i--) {
        cJSON *idx = cJSON_GetArrayItem(cJSON_GetArrayItem(decs, i), 0);
        if (!cJSON_IsNumber(idx) || idx->valueint >= keep)
          cJSON_DeleteItemFromArray(decs, i);
      }
      cJSON_DeleteItemFromObject(j, "postproc_from");
      char *text = cJSON_PrintUnformatted(j);
      rc = text ? ts_trace_from_json(text, strlen(text), design, err)
                : TS_ERR(err, TS_ENOMEM, "record trace: out of memory");
      free(text);
    }
    cJSON_Delete(j);
    if (!rc && !*design)
      rc = TS_ERR(err, TS_ENOMEM, "record trace: out of memory");
  }
  if (rc || !full)
    ts_trace_free(f);
  else
    *full = f;
  if (rc && design) {
    ts_trace_free(*design);
    *design = NULL;
  }
  return rc;
}
