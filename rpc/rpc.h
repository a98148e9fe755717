/*
 * rpc.h — the public interface of tessera's measurement service: the
 * measure result every candidate gets, the runner that measures a batch of
 * built candidates (embedded local pool or remote workers, one interface),
 * the worker (an HTTP server that measures what it is sent), the tracker (a
 * registry of workers that leases them to runners fairly), and the small
 * helpers the command line needs (token files, address checks, status).
 *
 * Protocol v1 is HTTP/1.1 with JSON control messages and binary bodies for
 * artifacts (a length-prefixed JSON header followed by the artifact bytes);
 * docs/rpc.md is its specification. Every candidate a runner is given gets
 * exactly one ts_measure_result: a crashing or hanging kernel is a
 * run_error/timeout result measured in a forked child (the worker stays up),
 * and a candidate whose worker vanished is re-sent to another worker a
 * bounded number of times before it is reported as worker_lost.
 *
 * Threads and processes: measurements on one device run one at a time, each
 * in its own process forked from a single-threaded helper process the device
 * starts when it is created (see docs/rpc.md, "Isolation"); create runners
 * and workers before starting threads that use LLVM where possible.
 */
#ifndef TESSERA_RPC_H
#define TESSERA_RPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codegen/codegen.h"
#include "runtime/runtime.h"
#include "tir/tir.h"

/* The protocol version every message carries ("protocol": 1). */
#define TS_RPC_PROTOCOL 1

/* ========================================================================
 * Measure configuration and results (rpc/protocol.c)
 * ======================================================================== */

/* The most repeats one measurement may ask for. */
#define TS_MEASURE_MAX_REPEAT 64
/* The longest error text a result keeps (longer texts are cut). */
#define TS_MEASURE_ERROR_MAX 1024
/* The buffer of a result's CPU list (ts_measure_result.cpus). */
#define TS_MEASURE_CPUS_MAX 256

typedef enum ts_measure_status {
  TS_MEASURE_OK = 0,           /* measured; output matched the reference */
  TS_MEASURE_BUILD_ERROR = 1,  /* the artifact could not be loaded/linked */
  TS_MEASURE_RUN_ERROR = 2,    /* the kernel failed or crashed */
  TS_MEASURE_TIMEOUT = 3,      /* the candidate exceeded its time limit */
  TS_MEASURE_WRONG_RESULT = 4, /* output differs from the reference */
  TS_MEASURE_WORKER_LOST = 5,  /* no worker could measure it */
} ts_measure_status;

/* "ok", "build_error", "run_error", "timeout", "wrong_result",
 * "worker_lost" ("?" for other values). */
const char *ts_measure_status_name(ts_measure_status s);
/* The status named s; TS_EINVAL for an unknown name. */
int ts_measure_status_parse(const char *s, ts_measure_status *out);

/* How candidates of one batch are measured. */
typedef struct ts_measure_config {
  ts_eval_config eval; /* number, repeat (<= TS_MEASURE_MAX_REPEAT),
                          min_repeat_ms, flush_cache, warmup */
  int timeout_ms;      /* wall-clock limit of one candidate, counted from
                          the start of its process (not from queueing) */
  uint64_t seed;       /* seeded inputs (runtime.h ts_rt_args_create) */
  int threads;         /* runtime threads of a CPU kernel; 0 = all cores */
} ts_measure_config;
/* The time limit of computing a reference's outputs for measurements under
 * c: max(10 min, 4 x c->timeout_ms), at most an hour. A reference is the
 * unscheduled workload, which runs at a few hundred MFLOP/s on one core: a
 * 2048^3 matmul takes over a minute. */
int ts_measure_reference_limit_ms(const ts_measure_config *c);

/* eval number 1, repeat 3, min_repeat_ms 40, warmup 1, no flush; timeout
 * 10 s; seed 1; threads 0. */
