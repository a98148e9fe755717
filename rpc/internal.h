/*
 * internal.h — declarations shared by the files of rpc/ only: the wire
 * format of binary bodies and the JSON encoders/decoders of protocol v1
 * (protocol.c), the device executor that measures candidates in forked
 * processes (executor.c), and the HTTP server and client wrappers over
 * libmicrohttpd and libcurl (http.c).
 */
#ifndef TESSERA_RPC_INTERNAL_H
#define TESSERA_RPC_INTERNAL_H

#include "rpc/rpc.h"
#include "tir/alloc.h"

#include <cJSON.h>
#include <curl/curl.h>
#include <stdarg.h>
#include <sys/types.h>

/* ========================================================================
 * Protocol (protocol.c)
 * ======================================================================== */

/* A binary body: the 4 magic bytes, the JSON header's length as a 32-bit
 * big-endian integer, the JSON header (UTF-8), then the payload; artifacts
 * in the header name their bytes as {"offset", "length"} in the payload. */
#define WIRE_MAGIC "TSB1"
#define WIRE_PREFIX 8
#define WIRE_CONTENT_TYPE "application/x-tessera"
#define JSON_CONTENT_TYPE "application/json"

/* The longest reference id (ids are [A-Za-z0-9._-]{1,64}). */
#define REF_ID_MAX 64
/* The longest worker or lease id a tracker hands out. */
#define ID_MAX 40

/* Collects the payload while a header is built. The blobs are borrowed. */
typedef struct wire_writer {
  const unsigned char **blobs;
  size_t *sizes;
  int n, cap;
  size_t payload_len;
} wire_writer;

/* The JSON description of artifact a ({"kind", "entry", "args", "bytes",
 * and "launch" for ptx}), its bytes appended to w. NULL when memory runs
 * out. */
cJSON *artifact_to_json(const ts_artifact *a, wire_writer *w);
/* Assembles magic + length + header (printed unformatted) + payload into a
 * malloc'd *out. Frees w's arrays (not the blobs). */
int wire_finish(wire_writer *w, const cJSON *head, unsigned char **out,
                size_t *out_len, ts_error *err);
void wire_writer_free(wire_writer *w);

/* Splits a binary body and parses its JSON header (checking the protocol
 * version). Errors are TS_EINVAL with the reason (bad magic, a header length
 * past the body or over lim->max_json_bytes, malformed JSON with its byte
 * offset, a protocol mismatch). *head is the caller's (cJSON_Delete). */
int wire_parse(const unsigned char *body, size_t len, const ts_rpc_limits *lim,
               cJSON **head, const unsigned char **payload, size_t *payload_len,
               ts_error *err);
/* Parses a JSON body and checks its protocol version; same errors. */
int json_parse_message(const char *body, size_t len, const ts_rpc_limits *lim,
                       cJSON **root, ts_error *err);

/* Decodes an artifact described by j (as artifact_to_json writes it) whose
 * bytes lie in payload; `where` names it in errors ("candidates[3]").
 * Validates every field and size against lim. *out is a new artifact. */
int artifact_from_json(const cJSON *j, const char *where,
                       const unsigned char *payload, size_t payload_len,
                       const ts_rpc_limits *lim, ts_artifact **out,
                       ts_error *err);

/* A decoded POST /v1/measure body. */
typedef struct measure_request {
  ts_measure_config cfg;
  const char *reference;   /* NULL: no correctness check; points into head */
  int n;                   /* candidates, 1 to lim->max_candidates */
  ts_artifact **artifacts; /* n, owned */
  int64_t *ids;            /* n, distinct */
  cJSON *head;             /* the parsed header, owned */
} measure_request;

/* Decodes a measure request body (the worker's decoder, also the fuzz
 * target's): the frame, the config, the reference id, every candidate's id
 * and artifact, each checked against lim. TS_EINVAL (TS_ENOMEM for a size
 * over a limit) naming the field; on failure *out holds nothing. Free with
 * measure_request_clear. */
int measure_request_decode(const unsigned char *body, size_t len,
                           const ts_rpc_limits *lim, measure_request *out,
                           ts_error *err);
void measure_request_clear(measure_request *r);

cJSON *config_to_json(const ts_measure_config *c);
/* Fields absent from j keep the defaults; present ones are range-checked. */
int config_from_json(const cJSON *j, ts_measure_config *c, ts_error *err);
cJSON *result_to_json(const ts_measure_result *r, int64_t id);
/* Decodes a result from a worker; a worker may not report worker_lost. */
int result_from_json(const cJSON *j, ts_measure_result *r, int64_t *id,
                     ts_error *err);

