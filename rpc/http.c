/*
 * http.c — the HTTP plumbing of rpc/: a server over libmicrohttpd that
 * enforces the bearer token (compared in constant time), the binding rule
 * (loopback unless a token is configured) and the size limits before any
 * handler sees a request, and answers JSON; a blocking client over libcurl
 * for JSON calls; and the address, token-file and status helpers of rpc.h.
 *
 * The server runs one thread per connection: a measure request blocks its
 * thread while it waits for the device, and other requests (info, status,
 * heartbeats) keep being served meanwhile. Connections are capped in all
 * and per client address (limits.max_connections,
 * max_connections_per_client): a connection over either cap has its request
 * answered 503 with Retry-After (MHD accepts a few beyond the cap for
 * that). A watchdog closes every connection whose request — headers and
 * body, counted from its first byte or from the end of the previous one —
 * is not complete within limits.request_deadline_ms, however slowly it
 * trickles in; the token is checked as soon as the headers are in. The
 * handler gets the connection's descriptor to notice a client that goes
 * away during a long measurement.
 */
#define _GNU_SOURCE /* POLLRDHUP */
#include "rpc/internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Seconds an idle connection is kept. */
#define IDLE_TIMEOUT_S 60
/* The largest reply a client accepts. */
#define MAX_REPLY_BYTES ((size_t)64 << 20)

/* Seconds a client over capacity has to send its headers (and get its
 * 503) before its connection is closed. */
#define OVER_CAPACITY_DEADLINE_S 5
/* Connections MHD accepts beyond the limit so that it can answer them 503
 * (past these it closes new connections without a reply). */
#define ANSWER_SLOTS(max) ((max) / 4 + 4)
/* How often the watchdog looks at the connections. */
#define WATCHDOG_PERIOD_MS 100

/* Where a connection's current request is. */
enum { CONN_RECEIVING, CONN_HANDLING };

/* One open connection, registered from its accept to its close. */
typedef struct conn_entry {
  int fd;
  char peer[64]; /* the client's numeric address */
  double start;  /* when its current request began (or the
                    connection fell idle) */
  int phase;     /* CONN_* */
  bool over;     /* over capacity: its request is answered 503 */
  bool closed;   /* the watchdog shut it down */
  struct conn_entry *next;
} conn_entry;

struct http_server {
  struct MHD_Daemon *daemon;
  int listen_fd;
  int port;
  char *token;
  ts_rpc_limits lim;
  http_handler_fn fn;
  void *ctx;
  char what[32];
  /* connections and the deadline watchdog */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  conn_entry *conns;
  int n_conns;
  bool stopping;
  bool watchdog_started;
  pthread_t watchdog;
};

/* Per-request state, from the headers to the completed body. */
typedef struct conn_state {
  unsigned char *body;
  size_t len, cap;
  bool responded; /* an early answer was queued: ignore the body */
} conn_state;

/* ---- addresses and tokens ---- */

bool ts_rpc_is_loopback(const char *addr) {
  if (!addr) return false;
  if (!strcmp(addr, "localhost")) return true;
  struct in_addr a4;
  struct in6_addr a6;
  if (inet_pton(AF_INET, addr, &a4) == 1)
    return (ntohl(a4.s_addr) >> 24) == 127;
  if (inet_pton(AF_INET6, addr, &a6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&a6)) return true;
    if (IN6_IS_ADDR_V4MAPPED(&a6)) return a6.s6_addr[12] == 127;
  }
  return false;
}

static bool host_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '.' || c == '-';
}

