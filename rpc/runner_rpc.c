/*
 * runner_rpc.c — the remote runner: measures a batch on workers reached
 * over HTTP (libcurl's multi interface, all transfers from the calling
 * thread), leased from a tracker or given as a fixed list.
 *
 * One measure call: lease workers of the key; give each idle usable worker
 * the next chunk of pending candidates (uploading the reference first when
 * that worker does not have this version of it); collect results as
 * replies arrive; renew the lease every so often to follow the tracker's
 * fair-share decisions. A worker that fails (connection refused or reset,
 * timeout, 5xx, a malformed reply) is not used again in this call, is
 * reported to the tracker, and its in-flight candidates go back to the
 * queue; a candidate dispatched max_attempts times without a result becomes
 * worker_lost. A chunk the worker rejects as malformed (400/413) is split
 * into single-candidate requests, and a single candidate that is still
 * rejected becomes build_error with the worker's reason. Every candidate
 * ends with exactly one result, stored at its own index.
 */
#include "rpc/internal.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* How often the lease is renewed while measuring. */
#define RENEW_MS 250
/* Reference versions remembered per worker. */
#define UPLOADS_KEPT 8
/* A worker answering 503 busy (over its connection limits) is asked again
 * this many times per call, this long apart, before it counts as failed. */
#define BUSY_RETRIES 50
#define BUSY_PAUSE_MS 100

enum { W_IDLE, W_UPLOADING, W_MEASURING };
enum { C_PENDING, C_INFLIGHT, C_DONE };

typedef struct uploaded {
  char id[REF_ID_MAX + 1];
  uint64_t version;
} uploaded;

typedef struct rworker {
  char address[300];
  char base[320];
  char worker_id[ID_MAX + 1];
  CURL *easy;
  uploaded up[UPLOADS_KEPT];
  int n_up;
  /* state of the current measure call */
  bool in_lease, failed;
  int state;
  int *inflight, n_inflight;
  unsigned char *body;
  size_t body_len;
  http_buf reply;
  int ref_retries;
  int busy_retries; /* 503 busy answers in this call */
} rworker;

typedef struct rref {
  char id[REF_ID_MAX + 1];
  ts_artifact *artifact;
  uint64_t version;
} rref;

typedef struct rpc_runner {
  ts_runner base;
  ts_rpc_runner_options o;
  char *tracker, *key, *token, *name;
  pthread_mutex_t mu;
  rref *refs;
  int n_refs;
  uint64_t versions;
  rworker **workers; /* each allocated once: transfers point at them */
  int n_workers, cap_workers;
  CURLM *multi;
  struct curl_slist *headers;
  http_client tc; /* tracker client */
  bool tc_open;
} rpc_runner;

/* The state of one measure call. */
typedef struct batch {
  rpc_runner *r;
  const ts_measure_config *cfg;
  const char *ref_id;
  const rref *ref;
  ts_artifact *const *cands;
  ts_measure_result *results;
  int n, done;
  int *state, *attempts;
  bool *solo;        /* dispatch alone (its chunk was rejected) */
  char (*lost)[256]; /* the last failure each candidate saw */
  char lease_id[ID_MAX + 1];
  char last_failure[256];
  int64_t last_progress_ms, last_renew_ms;
  long request_timeout_ms;
} batch;

ts_rpc_runner_options ts_rpc_runner_defaults(void) {
  ts_rpc_runner_options o;
  memset(&o, 0, sizeof o);
  o.max_workers = 16;
  o.chunk = 8;
  o.max_attempts = 3;
  o.connect_timeout_ms = 2000;
  o.lease_wait_ms = 30000;
  return o;
}

/* ---- workers ---- */

