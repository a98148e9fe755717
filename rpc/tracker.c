/*
 * tracker.c — the tracker: a registry of workers by device key, kept alive
 * by heartbeats (silent workers are evicted), and leases of workers to
 * runners with fair sharing.
 *
 * Leases are dynamic. A runner asks for up to `want` workers of a key; the
 * tracker decides how many each lease of that key gets whenever something
 * changes: leases are taken in order of priority (higher first) then
 * arrival, and within one priority level workers are dealt one at a time in
 * that order until each lease has what it wants or workers run out, so two
 * equal jobs split a farm evenly and a higher-priority job is served first.
 * A lease above its share gives workers back (the most recently given
 * first); a lease below it receives free workers. Runners renew their lease
 * periodically and learn its current workers from each renewal; a lease not
 * renewed within the TTL expires. A runner that finds a worker dead reports
 * it, which evicts it at once (a live worker registers again on its next
 * heartbeat).
 */
#define _GNU_SOURCE /* pipe2, POLLRDHUP, qsort_r */
#include "rpc/internal.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* The longest wait a lease request may ask for. */
#define MAX_WAIT_MS 10000

typedef struct tworker {
  char id[ID_MAX + 1];
  char key[REF_ID_MAX + 1];
  char address[300]; /* HOST:PORT */
  char device[32];
  char target[1024];
  bool available;
  int64_t measurements;
  int64_t last_heard_ms;
  int64_t registered_ms;
  int lease;             /* index+1 into leases, 0 when free */
  uint64_t assigned_seq; /* when it joined its lease */
} tworker;

typedef struct tlease {
  char id[ID_MAX + 1];
  char key[REF_ID_MAX + 1];
  char runner[128];
  int priority;
  int want;
  uint64_t arrival;
  int64_t expires_ms;
  int target; /* its share after the last rebalance */
} tlease;

struct ts_tracker {
  ts_tracker_options o;
  char *token;
  http_server *srv;
  pthread_mutex_t mu;
  pthread_cond_t changed; /* broadcast after every rebalance */
  tworker *workers;
  int n_workers, cap_workers;
  tlease *leases;
  int n_leases, cap_leases;
  uint64_t next_id, seq;
  uint32_t boot; /* random per start: ids never repeat across restarts */
  /* reaper */
  pthread_t reaper;
  bool reaper_started, stopping;
};

ts_tracker_options ts_tracker_defaults(void) {
  ts_tracker_options o;
  memset(&o, 0, sizeof o);
  o.bind = "127.0.0.1";
  o.port = 9190;
  o.heartbeat_timeout_ms = 5000;
  o.lease_ttl_ms = 15000;
  o.limits = ts_rpc_limits_default();
  o.limits.max_connections = 1024; /* every worker keeps one open */
  /* Workers behind one address (a host, a NAT) are many clients. */
  o.limits.max_connections_per_client = 1024;
  o.limits.max_body_bytes = (int64_t)1 << 20;
  o.limits.max_json_bytes = (int64_t)1 << 20;
  return o;
}

/* ---- registry (all under t->mu) ---- */

static tworker *find_worker(ts_tracker *t, const char *id) {
  for (int i = 0; i < t->n_workers; i++)
    if (!strcmp(t->workers[i].id, id)) return &t->workers[i];
  return NULL;
}

static int find_lease(ts_tracker *t, const char *id) {
  for (int i = 0; i < t->n_leases; i++)
    if (!strcmp(t->leases[i].id, id)) return i;
  return -1;
}

static void remove_worker(ts_tracker *t, int i) {
  t->workers[i] = t->workers[--t->n_workers];
}

/* Removes lease i, freeing its workers and renumbering the others. */
static void remove_lease(ts_tracker *t, int i) {
  int last = t->n_leases - 1;
  for (int w = 0; w < t->n_workers; w++) {
    if (t->workers[w].lease == i + 1)
      t->workers[w].lease = 0;
    else if (t->workers[w].lease == last + 1)
      t->workers[w].lease = i + 1;
  }
  t->leases[i] = t->leases[last];
  t->n_leases--;
}