int ts_rpc_parse_hostport(const char *s, char *host, size_t host_size,
                          int *port, ts_error *err) {
  if (!s || !*s)
    return TS_ERR(err, TS_EINVAL, "empty address (expected HOST:PORT)");
  const char *colon;
  size_t hn;
  const char *hs;
  if (s[0] == '[') {
    const char *close = strchr(s, ']');
    if (!close || close[1] != ':')
      return TS_ERR(err, TS_EINVAL,
                    "bad address '%.100s' (expected [IPv6]:PORT)", s);
    hs = s + 1;
    hn = (size_t)(close - hs);
    colon = close + 1;
    for (size_t i = 0; i < hn; i++) {
      char c = hs[i];
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
            (c >= 'A' && c <= 'F') || c == ':' || c == '.'))
        return TS_ERR(err, TS_EINVAL, "bad IPv6 address in '%.100s'", s);
    }
  } else {
    colon = strrchr(s, ':');
    if (!colon)
      return TS_ERR(err, TS_EINVAL, "bad address '%.100s' (expected HOST:PORT)",
                    s);
    hs = s;
    hn = (size_t)(colon - s);
    for (size_t i = 0; i < hn; i++)
      if (!host_char(hs[i]))
        return TS_ERR(err, TS_EINVAL, "bad host name in '%.100s'", s);
  }
  if (hn == 0 || hn >= host_size || hn > 253)
    return TS_ERR(err, TS_EINVAL, "bad host in address '%.100s'", s);
  const char *p = colon + 1;
  long v = 0;
  if (!*p) return TS_ERR(err, TS_EINVAL, "missing port in '%.100s'", s);
  for (; *p; p++) {
    if (*p < '0' || *p > '9' || v > 65535)
      return TS_ERR(err, TS_EINVAL, "bad port in '%.100s'", s);
    v = v * 10 + (*p - '0');
  }
  if (v < 1 || v > 65535)
    return TS_ERR(err, TS_EINVAL, "port of '%.100s' is not in [1, 65535]", s);
  memcpy(host, hs, hn);
  host[hn] = 0;
  *port = (int)v;
  return TS_OK;
}

int ts_rpc_read_token_file(const char *path, char **token, ts_error *err) {
  *token = NULL;
  FILE *f = fopen(path, "r");
  if (!f)
    return TS_ERR(err, TS_EIO, "cannot read token file '%s': %s", path,
                  strerror(errno));
  char buf[1024];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *nl = strchr(buf, '\n');
  if (nl) *nl = 0;
  char *b = buf;
  while (*b == ' ' || *b == '\t') b++;
  size_t len = strlen(b);
  while (len && (b[len - 1] == ' ' || b[len - 1] == '\t' || b[len - 1] == '\r'))
    b[--len] = 0;
  if (len == 0 || len > 256)
    return TS_ERR(err, TS_EINVAL,
                  "token file '%s': the token must be 1 to 256 "
                  "characters on the first line",
                  path);
  for (size_t i = 0; i < len; i++)
    if (b[i] < 0x21 || b[i] > 0x7e)
      return TS_ERR(err, TS_EINVAL,
                    "token file '%s': the token has a space or "
                    "a non-printable character at column %zu",
                    path, i + 1);
  *token = strdup(b);
  if (!*token) return TS_ERR(err, TS_ENOMEM, "out of memory");
  return TS_OK;
}

/* ---- server ---- */

void http_reply_json(http_response *res, int status, cJSON *msg) {
  if (msg && !cJSON_GetObjectItemCaseSensitive(msg, "protocol"))
    cJSON_AddNumberToObject(msg, "protocol", TS_RPC_PROTOCOL);
  char *text = msg ? cJSON_PrintUnformatted(msg) : NULL;
  cJSON_Delete(msg);
  free(res->body);
  if (!text) {
    static const char oom[] =
        "{\"protocol\":1,\"error\":\"out of memory\",\"code\":\"internal\"}";
    res->body = strdup(oom);
    res->body_len = res->body ? strlen(res->body) : 0;
    res->status = 500;
  } else {
    res->body = text;
    res->body_len = strlen(text);
    res->status = status;
  }
  res->content_type = JSON_CONTENT_TYPE;
}