static rworker *worker_get(rpc_runner *r, const char *address) {
  for (int i = 0; i < r->n_workers; i++)
    if (!strcmp(r->workers[i]->address, address)) return r->workers[i];
  if (r->n_workers == r->cap_workers) {
    int cap = r->cap_workers ? 2 * r->cap_workers : 8;
    rworker **nw = realloc(r->workers, sizeof *nw * (size_t)cap);
    if (!nw) return NULL;
    r->workers = nw;
    r->cap_workers = cap;
  }
  rworker *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  if (http_base_url(address, w->base, sizeof w->base, NULL) ||
      !(w->easy = curl_easy_init())) {
    free(w);
    return NULL;
  }
  snprintf(w->address, sizeof w->address, "%s", address);
  r->workers[r->n_workers++] = w;
  return w;
}

static bool has_upload(const rworker *w, const rref *ref) {
  for (int i = 0; i < w->n_up; i++)
    if (!strcmp(w->up[i].id, ref->id) && w->up[i].version == ref->version)
      return true;
  return false;
}

static void forget_upload(rworker *w, const char *id) {
  for (int i = 0; i < w->n_up; i++)
    if (!strcmp(w->up[i].id, id)) w->up[i] = w->up[--w->n_up];
}

static void note_upload(rworker *w, const rref *ref) {
  forget_upload(w, ref->id);
  if (w->n_up == UPLOADS_KEPT) w->up[0] = w->up[--w->n_up];
  snprintf(w->up[w->n_up].id, sizeof w->up[w->n_up].id, "%s", ref->id);
  w->up[w->n_up++].version = ref->version;
}

/* ---- tracker calls ---- */

/* Applies a lease reply: the listed workers are ours, no other is. */
static void apply_lease(batch *b, const cJSON *reply) {
  rpc_runner *r = b->r;
  const char *id = NULL;
  if (json_get_str(reply, "lease", "lease_id", ID_MAX, true, &id, NULL) ==
      TS_OK)
    snprintf(b->lease_id, sizeof b->lease_id, "%s", id);
  for (int i = 0; i < r->n_workers; i++) r->workers[i]->in_lease = false;
  const cJSON *ws = cJSON_GetObjectItemCaseSensitive(reply, "workers");
  const cJSON *x;
  cJSON_ArrayForEach(x, ws) {
    const char *addr = NULL, *wid = "";
    if (json_get_str(x, "worker", "address", 299, true, &addr, NULL) ||
        json_get_str(x, "worker", "worker_id", ID_MAX, false, &wid, NULL))
      continue;
    char host[256];
    int port;
    if (ts_rpc_parse_hostport(addr, host, sizeof host, &port, NULL)) continue;
    rworker *w = worker_get(r, addr);
    if (!w) continue;
    w->in_lease = true;
    snprintf(w->worker_id, sizeof w->worker_id, "%s", wid);
  }
}

static int want_workers(const batch *b) {
  int chunk = b->r->o.chunk;
  int want = (b->n + chunk - 1) / chunk;
  if (want > b->r->o.max_workers) want = b->r->o.max_workers;
  return want < 1 ? 1 : want;
}

/* Acquires (no lease yet) or renews the lease; wait_ms lets the tracker
 * hold the reply until a worker is assigned. */
static void lease_update(batch *b, int wait_ms) {
  rpc_runner *r = b->r;
  cJSON *m = json_message();
  if (!m) return;
  const char *path;
  if (!b->lease_id[0]) {
    path = "/v1/leases";
    cJSON_AddStringToObject(m, "key", r->key);
    cJSON_AddNumberToObject(m, "want", want_workers(b));
    cJSON_AddNumberToObject(m, "priority", r->o.priority);
    cJSON_AddStringToObject(m, "runner", r->name);
  } else {
    path = "/v1/leases/renew";
    cJSON_AddStringToObject(m, "lease_id", b->lease_id);
  }
  cJSON_AddNumberToObject(m, "wait_ms", wait_ms);
  long status = 0;
  cJSON *reply = NULL;
  ts_error err;
  ts_error_clear(&err);
  int rc = http_client_json(&r->tc, "POST", path, m, wait_ms + 5000, &status,
                            &reply, &err);
  cJSON_Delete(m);
  b->last_renew_ms = ts_now_ms();
  if (rc) {
    snprintf(b->last_failure, sizeof b->last_failure, "tracker %s: %.200s",
             r->tracker, err.msg);
  } else if (status == 200 && reply) {
    apply_lease(b, reply);
  } else if (status == 404 && b->lease_id[0]) {
    b->lease_id[0] = 0; /* expired (or the tracker restarted): acquire again */
    for (int i = 0; i < r->n_workers; i++) r->workers[i]->in_lease = false;
  } else {
    snprintf(b->last_failure, sizeof b->last_failure,
             "tracker %s: HTTP %ld: %s", r->tracker, status,
             reply ? json_error_text(reply) : "");
  }
  cJSON_Delete(reply);
}