static int lease_order(const void *a, const void *b, void *ctx) {
  const tlease *L = ctx;
  const tlease *x = &L[*(const int *)a], *y = &L[*(const int *)b];
  if (x->priority != y->priority) return x->priority > y->priority ? -1 : 1;
  return x->arrival < y->arrival ? -1 : x->arrival > y->arrival;
}

/* Recomputes every lease's share of the workers of one key and moves
 * workers accordingly. */
static void rebalance_key(ts_tracker *t, const char *key) {
  int n = 0;
  int *order = malloc(sizeof *order * (size_t)(t->n_leases + 1));
  if (!order) return;
  for (int i = 0; i < t->n_leases; i++)
    if (!strcmp(t->leases[i].key, key)) order[n++] = i;
  qsort_r(order, (size_t)n, sizeof *order, lease_order, t->leases);
  int pool = 0;
  for (int w = 0; w < t->n_workers; w++)
    if (!strcmp(t->workers[w].key, key) && t->workers[w].available) pool++;
  for (int i = 0; i < n; i++) t->leases[order[i]].target = 0;
  /* Deal workers one at a time within each priority level. */
  for (int start = 0; start < n && pool > 0;) {
    int end = start;
    while (end < n &&
           t->leases[order[end]].priority == t->leases[order[start]].priority)
      end++;
    bool progress = true;
    while (pool > 0 && progress) {
      progress = false;
      for (int i = start; i < end && pool > 0; i++) {
        tlease *l = &t->leases[order[i]];
        if (l->target < l->want) {
          l->target++;
          pool--;
          progress = true;
        }
      }
    }
    start = end;
  }
  /* Give back what is above the share (most recent assignment first). */
  for (int i = 0; i < n; i++) {
    int li = order[i];
    for (;;) {
      int have = 0, newest = -1;
      for (int w = 0; w < t->n_workers; w++)
        if (t->workers[w].lease == li + 1) {
          have++;
          if (newest < 0 ||
              t->workers[w].assigned_seq > t->workers[newest].assigned_seq)
            newest = w;
        }
      if (have <= t->leases[li].target) break;
      t->workers[newest].lease = 0;
    }
  }
  /* Fill leases below their share with free workers, in lease order. */
  for (int i = 0; i < n; i++) {
    int li = order[i];
    int have = 0;
    for (int w = 0; w < t->n_workers; w++)
      if (t->workers[w].lease == li + 1) have++;
    for (int w = 0; w < t->n_workers && have < t->leases[li].target; w++) {
      tworker *x = &t->workers[w];
      if (x->lease || !x->available || strcmp(x->key, key)) continue;
      x->lease = li + 1;
      x->assigned_seq = ++t->seq;
      have++;
    }
  }
  free(order);
}

static void rebalance(ts_tracker *t, const char *key) {
  rebalance_key(t, key);
  pthread_cond_broadcast(&t->changed);
}

/* Evicts silent workers and expired leases. */
static void reap(ts_tracker *t) {
  int64_t now = ts_now_ms();
  for (int i = t->n_workers - 1; i >= 0; i--)
    if (now - t->workers[i].last_heard_ms > t->o.heartbeat_timeout_ms) {
      char key[REF_ID_MAX + 1];
      snprintf(key, sizeof key, "%s", t->workers[i].key);
      remove_worker(t, i);
      rebalance(t, key);
    }
  for (int i = t->n_leases - 1; i >= 0; i--)
    if (now > t->leases[i].expires_ms) {
      char key[REF_ID_MAX + 1];
      snprintf(key, sizeof key, "%s", t->leases[i].key);
      remove_lease(t, i);
      rebalance(t, key);
    }
}