/* An object {"protocol": 1}; NULL when memory runs out. */
cJSON *json_message(void);
/* Checks root is an object whose "protocol" is TS_RPC_PROTOCOL. */
int json_check_protocol(const cJSON *root, ts_error *err);
/* Field getters: a missing optional field leaves *out unchanged; a wrong
 * type or a value out of [lo, hi] is TS_EINVAL naming `where`.name. */
int json_get_int(const cJSON *obj, const char *where, const char *name,
                 int64_t lo, int64_t hi, bool required, int64_t *out,
                 ts_error *err);
int json_get_str(const cJSON *obj, const char *where, const char *name,
                 size_t max_len, bool required, const char **out,
                 ts_error *err);
int json_get_bool(const cJSON *obj, const char *where, const char *name,
                  bool required, bool *out, ts_error *err);

/* Whether id is a valid reference id. */
bool ref_id_valid(const char *id);
/* Fills r with status and a formatted error text (other fields zeroed). */
void result_set(ts_measure_result *r, ts_measure_status status, const char *fmt,
                ...) __attribute__((format(printf, 3, 4)));
/* Whether s is a non-empty CPU list as results carry it (digits, ',' and
 * '-' only). */
bool cpus_valid(const char *s);
/* The monotonic clock is tir's (ts_now_seconds, ts_now_ms); these are
 * executor.c's older names for it. */
static inline double mono_seconds(void) { return ts_now_seconds(); }
static inline int64_t mono_ms(void) { return ts_now_ms(); }
/* Constant-time comparison of two strings (time depends only on the
 * length of `want`). */
bool secret_equal(const char *got, const char *want);

/* ========================================================================
 * Device executor (executor.c)
 * ======================================================================== */

/* A parsed device string. */
typedef struct device_spec {
  bool cuda;
  int index; /* cuda:N */
} device_spec;

int device_parse(const char *s, device_spec *d, ts_error *err);

/* One device: a single-threaded helper process forked at creation, which
 * forks one child per measurement; measurements are serialized in arrival
 * order. Thread safe. */
typedef struct executor executor;

int executor_create(const ts_device_options *o, int max_references,
                    executor **out, ts_error *err);
void executor_destroy(executor *ex);
/* Makes every measurement in progress or waiting end at once (run_error)
 * and refuses new ones; executor_destroy must still be called. */
void executor_shutdown(executor *ex);
/* Whether executor_shutdown was called. */
bool executor_stopping(executor *ex);
/* Stores (retains) a reference artifact under id, replacing an older one;
 * evicts the least recently used beyond max_references. TS_EINVAL when the
 * artifact is not a cpu_object. */
int executor_put_reference(executor *ex, const char *id, ts_artifact *a,
                           ts_error *err);
bool executor_has_reference(executor *ex, const char *id);
/* Measures one candidate (waiting for its turn) and fills *res; never
 * fails otherwise (problems are results). An unknown ref_id is a
 * run_error. watch_fd (-1: none) is a client connection: when it hangs up
 * before or during the measurement, the measurement is cancelled (its
 * process group killed) and the result is a run_error saying so. */
void executor_measure(executor *ex, const ts_measure_config *cfg,
                      const char *ref_id, const ts_artifact *a, int watch_fd,
                      ts_measure_result *res);
/* CUDA device properties, probed in a child process (the helper itself
 * never initializes CUDA, which does not survive fork). */
int executor_cuda_info(executor *ex, ts_cuda_device_info *info, ts_error *err);
int64_t executor_measurements(executor *ex);
const device_spec *executor_device(const executor *ex);

/* ========================================================================
 * The measuring child's sandbox (sandbox.c)
 * ======================================================================== */

/* The descriptor a sandboxed child writes its result to. */
#define SANDBOX_RESULT_FD 3

typedef struct sandbox_limits {
  int64_t memory_bytes; /* address space on top of the child's start (0:
                           none) */
  int cpu_seconds;      /* CPU time of all its threads (0: none) */
  int threads;          /* runtime threads it will start */
  bool filter;          /* install the system-call filter */
} sandbox_limits;

/* Confines the calling process, a single-threaded child just forked by the
 * helper: its own process group, result_fd moved to SANDBOX_RESULT_FD and
 * every other descriptor closed (0-2 become /dev/null), the limits of l,
 * and (l->filter) the seccomp filter. Returns SANDBOX_RESULT_FD, or -1 with
 * the reason in why (the process is then partly confined and must only
 * report and exit). */