static void lease_release(batch *b) {
  if (!b->lease_id[0]) return;
  cJSON *m = json_message();
  if (!m) return;
  cJSON_AddStringToObject(m, "lease_id", b->lease_id);
  long status;
  cJSON *reply = NULL;
  http_client_json(&b->r->tc, "POST", "/v1/leases/release", m, 5000, &status,
                   &reply, NULL);
  cJSON_Delete(m);
  cJSON_Delete(reply);
  b->lease_id[0] = 0;
}

static void report_worker(batch *b, rworker *w, const char *why) {
  if (!b->r->tracker || !w->worker_id[0]) return;
  cJSON *m = json_message();
  if (!m) return;
  cJSON_AddStringToObject(m, "worker_id", w->worker_id);
  cJSON_AddStringToObject(m, "error", why);
  long status;
  cJSON *reply = NULL;
  http_client_json(&b->r->tc, "POST", "/v1/workers/report", m, 5000, &status,
                   &reply, NULL);
  cJSON_Delete(m);
  cJSON_Delete(reply);
}

/* ---- requests ---- */

static void start_transfer(batch *b, rworker *w, const char *method,
                           const char *path) {
  rpc_runner *r = b->r;
  char url[400];
  snprintf(url, sizeof url, "%s%s", w->base, path);
  http_buf_reset(&w->reply);
  CURL *e = w->easy;
  curl_easy_reset(e);
  curl_easy_setopt(e, CURLOPT_URL, url);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http");
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->headers);
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, (const char *)w->body);
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)w->body_len);
  if (strcmp(method, "POST"))
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)r->o.connect_timeout_ms);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, b->request_timeout_ms);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, http_buf_write);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &w->reply);
  curl_easy_setopt(e, CURLOPT_PRIVATE, (void *)w);
  curl_multi_add_handle(r->multi, e);
}

/* Packs the reference upload for w. */
static int pack_reference(batch *b, rworker *w) {
  wire_writer ww = {0};
  cJSON *head = json_message();
  cJSON *a = head ? artifact_to_json(b->ref->artifact, &ww) : NULL;
  if (!a) {
    cJSON_Delete(head);
    wire_writer_free(&ww);
    return TS_ENOMEM;
  }
  ts_json_add(head, "artifact", a);
  free(w->body);
  w->body = NULL;
  int rc = wire_finish(&ww, head, &w->body, &w->body_len, NULL);
  cJSON_Delete(head);
  return rc;
}

/* Packs the measure request of w's in-flight candidates. */
static int pack_measure(batch *b, rworker *w) {
  wire_writer ww = {0};
  cJSON *head = json_message();
  if (!head) return TS_ENOMEM;
  ts_json_add(head, "config", config_to_json(b->cfg));
  if (b->ref_id) cJSON_AddStringToObject(head, "reference", b->ref_id);
  cJSON *arr = cJSON_AddArrayToObject(head, "candidates");
  for (int k = 0; arr && k < w->n_inflight; k++) {
    int i = w->inflight[k];
    cJSON *c = cJSON_CreateObject();
    cJSON *a = c ? artifact_to_json(b->cands[i], &ww) : NULL;
    if (!a) {
      cJSON_Delete(c);
      cJSON_Delete(head);
      wire_writer_free(&ww);
      return TS_ENOMEM;
    }
    cJSON_AddNumberToObject(c, "id", i);
    ts_json_add(c, "artifact", a);
    ts_json_add(arr, NULL, c);
  }
  free(w->body);
  w->body = NULL;
  int rc = wire_finish(&ww, head, &w->body, &w->body_len, NULL);
  cJSON_Delete(head);
  return rc;
}

