/*
 * worker.c — the measurement worker: an HTTP server (protocol v1) that
 * describes its device (GET /v1/info), stores reference artifacts
 * (PUT /v1/reference/{id}) and measures batches of candidates
 * (POST /v1/measure) on its device executor, one candidate at a time in
 * arrival order, each in a forked process. With a tracker it registers,
 * sends heartbeats, and registers again whenever the tracker no longer
 * knows it (a tracker restart, an eviction).
 *
 * A request is validated completely (framing, protocol version, config,
 * every candidate's artifact, the reference id) before anything is
 * measured; a bad request is a 4xx answer naming the field.
 */
#include "rpc/internal.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct ts_worker {
  char *bind, *key, *advertise, *tracker, *token, *device;
  int heartbeat_ms;
  ts_rpc_limits lim;
  executor *ex;
  http_server *srv;
  cJSON *info;     /* the static part of /v1/info */
  char *info_text; /* printed info, for ts_worker_info_json */
  bool available;  /* the device can measure */
  char unavailable[TS_MEASURE_ERROR_MAX];
  /* tracker client */
  pthread_t thread;
  bool thread_started;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool stopping;
  bool registered; /* under mu */
  char worker_id[64];
};

ts_worker_options ts_worker_defaults(void) {
  ts_worker_options o;
  memset(&o, 0, sizeof o);
  o.bind = "127.0.0.1";
  o.port = 9191;
  o.heartbeat_ms = 1000;
  o.device = ts_device_defaults();
  o.limits = ts_rpc_limits_default();
  return o;
}

static char *dup_or_null(const char *s) { return s && *s ? strdup(s) : NULL; }

/* The first "model name" of /proc/cpuinfo (a fixed file, not request
 * data). */
static void cpu_model(char *out, size_t size) {
  snprintf(out, size, "unknown");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10)) continue;
    char *c = strchr(line, ':');
    if (!c) break;
    c++;
    while (*c == ' ' || *c == '\t') c++;
    c[strcspn(c, "\n")] = 0;
    snprintf(out, size, "%s", c);
    break;
  }
  fclose(f);
}