static void *reaper_loop(void *arg) {
  ts_tracker *t = arg;
  pthread_mutex_lock(&t->mu);
  while (!t->stopping) {
    reap(t);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t ns = ts.tv_nsec + 200 * 1000000LL;
    ts.tv_sec += ns / 1000000000;
    ts.tv_nsec = ns % 1000000000;
    pthread_cond_timedwait(&t->changed, &t->mu, &ts);
  }
  pthread_mutex_unlock(&t->mu);
  return NULL;
}

/* ---- handlers ---- */

static cJSON *parse_body(ts_tracker *t, const http_request *req,
                         http_response *res) {
  cJSON *m = NULL;
  ts_error err;
  ts_error_clear(&err);
  int rc = json_parse_message((const char *)req->body, req->body_len,
                              &t->o.limits, &m, &err);
  if (rc) {
    http_reply_error(res, rc == TS_ENOMEM ? 413 : 400,
                     rc == TS_ENOMEM ? "too_large" : "bad_request", "%s",
                     err.msg);
    return NULL;
  }
  return m;
}

static void handle_register(ts_tracker *t, const http_request *req,
                            http_response *res) {
  cJSON *m = parse_body(t, req, res);
  if (!m) return;
  ts_error err;
  ts_error_clear(&err);
  const char *key = NULL, *device = "cpu", *target = "", *host = NULL;
  int64_t port = 0, measurements = 0;
  bool available = true;
  const char *w = "register";
  int rc;
  if ((rc = json_get_str(m, w, "key", REF_ID_MAX, true, &key, &err)) ||
      (rc = json_get_str(m, w, "device", 31, false, &device, &err)) ||
      (rc = json_get_str(m, w, "target", 1023, false, &target, &err)) ||
      (rc = json_get_str(m, w, "host", 253, false, &host, &err)) ||
      (rc = json_get_int(m, w, "port", 1, 65535, true, &port, &err)) ||
      (rc = json_get_int(m, w, "measurements", 0, (int64_t)1 << 53, false,
                         &measurements, &err)) ||
      (rc = json_get_bool(m, w, "available", false, &available, &err)))
    goto bad;
  if (!ref_id_valid(key)) {
    rc = TS_ERR(&err, TS_EINVAL,
                "register.key: bad key (1 to %d characters of "
                "[A-Za-z0-9._-])",
                REF_ID_MAX);
    goto bad;
  }
  if (!host || !*host) host = req->peer;
  char address[300];
  if (strchr(host, ':'))
    snprintf(address, sizeof address, "[%s]:%d", host, (int)port);
  else
    snprintf(address, sizeof address, "%s:%d", host, (int)port);
  char h2[256];
  int p2;
  if ((rc = ts_rpc_parse_hostport(address, h2, sizeof h2, &p2, &err))) goto bad;
  pthread_mutex_lock(&t->mu);
  /* A worker registering again under the same address replaces itself. */
  for (int i = t->n_workers - 1; i >= 0; i--)
    if (!strcmp(t->workers[i].address, address)) {
      char old[REF_ID_MAX + 1];
      snprintf(old, sizeof old, "%s", t->workers[i].key);
      remove_worker(t, i);
      rebalance_key(t, old);
    }
  if (t->n_workers == t->cap_workers) {
    int cap = t->cap_workers ? 2 * t->cap_workers : 16;
    tworker *nw = realloc(t->workers, sizeof *nw * (size_t)cap);
    if (!nw) {
      pthread_mutex_unlock(&t->mu);
      cJSON_Delete(m);
      http_reply_error(res, 503, "internal", "out of memory");
      return;
    }
    t->workers = nw;
    t->cap_workers = cap;
  }
  tworker *x = &t->workers[t->n_workers++];
  memset(x, 0, sizeof *x);
  snprintf(x->id, sizeof x->id, "w%08" PRIx32 "-%" PRIu64, t->boot,
           ++t->next_id);
  snprintf(x->key, sizeof x->key, "%s", key);
  snprintf(x->address, sizeof x->address, "%s", address);
  snprintf(x->device, sizeof x->device, "%s", device);
  snprintf(x->target, sizeof x->target, "%s", target);
  x->available = available;
  x->measurements = measurements;
  x->last_heard_ms = x->registered_ms = ts_now_ms();
  char id[ID_MAX + 1];
  snprintf(id, sizeof id, "%s", x->id);
  rebalance(t, key);
  pthread_mutex_unlock(&t->mu);
  cJSON_Delete(m);
  cJSON *r = json_message();
  if (r) {
    cJSON_AddStringToObject(r, "worker_id", id);
    cJSON_AddStringToObject(r, "address", address);
    cJSON_AddNumberToObject(r, "heartbeat_timeout_ms",
                            t->o.heartbeat_timeout_ms);
  }
  http_reply_json(res, 200, r);
  return;
bad:
  cJSON_Delete(m);
  http_reply_error(res, 400, "bad_request", "%s", err.msg);
}