static void finish(batch *b, int i, const ts_measure_result *res,
                   const char *worker) {
  b->results[i] = *res;
  b->results[i].attempts = b->attempts[i];
  snprintf(b->results[i].worker, sizeof b->results[i].worker, "%s", worker);
  b->state[i] = C_DONE;
  b->done++;
  b->last_progress_ms = ts_now_ms();
}

/* Sends w's chunk (the reference first when w lacks it). */
static void send_chunk(batch *b, rworker *w) {
  if (b->ref && !has_upload(w, b->ref)) {
    if (pack_reference(b, w) == TS_OK) {
      char path[100];
      snprintf(path, sizeof path, "/v1/reference/%s", b->ref->id);
      w->state = W_UPLOADING;
      start_transfer(b, w, "PUT", path);
      return;
    }
  } else if (pack_measure(b, w) == TS_OK) {
    w->state = W_MEASURING;
    start_transfer(b, w, "POST", "/v1/measure");
    return;
  }
  /* Out of memory packing: give the chunk back. */
  for (int k = 0; k < w->n_inflight; k++) {
    int i = w->inflight[k];
    ts_measure_result res;
    result_set(&res, TS_MEASURE_WORKER_LOST,
               "out of memory packing the request");
    finish(b, i, &res, "");
  }
  w->n_inflight = 0;
  w->state = W_IDLE;
}

/* Takes up to k pending candidates for w (one if a solo one is first). */
static void dispatch(batch *b, rworker *w, int k) {
  w->n_inflight = 0;
  for (int i = 0; i < b->n && w->n_inflight < k; i++) {
    if (b->state[i] != C_PENDING) continue;
    if (b->solo[i] && w->n_inflight > 0) continue;
    w->inflight[w->n_inflight++] = i;
    b->state[i] = C_INFLIGHT;
    b->attempts[i]++;
    if (b->solo[i]) break;
  }
  if (w->n_inflight) send_chunk(b, w);
}

/* w failed: its candidates go back to the queue (or are lost). */
static void worker_failed(batch *b, rworker *w, const char *why, bool report) {
  w->failed = true;
  w->state = W_IDLE;
  snprintf(b->last_failure, sizeof b->last_failure, "worker %.100s: %.140s",
           w->address, why);
  for (int k = 0; k < w->n_inflight; k++) {
    int i = w->inflight[k];
    snprintf(b->lost[i], sizeof b->lost[i], "worker %.100s: %.140s", w->address,
             why);
    if (b->attempts[i] >= b->r->o.max_attempts) {
      ts_measure_result res;
      result_set(&res, TS_MEASURE_WORKER_LOST,
                 "no worker measured it in %d "
                 "attempts; last: %s",
                 b->attempts[i], b->lost[i]);
      finish(b, i, &res, w->address);
    } else {
      b->state[i] = C_PENDING;
    }
  }
  w->n_inflight = 0;
  if (report) report_worker(b, w, why);
}

/* The worker rejected the request itself (4xx): isolate the candidates. */
static void chunk_rejected(batch *b, rworker *w, long status, const char *why) {
  for (int k = 0; k < w->n_inflight; k++) {
    int i = w->inflight[k];
    if (w->n_inflight == 1) {
      ts_measure_result res;
      result_set(&res, TS_MEASURE_BUILD_ERROR,
                 "rejected by worker %s (HTTP "
                 "%ld): %s",
                 w->address, status, why);
      finish(b, i, &res, w->address);
    } else {
      b->solo[i] = true;
      b->attempts[i]--; /* not the worker's fault: this dispatch is free */
      b->state[i] = C_PENDING;
    }
  }
  w->n_inflight = 0;
  w->state = W_IDLE;
}