/* Builds the static /v1/info document and the default key. */
static int probe_device(ts_worker *w, ts_error *err) {
  cJSON *info = json_message();
  if (!info) return TS_ERR(err, TS_ENOMEM, "out of memory");
  w->info = info;
  cJSON_AddStringToObject(info, "tessera_version", TS_VERSION);
  cJSON_AddStringToObject(info, "device", w->device);
  char key[160] = "";
  char model[256];
  cpu_model(model, sizeof model);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  cJSON *cpu = cJSON_AddObjectToObject(info, "cpu");
  cJSON_AddStringToObject(cpu, "model", model);
  cJSON_AddNumberToObject(cpu, "cores", (double)(cores > 0 ? cores : 1));
  cJSON *feats = cJSON_AddArrayToObject(cpu, "features");
  for (const char *const *f = ts_rt_cpu_feature_names(); f && *f; f++)
    if (ts_rt_cpu_has(*f) == 1)
      ts_json_add(feats, NULL, cJSON_CreateString(*f));
  const device_spec *dev = executor_device(w->ex);
  w->available = true;
  if (!dev->cuda) {
    ts_target *t = NULL;
    ts_error terr;
    ts_error_clear(&terr);
    if (ts_target_host(&t, &terr) == TS_OK) {
      cJSON_AddStringToObject(info, "target", ts_target_str(t));
      snprintf(key, sizeof key, "cpu-%s", ts_target_cpu(t));
      ts_target_free(t);
    } else {
      w->available = false;
      snprintf(w->unavailable, sizeof w->unavailable,
               "cannot describe the host CPU: %.900s", terr.msg);
      snprintf(key, sizeof key, "cpu");
    }
    cJSON_AddNullToObject(info, "gpu");
  } else {
    ts_cuda_device_info gi;
    ts_error gerr;
    ts_error_clear(&gerr);
    if (executor_cuda_info(w->ex, &gi, &gerr) == TS_OK) {
      char tstr[160];
      snprintf(tstr, sizeof tstr, "cuda -arch=sm_%d%d", gi.sm_major,
               gi.sm_minor);
      ts_target *t = NULL;
      if (ts_target_parse(tstr, &t, NULL) == TS_OK) {
        cJSON_AddStringToObject(info, "target", ts_target_str(t));
        ts_target_free(t);
      }
      cJSON *gpu = cJSON_AddObjectToObject(info, "gpu");
      cJSON_AddStringToObject(gpu, "name", gi.name);
      char sm[16];
      snprintf(sm, sizeof sm, "sm_%d%d", gi.sm_major, gi.sm_minor);
      cJSON_AddStringToObject(gpu, "sm", sm);
      cJSON_AddNumberToObject(gpu, "memory_bytes", (double)gi.total_memory);
      cJSON_AddNumberToObject(gpu, "multiprocessors", gi.multiprocessor_count);
      cJSON_AddNumberToObject(gpu, "max_threads_per_block",
                              gi.max_threads_per_block);
      cJSON_AddNumberToObject(gpu, "max_shared_memory_per_block",
                              gi.max_shared_memory_per_block);
      snprintf(key, sizeof key, "cuda-%s", sm);
    } else {
      w->available = false;
      snprintf(w->unavailable, sizeof w->unavailable,
               "device %s is unavailable: %.900s", w->device, gerr.msg);
      cJSON_AddNullToObject(info, "gpu");
      snprintf(key, sizeof key, "cuda");
    }
  }
  if (!w->key) w->key = strdup(key);
  if (!w->key) return TS_ERR(err, TS_ENOMEM, "out of memory");
  cJSON_AddStringToObject(info, "key", w->key);
  cJSON_AddBoolToObject(info, "available", w->available);
  if (!w->available) cJSON_AddStringToObject(info, "error", w->unavailable);
  cJSON *lim = cJSON_AddObjectToObject(info, "limits");
  cJSON_AddNumberToObject(lim, "max_body_bytes", (double)w->lim.max_body_bytes);
  cJSON_AddNumberToObject(lim, "max_artifact_bytes",
                          (double)w->lim.max_artifact_bytes);
  cJSON_AddNumberToObject(lim, "max_json_bytes", (double)w->lim.max_json_bytes);
  cJSON_AddNumberToObject(lim, "max_header_bytes", w->lim.max_header_bytes);
  cJSON_AddNumberToObject(lim, "max_candidates", w->lim.max_candidates);
  cJSON_AddNumberToObject(lim, "max_repeat", TS_MEASURE_MAX_REPEAT);
  w->info_text = cJSON_Print(info);
  if (!w->info_text) return TS_ERR(err, TS_ENOMEM, "out of memory");
  return TS_OK;
}

/* ---- handlers ---- */

static void handle_info(ts_worker *w, http_response *res) {
  cJSON *m = cJSON_Duplicate(w->info, true);
  if (m) {
    cJSON_AddNumberToObject(m, "measurements",
                            (double)executor_measurements(w->ex));
    pthread_mutex_lock(&w->mu);
    cJSON_AddBoolToObject(m, "registered", w->registered);
    pthread_mutex_unlock(&w->mu);
  }
  http_reply_json(res, 200, m);
}

static int status_of(int rc) { return rc == TS_ENOMEM ? 413 : 400; }