ts_measure_config ts_measure_config_default(void);
/* Checks every field (TS_EINVAL naming the field and its range). */
int ts_measure_config_check(const ts_measure_config *c, ts_error *err);
/* A record's measurement context as compact JSON (malloc'd; NULL when out
 * of memory): the evaluator settings, threads and timeout of c, and the
 * CPU set of the measuring process (`cpus`, ts_measure_result.cpus; null
 * when NULL or ""). The same settings, with the seed, are what a runner
 * sends a worker (docs/rpc.md). */
char *ts_measure_context_json(const ts_measure_config *c, const char *cpus);

/* The outcome of one candidate. A plain value (no pointers). */
typedef struct ts_measure_result {
  ts_measure_status status;
  int n_seconds;                         /* repeats measured (status ok) */
  double seconds[TS_MEASURE_MAX_REPEAT]; /* seconds per run, per repeat */
  int number;                            /* runs per repeat in the end */
  double run_ms;      /* wall time of the candidate's process */
  double started_at;  /* CLOCK_MONOTONIC seconds on the measuring host */
  double finished_at; /* when its process was reaped (same clock) */
  int attempts;       /* times it was dispatched (1 unless retried) */
  char worker[128];   /* "embedded", or the worker's HOST:PORT */
  char error[TS_MEASURE_ERROR_MAX]; /* "" for ok */
  /* The CPUs the measuring process could run on (its affinity, which a
   * taskset or cpuset cgroup narrows), as ranges: "0-3", "0,2-3". "" when
   * unknown: nothing ran (build_error, worker_lost), a worker that does not
   * report it, or a list longer than the buffer. */
  char cpus[TS_MEASURE_CPUS_MAX];
} ts_measure_result;

/* The mean of r's seconds (0 when there are none). */
double ts_measure_result_mean(const ts_measure_result *r);

/* Limits a worker or tracker enforces on requests (413 or 400 beyond). */
typedef struct ts_rpc_limits {
  int64_t max_body_bytes;         /* one request body (256 MiB) */
  int64_t max_artifact_bytes;     /* one artifact's bytes (64 MiB) */
  int64_t max_json_bytes;         /* the JSON part of a request (4 MiB) */
  int max_header_bytes;           /* request line + headers (16 KiB) */
  int max_candidates;             /* candidates per measure request (1024) */
  int max_references;             /* reference artifacts a worker keeps (64) */
  int max_connections;            /* concurrent connections (64); beyond, 503 */
  int max_connections_per_client; /* from one client address (8) */
  int request_deadline_ms;        /* to receive one request's headers and body,
                                     idle time before it included (30000) */
} ts_rpc_limits;

ts_rpc_limits ts_rpc_limits_default(void);

/* The argument specs of a built kernel (ts_rt_args_create takes them): one
 * per artifact argument, outputs marked. A new array (free()), NULL when out
 * of memory. */
ts_rt_arg_spec *ts_artifact_arg_specs(const ts_artifact *a);

/* ========================================================================
 * Runner: measures a batch of candidates (rpc/runner.c and one file per
 * implementation: runner_embedded.c, runner_rpc.c)
 * ======================================================================== */

typedef struct ts_runner ts_runner;

/* The operations of one runner implementation. */
typedef struct ts_runner_ops {
  const char *name; /* "embedded", "rpc" */
  int (*set_reference)(ts_runner *r, const char *id, ts_artifact *reference,
                       ts_error *err);
  int (*measure)(ts_runner *r, const ts_measure_config *cfg,
                 const char *reference_id, ts_artifact *const *candidates,
                 int n, ts_measure_result *results, ts_error *err);
  void (*destroy)(ts_runner *r);
} ts_runner_ops;

/* Every implementation's handle starts with this. */
struct ts_runner {
  const ts_runner_ops *ops;
};

/* Registers `reference` (a cpu_object: the unscheduled workload) under id
 * (1 to 64 characters of [A-Za-z0-9._-]; the workload's hash is a good
 * choice). The runner retains the artifact; registering the same id again
 * replaces it. Candidates measured with this id have their outputs compared
 * with the reference's on the same seeded inputs (computed once per worker
 * and seed). TS_EINVAL for a bad id or a reference that is not a
 * cpu_object. */