void http_reply_error(http_response *res, int status, const char *code,
                      const char *fmt, ...) {
  char text[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  cJSON *m = json_message();
  if (m) {
    cJSON_AddStringToObject(m, "error", text);
    cJSON_AddStringToObject(m, "code", code);
  }
  http_reply_json(res, status, m);
}

static enum MHD_Result queue(struct MHD_Connection *c, http_response *res,
                             bool close) {
  struct MHD_Response *r = MHD_create_response_from_buffer(
      res->body_len, res->body, MHD_RESPMEM_MUST_FREE);
  if (!r) {
    free(res->body);
    res->body = NULL;
    return MHD_NO;
  }
  res->body = NULL; /* owned by MHD now */
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                          res->content_type ? res->content_type
                                            : JSON_CONTENT_TYPE);
  if (res->status == 401)
    MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                            "Bearer realm=\"tessera\"");
  if (res->retry_after > 0) {
    char v[16];
    snprintf(v, sizeof v, "%d", res->retry_after);
    MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, v);
  }
  if (close) MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
  enum MHD_Result ok = MHD_queue_response(c, (unsigned)res->status, r);
  MHD_destroy_response(r);
  return ok;
}

/* Answers an error before the body is read (the connection then closes). */
static enum MHD_Result early(struct MHD_Connection *c, conn_state *st,
                             int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static enum MHD_Result early(struct MHD_Connection *c, conn_state *st,
                             int status, const char *code, const char *fmt,
                             ...) {
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  http_response res = {0};
  http_reply_error(&res, status, code, "%s", text);
  if (status == 503) res.retry_after = 1;
  st->responded = true;
  return queue(c, &res, true);
}

/* Adds up the size of the request's header lines. */
static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind,
                                    const char *key, const char *value) {
  (void)kind;
  size_t *total = cls;
  *total += strlen(key) + (value ? strlen(value) : 0) + 4; /* ": " + CRLF */
  return MHD_YES;
}

/* ---- connections: capacity and deadlines ---- */

static void peer_of(struct MHD_Connection *c, char *out, size_t size) {
  out[0] = 0;
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if (!ci || !ci->client_addr) return;
  const struct sockaddr *sa = ci->client_addr;
  if (sa->sa_family == AF_INET)
    inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out,
              (socklen_t)size);
  else if (sa->sa_family == AF_INET6)
    inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, out,
              (socklen_t)size);
}

/* Whether the client of connection fd has closed it (or half-closed). */
static bool peer_gone(int fd) {
  if (fd < 0) return true;
  struct pollfd pf = {fd, POLLRDHUP, 0};
  return poll(&pf, 1, 0) > 0 &&
         (pf.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

/* Registers a new connection and decides whether it is over capacity
 * (too many connections in all, or from its address); unregisters a
 * closed one. */
static void on_connection(void *cls, struct MHD_Connection *c,
                          void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
  http_server *s = cls;
  if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
    conn_entry *e = calloc(1, sizeof *e);
    if (!e) return; /* untracked: on_access refuses it */
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    e->fd = ci ? ci->connect_fd : -1;
    peer_of(c, e->peer, sizeof e->peer);
    e->start = ts_now_seconds();
    pthread_mutex_lock(&s->mu);
    /* A connection its client has closed counts no more, though the
     * server library may not have cleaned it up yet. */
    int same = 1, live = 1;
    for (conn_entry *o = s->conns; o; o = o->next) {
      if (o->closed || peer_gone(o->fd)) continue;
      live++;
      if (!strcmp(o->peer, e->peer)) same++;
    }
    e->over = live > s->lim.max_connections ||
              same > s->lim.max_connections_per_client;
    e->next = s->conns;
    s->conns = e;
    s->n_conns++;
    pthread_mutex_unlock(&s->mu);
    *socket_context = e;
  } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
    conn_entry *e = *socket_context;
    pthread_mutex_lock(&s->mu);
    for (conn_entry **p = &s->conns; *p; p = &(*p)->next)
      if (*p == e) {
        *p = e->next;
        s->n_conns--;
        break;
      }
    pthread_mutex_unlock(&s->mu);
    free(e);
    *socket_context = NULL;
  }
}

static conn_entry *entry_of(struct MHD_Connection *c) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return ci ? (conn_entry *)ci->socket_context : NULL;
}

/* Moves a connection's request to `phase`; false when the watchdog has
 * already closed it. */