static void handle_reference(ts_worker *w, const http_request *req,
                             const char *id, http_response *res) {
  if (!ref_id_valid(id)) {
    http_reply_error(res, 400, "bad_request",
                     "bad reference id in the path (1 "
                     "to %d characters of [A-Za-z0-9._-])",
                     REF_ID_MAX);
    return;
  }
  ts_error err;
  ts_error_clear(&err);
  cJSON *head = NULL;
  const unsigned char *payload = NULL;
  size_t plen = 0;
  int rc = wire_parse(req->body, req->body_len, &w->lim, &head, &payload, &plen,
                      &err);
  if (rc) {
    http_reply_error(res, status_of(rc),
                     rc == TS_ENOMEM ? "too_large" : "bad_request", "%s",
                     err.msg);
    return;
  }
  ts_artifact *a = NULL;
  rc = artifact_from_json(cJSON_GetObjectItemCaseSensitive(head, "artifact"),
                          "artifact", payload, plen, &w->lim, &a, &err);
  if (!rc) rc = executor_put_reference(w->ex, id, a, &err);
  ts_artifact_release(a);
  cJSON_Delete(head);
  if (rc) {
    http_reply_error(res, status_of(rc),
                     rc == TS_ENOMEM ? "too_large" : "bad_request", "%s",
                     err.msg);
    return;
  }
  cJSON *m = json_message();
  if (m) {
    cJSON_AddStringToObject(m, "id", id);
    cJSON_AddBoolToObject(m, "stored", true);
  }
  http_reply_json(res, 200, m);
}

static void handle_measure(ts_worker *w, const http_request *req,
                           http_response *res) {
  ts_error err;
  ts_error_clear(&err);
  measure_request mr;
  int rc = measure_request_decode(req->body, req->body_len, &w->lim, &mr, &err);
  if (rc) {
    http_reply_error(res, status_of(rc),
                     rc == TS_ENOMEM ? "too_large" : "bad_request", "%s",
                     err.msg);
    return;
  }
  ts_measure_config cfg = mr.cfg;
  const char *ref = mr.reference;
  ts_artifact **arts = mr.artifacts;
  int64_t *ids = mr.ids;
  int n = mr.n;
  if (ref && !executor_has_reference(w->ex, ref)) {
    http_reply_error(res, 404, "unknown_reference",
                     "unknown reference '%s': "
                     "upload it with PUT /v1/reference/%s first",
                     ref, ref);
    goto done;
  }
  if (!w->available) {
    http_reply_error(res, 503, "device_unavailable", "%s", w->unavailable);
    goto done;
  }
  cJSON *m = json_message();
  cJSON *results = m ? cJSON_AddArrayToObject(m, "results") : NULL;
  if (m) cJSON_AddStringToObject(m, "worker", w->key);
  for (int i = 0; i < n; i++) {
    ts_measure_result r;
    executor_measure(w->ex, &cfg, ref, arts[i], req->client_fd, &r);
    if (results) ts_json_add(results, NULL, result_to_json(&r, ids[i]));
  }
  if (executor_stopping(w->ex)) {
    /* Results cut short by the shutdown are not the candidates' fault: the
     * runner re-sends the whole request elsewhere. */
    cJSON_Delete(m);
    http_reply_error(res, 503, "shutting_down", "worker %s is shutting down",
                     w->key);
    goto done;
  }
  http_reply_json(res, 200, m);
done:
  measure_request_clear(&mr);
}

static void handle(void *ctx, const http_request *req, http_response *res) {
  ts_worker *w = ctx;
  const char *u = req->url;
  bool get = !strcmp(req->method, "GET"), post = !strcmp(req->method, "POST"),
       put = !strcmp(req->method, "PUT");
  if (!strcmp(u, "/v1/info")) {
    if (get) return handle_info(w, res);
  } else if (!strcmp(u, "/v1/measure")) {
    if (post) return handle_measure(w, req, res);
  } else if (!strncmp(u, "/v1/reference/", 14)) {
    if (put) return handle_reference(w, req, u + 14, res);
  } else {
    http_reply_error(res, 404, "not_found",
                     "no endpoint %.200s (worker "
                     "endpoints: GET /v1/info, PUT /v1/reference/{id}, POST "
                     "/v1/measure)",
                     u);
    return;
  }
  http_reply_error(res, 405, "method_not_allowed",
                   "%.16s is not allowed on "
                   "%.200s",
                   req->method, u);
}

/* ---- tracker client ---- */