int ts_runner_set_reference(ts_runner *r, const char *id,
                            ts_artifact *reference, ts_error *err);

/* Measures candidates[0, n) under cfg and fills results[0, n): exactly one
 * result per candidate, in candidate order, whatever happens to workers.
 * reference_id (NULL: no correctness check) must have been registered with
 * ts_runner_set_reference. A NULL candidate gets build_error. Returns TS_OK
 * when every result is filled; a bad request (a bad config, an unknown
 * reference id, n < 0) is TS_EINVAL/TS_ENOTFOUND with nothing measured and
 * every result set to worker_lost with the reason. Calls on one runner are
 * serialized (use one runner per concurrent job). */
int ts_runner_measure(ts_runner *r, const ts_measure_config *cfg,
                      const char *reference_id, ts_artifact *const *candidates,
                      int n, ts_measure_result *results, ts_error *err);
/* The implementation's name ("embedded", "rpc"). */
const char *ts_runner_name(const ts_runner *r);
/* Stops the runner and frees it (NULL is a no-op). */
void ts_runner_destroy(ts_runner *r);

/* Where and how a device runs candidates (embedded pool and worker). */
typedef struct ts_device_options {
  const char *device;         /* "cpu" or "cuda:N" (default "cpu") */
  int threads;                /* runtime threads when a request says 0; 0 = all
                                 online cores */
  int64_t memory_limit_bytes; /* address space a candidate's process may
                                 add to what it starts with (8 GiB) */
  bool seccomp; /* system-call filter in CPU measuring children (true;
                   turn off only to debug a kernel the filter stops) */
} ts_device_options;

ts_device_options ts_device_defaults(void);

/* The embedded default: an in-process local pool of one device (measuring
 * one candidate at a time, so CPU measurements never overlap), no network.
 * On success *out is a new runner the caller destroys with
 * ts_runner_destroy. Errors: a bad device string (TS_EINVAL), the helper
 * process could not start (TS_EIO). */
int ts_runner_embedded_create(const ts_device_options *o, ts_runner **out,
                              ts_error *err);

/* The remote runner: leases workers of `key` from a tracker (or uses a
 * fixed list of worker addresses), sends each worker chunks of the batch in
 * parallel over HTTP, and re-sends the candidates of a worker that failed or
 * vanished to other workers (at most max_attempts dispatches each, then
 * worker_lost with the last failure as the error). */
typedef struct ts_rpc_runner_options {
  const char *tracker;        /* HOST:PORT, or NULL to use `workers` */
  const char *key;            /* device key to lease (with a tracker) */
  const char *const *workers; /* HOST:PORT of workers (without tracker) */
  int n_workers;
  const char *token;      /* bearer token, or NULL */
  const char *name;       /* shown in tracker status ("runner-PID") */
  int priority;           /* lease priority, higher first (0) */
  int max_workers;        /* workers leased at most (16) */
  int chunk;              /* candidates per request at most (8) */
  int max_attempts;       /* dispatches of a candidate (3) */
  int connect_timeout_ms; /* (2000) */
  int request_timeout_ms; /* per request; 0 = from the config (0) */
  int lease_wait_ms;      /* wait for a usable worker (30000) */
} ts_rpc_runner_options;

ts_rpc_runner_options ts_rpc_runner_defaults(void);

/* Creates the remote runner (no connection is made yet). The strings are
 * copied. TS_EINVAL for a malformed address, a missing key with a tracker,
 * no tracker and no workers, or an out-of-range option. Free with
 * ts_runner_destroy. */
int ts_runner_rpc_create(const ts_rpc_runner_options *o, ts_runner **out,
                         ts_error *err);

/* ========================================================================
 * Worker (rpc/worker.c)
 * ======================================================================== */

typedef struct ts_worker ts_worker;