int sandbox_enter(int result_fd, const sandbox_limits *l, char *why,
                  size_t size);
/* A child stopped at a forbidden system call exits with this status, after
 * writing a run_error whose text is SANDBOX_TRAP_TEXT and the call's
 * number. */
#define SANDBOX_TRAP_EXIT 97
#define SANDBOX_TRAP_TEXT "stopped by the sandbox: forbidden system call"
/* The result of such a child into r: the call's number and name from rep
 * (total bytes were read), or a text saying the number was not reported
 * (the candidate wrote on the result pipe first). */
void sandbox_trapped(const ts_measure_result *rep, size_t total,
                     ts_measure_result *r);
/* Kills process group pgid and reaps the members that are the caller's
 * children (waiting at most a second). */
void sandbox_kill_group(pid_t pgid);
/* Whether r, read from a child measuring with `repeat` repeats (0 for a
 * reference run), is well-formed: a status a child may report, n_seconds
 * equal to repeat for ok (0 otherwise), finite non-negative seconds, a
 * number in range, terminated strings (unprintable bytes replaced), an
 * error text for a failure. Clears the fields the helper fills in. On
 * false, why says what is wrong. */
bool sandbox_result_check(ts_measure_result *r, int repeat, char *why,
                          size_t size);

/* ========================================================================
 * HTTP server and client (http.c)
 * ======================================================================== */

typedef struct http_request {
  const char *method;
  const char *url;
  const unsigned char *body;
  size_t body_len;
  const char *content_type; /* NULL when absent */
  char peer[64];            /* the client's numeric address */
  int client_fd;            /* the connection (poll it for a hang-up only) */
} http_request;

typedef struct http_response {
  int status;
  char *body; /* malloc'd */
  size_t body_len;
  const char *content_type;
  int retry_after; /* seconds, sent as Retry-After when > 0 */
} http_response;

typedef void (*http_handler_fn)(void *ctx, const http_request *req,
                                http_response *res);

typedef struct http_server http_server;

/* Listens on bind:port (port 0: any) and serves every request with fn after
 * checking the bearer token (when set) and the size limits; `what` names
 * the server in errors ("worker"). Refuses a non-loopback bind address
 * without a token. */
int http_server_start(const char *bind, int port, const char *token,
                      const ts_rpc_limits *lim, const char *what,
                      http_handler_fn fn, void *ctx, http_server **out,
                      ts_error *err);
int http_server_port(const http_server *s);
void http_server_stop(http_server *s);

/* Answers msg (taken; "protocol" is added when missing). */
void http_reply_json(http_response *res, int status, cJSON *msg);
/* Answers {"protocol": 1, "error": TEXT, "code": code}. */
void http_reply_error(http_response *res, int status, const char *code,
                      const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* A growing response buffer with a size limit (curl write callback). */
typedef struct http_buf {
  unsigned char *data;
  size_t len, cap, limit;
  bool overflow;
} http_buf;

size_t http_buf_write(char *p, size_t size, size_t n, void *ctx);
void http_buf_reset(http_buf *b);

/* A blocking client for one server. */
typedef struct http_client {
  CURL *curl;
  char base[300]; /* "http://HOST:PORT" */
  struct curl_slist *headers;
  int connect_timeout_ms;
} http_client;

/* Calls curl_global_init once per process. */
void http_global_init(void);
/* The request headers every client sends: the token and no Expect. */
struct curl_slist *http_headers(const char *token, const char *content_type);
/* "http://HOST:PORT" from a validated HOST:PORT. */
int http_base_url(const char *hostport, char *out, size_t size, ts_error *err);

int http_client_open(http_client *c, const char *hostport, const char *token,
                     int connect_timeout_ms, ts_error *err);
void http_client_close(http_client *c);
/* Sends method path with an optional JSON body (NULL: none) and parses the
 * JSON reply. Returns TS_OK with *status and *reply set (the reply of any
 * status, parsed when it is JSON of protocol 1, else NULL); TS_EIO for a
 * transport failure (named with the address). */
int http_client_json(http_client *c, const char *method, const char *path,
                     const cJSON *body, int timeout_ms, long *status,
                     cJSON **reply, ts_error *err);
/* The "error" text of a reply, or "" */
const char *json_error_text(const cJSON *reply);
/* The "code" of a reply, or "" */
const char *json_error_code(const cJSON *reply);

#endif /* TESSERA_RPC_INTERNAL_H */