static cJSON *registration(ts_worker *w) {
  cJSON *m = json_message();
  if (!m) return NULL;
  cJSON_AddStringToObject(m, "key", w->key);
  cJSON_AddStringToObject(m, "device", w->device);
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(w->info, "target");
  cJSON_AddStringToObject(m, "target", cJSON_IsString(t) ? t->valuestring : "");
  cJSON_AddBoolToObject(m, "available", w->available);
  cJSON_AddNumberToObject(m, "measurements",
                          (double)executor_measurements(w->ex));
  char host[256] = "";
  int port = http_server_port(w->srv);
  if (w->advertise) {
    ts_rpc_parse_hostport(w->advertise, host, sizeof host, &port, NULL);
  } else if (strcmp(w->bind, "0.0.0.0") && strcmp(w->bind, "::")) {
    snprintf(host, sizeof host, "%s", w->bind);
  }
  if (host[0]) cJSON_AddStringToObject(m, "host", host);
  cJSON_AddNumberToObject(m, "port", port);
  return m;
}

static void *tracker_loop(void *arg) {
  ts_worker *w = arg;
  http_client c;
  if (http_client_open(&c, w->tracker, w->token, 2000, NULL)) return NULL;
  for (;;) {
    pthread_mutex_lock(&w->mu);
    bool stop = w->stopping, reg = w->registered;
    char id[64];
    snprintf(id, sizeof id, "%s", w->worker_id);
    pthread_mutex_unlock(&w->mu);
    if (stop) break;
    long status = 0;
    cJSON *reply = NULL;
    cJSON *msg = NULL;
    bool now = false;
    if (!reg) {
      msg = registration(w);
      if (msg &&
          http_client_json(&c, "POST", "/v1/workers/register", msg, 5000,
                           &status, &reply, NULL) == TS_OK &&
          status == 200 && reply) {
        const char *wid = NULL;
        if (json_get_str(reply, "reply", "worker_id", 63, true, &wid, NULL) ==
            TS_OK) {
          pthread_mutex_lock(&w->mu);
          snprintf(w->worker_id, sizeof w->worker_id, "%s", wid);
          w->registered = true;
          pthread_mutex_unlock(&w->mu);
        }
      }
    } else {
      msg = json_message();
      if (msg) {
        cJSON_AddStringToObject(msg, "worker_id", id);
        cJSON_AddNumberToObject(msg, "measurements",
                                (double)executor_measurements(w->ex));
      }
      int rc = msg ? http_client_json(&c, "POST", "/v1/workers/heartbeat", msg,
                                      5000, &status, &reply, NULL)
                   : TS_ENOMEM;
      if (rc || status != 200) {
        /* Unknown to the tracker (restarted, or it evicted us) or
         * unreachable: register again. */
        pthread_mutex_lock(&w->mu);
        w->registered = false;
        pthread_mutex_unlock(&w->mu);
        now = rc == TS_OK && status == 404;
      }
    }
    cJSON_Delete(msg);
    cJSON_Delete(reply);
    if (now) continue;
    pthread_mutex_lock(&w->mu);
    if (!w->stopping) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      int64_t ns = ts.tv_nsec + (int64_t)w->heartbeat_ms * 1000000;
      ts.tv_sec += ns / 1000000000;
      ts.tv_nsec = ns % 1000000000;
      pthread_cond_timedwait(&w->cv, &w->mu, &ts);
    }
    pthread_mutex_unlock(&w->mu);
  }
  /* Leaving: have the tracker drop this worker now rather than after the
   * heartbeat timeout. */
  pthread_mutex_lock(&w->mu);
  bool reg = w->registered;
  char id[64];
  snprintf(id, sizeof id, "%s", w->worker_id);
  pthread_mutex_unlock(&w->mu);
  cJSON *bye = reg ? json_message() : NULL;
  if (bye) {
    cJSON_AddStringToObject(bye, "worker_id", id);
    cJSON_AddStringToObject(bye, "error", "worker stopping");
    long status;
    cJSON *reply = NULL;
    http_client_json(&c, "POST", "/v1/workers/report", bye, 2000, &status,
                     &reply, NULL);
    cJSON_Delete(reply);
    cJSON_Delete(bye);
  }
  http_client_close(&c);
  return NULL;
}