typedef struct ts_worker_options {
  const char *bind;      /* address to listen on ("127.0.0.1") */
  int port;              /* 0: any free port */
  const char *key;       /* device key (default: from the device) */
  const char *advertise; /* HOST:PORT runners use to reach this worker
                            (default: the bind address, or the address the
                            tracker sees when bound to a wildcard) */
  const char *tracker;   /* HOST:PORT to register with, or NULL */
  const char *token;     /* bearer token required on every request, or
                            NULL; also sent to the tracker */
  int heartbeat_ms;      /* heartbeat period with a tracker (1000) */
  ts_device_options device;
  ts_rpc_limits limits;
} ts_worker_options;

ts_worker_options ts_worker_defaults(void);

/* Starts a worker: probes the device, starts its measurement process, the
 * HTTP server and (with a tracker) the registration thread. Refuses to bind
 * a non-loopback address without a token (TS_EINVAL). On success *out is a
 * running worker the caller stops with ts_worker_stop; on failure nothing
 * is left running. A device that turns out unusable (no CUDA driver) still
 * starts: /v1/info says why and measure requests answer 503. */
int ts_worker_start(const ts_worker_options *o, ts_worker **out, ts_error *err);
/* The port listened on. */
int ts_worker_port(const ts_worker *w);
/* The device key (owned by w). */
const char *ts_worker_key(const ts_worker *w);
/* The /v1/info document as of the start, without the live counters
 * (owned by w). */
const char *ts_worker_info_json(const ts_worker *w);
/* Candidates measured so far. */
int64_t ts_worker_measurements(const ts_worker *w);
/* Whether the last contact with the tracker succeeded (registered). */
bool ts_worker_registered(const ts_worker *w);
/* Stops the server, the tracker thread and the measurement process, and
 * frees w (NULL is a no-op). */
void ts_worker_stop(ts_worker *w);

/* ========================================================================
 * Tracker (rpc/tracker.c)
 * ======================================================================== */

typedef struct ts_tracker ts_tracker;

typedef struct ts_tracker_options {
  const char *bind;         /* "127.0.0.1" */
  int port;                 /* 0: any free port */
  const char *token;        /* bearer token, or NULL */
  int heartbeat_timeout_ms; /* silent workers are evicted after (5000) */
  int lease_ttl_ms;         /* unrenewed leases expire after (15000) */
  ts_rpc_limits limits;
} ts_tracker_options;

ts_tracker_options ts_tracker_defaults(void);

/* Starts a tracker (same binding rules as the worker). Stop with
 * ts_tracker_stop. */
int ts_tracker_start(const ts_tracker_options *o, ts_tracker **out,
                     ts_error *err);
int ts_tracker_port(const ts_tracker *t);
/* Workers currently registered (any key). */
int ts_tracker_num_workers(const ts_tracker *t);
void ts_tracker_stop(ts_tracker *t);

/* ========================================================================
 * Client helpers (rpc/http.c)
 * ======================================================================== */

/* GETs `path` ("/v1/status", "/v1/info") from HOST:PORT with the token (may
 * be NULL) and checks the reply is JSON of protocol 1. On success *json is
 * the body (caller frees). Errors name the address and the HTTP status or
 * the connection failure. */
int ts_rpc_get_json(const char *hostport, const char *path, const char *token,
                    int timeout_ms, char **json, ts_error *err);

/* Reads a bearer token from a file: the first line, surrounding white space
 * removed; 1 to 256 printable characters without spaces. *token is
 * malloc'd. */
int ts_rpc_read_token_file(const char *path, char **token, ts_error *err);

/* Whether addr (a numeric IPv4/IPv6 address or "localhost") is a loopback
 * address. */
bool ts_rpc_is_loopback(const char *addr);

/* Splits "HOST:PORT" ("[v6]:PORT" for IPv6) into host (without brackets,
 * at most host_size - 1 bytes) and port (1..65535). TS_EINVAL naming what is
 * wrong. */
int ts_rpc_parse_hostport(const char *s, char *host, size_t host_size,
                          int *port, ts_error *err);

#endif /* TESSERA_RPC_H */