static bool set_phase(http_server *s, conn_entry *e, int phase) {
  if (!e) return true;
  pthread_mutex_lock(&s->mu);
  bool open = !e->closed;
  e->phase = phase;
  if (phase == CONN_RECEIVING) e->start = ts_now_seconds();
  pthread_mutex_unlock(&s->mu);
  return open;
}

/* Closes every connection whose request (headers and body, counted from
 * its first byte or from the end of the previous request) is not in by
 * the deadline: a client that trickles bytes holds a slot for at most
 * that long, whatever its pace. A request being handled has no deadline
 * here (the measurement bounds itself). */
static void *watchdog_main(void *arg) {
  http_server *s = arg;
  pthread_mutex_lock(&s->mu);
  while (!s->stopping) {
    double now = ts_now_seconds();
    for (conn_entry *e = s->conns; e; e = e->next) {
      if (e->closed || e->phase == CONN_HANDLING || e->fd < 0) continue;
      double limit = s->lim.request_deadline_ms / 1000.0;
      if (e->over && limit > OVER_CAPACITY_DEADLINE_S)
        limit = OVER_CAPACITY_DEADLINE_S;
      if (now - e->start > limit) {
        e->closed = true;
        shutdown(e->fd, SHUT_RDWR); /* MHD sees the end and closes it */
      }
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += WATCHDOG_PERIOD_MS * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&s->cv, &s->mu, &ts);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c,
                                 const char *url, const char *method,
                                 const char *version, const char *upload,
                                 size_t *upload_size, void **con_cls) {
  (void)version;
  http_server *s = cls;
  conn_state *st = *con_cls;
  if (!st) {
    st = calloc(1, sizeof *st);
    if (!st) return MHD_NO;
    *con_cls = st;
    /* The headers are in: capacity, then the token, before any body. */
    conn_entry *e = entry_of(c);
    if (!e) return MHD_NO; /* not registered (out of memory) */
    if (e->over)
      return early(c, st, 503, "busy",
                   "%s: over capacity (%d connections, %d per client "
                   "address); retry later",
                   s->what, s->lim.max_connections,
                   s->lim.max_connections_per_client);
    /* MHD caps headers at its connection memory; this is the exact limit. */
    size_t header_bytes = strlen(method) + strlen(url) + 12;
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_header, &header_bytes);
    if (header_bytes > (size_t)s->lim.max_header_bytes)
      return early(c, st, 431, "too_large",
                   "request headers of %zu bytes exceed "
                   "the limit of %d bytes",
                   header_bytes, s->lim.max_header_bytes);
    if (s->token) {
      const char *auth = MHD_lookup_connection_value(
          c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
      if (!auth)
        return early(c, st, 401, "unauthorized",
                     "%s: this %s requires a bearer "
                     "token (Authorization: Bearer ...)",
                     url, s->what);
      bool ok =
          !strncmp(auth, "Bearer ", 7) && secret_equal(auth + 7, s->token);
      if (!ok)
        return early(c, st, 401, "unauthorized", "%s: wrong bearer token", url);
    }
    const char *proto =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Tessera-Protocol");
    if (proto && strcmp(proto, "1") != 0)
      return early(c, st, 400, "protocol_mismatch",
                   "protocol version mismatch: "
                   "the request says %.20s, this %s speaks %d",
                   proto, s->what, TS_RPC_PROTOCOL);
    const char *cl = MHD_lookup_connection_value(
        c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl) {
      char *end = NULL;
      errno = 0;
      unsigned long long n = strtoull(cl, &end, 10);
      if (errno || end == cl || (int64_t)n < 0 ||
          n > (unsigned long long)s->lim.max_body_bytes)
        return early(c, st, 413, "too_large",
                     "request body of %.30s bytes "
                     "exceeds the limit of %" PRId64 " bytes",
                     cl, s->lim.max_body_bytes);
    }
    return MHD_YES;
  }
  if (st->responded) {
    *upload_size = 0;
    return MHD_YES;
  }
  if (*upload_size) {
    size_t n = *upload_size;
    if ((int64_t)(st->len + n) > s->lim.max_body_bytes)
      return MHD_NO; /* a body without a declared length ran over: close */
    if (st->len + n > st->cap) {
      size_t cap = st->cap ? st->cap : 4096;
      while (cap < st->len + n) cap *= 2;
      if ((int64_t)cap > s->lim.max_body_bytes)
        cap = (size_t)s->lim.max_body_bytes;
      unsigned char *b = realloc(st->body, cap);
      if (!b) return MHD_NO;
      st->body = b;
      st->cap = cap;
    }
    memcpy(st->body + st->len, upload, n);
    st->len += n;
    *upload_size = 0;
    return MHD_YES;
  }
  http_request req;
  memset(&req, 0, sizeof req);
  req.method = method;
  req.url = url;
  req.body = st->body ? st->body : (const unsigned char *)"";
  req.body_len = st->len;
  req.content_type = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_TYPE);
  peer_of(c, req.peer, sizeof req.peer);
  /* The request is in: its handling has no receive deadline. */
  if (!set_phase(s, entry_of(c), CONN_HANDLING)) return MHD_NO;
  const union MHD_ConnectionInfo *fi =
      MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
  req.client_fd = fi ? fi->connect_fd : -1;
  http_response res = {0};
  res.status = 500;
  s->fn(s->ctx, &req, &res);
  if (!res.body) http_reply_error(&res, 500, "internal", "no response");
  st->responded = true;
  return queue(c, &res, false);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
  (void)toe;
  /* The next request on this connection has the deadline from now. */
  set_phase(cls, entry_of(c), CONN_RECEIVING);
  conn_state *st = *con_cls;
  if (st) {
    free(st->body);
    free(st);
  }
  *con_cls = NULL;
}