/* ---- lifecycle ---- */

int ts_worker_start(const ts_worker_options *opts, ts_worker **out,
                    ts_error *err) {
  *out = NULL;
  ts_worker_options o = opts ? *opts : ts_worker_defaults();
  if (!o.bind || !*o.bind) o.bind = "127.0.0.1";
  if (!o.device.device) o.device.device = "cpu";
  if (o.heartbeat_ms <= 0) o.heartbeat_ms = 1000;
  char host[256];
  int port = 0;
  int rc;
  if (o.tracker &&
      (rc = ts_rpc_parse_hostport(o.tracker, host, sizeof host, &port, err)))
    return rc;
  if (o.advertise &&
      (rc = ts_rpc_parse_hostport(o.advertise, host, sizeof host, &port, err)))
    return rc;
  if (o.key && (!ref_id_valid(o.key)))
    return TS_ERR(err, TS_EINVAL,
                  "bad worker key '%.80s' (1 to %d characters "
                  "of [A-Za-z0-9._-])",
                  o.key, REF_ID_MAX);
  if (!ts_rpc_is_loopback(o.bind) && !(o.token && *o.token))
    return TS_ERR(err, TS_EINVAL,
                  "worker: refusing to listen on the "
                  "non-loopback address %s without a token (--token-file): it "
                  "would run any code it is sent",
                  o.bind);
  ts_worker *w = calloc(1, sizeof *w);
  if (!w) return TS_ERR(err, TS_ENOMEM, "out of memory");
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
  w->bind = strdup(o.bind);
  w->key = dup_or_null(o.key);
  w->advertise = dup_or_null(o.advertise);
  w->tracker = dup_or_null(o.tracker);
  w->token = dup_or_null(o.token);
  w->device = strdup(o.device.device);
  w->heartbeat_ms = o.heartbeat_ms;
  w->lim = o.limits;
  if (!w->bind || !w->device) {
    ts_worker_stop(w);
    return TS_ERR(err, TS_ENOMEM, "out of memory");
  }
  /* The executor's helper process is forked before any thread starts. */
  if ((rc = executor_create(&o.device, w->lim.max_references, &w->ex, err)) ||
      (rc = probe_device(w, err)) ||
      (rc = http_server_start(w->bind, o.port, w->token, &w->lim, "worker",
                              handle, w, &w->srv, err))) {
    ts_worker_stop(w);
    return rc;
  }
  if (w->tracker) {
    if (pthread_create(&w->thread, NULL, tracker_loop, w)) {
      ts_worker_stop(w);
      return TS_ERR(err, TS_ENOMEM, "cannot start the tracker thread");
    }
    w->thread_started = true;
  }
  *out = w;
  return TS_OK;
}

int ts_worker_port(const ts_worker *w) { return http_server_port(w->srv); }
const char *ts_worker_key(const ts_worker *w) { return w->key; }
const char *ts_worker_info_json(const ts_worker *w) { return w->info_text; }
int64_t ts_worker_measurements(const ts_worker *w) {
  return executor_measurements(w->ex);
}

bool ts_worker_registered(const ts_worker *w) {
  ts_worker *m = (ts_worker *)w;
  pthread_mutex_lock(&m->mu);
  bool r = m->registered;
  pthread_mutex_unlock(&m->mu);
  return r;
}

void ts_worker_stop(ts_worker *w) {
  if (!w) return;
  pthread_mutex_lock(&w->mu);
  w->stopping = true;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
  if (w->thread_started) pthread_join(w->thread, NULL);
  /* End measurements in progress so the server's threads can finish. */
  if (w->ex) executor_shutdown(w->ex);
  http_server_stop(w->srv);
  executor_destroy(w->ex);
  cJSON_Delete(w->info);
  free(w->info_text);
  free(w->bind);
  free(w->key);
  free(w->advertise);
  free(w->tracker);
  free(w->token);
  free(w->device);
  pthread_mutex_destroy(&w->mu);
  pthread_cond_destroy(&w->cv);
  free(w);
}