/* Parses a measure reply; TS_OK when it has exactly the results sent. */
static int take_results(batch *b, rworker *w, const cJSON *reply, char *why,
                        size_t size) {
  const cJSON *arr = cJSON_GetObjectItemCaseSensitive(reply, "results");
  if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) != w->n_inflight) {
    snprintf(why, size, "malformed reply: expected %d results", w->n_inflight);
    return TS_EINVAL;
  }
  ts_measure_result *tmp = calloc((size_t)w->n_inflight, sizeof *tmp);
  if (!tmp) {
    snprintf(why, size, "out of memory");
    return TS_ENOMEM;
  }
  bool *seen = calloc((size_t)w->n_inflight, sizeof *seen);
  int rc = seen ? TS_OK : TS_ENOMEM;
  const cJSON *x;
  cJSON_ArrayForEach(x, arr) {
    if (rc) break;
    ts_measure_result res;
    int64_t id = -1;
    ts_error err;
    ts_error_clear(&err);
    if ((rc = result_from_json(x, &res, &id, &err))) {
      snprintf(why, size, "malformed reply: %.200s", err.msg);
      break;
    }
    int k = 0;
    while (k < w->n_inflight && w->inflight[k] != id) k++;
    if (k == w->n_inflight || seen[k]) {
      snprintf(why, size, "malformed reply: unexpected result id %" PRId64, id);
      rc = TS_EINVAL;
      break;
    }
    seen[k] = true;
    tmp[k] = res;
  }
  if (!rc)
    for (int k = 0; k < w->n_inflight; k++)
      finish(b, w->inflight[k], &tmp[k], w->address);
  free(tmp);
  free(seen);
  return rc;
}

/* Handles one finished transfer of worker w. */
static void on_done(batch *b, rworker *w, CURLcode cc) {
  long status = 0;
  curl_easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &status);
  curl_multi_remove_handle(b->r->multi, w->easy);
  if (cc != CURLE_OK) {
    char why[300];
    snprintf(why, sizeof why, "%s",
             w->reply.overflow ? "reply too large" : curl_easy_strerror(cc));
    worker_failed(b, w, why, true);
    return;
  }
  cJSON *reply = NULL;
  if (w->reply.len) {
    reply = cJSON_ParseWithLength((const char *)w->reply.data, w->reply.len);
    if (reply && json_check_protocol(reply, NULL)) {
      cJSON_Delete(reply);
      reply = NULL;
    }
  }
  char why[600];
  snprintf(why, sizeof why, "HTTP %ld%s%s", status, reply ? ": " : "",
           reply ? json_error_text(reply) : " (not a protocol 1 reply)");
  if (status == 200 && reply) {
    if (w->state == W_UPLOADING) {
      note_upload(w, b->ref);
      send_chunk(b, w);
    } else {
      char bad[300];
      if (take_results(b, w, reply, bad, sizeof bad) == TS_OK) {
        w->n_inflight = 0;
        w->state = W_IDLE;
      } else {
        worker_failed(b, w, bad, true);
      }
    }
  } else if (status == 404 && reply &&
             !strcmp(json_error_code(reply), "unknown_reference") &&
             w->ref_retries < 2 && b->ref) {
    /* The worker restarted or evicted the reference: upload it again. */
    w->ref_retries++;
    forget_upload(w, b->ref->id);
    send_chunk(b, w);
  } else if (status == 503 && reply &&
             !strcmp(json_error_code(reply), "busy") &&
             w->busy_retries < BUSY_RETRIES) {
    /* Over the worker's connection limits: not a failure, try again. */
    w->busy_retries++;
    struct timespec pause = {0, BUSY_PAUSE_MS * 1000000L};
    nanosleep(&pause, NULL);
    send_chunk(b, w);
  } else if ((status == 400 || status == 413) && reply &&
             strcmp(json_error_code(reply), "protocol_mismatch")) {
    chunk_rejected(b, w, status, json_error_text(reply));
  } else {
    /* 401 (our token) is our fault: do not have the worker evicted. */
    worker_failed(b, w, why, status != 401 && status != 400);
  }
  cJSON_Delete(reply);
}