/* Stops the watchdog and frees what it watched over (after MHD). */
static void stop_watchdog(http_server *s) {
  if (s->watchdog_started) {
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->watchdog, NULL);
  }
  while (s->conns) {
    conn_entry *e = s->conns;
    s->conns = e->next;
    free(e);
  }
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
}

int http_server_start(const char *bind_addr, int port, const char *token,
                      const ts_rpc_limits *lim, const char *what,
                      http_handler_fn fn, void *ctx, http_server **out,
                      ts_error *err) {
  *out = NULL;
  if (!bind_addr || !*bind_addr) bind_addr = "127.0.0.1";
  if (port < 0 || port > 65535)
    return TS_ERR(err, TS_EINVAL, "%s: port %d is not in [0, 65535]", what,
                  port);
  if (lim->max_connections < 1 || lim->max_connections > 65536 ||
      lim->max_connections_per_client < 1 || lim->request_deadline_ms < 100)
    return TS_ERR(err, TS_EINVAL,
                  "%s: bad connection limits (%d connections in [1, 65536], "
                  "%d per client at least 1, a request deadline of %d ms at "
                  "least 100)",
                  what, lim->max_connections, lim->max_connections_per_client,
                  lim->request_deadline_ms);
  if (!ts_rpc_is_loopback(bind_addr) && !(token && *token))
    return TS_ERR(err, TS_EINVAL,
                  "%s: refusing to listen on the non-loopback "
                  "address %s without a token (--token-file): it would run "
                  "any code it is sent",
                  what, bind_addr);
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  socklen_t sl;
  const char *a = !strcmp(bind_addr, "localhost") ? "127.0.0.1" : bind_addr;
  struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
  struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
  if (inet_pton(AF_INET, a, &s4->sin_addr) == 1) {
    s4->sin_family = AF_INET;
    s4->sin_port = htons((uint16_t)port);
    sl = sizeof *s4;
  } else if (inet_pton(AF_INET6, a, &s6->sin6_addr) == 1) {
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons((uint16_t)port);
    sl = sizeof *s6;
  } else {
    return TS_ERR(err, TS_EINVAL,
                  "%s: bad bind address '%.100s' (a numeric "
                  "IPv4 or IPv6 address)",
                  what, bind_addr);
  }
  int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return TS_ERR(err, TS_EIO, "%s: socket: %s", what, strerror(errno));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, (struct sockaddr *)&ss, sl) || listen(fd, 128)) {
    int e = errno;
    close(fd);
    return TS_ERR(err, TS_EIO, "%s: cannot listen on %s:%d: %s", what,
                  bind_addr, port, strerror(e));
  }
  struct sockaddr_storage bound;
  socklen_t bl = sizeof bound;
  getsockname(fd, (struct sockaddr *)&bound, &bl);
  http_server *s = calloc(1, sizeof *s);
  if (!s) {
    close(fd);
    return TS_ERR(err, TS_ENOMEM, "out of memory");
  }
  s->listen_fd = fd;
  s->port = ntohs(bound.ss_family == AF_INET
                      ? ((struct sockaddr_in *)&bound)->sin_port
                      : ((struct sockaddr_in6 *)&bound)->sin6_port);
  s->token = token && *token ? strdup(token) : NULL;
  s->lim = *lim;
  s->fn = fn;
  s->ctx = ctx;
  snprintf(s->what, sizeof s->what, "%s", what);
  unsigned flags = MHD_USE_THREAD_PER_CONNECTION |
                   MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL;
  if (ss.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  if (pthread_create(&s->watchdog, NULL, watchdog_main, s) == 0)
    s->watchdog_started = true;
  size_t pool = (size_t)lim->max_header_bytes + 8192;
  if (s->watchdog_started)
    s->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, on_access, s, MHD_OPTION_LISTEN_SOCKET, fd,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, pool, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)(lim->max_connections + ANSWER_SLOTS(lim->max_connections)),
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)IDLE_TIMEOUT_S,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_END);
  if (!s->daemon) {
    close(fd);
    stop_watchdog(s);
    free(s->token);
    free(s);
    return TS_ERR(err, TS_EIO, "%s: cannot start the HTTP server on %s:%d",
                  what, bind_addr, port);
  }
  *out = s;
  return TS_OK;
}