static void handle_heartbeat(ts_tracker *t, const http_request *req,
                             http_response *res) {
  cJSON *m = parse_body(t, req, res);
  if (!m) return;
  ts_error err;
  ts_error_clear(&err);
  const char *id = NULL;
  int64_t measurements = -1;
  if (json_get_str(m, "heartbeat", "worker_id", ID_MAX, true, &id, &err) ||
      json_get_int(m, "heartbeat", "measurements", 0, (int64_t)1 << 53, false,
                   &measurements, &err)) {
    cJSON_Delete(m);
    http_reply_error(res, 400, "bad_request", "%s", err.msg);
    return;
  }
  pthread_mutex_lock(&t->mu);
  tworker *x = find_worker(t, id);
  if (x) {
    x->last_heard_ms = ts_now_ms();
    if (measurements >= 0) x->measurements = measurements;
  }
  pthread_mutex_unlock(&t->mu);
  if (!x)
    http_reply_error(res, 404, "unknown_worker",
                     "unknown worker '%s': register "
                     "again",
                     id);
  else
    http_reply_json(res, 200, json_message());
  cJSON_Delete(m);
}

static void handle_report(ts_tracker *t, const http_request *req,
                          http_response *res) {
  cJSON *m = parse_body(t, req, res);
  if (!m) return;
  ts_error err;
  ts_error_clear(&err);
  const char *id = NULL;
  if (json_get_str(m, "report", "worker_id", ID_MAX, true, &id, &err)) {
    cJSON_Delete(m);
    http_reply_error(res, 400, "bad_request", "%s", err.msg);
    return;
  }
  pthread_mutex_lock(&t->mu);
  for (int i = 0; i < t->n_workers; i++)
    if (!strcmp(t->workers[i].id, id)) {
      char key[REF_ID_MAX + 1];
      snprintf(key, sizeof key, "%s", t->workers[i].key);
      remove_worker(t, i);
      rebalance(t, key);
      break;
    }
  pthread_mutex_unlock(&t->mu);
  cJSON_Delete(m);
  http_reply_json(res, 200, json_message());
}

/* The reply to a lease request: the lease's current workers. Under mu. */
static cJSON *lease_reply(ts_tracker *t, int li) {
  cJSON *r = json_message();
  if (!r) return NULL;
  tlease *l = &t->leases[li];
  cJSON_AddStringToObject(r, "lease_id", l->id);
  cJSON_AddNumberToObject(r, "ttl_ms", t->o.lease_ttl_ms);
  cJSON *ws = cJSON_AddArrayToObject(r, "workers");
  int registered = 0;
  for (int w = 0; w < t->n_workers; w++) {
    tworker *x = &t->workers[w];
    if (!strcmp(x->key, l->key) && x->available) registered++;
    if (x->lease != li + 1) continue;
    cJSON *o = cJSON_CreateObject();
    if (!o) continue;
    cJSON_AddStringToObject(o, "worker_id", x->id);
    cJSON_AddStringToObject(o, "address", x->address);
    ts_json_add(ws, NULL, o);
  }
  cJSON_AddNumberToObject(r, "registered", registered);
  return r;
}