static int usable_idle(batch *b) {
  int n = 0;
  for (int i = 0; i < b->r->n_workers; i++) {
    rworker *w = b->r->workers[i];
    if (w->in_lease && !w->failed && w->state == W_IDLE) n++;
  }
  return n;
}

static void lose_pending(batch *b, const char *why) {
  for (int i = 0; i < b->n; i++)
    if (b->state[i] == C_PENDING) {
      ts_measure_result res;
      const char *last = b->lost[i][0] ? b->lost[i] : b->last_failure;
      result_set(&res, TS_MEASURE_WORKER_LOST, "%s%s%s", why,
                 last[0] ? "; last failure: " : "", last);
      finish(b, i, &res, "");
    }
}

static void run_batch(batch *b) {
  rpc_runner *r = b->r;
  for (int i = 0; i < r->n_workers; i++) {
    rworker *w = r->workers[i];
    w->failed = false;
    w->state = W_IDLE;
    w->n_inflight = 0;
    w->ref_retries = 0;
    w->busy_retries = 0;
    w->in_lease = !r->tracker; /* direct mode: every listed worker */
  }
  b->last_progress_ms = ts_now_ms();
  if (r->tracker) lease_update(b, 1000);
  bool need_workers = false;
  while (b->done < b->n) {
    int64_t now = ts_now_ms();
    if (r->tracker &&
        (need_workers || !b->lease_id[0] || now - b->last_renew_ms >= RENEW_MS))
      lease_update(b, need_workers ? 500 : 0);
    need_workers = false;
    /* Hand out chunks: pending spread evenly over the idle workers. */
    int pending = 0, inflight = 0;
    for (int i = 0; i < b->n; i++) {
      pending += b->state[i] == C_PENDING;
      inflight += b->state[i] == C_INFLIGHT;
    }
    for (int i = 0; i < r->n_workers && pending > 0; i++) {
      rworker *w = r->workers[i];
      if (!w->in_lease || w->failed || w->state != W_IDLE) continue;
      int idle = usable_idle(b);
      int k = (pending + idle - 1) / idle;
      if (k > r->o.chunk) k = r->o.chunk;
      if (!w->inflight)
        w->inflight = malloc(sizeof *w->inflight * (size_t)r->o.chunk);
      if (!w->inflight) continue;
      dispatch(b, w, k);
      pending -= w->n_inflight;
      inflight += w->n_inflight;
    }
    if (inflight == 0 && pending > 0) {
      if (!r->tracker) {
        lose_pending(b, "every worker failed");
        break;
      }
      if (ts_now_ms() - b->last_progress_ms > r->o.lease_wait_ms) {
        char why[400];
        snprintf(why, sizeof why, "no usable worker of key '%s' for %d ms",
                 r->key, r->o.lease_wait_ms);
        lose_pending(b, why);
        break;
      }
      need_workers = true;
      continue;
    }
    int running = 0;
    curl_multi_perform(r->multi, &running);
    CURLMsg *msg;
    int left;
    bool any = false;
    while ((msg = curl_multi_info_read(r->multi, &left))) {
      if (msg->msg != CURLMSG_DONE) continue;
      rworker *w = NULL;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&w);
      CURLcode cc = msg->data.result;
      if (w) on_done(b, w, cc);
      any = true;
    }
    if (!any && running > 0) curl_multi_poll(r->multi, NULL, 0, 50, NULL);
  }
  if (r->tracker) lease_release(b);
}

/* ---- the runner interface ---- */