int http_server_port(const http_server *s) { return s->port; }

void http_server_stop(http_server *s) {
  if (!s) return;
  MHD_stop_daemon(s->daemon); /* closes the listening socket too */
  stop_watchdog(s);
  free(s->token);
  free(s);
}

/* ---- client ---- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init_once(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

void http_global_init(void) { pthread_once(&curl_once, curl_init_once); }

size_t http_buf_write(char *p, size_t size, size_t n, void *ctx) {
  http_buf *b = ctx;
  size_t bytes = size * n;
  if (b->len + bytes > b->limit) {
    b->overflow = true;
    return 0; /* makes curl fail the transfer */
  }
  if (b->len + bytes + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + bytes + 1) cap *= 2;
    unsigned char *d = realloc(b->data, cap);
    if (!d) return 0;
    b->data = d;
    b->cap = cap;
  }
  memcpy(b->data + b->len, p, bytes);
  b->len += bytes;
  b->data[b->len] = 0;
  return bytes;
}

void http_buf_reset(http_buf *b) {
  free(b->data);
  memset(b, 0, sizeof *b);
  b->limit = MAX_REPLY_BYTES;
}

struct curl_slist *http_headers(const char *token, const char *content_type) {
  struct curl_slist *h = NULL, *t;
  char line[400];
  /* curl waits for "100 Continue" before large bodies unless told not to. */
  if (!(t = curl_slist_append(h, "Expect:"))) goto fail;
  h = t;
  if (!(t = curl_slist_append(h, "Tessera-Protocol: 1"))) goto fail;
  h = t;
  if (content_type) {
    snprintf(line, sizeof line, "Content-Type: %s", content_type);
    if (!(t = curl_slist_append(h, line))) goto fail;
    h = t;
  }
  if (token && *token) {
    snprintf(line, sizeof line, "Authorization: Bearer %s", token);
    if (!(t = curl_slist_append(h, line))) goto fail;
    h = t;
  }
  return h;
fail:
  curl_slist_free_all(h);
  return NULL;
}

int http_base_url(const char *hostport, char *out, size_t size, ts_error *err) {
  char host[256];
  int port = 0;
  int rc = ts_rpc_parse_hostport(hostport, host, sizeof host, &port, err);
  if (rc) return rc;
  if (strchr(host, ':'))
    snprintf(out, size, "http://[%s]:%d", host, port);
  else
    snprintf(out, size, "http://%s:%d", host, port);
  return TS_OK;
}