static int lease_count(ts_tracker *t, int li) {
  int n = 0;
  for (int w = 0; w < t->n_workers; w++)
    if (t->workers[w].lease == li + 1) n++;
  return n;
}

/* Waits (under mu) until lease `id` has a worker, is gone, or wait_ms
 * passes. Returns the lease's index or -1. */
static int wait_for_workers(ts_tracker *t, const char *id, int64_t wait_ms) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  int64_t ns = ts.tv_nsec + wait_ms * 1000000;
  ts.tv_sec += ns / 1000000000;
  ts.tv_nsec = ns % 1000000000;
  for (;;) {
    int li = find_lease(t, id);
    if (li < 0 || lease_count(t, li) > 0 || t->stopping) return li;
    if (pthread_cond_timedwait(&t->changed, &t->mu, &ts))
      return find_lease(t, id);
  }
}

static void handle_lease(ts_tracker *t, const http_request *req,
                         http_response *res) {
  cJSON *m = parse_body(t, req, res);
  if (!m) return;
  ts_error err;
  ts_error_clear(&err);
  const char *key = NULL, *runner = "runner";
  int64_t want = 1, priority = 0, wait_ms = 0;
  const char *w = "lease";
  if (json_get_str(m, w, "key", REF_ID_MAX, true, &key, &err) ||
      json_get_str(m, w, "runner", 127, false, &runner, &err) ||
      json_get_int(m, w, "want", 1, 4096, false, &want, &err) ||
      json_get_int(m, w, "priority", -1000000, 1000000, false, &priority,
                   &err) ||
      json_get_int(m, w, "wait_ms", 0, MAX_WAIT_MS, false, &wait_ms, &err)) {
    cJSON_Delete(m);
    http_reply_error(res, 400, "bad_request", "%s", err.msg);
    return;
  }
  pthread_mutex_lock(&t->mu);
  if (t->n_leases == t->cap_leases) {
    int cap = t->cap_leases ? 2 * t->cap_leases : 16;
    tlease *nl = realloc(t->leases, sizeof *nl * (size_t)cap);
    if (!nl) {
      pthread_mutex_unlock(&t->mu);
      cJSON_Delete(m);
      http_reply_error(res, 503, "internal", "out of memory");
      return;
    }
    t->leases = nl;
    t->cap_leases = cap;
  }
  tlease *l = &t->leases[t->n_leases++];
  memset(l, 0, sizeof *l);
  snprintf(l->id, sizeof l->id, "l%08" PRIx32 "-%" PRIu64, t->boot,
           ++t->next_id);
  snprintf(l->key, sizeof l->key, "%s", key);
  snprintf(l->runner, sizeof l->runner, "%s", runner);
  l->priority = (int)priority;
  l->want = (int)want;
  l->arrival = ++t->seq;
  l->expires_ms = ts_now_ms() + t->o.lease_ttl_ms;
  char id[ID_MAX + 1];
  snprintf(id, sizeof id, "%s", l->id);
  rebalance(t, key);
  int li = wait_for_workers(t, id, wait_ms);
  cJSON *r = li >= 0 ? lease_reply(t, li) : NULL;
  pthread_mutex_unlock(&t->mu);
  cJSON_Delete(m);
  if (li < 0)
    http_reply_error(res, 503, "unavailable", "the tracker is stopping");
  else
    http_reply_json(res, 200, r);
}