static int rpc_set_reference(ts_runner *rr, const char *id, ts_artifact *ref,
                             ts_error *err) {
  rpc_runner *r = (rpc_runner *)rr;
  pthread_mutex_lock(&r->mu);
  rref *e = NULL;
  for (int i = 0; i < r->n_refs; i++)
    if (!strcmp(r->refs[i].id, id)) e = &r->refs[i];
  if (!e) {
    rref *nr = realloc(r->refs, sizeof *nr * (size_t)(r->n_refs + 1));
    if (!nr) {
      pthread_mutex_unlock(&r->mu);
      return TS_ERR(err, TS_ENOMEM, "out of memory");
    }
    r->refs = nr;
    e = &r->refs[r->n_refs++];
    memset(e, 0, sizeof *e);
    snprintf(e->id, sizeof e->id, "%s", id);
  }
  if (e->artifact != ref) {
    ts_artifact_release(e->artifact);
    e->artifact = ts_artifact_retain(ref);
    e->version = ++r->versions;
  }
  pthread_mutex_unlock(&r->mu);
  return TS_OK;
}

static int rpc_measure(ts_runner *rr, const ts_measure_config *cfg,
                       const char *reference_id, ts_artifact *const *cands,
                       int n, ts_measure_result *results, ts_error *err) {
  rpc_runner *r = (rpc_runner *)rr;
  pthread_mutex_lock(&r->mu);
  batch b;
  memset(&b, 0, sizeof b);
  b.r = r;
  b.cfg = cfg;
  b.cands = cands;
  b.results = results;
  b.n = n;
  if (reference_id) {
    for (int i = 0; i < r->n_refs; i++)
      if (!strcmp(r->refs[i].id, reference_id)) b.ref = &r->refs[i];
    if (!b.ref) {
      pthread_mutex_unlock(&r->mu);
      return TS_ERR(err, TS_ENOTFOUND,
                    "measure: unknown reference '%s' "
                    "(register it with ts_runner_set_reference)",
                    reference_id);
    }
    b.ref_id = b.ref->id;
  }
  b.state = calloc((size_t)n, sizeof *b.state);
  b.attempts = calloc((size_t)n, sizeof *b.attempts);
  b.solo = calloc((size_t)n, sizeof *b.solo);
  b.lost = calloc((size_t)n, sizeof *b.lost);
  if (!b.state || !b.attempts || !b.solo || !b.lost) {
    free(b.state);
    free(b.attempts);
    free(b.solo);
    free(b.lost);
    pthread_mutex_unlock(&r->mu);
    return TS_ERR(err, TS_ENOMEM, "out of memory for %d candidates", n);
  }
  /* Generous: the chunk may queue behind another runner's on a worker. */
  double per = cfg->timeout_ms + 2000.0;
  double ref_ms = ts_measure_reference_limit_ms(cfg);
  b.request_timeout_ms =
      r->o.request_timeout_ms > 0
          ? r->o.request_timeout_ms
          : (long)fmin(2.0 * r->o.chunk * per + ref_ms + 10000,
                       24.0 * 3600 * 1000);
  for (int i = 0; i < n; i++)
    if (!cands[i]) {
      ts_measure_result res;
      result_set(&res, TS_MEASURE_BUILD_ERROR,
                 "no artifact (the candidate did "
                 "not build)");
      finish(&b, i, &res, "");
    }
  run_batch(&b);
  /* Every candidate has its result by construction; guard the invariant. */
  for (int i = 0; i < n; i++)
    if (b.state[i] != C_DONE)
      result_set(&results[i], TS_MEASURE_WORKER_LOST, "internal: not measured");
  free(b.state);
  free(b.attempts);
  free(b.solo);
  free(b.lost);
  pthread_mutex_unlock(&r->mu);
  return TS_OK;
}