int http_client_open(http_client *c, const char *hostport, const char *token,
                     int connect_timeout_ms, ts_error *err) {
  memset(c, 0, sizeof *c);
  http_global_init();
  int rc = http_base_url(hostport, c->base, sizeof c->base, err);
  if (rc) return rc;
  c->curl = curl_easy_init();
  c->headers = http_headers(token, JSON_CONTENT_TYPE);
  if (!c->curl || !c->headers) {
    http_client_close(c);
    return TS_ERR(err, TS_ENOMEM, "cannot create an HTTP client");
  }
  c->connect_timeout_ms = connect_timeout_ms > 0 ? connect_timeout_ms : 2000;
  return TS_OK;
}

void http_client_close(http_client *c) {
  if (c->curl) curl_easy_cleanup(c->curl);
  curl_slist_free_all(c->headers);
  memset(c, 0, sizeof *c);
}

int http_client_json(http_client *c, const char *method, const char *path,
                     const cJSON *body, int timeout_ms, long *status,
                     cJSON **reply, ts_error *err) {
  *reply = NULL;
  *status = 0;
  char url[600];
  snprintf(url, sizeof url, "%s%s", c->base, path);
  char *text = body ? cJSON_PrintUnformatted(body) : NULL;
  if (body && !text) return TS_ERR(err, TS_ENOMEM, "out of memory");
  http_buf buf;
  memset(&buf, 0, sizeof buf);
  buf.limit = MAX_REPLY_BYTES;
  CURL *e = c->curl;
  curl_easy_reset(e);
  curl_easy_setopt(e, CURLOPT_URL, url);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http");
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->headers);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)c->connect_timeout_ms);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS,
                   (long)(timeout_ms > 0 ? timeout_ms : 10000));
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, http_buf_write);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &buf);
  curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
  if (text) {
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, text);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(text));
  } else if (!strcmp(method, "GET")) {
    curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, NULL);
  }
  CURLcode cc = curl_easy_perform(e);
  free(text);
  if (cc != CURLE_OK) {
    free(buf.data);
    return TS_ERR(err, TS_EIO, "%s%s: %s", c->base, path,
                  buf.overflow ? "reply too large" : curl_easy_strerror(cc));
  }
  curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, status);
  if (buf.len) {
    cJSON *r = cJSON_ParseWithLength((const char *)buf.data, buf.len);
    if (r && json_check_protocol(r, NULL) == TS_OK)
      *reply = r;
    else
      cJSON_Delete(r);
  }
  free(buf.data);
  return TS_OK;
}

const char *json_error_text(const cJSON *reply) {
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(reply, "error");
  return cJSON_IsString(e) && e->valuestring ? e->valuestring : "";
}

const char *json_error_code(const cJSON *reply) {
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(reply, "code");
  return cJSON_IsString(e) && e->valuestring ? e->valuestring : "";
}

int ts_rpc_get_json(const char *hostport, const char *path, const char *token,
                    int timeout_ms, char **json, ts_error *err) {
  *json = NULL;
  if (!path || path[0] != '/')
    return TS_ERR(err, TS_EINVAL, "bad path '%s'", path ? path : "");
  http_client c;
  int rc = http_client_open(&c, hostport, token, 2000, err);
  if (rc) return rc;
  long status = 0;
  cJSON *reply = NULL;
  rc =
      http_client_json(&c, "GET", path, NULL, timeout_ms, &status, &reply, err);
  http_client_close(&c);
  if (rc) return rc;
  if (status != 200 || !reply) {
    rc = TS_ERR(err, status == 401 ? TS_EINVAL : TS_EIO, "%s%s: HTTP %ld%s%s",
                hostport, path, status, reply ? ": " : "",
                reply ? json_error_text(reply) : " (not a protocol 1 reply)");
    cJSON_Delete(reply);
    return rc;
  }
  *json = cJSON_Print(reply);
  cJSON_Delete(reply);
  if (!*json) return TS_ERR(err, TS_ENOMEM, "out of memory");
  return TS_OK;
}