static void handle_renew(ts_tracker *t, const http_request *req,
                         http_response *res, bool release) {
  cJSON *m = parse_body(t, req, res);
  if (!m) return;
  ts_error err;
  ts_error_clear(&err);
  const char *id = NULL;
  int64_t wait_ms = 0;
  if (json_get_str(m, "lease", "lease_id", ID_MAX, true, &id, &err) ||
      json_get_int(m, "lease", "wait_ms", 0, MAX_WAIT_MS, false, &wait_ms,
                   &err)) {
    cJSON_Delete(m);
    http_reply_error(res, 400, "bad_request", "%s", err.msg);
    return;
  }
  char lid[ID_MAX + 1];
  snprintf(lid, sizeof lid, "%s", id);
  cJSON_Delete(m);
  pthread_mutex_lock(&t->mu);
  int li = find_lease(t, lid);
  cJSON *r = NULL;
  if (li >= 0 && release) {
    char key[REF_ID_MAX + 1];
    snprintf(key, sizeof key, "%s", t->leases[li].key);
    remove_lease(t, li);
    rebalance(t, key);
    r = json_message();
  } else if (li >= 0) {
    t->leases[li].expires_ms = ts_now_ms() + t->o.lease_ttl_ms;
    if (wait_ms > 0) li = wait_for_workers(t, lid, wait_ms);
    if (li >= 0) r = lease_reply(t, li);
  }
  pthread_mutex_unlock(&t->mu);
  if (li < 0)
    http_reply_error(res, 404, "unknown_lease",
                     "unknown lease '%s' (expired "
                     "or released): acquire a new one",
                     lid);
  else
    http_reply_json(res, 200, r);
}

static void handle_status(ts_tracker *t, http_response *res) {
  cJSON *r = json_message();
  if (!r) return http_reply_json(res, 500, NULL);
  int64_t now = ts_now_ms();
  pthread_mutex_lock(&t->mu);
  cJSON *ws = cJSON_AddArrayToObject(r, "workers");
  for (int i = 0; ws && i < t->n_workers; i++) {
    tworker *x = &t->workers[i];
    cJSON *o = cJSON_CreateObject();
    if (!o) break;
    cJSON_AddItemToArray(ws, o); /* (ws is not NULL: cannot fail) */
    cJSON_AddStringToObject(o, "key", x->key);
    cJSON_AddStringToObject(o, "worker_id", x->id);
    cJSON_AddStringToObject(o, "address", x->address);
    cJSON_AddStringToObject(o, "device", x->device);
    cJSON_AddStringToObject(o, "target", x->target);
    cJSON_AddStringToObject(o, "state",
                            !x->available ? "unavailable"
                            : x->lease    ? "leased"
                                          : "free");
    if (x->lease) {
      cJSON_AddStringToObject(o, "leased_by", t->leases[x->lease - 1].runner);
      cJSON_AddStringToObject(o, "lease_id", t->leases[x->lease - 1].id);
    } else {
      cJSON_AddNullToObject(o, "leased_by");
    }
    cJSON_AddNumberToObject(o, "measurements", (double)x->measurements);
    cJSON_AddNumberToObject(o, "last_heard_ms",
                            (double)(now - x->last_heard_ms));
  }
  cJSON *ls = cJSON_AddArrayToObject(r, "leases");
  for (int i = 0; ls && i < t->n_leases; i++) {
    tlease *l = &t->leases[i];
    cJSON *o = cJSON_CreateObject();
    if (!o) break;
    cJSON_AddItemToArray(ls, o); /* (ls is not NULL: cannot fail) */
    cJSON_AddStringToObject(o, "lease_id", l->id);
    cJSON_AddStringToObject(o, "key", l->key);
    cJSON_AddStringToObject(o, "runner", l->runner);
    cJSON_AddNumberToObject(o, "priority", l->priority);
    cJSON_AddNumberToObject(o, "want", l->want);
    cJSON_AddNumberToObject(o, "workers", lease_count(t, i));
  }
  pthread_mutex_unlock(&t->mu);
  http_reply_json(res, 200, r);
}