static void rpc_destroy(ts_runner *rr) {
  rpc_runner *r = (rpc_runner *)rr;
  for (int i = 0; i < r->n_workers; i++) {
    rworker *w = r->workers[i];
    if (w->easy) curl_easy_cleanup(w->easy);
    free(w->inflight);
    free(w->body);
    free(w->reply.data);
    free(w);
  }
  free(r->workers);
  if (r->multi) curl_multi_cleanup(r->multi);
  curl_slist_free_all(r->headers);
  if (r->tc_open) http_client_close(&r->tc);
  for (int i = 0; i < r->n_refs; i++) ts_artifact_release(r->refs[i].artifact);
  free(r->refs);
  free(r->tracker);
  free(r->key);
  free(r->token);
  free(r->name);
  pthread_mutex_destroy(&r->mu);
  free(r);
}

static const ts_runner_ops rpc_ops = {
    "rpc",
    rpc_set_reference,
    rpc_measure,
    rpc_destroy,
};

int ts_runner_rpc_create(const ts_rpc_runner_options *opts, ts_runner **out,
                         ts_error *err) {
  *out = NULL;
  ts_rpc_runner_options o = opts ? *opts : ts_rpc_runner_defaults();
  char host[256];
  int port, rc;
  if (!o.tracker && o.n_workers <= 0)
    return TS_ERR(err, TS_EINVAL,
                  "rpc runner: give a tracker or worker "
                  "addresses");
  if (o.tracker &&
      (rc = ts_rpc_parse_hostport(o.tracker, host, sizeof host, &port, err)))
    return rc;
  if (o.tracker && (!o.key || !ref_id_valid(o.key)))
    return TS_ERR(err, TS_EINVAL,
                  "rpc runner: a device key (1 to %d "
                  "characters of [A-Za-z0-9._-]) is required with a tracker",
                  REF_ID_MAX);
  for (int i = 0; !o.tracker && i < o.n_workers; i++)
    if ((rc = ts_rpc_parse_hostport(o.workers[i], host, sizeof host, &port,
                                    err)))
      return rc;
  if (o.max_workers < 1 || o.max_workers > 4096 || o.chunk < 1 ||
      o.chunk > 1024 || o.max_attempts < 1 || o.max_attempts > 100 ||
      o.connect_timeout_ms < 1 || o.request_timeout_ms < 0 ||
      o.lease_wait_ms < 0)
    return TS_ERR(err, TS_EINVAL,
                  "rpc runner: an option is out of range "
                  "(max_workers 1..4096, chunk 1..1024, max_attempts 1..100, "
                  "positive timeouts)");
  http_global_init();
  rpc_runner *r = calloc(1, sizeof *r);
  if (!r) return TS_ERR(err, TS_ENOMEM, "out of memory");
  r->base.ops = &rpc_ops;
  pthread_mutex_init(&r->mu, NULL);
  r->o = o;
  r->tracker = o.tracker ? strdup(o.tracker) : NULL;
  r->key = o.key ? strdup(o.key) : NULL;
  r->token = o.token && *o.token ? strdup(o.token) : NULL;
  char name[128];
  if (o.name && *o.name)
    snprintf(name, sizeof name, "%s", o.name);
  else
    snprintf(name, sizeof name, "runner-%d", (int)getpid());
  r->name = strdup(name);
  r->multi = curl_multi_init();
  r->headers = http_headers(r->token, WIRE_CONTENT_TYPE);
  bool ok = r->name && r->multi && r->headers && (!o.tracker || r->tracker) &&
            (!o.key || r->key) && (!o.token || !*o.token || r->token);
  for (int i = 0; ok && !o.tracker && i < o.n_workers; i++)
    ok = worker_get(r, o.workers[i]) != NULL;
  if (ok && r->tracker) {
    rc = http_client_open(&r->tc, r->tracker, r->token, o.connect_timeout_ms,
                          err);
    if (rc) {
      rpc_destroy(&r->base);
      return rc;
    }
    r->tc_open = true;
  }
  if (!ok) {
    rpc_destroy(&r->base);
    return TS_ERR(err, TS_ENOMEM, "out of memory");
  }
  r->o.tracker = r->o.key = r->o.token = r->o.name = NULL;
  r->o.workers = NULL;
  *out = &r->base;
  return TS_OK;
}