static void handle(void *ctx, const http_request *req, http_response *res) {
  ts_tracker *t = ctx;
  const char *u = req->url;
  bool post = !strcmp(req->method, "POST");
  if (!strcmp(u, "/v1/status")) {
    if (!strcmp(req->method, "GET")) return handle_status(t, res);
  } else if (!strcmp(u, "/v1/workers/register")) {
    if (post) return handle_register(t, req, res);
  } else if (!strcmp(u, "/v1/workers/heartbeat")) {
    if (post) return handle_heartbeat(t, req, res);
  } else if (!strcmp(u, "/v1/workers/report")) {
    if (post) return handle_report(t, req, res);
  } else if (!strcmp(u, "/v1/leases")) {
    if (post) return handle_lease(t, req, res);
  } else if (!strcmp(u, "/v1/leases/renew")) {
    if (post) return handle_renew(t, req, res, false);
  } else if (!strcmp(u, "/v1/leases/release")) {
    if (post) return handle_renew(t, req, res, true);
  } else {
    http_reply_error(res, 404, "not_found", "no endpoint %.200s on the tracker",
                     u);
    return;
  }
  http_reply_error(res, 405, "method_not_allowed",
                   "%.16s is not allowed on "
                   "%.200s",
                   req->method, u);
}

/* ---- lifecycle ---- */

int ts_tracker_start(const ts_tracker_options *opts, ts_tracker **out,
                     ts_error *err) {
  *out = NULL;
  ts_tracker_options o = opts ? *opts : ts_tracker_defaults();
  if (o.heartbeat_timeout_ms <= 0 || o.lease_ttl_ms <= 0)
    return TS_ERR(err, TS_EINVAL,
                  "tracker: heartbeat timeout and lease TTL "
                  "must be positive");
  ts_tracker *t = calloc(1, sizeof *t);
  if (!t) return TS_ERR(err, TS_ENOMEM, "out of memory");
  t->o = o;
  t->token = o.token && *o.token ? strdup(o.token) : NULL;
  t->o.token = t->token;
  t->o.bind = NULL; /* not kept */
  pthread_mutex_init(&t->mu, NULL);
  pthread_cond_init(&t->changed, NULL);
  /* A worker that missed a restart keeps heartbeating its old id: ids of
   * this incarnation must not match it. */
  if (getrandom(&t->boot, sizeof t->boot, 0) != sizeof t->boot)
    t->boot = (uint32_t)ts_now_ms() ^ (uint32_t)getpid() * 2654435761u;
  int rc = http_server_start(o.bind, o.port, t->token, &t->o.limits, "tracker",
                             handle, t, &t->srv, err);
  if (rc) {
    ts_tracker_stop(t);
    return rc;
  }
  if (pthread_create(&t->reaper, NULL, reaper_loop, t)) {
    ts_tracker_stop(t);
    return TS_ERR(err, TS_ENOMEM, "cannot start the tracker's reaper thread");
  }
  t->reaper_started = true;
  *out = t;
  return TS_OK;
}

int ts_tracker_port(const ts_tracker *t) { return http_server_port(t->srv); }

int ts_tracker_num_workers(const ts_tracker *t) {
  ts_tracker *m = (ts_tracker *)t;
  pthread_mutex_lock(&m->mu);
  int n = m->n_workers;
  pthread_mutex_unlock(&m->mu);
  return n;
}

void ts_tracker_stop(ts_tracker *t) {
  if (!t) return;
  pthread_mutex_lock(&t->mu);
  t->stopping = true;
  pthread_cond_broadcast(&t->changed);
  pthread_mutex_unlock(&t->mu);
  if (t->reaper_started) pthread_join(t->reaper, NULL);
  http_server_stop(t->srv);
  free(t->workers);
  free(t->leases);
  free(t->token);
  pthread_mutex_destroy(&t->mu);
  pthread_cond_destroy(&t->changed);
  free(t);
}
